/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Frames: how the protocol's headers travel through a transport, which
 * carries them as bytes it never reads (tnbc_xport.h).  A small eager
 * message to a peer on this host gets the short frame (tnbc_proto.h);
 * every other packet the full header.  On arrival the frame is copied
 * out of the transport's buffer once, checked against the packet's
 * length, and the rest of the protocol sees the full header either way.
 */
#include <string.h>

#include "tnbc.h"
#include "tnbc_frame.h"

/* Whether hdr may travel as a short frame through xops: the fields the
 * short frame leaves out are implied, and so are the source's host and
 * its transport (the one it came by). */
static bool tnbc_frame_fits_short(const struct tnbc_xport_ops *xops,
				  const struct tnbc_hdr *hdr)
{
	const struct tnbc_name *src = &hdr->src;

	return (xops->flags & TNBC_XPORT_LOCAL) &&
	       hdr->type == TNBC_PKT_EAGER && hdr->size == hdr->payload_len &&
	       !hdr->msg_id && !hdr->token && !hdr->offset &&
	       ((hdr->flags & TNBC_HDR_CQ_DATA) || !hdr->cq_data) &&
	       !(hdr->flags & (TNBC_HDR_SHORT | TNBC_HDR_SHORT_SVC)) &&
	       !src->pad &&
	       (src->kind == TNBC_NAME_PID || src->kind == TNBC_NAME_SVC);
}

/* Inlined into tnbc_pkt_send, the path of every packet. */
static inline __attribute__((always_inline)) size_t
tnbc_frame_make(const struct tnbc_xport_ops *xops, const struct tnbc_hdr *hdr,
		uint8_t frame[TNBC_XPKT_FRAME_MAX])
{
	struct tnbc_hdr_short sh;

	if (!tnbc_frame_fits_short(xops, hdr)) {
		memcpy(frame, hdr, sizeof(*hdr));
		return sizeof(*hdr);
	}
	sh.version = hdr->version;
	sh.type = hdr->type;
	sh.flags = hdr->flags | TNBC_HDR_SHORT;
	if (hdr->src.kind == TNBC_NAME_SVC)
		sh.flags |= TNBC_HDR_SHORT_SVC;
	sh.payload_len = hdr->payload_len;
	sh.tag = hdr->tag;
	sh.pid = hdr->src.pid;
	sh.uid = hdr->src.uid;
	sh.nonce = hdr->src.nonce;
	memcpy(frame, &sh, sizeof(sh));
	if (!(hdr->flags & TNBC_HDR_CQ_DATA)) {
		/* a transport may copy TNBC_XPKT_FRAME_SHORT bytes: none of
		 * them is left from this stack */
		memset(frame + sizeof(sh), 0,
		       TNBC_XPKT_FRAME_SHORT - sizeof(sh));
		return sizeof(sh);
	}
	memcpy(frame + sizeof(sh), &hdr->cq_data, sizeof(hdr->cq_data));
	return sizeof(sh) + sizeof(hdr->cq_data);
}

size_t tnbc_frame_pack(const struct tnbc_xport_ops *xops,
		       const struct tnbc_hdr *hdr,
		       uint8_t frame[TNBC_XPKT_FRAME_MAX])
{
	return tnbc_frame_make(xops, hdr, frame);
}

