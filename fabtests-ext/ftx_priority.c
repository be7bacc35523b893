/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tnbc's transmit priority (fi_ext_tnbc.h, FI_TNBC_EP_OPS_1): transfers
 * waiting to leave the node go highest priority first, FIFO within one
 * priority.  Skipped on providers without that extension.
 *
 * The receiver (rank 1) runs without its engine thread (FI_TNBC_ENGINE=0)
 * and with a small receive queue (FI_TNBC_RX_SLOTS of 1 KiB packets,
 * FI_TNBC_SLOT_SIZE=1024: 8 KiB by default here, which holds 64 of these
 * 64-byte messages, two 64-byte cells each with their short shm header),
 * and makes no libfabric call until the sender has posted everything, so
 * its queue stays full.  The sender posts NLOW low-priority tagged sends
 * (tag = sequence), waits for its engine to fill the receiver's queue,
 * then posts NHIGH high-priority ones.  When the receiver starts
 * receiving it must see the low ones that sat in its queue, then all the
 * high ones, then the remaining low ones; FIFO within each priority.
 *
 *  prio_live  sends posted directly
 *  prio_trig  FI_TRIGGER sends: the low ones fire first, the high ones
 *             (queued at high priority, fired after the priority went
 *             back to the default) later; the priority in force when they
 *             were queued must count
 *  prio_dw    the same with deferred work
 */
#include "common/ftx_trig.h"

#include <rdma/fi_ext_tnbc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG	 0x7c44000000000000ull
#define HIGH	 0x1000
#define MLEN	 64
#define MAX_MSGS 1024
#ifndef PRIO_HIGH
#define PRIO_HIGH 200
#endif
#define SETTLE_MS 100

static int nlow = 96, nhigh = 8;
static unsigned slots = 8;

/* Messages of MLEN bytes the receiver's queue holds (fi_tnbc(7)). */
static int
queue_msgs(void)
{
	return (int) (slots * 1024 / 128);
}

static int
opt(int c, const char *arg)
{
	switch (c) {
	case 'l':
		nlow = atoi(arg);
		break;
	case 'H':
		nhigh = atoi(arg);
		break;
	case 'q':
		slots = (unsigned) atoi(arg);
		return slots >= 8 && !(slots & (slots - 1)) ? 0 : -1;
	default:
		return -1;
	}
	return nlow > 0 && nhigh > 0 && nlow + nhigh <= MAX_MSGS ? 0 : -1;
}

/* before the rank's first fi_getinfo, so that tnbc reads them */
static void
hints(struct ftx_ctx *ctx, struct fi_info *h)
{
	char buf[16];

	(void) h;
	if (ctx->rank == 1) {
		snprintf(buf, sizeof(buf), "%u", slots);
		setenv("FI_TNBC_ENGINE", "0", 1);
		setenv("FI_TNBC_RX_SLOTS", buf, 1);
		setenv("FI_TNBC_SLOT_SIZE", "1024", 1);
	} else {
		unsetenv("FI_TNBC_ENGINE");
	}
}

static struct fi_tnbc_ops_ep *
ep_ops(struct ftx_ctx *ctx)
{
	struct fi_tnbc_ops_ep *ops = NULL;
	int ret;

	ret = fi_open_ops(&ctx->ep->fid, FI_TNBC_EP_OPS_1, 0, (void **) &ops,
			  NULL);
	if (ret || !ops)
		ftx_skip("fi_open_ops(%s) on a %s endpoint: %s (%d)",
			 FI_TNBC_EP_OPS_1, ctx->info->fabric_attr->prov_name,
			 fi_strerror(-ret), ret);
	if (ops->size < sizeof(*ops))
		ftx_fail("fi_tnbc_ops_ep is %zu bytes, expected %zu", ops->size,
			 sizeof(*ops));
	return ops;
}

static void
set_prio(struct ftx_ctx *ctx, struct fi_tnbc_ops_ep *ops, unsigned p)
{
	unsigned got = 999;

	FTX_CHK(ops->set_priority(ctx->ep, p));
	FTX_CHK(ops->get_priority(ctx->ep, &got));
	FTX_EXPECT(got == p, "get_priority gave %u after set_priority(%u)", got,
		   p);
}

/* "L0-L15,H0-H7,L16-L63" */
static void
describe(const uint64_t *seq, int n, char *out, size_t len)
{
	size_t l = 0;
	int i = 0, j;

	out[0] = '\0';
	while (i < n && l < len) {
		for (j = i; j + 1 < n && seq[j + 1] == seq[j] + 1; j++)
			;
		if (j > i)
			l += (size_t) snprintf(
				out + l, len - l, "%s%c%llu-%c%llu",
				i ? "," : "", seq[i] & HIGH ? 'H' : 'L',
				(unsigned long long) (seq[i] & ~HIGH),
				seq[j] & HIGH ? 'H' : 'L',
				(unsigned long long) (seq[j] & ~HIGH));
		else
			l += (size_t) snprintf(
				out + l, len - l, "%s%c%llu", i ? "," : "",
				seq[i] & HIGH ? 'H' : 'L',
				(unsigned long long) (seq[i] & ~HIGH));
		i = j + 1;
	}
}

