/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * FI_MSG and FI_TAGGED: posting, matching and the eager / rendezvous
 * protocols.  Everything below the entry points runs with ep->lock held.
 *
 * Protocols, chosen per message by the sender:
 *  - eager: messages up to the eager size travel whole in one packet; the
 *    send completes when the packet is in the peer's queue.
 *  - rendezvous: an RTS packet carries the sender's iovecs.  The receiver,
 *    once matched, reads the data straight from the sender's memory
 *    (single copy) and answers ACK, which completes the send.  When the
 *    kernel denies the read, the receiver answers CTS instead and the
 *    sender streams the data as DATA packets through the receive queue
 *    (a bounce-buffer pipeline), again finished by an ACK.
 *  FI_DELIVERY_COMPLETE forces rendezvous: its ACK is the proof that the
 *  data reached the receive buffer.
 *  A rendezvous message that the engine finds before its receive is
 *  posted (the receiving application is away: computing, not polling)
 *  is read at once into a provider buffer (up to FI_TNBC_UNEXP_PULL
 *  bytes, never for FI_DELIVERY_COMPLETE) and acknowledged, so that a
 *  send never waits for the receiving application to call in.  An
 *  application thread that is polling will post the receive soon: it
 *  leaves the message to be read straight into that receive's buffer.
 *
 * Unexpected messages are buffered up to FI_TNBC_UNEXP_MAX bytes per
 * endpoint.  Past that, a message nobody has asked for stays in the
 * transport's queue (and so does every later one nobody asked for,
 * which keeps the order receives see): its sender finds the queue full,
 * or is held back alone (TNBC_XPKT_HOLDS), and waits, and nothing is
 * dropped.  Control packets and messages that match a posted receive
 * still get through.  Posting a receive, or taking a buffered message,
 * offers the held ones again.
 *
 * Peers are not trusted to be correct: an answer (ACK, CTS, DATA, RMA
 * response) is taken only from the peer the transfer it names is with,
 * and only in the phase that expects it; anything else is counted and
 * dropped (tnbc_stray).
 */
#include <inttypes.h>
#include <stdlib.h>

#include "tnbc.h"
#include "tnbc_lock.h"
#include "tnbc_link.h"
#include "tnbc_xfer.h"
#include "tnbc_xports.h"
#include "tnbc_frame.h"
#include "tnbc_msg.h"
#include "tnbc_rma.h"
#include "tnbc_comp.h"
#include "tnbc_attr.h"
#include "tnbc_wake.h"
#include "tnbc_av.h"

static inline uint64_t tnbc_kind(bool tagged)
{
	return tagged ? FI_TAGGED : FI_MSG;
}

static size_t tnbc_eager_limit(struct tnbc_xpeer *peer)
{
	const struct tnbc_xport_ops *ops = tnbc_xpeer_ops(peer);
	size_t max = tnbc_max_payload(peer);
	size_t eager =
		ops->eager_max ? ops->eager_max(peer) : tnbc_env.eager_size;

	return eager < max ? eager : max;
}

/* ------------------------------------------------------------------ */
/* Unexpected messages: what they cost, and the room left for them      */

static size_t tnbc_ux_cost(size_t data_len)
{
	return sizeof(struct tnbc_unexp) + data_len;
}

static bool tnbc_ux_room(struct tnbc_ep *ep, size_t data_len)
{
	return ep->ux_bytes + tnbc_ux_cost(data_len) <= tnbc_env.unexp_max;
}

static struct tnbc_unexp *tnbc_ux_new(struct tnbc_ep *ep, unsigned via,
				      size_t data_len)
{
	struct tnbc_unexp *ux = malloc(tnbc_ux_cost(data_len));

	if (!ux)
		return NULL;
	ep->ux_bytes += tnbc_ux_cost(data_len);
	ux->data_len = data_len;
	ux->via = via;
	ux->claim_ctx = NULL;
	return ux;
}

/* Messages held in the queue are offered again from the oldest; the
 * caller polls. */
static void tnbc_ux_rewind(struct tnbc_ep *ep)
{
	ep->ux_kept = 0;
	tnbc_ep_xrewind(ep);
}

static void tnbc_ux_free(struct tnbc_ep *ep, struct tnbc_unexp *ux)
{
	ep->ux_bytes -= tnbc_ux_cost(ux->data_len);
	free(ux);
	/* room again for messages held back */
	if (ep->ux_kept)
		tnbc_ux_rewind(ep);
}

/* A send's completion, from what it was posted with (no transfer: an
 * eager send that left at once has none). */
static void tnbc_ep_report_send(struct tnbc_ep *ep, void *context,
				uint64_t flags, bool tagged,
				struct tnbc_cntr *comp_cntr, int err)
{
	uint64_t kind = tnbc_kind(tagged);

	/* Callers pass -FI_E* codes; completions carry positive ones. */
	if (err < 0)
		err = -err;
	if (err) {
		if (ep->tx_cq && !(flags & TNBC_INTERNAL))
			tnbc_cq_write_err(ep->tx_cq, context, FI_SEND | kind, 0,
					  NULL, 0, 0, 0, err, err,
					  FI_ADDR_NOTAVAIL);
		tnbc_count_completion(ep->tx_cntr, flags, comp_cntr, true);
		return;
	}
	if (ep->tx_cq && tnbc_cq_wanted(ep->tx_selective, flags))
		tnbc_cq_write(ep->tx_cq, context, FI_SEND | kind, 0, NULL, 0, 0,
			      FI_ADDR_NOTAVAIL);
	tnbc_count_completion(ep->tx_cntr, flags, comp_cntr, false);
}

void tnbc_ep_report_tx(struct tnbc_ep *ep, struct tnbc_xfer *xfer, int err)
{
	tnbc_ep_report_send(ep, xfer->context, xfer->flags,
			    xfer->hdr.flags & TNBC_HDR_TAGGED, xfer->comp_cntr,
			    err);
}

static void tnbc_report_rx(struct tnbc_ep *ep, struct tnbc_xfer *rx,
			   const struct tnbc_hdr *hdr, fi_addr_t src,
			   size_t msg_size, int err)
{
	bool tagged = hdr->flags & TNBC_HDR_TAGGED;
	uint64_t flags = FI_RECV | tnbc_kind(tagged);
	uint64_t data = 0;
	size_t len = msg_size < rx->len ? msg_size : rx->len;
	void *buf = rx->iov_count ? rx->iov[0].iov_base : NULL;

	if (hdr->flags & TNBC_HDR_CQ_DATA) {
		flags |= FI_REMOTE_CQ_DATA;
		data = hdr->cq_data;
	}
	if (!(ep->info->caps & FI_SOURCE))
		src = FI_ADDR_NOTAVAIL;
	if (!err && msg_size > rx->len)
		err = FI_ETRUNC;
	/* A member that posted another count: its messages are short
	 * here, not truncated, and the step would succeed on what it
	 * never received while the members it sends to fail. */
	if (!err && (rx->flags & TNBC_EXACT) && msg_size < rx->len)
		err = FI_EMSGSIZE;
	/* a collective's step that failed upstream says so */
	if (!err && (hdr->flags & TNBC_HDR_COLL) &&
	    (hdr->flags & TNBC_HDR_CQ_DATA))
		err = hdr->cq_data && hdr->cq_data < INT32_MAX
			      ? (int)hdr->cq_data
			      : FI_EIO;
	if (err) {
		if (ep->rx_cq && !(rx->flags & TNBC_INTERNAL))
			tnbc_cq_write_err(ep->rx_cq, rx->context, flags, len,
					  buf, data, tagged ? hdr->tag : 0,
					  err == FI_ETRUNC ? msg_size - len : 0,
					  err, err, src);
		tnbc_count_completion(ep->rx_cntr, rx->flags, rx->comp_cntr,
				      true);
		return;
	}
	if (ep->rx_cq && tnbc_cq_wanted(ep->rx_selective, rx->flags))
		tnbc_cq_write(ep->rx_cq, rx->context, flags, len, buf, data,
			      tagged ? hdr->tag : 0, src);
	tnbc_count_completion(ep->rx_cntr, rx->flags, rx->comp_cntr, false);
}

/* ------------------------------------------------------------------ */
/* Control packets                                                      */

