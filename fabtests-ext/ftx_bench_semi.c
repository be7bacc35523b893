/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * SEMI (SEnsitivity to MIsmatch timing, seed paper 003): the "LU pattern"
 * extracted from NPB LU, between two ranks, with blocking tagged sends and
 * receives (post, then poll the CQ with fi_cq_read until that operation
 * completes, as MPI_Send / MPI_Recv do).
 *
 * Each outer iteration has two phases of `inner` messages each:
 *
 *	phase A:  rank 0: inner x { compute; send }
 *	          rank 1: inner x { recv; compute }
 *	phase B:  the same with the roles swapped.
 *
 * Sends and receives are out of phase: the computation sits between a
 * rank's send and the receive that matches it on the other side, so an
 * eagerly sent message reaches the receiver while it is still computing
 * and waits there for the provider to move it.  The computation is a busy
 * loop calibrated at start-up to a unit of -u microseconds; the injected
 * mismatch is a level (-L, in units) of it per inner step, as in the
 * paper: each rank computes on its own side of every message (the sender
 * before its send, the receiver after its receive).  Computing on one rank
 * only would build a load imbalance instead, and the other rank's receive
 * time would grow one for one with it whatever the provider does.
 *
 * For each message size the program runs every level (-r times,
 * interleaved, keeping the median run by receive time) and reports each
 * rank's total receive, send and computation time, and the SEMI slope:
 * the least-squares slope of the total receive time against the total
 * injected computation time (per rank, both averaged over the two ranks;
 * seconds per second).  0 would be ideal, but the pattern itself makes
 * each rank wait for about two computation steps per outer iteration at
 * every change of direction while it computes 2 x inner steps, so a
 * provider that moves every message while its receiver computes scores
 * the floor, 1/inner.  Much more means that messages wait for the
 * receiver (or the sender) to come back into the library.
 *
 * Every message is checked: a sequence number at both ends and, between
 * them, one of two patterns by parity; the sender copies the pattern in
 * before each send and the receiver compares after each receive, so both
 * touch the data (untimed).  Figures only, never a verdict on them: the
 * program fails only on a wrong byte, an error completion or a timeout.
 */
#include "common/ftx.h"

#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES  16
#define MAX_LEVELS 16
#define MAX_REPS   9
#define TAG_BASE   0x5e3100000000000ull
#define STAMP_K	   0xa5a5c3c3e1e10f0full
/* scratch slots: 4 figures per rank, then each rank's calibration */
#define SLOT_STATS 0
#define SLOT_CALIB 16
#define SLOT_OUTER 32
#define SLOT_STOP  48

static size_t sizes[MAX_SIZES] = {4000, 10240, 65536};
static int nsizes = 3;
static int levels[MAX_LEVELS] = {0, 1, 2, 4, 8};
static int nlevels = 5;
static int outer = 20, inner = 60, warmup = 2, reps = 3;
static double unit_us = 50.0;
/* a slow provider gets fewer outer iterations, never a longer run */
static double budget_s = 20.0;
static bool yield;

struct stats {
	uint64_t recv, send, comp, wall;
};

struct semi {
	struct ftx_ctx *ctx;
	int peer;
	uint64_t unit_iters;
	uint64_t tx_seq, rx_seq;
	void *sbuf, *rbuf;
	void *ref_tx[2], *ref_rx[2];
	size_t len;
	struct stats st;
	/* where we are, for failure messages */
	int level, j, phase, i;
	bool warm;
};

static int
parse_levels(const char *arg)
{
	const char *p = arg;
	char *end;
	long v;

	nlevels = 0;
	while (*p) {
		if (nlevels == MAX_LEVELS)
			return -1;
		v = strtol(p, &end, 10);
		if (end == p || v < 0 || v > 100000)
			return -1;
		levels[nlevels++] = (int) v;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		p = end;
	}
	return nlevels ? 0 : -1;
}

