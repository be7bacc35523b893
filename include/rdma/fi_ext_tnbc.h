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
};

struct fi_tnbc_ops_domain {
	size_t size; /* sizeof(struct fi_tnbc_ops_domain) */
	int (*engine_stats)(struct fid_domain *domain,
			    struct fi_tnbc_engine_stats *stats);
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

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_TNBC_H */