static void tnbc_send_answer(struct tnbc_ep *ep, struct tnbc_xpeer *peer,
			     uint8_t type, uint64_t msg_id, uint64_t token,
			     uint64_t value)
{
	struct tnbc_hdr hdr = {
		.version = TNBC_PROTO_VERSION,
		.type = type,
		.msg_id = msg_id,
		.token = token,
		.size = value,
		.src = ep->name,
	};

	atomic_fetch_add_explicit(&ep->domain->engine.sync_pkts, 1,
				  memory_order_relaxed);
	tnbc_send_ctrl(ep, peer, &hdr, NULL, 0);
}

static bool tnbc_match(const struct tnbc_xfer *rx, bool tagged, uint64_t tag,
		       fi_addr_t src)
{
	if (rx->addr != FI_ADDR_UNSPEC && rx->addr != src)
		return false;
	return !tagged || !((rx->tag ^ tag) & ~rx->ignore);
}

/* A source address not looked up yet.  The reverse AV lookup (a lock
 * and a hash probe) is done only when a directed receive or FI_SOURCE
 * needs it, not for every arriving message. */
#define TNBC_ADDR_UNRESOLVED (FI_ADDR_NOTAVAIL - 1)

/* Resolves *src for sender n.  FI_ADDR_NOTAVAIL is retried too: the
 * sender may have been inserted into the AV since the message arrived. */
static fi_addr_t tnbc_src_addr(struct tnbc_ep *ep, fi_addr_t *src,
			       const struct tnbc_name *n)
{
	if (*src == TNBC_ADDR_UNRESOLVED || *src == FI_ADDR_NOTAVAIL)
		*src = tnbc_av_reverse_memo(ep->av, n, &ep->src_memo);
	return *src;
}

static bool tnbc_match_from(struct tnbc_ep *ep, const struct tnbc_xfer *rx,
			    bool tagged, uint64_t tag, fi_addr_t *src,
			    const struct tnbc_name *n)
{
	if (rx->addr != FI_ADDR_UNSPEC && rx->addr != tnbc_src_addr(ep, src, n))
		return false;
	return tnbc_match(rx, tagged, tag, *src);
}

/* A rendezvous read waiting for the end of its poll pass. */
struct tnbc_pull {
	struct tnbc_xfer *rx;
	struct tnbc_xpeer *peer;
	struct tnbc_hdr hdr;
	fi_addr_t src;
	size_t want;
	size_t lcount, rcount;
	struct iovec local[TNBC_IOV_LIMIT];
	struct tnbc_xrmem remote[TNBC_IOV_LIMIT];
};

/* Finishes a rendezvous receive whose read returned n (bytes, or a
 * negative fi_errno). */
static void tnbc_rndv_done(struct tnbc_ep *ep, struct tnbc_xfer *rx,
			   const struct tnbc_hdr *hdr, struct tnbc_xpeer *peer,
			   fi_addr_t src, size_t want, ssize_t n)
{
	if (n == (ssize_t)want) {
		atomic_fetch_add(&ep->domain->engine.rndv_pull, 1);
		tnbc_send_answer(ep, peer, TNBC_PKT_ACK, hdr->msg_id, 0, 0);
		tnbc_report_rx(ep, rx, hdr, src, hdr->size, 0);
		free(rx);
		return;
	}
	if (n == -FI_EPERM || n == -FI_ENOSYS) {
		/* Stream it: remember the message, then ask for the data. */
		rx->msg_size = hdr->size;
		rx->msg_tag = hdr->tag;
		rx->msg_data = hdr->cq_data;
		rx->msg_flags = hdr->flags;
		rx->msg_src = src;
		rx->stream_len = want;
		rx->recv_bytes = 0;
		rx->hdr.token = ++ep->next_token;
		rx->peer = peer;
		rx->peer_name = hdr->src;
		rx->hdr.msg_id = hdr->msg_id;
		tnbc_list_insert_tail(&rx->entry, &ep->stream_rx);
		tnbc_ep_mark_work(ep);
		atomic_fetch_add(&ep->domain->engine.rndv_stream, 1);
		tnbc_send_answer(ep, peer, TNBC_PKT_CTS, hdr->msg_id,
				 rx->hdr.token, want);
		return;
	}
	FI_WARN(&tnbc_prov, FI_LOG_EP_DATA, "rendezvous read failed: %s\n",
		fi_strerror((int)-n));
	tnbc_send_answer(ep, peer, TNBC_PKT_ACK, hdr->msg_id, 0, FI_EIO);
	tnbc_report_rx(ep, rx, hdr, src, hdr->size, FI_EIO);
	free(rx);
}

static void tnbc_rread_done(struct tnbc_xread *rd, ssize_t n)
{
	struct tnbc_rread *r = tnbc_container_of(rd, struct tnbc_rread, rd);

	tnbc_list_remove(&r->entry);
	tnbc_rndv_done(r->ep, r->rx, &r->hdr, r->peer, r->src, r->want, n);
	free(r);
}

/* Reads a matched rendezvous message into its receive, now or, when the
 * transport's read goes on (RDMA), from a later poll. */
static void tnbc_rndv_pull(struct tnbc_ep *ep, struct tnbc_xfer *rx,
			   const struct tnbc_hdr *hdr, struct tnbc_xpeer *peer,
			   fi_addr_t src, size_t want,
			   const struct iovec *local, size_t lcount,
			   const struct tnbc_xrmem *remote, size_t rcount)
{
	struct tnbc_rread *r;
	ssize_t n;

	if (!want) {
		tnbc_rndv_done(ep, rx, hdr, peer, src, want, 0);
		return;
	}
	r = malloc(sizeof(*r));
	if (!r) {
		/* only a read that finishes at once, else it streams */
		tnbc_rndv_done(ep, rx, hdr, peer, src, want,
			       tnbc_ep_pull(ep, peer, local, lcount, remote,
					    rcount, NULL));
		return;
	}
	r->rd.done = tnbc_rread_done;
	r->ep = ep;
	r->rx = rx;
	r->rma_id = 0;
	r->peer = peer;
	r->hdr = *hdr;
	r->src = src;
	r->want = want;
	n = tnbc_ep_pull(ep, peer, local, lcount, remote, rcount, &r->rd);
	if (n == -FI_EINPROGRESS) {
		tnbc_list_insert_tail(&r->entry, &ep->reads);
		return;
	}
	free(r);
	tnbc_rndv_done(ep, rx, hdr, peer, src, want, n);
}

/* Frees the reads still in flight when the endpoint's transports have
 * closed (no transport calls done after that). */
void tnbc_ep_free_reads(struct tnbc_ep *ep)
{
	struct tnbc_list *it, *tmp;

	tnbc_list_foreach_safe (&ep->reads, it, tmp) {
		struct tnbc_rread *r =
			tnbc_container_of(it, struct tnbc_rread, entry);

		tnbc_list_remove(&r->entry);
		free(r->rx); /* an RMA read's operation is freed with rma_ids */
		free(r);
	}
}

/* Makes the reads gathered by a poll pass: consecutive ones from one
 * peer in one call.  A call that comes back short (a bad address, a
 * peer that died) is redone read by read, so each receive gets its own
 * answer. */
void tnbc_ep_flush_pulls(struct tnbc_ep *ep)
{
	struct iovec l[TNBC_PULL_IOV_MAX];
	struct tnbc_xrmem r[TNBC_PULL_IOV_MAX];
	size_t i = 0, n = ep->npulls;

	/* answers sent below may not run another pass inside this one */
	ep->npulls = 0;
	ep->pulls_held = false;
	while (i < n) {
		struct tnbc_pull *first = &ep->pulls[i];
		size_t j = i, lc = 0, rc = 0, total = 0;
		ssize_t got = -FI_EAGAIN;

		while (j < n && ep->pulls[j].peer == first->peer &&
		       lc + ep->pulls[j].lcount <= TNBC_PULL_IOV_MAX &&
		       rc + ep->pulls[j].rcount <= TNBC_PULL_IOV_MAX) {
			struct tnbc_pull *p = &ep->pulls[j++];

			memcpy(&l[lc], p->local, p->lcount * sizeof(*l));
			memcpy(&r[rc], p->remote, p->rcount * sizeof(*r));
			lc += p->lcount;
			rc += p->rcount;
			total += p->want;
		}
		/* together only if it finishes at once */
		if (j - i > 1)
			got = tnbc_ep_pull(ep, first->peer, l, lc, r, rc, NULL);
		for (; i < j; i++) {
			struct tnbc_pull *p = &ep->pulls[i];

			if (got == (ssize_t)total)
				tnbc_rndv_done(ep, p->rx, &p->hdr, p->peer,
					       p->src, p->want,
					       (ssize_t)p->want);
			else
				tnbc_rndv_pull(ep, p->rx, &p->hdr, p->peer,
					       p->src, p->want, p->local,
					       p->lcount, p->remote, p->rcount);
		}
	}
}

