/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The verbs transport: endpoints reached through an RDMA device
 * (rdma-core's libibverbs, connections made with librdmacm).
 *
 * Every endpoint listens (an rdma_cm id, port space RDMA_PS_TCP) on an
 * IPv4 address of the domain's device, and receives into one shared
 * receive queue (SRQ) of registered buffers, each as large as the
 * largest packet.  A domain connects a reliable-connected queue pair
 * (RC QP) to a peer endpoint the first time it sends to it; that QP
 * carries every packet of the domain's endpoints to that peer (their
 * answers come on the peer domain's QP to them).  The connect request
 * names the endpoint it is for; the first message on the QP is a hello
 * with the domain's auth_key, then come introductions (where a source
 * endpoint listens, so that the receiver can answer it) and packets.
 * A message's kind travels in its immediate data.
 *
 * Sending copies the packet into one of the domain's registered send
 * buffers (or inlines it) and posts it; a send buffer comes back with
 * its completion.  The receiver's SRQ is the queue's room: a buffer
 * stays out of it while the protocol keeps its packet, and a sender
 * whose packet finds no buffer is held back by the device (RNR retry,
 * without limit), then runs out of send buffers and sees -FI_EAGAIN:
 * back pressure, never a drop.  A packet is offered straight from its
 * receive buffer.
 *
 * Holds: the SRQ is shared by every connection, so kept packets (no
 * room to buffer them, FI_TNBC_UNEXP_MAX) would, one sender flooding,
 * take every buffer and stop the others.  Once kept packets hold half
 * the buffers, the oldest are copied out and their buffers posted again
 * (at most the buffers' bytes in all, and TNBC_VERBS_SPILL_PER_BUF
 * packets per buffer).  A connection whose moved packets pass an eighth
 * of either, or whose packet finds no room to move, is held: the
 * consumer sends a hold notice (TNBC_VERBS_HOLD, no bytes) back on that
 * very queue pair, into the connecting domain's notice SRQ, and that
 * domain sends the endpoint no eager message or RTS (TNBC_XPKT_HOLDS)
 * until a notice lets it go, once fewer than a sixteenth are left.  Its
 * answers, and other connections, go on.  The notice needs no
 * connection of its own: one made when the hold begins took long
 * enough, on a loaded host, for the flood to take every move and so
 * every buffer (docs/provider-design.md).  Rendezvous
 * data and large RMA reads are read by the receiver with RDMA read
 * (tnbc_verbs_rdma.c), from buffers registered through a cache
 * (tnbc_verbs_mr.c).
 *
 * One thread per domain (the waker) sleeps in epoll_wait on the
 * domain's connection-manager channel and completion channel: it makes
 * and accepts connections, tears down what peers and consumers closed,
 * notices peers that died, and kicks the engine when a packet arrives
 * while it sleeps (sleep_begin arms each endpoint's completion queue).
 * The engine and application threads poll the completion queues
 * themselves, which costs no system call.
 *
 * Locks: peer->lock > xdom->slock > xep->lock > xdom->lock (an ended
 * read goes to its endpoint; a connection whose notice broke is ended),
 * and xdom->slock > xdom->lock (a notice came).  None is held across
 * a call into the core: a message
 * being offered is out of the stash, and the reference it holds keeps
 * its connection.  Connections and endpoints are destroyed by the waker
 * only, the only thread that reads connection events; a connection
 * that messages still name is freed by the last of them.
 */
#include "tnbc_verbs.h"

static struct ibv_context *tnbc_verbs_probe(struct rdma_event_channel *ch,
					    const struct tnbc_verbs_addr *a)
{
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
	struct ibv_context *ctx = NULL;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return NULL;
	tnbc_verbs_sockaddr(a, &sin);
	sin.sin_port = 0;
	if (!rdma_bind_addr(id, (struct sockaddr *)&sin))
		ctx = id->verbs;
	rdma_destroy_id(id);
	return ctx;
}

/* The domain's device and address: FI_TNBC_VERBS_IFACE (an IPv4
 * address, or an interface's name), else the first IPv4 address of an
 * interface that is up, not a loopback, and on an RDMA device. */
static int tnbc_verbs_pick(struct tnbc_xdom *xdom)
{
	const char *want = tnbc_env.verbs_iface;
	struct ifaddrs *ifs = NULL;
	struct tnbc_verbs_addr a = {.family = 4};

	if (want && *want && inet_pton(AF_INET, want, a.ip) == 1) {
		xdom->ctx = tnbc_verbs_probe(xdom->cmch, &a);
		xdom->addr = a;
		return xdom->ctx ? 0 : -FI_ENODEV;
	}
	if (getifaddrs(&ifs))
		return -errno;
	for (struct ifaddrs *it = ifs; it && !xdom->ctx; it = it->ifa_next) {
		if (!it->ifa_addr || !(it->ifa_flags & IFF_UP) ||
		    it->ifa_addr->sa_family != AF_INET)
			continue;
		if (want && *want ? strcmp(it->ifa_name, want) != 0
				  : (it->ifa_flags & IFF_LOOPBACK) != 0)
			continue;
		tnbc_verbs_from_sockaddr(it->ifa_addr, &a);
		a.port = 0;
		xdom->ctx = tnbc_verbs_probe(xdom->cmch, &a);
		if (xdom->ctx)
			xdom->addr = a;
	}
	freeifaddrs(ifs);
	return xdom->ctx ? 0 : -FI_ENODEV;
}

/* ------------------------------------------------------------------ */
/* Rings of received messages                                           */

static int tnbc_verbs_ring_init(struct tnbc_verbs_ring *r, size_t n)
{
	unsigned cap = 1;

	while (cap < n)
		cap <<= 1;
	r->e = calloc(cap, sizeof(*r->e));
	r->cap = cap;
	r->head = r->n = 0;
	return r->e ? 0 : -FI_ENOMEM;
}

static struct tnbc_verbs_rxe *tnbc_verbs_ring_at(struct tnbc_verbs_ring *r,
						 unsigned i)
{
	return &r->e[(r->head + i) & (r->cap - 1)];
}

static void tnbc_verbs_ring_push(struct tnbc_verbs_ring *r,
				 const struct tnbc_verbs_rxe *e)
{
	*tnbc_verbs_ring_at(r, r->n++) = *e;
}

static void tnbc_verbs_ring_push_front(struct tnbc_verbs_ring *r,
				       const struct tnbc_verbs_rxe *e)
{
	r->head = (r->head - 1) & (r->cap - 1);
	r->n++;
	r->e[r->head] = *e;
}

static void tnbc_verbs_ring_pop(struct tnbc_verbs_ring *r)
{
	r->head = (r->head + 1) & (r->cap - 1);
	r->n--;
}

/* ------------------------------------------------------------------ */
/* Receive buffers and connections (xep->lock held)                     */

static int tnbc_verbs_post_recv(struct tnbc_xep *xep, uint32_t buf)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(xep->bufs + (size_t)buf * xep->bsize),
		.length = (uint32_t)xep->bsize,
		.lkey = xep->mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = buf, .sg_list = &sge, .num_sge = 1};
	struct ibv_recv_wr *bad;

	return ibv_post_srq_recv(xep->srq, &wr, &bad) ? -FI_EIO : 0;
}

/* A moved packet was taken: connections whose moved packets were mostly
 * taken (and the room with them) are let go. */
static void tnbc_verbs_unspill(struct tnbc_xep *xep,
			       const struct tnbc_verbs_rxe *e)
{
	struct tnbc_verbs_conn *c = e->conn;

	free(e->copy);
	xep->spill_bytes -= e->len;
	xep->nspilled--;
	if (c) {
		c->spilled -= e->len < c->spilled ? e->len : c->spilled;
		c->spilled_pkts -= c->spilled_pkts != 0;
	}
	for (c = xep->conns; c; c = c->next)
		if (c->held &&
		    tnbc_xhold_over(c->spilled, xep->spill_bytes,
				    xep->spill_max) &&
		    tnbc_xhold_over(c->spilled_pkts, xep->nspilled,
				    xep->nbufs * TNBC_VERBS_SPILL_PER_BUF)) {
			c->held = false;
			xep->hold_dirty = true;
		}
}

/* Gives a message's buffer back to the SRQ (or frees its moved copy). */
static void tnbc_verbs_release(struct tnbc_xep *xep,
			       const struct tnbc_verbs_rxe *e)
{
	struct tnbc_verbs_conn *c = e->conn;

	if (e->copy)
		tnbc_verbs_unspill(xep, e);
	else if (tnbc_verbs_post_recv(xep, e->buf))
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"verbs: a receive buffer could not be posted again\n");
	if (c && !--c->refs && c->gone)
		free(c);
}

static struct tnbc_verbs_conn *tnbc_verbs_conn_find(struct tnbc_xep *xep,
						    uint32_t qpn)
{
	for (struct tnbc_verbs_conn *c = xep->conns; c; c = c->next)
		if (c->qpn == qpn && !c->gone)
			return c;
	return NULL;
}

static void tnbc_verbs_conn_bad(struct tnbc_xep *xep, struct tnbc_verbs_conn *c,
				const char *why);

