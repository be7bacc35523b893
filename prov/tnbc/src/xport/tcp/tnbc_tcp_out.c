/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A TCP peer's out buffer: the bytes that wait for its socket (the
 * hello, records, packets the socket did not take at once), and the
 * writes that drain it.  The sender fills it, the waker and the
 * connection manager drain it; peer->lock held throughout.
 */
#include "tnbc_tcp.h"

/* How much one write to a connection may carry: the whole MSS-sized
 * segments of one GSO segment.  A larger write copies segment after
 * segment while the socket is owned, and the acknowledgements that
 * come meanwhile wait in its backlog (the kernel looks at it every 16
 * segments, 1 MiB here) with the window closed, so the data goes out
 * in bursts as the write ends; a write that ends a segment early sends
 * a small one after it.  Between two namespaces, 1 MiB messages moved
 * 0.90 of tcp;ofi_rxm's bytes per second written whole, 1.05 in
 * writes of 64 KiB and 1.65 in writes of 65160 B, 45 segments of
 * 1448 (fi_tnbc(7)).  peer->lock held, p up. */
size_t tnbc_tcp_write_max(struct tnbc_xpeer *p)
{
	int mss = 0;
	socklen_t l = sizeof(mss);

	if (p->write_max)
		return p->write_max;
	if (getsockopt(p->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &l) || mss <= 0 ||
	    (unsigned)mss > TNBC_TCP_GSO_BYTES / 2)
		mss = 1448; /* unknown: Ethernet's */
	/* the kernel keeps room for headers below the GSO size */
	p->write_max =
		(TNBC_TCP_GSO_BYTES - 512u) / (unsigned)mss * (unsigned)mss;
	return p->write_max;
}

/* Writes what the sender left: while the handshake is on, no more than
 * the hello.  peer->lock held. */
void tnbc_tcp_flush(struct tnbc_xpeer *p)
{
	for (;;) {
		size_t end =
			p->state == TNBC_TCP_PROVING ? p->hs_at : p->out_len;
		size_t max, want;
		ssize_t n;

		if ((p->state != TNBC_TCP_UP && p->state != TNBC_TCP_PROVING) ||
		    p->out_off >= end)
			break;
		max = tnbc_tcp_write_max(p);
		want = end - p->out_off < max ? end - p->out_off : max;
		n = send(p->fd, p->out + p->out_off, want, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			tnbc_tcp_peer_dead(p, strerror(errno));
			return;
		}
		atomic_fetch_add_explicit(&p->xdom->writes, 1,
					  memory_order_relaxed);
		p->out_off += (size_t)n;
	}
	if (p->out_off == p->out_len)
		p->out_off = p->out_len = 0;
}

/* Makes room for n more bytes of what waits to be written; peer->lock
 * held. */
int tnbc_tcp_out_room(struct tnbc_xpeer *p, size_t n)
{
	size_t cap = p->out_cap ? p->out_cap : 65536;
	uint8_t *b;

	if (p->out_len + n <= p->out_cap)
		return 0;
	if (p->out_off) {
		memmove(p->out, p->out + p->out_off, p->out_len - p->out_off);
		p->hs_at = p->hs_at > p->out_off ? p->hs_at - p->out_off : 0;
		p->out_len -= p->out_off;
		p->out_off = 0;
	}
	while (cap < p->out_len + n)
		cap *= 2;
	if (cap != p->out_cap) {
		b = realloc(p->out, cap);
		if (!b)
			return -FI_EAGAIN; /* memory may come back */
		p->out = b;
		p->out_cap = cap;
	}
	return 0;
}

/* Appends our own bytes (records, frames). */
int tnbc_tcp_out_put(struct tnbc_xpeer *p, const void *data, size_t n)
{
	int ret = tnbc_tcp_out_room(p, n);

	if (!ret) {
		memcpy(p->out + p->out_len, data, n);
		p->out_len += n;
	}
	return ret;
}
