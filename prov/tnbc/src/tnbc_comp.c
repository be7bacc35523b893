/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Completion writing: what messages, RMA and the trigger unit report
 * into CQs and counters.  The CQ and counter objects (tnbc_cq.c,
 * tnbc_cntr.c) are the application's side, which reads and waits; this
 * side stands under everything that completes operations, and calls
 * nothing above it: a counter's change only moves triggered work to
 * the ready list (tnbc_trig_heap.c), which others run.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "tnbc.h"
#include "tnbc_trig_heap.h"
#include "tnbc_comp.h"
#include "tnbc_wake.h"

/* ------------------------------------------------------------------ */
/* Completion queues                                                    */

/* cq->lock held; an entry or an error was queued */
static void tnbc_cq_notify(struct tnbc_cq *cq)
{
	atomic_store_explicit(&cq->avail, true, memory_order_relaxed);
	if (cq->efd >= 0 && !atomic_load(&cq->signaled)) {
		uint64_t one = 1;

		if (write(cq->efd, &one, sizeof(one)) == sizeof(one))
			atomic_store(&cq->signaled, true);
	}
	if (cq->wait_obj != FI_WAIT_NONE)
		pthread_cond_broadcast(&cq->cond);
}

static void tnbc_cq_fill(struct tnbc_cq_slot *s, void *context, uint64_t flags,
			 size_t len, void *buf, uint64_t data, uint64_t tag,
			 fi_addr_t src)
{
	s->e.op_context = context;
	s->e.flags = flags;
	s->e.len = len;
	s->e.buf = buf;
	s->e.data = data;
	s->e.tag = tag;
	s->src = src;
}

/* Ring sizes are powers of two: a division by one that is not was a
 * tenth of a completion's cost. */
_Static_assert((TNBC_DEF_CQ_SIZE & (TNBC_DEF_CQ_SIZE - 1)) == 0 &&
		       (TNBC_CQ_APP_QUEUE & (TNBC_CQ_APP_QUEUE - 1)) == 0,
	       "CQ ring sizes are powers of two");
static inline struct tnbc_cq_slot *tnbc_cq_slot(struct tnbc_cq_slot *ring,
						size_t size, size_t i)
{
	return &ring[i & (size - 1)];
}

/* Room for one more entry in a ring of *size slots, count of them used
 * from *head: a full ring is copied into one twice as big (an empty one
 * gets TNBC_CQ_APP_QUEUE slots).  -FI_ENOMEM leaves it as it was. */
static int tnbc_cq_ring_room(struct tnbc_cq_slot **ring, size_t *size,
			     size_t *head, size_t count)
{
	size_t nsize = *size ? *size * 2 : TNBC_CQ_APP_QUEUE;
	struct tnbc_cq_slot *nr;

	if (count < *size)
		return 0;
	nr = malloc(nsize * sizeof(*nr));
	if (!nr)
		return -FI_ENOMEM;
	for (size_t i = 0; i < count; i++)
		nr[i] = *tnbc_cq_slot(*ring, *size, *head + i);
	free(*ring);
	*ring = nr;
	*size = nsize;
	*head = 0;
	return 0;
}

/* With FI_THREAD_DOMAIN and no wait object, the application makes one
 * call at a time in the domain and only it reads the CQ: completions
 * its own threads make queue in cq->aq without the lock (two lock round
 * trips per message fewer).  The engine's go to the ring. */
static bool tnbc_cq_app_side(struct tnbc_cq *cq)
{
	return cq->app_queue && !tnbc_engine_is_self(cq->domain);
}

