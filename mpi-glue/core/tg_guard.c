/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The page guard (tg_guard.h).  Ranges are found by the fault handler in
 * a sorted array of pointers published whole (a writer builds a new one
 * under tg_gd.lock and swaps it in): a binary search, O(log n), with no
 * lock a faulting thread could find held.  Two counts keep what the
 * handler reads alive without a lock: map readers (held only for the
 * lookup) let a writer free the array it replaced, and a range's users
 * (held while the handler waits for its data) let a release free it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/mman.h>
#include <time.h>
#include <unistd.h>

#include "tg_guard.h"

enum { TG_GUARD_SHUT, TG_GUARD_OPENING, TG_GUARD_OPEN };

struct tg_guard_range {
	uintptr_t lo, hi;
	void *stage;
	const atomic_uint *ready;
	unsigned nready;
	atomic_int state;
	atomic_int users;
	_Atomic uint64_t touched; /* CLOCK_MONOTONIC ns of the first need */
	int err; /* of the opening, written before state turns open */
};

struct tg_guard_map {
	size_t n;
	struct tg_guard_range *r[];
};

static struct {
	pthread_mutex_t lock; /* writers: map swaps, init and fini */
	struct tg_guard_map *_Atomic map;
	atomic_int readers;
	atomic_uint_fast64_t faults;
	atomic_uint_fast64_t wait_ns; /* waits for data, summed */
	atomic_uint_fast64_t fresh; /* staging bytes mapped anew */
	int users; /* tg_guard_init calls not yet finished */
	atomic_bool installed; /* the guard's handler is the kernel's */
	struct sigaction old_segv, old_bus;
} tg_gd = {.lock = PTHREAD_MUTEX_INITIALIZER};

/*
 * Staging pages, recycled.  Fresh anonymous pages cost a fault and a
 * zeroing each when the data lands (340 us per MiB here, against 49 for
 * a copy into pages already there: tests/glue/guard_bench).  So opening
 * a range first moves the range's old pages aside (mremap with
 * MREMAP_DONTUNMAP, which leaves the range mapped: no hole another
 * thread's mmap could take) and keeps them here, and the next range of
 * that size stages into them.  Slots are taken and filled with atomics
 * only: the fault handler fills them.  Bytes held are bounded.
 */
#define TG_GUARD_SPARES	   64
#define TG_GUARD_SPARE_MAX ((size_t)256 << 20)

enum { TG_SPARE_EMPTY, TG_SPARE_BUSY, TG_SPARE_FULL };

static struct {
	atomic_int state;
	void *addr;
	size_t len;
} tg_spare[TG_GUARD_SPARES];
static atomic_size_t tg_spare_bytes;

/* Keeps len bytes of pages at a (async-signal-safe); false: no room. */
static bool tg_spare_put(void *a, size_t len)
{
	if (atomic_fetch_add(&tg_spare_bytes, len) + len > TG_GUARD_SPARE_MAX) {
		atomic_fetch_sub(&tg_spare_bytes, len);
		return false;
	}
	for (int i = 0; i < TG_GUARD_SPARES; i++) {
		int e = TG_SPARE_EMPTY;

		if (!atomic_compare_exchange_strong(&tg_spare[i].state, &e,
						    TG_SPARE_BUSY))
			continue;
		tg_spare[i].addr = a;
		tg_spare[i].len = len;
		atomic_store_explicit(&tg_spare[i].state, TG_SPARE_FULL,
				      memory_order_release);
		return true;
	}
	atomic_fetch_sub(&tg_spare_bytes, len);
	return false;
}

/*
 * Kept pages for a range of len bytes, readable and writable, or NULL:
 * the kept run closest in size (at most twice as long), its surplus
 * unmapped or its shortfall grown with fresh pages.  Exact sizes only (the
 * first version) missed on every call of a program whose receives change size
 * by a few pages from call to call (NPB IS), and each miss faulted in a whole
 * range.
 */
