/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The TCP transport's handshake and control records: both halves of the
 * keyed handshake (tnbc_tcp_proto.h), the hello taken and checked, the
 * records a proven connection sends besides packets (introductions,
 * hold notices), and lookups, asked (resolve) and answered.  Apart
 * because this is where a connection's identity is decided (what the
 * tcp_trust suite exercises).
 */
#include "tnbc_tcp.h"
#include "../tnbc_hmac.h"

/* The MAC of one side of a handshake over the hello, the listener's
 * nonce and, for the connector's, the listener's MAC: bound to both
 * fresh nonces, so that nothing recorded proves anything again. */
static void tnbc_tcp_mac(const struct tnbc_xdom *xdom, const char *label,
			 const struct tnbc_tcp_hello *h, const uint8_t *nonce_l,
			 const uint8_t *mac_l, uint8_t out[TNBC_NET_MAC_LEN])
{
	struct tnbc_hmac m;

	tnbc_hmac_init(&m, xdom->key, xdom->key_len);
	tnbc_hmac_update(&m, label, strlen(label) + 1);
	tnbc_hmac_update(&m, h, sizeof(*h));
	tnbc_hmac_update(&m, nonce_l, TNBC_NET_NONCE_LEN);
	if (mac_l)
		tnbc_hmac_update(&m, mac_l, TNBC_NET_MAC_LEN);
	tnbc_hmac_final(&m, out);
}

/* Reads the listener's challenge as it comes and, when it proves the
 * key, writes our proof where its place waits and lets what follows
 * go: the connection is up.  Only the challenge is read: the listener
 * sends nothing more before our proof.  peer->lock held, p proving. */
