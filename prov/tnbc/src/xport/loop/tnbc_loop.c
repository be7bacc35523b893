/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The loopback transport: endpoints of one process, joined by queues in
 * ordinary memory.  It exists so that the protocol layer (matching,
 * rendezvous, RMA, triggered work, collectives) can be unit-tested with
 * no shared memory under it, and so that a second implementation keeps
 * the transport interface honest.  FI_TNBC_XPORTS=loop selects it; every
 * peer must then live in the calling process.
 *
 * It is deliberately plain: each endpoint's queue is a list under a
 * mutex, a send copies the packet into a buffer of its own, a packet is
 * offered as a stream transport offers one (its frame in memory, the
 * rest copied out in order, so that the protocol's receive in two phases
 * is tested here), every send kicks the target domain's engine (which
 * sleeps in its domain's epoll set), and a single-copy read reads this
 * process's own memory.
 * No application window: senders always ring.
 *
 * Locks: tnbc_loop_reg.lock (the process's endpoints) > xep->lock >
 * xdom->lock.  Neither poll nor send holds one across a call into the
 * core (the protocol's callback may send to the same endpoint; the kick
 * wakes an engine): a sender's kick counts in the target domain's
 * kickers instead, which its close waits out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tnbc_base.h"
#include "tnbc_xport.h"

struct tnbc_loop_pkt {
	struct tnbc_loop_pkt *next;
	uint64_t seq; /* the queue's count of packets when it came */
	uint32_t len;
	bool parks;
	uint8_t data[];
};

struct tnbc_xdom {
	struct tnbc_xkick kick; /* how a send wakes this domain's engine */
	/* senders between finding one of its endpoints and kicking: it
	 * lives until they are done */
	atomic_uint kickers;
	pthread_mutex_t lock; /* peers */
	_Atomic uint64_t bad_pkts;
	struct tnbc_xpeer *peers; /* handles given out, freed at close */
};

struct tnbc_xep {
	struct tnbc_xep *next; /* in tnbc_loop_reg */
	struct tnbc_xdom *xdom;
	struct tnbc_name name;
	pthread_mutex_t lock;
	struct tnbc_loop_pkt *head;
	struct tnbc_loop_pkt **tail;
	/* the link that holds the oldest packet not offered yet: packets
	 * before it were kept (TNBC_RX_KEEP) */
	struct tnbc_loop_pkt **scan;
	size_t bytes; /* of the packets queued, kept ones too */
	_Atomic size_t fresh; /* packets not offered yet */
	uint64_t sent; /* packets ever queued */
	uint64_t mark; /* look_mark's sent */
};

struct tnbc_xpeer {
	struct tnbc_xpeer_base base; /* first: the core reads it */
	struct tnbc_xpeer *next;
	struct tnbc_name name;
};

/* Every loop endpoint of the process: what a peer's name resolves to. */
static struct {
	pthread_mutex_t lock;
	struct tnbc_xep *eps;
} tnbc_loop_reg = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* tnbc_loop_reg.lock held */
static struct tnbc_xep *tnbc_loop_find(const struct tnbc_name *name)
{
	for (struct tnbc_xep *e = tnbc_loop_reg.eps; e; e = e->next)
		if (tnbc_name_same(&e->name, name))
			return e;
	return NULL;
}

static int tnbc_loop_dom_open(struct tnbc_xdom **out,
			      const struct tnbc_xdom_attr *attr)
{
	struct tnbc_xdom *xdom = calloc(1, sizeof(*xdom));

	if (!xdom)
		return -FI_ENOMEM;
	xdom->kick = attr->wake;
	if (pthread_mutex_init(&xdom->lock, NULL)) {
		free(xdom);
		return -FI_ENOMEM;
	}
	*out = xdom;
	return 0;
}

static void tnbc_loop_dom_close(struct tnbc_xdom *xdom)
{
	/* its endpoints are gone from the registry: no new sender finds
	 * it, and those that did are about to finish their kick */
	while (atomic_load_explicit(&xdom->kickers, memory_order_acquire))
		sched_yield();
	while (xdom->peers) {
		struct tnbc_xpeer *p = xdom->peers;

		xdom->peers = p->next;
		free(p);
	}
	pthread_mutex_destroy(&xdom->lock);
	free(xdom);
}

static int tnbc_loop_ep_open(struct tnbc_xdom *xdom,
			     const struct tnbc_name *name, uint8_t *xaddr,
			     struct tnbc_xep **out)
{
	struct tnbc_xep *xep = calloc(1, sizeof(*xep));
	int ret = 0;

	(void)xaddr; /* none: the name finds the endpoint */
	if (!xep)
		return -FI_ENOMEM;
	if (pthread_mutex_init(&xep->lock, NULL)) {
		free(xep);
		return -FI_ENOMEM;
	}
	xep->xdom = xdom;
	xep->tail = &xep->head;
	xep->scan = &xep->head;
	pthread_mutex_lock(&tnbc_loop_reg.lock);
	if (tnbc_loop_find(name))
		ret = -FI_EADDRINUSE;
	if (!ret) {
		xep->name = *name;
		xep->next = tnbc_loop_reg.eps;
		tnbc_loop_reg.eps = xep;
	}
	pthread_mutex_unlock(&tnbc_loop_reg.lock);
	if (ret) {
		pthread_mutex_destroy(&xep->lock);
		free(xep);
		return ret;
	}
	*out = xep;
	return 0;
}

static void tnbc_loop_ep_close(struct tnbc_xep *xep)
{
	struct tnbc_xep **it;

	pthread_mutex_lock(&tnbc_loop_reg.lock);
	for (it = &tnbc_loop_reg.eps; *it; it = &(*it)->next) {
		if (*it == xep) {
			*it = xep->next;
			break;
		}
	}
	pthread_mutex_unlock(&tnbc_loop_reg.lock);
	while (xep->head) {
		struct tnbc_loop_pkt *p = xep->head;

		xep->head = p->next;
		free(p);
	}
	pthread_mutex_destroy(&xep->lock);
	free(xep);
}

/* Bytes one endpoint's queue holds, as shm's does. */
static size_t tnbc_loop_room(void)
{
	return tnbc_env.rx_slots * tnbc_env.slot_size;
}

/* As large as shm's: the same tests and limits hold on either. */
static size_t tnbc_loop_packet_limit(void)
{
	return tnbc_env.slot_size - 16;
}

static size_t tnbc_loop_max_packet(struct tnbc_xpeer *peer)
{
	(void)peer;
	return tnbc_loop_packet_limit();
}

static int tnbc_loop_peer_get(struct tnbc_xdom *xdom,
			      const struct tnbc_name *name,
			      const uint8_t *xaddr, struct tnbc_xpeer **out)
{
	struct tnbc_xpeer *p;
	bool known;

	(void)xaddr;
	if (!(name->xports & TNBC_XPORT_BIT(TNBC_XPORT_LOOP)) ||
	    (name->kind != TNBC_NAME_PID && name->kind != TNBC_NAME_SVC))
		return -FI_EINVAL;
	pthread_mutex_lock(&tnbc_loop_reg.lock);
	known = tnbc_loop_find(name) != NULL;
	pthread_mutex_unlock(&tnbc_loop_reg.lock);
	if (!known)
		return -FI_EHOSTUNREACH;
	pthread_mutex_lock(&xdom->lock);
	for (p = xdom->peers; p; p = p->next)
		if (tnbc_name_same(&p->name, name))
			break;
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (p) {
			p->base.ops = &tnbc_loop_ops;
			p->name = *name;
			p->next = xdom->peers;
			xdom->peers = p;
		}
	}
	pthread_mutex_unlock(&xdom->lock);
	if (!p)
		return -FI_ENOMEM;
	*out = p;
	return 0;
}

