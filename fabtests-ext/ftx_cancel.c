/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fi_cancel on posted receives: each cancelled receive reports FI_ECANCELED
 * with its own context exactly once, never matches a later message, and
 * leaves its neighbours in the queue untouched.  Cancelling what is not
 * (or no longer) posted must be harmless.
 */
#include "common/ftx.h"

#include <stdio.h>
#include <string.h>

#define NPOST 16
#define NSOME 5

static void
post_recv(struct ftx_ctx *ctx, bool tagged, void *buf, size_t len, uint64_t tag,
	  void *fctx)
{
	if (tagged)
		FTX_POST(ctx, fi_trecv(ctx->ep, buf, len, NULL, FI_ADDR_UNSPEC,
				       tag, 0, fctx));
	else
		FTX_POST(ctx, fi_recv(ctx->ep, buf, len, NULL, FI_ADDR_UNSPEC,
				      fctx));
}

static void
send_one(struct ftx_ctx *ctx, bool tagged, void *buf, size_t len, uint64_t tag)
{
	struct fi_context2 fctx;
	struct ftx_comp c;

	if (tagged)
		FTX_POST(ctx, fi_tsend(ctx->ep, buf, len, NULL, ctx->addrs[0],
				       tag, &fctx));
	else
		FTX_POST(ctx, fi_send(ctx->ep, buf, len, NULL, ctx->addrs[0],
				      &fctx));
	ftx_wait_ok(ctx, FTX_TX, &c);
}

static void
do_cancel(struct ftx_ctx *ctx, void *fctx, const char *what)
{
	ssize_t ret = fi_cancel(&ctx->ep->fid, fctx);

	FTX_EXPECT(ret == 0, "fi_cancel(%s): %s (%zd)", what,
		   fi_strerror((int) -ret), ret);
}

/* Collects n FI_ECANCELED entries whose contexts lie in [base, base+n). */
static void
expect_cancelled(struct ftx_ctx *ctx, struct fi_context2 *base, int n,
		 const bool *want, const char *what)
{
	bool seen[NPOST] = {false};
	struct ftx_comp c;
	int i, k;

	for (i = 0; i < n; i++) {
		ftx_wait_comp(ctx, FTX_RX, &c);
		k = (int) ((struct fi_context2 *) c.op_context - base);
		FTX_EXPECT(c.err == FI_ECANCELED,
			   "%s: expected FI_ECANCELED, got %s (err %d) for "
			   "context %p",
			   what, c.err ? fi_strerror(c.err) : "success", c.err,
			   c.op_context);
		FTX_EXPECT(k >= 0 && k < NPOST && want[k] && !seen[k],
			   "%s: cancel completion for a wrong or repeated "
			   "context %p",
			   what, c.op_context);
		seen[k] = true;
	}
}

static void
expect_quiet(struct ftx_ctx *ctx, const char *what)
{
	struct ftx_comp c;

	ftx_drain_for(ctx, 50);
	if (ftx_try_comp(ctx, FTX_RX, &c)) {
		ftx_print_comp("rx", &c);
		ftx_fail("%s: unexpected receive completion (err %d, "
			 "context %p)",
			 what, c.err, c.op_context);
	}
}

/* cancel everything; the next message goes to a fresh receive */
static int
run_all(struct ftx_ctx *ctx)
{
	struct fi_context2 fctx[NPOST], fresh;
	bool want[NPOST];
	size_t len = 128;
	struct ftx_comp c;
	int tagged, i;
	char what[64];

	for (tagged = 0; tagged < 2; tagged++) {
		void *bufs[NPOST], *buf = ftx_alloc(len);
		uint64_t seed = ftx_seed(4, 5, (uint64_t) tagged);

		snprintf(what, sizeof(what), "%s cancel-all",
			 tagged ? "tagged" : "msg");
		if (ctx->rank == 1) {
			ftx_fill(buf, len, seed);
			ftx_barrier(ctx);
			send_one(ctx, tagged, buf, len, 0x1000);
			ftx_barrier(ctx);
			ftx_free(buf);
			continue;
		}
		for (i = 0; i < NPOST; i++) {
			bufs[i] = ftx_alloc(len);
			want[i] = true;
			post_recv(ctx, tagged, bufs[i], len, 0x1000, &fctx[i]);
		}
		for (i = 0; i < NPOST; i++)
			do_cancel(ctx, &fctx[i], what);
		expect_cancelled(ctx, fctx, NPOST, want, what);
		expect_quiet(ctx, what);
		ftx_barrier(ctx);
		post_recv(ctx, tagged, buf, len, 0x1000, &fresh);
		ftx_wait_ok(ctx, FTX_RX, &c);
		FTX_EXPECT(c.op_context == &fresh,
			   "%s: the message completed context %p, not the "
			   "fresh receive",
			   what, c.op_context);
		ftx_verify(buf, len, seed, what);
		for (i = 0; i < NPOST; i++) {
			/* cancelled buffers must stay untouched */
			FTX_EXPECT(ftx_check(bufs[i], len, seed) != SIZE_MAX,
				   "%s: data landed in cancelled buffer %d",
				   what, i);
			ftx_free(bufs[i]);
		}
		ftx_barrier(ctx);
		ftx_free(buf);
	}
	return 0;
}

