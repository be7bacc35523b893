/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_ext_tnbc.h: the public extension interface of the tnbc provider.
 *
 * Applications reach these through fi_open_ops() on a tnbc domain.  The
 * structures carry their own size so that later versions can grow them
 * without breaking binaries built against this one.  See fi_tnbc(7).
 */
#ifndef FI_EXT_TNBC_H
#define FI_EXT_TNBC_H

#include <stdint.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_trigger.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FI_TNBC_PROV_NAME "tnbc"
#define FI_TNBC_MAJOR	  0
#define FI_TNBC_MINOR	  1

/* Provider-specific error codes and options. */
#define FI_PROV_SPECIFIC_TNBC (0x7bc << 16)

/* fi_open_ops(&domain->fid, FI_TNBC_DOMAIN_OPS_1, 0, &ops, NULL) */
#define FI_TNBC_DOMAIN_OPS_1 "tnbc_domain_ops_1"

/*
 * Counters kept by the domain's progress engine (the "soft NIC").  They
 * let a test or a tool see who moved the data: the engine thread, or an
 * application thread that happened to call in.
 */
struct fi_tnbc_engine_stats {
	uint64_t size; /* set by the caller to sizeof(struct ...) */
	uint64_t engine_pkts; /* packets the engine thread handled */
	uint64_t app_pkts; /* packets handled inside application calls */
	uint64_t engine_sleeps; /* times the engine went to sleep */
	uint64_t engine_wakeups; /* times a peer or a call woke it */
	uint64_t rndv_pull; /* rendezvous moved by single-copy read */
	uint64_t rndv_stream; /* rendezvous moved through bounce buffers */
	int32_t engine_cpu; /* CPU the engine last ran on, -1 if none */
	int32_t engine_running; /* 1 while the engine thread exists */
	/* triggered operations and deferred work (fi_trigger(3)) */
	uint64_t trig_queued; /* requests accepted */
	uint64_t trig_fired; /* requests whose threshold was met */
	uint64_t trig_canceled; /* removed by cancel or flush */
	uint64_t trig_pending; /* queued now, not fired yet */
	/* heap levels walked by all trigger queue insertions and removals:
	 * divided by trig_queued + trig_fired it shows the O(log n) cost */
	uint64_t trig_heap_steps;
	uint64_t trig_fired_by_engine; /* fired by the engine thread */
	/* what peers sent that was refused, dropped or held back
	 * (fi_tnbc(7), SECURITY); present when size covers them */
	uint64_t bad_pkts; /* malformed packets dropped */
	uint64_t stray_pkts; /* answers that fit no transfer, dropped */
	uint64_t dead_cells; /* queue cells of senders that died writing */
	uint64_t refused_peers; /* regions of untrusted owners not mapped */
	uint64_t unexp_held; /* messages left queued: FI_TNBC_UNEXP_MAX */
	/* packets (a collective's contributions and results) that came
	 * through a shared-memory slot rather than the queue
	 * (FI_TNBC_COLL_SLOTS); present when size covers it */
	uint64_t slot_pkts;
	/* RMA reads whose data moved by one single-copy read instead of
	 * packets (fi_tnbc(7)); present when size covers it */
	uint64_t rma_direct;
	/* payload bytes a stream transport (TCP) read from its socket
	 * straight into their place (a receive's buffers, or one
	 * unexpected buffer), not through its own buffer first; present
	 * when size covers it */
	uint64_t placed_bytes;
	/* writes a stream transport (TCP) made to its sockets: a large
	 * packet takes one per segment's worth (fi_tnbc(7)); present when
	 * size covers it */
	uint64_t stream_writes;
	/* packets that named a source their connection does not come
	 * from (a network transport binds a connection to one process at
	 * its handshake), dropped; present when size covers it */
	uint64_t forged_pkts;
	/* connections closed before they proved who they are: past the
	 * hello deadline, or pushed out by FI_TNBC_TCP_STRANGERS_MAX
	 * (fi_tnbc(7), SECURITY); present when size covers it */
	uint64_t strangers_closed;
	/* messages nobody had asked for yet, moved out of a receive queue
	 * every sender shares (shared memory's, verbs') into the
	 * receiver's memory so that one sender's cannot fill it for the
	 * others, and times a sender (over TCP and verbs, a connection)
	 * was held back for its held messages (fi_tnbc(7), SECURITY);
	 * present when size covers them */
	uint64_t spilled_pkts;
	uint64_t senders_held;
	/* domains of this process the domain's engine thread serves (this
	 * one among them; 0: no engine thread): one thread serves every
	 * domain whose doorbell is shared memory's (FI_TNBC_ENGINE_SHARED);
	 * present when size covers it */
	uint64_t engine_domains;
	/* transfers to other hosts this process held back while another
	 * process of its host had one of a higher priority queued, and
	 * holds that ran out FI_TNBC_LINK_HOLD_MS (FI_TNBC_LINK_SHARE);
	 * process-wide, present when size covers them */
	uint64_t link_holds;
	uint64_t link_overruns;
	/* synchronisation packets this domain sent: a rendezvous's RTS,
	 * CTS and ACK, and the ready notes of an LSS alltoall (fi_tnbc(7),
	 * Collectives); present when size covers it */
	uint64_t sync_pkts;
};

