/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Allreduce completion time as seed 002 defines it: every rank starts at
 * the same instant t0 (a start time on CLOCK_MONOTONIC, shared by the
 * ranks of this host), and the operation is over when the last rank has
 * the result.  Median and minimum over repetitions, in microseconds, as
 * CSV lines "label,nprocs,bytes,median_us,min_us" (the format of
 * tests/mpi/bench_coll, so that the two compare side by side).
 *
 *   -m offload  fi_allreduce of the provider (FI_COLLECTIVE)
 *   -m host     the same k-ary tree driven by the application over the
 *               provider's tagged messages: receive the children, fold,
 *               send up, receive the result, send it down (seed 002's
 *               "software" case)
 *   -o reduce   (offload only) fi_reduce or fi_broadcast rooted at rank 0
 *   -o bcast    instead of fi_allreduce: the tree's halves
 *   -o alltoall fi_alltoall of slices of each size (bytes of FI_UINT8);
 *               with -m host, the direct exchange the application drives
 *               over tagged messages (every receive posted, then every
 *               send): what a provider without fi_alltoall, such as
 *               tcp;ofi_rxm, offers
 *
 * Prints figures only; it never judges them.
 */
#include "common/ftx.h"

#include <rdma/fi_collective.h>
#include <rdma/fi_eq.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 16
#define MAX_REPS  100000
#define HOST_TAG  0x7c0110000000000ull

static size_t sizes[MAX_SIZES] = {8, 16, 32, 48, 4096, 1048576};
static int nsizes = 6;
static int reps = 200, warmup = 20, degree;
static const char *mode = "offload", *label, *coll_op = "allreduce";
static bool sleepy; /* -S: wait in fi_cq_sread */
static bool b2b; /* -B: back to back, the mean (osu_allreduce's way) */
static unsigned compute_us; /* -c: computation between posting and waiting */

static int
opt(int c, const char *arg)
{
	switch (c) {
	case 's':
		nsizes = ftx_parse_sizes(arg, sizes, MAX_SIZES);
		return nsizes > 0 ? 0 : -1;
	case 'i':
		reps = atoi(arg);
		return reps > 0 && reps <= MAX_REPS ? 0 : -1;
	case 'w':
		warmup = atoi(arg);
		return warmup >= 0 ? 0 : -1;
	case 'm':
		mode = arg;
		return strcmp(arg, "offload") && strcmp(arg, "host") ? -1 : 0;
	case 'k':
		degree = atoi(arg);
		return degree > 0 ? 0 : -1;
	case 'l':
		label = arg;
		return 0;
	case 'S':
		sleepy = true;
		return 0;
	case 'B':
		b2b = true;
		return 0;
	case 'c':
		compute_us = (unsigned) atoi(arg);
		return 0;
	case 'o':
		coll_op = arg;
		return strcmp(arg, "allreduce") && strcmp(arg, "reduce") &&
				       strcmp(arg, "bcast") &&
				       strcmp(arg, "alltoall") ?
			       -1 :
			       0;
	}
	return -1;
}

static struct fid_eq *eq;
static struct fid_av_set *set;
static struct fid_mc *mc;
static fi_addr_t coll;

static void
bind_eq(struct ftx_ctx *ctx)
{
	struct fi_eq_attr attr = {.wait_obj = FI_WAIT_UNSPEC};

	if (strcmp(mode, "offload"))
		return;
	FTX_CHK(fi_eq_open(ctx->fabric, &attr, &eq, NULL));
	FTX_CHK(fi_ep_bind(ctx->ep, &eq->fid, 0));
	ctx->eq = eq;
}

static void
join_world(struct ftx_ctx *ctx)
{
	struct fi_av_set_attr attr = {
		.start_addr = 0,
		.end_addr = (fi_addr_t) ctx->nprocs - 1,
		.stride = 1,
	};
	struct fi_eq_entry e;
	fi_addr_t set_addr;
	uint32_t ev;
	unsigned spins = 0;
	ssize_t n;

	FTX_CHK(fi_av_set(ctx->av, &attr, &set, NULL));
	FTX_CHK(fi_av_set_addr(set, &set_addr));
	FTX_CHK(fi_join_collective(ctx->ep, set_addr, set, 0, &mc, NULL));
	while ((n = fi_eq_read(eq, &ev, &e, sizeof(e), 0)) == -FI_EAGAIN) {
		FTX_EXPECT(!ftx_expired(ctx), "join never completed");
		ftx_progress(ctx);
		ftx_relax(&spins);
	}
	FTX_EXPECT(n >= 0 && ev == FI_JOIN_COMPLETE, "join: %zd event %u", n,
		   ev);
	coll = fi_mc_addr(mc);
}