static void
read_raw_n(struct ftx_ctx *ctx, struct fid_cq *cq, int n, const char *what)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	int i;

	for (i = 0; i < n; i++) {
		ctx->what = what;
		if (ftx_cq_read_raw(ctx, cq, &e, NULL, &err) != 1)
			ftx_fail("%s: error completion %d (%s)", what, err.err,
				 fi_strerror(err.err));
	}
	ctx->what = NULL;
}

enum mode { LIVE, TRIG, DW };

/*
 * Waits (up to 2 s) until the first min(queue_msgs(), nlow) low-priority sends
 * completed, which on a provider that completes an eager send once it
 * sits in the peer's queue means that queue is full; then a little more
 * so that the rest are waiting.  Returns the completions read from the CQ.
 */
static int
settle(struct ftx_ctx *ctx, enum mode mode, struct fid_cntr *sc)
{
	int want = nlow < queue_msgs() ? nlow : queue_msgs(), got = 0;
	uint64_t end = ftx_now_ns() + 2000000000ull;
	struct fi_cq_tagged_entry e;
	unsigned spins = 0;
	ssize_t ret;

	while (ftx_now_ns() < end) {
		if (mode == DW) {
			if (fi_cntr_read(sc) >= (uint64_t) want)
				break;
		} else {
			ret = fi_cq_read(ctx->cq[FTX_TX], &e, 1);
			if (ret == 1 && ++got >= want)
				break;
			if (ret != 1 && ret != -FI_EAGAIN)
				ftx_fail("fi_cq_read(tx): %s (%zd)",
					 fi_strerror((int) -ret), ret);
		}
		ftx_relax(&spins);
	}
	if (ftx_now_ns() >= end)
		ftx_log("only %d of %d low-priority sends completed before "
			"the high ones",
			mode == DW ? (int) fi_cntr_read(sc) : got, want);
	ftx_sleep_ms(SETTLE_MS / 5);
	return got;
}

static void
sender(struct ftx_ctx *ctx, enum mode mode)
{
	struct fi_tnbc_ops_ep *ops = ep_ops(ctx);
	int n = nlow + nhigh, i;
	uint64_t *buf = calloc((size_t) n, MLEN);
	struct fi_context2 *fc = calloc((size_t) n, sizeof(*fc));
	struct ftx_trig *tt = calloc((size_t) n, sizeof(*tt));
	struct ftx_dw *dd = calloc((size_t) n, sizeof(*dd));
	struct fid_cntr *c = ftx_cntr_new(ctx), *sc = ftx_cntr_new(ctx);
	unsigned got;
	int nread = 0;

	if (!buf || !fc || !tt || !dd)
		ftx_fail("out of memory");
	FTX_CHK(ops->get_priority(ctx->ep, &got));
	FTX_EXPECT(got == FI_TNBC_PRIO_DEFAULT,
		   "a new endpoint's priority is %u, expected %u", got,
		   FI_TNBC_PRIO_DEFAULT);
	FTX_EXPECT(ops->set_priority(ctx->ep, FI_TNBC_PRIO_MAX + 1) ==
			   -FI_EINVAL,
		   "set_priority(%u) was not refused with -FI_EINVAL",
		   FI_TNBC_PRIO_MAX + 1);
	set_prio(ctx, ops, FI_TNBC_PRIO_DEFAULT);
	ftx_barrier(ctx);

	for (i = 0; i < n; i++) {
		uint64_t seq =
			i < nlow ? (uint64_t) i : HIGH | (uint64_t) (i - nlow);
		struct ftx_op op = {
			.type = FI_OP_TSEND,
			.ep = ctx->ep,
			.buf = (uint8_t *) buf + (size_t) i * MLEN,
			.len = MLEN,
			.addr = ctx->addrs[1],
			.tag = TAG | seq,
		};

		memcpy(op.buf, &seq, sizeof(seq));
		if (i == nlow) {
			if (mode == LIVE)
				/* the engine fills the receiver's queue */
				nread = settle(ctx, mode, sc);
			set_prio(ctx, ops, PRIO_HIGH);
		}
		switch (mode) {
		case LIVE:
			FTX_POST(ctx, fi_tsend(ctx->ep, op.buf, MLEN, NULL,
					       op.addr, op.tag, &fc[i]));
			break;
		case TRIG:
			FTX_POST(ctx, ftx_trig_post(&tt[i], &op, c,
						    i < nlow ? 1 : 2));
			break;
		case DW:
			ftx_dw_post(ctx, &dd[i], &op, c, i < nlow ? 1 : 2, sc);
			break;
		}
	}
	set_prio(ctx, ops, FI_TNBC_PRIO_DEFAULT);
	if (mode != LIVE) {
		/* low ones first, and once they fill the queue, high ones
		 * queued at high priority but fired at the default */
		FTX_CHK(fi_cntr_add(c, 1));
		nread = settle(ctx, mode, sc);
		FTX_CHK(fi_cntr_add(c, 1));
		ftx_sleep_ms(SETTLE_MS / 5);
	}
	/* the receiver starts */
	ftx_barrier(ctx);
	if (mode == DW)
		ftx_cntr_wait_raw(ctx, sc, (uint64_t) n,
				  "deferred sends' completion_cntr");
	else
		read_raw_n(ctx, ctx->cq[FTX_TX], n - nread, "send completions");
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	free(buf);
	free(fc);
	free(tt);
	free(dd);
}

