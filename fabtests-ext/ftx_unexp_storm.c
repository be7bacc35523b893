/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Every rank but 0 floods rank 0 with tagged messages of mixed sizes
 * (some injected, some well past any eager limit) before rank 0 has posted
 * a single receive.  Rank 0 then posts its receives, stream by stream and
 * in reverse stream order, and checks that each tag's messages match in
 * send order (FI_ORDER_SAS) with intact data.
 */
#include "common/ftx.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSTREAMS       3
#define POSTED_FLAG(s) (s)

static int count = 2000;
/* how long the receiver waits for senders that flow control holds back */
static unsigned hold_ms = 1500;

static int
opt(int c, const char *arg)
{
	switch (c) {
	case 'c':
		count = atoi(arg);
		return count > 0 ? 0 : -1;
	case 'w':
		hold_ms = (unsigned) atoi(arg);
		return 0;
	}
	return -1;
}

static uint64_t
tag_of(int s, int i)
{
	return ftx_mix((uint64_t) s * 16 + (uint64_t) (i % NSTREAMS));
}

static size_t
size_of(int s, int i)
{
	uint64_t h = ftx_seed((uint64_t) s, (uint64_t) i, 7);

	if (i % 199 == 198)
		return (1u << 20) + h % 4096;
	if (i % 17 == 16)
		return 65537 + h % (128 * 1024);
	if (h % 4 == 0)
		return 4096 + (h >> 8) % 12288;
	return (h >> 8) % 512;
}

static uint64_t
seed_of(int s, int i)
{
	return ftx_seed((uint64_t) s, (uint64_t) i, 0x5701);
}

static void
sender(struct ftx_ctx *ctx)
{
	struct fi_context2 *fctx = calloc((size_t) count, sizeof(*fctx));
	void **bufs = calloc((size_t) count, sizeof(*bufs));
	size_t inject = ctx->info->tx_attr->inject_size, len;
	size_t ncomp = 0;
	struct ftx_comp c;
	int s = ctx->rank, i;

	for (i = 0; i < count; i++) {
		len = size_of(s, i);
		bufs[i] = ftx_alloc(len);
		ftx_fill(bufs[i], len, seed_of(s, i));
	}
	ftx_barrier(ctx);
	for (i = 0; i < count; i++) {
		len = size_of(s, i);
		if (len <= inject && i % 5 == 0) {
			FTX_POST(ctx, fi_tinject(ctx->ep, bufs[i], len,
						 ctx->addrs[0], tag_of(s, i)));
		} else {
			FTX_POST(ctx, fi_tsend(ctx->ep, bufs[i], len, NULL,
					       ctx->addrs[0], tag_of(s, i),
					       &fctx[i]));
			ncomp++;
		}
	}
	atomic_store(ftx_scratch(POSTED_FLAG(s)), 1);
	ftx_log("posted %d sends", count);
	while (ncomp--) {
		ftx_wait_ok(ctx, FTX_TX, &c);
		i = (int) ((struct fi_context2 *) c.op_context - fctx);
		FTX_EXPECT(i >= 0 && i < count,
			   "tx completion with foreign "
			   "context %p",
			   c.op_context);
	}
	for (i = 0; i < count; i++)
		ftx_free(bufs[i]);
	free(bufs);
	free(fctx);
}

static int
reap(struct ftx_ctx *ctx, struct fi_context2 *fctx, void **bufs, bool *seen)
{
	int total = (ctx->nprocs - 1) * count, k, s, i;
	struct ftx_comp c;
	char what[64];

	ftx_wait_ok(ctx, FTX_RX, &c);
	k = (int) ((struct fi_context2 *) c.op_context - fctx);
	FTX_EXPECT(k >= 0 && k < total && !seen[k],
		   "rx completion with bad or repeated context %p",
		   c.op_context);
	seen[k] = true;
	s = k / count + 1;
	i = k % count;
	snprintf(what, sizeof(what), "msg %d from rank %d", i, s);
	FTX_EXPECT(c.tag == tag_of(s, i), "%s: tag 0x%llx", what,
		   (unsigned long long) c.tag);
	FTX_EXPECT(c.len == size_of(s, i),
		   "%s: len %zu, expected %zu (out of order?)", what, c.len,
		   size_of(s, i));
	ftx_verify(bufs[k], size_of(s, i), seed_of(s, i), what);
	ftx_guard_verify(bufs[k], size_of(s, i), what);
	ftx_free(bufs[k]);
	return 1;
}

static void
receiver(struct ftx_ctx *ctx)
{
	int nsend = ctx->nprocs - 1, total = nsend * count;
	struct fi_context2 *fctx = calloc((size_t) total, sizeof(*fctx));
	void **bufs = calloc((size_t) total, sizeof(*bufs));
	bool *seen = calloc((size_t) total, sizeof(*seen));
	size_t rx_size =
		ctx->info->rx_attr->size ? ctx->info->rx_attr->size : 1024;
	uint64_t until;
	bool reverse = !strcmp(ctx->tcase->name, "reverse");
	int s, i, j, st, k, done = 0, posted = 0;

	ftx_barrier(ctx);
	/* receives go up only when every sender is done or stuck */
	until = ftx_now_ns() + (uint64_t) hold_ms * 1000000ull;
	for (;;) {
		for (k = 0, s = 1; s < ctx->nprocs; s++)
			k += (int) atomic_load(ftx_scratch(POSTED_FLAG(s)));
		if (k == nsend || ftx_now_ns() > until)
			break;
		ftx_drain_for(ctx, 1);
	}
	ftx_drain_for(ctx, 50);
	FTX_EXPECT(!ftx_pending(ctx, FTX_RX), "receive completion before any "
					      "receive was posted");
	ftx_log("posting %d receives (%d of %d senders done)", total, k, nsend);

	/*
	 * Never more outstanding receives than rx_attr->size: that limit is
	 * ftx_many_recvs' business, not this test's.  "inorder" posts in
	 * send order; "reverse" posts the last stream first, so receives
	 * that match nothing yet queue up while the unexpected list is full.
	 */
	for (j = 0, st = NSTREAMS - 1, i = st; j < count; j++) {
		if (!reverse) {
			i = j;
		} else if (j) {
			i += NSTREAMS;
			if (i >= count)
				i = --st;
		}
		for (s = 1; s < ctx->nprocs; s++) {
			while (posted - done >= (int) rx_size)
				done += reap(ctx, fctx, bufs, seen);
			k = (s - 1) * count + i;
			bufs[k] = ftx_alloc(size_of(s, i));
			FTX_POST(ctx, fi_trecv(ctx->ep, bufs[k], size_of(s, i),
					       NULL, FI_ADDR_UNSPEC,
					       tag_of(s, i), 0, &fctx[k]));
			posted++;
		}
	}
	while (done < total)
		done += reap(ctx, fctx, bufs, seen);
	free(seen);
	free(bufs);
	free(fctx);
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
	{.name = "inorder", .run = run},
	{.name = "reverse", .run = run},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_unexp_storm",
	.desc = "many unexpected tagged messages of mixed sizes, SAS order",
	.caps = FI_TAGGED,
	.nprocs = 3,
	.min_procs = 2,
	.max_procs = FTX_MAX_PROCS,
	.timeout = 60,
	.optstr = "c:w:",
	.opt = opt,
	.opthelp = "  -c N     messages per sender (default 2000)\n"
		   "  -w MS    longest wait for senders before posting "
		   "(default 1500)\n",
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