static bool tnbc_loop_peer_alive(struct tnbc_xpeer *peer)
{
	bool alive;

	pthread_mutex_lock(&tnbc_loop_reg.lock);
	alive = tnbc_loop_find(&peer->name) != NULL;
	pthread_mutex_unlock(&tnbc_loop_reg.lock);
	return alive;
}

static int tnbc_loop_send(struct tnbc_xpeer *peer, const struct tnbc_xpkt *pkt)
{
	size_t len = (size_t)pkt->frame_len + pkt->payload_len;
	struct tnbc_loop_pkt *p;
	struct tnbc_xdom *to;
	struct tnbc_xep *xep;
	uint8_t *dst;
	int ret = 0;

	if (pkt->frame_len > TNBC_XPKT_FRAME_MAX ||
	    len > tnbc_loop_max_packet(peer))
		return -FI_EMSGSIZE;
	p = malloc(sizeof(*p) + len);
	if (!p)
		return -FI_EAGAIN; /* memory may come back: retried */
	p->next = NULL;
	p->len = (uint32_t)len;
	p->parks = pkt->flags & TNBC_XPKT_PARKS;
	memcpy(p->data, pkt->frame, pkt->frame_len);
	dst = p->data + pkt->frame_len;
	for (size_t i = 0, left = pkt->payload_len; i < pkt->iov_count && left;
	     i++) {
		size_t n =
			pkt->iov[i].iov_len < left ? pkt->iov[i].iov_len : left;

		if (n) /* a zero-length iovec may have no base */
			memcpy(dst, pkt->iov[i].iov_base, n);
		dst += n;
		left -= n;
	}
	pthread_mutex_lock(&tnbc_loop_reg.lock);
	xep = tnbc_loop_find(&peer->name);
	if (!xep) {
		ret = -FI_EHOSTUNREACH;
	} else {
		pthread_mutex_lock(&xep->lock);
		/* as many bytes as shm's queue holds: back pressure past
		 * them, never a drop */
		if (xep->bytes + len > tnbc_loop_room()) {
			ret = -FI_EAGAIN;
		} else {
			p->seq = xep->sent++;
			*xep->tail = p;
			xep->tail = &p->next;
			xep->bytes += len;
			atomic_fetch_add(&xep->fresh, 1);
		}
		pthread_mutex_unlock(&xep->lock);
		to = xep->xdom;
		if (!ret)
			atomic_fetch_add(&to->kickers, 1);
	}
	pthread_mutex_unlock(&tnbc_loop_reg.lock);
	if (ret) {
		free(p);
		return ret;
	}
	/* outside the registry's lock: the kick calls into the core */
	to->kick.kick(to->kick.arg);
	atomic_fetch_sub_explicit(&to->kickers, 1, memory_order_release);
	return 0;
}

