/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Transfers, the id tables, the control and transmit queues
 * (tnbc_xfer.c): what messages (tnbc_msg.c) and RMA (tnbc_rma.c) share.
 * Every call needs ep->lock.
 */
#ifndef TNBC_XFER_H
#define TNBC_XFER_H

#include <stdlib.h>
#include <string.h>

#include "tnbc.h"
#include "tnbc_lock.h"

/* What an RMA or atomic operation does, taken from any of the entry
 * points (and kept by a triggered one until it fires). */
struct tnbc_rma_args {
	uint8_t kind; /* enum tnbc_pkt_rma_kind */
	enum fi_op op;
	enum fi_datatype dt;
	struct iovec iov[TNBC_IOV_LIMIT]; /* local source / sink */
	size_t iov_count;
	struct iovec res[TNBC_IOV_LIMIT]; /* fetch: old values */
	size_t res_count;
	struct iovec cmp[TNBC_IOV_LIMIT]; /* compare operands */
	size_t cmp_count;
	struct fi_rma_iov rma[TNBC_IOV_LIMIT];
	size_t rma_count;
	fi_addr_t addr;
	uint64_t data;
	void *context;
	uint64_t flags;
};

/* A send or a receive, checked once where it is posted (the entry
 * points, or the trigger unit when it queues one): the start functions
 * trust it. */
struct tnbc_msg_args {
	const struct iovec *iov;
	size_t iov_count;
	fi_addr_t addr; /* the destination, or the source a receive takes */
	uint64_t tag, ignore, data;
	void *context;
	uint64_t flags;
	bool tagged;
	bool coll; /* the collectives' match space (TNBC_HDR_COLL) */
	/* a collective's send whose receive is known to be posted (an LSS
	 * alltoall's, after the receiver's ready note): eager up to one
	 * packet, whatever the eager size, since it cannot land unexpected */
	bool ready;
	/* a collective's synchronisation message (LSS's ready note):
	 * counted in the engine's sync_pkts */
	bool sync;
};

/* Per-operation options that are not fi_* arguments. */
struct tnbc_opx {
	struct tnbc_cntr *comp_cntr; /* deferred work's completion_cntr */
	uint8_t prio;
};

struct tnbc_xfer;

/* What the transmit queue asks of a transfer it holds: go sends what
 * the peer takes now (-FI_EAGAIN: nothing, the queue tries again
 * later); done takes the transfer back after any other answer of go,
 * ret being that answer (-FI_EHOSTUNREACH for a peer found dead). */
struct tnbc_tx_kind {
	int (*go)(struct tnbc_ep *ep, struct tnbc_xfer *tx);
	void (*done)(struct tnbc_ep *ep, struct tnbc_xfer *tx, int ret);
};
extern const struct tnbc_tx_kind tnbc_msg_tx_kind, tnbc_rma_tx_kind;

/* A posted receive, or a send that cannot complete at post time. */
struct tnbc_xfer {
	struct tnbc_list entry;
	void *context;
	uint64_t flags; /* FI_* op flags as posted */
	uint64_t tag;
	uint64_t ignore;
	uint64_t cq_data;
	fi_addr_t addr;
	size_t iov_count;
	size_t len; /* total of iov */
	/* sender side */
	struct tnbc_xpeer *peer;
	void *inject_buf; /* owned copy for FI_INJECT sends */
	uint64_t stall_ns; /* when the peer's queue was first found full */
	uint64_t stream_off; /* streamed rendezvous: bytes handed out */
	uint64_t stream_len;
	/* receiver side, streamed rendezvous */
	uint64_t recv_bytes;
	uint64_t msg_size;
	uint64_t msg_tag;
	uint64_t msg_data;
	uint16_t msg_flags;
	fi_addr_t msg_src;
	bool done;
	uint8_t prio; /* transmit priority, FI_TNBC_PRIO_* */
	uint8_t phase; /* rendezvous send: enum tnbc_tx_phase */
	bool queued; /* on ep->tx_queue */
	const struct tnbc_tx_kind *kind; /* set when queued */
	/* queued to another host and counted on the link board
	 * (tnbc_link.h), and when its hold for a neighbour began */
	bool link_counted;
	uint64_t link_ns;
	void *xreg; /* what expose gave a rendezvous send, for unexpose */
	/* the peer that may answer (rendezvous, RMA): answers from anyone
	 * else, or that do not fit the phase, are dropped */
	struct tnbc_name peer_name;
	struct tnbc_cntr *comp_cntr;
	/* RMA and atomics (initiator) */
	struct tnbc_rma_args *rma;
	bool rma_queued; /* on tx_queue */
	/* Not cleared for a receive taken from the endpoint's cache
	 * (tnbc_xfer_get), which a send or RMA operation (calloc'd) never
	 * is: iov is read up to iov_count, a receive writes the fields of
	 * hdr it uses (a streamed one) first, and the rest is an RMA
	 * initiator's.  Clearing them was a fifth of a receive's post. */
	struct iovec iov[TNBC_IOV_LIMIT];
	size_t rma_seg, rma_seg_off; /* next chunk: remote segment, offset */
	size_t rma_loc_off; /* bytes of the local buffers covered so far */
	size_t rma_inflight; /* chunks sent, response not yet back */
	size_t rma_done; /* bytes acknowledged */
	int rma_err;
	/* one direct request (TNBC_RMA_REQ_DIRECT) instead of chunks */
	bool rma_direct;
	struct tnbc_hdr hdr; /* a send's: fully built at post time */
};

