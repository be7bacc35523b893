/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The TCP transport's connection manager: connections made (dialing a
 * peer, adopting a connection the peer made to us, waiting for it to
 * dial) and accepted (listing them, strangers, the listener paused out
 * of descriptors), and the waker's handling of a peer connection's
 * events.  Apart from sending and receiving, which ask it for a
 * connection (tnbc_tcp_up) and only use one that is made.
 */
#include "tnbc_tcp.h"
#include "../tnbc_hmac.h"

static void tnbc_tcp_dial_wait_end(struct tnbc_xpeer *p);

/* A connection just made is up: at once with no key, after the
 * handshake with one.  peer->lock held. */
static void tnbc_tcp_came_up(struct tnbc_xpeer *p)
{
	if (!p->xdom->key_len) {
		p->state = TNBC_TCP_UP;
		return;
	}
	p->state = TNBC_TCP_PROVING;
	p->hs_deadline = tnbc_now_ns() + p->xdom->timeout_ns;
}

/* The waker's view of an outgoing connection's event; whether the
 * engine is to look: the connection came up or died (what waits on it
 * moves or fails), or a send it refused may go now.  Room the socket
 * made for bytes already taken is the waker's to fill alone: nothing
 * else waits for it, and the engine was woken for each such event. */
bool tnbc_tcp_peer_event(struct tnbc_xpeer *p, uint32_t events)
{
	bool kick;
	int was;

	pthread_mutex_lock(&p->lock);
	was = p->state;
	if (p->state == TNBC_TCP_CONNECTING &&
	    (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err)
			tnbc_tcp_peer_dead(p, strerror(err ? err : errno));
		else
			tnbc_tcp_came_up(p);
	}
	if (p->state == TNBC_TCP_PROVING) {
		/* the hello goes first */
		tnbc_tcp_flush(p);
		if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
			tnbc_tcp_hs_read(p);
	}
	if (p->state == TNBC_TCP_UP && p->two_way && (events & EPOLLRDHUP))
		tnbc_tcp_peer_dead(p, "it closed the connection");
	if (p->state == TNBC_TCP_UP && !p->two_way && (events & EPOLLIN)) {
		char c;
		ssize_t n = recv(p->fd, &c, 1, MSG_DONTWAIT);

		/* the other side never writes: it closed, or went away */
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			tnbc_tcp_peer_dead(p, n ? strerror(errno)
						: "it closed the connection");
		else if (n > 0)
			tnbc_tcp_peer_dead(p, "it wrote to a send-only "
					      "connection");
	}
	if (p->state == TNBC_TCP_UP && (events & (EPOLLERR | EPOLLHUP)))
		tnbc_tcp_peer_dead(p, "connection error");
	tnbc_tcp_flush(p);
	kick = (int)p->state != was || p->refused;
	p->refused = false;
	pthread_mutex_unlock(&p->lock);
	return kick;
}

static struct tnbc_tcp_conn *tnbc_tcp_conn_new(struct tnbc_xep *xep, int fd)
{
	struct tnbc_tcp_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ev.kind = TNBC_TCP_K_DATA; /* never an event of its own */
	c->xep = xep;
	c->fd = fd;
	c->born_ns = tnbc_now_ns();
	return c;
}

/* Past FI_TNBC_TCP_STRANGERS_MAX connections that have not proven who
 * they are, the oldest goes: strangers cost a bounded number of
 * sockets, and one that proves itself quickly still gets in. */
static void tnbc_tcp_strangers_trim(struct tnbc_xep *xep)
{
	struct tnbc_tcp_conn *oldest = NULL;
	unsigned live = 0;

	pthread_mutex_lock(&xep->lock);
	for (struct tnbc_tcp_conn *c = xep->conns; c; c = c->next)
		if (c->stranger && !c->shut) {
			live++;
			oldest = c; /* the list is newest first */
		}
	if (oldest && live > xep->xdom->strangers_max)
		tnbc_tcp_conn_shut(xep, oldest, "too many strangers");
	pthread_mutex_unlock(&xep->lock);
}

/* Out of descriptors: accept would fail again at once for as long, and
 * the listener, level-triggered, fire again; it is left unarmed for a
 * while (the waker arms it again), and the connections wait in its
 * backlog. */
