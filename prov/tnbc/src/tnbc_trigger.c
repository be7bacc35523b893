/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Triggered operations and deferred work (fi_trigger(3)): the soft NIC's
 * trigger unit.
 *
 * A request is built completely when it is posted: its arguments are
 * validated and copied, and it holds references on every object it
 * names, so firing it cannot fail for a reason the poster could have
 * been told about.  It then waits in its triggering counter's min-heap,
 * ordered by (threshold, submission order).  Whenever the counter
 * changes, every request whose threshold success + error has reached
 * moves, in heap order, to the trigger unit's ready list; whoever runs
 * ready work next (the thread that changed the counter once it holds no
 * lock, the thread progressing the endpoint, or the engine) starts them
 * in list order.  One thread at a time runs ready work, so requests start
 * in exactly the order they were released.
 *
 * The post/increment race: a poster inserts under cntr->lock and then
 * re-reads the counter; an incrementer adds first and then looks at the
 * heap's length.  Both use sequentially consistent atomics, so at least
 * one of them sees the other (tnbc_trig_check).
 *
 * Cost: O(log n) heap steps per request queued, released or cancelled,
 * O(1) per counter change that releases nothing.
 *
 * Lock order (extends tnbc_lock.h): dom->cntr_lock > cntr->lock >
 * dom->tu.lock.  No lock is held while a request runs.
 */
#include <sched.h>
#include <stdlib.h>

#include "tnbc.h"
#include "tnbc_trigger.h"
#include "tnbc_msg.h"
#include "tnbc_rma.h"
#include "tnbc_alu.h"
#include "tnbc_comp.h"

/* Where a public op_type sits in the kind table. */
static enum fi_op_type tnbc_trig_op_index(enum fi_op_type op)
{
	if (op == FI_TNBC_OP_REDUCE)
		return (enum fi_op_type)TNBC_TRIG_REDUCE;
	if (op == FI_TNBC_OP_COPY)
		return (enum fi_op_type)TNBC_TRIG_COPY;
	return op;
}

/* Which of its endpoint's counters counts a request's completion. */
enum tnbc_trig_ep_cntr {
	TNBC_TRIG_NO_CNTR,
	TNBC_TRIG_RX_CNTR,
	TNBC_TRIG_TX_CNTR,
	TNBC_TRIG_WR_CNTR,
	TNBC_TRIG_RD_CNTR,
};

/* What the trigger unit knows of each kind of request.  A kind with no
 * entry cannot be built, so a request never reaches a start function
 * that is not its own. */
struct tnbc_trig_kind {
	ssize_t (*start)(struct tnbc_trig *t); /* trusts what was built */
	size_t size; /* only as much of struct tnbc_trig as it uses */
	uint64_t cq_flags; /* of its completion */
	bool rx; /* completes in the receive CQ */
	enum tnbc_trig_ep_cntr ep_cntr;
};

static void tnbc_cntr_apply(struct tnbc_cntr *c, bool set, uint64_t value)
{
	tnbc_cntr_bump(c, &c->cnt, value, set);
}

static ssize_t tnbc_trig_start_send(struct tnbc_trig *t)
{
	int err = t->amend ? t->amend(t->amend_arg) : 0;

	if (err) {
		/* the error travels in place of the data's success: the
		 * receiving step fails with it (TNBC_HDR_COLL) */
		struct tnbc_msg_args a = t->msg;

		a.flags |= FI_REMOTE_CQ_DATA;
		a.data = (uint64_t)err;
		return tnbc_msg_start_send(t->ep, &a, &t->x);
	}
	return tnbc_msg_start_send(t->ep, &t->msg, &t->x);
}

static ssize_t tnbc_trig_start_recv(struct tnbc_trig *t)
{
	return tnbc_msg_start_recv(t->ep, &t->msg, &t->x);
}

static ssize_t tnbc_trig_start_rma(struct tnbc_trig *t)
{
	return tnbc_rma_start(t->ep, &t->rma, &t->x);
}

static ssize_t tnbc_trig_start_cntr(struct tnbc_trig *t)
{
	tnbc_cntr_apply(t->op_cntr, t->op == FI_OP_CNTR_SET, t->value);
	return 0;
}

/* A local step completes as it runs: no endpoint reports it. */
static ssize_t tnbc_trig_start_reduce(struct tnbc_trig *t)
{
	int ret = tnbc_alu_apply(t->step.op, t->step.dt, t->step.dst,
				 t->step.src, NULL, NULL, t->step.count);

	if (ret)
		return ret;
	if (t->x.comp_cntr)
		tnbc_cntr_inc(t->x.comp_cntr);
	return 0;
}

/* Its function runs once the request is gone (tnbc_trig_run_ready):
 * it may free what the request names, its counters included. */
static ssize_t tnbc_trig_start_call(struct tnbc_trig *t)
{
	(void)t;
	return 0;
}

