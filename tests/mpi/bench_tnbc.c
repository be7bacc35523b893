/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Seed 000's micro-benchmark for T-NBC (tests/mpi/bench-tnbc.sh runs it;
 * figures only, never a pass or fail on time).
 *
 * An MPI_Alltoall of --bytes per member, then computation of two kinds:
 * CURC, which does not touch the received data (a loop over an array of
 * its own), and CRC, which reads the received data in rank order at a
 * given rate.  Five scenarios, with Tcomm the blocking call's time and
 * Rcomm = received bytes / Tcomm:
 *
 *   curc_long    T_CURC = 1.5 Tcomm, then CRC at 2 Rcomm
 *   crc_slow     no CURC, CRC at Rcomm / 2
 *   crc_fast     no CURC, CRC at 2 Rcomm
 *   mixed_slow   T_CURC = Tcomm / 2, CRC at Rcomm / 2
 *   mixed_fast   T_CURC = Tcomm / 2, CRC at 2 Rcomm
 *
 * Run once without T-NBC (--calibrate: measures Tcomm and prints it) and
 * once with it (--tcomm-us T from the first run), each prints, per
 * scenario, the medians over --iters of the call's own time and of the
 * whole (call + CURC + CRC), rank 0's view after a barrier.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return v[n / 2];
}

/* CURC: t seconds of work on memory of its own. */
static volatile double sink;
static double own[1 << 14];

static void curc(double t)
{
	double t0 = now(), acc = 0;

	while (now() - t0 < t)
		for (int i = 0; i < 1 << 14; i += 64)
			acc += own[i] += 1.0;
	sink = acc;
}

/* CRC: reads len bytes of r in order, no faster than rate bytes/s. */
static void crc(const unsigned char *r, size_t len, double rate)
{
	double t0 = now();
	unsigned long acc = 0;

	for (size_t o = 0; o < len; o += 4096) {
		size_t e = o + 4096 < len ? o + 4096 : len;

		for (size_t i = o; i < e; i += 8)
			acc += r[i];
		while (now() - t0 < (double)e / rate)
			;
	}
	sink = (double)acc;
}

int main(int argc, char **argv)
{
	size_t per = 1 << 20;
	int iters = 20, rank, size;
	double tcomm = 0;
	int calibrate = 0;
	struct {
		const char *name;
		double curc; /* x Tcomm */
		double rate; /* x Rcomm */
	} sc[] = {
		{"curc_long", 1.5, 2.0},  {"crc_slow", 0, 0.5},
		{"crc_fast", 0, 2.0},	  {"mixed_slow", 0.5, 0.5},
		{"mixed_fast", 0.5, 2.0},
	};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
			per = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--tcomm-us") && i + 1 < argc)
			tcomm = atof(argv[++i]) * 1e-6;
		else if (!strcmp(argv[i], "--calibrate"))
			calibrate = 1;
		else if (!strcmp(argv[i], "--calibrate-only"))
			calibrate = 2;
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);

	size_t len = per * (size_t)size;
	unsigned char *s = malloc(len), *r = malloc(len);
	double *tc = calloc((size_t)iters, sizeof(double)),
	       *tt = calloc((size_t)iters, sizeof(double));

	memset(s, rank + 1, len);
	memset(r, 0, len);
	if (calibrate) {
		/* the blocking call, its data read at once (without T-NBC
		 * the read adds only the read itself) */
		for (int k = -2; k < iters; k++) {
			double t0;

			MPI_Barrier(MPI_COMM_WORLD);
			t0 = now();
			MPI_Alltoall(s, (int)per, MPI_BYTE, r, (int)per,
				     MPI_BYTE, MPI_COMM_WORLD);
			if (k >= 0)
				tc[k] = now() - t0;
		}
		tcomm = median(tc, iters);
		MPI_Allreduce(MPI_IN_PLACE, &tcomm, 1, MPI_DOUBLE, MPI_MAX,
			      MPI_COMM_WORLD);
		if (!rank)
			printf("tcomm_us %.1f\n", tcomm * 1e6);
		if (calibrate == 2) {
			MPI_Finalize();
			return 0;
		}
	}
	if (tcomm <= 0) {
		if (!rank)
			fprintf(stderr, "bench_tnbc: give --tcomm-us or "
					"--calibrate\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (!rank)
		printf("scenario,np,bytes,tcomm_us,t_curc_us,t_crc_us,"
		       "call_us,total_us\n");
	for (size_t c = 0; c < sizeof(sc) / sizeof(sc[0]); c++) {
		double t_curc = sc[c].curc * tcomm,
		       rate = sc[c].rate * (double)len / tcomm;

		for (int k = -2; k < iters; k++) {
			double t0, t1, t2;

			MPI_Barrier(MPI_COMM_WORLD);
			t0 = now();
			MPI_Alltoall(s, (int)per, MPI_BYTE, r, (int)per,
				     MPI_BYTE, MPI_COMM_WORLD);
			t1 = now();
			curc(t_curc);
			crc(r, len, rate);
			t2 = now();
			if (k >= 0) {
				tc[k] = t1 - t0;
				tt[k] = t2 - t0;
			}
		}
		/* the slowest rank's medians */
		double m[2] = {median(tc, iters), median(tt, iters)};

		MPI_Allreduce(MPI_IN_PLACE, m, 2, MPI_DOUBLE, MPI_MAX,
			      MPI_COMM_WORLD);
		if (!rank)
			printf("%s,%d,%zu,%.1f,%.1f,%.1f,%.1f,%.1f\n",
			       sc[c].name, size, per, tcomm * 1e6, t_curc * 1e6,
			       (double)len / rate * 1e6, m[0] * 1e6,
			       m[1] * 1e6);
	}
	free(s);
	free(r);
	free(tc);
	free(tt);
	MPI_Finalize();
	return 0;
}
