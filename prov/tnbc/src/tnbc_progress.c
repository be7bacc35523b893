/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Progress: the engine thread (one per process where the domains'
 * doorbells allow, else one per domain) and the opportunistic progress
 * done inside application calls.
 *
 * Progress is FI_PROGRESS_AUTO.  Two kinds of threads drive it:
 *  - the domain's engine thread, which polls every endpoint, spins for a
 *    short while after the last activity and then sleeps: on shm's
 *    doorbell, which peers ring when they queue a packet for it, or,
 *    in a domain without shm, on an eventfd of its own that the network
 *    transports' threads write (tnbc_engine);
 *  - application threads, which progress their endpoints opportunistically
 *    inside fi_cq_read() and friends.  While they poll at least once per
 *    FI_TNBC_APP_WINDOW_US, the application owns progress: the engine
 *    does no work and naps, longer the longer the polling lasts, so it
 *    never takes the core a polling thread needs, and peers need not
 *    ring the doorbell (a syscall and a context switch per message).
 *    Once the application has not polled for a window, senders ring
 *    again; a packet that came just before that waits at most for the
 *    end of the nap (fi_tnbc(7)), never for the application to call in
 *    again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/futex.h>

#include "tnbc.h"
#include "tnbc_lock.h"
#include "tnbc_trigger.h"
#include "tnbc_xfer.h"
#include "tnbc_progress.h"
#include "tnbc_xports.h"
#include "tnbc_msg.h"
#include "tnbc_wake.h"

/* Longest nap while work is queued for a peer whose queue is full. */
#define TNBC_BACKOFF_NS 20000u
/* Longest nap while a receive queue waits behind a sender's cell (the
 * transport steps over it if that sender died). */
#define TNBC_STALL_NS 10000000u
/* How often a sleeping engine wakes to see whether the members a
 * collective waits for still live (tnbc_ep_check_peers checks at most
 * every 100 ms too): a dead member fails the operation within about
 * twice this per tree level. */
#define TNBC_WATCH_NS 100000000u
/* Longest nap, in application windows, while the application polls: a
 * packet that came within a window of the application's last poll waits
 * at most this long if the application then stops.  Every wake-up
 * preempts a thread that polls, and costs it tens of microseconds on a
 * busy or virtual machine. */
#define TNBC_NAP_MAX 16u

/* The application away, the engine sleeps in steps of at most this long
 * while it has had work within TNBC_IDLE_NS, and without a bound once it
 * has not (TNBC_SLEEP_SHORT and _LONG): only the unbounded sleep needs
 * the barrier that lets senders publish without a fence, and that
 * barrier interrupts every computing rank's CPU. */
#define TNBC_SHORT_SLEEP_NS 10000000u
#define TNBC_IDLE_NS	    1000000000u

/* On a host with more runnable threads than CPUs (ranks oversubscribe
 * the cores), an application thread waits for a core for milliseconds
 * between polls, and every wake-up of an engine only adds a thread that
 * competes with the applications: polls then count for this long, and
 * the engine takes over only from applications that stopped for that
 * long.  The load is looked at this often. */
#define TNBC_BUSY_WINDOW_NS 10000000u
#define TNBC_LOAD_CHECK_NS  10000000u

/* The longest nap: how long a packet left to an application that has
 * just stopped may wait for the engine. */
static inline uint64_t tnbc_nap_cap_ns(void)
{
	return (uint64_t)tnbc_env.app_window_us * 1000u * TNBC_NAP_MAX;
}

static inline void tnbc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Returns how many packets or queued operations it moved. */
int tnbc_ep_progress(struct tnbc_ep *ep, bool engine)
{
	int n;

	/* The common poll of a waiting application finds nothing: it says
	 * so without the lock (a posting thread holds it for as long as it
	 * takes to queue work, and marks the work before letting go). */
	if (!atomic_load_explicit(&ep->work, memory_order_relaxed) &&
	    tnbc_ep_xidle(ep))
		return 0;
	if (tnbc_ep_trylock(ep))
		return 0;
	if (!engine)
		tnbc_app_inside(ep->domain, true);
	/* Eager messages nobody has posted a receive for stay in the queue
	 * while it has room: the receive posted for one takes it straight
	 * from there (one copy, no unexpected buffer), and the engine
	 * leaves a computing application its core.  The application's own
	 * polls leave them too: taken now, they would be copied twice.
	 * For the same reason a poll stops at an unmatched eager message
	 * once no receive is posted, while the queue is still quiet. */
	if (tnbc_ep_rx_idle(ep) && tnbc_ep_xquiet(ep)) {
		n = 0;
	} else {
		struct tnbc_rx_ctx c = {.ep = ep,
					.engine = engine,
					.lazy = true,
					.batch = true,
					.app = !engine};

		n = tnbc_ep_xpoll(&c, TNBC_RX_POLL_BUDGET);
	}
	/* Triggered work that is ready (most often made so by this pass's
	 * completions) runs before the reads the pass matched, which the
	 * next pass makes, once: a small message's completion must not
	 * wait for a large one's copy behind it.  The MPI glue's T-NBC
	 * waits in its call for the edges of a message and not for its
	 * body, but the ready words are written by triggered copies, which
	 * ran only after the body's read: every call of NPB IS waited for
	 * all its data.  The engine is nudged: the thread that held them
	 * may be about to leave. */
	if (ep->npulls && !ep->pulls_held && tnbc_trig_has_ready(ep->domain)) {
		ep->pulls_held = true;
		if (!engine)
			tnbc_engine_nudge(ep->domain);
	} else if (ep->npulls) {
		n += (int)ep->npulls;
		tnbc_ep_flush_pulls(ep);
	}
	if (!tnbc_list_empty(&ep->ctrl_queue) ||
	    !tnbc_list_empty(&ep->tx_queue))
		n += tnbc_tx_queue_progress(ep, !engine);
	tnbc_ep_check_peers(ep, engine);
	atomic_store_explicit(&ep->work,
			      !tnbc_list_empty(&ep->ctrl_queue) ||
				      !tnbc_list_empty(&ep->tx_queue) ||
				      !tnbc_list_empty(&ep->stream_rx) ||
				      ep->rndv.used || ep->rma_ids.used ||
				      !tnbc_list_empty(&ep->rx_coll) ||
				      ep->npulls,
			      memory_order_relaxed);
	if (!engine)
		tnbc_app_inside(ep->domain, false);
	tnbc_ep_unlock(ep);
	if (n)
		atomic_fetch_add_explicit(
			engine ? &ep->domain->engine.engine_pkts
			       : &ep->domain->engine.app_pkts,
			(uint64_t)n, memory_order_relaxed);
	return n;
}

