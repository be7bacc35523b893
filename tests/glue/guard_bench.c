/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the page guard costs (T-NBC, docs/t-nbc-design.md): protecting a
 * range, and opening it on a fault by moving the staging pages over it
 * (mremap, what the guard does) against copying them (mprotect back and
 * memcpy, the alternative), at sizes from one page to 8 MiB.  Figures
 * only (medians of --reps, us), printed as CSV; nothing passes or fails.
 *
 * usage: guard_bench [--reps N]
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../mpi-glue/core/tg_guard.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double med(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t sizes[] = {4096, 65536, 1 << 20, 8 << 20};
	int reps = 50;

	if (argc > 2 && !strcmp(argv[1], "--reps"))
		reps = atoi(argv[2]);
	if (reps < 1 || tg_guard_init())
		return 1;
	printf("bytes,protect_us,fault_mremap_us,fault_total_us,"
	       "mprotect_us,copy_us,fill_us\n");
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len = sizes[k] / pg * pg;
		double *pr = calloc((size_t)reps, sizeof(double)),
		       *fm = calloc((size_t)reps, sizeof(double)),
		       *ft = calloc((size_t)reps, sizeof(double)),
		       *mp = calloc((size_t)reps, sizeof(double)),
		       *cp = calloc((size_t)reps, sizeof(double)),
		       *fl = calloc((size_t)reps, sizeof(double));
		unsigned char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		unsigned char *spare = mmap(NULL, len, PROT_READ | PROT_WRITE,
					    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (buf == MAP_FAILED || spare == MAP_FAILED)
			return 1;
		memset(buf, 1, len);
		memset(spare, 2, len);
		for (int i = 0; i < reps; i++) {
			atomic_uint ready = 0;
			struct tg_guard_range *r;
			void *stage;
			double t0, t1, t2, t3;

			/* the guard: protect, the data lands in fresh staging
			 * pages (the transfer's faults counted apart), a read
			 * moves them over the range */
			t0 = now_us();
			if (tg_guard_protect(buf, len, &ready, 1, &stage, &r))
				return 1;
			t1 = now_us();
			memset(stage, (int)i, len);
			t2 = now_us();
			atomic_store(&ready, 1);
			(void)*(volatile unsigned char *)buf;
			t3 = now_us();
			tg_guard_release(r);
			pr[i] = t1 - t0;
			fl[i] = t2 - t1;
			fm[i] = t3 - t2;
			ft[i] = t3 - t1;
			/* the alternative: the data in a staging buffer already
			 * faulted in, the range made readable and copied to */
			t0 = now_us();
			mprotect(buf, len, PROT_NONE);
			mprotect(buf, len, PROT_READ | PROT_WRITE);
			t1 = now_us();
			memcpy(buf, spare, len);
			t2 = now_us();
			mp[i] = t1 - t0;
			cp[i] = t2 - t1;
		}
		printf("%zu,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n", len,
		       med(pr, reps), med(fm, reps), med(ft, reps),
		       med(mp, reps), med(cp, reps), med(fl, reps));
		munmap(buf, len);
		munmap(spare, len);
		free(pr);
		free(fm);
		free(ft);
		free(mp);
		free(cp);
		free(fl);
	}
	tg_guard_fini();
	return 0;
}