/* Computation: the clock read in a loop, no libfabric call. */
static void
compute(void)
{
	uint64_t end = ftx_now_ns() + (uint64_t) compute_us * 1000u;

	while (ftx_now_ns() < end)
		;
}

/* The application-driven tree: the shape of the provider's (children of
 * r are degree * r + 1 ... degree * r + degree), rooted at rank 0.  The
 * receives from the children are posted before the computation (-c), as
 * an application with non-blocking messages would; the rest needs the
 * application back. */
static void
host_allreduce(struct ftx_ctx *ctx, const double *in, double *out,
	       double *slots, size_t count, uint64_t tag)
{
	size_t len = count * sizeof(double);
	int me = ctx->rank, n = ctx->nprocs, nch = 0, c;
	struct fi_context2 rctx[64], sctx[64], pctx;

	memcpy(out, in, len);
	for (c = degree * me + 1; c <= degree * me + degree && c < n; c++) {
		FTX_POST(ctx,
			 fi_trecv(ctx->ep, slots + (size_t) nch * count, len,
				  NULL, ctx->addrs[c], tag, 0, &rctx[nch]));
		nch++;
	}
	if (compute_us)
		compute();
	ftx_wait_n_ok(ctx, FTX_RX, (size_t) nch);
	for (c = 0; c < nch; c++)
		for (size_t i = 0; i < count; i++)
			out[i] += slots[(size_t) c * count + i];
	if (me) {
		int parent = (me - 1) / degree;

		FTX_POST(ctx, fi_trecv(ctx->ep, out, len, NULL,
				       ctx->addrs[parent], tag | 1, 0, &pctx));
		FTX_POST(ctx, fi_tsend(ctx->ep, out, len, NULL,
				       ctx->addrs[parent], tag, &sctx[0]));
		ftx_wait_n_ok(ctx, FTX_TX, 1);
		ftx_wait_n_ok(ctx, FTX_RX, 1);
	}
	for (c = 0; c < nch; c++)
		FTX_POST(ctx, fi_tsend(ctx->ep, out, len, NULL,
				       ctx->addrs[degree * me + 1 + c], tag | 1,
				       &sctx[c]));
	ftx_wait_n_ok(ctx, FTX_TX, (size_t) nch);
}

/* The offloaded operation -o names. */
static void
post_offload(struct ftx_ctx *ctx, const double *in, double *out, size_t count,
	     void *context)
{
	if (!strcmp(coll_op, "alltoall"))
		FTX_POST(ctx, fi_alltoall(ctx->ep, in, count, NULL, out, NULL,
					  coll, FI_UINT8, 0, context));
	else if (!strcmp(coll_op, "reduce"))
		FTX_POST(ctx, fi_reduce(ctx->ep, in, count, NULL, out, NULL,
					coll, ctx->addrs[0], FI_DOUBLE, FI_SUM,
					0, context));
	else if (!strcmp(coll_op, "bcast"))
		FTX_POST(ctx,
			 fi_broadcast(ctx->ep, out, count, NULL, coll,
				      ctx->addrs[0], FI_DOUBLE, 0, context));
	else
		FTX_POST(ctx,
			 fi_allreduce(ctx->ep, in, count, NULL, out, NULL, coll,
				      FI_DOUBLE, FI_SUM, 0, context));
}

/* Alltoall of len-byte slices: slice j of rank r holds (r + 7 j) & 0xff
 * in every byte. */
static void
a2a_fill(struct ftx_ctx *ctx, uint8_t *in, size_t len)
{
	for (int j = 0; j < ctx->nprocs; j++)
		memset(in + (size_t) j * len, (ctx->rank + 7 * j) & 0xff, len);
}

static void
a2a_check(struct ftx_ctx *ctx, const uint8_t *out, size_t len)
{
	for (int m = 0; m < ctx->nprocs; m++)
		for (size_t i = 0; i < len; i++)
			FTX_EXPECT(out[(size_t) m * len + i] ==
					   ((m + 7 * ctx->rank) & 0xff),
				   "alltoall %zu B: slice from %d wrong", len,
				   m);
}

/* The application's alltoall: every receive posted, then every send,
 * then all waited for. */