/* Puts a read off to the end of the poll pass; false when it must be
 * made now. */
static bool tnbc_pull_defer(struct tnbc_ep *ep, bool batch,
			    struct tnbc_xfer *rx, const struct tnbc_hdr *hdr,
			    struct tnbc_xpeer *peer, fi_addr_t src, size_t want,
			    const struct iovec *local, size_t lcount,
			    const struct tnbc_xrmem *remote, size_t rcount)
{
	struct tnbc_pull *p;

	if (!batch || !want || !tnbc_env.cma)
		return false;
	if (!ep->pulls) {
		ep->pulls = calloc(TNBC_PULL_BATCH, sizeof(*ep->pulls));
		if (!ep->pulls)
			return false;
	}
	if (ep->npulls == TNBC_PULL_BATCH)
		tnbc_ep_flush_pulls(ep);
	p = &ep->pulls[ep->npulls++];
	tnbc_ep_mark_work(ep); /* made by the next pass, even an idle one */
	p->rx = rx;
	p->peer = peer;
	p->hdr = *hdr;
	p->src = src;
	p->want = want;
	p->lcount = lcount;
	p->rcount = rcount;
	memcpy(p->local, local, lcount * sizeof(*local));
	memcpy(p->remote, remote, rcount * sizeof(*remote));
	return true;
}

/* Starts the data movement of a matched rendezvous message. */
static void tnbc_rndv_recv(struct tnbc_ep *ep, const struct tnbc_rx_ctx *c,
			   struct tnbc_xfer *rx, const struct tnbc_hdr *hdr,
			   const struct tnbc_rts_iov *riov, fi_addr_t src)
{
	struct iovec local[TNBC_IOV_LIMIT];
	struct tnbc_xrmem remote[TNBC_IOV_LIMIT];
	size_t rcount = hdr->payload_len / sizeof(*riov);
	size_t want = hdr->size < rx->len ? hdr->size : rx->len;
	struct tnbc_xpeer *peer;
	size_t lcount;
	int ret;

	ret = tnbc_ep_src_peer(ep, c->via, &hdr->src, &peer);
	if (ret) {
		/* Nobody to answer: the sender is gone or unreachable. */
		tnbc_report_rx(ep, rx, hdr, src, hdr->size, FI_EIO);
		free(rx);
		return;
	}
	if (rcount > TNBC_IOV_LIMIT)
		rcount = TNBC_IOV_LIMIT;
	/* copied: the packet may live in memory the peer can still write */
	memcpy(remote, riov, rcount * sizeof(*remote));
	lcount = tnbc_iov_slice(rx->iov, rx->iov_count, 0, want, local,
				TNBC_IOV_LIMIT);
	if (tnbc_pull_defer(ep, c->batch, rx, hdr, peer, src, want, local,
			    lcount, remote, rcount))
		return;
	tnbc_rndv_pull(ep, rx, hdr, peer, src, want, local, lcount, remote,
		       rcount);
}

/* Copies a stream packet's payload into place, letting the transport
 * take the packet back if its sender stalls (tnbc_xrx.may_park): nothing
 * was committed for it yet, and -FI_EAGAIN then has the caller return
 * TNBC_RX_LATER.  Its bytes are read again, whole, from memory. */
static ssize_t tnbc_rx_park(struct tnbc_xrx *srx, size_t poff,
			    const struct iovec *iov, size_t iov_count, size_t n)
{
	ssize_t r;

	srx->may_park = true;
	r = srx->copy(srx, poff, iov, iov_count, n);
	srx->may_park = false;
	return r;
}

/* A matched message.  An eager one's payload is in memory (payload), or,
 * payload NULL, was placed in the receive's buffers from a stream
 * transport already, with err (0, or FI_EIO: its sender died
 * mid-packet). */
static void tnbc_deliver(struct tnbc_ep *ep, const struct tnbc_rx_ctx *c,
			 struct tnbc_xfer *rx, const struct tnbc_hdr *hdr,
			 const void *payload, int err, fi_addr_t src)
{
	size_t n = hdr->size < rx->len ? hdr->size : rx->len;

	if (ep->info->caps & FI_SOURCE)
		tnbc_src_addr(ep, &src, &hdr->src);
	else
		src = FI_ADDR_NOTAVAIL;
	if (hdr->type == TNBC_PKT_RTS) {
		tnbc_rndv_recv(ep, c, rx, hdr, payload, src);
		return;
	}
	if (payload)
		tnbc_copy_to_iov(rx->iov, rx->iov_count, 0, payload, n);
	tnbc_report_rx(ep, rx, hdr, src, hdr->size, err);
	tnbc_xfer_put(ep, rx);
}

/* A message nobody will receive: release a rendezvous sender. */
static void tnbc_discard(struct tnbc_ep *ep, struct tnbc_unexp *ux)
{
	struct tnbc_xpeer *peer;

	if (ux->hdr.type == TNBC_PKT_RTS &&
	    !tnbc_ep_src_peer(ep, ux->via, &ux->hdr.src, &peer))
		tnbc_send_answer(ep, peer, TNBC_PKT_ACK, ux->hdr.msg_id, 0, 0);
}

/*
 * A rendezvous message nobody has asked for yet: read it now into a
 * buffer of our own and release the sender, as an eager message would
 * have been.  Otherwise the sender's completion would wait for the
 * receiving application to call in (the SEMI pattern of seed 003).
 * Returns the message as an unexpected eager one, or NULL to keep the
 * ordinary rendezvous.
 */
static struct tnbc_unexp *tnbc_pull_early(struct tnbc_ep *ep,
					  const struct tnbc_rx_ctx *c,
					  const struct tnbc_hdr *hdr,
					  const void *payload)
{
	const struct tnbc_rts_iov *riov = payload;
	size_t rcount = hdr->payload_len / sizeof(*riov);
	struct tnbc_xrmem remote[TNBC_IOV_LIMIT];
	struct tnbc_xpeer *peer;
	struct iovec local;
	struct tnbc_unexp *ux;

	/* Only the engine reads early: it consumes only while the
	 * application is away.  A polling application posts its receive
	 * soon, and a read into that receive's buffer costs one copy, not
	 * two and a buffer. */
	if (!c->engine || hdr->type != TNBC_PKT_RTS ||
	    (hdr->flags & TNBC_HDR_DELIVERY) || !hdr->size ||
	    hdr->size > tnbc_env.unexp_pull || !tnbc_env.cma ||
	    rcount > TNBC_IOV_LIMIT || !tnbc_ux_room(ep, hdr->size) ||
	    tnbc_ep_src_peer(ep, c->via, &hdr->src, &peer))
		return NULL;
	ux = tnbc_ux_new(ep, c->via, hdr->size);
	if (!ux)
		return NULL;
	memcpy(remote, riov, rcount * sizeof(*remote));
	local.iov_base = ux->data;
	local.iov_len = hdr->size;
	/* only a read that finishes at once: the message is wanted now */
	if (tnbc_ep_pull(ep, peer, &local, 1, remote, rcount, NULL) !=
	    (ssize_t)hdr->size) {
		tnbc_ux_free(ep, ux); /* nothing is held: ux_kept is 0 here */
		return NULL; /* the receive will stream or fail it */
	}
	atomic_fetch_add(&ep->domain->engine.rndv_pull, 1);
	tnbc_send_answer(ep, peer, TNBC_PKT_ACK, hdr->msg_id, 0, 0);
	ux->hdr = *hdr;
	ux->hdr.type = TNBC_PKT_EAGER;
	ux->hdr.payload_len = (uint32_t)hdr->size;
	return ux;
}

/* The match space of a message: untagged, tagged, or the collectives'
 * (posted receives, or unexpected messages). */
static struct tnbc_list *tnbc_space(struct tnbc_ep *ep, uint16_t hflags,
				    bool unexp)
{
	if (hflags & TNBC_HDR_COLL)
		return unexp ? &ep->unexp_coll : &ep->rx_coll;
	if (hflags & TNBC_HDR_TAGGED)
		return unexp ? &ep->unexp_tagged : &ep->rx_tagged;
	return unexp ? &ep->unexp_msg : &ep->rx_msg;
}

