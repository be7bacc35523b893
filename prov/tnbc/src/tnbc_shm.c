/*
 * Shared-memory transport.
 *
 * Each endpoint owns a POSIX shared-memory region holding a bounded
 * multi-producer, single-consumer queue of fixed-size packet slots.  Any
 * process that knows the endpoint's name maps the region and enqueues
 * packets into it directly: one copy in by the sender, one copy out by the
 * receiver.  Large messages never go through the queue when the kernel
 * allows cross-memory attach: the receiver reads the sender's buffer with
 * process_vm_readv (single copy).
 *
 * Each domain also owns a small "bell" region: the futex the domain's
 * engine sleeps on, a flag saying it sleeps, and the time an application
 * thread last polled.  An endpoint region records the name of its bell so
 * a sender can wake the right engine.
 *
 * Queue cells carry a sequence number (Vyukov's bounded queue): producers
 * claim a position with a CAS on tail and publish the cell by storing
 * pos + 1 into its sequence; the consumer releases it by storing
 * pos + nslots.  A producer that dies between claim and publish leaves
 * one cell unpublished; the consumer then stops at it, which affects only
 * this endpoint and never its ability to close.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tnbc.h"

#define TNBC_SHM_MAGIC	   0x74626e63u /* "tnbc" */
#define TNBC_SHM_CELL_HDR  16
#define TNBC_SHM_NAME_MAX  64
#define TNBC_SHM_PEER_HASH 1024

struct tnbc_shm_bell {
	uint32_t magic;
	uint32_t version;
	_Alignas(64) atomic_uint seq; /* futex word */
	atomic_uint sleeping;
	/* Bumped by application polls; sampled by the engine, which then
	 * publishes app_active for senders.  No clock on the hot path. */
	_Alignas(64) atomic_uint_fast64_t app_polls;
	atomic_uint app_active;
	atomic_uint pulls; /* single-copy reads in flight in this domain */
	/* receives posted in this domain: while there are none, an eager
	 * message has nothing to complete and may wait in the queue for
	 * the application's next call, without a wake-up */
	atomic_int rx_posted;
};

struct tnbc_shm_cell {
	atomic_uint_fast64_t seq;
	uint32_t len;
	uint32_t pad;
	/* packet follows: struct tnbc_hdr + payload */
};

_Static_assert(sizeof(struct tnbc_shm_cell) == TNBC_SHM_CELL_HDR, "cell");

struct tnbc_shm_region {
	uint32_t magic;
	uint32_t version;
	uint32_t nslots;
	uint32_t slot_size;
	int32_t pid;
	atomic_uint ready;
	char bell_name[TNBC_SHM_NAME_MAX];
	_Alignas(64) atomic_uint_fast64_t tail;
	_Alignas(64) uint64_t head; /* owner only */
	_Alignas(64) uint8_t cells[];
};

struct tnbc_shm_retired {
	struct tnbc_shm_retired *next;
	void *region;
	size_t len;
	void *bell;
};

struct tnbc_xpeer {
	struct tnbc_xpeer *hnext;
	struct tnbc_xdom *xdom;
	struct tnbc_name name;
	struct tnbc_shm_region *region;
	size_t region_len;
	struct tnbc_shm_bell *bell;
	uint32_t nslots, slot_size;
	pid_t pid;
};

struct tnbc_xdom {
	struct tnbc_shm_bell *bell;
	char bell_name[TNBC_SHM_NAME_MAX];
	pthread_mutex_t lock; /* peer cache */
	struct tnbc_xpeer *peers[TNBC_SHM_PEER_HASH];
	uint64_t host;
	uint64_t seen_polls; /* engine only */
	/* Mappings of peers that closed and reopened under the same name;
	 * other threads may still be reading them, so they live as long as
	 * the domain. */
	struct tnbc_shm_retired *retired;
};

struct tnbc_xep {
	struct tnbc_xdom *xdom;
	struct tnbc_shm_region *region;
	size_t region_len;
	char name[TNBC_SHM_NAME_MAX];
};

static atomic_uint tnbc_shm_next_uid;