/* Tells each connection whose hold changed, with a notice back on its
 * own queue pair: the connector cannot reach the queue pair's other
 * end in any other way sooner.  One notice in flight per queue pair
 * (its send queue holds one), TNBC_VERBS_NOTICES_OUT per endpoint; the
 * rest go as those complete (fill).  xep->lock held. */
static void tnbc_verbs_tell_holds_locked(struct tnbc_xep *xep)
{
	xep->hold_dirty = false;
	for (struct tnbc_verbs_conn *c = xep->conns; c; c = c->next) {
		struct ibv_send_wr wr = {0}, *bad;
		bool on = c->held;

		if (on == c->told || c->notice_out || c->mute || c->gone ||
		    c->bad || !c->hello)
			continue;
		if (xep->notices_out >= TNBC_VERBS_NOTICES_OUT) {
			xep->hold_dirty = true;
			break;
		}
		wr.wr_id = TNBC_VERBS_WR_NOTICE;
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.imm_data =
			htonl(TNBC_VERBS_HOLD | (on ? TNBC_VERBS_HOLD_ON : 0));
		if (ibv_post_send(c->id->qp, &wr, &bad)) {
			xep->hold_dirty = true; /* pending says so: a poll */
			continue;
		}
		c->told = on;
		c->notice_out = true;
		xep->notices_out++;
	}
}

static void tnbc_verbs_tell_holds(struct tnbc_xep *xep)
{
	pthread_mutex_lock(&xep->lock);
	tnbc_verbs_tell_holds_locked(xep);
	pthread_mutex_unlock(&xep->lock);
}

/* A hold notice left (or broke): the next may go.  xep->lock held. */
static void tnbc_verbs_notice_sent(struct tnbc_xep *xep,
				   const struct ibv_wc *wc)
{
	struct tnbc_verbs_conn *c = tnbc_verbs_conn_find(xep, wc->qp_num);

	/* one that ended took its notice's count with it */
	if (!c || !c->notice_out)
		return;
	c->notice_out = false;
	xep->notices_out--;
	if (wc->status != IBV_WC_SUCCESS) {
		/* the queue pair broke, and no event may ever say so: its
		 * peer, which may be held, learns it from the disconnect */
		c->mute = true;
		tnbc_verbs_conn_bad(xep, c, ibv_wc_status_str(wc->status));
	}
	xep->hold_dirty = true;
}

/* Moves what the completion queue holds into the stash; a notice that
 * completed lets the next go, whoever reads the queue (a poll may not
 * follow: the engine may find the endpoint idle).  xep->lock held. */
static void tnbc_verbs_fill(struct tnbc_xep *xep)
{
	struct ibv_wc wc[16];
	bool told = false;
	int n;

	while (xep->stash.n + 16 <= xep->stash.cap &&
	       (n = ibv_poll_cq(xep->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id == TNBC_VERBS_WR_NOTICE) {
				tnbc_verbs_notice_sent(xep, &wc[i]);
				told = true;
				continue;
			}
			struct tnbc_verbs_rxe e = {
				.buf = (uint32_t)wc[i].wr_id,
				.len = wc[i].byte_len,
				.imm = (wc[i].wc_flags & IBV_WC_WITH_IMM)
					       ? ntohl(wc[i].imm_data)
					       : 0,
				.status = wc[i].status,
				.conn = tnbc_verbs_conn_find(xep, wc[i].qp_num),
			};

			if (e.buf >= xep->nbufs)
				continue; /* not a receive of ours */
			if (e.conn)
				e.conn->refs++;
			tnbc_verbs_ring_push(&xep->stash, &e);
		}
	}
	if (told && xep->hold_dirty && !xep->closing)
		tnbc_verbs_tell_holds_locked(xep);
}

/* A connection the consumer refuses: its messages are dropped from now
 * on, and the waker disconnects it. */
static void tnbc_verbs_conn_bad(struct tnbc_xep *xep, struct tnbc_verbs_conn *c,
				const char *why)
{
	uint64_t one = 1;

	if (c->bad)
		return;
	FI_INFO(&tnbc_prov, FI_LOG_EP_DATA, "verbs: connection ended: %s\n",
		why);
	c->bad = true;
	pthread_mutex_lock(&xep->xdom->lock);
	c->ending = true;
	c->ending_next = xep->xdom->ending;
	xep->xdom->ending = c;
	pthread_mutex_unlock(&xep->xdom->lock);
	if (write(xep->xdom->notefd, &one, sizeof(one)) != sizeof(one))
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"verbs: the waker was not told\n");
}

/* Takes c off the list of connections to end; the waker only. */
static void tnbc_verbs_ending_drop(struct tnbc_xdom *xdom,
				   struct tnbc_verbs_conn *c)
{
	pthread_mutex_lock(&xdom->lock);
	if (c->ending) {
		for (struct tnbc_verbs_conn **it = &xdom->ending; *it;
		     it = &(*it)->ending_next)
			if (*it == c) {
				*it = c->ending_next;
				break;
			}
		c->ending = false;
	}
	pthread_mutex_unlock(&xdom->lock);
}

/* ------------------------------------------------------------------ */
/* Peers                                                                */

/* The route is known: the QP, then the connect request; peer->lock
 * held. */
static int tnbc_verbs_connect_qp(struct tnbc_xpeer *p)
{
	struct tnbc_xdom *xdom = p->xdom;
	struct tnbc_verbs_req *req = &p->hs_req;
	struct ibv_qp_init_attr qa = {
		.send_cq = xdom->scq,
		.recv_cq = xdom->scq,
		.srq = xdom->nsrq, /* hold notices come back */
		.cap = {.max_send_wr = TNBC_VERBS_PEER_SENDS,
			.max_send_sge = 1,
			.max_inline_data = TNBC_VERBS_INLINE},
		.qp_type = IBV_QPT_RC,
	};
	struct rdma_conn_param cp = {
		.private_data = req,
		.private_data_len = sizeof(*req),
		.retry_count = 7,
		.rnr_retry_count = 7, /* a full receiver: wait, never fail */
		.initiator_depth = xdom->rd_atom, /* our RDMA reads */
		.responder_resources = xdom->rd_atom,
	};
	uint8_t timeout;
	uint64_t us = tnbc_env.verbs_timeout_ms * 1000u / 8u;

	if (p->id->verbs != xdom->ctx)
		return -FI_EHOSTUNREACH; /* on another device */
	memset(req, 0, sizeof(*req));
	req->magic = TNBC_VERBS_MAGIC;
	req->version = TNBC_VERBS_VERSION;
	req->flags = xdom->key_len ? TNBC_VERBS_REQ_KEYED : 0;
	req->to = p->name;
	if (tnbc_random(req->nonce, sizeof(req->nonce)))
		return -FI_EIO;
	if (rdma_create_qp(p->id, xdom->pd, &qa)) {
		qa.cap.max_inline_data = 0;
		if (rdma_create_qp(p->id, xdom->pd, &qa))
			return -errno;
	}
	atomic_store(&p->qpn, p->id->qp->qp_num);
	p->max_send = qa.cap.max_send_wr < TNBC_VERBS_PEER_SENDS
			      ? qa.cap.max_send_wr
			      : TNBC_VERBS_PEER_SENDS;
	p->max_inline = qa.cap.max_inline_data;
	/* seven retries of an ack timeout of 4.096 us << timeout span
	 * about FI_TNBC_VERBS_TIMEOUT_MS */
	for (timeout = 1; timeout < 31 && (4ull << timeout) < us; timeout++)
		;
	rdma_set_option(p->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			&timeout, sizeof(timeout));
	if (rdma_connect(p->id, &cp))
		return -errno;
	return 0;
}

static void tnbc_verbs_addr_known(struct tnbc_xdom *xdom,
				  const struct tnbc_name *name,
				  const uint8_t *xaddr)
{
	const struct tnbc_verbs_addr *a = (const void *)xaddr;

	if (a->family == 4 && a->port)
		tnbc_net_book_pin(&xdom->book, name, a, sizeof(*a));
}

