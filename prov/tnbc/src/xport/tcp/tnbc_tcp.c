/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The TCP transport: endpoints on other hosts (or any host), over
 * ordinary sockets.
 *
 * Every endpoint listens on a port of its own; a domain connects to a
 * peer endpoint the first time it sends to it, and that one connection
 * carries every packet of the domain's endpoints to that peer (their
 * answers come back on the peer domain's connection to them).  The
 * stream is a sequence of records (tnbc_tcp_proto.h): a handshake that
 * names the endpoint the connection is for and binds the connection to
 * the process that dialed (proven with the domain's auth_key where it
 * has one), introductions that tell the receiver where another endpoint
 * of that process listens (so that it can answer a name that came in a
 * packet), and packets, each of which must come from that process.  A
 * connection may instead open with a question, who the endpoint
 * listening there is (resolve, for FI_SOCKADDR_IN), which the endpoint
 * answers with its whole address and closes.  Until its handshake is
 * over a connection is a stranger: it may send only the handshake's
 * records, within FI_TNBC_TCP_HELLO_MS, and an endpoint keeps at most
 * FI_TNBC_TCP_STRANGERS_MAX of them (fi_tnbc(7), SECURITY).
 *
 * Receiving is in two phases: a packet whose payload the protocol
 * places itself (TNBC_XPKT_PLACED: eager messages, rendezvous data) is
 * offered once its frame is in memory and the rest has begun to arrive,
 * and the payload is read from the socket straight into its destination
 * as it comes; any other packet is offered whole from the connection's
 * buffer.
 *
 * Sending writes the whole record at once when the socket takes it;
 * what it does not take waits in the connection's buffer (at most
 * TNBC_TCP_OUT_MAX bytes, then the sender sees -FI_EAGAIN: back
 * pressure), and is written when the socket can take more.
 *
 * One thread per domain (the waker) sleeps in epoll_wait on every
 * socket of the domain, edge-triggered: it accepts connections, writes
 * what senders left, notices peers that died, and, while the engine
 * sleeps, kicks it when data arrived; it never reads a packet.  The
 * engine and application threads read the sockets (poll).  (Data waking
 * the sleeping engine itself, its sockets in an epoll set the engine
 * sleeps in, was measured slower: fi_tnbc(7), Engine sleep policy.)
 *
 * A connection carries packets both ways when it can: the connecting
 * domain's only endpoint names itself in the hello and reads the
 * connection too, and the endpoint it reached sends that endpoint its
 * packets on it (tnbc_tcp_adopt) instead of opening a second one.  One
 * way, every small packet cost its receiver a bare acknowledgement sent
 * inside its read (the kernel's, for a stream that never answers),
 * which on a veth link was a third of a small message's latency;
 * answers now carry it.
 *
 * Locks: peer->lock > xdom->lock > xep->lock.  No lock is held
 * across a call into the core.  Connections and endpoints are freed by
 * the waker only (a closed one waits in xdom->grave until the waker is
 * past the events that may name it), and peers at dom_close.
 */
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
#include "../tnbc_hmac.h"
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
	uint8_t expect[TNBC_TCP_MAC_LEN]; /* the proof a challenge wants */
	/* accepted: the endpoint its hello named as reading answers
	 * (kind 0: none); dialed: our end of a peer's two-way connection */
	struct tnbc_name back;
	bool dialed;
};

struct tnbc_xep {
	struct tnbc_tcp_ev ev; /* the listening socket's */
	struct tnbc_tcp_ev dev; /* pfd's, armed while the engine sleeps */
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
	 * time, only while the engine sleeps (sleep_begin arms it) */
	int pfd;
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
		       sizeof(struct tnbc_tcp_chal)];
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

static void tnbc_tcp_dial_wait_end(struct tnbc_xpeer *p);
static bool tnbc_tcp_same_host(const struct tnbc_tcp_addr *a,
			       const struct tnbc_tcp_addr *b);
static bool tnbc_tcp_loopback(const struct tnbc_tcp_addr *a);
static void tnbc_tcp_mac(const struct tnbc_xdom *xdom, const char *label,
			 const struct tnbc_tcp_hello *h, const uint8_t *nonce_l,
			 const uint8_t *mac_l, uint8_t out[TNBC_TCP_MAC_LEN]);

struct tnbc_xdom {
	struct tnbc_xkick kick;
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
	/* whether an application thread polls (app_mark) */
	struct tnbc_net_app app;
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

/* ------------------------------------------------------------------ */
/* Addresses                                                            */

static socklen_t tnbc_tcp_sockaddr(const struct tnbc_tcp_addr *a,
				   struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == 6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = a->port;
		memcpy(&s6->sin6_addr, a->ip, 16);
		return sizeof(*s6);
	}
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

	s4->sin_family = AF_INET;
	s4->sin_port = a->port;
	memcpy(&s4->sin_addr, a->ip, 4);
	return sizeof(*s4);
}

static int tnbc_tcp_from_sockaddr(const struct sockaddr *sa,
				  struct tnbc_tcp_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)sa;

		a->family = 4;
		a->port = s4->sin_port;
		memcpy(a->ip, &s4->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;

		a->family = 6;
		a->port = s6->sin6_port;
		memcpy(a->ip, &s6->sin6_addr, 16);
		return 0;
	}
	return -FI_EINVAL;
}

static bool tnbc_tcp_any(const struct tnbc_tcp_addr *a)
{
	static const uint8_t zero[16];

	return !memcmp(a->ip, zero, a->family == 6 ? 16 : 4);
}

/* The address this host's endpoints give peers when they listen on any:
 * FI_TNBC_TCP_IFACE (an address, or an interface's name), else the
 * first IPv4 address of an interface that is up and not a loopback,
 * else the loopback. */
static void tnbc_tcp_host_addr(struct tnbc_tcp_addr *a)
{
	const char *want = tnbc_env.tcp_iface;
	struct ifaddrs *ifs = NULL, *it;
	struct in_addr lo = {.s_addr = htonl(INADDR_LOOPBACK)};

	memset(a, 0, sizeof(*a));
	if (want && *want) {
		if (inet_pton(AF_INET, want, a->ip) == 1) {
			a->family = 4;
			return;
		}
		if (inet_pton(AF_INET6, want, a->ip) == 1) {
			a->family = 6;
			return;
		}
	}
	if (!getifaddrs(&ifs)) {
		for (it = ifs; it; it = it->ifa_next) {
			if (!it->ifa_addr || !(it->ifa_flags & IFF_UP) ||
			    it->ifa_addr->sa_family != AF_INET)
				continue;
			if (want && *want ? strcmp(it->ifa_name, want) != 0
					  : (it->ifa_flags & IFF_LOOPBACK) != 0)
				continue;
			tnbc_tcp_from_sockaddr(it->ifa_addr, a);
			a->port = 0;
			break;
		}
		freeifaddrs(ifs);
	}
	if (!a->family) {
		if (want && *want)
			FI_WARN(&tnbc_prov, FI_LOG_CORE,
				"FI_TNBC_TCP_IFACE=%s: no such address or "
				"interface up; using the loopback\n",
				want);
		a->family = 4;
		memcpy(a->ip, &lo, 4);
	}
}

static int tnbc_tcp_addr_parse(const char *node, const char *service,
			       bool source, uint8_t *xaddr)
{
	struct tnbc_tcp_addr *a = (struct tnbc_tcp_addr *)(void *)xaddr;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	long port = 0;
	char *end;
	int ret;

	memset(a, 0, sizeof(*a));
	if (service) {
		port = strtol(service, &end, 10);
		if (end == service || *end || port < 0 || port > 65535)
			return -FI_ENODATA;
	}
	if (!node) {
		/* a source listens on any address; a destination with no
		 * node is a service of this host */
		struct in_addr lo = {.s_addr = htonl(INADDR_LOOPBACK)};

		a->family = 4;
		if (!source)
			memcpy(a->ip, &lo, 4);
		a->port = htons((uint16_t)port);
		return !source && !port ? -FI_ENODATA : 0;
	}
	if (source)
		hints.ai_flags |= AI_PASSIVE;
	ret = getaddrinfo(node, NULL, &hints, &res);
	if (ret || !res)
		return -FI_ENODATA;
	ret = tnbc_tcp_from_sockaddr(res->ai_addr, a);
	freeaddrinfo(res);
	if (ret)
		return -FI_ENODATA;
	a->port = htons((uint16_t)port);
	/* a destination needs a port to reach */
	return !source && !port ? -FI_ENODATA : 0;
}

static int tnbc_tcp_addr_str(const uint8_t *xaddr, char *buf, size_t len)
{
	const struct tnbc_tcp_addr *a = (const void *)xaddr;
	char ip[INET6_ADDRSTRLEN] = "?";

	if (a->family == 4 || a->family == 6)
		inet_ntop(a->family == 6 ? AF_INET6 : AF_INET, a->ip, ip,
			  sizeof(ip));
	return snprintf(buf, len, a->family == 6 ? "[%s]:%u" : "%s:%u", ip,
			(unsigned)ntohs(a->port));
}

static int tnbc_tcp_addr_scan(const char *text, uint8_t *xaddr)
{
	struct tnbc_tcp_addr *a = (struct tnbc_tcp_addr *)(void *)xaddr;
	int family, ret;

	memset(a, 0, sizeof(*a));
	ret = tnbc_ip_scan(text, true, &family, a->ip, &a->port);
	a->family = family == AF_INET6 ? 6 : 4;
	return ret;
}

static int tnbc_tcp_addr_sock(const uint8_t *xaddr, int family,
			      struct sockaddr_storage *ss)
{
	const struct tnbc_tcp_addr *a = (const void *)xaddr;

	if (a->family != (family == AF_INET6 ? 6 : 4))
		return -FI_ENODATA;
	return (int)tnbc_tcp_sockaddr(a, ss);
}

/* ------------------------------------------------------------------ */
/* Domain and waker                                                     */

static void tnbc_tcp_peer_dead(struct tnbc_xpeer *p, const char *why)
{
	if (p->state == TNBC_TCP_DEAD)
		return;
	FI_INFO(&tnbc_prov, FI_LOG_EP_DATA, "tcp: peer %u/%u unreachable: %s\n",
		p->name.pid, p->name.uid, why);
	p->state = TNBC_TCP_DEAD;
	atomic_store(&p->dead, true);
	p->out_len = p->out_off = 0;
	if (p->hs_conn) {
		/* never listened to: nobody else knows it */
		close(p->hs_conn->fd);
		free(p->hs_conn);
		p->hs_conn = NULL;
	}
	if (p->fd >= 0) {
		epoll_ctl(p->xdom->epfd, EPOLL_CTL_DEL, p->fd, NULL);
		/* the endpoint reading the other end of a two-way one hears
		 * of it */
		if (p->two_way)
			shutdown(p->fd, SHUT_RDWR);
		close(p->fd);
		p->fd = -1;
	}
}

/* How much one write to a connection may carry: the whole MSS-sized
 * segments of one GSO segment.  A larger write copies segment after
 * segment while the socket is owned, and the acknowledgements that
 * come meanwhile wait in its backlog (the kernel looks at it every 16
 * segments, 1 MiB here) with the window closed, so the data goes out
 * in bursts as the write ends; a write that ends a segment early sends
 * a small one after it.  Between two namespaces, 1 MiB messages moved
 * 0.90 of tcp;ofi_rxm's bytes per second written whole, 1.05 in
 * writes of 64 KiB and 1.65 in writes of 65160 B, 45 segments of
 * 1448 (fi_tnbc(7)).  peer->lock held, p up. */
static size_t tnbc_tcp_write_max(struct tnbc_xpeer *p)
{
	int mss = 0;
	socklen_t l = sizeof(mss);

	if (p->write_max)
		return p->write_max;
	if (getsockopt(p->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &l) || mss <= 0 ||
	    (unsigned)mss > TNBC_TCP_GSO_BYTES / 2)
		mss = 1448; /* unknown: Ethernet's */
	/* the kernel keeps room for headers below the GSO size */
	p->write_max =
		(TNBC_TCP_GSO_BYTES - 512u) / (unsigned)mss * (unsigned)mss;
	return p->write_max;
}

/* Writes iov to p's socket a tnbc_tcp_write_max at a time, until it is
 * written or the socket is full; the bytes written, or a negative errno
 * when none were.  A packet of up to two goes in one write: split, a
 * 64 KiB one paid a second system call for its last 2 KiB, and moved
 * 0.92 of the bytes per second (medians of 10 paired rounds).  peer->lock
 * held, p up. */
static ssize_t tnbc_tcp_writev(struct tnbc_xpeer *p, const struct iovec *iov,
			       size_t niov, size_t total)
{
	size_t max = tnbc_tcp_write_max(p), done = 0;

	if (total <= 2 * max)
		max = total;

	while (done < total) {
		struct iovec part[TNBC_TCP_SEND_IOV];
		size_t want = total - done < max ? total - done : max;
		struct msghdr mh = {.msg_iov = part};
		ssize_t n;

		mh.msg_iovlen = tnbc_iov_slice(iov, niov, done, want, part,
					       TNBC_TCP_SEND_IOV);
		n = sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return done ? (ssize_t)done : -errno;
		atomic_fetch_add_explicit(&p->xdom->writes, 1,
					  memory_order_relaxed);
		done += (size_t)n;
		if ((size_t)n < want)
			break; /* full */
	}
	return (ssize_t)done;
}

/* Writes what the sender left: while the handshake is on, no more than
 * the hello.  peer->lock held. */
static void tnbc_tcp_flush(struct tnbc_xpeer *p)
{
	for (;;) {
		size_t end =
			p->state == TNBC_TCP_PROVING ? p->hs_at : p->out_len;
		size_t max, want;
		ssize_t n;

		if ((p->state != TNBC_TCP_UP && p->state != TNBC_TCP_PROVING) ||
		    p->out_off >= end)
			break;
		max = tnbc_tcp_write_max(p);
		want = end - p->out_off < max ? end - p->out_off : max;
		n = send(p->fd, p->out + p->out_off, want, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			tnbc_tcp_peer_dead(p, strerror(errno));
			return;
		}
		atomic_fetch_add_explicit(&p->xdom->writes, 1,
					  memory_order_relaxed);
		p->out_off += (size_t)n;
	}
	if (p->out_off == p->out_len)
		p->out_off = p->out_len = 0;
}

static bool tnbc_tcp_conn_add(struct tnbc_xep *xep, struct tnbc_tcp_conn *c);

/* A connection just made is up: at once with no key, after the
 * handshake with one.  peer->lock held. */
static void tnbc_tcp_came_up(struct tnbc_xpeer *p)
{
	if (!p->xdom->key_len) {
		p->state = TNBC_TCP_UP;
		return;
	}
	p->state = TNBC_TCP_PROVING;
	p->hs_deadline = tnbc_now_ns() + p->xdom->timeout_ns;
}

/* Reads the listener's challenge as it comes and, when it proves the
 * key, writes our proof where its place waits and lets what follows
 * go: the connection is up.  Only the challenge is read: the listener
 * sends nothing more before our proof.  peer->lock held, p proving. */
