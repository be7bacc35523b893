/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * FI_PEEK, FI_CLAIM and FI_DISCARD on tagged receives.  Rank 1 sends, rank 0
 * peeks: nothing there yields FI_ENOMSG; a peek reports the message's
 * length, tag and CQ data without consuming it; a claimed message is
 * invisible to ordinary receives and is delivered once to the paired
 * FI_CLAIM receive; discarded messages are never delivered.
 */
#include "common/ftx.h"

#include <stdio.h>
#include <string.h>

#define TAG_A	 0xa000000000000001ull
#define TAG_B	 0xb0000000000000b2ull
#define TAG_C	 0xc0000000000000c3ull
#define TAG_NONE 0xdead00000000beefull

enum { M1, M2, M3, M4, M5, M6, NMSG };

static const struct {
	uint64_t tag;
	size_t len;
} msgs[NMSG] = {
	[M1] = {TAG_A, 1000}, [M2] = {TAG_B, 1048576 + 3}, [M3] = {TAG_C, 500},
	[M4] = {TAG_C, 600},  [M5] = {TAG_A, 1100},	   [M6] = {TAG_C, 700},
};

static uint64_t
data_of(int m)
{
	return 0xda7a000000000000ull | (uint64_t) m;
}

static uint64_t
seed_of(int m)
{
	return ftx_seed(0x9e, (uint64_t) m, 1);
}

/* One FI_PEEK-family request; returns its completion. */
static void
peek(struct ftx_ctx *ctx, uint64_t tag, uint64_t flags,
     struct fi_context2 *fctx, struct ftx_comp *c)
{
	struct fi_msg_tagged m = {
		.addr = FI_ADDR_UNSPEC,
		.tag = tag,
		.context = fctx,
	};

	FTX_POST(ctx, fi_trecvmsg(ctx->ep, &m, flags));
	ftx_wait_comp(ctx, FTX_RX, c);
	FTX_EXPECT(c->op_context == fctx,
		   "peek (flags 0x%llx) completed context %p, expected %p; an "
		   "FI_PEEK treated as a plain receive?",
		   (unsigned long long) flags, c->op_context, (void *) fctx);
}

static void
expect_nomsg(struct ftx_ctx *ctx, uint64_t tag, const char *what)
{
	struct fi_context2 fctx;
	struct ftx_comp c;

	ctx->what = what;
	peek(ctx, tag, FI_PEEK, &fctx, &c);
	FTX_EXPECT(c.err == FI_ENOMSG,
		   "%s: FI_PEEK gave %s (err %d), expected FI_ENOMSG", what,
		   c.err ? fi_strerror(c.err) : "success", c.err);
	ctx->what = NULL;
}

/* Peeks until the message has arrived, then checks what it reports. */
static void
expect_found(struct ftx_ctx *ctx, int m, uint64_t flags,
	     struct fi_context2 *fctx, const char *what)
{
	struct ftx_comp c;

	ctx->what = what;
	for (;;) {
		peek(ctx, msgs[m].tag, flags, fctx, &c);
		if (c.err != FI_ENOMSG)
			break;
		FTX_EXPECT(!ftx_expired(ctx), "%s: message never showed up",
			   what);
	}
	FTX_EXPECT(!c.err, "%s: peek failed: %s (err %d)", what,
		   fi_strerror(c.err), c.err);
	if (flags & FI_DISCARD) {
		/* the spec is least explicit about what a discard reports */
		FTX_SOFT(c.len == msgs[m].len,
			 "%s: peek reports len %zu, expected %zu", what, c.len,
			 msgs[m].len);
		FTX_SOFT(c.tag == msgs[m].tag, "%s: peek reports tag 0x%llx",
			 what, (unsigned long long) c.tag);
	} else {
		FTX_EXPECT(c.len == msgs[m].len,
			   "%s: peek reports len %zu, expected %zu", what,
			   c.len, msgs[m].len);
		FTX_EXPECT(c.tag == msgs[m].tag, "%s: peek reports tag 0x%llx",
			   what, (unsigned long long) c.tag);
	}
	/* soft: the rest of the sequence is still worth running */
	FTX_SOFT(c.flags & FI_REMOTE_CQ_DATA,
		 "%s: peek flags 0x%llx lack FI_REMOTE_CQ_DATA", what,
		 (unsigned long long) c.flags);
	FTX_SOFT(c.data == data_of(m), "%s: peek reports data 0x%llx", what,
		 (unsigned long long) c.data);
	ctx->what = NULL;
}

/* The FI_CLAIM receive paired with an earlier FI_PEEK|FI_CLAIM. */
static void
claim_recv(struct ftx_ctx *ctx, int m, uint64_t flags, struct fi_context2 *fctx,
	   const char *what)
{
	size_t len = msgs[m].len;
	void *buf = ftx_alloc(len);
	struct iovec iov = {buf, len};
	struct fi_msg_tagged tm = {
		.msg_iov = &iov,
		.iov_count = 1,
		.addr = FI_ADDR_UNSPEC,
		.tag = msgs[m].tag,
		.context = fctx,
	};
	struct ftx_comp c;

	ctx->what = what;
	FTX_POST(ctx, fi_trecvmsg(ctx->ep, &tm, FI_CLAIM | flags));
	ftx_wait_ok(ctx, FTX_RX, &c);
	FTX_EXPECT(c.op_context == fctx,
		   "%s: completed context %p, expected the claim context %p",
		   what, c.op_context, (void *) fctx);
	if (!(flags & FI_DISCARD)) {
		FTX_EXPECT(c.len == len, "%s: len %zu", what, c.len);
		FTX_EXPECT(c.data == data_of(m), "%s: data 0x%llx", what,
			   (unsigned long long) c.data);
		ftx_verify(buf, len, seed_of(m), what);
	} else {
		/* the buffer is to be ignored, so it must stay untouched */
		FTX_EXPECT(ftx_check(buf, len, seed_of(m)) != SIZE_MAX,
			   "%s: discarded data was written", what);
	}
	ftx_guard_verify(buf, len, what);
	ftx_free(buf);
	ctx->what = NULL;
}

