/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The transport interface.
 *
 * The protocol engine (matching, rendezvous, completions) speaks only to
 * this table, and a transport knows nothing of the protocol: it moves
 * packets, each a frame the protocol made (struct tnbc_xpkt: bytes the
 * transport never reads) and a payload, between named endpoints, wakes
 * a sleeping peer engine, and may offer a single-copy read of a peer's
 * memory.  Shared memory is the first implementation; TCP and verbs
 * implement the same table.  The core never includes a transport's own
 * header, and a transport includes only this file and tnbc_base.h.
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

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

enum tnbc_xport_id {
	TNBC_XPORT_SHM = 1,
	TNBC_XPORT_LOOP = 2, /* endpoints of one process, for tests */
	TNBC_XPORT_TCP = 3,
	TNBC_XPORT_VERBS = 4,
	TNBC_XPORT_ID_MAX
};

/* transports one domain may hold */
#define TNBC_XPORTS_MAX 4

/* The iovecs one single-copy read (pull) may carry, local and remote
 * each. */
#define TNBC_PULL_IOV_MAX 64

/* An endpoint's name.  The core chooses who the endpoint is (kind, pid,
 * uid, host, nonce) and says which transports reach it (xports); each
 * transport opens its end under that identity (ep_open) and finds a
 * peer's again from it (peer_get).  The shm and loop transports need no
 * address beyond the identity.  The core stores names in AVs and in
 * every packet's header, and compares them only with tnbc_name_same.
 * Fixed-size so that it can be hashed and compared as bytes. */
#define TNBC_NAME_LEN 32

enum tnbc_name_kind {
	TNBC_NAME_PID = 1, /* an endpoint named by its process and uid */
	TNBC_NAME_SVC = 2, /* an endpoint named by a service number */
};

/* tnbc_name.xports: the transports that reach the endpoint */
#define TNBC_XPORT_BIT(id) (1u << (id))

/* uid of a TNBC_NAME_PID name in fi_info: chosen when the ep opens */
#define TNBC_UID_ANY UINT32_MAX

struct tnbc_name {
	uint16_t version; /* the protocol's: the core sets and checks it */
	uint16_t xports; /* TNBC_XPORT_BIT of each transport reaching it */
	uint16_t kind; /* enum tnbc_name_kind */
	uint16_t pad;
	uint32_t pid; /* owning process: rendezvous reads its memory */
	uint32_t uid; /* endpoint number within pid, or service */
	uint64_t host; /* boot id hash: pids are only unique per host */
	/* random, chosen when the endpoint opens (0 for a service): the
	 * transport's address of the endpoint cannot be guessed ahead */
	uint64_t nonce;
};

_Static_assert(sizeof(struct tnbc_name) == TNBC_NAME_LEN, "name size");

/* The network transports' own addresses of an endpoint (for TCP, an IP
 * address and port), side by side in one region: each transport reads
 * only its own bytes, at the offset its ops name (xaddr_off, at most
 * xaddr_len long).  All zero: unknown.  The region is small because a
 * name must fit in libfabric's FI_NAME_MAX (Open MPI's OFI BTL refuses
 * longer ones). */
#define TNBC_XADDR_LEN 32
/* the region's map: one place, so that no two transports overlap */
#define TNBC_XADDR_TCP_OFF   0
#define TNBC_XADDR_TCP_LEN   24 /* family, port, IPv4 or IPv6 */
#define TNBC_XADDR_VERBS_OFF 24
#define TNBC_XADDR_VERBS_LEN 8 /* family, port, IPv4 */

/* What fi_getname gives and fi_av_insert takes: who the endpoint is, and
 * where each network transport reaches it.  Packets carry only the name:
 * a transport learns a source's address from its own traffic. */
struct tnbc_addr {
	struct tnbc_name name;
	uint8_t xaddr[TNBC_XADDR_LEN];
};

_Static_assert(sizeof(struct tnbc_addr) == 64, "FI_NAME_MAX");

/* Whether a and b name the same endpoint: a service by its number
 * alone (an AV entry made by fi_av_insertsvc knows no pid), any other
 * by the process and the nonce it chose. */