void tnbc_domain_progress(struct tnbc_domain *dom, bool engine)
{
	struct tnbc_list *it;

	/* Only application calls add or remove endpoints, and with
	 * FI_THREAD_DOMAIN the application makes one call at a time in
	 * the domain: its progress reads the list without the lock (two
	 * locked instructions on every poll).  The engine always takes it. */
	bool unlocked = !engine && dom->threading == FI_THREAD_DOMAIN;

	if (!engine)
		tnbc_dom_xapp_mark(dom, true);
	if (!unlocked && pthread_rwlock_tryrdlock(&dom->ep_lock)) {
		tnbc_trig_run(dom, engine);
		return;
	}
	for (it = dom->ep_list.next; it != &dom->ep_list; it = it->next)
		tnbc_ep_progress(
			tnbc_container_of(it, struct tnbc_ep, dom_entry),
			engine);
	if (!unlocked)
		pthread_rwlock_unlock(&dom->ep_lock);
	tnbc_trig_run(dom, engine);
}

static int tnbc_engine_pass(struct tnbc_domain *dom)
{
	struct tnbc_list *it;
	int n = 0;

	pthread_rwlock_rdlock(&dom->ep_lock);
	for (it = dom->ep_list.next; it != &dom->ep_list; it = it->next)
		n += tnbc_ep_progress(
			tnbc_container_of(it, struct tnbc_ep, dom_entry), true);
	pthread_rwlock_unlock(&dom->ep_lock);
	/* Only what it ran counts: work another thread is running (an
	 * application thread, at the end of its call) is not the engine's,
	 * and counting it kept the engine passing, on a core an application
	 * thread needed, for as long as that thread ran it (a window at a
	 * time: 163 000 passes in a run of 882 two-rank allreduces). */
	if (tnbc_trig_has_ready(dom))
		n += (int)tnbc_trig_run_ready(dom, true);
	return n;
}

/* Whether an application thread polled since the last call, in which
 * case progress is its own (see tnbc.h).  Engine only. */
static bool tnbc_engine_app_polls(struct tnbc_domain *dom)
{
	bool app = tnbc_dom_xapp_active(dom);

	if (!app && atomic_load_explicit(&dom->engine.app_blocked,
					 memory_order_relaxed)) {
		atomic_store_explicit(&dom->engine.app_blocked, false,
				      memory_order_relaxed);
		app = true;
	}
	/* Another thread runs triggered work (the engine never holds it
	 * here): an application thread that released it while posting,
	 * which runs what is released meanwhile too before it lets go.  It
	 * drives progress, as a polling one does; its posting call marks
	 * no poll, and an engine that saw none kept passing, for the work
	 * that thread was running, on the core it needed. */
	if (!app &&
	    atomic_load_explicit(&dom->tu.running, memory_order_relaxed))
		app = true;
	/* An application thread inside an endpoint's progress is polling,
	 * however long ago its call began, but not for longer than the
	 * engine naps at most: one stuck there (a sender that stopped in
	 * the middle of a payload, until FI_TNBC_TCP_TIMEOUT_MS) must not
	 * keep the engine from the other endpoints. */
	if (!app) {
		unsigned in;

		if (tnbc_app_is_inside(dom, &in)) {
			uint64_t now = tnbc_now_ns();

			if (in != dom->engine.inside_seen) {
				dom->engine.inside_seen = in;
				dom->engine.inside_ns = now;
			}
			app = now - dom->engine.inside_ns < tnbc_nap_cap_ns();
		}
	}

	/* Polls made by a thread that now blocks in a wait say nothing:
	 * progress is the engine's, and peers must ring again. */
	if (app && atomic_load_explicit(&dom->engine.app_waiting,
					memory_order_relaxed)) {
		app = false;
		tnbc_dom_xapp_mark(dom, false);
	}
	return app;
}

