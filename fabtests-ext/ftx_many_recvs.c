/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Rank 0 posts thousands of tagged receives, each with its own 64-bit tag,
 * before anything is sent; the other ranks then send the matching messages
 * in a shuffled order.  Every receive must complete exactly once with its
 * own tag, length and data, whatever the arrival order.
 */
#include "common/ftx.h"

#include <stdio.h>
#include <stdlib.h>

static int count = 5000;

static int
opt(int c, const char *arg)
{
	if (c != 'c')
		return -1;
	count = atoi(arg);
	return count > 0 ? 0 : -1;
}

/* mix() is a bijection, so the tags are distinct and use all 64 bits */
static uint64_t
tag_of(int i)
{
	return ftx_mix((uint64_t) i ^ 0x6d616e79ull);
}

static size_t
size_of(int i)
{
	if (i % 97 == 96)
		return 70000 + (size_t) i;
	return ftx_mix((uint64_t) i) % 1024;
}

static uint64_t
seed_of(int i)
{
	return ftx_seed((uint64_t) i, 0x6d72, 1);
}

/* a receive queue this deep is a requirement of the test, not a guess */
static void
hints(struct ftx_ctx *ctx, struct fi_info *h)
{
	(void) ctx;
	h->rx_attr->size = (size_t) count;
}

static void
receiver(struct ftx_ctx *ctx)
{
	struct fi_context2 *fctx = calloc((size_t) count, sizeof(*fctx));
	void **bufs = calloc((size_t) count, sizeof(*bufs));
	bool *seen = calloc((size_t) count, sizeof(*seen));
	struct ftx_comp c;
	char what[64];
	int i, k;
	ssize_t ret;

	for (i = 0; i < count; i++) {
		bufs[i] = ftx_alloc(size_of(i));
		ret = fi_trecv(ctx->ep, bufs[i], size_of(i), NULL,
			       FI_ADDR_UNSPEC, tag_of(i), 0, &fctx[i]);
		/* nothing can complete yet, so -FI_EAGAIN would never clear */
		if (ret)
			ftx_fail("fi_trecv #%d of %d (rx_attr->size %zu): %s "
				 "(%zd)",
				 i, count, ctx->info->rx_attr->size,
				 fi_strerror((int) -ret), ret);
	}
	ftx_drain_for(ctx, 10);
	FTX_EXPECT(!ftx_pending(ctx, FTX_RX), "a receive completed before "
					      "anything was sent");
	ftx_barrier(ctx);

	for (i = 0; i < count; i++) {
		ftx_wait_ok(ctx, FTX_RX, &c);
		k = (int) ((struct fi_context2 *) c.op_context - fctx);
		FTX_EXPECT(k >= 0 && k < count && !seen[k],
			   "completion with a bad or repeated context %p",
			   c.op_context);
		seen[k] = true;
		snprintf(what, sizeof(what), "receive %d", k);
		FTX_EXPECT(c.tag == tag_of(k),
			   "%s: tag 0x%016llx, expected 0x%016llx", what,
			   (unsigned long long) c.tag,
			   (unsigned long long) tag_of(k));
		FTX_EXPECT(c.len == size_of(k), "%s: len %zu, expected %zu",
			   what, c.len, size_of(k));
		ftx_verify(bufs[k], size_of(k), seed_of(k), what);
		ftx_guard_verify(bufs[k], size_of(k), what);
		ftx_free(bufs[k]);
	}
	ftx_drain_for(ctx, 20);
	FTX_EXPECT(!ftx_pending(ctx, FTX_RX), "more completions than receives");
	free(seen);
	free(bufs);
	free(fctx);
}

static void
sender(struct ftx_ctx *ctx)
{
	int nsend = ctx->nprocs - 1, s = ctx->rank - 1, n = 0, i, j, t;
	int *order = calloc((size_t) count, sizeof(*order));
	void **bufs = calloc((size_t) count, sizeof(*bufs));
	uint64_t r = ftx_mix((uint64_t) ctx->rank);

	for (i = s; i < count; i += nsend)
		order[n++] = i;
	/* Fisher-Yates with a fixed seed: reproducible, far from sorted */
	for (i = n - 1; i > 0; i--) {
		r = ftx_mix(r);
		j = (int) (r % (uint64_t) (i + 1));
		t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (i = 0; i < n; i++) {
		bufs[i] = ftx_alloc(size_of(order[i]));
		ftx_fill(bufs[i], size_of(order[i]), seed_of(order[i]));
	}
	ftx_barrier(ctx);
	for (i = 0; i < n; i++)
		FTX_POST(ctx,
			 fi_tsend(ctx->ep, bufs[i], size_of(order[i]), NULL,
				  ctx->addrs[0], tag_of(order[i]), NULL));
	ftx_wait_n_ok(ctx, FTX_TX, (size_t) n);
	for (i = 0; i < n; i++)
		ftx_free(bufs[i]);
	free(bufs);
	free(order);
}

static int
run(struct ftx_ctx *ctx)
{
	if (ctx->rank == 0)
		receiver(ctx);
	else
		sender(ctx);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "many_recvs", .run = run},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_many_recvs",
	.desc = "thousands of outstanding tagged receives, shuffled sends",
	.caps = FI_TAGGED,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = FTX_MAX_PROCS,
	.timeout = 60,
	.optstr = "c:",
	.opt = opt,
	.opthelp = "  -c N     outstanding receives (default 5000); the test "
		   "asks for rx_attr->size >= N\n",
	.hints = hints,
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