static inline int tnbc_name_same(const struct tnbc_name *a,
				 const struct tnbc_name *b)
{
	return a->kind == b->kind && a->uid == b->uid &&
	       (a->kind == TNBC_NAME_SVC ||
		(a->pid == b->pid && a->nonce == b->nonce));
}

/* The longest frame the protocol makes: a packet's payload may be as
 * long as max_packet less this, whatever its own frame's length. */
#define TNBC_XPKT_FRAME_MAX 88
/* A frame of up to this many bytes is a short one: the frame buffer is
 * readable (and zeroed past the frame) up to here, so a transport may
 * copy this constant length instead of frame_len (a variable-length
 * copy into a line another core holds costs more than the bytes). */
#define TNBC_XPKT_FRAME_SHORT 40

/* xpkt.flags */
/* The packet completes nothing until its endpoint has a receive posted
 * (see rx_posted): with none posted it may wait in a queue without a
 * wake-up, for the application's next call. */
#define TNBC_XPKT_PARKS (1u << 0)
/* The packet may pass, and be passed by, the peer's other packets: a
 * transport with a faster lane for small ones may use it. */
#define TNBC_XPKT_UNORDERED (1u << 1)
/* The protocol places the packet's payload where it belongs while it is
 * offered, and never keeps (TNBC_RX_KEEP, TNBC_RX_LATER) one whose
 * payload it began to copy: a stream transport may offer it before the
 * payload is in memory, and read the payload straight from the wire. */
#define TNBC_XPKT_PLACED (1u << 2)
/* The packet begins a message of the peer's ordered stream (eager or
 * RTS), which a receiver with no room for it leaves queued until a
 * receive asks for it (TNBC_RX_KEEP): a transport whose queue every
 * sender shares may refuse it (-FI_EAGAIN) while the receiver holds
 * this sender back, so that one sender's kept messages cannot fill the
 * queue for the others.  Answers never carry it: they are never kept. */
#define TNBC_XPKT_HOLDS (1u << 3)

/* Where a transport whose receive queue every sender shares moves kept
 * packets out of it (shm, verbs): of spill_max bytes it may move, a
 * sender (or connection) that has mine of them moved is held back from
 * an eighth on (TNBC_XPKT_HOLDS), and let go below a sixteenth once
 * fewer than half of spill_max (moved, all senders) are left. */
static inline bool tnbc_xhold_due(size_t mine, size_t spill_max)
{
	return mine >= spill_max / 8;
}

static inline bool tnbc_xhold_over(size_t mine, size_t moved, size_t spill_max)
{
	return mine < spill_max / 16 && moved < spill_max / 2;
}

/* One packet to send: frame_len bytes of frame, then payload_len bytes
 * gathered from iov. */
struct tnbc_xpkt {
	/* the sending endpoint, which the frame names too: a network
	 * transport tells the receiver its address once per connection */
	const struct tnbc_name *src;
	const void *frame; /* readable up to TNBC_XPKT_FRAME_MAX bytes */
	uint32_t frame_len;
	uint32_t payload_len;
	const struct iovec *iov;
	size_t iov_count;
	uint32_t flags; /* TNBC_XPKT_* */
	/* spreads unordered packets over a transport's lanes: packets of
	 * one lane value look for the same places first (set only with
	 * TNBC_XPKT_UNORDERED) */
	uint64_t lane;
};

struct tnbc_xdom; /* per-domain transport state: doorbell, peer cache */
struct tnbc_xep; /* per-endpoint receive queue */
struct tnbc_xpeer; /* a remote endpoint we can send to */
struct tnbc_xport_ops;

/* The first member of every transport's struct tnbc_xpeer: a peer handle
 * names the transport that reaches it, so that the core, which may hold
 * peers of several transports, sends each through its own. */
struct tnbc_xpeer_base {
	const struct tnbc_xport_ops *ops;
};