static int
opt(int c, const char *arg)
{
	int k;

	switch (c) {
	case 'o':
		outer = atoi(arg);
		return outer > 0 ? 0 : -1;
	case 'i':
		inner = atoi(arg);
		return inner > 0 ? 0 : -1;
	case 'w':
		warmup = atoi(arg);
		return warmup >= 0 ? 0 : -1;
	case 'm':
		nsizes = ftx_parse_sizes(arg, sizes, MAX_SIZES);
		if (nsizes <= 0)
			return -1;
		for (k = 0; k < nsizes; k++)
			if (sizes[k] < 16)
				return -1;
		return 0;
	case 'u':
		unit_us = atof(arg);
		return unit_us > 0 ? 0 : -1;
	case 'L':
		return parse_levels(arg);
	case 'r':
		reps = atoi(arg);
		return reps > 0 && reps <= MAX_REPS ? 0 : -1;
	case 'T':
		budget_s = atof(arg);
		return budget_s > 0 ? 0 : -1;
	case 'y':
		yield = true;
		return 0;
	}
	return -1;
}

/* ------------------------------------------------------------ compute */

static void
spin(uint64_t n)
{
	volatile double x = 1.0;
	uint64_t i;

	for (i = 0; i < n; i++)
		x = x * 0.9999999 + 1e-7;
}

static uint64_t
timed_spin(uint64_t n)
{
	uint64_t t0 = ftx_now_ns();

	spin(n);
	return ftx_now_ns() - t0;
}

/* Nanoseconds per spin iteration: the best of a few runs of >= 5 ms. */
static double
calibrate(void)
{
	uint64_t n = 1024, t;
	double best = 1e30, per;
	int k;

	while (timed_spin(n) < 5000000ull && n < (1ull << 40))
		n *= 2;
	for (k = 0; k < 5; k++) {
		t = timed_spin(n);
		per = (double) t / (double) n;
		if (per < best)
			best = per;
	}
	return best;
}

static void
compute(struct semi *s)
{
	uint64_t n = s->unit_iters * (uint64_t) s->level, t0;

	if (!n)
		return;
	t0 = ftx_now_ns();
	spin(n);
	s->st.comp += ftx_now_ns() - t0;
}

/* ------------------------------------------------- blocking operations */

static _Noreturn void
fail_here(struct semi *s, const char *what, const char *detail)
{
	ftx_fail("m=%zu level %d%s outer %d phase %d msg %d: %s: %s", s->len,
		 s->level, s->warm ? " (warmup)" : "", s->j, s->phase, s->i,
		 what, detail);
}

static void
read_error(struct semi *s, struct fid_cq *cq, const char *what)
{
	struct fi_cq_err_entry e;
	char buf[256];
	const char *str;
	ssize_t r;

	memset(&e, 0, sizeof(e));
	r = fi_cq_readerr(cq, &e, 0);
	if (r != 1) {
		snprintf(buf, sizeof(buf), "fi_cq_readerr returned %zd", r);
		fail_here(s, what, buf);
	}
	str = fi_cq_strerror(cq, e.prov_errno, e.err_data, NULL, 0);
	snprintf(buf, sizeof(buf),
		 "error completion %s (prov_errno %d: %s), len %zu olen %zu",
		 fi_strerror(e.err), e.prov_errno, str ? str : "", e.len,
		 e.olen);
	fail_here(s, what, buf);
}

static void
poll_tick(struct semi *s, unsigned *spins, const char *what)
{
	if (yield)
		sched_yield();
	if (++*spins < 1024)
		return;
	*spins = 0;
	if (ftx_expired(s->ctx))
		fail_here(s, what, "timeout");
}

/* Poll one CQ until the operation with context op completes. */
static void
wait_op(struct semi *s, enum ftx_which w, void *op,
	struct fi_cq_tagged_entry *e, const char *what)
{
	struct fid_cq *cq = s->ctx->cq[w];
	unsigned spins = 0;
	char buf[128];
	ssize_t r;