static ssize_t tnbc_trig_start_fn(struct tnbc_trig *t)
{
	int ret = t->step.fn(t->step.arg);

	if (ret)
		return ret;
	if (t->x.comp_cntr)
		tnbc_cntr_inc(t->x.comp_cntr);
	return 0;
}

static ssize_t tnbc_trig_start_copy(struct tnbc_trig *t)
{
	if (t->step.count)
		memcpy(t->step.dst, t->step.src, t->step.count);
	if (t->x.comp_cntr)
		tnbc_cntr_inc(t->x.comp_cntr);
	return 0;
}

#define TNBC_TRIG_MSG_SIZE  offsetof(struct tnbc_trig, rma)
#define TNBC_TRIG_STEP_SIZE offsetof(struct tnbc_trig, msg)
#define TNBC_TRIG_CNTR_SIZE offsetof(struct tnbc_trig, step)

static const struct tnbc_trig_kind tnbc_trig_kinds[] = {
	[FI_OP_RECV] = {tnbc_trig_start_recv, TNBC_TRIG_MSG_SIZE,
			FI_RECV | FI_MSG, true, TNBC_TRIG_RX_CNTR},
	[FI_OP_SEND] = {tnbc_trig_start_send, TNBC_TRIG_MSG_SIZE,
			FI_SEND | FI_MSG, false, TNBC_TRIG_TX_CNTR},
	[FI_OP_TRECV] = {tnbc_trig_start_recv, TNBC_TRIG_MSG_SIZE,
			 FI_RECV | FI_TAGGED, true, TNBC_TRIG_RX_CNTR},
	[FI_OP_TSEND] = {tnbc_trig_start_send, TNBC_TRIG_MSG_SIZE,
			 FI_SEND | FI_TAGGED, false, TNBC_TRIG_TX_CNTR},
	[FI_OP_READ] = {tnbc_trig_start_rma, sizeof(struct tnbc_trig),
			FI_RMA | FI_READ, false, TNBC_TRIG_RD_CNTR},
	[FI_OP_WRITE] = {tnbc_trig_start_rma, sizeof(struct tnbc_trig),
			 FI_RMA | FI_WRITE, false, TNBC_TRIG_WR_CNTR},
	[FI_OP_ATOMIC] = {tnbc_trig_start_rma, sizeof(struct tnbc_trig),
			  FI_ATOMIC | FI_WRITE, false, TNBC_TRIG_WR_CNTR},
	[FI_OP_FETCH_ATOMIC] = {tnbc_trig_start_rma, sizeof(struct tnbc_trig),
				FI_ATOMIC | FI_READ, false, TNBC_TRIG_RD_CNTR},
	[FI_OP_COMPARE_ATOMIC] = {tnbc_trig_start_rma, sizeof(struct tnbc_trig),
				  FI_ATOMIC | FI_READ, false,
				  TNBC_TRIG_RD_CNTR},
	[FI_OP_CNTR_SET] = {tnbc_trig_start_cntr, TNBC_TRIG_CNTR_SIZE, 0, false,
			    TNBC_TRIG_NO_CNTR},
	[FI_OP_CNTR_ADD] = {tnbc_trig_start_cntr, TNBC_TRIG_CNTR_SIZE, 0, false,
			    TNBC_TRIG_NO_CNTR},
	[TNBC_TRIG_REDUCE] = {tnbc_trig_start_reduce, TNBC_TRIG_STEP_SIZE, 0,
			      false, TNBC_TRIG_NO_CNTR},
	[TNBC_TRIG_COPY] = {tnbc_trig_start_copy, TNBC_TRIG_STEP_SIZE, 0, false,
			    TNBC_TRIG_NO_CNTR},
	[TNBC_TRIG_CALL] = {tnbc_trig_start_call, TNBC_TRIG_STEP_SIZE, 0, false,
			    TNBC_TRIG_NO_CNTR},
	[TNBC_TRIG_FN] = {tnbc_trig_start_fn, TNBC_TRIG_STEP_SIZE, 0, false,
			  TNBC_TRIG_NO_CNTR},
};

static const struct tnbc_trig_kind *tnbc_trig_kind_of(enum fi_op_type op)
{
	size_t i = (size_t)op;

	if (i >= sizeof(tnbc_trig_kinds) / sizeof(tnbc_trig_kinds[0]) ||
	    !tnbc_trig_kinds[i].start)
		return NULL;
	return &tnbc_trig_kinds[i];
}

/*
 * Requests are built and freed once per step of every collective (four
 * for a 2-member allreduce), built by the posting thread and freed by
 * whichever thread ran them, the engine's as often as not, and calloc
 * cost 340 instructions a request (callgrind, 8-byte allreduce through
 * the MPI glue).  A free list per size class keeps up to
 * TNBC_TRIG_CACHE_MAX of each.
 */
#define TNBC_TRIG_CACHE_MAX 256u
enum { TNBC_TRIG_CLS_STEP = 1, TNBC_TRIG_CLS_MSG, TNBC_TRIG_NCLS };

