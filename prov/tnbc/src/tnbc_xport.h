/*
 * The transport interface.
 *
 * The protocol engine (matching, rendezvous, completions) speaks only to
 * this table.  A transport moves whole packets (a struct tnbc_hdr plus at
 * most max_payload bytes) between named endpoints, wakes a sleeping peer
 * engine, and may offer a single-copy read of a peer's memory.  Shared
 * memory is the first implementation; TCP and verbs implement the same
 * table.  The core never includes a transport's own header.
 *
 * Threading: a transport endpoint has one consumer at a time (the core
 * holds the endpoint lock around poll, rewind, pending, stalled and
 * quiet); send may be called concurrently from any thread for any peer.
 *
 * Flow control: the protocol may keep a packet in the queue (a message
 * nobody asked for, past the unexpected-memory limit).  The transport
 * then offers the packets behind it, and keeps the kept one's buffer, so
 * the sender sees a full queue: back pressure, never a drop.
 */
#ifndef TNBC_XPORT_H
#define TNBC_XPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "tnbc_proto.h"

enum tnbc_xport_id {
	TNBC_XPORT_SHM = 1,
};

struct tnbc_xdom; /* per-domain transport state: doorbell, peer cache */
struct tnbc_xep; /* per-endpoint receive queue */
struct tnbc_xpeer; /* a remote endpoint we can send to */

/* What the protocol did with a packet that poll handed it. */
enum tnbc_rx_verdict {
	TNBC_RX_DONE = 0, /* consumed: its buffer may be reused */
	TNBC_RX_KEEP, /* leave it queued; offered again after rewind */
	TNBC_RX_LATER, /* not consumed: the next poll offers it first */
};

/* Called by poll for each packet; returns an enum tnbc_rx_verdict.  hdr
 * is the transport's private copy, already checked against the packet's
 * length.  payload points into the transport's buffer, which a peer may
 * still write: copy out anything read more than once.  Both are valid
 * only during the call. */
typedef int (*tnbc_rx_fn)(void *arg, const struct tnbc_hdr *hdr,
			  const void *payload);

/* What a transport dropped or stepped over, for fi_tnbc_engine_stats. */
struct tnbc_xport_stats {
	uint64_t bad_pkts; /* malformed: lengths, version */
	uint64_t dead_cells; /* claimed by a sender that died meanwhile */
	uint64_t refused; /* peers not mapped: not a trusted owner */
	uint64_t slot_pkts; /* packets taken from a slot (mailbox) */
};

/* How the engine sleeps (sleep_begin). */
enum tnbc_sleep {
	/* bounded, while an application thread polls: senders may leave
	 * packets to it */
	TNBC_SLEEP_NAP,
	/* bounded, the application away: senders ring, and a sender that
	 * publishes as the engine goes to sleep may go unseen until the
	 * bound (no barrier is run for it, see TNBC_SLEEP_LONG) */
	TNBC_SLEEP_SHORT,
	/* unbounded, the application away: senders ring, and none is
	 * missed (the transport runs whatever barrier that takes) */
	TNBC_SLEEP_LONG,
};

struct tnbc_xport_ops {
	const char *name;
	enum tnbc_xport_id id;

	int (*dom_open)(struct tnbc_xdom **xdom);
	void (*dom_close)(struct tnbc_xdom *xdom);

	/* svc >= 0 names the endpoint by a well-known service number;
	 * -FI_EADDRINUSE when another process holds it.  Other failures
	 * return the error that occurred. */
	int (*ep_open)(struct tnbc_xdom *xdom, long svc, struct tnbc_xep **xep,
		       struct tnbc_name *name);
	void (*ep_close)(struct tnbc_xep *xep);
	/* Largest payload one packet to this peer may carry. */
	size_t (*max_payload)(struct tnbc_xpeer *peer);

	/* Finds or maps a peer; the handle lives as long as the xdom.
	 * -FI_EACCES for a peer this process must not trust (fi_tnbc(7),
	 * SECURITY). */
	int (*peer_get)(struct tnbc_xdom *xdom, const struct tnbc_name *name,
			struct tnbc_xpeer **peer);
	/* Whether the peer's process still exists (for error reporting). */
	bool (*peer_alive)(struct tnbc_xpeer *peer);

