/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Head of line: a receiver that does not keep up must not hold back its
 * sender's traffic to anyone else.
 *
 * Rank 1 posts no receive and may buffer little (FI_TNBC_UNEXP_MAX), so
 * rank 0's flood of eager messages fills rank 1's queue and the rest
 * waits in rank 0's.  Rank 0 then sends one message to rank 2, which
 * must arrive while the flood still waits (bound: the test's timeout,
 * never a fixed sleep).  Only then does rank 1 post its receives, and it
 * must get the whole flood, in order and intact.
 *
 * And the other way round (flood_into_one_peer): a flood a receiver
 * does not keep up with must not hold back its other senders.  Rank 0
 * floods rank 1 until its sends stop ending (rank 1 holds what it can);
 * then rank 2 sends rank 1 a message rank 1 has a receive posted for,
 * which must arrive while the flood still waits in rank 0.
 */
#include "common/ftx.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define FLOOD_LEN  8192
#define FLOOD_TAG  0x10
#define OTHER_TAG  0x20
#define F_NPOSTED  0 /* rank 0: how many flood sends it posted */
#define F_ARRIVED  1 /* rank 2: the other message is in */
#define F_STALLED  2 /* rank 0: flood sends still waiting then */
#define F_RELEASED 3 /* rank 0 has looked: rank 1 may receive */

static int nflood = 1024;

static int
opt(int c, const char *arg)
{
	if (c == 'c') {
		nflood = atoi(arg);
		return nflood > 0 ? 0 : -1;
	}
	return -1;
}

/* Waits, progressing, for a flag another rank sets. */
static void
await(struct ftx_ctx *ctx, int flag, const char *what)
{
	unsigned spins = 0;

	ctx->what = what;
	while (!atomic_load(ftx_scratch(flag))) {
		FTX_EXPECT(!ftx_expired(ctx), "timeout: %s", what);
		ftx_progress(ctx);
		ftx_relax(&spins);
	}
	ctx->what = NULL;
}

static void
flooder(struct ftx_ctx *ctx)
{
	char *bufs = ftx_alloc((size_t) nflood * FLOOD_LEN), one = 'x';
	struct fi_context2 *fctx = calloc((size_t) nflood + 1, sizeof(*fctx));
	size_t done = 0, pending;
	int i;

	FTX_EXPECT(fctx, "out of memory");
	for (i = 0; i < nflood; i++) {
		char *b = bufs + (size_t) i * FLOOD_LEN;

		ftx_fill(b, FLOOD_LEN, ftx_seed(1, (uint64_t) i, 0));
		FTX_POST(ctx, fi_tsend(ctx->ep, b, FLOOD_LEN, NULL,
				       ctx->addrs[1], FLOOD_TAG, &fctx[i]));
	}
	atomic_store(ftx_scratch(F_NPOSTED), (uint64_t) nflood);
	FTX_POST(ctx, fi_tsend(ctx->ep, &one, 1, NULL, ctx->addrs[2], OTHER_TAG,
			       &fctx[nflood]));
	await(ctx, F_ARRIVED, "rank 2 waits for its message behind the flood");
	/* the condition was real: part of the flood still waits here */
	for (struct ftx_comp c; ftx_try_comp(ctx, FTX_TX, &c); done++)
		FTX_EXPECT(!c.err, "send: %s", fi_strerror(c.err));
	pending = (size_t) nflood + 1 - done;
	atomic_store(ftx_scratch(F_STALLED), pending);
	atomic_store(ftx_scratch(F_RELEASED), 1);
	FTX_EXPECT(pending > 0,
		   "all %d flood sends completed before rank 1 posted a "
		   "receive: its queue never filled (raise -c)",
		   nflood);
	ftx_wait_n_ok(ctx, FTX_TX, pending);
	ftx_log("%zu of %d flood sends waited while rank 2's message passed",
		pending, nflood);
	free(fctx);
	ftx_free(bufs);
}

static void
slow_receiver(struct ftx_ctx *ctx)
{
	char *buf = ftx_alloc(FLOOD_LEN);
	struct fi_context2 fctx;

	await(ctx, F_RELEASED, "rank 1 waits to be let go");
	for (int i = 0; i < nflood; i++) {
		struct ftx_comp c;

		FTX_POST(ctx, fi_trecv(ctx->ep, buf, FLOOD_LEN, NULL,
				       ctx->addrs[0], FLOOD_TAG, 0, &fctx));
		ftx_wait_ok(ctx, FTX_RX, &c);
		FTX_EXPECT(c.len == FLOOD_LEN, "message %d: %zu bytes", i,
			   c.len);
		/* FI_ORDER_SAS: the i-th receive gets the i-th send */
		ftx_verify(buf, FLOOD_LEN, ftx_seed(1, (uint64_t) i, 0),
			   "flood message");
	}
	ftx_free(buf);
}

/* Receives the one-byte message rank from sends with OTHER_TAG, which
 * must be want (bound: the test's timeout). */
static void
one_from(struct ftx_ctx *ctx, int from, char want, const char *what)
{
	struct fi_context2 fctx;
	struct ftx_comp c;
	char one = 0;

	FTX_POST(ctx, fi_trecv(ctx->ep, &one, 1, NULL, ctx->addrs[from],
			       OTHER_TAG, 0, &fctx));
	ctx->what = what;
	ftx_wait_ok(ctx, FTX_RX, &c);
	ctx->what = NULL;
	FTX_EXPECT(one == want, "got %d", one);
}

