/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The verbs transport's own definitions, shared by its files only
 * (xport/verbs/): its objects and the calls between its files; the
 * wire format of its connections is tnbc_verbs_proto.h.  tnbc_verbs_xport.c has
 * the design.
 */
#ifndef TNBC_VERBS_H
#define TNBC_VERBS_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "tnbc_base.h"
#include "tnbc_xport.h"
#include "../tnbc_hmac.h"
#include "../tnbc_net.h"
#include "tnbc_verbs_mr.h"
#include "tnbc_verbs_proto.h"

_Static_assert(TNBC_NET_MAC_LEN == TNBC_SHA256_LEN, "handshake MACs");

/* sends one peer may have in flight (its QP's send queue) */
#define TNBC_VERBS_PEER_SENDS 64
/* bytes a peer's messages may wait while its connection is made (or
 * its sends are short of buffers), then senders see -FI_EAGAIN */
#define TNBC_VERBS_BACKLOG_MAX (4u << 20)
/* a domain's registered send buffers */
#define TNBC_VERBS_SEND_BUFS 256
/* read requests a domain may have outstanding */
#define TNBC_VERBS_READ_WRS 256
/* receive buffers per endpoint, per FI_TNBC_RX_SLOTS */
#define TNBC_VERBS_RX_PER_SLOT 4
/* kept messages moved out of receive buffers, at most, per buffer */
#define TNBC_VERBS_SPILL_PER_BUF 4
/* bytes the device is asked to take inline */
#define TNBC_VERBS_INLINE 256
/* address and route resolution, each */
#define TNBC_VERBS_RESOLVE_MS 2000
/* receives a domain keeps posted for the hold notices that come back
 * on its connections (the notice SRQ) */
#define TNBC_VERBS_NOTICE_WRS 64
/* hold notices an endpoint may have in flight (its completion queue
 * has room for them) */
#define TNBC_VERBS_NOTICES_OUT 16
/* the work request id of a hold notice, sent or received: neither a
 * buffer's index nor a read's address */
#define TNBC_VERBS_WR_NOTICE UINT64_MAX

/* What an rdma_cm id's context names: the first member of each. */
enum tnbc_verbs_kind {
	TNBC_VERBS_K_LISTEN = 1, /* an endpoint's listening id */
	TNBC_VERBS_K_CONN, /* an accepted connection */
	TNBC_VERBS_K_PEER, /* a connection to a peer */
};

struct tnbc_verbs_obj {
	enum tnbc_verbs_kind kind;
};

/* An accepted connection: packets for one endpoint from one domain. */
struct tnbc_verbs_conn {
	struct tnbc_verbs_obj obj;
	struct tnbc_verbs_conn *next; /* xep->conns */
	struct tnbc_xep *xep;
	struct rdma_cm_id *id;
	uint32_t qpn;
	bool hello; /* a valid hello came */
	bool bad; /* refused: its messages are dropped, the waker ends it */
	/* on xdom->ending (xdom->lock): bad, not yet disconnected */
	bool ending;
	/* the connection manager saw it established (the waker's): a
	 * disconnect before that would break its queue pair without telling
	 * the peer */
	bool established;
	struct tnbc_verbs_conn *ending_next;
	bool gone; /* its QP is destroyed: freed when refs falls to 0 */
	unsigned refs; /* received messages that name it */
	struct tnbc_verbs_addr from; /* the connecting side's address */
	/* the process every packet must come from (its hello's "from") */
	struct tnbc_name who;
	uint8_t expect[TNBC_SHA256_LEN]; /* the hello's MAC, with a key */
	/* bytes and count of its kept messages moved out of receive
	 * buffers; whether the consumer holds it back, and what its sender
	 * was last told */
	size_t spilled, spilled_pkts;
	bool held, told;
	/* a notice is on its way back on the queue pair (xep->lock); the
	 * queue pair can take no more (it broke, or it is being destroyed) */
	bool notice_out, mute;
};

/* A received message, holding its receive buffer until released. */
struct tnbc_verbs_rxe {
	uint32_t buf;
	uint32_t len;
	uint32_t imm;
	uint32_t status; /* enum ibv_wc_status */
	struct tnbc_verbs_conn *conn; /* NULL: from no connection we know */
	/* a kept message moved out of its buffer (buf is back in the SRQ):
	 * its bytes */
	uint8_t *copy;
};

/* A queue of received messages; cap a power of two. */
struct tnbc_verbs_ring {
	struct tnbc_verbs_rxe *e;
	unsigned cap, head, n;
};