static uint64_t tnbc_shm_host_id(void)
{
	char buf[64] = {0};
	uint64_t h = 1469598103934665603ull;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	for (char *p = buf; *p && *p != '\n'; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	return h;
}

static void tnbc_shm_region_name(const struct tnbc_name *name, char *buf,
				 size_t len)
{
	if (name->kind == TNBC_NAME_SVC)
		snprintf(buf, len, "/tnbc-svc-%" PRIu32, name->uid);
	else
		snprintf(buf, len, "/tnbc-%" PRIu32 "-%" PRIu32, name->pid,
			 name->uid);
}

static int tnbc_futex(atomic_uint *addr, int op, unsigned val,
		      const struct timespec *ts)
{
	return (int)syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

static void *tnbc_shm_map(const char *name, size_t *len);

/* A region left by a process that died (pids and service numbers are
 * reused) may be replaced; one whose owner lives may not. */
static bool tnbc_shm_stale(const char *name)
{
	struct tnbc_shm_region *r;
	size_t len = 0;
	bool stale = true;

	r = tnbc_shm_map(name, &len);
	if (r && len >= sizeof(*r) && r->magic == TNBC_SHM_MAGIC && r->pid > 0)
		stale = kill(r->pid, 0) && errno == ESRCH;
	if (r)
		munmap(r, len);
	return stale;
}

/* own_name: the name embeds our pid and a number this process never
 * used, so an existing file was left by an earlier process with our pid. */
static void *tnbc_shm_create(const char *name, size_t len, bool own_name)
{
	void *p;
	int fd;

	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 && errno == EEXIST && (own_name || tnbc_shm_stale(name))) {
		shm_unlink(name);
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	}
	if (fd < 0) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL, "shm_open %s: %s\n", name,
			strerror(errno));
		return NULL;
	}
	if (ftruncate(fd, (off_t)len)) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL, "ftruncate %s: %s\n", name,
			strerror(errno));
		close(fd);
		shm_unlink(name);
		return NULL;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		shm_unlink(name);
		return NULL;
	}
	return p;
}

static void *tnbc_shm_map(const char *name, size_t *len)
{
	struct stat st;
	void *p;
	int fd;

	fd = shm_open(name, O_RDWR, 0);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || st.st_size <= 0) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	*len = (size_t)st.st_size;
	return p;
}

