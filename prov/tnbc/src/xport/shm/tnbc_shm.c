/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Shared-memory transport.
 *
 * Each endpoint owns a POSIX shared-memory region holding a bounded
 * multi-producer, single-consumer queue of variable-length packets in
 * 64-byte cells (the layout is in tnbc_shm_region.h).  Any process that knows
 * the endpoint's name maps the region and enqueues packets into it directly:
 * one copy in by the sender, one copy out by the receiver.  Large
 * messages never go through the queue when the kernel allows
 * cross-memory attach: the receiver reads the sender's buffer with
 * process_vm_readv (single copy).
 *
 * Each domain also owns a small "bell" region: the futex the domain's
 * engine sleeps on, a flag saying it sleeps, and the time an application
 * thread last polled.  An endpoint region records the name of its bell so
 * a sender can wake the right engine.
 *
 * Trust: a region is mapped only when its file belongs to a process this
 * one trusts: the same user, or, with FI_TNBC_SHM_GROUP, a member of that
 * group (fi_tnbc(7), SECURITY).  Owner and mode are read with fstat on
 * the descriptor that is then mapped, never on a path, and no name is
 * followed through a link.  Everything a peer may write is distrusted by
 * the consumer: see tnbc_shm_region.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tnbc_base.h"
#include "tnbc_shm_region.h"
#include "tnbc_xport.h"

#define TNBC_SHM_PEER_HASH 1024
/* fresh names tried when one is taken (EEXIST) before giving up */
#define TNBC_SHM_CREATE_TRIES 16
/* How long a cell may stay claimed before the consumer asks whether its
 * sender still lives, and how often it asks again (fi_tnbc(7)). */
#define TNBC_SHM_DEAD_NS 100000000ull
/* How long tail may stay ahead of a cell nobody marked before the
 * consumer takes its sender for dead (it died between its claim and its
 * mark, and left no name to ask about). */
#define TNBC_SHM_ORPHAN_NS 1000000000ull
/* The largest queue, in bytes. */
#define TNBC_SHM_RING_MAX (256ull << 20)
/* Tries at a tail that a peer keeps changing under us (or a garbled
 * queue) before reporting it full. */
#define TNBC_SHM_SEND_TRIES 4096

/* ThreadSanitizer cannot see that two mappings of one file are the same
 * memory, so the order a cell's sequence word gives between an endpoint
 * of this process and a sender of this process is invisible to it.  The
 * annotations key it by what both mappings share: file and cell. */
#if defined(__SANITIZE_THREAD__)
#define TNBC_SHM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TNBC_SHM_TSAN 1
#endif
#endif
#ifdef TNBC_SHM_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
static char tnbc_shm_tsan_keys[4096];
#define TNBC_TSAN_KEY(ino, idx)                                                \
	(&tnbc_shm_tsan_keys[((ino)*31u + (idx)) % sizeof(tnbc_shm_tsan_keys)])
#define tnbc_shm_tsan_acquire(ino, idx) __tsan_acquire(TNBC_TSAN_KEY(ino, idx))
#define tnbc_shm_tsan_release(ino, idx) __tsan_release(TNBC_TSAN_KEY(ino, idx))
/* A sender publishes a cell after releasing its key: the store would be
 * recorded in this mapping's shadow after the release, where no later
 * acquire of the key reaches it, and a sender that reuses the cell a
 * lap later would race with it in ThreadSanitizer's eyes only (the
 * consumer clears the word through its own mapping, which it cannot
 * see).  The key already stands for the store's ordering. */
#define tnbc_shm_tsan_unseen_begin() __tsan_ignore_thread_begin()
#define tnbc_shm_tsan_unseen_end()   __tsan_ignore_thread_end()
#else
#define tnbc_shm_tsan_acquire(ino, idx) ((void)(ino), (void)(idx))
#define tnbc_shm_tsan_release(ino, idx) ((void)(ino), (void)(idx))
#define tnbc_shm_tsan_unseen_begin()	((void)0)
#define tnbc_shm_tsan_unseen_end()	((void)0)
#endif

struct tnbc_shm_retired {
	struct tnbc_shm_retired *next;
	void *region;
	size_t len;
	void *bell;
};

struct tnbc_xpeer {
	struct tnbc_xpeer_base base; /* first: the core reads it */
	struct tnbc_xpeer *hnext;
	struct tnbc_xdom *xdom;
	struct tnbc_name name;
	struct tnbc_shm_region *region;
	size_t region_len;
	struct tnbc_shm_bell *bell;
	/* geometry as found when mapped: never read back */
	uint32_t nslots, slot_size;
	/* both sides use membarrier (tnbc_shm_bell.asym): publish without
	 * a fence while the peer's engine is not asleep */
	bool asym;
	/* the peer's head as last read: cells before it are free */
	atomic_uint_fast64_t head;
	pid_t pid;
	uint64_t ino;
};

struct tnbc_xdom {
	struct tnbc_shm_bell *bell;
	char bell_name[TNBC_SHM_NAME_MAX];
	pthread_mutex_t lock; /* peer cache, refused_name */
	struct tnbc_xpeer *peers[TNBC_SHM_PEER_HASH];
	uint64_t host;
	pid_t pid; /* ours, named in the cells we claim */
	/* this process is registered for global expedited membarriers, and
	 * the engine uses them (tnbc_shm_bell.asym) */
	bool asym;
	/* the engine's sleep as begun (engine thread only) */
	enum tnbc_sleep sleep_how;
	/* when an application thread last wrote bell->app_seen (any
	 * application thread: a lost update only costs one more write) */
	atomic_uint_fast64_t app_written;
	/* Application polls left before the clock is read again (a poll
	 * loop calls in every hundred nanoseconds or so, and the clock
	 * costs tens of ns in a virtual machine).  Set to app_every - 1 at
	 * each reading, app_read_ns being the reading: app_every doubles
	 * while readings come less than a 32nd of a window apart and drops
	 * to 1 when one comes more than an eighth apart, so a loop reads
	 * the clock every few microseconds however fast it spins.  A
	 * packet a poll consumed counts as TNBC_SHM_APP_PKT_POLLS polls: a
	 * loop whose passes got longer must not leave app_seen stale for
	 * app_every long passes (the engine would take the application for
	 * gone, and senders would ring). */
	atomic_uint app_skip;
	atomic_uint app_every;
	atomic_uint_fast64_t app_read_ns;
	/* the clock as a sender last read it to look at a peer's app_seen
	 * (tnbc_shm_peer_polls) */
	atomic_uint_fast64_t ring_ns;
#define TNBC_SHM_APP_PKT_POLLS 4u
#define TNBC_SHM_APP_EVERY_MAX 256u
	/* bell->window_ns as the engine set it: the copy this process
	 * trusts */
	atomic_uint_fast64_t window_ns;
	/* Mappings of peers that closed and reopened under the same name;
	 * other threads may still be reading them, so they live as long as
	 * the domain. */
	struct tnbc_shm_retired *retired;
	atomic_uint_fast64_t bad_pkts, dead_cells, refused, slot_pkts;
	atomic_uint_fast64_t spilled, held; /* tnbc_shm_spill */
	char refused_name[TNBC_SHM_NAME_MAX]; /* last warned about */
};

/* A kept packet moved out of the queue (tnbc_shm_spill). */
struct tnbc_shm_spilled {
	struct tnbc_shm_spilled *next;
	uint64_t key; /* its sender, TNBC_SHM_HOLD_KEY (0: not known) */
	uint32_t len;
	_Alignas(16) uint8_t pkt[];
};

/* A sender with packets moved out: how many bytes, and whether the
 * region's hold[] names it. */
struct tnbc_shm_holder {
	uint64_t key;
	size_t bytes;
	bool held;
};

/* Senders whose moved packets one endpoint keeps count of: a packet of
 * a further one stays in the queue. */
#define TNBC_SHM_HOLDERS 64

/* A packet the protocol keeps, as the consumer saw it when it offered
 * it: a peer may rewrite its cell since. */
struct tnbc_shm_kept {
	uint64_t key; /* its sender (TNBC_SHM_HOLD_KEY) */
	uint32_t len;
};

struct tnbc_xep {
	struct tnbc_xdom *xdom;
	struct tnbc_shm_region *region;
	size_t region_len;
	char name[TNBC_SHM_NAME_MAX];
	/* The consumer's state is private: a peer can rewrite the whole
	 * region, so nothing here is ever read back from it. */
	uint8_t *cells;
	uint64_t nslots, mask; /* cells */
	size_t slot_size; /* the largest packet */
	uint64_t ino;
	uint64_t head; /* oldest position not given back to producers */
	uint64_t scan; /* next position to offer; kept ones lie before */
	/* packets in [head, scan) consumed out of order: their cell count
	 * at their first position */
	uint32_t *done;
	/* a claimed cell the queue waits behind */
	uint64_t stall_pos, stall_seq, stall_ns, stall_check_ns;
	atomic_bool stalled; /* also read by tnbc_shm_idle, without lock */
	/* polls that found nothing: every 1024th looks for a claim its
	 * sender never marked.  Counted with plain loads and stores: a
	 * lost count only moves that look. */
	atomic_uint idle;
	/* tnbc_shm_idle sent the next poll to make that look (it counts
	 * its own idle polls, and poll may not run for long) */
	atomic_bool look;
	/* scan, for tnbc_shm_idle: the consumer's lock is not held there */
	atomic_uint_fast64_t peek;
	/* packets before it were seen to be eager messages (quiet): each
	 * is looked at once, however often quiet is asked */
	uint64_t quiet_pos;
	uint64_t look_until; /* tail at the last look_mark */
	/* the mailbox (tnbc_shm_region.h): slots taken from mbox_full and
	 * not consumed yet (read by tnbc_shm_idle without the lock), and
	 * slots whose packets the protocol keeps until the next rewind */
	uint8_t *mbox;
	atomic_uint_fast64_t mbox_pend;
	uint64_t mbox_kept;
	/* each slot's claim at the last sweep (tnbc_shm_mbox_sweep), and
	 * when that was */
	uint64_t mbox_claims[TNBC_SHM_MBOX_SLOTS];
	uint64_t mbox_sweep_ns;
	bool mbox_turn; /* the queue polls first next time */
	/* Kept packets moved out of the queue, oldest first (spill_end:
	 * the last link), up to spill_max bytes; spill_at is the link of
	 * the next to offer.  All are older than the queue's, and are
	 * offered first. */
	struct tnbc_shm_spilled *spill, **spill_end, **spill_at;
	size_t spill_bytes, spill_max;
	/* packets from spill_at on wait to be offered (read by
	 * tnbc_shm_idle without the lock) */
	atomic_bool spill_due;
	/* the packet kept at each cell (allocated at the first packet
	 * kept) */
	struct tnbc_shm_kept *kept;
	struct tnbc_shm_holder holders[TNBC_SHM_HOLDERS];
	unsigned nholders;
};

