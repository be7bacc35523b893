/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The TCP transport's receiving side: records read from an endpoint's
 * connections and offered to the protocol, placed payloads read from
 * the socket into their place, packets kept or left for later and the
 * back pressure they put on their connection (holds), and the questions
 * the engine asks before it sleeps.
 */
#include "tnbc_tcp.h"

/* A connection the consumer gives up: it and its bytes are dropped. */
static void tnbc_tcp_conn_drop(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			       const char *why)
{
	struct tnbc_xdom *xdom = xep->xdom;

	if (why)
		FI_INFO(&tnbc_prov, FI_LOG_EP_DATA,
			"tcp: connection closed: %s\n", why);
	pthread_mutex_lock(&xep->lock);
	for (struct tnbc_tcp_conn **it = &xep->conns; *it; it = &(*it)->next)
		if (*it == c) {
			*it = c->next;
			break;
		}
	if (c->stranger) {
		c->stranger = false;
		atomic_fetch_sub(&xep->strangers, 1);
	}
	if (c->paused) {
		c->paused = false;
		atomic_fetch_sub(&xep->npaused, 1);
	}
	pthread_mutex_unlock(&xep->lock);
	epoll_ctl(xep->pfd, EPOLL_CTL_DEL, c->fd, NULL);
	atomic_fetch_sub(&xep->nconns, 1);
	/* a peer sending on the same socket (two-way) hears of it */
	shutdown(c->fd, SHUT_RDWR);
	close(c->fd);
	c->fd = -1;
	pthread_mutex_lock(&xdom->lock);
	c->next = xdom->grave_conns;
	xdom->grave_conns = c;
	pthread_mutex_unlock(&xdom->lock);
}

/* Reads what the socket has into the buffer, making room for need bytes
 * from off; returns bytes read, 0 when none are there, or a negative
 * fi_errno when the connection is over. */
static ssize_t tnbc_tcp_fill(struct tnbc_tcp_conn *c, size_t need)
{
	size_t want;
	ssize_t n;

	if (c->off && (c->off == c->have || c->cap - c->off < need)) {
		memmove(c->buf, c->buf + c->off, c->have - c->off);
		c->have -= c->off;
		c->off = 0;
	}
	/* A stranger's records are small: it makes us hold no more.  A
	 * proven connection's buffer takes a bulk read and more: at 8 KiB
	 * (grown from a stranger's), a 4 KiB ping-pong took 5.5 to 5.9 us
	 * against 5.0 to 5.2 (two processes over TCP on one host). */
	if (c->cap < need || !c->buf || (c->proven && c->cap < 65536)) {
		size_t cap = c->proven ? 65536 : c->cap ? c->cap : 256;
		uint8_t *b;

		while (cap < need)
			cap *= 2;
		b = realloc(c->buf, cap);
		if (!b)
			return 0; /* memory may come back: read later */
		c->buf = b;
		c->cap = cap;
	}
	want = c->cap - c->have;
	if (!c->proven && want > need - (c->have - c->off))
		want = need - (c->have - c->off);
	/* while a record is incomplete read only up to its end, so that a
	 * large placed payload stays in the socket */
	if (want > TNBC_TCP_RBULK && need - (c->have - c->off) < want)
		want = need - (c->have - c->off) > TNBC_TCP_RBULK
			       ? need - (c->have - c->off)
			       : TNBC_TCP_RBULK;
	n = recv(c->fd, c->buf + c->have, want, MSG_DONTWAIT);
	if (n > 0) {
		c->have += (size_t)n;
		c->drained = (size_t)n < want;
		return n;
	}
	if (n == 0)
		return -FI_ECONNRESET;
	if (errno == EAGAIN || errno == EINTR)
		return 0;
	return -FI_ECONNRESET;
}

/* A packet as poll offers it from a connection: head_len bytes in the
 * buffer, the rest (if any) in the socket. */
