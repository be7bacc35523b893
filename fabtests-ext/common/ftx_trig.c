/* SPDX-License-Identifier: BSD-2-Clause */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/ftx_trig.h"

#include <rdma/fi_ext_tnbc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OBJS 128
/* how long expected completions may take to show up */
#define COMP_WAIT_NS 3000000000ull
/* a counter wait that sees no change for this long gives up */
#define STALL_NS 10000000000ull

static struct fid_cntr *cntrs[MAX_OBJS];
static int ncntrs;
static struct fid_mr *mrs[MAX_OBJS];
static int nmrs;
static uint64_t next_key = 1;

const char *
ftx_op_name(enum fi_op_type type)
{
	static const char *const names[] = {
		"RECV",		  "SEND",     "TRECV",	  "TSEND",
		"READ",		  "WRITE",    "ATOMIC",	  "FETCH_ATOMIC",
		"COMPARE_ATOMIC", "CNTR_SET", "CNTR_ADD",
	};

	if ((size_t) type < sizeof(names) / sizeof(names[0]))
		return names[type];
	return "?";
}

static void
fill_mem(struct ftx_opmem *m, const struct ftx_op *op)
{
	memset(m, 0, sizeof(*m));
	m->iov.iov_base = op->buf;
	m->iov.iov_len = op->len;
	m->desc = op->desc;
	m->rma_iov.addr = op->raddr;
	m->rma_iov.len = op->len;
	m->rma_iov.key = op->rkey;
	m->ioc.addr = op->buf;
	m->ioc.count = op->count;
	m->res_ioc.addr = op->res;
	m->res_ioc.count = op->count;
	m->cmp_ioc.addr = op->cmp;
	m->cmp_ioc.count = op->count;
	m->rma_ioc.addr = op->raddr;
	m->rma_ioc.count = op->count;
	m->rma_ioc.key = op->rkey;
	m->res_desc = op->res_desc;
	m->cmp_desc = op->cmp_desc;
}

static void
fill_msg(struct fi_msg *msg, struct ftx_opmem *m, const struct ftx_op *op,
	 void *context)
{
	memset(msg, 0, sizeof(*msg));
	msg->msg_iov = &m->iov;
	msg->desc = &m->desc;
	msg->iov_count = 1;
	msg->addr = op->addr;
	msg->context = context;
	msg->data = op->data;
}

static void
fill_tagged(struct fi_msg_tagged *msg, struct ftx_opmem *m,
	    const struct ftx_op *op, void *context)
{
	memset(msg, 0, sizeof(*msg));
	msg->msg_iov = &m->iov;
	msg->desc = &m->desc;
	msg->iov_count = 1;
	msg->addr = op->addr;
	msg->tag = op->tag;
	msg->ignore = op->ignore;
	msg->context = context;
	msg->data = op->data;
}

static void
fill_rma(struct fi_msg_rma *msg, struct ftx_opmem *m, const struct ftx_op *op,
	 void *context)
{
	memset(msg, 0, sizeof(*msg));
	msg->msg_iov = &m->iov;
	msg->desc = &m->desc;
	msg->iov_count = 1;
	msg->addr = op->addr;
	msg->rma_iov = &m->rma_iov;
	msg->rma_iov_count = 1;
	msg->context = context;
	msg->data = op->data;
}

static void
fill_atomic(struct fi_msg_atomic *msg, struct ftx_opmem *m,
	    const struct ftx_op *op, void *context)
{
	memset(msg, 0, sizeof(*msg));
	msg->msg_iov = &m->ioc;
	msg->desc = &m->desc;
	msg->iov_count = 1;
	msg->addr = op->addr;
	msg->rma_iov = &m->rma_ioc;
	msg->rma_iov_count = 1;
	msg->datatype = op->dt;
	msg->op = op->aop;
	msg->context = context;
	msg->data = op->data;
}

ssize_t
ftx_trig_post(struct ftx_trig *t, const struct ftx_op *op,
	      struct fid_cntr *cntr, uint64_t thr)
{
	uint64_t flags = op->flags | FI_TRIGGER;