static const size_t tnbc_trig_cls_size[TNBC_TRIG_NCLS] = {
	[TNBC_TRIG_CLS_STEP] = TNBC_TRIG_STEP_SIZE,
	[TNBC_TRIG_CLS_MSG] = TNBC_TRIG_MSG_SIZE,
};

static struct tnbc_freelist tnbc_trig_cache[TNBC_TRIG_NCLS] = {
	[TNBC_TRIG_CLS_STEP] = TNBC_FREELIST_INIT(TNBC_TRIG_CACHE_MAX),
	[TNBC_TRIG_CLS_MSG] = TNBC_FREELIST_INIT(TNBC_TRIG_CACHE_MAX),
};

static struct tnbc_trig *tnbc_trig_alloc(enum fi_op_type op)
{
	const struct tnbc_trig_kind *k = tnbc_trig_kind_of(op);
	struct tnbc_trig *t;
	uint8_t cls;

	if (!k)
		return NULL;
	cls = k->size <= TNBC_TRIG_STEP_SIZE  ? TNBC_TRIG_CLS_STEP
	      : k->size <= TNBC_TRIG_MSG_SIZE ? TNBC_TRIG_CLS_MSG
					      : 0;
	if (!cls)
		return calloc(1, k->size);
	t = tnbc_freelist_get(&tnbc_trig_cache[cls]);
	if (t) {
		memset(t, 0, tnbc_trig_cls_size[cls]);
	} else {
		t = calloc(1, tnbc_trig_cls_size[cls]);
		if (!t)
			return NULL;
	}
	t->cls = cls;
	return t;
}

static void tnbc_trig_free(struct tnbc_trig *t)
{
	if (!t->cls || !tnbc_freelist_put(&tnbc_trig_cache[t->cls], t))
		free(t);
}

void tnbc_trig_cache_drain(void)
{
	for (int c = TNBC_TRIG_CLS_STEP; c < TNBC_TRIG_NCLS; c++)
		tnbc_freelist_drain(&tnbc_trig_cache[c], free);
}

void tnbc_trig_check_app(struct tnbc_cntr *cntr)
{
	struct tnbc_domain *dom = cntr->domain; /* cntr may go once released */

	tnbc_trig_check(cntr);
	tnbc_trig_run(dom, false);
}

static void tnbc_trig_release_refs(struct tnbc_trig *t)
{
	atomic_fetch_sub(&t->cntr->ref, 1);
	if (t->ep)
		atomic_fetch_sub(&t->ep->ref, 1);
	if (t->x.comp_cntr)
		atomic_fetch_sub(&t->x.comp_cntr->ref, 1);
	if (t->op_cntr)
		atomic_fetch_sub(&t->op_cntr->ref, 1);
}

static struct tnbc_cntr *tnbc_trig_ep_cntr(const struct tnbc_trig *t)
{
	switch (tnbc_trig_kind_of(t->op)->ep_cntr) {
	case TNBC_TRIG_RX_CNTR:
		return t->ep->rx_cntr;
	case TNBC_TRIG_TX_CNTR:
		return t->ep->tx_cntr;
	case TNBC_TRIG_WR_CNTR:
		return t->ep->wr_cntr;
	case TNBC_TRIG_RD_CNTR:
		return t->ep->rd_cntr;
	default:
		return NULL;
	}
}

/* A request that will never run: tell its endpoint and its completion
 * counter (an error completion is reported even for deferred work). */
static void tnbc_trig_report(struct tnbc_trig *t, int err)
{
	const struct tnbc_trig_kind *k = tnbc_trig_kind_of(t->op);

	/* the provider's own steps report to their counter alone */
	if (t->ep && !t->internal) {
		struct tnbc_cq *cq = k->rx ? t->ep->rx_cq : t->ep->tx_cq;

		if (cq)
			tnbc_cq_write_err(cq, t->context, k->cq_flags, 0, NULL,
					  0, 0, 0, err, -err, FI_ADDR_NOTAVAIL);
	}
	if (t->x.comp_cntr)
		tnbc_cntr_inc_err(t->x.comp_cntr);
	/* an FI_TRIGGER operation completes like any other: its endpoint
	 * counter counts the error too (deferred work leaves it alone) */
	if (t->ep && !t->work && !t->internal) {
		struct tnbc_cntr *c = tnbc_trig_ep_cntr(t);

		if (c)
			tnbc_cntr_inc_err(c);
	}
}

static ssize_t tnbc_trig_exec(struct tnbc_trig *t)
{
	return tnbc_trig_kind_of(t->op)->start(t);
}