/* Whether more threads are runnable on the host than it has CPUs. */
static bool tnbc_engine_host_busy(struct tnbc_engine *e)
{
	char buf[128];
	ssize_t n;

	if (e->load_fd < 0)
		return false;
	n = pread(e->load_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return tnbc_loadavg_oversubscribed(buf, sysconf(_SC_NPROCESSORS_ONLN));
}

/* Samples the host's load now and then, and publishes the application
 * window that goes with it. */
static void tnbc_engine_load_check(struct tnbc_domain *dom, uint64_t now)
{
	struct tnbc_engine *e = &dom->engine;
	bool busy;

	if (now - e->load_ns < TNBC_LOAD_CHECK_NS)
		return;
	e->load_ns = now;
	busy = tnbc_engine_host_busy(e);
	if (busy == e->busy)
		return;
	e->busy = busy;
	atomic_store_explicit(&e->host_busy, busy, memory_order_relaxed);
	e->window_ns =
		busy ? TNBC_BUSY_WINDOW_NS : tnbc_env.app_window_us * 1000u;
	if (e->window_ns < tnbc_env.app_window_us * 1000u)
		e->window_ns = tnbc_env.app_window_us * 1000u;
	FI_DBG(&tnbc_prov, FI_LOG_DOMAIN,
	       "host %s: application window %" PRIu64 " us\n",
	       busy ? "oversubscribed" : "no longer oversubscribed",
	       e->window_ns / 1000u);
	tnbc_dom_xset_window(dom, e->window_ns);
}

/* What an endpoint needs from a sleeping engine. */
enum tnbc_ep_need {
	TNBC_NEED_NONE, /* a doorbell will say when there is work */
	TNBC_NEED_WATCH, /* steps wait on members: check they live */
	TNBC_NEED_STALLED, /* its queue waits on a sender: look again */
	TNBC_NEED_RETRY, /* queued sends or answers: retry soon */
	TNBC_NEED_POLL, /* packets to take now (or its state is unknown) */
};

/* Looked at under the endpoint's lock, after the engine announced its
 * sleep (sleep_begin), so that whatever it misses here a sender or an
 * application thread saw it announced, and rings or kicks. */
static enum tnbc_ep_need tnbc_ep_need(struct tnbc_ep *ep)
{
	enum tnbc_ep_need need = TNBC_NEED_NONE;

	/* Whoever holds it is progressing the endpoint.  It may also be
	 * preempted with the lock (a host with more threads than cores):
	 * spinning for it would take the core it needs, so look again
	 * after a short nap instead. */
	if (tnbc_ep_trylock(ep))
		return TNBC_NEED_RETRY;
	if (ep->npulls || (tnbc_ep_xpending(ep) &&
			   !(tnbc_ep_rx_idle(ep) && tnbc_ep_xquiet(ep))))
		need = TNBC_NEED_POLL;
	else if (!tnbc_list_empty(&ep->tx_queue) ||
		 !tnbc_list_empty(&ep->ctrl_queue))
		need = TNBC_NEED_RETRY;
	else if (tnbc_ep_xstalled(ep))
		need = TNBC_NEED_STALLED;
	else if (!tnbc_list_empty(&ep->rx_coll))
		need = TNBC_NEED_WATCH;
	tnbc_ep_unlock(ep);
	return need;
}

/* Takes off the marks of endpoints that no longer have receives
 * posted (tnbc_ep.rx_marked), so that eager messages to an application
 * that computes stay in their queues without waking this engine. */
static void tnbc_engine_settle(struct tnbc_domain *dom)
{
	struct tnbc_list *it;

	pthread_rwlock_rdlock(&dom->ep_lock);
	for (it = dom->ep_list.next; it != &dom->ep_list; it = it->next) {
		struct tnbc_ep *ep =
			tnbc_container_of(it, struct tnbc_ep, dom_entry);

		if (!atomic_load_explicit(&ep->rx_marked,
					  memory_order_relaxed) ||
		    atomic_load_explicit(&ep->rx_nposted,
					 memory_order_relaxed) ||
		    tnbc_ep_trylock(ep))
			continue;
		tnbc_ep_rx_settle(ep);
		tnbc_ep_unlock(ep);
	}
	pthread_rwlock_unlock(&dom->ep_lock);
}

/* Takes the kicks written so far (kick_fd): one written from now on
 * keeps the next wait from sleeping. */
static void tnbc_engine_kicks_take(struct tnbc_engine *e)
{
	uint64_t n;

	(void)!read(e->kick_fd, &n, sizeof(n));
}

/* Sleeps on kick_fd until a kick is written or timeout_ns (0: none)
 * passes; nanoseconds, since naps are shorter than poll's millisecond. */
static void tnbc_engine_kick_wait(struct tnbc_engine *e, uint64_t timeout_ns)
{
	struct pollfd pfd = {.fd = e->kick_fd, .events = POLLIN};
	struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000u),
			      .tv_nsec = (long)(timeout_ns % 1000000000u)};

	(void)ppoll(&pfd, 1, timeout_ns ? &ts : NULL, NULL);
}

/* A sleep one domain's engine prepared: the doorbell's token and how
 * long (ns, 0: no bound). */
struct tnbc_nap {
	unsigned token;
	uint64_t timeout;
};

/* Prepares dom's sleep until a peer rings the bell, a thread kicks, or
 * the timeout passes (tnbc_engine_nap waits).  False when it must not
 * sleep at all (work found, a kick pending): nothing is left to undo. */