static void
receiver(struct ftx_ctx *ctx)
{
	int n = nlow + nhigh, i, k = 0, before, nl = 0, nh = 0;
	uint64_t *buf = calloc((size_t) n, MLEN), *seq = calloc((size_t) n, 8);
	uint64_t *want = calloc((size_t) n, 8);
	struct fi_context2 *fc = calloc((size_t) n, sizeof(*fc));
	char got[512], exp[512];
	bool bad = false;

	if (!buf || !seq || !want || !fc)
		ftx_fail("out of memory");
	ep_ops(ctx);
	ftx_barrier(ctx);
	/* no libfabric call until the sender posted (and fired) all */
	ftx_barrier(ctx);
	ftx_sleep_ms(SETTLE_MS / 2);
	for (i = 0; i < n; i++)
		FTX_POST(ctx,
			 fi_trecv(ctx->ep, (uint8_t *) buf + (size_t) i * MLEN,
				  MLEN, NULL, FI_ADDR_UNSPEC, TAG, ~TAG,
				  &fc[i]));
	read_raw_n(ctx, ctx->cq[FTX_RX], n, "receive completions");
	/* wildcard receives match in arrival order */
	for (i = 0; i < n; i++)
		memcpy(&seq[i], (uint8_t *) buf + (size_t) i * MLEN, 8);
	before = nlow < queue_msgs() ? nlow : queue_msgs();
	for (i = 0; i < before; i++)
		want[k++] = (uint64_t) i;
	for (i = 0; i < nhigh; i++)
		want[k++] = HIGH | (uint64_t) i;
	for (i = before; i < nlow; i++)
		want[k++] = (uint64_t) i;
	for (i = 0; i < n; i++) {
		if (seq[i] != want[i])
			bad = true;
		/* FIFO within each priority */
		if (seq[i] & HIGH)
			FTX_SOFT(seq[i] == (HIGH | (uint64_t) nh++),
				 "high-priority message %llu arrived as the "
				 "%d-th high one",
				 (unsigned long long) (seq[i] & ~HIGH), nh - 1);
		else
			FTX_SOFT(seq[i] == (uint64_t) nl++,
				 "low-priority message %llu arrived as the "
				 "%d-th low one",
				 (unsigned long long) seq[i], nl - 1);
	}
	describe(seq, n, got, sizeof(got));
	describe(want, n, exp, sizeof(exp));
	ftx_log("arrival order %s", got);
	FTX_SOFT(!bad,
		 "arrival order %s, expected %s (receive queue holding %d "
		 "low-priority messages when the high ones were posted)",
		 got, exp, queue_msgs());
	ftx_barrier(ctx);
	free(buf);
	free(seq);
	free(want);
	free(fc);
}

static int
run(struct ftx_ctx *ctx, enum mode mode)
{
	if (ctx->rank == 0)
		sender(ctx, mode);
	else
		receiver(ctx);
	return 0;
}

static int
run_live(struct ftx_ctx *ctx)
{
	return run(ctx, LIVE);
}

static int
run_trig(struct ftx_ctx *ctx)
{
	return run(ctx, TRIG);
}

static int
run_dw(struct ftx_ctx *ctx)
{
	return run(ctx, DW);
}

static const struct ftx_case cases[] = {
	{.name = "prio_live", .run = run_live, .flags = FTX_CASE_RAW_CQ},
	{.name = "prio_trig",
	 .run = run_trig,
	 .caps = FI_TRIGGER,
	 .flags = FTX_CASE_RAW_CQ},
	{.name = "prio_dw",
	 .run = run_dw,
	 .caps = FI_TRIGGER,
	 .flags = FTX_CASE_RAW_CQ},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_priority",
	.desc = "tnbc transmit priority: high before low, FIFO within one",
	.caps = FI_TAGGED,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = 2,
	.timeout = 30,
	.optstr = "l:H:q:",
	.opt = opt,
	.opthelp = "  -l N     low-priority messages (default 96)\n"
		   "  -H N     high-priority messages (default 8)\n"
		   "  -q N     receiver's FI_TNBC_RX_SLOTS (of 1 KiB packets), "
		   "a power of two >= 8 (default 8)\n",
	.hints = hints,
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
