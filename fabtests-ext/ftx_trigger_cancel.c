/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Removing triggered operations and deferred work before they fire.
 *
 *  cancel_work  FI_CANCEL_WORK: removed requests complete with FI_ECANCELED
 *               (op_context = &work->context) on the endpoint's CQ and an
 *               error on their completion_cntr, counter ops are dropped,
 *               nothing removed ever fires; the rest still fire; a second
 *               cancel, or one of a fired request, is -FI_ENOENT
 *  flush_all    FI_FLUSH_WORK(NULL) removes everything, both kinds
 *  flush_cntr   FI_FLUSH_WORK for one triggering counter leaves the others
 *  cancel_trig  fi_cancel of queued FI_TRIGGER operations
 *  bad_*        bad requests are refused with -FI_EINVAL and nothing is
 *               queued: raising the counters afterwards moves nothing
 *  close_busy   closing a counter or endpoint with queued work referencing
 *               it is -FI_EBUSY; after a flush or cancel it closes
 *  close_after_fire
 *               once everything queued on a counter fired and completed,
 *               the counter closes at once
 *
 * Rank 0 queues; rank 1 has wildcard receives posted for everything rank 0
 * could send and checks that exactly the expected messages arrive.
 */
#include "common/ftx_trig.h"

#include <rdma/fi_ext_tnbc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rank 0 -> rank 1 messages: TAG | id; rank 1 -> rank 0: TAG2 | id */
#define TAG	 0x7c42000000000000ull
#define TAG2	 0x7c43000000000000ull
#define MLEN	 64
#define NSINK	 12
#define MAX_REQS 16
#define WAIT_NS	 3000000000ull

static uint8_t sink_buf[NSINK][MLEN];
static struct fi_context2 sink_ctx[NSINK];
static bool sink_used[NSINK];

/* per-request message buffers of rank 0 */
static uint8_t sbuf[MAX_REQS][MLEN];
static uint8_t rbuf[MAX_REQS][MLEN];

static uint64_t
mseed(uint64_t tag)
{
	return ftx_seed(0x43, tag, 0);
}

static void
bind_cntrs(struct ftx_ctx *ctx)
{
	struct fi_cntr_attr attr = {
		.events = FI_CNTR_EVENTS_COMP,
		.wait_obj = FI_WAIT_UNSPEC,
	};

	FTX_CHK(fi_cntr_open(ctx->domain, &attr, &ctx->cntr[FTX_TX], NULL));
	FTX_CHK(fi_cntr_open(ctx->domain, &attr, &ctx->cntr[FTX_RX], NULL));
	FTX_CHK(fi_ep_bind(ctx->ep, &ctx->cntr[FTX_TX]->fid, FI_SEND));
	FTX_CHK(fi_ep_bind(ctx->ep, &ctx->cntr[FTX_RX]->fid, FI_RECV));
}

static void
expect_ret(int ret, int want, const char *what)
{
	FTX_SOFT(ret == want, "%s returned %d (%s), expected %d (%s)", what,
		 ret, ret ? fi_strerror(-ret) : "success", want,
		 want ? fi_strerror(-want) : "success");
}

static void
expect_einval(ssize_t ret, const char *what)
{
	FTX_SOFT(ret == -FI_EINVAL,
		 "%s returned %zd (%s), expected -FI_EINVAL and nothing "
		 "queued",
		 what, ret, ret ? fi_strerror((int) -ret) : "accepted");
}

/* ------------------------------------------------------------- rank 1 */

static void
sink_begin(struct ftx_ctx *ctx)
{
	int i;

	for (i = 0; i < NSINK; i++) {
		memset(sink_buf[i], 0x5a, MLEN);
		sink_used[i] = false;
		FTX_POST(ctx,
			 fi_trecv(ctx->ep, sink_buf[i], MLEN, NULL,
				  FI_ADDR_UNSPEC, TAG, 0xffff, &sink_ctx[i]));
	}
}

static bool
wait_comp_for(struct ftx_ctx *ctx, enum ftx_which w, struct ftx_comp *c,
	      uint64_t ns)
{
	uint64_t end = ftx_now_ns() + ns;
	unsigned spins = 0;

	while (!ftx_try_comp(ctx, w, c)) {
		if (ftx_now_ns() > end || ftx_expired(ctx))
			return false;
		ftx_relax(&spins);
	}
	return true;
}

/* the sink slot a completion belongs to, or -1 */
static int
sink_slot(const struct ftx_comp *c)
{
	int k = (int) ((struct fi_context2 *) c->op_context - sink_ctx);

	return k >= 0 && k < NSINK ? k : -1;
}

/*
 * Exactly the messages want[0..n) arrive (in that order), and nothing more
 * within a while; then the unused receives are cancelled.
 */
static void
sink_end(struct ftx_ctx *ctx, const uint64_t *want, int n, const char *what)
{
	struct ftx_comp c;
	char got[256] = "", exp[256] = "";
	size_t gl = 0, el = 0;
	bool bad = false;
	int i, k, ncancel = 0;

	for (i = 0; i < n; i++) {
		el += (size_t) snprintf(exp + el, sizeof(exp) - el, "%s%#llx",
					i ? "," : "",
					(unsigned long long) want[i]);
		if (!wait_comp_for(ctx, FTX_RX, &c, WAIT_NS)) {
			ftx_defer_fail("%s: only %d of %d expected messages "
				       "arrived",
				       what, i, n);
			bad = true;
			break;
		}
		k = sink_slot(&c);
		if (c.err || k < 0) {
			ftx_print_comp("rx", &c);
			ftx_defer_fail("%s: bad receive completion", what);
			continue;
		}
		sink_used[k] = true;
		gl += (size_t) snprintf(got + gl, sizeof(got) - gl, "%s%#llx",
					i ? "," : "",
					(unsigned long long) (c.tag & 0xffff));
		if ((c.tag & 0xffff) != want[i])
			bad = true;
		else if (ftx_check(sink_buf[k], MLEN, mseed(c.tag)) != SIZE_MAX)
			ftx_defer_fail("%s: message %#llx has bad data", what,
				       (unsigned long long) want[i]);
	}
	FTX_SOFT(!bad, "%s: messages %s arrived, expected %s", what,
		 gl ? got : "(none)", el ? exp : "(none)");
	ftx_drain_for(ctx, 100);
	while (ftx_try_comp(ctx, FTX_RX, &c)) {
		k = sink_slot(&c);
		if (k >= 0)
			sink_used[k] = true;
		ftx_defer_fail("%s: a request that was cancelled, flushed or "
			       "refused (or never queued) fired: message "
			       "%#llx arrived (err %d)",
			       what, (unsigned long long) (c.tag & 0xffff),
			       c.err);
	}
	for (i = 0; i < NSINK; i++)
		if (!sink_used[i]) {
			FTX_CHK(fi_cancel(&ctx->ep->fid, &sink_ctx[i]));
			ncancel++;
		}
	for (i = 0; i < ncancel; i++)
		if (!wait_comp_for(ctx, FTX_RX, &c, WAIT_NS))
			ftx_fail("cancelling the sink's receives: only %d of "
				 "%d completions",
				 i, ncancel);
}