struct tnbc_tcp_rx {
	struct tnbc_xrx rx;
	struct tnbc_tcp_conn *c;
	size_t pos; /* bytes of the packet read from the socket so far */
	bool copied; /* the protocol read past the head */
	bool broken; /* the socket failed mid-packet */
	/* its sender stalled: the packet went back to the connection's
	 * buffer, to be offered whole once it came (tnbc_tcp_park) */
	bool parked;
};

/* Drops what came of c->skip_left: 1 when it is all gone, 0 when the
 * rest has not come yet, or a negative fi_errno when the connection is
 * over.  Never waits. */
static int tnbc_tcp_skip_some(struct tnbc_tcp_conn *c)
{
	uint8_t junk[4096];

	while (c->skip_left) {
		ssize_t r = recv(c->fd, junk,
				 c->skip_left < sizeof(junk) ? c->skip_left
							     : sizeof(junk),
				 MSG_DONTWAIT);

		if (r > 0) {
			c->skip_left -= (size_t)r;
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			c->drained = true;
			return 0;
		}
		return -FI_ECONNRESET;
	}
	return 1;
}

/* Reads and drops n bytes of the socket. */
static int tnbc_tcp_skip(struct tnbc_tcp_conn *c, size_t n)
{
	uint8_t junk[4096];

	while (n) {
		ssize_t r =
			recv(c->fd, junk, n < sizeof(junk) ? n : sizeof(junk),
			     MSG_WAITALL);

		if (r <= 0)
			return -FI_ECONNRESET;
		n -= (size_t)r;
	}
	return 0;
}

/* Whether the rest of a packet came within TNBC_TCP_READ_SPIN_NS of
 * asking (the sender is writing it).  Asked without sleeping: a reader
 * that sleeps in poll between the pieces of a large payload is woken
 * for each by the sender's CPU, which between namespaces also runs the
 * receiving side of the stack, and that cost 1 MiB streams a tenth of
 * their bandwidth (fi_tnbc(7)).  Not on a host with more runnable
 * threads than CPUs: the sender may be waiting for this one's.  (Asking
 * there too, with a yield between questions, paid while large packets
 * were written whole, and no longer once they were written in
 * pieces.) */
static bool tnbc_tcp_read_spin(struct tnbc_xdom *xdom, struct pollfd *pfd)
{
	uint64_t end = tnbc_now_ns() + TNBC_TCP_READ_SPIN_NS;

	if (atomic_load_explicit(xdom->host_busy, memory_order_relaxed))
		return false;

	do {
		if (poll(pfd, 1, 0) > 0)
			return true;
	} while (tnbc_now_ns() < end);
	return false;
}

/* Reads n bytes of the socket into iov as they come.  The sender wrote
 * the record whole or left the rest for its waker, which writes it as
 * the socket takes it, so the bytes keep coming while the sender lives;
 * a sender that stops for FI_TNBC_TCP_TIMEOUT_MS mid-packet (a hostile
 * one, or one stopped) is taken for dead, and its connection dropped. */
static int tnbc_tcp_read_iov_by(struct tnbc_tcp_conn *c,
				const struct iovec *iov, size_t iov_count,
				size_t off, size_t n, int wait_ms, size_t *got)
{
	*got = 0;
	while (n) {
		struct iovec part[64];
		size_t cnt = tnbc_iov_slice(iov, iov_count, off, n, part, 64);
		struct msghdr mh = {.msg_iov = part, .msg_iovlen = cnt};
		ssize_t r = recvmsg(c->fd, &mh, MSG_WAITALL);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno == EAGAIN) {
				struct pollfd pfd = {.fd = c->fd,
						     .events = POLLIN};

				if (tnbc_tcp_read_spin(c->xep->xdom, &pfd))
					continue;
				r = poll(&pfd, 1, wait_ms);
				if (r > 0)
					continue;
				if (!r &&
				    wait_ms < (int)tnbc_env.tcp_timeout_ms)
					return -FI_EAGAIN; /* stalled */
			}
			return -FI_ECONNRESET;
		}
		off += (size_t)r;
		n -= (size_t)r;
		*got += (size_t)r;
	}
	return 0;
}