static void tnbc_tcp_hs_read(struct tnbc_xpeer *p)
{
	struct tnbc_xdom *xdom = p->xdom;
	struct tnbc_tcp_rec rec;
	struct tnbc_tcp_chal chal;
	struct tnbc_tcp_proof proof;
	uint8_t want[TNBC_TCP_MAC_LEN];

	while (p->hs_have < sizeof(p->hs_buf)) {
		ssize_t n = recv(p->fd, p->hs_buf + p->hs_have,
				 sizeof(p->hs_buf) - p->hs_have, MSG_DONTWAIT);

		if (n > 0) {
			p->hs_have += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		tnbc_tcp_peer_dead(p, n ? strerror(errno)
					: "it refused the handshake (another "
					  "auth_key?)");
		return;
	}
	memcpy(&rec, p->hs_buf, sizeof(rec));
	memcpy(&chal, p->hs_buf + sizeof(rec), sizeof(chal));
	tnbc_tcp_mac(xdom, TNBC_TCP_MAC_L, &p->hs_hello, chal.nonce, NULL,
		     want);
	if (rec.type != TNBC_TCP_CHAL || rec.len != sizeof(chal) ||
	    !tnbc_mac_equal(want, chal.mac, sizeof(want))) {
		atomic_fetch_add(&xdom->refused, 1);
		tnbc_tcp_peer_dead(p, "its challenge does not prove the "
				      "auth_key");
		return;
	}
	tnbc_tcp_mac(xdom, TNBC_TCP_MAC_C, &p->hs_hello, chal.nonce, chal.mac,
		     proof.mac);
	memcpy(p->out + p->hs_at + sizeof(struct tnbc_tcp_rec), &proof,
	       sizeof(proof));
	p->state = TNBC_TCP_UP;
	if (p->hs_conn) {
		struct tnbc_tcp_conn *c = p->hs_conn;
		struct epoll_event ev = {.events = EPOLLOUT | EPOLLRDHUP |
						   EPOLLET,
					 .data.ptr = &p->ev};

		/* what comes in now is the dialed connection's to read */
		p->hs_conn = NULL;
		if (!tnbc_tcp_conn_add(c->xep, c)) {
			close(c->fd);
			free(c);
		}
		epoll_ctl(xdom->epfd, EPOLL_CTL_MOD, p->fd, &ev);
	}
}

/* The waker's view of an outgoing connection's event; whether the
 * engine is to look: the connection came up or died (what waits on it
 * moves or fails), or a send it refused may go now.  Room the socket
 * made for bytes already taken is the waker's to fill alone: nothing
 * else waits for it, and the engine was woken for each such event. */
static bool tnbc_tcp_peer_event(struct tnbc_xpeer *p, uint32_t events)
{
	bool kick;
	int was;

	pthread_mutex_lock(&p->lock);
	was = p->state;
	if (p->state == TNBC_TCP_CONNECTING &&
	    (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err)
			tnbc_tcp_peer_dead(p, strerror(err ? err : errno));
		else
			tnbc_tcp_came_up(p);
	}
	if (p->state == TNBC_TCP_PROVING) {
		/* the hello goes first */
		tnbc_tcp_flush(p);
		if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
			tnbc_tcp_hs_read(p);
	}
	if (p->state == TNBC_TCP_UP && p->two_way && (events & EPOLLRDHUP))
		tnbc_tcp_peer_dead(p, "it closed the connection");
	if (p->state == TNBC_TCP_UP && !p->two_way && (events & EPOLLIN)) {
		char c;
		ssize_t n = recv(p->fd, &c, 1, MSG_DONTWAIT);

		/* the other side never writes: it closed, or went away */
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			tnbc_tcp_peer_dead(p, n ? strerror(errno)
						: "it closed the connection");
		else if (n > 0)
			tnbc_tcp_peer_dead(p, "it wrote to a send-only "
					      "connection");
	}
	if (p->state == TNBC_TCP_UP && (events & (EPOLLERR | EPOLLHUP)))
		tnbc_tcp_peer_dead(p, "connection error");
	tnbc_tcp_flush(p);
	kick = (int)p->state != was || p->refused;
	p->refused = false;
	pthread_mutex_unlock(&p->lock);
	return kick;
}

/* Lists c among xep's connections, read by its polls; false when xep
 * closes.  xep->lock not held. */
static bool tnbc_tcp_conn_add(struct tnbc_xep *xep, struct tnbc_tcp_conn *c)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
				 .data.ptr = &c->ev};

	pthread_mutex_lock(&xep->lock);
	if (xep->closing) {
		pthread_mutex_unlock(&xep->lock);
		return false;
	}
	c->serial = ++xep->serials;
	c->next = xep->conns;
	xep->conns = c;
	pthread_mutex_unlock(&xep->lock);
	epoll_ctl(xep->pfd, EPOLL_CTL_ADD, c->fd, &ev);
	atomic_fetch_add(&xep->nconns, 1);
	/* bytes may have come before the registration */
	atomic_fetch_add(&xep->events, 1);
	return true;
}

static struct tnbc_tcp_conn *tnbc_tcp_conn_new(struct tnbc_xep *xep, int fd)
{
	struct tnbc_tcp_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ev.kind = TNBC_TCP_K_DATA; /* never an event of its own */
	c->xep = xep;
	c->fd = fd;
	c->born_ns = tnbc_now_ns();
	return c;
}

/* Ends a connection from outside its consumer: the socket is shut, and
 * the consumer's next read finds its end and drops it.  xep->lock held,
 * c listed. */
static void tnbc_tcp_conn_shut(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			       const char *why)
{
	if (c->shut)
		return;
	c->shut = true;
	shutdown(c->fd, SHUT_RDWR);
	if (c->stranger)
		atomic_fetch_add(&xep->xdom->strangers, 1);
	FI_INFO(&tnbc_prov, FI_LOG_EP_DATA, "tcp: connection closed: %s\n",
		why);
}

/* Past FI_TNBC_TCP_STRANGERS_MAX connections that have not proven who
 * they are, the oldest goes: strangers cost a bounded number of
 * sockets, and one that proves itself quickly still gets in. */
static void tnbc_tcp_strangers_trim(struct tnbc_xep *xep)
{
	struct tnbc_tcp_conn *oldest = NULL;
	unsigned live = 0;

	pthread_mutex_lock(&xep->lock);
	for (struct tnbc_tcp_conn *c = xep->conns; c; c = c->next)
		if (c->stranger && !c->shut) {
			live++;
			oldest = c; /* the list is newest first */
		}
	if (oldest && live > xep->xdom->strangers_max)
		tnbc_tcp_conn_shut(xep, oldest, "too many strangers");
	pthread_mutex_unlock(&xep->lock);
}

/* Out of descriptors: accept would fail again at once for as long, and
 * the listener, level-triggered, fire again; it is left unarmed for a
 * while (the waker arms it again), and the connections wait in its
 * backlog. */
static void tnbc_tcp_accept_pause(struct tnbc_xep *xep, int err)
{
	struct tnbc_xdom *xdom = xep->xdom;
	struct epoll_event ev = {.events = 0, .data.ptr = &xep->ev};

	if (atomic_exchange(&xep->accept_paused, true))
		return;
	epoll_ctl(xdom->epfd, EPOLL_CTL_MOD, xep->lfd, &ev);
	atomic_store(&xdom->accept_resume_ns,
		     tnbc_now_ns() + TNBC_TCP_ACCEPT_PAUSE_NS);
	FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
		"tcp: cannot accept a connection (%s): the listener waits "
		"%llu ms\n",
		strerror(err), TNBC_TCP_ACCEPT_PAUSE_NS / 1000000ull);
}

static void tnbc_tcp_accept(struct tnbc_xep *xep)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(xep->lfd, (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct tnbc_tcp_conn *c;
		int one = 1;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				tnbc_tcp_accept_pause(xep, errno);
			return; /* EAGAIN: none left */
		}
		c = tnbc_tcp_conn_new(xep, fd);
		if (!c) {
			close(fd);
			continue;
		}
		tnbc_tcp_from_sockaddr((struct sockaddr *)&ss, &c->from);
		sl = sizeof(ss);
		if (!getsockname(fd, (struct sockaddr *)&ss, &sl)) {
			struct tnbc_tcp_addr here;

			tnbc_tcp_from_sockaddr((struct sockaddr *)&ss, &here);
			c->local = tnbc_tcp_loopback(&c->from) ||
				   tnbc_tcp_same_host(&here, &c->from);
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->stranger = true;
		atomic_fetch_add(&xep->strangers, 1);
		if (!tnbc_tcp_conn_add(xep, c)) {
			atomic_fetch_sub(&xep->strangers, 1);
			close(fd);
			free(c);
			return;
		}
		if (atomic_load(&xep->strangers) > xep->xdom->strangers_max)
			tnbc_tcp_strangers_trim(xep);
	}
}

/* The waker's rounds: strangers past the hello deadline are shut, a
 * handshake the listener never answered fails, and listeners paused
 * for want of descriptors are armed again. */
static bool tnbc_tcp_sweep(struct tnbc_xdom *xdom)
{
	bool kick = false;
	uint64_t now = tnbc_now_ns(),
		 resume = atomic_load(&xdom->accept_resume_ns);
	uint64_t hello_ns = xdom->hello_ns, timeout_ns = xdom->timeout_ns;

	if (resume && now >= resume) {
		atomic_store(&xdom->accept_resume_ns, 0);
		pthread_mutex_lock(&xdom->lock);
		for (struct tnbc_xep *e = xdom->eps; e; e = e->next) {
			struct epoll_event ev = {.events = EPOLLIN,
						 .data.ptr = &e->ev};

			if (atomic_exchange(&e->accept_paused, false))
				epoll_ctl(xdom->epfd, EPOLL_CTL_MOD, e->lfd,
					  &ev);
		}
		pthread_mutex_unlock(&xdom->lock);
	}
	if (now - xdom->swept_ns < TNBC_TCP_SWEEP_NS)
		return false;
	xdom->swept_ns = now;
	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep *e = xdom->eps; e; e = e->next) {
		pthread_mutex_lock(&e->lock);
		for (struct tnbc_tcp_conn *c = e->conns; c; c = c->next) {
			uint64_t part = atomic_load_explicit(
				&c->partial_ns, memory_order_relaxed);

			if (c->stranger && now - c->born_ns > hello_ns)
				tnbc_tcp_conn_shut(e, c,
						   "no handshake in time");
			else if (part && now - part > timeout_ns)
				tnbc_tcp_conn_shut(e, c,
						   "a record stopped halfway");
		}
		pthread_mutex_unlock(&e->lock);
	}
	for (struct tnbc_xpeer *p = xdom->peers; p; p = p->next) {
		/* lock order: peer before xdom; a busy peer is looked at
		 * next round */
		if (pthread_mutex_trylock(&p->lock))
			continue;
		if (p->state == TNBC_TCP_PROVING && now > p->hs_deadline) {
			tnbc_tcp_peer_dead(p, "no answer to the handshake");
			kick = true; /* what waits on it fails */
		}
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_unlock(&xdom->lock);
	return kick;
}

/* Frees what consumers closed: the waker is past every event that
 * could name it. */
static void tnbc_tcp_bury(struct tnbc_xdom *xdom)
{
	struct tnbc_tcp_conn *c;
	struct tnbc_xep *e;

	pthread_mutex_lock(&xdom->lock);
	c = xdom->grave_conns;
	e = xdom->grave_eps;
	xdom->grave_conns = NULL;
	xdom->grave_eps = NULL;
	pthread_mutex_unlock(&xdom->lock);
	while (c) {
		struct tnbc_tcp_conn *n = c->next;

		free(c->buf);
		free(c);
		c = n;
	}
	while (e) {
		struct tnbc_xep *n = e->next;

		close(e->lfd);
		pthread_mutex_destroy(&e->lock);
		free(e);
		e = n;
	}
}

static void *tnbc_tcp_waker(void *arg)
{
	struct tnbc_xdom *xdom = arg;
	struct epoll_event evs[64];

	for (;;) {
		bool kick = false;
		int n;

		tnbc_tcp_bury(xdom);
		if (tnbc_tcp_sweep(xdom))
			xdom->kick.kick(xdom->kick.arg);
		n = epoll_wait(xdom->epfd, evs, 64,
			       (int)(TNBC_TCP_SWEEP_NS / 1000000u));
		for (int i = 0; i < n; i++) {
			struct tnbc_tcp_ev *ev = evs[i].data.ptr;

			if (!ev)
				return NULL; /* the stop event */
			switch (ev->kind) {
			case TNBC_TCP_K_LISTEN: {
				struct tnbc_xep *xep = (struct tnbc_xep *)ev;

				tnbc_tcp_accept(xep);
				break;
			}
			case TNBC_TCP_K_DATA: {
				struct tnbc_xep *xep =
					(struct tnbc_xep
						 *)((char *)ev -
						    offsetof(struct tnbc_xep,
							     dev));

				/* one-shot: armed again at the next sleep */
				atomic_fetch_add(&xep->events, 1);
				kick = true;
				break;
			}
			case TNBC_TCP_K_PEER:
				if (tnbc_tcp_peer_event(
					    (struct tnbc_xpeer
						     *)((char *)ev -
							offsetof(struct
								 tnbc_xpeer,
								 ev)),
					    evs[i].events))
					kick = true;
				break;
			}
		}
		if (kick)
			xdom->kick.kick(xdom->kick.arg);
	}
}

/* The largest of a net.ipv4 sysctl's three numbers (tcp_rmem, tcp_wmem),
 * or dflt when it cannot be read. */
static size_t tnbc_tcp_sysctl_max(const char *name, size_t dflt)
{
	char path[64];
	unsigned long lo, def, hi;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", name);
	f = fopen(path, "re");
	if (!f)
		return dflt;
	n = fscanf(f, "%lu %lu %lu", &lo, &def, &hi);
	fclose(f);
	return n == 3 && hi ? (size_t)hi : dflt;
}

static int tnbc_tcp_dom_open(struct tnbc_xdom **out,
			     const struct tnbc_xdom_attr *attr)
{
	struct tnbc_xdom *xdom = calloc(1, sizeof(*xdom));
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	int ret;

	if (!xdom)
		return -FI_ENOMEM;
	xdom->kick = attr->wake;
	xdom->host_busy = attr->host_busy;
	xdom->hello_ns = tnbc_env.tcp_hello_ms * 1000000ull;
	xdom->timeout_ns = tnbc_env.tcp_timeout_ms * 1000000ull;
	xdom->kernel_bufs = tnbc_tcp_sysctl_max("tcp_wmem", 4u << 20) +
			    tnbc_tcp_sysctl_max("tcp_rmem", 6u << 20);
	xdom->strangers_max = tnbc_env.tcp_strangers_max;
	xdom->key_len = (uint16_t)attr->auth_key_size;
	if (attr->auth_key_size)
		memcpy(xdom->key, attr->auth_key, attr->auth_key_size);
	xdom->epfd = -1;
	xdom->stopfd = -1;
	pthread_mutex_init(&xdom->lock, NULL);
	tnbc_net_app_init(&xdom->app);
	tnbc_net_book_init(&xdom->book);
	xdom->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (xdom->epfd < 0) {
		ret = -errno;
		goto err;
	}
	xdom->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (xdom->stopfd < 0) {
		ret = -errno;
		goto err;
	}
	if (epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, xdom->stopfd, &ev)) {
		ret = -errno;
		goto err;
	}
	ret = -pthread_create(&xdom->waker, NULL, tnbc_tcp_waker, xdom);
	if (ret)
		goto err;
	xdom->waker_up = true;
	*out = xdom;
	return 0;
