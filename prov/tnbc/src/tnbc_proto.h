/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * tnbc wire format, version 8 (2 added RMA and atomics; 3 an unguessable
 * nonce in endpoint names; 4 the collectives' match space; 5 reduction
 * segments of any length; 6 the protocol frames its headers itself; 7
 * names list the transports that reach an endpoint, and RMA moves large
 * reads and writes with one single-copy read; 8 a rendezvous names its
 * buffers with the keys a transport's single-copy read needs).
 *
 * Every packet that crosses a transport starts with a frame the protocol
 * makes (tnbc_frame.c): struct tnbc_hdr, or the short frame of a small
 * eager message (struct tnbc_hdr_short).  Frames are the same on every
 * transport, which carries them as bytes it never reads, so that the
 * protocol engine never needs to know which one carried a packet.
 * Any change to a structure in this file bumps TNBC_PROTO_VERSION, and a
 * receiver drops (and logs) packets of another version instead of guessing.
 */
#ifndef TNBC_PROTO_H
#define TNBC_PROTO_H

#include <stdint.h>
#include <stddef.h>

#include "tnbc_xport.h"

#define TNBC_PROTO_VERSION 8

enum tnbc_pkt_type {
	TNBC_PKT_EAGER = 1, /* whole message inline */
	TNBC_PKT_RTS, /* rendezvous: payload is the sender's iovecs */
	TNBC_PKT_ACK, /* rendezvous done: receiver has the data */
	TNBC_PKT_CTS, /* receiver cannot read sender memory: stream it */
	TNBC_PKT_DATA, /* one chunk of a streamed (pipelined) message */
	TNBC_PKT_RMA_REQ, /* RMA or atomic request: struct tnbc_rma_req */
	TNBC_PKT_RMA_RESP, /* its answer: status, read or fetched data */
	TNBC_PKT_MAX
};

/* hdr.flags */
#define TNBC_HDR_TAGGED	 (1u << 0)
#define TNBC_HDR_CQ_DATA (1u << 1)
/* RTS of an FI_DELIVERY_COMPLETE send: its ACK must wait for the
 * receive buffer, never for a provider buffer */
#define TNBC_HDR_DELIVERY (1u << 4)
/* A collective's message (with TNBC_HDR_TAGGED): matched only by the
 * provider's own receives; hdr.tag names the group, the operation and
 * the step (coll/tnbc_sched.h) */
#define TNBC_HDR_COLL (1u << 5)

struct tnbc_hdr {
	uint8_t version;
	uint8_t type; /* enum tnbc_pkt_type */
	uint16_t flags;
	uint32_t payload_len; /* bytes following the header */
	uint64_t tag;
	uint64_t cq_data;
	uint64_t size; /* total message length */
	uint64_t msg_id; /* sender's rendezvous id (RTS, ACK, CTS, DATA) */
	uint64_t token; /* receiver's id for a streamed receive (CTS, DATA) */
	uint64_t offset; /* DATA: where the chunk goes */
	struct tnbc_name src;
};

_Static_assert(sizeof(struct tnbc_hdr) == 88, "header size");
_Static_assert(sizeof(struct tnbc_hdr) <= TNBC_XPKT_FRAME_MAX,
	       "a transport takes the longest frame");

/* hdr.flags of a short frame, which says so itself: a transport keeps
 * no note of how the protocol framed a packet */
#define TNBC_HDR_SHORT	   (1u << 6)
#define TNBC_HDR_SHORT_SVC (1u << 7) /* its source is a service name */

/*
 * The short frame of an eager message to a peer on this host (a
 * TNBC_XPORT_LOCAL transport): every field of its struct tnbc_hdr that
 * is not implied (size is payload_len; msg_id, token and offset are 0;
 * the source's host and transport are the receiver's own).  A message of
 * up to 16 bytes then fits a shared-memory cell's first cache line with
 * its frame, where the full header would spill into a second one.
 * cq_data (8 bytes) follows it when flags has TNBC_HDR_CQ_DATA.
 */
struct tnbc_hdr_short {
	uint8_t version; /* same place as in tnbc_hdr */
	uint8_t type; /* TNBC_PKT_EAGER */
	uint16_t flags; /* same place as in tnbc_hdr; has TNBC_HDR_SHORT */
	uint32_t payload_len;
	uint64_t tag;
	uint32_t pid; /* src.pid */
	uint32_t uid; /* src.uid */
	uint64_t nonce; /* src.nonce */
};

_Static_assert(sizeof(struct tnbc_hdr_short) == 32, "short frame");
_Static_assert(sizeof(struct tnbc_hdr_short) + sizeof(uint64_t) <=
		       TNBC_XPKT_FRAME_SHORT,
	       "a short frame with its cq_data is a short one for transports");

/* Payload of an RTS: the sender's buffers, read by the receiver with a
 * single copy when the transport allows it. */
struct tnbc_rts_iov {
	uint64_t addr;
	uint64_t len;
	uint64_t key; /* the sender's transport's key for it, or 0 */
};

_Static_assert(sizeof(struct tnbc_rts_iov) == sizeof(struct tnbc_xrmem),
	       "an RTS names its buffers as a pull reads them");

/* ACK and CTS carry a status in hdr.size: 0, or a positive fi_errno when
 * the receiver failed the transfer (the sender reports it). */

/*
 * RMA and atomics.  An operation travels as chunks, each one request
 * that fits a packet and one response, so the target never buffers
 * more than a packet and the initiator bounds what is in flight.
 *   RMA_REQ:  hdr.msg_id = initiator's operation id,
 *             hdr.token  = the chunk's byte offset in the local buffers,
 *             hdr.tag    = MR key, hdr.offset = remote address,
 *             hdr.size   = bytes of target memory the chunk covers,
 *             hdr.cq_data with TNBC_HDR_CQ_DATA (writedata, last chunk);
 *             payload = struct tnbc_rma_req, then the write data or
 *             atomic operands (compare operands follow the operands).
 *   RMA_RESP: hdr.msg_id, hdr.token echoed; hdr.size = 0 or a positive
 *             fi_errno; payload = the read data or the old values.
 *
 * A read larger than a packet, when the transport can read a peer's
 * memory (pull), travels instead as one direct request
 * (TNBC_RMA_REQ_DIRECT): hdr.size = the operation's bytes, hdr.token 0,
 * TNBC_HDR_RMA_LAST; payload = struct tnbc_rma_req, struct
 * tnbc_rma_direct (nloc 0), nseg struct tnbc_rma_seg (the target's
 * segments and keys).  The target checks every segment and answers with
 * the target memory they name as struct tnbc_rts_iov, which the
 * initiator reads with one single-copy read.  A target that cannot (a
 * region split into more pieces than one read carries, read events to
 * count) answers FI_ENOSYS, as does an initiator whose read is refused,
 * and the read goes as chunks instead.
 */
enum tnbc_pkt_rma_kind {
	TNBC_RMA_WRITE = 1,
	TNBC_RMA_READ,
	TNBC_RMA_ATOMIC,
	TNBC_RMA_FETCH,
	TNBC_RMA_COMPARE,
};

/* hdr.flags of an RMA_REQ: the last chunk of its operation (remote CQ
 * data and endpoint RMA events are counted once per operation), and the
 * last chunk the operation sends to its region (a region's counter
 * counts an operation once) */
#define TNBC_HDR_RMA_LAST    (1u << 2)
#define TNBC_HDR_RMA_SEG_END (1u << 3)

struct tnbc_rma_req {
	uint8_t kind; /* enum tnbc_pkt_rma_kind */
	uint8_t op; /* enum fi_op */
	uint8_t datatype; /* enum fi_datatype */
	uint8_t flags; /* TNBC_RMA_REQ_* */
	uint8_t pad[4];
};

/* tnbc_rma_req.flags: the whole read, moved by a single-copy read
 * (above) */
#define TNBC_RMA_REQ_DIRECT (1u << 0)

struct tnbc_rma_direct {
	uint32_t nseg; /* struct tnbc_rma_seg that follow */
	uint32_t nloc; /* 0 (room for a write's own buffers) */
};

struct tnbc_rma_seg {
	uint64_t addr; /* as fi_rma_iov.addr */
	uint64_t len;
	uint64_t key;
};

/*
 * A reduction contribution: a message of the collectives' match space
 * (TNBC_HDR_COLL), a header and count values (pairs for TNBC_RED_PKT_LOC)
 * of its datatype.  A descriptor's (fi_tnbc_coll(3)) is exactly struct
 * tnbc_red_pkt, 48 bytes of data whatever count says, and its tag has
 * TNBC_DESC_TAG set (FI_COLLECTIVE groups' tags never do); a segment of
 * a group's reduction is the header and its values only.
 */
#define TNBC_DESC_TAG	   (1ULL << 63)
#define TNBC_RED_MAGIC	   0x7ed0c0deu
#define TNBC_RED_PKT_CP	   (1u << 0)
#define TNBC_RED_PKT_LOC   (1u << 1) /* value/location pairs */
#define TNBC_RED_PKT_BYTES 48

struct tnbc_red_hdr {
	uint32_t magic;
	uint8_t flags; /* TNBC_RED_PKT_* */
	uint8_t op; /* enum fi_op */
	uint8_t datatype; /* enum fi_datatype */
	uint8_t pad;
	uint32_t count;
	uint32_t degree;
	uint32_t order;
	uint32_t errvec;
};

struct tnbc_red_pkt {
	struct tnbc_red_hdr h;
	uint8_t data[TNBC_RED_PKT_BYTES];
};

_Static_assert(sizeof(struct tnbc_red_hdr) == 24, "contribution header");
_Static_assert(sizeof(struct tnbc_red_pkt) == 72, "contribution size");

#endif /* TNBC_PROTO_H */