static int tnbc_tcp_read_iov(struct tnbc_tcp_conn *c, const struct iovec *iov,
			     size_t iov_count, size_t off, size_t n)
{
	size_t got;

	return tnbc_tcp_read_iov_by(c, iov, iov_count, off, n,
				    (int)tnbc_env.tcp_timeout_ms, &got);
}

/* A placed packet whose sender stalled goes back to the connection's
 * buffer: its head is there still, and the got bytes read into iov from
 * off are copied back behind it; the rest is read into the buffer as it
 * comes, and the packet offered whole (the protocol committed nothing
 * for it: tnbc_xrx.may_park).  False where there is no memory for it
 * (the reader waits for the bytes instead). */
static bool tnbc_tcp_park(struct tnbc_tcp_conn *c, const struct iovec *iov,
			  size_t iov_count, size_t off, size_t got)
{
	if (c->have + got > c->cap) {
		uint8_t *b = realloc(c->buf, c->have + got);

		if (!b)
			return false;
		c->buf = b;
		c->cap = c->have + got;
	}
	tnbc_copy_from_iov(c->buf + c->have, iov, iov_count, off, got);
	c->have += got;
	c->slow = TNBC_TCP_SLOW_PACKETS;
	return true;
}

static ssize_t tnbc_tcp_rx_copy(struct tnbc_xrx *x, size_t off,
				const struct iovec *iov, size_t iov_count,
				size_t n)
{
	struct tnbc_tcp_rx *rx = (struct tnbc_tcp_rx *)x;
	size_t done = 0;

	if (off > x->len || n > x->len - off || rx->broken)
		return -FI_EINVAL;
	/* from the head in memory */
	if (off < x->head_len) {
		size_t m = x->head_len - off < n ? x->head_len - off : n;

		tnbc_copy_to_iov(iov, iov_count, 0, x->head + off, m);
		done = m;
		off += m;
	}
	if (done == n)
		return (ssize_t)n;
	/* then from the socket, in order, each byte once */
	if (off < x->head_len + rx->pos)
		return -FI_EINVAL;
	rx->copied = true;
	if (off > x->head_len + rx->pos &&
	    tnbc_tcp_skip(rx->c, off - x->head_len - rx->pos)) {
		rx->broken = true;
		return -FI_ECONNRESET;
	}
	rx->pos = off - x->head_len;
	/* Nothing of the packet taken from the socket yet, and the protocol
	 * able to take it back: a sender that stops holds this endpoint up
	 * TNBC_TCP_STALL_MS at most, not FI_TNBC_TCP_TIMEOUT_MS. */
	if (x->may_park && !rx->pos) {
		size_t got;
		int ret =
			tnbc_tcp_read_iov_by(rx->c, iov, iov_count, done,
					     n - done, TNBC_TCP_STALL_MS, &got);

		if (ret == -FI_EAGAIN &&
		    tnbc_tcp_park(rx->c, iov, iov_count, done, got)) {
			rx->parked = true;
			return -FI_EAGAIN;
		}
		if (ret == -FI_EAGAIN)
			ret = tnbc_tcp_read_iov(rx->c, iov, iov_count,
						done + got, n - done - got);
		if (ret) {
			rx->broken = true;
			return -FI_ECONNRESET;
		}
	} else if (tnbc_tcp_read_iov(rx->c, iov, iov_count, done, n - done)) {
		rx->broken = true;
		return -FI_ECONNRESET;
	}
	rx->pos += n - done;
	atomic_fetch_add_explicit(&rx->c->xep->xdom->placed_bytes, n - done,
				  memory_order_relaxed);
	return (ssize_t)n;
}

static struct tnbc_tcp_held *tnbc_tcp_hold(const struct tnbc_tcp_conn *c,
					   const uint8_t *data, size_t len)
{
	struct tnbc_tcp_held *h = malloc(sizeof(*h) + len);

	if (h) {
		h->next = NULL;
		h->from = c->id;
		h->conn = c->serial;
		h->len = (uint32_t)len;
		memcpy(h->data, data, len);
	}
	return h;
}