struct tnbc_xep {
	struct tnbc_verbs_obj obj; /* the listening id's */
	struct tnbc_xep *next; /* xdom->eps, or the grave */
	struct tnbc_xdom *xdom;
	struct tnbc_name name;
	struct tnbc_verbs_addr addr; /* where it listens, as peers reach it */
	struct rdma_cm_id *lid;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	uint8_t *bufs;
	size_t nbufs, bsize;
	/* the completion queue, the connections and both rings */
	pthread_mutex_t lock;
	struct tnbc_verbs_conn *conns;
	/* arrived, in order, not yet consumed; then kept ones */
	struct tnbc_verbs_ring stash, kept;
	bool closing;
	bool polling; /* packets are being offered */
	/* kept messages still in their buffers; bytes and count of those
	 * moved out (at most spill_max bytes, TNBC_VERBS_SPILL_PER_BUF per
	 * buffer); a connection's hold changed, to be told */
	size_t kept_bufs, spill_bytes, spill_max, nspilled;
	atomic_bool hold_dirty; /* read without the lock by every poll */
	unsigned notices_out; /* at most TNBC_VERBS_NOTICES_OUT */
	/* reads ended, done not yet called (xep->lock; looked at without
	 * it by every poll) */
	struct tnbc_verbs_read *_Atomic rdone;
	atomic_uint reads; /* reads in flight */
};

struct tnbc_xpeer {
	struct tnbc_xpeer_base base; /* first: the core reads it */
	struct tnbc_verbs_obj obj;
	struct tnbc_xpeer *next; /* xdom->peers */
	struct tnbc_xdom *xdom;
	struct tnbc_name name;
	struct tnbc_verbs_addr addr;
	pthread_mutex_t lock; /* all below but dead and inflight */
	struct rdma_cm_id *id;
	enum {
		TNBC_VERBS_IDLE,
		TNBC_VERBS_CONNECTING,
		TNBC_VERBS_UP,
	} state;
	bool hello_sent;
	/* the handshake: our request, and the hello's MAC (with a key) */
	struct tnbc_verbs_req hs_req;
	uint8_t hs_mac[TNBC_SHA256_LEN];
	/* messages sent before it was up, in order */
	struct tnbc_verbs_held *backlog, **backlog_tail;
	size_t backlog_bytes;
	/* all the backlog has is held back (TNBC_XPKT_HOLDS): answers need
	 * not wait behind it */
	bool parked;
	/* reads waiting for the connection, or for room in it, in order */
	struct tnbc_verbs_read *rwait, **rwait_tail;
	atomic_bool dead;
	/* the peer holds our messages back (TNBC_VERBS_HOLD, on the queue
	 * pair numbered qpn; 0 until it is made) */
	atomic_bool held;
	atomic_uint qpn;
	atomic_uint inflight; /* sends posted, not completed */
	unsigned max_send, max_inline;
	struct tnbc_net_intros intros;
};

/* An RDMA read in flight (pull), on xdom->reads while its work requests
 * are out (xdom->slock), then on its endpoint's rdone (xep->lock). */
struct tnbc_verbs_read {
	struct tnbc_verbs_read *next, *prev;
	/* NULL once its endpoint closed: freed when its requests are back */
	struct tnbc_xep *xep;
	struct tnbc_xread *rd;
	struct tnbc_xdom *xdom;
	struct tnbc_xpeer *peer;
	unsigned wrs; /* posted, not completed */
	ssize_t status; /* the bytes, or the first error */
	struct tnbc_verbs_read *wnext; /* peer->rwait */
	size_t nmr;
	struct tnbc_verbs_mr *mr[TNBC_PULL_IOV_MAX]; /* local buffers' */
	size_t lcount, rcount;
	struct iovec local[TNBC_PULL_IOV_MAX];
	struct tnbc_xrmem remote[TNBC_PULL_IOV_MAX];
};

/* Regions exposed to peers' reads (expose): their registrations. */
struct tnbc_verbs_exposed {
	size_t nmr;
	struct tnbc_verbs_mr *mr[];
};

/* A key handed out by expose: the rkey, marked so that 0 means none. */
#define TNBC_VERBS_KEY(rkey)   ((1ull << 32) | (rkey))
#define TNBC_VERBS_KEY_OK(key) (((key) >> 32) == 1)

/* A message that waits for its connection, copied. */
struct tnbc_verbs_held {
	struct tnbc_verbs_held *next;
	uint32_t imm;
	uint32_t len;
	bool holds; /* TNBC_XPKT_HOLDS */
	_Alignas(8) uint8_t data[];
};

