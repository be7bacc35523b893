/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The TCP transport's stream format: records, the handshake, addresses.
 * One header, so that the transport and the tests that play a stranger
 * against it build the same bytes.
 *
 * A connection opens with a hello.  The connection's identity is the
 * process of the hello's "from": every packet it carries must name an
 * endpoint of that process as its source, or the protocol drops it
 * (tnbc_xrx.from).  With an auth_key, the connecting side proves it
 * holds the key and the listening side proves it back, each over the
 * other's fresh nonce:
 *
 *	C -> L	HELLO (nonce_c)
 *	L -> C	CHAL  (nonce_l, mac_l = HMAC(key, "L" | hello | nonce_l))
 *	C -> L	PROOF (mac_c = HMAC(key, "C" | hello | nonce_l | mac_l))
 *
 * Nothing but the hello goes before the proof either way: C writes no
 * packet before it checked mac_l, and L reads none before it checked
 * mac_c.  The key never travels, and a recorded stream replayed meets
 * a fresh nonce_l its proof does not cover.  Without a key there is no
 * challenge: C's packets follow the hello at once.
 *
 * A lookup (who listens here?, for FI_SOCKADDR_IN) is a hello with
 * TNBC_TCP_HELLO_LOOKUP and no names, answered by IAM (after the proof,
 * with a key), the connection's last record.
 */
#ifndef TNBC_TCP_PROTO_H
#define TNBC_TCP_PROTO_H

#include <stdint.h>

#include "tnbc_xport.h"
#include "../tnbc_net_proto.h"

/* The stream's format; a peer speaking another version is refused at
 * its hello.  7: the handshake above, and no key in the clear.  8: hold
 * notices. */
#define TNBC_TCP_VERSION 8
#define TNBC_TCP_MAGIC	 0x54424e54u /* "TNBT" */

enum tnbc_tcp_rec_type {
	TNBC_TCP_HELLO = 1,
	TNBC_TCP_INTRO = 2,
	TNBC_TCP_PKT = 3,
	TNBC_TCP_IAM = 5, /* a struct tnbc_addr; empty: refused */
	TNBC_TCP_CHAL = 6, /* struct tnbc_net_chal */
	TNBC_TCP_PROOF = 7, /* struct tnbc_tcp_proof */
	TNBC_TCP_HOLD = 8, /* struct tnbc_net_hold */
};

/* tnbc_tcp_rec.flags */
#define TNBC_TCP_REC_PLACED (1u << 0) /* TNBC_XPKT_PLACED */

/* Every record begins at a multiple of 8 bytes from the stream's start
 * (its body is padded to one), so that a packet read into a buffer lies
 * as aligned as the protocol reads it. */
struct tnbc_tcp_rec {
	uint32_t len; /* bytes of the body, the padding left out */
	uint16_t type; /* enum tnbc_tcp_rec_type */
	uint16_t flags;
};

#define TNBC_TCP_SPAN(len) (((size_t)(len) + 7) & ~(size_t)7)

/* A transport address: the xaddr slot of a name. */
struct tnbc_tcp_addr {
	uint16_t family; /* 4 or 6; 0: none */
	uint16_t port; /* network order */
	uint32_t pad;
	uint8_t ip[16];
};

_Static_assert(sizeof(struct tnbc_tcp_addr) == TNBC_XADDR_TCP_LEN, "tcp addr");

/* tnbc_tcp_hello.flags */
/* the connecting domain has an auth_key: a challenge must come */
#define TNBC_TCP_HELLO_KEYED (1u << 0)
/* "from" reads what comes back on this connection: the listener may
 * send it its packets here rather than open a connection of its own */
#define TNBC_TCP_HELLO_TWO_WAY (1u << 1)
/* a lookup: no names, answered by IAM */
#define TNBC_TCP_HELLO_LOOKUP (1u << 2)

struct tnbc_tcp_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t flags; /* TNBC_TCP_HELLO_* */
	struct tnbc_name to; /* the endpoint this connection is for */
	/* the endpoint that dialed: its process is the connection's
	 * identity, and where it listens (its address's host must be the
	 * one the connection comes from, unless a key proves it) */
	struct tnbc_name from;
	struct tnbc_tcp_addr from_addr;
	uint8_t nonce[TNBC_NET_NONCE_LEN];
};

struct tnbc_tcp_proof {
	uint8_t mac[TNBC_NET_MAC_LEN];
};

/* Where src, an endpoint of the connection's process, listens. */
struct tnbc_tcp_intro {
	struct tnbc_name src;
	struct tnbc_tcp_addr addr;
};

/* The labels that keep the two MACs of a handshake apart. */
#define TNBC_TCP_MAC_L "tnbc-tcp-7 listener"
#define TNBC_TCP_MAC_C "tnbc-tcp-7 connector"

#endif /* TNBC_TCP_PROTO_H */