/* rank 1 sends these tags to rank 0 */
static void
send_to_0(struct ftx_ctx *ctx, const uint64_t *ids, int n)
{
	static uint8_t b[MAX_REQS][MLEN];
	struct fi_context2 fc[MAX_REQS];
	int i;

	for (i = 0; i < n; i++) {
		ftx_fill(b[i], MLEN, mseed(TAG2 | ids[i]));
		FTX_POST(ctx, fi_tsend(ctx->ep, b[i], MLEN, NULL, ctx->addrs[0],
				       TAG2 | ids[i], &fc[i]));
	}
	ftx_wait_n_ok(ctx, FTX_TX, (size_t) n);
}

/* ------------------------------------------------------------- rank 0 */

static struct ftx_op
tsend_op(struct ftx_ctx *ctx, int slot, uint64_t id)
{
	struct ftx_op op = {
		.type = FI_OP_TSEND,
		.ep = ctx->ep,
		.buf = sbuf[slot],
		.len = MLEN,
		.addr = ctx->addrs[1],
		.tag = TAG | id,
	};

	ftx_fill(sbuf[slot], MLEN, mseed(TAG | id));
	return op;
}

static struct ftx_op
trecv_op(struct ftx_ctx *ctx, int slot, uint64_t id)
{
	struct ftx_op op = {
		.type = FI_OP_TRECV,
		.ep = ctx->ep,
		.buf = rbuf[slot],
		.len = MLEN,
		.addr = FI_ADDR_UNSPEC,
		.tag = TAG2 | id,
	};

	memset(rbuf[slot], 0x5a, MLEN);
	return op;
}

static struct ftx_op
cntr_op(enum fi_op_type type, struct fid_cntr *target, uint64_t value)
{
	struct ftx_op op = {.type = type, .cntr = target, .value = value};

	return op;
}

/* queues or fails */
static void
dw(struct ftx_ctx *ctx, struct ftx_dw *d, struct ftx_op op,
   struct fid_cntr *trig, uint64_t thr, struct fid_cntr *comp)
{
	ftx_dw_post(ctx, d, &op, trig, thr, comp);
}

static void
trig(struct ftx_ctx *ctx, struct ftx_trig *t, struct ftx_op op,
     struct fid_cntr *c, uint64_t thr)
{
	FTX_POST(ctx, ftx_trig_post(t, &op, c, thr));
}

/* receives the messages rank 1 sent to rank 0 with the given ids through
 * fresh receives, proving no cancelled request took them */
static void
recv_leftovers(struct ftx_ctx *ctx, const uint64_t *ids, int n,
	       const char *what)
{
	static uint8_t b[MAX_REQS][MLEN];
	struct fi_context2 fc[MAX_REQS];
	void *want[MAX_REQS];
	int i;

	for (i = 0; i < n; i++) {
		memset(b[i], 0x5a, MLEN);
		want[i] = &fc[i];
		FTX_POST(ctx,
			 fi_trecv(ctx->ep, b[i], MLEN, NULL, FI_ADDR_UNSPEC,
				  TAG2 | ids[i], 0, &fc[i]));
	}
	ftx_expect_comps(ctx, FTX_RX, want, (size_t) n, 0, what);
	for (i = 0; i < n; i++)
		FTX_SOFT(ftx_check(b[i], MLEN, mseed(TAG2 | ids[i])) ==
				 SIZE_MAX,
			 "%s: message %#llx has bad data", what,
			 (unsigned long long) ids[i]);
}

static void
expect_untouched(int slot, const char *what)
{
	int i;

	for (i = 0; i < MLEN; i++)
		if (rbuf[slot][i] != 0x5a) {
			ftx_defer_fail("%s: data landed in the buffer of a "
				       "removed receive",
				       what);
			return;
		}
}

static void
expect_pending(struct ftx_ctx *ctx, uint64_t want, const char *what)
{
	struct fi_tnbc_engine_stats st;

	if (!ftx_tnbc_stats(ctx, &st))
		return;
	FTX_SOFT(st.trig_pending == want,
		 "%s: tnbc engine stats say %llu requests pending, expected "
		 "%llu",
		 what, (unsigned long long) st.trig_pending,
		 (unsigned long long) want);
}

/* ---------------------------------------------------------- cancel_work */