void tnbc_tcp_hs_read(struct tnbc_xpeer *p)
{
	struct tnbc_xdom *xdom = p->xdom;
	struct tnbc_tcp_rec rec;
	struct tnbc_net_chal chal;
	struct tnbc_tcp_proof proof;
	uint8_t want[TNBC_NET_MAC_LEN];

	while (p->hs_have < sizeof(p->hs_buf)) {
		ssize_t n = recv(p->fd, p->hs_buf + p->hs_have,
				 sizeof(p->hs_buf) - p->hs_have, MSG_DONTWAIT);

		if (n > 0) {
			p->hs_have += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		tnbc_tcp_peer_dead(p, n ? strerror(errno)
					: "it refused the handshake (another "
					  "auth_key?)");
		return;
	}
	memcpy(&rec, p->hs_buf, sizeof(rec));
	memcpy(&chal, p->hs_buf + sizeof(rec), sizeof(chal));
	tnbc_tcp_mac(xdom, TNBC_TCP_MAC_L, &p->hs_hello, chal.nonce, NULL,
		     want);
	if (rec.type != TNBC_TCP_CHAL || rec.len != sizeof(chal) ||
	    !tnbc_mac_equal(want, chal.mac, sizeof(want))) {
		atomic_fetch_add(&xdom->refused, 1);
		tnbc_tcp_peer_dead(p, "its challenge does not prove the "
				      "auth_key");
		return;
	}
	tnbc_tcp_mac(xdom, TNBC_TCP_MAC_C, &p->hs_hello, chal.nonce, chal.mac,
		     proof.mac);
	memcpy(p->out + p->hs_at + sizeof(struct tnbc_tcp_rec), &proof,
	       sizeof(proof));
	p->state = TNBC_TCP_UP;
	if (p->hs_conn) {
		struct tnbc_tcp_conn *c = p->hs_conn;
		struct epoll_event ev = {.events = EPOLLOUT | EPOLLRDHUP |
						   EPOLLET,
					 .data.ptr = &p->ev};

		/* what comes in now is the dialed connection's to read */
		p->hs_conn = NULL;
		if (!tnbc_tcp_conn_add(c->xep, c)) {
			close(c->fd);
			free(c);
		}
		epoll_ctl(xdom->epfd, EPOLL_CTL_MOD, p->fd, &ev);
	}
}

/* A lookup answered (struct tnbc_tcp_hello with TNBC_TCP_HELLO_LOOKUP):
 * the whole address, or, refused (flag lookup false: the asker holds no
 * key where we want one, or one where we want none), an empty answer.
 * The question is the connection's last: 1 says it is done with.  Until
 * the endpoint is named (ep_named is moments away) the connection closes
 * unanswered, and the asking side asks again. */
static int tnbc_tcp_answer(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			   bool refused)
{
	struct {
		struct tnbc_tcp_rec rec;
		struct tnbc_addr addr;
	} ans = {.rec = {.len = sizeof(ans.addr), .type = TNBC_TCP_IAM}};

	if (refused)
		ans.rec.len = 0;
	else if (!atomic_load_explicit(&xep->named, memory_order_acquire))
		return 1;
	else
		ans.addr = xep->whole;
	/* a fresh socket takes 72 bytes; one that does not is the asker's
	 * loss, and it asks again */
	if (send(c->fd, &ans, sizeof(ans.rec) + ans.rec.len,
		 MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		FI_INFO(&tnbc_prov, FI_LOG_EP_CTRL,
			"tcp: a lookup's answer not sent: %s\n",
			strerror(errno));
	return 1;
}

/* The listener's half of a keyed handshake: a fresh nonce and the MAC
 * that proves the key, and the proof the connector must send back. */
static int tnbc_tcp_challenge(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			      const struct tnbc_tcp_hello *h)
{
	struct tnbc_xdom *xdom = xep->xdom;
	struct {
		struct tnbc_tcp_rec rec;
		struct tnbc_net_chal chal;
	} m = {.rec = {.len = sizeof(m.chal), .type = TNBC_TCP_CHAL}};

	if (tnbc_random(m.chal.nonce, sizeof(m.chal.nonce)))
		return -FI_EIO;
	tnbc_tcp_mac(xdom, TNBC_TCP_MAC_L, h, m.chal.nonce, NULL, m.chal.mac);
	tnbc_tcp_mac(xdom, TNBC_TCP_MAC_C, h, m.chal.nonce, m.chal.mac,
		     c->expect);
	/* a fresh socket takes 72 bytes */
	if (send(c->fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(m))
		return -FI_EIO;
	c->challenged = true;
	return 0;
}

/* The connection's handshake is over: packets may come. */
static void tnbc_tcp_proven(struct tnbc_xep *xep, struct tnbc_tcp_conn *c)
{
	pthread_mutex_lock(&xep->lock);
	c->proven = true;
	c->challenged = false;
	if (c->stranger) {
		c->stranger = false;
		atomic_fetch_sub(&xep->strangers, 1);
	}
	pthread_mutex_unlock(&xep->lock);
	if (c->id.kind && c->id_addr.family)
		tnbc_net_book_put(&xep->xdom->book, &c->id, &c->id_addr,
				  sizeof(c->id_addr));
}

/* Whether what this domain knows of where name listens (a peer of its
 * own, or an address the application gave) puts it on another host
 * than the connection comes from. */
static bool tnbc_tcp_elsewhere(struct tnbc_xdom *xdom,
			       const struct tnbc_name *name,
			       const struct tnbc_tcp_addr *from, bool local)
{
	struct tnbc_tcp_addr known;
	struct tnbc_xpeer *p;
	bool pinned = false, found;

	pthread_mutex_lock(&xdom->lock);
	p = tnbc_tcp_peer_find(xdom, name);
	if (p)
		known = p->addr;
	pthread_mutex_unlock(&xdom->lock);
	found = p != NULL;
	if (!found)
		found = tnbc_net_book_find(&xdom->book, name, &known,
					   sizeof(known), &pinned) &&
			pinned;
	/* a name known at the loopback is of this host */
	return found && !tnbc_tcp_same_host(&known, from) &&
	       !(local && tnbc_tcp_loopback(&known));
}

/* A hello: who the connection is from, checked against where it comes
 * from (no key) or challenged (a key).  0, or a negative fi_errno that
 * closes it; 1: a lookup answered, closes it. */
static int tnbc_tcp_hello_take(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			       const uint8_t *body)
{
	struct tnbc_xdom *xdom = xep->xdom;
	struct tnbc_tcp_hello h;
	bool keyed;

	memcpy(&h, body, sizeof(h));
	if (h.magic != TNBC_TCP_MAGIC || h.version != TNBC_TCP_VERSION) {
		atomic_fetch_add(&xdom->refused, 1);
		return -FI_EINVAL;
	}
	keyed = (h.flags & TNBC_TCP_HELLO_KEYED) != 0;
	if (keyed != (xdom->key_len != 0)) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
			"tcp: a connection %s auth_key refused\n",
			keyed ? "with an" : "without an");
		atomic_fetch_add(&xdom->refused, 1);
		if (h.flags & TNBC_TCP_HELLO_LOOKUP)
			return tnbc_tcp_answer(xep, c, true);
		return -FI_EACCES;
	}
	c->hello = true;
	if (h.flags & TNBC_TCP_HELLO_LOOKUP) {
		c->lookup = true;
		if (!keyed)
			return tnbc_tcp_answer(xep, c, false);
		return tnbc_tcp_challenge(xep, c, &h);
	}
	if (!tnbc_name_same(&h.to, &xep->name) ||
	    (h.from.kind != TNBC_NAME_PID && h.from.kind != TNBC_NAME_SVC) ||
	    (h.from_addr.family != 4 && h.from_addr.family != 6) ||
	    !h.from_addr.port) {
		atomic_fetch_add(&xdom->refused, 1);
		return -FI_EINVAL;
	}
	/* where it listens, as an introduction says */
	if (tnbc_tcp_any(&h.from_addr)) {
		uint16_t port = h.from_addr.port;

		h.from_addr = c->from;
		h.from_addr.port = port;
	}
	/* Without a key nothing proves a name: at least the host it says
	 * it listens on, and the one this domain knows it by, must be the
	 * one it connects from (a connector binds its socket to its
	 * listening address for this). */
	if (!keyed && (!tnbc_tcp_same_host(&h.from_addr, &c->from) ||
		       tnbc_tcp_elsewhere(xdom, &h.from, &c->from, c->local))) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
			"tcp: a connection naming an endpoint of another "
			"host refused\n");
		atomic_fetch_add(&xdom->refused, 1);
		return -FI_EACCES;
	}
	pthread_mutex_lock(&xep->lock);
	c->id = h.from;
	c->id_addr = h.from_addr;
	/* adopt looks at it, once proven */
	if (h.flags & TNBC_TCP_HELLO_TWO_WAY)
		c->back = h.from;
	pthread_mutex_unlock(&xep->lock);
	if (keyed)
		return tnbc_tcp_challenge(xep, c, &h);
	tnbc_tcp_proven(xep, c);
	return 0;
}

