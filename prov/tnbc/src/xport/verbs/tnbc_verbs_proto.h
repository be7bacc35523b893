/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The verbs transport's wire format: what its connect requests,
 * accepts and messages carry.  One header, beside TCP's
 * (tcp/tnbc_tcp_proto.h); what both carry alike is tnbc_net_proto.h's.
 */
#ifndef TNBC_VERBS_PROTO_H
#define TNBC_VERBS_PROTO_H

#include <stdint.h>

#include "tnbc_xport.h"
#include "../tnbc_net_proto.h"

/* The wire format; a peer speaking another version is refused when it
 * connects.  2: the handshake below, and no key in the clear.  3: hold
 * notices.  4: a hold notice comes back on the held queue pair. */
#define TNBC_VERBS_VERSION 4
#define TNBC_VERBS_MAGIC   0x54424e56u /* "TBNV" */

/* A message's immediate data: its kind, and for a hold notice (no
 * bytes, from the accepting side) whether the receiver holds the
 * connector's messages back; the rest is zero. */
enum tnbc_verbs_msg {
	TNBC_VERBS_HELLO = 1,
	TNBC_VERBS_INTRO = 2,
	TNBC_VERBS_PKT = 3,
	TNBC_VERBS_HOLD = 4,
};
#define TNBC_VERBS_KIND(imm) ((imm)&0xffu)
#define TNBC_VERBS_HOLD_ON   (1u << 8)

/* A transport address: the verbs bytes of a name's xaddr region. */
struct tnbc_verbs_addr {
	uint16_t family; /* 4; 0: none */
	uint16_t port; /* network order */
	uint8_t ip[4];
};

_Static_assert(sizeof(struct tnbc_verbs_addr) == TNBC_XADDR_VERBS_LEN,
	       "verbs addr");

/*
 * The handshake, as over TCP (tcp/tnbc_tcp_proto.h) but carried by the
 * connection manager: the connect request names the endpoint and
 * brings the connector's fresh nonce; with an auth_key the accept
 * answers with the listener's nonce and its MAC over both, which the
 * connector checks before it sends anything; the first message on the
 * queue pair, the hello, names the endpoint that dialed (its process
 * is the connection's identity: every packet must come from it) and
 * carries the connector's MAC over the request, the listener's nonce
 * and MAC.  The listener takes nothing before a hello that proves it.
 */
#define TNBC_VERBS_NONCE_C   16
#define TNBC_VERBS_REQ_KEYED (1u << 0) /* tnbc_verbs_req.flags */

/* What a connect request carries (a connect's private data holds 56
 * bytes on every device). */
struct tnbc_verbs_req {
	uint32_t magic;
	uint16_t version;
	uint16_t flags; /* TNBC_VERBS_REQ_* */
	struct tnbc_name to; /* the endpoint this connection is for */
	uint8_t nonce[TNBC_VERBS_NONCE_C];
};

_Static_assert(sizeof(struct tnbc_verbs_req) <= 56, "rdma_cm private data");

/* A keyed accept carries a struct tnbc_net_chal (an accept's private
 * data holds 196 bytes). */
_Static_assert(sizeof(struct tnbc_net_chal) <= 196, "rdma_cm private data");

/* The first message on the queue pair. */
struct tnbc_verbs_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t pad;
	/* the endpoint that dialed, and where it listens: its host must be
	 * the one the connection comes from, unless a key proves it */
	struct tnbc_name from;
	struct tnbc_verbs_addr from_addr;
	uint8_t mac[TNBC_NET_MAC_LEN]; /* zero without a key */
};

#define TNBC_VERBS_MAC_L "tnbc-verbs-2 listener"
#define TNBC_VERBS_MAC_C "tnbc-verbs-2 connector"

struct tnbc_verbs_intro {
	struct tnbc_name src;
	struct tnbc_verbs_addr addr; /* where src listens */
};

#endif /* TNBC_VERBS_PROTO_H */
