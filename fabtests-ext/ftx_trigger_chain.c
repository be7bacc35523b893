/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Chains of triggered operations (fi_trigger(3)), both kinds: operations
 * posted with FI_TRIGGER and deferred work queued with FI_QUEUE_WORK.
 *
 *  ring_trig, ring_dw  data goes around a ring of all ranks several times;
 *                      each rank's forward send is triggered by its own
 *                      receive completions (through a counter op hop in
 *                      the deferred variant), one fi_cntr_add starts it
 *  cntr_chain          FI_OP_CNTR_SET / FI_OP_CNTR_ADD chains and order
 *  order_trig, order_dw, order_mixed
 *                      sends fire in threshold order when the counter
 *                      jumps past several thresholds, in submission order
 *                      for equal thresholds
 *  rma_trig, rma_dw    triggered RMA write then read (FI_RMA)
 *  atomic_trig, atomic_dw
 *                      triggered FI_SUM, fetching FI_SUM and FI_CSWAP
 *                      on a uint64_t (FI_ATOMIC)
 *
 * Deferred work writes no CQ entry and bumps no endpoint counter unless
 * FI_COMPLETION asks for an entry; its completion_cntr counts it.
 */
#include "common/ftx_trig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES  8
#define MAX_ROUNDS 64
#define TAG	   0x7c40000000000000ull
#define RMA_LEN	   65536
#define NORDER	   16

static size_t sizes[MAX_SIZES] = {8, 4096, 65536 + 3};
static int nsizes = 3;
static int rounds = 6;

static int
opt(int c, const char *arg)
{
	switch (c) {
	case 's':
		nsizes = ftx_parse_sizes(arg, sizes, MAX_SIZES);
		return nsizes > 0 ? 0 : -1;
	case 'r':
		rounds = atoi(arg);
		return rounds > 0 && rounds <= MAX_ROUNDS ? 0 : -1;
	}
	return -1;
}

static void
open_ep_cntr(struct ftx_ctx *ctx, enum ftx_which w, uint64_t flags)
{
	struct fi_cntr_attr attr = {
		.events = FI_CNTR_EVENTS_COMP,
		.wait_obj = FI_WAIT_UNSPEC,
	};

	FTX_CHK(fi_cntr_open(ctx->domain, &attr, &ctx->cntr[w], NULL));
	FTX_CHK(fi_ep_bind(ctx->ep, &ctx->cntr[w]->fid, flags));
}

/* cntr[TX] counts sends, cntr[RX] receives */
static void
bind_msg_cntrs(struct ftx_ctx *ctx)
{
	open_ep_cntr(ctx, FTX_TX, FI_SEND);
	open_ep_cntr(ctx, FTX_RX, FI_RECV);
}

/* cntr[TX] counts writes and atomics, cntr[RX] reads and fetches */
static void
bind_rma_cntrs(struct ftx_ctx *ctx)
{
	open_ep_cntr(ctx, FTX_TX, FI_WRITE);
	open_ep_cntr(ctx, FTX_RX, FI_READ);
}

static void
check_buf(const void *buf, size_t len, uint64_t seed, const char *what)
{
	size_t off = ftx_check(buf, len, seed);

	FTX_SOFT(off == SIZE_MAX, "%s: data mismatch at byte %zu of %zu", what,
		 off, len);
}

/* ------------------------------------------------------------- ring */

static size_t
round_len(int k)
{
	return sizes[k % nsizes];
}

static uint64_t
round_seed(int k)
{
	return ftx_seed(0x21, (uint64_t) k, 3);
}

