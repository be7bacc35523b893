/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Streaming tagged bandwidth from rank 0 to rank 1: windows of outstanding
 * sends, each acknowledged by a small message once the receiver has all of
 * it.  Reports GB/s (1e9 bytes per second).  Figures only, no verdicts.
 */
#include "common/ftx.h"

#include <stdio.h>
#include <stdlib.h>

#define MAX_SIZES 16
#define DATA_TAG  0xb0000000000000d1ull
#define ACK_TAG	  0xb0000000000000a2ull

static size_t sizes[MAX_SIZES] = {65536, 1048576, 16777216};
static int nsizes = 3;
static int window = 64;
/* bytes moved per size; enough to dwarf the startup costs */
static uint64_t target = 1ull << 30;
/* a slow provider moves fewer bytes, never for longer */
static double budget_s = 3.0;

static int
opt(int c, const char *arg)
{
	switch (c) {
	case 's':
		nsizes = ftx_parse_sizes(arg, sizes, MAX_SIZES);
		return nsizes > 0 ? 0 : -1;
	case 'W':
		window = atoi(arg);
		return window > 0 ? 0 : -1;
	case 'B':
		target = strtoull(arg, NULL, 0) << 20;
		return target ? 0 : -1;
	case 'T':
		budget_s = atof(arg);
		return budget_s > 0 ? 0 : -1;
	}
	return -1;
}

static void
post_window(struct ftx_ctx *ctx, void *buf, size_t len)
{
	int i;

	for (i = 0; i < window; i++) {
		if (ctx->rank == 0)
			FTX_POST(ctx, fi_tsend(ctx->ep, buf, len, NULL,
					       ctx->addrs[1], DATA_TAG, NULL));
		else
			FTX_POST(ctx,
				 fi_trecv(ctx->ep, buf, len, NULL,
					  ctx->addrs[0], DATA_TAG, 0, NULL));
	}
}

static void
windows(struct ftx_ctx *ctx, void *buf, size_t len, int n)
{
	char ack[4] = {0};
	int it;

	for (it = 0; it < n; it++) {
		if (ctx->rank == 0) {
			FTX_POST(ctx,
				 fi_trecv(ctx->ep, ack, sizeof(ack), NULL,
					  ctx->addrs[1], ACK_TAG, 0, NULL));
			post_window(ctx, buf, len);
			ftx_wait_n_ok(ctx, FTX_TX, (size_t) window);
			ftx_wait_n_ok(ctx, FTX_RX, 1);
		} else {
			/* the next window is posted before the ack goes */
			ftx_wait_n_ok(ctx, FTX_RX, (size_t) window);
			if (it + 1 < n)
				post_window(ctx, buf, len);
			FTX_POST(ctx, fi_tsend(ctx->ep, ack, sizeof(ack), NULL,
					       ctx->addrs[0], ACK_TAG, NULL));
			ftx_wait_n_ok(ctx, FTX_TX, 1);
		}
	}
}

static int
run(struct ftx_ctx *ctx)
{
	uint64_t t0, t1;
	double per;
	int s, n;

	if (ctx->rank == 0) {
		printf("# ftx_bench_bw: provider %s, window %d, up to %llu "
		       "MiB and %.1f s per size\n",
		       ctx->info->fabric_attr->prov_name, window,
		       (unsigned long long) (target >> 20), budget_s);
		printf("# %10s %10s %12s\n", "bytes", "msgs", "GB/s");
	}
	for (s = 0; s < nsizes; s++) {
		size_t len = sizes[s];
		void *buf = ftx_alloc(len);

		n = (int) (target / ((uint64_t) len * (uint64_t) window));
		if (n < 2)
			n = 2;
		ftx_fill(buf, len, 2);
		/* one untimed window warms caches, connections, pools */
		if (ctx->rank == 1)
			post_window(ctx, buf, len);
		t0 = ftx_now_ns();
		windows(ctx, buf, len, 1);
		per = (double) (ftx_now_ns() - t0) / 1e9;
		if (per * n > budget_s)
			n = (int) (budget_s / per) + 1;
		n = (int) ftx_bcast(ctx, 32 + s, (uint64_t) n);
		if (ctx->rank == 1)
			post_window(ctx, buf, len);
		ftx_barrier(ctx);
		t0 = ftx_now_ns();
		windows(ctx, buf, len, n);
		t1 = ftx_now_ns();
		if (ctx->rank == 0)
			printf("  %10zu %10d %12.3f\n", len, n * window,
			       (double) len * window * n / (double) (t1 - t0));
		ftx_free(buf);
	}
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "bandwidth", .run = run},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_bench_bw",
	.desc = "streaming tagged bandwidth with a window of sends (GB/s)",
	.caps = FI_TAGGED | FI_DIRECTED_RECV,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = 2,
	.timeout = 120,
	.optstr = "s:W:B:T:",
	.opt = opt,
	.opthelp = "  -s LIST  sizes (default 64k,1m,16m)\n"
		   "  -W N     sends in flight (default 64)\n"
		   "  -B MIB   data moved per size (default 1024)\n"
		   "  -T SEC   time budget per size (default 3)\n",
	.cases = cases,
	.quiet = true,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
