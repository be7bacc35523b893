/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The TCP transport: endpoints on other hosts (or any host), over
 * ordinary sockets.
 *
 * Every endpoint listens on a port of its own; a domain connects to a
 * peer endpoint the first time it sends to it, and that one connection
 * carries every packet of the domain's endpoints to that peer (their
 * answers come back on the peer domain's connection to them).  The
 * stream is a sequence of records (tnbc_tcp_proto.h): a handshake that
 * names the endpoint the connection is for and binds the connection to
 * the process that dialed (proven with the domain's auth_key where it
 * has one), introductions that tell the receiver where another endpoint
 * of that process listens (so that it can answer a name that came in a
 * packet), and packets, each of which must come from that process.  A
 * connection may instead open with a question, who the endpoint
 * listening there is (resolve, for FI_SOCKADDR_IN), which the endpoint
 * answers with its whole address and closes.  Until its handshake is
 * over a connection is a stranger: it may send only the handshake's
 * records, within FI_TNBC_TCP_HELLO_MS, and an endpoint keeps at most
 * FI_TNBC_TCP_STRANGERS_MAX of them (fi_tnbc(7), SECURITY).
 *
 * Receiving is in two phases: a packet whose payload the protocol
 * places itself (TNBC_XPKT_PLACED: eager messages, rendezvous data) is
 * offered once its frame is in memory and the rest has begun to arrive,
 * and the payload is read from the socket straight into its destination
 * as it comes; any other packet is offered whole from the connection's
 * buffer.
 *
 * Sending writes the whole record at once when the socket takes it;
 * what it does not take waits in the connection's buffer (at most
 * TNBC_TCP_OUT_MAX bytes, then the sender sees -FI_EAGAIN: back
 * pressure), and is written when the socket can take more.
 *
 * One thread per domain (the waker) sleeps in epoll_wait on every
 * socket of the domain, edge-triggered: it accepts connections, writes
 * what senders left, notices peers that died, and, while the engine
 * sleeps, kicks it when data arrived; it never reads a packet.  The
 * engine and application threads read the sockets (poll).  (Data waking
 * the sleeping engine itself, its sockets in an epoll set the engine
 * sleeps in, was measured slower: fi_tnbc(7), ENGINE SLEEP POLICY.)
 *
 * A connection carries packets both ways when it can: the connecting
 * domain's only endpoint names itself in the hello and reads the
 * connection too, and the endpoint it reached sends that endpoint its
 * packets on it (tnbc_tcp_adopt) instead of opening a second one.  One
 * way, every small packet cost its receiver a bare acknowledgement sent
 * inside its read (the kernel's, for a stream that never answers),
 * which on a veth link was a third of a small message's latency;
 * answers now carry it.
 *
 * Locks: peer->lock > xdom->lock > xep->lock.  No lock is held
 * across a call into the core.  Connections and endpoints are freed by
 * the waker only (a closed one waits in xdom->grave until the waker is
 * past the events that may name it), and peers at dom_close.
 *
 * This file holds the domain and its waker, endpoints and peers, and the
 * ops table; tnbc_tcp.h lists what the others hold (addresses,
 * connections made and accepted, the handshake and lookups, sending,
 * receiving).
 */
#include "tnbc_tcp.h"

/* ------------------------------------------------------------------ */
/* Domain and waker                                                     */

/* The waker's rounds: strangers past the hello deadline are shut, a
 * handshake the listener never answered fails, and listeners paused
 * for want of descriptors are armed again. */
static bool tnbc_tcp_sweep(struct tnbc_xdom *xdom)
{
	bool kick = false;
	uint64_t now = tnbc_now_ns(),
		 resume = atomic_load(&xdom->accept_resume_ns);
	uint64_t hello_ns = xdom->hello_ns, timeout_ns = xdom->timeout_ns;

	if (resume && now >= resume) {
		atomic_store(&xdom->accept_resume_ns, 0);
		pthread_mutex_lock(&xdom->lock);
		for (struct tnbc_xep *e = xdom->eps; e; e = e->next) {
			struct epoll_event ev = {.events = EPOLLIN,
						 .data.ptr = &e->ev};

			if (atomic_exchange(&e->accept_paused, false))
				epoll_ctl(xdom->epfd, EPOLL_CTL_MOD, e->lfd,
					  &ev);
		}
		pthread_mutex_unlock(&xdom->lock);
	}
	if (now - xdom->swept_ns < TNBC_TCP_SWEEP_NS)
		return false;
	xdom->swept_ns = now;
	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep *e = xdom->eps; e; e = e->next) {
		pthread_mutex_lock(&e->lock);
		for (struct tnbc_tcp_conn *c = e->conns; c; c = c->next) {
			uint64_t part = atomic_load_explicit(
				&c->partial_ns, memory_order_relaxed);

			if (c->stranger && now - c->born_ns > hello_ns)
				tnbc_tcp_conn_shut(e, c,
						   "no handshake in time");
			else if (part && now - part > timeout_ns)
				tnbc_tcp_conn_shut(e, c,
						   "a record stopped halfway");
		}
		pthread_mutex_unlock(&e->lock);
	}
	for (struct tnbc_xpeer *p = xdom->peers; p; p = p->next) {
		/* lock order: peer before xdom; a busy peer is looked at
		 * next round */
		if (pthread_mutex_trylock(&p->lock))
			continue;
		if (p->state == TNBC_TCP_PROVING && now > p->hs_deadline) {
			tnbc_tcp_peer_dead(p, "no answer to the handshake");
			kick = true; /* what waits on it fails */
		}
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_unlock(&xdom->lock);
	return kick;
}

/* Frees what consumers closed: the waker is past every event that
 * could name it. */
static void tnbc_tcp_bury(struct tnbc_xdom *xdom)
{
	struct tnbc_tcp_conn *c;
	struct tnbc_xep *e;

	pthread_mutex_lock(&xdom->lock);
	c = xdom->grave_conns;
	e = xdom->grave_eps;
	xdom->grave_conns = NULL;
	xdom->grave_eps = NULL;
	pthread_mutex_unlock(&xdom->lock);
	while (c) {
		struct tnbc_tcp_conn *n = c->next;

		free(c->buf);
		free(c);
		c = n;
	}
	while (e) {
		struct tnbc_xep *n = e->next;

		close(e->lfd);
		pthread_mutex_destroy(&e->lock);
		free(e);
		e = n;
	}
}

static void *tnbc_tcp_waker(void *arg)
{
	struct tnbc_xdom *xdom = arg;
	struct epoll_event evs[64];

	for (;;) {
		bool kick = false;
		int n;

		tnbc_tcp_bury(xdom);
		if (tnbc_tcp_sweep(xdom))
			xdom->kick.kick(xdom->kick.arg);
		n = epoll_wait(xdom->epfd, evs, 64,
			       (int)(TNBC_TCP_SWEEP_NS / 1000000u));
		for (int i = 0; i < n; i++) {
			struct tnbc_tcp_ev *ev = evs[i].data.ptr;

			if (!ev)
				return NULL; /* the stop event */
			switch (ev->kind) {
			case TNBC_TCP_K_LISTEN: {
				struct tnbc_xep *xep = (struct tnbc_xep *)ev;

				tnbc_tcp_accept(xep);
				break;
			}
			case TNBC_TCP_K_DATA: {
				struct tnbc_xep *xep =
					(struct tnbc_xep
						 *)((char *)ev -
						    offsetof(struct tnbc_xep,
							     dev));

				/* one-shot: armed again at the next sleep */
				atomic_store(&xep->armed, false);
				atomic_fetch_add(&xep->events, 1);
				kick = true;
				break;
			}
			case TNBC_TCP_K_PEER:
				if (tnbc_tcp_peer_event(
					    (struct tnbc_xpeer
						     *)((char *)ev -
							offsetof(struct
								 tnbc_xpeer,
								 ev)),
					    evs[i].events))
					kick = true;
				break;
			}
		}
		if (kick)
			xdom->kick.kick(xdom->kick.arg);
	}
}

/* The largest of a net.ipv4 sysctl's three numbers (tcp_rmem, tcp_wmem),
 * or dflt when it cannot be read. */
static size_t tnbc_tcp_sysctl_max(const char *name, size_t dflt)
{
	char path[64];
	unsigned long lo, def, hi;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", name);
	f = fopen(path, "re");
	if (!f)
		return dflt;
	n = fscanf(f, "%lu %lu %lu", &lo, &def, &hi);
	fclose(f);
	return n == 3 && hi ? (size_t)hi : dflt;
}

static int tnbc_tcp_dom_open(struct tnbc_xdom **out,
			     const struct tnbc_xdom_attr *attr)
{
	struct tnbc_xdom *xdom = calloc(1, sizeof(*xdom));
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	int ret;

	if (!xdom)
		return -FI_ENOMEM;
	xdom->kick = attr->wake;
	xdom->host_busy = attr->host_busy;
	xdom->hello_ns = tnbc_env.tcp_hello_ms * 1000000ull;
	xdom->timeout_ns = tnbc_env.tcp_timeout_ms * 1000000ull;
	xdom->kernel_bufs = tnbc_tcp_sysctl_max("tcp_wmem", 4u << 20) +
			    tnbc_tcp_sysctl_max("tcp_rmem", 6u << 20);
	xdom->strangers_max = tnbc_env.tcp_strangers_max;
	xdom->key_len = (uint16_t)attr->auth_key_size;
	if (attr->auth_key_size)
		memcpy(xdom->key, attr->auth_key, attr->auth_key_size);
	xdom->ops = &tnbc_tcp_ops;
	xdom->epfd = -1;
	xdom->stopfd = -1;
	pthread_mutex_init(&xdom->lock, NULL);
	tnbc_net_app_init(&xdom->app);
	tnbc_net_book_init(&xdom->book);
	xdom->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (xdom->epfd < 0) {
		ret = -errno;
		goto err;
	}
	xdom->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (xdom->stopfd < 0) {
		ret = -errno;
		goto err;
	}
	if (epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, xdom->stopfd, &ev)) {
		ret = -errno;
		goto err;
	}
	ret = -pthread_create(&xdom->waker, NULL, tnbc_tcp_waker, xdom);
	if (ret)
		goto err;
	xdom->waker_up = true;
	*out = xdom;
	return 0;
err:
	FI_WARN(&tnbc_prov, FI_LOG_DOMAIN, "tcp: domain: %s\n",
		fi_strerror(-ret));
	if (xdom->stopfd >= 0)
		close(xdom->stopfd);
	if (xdom->epfd >= 0)
		close(xdom->epfd);
	tnbc_net_book_fini(&xdom->book);
	pthread_mutex_destroy(&xdom->lock);
	free(xdom);
	return ret;
}

