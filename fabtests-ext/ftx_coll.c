/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fi_collective(3) on tnbc: joins, every collective call, each result
 * checked against one computed here from what every rank contributed.
 */
#include "common/ftx.h"

#include <rdma/fi_collective.h>
#include <rdma/fi_eq.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct coll_priv {
	struct fid_eq *eq;
	struct fid_av_set *set;
	struct fid_mc *mc;
	fi_addr_t coll;
};

static struct coll_priv priv;

static void
bind_eq(struct ftx_ctx *ctx)
{
	struct fi_eq_attr attr = {.wait_obj = FI_WAIT_UNSPEC};

	FTX_CHK(fi_eq_open(ctx->fabric, &attr, &priv.eq, NULL));
	FTX_CHK(fi_ep_bind(ctx->ep, &priv.eq->fid, 0));
	ctx->eq = priv.eq;
	ctx->priv = &priv;
}

/* Drives progress until the EQ reports ev for fid. */
static void
wait_event(struct ftx_ctx *ctx, uint32_t want, struct fid *fid)
{
	struct fi_eq_entry e;
	uint32_t ev;
	unsigned spins = 0;

	for (;;) {
		ssize_t n = fi_eq_read(priv.eq, &ev, &e, sizeof(e), 0);

		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry err = {0};

			fi_eq_readerr(priv.eq, &err, 0);
			ftx_fail("EQ error %d (%s)", err.err,
				 fi_strerror(err.err));
		}
		if (n > 0) {
			FTX_EXPECT(ev == want && e.fid == fid,
				   "EQ event %u fid %p, expected %u fid %p", ev,
				   (void *) e.fid, want, (void *) fid);
			return;
		}
		FTX_EXPECT(!ftx_expired(ctx), "no EQ event %u", want);
		ftx_progress(ctx);
		ftx_relax(&spins);
	}
}

static void
join_world(struct ftx_ctx *ctx)
{
	struct fi_av_set_attr attr = {
		.count = (size_t) ctx->nprocs,
		.start_addr = 0,
		.end_addr = (fi_addr_t) ctx->nprocs - 1,
		.stride = 1,
	};
	fi_addr_t set_addr;

	FTX_CHK(fi_av_set(ctx->av, &attr, &priv.set, NULL));
	FTX_CHK(fi_av_set_addr(priv.set, &set_addr));
	ftx_note("join");
	FTX_CHK(fi_join_collective(ctx->ep, set_addr, priv.set, 0, &priv.mc,
				   &priv));
	wait_event(ctx, FI_JOIN_COMPLETE, &priv.mc->fid);
	priv.coll = fi_mc_addr(priv.mc);
}

static void
leave(struct ftx_ctx *ctx)
{
	(void) ctx;
	FTX_CHK(fi_close(&priv.mc->fid));
	FTX_CHK(fi_close(&priv.set->fid));
}

static void
wait_coll(struct ftx_ctx *ctx, void *context)
{
	struct ftx_comp c;

	ftx_wait_ok(ctx, FTX_TX, &c);
	FTX_EXPECT(c.op_context == context, "completion of %p, expected %p",
		   c.op_context, context);
	FTX_EXPECT(c.flags & FI_COLLECTIVE, "flags 0x%llx lack FI_COLLECTIVE",
		   (unsigned long long) c.flags);
}

static int
run_join_barrier(struct ftx_ctx *ctx)
{
	int ctxv;

	join_world(ctx);
	for (int i = 0; i < 10; i++) {
		FTX_POST(ctx, fi_barrier(ctx->ep, priv.coll, &ctxv));
		wait_coll(ctx, &ctxv);
	}
	leave(ctx);
	return 0;
}

static int
run_allreduce(struct ftx_ctx *ctx)
{
	int ctxv;
	uint64_t v[6], r[6];

	join_world(ctx);
	for (int i = 0; i < 6; i++)
		v[i] = (uint64_t) (ctx->rank + 1) << i;
	memset(r, 0xff, sizeof(r));
	FTX_POST(ctx, fi_allreduce(ctx->ep, v, 6, NULL, r, NULL, priv.coll,
				   FI_UINT64, FI_SUM, 0, &ctxv));
	wait_coll(ctx, &ctxv);
	for (int i = 0; i < 6; i++) {
		uint64_t want = 0;

		for (int k = 0; k < ctx->nprocs; k++)
			want += (uint64_t) (k + 1) << i;
		FTX_EXPECT(r[i] == want, "allreduce [%d] %llu, expected %llu",
			   i, (unsigned long long) r[i],
			   (unsigned long long) want);
	}
	leave(ctx);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "join_barrier", .run = run_join_barrier, .pre_enable = bind_eq},
	{.name = "allreduce", .run = run_allreduce, .pre_enable = bind_eq},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_coll",
	.desc = "fi_collective(3): joins and every collective, checked",
	.caps = FI_MSG | FI_TAGGED | FI_COLLECTIVE,
	.nprocs = 4,
	.min_procs = 1,
	.max_procs = FTX_MAX_PROCS,
	.timeout = 60,
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