static int tnbc_verbs_peer_get(struct tnbc_xdom *xdom,
			       const struct tnbc_name *name,
			       const uint8_t *xaddr, struct tnbc_xpeer **out)
{
	const struct tnbc_verbs_addr *given = (const void *)xaddr;
	struct tnbc_verbs_addr a;
	struct tnbc_xpeer *p;

	if (!(name->xports & TNBC_XPORT_BIT(TNBC_XPORT_VERBS)) ||
	    (name->kind != TNBC_NAME_PID && name->kind != TNBC_NAME_SVC))
		return -FI_EINVAL;
	pthread_mutex_lock(&xdom->lock);
	for (p = xdom->peers; p; p = p->next)
		if (tnbc_name_same(&p->name, name))
			break;
	pthread_mutex_unlock(&xdom->lock);
	if (p) {
		*out = p;
		return 0;
	}
	if (given && given->family && given->port)
		a = *given;
	else if (!tnbc_net_book_get(&xdom->book, name, &a, sizeof(a)))
		return -FI_EHOSTUNREACH;
	if (a.family != 4 || !a.port)
		return -FI_EINVAL;
	if (tnbc_verbs_any(&a)) /* a service of this host */
		memcpy(a.ip, xdom->addr.ip, 4);
	p = calloc(1, sizeof(*p));
	if (!p)
		return -FI_ENOMEM;
	p->base.ops = &tnbc_verbs_ops;
	p->obj.kind = TNBC_VERBS_K_PEER;
	p->xdom = xdom;
	p->name = *name;
	p->addr = a;
	p->backlog_tail = &p->backlog;
	p->rwait_tail = &p->rwait;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_lock(&xdom->lock);
	/* another thread may have made it meanwhile */
	for (struct tnbc_xpeer *q = xdom->peers; q; q = q->next)
		if (tnbc_name_same(&q->name, name)) {
			pthread_mutex_unlock(&xdom->lock);
			pthread_mutex_destroy(&p->lock);
			free(p);
			*out = q;
			return 0;
		}
	p->next = xdom->peers;
	xdom->peers = p;
	pthread_mutex_unlock(&xdom->lock);
	*out = p;
	return 0;
}

/* What waits on a dead peer ends now: the reads queued for its
 * connection fail, and those posted are flushed by moving the queue
 * pair to its error state, rather than retried for
 * FI_TNBC_VERBS_TIMEOUT_MS or left to a disconnect that does not move
 * it.  peer->lock held. */
static void tnbc_verbs_peer_down(struct tnbc_xpeer *peer)
{
	if (peer->id && peer->id->qp)
		ibv_modify_qp(peer->id->qp,
			      &(struct ibv_qp_attr){.qp_state = IBV_QPS_ERR},
			      IBV_QP_STATE);
	tnbc_verbs_reads_go(peer);
}

/* A peer that sends nothing more and has nothing more of ours to take
 * leaves its queue pair silent when its process dies: no completion
 * fails, and the disconnect may never come (a process killed while its
 * connection was still being set up).  A peer of this host is watched
 * by its pid, as shared memory watches its peers; one elsewhere fails
 * with its queue pair (FI_TNBC_VERBS_TIMEOUT_MS) or its disconnect. */
static bool tnbc_verbs_peer_alive(struct tnbc_xpeer *peer)
{
	tnbc_verbs_reap(peer->xdom, false);
	if (!atomic_load(&peer->dead) && peer->name.pid &&
	    peer->name.host == peer->xdom->host &&
	    !tnbc_pid_alive((pid_t)peer->name.pid)) {
		tnbc_verbs_peer_dead(peer, "its process is gone");
		pthread_mutex_lock(&peer->lock);
		tnbc_verbs_peer_down(peer);
		pthread_mutex_unlock(&peer->lock);
		tnbc_verbs_reap(peer->xdom, false);
	}
	return !atomic_load(&peer->dead);
}

/* ------------------------------------------------------------------ */
/* Sending                                                              */

static bool tnbc_verbs_slot_get(struct tnbc_xdom *xdom, struct tnbc_xpeer *p,
				uint32_t *slot)
{
	bool ok = false;

	pthread_mutex_lock(&xdom->slock);
	if (xdom->nsfree) {
		*slot = xdom->sfree[--xdom->nsfree];
		xdom->sowner[*slot] = p;
		ok = true;
	}
	pthread_mutex_unlock(&xdom->slock);
	return ok;
}

static void tnbc_verbs_slot_put(struct tnbc_xdom *xdom, uint32_t slot)
{
	pthread_mutex_lock(&xdom->slock);
	xdom->sowner[slot] = NULL;
	xdom->sfree[xdom->nsfree++] = slot;
	pthread_mutex_unlock(&xdom->slock);
}

/* Posts one message: frame_len bytes of frame, then n bytes gathered
 * from iov; peer->lock held, the peer up. */
static int tnbc_verbs_post(struct tnbc_xpeer *p, uint32_t imm,
			   const void *frame, size_t frame_len,
			   const struct iovec *iov, size_t iov_count, size_t n)
{
	struct tnbc_xdom *xdom = p->xdom;
	size_t len = frame_len + n;
	struct ibv_send_wr wr = {0}, *bad;
	struct ibv_sge sge;
	uint32_t slot;
	uint8_t *buf;
	int ret;

	if (atomic_load(&p->inflight) >= p->max_send ||
	    !tnbc_verbs_slot_get(xdom, p, &slot)) {
		tnbc_verbs_reap(xdom, true);
		if (atomic_load(&p->inflight) >= p->max_send ||
		    !tnbc_verbs_slot_get(xdom, p, &slot)) {
			/* a completion wakes the engine to try again */
			ibv_req_notify_cq(xdom->scq, 0);
			return -FI_EAGAIN;
		}
	}
	buf = xdom->sbufs + (size_t)slot * xdom->sbsize;
	memcpy(buf, frame, frame_len);
	if (n)
		tnbc_copy_from_iov(buf + frame_len, iov, iov_count, 0, n);
	sge.addr = (uintptr_t)buf;
	sge.length = (uint32_t)len;
	sge.lkey = xdom->smr->lkey;
	wr.wr_id = slot;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED |
			(len <= p->max_inline ? IBV_SEND_INLINE : 0);
	wr.imm_data = htonl(imm);
	atomic_fetch_add(&p->inflight, 1);
	ret = ibv_post_send(p->id->qp, &wr, &bad);
	if (ret) {
		atomic_fetch_sub(&p->inflight, 1);
		tnbc_verbs_slot_put(xdom, slot);
		if (ret == ENOMEM)
			return -FI_EAGAIN;
		tnbc_verbs_peer_dead(p, strerror(ret));
		return -FI_EHOSTUNREACH;
	}
	return 0;
}

/* Posts what waits, the hello first; peer->lock held.  Stops at the
 * first message the device cannot take yet (a completion, or the
 * waker's next round, brings the rest). */
static int tnbc_verbs_flush(struct tnbc_xpeer *p)
{
	bool held = false;
	int ret;

	if (p->state != TNBC_VERBS_UP || atomic_load(&p->dead))
		return 0;
	if (!p->hello_sent) {
		struct tnbc_verbs_hello h = {.magic = TNBC_VERBS_MAGIC,
					     .version = TNBC_VERBS_VERSION};
		struct tnbc_xdom *xdom = p->xdom;

		/* the process dials: any of its endpoints names it */
		pthread_mutex_lock(&xdom->lock);
		if (xdom->eps) {
			h.from = xdom->eps->name;
			h.from_addr = xdom->eps->addr;
		}
		pthread_mutex_unlock(&xdom->lock);
		memcpy(h.mac, p->hs_mac, sizeof(h.mac));
		ret = tnbc_verbs_post(p, TNBC_VERBS_HELLO, &h, sizeof(h), NULL,
				      0, 0);
		if (ret)
			return ret;
		p->hello_sent = true;
	}
	/* Once the peer holds us back, what the backlog has for it stays
	 * (in order) and answers pass it, as they pass what the core keeps:
	 * the backlog of a connection just made holds a flood's first 4 MiB,
	 * more than the peer can move out while its notice is under way.
	 * The notice may come while this runs (post reaps), and from the
	 * first message held on, every later one is held too, so that none
	 * passes another. */
	if (p->parked && atomic_load(&p->held))
		goto out; /* nothing joins a parked backlog */
	p->parked = false;
	for (struct tnbc_verbs_held **it = &p->backlog, *h; (h = *it);) {
		if (h->holds && (held || atomic_load(&p->held))) {
			held = true;
			it = &h->next;
			continue;
		}
		ret = tnbc_verbs_post(p, h->imm, h->data, h->len, NULL, 0, 0);
		if (ret)
			return ret;
		*it = h->next;
		if (!*it)
			p->backlog_tail = it;
		p->backlog_bytes -= h->len;
		free(h);
	}
	p->parked = p->backlog != NULL;
out:
	tnbc_verbs_reads_go(p);
	return 0;
}

/* Sends one message, or queues it behind those that wait; peer->lock
 * held. */
static int tnbc_verbs_emit(struct tnbc_xpeer *p, uint32_t imm, bool holds,
			   const void *frame, size_t frame_len,
			   const struct iovec *iov, size_t iov_count, size_t n)
{
	struct tnbc_verbs_held *h;
	size_t len = frame_len + n;

	if (p->state == TNBC_VERBS_UP && p->hello_sent &&
	    (!p->backlog || (p->parked && !holds)))
		return tnbc_verbs_post(p, imm, frame, frame_len, iov, iov_count,
				       n);
	if (p->backlog_bytes + len > TNBC_VERBS_BACKLOG_MAX)
		return -FI_EAGAIN;
	h = malloc(sizeof(*h) + len);
	if (!h)
		return -FI_EAGAIN; /* memory may come back */
	h->next = NULL;
	h->imm = imm;
	h->holds = holds;
	h->len = (uint32_t)len;
	memcpy(h->data, frame, frame_len);
	if (n)
		tnbc_copy_from_iov(h->data + frame_len, iov, iov_count, 0, n);
	*p->backlog_tail = h;
	p->backlog_tail = &h->next;
	p->backlog_bytes += len;
	return 0;
}