static int
run_cancel_work(struct ftx_ctx *ctx)
{
	static const uint64_t fired[4] = {0x10, 0x12, 0x13, 0x15};
	static const uint64_t to0[4] = {0x20, 0x21, 0x22, 0x23};
	static const uint64_t left[2] = {0x20, 0x22};
	struct ftx_dw s[6], rv[4], a[4], never;
	struct fid_cntr *c, *sc, *rc, *t;
	int i;

	if (ctx->rank == 1) {
		sink_begin(ctx);
		ftx_barrier(ctx);
		ftx_barrier(ctx);
		send_to_0(ctx, to0, 4);
		sink_end(ctx, fired, 4, "after FI_CANCEL_WORK");
		ftx_barrier(ctx);
		return 0;
	}
	c = ftx_cntr_new(ctx);
	sc = ftx_cntr_new(ctx);
	rc = ftx_cntr_new(ctx);
	t = ftx_cntr_new(ctx);
	ftx_barrier(ctx);
	for (i = 0; i < 6; i++)
		dw(ctx, &s[i], tsend_op(ctx, i, 0x10 + (uint64_t) i), c,
		   (uint64_t) i + 1, sc);
	for (i = 0; i < 4; i++)
		dw(ctx, &rv[i], trecv_op(ctx, i, 0x20 + (uint64_t) i), c,
		   10 + (uint64_t) i, rc);
	for (i = 0; i < 4; i++)
		dw(ctx, &a[i], cntr_op(FI_OP_CNTR_ADD, t, 1ull << i), c,
		   (uint64_t) i + 1, NULL);
	expect_pending(ctx, 14, "after queueing 14 requests");

	expect_ret(ftx_dw_cancel(ctx, &s[1]), 0, "FI_CANCEL_WORK(tsend 1)");
	expect_ret(ftx_dw_cancel(ctx, &s[4]), 0, "FI_CANCEL_WORK(tsend 4)");
	expect_ret(ftx_dw_cancel(ctx, &rv[0]), 0, "FI_CANCEL_WORK(trecv 0)");
	expect_ret(ftx_dw_cancel(ctx, &rv[2]), 0, "FI_CANCEL_WORK(trecv 2)");
	expect_ret(ftx_dw_cancel(ctx, &a[1]), 0, "FI_CANCEL_WORK(cntr add 1)");
	expect_ret(ftx_dw_cancel(ctx, &a[2]), 0, "FI_CANCEL_WORK(cntr add 2)");
	expect_ret(ftx_dw_cancel(ctx, &s[1]), -FI_ENOENT,
		   "second FI_CANCEL_WORK(tsend 1)");
	expect_ret(ftx_dw_cancel(ctx, &a[1]), -FI_ENOENT,
		   "second FI_CANCEL_WORK(cntr add 1)");
	{
		struct ftx_op op = tsend_op(ctx, 15, 0x1f);

		ftx_dw_init(&never, &op, c, 1, sc);
		expect_ret(ftx_dw_cancel(ctx, &never), -FI_ENOENT,
			   "FI_CANCEL_WORK of a request never queued");
	}
	expect_pending(ctx, 8, "after cancelling 6");
	{
		void *tx[2] = {&s[1].work.context, &s[4].work.context};
		void *rx[2] = {&rv[0].work.context, &rv[2].work.context};

		ftx_expect_comps(ctx, FTX_TX, tx, 2, FI_ECANCELED,
				 "cancelled deferred sends");
		ftx_expect_comps(ctx, FTX_RX, rx, 2, FI_ECANCELED,
				 "cancelled deferred receives");
	}
	ftx_expect_no_comp(ctx, 20, "after the cancel completions");
	ftx_cntr_expect(sc, 0, 2, "sends' completion_cntr after 2 cancels");
	ftx_cntr_expect(rc, 0, 2, "receives' completion_cntr after 2 cancels");
	ftx_cntr_expect(t, 0, 0, "counter op target before the trigger");
	ftx_cntr_expect(ctx->cntr[FTX_TX], 0, 0,
			"endpoint send counter (deferred work)");
	ftx_cntr_expect(ctx->cntr[FTX_RX], 0, 0,
			"endpoint receive counter (deferred work)");

	FTX_CHK(fi_cntr_add(c, 20));
	ftx_cntr_wait(ctx, sc, 4, "remaining sends' completion_cntr");
	ftx_barrier(ctx);
	ftx_cntr_wait(ctx, rc, 2, "remaining receives' completion_cntr");
	recv_leftovers(ctx, left, 2,
		       "messages for the cancelled deferred receives");
	FTX_SOFT(ftx_check(rbuf[1], MLEN, mseed(TAG2 | 0x21)) == SIZE_MAX &&
			 ftx_check(rbuf[3], MLEN, mseed(TAG2 | 0x23)) ==
				 SIZE_MAX,
		 "remaining deferred receives got wrong data");
	expect_untouched(0, "cancelled deferred receive 0");
	expect_untouched(2, "cancelled deferred receive 2");
	ftx_cntr_expect(t, 1 + 8, 0,
			"counter op target (ADD 1, 2, 4, 8 with 2 and 4 "
			"cancelled)");
	expect_ret(ftx_dw_cancel(ctx, &s[0]), -FI_ENOENT,
		   "FI_CANCEL_WORK of a fired tsend");
	expect_ret(ftx_dw_cancel(ctx, &a[0]), -FI_ENOENT,
		   "FI_CANCEL_WORK of a fired counter op");
	expect_ret(ftx_dw_cancel(ctx, &rv[1]), -FI_ENOENT,
		   "FI_CANCEL_WORK of a fired trecv");
	ftx_expect_no_comp(ctx, 20, "after the remaining requests fired");
	ftx_cntr_expect(sc, 4, 2, "sends' completion_cntr");
	ftx_cntr_expect(rc, 2, 2, "receives' completion_cntr");
	expect_pending(ctx, 0, "at the end");
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	return 0;
}

/* ------------------------------------------------------------ flush_all */