/* Moves the whole ready list to batch, in order. */
static void tnbc_trig_take_ready(struct tnbc_domain *dom,
				 struct tnbc_list *batch)
{
	tnbc_list_init(batch);
	/* what this runner took is counted until it has run: none left
	 * means none came since (one that comes now is its poster's to run,
	 * or this runner's after it lets go: tnbc_trig_run_ready) */
	if (!tnbc_trig_has_ready(dom))
		return;
	pthread_mutex_lock(&dom->tu.lock);
	if (!tnbc_list_empty(&dom->tu.ready)) {
		batch->next = dom->tu.ready.next;
		batch->prev = dom->tu.ready.prev;
		batch->next->prev = batch;
		batch->prev->next = batch;
		tnbc_list_init(&dom->tu.ready);
	}
	pthread_mutex_unlock(&dom->tu.lock);
}

uint64_t tnbc_trig_run_ready(struct tnbc_domain *dom, bool engine)
{
	uint64_t ran = 0;

	while (tnbc_trig_has_ready(dom)) {
		/* One runner at a time keeps the release order; a runner
		 * that loses the race leaves the work to the winner, which
		 * looks again after it lets go. */
		struct tnbc_list batch;
		uint64_t n = 0;
		int idle = 0;

		if (!atomic_compare_exchange_strong(&dom->tu.running, &idle, 1))
			return ran;
		/* a batch at a time: one lock round trip, not one per
		 * request */
		for (tnbc_trig_take_ready(dom, &batch);
		     !tnbc_list_empty(&batch);
		     tnbc_trig_take_ready(dom, &batch)) {
			while (!tnbc_list_empty(&batch)) {
				struct tnbc_trig *t = tnbc_container_of(
					batch.next, struct tnbc_trig, entry);
				ssize_t ret;

				tnbc_list_remove(&t->entry);
				ret = tnbc_trig_exec(t);
				if (ret == -FI_EAGAIN) {
					/* out of memory for now: put back
					 * what is left, this one first */
					tnbc_list_insert_tail(&t->entry,
							      batch.next);
					pthread_mutex_lock(&dom->tu.lock);
					batch.prev->next = dom->tu.ready.next;
					dom->tu.ready.next->prev = batch.prev;
					dom->tu.ready.next = batch.next;
					batch.next->prev = &dom->tu.ready;
					pthread_mutex_unlock(&dom->tu.lock);
					goto retry_later;
				}
				atomic_fetch_sub_explicit(&dom->tu.nready, 1,
							  memory_order_release);
				n++;
				if (ret) {
					FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
						"triggered operation failed: "
						"%s\n",
						fi_strerror((int)-ret));
					tnbc_trig_report(t, (int)-ret);
				}
				tnbc_trig_release_refs(t);
				if (t->op == (enum fi_op_type)TNBC_TRIG_CALL) {
					struct tnbc_trig_step st = t->step;

					tnbc_trig_free(t);
					st.call(st.arg);
				} else {
					tnbc_trig_free(t);
				}
			}
		}
		if (engine && n)
			atomic_fetch_add_explicit(
				&dom->engine.trig_fired_by_engine, n,
				memory_order_relaxed);
		atomic_store(&dom->tu.running, 0);
		ran += n;
		continue;
	retry_later:
		/* the engine's next pass tries again */
		if (engine && n)
			atomic_fetch_add_explicit(
				&dom->engine.trig_fired_by_engine, n,
				memory_order_relaxed);
		atomic_store(&dom->tu.running, 0);
		return ran + n;
	}
	return ran;
}

void tnbc_trig_quiesce(struct tnbc_domain *dom)
{
	while (atomic_load(&dom->tu.running))
		sched_yield();
}

/* ------------------------------------------------------------------ */
/* Posting                                                              */

static struct tnbc_cntr *tnbc_cntr_of(struct tnbc_domain *dom,
				      struct fid_cntr *fid)
{
	struct tnbc_cntr *c;

	if (!fid || fid->fid.fclass != FI_CLASS_CNTR)
		return NULL;
	c = tnbc_cntr_fid(&fid->fid);
	return c->domain == dom ? c : NULL;
}

static struct tnbc_ep *tnbc_ep_of(struct tnbc_domain *dom, struct fid_ep *fid)
{
	struct tnbc_ep *ep;

	if (!fid || fid->fid.fclass != FI_CLASS_EP)
		return NULL;
	ep = TNBC_EP(fid); /* the endpoint, or the one an alias names */
	return ep->domain == dom ? ep : NULL;
}