static void tnbc_shm_region_name(const struct tnbc_name *name, char *buf,
				 size_t len)
{
	if (name->kind == TNBC_NAME_SVC)
		snprintf(buf, len, "/tnbc-svc-%" PRIu32, name->uid);
	else
		snprintf(buf, len, "/tnbc-%" PRIu32 "-%" PRIu32 "-%016" PRIx64,
			 name->pid, name->uid, name->nonce);
}

/* Whether this process now takes part in global expedited membarriers
 * (Linux 4.16 and later; a seccomp filter may still refuse them). */
static bool tnbc_shm_membarrier_register(void)
{
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) ||
	    !(cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED))
		return false;
	return !syscall(SYS_membarrier,
			MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0);
}

static int tnbc_futex(atomic_uint *addr, int op, unsigned val,
		      const struct timespec *ts)
{
	return (int)syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

/* ------------------------------------------------------------------ */
/* Regions: trust, creation, mapping                                    */

static mode_t tnbc_shm_mode(void)
{
	return tnbc_env.shm_group ? 0660 : 0600;
}

/* Whether the file behind fd was made by a process we trust: ours, or
 * a trusted group's, and nobody else's to read or write. */
static bool tnbc_shm_trusted(const struct stat *st)
{
	if (!S_ISREG(st->st_mode) || (st->st_mode & S_IRWXO))
		return false;
	if (st->st_uid == geteuid())
		return tnbc_env.shm_group || !(st->st_mode & S_IRWXG);
	return tnbc_env.shm_group && st->st_gid == tnbc_env.shm_gid;
}

/* Says once per name why a region was refused: a sender retrying must
 * not flood the log. */
static void tnbc_shm_refuse(struct tnbc_xdom *xdom, const char *name,
			    const struct stat *st)
{
	atomic_fetch_add_explicit(&xdom->refused, 1, memory_order_relaxed);
	if (!strcmp(xdom->refused_name, name))
		return;
	snprintf(xdom->refused_name, sizeof(xdom->refused_name), "%s", name);
	FI_WARN(&tnbc_prov, FI_LOG_AV,
		"refusing /dev/shm%s: owner uid %u gid %u mode %03o is not a "
		"peer this process trusts (see FI_TNBC_SHM_GROUP)\n",
		name, (unsigned)st->st_uid, (unsigned)st->st_gid,
		(unsigned)(st->st_mode & 0777));
}

/* Creates and maps a region under a name nobody holds; returns 0 or the
 * negative errno that stopped it (-EEXIST: the name is taken). */
static int tnbc_shm_create(const char *name, size_t len, void **out,
			   uint64_t *ino)
{
	struct stat st;
	void *p;
	int fd, ret;

	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW,
		      tnbc_shm_mode());
	if (fd < 0)
		return -errno;
	/* umask must not widen or narrow what the trust model needs */
	if ((tnbc_env.shm_group && fchown(fd, (uid_t)-1, tnbc_env.shm_gid)) ||
	    fchmod(fd, tnbc_shm_mode()) || ftruncate(fd, (off_t)len) ||
	    fstat(fd, &st)) {
		ret = -errno;
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL, "setting up %s: %s\n", name,
			strerror(errno));
		goto err;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		goto err;
	}
	close(fd);
	*out = p;
	*ino = (uint64_t)st.st_ino;
	return 0;
err:
	close(fd);
	shm_unlink(name);
	return ret;
}

/* Maps a peer's region if its owner is trusted; -FI_EACCES if not. */
static int tnbc_shm_map(struct tnbc_xdom *xdom, const char *name, int oflag,
			void **out, size_t *len, uint64_t *ino)
{
	int prot = oflag == O_RDONLY ? PROT_READ : PROT_READ | PROT_WRITE;
	struct stat st;
	void *p;
	int fd, ret;

	fd = shm_open(name, oflag | O_NOFOLLOW, 0);
	if (fd < 0)
		return errno == ENOENT ? -FI_ENOENT : -errno;
	if (fstat(fd, &st)) {
		ret = -errno;
		goto out;
	}
	if (!tnbc_shm_trusted(&st)) {
		if (xdom)
			tnbc_shm_refuse(xdom, name, &st);
		ret = -FI_EACCES;
		goto out;
	}
	if (st.st_size <= 0) {
		ret = -FI_ENOENT; /* being created */
		goto out;
	}
	p = mmap(NULL, (size_t)st.st_size, prot, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		ret = -errno;
		goto out;
	}
	*out = p;
	*len = (size_t)st.st_size;
	if (ino)
		*ino = (uint64_t)st.st_ino;
	ret = 0;
out:
	close(fd);
	return ret;
}

/* Faults a queue's cells in now, writable, so that its first lap does
 * not: a small message costs a page fault in each process every 64
 * cells until the ring has gone round once (the first 8192 messages
 * between two peers, with the default size), which made a short
 * benchmark run, and a job's first exchanges, up to twice as slow per
 * message.  Only a hint: without it (an older kernel, or no memory to
 * spare now) the cells fault in as they are first used. */
static void tnbc_shm_prefault(struct tnbc_shm_region *r, size_t cells_len)
{
#ifdef MADV_POPULATE_WRITE
	/* a peer's geometry is its own to choose: fault in no more than a
	 * ring this provider would make */
	if (cells_len > TNBC_SHM_RING_MAX)
		cells_len = TNBC_SHM_RING_MAX;
	/* from the mapping's start: madvise wants a page boundary */
	(void)madvise(r, sizeof(*r) + cells_len, MADV_POPULATE_WRITE);
#else
	(void)r;
	(void)cells_len;
#endif
}

/* A service region left by a process that died may be replaced; one
 * whose owner lives, or that we do not trust, may not. */
static bool tnbc_shm_stale(const char *name)
{
	struct tnbc_shm_region *r = NULL;
	size_t len = 0;
	bool stale;

	if (tnbc_shm_map(NULL, name, O_RDONLY, (void **)&r, &len, NULL))
		return false;
	stale = len < sizeof(*r) || r->magic != TNBC_SHM_MAGIC ||
		!tnbc_pid_alive(r->pid);
	munmap(r, len);
	return stale;
}

static void tnbc_shm_warn_taken(const char *name)
{
	struct stat st;
	int fd = shm_open(name, O_RDONLY | O_NOFOLLOW, 0);

	if (fd >= 0 && !fstat(fd, &st))
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
			"/dev/shm%s is held by uid %u (mode %03o): service "
			"in use\n",
			name, (unsigned)st.st_uid,
			(unsigned)(st.st_mode & 0777));
	else
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL, "/dev/shm%s: in use\n",
			name);
	if (fd >= 0)
		close(fd);
}

/* kick is not needed: senders ring this transport's own doorbell, on
 * which the engine sleeps (tnbc_shm_bell). */
static int tnbc_shm_dom_open(struct tnbc_xdom **out,
			     const struct tnbc_xdom_attr *attr)
{
	struct tnbc_xdom *xdom;
	uint64_t ino;
	int ret = -EEXIST;

	/* peers are this user's processes (SECURITY): no key is checked */
	(void)attr;
	xdom = calloc(1, sizeof(*xdom));
	if (!xdom)
		return -FI_ENOMEM;
	pthread_mutex_init(&xdom->lock, NULL);
	xdom->host = tnbc_host_id();
	xdom->pid = getpid();
	xdom->asym = tnbc_shm_membarrier_register();
	for (int i = 0; i < TNBC_SHM_CREATE_TRIES && ret == -EEXIST; i++) {
		snprintf(xdom->bell_name, sizeof(xdom->bell_name),
			 "/tnbc-%d-b-%016" PRIx64, (int)getpid(), tnbc_nonce());
		ret = tnbc_shm_create(xdom->bell_name, sizeof(*xdom->bell),
				      (void **)&xdom->bell, &ino);
	}
	if (ret) {
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN,
			"cannot create a doorbell in /dev/shm: %s\n",
			strerror(-ret));
		goto err_free;
	}
	xdom->bell->magic = TNBC_SHM_MAGIC;
	xdom->bell->version = TNBC_SHM_VERSION;
	xdom->bell->asym = xdom->asym;
	atomic_store(&xdom->window_ns, tnbc_env.app_window_us * 1000u);
	atomic_store(&xdom->app_every, 1);
	atomic_store(&xdom->bell->window_ns, tnbc_env.app_window_us * 1000u);
	*out = xdom;
	return 0;

err_free:
	pthread_mutex_destroy(&xdom->lock);
	free(xdom);
	return ret == -EEXIST ? -FI_EADDRINUSE : ret;
}

static void tnbc_shm_peer_free(struct tnbc_xpeer *peer)
{
	if (peer->bell)
		munmap(peer->bell, sizeof(*peer->bell));
	if (peer->region)
		munmap(peer->region, peer->region_len);
	free(peer);
}

static void tnbc_shm_dom_close(struct tnbc_xdom *xdom)
{
	for (size_t i = 0; i < TNBC_SHM_PEER_HASH; i++) {
		while (xdom->peers[i]) {
			struct tnbc_xpeer *p = xdom->peers[i];

			xdom->peers[i] = p->hnext;
			tnbc_shm_peer_free(p);
		}
	}
	while (xdom->retired) {
		struct tnbc_shm_retired *r = xdom->retired;

		xdom->retired = r->next;
		munmap(r->region, r->len);
		munmap(r->bell, sizeof(struct tnbc_shm_bell));
		free(r);
	}
	munmap(xdom->bell, sizeof(*xdom->bell));
	shm_unlink(xdom->bell_name);
	pthread_mutex_destroy(&xdom->lock);
	free(xdom);
}

/* Creates the endpoint's region under its name: an ordinary endpoint's
 * random one (taken: the core tries another nonce), or the service's
 * fixed one, replacing it only when left by a dead process of ours. */
static int tnbc_shm_ep_region(struct tnbc_xep *xep,
			      const struct tnbc_name *name, size_t len)
{
	int ret = -EEXIST;

	tnbc_shm_region_name(name, xep->name, sizeof(xep->name));
	for (int i = 0; i < 2 && ret == -EEXIST; i++) {
		if (i &&
		    (name->kind != TNBC_NAME_SVC || !tnbc_shm_stale(xep->name)))
			break;
		if (i)
			shm_unlink(xep->name);
		ret = tnbc_shm_create(xep->name, len, (void **)&xep->region,
				      &xep->ino);
	}
	if (ret == -EEXIST) {
		tnbc_shm_warn_taken(xep->name);
		return -FI_EADDRINUSE;
	}
	if (ret)
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL, "cannot create %s: %s\n",
			xep->name, strerror(-ret));
	return ret;
}

