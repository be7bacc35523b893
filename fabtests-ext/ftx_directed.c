/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Several senders use the same tag; rank 0 picks them apart with
 * FI_DIRECTED_RECV receives naming each source, posted before or after the
 * messages arrive.  Every completion's source, as fi_cq_readfrom reports
 * it, must be the sender whose data landed in the buffer.
 */
#include "common/ftx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS	 8
#define SAME_TAG 0x5a5a00000000a5a5ull

static size_t
size_of(int r)
{
	/* odd rounds go past eager limits */
	return r & 1 ? 200000 + (size_t) r : 64 + (size_t) r;
}

static uint64_t
seed_of(int s, int r, int tagged)
{
	return ftx_seed((uint64_t) s, (uint64_t) r, 0xd1 + (uint64_t) tagged);
}

static void
post_recv(struct ftx_ctx *ctx, bool tagged, void *buf, size_t len,
	  fi_addr_t src, void *fctx)
{
	if (tagged)
		FTX_POST(ctx, fi_trecv(ctx->ep, buf, len, NULL, src, SAME_TAG,
				       0, fctx));
	else
		FTX_POST(ctx, fi_recv(ctx->ep, buf, len, NULL, src, fctx));
}

static void
post_send(struct ftx_ctx *ctx, bool tagged, void *buf, size_t len, int dst,
	  void *fctx)
{
	if (tagged)
		FTX_POST(ctx, fi_tsend(ctx->ep, buf, len, NULL, ctx->addrs[dst],
				       SAME_TAG, fctx));
	else
		FTX_POST(ctx, fi_send(ctx->ep, buf, len, NULL, ctx->addrs[dst],
				      fctx));
}

static void
check_src(struct ftx_ctx *ctx, const struct ftx_comp *c, int s,
	  const char *what)
{
	FTX_EXPECT(c->src == ctx->addrs[s],
		   "%s: fi_cq_readfrom source 0x%llx, expected rank %d "
		   "(0x%llx)",
		   what, (unsigned long long) c->src, s,
		   (unsigned long long) ctx->addrs[s]);
}

static void
sender(struct ftx_ctx *ctx, bool tagged, bool expected)
{
	void *bufs[ROUNDS];
	int r;

	for (r = 0; r < ROUNDS; r++) {
		bufs[r] = ftx_alloc(size_of(r));
		ftx_fill(bufs[r], size_of(r), seed_of(ctx->rank, r, tagged));
	}
	if (expected)
		ftx_barrier(ctx);
	for (r = 0; r < ROUNDS; r++)
		post_send(ctx, tagged, bufs[r], size_of(r), 0, NULL);
	if (!expected)
		ftx_barrier(ctx);
	ftx_wait_n_ok(ctx, FTX_TX, ROUNDS);
	for (r = 0; r < ROUNDS; r++)
		ftx_free(bufs[r]);
}

/* receives go up in reverse rank order so arrival order never helps */
static void
receiver(struct ftx_ctx *ctx, bool tagged, bool expected)
{
	int n = ctx->nprocs, total = (n - 1) * ROUNDS, s, r, k, i;
	struct fi_context2 *fctx = calloc((size_t) total, sizeof(*fctx));
	void **bufs = calloc((size_t) total, sizeof(*bufs));
	struct ftx_comp c;
	char what[96];
	int next[FTX_MAX_PROCS] = {0};

	if (!expected) {
		ftx_barrier(ctx);
		ftx_drain_for(ctx, 20);
	}
	for (r = 0; r < ROUNDS; r++)
		for (s = n - 1; s >= 1; s--) {
			k = (s - 1) * ROUNDS + r;
			bufs[k] = ftx_alloc(size_of(r));
			post_recv(ctx, tagged, bufs[k], size_of(r),
				  ctx->addrs[s], &fctx[k]);
		}
	if (expected)
		ftx_barrier(ctx);
	for (i = 0; i < total; i++) {
		ftx_wait_ok(ctx, FTX_RX, &c);
		k = (int) ((struct fi_context2 *) c.op_context - fctx);
		FTX_EXPECT(k >= 0 && k < total, "foreign context %p",
			   c.op_context);
		s = k / ROUNDS + 1;
		r = k % ROUNDS;
		snprintf(what, sizeof(what), "%s receive for rank %d round %d",
			 tagged ? "tagged" : "msg", s, r);
		/*
		 * Matching order is what FI_ORDER_SAS promises and the data
		 * proves it; completion order only with FI_ORDER_STRICT.
		 */
		if (ctx->info->rx_attr->comp_order & FI_ORDER_STRICT)
			FTX_EXPECT(r == next[s],
				   "%s completed out of order "
				   "despite FI_ORDER_STRICT",
				   what);
		next[s]++;
		FTX_EXPECT(c.len == size_of(r), "%s: len %zu", what, c.len);
		check_src(ctx, &c, s, what);
		/* the data says who really sent it */
		ftx_verify(bufs[k], size_of(r), seed_of(s, r, tagged), what);
		ftx_free(bufs[k]);
	}
	free(bufs);
	free(fctx);
}

