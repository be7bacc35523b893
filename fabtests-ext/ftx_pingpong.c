/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Tagged and untagged ping-pong over a range of sizes that straddle the
 * usual protocol switch points (inject, eager, rendezvous), with every
 * byte verified in both directions and a guard after each receive buffer.
 */
#include "common/ftx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 32

static size_t sizes[MAX_SIZES] = {0,	1,    7,     64,      4095,
				  4096, 4097, 65536, 1048579, 16777216};
static int nsizes = 10;
static int iters = 2;

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
	}
	return -1;
}

static uint64_t
make_tag(int si, int it, int dir)
{
	/* set bits everywhere, so a provider that drops high bits fails */
	return 0xf0e1d2c3b4a59600ull ^ ((uint64_t) si << 8) ^
	       ((uint64_t) it << 4) ^ (uint64_t) dir ^ ((uint64_t) si << 56);
}

static void
post_recv(struct ftx_ctx *ctx, bool tagged, void *buf, size_t len, uint64_t tag,
	  struct fi_context2 *fctx)
{
	if (tagged)
		FTX_POST(ctx, fi_trecv(ctx->ep, buf, len, NULL, FI_ADDR_UNSPEC,
				       tag, 0, fctx));
	else
		FTX_POST(ctx, fi_recv(ctx->ep, buf, len, NULL, FI_ADDR_UNSPEC,
				      fctx));
}

static void
post_send(struct ftx_ctx *ctx, bool tagged, void *buf, size_t len, int peer,
	  uint64_t tag, struct fi_context2 *fctx)
{
	if (tagged)
		FTX_POST(ctx, fi_tsend(ctx->ep, buf, len, NULL,
				       ctx->addrs[peer], tag, fctx));
	else
		FTX_POST(ctx, fi_send(ctx->ep, buf, len, NULL, ctx->addrs[peer],
				      fctx));
}

static void
check_rx(struct ftx_ctx *ctx, bool tagged, void *buf, size_t len, uint64_t tag,
	 struct fi_context2 *fctx, uint64_t seed, const char *what)
{
	struct ftx_comp c;
	uint64_t kind = tagged ? FI_TAGGED : FI_MSG;

	ftx_wait_ok(ctx, FTX_RX, &c);
	FTX_EXPECT(c.op_context == fctx, "%s: rx op_context %p, expected %p",
		   what, c.op_context, (void *) fctx);
	FTX_EXPECT(c.len == len, "%s: rx len %zu, expected %zu", what, c.len,
		   len);
	FTX_EXPECT((c.flags & (FI_RECV | kind)) == (FI_RECV | kind),
		   "%s: rx flags 0x%llx lack FI_RECV|%s", what,
		   (unsigned long long) c.flags,
		   tagged ? "FI_TAGGED" : "FI_MSG");
	if (tagged)
		FTX_EXPECT(c.tag == tag, "%s: rx tag 0x%llx, expected 0x%llx",
			   what, (unsigned long long) c.tag,
			   (unsigned long long) tag);
	ftx_verify(buf, len, seed, what);
	ftx_guard_verify(buf, len, what);
}

static void
check_tx(struct ftx_ctx *ctx, bool tagged, struct fi_context2 *fctx,
	 const char *what)
{
	struct ftx_comp c;
	uint64_t kind = tagged ? FI_TAGGED : FI_MSG;

	ftx_wait_ok(ctx, FTX_TX, &c);
	FTX_EXPECT(c.op_context == fctx, "%s: tx op_context %p, expected %p",
		   what, c.op_context, (void *) fctx);
	FTX_EXPECT((c.flags & (FI_SEND | kind)) == (FI_SEND | kind),
		   "%s: tx flags 0x%llx lack FI_SEND|%s", what,
		   (unsigned long long) c.flags,
		   tagged ? "FI_TAGGED" : "FI_MSG");
}