/* A packet offered as a stream transport offers it: its frame in
 * memory, the rest only through copy, in order, each byte once. */
struct tnbc_loop_rx {
	struct tnbc_xrx rx;
	const uint8_t *data;
	size_t pos; /* how far copy has read past the head */
};

static ssize_t tnbc_loop_rx_copy(struct tnbc_xrx *x, size_t off,
				 const struct iovec *iov, size_t iov_count,
				 size_t n)
{
	struct tnbc_loop_rx *rx = (struct tnbc_loop_rx *)x;
	size_t past = off > x->head_len ? off : x->head_len;

	/* what a stream cannot do: go back past the head it buffered, or
	 * past the end */
	if (off > x->len || n > x->len - off ||
	    (off + n > x->head_len && past < rx->pos))
		return -FI_EINVAL;
	tnbc_copy_to_iov(iov, iov_count, 0, rx->data + off, n);
	if (off + n > rx->pos)
		rx->pos = off + n;
	return (ssize_t)n;
}

static int tnbc_loop_offer(tnbc_rx_fn fn, void *arg,
			   const struct tnbc_loop_pkt *p)
{
	struct tnbc_loop_rx rx = {
		.rx = {.head = p->data,
		       .head_len = p->len < TNBC_XPKT_FRAME_MAX
					   ? p->len
					   : TNBC_XPKT_FRAME_MAX,
		       .len = p->len,
		       .copy = tnbc_loop_rx_copy},
		.data = p->data,
	};

	return fn(arg, &rx.rx);
}

static int tnbc_loop_poll(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg,
			  int budget)
{
	int n = 0;

	while (budget-- > 0) {
		struct tnbc_loop_pkt *p;
		int verdict;

		pthread_mutex_lock(&xep->lock);
		p = *xep->scan;
		pthread_mutex_unlock(&xep->lock);
		if (!p)
			break;
		/* only this consumer unlinks packets: p stays valid, and
		 * senders only ever append after it */
		verdict = tnbc_loop_offer(fn, arg, p);
		if (verdict == TNBC_RX_LATER)
			break;
		atomic_fetch_sub(&xep->fresh, 1);
		pthread_mutex_lock(&xep->lock);
		if (verdict == TNBC_RX_KEEP) {
			xep->scan = &p->next;
		} else {
			*xep->scan = p->next;
			if (xep->tail == &p->next)
				xep->tail = xep->scan;
			xep->bytes -= p->len;
			n++;
		}
		pthread_mutex_unlock(&xep->lock);
		if (verdict == TNBC_RX_BAD)
			atomic_fetch_add(&xep->xdom->bad_pkts, 1);
		if (verdict != TNBC_RX_KEEP)
			free(p);
	}
	return n;
}

static void tnbc_loop_rewind(struct tnbc_xep *xep)
{
	size_t kept = 0;

	pthread_mutex_lock(&xep->lock);
	for (struct tnbc_loop_pkt **it = &xep->head; it != xep->scan;
	     it = &(*it)->next)
		kept++;
	xep->scan = &xep->head;
	pthread_mutex_unlock(&xep->lock);
	atomic_fetch_add(&xep->fresh, kept);
}

static bool tnbc_loop_pending(struct tnbc_xep *xep)
{
	return atomic_load(&xep->fresh) != 0;
}

static void tnbc_loop_look_mark(struct tnbc_xep *xep)
{
	pthread_mutex_lock(&xep->lock);
	xep->mark = xep->sent;
	pthread_mutex_unlock(&xep->lock);
}

static bool tnbc_loop_unlooked(struct tnbc_xep *xep)
{
	bool ret;

	pthread_mutex_lock(&xep->lock);
	ret = *xep->scan && (*xep->scan)->seq < xep->mark;
	pthread_mutex_unlock(&xep->lock);
	return ret;
}