	/* One packet; -FI_EAGAIN when the peer's queue is full.  Packets
	 * to one peer arrive in the order they were sent. */
	int (*send)(struct tnbc_xpeer *peer, const struct tnbc_hdr *hdr,
		    const struct iovec *iov, size_t iov_count);
	/* The same for a packet that may pass, and be passed by, the
	 * peer's other packets (the protocol names it by itself): a
	 * transport with a faster lane for small ones uses it.  NULL: send
	 * does. */
	int (*send_unordered)(struct tnbc_xpeer *peer,
			      const struct tnbc_hdr *hdr,
			      const struct iovec *iov, size_t iov_count);
	/* Offers up to budget packets, in order, from the oldest not yet
	 * offered; returns how many were consumed.  Consumer only. */
	int (*poll)(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg, int budget);
	/* The next poll offers the kept packets again, oldest first. */
	void (*rewind)(struct tnbc_xep *xep);
	/* A packet not offered yet is queued.  Consumer only. */
	bool (*pending)(struct tnbc_xep *xep);
	/* look_mark remembers how far senders have taken the queue now;
	 * unlooked then says whether a packet from before that point is
	 * still to be offered.  Called after rx_posted(+1): those are the
	 * packets whose senders may have seen no receive posted and left
	 * them without a wake-up.  Consumer only. */
	void (*look_mark)(struct tnbc_xep *xep);
	bool (*unlooked)(struct tnbc_xep *xep);
	/* The queue waits behind a packet a sender is still writing (or
	 * died writing): poll again within a bounded time, since nobody
	 * may ring for it.  Consumer only. */
	bool (*stalled)(struct tnbc_xep *xep);
	/* Nothing to offer now, as a look without the consumer's lock
	 * sees it (any thread, the consumer's lock not held): a hint that
	 * errs towards polling, and says no now and then so that poll can
	 * look for a stalled queue. */
	bool (*idle)(struct tnbc_xep *xep);
	/* Only eager messages queued (or none), and room for as many more:
	 * with no receive posted they can wait for the application. */
	bool (*quiet)(struct tnbc_xep *xep);

	/* Single-copy read from the peer's memory.  Returns bytes read or a
	 * negative fi_errno; -FI_EPERM/-FI_ENOSYS mean "use streaming". */
	ssize_t (*pull)(struct tnbc_xpeer *peer, const struct iovec *local,
			size_t local_count, const struct iovec *remote,
			size_t remote_count);

	/* Engine sleep/wake.  The doorbell is per xdom (one engine per
	 * domain).  app_mark records that an application thread is driving
	 * progress itself (or, false, that none is); app_active says
	 * whether one did within the last window (set_window).  Senders
	 * skip waking an engine that naps (TNBC_SLEEP_NAP) while the
	 * application polls.
	 * Sleeping is split so the caller can check its queues for pending
	 * packets between sleep_begin and sleep_wait without holding any
	 * lock across the wait: a packet queued after sleep_begin makes
	 * sleep_wait return at once. */
	void (*app_mark)(struct tnbc_xdom *xdom, bool active);
	/* An endpoint of this domain now has receives posted (delta > 0)
	 * or no longer has (< 0; see tnbc_ep.rx_marked).  While none has,
	 * a sender need not wake the engine for an eager message: it
	 * completes nothing until the application calls in, and the
	 * application finds it in the queue.  After posting, the caller
	 * must look at its queue itself (a sender may have seen the old
	 * count). */
	void (*rx_posted)(struct tnbc_xdom *xdom, int delta);
	bool (*app_active)(struct tnbc_xdom *xdom);
	/* How long a poll counts as polling, for app_active and for
	 * senders (FI_TNBC_APP_WINDOW_US until the engine changes it). */
	void (*set_window)(struct tnbc_xdom *xdom, uint64_t ns);
	unsigned (*sleep_begin)(struct tnbc_xdom *xdom, enum tnbc_sleep how);
	void (*sleep_cancel)(struct tnbc_xdom *xdom);
	void (*sleep_wait)(struct tnbc_xdom *xdom, unsigned token,
			   uint64_t timeout_ns);
	void (*wake)(struct tnbc_xdom *xdom);
	void (*stats)(struct tnbc_xdom *xdom, struct tnbc_xport_stats *st);
};

extern const struct tnbc_xport_ops tnbc_shm_ops;

#endif /* TNBC_XPORT_H */