static void tnbc_tcp_accept_pause(struct tnbc_xep *xep, int err)
{
	struct tnbc_xdom *xdom = xep->xdom;
	struct epoll_event ev = {.events = 0, .data.ptr = &xep->ev};

	if (atomic_exchange(&xep->accept_paused, true))
		return;
	epoll_ctl(xdom->epfd, EPOLL_CTL_MOD, xep->lfd, &ev);
	atomic_store(&xdom->accept_resume_ns,
		     tnbc_now_ns() + TNBC_TCP_ACCEPT_PAUSE_NS);
	FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
		"tcp: cannot accept a connection (%s): the listener waits "
		"%llu ms\n",
		strerror(err), TNBC_TCP_ACCEPT_PAUSE_NS / 1000000ull);
}

void tnbc_tcp_accept(struct tnbc_xep *xep)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(xep->lfd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct tnbc_tcp_conn *c;
		int one = 1;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				tnbc_tcp_accept_pause(xep, errno);
			return; /* EAGAIN: none left */
		}
		c = tnbc_tcp_conn_new(xep, fd);
		if (!c) {
			close(fd);
			continue;
		}
		tnbc_tcp_from_sockaddr((struct sockaddr *)&ss, &c->from);
		sl = sizeof(ss);
		if (!getsockname(fd, (struct sockaddr *)&ss, &sl)) {
			struct tnbc_tcp_addr here;

			tnbc_tcp_from_sockaddr((struct sockaddr *)&ss, &here);
			c->local = tnbc_tcp_loopback(&c->from) ||
				   tnbc_tcp_same_host(&here, &c->from);
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->stranger = true;
		atomic_fetch_add(&xep->strangers, 1);
		if (!tnbc_tcp_conn_add(xep, c)) {
			atomic_fetch_sub(&xep->strangers, 1);
			close(fd);
			free(c);
			return;
		}
		if (atomic_load(&xep->strangers) > xep->xdom->strangers_max)
			tnbc_tcp_strangers_trim(xep);
	}
}

/* Options of every connection a peer's packets go out on. */
static void tnbc_tcp_sock_opts(int fd)
{
	unsigned timeout = (unsigned)tnbc_env.tcp_timeout_ms;
	int one = 1, idle = 1, cnt;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a peer that stops answering (its host or link gone) fails within
	 * FI_TNBC_TCP_TIMEOUT_MS: unacknowledged data, or no answer to
	 * keepalive probes once a second after a second idle */
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout,
		   sizeof(timeout));
	cnt = (int)(timeout / 1000u) > 1 ? (int)(timeout / 1000u) - 1 : 1;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* The connection p opens is two-way when src, the endpoint sending, is
 * its domain's only one: src reads it (a connection of its own on the
 * same socket), and the hello names it.  With several endpoints the
 * domain could not tell whose an answer is; they stay one way.
 * peer->lock held. */
static void tnbc_tcp_dial_back(struct tnbc_xpeer *p,
			       const struct tnbc_name *src, int fd,
			       struct tnbc_tcp_hello *hello)
{
	struct tnbc_xdom *xdom = p->xdom;
	struct tnbc_tcp_conn *c;
	struct tnbc_xep *xep;
	int dfd;

	pthread_mutex_lock(&xdom->lock);
	xep = xdom->eps;
	if (!src || !xep || xep->next || !tnbc_name_same(&xep->name, src))
		goto out;
	dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dfd < 0)
		goto out;
	c = tnbc_tcp_conn_new(xep, dfd);
	if (!c) {
		close(dfd);
		goto out;
	}
	/* what comes back is the peer's, proven by its challenge where a
	 * key asks for one: listed only then */
	c->hello = true;
	c->proven = true;
	c->dialed = true;
	c->from = p->addr;
	c->id = p->name;
	if (p->xdom->key_len) {
		p->hs_conn = c;
	} else if (!tnbc_tcp_conn_add(xep, c)) {
		close(dfd);
		free(c);
		goto out;
	}
	hello->flags |= TNBC_TCP_HELLO_TWO_WAY;
	p->two_way = true;
out:
	pthread_mutex_unlock(&xdom->lock);
}

/* Whether name a orders before b: any order both sides of a connection
 * compute alike. */
