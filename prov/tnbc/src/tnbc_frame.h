/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Packets on the wire: framing for a transport, and the one send every
 * packet of the protocol goes through (tnbc_frame.c).
 */
#ifndef TNBC_FRAME_H
#define TNBC_FRAME_H

#include "tnbc.h"

/* Frames (tnbc_frame.c).  pack writes hdr's frame for xops and returns
 * its length; unpack copies a frame out of a packet that arrived at the
 * endpoint named self, checks it against len and returns where the
 * payload starts, or 0 for a malformed one. */
size_t tnbc_frame_pack(const struct tnbc_xport_ops *xops,
		       const struct tnbc_hdr *hdr,
		       uint8_t frame[TNBC_XPKT_FRAME_MAX]);
size_t tnbc_frame_unpack(const struct tnbc_xport_ops *xops,
			 const struct tnbc_name *self, const uint8_t *pkt,
			 size_t len, struct tnbc_hdr *hdr);
/* Every packet the protocol sends goes through here: framed, and told
 * apart for the transport (parks, unordered). */
int tnbc_pkt_send(struct tnbc_xpeer *peer, const struct tnbc_hdr *hdr,
		  const struct iovec *iov, size_t count);
/* The largest payload of one packet to peer, whatever its frame. */
static inline size_t tnbc_max_payload(struct tnbc_xpeer *peer)
{
	return tnbc_xpeer_ops(peer)->max_packet(peer) - TNBC_XPKT_FRAME_MAX;
}

#endif /* TNBC_FRAME_H */