static inline const struct tnbc_xport_ops *
tnbc_xpeer_ops(const struct tnbc_xpeer *peer)
{
	return ((const struct tnbc_xpeer_base *)(const void *)peer)->ops;
}

/* What the protocol did with a packet that poll handed it. */
enum tnbc_rx_verdict {
	TNBC_RX_DONE = 0, /* consumed: its buffer may be reused */
	TNBC_RX_KEEP, /* leave it queued; offered again after rewind */
	TNBC_RX_LATER, /* not consumed: the next poll offers it first */
	TNBC_RX_BAD, /* malformed: dropped, and counted in bad_pkts */
};

/* A packet as poll offers it, valid only during the callback.  Its
 * first head_len bytes lie in memory at head: all of it (head_len ==
 * len) on a transport that holds packets in memory, at least the frame
 * (min(len, TNBC_XPKT_FRAME_MAX) bytes) on one that streams them.  The
 * memory is the transport's, which a peer may still write: the protocol
 * copies its frame out once before checking it, and anything else it
 * reads more than once.  copy moves bytes [off, off + n) of the packet
 * into iov, straight from the wire on a stream transport (the second
 * phase of a receive, so that a payload lands where it belongs with one
 * copy): in order, each byte at most once; bytes the protocol skips or
 * leaves are dropped when the callback returns.  It returns n, or a
 * negative fi_errno when the packet cannot be read whole (its peer
 * died mid-packet). */
struct tnbc_xrx {
	const uint8_t *head;
	size_t head_len;
	size_t len;
	/* The process the transport proved the packet comes from (a
	 * network transport's connection: its handshake's identity): the
	 * packet must name an endpoint of it as its source, or the
	 * protocol drops it.  NULL where the transport's own delivery is
	 * the proof (shm checks the owner of a sender's queue). */
	const struct tnbc_name *from;
	/* Set by the protocol around a copy for which it has committed
	 * nothing yet: a stream transport whose sender stalls mid-payload
	 * may then take back what it placed and return -FI_EAGAIN, and the
	 * protocol returns TNBC_RX_LATER; the transport offers the packet
	 * again, whole and from memory, once the rest came, reading its
	 * other connections meanwhile.  Unset, copy waits for the bytes. */
	bool may_park;
	/* Set by the protocol when it keeps the packet (TNBC_RX_KEEP): the
	 * endpoint its frame names as the message's sender, whose later
	 * messages a shared queue may hold back (TNBC_XPKT_HOLDS). */
	struct tnbc_name kept_src;
	ssize_t (*copy)(struct tnbc_xrx *rx, size_t off,
			const struct iovec *iov, size_t iov_count, size_t n);
};

/* Called by poll for each packet; returns an enum tnbc_rx_verdict.  A
 * packet kept or left for later (TNBC_RX_KEEP, TNBC_RX_LATER) is
 * offered again whole, as it was. */
typedef int (*tnbc_rx_fn)(void *arg, struct tnbc_xrx *rx);