static int tnbc_shm_ep_open(struct tnbc_xdom *xdom,
			    const struct tnbc_name *name, uint8_t *xaddr,
			    struct tnbc_xep **out)
{
	struct tnbc_shm_region *r;
	struct tnbc_xep *xep;
	size_t slot = tnbc_env.slot_size;
	size_t bytes = TNBC_SHM_CELL, nslots;
	int ret;

	(void)xaddr; /* none: the name finds the endpoint */
	/* rx_slots packets of the largest size, in a power of two of cells */
	while (bytes < tnbc_env.rx_slots * slot && bytes < TNBC_SHM_RING_MAX)
		bytes <<= 1;
	nslots = bytes / TNBC_SHM_CELL;
	xep = calloc(1, sizeof(*xep));
	if (!xep)
		return -FI_ENOMEM;
	xep->done = calloc(nslots, sizeof(*xep->done));
	if (!xep->done) {
		ret = -FI_ENOMEM;
		goto err_free;
	}
	xep->region_len = sizeof(*r) + nslots * TNBC_SHM_CELL;
	ret = tnbc_shm_ep_region(xep, name, xep->region_len);
	if (ret)
		goto err_free;
	r = xep->region;
	r->magic = TNBC_SHM_MAGIC;
	r->version = TNBC_SHM_VERSION;
	r->nslots = (uint32_t)nslots;
	r->slot_size = (uint32_t)slot;
	r->pid = (int32_t)getpid();
	snprintf(r->bell_name, sizeof(r->bell_name), "%s", xdom->bell_name);
	xep->cells = r->cells;
	xep->mbox = r->mbox; /* every slot 0 (empty): ftruncate zeroed it */
	xep->nslots = nslots;
	xep->mask = nslots - 1;
	xep->slot_size = slot;
	xep->spill_end = xep->spill_at = &xep->spill;
	xep->spill_max = nslots * TNBC_SHM_CELL;
	/* the cells start at 0 (free): ftruncate zeroed them */
	tnbc_shm_prefault(r, nslots * TNBC_SHM_CELL);
	atomic_store_explicit(&r->ready, 1, memory_order_release);
	xep->xdom = xdom;
	*out = xep;
	return 0;

err_free:
	free(xep->done);
	free(xep);
	return ret;
}

static void tnbc_shm_ep_close(struct tnbc_xep *xep)
{
	/* Tells peers holding a mapping that this name may come back as a
	 * new region (a restarted service). */
	atomic_store_explicit(&xep->region->ready, 0, memory_order_release);
	munmap(xep->region, xep->region_len);
	shm_unlink(xep->name);
	while (xep->spill) {
		struct tnbc_shm_spilled *next = xep->spill->next;

		free(xep->spill);
		xep->spill = next;
	}
	free(xep->kept);
	free(xep->done);
	free(xep);
}

static size_t tnbc_shm_max_packet(struct tnbc_xpeer *peer)
{
	return peer->slot_size - TNBC_SHM_CELL_HDR;
}

/* Every process of the job sizes its cells from the same parameter. */
static size_t tnbc_shm_packet_limit(void)
{
	return tnbc_env.slot_size - TNBC_SHM_CELL_HDR;
}

static size_t tnbc_shm_hash(const struct tnbc_name *name)
{
	return (name->pid * 31u + name->uid * 7u + name->kind) %
	       TNBC_SHM_PEER_HASH;
}

/* Maps the doorbell a peer's region names, with the same checks. */
static int tnbc_shm_map_bell(struct tnbc_xdom *xdom, struct tnbc_xpeer *peer)
{
	char bname[TNBC_SHM_NAME_MAX];
	size_t blen = 0;
	int ret;

	memcpy(bname, peer->region->bell_name, sizeof(bname));
	bname[sizeof(bname) - 1] = '\0';
	if (strncmp(bname, "/tnbc-", 6) || strchr(bname + 1, '/'))
		return -FI_EINVAL;
	ret = tnbc_shm_map(xdom, bname, O_RDWR, (void **)&peer->bell, &blen,
			   NULL);
	if (ret)
		return ret;
	/* exactly one bell: peer_free unmaps that size */
	if (blen != sizeof(*peer->bell) ||
	    peer->bell->magic != TNBC_SHM_MAGIC) {
		munmap(peer->bell, blen);
		peer->bell = NULL;
		return -FI_EINVAL;
	}
	return 0;
}

/* xdom->lock held */
static int tnbc_shm_peer_map(struct tnbc_xdom *xdom,
			     const struct tnbc_name *name,
			     struct tnbc_xpeer **out)
{
	char rname[TNBC_SHM_NAME_MAX];
	struct tnbc_shm_region *r;
	struct tnbc_xpeer *peer;
	int ret;

	if (!(name->xports & TNBC_XPORT_BIT(TNBC_XPORT_SHM)) ||
	    (name->kind != TNBC_NAME_PID && name->kind != TNBC_NAME_SVC))
		return -FI_EINVAL;
	if (name->host && name->host != xdom->host) {
		FI_WARN(&tnbc_prov, FI_LOG_AV,
			"peer is on another host; shm cannot reach it\n");
		return -FI_EHOSTUNREACH;
	}
	peer = calloc(1, sizeof(*peer));
	if (!peer)
		return -FI_ENOMEM;
	peer->base.ops = &tnbc_shm_ops;
	peer->name = *name;
	tnbc_shm_region_name(name, rname, sizeof(rname));
	ret = tnbc_shm_map(xdom, rname, O_RDWR, (void **)&peer->region,
			   &peer->region_len, &peer->ino);
	if (ret)
		goto err;
	r = peer->region;
	ret = -FI_EHOSTUNREACH;
	if (peer->region_len < sizeof(*r) || r->magic != TNBC_SHM_MAGIC ||
	    r->version != TNBC_SHM_VERSION ||
	    !atomic_load_explicit(&r->ready, memory_order_acquire))
		goto err;
	peer->nslots = r->nslots;
	peer->slot_size = r->slot_size;
	peer->pid = r->pid;
	if (!peer->nslots || (peer->nslots & (peer->nslots - 1)) ||
	    peer->slot_size < 1024 || peer->slot_size % TNBC_SHM_CELL ||
	    peer->slot_size > (size_t)peer->nslots * TNBC_SHM_CELL ||
	    sizeof(*r) + (size_t)peer->nslots * TNBC_SHM_CELL >
		    peer->region_len)
		goto err;
	tnbc_shm_prefault(r, (size_t)peer->nslots * TNBC_SHM_CELL);
	ret = tnbc_shm_map_bell(xdom, peer);
	if (ret)
		goto err;
	peer->asym = xdom->asym && peer->bell->asym == 1;
	*out = peer;
	return 0;
err:
	if (ret != -FI_EACCES)
		FI_WARN(&tnbc_prov, FI_LOG_AV,
			"cannot map peer region %s: %s\n", rname,
			fi_strerror(-ret));
	tnbc_shm_peer_free(peer);
	return ret == -FI_EACCES ? ret : -FI_EHOSTUNREACH;
}

static int tnbc_shm_peer_get(struct tnbc_xdom *xdom,
			     const struct tnbc_name *name, const uint8_t *xaddr,
			     struct tnbc_xpeer **out)
{
	size_t h = tnbc_shm_hash(name);
	struct tnbc_xpeer *p;
	int ret = 0;

	(void)xaddr;
	pthread_mutex_lock(&xdom->lock);
	for (p = xdom->peers[h]; p; p = p->hnext)
		if (tnbc_name_same(&p->name, name))
			break;
	if (!p) {
		ret = tnbc_shm_peer_map(xdom, name, &p);
		if (!ret) {
			p->xdom = xdom;
			p->hnext = xdom->peers[h];
			xdom->peers[h] = p;
		}
	}
	pthread_mutex_unlock(&xdom->lock);
	if (!ret)
		*out = p;
	return ret;
}

static bool tnbc_shm_peer_alive(struct tnbc_xpeer *peer)
{
	return tnbc_pid_alive(peer->pid);
}

/* Whether the queue is less than half full behind pos: then an eager
 * message may wait in it (see rx_posted) and nobody needs to drain it. */
static bool tnbc_shm_roomy(struct tnbc_xpeer *peer, struct tnbc_shm_region *r,
			   uint64_t pos)
{
	return pos - atomic_load_explicit(&r->head, memory_order_relaxed) <
	       peer->nslots / 2;
}

/* Whether an application thread of the bell's domain polled within the
 * last window (window_ns), or is inside a single-copy read.  The clock
 * is read only when the engine naps, and not even then when hint, a
 * time no later than now (a sender's clock reading), answers: a packet
 * that hint wrongly leaves to the application is taken when the
 * engine's bounded nap ends. */
static bool tnbc_shm_app_polls(struct tnbc_shm_bell *bell, uint64_t window_ns,
			       uint64_t hint)
{
	uint64_t seen =
		atomic_load_explicit(&bell->app_seen, memory_order_relaxed);

	if (atomic_load_explicit(&bell->pulls, memory_order_relaxed))
		return true;
	if (!seen)
		return false;
	if (!hint || hint < seen)
		hint = tnbc_now_ns();
	return hint - seen < window_ns;
}

/* tnbc_shm_app_polls for a sender, whose idea of now may be any clock
 * reading this process made that is no older than the peer's app_seen:
 * a packet a stale one wrongly leaves to the peer's application waits at
 * most for the end of its engine's nap, as it would if the application
 * had stopped just after it.  A burst of sends from a thread that does
 * not poll then reads the clock once, not once per packet (tens of ns
 * in a virtual machine, a tenth of a small send). */
static bool tnbc_shm_peer_polls(struct tnbc_xdom *xdom,
				struct tnbc_shm_bell *bell)
{
	uint64_t seen =
		atomic_load_explicit(&bell->app_seen, memory_order_relaxed);
	uint64_t hint =
		atomic_load_explicit(&xdom->app_read_ns, memory_order_relaxed);
	uint64_t rung =
		atomic_load_explicit(&xdom->ring_ns, memory_order_relaxed);

	if (rung > hint)
		hint = rung;
	if (seen && hint < seen) {
		hint = tnbc_now_ns();
		atomic_store_explicit(&xdom->ring_ns, hint,
				      memory_order_relaxed);
	}
	return tnbc_shm_app_polls(
		bell,
		atomic_load_explicit(&bell->window_ns, memory_order_relaxed),
		hint);
}

/* After publishing the packet at pos (or, slot, in the mailbox): wakes
 * the peer's engine if it sleeps and the packet needs it. */