static uint16_t tnbc_args_hflags(const struct tnbc_msg_args *a)
{
	if (a->coll)
		return TNBC_HDR_COLL | TNBC_HDR_TAGGED;
	return a->tagged ? TNBC_HDR_TAGGED : 0;
}

/* An eager message or an RTS.  Its payload is in memory (payload), or,
 * payload NULL, an eager one's from a stream transport, still there
 * (srx, from byte poff of the packet).  Inlined: it is most of a small
 * message's receive (called, it cost 5 % more instructions per message). */
static inline __attribute__((always_inline)) int
tnbc_rx_msg(struct tnbc_ep *ep, const struct tnbc_rx_ctx *c,
	    const struct tnbc_hdr *hdr, const void *payload,
	    struct tnbc_xrx *srx, size_t poff)
{
	bool tagged = hdr->flags & TNBC_HDR_TAGGED;
	struct tnbc_list *list = tnbc_space(ep, hdr->flags, false);
	fi_addr_t src = TNBC_ADDR_UNRESOLVED;
	struct tnbc_list *it, *tmp;
	struct tnbc_unexp *ux;

	if ((hdr->type == TNBC_PKT_EAGER && hdr->payload_len != hdr->size) ||
	    (hdr->type == TNBC_PKT_RTS &&
	     (hdr->payload_len % sizeof(struct tnbc_rts_iov) ||
	      hdr->payload_len >
		      TNBC_IOV_LIMIT * sizeof(struct tnbc_rts_iov)))) {
		tnbc_stray(ep, "a message with inconsistent lengths");
		return TNBC_RX_DONE;
	}
	tnbc_list_foreach_safe (list, it, tmp) {
		struct tnbc_xfer *rx =
			tnbc_container_of(it, struct tnbc_xfer, entry);

		if (tnbc_match_from(ep, rx, tagged, hdr->tag, &src,
				    &hdr->src)) {
			int err = 0;

			/* placed before the receive is taken: a stalled
			 * sender's packet leaves it posted (tnbc_rx_park) */
			if (!payload && hdr->type == TNBC_PKT_EAGER) {
				size_t n = hdr->size < rx->len ? hdr->size
							       : rx->len;
				ssize_t r = tnbc_rx_park(srx, poff, rx->iov,
							 rx->iov_count, n);

				if (r == -FI_EAGAIN)
					return TNBC_RX_LATER;
				if (r != (ssize_t)n)
					err = FI_EIO; /* died mid-packet */
			}
			tnbc_list_remove(&rx->entry);
			tnbc_ep_rx_del(ep);
			ep->rx_matches++;
			tnbc_deliver(ep, c, rx, hdr, payload, err, src);
			return TNBC_RX_DONE;
		}
	}
	/* Held back: no room, or an older message is held (buffering this
	 * one would let a receive see it first). */
	if (ep->ux_kept || !tnbc_ux_room(ep, hdr->payload_len))
		goto keep;
	/* The rest of a burst whose receives are yet to come: each of them
	 * takes its message straight from the queue while it has room
	 * (buffered now, every message would be copied twice). */
	if (c->lazy && tnbc_ep_rx_idle(ep) && tnbc_ep_xquiet(ep))
		return TNBC_RX_LATER;
	ux = payload ? tnbc_pull_early(ep, c, hdr, payload) : NULL;
	if (!ux) {
		struct iovec to;

		ux = tnbc_ux_new(ep, c->via, hdr->payload_len);
		if (!ux)
			goto keep; /* out of memory: it waits in the queue */
		ux->hdr = *hdr;
		to.iov_base = ux->data;
		to.iov_len = hdr->payload_len;
		if (payload) {
			memcpy(ux->data, payload, hdr->payload_len);
		} else {
			ssize_t r = tnbc_rx_park(srx, poff, &to, 1,
						 hdr->payload_len);

			if (r != (ssize_t)hdr->payload_len) {
				tnbc_ux_free(ep, ux);
				/* its sender stalled, or died mid-packet */
				return r == -FI_EAGAIN ? TNBC_RX_LATER
						       : TNBC_RX_BAD;
			}
		}
	}
	ux->src_addr = src;
	tnbc_list_insert_tail(&ux->entry, tnbc_space(ep, hdr->flags, true));
	return TNBC_RX_DONE;
keep:
	if (!ep->ux_kept++)
		atomic_fetch_add_explicit(&ep->domain->engine.unexp_held, 1,
					  memory_order_relaxed);
	return TNBC_RX_KEEP;
}

/* Asks the transport to let the receiver read a rendezvous send's
 * buffers (keys for its RTS).  An RTS built again (a full queue sent it
 * back) asks again: the keys are not kept. */
static void tnbc_rndv_expose(struct tnbc_xfer *tx, uint64_t *keys)
{
	const struct tnbc_xport_ops *ops = tnbc_xpeer_ops(tx->peer);

	if (!ops->expose || !tx->iov_count)
		return;
	if (tx->xreg && ops->unexpose)
		ops->unexpose(tx->peer, tx->xreg);
	tx->xreg = NULL;
	if (ops->expose(tx->peer, tx->iov, tx->iov_count, keys, &tx->xreg)) {
		memset(keys, 0, tx->iov_count * sizeof(*keys));
		tx->xreg = NULL;
	}
}

static void tnbc_rx_ack(struct tnbc_ep *ep, const struct tnbc_hdr *hdr)
{
	struct tnbc_xfer *tx = tnbc_id_find(&ep->rndv, hdr->msg_id);

	tnbc_ep_assert_locked(ep);
	/* an ACK for an RTS never sent would report a send that never
	 * happened, and free it while queued */
	if (!tx || tx->phase == TNBC_TX_RTS_QUEUED ||
	    !tnbc_name_same(&hdr->src, &tx->peer_name)) {
		tnbc_stray(ep, "an ACK");
		return;
	}
	tnbc_tx_dequeue(ep, tx); /* stop streaming */
	tnbc_id_del(&ep->rndv, hdr->msg_id);
	tnbc_ep_report_tx(ep, tx, hdr->size ? -(int)hdr->size : 0);
	tnbc_tx_free(tx);
}

static void tnbc_rx_cts(struct tnbc_ep *ep, const struct tnbc_hdr *hdr)
{
	struct tnbc_xfer *tx = tnbc_id_find(&ep->rndv, hdr->msg_id);

	tnbc_ep_assert_locked(ep);
	/* one CTS, after the RTS went out, from its receiver */
	if (!tx || tx->phase != TNBC_TX_RTS_SENT ||
	    !tnbc_name_same(&hdr->src, &tx->peer_name)) {
		tnbc_stray(ep, "a CTS");
		return;
	}
	tx->phase = TNBC_TX_STREAMING;
	tx->stream_len = hdr->size < tx->len ? hdr->size : tx->len;
	tx->stream_off = 0;
	tx->hdr.token = hdr->token;
	if (tx->stream_len)
		tnbc_tx_enqueue(ep, tx, &tnbc_msg_tx_kind);
}

/* Streamed rendezvous data for a receive: its payload in memory, or,
 * payload NULL, still in a stream transport (xrx, from byte poff of the
 * packet), read from there straight into the receive's buffers.  Returns
 * TNBC_RX_BAD when the payload could not be read (its sender died
 * mid-packet), else TNBC_RX_DONE: it is never kept. */
static int tnbc_rx_data(struct tnbc_ep *ep, const struct tnbc_hdr *hdr,
			const void *payload, struct tnbc_xrx *xrx, size_t poff)
{
	struct tnbc_list *it, *tmp;

	tnbc_list_foreach_safe (&ep->stream_rx, it, tmp) {
		struct tnbc_xfer *rx =
			tnbc_container_of(it, struct tnbc_xfer, entry);
		struct tnbc_hdr mh;

		if (rx->hdr.token != hdr->token)
			continue;
		if (!tnbc_name_same(&hdr->src, &rx->peer_name) ||
		    hdr->offset > rx->stream_len ||
		    hdr->payload_len > rx->stream_len - hdr->offset) {
			tnbc_stray(ep, "DATA");
			return TNBC_RX_DONE;
		}
		if (payload) {
			tnbc_copy_to_iov(rx->iov, rx->iov_count, hdr->offset,
					 payload, hdr->payload_len);
		} else {
			struct iovec part[TNBC_IOV_LIMIT];
			size_t n = tnbc_iov_slice(rx->iov, rx->iov_count,
						  hdr->offset, hdr->payload_len,
						  part, TNBC_IOV_LIMIT);
			ssize_t r = tnbc_rx_park(xrx, poff, part, n,
						 hdr->payload_len);

			if (r == -FI_EAGAIN)
				return TNBC_RX_LATER; /* offered again whole */
			if (r != (ssize_t)hdr->payload_len)
				return TNBC_RX_BAD;
		}
		rx->recv_bytes += hdr->payload_len;
		if (rx->recv_bytes < rx->stream_len)
			return TNBC_RX_DONE;
		tnbc_list_remove(&rx->entry);
		tnbc_send_answer(ep, rx->peer, TNBC_PKT_ACK, rx->hdr.msg_id, 0,
				 0);
		memset(&mh, 0, sizeof(mh));
		mh.flags = rx->msg_flags;
		mh.tag = rx->msg_tag;
		mh.cq_data = rx->msg_data;
		tnbc_report_rx(ep, rx, &mh, rx->msg_src, rx->msg_size, 0);
		free(rx);
		return TNBC_RX_DONE;
	}
	tnbc_stray(ep, "DATA");
	return TNBC_RX_DONE;
}

