/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * FI_RMA and FI_ATOMIC: one-sided operations executed by the target's
 * engine.
 *
 * An operation is cut into chunks that each fit one packet (wire format
 * in tnbc_proto.h).  The initiator keeps at most TNBC_RMA_WINDOW chunks
 * of an operation in flight and completes it when every chunk has been
 * answered, so a completion always means the target memory was updated
 * (delivery complete), which is what MPI's flush semantics need.  The
 * target checks the key, the access rights and the range of every
 * chunk before it touches memory, and answers each one; all atomics of
 * a domain are applied under one lock, so atomic operations on the same
 * location from any number of peers serialise (fi_atomic(3) promises
 * atomicity only among fabric atomics).
 */
#include <stdlib.h>

#include "tnbc.h"
#include "tnbc_lock.h"
#include "tnbc_xfer.h"
#include "tnbc_xports.h"
#include "tnbc_frame.h"
#include "tnbc_rma.h"
#include "tnbc_alu.h"
#include "tnbc_comp.h"
#include "tnbc_attr.h"
#include "tnbc_mr.h"
#include "tnbc_av.h"

#define TNBC_RMA_WINDOW 16
/* Operations an endpoint keeps in flight before posting answers
 * -FI_EAGAIN: injected writes complete for the caller at once, and
 * without a bound a loop of them would only grow memory. */
#define TNBC_RMA_MAX_OPS 4096

static bool tnbc_rma_is_atomic(uint8_t kind)
{
	return kind >= TNBC_RMA_ATOMIC;
}

static enum tnbc_atomic_kind tnbc_rma_akind(uint8_t kind)
{
	return kind == TNBC_RMA_ATOMIC	? TNBC_ATOMIC_PLAIN
	       : kind == TNBC_RMA_FETCH ? TNBC_ATOMIC_FETCH
					: TNBC_ATOMIC_COMPARE;
}

/* Whether the initiator reads target memory back (FI_READ counters). */
static bool tnbc_rma_reads(uint8_t kind)
{
	return kind == TNBC_RMA_READ || kind == TNBC_RMA_FETCH ||
	       kind == TNBC_RMA_COMPARE;
}

/* ------------------------------------------------------------------ */
/* Arguments                                                            */

int tnbc_rma_args_msg(struct tnbc_rma_args *a, const struct fi_msg_rma *msg,
		      uint8_t kind, uint64_t flags)
{
	if (!msg || msg->iov_count > TNBC_IOV_LIMIT ||
	    msg->rma_iov_count > TNBC_IOV_LIMIT ||
	    (msg->iov_count && !msg->msg_iov) ||
	    (msg->rma_iov_count && !msg->rma_iov))
		return -FI_EINVAL;
	memset(a, 0, sizeof(*a));
	a->kind = kind;
	a->iov_count = msg->iov_count;
	if (msg->iov_count)
		memcpy(a->iov, msg->msg_iov,
		       msg->iov_count * sizeof(*msg->msg_iov));
	a->rma_count = msg->rma_iov_count;
	if (msg->rma_iov_count)
		memcpy(a->rma, msg->rma_iov,
		       msg->rma_iov_count * sizeof(*msg->rma_iov));
	a->addr = msg->addr;
	a->data = msg->data;
	a->context = msg->context;
	a->flags = flags;
	return 0;
}

static int tnbc_ioc_to_iov(struct iovec *out, size_t *out_count,
			   const struct fi_ioc *ioc, size_t count, size_t es)
{
	if (count > TNBC_IOV_LIMIT || (count && !ioc))
		return -FI_EINVAL;
	for (size_t i = 0; i < count; i++) {
		out[i].iov_base = ioc[i].addr;
		out[i].iov_len = ioc[i].count * es;
	}
	*out_count = count;
	return 0;
}

int tnbc_rma_args_atomic(struct tnbc_rma_args *a,
			 const struct fi_msg_atomic *msg,
			 const struct fi_ioc *res, size_t res_count,
			 const struct fi_ioc *cmp, size_t cmp_count,
			 uint8_t kind, uint64_t flags)
{
	size_t es;
	int ret;

	if (!msg || msg->rma_iov_count > TNBC_IOV_LIMIT ||
	    (msg->rma_iov_count && !msg->rma_iov))
		return -FI_EINVAL;
	es = tnbc_alu_size(msg->datatype);
	if (!es ||
	    !tnbc_alu_valid(tnbc_rma_akind(kind), msg->op, msg->datatype))
		return -FI_EOPNOTSUPP;
	memset(a, 0, sizeof(*a));
	a->kind = kind;
	a->op = msg->op;
	a->dt = msg->datatype;
	ret = tnbc_ioc_to_iov(a->iov, &a->iov_count, msg->msg_iov,
			      msg->iov_count, es);
	if (!ret)
		ret = tnbc_ioc_to_iov(a->res, &a->res_count, res, res_count,
				      es);
	if (!ret)
		ret = tnbc_ioc_to_iov(a->cmp, &a->cmp_count, cmp, cmp_count,
				      es);
	if (ret)
		return ret;
	a->rma_count = msg->rma_iov_count;
	for (size_t i = 0; i < msg->rma_iov_count; i++) {
		a->rma[i].addr = msg->rma_iov[i].addr;
		a->rma[i].len = msg->rma_iov[i].count * es;
		a->rma[i].key = msg->rma_iov[i].key;
	}
	a->addr = msg->addr;
	a->data = msg->data;
	a->context = msg->context;
	a->flags = flags;
	return 0;
}