static void tnbc_shm_ring(struct tnbc_xpeer *peer, struct tnbc_shm_region *r,
			  uint64_t pos, bool eager, bool slot)
{
	struct tnbc_shm_bell *bell = peer->bell;
	unsigned state;

	/* Pairs with the fence in tnbc_shm_sleep_begin: either the engine
	 * sees our packet before sleeping, or we see it asleep.  With
	 * membarrier on both sides the engine's barrier before it sleeps
	 * without a bound stands for ours: the store of the packet is not
	 * held up here waiting for its cache line, which is most of a
	 * small message's cost.  A packet that goes unseen by a bounded
	 * sleep waits for its end. */
	if (!peer->asym)
		atomic_thread_fence(memory_order_seq_cst);
	state = atomic_load_explicit(&bell->sleeping, memory_order_relaxed);
	if (state == TNBC_SHM_AWAKE)
		return;
	/* An application thread polls there and the engine's nap is
	 * bounded: the application takes the packet, or, if it has just
	 * stopped, the engine does when the nap ends. */
	if (state == TNBC_SHM_NAPPING && tnbc_shm_peer_polls(peer->xdom, bell))
		return;
	/* Pairs with tnbc_shm_rx_posted: a receive posted after this load
	 * finds the packet itself (an application thread posting one runs
	 * no membarrier, so this side needs its fence).  Looked at only
	 * now: head is a cache miss the common case need not pay. */
	if (peer->asym)
		atomic_thread_fence(memory_order_seq_cst);
	if (eager &&
	    !atomic_load_explicit(&bell->rx_posted, memory_order_relaxed) &&
	    (slot || tnbc_shm_roomy(peer, r, pos)))
		return;
	atomic_fetch_add_explicit(&bell->seq, 1, memory_order_release);
	tnbc_futex(&bell->seq, FUTEX_WAKE, 1, NULL);
}

/* The peer closed its region; if a new one exists under the same name,
 * switch to it.  Returns 0 when the peer is usable again. */
static int tnbc_shm_peer_refresh(struct tnbc_xpeer *peer)
{
	struct tnbc_xdom *xdom = peer->xdom;
	struct tnbc_shm_retired *old;
	struct tnbc_xpeer *fresh;
	int ret = 0;

	pthread_mutex_lock(&xdom->lock);
	if (atomic_load_explicit(&peer->region->ready, memory_order_acquire))
		goto out; /* another thread got there first */
	old = calloc(1, sizeof(*old));
	if (!old) {
		ret = -FI_ENOMEM;
		goto out;
	}
	ret = tnbc_shm_peer_map(xdom, &peer->name, &fresh);
	if (ret) {
		free(old);
		goto out;
	}
	old->region = peer->region;
	old->len = peer->region_len;
	old->bell = peer->bell;
	old->next = xdom->retired;
	xdom->retired = old;
	peer->nslots = fresh->nslots;
	peer->slot_size = fresh->slot_size;
	atomic_store_explicit(&peer->head, 0, memory_order_relaxed);
	peer->pid = fresh->pid;
	peer->ino = fresh->ino;
	peer->region_len = fresh->region_len;
	peer->bell = fresh->bell;
	peer->asym = fresh->asym;
	__atomic_store_n(&peer->region, fresh->region, __ATOMIC_RELEASE);
	free(fresh);
out:
	pthread_mutex_unlock(&xdom->lock);
	return ret;
}

/* Whether cells [pos, pos + k) were freed on the last lap. */
static bool tnbc_shm_room(struct tnbc_xpeer *peer, struct tnbc_shm_region *r,
			  uint64_t pos, uint64_t k)
{
	/* Acquire and release: the copy is shared by the process's sending
	 * threads, and a thread that finds room by another's copy reuses
	 * cells that the consumer freed after that thread's acquire of the
	 * queue's head, not its own (free on x86). */
	uint64_t head = atomic_load_explicit(&peer->head, memory_order_acquire);

	if (pos + k - head <= peer->nslots)
		return true;
	/* Read only when our copy says full: the consumer writes this line
	 * on every packet. */
	head = atomic_load_explicit(&r->head, memory_order_acquire);
	tnbc_shm_tsan_acquire(peer->ino, peer->nslots);
	atomic_store_explicit(&peer->head, head, memory_order_release);
	return pos + k - head <= peer->nslots && (int64_t)(pos - head) >= 0;
}

/* Claims cells for a packet of len bytes and marks the first one;
 * -FI_EAGAIN when full. */
static int tnbc_shm_claim(struct tnbc_xpeer *peer, struct tnbc_shm_region *r,
			  uint32_t len, uint64_t *out_pos,
			  struct tnbc_shm_cell **out)
{
	uint64_t mask = peer->nslots - 1, me = (uint64_t)peer->xdom->pid;
	uint64_t k = tnbc_shm_cells(len), pad = 0, pos;
	struct tnbc_shm_cell *cell;
	int tries = 0;

	pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
	for (;;) {
		/* a packet never wraps: the rest of the lap is padding */
		pad = (pos & mask) + k > peer->nslots
			      ? peer->nslots - (pos & mask)
			      : 0;
		if (!tnbc_shm_room(peer, r, pos, pad + k) ||
		    ++tries > TNBC_SHM_SEND_TRIES)
			return -FI_EAGAIN;
		if (atomic_compare_exchange_weak_explicit(
			    &r->tail, &pos, pos + pad + k, memory_order_relaxed,
			    memory_order_relaxed))
			break;
	}
	if (pad) {
		cell = tnbc_shm_cell_at(r->cells, pos, mask);
		cell->len = (uint32_t)(pad * TNBC_SHM_CELL - TNBC_SHM_CELL_HDR);
		cell->fmt = TNBC_SHM_FMT_PAD;
		tnbc_shm_tsan_release(peer->ino, pos & mask);
		tnbc_shm_tsan_unseen_begin();
		atomic_store_explicit(&cell->seq, pos + 1,
				      memory_order_release);
		tnbc_shm_tsan_unseen_end();
		pos += pad;
	}
	cell = tnbc_shm_cell_at(r->cells, pos, mask);
	cell->len = len;
	atomic_store_explicit(&cell->seq, TNBC_SHM_CLAIM(me, pos),
			      memory_order_release);
	*out_pos = pos;
	*out = cell;
	return 0;
}

/* Copies the frame to dst, a cell or slot with room for a whole frame of
 * the protocol whatever its own: constant-size copies, which the
 * compiler makes plain moves (a variable one became a string move that
 * waited for the cell's line, a quarter of a small send's time).  A short
 * frame's copy may run past it into bytes the payload then overwrites,
 * or into the cell's unused tail (the protocol zeroed them). */
static void tnbc_shm_put_frame(uint8_t *dst, const struct tnbc_xpkt *pkt)
{
	if (pkt->frame_len <= TNBC_XPKT_FRAME_SHORT)
		memcpy(dst, pkt->frame, TNBC_XPKT_FRAME_SHORT);
	else if (pkt->frame_len == TNBC_XPKT_FRAME_MAX)
		memcpy(dst, pkt->frame, TNBC_XPKT_FRAME_MAX);
	else
		memcpy(dst, pkt->frame, pkt->frame_len);
}

_Static_assert(TNBC_SHM_CELL_HDR + TNBC_XPKT_FRAME_SHORT <= TNBC_SHM_CELL,
	       "a short frame's copy stays in the packet's first cell");

/* Copies the first len bytes of iov to dst. */
static void tnbc_shm_gather(uint8_t *dst, const struct iovec *iov,
			    size_t iov_count, size_t len)
{
	for (size_t i = 0; i < iov_count && len; i++) {
		size_t n = iov[i].iov_len < len ? iov[i].iov_len : len;

		if (n)
			memcpy(dst, iov[i].iov_base, n);
		dst += n;
		len -= n;
	}
}

/* The slot a sender tries first for a packet of lane: senders and the
 * operations in flight spread over the mailbox. */
static unsigned tnbc_shm_mbox_index(const struct tnbc_xdom *xdom, uint64_t lane)
{
	uint64_t h = (uint64_t)(uint32_t)xdom->pid * 0x9e3779b97f4a7c15ull;

	h ^= lane;
	return (unsigned)(h >> 58); /* 6 bits: TNBC_SHM_MBOX_SLOTS */
}

_Static_assert(TNBC_SHM_MBOX_SLOTS == 64, "mbox_full's bits, the index");
_Static_assert(TNBC_SHM_CELL_HDR + TNBC_XPKT_FRAME_MAX <= TNBC_SHM_MBOX_SLOT,
	       "a slot holds any frame's constant-size copy");
/* slots a sender tries before it takes the queue */
#define TNBC_SHM_MBOX_PROBES 2
/* ThreadSanitizer keys of the slots, past the queue's (TNBC_TSAN_KEY) */
#define TNBC_SHM_MBOX_KEY(peer_nslots, i) ((peer_nslots) + 1 + (i))

/* Puts a small packet into a free slot of the peer's mailbox.
 * -FI_EAGAIN: too large, slots off, or no slot free; the queue takes
 * it. */
static int tnbc_shm_mbox_send(struct tnbc_xpeer *peer,
			      struct tnbc_shm_region *r,
			      const struct tnbc_xpkt *pkt)
{
	const uint64_t claim = TNBC_SHM_CLAIM(peer->xdom->pid, 0);
	struct tnbc_shm_cell *slot = NULL;
	unsigned i = 0, first;
	uint8_t *dst;

	if (!tnbc_env.coll_slots ||
	    TNBC_SHM_CELL_HDR + (size_t)pkt->frame_len + pkt->payload_len >
		    TNBC_SHM_MBOX_SLOT)
		return -FI_EAGAIN;
	first = tnbc_shm_mbox_index(peer->xdom, pkt->lane);
	for (unsigned p = 0; p < TNBC_SHM_MBOX_PROBES; p++) {
		uint64_t seq = 0;

		i = (first + p) % TNBC_SHM_MBOX_SLOTS;
		slot = tnbc_shm_mbox_at(r->mbox, i);
		/* acquire: the consumer's reads of the last packet here are
		 * done before this sender writes the next */
		if (!atomic_load_explicit(&slot->seq, memory_order_relaxed) &&
		    atomic_compare_exchange_strong_explicit(
			    &slot->seq, &seq, claim, memory_order_acquire,
			    memory_order_relaxed))
			break;
		slot = NULL;
	}
	if (!slot)
		return -FI_EAGAIN;
	tnbc_shm_tsan_acquire(peer->ino, TNBC_SHM_MBOX_KEY(peer->nslots, i));
	dst = (uint8_t *)(slot + 1);
	tnbc_shm_put_frame(dst, pkt);
	tnbc_shm_gather(dst + pkt->frame_len, pkt->iov, pkt->iov_count,
			pkt->payload_len);
	slot->len = pkt->frame_len + pkt->payload_len;
	slot->fmt = pkt->flags & TNBC_XPKT_PARKS ? TNBC_SHM_FMT_PARKS
						 : TNBC_SHM_FMT_PKT;
	tnbc_shm_tsan_release(peer->ino, TNBC_SHM_MBOX_KEY(peer->nslots, i));
	atomic_store_explicit(&slot->seq, TNBC_SHM_MBOX_FULL,
			      memory_order_release);
	atomic_fetch_or_explicit(&r->mbox_full, 1ull << i,
				 memory_order_release);
	tnbc_shm_ring(peer, r, 0, pkt->flags & TNBC_XPKT_PARKS, true);
	return 0;
}

