/*
 * The main job: a small MPI program that checks its results and reports
 * which libfabric provider carried them.  Every rank looks for
 * libtnbc-fi.so among the objects loaded in its own process, so the
 * report is a fact about this run, not about the command line.
 *
 * Usage: tnbc_main_job [--require-tnbc]
 */
#define _GNU_SOURCE
#include <link.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define A2A_COUNT 4096
#define RED_COUNT (1 << 18)

static char tnbc_path[512];

static int find_tnbc(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *base = strrchr(info->dlpi_name, '/');

	(void)size;
	(void)arg;
	base = base ? base + 1 : info->dlpi_name;
	if (!strcmp(base, "libtnbc-fi.so")) {
		snprintf(tnbc_path, sizeof(tnbc_path), "%s", info->dlpi_name);
		return 1;
	}
	return 0;
}

static int check_ring(int rank, int size)
{
	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	size_t n = 1 << 20; /* large enough for the rendezvous path */
	int *out = malloc(n * sizeof(int)), *in = malloc(n * sizeof(int));
	int bad = 0;

	for (size_t i = 0; i < n; i++)
		out[i] = rank * 7 + (int)i;
	MPI_Sendrecv(out, (int)n, MPI_INT, right, 1, in, (int)n, MPI_INT, left,
		     1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	for (size_t i = 0; i < n; i++)
		bad += in[i] != left * 7 + (int)i;
	free(out);
	free(in);
	return bad;
}

static int check_allreduce(int rank, int size)
{
	double *v = malloc(RED_COUNT * sizeof(double));
	double *r = malloc(RED_COUNT * sizeof(double));
	int bad = 0;

	for (int i = 0; i < RED_COUNT; i++)
		v[i] = rank + i * 0.5;
	MPI_Allreduce(v, r, RED_COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < RED_COUNT; i++)
		bad += r[i] != size * (size - 1) / 2.0 + size * i * 0.5;
	free(v);
	free(r);
	return bad;
}

static int check_alltoall(int rank, int size)
{
	size_t n = (size_t)A2A_COUNT * size;
	int64_t *s = malloc(n * sizeof(*s)), *r = malloc(n * sizeof(*r));
	int bad = 0;

	for (int p = 0; p < size; p++)
		for (int i = 0; i < A2A_COUNT; i++)
			s[(size_t)p * A2A_COUNT + i] =
				((int64_t)rank << 32) | ((int64_t)p << 16) | i;
	MPI_Alltoall(s, A2A_COUNT, MPI_INT64_T, r, A2A_COUNT, MPI_INT64_T,
		     MPI_COMM_WORLD);
	for (int p = 0; p < size; p++)
		for (int i = 0; i < A2A_COUNT; i++)
			bad += r[(size_t)p * A2A_COUNT + i] !=
			       (((int64_t)p << 32) | ((int64_t)rank << 16) | i);
	free(s);
	free(r);
	return bad;
}

int main(int argc, char **argv)
{
	int require = argc > 1 && !strcmp(argv[1], "--require-tnbc");
	int rank, size, bad[3], all_bad[3], loaded, nloaded;
	double t0, t;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);

	dl_iterate_phdr(find_tnbc, NULL);
	loaded = tnbc_path[0] != '\0';
	MPI_Allreduce(&loaded, &nloaded, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

	t0 = MPI_Wtime();
	bad[0] = check_ring(rank, size);
	bad[1] = check_allreduce(rank, size);
	bad[2] = check_alltoall(rank, size);
	t = MPI_Wtime() - t0;
	MPI_Allreduce(bad, all_bad, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

	if (rank == 0) {
		printf("tnbc main job: %d ranks\n", size);
		printf("  ring exchange of 4 MiB per rank (rendezvous): %s\n",
		       all_bad[0] ? "WRONG" : "correct");
		printf("  allreduce of %d doubles (sum):              %s\n",
		       RED_COUNT, all_bad[1] ? "WRONG" : "correct");
		printf("  alltoall of %d int64 per pair:              %s\n",
		       A2A_COUNT, all_bad[2] ? "WRONG" : "correct");
		printf("  provider: libtnbc-fi.so loaded in %d of %d ranks%s%s\n",
		       nloaded, size, loaded ? ": " : "",
		       loaded ? tnbc_path : "");
		printf("  time for the three checks: %.3f s\n", t);
	}
	MPI_Finalize();
	if (all_bad[0] || all_bad[1] || all_bad[2])
		return 1;
	if (require && nloaded != size) {
		if (rank == 0)
			fprintf(stderr, "tnbc was not the provider in use\n");
		return 1;
	}
	return 0;
}
