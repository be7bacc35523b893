/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What messages and RMA share below them: transfers and their cache,
 * the id tables that answers find them by, the control queue, and the
 * transmit queue with its pass.  A queued transfer says through its
 * kind (tnbc_tx_kind) how it goes out and what is done once it has, so
 * the queue calls neither protocol by name.  ep->lock held throughout.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tnbc.h"
#include "tnbc_lock.h"
#include "tnbc_link.h"
#include "tnbc_xfer.h"
#include "tnbc_frame.h"
#include "tnbc_wake.h"

void tnbc_stray(struct tnbc_ep *ep, const char *what)
{
	tnbc_ep_assert_locked(ep);
	uint64_t n = atomic_fetch_add_explicit(&ep->domain->engine.stray_pkts,
					       1, memory_order_relaxed) +
		     1;

	/* 1, 2, 4, 8...: a peer sending garbage must not flood the log */
	if (!(n & (n - 1)))
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"dropped %s that fits no transfer (%" PRIu64
			" so far)\n",
			what, n);
}

void tnbc_xfer_cache_free(struct tnbc_ep *ep)
{
	while (ep->xfer_free) {
		struct tnbc_xfer *x = ep->xfer_free;

		ep->xfer_free = (struct tnbc_xfer *)x->entry.next;
		free(x);
	}
	ep->xfer_nfree = 0;
}

/* Sends an answer (ACK, CTS, RMA response), or queues a copy of it when
 * the peer's queue is full: answers are never dropped. */
void tnbc_send_ctrl(struct tnbc_ep *ep, struct tnbc_xpeer *peer,
		    const struct tnbc_hdr *hdr, const void *data, size_t len)
{
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	struct tnbc_ctrl *c;

	if (tnbc_list_empty(&ep->ctrl_queue) &&
	    !tnbc_pkt_send(peer, hdr, &iov, len ? 1 : 0))
		return;
	c = calloc(1, sizeof(*c) + len);
	if (!c) {
		/* The peer's operation would never complete; say so. */
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"out of memory queuing a control packet\n");
		return;
	}
	c->peer = peer;
	c->hdr = *hdr;
	c->len = len;
	if (len)
		memcpy(c->data, data, len);
	tnbc_list_insert_tail(&c->entry, &ep->ctrl_queue);
	tnbc_ep_mark_work(ep);
	tnbc_engine_nudge(ep->domain);
}

/* ------------------------------------------------------------------ */
/* Id tables: rendezvous sends, RMA operations                          */

/* A generation nobody outside can tell ahead: the high half of a 64-bit
 * mix of the secret seed and a count (a mix cheap enough for every
 * rendezvous, which the half it shows does not give away). */
static uint32_t tnbc_id_gen(struct tnbc_id_table *t, uint32_t old)
{
	uint64_t z;
	uint32_t g;

	if (!t->seed)
		t->seed = tnbc_nonce();
	do {
		z = t->seed + ++t->draws * 0x9e3779b97f4a7c15ull;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		g = (uint32_t)((z ^ (z >> 31)) >> 32);
	} while (!g || g == old);
	return g;
}

int tnbc_id_add(struct tnbc_id_table *t, struct tnbc_xfer *xfer,
		uint64_t *msg_id)
{
	size_t i;

	if (t->used == t->size) {
		size_t nsize = t->size ? t->size * 2 : 64;
		struct tnbc_xfer **ns = realloc(t->slot, nsize * sizeof(*ns));
		uint32_t *ng;

		if (!ns)
			return -FI_ENOMEM;
		t->slot = ns;
		ng = realloc(t->gen, nsize * sizeof(*ng));
		if (!ng)
			return -FI_ENOMEM;
		t->gen = ng;
		for (i = t->size; i < nsize; i++) {
			t->slot[i] = NULL;
			t->gen[i] = 0;
		}
		t->size = nsize;
	}
	/* from the last slot freed or taken: amortised O(1), not a scan
	 * from 0 past every operation in flight */
	i = t->hint < t->size ? t->hint : 0;
	while (t->slot[i])
		i = (i + 1) % t->size;
	t->hint = (i + 1) % t->size;
	t->slot[i] = xfer;
	t->gen[i] = tnbc_id_gen(t, t->gen[i]);
	t->used++;
	if (t->waits)
		atomic_fetch_add_explicit(t->waits, 1, memory_order_relaxed);
	*msg_id = ((uint64_t)t->gen[i] << 32) | i;
	return 0;
}