static int
run_flush_all(struct ftx_ctx *ctx)
{
	static const uint64_t to0[3] = {0x20, 0x21, 0x22};
	struct ftx_dw s[5], rv[2], a[3];
	struct ftx_trig ts, tr;
	struct fid_cntr *c1, *c2, *sc, *rc, *t;
	int i;

	if (ctx->rank == 1) {
		sink_begin(ctx);
		ftx_barrier(ctx);
		ftx_barrier(ctx);
		send_to_0(ctx, to0, 3);
		sink_end(ctx, NULL, 0, "after FI_FLUSH_WORK(NULL)");
		ftx_barrier(ctx);
		return 0;
	}
	c1 = ftx_cntr_new(ctx);
	c2 = ftx_cntr_new(ctx);
	sc = ftx_cntr_new(ctx);
	rc = ftx_cntr_new(ctx);
	t = ftx_cntr_new(ctx);
	ftx_barrier(ctx);
	for (i = 0; i < 3; i++)
		dw(ctx, &s[i], tsend_op(ctx, i, 0x10 + (uint64_t) i), c1,
		   (uint64_t) i + 1, sc);
	for (i = 0; i < 2; i++)
		dw(ctx, &rv[i], trecv_op(ctx, i, 0x20 + (uint64_t) i), c1,
		   5 + (uint64_t) i, rc);
	dw(ctx, &a[0], cntr_op(FI_OP_CNTR_ADD, t, 1), c1, 1, NULL);
	dw(ctx, &a[1], cntr_op(FI_OP_CNTR_ADD, t, 1), c1, 2, NULL);
	for (i = 3; i < 5; i++)
		dw(ctx, &s[i], tsend_op(ctx, i, 0x10 + (uint64_t) i), c2,
		   (uint64_t) i - 2, sc);
	trig(ctx, &ts, tsend_op(ctx, 5, 0x15), c2, 1);
	trig(ctx, &tr, trecv_op(ctx, 2, 0x22), c2, 2);
	dw(ctx, &a[2], cntr_op(FI_OP_CNTR_SET, t, 100), c2, 1, NULL);
	expect_pending(ctx, 12, "after queueing 12 requests");

	expect_ret(ftx_flush_work(ctx, NULL), 0, "FI_FLUSH_WORK(NULL)");
	{
		void *tx[6] = {&s[0].work.context, &s[1].work.context,
			       &s[2].work.context, &s[3].work.context,
			       &s[4].work.context, &ts.tc};
		void *rx[3] = {&rv[0].work.context, &rv[1].work.context,
			       &tr.tc};

		ftx_expect_comps(ctx, FTX_TX, tx, 6, FI_ECANCELED,
				 "flushed sends");
		ftx_expect_comps(ctx, FTX_RX, rx, 3, FI_ECANCELED,
				 "flushed receives");
	}
	ftx_expect_no_comp(ctx, 20, "after the flush completions");
	expect_pending(ctx, 0, "after the flush");
	ftx_cntr_expect(sc, 0, 5, "sends' completion_cntr after the flush");
	ftx_cntr_expect(rc, 0, 2, "receives' completion_cntr after the flush");
	ftx_cntr_expect(ctx->cntr[FTX_TX], 0, 1,
			"endpoint send counter (1 flushed FI_TRIGGER send)");
	ftx_cntr_expect(ctx->cntr[FTX_RX], 0, 1,
			"endpoint receive counter (1 flushed FI_TRIGGER "
			"receive)");
	expect_ret(ftx_flush_work(ctx, NULL), 0,
		   "FI_FLUSH_WORK(NULL) with nothing queued");
	expect_ret(ftx_dw_cancel(ctx, &s[0]), -FI_ENOENT,
		   "FI_CANCEL_WORK of a flushed request");
	FTX_CHK(fi_cntr_add(c1, 100));
	FTX_CHK(fi_cntr_add(c2, 100));
	ftx_barrier(ctx);
	ftx_expect_no_comp(ctx, 100, "after raising the flushed counters");
	recv_leftovers(ctx, to0, 3, "messages for the flushed receives");
	for (i = 0; i < 3; i++)
		expect_untouched(i, "flushed receive");
	ftx_cntr_expect(t, 0, 0, "target of flushed counter ops");
	ftx_cntr_expect(sc, 0, 5, "sends' completion_cntr at the end");
	ftx_cntr_expect(rc, 0, 2, "receives' completion_cntr at the end");
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	return 0;
}

/* ----------------------------------------------------------- flush_cntr */

static int
run_flush_cntr(struct ftx_ctx *ctx)
{
	/* c2's: s2 (thr 1), ts2 (thr 1, queued later), s3 (thr 2) */
	static const uint64_t fired[3] = {0x12, 0x15, 0x13};
	struct ftx_dw s[4], a1, a2;
	struct ftx_trig ts1, ts2;
	struct fid_cntr *c1, *c2, *sc, *t1, *t2;

	if (ctx->rank == 1) {
		sink_begin(ctx);
		ftx_barrier(ctx);
		ftx_barrier(ctx);
		sink_end(ctx, fired, 3, "after FI_FLUSH_WORK of one counter");
		ftx_barrier(ctx);
		return 0;
	}
	c1 = ftx_cntr_new(ctx);
	c2 = ftx_cntr_new(ctx);
	sc = ftx_cntr_new(ctx);
	t1 = ftx_cntr_new(ctx);
	t2 = ftx_cntr_new(ctx);
	ftx_barrier(ctx);
	dw(ctx, &s[0], tsend_op(ctx, 0, 0x10), c1, 1, sc);
	dw(ctx, &s[1], tsend_op(ctx, 1, 0x11), c1, 2, sc);
	dw(ctx, &a1, cntr_op(FI_OP_CNTR_ADD, t1, 1), c1, 1, NULL);
	trig(ctx, &ts1, tsend_op(ctx, 4, 0x14), c1, 1);
	dw(ctx, &s[2], tsend_op(ctx, 2, 0x12), c2, 1, sc);
	dw(ctx, &s[3], tsend_op(ctx, 3, 0x13), c2, 2, sc);
	dw(ctx, &a2, cntr_op(FI_OP_CNTR_ADD, t2, 1), c2, 1, NULL);
	trig(ctx, &ts2, tsend_op(ctx, 5, 0x15), c2, 1);

	expect_ret(ftx_flush_work(ctx, c1), 0,
		   "FI_FLUSH_WORK(triggering_cntr c1)");
	{
		void *tx[3] = {&s[0].work.context, &s[1].work.context, &ts1.tc};

		ftx_expect_comps(ctx, FTX_TX, tx, 3, FI_ECANCELED,
				 "sends flushed with c1");
	}
	ftx_expect_no_comp(ctx, 20, "after flushing c1's requests");
	expect_pending(ctx, 4, "after flushing c1's 4 requests of 8");
	ftx_cntr_expect(sc, 0, 2, "completion_cntr after flushing c1");
	FTX_CHK(fi_cntr_add(c1, 10));
	FTX_CHK(fi_cntr_add(c2, 10));
	ftx_cntr_wait(ctx, sc, 2, "c2's deferred sends");
	ftx_expect_comp(ctx, FTX_TX, &ts2.tc, 0, "c2's triggered send");
	ftx_cntr_expect(t2, 1, 0, "c2's counter op target");
	ftx_barrier(ctx);
	ftx_expect_no_comp(ctx, 50, "after raising both counters");
	ftx_cntr_expect(t1, 0, 0, "target of c1's flushed counter op");
	ftx_cntr_expect(sc, 2, 2, "completion_cntr at the end");
	ftx_cntr_expect(ctx->cntr[FTX_TX], 1, 1,
			"endpoint send counter (1 flushed, 1 fired FI_TRIGGER "
			"send)");
	expect_pending(ctx, 0, "at the end");
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	return 0;
}

