/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_semi: SEMI (SEnsitivity to MIsmatch timing, seed paper 003), the
 * "LU pattern" of NPB LU between two MPI ranks with MPI_Send / MPI_Recv.
 * The MPI twin of fabtests-ext/ftx_bench_semi.c: same pattern, options and
 * output, with "prov=" replaced by "label=" (-l LABEL).  A benchmark, not
 * a test: it prints figures and only fails (exit 1) when a message
 * arrives wrong or MPI reports an error.
 *
 * Each outer iteration has two phases of `inner` messages each:
 *
 *	phase A:  rank 0: inner x { compute; MPI_Send }
 *	          rank 1: inner x { MPI_Recv; compute }
 *	phase B:  the same with the roles swapped.
 *
 * The computation is a busy loop calibrated at start-up to a unit of -u
 * microseconds; a level (-L, in units) of it runs at every inner step on
 * both ranks.  It sits between a send and the matching receive, so an
 * eagerly sent message reaches the receiver while it computes.  For each
 * message size and level the program measures each rank's total time in
 * MPI_Recv, in MPI_Send and computing, and reports the SEMI slope: the
 * least-squares slope of the receive time against the computation time
 * (per rank, both averaged over the two ranks; seconds per second).  The
 * pattern itself makes a rank wait about two computation steps per outer
 * iteration while it computes 2 x inner, so the ideal ("floor") is
 * 1/inner; more means that messages wait for a rank to call into MPI.
 *
 * usage: mpirun -np 2 bench_semi [-l LABEL] [-t SEC] [-o N] [-i N] [-w N]
 *                                [-m LIST] [-u US] [-L LIST] [-r N] [-T SEC]
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES  16
#define MAX_LEVELS 16
#define MAX_REPS   9
#define TAG_BASE   1000
#define STAMP_K	   0xa5a5c3c3e1e10f0full

static size_t sizes[MAX_SIZES] = {4000, 10240, 65536};
static int nsizes = 3;
static int levels[MAX_LEVELS] = {0, 1, 2, 4, 8};
static int nlevels = 5;
static int outer = 20, inner = 60, warmup = 2, reps = 3;
static double unit_us = 50.0;
static double budget_s = 20.0;
static const char *label = "mpi";
static int timeout_s;
static bool help;

static int rank, peer;

struct stats {
	uint64_t recv, send, comp, wall;
};