/* Whether the peer holds this sender back (tnbc_shm_region.h, holds):
 * one load of a line the consumer writes only while a sender floods. */
static bool tnbc_shm_held(struct tnbc_shm_region *r,
			  const struct tnbc_name *src)
{
	unsigned n = atomic_load_explicit(&r->holds, memory_order_relaxed);
	uint64_t key;

	if (!n)
		return false;
	key = TNBC_SHM_HOLD_KEY(src->pid, src->uid);
	if (n > TNBC_SHM_HOLD_MAX)
		n = TNBC_SHM_HOLD_MAX;
	for (unsigned i = 0; i < n; i++)
		if (atomic_load_explicit(&r->hold[i], memory_order_relaxed) ==
		    key)
			return true;
	return false;
}

static int tnbc_shm_send(struct tnbc_xpeer *peer, const struct tnbc_xpkt *pkt)
{
	struct tnbc_shm_region *r = peer->region;
	size_t len = (size_t)pkt->frame_len + pkt->payload_len;
	bool parks = pkt->flags & TNBC_XPKT_PARKS;
	struct tnbc_shm_cell *cell;
	uint64_t pos, mask;
	uint8_t *dst;
	int ret;

	if (!atomic_load_explicit(&r->ready, memory_order_acquire)) {
		ret = tnbc_shm_peer_refresh(peer);
		if (ret)
			return ret;
		r = peer->region;
	}
	if (pkt->frame_len > TNBC_XPKT_FRAME_MAX ||
	    len + TNBC_SHM_CELL_HDR > peer->slot_size)
		return -FI_EMSGSIZE;
	if ((pkt->flags & TNBC_XPKT_UNORDERED) &&
	    !tnbc_shm_mbox_send(peer, r, pkt))
		return 0;
	if ((pkt->flags & TNBC_XPKT_HOLDS) && tnbc_shm_held(r, pkt->src))
		return -FI_EAGAIN;
	ret = tnbc_shm_claim(peer, r, (uint32_t)len, &pos, &cell);
	if (ret)
		return ret;

	dst = (uint8_t *)(cell + 1);
	tnbc_shm_put_frame(dst, pkt);
	tnbc_shm_gather(dst + pkt->frame_len, pkt->iov, pkt->iov_count,
			pkt->payload_len);
	cell->fmt = parks ? TNBC_SHM_FMT_PARKS : TNBC_SHM_FMT_PKT;
	mask = peer->nslots - 1;
	tnbc_shm_tsan_release(peer->ino, pos & mask);
	tnbc_shm_tsan_unseen_begin();
	atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
	tnbc_shm_tsan_unseen_end();
	tnbc_shm_ring(peer, r, pos, parks, false);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Consumer                                                             */

static inline struct tnbc_shm_cell *tnbc_shm_xcell(struct tnbc_xep *xep,
						   uint64_t pos)
{
	return tnbc_shm_cell_at(xep->cells, pos, xep->mask);
}

/* The cells a packet of len bytes at pos takes, or 0 if it cannot be one
 * of ours: longer than the largest packet, or running past the end. */
static uint64_t tnbc_shm_xcells(const struct tnbc_xep *xep, uint64_t pos,
				uint32_t len)
{
	uint64_t k = tnbc_shm_cells(len);

	if (TNBC_SHM_CELL_HDR + (size_t)len > xep->slot_size ||
	    (pos & xep->mask) + k > xep->nslots)
		return 0;
	return k;
}

/* Hands cells [pos, pos + k) back to producers: their sequence words go
 * back to 0 first, so that none of them can pass for a packet later. */
static void tnbc_shm_free_cells(struct tnbc_xep *xep, uint64_t pos, uint64_t k)
{
	for (uint64_t i = 0; i < k; i++)
		atomic_store_explicit(&tnbc_shm_xcell(xep, pos + i)->seq, 0,
				      memory_order_relaxed);
}

/* The k cells at pos are consumed and free.  Cells behind a kept packet
 * wait in done[] until head gets there: producers claim in order, from
 * head on. */
static void tnbc_shm_consumed(struct tnbc_xep *xep, uint64_t pos, uint64_t k)
{
	if (pos != xep->head) {
		xep->done[pos & xep->mask] = (uint32_t)k;
		return;
	}
	xep->head += k;
	/* marks lie only in (head, head + nslots): each names a packet */
	while (xep->done[xep->head & xep->mask]) {
		k = xep->done[xep->head & xep->mask];
		xep->done[xep->head & xep->mask] = 0;
		xep->head += k;
	}
	if (xep->scan < xep->head) { /* a rewound scan must not look back */
		xep->scan = xep->head;
		atomic_store_explicit(&xep->peek, xep->scan,
				      memory_order_relaxed);
	}
	tnbc_shm_tsan_release(xep->ino, xep->nslots);
	atomic_store_explicit(&xep->region->head, xep->head,
			      memory_order_release);
}

/* The first position from scan on not consumed out of order. */
static uint64_t tnbc_shm_next(struct tnbc_xep *xep)
{
	uint32_t k;

	while (xep->scan < xep->head + xep->nslots &&
	       (k = xep->done[xep->scan & xep->mask]))
		xep->scan += k;
	atomic_store_explicit(&xep->peek, xep->scan, memory_order_relaxed);
	return xep->scan;
}

/* A look for an idle poll, which the 1024th one is not. */
static bool tnbc_shm_idle_tick(struct tnbc_xep *xep)
{
	unsigned n = atomic_load_explicit(&xep->idle, memory_order_relaxed);

	atomic_store_explicit(&xep->idle, n + 1, memory_order_relaxed);
	return (n + 1) & 1023;
}

/* Whether a sender moved tail past pos: a packet is on its way there. */
static bool tnbc_shm_claimed_past(struct tnbc_xep *xep, uint64_t pos)
{
	uint64_t tail =
		atomic_load_explicit(&xep->region->tail, memory_order_relaxed);

	return tail > pos && tail - pos <= xep->nslots;
}

/* The queue waits at pos, behind a claimed cell (seq is a claim) or an
 * unmarked one that tail passed.  Once it has waited TNBC_SHM_DEAD_NS
 * and the claiming process no longer exists (or, unmarked, once it has
 * waited TNBC_SHM_ORPHAN_NS), the cells are handed back unread (nothing
 * was published in them) and the consumer goes on.  Returns how many
 * cells it stepped over, or 0. */
static uint64_t tnbc_shm_dead_claim(struct tnbc_xep *xep, uint64_t pos,
				    uint64_t seq)
{
	struct tnbc_shm_cell *cell = tnbc_shm_xcell(xep, pos);
	bool marked = TNBC_SHM_IS_CLAIM(seq, pos);
	uint64_t now, k = 0, end;
	pid_t pid = 0;

	if (!marked && !tnbc_shm_claimed_past(xep, pos))
		return 0;
	now = tnbc_now_ns();
	if (!atomic_load_explicit(&xep->stalled, memory_order_relaxed) ||
	    xep->stall_pos != pos || xep->stall_seq != seq) {
		atomic_store_explicit(&xep->stalled, true,
				      memory_order_relaxed);
		xep->stall_pos = pos;
		xep->stall_seq = seq;
		xep->stall_ns = xep->stall_check_ns = now;
		return 0;
	}
	if (now - xep->stall_check_ns < TNBC_SHM_DEAD_NS)
		return 0;
	xep->stall_check_ns = now;
	if (marked) {
		pid = (pid_t)TNBC_SHM_CLAIM_PID(seq);
		if (tnbc_pid_alive(pid))
			return 0;
		k = tnbc_shm_xcells(
			xep, pos,
			__atomic_load_n(&cell->len, __ATOMIC_RELAXED));
	}
	if (!k && (marked || now - xep->stall_ns >= TNBC_SHM_ORPHAN_NS)) {
		/* The next packet starts at the first cell marked for its
		 * own position: the dead sender wrote nothing after its
		 * claim, so its cells still hold 0. */
		end = atomic_load_explicit(&xep->region->tail,
					   memory_order_relaxed);
		for (k = 1; pos + k < end && k < xep->nslots; k++) {
			uint64_t s = atomic_load_explicit(
				&tnbc_shm_xcell(xep, pos + k)->seq,
				memory_order_relaxed);

			if (s == pos + k + 1 || TNBC_SHM_IS_CLAIM(s, pos + k))
				break;
		}
	}
	if (!k)
		return 0;
	if (marked && !atomic_compare_exchange_strong_explicit(
			      &cell->seq, &seq, 0, memory_order_relaxed,
			      memory_order_relaxed))
		return 0;
	tnbc_shm_free_cells(xep, pos, k);
	atomic_store_explicit(&xep->stalled, false, memory_order_relaxed);
	atomic_fetch_add_explicit(&xep->xdom->dead_cells, 1,
				  memory_order_relaxed);
	if (marked)
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"%s: sender pid %d died while writing a packet; "
			"stepped over its queue cells after %" PRIu64 " ms\n",
			xep->name, (int)pid, (now - xep->stall_ns) / 1000000u);
	else
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"%s: a sender claimed queue cells and left them "
			"unmarked for %" PRIu64 " ms; stepped over them\n",
			xep->name, (now - xep->stall_ns) / 1000000u);
	return k;
}

/* Packets lie whole in the cells: the second phase is a copy. */
static ssize_t tnbc_shm_rx_copy(struct tnbc_xrx *rx, size_t off,
				const struct iovec *iov, size_t iov_count,
				size_t n)
{
	if (off > rx->len || n > rx->len - off)
		return -FI_EINVAL;
	return (ssize_t)tnbc_copy_to_iov(iov, iov_count, 0, rx->head + off, n);
}

/* Offers a packet; *kept (when given) gets the sender of one the
 * protocol keeps. */
static inline int tnbc_shm_offer(tnbc_rx_fn fn, void *arg, const uint8_t *pkt,
				 uint32_t len, uint64_t *kept)
{
	struct tnbc_xrx rx = {
		.head = pkt,
		.head_len = len,
		.len = len,
		.copy = tnbc_shm_rx_copy,
	};
	int verdict = fn(arg, &rx);

	if (verdict == TNBC_RX_KEEP && kept)
		*kept = TNBC_SHM_HOLD_KEY(rx.kept_src.pid, rx.kept_src.uid);
	return verdict;
}