/* ---------------------------------------------------------- cancel_trig */

static int
run_cancel_trig(struct ftx_ctx *ctx)
{
	static const uint64_t fired[2] = {0x10, 0x12};
	static const uint64_t to0[2] = {0x30, 0x31};
	static const uint64_t left[1] = {0x30};
	struct ftx_trig ts[3], tr[2];
	struct fid_cntr *c;
	ssize_t ret;
	int i;

	if (ctx->rank == 1) {
		sink_begin(ctx);
		ftx_barrier(ctx);
		ftx_barrier(ctx);
		send_to_0(ctx, to0, 2);
		sink_end(ctx, fired, 2, "after fi_cancel of triggered sends");
		ftx_barrier(ctx);
		return 0;
	}
	c = ftx_cntr_new(ctx);
	ftx_barrier(ctx);
	for (i = 0; i < 3; i++)
		trig(ctx, &ts[i], tsend_op(ctx, i, 0x10 + (uint64_t) i), c,
		     (uint64_t) i + 1);
	for (i = 0; i < 2; i++)
		trig(ctx, &tr[i], trecv_op(ctx, i, 0x30 + (uint64_t) i), c,
		     5 + (uint64_t) i);
	ret = fi_cancel(&ctx->ep->fid, &ts[1].tc);
	expect_ret((int) ret, 0, "fi_cancel(queued triggered tsend)");
	ret = fi_cancel(&ctx->ep->fid, &tr[0].tc);
	expect_ret((int) ret, 0, "fi_cancel(queued triggered trecv)");
	ftx_expect_comp(ctx, FTX_TX, &ts[1].tc, FI_ECANCELED,
			"cancelled triggered send");
	ftx_expect_comp(ctx, FTX_RX, &tr[0].tc, FI_ECANCELED,
			"cancelled triggered receive");
	ftx_expect_no_comp(ctx, 20, "after the cancel completions");
	ftx_cntr_expect(ctx->cntr[FTX_TX], 0, 1,
			"endpoint send counter after 1 cancel");
	ftx_cntr_expect(ctx->cntr[FTX_RX], 0, 1,
			"endpoint receive counter after 1 cancel");
	expect_pending(ctx, 3, "after cancelling 2 of 5");

	FTX_CHK(fi_cntr_add(c, 10));
	{
		void *tx[2] = {&ts[0].tc, &ts[2].tc};

		ftx_expect_comps(ctx, FTX_TX, tx, 2, 0,
				 "remaining triggered sends");
	}
	ftx_barrier(ctx);
	ftx_expect_comp(ctx, FTX_RX, &tr[1].tc, 0,
			"remaining triggered receive");
	FTX_SOFT(ftx_check(rbuf[1], MLEN, mseed(TAG2 | 0x31)) == SIZE_MAX,
		 "remaining triggered receive got wrong data");
	recv_leftovers(ctx, left, 1,
		       "message for the cancelled triggered receive");
	expect_untouched(0, "cancelled triggered receive");
	ret = fi_cancel(&ctx->ep->fid, &ts[0].tc);
	ftx_log("fi_cancel(fired and completed triggered send) = %zd", ret);
	ret = fi_cancel(&ctx->ep->fid, &ts[1].tc);
	ftx_log("second fi_cancel(cancelled triggered send) = %zd", ret);
	ftx_expect_no_comp(ctx, 20, "after cancelling what completed");
	ftx_cntr_expect(ctx->cntr[FTX_TX], 2, 1, "endpoint send counter");
	ftx_cntr_expect(ctx->cntr[FTX_RX], 2, 1,
			"endpoint receive counter (1 triggered, 1 plain "
			"receive)");
	expect_pending(ctx, 0, "at the end");
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	return 0;
}

/* ----------------------------------------------------------- bad input */

/*
 * Rank 0 makes the bad calls in bad(), which returns after raising every
 * counter involved; rank 1 checks that nothing arrives.
 */
static int
run_bad(struct ftx_ctx *ctx, void (*bad)(struct ftx_ctx *ctx), const char *what)
{
	if (ctx->rank == 1) {
		sink_begin(ctx);
		ftx_barrier(ctx);
		ftx_barrier(ctx);
		sink_end(ctx, NULL, 0, what);
		ftx_barrier(ctx);
		return 0;
	}
	ftx_barrier(ctx);
	bad(ctx);
	expect_pending(ctx, 0, what);
	ftx_barrier(ctx);
	ftx_expect_no_comp(ctx, 100, what);
	ftx_cntr_expect(ctx->cntr[FTX_TX], 0, 0, "endpoint send counter");
	ftx_cntr_expect(ctx->cntr[FTX_RX], 0, 0, "endpoint receive counter");
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	return 0;
}

static void
bad_null_trig(struct ftx_ctx *ctx)
{
	struct fid_cntr *sc = ftx_cntr_new(ctx), *t = ftx_cntr_new(ctx);
	struct ftx_op op;
	struct ftx_trig tt;
	struct ftx_dw d;

	op = tsend_op(ctx, 0, 0x10);
	ftx_dw_init(&d, &op, NULL, 0, sc);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(TSEND, triggering_cntr NULL)");
	op = trecv_op(ctx, 0, 0x20);
	ftx_dw_init(&d, &op, NULL, 0, sc);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(TRECV, triggering_cntr NULL)");
	op = cntr_op(FI_OP_CNTR_ADD, t, 1);
	ftx_dw_init(&d, &op, NULL, 0, NULL);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(CNTR_ADD, triggering_cntr NULL)");
	op = tsend_op(ctx, 1, 0x11);
	expect_einval(ftx_trig_post(&tt, &op, NULL, 0),
		      "fi_tsendmsg(FI_TRIGGER, threshold.cntr NULL)");
	ftx_drain_for(ctx, 20);
	ftx_cntr_expect(t, 0, 0, "target of the refused counter op");
	ftx_cntr_expect(sc, 0, 0, "completion_cntr of refused requests");
}

static int
run_bad_null_trig(struct ftx_ctx *ctx)
{
	return run_bad(ctx, bad_null_trig, "triggering_cntr NULL");
}