err:
	FI_WARN(&tnbc_prov, FI_LOG_DOMAIN, "tcp: domain: %s\n",
		fi_strerror(-ret));
	if (xdom->stopfd >= 0)
		close(xdom->stopfd);
	if (xdom->epfd >= 0)
		close(xdom->epfd);
	tnbc_net_book_fini(&xdom->book);
	pthread_mutex_destroy(&xdom->lock);
	free(xdom);
	return ret;
}

static void tnbc_tcp_dom_close(struct tnbc_xdom *xdom)
{
	uint64_t one = 1;

	if (write(xdom->stopfd, &one, sizeof(one)) != sizeof(one))
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN, "tcp: waker not told\n");
	pthread_join(xdom->waker, NULL);
	tnbc_tcp_bury(xdom);
	while (xdom->peers) {
		struct tnbc_xpeer *p = xdom->peers;

		xdom->peers = p->next;
		if (p->hs_conn) {
			close(p->hs_conn->fd);
			free(p->hs_conn);
		}
		if (p->fd >= 0)
			close(p->fd);
		free(p->out);
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
	close(xdom->stopfd);
	close(xdom->epfd);
	tnbc_net_book_fini(&xdom->book);
	pthread_mutex_destroy(&xdom->lock);
	free(xdom);
}

/* ------------------------------------------------------------------ */
/* Endpoints                                                            */

/* Takes the endpoint off its domain's list (introductions and
 * sleep_begin look there). */
static void tnbc_tcp_ep_unlink(struct tnbc_xep *xep)
{
	struct tnbc_xdom *xdom = xep->xdom;

	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep **it = &xdom->eps; *it; it = &(*it)->next)
		if (*it == xep) {
			*it = xep->next;
			break;
		}
	pthread_mutex_unlock(&xdom->lock);
}

static int tnbc_tcp_ep_open(struct tnbc_xdom *xdom,
			    const struct tnbc_name *name, uint8_t *xaddr,
			    struct tnbc_xep **out)
{
	struct tnbc_tcp_addr *want = (struct tnbc_tcp_addr *)(void *)xaddr;
	struct epoll_event ev;
	struct sockaddr_storage ss;
	struct tnbc_xep *xep;
	socklen_t sl;
	int one = 1, ret;

	xep = calloc(1, sizeof(*xep));
	if (!xep)
		return -FI_ENOMEM;
	xep->ev.kind = TNBC_TCP_K_LISTEN;
	xep->dev.kind = TNBC_TCP_K_DATA;
	xep->xdom = xdom;
	xep->name = *name;
	xep->kept_tail = &xep->kept;
	xep->pfd = epoll_create1(EPOLL_CLOEXEC);
	if (xep->pfd < 0) {
		ret = -errno;
		free(xep);
		return ret;
	}
	pthread_mutex_init(&xep->lock, NULL);
	xep->addr = *want;
	if (!xep->addr.family)
		xep->addr.family = 4;
	/* a service is reached at its number, where it is a port (peers
	 * that know a larger one from its name learn the port it got) */
	if (name->kind == TNBC_NAME_SVC && name->uid <= 65535)
		xep->addr.port = htons((uint16_t)name->uid);
	xep->lfd = socket(xep->addr.family == 6 ? AF_INET6 : AF_INET,
			  SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (xep->lfd < 0) {
		ret = -errno;
		goto err;
	}
	setsockopt(xep->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sl = tnbc_tcp_sockaddr(&xep->addr, &ss);
	if (bind(xep->lfd, (struct sockaddr *)&ss, sl) ||
	    listen(xep->lfd, 128)) {
		ret = errno == EADDRINUSE ? -FI_EADDRINUSE : -errno;
		goto err_fd;
	}
	sl = sizeof(ss);
	getsockname(xep->lfd, (struct sockaddr *)&ss, &sl);
	tnbc_tcp_from_sockaddr((struct sockaddr *)&ss, &xep->addr);
	if (tnbc_tcp_any(&xep->addr)) {
		uint16_t port = xep->addr.port;

		tnbc_tcp_host_addr(&xep->addr);
		xep->addr.port = port;
	}
	pthread_mutex_lock(&xdom->lock);
	xep->next = xdom->eps;
	xdom->eps = xep;
	pthread_mutex_unlock(&xdom->lock);
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.ptr = &xep->dev;
	epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, xep->pfd, &ev);
	ev.events = EPOLLIN;
	ev.data.ptr = &xep->ev;
	if (epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, xep->lfd, &ev)) {
		ret = -errno;
		tnbc_tcp_ep_unlink(xep);
		goto err_fd;
	}
	*want = xep->addr;
	*out = xep;
	return 0;
err_fd:
	close(xep->lfd);
err:
	if (ret != -FI_EADDRINUSE)
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL, "tcp: endpoint: %s\n",
			fi_strerror(-ret));
	close(xep->pfd);
	pthread_mutex_destroy(&xep->lock);
	free(xep);
	return ret;
}

static void tnbc_tcp_held_free(struct tnbc_tcp_held *h)
{
	while (h) {
		struct tnbc_tcp_held *n = h->next;

		free(h);
		h = n;
	}
}

static void tnbc_tcp_ep_named(struct tnbc_xep *xep,
			      const struct tnbc_addr *self)
{
	xep->whole = *self;
	atomic_store_explicit(&xep->named, true, memory_order_release);
}

static void tnbc_tcp_ep_close(struct tnbc_xep *xep)
{
	struct tnbc_xdom *xdom = xep->xdom;
	struct tnbc_tcp_conn *c, *last = NULL;

	/* out of the list first: sleep_begin arms what it finds there */
	tnbc_tcp_ep_unlink(xep);
	epoll_ctl(xdom->epfd, EPOLL_CTL_DEL, xep->lfd, NULL);
	epoll_ctl(xdom->epfd, EPOLL_CTL_DEL, xep->pfd, NULL);
	/* Stops listening and frees the port now, but keeps the descriptor
	 * until the waker buries xep: the waker may hold an event for it
	 * and call accept, which a closed number, reused meanwhile by
	 * another socket of the process, would let take that socket's
	 * connection.  A shut listener only fails accept (EINVAL). */
	shutdown(xep->lfd, SHUT_RDWR);
	pthread_mutex_lock(&xep->lock);
	xep->closing = true;
	c = xep->conns;
	xep->conns = NULL;
	pthread_mutex_unlock(&xep->lock);
	for (struct tnbc_tcp_conn *it = c; it; it = it->next) {
		/* as in conn_drop: the socket may be a peer's too */
		shutdown(it->fd, SHUT_RDWR);
		close(it->fd);
		last = it;
	}
	close(xep->pfd);
	tnbc_tcp_held_free(xep->replay);
	tnbc_tcp_held_free(xep->kept);
	pthread_mutex_lock(&xdom->lock);
	if (last) {
		last->next = xdom->grave_conns;
		xdom->grave_conns = c;
	}
	xep->next = xdom->grave_eps;
	xdom->grave_eps = xep;
	pthread_mutex_unlock(&xdom->lock);
}

/* As large as shm's: fi_info's limits hold whichever transport reaches
 * a peer. */
static size_t tnbc_tcp_packet_limit(void)
{
	return tnbc_env.slot_size - 16;
}

/* What a peer sends and takes is larger: a stream has no slots, and the
 * protocol moves large messages and RMA in packets of this size.  At
 * shm's 32 KiB, each packet's system calls and the head read with its
 * record cost a 1 MiB stream a tenth to two fifths of its bandwidth, and
 * 256 KiB packets still a quarter against 1 MiB ones (fi_tnbc(7));
 * larger packets hold the small ones behind them longer. */
static size_t tnbc_tcp_rx_max(void)
{
	size_t slot = tnbc_tcp_packet_limit();

	return slot > TNBC_TCP_PACKET_MAX ? slot : TNBC_TCP_PACKET_MAX;
}

static size_t tnbc_tcp_max_packet(struct tnbc_xpeer *peer)
{
	(void)peer;
	return tnbc_tcp_rx_max();
}

/* Eager up to FI_TNBC_TCP_EAGER_SIZE: the handshake of a rendezvous
 * costs a round trip, and a stream has no slots an eager message would
 * fill (unexpected ones are held up to FI_TNBC_UNEXP_MAX, then senders
 * wait).  Between namespaces, 64 KiB messages moved 2.0 to 3.0 GB/s
 * eagerly and 1.0 to 1.4 by rendezvous (fi_tnbc(7)). */
static size_t tnbc_tcp_eager_max(struct tnbc_xpeer *peer)
{
	(void)peer;
	return tnbc_env.tcp_eager_size;
}

/* ------------------------------------------------------------------ */
/* Peers and sending                                                    */

/* The peer named name, if the domain has one.  xdom->lock held. */
static struct tnbc_xpeer *tnbc_tcp_peer_find(struct tnbc_xdom *xdom,
					     const struct tnbc_name *name)
{
	struct tnbc_xpeer *p;

	for (p = xdom->peers; p; p = p->next)
		if (tnbc_name_same(&p->name, name))
			break;
	return p;
}

static int tnbc_tcp_peer_get(struct tnbc_xdom *xdom,
			     const struct tnbc_name *name, const uint8_t *xaddr,
			     struct tnbc_xpeer **out)
{
	const struct tnbc_tcp_addr *given = (const void *)xaddr;
	struct tnbc_tcp_addr a;
	struct tnbc_xpeer *p, *q;

	if (!(name->xports & TNBC_XPORT_BIT(TNBC_XPORT_TCP)) ||
	    (name->kind != TNBC_NAME_PID && name->kind != TNBC_NAME_SVC))
		return -FI_EINVAL;
	pthread_mutex_lock(&xdom->lock);
	p = tnbc_tcp_peer_find(xdom, name);
	pthread_mutex_unlock(&xdom->lock);
	if (p) {
		*out = p;
		return 0;
	}
	if (given && given->family && given->port) {
		a = *given;
		/* the application's word: what connections say of the name
		 * never moves it */
		tnbc_net_book_pin(&xdom->book, name, &a, sizeof(a));
	} else if (!tnbc_net_book_get(&xdom->book, name, &a, sizeof(a)))
		return -FI_EHOSTUNREACH;
	if ((a.family != 4 && a.family != 6) || !a.port)
		return -FI_EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -FI_ENOMEM;
	p->base.ops = &tnbc_tcp_ops;
	p->ev.kind = TNBC_TCP_K_PEER;
	p->xdom = xdom;
	p->name = *name;
	p->addr = a;
	p->fd = -1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_lock(&xdom->lock);
	/* another thread may have made it meanwhile */
	q = tnbc_tcp_peer_find(xdom, name);
	if (q) {
		pthread_mutex_unlock(&xdom->lock);
		pthread_mutex_destroy(&p->lock);
		free(p);
		*out = q;
		return 0;
	}
	p->next = xdom->peers;
	xdom->peers = p;
	pthread_mutex_unlock(&xdom->lock);
	*out = p;
	return 0;
}

static void tnbc_tcp_addr_known(struct tnbc_xdom *xdom,
				const struct tnbc_name *name,
				const uint8_t *xaddr)
{
	const struct tnbc_tcp_addr *a = (const void *)xaddr;

	if ((a->family == 4 || a->family == 6) && a->port)
		tnbc_net_book_pin(&xdom->book, name, a, sizeof(*a));
}

static bool tnbc_tcp_peer_alive(struct tnbc_xpeer *peer)
{
	return !atomic_load(&peer->dead);
}

/* Makes room for n more bytes of what waits to be written; peer->lock
 * held. */
static int tnbc_tcp_out_room(struct tnbc_xpeer *p, size_t n)
{
	size_t cap = p->out_cap ? p->out_cap : 65536;
	uint8_t *b;

	if (p->out_len + n <= p->out_cap)
		return 0;
	if (p->out_off) {
		memmove(p->out, p->out + p->out_off, p->out_len - p->out_off);
		p->hs_at = p->hs_at > p->out_off ? p->hs_at - p->out_off : 0;
		p->out_len -= p->out_off;
		p->out_off = 0;
	}
	while (cap < p->out_len + n)
		cap *= 2;
	if (cap != p->out_cap) {
		b = realloc(p->out, cap);
		if (!b)
			return -FI_EAGAIN; /* memory may come back */
		p->out = b;
		p->out_cap = cap;
	}
	return 0;
}

/* Appends our own bytes (records, frames). */
static int tnbc_tcp_out_put(struct tnbc_xpeer *p, const void *data, size_t n)
{
	int ret = tnbc_tcp_out_room(p, n);

	if (!ret) {
		memcpy(p->out + p->out_len, data, n);
		p->out_len += n;
	}
	return ret;
}

/* Appends n bytes of the application's memory, which may be
 * unreadable: read through the kernel, which reports that as an error
 * where a memcpy would fault (-FI_EFAULT then). */
static int tnbc_tcp_out_put_user(struct tnbc_xpeer *p, const void *data,
				 size_t n)
{
	struct iovec l, r;
	int ret = tnbc_tcp_out_room(p, n);

	if (ret)
		return ret;
	l.iov_base = p->out + p->out_len;
	l.iov_len = n;
	r.iov_base = (void *)data;
	r.iov_len = n;
	if (n && process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)n)
		return -FI_EFAULT;
	p->out_len += n;
	return 0;
}

/* Options of every connection a peer's packets go out on. */
static void tnbc_tcp_sock_opts(int fd)
{
	unsigned timeout = (unsigned)tnbc_env.tcp_timeout_ms;
	int one = 1, idle = 1, cnt;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a peer that stops answering (its host or link gone) fails within
	 * FI_TNBC_TCP_TIMEOUT_MS: unacknowledged data, or no answer to
	 * keepalive probes once a second after a second idle */
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout,
		   sizeof(timeout));
	cnt = (int)(timeout / 1000u) > 1 ? (int)(timeout / 1000u) - 1 : 1;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* The connection p opens is two-way when src, the endpoint sending, is
 * its domain's only one: src reads it (a connection of its own on the
 * same socket), and the hello names it.  With several endpoints the
 * domain could not tell whose an answer is; they stay one way.
 * peer->lock held. */
static void tnbc_tcp_dial_back(struct tnbc_xpeer *p,
			       const struct tnbc_name *src, int fd,
			       struct tnbc_tcp_hello *hello)
{
	struct tnbc_xdom *xdom = p->xdom;
	struct tnbc_tcp_conn *c;
	struct tnbc_xep *xep;
	int dfd;

