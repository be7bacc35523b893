/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The schedule object: one collective operation, as data.  It owns its
 * counters, its scratch memory and, through its counters' heaps, its
 * queued requests; it is freed as one by its last step.
 *
 * Lifetime: built by the poster (tnbc_sched_new, steps, tnbc_sched_start).
 * Until start arms it, nothing of it has run, so an error while building
 * drops every queued step and frees it (tnbc_sched_abort).  Once armed
 * it belongs to the trigger unit: its final step (TNBC_TRIG_CALL) runs
 * after every other step has fired and every completion it waits for has
 * been counted, reports the operation and frees the schedule.
 *
 * A step's tag: the group's id (32 bits), the operation's number in its
 * group (TNBC_SCHED_SEQ_BITS) and the step (TNBC_SCHED_STEP_BITS).  Every
 * member numbers a group's operations in the order it posts them, which
 * fi_collective(3) makes the same on every member.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tnbc_sched.h"
#include "../tnbc_trigger.h"
#include "../tnbc_comp.h"

/*
 * Every collective makes a schedule and its last step frees it, often on
 * another thread (the engine's): the malloc, the free and a mutex set up
 * and torn down per counter cost about 1,300 instructions of an 8-byte
 * allreduce's 9,000 (callgrind, through the MPI glue).  Schedules with
 * the usual counters and little scratch are kept, counters and their
 * locks included, on a free list of up to TNBC_SCHED_CACHE_MAX, as the
 * trigger unit keeps its requests.
 */
#define TNBC_SCHED_CACHE_MAX   64u
#define TNBC_SCHED_CACHE_BYTES 4096u /* object, counters and scratch */

static struct tnbc_freelist tnbc_sched_cache =
	TNBC_FREELIST_INIT(TNBC_SCHED_CACHE_MAX);

static void tnbc_sched_destroy(void *obj)
{
	struct tnbc_sched *s = obj;

	for (int i = 0; i < s->nc; i++)
		pthread_mutex_destroy(&s->c[i].lock);
	free(s);
}

void tnbc_sched_cache_drain(void)
{
	tnbc_freelist_drain(&tnbc_sched_cache, tnbc_sched_destroy);
}

int tnbc_sched_new_ep(struct tnbc_ep *ep, uint64_t tag, int nc, size_t scratch,
		      void *context, struct tnbc_sched **out)
{
	struct tnbc_sched *s = NULL;
	size_t head;
	bool cacheable;
	int i, ret = -FI_ENOMEM;

	if (nc < TNBC_SCHED_NCNTR)
		nc = TNBC_SCHED_NCNTR;
	/* one allocation for the object, its counters and its scratch
	 * (which is not zeroed: a large reduction's slots are megabytes) */
	head = (sizeof(*s) + (size_t)nc * sizeof(s->c[0]) + 63) & ~(size_t)63;
	if (scratch > SIZE_MAX - head)
		return -FI_ENOMEM;
	/* a sanitizer build allocates the exact size, so that it still
	 * sees an overrun of the scratch */
	cacheable = TNBC_FREELIST_KEEPS && nc == TNBC_SCHED_NCNTR &&
		    head + scratch <= TNBC_SCHED_CACHE_BYTES;
	if (cacheable && (s = tnbc_freelist_get(&tnbc_sched_cache))) {
		memset(s, 0, sizeof(*s));
		s->c = (struct tnbc_cntr *)(s + 1);
		for (i = 0; i < nc; i++)
			tnbc_cntr_reuse(&s->c[i], ep->domain);
	} else {
		s = malloc(cacheable ? TNBC_SCHED_CACHE_BYTES : head + scratch);
		if (!s)
			return -FI_ENOMEM;
		memset(s, 0, sizeof(*s));
		s->c = (struct tnbc_cntr *)(s + 1);
		for (i = 0; i < nc; i++) {
			ret = tnbc_cntr_init(&s->c[i], ep->domain);
			if (ret)
				goto err_cntr;
		}
	}
	s->cached = cacheable;
	s->nc = nc;
	s->scratch = scratch ? (char *)s + head : NULL;
	s->ep = ep;
	s->tag = tag;
	s->context = context;
	s->cq_flags = FI_COLLECTIVE;
	/* the endpoint stays until the last step has let go of it */
	atomic_fetch_add(&ep->ref, 1);
	*out = s;
	return 0;
err_cntr:
	while (i--)
		tnbc_cntr_fini(&s->c[i]);
	free(s);
	return ret;
}