static void tnbc_shm_bad_packet(struct tnbc_xep *xep, uint32_t len)
{
	uint64_t n = atomic_fetch_add_explicit(&xep->xdom->bad_pkts, 1,
					       memory_order_relaxed) +
		     1;

	/* 1, 2, 4, 8...: a flood of garbage must not flood the log */
	if (!(n & (n - 1)))
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"%s: dropped a malformed packet (cell length %u); "
			"%" PRIu64 " so far\n",
			xep->name, len, n);
}

/* Whether the mailbox has packets to offer: published since the last
 * look (one load of a line senders write only when they publish), or
 * taken and not consumed yet.  Any thread. */
static bool tnbc_shm_mbox_waiting(struct tnbc_xep *xep)
{
	/* seq_cst: after rx_posted's update, this load and a sender's OR
	 * followed by its look at rx_posted must not both miss (a plain
	 * load on x86) */
	return atomic_load(&xep->region->mbox_full) ||
	       atomic_load_explicit(&xep->mbox_pend, memory_order_relaxed);
}

/* Now and then (at most every TNBC_SHM_DEAD_NS, on a poll that found
 * the queue idle): a slot published by a sender that died before setting
 * its bit is offered anyway, and a slot claimed since the last sweep by
 * a process that no longer exists is handed back.  Consumer only. */
static void tnbc_shm_mbox_sweep(struct tnbc_xep *xep)
{
	uint64_t now = tnbc_now_ns(), found = 0;

	if (now - xep->mbox_sweep_ns < TNBC_SHM_DEAD_NS)
		return;
	xep->mbox_sweep_ns = now;
	for (unsigned i = 0; i < TNBC_SHM_MBOX_SLOTS; i++) {
		struct tnbc_shm_cell *slot = tnbc_shm_mbox_at(xep->mbox, i);
		uint64_t seq =
			atomic_load_explicit(&slot->seq, memory_order_relaxed);
		uint64_t seen = xep->mbox_claims[i];

		xep->mbox_claims[i] = seq & TNBC_SHM_CLAIMED ? seq : 0;
		if (seq == TNBC_SHM_MBOX_FULL)
			found |= 1ull << i;
		if (!(seq & TNBC_SHM_CLAIMED) || seq != seen ||
		    tnbc_pid_alive((pid_t)TNBC_SHM_CLAIM_PID(seq)))
			continue;
		if (!atomic_compare_exchange_strong_explicit(
			    &slot->seq, &seq, 0, memory_order_relaxed,
			    memory_order_relaxed))
			continue;
		xep->mbox_claims[i] = 0;
		atomic_fetch_add_explicit(&xep->xdom->dead_cells, 1,
					  memory_order_relaxed);
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"%s: sender pid %d died while writing a mailbox "
			"slot; handed it back\n",
			xep->name, (int)TNBC_SHM_CLAIM_PID(seq));
	}
	found &= ~xep->mbox_kept;
	if (found)
		atomic_fetch_or_explicit(&xep->mbox_pend, found,
					 memory_order_relaxed);
}

/* Offers the mailbox's packets, up to *budget of them, lowest slot
 * first; returns how many were consumed.  *later: the protocol asked to
 * see one again first (TNBC_RX_LATER), so the queue must wait. */
static int tnbc_shm_mbox_poll(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg,
			      int *budget, bool *later)
{
	uint64_t pend =
		atomic_load_explicit(&xep->mbox_pend, memory_order_relaxed);
	int n = 0, delivered = 0;

	if (atomic_load_explicit(&xep->region->mbox_full, memory_order_relaxed))
		pend |= atomic_exchange_explicit(&xep->region->mbox_full, 0,
						 memory_order_acquire);
	/* a kept packet's bit, set again by a hostile peer, waits too */
	pend &= ~xep->mbox_kept;
	while (pend && *budget > 0) {
		unsigned i = (unsigned)__builtin_ctzll(pend);
		struct tnbc_shm_cell *slot = tnbc_shm_mbox_at(xep->mbox, i);
		const uint8_t *pkt = (const uint8_t *)(slot + 1);
		int verdict = TNBC_RX_BAD;
		uint32_t len;

		/* a bit with nothing published behind it: a peer set it
		 * by hand, or the packet's own bit is still to come */
		if (atomic_load_explicit(&slot->seq, memory_order_acquire) !=
		    TNBC_SHM_MBOX_FULL) {
			pend &= pend - 1;
			continue;
		}
		tnbc_shm_tsan_acquire(xep->ino,
				      TNBC_SHM_MBOX_KEY(xep->nslots, i));
		(*budget)--;
		len = __atomic_load_n(&slot->len, __ATOMIC_RELAXED);
		if (len <= TNBC_SHM_MBOX_SLOT - TNBC_SHM_CELL_HDR)
			verdict = tnbc_shm_offer(fn, arg, pkt, len, NULL);
		if (verdict == TNBC_RX_BAD)
			tnbc_shm_bad_packet(xep, len);
		delivered += verdict == TNBC_RX_DONE;
		if (verdict == TNBC_RX_LATER) {
			*later = true;
			break;
		}
		pend &= pend - 1;
		if (verdict == TNBC_RX_KEEP) {
			xep->mbox_kept |= 1ull << i;
			continue;
		}
		tnbc_shm_tsan_release(xep->ino,
				      TNBC_SHM_MBOX_KEY(xep->nslots, i));
		atomic_store_explicit(&slot->seq, 0, memory_order_release);
		n++;
	}
	atomic_store_explicit(&xep->mbox_pend, pend, memory_order_relaxed);
	if (delivered)
		atomic_fetch_add_explicit(&xep->xdom->slot_pkts,
					  (uint64_t)delivered,
					  memory_order_relaxed);
	return n;
}

/* ------------------------------------------------------------------ */
/* Per-sender back pressure: kept packets moved out, senders held back  */

/* Records a packet the protocol keeps at pos: its sender and length. */
static void tnbc_shm_kept(struct tnbc_xep *xep, uint64_t pos, uint32_t len,
			  uint64_t key)
{
	if (!xep->kept) {
		xep->kept = calloc(xep->nslots, sizeof(*xep->kept));
		if (!xep->kept)
			return; /* nothing moves out: the queue fills */
	}
	xep->kept[pos & xep->mask].key = key;
	xep->kept[pos & xep->mask].len = len;
}

/* The count of key's moved packets; added when add.  NULL when it has
 * none (not add), or the table is full. */
static struct tnbc_shm_holder *tnbc_shm_holder(struct tnbc_xep *xep,
					       uint64_t key, bool add)
{
	for (unsigned i = 0; i < xep->nholders; i++)
		if (xep->holders[i].key == key)
			return &xep->holders[i];
	if (!add || xep->nholders == TNBC_SHM_HOLDERS)
		return NULL;
	xep->holders[xep->nholders] = (struct tnbc_shm_holder){.key = key};
	return &xep->holders[xep->nholders++];
}

/* Names the held senders in the region: the names, then their count (a
 * sender reading meanwhile may see one more or one less: it only sends
 * one more packet, or waits one more try). */
static void tnbc_shm_holds_publish(struct tnbc_xep *xep)
{
	struct tnbc_shm_region *r = xep->region;
	unsigned n = 0;

	for (unsigned i = 0; i < xep->nholders; i++)
		if (xep->holders[i].held)
			atomic_store_explicit(&r->hold[n++],
					      xep->holders[i].key,
					      memory_order_relaxed);
	atomic_store_explicit(&r->holds, n, memory_order_release);
}

static void tnbc_shm_hold(struct tnbc_xep *xep, struct tnbc_shm_holder *h)
{
	unsigned n = 0;

	if (h->held || !h->key) /* 0: a sender not known */
		return;
	for (unsigned i = 0; i < xep->nholders; i++)
		n += xep->holders[i].held;
	if (n == TNBC_SHM_HOLD_MAX)
		return;
	h->held = true;
	tnbc_shm_holds_publish(xep);
	atomic_fetch_add_explicit(&xep->xdom->held, 1, memory_order_relaxed);
	FI_INFO(&tnbc_prov, FI_LOG_EP_DATA,
		"%s: holding back sender %" PRIu64 ":%" PRIu64
		", %zu bytes of its messages wait unreceived\n",
		xep->name, h->key >> 32, h->key & 0xffffffffu, h->bytes);
}

/* A moved packet was taken: senders whose moved packets were mostly
 * taken (and the queue's room with them) go on, and those with none
 * left are forgotten. */
static void tnbc_shm_unspill(struct tnbc_xep *xep, struct tnbc_shm_spilled *p)
{
	struct tnbc_shm_holder *h = tnbc_shm_holder(xep, p->key, false);
	bool changed = false;
	unsigned i = 0;

	xep->spill_bytes -= p->len;
	if (h)
		h->bytes -= p->len < h->bytes ? p->len : h->bytes;
	free(p);
	while (i < xep->nholders) {
		h = &xep->holders[i];
		if (h->held && tnbc_xhold_over(h->bytes, xep->spill_bytes,
					       xep->spill_max)) {
			h->held = false;
			changed = true;
		}
		if (!h->held && !h->bytes) {
			*h = xep->holders[--xep->nholders];
			continue;
		}
		i++;
	}
	if (changed)
		tnbc_shm_holds_publish(xep);
}

/* Offers the moved packets not offered since the last rewind, oldest
 * first, counting each in *looked; returns how many were consumed. */
static int tnbc_shm_spill_poll(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg,
			       int *looked, int budget, bool *later)
{
	int n = 0;

	while (*looked < budget && *xep->spill_at) {
		struct tnbc_shm_spilled *p = *xep->spill_at;
		int verdict = tnbc_shm_offer(fn, arg, p->pkt, p->len, NULL);

		(*looked)++;
		if (verdict == TNBC_RX_LATER) {
			*later = true;
			break;
		}
		if (verdict == TNBC_RX_KEEP) {
			xep->spill_at = &p->next;
			continue;
		}
		if (verdict == TNBC_RX_BAD)
			tnbc_shm_bad_packet(xep, p->len);
		*xep->spill_at = p->next;
		if (!p->next)
			xep->spill_end = xep->spill_at;
		tnbc_shm_unspill(xep, p);
		n++;
	}
	if (!*xep->spill_at)
		atomic_store_explicit(&xep->spill_due, false,
				      memory_order_relaxed);
	return n;
}