/* A packet whose frame was checked and expanded. */
static inline __attribute__((always_inline)) int
tnbc_rx_hdr(struct tnbc_ep *ep, const struct tnbc_rx_ctx *c,
	    const struct tnbc_hdr *hdr, const void *payload)
{
	switch (hdr->type) {
	case TNBC_PKT_EAGER:
	case TNBC_PKT_RTS:
		return tnbc_rx_msg(ep, c, hdr, payload, NULL, 0);
	case TNBC_PKT_ACK:
		tnbc_rx_ack(ep, hdr);
		break;
	case TNBC_PKT_CTS:
		tnbc_rx_cts(ep, hdr);
		break;
	case TNBC_PKT_DATA:
		return tnbc_rx_data(ep, hdr, payload, NULL, 0);
	case TNBC_PKT_RMA_REQ:
		tnbc_rma_rx_req(ep, c->via, hdr, payload);
		break;
	case TNBC_PKT_RMA_RESP:
		tnbc_rma_rx_resp(ep, hdr, payload);
		break;
	default:
		tnbc_stray(ep, "a packet of unknown type");
		break;
	}
	return TNBC_RX_DONE;
}

/* A packet whose payload a stream transport has not read yet.  An eager
 * message's goes straight where it belongs (a receive's buffers, or one
 * unexpected buffer), and so does rendezvous data; any other packet is
 * read whole first, into a buffer of its own, and taken as from memory. */
static int tnbc_rx_stream(struct tnbc_ep *ep, const struct tnbc_rx_ctx *c,
			  const struct tnbc_hdr *hdr, struct tnbc_xrx *rx,
			  size_t hlen)
{
	struct iovec to = {.iov_len = hdr->payload_len};
	ssize_t r;
	int verdict;

	if (hdr->type == TNBC_PKT_EAGER)
		return tnbc_rx_msg(ep, c, hdr, NULL, rx, hlen);
	if (hdr->type == TNBC_PKT_DATA)
		return tnbc_rx_data(ep, hdr, NULL, rx, hlen);
	to.iov_base = malloc(to.iov_len);
	if (!to.iov_base)
		return TNBC_RX_LATER; /* memory may come back */
	r = tnbc_rx_park(rx, hlen, &to, 1, to.iov_len);
	if (r != (ssize_t)to.iov_len) {
		free(to.iov_base);
		/* its sender stalled, or died mid-packet */
		return r == -FI_EAGAIN ? TNBC_RX_LATER : TNBC_RX_BAD;
	}
	verdict = tnbc_rx_hdr(ep, c, hdr, to.iov_base);
	free(to.iov_base);
	/* kept or left: the transport offers the packet again, whole */
	return verdict;
}

int tnbc_rx_packet(void *arg, struct tnbc_xrx *rx)
{
	const struct tnbc_rx_ctx *c = arg;
	struct tnbc_ep *ep = c->ep;
	const struct tnbc_ep_xport *x = &ep->xp[c->via];
	struct tnbc_hdr hdr;
	size_t hlen =
		tnbc_frame_unpack(x->ops, &ep->name, rx->head, rx->len, &hdr);
	int verdict;

	if (!hlen)
		return TNBC_RX_BAD;
	/* a frame names its source, and only its connection proves it:
	 * one naming another process's endpoint is forged (a stranger's,
	 * on a connection of its own) */
	if (rx->from &&
	    (hdr.src.host != rx->from->host || hdr.src.pid != rx->from->pid)) {
		atomic_fetch_add_explicit(&ep->domain->engine.forged_pkts, 1,
					  memory_order_relaxed);
		return TNBC_RX_BAD;
	}
	if (c->app)
		tnbc_app_inside(ep->domain, true);
	if (rx->head_len < rx->len)
		verdict = tnbc_rx_stream(ep, c, &hdr, rx, hlen);
	else
		verdict = tnbc_rx_hdr(ep, c, &hdr, rx->head + hlen);
	if (verdict == TNBC_RX_KEEP)
		rx->kept_src = hdr.src;
	return verdict;
}

/* Sends what the peer takes of a queued send. */
static int tnbc_msg_tx_go(struct tnbc_ep *ep, struct tnbc_xfer *tx)
{
	struct iovec iov[TNBC_IOV_LIMIT];
	struct tnbc_hdr hdr;
	size_t chunk, n;
	int ret;

	if (!tx->stream_len) {
		struct iovec one;
		const struct iovec *src = tx->iov;
		size_t cnt = tx->iov_count;

		if (tx->inject_buf) {
			one.iov_base = tx->inject_buf;
			one.iov_len = tx->len;
			src = &one;
			cnt = 1;
		}
		if (tx->hdr.type == TNBC_PKT_RTS) {
			struct tnbc_rts_iov riov[TNBC_IOV_LIMIT];
			uint64_t keys[TNBC_IOV_LIMIT] = {0};

			tnbc_rndv_expose(tx, keys);
			for (size_t i = 0; i < tx->iov_count; i++) {
				riov[i].addr = (uintptr_t)tx->iov[i].iov_base;
				riov[i].len = tx->iov[i].iov_len;
				riov[i].key = keys[i];
			}
			one.iov_base = riov;
			one.iov_len = tx->iov_count * sizeof(riov[0]);
			ret = tnbc_pkt_send(tx->peer, &tx->hdr, &one, 1);
			if (!ret)
				atomic_fetch_add_explicit(
					&ep->domain->engine.sync_pkts, 1,
					memory_order_relaxed);
			return ret;
		}
		return tnbc_pkt_send(tx->peer, &tx->hdr, src, cnt);
	}
	/* Streaming: as many chunks as the peer's queue takes. */
	while (tx->stream_off < tx->stream_len) {
		chunk = tnbc_max_payload(tx->peer);
		if (chunk > tx->stream_len - tx->stream_off)
			chunk = tx->stream_len - tx->stream_off;
		hdr = tx->hdr;
		hdr.type = TNBC_PKT_DATA;
		hdr.payload_len = (uint32_t)chunk;
		hdr.offset = tx->stream_off;
		n = tnbc_iov_slice(tx->iov, tx->iov_count, tx->stream_off,
				   chunk, iov, TNBC_IOV_LIMIT);
		ret = tnbc_pkt_send(tx->peer, &hdr, iov, n);
		if (ret)
			return ret;
		tx->stream_off += chunk;
	}
	return 0;
}

/* The transmit queue is done with a send (ret: how its go ended). */
static void tnbc_msg_tx_done(struct tnbc_ep *ep, struct tnbc_xfer *tx, int ret)
{
	if (tx->stream_len) {
		if (ret) {
			tnbc_tx_dequeue(ep, tx);
			tnbc_id_del(&ep->rndv, tx->hdr.msg_id);
			tnbc_ep_report_tx(ep, tx, ret);
			tnbc_tx_free(tx);
		} else {
			/* all handed out; the ACK completes it */
			tnbc_tx_dequeue(ep, tx);
		}
		return;
	}
	tnbc_tx_dequeue(ep, tx);
	if (tx->hdr.type == TNBC_PKT_RTS && !ret) {
		tx->phase = TNBC_TX_RTS_SENT;
		return; /* waits in the rendezvous table */
	}
	if (tx->hdr.type == TNBC_PKT_RTS)
		tnbc_id_del(&ep->rndv, tx->hdr.msg_id);
	tnbc_ep_report_tx(ep, tx, ret);
	tnbc_tx_free(tx);
}

