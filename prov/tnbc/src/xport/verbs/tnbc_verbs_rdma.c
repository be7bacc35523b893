/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The verbs transport's single-copy reads: RDMA read for rendezvous and
 * large RMA reads (the transport interface's pull), and the exposure of
 * a sender's buffers to its peers' reads (expose).
 *
 * A read registers its local buffers (through the registration cache),
 * waits in order on its peer until the domain's queue pair to it is up
 * and has room, and is posted there.  Its completions come on the
 * domain's send completion queue; whoever reaps them (tnbc_verbs_reap)
 * hands the ended read to its endpoint, whose next poll calls done.
 * Locks: peer->lock > xdom->slock > xep->lock, as for sends, and
 * xdom->slock > xdom->lock (a hold notice).
 */
#include "tnbc_verbs.h"

void tnbc_verbs_read_free(struct tnbc_verbs_read *r)
{
	for (size_t i = 0; i < r->nmr; i++)
		if (r->mr[i])
			tnbc_verbs_mr_put(r->xdom->mrc, r->mr[i]);
	free(r);
}

/* One of a read's requests came back (xdom->slock held); true when that
 * ended the read and its endpoint must be polled. */
bool tnbc_verbs_read_wc(struct tnbc_xdom *xdom, const struct ibv_wc *wc)
{
	struct tnbc_verbs_read *r = (void *)(uintptr_t)wc->wr_id;

	atomic_fetch_sub(&r->peer->inflight, 1);
	atomic_fetch_sub(&xdom->rwrs, 1);
	if (wc->status != IBV_WC_SUCCESS && r->status >= 0) {
		/* a bad key or a dead peer: the QP is broken either way */
		r->status = wc->status == IBV_WC_WR_FLUSH_ERR ||
					    wc->status == IBV_WC_RETRY_EXC_ERR
				    ? -FI_EHOSTUNREACH
				    : -FI_EIO;
		tnbc_verbs_peer_dead(r->peer, ibv_wc_status_str(wc->status));
	}
	if (--r->wrs)
		return false;
	if (r->prev)
		r->prev->next = r->next;
	else
		xdom->reads = r->next;
	if (r->next)
		r->next->prev = r->prev;
	if (!r->xep) {
		tnbc_verbs_read_free(r);
		return false;
	}
	atomic_fetch_sub(&r->xep->reads, 1);
	pthread_mutex_lock(&r->xep->lock);
	r->next = r->xep->rdone;
	r->xep->rdone = r;
	pthread_mutex_unlock(&r->xep->lock);
	return true;
}

/* Registers the local buffers of a read; false when the device refuses
 * one (too much pinned memory): the peer streams it then. */
static bool tnbc_verbs_read_reg(struct tnbc_xdom *xdom,
				struct tnbc_verbs_read *r,
				const struct iovec *local, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		if (!local[i].iov_len) {
			r->mr[r->nmr++] = NULL;
			continue;
		}
		r->mr[r->nmr] = tnbc_verbs_mr_get(xdom->mrc, local[i].iov_base,
						  local[i].iov_len,
						  IBV_ACCESS_LOCAL_WRITE);
		if (!r->mr[r->nmr]) {
			FI_INFO(&tnbc_prov, FI_LOG_EP_DATA,
				"verbs: cannot register %zu bytes to read "
				"into: %s\n",
				local[i].iov_len, strerror(errno));
			return false;
		}
		r->nmr++;
	}
	return true;
}

/* Builds the read's requests: one per piece where a local and a remote
 * region overlap.  Returns how many, or 0 when more than max. */
static int tnbc_verbs_read_plan(struct tnbc_verbs_read *r,
				struct ibv_send_wr *wr, struct ibv_sge *sge,
				int max)
{
	size_t li = 0, ri = 0, loff = 0, roff = 0;
	int n = 0;

	while (li < r->lcount && ri < r->rcount) {
		size_t lleft = r->local[li].iov_len - loff;
		size_t rleft = r->remote[ri].len - roff;
		size_t len = lleft < rleft ? lleft : rleft;

		if (!lleft) {
			li++, loff = 0;
			continue;
		}
		if (!rleft) {
			ri++, roff = 0;
			continue;
		}
		if (n == max || len > UINT32_MAX)
			return 0;
		sge[n].addr = (uintptr_t)r->local[li].iov_base + loff;
		sge[n].length = (uint32_t)len;
		sge[n].lkey = r->mr[li]->mr->lkey;
		memset(&wr[n], 0, sizeof(wr[n]));
		wr[n].wr_id = (uintptr_t)r;
		wr[n].sg_list = &sge[n];
		wr[n].num_sge = 1;
		wr[n].opcode = IBV_WR_RDMA_READ;
		wr[n].send_flags = IBV_SEND_SIGNALED;
		wr[n].wr.rdma.remote_addr = r->remote[ri].addr + roff;
		wr[n].wr.rdma.rkey = (uint32_t)r->remote[ri].key;
		if (n)
			wr[n - 1].next = &wr[n];
		loff += len;
		roff += len;
		n++;
	}
	return n;
}