static bool tnbc_engine_nap_begin(struct tnbc_domain *dom, uint64_t *nap_ns,
				  bool app, struct tnbc_nap *np)
{
	const struct tnbc_xport_ops *xops = dom->xops;
	struct tnbc_engine *e = &dom->engine;
	uint64_t window = e->window_ns;
	uint64_t cap = tnbc_nap_cap_ns();
	uint64_t timeout = 0, now = tnbc_now_ns();
	enum tnbc_ep_need need = TNBC_NEED_NONE;
	enum tnbc_sleep how = TNBC_SLEEP_NAP;
	struct tnbc_list *it;
	unsigned token;

	/* The longer the application keeps polling, the longer the naps
	 * (up to TNBC_NAP_MAX windows): each wake-up preempts a thread that
	 * is doing useful work on a busy machine. */
	if (app) {
		*nap_ns = *nap_ns ? *nap_ns * 2 : window;
		if (cap < window)
			cap = window;
		if (*nap_ns > cap)
			*nap_ns = cap;
		timeout = *nap_ns;
		e->active_ns = now;
	} else if (now - e->active_ns < TNBC_IDLE_NS) {
		*nap_ns = 0;
		how = TNBC_SLEEP_SHORT;
		timeout = TNBC_SHORT_SLEEP_NS;
	} else {
		*nap_ns = 0;
		how = TNBC_SLEEP_LONG;
	}
	atomic_store(&e->napping, how == TNBC_SLEEP_NAP);
	/* Before the token: a sender that sees the mark gone and this
	 * engine awake leaves its eager message for a receive yet to be
	 * posted, and a receive posted meanwhile marks the endpoint again,
	 * so that the look below finds the message for it. */
	if (!app)
		tnbc_engine_settle(dom);
	/* The token first (on a domain without a doorbell, the kicks
	 * taken so far; the kicks of a domain of the shared thread ring the
	 * host word, whose token tnbc_engine_round read before this): a
	 * kick or a ring from now on cuts the sleep short, so nothing found
	 * missing below can be lost.  Kicks are written again from here on
	 * (tnbc_engine_kick); one that came before the token may have been
	 * taken with it, and is looked for below. */
	atomic_store(&e->kick_pending, false);
	if (e->kick_fd >= 0)
		tnbc_engine_kicks_take(e);
	token = xops->sleep_begin(dom->xdom, how);
	/* the others watch for packets from now on, and kick */
	for (unsigned i = 1; i < dom->nxp; i++)
		(void)dom->xp[i].ops->sleep_begin(dom->xp[i].xdom, how);
	pthread_rwlock_rdlock(&dom->ep_lock);
	/* With an application thread polling, queued packets are its to
	 * take; only an unbounded sleep must not miss one. */
	for (it = dom->ep_list.next;
	     !app && it != &dom->ep_list && need != TNBC_NEED_POLL;
	     it = it->next) {
		enum tnbc_ep_need n = tnbc_ep_need(
			tnbc_container_of(it, struct tnbc_ep, dom_entry));

		if (n > need)
			need = n;
	}
	pthread_rwlock_unlock(&dom->ep_lock);
	if (need == TNBC_NEED_RETRY)
		timeout = TNBC_BACKOFF_NS;
	else if (need == TNBC_NEED_STALLED &&
		 (!timeout || timeout > TNBC_STALL_NS))
		timeout = TNBC_STALL_NS;
	else if (need == TNBC_NEED_WATCH &&
		 (!timeout || timeout > TNBC_WATCH_NS))
		timeout = TNBC_WATCH_NS;
	/* Released work must not wait through an unbounded sleep.  While
	 * the application polls, it runs released work itself at the end
	 * of each call, and a bounded nap is short anyway. */
	if (need == TNBC_NEED_POLL || atomic_load(&e->stop) ||
	    (!app && tnbc_trig_has_ready(dom)) ||
	    atomic_load(&e->kick_pending)) {
		if (e->kick_fd < 0)
			xops->bell->sleep_cancel(dom->xdom);
		atomic_store(&e->napping, false);
		return false;
	}
	np->token = token;
	np->timeout = timeout;
	atomic_fetch_add_explicit(&e->sleeps, 1, memory_order_relaxed);
	return true;
}

/* The end of a sleep tnbc_engine_nap_begin prepared, slept or not. */
static void tnbc_engine_nap_end(struct tnbc_domain *dom, bool slept)
{
	struct tnbc_engine *e = &dom->engine;

	if (e->kick_fd < 0)
		dom->xops->bell->sleep_cancel(dom->xdom);
	atomic_store(&e->napping, false);
	/* a sleep another domain's work called off still counts as one
	 * that ended, so that sleeps - wakeups says who sleeps now */
	(void)slept;
	atomic_fetch_add_explicit(&e->wakeups, 1, memory_order_relaxed);
}

/* One domain's sleep, on its own doorbell or eventfd. */
static void tnbc_engine_nap(struct tnbc_domain *dom, uint64_t *nap_ns, bool app)
{
	struct tnbc_engine *e = &dom->engine;
	struct tnbc_nap np;

	if (!tnbc_engine_nap_begin(dom, nap_ns, app, &np))
		return;
	if (e->kick_fd < 0)
		dom->xops->bell->sleep_wait(dom->xdom, np.token, np.timeout);
	else
		tnbc_engine_kick_wait(e, np.timeout);
	tnbc_engine_nap_end(dom, true);
}