static int
run_directed(struct ftx_ctx *ctx)
{
	const char *name = ctx->tcase->name;
	bool tagged = !strncmp(name, "tagged", 6);
	bool expected = strstr(name, "unexpected") == NULL;

	if (ctx->rank == 0)
		receiver(ctx, tagged, expected);
	else
		sender(ctx, tagged, expected);
	return 0;
}

/*
 * A receive directed at rank 2 must ignore rank 1's message even when it
 * was posted first; a wildcard receive takes it and reports rank 1.
 */
static int
run_wildcard(struct ftx_ctx *ctx)
{
	struct fi_context2 dctx, wctx, sctx;
	size_t len = 256;
	struct ftx_comp c;
	int tagged;

	for (tagged = 0; tagged < 2; tagged++) {
		void *dbuf = ftx_alloc(len), *wbuf = ftx_alloc(len);

		if (ctx->rank == 0) {
			post_recv(ctx, tagged, dbuf, len, ctx->addrs[2], &dctx);
			post_recv(ctx, tagged, wbuf, len, FI_ADDR_UNSPEC,
				  &wctx);
			ftx_barrier(ctx);
			ftx_wait_ok(ctx, FTX_RX, &c);
			FTX_EXPECT(c.op_context == &wctx,
				   "rank 1's message completed the receive "
				   "directed at rank 2");
			check_src(ctx, &c, 1, "wildcard receive");
			ftx_verify(wbuf, len, seed_of(1, 0, tagged),
				   "wildcard receive");
			ftx_barrier(ctx);
			ftx_wait_ok(ctx, FTX_RX, &c);
			FTX_EXPECT(c.op_context == &dctx,
				   "rank 2's message missed its receive");
			check_src(ctx, &c, 2, "directed receive");
			ftx_verify(dbuf, len, seed_of(2, 0, tagged),
				   "directed receive");
		} else {
			ftx_fill(dbuf, len, seed_of(ctx->rank, 0, tagged));
			ftx_barrier(ctx);
			if (ctx->rank == 1) {
				post_send(ctx, tagged, dbuf, len, 0, &sctx);
				ftx_wait_ok(ctx, FTX_TX, &c);
			}
			ftx_barrier(ctx);
			if (ctx->rank == 2) {
				post_send(ctx, tagged, dbuf, len, 0, &sctx);
				ftx_wait_ok(ctx, FTX_TX, &c);
			}
		}
		ftx_barrier(ctx);
		ftx_free(dbuf);
		ftx_free(wbuf);
	}
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "tagged_expected", .run = run_directed},
	{.name = "tagged_unexpected", .run = run_directed},
	{.name = "msg_expected", .run = run_directed},
	{.name = "msg_unexpected", .run = run_directed},
	{.name = "wildcard", .run = run_wildcard},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_directed",
	.desc = "FI_DIRECTED_RECV with several same-tag senders, FI_SOURCE",
	.caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE,
	.nprocs = 4,
	.min_procs = 3,
	.max_procs = FTX_MAX_PROCS,
	.timeout = 60,
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