	memset(t, 0, sizeof(*t));
	t->tc.event_type = FI_TRIGGER_THRESHOLD;
	t->tc.trigger.threshold.cntr = cntr;
	t->tc.trigger.threshold.threshold = (size_t) thr;
	fill_mem(&t->m, op);
	switch (op->type) {
	case FI_OP_SEND:
	case FI_OP_RECV:
		fill_msg(&t->u.msg, &t->m, op, &t->tc);
		return op->type == FI_OP_SEND ?
			       fi_sendmsg(op->ep, &t->u.msg, flags) :
			       fi_recvmsg(op->ep, &t->u.msg, flags);
	case FI_OP_TSEND:
	case FI_OP_TRECV:
		fill_tagged(&t->u.tagged, &t->m, op, &t->tc);
		return op->type == FI_OP_TSEND ?
			       fi_tsendmsg(op->ep, &t->u.tagged, flags) :
			       fi_trecvmsg(op->ep, &t->u.tagged, flags);
	case FI_OP_READ:
	case FI_OP_WRITE:
		fill_rma(&t->u.rma, &t->m, op, &t->tc);
		return op->type == FI_OP_READ ?
			       fi_readmsg(op->ep, &t->u.rma, flags) :
			       fi_writemsg(op->ep, &t->u.rma, flags);
	case FI_OP_ATOMIC:
		fill_atomic(&t->u.atomic, &t->m, op, &t->tc);
		return fi_atomicmsg(op->ep, &t->u.atomic, flags);
	case FI_OP_FETCH_ATOMIC:
		fill_atomic(&t->u.atomic, &t->m, op, &t->tc);
		return fi_fetch_atomicmsg(op->ep, &t->u.atomic, &t->m.res_ioc,
					  &t->m.res_desc, 1, flags);
	case FI_OP_COMPARE_ATOMIC:
		fill_atomic(&t->u.atomic, &t->m, op, &t->tc);
		return fi_compare_atomicmsg(op->ep, &t->u.atomic, &t->m.cmp_ioc,
					    &t->m.cmp_desc, 1, &t->m.res_ioc,
					    &t->m.res_desc, 1, flags);
	default:
		return -FI_EINVAL;
	}
}

void
ftx_dw_init(struct ftx_dw *d, const struct ftx_op *op, struct fid_cntr *trig,
	    uint64_t thr, struct fid_cntr *comp)
{
	void *c = &d->work.context;

	memset(d, 0, sizeof(*d));
	d->work.threshold = thr;
	d->work.triggering_cntr = trig;
	d->work.completion_cntr = comp;
	d->work.op_type = op->type;
	fill_mem(&d->m, op);
	switch (op->type) {
	case FI_OP_SEND:
	case FI_OP_RECV:
		d->op.msg.ep = op->ep;
		d->op.msg.flags = op->flags;
		fill_msg(&d->op.msg.msg, &d->m, op, c);
		d->work.op.msg = &d->op.msg;
		break;
	case FI_OP_TSEND:
	case FI_OP_TRECV:
		d->op.tagged.ep = op->ep;
		d->op.tagged.flags = op->flags;
		fill_tagged(&d->op.tagged.msg, &d->m, op, c);
		d->work.op.tagged = &d->op.tagged;
		break;
	case FI_OP_READ:
	case FI_OP_WRITE:
		d->op.rma.ep = op->ep;
		d->op.rma.flags = op->flags;
		fill_rma(&d->op.rma.msg, &d->m, op, c);
		d->work.op.rma = &d->op.rma;
		break;
	case FI_OP_ATOMIC:
		d->op.atomic.ep = op->ep;
		d->op.atomic.flags = op->flags;
		fill_atomic(&d->op.atomic.msg, &d->m, op, c);
		d->work.op.atomic = &d->op.atomic;
		break;
	case FI_OP_FETCH_ATOMIC:
		d->op.fetch.ep = op->ep;
		d->op.fetch.flags = op->flags;
		fill_atomic(&d->op.fetch.msg, &d->m, op, c);
		d->op.fetch.fetch.msg_iov = &d->m.res_ioc;
		d->op.fetch.fetch.desc = &d->m.res_desc;
		d->op.fetch.fetch.iov_count = 1;
		d->work.op.fetch_atomic = &d->op.fetch;
		break;
	case FI_OP_COMPARE_ATOMIC:
		d->op.compare.ep = op->ep;
		d->op.compare.flags = op->flags;
		fill_atomic(&d->op.compare.msg, &d->m, op, c);
		d->op.compare.fetch.msg_iov = &d->m.res_ioc;
		d->op.compare.fetch.desc = &d->m.res_desc;
		d->op.compare.fetch.iov_count = 1;
		d->op.compare.compare.msg_iov = &d->m.cmp_ioc;
		d->op.compare.compare.desc = &d->m.cmp_desc;
		d->op.compare.compare.iov_count = 1;
		d->work.op.compare_atomic = &d->op.compare;
		break;
	case FI_OP_CNTR_SET:
	case FI_OP_CNTR_ADD:
		d->op.cntr.cntr = op->cntr;
		d->op.cntr.value = op->value;
		d->work.op.cntr = &d->op.cntr;
		break;
	}
}

