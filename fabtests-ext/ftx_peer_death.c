/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The last rank sends some messages, leaves more (one of them large) in
 * flight, and dies by SIGKILL.  The survivors must go on exchanging
 * messages among themselves and then close every object cleanly, well
 * within the timeout: a dead peer may cost its own traffic, nothing else.
 */
#include "common/ftx.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#define EARLY		  20
#define ITERS		  200
#define VTAG		  0x7100000000000000ull
#define STAG		  0x5200000000000000ull
#define SURVIVORS_BARRIER 1

static bool to_dead;

static int
opt(int c, const char *arg)
{
	(void) arg;
	if (c != 'x')
		return -1;
	to_dead = true;
	return 0;
}

static size_t
early_size(int i)
{
	return i == EARLY / 2 ? 262144 : 64 + (size_t) i;
}

static size_t
ring_size(int i)
{
	static const size_t s[] = {8, 4096, 65536, 1048576 + 1};

	return s[i % 4];
}

static _Noreturn void
victim(struct ftx_ctx *ctx)
{
	int nsurv = ctx->nprocs - 1, s, i, posted = 0;
	size_t big = 4 << 20;
	char *buf = ftx_alloc(big), *rbuf = ftx_alloc(64);
	struct fi_context2 rctx;

	ftx_fill(buf, big, 0x71);
	for (s = 0; s < nsurv; s++)
		for (i = 0; i < EARLY; i++)
			FTX_POST(ctx, fi_tsend(ctx->ep, buf, early_size(i),
					       NULL, ctx->addrs[s],
					       VTAG | (uint64_t) i, NULL));
	ftx_wait_n_ok(ctx, FTX_TX, (size_t) (nsurv * EARLY));
	ftx_barrier(ctx);

	/* leave work behind on both sides of every connection */
	for (s = 0; s < nsurv; s++) {
		if (fi_tsend(ctx->ep, buf, 64, NULL, ctx->addrs[s],
			     VTAG | 0xfff, NULL) == 0)
			posted++;
		if (fi_tsend(ctx->ep, buf, big, NULL, ctx->addrs[s],
			     VTAG | 0xffe, NULL) == 0)
			posted++;
	}
	(void) fi_trecv(ctx->ep, rbuf, 64, NULL, FI_ADDR_UNSPEC, 0, 0, &rctx);
	ftx_drain_for(ctx, 5);
	ftx_log("dying with %d sends in flight", posted);
	ftx_expect_death(ctx);
	fflush(stderr);
	raise(SIGKILL);
	abort();
}

static void
survivor(struct ftx_ctx *ctx)
{
	int nsurv = ctx->nprocs - 1, dead = ctx->nprocs - 1, i;
	int next = (ctx->rank + 1) % nsurv;
	int prev = (ctx->rank + nsurv - 1) % nsurv;
	size_t maxlen = 1048576 + 1;
	char *sbuf = ftx_alloc(maxlen), *rbuf = ftx_alloc(maxlen);
	struct fi_context2 sctx, rctx, dctx;
	/* static: a send to the dead may hold on to it until the close */
	static char dbuf[64];
	struct ftx_comp c;
	char what[64];

	/* what the victim sent before dying is delivered in full */
	for (i = 0; i < EARLY; i++) {
		FTX_POST(ctx, fi_trecv(ctx->ep, rbuf, early_size(i), NULL,
				       FI_ADDR_UNSPEC, VTAG | (uint64_t) i, 0,
				       &rctx));
		ftx_wait_ok(ctx, FTX_RX, &c);
		FTX_EXPECT(c.len == early_size(i), "early message %d: len %zu",
			   i, c.len);
		ftx_verify(rbuf, c.len, 0x71, "early message from the victim");
	}
	ftx_barrier(ctx);

	ctx->what = "waiting for the victim to die";
	while (!ftx_rank_dead(dead)) {
		FTX_EXPECT(!ftx_expired(ctx), "the victim never died");
		ftx_drain_for(ctx, 1);
	}
	ctx->what = NULL;
	ftx_log("victim is dead, survivors carry on");

	if (to_dead) {
		ssize_t ret = fi_tsend(ctx->ep, dbuf, 64, NULL,
				       ctx->addrs[dead], STAG, &dctx);

		ftx_log("send to the dead rank returned %zd", ret);
	}

	for (i = 0; i < ITERS; i++) {
		size_t len = ring_size(i);
		/* tags name the sender, so no FI_DIRECTED_RECV is needed */
		uint64_t rtag = STAG | (uint64_t) prev << 32 | (uint64_t) i;
		uint64_t stag =
			STAG | (uint64_t) ctx->rank << 32 | (uint64_t) i;

		snprintf(what, sizeof(what), "survivor exchange %d (%zu B)", i,
			 len);
		ctx->what = what;
		ftx_fill(sbuf, len,
			 ftx_seed((uint64_t) ctx->rank, (uint64_t) i, 0));
		FTX_POST(ctx, fi_trecv(ctx->ep, rbuf, len, NULL, FI_ADDR_UNSPEC,
				       rtag, 0, &rctx));
		FTX_POST(ctx, fi_tsend(ctx->ep, sbuf, len, NULL,
				       ctx->addrs[next], stag, &sctx));
		/* a send to the dead rank may complete either way */
		do
			ftx_wait_comp(ctx, FTX_TX, &c);
		while (c.op_context != &sctx);
		FTX_EXPECT(!c.err, "%s: send failed: %s", what,
			   fi_strerror(c.err));
		do
			ftx_wait_comp(ctx, FTX_RX, &c);
		while (c.op_context != &rctx);
		FTX_EXPECT(!c.err, "%s: receive failed: %s", what,
			   fi_strerror(c.err));
		ftx_verify(rbuf, len,
			   ftx_seed((uint64_t) prev, (uint64_t) i, 0), what);
	}
	ctx->what = "closing after the exchange";
	ftx_barrier_n(ctx, SURVIVORS_BARRIER, nsurv);
	ftx_free(sbuf);
	ftx_free(rbuf);
	/* the harness closes everything next and checks each fi_close */
}

static int
run(struct ftx_ctx *ctx)
{
	if (ctx->rank == ctx->nprocs - 1)
		victim(ctx);
	survivor(ctx);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "peer_death", .run = run},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_peer_death",
	.desc = "a rank dies by SIGKILL; the others carry on and close",
	.caps = FI_TAGGED,
	.nprocs = 3,
	.min_procs = 3,
	.max_procs = FTX_MAX_PROCS,
	.timeout = 30,
	.optstr = "x",
	.opt = opt,
	.opthelp = "  -x       survivors also send to the dead rank\n",
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