	pthread_mutex_lock(&xdom->lock);
	xep = xdom->eps;
	if (!src || !xep || xep->next || !tnbc_name_same(&xep->name, src))
		goto out;
	dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dfd < 0)
		goto out;
	c = tnbc_tcp_conn_new(xep, dfd);
	if (!c) {
		close(dfd);
		goto out;
	}
	/* what comes back is the peer's, proven by its challenge where a
	 * key asks for one: listed only then */
	c->hello = true;
	c->proven = true;
	c->dialed = true;
	c->from = p->addr;
	c->id = p->name;
	if (p->xdom->key_len) {
		p->hs_conn = c;
	} else if (!tnbc_tcp_conn_add(xep, c)) {
		close(dfd);
		free(c);
		goto out;
	}
	hello->flags |= TNBC_TCP_HELLO_TWO_WAY;
	p->two_way = true;
out:
	pthread_mutex_unlock(&xdom->lock);
}

/* Whether name a orders before b: any order both sides of a connection
 * compute alike. */
static bool tnbc_tcp_name_before(const struct tnbc_name *a,
				 const struct tnbc_name *b)
{
	if (a->host != b->host)
		return a->host < b->host;
	if (a->pid != b->pid)
		return a->pid < b->pid;
	if (a->uid != b->uid)
		return a->uid < b->uid;
	return a->nonce < b->nonce;
}

/* Notes that the endpoint named src reached us one way: for its peer,
 * or, while we have none, for the one made when we first answer. */
static void tnbc_tcp_one_way(struct tnbc_xdom *xdom,
			     const struct tnbc_name *src)
{
	struct tnbc_xpeer *p;

	pthread_mutex_lock(&xdom->lock);
	p = tnbc_tcp_peer_find(xdom, src);
	if (p) {
		atomic_store(&p->dialed_one_way, true);
	} else {
		xdom->one_way[xdom->one_way_next] = *src;
		xdom->one_way_next =
			(xdom->one_way_next + 1) % TNBC_TCP_ONE_WAY_NAMES;
	}
	pthread_mutex_unlock(&xdom->lock);
}

/* Whether p's endpoint was introduced on a one-way connection before p
 * existed.  xdom->lock held. */
static bool tnbc_tcp_one_way_seen(struct tnbc_xdom *xdom,
				  const struct tnbc_xpeer *p)
{
	for (unsigned i = 0; i < TNBC_TCP_ONE_WAY_NAMES; i++)
		if (xdom->one_way[i].kind &&
		    tnbc_name_same(&xdom->one_way[i], &p->name))
			return true;
	return false;
}

/*
 * Two endpoints that first send to each other at the same moment would
 * each dial, and each connection would then carry packets one way only:
 * every small packet costs its receiver a bare acknowledgement (see
 * above).  Open MPI's osu_latency between two namespaces took 17 to
 * 18 us in the runs where both had dialed, 10.3 to 13.5 where one had
 * adopted the other's connection.  So the endpoint whose name orders
 * first dials at once, and the other, when the connection it would dial
 * could be two-way, gives it TNBC_TCP_DIAL_WAIT_NS to come: its sends
 * wait in its queue meanwhile (-FI_EAGAIN), and adopt that connection as
 * soon as its hello is read.  It dials itself once the time is up, so a
 * peer that never sends costs its first message that long, once, or as
 * soon as the peer turns out to have dialed one way (a domain of
 * several endpoints: its introduction comes on a connection whose hello
 * named no reader).  At
 * most TNBC_TCP_DIAL_WAITS peers of a domain are waited for at a time;
 * the others are dialed at once.  True while the send must wait;
 * peer->lock held.
 */
static bool tnbc_tcp_dial_wait(struct tnbc_xpeer *p,
			       const struct tnbc_name *src)
{
	struct tnbc_xdom *xdom = p->xdom;
	uint64_t now;
	unsigned i;

	if (p->dial_wait_ns) {
		if (!atomic_load(&p->dialed_one_way) &&
		    tnbc_now_ns() - p->dial_wait_ns < TNBC_TCP_DIAL_WAIT_NS)
			return true;
		tnbc_tcp_dial_wait_end(p);
		return false;
	}
	/* a service's name has no process: the two sides could disagree */
	if (p->dial_waited || !src || src->kind != TNBC_NAME_PID ||
	    p->name.kind != TNBC_NAME_PID ||
	    !tnbc_tcp_name_before(&p->name, src))
		return false;
	p->dial_waited = true; /* asked once */
	now = tnbc_now_ns();
	pthread_mutex_lock(&xdom->lock);
	/* as tnbc_tcp_dial_back decides whether answers may come back */
	if (xdom->eps && !xdom->eps->next &&
	    tnbc_name_same(&xdom->eps->name, src) &&
	    !tnbc_tcp_one_way_seen(xdom, p)) {
		for (i = 0;
		     i < TNBC_TCP_DIAL_WAITS && xdom->dial_slots[i] > now; i++)
			;
		if (i < TNBC_TCP_DIAL_WAITS) {
			xdom->dial_slots[i] = now + TNBC_TCP_DIAL_WAIT_NS;
			if (atomic_load(&xdom->dial_until) <
			    xdom->dial_slots[i])
				atomic_store(&xdom->dial_until,
					     xdom->dial_slots[i]);
			p->dial_slot = i;
			p->dial_wait_ns = now;
		}
	}
	pthread_mutex_unlock(&xdom->lock);
	return p->dial_wait_ns != 0;
}

/* The wait for p to dial is over (or none was on): its slot is free, and
 * polls stop accepting once no other wait is on.  peer->lock held. */
static void tnbc_tcp_dial_wait_end(struct tnbc_xpeer *p)
{
	struct tnbc_xdom *xdom = p->xdom;
	uint64_t until = 0, now = tnbc_now_ns();

	p->dial_waited = true;
	if (!p->dial_wait_ns)
		return;
	p->dial_wait_ns = 0;
	pthread_mutex_lock(&xdom->lock);
	xdom->dial_slots[p->dial_slot] = 0;
	for (unsigned i = 0; i < TNBC_TCP_DIAL_WAITS; i++)
		if (xdom->dial_slots[i] > now && xdom->dial_slots[i] > until)
			until = xdom->dial_slots[i];
	atomic_store(&xdom->dial_until, until);
	pthread_mutex_unlock(&xdom->lock);
}

/* Whether a peer's connection may be awaited (tnbc_tcp_dial_wait): the
 * clock is read only then. */
static bool tnbc_tcp_awaited(struct tnbc_xdom *xdom)
{
	uint64_t until =
		atomic_load_explicit(&xdom->dial_until, memory_order_relaxed);

	if (!until)
		return false;
	if (tnbc_now_ns() < until)
		return true;
	/* over, however its waits ended */
	atomic_compare_exchange_strong(&xdom->dial_until, &until, 0);
	return false;
}

/* Whether the handshake of p's connection, just begun, is over already
 * (over a local link it often is): then the hello and the packet behind
 * it go at once, not when the waker next runs, which on a busy CPU can
 * be a scheduler tick later.  peer->lock held. */
static void tnbc_tcp_up_now(struct tnbc_xpeer *p)
{
	struct pollfd pfd = {.fd = p->fd, .events = POLLOUT};
	socklen_t len = sizeof(int);
	int err = 0;

	if (p->state == TNBC_TCP_CONNECTING && poll(&pfd, 1, 0) == 1 &&
	    !(pfd.revents & (POLLERR | POLLHUP)) &&
	    !getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &len) && !err) {
		tnbc_tcp_came_up(p);
		if (p->state == TNBC_TCP_PROVING)
			tnbc_tcp_flush(p); /* the hello */
	}
}

/* Whether a is a loopback address. */
static bool tnbc_tcp_loopback(const struct tnbc_tcp_addr *a)
{
	static const uint8_t lo6[16] = {[15] = 1};

	return a->family == 6 ? !memcmp(a->ip, lo6, 16) : a->ip[0] == 127;
}

/* A connection leaves from the address its endpoint listens on, which
 * its hello names: without a key, the listener takes the name only
 * from that host.  (A host of several addresses would otherwise leave
 * from whichever its routes choose.) */
static void tnbc_tcp_bind_source(int fd, const struct tnbc_tcp_addr *self,
				 const struct tnbc_tcp_addr *to)
{
	struct tnbc_tcp_addr a = *self;
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1;

	if (self->family != to->family || tnbc_tcp_any(self) ||
	    (tnbc_tcp_loopback(self) && !tnbc_tcp_loopback(to)))
		return;
	a.port = 0;
	sl = tnbc_tcp_sockaddr(&a, &ss);
	/* the port is chosen at connect, as an unbound socket's */
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl))
		FI_INFO(&tnbc_prov, FI_LOG_EP_CTRL,
			"tcp: connecting from the listening address: %s\n",
			strerror(errno));
}

static int tnbc_tcp_connect(struct tnbc_xpeer *p, const struct tnbc_name *src)
{
	struct tnbc_tcp_rec rec = {.len = sizeof(struct tnbc_tcp_hello),
				   .type = TNBC_TCP_HELLO};
	struct tnbc_tcp_rec prec = {.len = sizeof(struct tnbc_tcp_proof),
				    .type = TNBC_TCP_PROOF};
	static const struct tnbc_tcp_proof blank;
	struct tnbc_tcp_hello *hello = &p->hs_hello;
	struct tnbc_xdom *xdom = p->xdom;
	struct epoll_event ev;
	struct sockaddr_storage ss;
	socklen_t sl = tnbc_tcp_sockaddr(&p->addr, &ss);
	size_t hello_at;
	int fd;

	memset(hello, 0, sizeof(*hello));
	hello->magic = TNBC_TCP_MAGIC;
	hello->version = TNBC_TCP_VERSION;
	hello->flags = xdom->key_len ? TNBC_TCP_HELLO_KEYED : 0;
	hello->to = p->name;
	if (tnbc_random(hello->nonce, sizeof(hello->nonce)))
		return -FI_EIO;
	/* who dials: the sending endpoint, or, for a packet that names
	 * none, the domain's first */
	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep *e = xdom->eps; e; e = e->next)
		if (!src || tnbc_name_same(&e->name, src)) {
			hello->from = e->name;
			hello->from_addr = e->addr;
			break;
		}
	pthread_mutex_unlock(&xdom->lock);
	if (!hello->from.kind)
		return -FI_EHOSTUNREACH; /* no endpoint of ours to answer */
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	tnbc_tcp_sock_opts(fd);
	tnbc_tcp_bind_source(fd, &hello->from_addr, &p->addr);
	if (connect(fd, (struct sockaddr *)&ss, sl) && errno != EINPROGRESS) {
		int err = errno;

		close(fd);
		return -err;
	}
	p->fd = fd;
	p->write_max = 0;
	p->state = TNBC_TCP_CONNECTING;
	p->intros.n = 0;
	p->two_way = false;
	p->hs_have = 0;
	ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
	ev.data.ptr = &p->ev;
	if (epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		int err = errno;

		close(fd);
		p->fd = -1;
		p->state = TNBC_TCP_IDLE;
		return -err;
	}
	hello_at = p->out_len;
	/* with a key, the proof's place follows the hello, filled once the
	 * listener's challenge came */
	if (tnbc_tcp_out_put(p, &rec, sizeof(rec)) ||
	    tnbc_tcp_out_put(p, hello, sizeof(*hello)) ||
	    (xdom->key_len && (tnbc_tcp_out_put(p, &prec, sizeof(prec)) ||
			       tnbc_tcp_out_put(p, &blank, sizeof(blank))))) {
		epoll_ctl(xdom->epfd, EPOLL_CTL_DEL, fd, NULL);
		close(fd);
		p->fd = -1;
		p->state = TNBC_TCP_IDLE;
		p->out_len = p->out_off = 0;
		return -FI_EAGAIN;
	}
	p->hs_at = hello_at + sizeof(rec) + sizeof(*hello);
	/* last: once the hello says so, answers come on this connection,
	 * and it must not be undone */
	tnbc_tcp_dial_back(p, src, fd, hello);
	memcpy(p->out + hello_at + sizeof(rec), hello, sizeof(*hello));
	if (p->two_way && !xdom->key_len) {
		/* what comes in is the dialed connection's to read */
		ev.events = EPOLLOUT | EPOLLRDHUP | EPOLLET;
		epoll_ctl(xdom->epfd, EPOLL_CTL_MOD, fd, &ev);
	}
	tnbc_tcp_up_now(p);
	return 0;
}

/* Sends p's packets on the connection p's endpoint opened to one of
 * ours, if there is one: its hello named it as reading answers there.
 * Then the answers carry the acknowledgements of what came, and no
 * second connection is made.  peer->lock held, p idle. */
static bool tnbc_tcp_adopt(struct tnbc_xpeer *p)
{
	struct tnbc_xdom *xdom = p->xdom;
	struct epoll_event ev = {.events = EPOLLOUT | EPOLLRDHUP | EPOLLET,
				 .data.ptr = &p->ev};
	int fd = -1;

	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep *e = xdom->eps; e && fd < 0; e = e->next) {
		pthread_mutex_lock(&e->lock);
		/* proven, and without a key from the host we know the
		 * peer by: a stranger's claim alone takes nothing */
		for (struct tnbc_tcp_conn *c = e->conns; c; c = c->next)
			if (c->proven && !c->dialed && c->back.kind &&
			    tnbc_name_same(&c->back, &p->name) &&
			    (xdom->key_len ||
			     tnbc_tcp_same_host(&c->from, &p->addr))) {
				fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
				break;
			}
		pthread_mutex_unlock(&e->lock);
	}
	pthread_mutex_unlock(&xdom->lock);
	if (fd < 0)
		return false;
	tnbc_tcp_sock_opts(fd);
	if (epoll_ctl(xdom->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		return false;
	}
	p->fd = fd;
	p->write_max = 0;
	p->state = TNBC_TCP_UP;
	p->two_way = true;
	p->intros.n = 0;
	tnbc_tcp_dial_wait_end(p);
	return true;
}

/* ------------------------------------------------------------------ */
/* Lookups: who listens at a socket address                            */

/* Waits until fd is ready for events or end_ns passes. */
static bool tnbc_tcp_wait_fd(int fd, short events, uint64_t end_ns)
{
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		uint64_t now = tnbc_now_ns();
		int r;

		if (now >= end_ns)
			return false;
		r = poll(&pfd, 1, (int)((end_ns - now + 999999) / 1000000));
		if (r > 0)
			return true;
		if (r < 0 && errno != EINTR)
			return false;
	}
}

/* Reads n bytes of fd by end_ns; the bytes read (fewer: it closed,
 * failed, or the time is up). */
static size_t tnbc_tcp_read_by(int fd, void *buf, size_t n, uint64_t end_ns)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, (uint8_t *)buf + got, n - got, 0);

		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (!r)
			break; /* closed */
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN || !tnbc_tcp_wait_fd(fd, POLLIN, end_ns))
			break;
	}
	return got;
}

