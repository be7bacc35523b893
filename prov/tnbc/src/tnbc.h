/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * tnbc: a libfabric provider with a software progress engine ("soft NIC").
 *
 * Layout
 * ------
 * Objects follow libfabric's hierarchy: fabric > domain > {av, cq, cntr,
 * mr, ep}.  Each domain owns its transports (FI_TNBC_XPORTS; a struct
 * tnbc_xdom each, see tnbc_xport.h) and one progress engine.  Each file
 * calls only those on the lines below its own:
 *
 *   tnbc_init.c (entry point), tnbc_fabric.c, tnbc_domain.c, tnbc_ep.c
 *   coll/ (collectives as triggered schedules), tnbc_*_ops.c (entry
 *     points), tnbc_cq.c and tnbc_cntr.c (the application's reads, waits)
 *   tnbc_progress.c (the engine), tnbc_trigger.c (runs released work)
 *   tnbc_msg.c (matching, eager, rendezvous; every packet's dispatch)
 *   tnbc_rma.c (RMA and atomics)
 *   tnbc_xfer.c (transfers, id tables, the control and transmit queues)
 *   tnbc_comp.c (completion writing), tnbc_trig_heap.c (work waiting on
 *     counters), tnbc_av.c (above tnbc_av_set.c), tnbc_mr.c, tnbc_link.c,
 *     tnbc_addr.c
 *   xport/ (shm, tcp, verbs, loop behind tnbc_xport.h), tnbc_xports.c
 *   tnbc_param.c, tnbc_frame.c, tnbc_alu.c, tnbc_util.c
 *
 * The engine's wake-ups (tnbc_wake.h) are inlines, so whatever queues
 * work wakes it without calling up.  The protocol never sees transport
 * internals.  docs/provider-design.md says why it is built so.
 *
 * The lock order is tnbc_lock.h's, with the endpoint lock's calls.
 */
#ifndef TNBC_H
#define TNBC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_trigger.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "rdma/fi_ext_tnbc.h"
#include "tnbc_base.h"
#include "tnbc_engine.h"
#include "tnbc_proto.h"
#include "tnbc_xport.h"

#define TNBC_PROV_NAME	  FI_TNBC_PROV_NAME
#define TNBC_FI_VERSION	  FI_VERSION(1, 17)
#define TNBC_PROV_VERSION FI_VERSION(FI_TNBC_MAJOR, FI_TNBC_MINOR)
#define TNBC_FABRIC_NAME  "tnbc"
#define TNBC_DOMAIN_NAME  "tnbc" /* it holds every FI_TNBC_XPORTS names */

#define TNBC_IOV_LIMIT 8
/* fresh names an endpoint tries when one is taken */
#define TNBC_EP_NAME_TRIES 16
/* packets one look at a receive queue takes at most */
#define TNBC_RX_POLL_BUDGET 64
/* Rendezvous reads one poll pass gathers before it makes them. */
#define TNBC_PULL_BATCH	  32
#define TNBC_MAX_MSG_SIZE ((size_t)1 << 40)
#define TNBC_CQ_DATA_SIZE 8
#define TNBC_DEF_CQ_SIZE  1024
/* first size of a CQ's application queue (it grows) */
#define TNBC_CQ_APP_QUEUE 64
/* the most entries a CQ's ring starts with, whatever its size asks */
#define TNBC_CQ_START_MAX   (1u << 20)
#define TNBC_DEF_QUEUE_SIZE 65536

/* what each entry point takes, FI_TRIGGER routed before these */
#define TNBC_RMA_FLAGS                                                         \
	(FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA | FI_INJECT_COMPLETE |  \
	 FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_FENCE | FI_MORE |    \
	 FI_TRIGGER | TNBC_NO_COMPLETION | TNBC_DEFERRED)
#define TNBC_SEND_FLAGS                                                        \
	(FI_REMOTE_CQ_DATA | FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE |  \
	 FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_MORE | FI_FENCE)
#define TNBC_RECV_FLAGS	 (FI_COMPLETION | FI_MORE)
#define TNBC_TRECV_FLAGS (TNBC_RECV_FLAGS | FI_PEEK | FI_CLAIM | FI_DISCARD)

/* Internal op flags, above every FI_* op flag. */
/* A schedule's receive that knows its message's length: a shorter one
 * fails it too (tnbc_report_rx). */
#define TNBC_EXACT (1ULL << 60)
/* The call (fi_inject*) generates no completion. */
#define TNBC_NO_COMPLETION (1ULL << 61)
/* Deferred work (fi_trigger(3)): no EP completion or EP counter update
 * unless FI_COMPLETION is set; the completion counter is bumped. */
#define TNBC_DEFERRED (1ULL << 62)
/* A step of a collective schedule: it reports only to its completion
 * counter (errors too), never to the endpoint's CQs or counters. */
#define TNBC_INTERNAL (1ULL << 63)

/* ------------------------------------------------------------------ */

struct tnbc_fabric {
	struct fid_fabric fabric_fid;
	atomic_int ref;
};

#define TNBC_MR_HASH 1024

/* The soft NIC's trigger unit (tnbc_trigger.c): requests whose
 * threshold was met wait on ready until one thread starts them, in the
 * order they were released.  The waiting requests themselves live in
 * their counters' heaps. */
struct tnbc_trig_unit {
	pthread_mutex_t lock; /* ready */
	struct tnbc_list ready;
	atomic_size_t nready;
	atomic_int running; /* one thread starts ready work at a time */
};

/* One of a domain's transports. */
struct tnbc_xslot {
	const struct tnbc_xport_ops *ops;
	struct tnbc_xdom *xdom;
};

/* An endpoint's end of one of its domain's transports. */
struct tnbc_ep_xport {
	const struct tnbc_xport_ops *ops; /* domain->xp[i].ops */
	struct tnbc_xep *xep;
};

struct tnbc_domain {
	struct fid_domain domain_fid;
	struct tnbc_fabric *fabric;
	atomic_int ref;
	enum fi_threading threading;
	uint64_t mr_mode;
	/* the addresses its AVs take and give (fi_getinfo(3)) */
	uint32_t addr_format;
	/* fi_domain(3)'s auth_key: network peers must present the same */
	uint8_t auth_key[TNBC_AUTH_KEY_MAX];
	size_t auth_key_size;

	/* The transports, in the order a peer's is chosen (tnbc_av_peer);
	 * the first, xops and xdom, tells whether an application polls,
	 * and the engine sleeps on its doorbell if it has one. */
	struct tnbc_xslot xp[TNBC_XPORTS_MAX];
	unsigned nxp;
	uint16_t xmask; /* TNBC_XPORT_BIT of each */
	bool link; /* one reaches other hosts: joined the link board */
	const struct tnbc_xport_ops *xops;
	struct tnbc_xdom *xdom;

	pthread_rwlock_t ep_lock;
	struct tnbc_list ep_list;
	size_t ep_count;

	atomic_uint_fast64_t next_mr_key;
	struct tnbc_engine engine;
	struct tnbc_list prov_entry; /* tnbc_prov_track */

	/* memory regions by key, for incoming RMA and atomics */
	pthread_rwlock_t mr_lock;
	pthread_mutex_t mr_xlock; /* tnbc_mr.xexp */
	struct tnbc_mr *mr_hash[TNBC_MR_HASH];
	/* serialises target-side atomics of all endpoints of the domain */
	pthread_mutex_t atomic_lock;

	/* the counters triggered work may name: see the lock order above */
	pthread_mutex_t cntr_lock; /* cntr_list */
	struct tnbc_list cntr_list;
	struct tnbc_trig_unit tu;
};

struct tnbc_av_entry {
	struct tnbc_name name;
	/* where the network transports reach it (struct tnbc_addr) */
	uint8_t xaddr[TNBC_XADDR_LEN];
	struct tnbc_xpeer *peer; /* resolved lazily on first send */
	atomic_bool valid;
};

#define TNBC_AV_CHUNK	   1024
#define TNBC_AV_MAX_CHUNKS 4096

struct tnbc_av {
	struct fid_av av_fid;
	struct tnbc_domain *domain;
	atomic_int ref;
	enum fi_av_type type;
	size_t addrlen;
	pthread_mutex_t lock;
	struct tnbc_av_entry *chunks[TNBC_AV_MAX_CHUNKS];
	atomic_size_t count;
	/* open-addressed hash: name -> index + 1 (0 = empty), for FI_SOURCE */
	size_t *hash;
	size_t hash_size;
	/* changes with every insert and remove: what a lookup answered
	 * holds while it has not changed */
	atomic_uint_fast64_t gen;
};

/* The last name an endpoint looked up, and what the AV answered. */
struct tnbc_av_memo {
	struct tnbc_name name;
	fi_addr_t addr;
	uint64_t gen; /* av->gen then; 0: empty */
};

struct tnbc_trig;

/* A counter: what completions count and triggered work waits on.  A
 * schedule makes its own by the dozen (tnbc_cntr_init: no fid, no
 * condition variable); an application's fid_cntr wraps one in struct
 * tnbc_cntr_user, which adds what blocked waiters need. */
struct tnbc_cntr {
	struct tnbc_domain *domain;
	atomic_int ref;
	atomic_uint_fast64_t cnt;
	atomic_uint_fast64_t err;
	/* provider threads inside tnbc_cntr_bump (close waits for them) */
	atomic_int changing;
	pthread_mutex_t lock; /* the heap, and a user counter's condition */
	struct tnbc_cntr_user *user; /* NULL: the provider's own */
	/* Triggered work waiting on this counter: a binary min-heap by
	 * (threshold, submission order).  heap_len is atomic so that an
	 * increment can skip the lock when nothing waits (see
	 * tnbc_trig_check for why that cannot miss a request). */
	struct tnbc_trig **heap;
	size_t heap_cap;
	atomic_size_t heap_len;
	/* The lowest threshold in the heap, written under lock with
	 * heap_len (0 before the first push: look under the lock), so that
	 * an increment that releases nothing skips the lock too. */
	atomic_uint_fast64_t heap_min;
	uint64_t trig_seq; /* submission order, under lock */
	/* the first few: a schedule's counters hold a handful of requests
	 * for a few microseconds, a malloc and a free each time */
	struct tnbc_trig *heap_inline[8];
};

struct tnbc_cntr_user {
	struct fid_cntr cntr_fid;
	struct tnbc_cntr c;
	enum fi_wait_obj wait_obj;
	pthread_cond_t cond; /* with c.lock */
	atomic_int waiters;
	/* what the blocked waiters wait for (tnbc_cntr_signal) */
	atomic_uint_fast64_t wait_min;
	atomic_uint_fast64_t wait_err;
	struct tnbc_list dom_entry;
};

/* The counter behind an application's fid_cntr (fclass checked by the
 * caller). */
static inline struct tnbc_cntr *tnbc_cntr_fid(struct fid *fid)
{
	return &tnbc_container_of(fid, struct tnbc_cntr_user, cntr_fid.fid)->c;
}

/* fi_atomic, fi_fetch_atomic, fi_compare_atomic */
enum tnbc_atomic_kind {
	TNBC_ATOMIC_PLAIN,
	TNBC_ATOMIC_FETCH,
	TNBC_ATOMIC_COMPARE,
};

/* Operations waiting for a peer's answer, looked up by the id carried
 * in hdr.msg_id: generation << 32 | slot.  A slot's generation is drawn
 * afresh each time it is taken (from a secret seed, never 0 and never
 * the one before), so that an answer forged to a transfer has one
 * chance in 2^32 of naming it. */
struct tnbc_id_table {
	struct tnbc_xfer **slot;
	uint32_t *gen;
	uint64_t seed, draws;
	size_t size;
	size_t used;
	size_t hint; /* where to look for a free slot first */
	/* the domain's count of operations waiting on a peer (engine's
	 * peer_waits), kept with used */
	atomic_int *waits;
};

/* The first members of an endpoint and of each alias of it
 * (fi_ep_alias): entry points reach the endpoint and the op flags in
 * force through them, whichever fid they were called on. */
struct tnbc_ep_handle {
	struct fid_ep ep_fid;
	struct tnbc_ep *ep;
	uint64_t tx_op_flags, rx_op_flags;
};

#define TNBC_EP(fid)	 (((struct tnbc_ep_handle *)(fid))->ep)
#define TNBC_HANDLE(fid) ((struct tnbc_ep_handle *)(fid))

struct tnbc_ep {
	union {
		struct tnbc_ep_handle h;
		struct { /* the same members, by their own names */
			struct fid_ep ep_fid;
			struct tnbc_ep *self;
			uint64_t tx_op_flags, rx_op_flags;
		};
	};
	struct tnbc_domain *domain;
	atomic_int ref;
	struct fi_info *info;
	struct tnbc_list dom_entry;
	pthread_mutex_t lock;
#ifdef TNBC_DEBUG
	/* the thread that holds lock (pthread_self), 0 when free: what
	 * tnbc_ep_assert_locked checks */
	atomic_ulong lock_owner;
#endif
	bool enabled;
	long svc;

	struct tnbc_av *av;
	struct tnbc_cq *tx_cq, *rx_cq;
	struct tnbc_cntr *tx_cntr, *rx_cntr;
	struct tnbc_cntr *rd_cntr, *wr_cntr; /* FI_READ, FI_WRITE */
	struct tnbc_cntr *rrd_cntr, *rwr_cntr; /* FI_REMOTE_READ/WRITE */
	bool tx_selective, rx_selective;

	struct tnbc_name name;
	/* its network transports' addresses: with name, what fi_getname
	 * gives (struct tnbc_addr) */
	uint8_t xaddr[TNBC_XADDR_LEN];

	struct tnbc_list rx_msg, rx_tagged; /* posted receives */
	struct tnbc_list unexp_msg, unexp_tagged;
	/* the collectives' own match space: tags of their own, which no
	 * application receive can take (TNBC_HDR_COLL) */
	struct tnbc_list rx_coll, unexp_coll;
	struct tnbc_eq *eq; /* FI_JOIN_COMPLETE goes here */
	struct tnbc_list groups; /* joined (struct tnbc_mc), under lock */
	struct tnbc_list coll_joins; /* memberships joined, and how often */
	struct tnbc_list tx_queue; /* sends waiting for queue space */
	/* entries on tx_queue, bounded by tx_attr->size; changed under
	 * the lock, read without it by a sender looking for an empty queue
	 * (a queued send leaves the count once the transport has it) */
	atomic_size_t tx_queued;
	size_t ux_bytes; /* held by unexp_msg and unexp_tagged */
	size_t ux_kept; /* messages left in the transport's queue */
	struct tnbc_list ctrl_queue; /* ACK/CTS waiting for queue space */
	struct tnbc_list stream_rx; /* receives fed by DATA packets */
	/* rendezvous reads a transport finishes later (struct tnbc_rread) */
	struct tnbc_list reads;
	struct tnbc_id_table rndv;
	struct tnbc_id_table rma_ids; /* RMA/atomics awaiting responses */
	/* a target answered a direct request with FI_ENOSYS: this
	 * endpoint's RMA goes as chunks from then on */
	bool rma_nodirect;
	atomic_uint prio; /* for operations posted from now on */
	uint64_t next_token;
	uint64_t rx_matches; /* arrivals that found a posted receive */
	/* Receives on rx_msg and rx_tagged, and whether the transport
	 * counts this endpoint among those with some (xops->rx_posted):
	 * marked on the first post, cleared only by the engine before it
	 * sleeps (tnbc_ep_rx_settle).  A mark left behind while none is
	 * posted only wakes the engine for an eager message it need not
	 * see; taking it off and back on for every message cost two
	 * locked instructions on a line every sender reads.  Written under
	 * the lock, read by the engine without it. */
	atomic_size_t rx_nposted;
	atomic_bool rx_marked;
	/* receives that completed, kept for the next ones (a malloc and a
	 * free per message are a fifth of a small message's cost) */
	struct tnbc_xfer *xfer_free;
	unsigned xfer_nfree;
	uint64_t peer_check_ns; /* last liveness check of waiting peers */
	unsigned peer_check_polls;
	struct tnbc_av_memo src_memo; /* sources of arrivals */
	/* Queued sends or answers, reads put off to the end of a poll
	 * pass, or operations waiting on a peer: set
	 * under the lock when one is added, recomputed by progress.  While
	 * it is clear and the transport has nothing to offer, a poll need
	 * not take the lock (two locked instructions on every empty poll
	 * of an application's loop). */
	atomic_bool work;
	/* Rendezvous reads matched during a poll pass (tnbc_rx_ctx.batch):
	 * made once the pass ends, those from one peer in as few calls as
	 * possible (each call costs a system call and a walk of the peer's
	 * page tables). */
	size_t npulls;
	bool pulls_held; /* left to the next pass once (tnbc_ep_progress) */
	struct tnbc_pull *pulls; /* TNBC_PULL_BATCH, allocated on first use */
	unsigned nxp; /* domain->nxp */
	struct tnbc_ep_xport xp[TNBC_XPORTS_MAX];
};

/* ------------------------------------------------------------------ */
/* Cross-object helpers.                                                */

int tnbc_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		     void *context);
int tnbc_domain_open(struct fid_fabric *fabric, struct fi_info *info,
		     struct fid_domain **domain, void *context);
int tnbc_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		 struct fid_cq **cq, void *context);
int tnbc_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		   struct fid_cntr **cntr, void *context);
int tnbc_ep_open(struct fid_domain *domain, struct fi_info *info,
		 struct fid_ep **ep, void *context);

