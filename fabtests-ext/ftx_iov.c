/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Scatter/gather sends and receives through the *msg calls, remote CQ data
 * through every call that carries it, and inject semantics (the buffer is
 * reusable the moment the call returns).
 */
#include "common/ftx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IOV 64

static const size_t totals[] = {0, 1, 4097, 300000};
#define NTOTALS (sizeof(totals) / sizeof(totals[0]))

/* uneven cuts, and an empty segment in the middle when there is room */
static void
split(size_t total, int n, uint64_t salt, size_t *lens)
{
	size_t left = total;
	int i;

	for (i = 0; i < n; i++)
		lens[i] = 0;
	for (i = 0; i < n - 1; i++) {
		if (n >= 3 && i == 1)
			continue;
		lens[i] = left ? ftx_mix(salt + (uint64_t) i) % (left + 1) : 0;
		left -= lens[i];
	}
	lens[n - 1] += left;
}

static int
pick_counts(size_t limit, int *out)
{
	int cand[] = {1, 2, 3, (int) (limit < MAX_IOV ? limit : MAX_IOV)};
	int n = 0, i, j;

	for (i = 0; i < 4; i++) {
		if (cand[i] < 1 || (size_t) cand[i] > limit)
			continue;
		for (j = 0; j < n && out[j] != cand[i]; j++)
			;
		if (j == n)
			out[n++] = cand[i];
	}
	return n;
}

struct sg {
	int n;
	size_t lens[MAX_IOV];
	struct iovec iov[MAX_IOV];
	void *desc[MAX_IOV];
};

static void
sg_alloc(struct sg *sg, size_t total, int n, uint64_t salt)
{
	int i;

	sg->n = n;
	split(total, n, salt, sg->lens);
	for (i = 0; i < n; i++) {
		sg->iov[i].iov_base = ftx_alloc(sg->lens[i]);
		sg->iov[i].iov_len = sg->lens[i];
		sg->desc[i] = NULL;
	}
}

/* segment i holds bytes [off, off+len) of one pattern stream */
static void
sg_fill(struct sg *sg, size_t total, uint64_t seed)
{
	uint8_t *flat = ftx_alloc(total);
	size_t off = 0;
	int i;

	ftx_fill(flat, total, seed);
	for (i = 0; i < sg->n; i++) {
		memcpy(sg->iov[i].iov_base, flat + off, sg->lens[i]);
		off += sg->lens[i];
	}
	ftx_free(flat);
}

static void
sg_verify(struct sg *sg, size_t total, uint64_t seed, const char *what)
{
	uint8_t *flat = ftx_alloc(total);
	size_t off = 0;
	int i;

	for (i = 0; i < sg->n; i++) {
		memcpy(flat + off, sg->iov[i].iov_base, sg->lens[i]);
		ftx_guard_verify(sg->iov[i].iov_base, sg->lens[i], what);
		off += sg->lens[i];
	}
	ftx_verify(flat, total, seed, what);
	ftx_free(flat);
}

static void
sg_free(struct sg *sg)
{
	int i;

	for (i = 0; i < sg->n; i++)
		ftx_free(sg->iov[i].iov_base);
}

static void
expect_rx(struct ftx_ctx *ctx, void *fctx, size_t len, uint64_t kind,
	  uint64_t tag, bool has_data, uint64_t data, const char *what)
{
	struct ftx_comp c;

	ftx_wait_ok(ctx, FTX_RX, &c);
	if (kind == FI_TAGGED)
		FTX_EXPECT(c.tag == tag, "%s: rx tag 0x%llx, expected 0x%llx",
			   what, (unsigned long long) c.tag,
			   (unsigned long long) tag);
	FTX_EXPECT(c.op_context == fctx, "%s: rx context %p, expected %p", what,
		   c.op_context, fctx);
	FTX_EXPECT(c.len == len, "%s: rx len %zu, expected %zu", what, c.len,
		   len);
	FTX_EXPECT((c.flags & (FI_RECV | kind)) == (FI_RECV | kind),
		   "%s: rx flags 0x%llx", what, (unsigned long long) c.flags);
	if (has_data) {
		FTX_EXPECT(c.flags & FI_REMOTE_CQ_DATA,
			   "%s: FI_REMOTE_CQ_DATA missing from flags 0x%llx",
			   what, (unsigned long long) c.flags);
		FTX_EXPECT(c.data == data,
			   "%s: cq data 0x%llx, expected 0x%llx", what,
			   (unsigned long long) c.data,
			   (unsigned long long) data);
	} else {
		FTX_EXPECT(!(c.flags & FI_REMOTE_CQ_DATA),
			   "%s: FI_REMOTE_CQ_DATA set, but none was sent",
			   what);
	}
}

