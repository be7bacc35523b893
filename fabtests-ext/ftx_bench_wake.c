/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * How long a message waits for a receiver that does not call in: rank 1
 * posts a receive and then only watches the receive buffer's memory,
 * sleeping 10 us between looks and calling nothing, while rank 0, after a gap
 * long enough for rank 1's progress engine to go to sleep, sends a message
 * holding the time it was sent (CLOCK_MONOTONIC, one clock for every process of
 * the machine).  The delay is from that time until rank 1 sees the bytes in its
 * buffer: the provider's independent progress, its wake-up included. Prints the
 * median and spread over the iterations; figures only.
 */
#include "common/ftx.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#define TAG 0x3a4e000000000001ull

static int iters = 100;
static int gap_ms = 20;

static int
opt(int c, const char *arg)
{
	switch (c) {
	case 'i':
		iters = atoi(arg);
		return iters > 0 && iters <= 100000 ? 0 : -1;
	case 'g':
		gap_ms = atoi(arg);
		return gap_ms >= 0 ? 0 : -1;
	}
	return -1;
}

static int
run(struct ftx_ctx *ctx)
{
	uint64_t *delay = calloc((size_t) iters, sizeof(*delay));
	struct fi_context2 sctx, rctx;
	volatile uint64_t *rbuf = ftx_alloc(64);
	uint64_t *sbuf = ftx_alloc(64);
	struct timespec gap = {.tv_sec = gap_ms / 1000,
			       .tv_nsec = (long) (gap_ms % 1000) * 1000000};
	struct timespec look = {.tv_nsec = 10000};
	int i;

	/* the looks' own slack: 1 ns rather than the default 50 us */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	if (!delay)
		ftx_fail("out of memory");
	for (i = 0; i < iters; i++) {
		if (ctx->rank == 1) {
			rbuf[0] = 0;
			FTX_POST(ctx, fi_trecv(ctx->ep, (void *) rbuf, 64, NULL,
					       ctx->addrs[0], TAG, 0, &rctx));
		}
		ftx_barrier(ctx);
		if (ctx->rank == 0) {
			/* the receiver's engine goes to sleep meanwhile */
			nanosleep(&gap, NULL);
			sbuf[0] = ftx_now_ns();
			FTX_POST(ctx, fi_tsend(ctx->ep, sbuf, 64, NULL,
					       ctx->addrs[1], TAG, &sctx));
			ftx_wait_n_ok(ctx, FTX_TX, 1);
			continue;
		}
		/* nothing but memory until the bytes are there, looked at
		 * every 10 us: the receiver sleeps in between, as one that
		 * computes elsewhere would leave the CPU (a spinning one
		 * keeps a SCHED_BATCH engine waiting for its time slice) */
		while (!rbuf[0]) {
			nanosleep(&look, NULL);
			if (ftx_expired(ctx))
				ftx_fail("iteration %d: the message never "
					 "arrived without a call",
					 i);
		}
		delay[i] = ftx_now_ns() - rbuf[0];
		ftx_wait_n_ok(ctx, FTX_RX, 1);
	}
	ftx_barrier(ctx);
	if (ctx->rank == 1) {
		qsort(delay, (size_t) iters, sizeof(*delay), ftx_cmp_u64);
		printf("# ftx_bench_wake: provider %s, %d messages of 64 B, "
		       "%d ms apart, receiver not calling in\n",
		       ctx->info->fabric_attr->prov_name, iters, gap_ms);
		printf("# %10s %10s %10s %10s %10s\n", "gap_ms", "p10_us",
		       "median_us", "p90_us", "max_us");
		printf("  %10d %10.1f %10.1f %10.1f %10.1f\n", gap_ms,
		       delay[iters / 10] / 1e3, delay[iters / 2] / 1e3,
		       delay[iters * 9 / 10] / 1e3, delay[iters - 1] / 1e3);
	}
	ftx_free((void *) rbuf);
	ftx_free(sbuf);
	free(delay);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "wake", .run = run},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_bench_wake",
	.desc = "delay of a message to a receiver that does not call in "
		"(independent progress, microseconds)",
	.caps = FI_TAGGED | FI_DIRECTED_RECV,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = 2,
	.timeout = 300,
	.optstr = "i:g:",
	.opt = opt,
	.opthelp = "  -i N     messages (default 100)\n"
		   "  -g MS    gap before each message (default 20)\n",
	.cases = cases,
	.quiet = true,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