/* Tells the peer where src listens, once per connection; peer->lock
 * held. */
static int tnbc_verbs_introduce(struct tnbc_xpeer *p,
				const struct tnbc_name *src)
{
	struct tnbc_verbs_intro in = {.src = *src};
	struct tnbc_xdom *xdom = p->xdom;
	bool found = false;
	int ret;

	if (tnbc_net_introduced(&p->intros, src))
		return 0;
	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep *e = xdom->eps; e; e = e->next)
		if (tnbc_name_same(&e->name, src)) {
			in.addr = e->addr;
			found = true;
			break;
		}
	pthread_mutex_unlock(&xdom->lock);
	if (!found)
		return 0; /* not ours: the peer cannot answer it anyway */
	ret = tnbc_verbs_emit(p, TNBC_VERBS_INTRO, false, &in, sizeof(in), NULL,
			      0, 0);
	if (ret)
		return ret;
	tnbc_net_intro_add(&p->intros, src);
	return 0;
}

/* Connects p if it is idle; peer->lock held. */
static int tnbc_verbs_up(struct tnbc_xpeer *p)
{
	int ret;

	if (p->state != TNBC_VERBS_IDLE)
		return 0;
	ret = tnbc_verbs_connect(p);
	if (ret) {
		tnbc_verbs_peer_dead(p, fi_strerror(-ret));
		return -FI_EHOSTUNREACH;
	}
	return 0;
}

static int tnbc_verbs_send(struct tnbc_xpeer *p, const struct tnbc_xpkt *pkt)
{
	size_t len = (size_t)pkt->frame_len + pkt->payload_len;
	int ret = 0;

	if (pkt->frame_len > TNBC_XPKT_FRAME_MAX ||
	    len > p->base.ops->max_packet(p))
		return -FI_EMSGSIZE;
	if (atomic_load(&p->dead))
		return -FI_EHOSTUNREACH;
	/* the peer holds our messages back: they wait in the core (the
	 * notice that lets them go comes on the send queue) */
	if ((pkt->flags & TNBC_XPKT_HOLDS) &&
	    atomic_load_explicit(&p->held, memory_order_relaxed)) {
		tnbc_verbs_reap(p->xdom, false);
		if (atomic_load(&p->held))
			return -FI_EAGAIN;
	}
	pthread_mutex_lock(&p->lock);
	ret = tnbc_verbs_up(p);
	if (ret)
		goto out;
	/* what waits goes first: order is kept */
	ret = tnbc_verbs_flush(p);
	if (ret && ret != -FI_EAGAIN)
		goto out;
	if (pkt->src) {
		ret = tnbc_verbs_introduce(p, pkt->src);
		if (ret)
			goto out;
	}
	ret = tnbc_verbs_emit(p, TNBC_VERBS_PKT,
			      (pkt->flags & TNBC_XPKT_HOLDS) != 0, pkt->frame,
			      pkt->frame_len, pkt->iov, pkt->iov_count,
			      pkt->payload_len);
out:
	if (ret == -FI_EAGAIN && atomic_load(&p->dead))
		ret = -FI_EHOSTUNREACH;
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* Posts what waits for every peer (the waker, after a connection came up
 * or send buffers came back).  Peers are freed only at dom_close and
 * join the list at its head, so it is walked without xdom->lock, which
 * ranks below peer->lock. */
static void tnbc_verbs_flush_all(struct tnbc_xdom *xdom)
{
	struct tnbc_xpeer *p;

	pthread_mutex_lock(&xdom->lock);
	p = xdom->peers;
	pthread_mutex_unlock(&xdom->lock);
	for (; p; p = p->next) {
		if (!p->backlog && p->hello_sent && !p->rwait)
			continue; /* a hint: checked again under the lock */
		pthread_mutex_lock(&p->lock);
		tnbc_verbs_flush(p);
		/* a dead peer's reads end here */
		if (atomic_load(&p->dead))
			tnbc_verbs_reads_go(p);
		pthread_mutex_unlock(&p->lock);
	}
}

/* ------------------------------------------------------------------ */
/* Connection events (the waker)                                        */

/* The MAC of one side of the handshake (tnbc_verbs.h). */
static void tnbc_verbs_mac(const struct tnbc_xdom *xdom, const char *label,
			   const struct tnbc_verbs_req *req,
			   const struct tnbc_net_chal *chal, bool with_mac,
			   uint8_t out[TNBC_SHA256_LEN])
{
	struct tnbc_hmac m;

	tnbc_hmac_init(&m, xdom->key, xdom->key_len);
	tnbc_hmac_update(&m, label, strlen(label) + 1);
	tnbc_hmac_update(&m, req, sizeof(*req));
	tnbc_hmac_update(&m, chal->nonce, sizeof(chal->nonce));
	if (with_mac)
		tnbc_hmac_update(&m, chal->mac, sizeof(chal->mac));
	tnbc_hmac_final(&m, out);
}

/* A connect request to an endpoint: accepted when it names the
 * endpoint, in a version we speak, keyed as we are. */
static void tnbc_verbs_accept(struct tnbc_xep *xep, struct rdma_cm_id *id,
			      const struct tnbc_verbs_req *req, bool req_ok)
{
	struct tnbc_xdom *xdom = xep->xdom;
	struct ibv_qp_init_attr qa = {
		.send_cq = xep->cq,
		.recv_cq = xep->cq,
		.srq = xep->srq,
		.cap = {.max_send_wr = 1, .max_send_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	/* the connecting side reads from this end (RDMA read) */
	struct rdma_conn_param cp = {.retry_count = 7,
				     .rnr_retry_count = 7,
				     .initiator_depth = xdom->rd_atom,
				     .responder_resources = xdom->rd_atom};
	struct tnbc_verbs_conn *c = NULL;
	struct tnbc_net_chal chal;

	if (!req_ok || req->magic != TNBC_VERBS_MAGIC ||
	    req->version != TNBC_VERBS_VERSION ||
	    !tnbc_name_same(&req->to, &xep->name) || id->verbs != xdom->ctx)
		goto refuse;
	if (!(req->flags & TNBC_VERBS_REQ_KEYED) != !xdom->key_len) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
			"verbs: a connection %s auth_key refused\n",
			xdom->key_len ? "without an" : "with an");
		goto refuse;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		goto refuse;
	if (xdom->key_len) {
		/* our proof of the key, over the connector's nonce and a
		 * fresh one of ours, and the proof its hello must bring */
		if (tnbc_random(chal.nonce, sizeof(chal.nonce)))
			goto refuse;
		tnbc_verbs_mac(xdom, TNBC_VERBS_MAC_L, req, &chal, false,
			       chal.mac);
		tnbc_verbs_mac(xdom, TNBC_VERBS_MAC_C, req, &chal, true,
			       c->expect);
		cp.private_data = &chal;
		cp.private_data_len = sizeof(chal);
	}
	c->obj.kind = TNBC_VERBS_K_CONN;
	c->xep = xep;
	c->id = id;
	tnbc_verbs_from_sockaddr(rdma_get_peer_addr(id), &c->from);
	if (rdma_create_qp(id, xdom->pd, &qa))
		goto refuse;
	c->qpn = id->qp->qp_num;
	id->context = &c->obj;
	pthread_mutex_lock(&xep->lock);
	if (xep->closing) {
		pthread_mutex_unlock(&xep->lock);
		rdma_destroy_qp(id);
		goto refuse;
	}
	c->next = xep->conns;
	xep->conns = c;
	pthread_mutex_unlock(&xep->lock);
	if (rdma_accept(id, &cp)) {
		/* its DISCONNECTED or error event ends it */
		FI_INFO(&tnbc_prov, FI_LOG_EP_CTRL,
			"verbs: accept failed: %s\n", strerror(errno));
	}
	return;
refuse:
	atomic_fetch_add(&xdom->refused, 1);
	free(c);
	rdma_reject(id, NULL, 0);
	rdma_destroy_id(id);
}

/* An accepted connection is over: its QP goes, and the messages it
 * left are offered still (they came before the end). */
static void tnbc_verbs_conn_end(struct tnbc_verbs_conn *c)
{
	struct tnbc_xep *xep = c->xep;
	struct rdma_cm_id *id = c->id;
	bool free_now;

	tnbc_verbs_ending_drop(xep->xdom, c);
	pthread_mutex_lock(&xep->lock);
	/* no notice goes to a queue pair being destroyed */
	c->mute = true;
	if (c->notice_out) {
		c->notice_out = false;
		xep->notices_out--;
	}
	pthread_mutex_unlock(&xep->lock);
	rdma_destroy_qp(id);
	pthread_mutex_lock(&xep->lock);
	tnbc_verbs_fill(xep); /* its messages still name it */
	for (struct tnbc_verbs_conn **it = &xep->conns; *it; it = &(*it)->next)
		if (*it == c) {
			*it = c->next;
			break;
		}
	c->gone = true;
	c->id = NULL;
	free_now = !c->refs;
	pthread_mutex_unlock(&xep->lock);
	rdma_destroy_id(id);
	if (free_now)
		free(c);
}

static void tnbc_verbs_peer_cm(struct tnbc_xpeer *p,
			       enum rdma_cm_event_type type, int status,
			       const struct tnbc_net_chal *chal)
{
	const char *why = NULL;
	int ret;

	pthread_mutex_lock(&p->lock);
	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(p->id, TNBC_VERBS_RESOLVE_MS))
			why = "no route";
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret = tnbc_verbs_connect_qp(p);
		if (ret)
			why = fi_strerror(-ret);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (p->xdom->key_len) {
			uint8_t want[TNBC_SHA256_LEN];

			/* nothing goes to a listener that does not prove
			 * the key */
			if (chal)
				tnbc_verbs_mac(p->xdom, TNBC_VERBS_MAC_L,
					       &p->hs_req, chal, false, want);
			if (!chal ||
			    !tnbc_mac_equal(want, chal->mac, sizeof(want))) {
				atomic_fetch_add(&p->xdom->refused, 1);
				why = "its answer does not prove the auth_key";
				break;
			}
			tnbc_verbs_mac(p->xdom, TNBC_VERBS_MAC_C, &p->hs_req,
				       chal, true, p->hs_mac);
		}
		p->state = TNBC_VERBS_UP;
		tnbc_verbs_flush(p);
		break;
	case RDMA_CM_EVENT_REJECTED:
		why = "connection refused";
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		why = "it closed the connection";
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		break;
	default:
		why = rdma_event_str(type);
		break;
	}
	if (why) {
		FI_INFO(&tnbc_prov, FI_LOG_EP_CTRL, "verbs: %s (status %d)\n",
			rdma_event_str(type), status);
		tnbc_verbs_peer_dead(p, why);
		tnbc_verbs_peer_down(p);
	}
	pthread_mutex_unlock(&p->lock);
}