/*
 * Chooses where the engine thread runs, away from the application's
 * threads where the machine allows: the CPUs named by FI_TNBC_ENGINE_CPUS,
 * else the idle hyperthread siblings of the CPUs the process is bound to.
 * Without either, the engine keeps the process's binding (on a machine
 * with fewer cores than busy threads there is nowhere better to go).
 *
 * Runs on the engine thread, before tnbc_engine_start returns (see
 * there).
 */
static void tnbc_engine_place(void)
{
	hwloc_bitmap_t app = NULL, set = NULL;
	hwloc_topology_t topo;
	hwloc_obj_t core = NULL;

	if (hwloc_topology_init(&topo))
		return;
#if HWLOC_API_VERSION >= 0x00020100
	/* The x86 backend reads CPUID on each CPU in turn by moving the
	 * calling thread there; the OS's view of the cores is all this
	 * needs. */
	hwloc_topology_set_components(
		topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
#endif
	if (hwloc_topology_load(topo))
		goto out;
	app = hwloc_bitmap_alloc();
	set = hwloc_bitmap_alloc();
	if (!app || !set)
		goto out;
	if (tnbc_env.engine_cpus) {
		if (hwloc_bitmap_list_sscanf(set, tnbc_env.engine_cpus) ||
		    hwloc_bitmap_iszero(set)) {
			FI_WARN(&tnbc_prov, FI_LOG_DOMAIN,
				"FI_TNBC_ENGINE_CPUS=%s is not a CPU list\n",
				tnbc_env.engine_cpus);
			goto out;
		}
	} else {
		if (hwloc_get_cpubind(topo, app, HWLOC_CPUBIND_PROCESS))
			goto out;
		/* PUs that share a core with the binding but are not in it */
		while ((core = hwloc_get_next_obj_covering_cpuset_by_type(
				topo, app, HWLOC_OBJ_CORE, core)))
			hwloc_bitmap_or(set, set, core->cpuset);
		hwloc_bitmap_andnot(set, set, app);
	}
	hwloc_bitmap_and(set, set, hwloc_topology_get_allowed_cpuset(topo));
	if (hwloc_bitmap_iszero(set))
		goto out;
	if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_THREAD))
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN,
			"cannot bind the progress engine\n");
out:
	hwloc_bitmap_free(app);
	hwloc_bitmap_free(set);
	hwloc_topology_destroy(topo);
}

/* What tnbc_engine_start hands the engine thread, on its stack. */
struct tnbc_engine_boot {
	struct tnbc_domain *dom;
	sem_t placed;
};

/* A peer's doorbell wakes the engine whatever the application does.
 * Woken as an ordinary thread, it preempts the thread running on the CPU
 * it wakes on, most often an application thread that is polling and
 * would have taken the packet itself: a context switch each way, a few
 * microseconds in a virtual machine, for every message.  A batch thread
 * is not run ahead of the running one on wake-up; it runs at once on an
 * idle CPU, and otherwise when the running thread's slice ends, with the
 * same share of the CPU as any thread. */
static void tnbc_engine_batch(void)
{
	struct sched_param sp = {.sched_priority = 0};
	int err;

	if (!tnbc_env.engine_batch)
		return;
	err = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
	if (err)
		FI_INFO(&tnbc_prov, FI_LOG_DOMAIN,
			"engine thread stays SCHED_OTHER: %s\n", strerror(err));
}

/* The engine thread's own state of a domain, before its first turn. */
static void tnbc_engine_run_init(struct tnbc_domain *dom)
{
	struct tnbc_engine *e = &dom->engine;
	uint64_t now = tnbc_now_ns();

	e->window_ns = tnbc_env.app_window_us * 1000u;
	e->active_ns = now;
	e->busy = false;
	e->load_ns = 0;
	e->load_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	e->t_last = e->t_check = now;
	e->t_nap_ns = 0;
	e->t_app = false;
}

/*
 * One turn of the engine for dom.  While an application thread polls,
 * it moves the data itself: working or spinning here would only take the
 * core it needs, so the engine naps and steps in once the polls stop.
 * True: look again at once (it moved something, or spins); false: it
 * would sleep now (e->t_app says whether an application polls).
 */
static bool tnbc_engine_turn(struct tnbc_domain *dom)
{
	struct tnbc_engine *e = &dom->engine;
	uint64_t window = tnbc_env.app_window_us * 1000u;

	if (!e->t_app) {
		int n = tnbc_engine_pass(dom);
		uint64_t now = tnbc_now_ns();

		/* Under steady traffic the engine never runs out of work:
		 * look once a window for a polling thread. */
		if (now - e->t_check >= window) {
			e->t_check = now;
			e->t_app = tnbc_engine_app_polls(dom);
			if (e->t_app)
				return false;
		}
		if (n) {
			e->t_last = e->active_ns = now;
			return true;
		}
		if (now - e->t_last < tnbc_env.spin_us * 1000u) {
			tnbc_cpu_relax();
			return true;
		}
	}
	e->t_app = tnbc_engine_app_polls(dom);
	return false;
}