struct fi_tnbc_ops_domain {
	size_t size; /* sizeof(struct fi_tnbc_ops_domain) */
	int (*engine_stats)(struct fid_domain *domain,
			    struct fi_tnbc_engine_stats *stats);
	/* The calling thread stops driving progress: it posted work and
	 * goes off to compute or sleep.  While application threads poll,
	 * the engine leaves progress to them and naps, for up to 16 of
	 * FI_TNBC_APP_WINDOW_US, and peers do not wake it; after this call
	 * the next packet for this domain wakes it, and it is woken now if
	 * work already waits (a system call).  A library that posts
	 * non-blocking work on the application's behalf (the MPI glue)
	 * calls it as it returns, and when its last one completes.
	 * Returns 1 when work waited and the engine was woken for it (on
	 * a host whose cores the application's threads take, a thread
	 * that then spins in another library starves it: yield), 0 when
	 * none did.  Present when size covers it. */
	int (*handoff)(struct fid_domain *domain);
	/* on != 0: triggered work the calling thread makes ready from now
	 * on (the first steps of a collective it posts, among them copies
	 * of its payload) is left to the engine, woken for it, instead of
	 * run in the posting call; 0: run in the call again, the default.
	 * For a post the caller will not wait for at once: the call
	 * returns in the time it takes to build the work.  Per thread;
	 * no effect without an engine thread.  Present when size covers
	 * it. */
	int (*defer)(struct fid_domain *domain, int on);
};

/*
 * Transmit priority (T-NBC, seed 000 section 5.2).
 *
 * fi_open_ops(&ep->fid, FI_TNBC_EP_OPS_1, 0, &ops, NULL) gives an
 * endpoint's extension operations.  set_priority() sets the priority of
 * the operations the endpoint posts afterwards (sends, RMA, atomics,
 * and triggered or deferred ones, which keep the priority in force when
 * they were queued, not when they fire).  Among transfers waiting to
 * leave the node, a higher priority goes first; equal priorities keep
 * their posting order.  Messages of different priorities between the
 * same two endpoints may therefore be delivered out of order:
 * FI_ORDER_SAS holds within one priority.
 */
#define FI_TNBC_EP_OPS_1 "tnbc_ep_ops_1"

#define FI_TNBC_PRIO_DEFAULT 0
#define FI_TNBC_PRIO_MAX     255

struct fi_tnbc_ops_ep {
	size_t size; /* sizeof(struct fi_tnbc_ops_ep) */
	/* -FI_EINVAL when prio > FI_TNBC_PRIO_MAX */
	int (*set_priority)(struct fid_ep *ep, unsigned int prio);
	int (*get_priority)(struct fid_ep *ep, unsigned int *prio);
};

/*
 * Compute steps for deferred work (fi_trigger(3)).
 *
 * enum fi_op_type has no step that computes, so tnbc adds two, queued
 * with fi_control(&domain->fid, FI_QUEUE_WORK, &work) like the standard
 * ones: once work.triggering_cntr reaches work.threshold, the domain's
 * engine folds one local buffer into another (a reduce) or copies it (a
 * copy), and then adds one to work.completion_cntr (when set).  With
 * sends, receives and counters they make a schedule that runs with no
 * application thread in the loop: for example, receive a child's
 * contribution, fold it in once the receive has completed, and send the
 * result on once every child's has been folded.
 *
 * Set them up with fi_tnbc_work_reduce() or fi_tnbc_work_copy(), which
 * store the step in the work's op union.  The step, like the standard
 * fi_op_* structures, must stay valid until the work completes or is
 * cancelled.  Neither buffer may be changed by anybody else in between.
 * A step that fails at fire time (never, for one that was accepted)
 * adds to the completion counter's error count instead.
 */