static int
run_ring_trig(struct ftx_ctx *ctx)
{
	int n = ctx->nprocs, me = ctx->rank, R = rounds, k;
	struct fid_cntr *rx = ctx->cntr[FTX_RX], *tx = ctx->cntr[FTX_TX];
	struct fid_cntr *start = ftx_cntr_new(ctx);
	struct ftx_trig *rt = calloc((size_t) R, sizeof(*rt));
	struct ftx_trig *st = calloc((size_t) R, sizeof(*st));
	void *rb[MAX_ROUNDS], *sb[MAX_ROUNDS] = {NULL};
	void *rctx[MAX_ROUNDS], *sctx[MAX_ROUNDS];
	char what[96];
	uint64_t t0 = 0;

	if (!rt || !st)
		ftx_fail("out of memory");
	/* receive k is posted once k receives have completed */
	for (k = 0; k < R; k++) {
		struct ftx_op op = {
			.type = (k & 1) ? FI_OP_RECV : FI_OP_TRECV,
			.ep = ctx->ep,
			.len = round_len(k),
			.addr = FI_ADDR_UNSPEC,
			.tag = TAG | (uint64_t) k,
		};

		rb[k] = op.buf = ftx_alloc(op.len);
		rctx[k] = &rt[k].tc;
		FTX_POST(ctx, ftx_trig_post(&rt[k], &op, rx, (uint64_t) k));
	}
	ftx_barrier(ctx);
	/*
	 * Rank 0 starts round 0 on its start counter and round k once round
	 * k-1 came back; the others forward round k from its receive buffer
	 * once they received it.
	 */
	for (k = 0; k < R; k++) {
		struct ftx_op op = {
			.type = (k & 1) ? FI_OP_SEND : FI_OP_TSEND,
			.ep = ctx->ep,
			.len = round_len(k),
			.addr = ctx->addrs[(me + 1) % n],
			.tag = TAG | (uint64_t) k,
		};
		struct fid_cntr *c = rx;
		uint64_t thr = (uint64_t) k + 1;

		if (me == 0) {
			sb[k] = op.buf = ftx_alloc(op.len);
			ftx_fill(op.buf, op.len, round_seed(k));
			if (k == 0)
				c = start;
			else
				thr = (uint64_t) k;
		} else {
			op.buf = rb[k];
		}
		sctx[k] = &st[k].tc;
		FTX_POST(ctx, ftx_trig_post(&st[k], &op, c, thr));
	}
	ftx_barrier(ctx);
	if (me == 0) {
		t0 = ftx_now_ns();
		FTX_CHK(fi_cntr_add(start, 1));
	}
	ftx_cntr_wait(ctx, rx, (uint64_t) R, "receive counter");
	ftx_cntr_wait(ctx, tx, (uint64_t) R, "send counter");
	if (me == 0)
		ftx_log("%d rounds around %d ranks in %.1f us", R, n,
			(double) (ftx_now_ns() - t0) / 1e3);
	for (k = 0; k < R; k++) {
		snprintf(what, sizeof(what), "round %d (%zu bytes) received", k,
			 round_len(k));
		check_buf(rb[k], round_len(k), round_seed(k), what);
	}
	ftx_expect_comps(ctx, FTX_RX, rctx, (size_t) R, 0,
			 "triggered receives");
	ftx_expect_comps(ctx, FTX_TX, sctx, (size_t) R, 0, "triggered sends");
	ftx_expect_no_comp(ctx, 20, "after the ring");
	ftx_cntr_expect(rx, (uint64_t) R, 0, "endpoint receive counter");
	ftx_cntr_expect(tx, (uint64_t) R, 0, "endpoint send counter");
	ftx_barrier(ctx);
	for (k = 0; k < R; k++) {
		ftx_free(rb[k]);
		ftx_free(sb[k]);
	}
	free(rt);
	free(st);
	ftx_trig_cleanup(ctx);
	return 0;
}

static int
run_ring_dw(struct ftx_ctx *ctx)
{
	int n = ctx->nprocs, me = ctx->rank, R = rounds, k;
	struct fid_cntr *rc = ftx_cntr_new(ctx), *sc = ftx_cntr_new(ctx);
	struct fid_cntr *hop = ftx_cntr_new(ctx), *start = ftx_cntr_new(ctx);
	struct ftx_dw *rd = calloc((size_t) R, sizeof(*rd));
	struct ftx_dw *sd = calloc((size_t) R, sizeof(*sd));
	struct ftx_dw *hd = calloc((size_t) R, sizeof(*hd));
	void *rb[MAX_ROUNDS], *sb[MAX_ROUNDS] = {NULL};
	uint64_t want_hop = 0;
	char what[96];

	if (!rd || !sd || !hd)
		ftx_fail("out of memory");
	/*
	 * Receive k is posted once k receives completed; the last one asks
	 * for a CQ entry.  The first has threshold 0 and fires at once.
	 */
	for (k = 0; k < R; k++) {
		struct ftx_op op = {
			.type = (k & 1) ? FI_OP_RECV : FI_OP_TRECV,
			.ep = ctx->ep,
			.len = round_len(k),
			.addr = FI_ADDR_UNSPEC,
			.tag = TAG | (uint64_t) k,
			.flags = k == R - 1 ? FI_COMPLETION : 0,
		};

		rb[k] = op.buf = ftx_alloc(op.len);
		ftx_dw_post(ctx, &rd[k], &op, rc, (uint64_t) k, rc);
	}
	ftx_barrier(ctx);
	/*
	 * Round k leaves once the gate, rc >= gate(k), opened: a counter op
	 * on rc (alternately ADD 2 and SET 2 * gate) moves hop to 2 * gate,
	 * and the send waits for that.
	 */
	for (k = 0; k < R; k++) {
		struct ftx_op op = {
			.type = (k & 1) ? FI_OP_SEND : FI_OP_TSEND,
			.ep = ctx->ep,
			.len = round_len(k),
			.addr = ctx->addrs[(me + 1) % n],
			.tag = TAG | (uint64_t) k,
			.flags = k == R - 1 ? FI_COMPLETION : 0,
		};
		uint64_t gate = me == 0 ? (uint64_t) k : (uint64_t) k + 1;

		if (me == 0) {
			sb[k] = op.buf = ftx_alloc(op.len);
			ftx_fill(op.buf, op.len, round_seed(k));
		} else {
			op.buf = rb[k];
		}
		if (me == 0 && k == 0) {
			ftx_dw_post(ctx, &sd[k], &op, start, 1, sc);
			continue;
		}
		{
			struct ftx_op cop = {
				.type = (k & 1) ? FI_OP_CNTR_SET :
						  FI_OP_CNTR_ADD,
				.cntr = hop,
				.value = (k & 1) ? 2 * gate : 2,
			};

			ftx_dw_post(ctx, &hd[k], &cop, rc, gate, NULL);
		}
		want_hop = 2 * gate;
		ftx_dw_post(ctx, &sd[k], &op, hop, 2 * gate, sc);
	}
	ftx_barrier(ctx);
	if (me == 0)
		FTX_CHK(fi_cntr_add(start, 1));
	ftx_cntr_wait(ctx, rc, (uint64_t) R, "receive completion counter");
	ftx_cntr_wait(ctx, sc, (uint64_t) R, "send completion counter");
	for (k = 0; k < R; k++) {
		snprintf(what, sizeof(what), "round %d (%zu bytes) received", k,
			 round_len(k));
		check_buf(rb[k], round_len(k), round_seed(k), what);
	}
	/* exactly the two FI_COMPLETION requests write an entry */
	ftx_expect_comp(ctx, FTX_RX, &rd[R - 1].work.context, 0,
			"deferred receive with FI_COMPLETION");
	ftx_expect_comp(ctx, FTX_TX, &sd[R - 1].work.context, 0,
			"deferred send with FI_COMPLETION");
	ftx_expect_no_comp(ctx, 30, "deferred work without FI_COMPLETION");
	ftx_cntr_expect(rc, (uint64_t) R, 0, "receive completion_cntr");
	ftx_cntr_expect(sc, (uint64_t) R, 0, "send completion_cntr");
	ftx_cntr_expect(hop, want_hop, 0, "counter moved by CNTR_ADD/SET");
	ftx_cntr_expect(ctx->cntr[FTX_TX], 0, 0,
			"endpoint send counter (deferred work must not bump "
			"it)");
	ftx_cntr_expect(ctx->cntr[FTX_RX], 0, 0,
			"endpoint receive counter (deferred work must not "
			"bump it)");
	ftx_barrier(ctx);
	for (k = 0; k < R; k++) {
		ftx_free(rb[k]);
		ftx_free(sb[k]);
	}
	free(rd);
	free(sd);
	free(hd);
	ftx_trig_cleanup(ctx);
	return 0;
}

