/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The TCP transport's sending side: a packet written to its peer's
 * socket at once, or left in the peer's out buffer for the waker
 * (TNBC_TCP_OUT_MAX, then -FI_EAGAIN: back pressure), and the
 * introductions and hold notices written before or between packets.
 */
#include "tnbc_tcp.h"

/* Writes iov to p's socket a tnbc_tcp_write_max at a time, until it is
 * written or the socket is full; the bytes written, or a negative errno
 * when none were.  A packet of up to two goes in one write: split, a
 * 64 KiB one paid a second system call for its last 2 KiB, and moved
 * 0.92 of the bytes per second (medians of 10 paired rounds).  peer->lock
 * held, p up. */
static ssize_t tnbc_tcp_writev(struct tnbc_xpeer *p, const struct iovec *iov,
			       size_t niov, size_t total)
{
	size_t max = tnbc_tcp_write_max(p), done = 0;

	if (total <= 2 * max)
		max = total;

	while (done < total) {
		struct iovec part[TNBC_TCP_SEND_IOV];
		size_t want = total - done < max ? total - done : max;
		struct msghdr mh = {.msg_iov = part};
		ssize_t n;

		mh.msg_iovlen = tnbc_iov_slice(iov, niov, done, want, part,
					       TNBC_TCP_SEND_IOV);
		n = sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return done ? (ssize_t)done : -errno;
		atomic_fetch_add_explicit(&p->xdom->writes, 1,
					  memory_order_relaxed);
		done += (size_t)n;
		if ((size_t)n < want)
			break; /* full */
	}
	return (ssize_t)done;
}

/* Appends n bytes of the application's memory, which may be
 * unreadable: read through the kernel, which reports that as an error
 * where a memcpy would fault (-FI_EFAULT then). */
static int tnbc_tcp_out_put_user(struct tnbc_xpeer *p, const void *data,
				 size_t n)
{
	struct iovec l, r;
	int ret = tnbc_tcp_out_room(p, n);

	if (ret)
		return ret;
	l.iov_base = p->out + p->out_len;
	l.iov_len = n;
	r.iov_base = (void *)data;
	r.iov_len = n;
	if (n && process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)n)
		return -FI_EFAULT;
	p->out_len += n;
	return 0;
}

/* Tells the peer where src listens, once per connection; peer->lock
 * held. */
static int tnbc_tcp_introduce(struct tnbc_xpeer *p, const struct tnbc_name *src)
{
	struct tnbc_tcp_rec rec = {.len = sizeof(struct tnbc_tcp_intro),
				   .type = TNBC_TCP_INTRO};
	struct tnbc_tcp_intro in = {.src = *src};
	struct tnbc_xdom *xdom = p->xdom;
	bool found = false;

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
	if (p->out_len + sizeof(rec) + sizeof(in) > TNBC_TCP_OUT_MAX)
		return -FI_EAGAIN;
	if (tnbc_tcp_out_put(p, &rec, sizeof(rec)) ||
	    tnbc_tcp_out_put(p, &in, sizeof(in)))
		return -FI_EAGAIN;
	tnbc_net_intro_add(&p->intros, src);
	return 0;
}

/* Tells the process of a connection (its identity who) whether our
 * endpoint "by" holds its messages back, on a connection of our domain
 * to who.  0, or why not (-FI_EAGAIN: later). */
int tnbc_tcp_notice(struct tnbc_xdom *xdom, const struct tnbc_name *who,
		    const struct tnbc_name *by, bool on)
{
	struct tnbc_tcp_rec rec = {.len = sizeof(struct tnbc_net_hold),
				   .type = TNBC_TCP_HOLD};
	struct tnbc_net_hold h = {.by = *by, .on = on};
	struct tnbc_xpeer *p;
	int ret = tnbc_tcp_peer_get(xdom, who, NULL, &p);

	if (ret)
		return ret;
	pthread_mutex_lock(&p->lock);
	ret = tnbc_tcp_up(p, by);
	if (!ret && p->out_len - p->out_off + sizeof(rec) + sizeof(h) >
			    TNBC_TCP_OUT_MAX)
		ret = -FI_EAGAIN;
	if (!ret && (tnbc_tcp_out_put(p, &rec, sizeof(rec)) ||
		     tnbc_tcp_out_put(p, &h, sizeof(h))))
		ret = -FI_EAGAIN;
	if (!ret)
		tnbc_tcp_flush(p);
	pthread_mutex_unlock(&p->lock);
	return ret;
}