/* Queues a fully built request and starts it if its threshold is met. */
static int tnbc_trig_queue(struct tnbc_domain *dom, struct tnbc_trig *t)
{
	struct tnbc_cntr *cntr = t->cntr; /* t may run and go once pushed */
	int ret;

	atomic_fetch_add(&t->cntr->ref, 1);
	if (t->ep)
		atomic_fetch_add(&t->ep->ref, 1);
	if (t->x.comp_cntr)
		atomic_fetch_add(&t->x.comp_cntr->ref, 1);
	if (t->op_cntr)
		atomic_fetch_add(&t->op_cntr->ref, 1);
	/* Once pushed, t may run (another thread released it) and drop its
	 * reference, and the work it ends may free the counter (a
	 * schedule's own, by its last step): tnbc_cntr_fini waits for
	 * changing, which keeps cntr until this thread's look below is
	 * over, its lock let go. */
	atomic_fetch_add(&cntr->changing, 1);
	pthread_mutex_lock(&t->cntr->lock);
	ret = tnbc_trig_heap_push(t->cntr, t);
	pthread_mutex_unlock(&t->cntr->lock);
	if (ret) {
		atomic_fetch_sub(&cntr->changing, 1);
		tnbc_trig_release_refs(t);
		tnbc_trig_free(t);
		return ret;
	}
	atomic_fetch_add_explicit(&dom->engine.trig_queued, 1,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&dom->engine.trig_pending, 1,
				  memory_order_relaxed);
	/* The counter may have reached the threshold before the push. */
	tnbc_trig_check(cntr);
	atomic_fetch_sub(&cntr->changing, 1);
	tnbc_trig_run(dom, false);
	return 0;
}

static int tnbc_trig_build_msg(struct tnbc_trig *t, enum fi_op_type op,
			       const struct tnbc_msg_args *a)
{
	int ret;

	if (a->iov_count > TNBC_IOV_LIMIT)
		return -FI_EINVAL;
	ret = tnbc_trig_kind_of(op)->rx
		      ? tnbc_ep_check_recv(t->ep, a->iov, a->iov_count, a->addr,
					   a->flags, a->tagged)
		      : tnbc_ep_check_send(t->ep, a->iov, a->iov_count, a->addr,
					   a->flags);
	if (ret)
		return ret;
	t->op = op;
	t->msg = *a;
	if (a->iov_count)
		memcpy(t->iov, a->iov, a->iov_count * sizeof(*a->iov));
	t->msg.iov = t->iov;
	return 0;
}

ssize_t tnbc_trig_post_msg(struct tnbc_ep *ep, enum fi_op_type op,
			   const struct tnbc_msg_args *a)
{
	struct fi_triggered_context *tc = a->context;
	struct tnbc_msg_args b = *a;
	struct tnbc_trig *t;
	int ret;

	b.flags &= ~(uint64_t)FI_TRIGGER;
	if (!tc || tc->event_type != FI_TRIGGER_THRESHOLD ||
	    (b.flags & FI_INJECT))
		return -FI_EINVAL;
	t = tnbc_trig_alloc(op);
	if (!t)
		return -FI_EAGAIN;
	t->cntr = tnbc_cntr_of(ep->domain, tc->trigger.threshold.cntr);
	t->threshold = tc->trigger.threshold.threshold;
	t->ep = ep;
	t->context = a->context;
	t->x.prio = (uint8_t)atomic_load(&ep->prio);
	ret = t->cntr ? tnbc_trig_build_msg(t, op, &b) : -FI_EINVAL;
	if (ret) {
		tnbc_trig_free(t);
		return ret;
	}
	return tnbc_trig_queue(ep->domain, t);
}

ssize_t tnbc_trig_post_rma(struct tnbc_ep *ep, enum fi_op_type op,
			   const struct tnbc_rma_args *a)
{
	struct fi_triggered_context *tc = a->context;
	struct tnbc_trig *t;
	int ret;

	if (!tc || tc->event_type != FI_TRIGGER_THRESHOLD ||
	    (a->flags & FI_INJECT))
		return -FI_EINVAL;
	t = tnbc_trig_alloc(op);
	if (!t)
		return -FI_EAGAIN;
	t->cntr = tnbc_cntr_of(ep->domain, tc->trigger.threshold.cntr);
	t->threshold = tc->trigger.threshold.threshold;
	t->ep = ep;
	t->op = op;
	t->context = a->context;
	t->rma = *a;
	t->rma.flags &= ~(uint64_t)FI_TRIGGER;
	t->x.prio = (uint8_t)atomic_load(&ep->prio);
	ret = t->cntr ? tnbc_rma_check(ep, &t->rma) : -FI_EINVAL;
	if (ret) {
		tnbc_trig_free(t);
		return ret;
	}
	return tnbc_trig_queue(ep->domain, t);
}