int tnbc_sched_new(struct tnbc_mc *mc, int nc, size_t scratch, void *context,
		   struct tnbc_sched **out)
{
	uint64_t seq =
		atomic_load(&mc->next_seq) & ((1u << TNBC_SCHED_SEQ_BITS) - 1);
	int ret = tnbc_sched_new_ep(mc->ep,
				    ((uint64_t)mc->id << 32) |
					    (seq << TNBC_SCHED_STEP_BITS),
				    nc, scratch, context, out);

	if (ret)
		return ret;
	/* numbered only once it exists: a refused operation takes no
	 * number the other members would wait for */
	atomic_fetch_add(&mc->next_seq, 1);
	(*out)->mc = mc;
	atomic_fetch_add(&mc->inflight, 1);
	return 0;
}

static void tnbc_sched_free(struct tnbc_sched *s, bool reported)
{
	struct tnbc_mc *mc = s->mc;
	struct tnbc_ep *ep = s->ep;

	for (int i = 0; i < s->nc; i++)
		tnbc_cntr_quiesce(&s->c[i]);
	for (int i = 0; i < 2; i++)
		if (s->hold[i])
			atomic_fetch_sub(&s->hold[i]->ref, 1);
	if (!s->cached || !tnbc_freelist_put(&tnbc_sched_cache, s))
		tnbc_sched_destroy(s);
	/* the last touches of the group (tnbc_mc_close reads them in the
	 * other order), and of the endpoint */
	if (mc) {
		atomic_fetch_sub(&mc->inflight, 1);
		if (reported)
			atomic_fetch_sub(&mc->finishing, 1);
	}
	atomic_fetch_sub(&ep->ref, 1);
}

int tnbc_sched_close(struct tnbc_sched *s, int ret, int recvd, uint64_t nrecv,
		     int sent, uint64_t nsend)
{
	/* one mark once the receives are in, then the end past the sends */
	if (!ret)
		ret = tnbc_sched_copy(s, nrecv ? recvd : TNBC_SCHED_ARM,
				      nrecv ? nrecv : 1, sent, NULL, NULL, 0);
	if (!ret)
		ret = tnbc_sched_start(s, sent, nsend + 1);
	if (ret)
		tnbc_sched_abort(s);
	return ret;
}

void tnbc_sched_abort(struct tnbc_sched *s)
{
	for (int i = 0; i < s->nc; i++)
		tnbc_trig_drop(&s->c[i]);
	/* a refused operation gives its number back (operations of one
	 * group are posted one at a time, in the same order everywhere) */
	if (s->mc)
		atomic_fetch_sub(&s->mc->next_seq, 1);
	tnbc_sched_free(s, false);
}

static struct tnbc_cntr *tnbc_sched_cntr(struct tnbc_sched *s, int i)
{
	return i == TNBC_SCHED_NONE ? NULL : &s->c[i];
}

/* The counter a step waits on: one that waits for nothing waits to be
 * armed, or it would run while the schedule is still being built. */
static struct tnbc_cntr *tnbc_sched_gate(struct tnbc_sched *s, int trig,
					 uint64_t *thr)
{
	if (!*thr) {
		*thr = 1;
		return &s->c[TNBC_SCHED_ARM];
	}
	return &s->c[trig];
}

/* Steps that failed leave errors in the counters that count them. */
static int tnbc_sched_err(struct tnbc_sched *s)
{
	for (int i = 0; i < s->nc; i++)
		if (atomic_load(&s->c[i].err))
			return FI_EIO;
	return 0;
}

static int tnbc_sched_status(void *arg)
{
	return tnbc_sched_err(arg);
}