/* One question; -FI_EAGAIN where asking again may get an answer
 * (nobody listens yet, or the endpoint is not named yet). */
static int tnbc_tcp_ask(struct tnbc_xdom *xdom, const struct sockaddr *sa,
			uint64_t end_ns, struct tnbc_addr *out)
{
	struct {
		struct tnbc_tcp_rec rec;
		struct tnbc_tcp_hello h;
	} q = {.rec = {.len = sizeof(q.h), .type = TNBC_TCP_HELLO},
	       .h = {.magic = TNBC_TCP_MAGIC,
		     .version = TNBC_TCP_VERSION,
		     .flags = TNBC_TCP_HELLO_LOOKUP}};
	struct tnbc_tcp_rec rec;
	struct tnbc_tcp_chal chal;
	struct {
		struct tnbc_tcp_rec rec;
		struct tnbc_tcp_proof proof;
	} pr = {.rec = {.len = sizeof(pr.proof), .type = TNBC_TCP_PROOF}};
	uint8_t want[TNBC_TCP_MAC_LEN];
	struct tnbc_addr addr;
	socklen_t sl = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						 : sizeof(struct sockaddr_in);
	size_t got;
	int fd, err = 0, ret = -FI_EAGAIN;

	if (xdom->key_len)
		q.h.flags |= TNBC_TCP_HELLO_KEYED;
	if (tnbc_random(q.h.nonce, sizeof(q.h.nonce)))
		return -FI_EIO;
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	if (connect(fd, sa, sl) && errno != EINPROGRESS)
		goto out;
	if (!tnbc_tcp_wait_fd(fd, POLLOUT, end_ns))
		goto out;
	sl = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) || err)
		goto out;
	if (send(fd, &q, sizeof(q), MSG_NOSIGNAL) != (ssize_t)sizeof(q))
		goto out;
	got = tnbc_tcp_read_by(fd, &rec, sizeof(rec), end_ns);
	if (got < sizeof(rec)) {
		/* closed unanswered (not named yet), or no tnbc */
		ret = got ? -FI_EHOSTUNREACH : -FI_EAGAIN;
		goto out;
	}
	if (rec.type == TNBC_TCP_IAM && !rec.len) {
		ret = -FI_EACCES; /* a key where we have none, or none */
		goto out;
	}
	if (xdom->key_len) {
		/* the listener proves the key before we do, and tells its
		 * name only then */
		ret = -FI_EHOSTUNREACH;
		if (rec.type != TNBC_TCP_CHAL || rec.len != sizeof(chal) ||
		    tnbc_tcp_read_by(fd, &chal, sizeof(chal), end_ns) !=
			    sizeof(chal))
			goto out;
		tnbc_tcp_mac(xdom, TNBC_TCP_MAC_L, &q.h, chal.nonce, NULL,
			     want);
		if (!tnbc_mac_equal(want, chal.mac, sizeof(want))) {
			ret = -FI_EACCES;
			goto out;
		}
		tnbc_tcp_mac(xdom, TNBC_TCP_MAC_C, &q.h, chal.nonce, chal.mac,
			     pr.proof.mac);
		if (send(fd, &pr, sizeof(pr), MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(pr))
			goto out;
		got = tnbc_tcp_read_by(fd, &rec, sizeof(rec), end_ns);
		if (got < sizeof(rec)) {
			ret = got ? -FI_EHOSTUNREACH : -FI_EAGAIN;
			goto out;
		}
	}
	ret = -FI_EHOSTUNREACH; /* something that is no tnbc */
	if (rec.type != TNBC_TCP_IAM || rec.len != sizeof(addr) ||
	    tnbc_tcp_read_by(fd, &addr, sizeof(addr), end_ns) != sizeof(addr))
		goto out;
	*out = addr;
	ret = 0;
out:
	close(fd);
	return ret;
}

static int tnbc_tcp_resolve(struct tnbc_xdom *xdom, const struct sockaddr *sa,
			    struct tnbc_addr *out)
{
	uint64_t end = tnbc_now_ns() + tnbc_env.tcp_timeout_ms * 1000000u;
	struct tnbc_tcp_addr *a =
		(struct tnbc_tcp_addr *)(void *)(out->xaddr +
						 TNBC_XADDR_TCP_OFF);
	int ret;

	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return -FI_EINVAL;
	for (;;) {
		ret = tnbc_tcp_ask(xdom, sa, end, out);
		if (ret != -FI_EAGAIN || tnbc_now_ns() >= end)
			break;
		/* nobody listens there yet: ask again shortly */
		nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
	}
	if (ret == -FI_EAGAIN)
		ret = -FI_EHOSTUNREACH;
	if (ret) {
		FI_WARN(&tnbc_prov, FI_LOG_AV,
			"tcp: no tnbc endpoint answered at that address: %s\n",
			fi_strerror(-ret));
		return ret;
	}
	/* where it answered is where this host reaches it, whatever
	 * address it gives out */
	tnbc_tcp_from_sockaddr(sa, a);
	return 0;
}

/* Tells the peer where src listens, once per connection; peer->lock
 * held. */
static int tnbc_tcp_introduce(struct tnbc_xpeer *p, const struct tnbc_name *src)
{
	struct tnbc_tcp_rec rec = {.len = sizeof(struct tnbc_tcp_intro),
				   .type = TNBC_TCP_INTRO};
	struct tnbc_tcp_intro in = {.src = *src};
	struct tnbc_xdom *xdom = p->xdom;
	bool found = false;

	if (tnbc_net_introduced(&p->intros, src))
		return 0;
	pthread_mutex_lock(&xdom->lock);
	for (struct tnbc_xep *e = xdom->eps; e; e = e->next)
		if (tnbc_name_same(&e->name, src)) {
			in.addr = e->addr;
			found = true;
			break;
		}
	pthread_mutex_unlock(&xdom->lock);
	if (!found)
		return 0; /* not ours: the peer cannot answer it anyway */
	if (p->out_len + sizeof(rec) + sizeof(in) > TNBC_TCP_OUT_MAX)
		return -FI_EAGAIN;
	if (tnbc_tcp_out_put(p, &rec, sizeof(rec)) ||
	    tnbc_tcp_out_put(p, &in, sizeof(in)))
		return -FI_EAGAIN;
	tnbc_net_intro_add(&p->intros, src);
	return 0;
}

/* A connection to p, made or being made; src names our endpoint for the
 * hello.  peer->lock held. */
static int tnbc_tcp_up(struct tnbc_xpeer *p, const struct tnbc_name *src)
{
	int ret;

	if (p->state == TNBC_TCP_DEAD)
		return -FI_EHOSTUNREACH;
	if (p->state != TNBC_TCP_IDLE || tnbc_tcp_adopt(p))
		return 0;
	if (tnbc_tcp_dial_wait(p, src))
		return -FI_EAGAIN;
	ret = tnbc_tcp_connect(p, src);
	if (ret && ret != -FI_EAGAIN) {
		tnbc_tcp_peer_dead(p, fi_strerror(-ret));
		ret = -FI_EHOSTUNREACH;
	}
	return ret;
}

/* Tells the process of a connection (its identity who) whether our
 * endpoint "by" holds its messages back, on a connection of our domain
 * to who.  0, or why not (-FI_EAGAIN: later). */
static int tnbc_tcp_notice(struct tnbc_xdom *xdom, const struct tnbc_name *who,
			   const struct tnbc_name *by, bool on)
{
	struct tnbc_tcp_rec rec = {.len = sizeof(struct tnbc_tcp_hold),
				   .type = TNBC_TCP_HOLD};
	struct tnbc_tcp_hold h = {.by = *by, .on = on};
	struct tnbc_xpeer *p;
	int ret = tnbc_tcp_peer_get(xdom, who, NULL, &p);

	if (ret)
		return ret;
	pthread_mutex_lock(&p->lock);
	ret = tnbc_tcp_up(p, by);
	if (!ret && p->out_len - p->out_off + sizeof(rec) + sizeof(h) >
			    TNBC_TCP_OUT_MAX)
		ret = -FI_EAGAIN;
	if (!ret && (tnbc_tcp_out_put(p, &rec, sizeof(rec)) ||
		     tnbc_tcp_out_put(p, &h, sizeof(h))))
		ret = -FI_EAGAIN;
	if (!ret)
		tnbc_tcp_flush(p);
	pthread_mutex_unlock(&p->lock);
	return ret;
}

static int tnbc_tcp_send(struct tnbc_xpeer *p, const struct tnbc_xpkt *pkt)
{
	size_t len = (size_t)pkt->frame_len + pkt->payload_len;
	struct tnbc_tcp_rec rec = {.len = (uint32_t)len, .type = TNBC_TCP_PKT};
	struct iovec iov[TNBC_TCP_SEND_IOV];
	static const uint8_t zeros[8];
	size_t niov = 0, total = sizeof(rec) + TNBC_TCP_SPAN(len), done = 0,
	       at_start;
	int ret = 0;

	if (pkt->frame_len > TNBC_XPKT_FRAME_MAX ||
	    len > tnbc_tcp_max_packet(p))
		return -FI_EMSGSIZE;
	if (pkt->flags & TNBC_XPKT_PLACED)
		rec.flags |= TNBC_TCP_REC_PLACED;
	/* the peer holds our messages back: they wait in the core */
	if ((pkt->flags & TNBC_XPKT_HOLDS) &&
	    atomic_load_explicit(&p->held, memory_order_relaxed))
		return atomic_load(&p->dead) ? -FI_EHOSTUNREACH : -FI_EAGAIN;
	pthread_mutex_lock(&p->lock);
	ret = tnbc_tcp_up(p, pkt->src);
	if (ret)
		goto out;
	if (p->out_len - p->out_off + total > TNBC_TCP_OUT_MAX) {
		tnbc_tcp_flush(p);
		if (p->out_len - p->out_off + total > TNBC_TCP_OUT_MAX) {
			ret = p->state == TNBC_TCP_DEAD ? -FI_EHOSTUNREACH
							: -FI_EAGAIN;
			goto out;
		}
	}
	if (pkt->src) {
		ret = tnbc_tcp_introduce(p, pkt->src);
		if (ret)
			goto out;
	}
	at_start = p->out_len - p->out_off; /* compaction keeps this */
	iov[niov].iov_base = &rec;
	iov[niov++].iov_len = sizeof(rec);
	iov[niov].iov_base = (void *)pkt->frame;
	iov[niov++].iov_len = pkt->frame_len;
	for (size_t i = 0, left = pkt->payload_len;
	     i < pkt->iov_count && left &&
	     niov < sizeof(iov) / sizeof(iov[0]) - 1;
	     i++) {
		size_t n =
			pkt->iov[i].iov_len < left ? pkt->iov[i].iov_len : left;

		if (!n)
			continue;
		iov[niov].iov_base = pkt->iov[i].iov_base;
		iov[niov++].iov_len = n;
		left -= n;
	}
	if (TNBC_TCP_SPAN(len) > len) {
		iov[niov].iov_base = (void *)zeros;
		iov[niov++].iov_len = TNBC_TCP_SPAN(len) - len;
	}
	/* straight to the socket when nothing waits before it */
	if (p->state == TNBC_TCP_UP && p->out_off == p->out_len) {
		ssize_t n = tnbc_tcp_writev(p, iov, niov, total);

		if (n == -EFAULT) {
			/* nothing written: the stream goes on */
			ret = -FI_EFAULT;
			goto out;
		}
		if (n < 0 && n != -EAGAIN) {
			tnbc_tcp_peer_dead(p, strerror((int)-n));
			ret = -FI_EHOSTUNREACH;
			goto out;
		}
		/* a write that failed after others leaves its rest to the
		 * buffer below, which meets the same fault or error (and
		 * ends the connection: part of the packet is out) */
		done = n > 0 ? (size_t)n : 0;
	}
	/* the rest waits for the waker, which writes it once the socket
	 * can take more */
	for (size_t i = 0, at = 0; i < niov && !ret; i++) {
		size_t l = iov[i].iov_len, skip = 0;

		if (at + l <= done) {
			at += l;
			continue;
		}
		if (done > at)
			skip = done - at;
		/* the first two are ours, the payload the application's */
		ret = (i < 2 ? tnbc_tcp_out_put : tnbc_tcp_out_put_user)(
			p, (uint8_t *)iov[i].iov_base + skip, l - skip);
		at += l;
	}
	if (ret && done) {
		/* part of it is on the wire: the stream cannot go on */
		tnbc_tcp_peer_dead(p, ret == -FI_EFAULT
					      ? "unreadable payload mid-packet"
					      : "out of memory mid-packet");
		ret = ret == -FI_EFAULT ? ret : -FI_EHOSTUNREACH;
	} else if (ret) {
		/* none of it on the wire: drop what was queued of it */
		p->out_len = p->out_off + at_start;
	}
	/* what waited before it (an introduction) goes now: the waker
	 * writes only when the socket had been full */
	if (!ret)
		tnbc_tcp_flush(p);
out:
	if (ret == -FI_EAGAIN)
		p->refused = true;
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Receiving                                                            */

/* A connection the consumer gives up: it and its bytes are dropped. */
static void tnbc_tcp_conn_drop(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			       const char *why)
{
	struct tnbc_xdom *xdom = xep->xdom;

	if (why)
		FI_INFO(&tnbc_prov, FI_LOG_EP_DATA,
			"tcp: connection closed: %s\n", why);
	pthread_mutex_lock(&xep->lock);
	for (struct tnbc_tcp_conn **it = &xep->conns; *it; it = &(*it)->next)
		if (*it == c) {
			*it = c->next;
			break;
		}
	if (c->stranger) {
		c->stranger = false;
		atomic_fetch_sub(&xep->strangers, 1);
	}
	if (c->paused) {
		c->paused = false;
		atomic_fetch_sub(&xep->npaused, 1);
	}
	pthread_mutex_unlock(&xep->lock);
	epoll_ctl(xep->pfd, EPOLL_CTL_DEL, c->fd, NULL);
	atomic_fetch_sub(&xep->nconns, 1);
	/* a peer sending on the same socket (two-way) hears of it */
	shutdown(c->fd, SHUT_RDWR);
	close(c->fd);
	c->fd = -1;
	pthread_mutex_lock(&xdom->lock);
	c->next = xdom->grave_conns;
	xdom->grave_conns = c;
	pthread_mutex_unlock(&xdom->lock);
}

/* Reads what the socket has into the buffer, making room for need bytes
 * from off; returns bytes read, 0 when none are there, or a negative
 * fi_errno when the connection is over. */
static ssize_t tnbc_tcp_fill(struct tnbc_tcp_conn *c, size_t need)
{
	size_t want;
	ssize_t n;

	if (c->off && (c->off == c->have || c->cap - c->off < need)) {
		memmove(c->buf, c->buf + c->off, c->have - c->off);
		c->have -= c->off;
		c->off = 0;
	}
	/* A stranger's records are small: it makes us hold no more.  A
	 * proven connection's buffer takes a bulk read and more: at 8 KiB
	 * (grown from a stranger's), a 4 KiB ping-pong took 5.5 to 5.9 us
	 * against 5.0 to 5.2 (two processes over TCP on one host). */
	if (c->cap < need || !c->buf || (c->proven && c->cap < 65536)) {
		size_t cap = c->proven ? 65536 : c->cap ? c->cap : 256;
		uint8_t *b;

		while (cap < need)
			cap *= 2;
		b = realloc(c->buf, cap);
		if (!b)
			return 0; /* memory may come back: read later */
		c->buf = b;
		c->cap = cap;
	}
	want = c->cap - c->have;
	if (!c->proven && want > need - (c->have - c->off))
		want = need - (c->have - c->off);
	/* while a record is incomplete read only up to its end, so that a
	 * large placed payload stays in the socket */
	if (want > TNBC_TCP_RBULK && need - (c->have - c->off) < want)
		want = need - (c->have - c->off) > TNBC_TCP_RBULK
			       ? need - (c->have - c->off)
			       : TNBC_TCP_RBULK;
	n = recv(c->fd, c->buf + c->have, want, MSG_DONTWAIT);
	if (n > 0) {
		c->have += (size_t)n;
		c->drained = (size_t)n < want;
		return n;
	}
	if (n == 0)
		return -FI_ECONNRESET;
	if (errno == EAGAIN || errno == EINTR)
		return 0;
	return -FI_ECONNRESET;
}

/* A packet as poll offers it from a connection: head_len bytes in the
 * buffer, the rest (if any) in the socket. */
struct tnbc_tcp_rx {
	struct tnbc_xrx rx;
	struct tnbc_tcp_conn *c;
	size_t pos; /* bytes of the packet read from the socket so far */
	bool copied; /* the protocol read past the head */
	bool broken; /* the socket failed mid-packet */
	/* its sender stalled: the packet went back to the connection's
	 * buffer, to be offered whole once it came (tnbc_tcp_park) */
	bool parked;
};

/* Drops what came of c->skip_left: 1 when it is all gone, 0 when the
 * rest has not come yet, or a negative fi_errno when the connection is
 * over.  Never waits. */
static int tnbc_tcp_skip_some(struct tnbc_tcp_conn *c)
{
	uint8_t junk[4096];

	while (c->skip_left) {
		ssize_t r = recv(c->fd, junk,
				 c->skip_left < sizeof(junk) ? c->skip_left
							     : sizeof(junk),
				 MSG_DONTWAIT);

		if (r > 0) {
			c->skip_left -= (size_t)r;
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			c->drained = true;
			return 0;
		}
		return -FI_ECONNRESET;
	}
	return 1;
}

/* Reads and drops n bytes of the socket. */
static int tnbc_tcp_skip(struct tnbc_tcp_conn *c, size_t n)
{
	uint8_t junk[4096];

	while (n) {
		ssize_t r =
			recv(c->fd, junk, n < sizeof(junk) ? n : sizeof(junk),
			     MSG_WAITALL);

		if (r <= 0)
			return -FI_ECONNRESET;
		n -= (size_t)r;
	}
	return 0;
}

/* Whether the rest of a packet came within TNBC_TCP_READ_SPIN_NS of
 * asking (the sender is writing it).  Asked without sleeping: a reader
 * that sleeps in poll between the pieces of a large payload is woken
 * for each by the sender's CPU, which between namespaces also runs the
 * receiving side of the stack, and that cost 1 MiB streams a tenth of
 * their bandwidth (fi_tnbc(7)).  Not on a host with more runnable
 * threads than CPUs: the sender may be waiting for this one's.  (Asking
 * there too, with a yield between questions, paid while large packets
 * were written whole, and no longer once they were written in
 * pieces.) */
static bool tnbc_tcp_read_spin(struct tnbc_xdom *xdom, struct pollfd *pfd)
{
	uint64_t end = tnbc_now_ns() + TNBC_TCP_READ_SPIN_NS;

	if (atomic_load_explicit(xdom->host_busy, memory_order_relaxed))
		return false;

	do {
		if (poll(pfd, 1, 0) > 0)
			return true;
	} while (tnbc_now_ns() < end);
	return false;
}

/* Reads n bytes of the socket into iov as they come.  The sender wrote
 * the record whole or left the rest for its waker, which writes it as
 * the socket takes it, so the bytes keep coming while the sender lives;
 * a sender that stops for FI_TNBC_TCP_TIMEOUT_MS mid-packet (a hostile
 * one, or one stopped) is taken for dead, and its connection dropped. */
static int tnbc_tcp_read_iov_by(struct tnbc_tcp_conn *c,
				const struct iovec *iov, size_t iov_count,
				size_t off, size_t n, int wait_ms, size_t *got)
{
	*got = 0;
	while (n) {
		struct iovec part[64];
		size_t cnt = tnbc_iov_slice(iov, iov_count, off, n, part, 64);
		struct msghdr mh = {.msg_iov = part, .msg_iovlen = cnt};
		ssize_t r = recvmsg(c->fd, &mh, MSG_WAITALL);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno == EAGAIN) {
				struct pollfd pfd = {.fd = c->fd,
						     .events = POLLIN};

				if (tnbc_tcp_read_spin(c->xep->xdom, &pfd))
					continue;
				r = poll(&pfd, 1, wait_ms);
				if (r > 0)
					continue;
				if (!r &&
				    wait_ms < (int)tnbc_env.tcp_timeout_ms)
					return -FI_EAGAIN; /* stalled */
			}
			return -FI_ECONNRESET;
		}
		off += (size_t)r;
		n -= (size_t)r;
		*got += (size_t)r;
	}
	return 0;
}