int tnbc_trig_submit(struct tnbc_domain *dom, const struct tnbc_trig_req *r)
{
	const struct tnbc_trig_kind *k =
		tnbc_trig_kind_of((enum fi_op_type)r->op);
	struct tnbc_trig *t;

	if (!k || !r->cntr || r->msg.iov_count > TNBC_IOV_LIMIT)
		return -FI_EINVAL;
	t = tnbc_trig_alloc((enum fi_op_type)r->op);
	if (!t)
		return -FI_ENOMEM;
	t->op = (enum fi_op_type)r->op;
	t->internal = true;
	t->cntr = r->cntr;
	t->threshold = r->threshold;
	t->ep = r->ep;
	t->x.comp_cntr = r->comp_cntr;
	t->step = r->step;
	if (k->start == tnbc_trig_start_send ||
	    k->start == tnbc_trig_start_recv) {
		if (!t->ep)
			goto einval;
		t->msg = r->msg;
		t->msg.flags |= TNBC_INTERNAL;
		t->amend = r->amend;
		t->amend_arg = r->amend_arg;
		t->context = r->msg.context;
		if (r->msg.iov_count)
			memcpy(t->iov, r->msg.iov,
			       r->msg.iov_count * sizeof(*t->iov));
		t->msg.iov = t->iov;
	} else if (k->start == tnbc_trig_start_rma ||
		   k->start == tnbc_trig_start_cntr) {
		goto einval; /* no step of a schedule is one of these yet */
	} else if ((r->op == TNBC_TRIG_CALL && !r->step.call) ||
		   (r->op == TNBC_TRIG_FN && !r->step.fn)) {
		goto einval;
	}
	return tnbc_trig_queue(dom, t);
einval:
	tnbc_trig_free(t);
	return -FI_EINVAL;
}

/* The endpoint of a deferred data operation; its flags may not ask for
 * what a deferred operation cannot do. */
static int tnbc_work_ep(struct tnbc_domain *dom, struct tnbc_trig *t,
			struct fid_ep *fid, uint64_t flags)
{
	t->ep = tnbc_ep_of(dom, fid);
	if (!t->ep || (flags & (FI_INJECT | FI_TRIGGER)))
		return -FI_EINVAL;
	t->x.prio = (uint8_t)atomic_load(&t->ep->prio);
	return 0;
}

/* The ops that fold one value into another: fi_atomic(3)'s FI_MIN to
 * FI_BXOR, where the ALU has them for the datatype. */
static bool tnbc_trig_reduce_op(enum fi_op op, enum fi_datatype dt)
{
	return op >= FI_MIN && op <= FI_BXOR &&
	       tnbc_alu_valid(TNBC_ATOMIC_PLAIN, op, dt);
}

static int tnbc_trig_build_reduce(struct tnbc_trig *t,
				  const struct fi_tnbc_op_reduce *o)
{
	size_t esize;

	if (!o || o->size < sizeof(*o) ||
	    !tnbc_trig_reduce_op(o->op, o->datatype))
		return -FI_EINVAL;
	esize = tnbc_alu_size(o->datatype);
	if (!esize || o->count > SIZE_MAX / esize ||
	    (o->count && (!o->dst || !o->src)))
		return -FI_EINVAL;
	t->step.dst = o->dst;
	t->step.src = o->src;
	t->step.count = o->count;
	t->step.op = o->op;
	t->step.dt = o->datatype;
	return 0;
}

static int tnbc_trig_build_copy(struct tnbc_trig *t,
				const struct fi_tnbc_op_copy *o)
{
	if (!o || o->size < sizeof(*o) || (o->len && (!o->dst || !o->src)))
		return -FI_EINVAL;
	t->step.dst = o->dst;
	t->step.src = o->src;
	t->step.count = o->len;
	return 0;
}

/* Builds the request of an fi_deferred_work. */
static int tnbc_trig_build_work(struct tnbc_domain *dom, struct tnbc_trig *t,
				struct fi_deferred_work *w)
{
	const uint64_t df = TNBC_DEFERRED;
	int ret = -FI_EINVAL;

	t->cntr = tnbc_cntr_of(dom, w->triggering_cntr);
	if (!t->cntr)
		return -FI_EINVAL;
	if (w->completion_cntr) {
		t->x.comp_cntr = tnbc_cntr_of(dom, w->completion_cntr);
		if (!t->x.comp_cntr)
			return -FI_EINVAL;
	}
	t->threshold = w->threshold;
	t->work = w;
	t->context = &w->context;
	t->op = tnbc_trig_op_index(w->op_type);