/* -------------------------------------------------------- counter ops */

static void
cop(struct ftx_ctx *ctx, struct ftx_dw *d, enum fi_op_type type,
    struct fid_cntr *target, uint64_t value, struct fid_cntr *trig,
    uint64_t thr)
{
	struct ftx_op op = {.type = type, .cntr = target, .value = value};

	ftx_dw_post(ctx, d, &op, trig, thr, NULL);
}

/* polls c for up to ms milliseconds; true once it reads want */
static bool
poll_val(struct fid_cntr *c, uint64_t want, unsigned ms)
{
	uint64_t end = ftx_now_ns() + (uint64_t) ms * 1000000ull;
	unsigned spins = 0;

	do {
		if (fi_cntr_read(c) == want)
			return true;
		ftx_relax(&spins);
	} while (ftx_now_ns() < end);
	return fi_cntr_read(c) == want;
}

static void
expect_val(struct fid_cntr *c, uint64_t want, unsigned ms, const char *what)
{
	uint64_t v;

	if (poll_val(c, want, ms))
		return;
	v = fi_cntr_read(c);
	ftx_defer_fail("%s: counter reads %llu, expected %llu", what,
		       (unsigned long long) v, (unsigned long long) want);
}

/* nothing may happen to c: it keeps reading want for ms milliseconds */
static void
expect_stays(struct fid_cntr *c, uint64_t want, unsigned ms, const char *what)
{
	uint64_t end = ftx_now_ns() + (uint64_t) ms * 1000000ull, v;
	unsigned spins = 0;

	do {
		v = fi_cntr_read(c);
		if (v != want) {
			ftx_defer_fail("%s: counter reads %llu, expected it "
				       "to stay %llu",
				       what, (unsigned long long) v,
				       (unsigned long long) want);
			return;
		}
		ftx_relax(&spins);
	} while (ftx_now_ns() < end);
}