static void
expect_tx(struct ftx_ctx *ctx, void *fctx, const char *what)
{
	struct ftx_comp c;

	ftx_wait_ok(ctx, FTX_TX, &c);
	FTX_EXPECT(c.op_context == fctx, "%s: tx context %p, expected %p", what,
		   c.op_context, fctx);
	FTX_EXPECT(c.flags & FI_SEND, "%s: tx flags 0x%llx lack FI_SEND", what,
		   (unsigned long long) c.flags);
}

static void
iov_case(struct ftx_ctx *ctx, bool tagged)
{
	int txn[4], rxn[4], ntx, nrx, a, b;
	size_t t;
	uint64_t tag = 0x8000000000000001ull;
	struct fi_context2 sctx, rctx;
	char what[128];

	ntx = pick_counts(ctx->info->tx_attr->iov_limit, txn);
	nrx = pick_counts(ctx->info->rx_attr->iov_limit, rxn);
	for (t = 0; t < NTOTALS; t++)
		for (a = 0; a < ntx; a++)
			for (b = 0; b < nrx; b++) {
				uint64_t seed =
					ftx_seed(t, (uint64_t) a, (uint64_t) b);
				struct sg sg;

				snprintf(what, sizeof(what),
					 "%s %zu B, %d tx iov, %d rx iov",
					 tagged ? "tagged" : "msg", totals[t],
					 txn[a], rxn[b]);
				tag++;
				if (ctx->rank == 1) {
					struct fi_msg_tagged tm = {0};
					struct fi_msg m = {0};

					sg_alloc(&sg, totals[t], rxn[b],
						 seed ^ 1);
					tm.msg_iov = m.msg_iov = sg.iov;
					tm.desc = m.desc = sg.desc;
					tm.iov_count = m.iov_count =
						(size_t) sg.n;
					tm.addr = m.addr = FI_ADDR_UNSPEC;
					tm.tag = tag;
					tm.context = m.context = &rctx;
					if (tagged)
						FTX_POST(ctx,
							 fi_trecvmsg(ctx->ep,
								     &tm, 0));
					else
						FTX_POST(ctx,
							 fi_recvmsg(ctx->ep, &m,
								    0));
					ftx_barrier(ctx);
					expect_rx(ctx, &rctx, totals[t],
						  tagged ? FI_TAGGED : FI_MSG,
						  tag, false, 0, what);
					sg_verify(&sg, totals[t], seed, what);
				} else {
					struct fi_msg_tagged tm = {0};
					struct fi_msg m = {0};

					sg_alloc(&sg, totals[t], txn[a], seed);
					sg_fill(&sg, totals[t], seed);
					tm.msg_iov = m.msg_iov = sg.iov;
					tm.desc = m.desc = sg.desc;
					tm.iov_count = m.iov_count =
						(size_t) sg.n;
					tm.addr = m.addr = ctx->addrs[1];
					tm.tag = tag;
					tm.context = m.context = &sctx;
					ftx_barrier(ctx);
					if (tagged)
						FTX_POST(ctx,
							 fi_tsendmsg(ctx->ep,
								     &tm, 0));
					else
						FTX_POST(ctx,
							 fi_sendmsg(ctx->ep, &m,
								    0));
					expect_tx(ctx, &sctx, what);
				}
				sg_free(&sg);
			}
}

static int
run_tagged_iov(struct ftx_ctx *ctx)
{
	iov_case(ctx, true);
	return 0;
}

static int
run_msg_iov(struct ftx_ctx *ctx)
{
	iov_case(ctx, false);
	return 0;
}