/* A hold notice from c's process (struct tnbc_net_hold). */
static int tnbc_tcp_held_by(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			    const uint8_t *body)
{
	struct tnbc_net_hold h;
	struct tnbc_xpeer *p;

	memcpy(&h, body, sizeof(h));
	/* only the holding endpoint's own process says so */
	if (h.by.host != c->id.host || h.by.pid != c->id.pid)
		return -FI_EINVAL;
	pthread_mutex_lock(&xep->xdom->lock);
	p = tnbc_tcp_peer_find(xep->xdom, &h.by);
	if (p)
		atomic_store(&p->held, h.on != 0);
	pthread_mutex_unlock(&xep->xdom->lock);
	return 0;
}

/* A record of a connection that is not a packet; 1 when the connection
 * has done its work and closes. */
int tnbc_tcp_control(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
		     const struct tnbc_tcp_rec *rec, const uint8_t *body)
{
	if (rec->type == TNBC_TCP_HELLO) {
		if (c->hello || rec->len != sizeof(struct tnbc_tcp_hello))
			return -FI_EINVAL;
		return tnbc_tcp_hello_take(xep, c, body);
	}
	if (rec->type == TNBC_TCP_PROOF) {
		struct tnbc_tcp_proof pr;

		if (!c->challenged || rec->len != sizeof(pr))
			return -FI_EINVAL;
		memcpy(&pr, body, sizeof(pr));
		if (!tnbc_mac_equal(pr.mac, c->expect, sizeof(pr.mac))) {
			FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
				"tcp: a connection that does not hold the "
				"auth_key refused\n");
			atomic_fetch_add(&xep->xdom->refused, 1);
			return -FI_EACCES;
		}
		tnbc_tcp_proven(xep, c);
		return c->lookup ? tnbc_tcp_answer(xep, c, false) : 0;
	}
	if (rec->type == TNBC_TCP_HOLD && c->proven &&
	    rec->len == sizeof(struct tnbc_net_hold))
		return tnbc_tcp_held_by(xep, c, body);
	if (rec->type == TNBC_TCP_INTRO && c->proven &&
	    rec->len == sizeof(struct tnbc_tcp_intro)) {
		struct tnbc_tcp_intro in;

		memcpy(&in, body, sizeof(in));
		/* A service we dialed by its number alone (its process
		 * unknown) introduces itself first on the connection: what
		 * listens where we dialed is the service. */
		if (c->dialed && c->id.kind == TNBC_NAME_SVC && !c->id.pid &&
		    in.src.kind == TNBC_NAME_SVC && in.src.uid == c->id.uid)
			c->id = in.src;
		/* another endpoint of the connection's process: nothing
		 * else is the connection's to say */
		if ((in.addr.family != 4 && in.addr.family != 6) ||
		    !in.addr.port || in.src.host != c->id.host ||
		    in.src.pid != c->id.pid ||
		    (in.src.kind != TNBC_NAME_PID &&
		     in.src.kind != TNBC_NAME_SVC))
			return -FI_EINVAL;
		/* a source on any address is reached where it connected
		 * from */
		if (tnbc_tcp_any(&in.addr)) {
			uint16_t port = in.addr.port;

			in.addr = c->from;
			in.addr.port = port;
		}
		/* without a key, only where it connects from (a service
		 * we reached at another of its host's addresses keeps the
		 * one we reached it at) */
		if (!xep->xdom->key_len &&
		    !tnbc_tcp_same_host(&in.addr, &c->from)) {
			atomic_fetch_add(&xep->xdom->refused, 1);
			return 0;
		}
		tnbc_net_book_put(&xep->xdom->book, &in.src, &in.addr,
				  sizeof(in.addr));
		/* the source dialed one way: a wait for it to dial a
		 * connection we could adopt would wait for nothing */
		if (!c->back.kind)
			tnbc_tcp_one_way(xep->xdom, &in.src);
		return 0;
	}
	return -FI_EINVAL;
}