static void tnbc_tcp_dom_close(struct tnbc_xdom *xdom)
{
	uint64_t one = 1;

	if (write(xdom->stopfd, &one, sizeof(one)) != sizeof(one))
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN, "tcp: waker not told\n");
	pthread_join(xdom->waker, NULL);
	tnbc_tcp_bury(xdom);
	while (xdom->peers) {
		struct tnbc_xpeer *p = xdom->peers;

		xdom->peers = p->next;
		if (p->hs_conn) {
			close(p->hs_conn->fd);
			free(p->hs_conn);
		}
		if (p->fd >= 0)
			close(p->fd);
		free(p->out);
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
	close(xdom->stopfd);
	close(xdom->epfd);
	tnbc_net_book_fini(&xdom->book);
	pthread_mutex_destroy(&xdom->lock);
	free(xdom);
}

/* ------------------------------------------------------------------ */
/* Endpoints                                                            */

/* Takes the endpoint off its domain's list (introductions and
 * sleep_begin look there). */
static void tnbc_tcp_ep_unlink(struct tnbc_xep *xep)
{
	struct tnbc_xdom *xdom = xep->xdom;

	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep **it = &xdom->eps; *it; it = &(*it)->next)
		if (*it == xep) {
			*it = xep->next;
			break;
		}
	pthread_mutex_unlock(&xdom->lock);
}

