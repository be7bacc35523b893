/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The trigger unit's waiting room: each counter's min-heap of requests,
 * ordered by (threshold, submission order), and their release to the
 * ready list when the counter reaches them.  A counter's change calls
 * in here from under any lock and never runs a request: tnbc_trigger.c
 * builds, queues and runs them (its head says how a post and an
 * increment that race both see each other).
 */
#include <stdlib.h>
#include <string.h>

#include "tnbc.h"
#include "tnbc_trig_heap.h"

static inline struct tnbc_domain *tnbc_cntr_dom(struct tnbc_cntr *c)
{
	return c->domain;
}

/* ------------------------------------------------------------------ */
/* The per-counter heap; cntr->lock held.                              */

static bool tnbc_trig_before(const struct tnbc_trig *a,
			     const struct tnbc_trig *b)
{
	return a->threshold < b->threshold ||
	       (a->threshold == b->threshold && a->seq < b->seq);
}

static void tnbc_heap_set(struct tnbc_cntr *c, size_t i, struct tnbc_trig *t)
{
	c->heap[i] = t;
	t->idx = i;
}

static size_t tnbc_heap_up(struct tnbc_cntr *c, size_t i)
{
	struct tnbc_trig *t = c->heap[i];
	size_t steps = 0;

	while (i) {
		size_t p = (i - 1) / 2;

		if (!tnbc_trig_before(t, c->heap[p]))
			break;
		tnbc_heap_set(c, i, c->heap[p]);
		i = p;
		steps++;
	}
	tnbc_heap_set(c, i, t);
	return steps;
}

static size_t tnbc_heap_down(struct tnbc_cntr *c, size_t i, size_t len)
{
	struct tnbc_trig *t = c->heap[i];
	size_t steps = 0;

	for (;;) {
		size_t l = 2 * i + 1, m = i;
		const struct tnbc_trig *best = t;

		if (l < len && tnbc_trig_before(c->heap[l], best)) {
			m = l;
			best = c->heap[l];
		}
		if (l + 1 < len && tnbc_trig_before(c->heap[l + 1], best))
			m = l + 1;
		if (m == i)
			break;
		tnbc_heap_set(c, i, c->heap[m]);
		i = m;
		steps++;
	}
	tnbc_heap_set(c, i, t);
	return steps;
}

int tnbc_trig_heap_push(struct tnbc_cntr *c, struct tnbc_trig *t)
{
	size_t len = atomic_load_explicit(&c->heap_len, memory_order_relaxed);
	size_t steps;

	if (!c->heap_cap) {
		c->heap = c->heap_inline;
		c->heap_cap =
			sizeof(c->heap_inline) / sizeof(c->heap_inline[0]);
	}
	if (len == c->heap_cap) {
		size_t ncap = c->heap_cap * 2 < 64 ? 64 : c->heap_cap * 2;
		struct tnbc_trig **nh =
			c->heap == c->heap_inline
				? malloc(ncap * sizeof(*nh))
				: realloc(c->heap, ncap * sizeof(*nh));

		if (!nh)
			return -FI_ENOMEM;
		if (c->heap == c->heap_inline)
			memcpy(nh, c->heap_inline, sizeof(c->heap_inline));
		c->heap = nh;
		c->heap_cap = ncap;
	}
	t->seq = c->trig_seq++;
	c->heap[len] = t;
	t->idx = len;
	steps = tnbc_heap_up(c, len);
	/* seq_cst, both: pair with the incrementer in tnbc_trig_release */
	atomic_store(&c->heap_min, c->heap[0]->threshold);
	atomic_store(&c->heap_len, len + 1);
	atomic_fetch_add_explicit(&c->domain->engine.trig_heap_steps, steps + 1,
				  memory_order_relaxed);
	return 0;
}

void tnbc_trig_heap_remove(struct tnbc_cntr *c, size_t i)
{
	size_t len = atomic_load_explicit(&c->heap_len, memory_order_relaxed);
	size_t steps = 0;

	len--;
	if (i != len) {
		tnbc_heap_set(c, i, c->heap[len]);
		steps = tnbc_heap_down(c, i, len);
		if (!steps)
			steps = tnbc_heap_up(c, i);
	}
	atomic_store(&c->heap_min, len ? c->heap[0]->threshold : UINT64_MAX);
	atomic_store(&c->heap_len, len);
	atomic_fetch_add_explicit(&c->domain->engine.trig_heap_steps, steps + 1,
				  memory_order_relaxed);
}

/* ------------------------------------------------------------------ */
/* Release                                                              */

static void tnbc_trig_release(struct tnbc_cntr *cntr)
{
	struct tnbc_domain *dom = tnbc_cntr_dom(cntr);
	struct tnbc_list local;
	uint64_t val;
	size_t n = 0;

	/* seq_cst: the caller's counter update comes first (see the top).
	 * A poster stores heap_min before it re-reads the counter, so, as
	 * with heap_len, either this look sees the new minimum or the
	 * poster sees this change and releases the request itself. */
	if (!atomic_load(&cntr->heap_len))
		return;
	val = atomic_load(&cntr->cnt) + atomic_load(&cntr->err);
	if (atomic_load(&cntr->heap_min) > val)
		return;
	tnbc_list_init(&local);
	pthread_mutex_lock(&cntr->lock);
	val = atomic_load(&cntr->cnt) + atomic_load(&cntr->err);
	while (atomic_load_explicit(&cntr->heap_len, memory_order_relaxed)) {
		struct tnbc_trig *t = cntr->heap[0];

		if (t->threshold > val)
			break;
		tnbc_trig_heap_remove(cntr, 0);
		tnbc_list_insert_tail(&t->entry, &local);
		n++;
	}
	if (!n) {
		pthread_mutex_unlock(&cntr->lock);
		return;
	}
	/* Still under cntr->lock: a later release of this counter by
	 * another thread must queue behind this one. */
	pthread_mutex_lock(&dom->tu.lock);
	local.next->prev = dom->tu.ready.prev;
	dom->tu.ready.prev->next = local.next;
	local.prev->next = &dom->tu.ready;
	dom->tu.ready.prev = local.prev;
	atomic_fetch_add_explicit(&dom->tu.nready, n, memory_order_release);
	pthread_mutex_unlock(&dom->tu.lock);
	pthread_mutex_unlock(&cntr->lock);
	atomic_fetch_add_explicit(&dom->engine.trig_fired, n,
				  memory_order_relaxed);
	atomic_fetch_sub_explicit(&dom->engine.trig_pending, n,
				  memory_order_relaxed);
}

/* No wake-up: every path that changes a counter runs the released work
 * once it lets go of its locks (the engine in its pass, an application
 * thread at the end of its call), and waking the engine here would only
 * make it race the thread that is about to run the work, a futex
 * syscall and a context switch later. */
void tnbc_trig_check(struct tnbc_cntr *cntr)
{
	tnbc_trig_release(cntr);
}
