/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Collectives: what the standard API layer (tnbc_coll.c), the schedule
 * object (tnbc_sched.c) and the algorithms (tnbc_alg_*.c) share.
 *
 * A collective is a schedule: ordinary triggered requests of the trigger
 * unit (sends and receives in the collectives' own match space, local
 * reduce and copy steps), each waiting on one of the schedule's counters
 * for a threshold that says how many of the steps it depends on have
 * completed.  After posting, the trigger unit and the engine run it; no
 * application call is needed.
 */
#ifndef TNBC_SCHED_H
#define TNBC_SCHED_H

#include <rdma/fi_collective.h>

#include "../tnbc.h"

/* A joined group (fi_join_collective): its fi_addr_t is the address of
 * this object. */
struct tnbc_mc {
	struct fid_mc mc_fid;
	struct tnbc_ep *ep;
	struct tnbc_list entry; /* ep->groups, under ep->lock */
	fi_addr_t *members; /* AV addresses, in the set's order */
	int size;
	int rank; /* this endpoint's place in members */
	/* each member's host, numbered 0 .. nhosts - 1 (trees of hosts) */
	int *host;
	int nhosts;
	/* each member's transports (tnbc_name.xports; 0 for one known by
	 * a service address); NULL: this process's FI_TNBC_XPORTS for all */
	uint16_t *xports;
	uint32_t id; /* the group's tag (see tnbc_sched_tag) */
	atomic_uint next_seq; /* the next operation's number */
	atomic_int inflight; /* operations not yet freed */
	/* of those, reported already: they only have to let go of it */
	atomic_int finishing;
	bool joined; /* FI_JOIN_COMPLETE reported */
};

/* The counters of a schedule.  ARM releases the steps that need
 * nothing: it is bumped once every step is queued, so a schedule that
 * fails half built never ran any of them.  A schedule may ask for more
 * (a pipeline's counters per segment): those follow C3. */
enum {
	TNBC_SCHED_ARM,
	TNBC_SCHED_C1,
	TNBC_SCHED_C2,
	TNBC_SCHED_C3,
	TNBC_SCHED_NCNTR,
	TNBC_SCHED_NONE = -1, /* a step that reports to no counter */
};

struct tnbc_sched;
typedef void (*tnbc_sched_end_fn)(struct tnbc_sched *s, int err);

struct tnbc_sched {
	struct tnbc_mc *mc;
	struct tnbc_ep *ep;
	uint64_t tag; /* group and operation; steps fill the low bits */
	void *context; /* the application's */
	uint64_t cq_flags;
	tnbc_sched_end_fn end; /* NULL: a completion in the tx CQ ... */
	struct tnbc_cntr *done_cntr; /* ... or a count here */
	struct tnbc_cntr *hold[2]; /* counters it names, kept open */
	struct tnbc_cntr *c; /* nc of them */
	int nc;
	bool cached; /* goes back to the free list when done */
	void *scratch;
};

/* Steps per operation: the low bits of a tag. */
#define TNBC_SCHED_STEP_BITS 12
#define TNBC_SCHED_SEQ_BITS  20

/* A schedule of a group's next operation, or one of the endpoint's own
 * (a descriptor: mc stays NULL, tag is the caller's), with nc counters
 * (at least TNBC_SCHED_NCNTR are made) and scratch bytes. */
int tnbc_sched_new(struct tnbc_mc *mc, int nc, size_t scratch, void *context,
		   struct tnbc_sched **out);
int tnbc_sched_new_ep(struct tnbc_ep *ep, uint64_t tag, int nc, size_t scratch,
		      void *context, struct tnbc_sched **out);
/* Frees the schedules kept for reuse (the provider's cleanup). */
void tnbc_sched_cache_drain(void);
/* Each queues a step that starts once counter trig (cnt + err) reaches
 * thr and reports to counter comp (or TNBC_SCHED_NONE). */
int tnbc_sched_send(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
		    int peer, unsigned step, const void *buf, size_t len);
int tnbc_sched_recv(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
		    int peer, unsigned step, void *buf, size_t len);
/* A send marked how: TNBC_SCHED_MSG_READY, its receive is posted (an
 * eager packet up to tnbc_sched_link_payload); TNBC_SCHED_MSG_SYNC, a
 * synchronisation message (counted in the engine's sync_pkts).  A
 * receive marked TNBC_SCHED_MSG_EXACT fails on a shorter message too:
 * one whose length every member computes alike from the operation's
 * count, so that a member that passed another fails. */