struct tnbc_xfer *tnbc_id_find(struct tnbc_id_table *t, uint64_t msg_id)
{
	size_t i = (uint32_t)msg_id;

	if (i >= t->size || !t->slot[i] || t->gen[i] != (msg_id >> 32))
		return NULL;
	return t->slot[i];
}

void tnbc_id_del(struct tnbc_id_table *t, uint64_t msg_id)
{
	t->slot[(uint32_t)msg_id] = NULL;
	t->hint = (uint32_t)msg_id;
	t->used--;
	if (t->waits)
		atomic_fetch_sub_explicit(t->waits, 1, memory_order_relaxed);
}

/* ------------------------------------------------------------------ */
/* Receive side                                                         */

void tnbc_tx_unlink(struct tnbc_xfer *tx)
{
	if (tx->link_counted) {
		tx->link_counted = false;
		tnbc_link_queued(tx->prio, -1);
	}
}

void tnbc_tx_free(struct tnbc_xfer *tx)
{
	tnbc_tx_unlink(tx);
	if (tx->xreg) {
		const struct tnbc_xport_ops *ops = tnbc_xpeer_ops(tx->peer);

		if (ops->unexpose)
			ops->unexpose(tx->peer, tx->xreg);
	}
	free(tx->inject_buf);
	free(tx);
}

int tnbc_ep_src_peer(struct tnbc_ep *ep, unsigned via,
		     const struct tnbc_name *src, struct tnbc_xpeer **peer)
{
	const struct tnbc_xslot *x = &ep->domain->xp[via];

	/* a network transport knows the source's address from its
	 * traffic */
	return x->ops->peer_get(x->xdom, src, NULL, peer);
}