static void tnbc_verbs_cm_events(struct tnbc_xdom *xdom)
{
	struct rdma_cm_event *ev;

	while (!rdma_get_cm_event(xdom->cmch, &ev)) {
		struct tnbc_verbs_obj *o = ev->id->context;
		enum rdma_cm_event_type type = ev->event;
		struct rdma_cm_id *id = ev->id;
		int status = ev->status;
		struct tnbc_net_chal chal;
		bool has_chal = false;

		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct tnbc_verbs_req req;
			bool ok = ev->param.conn.private_data_len >=
					  sizeof(req) &&
				  ev->param.conn.private_data;
			struct tnbc_xep *xep =
				(struct tnbc_xep *)ev->listen_id->context;

			if (ok)
				memcpy(&req, ev->param.conn.private_data,
				       sizeof(req));
			rdma_ack_cm_event(ev);
			tnbc_verbs_accept(xep, id, &req, ok);
			continue;
		}
		if (o && o->kind == TNBC_VERBS_K_PEER &&
		    type == RDMA_CM_EVENT_ESTABLISHED &&
		    ev->param.conn.private_data &&
		    ev->param.conn.private_data_len >= sizeof(chal)) {
			memcpy(&chal, ev->param.conn.private_data,
			       sizeof(chal));
			has_chal = true;
		}
		rdma_ack_cm_event(ev);
		if (!o)
			continue;
		if (o->kind == TNBC_VERBS_K_PEER) {
			tnbc_verbs_peer_cm(
				(struct tnbc_xpeer *)((char *)o -
						      offsetof(
							      struct tnbc_xpeer,
							      obj)),
				type, status, has_chal ? &chal : NULL);
		} else if (o->kind == TNBC_VERBS_K_CONN &&
			   type == RDMA_CM_EVENT_ESTABLISHED) {
			((struct tnbc_verbs_conn *)o)->established = true;
		} else if (o->kind == TNBC_VERBS_K_CONN &&
			   (type == RDMA_CM_EVENT_DISCONNECTED ||
			    type == RDMA_CM_EVENT_CONNECT_ERROR ||
			    type == RDMA_CM_EVENT_UNREACHABLE ||
			    type == RDMA_CM_EVENT_DEVICE_REMOVAL)) {
			tnbc_verbs_conn_end((struct tnbc_verbs_conn *)o);
		}
	}
}

/* Disconnects the connections consumers refused; their DISCONNECTED
 * events end them (tnbc_verbs_conn_end).  The waker only: it alone
 * ends and destroys connections, so none on the list is gone. */
static void tnbc_verbs_end_bad(struct tnbc_xdom *xdom)
{
	struct tnbc_verbs_conn *c;

	pthread_mutex_lock(&xdom->lock);
	c = xdom->ending;
	xdom->ending = NULL;
	for (struct tnbc_verbs_conn *it = c; it; it = it->ending_next)
		it->ending = false;
	pthread_mutex_unlock(&xdom->lock);
	while (c) {
		struct tnbc_verbs_conn *n = c->ending_next;

		/* its data may come before the connection manager sees it
		 * established (the peer's last handshake message): then the
		 * next round */
		if (!c->established || rdma_disconnect(c->id)) {
			pthread_mutex_lock(&xdom->lock);
			c->ending = true;
			c->ending_next = xdom->ending;
			xdom->ending = c;
			pthread_mutex_unlock(&xdom->lock);
		}
		c = n;
	}
}

/* Drops the references a ring's messages hold on their connections,
 * and the copies of those moved out. */
static void tnbc_verbs_ring_unref(struct tnbc_verbs_ring *r)
{
	for (unsigned i = 0; r->e && i < r->n; i++) {
		struct tnbc_verbs_conn *c = tnbc_verbs_ring_at(r, i)->conn;

		free(tnbc_verbs_ring_at(r, i)->copy);
		if (c && !--c->refs && c->gone)
			free(c);
	}
	r->n = 0;
}

static void tnbc_verbs_ep_destroy(struct tnbc_xep *xep)
{
	struct tnbc_verbs_conn *c;

	if (xep->lid)
		rdma_destroy_id(xep->lid);
	tnbc_verbs_ring_unref(&xep->stash);
	tnbc_verbs_ring_unref(&xep->kept);
	while ((c = xep->conns)) {
		xep->conns = c->next;
		tnbc_verbs_ending_drop(xep->xdom, c);
		rdma_destroy_qp(c->id);
		rdma_destroy_id(c->id);
		free(c);
	}
	if (xep->srq)
		ibv_destroy_srq(xep->srq);
	if (xep->cq)
		ibv_destroy_cq(xep->cq);
	if (xep->mr)
		ibv_dereg_mr(xep->mr);
	free(xep->bufs);
	free(xep->stash.e);
	free(xep->kept.e);
	pthread_mutex_destroy(&xep->lock);
	free(xep);
}

/* Destroys the endpoints consumers closed: only the waker reads the
 * events that name them. */
static void tnbc_verbs_bury(struct tnbc_xdom *xdom)
{
	struct tnbc_xep *e;

	pthread_mutex_lock(&xdom->lock);
	e = xdom->grave;
	xdom->grave = NULL;
	pthread_mutex_unlock(&xdom->lock);
	while (e) {
		struct tnbc_xep *n = e->next;

		tnbc_verbs_ep_destroy(e);
		e = n;
	}
}

/* Completion events: the engine asked for them when it went to sleep
 * (sleep_begin), or a sender that ran out of send buffers did. */
static void tnbc_verbs_cq_events(struct tnbc_xdom *xdom)
{
	struct ibv_cq *cq;
	void *ctx;

	while (!ibv_get_cq_event(xdom->cch, &cq, &ctx))
		ibv_ack_cq_events(cq, 1);
}

