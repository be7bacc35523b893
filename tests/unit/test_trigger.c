/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Triggered operations and deferred work (fi_trigger(3)): firing order
 * (also while several threads increment), posting racing increments,
 * 100,000 queued requests, cancel and flush, bad input and busy closes,
 * FI_TRIGGER posts, the message and one-sided op types, and firing by the
 * engine thread alone.
 *
 * Only the public API is used: fi_control(FI_QUEUE_WORK / FI_CANCEL_WORK /
 * FI_FLUSH_WORK) on the domain, FI_TRIGGER in the flags of the *msg calls,
 * and the engine statistics of fi_ext_tnbc.h; but for trig_app_runs_long,
 * which queues a step of its own and reads the engine thread's CPU time.
 * Endpoint roles: R (ep[0]) receives, A (ep[1]) sends.
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_trigger.h>
#include <rdma/fi_ext_tnbc.h>

#include "tnbc_unit.h"

#define R 0
#define A 1

#define TT_CAPS (FI_MSG | FI_TAGGED | FI_TRIGGER)

/* A context the provider must never report: deferred work completes
 * with &work->context, not with the op's msg.context. */
static int tt_not_this_ctx;

/* ------------------------------------------------------------------ */

static void tt_world_open(struct tu_world *w, size_t n, bool cntrs)
{
	struct fi_info *hints = fi_allocinfo();
	struct tu_world_opts o = {.cntrs = cntrs};

	ck_assert_ptr_nonnull(hints);
	hints->caps = TT_CAPS;
	hints->ep_attr->type = FI_EP_RDM;
	o.hints = hints;
	tu_world_open(w, n, &o);
	fi_freeinfo(hints);
}

static struct fid_cntr *tt_cntr(struct fid_domain *dom)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP,
				    .wait_obj = FI_WAIT_UNSPEC};
	struct fid_cntr *c = NULL;

	ck_assert_int_eq(fi_cntr_open(dom, &attr, &c, NULL), 0);
	ck_assert_ptr_nonnull(c);
	return c;
}

static void tt_close(struct fid_cntr *c)
{
	int ret = fi_close(&c->fid);

	ck_assert_msg(ret == 0, "fi_close(cntr): %d (%s)", ret,
		      fi_strerror(-ret));
}

static uint64_t tt_total(struct fid_cntr *c)
{
	return fi_cntr_read(c) + fi_cntr_readerr(c);
}

/* True when the counter still holds value after watching it for ms. */
static bool tt_cntr_stays(struct fid_cntr *c, uint64_t value, unsigned ms)
{
	uint64_t deadline = tu_now_ms() + ms;

	do {
		if (fi_cntr_read(c) != value)
			return false;
		sched_yield();
	} while (tu_now_ms() < deadline);
	return fi_cntr_read(c) == value;
}

static void tt_cntr_expect(struct fid_cntr *c, uint64_t value, const char *what)
{
	bool ok = tu_cntr_reach(c, value, TU_WAIT_MS);
	uint64_t got = fi_cntr_read(c);

	ck_assert_msg(ok && got == value, "%s: counter is %llu, expected %llu",
		      what, (unsigned long long)got, (unsigned long long)value);
}

static bool tt_cntr_err_reach(struct fid_cntr *c, uint64_t value,
			      unsigned timeout_ms)
{
	uint64_t deadline = tu_now_ms() + timeout_ms;

	while (fi_cntr_readerr(c) < value) {
		if (tu_now_ms() >= deadline)
			return false;
		sched_yield();
	}
	return true;
}

static int tt_ctl(struct fid_domain *dom, int cmd, struct fi_deferred_work *w)
{
	return fi_control(&dom->fid, cmd, w);
}

static void tt_queue(struct fid_domain *dom, struct fi_deferred_work *work)
{
	int ret = tt_ctl(dom, FI_QUEUE_WORK, work);

	ck_assert_msg(ret == 0,
		      "FI_QUEUE_WORK (op %d, threshold %llu): %d (%s)",
		      (int)work->op_type, (unsigned long long)work->threshold,
		      ret, fi_strerror(-ret));
}

static void tt_stats(struct fid_domain *dom, struct fi_tnbc_engine_stats *st)
{
	tu_engine_stats(dom, st);
}

/* Deferred counter operation (FI_OP_CNTR_ADD / FI_OP_CNTR_SET). */
struct tt_cop {
	struct fi_deferred_work work;
	struct fi_op_cntr op;
};

static void tt_cop_init(struct tt_cop *c, struct fid_cntr *trig, uint64_t thr,
			enum fi_op_type type, struct fid_cntr *target,
			uint64_t value)
{
	memset(c, 0, sizeof(*c));
	c->work.threshold = thr;
	c->work.triggering_cntr = trig;
	c->work.completion_cntr = NULL;
	c->work.op_type = type;
	c->work.op.cntr = &c->op;
	c->op.cntr = target;
	c->op.value = value;
}

/* Deferred message operation (FI_OP_SEND / RECV / TSEND / TRECV). */
struct tt_mop {
	struct fi_deferred_work work;
	union {
		struct fi_op_msg msg;
		struct fi_op_tagged tagged;
	} op;
	struct iovec iov;
};

/* ep: the endpoint posting; peer: the other side (-1: FI_ADDR_UNSPEC). */
static void tt_mop_init(struct tt_mop *m, struct tu_world *w,
			enum fi_op_type type, int ep, int peer, void *buf,
			size_t len, uint64_t tag, uint64_t flags,
			struct fid_cntr *trig, uint64_t thr,
			struct fid_cntr *comp)
{
	fi_addr_t addr = peer < 0 ? FI_ADDR_UNSPEC : w->addr[peer];

	memset(m, 0, sizeof(*m));
	m->iov.iov_base = buf;
	m->iov.iov_len = len;
	m->work.threshold = thr;
	m->work.triggering_cntr = trig;
	m->work.completion_cntr = comp;
	m->work.op_type = type;
	if (type == FI_OP_TSEND || type == FI_OP_TRECV) {
		m->work.op.tagged = &m->op.tagged;
		m->op.tagged.ep = w->ep[ep].ep;
		m->op.tagged.msg.msg_iov = &m->iov;
		m->op.tagged.msg.iov_count = 1;
		m->op.tagged.msg.addr = addr;
		m->op.tagged.msg.tag = tag;
		m->op.tagged.msg.ignore = 0;
		m->op.tagged.msg.context = &tt_not_this_ctx;
		m->op.tagged.flags = flags;
	} else {
		m->work.op.msg = &m->op.msg;
		m->op.msg.ep = w->ep[ep].ep;
		m->op.msg.msg.msg_iov = &m->iov;
		m->op.msg.msg.iov_count = 1;
		m->op.msg.msg.addr = addr;
		m->op.msg.msg.context = &tt_not_this_ctx;
		m->op.msg.flags = flags;
	}
}

static void tt_trig_ctx(struct fi_triggered_context *t, struct fid_cntr *c,
			size_t thr)
{
	memset(t, 0, sizeof(*t));
	t->event_type = FI_TRIGGER_THRESHOLD;
	t->trigger.threshold.cntr = c;
	t->trigger.threshold.threshold = thr;
}

/* fi_tsendmsg / fi_trecvmsg with a msg and iov that the call may not keep:
 * both are scribbled over once the call has returned. */
static ssize_t tt_tsendmsg(struct tu_world *w, int from, int to, void *buf,
			   size_t len, uint64_t tag, void *ctx, uint64_t flags)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_msg_tagged m = {.msg_iov = &iov,
				  .iov_count = 1,
				  .addr = w->addr[to],
				  .tag = tag,
				  .context = ctx};
	ssize_t ret = fi_tsendmsg(w->ep[from].ep, &m, flags);

	memset(&iov, 0xa5, sizeof(iov));
	memset(&m, 0xa5, sizeof(m));
	return ret;
}

static ssize_t tt_trecvmsg(struct tu_world *w, int at, void *buf, size_t len,
			   uint64_t tag, uint64_t ignore, void *ctx,
			   uint64_t flags)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_msg_tagged m = {.msg_iov = &iov,
				  .iov_count = 1,
				  .addr = FI_ADDR_UNSPEC,
				  .tag = tag,
				  .ignore = ignore,
				  .context = ctx};
	ssize_t ret = fi_trecvmsg(w->ep[at].ep, &m, flags);

	memset(&iov, 0xa5, sizeof(iov));
	memset(&m, 0xa5, sizeof(m));
	return ret;
}

static void tt_trecv(struct tu_world *w, int at, void *buf, size_t len,
		     uint64_t tag, uint64_t ignore, void *ctx)
{
	ssize_t ret = fi_trecv(w->ep[at].ep, buf, len, NULL, FI_ADDR_UNSPEC,
			       tag, ignore, ctx);

	ck_assert_msg(ret == 0, "fi_trecv: %zd (%s)", ret,
		      fi_strerror((int)-ret));
}

/* Waits for one FI_ECANCELED error entry and returns its op_context. */
static void *tt_expect_canceled(struct fid_cq *cq)
{
	struct fi_cq_err_entry err;

	tu_cq_expect_err(cq, &err);
	ck_assert_msg(err.err == FI_ECANCELED,
		      "error entry ctx %p: err %d (%s), expected FI_ECANCELED",
		      err.op_context, err.err, fi_strerror(err.err));
	return err.op_context;
}

/* Stable order of ids 0..n-1 by threshold. */
static void tt_stable_order(const uint64_t *thr, int n, int *order)
{
	for (int i = 0; i < n; i++) {
		int j = i;

		while (j > 0 && thr[order[j - 1]] > thr[i]) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
}

/* ------------------------------------------------------------------ */

START_TEST(trig_caps)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;

	tu_prov_init();
	ck_assert_int_eq(
		tnbc_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &info), 0);
	ck_assert_msg(info->caps & FI_TRIGGER,
		      "FI_TRIGGER not among the default caps (0x%llx)",
		      (unsigned long long)info->caps);
	fi_freeinfo(info);
	info = NULL;
	hints->caps = TT_CAPS;
	ck_assert_int_eq(
		tnbc_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info),
		0);
	ck_assert(info->caps & FI_TRIGGER);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}
END_TEST

/*
 * Firing order.  On one triggering counter T, NG groups of counter
 * requests and NS tagged sends, with shuffled and partly equal thresholds.
 * Group g (all requests submitted together, threshold gthr[g]) is
 *   SET Y[g] := BASE;  ADD Y[k] += 1 for every k != g;  ADD F += 1
 * so that once every group fired, Y[g] - BASE is the number of groups that
 * fired after g: its position in the firing order.  The sends carry
 * tag = id and arrive, in firing order, in wildcard receives posted in
 * order.  T moves by several at once, once through its error count.
 */