static int tnbc_shm_dom_open(struct tnbc_xdom **out)
{
	struct tnbc_xdom *xdom;

	xdom = calloc(1, sizeof(*xdom));
	if (!xdom)
		return -FI_ENOMEM;
	pthread_mutex_init(&xdom->lock, NULL);
	xdom->host = tnbc_shm_host_id();
	snprintf(xdom->bell_name, sizeof(xdom->bell_name), "/tnbc-%d-b%u",
		 (int)getpid(), atomic_fetch_add(&tnbc_shm_next_uid, 1));
	xdom->bell =
		tnbc_shm_create(xdom->bell_name, sizeof(*xdom->bell), true);
	if (!xdom->bell)
		goto err_free;
	xdom->bell->magic = TNBC_SHM_MAGIC;
	xdom->bell->version = TNBC_PROTO_VERSION;
	*out = xdom;
	return 0;

err_free:
	pthread_mutex_destroy(&xdom->lock);
	free(xdom);
	return -FI_ENOMEM;
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

static int tnbc_shm_ep_open(struct tnbc_xdom *xdom, long svc,
			    struct tnbc_xep **out, struct tnbc_name *name)
{
	struct tnbc_shm_region *r;
	struct tnbc_xep *xep;
	size_t nslots = tnbc_env.rx_slots;
	size_t slot = tnbc_env.slot_size;

	xep = calloc(1, sizeof(*xep));
	if (!xep)
		return -FI_ENOMEM;
	memset(name, 0, sizeof(*name));
	name->version = TNBC_PROTO_VERSION;
	name->xport = TNBC_XPORT_SHM;
	name->pid = (uint32_t)getpid();
	name->host = xdom->host;
	if (svc >= 0) {
		name->kind = TNBC_NAME_SVC;
		name->uid = (uint32_t)svc;
	} else {
		name->kind = TNBC_NAME_PID;
		name->uid = atomic_fetch_add(&tnbc_shm_next_uid, 1);
	}
	tnbc_shm_region_name(name, xep->name, sizeof(xep->name));

	xep->region_len = sizeof(*r) + nslots * slot;
	r = tnbc_shm_create(xep->name, xep->region_len, svc < 0);
	if (!r) {
		free(xep);
		return svc >= 0 ? -FI_EADDRINUSE : -FI_ENOMEM;
	}
	r->magic = TNBC_SHM_MAGIC;
	r->version = TNBC_PROTO_VERSION;
	r->nslots = (uint32_t)nslots;
	r->slot_size = (uint32_t)slot;
	r->pid = (int32_t)getpid();
	snprintf(r->bell_name, sizeof(r->bell_name), "%s", xdom->bell_name);
	for (size_t i = 0; i < nslots; i++) {
		struct tnbc_shm_cell *c =
			(struct tnbc_shm_cell *)(r->cells + i * slot);
		atomic_init(&c->seq, i);
	}
	atomic_store_explicit(&r->ready, 1, memory_order_release);
	xep->region = r;
	xep->xdom = xdom;
	*out = xep;
	return 0;
}

static void tnbc_shm_ep_close(struct tnbc_xep *xep)
{
	/* Tells peers holding a mapping that this name may come back as a
	 * new region (a restarted service). */
	atomic_store_explicit(&xep->region->ready, 0, memory_order_release);
	munmap(xep->region, xep->region_len);
	shm_unlink(xep->name);
	free(xep);
}

static size_t tnbc_shm_max_payload(struct tnbc_xpeer *peer)
{
	return peer->slot_size - TNBC_SHM_CELL_HDR - sizeof(struct tnbc_hdr);
}

static size_t tnbc_shm_hash(const struct tnbc_name *name)
{
	return (name->pid * 31u + name->uid * 7u + name->kind) %
	       TNBC_SHM_PEER_HASH;
}

static bool tnbc_shm_name_eq(const struct tnbc_name *a,
			     const struct tnbc_name *b)
{
	return a->kind == b->kind && a->uid == b->uid &&
	       (a->kind == TNBC_NAME_SVC || a->pid == b->pid);
}

static int tnbc_shm_peer_map(struct tnbc_xdom *xdom,
			     const struct tnbc_name *name,
			     struct tnbc_xpeer **out)
{
	char rname[TNBC_SHM_NAME_MAX];
	struct tnbc_xpeer *peer;
	size_t blen = 0;

	if (name->version != TNBC_PROTO_VERSION ||
	    name->xport != TNBC_XPORT_SHM ||
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
	peer->name = *name;
	tnbc_shm_region_name(name, rname, sizeof(rname));
	peer->region = tnbc_shm_map(rname, &peer->region_len);
	if (!peer->region || peer->region_len < sizeof(*peer->region) ||
	    peer->region->magic != TNBC_SHM_MAGIC ||
	    peer->region->version != TNBC_PROTO_VERSION ||
	    !atomic_load_explicit(&peer->region->ready, memory_order_acquire)) {
		FI_WARN(&tnbc_prov, FI_LOG_AV, "cannot map peer region %s\n",
			rname);
		goto err;
	}
	peer->nslots = peer->region->nslots;
	peer->slot_size = peer->region->slot_size;
	peer->pid = peer->region->pid;
	if (!peer->nslots || (peer->nslots & (peer->nslots - 1)) ||
	    peer->slot_size < 1024 ||
	    sizeof(*peer->region) + (size_t)peer->nslots * peer->slot_size >
		    peer->region_len)
		goto err;
	peer->bell = tnbc_shm_map(peer->region->bell_name, &blen);
	if (!peer->bell || blen < sizeof(*peer->bell) ||
	    peer->bell->magic != TNBC_SHM_MAGIC)
		goto err;
	*out = peer;
	return 0;
err:
	if (peer->bell)
		munmap(peer->bell, blen);
	peer->bell = NULL;
	tnbc_shm_peer_free(peer);
	return -FI_EHOSTUNREACH;
}

static int tnbc_shm_peer_get(struct tnbc_xdom *xdom,
			     const struct tnbc_name *name,
			     struct tnbc_xpeer **out)
{
	size_t h = tnbc_shm_hash(name);
	struct tnbc_xpeer *p;
	int ret = 0;

	pthread_mutex_lock(&xdom->lock);
	for (p = xdom->peers[h]; p; p = p->hnext)
		if (tnbc_shm_name_eq(&p->name, name))
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
	char path[64], buf[256], *p;
	bool alive = true;
	FILE *f;

	if (kill(peer->pid, 0) && errno == ESRCH)
		return false;
	/* A killed process that nobody reaped yet is a zombie: it exists
	 * for kill(2) but will never answer. */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)peer->pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(buf, sizeof(buf), f)) {
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
			alive = false;
	}
	fclose(f);
	return alive;
}

/* quiet: an eager message the receiver may leave in its queue (see
 * rx_posted; the caller found the queue less than half full) */
static void tnbc_shm_ring(struct tnbc_shm_bell *bell, bool quiet)
{
	/* Pairs with the fence in tnbc_shm_sleep_begin: either the engine
	 * sees our packet before sleeping, or we see it asleep. */
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&bell->sleeping, memory_order_relaxed))
		return;
	/* An application thread polls there; the engine's nap is bounded. */
	if (atomic_load_explicit(&bell->app_active, memory_order_relaxed))
		return;
	/* Pairs with tnbc_shm_rx_posted: a receive posted after this load
	 * finds the packet itself. */
	if (quiet &&
	    !atomic_load_explicit(&bell->rx_posted, memory_order_relaxed))
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
	peer->pid = fresh->pid;
	peer->region_len = fresh->region_len;
	peer->bell = fresh->bell;
	__atomic_store_n(&peer->region, fresh->region, __ATOMIC_RELEASE);
	free(fresh);