/* Ends a read that never went (xdom->slock held); true when its
 * endpoint's poll is to call done. */
static bool tnbc_verbs_read_fail(struct tnbc_xdom *xdom,
				 struct tnbc_verbs_read *r, ssize_t err)
{
	struct ibv_wc wc = {.wr_id = (uintptr_t)r,
			    .status = IBV_WC_GENERAL_ERR};

	r->status = err;
	r->wrs = 1;
	/* as if it was out */
	atomic_fetch_add(&r->peer->inflight, 1);
	atomic_fetch_add(&xdom->rwrs, 1);
	return tnbc_verbs_read_wc(xdom, &wc);
}

/* Posts a read; peer->lock held, the peer up.  -FI_EAGAIN: no room in
 * the queue pair now (a completion makes some). */
static int tnbc_verbs_read_post(struct tnbc_xpeer *p, struct tnbc_verbs_read *r)
{
	struct ibv_send_wr wr[TNBC_VERBS_PEER_SENDS], *bad;
	struct ibv_sge sge[TNBC_VERBS_PEER_SENDS];
	struct tnbc_xdom *xdom = p->xdom;
	int n = tnbc_verbs_read_plan(r, wr, sge, TNBC_VERBS_PEER_SENDS);
	unsigned posted;
	bool kick;
	int ret;

	if (atomic_load(&p->inflight) + (unsigned)n > p->max_send)
		goto full;
	if (atomic_fetch_add(&xdom->rwrs, (unsigned)n) + (unsigned)n >
	    TNBC_VERBS_READ_WRS) {
		atomic_fetch_sub(&xdom->rwrs, (unsigned)n);
		goto full;
	}
	pthread_mutex_lock(&xdom->slock);
	r->wrs = (unsigned)n;
	pthread_mutex_unlock(&xdom->slock);
	atomic_fetch_add(&p->inflight, (unsigned)n);
	ret = ibv_post_send(p->id->qp, wr, &bad);
	if (!ret) {
		/* the waker hears of the completion if nobody polls */
		ibv_req_notify_cq(xdom->scq, 0);
		return 0;
	}
	/* the requests before bad went, and end the read, failed */
	posted = (unsigned)(bad - wr);
	FI_INFO(&tnbc_prov, FI_LOG_EP_DATA, "verbs: RDMA read not posted: %s\n",
		strerror(ret));
	tnbc_verbs_peer_dead(p, strerror(ret));
	pthread_mutex_lock(&xdom->slock);
	atomic_fetch_sub(&p->inflight, (unsigned)n - posted);
	atomic_fetch_sub(&xdom->rwrs, (unsigned)n - posted);
	/* some of those that went may have completed already */
	r->wrs -= (unsigned)n - posted;
	r->status = -FI_EHOSTUNREACH;
	kick = !r->wrs && tnbc_verbs_read_fail(xdom, r, -FI_EHOSTUNREACH);
	pthread_mutex_unlock(&xdom->slock);
	if (kick)
		xdom->kick.kick(xdom->kick.arg);
	return 0;
full:
	/* a completion wakes the waker, which posts it (flush_all) */
	ibv_req_notify_cq(xdom->scq, 0);
	return -FI_EAGAIN;
}

/* Posts the reads that waited for the connection, or, the peer dead,
 * ends them; peer->lock held. */
void tnbc_verbs_reads_go(struct tnbc_xpeer *p)
{
	struct tnbc_xdom *xdom = p->xdom;
	bool kick = false;

	while (p->rwait) {
		struct tnbc_verbs_read *r = p->rwait;
		/* once posted or failed, r may end and be freed at once */
		struct tnbc_verbs_read *next = r->wnext;

		if (!atomic_load(&p->dead)) {
			if (p->state != TNBC_VERBS_UP ||
			    tnbc_verbs_read_post(p, r))
				break;
		} else {
			pthread_mutex_lock(&xdom->slock);
			kick |= tnbc_verbs_read_fail(xdom, r, -FI_EHOSTUNREACH);
			pthread_mutex_unlock(&xdom->slock);
		}
		p->rwait = next;
		if (!p->rwait)
			p->rwait_tail = &p->rwait;
	}
	if (kick)
		xdom->kick.kick(xdom->kick.arg);
}

