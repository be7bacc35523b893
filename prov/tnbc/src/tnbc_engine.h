/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The progress engine's state, one per domain (struct tnbc_domain.engine):
 * what wakes it, what it counts for fi_tnbc_engine_stats, and what only
 * its own thread touches.  tnbc_progress.c runs it; tnbc.h's wake-ups
 * (tnbc_engine_kick, tnbc_engine_nudge) reach it from anywhere.
 */
#ifndef TNBC_ENGINE_H
#define TNBC_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct tnbc_engine {
	pthread_t thread;
	/* Where the engine sleeps when the domain's first transport has no
	 * doorbell of its own (tnbc_xport_ops.bell): an eventfd that every
	 * wake-up writes (a transport's kick, an application thread, the
	 * stop).  -1 on a doorbell domain, whose engine sleeps on the
	 * doorbell. */
	int kick_fd;
	/* wake-ups written through tnbc_engine_kick (tests read it) */
	atomic_uint_fast64_t kicks;
	/* A kick is written and this sleep has not begun since: it ends
	 * the next wait, so later ones need not write (tnbc_engine_kick) */
	atomic_bool kick_pending;
	/* read by threads that kick it (a transport's waker among them) */
	atomic_bool running;
	atomic_bool stop;
	atomic_uint_fast64_t engine_pkts;
	atomic_uint_fast64_t app_pkts;
	atomic_uint_fast64_t sleeps;
	atomic_uint_fast64_t wakeups;
	atomic_uint_fast64_t rndv_pull;
	atomic_uint_fast64_t rndv_stream;
	atomic_uint_fast64_t sync_pkts; /* RTS, CTS, ACK and ready notes */
	atomic_uint_fast64_t rma_direct; /* fi_tnbc_engine_stats */
	atomic_int cpu;
	atomic_uint_fast64_t trig_queued;
	atomic_uint_fast64_t trig_fired;
	atomic_uint_fast64_t trig_canceled;
	atomic_uint_fast64_t trig_heap_steps;
	atomic_uint_fast64_t trig_fired_by_engine;
	atomic_uint_fast64_t trig_pending;
	atomic_uint_fast64_t stray_pkts; /* fit no transfer: dropped */
	/* named a source their connection does not come from: dropped */
	atomic_uint_fast64_t forged_pkts;
	atomic_uint_fast64_t unexp_held; /* left queued: unexp_max reached */
	/* application threads blocked in fi_cq_sread / fi_cntr_wait: they
	 * do not poll, so the engine must not leave progress to them */
	atomic_int app_waiting;
	/* an application thread waited for an endpoint lock since the
	 * engine last looked: it is driving progress, even though it has
	 * not polled lately (the engine may have held the lock, or the
	 * core) */
	atomic_bool app_blocked;
	/* whether the engine naps (a bounded sleep taken while an
	 * application thread polls): only then may a transport's kick be
	 * left to the polling thread (tnbc_domain_kick) */
	atomic_bool napping;
	/* Application threads inside an endpoint's progress, where one
	 * system call may take a large payload (hundreds of microseconds,
	 * its call's poll mark long past): app_in counts entries, app_out
	 * is app_in again on the way out, so a thread is inside while they
	 * differ.  Plain stores (lost ones among threads only keep "inside"
	 * on, which the engine then times out).  Engine only: the entry it
	 * last saw inside, and since when (tnbc_engine_app_polls). */
	atomic_uint app_in, app_out;
	unsigned inside_seen;
	uint64_t inside_ns;
	/* when it last moved anything or saw an application poll (engine
	 * thread only; chooses how it sleeps) */
	uint64_t active_ns;
	/* engine thread only: the host's load, sampled from /proc/loadavg,
	 * and the application window it implies (tnbc_progress.c) */
	int load_fd;
	uint64_t load_ns; /* when it was last sampled */
	uint64_t window_ns;
	bool busy; /* more runnable threads than CPUs */
	/* busy, for application threads: a poll that finds nothing while
	 * an operation waits on a peer gives the core away (tnbc_cq.c) */
	atomic_bool host_busy;
	/* rendezvous sends and RMA operations in flight in the domain */
	atomic_int peer_waits;
	/* the engine thread's pthread_self(), stored by the thread itself
	 * (0 until it runs) */
	atomic_uintptr_t self;
	/* served by the process's engine thread with other domains
	 * (tnbc_engine_attach), not a thread of its own: threads that wake
	 * it read it, and ring the host thread's own word (tnbc_host_bell),
	 * not the domain's doorbell */
	atomic_bool shared;
	/* engine thread only: its turns' state (tnbc_engine_turn) */
	uint64_t t_last, t_check, t_nap_ns;
	bool t_app;
};

/*
 * Where this process's threads wake the engine thread that serves
 * several domains (tnbc_progress.c, tnbc_engine_attach).  It sleeps on
 * their doorbells, which peers ring, and on this word, which only the
 * process's own threads ring: a private futex, whose waiters the kernel
 * finds without looking up a shared page (on the 2-core VM of
 * docs/provider-design.md, *A private word for the process's wakes*,
 * a wake of a shared word cost 0.5 us more, an eighth of a deferred
 * post).
 */
struct tnbc_host_bell {
	atomic_uint seq;
	atomic_bool asleep; /* from before its token to after its wait */
};

extern struct tnbc_host_bell tnbc_host_bell;

#endif /* TNBC_ENGINE_H */