START_TEST(trig_threshold_order)
{
	enum { NG = 8, NS = 6, BASE = 1000, MLEN = 16 };
	static const uint64_t gthr[NG] = {5, 2, 9, 2, 7, 12, 4, 9};
	static const uint64_t sthr[NS] = {9, 3, 7, 3, 1, 12};
	static const struct {
		bool err;
		uint64_t by;
	} stage[] = {{false, 3}, {true, 4}, {false, 1}, {false, 10}};
	struct tu_world w;
	struct fid_cntr *T, *F, *S, *Z, *Y[NG];
	struct tt_cop *cops = calloc(NG * (NG + 1) + 2, sizeof(*cops));
	struct tt_mop snd[NS + 1];
	char sbuf[NS + 1][MLEN], rbuf[NS + 1][MLEN];
	int rctx[NS + 1], gorder[NG], sorder[NS], pos[NG];
	struct fi_tnbc_engine_stats st0, st;
	struct fi_cq_tagged_entry e;
	size_t k = 0, nrx = 0;
	uint64_t v = 0;

	ck_assert_ptr_nonnull(cops);
	tt_world_open(&w, 2, false);
	T = tt_cntr(w.d.domain);
	F = tt_cntr(w.d.domain);
	S = tt_cntr(w.d.domain);
	Z = tt_cntr(w.d.domain);
	for (int g = 0; g < NG; g++)
		Y[g] = tt_cntr(w.d.domain);
	tt_stable_order(gthr, NG, gorder);
	tt_stable_order(sthr, NS, sorder);

	for (int i = 0; i < NS; i++)
		tt_trecv(&w, R, rbuf[i], MLEN, 0, ~0ULL, &rctx[i]);
	tt_stats(w.d.domain, &st0);
	for (int g = 0; g < NG; g++) {
		tt_cop_init(&cops[k], T, gthr[g], FI_OP_CNTR_SET, Y[g], BASE);
		tt_queue(w.d.domain, &cops[k++].work);
		for (int j = 0; j < NG; j++) {
			if (j == g)
				continue;
			tt_cop_init(&cops[k], T, gthr[g], FI_OP_CNTR_ADD, Y[j],
				    1);
			tt_queue(w.d.domain, &cops[k++].work);
		}
		tt_cop_init(&cops[k], T, gthr[g], FI_OP_CNTR_ADD, F, 1);
		tt_queue(w.d.domain, &cops[k++].work);
		if (g < NS) {
			snprintf(sbuf[g], MLEN, "send %d", g);
			tt_mop_init(&snd[g], &w, FI_OP_TSEND, A, R, sbuf[g],
				    MLEN, 100 + g, 0, T, sthr[g], S);
			tt_queue(w.d.domain, &snd[g].work);
		}
	}
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_queued - st0.trig_queued, k + NS);
	ck_assert_uint_eq(st.trig_pending - st0.trig_pending, k + NS);
	ck_assert_uint_eq(st.trig_fired, st0.trig_fired);
	/* nothing fires before T moves */
	ck_assert(tt_cntr_stays(F, 0, TU_QUIET_MS));
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));

	for (size_t s = 0; s < sizeof(stage) / sizeof(stage[0]); s++) {
		uint64_t exp_g = 0, exp_s = 0;

		if (stage[s].err)
			ck_assert_int_eq(fi_cntr_adderr(T, stage[s].by), 0);
		else
			ck_assert_int_eq(fi_cntr_add(T, stage[s].by), 0);
		v += stage[s].by;
		for (int g = 0; g < NG; g++)
			exp_g += gthr[g] <= v;
		for (int i = 0; i < NS; i++)
			exp_s += sthr[i] <= v;
		tt_cntr_expect(F, exp_g, "groups fired");
		ck_assert_msg(tt_cntr_stays(F, exp_g, TU_QUIET_MS),
			      "T = %llu: more than %llu groups fired",
			      (unsigned long long)v, (unsigned long long)exp_g);
		for (int g = 0; g < NG; g++) {
			bool fired = fi_cntr_read(Y[g]) >= BASE;

			ck_assert_msg(fired == (gthr[g] <= v),
				      "T = %llu: group %d (threshold %llu) %s",
				      (unsigned long long)v, g,
				      (unsigned long long)gthr[g],
				      fired ? "fired" : "did not fire");
		}
		/* the sends, in threshold order */
		for (; nrx < exp_s; nrx++) {
			int id = sorder[nrx];

			tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
			ck_assert_ptr_eq(e.op_context, &rctx[nrx]);
			ck_assert_msg(e.tag == (uint64_t)(100 + id),
				      "T = %llu: receive %zu got tag %llu, "
				      "expected %d (send %d, threshold %llu)",
				      (unsigned long long)v, nrx,
				      (unsigned long long)e.tag, 100 + id, id,
				      (unsigned long long)sthr[id]);
			ck_assert_str_eq(rbuf[nrx], sbuf[id]);
		}
		ck_assert_msg(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS),
			      "T = %llu: a send beyond the %llu expected "
			      "arrived",
			      (unsigned long long)v, (unsigned long long)exp_s);
		tt_cntr_expect(S, exp_s, "send completion counter");
	}
	ck_assert_uint_eq(tt_total(T), 18);

	/* every group fired; positions in threshold order, ties in
	 * submission order */
	for (int g = 0; g < NG; g++) {
		uint64_t y = fi_cntr_read(Y[g]);

		ck_assert_uint_ge(y, BASE);
		ck_assert_uint_le(y, BASE + NG - 1);
		pos[g] = NG - 1 - (int)(y - BASE);
	}
	for (int p = 0; p < NG; p++)
		ck_assert_msg(pos[gorder[p]] == p,
			      "group %d (threshold %llu) fired at position %d, "
			      "expected %d",
			      gorder[p], (unsigned long long)gthr[gorder[p]],
			      pos[gorder[p]], p);
	/* deferred sends write no completion to the endpoint's CQ */
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));

	/* a request whose threshold is met already fires at once */
	tt_cop_init(&cops[k], T, 18, FI_OP_CNTR_ADD, Z, 5);
	tt_queue(w.d.domain, &cops[k++].work);
	ck_assert_msg(tu_cntr_reach(Z, 5, TU_WAIT_MS),
		      "threshold met at queue time: did not fire");
	tt_cop_init(&cops[k], T, 0, FI_OP_CNTR_ADD, Z, 1);
	tt_queue(w.d.domain, &cops[k++].work);
	ck_assert_msg(tu_cntr_reach(Z, 6, TU_WAIT_MS),
		      "threshold 0: did not fire");
	tt_trecv(&w, R, rbuf[NS], MLEN, 0, ~0ULL, &rctx[NS]);
	snprintf(sbuf[NS], MLEN, "met");
	tt_mop_init(&snd[NS], &w, FI_OP_TSEND, A, R, sbuf[NS], MLEN, 7, 0, T, 4,
		    S);
	tt_queue(w.d.domain, &snd[NS].work);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &rctx[NS]);
	ck_assert_uint_eq(e.tag, 7);
	ck_assert_str_eq(rbuf[NS], "met");
	tt_cntr_expect(S, NS + 1, "send completion counter");
	ck_assert(tt_cntr_stays(Z, 6, TU_QUIET_MS));

	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, st0.trig_pending);
	ck_assert_uint_eq(st.trig_queued - st0.trig_queued, k + NS + 1);
	ck_assert_uint_eq(st.trig_fired - st0.trig_fired, k + NS + 1);
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));

	for (int g = 0; g < NG; g++)
		tt_close(Y[g]);
	tt_close(T);
	tt_close(F);
	tt_close(S);
	tt_close(Z);
	tu_world_close(&w);
	free(cops);
}
END_TEST

/* Error counts alone reach a threshold; and a counter that only ever
 * moves through its error count fires in order too. */
START_TEST(trig_error_counts)
{
	struct tu_world w;
	struct fid_cntr *T, *Y;
	struct tt_cop c[3];

	tt_world_open(&w, 1, false);
	T = tt_cntr(w.d.domain);
	Y = tt_cntr(w.d.domain);
	/* SET 10 at 6, ADD 1 at 4, ADD 100 at 5: the final value tells the
	 * order (ADDs first, then the SET) */
	tt_cop_init(&c[0], T, 6, FI_OP_CNTR_SET, Y, 10);
	tt_cop_init(&c[1], T, 4, FI_OP_CNTR_ADD, Y, 1);
	tt_cop_init(&c[2], T, 5, FI_OP_CNTR_ADD, Y, 100);
	for (int i = 0; i < 3; i++)
		tt_queue(w.d.domain, &c[i].work);
	ck_assert_int_eq(fi_cntr_add(T, 2), 0);
	ck_assert_int_eq(fi_cntr_adderr(T, 1), 0);
	ck_assert(tt_cntr_stays(Y, 0, TU_QUIET_MS));
	ck_assert_int_eq(fi_cntr_adderr(T, 1), 0); /* 2 + 2 = 4 */
	tt_cntr_expect(Y, 1, "after the threshold-4 ADD");
	ck_assert(tt_cntr_stays(Y, 1, TU_QUIET_MS));
	ck_assert_int_eq(fi_cntr_adderr(T, 5), 0); /* 2 + 7 = 9 */
	ck_assert_msg(tu_cntr_reach(Y, 10, TU_WAIT_MS) &&
			      tt_cntr_stays(Y, 10, TU_QUIET_MS),
		      "Y = %llu, expected 10 (ADD 100 at 5 before SET 10 at "
		      "6)",
		      (unsigned long long)fi_cntr_read(Y));
	tt_close(T);
	tt_close(Y);
	tu_world_close(&w);
}
END_TEST

/* fi_cntr_set / fi_cntr_seterr move a counter past thresholds too. */
START_TEST(trig_cntr_set_jump)
{
	struct tu_world w;
	struct fid_cntr *T, *Y;
	struct tt_cop c[3];

	tt_world_open(&w, 1, false);
	T = tt_cntr(w.d.domain);
	Y = tt_cntr(w.d.domain);
	tt_cop_init(&c[0], T, 8, FI_OP_CNTR_SET, Y, 7);
	tt_cop_init(&c[1], T, 3, FI_OP_CNTR_ADD, Y, 1);
	tt_cop_init(&c[2], T, 5, FI_OP_CNTR_ADD, Y, 2);
	for (int i = 0; i < 3; i++)
		tt_queue(w.d.domain, &c[i].work);
	ck_assert_int_eq(fi_cntr_set(T, 5), 0);
	tt_cntr_expect(Y, 3, "fi_cntr_set(T, 5): thresholds 3 and 5");
	ck_assert(tt_cntr_stays(Y, 3, TU_QUIET_MS));
	ck_assert_int_eq(fi_cntr_seterr(T, 3), 0);
	tt_cntr_expect(Y, 7, "fi_cntr_seterr(T, 3): threshold 8");
	ck_assert(tt_cntr_stays(Y, 7, TU_QUIET_MS));
	tt_close(T);
	tt_close(Y);
	tu_world_close(&w);
}
END_TEST

/* Deferred counter ops fire work queued on the counters they change:
 * a chain C[0] -> C[1] -> ... -> C[NC - 1] runs to its end. */
START_TEST(trig_chain)
{
	enum { NC = 64 };
	struct tu_world w;
	struct fid_cntr *C[NC];
	struct tt_cop c[NC - 1];
	struct fi_tnbc_engine_stats st;

	tt_world_open(&w, 1, false);
	for (int i = 0; i < NC; i++)
		C[i] = tt_cntr(w.d.domain);
	/* queued back to front and front to back alike */
	for (int i = NC - 2; i >= 0; i -= 2)
		tt_cop_init(&c[i], C[i], 2, FI_OP_CNTR_ADD, C[i + 1], 2);
	for (int i = NC % 2 ? 0 : 1; i < NC - 1; i += 2)
		tt_cop_init(&c[i], C[i], 2, FI_OP_CNTR_ADD, C[i + 1], 2);
	for (int i = 0; i < NC - 1; i++)
		tt_queue(w.d.domain, &c[i].work);
	ck_assert_int_eq(fi_cntr_add(C[0], 1), 0);
	ck_assert(tt_cntr_stays(C[1], 0, TU_QUIET_MS));
	ck_assert_int_eq(fi_cntr_add(C[0], 1), 0);
	tt_cntr_expect(C[NC - 1], 2, "end of the chain");
	for (int i = 1; i < NC; i++)
		ck_assert_uint_eq(fi_cntr_read(C[i]), 2);
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, 0);
	for (int i = 0; i < NC; i++)
		tt_close(C[i]);
	tu_world_close(&w);
}
END_TEST

/*
 * Firing order while several threads increment the counter: sends with
 * thresholds 1..N (tag = threshold) must start in threshold order, so
 * they arrive in that order.  A thread whose increment released the
 * thr-3 request may not be overtaken by another thread's later release
 * of the thr-7 one.
 */
enum { OC_NINC = 4, OC_KINC = 400, OC_N = OC_NINC * OC_KINC, OC_ROUNDS = 3 };

struct tt_oc {
	struct fid_cntr *T;
	pthread_barrier_t *bar;
	int ret;
};

static void *tt_oc_inc(void *p)
{
	struct tt_oc *a = p;

	pthread_barrier_wait(a->bar);
	for (int k = 0; k < OC_KINC; k++) {
		int ret = fi_cntr_add(a->T, 1);

		if (ret && !a->ret)
			a->ret = ret;
	}
	return NULL;
}