static int
run_cntr_chain(struct ftx_ctx *ctx)
{
	struct fid_cntr *c[5], *j, *t[8], *done, *k, *m;
	struct ftx_dw d[32];
	int i, nd = 0;

	for (i = 0; i < 5; i++)
		c[i] = ftx_cntr_new(ctx);
	for (i = 0; i < 8; i++)
		t[i] = ftx_cntr_new(ctx);
	j = ftx_cntr_new(ctx);
	done = ftx_cntr_new(ctx);
	k = ftx_cntr_new(ctx);
	m = ftx_cntr_new(ctx);

	/* A: c0 -> SET c1=5 -> ADD c2+=7 -> SET c3=10 -> ADD c4+=1,
	 * queued last link first */
	ftx_note("chain of counter ops");
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, c[4], 1, c[3], 10);
	cop(ctx, &d[nd++], FI_OP_CNTR_SET, c[3], 10, c[2], 7);
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, c[2], 7, c[1], 5);
	cop(ctx, &d[nd++], FI_OP_CNTR_SET, c[1], 5, c[0], 1);
	expect_stays(c[4], 0, 20, "end of the chain before the start");
	ftx_cntr_expect(c[1], 0, 0, "c1 before the start");
	FTX_CHK(fi_cntr_add(c[0], 1));
	ftx_cntr_wait(ctx, c[4], 1, "end of the counter chain");
	ftx_cntr_expect(c[0], 1, 0, "chain c0");
	ftx_cntr_expect(c[1], 5, 0, "chain c1 (SET 5)");
	ftx_cntr_expect(c[2], 7, 0, "chain c2 (ADD 7)");
	ftx_cntr_expect(c[3], 10, 0, "chain c3 (SET 10)");
	ftx_cntr_expect(c[4], 1, 0, "chain c4 (ADD 1)");

	/*
	 * B: one jump of j from 0 to 10 passes thresholds 2..10.  The
	 * results tell the order: t0 = 51 only if SET 50 (thr 3) ran before
	 * ADD 1 (thr 7, queued first); t1 = 9 only if SET 7 ran before ADD 2
	 * (both thr 4, in that submission order); t2 = 1 only if SET 2 (thr
	 * 2) ran before SET 1 (thr 9).  done (thr 10) fires last.
	 */
	ftx_note("threshold order on a jump");
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, done, 1, j, 10);
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, t[0], 1, j, 7);
	cop(ctx, &d[nd++], FI_OP_CNTR_SET, t[0], 50, j, 3);
	cop(ctx, &d[nd++], FI_OP_CNTR_SET, t[1], 7, j, 4);
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, t[1], 2, j, 4);
	cop(ctx, &d[nd++], FI_OP_CNTR_SET, t[2], 1, j, 9);
	cop(ctx, &d[nd++], FI_OP_CNTR_SET, t[2], 2, j, 2);
	cop(ctx, &d[nd++], FI_OP_CNTR_SET, t[3], 5, j, 11);
	FTX_CHK(fi_cntr_add(j, 10));
	ftx_cntr_wait(ctx, done, 1, "last request of the jump");
	expect_val(t[0], 51, 100,
		   "thr-3 SET 50 then thr-7 ADD 1 (threshold order)");
	expect_val(t[1], 9, 100,
		   "thr-4 SET 7 then thr-4 ADD 2 (submission order)");
	expect_val(t[2], 1, 100,
		   "thr-2 SET 2 then thr-9 SET 1 (threshold order)");
	expect_stays(t[3], 0, 20, "threshold 11 with the counter at 10");
	FTX_CHK(fi_cntr_add(j, 1));
	expect_val(t[3], 5, 1000, "threshold 11 reached");

	/* C: thresholds already met (below and at the value) fire at once */
	ftx_note("thresholds already met");
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, t[4], 4, j, 3);
	if (!poll_val(t[4], 4, 0))
		ftx_log("an already met threshold fired after fi_control "
			"returned");
	expect_val(t[4], 4, 1000, "threshold 3 with the counter at 11");
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, t[4], 1, j, 11);
	expect_val(t[4], 5, 1000, "threshold 11 with the counter at 11");
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, t[4], 100, j, 12);
	expect_stays(t[4], 5, 20, "threshold 12 with the counter at 11");
	FTX_CHK(fi_cntr_add(j, 1));
	expect_val(t[4], 105, 1000, "threshold 12 reached");

	/* D: the error count counts toward the threshold */
	ftx_note("errors count toward thresholds");
	cop(ctx, &d[nd++], FI_OP_CNTR_SET, t[5], 1, k, 3);
	FTX_CHK(fi_cntr_add(k, 2));
	expect_stays(t[5], 0, 20, "threshold 3 with 2 successes");
	FTX_CHK(fi_cntr_adderr(k, 1));
	expect_val(t[5], 1, 1000, "threshold 3 with 2 successes and 1 error");

	/* E: fi_cntr_set moves the counter too */
	ftx_note("fi_cntr_set");
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, t[6], 1, m, 5);
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, t[6], 10, m, 6);
	FTX_CHK(fi_cntr_set(m, 5));
	expect_val(t[6], 1, 1000, "fi_cntr_set(5) passes threshold 5");
	expect_stays(t[6], 1, 20, "fi_cntr_set(5) must not pass 6");
	FTX_CHK(fi_cntr_set(m, 100));
	expect_val(t[6], 11, 1000, "fi_cntr_set(100) passes threshold 6");

	/* F: ADD 0 and SET to the current value still "fire" harmlessly */
	cop(ctx, &d[nd++], FI_OP_CNTR_ADD, t[7], 0, m, 100);
	cop(ctx, &d[nd++], FI_OP_CNTR_SET, t[7], 3, m, 100);
	expect_val(t[7], 3, 1000, "ADD 0 then SET 3 at a met threshold");

	ftx_expect_no_comp(ctx, 10, "counter ops");
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	return 0;
}