static void *tg_spare_get(size_t len)
{
	for (;;) {
		int best = -1, f = TG_SPARE_FULL;
		size_t gap = SIZE_MAX, have;
		void *a;

		for (int i = 0; i < TG_GUARD_SPARES; i++) {
			size_t l, d;

			if (atomic_load_explicit(&tg_spare[i].state,
						 memory_order_acquire) !=
			    TG_SPARE_FULL)
				continue;
			l = tg_spare[i].len;
			/* a run more than twice as long is left for a
			 * range its size: T-NBC's messages land in a body
			 * range and one-page ranges at its edges */
			if (l / 2 > len)
				continue;
			d = l > len ? l - len : len - l;
			if (d < gap) {
				gap = d;
				best = i;
			}
		}
		if (best < 0)
			return NULL;
		if (!atomic_compare_exchange_strong(&tg_spare[best].state, &f,
						    TG_SPARE_BUSY))
			continue; /* taken meanwhile: look again */
		a = tg_spare[best].addr;
		have = tg_spare[best].len;
		atomic_store(&tg_spare[best].state, TG_SPARE_EMPTY);
		atomic_fetch_sub(&tg_spare_bytes, have);
		if (have > len) {
			syscall(SYS_munmap, (char *)a + len, have - len);
		} else if (have < len) {
			void *b = (void *)syscall(SYS_mremap, a, have, len,
						  MREMAP_MAYMOVE);

			if (b == MAP_FAILED) {
				syscall(SYS_munmap, a, have);
				return NULL;
			}
			atomic_fetch_add(&tg_gd.fresh, len - have);
			a = b;
		}
		/* they moved out of a guarded range: still PROT_NONE */
		if (syscall(SYS_mprotect, a, len, PROT_READ | PROT_WRITE)) {
			syscall(SYS_munmap, a, len);
			return NULL;
		}
		return a;
	}
}

static void tg_spare_drain(void)
{
	for (int i = 0; i < TG_GUARD_SPARES; i++) {
		int f = TG_SPARE_FULL;

		if (!atomic_compare_exchange_strong(&tg_spare[i].state, &f,
						    TG_SPARE_BUSY))
			continue;
		syscall(SYS_munmap, tg_spare[i].addr, tg_spare[i].len);
		atomic_fetch_sub(&tg_spare_bytes, tg_spare[i].len);
		atomic_store(&tg_spare[i].state, TG_SPARE_EMPTY);
	}
}

/* A wait a signal handler may make: yield, then sleep in short steps. */
static void tg_guard_pause(unsigned *spins)
{
	if (++*spins < 64) {
		sched_yield();
	} else {
		struct timespec ts = {0, 20000};

		nanosleep(&ts, NULL);
	}
}

/*
 * The first range overlapping [a, end), with a user counted, or NULL;
 * shut_only: the first of them not open yet.  Ranges never overlap, so
 * the array is sorted by both ends: a binary search finds the first
 * whose end is past a.  The fault handler asks with shut_only false: a
 * range another thread has just opened is still the guard's fault, not
 * one for the application's handler.
 */
static struct tg_guard_range *tg_guard_take(uintptr_t a, uintptr_t end,
					    bool shut_only)
{
	struct tg_guard_range *found = NULL;
	struct tg_guard_map *m;

	atomic_fetch_add(&tg_gd.readers, 1);
	m = atomic_load_explicit(&tg_gd.map, memory_order_acquire);
	if (m) {
		size_t lo = 0, hi = m->n;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (m->r[mid]->hi <= a)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < m->n && m->r[lo]->lo < end; lo++) {
			if (shut_only &&
			    atomic_load(&m->r[lo]->state) == TG_GUARD_OPEN)
				continue;
			found = m->r[lo];
			atomic_fetch_add(&found->users, 1);
			break;
		}
	}
	atomic_fetch_sub(&tg_gd.readers, 1);
	return found;
}

/*
 * Waits for r's data and opens it; any thread, a signal handler among
 * them.  The first to get there moves the staging pages over the range;
 * the others wait until it has.  If the move fails (the kernel's map
 * count), the data is copied instead: then a thread that does not fault
 * may see it half written, which the move exists to prevent.
 */
