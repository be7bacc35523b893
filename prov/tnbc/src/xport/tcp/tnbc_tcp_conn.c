/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The TCP transport's peers and connections as state: a domain's peers
 * found or made, what a peer takes, a peer given up, and an endpoint's
 * list of connections.  The connection manager (tnbc_tcp_cm.c) decides
 * when; this only records, so the handshake, sending and receiving use
 * it without calling back up into the manager.
 */
#include "tnbc_tcp.h"

/* As large as shm's: fi_info's limits hold whichever transport reaches
 * a peer. */
size_t tnbc_tcp_packet_limit(void)
{
	return tnbc_env.slot_size - 16;
}

/* What a peer sends and takes is larger: a stream has no slots, and the
 * protocol moves large messages and RMA in packets of this size.  At
 * shm's 32 KiB, each packet's system calls and the head read with its
 * record cost a 1 MiB stream a tenth to two fifths of its bandwidth, and
 * 256 KiB packets still a quarter against 1 MiB ones (fi_tnbc(7));
 * larger packets hold the small ones behind them longer. */
size_t tnbc_tcp_rx_max(void)
{
	size_t slot = tnbc_tcp_packet_limit();

	return slot > TNBC_TCP_PACKET_MAX ? slot : TNBC_TCP_PACKET_MAX;
}

size_t tnbc_tcp_max_packet(struct tnbc_xpeer *peer)
{
	(void)peer;
	return tnbc_tcp_rx_max();
}

/* ------------------------------------------------------------------ */
/* Peers                                                                */

/* The peer named name, if the domain has one.  xdom->lock held. */
struct tnbc_xpeer *tnbc_tcp_peer_find(struct tnbc_xdom *xdom,
				      const struct tnbc_name *name)
{
	struct tnbc_xpeer *p;

	for (p = xdom->peers; p; p = p->next)
		if (tnbc_name_same(&p->name, name))
			break;
	return p;
}

int tnbc_tcp_peer_get(struct tnbc_xdom *xdom, const struct tnbc_name *name,
		      const uint8_t *xaddr, struct tnbc_xpeer **out)
{
	const struct tnbc_tcp_addr *given = (const void *)xaddr;
	struct tnbc_tcp_addr a;
	struct tnbc_xpeer *p, *q;

	if (!(name->xports & TNBC_XPORT_BIT(TNBC_XPORT_TCP)) ||
	    (name->kind != TNBC_NAME_PID && name->kind != TNBC_NAME_SVC))
		return -FI_EINVAL;
	pthread_mutex_lock(&xdom->lock);
	p = tnbc_tcp_peer_find(xdom, name);
	pthread_mutex_unlock(&xdom->lock);
	if (p) {
		*out = p;
		return 0;
	}
	if (given && given->family && given->port) {
		a = *given;
		/* the application's word: what connections say of the name
		 * never moves it */
		tnbc_net_book_pin(&xdom->book, name, &a, sizeof(a));
	} else if (!tnbc_net_book_get(&xdom->book, name, &a, sizeof(a)))
		return -FI_EHOSTUNREACH;
	if ((a.family != 4 && a.family != 6) || !a.port)
		return -FI_EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -FI_ENOMEM;
	p->base.ops = xdom->ops;
	p->ev.kind = TNBC_TCP_K_PEER;
	p->xdom = xdom;
	p->name = *name;
	p->addr = a;
	p->fd = -1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_lock(&xdom->lock);
	/* another thread may have made it meanwhile */
	q = tnbc_tcp_peer_find(xdom, name);
	if (q) {
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

void tnbc_tcp_peer_dead(struct tnbc_xpeer *p, const char *why)
{
	if (p->state == TNBC_TCP_DEAD)
		return;
	FI_INFO(&tnbc_prov, FI_LOG_EP_DATA, "tcp: peer %u/%u unreachable: %s\n",
		p->name.pid, p->name.uid, why);
	p->state = TNBC_TCP_DEAD;
	atomic_store(&p->dead, true);
	p->out_len = p->out_off = 0;
	if (p->hs_conn) {
		/* never listened to: nobody else knows it */
		close(p->hs_conn->fd);
		free(p->hs_conn);
		p->hs_conn = NULL;
	}
	if (p->fd >= 0) {
		epoll_ctl(p->xdom->epfd, EPOLL_CTL_DEL, p->fd, NULL);
		/* the endpoint reading the other end of a two-way one hears
		 * of it */
		if (p->two_way)
			shutdown(p->fd, SHUT_RDWR);
		close(p->fd);
		p->fd = -1;
	}
}

/* Notes that the endpoint named src reached us one way: for its peer,
 * or, while we have none, for the one made when we first answer. */
void tnbc_tcp_one_way(struct tnbc_xdom *xdom, const struct tnbc_name *src)
{
	struct tnbc_xpeer *p;

	pthread_mutex_lock(&xdom->lock);
	p = tnbc_tcp_peer_find(xdom, src);
	if (p) {
		atomic_store(&p->dialed_one_way, true);
	} else {
		xdom->one_way[xdom->one_way_next] = *src;
		xdom->one_way_next =
			(xdom->one_way_next + 1) % TNBC_TCP_ONE_WAY_NAMES;
	}
	pthread_mutex_unlock(&xdom->lock);
}

/* ------------------------------------------------------------------ */
/* An endpoint's connections                                            */

/* Lists c among xep's connections, read by its polls; false when xep
 * closes.  xep->lock not held. */
bool tnbc_tcp_conn_add(struct tnbc_xep *xep, struct tnbc_tcp_conn *c)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
				 .data.ptr = &c->ev};

	pthread_mutex_lock(&xep->lock);
	if (xep->closing) {
		pthread_mutex_unlock(&xep->lock);
		return false;
	}
	c->serial = ++xep->serials;
	c->next = xep->conns;
	xep->conns = c;
	pthread_mutex_unlock(&xep->lock);
	epoll_ctl(xep->pfd, EPOLL_CTL_ADD, c->fd, &ev);
	atomic_fetch_add(&xep->nconns, 1);
	/* bytes may have come before the registration */
	atomic_fetch_add(&xep->events, 1);
	return true;
}

/* Ends a connection from outside its consumer: the socket is shut, and
 * the consumer's next read finds its end and drops it.  xep->lock held,
 * c listed. */
void tnbc_tcp_conn_shut(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			const char *why)
{
	if (c->shut)
		return;
	c->shut = true;
	shutdown(c->fd, SHUT_RDWR);
	if (c->stranger)
		atomic_fetch_add(&xep->xdom->strangers, 1);
	FI_INFO(&tnbc_prov, FI_LOG_EP_DATA, "tcp: connection closed: %s\n",
		why);
}