/* ------------------------------------------------------------ order */

enum order_mode { ORDER_TRIG, ORDER_DW, ORDER_MIXED };

static const uint64_t order_thr[NORDER] = {5, 2, 9,  2, 7, 1, 5, 9,
					   3, 1, 12, 7, 4, 4, 1, 12};

/* the stable sort of the submission indices by threshold */
static void
order_expected(int *exp)
{
	int i, n = 0;
	uint64_t t;

	for (t = 0; t <= 12; t++)
		for (i = 0; i < NORDER; i++)
			if (order_thr[i] == t)
				exp[n++] = i;
}

static int
run_order(struct ftx_ctx *ctx, enum order_mode mode)
{
	uint64_t sb[NORDER], rb[NORDER];
	struct fi_context2 rctx[NORDER];
	struct ftx_trig tr[NORDER];
	struct ftx_dw dw[NORDER];
	void *tctx[NORDER];
	int exp[NORDER], i, ntrig = 0;
	char got[256], want[256];
	size_t gl = 0, wl = 0;
	bool bad = false;

	order_expected(exp);
	if (ctx->rank == 1) {
		for (i = 0; i < NORDER; i++) {
			rb[i] = ~0ull;
			FTX_POST(ctx, fi_trecv(ctx->ep, &rb[i], sizeof(rb[i]),
					       NULL, FI_ADDR_UNSPEC, TAG, ~0ull,
					       &rctx[i]));
		}
		ftx_barrier(ctx);
		ftx_barrier(ctx);
		ftx_wait_n_ok(ctx, FTX_RX, NORDER);
		/* wildcard receives match in arrival order: rb[i] tells
		 * which request arrived i-th */
		for (i = 0; i < NORDER; i++) {
			gl += (size_t) snprintf(got + gl, sizeof(got) - gl,
						"%s%llu", i ? "," : "",
						(unsigned long long) rb[i]);
			wl += (size_t) snprintf(want + wl, sizeof(want) - wl,
						"%s%d", i ? "," : "", exp[i]);
			if (rb[i] != (uint64_t) exp[i])
				bad = true;
		}
		FTX_SOFT(!bad,
			 "firing order (submission indices in arrival order) "
			 "%s, expected %s (thresholds by index: "
			 "5,2,9,2,7,1,5,9,3,1,12,7,4,4,1,12; counter raised "
			 "to 4, then to 16)",
			 got, want);
		ftx_barrier(ctx);
		return 0;
	}
	if (ctx->rank != 0) {
		ftx_barrier(ctx);
		ftx_barrier(ctx);
		ftx_barrier(ctx);
		return 0;
	}
	{
		struct fid_cntr *c = ftx_cntr_new(ctx), *sc = ftx_cntr_new(ctx);
		int nfirst_trig = 0, nfirst_dw = 0;

		ftx_barrier(ctx);
		for (i = 0; i < NORDER; i++) {
			struct ftx_op op = {
				.type = FI_OP_TSEND,
				.ep = ctx->ep,
				.buf = &sb[i],
				.len = sizeof(sb[i]),
				.addr = ctx->addrs[1],
				.tag = TAG | (uint64_t) i,
			};
			bool trig = mode == ORDER_TRIG ||
				    (mode == ORDER_MIXED && (i & 1));

			sb[i] = (uint64_t) i;
			if (trig) {
				tctx[ntrig++] = &tr[i].tc;
				if (order_thr[i] <= 4)
					nfirst_trig++;
				FTX_POST(ctx, ftx_trig_post(&tr[i], &op, c,
							    order_thr[i]));
			} else {
				if (order_thr[i] <= 4)
					nfirst_dw++;
				ftx_dw_post(ctx, &dw[i], &op, c, order_thr[i],
					    sc);
			}
		}
		/* two jumps: to 4, and when those sent, to 16 */
		FTX_CHK(fi_cntr_add(c, 4));
		ftx_cntr_wait(ctx, sc, (uint64_t) nfirst_dw,
			      "deferred sends of the first jump");
		while (ftx_pending(ctx, FTX_TX) < (size_t) nfirst_trig) {
			if (ftx_expired(ctx))
				ftx_fail("timeout waiting for %d triggered "
					 "send completions",
					 nfirst_trig);
			ftx_progress(ctx);
		}
		FTX_CHK(fi_cntr_add(c, 12));
		ftx_cntr_wait(ctx, sc, (uint64_t) (NORDER - ntrig),
			      "deferred sends");
		ftx_expect_comps(ctx, FTX_TX, tctx, (size_t) ntrig, 0,
				 "triggered sends");
		ftx_barrier(ctx);
		ftx_expect_no_comp(ctx, 10, "after the ordered sends");
		ftx_cntr_expect(sc, (uint64_t) (NORDER - ntrig), 0,
				"completion_cntr of the deferred sends");
		ftx_barrier(ctx);
		ftx_trig_cleanup(ctx);
	}
	return 0;
}