static void
bad_cntr_cc(struct ftx_ctx *ctx)
{
	struct fid_cntr *c = ftx_cntr_new(ctx), *cc = ftx_cntr_new(ctx);
	struct fid_cntr *t = ftx_cntr_new(ctx);
	struct ftx_op op;
	struct ftx_dw d;

	op = cntr_op(FI_OP_CNTR_ADD, t, 1);
	ftx_dw_init(&d, &op, c, 1, cc);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(CNTR_ADD with a completion_cntr)");
	op = cntr_op(FI_OP_CNTR_SET, t, 7);
	ftx_dw_init(&d, &op, c, 1, cc);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(CNTR_SET with a completion_cntr)");
	op = cntr_op(FI_OP_CNTR_ADD, t, 1);
	ftx_dw_init(&d, &op, c, 0, cc);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(CNTR_ADD with a completion_cntr, "
		      "threshold met)");
	FTX_CHK(fi_cntr_add(c, 10));
	ftx_drain_for(ctx, 20);
	ftx_cntr_expect(t, 0, 0, "target of the refused counter ops");
	ftx_cntr_expect(cc, 0, 0, "completion_cntr of refused counter ops");
}

static int
run_bad_cntr_cc(struct ftx_ctx *ctx)
{
	return run_bad(ctx, bad_cntr_cc, "completion_cntr on a counter op");
}

static void
bad_foreign(struct ftx_ctx *ctx)
{
	struct fid_cntr *c = ftx_cntr_new(ctx), *sc = ftx_cntr_new(ctx);
	struct fid_cntr *t = ftx_cntr_new(ctx), *c2;
	struct fi_cntr_attr cattr = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_cq_attr cqattr = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr avattr = {.type = ftx_opts.av_type, .count = 4};
	struct fid_domain *dom2;
	struct fid_av *av2;
	struct fid_cq *cq2;
	struct fid_ep *ep2;
	uint8_t name[FTX_NAME_MAX];
	size_t nlen = sizeof(name);
	fi_addr_t peer2 = FI_ADDR_NOTAVAIL;
	struct ftx_trig tt;
	struct ftx_op op;
	struct ftx_dw d;

	ftx_note("opening a second domain");
	FTX_CHK(fi_domain(ctx->fabric, ctx->info, &dom2, NULL));
	FTX_CHK(fi_cntr_open(dom2, &cattr, &c2, NULL));
	FTX_CHK(fi_av_open(dom2, &avattr, &av2, NULL));
	FTX_CHK(fi_cq_open(dom2, &cqattr, &cq2, NULL));
	FTX_CHK(fi_endpoint(dom2, ctx->info, &ep2, NULL));
	FTX_CHK(fi_ep_bind(ep2, &av2->fid, 0));
	FTX_CHK(fi_ep_bind(ep2, &cq2->fid, FI_TRANSMIT | FI_RECV));
	FTX_CHK(fi_enable(ep2));
	FTX_CHK(fi_av_lookup(ctx->av, ctx->addrs[1], name, &nlen));
	if (fi_av_insert(av2, name, 1, &peer2, 0, NULL) != 1)
		ftx_fail("fi_av_insert into the second domain's av failed");

	op = tsend_op(ctx, 0, 0x10);
	ftx_dw_init(&d, &op, c2, 1, sc);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(TSEND, triggering_cntr of another "
		      "domain)");
	op = tsend_op(ctx, 1, 0x11);
	ftx_dw_init(&d, &op, c, 1, c2);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(TSEND, completion_cntr of another "
		      "domain)");
	op = cntr_op(FI_OP_CNTR_ADD, c2, 1);
	ftx_dw_init(&d, &op, c, 1, NULL);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(CNTR_ADD of a counter of another "
		      "domain)");
	op = cntr_op(FI_OP_CNTR_ADD, t, 1);
	ftx_dw_init(&d, &op, c2, 1, NULL);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(CNTR_ADD, triggering_cntr of another "
		      "domain)");
	op = tsend_op(ctx, 2, 0x12);
	op.ep = ep2;
	op.addr = peer2;
	ftx_dw_init(&d, &op, c, 1, sc);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(TSEND on an endpoint of another domain)");
	op = tsend_op(ctx, 3, 0x13);
	expect_einval(ftx_trig_post(&tt, &op, c2, 1),
		      "fi_tsendmsg(FI_TRIGGER, counter of another domain)");
	FTX_CHK(fi_cntr_add(c, 10));
	FTX_CHK(fi_cntr_add(c2, 10));
	ftx_drain_for(ctx, 20);
	ftx_cntr_expect(t, 0, 0, "target of the refused counter op");
	ftx_cntr_expect(c2, 10, 0, "other domain's counter");
	ftx_cntr_expect(sc, 0, 0, "completion_cntr of refused requests");
	{
		struct fi_cq_tagged_entry e;

		FTX_SOFT(fi_cq_read(cq2, &e, 1) == -FI_EAGAIN,
			 "the second domain's endpoint has a completion");
	}
	ftx_note("closing the second domain");
	FTX_CHK(fi_close(&ep2->fid));
	FTX_CHK(fi_close(&cq2->fid));
	FTX_CHK(fi_close(&av2->fid));
	FTX_CHK(fi_close(&c2->fid));
	FTX_CHK(fi_close(&dom2->fid));
}

static int
run_bad_foreign(struct ftx_ctx *ctx)
{
	return run_bad(ctx, bad_foreign, "objects of another domain");
}

static void
bad_inject(struct ftx_ctx *ctx)
{
	struct fid_cntr *c = ftx_cntr_new(ctx), *sc = ftx_cntr_new(ctx);
	struct ftx_trig tt;
	struct ftx_op op;
	struct ftx_dw d;

	op = tsend_op(ctx, 0, 0x10);
	op.flags = FI_INJECT;
	ftx_dw_init(&d, &op, c, 1, sc);
	expect_einval(ftx_dw_queue(ctx, &d), "FI_QUEUE_WORK(TSEND, FI_INJECT)");
	op = tsend_op(ctx, 1, 0x11);
	op.type = FI_OP_SEND;
	op.flags = FI_INJECT;
	ftx_dw_init(&d, &op, c, 0, sc);
	expect_einval(ftx_dw_queue(ctx, &d),
		      "FI_QUEUE_WORK(SEND, FI_INJECT, threshold met)");
	op = tsend_op(ctx, 2, 0x12);
	op.flags = FI_INJECT;
	expect_einval(ftx_trig_post(&tt, &op, c, 1),
		      "fi_tsendmsg(FI_TRIGGER | FI_INJECT)");
	FTX_CHK(fi_cntr_add(c, 10));
	ftx_drain_for(ctx, 20);
	ftx_cntr_expect(sc, 0, 0, "completion_cntr of refused requests");
}