int tnbc_cq_write(struct tnbc_cq *cq, void *context, uint64_t flags, size_t len,
		  void *buf, uint64_t data, uint64_t tag, fi_addr_t src)
{
	int ret;

	/* out of memory there, it goes to the ring */
	if (tnbc_cq_app_side(cq) &&
	    !tnbc_cq_ring_room(&cq->aq, &cq->aq_size, &cq->aq_head,
			       cq->aq_count)) {
		tnbc_cq_fill(tnbc_cq_slot(cq->aq, cq->aq_size,
					  cq->aq_head + cq->aq_count),
			     context, flags, len, buf, data, tag, src);
		cq->aq_count++;
		return 0;
	}
	pthread_mutex_lock(&cq->lock);
	ret = tnbc_cq_ring_room(&cq->ring, &cq->ring_size, &cq->head,
				cq->count);
	if (ret) {
		pthread_mutex_unlock(&cq->lock);
		FI_WARN(&tnbc_prov, FI_LOG_CQ, "out of memory growing CQ\n");
		return ret;
	}
	tnbc_cq_fill(
		tnbc_cq_slot(cq->ring, cq->ring_size, cq->head + cq->count),
		context, flags, len, buf, data, tag, src);
	cq->count++;
	tnbc_cq_notify(cq);
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

int tnbc_cq_write_err(struct tnbc_cq *cq, void *context, uint64_t flags,
		      size_t len, void *buf, uint64_t data, uint64_t tag,
		      size_t olen, int err, int prov_errno, fi_addr_t src)
{
	struct tnbc_cq_err *e = calloc(1, sizeof(*e));

	if (!e) {
		FI_WARN(&tnbc_prov, FI_LOG_CQ,
			"out of memory queuing an error completion\n");
		return -FI_ENOMEM;
	}
	e->err.op_context = context;
	e->err.flags = flags;
	e->err.len = len;
	e->err.buf = buf;
	e->err.data = data;
	e->err.tag = tag;
	e->err.olen = olen;
	e->err.err = err;
	e->err.prov_errno = prov_errno;
	e->src = src;
	pthread_mutex_lock(&cq->lock);
	tnbc_list_insert_tail(&e->entry, &cq->err_list);
	tnbc_cq_notify(cq);
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Counters                                                             */

/* Wakes fi_cntr_wait callers, but only when one of them may be done:
 * waking a blocked thread at every increment on its way to a far
 * threshold costs a context switch each time.  A waiter publishes its
 * threshold and then re-reads the value; the change publishes the value
 * and then reads the threshold (both sequentially consistent), so one
 * of the two always sees the other. */
void tnbc_cntr_signal(struct tnbc_cntr *cntr)
{
	struct tnbc_cntr_user *u = cntr->user;

	if (!u || !atomic_load(&u->waiters))
		return;
	if (atomic_load(&cntr->cnt) < atomic_load(&u->wait_min) &&
	    atomic_load(&cntr->err) == atomic_load(&u->wait_err))
		return;
	pthread_mutex_lock(&cntr->lock);
	/* every waiter wakes and publishes its threshold again */
	atomic_store(&u->wait_min, UINT64_MAX);
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&cntr->lock);
}

void tnbc_cntr_changed(struct tnbc_cntr *cntr)
{
	tnbc_cntr_signal(cntr);
	tnbc_trig_check(cntr);
}

/* A change made by the provider (a completion, a triggered add or set).
 * The application may see the new value at once and close the counter
 * while this thread still signals it: close waits for changing to drop,
 * and changing goes up before the value changes, so a closer that saw
 * the value sees the change in progress. */
void tnbc_cntr_bump(struct tnbc_cntr *cntr, atomic_uint_fast64_t *v,
		    uint64_t value, bool set)
{
	atomic_fetch_add(&cntr->changing, 1);
	if (set)
		atomic_store(v, value);
	else
		atomic_fetch_add(v, value);
	tnbc_cntr_changed(cntr);
	atomic_fetch_sub(&cntr->changing, 1);
}

void tnbc_cntr_inc(struct tnbc_cntr *cntr)
{
	tnbc_cntr_bump(cntr, &cntr->cnt, 1, false);
}

void tnbc_cntr_inc_err(struct tnbc_cntr *cntr)
{
	tnbc_cntr_bump(cntr, &cntr->err, 1, false);
}