static void *tnbc_verbs_waker(void *arg)
{
	struct tnbc_xdom *xdom = arg;
	struct epoll_event evs[8];

	while (!atomic_load(&xdom->stop)) {
		bool kick = false;
		uint64_t v;
		int n = epoll_wait(xdom->epfd, evs, 8, 1000);

		for (int i = 0; i < n; i++) {
			if (evs[i].data.fd == xdom->notefd) {
				if (read(xdom->notefd, &v, sizeof(v)) < 0)
					v = 0;
			} else if (evs[i].data.fd == xdom->cmch->fd) {
				tnbc_verbs_cm_events(xdom);
				/* a peer up or dead: what waits on it goes */
				kick = true;
			} else {
				tnbc_verbs_cq_events(xdom);
				kick = true;
			}
		}
		tnbc_verbs_end_bad(xdom);
		tnbc_verbs_bury(xdom);
		/* failed sends make peers dead even with none sending, and
		 * send buffers that came back carry what waits */
		tnbc_verbs_reap(xdom, false);
		tnbc_verbs_flush_all(xdom);
		if (kick)
			xdom->kick.kick(xdom->kick.arg);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Domain                                                               */

static int tnbc_verbs_fd_add(struct tnbc_xdom *xdom, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		return -errno;
	return epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* The receives hold notices come into: no bytes, so no buffers. */
static int tnbc_verbs_notice_srq(struct tnbc_xdom *xdom)
{
	struct ibv_srq_init_attr sa = {
		.attr = {.max_wr = TNBC_VERBS_NOTICE_WRS, .max_sge = 1}};

	xdom->nsrq = ibv_create_srq(xdom->pd, &sa);
	if (!xdom->nsrq)
		return errno ? -errno : -FI_ENOMEM;
	for (unsigned i = 0; i < TNBC_VERBS_NOTICE_WRS; i++)
		if (tnbc_verbs_notice_recv(xdom))
			return -FI_EIO;
	return 0;
}

static void tnbc_verbs_dom_free(struct tnbc_xdom *xdom)
{
	while (xdom->reads) { /* their endpoints closed, the QPs are gone */
		struct tnbc_verbs_read *r = xdom->reads;

		xdom->reads = r->next;
		tnbc_verbs_read_free(r);
	}
	if (xdom->mrc)
		tnbc_verbs_mrc_close(xdom->mrc);
	if (xdom->smr)
		ibv_dereg_mr(xdom->smr);
	free(xdom->sbufs);
	if (xdom->nsrq)
		ibv_destroy_srq(xdom->nsrq);
	if (xdom->scq)
		ibv_destroy_cq(xdom->scq);
	if (xdom->cch)
		ibv_destroy_comp_channel(xdom->cch);
	if (xdom->pd)
		ibv_dealloc_pd(xdom->pd);
	if (xdom->cmch)
		rdma_destroy_event_channel(xdom->cmch);
	if (xdom->devs)
		rdma_free_devices(xdom->devs);
	if (xdom->notefd >= 0)
		close(xdom->notefd);
	if (xdom->epfd >= 0)
		close(xdom->epfd);
	tnbc_net_book_fini(&xdom->book);
	pthread_mutex_destroy(&xdom->slock);
	pthread_mutex_destroy(&xdom->lock);
	free(xdom);
}

static int tnbc_verbs_dom_open(struct tnbc_xdom **out,
			       const struct tnbc_xdom_attr *attr)
{
	struct tnbc_xdom *xdom = calloc(1, sizeof(*xdom));
	struct ibv_device_attr da;
	int ndev = 0, ret;

	if (!xdom)
		return -FI_ENOMEM;
	xdom->kick = attr->wake;
	xdom->key_len = (uint16_t)attr->auth_key_size;
	if (attr->auth_key_size)
		memcpy(xdom->key, attr->auth_key, attr->auth_key_size);
	xdom->epfd = xdom->notefd = -1;
	pthread_mutex_init(&xdom->lock, NULL);
	pthread_mutex_init(&xdom->slock, NULL);
	tnbc_net_app_init(&xdom->app);
	tnbc_net_book_init(&xdom->book);
	xdom->devs = rdma_get_devices(&ndev);
	if (!xdom->devs || !ndev) {
		ret = -FI_ENODEV;
		goto err;
	}
	xdom->cmch = rdma_create_event_channel();
	if (!xdom->cmch) {
		ret = -FI_ENODEV;
		goto err;
	}
	ret = tnbc_verbs_pick(xdom);
	if (ret)
		goto err;
	if (!ibv_query_device(xdom->ctx, &da)) {
		int atom = da.max_qp_rd_atom < da.max_qp_init_rd_atom
				   ? da.max_qp_rd_atom
				   : da.max_qp_init_rd_atom;

		xdom->rd_atom = (uint8_t)(atom < 16 ? atom : 16);
	}
	xdom->host = tnbc_host_id();
	xdom->pd = ibv_alloc_pd(xdom->ctx);
	xdom->cch = ibv_create_comp_channel(xdom->ctx);
	if (!xdom->pd || !xdom->cch) {
		ret = -FI_ENOMEM;
		goto err;
	}
	ret = tnbc_verbs_mrc_open(&xdom->mrc, xdom->pd,
				  tnbc_env.verbs_mr_cache);
	if (ret)
		goto err;
	xdom->scq = ibv_create_cq(xdom->ctx,
				  TNBC_VERBS_SEND_BUFS + TNBC_VERBS_READ_WRS +
					  TNBC_VERBS_NOTICE_WRS,
				  NULL, xdom->cch, 0);
	xdom->sbsize = (tnbc_env.slot_size + 63) & ~(size_t)63;
	xdom->sbufs = aligned_alloc(4096, (xdom->sbsize * TNBC_VERBS_SEND_BUFS +
					   4095) & ~(size_t)4095);
	if (!xdom->scq || !xdom->sbufs) {
		ret = -FI_ENOMEM;
		goto err;
	}
	xdom->smr = ibv_reg_mr(xdom->pd, xdom->sbufs,
			       xdom->sbsize * TNBC_VERBS_SEND_BUFS,
			       IBV_ACCESS_LOCAL_WRITE);
	if (!xdom->smr) {
		ret = -errno;
		goto err;
	}
	ret = tnbc_verbs_notice_srq(xdom);
	if (ret)
		goto err;
	for (unsigned i = 0; i < TNBC_VERBS_SEND_BUFS; i++)
		xdom->sfree[i] = TNBC_VERBS_SEND_BUFS - 1 - i;
	xdom->nsfree = TNBC_VERBS_SEND_BUFS;
	xdom->epfd = epoll_create1(EPOLL_CLOEXEC);
	xdom->notefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (xdom->epfd < 0 || xdom->notefd < 0) {
		ret = -errno;
		goto err;
	}
	ret = tnbc_verbs_fd_add(xdom, xdom->notefd);
	if (!ret)
		ret = tnbc_verbs_fd_add(xdom, xdom->cmch->fd);
	if (!ret)
		ret = tnbc_verbs_fd_add(xdom, xdom->cch->fd);
	if (ret)
		goto err;
	ret = -pthread_create(&xdom->waker, NULL, tnbc_verbs_waker, xdom);
	if (ret)
		goto err;
	*out = xdom;
	return 0;
err:
	FI_WARN(&tnbc_prov, FI_LOG_DOMAIN, "verbs: domain: %s%s\n",
		fi_strerror(-ret),
		ret == -FI_ENODEV ? " (no RDMA device with an IPv4 address "
				    "up, see FI_TNBC_VERBS_IFACE)"
				  : "");
	tnbc_verbs_dom_free(xdom);
	return ret;
}

static void tnbc_verbs_dom_close(struct tnbc_xdom *xdom)
{
	uint64_t one = 1;

	atomic_store(&xdom->stop, true);
	if (write(xdom->notefd, &one, sizeof(one)) != sizeof(one))
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN, "verbs: waker not told\n");
	pthread_join(xdom->waker, NULL);
	tnbc_verbs_bury(xdom);
	while (xdom->peers) {
		struct tnbc_xpeer *p = xdom->peers;

		xdom->peers = p->next;
		if (p->id) {
			if (p->id->qp)
				rdma_destroy_qp(p->id);
			rdma_destroy_id(p->id);
		}
		while (p->backlog) {
			struct tnbc_verbs_held *h = p->backlog;

			p->backlog = h->next;
			free(h);
		}
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
	tnbc_verbs_dom_free(xdom);
}

/* ------------------------------------------------------------------ */
/* Endpoints                                                            */

static int tnbc_verbs_ep_open(struct tnbc_xdom *xdom,
			      const struct tnbc_name *name, uint8_t *xaddr,
			      struct tnbc_xep **out)
{
	struct tnbc_verbs_addr *want = (struct tnbc_verbs_addr *)(void *)xaddr;
	struct ibv_srq_init_attr sa = {0};
	struct sockaddr_in sin;
	struct tnbc_xep *xep;
	size_t total;
	int ret;

	xep = calloc(1, sizeof(*xep));
	if (!xep)
		return -FI_ENOMEM;
	xep->obj.kind = TNBC_VERBS_K_LISTEN;
	xep->xdom = xdom;
	xep->name = *name;
	pthread_mutex_init(&xep->lock, NULL);
	xep->nbufs = tnbc_env.rx_slots * TNBC_VERBS_RX_PER_SLOT;
	xep->bsize = (tnbc_env.slot_size + 63) & ~(size_t)63;
	total = (xep->nbufs * xep->bsize + 4095) & ~(size_t)4095;
	xep->bufs = aligned_alloc(4096, total);
	xep->spill_max = xep->nbufs * xep->bsize;
	/* moved packets stay in the rings, on top of a buffer each */
	if (!xep->bufs ||
	    tnbc_verbs_ring_init(&xep->stash,
				 xep->nbufs * (TNBC_VERBS_SPILL_PER_BUF + 1) +
					 16) ||
	    tnbc_verbs_ring_init(&xep->kept,
				 xep->nbufs * (TNBC_VERBS_SPILL_PER_BUF + 1))) {
		ret = -FI_ENOMEM;
		goto err;
	}
	xep->mr =
		ibv_reg_mr(xdom->pd, xep->bufs, total, IBV_ACCESS_LOCAL_WRITE);
	xep->cq = ibv_create_cq(xdom->ctx,
				(int)(xep->nbufs + 16 + TNBC_VERBS_NOTICES_OUT),
				xep, xdom->cch, 0);
	sa.attr.max_wr = (uint32_t)xep->nbufs;
	sa.attr.max_sge = 1;
	xep->srq = ibv_create_srq(xdom->pd, &sa);
	if (!xep->mr || !xep->cq || !xep->srq) {
		ret = errno ? -errno : -FI_ENOMEM;
		goto err;
	}
	for (uint32_t i = 0; i < xep->nbufs; i++)
		if (tnbc_verbs_post_recv(xep, i)) {
			ret = -FI_EIO;
			goto err;
		}
	xep->addr =
		want->family == 4 && !tnbc_verbs_any(want) ? *want : xdom->addr;
	xep->addr.family = 4;
	xep->addr.port = want->family == 4 ? want->port : 0;
	/* a service is reached at its number, where it is a port */
	if (name->kind == TNBC_NAME_SVC && name->uid <= 65535)
		xep->addr.port = htons((uint16_t)name->uid);
	if (rdma_create_id(xdom->cmch, &xep->lid, &xep->obj, RDMA_PS_TCP)) {
		ret = -errno;
		goto err;
	}
	tnbc_verbs_sockaddr(&xep->addr, &sin);
	if (rdma_bind_addr(xep->lid, (struct sockaddr *)&sin) ||
	    rdma_listen(xep->lid, 128)) {
		ret = errno == EADDRINUSE ? -FI_EADDRINUSE : -errno;
		goto err;
	}
	xep->addr.port = rdma_get_src_port(xep->lid);
	pthread_mutex_lock(&xdom->lock);
	xep->next = xdom->eps;
	xdom->eps = xep;
	pthread_mutex_unlock(&xdom->lock);
	*want = xep->addr;
	*out = xep;
	return 0;
err:
	if (ret != -FI_EADDRINUSE)
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL, "verbs: endpoint: %s\n",
			fi_strerror(-ret));
	tnbc_verbs_ep_destroy(xep);
	return ret;
}

static void tnbc_verbs_ep_close(struct tnbc_xep *xep)
{
	struct tnbc_xdom *xdom = xep->xdom;
	uint64_t one = 1;

	struct tnbc_verbs_read *r;

	/* reads in flight end unheard (tnbc_xread) */
	pthread_mutex_lock(&xdom->slock);
	for (r = xdom->reads; r; r = r->next)
		if (r->xep == xep)
			r->xep = NULL;
	pthread_mutex_unlock(&xdom->slock);
	pthread_mutex_lock(&xep->lock);
	xep->closing = true;
	r = xep->rdone;
	xep->rdone = NULL;
	pthread_mutex_unlock(&xep->lock);
	while (r) {
		struct tnbc_verbs_read *next = r->next;

		tnbc_verbs_read_free(r);
		r = next;
	}
	/* the waker destroys it, between the events that may name it */
	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep **it = &xdom->eps; *it; it = &(*it)->next)
		if (*it == xep) {
			*it = xep->next;
			break;
		}
	xep->next = xdom->grave;
	xdom->grave = xep;
	pthread_mutex_unlock(&xdom->lock);
	if (write(xdom->notefd, &one, sizeof(one)) != sizeof(one))
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
			"verbs: the waker was not told\n");
}