/* Reads with RDMA read over this domain's queue pair to the peer; the
 * completion comes back on the send completion queue (tnbc_verbs_reap),
 * and the endpoint's next poll calls done.  Before that queue pair is
 * up, or while it is full, the read waits for it in order.  Keys the
 * peer did not give, or memory the device will not register, make the
 * peer stream it instead. */
ssize_t tnbc_verbs_pull(struct tnbc_xep *xep, struct tnbc_xpeer *p,
			const struct iovec *local, size_t lcount,
			const struct tnbc_xrmem *remote, size_t rcount,
			struct tnbc_xread *rd)
{
	struct ibv_send_wr wr[TNBC_VERBS_PEER_SENDS];
	struct ibv_sge sge[TNBC_VERBS_PEER_SENDS];
	struct tnbc_xdom *xdom = xep->xdom;
	struct tnbc_verbs_read *r;
	int ret;

	if (!tnbc_env.cma || !rd || !xdom->rd_atom || !rcount ||
	    lcount > TNBC_PULL_IOV_MAX || rcount > TNBC_PULL_IOV_MAX)
		return -FI_ENOSYS;
	for (size_t i = 0; i < rcount; i++)
		if (!TNBC_VERBS_KEY_OK(remote[i].key))
			return -FI_ENOSYS;
	if (atomic_load(&p->dead))
		return -FI_EHOSTUNREACH;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -FI_ENOSYS;
	r->xep = xep;
	r->rd = rd;
	r->xdom = xdom;
	r->peer = p;
	r->status = (ssize_t)tnbc_iov_len(local, lcount);
	r->lcount = lcount;
	r->rcount = rcount;
	memcpy(r->local, local, lcount * sizeof(*local));
	memcpy(r->remote, remote, rcount * sizeof(*remote));
	if (!tnbc_verbs_read_reg(xdom, r, local, lcount) ||
	    !tnbc_verbs_read_plan(r, wr, sge, TNBC_VERBS_PEER_SENDS)) {
		tnbc_verbs_read_free(r);
		return -FI_ENOSYS;
	}
	atomic_fetch_add(&xep->reads, 1);
	pthread_mutex_lock(&xdom->slock);
	r->next = xdom->reads;
	if (r->next)
		r->next->prev = r;
	xdom->reads = r;
	pthread_mutex_unlock(&xdom->slock);

	pthread_mutex_lock(&p->lock);
	if (p->state == TNBC_VERBS_IDLE) {
		ret = tnbc_verbs_connect(p);
		if (ret)
			tnbc_verbs_peer_dead(p, fi_strerror(-ret));
	}
	*p->rwait_tail = r;
	p->rwait_tail = &r->wnext;
	tnbc_verbs_reads_go(p);
	pthread_mutex_unlock(&p->lock);
	return -FI_EINPROGRESS;
}

/* Calls done for the reads that ended; the consumer's. */
void tnbc_verbs_reads_end(struct tnbc_xep *xep)
{
	struct tnbc_verbs_read *r;

	if (atomic_load_explicit(&xep->reads, memory_order_relaxed))
		tnbc_verbs_reap(xep->xdom, false);
	if (!atomic_load_explicit(&xep->rdone, memory_order_relaxed))
		return;
	pthread_mutex_lock(&xep->lock);
	r = xep->rdone;
	xep->rdone = NULL;
	pthread_mutex_unlock(&xep->lock);
	while (r) {
		struct tnbc_verbs_read *next = r->next;
		struct tnbc_xread *rd = r->rd;
		ssize_t st = r->status;

		tnbc_verbs_read_free(r);
		rd->done(rd, st);
		r = next;
	}
}

/* The peer may read these regions until unexpose. */
int tnbc_verbs_expose(struct tnbc_xpeer *p, const struct iovec *iov,
		      size_t count, uint64_t *keys, void **reg)
{
	struct tnbc_verbs_exposed *x =
		malloc(sizeof(*x) + count * sizeof(x->mr[0]));

	if (!x)
		return -FI_ENOMEM;
	x->nmr = 0;
	for (size_t i = 0; i < count; i++) {
		struct tnbc_verbs_mr *mr = NULL;

		if (iov[i].iov_len) {
			mr = tnbc_verbs_mr_get(p->xdom->mrc, iov[i].iov_base,
					       iov[i].iov_len,
					       IBV_ACCESS_REMOTE_READ);
			if (!mr) {
				FI_INFO(&tnbc_prov, FI_LOG_EP_DATA,
					"verbs: cannot register %zu bytes "
					"for a peer to read: %s\n",
					iov[i].iov_len, strerror(errno));
				tnbc_verbs_unexpose(p, x);
				return -FI_ENOMEM;
			}
		}
		x->mr[x->nmr++] = mr;
		keys[i] = mr ? TNBC_VERBS_KEY(mr->mr->rkey) : TNBC_VERBS_KEY(0);
	}
	*reg = x;
	return 0;
}