static int
run_bad_inject(struct ftx_ctx *ctx)
{
	return run_bad(ctx, bad_inject, "FI_INJECT");
}

static void
bad_trig_ctx(struct ftx_ctx *ctx)
{
	struct fid_cntr *c = ftx_cntr_new(ctx);
	struct fi_triggered_context2 tc;
	struct iovec iov = {sbuf[0], MLEN};
	struct fi_msg_tagged m = {
		.msg_iov = &iov,
		.iov_count = 1,
		.addr = ctx->addrs[1],
		.tag = TAG | 0x10,
	};

	ftx_fill(sbuf[0], MLEN, mseed(TAG | 0x10));
	m.context = NULL;
	expect_einval(fi_tsendmsg(ctx->ep, &m, FI_TRIGGER),
		      "fi_tsendmsg(FI_TRIGGER, context NULL)");
	m.addr = FI_ADDR_UNSPEC;
	iov.iov_base = rbuf[0];
	expect_einval(fi_trecvmsg(ctx->ep, &m, FI_TRIGGER),
		      "fi_trecvmsg(FI_TRIGGER, context NULL)");
	iov.iov_base = sbuf[0];
	m.addr = ctx->addrs[1];
	memset(&tc, 0, sizeof(tc));
	tc.event_type = FI_TRIGGER_XPU;
	tc.trigger.threshold.cntr = c;
	tc.trigger.threshold.threshold = 1;
	m.context = &tc;
	expect_einval(fi_tsendmsg(ctx->ep, &m, FI_TRIGGER),
		      "fi_tsendmsg(FI_TRIGGER, event_type FI_TRIGGER_XPU)");
	tc.event_type = (enum fi_trigger_event) 77;
	expect_einval(fi_tsendmsg(ctx->ep, &m, FI_TRIGGER),
		      "fi_tsendmsg(FI_TRIGGER, event_type 77)");
	FTX_CHK(fi_cntr_add(c, 10));
	ftx_drain_for(ctx, 20);
}

static int
run_bad_trig_ctx(struct ftx_ctx *ctx)
{
	return run_bad(ctx, bad_trig_ctx, "bad triggered context");
}

/* ----------------------------------------------------------- close_busy */

/* a close that succeeds here leaves a dangling request: stop at once */
static void
expect_busy(struct fid *fid, const char *what)
{
	int ret;

	ftx_note("fi_close(%s)", what);
	ret = fi_close(fid);
	if (ret == -FI_EBUSY)
		return;
	ftx_fail("fi_close(%s) returned %d (%s), expected -FI_EBUSY", what, ret,
		 ret ? fi_strerror(-ret) : "closed");
}

static int
run_close_busy(struct ftx_ctx *ctx)
{
	struct fid_cntr *ct, *cc, *cg, *c2, *c3;
	struct ftx_dw d1, d2, d3;
	struct ftx_trig ts;

	if (ctx->rank == 1) {
		sink_begin(ctx);
		ftx_barrier(ctx);
		ftx_barrier(ctx);
		sink_end(ctx, NULL, 0, "closes refused, then flush/cancel");
		ftx_barrier(ctx);
		return 0;
	}
	ct = ftx_cntr_new(ctx);
	cc = ftx_cntr_new(ctx);
	cg = ftx_cntr_new(ctx);
	c2 = ftx_cntr_new(ctx);
	c3 = ftx_cntr_new(ctx);
	ftx_barrier(ctx);
	dw(ctx, &d1, tsend_op(ctx, 0, 0x10), ct, 1, cc);
	dw(ctx, &d2, cntr_op(FI_OP_CNTR_ADD, cg, 1), ct, 1, NULL);
	expect_busy(&ct->fid, "triggering counter with queued work");
	expect_busy(&cc->fid, "completion counter of queued work");
	expect_busy(&cg->fid, "target counter of a queued counter op");
	expect_busy(&ctx->ep->fid, "endpoint with queued deferred work");
	expect_busy(&ctx->domain->fid, "domain with queued work");
	expect_ret(ftx_flush_work(ctx, NULL), 0, "FI_FLUSH_WORK(NULL)");
	ftx_expect_comp(ctx, FTX_TX, &d1.work.context, FI_ECANCELED,
			"flushed send");
	ftx_cntr_expect(cc, 0, 1, "completion counter after the flush");
	expect_ret(ftx_cntr_close(ct), 0,
		   "fi_close(triggering counter) after the flush");
	expect_ret(ftx_cntr_close(cc), 0,
		   "fi_close(completion counter) after the flush");
	expect_ret(ftx_cntr_close(cg), 0,
		   "fi_close(target counter) after the flush");

	/* completion_cntr NULL is allowed */
	dw(ctx, &d3, tsend_op(ctx, 1, 0x11), c2, 1, NULL);
	trig(ctx, &ts, tsend_op(ctx, 2, 0x12), c3, 1);
	expect_busy(&c3->fid, "counter of a queued FI_TRIGGER send");
	expect_busy(&ctx->ep->fid, "endpoint with queued work");
	expect_ret(ftx_dw_cancel(ctx, &d3), 0, "FI_CANCEL_WORK");
	ftx_expect_comp(ctx, FTX_TX, &d3.work.context, FI_ECANCELED,
			"cancelled send without a completion_cntr");
	expect_busy(&ctx->ep->fid, "endpoint with a queued FI_TRIGGER send");
	expect_ret((int) fi_cancel(&ctx->ep->fid, &ts.tc), 0,
		   "fi_cancel(triggered send)");
	ftx_expect_comp(ctx, FTX_TX, &ts.tc, FI_ECANCELED,
			"cancelled triggered send");
	expect_ret(ftx_cntr_close(c3), 0,
		   "fi_close(counter) after fi_cancel of its send");
	ftx_note("fi_close(ep) after the cancels");
	expect_ret(fi_close(&ctx->ep->fid), 0,
		   "fi_close(ep) after the cancels");
	ctx->ep = NULL;
	expect_ret(ftx_cntr_close(c2), 0, "fi_close(counter) after the cancel");
	ftx_barrier(ctx);
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	return 0;
}