/* A record of c was taken whole: nothing of c waits for its rest. */
static inline void tnbc_tcp_consumed(struct tnbc_tcp_conn *c)
{
	atomic_store_explicit(&c->partial_ns, 0, memory_order_relaxed);
}

/* A connection's share of what the consumer holds: the endpoint's queue
 * room, as over shared memory. */
static size_t tnbc_tcp_share(void)
{
	return tnbc_env.rx_slots * tnbc_env.slot_size;
}

/* What c may hold before it is left unread: TNBC_TCP_UNREAD_SHARES of
 * the room, and, once its process was told to hold back, what it may
 * have had on its way then (its buffer, its socket's, ours), so that a
 * hold honoured leaves its answers readable. */
static size_t tnbc_tcp_unread_cap(const struct tnbc_tcp_conn *c)
{
	size_t cap = tnbc_tcp_share() * TNBC_TCP_UNREAD_SHARES;

	return c->held && c->told && c->unread_cap > cap ? c->unread_cap : cap;
}

/* Counts a held packet against its connection (by = +1) or gives its
 * room back (by = -1), leaving the connection unread past its share and
 * read again below it.  The consumer's. */
static void tnbc_tcp_hold_count(struct tnbc_xep *xep, uint64_t serial,
				size_t len, int by)
{
	struct tnbc_tcp_conn *c;

	pthread_mutex_lock(&xep->lock);
	for (c = xep->conns; c && c->serial != serial; c = c->next)
		;
	pthread_mutex_unlock(&xep->lock);
	if (!c)
		return; /* gone: nothing left to hold back */
	if (by > 0) {
		c->held_bytes += len;
	} else {
		c->held_bytes -= len < c->held_bytes ? len : c->held_bytes;
	}
	/* past its share its process is asked to stop; unread only past
	 * what is still on its way then (a hold honoured leaves answers
	 * alone on the stream) */
	if (!c->held && c->held_bytes >= tnbc_tcp_share()) {
		c->held = true;
		xep->hold_dirty = true;
		atomic_fetch_add(&xep->xdom->held, 1);
	} else if (c->held && c->held_bytes < tnbc_tcp_share() / 2) {
		c->held = false;
		xep->hold_dirty = true;
	}
	if (!c->paused && c->held_bytes >= tnbc_tcp_unread_cap(c)) {
		struct epoll_event ev = {.events = 0, .data.ptr = &c->ev};

		/* level-triggered: left in, it would say "ready" for ever */
		c->paused = true;
		atomic_fetch_add(&xep->npaused, 1);
		/* not read: what waits in it is no sender's fault */
		tnbc_tcp_consumed(c);
		epoll_ctl(xep->pfd, EPOLL_CTL_MOD, c->fd, &ev);
	} else if (c->paused && c->held_bytes < tnbc_tcp_unread_cap(c)) {
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
					 .data.ptr = &c->ev};

		c->paused = false;
		atomic_fetch_sub(&xep->npaused, 1);
		epoll_ctl(xep->pfd, EPOLL_CTL_MOD, c->fd, &ev);
		/* what came meanwhile is there to read */
		atomic_fetch_add(&xep->events, 1);
	}
}

static void tnbc_tcp_keep(struct tnbc_xep *xep, struct tnbc_tcp_held *h)
{
	*xep->kept_tail = h;
	xep->kept_tail = &h->next;
}

/* Counts a packet the protocol took or refused. */
static void tnbc_tcp_taken(struct tnbc_xep *xep, int verdict, int *taken)
{
	if (verdict == TNBC_RX_BAD)
		atomic_fetch_add(&xep->xdom->bad_pkts, 1);
	else
		(*taken)++;
}

/* Offers the replayed packets (left for later, then kept after a
 * rewind); returns false when one was left for later again. */