/*
 * Kept packets hold the queue's head, and senders claim cells from head
 * on.  Once the cells from head to the first packet not offered yet
 * (kept ones, and those consumed behind them) pass half the queue, the
 * oldest kept packets move into this process's memory until a quarter
 * is left, at most spill_max bytes (the queue's size) in all.  A sender
 * whose moved packets pass an eighth of that is held back (hold[]) until
 * fewer than a sixteenth are left, and so is the sender of a packet that
 * finds no room to move.  Every packet moved before was offered since
 * the last rewind: the new ones go after them, still ahead of the
 * queue's.  Consumer only.
 */
static void tnbc_shm_spill(struct tnbc_xep *xep)
{
	if (*xep->spill_at || !xep->kept)
		return;
	while (xep->scan - xep->head > xep->nslots / 4) {
		uint64_t pos = xep->head, k;
		struct tnbc_shm_cell *cell = tnbc_shm_xcell(xep, pos);
		struct tnbc_shm_kept kept = xep->kept[pos & xep->mask];
		struct tnbc_shm_holder *h;
		struct tnbc_shm_spilled *p;

		/* [head, scan) holds kept packets and packets consumed
		 * behind them (done[]), and head is never one of those */
		k = tnbc_shm_xcells(xep, pos, kept.len);
		if (!k || xep->done[pos & xep->mask] ||
		    atomic_load_explicit(&cell->seq, memory_order_acquire) !=
			    pos + 1)
			break;
		h = tnbc_shm_holder(xep, kept.key, true);
		if (!h)
			break;
		if (xep->spill_bytes + kept.len > xep->spill_max) {
			tnbc_shm_hold(xep, h);
			break;
		}
		p = malloc(sizeof(*p) + kept.len);
		if (!p)
			break;
		memcpy(p->pkt, cell + 1, kept.len);
		p->next = NULL;
		p->key = kept.key;
		p->len = kept.len;
		*xep->spill_end = p;
		xep->spill_end = xep->spill_at = &p->next;
		xep->spill_bytes += kept.len;
		h->bytes += kept.len;
		if (tnbc_xhold_due(h->bytes, xep->spill_max))
			tnbc_shm_hold(xep, h);
		tnbc_shm_tsan_release(xep->ino, pos & xep->mask);
		tnbc_shm_free_cells(xep, pos, k);
		tnbc_shm_consumed(xep, pos, k);
		atomic_fetch_add_explicit(&xep->xdom->spilled, 1,
					  memory_order_relaxed);
	}
}

static int tnbc_shm_poll(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg,
			 int budget)
{
	const size_t room = xep->slot_size - TNBC_SHM_CELL_HDR;
	/* the mailbox and the queue take turns at going first: neither
	 * waits behind the other's traffic, and a poll of one packet (the
	 * look after a receive is posted) reaches both within two calls */
	bool ring_first = xep->mbox_turn;
	bool later = false;
	int n = 0, looked = 0;

	xep->mbox_turn = !ring_first;
	if (!ring_first && tnbc_shm_mbox_waiting(xep))
		n = tnbc_shm_mbox_poll(xep, fn, arg, &budget, &later);
	/* packets moved out are older than the queue's: offered first */
	if (*xep->spill_at && !later)
		n += tnbc_shm_spill_poll(xep, fn, arg, &looked, budget, &later);
	for (; looked < budget && !later; looked++) {
		uint64_t pos = tnbc_shm_next(xep);
		struct tnbc_shm_cell *cell = tnbc_shm_xcell(xep, pos);
		const uint8_t *pkt = (const uint8_t *)(cell + 1);
		uint64_t seq, k, key = 0;
		uint32_t len, fmt;
		int verdict;

		seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
		if (seq != pos + 1) {
			/* The common case, nothing there: whether a sender
			 * claimed the cell without marking it (tail, a line
			 * the senders write) is looked at now and then. */
			if (seq == 0 &&
			    !atomic_load_explicit(&xep->stalled,
						  memory_order_relaxed)) {
				if (atomic_load_explicit(&xep->look,
							 memory_order_relaxed))
					atomic_store_explicit(
						&xep->look, false,
						memory_order_relaxed);
				else if (tnbc_shm_idle_tick(xep))
					break;
				tnbc_shm_mbox_sweep(xep);
			}
			k = tnbc_shm_dead_claim(xep, pos, seq);
			if (!k)
				break;
			xep->scan += k;
			tnbc_shm_consumed(xep, pos, k);
			n++;
			continue;
		}
		atomic_store_explicit(&xep->stalled, false,
				      memory_order_relaxed);
		tnbc_shm_tsan_acquire(xep->ino, pos & xep->mask);
		/* One read of each field a peer may still change: the
		 * checks and every use below see the same values. */
		len = __atomic_load_n(&cell->len, __ATOMIC_RELAXED);
		fmt = __atomic_load_n(&cell->fmt, __ATOMIC_RELAXED);
		/* a packet this consumer cannot place is one cell long: the
		 * cells after it then look unmarked, and the consumer finds
		 * the next packet after TNBC_SHM_ORPHAN_NS */
		k = tnbc_shm_xcells(xep, pos, len);
		if (k && fmt == TNBC_SHM_FMT_PAD)
			verdict = TNBC_RX_DONE;
		else if (k && len <= room)
			verdict = tnbc_shm_offer(fn, arg, pkt, len, &key);
		else
			verdict = TNBC_RX_BAD;
		if (verdict == TNBC_RX_BAD)
			tnbc_shm_bad_packet(xep, len);
		if (verdict == TNBC_RX_LATER) {
			later = true;
			break;
		}
		if (!k)
			k = 1;
		xep->scan += k;
		if (verdict == TNBC_RX_KEEP) {
			tnbc_shm_kept(xep, pos, len, key);
			continue;
		}
		tnbc_shm_tsan_release(xep->ino, pos & xep->mask);
		tnbc_shm_free_cells(xep, pos, k);
		tnbc_shm_consumed(xep, pos, k);
		n++;
	}
	if (!later && xep->scan - xep->head >= xep->nslots / 2)
		tnbc_shm_spill(xep);
	if (ring_first && !later && looked < budget &&
	    tnbc_shm_mbox_waiting(xep)) {
		int left = budget - looked;

		n += tnbc_shm_mbox_poll(xep, fn, arg, &left, &later);
	}
	tnbc_shm_next(xep); /* publishes peek */
	/* a pass that moved packets took longer than an empty poll (see
	 * app_skip) */
	if (n) {
		unsigned skip = atomic_load_explicit(&xep->xdom->app_skip,
						     memory_order_relaxed);
		unsigned w = (unsigned)n * TNBC_SHM_APP_PKT_POLLS;

		atomic_store_explicit(&xep->xdom->app_skip,
				      skip > w ? skip - w : 0,
				      memory_order_relaxed);
	}
	return n;
}

static void tnbc_shm_rewind(struct tnbc_xep *xep)
{
	atomic_store_explicit(
		&xep->mbox_pend,
		atomic_load_explicit(&xep->mbox_pend, memory_order_relaxed) |
			xep->mbox_kept,
		memory_order_relaxed);
	xep->mbox_kept = 0;
	xep->spill_at = &xep->spill;
	atomic_store_explicit(&xep->spill_due, xep->spill != NULL,
			      memory_order_relaxed);
	xep->scan = xep->head;
	atomic_store_explicit(&xep->peek, xep->scan, memory_order_relaxed);
}

/* Without the consumer's lock: the cell poll would look at first is
 * empty, and poll would not look further this time.  A stale peek names
 * a cell poll has passed: freed cells read 0 only after head moved past
 * them, and kept ones stay published, so it errs towards polling. */
static bool tnbc_shm_idle(struct tnbc_xep *xep)
{
	uint64_t pos = atomic_load_explicit(&xep->peek, memory_order_relaxed);

	if (atomic_load_explicit(&tnbc_shm_xcell(xep, pos)->seq,
				 memory_order_relaxed) ||
	    tnbc_shm_mbox_waiting(xep))
		return false;
	if (atomic_load_explicit(&xep->stalled, memory_order_relaxed) ||
	    atomic_load_explicit(&xep->spill_due, memory_order_relaxed))
		return false;
	/* every 1024th idle look, poll looks for an unmarked claim */
	if (tnbc_shm_idle_tick(xep))
		return true;
	atomic_store_explicit(&xep->look, true, memory_order_relaxed);
	return false;
}

static bool tnbc_shm_pending(struct tnbc_xep *xep)
{
	uint64_t pos = tnbc_shm_next(xep);

	if (tnbc_shm_mbox_waiting(xep) || *xep->spill_at)
		return true;
	return atomic_load_explicit(&tnbc_shm_xcell(xep, pos)->seq,
				    memory_order_acquire) == pos + 1;
}

static void tnbc_shm_look_mark(struct tnbc_xep *xep)
{
	/* a hint a hostile peer may have moved: too far only means looks
	 * that find nothing, as every post made before */
	xep->look_until =
		atomic_load_explicit(&xep->region->tail, memory_order_acquire);
}

static bool tnbc_shm_unlooked(struct tnbc_xep *xep)
{
	/* the mailbox has no order to mark a point in; packets moved out
	 * lie before any point */
	if (tnbc_shm_mbox_waiting(xep) || *xep->spill_at)
		return true;
	return (int64_t)(xep->look_until - tnbc_shm_next(xep)) > 0 &&
	       tnbc_shm_pending(xep);
}

static bool tnbc_shm_stalled(struct tnbc_xep *xep)
{
	uint64_t pos = tnbc_shm_next(xep);
	uint64_t seq = atomic_load_explicit(&tnbc_shm_xcell(xep, pos)->seq,
					    memory_order_relaxed);

	return seq != pos + 1 &&
	       (TNBC_SHM_IS_CLAIM(seq, pos) || tnbc_shm_claimed_past(xep, pos));
}

/* Whether every packet not offered yet parks (TNBC_XPKT_PARKS) and the
 * queue is less than half full.  Consumer only. */
static bool tnbc_shm_quiet(struct tnbc_xep *xep)
{
	uint64_t first = tnbc_shm_next(xep), pos = xep->quiet_pos, k;

	if (first - xep->head >= xep->nslots / 2 || *xep->spill_at)
		return false;
	if ((int64_t)(pos - first) < 0 || pos - xep->head > xep->nslots)
		pos = first;
	for (; pos - xep->head < xep->nslots / 2; pos += k) {
		struct tnbc_shm_cell *cell = tnbc_shm_xcell(xep, pos);
		uint64_t seq =
			atomic_load_explicit(&cell->seq, memory_order_acquire);
		uint32_t fmt;

		xep->quiet_pos = pos;
		/* a claimed cell needs polls: its sender may have died */
		if (seq != pos + 1)
			return !TNBC_SHM_IS_CLAIM(seq, pos);
		k = tnbc_shm_xcells(
			xep, pos,
			__atomic_load_n(&cell->len, __ATOMIC_RELAXED));
		if (!k)
			return false;
		fmt = __atomic_load_n(&cell->fmt, __ATOMIC_RELAXED);
		if (fmt != TNBC_SHM_FMT_PAD && fmt != TNBC_SHM_FMT_PARKS)
			return false;
	}
	return false;
}