/* What a transport dropped or stepped over, for fi_tnbc_engine_stats. */
struct tnbc_xport_stats {
	uint64_t bad_pkts; /* malformed: lengths, version */
	uint64_t dead_cells; /* claimed by a sender that died meanwhile */
	uint64_t refused; /* peers not mapped: not a trusted owner */
	uint64_t slot_pkts; /* packets taken from a slot (mailbox) */
	uint64_t placed_bytes; /* payload read from the wire into place */
	uint64_t stream_writes; /* writes to its sockets */
	uint64_t strangers; /* connections closed unproven */
	uint64_t spilled; /* kept packets moved out of a shared queue */
	uint64_t held; /* times a sender was held back (TNBC_XPKT_HOLDS) */
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

/* How a transport wakes its domain's engine (dom_open). */
struct tnbc_xkick {
	void (*kick)(void *arg);
	void *arg;
};

/* The longest auth_key a domain may have (fi_domain(3)). */
#define TNBC_AUTH_KEY_MAX 64

/* What a transport's domain is opened with. */
struct tnbc_xdom_attr {
	struct tnbc_xkick wake;
	/* peers must present the same key (none: auth_key_size 0); a
	 * network transport refuses a connection that does not */
	const uint8_t *auth_key;
	size_t auth_key_size;
	/* the core's reading of the host's load, kept up to date for as
	 * long as the domain is open: true while more threads are runnable
	 * than there are CPUs (a transport spins less then) */
	const atomic_bool *host_busy;
};

/* tnbc_xport_ops.flags */
/* Every peer the transport reaches is on this host: a packet's source
 * may leave out what this host's names share. */
#define TNBC_XPORT_LOCAL (1u << 0)
/* (1u << 1) was the doorbell's: a transport with one has a bell. */
/* pull reads a peer's memory (else it answers -FI_ENOSYS, always) */
#define TNBC_XPORT_PULL (1u << 2)
/* and goes on after pull returns (RDMA read): a read that must finish
 * at once (rd NULL) is not made */
#define TNBC_XPORT_PULL_LATER (1u << 3)

/* A region of a peer's memory that pull reads: where, how long, and the
 * key the peer's transport gave it (expose; 0: none was needed, or none
 * could be had).  The wire's struct tnbc_rts_iov carries the same. */
struct tnbc_xrmem {
	uint64_t addr;
	uint64_t len;
	uint64_t key;
};

static inline void tnbc_xrmem_iov(const struct tnbc_xrmem *r, size_t n,
				  struct iovec *out)
{
	for (size_t i = 0; i < n; i++) {
		out[i].iov_base = (void *)(uintptr_t)r[i].addr;
		out[i].iov_len = (size_t)r[i].len;
	}
}

/* A read that pull started and ends later (pull returned
 * -FI_EINPROGRESS).  The transport calls done once, with the bytes read
 * or a negative fi_errno, from a poll of the endpoint the read was
 * started on (the consumer, the core's endpoint lock held), and never
 * after that endpoint's ep_close returned: a read still in flight then
 * is forgotten, and the core frees what it gave. */
struct tnbc_xread {
	void (*done)(struct tnbc_xread *rd, ssize_t n);
};

/* A doorbell transport's sleep (struct tnbc_xport_ops.bell): the
 * engine of a domain whose first transport has one sleeps in
 * sleep_wait (after sleep_begin gave the token) and is woken by wake;
 * sleep_cancel ends a sleep_begin that did not sleep. */
struct tnbc_xport_bell {
	void (*sleep_cancel)(struct tnbc_xdom *xdom);
	void (*sleep_wait)(struct tnbc_xdom *xdom, unsigned token,
			   uint64_t timeout_ns);
	/* A doorbell that is a futex word (shared, 32 bits): what
	 * sleep_wait would wait on, after what sleep_wait does first for a
	 * wait of timeout_ns (0: none).  An engine that serves several
	 * domains waits on all their words at once (futex_waitv), then
	 * calls sleep_cancel.  NULL where the doorbell is no futex word. */
	atomic_uint *(*sleep_word)(struct tnbc_xdom *xdom, uint64_t timeout_ns);
	void (*wake)(struct tnbc_xdom *xdom);
};

struct tnbc_xport_ops {
	const char *name;
	enum tnbc_xport_id id;
	unsigned flags; /* TNBC_XPORT_* */
	/* where this transport's bytes lie in a name's xaddr region, and
	 * how many; -1: it needs none (the identity finds the peer) */
	int xaddr_off;
	int xaddr_len;
	/* Whether the transport can work on this machine at all (a device
	 * present); NULL: always.  FI_TNBC_XPORTS's default leaves out one
	 * that cannot. */
	bool (*usable)(void);
	/* A network transport: the address node and service name (NULL:
	 * any; source: an address to listen on, not to reach), into xaddr;
	 * -FI_ENODATA when they name none it can use. */
	int (*addr_parse)(const char *node, const char *service, bool source,
			  uint8_t *xaddr);
	/* xaddr as text ("10.0.0.1:4000"), at most len bytes with the
	 * NUL; returns the length it needed, the NUL left out. */
	int (*addr_str)(const uint8_t *xaddr, char *buf, size_t len);
	/* addr_str's inverse: the text into xaddr, -FI_EINVAL where it is
	 * none. */
	int (*addr_scan)(const char *text, uint8_t *xaddr);
	/* The transport whose addresses applications know endpoints by
	 * (FI_SOCKADDR_IN; NULL for the others): xaddr as a socket
	 * address, returning its length, or -FI_ENODATA where xaddr names
	 * none of that family. */
	int (*addr_sock)(const uint8_t *xaddr, int family,
			 struct sockaddr_storage *ss);
	/* And the way back: asks the endpoint listening at sa who it is
	 * (a lookup over the network, answered by the peer's own
	 * endpoint, see ep_named), waiting a time the transport documents.
	 * -FI_EHOSTUNREACH when none answered, -FI_EACCES when the peer
	 * refused this domain's auth_key. */
	int (*resolve)(struct tnbc_xdom *xdom, const struct sockaddr *sa,
		       struct tnbc_addr *out);

