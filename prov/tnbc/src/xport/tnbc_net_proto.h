/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The records TCP (tcp/tnbc_tcp_proto.h) and verbs
 * (verbs/tnbc_verbs_proto.h) put on the wire alike: the listener's
 * challenge of a keyed handshake, and a hold notice.  Defined once, so
 * that the two formats cannot drift apart where they agree; each
 * transport's version number covers them.
 */
#ifndef TNBC_NET_PROTO_H
#define TNBC_NET_PROTO_H

#include <stdint.h>

#include "tnbc_xport.h"

/* A handshake's fresh nonce, and its MAC (HMAC-SHA256, tnbc_hmac.h). */
#define TNBC_NET_NONCE_LEN 32
#define TNBC_NET_MAC_LEN   32

/* The listener's answer to a keyed hello: its nonce, and its MAC over
 * the hello and that nonce. */
struct tnbc_net_chal {
	uint8_t nonce[TNBC_NET_NONCE_LEN];
	uint8_t mac[TNBC_NET_MAC_LEN];
};

/* A receiver holding a connection's messages back tells the
 * connection's process, on a connection of its own to it: while on, the
 * sending domain sends the endpoint "by" nothing that could be kept
 * (TNBC_XPKT_HOLDS).  Taken only from by's process. */
struct tnbc_net_hold {
	struct tnbc_name by;
	uint32_t on;
	uint32_t pad;
};

#endif /* TNBC_NET_PROTO_H */