/* ------------------------------------------------------------------ */
/* Lookups: who listens at a socket address                            */

/* Waits until fd is ready for events or end_ns passes. */
static bool tnbc_tcp_wait_fd(int fd, short events, uint64_t end_ns)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		uint64_t now = tnbc_now_ns();
		int r;

		if (now >= end_ns)
			return false;
		r = poll(&pfd, 1, (int)((end_ns - now + 999999) / 1000000));
		if (r > 0)
			return true;
		if (r < 0 && errno != EINTR)
			return false;
	}
}

/* Reads n bytes of fd by end_ns; the bytes read (fewer: it closed,
 * failed, or the time is up). */
static size_t tnbc_tcp_read_by(int fd, void *buf, size_t n, uint64_t end_ns)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, (uint8_t *)buf + got, n - got, 0);

		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (!r)
			break; /* closed */
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || !tnbc_tcp_wait_fd(fd, POLLIN, end_ns))
			break;
	}
	return got;
}

/* One question; -FI_EAGAIN where asking again may get an answer
 * (nobody listens yet, or the endpoint is not named yet). */
static int tnbc_tcp_ask(struct tnbc_xdom *xdom, const struct sockaddr *sa,
			uint64_t end_ns, struct tnbc_addr *out)
{
	struct {
		struct tnbc_tcp_rec rec;
		struct tnbc_tcp_hello h;
	} q = {.rec = {.len = sizeof(q.h), .type = TNBC_TCP_HELLO},
	       .h = {.magic = TNBC_TCP_MAGIC,
		     .version = TNBC_TCP_VERSION,
		     .flags = TNBC_TCP_HELLO_LOOKUP}};
	struct tnbc_tcp_rec rec;
	struct tnbc_net_chal chal;
	struct {
		struct tnbc_tcp_rec rec;
		struct tnbc_tcp_proof proof;
	} pr = {.rec = {.len = sizeof(pr.proof), .type = TNBC_TCP_PROOF}};
	uint8_t want[TNBC_NET_MAC_LEN];
	struct tnbc_addr addr;
	socklen_t sl = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						 : sizeof(struct sockaddr_in);
	size_t got;
	int fd, err = 0, ret = -FI_EAGAIN;

	if (xdom->key_len)
		q.h.flags |= TNBC_TCP_HELLO_KEYED;
	if (tnbc_random(q.h.nonce, sizeof(q.h.nonce)))
		return -FI_EIO;
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	if (connect(fd, sa, sl) && errno != EINPROGRESS)
		goto out;
	if (!tnbc_tcp_wait_fd(fd, POLLOUT, end_ns))
		goto out;
	sl = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) || err)
		goto out;
	if (send(fd, &q, sizeof(q), MSG_NOSIGNAL) != (ssize_t)sizeof(q))
		goto out;
	got = tnbc_tcp_read_by(fd, &rec, sizeof(rec), end_ns);
	if (got < sizeof(rec)) {
		/* closed unanswered (not named yet), or no tnbc */
		ret = got ? -FI_EHOSTUNREACH : -FI_EAGAIN;
		goto out;
	}
	if (rec.type == TNBC_TCP_IAM && !rec.len) {
		ret = -FI_EACCES; /* a key where we have none, or none */
		goto out;
	}
	if (xdom->key_len) {
		/* the listener proves the key before we do, and tells its
		 * name only then */
		ret = -FI_EHOSTUNREACH;
		if (rec.type != TNBC_TCP_CHAL || rec.len != sizeof(chal) ||
		    tnbc_tcp_read_by(fd, &chal, sizeof(chal), end_ns) !=
			    sizeof(chal))
			goto out;
		tnbc_tcp_mac(xdom, TNBC_TCP_MAC_L, &q.h, chal.nonce, NULL,
			     want);
		if (!tnbc_mac_equal(want, chal.mac, sizeof(want))) {
			ret = -FI_EACCES;
			goto out;
		}
		tnbc_tcp_mac(xdom, TNBC_TCP_MAC_C, &q.h, chal.nonce, chal.mac,
			     pr.proof.mac);
		if (send(fd, &pr, sizeof(pr), MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(pr))
			goto out;
		got = tnbc_tcp_read_by(fd, &rec, sizeof(rec), end_ns);
		if (got < sizeof(rec)) {
			ret = got ? -FI_EHOSTUNREACH : -FI_EAGAIN;
			goto out;
		}
	}
	ret = -FI_EHOSTUNREACH; /* something that is no tnbc */
	if (rec.type != TNBC_TCP_IAM || rec.len != sizeof(addr) ||
	    tnbc_tcp_read_by(fd, &addr, sizeof(addr), end_ns) != sizeof(addr))
		goto out;
	*out = addr;
	ret = 0;
out:
	close(fd);
	return ret;
}

int tnbc_tcp_resolve(struct tnbc_xdom *xdom, const struct sockaddr *sa,
		     struct tnbc_addr *out)
{
	uint64_t end = tnbc_now_ns() + tnbc_env.tcp_timeout_ms * 1000000u;
	struct tnbc_tcp_addr *a =
		(struct tnbc_tcp_addr *)(void *)(out->xaddr +
						 TNBC_XADDR_TCP_OFF);
	int ret;

	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return -FI_EINVAL;
	for (;;) {
		ret = tnbc_tcp_ask(xdom, sa, end, out);
		if (ret != -FI_EAGAIN || tnbc_now_ns() >= end)
			break;
		/* nobody listens there yet: ask again shortly */
		nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
	}
	if (ret == -FI_EAGAIN)
		ret = -FI_EHOSTUNREACH;
	if (ret) {
		FI_WARN(&tnbc_prov, FI_LOG_AV,
			"tcp: no tnbc endpoint answered at that address: %s\n",
			fi_strerror(-ret));
		return ret;
	}
	/* where it answered is where this host reaches it, whatever
	 * address it gives out */
	tnbc_tcp_from_sockaddr(sa, a);
	return 0;
}