enum {
	TNBC_SCHED_MSG_READY = 1,
	TNBC_SCHED_MSG_SYNC = 2,
	TNBC_SCHED_MSG_EXACT = 4
};
int tnbc_sched_send_how(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
			int peer, unsigned step, const void *buf, size_t len,
			unsigned how);
int tnbc_sched_recv_how(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
			int peer, unsigned step, void *buf, size_t len,
			unsigned how);
/* Whether the schedule's messages with member peer cross a link: the
 * peer is on another host, or this process has no shared-memory
 * transport (FI_TNBC_XPORTS).  Every member of a job run with one
 * FI_TNBC_XPORTS answers the same for a pair, whichever transport
 * carries it in each direction. */
bool tnbc_sched_over_link(const struct tnbc_mc *mc, int peer);
/* The largest payload one packet carries over the pair of this
 * process and member peer, whichever link transport carries each
 * direction: the least link_packet of the transports of
 * FI_TNBC_XPORTS that both members' names say reach them, or a slot
 * when they share none (or a service address names one: a service
 * endpoint's own name is one too, so both ends see it).  Both members
 * of the pair compute the same: about 1 MiB when TCP is the only link
 * the two share, a slot when verbs may carry it. */
size_t tnbc_sched_link_payload(const struct tnbc_mc *mc, int peer);
int tnbc_sched_reduce(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
		      void *dst, const void *src, size_t count, enum fi_op op,
		      enum fi_datatype dt);
int tnbc_sched_copy(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
		    void *dst, const void *src, size_t len);
/* By address and whole tag, for schedules of no group. */
int tnbc_sched_send_to(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
		       fi_addr_t addr, uint64_t tag, const void *buf,
		       size_t len);
/* counted in comp, which may be an application's counter */
int tnbc_sched_recv_from(struct tnbc_sched *s, int trig, uint64_t thr,
			 struct tnbc_cntr *comp, fi_addr_t addr, uint64_t tag,
			 void *buf, size_t len);
/* fn(arg) as a step, on any counter (an application's too): 0, or a
 * negative fi_errno that fails the step. */
int tnbc_sched_fn(struct tnbc_sched *s, struct tnbc_cntr *trig, uint64_t thr,
		  int comp, int (*fn)(void *arg), void *arg);
/* The last step: completes the operation once trig reaches thr, and
 * arms the schedule.  After it, the schedule belongs to the engine. */
int tnbc_sched_start(struct tnbc_sched *s, int trig, uint64_t thr);
/* The same in two halves: the last step, then the arming.  Between the
 * two, or after the arming where the end waits for their marks, the
 * caller may queue steps on counters that are not the schedule's; none
 * may fail the build any more (count a failure as an error of the
 * counter the step would have counted in). */
int tnbc_sched_start_unarmed(struct tnbc_sched *s, int trig, uint64_t thr);
void tnbc_sched_arm(struct tnbc_sched *s);
/* The common end of an exchange: once counter recvd has nrecv
 * receives, a mark in counter sent, which ends the operation when it
 * also has the nsend sends; started, or taken back when ret (the
 * building so far) or this fails.  Returns the first error. */
int tnbc_sched_close(struct tnbc_sched *s, int ret, int recvd, uint64_t nrecv,
		     int sent, uint64_t nsend);
/* Takes back a schedule that was never started. */
void tnbc_sched_abort(struct tnbc_sched *s);

/* Algorithms: each builds and starts one operation's schedule. */
struct tnbc_coll_op {
	enum fi_collective_op coll;
	const void *buf;
	void *result;
	size_t count; /* elements */
	enum fi_datatype dt;
	enum fi_op op;
	int root; /* member */
	void *context;
	tnbc_sched_end_fn end;
};

/* A collective's reduction packet header: count elements of op, and the
 * degree and order the receiving descriptor checks (tnbc_desc_red_fire). */
static inline struct tnbc_red_hdr
tnbc_red_hdr_coll(const struct tnbc_coll_op *op, uint32_t count,
		  uint32_t degree, uint32_t order)
{
	return (struct tnbc_red_hdr){
		.magic = TNBC_RED_MAGIC,
		.flags = TNBC_RED_PKT_CP,
		.op = (uint8_t)op->op,
		.datatype = (uint8_t)op->dt,
		.count = count,
		.degree = degree,
		.order = order,
	};
}