START_TEST(trig_order_concurrent)
{
	struct tt_mop *m = calloc(OC_N, sizeof(*m));
	uint64_t *sb = calloc(OC_N, sizeof(*sb));
	uint64_t *rb = calloc(OC_N, sizeof(*rb));
	struct tt_oc a[OC_NINC];
	pthread_t tid[OC_NINC];
	pthread_barrier_t bar;
	struct tu_world w;
	struct fid_cntr *T, *S;
	struct fi_cq_tagged_entry e;

	ck_assert(m && sb && rb);
	tt_world_open(&w, 2, false);
	S = tt_cntr(w.d.domain);
	for (int round = 0; round < OC_ROUNDS; round++) {
		uint64_t inversions = 0, first_bad = 0, first_prev = 0;
		uint64_t prev = 0;

		T = tt_cntr(w.d.domain);
		for (int i = 0; i < OC_N; i++)
			tt_trecv(&w, R, &rb[i], sizeof(rb[i]), 0, ~0ULL,
				 &rb[i]);
		for (int i = 0; i < OC_N; i++) {
			sb[i] = i + 1;
			tt_mop_init(&m[i], &w, FI_OP_TSEND, A, R, &sb[i],
				    sizeof(sb[i]), i + 1, 0, T, i + 1, S);
		}
		/* queued in a shuffled order */
		for (int i = 0; i < OC_N; i++)
			tt_queue(w.d.domain, &m[(i * 7919) % OC_N].work);
		ck_assert_int_eq(pthread_barrier_init(&bar, NULL, OC_NINC), 0);
		for (int i = 0; i < OC_NINC; i++) {
			a[i] = (struct tt_oc){.T = T, .bar = &bar};
			ck_assert_int_eq(
				pthread_create(&tid[i], NULL, tt_oc_inc, &a[i]),
				0);
		}
		for (int i = 0; i < OC_NINC; i++) {
			pthread_join(tid[i], NULL);
			ck_assert_int_eq(a[i].ret, 0);
		}
		pthread_barrier_destroy(&bar);
		tt_cntr_expect(S, (uint64_t)(round + 1) * OC_N,
			       "send completion counter");
		for (int i = 0; i < OC_N; i++) {
			tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
			ck_assert_ptr_eq(e.op_context, &rb[i]);
			ck_assert_uint_eq(rb[i], e.tag);
			if (e.tag < prev && !inversions++) {
				first_bad = e.tag;
				first_prev = prev;
			}
			prev = e.tag;
		}
		ck_assert_msg(!inversions,
			      "round %d: %llu sends out of threshold order "
			      "(first: threshold %llu after %llu)",
			      round, (unsigned long long)inversions,
			      (unsigned long long)first_bad,
			      (unsigned long long)first_prev);
		tt_close(T);
	}
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	tt_close(S);
	tu_world_close(&w);
	free(m);
	free(sb);
	free(rb);
}
END_TEST

/* ------------------------------------------------------------------ */

/*
 * Posting races incrementing: NINC threads bump T by 1 while NPOST threads
 * queue CNTR_ADD(Rc, 1) requests with thresholds around T's current value
 * (some already met).  When the incrementers are done, exactly the
 * requests with threshold <= T have fired; after T jumps past all
 * thresholds, every one has, exactly once.
 */
enum { RC_NINC = 4, RC_NPOST = 4, RC_KINC = 5000, RC_QPOST = 3000 };
enum { RC_ROUNDS = 5 };

struct tt_race {
	struct fid_domain *dom;
	struct fid_cntr *T, *Rc;
	pthread_barrier_t *bar;
	struct tt_cop *reqs; /* this poster's RC_QPOST requests */
	unsigned seed;
	atomic_int errs;
	int first_err;
};

static void *tt_race_inc(void *p)
{
	struct tt_race *a = p;

	pthread_barrier_wait(a->bar);
	for (int k = 0; k < RC_KINC; k++) {
		int ret = fi_cntr_add(a->T, 1);

		if (ret && !atomic_fetch_add(&a->errs, 1))
			a->first_err = ret;
	}
	return NULL;
}

static void *tt_race_post(void *p)
{
	struct tt_race *a = p;

	pthread_barrier_wait(a->bar);
	for (int q = 0; q < RC_QPOST; q++) {
		int64_t thr = (int64_t)fi_cntr_read(a->T) +
			      (int64_t)(rand_r(&a->seed) % 64) - 24;
		int ret;

		tt_cop_init(&a->reqs[q], a->T, thr < 0 ? 0 : (uint64_t)thr,
			    FI_OP_CNTR_ADD, a->Rc, 1);
		ret = fi_control(&a->dom->fid, FI_QUEUE_WORK, &a->reqs[q].work);
		if (ret && !atomic_fetch_add(&a->errs, 1))
			a->first_err = ret;
		if ((q & 63) == 0)
			sched_yield();
	}
	return NULL;
}

START_TEST(trig_post_race)
{
	const size_t per_round = RC_NPOST * RC_QPOST;
	struct tt_cop *reqs = calloc(RC_ROUNDS * per_round, sizeof(*reqs));
	struct tt_race inc[RC_NINC], post[RC_NPOST];
	pthread_t tid[RC_NINC + RC_NPOST];
	pthread_barrier_t bar;
	struct tu_world w;
	struct fid_cntr *T, *Rc;
	struct fi_tnbc_engine_stats st0, st;
	uint64_t base_r = 0, base_t = 0;

	ck_assert_ptr_nonnull(reqs);
	tt_world_open(&w, 1, false);
	T = tt_cntr(w.d.domain);
	Rc = tt_cntr(w.d.domain);
	for (int round = 0; round < RC_ROUNDS; round++) {
		struct tt_cop *rq = reqs + round * per_round;
		uint64_t tfinal, due = 0;
		int nt = 0;

		tt_stats(w.d.domain, &st0);
		ck_assert_uint_eq(st0.trig_pending, 0);
		ck_assert_int_eq(
			pthread_barrier_init(&bar, NULL, RC_NINC + RC_NPOST),
			0);
		for (int i = 0; i < RC_NINC; i++) {
			inc[i] = (struct tt_race){.dom = w.d.domain,
						  .T = T,
						  .Rc = Rc,
						  .bar = &bar};
			ck_assert_int_eq(pthread_create(&tid[nt++], NULL,
							tt_race_inc, &inc[i]),
					 0);
		}
		for (int i = 0; i < RC_NPOST; i++) {
			post[i] = (struct tt_race){.dom = w.d.domain,
						   .T = T,
						   .Rc = Rc,
						   .bar = &bar,
						   .reqs = rq + i * RC_QPOST,
						   .seed = 1234u + 77u * round +
							   i};
			ck_assert_int_eq(pthread_create(&tid[nt++], NULL,
							tt_race_post, &post[i]),
					 0);
		}
		for (int i = 0; i < nt; i++)
			pthread_join(tid[i], NULL);
		pthread_barrier_destroy(&bar);
		for (int i = 0; i < RC_NINC; i++)
			ck_assert_msg(!atomic_load(&inc[i].errs),
				      "fi_cntr_add: %d", inc[i].first_err);
		for (int i = 0; i < RC_NPOST; i++)
			ck_assert_msg(!atomic_load(&post[i].errs),
				      "round %d: FI_QUEUE_WORK: %d (%s)", round,
				      post[i].first_err,
				      fi_strerror(-post[i].first_err));

		tfinal = fi_cntr_read(T);
		ck_assert_uint_eq(tfinal, base_t + RC_NINC * RC_KINC);
		for (size_t q = 0; q < per_round; q++)
			due += rq[q].work.threshold <= tfinal;
		/* exactly the due ones fired: none lost to the race, none
		 * early, none twice */
		ck_assert_msg(
			tu_cntr_reach(Rc, base_r + due, TU_WAIT_MS) &&
				tt_cntr_stays(Rc, base_r + due, TU_QUIET_MS),
			"round %d, T = %llu: %llu requests fired, %llu "
			"were due (of %zu queued)",
			round, (unsigned long long)tfinal,
			(unsigned long long)(fi_cntr_read(Rc) - base_r),
			(unsigned long long)due, per_round);
		tt_stats(w.d.domain, &st);
		ck_assert_uint_eq(st.trig_queued - st0.trig_queued, per_round);
		ck_assert_uint_eq(st.trig_pending, per_round - due);

		/* past every threshold: all fire */
		ck_assert_int_eq(fi_cntr_add(T, 1000), 0);
		base_t = tfinal + 1000;
		base_r += per_round;
		ck_assert_msg(tu_cntr_reach(Rc, base_r, TU_WAIT_MS) &&
				      tt_cntr_stays(Rc, base_r, TU_QUIET_MS),
			      "round %d: %llu of %zu requests fired", round,
			      (unsigned long long)(fi_cntr_read(Rc) -
						   (base_r - per_round)),
			      per_round);
		tt_stats(w.d.domain, &st);
		ck_assert_uint_eq(st.trig_pending, 0);
		ck_assert_uint_eq(st.trig_fired - st0.trig_fired, per_round);
	}
	tt_close(T);
	tt_close(Rc);
	tu_world_close(&w);
	free(reqs);
}
END_TEST

/* ------------------------------------------------------------------ */

/*
 * 100,000 requests with random thresholds 1..100000 on one counter, then
 * T moves one at a time: Rc never runs ahead of the number of thresholds
 * <= T, and catches up with it (checked every CHECK_EVERY steps).  The
 * trigger queue costs O(log n) heap levels per insertion and removal.
 */
START_TEST(trig_100k)
{
	enum { NQ = 100000, CHECK_EVERY = 997 };
	struct tt_cop *reqs = calloc(NQ, sizeof(*reqs));
	uint32_t *atv = calloc(NQ + 1, sizeof(*atv)); /* # thresholds <= v */
	struct fi_info *hints = fi_allocinfo();
	struct fi_tnbc_engine_stats st0, st1, st2;
	struct fid_cntr *T, *Rc;
	struct tu_dom d;
	unsigned seed = 4242;
	uint64_t t0, t1, t2, steps, ops;
	unsigned lg = 64 - __builtin_clzll(NQ); /* ceil(log2(NQ)) = 17 */

	ck_assert(reqs && atv && hints);
	hints->caps = TT_CAPS;
	tu_dom_open(&d, hints);
	fi_freeinfo(hints);
	T = tt_cntr(d.domain);
	Rc = tt_cntr(d.domain);

	tt_stats(d.domain, &st0);
	t0 = tu_now_ms();
	for (int i = 0; i < NQ; i++) {
		uint64_t thr = 1 + (uint64_t)rand_r(&seed) % NQ;

		atv[thr]++;
		tt_cop_init(&reqs[i], T, thr, FI_OP_CNTR_ADD, Rc, 1);
		tt_queue(d.domain, &reqs[i].work);
	}
	for (int v = 1; v <= NQ; v++)
		atv[v] += atv[v - 1];
	t1 = tu_now_ms();
	tt_stats(d.domain, &st1);
	ck_assert_uint_eq(st1.trig_queued - st0.trig_queued, NQ);
	ck_assert_uint_eq(st1.trig_pending - st0.trig_pending, NQ);
	ck_assert_uint_eq(fi_cntr_read(Rc), 0);

	for (uint64_t v = 1; v <= NQ; v++) {
		uint64_t r;

		ck_assert_int_eq(fi_cntr_add(T, 1), 0);
		r = fi_cntr_read(Rc);
		ck_assert_msg(r <= atv[v],
			      "T = %llu: %llu fired, only %u thresholds <= T",
			      (unsigned long long)v, (unsigned long long)r,
			      atv[v]);
		if (v % CHECK_EVERY == 0 || v == NQ)
			ck_assert_msg(tu_cntr_reach(Rc, atv[v], TU_WAIT_MS) &&
					      fi_cntr_read(Rc) == atv[v],
				      "T = %llu: %llu fired, expected %u",
				      (unsigned long long)v,
				      (unsigned long long)fi_cntr_read(Rc),
				      atv[v]);
	}
	t2 = tu_now_ms();
	ck_assert(tt_cntr_stays(Rc, NQ, TU_QUIET_MS));
	tt_stats(d.domain, &st2);
	ck_assert_uint_eq(st2.trig_pending, st0.trig_pending);
	ck_assert_uint_eq(st2.trig_fired - st0.trig_fired, NQ);

	steps = st2.trig_heap_steps - st0.trig_heap_steps;
	ops = (st2.trig_queued - st0.trig_queued) +
	      (st2.trig_fired - st0.trig_fired);
	fprintf(stderr,
		"trig_100k: queue %llu ms, fire %llu ms, %llu heap steps "
		"for %llu operations (%.2f each, bound %u)\n",
		(unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1),
		(unsigned long long)steps, (unsigned long long)ops,
		(double)steps / (double)ops, 2 * lg + 4);
	ck_assert_msg(steps > 0, "trig_heap_steps is not counted");
	ck_assert_msg(steps <= (uint64_t)(2 * lg + 4) * ops,
		      "%llu heap steps for %llu queue operations: more than "
		      "%u per operation",
		      (unsigned long long)steps, (unsigned long long)ops,
		      2 * lg + 4);

	tt_close(T);
	tt_close(Rc);
	tu_dom_close(&d);
	free(reqs);
	free(atv);
}
END_TEST