const struct tnbc_tx_kind tnbc_msg_tx_kind = {
	.go = tnbc_msg_tx_go,
	.done = tnbc_msg_tx_done,
};

/* How often operations waiting on a peer check that it still exists. */
#define TNBC_PEER_CHECK_NS 100000000u

/*
 * Rendezvous sends waiting for an ACK, and streamed receives waiting for
 * DATA, depend on a peer process.  If it died they would never complete:
 * fail them instead, at most every TNBC_PEER_CHECK_NS.  ep->lock held.
 */
/* Liveness of one peer per check pass: operations mostly wait on few
 * peers, and asking the kernel costs a /proc read. */
struct tnbc_alive_memo {
	struct tnbc_xpeer *peer;
	bool alive;
};

static bool tnbc_peer_alive_memo(struct tnbc_xpeer *peer,
				 struct tnbc_alive_memo *m)
{
	if (m->peer != peer) {
		m->peer = peer;
		m->alive = tnbc_xpeer_ops(peer)->peer_alive(peer);
	}
	return m->alive;
}

void tnbc_ep_check_peers(struct tnbc_ep *ep, bool engine)
{
	tnbc_ep_assert_locked(ep);
	struct tnbc_alive_memo memo = {0};
	struct tnbc_list *it, *tmp;
	uint64_t now;

	if (!ep->rndv.used && !ep->rma_ids.used &&
	    tnbc_list_empty(&ep->stream_rx) && tnbc_list_empty(&ep->rx_coll))
		return;
	/* the clock only every few of an application's polls: one waiting
	 * for a collective polls here millions of times a second (the
	 * engine comes by when it wakes, and always looks) */
	if (!engine && (++ep->peer_check_polls & 63))
		return;
	now = tnbc_now_ns();
	if (now - ep->peer_check_ns < TNBC_PEER_CHECK_NS)
		return;
	for (size_t i = 0; i < ep->rndv.size; i++) {
		struct tnbc_xfer *tx = ep->rndv.slot[i];

		if (!tx || tnbc_peer_alive_memo(tx->peer, &memo))
			continue;
		/* unlink it if it still waits to send its RTS or DATA */
		tnbc_tx_dequeue(ep, tx);
		tnbc_id_del(&ep->rndv, tx->hdr.msg_id);
		tnbc_ep_report_tx(ep, tx, -FI_EHOSTUNREACH);
		tnbc_tx_free(tx);
	}
	tnbc_list_foreach_safe (&ep->stream_rx, it, tmp) {
		struct tnbc_xfer *rx =
			tnbc_container_of(it, struct tnbc_xfer, entry);
		struct tnbc_hdr mh = {.flags = rx->msg_flags,
				      .tag = rx->msg_tag,
				      .cq_data = rx->msg_data};

		if (tnbc_peer_alive_memo(rx->peer, &memo))
			continue;
		tnbc_list_remove(&rx->entry);
		tnbc_report_rx(ep, rx, &mh, rx->msg_src, rx->msg_size,
			       FI_EHOSTUNREACH);
		free(rx);
	}
	for (size_t i = 0; i < ep->rma_ids.size; i++) {
		struct tnbc_xfer *tx = ep->rma_ids.slot[i];

		if (tx && !tnbc_peer_alive_memo(tx->peer, &memo))
			tnbc_rma_fail(ep, tx, -FI_EHOSTUNREACH);
	}
	/* A collective's step waits for one member: a dead one fails it,
	 * and the schedule carries the error to the others. */
	tnbc_list_foreach_safe (&ep->rx_coll, it, tmp) {
		struct tnbc_xfer *rx =
			tnbc_container_of(it, struct tnbc_xfer, entry);
		struct tnbc_hdr mh = {.flags = TNBC_HDR_TAGGED | TNBC_HDR_COLL,
				      .tag = rx->tag};
		struct tnbc_xpeer *peer;

		/* a descriptor's receive takes any child: nobody to watch */
		if (rx->addr == FI_ADDR_UNSPEC ||
		    (!tnbc_av_peer(ep->av, rx->addr, &peer) &&
		     tnbc_peer_alive_memo(peer, &memo)))
			continue;
		tnbc_list_remove(&rx->entry);
		tnbc_ep_rx_del(ep);
		tnbc_report_rx(ep, rx, &mh, rx->addr, 0, FI_EHOSTUNREACH);
		free(rx);
	}
	/* from the end of the pass: a long pass must not start the next */
	ep->peer_check_ns = tnbc_now_ns();
}

/* Drops every queued operation of a closing endpoint. */
void tnbc_ep_flush_queues(struct tnbc_ep *ep)
{
	struct tnbc_list *lists[] = {
		&ep->rx_msg,	   &ep->rx_tagged,  &ep->rx_coll,
		&ep->tx_queue,	   &ep->stream_rx,  &ep->unexp_msg,
		&ep->unexp_tagged, &ep->unexp_coll, &ep->ctrl_queue};
	struct tnbc_list *it, *tmp;

	for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
		tnbc_list_foreach_safe (lists[l], it, tmp) {
			tnbc_list_remove(it);
			if (lists[l] == &ep->rx_msg ||
			    lists[l] == &ep->rx_tagged ||
			    lists[l] == &ep->rx_coll)
				tnbc_ep_rx_del(ep);
			if (lists[l] == &ep->tx_queue) {
				struct tnbc_xfer *tx = tnbc_container_of(
					it, struct tnbc_xfer, entry);

				tnbc_tx_unlink(tx);
				/* rendezvous and RMA are freed below */
				if (tx->hdr.type == TNBC_PKT_RTS || tx->rma)
					continue;
				free(tx->inject_buf);
			}
			free(it); /* entry is the first member of each type */
		}
	}
	tnbc_ep_rx_settle(ep);
	ep->tx_queued = 0;
	ep->ux_bytes = 0;
	ep->ux_kept = 0;
	for (size_t i = 0; i < ep->rndv.size; i++) {
		if (ep->rndv.slot[i])
			tnbc_tx_free(ep->rndv.slot[i]);
		ep->rndv.slot[i] = NULL;
	}
	atomic_fetch_sub(&ep->domain->engine.peer_waits,
			 (int)(ep->rndv.used + ep->rma_ids.used));
	ep->rndv.used = 0;
	for (size_t i = 0; i < ep->rma_ids.size; i++) {
		if (ep->rma_ids.slot[i]) {
			free(ep->rma_ids.slot[i]->rma);
			free(ep->rma_ids.slot[i]);
		}
		ep->rma_ids.slot[i] = NULL;
	}
	ep->rma_ids.used = 0;
}

/* ------------------------------------------------------------------ */
/* Posting                                                              */

int tnbc_ep_check_send(struct tnbc_ep *ep, const struct iovec *iov,
		       size_t count, fi_addr_t dest, uint64_t flags)
{
	struct tnbc_xpeer *peer;
	int ret;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (flags & ~(TNBC_SEND_FLAGS | TNBC_NO_COMPLETION | TNBC_DEFERRED))
		return -FI_EBADFLAGS;
	ret = tnbc_check_iov(iov, count);
	if (ret)
		return ret;
	/* One matching engine serves both interfaces: an endpoint opened
	 * for either takes both (as libfabric's sockets provider does). */
	if (!(ep->info->caps & (FI_MSG | FI_TAGGED)) ||
	    !(ep->info->caps & FI_SEND))
		return -FI_EOPNOTSUPP;
	if (tnbc_iov_len(iov, count) > TNBC_MAX_MSG_SIZE)
		return -FI_EMSGSIZE;
	ret = tnbc_av_peer(ep->av, dest, &peer);
	if (ret)
		return ret == -FI_EINVAL ? -FI_EADDRNOTAVAIL : ret;
	/* fi_info's inject_size, whichever transport reaches the peer (a
	 * TCP peer takes larger packets) */
	if ((flags & FI_INJECT) &&
	    tnbc_iov_len(iov, count) > tnbc_slot_payload())
		return -FI_EMSGSIZE;
	return 0;
}

/* An eager message straight to the transport, and its completion when
 * it left; -FI_EAGAIN when the peer's queue is full. */
static int tnbc_send_eager(struct tnbc_ep *ep, struct tnbc_xpeer *peer,
			   const struct tnbc_hdr *hdr, const struct iovec *iov,
			   size_t count, void *context, uint64_t flags,
			   bool tagged, struct tnbc_cntr *comp_cntr)
{
	int ret = tnbc_pkt_send(peer, hdr, iov, count);

	if (!ret)
		tnbc_ep_report_send(ep, context, flags, tagged, comp_cntr, 0);
	return ret;
}