static void tg_guard_open_range(struct tg_guard_range *r, bool need)
{
	int shut = TG_GUARD_SHUT;
	unsigned spins = 0;
	size_t len = r->hi - r->lo;
	struct timespec now;

	/* the first need of the data, a fault or a call that opens it
	 * (not a release): T-NBC's trace of the order a program reads its
	 * messages in */
	if (need && !atomic_load_explicit(&r->touched, memory_order_relaxed) &&
	    !clock_gettime(CLOCK_MONOTONIC, &now)) {
		uint64_t zero = 0, t = (uint64_t)now.tv_sec * 1000000000u +
				       (uint64_t)now.tv_nsec;

		atomic_compare_exchange_strong(&r->touched, &zero, t ? t : 1);
	}
	if (!atomic_compare_exchange_strong(&r->state, &shut,
					    TG_GUARD_OPENING)) {
		while (atomic_load_explicit(&r->state, memory_order_acquire) !=
		       TG_GUARD_OPEN)
			tg_guard_pause(&spins);
		return;
	}
	for (unsigned i = 0; i < r->nready; i++) {
		struct timespec t0, t1;

		if (atomic_load_explicit(&r->ready[i], memory_order_acquire))
			continue;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (!atomic_load_explicit(&r->ready[i],
					     memory_order_acquire))
			tg_guard_pause(&spins);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		atomic_fetch_add_explicit(
			&tg_gd.wait_ns,
			(uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u +
				(uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec,
			memory_order_relaxed);
	}
	/* the system calls themselves: an MPI's memory hooks (UCX's ucm
	 * patches mremap, and drops its new-address argument) must not
	 * stand between a signal handler and the kernel.  The range's old
	 * pages go aside first, for the next range to stage into (a kernel
	 * without MREMAP_DONTUNMAP refuses, and they are dropped) */
	{
		void *old = (void *)syscall(SYS_mremap, (void *)r->lo, len, len,
					    MREMAP_MAYMOVE | MREMAP_DONTUNMAP,
					    NULL);

		if (old != MAP_FAILED && !tg_spare_put(old, len))
			syscall(SYS_munmap, old, len);
	}
	if ((void *)syscall(SYS_mremap, r->stage, len, len,
			    MREMAP_MAYMOVE | MREMAP_FIXED,
			    (void *)r->lo) == MAP_FAILED) {
		r->err = -errno;
		if (!syscall(SYS_mprotect, (void *)r->lo, len,
			     PROT_READ | PROT_WRITE))
			memcpy((void *)r->lo, r->stage, len);
		syscall(SYS_munmap, r->stage, len);
	}
	r->stage = NULL;
	atomic_store_explicit(&r->state, TG_GUARD_OPEN, memory_order_release);
}

/*
 * The program's own handlers.  A program that installs a SIGSEGV or SIGBUS
 * handler after the guard's would take the guard's faults too: while the
 * guard is installed, sigaction(2) and signal(3) for those two signals
 * (interposed below) only change the handler the guard hands other
 * faults to, and report it as the one installed.
 */
typedef int (*tg_sigaction_fn)(int, const struct sigaction *,
			       struct sigaction *);

static int tg_real_sigaction(int sig, const struct sigaction *act,
			     struct sigaction *old)
{
	static tg_sigaction_fn real;

	if (!real)
		real = (tg_sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return real(sig, act, old);
}

/* The slot of the program's handler for sig, when the guard holds it. */
static struct sigaction *tg_guard_slot(int sig)
{
	if ((sig != SIGSEGV && sig != SIGBUS) ||
	    !atomic_load_explicit(&tg_gd.installed, memory_order_acquire))
		return NULL;
	return sig == SIGBUS ? &tg_gd.old_bus : &tg_gd.old_segv;
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction *slot;

	pthread_mutex_lock(&tg_gd.lock);
	slot = tg_guard_slot(sig);
	if (slot) {
		if (old)
			*old = *slot;
		if (act)
			*slot = *act;
	}
	pthread_mutex_unlock(&tg_gd.lock);
	return slot ? 0 : tg_real_sigaction(sig, act, old);
}

sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, &old))
		return SIG_ERR;
	return old.sa_handler;
}