/* ------------------------------------------------------------------ */

START_TEST(trig_cancel_flush)
{
	enum { MLEN = 16 };
	struct tu_world w;
	struct fid_cntr *T, *T1, *T2, *Rc, *R2, *R3, *C, *C2;
	struct tt_cop c1, c2, c3, f1, f2, p1, p2;
	struct tt_mop s1, fs1, fs2, fr1, ps1, ps2;
	char sbuf[MLEN] = "deferred", rb[MLEN], rb2[MLEN];
	struct fi_tnbc_engine_stats st0, st;
	struct fi_deferred_work by_cntr;
	struct fi_triggered_context ftc;
	struct fi_cq_tagged_entry e;
	int rctx[2];
	void *got[2];

	tt_world_open(&w, 2, false);
	T = tt_cntr(w.d.domain);
	T1 = tt_cntr(w.d.domain);
	T2 = tt_cntr(w.d.domain);
	Rc = tt_cntr(w.d.domain);
	R2 = tt_cntr(w.d.domain);
	R3 = tt_cntr(w.d.domain);
	C = tt_cntr(w.d.domain);
	C2 = tt_cntr(w.d.domain);
	/* a receive for any stray send; must stay unmatched */
	tt_trecv(&w, R, rb, MLEN, 0, ~0ULL, &rctx[0]);

	/* cancel a queued counter request: it never fires */
	tt_stats(w.d.domain, &st0);
	tt_cop_init(&c1, T, 5, FI_OP_CNTR_ADD, Rc, 1);
	tt_queue(w.d.domain, &c1.work);
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, st0.trig_pending + 1);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_CANCEL_WORK, &c1.work), 0);
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, st0.trig_pending);
	ck_assert_uint_eq(st.trig_canceled, st0.trig_canceled + 1);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_CANCEL_WORK, &c1.work),
			 -FI_ENOENT);
	ck_assert_int_eq(fi_cntr_add(T, 10), 0);
	ck_assert_msg(tt_cntr_stays(Rc, 0, TU_QUIET_MS),
		      "a canceled request fired");

	/* a fired request, and one never queued: -FI_ENOENT */
	tt_cop_init(&c2, T, 12, FI_OP_CNTR_ADD, Rc, 1);
	tt_queue(w.d.domain, &c2.work);
	ck_assert(tt_cntr_stays(Rc, 0, TU_QUIET_MS));
	ck_assert_int_eq(fi_cntr_add(T, 2), 0);
	tt_cntr_expect(Rc, 1, "threshold-12 request");
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_CANCEL_WORK, &c2.work),
			 -FI_ENOENT);
	tt_cop_init(&c3, T, 100, FI_OP_CNTR_ADD, Rc, 1);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_CANCEL_WORK, &c3.work),
			 -FI_ENOENT);

	/* cancel a queued send: FI_ECANCELED on the tx CQ with
	 * &work->context, +1 error on its completion counter */
	tt_mop_init(&s1, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 1, 0, T, 100, C);
	tt_queue(w.d.domain, &s1.work);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_CANCEL_WORK, &s1.work), 0);
	got[0] = tt_expect_canceled(w.ep[A].tx_cq);
	ck_assert_ptr_eq(got[0], &s1.work.context);
	ck_assert_msg(tt_cntr_err_reach(C, 1, TU_WAIT_MS),
		      "completion counter of a canceled send: err %llu",
		      (unsigned long long)fi_cntr_readerr(C));
	ck_assert_uint_eq(fi_cntr_read(C), 0);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_CANCEL_WORK, &s1.work),
			 -FI_ENOENT);
	ck_assert_int_eq(fi_cntr_add(T, 200), 0);
	ck_assert_msg(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS),
		      "a canceled send arrived");
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));

	/* FI_FLUSH_WORK, NULL: everything goes; endpoint ops report
	 * FI_ECANCELED, counter ops are dropped */
	tt_stats(w.d.domain, &st0);
	tt_cop_init(&f1, T1, 3, FI_OP_CNTR_ADD, R2, 1);
	tt_cop_init(&f2, T2, 3, FI_OP_CNTR_SET, R2, 50);
	tt_mop_init(&fs1, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 2, 0, T1, 2, C2);
	tt_mop_init(&fs2, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 3, FI_COMPLETION,
		    T2, 1, C2);
	tt_mop_init(&fr1, &w, FI_OP_TRECV, R, -1, rb2, MLEN, 4, 0, T2, 4, C2);
	tt_queue(w.d.domain, &f1.work);
	tt_queue(w.d.domain, &fs1.work);
	tt_queue(w.d.domain, &f2.work);
	tt_queue(w.d.domain, &fs2.work);
	tt_queue(w.d.domain, &fr1.work);
	/* and an FI_TRIGGER send: flushed with the deferred work */
	tt_trig_ctx(&ftc, T1, 5);
	ck_assert_int_eq(tt_tsendmsg(&w, A, R, sbuf, MLEN, 8, &ftc, FI_TRIGGER),
			 0);
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, st0.trig_pending + 6);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_FLUSH_WORK, NULL), 0);
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, 0);
	ck_assert_uint_eq(st.trig_canceled, st0.trig_canceled + 6);
	{
		void *want[3] = {&fs1.work.context, &fs2.work.context, &ftc};
		int seen = 0;

		for (int i = 0; i < 3; i++) {
			void *ctx = tt_expect_canceled(w.ep[A].tx_cq);
			int j = 0;

			while (j < 3 && want[j] != ctx)
				j++;
			ck_assert_msg(j < 3 && !(seen & (1 << j)),
				      "flushed send %d: context %p is not one "
				      "of %p %p %p (or came twice)",
				      i, ctx, want[0], want[1], want[2]);
			seen |= 1 << j;
		}
	}
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	got[0] = tt_expect_canceled(w.ep[R].rx_cq);
	ck_assert_ptr_eq(got[0], &fr1.work.context);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	ck_assert_msg(tt_cntr_err_reach(C2, 3, TU_WAIT_MS),
		      "completion counter of 3 flushed ops: err %llu",
		      (unsigned long long)fi_cntr_readerr(C2));
	ck_assert_uint_eq(fi_cntr_read(C2), 0);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_CANCEL_WORK, &fs1.work),
			 -FI_ENOENT);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_CANCEL_WORK, &f1.work),
			 -FI_ENOENT);
	ck_assert_int_eq(fi_cntr_add(T1, 10), 0);
	ck_assert_int_eq(fi_cntr_add(T2, 10), 0);
	ck_assert_msg(tt_cntr_stays(R2, 0, TU_QUIET_MS),
		      "a flushed counter request fired");
	ck_assert_msg(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS),
		      "a flushed send arrived");
	ck_assert_msg(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS),
		      "a flushed send completed");
	ck_assert_uint_eq(fi_cntr_readerr(C2), 3);
	/* nothing queued: still fine */
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_FLUSH_WORK, NULL), 0);

	/* FI_FLUSH_WORK of one counter only (T1 is at 10 and T2 at 10) */
	tt_stats(w.d.domain, &st0);
	tt_cop_init(&p1, T1, 20, FI_OP_CNTR_ADD, R3, 1);
	tt_cop_init(&p2, T2, 20, FI_OP_CNTR_ADD, R3, 10);
	tt_mop_init(&ps1, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 5, 0, T1, 15,
		    NULL);
	tt_mop_init(&ps2, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 6, 0, T2, 15,
		    NULL);
	tt_queue(w.d.domain, &ps1.work);
	tt_queue(w.d.domain, &p1.work);
	tt_queue(w.d.domain, &ps2.work);
	tt_queue(w.d.domain, &p2.work);
	memset(&by_cntr, 0, sizeof(by_cntr));
	by_cntr.triggering_cntr = T1;
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_FLUSH_WORK, &by_cntr), 0);
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, st0.trig_pending + 2);
	ck_assert_uint_eq(st.trig_canceled, st0.trig_canceled + 2);
	got[0] = tt_expect_canceled(w.ep[A].tx_cq);
	ck_assert_ptr_eq(got[0], &ps1.work.context);
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	ck_assert_int_eq(fi_cntr_add(T1, 100), 0);
	ck_assert_msg(tt_cntr_stays(R3, 0, TU_QUIET_MS),
		      "a request flushed with its counter fired");
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	/* T2's survive */
	ck_assert_int_eq(fi_cntr_add(T2, 100), 0);
	tt_cntr_expect(R3, 10, "request on the counter not flushed");
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &rctx[0]);
	ck_assert_uint_eq(e.tag, 6);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, 0);

	tt_close(T);
	tt_close(T1);
	tt_close(T2);
	tt_close(Rc);
	tt_close(R2);
	tt_close(R3);
	tt_close(C);
	tt_close(C2);
	tu_world_close(&w);
}
END_TEST

/* ------------------------------------------------------------------ */

/* Semantics item 5: bad input is refused with -FI_EINVAL and queues
 * nothing. */
START_TEST(trig_bad_input)
{
	enum { MLEN = 16 };
	struct tu_world w, w2;
	struct fid_cntr *T, *Rc, *C, *T2x, *R2x;
	struct tt_cop c;
	struct tt_mop m;
	struct fi_triggered_context tctx;
	char sbuf[MLEN] = "bad", rb[MLEN];
	struct fi_tnbc_engine_stats st0, st;
	int rctx;
	int n = 0;

	tt_world_open(&w, 2, false);
	tt_world_open(&w2, 1, false);
	T = tt_cntr(w.d.domain);
	Rc = tt_cntr(w.d.domain);
	C = tt_cntr(w.d.domain);
	T2x = tt_cntr(w2.d.domain);
	R2x = tt_cntr(w2.d.domain);
	tt_trecv(&w, R, rb, MLEN, 0, ~0ULL, &rctx);
	tt_stats(w.d.domain, &st0);

#define TT_BAD(call, what)                                                     \
	do {                                                                   \
		int _r = (int)(call);                                          \
		ck_assert_msg(_r == -FI_EINVAL,                                \
			      "%s: got %d (%s), expected "                     \
			      "-FI_EINVAL",                                    \
			      what, _r, fi_strerror(-_r));                     \
		n++;                                                           \
	} while (0)

	/* deferred work */
	tt_cop_init(&c, NULL, 1, FI_OP_CNTR_ADD, Rc, 1);
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &c.work),
	       "CNTR_ADD, triggering_cntr NULL");
	tt_cop_init(&c, T, 1, FI_OP_CNTR_ADD, Rc, 1);
	c.work.completion_cntr = C;
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &c.work),
	       "CNTR_ADD with a completion_cntr");
	tt_cop_init(&c, T, 1, FI_OP_CNTR_SET, Rc, 1);
	c.work.completion_cntr = C;
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &c.work),
	       "CNTR_SET with a completion_cntr");
	tt_cop_init(&c, T2x, 1, FI_OP_CNTR_ADD, Rc, 1);
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &c.work),
	       "triggering_cntr of another domain");
	tt_cop_init(&c, T, 1, FI_OP_CNTR_ADD, R2x, 1);
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &c.work),
	       "op.cntr of another domain");
	tt_mop_init(&m, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 1, 0, NULL, 1, NULL);
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &m.work),
	       "TSEND, triggering_cntr NULL");
	tt_mop_init(&m, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 1, 0, T, 1, R2x);
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &m.work),
	       "TSEND, completion_cntr of another domain");
	tt_mop_init(&m, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 1, 0, T2x, 1, NULL);
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &m.work),
	       "TSEND, triggering_cntr of another domain");
	tt_mop_init(&m, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 1, 0, T, 1, NULL);
	m.op.tagged.ep = w2.ep[0].ep;
	m.op.tagged.msg.addr = w2.addr[0];
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &m.work),
	       "TSEND on an endpoint of another domain");
	tt_mop_init(&m, &w, FI_OP_SEND, A, R, sbuf, MLEN, 0, 0, T, 1, NULL);
	m.op.msg.ep = w2.ep[0].ep;
	m.op.msg.msg.addr = w2.addr[0];
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &m.work),
	       "SEND on an endpoint of another domain");
	tt_mop_init(&m, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 1, FI_INJECT, T, 1,
		    NULL);
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &m.work), "TSEND, FI_INJECT");
	tt_mop_init(&m, &w, FI_OP_SEND, A, R, sbuf, MLEN, 0, FI_INJECT, T, 1,
		    NULL);
	TT_BAD(tt_ctl(w.d.domain, FI_QUEUE_WORK, &m.work), "SEND, FI_INJECT");

	/* FI_TRIGGER posts */
	TT_BAD(tt_tsendmsg(&w, A, R, sbuf, MLEN, 1, NULL, FI_TRIGGER),
	       "fi_tsendmsg FI_TRIGGER, NULL context");
	TT_BAD(tt_trecvmsg(&w, R, rb, MLEN, 1, 0, NULL, FI_TRIGGER),
	       "fi_trecvmsg FI_TRIGGER, NULL context");
	tt_trig_ctx(&tctx, T, 1);
	tctx.event_type = FI_TRIGGER_XPU;
	TT_BAD(tt_tsendmsg(&w, A, R, sbuf, MLEN, 1, &tctx, FI_TRIGGER),
	       "fi_tsendmsg FI_TRIGGER, event_type FI_TRIGGER_XPU");
	tt_trig_ctx(&tctx, T, 1);
	tctx.event_type = (enum fi_trigger_event)77;
	TT_BAD(tt_trecvmsg(&w, R, rb, MLEN, 1, 0, &tctx, FI_TRIGGER),
	       "fi_trecvmsg FI_TRIGGER, event_type 77");
	tt_trig_ctx(&tctx, T, 1);
	TT_BAD(tt_tsendmsg(&w, A, R, sbuf, MLEN, 1, &tctx,
			   FI_TRIGGER | FI_INJECT),
	       "fi_tsendmsg FI_TRIGGER | FI_INJECT");
	tt_trig_ctx(&tctx, T2x, 1);
	TT_BAD(tt_tsendmsg(&w, A, R, sbuf, MLEN, 1, &tctx, FI_TRIGGER),
	       "fi_tsendmsg FI_TRIGGER, counter of another domain");
	tt_trig_ctx(&tctx, NULL, 1);
	TT_BAD(tt_tsendmsg(&w, A, R, sbuf, MLEN, 1, &tctx, FI_TRIGGER),
	       "fi_tsendmsg FI_TRIGGER, threshold.cntr NULL");