static int tnbc_sched_msg(struct tnbc_sched *s, int op, int trig, uint64_t thr,
			  struct tnbc_cntr *comp, fi_addr_t addr, uint64_t tag,
			  const void *buf, size_t len, unsigned how)
{
	struct tnbc_cntr *gate = tnbc_sched_gate(s, trig, &thr);
	struct iovec iov = {(void *)buf, len};
	bool send = op == FI_OP_TSEND;
	struct tnbc_trig_req r = {
		.op = op,
		.ep = s->ep,
		.cntr = gate,
		.threshold = thr,
		.comp_cntr = comp,
		.msg = {.iov = &iov,
			.iov_count = 1,
			.addr = addr,
			.tag = tag,
			.context = s,
			.tagged = true,
			.coll = true,
			.flags = how & TNBC_SCHED_MSG_EXACT ? TNBC_EXACT : 0,
			.ready = how & TNBC_SCHED_MSG_READY,
			.sync = how & TNBC_SCHED_MSG_SYNC},
		/* a failed step fails every member after it */
		.amend = send ? tnbc_sched_status : NULL,
		.amend_arg = s,
	};

	return tnbc_trig_submit(s->ep->domain, &r);
}

/* A step's message to or from a member of the schedule's group. */
static int tnbc_sched_member(struct tnbc_sched *s, int op, int trig,
			     uint64_t thr, int comp, int peer, unsigned step,
			     const void *buf, size_t len, unsigned how)
{
	if (step >= (1u << TNBC_SCHED_STEP_BITS))
		return -FI_EINVAL;
	return tnbc_sched_msg(s, op, trig, thr, tnbc_sched_cntr(s, comp),
			      s->mc->members[peer], s->tag | step, buf, len,
			      how);
}

int tnbc_sched_send(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
		    int peer, unsigned step, const void *buf, size_t len)
{
	return tnbc_sched_member(s, FI_OP_TSEND, trig, thr, comp, peer, step,
				 buf, len, 0);
}

int tnbc_sched_send_how(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
			int peer, unsigned step, const void *buf, size_t len,
			unsigned how)
{
	return tnbc_sched_member(s, FI_OP_TSEND, trig, thr, comp, peer, step,
				 buf, len, how);
}

int tnbc_sched_recv(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
		    int peer, unsigned step, void *buf, size_t len)
{
	return tnbc_sched_member(s, FI_OP_TRECV, trig, thr, comp, peer, step,
				 buf, len, 0);
}

int tnbc_sched_recv_how(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
			int peer, unsigned step, void *buf, size_t len,
			unsigned how)
{
	return tnbc_sched_member(s, FI_OP_TRECV, trig, thr, comp, peer, step,
				 buf, len, how);
}

bool tnbc_sched_over_link(const struct tnbc_mc *mc, int peer)
{
	bool local = false;

	if (mc->host && mc->host[peer] != mc->host[mc->rank])
		return true;
	for (unsigned i = 0; i < tnbc_env.nxport; i++)
		local |=
			(tnbc_env.xport_list[i]->flags & TNBC_XPORT_LOCAL) != 0;
	return !local;
}

size_t tnbc_sched_link_payload(const struct tnbc_mc *mc, int peer)
{
	size_t min = 0, pkt;
	unsigned i;

	for (i = 0; i < tnbc_env.nxport; i++) {
		const struct tnbc_xport_ops *x = tnbc_env.xport_list[i];
		unsigned bit = TNBC_XPORT_BIT(x->id);

		if (x->flags & TNBC_XPORT_LOCAL)
			continue;
		/* the names, not the lists: FI_TNBC_XPORTS's default drops
		 * verbs where a host has no device, and a host with one
		 * reaches a host without by TCP */
		if (mc->xports &&
		    !(mc->xports[mc->rank] & mc->xports[peer] & bit))
			continue;
		pkt = x->link_packet ? x->link_packet() : x->packet_limit();
		if (!min || pkt < min)
			min = pkt;
	}
	/* none: every transport holds at least a slot, less 16 bytes */
	if (!min)
		min = tnbc_env.slot_size - 16;
	return min - TNBC_XPKT_FRAME_MAX;
}

int tnbc_sched_send_to(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
		       fi_addr_t addr, uint64_t tag, const void *buf,
		       size_t len)
{
	return tnbc_sched_msg(s, FI_OP_TSEND, trig, thr,
			      tnbc_sched_cntr(s, comp), addr, tag, buf, len, 0);
}

int tnbc_sched_recv_from(struct tnbc_sched *s, int trig, uint64_t thr,
			 struct tnbc_cntr *comp, fi_addr_t addr, uint64_t tag,
			 void *buf, size_t len)
{
	return tnbc_sched_msg(s, FI_OP_TRECV, trig, thr, comp, addr, tag, buf,
			      len, 0);
}