ssize_t tnbc_msg_start_send(struct tnbc_ep *ep, const struct tnbc_msg_args *a,
			    const struct tnbc_opx *x)
{
	const struct iovec *iov = a->iov;
	size_t count = a->iov_count;
	fi_addr_t dest = a->addr;
	uint64_t tag = a->tag, data = a->data, flags = a->flags;
	void *context = a->context;
	bool tagged = a->tagged;
	struct tnbc_cntr *comp_cntr = x ? x->comp_cntr : NULL;
	uint8_t prio = x ? x->prio : (uint8_t)atomic_load(&ep->prio);
	struct tnbc_xpeer *peer;
	struct tnbc_xfer *tx;
	struct tnbc_hdr hdr;
	size_t len;
	bool rndv;
	int ret;

	/* checked when posted, but a triggered send starts later: its
	 * address may have left the AV since */
	ret = tnbc_av_peer(ep->av, dest, &peer);
	if (ret)
		return ret == -FI_EINVAL ? -FI_EADDRNOTAVAIL : ret;
	len = tnbc_iov_len(iov, count);

	memset(&hdr, 0, sizeof(hdr));
	hdr.version = TNBC_PROTO_VERSION;
	hdr.flags = tnbc_args_hflags(a);
	if (flags & FI_REMOTE_CQ_DATA) {
		hdr.flags |= TNBC_HDR_CQ_DATA;
		hdr.cq_data = data;
	}
	if (flags & FI_DELIVERY_COMPLETE)
		hdr.flags |= TNBC_HDR_DELIVERY;
	hdr.tag = tagged ? tag : 0;
	hdr.size = len;
	hdr.src = ep->name;
	/* An injected buffer may be reused at once, so it always travels
	 * eagerly (inject_size never exceeds one slot). */
	rndv = !(flags & FI_INJECT) &&
	       (len > (a->ready ? tnbc_max_payload(peer)
				: tnbc_eager_limit(peer)) ||
		(flags & FI_DELIVERY_COMPLETE));

	if (!rndv) {
		hdr.type = TNBC_PKT_EAGER;
		hdr.payload_len = (uint32_t)len;
		/* Nothing queued: the message goes out without the lock
		 * (the transport takes concurrent senders).  A send queued
		 * before this one was handed to the transport before the
		 * count dropped, so it stays ahead; one queued meanwhile by
		 * another thread is concurrent with this one. */
		if (!atomic_load_explicit(&ep->tx_queued,
					  memory_order_acquire)) {
			ret = tnbc_send_eager(ep, peer, &hdr, iov, count,
					      context, flags, tagged,
					      comp_cntr);
			if (!ret)
				goto out_unlocked;
			if (ret != -FI_EAGAIN)
				return ret;
		}
	}
	tnbc_ep_lock(ep);
	if (!rndv) {
		if (tnbc_tx_may_bypass(ep, prio)) {
			ret = tnbc_send_eager(ep, peer, &hdr, iov, count,
					      context, flags, tagged,
					      comp_cntr);
			if (ret != -FI_EAGAIN)
				goto out;
		}
	}
	/* Back pressure: a peer that does not drain its queue makes us
	 * queue, and the queue is bounded like a NIC's. */
	if (ep->tx_queued >= ep->info->tx_attr->size) {
		ret = -FI_EAGAIN;
		goto out;
	}
	tx = calloc(1, sizeof(*tx));
	if (!tx) {
		ret = -FI_EAGAIN;
		goto out;
	}
	tx->context = context;
	tx->flags = flags;
	tx->peer = peer;
	tx->peer_name = tnbc_av_get(ep->av, dest)->name;
	tx->len = len;
	tx->prio = prio;
	tx->comp_cntr = comp_cntr;
	tx->iov_count = count;
	if (count)
		memcpy(tx->iov, iov, count * sizeof(*iov));
	tx->hdr = hdr;
	if (!rndv && (flags & FI_INJECT) && len) {
		/* The caller may reuse an inject buffer at once. */
		tx->inject_buf = malloc(len);
		if (!tx->inject_buf) {
			free(tx);
			ret = -FI_EAGAIN;
			goto out;
		}
		tnbc_copy_from_iov(tx->inject_buf, iov, count, 0, len);
	}
	if (rndv) {
		tx->hdr.type = TNBC_PKT_RTS;
		tx->hdr.payload_len =
			(uint32_t)(count * sizeof(struct tnbc_rts_iov));
		ret = tnbc_id_add(&ep->rndv, tx, &tx->hdr.msg_id);
		if (ret) {
			free(tx);
			ret = -FI_EAGAIN;
			goto out;
		}
		tnbc_ep_mark_work(ep);
		if (tnbc_tx_may_bypass(ep, prio)) {
			ret = tnbc_msg_tx_go(ep, tx);
			if (!ret) {
				tx->phase = TNBC_TX_RTS_SENT;
				goto out; /* waits for its ACK */
			}
			if (ret != -FI_EAGAIN) {
				tnbc_id_del(&ep->rndv, tx->hdr.msg_id);
				tnbc_tx_free(tx);
				goto out;
			}
		}
	}
	tnbc_tx_enqueue(ep, tx, &tnbc_msg_tx_kind);
	ret = 0;
out:
	tnbc_ep_unlock(ep);
out_unlocked:
	if (!ret && a->sync)
		atomic_fetch_add_explicit(&ep->domain->engine.sync_pkts, 1,
					  memory_order_relaxed);
	return ret;
}

static struct tnbc_unexp *tnbc_find_unexp(struct tnbc_ep *ep,
					  struct tnbc_list *list, bool tagged,
					  const struct tnbc_xfer *rx)
{
	struct tnbc_list *it, *tmp;

	tnbc_list_foreach_safe (list, it, tmp) {
		struct tnbc_unexp *ux =
			tnbc_container_of(it, struct tnbc_unexp, entry);

		if (tnbc_match_from(ep, rx, tagged, ux->hdr.tag, &ux->src_addr,
				    &ux->hdr.src))
			return ux;
	}
	return NULL;
}

static void tnbc_report_peek(struct tnbc_ep *ep, void *context,
			     struct tnbc_unexp *ux)
{
	uint64_t flags = FI_RECV | FI_TAGGED;
	fi_addr_t src = FI_ADDR_NOTAVAIL;

	if (ep->info->caps & FI_SOURCE)
		src = tnbc_src_addr(ep, &ux->src_addr, &ux->hdr.src);

	if (ux->hdr.flags & TNBC_HDR_CQ_DATA)
		flags |= FI_REMOTE_CQ_DATA;
	if (ep->rx_cq)
		tnbc_cq_write(ep->rx_cq, context, flags, ux->hdr.size, NULL,
			      ux->hdr.cq_data, ux->hdr.tag, src);
}

/* FI_PEEK, FI_CLAIM and FI_DISCARD (fi_tagged(3)). */
static ssize_t tnbc_post_peek_claim(struct tnbc_ep *ep, struct tnbc_xfer *rx)
{
	struct fi_context *ctx = rx->context;
	struct tnbc_unexp *ux;

	if (rx->flags & FI_PEEK) {
		ux = tnbc_find_unexp(ep, &ep->unexp_tagged, true, rx);
		if (!ux) {
			if (ep->rx_cq)
				tnbc_cq_write_err(ep->rx_cq, rx->context,
						  FI_RECV | FI_TAGGED, 0, NULL,
						  0, 0, 0, FI_ENOMSG,
						  -FI_ENOMSG, FI_ADDR_NOTAVAIL);
			free(rx);
			return 0;
		}
		tnbc_report_peek(ep, rx->context, ux);
		if (rx->flags & (FI_CLAIM | FI_DISCARD))
			tnbc_list_remove(&ux->entry);
		if (rx->flags & FI_DISCARD) {
			tnbc_discard(ep, ux);
			tnbc_ux_free(ep, ux);
		} else if (rx->flags & FI_CLAIM) {
			ux->claim_ctx = ctx;
			ctx->internal[0] = ux;
		}
		free(rx);
		return 0;
	}
	/* FI_CLAIM without FI_PEEK: take the message a peek reserved. */
	ux = ctx->internal[0];
	if (!ux || ux->claim_ctx != ctx) {
		free(rx);
		return -FI_EINVAL;
	}
	ctx->internal[0] = NULL;
	if (rx->flags & FI_DISCARD) {
		tnbc_discard(ep, ux);
		/* a discarded message completes with no data */
		if (ep->rx_cq &&
		    (!ep->rx_selective || (rx->flags & FI_COMPLETION)))
			tnbc_cq_write(ep->rx_cq, rx->context,
				      FI_RECV | FI_TAGGED, 0, NULL, 0,
				      ux->hdr.tag, FI_ADDR_NOTAVAIL);
		if (ep->rx_cntr)
			tnbc_cntr_inc(ep->rx_cntr);
		free(rx);
	} else {
		struct tnbc_rx_ctx c = {.ep = ep, .via = ux->via};

		tnbc_deliver(ep, &c, rx, &ux->hdr, ux->data, 0, ux->src_addr);
	}
	tnbc_ux_free(ep, ux);
	return 0;
}