static int tnbc_tcp_read_iov(struct tnbc_tcp_conn *c, const struct iovec *iov,
			     size_t iov_count, size_t off, size_t n)
{
	size_t got;

	return tnbc_tcp_read_iov_by(c, iov, iov_count, off, n,
				    (int)tnbc_env.tcp_timeout_ms, &got);
}

/* A placed packet whose sender stalled goes back to the connection's
 * buffer: its head is there still, and the got bytes read into iov from
 * off are copied back behind it; the rest is read into the buffer as it
 * comes, and the packet offered whole (the protocol committed nothing
 * for it: tnbc_xrx.may_park).  False where there is no memory for it
 * (the reader waits for the bytes instead). */
static bool tnbc_tcp_park(struct tnbc_tcp_conn *c, const struct iovec *iov,
			  size_t iov_count, size_t off, size_t got)
{
	if (c->have + got > c->cap) {
		uint8_t *b = realloc(c->buf, c->have + got);

		if (!b)
			return false;
		c->buf = b;
		c->cap = c->have + got;
	}
	tnbc_copy_from_iov(c->buf + c->have, iov, iov_count, off, got);
	c->have += got;
	c->slow = TNBC_TCP_SLOW_PACKETS;
	return true;
}

static ssize_t tnbc_tcp_rx_copy(struct tnbc_xrx *x, size_t off,
				const struct iovec *iov, size_t iov_count,
				size_t n)
{
	struct tnbc_tcp_rx *rx = (struct tnbc_tcp_rx *)x;
	size_t done = 0;

	if (off > x->len || n > x->len - off || rx->broken)
		return -FI_EINVAL;
	/* from the head in memory */
	if (off < x->head_len) {
		size_t m = x->head_len - off < n ? x->head_len - off : n;

		tnbc_copy_to_iov(iov, iov_count, 0, x->head + off, m);
		done = m;
		off += m;
	}
	if (done == n)
		return (ssize_t)n;
	/* then from the socket, in order, each byte once */
	if (off < x->head_len + rx->pos)
		return -FI_EINVAL;
	rx->copied = true;
	if (off > x->head_len + rx->pos &&
	    tnbc_tcp_skip(rx->c, off - x->head_len - rx->pos)) {
		rx->broken = true;
		return -FI_ECONNRESET;
	}
	rx->pos = off - x->head_len;
	/* Nothing of the packet taken from the socket yet, and the protocol
	 * able to take it back: a sender that stops holds this endpoint up
	 * TNBC_TCP_STALL_MS at most, not FI_TNBC_TCP_TIMEOUT_MS. */
	if (x->may_park && !rx->pos) {
		size_t got;
		int ret =
			tnbc_tcp_read_iov_by(rx->c, iov, iov_count, done,
					     n - done, TNBC_TCP_STALL_MS, &got);

		if (ret == -FI_EAGAIN &&
		    tnbc_tcp_park(rx->c, iov, iov_count, done, got)) {
			rx->parked = true;
			return -FI_EAGAIN;
		}
		if (ret == -FI_EAGAIN)
			ret = tnbc_tcp_read_iov(rx->c, iov, iov_count,
						done + got, n - done - got);
		if (ret) {
			rx->broken = true;
			return -FI_ECONNRESET;
		}
	} else if (tnbc_tcp_read_iov(rx->c, iov, iov_count, done, n - done)) {
		rx->broken = true;
		return -FI_ECONNRESET;
	}
	rx->pos += n - done;
	atomic_fetch_add_explicit(&rx->c->xep->xdom->placed_bytes, n - done,
				  memory_order_relaxed);
	return (ssize_t)n;
}

static struct tnbc_tcp_held *tnbc_tcp_hold(const struct tnbc_tcp_conn *c,
					   const uint8_t *data, size_t len)
{
	struct tnbc_tcp_held *h = malloc(sizeof(*h) + len);

	if (h) {
		h->next = NULL;
		h->from = c->id;
		h->conn = c->serial;
		h->len = (uint32_t)len;
		memcpy(h->data, data, len);
	}
	return h;
}

/* A record of c was taken whole: nothing of c waits for its rest. */
static inline void tnbc_tcp_consumed(struct tnbc_tcp_conn *c)
{
	atomic_store_explicit(&c->partial_ns, 0, memory_order_relaxed);
}

/* A connection's share of what the consumer holds: the endpoint's queue
 * room, as over shared memory. */
static size_t tnbc_tcp_share(void)
{
	return tnbc_env.rx_slots * tnbc_env.slot_size;
}

/* What c may hold before it is left unread: TNBC_TCP_UNREAD_SHARES of
 * the room, and, once its process was told to hold back, what it may
 * have had on its way then (its buffer, its socket's, ours), so that a
 * hold honoured leaves its answers readable. */
static size_t tnbc_tcp_unread_cap(const struct tnbc_tcp_conn *c)
{
	size_t cap = tnbc_tcp_share() * TNBC_TCP_UNREAD_SHARES;

	return c->held && c->told && c->unread_cap > cap ? c->unread_cap : cap;
}

/* Counts a held packet against its connection (by = +1) or gives its
 * room back (by = -1), leaving the connection unread past its share and
 * read again below it.  The consumer's. */
static void tnbc_tcp_hold_count(struct tnbc_xep *xep, uint64_t serial,
				size_t len, int by)
{
	struct tnbc_tcp_conn *c;

	pthread_mutex_lock(&xep->lock);
	for (c = xep->conns; c && c->serial != serial; c = c->next)
		;
	pthread_mutex_unlock(&xep->lock);
	if (!c)
		return; /* gone: nothing left to hold back */
	if (by > 0) {
		c->held_bytes += len;
	} else {
		c->held_bytes -= len < c->held_bytes ? len : c->held_bytes;
	}
	/* past its share its process is asked to stop; unread only past
	 * what is still on its way then (a hold honoured leaves answers
	 * alone on the stream) */
	if (!c->held && c->held_bytes >= tnbc_tcp_share()) {
		c->held = true;
		xep->hold_dirty = true;
		atomic_fetch_add(&xep->xdom->held, 1);
	} else if (c->held && c->held_bytes < tnbc_tcp_share() / 2) {
		c->held = false;
		xep->hold_dirty = true;
	}
	if (!c->paused && c->held_bytes >= tnbc_tcp_unread_cap(c)) {
		struct epoll_event ev = {.events = 0, .data.ptr = &c->ev};

		/* level-triggered: left in, it would say "ready" for ever */
		c->paused = true;
		atomic_fetch_add(&xep->npaused, 1);
		/* not read: what waits in it is no sender's fault */
		tnbc_tcp_consumed(c);
		epoll_ctl(xep->pfd, EPOLL_CTL_MOD, c->fd, &ev);
	} else if (c->paused && c->held_bytes < tnbc_tcp_unread_cap(c)) {
		struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
					 .data.ptr = &c->ev};

		c->paused = false;
		atomic_fetch_sub(&xep->npaused, 1);
		epoll_ctl(xep->pfd, EPOLL_CTL_MOD, c->fd, &ev);
		/* what came meanwhile is there to read */
		atomic_fetch_add(&xep->events, 1);
	}
}

static void tnbc_tcp_keep(struct tnbc_xep *xep, struct tnbc_tcp_held *h)
{
	*xep->kept_tail = h;
	xep->kept_tail = &h->next;
}

/* Counts a packet the protocol took or refused. */
static void tnbc_tcp_taken(struct tnbc_xep *xep, int verdict, int *taken)
{
	if (verdict == TNBC_RX_BAD)
		atomic_fetch_add(&xep->xdom->bad_pkts, 1);
	else
		(*taken)++;
}

/* Offers the replayed packets (left for later, then kept after a
 * rewind); returns false when one was left for later again. */
static bool tnbc_tcp_replay(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg,
			    int *budget, int *taken)
{
	while (xep->replay && *budget > 0) {
		struct tnbc_tcp_held *h = xep->replay;
		struct tnbc_xrx rx = {.head = h->data,
				      .head_len = h->len,
				      .len = h->len,
				      .from = &h->from,
				      .copy = tnbc_net_mem_copy};
		int v = fn(arg, &rx);

		if (v == TNBC_RX_LATER)
			return false;
		(*budget)--;
		xep->replay = h->next;
		h->next = NULL;
		if (v == TNBC_RX_KEEP) {
			tnbc_tcp_keep(xep, h);
			continue;
		}
		tnbc_tcp_taken(xep, v, taken);
		tnbc_tcp_hold_count(xep, h->conn, h->len, -1);
		free(h);
	}
	return true;
}

/* A lookup answered (struct tnbc_tcp_hello with TNBC_TCP_HELLO_LOOKUP):
 * the whole address, or, refused (flag lookup false: the asker holds no
 * key where we want one, or one where we want none), an empty answer.
 * The question is the connection's last: 1 says it is done with.  Until
 * the endpoint is named (ep_named is moments away) the connection closes
 * unanswered, and the asking side asks again. */