static void
host_alltoall(struct ftx_ctx *ctx, const uint8_t *in, uint8_t *out, size_t len,
	      uint64_t tag)
{
	int n = ctx->nprocs, me = ctx->rank;
	struct fi_context2 rctx[FTX_MAX_PROCS], sctx[FTX_MAX_PROCS];

	for (int j = 0; j < n; j++)
		if (j != me)
			FTX_POST(ctx, fi_trecv(ctx->ep, out + (size_t) j * len,
					       len, NULL, ctx->addrs[j], tag, 0,
					       &rctx[j]));
	for (int j = 0; j < n; j++)
		if (j != me)
			FTX_POST(ctx,
				 fi_tsend(ctx->ep, in + (size_t) j * len, len,
					  NULL, ctx->addrs[j], tag, &sctx[j]));
	memcpy(out + (size_t) me * len, in + (size_t) me * len, len);
	ftx_wait_n_ok(ctx, FTX_RX, (size_t) n - 1);
	ftx_wait_n_ok(ctx, FTX_TX, (size_t) n - 1);
}

/* What out must hold afterwards, or -1: nothing (a reduce's leaves). */
static double
expected(struct ftx_ctx *ctx)
{
	if (!strcmp(coll_op, "bcast"))
		return 1.0; /* rank 0's values */
	if (!strcmp(coll_op, "reduce") && ctx->rank)
		return -1.0;
	return ctx->nprocs * (ctx->nprocs + 1) / 2.0;
}

/* One transmit completion: polled, or slept for (-S) so that the
 * engine has the cores. */
static void
wait_one(struct ftx_ctx *ctx)
{
	struct fi_cq_tagged_entry e;
	ssize_t n;

	if (!sleepy) {
		ftx_wait_n_ok(ctx, FTX_TX, 1);
		return;
	}
	do {
		n = fi_cq_sread(ctx->cq[FTX_TX], &e, 1, NULL, 1000);
		FTX_EXPECT(!ftx_expired(ctx), "no completion");
	} while (n == -FI_EAGAIN);
	FTX_EXPECT(n == 1, "fi_cq_sread: %zd (%s)", n, fi_strerror((int) -n));
}

static int
run(struct ftx_ctx *ctx)
{
	bool offload = !strcmp(mode, "offload");
	bool a2a = !strcmp(coll_op, "alltoall");
	char deflabel[64];
	const char *lbl = label;

	if (offload)
		join_world(ctx);
	if (!lbl) { /* per case: the sleeping one says so */
		snprintf(deflabel, sizeof(deflabel), "%s-%s%s%s%s",
			 ctx->info->fabric_attr->prov_name, mode,
			 sleepy ? "-sleep" : "",
			 strcmp(coll_op, "allreduce") ? "-" : "",
			 strcmp(coll_op, "allreduce") ? coll_op : "");
		lbl = deflabel;
	}
	if (compute_us && b2b)
		ftx_fail("-c and -B do not mix");
	if (!offload && strcmp(coll_op, "allreduce") && !a2a)
		ftx_fail("-m host runs allreduce and alltoall only");
	if (ctx->rank == 0)
		printf("label,nprocs,bytes,median_us,min_us\n");
	for (int s = 0; s < nsizes; s++) {
		/* alltoall: bytes of slices; the others: doubles */
		size_t count = a2a ? sizes[s] :
			       sizes[s] / sizeof(double) ?
				     sizes[s] / sizeof(double) :
				     1;
		size_t bytes = a2a ? (size_t) ctx->nprocs * sizes[s] :
				     count * sizeof(double);
		int n = sizes[s] >= 65536 ? (reps / 10 > 20 ? reps / 10 : 20) :
					    reps;
		double *in = ftx_alloc(bytes ? bytes : 1);
		double *out = ftx_alloc(bytes ? bytes : 1);
		double *slots =
			ftx_alloc((size_t) degree * count * sizeof(double));
		uint64_t *times = calloc((size_t) n, sizeof(*times));
		uint64_t all[FTX_MAX_PROCS];

		FTX_EXPECT(times, "out of memory");
		if (a2a)
			a2a_fill(ctx, (uint8_t *) in, count);
		else
			for (size_t i = 0; i < count; i++)
				out[i] = in[i] = ctx->rank + 1;
		if (b2b) {
			/* one start, n operations in a row: the mean */
			uint64_t t0 = 0, dt;
			int ctxv;

			for (int r = -warmup; r < n; r++) {
				if (!r) {
					ftx_barrier(ctx);
					t0 = ftx_now_ns();
				}
				if (offload) {
					post_offload(ctx, in, out, count,
						     &ctxv);
					wait_one(ctx);
				} else if (a2a) {
					host_alltoall(
						ctx, (uint8_t *) in,
						(uint8_t *) out, count,
						HOST_TAG | (uint64_t) (r +
								       warmup));
				} else {
					host_allreduce(
						ctx, in, out, slots, count,
						HOST_TAG |
							((uint64_t) (r + warmup)
							 << 1));
				}
			}
			dt = (ftx_now_ns() - t0) / (uint64_t) n;
			for (int k = 0; k < n; k++)
				times[k] = dt;
		}
		for (int r = b2b ? n : -warmup; r < n; r++) {
			uint64_t t0 = 0, done, last = 0;
			unsigned spins = 0;
			int ctxv;

			if (ctx->rank == 0)
				t0 = ftx_now_ns() + 200000;
			t0 = ftx_bcast(ctx, 40, t0);
			while (ftx_now_ns() < t0)
				;
			if (offload) {
				post_offload(ctx, in, out, count, &ctxv);
				if (compute_us)
					compute();
				wait_one(ctx);
			} else if (a2a) {
				host_alltoall(ctx, (uint8_t *) in,
					      (uint8_t *) out, count,
					      HOST_TAG |
						      (uint64_t) (r + warmup));
			} else {
				host_allreduce(
					ctx, in, out, slots, count,
					HOST_TAG |
						((uint64_t) (r + warmup) << 1));
			}
			done = ftx_now_ns();
			(void) spins;
			ftx_allgather(ctx, &done, sizeof(done), all);
			for (int k = 0; k < ctx->nprocs; k++)
				if (all[k] > last)
					last = all[k];
			if (r >= 0)
				times[r] = last - t0;
		}
		if (a2a)
			a2a_check(ctx, (const uint8_t *) out, count);
		for (size_t i = 0; !a2a && expected(ctx) >= 0 && i < count; i++)
			FTX_EXPECT(out[i] == expected(ctx),
				   "%zu B: element %zu is %g", sizes[s], i,
				   out[i]);
		qsort(times, (size_t) n, sizeof(*times), ftx_cmp_u64);
		if (ctx->rank == 0)
			printf("%s,%d,%zu,%.3f,%.3f\n", lbl, ctx->nprocs,
			       sizes[s], times[n / 2] / 1e3, times[0] / 1e3);
		fflush(stdout);
		free(times);
		ftx_free(in);
		ftx_free(out);
		ftx_free(slots);
	}
	if (offload) {
		FTX_CHK(fi_close(&mc->fid));
		FTX_CHK(fi_close(&set->fid));
	}
	return 0;
}