	/* kick wakes the domain's engine, wherever it sleeps: a transport
	 * whose packets can arrive while the engine sleeps on another's
	 * doorbell calls it (a domain's first transport sleeps the engine,
	 * see sleep_begin). */
	int (*dom_open)(struct tnbc_xdom **xdom,
			const struct tnbc_xdom_attr *attr);
	void (*dom_close)(struct tnbc_xdom *xdom);

	/* Opens the endpoint's end of the transport under the identity in
	 * self (a service number for TNBC_NAME_SVC).  -FI_EADDRINUSE when
	 * another endpoint holds it: the core tries another nonce, or,
	 * for a service, reports it.  Other failures return the error that
	 * occurred.  xaddr (a network transport's, else NULL) holds the
	 * address asked for (zeros: any) and receives the one taken. */
	int (*ep_open)(struct tnbc_xdom *xdom, const struct tnbc_name *self,
		       uint8_t *xaddr, struct tnbc_xep **xep);
	void (*ep_close)(struct tnbc_xep *xep);
	/* The endpoint's whole address, once every transport has opened
	 * its end: what a transport with resolve answers lookups with.
	 * NULL: not needed. */
	void (*ep_named)(struct tnbc_xep *xep, const struct tnbc_addr *self);
	/* Largest packet (frame and payload) this peer takes. */
	size_t (*max_packet)(struct tnbc_xpeer *peer);
	/* Largest message the protocol sends this peer eagerly, before
	 * max_packet caps it; NULL: FI_TNBC_EAGER_SIZE.  A transport whose
	 * packets fill no slots of the receiver's may go further. */
	size_t (*eager_max)(struct tnbc_xpeer *peer);
	/* Largest packet every peer of this transport takes, before any
	 * is known: fi_info's inject size and atomic limits follow from
	 * it. */
	size_t (*packet_limit)(void);
	/* The max_packet of every peer of this transport, where it is the
	 * same for all and follows only job-wide parameters: the two ends
	 * of a pair this transport may carry then cut a message alike
	 * before either knows which link carries it (LSS's segments).
	 * NULL: packet_limit. */
	size_t (*link_packet)(void);

	/* The application put name in an AV with xaddr (its address in
	 * this transport's slot, which may be zeros): a network transport
	 * holds what connections claim of the name against it from now
	 * on.  NULL where there is nothing to hold (shm, loop). */
	void (*addr_known)(struct tnbc_xdom *xdom, const struct tnbc_name *name,
			   const uint8_t *xaddr);
	/* Finds or maps a peer; the handle lives as long as the xdom, and
	 * begins with a struct tnbc_xpeer_base naming these ops.  xaddr is
	 * the peer's address in this transport's slot, or NULL (or zeros)
	 * for a name that came in a packet: a network transport then uses
	 * what it learned from that peer's traffic.  -FI_EACCES for a peer
	 * this process must not trust (fi_tnbc(7), SECURITY). */
	int (*peer_get)(struct tnbc_xdom *xdom, const struct tnbc_name *name,
			const uint8_t *xaddr, struct tnbc_xpeer **peer);
	/* Whether the peer's process still exists (for error reporting). */
	bool (*peer_alive)(struct tnbc_xpeer *peer);