static int tnbc_tcp_answer(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			   bool refused)
{
	struct {
		struct tnbc_tcp_rec rec;
		struct tnbc_addr addr;
	} ans = {.rec = {.len = sizeof(ans.addr), .type = TNBC_TCP_IAM}};

	if (refused)
		ans.rec.len = 0;
	else if (!atomic_load_explicit(&xep->named, memory_order_acquire))
		return 1;
	else
		ans.addr = xep->whole;
	/* a fresh socket takes 72 bytes; one that does not is the asker's
	 * loss, and it asks again */
	if (send(c->fd, &ans, sizeof(ans.rec) + ans.rec.len,
		 MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		FI_INFO(&tnbc_prov, FI_LOG_EP_CTRL,
			"tcp: a lookup's answer not sent: %s\n",
			strerror(errno));
	return 1;
}

/* The MAC of one side of a handshake over the hello, the listener's
 * nonce and, for the connector's, the listener's MAC: bound to both
 * fresh nonces, so that nothing recorded proves anything again. */
static void tnbc_tcp_mac(const struct tnbc_xdom *xdom, const char *label,
			 const struct tnbc_tcp_hello *h, const uint8_t *nonce_l,
			 const uint8_t *mac_l, uint8_t out[TNBC_TCP_MAC_LEN])
{
	struct tnbc_hmac m;

	tnbc_hmac_init(&m, xdom->key, xdom->key_len);
	tnbc_hmac_update(&m, label, strlen(label) + 1);
	tnbc_hmac_update(&m, h, sizeof(*h));
	tnbc_hmac_update(&m, nonce_l, TNBC_TCP_NONCE_LEN);
	if (mac_l)
		tnbc_hmac_update(&m, mac_l, TNBC_TCP_MAC_LEN);
	tnbc_hmac_final(&m, out);
}

/* Whether two addresses are of one host. */
static bool tnbc_tcp_same_host(const struct tnbc_tcp_addr *a,
			       const struct tnbc_tcp_addr *b)
{
	return a->family == b->family &&
	       !memcmp(a->ip, b->ip, a->family == 6 ? 16 : 4);
}

/* The listener's half of a keyed handshake: a fresh nonce and the MAC
 * that proves the key, and the proof the connector must send back. */
static int tnbc_tcp_challenge(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			      const struct tnbc_tcp_hello *h)
{
	struct tnbc_xdom *xdom = xep->xdom;
	struct {
		struct tnbc_tcp_rec rec;
		struct tnbc_tcp_chal chal;
	} m = {.rec = {.len = sizeof(m.chal), .type = TNBC_TCP_CHAL}};

	if (tnbc_random(m.chal.nonce, sizeof(m.chal.nonce)))
		return -FI_EIO;
	tnbc_tcp_mac(xdom, TNBC_TCP_MAC_L, h, m.chal.nonce, NULL, m.chal.mac);
	tnbc_tcp_mac(xdom, TNBC_TCP_MAC_C, h, m.chal.nonce, m.chal.mac,
		     c->expect);
	/* a fresh socket takes 72 bytes */
	if (send(c->fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(m))
		return -FI_EIO;
	c->challenged = true;
	return 0;
}

/* The connection's handshake is over: packets may come. */
static void tnbc_tcp_proven(struct tnbc_xep *xep, struct tnbc_tcp_conn *c)
{
	pthread_mutex_lock(&xep->lock);
	c->proven = true;
	c->challenged = false;
	if (c->stranger) {
		c->stranger = false;
		atomic_fetch_sub(&xep->strangers, 1);
	}
	pthread_mutex_unlock(&xep->lock);
	if (c->id.kind && c->id_addr.family)
		tnbc_net_book_put(&xep->xdom->book, &c->id, &c->id_addr,
				  sizeof(c->id_addr));
}

/* Whether what this domain knows of where name listens (a peer of its
 * own, or an address the application gave) puts it on another host
 * than the connection comes from. */
static bool tnbc_tcp_elsewhere(struct tnbc_xdom *xdom,
			       const struct tnbc_name *name,
			       const struct tnbc_tcp_addr *from, bool local)
{
	struct tnbc_tcp_addr known;
	struct tnbc_xpeer *p;
	bool pinned = false, found;

	pthread_mutex_lock(&xdom->lock);
	p = tnbc_tcp_peer_find(xdom, name);
	if (p)
		known = p->addr;
	pthread_mutex_unlock(&xdom->lock);
	found = p != NULL;
	if (!found)
		found = tnbc_net_book_find(&xdom->book, name, &known,
					   sizeof(known), &pinned) &&
			pinned;
	/* a name known at the loopback is of this host */
	return found && !tnbc_tcp_same_host(&known, from) &&
	       !(local && tnbc_tcp_loopback(&known));
}

/* A hello: who the connection is from, checked against where it comes
 * from (no key) or challenged (a key).  0, or a negative fi_errno that
 * closes it; 1: a lookup answered, closes it. */
static int tnbc_tcp_hello_take(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			       const uint8_t *body)
{
	struct tnbc_xdom *xdom = xep->xdom;
	struct tnbc_tcp_hello h;
	bool keyed;

	memcpy(&h, body, sizeof(h));
	if (h.magic != TNBC_TCP_MAGIC || h.version != TNBC_TCP_VERSION) {
		atomic_fetch_add(&xdom->refused, 1);
		return -FI_EINVAL;
	}
	keyed = (h.flags & TNBC_TCP_HELLO_KEYED) != 0;
	if (keyed != (xdom->key_len != 0)) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
			"tcp: a connection %s auth_key refused\n",
			keyed ? "with an" : "without an");
		atomic_fetch_add(&xdom->refused, 1);
		if (h.flags & TNBC_TCP_HELLO_LOOKUP)
			return tnbc_tcp_answer(xep, c, true);
		return -FI_EACCES;
	}
	c->hello = true;
	if (h.flags & TNBC_TCP_HELLO_LOOKUP) {
		c->lookup = true;
		if (!keyed)
			return tnbc_tcp_answer(xep, c, false);
		return tnbc_tcp_challenge(xep, c, &h);
	}
	if (!tnbc_name_same(&h.to, &xep->name) ||
	    (h.from.kind != TNBC_NAME_PID && h.from.kind != TNBC_NAME_SVC) ||
	    (h.from_addr.family != 4 && h.from_addr.family != 6) ||
	    !h.from_addr.port) {
		atomic_fetch_add(&xdom->refused, 1);
		return -FI_EINVAL;
	}
	/* where it listens, as an introduction says */
	if (tnbc_tcp_any(&h.from_addr)) {
		uint16_t port = h.from_addr.port;

		h.from_addr = c->from;
		h.from_addr.port = port;
	}
	/* Without a key nothing proves a name: at least the host it says
	 * it listens on, and the one this domain knows it by, must be the
	 * one it connects from (a connector binds its socket to its
	 * listening address for this). */
	if (!keyed && (!tnbc_tcp_same_host(&h.from_addr, &c->from) ||
		       tnbc_tcp_elsewhere(xdom, &h.from, &c->from, c->local))) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
			"tcp: a connection naming an endpoint of another "
			"host refused\n");
		atomic_fetch_add(&xdom->refused, 1);
		return -FI_EACCES;
	}
	pthread_mutex_lock(&xep->lock);
	c->id = h.from;
	c->id_addr = h.from_addr;
	/* adopt looks at it, once proven */
	if (h.flags & TNBC_TCP_HELLO_TWO_WAY)
		c->back = h.from;
	pthread_mutex_unlock(&xep->lock);
	if (keyed)
		return tnbc_tcp_challenge(xep, c, &h);
	tnbc_tcp_proven(xep, c);
	return 0;
}

/* A record of a connection that is not a packet; 1 when the connection
 * has done its work and closes. */
/* A hold notice from c's process (struct tnbc_tcp_hold). */
static int tnbc_tcp_held_by(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			    const uint8_t *body)
{
	struct tnbc_tcp_hold h;
	struct tnbc_xpeer *p;

	memcpy(&h, body, sizeof(h));
	/* only the holding endpoint's own process says so */
	if (h.by.host != c->id.host || h.by.pid != c->id.pid)
		return -FI_EINVAL;
	pthread_mutex_lock(&xep->xdom->lock);
	p = tnbc_tcp_peer_find(xep->xdom, &h.by);
	if (p)
		atomic_store(&p->held, h.on != 0);
	pthread_mutex_unlock(&xep->xdom->lock);
	return 0;
}

static int tnbc_tcp_control(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			    const struct tnbc_tcp_rec *rec, const uint8_t *body)
{
	if (rec->type == TNBC_TCP_HELLO) {
		if (c->hello || rec->len != sizeof(struct tnbc_tcp_hello))
			return -FI_EINVAL;
		return tnbc_tcp_hello_take(xep, c, body);
	}
	if (rec->type == TNBC_TCP_PROOF) {
		struct tnbc_tcp_proof pr;

		if (!c->challenged || rec->len != sizeof(pr))
			return -FI_EINVAL;
		memcpy(&pr, body, sizeof(pr));
		if (!tnbc_mac_equal(pr.mac, c->expect, sizeof(pr.mac))) {
			FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
				"tcp: a connection that does not hold the "
				"auth_key refused\n");
			atomic_fetch_add(&xep->xdom->refused, 1);
			return -FI_EACCES;
		}
		tnbc_tcp_proven(xep, c);
		return c->lookup ? tnbc_tcp_answer(xep, c, false) : 0;
	}
	if (rec->type == TNBC_TCP_HOLD && c->proven &&
	    rec->len == sizeof(struct tnbc_tcp_hold))
		return tnbc_tcp_held_by(xep, c, body);
	if (rec->type == TNBC_TCP_INTRO && c->proven &&
	    rec->len == sizeof(struct tnbc_tcp_intro)) {
		struct tnbc_tcp_intro in;

		memcpy(&in, body, sizeof(in));
		/* A service we dialed by its number alone (its process
		 * unknown) introduces itself first on the connection: what
		 * listens where we dialed is the service. */
		if (c->dialed && c->id.kind == TNBC_NAME_SVC && !c->id.pid &&
		    in.src.kind == TNBC_NAME_SVC && in.src.uid == c->id.uid)
			c->id = in.src;
		/* another endpoint of the connection's process: nothing
		 * else is the connection's to say */
		if ((in.addr.family != 4 && in.addr.family != 6) ||
		    !in.addr.port || in.src.host != c->id.host ||
		    in.src.pid != c->id.pid ||
		    (in.src.kind != TNBC_NAME_PID &&
		     in.src.kind != TNBC_NAME_SVC))
			return -FI_EINVAL;
		/* a source on any address is reached where it connected
		 * from */
		if (tnbc_tcp_any(&in.addr)) {
			uint16_t port = in.addr.port;

			in.addr = c->from;
			in.addr.port = port;
		}
		/* without a key, only where it connects from (a service
		 * we reached at another of its host's addresses keeps the
		 * one we reached it at) */
		if (!xep->xdom->key_len &&
		    !tnbc_tcp_same_host(&in.addr, &c->from)) {
			atomic_fetch_add(&xep->xdom->refused, 1);
			return 0;
		}
		tnbc_net_book_put(&xep->xdom->book, &in.src, &in.addr,
				  sizeof(in.addr));
		/* the source dialed one way: a wait for it to dial a
		 * connection we could adopt would wait for nothing */
		if (!c->back.kind)
			tnbc_tcp_one_way(xep->xdom, &in.src);
		return 0;
	}
	return -FI_EINVAL;
}

/* A packet the protocol kept (TNBC_RX_KEEP) or left for later
 * (TNBC_RX_LATER), copied out of the stream: kept ones wait for a
 * rewind, one left for later is offered first next time.  Returns
 * whether polling stops here (left for later). */
static bool tnbc_tcp_set_aside(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			       struct tnbc_tcp_held *h, int verdict)
{
	tnbc_tcp_hold_count(xep, c->serial, h->len, 1);
	if (verdict == TNBC_RX_LATER) {
		h->next = xep->replay;
		xep->replay = h;
		c->more = true;
		return true;
	}
	tnbc_tcp_keep(xep, h);
	return false;
}

/* Polling c stops with what it has: where part of a record waits for
 * the rest, since when (the waker ends a connection whose record waits
 * past FI_TNBC_TCP_TIMEOUT_MS).  Returns taken. */
static int tnbc_tcp_partial(struct tnbc_tcp_conn *c, int taken)
{
	/* a connection left unread (paused) waits for us, not its sender:
	 * however long its receives take, it is never ended for it */
	if ((c->have == c->off && !c->skip_left) || c->paused)
		tnbc_tcp_consumed(c);
	else if (!atomic_load_explicit(&c->partial_ns, memory_order_relaxed))
		atomic_store_explicit(&c->partial_ns, tnbc_now_ns(),
				      memory_order_relaxed);
	return taken;
}

/* Takes records of one connection; returns how many packets were
 * consumed, or -1 when one was left for later (stop polling). */