#undef TT_BAD

	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, st0.trig_pending);
	ck_assert_uint_eq(st.trig_queued, st0.trig_queued);
	/* nothing was queued: nothing fires */
	ck_assert_int_eq(fi_cntr_add(T, 10), 0);
	ck_assert_int_eq(fi_cntr_add(T2x, 10), 0);
	ck_assert_msg(tt_cntr_stays(Rc, 0, TU_QUIET_MS),
		      "a refused counter request fired");
	ck_assert(tt_cntr_stays(R2x, 0, TU_QUIET_MS));
	ck_assert_uint_eq(fi_cntr_read(C), 0);
	ck_assert_uint_eq(fi_cntr_readerr(C), 0);
	ck_assert_msg(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS),
		      "a refused send arrived");
	ck_assert_msg(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS),
		      "a refused send completed");
	ck_assert(tu_cq_quiet(w2.ep[0].tx_cq, TU_QUIET_MS));
	ck_assert(tu_cq_quiet(w2.ep[0].rx_cq, TU_QUIET_MS));
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, st0.trig_pending);
	ck_assert_uint_eq(st.trig_fired, st0.trig_fired);
	tt_stats(w2.d.domain, &st);
	ck_assert_uint_eq(st.trig_queued, 0);
	ck_assert_uint_eq(st.trig_pending, 0);
	ck_assert_int_gt(n, 0);

	/* the posted receive is still there */
	ck_assert_int_eq(fi_cancel(&w.ep[R].ep->fid, &rctx), 0);
	ck_assert_ptr_eq(tt_expect_canceled(w.ep[R].rx_cq), &rctx);

	tt_close(T);
	tt_close(Rc);
	tt_close(C);
	tt_close(T2x);
	tt_close(R2x);
	tu_world_close(&w2);
	tu_world_close(&w);
}
END_TEST

/* Semantics item 6: an object with queued work referencing it cannot be
 * closed until the work is canceled or flushed. */
START_TEST(trig_close_busy)
{
	enum { MLEN = 16 };
	struct tu_world w;
	struct fid_cntr *T, *T2, *Rc, *C;
	struct tt_cop c;
	struct tt_mop s, r;
	struct fi_triggered_context tctx;
	char sbuf[MLEN] = "busy", rb[MLEN];
	struct fi_tnbc_engine_stats st;
	struct fi_cq_tagged_entry e;
	int ctx[2];

	tt_world_open(&w, 3, false);
	T = tt_cntr(w.d.domain);
	T2 = tt_cntr(w.d.domain);
	Rc = tt_cntr(w.d.domain);
	C = tt_cntr(w.d.domain);

	/* a counter request: its triggering and target counters are busy */
	tt_cop_init(&c, T, 5, FI_OP_CNTR_ADD, Rc, 1);
	tt_queue(w.d.domain, &c.work);
	ck_assert_int_eq(fi_close(&T->fid), -FI_EBUSY);
	ck_assert_int_eq(fi_close(&Rc->fid), -FI_EBUSY);
	/* still usable after the refusal */
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	ck_assert_uint_eq(fi_cntr_read(T), 1);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_CANCEL_WORK, &c.work), 0);
	tt_close(T);
	tt_close(Rc);
	T = tt_cntr(w.d.domain);

	/* a deferred send: its endpoint and completion counter are busy */
	tt_mop_init(&s, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 1, 0, T, 5, C);
	tt_queue(w.d.domain, &s.work);
	ck_assert_int_eq(fi_close(&C->fid), -FI_EBUSY);
	ck_assert_int_eq(fi_close(&T->fid), -FI_EBUSY);
	ck_assert_int_eq(fi_close(&w.ep[A].ep->fid), -FI_EBUSY);
	ck_assert_int_eq(fi_close(&w.d.domain->fid), -FI_EBUSY);
	/* a deferred receive: its endpoint is busy */
	tt_mop_init(&r, &w, FI_OP_TRECV, R, -1, rb, MLEN, 1, 0, T2, 5, NULL);
	tt_queue(w.d.domain, &r.work);
	ck_assert_int_eq(fi_close(&w.ep[R].ep->fid), -FI_EBUSY);
	ck_assert_int_eq(fi_close(&T2->fid), -FI_EBUSY);
	/* an FI_TRIGGER send on ep[2] */
	tt_trig_ctx(&tctx, T2, 7);
	ck_assert_int_eq(
		tt_tsendmsg(&w, 2, R, sbuf, MLEN, 1, &tctx, FI_TRIGGER), 0);
	ck_assert_int_eq(fi_close(&w.ep[2].ep->fid), -FI_EBUSY);

	/* the endpoints still work after the refusal */
	ck_assert_int_eq(
		fi_tsend(w.ep[A].ep, sbuf, MLEN, NULL, w.addr[2], 9, &ctx[0]),
		0);
	tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[0]);
	tt_trecv(&w, 2, rb, MLEN, 9, 0, &ctx[1]);
	tu_cq_expect(w.ep[2].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[1]);

	ck_assert_int_eq(fi_cancel(&w.ep[2].ep->fid, &tctx), 0);
	ck_assert_ptr_eq(tt_expect_canceled(w.ep[2].tx_cq), &tctx);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_FLUSH_WORK, NULL), 0);
	ck_assert_ptr_eq(tt_expect_canceled(w.ep[A].tx_cq), &s.work.context);
	ck_assert_ptr_eq(tt_expect_canceled(w.ep[R].rx_cq), &r.work.context);
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, 0);
	tt_close(T);
	tt_close(T2);
	tt_close(C);
	tu_world_close(&w); /* the endpoints close now */
}
END_TEST

/* ------------------------------------------------------------------ */

/*
 * FI_TRIGGER on fi_tsendmsg / fi_trecvmsg (and fi_sendmsg / fi_recvmsg):
 * nothing happens before the threshold; the completion carries the
 * triggered context and counts on the endpoint's counter like any other.
 * _i: 0 eager, 1 rendezvous.
 */
START_TEST(trig_flag_msg)
{
	const size_t len = _i ? 64 * 1024 : 64;
	struct tu_world w;
	struct fid_cntr *T;
	struct fi_triggered_context ts, tr, tc, tcr, tm, tmr, tn;
	uint8_t *sbuf = malloc(len), *rbuf = calloc(1, len);
	uint8_t *rbuf2 = calloc(1, len);
	struct fi_cq_tagged_entry e;
	struct fi_tnbc_engine_stats st0, st;
	int rctx;

	ck_assert(sbuf && rbuf && rbuf2);
	tu_fill(sbuf, len, 31 + _i);
	tt_world_open(&w, 2, true);
	T = tt_cntr(w.d.domain);
	tt_stats(w.d.domain, &st0);

	tt_trig_ctx(&tr, T, 2);
	tt_trig_ctx(&ts, T, 1);
	ck_assert_int_eq(
		tt_trecvmsg(&w, R, rbuf, len, 0x77, 0, &tr, FI_TRIGGER), 0);
	ck_assert_int_eq(
		tt_tsendmsg(&w, A, R, sbuf, len, 0x77, &ts, FI_TRIGGER), 0);
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, st0.trig_pending + 2);
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	ck_assert_uint_eq(fi_cntr_read(w.ep[A].tx_cntr), 0);

	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	if (!_i) {
		/* eager: the send completes, the message waits unexpected */
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &ts);
		tt_cntr_expect(w.ep[A].tx_cntr, 1, "tx counter");
	}
	ck_assert_msg(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS),
		      "a receive triggered at 2 completed at 1");
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &tr);
	ck_assert_uint_eq(e.len, len);
	ck_assert_uint_eq(e.tag, 0x77);
	ck_assert_uint_eq(e.flags & (FI_RECV | FI_TAGGED), FI_RECV | FI_TAGGED);
	ck_assert_uint_eq(tu_check(rbuf, len, 31 + _i, 0), (size_t)-1);
	tt_cntr_expect(w.ep[R].rx_cntr, 1, "rx counter");
	if (_i) {
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &ts);
		tt_cntr_expect(w.ep[A].tx_cntr, 1, "tx counter");
	}

	/* fi_cancel of a still-queued FI_TRIGGER op */
	tt_trig_ctx(&tc, T, 100);
	tt_trig_ctx(&tcr, T, 100);
	ck_assert_int_eq(
		tt_tsendmsg(&w, A, R, sbuf, len, 0x88, &tc, FI_TRIGGER), 0);
	ck_assert_int_eq(
		tt_trecvmsg(&w, R, rbuf2, len, 0x88, 0, &tcr, FI_TRIGGER), 0);
	ck_assert_int_eq(fi_cancel(&w.ep[A].ep->fid, &tc), 0);
	ck_assert_ptr_eq(tt_expect_canceled(w.ep[A].tx_cq), &tc);
	ck_assert_int_eq(fi_cancel(&w.ep[R].ep->fid, &tcr), 0);
	ck_assert_ptr_eq(tt_expect_canceled(w.ep[R].rx_cq), &tcr);
	tt_trecv(&w, R, rbuf2, len, 0, ~0ULL, &rctx);
	ck_assert_int_eq(fi_cntr_add(T, 200), 0);
	ck_assert_msg(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS),
		      "a canceled FI_TRIGGER send arrived");
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));

	/* threshold already met: fires at once (into the posted receive) */
	tt_trig_ctx(&tn, T, 5);
	memset(rbuf2, 0, len);
	ck_assert_int_eq(
		tt_tsendmsg(&w, A, R, sbuf, len, 0x99, &tn, FI_TRIGGER), 0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &rctx);
	ck_assert_uint_eq(e.tag, 0x99);
	ck_assert_uint_eq(tu_check(rbuf2, len, 31 + _i, 0), (size_t)-1);
	tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &tn);

	/* untagged: fi_sendmsg / fi_recvmsg */
	{
		uint64_t t = tt_total(T);
		struct iovec siov = {.iov_base = sbuf, .iov_len = len};
		struct iovec riov = {.iov_base = rbuf2, .iov_len = len};
		struct fi_msg sm = {.msg_iov = &siov,
				    .iov_count = 1,
				    .addr = w.addr[R],
				    .context = &tm};
		struct fi_msg rm = {.msg_iov = &riov,
				    .iov_count = 1,
				    .addr = FI_ADDR_UNSPEC,
				    .context = &tmr};

		memset(rbuf2, 0, len);
		tt_trig_ctx(&tm, T, t + 1);
		tt_trig_ctx(&tmr, T, t + 1);
		ck_assert_int_eq(fi_recvmsg(w.ep[R].ep, &rm, FI_TRIGGER), 0);
		ck_assert_int_eq(fi_sendmsg(w.ep[A].ep, &sm, FI_TRIGGER), 0);
		ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
		ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
		ck_assert_int_eq(fi_cntr_add(T, 1), 0);
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &tmr);
		ck_assert_uint_eq(e.flags & (FI_RECV | FI_MSG),
				  FI_RECV | FI_MSG);
		ck_assert_uint_eq(e.len, len);
		ck_assert_uint_eq(tu_check(rbuf2, len, 31 + _i, 0), (size_t)-1);
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &tm);
	}
	tt_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.trig_pending, st0.trig_pending);
	tt_close(T);
	tu_world_close(&w);
	free(sbuf);
	free(rbuf);
	free(rbuf2);
}
END_TEST

