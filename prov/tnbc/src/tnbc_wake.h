/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The engine's wake-ups and what they look at: any thread, any lock
 * held (a transport's waker too) queues work and wakes the engine
 * through these inlines, without calling up into tnbc_progress.c, as
 * libfabric's tcp provider wakes its progress.
 */
#ifndef TNBC_WAKE_H
#define TNBC_WAKE_H

#include <linux/futex.h>
#include <sys/syscall.h>

#include "tnbc.h"

/* Whether the calling thread is the domain's engine. */
static inline bool tnbc_engine_is_self(struct tnbc_domain *dom)
{
	return atomic_load_explicit(&dom->engine.self, memory_order_relaxed) ==
	       (uintptr_t)pthread_self();
}

/* Whether an application thread polled within the window, as any of
 * the domain's transports saw it: each marks in its own way (shm's
 * skips reading the clock on fast polls, and lags once they turn slow,
 * as when one takes a large payload). */
static inline bool tnbc_dom_xapp_active(struct tnbc_domain *dom)
{
	if (dom->xops->app_active(dom->xdom))
		return true;
	for (unsigned i = 1; i < dom->nxp; i++)
		if (dom->xp[i].ops->app_active(dom->xp[i].xdom))
			return true;
	return false;
}

/* An application thread enters (or leaves) an endpoint's progress, or
 * takes a packet inside it (in: each looks like a new entry, so that a
 * call that keeps taking packets never looks stuck). */
static inline void tnbc_app_inside(struct tnbc_domain *dom, bool in)
{
	struct tnbc_engine *e = &dom->engine;
	unsigned v = atomic_load_explicit(&e->app_in, memory_order_relaxed);

	if (in)
		atomic_store_explicit(&e->app_in, v + 1, memory_order_relaxed);
	else
		atomic_store_explicit(&e->app_out, v, memory_order_relaxed);
}

/* Whether an application thread is inside an endpoint's progress; the
 * entry it is at in *in when it is. */
static inline bool tnbc_app_is_inside(struct tnbc_domain *dom, unsigned *in)
{
	unsigned v =
		atomic_load_explicit(&dom->engine.app_in, memory_order_relaxed);

	if (in)
		*in = v;
	return v !=
	       atomic_load_explicit(&dom->engine.app_out, memory_order_relaxed);
}

/* Rings the process's engine thread (tnbc_host_bell).  Pairs with the
 * store of asleep before the engine's token (tnbc_engine_round): either
 * the engine's token counts this ring, or this sees it asleep. */
static inline void tnbc_host_bell_ring(void)
{
	atomic_fetch_add_explicit(&tnbc_host_bell.seq, 1, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&tnbc_host_bell.asleep, memory_order_relaxed))
		(void)syscall(SYS_futex, &tnbc_host_bell.seq,
			      FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The engine's wake-ups: any thread, any lock held, a transport's
 * waker too.  Inline here so that whatever queues work wakes the engine
 * without calling up into it. */
/* Ends the engine's sleep, wherever it sleeps. */
static inline void tnbc_engine_wake(struct tnbc_domain *dom)
{
	uint64_t one = 1;

	if (atomic_load_explicit(&dom->engine.shared, memory_order_relaxed))
		tnbc_host_bell_ring();
	else if (dom->engine.kick_fd < 0)
		dom->xops->bell->wake(dom->xdom);
	else
		(void)!write(dom->engine.kick_fd, &one, sizeof(one));
}

/* One kick per sleep is written, however many threads ask.  Woken, the
 * engine may wait for a CPU for milliseconds (a batch thread on a host
 * whose cores the application's threads poll on), and every packet
 * taken meanwhile asked again: a system call each, for nothing.  A kick
 * skipped here finds the mark of one made since the engine last cleared
 * it: that one's write either ends the wait, or was taken with a token
 * read after the clear (a domain's bell's), and then the engine sees the
 * mark and does not wait (the host word's token is read before the
 * clear, so a write made after it always ends the wait).  The skipped
 * kick's work is queued before this exchange, so before the engine's
 * next clear, and its next look finds it, as it finds the work of a
 * kick written before a token. */
static inline void tnbc_engine_kick(struct tnbc_domain *dom)
{
	if (!dom->engine.running ||
	    atomic_exchange(&dom->engine.kick_pending, true))
		return;
	atomic_fetch_add_explicit(&dom->engine.kicks, 1, memory_order_relaxed);
	tnbc_engine_wake(dom);
}

/* Work queued for the engine (packets, sends that found a full queue,
 * reads to make) is taken by an application thread that polls, as the
 * engine would: a wake-up then only preempts that thread on its core
 * (with ranks bound to cores, the engine shares the rank's), once per
 * message of a stream.  But only while the engine naps, which ends by
 * itself within TNBC_NAP_MAX windows: one that sleeps without a bound,
 * because the application had stopped, would never see work queued
 * just before the application stopped again.  The fence orders the
 * caller's queueing before the look at napping, and pairs with the
 * store in tnbc_engine_nap: either the engine's look before it sleeps
 * finds the work, or this sees it sleep unbounded. */
static inline void tnbc_engine_nudge(struct tnbc_domain *dom)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&dom->engine.napping) &&
	    (tnbc_app_is_inside(dom, NULL) || tnbc_dom_xapp_active(dom)))
		return;
	tnbc_engine_kick(dom);
}

#endif /* TNBC_WAKE_H */