static void
hints(struct ftx_ctx *ctx, struct fi_info *h)
{
	(void) ctx;
	if (!strcmp(mode, "offload"))
		h->caps |= FI_COLLECTIVE;
}

static const struct ftx_case cases[] = {
	{.name = "allreduce", .run = run, .pre_enable = bind_eq},
	{.name = "allreduce_sleep",
	 .run = run,
	 .pre_enable = bind_eq,
	 .cq_wait = FI_WAIT_UNSPEC},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_bench_coll",
	.desc = "allreduce completion time (seed 002's metric), CSV",
	.caps = FI_TAGGED | FI_DIRECTED_RECV,
	.nprocs = 4,
	.min_procs = 1,
	.max_procs = FTX_MAX_PROCS,
	.timeout = 600,
	.optstr = "s:i:w:m:k:l:SBc:o:",
	.opt = opt,
	.opthelp = "  -s LIST  sizes in bytes (default 8,16,32,48,4k,1m)\n"
		   "  -i N     repetitions per size (default 200; a tenth, "
		   "at least 20, from 64 KiB)\n"
		   "  -w N     warm-up repetitions (default 20)\n"
		   "  -m MODE  offload (fi_allreduce) or host (tree driven "
		   "by the application)\n"
		   "  -o OP    offload: allreduce (default), reduce or bcast "
		   "(rooted at rank 0), or alltoall (also with -m host)\n"
		   "  -k K     branch degree of the host tree (default: "
		   "FI_TNBC_COLL_DEGREE, else 8, the provider's)\n"
		   "  -l NAME  label of the CSV lines\n"
		   "  -S       wait in fi_cq_sread (with -C allreduce_sleep)\n"
		   "  -B       back to back: the mean of operations in a row "
		   "(osu_allreduce's figure), not completion time\n"
		   "  -c USEC  compute USEC between posting and waiting, with "
		   "no libfabric call: the completion time then shows how "
		   "much of the operation progressed meanwhile\n",
	.hints = hints,
	.cases = cases,
	.quiet = true,
};

int
main(int argc, char **argv)
{
	/* the host tree has the provider's shape unless -k says otherwise */
	const char *k = getenv("FI_TNBC_COLL_DEGREE");

	degree = k && atoi(k) > 0 ? atoi(k) : 8;
	return ftx_main(&test, argc, argv);
}