static void
bystander(struct ftx_ctx *ctx)
{
	one_from(ctx, 0, 'x',
		 "the message queued behind a flood to another rank");
	/* rank 1 has not received anything yet: it waits for rank 0 */
	FTX_EXPECT(!atomic_load(ftx_scratch(F_RELEASED)),
		   "rank 1 was let go before this message came");
	atomic_store(ftx_scratch(F_ARRIVED), 1);
}

/* Rank 0 of flood_into_one_peer. */
static void
flood_in(struct ftx_ctx *ctx)
{
	char *bufs = ftx_alloc((size_t) nflood * FLOOD_LEN);
	struct fi_context2 *fctx = calloc((size_t) nflood, sizeof(*fctx));
	size_t done = 0, pending;
	struct ftx_comp c;
	uint64_t last;

	FTX_EXPECT(fctx, "out of memory");
	for (int i = 0; i < nflood; i++) {
		char *b = bufs + (size_t) i * FLOOD_LEN;

		ftx_fill(b, FLOOD_LEN, ftx_seed(1, (uint64_t) i, 0));
		FTX_POST(ctx, fi_tsend(ctx->ep, b, FLOOD_LEN, NULL,
				       ctx->addrs[1], FLOOD_TAG, &fctx[i]));
	}
	/* until the sends stop ending (none for 300 ms): rank 1 holds all
	 * of the flood it will before anyone else sends */
	ctx->what = "rank 0 floods rank 1";
	for (last = ftx_now_ns(); ftx_now_ns() - last < 300000000u;) {
		FTX_EXPECT(!ftx_expired(ctx), "timeout: %s", ctx->what);
		ftx_progress(ctx);
		while (ftx_try_comp(ctx, FTX_TX, &c)) {
			FTX_EXPECT(!c.err, "send: %s", fi_strerror(c.err));
			done++;
			last = ftx_now_ns();
		}
	}
	ctx->what = NULL;
	FTX_EXPECT(done < (size_t) nflood,
		   "rank 1 took all %d flood messages with no receive "
		   "posted (raise -c)",
		   nflood);
	atomic_store(ftx_scratch(F_NPOSTED), 1);
	await(ctx, F_ARRIVED, "rank 0 waits for rank 2's message to arrive");
	for (; ftx_try_comp(ctx, FTX_TX, &c); done++)
		FTX_EXPECT(!c.err, "send: %s", fi_strerror(c.err));
	pending = (size_t) nflood - done;
	atomic_store(ftx_scratch(F_RELEASED), 1);
	FTX_EXPECT(pending > 0,
		   "the flood ended before rank 1 posted a receive");
	ftx_wait_n_ok(ctx, FTX_TX, pending);
	ftx_log("rank 2's message passed while %zu of %d flood messages "
		"waited in rank 0",
		pending, nflood);
	free(fctx);
	ftx_free(bufs);
}

/* Rank 1 of flood_into_one_peer. */
static void
flooded(struct ftx_ctx *ctx)
{
	one_from(ctx, 2, 'y',
		 "rank 2's message to a posted receive, during a flood");
	atomic_store(ftx_scratch(F_ARRIVED), 1);
	slow_receiver(ctx);
}

/* Rank 2 of flood_into_one_peer. */
static void
other_sender(struct ftx_ctx *ctx)
{
	struct fi_context2 fctx;
	struct ftx_comp c;
	char one = 'y';

	await(ctx, F_NPOSTED, "rank 2 waits for the flood to stop");
	FTX_POST(ctx, fi_tsend(ctx->ep, &one, 1, NULL, ctx->addrs[1], OTHER_TAG,
			       &fctx));
	ftx_wait_ok(ctx, FTX_TX, &c);
}

static int
run_in(struct ftx_ctx *ctx)
{
	if (ctx->rank == 0)
		flood_in(ctx);
	else if (ctx->rank == 1)
		flooded(ctx);
	else if (ctx->rank == 2)
		other_sender(ctx);
	return 0;
}

static int
run(struct ftx_ctx *ctx)
{
	if (ctx->rank == 0)
		flooder(ctx);
	else if (ctx->rank == 1)
		slow_receiver(ctx);
	else if (ctx->rank == 2)
		bystander(ctx);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "flood_one_peer", .run = run},
	{.name = "flood_into_one_peer", .run = run_in},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_hol",
	.desc = "a slow receiver holds back only its own sender's traffic, "
		"and a flood only its own sender",
	.caps = FI_TAGGED | FI_DIRECTED_RECV,
	.nprocs = 3,
	.min_procs = 3,
	.max_procs = 3,
	.timeout = 60,
	.optstr = "c:",
	.opt = opt,
	.opthelp = "  -c N     flood messages of 8 KiB (default 1024)\n",
	.cases = cases,
};

int
main(int argc, char **argv)
{
	/* rank 1 buffers little, so that the flood stays in the queues
	 * (the ranks are forked after this) */
	setenv("FI_TNBC_UNEXP_MAX", "65536", 0);
	return ftx_main(&test, argc, argv);
}