	for (;;) {
		r = fi_cq_read(cq, e, 1);
		if (r == 1)
			break;
		if (r == -FI_EAVAIL)
			read_error(s, cq, what);
		if (r != -FI_EAGAIN) {
			snprintf(buf, sizeof(buf), "fi_cq_read: %s (%zd)",
				 fi_strerror((int) -r), r);
			fail_here(s, what, buf);
		}
		poll_tick(s, &spins, what);
	}
	if (e->op_context != op) {
		snprintf(buf, sizeof(buf), "completion for context %p, not %p",
			 e->op_context, op);
		fail_here(s, what, buf);
	}
}

/*
 * -FI_EAGAIN on a post: drive progress.  Nothing else is outstanding
 * (one blocking operation at a time), so any completion is a bug.
 */
static void
eagain(struct semi *s, unsigned *spins, const char *what)
{
	struct fi_cq_tagged_entry e;
	int w;

	for (w = 0; w < 2; w++) {
		ssize_t r = fi_cq_read(s->ctx->cq[w], &e, 1);

		if (r == 1)
			fail_here(s, what, "stray completion while posting");
		if (r == -FI_EAVAIL)
			read_error(s, s->ctx->cq[w], what);
	}
	poll_tick(s, spins, what);
}

static uint64_t
tag_of(int sender)
{
	return TAG_BASE | (uint64_t) sender;
}

static void
blocking_send(struct semi *s)
{
	struct ftx_ctx *ctx = s->ctx;
	struct fi_cq_tagged_entry e;
	struct fi_context2 op;
	unsigned spins = 0;
	char buf[96];
	uint64_t t0, stamp;
	ssize_t r;

	/* produce the message: pattern by parity, sequence at both ends */
	memcpy(s->sbuf, s->ref_tx[s->tx_seq & 1], s->len);
	stamp = s->tx_seq ^ STAMP_K;
	memcpy(s->sbuf, &s->tx_seq, 8);
	memcpy((char *) s->sbuf + s->len - 8, &stamp, 8);

	t0 = ftx_now_ns();
	while ((r = fi_tsend(ctx->ep, s->sbuf, s->len, NULL,
			     ctx->addrs[s->peer], tag_of(ctx->rank), &op)) ==
	       -FI_EAGAIN)
		eagain(s, &spins, "fi_tsend");
	if (r) {
		snprintf(buf, sizeof(buf), "%s (%zd)", fi_strerror((int) -r),
			 r);
		fail_here(s, "fi_tsend", buf);
	}
	wait_op(s, FTX_TX, &op, &e, "send completion");
	s->st.send += ftx_now_ns() - t0;
	s->tx_seq++;
}

static void
check_message(struct semi *s, const struct fi_cq_tagged_entry *e)
{
	const uint8_t *p = s->rbuf, *ref = s->ref_rx[s->rx_seq & 1];
	uint64_t head, tail, want_tail = s->rx_seq ^ STAMP_K;
	char buf[160];
	size_t k;

	if (e->len != s->len || e->tag != tag_of(s->peer)) {
		snprintf(buf, sizeof(buf),
			 "len %zu tag 0x%" PRIx64 ", expected %zu 0x%" PRIx64,
			 e->len, (uint64_t) e->tag, s->len, tag_of(s->peer));
		fail_here(s, "receive completion", buf);
	}
	memcpy(&head, p, 8);
	memcpy(&tail, p + s->len - 8, 8);
	if (head != s->rx_seq || tail != want_tail) {
		snprintf(buf, sizeof(buf),
			 "sequence stamps %" PRIu64 "/%" PRIu64
			 ", expected %" PRIu64 " at both ends",
			 head, (uint64_t) (tail ^ STAMP_K), s->rx_seq);
		fail_here(s, "received data", buf);
	}
	if (memcmp(p + 8, ref + 8, s->len - 16)) {
		for (k = 8; k < s->len - 8 && p[k] == ref[k]; k++)
			;
		snprintf(buf, sizeof(buf),
			 "byte %zu of %zu is 0x%02x, expected 0x%02x", k,
			 s->len, p[k], ref[k]);
		fail_here(s, "received data", buf);
	}
	s->rx_seq++;
}