static int
run_order_trig(struct ftx_ctx *ctx)
{
	return run_order(ctx, ORDER_TRIG);
}

static int
run_order_dw(struct ftx_ctx *ctx)
{
	return run_order(ctx, ORDER_DW);
}

static int
run_order_mixed(struct ftx_ctx *ctx)
{
	return run_order(ctx, ORDER_MIXED);
}

/* -------------------------------------------------------------- RMA */

/*
 * Rank 0 writes the first half of rank 1's window once its start counter
 * moves, reads it back once the write completed, and reads the second half
 * (rank 1's own pattern) on the start counter too.
 */
static int
run_rma(struct ftx_ctx *ctx, bool dw)
{
	size_t half = RMA_LEN / 2;
	uint8_t *win = ftx_alloc(RMA_LEN), *src = ftx_alloc(half);
	uint8_t *back = ftx_alloc(RMA_LEN);
	struct ftx_rma peers[FTX_MAX_PROCS];
	void *src_desc, *back_desc;
	struct fid_mr *wmr;
	uint64_t wseed = ftx_seed(0x33, 1, 0), sseed = ftx_seed(0x33, 2, 0);

	wmr = ftx_mr_reg(ctx, win, RMA_LEN, FI_REMOTE_READ | FI_REMOTE_WRITE,
			 NULL);
	ftx_mr_reg(ctx, src, half, FI_WRITE, &src_desc);
	ftx_mr_reg(ctx, back, RMA_LEN, FI_READ, &back_desc);
	if (ctx->rank == 1)
		ftx_fill(win + half, half, wseed);
	ftx_mr_exchange(ctx, wmr, win, peers);

	if (ctx->rank == 0) {
		struct fid_cntr *s = ftx_cntr_new(ctx);
		struct fid_cntr *wc =
			dw ? ftx_cntr_new(ctx) : ctx->cntr[FTX_TX];
		struct fid_cntr *rc =
			dw ? ftx_cntr_new(ctx) : ctx->cntr[FTX_RX];
		struct ftx_op w = {
			.type = FI_OP_WRITE,
			.ep = ctx->ep,
			.buf = src,
			.len = half,
			.desc = src_desc,
			.addr = ctx->addrs[1],
			.raddr = peers[1].addr,
			.rkey = peers[1].key,
		};
		struct ftx_op r1 = w, r2 = w;
		struct ftx_trig tw, tr1, tr2;
		struct ftx_dw dww, dr1, dr2;

		ftx_fill(src, half, sseed);
		r1.type = r2.type = FI_OP_READ;
		r1.buf = back;
		r2.buf = back + half;
		r1.desc = r2.desc = back_desc;
		r2.raddr += half;
		if (dw) {
			/* only the second read asks for a CQ entry */
			r2.flags = FI_COMPLETION;
			ftx_dw_post(ctx, &dww, &w, s, 1, wc);
			ftx_dw_post(ctx, &dr1, &r1, wc, 1, rc);
			ftx_dw_post(ctx, &dr2, &r2, s, 1, rc);
		} else {
			FTX_POST(ctx, ftx_trig_post(&tw, &w, s, 1));
			FTX_POST(ctx, ftx_trig_post(&tr1, &r1, wc, 1));
			FTX_POST(ctx, ftx_trig_post(&tr2, &r2, s, 1));
		}
		expect_stays(wc, 0, 20, "write counter before the trigger");
		ftx_barrier(ctx);
		FTX_CHK(fi_cntr_add(s, 1));
		ftx_cntr_wait(ctx, wc, 1, "write completion counter");
		ftx_cntr_wait(ctx, rc, 2, "read completion counter");
		check_buf(back, half, sseed, "read after the triggered write");
		check_buf(back + half, half, wseed, "triggered read");
		if (dw) {
			ftx_expect_comp(ctx, FTX_TX, &dr2.work.context, 0,
					"deferred read with FI_COMPLETION");
			ftx_expect_no_comp(ctx, 20, "deferred RMA");
			ftx_cntr_expect(ctx->cntr[FTX_TX], 0, 0,
					"endpoint write counter (deferred "
					"work must not bump it)");
			ftx_cntr_expect(ctx->cntr[FTX_RX], 0, 0,
					"endpoint read counter (deferred "
					"work must not bump it)");
			ftx_cntr_expect(wc, 1, 0, "write completion_cntr");
			ftx_cntr_expect(rc, 2, 0, "read completion_cntr");
		} else {
			void *want[3] = {&tw.tc, &tr1.tc, &tr2.tc};

			ftx_expect_comps(ctx, FTX_TX, want, 3, 0,
					 "triggered RMA");
			ftx_expect_no_comp(ctx, 20, "triggered RMA");
			ftx_cntr_expect(wc, 1, 0, "endpoint write counter");
			ftx_cntr_expect(rc, 2, 0, "endpoint read counter");
		}
	} else {
		ftx_barrier(ctx);
	}
	ftx_barrier(ctx);
	if (ctx->rank == 1) {
		/* the engine wrote the window: a libfabric call orders this
		 * read after it, as an application's (a window fence) would */
		ftx_progress(ctx);
		check_buf(win, half, sseed, "window written by the trigger");
		check_buf(win + half, half, wseed, "window's second half");
	}
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	ftx_free(win);
	ftx_free(src);
	ftx_free(back);
	return 0;
}