struct semi {
	uint64_t unit_iters;
	uint64_t tx_seq, rx_seq;
	unsigned char *sbuf, *rbuf;
	unsigned char *ref_tx[2], *ref_rx[2];
	size_t len;
	struct stats st;
	int level, j, phase, i;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fail(const struct semi *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

static void fail(const struct semi *s, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr,
		"bench_semi: rank %d: m=%zu level %d outer %d "
		"phase %d msg %d: ",
		rank, s->len, s->level, s->j, s->phase, s->i);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* Where a rank is, for the watchdog: written as it goes, read on SIGALRM. */
static volatile sig_atomic_t cur_len, cur_level, cur_j;

static void on_alarm(int sig)
{
	char buf[160];
	int n;

	(void)sig;
	n = snprintf(buf, sizeof(buf),
		     "bench_semi: rank %d: timeout after %d s (m=%d level %d "
		     "outer %d)\n",
		     rank, timeout_s, (int)cur_len, (int)cur_level, (int)cur_j);
	/* snprintf is not async-signal-safe, but we exit right after. */
	if (n > 0)
		(void)!write(STDERR_FILENO, buf, (size_t)n);
	_exit(1);
}

/* ------------------------------------------------------------ options */

static int parse_list(const char *arg, long *out, int max, bool suffixes)
{
	const char *p = arg;
	char *end;
	int n = 0;

	while (*p) {
		long long v;

		if (n == max)
			return -1;
		v = strtoll(p, &end, 0);
		if (end == p || v < 0)
			return -1;
		if (suffixes && (*end == 'k' || *end == 'K'))
			v <<= 10, end++;
		else if (suffixes && (*end == 'm' || *end == 'M'))
			v <<= 20, end++;
		out[n++] = (long)v;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		p = end;
	}
	return n ? n : -1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mpirun -np 2 bench_semi [options]\n"
		"SEMI: receive time against send/receive mismatch (LU "
		"pattern, seed paper 003)\n\n"
		"  -l LABEL  name printed as label= (default mpi)\n"
		"  -t SEC    give up (exit 1) after SEC seconds (default: "
		"never)\n"
		"  -o N      outer iterations (default 20)\n"
		"  -i N      messages per phase, inner loop (default 60)\n"
		"  -w N      untimed outer iterations per size (default 2)\n"
		"  -m LIST   message sizes, >= 16 (default 4000,10240,65536)\n"
		"  -u US     computation unit in microseconds (default 50)\n"
		"  -L LIST   mismatch levels in units (default 0,1,2,4,8)\n"
		"  -r N      runs per level, the median is kept (default 3)\n"
		"  -T SEC    time budget per size: fewer outer iterations, "
		"and no new run once spent (default 20)\n");
}

static bool parse_args(int argc, char **argv)
{
	long v[MAX_LEVELS > MAX_SIZES ? MAX_LEVELS : MAX_SIZES];
	int c, k, n;

	while ((c = getopt(argc, argv, "l:t:o:i:w:m:u:L:r:T:h")) != -1) {
		switch (c) {
		case 'l':
			label = optarg;
			break;
		case 't':
			timeout_s = atoi(optarg);
			if (timeout_s <= 0)
				return false;
			break;
		case 'o':
			outer = atoi(optarg);
			if (outer <= 0)
				return false;
			break;
		case 'i':
			inner = atoi(optarg);
			if (inner <= 0)
				return false;
			break;
		case 'w':
			warmup = atoi(optarg);
			if (warmup < 0)
				return false;
			break;
		case 'm':
			n = parse_list(optarg, v, MAX_SIZES, true);
			if (n <= 0)
				return false;
			for (k = 0; k < n; k++) {
				if (v[k] < 16 || v[k] > 0x7fffffff)
					return false;
				sizes[k] = (size_t)v[k];
			}
			nsizes = n;
			break;
		case 'u':
			unit_us = atof(optarg);
			if (unit_us <= 0)
				return false;
			break;
		case 'L':
			n = parse_list(optarg, v, MAX_LEVELS, false);
			if (n <= 0)
				return false;
			for (k = 0; k < n; k++) {
				if (v[k] > 100000)
					return false;
				levels[k] = (int)v[k];
			}
			nlevels = n;
			break;
		case 'r':
			reps = atoi(optarg);
			if (reps <= 0 || reps > MAX_REPS)
				return false;
			break;
		case 'T':
			budget_s = atof(optarg);
			if (budget_s <= 0)
				return false;
			break;
		case 'h':
			help = true;
			break;
		default:
			return false;
		}
	}
	return optind == argc;
}

/* ------------------------------------------------------ data patterns */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill(unsigned char *buf, size_t len, uint64_t seed)
{
	size_t i;
	uint64_t v;

	for (i = 0; i < len; i += 8) {
		v = mix(seed + i / 8);
		memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* ------------------------------------------------------------ compute */

static void spin(uint64_t n)
{
	volatile double x = 1.0;
	uint64_t i;

	for (i = 0; i < n; i++)
		x = x * 0.9999999 + 1e-7;
}

static uint64_t timed_spin(uint64_t n)
{
	uint64_t t0 = now_ns();

	spin(n);
	return now_ns() - t0;
}

/* Nanoseconds per spin iteration: the best of a few runs of >= 5 ms. */
static double calibrate(void)
{
	uint64_t n = 1024, t;
	double best = 1e30, per;
	int k;

	while (timed_spin(n) < 5000000ull && n < (1ull << 40))
		n *= 2;
	for (k = 0; k < 5; k++) {
		t = timed_spin(n);
		per = (double)t / (double)n;
		if (per < best)
			best = per;
	}
	return best;
}

static void compute(struct semi *s)
{
	uint64_t n = s->unit_iters * (uint64_t)s->level, t0;

	if (!n)
		return;
	t0 = now_ns();
	spin(n);
	s->st.comp += now_ns() - t0;
}

/* ------------------------------------------------- blocking operations */

static void blocking_send(struct semi *s)
{
	uint64_t t0, stamp;
	int rc;

	/* produce the message: pattern by parity, sequence at both ends */
	memcpy(s->sbuf, s->ref_tx[s->tx_seq & 1], s->len);
	stamp = s->tx_seq ^ STAMP_K;
	memcpy(s->sbuf, &s->tx_seq, 8);
	memcpy(s->sbuf + s->len - 8, &stamp, 8);

	t0 = now_ns();
	rc = MPI_Send(s->sbuf, (int)s->len, MPI_BYTE, peer, TAG_BASE + rank,
		      MPI_COMM_WORLD);
	s->st.send += now_ns() - t0;
	if (rc != MPI_SUCCESS)
		fail(s, "MPI_Send returned %d", rc);
	s->tx_seq++;
}

static void check_message(struct semi *s, const MPI_Status *st)
{
	const unsigned char *p = s->rbuf, *ref = s->ref_rx[s->rx_seq & 1];
	uint64_t head, tail;
	size_t k;
	int count;

	MPI_Get_count(st, MPI_BYTE, &count);
	if ((size_t)count != s->len || st->MPI_SOURCE != peer ||
	    st->MPI_TAG != TAG_BASE + peer)
		fail(s, "count %d source %d tag %d, expected %zu %d %d", count,
		     st->MPI_SOURCE, st->MPI_TAG, s->len, peer,
		     TAG_BASE + peer);
	memcpy(&head, p, 8);
	memcpy(&tail, p + s->len - 8, 8);
	if (head != s->rx_seq || tail != (s->rx_seq ^ STAMP_K))
		fail(s,
		     "sequence stamps %" PRIu64 "/%" PRIu64
		     ", expected %" PRIu64 " at both ends",
		     head, (uint64_t)(tail ^ STAMP_K), s->rx_seq);
	if (memcmp(p + 8, ref + 8, s->len - 16)) {
		for (k = 8; k < s->len - 8 && p[k] == ref[k]; k++)
			;
		fail(s, "byte %zu of %zu is 0x%02x, expected 0x%02x", k, s->len,
		     p[k], ref[k]);
	}
	s->rx_seq++;
}

static void blocking_recv(struct semi *s)
{
	MPI_Status st;
	uint64_t t0;
	int rc;

	t0 = now_ns();
	rc = MPI_Recv(s->rbuf, (int)s->len, MPI_BYTE, peer, TAG_BASE + peer,
		      MPI_COMM_WORLD, &st);
	s->st.recv += now_ns() - t0;
	if (rc != MPI_SUCCESS)
		fail(s, "MPI_Recv returned %d", rc);
	check_message(s, &st);
}

/* ----------------------------------------------------------- pattern */

static void lu_pattern(struct semi *s, int nouter)
{
	cur_len = (sig_atomic_t)s->len;
	cur_level = s->level;
	for (s->j = 0; s->j < nouter; s->j++) {
		cur_j = s->j;
		for (s->phase = 0; s->phase < 2; s->phase++) {
			/* phase 0: rank 0 sends; phase 1: rank 1 sends */
			if (rank == s->phase) {
				for (s->i = 0; s->i < inner; s->i++) {
					compute(s);
					blocking_send(s);
				}
			} else {
				for (s->i = 0; s->i < inner; s->i++) {
					blocking_recv(s);
					compute(s);
				}
			}
		}
	}
}

/* Least-squares slope of y against x; false when x does not vary. */
static bool slope_of(const double *x, const double *y, int n, double *out)
{
	double mx = 0, my = 0, sxx = 0, sxy = 0;
	int k;

	if (n < 2)
		return false;
	for (k = 0; k < n; k++) {
		mx += x[k];
		my += y[k];
	}
	mx /= n;
	my /= n;
	for (k = 0; k < n; k++) {
		sxx += (x[k] - mx) * (x[k] - mx);
		sxy += (x[k] - mx) * (y[k] - my);
	}
	if (sxx <= 0)
		return false;
	*out = sxy / sxx;
	return true;
}

static double mean_recv(const struct stats r[2])
{
	return (double)(r[0].recv + r[1].recv) / 2;
}

/* The repetition whose receive time (mean of the ranks) is the median. */
static const struct stats *median_rep(struct stats res[][MAX_LEVELS][2], int l,
				      int nrep)
{
	int idx[MAX_REPS], a, b, t;

	for (a = 0; a < nrep; a++)
		idx[a] = a;
	for (a = 1; a < nrep; a++)
		for (b = a; b > 0 && mean_recv(res[idx[b - 1]][l]) >
					     mean_recv(res[idx[b]][l]);
		     b--) {
			t = idx[b];
			idx[b] = idx[b - 1];
			idx[b - 1] = t;
		}
	return res[idx[(nrep - 1) / 2]][l];
}

static void report(size_t len, int nouter, int nrep,
		   struct stats res[][MAX_LEVELS][2])
{
	double x[MAX_LEVELS], y[MAX_LEVELS], y0[MAX_LEVELS], y1[MAX_LEVELS];
	double sd[MAX_LEVELS], slope = 0, slope0 = 0, slope1 = 0;
	double comp = 0, nominal = 0, comp_x;
	double nmsg = (double)nouter * inner;
	bool ok, ok0, ok1;
	char sl[32], list[3][MAX_LEVELS * 16];
	size_t used[3] = {0, 0, 0};
	int l, k;

	printf("# m=%zu: totals per rank over %d x %d receives, in us; "
	       "median of %d run%s\n",
	       len, nouter, inner, nrep, nrep > 1 ? "s" : "");
	printf("# %5s %11s %11s %11s %11s %11s %11s %9s\n", "level", "comp_us",
	       "recv_r0_us", "recv_r1_us", "send_r0_us", "send_r1_us",
	       "wall_us", "recv/msg");
	for (l = 0; l < nlevels; l++) {
		const struct stats *r = median_rep(res, l, nrep);

		x[l] = (double)(r[0].comp + r[1].comp) / 2e9;
		y0[l] = (double)r[0].recv / 1e9;
		y1[l] = (double)r[1].recv / 1e9;
		y[l] = (y0[l] + y1[l]) / 2;
		comp += x[l];
		/* each rank computes at 2 x inner steps per outer iteration */
		nominal += 2.0 * nmsg * levels[l] * unit_us * 1e-6;
		sd[l] = (double)(r[0].send + r[1].send) / 2e9;
		printf("  %5d %11.1f %11.1f %11.1f %11.1f %11.1f %11.1f "
		       "%9.3f\n",
		       levels[l], x[l] * 1e6, y0[l] * 1e6, y1[l] * 1e6,
		       (double)r[0].send / 1e3, (double)r[1].send / 1e3,
		       (double)(r[0].wall > r[1].wall ? r[0].wall : r[1].wall) /
			       1e3,
		       y[l] * 1e6 / nmsg);
		for (k = 0; k < 3; k++) {
			double v = k == 0 ? y[l] : k == 1 ? x[l] : sd[l];

			used[k] += (size_t)snprintf(
				list[k] + used[k], sizeof(list[k]) - used[k],
				"%s%.1f", l ? "," : "", v * 1e6);
		}
	}
	comp_x = nominal > 0 ? comp / nominal : 1;
	if (comp_x > 1.05)
		printf("# m=%zu: the computation took %.2f times its "
		       "calibrated time: other threads or processes had the "
		       "CPU\n",
		       len, comp_x);
	ok = slope_of(x, y, nlevels, &slope);
	ok0 = slope_of(x, y0, nlevels, &slope0);
	ok1 = slope_of(x, y1, nlevels, &slope1);
	if (ok) {
		snprintf(sl, sizeof(sl), "%.4f", slope);
		printf("# m=%zu: SEMI slope %.4f (rank 0 %.4f, rank 1 %.4f), "
		       "floor 1/inner %.4f, excess %+.4f\n",
		       len, slope, ok0 ? slope0 : 0, ok1 ? slope1 : 0,
		       1.0 / inner, slope - 1.0 / inner);
	} else {
		snprintf(sl, sizeof(sl), "n/a");
		printf("# m=%zu: SEMI slope n/a (needs two levels with "
		       "different computation)\n",
		       len);
	}
	/* as in ftx_bench_semi: totals per rank, mean of the two ranks */
	printf("semi label=%s m=%zu outer=%d inner=%d runs=%d unit_us=%.1f "
	       "slope=%s "
	       "floor=%.4f recv0_us=%.1f recv0_msg_us=%.3f send0_us=%.1f "
	       "comp_x=%.3f "
	       "levels=",
	       label, len, nouter, inner, nrep, unit_us, sl, 1.0 / inner,
	       y[0] * 1e6, y[0] * 1e6 / nmsg, sd[0] * 1e6, comp_x);
	for (l = 0; l < nlevels; l++)
		printf("%s%d", l ? "," : "", levels[l]);
	printf(" recv_us=%s comp_us=%s send_us=%s\n", list[0], list[1],
	       list[2]);
	fflush(stdout);
}

/*
 * Warm up (connections, caches), timing each outer iteration at level 0,
 * and cut the outer count so that every level and repetition fits the time
 * budget with the fastest of them.  Rank 0 decides for both.
 */
static int warm_up(struct semi *s)
{
	double c0 = 0, t, units = 0, per_outer;
	uint64_t t0;
	int w, l, n = outer;

	s->level = 0;
	for (w = 0; w < warmup; w++) {
		t0 = now_ns();
		lu_pattern(s, 1);
		t = (double)(now_ns() - t0) / 1e9;
		if (!w || t < c0)
			c0 = t;
	}
	for (l = 0; l < nlevels; l++)
		units += levels[l];
	/* per outer iteration: 2 x (inner + 1) computation steps */
	per_outer = reps *
		    (nlevels * c0 + units * (2.0 * inner + 2) * unit_us * 1e-6);
	if (per_outer * outer > budget_s)
		n = (int)(budget_s / per_outer);
	if (n < 1)
		n = 1;
	MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
	return n;
}

static unsigned char *alloc(size_t len)
{
	void *p;

	if (posix_memalign(&p, 64, len)) {
		fprintf(stderr, "bench_semi: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return p;
}

int main(int argc, char **argv)
{
	static struct stats res[MAX_REPS][MAX_LEVELS][2];
	struct semi s;
	struct stats all[2];
	double per, per_all[2];
	size_t maxlen = 0;
	int size, k, l, p, rep, nrep, nouter, stop;
	uint64_t t_size;
	char name[MPI_MAX_PROCESSOR_NAME];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!parse_args(argc, argv) || help) {
		if (rank == 0)
			usage(help ? stdout : stderr);
		MPI_Finalize();
		return help ? 0 : 2;
	}
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr,
				"bench_semi: needs exactly 2 ranks, "
				"not %d\n",
				size);
		MPI_Finalize();
		return 2;
	}
	peer = 1 - rank;
	memset(&s, 0, sizeof(s));
	if (timeout_s) {
		signal(SIGALRM, on_alarm);
		alarm((unsigned)timeout_s);
	}

	/* both ranks at once, so that both see the same machine load */
	MPI_Barrier(MPI_COMM_WORLD);
	per = calibrate();
	MPI_Allgather(&per, 1, MPI_DOUBLE, per_all, 1, MPI_DOUBLE,
		      MPI_COMM_WORLD);
	s.unit_iters =
		(uint64_t)(unit_us * 1e3 / ((per_all[0] + per_all[1]) / 2) +
			   0.5);
	if (!s.unit_iters)
		s.unit_iters = 1;

	if (rank == 0) {
		k = 0;
		MPI_Get_processor_name(name, &k);
		printf("# bench_semi: %s on %s, LU pattern: %d outer x 2 "
		       "phases x %d messages, MPI_Send/MPI_Recv\n",
		       label, name, outer, inner);
		printf("# unit %.1f us = %" PRIu64
		       " iterations (%.3f / %.3f ns each on rank 0 / 1); "
		       "levels (units per inner step, both ranks):",
		       unit_us, s.unit_iters, per_all[0], per_all[1]);
		for (l = 0; l < nlevels; l++)
			printf(" %d", levels[l]);
		printf("\n# slope = d(receive time)/d(computation time), "
		       "floor 1/inner = %.4f; %d run%s per level, budget "
		       "%.0f s per size\n",
		       1.0 / inner, reps, reps > 1 ? "s" : "", budget_s);
	}

	for (k = 0; k < nsizes; k++)
		if (sizes[k] > maxlen)
			maxlen = sizes[k];
	s.sbuf = alloc(maxlen);
	s.rbuf = alloc(maxlen);
	for (p = 0; p < 2; p++) {
		s.ref_tx[p] = alloc(maxlen);
		s.ref_rx[p] = alloc(maxlen);
	}

	for (k = 0; k < nsizes; k++) {
		s.len = sizes[k];
		for (p = 0; p < 2; p++) {
			fill(s.ref_tx[p], s.len,
			     mix(mix(s.len) ^ (uint64_t)p) ^ (uint64_t)rank);
			fill(s.ref_rx[p], s.len,
			     mix(mix(s.len) ^ (uint64_t)p) ^ (uint64_t)peer);
		}
		nouter = warm_up(&s);
		/*
		 * Repetitions interleaved, so that drifts hit every level;
		 * no new one once the time budget is spent.
		 */
		t_size = now_ns();
		for (nrep = 0, rep = 0; rep < reps; rep++) {
			for (l = 0; l < nlevels; l++) {
				uint64_t t0;

				s.level = levels[l];
				memset(&s.st, 0, sizeof(s.st));
				MPI_Barrier(MPI_COMM_WORLD);
				t0 = now_ns();
				lu_pattern(&s, nouter);
				s.st.wall = now_ns() - t0;
				MPI_Gather(&s.st, 4, MPI_UINT64_T, all, 4,
					   MPI_UINT64_T, 0, MPI_COMM_WORLD);
				if (rank == 0)
					memcpy(res[rep][l], all, sizeof(all));
			}
			nrep++;
			stop = now_ns() - t_size > (uint64_t)(budget_s * 1e9);
			MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
			if (stop)
				break;
		}
		if (rank == 0)
			report(s.len, nouter, nrep, res);
	}

	free(s.sbuf);
	free(s.rbuf);
	for (p = 0; p < 2; p++) {
		free(s.ref_tx[p]);
		free(s.ref_rx[p]);
	}
	MPI_Finalize();
	return 0;
}
