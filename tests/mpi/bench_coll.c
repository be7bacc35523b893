/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_coll: MPI_Allreduce completion time as seed 002 defines it, the
 * MPI twin of fabtests-ext/ftx_bench_coll.c: same method, options and
 * output, so that Open MPI's collectives (over any pml / btl / mtl) and
 * the provider's fi_allreduce compare side by side.  A benchmark, not a
 * test: it prints figures and only fails (exit 1) when a result is wrong
 * or MPI reports an error.
 *
 * Every repetition:
 *
 *	MPI_Barrier; rank 0 reads CLOCK_MONOTONIC, adds 200 us and
 *	broadcasts that start time T (MPI_Bcast, uint64 ns);
 *	every rank busy-waits until the clock reaches T, calls
 *	MPI_Allreduce (MPI_SUM, MPI_DOUBLE, bytes / 8 elements, at least
 *	one) and notes done_i, the clock when it returned;
 *	completion time = max over the ranks of done_i, minus T
 *	(MPI_Reduce MPI_MAX to rank 0).
 *
 * All ranks must share one host (checked: one MPI_COMM_TYPE_SHARED
 * domain), so that their CLOCK_MONOTONIC is the same clock.  Reported per
 * size: the median (element n/2 of the sorted times, as ftx_bench_coll
 * takes it) and the minimum, in microseconds, as CSV on stdout:
 *
 *	label,nprocs,bytes,median_us,min_us
 *
 * after that header line; nothing else goes to stdout.  Each rank adds
 * rank + 1 in every element; the result of the last repetition of each
 * size is checked (every element n(n+1)/2).  On stderr, rank 0 notes the
 * sizes where some rank reached the start time late (it got T after T:
 * then that repetition measured the late start too), e.g. on an
 * oversubscribed host.
 *
 * With -o alltoall the operation is MPI_Alltoall (MPI_BYTE, each size a
 * slice per rank; slice j of rank r holds (r + 7 j) & 0xff, checked).
 * With -H the ranks may be on several hosts that share one kernel's
 * CLOCK_MONOTONIC (tests/netns-lib.sh's namespace hosts).
 *
 * usage: mpirun -np N bench_coll [-s LIST] [-i N] [-w N] [-l LABEL] [-c USEC]
 *                                [-o alltoall] [-H]
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES 32
#define MAX_REPS  1000000
#define MAX_BYTES (1ull << 30)
#define START_NS  200000ull /* start offset: T = rank 0's clock + this */
#define LARGE	  65536 /* from here a tenth of -i, at least 20 */

static size_t sizes[MAX_SIZES] = {8, 16, 32, 48, 4096, 1048576};
static int nsizes = 6;
static int reps = 200, warmup = 20;
/* -c: computation between MPI_Iallreduce and MPI_Wait, microseconds */
static long compute_us;
static const char *label = "mpi";
static bool help;
static bool a2a; /* -o alltoall */
static bool shared_clock; /* -H */

static int rank, nprocs;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ options */

/* Sizes in bytes, as ftx_parse_sizes: "8,4k,1m,4k+8" (suffix k, m). */
static int parse_sizes(const char *arg, size_t *out, int max)
{
	const char *p = arg;
	char *end;
	int n = 0;

	while (*p) {
		unsigned long long v;

		if (n == max || *p == '-')
			return -1;
		v = strtoull(p, &end, 0);
		if (end == p)
			return -1;
		if (*end == 'k' || *end == 'K')
			v <<= 10, end++;
		else if (*end == 'm' || *end == 'M')
			v <<= 20, end++;
		if (*end == '+') {
			p = end + 1;
			if (*p == '-')
				return -1;
			v += strtoull(p, &end, 0);
			if (end == p)
				return -1;
		}
		if (v == 0 || v > MAX_BYTES)
			return -1;
		out[n++] = (size_t)v;
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
	fprintf(f, "usage: mpirun -np N bench_coll [options]\n"
		   "MPI_Allreduce completion time (seed 002's metric): from a "
		   "common start time\nuntil the last rank has the result; "
		   "CSV label,nprocs,bytes,median_us,min_us\n\n"
		   "  -s LIST   sizes in bytes, suffix k or m allowed (default "
		   "8,16,32,48,4096,1048576)\n"
		   "  -i N      repetitions per size (default 200; from 64 KiB "
		   "a tenth, at least 20)\n"
		   "  -w N      warm-up repetitions per size (default 20)\n"
		   "  -l LABEL  first field of the CSV lines (default mpi)\n"
		   "  -c USEC   MPI_Iallreduce, USEC of computation with no "
		   "MPI call, MPI_Wait\n"
		   "  -o OP     allreduce (default) or alltoall (each size a "
		   "slice per rank)\n"
		   "  -H        the ranks' hosts share one kernel's clock "
		   "(namespace hosts)\n");
}

static bool parse_args(int argc, char **argv)
{
	char *end;
	long v;
	int c;

	while ((c = getopt(argc, argv, "s:i:w:l:c:o:Hh")) != -1) {
		switch (c) {
		case 'o':
			if (!strcmp(optarg, "alltoall"))
				a2a = true;
			else if (strcmp(optarg, "allreduce"))
				return false;
			break;
		case 'H':
			shared_clock = true;
			break;
		case 's':
			nsizes = parse_sizes(optarg, sizes, MAX_SIZES);
			if (nsizes <= 0)
				return false;
			break;
		case 'i':
			v = strtol(optarg, &end, 10);
			if (*end || v <= 0 || v > MAX_REPS)
				return false;
			reps = (int)v;
			break;
		case 'w':
			v = strtol(optarg, &end, 10);
			if (*end || v < 0 || v > MAX_REPS)
				return false;
			warmup = (int)v;
			break;
		case 'c':
			compute_us = strtol(optarg, &end, 10);
			if (*end || compute_us < 0 || compute_us > 10000000)
				return false;
			break;
		case 'l':
			/* it is a CSV field */
			if (!*optarg || strpbrk(optarg, ",\n\r\""))
				return false;
			label = optarg;
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

/* ------------------------------------------------------------ helpers */

static void *alloc(size_t len)
{
	void *p;

	if (posix_memalign(&p, 64, len)) {
		fprintf(stderr, "bench_coll: rank %d: out of memory (%zu B)\n",
			rank, len);
		MPI_Abort(MPI_COMM_WORLD, 1);
		exit(1);
	}
	return p;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* All ranks on one host?  Otherwise CLOCK_MONOTONIC means nothing. */
static bool one_host(void)
{
	MPI_Comm node;
	int n;

	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
			    MPI_INFO_NULL, &node);
	MPI_Comm_size(node, &n);
	MPI_Comm_free(&node);
	return n == nprocs;
}

/*
 * One repetition: common start time T, MPI_Allreduce, then on rank 0 the
 * completion time (last done_i - T) and how late the latest rank saw T
 * (0: everyone was waiting for it); other ranks get zeros.
 */
static void one_rep(const double *in, double *out, int count, uint64_t *time_ns,
		    uint64_t *late_ns)
{
	uint64_t t = 0, now, mine[2], all[2] = {0, 0};

	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		t = now_ns() + START_NS;
	MPI_Bcast(&t, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	now = now_ns();
	mine[1] = now > t ? now - t : 0;
	while (now < t)
		now = now_ns();
	if (compute_us) {
		/* what an application overlapping its computation does;
		 * the computation makes no MPI call */
		MPI_Request req;
		uint64_t end = now_ns() + (uint64_t)compute_us * 1000u;

		if (a2a)
			MPI_Ialltoall(in, count, MPI_BYTE, out, count, MPI_BYTE,
				      MPI_COMM_WORLD, &req);
		else
			MPI_Iallreduce(in, out, count, MPI_DOUBLE, MPI_SUM,
				       MPI_COMM_WORLD, &req);
		while (now_ns() < end)
			;
		MPI_Wait(&req, MPI_STATUS_IGNORE);
	} else if (a2a) {
		MPI_Alltoall(in, count, MPI_BYTE, out, count, MPI_BYTE,
			     MPI_COMM_WORLD);
	} else {
		MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM,
			      MPI_COMM_WORLD);
	}
	mine[0] = now_ns();
	MPI_Reduce(mine, all, 2, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
	*time_ns = all[0] > t ? all[0] - t : 0;
	*late_ns = all[1];
}

static void check_a2a(const unsigned char *out, size_t len)
{
	for (int m = 0; m < nprocs; m++)
		for (size_t i = 0; i < len; i++)
			if (out[(size_t)m * len + i] !=
			    (unsigned char)((m + 7 * rank) & 0xff)) {
				fprintf(stderr,
					"bench_coll: rank %d: %zu B: "
					"MPI_Alltoall slice from %d wrong\n",
					rank, len, m);
				fflush(stderr);
				MPI_Abort(MPI_COMM_WORLD, 1);
				exit(1);
			}
}

static void check(const double *out, int count, size_t bytes)
{
	double want = (double)nprocs * (nprocs + 1) / 2.0;
	int i;

	for (i = 0; i < count; i++) {
		if (out[i] != want) {
			fprintf(stderr,
				"bench_coll: rank %d: %zu B: MPI_Allreduce "
				"result element %d of %d is %g, expected %g\n",
				rank, bytes, i, count, out[i], want);
			fflush(stderr);
			MPI_Abort(MPI_COMM_WORLD, 1);
			exit(1);
		}
	}
}

int main(int argc, char **argv)
{
	size_t maxcount = 1;
	uint64_t *times;
	double *in, *out;
	int k, i, r, n, count, nlate;
	uint64_t t_ns, late, maxlate;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!parse_args(argc, argv) || help) {
		if (rank == 0)
			usage(help ? stdout : stderr);
		MPI_Finalize();
		return help ? 0 : 2;
	}
	if (!shared_clock && !one_host()) {
		if (rank == 0)
			fprintf(stderr,
				"bench_coll: the %d ranks are not all on one "
				"host: their CLOCK_MONOTONIC cannot be "
				"compared\n",
				nprocs);
		MPI_Finalize();
		return 2;
	}

	for (k = 0; k < nsizes; k++) {
		size_t c = a2a ? (sizes[k] * (size_t)nprocs + 7) / 8
			       : sizes[k] / sizeof(double);

		if (c > maxcount)
			maxcount = c;
	}
	in = alloc(maxcount * sizeof(double));
	out = alloc(maxcount * sizeof(double));
	for (i = 0; !a2a && i < (int)maxcount; i++)
		in[i] = rank + 1;
	/* large sizes: max(20, reps / 10) <= max(20, reps) */
	times = alloc((size_t)(reps > 20 ? reps : 20) * sizeof(*times));

	if (rank == 0)
		printf("label,nprocs,bytes,median_us,min_us\n");
	for (k = 0; k < nsizes; k++) {
		count = a2a ? (int)sizes[k]
			: sizes[k] / sizeof(double)
				? (int)(sizes[k] / sizeof(double))
				: 1;
		if (a2a)
			for (int j = 0; j < nprocs; j++)
				memset((char *)in + (size_t)j * sizes[k],
				       (rank + 7 * j) & 0xff, sizes[k]);
		n = sizes[k] >= LARGE ? (reps / 10 > 20 ? reps / 10 : 20)
				      : reps;
		nlate = 0;
		maxlate = 0;
		for (r = -warmup; r < n; r++) {
			/* the last one is checked: it must write all */
			if (r == n - 1)
				memset(out, 0xff,
				       a2a ? (size_t)count * (size_t)nprocs
					   : (size_t)count * sizeof(*out));
			one_rep(in, out, count, &t_ns, &late);
			if (r < 0)
				continue;
			times[r] = t_ns;
			if (late) {
				nlate++;
				if (late > maxlate)
					maxlate = late;
			}
		}
		if (a2a)
			check_a2a((const unsigned char *)out, sizes[k]);
		else
			check(out, count, sizes[k]);
		if (rank != 0)
			continue;
		qsort(times, (size_t)n, sizeof(*times), cmp_u64);
		printf("%s,%d,%zu,%.3f,%.3f\n", label, nprocs, sizes[k],
		       times[n / 2] / 1e3, times[0] / 1e3);
		if (nlate)
			fprintf(stderr,
				"bench_coll: %zu B: in %d of %d repetitions "
				"a rank got the start time after it had "
				"passed (by up to %.1f us)\n",
				sizes[k], nlate, n, maxlate / 1e3);
	}

	free(times);
	free(in);
	free(out);
	MPI_Finalize();
	return 0;
}