out:
	pthread_mutex_unlock(&xdom->lock);
	return ret;
}

static int tnbc_shm_send(struct tnbc_xpeer *peer, const struct tnbc_hdr *hdr,
			 const struct iovec *iov, size_t iov_count)
{
	struct tnbc_shm_region *r = peer->region;
	uint64_t mask = peer->nslots - 1;
	struct tnbc_shm_cell *cell, *half;
	uint64_t pos, seq;
	uint8_t *dst;
	size_t len;

	if (!atomic_load_explicit(&r->ready, memory_order_acquire)) {
		int ret = tnbc_shm_peer_refresh(peer);

		if (ret)
			return ret;
		r = peer->region;
		mask = peer->nslots - 1;
	}
	len = sizeof(*hdr) + hdr->payload_len;
	if (len + TNBC_SHM_CELL_HDR > peer->slot_size)
		return -FI_EMSGSIZE;

	pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
	for (;;) {
		cell = (struct tnbc_shm_cell *)(r->cells +
						(pos & mask) * peer->slot_size);
		seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
		if (seq == pos) {
			if (atomic_compare_exchange_weak_explicit(
				    &r->tail, &pos, pos + 1,
				    memory_order_relaxed, memory_order_relaxed))
				break;
		} else if ((int64_t)(seq - pos) < 0) {
			return -FI_EAGAIN;
		} else {
			pos = atomic_load_explicit(&r->tail,
						   memory_order_relaxed);
		}
	}

	dst = (uint8_t *)(cell + 1);
	memcpy(dst, hdr, sizeof(*hdr));
	dst += sizeof(*hdr);
	for (size_t i = 0, left = hdr->payload_len; i < iov_count && left;
	     i++) {
		size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;

		if (n)
			memcpy(dst, iov[i].iov_base, n);
		dst += n;
		left -= n;
	}
	cell->len = (uint32_t)len;
	atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
	/* half a queue ahead still free: nobody needs to drain it yet */
	half = (struct tnbc_shm_cell *)(r->cells + ((pos + peer->nslots / 2) &
						    mask) * peer->slot_size);
	tnbc_shm_ring(peer->bell,
		      hdr->type == TNBC_PKT_EAGER &&
			      atomic_load_explicit(&half->seq,
						   memory_order_relaxed) ==
				      pos + peer->nslots / 2);
	return 0;
}

static int tnbc_shm_poll(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg,
			 int budget)
{
	struct tnbc_shm_region *r = xep->region;
	uint64_t mask = r->nslots - 1;
	int n = 0;

	while (n < budget) {
		struct tnbc_shm_cell *cell =
			(struct tnbc_shm_cell *)(r->cells +
						 (r->head & mask) *
							 r->slot_size);
		const struct tnbc_hdr *hdr = (const void *)(cell + 1);

		if (atomic_load_explicit(&cell->seq, memory_order_acquire) !=
		    r->head + 1)
			break;
		if (cell->len < sizeof(*hdr) ||
		    cell->len > r->slot_size - TNBC_SHM_CELL_HDR ||
		    hdr->version != TNBC_PROTO_VERSION ||
		    sizeof(*hdr) + hdr->payload_len != cell->len) {
			FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
				"dropping malformed packet (len %u)\n",
				cell->len);
		} else {
			fn(arg, hdr, hdr + 1);
		}
		atomic_store_explicit(&cell->seq, r->head + r->nslots,
				      memory_order_release);
		r->head++;
		n++;
	}
	return n;
}

static bool tnbc_shm_pending(struct tnbc_xep *xep)
{
	struct tnbc_shm_region *r = xep->region;
	struct tnbc_shm_cell *cell =
		(struct tnbc_shm_cell *)(r->cells +
					 (r->head & (r->nslots - 1)) *
						 r->slot_size);

	return atomic_load_explicit(&cell->seq, memory_order_acquire) ==
	       r->head + 1;
}

/* Whether every queued packet is an eager message and the queue is less
 * than half full.  Consumer only. */