static bool tnbc_tcp_replay(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg,
			    int *budget, int *taken)
{
	while (xep->replay && *budget > 0) {
		struct tnbc_tcp_held *h = xep->replay;
		struct tnbc_xrx rx = {.head = h->data,
				      .head_len = h->len,
				      .len = h->len,
				      .from = &h->from,
				      .copy = tnbc_net_mem_copy};
		int v = fn(arg, &rx);

		if (v == TNBC_RX_LATER)
			return false;
		(*budget)--;
		xep->replay = h->next;
		h->next = NULL;
		if (v == TNBC_RX_KEEP) {
			tnbc_tcp_keep(xep, h);
			continue;
		}
		tnbc_tcp_taken(xep, v, taken);
		tnbc_tcp_hold_count(xep, h->conn, h->len, -1);
		free(h);
	}
	return true;
}

/* A packet the protocol kept (TNBC_RX_KEEP) or left for later
 * (TNBC_RX_LATER), copied out of the stream: kept ones wait for a
 * rewind, one left for later is offered first next time.  Returns
 * whether polling stops here (left for later). */
static bool tnbc_tcp_set_aside(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			       struct tnbc_tcp_held *h, int verdict)
{
	tnbc_tcp_hold_count(xep, c->serial, h->len, 1);
	if (verdict == TNBC_RX_LATER) {
		h->next = xep->replay;
		xep->replay = h;
		c->more = true;
		return true;
	}
	tnbc_tcp_keep(xep, h);
	return false;
}

/* Polling c stops with what it has: where part of a record waits for
 * the rest, since when (the waker ends a connection whose record waits
 * past FI_TNBC_TCP_TIMEOUT_MS).  Returns taken. */
static int tnbc_tcp_partial(struct tnbc_tcp_conn *c, int taken)
{
	/* a connection left unread (paused) waits for us, not its sender:
	 * however long its receives take, it is never ended for it */
	if ((c->have == c->off && !c->skip_left) || c->paused)
		tnbc_tcp_consumed(c);
	else if (!atomic_load_explicit(&c->partial_ns, memory_order_relaxed))
		atomic_store_explicit(&c->partial_ns, tnbc_now_ns(),
				      memory_order_relaxed);
	return taken;
}

/* Takes records of one connection; returns how many packets were
 * consumed, or -1 when one was left for later (stop polling). */