/* init: domains the provider stops at fi_fini */
void tnbc_prov_track(struct tnbc_domain *dom, bool add);
/* param: defines and reads every FI_TNBC_* parameter into tnbc_env */
void tnbc_param_read(void);

/* av */
/* The entry of addr, NULL if none: lock-free, every send asks it. */
static inline struct tnbc_av_entry *tnbc_av_get(struct tnbc_av *av,
						fi_addr_t addr)
{
	struct tnbc_av_entry *e;

	if (addr >= atomic_load_explicit(&av->count, memory_order_acquire))
		return NULL;
	e = &av->chunks[addr / TNBC_AV_CHUNK][addr % TNBC_AV_CHUNK];
	return atomic_load_explicit(&e->valid, memory_order_acquire) ? e : NULL;
}

/* cq / cntr objects */
bool tnbc_cq_has_entries(struct tnbc_cq *cq);
/* A provider counter (no fid) and its end: fini waits for the work and
 * references it still has to go.  Neither holds the domain: the owner
 * does (a schedule through its endpoint), once for all its counters. */
int tnbc_cntr_init(struct tnbc_cntr *cntr, struct tnbc_domain *dom);
void tnbc_cntr_fini(struct tnbc_cntr *cntr);
/* fini in two halves, for a counter kept for reuse: quiesce waits for
 * its users and frees its heap, reuse makes it as new, lock and all */
