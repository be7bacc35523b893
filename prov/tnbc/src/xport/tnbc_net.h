/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What the network transports (TCP, verbs) share and shm does not: an
 * address book of the sources that introduced themselves, the sources a
 * connection has introduced, whether an application thread polls, and
 * the receive side's copy out of memory.  A network
 * transport includes this beside tnbc_xport.h and tnbc_base.h.
 */
#ifndef TNBC_NET_H
#define TNBC_NET_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "tnbc_xport.h"

/* Where sources listen: what the application gave (pinned: an AV's
 * address, never replaced by what a connection says), and what proven
 * connections told (learned: at most TNBC_NET_BOOK_LEARNED, the
 * oldest forgotten first, so that a flood of made-up names costs a
 * bounded table and pushes out only other learned ones).  A packet's
 * source name resolves through it when the protocol answers. */
#define TNBC_NET_BOOK_BUCKETS 1024
#define TNBC_NET_BOOK_LEARNED 4096

struct tnbc_net_book {
	pthread_mutex_t lock;
	struct tnbc_net_entry *bucket[TNBC_NET_BOOK_BUCKETS];
	struct tnbc_net_entry *oldest, *newest; /* learned ones */
	size_t learned;
	uint64_t evicted; /* learned names forgotten for room */
};

void tnbc_net_book_init(struct tnbc_net_book *b);
void tnbc_net_book_fini(struct tnbc_net_book *b);
/* Copies the address of name (len bytes) into addr; false if unknown. */
bool tnbc_net_book_get(struct tnbc_net_book *b, const struct tnbc_name *name,
		       void *addr, size_t len);
/* As book_get, and says whether the application gave it. */
bool tnbc_net_book_find(struct tnbc_net_book *b, const struct tnbc_name *name,
			void *addr, size_t len, bool *pinned);
/* Records where name listens, as a proven connection said; a pinned
 * address stays.  len <= TNBC_XADDR_LEN. */
void tnbc_net_book_put(struct tnbc_net_book *b, const struct tnbc_name *name,
		       const void *addr, size_t len);
/* Records where name listens, as the application said. */
void tnbc_net_book_pin(struct tnbc_net_book *b, const struct tnbc_name *name,
		       const void *addr, size_t len);

/* The sources one connection has introduced to its peer. */
#define TNBC_NET_INTROS 8

struct tnbc_net_intros {
	struct tnbc_name name[TNBC_NET_INTROS];
	unsigned n;
};

bool tnbc_net_introduced(const struct tnbc_net_intros *in,
			 const struct tnbc_name *src);
/* Remembers src; a domain with many endpoints forgets one. */
void tnbc_net_intro_add(struct tnbc_net_intros *in,
			const struct tnbc_name *src);

/* Whether an application thread polls (app_mark), so that the engine
 * naps beside it rather than race it for every packet, as it does beside
 * shm's doorbell. */
struct tnbc_net_app {
	_Atomic uint64_t app_ns; /* the last application poll; 0: none */
	_Atomic uint64_t window_ns; /* how long a poll counts */
};

void tnbc_net_app_init(struct tnbc_net_app *s);
/* The ops table's app_mark, app_active and set_window of a network
 * transport, whose struct tnbc_xdom begins with its struct
 * tnbc_net_app. */
void tnbc_net_app_mark(struct tnbc_xdom *xdom, bool active);
bool tnbc_net_app_active(struct tnbc_xdom *xdom);
void tnbc_net_set_window(struct tnbc_xdom *xdom, uint64_t ns);

/* tnbc_xrx.copy for a packet wholly in memory at x->head. */
ssize_t tnbc_net_mem_copy(struct tnbc_xrx *x, size_t off,
			  const struct iovec *iov, size_t iov_count, size_t n);

/* A hook of the shm doorbell's sleep policy that a network transport
 * has no use for: its senders never skip a wake-up. */
void tnbc_net_rx_posted(struct tnbc_xdom *xdom, int delta);

#endif /* TNBC_NET_H */
