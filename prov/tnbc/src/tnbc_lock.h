/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Locks: the order every file keeps, and the endpoint lock's calls.
 *
 * Locks are only ever taken in this order, and none is held across a call
 * into another endpoint or out of the provider:
 *
 *   domain->ep_lock (rwlock; read to progress, write to add/remove an ep)
 *     > ep->lock   (mutex; matching lists, tx queues, rendezvous and RMA
 *                   tables, and the right to consume the endpoint's
 *                   receive queue)
 *       > domain->mr_lock (rwlock; read while an RMA request uses a
 *                          region, write to add or remove one)
 *         > domain->mr_xlock (regions' exposures to transports)
 *         > domain->atomic_lock (target-side atomics of the domain)
 *       > domain->cntr_lock (the domain's counter list)
 *         > cntr->lock (waiters, and the heap of triggered work)
 *           > domain->tu.lock (the trigger unit's ready list)
 *       > cq->lock, eq->lock  (leaf locks)
 *
 * av->lock is a leaf taken only by AV insert/remove; the send path reads
 * AV entries without it (entries live in fixed chunks that never move, and
 * the count is published with release semantics).
 * Progress uses trylock on ep->lock: whichever thread gets there first does
 * the work, and nobody waits for another thread to finish polling.
 * Two hot paths take no endpoint lock at all: a poll that finds ep->work
 * clear and the transport idle (the common poll of a waiting
 * application), and an eager send while nothing is queued
 * (ep->tx_queued is 0; the transport takes concurrent senders).
 *
 * Triggered operations (tnbc_trigger.c) are released under these locks
 * but always run with none held: counters change inside progress, and a
 * released send needs ep->lock again.  Every path that may change a
 * counter runs the released work once it has let go of its locks.
 */
#ifndef TNBC_LOCK_H
#define TNBC_LOCK_H

#include "tnbc.h"

/*
 * The endpoint lock goes through these, so that a debug build
 * (--enable-debug) knows who holds it and the functions whose comments
 * say "ep->lock held" can assert it, as libfabric's tcp provider
 * asserts its progress lock.  Without TNBC_DEBUG they are the bare
 * pthread calls.
 */
#ifdef TNBC_DEBUG
#include <assert.h>
#define tnbc_ep_assert_locked(ep)                                              \
	assert(atomic_load_explicit(&(ep)->lock_owner,                         \
				    memory_order_relaxed) ==                   \
	       (unsigned long)pthread_self())
static inline void tnbc_ep_owned(struct tnbc_ep *ep, bool held)
{
	atomic_store_explicit(&ep->lock_owner,
			      held ? (unsigned long)pthread_self() : 0,
			      memory_order_relaxed);
}
#else
#define tnbc_ep_assert_locked(ep) ((void)(ep))
static inline void tnbc_ep_owned(struct tnbc_ep *ep, bool held)
{
	(void)ep;
	(void)held;
}
#endif

static inline int tnbc_ep_trylock(struct tnbc_ep *ep)
{
	int ret = pthread_mutex_trylock(&ep->lock);

	if (!ret)
		tnbc_ep_owned(ep, true);
	return ret;
}

/* Waits for the lock without telling the engine (tnbc_ep_lock does). */
static inline void tnbc_ep_mutex_lock(struct tnbc_ep *ep)
{
	pthread_mutex_lock(&ep->lock);
	tnbc_ep_owned(ep, true);
}

static inline void tnbc_ep_unlock(struct tnbc_ep *ep)
{
	tnbc_ep_owned(ep, false);
	pthread_mutex_unlock(&ep->lock);
}

/* The endpoint lock, taken by a thread that posts or cancels: when it
 * must wait, and it is not the engine (which posts triggered work), the
 * engine learns that the application is busy here. */
static inline void tnbc_ep_lock(struct tnbc_ep *ep)
{
	struct tnbc_engine *e = &ep->domain->engine;

	if (!tnbc_ep_trylock(ep))
		return;
	if (!e->running || !pthread_equal(pthread_self(), e->thread))
		atomic_store_explicit(&e->app_blocked, true,
				      memory_order_relaxed);
	tnbc_ep_mutex_lock(ep);
}

#endif /* TNBC_LOCK_H */