/* ------------------------------------------------------- remote data */

enum data_op {
	OP_TSENDDATA,
	OP_SENDDATA,
	OP_TINJECTDATA,
	OP_INJECTDATA,
	OP_TSENDMSG,
	OP_SENDMSG,
	OP_TSEND_NODATA,
	OP_COUNT,
};

static const char *const op_names[] = {
	"fi_tsenddata", "fi_senddata", "fi_tinjectdata",     "fi_injectdata",
	"fi_tsendmsg",	"fi_sendmsg",  "fi_tsend (no data)",
};

static int
run_cq_data(struct ftx_ctx *ctx)
{
	size_t inject = ctx->info->tx_attr->inject_size;
	size_t dsz = ctx->info->domain_attr->cq_data_size;
	uint64_t mask = dsz >= 8 ? ~0ull : (1ull << (dsz * 8)) - 1;
	const size_t lens[] = {0, 8, 1048576 + 5};
	struct fi_context2 sctx, rctx;
	char what[128];
	int op, l;

	for (op = 0; op < OP_COUNT; op++)
		for (l = 0; l < 3; l++) {
			bool inj = op == OP_TINJECTDATA || op == OP_INJECTDATA;
			bool tagged =
				op == OP_TSENDDATA || op == OP_TINJECTDATA ||
				op == OP_TSENDMSG || op == OP_TSEND_NODATA;
			size_t len = lens[l];
			uint64_t tag = 0xfedcba9876543210ull ^ (uint64_t) op;
			uint64_t data = ftx_mix((uint64_t) (op * 4 + l)) & mask;
			uint64_t seed = ftx_seed(9, (uint64_t) op, len);
			fi_addr_t dst = ctx->addrs[1];
			struct iovec iov;
			void *buf;

			if (inj && len > inject)
				continue;
			snprintf(what, sizeof(what), "%s %zu B", op_names[op],
				 len);
			buf = ftx_alloc(len);
			if (ctx->rank == 1) {
				if (tagged)
					FTX_POST(ctx,
						 fi_trecv(ctx->ep, buf, len,
							  NULL, FI_ADDR_UNSPEC,
							  tag, 0, &rctx));
				else
					FTX_POST(ctx,
						 fi_recv(ctx->ep, buf, len,
							 NULL, FI_ADDR_UNSPEC,
							 &rctx));
				ftx_barrier(ctx);
				expect_rx(ctx, &rctx, len,
					  tagged ? FI_TAGGED : FI_MSG, tag,
					  op != OP_TSEND_NODATA, data, what);
				ftx_verify(buf, len, seed, what);
				ftx_guard_verify(buf, len, what);
				ftx_free(buf);
				continue;
			}
			ftx_fill(buf, len, seed);
			iov.iov_base = buf;
			iov.iov_len = len;
			ftx_barrier(ctx);
			switch (op) {
			case OP_TSENDDATA:
				FTX_POST(ctx,
					 fi_tsenddata(ctx->ep, buf, len, NULL,
						      data, dst, tag, &sctx));
				break;
			case OP_SENDDATA:
				FTX_POST(ctx,
					 fi_senddata(ctx->ep, buf, len, NULL,
						     data, dst, &sctx));
				break;
			case OP_TINJECTDATA:
				FTX_POST(ctx, fi_tinjectdata(ctx->ep, buf, len,
							     data, dst, tag));
				break;
			case OP_INJECTDATA:
				FTX_POST(ctx, fi_injectdata(ctx->ep, buf, len,
							    data, dst));
				break;
			case OP_TSENDMSG: {
				struct fi_msg_tagged m = {
					.msg_iov = &iov,
					.iov_count = 1,
					.addr = dst,
					.tag = tag,
					.context = &sctx,
					.data = data,
				};
				FTX_POST(ctx, fi_tsendmsg(ctx->ep, &m,
							  FI_REMOTE_CQ_DATA));
				break;
			}
			case OP_SENDMSG: {
				struct fi_msg m = {
					.msg_iov = &iov,
					.iov_count = 1,
					.addr = dst,
					.context = &sctx,
					.data = data,
				};
				FTX_POST(ctx, fi_sendmsg(ctx->ep, &m,
							 FI_REMOTE_CQ_DATA));
				break;
			}
			case OP_TSEND_NODATA:
				FTX_POST(ctx, fi_tsend(ctx->ep, buf, len, NULL,
						       dst, tag, &sctx));
				break;
			}
			if (inj)
				/* the buffer is ours again at once */
				memset(buf, 0xee, len);
			else
				expect_tx(ctx, &sctx, what);
			ftx_free(buf);
		}
	return 0;
}