struct tnbc_xdom {
	/* first: tnbc_net_app_mark and its kin read it (app_mark) */
	struct tnbc_net_app app;
	struct tnbc_xkick kick;
	uint8_t key[TNBC_AUTH_KEY_MAX];
	uint16_t key_len;
	/* rdma_get_devices' list, held so that its contexts stay open */
	struct ibv_context **devs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct tnbc_verbs_mrc *mrc; /* registrations of user buffers */
	struct tnbc_verbs_addr addr; /* the device's address */
	/* this host (tnbc_host_id): a peer's process here can be watched */
	uint64_t host;
	struct rdma_event_channel *cmch;
	struct ibv_comp_channel *cch;
	/* sends of every peer: completions give the buffers back; the
	 * notices the peers send back on our queue pairs come to scq too,
	 * through nsrq */
	struct ibv_cq *scq;
	struct ibv_srq *nsrq;
	atomic_uint held_peers; /* peers that hold us back */
	/* notice receives that could not be posted again, to post (slock) */
	unsigned nsrq_owed;
	struct ibv_mr *smr;
	uint8_t *sbufs;
	size_t sbsize;
	pthread_mutex_t slock; /* scq, sfree, sowner */
	uint32_t sfree[TNBC_VERBS_SEND_BUFS];
	unsigned nsfree;
	struct tnbc_xpeer *sowner[TNBC_VERBS_SEND_BUFS];
	struct tnbc_verbs_read *reads; /* in flight */
	/* RDMA reads one queue pair may have outstanding (both ends) */
	uint8_t rd_atom;
	/* read requests posted, not completed: with the send buffers, they
	 * bound what the send completion queue must hold */
	atomic_uint rwrs;
	int epfd, notefd;
	pthread_t waker;
	atomic_bool stop;
	pthread_mutex_t lock; /* eps, peers, grave */
	struct tnbc_xep *eps;
	struct tnbc_xpeer *peers;
	struct tnbc_net_book book;
	struct tnbc_xep *grave;
	/* connections consumers refused, for the waker to disconnect: a
	 * list of its own, since a busy consumer holds its endpoint's lock
	 * for long stretches */
	struct tnbc_verbs_conn *ending;
	_Atomic uint64_t bad_pkts, refused, spilled, held;
};

_Static_assert(offsetof(struct tnbc_xdom, app) == 0,
	       "tnbc_net_app_mark reads the domain's start");

/* tnbc_verbs_conn.c: addresses; a peer given up, a connection begun
 * (peer->lock held) */
void tnbc_verbs_sockaddr(const struct tnbc_verbs_addr *a,
			 struct sockaddr_in *sin);
void tnbc_verbs_from_sockaddr(const struct sockaddr *sa,
			      struct tnbc_verbs_addr *a);
bool tnbc_verbs_any(const struct tnbc_verbs_addr *a);
int tnbc_verbs_addr_parse(const char *node, const char *service, bool source,
			  uint8_t *xaddr);
int tnbc_verbs_addr_str(const uint8_t *xaddr, char *buf, size_t len);
int tnbc_verbs_addr_scan(const char *text, uint8_t *xaddr);
void tnbc_verbs_peer_dead(struct tnbc_xpeer *p, const char *why);
int tnbc_verbs_connect(struct tnbc_xpeer *p);

/* tnbc_verbs_rdma.c */
/* Takes back the send buffers of completed sends and ends the reads
 * that completed (wait: for the lock). */
void tnbc_verbs_reap(struct tnbc_xdom *xdom, bool wait);
/* Posts one receive for a hold notice to the domain's notice SRQ. */
int tnbc_verbs_notice_recv(struct tnbc_xdom *xdom);
void tnbc_verbs_read_free(struct tnbc_verbs_read *r);
bool tnbc_verbs_read_wc(struct tnbc_xdom *xdom, const struct ibv_wc *wc);
void tnbc_verbs_reads_go(struct tnbc_xpeer *p);
void tnbc_verbs_reads_end(struct tnbc_xep *xep);
ssize_t tnbc_verbs_pull(struct tnbc_xep *xep, struct tnbc_xpeer *p,
			const struct iovec *local, size_t lcount,
			const struct tnbc_xrmem *remote, size_t rcount,
			struct tnbc_xread *rd);
int tnbc_verbs_expose(struct tnbc_xpeer *p, const struct iovec *iov,
		      size_t count, uint64_t *keys, void **reg);
void tnbc_verbs_unexpose(struct tnbc_xpeer *p, void *reg);

#endif /* TNBC_VERBS_H */