static bool tnbc_loop_stalled(struct tnbc_xep *xep)
{
	(void)xep; /* a packet is whole when it is queued */
	return false;
}

static bool tnbc_loop_idle(struct tnbc_xep *xep)
{
	return atomic_load(&xep->fresh) == 0;
}

static bool tnbc_loop_quiet(struct tnbc_xep *xep)
{
	bool ret = true;

	pthread_mutex_lock(&xep->lock);
	if (xep->bytes >= tnbc_loop_room() / 2)
		ret = false;
	for (struct tnbc_loop_pkt *p = *xep->scan; ret && p; p = p->next)
		ret = p->parks;
	pthread_mutex_unlock(&xep->lock);
	return ret;
}

/* The peer's memory is this process's: read with process_vm_readv on
 * ourselves, which reports a buffer the sender made unreadable as an
 * error where memcpy would fault.  FI_TNBC_CMA=0 asks for streaming, as
 * on shm. */
static ssize_t tnbc_loop_pull(struct tnbc_xep *xep, struct tnbc_xpeer *peer,
			      const struct iovec *local, size_t local_count,
			      const struct tnbc_xrmem *rmem,
			      size_t remote_count, struct tnbc_xread *rd)
{
	struct iovec l[TNBC_PULL_IOV_MAX], rm[TNBC_PULL_IOV_MAX];
	struct iovec remote[TNBC_PULL_IOV_MAX];
	size_t want = tnbc_iov_len(local, local_count);
	size_t done = 0;

	(void)xep;
	(void)peer;
	(void)rd;
	if (!tnbc_env.cma || remote_count > TNBC_PULL_IOV_MAX)
		return -FI_ENOSYS;
	tnbc_xrmem_iov(rmem, remote_count, remote);
	while (done < want) {
		size_t lc = tnbc_iov_slice(local, local_count, done,
					   want - done, l, TNBC_PULL_IOV_MAX);
		size_t rc = tnbc_iov_slice(remote, remote_count, done,
					   want - done, rm, TNBC_PULL_IOV_MAX);
		ssize_t n = process_vm_readv(getpid(), l, lc, rm, rc, 0);

		if (n < 0 && !done &&
		    (errno == EPERM || errno == ENOSYS || errno == EACCES))
			return -FI_EPERM;
		if (n <= 0)
			return -FI_EIO;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static void tnbc_loop_app_mark(struct tnbc_xdom *xdom, bool active)
{
	(void)xdom;
	(void)active;
}

static void tnbc_loop_rx_posted(struct tnbc_xdom *xdom, int delta)
{
	(void)xdom;
	(void)delta;
}

/* Senders always ring here: the engine never needs to stand aside. */
static bool tnbc_loop_app_active(struct tnbc_xdom *xdom)
{
	(void)xdom;
	return false;
}

static void tnbc_loop_set_window(struct tnbc_xdom *xdom, uint64_t ns)
{
	(void)xdom;
	(void)ns;
}

/* Nothing to arm: every send kicks. */
static unsigned tnbc_loop_sleep_begin(struct tnbc_xdom *xdom,
				      enum tnbc_sleep how)
{
	(void)xdom;
	(void)how;
	return 0;
}

static void tnbc_loop_stats(struct tnbc_xdom *xdom, struct tnbc_xport_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->bad_pkts = atomic_load(&xdom->bad_pkts);
}

const struct tnbc_xport_ops tnbc_loop_ops = {
	.name = "loop",
	.id = TNBC_XPORT_LOOP,
	.flags = TNBC_XPORT_LOCAL | TNBC_XPORT_PULL,
	.xaddr_off = -1, /* the name is the address */
	.dom_open = tnbc_loop_dom_open,
	.dom_close = tnbc_loop_dom_close,
	.ep_open = tnbc_loop_ep_open,
	.ep_close = tnbc_loop_ep_close,
	.max_packet = tnbc_loop_max_packet,
	.packet_limit = tnbc_loop_packet_limit,
	.peer_get = tnbc_loop_peer_get,
	.peer_alive = tnbc_loop_peer_alive,
	.send = tnbc_loop_send,
	.poll = tnbc_loop_poll,
	.rewind = tnbc_loop_rewind,
	.pending = tnbc_loop_pending,
	.look_mark = tnbc_loop_look_mark,
	.unlooked = tnbc_loop_unlooked,
	.stalled = tnbc_loop_stalled,
	.idle = tnbc_loop_idle,
	.quiet = tnbc_loop_quiet,
	.pull = tnbc_loop_pull,
	.app_mark = tnbc_loop_app_mark,
	.rx_posted = tnbc_loop_rx_posted,
	.app_active = tnbc_loop_app_active,
	.set_window = tnbc_loop_set_window,
	.sleep_begin = tnbc_loop_sleep_begin,
	.stats = tnbc_loop_stats,
};