static int tnbc_tcp_conn_poll(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			      tnbc_rx_fn fn, void *arg, int budget)
{
	int taken = 0;

	c->more = false;
	c->drained = false;
	while (budget > 0 && !c->paused) {
		struct tnbc_tcp_rec rec;
		size_t avail = c->have - c->off, max = tnbc_tcp_rx_max();
		size_t span;
		ssize_t r;
		int v;

		if (c->skip_left) {
			r = tnbc_tcp_skip_some(c);
			if (r < 0)
				goto drop;
			if (!r)
				return tnbc_tcp_partial(c, taken);
			continue;
		}
		/* nothing more came since the socket was emptied: the next
		 * poll's look at the connections says when it does, a read
		 * now would only find nothing */
		if (!avail && c->drained)
			return taken;
		if (avail < sizeof(rec)) {
			r = tnbc_tcp_fill(c, sizeof(rec));
			if (r < 0)
				goto drop;
			if (!r) /* drained */
				return tnbc_tcp_partial(c, taken);
			continue;
		}
		memcpy(&rec, c->buf + c->off, sizeof(rec));
		/* a stranger says who it is first, in a record of the size
		 * that takes, and proves it next: it never makes us hold
		 * more than that */
		if (!c->proven &&
		    (c->challenged
			     ? rec.type != TNBC_TCP_PROOF ||
				       rec.len != sizeof(struct tnbc_tcp_proof)
			     : c->hello || rec.type != TNBC_TCP_HELLO ||
				       rec.len !=
					       sizeof(struct tnbc_tcp_hello)))
			goto bad;
		if (rec.len > max || (rec.type != TNBC_TCP_PKT &&
				      rec.len > sizeof(struct tnbc_tcp_hello)))
			goto bad;
		span = TNBC_TCP_SPAN(rec.len);
		if (rec.type != TNBC_TCP_PKT) {
			if (avail < sizeof(rec) + span) {
				r = tnbc_tcp_fill(c, sizeof(rec) + span);
				if (r < 0)
					goto drop;
				if (!r)
					return tnbc_tcp_partial(c, taken);
				continue;
			}
			v = tnbc_tcp_control(xep, c, &rec,
					     c->buf + c->off + sizeof(rec));
			if (v > 0)
				goto drop;
			if (v)
				goto bad;
			c->off += sizeof(rec) + span;
			tnbc_tcp_consumed(c);
			continue;
		}
		if (avail < sizeof(rec) + span) {
			/* head: bytes of the record here, hl of them the
			 * packet's (the rest may be padding) */
			size_t head = avail - sizeof(rec);
			size_t hl = head < rec.len ? head : rec.len;
			int inq = 0;

			/* a placed payload waits in the socket: offer the
			 * packet once its frame is here and the rest has
			 * begun to come, and read it into its place as it
			 * comes.  Waiting for all of it to be in the socket
			 * first, a receiver that polls saw a part and read
			 * the packet into the buffer (the else below): a
			 * 1 MiB stream copied every byte twice. */
			if ((rec.flags & TNBC_TCP_REC_PLACED) &&
			    rec.len >= TNBC_TCP_DIRECT_MIN &&
			    hl >= TNBC_XPKT_FRAME_MAX && !c->slow &&
			    !ioctl(c->fd, FIONREAD, &inq) && inq > 0) {
				struct tnbc_tcp_rx rx = {
					.rx = {.head = c->buf + c->off +
						       sizeof(rec),
					       .head_len = hl,
					       .len = rec.len,
					       .from = &c->id,
					       .copy = tnbc_tcp_rx_copy},
					.c = c};

				v = fn(arg, &rx.rx);
				if (rx.broken)
					goto drop;
				if (rx.parked && v == TNBC_RX_LATER) {
					/* its rest is read below as it
					 * comes, other connections meanwhile */
					continue;
				}
				if ((v == TNBC_RX_KEEP || v == TNBC_RX_LATER) &&
				    (rx.copied || rx.parked)) {
					/* the protocol broke its promise:
					 * the packet is gone */
					v = TNBC_RX_BAD;
				}
				if (v == TNBC_RX_KEEP || v == TNBC_RX_LATER) {
					/* Nothing of it taken from the socket:
					 * it stays in the buffer, read whole
					 * there as it comes (never waited for
					 * here), and offered again. */
					c->slow = TNBC_TCP_SLOW_PACKETS;
					continue;
				}
				/* what the protocol left of the record,
				 * padding included, is dropped as it
				 * comes (at the loop's top) */
				c->skip_left = span - head - rx.pos;
				c->off = c->have = 0;
				tnbc_tcp_consumed(c);
				budget--;
				tnbc_tcp_taken(xep, v, &taken);
				continue;
			}
			/* Not placed (or its frame not all here): read what
			 * came.  Waiting for the rest in the socket instead
			 * would deadlock once the socket's window closed,
			 * since the receiver reopens it only for a large
			 * read. */
			r = tnbc_tcp_fill(c, sizeof(rec) + span);
			if (r < 0)
				goto drop;
			if (!r)
				return tnbc_tcp_partial(c, taken);
			continue;
		}
		/* read whole after a stall: the next ones may be placed */
		if ((rec.flags & TNBC_TCP_REC_PLACED) && c->slow)
			c->slow--;
		{
			struct tnbc_xrx rx = {.head = c->buf + c->off +
						      sizeof(rec),
					      .head_len = rec.len,
					      .len = rec.len,
					      .from = &c->id,
					      .copy = tnbc_net_mem_copy};

			v = fn(arg, &rx);
		}
		if (v == TNBC_RX_KEEP || v == TNBC_RX_LATER) {
			struct tnbc_tcp_held *h = tnbc_tcp_hold(
				c, c->buf + c->off + sizeof(rec), rec.len);

			if (!h) {
				c->more = true;
				return taken; /* offered again next time */
			}
			c->off += sizeof(rec) + span;
			tnbc_tcp_consumed(c);
			if (tnbc_tcp_set_aside(xep, c, h, v))
				return -1;
			budget--;
			continue;
		}
		c->off += sizeof(rec) + span;
		tnbc_tcp_consumed(c);
		budget--;
		tnbc_tcp_taken(xep, v, &taken);
	}
	c->more = true;
	return taken;
bad:
	atomic_fetch_add(&xep->xdom->bad_pkts, 1);
	tnbc_tcp_conn_drop(xep, c, "malformed stream");
	return taken;
drop:
	tnbc_tcp_conn_drop(xep, c, NULL);
	return taken;
}