/* After a sleep (or one that found work before it began). */
static void tnbc_engine_woke(struct tnbc_domain *dom)
{
	struct tnbc_engine *e = &dom->engine;

	atomic_store_explicit(&e->cpu, sched_getcpu(), memory_order_relaxed);
	e->t_last = e->t_check = tnbc_now_ns();
	tnbc_engine_load_check(dom, e->t_last);
	/* Woken by a sender that did not see the application poll, or by
	 * the end of a nap: a polling application takes the packets
	 * itself, and a pass now would only fight it for the endpoint
	 * locks and the core. */
	e->t_app = tnbc_engine_app_polls(dom);
}

static void *tnbc_engine_main(void *arg)
{
	struct tnbc_engine_boot *boot = arg;
	struct tnbc_domain *dom = boot->dom;
	struct tnbc_engine *e = &dom->engine;

	atomic_store_explicit(&e->self, (uintptr_t)pthread_self(),
			      memory_order_relaxed);
	/* what ps -L and the tests count */
	pthread_setname_np(pthread_self(), "tnbc-engine");
	tnbc_engine_run_init(dom);
	tnbc_engine_place();
	tnbc_engine_batch();
	sem_post(&boot->placed); /* boot is gone from here on */
	atomic_store(&e->cpu, sched_getcpu());
	while (!atomic_load_explicit(&e->stop, memory_order_relaxed)) {
		if (tnbc_engine_turn(dom))
			continue;
		tnbc_engine_nap(dom, &e->t_nap_ns, e->t_app);
		tnbc_engine_woke(dom);
	}
	if (e->load_fd >= 0)
		close(e->load_fd);
	return NULL;
}

/*
 * One engine thread for the domains of a process.
 *
 * A process whose point-to-point traffic runs on tnbc (Open MPI's OFI
 * MTL) and whose collectives do too (the MPI glue) opens two domains;
 * two engine threads would fight for the cores the ranks need.  Domains
 * whose doorbell is a futex word (shared memory's; sleep_word) are served
 * by this one thread instead: each takes its turn in a round, and once
 * every one of them would sleep, the thread sleeps on all their words
 * at once (futex_waitv, Linux 5.16), with the shortest of their
 * timeouts, so a ring or a kick of any of them wakes it.  A domain
 * without one (an eventfd engine: TCP or verbs first) keeps a thread of
 * its own, as do domains past TNBC_ENGINE_DOMS.
 *
 * Locks: tnbc_host.lock guards the list and the thread's life.  The
 * thread takes a snapshot of the list under it at the top of each round
 * and publishes seen = gen, so a domain that leaves waits for a round
 * that no longer holds it (tnbc_engine_detach).
 */
#define TNBC_ENGINE_DOMS 16

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct tnbc_domain *doms[TNBC_ENGINE_DOMS];
	int ndoms;
	/* gen: moved on by every change of doms, read by the round as it
	 * goes to sleep (atomic: outside the lock there) */
	_Atomic uint64_t gen;
	uint64_t seen;
	bool running, stop;
	pthread_t thread;
	uintptr_t self;
	int waitv; /* 1: futex_waitv works; -1: it does not; 0: unknown */
} tnbc_host = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

struct tnbc_host_bell tnbc_host_bell;

/* One round: every domain's turn, then, if all would sleep, one sleep on
 * all their doorbells and the process's own word. */
static void tnbc_engine_round(struct tnbc_domain **doms, int n, uint64_t gen)
{
	struct futex_waitv w[TNBC_ENGINE_DOMS + 1];
	struct tnbc_nap np[TNBC_ENGINE_DOMS];
	bool begun[TNBC_ENGINE_DOMS], sleep = true, again = false;
	uint64_t timeout = 0;
	struct timespec ts;
	unsigned token;

	for (int i = 0; i < n; i++)
		again |= tnbc_engine_turn(doms[i]);
	if (again)
		return;
	/* Before the domains clear their kick marks (tnbc_engine_nap_begin):
	 * a kick from there on rings past this token. */
	atomic_store(&tnbc_host_bell.asleep, true);
	token = atomic_load(&tnbc_host_bell.seq);
	/* A domain joined since this round's list was taken: its bell is
	 * not in the wait.  The ring that follows the join comes after the
	 * change of gen, so it is either past the token or seen here. */
	if (atomic_load(&tnbc_host.gen) != gen) {
		atomic_store(&tnbc_host_bell.asleep, false);
		return;
	}
	for (int i = 0; i < n; i++) {
		struct tnbc_engine *e = &doms[i]->engine;

		begun[i] = tnbc_engine_nap_begin(doms[i], &e->t_nap_ns,
						 e->t_app, &np[i]);
		sleep &= begun[i];
		if (!begun[i])
			continue;
		if (np[i].timeout && (!timeout || np[i].timeout < timeout))
			timeout = np[i].timeout;
	}
	if (sleep) {
		for (int i = 0; i < n; i++) {
			atomic_uint *word = doms[i]->xops->bell->sleep_word(
				doms[i]->xdom, np[i].timeout);

			w[i] = (struct futex_waitv){
				.val = np[i].token,
				.uaddr = (uint64_t)(uintptr_t)word,
				.flags = FUTEX_32,
			};
		}
		w[n] = (struct futex_waitv){
			.val = token,
			.uaddr = (uint64_t)(uintptr_t)&tnbc_host_bell.seq,
			.flags = FUTEX_32 | FUTEX_PRIVATE_FLAG,
		};
		if (timeout) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			timeout += (uint64_t)ts.tv_nsec;
			ts.tv_sec += (time_t)(timeout / 1000000000u);
			ts.tv_nsec = (long)(timeout % 1000000000u);
		}
		(void)syscall(SYS_futex_waitv, w, (unsigned)n + 1, 0,
			      timeout ? &ts : NULL, CLOCK_MONOTONIC);
	}
	atomic_store(&tnbc_host_bell.asleep, false);
	for (int i = 0; i < n; i++) {
		if (begun[i])
			tnbc_engine_nap_end(doms[i], sleep);
		tnbc_engine_woke(doms[i]);
	}
}