/* As large as shm's: the same limits hold whichever transport reaches a
 * peer. */
static size_t tnbc_verbs_packet_limit(void)
{
	return tnbc_env.slot_size - 16;
}

static size_t tnbc_verbs_max_packet(struct tnbc_xpeer *peer)
{
	(void)peer;
	return tnbc_verbs_packet_limit();
}

/* ------------------------------------------------------------------ */
/* Receiving                                                            */

/* A message that is not a packet; returns whether the connection may
 * go on. */
static bool tnbc_verbs_control(struct tnbc_xep *xep,
			       const struct tnbc_verbs_rxe *e,
			       const uint8_t *body)
{
	struct tnbc_verbs_conn *c = e->conn;
	struct tnbc_xdom *xdom = xep->xdom;

	if (TNBC_VERBS_KIND(e->imm) == TNBC_VERBS_HELLO) {
		struct tnbc_verbs_hello h;

		if (c->hello || e->len != sizeof(h))
			return false;
		memcpy(&h, body, sizeof(h));
		if (h.magic != TNBC_VERBS_MAGIC ||
		    h.version != TNBC_VERBS_VERSION ||
		    (h.from.kind != TNBC_NAME_PID &&
		     h.from.kind != TNBC_NAME_SVC) ||
		    h.from_addr.family != 4)
			return false;
		if (tnbc_verbs_any(&h.from_addr))
			memcpy(h.from_addr.ip, c->from.ip, 4);
		/* with a key, its proof; without, at least the host it
		 * says it listens on must be where it connects from */
		if (xdom->key_len
			    ? !tnbc_mac_equal(h.mac, c->expect, sizeof(h.mac))
			    : memcmp(h.from_addr.ip, c->from.ip, 4) != 0) {
			FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
				"verbs: a connection %s refused\n",
				xdom->key_len ? "that does not hold the "
						"auth_key"
					      : "naming an endpoint of another "
						"host");
			atomic_fetch_add(&xdom->refused, 1);
			return false;
		}
		c->who = h.from;
		c->hello = true;
		if (h.from_addr.port)
			tnbc_net_book_put(&xdom->book, &h.from, &h.from_addr,
					  sizeof(h.from_addr));
		return true;
	}
	if (TNBC_VERBS_KIND(e->imm) == TNBC_VERBS_INTRO && c->hello &&
	    e->len == sizeof(struct tnbc_verbs_intro)) {
		struct tnbc_verbs_intro in;

		memcpy(&in, body, sizeof(in));
		/* only another endpoint of the connection's process */
		if (in.addr.family != 4 || !in.addr.port ||
		    in.src.host != c->who.host || in.src.pid != c->who.pid ||
		    (in.src.kind != TNBC_NAME_PID &&
		     in.src.kind != TNBC_NAME_SVC))
			return false;
		/* a source on any address is reached where it connected
		 * from */
		if (tnbc_verbs_any(&in.addr))
			memcpy(in.addr.ip, c->from.ip, 4);
		/* without a key, never an address of another host */
		if (!xdom->key_len && memcmp(in.addr.ip, c->from.ip, 4)) {
			atomic_fetch_add(&xdom->refused, 1);
			return true;
		}
		tnbc_net_book_put(&xdom->book, &in.src, &in.addr,
				  sizeof(in.addr));
		return true;
	}
	return false;
}

/* Takes the oldest message not yet offered, false when none; the lock
 * is not held across the protocol's callback. */
static bool tnbc_verbs_next(struct tnbc_xep *xep, struct tnbc_verbs_rxe *e)
{
	bool got;

	pthread_mutex_lock(&xep->lock);
	if (!xep->stash.n)
		tnbc_verbs_fill(xep);
	got = xep->stash.n != 0;
	if (got) {
		*e = *tnbc_verbs_ring_at(&xep->stash, 0);
		tnbc_verbs_ring_pop(&xep->stash);
	}
	pthread_mutex_unlock(&xep->lock);
	return got;
}

/* Holds c back (Holds, above). */
static void tnbc_verbs_hold(struct tnbc_xep *xep, struct tnbc_verbs_conn *c)
{
	if (!c || c->held)
		return;
	c->held = true;
	xep->hold_dirty = true;
	atomic_fetch_add(&xep->xdom->held, 1);
}

/* Kept packets hold half the buffers: the oldest still in theirs move
 * out until a quarter do (Holds, above).  xep->lock held. */
static void tnbc_verbs_spill(struct tnbc_xep *xep)
{
	for (unsigned i = 0; i < xep->kept.n && xep->kept_bufs > xep->nbufs / 4;
	     i++) {
		struct tnbc_verbs_rxe *e = tnbc_verbs_ring_at(&xep->kept, i);
		struct tnbc_verbs_conn *c = e->conn;
		uint8_t *copy;

		if (e->copy)
			continue;
		if (xep->spill_bytes + e->len > xep->spill_max ||
		    xep->nspilled >= xep->nbufs * TNBC_VERBS_SPILL_PER_BUF) {
			tnbc_verbs_hold(xep, c);
			return;
		}
		copy = malloc(e->len ? e->len : 1);
		if (!copy)
			return; /* it keeps its buffer */
		memcpy(copy, xep->bufs + (size_t)e->buf * xep->bsize, e->len);
		if (tnbc_verbs_post_recv(xep, e->buf)) {
			free(copy);
			return;
		}
		e->copy = copy;
		xep->kept_bufs--;
		xep->spill_bytes += e->len;
		xep->nspilled++;
		atomic_fetch_add(&xep->xdom->spilled, 1);
		if (c) {
			c->spilled += e->len;
			c->spilled_pkts++;
			if (tnbc_xhold_due(c->spilled, xep->spill_max) ||
			    tnbc_xhold_due(c->spilled_pkts,
					   xep->nbufs *
						   TNBC_VERBS_SPILL_PER_BUF))
				tnbc_verbs_hold(xep, c);
		}
	}
}