/* An endpoint with one connection is polled by reading it: asking the
 * kernel first (epoll_wait) and reading after cost a small message a
 * second system call, 1 to 2 us in a virtual machine, between its
 * arrival and its answer.  A read that finds nothing costs what the
 * question did.  The engine's sleep still asks (pending). */
static bool tnbc_tcp_lone(struct tnbc_xep *xep)
{
	return atomic_load_explicit(&xep->nconns, memory_order_relaxed) == 1 &&
	       !atomic_load_explicit(&xep->npaused, memory_order_relaxed);
}

/* Whether a connection has bytes to read now, as the kernel says (one
 * whose held packets fill its share is out of the set: it waits). */
static bool tnbc_tcp_ready(struct tnbc_xep *xep)
{
	struct epoll_event ev;

	return atomic_load_explicit(&xep->nconns, memory_order_relaxed) &&
	       epoll_wait(xep->pfd, &ev, 1, 0) > 0;
}

/* Tells each connection whose hold changed (up to 16 a call; a notice
 * that cannot go now goes at a later poll).  Connections stay in memory
 * until the domain closes (the grave). */
static void tnbc_tcp_tell_holds(struct tnbc_xep *xep)
{
	struct tnbc_tcp_conn *c, *todo[16];
	unsigned n = 0;

	xep->hold_dirty = false;
	pthread_mutex_lock(&xep->lock);
	for (c = xep->conns; c; c = c->next) {
		if (c->held == c->told || !c->proven)
			continue;
		if (n == 16) {
			xep->hold_dirty = true;
			break;
		}
		todo[n++] = c;
	}
	pthread_mutex_unlock(&xep->lock);
	for (unsigned i = 0; i < n; i++) {
		bool on = todo[i]->held;
		int ret = tnbc_tcp_notice(xep->xdom, &todo[i]->id, &xep->name,
					  on);

		if (ret == -FI_EAGAIN) {
			xep->hold_dirty = true;
			continue;
		}
		todo[i]->told = on; /* or it cannot be told: gone */
		if (on && !ret) {
			/* what it may have had on its way: its own buffer,
			 * and both kernels' */
			todo[i]->unread_cap = todo[i]->held_bytes +
					      TNBC_TCP_OUT_MAX +
					      xep->xdom->kernel_bufs;
			/* left unread before it was told: read on */
			tnbc_tcp_hold_count(xep, todo[i]->serial, 0, 1);
		}
	}
}

int tnbc_tcp_poll(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg, int budget)
{
	uint64_t ev = atomic_load(&xep->events);
	struct tnbc_tcp_conn *c;
	int taken = 0;
	bool more = false;

	xep->polling = true;
	if (!tnbc_tcp_replay(xep, fn, arg, &budget, &taken))
		goto out;
	/* a peer's connection is awaited: its hello must not wait for the
	 * waker to accept it */
	if (tnbc_tcp_awaited(xep->xdom)) {
		tnbc_tcp_accept(xep);
		ev = atomic_load(&xep->events);
	}
	if (ev == atomic_load_explicit(&xep->seen, memory_order_relaxed) &&
	    !xep->buffered &&
	    !atomic_exchange_explicit(&xep->ready_hint, false,
				      memory_order_relaxed) &&
	    !tnbc_tcp_lone(xep) && !tnbc_tcp_ready(xep))
		goto out;
	atomic_store_explicit(&xep->seen, ev, memory_order_relaxed);
	pthread_mutex_lock(&xep->lock);
	c = xep->conns;
	pthread_mutex_unlock(&xep->lock);
	while (c) {
		struct tnbc_tcp_conn *next;
		int n = 0;

		pthread_mutex_lock(&xep->lock);
		next = c->next;
		pthread_mutex_unlock(&xep->lock);
		if (budget > 0)
			n = tnbc_tcp_conn_poll(xep, c, fn, arg, budget);
		else
			c->more = true;
		if (n < 0) {
			more = true;
			break;
		}
		taken += n;
		budget -= n;
		/* c may be gone now (dropped): only its successor is used */
		c = next;
	}
	pthread_mutex_lock(&xep->lock);
	for (c = xep->conns; c; c = c->next)
		more |= c->more;
	pthread_mutex_unlock(&xep->lock);
	xep->buffered = more;
out:
	if (xep->hold_dirty)
		tnbc_tcp_tell_holds(xep);
	xep->polling = false;
	atomic_store_explicit(&xep->in_hand, xep->buffered || xep->replay,
			      memory_order_relaxed);
	return taken;
}