int tnbc_sched_fn(struct tnbc_sched *s, struct tnbc_cntr *trig, uint64_t thr,
		  int comp, int (*fn)(void *arg), void *arg)
{
	if (!thr) { /* waits for nothing: for the arming, as the others */
		trig = &s->c[TNBC_SCHED_ARM];
		thr = 1;
	}
	struct tnbc_trig_req r = {
		.op = TNBC_TRIG_FN,
		.cntr = trig,
		.threshold = thr,
		.comp_cntr = tnbc_sched_cntr(s, comp),
		.step = {.fn = fn, .arg = arg},
	};

	return tnbc_trig_submit(s->ep->domain, &r);
}

int tnbc_sched_reduce(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
		      void *dst, const void *src, size_t count, enum fi_op op,
		      enum fi_datatype dt)
{
	struct tnbc_cntr *gate = tnbc_sched_gate(s, trig, &thr);
	struct tnbc_trig_req r = {
		.op = TNBC_TRIG_REDUCE,
		.cntr = gate,
		.threshold = thr,
		.comp_cntr = tnbc_sched_cntr(s, comp),
		.step = {.dst = dst,
			 .src = src,
			 .count = count,
			 .op = op,
			 .dt = dt},
	};

	return tnbc_trig_submit(s->ep->domain, &r);
}

int tnbc_sched_copy(struct tnbc_sched *s, int trig, uint64_t thr, int comp,
		    void *dst, const void *src, size_t len)
{
	struct tnbc_cntr *gate = tnbc_sched_gate(s, trig, &thr);
	struct tnbc_trig_req r = {
		.op = TNBC_TRIG_COPY,
		.cntr = gate,
		.threshold = thr,
		.comp_cntr = tnbc_sched_cntr(s, comp),
		.step = {.dst = dst, .src = src, .count = len},
	};

	return tnbc_trig_submit(s->ep->domain, &r);
}

static void tnbc_sched_end(void *arg)
{
	struct tnbc_sched *s = arg;
	struct tnbc_ep *ep = s->ep;
	int err = tnbc_sched_err(s);

	/* before the report: an application that saw it may close the
	 * group at once, and waits for this schedule to let go */
	if (s->mc)
		atomic_fetch_add(&s->mc->finishing, 1);
	if (s->end) {
		s->end(s, err);
	} else if (s->done_cntr) {
		(err ? tnbc_cntr_inc_err : tnbc_cntr_inc)(s->done_cntr);
	} else {
		if (ep->tx_cq) {
			if (err)
				tnbc_cq_write_err(ep->tx_cq, s->context,
						  s->cq_flags, 0, NULL, 0, 0, 0,
						  err, err, FI_ADDR_NOTAVAIL);
			else
				tnbc_cq_write(ep->tx_cq, s->context,
					      s->cq_flags, 0, NULL, 0, 0,
					      FI_ADDR_NOTAVAIL);
		}
		if (ep->tx_cntr)
			(err ? tnbc_cntr_inc_err : tnbc_cntr_inc)(ep->tx_cntr);
	}
	tnbc_sched_free(s, true);
}

void tnbc_sched_arm(struct tnbc_sched *s)
{
	struct tnbc_domain *dom = s->ep->domain;

	/* from here the engine may finish and free s at any moment */
	tnbc_cntr_inc(&s->c[TNBC_SCHED_ARM]);
	tnbc_trig_run(dom, false);
}

int tnbc_sched_start_unarmed(struct tnbc_sched *s, int trig, uint64_t thr)
{
	struct tnbc_cntr *gate = tnbc_sched_gate(s, trig, &thr);
	struct tnbc_trig_req r = {
		.op = TNBC_TRIG_CALL,
		.cntr = gate,
		.threshold = thr,
		.step = {.call = tnbc_sched_end, .arg = s},
	};

	return tnbc_trig_submit(s->ep->domain, &r);
}

int tnbc_sched_start(struct tnbc_sched *s, int trig, uint64_t thr)
{
	int ret = tnbc_sched_start_unarmed(s, trig, thr);

	if (!ret)
		tnbc_sched_arm(s);
	return ret;
}

int tnbc_coll_degree(void)
{
	return (int)tnbc_env.coll_degree;
}