#define FI_TNBC_OP_REDUCE ((enum fi_op_type)(FI_PROV_SPECIFIC_TNBC | 1))
#define FI_TNBC_OP_COPY	  ((enum fi_op_type)(FI_PROV_SPECIFIC_TNBC | 2))

struct fi_tnbc_op_reduce {
	size_t size; /* sizeof(struct fi_tnbc_op_reduce) */
	void *dst; /* dst[i] = dst[i] op src[i], i < count */
	const void *src;
	size_t count; /* elements */
	enum fi_op op; /* a reduction: FI_MIN ... FI_BXOR (fi_atomic(3)) */
	enum fi_datatype datatype;
};

struct fi_tnbc_op_copy {
	size_t size; /* sizeof(struct fi_tnbc_op_copy) */
	void *dst; /* the two may not overlap */
	const void *src;
	size_t len; /* bytes */
};

static inline void fi_tnbc_work_reduce(struct fi_deferred_work *work,
				       struct fi_tnbc_op_reduce *reduce)
{
	work->op_type = FI_TNBC_OP_REDUCE;
	memcpy(&work->op, &reduce, sizeof(reduce));
}

static inline void fi_tnbc_work_copy(struct fi_deferred_work *work,
				     struct fi_tnbc_op_copy *copy)
{
	work->op_type = FI_TNBC_OP_COPY;
	memcpy(&work->op, &copy, sizeof(copy));
}

/*
 * Reduction and broadcast descriptors (seed 002), fi_tnbc_coll(3).
 *
 * fi_open_ops(&ep->fid, FI_TNBC_COLL_OPS_1, 0, (void **)&ops, NULL)
 * gives an endpoint's descriptor operations.  Each member of a
 * reduction tree posts one reduce descriptor (its contribution) and,
 * for an allreduce, one broadcast descriptor; the endpoint's engine does
 * the rest.  A descriptor is built completely when it is posted (every
 * field is copied): the structure may be reused at once.
 */
#define FI_TNBC_COLL_OPS_1 "tnbc_coll_ops_1"

enum fi_tnbc_red_op {
	FI_TNBC_RED_SUM = 1,
	FI_TNBC_RED_MAX,
	FI_TNBC_RED_MIN,
	FI_TNBC_RED_MAXLOC, /* value/location pairs: the larger value, and
			     * of equal values the smaller location */
	FI_TNBC_RED_MINLOC,
	FI_TNBC_RED_LAND, /* integer widths only, as the bitwise ones */
	FI_TNBC_RED_LOR,
	FI_TNBC_RED_LXOR,
	FI_TNBC_RED_BAND,
	FI_TNBC_RED_BOR,
	FI_TNBC_RED_BXOR,
};

enum fi_tnbc_red_width {
	FI_TNBC_RED_INT32 = 1,
	FI_TNBC_RED_UINT32,
	FI_TNBC_RED_INT64,
	FI_TNBC_RED_UINT64,
	FI_TNBC_RED_FLOAT,
	FI_TNBC_RED_DOUBLE,
};

/* Bytes of reduction data one descriptor carries. */
#define FI_TNBC_RED_INLINE 48

/* A value/location pair of the *LOC ops, for 32-bit widths (6 fit in
 * FI_TNBC_RED_INLINE) and for 64-bit ones (3 fit). */
struct fi_tnbc_loc32 {
	uint32_t value; /* bits of an int32, uint32 or float */
	int32_t loc;
};

struct fi_tnbc_loc64 {
	uint64_t value; /* bits of an int64, uint64 or double */
	int64_t loc;
};

/* fi_tnbc_red_desc.flags */
/* Every packet the descriptor produces counts in the target's CP
 * counter on arrival.  A parent refuses a contribution without it. */
#define FI_TNBC_RED_CP (1ULL << 0)

/* errvec bits the provider sets (the others are the application's) */
#define FI_TNBC_RED_EMISMATCH (1u << 31) /* a child disagreed: not folded */
#define FI_TNBC_RED_EPEER     (1u << 30) /* a child's packet was garbage */
/* two contributions had the same order (a member counted twice, as when
 * a tag is reused while a reduction of it is in flight): the later one
 * was not folded */