/* Hands a fault that is not the guard's to whoever had it before. */
static void tg_guard_chain(int sig, siginfo_t *info, void *uctx)
{
	const struct sigaction *old =
		sig == SIGBUS ? &tg_gd.old_bus : &tg_gd.old_segv;

	if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
		old->sa_sigaction(sig, info, uctx);
		return;
	}
	if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
		return;
	}
	/* the default action, as the kernel takes it for a fault it
	 * cannot deliver: the instruction runs again and faults into it */
	{
		struct sigaction dfl;

		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		tg_real_sigaction(sig, &dfl, NULL);
	}
}

static void tg_guard_handler(int sig, siginfo_t *info, void *uctx)
{
	int saved = errno;
	uintptr_t a = info ? (uintptr_t)info->si_addr : 0;
	struct tg_guard_range *r = info ? tg_guard_take(a, a + 1, false) : NULL;

	if (!r) {
		errno = saved;
		tg_guard_chain(sig, info, uctx);
		return;
	}
	atomic_fetch_add_explicit(&tg_gd.faults, 1, memory_order_relaxed);
	tg_guard_open_range(r, true);
	atomic_fetch_sub(&r->users, 1);
	errno = saved;
}

int tg_guard_init(void)
{
	struct sigaction sa;
	int ret = 0;

	pthread_mutex_lock(&tg_gd.lock);
	if (tg_gd.users++)
		goto out;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = tg_guard_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (tg_real_sigaction(SIGSEGV, &sa, &tg_gd.old_segv)) {
		ret = -errno;
	} else if (tg_real_sigaction(SIGBUS, &sa, &tg_gd.old_bus)) {
		ret = -errno;
		tg_real_sigaction(SIGSEGV, &tg_gd.old_segv, NULL);
	}
	if (ret)
		tg_gd.users--;
	else
		atomic_store(&tg_gd.installed, true);
out:
	pthread_mutex_unlock(&tg_gd.lock);
	return ret;
}

void tg_guard_fini(void)
{
	pthread_mutex_lock(&tg_gd.lock);
	if (tg_gd.users && !--tg_gd.users) {
		tg_spare_drain();
		atomic_store(&tg_gd.installed, false);
		tg_real_sigaction(SIGSEGV, &tg_gd.old_segv, NULL);
		tg_real_sigaction(SIGBUS, &tg_gd.old_bus, NULL);
	}
	pthread_mutex_unlock(&tg_gd.lock);
}

/* Publishes m in place of the current map and frees the old one once no
 * lookup reads it.  tg_gd.lock held. */
static void tg_guard_swap(struct tg_guard_map *m)
{
	struct tg_guard_map *old;

	/* an empty map is none: a caller with nothing guarded pays one
	 * load (tg_guard_any) */
	if (m && !m->n) {
		free(m);
		m = NULL;
	}
	old = atomic_exchange_explicit(&tg_gd.map, m, memory_order_acq_rel);
	unsigned spins = 0;

	while (atomic_load(&tg_gd.readers))
		tg_guard_pause(&spins);
	free(old);
}

/* The map with r inserted (r not NULL) or removed; NULL on overlap or
 * without memory.  tg_gd.lock held. */
static struct tg_guard_map *tg_guard_edit(struct tg_guard_range *add,
					  struct tg_guard_range *drop)
{
	struct tg_guard_map *cur = atomic_load(&tg_gd.map);
	size_t n = cur ? cur->n : 0, k = 0;
	struct tg_guard_map *m = malloc(sizeof(*m) + (n + 1) * sizeof(m->r[0]));

	if (!m)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		struct tg_guard_range *r = cur->r[i];

		if (r == drop)
			continue;
		if (add && r->hi > add->lo && r->lo < add->hi) {
			free(m);
			return NULL;
		}
		if (add && add->hi <= r->lo) {
			m->r[k++] = add;
			add = NULL;
		}
		m->r[k++] = r;
	}
	if (add)
		m->r[k++] = add;
	m->n = k;
	return m;
}