/*
 * Deferred message ops: no CQ entry and no endpoint counter unless
 * FI_COMPLETION; the completion counter counts them; FI_COMPLETION
 * reports &work->context.
 */
/*
 * A request is checked when it is posted and started, unchecked, when
 * it fires; only its address can have changed in between.  A triggered
 * send whose address left the AV meanwhile completes with an error
 * (its CQ entry and its endpoint counter), and the endpoint goes on.
 */
START_TEST(trig_addr_gone)
{
	struct tu_world w;
	struct fid_cntr *T;
	struct fi_triggered_context ts;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	uint8_t buf[64], rbuf[64];
	fi_addr_t gone;
	int rctx;

	tu_fill(buf, sizeof(buf), 7);
	tt_world_open(&w, 3, true);
	T = tt_cntr(w.d.domain);
	gone = w.addr[2];
	tt_trig_ctx(&ts, T, 1);
	ck_assert_int_eq(
		tt_tsendmsg(&w, A, 2, buf, sizeof(buf), 0x5, &ts, FI_TRIGGER),
		0);
	ck_assert_int_eq(fi_av_remove(w.av, &gone, 1, 0), 0);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tu_cq_expect_err(w.ep[A].tx_cq, &err);
	ck_assert_ptr_eq(err.op_context, &ts);
	ck_assert_int_eq(err.err, FI_EADDRNOTAVAIL);
	ck_assert_uint_eq(err.flags & (FI_SEND | FI_TAGGED),
			  FI_SEND | FI_TAGGED);
	ck_assert(tt_cntr_err_reach(w.ep[A].tx_cntr, 1, TU_WAIT_MS));
	/* the endpoint still sends to the peers that are left */
	ck_assert_int_eq(fi_tsend(w.ep[A].ep, buf, sizeof(buf), NULL, w.addr[R],
				  0x6, NULL),
			 0);
	tt_trecv(&w, R, rbuf, sizeof(rbuf), 0x6, 0, &rctx);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &rctx);
	ck_assert_uint_eq(tu_check(rbuf, sizeof(rbuf), 7, 0), (size_t)-1);
	tt_close(T);
	tu_world_close(&w);
}
END_TEST

START_TEST(trig_deferred_msg)
{
	enum { MLEN = 256 };
	struct tu_world w;
	struct fid_cntr *T, *C;
	struct tt_mop tr, ts, mr, ms;
	uint8_t sbuf[MLEN], rbuf[MLEN], rbuf2[MLEN];
	struct fi_cq_tagged_entry e;
	uint64_t tx0;

	tu_fill(sbuf, MLEN, 5);
	memset(rbuf, 0, MLEN);
	memset(rbuf2, 0, MLEN);
	tt_world_open(&w, 2, true);
	T = tt_cntr(w.d.domain);
	C = tt_cntr(w.d.domain);

	/* TRECV (plain) at 1, TSEND (FI_COMPLETION) at 2 */
	tt_mop_init(&tr, &w, FI_OP_TRECV, R, -1, rbuf, MLEN, 0x55, 0, T, 1, C);
	tt_mop_init(&ts, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 0x55, FI_COMPLETION,
		    T, 2, C);
	tt_queue(w.d.domain, &ts.work);
	tt_queue(w.d.domain, &tr.work);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	ck_assert(tt_cntr_stays(C, 0, TU_QUIET_MS));
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tt_cntr_expect(C, 2, "completion counter");
	ck_assert_uint_eq(tu_check(rbuf, MLEN, 5, 0), (size_t)-1);
	tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ts.work.context);
	ck_assert_msg(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS),
		      "a deferred receive without FI_COMPLETION wrote a CQ "
		      "entry");
	ck_assert_msg(fi_cntr_read(w.ep[R].rx_cntr) == 0,
		      "a deferred receive bumped the endpoint's rx counter");

	/* RECV (FI_COMPLETION) at 3, SEND (plain) at 3 */
	tx0 = fi_cntr_read(w.ep[A].tx_cntr);
	tt_mop_init(&mr, &w, FI_OP_RECV, R, -1, rbuf2, MLEN, 0, FI_COMPLETION,
		    T, 3, C);
	tt_mop_init(&ms, &w, FI_OP_SEND, A, R, sbuf, MLEN, 0, 0, T, 3, C);
	tt_queue(w.d.domain, &mr.work);
	tt_queue(w.d.domain, &ms.work);
	ck_assert(tt_cntr_stays(C, 2, TU_QUIET_MS));
	ck_assert_int_eq(fi_cntr_adderr(T, 1), 0);
	tt_cntr_expect(C, 4, "completion counter");
	ck_assert_uint_eq(tu_check(rbuf2, MLEN, 5, 0), (size_t)-1);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &mr.work.context);
	ck_assert_uint_eq(e.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
	ck_assert_uint_eq(e.len, MLEN);
	ck_assert_msg(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS),
		      "a deferred send without FI_COMPLETION wrote a CQ "
		      "entry");
	ck_assert_msg(fi_cntr_read(w.ep[A].tx_cntr) == tx0,
		      "a deferred send bumped the endpoint's tx counter");
	ck_assert_uint_eq(fi_cntr_readerr(C), 0);
	tt_close(T);
	tt_close(C);
	tu_world_close(&w);
}
END_TEST

/*
 * The one-sided op types as deferred work (FI_OP_WRITE, READ, ATOMIC,
 * FETCH_ATOMIC, COMPARE_ATOMIC) and FI_TRIGGER on fi_writemsg: each
 * starts at its threshold and counts on its completion counter.  Target
 * addresses are offsets into the registration (mr_mode 0).
 */
START_TEST(trig_deferred_rma)
{
	enum { NT = 8 };
	struct fi_info *hints = fi_allocinfo();
	struct tu_world_opts o = {0};
	struct tu_world w;
	struct fid_cntr *T, *C;
	struct fid_mr *mr = NULL;
	uint64_t tgt[NT] = {0}, src[4], lbuf[4] = {0};
	uint64_t one_src = 5, f_src = 10, f_res = 99, c_src = 77, c_cmp = 0;
	uint64_t c_res = 99, t_src = 0x7777;
	uint64_t key;
	struct fi_deferred_work wk[6];
	struct fi_op_rma orma[3];
	struct fi_rma_iov bad_rwi;
	struct fi_cq_err_entry err;
	struct fi_op_atomic oat;
	struct fi_op_fetch_atomic ofa;
	struct fi_op_compare_atomic oca;
	struct iovec wiov, riov, tiov;
	struct fi_rma_iov rwi, rri, rti;
	struct fi_ioc aioc, faioc, fares, caioc, cares, cacmp;
	struct fi_rma_ioc raioc, rfaioc, rcaioc;
	struct fi_triggered_context tctx;
	struct fi_msg_rma tm;
	struct fi_cq_tagged_entry e;
	int ret;

	ck_assert_ptr_nonnull(hints);
	hints->caps = TT_CAPS | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE |
		      FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->ep_attr->type = FI_EP_RDM;
	o.hints = hints;
	tu_world_open(&w, 2, &o);
	fi_freeinfo(hints);
	T = tt_cntr(w.d.domain);
	C = tt_cntr(w.d.domain);
	ret = fi_mr_reg(w.d.domain, tgt, sizeof(tgt),
			FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0xbeef, 0, &mr,
			NULL);
	ck_assert_msg(ret == 0, "fi_mr_reg: %d (%s)", ret, fi_strerror(-ret));
	key = fi_mr_key(mr);
	for (int i = 0; i < 4; i++)
		src[i] = 0x1000 + i;
	memset(wk, 0, sizeof(wk));

	/* WRITE src -> tgt[0..3] at 1 */
	wiov = (struct iovec){.iov_base = src, .iov_len = sizeof(src)};
	rwi = (struct fi_rma_iov){.addr = 0, .len = sizeof(src), .key = key};
	orma[0] = (struct fi_op_rma){.ep = w.ep[A].ep,
				     .msg = {.msg_iov = &wiov,
					     .iov_count = 1,
					     .addr = w.addr[R],
					     .rma_iov = &rwi,
					     .rma_iov_count = 1,
					     .context = &tt_not_this_ctx}};
	wk[0].op_type = FI_OP_WRITE;
	wk[0].op.rma = &orma[0];
	/* READ tgt[0..3] -> lbuf at 2 */
	riov = (struct iovec){.iov_base = lbuf, .iov_len = sizeof(lbuf)};
	rri = (struct fi_rma_iov){.addr = 0, .len = sizeof(lbuf), .key = key};
	orma[1] = (struct fi_op_rma){.ep = w.ep[A].ep,
				     .msg = {.msg_iov = &riov,
					     .iov_count = 1,
					     .addr = w.addr[R],
					     .rma_iov = &rri,
					     .rma_iov_count = 1,
					     .context = &tt_not_this_ctx}};
	wk[1].op_type = FI_OP_READ;
	wk[1].op.rma = &orma[1];
	/* ATOMIC tgt[4] += 5 at 3 */
	aioc = (struct fi_ioc){.addr = &one_src, .count = 1};
	raioc = (struct fi_rma_ioc){.addr = 4 * 8, .count = 1, .key = key};
	oat = (struct fi_op_atomic){.ep = w.ep[A].ep,
				    .msg = {.msg_iov = &aioc,
					    .iov_count = 1,
					    .addr = w.addr[R],
					    .rma_iov = &raioc,
					    .rma_iov_count = 1,
					    .datatype = FI_UINT64,
					    .op = FI_SUM,
					    .context = &tt_not_this_ctx}};
	wk[2].op_type = FI_OP_ATOMIC;
	wk[2].op.atomic = &oat;
	/* FETCH_ATOMIC tgt[4] += 10, fetching 5, at 4 */
	faioc = (struct fi_ioc){.addr = &f_src, .count = 1};
	fares = (struct fi_ioc){.addr = &f_res, .count = 1};
	rfaioc = (struct fi_rma_ioc){.addr = 4 * 8, .count = 1, .key = key};
	ofa = (struct fi_op_fetch_atomic){
		.ep = w.ep[A].ep,
		.msg = {.msg_iov = &faioc,
			.iov_count = 1,
			.addr = w.addr[R],
			.rma_iov = &rfaioc,
			.rma_iov_count = 1,
			.datatype = FI_UINT64,
			.op = FI_SUM,
			.context = &tt_not_this_ctx},
		.fetch = {.msg_iov = &fares, .iov_count = 1}};
	wk[3].op_type = FI_OP_FETCH_ATOMIC;
	wk[3].op.fetch_atomic = &ofa;
	/* COMPARE_ATOMIC tgt[5]: 0 -> 77, fetching 0, at 5 */
	caioc = (struct fi_ioc){.addr = &c_src, .count = 1};
	cares = (struct fi_ioc){.addr = &c_res, .count = 1};
	cacmp = (struct fi_ioc){.addr = &c_cmp, .count = 1};
	rcaioc = (struct fi_rma_ioc){.addr = 5 * 8, .count = 1, .key = key};
	oca = (struct fi_op_compare_atomic){
		.ep = w.ep[A].ep,
		.msg = {.msg_iov = &caioc,
			.iov_count = 1,
			.addr = w.addr[R],
			.rma_iov = &rcaioc,
			.rma_iov_count = 1,
			.datatype = FI_UINT64,
			.op = FI_CSWAP,
			.context = &tt_not_this_ctx},
		.fetch = {.msg_iov = &cares, .iov_count = 1},
		.compare = {.msg_iov = &cacmp, .iov_count = 1}};
	wk[4].op_type = FI_OP_COMPARE_ATOMIC;
	wk[4].op.compare_atomic = &oca;

	for (int i = 4; i >= 0; i--) {
		wk[i].threshold = i + 1;
		wk[i].triggering_cntr = T;
		wk[i].completion_cntr = C;
		tt_queue(w.d.domain, &wk[i]);
	}
	ck_assert(tt_cntr_stays(C, 0, TU_QUIET_MS));
	ck_assert_uint_eq(tgt[0], 0);

	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tt_cntr_expect(C, 1, "deferred WRITE");
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(tgt[i], 0x1000 + i);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tt_cntr_expect(C, 2, "deferred READ");
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(lbuf[i], 0x1000 + i);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tt_cntr_expect(C, 3, "deferred ATOMIC");
	ck_assert_uint_eq(tgt[4], 5);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tt_cntr_expect(C, 4, "deferred FETCH_ATOMIC");
	ck_assert_uint_eq(tgt[4], 15);
	ck_assert_uint_eq(f_res, 5);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tt_cntr_expect(C, 5, "deferred COMPARE_ATOMIC");
	ck_assert_uint_eq(tgt[5], 77);
	ck_assert_uint_eq(c_res, 0);
	ck_assert_uint_eq(fi_cntr_readerr(C), 0);
	ck_assert_msg(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS),
		      "deferred one-sided ops wrote a CQ entry");

	/* FI_TRIGGER on fi_writemsg: tgt[6] at 7 */
	tiov = (struct iovec){.iov_base = &t_src, .iov_len = 8};
	rti = (struct fi_rma_iov){.addr = 6 * 8, .len = 8, .key = key};
	tt_trig_ctx(&tctx, T, 7);
	tm = (struct fi_msg_rma){.msg_iov = &tiov,
				 .iov_count = 1,
				 .addr = w.addr[R],
				 .rma_iov = &rti,
				 .rma_iov_count = 1,
				 .context = &tctx};
	ret = (int)fi_writemsg(w.ep[A].ep, &tm, FI_TRIGGER);
	ck_assert_msg(ret == 0, "fi_writemsg FI_TRIGGER: %d (%s)", ret,
		      fi_strerror(-ret));
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	ck_assert_uint_eq(tgt[6], 0);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	ck_assert_uint_eq(tgt[6], 0);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &tctx);
	ck_assert_uint_eq(e.flags & (FI_RMA | FI_WRITE), FI_RMA | FI_WRITE);
	ck_assert_uint_eq(tgt[6], 0x7777);

	/* a deferred WRITE that fails at the target (unknown key) counts
	 * as an error on its completion counter; an error entry, if the
	 * endpoint gets one, reports &work->context */
	memset(&wk[5], 0, sizeof(wk[5]));
	bad_rwi = (struct fi_rma_iov){.addr = 0, .len = 8, .key = key + 1000};
	orma[2] = orma[0];
	orma[2].msg.rma_iov = &bad_rwi;
	wiov.iov_len = 8;
	wk[5].op_type = FI_OP_WRITE;
	wk[5].op.rma = &orma[2];
	wk[5].threshold = 8;
	wk[5].triggering_cntr = T;
	wk[5].completion_cntr = C;
	tt_queue(w.d.domain, &wk[5]);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	ck_assert_msg(tt_cntr_err_reach(C, 1, TU_WAIT_MS),
		      "failed deferred WRITE: completion counter err %llu",
		      (unsigned long long)fi_cntr_readerr(C));
	ck_assert_uint_eq(fi_cntr_read(C), 5);
	if (tu_cq_wait(w.ep[A].tx_cq, &e, NULL, &err, TU_QUIET_MS * 5) ==
	    -FI_EAVAIL)
		ck_assert_ptr_eq(err.op_context, &wk[5].context);
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));

	ck_assert_int_eq(fi_close(&mr->fid), 0);
	tt_close(T);
	tt_close(C);
	tu_world_close(&w);
}
END_TEST