#define FI_TNBC_RED_EDUP (1u << 29)

struct fi_tnbc_red_desc {
	size_t size; /* sizeof(struct fi_tnbc_red_desc) */
	uint64_t flags; /* FI_TNBC_RED_CP */
	uint64_t tag; /* names the reduction (below 2^62): children's
		       * descriptors and their parent's share it */
	uint32_t order; /* this member's place in the fold: contributions
			 * are folded in ascending order, so that repeated
			 * runs give bit-identical results */
	uint32_t degree; /* the tree's branch degree, the same in every
			  * descriptor of the reduction (1 to 64) */
	uint32_t children; /* contributions this one folds (<= degree) */
	uint8_t op; /* enum fi_tnbc_red_op */
	uint8_t width; /* enum fi_tnbc_red_width */
	uint16_t count; /* values in data (pairs for *LOC) */
	uint32_t errvec; /* this member's error bits, ORed up the tree */
	/* Counts children's contributions as they arrive; the descriptor
	 * fires once it reaches cpcnt and its own children are all in
	 * (thresholds add up when a counter serves several reductions).
	 * NULL: a counter of the descriptor's own, and cpcnt must equal
	 * children. */
	struct fid_cntr *cp_cntr;
	uint64_t cpcnt;
	fi_addr_t dest; /* the parent, or FI_ADDR_NOTAVAIL: the root */
	uint8_t data[FI_TNBC_RED_INLINE]; /* this member's contribution */
	void *result; /* the root: count values (or pairs) land here */
	uint32_t *errvec_out; /* the root: the tree's error vector, or NULL */
	/* counts the descriptor's completion (the root's: its result is
	 * in place, so a broadcast descriptor can fire on it); NULL: an
	 * entry in the endpoint's transmit CQ with context */
	struct fid_cntr *comp_cntr;
	void *context;
};

struct fi_tnbc_bcast_desc {
	size_t size; /* sizeof(struct fi_tnbc_bcast_desc) */
	uint64_t flags; /* none yet: 0 */
	uint64_t tag; /* as the reduction's, below 2^62 */
	/* The root: fires once trig_cntr reaches threshold (the root
	 * reduce descriptor's comp_cntr re-triggers it).  Others: NULL,
	 * it fires when the result arrives from src. */
	struct fid_cntr *trig_cntr;
	uint64_t threshold;
	fi_addr_t src; /* others: the parent, or FI_ADDR_UNSPEC */
	const fi_addr_t *dests; /* forwarded to these (at most 64) */
	size_t ndests;
	void *result; /* the root: what it sends; others: where it lands */
	size_t len; /* bytes */
	struct fid_cntr *comp_cntr; /* NULL: a transmit CQ entry */
	void *context;
};

struct fi_tnbc_ops_coll {
	size_t size; /* sizeof(struct fi_tnbc_ops_coll) */
	int (*reduce)(struct fid_ep *ep, const struct fi_tnbc_red_desc *desc);
	int (*bcast)(struct fid_ep *ep, const struct fi_tnbc_bcast_desc *desc);
	/* fi_join_collective(ep, addr, FI_COLLECTIVE, mc, context) with a
	 * group id the caller chose (1 to 2^31 - 1) instead of the one the
	 * provider derives from the membership and this endpoint's earlier
	 * joins of it.  The derived id agrees across members only when they
	 * join shared memberships in one order; a caller whose groups are
	 * created in an order of their own (MPI communicators, ordered per
	 * parent) names them instead.  Every member must pass the same id;
	 * -FI_EADDRINUSE when a
	 * group of this endpoint that is still open has it.  Present when
	 * size covers it. */
	int (*join)(struct fid_ep *ep, const struct fi_collective_addr *addr,
		    uint32_t id, struct fid_mc **mc, void *context);
	/* 1 when some of the group's messages cross a link (a member on
	 * another host, or no shared-memory transport in this process's
	 * FI_TNBC_XPORTS), 0 when all stay in this host's memory;
	 * -FI_EINVAL for a group that is not tnbc's.  An operation over a
	 * link takes tens of microseconds, so a caller may leave even a
	 * small one's first steps to the engine (defer).  Present when
	 * size covers it. */
	int (*over_link)(struct fid_mc *mc);
};

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_TNBC_H */