static int tnbc_tcp_ep_open(struct tnbc_xdom *xdom,
			    const struct tnbc_name *name, uint8_t *xaddr,
			    struct tnbc_xep **out)
{
	struct tnbc_tcp_addr *want = (struct tnbc_tcp_addr *)(void *)xaddr;
	struct epoll_event ev;
	struct sockaddr_storage ss;
	struct tnbc_xep *xep;
	socklen_t sl;
	int one = 1, ret;

	xep = calloc(1, sizeof(*xep));
	if (!xep)
		return -FI_ENOMEM;
	xep->ev.kind = TNBC_TCP_K_LISTEN;
	xep->dev.kind = TNBC_TCP_K_DATA;
	xep->xdom = xdom;
	xep->name = *name;
	xep->kept_tail = &xep->kept;
	xep->pfd = epoll_create1(EPOLL_CLOEXEC);
	if (xep->pfd < 0) {
		ret = -errno;
		free(xep);
		return ret;
	}
	pthread_mutex_init(&xep->lock, NULL);
	xep->addr = *want;
	if (!xep->addr.family)
		xep->addr.family = 4;
	/* a service is reached at its number, where it is a port (peers
	 * that know a larger one from its name learn the port it got) */
	if (name->kind == TNBC_NAME_SVC && name->uid <= 65535)
		xep->addr.port = htons((uint16_t)name->uid);
	xep->lfd = socket(xep->addr.family == 6 ? AF_INET6 : AF_INET,
			  SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (xep->lfd < 0) {
		ret = -errno;
		goto err;
	}
	setsockopt(xep->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sl = tnbc_tcp_sockaddr(&xep->addr, &ss);
	if (bind(xep->lfd, (struct sockaddr *)&ss, sl) ||
	    listen(xep->lfd, 128)) {
		ret = errno == EADDRINUSE ? -FI_EADDRINUSE : -errno;
		goto err_fd;
	}
	sl = sizeof(ss);
	getsockname(xep->lfd, (struct sockaddr *)&ss, &sl);
	tnbc_tcp_from_sockaddr((struct sockaddr *)&ss, &xep->addr);
	if (tnbc_tcp_any(&xep->addr)) {
		uint16_t port = xep->addr.port;

		tnbc_tcp_host_addr(&xep->addr);
		xep->addr.port = port;
	}
	pthread_mutex_lock(&xdom->lock);
	xep->next = xdom->eps;
	xdom->eps = xep;
	pthread_mutex_unlock(&xdom->lock);
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.ptr = &xep->dev;
	atomic_store(&xep->armed, true);
	epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, xep->pfd, &ev);
	ev.events = EPOLLIN;
	ev.data.ptr = &xep->ev;
	if (epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, xep->lfd, &ev)) {
		ret = -errno;
		tnbc_tcp_ep_unlink(xep);
		goto err_fd;
	}
	*want = xep->addr;
	*out = xep;
	return 0;
err_fd:
	close(xep->lfd);
err:
	if (ret != -FI_EADDRINUSE)
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL, "tcp: endpoint: %s\n",
			fi_strerror(-ret));
	close(xep->pfd);
	pthread_mutex_destroy(&xep->lock);
	free(xep);
	return ret;
}

