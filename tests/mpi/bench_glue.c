/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * bench_glue: MPI collectives timed by the OSU micro-benchmarks' method,
 * for comparing a run with the MPI glue (tnbc-mpirun) with one without.
 * A benchmark: it prints figures and fails only on a wrong result or an
 * MPI error.  Written here after OSU's published method, not its code.
 *
 * Blocking (allreduce, reduce, bcast, barrier, allgather, alltoall,
 * allgatherv, gatherv and scatterv with every member's count the same,
 * reduce_scatter of floats with OSU's blocks: the vector split as evenly
 * as it goes, the first members one more; neighbor_alltoall on a ring of
 * the ranks, a line at 2, bytes per neighbour; scan and exscan of floats,
 * summed):
 * per size, ITER calls back to back after WARM untimed ones; the figure is
 * the slowest rank's average per call, in microseconds.
 *
 * Non-blocking (iallreduce, ibcast, ialltoall, iscan), OSU's overlap:
 *	t_pure: average of post + MPI_Wait;
 *	t_total: post, compute for t_pure, MPI_Wait, averaged;
 *	overlap % = 100 * (1 - (t_total - t_compute) / t_pure), in [0, 100].
 * The compute phase either sleeps (nanosleep: a thread that waits for an
 * accelerator) or busy-loops (OSU's own dummy compute), with no MPI
 * call in it either way (-c sleep|busy).
 *
 * CSV on stdout: label,mpi,np,coll,bytes,us,pure_us,total_us,overlap_pct,
 * post_us,wait_us (the last five for the non-blocking rows: the slowest
 * rank's average time in the post and in MPI_Wait after the compute).
 *
 * usage: bench_glue [-l LABEL] [-c sleep|busy] [-m MAXBYTES] [-i ITER]
 *                   [-o COLL] [-d float|char]
 *        bench_glue -k N
 * -o: that collective only (a name of the blocking list).
 * -d: what the reductions (allreduce, reduce, reduce_scatter, the scans)
 * fold and sum: floats (the default), or bytes, MPI_CHAR, as OSU's
 * blocking benchmarks do.
 * -k: count mode, for callgrind (tests/mpi/cost-glue.sh): N 8-byte
 * MPI_Allreduce calls, then N MPI_Iallreduce + MPI_Wait, nothing timed
 * and nothing printed.
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

static int rank, size, iters = 200, warm = 20, count;
static const char *label = "run", *mode = "sleep", *only;
/* the reductions fold OSU's bytes (-d char), not floats */
static bool red_bytes;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void compute(double secs)
{
	if (!strcmp(mode, "sleep")) {
		struct timespec t = {
			.tv_sec = (time_t)secs,
			.tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9)};

		nanosleep(&t, NULL);
		return;
	}
	for (double t0 = now(); now() - t0 < secs;)
		;
}

enum {
	ALLREDUCE,
	REDUCE,
	BCAST,
	BARRIER,
	ALLGATHER,
	ALLTOALL,
	ALLGATHERV,
	GATHERV,
	SCATTERV,
	REDUCE_SCATTER,
	NEIGHBOR_ALLTOALL,
	SCAN,
	EXSCAN,
	NB
};
static const char *names[] = {"allreduce",
			      "reduce",
			      "bcast",
			      "barrier",
			      "allgather",
			      "alltoall",
			      "allgatherv",
			      "gatherv",
			      "scatterv",
			      "reduce_scatter",
			      "neighbor_alltoall",
			      "scan",
			      "exscan"};

/* allgatherv's counts and displacements: every member's the same, as
 * OSU's osu_allgatherv has them */
static int *vcounts, *vdispls;

static char *sbuf, *rbuf;
static MPI_Comm ring;

static void call(int c, size_t bytes, MPI_Request *req)
{
	MPI_Datatype red = red_bytes ? MPI_CHAR : MPI_FLOAT;
	int n = (int)(bytes / (red_bytes ? 1 : sizeof(float)));

	switch (c) {
	case ALLREDUCE:
		if (req)
			MPI_Iallreduce(sbuf, rbuf, n, red, MPI_SUM,
				       MPI_COMM_WORLD, req);
		else
			MPI_Allreduce(sbuf, rbuf, n, red, MPI_SUM,
				      MPI_COMM_WORLD);
		break;
	case REDUCE:
		MPI_Reduce(sbuf, rbuf, n, red, MPI_SUM, 0, MPI_COMM_WORLD);
		break;
	case BCAST:
		if (req)
			MPI_Ibcast(sbuf, (int)bytes, MPI_CHAR, 0,
				   MPI_COMM_WORLD, req);
		else
			MPI_Bcast(sbuf, (int)bytes, MPI_CHAR, 0,
				  MPI_COMM_WORLD);
		break;
	case BARRIER:
		MPI_Barrier(MPI_COMM_WORLD);
		break;
	case ALLGATHER:
		MPI_Allgather(sbuf, (int)bytes, MPI_CHAR, rbuf, (int)bytes,
			      MPI_CHAR, MPI_COMM_WORLD);
		break;
	case ALLGATHERV:
	case GATHERV:
	case SCATTERV:
		for (int i = 0; i < size; i++) {
			vcounts[i] = (int)bytes;
			vdispls[i] = i * (int)bytes;
		}
		if (c == ALLGATHERV)
			MPI_Allgatherv(sbuf, (int)bytes, MPI_CHAR, rbuf,
				       vcounts, vdispls, MPI_CHAR,
				       MPI_COMM_WORLD);
		else if (c == GATHERV)
			MPI_Gatherv(sbuf, (int)bytes, MPI_CHAR, rbuf, vcounts,
				    vdispls, MPI_CHAR, 0, MPI_COMM_WORLD);
		else
			MPI_Scatterv(sbuf, vcounts, vdispls, MPI_CHAR, rbuf,
				     (int)bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
		break;
	case NEIGHBOR_ALLTOALL:
		MPI_Neighbor_alltoall(sbuf, (int)bytes, MPI_CHAR, rbuf,
				      (int)bytes, MPI_CHAR, ring);
		break;
	case REDUCE_SCATTER:
		for (int i = 0; i < size; i++)
			vcounts[i] = n / size + (i < n % size);
		MPI_Reduce_scatter(sbuf, rbuf, vcounts, red, MPI_SUM,
				   MPI_COMM_WORLD);
		break;
	case SCAN:
		if (req)
			MPI_Iscan(sbuf, rbuf, n, red, MPI_SUM, MPI_COMM_WORLD,
				  req);
		else
			MPI_Scan(sbuf, rbuf, n, red, MPI_SUM, MPI_COMM_WORLD);
		break;
	case EXSCAN:
		MPI_Exscan(sbuf, rbuf, n, red, MPI_SUM, MPI_COMM_WORLD);
		break;
	case ALLTOALL:
		if (req)
			MPI_Ialltoall(sbuf, (int)bytes, MPI_CHAR, rbuf,
				      (int)bytes, MPI_CHAR, MPI_COMM_WORLD,
				      req);
		else
			MPI_Alltoall(sbuf, (int)bytes, MPI_CHAR, rbuf,
				     (int)bytes, MPI_CHAR, MPI_COMM_WORLD);
		break;
	}
}

static double slowest(double v)
{
	double m;

	MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return m;
}

static int iters_for(size_t bytes)
{
	return bytes >= (1u << 18) ? iters / 10 + 1 : iters;
}

int main(int argc, char **argv)
{
	size_t maxb = 1u << 20;
	const char *mpi = "?";
	char ver[MPI_MAX_LIBRARY_VERSION_STRING];
	int c, len;

	while ((c = getopt(argc, argv, "l:c:m:i:k:o:d:")) != -1) {
		if (c == 'l')
			label = optarg;
		else if (c == 'c')
			mode = optarg;
		else if (c == 'm')
			maxb = (size_t)strtoull(optarg, NULL, 0);
		else if (c == 'i')
			iters = atoi(optarg);
		else if (c == 'k')
			count = atoi(optarg);
		else if (c == 'o')
			only = optarg;
		else if (c == 'd' && !strcmp(optarg, "char"))
			red_bytes = true;
		else if (c == 'd' && !strcmp(optarg, "float"))
			red_bytes = false;
		else if (c == 'd') {
			fprintf(stderr,
				"bench_glue: -d float or char, not %s\n",
				optarg);
			return 2;
		} else {
			return 2; /* getopt said which */
		}
	}
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Get_library_version(ver, &len);
	mpi = strstr(ver, "Open MPI") ? "openmpi"
	      : strstr(ver, "MPICH")  ? "mpich"
				      : "?";
	sbuf = calloc(maxb * (size_t)size, 1);
	rbuf = calloc(maxb * (size_t)size, 1);
	vcounts = calloc((size_t)size, sizeof(int));
	{
		/* periodic from 3 ranks: at 2 each rank's neighbours would be
		 * one rank twice */
		int dims[1] = {size}, per[1] = {size >= 3};

		MPI_Cart_create(MPI_COMM_WORLD, 1, dims, per, 0, &ring);
	}
	vdispls = calloc((size_t)size, sizeof(int));
	if (count) {
		MPI_Request rq;

		for (int i = 0; i < count; i++)
			call(ALLREDUCE, 8, NULL);
		for (int i = 0; i < count; i++) {
			call(ALLREDUCE, 8, &rq);
			MPI_Wait(&rq, MPI_STATUS_IGNORE);
		}
		MPI_Finalize();
		return 0;
	}
	if (!rank)
		printf("label,mpi,np,coll,bytes,us,pure_us,total_us,overlap_"
		       "pct,post_us,wait_us\n");
	for (int k = 0; k < NB; k++) {
		if (only && strcmp(only, names[k]))
			continue;
		for (size_t b = 8; b <= maxb; b *= 4) {
			size_t bytes = k == BARRIER ? 0 : b;
			int it = iters_for(b);

			if ((k == ALLGATHER || k == ALLTOALL ||
			     (k >= ALLGATHERV && k != REDUCE_SCATTER &&
			      k != SCAN && k != EXSCAN)) &&
			    b > (1u << 18))
				continue;
			for (int i = 0; i < warm; i++)
				call(k, bytes, NULL);
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = now();
			for (int i = 0; i < it; i++)
				call(k, bytes, NULL);
			double us = slowest((now() - t0) / it) * 1e6;
			if (!rank)
				printf("%s,%s,%d,%s,%zu,%.3f,,,,,\n", label,
				       mpi, size, names[k], bytes, us);
			if (k == BARRIER)
				break;
		}
	}
	/* overlap, OSU's way */
	int nbc[] = {ALLREDUCE, BCAST, ALLTOALL, SCAN};
	for (int j = 0; j < 4; j++) {
		int k = nbc[j];

		if (only && strcmp(only, names[k]))
			continue;

		for (size_t b = 8; b <= maxb; b *= 4) {
			MPI_Request rq;
			int it = iters_for(b) / 2 + 1;

			if (k == ALLTOALL && b > (1u << 18))
				continue;
			for (int i = 0; i < warm; i++) {
				call(k, b, &rq);
				MPI_Wait(&rq, MPI_STATUS_IGNORE);
			}
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = now();
			for (int i = 0; i < it; i++) {
				call(k, b, &rq);
				MPI_Wait(&rq, MPI_STATUS_IGNORE);
			}
			double pure = slowest((now() - t0) / it);
			double tc = 0, tp = 0, tw = 0;
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = now();
			for (int i = 0; i < it; i++) {
				double p0 = now();
				call(k, b, &rq);
				double c0 = now();
				compute(pure);
				double w0 = now();
				MPI_Wait(&rq, MPI_STATUS_IGNORE);
				tp += c0 - p0;
				tc += w0 - c0;
				tw += now() - w0;
			}
			tp = slowest(tp / it);
			tw = slowest(tw / it);
			double total = (now() - t0) / it;
			tc /= it;
			double ov = 100.0 * (1.0 - (total - tc) / pure);
			ov = ov < 0 ? 0 : ov > 100 ? 100 : ov;
			double ovmin;
			total = slowest(total);
			MPI_Allreduce(&ov, &ovmin, 1, MPI_DOUBLE, MPI_MIN,
				      MPI_COMM_WORLD);
			if (!rank)
				printf("%s,%s,%d,i%s,%zu,,%.3f,%.3f,%.1f,%.3f,%"
				       ".3f\n",
				       label, mpi, size, names[k], b,
				       pure * 1e6, total * 1e6, ovmin, tp * 1e6,
				       tw * 1e6);
		}
	}
	fflush(stdout);
	MPI_Finalize();
	return 0;
}