/* ----------------------------------------------------- close_after_fire */

#define NCLOSE 200

/* fi_cntr_wait with a bound, leaving the firing to the provider */
static void
wait_blocking(struct ftx_ctx *ctx, struct fid_cntr *c, uint64_t v,
	      const char *what)
{
	int ret;

	while (fi_cntr_read(c) < v) {
		ret = fi_cntr_wait(c, v, 100);
		/* sockets answers a timeout with +FI_ETIMEDOUT */
		if (ret && ret != -FI_ETIMEDOUT && ret != FI_ETIMEDOUT &&
		    ret != -FI_EAGAIN)
			ftx_fail("%s: fi_cntr_wait: %s (%d)", what,
				 fi_strerror(-ret), ret);
		if (ftx_expired(ctx))
			ftx_fail("timeout: %s reads %llu, expected %llu", what,
				 (unsigned long long) fi_cntr_read(c),
				 (unsigned long long) v);
	}
}

/*
 * Once everything queued on a counter has fired and completed, it closes:
 * the provider's engine fires a reply chain (receive -> counter op and
 * send), the application wakes from fi_cntr_wait on the send's completion
 * and closes every counter at once, NCLOSE times.
 */
static int
run_close_after_fire(struct ftx_ctx *ctx)
{
	struct ftx_dw dr, dc, ds;
	struct fi_context2 fc;
	static const char *const names[4] = {
		"send's completion_cntr",
		"receive's completion_cntr "
		"(triggering the send and counter op)",
		"counter op's target", "receive's triggering counter"};
	int it, ret, nbusy = 0, first = -1, busy[4] = {0};
	char what[64];

	if (ctx->rank == 1) {
		uint8_t b[MLEN], r[MLEN];
		struct ftx_comp c;

		ftx_fill(b, MLEN, mseed(TAG2 | 0x40));
		for (it = 0; it < NCLOSE; it++) {
			FTX_POST(ctx,
				 fi_trecv(ctx->ep, r, MLEN, NULL,
					  FI_ADDR_UNSPEC, TAG | 0x40, 0, &fc));
			ftx_barrier(ctx);
			FTX_POST(ctx,
				 fi_tsend(ctx->ep, b, MLEN, NULL, ctx->addrs[0],
					  TAG2 | 0x40, &fc));
			ftx_wait_ok(ctx, FTX_TX, &c);
			ftx_wait_ok(ctx, FTX_RX, &c);
			ftx_barrier(ctx);
		}
		return 0;
	}
	for (it = 0; it < NCLOSE; it++) {
		struct fid_cntr *c = ftx_cntr_new(ctx), *r = ftx_cntr_new(ctx);
		struct fid_cntr *t = ftx_cntr_new(ctx), *d = ftx_cntr_new(ctx);
		struct fid_cntr *all[4] = {d, r, t, c};
		int k;

		dw(ctx, &dr, trecv_op(ctx, 0, 0x40), c, 0, r);
		dw(ctx, &dc, cntr_op(FI_OP_CNTR_ADD, t, 1), r, 1, NULL);
		dw(ctx, &ds, tsend_op(ctx, 0, 0x40), r, 1, d);
		ftx_barrier(ctx);
		wait_blocking(ctx, d, 1, "reply's completion_cntr");
		wait_blocking(ctx, t, 1, "counter op's target");
		for (k = 0; k < 4; k++) {
			ret = ftx_cntr_close(all[k]);
			if (ret == -FI_EBUSY) {
				busy[k]++;
				if (!nbusy++)
					first = it;
				/* it must close once the provider is done */
				ftx_sleep_ms(10);
				ret = ftx_cntr_close(all[k]);
			}
			snprintf(what, sizeof(what),
				 "fi_close(counter %d) 10 ms after a refusal",
				 k);
			FTX_EXPECT(ret == 0, "%s: %s (%d)", what,
				   fi_strerror(-ret), ret);
		}
		ftx_barrier(ctx);
	}
	for (it = 0; it < 4; it++)
		if (busy[it])
			fprintf(stderr, "# rank 0: %d times -FI_EBUSY: %s\n",
				busy[it], names[it]);
	FTX_SOFT(!nbusy,
		 "%d of %d times fi_close of a counter was -FI_EBUSY although "
		 "every request queued on it had fired and completed (first "
		 "in round %d); it closed 10 ms later",
		 nbusy, NCLOSE, first);
	ftx_expect_no_comp(ctx, 10, "deferred work without FI_COMPLETION");
	ftx_trig_cleanup(ctx);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "cancel_work",
	 .run = run_cancel_work,
	 .pre_enable = bind_cntrs},
	{.name = "flush_all", .run = run_flush_all, .pre_enable = bind_cntrs},
	{.name = "flush_cntr", .run = run_flush_cntr, .pre_enable = bind_cntrs},
	{.name = "cancel_trig",
	 .run = run_cancel_trig,
	 .pre_enable = bind_cntrs},
	{.name = "bad_null_trig",
	 .run = run_bad_null_trig,
	 .pre_enable = bind_cntrs},
	{.name = "bad_cntr_cc",
	 .run = run_bad_cntr_cc,
	 .pre_enable = bind_cntrs},
	{.name = "bad_foreign",
	 .run = run_bad_foreign,
	 .pre_enable = bind_cntrs},
	{.name = "bad_inject", .run = run_bad_inject, .pre_enable = bind_cntrs},
	{.name = "bad_trig_ctx",
	 .run = run_bad_trig_ctx,
	 .pre_enable = bind_cntrs},
	{.name = "close_busy", .run = run_close_busy, .pre_enable = bind_cntrs},
	{.name = "close_after_fire",
	 .run = run_close_after_fire,
	 .pre_enable = bind_cntrs},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_trigger_cancel",
	.desc = "cancel and flush of triggered operations and deferred work",
	.caps = FI_MSG | FI_TAGGED | FI_TRIGGER,
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