int
ftx_dw_queue(struct ftx_ctx *ctx, struct ftx_dw *d)
{
	return fi_control(&ctx->domain->fid, FI_QUEUE_WORK, &d->work);
}

int
ftx_dw_cancel(struct ftx_ctx *ctx, struct ftx_dw *d)
{
	return fi_control(&ctx->domain->fid, FI_CANCEL_WORK, &d->work);
}

void
ftx_dw_post(struct ftx_ctx *ctx, struct ftx_dw *d, const struct ftx_op *op,
	    struct fid_cntr *trig, uint64_t thr, struct fid_cntr *comp)
{
	int ret;

	ftx_dw_init(d, op, trig, thr, comp);
	while ((ret = ftx_dw_queue(ctx, d)) == -FI_EAGAIN)
		ftx_eagain(ctx, "fi_control(FI_QUEUE_WORK)");
	if (ret)
		ftx_fail("fi_control(FI_QUEUE_WORK, %s, threshold %llu): %s "
			 "(%d)",
			 ftx_op_name(op->type), (unsigned long long) thr,
			 fi_strerror(-ret), ret);
}

int
ftx_flush_work(struct ftx_ctx *ctx, struct fid_cntr *cntr)
{
	struct fi_deferred_work w;

	if (!cntr)
		return fi_control(&ctx->domain->fid, FI_FLUSH_WORK, NULL);
	memset(&w, 0, sizeof(w));
	w.triggering_cntr = cntr;
	return fi_control(&ctx->domain->fid, FI_FLUSH_WORK, &w);
}

/* ------------------------------------------------------------ counters */

struct fid_cntr *
ftx_cntr_new(struct ftx_ctx *ctx)
{
	struct fi_cntr_attr attr = {
		.events = FI_CNTR_EVENTS_COMP,
		.wait_obj = FI_WAIT_UNSPEC,
	};
	struct fid_cntr *c;

	if (ncntrs == MAX_OBJS)
		ftx_fail("too many counters");
	FTX_CHK(fi_cntr_open(ctx->domain, &attr, &c, NULL));
	cntrs[ncntrs++] = c;
	return c;
}

int
ftx_cntr_close(struct fid_cntr *c)
{
	int ret = fi_close(&c->fid), i;

	if (ret)
		return ret;
	for (i = 0; i < ncntrs; i++)
		if (cntrs[i] == c) {
			cntrs[i] = cntrs[--ncntrs];
			break;
		}
	return 0;
}

void
ftx_cntr_bind(struct ftx_ctx *ctx, struct fid_cntr *c, uint64_t flags)
{
	FTX_CHK(fi_ep_bind(ctx->ep, &c->fid, flags));
}

/* the benchmark's lenient mode: how long a refused close is retried */
#define BUSY_RETRY_NS 1000000000ull

static int
close_retry(struct fid *fid, bool lenient, const char *what)
{
	uint64_t end = ftx_now_ns() + BUSY_RETRY_NS;
	int ret, tries = 0;

	while ((ret = fi_close(fid)) == -FI_EBUSY && lenient &&
	       ftx_now_ns() < end) {
		tries++;
		ftx_sleep_ms(1);
	}
	if (tries && !ret)
		fprintf(stderr,
			"# fi_close(%s) was -FI_EBUSY although everything "
			"queued on it had completed; it succeeded after %d "
			"retries\n",
			what, tries);
	return ret;
}