static void *tnbc_engine_host_main(void *arg)
{
	struct tnbc_engine_boot *boot = arg;
	struct tnbc_domain *doms[TNBC_ENGINE_DOMS];
	int n;

	tnbc_host.self = (uintptr_t)pthread_self();
	pthread_setname_np(pthread_self(), "tnbc-engine");
	tnbc_engine_place();
	tnbc_engine_batch();
	sem_post(&boot->placed); /* boot is gone from here on */
	pthread_mutex_lock(&tnbc_host.lock);
	while (!tnbc_host.stop) {
		uint64_t gen = tnbc_host.gen;

		tnbc_host.seen = gen;
		pthread_cond_broadcast(&tnbc_host.cond);
		n = tnbc_host.ndoms;
		memcpy(doms, tnbc_host.doms, (size_t)n * sizeof(doms[0]));
		pthread_mutex_unlock(&tnbc_host.lock);
		tnbc_engine_round(doms, n, gen);
		pthread_mutex_lock(&tnbc_host.lock);
	}
	tnbc_host.seen = tnbc_host.gen;
	pthread_cond_broadcast(&tnbc_host.cond);
	pthread_mutex_unlock(&tnbc_host.lock);
	return NULL;
}

/*
 * Starts an engine thread running fn(boot) and returns once it has placed
 * itself.  The engine places itself first, and the application goes on
 * only then: hwloc's discovery loads and unloads its plugins, and beside
 * the application's first calls, which map and unmap queues,
 * ThreadSanitizer took a plugin's reuse of such memory for a race (a
 * clean-clone CI run, 1 in about 15).  Run by the application's thread
 * instead, it cost SEMI's receive a third, for reasons not found.
 */
static int tnbc_engine_spawn(pthread_t *thread, void *(*fn)(void *),
			     struct tnbc_domain *dom)
{
	struct tnbc_engine_boot boot = {.dom = dom};
	int ret;

	if (sem_init(&boot.placed, 0, 0))
		return -FI_EOTHER;
	ret = pthread_create(thread, NULL, fn, &boot);
	if (!ret)
		while (sem_wait(&boot.placed) && errno == EINTR)
			;
	sem_destroy(&boot.placed);
	if (ret) {
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN,
			"cannot start the progress engine: %s\n",
			strerror(ret));
		return -FI_EOTHER;
	}
	return 0;
}

/* Whether the kernel waits on several futex words (Linux 5.16). */
static bool tnbc_engine_waitv_works(void)
{
	atomic_uint word = 1;
	struct futex_waitv w = {.val = 0,
				.uaddr = (uint64_t)(uintptr_t)&word,
				.flags = FUTEX_32};

	/* the word is not 0: a kernel that knows the call says EAGAIN */
	if (!tnbc_host.waitv)
		tnbc_host.waitv = syscall(SYS_futex_waitv, &w, 1u, 0, NULL,
					  CLOCK_MONOTONIC) < 0 &&
						  errno == EAGAIN
					  ? 1
					  : -1;
	return tnbc_host.waitv > 0;
}

/* Serves dom from the process's engine thread, started with the first;
 * -FI_EAGAIN when dom must have a thread of its own. */
static int tnbc_engine_attach(struct tnbc_domain *dom)
{
	bool joined = false;
	int ret = 0;

	if (!tnbc_env.engine_shared || dom->engine.kick_fd >= 0 ||
	    !dom->xops->bell->sleep_word)
		return -FI_EAGAIN;
	pthread_mutex_lock(&tnbc_host.lock);
	if (!tnbc_engine_waitv_works() || tnbc_host.ndoms == TNBC_ENGINE_DOMS) {
		pthread_mutex_unlock(&tnbc_host.lock);
		return -FI_EAGAIN;
	}
	tnbc_engine_run_init(dom);
	atomic_store(&dom->engine.stop, false);
	if (!tnbc_host.running) {
		ret = tnbc_engine_spawn(&tnbc_host.thread,
					tnbc_engine_host_main, dom);
		if (ret)
			goto out;
		tnbc_host.running = true;
	} else {
		joined = true;
	}
	tnbc_host.doms[tnbc_host.ndoms++] = dom;
	tnbc_host.gen++;
	atomic_store_explicit(&dom->engine.self, tnbc_host.self,
			      memory_order_relaxed);
	atomic_store(&dom->engine.shared, true);
	dom->engine.running = true;
out:
	pthread_mutex_unlock(&tnbc_host.lock);
	/* A thread asleep on the others' doorbells looks at the new one
	 * once woken.  Rung whatever the others' kick marks say, and after
	 * the change of gen (tnbc_engine_round); a kick of another domain
	 * was skipped while its mark was set, and that domain may be on
	 * its way out. */
	if (!ret && joined)
		tnbc_host_bell_ring();
	if (ret && dom->engine.load_fd >= 0)
		close(dom->engine.load_fd);
	return ret;
}