int tnbc_tcp_send(struct tnbc_xpeer *p, const struct tnbc_xpkt *pkt)
{
	size_t len = (size_t)pkt->frame_len + pkt->payload_len;
	struct tnbc_tcp_rec rec = {.len = (uint32_t)len, .type = TNBC_TCP_PKT};
	struct iovec iov[TNBC_TCP_SEND_IOV];
	static const uint8_t zeros[8];
	size_t niov = 0, total = sizeof(rec) + TNBC_TCP_SPAN(len), done = 0,
	       at_start;
	int ret = 0;

	if (pkt->frame_len > TNBC_XPKT_FRAME_MAX ||
	    len > tnbc_tcp_max_packet(p))
		return -FI_EMSGSIZE;
	if (pkt->flags & TNBC_XPKT_PLACED)
		rec.flags |= TNBC_TCP_REC_PLACED;
	/* the peer holds our messages back: they wait in the core */
	if ((pkt->flags & TNBC_XPKT_HOLDS) &&
	    atomic_load_explicit(&p->held, memory_order_relaxed))
		return atomic_load(&p->dead) ? -FI_EHOSTUNREACH : -FI_EAGAIN;
	pthread_mutex_lock(&p->lock);
	ret = tnbc_tcp_up(p, pkt->src);
	if (ret)
		goto out;
	if (p->out_len - p->out_off + total > TNBC_TCP_OUT_MAX) {
		tnbc_tcp_flush(p);
		if (p->out_len - p->out_off + total > TNBC_TCP_OUT_MAX) {
			ret = p->state == TNBC_TCP_DEAD ? -FI_EHOSTUNREACH
							: -FI_EAGAIN;
			goto out;
		}
	}
	if (pkt->src) {
		ret = tnbc_tcp_introduce(p, pkt->src);
		if (ret)
			goto out;
	}
	at_start = p->out_len - p->out_off; /* compaction keeps this */
	iov[niov].iov_base = &rec;
	iov[niov++].iov_len = sizeof(rec);
	iov[niov].iov_base = (void *)pkt->frame;
	iov[niov++].iov_len = pkt->frame_len;
	for (size_t i = 0, left = pkt->payload_len;
	     i < pkt->iov_count && left &&
	     niov < sizeof(iov) / sizeof(iov[0]) - 1;
	     i++) {
		size_t n =
			pkt->iov[i].iov_len < left ? pkt->iov[i].iov_len : left;

		if (!n)
			continue;
		iov[niov].iov_base = pkt->iov[i].iov_base;
		iov[niov++].iov_len = n;
		left -= n;
	}
	if (TNBC_TCP_SPAN(len) > len) {
		iov[niov].iov_base = (void *)zeros;
		iov[niov++].iov_len = TNBC_TCP_SPAN(len) - len;
	}
	/* straight to the socket when nothing waits before it */
	if (p->state == TNBC_TCP_UP && p->out_off == p->out_len) {
		ssize_t n = tnbc_tcp_writev(p, iov, niov, total);

		if (n == -EFAULT) {
			/* nothing written: the stream goes on */
			ret = -FI_EFAULT;
			goto out;
		}
		if (n < 0 && n != -EAGAIN) {
			tnbc_tcp_peer_dead(p, strerror((int)-n));
			ret = -FI_EHOSTUNREACH;
			goto out;
		}
		/* a write that failed after others leaves its rest to the
		 * buffer below, which meets the same fault or error (and
		 * ends the connection: part of the packet is out) */
		done = n > 0 ? (size_t)n : 0;
	}
	/* the rest waits for the waker, which writes it once the socket
	 * can take more */
	for (size_t i = 0, at = 0; i < niov && !ret; i++) {
		size_t l = iov[i].iov_len, skip = 0;

		if (at + l <= done) {
			at += l;
			continue;
		}
		if (done > at)
			skip = done - at;
		/* the first two are ours, the payload the application's */
		ret = (i < 2 ? tnbc_tcp_out_put : tnbc_tcp_out_put_user)(
			p, (uint8_t *)iov[i].iov_base + skip, l - skip);
		at += l;
	}
	if (ret && done) {
		/* part of it is on the wire: the stream cannot go on */
		tnbc_tcp_peer_dead(p, ret == -FI_EFAULT
					      ? "unreadable payload mid-packet"
					      : "out of memory mid-packet");
		ret = ret == -FI_EFAULT ? ret : -FI_EHOSTUNREACH;
	} else if (ret) {
		/* none of it on the wire: drop what was queued of it */
		p->out_len = p->out_off + at_start;
	}
	/* what waited before it (an introduction) goes now: the waker
	 * writes only when the socket had been full */
	if (!ret)
		tnbc_tcp_flush(p);
out:
	if (ret == -FI_EAGAIN)
		p->refused = true;
	pthread_mutex_unlock(&p->lock);
	return ret;
}