static void
cleanup(bool lenient)
{
	int ret;

	while (nmrs) {
		ret = close_retry(&mrs[--nmrs]->fid, lenient, "mr");
		if (ret)
			ftx_fail("fi_close(mr): %s (%d)", fi_strerror(-ret),
				 ret);
	}
	while (ncntrs) {
		ret = close_retry(&cntrs[--ncntrs]->fid, lenient, "counter");
		if (ret)
			ftx_fail("fi_close(counter): %s (%d)",
				 fi_strerror(-ret), ret);
	}
}

void
ftx_trig_cleanup(struct ftx_ctx *ctx)
{
	(void) ctx;
	cleanup(false);
}

void
ftx_trig_cleanup_lenient(struct ftx_ctx *ctx)
{
	(void) ctx;
	cleanup(true);
}

uint64_t
ftx_cntr_total(struct fid_cntr *c)
{
	return fi_cntr_read(c) + fi_cntr_readerr(c);
}

/* tnbc's view of the trigger queues, for failure messages */
static const char *
stats_str(struct ftx_ctx *ctx, char *buf, size_t len)
{
	struct fi_tnbc_engine_stats st;

	if (!ftx_tnbc_stats(ctx, &st))
		return "";
	snprintf(buf, len,
		 " [tnbc: %llu queued, %llu fired (%llu by the engine), %llu "
		 "canceled, %llu pending]",
		 (unsigned long long) st.trig_queued,
		 (unsigned long long) st.trig_fired,
		 (unsigned long long) st.trig_fired_by_engine,
		 (unsigned long long) st.trig_canceled,
		 (unsigned long long) st.trig_pending);
	return buf;
}

static uint64_t
cntr_wait(struct ftx_ctx *ctx, struct fid_cntr *c, uint64_t want,
	  const char *what, bool progress)
{
	uint64_t err0 = fi_cntr_readerr(c), v, e, last = 0, since = 0, now;
	unsigned spins = 0;
	char sb[160];

	ftx_note("waiting for %s to reach %llu", what,
		 (unsigned long long) want);
	while ((v = fi_cntr_read(c)) < want) {
		e = fi_cntr_readerr(c);
		if (e != err0)
			ftx_fail("%s: error count went from %llu to %llu "
				 "while waiting for %llu (now %llu)",
				 what, (unsigned long long) err0,
				 (unsigned long long) e,
				 (unsigned long long) want,
				 (unsigned long long) v);
		if (progress)
			ftx_progress(ctx);
		now = ftx_now_ns();
		if (!since || v != last) {
			last = v;
			since = now;
		}
		if (ftx_expired(ctx) || now - since > STALL_NS)
			ftx_fail("%s: %s reads %llu (errors %llu) and has not "
				 "moved for %.1f s, expected %llu%s",
				 ftx_expired(ctx) ? "timeout" : "stalled", what,
				 (unsigned long long) v, (unsigned long long) e,
				 (double) (now - since) / 1e9,
				 (unsigned long long) want,
				 stats_str(ctx, sb, sizeof(sb)));
		ftx_relax(&spins);
	}
	return v;
}

uint64_t
ftx_cntr_wait(struct ftx_ctx *ctx, struct fid_cntr *c, uint64_t want,
	      const char *what)
{
	return cntr_wait(ctx, c, want, what, true);
}

uint64_t
ftx_cntr_wait_raw(struct ftx_ctx *ctx, struct fid_cntr *c, uint64_t want,
		  const char *what)
{
	return cntr_wait(ctx, c, want, what, false);
}

void
ftx_cntr_expect(struct fid_cntr *c, uint64_t val, uint64_t err,
		const char *what)
{
	uint64_t v = fi_cntr_read(c), e = fi_cntr_readerr(c);

	FTX_SOFT(v == val && e == err,
		 "%s: counter reads %llu (errors %llu), expected %llu "
		 "(errors %llu)",
		 what, (unsigned long long) v, (unsigned long long) e,
		 (unsigned long long) val, (unsigned long long) err);
}

/* ---------------------------------------------------------------- RMA */

struct fid_mr *
ftx_mr_reg(struct ftx_ctx *ctx, void *buf, size_t len, uint64_t access,
	   void **desc)
{
	struct fid_mr *mr;
	/* only used without FI_MR_PROV_KEY: unique within the group */
	uint64_t key = (uint64_t) ctx->rank * 1024 + next_key++;

	if (nmrs == MAX_OBJS)
		ftx_fail("too many memory registrations");
	FTX_CHK(fi_mr_reg(ctx->domain, buf, len, access, 0, key, 0, &mr, NULL));
	mrs[nmrs++] = mr;
	if (ctx->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		FTX_CHK(fi_mr_bind(mr, &ctx->ep->fid, 0));
		FTX_CHK(fi_mr_enable(mr));
	}
	if (desc)
		*desc = fi_mr_desc(mr);
	return mr;
}