static size_t tnbc_rma_total(const struct tnbc_rma_args *a)
{
	size_t len = 0;

	for (size_t i = 0; i < a->rma_count; i++)
		len += a->rma[i].len;
	return len;
}

/* Largest chunk of target memory one request/response pair can cover. */
static size_t tnbc_rma_chunk_max(const struct tnbc_rma_args *a, size_t pay)
{
	size_t room = pay - sizeof(struct tnbc_rma_req);
	size_t es;

	switch (a->kind) {
	case TNBC_RMA_WRITE:
		return room;
	case TNBC_RMA_READ:
		return pay;
	default:
		es = tnbc_alu_size(a->dt);
		if (a->kind == TNBC_RMA_COMPARE)
			room /= 2;
		return room / es * es;
	}
}

int tnbc_rma_check(struct tnbc_ep *ep, const struct tnbc_rma_args *a)
{
	uint64_t need = tnbc_rma_is_atomic(a->kind) ? FI_ATOMIC : FI_RMA;
	struct tnbc_xpeer *peer;
	size_t total;
	int ret;

	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (a->flags & ~(uint64_t)TNBC_RMA_FLAGS)
		return -FI_EBADFLAGS;
	need |= tnbc_rma_reads(a->kind) ? FI_READ : FI_WRITE;
	if ((ep->info->caps & need) != need)
		return -FI_EOPNOTSUPP;
	ret = tnbc_check_iov(a->iov, a->iov_count);
	if (!ret)
		ret = tnbc_check_iov(a->res, a->res_count);
	if (!ret)
		ret = tnbc_check_iov(a->cmp, a->cmp_count);
	if (ret)
		return ret;
	total = tnbc_rma_total(a);
	/* a fetching read has no operand */
	if (!(a->kind == TNBC_RMA_FETCH && a->op == FI_ATOMIC_READ) &&
	    tnbc_iov_len(a->iov, a->iov_count) != total)
		return -FI_EINVAL;
	if ((a->kind == TNBC_RMA_FETCH || a->kind == TNBC_RMA_COMPARE) &&
	    tnbc_iov_len(a->res, a->res_count) != total)
		return -FI_EINVAL;
	if (a->kind == TNBC_RMA_COMPARE &&
	    tnbc_iov_len(a->cmp, a->cmp_count) != total)
		return -FI_EINVAL;
	if ((a->flags & FI_REMOTE_CQ_DATA) && a->kind != TNBC_RMA_WRITE)
		return -FI_EINVAL;
	ret = tnbc_av_peer(ep->av, a->addr, &peer);
	if (ret)
		return ret == -FI_EINVAL ? -FI_EADDRNOTAVAIL : ret;
	if ((a->flags & FI_INJECT) &&
	    (a->kind != TNBC_RMA_WRITE && a->kind != TNBC_RMA_ATOMIC))
		return -FI_EINVAL;
	/* an injected operation is copied: any number of chunks will do */
	if ((a->flags & FI_INJECT) && total > tnbc_slot_payload())
		return -FI_EMSGSIZE;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Initiator                                                            */

static void tnbc_rma_report(struct tnbc_ep *ep, struct tnbc_xfer *tx)
{
	const struct tnbc_rma_args *a = tx->rma;
	bool reads = tnbc_rma_reads(a->kind);
	struct tnbc_cntr *cntr = reads ? ep->rd_cntr : ep->wr_cntr;
	uint64_t flags = (tnbc_rma_is_atomic(a->kind) ? FI_ATOMIC : FI_RMA) |
			 (reads ? FI_READ : FI_WRITE);
	int err = tx->rma_err;

	if (err) {
		if (ep->tx_cq)
			tnbc_cq_write_err(ep->tx_cq, tx->context, flags, 0,
					  NULL, 0, 0, 0, err, err,
					  FI_ADDR_NOTAVAIL);
		tnbc_count_completion(cntr, tx->flags, tx->comp_cntr, true);
		return;
	}
	if (ep->tx_cq && tnbc_cq_wanted(ep->tx_selective, tx->flags))
		tnbc_cq_write(ep->tx_cq, tx->context, flags, 0, NULL, 0, 0,
			      FI_ADDR_NOTAVAIL);
	tnbc_count_completion(cntr, tx->flags, tx->comp_cntr, false);
}

static bool tnbc_rma_issued(const struct tnbc_xfer *tx)
{
	return tx->rma_seg >= tx->rma->rma_count;
}

static void tnbc_rma_finish(struct tnbc_ep *ep, struct tnbc_xfer *tx)
{
	if (tx->rma_queued) {
		tnbc_tx_dequeue(ep, tx);
		tx->rma_queued = false;
	}
	tnbc_id_del(&ep->rma_ids, tx->hdr.msg_id);
	tnbc_rma_report(ep, tx);
	free(tx->inject_buf);
	free(tx->rma);
	free(tx);
}

void tnbc_rma_fail(struct tnbc_ep *ep, struct tnbc_xfer *tx, int err)
{
	tnbc_ep_assert_locked(ep);
	if (err < 0)
		err = -err;
	if (!tx->rma_err)
		tx->rma_err = err;
	/* stop issuing; answers still on their way find no operation */
	tx->rma_seg = tx->rma->rma_count;
	tnbc_rma_finish(ep, tx);
}

/* Whether segment i is the operation's last one on its key: a region's
 * counter counts an operation once, however many segments reach it. */
static bool tnbc_rma_key_done(const struct tnbc_rma_args *a, size_t i)
{
	for (size_t j = i + 1; j < a->rma_count; j++)
		if (a->rma[j].key == a->rma[i].key)
			return false;
	return true;
}

/* Whether the operation goes as one direct request: a read of more than
 * a packet.  Measured on shm (fi_rma_bw, 64 KiB to 8 MiB), a direct read
 * moves 1.4 to 2.8 times the bytes per second of chunks, a direct write
 * 0.6 to 0.9 times (chunks copy in and out on two cores at once): writes
 * stay chunks. */
static bool tnbc_rma_direct_ok(struct tnbc_ep *ep,
			       const struct tnbc_rma_args *a,
			       struct tnbc_xpeer *peer, size_t total)
{
	size_t pay = tnbc_max_payload(peer);

	return a->kind == TNBC_RMA_READ && !ep->rma_nodirect && tnbc_env.cma &&
	       total > pay && a->rma_count <= TNBC_IOV_LIMIT &&
	       sizeof(struct tnbc_rma_req) + sizeof(struct tnbc_rma_direct) +
			       a->rma_count * sizeof(struct tnbc_rma_seg) <=
		       pay;
}

/* The whole read as one request: the target's segments and keys. */
static int tnbc_rma_tx_direct(struct tnbc_ep *ep, struct tnbc_xfer *tx)
{
	struct tnbc_rma_args *a = tx->rma;
	struct tnbc_rma_req req = {.kind = a->kind,
				   .flags = TNBC_RMA_REQ_DIRECT};
	struct tnbc_rma_direct d = {.nseg = (uint32_t)a->rma_count};
	struct tnbc_rma_seg seg[TNBC_IOV_LIMIT];
	struct iovec iov[3];
	struct tnbc_hdr hdr;
	int ret;

	for (size_t i = 0; i < a->rma_count; i++) {
		seg[i].addr = a->rma[i].addr;
		seg[i].len = a->rma[i].len;
		seg[i].key = a->rma[i].key;
	}
	iov[0].iov_base = &req;
	iov[0].iov_len = sizeof(req);
	iov[1].iov_base = &d;
	iov[1].iov_len = sizeof(d);
	iov[2].iov_base = seg;
	iov[2].iov_len = d.nseg * sizeof(seg[0]);
	memset(&hdr, 0, sizeof(hdr));
	hdr.version = TNBC_PROTO_VERSION;
	hdr.type = TNBC_PKT_RMA_REQ;
	hdr.msg_id = tx->hdr.msg_id;
	hdr.size = tnbc_rma_total(a);
	hdr.src = ep->name;
	hdr.flags = TNBC_HDR_RMA_LAST;
	hdr.payload_len = (uint32_t)tnbc_iov_len(iov, 3);
	ret = tnbc_pkt_send(tx->peer, &hdr, iov, 3);
	if (ret)
		return ret;
	tx->rma_inflight = 1;
	tx->rma_seg = a->rma_count; /* all of it issued */
	tx->rma_loc_off = hdr.size;
	return 0;
}

/* The target cannot take a direct request: send the operation again, as
 * chunks (nothing of it moved). */
static void tnbc_rma_undirect(struct tnbc_ep *ep, struct tnbc_xfer *tx)
{
	struct tnbc_rma_args *a = tx->rma;

	ep->rma_nodirect = true;
	tx->rma_direct = false;
	tx->rma_inflight = 0;
	tx->rma_seg = 0;
	tx->rma_seg_off = 0;
	tx->rma_loc_off = 0;
	while (!tnbc_rma_issued(tx) && !a->rma[tx->rma_seg].len)
		tx->rma_seg++;
	if (!tx->rma_queued) {
		tnbc_tx_enqueue(ep, tx, &tnbc_rma_tx_kind);
		tx->rma_queued = true;
	}
}

int tnbc_rma_tx(struct tnbc_ep *ep, struct tnbc_xfer *tx)
{
	struct tnbc_rma_args *a = tx->rma;
	size_t max = tnbc_rma_chunk_max(a, tnbc_max_payload(tx->peer));
	size_t total = tnbc_rma_total(a);

	tnbc_ep_assert_locked(ep);
	if (tx->rma_direct)
		return tnbc_rma_issued(tx) ? 0 : tnbc_rma_tx_direct(ep, tx);
	while (!tnbc_rma_issued(tx) && tx->rma_inflight < TNBC_RMA_WINDOW) {
		const struct fi_rma_iov *seg = &a->rma[tx->rma_seg];
		struct iovec iov[1 + 2 * TNBC_IOV_LIMIT];
		struct tnbc_rma_req req = {
			.kind = a->kind,
			.op = (uint8_t)a->op,
			.datatype = (uint8_t)a->dt,
		};
		struct tnbc_hdr hdr;
		size_t len = seg->len - tx->rma_seg_off, n = 1, plen;
		bool last;
		int ret;

		if (len > max)
			len = max;
		last = tx->rma_loc_off + len == total;
		memset(&hdr, 0, sizeof(hdr));
		hdr.version = TNBC_PROTO_VERSION;
		hdr.type = TNBC_PKT_RMA_REQ;
		hdr.msg_id = tx->hdr.msg_id;
		hdr.token = tx->rma_loc_off;
		hdr.tag = seg->key;
		hdr.offset = seg->addr + tx->rma_seg_off;
		hdr.size = len;
		hdr.src = ep->name;
		if (last)
			hdr.flags |= TNBC_HDR_RMA_LAST;
		if (tx->rma_seg_off + len == seg->len &&
		    tnbc_rma_key_done(a, tx->rma_seg))
			hdr.flags |= TNBC_HDR_RMA_SEG_END;
		if (last && (a->flags & FI_REMOTE_CQ_DATA)) {
			hdr.flags |= TNBC_HDR_CQ_DATA;
			hdr.cq_data = a->data;
		}
		iov[0].iov_base = &req;
		iov[0].iov_len = sizeof(req);
		plen = sizeof(req);
		if (a->kind != TNBC_RMA_READ && a->iov_count) {
			n += tnbc_iov_slice(a->iov, a->iov_count,
					    tx->rma_loc_off, len, iov + n,
					    TNBC_IOV_LIMIT);
			plen += len;
		}
		if (a->kind == TNBC_RMA_COMPARE) {
			n += tnbc_iov_slice(a->cmp, a->cmp_count,
					    tx->rma_loc_off, len, iov + n,
					    TNBC_IOV_LIMIT);
			plen += len;
		}
		hdr.payload_len = (uint32_t)plen;
		ret = tnbc_pkt_send(tx->peer, &hdr, iov, n);
		if (ret)
			return ret;
		tx->rma_inflight++;
		tx->rma_loc_off += len;
		tx->rma_seg_off += len;
		if (tx->rma_seg_off == seg->len) {
			tx->rma_seg++;
			tx->rma_seg_off = 0;
		}
		/* zero-length segments cover nothing and send nothing */
		while (!tnbc_rma_issued(tx) && !a->rma[tx->rma_seg].len)
			tx->rma_seg++;
	}
	return 0;
}

/* All chunks out, or the window full: responses complete it or queue
 * it again. */
static void tnbc_rma_tx_done(struct tnbc_ep *ep, struct tnbc_xfer *tx, int ret)
{
	tnbc_tx_dequeue(ep, tx);
	tx->rma_queued = false;
	if (ret)
		tnbc_rma_fail(ep, tx, ret);
}

const struct tnbc_tx_kind tnbc_rma_tx_kind = {
	.go = tnbc_rma_tx,
	.done = tnbc_rma_tx_done,
};

ssize_t tnbc_rma_start(struct tnbc_ep *ep, const struct tnbc_rma_args *a,
		       const struct tnbc_opx *x)
{
	struct tnbc_xpeer *peer;
	struct tnbc_xfer *tx;
	size_t total;
	int ret;

	/* checked when posted, but a triggered operation starts later:
	 * its address may have left the AV since */
	ret = tnbc_av_peer(ep->av, a->addr, &peer);
	if (ret)
		return ret == -FI_EINVAL ? -FI_EADDRNOTAVAIL : ret;
	tx = calloc(1, sizeof(*tx));
	if (!tx)
		return -FI_EAGAIN;
	tx->rma = malloc(sizeof(*tx->rma));
	if (!tx->rma)
		goto err_tx;
	*tx->rma = *a;
	tx->context = a->context;
	tx->flags = a->flags;
	tx->prio = x ? x->prio : (uint8_t)atomic_load(&ep->prio);
	tx->comp_cntr = x ? x->comp_cntr : NULL;
	tx->peer = peer;
	tx->peer_name = tnbc_av_get(ep->av, a->addr)->name;
	total = tnbc_rma_total(a);
	if ((a->flags & FI_INJECT) && total) {
		/* the caller may reuse the buffer at once */
		tx->inject_buf = malloc(total);
		if (!tx->inject_buf)
			goto err_rma;
		tnbc_copy_from_iov(tx->inject_buf, a->iov, a->iov_count, 0,
				   total);
		tx->rma->iov[0].iov_base = tx->inject_buf;
		tx->rma->iov[0].iov_len = total;
		tx->rma->iov_count = 1;
	}
	/* Zero-length segments move nothing, but an operation of length 0
	 * still reaches the target: its key is checked, and remote CQ data
	 * and RMA events are delivered. */
	while (total && !tnbc_rma_issued(tx) && !a->rma[tx->rma_seg].len)
		tx->rma_seg++;

	tnbc_ep_lock(ep);
	tx->rma_direct = tnbc_rma_direct_ok(ep, a, peer, total);
	if (ep->rma_ids.used >= TNBC_RMA_MAX_OPS) {
		tnbc_ep_unlock(ep);
		free(tx->inject_buf);
		goto err_rma; /* -FI_EAGAIN: progress first */
	}
	ret = tnbc_id_add(&ep->rma_ids, tx, &tx->hdr.msg_id);
	if (ret) {
		tnbc_ep_unlock(ep);
		free(tx->inject_buf);
		goto err_rma;
	}
	tnbc_ep_mark_work(ep);
	if (tnbc_rma_issued(tx)) {
		/* nothing to move: complete at once */
		tnbc_rma_finish(ep, tx);
		goto out;
	}
	ret = tnbc_tx_may_bypass(ep, tx->prio) ? tnbc_rma_tx(ep, tx)
					       : -FI_EAGAIN;
	if (ret && ret != -FI_EAGAIN) {
		tnbc_rma_fail(ep, tx, ret);
		goto out;
	}
	if (ret == -FI_EAGAIN) {
		tnbc_tx_enqueue(ep, tx, &tnbc_rma_tx_kind);
		tx->rma_queued = true;
	}
out:
	tnbc_ep_unlock(ep);
	return 0;

err_rma:
	free(tx->rma);
err_tx:
	free(tx);
	return -FI_EAGAIN;
}

/* A direct read ended: got bytes of total, or a negative fi_errno. */
static void tnbc_rma_direct_end(struct tnbc_ep *ep, struct tnbc_xfer *tx,
				size_t total, ssize_t got)
{
	if (got == -FI_EPERM || got == -FI_ENOSYS) {
		tnbc_rma_undirect(ep, tx);
		return;
	}
	if (got != (ssize_t)total) {
		tnbc_rma_fail(ep, tx,
			      got == -FI_EHOSTUNREACH ? FI_EHOSTUNREACH
						      : FI_EIO);
		return;
	}
	atomic_fetch_add_explicit(&ep->domain->engine.rma_direct, 1,
				  memory_order_relaxed);
	tnbc_rma_finish(ep, tx);
}

static void tnbc_rma_read_done(struct tnbc_xread *rd, ssize_t n)
{
	struct tnbc_rread *r = tnbc_container_of(rd, struct tnbc_rread, rd);
	struct tnbc_xfer *tx = tnbc_id_find(&r->ep->rma_ids, r->rma_id);

	tnbc_list_remove(&r->entry);
	/* gone: failed meanwhile (its peer died) */
	if (tx && tx->rma_direct)
		tnbc_rma_direct_end(r->ep, tx, r->want, n);
	free(r);
}

/* The answer to a direct request: where to read, or FI_ENOSYS: send it
 * as chunks. */
static void tnbc_rma_resp_direct(struct tnbc_ep *ep, struct tnbc_xfer *tx,
				 const struct tnbc_hdr *hdr,
				 const void *payload)
{
	struct tnbc_rma_args *a = tx->rma;
	struct tnbc_xrmem remote[TNBC_PULL_IOV_MAX];
	size_t rc = hdr->payload_len / sizeof(remote[0]), total = 0;
	struct tnbc_rread *r;
	ssize_t got;

	tx->rma_inflight = 0;
	if (hdr->size == FI_ENOSYS) {
		tnbc_rma_undirect(ep, tx);
		return;
	}
	if (hdr->size) {
		tnbc_rma_fail(ep, tx, (int)hdr->size);
		return;
	}
	if (!rc || rc > TNBC_PULL_IOV_MAX ||
	    rc * sizeof(remote[0]) != hdr->payload_len) {
		tnbc_rma_fail(ep, tx, FI_EIO);
		return;
	}
	/* copied once: the peer may still write its packet */
	memcpy(remote, payload, hdr->payload_len);
	for (size_t i = 0; i < rc; i++)
		total += remote[i].len;
	if (total != tnbc_rma_total(a)) {
		tnbc_rma_fail(ep, tx, FI_EIO);
		return;
	}
	/* a read that goes on (RDMA) ends in a later poll; keys the target
	 * could not give (0) make such a transport answer -FI_ENOSYS, and
	 * the read goes as chunks */
	if ((tnbc_xpeer_ops(tx->peer)->flags & TNBC_XPORT_PULL_LATER) &&
	    (r = malloc(sizeof(*r)))) {
		r->rd.done = tnbc_rma_read_done;
		r->ep = ep;
		r->rx = NULL;
		r->rma_id = tx->hdr.msg_id;
		r->peer = tx->peer;
		r->want = total;
		got = tnbc_ep_pull(ep, tx->peer, a->iov, a->iov_count, remote,
				   rc, &r->rd);
		if (got == -FI_EINPROGRESS) {
			tnbc_list_insert_tail(&r->entry, &ep->reads);
			return;
		}
		free(r);
	} else {
		got = tnbc_ep_pull(ep, tx->peer, a->iov, a->iov_count, remote,
				   rc, NULL);
	}
	tnbc_rma_direct_end(ep, tx, total, got);
}

void tnbc_rma_rx_resp(struct tnbc_ep *ep, const struct tnbc_hdr *hdr,
		      const void *payload)
{
	struct tnbc_xfer *tx = tnbc_id_find(&ep->rma_ids, hdr->msg_id);
	struct tnbc_rma_args *a;

	/* only the target answers, and only for chunks it was sent */
	if (!tx || !tx->rma_inflight ||
	    !tnbc_name_same(&hdr->src, &tx->peer_name)) {
		tnbc_stray(ep, "RMA response");
		return;
	}
	a = tx->rma;
	if (tx->rma_direct) {
		tnbc_rma_resp_direct(ep, tx, hdr, payload);
		return;
	}
	if (hdr->size && !tx->rma_err)
		tx->rma_err = (int)hdr->size;
	if (!hdr->size && hdr->payload_len) {
		if (a->kind == TNBC_RMA_READ)
			tnbc_copy_to_iov(a->iov, a->iov_count, hdr->token,
					 payload, hdr->payload_len);
		else if (a->kind != TNBC_RMA_WRITE)
			tnbc_copy_to_iov(a->res, a->res_count, hdr->token,
					 payload, hdr->payload_len);
	}
	tx->rma_inflight--;
	if (tx->rma_err && !tx->rma_inflight) {
		tnbc_rma_fail(ep, tx, tx->rma_err);
		return;
	}
	if (tnbc_rma_issued(tx)) {
		if (!tx->rma_inflight)
			tnbc_rma_finish(ep, tx);
		return;
	}
	if (!tx->rma_queued && !tx->rma_err) {
		/* the window has room again */
		tnbc_tx_enqueue(ep, tx, &tnbc_rma_tx_kind);
		tx->rma_queued = true;
	}
}

/* ------------------------------------------------------------------ */
/* Target                                                               */

static uint64_t tnbc_rma_access(const struct tnbc_rma_req *req)
{
	switch (req->kind) {
	case TNBC_RMA_WRITE:
	case TNBC_RMA_ATOMIC:
		return FI_REMOTE_WRITE;
	case TNBC_RMA_READ:
		return FI_REMOTE_READ;
	case TNBC_RMA_FETCH:
		if (req->op == FI_ATOMIC_READ)
			return FI_REMOTE_READ;
		return FI_REMOTE_READ | FI_REMOTE_WRITE;
	default:
		return FI_REMOTE_READ | FI_REMOTE_WRITE;
	}
}

/* Applies one request to the region; fills out/out_len for the answer.
 * Returns 0 or a positive fi_errno.  mr_lock held (read). */
static int tnbc_rma_apply(struct tnbc_ep *ep, struct tnbc_mr *mr,
			  const struct tnbc_rma_req *req, uint64_t off,
			  size_t len, const uint8_t *data, size_t data_len,
			  uint8_t *out, size_t *out_len)
{
	struct tnbc_domain *dom = ep->domain;
	size_t es, count;
	uint8_t *tmp;
	int ret;

	*out_len = 0;
	switch (req->kind) {
	case TNBC_RMA_WRITE:
		if (data_len != len)
			return FI_EINVAL;
		tnbc_copy_to_iov(mr->iov, mr->iov_count, off, data, len);
		return 0;
	case TNBC_RMA_READ:
		tnbc_copy_from_iov(out, mr->iov, mr->iov_count, off, len);
		*out_len = len;
		return 0;
	default:
		break;
	}
	es = tnbc_alu_size(req->datatype);
	if (!es || len % es ||
	    !tnbc_alu_valid(tnbc_rma_akind(req->kind), req->op, req->datatype))
		return FI_EOPNOTSUPP;
	count = len / es;
	if (data_len != (req->kind == TNBC_RMA_COMPARE ? 2 * len : len) &&
	    !(req->kind == TNBC_RMA_FETCH && req->op == FI_ATOMIC_READ &&
	      !data_len))
		return FI_EINVAL;
	tmp = malloc(len);
	if (!tmp)
		return FI_ENOMEM;
	pthread_mutex_lock(&dom->atomic_lock);
	tnbc_copy_from_iov(tmp, mr->iov, mr->iov_count, off, len);
	ret = tnbc_alu_apply(req->op, req->datatype, tmp,
			     data_len ? data : NULL,
			     req->kind == TNBC_RMA_COMPARE ? data + len : NULL,
			     req->kind == TNBC_RMA_ATOMIC ? NULL : out, count);
	if (!ret)
		tnbc_copy_to_iov(mr->iov, mr->iov_count, off, tmp, len);
	pthread_mutex_unlock(&dom->atomic_lock);
	free(tmp);
	if (ret)
		return FI_EOPNOTSUPP;
	if (req->kind != TNBC_RMA_ATOMIC)
		*out_len = len;
	return 0;
}

/* RMA events (fi_cntr(3), fi_mr(3)).  For the endpoint's counters,
 * operations that return target data (reads, fetching and compare
 * atomics) count as remote reads, the others as remote writes, as
 * libfabric's own providers count them.  A region's counter counts an
 * operation whose access (read, write or both) it was bound for. */
static void tnbc_rma_events(struct tnbc_ep *ep, struct tnbc_mr *mr,
			    const struct tnbc_hdr *hdr, uint8_t kind,
			    uint64_t access)
{
	uint64_t ev = tnbc_rma_reads(kind) ? FI_REMOTE_READ : FI_REMOTE_WRITE;
	bool last = hdr->flags & TNBC_HDR_RMA_LAST;

	if (last && (hdr->flags & TNBC_HDR_CQ_DATA) && ep->rx_cq)
		tnbc_cq_write(ep->rx_cq, NULL,
			      FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, 0,
			      NULL, hdr->cq_data, 0, FI_ADDR_NOTAVAIL);
	if (!(ep->info->caps & FI_RMA_EVENT))
		return;
	if (last) {
		struct tnbc_cntr *c =
			ev == FI_REMOTE_WRITE ? ep->rwr_cntr : ep->rrd_cntr;

		if (c)
			tnbc_cntr_inc(c);
	}
	if ((hdr->flags & TNBC_HDR_RMA_SEG_END) && mr->rma_cntr &&
	    (mr->cntr_flags & access))
		tnbc_cntr_inc(mr->rma_cntr);
}

/* The key of the piece of region mr at base for a single-copy read by
 * peer: the region's exposure through peer's transport, made on the
 * first such read and kept until the region closes; 0 where the
 * transport needs none, or refused.  mr_lock held (read). */
static uint64_t tnbc_mr_xkey(struct tnbc_domain *dom, struct tnbc_mr *mr,
			     struct tnbc_xpeer *peer, const void *base)
{
	const struct tnbc_xport_ops *ops = tnbc_xpeer_ops(peer);
	uintptr_t b = (uintptr_t)base;
	struct tnbc_mr_xexp *x;
	uint64_t key = 0;
	unsigned i = 0;

	if (!ops->expose)
		return 0;
	while (i + 1 < dom->nxp && dom->xp[i].ops != ops)
		i++;
	x = &mr->xexp[i];
	pthread_mutex_lock(&dom->mr_xlock);
	if (!x->peer) {
		x->peer = peer; /* tried: a refusal is not asked again */
		if (ops->expose(peer, mr->iov, mr->iov_count, x->keys,
				&x->reg)) {
			memset(x->keys, 0, sizeof(x->keys));
			x->reg = NULL;
		}
	}
	for (size_t k = 0; k < mr->iov_count; k++)
		if (b >= (uintptr_t)mr->iov[k].iov_base &&
		    b < (uintptr_t)mr->iov[k].iov_base + mr->iov[k].iov_len) {
			key = x->keys[k];
			break;
		}
	pthread_mutex_unlock(&dom->mr_xlock);
	return key;
}

/* Checks a direct request's segments against the regions, as the same
 * request in chunks would be, and builds the target memory they name in
 * mine, with the keys peer's transport reads them with.  mr_lock held
 * (read). */
static int tnbc_rma_direct_map(struct tnbc_ep *ep, struct tnbc_xpeer *peer,
			       uint64_t access, const struct tnbc_rma_seg *seg,
			       size_t nseg, struct iovec *mine, uint64_t *keys,
			       size_t *nmine, size_t *total)
{
	*nmine = 0;
	*total = 0;
	for (size_t i = 0; i < nseg; i++) {
		struct tnbc_mr *mr = tnbc_mr_find(ep->domain, seg[i].key);
		uint64_t off;
		size_t n;

		if (!mr)
			return FI_EKEYREJECTED;
		if ((mr->access & access) != access)
			return FI_EACCES;
		off = seg[i].addr - mr->base;
		if (seg[i].addr < mr->base || off > mr->len ||
		    seg[i].len > mr->len - off)
			return FI_EINVAL;
		n = tnbc_iov_slice(mr->iov, mr->iov_count, off, seg[i].len,
				   mine + *nmine, TNBC_PULL_IOV_MAX - *nmine);
		/* a region in more pieces than one read carries */
		if (tnbc_iov_len(mine + *nmine, n) != seg[i].len)
			return FI_ENOSYS;
		for (size_t j = *nmine; j < *nmine + n; j++)
			keys[j] = tnbc_mr_xkey(ep->domain, mr, peer,
					       mine[j].iov_base);
		*nmine += n;
		*total += seg[i].len;
	}
	return 0;
}

/* A direct read (TNBC_RMA_REQ_DIRECT, tnbc_proto.h): its segments
 * checked as the same read in chunks would be, and the target memory they
 * name put in *out for the initiator to read.  Returns 0 or a positive
 * fi_errno. */
static int tnbc_rma_rx_direct(struct tnbc_ep *ep, struct tnbc_xpeer *peer,
			      const struct tnbc_hdr *hdr,
			      const struct tnbc_rma_req *req, const uint8_t *p,
			      size_t plen, uint8_t **out, size_t *out_len)
{
	struct tnbc_rma_seg seg[TNBC_IOV_LIMIT];
	struct iovec mine[TNBC_PULL_IOV_MAX];
	uint64_t keys[TNBC_PULL_IOV_MAX];
	struct tnbc_rma_direct d;
	size_t nmine, total;
	int status;

	if (req->kind != TNBC_RMA_READ || plen < sizeof(d))
		return FI_EINVAL;
	memcpy(&d, p, sizeof(d));
	if (!d.nseg || d.nseg > TNBC_IOV_LIMIT || d.nloc ||
	    plen != sizeof(d) + d.nseg * sizeof(seg[0]))
		return FI_EINVAL;
	memcpy(seg, p + sizeof(d), d.nseg * sizeof(seg[0]));
	/* read events must follow the data, which only chunks carry */
	if (ep->info->caps & FI_RMA_EVENT)
		return FI_ENOSYS;
	pthread_rwlock_rdlock(&ep->domain->mr_lock);
	status = tnbc_rma_direct_map(ep, peer, FI_REMOTE_READ, seg, d.nseg,
				     mine, keys, &nmine, &total);
	pthread_rwlock_unlock(&ep->domain->mr_lock);
	if (!status && total != hdr->size)
		status = FI_EINVAL;
	if (status)
		return status;
	*out = malloc(nmine * sizeof(struct tnbc_rts_iov));
	if (!*out)
		return FI_ENOMEM;
	for (size_t i = 0; i < nmine; i++) {
		struct tnbc_rts_iov r = {
			.addr = (uint64_t)(uintptr_t)mine[i].iov_base,
			.len = mine[i].iov_len,
			.key = keys[i],
		};

		memcpy(*out + i * sizeof(r), &r, sizeof(r));
	}
	*out_len = nmine * sizeof(struct tnbc_rts_iov);
	return 0;
}

void tnbc_rma_rx_req(struct tnbc_ep *ep, unsigned via,
		     const struct tnbc_hdr *hdr, const void *payload)
{
	struct tnbc_domain *dom = ep->domain;
	struct tnbc_rma_req req;
	struct tnbc_xpeer *peer;
	struct tnbc_hdr rh;
	struct tnbc_mr *mr;
	uint8_t *out = NULL;
	size_t out_len = 0;
	uint64_t access, off;
	int status;

	if (tnbc_ep_src_peer(ep, via, &hdr->src, &peer)) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"RMA request from an unreachable peer dropped\n");
		return;
	}
	memset(&rh, 0, sizeof(rh));
	rh.version = TNBC_PROTO_VERSION;
	rh.type = TNBC_PKT_RMA_RESP;
	rh.msg_id = hdr->msg_id;
	rh.token = hdr->token;
	rh.src = ep->name;
	if (hdr->payload_len < sizeof(req)) {
		status = FI_EINVAL;
		goto answer;
	}
	memcpy(&req, payload, sizeof(req));
	access = tnbc_rma_access(&req);
	if (!(ep->info->caps &
	      (tnbc_rma_is_atomic(req.kind) ? FI_ATOMIC : FI_RMA)) ||
	    (ep->info->caps & access) != access) {
		status = FI_EOPNOTSUPP;
		goto answer;
	}
	if (req.flags & TNBC_RMA_REQ_DIRECT) {
		status = tnbc_rma_rx_direct(
			ep, peer, hdr, &req,
			(const uint8_t *)payload + sizeof(req),
			hdr->payload_len - sizeof(req), &out, &out_len);
		goto answer;
	}
	if (req.kind != TNBC_RMA_WRITE) {
		/* the answer must fit one packet (a hostile size must not
		 * make us queue an answer that can never be sent) */
		if (hdr->size > tnbc_max_payload(peer)) {
			status = FI_EMSGSIZE;
			goto answer;
		}
		out = malloc(hdr->size ? hdr->size : 1);
		if (!out) {
			status = FI_ENOMEM;
			goto answer;
		}
	}
	pthread_rwlock_rdlock(&dom->mr_lock);
	mr = tnbc_mr_find(dom, hdr->tag);
	if (!mr) {
		status = FI_EKEYREJECTED;
	} else if ((mr->access & access) != access) {
		status = FI_EACCES;
	} else {
		off = hdr->offset - mr->base;
		if (hdr->offset < mr->base || off > mr->len ||
		    hdr->size > mr->len - off)
			status = FI_EINVAL;
		else
			status = tnbc_rma_apply(
				ep, mr, &req, off, hdr->size,
				(const uint8_t *)payload + sizeof(req),
				hdr->payload_len - sizeof(req), out, &out_len);
		if (!status)
			tnbc_rma_events(ep, mr, hdr, req.kind, access);
	}
	pthread_rwlock_unlock(&dom->mr_lock);
answer:
	if (status) {
		FI_INFO(&tnbc_prov, FI_LOG_EP_DATA, "RMA request failed: %s\n",
			fi_strerror(status));
		out_len = 0;
	}
	rh.size = (uint64_t)status;
	rh.payload_len = (uint32_t)out_len;
	tnbc_send_ctrl(ep, peer, &rh, out, out_len);
	free(out);
}