static int tnbc_tcp_conn_poll(struct tnbc_xep *xep, struct tnbc_tcp_conn *c,
			      tnbc_rx_fn fn, void *arg, int budget)
{
	int taken = 0;

	c->more = false;
	c->drained = false;
	while (budget > 0 && !c->paused) {
		struct tnbc_tcp_rec rec;
		size_t avail = c->have - c->off, max = tnbc_tcp_rx_max();
		size_t span;
		ssize_t r;
		int v;

		if (c->skip_left) {
			r = tnbc_tcp_skip_some(c);
			if (r < 0)
				goto drop;
			if (!r)
				return tnbc_tcp_partial(c, taken);
			continue;
		}
		/* nothing more came since the socket was emptied: the next
		 * poll's look at the connections says when it does, a read
		 * now would only find nothing */
		if (!avail && c->drained)
			return taken;
		if (avail < sizeof(rec)) {
			r = tnbc_tcp_fill(c, sizeof(rec));
			if (r < 0)
				goto drop;
			if (!r) /* drained */
				return tnbc_tcp_partial(c, taken);
			continue;
		}
		memcpy(&rec, c->buf + c->off, sizeof(rec));
		/* a stranger says who it is first, in a record of the size
		 * that takes, and proves it next: it never makes us hold
		 * more than that */
		if (!c->proven &&
		    (c->challenged
			     ? rec.type != TNBC_TCP_PROOF ||
				       rec.len != sizeof(struct tnbc_tcp_proof)
			     : c->hello || rec.type != TNBC_TCP_HELLO ||
				       rec.len !=
					       sizeof(struct tnbc_tcp_hello)))
			goto bad;
		if (rec.len > max || (rec.type != TNBC_TCP_PKT &&
				      rec.len > sizeof(struct tnbc_tcp_hello)))
			goto bad;
		span = TNBC_TCP_SPAN(rec.len);
		if (rec.type != TNBC_TCP_PKT) {
			if (avail < sizeof(rec) + span) {
				r = tnbc_tcp_fill(c, sizeof(rec) + span);
				if (r < 0)
					goto drop;
				if (!r)
					return tnbc_tcp_partial(c, taken);
				continue;
			}
			v = tnbc_tcp_control(xep, c, &rec,
					     c->buf + c->off + sizeof(rec));
			if (v > 0)
				goto drop;
			if (v)
				goto bad;
			c->off += sizeof(rec) + span;
			tnbc_tcp_consumed(c);
			continue;
		}
		if (avail < sizeof(rec) + span) {
			/* head: bytes of the record here, hl of them the
			 * packet's (the rest may be padding) */
			size_t head = avail - sizeof(rec);
			size_t hl = head < rec.len ? head : rec.len;
			int inq = 0;

			/* a placed payload waits in the socket: offer the
			 * packet once its frame is here and the rest has
			 * begun to come, and read it into its place as it
			 * comes.  Waiting for all of it to be in the socket
			 * first, a receiver that polls saw a part and read
			 * the packet into the buffer (the else below): a
			 * 1 MiB stream copied every byte twice. */
			if ((rec.flags & TNBC_TCP_REC_PLACED) &&
			    rec.len >= TNBC_TCP_DIRECT_MIN &&
			    hl >= TNBC_XPKT_FRAME_MAX && !c->slow &&
			    !ioctl(c->fd, FIONREAD, &inq) && inq > 0) {
				struct tnbc_tcp_rx rx = {
					.rx = {.head = c->buf + c->off +
						       sizeof(rec),
					       .head_len = hl,
					       .len = rec.len,
					       .from = &c->id,
					       .copy = tnbc_tcp_rx_copy},
					.c = c};

				v = fn(arg, &rx.rx);
				if (rx.broken)
					goto drop;
				if (rx.parked && v == TNBC_RX_LATER) {
					/* its rest is read below as it
					 * comes, other connections meanwhile */
					continue;
				}
				if ((v == TNBC_RX_KEEP || v == TNBC_RX_LATER) &&
				    (rx.copied || rx.parked)) {
					/* the protocol broke its promise:
					 * the packet is gone */
					v = TNBC_RX_BAD;
				}
				if (v == TNBC_RX_KEEP || v == TNBC_RX_LATER) {
					/* Nothing of it taken from the socket:
					 * it stays in the buffer, read whole
					 * there as it comes (never waited for
					 * here), and offered again. */
					c->slow = TNBC_TCP_SLOW_PACKETS;
					continue;
				}
				/* what the protocol left of the record,
				 * padding included, is dropped as it
				 * comes (at the loop's top) */
				c->skip_left = span - head - rx.pos;
				c->off = c->have = 0;
				tnbc_tcp_consumed(c);
				budget--;
				tnbc_tcp_taken(xep, v, &taken);
				continue;
			}
			/* Not placed (or its frame not all here): read what
			 * came.  Waiting for the rest in the socket instead
			 * would deadlock once the socket's window closed,
			 * since the receiver reopens it only for a large
			 * read. */
			r = tnbc_tcp_fill(c, sizeof(rec) + span);
			if (r < 0)
				goto drop;
			if (!r)
				return tnbc_tcp_partial(c, taken);
			continue;
		}
		/* read whole after a stall: the next ones may be placed */
		if ((rec.flags & TNBC_TCP_REC_PLACED) && c->slow)
			c->slow--;
		{
			struct tnbc_xrx rx = {.head = c->buf + c->off +
						      sizeof(rec),
					      .head_len = rec.len,
					      .len = rec.len,
					      .from = &c->id,
					      .copy = tnbc_net_mem_copy};

			v = fn(arg, &rx);
		}
		if (v == TNBC_RX_KEEP || v == TNBC_RX_LATER) {
			struct tnbc_tcp_held *h = tnbc_tcp_hold(
				c, c->buf + c->off + sizeof(rec), rec.len);

			if (!h) {
				c->more = true;
				return taken; /* offered again next time */
			}
			c->off += sizeof(rec) + span;
			tnbc_tcp_consumed(c);
			if (tnbc_tcp_set_aside(xep, c, h, v))
				return -1;
			budget--;
			continue;
		}
		c->off += sizeof(rec) + span;
		tnbc_tcp_consumed(c);
		budget--;
		tnbc_tcp_taken(xep, v, &taken);
	}
	c->more = true;
	return taken;
bad:
	atomic_fetch_add(&xep->xdom->bad_pkts, 1);
	tnbc_tcp_conn_drop(xep, c, "malformed stream");
	return taken;
drop:
	tnbc_tcp_conn_drop(xep, c, NULL);
	return taken;
}

/* An endpoint with one connection is polled by reading it: asking the
 * kernel first (epoll_wait) and reading after cost a small message a
 * second system call, 1 to 2 us in a virtual machine, between its
 * arrival and its answer.  A read that finds nothing costs what the
 * question did.  The engine's sleep still asks (pending). */
static bool tnbc_tcp_lone(struct tnbc_xep *xep)
{
	return atomic_load_explicit(&xep->nconns, memory_order_relaxed) == 1 &&
	       !atomic_load_explicit(&xep->npaused, memory_order_relaxed);
}

/* Whether a connection has bytes to read now, as the kernel says (one
 * whose held packets fill its share is out of the set: it waits). */
static bool tnbc_tcp_ready(struct tnbc_xep *xep)
{
	struct epoll_event ev;

	return atomic_load_explicit(&xep->nconns, memory_order_relaxed) &&
	       epoll_wait(xep->pfd, &ev, 1, 0) > 0;
}

/* Tells each connection whose hold changed (up to 16 a call; a notice
 * that cannot go now goes at a later poll).  Connections stay in memory
 * until the domain closes (the grave). */
static void tnbc_tcp_tell_holds(struct tnbc_xep *xep)
{
	struct tnbc_tcp_conn *c, *todo[16];
	unsigned n = 0;

	xep->hold_dirty = false;
	pthread_mutex_lock(&xep->lock);
	for (c = xep->conns; c; c = c->next) {
		if (c->held == c->told || !c->proven)
			continue;
		if (n == 16) {
			xep->hold_dirty = true;
			break;
		}
		todo[n++] = c;
	}
	pthread_mutex_unlock(&xep->lock);
	for (unsigned i = 0; i < n; i++) {
		bool on = todo[i]->held;
		int ret = tnbc_tcp_notice(xep->xdom, &todo[i]->id, &xep->name,
					  on);

		if (ret == -FI_EAGAIN) {
			xep->hold_dirty = true;
			continue;
		}
		todo[i]->told = on; /* or it cannot be told: gone */
		if (on && !ret) {
			/* what it may have had on its way: its own buffer,
			 * and both kernels' */
			todo[i]->unread_cap = todo[i]->held_bytes +
					      TNBC_TCP_OUT_MAX +
					      xep->xdom->kernel_bufs;
			/* left unread before it was told: read on */
			tnbc_tcp_hold_count(xep, todo[i]->serial, 0, 1);
		}
	}
}

static int tnbc_tcp_poll(struct tnbc_xep *xep, tnbc_rx_fn fn, void *arg,
			 int budget)
{
	uint64_t ev = atomic_load(&xep->events);
	struct tnbc_tcp_conn *c;
	int taken = 0;
	bool more = false;

	xep->polling = true;
	if (!tnbc_tcp_replay(xep, fn, arg, &budget, &taken))
		goto out;
	/* a peer's connection is awaited: its hello must not wait for the
	 * waker to accept it */
	if (tnbc_tcp_awaited(xep->xdom)) {
		tnbc_tcp_accept(xep);
		ev = atomic_load(&xep->events);
	}
	if (ev == atomic_load_explicit(&xep->seen, memory_order_relaxed) &&
	    !xep->buffered &&
	    !atomic_exchange_explicit(&xep->ready_hint, false,
				      memory_order_relaxed) &&
	    !tnbc_tcp_lone(xep) && !tnbc_tcp_ready(xep))
		goto out;
	atomic_store_explicit(&xep->seen, ev, memory_order_relaxed);
	pthread_mutex_lock(&xep->lock);
	c = xep->conns;
	pthread_mutex_unlock(&xep->lock);
	while (c) {
		struct tnbc_tcp_conn *next;
		int n = 0;

		pthread_mutex_lock(&xep->lock);
		next = c->next;
		pthread_mutex_unlock(&xep->lock);
		if (budget > 0)
			n = tnbc_tcp_conn_poll(xep, c, fn, arg, budget);
		else
			c->more = true;
		if (n < 0) {
			more = true;
			break;
		}
		taken += n;
		budget -= n;
		/* c may be gone now (dropped): only its successor is used */
		c = next;
	}
	pthread_mutex_lock(&xep->lock);
	for (c = xep->conns; c; c = c->next)
		more |= c->more;
	pthread_mutex_unlock(&xep->lock);
	xep->buffered = more;
out:
	if (xep->hold_dirty)
		tnbc_tcp_tell_holds(xep);
	xep->polling = false;
	atomic_store_explicit(&xep->in_hand, xep->buffered || xep->replay,
			      memory_order_relaxed);
	return taken;
}

static void tnbc_tcp_rewind(struct tnbc_xep *xep)
{
	/* kept packets go before anything left for later: they are older */
	if (xep->kept) {
		*xep->kept_tail = xep->replay;
		xep->replay = xep->kept;
		xep->kept = NULL;
		xep->kept_tail = &xep->kept;
		atomic_store_explicit(&xep->in_hand, true,
				      memory_order_relaxed);
	}
}

static bool tnbc_tcp_pending(struct tnbc_xep *xep)
{
	/* a connection awaited may be there to accept */
	return xep->replay || xep->buffered || tnbc_tcp_awaited(xep->xdom) ||
	       atomic_load(&xep->events) != atomic_load(&xep->seen) ||
	       tnbc_tcp_ready(xep);
}

static void tnbc_tcp_look_mark(struct tnbc_xep *xep)
{
	xep->mark = atomic_load(&xep->events);
}

/* Every arrival kicks the engine: nothing waits unlooked but what the
 * consumer has not taken yet.  The consumer may have looked past the
 * mark since (seen grows on; the mark is set once per posted run): that
 * leaves nothing from before it, and asking the sockets again at every
 * post cost a small message more than half its round trip. */
static bool tnbc_tcp_unlooked(struct tnbc_xep *xep)
{
	return xep->replay || xep->buffered ||
	       (int64_t)(xep->mark - atomic_load(&xep->seen)) > 0;
}

static bool tnbc_tcp_stalled(struct tnbc_xep *xep)
{
	(void)xep; /* the rest of a packet arrives as an event of its own */
	return false;
}

static bool tnbc_tcp_idle(struct tnbc_xep *xep)
{
	struct epoll_event ev;

	if (atomic_load(&xep->events) != atomic_load(&xep->seen) ||
	    atomic_load_explicit(&xep->in_hand, memory_order_relaxed) ||
	    tnbc_tcp_awaited(xep->xdom))
		return false;
	/* the poll reads it: as cheap as asking */
	if (tnbc_tcp_lone(xep))
		return false;
	if (atomic_load_explicit(&xep->nconns, memory_order_relaxed) &&
	    epoll_wait(xep->pfd, &ev, 1, 0) > 0) {
		atomic_store_explicit(&xep->ready_hint, true,
				      memory_order_relaxed);
		return false;
	}
	return true;
}

/* What waits in a socket is unknown until read: read it.  While a
 * packet is offered the answer is no, so that the protocol takes it now
 * (buffered, or kept) rather than leave it for later: it is out of the
 * socket already, and leaving it would hold up the packets behind it. */
static bool tnbc_tcp_quiet(struct tnbc_xep *xep)
{
	return !xep->polling && !tnbc_tcp_pending(xep);
}

static ssize_t tnbc_tcp_pull(struct tnbc_xep *xep, struct tnbc_xpeer *peer,
			     const struct iovec *local, size_t local_count,
			     const struct tnbc_xrmem *remote,
			     size_t remote_count, struct tnbc_xread *rd)
{
	(void)xep;
	(void)rd;
	(void)peer;
	(void)local;
	(void)local_count;
	(void)remote;
	(void)remote_count;
	return -FI_ENOSYS; /* the peer streams it */
}

/* ------------------------------------------------------------------ */
/* While the engine sleeps                                              */

/* Called whether or not TCP is the domain's first transport: from now
 * until the engine wakes, data on any endpoint's connection kicks it.
 * Not for a nap beside a polling application thread, which reads the
 * sockets itself. */
static unsigned tnbc_tcp_sleep_begin(struct tnbc_xdom *xdom,
				     enum tnbc_sleep how)
{
	if (how != TNBC_SLEEP_NAP) {
		pthread_mutex_lock(&xdom->lock);
		for (struct tnbc_xep *e = xdom->eps; e; e = e->next) {
			struct epoll_event ev = {.events =
							 EPOLLIN | EPOLLONESHOT,
						 .data.ptr = &e->dev};

			/* data there already fires at once */
			epoll_ctl(xdom->epfd, EPOLL_CTL_MOD, e->pfd, &ev);
		}
		pthread_mutex_unlock(&xdom->lock);
	}
	return 0;
}

static void tnbc_tcp_app_mark(struct tnbc_xdom *xdom, bool active)
{
	tnbc_net_app_mark(&xdom->app, active);
}

static bool tnbc_tcp_app_active(struct tnbc_xdom *xdom)
{
	return tnbc_net_app_active(&xdom->app);
}

static void tnbc_tcp_set_window(struct tnbc_xdom *xdom, uint64_t ns)
{
	tnbc_net_set_window(&xdom->app, ns);
}

static void tnbc_tcp_stats(struct tnbc_xdom *xdom, struct tnbc_xport_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->bad_pkts = atomic_load(&xdom->bad_pkts);
	st->refused = atomic_load(&xdom->refused);
	st->placed_bytes = atomic_load(&xdom->placed_bytes);
	st->stream_writes = atomic_load(&xdom->writes);
	st->strangers = atomic_load(&xdom->strangers);
	st->held = atomic_load(&xdom->held);
}

const struct tnbc_xport_ops tnbc_tcp_ops = {
	.name = "tcp",
	.id = TNBC_XPORT_TCP,
	.flags = 0,
	.xaddr_off = TNBC_XADDR_TCP_OFF,
	.xaddr_len = TNBC_XADDR_TCP_LEN,
	.addr_parse = tnbc_tcp_addr_parse,
	.addr_str = tnbc_tcp_addr_str,
	.addr_scan = tnbc_tcp_addr_scan,
	.addr_sock = tnbc_tcp_addr_sock,
	.resolve = tnbc_tcp_resolve,
	.dom_open = tnbc_tcp_dom_open,
	.dom_close = tnbc_tcp_dom_close,
	.ep_open = tnbc_tcp_ep_open,
	.ep_close = tnbc_tcp_ep_close,
	.ep_named = tnbc_tcp_ep_named,
	.max_packet = tnbc_tcp_max_packet,
	.eager_max = tnbc_tcp_eager_max,
	.packet_limit = tnbc_tcp_packet_limit,
	.addr_known = tnbc_tcp_addr_known,
	.peer_get = tnbc_tcp_peer_get,
	.peer_alive = tnbc_tcp_peer_alive,
	.send = tnbc_tcp_send,
	.poll = tnbc_tcp_poll,
	.rewind = tnbc_tcp_rewind,
	.pending = tnbc_tcp_pending,
	.look_mark = tnbc_tcp_look_mark,
	.unlooked = tnbc_tcp_unlooked,
	.stalled = tnbc_tcp_stalled,
	.idle = tnbc_tcp_idle,
	.quiet = tnbc_tcp_quiet,
	.pull = tnbc_tcp_pull,
	.app_mark = tnbc_tcp_app_mark,
	.rx_posted = tnbc_net_rx_posted,
	.app_active = tnbc_tcp_app_active,
	.set_window = tnbc_tcp_set_window,
	.sleep_begin = tnbc_tcp_sleep_begin,
	.stats = tnbc_tcp_stats,
};