static void
sender(struct ftx_ctx *ctx)
{
	void *bufs[NMSG];
	int m;

	for (m = 0; m < NMSG; m++) {
		bufs[m] = ftx_alloc(msgs[m].len);
		ftx_fill(bufs[m], msgs[m].len, seed_of(m));
	}
	ftx_barrier(ctx); /* 1: receiver has peeked at nothing */
	for (m = M1; m <= M4; m++)
		FTX_POST(ctx, fi_tsenddata(ctx->ep, bufs[m], msgs[m].len, NULL,
					   data_of(m), ctx->addrs[0],
					   msgs[m].tag, NULL));
	ftx_barrier(ctx); /* 2 */
	ftx_barrier(ctx); /* 3: M1..M4 consumed one way or another */
	for (m = M5; m <= M6; m++)
		FTX_POST(ctx, fi_tsenddata(ctx->ep, bufs[m], msgs[m].len, NULL,
					   data_of(m), ctx->addrs[0],
					   msgs[m].tag, NULL));
	ftx_wait_n_ok(ctx, FTX_TX, NMSG);
	ftx_barrier(ctx); /* 4 */
	for (m = 0; m < NMSG; m++)
		ftx_free(bufs[m]);
}

static void
receiver(struct ftx_ctx *ctx)
{
	struct fi_context2 pctx, ca, cb, cc, plain, cnone;
	size_t len;
	void *buf;
	struct ftx_comp c;

	expect_nomsg(ctx, TAG_A, "peek before anything was sent");
	ftx_barrier(ctx); /* 1 */
	ftx_barrier(ctx); /* 2 */

	/* a peek does not consume: the same message shows up twice */
	expect_found(ctx, M1, FI_PEEK, &pctx, "first peek at M1");
	expect_found(ctx, M1, FI_PEEK, &pctx, "second peek at M1");

	/* claim M1, then an ordinary receive must not see it */
	expect_found(ctx, M1, FI_PEEK | FI_CLAIM, &ca, "peek+claim M1");
	len = msgs[M5].len;
	buf = ftx_alloc(len);
	FTX_POST(ctx, fi_trecv(ctx->ep, buf, len, NULL, FI_ADDR_UNSPEC, TAG_A,
			       0, &plain));
	ftx_drain_for(ctx, 20);
	FTX_EXPECT(!ftx_pending(ctx, FTX_RX),
		   "an ordinary receive completed while M1 was claimed");
	claim_recv(ctx, M1, 0, &ca, "claimed receive of M1");

	/* a claimed rendezvous-sized message */
	expect_found(ctx, M2, FI_PEEK | FI_CLAIM, &cb, "peek+claim M2 (1 MiB)");
	claim_recv(ctx, M2, 0, &cb, "claimed receive of M2");

	/* M3: claimed then discarded; M4: discarded by the peek itself */
	expect_found(ctx, M3, FI_PEEK | FI_CLAIM, &cc, "peek+claim M3");
	claim_recv(ctx, M3, FI_DISCARD, &cc, "claim+discard of M3");
	expect_found(ctx, M4, FI_PEEK | FI_DISCARD, &pctx, "peek+discard M4");
	expect_nomsg(ctx, TAG_C, "peek after both TAG_C messages went");
	expect_nomsg(ctx, TAG_B, "peek after M2 was received");
	expect_nomsg(ctx, TAG_NONE, "peek for a tag never sent");
	ftx_barrier(ctx); /* 3 */

	/* M5 completes the ordinary receive posted long ago */
	ftx_wait_ok(ctx, FTX_RX, &c);
	FTX_EXPECT(c.op_context == &plain, "M5 completed context %p",
		   c.op_context);
	FTX_EXPECT(c.len == len, "M5: len %zu", c.len);
	ftx_verify(buf, len, seed_of(M5),
		   "M5 (M1 must not be delivered "
		   "twice)");
	ftx_free(buf);

	/* M6 is the only TAG_C message left to receive */
	len = msgs[M6].len;
	buf = ftx_alloc(len);
	FTX_POST(ctx, fi_trecv(ctx->ep, buf, len, NULL, FI_ADDR_UNSPEC, TAG_C,
			       0, &cnone));
	ftx_wait_ok(ctx, FTX_RX, &c);
	FTX_EXPECT(c.op_context == &cnone && c.len == len,
		   "TAG_C receive: context %p len %zu (a discarded message "
		   "delivered?)",
		   c.op_context, c.len);
	ftx_verify(buf, len, seed_of(M6),
		   "M6 (discarded M3/M4 must not "
		   "come back)");
	ftx_free(buf);
	expect_nomsg(ctx, TAG_A, "final peek for TAG_A");
	ftx_barrier(ctx); /* 4 */
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
	{.name = "peek_claim", .run = run},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_peek_claim",
	.desc = "FI_PEEK / FI_CLAIM / FI_DISCARD on tagged receives",
	.caps = FI_TAGGED,
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