	if (w->op_type == FI_TNBC_OP_REDUCE) {
		const struct fi_tnbc_op_reduce *o;

		memcpy(&o, &w->op, sizeof(o));
		return tnbc_trig_build_reduce(t, o);
	}
	if (w->op_type == FI_TNBC_OP_COPY) {
		const struct fi_tnbc_op_copy *o;

		memcpy(&o, &w->op, sizeof(o));
		return tnbc_trig_build_copy(t, o);
	}
	switch (w->op_type) {
	case FI_OP_CNTR_SET:
	case FI_OP_CNTR_ADD:
		if (w->completion_cntr || !w->op.cntr)
			return -FI_EINVAL;
		t->op_cntr = tnbc_cntr_of(dom, w->op.cntr->cntr);
		t->value = w->op.cntr->value;
		return t->op_cntr ? 0 : -FI_EINVAL;
	case FI_OP_SEND:
	case FI_OP_RECV: {
		const struct fi_op_msg *o = w->op.msg;

		if (o)
			ret = tnbc_work_ep(dom, t, o->ep, o->flags);
		if (ret)
			return ret;
		return tnbc_trig_build_msg(
			t, w->op_type,
			&(struct tnbc_msg_args){.iov = o->msg.msg_iov,
						.iov_count = o->msg.iov_count,
						.addr = o->msg.addr,
						.data = o->msg.data,
						.context = t->context,
						.flags = o->flags | df});
	}
	case FI_OP_TSEND:
	case FI_OP_TRECV: {
		const struct fi_op_tagged *o = w->op.tagged;

		if (o)
			ret = tnbc_work_ep(dom, t, o->ep, o->flags);
		if (ret)
			return ret;
		return tnbc_trig_build_msg(
			t, w->op_type,
			&(struct tnbc_msg_args){.iov = o->msg.msg_iov,
						.iov_count = o->msg.iov_count,
						.addr = o->msg.addr,
						.tag = o->msg.tag,
						.ignore = o->msg.ignore,
						.data = o->msg.data,
						.context = t->context,
						.flags = o->flags | df,
						.tagged = true});
	}
	case FI_OP_READ:
	case FI_OP_WRITE: {
		const struct fi_op_rma *o = w->op.rma;

		if (o)
			ret = tnbc_work_ep(dom, t, o->ep, o->flags);
		if (!ret)
			ret = tnbc_rma_args_msg(&t->rma, &o->msg,
						w->op_type == FI_OP_READ
							? TNBC_RMA_READ
							: TNBC_RMA_WRITE,
						o->flags | df);
		break;
	}
	case FI_OP_ATOMIC: {
		const struct fi_op_atomic *o = w->op.atomic;

		if (o)
			ret = tnbc_work_ep(dom, t, o->ep, o->flags);
		if (!ret)
			ret = tnbc_rma_args_atomic(&t->rma, &o->msg, NULL, 0,
						   NULL, 0, TNBC_RMA_ATOMIC,
						   o->flags | df);
		break;
	}
	case FI_OP_FETCH_ATOMIC: {
		const struct fi_op_fetch_atomic *o = w->op.fetch_atomic;

		if (o)
			ret = tnbc_work_ep(dom, t, o->ep, o->flags);
		if (!ret)
			ret = tnbc_rma_args_atomic(
				&t->rma, &o->msg, o->fetch.msg_iov,
				o->fetch.iov_count, NULL, 0, TNBC_RMA_FETCH,
				o->flags | df);
		break;
	}
	case FI_OP_COMPARE_ATOMIC: {
		const struct fi_op_compare_atomic *o = w->op.compare_atomic;

		if (o)
			ret = tnbc_work_ep(dom, t, o->ep, o->flags);
		if (!ret)
			ret = tnbc_rma_args_atomic(
				&t->rma, &o->msg, o->fetch.msg_iov,
				o->fetch.iov_count, o->compare.msg_iov,
				o->compare.iov_count, TNBC_RMA_COMPARE,
				o->flags | df);
		break;
	}
	default:
		return -FI_ENOSYS;
	}
	if (ret)
		return ret;
	/* completions report the work's context */
	t->rma.context = &w->context;
	return tnbc_rma_check(t->ep, &t->rma);
}

/* ------------------------------------------------------------------ */
/* Cancel and flush                                                     */

static void tnbc_trig_cancel_list(struct tnbc_domain *dom,
				  struct tnbc_list *list)
{
	struct tnbc_list *it, *tmp;

	tnbc_list_foreach_safe (list, it, tmp) {
		struct tnbc_trig *t =
			tnbc_container_of(it, struct tnbc_trig, entry);

		tnbc_list_remove(&t->entry);
		tnbc_trig_report(t, FI_ECANCELED);
		tnbc_trig_release_refs(t);
		tnbc_trig_free(t);
		atomic_fetch_add_explicit(&dom->engine.trig_canceled, 1,
					  memory_order_relaxed);
	}
}

/* Moves the requests of c that match (all when both keys are NULL) to
 * out; returns how many.  c->lock held. */
static size_t tnbc_trig_take(struct tnbc_cntr *c, struct tnbc_list *out,
			     const struct fi_deferred_work *work,
			     const struct tnbc_ep *ep, const void *context)
{
	size_t n = 0, i = 0;

	while (i < atomic_load_explicit(&c->heap_len, memory_order_relaxed)) {
		struct tnbc_trig *t = c->heap[i];

		if ((work && t->work != work) ||
		    (ep && (t->work || t->ep != ep || t->context != context))) {
			i++;
			continue;
		}
		tnbc_trig_heap_remove(c, i);
		tnbc_list_insert_tail(&t->entry, out);
		n++;
		if (work || ep)
			break;
		/* removal moved another request to i: look at it again */
	}
	return n;
}