void tnbc_verbs_unexpose(struct tnbc_xpeer *p, void *reg)
{
	struct tnbc_verbs_exposed *x = reg;

	for (size_t i = 0; i < x->nmr; i++)
		if (x->mr[i])
			tnbc_verbs_mr_put(p->xdom->mrc, x->mr[i]);
	free(x);
}

int tnbc_verbs_notice_recv(struct tnbc_xdom *xdom)
{
	struct ibv_recv_wr wr = {.wr_id = TNBC_VERBS_WR_NOTICE}, *bad;

	return ibv_post_srq_recv(xdom->nsrq, &wr, &bad) ? -FI_EIO : 0;
}

/* A hold notice came back on one of our queue pairs: it sets that
 * peer's hold.  A queue pair carries nothing but what its peer endpoint
 * sends, so the notice needs no name.  Under slock, so that two
 * notices for one peer take effect in the order they came; true when
 * the peer lets us go. */
static bool tnbc_verbs_notice(struct tnbc_xdom *xdom, const struct ibv_wc *wc)
{
	uint32_t imm = ntohl(wc->imm_data);
	bool on = (imm & TNBC_VERBS_HOLD_ON) != 0, let_go = false;

	if (wc->status != IBV_WC_SUCCESS || !(wc->wc_flags & IBV_WC_WITH_IMM) ||
	    TNBC_VERBS_KIND(imm) != TNBC_VERBS_HOLD)
		return false;
	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xpeer *p = xdom->peers; p; p = p->next) {
		if (atomic_load(&p->qpn) != wc->qp_num)
			continue;
		if (atomic_exchange(&p->held, on) != on) {
			if (on)
				atomic_fetch_add(&xdom->held_peers, 1);
			else
				atomic_fetch_sub(&xdom->held_peers, 1);
			let_go = !on;
		}
		break;
	}
	pthread_mutex_unlock(&xdom->lock);
	return let_go;
}

/* Takes back the send buffers of completed sends; a send that failed
 * (the peer stopped answering, or its QP broke) makes its peer dead. */
void tnbc_verbs_reap(struct tnbc_xdom *xdom, bool wait)
{
	struct ibv_wc wc[32];
	bool kick = false, let_go = false;
	uint64_t one = 1;
	int n;

	if (wait)
		pthread_mutex_lock(&xdom->slock);
	else if (pthread_mutex_trylock(&xdom->slock))
		return;
	/* each completed notice receive is owed back; one that cannot be
	 * posted now is tried again at the next reap (peers' notices wait
	 * in their devices meanwhile) */
	for (;;) {
		while (xdom->nsrq_owed && !tnbc_verbs_notice_recv(xdom))
			xdom->nsrq_owed--;
		n = ibv_poll_cq(xdom->scq, 32, wc);
		if (n <= 0)
			break;
		for (int i = 0; i < n; i++) {
			uint32_t s = (uint32_t)wc[i].wr_id;
			struct tnbc_xpeer *p;

			if (wc[i].wr_id == TNBC_VERBS_WR_NOTICE) {
				let_go |= tnbc_verbs_notice(xdom, &wc[i]);
				xdom->nsrq_owed++;
				continue;
			}
			if (wc[i].wr_id >= TNBC_VERBS_SEND_BUFS) {
				kick |= tnbc_verbs_read_wc(xdom, &wc[i]);
				continue;
			}
			p = xdom->sowner[s];
			xdom->sowner[s] = NULL;
			xdom->sfree[xdom->nsfree++] = s;
			if (!p)
				continue;
			atomic_fetch_sub(&p->inflight, 1);
			if (wc[i].status != IBV_WC_SUCCESS)
				tnbc_verbs_peer_dead(
					p, ibv_wc_status_str(wc[i].status));
		}
	}
	pthread_mutex_unlock(&xdom->slock);
	/* what waits may go: the backlogs (the waker posts them) and the
	 * core's (the engine, kicked) */
	if (let_go && write(xdom->notefd, &one, sizeof(one)) != sizeof(one))
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"verbs: the waker was not told\n");
	/* a read ended (its endpoint's poll finishes it), or a hold
	 * ended */
	if (kick || let_go)
		xdom->kick.kick(xdom->kick.arg);
}