static void tnbc_tcp_held_free(struct tnbc_tcp_held *h)
{
	while (h) {
		struct tnbc_tcp_held *n = h->next;

		free(h);
		h = n;
	}
}

static void tnbc_tcp_ep_named(struct tnbc_xep *xep,
			      const struct tnbc_addr *self)
{
	xep->whole = *self;
	atomic_store_explicit(&xep->named, true, memory_order_release);
}

static void tnbc_tcp_ep_close(struct tnbc_xep *xep)
{
	struct tnbc_xdom *xdom = xep->xdom;
	struct tnbc_tcp_conn *c, *last = NULL;

	/* out of the list first: sleep_begin arms what it finds there */
	tnbc_tcp_ep_unlink(xep);
	epoll_ctl(xdom->epfd, EPOLL_CTL_DEL, xep->lfd, NULL);
	epoll_ctl(xdom->epfd, EPOLL_CTL_DEL, xep->pfd, NULL);
	/* Stops listening and frees the port now, but keeps the descriptor
	 * until the waker buries xep: the waker may hold an event for it
	 * and call accept, which a closed number, reused meanwhile by
	 * another socket of the process, would let take that socket's
	 * connection.  A shut listener only fails accept (EINVAL). */
	shutdown(xep->lfd, SHUT_RDWR);
	pthread_mutex_lock(&xep->lock);
	xep->closing = true;
	c = xep->conns;
	xep->conns = NULL;
	pthread_mutex_unlock(&xep->lock);
	for (struct tnbc_tcp_conn *it = c; it; it = it->next) {
		/* as in conn_drop: the socket may be a peer's too */
		shutdown(it->fd, SHUT_RDWR);
		close(it->fd);
		last = it;
	}
	close(xep->pfd);
	tnbc_tcp_held_free(xep->replay);
	tnbc_tcp_held_free(xep->kept);
	pthread_mutex_lock(&xdom->lock);
	if (last) {
		last->next = xdom->grave_conns;
		xdom->grave_conns = c;
	}
	xep->next = xdom->grave_eps;
	xdom->grave_eps = xep;
	pthread_mutex_unlock(&xdom->lock);
}

/* Eager up to FI_TNBC_TCP_EAGER_SIZE: the handshake of a rendezvous
 * costs a round trip, and a stream has no slots an eager message would
 * fill (unexpected ones are held up to FI_TNBC_UNEXP_MAX, then senders
 * wait).  Between namespaces, 64 KiB messages moved 2.0 to 3.0 GB/s
 * eagerly and 1.0 to 1.4 by rendezvous (fi_tnbc(7)). */