	/* One packet; -FI_EAGAIN when the peer's queue is full,
	 * -FI_EMSGSIZE past max_packet.  Packets to one peer arrive in the
	 * order they were sent, but for TNBC_XPKT_UNORDERED ones. */
	int (*send)(struct tnbc_xpeer *peer, const struct tnbc_xpkt *pkt);
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
	/* Only TNBC_XPKT_PARKS packets queued (or none), and room for as
	 * many more: with no receive posted they can wait for the
	 * application. */
	bool (*quiet)(struct tnbc_xep *xep);

	/* Single-copy read of the peer's memory into local, for endpoint
	 * xep (the consumer).  Returns the bytes read when it finished at
	 * once, -FI_EINPROGRESS when it goes on (rd->done ends it; with rd
	 * NULL the caller can only wait, and a transport that cannot finish
	 * at once answers -FI_ENOSYS), or a negative fi_errno;
	 * -FI_EPERM/-FI_ENOSYS mean "use streaming". */
	ssize_t (*pull)(struct tnbc_xep *xep, struct tnbc_xpeer *peer,
			const struct iovec *local, size_t local_count,
			const struct tnbc_xrmem *remote, size_t remote_count,
			struct tnbc_xread *rd);
	/* Lets the peer read these regions of this process's memory with
	 * its pull: keys[i] receives what the reader must name region i
	 * with, *reg a handle that unexpose takes once the reader is done
	 * (or NULL).  NULL ops: the reader needs no key.  A failure leaves
	 * keys 0, and the reader streams instead. */
	int (*expose)(struct tnbc_xpeer *peer, const struct iovec *iov,
		      size_t count, uint64_t *keys, void **reg);
	void (*unexpose)(struct tnbc_xpeer *peer, void *reg);

	/* Engine sleep/wake.  One engine per domain (one thread may serve
	 * several, see sleep_word).  It sleeps on the
	 * doorbell of the domain's first transport when that one has one
	 * (its bell: sleep_cancel, sleep_wait and wake go to it), else on an
	 * eventfd of the core that kicks write.  sleep_begin goes to every
	 * transport: it tells a transport to watch for packets (and kick) until
	 * the engine next sleeps, since the engine polls it while awake; the
	 * doorbell's returns the token sleep_wait takes, the others' return 0.
	 * app_active, app_mark, rx_posted and set_window go to every one.
	 * app_mark records that an application thread is driving progress
	 * itself (or, false, that none is); app_active says whether one did
	 * within the last window (set_window), as this transport saw it
	 * (the core asks every transport, from any thread: it must only
	 * read).
	 * Senders skip waking an engine that naps (TNBC_SLEEP_NAP) while the
	 * application polls.
	 * Sleeping is split so the caller can check its queues for pending
	 * packets between sleep_begin and sleep_wait without holding any
	 * lock across the wait: a packet queued after sleep_begin makes
	 * sleep_wait (or the eventfd's wait) return at once. */
	void (*app_mark)(struct tnbc_xdom *xdom, bool active);
	/* An endpoint of this domain now has receives posted (delta > 0)
	 * or no longer has (< 0; see tnbc_ep.rx_marked).  While none has,
	 * a sender need not wake the engine for a TNBC_XPKT_PARKS packet: it
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
	/* The doorbell the engine sleeps on; NULL but in a transport with
	 * one (shm), where every other call above is the data path's. */
	const struct tnbc_xport_bell *bell;
	void (*stats)(struct tnbc_xdom *xdom, struct tnbc_xport_stats *st);
};

extern const struct tnbc_xport_ops tnbc_shm_ops;
extern const struct tnbc_xport_ops tnbc_loop_ops;
extern const struct tnbc_xport_ops tnbc_tcp_ops;
#ifdef TNBC_HAVE_VERBS
extern const struct tnbc_xport_ops tnbc_verbs_ops;
#endif

#endif /* TNBC_XPORT_H */