int tg_guard_protect(void *addr, size_t len, const atomic_uint *ready,
		     unsigned nready, void **stage, struct tg_guard_range **out)
{
	long page = sysconf(_SC_PAGESIZE);
	struct tg_guard_range *r;
	struct tg_guard_map *m;
	int ret;

	if (!addr || !len || !ready || !nready || !stage || !out || page <= 0 ||
	    ((uintptr_t)addr | len) % (size_t)page)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->lo = (uintptr_t)addr;
	r->hi = r->lo + len;
	r->ready = ready;
	r->nready = nready;
	r->stage = tg_spare_get(len);
	if (!r->stage) {
		r->stage = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (r->stage != MAP_FAILED)
			atomic_fetch_add(&tg_gd.fresh, len);
	}
	if (r->stage == MAP_FAILED) {
		ret = -errno;
		goto err_range;
	}
	pthread_mutex_lock(&tg_gd.lock);
	if (!tg_gd.users) {
		ret = -EPERM; /* no handler to serve the faults */
		goto err_locked;
	}
	m = tg_guard_edit(r, NULL);
	if (!m) {
		ret = atomic_load(&tg_gd.map) ? -EEXIST : -ENOMEM;
		goto err_locked;
	}
	/* published before the protection: a fault right after it finds
	 * the range */
	tg_guard_swap(m);
	if (mprotect(addr, len, PROT_NONE)) {
		ret = -errno;
		m = tg_guard_edit(NULL, r);
		if (m)
			tg_guard_swap(m);
		goto err_locked;
	}
	pthread_mutex_unlock(&tg_gd.lock);
	*stage = r->stage;
	*out = r;
	return 0;
err_locked:
	pthread_mutex_unlock(&tg_gd.lock);
	munmap(r->stage, len);
err_range:
	free(r);
	return ret;
}

int tg_guard_release(struct tg_guard_range *r)
{
	struct tg_guard_map *m;
	unsigned spins = 0;
	int err;

	if (!r)
		return -EINVAL;
	tg_guard_open_range(r, false);
	pthread_mutex_lock(&tg_gd.lock);
	/* without memory for a smaller map the range stays in it, open:
	 * a fault can no longer find it shut, and the memory is kept */
	m = tg_guard_edit(NULL, r);
	if (m)
		tg_guard_swap(m);
	pthread_mutex_unlock(&tg_gd.lock);
	if (!m)
		return r->err ? r->err : -ENOMEM;
	while (atomic_load(&r->users))
		tg_guard_pause(&spins);
	err = r->err;
	free(r);
	return err;
}

void tg_guard_abandon(struct tg_guard_range *r)
{
	struct tg_guard_map *m;
	unsigned spins = 0;

	if (!r)
		return;
	/* readable again before it leaves the map: a stray touch meanwhile
	 * finds it still guarded, never a protected page nobody serves */
	mprotect((void *)r->lo, r->hi - r->lo, PROT_READ | PROT_WRITE);
	atomic_store(&r->state, TG_GUARD_OPEN);
	pthread_mutex_lock(&tg_gd.lock);
	m = tg_guard_edit(NULL, r);
	if (m)
		tg_guard_swap(m);
	pthread_mutex_unlock(&tg_gd.lock);
	if (r->stage)
		munmap(r->stage, r->hi - r->lo);
	r->stage = NULL;
	if (!m)
		return; /* kept in the map, open, as tg_guard_release does */
	while (atomic_load(&r->users))
		tg_guard_pause(&spins);
	free(r);
}

void tg_guard_open_overlap(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, end = a + len;
	struct tg_guard_range *r;

	if (!len || !atomic_load_explicit(&tg_gd.map, memory_order_relaxed))
		return;
	while ((r = tg_guard_take(a, end, true))) {
		tg_guard_open_range(r, true);
		atomic_fetch_sub(&r->users, 1);
	}
}

bool tg_guard_is_open(const struct tg_guard_range *r)
{
	return atomic_load(&((struct tg_guard_range *)r)->state) ==
	       TG_GUARD_OPEN;
}

uint64_t tg_guard_touched(const struct tg_guard_range *r)
{
	return atomic_load(&((struct tg_guard_range *)r)->touched);
}

uint64_t tg_guard_wait_ns(void)
{
	return atomic_load(&tg_gd.wait_ns);
}

bool tg_guard_any(void)
{
	return atomic_load_explicit(&tg_gd.map, memory_order_relaxed) != NULL;
}

uint64_t tg_guard_faults(void)
{
	return atomic_load(&tg_gd.faults);
}

uint64_t tg_guard_fresh_bytes(void)
{
	return atomic_load(&tg_gd.fresh);
}