int tnbc_alg_direct(struct tnbc_mc *mc, const struct tnbc_coll_op *op);
int tnbc_alg_rsag(struct tnbc_mc *mc, const struct tnbc_coll_op *op);
int tnbc_alg_desc(struct tnbc_mc *mc, const struct tnbc_coll_op *op);
int tnbc_alg_flat(struct tnbc_mc *mc, const struct tnbc_coll_op *op);
/* Allreduce and barrier of a group on several hosts: folded at each
 * host's leader, exchanged between leaders in one hop. */
int tnbc_alg_hosts(struct tnbc_mc *mc, const struct tnbc_coll_op *op);
/* Whether tnbc_alg_hosts can run an operation of len bytes in this
 * group at all (tnbc_alg.c decides whether it should). */
bool tnbc_alg_hosts_can(const struct tnbc_mc *mc, enum fi_collective_op coll,
			size_t len);
/* Alltoall for hosts of many processes (seed 001): PLP aggregates
 * small slices between hosts at leaders, LSS sends large ones after one
 * ready note (tnbc_alg_plp.c, tnbc_alg_lss.c). */
int tnbc_alg_plp(struct tnbc_mc *mc, const struct tnbc_coll_op *op);
bool tnbc_alg_plp_can(const struct tnbc_mc *mc, enum fi_collective_op coll,
		      size_t len);
int tnbc_alg_lss(struct tnbc_mc *mc, const struct tnbc_coll_op *op);
bool tnbc_alg_lss_can(const struct tnbc_mc *mc, enum fi_collective_op coll,
		      size_t len);
/* Largest group tnbc_alg_flat takes (FI_TNBC_COLL_FLAT_MAX's range). */
#define TNBC_ALG_FLAT_MAX 64
bool tnbc_alg_flat_can(const struct tnbc_mc *mc, enum fi_collective_op coll,
		       size_t len);

/* An algorithm of the table (tnbc_alg.c). */
struct tnbc_alg {
	const char *name;
	uint32_t colls; /* TNBC_ALG_BIT of each collective it implements */
	/* whether it can run this operation at all, and whether the
	 * automatic choice takes it (the measured rules, fi_tnbc(7)) */
	bool (*can)(const struct tnbc_mc *mc, enum fi_collective_op coll,
		    size_t len);
	bool (*pick)(const struct tnbc_mc *mc, enum fi_collective_op coll,
		     size_t len);
	int (*run)(struct tnbc_mc *mc, const struct tnbc_coll_op *op);
};

#define TNBC_ALG_BIT(coll) (1u << (coll))

/* The algorithm that runs an operation of len bytes in mc: the one
 * FI_TNBC_COLL_ALG names for it when that one can, else the first of
 * the table whose rules take it. */
const struct tnbc_alg *tnbc_alg_choose(const struct tnbc_mc *mc,
				       enum fi_collective_op coll, size_t len);
/* The table's algorithm of that name, or NULL. */
const struct tnbc_alg *tnbc_alg_named(const char *name);

/* Children a reduction descriptor folds at most (its branch degree). */
#define TNBC_DESC_MAX_FANOUT 64

/* The descriptor engine (tnbc_desc.c), for the algorithms built on it.
 * A reduce descriptor's fold (a TNBC_TRIG_FN step): checks each child's
 * packet against hdr, folds own and the agreeing ones in ascending
 * order into acc, and ORs the error vectors into *errvec_out.  own and
 * acc may not overlap, nor acc the slots. */
struct tnbc_desc_red {
	struct tnbc_red_hdr hdr; /* this member's: children must agree */
	const void *own; /* this member's values */
	void *acc; /* the folded values land here */
	uint32_t *errvec_out; /* the folded error vector, or NULL */
	const char *slots; /* children's packets, stride bytes apart */
	size_t stride;
	uint32_t children;
};
int tnbc_desc_red_fire(void *arg);
/* Bytes of a header's values. */
size_t tnbc_desc_bytes(const struct tnbc_red_hdr *h);
/* A descriptor's wire tag; its operand width as a datatype, and whether
 * the width, the operation (a location one: loc) and the pair are ones
 * descriptors take; the descriptor operation as an fi_op. */
uint64_t tnbc_desc_tag(uint64_t tag, bool bcast);
enum fi_datatype tnbc_desc_dt(uint8_t width);
bool tnbc_desc_width_ok(uint8_t width);
bool tnbc_desc_loc(uint8_t op);
bool tnbc_desc_op_ok(uint8_t op, uint8_t width);
enum fi_op tnbc_desc_fi_op(uint8_t op);

/* The branch degree of trees (FI_TNBC_COLL_DEGREE). */
int tnbc_coll_degree(void);

#endif /* TNBC_SCHED_H */
