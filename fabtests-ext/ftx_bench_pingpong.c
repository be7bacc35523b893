/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Tagged ping-pong latency between two ranks: half the round-trip time,
 * averaged over timed iterations that follow a warmup.  Prints figures
 * only; it never judges them.
 */
#include "common/ftx.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_SIZES 16
#define TAG	  0x1a7e000000000001ull
#define PROBE	  20

static size_t sizes[MAX_SIZES] = {8, 4096};
static int nsizes = 2;
static int iters = 10000, warmup = 1000;
/* a slow provider gets fewer iterations, never a longer run */
static double budget_s = 4.0;

static int
opt(int c, const char *arg)
{
	switch (c) {
	case 's':
		nsizes = ftx_parse_sizes(arg, sizes, MAX_SIZES);
		return nsizes > 0 ? 0 : -1;
	case 'i':
		iters = atoi(arg);
		return iters > 0 ? 0 : -1;
	case 'w':
		warmup = atoi(arg);
		return warmup >= 0 ? 0 : -1;
	case 'T':
		budget_s = atof(arg);
		return budget_s > 0 ? 0 : -1;
	}
	return -1;
}

static void
round_trip(struct ftx_ctx *ctx, void *sbuf, void *rbuf, size_t len, int peer)
{
	struct fi_context2 sctx, rctx;

	FTX_POST(ctx, fi_trecv(ctx->ep, rbuf, len, NULL, ctx->addrs[peer], TAG,
			       0, &rctx));
	if (ctx->rank == 0) {
		FTX_POST(ctx, fi_tsend(ctx->ep, sbuf, len, NULL,
				       ctx->addrs[peer], TAG, &sctx));
		ftx_wait_n_ok(ctx, FTX_RX, 1);
		ftx_wait_n_ok(ctx, FTX_TX, 1);
	} else {
		ftx_wait_n_ok(ctx, FTX_RX, 1);
		FTX_POST(ctx, fi_tsend(ctx->ep, sbuf, len, NULL,
				       ctx->addrs[peer], TAG, &sctx));
		ftx_wait_n_ok(ctx, FTX_TX, 1);
	}
}

static int
run(struct ftx_ctx *ctx)
{
	int peer = 1 - ctx->rank, s, i, n, w;
	uint64_t t0, t1;
	double per;

	if (ctx->rank == 0) {
		printf("# ftx_bench_pingpong: provider %s, up to %d "
		       "iterations and %.1f s per size, %d warmup\n",
		       ctx->info->fabric_attr->prov_name, iters, budget_s,
		       warmup);
		printf("# %10s %10s %12s\n", "bytes", "iters", "lat_us");
	}
	for (s = 0; s < nsizes; s++) {
		void *sbuf = ftx_alloc(sizes[s]), *rbuf = ftx_alloc(sizes[s]);

		ftx_fill(sbuf, sizes[s], 1);
		/*
		 * A short probe sizes the rest to fit the time budget; the
		 * first few round trips pay for connection setup, not it.
		 */
		for (i = 0; i < 5; i++)
			round_trip(ctx, sbuf, rbuf, sizes[s], peer);
		t0 = ftx_now_ns();
		for (i = 0; i < PROBE; i++)
			round_trip(ctx, sbuf, rbuf, sizes[s], peer);
		per = (double) (ftx_now_ns() - t0) / PROBE / 1e9;
		n = iters;
		if (per * (n + warmup) > budget_s)
			n = (int) (budget_s / per * 0.8) + 1;
		w = warmup < n / 10 ? warmup : n / 10;
		n = (int) ftx_bcast(ctx, 32 + 2 * s, (uint64_t) n);
		w = (int) ftx_bcast(ctx, 33 + 2 * s, (uint64_t) w);
		for (i = 0; i < w; i++)
			round_trip(ctx, sbuf, rbuf, sizes[s], peer);
		ftx_barrier(ctx);
		t0 = ftx_now_ns();
		for (i = 0; i < n; i++)
			round_trip(ctx, sbuf, rbuf, sizes[s], peer);
		t1 = ftx_now_ns();
		if (ctx->rank == 0)
			printf("  %10zu %10d %12.3f\n", sizes[s], n,
			       (double) (t1 - t0) / 1e3 / n / 2);
		ftx_free(sbuf);
		ftx_free(rbuf);
	}
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "latency", .run = run},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_bench_pingpong",
	.desc = "tagged ping-pong latency (half round trip, microseconds)",
	.caps = FI_TAGGED | FI_DIRECTED_RECV,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = 2,
	.timeout = 120,
	.optstr = "s:i:w:T:",
	.opt = opt,
	.opthelp = "  -s LIST  sizes (default 8,4k)\n"
		   "  -i N     timed iterations per size (default 10000)\n"
		   "  -w N     warmup iterations (default 1000)\n"
		   "  -T SEC   time budget per size (default 4)\n",
	.cases = cases,
	.quiet = true,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