/* ------------------------------------------------------------------ */

struct tt_bump {
	struct fid_cntr *c;
	int ret;
};

static void *tt_bump_thread(void *p)
{
	struct tt_bump *b = p;

	b->ret = fi_cntr_add(b->c, 1);
	return NULL;
}

/* Compares memory the engine may be writing (see TU_WATCH_BEGIN). */
static bool tt_mem_same(const uint8_t *buf, const uint8_t *want, size_t len)
{
	bool same;

	TU_WATCH_BEGIN();
	same = !memcmp((const void *)buf, want, len);
	TU_WATCH_END();
	return same;
}

/* Polls raw memory, with no provider call, until it matches. */
static bool tt_mem_arrives(const uint8_t *buf, const uint8_t *want, size_t len,
			   unsigned timeout_ms)
{
	uint64_t deadline = tu_now_ms() + timeout_ms;

	for (;;) {
		if (tt_mem_same(buf, want, len))
			return true;
		if (tu_now_ms() >= deadline)
			return false;
		usleep(1000);
	}
}

/*
 * The engine moves triggered work with no application thread in the
 * provider.  _i = 0: another thread bumps the triggering counter, then
 * nobody calls in; the deferred send's data must land in the receive
 * buffer.  _i = 1: the triggering counter is R's rx counter: A's send to R
 * completes R's receive, which fires R's deferred reply to A.
 */
START_TEST(trig_engine_fires)
{
	enum { MLEN = 512 };
	struct tu_world w;
	struct fid_cntr *T, *C;
	struct tt_mop m;
	uint8_t sbuf[MLEN], rbuf[MLEN], ping[MLEN], pbuf[MLEN];
	struct fi_tnbc_engine_stats st0, st;
	struct fi_cq_tagged_entry e;
	uint64_t deadline;
	bool by_engine;
	int rctx, pctx, sctx;

	tu_fill(sbuf, MLEN, 91);
	memset(rbuf, 0, MLEN);
	tu_fill(ping, MLEN, 92);
	memset(pbuf, 0, MLEN);
	tt_world_open(&w, 2, true);
	T = tt_cntr(w.d.domain);
	C = tt_cntr(w.d.domain);

	if (_i == 0) {
		struct tt_bump b = {.c = T};
		pthread_t t;

		tt_trecv(&w, R, rbuf, MLEN, 0x21, 0, &rctx);
		tt_mop_init(&m, &w, FI_OP_TSEND, A, R, sbuf, MLEN, 0x21, 0, T,
			    1, C);
		tt_queue(w.d.domain, &m.work);
		tt_stats(w.d.domain, &st0);
		ck_assert_int_eq(pthread_create(&t, NULL, tt_bump_thread, &b),
				 0);
		pthread_join(t, NULL);
		ck_assert_int_eq(b.ret, 0);
		/* no provider call until the data is there */
		ck_assert_msg(tt_mem_arrives(rbuf, sbuf, MLEN, TU_WAIT_MS),
			      "the deferred send's data did not arrive "
			      "without application progress");
	} else {
		/* R: receive A's ping, and reply to A once it has */
		tt_trecv(&w, A, rbuf, MLEN, 0x31, 0, &rctx);
		tt_trecv(&w, R, pbuf, MLEN, 0x30, 0, &pctx);
		tt_mop_init(&m, &w, FI_OP_TSEND, R, A, sbuf, MLEN, 0x31, 0,
			    w.ep[R].rx_cntr, 1, C);
		tt_queue(w.d.domain, &m.work);
		tt_stats(w.d.domain, &st0);
		ck_assert_int_eq(fi_tsend(w.ep[A].ep, ping, MLEN, NULL,
					  w.addr[R], 0x30, &sctx),
				 0);
		/* no provider call until the reply is there */
		ck_assert_msg(tt_mem_arrives(rbuf, sbuf, MLEN, TU_WAIT_MS),
			      "the reply triggered by a receive did not "
			      "arrive without application progress");
		ck_assert(tt_mem_same(pbuf, ping, MLEN));
	}
	/* the engine bumps its statistics just after the work: a moment */
	deadline = tu_now_ms() + 1000;
	do {
		tt_stats(w.d.domain, &st);
		by_engine =
			st.trig_fired_by_engine > st0.trig_fired_by_engine ||
			st.engine_pkts > st0.engine_pkts;
		if (_i)
			by_engine = st.trig_fired_by_engine >
				    st0.trig_fired_by_engine;
	} while (!by_engine && tu_now_ms() < deadline);
	ck_assert_msg(by_engine,
		      "engine stats: trig_fired_by_engine %llu -> %llu, "
		      "engine_pkts %llu -> %llu",
		      (unsigned long long)st0.trig_fired_by_engine,
		      (unsigned long long)st.trig_fired_by_engine,
		      (unsigned long long)st0.engine_pkts,
		      (unsigned long long)st.engine_pkts);
	ck_assert_uint_eq(st.trig_fired - st0.trig_fired, 1);
	ck_assert_uint_eq(st.trig_pending, 0);
	tt_cntr_expect(C, 1, "completion counter");

	if (_i == 0) {
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &rctx);
		ck_assert_uint_eq(e.tag, 0x21);
	} else {
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &pctx);
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &sctx);
		tu_cq_expect(w.ep[A].rx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &rctx);
		ck_assert_uint_eq(e.tag, 0x31);
	}
	tt_close(T);
	tt_close(C);
	tu_world_close(&w);
}
END_TEST

/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* The extension's compute steps (FI_TNBC_OP_REDUCE, FI_TNBC_OP_COPY)   */

static void tt_reduce_init(struct fi_deferred_work *w,
			   struct fi_tnbc_op_reduce *r, void *dst,
			   const void *src, size_t count, enum fi_op op,
			   enum fi_datatype dt, struct fid_cntr *trig,
			   uint64_t thr, struct fid_cntr *comp)
{
	memset(w, 0, sizeof(*w));
	*r = (struct fi_tnbc_op_reduce){.size = sizeof(*r),
					.dst = dst,
					.src = src,
					.count = count,
					.op = op,
					.datatype = dt};
	w->triggering_cntr = trig;
	w->threshold = thr;
	w->completion_cntr = comp;
	fi_tnbc_work_reduce(w, r);
}

static int tt_slow_step(void *arg)
{
	tu_sleep_ms(*(unsigned *)arg);
	return 0;
}

/* An application thread that released triggered work runs it itself, in
 * the call that released it (here fi_cntr_add, and a step that takes
 * 300 ms), and meanwhile the engine naps: that thread drives progress.
 * An engine that took the work still queued for its own kept passing,
 * without a pause, on a core the application needed: it used nearly all
 * of those 300 ms. */
START_TEST(trig_app_runs_long)
{
	unsigned ms = 300;
	struct tu_world w;
	struct tnbc_domain *dom;
	struct fid_cntr *T;
	struct tnbc_trig_req r = {.op = TNBC_TRIG_FN, .threshold = 1};
	struct timespec a, b;
	clockid_t clk;
	uint64_t end, used_ms;

	tt_world_open(&w, 1, false);
	dom = tu_tnbc_domain(&w.d);
	T = tt_cntr(w.d.domain);
	r.cntr = tnbc_cntr_fid(&T->fid);
	r.step.fn = tt_slow_step;
	r.step.arg = &ms;
	ck_assert_int_eq(tnbc_trig_submit(dom, &r), 0);
	for (end = tu_now_ms() + TU_WAIT_MS;
	     !atomic_load(&dom->engine.self) && tu_now_ms() < end;)
		tu_sleep_ms(1);
	ck_assert_int_eq(
		pthread_getcpuclockid((pthread_t)atomic_load(&dom->engine.self),
				      &clk),
		0);
	/* no calls for a while: the application looks away */
	tu_sleep_ms(50);
	ck_assert_int_eq(clock_gettime(clk, &a), 0);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	ck_assert_int_eq(clock_gettime(clk, &b), 0);
	used_ms = (uint64_t)((b.tv_sec - a.tv_sec) * 1000 +
			     (b.tv_nsec - a.tv_nsec) / 1000000);
	ck_assert_msg(used_ms < 100,
		      "the engine used %" PRIu64 " ms of CPU while the "
		      "application ran a %u ms step",
		      used_ms, ms);
	ck_assert_int_eq(fi_close(&T->fid), 0);
	tu_world_close(&w);
}
END_TEST

/* Who ran a step, and that it ran. */
struct tt_who {
	pthread_t by;
	atomic_bool ran;
};

static int tt_who_step(void *arg)
{
	struct tt_who *who = arg;

	who->by = pthread_self();
	atomic_store(&who->ran, true);
	return 0;
}

/*
 * The domain's defer (fi_ext_tnbc.h): work a thread makes ready while it
 * defers is the engine's, woken for it, and the releasing call returns
 * without having run it; without defer the same call runs it itself
 * (loop 1, the contrast).  The engine runs it with no further call of
 * this thread, watched for seconds.  Handoff with nothing waiting says
 * so; both reject a NULL domain.
 */