size_t tnbc_trig_drop(struct tnbc_cntr *c)
{
	struct tnbc_list out, *it, *tmp;
	size_t n;

	tnbc_list_init(&out);
	pthread_mutex_lock(&c->lock);
	n = tnbc_trig_take(c, &out, NULL, NULL, NULL);
	pthread_mutex_unlock(&c->lock);
	atomic_fetch_sub_explicit(&c->domain->engine.trig_pending, n,
				  memory_order_relaxed);
	tnbc_list_foreach_safe (&out, it, tmp) {
		struct tnbc_trig *t =
			tnbc_container_of(it, struct tnbc_trig, entry);

		tnbc_list_remove(&t->entry);
		tnbc_trig_release_refs(t);
		tnbc_trig_free(t);
	}
	return n;
}

static int tnbc_trig_cancel(struct tnbc_domain *dom,
			    struct fi_deferred_work *work, struct tnbc_ep *ep,
			    void *context)
{
	struct tnbc_list out;
	struct tnbc_list *it;
	size_t n = 0;

	tnbc_list_init(&out);
	pthread_mutex_lock(&dom->cntr_lock);
	for (it = dom->cntr_list.next; it != &dom->cntr_list && !n;
	     it = it->next) {
		struct tnbc_cntr_user *u =
			tnbc_container_of(it, struct tnbc_cntr_user, dom_entry);
		struct tnbc_cntr *c = &u->c;

		if (work && &u->cntr_fid != work->triggering_cntr)
			continue;
		pthread_mutex_lock(&c->lock);
		n = tnbc_trig_take(c, &out, work, ep, context);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&dom->cntr_lock);
	if (!n)
		return -FI_ENOENT; /* not queued: fired, or never posted */
	atomic_fetch_sub_explicit(&dom->engine.trig_pending, n,
				  memory_order_relaxed);
	tnbc_trig_cancel_list(dom, &out);
	tnbc_trig_run(dom, false);
	return 0;
}

static int tnbc_trig_flush(struct tnbc_domain *dom,
			   const struct fi_deferred_work *sel)
{
	struct tnbc_list out;
	struct tnbc_list *it;
	size_t n = 0;

	tnbc_list_init(&out);
	pthread_mutex_lock(&dom->cntr_lock);
	for (it = dom->cntr_list.next; it != &dom->cntr_list; it = it->next) {
		struct tnbc_cntr_user *u =
			tnbc_container_of(it, struct tnbc_cntr_user, dom_entry);
		struct tnbc_cntr *c = &u->c;

		if (sel && &u->cntr_fid != sel->triggering_cntr)
			continue;
		pthread_mutex_lock(&c->lock);
		n += tnbc_trig_take(c, &out, NULL, NULL, NULL);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&dom->cntr_lock);
	atomic_fetch_sub_explicit(&dom->engine.trig_pending, n,
				  memory_order_relaxed);
	tnbc_trig_cancel_list(dom, &out);
	tnbc_trig_run(dom, false);
	return 0;
}

int tnbc_trig_cancel_ctx(struct tnbc_ep *ep, void *context)
{
	return tnbc_trig_cancel(ep->domain, NULL, ep, context);
}

int tnbc_trig_control(struct tnbc_domain *dom, int command, void *arg)
{
	struct fi_deferred_work *w = arg;
	struct tnbc_trig *t;
	int ret;

	switch (command) {
	case FI_QUEUE_WORK:
		if (!w)
			return -FI_EINVAL;
		if (!tnbc_trig_kind_of(tnbc_trig_op_index(w->op_type)))
			return -FI_ENOSYS;
		t = tnbc_trig_alloc(tnbc_trig_op_index(w->op_type));
		if (!t)
			return -FI_ENOMEM;
		ret = tnbc_trig_build_work(dom, t, w);
		if (ret) {
			tnbc_trig_free(t);
			return ret;
		}
		return tnbc_trig_queue(dom, t);
	case FI_CANCEL_WORK:
		if (!w || !tnbc_cntr_of(dom, w->triggering_cntr))
			return -FI_EINVAL;
		return tnbc_trig_cancel(dom, w, NULL, NULL);
	case FI_FLUSH_WORK:
		if (w && !tnbc_cntr_of(dom, w->triggering_cntr))
			return -FI_EINVAL;
		return tnbc_trig_flush(dom, w);
	default:
		return -FI_ENOSYS;
	}
}

int tnbc_trig_domain_init(struct tnbc_domain *dom)
{
	tnbc_list_init(&dom->cntr_list);
	tnbc_list_init(&dom->tu.ready);
	atomic_init(&dom->tu.running, 0);
	if (pthread_mutex_init(&dom->cntr_lock, NULL))
		return -FI_ENOMEM;
	if (pthread_mutex_init(&dom->tu.lock, NULL)) {
		pthread_mutex_destroy(&dom->cntr_lock);
		return -FI_ENOMEM;
	}
	return 0;
}

void tnbc_trig_domain_fini(struct tnbc_domain *dom)
{
	pthread_mutex_destroy(&dom->tu.lock);
	pthread_mutex_destroy(&dom->cntr_lock);
}