static bool tnbc_tcp_name_before(const struct tnbc_name *a,
				 const struct tnbc_name *b)
{
	if (a->host != b->host)
		return a->host < b->host;
	if (a->pid != b->pid)
		return a->pid < b->pid;
	if (a->uid != b->uid)
		return a->uid < b->uid;
	return a->nonce < b->nonce;
}

/* Whether p's endpoint was introduced on a one-way connection before p
 * existed.  xdom->lock held. */
static bool tnbc_tcp_one_way_seen(struct tnbc_xdom *xdom,
				  const struct tnbc_xpeer *p)
{
	for (unsigned i = 0; i < TNBC_TCP_ONE_WAY_NAMES; i++)
		if (xdom->one_way[i].kind &&
		    tnbc_name_same(&xdom->one_way[i], &p->name))
			return true;
	return false;
}

/*
 * Two endpoints that first send to each other at the same moment would
 * each dial, and each connection would then carry packets one way only:
 * every small packet costs its receiver a bare acknowledgement (see
 * above).  Open MPI's osu_latency between two namespaces took 17 to
 * 18 us in the runs where both had dialed, 10.3 to 13.5 where one had
 * adopted the other's connection.  So the endpoint whose name orders
 * first dials at once, and the other, when the connection it would dial
 * could be two-way, gives it TNBC_TCP_DIAL_WAIT_NS to come: its sends
 * wait in its queue meanwhile (-FI_EAGAIN), and adopt that connection as
 * soon as its hello is read.  It dials itself once the time is up, so a
 * peer that never sends costs its first message that long, once, or as
 * soon as the peer turns out to have dialed one way (a domain of
 * several endpoints: its introduction comes on a connection whose hello
 * named no reader).  At
 * most TNBC_TCP_DIAL_WAITS peers of a domain are waited for at a time;
 * the others are dialed at once.  True while the send must wait;
 * peer->lock held.
 */
static bool tnbc_tcp_dial_wait(struct tnbc_xpeer *p,
			       const struct tnbc_name *src)
{
	struct tnbc_xdom *xdom = p->xdom;
	uint64_t now;
	unsigned i;

	if (p->dial_wait_ns) {
		if (!atomic_load(&p->dialed_one_way) &&
		    tnbc_now_ns() - p->dial_wait_ns < TNBC_TCP_DIAL_WAIT_NS)
			return true;
		tnbc_tcp_dial_wait_end(p);
		return false;
	}
	/* a service's name has no process: the two sides could disagree */
	if (p->dial_waited || !src || src->kind != TNBC_NAME_PID ||
	    p->name.kind != TNBC_NAME_PID ||
	    !tnbc_tcp_name_before(&p->name, src))
		return false;
	p->dial_waited = true; /* asked once */
	now = tnbc_now_ns();
	pthread_mutex_lock(&xdom->lock);
	/* as tnbc_tcp_dial_back decides whether answers may come back */
	if (xdom->eps && !xdom->eps->next &&
	    tnbc_name_same(&xdom->eps->name, src) &&
	    !tnbc_tcp_one_way_seen(xdom, p)) {
		for (i = 0;
		     i < TNBC_TCP_DIAL_WAITS && xdom->dial_slots[i] > now; i++)
			;
		if (i < TNBC_TCP_DIAL_WAITS) {
			xdom->dial_slots[i] = now + TNBC_TCP_DIAL_WAIT_NS;
			if (atomic_load(&xdom->dial_until) <
			    xdom->dial_slots[i])
				atomic_store(&xdom->dial_until,
					     xdom->dial_slots[i]);
			p->dial_slot = i;
			p->dial_wait_ns = now;
		}
	}
	pthread_mutex_unlock(&xdom->lock);
	return p->dial_wait_ns != 0;
}

/* The wait for p to dial is over (or none was on): its slot is free, and
 * polls stop accepting once no other wait is on.  peer->lock held. */
static void tnbc_tcp_dial_wait_end(struct tnbc_xpeer *p)
{
	struct tnbc_xdom *xdom = p->xdom;
	uint64_t until = 0, now = tnbc_now_ns();

	p->dial_waited = true;
	if (!p->dial_wait_ns)
		return;
	p->dial_wait_ns = 0;
	pthread_mutex_lock(&xdom->lock);
	xdom->dial_slots[p->dial_slot] = 0;
	for (unsigned i = 0; i < TNBC_TCP_DIAL_WAITS; i++)
		if (xdom->dial_slots[i] > now && xdom->dial_slots[i] > until)
			until = xdom->dial_slots[i];
	atomic_store(&xdom->dial_until, until);
	pthread_mutex_unlock(&xdom->lock);
}