int tnbc_engine_domains(struct tnbc_domain *dom)
{
	int n;

	if (!dom->engine.running)
		return 0;
	if (!dom->engine.shared)
		return 1;
	pthread_mutex_lock(&tnbc_host.lock);
	n = tnbc_host.ndoms;
	pthread_mutex_unlock(&tnbc_host.lock);
	return n;
}

static void tnbc_engine_detach(struct tnbc_domain *dom)
{
	uint64_t gen;
	bool last;

	pthread_mutex_lock(&tnbc_host.lock);
	for (int i = 0; i < tnbc_host.ndoms; i++)
		if (tnbc_host.doms[i] == dom) {
			tnbc_host.doms[i] = tnbc_host.doms[--tnbc_host.ndoms];
			break;
		}
	gen = ++tnbc_host.gen;
	last = !tnbc_host.ndoms;
	tnbc_host.stop = last;
	pthread_mutex_unlock(&tnbc_host.lock);
	/* The thread's round may still hold dom, and take its doorbell's
	 * token after the ring below: the stop mark, set before the ring,
	 * calls that sleep off (tnbc_engine_nap_begin looks at it after
	 * the token), and a sleep begun before it ends with the ring. */
	atomic_store(&dom->engine.stop, true);
	dom->xops->bell->wake(dom->xdom);
	if (last) {
		pthread_join(tnbc_host.thread, NULL);
		pthread_mutex_lock(&tnbc_host.lock);
		tnbc_host.running = false;
		tnbc_host.stop = false;
		pthread_mutex_unlock(&tnbc_host.lock);
	} else {
		pthread_mutex_lock(&tnbc_host.lock);
		while (tnbc_host.seen < gen)
			pthread_cond_wait(&tnbc_host.cond, &tnbc_host.lock);
		pthread_mutex_unlock(&tnbc_host.lock);
	}
	if (dom->engine.load_fd >= 0)
		close(dom->engine.load_fd);
	dom->engine.load_fd = -1;
	atomic_store(&dom->engine.shared, false);
	dom->engine.running = false;
}

int tnbc_engine_start(struct tnbc_domain *dom)
{
	int ret = tnbc_engine_attach(dom);

	if (ret != -FI_EAGAIN)
		return ret;
	atomic_store(&dom->engine.stop, false);
	ret = tnbc_engine_spawn(&dom->engine.thread, tnbc_engine_main, dom);
	if (ret)
		return ret;
	dom->engine.running = true;
	return 0;
}

void tnbc_engine_stop(struct tnbc_domain *dom)
{
	if (!dom->engine.running)
		return;
	if (dom->engine.shared) {
		tnbc_engine_detach(dom);
		return;
	}
	atomic_store(&dom->engine.stop, true);
	tnbc_engine_wake(dom);
	pthread_join(dom->engine.thread, NULL);
	dom->engine.running = false;
}

void tnbc_app_wait(struct tnbc_domain *dom, bool begin)
{
	if (!begin) {
		atomic_fetch_sub(&dom->engine.app_waiting, 1);
		return;
	}
	atomic_fetch_add(&dom->engine.app_waiting, 1);
	tnbc_dom_xapp_mark(dom, false);
	/* end a nap the engine took because this thread was polling */
	tnbc_engine_kick(dom);
}

/*
 * The application thread goes off to compute or sleep (fi_tnbc(7)'s
 * domain handoff).  Its poll mark would keep the engine napping for the
 * rest of its window, and peers from ringing: cleared, the next packet
 * rings, and the engine wakes when there is work, not now.  Waking it
 * now cost the posting thread its core on a host without a spare one
 * (posts 3 to 20 times slower on 2 cores).  Packets that came while the
 * mark still stood were left to this thread: their senders published
 * before looking at the mark, this thread looks at the queues after
 * clearing it (the fences pair), so either they rang or it sees them
 * and kicks.  A sender that skips its fence (membarrier on both sides)
 * leaves such a packet to the end of the bounded nap at worst.
 */
bool tnbc_engine_handoff(struct tnbc_domain *dom)
{
	struct tnbc_list *it;
	bool work = false;

	if (!dom->engine.running)
		return false;
	tnbc_dom_xapp_mark(dom, false);
	atomic_thread_fence(memory_order_seq_cst);
	if (pthread_rwlock_tryrdlock(&dom->ep_lock)) {
		tnbc_engine_kick(dom);
		return true;
	}
	for (it = dom->ep_list.next; !work && it != &dom->ep_list;
	     it = it->next) {
		struct tnbc_ep *ep =
			tnbc_container_of(it, struct tnbc_ep, dom_entry);

		/* a busy lock: another thread is in there, polling */
		if (tnbc_ep_trylock(ep))
			continue;
		work = tnbc_ep_xpending(ep) || tnbc_ep_xstalled(ep) ||
		       atomic_load_explicit(&ep->work, memory_order_relaxed);
		tnbc_ep_unlock(ep);
	}
	pthread_rwlock_unlock(&dom->ep_lock);
	work = work || tnbc_trig_has_ready(dom);
	if (work)
		tnbc_engine_kick(dom);
	return work;
}