/* ------------------------------------------------------------- inject */

static int
run_inject(struct ftx_ctx *ctx)
{
	size_t inject = ctx->info->tx_attr->inject_size;
	size_t lens[] = {0, 1, 63, inject};
	struct fi_context2 sctx, rctx;
	char what[96];
	int l, mode;

	for (mode = 0; mode < 3; mode++)
		for (l = 0; l < 4; l++) {
			size_t len = lens[l];
			bool tagged = mode != 1;
			uint64_t tag = 0x1234000000000000ull | (uint64_t) l;
			uint64_t seed = ftx_seed(11, (uint64_t) mode, len);
			void *buf;

			if (len > inject)
				continue;
			snprintf(what, sizeof(what),
				 "%s %zu B (inject_size "
				 "%zu)",
				 mode == 0 ? "fi_tinject" :
				 mode == 1 ? "fi_inject" :
					     "fi_tsendmsg(FI_INJECT)",
				 len, inject);
			buf = ftx_alloc(len);
			if (ctx->rank == 1) {
				if (tagged)
					FTX_POST(ctx,
						 fi_trecv(ctx->ep, buf, len,
							  NULL, FI_ADDR_UNSPEC,
							  tag, 0, &rctx));
				else
					FTX_POST(ctx,
						 fi_recv(ctx->ep, buf, len,
							 NULL, FI_ADDR_UNSPEC,
							 &rctx));
				ftx_barrier(ctx);
				expect_rx(ctx, &rctx, len,
					  tagged ? FI_TAGGED : FI_MSG, tag,
					  false, 0, what);
				ftx_verify(buf, len, seed, what);
				ftx_guard_verify(buf, len, what);
			} else {
				struct iovec iov = {buf, len};
				struct fi_msg_tagged m = {
					.msg_iov = &iov,
					.iov_count = 1,
					.addr = ctx->addrs[1],
					.tag = tag,
					.context = &sctx,
				};

				ftx_fill(buf, len, seed);
				ftx_barrier(ctx);
				if (mode == 0)
					FTX_POST(ctx,
						 fi_tinject(ctx->ep, buf, len,
							    ctx->addrs[1],
							    tag));
				else if (mode == 1)
					FTX_POST(ctx,
						 fi_inject(ctx->ep, buf, len,
							   ctx->addrs[1]));
				else
					FTX_POST(ctx, fi_tsendmsg(ctx->ep, &m,
								  FI_INJECT));
				/* whatever the receiver sees was copied */
				memset(buf, 0xee, len);
				if (mode == 2)
					/* FI_INJECT still completes */
					expect_tx(ctx, &sctx, what);
			}
			ftx_barrier(ctx);
			ftx_free(buf);
		}
	/* injects generate no completions at all */
	ftx_drain_for(ctx, 20);
	FTX_EXPECT(!ftx_pending(ctx, FTX_TX), "an inject generated a send "
					      "completion");
	return 0;
}

static void
hints(struct ftx_ctx *ctx, struct fi_info *h)
{
	/* tests that rely on remote CQ data need some */
	if (!strcmp(ctx->tcase->name, "cq_data"))
		h->domain_attr->cq_data_size = 4;
}

static const struct ftx_case cases[] = {
	{.name = "tagged_iov", .run = run_tagged_iov},
	{.name = "msg_iov", .run = run_msg_iov},
	{.name = "cq_data", .run = run_cq_data},
	{.name = "inject", .run = run_inject},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_iov",
	.desc = "sendmsg/recvmsg with iovecs, remote CQ data, inject",
	.caps = FI_MSG | FI_TAGGED,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = 2,
	.timeout = 60,
	.hints = hints,
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