/* Whether a peer's connection may be awaited (tnbc_tcp_dial_wait): the
 * clock is read only then. */
bool tnbc_tcp_awaited(struct tnbc_xdom *xdom)
{
	uint64_t until =
		atomic_load_explicit(&xdom->dial_until, memory_order_relaxed);

	if (!until)
		return false;
	if (tnbc_now_ns() < until)
		return true;
	/* over, however its waits ended */
	atomic_compare_exchange_strong(&xdom->dial_until, &until, 0);
	return false;
}

/* Whether the handshake of p's connection, just begun, is over already
 * (over a local link it often is): then the hello and the packet behind
 * it go at once, not when the waker next runs, which on a busy CPU can
 * be a scheduler tick later.  peer->lock held. */
static void tnbc_tcp_up_now(struct tnbc_xpeer *p)
{
	struct pollfd pfd = {.fd = p->fd, .events = POLLOUT};
	socklen_t len = sizeof(int);
	int err = 0;

	if (p->state == TNBC_TCP_CONNECTING && poll(&pfd, 1, 0) == 1 &&
	    !(pfd.revents & (POLLERR | POLLHUP)) &&
	    !getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) && !err) {
		tnbc_tcp_came_up(p);
		if (p->state == TNBC_TCP_PROVING)
			tnbc_tcp_flush(p); /* the hello */
	}
}

/* A connection leaves from the address its endpoint listens on, which
 * its hello names: without a key, the listener takes the name only
 * from that host.  (A host of several addresses would otherwise leave
 * from whichever its routes choose.) */
static void tnbc_tcp_bind_source(int fd, const struct tnbc_tcp_addr *self,
				 const struct tnbc_tcp_addr *to)
{
	struct tnbc_tcp_addr a = *self;
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1;

	if (self->family != to->family || tnbc_tcp_any(self) ||
	    (tnbc_tcp_loopback(self) && !tnbc_tcp_loopback(to)))
		return;
	a.port = 0;
	sl = tnbc_tcp_sockaddr(&a, &ss);
	/* the port is chosen at connect, as an unbound socket's */
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl))
		FI_INFO(&tnbc_prov, FI_LOG_EP_CTRL,
			"tcp: connecting from the listening address: %s\n",
			strerror(errno));
}