void
ftx_mr_exchange(struct ftx_ctx *ctx, struct fid_mr *mr, void *buf,
		struct ftx_rma *peers)
{
	struct ftx_rma me;

	me.addr = (ctx->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ?
			  (uint64_t) (uintptr_t) buf :
			  0;
	me.key = fi_mr_key(mr);
	if (me.key == FI_KEY_NOTAVAIL)
		ftx_fail("fi_mr_key: raw keys (FI_MR_RAW) are not supported "
			 "by this test");
	ftx_allgather(ctx, &me, sizeof(me), peers);
}

/* -------------------------------------------------------- completions */

void
ftx_expect_no_comp(struct ftx_ctx *ctx, unsigned ms, const char *what)
{
	struct ftx_comp c;
	int w;

	ftx_drain_for(ctx, ms);
	for (w = 0; w < 2; w++)
		while (ftx_try_comp(ctx, (enum ftx_which) w, &c)) {
			ftx_print_comp(w == FTX_TX ? "tx" : "rx", &c);
			ftx_defer_fail("%s: unexpected %s completion (err "
				       "%d, context %p)",
				       what, w == FTX_TX ? "tx" : "rx", c.err,
				       c.op_context);
		}
}

void
ftx_expect_comp(struct ftx_ctx *ctx, enum ftx_which w, void *op_context,
		int err, const char *what)
{
	ftx_expect_comps(ctx, w, &op_context, 1, err, what);
}

void
ftx_expect_comps(struct ftx_ctx *ctx, enum ftx_which w,
		 void *const *op_contexts, size_t n, int err, const char *what)
{
	bool *seen = calloc(n ? n : 1, sizeof(*seen));
	struct ftx_comp c;
	size_t i, j;

	if (!seen)
		ftx_fail("out of memory");
	for (i = 0; i < n; i++) {
		/* the counters said they completed: do not wait long */
		uint64_t end = ftx_now_ns() + COMP_WAIT_NS;
		unsigned spins = 0;
		bool got;

		while (!(got = ftx_try_comp(ctx, w, &c))) {
			if (ftx_expired(ctx) || ftx_now_ns() > end)
				break;
			ftx_relax(&spins);
		}
		if (!got) {
			ftx_defer_fail("%s: only %zu of %zu expected %s "
				       "completions arrived",
				       what, i, n, w == FTX_TX ? "tx" : "rx");
			break;
		}
		for (j = 0; j < n; j++)
			if (!seen[j] && op_contexts[j] == c.op_context)
				break;
		if (j == n) {
			ftx_print_comp(w == FTX_TX ? "tx" : "rx", &c);
			ftx_defer_fail("%s: %s completion %zu of %zu has "
				       "context %p, which is none of the "
				       "expected ones (or a repeat)",
				       what, w == FTX_TX ? "tx" : "rx", i + 1,
				       n, c.op_context);
			continue;
		}
		seen[j] = true;
		if (c.err != err) {
			ftx_print_comp(w == FTX_TX ? "tx" : "rx", &c);
			ftx_defer_fail("%s: completion of context %p (#%zu) "
				       "has error %d (%s), expected %d (%s)",
				       what, c.op_context, j, c.err,
				       c.err ? fi_strerror(c.err) : "success",
				       err, err ? fi_strerror(err) : "success");
		}
	}
	free(seen);
}

/* ---------------------------------------------------------------- tnbc */

bool
ftx_tnbc_stats(struct ftx_ctx *ctx, struct fi_tnbc_engine_stats *st)
{
	struct fi_tnbc_ops_domain *ops = NULL;

	if (fi_open_ops(&ctx->domain->fid, FI_TNBC_DOMAIN_OPS_1, 0,
			(void **) &ops, NULL) ||
	    !ops || !ops->engine_stats)
		return false;
	memset(st, 0, sizeof(*st));
	st->size = sizeof(*st);
	return ops->engine_stats(ctx->domain, st) == 0;
}