size_t tnbc_frame_unpack(const struct tnbc_xport_ops *xops,
			 const struct tnbc_name *self, const uint8_t *pkt,
			 size_t len, struct tnbc_hdr *hdr)
{
	struct tnbc_hdr_short sh;
	size_t hlen = sizeof(sh);

	/* both frames begin alike: one copy of the short frame's length
	 * says which this is, then every check reads a private copy */
	if (len < sizeof(sh))
		return 0;
	memcpy(&sh, pkt, sizeof(sh));
	if (!(sh.flags & TNBC_HDR_SHORT)) {
		if (len < sizeof(*hdr))
			return 0;
		memcpy(hdr, pkt, sizeof(*hdr));
		if (hdr->version != TNBC_PROTO_VERSION ||
		    (hdr->flags & (TNBC_HDR_SHORT | TNBC_HDR_SHORT_SVC)) ||
		    hdr->src.version != TNBC_PROTO_VERSION ||
		    sizeof(*hdr) + (size_t)hdr->payload_len != len)
			return 0;
		return sizeof(*hdr);
	}
	/* the short frame implies a source on this host: only a transport
	 * that reaches nothing else may carry one */
	if (!(xops->flags & TNBC_XPORT_LOCAL))
		return 0;
	memset(hdr, 0, sizeof(*hdr));
	if (sh.flags & TNBC_HDR_CQ_DATA) {
		hlen += sizeof(hdr->cq_data);
		if (len < hlen)
			return 0;
		memcpy(&hdr->cq_data, pkt + sizeof(sh), sizeof(hdr->cq_data));
	}
	if (sh.version != TNBC_PROTO_VERSION || sh.type != TNBC_PKT_EAGER ||
	    hlen + (size_t)sh.payload_len != len)
		return 0;
	hdr->version = sh.version;
	hdr->type = sh.type;
	hdr->flags = sh.flags & ~(TNBC_HDR_SHORT | TNBC_HDR_SHORT_SVC);
	hdr->payload_len = sh.payload_len;
	hdr->tag = sh.tag;
	hdr->size = sh.payload_len;
	hdr->src.version = TNBC_PROTO_VERSION;
	hdr->src.xports = (uint16_t)TNBC_XPORT_BIT(xops->id);
	hdr->src.kind =
		sh.flags & TNBC_HDR_SHORT_SVC ? TNBC_NAME_SVC : TNBC_NAME_PID;
	hdr->src.pid = sh.pid;
	hdr->src.uid = sh.uid;
	hdr->src.host = self->host;
	hdr->src.nonce = sh.nonce;
	return hlen;
}

int tnbc_pkt_send(struct tnbc_xpeer *peer, const struct tnbc_hdr *hdr,
		  const struct iovec *iov, size_t count)
{
	const struct tnbc_xport_ops *xops = tnbc_xpeer_ops(peer);
	_Alignas(16) uint8_t frame[TNBC_XPKT_FRAME_MAX];
	struct tnbc_xpkt pkt;

	/* Made here, before the transport claims room for it: once a store
	 * into that room waits for its cache line, a load that cannot take
	 * its value from the store buffer would wait for the line too. */
	pkt.src = &hdr->src;
	pkt.frame = frame;
	pkt.frame_len = (uint32_t)tnbc_frame_make(xops, hdr, frame);
	pkt.payload_len = hdr->payload_len;
	pkt.iov = iov;
	pkt.iov_count = count;
	pkt.flags = 0;
	if (hdr->type == TNBC_PKT_EAGER) {
		/* tnbc_rx_msg keeps one only before it copies */
		pkt.flags = TNBC_XPKT_PARKS | TNBC_XPKT_PLACED;
		/* A collective's messages are named by source and tag alone
		 * (no two of one operation share both), so they need not
		 * keep their order with the peer's other packets.  Nor are
		 * they held back: a collective's peer waits for them. */
		if (hdr->flags & TNBC_HDR_COLL) {
			pkt.flags |= TNBC_XPKT_UNORDERED;
			pkt.lane = (hdr->src.uid + 1) * 0xc2b2ae3d27d4eb4full ^
				   hdr->tag * 0x165667b19e3779f9ull;
		} else {
			pkt.flags |= TNBC_XPKT_HOLDS;
		}
	} else if (hdr->type == TNBC_PKT_RTS) {
		pkt.flags = TNBC_XPKT_HOLDS;
	} else if (hdr->type == TNBC_PKT_DATA) {
		/* tnbc_rx_data never keeps one */
		pkt.flags = TNBC_XPKT_PLACED;
	}
	return xops->send(peer, &pkt);
}