static size_t tnbc_tcp_eager_max(struct tnbc_xpeer *peer)
{
	(void)peer;
	return tnbc_env.tcp_eager_size;
}

static void tnbc_tcp_addr_known(struct tnbc_xdom *xdom,
				const struct tnbc_name *name,
				const uint8_t *xaddr)
{
	const struct tnbc_tcp_addr *a = (const void *)xaddr;

	if ((a->family == 4 || a->family == 6) && a->port)
		tnbc_net_book_pin(&xdom->book, name, a, sizeof(*a));
}

static bool tnbc_tcp_peer_alive(struct tnbc_xpeer *peer)
{
	return !atomic_load(&peer->dead);
}

/* ------------------------------------------------------------------ */
/* While the engine sleeps                                              */

/* Called whether or not TCP is the domain's first transport: from now
 * until the engine wakes, data on any endpoint's connection kicks it.
 * Not for a nap beside a polling application thread, which reads the
 * sockets itself. */
static unsigned tnbc_tcp_sleep_begin(struct tnbc_xdom *xdom,
				     enum tnbc_sleep how)
{
	if (how != TNBC_SLEEP_NAP) {
		pthread_mutex_lock(&xdom->lock);
		for (struct tnbc_xep *e = xdom->eps; e; e = e->next) {
			struct epoll_event ev = {.events =
							 EPOLLIN | EPOLLONESHOT,
						 .data.ptr = &e->dev};

			/* Still armed: it has not fired since.  One that
			 * fired but whose mark the waker has yet to clear
			 * kicks after this, and the next sleep arms it.
			 * Data there already fires at once. */
			if (!atomic_exchange(&e->armed, true) &&
			    epoll_ctl(xdom->epfd, EPOLL_CTL_MOD, e->pfd, &ev))
				atomic_store(&e->armed, false); /* next sleep */
		}
		pthread_mutex_unlock(&xdom->lock);
	}
	return 0;
}

static void tnbc_tcp_stats(struct tnbc_xdom *xdom, struct tnbc_xport_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->bad_pkts = atomic_load(&xdom->bad_pkts);
	st->refused = atomic_load(&xdom->refused);
	st->placed_bytes = atomic_load(&xdom->placed_bytes);
	st->stream_writes = atomic_load(&xdom->writes);
	st->strangers = atomic_load(&xdom->strangers);
	st->held = atomic_load(&xdom->held);
}

const struct tnbc_xport_ops tnbc_tcp_ops = {
	.name = "tcp",
	.id = TNBC_XPORT_TCP,
	.flags = 0,
	.xaddr_off = TNBC_XADDR_TCP_OFF,
	.xaddr_len = TNBC_XADDR_TCP_LEN,
	.addr_parse = tnbc_tcp_addr_parse,
	.addr_str = tnbc_tcp_addr_str,
	.addr_scan = tnbc_tcp_addr_scan,
	.addr_sock = tnbc_tcp_addr_sock,
	.resolve = tnbc_tcp_resolve,
	.dom_open = tnbc_tcp_dom_open,
	.dom_close = tnbc_tcp_dom_close,
	.ep_open = tnbc_tcp_ep_open,
	.ep_close = tnbc_tcp_ep_close,
	.ep_named = tnbc_tcp_ep_named,
	.max_packet = tnbc_tcp_max_packet,
	.eager_max = tnbc_tcp_eager_max,
	.packet_limit = tnbc_tcp_packet_limit,
	.link_packet = tnbc_tcp_rx_max,
	.addr_known = tnbc_tcp_addr_known,
	.peer_get = tnbc_tcp_peer_get,
	.peer_alive = tnbc_tcp_peer_alive,
	.send = tnbc_tcp_send,
	.poll = tnbc_tcp_poll,
	.rewind = tnbc_tcp_rewind,
	.pending = tnbc_tcp_pending,
	.look_mark = tnbc_tcp_look_mark,
	.unlooked = tnbc_tcp_unlooked,
	.stalled = tnbc_tcp_stalled,
	.idle = tnbc_tcp_idle,
	.quiet = tnbc_tcp_quiet,
	.pull = tnbc_tcp_pull,
	.app_mark = tnbc_net_app_mark,
	.rx_posted = tnbc_net_rx_posted,
	.app_active = tnbc_net_app_active,
	.set_window = tnbc_net_set_window,
	.sleep_begin = tnbc_tcp_sleep_begin,
	.stats = tnbc_tcp_stats,
};