static void
blocking_recv(struct semi *s)
{
	struct ftx_ctx *ctx = s->ctx;
	struct fi_cq_tagged_entry e;
	struct fi_context2 op;
	unsigned spins = 0;
	char buf[96];
	uint64_t t0;
	ssize_t r;

	t0 = ftx_now_ns();
	while ((r = fi_trecv(ctx->ep, s->rbuf, s->len, NULL,
			     ctx->addrs[s->peer], tag_of(s->peer), 0, &op)) ==
	       -FI_EAGAIN)
		eagain(s, &spins, "fi_trecv");
	if (r) {
		snprintf(buf, sizeof(buf), "%s (%zd)", fi_strerror((int) -r),
			 r);
		fail_here(s, "fi_trecv", buf);
	}
	wait_op(s, FTX_RX, &op, &e, "receive completion");
	s->st.recv += ftx_now_ns() - t0;
	check_message(s, &e);
}

/* ----------------------------------------------------------- pattern */

static void
lu_pattern(struct semi *s, int nouter)
{
	int me = s->ctx->rank;

	for (s->j = 0; s->j < nouter; s->j++) {
		for (s->phase = 0; s->phase < 2; s->phase++) {
			/* phase 0: rank 0 sends; phase 1: rank 1 sends */
			if (me == s->phase) {
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

/* Both ranks' figures, on both ranks. */
static void
exchange(struct ftx_ctx *ctx, const struct stats *mine, struct stats all[2])
{
	int base = SLOT_STATS + 4 * ctx->rank, r;

	atomic_store(ftx_scratch(base + 0), mine->recv);
	atomic_store(ftx_scratch(base + 1), mine->send);
	atomic_store(ftx_scratch(base + 2), mine->comp);
	atomic_store(ftx_scratch(base + 3), mine->wall);
	ftx_barrier(ctx);
	for (r = 0; r < 2; r++) {
		base = SLOT_STATS + 4 * r;
		all[r].recv = atomic_load(ftx_scratch(base + 0));
		all[r].send = atomic_load(ftx_scratch(base + 1));
		all[r].comp = atomic_load(ftx_scratch(base + 2));
		all[r].wall = atomic_load(ftx_scratch(base + 3));
	}
	/* the slots are reused by the next level */
	ftx_barrier(ctx);
}

/* Least-squares slope of y against x; false when x does not vary. */
static bool
slope_of(const double *x, const double *y, int n, double *out)
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

static double
mean_recv(const struct stats r[2])
{
	return (double) (r[0].recv + r[1].recv) / 2;
}

/* The repetition whose receive time (mean of the ranks) is the median. */
static const struct stats *
median_rep(struct stats res[][MAX_LEVELS][2], int l, int nrep)
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

static void
report(size_t len, int nouter, int nrep, struct stats res[][MAX_LEVELS][2])
{
	double x[MAX_LEVELS], y[MAX_LEVELS], y0[MAX_LEVELS], y1[MAX_LEVELS];
	double sd[MAX_LEVELS], slope = 0, slope0 = 0, slope1 = 0;
	double comp = 0, nominal = 0, comp_x;
	double nmsg = (double) nouter * inner;
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

		x[l] = (double) (r[0].comp + r[1].comp) / 2e9;
		y0[l] = (double) r[0].recv / 1e9;
		y1[l] = (double) r[1].recv / 1e9;
		y[l] = (y0[l] + y1[l]) / 2;
		comp += x[l];
		/* each rank computes at 2 x inner steps per outer iteration */
		nominal += 2.0 * nmsg * levels[l] * unit_us * 1e-6;
		sd[l] = (double) (r[0].send + r[1].send) / 2e9;
		printf("  %5d %11.1f %11.1f %11.1f %11.1f %11.1f %11.1f "
		       "%9.3f\n",
		       levels[l], x[l] * 1e6, y0[l] * 1e6, y1[l] * 1e6,
		       (double) r[0].send / 1e3, (double) r[1].send / 1e3,
		       (double) (r[0].wall > r[1].wall ? r[0].wall :
							 r[1].wall) /
			       1e3,
		       y[l] * 1e6 / nmsg);
		for (k = 0; k < 3; k++) {
			double v = k == 0 ? y[l] : k == 1 ? x[l] : sd[l];

			used[k] += (size_t) snprintf(
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
	/*
	 * recv0_us, send0_us: at the first level (0 by default);
	 * recv_us, comp_us, send_us: per level.  All are totals per rank,
	 * the mean of the two ranks.
	 */
	printf("semi prov=%s m=%zu outer=%d inner=%d runs=%d unit_us=%.1f "
	       "slope=%s "
	       "floor=%.4f recv0_us=%.1f recv0_msg_us=%.3f send0_us=%.1f "
	       "comp_x=%.3f "
	       "levels=",
	       ftx_opts.prov, len, nouter, inner, nrep, unit_us, sl,
	       1.0 / inner, y[0] * 1e6, y[0] * 1e6 / nmsg, sd[0] * 1e6, comp_x);
	for (l = 0; l < nlevels; l++)
		printf("%s%d", l ? "," : "", levels[l]);
	printf(" recv_us=%s comp_us=%s send_us=%s\n", list[0], list[1],
	       list[2]);
}

/*
 * Warm up (connections, caches), timing each outer iteration at level 0,
 * and cut the outer count so that every level and repetition fits the time
 * budget with the fastest of them.  Rank 0 decides for both.
 */
static int
warm_up(struct semi *s, int slot)
{
	double c0 = 0, t, units = 0, per_outer;
	uint64_t t0;
	int w, l, n = outer;

	s->level = 0;
	s->warm = true;
	for (w = 0; w < warmup; w++) {
		t0 = ftx_now_ns();
		lu_pattern(s, 1);
		t = (double) (ftx_now_ns() - t0) / 1e9;
		if (!w || t < c0)
			c0 = t;
	}
	s->warm = false;
	for (l = 0; l < nlevels; l++)
		units += levels[l];
	/* per outer iteration: 2 x (inner + 1) computation steps */
	per_outer = reps *
		    (nlevels * c0 + units * (2.0 * inner + 2) * unit_us * 1e-6);
	if (per_outer * outer > budget_s)
		n = (int) (budget_s / per_outer);
	if (n < 1)
		n = 1;
	return (int) ftx_bcast(s->ctx, slot, (uint64_t) n);
}

static int
run(struct ftx_ctx *ctx)
{
	static struct stats res[MAX_REPS][MAX_LEVELS][2];
	struct semi s;
	double per[2], per_iter;
	size_t maxlen = 0;
	int k, l, p, rep, nrep, nouter;
	uint64_t t_size;

	memset(&s, 0, sizeof(s));
	s.ctx = ctx;
	s.peer = 1 - ctx->rank;

	/* both ranks at once, so that both see the same machine load */
	ftx_barrier(ctx);
	per[0] = calibrate();
	atomic_store(ftx_scratch(SLOT_CALIB + ctx->rank),
		     (uint64_t) (per[0] * 1e6));
	ftx_barrier(ctx);
	per[0] = (double) atomic_load(ftx_scratch(SLOT_CALIB)) / 1e6;
	per[1] = (double) atomic_load(ftx_scratch(SLOT_CALIB + 1)) / 1e6;
	per_iter = (per[0] + per[1]) / 2;
	s.unit_iters = (uint64_t) (unit_us * 1e3 / per_iter + 0.5);
	if (!s.unit_iters)
		s.unit_iters = 1;

	if (ctx->rank == 0) {
		printf("# ftx_bench_semi: provider %s, LU pattern: %d outer x "
		       "2 phases x %d messages, blocking tagged send/recv%s\n",
		       ctx->info->fabric_attr->prov_name, outer, inner,
		       yield ? ", sched_yield while polling" : "");
		printf("# unit %.1f us = %" PRIu64
		       " iterations (%.3f / %.3f ns each on rank 0 / 1); "
		       "levels (units per inner step, both ranks):",
		       unit_us, s.unit_iters, per[0], per[1]);
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
	s.sbuf = ftx_alloc(maxlen);
	s.rbuf = ftx_alloc(maxlen);
	for (p = 0; p < 2; p++) {
		s.ref_tx[p] = ftx_alloc(maxlen);
		s.ref_rx[p] = ftx_alloc(maxlen);
	}

	for (k = 0; k < nsizes; k++) {
		s.len = sizes[k];
		for (p = 0; p < 2; p++) {
			ftx_fill(s.ref_tx[p], s.len,
				 ftx_seed(s.len, (uint64_t) p,
					  (uint64_t) ctx->rank));
			ftx_fill(s.ref_rx[p], s.len,
				 ftx_seed(s.len, (uint64_t) p,
					  (uint64_t) s.peer));
		}
		ftx_note("m=%zu warmup", s.len);
		nouter = warm_up(&s, SLOT_OUTER + k);
		/*
		 * Repetitions interleaved, so that drifts hit every level;
		 * no new one once the time budget is spent.
		 */
		t_size = ftx_now_ns();
		for (nrep = 0, rep = 0; rep < reps; rep++) {
			for (l = 0; l < nlevels; l++) {
				uint64_t t0;

				ftx_note("m=%zu run %d level %d", s.len, rep,
					 levels[l]);
				s.level = levels[l];
				memset(&s.st, 0, sizeof(s.st));
				ftx_barrier(ctx);
				t0 = ftx_now_ns();
				lu_pattern(&s, nouter);
				s.st.wall = ftx_now_ns() - t0;
				exchange(ctx, &s.st, res[rep][l]);
			}
			nrep++;
			if (ftx_bcast(ctx, SLOT_STOP + k,
				      ftx_now_ns() - t_size >
					      (uint64_t) (budget_s * 1e9)))
				break;
		}
		if (ctx->rank == 0)
			report(s.len, nouter, nrep, res);
	}

	ftx_guard_verify(s.rbuf, maxlen, "receive buffer");
	ftx_free(s.sbuf);
	ftx_free(s.rbuf);
	for (p = 0; p < 2; p++) {
		ftx_free(s.ref_tx[p]);
		ftx_free(s.ref_rx[p]);
	}
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "semi", .run = run, .flags = FTX_CASE_RAW_CQ},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_bench_semi",
	.desc = "SEMI: receive time against send/receive mismatch "
		"(LU pattern, seed paper 003)",
	.caps = FI_TAGGED | FI_DIRECTED_RECV,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = 2,
	.timeout = 300,
	.optstr = "o:i:w:m:u:L:r:T:y",
	.opt = opt,
	.opthelp =
		"  -o N     outer iterations (default 20)\n"
		"  -i N     messages per phase, inner loop (default 60)\n"
		"  -w N     untimed outer iterations per size (default 2)\n"
		"  -m LIST  message sizes, >= 16 (default 4000,10240,65536)\n"
		"  -u US    computation unit in microseconds (default 50)\n"
		"  -L LIST  mismatch levels in units (default 0,1,2,4,8)\n"
		"  -r N     runs per level, the median is kept (default 3)\n"
		"  -T SEC   time budget per size: fewer outer iterations, "
		"and no new run once spent (default 20)\n"
		"  -y       sched_yield() while polling a CQ\n",
	.cases = cases,
	.quiet = true,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