static bool tnbc_shm_quiet(struct tnbc_xep *xep)
{
	struct tnbc_shm_region *r = xep->region;
	uint64_t mask = r->nslots - 1;

	for (uint64_t pos = r->head; pos - r->head < r->nslots / 2; pos++) {
		struct tnbc_shm_cell *cell =
			(struct tnbc_shm_cell *)(r->cells +
						 (pos & mask) * r->slot_size);
		const struct tnbc_hdr *hdr = (const void *)(cell + 1);

		if (atomic_load_explicit(&cell->seq, memory_order_acquire) !=
		    pos + 1)
			return true;
		if (hdr->type != TNBC_PKT_EAGER)
			return false;
	}
	return false;
}

static ssize_t tnbc_shm_pull_iov(struct tnbc_xpeer *peer,
				 const struct iovec *local, size_t local_count,
				 const struct iovec *remote,
				 size_t remote_count)
{
	struct iovec l[TNBC_IOV_LIMIT], rm[TNBC_IOV_LIMIT];
	size_t want = tnbc_iov_len(local, local_count);
	size_t done = 0;

	while (done < want) {
		size_t lc = tnbc_iov_slice(local, local_count, done,
					   want - done, l, TNBC_IOV_LIMIT);
		size_t rc = tnbc_iov_slice(remote, remote_count, done,
					   want - done, rm, TNBC_IOV_LIMIT);
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

static ssize_t tnbc_shm_pull(struct tnbc_xpeer *peer, const struct iovec *local,
			     size_t local_count, const struct iovec *remote,
			     size_t remote_count)
{
	atomic_uint *pulls = &peer->xdom->bell->pulls;
	ssize_t ret;

	if (!tnbc_env.cma)
		return -FI_ENOSYS;
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

	if (active) {
		/* Racy increments from several threads only lose counts,
		 * and any change is enough for the engine. */
		atomic_store_explicit(
			&bell->app_polls,
			atomic_load_explicit(&bell->app_polls,
					     memory_order_relaxed) +
				1,
			memory_order_relaxed);
	} else {
		atomic_store_explicit(&bell->app_active, 0,
				      memory_order_relaxed);
	}
}

/* Engine only: did an application thread poll since the last call? */
static bool tnbc_shm_app_active(struct tnbc_xdom *xdom)
{
	struct tnbc_shm_bell *bell = xdom->bell;
	uint64_t polls =
		atomic_load_explicit(&bell->app_polls, memory_order_relaxed);
	bool active = polls != xdom->seen_polls ||
		      atomic_load_explicit(&bell->pulls, memory_order_relaxed);

	xdom->seen_polls = polls;
	atomic_store_explicit(&bell->app_active, active, memory_order_relaxed);
	return active;
}

static unsigned tnbc_shm_sleep_begin(struct tnbc_xdom *xdom)
{
	struct tnbc_shm_bell *bell = xdom->bell;
	unsigned seq = atomic_load_explicit(&bell->seq, memory_order_acquire);

	atomic_store_explicit(&bell->sleeping, 1, memory_order_relaxed);
	/* Pairs with the fence in tnbc_shm_ring. */
	atomic_thread_fence(memory_order_seq_cst);
	return seq;
}

static void tnbc_shm_sleep_cancel(struct tnbc_xdom *xdom)
{
	atomic_store(&xdom->bell->sleeping, 0);
}

static void tnbc_shm_sleep_wait(struct tnbc_xdom *xdom, unsigned seq,
				uint64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;

	if (timeout_ns) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
		ts.tv_nsec = (long)(timeout_ns % 1000000000u);
		tsp = &ts;
	}
	tnbc_futex(&xdom->bell->seq, FUTEX_WAIT, seq, tsp);
	atomic_store(&xdom->bell->sleeping, 0);
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

const struct tnbc_xport_ops tnbc_shm_ops = {
	.name = "shm",
	.id = TNBC_XPORT_SHM,
	.dom_open = tnbc_shm_dom_open,
	.dom_close = tnbc_shm_dom_close,
	.ep_open = tnbc_shm_ep_open,
	.ep_close = tnbc_shm_ep_close,
	.max_payload = tnbc_shm_max_payload,
	.peer_get = tnbc_shm_peer_get,
	.peer_alive = tnbc_shm_peer_alive,
	.send = tnbc_shm_send,
	.poll = tnbc_shm_poll,
	.pending = tnbc_shm_pending,
	.quiet = tnbc_shm_quiet,
	.pull = tnbc_shm_pull,
	.app_mark = tnbc_shm_app_mark,
	.rx_posted = tnbc_shm_rx_posted,
	.app_active = tnbc_shm_app_active,
	.sleep_begin = tnbc_shm_sleep_begin,
	.sleep_cancel = tnbc_shm_sleep_cancel,
	.sleep_wait = tnbc_shm_sleep_wait,
	.wake = tnbc_shm_wake,
};