/*
 * Even iterations pre-post the receives before a barrier (expected path);
 * odd ones send first and post after the barrier (likely unexpected).
 */
static void
one_exchange(struct ftx_ctx *ctx, int a, int b, bool tagged, int si, int it)
{
	size_t len = sizes[si];
	bool expected = !(it & 1), ping = ctx->rank == a;
	int peer = ping ? b : a;
	uint64_t tag_ab = make_tag(si, it, 0), tag_ba = make_tag(si, it, 1);
	uint64_t seed_ab = ftx_seed((uint64_t) a << 8 | (uint64_t) b, len,
				    (uint64_t) it << 1 | tagged);
	uint64_t seed_ba = ~seed_ab;
	struct fi_context2 sctx, rctx;
	void *sbuf, *rbuf;
	char what[96];

	if (ctx->rank != a && ctx->rank != b) {
		ftx_barrier(ctx);
		return;
	}
	snprintf(what, sizeof(what), "%s %zu B %s %d->%d it %d",
		 tagged ? "tagged" : "msg", len,
		 expected ? "expected" : "unexpected", ping ? a : b,
		 ping ? b : a, it);

	sbuf = ftx_alloc(len);
	rbuf = ftx_alloc(len);
	ftx_fill(sbuf, len, ping ? seed_ab : seed_ba);

	if (expected) {
		post_recv(ctx, tagged, rbuf, len, ping ? tag_ba : tag_ab,
			  &rctx);
		ftx_barrier(ctx);
		if (ping) {
			post_send(ctx, tagged, sbuf, len, peer, tag_ab, &sctx);
			check_rx(ctx, tagged, rbuf, len, tag_ba, &rctx, seed_ba,
				 what);
			check_tx(ctx, tagged, &sctx, what);
		} else {
			check_rx(ctx, tagged, rbuf, len, tag_ab, &rctx, seed_ab,
				 what);
			post_send(ctx, tagged, sbuf, len, peer, tag_ba, &sctx);
			check_tx(ctx, tagged, &sctx, what);
		}
	} else if (ping) {
		post_send(ctx, tagged, sbuf, len, peer, tag_ab, &sctx);
		ftx_barrier(ctx);
		post_recv(ctx, tagged, rbuf, len, tag_ba, &rctx);
		check_tx(ctx, tagged, &sctx, what);
		check_rx(ctx, tagged, rbuf, len, tag_ba, &rctx, seed_ba, what);
	} else {
		ftx_barrier(ctx);
		/* give the ping time to land in the unexpected queue */
		ftx_drain_for(ctx, 2);
		post_recv(ctx, tagged, rbuf, len, tag_ab, &rctx);
		check_rx(ctx, tagged, rbuf, len, tag_ab, &rctx, seed_ab, what);
		post_send(ctx, tagged, sbuf, len, peer, tag_ba, &sctx);
		check_tx(ctx, tagged, &sctx, what);
	}
	ftx_free(sbuf);
	ftx_free(rbuf);
}

static int
run(struct ftx_ctx *ctx)
{
	int a, b, si, it, mode;

	for (a = 0; a < ctx->nprocs; a++)
		for (b = a + 1; b < ctx->nprocs; b++)
			for (mode = 0; mode < 2; mode++)
				for (si = 0; si < nsizes; si++)
					for (it = 0; it < iters; it++)
						one_exchange(ctx, a, b,
							     mode == 0, si, it);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "pingpong", .run = run},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_pingpong",
	.desc = "tagged and untagged ping-pong, 0 B to 16 MiB, all pairs",
	.caps = FI_MSG | FI_TAGGED,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = FTX_MAX_PROCS,
	.timeout = 60,
	.optstr = "s:i:",
	.opt = opt,
	.opthelp = "  -s LIST  comma-separated sizes\n"
		   "  -i N     iterations per size (even: expected, odd: "
		   "unexpected; default 2)\n",
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