void tnbc_cntr_quiesce(struct tnbc_cntr *cntr);
void tnbc_cntr_reuse(struct tnbc_cntr *cntr, struct tnbc_domain *dom);

/* Something was queued or now waits on a peer; ep->lock held. */
static inline void tnbc_ep_mark_work(struct tnbc_ep *ep)
{
	atomic_store_explicit(&ep->work, true, memory_order_relaxed);
}

/* A receive went onto rx_msg or rx_tagged (add: true when that marked
 * the endpoint) or left it.  Lock held. */
bool tnbc_ep_rx_add(struct tnbc_ep *ep);
static inline void tnbc_ep_rx_del(struct tnbc_ep *ep)
{
	atomic_store_explicit(
		&ep->rx_nposted,
		atomic_load_explicit(&ep->rx_nposted, memory_order_relaxed) - 1,
		memory_order_relaxed);
}
/* Takes the endpoint's mark off if no receive is posted.  Lock held. */
void tnbc_ep_rx_settle(struct tnbc_ep *ep);
static inline bool tnbc_ep_rx_idle(struct tnbc_ep *ep)
{
	return tnbc_list_empty(&ep->rx_msg) &&
	       tnbc_list_empty(&ep->rx_tagged) && tnbc_list_empty(&ep->rx_coll);
}

#endif /* TNBC_H */