void tnbc_tcp_rewind(struct tnbc_xep *xep)
{
	/* kept packets go before anything left for later: they are older */
	if (xep->kept) {
		*xep->kept_tail = xep->replay;
		xep->replay = xep->kept;
		xep->kept = NULL;
		xep->kept_tail = &xep->kept;
		atomic_store_explicit(&xep->in_hand, true,
				      memory_order_relaxed);
	}
}

bool tnbc_tcp_pending(struct tnbc_xep *xep)
{
	/* a connection awaited may be there to accept */
	return xep->replay || xep->buffered || tnbc_tcp_awaited(xep->xdom) ||
	       atomic_load(&xep->events) != atomic_load(&xep->seen) ||
	       tnbc_tcp_ready(xep);
}

void tnbc_tcp_look_mark(struct tnbc_xep *xep)
{
	xep->mark = atomic_load(&xep->events);
}

/* Every arrival kicks the engine: nothing waits unlooked but what the
 * consumer has not taken yet.  The consumer may have looked past the
 * mark since (seen grows on; the mark is set once per posted run): that
 * leaves nothing from before it, and asking the sockets again at every
 * post cost a small message more than half its round trip. */
bool tnbc_tcp_unlooked(struct tnbc_xep *xep)
{
	return xep->replay || xep->buffered ||
	       (int64_t)(xep->mark - atomic_load(&xep->seen)) > 0;
}

bool tnbc_tcp_stalled(struct tnbc_xep *xep)
{
	(void)xep; /* the rest of a packet arrives as an event of its own */
	return false;
}

bool tnbc_tcp_idle(struct tnbc_xep *xep)
{
	struct epoll_event ev;

	if (atomic_load(&xep->events) != atomic_load(&xep->seen) ||
	    atomic_load_explicit(&xep->in_hand, memory_order_relaxed) ||
	    tnbc_tcp_awaited(xep->xdom))
		return false;
	/* the poll reads it: as cheap as asking */
	if (tnbc_tcp_lone(xep))
		return false;
	if (atomic_load_explicit(&xep->nconns, memory_order_relaxed) &&
	    epoll_wait(xep->pfd, &ev, 1, 0) > 0) {
		atomic_store_explicit(&xep->ready_hint, true,
				      memory_order_relaxed);
		return false;
	}
	return true;
}

/* What waits in a socket is unknown until read: read it.  While a
 * packet is offered the answer is no, so that the protocol takes it now
 * (buffered, or kept) rather than leave it for later: it is out of the
 * socket already, and leaving it would hold up the packets behind it. */
bool tnbc_tcp_quiet(struct tnbc_xep *xep)
{
	return !xep->polling && !tnbc_tcp_pending(xep);
}

ssize_t tnbc_tcp_pull(struct tnbc_xep *xep, struct tnbc_xpeer *peer,
		      const struct iovec *local, size_t local_count,
		      const struct tnbc_xrmem *remote, size_t remote_count,
		      struct tnbc_xread *rd)
{
	(void)xep;
	(void)rd;
	(void)peer;
	(void)local;
	(void)local_count;
	(void)remote;
	(void)remote_count;
	return -FI_ENOSYS; /* the peer streams it */
}