/* cancel the 2nd and 4th of five same-tag receives */
static int
run_some(struct ftx_ctx *ctx)
{
	struct fi_context2 fctx[NPOST];
	bool want[NPOST] = {false};
	const int keep[3] = {0, 2, 4};
	size_t len = 4096;
	struct ftx_comp c;
	int tagged, i, k;
	char what[64];

	want[1] = want[3] = true;
	for (tagged = 0; tagged < 2; tagged++) {
		void *bufs[NSOME];

		snprintf(what, sizeof(what), "%s cancel-some",
			 tagged ? "tagged" : "msg");
		if (ctx->rank == 1) {
			void *buf = ftx_alloc(len);

			ftx_barrier(ctx);
			for (i = 0; i < 3; i++) {
				ftx_fill(buf, len,
					 ftx_seed(6, (uint64_t) i, 0));
				send_one(ctx, tagged, buf, len, 0x2000);
			}
			ftx_barrier(ctx);
			ftx_free(buf);
			continue;
		}
		for (i = 0; i < NSOME; i++) {
			bufs[i] = ftx_alloc(len);
			post_recv(ctx, tagged, bufs[i], len, 0x2000, &fctx[i]);
		}
		do_cancel(ctx, &fctx[1], what);
		do_cancel(ctx, &fctx[3], what);
		expect_cancelled(ctx, fctx, 2, want, what);
		ftx_barrier(ctx);
		for (i = 0; i < 3; i++) {
			ftx_wait_ok(ctx, FTX_RX, &c);
			k = (int) ((struct fi_context2 *) c.op_context - fctx);
			FTX_EXPECT(k == 0 || k == 2 || k == 4,
				   "%s: a message completed receive %d, which "
				   "was cancelled or foreign",
				   what, k);
		}
		/* queue order survives the holes: message i fills keep[i] */
		for (i = 0; i < 3; i++)
			ftx_verify(bufs[keep[i]], len,
				   ftx_seed(6, (uint64_t) i, 0), what);
		expect_quiet(ctx, what);
		ftx_barrier(ctx);
		for (i = 0; i < NSOME; i++)
			ftx_free(bufs[i]);
	}
	return 0;
}

/*
 * Unknown contexts, a second cancel of the same receive and a cancel after
 * completion: any return value is acceptable, a completion is not.
 */
static int
run_bogus(struct ftx_ctx *ctx)
{
	struct fi_context2 never, once, done;
	bool want[NPOST] = {false};
	size_t len = 64;
	void *buf = ftx_alloc(len);
	struct ftx_comp c;
	ssize_t ret;
	char heap_junk[64];

	if (ctx->rank == 1) {
		ftx_fill(buf, len, 7);
		ftx_barrier(ctx);
		send_one(ctx, true, buf, len, 0x3000);
		ftx_barrier(ctx);
		ftx_free(buf);
		return 0;
	}
	memset(heap_junk, 0x6b, sizeof(heap_junk));
	ret = fi_cancel(&ctx->ep->fid, &never);
	ftx_log("fi_cancel(never posted) = %zd", ret);
	ret = fi_cancel(&ctx->ep->fid, heap_junk);
	ftx_log("fi_cancel(junk) = %zd", ret);
	expect_quiet(ctx, "cancel of contexts never posted");

	want[0] = true;
	post_recv(ctx, true, buf, len, 0x3001, &once);
	do_cancel(ctx, &once, "posted receive");
	expect_cancelled(ctx, &once, 1, want, "single cancel");
	ret = fi_cancel(&ctx->ep->fid, &once);
	ftx_log("second fi_cancel = %zd", ret);
	expect_quiet(ctx, "second cancel of the same receive");

	post_recv(ctx, true, buf, len, 0x3000, &done);
	ftx_barrier(ctx);
	ftx_wait_ok(ctx, FTX_RX, &c);
	FTX_EXPECT(c.op_context == &done, "completion for context %p",
		   c.op_context);
	ftx_verify(buf, len, 7, "receive before cancel-after-completion");
	ret = fi_cancel(&ctx->ep->fid, &done);
	ftx_log("fi_cancel(completed) = %zd", ret);
	expect_quiet(ctx, "cancel of a completed receive");
	ftx_barrier(ctx);
	ftx_free(buf);
	return 0;
}

static int
run_null(struct ftx_ctx *ctx)
{
	ssize_t ret;

	if (ctx->rank == 0) {
		ret = fi_cancel(&ctx->ep->fid, NULL);
		ftx_log("fi_cancel(NULL) = %zd", ret);
		expect_quiet(ctx, "fi_cancel(NULL)");
	}
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "cancel_all", .run = run_all},
	{.name = "cancel_some", .run = run_some},
	{.name = "cancel_bogus", .run = run_bogus},
	{.name = "cancel_null", .run = run_null},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_cancel",
	.desc = "fi_cancel of posted receives",
	.caps = FI_MSG | FI_TAGGED,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = 2,
	.timeout = 30,
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