/* What became of a message taken by tnbc_verbs_next. */
static void tnbc_verbs_done(struct tnbc_xep *xep,
			    const struct tnbc_verbs_rxe *e, int verdict)
{
	pthread_mutex_lock(&xep->lock);
	if (verdict == TNBC_RX_LATER) { /* offered first next time */
		tnbc_verbs_ring_push_front(&xep->stash, e);
	} else if (verdict == TNBC_RX_KEEP) { /* holds its buffer: less room */
		tnbc_verbs_ring_push(&xep->kept, e);
		if (!e->copy && ++xep->kept_bufs >= xep->nbufs / 2)
			tnbc_verbs_spill(xep);
	} else {
		tnbc_verbs_release(xep, e);
	}
	pthread_mutex_unlock(&xep->lock);
}

/* Whether a message may reach the protocol: a packet on a connection
 * that said hello.  Anything else is handled here (hello,
 * introduction), or ends its connection. */
static bool tnbc_verbs_admit(struct tnbc_xep *xep,
			     const struct tnbc_verbs_rxe *e,
			     const uint8_t *body)
{
	bool pkt = TNBC_VERBS_KIND(e->imm) == TNBC_VERBS_PKT;

	if (!e->conn || e->conn->bad)
		return false; /* from a connection refused, or none we know */
	if (e->status == IBV_WC_SUCCESS &&
	    (pkt ? e->conn->hello : tnbc_verbs_control(xep, e, body)))
		return pkt;
	atomic_fetch_add(&xep->xdom->bad_pkts, 1);
	tnbc_verbs_conn_bad(xep, e->conn,
			    e->status != IBV_WC_SUCCESS
				    ? ibv_wc_status_str(e->status)
				    : "malformed message");
	return false;
}

static int tnbc_verbs_poll(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg,
			   int budget)
{
	struct tnbc_verbs_rxe e;
	int taken = 0;

	tnbc_verbs_reads_end(xep);
	xep->polling = true;
	while (budget > 0 && tnbc_verbs_next(xep, &e)) {
		const uint8_t *body =
			e.copy ? e.copy
			       : xep->bufs + (size_t)e.buf * xep->bsize;
		struct tnbc_xrx rx = {.head = body,
				      .head_len = e.len,
				      .len = e.len,
				      .from = e.conn ? &e.conn->who : NULL,
				      .copy = tnbc_net_mem_copy};
		int v = TNBC_RX_DONE;

		if (tnbc_verbs_admit(xep, &e, body)) {
			v = fn(arg, &rx);
			if (v != TNBC_RX_LATER)
				budget--;
			if (v == TNBC_RX_BAD)
				atomic_fetch_add(&xep->xdom->bad_pkts, 1);
			else if (v == TNBC_RX_DONE)
				taken++;
		}
		tnbc_verbs_done(xep, &e, v);
		if (v == TNBC_RX_LATER)
			break;
		/* at once: a poll with a large budget would otherwise move
		 * out every packet of a flood before its sender hears */
		if (xep->hold_dirty)
			tnbc_verbs_tell_holds(xep);
	}
	xep->polling = false;
	if (xep->hold_dirty)
		tnbc_verbs_tell_holds(xep);
	return taken;
}

static void tnbc_verbs_rewind(struct tnbc_xep *xep)
{
	pthread_mutex_lock(&xep->lock);
	/* kept packets go before the rest: they are older */
	while (xep->kept.n) {
		tnbc_verbs_ring_push_front(
			&xep->stash,
			tnbc_verbs_ring_at(&xep->kept, xep->kept.n - 1));
		xep->kept.n--;
	}
	xep->kept.head = 0;
	xep->kept_bufs = 0; /* counted again as they are kept again */
	pthread_mutex_unlock(&xep->lock);
}

static bool tnbc_verbs_pending(struct tnbc_xep *xep)
{
	bool r;

	/* a read's end, or a notice that lets us go, may be on the send
	 * queue before it was armed */
	if (atomic_load_explicit(&xep->reads, memory_order_relaxed) ||
	    atomic_load_explicit(&xep->xdom->held_peers, memory_order_relaxed))
		tnbc_verbs_reap(xep->xdom, false);
	pthread_mutex_lock(&xep->lock);
	tnbc_verbs_fill(xep);
	r = xep->stash.n != 0 || xep->rdone || xep->hold_dirty;
	pthread_mutex_unlock(&xep->lock);
	return r;
}

static void tnbc_verbs_look_mark(struct tnbc_xep *xep)
{
	(void)xep;
}

/* Arrivals wake nobody while the engine is awake: whatever waits is
 * looked at (pending) rather than remembered. */
static bool tnbc_verbs_unlooked(struct tnbc_xep *xep)
{
	return tnbc_verbs_pending(xep);
}

static bool tnbc_verbs_stalled(struct tnbc_xep *xep)
{
	(void)xep; /* a message completes whole */
	return false;
}

static bool tnbc_verbs_idle(struct tnbc_xep *xep)
{
	bool r;

	/* a read's completion comes on the domain's send queue: poll */
	if (atomic_load_explicit(&xep->reads, memory_order_relaxed) ||
	    pthread_mutex_trylock(&xep->lock))
		return false;
	tnbc_verbs_fill(xep);
	r = !xep->stash.n && !xep->rdone && !xep->hold_dirty;
	pthread_mutex_unlock(&xep->lock);
	return r;
}

/* While a packet is offered the answer is no, so that the protocol
 * takes it now (kept, holding its buffer) rather than leave it for later
 * in front of the packets behind it. */
static bool tnbc_verbs_quiet(struct tnbc_xep *xep)
{
	return !xep->polling && !tnbc_verbs_pending(xep);
}

/* ------------------------------------------------------------------ */
/* While the engine sleeps                                              */

/* Called whether or not verbs is the domain's first transport: from now
 * until the engine wakes, a packet on any endpoint kicks it.  Not for a
 * nap beside a polling application thread, which polls itself. */
static unsigned tnbc_verbs_sleep_begin(struct tnbc_xdom *xdom,
				       enum tnbc_sleep how)
{
	if (how != TNBC_SLEEP_NAP) {
		pthread_mutex_lock(&xdom->lock);
		for (struct tnbc_xep *e = xdom->eps; e; e = e->next)
			ibv_req_notify_cq(e->cq, 0);
		pthread_mutex_unlock(&xdom->lock);
		/* reads in flight end on the send queue, and the notice
		 * that lets a held peer's messages go comes there */
		if (atomic_load(&xdom->rwrs) || atomic_load(&xdom->held_peers))
			ibv_req_notify_cq(xdom->scq, 0);
	}
	return 0;
}

static void tnbc_verbs_stats(struct tnbc_xdom *xdom,
			     struct tnbc_xport_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->bad_pkts = atomic_load(&xdom->bad_pkts);
	st->refused = atomic_load(&xdom->refused);
	st->spilled = atomic_load(&xdom->spilled);
	st->held = atomic_load(&xdom->held);
}

/* Whether this machine has an RDMA device at all: FI_TNBC_XPORTS's
 * default holds verbs only then. */
static bool tnbc_verbs_usable(void)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);

	if (l)
		ibv_free_device_list(l);
	return n > 0;
}

const struct tnbc_xport_ops tnbc_verbs_ops = {
	.name = "verbs",
	.id = TNBC_XPORT_VERBS,
	.flags = TNBC_XPORT_PULL | TNBC_XPORT_PULL_LATER,
	.xaddr_off = TNBC_XADDR_VERBS_OFF,
	.xaddr_len = TNBC_XADDR_VERBS_LEN,
	.usable = tnbc_verbs_usable,
	.addr_parse = tnbc_verbs_addr_parse,
	.addr_str = tnbc_verbs_addr_str,
	.addr_scan = tnbc_verbs_addr_scan,
	.dom_open = tnbc_verbs_dom_open,
	.dom_close = tnbc_verbs_dom_close,
	.ep_open = tnbc_verbs_ep_open,
	.ep_close = tnbc_verbs_ep_close,
	.max_packet = tnbc_verbs_max_packet,
	.packet_limit = tnbc_verbs_packet_limit,
	.addr_known = tnbc_verbs_addr_known,
	.peer_get = tnbc_verbs_peer_get,
	.peer_alive = tnbc_verbs_peer_alive,
	.send = tnbc_verbs_send,
	.poll = tnbc_verbs_poll,
	.rewind = tnbc_verbs_rewind,
	.pending = tnbc_verbs_pending,
	.look_mark = tnbc_verbs_look_mark,
	.unlooked = tnbc_verbs_unlooked,
	.stalled = tnbc_verbs_stalled,
	.idle = tnbc_verbs_idle,
	.quiet = tnbc_verbs_quiet,
	.pull = tnbc_verbs_pull,
	.expose = tnbc_verbs_expose,
	.unexpose = tnbc_verbs_unexpose,
	.app_mark = tnbc_net_app_mark,
	.rx_posted = tnbc_net_rx_posted,
	.app_active = tnbc_net_app_active,
	.set_window = tnbc_net_set_window,
	.sleep_begin = tnbc_verbs_sleep_begin,
	.stats = tnbc_verbs_stats,
};