/* Where a rendezvous send is: which answers it may take. */
enum tnbc_tx_phase {
	TNBC_TX_RTS_QUEUED = 0, /* RTS not sent yet: no answer is valid */
	TNBC_TX_RTS_SENT, /* ACK or CTS */
	TNBC_TX_STREAMING, /* CTS taken, DATA going out: ACK only */
};

/* An arrived message with no matching receive yet. */
struct tnbc_unexp {
	struct tnbc_list entry;
	struct tnbc_hdr hdr;
	fi_addr_t src_addr;
	struct tnbc_xpeer *peer;
	unsigned via; /* the transport it came by (tnbc_rx_ctx.via) */
	void *claim_ctx; /* set once FI_CLAIMed */
	size_t data_len;
	uint8_t data[]; /* eager payload or RTS iovecs */
};

/* A single-copy read its transport finishes later (tnbc_ep.reads): a
 * rendezvous receive's (rx), or an RMA direct read's (rx NULL: found
 * again by rma_id, for it may have failed meanwhile). */
struct tnbc_rread {
	struct tnbc_xread rd;
	struct tnbc_list entry;
	struct tnbc_ep *ep;
	struct tnbc_xfer *rx;
	uint64_t rma_id;
	struct tnbc_xpeer *peer;
	struct tnbc_hdr hdr;
	fi_addr_t src;
	size_t want;
};

/* A control packet (ACK/CTS) that found the peer's queue full. */
struct tnbc_ctrl {
	struct tnbc_list entry;
	struct tnbc_xpeer *peer;
	struct tnbc_hdr hdr;
	size_t len; /* payload (RMA responses) */
	uint8_t data[];
};

/* A zeroed transfer, and one given back (inline: one of each per
 * message received). */
#define TNBC_XFER_CACHE 64

static inline struct tnbc_xfer *tnbc_xfer_get(struct tnbc_ep *ep)
{
	struct tnbc_xfer *x = ep->xfer_free;

	tnbc_ep_assert_locked(ep);
	if (!x)
		return calloc(1, sizeof(*x));
	ep->xfer_free = (struct tnbc_xfer *)x->entry.next;
	ep->xfer_nfree--;
	memset(x, 0, offsetof(struct tnbc_xfer, iov));
	return x;
}

static inline void tnbc_xfer_put(struct tnbc_ep *ep, struct tnbc_xfer *xfer)
{
	tnbc_ep_assert_locked(ep);
	if (ep->xfer_nfree >= TNBC_XFER_CACHE) {
		free(xfer);
		return;
	}
	xfer->entry.next = (struct tnbc_list *)ep->xfer_free;
	ep->xfer_free = xfer;
	ep->xfer_nfree++;
}

void tnbc_xfer_cache_free(struct tnbc_ep *ep);
/* Frees a send, and what its transport holds for it (a rendezvous). */
void tnbc_tx_free(struct tnbc_xfer *tx);
/* The transfer no longer waits for the host's link (tnbc_link.h). */
void tnbc_tx_unlink(struct tnbc_xfer *tx);

/* Answers wait here by msg_id: add gives the id (-FI_ENOMEM). */
int tnbc_id_add(struct tnbc_id_table *t, struct tnbc_xfer *xfer, uint64_t *id);
struct tnbc_xfer *tnbc_id_find(struct tnbc_id_table *t, uint64_t id);
void tnbc_id_del(struct tnbc_id_table *t, uint64_t id);

/* Sends an answer (ACK, CTS, RMA response), or queues a copy of it when
 * the peer's queue is full. */
void tnbc_send_ctrl(struct tnbc_ep *ep, struct tnbc_xpeer *peer,
		    const struct tnbc_hdr *hdr, const void *data, size_t len);
/* Queues tx, by its priority, to go out as kind says. */
void tnbc_tx_enqueue(struct tnbc_ep *ep, struct tnbc_xfer *tx,
		     const struct tnbc_tx_kind *kind);
void tnbc_tx_dequeue(struct tnbc_ep *ep, struct tnbc_xfer *tx);
/* Whether an operation of this priority may go out ahead of the queue:
 * only when nothing queued has the same or a higher priority. */
static inline bool tnbc_tx_may_bypass(struct tnbc_ep *ep, uint8_t prio)
{
	tnbc_ep_assert_locked(ep);
	return tnbc_list_empty(&ep->tx_queue) ||
	       tnbc_container_of(ep->tx_queue.next, struct tnbc_xfer, entry)
			       ->prio < prio;
}

/* One pass over the control and transmit queues: how many went (app:
 * an application thread makes it, and each send says it is alive). */
int tnbc_tx_queue_progress(struct tnbc_ep *ep, bool app);

/* Counts and reports a packet that fits no transfer. */
void tnbc_stray(struct tnbc_ep *ep, const char *what);
/* The peer a packet's source names, through the transport the packet
 * came by (tnbc_rx_ctx.via, tnbc_unexp.via). */
int tnbc_ep_src_peer(struct tnbc_ep *ep, unsigned via,
		     const struct tnbc_name *src, struct tnbc_xpeer **peer);
int tnbc_check_iov(const struct iovec *iov, size_t count);

#endif /* TNBC_XFER_H */