int tnbc_check_iov(const struct iovec *iov, size_t count)
{
	static atomic_bool told;

	if (count > TNBC_IOV_LIMIT)
		return -FI_EINVAL;
	if (count && !iov)
		return -FI_EINVAL;
	for (size_t i = 0; i < count; i++) {
		if (iov[i].iov_base || !iov[i].iov_len)
			continue;
		/* a consumer that drops the error leaves a request that never
		 * completes (Open MPI 4.1.4's cm PML sends a persistent
		 * request's MPI_BOTTOM data from address 0): say it once */
		if (!atomic_exchange_explicit(&told, true,
					      memory_order_relaxed))
			FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
				"refused an operation on %zu bytes at address "
				"NULL with -FI_EINVAL (further ones are not "
				"logged)\n",
				iov[i].iov_len);
		return -FI_EINVAL;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Transmit queue: sends and control packets that found a full queue,   */
/* streamed rendezvous data, and RMA chunks.  It is ordered by priority */
/* (highest first), FIFO within one priority.                           */

void tnbc_tx_enqueue(struct tnbc_ep *ep, struct tnbc_xfer *tx,
		     const struct tnbc_tx_kind *kind)
{
	struct tnbc_list *it = ep->tx_queue.prev;

	tnbc_ep_assert_locked(ep);
	/* usually all one priority: the walk stops at once */
	while (it != &ep->tx_queue &&
	       tnbc_container_of(it, struct tnbc_xfer, entry)->prio < tx->prio)
		it = it->prev;
	tnbc_list_insert_tail(&tx->entry, it->next);
	tx->kind = kind;
	tx->queued = true;
	ep->tx_queued++;
	/* a transfer to another host tells the host's other processes that
	 * it waits, at its priority (tnbc_link.h) */
	if (ep->domain->link && !tx->link_counted &&
	    !(tnbc_xpeer_ops(tx->peer)->flags & TNBC_XPORT_LOCAL)) {
		tx->link_counted = true;
		tnbc_link_queued(tx->prio, 1);
	}
	tnbc_ep_mark_work(ep);
	/* Whoever queued it may stop calling in: the engine must retry it
	 * (a nudge costs a fence while an application thread polls). */
	tnbc_engine_nudge(ep->domain);
}

void tnbc_tx_dequeue(struct tnbc_ep *ep, struct tnbc_xfer *tx)
{
	tnbc_ep_assert_locked(ep);
	if (!tx->queued)
		return;
	tnbc_list_remove(&tx->entry);
	tx->queued = false;
	ep->tx_queued--;
	/* a stream all handed out still has the link until its ACK says
	 * it arrived (the transport's and the kernel's buffers hold
	 * megabytes): freeing it ends its count */
	if (!tx->stream_len || tx->stream_off < tx->stream_len)
		tnbc_tx_unlink(tx);
}

/* Peers with a full queue one pass skips past; past that many it stops. */
#define TNBC_TX_BLOCKED_MAX 8

int tnbc_tx_queue_progress(struct tnbc_ep *ep, bool app)
{
	struct tnbc_xpeer *blocked[TNBC_TX_BLOCKED_MAX];
	struct tnbc_list *it, *tmp;
	int n = 0, nblocked = 0;

	tnbc_ep_assert_locked(ep);
	tnbc_list_foreach_safe (&ep->ctrl_queue, it, tmp) {
		struct tnbc_ctrl *c =
			tnbc_container_of(it, struct tnbc_ctrl, entry);
		struct iovec iov = {.iov_base = c->data, .iov_len = c->len};
		int b;

		/* as below: a full queue holds back only its own peer */
		for (b = 0; b < nblocked && blocked[b] != c->peer; b++)
			;
		if (b < nblocked)
			continue;
		if (tnbc_pkt_send(c->peer, &c->hdr, &iov, c->len ? 1 : 0)) {
			if (nblocked == TNBC_TX_BLOCKED_MAX)
				break;
			blocked[nblocked++] = c->peer;
			continue;
		}
		tnbc_list_remove(&c->entry);
		free(c);
		n++;
	}
	nblocked = 0; /* data may still go where only control could not */
	tnbc_list_foreach_safe (&ep->tx_queue, it, tmp) {
		struct tnbc_xfer *tx =
			tnbc_container_of(it, struct tnbc_xfer, entry);
		int ret, b;

		/* A full queue holds back only its own peer's later sends
		 * (their order is kept); the others' go on, or two peers
		 * each waiting for the other's slow receiver would never
		 * progress. */
		for (b = 0; b < nblocked && blocked[b] != tx->peer; b++)
			;
		if (b < nblocked)
			continue;
		/* a neighbour's more urgent data has the link: like a full
		 * queue, this waits for the next pass (and the engine backs
		 * off meanwhile, tnbc_ep_need) */
		if (tx->link_counted && !tnbc_link_turn(tx->prio, &tx->link_ns))
			continue;
		ret = tx->kind->go(ep, tx);
		if (ret == -FI_EAGAIN) {
			uint64_t now = tnbc_now_ns();
			bool stall = true;

			/* A queue that stays full may belong to a dead
			 * process: fail the send rather than wait forever
			 * (asked again every 100 ms, a /proc read each). */
			if (!tx->stall_ns)
				tx->stall_ns = now;
			else if (now - tx->stall_ns >= 100000000u &&
				 !tnbc_xpeer_ops(tx->peer)->peer_alive(
					 tx->peer))
				stall = false;
			else if (now - tx->stall_ns >= 100000000u)
				tx->stall_ns = now;
			if (stall) {
				if (nblocked == TNBC_TX_BLOCKED_MAX)
					break;
				blocked[nblocked++] = tx->peer;
				continue;
			}
			ret = -FI_EHOSTUNREACH;
		}
		n++;
		if (app)
			tnbc_app_inside(ep->domain, true);
		tx->stall_ns = 0;
		tx->kind->done(ep, tx, ret);
	}
	return n;
}
