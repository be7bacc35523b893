/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The TCP transport's own definitions, shared by its files only
 * (xport/tcp/): its tuning constants, its objects (connection, endpoint,
 * peer, domain) and the calls between its files.  The stream's format
 * is tnbc_tcp_proto.h's; tnbc_tcp_xport.c has the design and the lock
 * order.  Its files, each calling only those below it: tnbc_tcp_xport.c
 * (the ops table, domains, endpoints, the waker); tnbc_tcp_recv.c;
 * tnbc_tcp_send.c; tnbc_tcp_cm.c (connections made and accepted);
 * tnbc_tcp_hs.c (handshakes); tnbc_tcp_out.c (a peer's out buffer);
 * tnbc_tcp_conn.c (peers and connections as state); tnbc_tcp_addr.c.
 */
#ifndef TNBC_TCP_H
#define TNBC_TCP_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tnbc_base.h"
#include "tnbc_xport.h"
#include "../tnbc_net.h"
#include "tnbc_tcp_proto.h"

/* largest packet sent and taken (tnbc_tcp_rx_max): a 1 MiB payload and
 * its frame */
#define TNBC_TCP_PACKET_MAX ((1u << 20) + 4096)
/* a packet's pieces: record, frame, 64 of payload, padding */
#define TNBC_TCP_SEND_IOV (2 + 64 + 1)
/* bytes a connection's sender may leave unwritten */
#define TNBC_TCP_OUT_MAX (4u << 20)
/* read from a socket at once while no large packet is being read:
 * more would copy a large payload twice */
#define TNBC_TCP_RBULK 16384
/* a placed packet this large is read from the socket into its place */
#define TNBC_TCP_DIRECT_MIN 2048
/* how long a payload's reader asks for its rest before it sleeps */
#define TNBC_TCP_READ_SPIN_NS 50000u
/* how long it then waits for more before it takes the packet back from
 * the protocol (tnbc_tcp_park), and for how many placed packets after
 * that the connection's are read whole into its buffer first */
#define TNBC_TCP_STALL_MS     5
#define TNBC_TCP_SLOW_PACKETS 16
/* the largest segment the kernel hands a device at once (GSO) on
 * common links; one write fills at most one (tnbc_tcp_write_max) */
#define TNBC_TCP_GSO_BYTES 65536u
/* how often the waker looks for strangers past their deadline and
 * handshakes that never ended */
#define TNBC_TCP_SWEEP_NS 200000000ull
/* how long a listener stops accepting once out of descriptors */
#define TNBC_TCP_ACCEPT_PAUSE_NS 100000000ull
/* how long the later-named of two endpoints waits for the other's
 * connection before it dials its own (tnbc_tcp_dial_wait) */
#define TNBC_TCP_DIAL_WAIT_NS 10000000u
/* a connection held back (a hold notice) is left unread once what it
 * holds passes this many shares (tnbc_tcp_hold_count) */
#define TNBC_TCP_UNREAD_SHARES 8
/* peers of a domain that may be waited for at once: fewer than a
 * transmit queue's pass skips past (TNBC_TX_BLOCKED_MAX), so that sends
 * held for them never hold up others */
#define TNBC_TCP_DIAL_WAITS 4
/* sources seen introduced on one-way connections before we had a peer
 * for them, remembered so that answering one needs no dial wait: the
 * latest this many (a flood of names only pushes out older ones) */
#define TNBC_TCP_ONE_WAY_NAMES 32

enum tnbc_tcp_kind {
	TNBC_TCP_K_LISTEN = 1, /* an endpoint's listening socket */
	TNBC_TCP_K_DATA, /* an endpoint's connections (its pfd) */
	TNBC_TCP_K_PEER, /* a connection to a peer */
};

/* What an epoll event names: the first member of each object. */
struct tnbc_tcp_ev {
	enum tnbc_tcp_kind kind;
};

struct tnbc_tcp_held {
	struct tnbc_tcp_held *next;
	struct tnbc_name from; /* the identity of its connection */
	uint64_t conn; /* its connection's serial: whose room it takes */
	uint32_t len;
	_Alignas(8) uint8_t data[];
};

/* An accepted connection: packets for one endpoint from one domain. */
struct tnbc_tcp_conn {
	struct tnbc_tcp_ev ev;
	struct tnbc_tcp_conn *next; /* xep->conns, or the grave */
	struct tnbc_xep *xep;
	int fd;
	bool hello; /* a valid hello came */
	/* the handshake is over: packets may come (a stranger until then,
	 * counted in xep->strangers, and held to TNBC_TCP_SMALL bytes) */
	bool proven;
	bool challenged; /* a challenge went: the proof must come next */
	bool lookup; /* the hello asked who listens: answered once proven */
	bool stranger; /* counted in xep->strangers */
	bool shut; /* the waker shut it (deadline, cap): reads see the end */
	/* packets of its held by the consumer (kept, or left for later),
	 * and whether that is its share of the room, which leaves it
	 * unread (out of the endpoint's epoll set) until they are taken:
	 * back pressure on this connection only */
	size_t held_bytes;
	bool paused;
	/* past its share: its process is asked to hold its messages back
	 * (a hold notice), and what it was last told; once told, it is
	 * left unread only past unread_cap bytes held (what may still have
	 * been on its way) */
	bool held, told;
	size_t unread_cap;
	/* placed packets still to read whole before one is placed from the
	 * socket again (its sender stalled mid-payload) */
	unsigned slow;
	/* bytes of a record taken whole that are still to come and be
	 * dropped (what the protocol left of a payload read into place,
	 * and the padding), read as they come */
	size_t skip_left;
	/* since when a record has waited for its rest (0: none does): the
	 * waker ends the connection past FI_TNBC_TCP_TIMEOUT_MS */
	_Atomic uint64_t partial_ns;
	uint64_t serial; /* tnbc_tcp_held.conn */
	bool more; /* stopped before the socket was drained */
	bool drained; /* the last read took less than it asked for */
	uint64_t born_ns;
	uint8_t *buf;
	size_t cap, off, have; /* bytes [off, have) not taken yet */
	struct tnbc_tcp_addr from; /* the connecting side's address */
	bool local; /* from this host: its address is one of ours */
	/* the process every packet must come from: the hello's "from"
	 * (accepted), or the peer (dialed) */
	struct tnbc_name id;
	struct tnbc_tcp_addr id_addr; /* where the hello says it listens */
	uint8_t expect[TNBC_NET_MAC_LEN]; /* the proof a challenge wants */
	/* accepted: the endpoint its hello named as reading answers
	 * (kind 0: none); dialed: our end of a peer's two-way connection */
	struct tnbc_name back;
	bool dialed;
};

struct tnbc_xep {
	struct tnbc_tcp_ev ev; /* the listening socket's */
	struct tnbc_tcp_ev dev; /* pfd's, armed by a sleep until it fires */
	struct tnbc_xep *next; /* xdom->eps, or the grave */
	struct tnbc_xdom *xdom;
	struct tnbc_name name;
	struct tnbc_tcp_addr addr; /* where it listens, as peers reach it */
	/* its whole address (ep_named): what lookups are answered with */
	struct tnbc_addr whole;
	atomic_bool named;
	int lfd;
	/* its connections, level-triggered: a poll asks it directly
	 * whether one has data (a thread wake-up per message would cost
	 * more than the message), and the waker watches it, one event at a
	 * time: a sleep of the engine arms it (sleep_begin), and it stays
	 * armed until it fires */
	int pfd;
	/* pfd's one-shot is armed in the waker's set: cleared by the waker
	 * when it fires, so a sleep arms it again only then (an epoll_ctl
	 * at every sleep cost the engine a system call each) */
	atomic_bool armed;
	atomic_uint nconns;
	atomic_uint strangers; /* connections not proven yet */
	atomic_uint npaused; /* connections left unread: their share held */
	bool hold_dirty; /* consumer's: a connection's hold to be told */
	atomic_bool accept_paused; /* out of descriptors: lfd disarmed */
	pthread_mutex_t lock; /* conns, closing */
	struct tnbc_tcp_conn *conns;
	bool closing;
	/* consumer's */
	struct tnbc_tcp_held *replay; /* offered first: left, then kept */
	struct tnbc_tcp_held *kept, **kept_tail;
	uint64_t serials; /* connections numbered, for tnbc_tcp_held.conn */
	bool buffered; /* some connection stopped before draining */
	bool polling; /* packets are being offered */
	uint64_t mark;
	/* the consumer's, read by idle from any thread: events it has
	 * looked at, and whether it has packets in hand (buffered or
	 * replay) */
	_Atomic uint64_t seen;
	atomic_bool in_hand;
	/* idle found a connection with data: poll need not ask again */
	atomic_bool ready_hint;
	/* bumped by the waker for every event on its sockets */
	_Atomic uint64_t events;
};

struct tnbc_xpeer {
	struct tnbc_xpeer_base base; /* first: the core reads it */
	struct tnbc_tcp_ev ev;
	struct tnbc_xpeer *next; /* xdom->peers */
	struct tnbc_xdom *xdom;
	struct tnbc_name name;
	struct tnbc_tcp_addr addr;
	pthread_mutex_t lock;
	int fd;
	enum {
		TNBC_TCP_IDLE,
		TNBC_TCP_CONNECTING,
		/* connected, keyed: the hello is out, nothing after it until
		 * the listener's challenge proved it and our proof, written
		 * at hs_at of out, follows */
		TNBC_TCP_PROVING,
		TNBC_TCP_UP,
		TNBC_TCP_DEAD
	} state;
	atomic_bool dead;
	/* the peer holds our messages back (a hold notice) */
	atomic_bool held;
	/* the connection is two-way: its other reader is an endpoint's
	 * connection (ours, dialed; or the peer's, adopted), so the waker
	 * leaves its incoming bytes alone */
	bool two_way;
	/* bytes one write may take (tnbc_tcp_write_max); 0: not asked */
	size_t write_max;
	/* a send was refused (-FI_EAGAIN) since the waker last looked: the
	 * engine may have to retry it once the socket takes more */
	bool refused;
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	/* the handshake (PROVING): our hello, the proof's place in out,
	 * the challenge as it comes, the deadline, and the connection that
	 * reads answers, listed once the listener proved itself */
	struct tnbc_tcp_hello hs_hello;
	size_t hs_at;
	uint8_t hs_buf[sizeof(struct tnbc_tcp_rec) +
		       sizeof(struct tnbc_net_chal)];
	size_t hs_have;
	uint64_t hs_deadline;
	struct tnbc_tcp_conn *hs_conn;
	struct tnbc_net_intros intros;
	/* when a send first waited for the peer to dial (0: no wait on),
	 * the domain's slot that wait holds, and whether it was asked for
	 * (tnbc_tcp_dial_wait) */
	uint64_t dial_wait_ns;
	unsigned dial_slot;
	bool dial_waited;
	/* the peer dialed us one way (its domain has several endpoints):
	 * no connection of its can be adopted, and a wait ends at once */
	atomic_bool dialed_one_way;
};

struct tnbc_xdom {
	/* first: tnbc_net_app_mark and its kin read it (app_mark) */
	struct tnbc_net_app app;
	struct tnbc_xkick kick;
	const struct tnbc_xport_ops *ops; /* its peers' (tnbc_tcp_ops) */
	const atomic_bool *host_busy; /* tnbc_xdom_attr */
	/* the domain's auth_key: what its connections present, and what
	 * its endpoints ask of connections made to them */
	uint8_t key[TNBC_AUTH_KEY_MAX];
	uint16_t key_len;
	int epfd, stopfd;
	pthread_t waker;
	bool waker_up;
	pthread_mutex_t lock; /* eps, peers, grave */
	struct tnbc_xep *eps;
	struct tnbc_xpeer *peers;
	struct tnbc_net_book book;
	struct tnbc_tcp_conn *grave_conns;
	struct tnbc_xep *grave_eps;
	/* Waits for peers to dial (tnbc_tcp_dial_wait): each slot holds
	 * the end of one (0: free), a slot past its end is free whatever
	 * became of its wait, and dial_until, the latest end (0: none), is
	 * what polls look at: until then they accept connections
	 * themselves.  Slots under lock. */
	uint64_t dial_slots[TNBC_TCP_DIAL_WAITS];
	_Atomic uint64_t dial_until;
	/* TNBC_TCP_ONE_WAY_NAMES, a ring; under lock */
	struct tnbc_name one_way[TNBC_TCP_ONE_WAY_NAMES];
	unsigned one_way_next;
	/* the waker's: when it last swept, and when paused listeners are
	 * armed again (0: none paused) */
	uint64_t swept_ns;
	_Atomic uint64_t accept_resume_ns;
	/* FI_TNBC_TCP_HELLO_MS, _TIMEOUT_MS (in ns) and _STRANGERS_MAX as
	 * the domain opened: the waker's to read */
	uint64_t hello_ns, timeout_ns;
	/* the most a stream may have on its way in the kernels (this
	 * host's largest send and receive buffers), read at open */
	size_t kernel_bufs;
	size_t strangers_max;
	_Atomic uint64_t bad_pkts, refused, strangers, held;
	_Atomic uint64_t placed_bytes; /* read from a socket into place */
	_Atomic uint64_t writes; /* to a socket, bytes taken */
};

_Static_assert(offsetof(struct tnbc_xdom, app) == 0,
	       "tnbc_net_app_mark reads the domain's start");

/* tnbc_tcp_conn.c */
/* The largest packet shm's peers take: fi_info's limits (ops packet_limit). */
size_t tnbc_tcp_packet_limit(void);
/* The largest packet a peer sends and takes. */
size_t tnbc_tcp_rx_max(void);
/* The ops table's max_packet: tnbc_tcp_rx_max for every peer. */
size_t tnbc_tcp_max_packet(struct tnbc_xpeer *peer);
/* The peer named name, if the domain has one; xdom->lock held. */
struct tnbc_xpeer *tnbc_tcp_peer_find(struct tnbc_xdom *xdom,
				      const struct tnbc_name *name);
/* The domain's peer for name, made on first use (ops peer_get). */
int tnbc_tcp_peer_get(struct tnbc_xdom *xdom, const struct tnbc_name *name,
		      const uint8_t *xaddr, struct tnbc_xpeer **out);
/* Ends p's connection for good, saying why; peer->lock held. */
void tnbc_tcp_peer_dead(struct tnbc_xpeer *p, const char *why);
/* Notes that src reached us on a one-way connection. */
void tnbc_tcp_one_way(struct tnbc_xdom *xdom, const struct tnbc_name *src);
/* Lists c among xep's connections; false when xep closes. */
bool tnbc_tcp_conn_add(struct tnbc_xep *xep, struct tnbc_tcp_conn *c);
/* Shuts c from outside its consumer; xep->lock held. */
void tnbc_tcp_conn_shut(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			const char *why);

/* tnbc_tcp_addr.c */
/* A transport address as a socket address; its length. */
socklen_t tnbc_tcp_sockaddr(const struct tnbc_tcp_addr *a,
			    struct sockaddr_storage *ss);
/* A socket address as a transport address. */
int tnbc_tcp_from_sockaddr(const struct sockaddr *sa, struct tnbc_tcp_addr *a);
/* Whether a is the any address. */
bool tnbc_tcp_any(const struct tnbc_tcp_addr *a);
/* The address endpoints listening on any give peers. */
void tnbc_tcp_host_addr(struct tnbc_tcp_addr *a);
/* The ops table's address calls: parse, print, scan, to a socket's. */
int tnbc_tcp_addr_parse(const char *node, const char *service, bool source,
			uint8_t *xaddr);
int tnbc_tcp_addr_str(const uint8_t *xaddr, char *buf, size_t len);
int tnbc_tcp_addr_scan(const char *text, uint8_t *xaddr);
int tnbc_tcp_addr_sock(const uint8_t *xaddr, int family,
		       struct sockaddr_storage *ss);
/* Whether a is a loopback address. */
bool tnbc_tcp_loopback(const struct tnbc_tcp_addr *a);
/* Whether two addresses are of one host. */
bool tnbc_tcp_same_host(const struct tnbc_tcp_addr *a,
			const struct tnbc_tcp_addr *b);

/* tnbc_tcp_cm.c */
/* The waker's view of an event on p's connection; whether to kick. */
bool tnbc_tcp_peer_event(struct tnbc_xpeer *p, uint32_t events);
/* Accepts what waits on xep's listening socket. */
void tnbc_tcp_accept(struct tnbc_xep *xep);
/* Whether a peer's connection may be awaited (a dial wait is on). */
bool tnbc_tcp_awaited(struct tnbc_xdom *xdom);
/* A connection to p, made or being made; peer->lock held. */
int tnbc_tcp_up(struct tnbc_xpeer *p, const struct tnbc_name *src);

/* tnbc_tcp_hs.c */
/* The connecting side's handshake: reads and checks the challenge. */
void tnbc_tcp_hs_read(struct tnbc_xpeer *p);
/* A record that is not a packet; 1 when the connection closes. */
int tnbc_tcp_control(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
		     const struct tnbc_tcp_rec *rec, const uint8_t *body);
/* The ops table's resolve: asks who listens at sa. */
int tnbc_tcp_resolve(struct tnbc_xdom *xdom, const struct sockaddr *sa,
		     struct tnbc_addr *out);

/* tnbc_tcp_out.c: peer->lock held */
/* How much one write to p's socket carries. */
size_t tnbc_tcp_write_max(struct tnbc_xpeer *p);
/* Writes what the sender left. */
void tnbc_tcp_flush(struct tnbc_xpeer *p);
/* Appends our own bytes to what waits to be written. */
int tnbc_tcp_out_put(struct tnbc_xpeer *p, const void *data, size_t n);
/* Makes room for n more bytes in p's out buffer (-FI_EAGAIN). */
int tnbc_tcp_out_room(struct tnbc_xpeer *p, size_t n);

/* tnbc_tcp_send.c */
/* Tells a connection's process whether "by" holds it back. */
int tnbc_tcp_notice(struct tnbc_xdom *xdom, const struct tnbc_name *who,
		    const struct tnbc_name *by, bool on);
/* The ops table's send. */
int tnbc_tcp_send(struct tnbc_xpeer *p, const struct tnbc_xpkt *pkt);

/* tnbc_tcp_recv.c */
/* The ops table's receive side: poll, rewind, and what the engine asks
 * before it sleeps. */
int tnbc_tcp_poll(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg, int budget);
void tnbc_tcp_rewind(struct tnbc_xep *xep);
bool tnbc_tcp_pending(struct tnbc_xep *xep);
void tnbc_tcp_look_mark(struct tnbc_xep *xep);
bool tnbc_tcp_unlooked(struct tnbc_xep *xep);
bool tnbc_tcp_stalled(struct tnbc_xep *xep);
bool tnbc_tcp_idle(struct tnbc_xep *xep);
bool tnbc_tcp_quiet(struct tnbc_xep *xep);
ssize_t tnbc_tcp_pull(struct tnbc_xep *xep, struct tnbc_xpeer *peer,
		      const struct iovec *local, size_t local_count,
		      const struct tnbc_xrmem *remote, size_t remote_count,
		      struct tnbc_xread *rd);

#endif /* TNBC_TCP_H */
