/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A message longer than the receive buffer: the receive completes in error
 * with FI_ETRUNC and olen = the bytes that did not fit, the buffer holds the
 * leading part and nothing past its end is touched, the send still succeeds,
 * and the endpoint goes on working.  Covers eager and rendezvous sizes,
 * with the receive posted first or after the message arrived.
 */
#include "common/ftx.h"

#include <stdio.h>
#include <string.h>

static const struct {
	size_t send, recv;
} pairs[] = {
	{64, 0},       {100, 50},	  {4097, 4096},	  {20000, 8000},
	{65536, 1000}, {1048576, 524288}, {1048576, 100}, {4194304 + 3, 65536},
};
#define NPAIRS (sizeof(pairs) / sizeof(pairs[0]))

static void
one(struct ftx_ctx *ctx, bool tagged, bool expected, size_t slen, size_t rlen,
    uint64_t tag)
{
	uint64_t seed = ftx_seed(slen, rlen, tag);
	struct fi_context2 fctx;
	struct ftx_comp c;
	char what[96], bad[400];
	uint64_t saved_deadline = ctx->deadline_ns;
	int n = 0;
	void *buf;

	snprintf(what, sizeof(what), "%s %zu B into %zu B (%s)",
		 tagged ? "tagged" : "msg", slen, rlen,
		 expected ? "posted first" : "unexpected");
	ctx->what = what;
	/* a stuck pair should not eat the whole test timeout */
	if (ctx->deadline_ns > ftx_now_ns() + 10000000000ull)
		ctx->deadline_ns = ftx_now_ns() + 10000000000ull;
	if (ctx->rank == 0) {
		buf = ftx_alloc(slen);
		ftx_fill(buf, slen, seed);
		if (expected)
			ftx_barrier(ctx);
		if (tagged)
			FTX_POST(ctx, fi_tsend(ctx->ep, buf, slen, NULL,
					       ctx->addrs[1], tag, &fctx));
		else
			FTX_POST(ctx, fi_send(ctx->ep, buf, slen, NULL,
					      ctx->addrs[1], &fctx));
		if (!expected)
			ftx_barrier(ctx);
		ftx_wait_comp(ctx, FTX_TX, &c);
		FTX_EXPECT(c.op_context == &fctx, "%s: tx context %p", what,
			   c.op_context);
		/* truncation is the receiver's error alone */
		FTX_SOFT(!c.err, "%s: the send failed: %s (%s)", what,
			 fi_strerror(c.err), c.errstr);
		ftx_free(buf);
		ctx->what = NULL;
		ctx->deadline_ns = saved_deadline;
		return;
	}

	buf = ftx_alloc(rlen);
	if (!expected) {
		ftx_barrier(ctx);
		ftx_drain_for(ctx, 5);
	}
	if (tagged)
		FTX_POST(ctx, fi_trecv(ctx->ep, buf, rlen, NULL, FI_ADDR_UNSPEC,
				       tag, 0, &fctx));
	else
		FTX_POST(ctx, fi_recv(ctx->ep, buf, rlen, NULL, FI_ADDR_UNSPEC,
				      &fctx));
	if (expected)
		ftx_barrier(ctx);
	ftx_wait_comp(ctx, FTX_RX, &c);
	/* report every deviation at once: providers differ in several */
	if (c.err != FI_ETRUNC)
		n += snprintf(bad + n, sizeof(bad) - (size_t) n,
			      "; err %d (%s), expected FI_ETRUNC (%d)", c.err,
			      c.err ? fi_strerror(c.err) : "success",
			      FI_ETRUNC);
	if (c.op_context != &fctx)
		n += snprintf(bad + n, sizeof(bad) - (size_t) n,
			      "; context %p, expected %p", c.op_context,
			      (void *) &fctx);
	if (c.olen != slen - rlen)
		n += snprintf(bad + n, sizeof(bad) - (size_t) n,
			      "; olen %zu, expected %zu", c.olen, slen - rlen);
	if (c.len != rlen)
		n += snprintf(bad + n, sizeof(bad) - (size_t) n,
			      "; len %zu, expected the %zu bytes placed", c.len,
			      rlen);
	if (tagged && c.tag != tag)
		n += snprintf(bad + n, sizeof(bad) - (size_t) n,
			      "; tag 0x%llx, expected 0x%llx",
			      (unsigned long long) c.tag,
			      (unsigned long long) tag);
	/* keep going: the other sizes tell which protocol is wrong */
	FTX_SOFT(!n, "%s%s", what, bad);
	ftx_guard_verify(buf, rlen, what);
	ftx_verify(buf, rlen, seed, what);
	ftx_free(buf);
	ctx->what = NULL;
	ctx->deadline_ns = saved_deadline;
}

/* after all that, an ordinary message still gets through intact */
static void
sanity(struct ftx_ctx *ctx, bool tagged)
{
	size_t len = 1048576 + 7;
	uint64_t seed = ftx_seed(1, 2, 3), tag = 0x77;
	struct fi_context2 fctx;
	struct ftx_comp c;
	void *buf = ftx_alloc(len);

	ctx->what = "the ordinary message after the truncated ones";
	if (ctx->rank == 1) {
		if (tagged)
			FTX_POST(ctx, fi_trecv(ctx->ep, buf, len, NULL,
					       FI_ADDR_UNSPEC, tag, 0, &fctx));
		else
			FTX_POST(ctx, fi_recv(ctx->ep, buf, len, NULL,
					      FI_ADDR_UNSPEC, &fctx));
		ftx_barrier(ctx);
		ftx_wait_ok(ctx, FTX_RX, &c);
		FTX_EXPECT(c.len == len && c.op_context == &fctx,
			   "follow-up message: len %zu ctx %p", c.len,
			   c.op_context);
		ftx_verify(buf, len, seed, "follow-up message");
	} else {
		ftx_fill(buf, len, seed);
		ftx_barrier(ctx);
		if (tagged)
			FTX_POST(ctx, fi_tsend(ctx->ep, buf, len, NULL,
					       ctx->addrs[1], tag, &fctx));
		else
			FTX_POST(ctx, fi_send(ctx->ep, buf, len, NULL,
					      ctx->addrs[1], &fctx));
		ftx_wait_ok(ctx, FTX_TX, &c);
	}
	ftx_free(buf);
}

static void
trunc_case(struct ftx_ctx *ctx, bool tagged)
{
	size_t i;
	int e;

	for (e = 0; e < 2; e++)
		for (i = 0; i < NPAIRS; i++)
			one(ctx, tagged, e == 0, pairs[i].send, pairs[i].recv,
			    0xc000000000000000ull | (i << 1) | (size_t) e);
	sanity(ctx, tagged);
}

static int
run_tagged(struct ftx_ctx *ctx)
{
	trunc_case(ctx, true);
	return 0;
}

static int
run_msg(struct ftx_ctx *ctx)
{
	trunc_case(ctx, false);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "tagged", .run = run_tagged},
	{.name = "msg", .run = run_msg},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_trunc",
	.desc = "truncated receives: FI_ETRUNC, olen, no overrun",
	.caps = FI_MSG | FI_TAGGED,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = 2,
	.timeout = 60,
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