static int
run_rma_trig(struct ftx_ctx *ctx)
{
	return run_rma(ctx, false);
}

static int
run_rma_dw(struct ftx_ctx *ctx)
{
	return run_rma(ctx, true);
}

/* ---------------------------------------------------------- atomics */

struct atomic_local {
	uint64_t add1, add2, cmp1, swp1, cmp2, swp2;
	uint64_t res1, res2, res3;
};

static void
check_atomic_valid(struct ftx_ctx *ctx)
{
	size_t cnt = 0;
	int ret;

	ret = fi_atomicvalid(ctx->ep, FI_UINT64, FI_SUM, &cnt);
	if (ret || !cnt)
		ftx_skip("fi_atomicvalid(FI_UINT64, FI_SUM): %d", ret);
	ret = fi_fetch_atomicvalid(ctx->ep, FI_UINT64, FI_SUM, &cnt);
	if (ret || !cnt)
		ftx_skip("fi_fetch_atomicvalid(FI_UINT64, FI_SUM): %d", ret);
	ret = fi_compare_atomicvalid(ctx->ep, FI_UINT64, FI_CSWAP, &cnt);
	if (ret || !cnt)
		ftx_skip("fi_compare_atomicvalid(FI_UINT64, FI_CSWAP): %d",
			 ret);
}

/*
 * On rank 1's a[0] = 1000: SUM 5 when the start counter moves; when that
 * completed, fetching SUM 7 (fetches 1005); then CSWAP 1012 -> 4242
 * (fetches 1012); then a CSWAP that must fail, 1 -> 9 (fetches 4242).
 */
static int
run_atomic(struct ftx_ctx *ctx, bool dw)
{
	volatile uint64_t *win = ftx_alloc(4 * sizeof(uint64_t));
	struct atomic_local *l = ftx_alloc(sizeof(*l));
	struct ftx_rma peers[FTX_MAX_PROCS];
	struct fid_mr *wmr;
	void *ldesc;

	check_atomic_valid(ctx);
	win[0] = 1000;
	win[1] = win[2] = win[3] = 0;
	wmr = ftx_mr_reg(ctx, (void *) win, 4 * sizeof(uint64_t),
			 FI_REMOTE_READ | FI_REMOTE_WRITE, NULL);
	ftx_mr_reg(ctx, l, sizeof(*l), FI_READ | FI_WRITE, &ldesc);
	ftx_mr_exchange(ctx, wmr, (void *) win, peers);

	if (ctx->rank == 0) {
		struct fid_cntr *s = ftx_cntr_new(ctx);
		struct fid_cntr *x = dw ? ftx_cntr_new(ctx) : ctx->cntr[FTX_TX];
		struct fid_cntr *y = dw ? ftx_cntr_new(ctx) : ctx->cntr[FTX_RX];
		struct ftx_op a = {
			.type = FI_OP_ATOMIC,
			.ep = ctx->ep,
			.buf = &l->add1,
			.desc = ldesc,
			.addr = ctx->addrs[1],
			.raddr = peers[1].addr,
			.rkey = peers[1].key,
			.dt = FI_UINT64,
			.aop = FI_SUM,
			.count = 1,
			.res_desc = ldesc,
			.cmp_desc = ldesc,
		};
		struct ftx_op f = a, c1 = a, c2 = a;
		struct ftx_trig t[4];
		struct ftx_dw d[4];

		memset(l, 0, sizeof(*l));
		l->add1 = 5;
		l->add2 = 7;
		l->cmp1 = 1012;
		l->swp1 = 4242;
		l->cmp2 = 1;
		l->swp2 = 9;
		l->res1 = l->res2 = l->res3 = ~0ull;
		f.type = FI_OP_FETCH_ATOMIC;
		f.buf = &l->add2;
		f.res = &l->res1;
		c1.type = c2.type = FI_OP_COMPARE_ATOMIC;
		c1.aop = c2.aop = FI_CSWAP;
		c1.buf = &l->swp1;
		c1.cmp = &l->cmp1;
		c1.res = &l->res2;
		c2.buf = &l->swp2;
		c2.cmp = &l->cmp2;
		c2.res = &l->res3;
		if (dw) {
			c2.flags = FI_COMPLETION;
			ftx_dw_post(ctx, &d[0], &a, s, 1, x);
			ftx_dw_post(ctx, &d[1], &f, x, 1, y);
			ftx_dw_post(ctx, &d[2], &c1, y, 1, y);
			ftx_dw_post(ctx, &d[3], &c2, y, 2, y);
		} else {
			FTX_POST(ctx, ftx_trig_post(&t[0], &a, s, 1));
			FTX_POST(ctx, ftx_trig_post(&t[1], &f, x, 1));
			FTX_POST(ctx, ftx_trig_post(&t[2], &c1, y, 1));
			FTX_POST(ctx, ftx_trig_post(&t[3], &c2, y, 2));
		}
		ftx_barrier(ctx);
		FTX_CHK(fi_cntr_add(s, 1));
		ftx_cntr_wait(ctx, x, 1, "atomic's counter (SUM 5 done)");
		ftx_cntr_wait(ctx, y, 1,
			      "fetching atomics' counter (fetching SUM 7 "
			      "done)");
		ftx_cntr_wait(ctx, y, 2,
			      "fetching atomics' counter (CSWAP 1012 done)");
		ftx_cntr_wait(ctx, y, 3,
			      "fetching atomics' counter (CSWAP 1 done)");
		FTX_SOFT(l->res1 == 1005,
			 "fetching SUM 7 after SUM 5 on 1000 fetched %llu, "
			 "expected 1005",
			 (unsigned long long) l->res1);
		FTX_SOFT(l->res2 == 1012,
			 "CSWAP 1012->4242 fetched %llu, expected 1012",
			 (unsigned long long) l->res2);
		FTX_SOFT(l->res3 == 4242,
			 "CSWAP 1->9 fetched %llu, expected 4242",
			 (unsigned long long) l->res3);
		if (dw) {
			ftx_expect_comp(ctx, FTX_TX, &d[3].work.context, 0,
					"deferred CSWAP with FI_COMPLETION");
			ftx_expect_no_comp(ctx, 20, "deferred atomics");
			ftx_cntr_expect(ctx->cntr[FTX_TX], 0, 0,
					"endpoint write counter (deferred "
					"work must not bump it)");
			ftx_cntr_expect(ctx->cntr[FTX_RX], 0, 0,
					"endpoint read counter (deferred "
					"work must not bump it)");
		} else {
			void *want[4] = {&t[0].tc, &t[1].tc, &t[2].tc,
					 &t[3].tc};

			ftx_expect_comps(ctx, FTX_TX, want, 4, 0,
					 "triggered atomics");
			ftx_expect_no_comp(ctx, 20, "triggered atomics");
		}
		ftx_cntr_expect(x, 1, 0, "atomic's completion counter");
		ftx_cntr_expect(y, 3, 0,
				"fetching atomics' completion counter");
	} else {
		ftx_barrier(ctx);
	}
	ftx_barrier(ctx);
	if (ctx->rank == 1) {
		ftx_progress(ctx); /* orders the read after the engine's */
		FTX_SOFT(win[0] == 4242 && win[1] == 0,
			 "target after the atomics reads %llu (next word "
			 "%llu), expected 4242 (0)",
			 (unsigned long long) win[0],
			 (unsigned long long) win[1]);
	}
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	ftx_free((void *) win);
	ftx_free(l);
	return 0;
}