int tnbc_ep_check_recv(struct tnbc_ep *ep, const struct iovec *iov,
		       size_t count, fi_addr_t src, uint64_t flags, bool tagged)
{
	int ret;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (flags &
	    ~((tagged ? TNBC_TRECV_FLAGS : TNBC_RECV_FLAGS) | TNBC_DEFERRED))
		return -FI_EBADFLAGS;
	if ((flags & FI_DISCARD) && !(flags & (FI_PEEK | FI_CLAIM)))
		return -FI_EINVAL;
	ret = tnbc_check_iov(iov, count);
	if (ret)
		return ret;
	if (!(ep->info->caps & (FI_MSG | FI_TAGGED)) ||
	    !(ep->info->caps & FI_RECV))
		return -FI_EOPNOTSUPP;
	if ((ep->info->caps & FI_DIRECTED_RECV) && src != FI_ADDR_UNSPEC &&
	    !tnbc_av_get(ep->av, src))
		return -FI_EADDRNOTAVAIL;
	return 0;
}

ssize_t tnbc_msg_start_recv(struct tnbc_ep *ep, const struct tnbc_msg_args *a,
			    const struct tnbc_opx *x)
{
	fi_addr_t src = a->addr;
	struct tnbc_list *ul;
	struct tnbc_unexp *ux;
	struct tnbc_xfer *rx;
	size_t kept;
	ssize_t ret = 0;

	/* a collective's step always names its source */
	if (!(ep->info->caps & FI_DIRECTED_RECV) && !a->coll)
		src = FI_ADDR_UNSPEC;

	tnbc_ep_lock(ep);
	rx = tnbc_xfer_get(ep);
	if (!rx) {
		tnbc_ep_unlock(ep);
		return -FI_EAGAIN;
	}
	rx->context = a->context;
	rx->flags = a->flags;
	rx->comp_cntr = x ? x->comp_cntr : NULL;
	rx->tag = a->tag;
	rx->ignore = a->ignore;
	rx->addr = src;
	rx->iov_count = a->iov_count;
	if (a->iov_count) /* iov may be NULL for a zero-length receive */
		memcpy(rx->iov, a->iov, a->iov_count * sizeof(*a->iov));
	rx->len = tnbc_iov_len(a->iov, a->iov_count);

	if (a->flags & (FI_PEEK | FI_CLAIM)) {
		/* A peek must see what has already arrived in the queue. */
		if (a->flags & FI_PEEK)
			tnbc_ep_xpoll(&(struct tnbc_rx_ctx){.ep = ep}, 1 << 30);
		ret = tnbc_post_peek_claim(ep, rx);
		goto out;
	}
	kept = ep->ux_kept;
	ul = tnbc_space(ep, tnbc_args_hflags(a), true);
	ux = tnbc_find_unexp(ep, ul, a->tagged, rx);
	if (ux) {
		size_t had = ep->npulls;

		tnbc_list_remove(&ux->entry);
		/* More rendezvous messages wait behind this one (a burst the
		 * application is posting receives for): its read joins theirs
		 * at the next progress call, which is usually the very next
		 * call.  So does the read of a receive that deferred work
		 * posted (x): the call that queued the work goes on without
		 * copying megabytes (the MPI glue's T-NBC call returns while
		 * the body of a message is still to be read).  A lone one
		 * posted by the application is read now. */
		struct tnbc_rx_ctx c = {
			.ep = ep,
			.via = ux->via,
			.batch = ux->hdr.type == TNBC_PKT_RTS &&
				 (x ||
				  (!tnbc_list_empty(ul) &&
				   tnbc_container_of(ul->next,
						     struct tnbc_unexp, entry)
						   ->hdr.type == TNBC_PKT_RTS)),
		};

		tnbc_deliver(ep, &c, rx, &ux->hdr, ux->data, 0, ux->src_addr);
		tnbc_ux_free(ep, ux);
		/* the engine makes them if the application does not call */
		if (!had && ep->npulls)
			tnbc_engine_nudge(ep->domain);
	} else {
		tnbc_list_insert_tail(
			&rx->entry, tnbc_space(ep, tnbc_args_hflags(a), false));
		if (a->coll) /* its member's liveness is watched */
			tnbc_ep_mark_work(ep);
		if (tnbc_ep_rx_add(ep))
			tnbc_ep_xlook_mark(ep);
		/* it may match a message held in the queue */
		if (kept)
			tnbc_ux_rewind(ep);
	}
	/* A sender that saw no receive posted left its eager message
	 * without waking anyone, and held messages come back only when
	 * offered again: look now, past every held one.  Without held
	 * ones, only at packets that came before the endpoint was marked
	 * (look_mark): a later sender saw the mark, and rang or found
	 * someone polling.  The look at every post was a cache miss on
	 * the cell a sender is writing, a tenth of a small receive.  Only
	 * until a receive is matched: the packets behind it are most
	 * likely for the receives the application posts next (a burst),
	 * and taken now they would be copied twice, through unexpected
	 * buffers. */
	if (!ux) {
		uint64_t matches = ep->rx_matches;
		int budget = TNBC_RX_POLL_BUDGET +
			     (int)(kept < (1u << 30) ? kept : (1u << 30));

		while (budget-- > 0 && ep->rx_matches == matches &&
		       (kept ? tnbc_ep_xpending(ep) : tnbc_ep_xunlooked(ep)))
			tnbc_ep_xpoll(&(struct tnbc_rx_ctx){.ep = ep,
							    .batch = x != NULL},
				      1);
		if (x && ep->npulls)
			tnbc_engine_nudge(ep->domain);
	}
out:
	tnbc_ep_unlock(ep);
	return ret;
}

bool tnbc_ep_rx_add(struct tnbc_ep *ep)
{
	atomic_store_explicit(
		&ep->rx_nposted,
		atomic_load_explicit(&ep->rx_nposted, memory_order_relaxed) + 1,
		memory_order_relaxed);
	if (atomic_load_explicit(&ep->rx_marked, memory_order_relaxed))
		return false;
	atomic_store_explicit(&ep->rx_marked, true, memory_order_relaxed);
	tnbc_dom_xrx_posted(ep->domain, 1);
	return true;
}

void tnbc_ep_rx_settle(struct tnbc_ep *ep)
{
	if (!atomic_load_explicit(&ep->rx_marked, memory_order_relaxed) ||
	    atomic_load_explicit(&ep->rx_nposted, memory_order_relaxed))
		return;
	atomic_store_explicit(&ep->rx_marked, false, memory_order_relaxed);
	tnbc_dom_xrx_posted(ep->domain, -1);
}

int tnbc_ep_cancel_rx(struct tnbc_ep *ep, void *context)
{
	struct tnbc_list *lists[] = {&ep->rx_tagged, &ep->rx_msg};

	for (size_t l = 0; l < 2; l++) {
		struct tnbc_list *it, *tmp;

		tnbc_list_foreach_safe (lists[l], it, tmp) {
			struct tnbc_xfer *rx =
				tnbc_container_of(it, struct tnbc_xfer, entry);

			if (rx->context != context)
				continue;
			tnbc_list_remove(&rx->entry);
			tnbc_ep_rx_del(ep);
			if (ep->rx_cq)
				tnbc_cq_write_err(
					ep->rx_cq, context,
					FI_RECV | (l ? FI_MSG : FI_TAGGED), 0,
					NULL, 0, l ? 0 : rx->tag, 0,
					FI_ECANCELED, -FI_ECANCELED,
					FI_ADDR_NOTAVAIL);
			if (ep->rx_cntr)
				tnbc_cntr_inc_err(ep->rx_cntr);
			free(rx);
			return 0;
		}
	}
	return -FI_ENOENT;
}