START_TEST(trig_defer)
{
	bool defer = _i == 0;
	struct tu_world w;
	struct tnbc_domain *dom;
	struct fid_cntr *T;
	struct fi_tnbc_ops_domain *ops = NULL;
	struct tt_who who = {0};
	struct tnbc_trig_req r = {.op = TNBC_TRIG_FN, .threshold = 1};
	uint64_t end;

	tt_world_open(&w, 1, false);
	dom = tu_tnbc_domain(&w.d);
	ck_assert_int_eq(fi_open_ops(&w.d.domain->fid, FI_TNBC_DOMAIN_OPS_1, 0,
				     (void **)&ops, NULL),
			 0);
	ck_assert_uint_ge(ops->size, sizeof(*ops));
	ck_assert_int_eq(ops->defer(NULL, 1), -FI_EINVAL);
	ck_assert_int_eq(ops->handoff(NULL), -FI_EINVAL);
	T = tt_cntr(w.d.domain);
	r.cntr = tnbc_cntr_fid(&T->fid);
	r.step.fn = tt_who_step;
	r.step.arg = &who;
	ck_assert_int_eq(tnbc_trig_submit(dom, &r), 0);
	for (end = tu_now_ms() + TU_WAIT_MS;
	     !atomic_load(&dom->engine.self) && tu_now_ms() < end;)
		tu_sleep_ms(1);
	ck_assert(atomic_load(&dom->engine.self));
	ck_assert_int_eq(ops->defer(w.d.domain, defer), 0);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	ck_assert_int_eq(ops->defer(w.d.domain, 0), 0);
	if (!defer) {
		ck_assert_msg(atomic_load(&who.ran),
			      "without defer the releasing call runs the step");
		ck_assert(pthread_equal(who.by, pthread_self()));
	} else {
		TU_WATCH_BEGIN();
		for (end = tu_now_ms() + TU_WAIT_MS;
		     !atomic_load(&who.ran) && tu_now_ms() < end;)
			tu_sleep_ms(1);
		TU_WATCH_END();
		ck_assert_msg(atomic_load(&who.ran),
			      "the deferred step did not run without calls");
		ck_assert(pthread_equal(
			who.by, (pthread_t)atomic_load(&dom->engine.self)));
	}
	ck_assert_int_eq(ops->handoff(w.d.domain), 0);
	ck_assert_int_eq(fi_close(&T->fid), 0);
	tu_world_close(&w);
}
END_TEST

/*
 * A reduce step folds its source into its destination once its counter
 * reaches the threshold, and not before; a copy step chained on its
 * completion counter then copies the result.  Three op/datatype pairs,
 * each checked against the same fold done here.
 */
START_TEST(trig_reduce_steps)
{
	struct tu_world w;
	struct fid_cntr *T, *C1, *C2;
	struct fi_deferred_work wr[3], wc;
	struct fi_tnbc_op_reduce r[3];
	struct fi_tnbc_op_copy c;
	double dd[6], ds[6], dw[6], copy[6];
	int32_t id[5] = {-7, 3, 100, -100, 0}, is[5] = {-8, 4, 99, -99, 0};
	int32_t iw[5];
	uint64_t ud[3] = {0xff00ff00ff00ff00ull, 1, 0};
	uint64_t us[3] = {0x0ff00ff00ff00ff0ull, 3, ~0ull}, uw[3];

	for (int i = 0; i < 6; i++) {
		dd[i] = 1.5 * i - 2;
		ds[i] = 0.25 * i * i;
		dw[i] = dd[i] + ds[i];
		copy[i] = -1;
	}
	for (int i = 0; i < 5; i++)
		iw[i] = id[i] > is[i] ? id[i] : is[i];
	for (int i = 0; i < 3; i++)
		uw[i] = ud[i] ^ us[i];
	tt_world_open(&w, 1, false);
	T = tt_cntr(w.d.domain);
	C1 = tt_cntr(w.d.domain);
	C2 = tt_cntr(w.d.domain);
	tt_reduce_init(&wr[0], &r[0], dd, ds, 6, FI_SUM, FI_DOUBLE, T, 2, C1);
	tt_reduce_init(&wr[1], &r[1], id, is, 5, FI_MAX, FI_INT32, T, 2, C1);
	tt_reduce_init(&wr[2], &r[2], ud, us, 3, FI_BXOR, FI_UINT64, T, 2, C1);
	for (int i = 0; i < 3; i++)
		tt_queue(w.d.domain, &wr[i]);
	memset(&wc, 0, sizeof(wc));
	c = (struct fi_tnbc_op_copy){
		.size = sizeof(c), .dst = copy, .src = dd, .len = sizeof(dd)};
	wc.triggering_cntr = C1;
	wc.threshold = 3;
	wc.completion_cntr = C2;
	fi_tnbc_work_copy(&wc, &c);
	tt_queue(w.d.domain, &wc);

	/* the thread that changes a counter starts what it releases */
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	ck_assert_uint_eq(fi_cntr_read(C1), 0);
	ck_assert_msg(dd[1] == -0.5 && id[0] == -7 && ud[2] == 0,
		      "a step ran below its threshold");
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tt_cntr_expect(C1, 3, "reduce completions");
	tt_cntr_expect(C2, 1, "copy completion");
	ck_assert(tt_mem_same((uint8_t *)dd, (uint8_t *)dw, sizeof(dd)));
	ck_assert(tt_mem_same((uint8_t *)id, (uint8_t *)iw, sizeof(id)));
	ck_assert(tt_mem_same((uint8_t *)ud, (uint8_t *)uw, sizeof(ud)));
	ck_assert(tt_mem_same((uint8_t *)copy, (uint8_t *)dw, sizeof(dw)));
	ck_assert_uint_eq(fi_cntr_readerr(C1) + fi_cntr_readerr(C2), 0);
	tt_close(T);
	tt_close(C1);
	tt_close(C2);
	tu_world_close(&w);
}
END_TEST

/* Each bad step is refused when queued, and the domain goes on. */
START_TEST(trig_reduce_bad_input)
{
	struct tu_world w;
	struct fid_cntr *T, *C;
	struct fi_deferred_work wk;
	struct fi_tnbc_op_reduce r;
	struct fi_tnbc_op_copy c;
	double d[2] = {1, 2}, s[2] = {3, 4};
	const struct {
		enum fi_op op;
		enum fi_datatype dt;
		void *dst;
		size_t count;
		size_t size;
	} bad[] = {
		{FI_BAND, FI_DOUBLE, d, 2, sizeof(r)}, /* no such pair */
		{FI_CSWAP, FI_INT32, d, 2, sizeof(r)}, /* not a reduction */
		{FI_ATOMIC_WRITE, FI_INT32, d, 2, sizeof(r)},
		{FI_SUM, (enum fi_datatype)999, d, 2, sizeof(r)},
		{FI_SUM, FI_DOUBLE, NULL, 2, sizeof(r)},
		{FI_SUM, FI_DOUBLE, d, SIZE_MAX / 4, sizeof(r)}, /* overflows */
		{FI_SUM, FI_DOUBLE, d, 2, sizeof(r) - 1}, /* a wrong size */
	};

	tt_world_open(&w, 1, false);
	T = tt_cntr(w.d.domain);
	C = tt_cntr(w.d.domain);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tt_reduce_init(&wk, &r, bad[i].dst, s, bad[i].count, bad[i].op,
			       bad[i].dt, T, 1, C);
		r.size = bad[i].size;
		ck_assert_msg(tt_ctl(w.d.domain, FI_QUEUE_WORK, &wk) ==
				      -FI_EINVAL,
			      "bad reduce %zu accepted", i);
	}
	memset(&wk, 0, sizeof(wk));
	c = (struct fi_tnbc_op_copy){
		.size = sizeof(c), .dst = d, .src = NULL, .len = 8};
	wk.triggering_cntr = T;
	wk.threshold = 1;
	fi_tnbc_work_copy(&wk, &c);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_QUEUE_WORK, &wk), -FI_EINVAL);
	fi_tnbc_work_copy(&wk, NULL);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_QUEUE_WORK, &wk), -FI_EINVAL);
	wk.op_type = (enum fi_op_type)(FI_PROV_SPECIFIC_TNBC | 3);
	ck_assert_int_eq(tt_ctl(w.d.domain, FI_QUEUE_WORK, &wk), -FI_ENOSYS);
	/* nothing was queued, and a good step still runs */
	tt_reduce_init(&wk, &r, d, s, 2, FI_SUM, FI_DOUBLE, T, 1, C);
	tt_queue(w.d.domain, &wk);
	ck_assert_int_eq(fi_cntr_add(T, 1), 0);
	tt_cntr_expect(C, 1, "the good step's completion");
	ck_assert(d[0] == 4 && d[1] == 6);
	tt_close(T);
	tt_close(C);
	tu_world_close(&w);
}
END_TEST

/*
 * A step triggered by a receive runs in the engine: the application
 * posts the receive and the step, and then watches memory only.
 */
START_TEST(trig_reduce_by_engine)
{
	enum { N = 6 };
	struct tu_world w;
	struct fid_cntr *C;
	struct fi_deferred_work wk;
	struct fi_tnbc_op_reduce r;
	struct fi_tnbc_engine_stats st0, st;
	double acc[N], in[N], send[N], want[N];
	int rctx, sctx;
	uint64_t deadline;

	for (int i = 0; i < N; i++) {
		acc[i] = i;
		send[i] = 100.0 + i;
		want[i] = acc[i] + send[i];
		in[i] = 0;
	}
	tt_world_open(&w, 2, true);
	C = tt_cntr(w.d.domain);
	tt_trecv(&w, R, in, sizeof(in), 0x41, 0, &rctx);
	tt_reduce_init(&wk, &r, acc, in, N, FI_SUM, FI_DOUBLE, w.ep[R].rx_cntr,
		       1, C);
	tt_queue(w.d.domain, &wk);
	tt_stats(w.d.domain, &st0);
	ck_assert_int_eq(fi_tsend(w.ep[A].ep, send, sizeof(send), NULL,
				  w.addr[R], 0x41, &sctx),
			 0);
	/* no provider call until the sum is there */
	ck_assert_msg(tt_mem_arrives((uint8_t *)acc, (uint8_t *)want,
				     sizeof(acc), TU_WAIT_MS),
		      "the reduce step did not run without application "
		      "progress");
	deadline = tu_now_ms() + 1000;
	do
		tt_stats(w.d.domain, &st);
	while (st.trig_fired_by_engine == st0.trig_fired_by_engine &&
	       tu_now_ms() < deadline);
	ck_assert_uint_gt(st.trig_fired_by_engine, st0.trig_fired_by_engine);
	tt_cntr_expect(C, 1, "completion counter");
	tt_close(C);
	tu_world_close(&w);
}
END_TEST

Suite *tu_trigger_suite(void)
{
	Suite *s = suite_create("trigger");
	TCase *tc = tcase_create("trigger");
	TCase *tl = tcase_create("trigger_load");

	tcase_set_timeout(tc, TU_TCASE_TIMEOUT);
	tcase_add_test(tc, trig_caps);
	tcase_add_test(tc, trig_threshold_order);
	tcase_add_test(tc, trig_error_counts);
	tcase_add_test(tc, trig_cntr_set_jump);
	tcase_add_test(tc, trig_chain);
	tcase_add_test(tc, trig_cancel_flush);
	tcase_add_test(tc, trig_bad_input);
	tcase_add_test(tc, trig_close_busy);
	tcase_add_loop_test(tc, trig_flag_msg, 0, 2);
	tcase_add_test(tc, trig_addr_gone);
	tcase_add_test(tc, trig_deferred_msg);
	tcase_add_test(tc, trig_deferred_rma);
	tcase_add_loop_test(tc, trig_engine_fires, 0, 2);
	tcase_add_test(tc, trig_app_runs_long);
	tcase_add_loop_test(tc, trig_defer, 0, 2);
	tcase_add_test(tc, trig_reduce_steps);
	tcase_add_test(tc, trig_reduce_bad_input);
	tcase_add_test(tc, trig_reduce_by_engine);
	suite_add_tcase(s, tc);

	tcase_set_timeout(tl, TU_TCASE_TIMEOUT);
	tcase_add_test(tl, trig_order_concurrent);
	tcase_add_test(tl, trig_post_race);
	tcase_add_test(tl, trig_100k);
	suite_add_tcase(s, tl);
	return s;
}