static ssize_t tnbc_shm_pull_iov(struct tnbc_xpeer *peer,
				 const struct iovec *local, size_t local_count,
				 const struct iovec *remote,
				 size_t remote_count)
{
	struct iovec l[TNBC_PULL_IOV_MAX], rm[TNBC_PULL_IOV_MAX];
	size_t want = tnbc_iov_len(local, local_count);
	size_t done = 0;

	while (done < want) {
		size_t lc = tnbc_iov_slice(local, local_count, done,
					   want - done, l, TNBC_PULL_IOV_MAX);
		size_t rc = tnbc_iov_slice(remote, remote_count, done,
					   want - done, rm, TNBC_PULL_IOV_MAX);
		ssize_t n = process_vm_readv(peer->pid, l, lc, rm, rc, 0);

		if (n < 0) {
			if (errno == EPERM || errno == ENOSYS ||
			    errno == EACCES)
				return done ? -FI_EIO : -FI_EPERM;
			FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
				"process_vm_readv from pid %d: %s\n",
				(int)peer->pid, strerror(errno));
			return errno == ESRCH ? -FI_EHOSTUNREACH : -FI_EIO;
		}
		if (n == 0)
			return -FI_EIO;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* Synchronous: rd is never needed. */
static ssize_t tnbc_shm_pull(struct tnbc_xep *xep, struct tnbc_xpeer *peer,
			     const struct iovec *local, size_t local_count,
			     const struct tnbc_xrmem *rmem, size_t remote_count,
			     struct tnbc_xread *rd)
{
	atomic_uint *pulls = &peer->xdom->bell->pulls;
	struct iovec remote[TNBC_PULL_IOV_MAX];
	ssize_t ret;

	(void)xep;
	(void)rd;
	if (!tnbc_env.cma || remote_count > TNBC_PULL_IOV_MAX)
		return -FI_ENOSYS;
	tnbc_xrmem_iov(rmem, remote_count, remote);
	/* A thread inside a long read is progressing, not idle: the engine
	 * must not mistake it for an application that stopped polling. */
	atomic_fetch_add_explicit(pulls, 1, memory_order_relaxed);
	ret = tnbc_shm_pull_iov(peer, local, local_count, remote, remote_count);
	atomic_fetch_sub_explicit(pulls, 1, memory_order_relaxed);
	return ret;
}

static void tnbc_shm_app_mark(struct tnbc_xdom *xdom, bool active)
{
	struct tnbc_shm_bell *bell = xdom->bell;
	uint64_t now, eighth, gap;
	unsigned skip, every;

	if (!active) {
		atomic_store_explicit(&xdom->app_written, 0,
				      memory_order_relaxed);
		atomic_store_explicit(&bell->app_seen, 0, memory_order_relaxed);
		return;
	}
	/* Counted without a locked add: threads polling together may lose
	 * some polls, which only moves the next reading.  With no thread
	 * marked polling the clock is read at once. */
	skip = atomic_load_explicit(&xdom->app_skip, memory_order_relaxed);
	if (skip &&
	    atomic_load_explicit(&bell->app_seen, memory_order_relaxed)) {
		atomic_store_explicit(&xdom->app_skip, skip - 1,
				      memory_order_relaxed);
		return;
	}
	every = atomic_load_explicit(&xdom->app_every, memory_order_relaxed);
	now = tnbc_now_ns();
	eighth = atomic_load_explicit(&xdom->window_ns, memory_order_relaxed) /
		 8;
	gap = now -
	      atomic_load_explicit(&xdom->app_read_ns, memory_order_relaxed);
	atomic_store_explicit(&xdom->app_read_ns, now, memory_order_relaxed);
	if (gap < eighth / 4 && every < TNBC_SHM_APP_EVERY_MAX)
		every *= 2;
	else if (gap > eighth)
		every = 1;
	atomic_store_explicit(&xdom->app_every, every, memory_order_relaxed);
	atomic_store_explicit(&xdom->app_skip, every - 1, memory_order_relaxed);
	/* Every sender reads this line while the engine naps: writing it
	 * on every poll would cost each of them a cache miss per packet.
	 * An eighth of a window late is still well inside the window. */
	if (now - atomic_load_explicit(&xdom->app_written,
				       memory_order_relaxed) <
	    eighth)
		return;
	atomic_store_explicit(&xdom->app_written, now, memory_order_relaxed);
	atomic_store_explicit(&bell->app_seen, now, memory_order_relaxed);
}

/* Is an application thread polling?  Read only: asked from any thread
 * (tnbc_engine_nudge). */
static bool tnbc_shm_app_active(struct tnbc_xdom *xdom)
{
	return tnbc_shm_app_polls(
		xdom->bell,
		atomic_load_explicit(&xdom->window_ns, memory_order_relaxed),
		0);
}

static void tnbc_shm_set_window(struct tnbc_xdom *xdom, uint64_t ns)
{
	atomic_store_explicit(&xdom->window_ns, ns, memory_order_relaxed);
	atomic_store_explicit(&xdom->bell->window_ns, ns, memory_order_relaxed);
}

static unsigned tnbc_shm_sleep_begin(struct tnbc_xdom *xdom,
				     enum tnbc_sleep how)
{
	struct tnbc_shm_bell *bell = xdom->bell;
	unsigned seq = atomic_load_explicit(&bell->seq, memory_order_acquire);

	xdom->sleep_how = how;
	atomic_store_explicit(&bell->sleeping,
			      how == TNBC_SLEEP_NAP ? TNBC_SHM_NAPPING
						    : TNBC_SHM_ASLEEP,
			      memory_order_relaxed);
	/* Pairs with the fence in tnbc_shm_ring, or, for senders that skip
	 * it (tnbc_shm_bell.asym), stands for it.  A bounded sleep needs no
	 * more: a packet such a sender published unseen waits for its end
	 * at worst.  The barrier interrupts every CPU that runs a
	 * registered process (a computing rank), and in a virtual machine
	 * it cost a fully subscribed LAMMPS run a tenth of its time when
	 * run before every sleep. */
	if (how == TNBC_SLEEP_LONG && xdom->asym &&
	    !syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0))
		return seq;
	atomic_thread_fence(memory_order_seq_cst);
	return seq;
}

static void tnbc_shm_sleep_cancel(struct tnbc_xdom *xdom)
{
	atomic_store(&xdom->bell->sleeping, TNBC_SHM_AWAKE);
}

static atomic_uint *tnbc_shm_sleep_word(struct tnbc_xdom *xdom,
					uint64_t timeout_ns)
{
	/* an unbounded sleep bounded after all (a retry): senders may
	 * leave packets to a polling application, as in a nap.  A short
	 * sleep stays a sleep: the application is away, and every packet
	 * rings. */
	if (timeout_ns && xdom->sleep_how == TNBC_SLEEP_LONG)
		atomic_store_explicit(&xdom->bell->sleeping, TNBC_SHM_NAPPING,
				      memory_order_relaxed);
	return &xdom->bell->seq;
}

static void tnbc_shm_sleep_wait(struct tnbc_xdom *xdom, unsigned seq,
				uint64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;

	(void)tnbc_shm_sleep_word(xdom, timeout_ns);
	if (timeout_ns) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
		ts.tv_nsec = (long)(timeout_ns % 1000000000u);
		tsp = &ts;
	}
	tnbc_futex(&xdom->bell->seq, FUTEX_WAIT, seq, tsp);
	atomic_store(&xdom->bell->sleeping, TNBC_SHM_AWAKE);
}

static void tnbc_shm_wake(struct tnbc_xdom *xdom)
{
	atomic_fetch_add_explicit(&xdom->bell->seq, 1, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&xdom->bell->sleeping, memory_order_relaxed))
		tnbc_futex(&xdom->bell->seq, FUTEX_WAKE, 1, NULL);
}

static void tnbc_shm_rx_posted(struct tnbc_xdom *xdom, int delta)
{
	/* seq_cst: pairs with the load in tnbc_shm_ring */
	atomic_fetch_add(&xdom->bell->rx_posted, delta);
}

static void tnbc_shm_stats(struct tnbc_xdom *xdom, struct tnbc_xport_stats *st)
{
	memset(st, 0, sizeof(*st)); /* what a stream transport counts */
	st->bad_pkts = atomic_load(&xdom->bad_pkts);
	st->dead_cells = atomic_load(&xdom->dead_cells);
	st->refused = atomic_load(&xdom->refused);
	st->slot_pkts = atomic_load(&xdom->slot_pkts);
	st->spilled = atomic_load(&xdom->spilled);
	st->held = atomic_load(&xdom->held);
}

static const struct tnbc_xport_bell tnbc_shm_bell = {
	.sleep_cancel = tnbc_shm_sleep_cancel,
	.sleep_word = tnbc_shm_sleep_word,
	.sleep_wait = tnbc_shm_sleep_wait,
	.wake = tnbc_shm_wake,
};

const struct tnbc_xport_ops tnbc_shm_ops = {
	.name = "shm",
	.id = TNBC_XPORT_SHM,
	.flags = TNBC_XPORT_LOCAL | TNBC_XPORT_PULL,
	.xaddr_off = -1, /* the name is the address */
	.dom_open = tnbc_shm_dom_open,
	.dom_close = tnbc_shm_dom_close,
	.ep_open = tnbc_shm_ep_open,
	.ep_close = tnbc_shm_ep_close,
	.max_packet = tnbc_shm_max_packet,
	.packet_limit = tnbc_shm_packet_limit,
	.peer_get = tnbc_shm_peer_get,
	.peer_alive = tnbc_shm_peer_alive,
	.send = tnbc_shm_send,
	.poll = tnbc_shm_poll,
	.rewind = tnbc_shm_rewind,
	.pending = tnbc_shm_pending,
	.look_mark = tnbc_shm_look_mark,
	.unlooked = tnbc_shm_unlooked,
	.stalled = tnbc_shm_stalled,
	.idle = tnbc_shm_idle,
	.quiet = tnbc_shm_quiet,
	.pull = tnbc_shm_pull,
	.app_mark = tnbc_shm_app_mark,
	.rx_posted = tnbc_shm_rx_posted,
	.app_active = tnbc_shm_app_active,
	.set_window = tnbc_shm_set_window,
	.sleep_begin = tnbc_shm_sleep_begin,
	.bell = &tnbc_shm_bell,
	.stats = tnbc_shm_stats,
};