static int
run_atomic_trig(struct ftx_ctx *ctx)
{
	return run_atomic(ctx, false);
}

static int
run_atomic_dw(struct ftx_ctx *ctx)
{
	return run_atomic(ctx, true);
}

#define RMA_CAPS \
	(FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)
#define ATOMIC_CAPS \
	(FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)

static const struct ftx_case cases[] = {
	{.name = "ring_trig",
	 .run = run_ring_trig,
	 .pre_enable = bind_msg_cntrs},
	{.name = "ring_dw", .run = run_ring_dw, .pre_enable = bind_msg_cntrs},
	{.name = "cntr_chain", .run = run_cntr_chain},
	{.name = "order_trig", .run = run_order_trig},
	{.name = "order_dw", .run = run_order_dw},
	{.name = "order_mixed", .run = run_order_mixed},
	{.name = "rma_trig",
	 .run = run_rma_trig,
	 .caps = RMA_CAPS,
	 .pre_enable = bind_rma_cntrs},
	{.name = "rma_dw",
	 .run = run_rma_dw,
	 .caps = RMA_CAPS,
	 .pre_enable = bind_rma_cntrs},
	{.name = "atomic_trig",
	 .run = run_atomic_trig,
	 .caps = ATOMIC_CAPS,
	 .pre_enable = bind_rma_cntrs},
	{.name = "atomic_dw",
	 .run = run_atomic_dw,
	 .caps = ATOMIC_CAPS,
	 .pre_enable = bind_rma_cntrs},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_trigger_chain",
	.desc = "chains of triggered operations and deferred work",
	.caps = FI_MSG | FI_TAGGED | FI_TRIGGER,
	.nprocs = 4,
	.min_procs = 2,
	.max_procs = FTX_MAX_PROCS,
	.timeout = 60,
	.optstr = "s:r:",
	.opt = opt,
	.opthelp = "  -s LIST  ring message sizes, cycled per round (default "
		   "8,4k,64k+3)\n"
		   "  -r N     rounds around the ring (default 6, at most "
		   "64)\n",
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