static int tnbc_tcp_connect(struct tnbc_xpeer *p, const struct tnbc_name *src)
{
	struct tnbc_tcp_rec rec = {.len = sizeof(struct tnbc_tcp_hello),
				   .type = TNBC_TCP_HELLO};
	struct tnbc_tcp_rec prec = {.len = sizeof(struct tnbc_tcp_proof),
				    .type = TNBC_TCP_PROOF};
	static const struct tnbc_tcp_proof blank;
	struct tnbc_tcp_hello *hello = &p->hs_hello;
	struct tnbc_xdom *xdom = p->xdom;
	struct epoll_event ev;
	struct sockaddr_storage ss;
	socklen_t sl = tnbc_tcp_sockaddr(&p->addr, &ss);
	size_t hello_at;
	int fd;

	memset(hello, 0, sizeof(*hello));
	hello->magic = TNBC_TCP_MAGIC;
	hello->version = TNBC_TCP_VERSION;
	hello->flags = xdom->key_len ? TNBC_TCP_HELLO_KEYED : 0;
	hello->to = p->name;
	if (tnbc_random(hello->nonce, sizeof(hello->nonce)))
		return -FI_EIO;
	/* who dials: the sending endpoint, or, for a packet that names
	 * none, the domain's first */
	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep *e = xdom->eps; e; e = e->next)
		if (!src || tnbc_name_same(&e->name, src)) {
			hello->from = e->name;
			hello->from_addr = e->addr;
			break;
		}
	pthread_mutex_unlock(&xdom->lock);
	if (!hello->from.kind)
		return -FI_EHOSTUNREACH; /* no endpoint of ours to answer */
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	tnbc_tcp_sock_opts(fd);
	tnbc_tcp_bind_source(fd, &hello->from_addr, &p->addr);
	if (connect(fd, (struct sockaddr *)&ss, sl) && errno != EINPROGRESS) {
		int err = errno;

		close(fd);
		return -err;
	}
	p->fd = fd;
	p->write_max = 0;
	p->state = TNBC_TCP_CONNECTING;
	p->intros.n = 0;
	p->two_way = false;
	p->hs_have = 0;
	ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
	ev.data.ptr = &p->ev;
	if (epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		int err = errno;

		close(fd);
		p->fd = -1;
		p->state = TNBC_TCP_IDLE;
		return -err;
	}
	hello_at = p->out_len;
	/* with a key, the proof's place follows the hello, filled once the
	 * listener's challenge came */
	if (tnbc_tcp_out_put(p, &rec, sizeof(rec)) ||
	    tnbc_tcp_out_put(p, hello, sizeof(*hello)) ||
	    (xdom->key_len && (tnbc_tcp_out_put(p, &prec, sizeof(prec)) ||
			       tnbc_tcp_out_put(p, &blank, sizeof(blank))))) {
		epoll_ctl(xdom->epfd, EPOLL_CTL_DEL, fd, NULL);
		close(fd);
		p->fd = -1;
		p->state = TNBC_TCP_IDLE;
		p->out_len = p->out_off = 0;
		return -FI_EAGAIN;
	}
	p->hs_at = hello_at + sizeof(rec) + sizeof(*hello);
	/* last: once the hello says so, answers come on this connection,
	 * and it must not be undone */
	tnbc_tcp_dial_back(p, src, fd, hello);
	memcpy(p->out + hello_at + sizeof(rec), hello, sizeof(*hello));
	if (p->two_way && !xdom->key_len) {
		/* what comes in is the dialed connection's to read */
		ev.events = EPOLLOUT | EPOLLRDHUP | EPOLLET;
		epoll_ctl(xdom->epfd, EPOLL_CTL_MOD, fd, &ev);
	}
	tnbc_tcp_up_now(p);
	return 0;
}

/* Sends p's packets on the connection p's endpoint opened to one of
 * ours, if there is one: its hello named it as reading answers there.
 * Then the answers carry the acknowledgements of what came, and no
 * second connection is made.  peer->lock held, p idle. */
static bool tnbc_tcp_adopt(struct tnbc_xpeer *p)
{
	struct tnbc_xdom *xdom = p->xdom;
	struct epoll_event ev = {.events = EPOLLOUT | EPOLLRDHUP | EPOLLET,
				 .data.ptr = &p->ev};
	int fd = -1;

	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep *e = xdom->eps; e && fd < 0; e = e->next) {
		pthread_mutex_lock(&e->lock);
		/* proven, and without a key from the host we know the
		 * peer by: a stranger's claim alone takes nothing */
		for (struct tnbc_tcp_conn *c = e->conns; c; c = c->next)
			if (c->proven && !c->dialed && c->back.kind &&
			    tnbc_name_same(&c->back, &p->name) &&
			    (xdom->key_len ||
			     tnbc_tcp_same_host(&c->from, &p->addr))) {
				fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
				break;
			}
		pthread_mutex_unlock(&e->lock);
	}
	pthread_mutex_unlock(&xdom->lock);
	if (fd < 0)
		return false;
	tnbc_tcp_sock_opts(fd);
	if (epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		return false;
	}
	p->fd = fd;
	p->write_max = 0;
	p->state = TNBC_TCP_UP;
	p->two_way = true;
	p->intros.n = 0;
	tnbc_tcp_dial_wait_end(p);
	return true;
}

/* A connection to p, made or being made; src names our endpoint for the
 * hello.  peer->lock held. */
int tnbc_tcp_up(struct tnbc_xpeer *p, const struct tnbc_name *src)
{
	int ret;

	if (p->state == TNBC_TCP_DEAD)
		return -FI_EHOSTUNREACH;
	if (p->state != TNBC_TCP_IDLE || tnbc_tcp_adopt(p))
		return 0;
	if (tnbc_tcp_dial_wait(p, src))
		return -FI_EAGAIN;
	ret = tnbc_tcp_connect(p, src);
	if (ret && ret != -FI_EAGAIN) {
		tnbc_tcp_peer_dead(p, fi_strerror(-ret));
		ret = -FI_EHOSTUNREACH;
	}
	return ret;
}
