/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The descriptor engine: seed 002's reduction and broadcast descriptors
 * (fi_tnbc_coll(3)), each run as a schedule of the trigger unit.
 *
 * A reduce descriptor with c children and parent p (step: when -> counts
 * in):
 *   receive c contributions (any source, the reduction's tag) into
 *   slots                                               (ARM 1 -> C1)
 *   fold: check each against this descriptor (CP, op, width, count,
 *   degree), fold the agreeing ones in ascending order   (C1 c -> C3)
 *   send the folded packet to p (none at the root)       (C3 1 -> C3)
 *   complete                                             (C3 2, root 1)
 * With the application's CP counter each arrival is relayed to it
 * (C1 i), and the fold waits for two marks in C2 instead: all of its
 * own children in (C1 c), and the CP counter at CPCnt.  A shared counter
 * may reach a descriptor's threshold with another's children; seed 002's
 * NIC fires on the counter but folds its own packets, and so does this:
 * the threshold alone would fold slots not yet written, and end the
 * schedule under receives still posted into it.
 *
 * A broadcast descriptor receives the result from its parent (or, at
 * the root, fires on an application counter: the root reduce
 * descriptor's completion counter re-triggers it) and forwards it.
 *
 * A step that waits on an application's counter is queued last, once
 * the schedule is armed: an abort could not take it back from that
 * counter.  A failure to queue it fails the operation instead of the
 * post.
 *
 * Contributions travel as messages of the collectives' match space
 * (struct tnbc_red_pkt, tnbc_proto.h), whatever the transport: the
 * engine needs nothing else from it.
 */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_ext_tnbc.h>

#include "tnbc_coll.h"
#include "tnbc_sched.h"
#include "../tnbc_trigger.h"
#include "../tnbc_alu.h"
#include "../tnbc_comp.h"

/* The application's CP counter, fed from the arrivals' own count. */
struct tnbc_desc_relay {
	struct tnbc_cntr *cp, *own;
	atomic_uint_fast64_t err; /* own's errors relayed so far */
};

/* A posted reduce descriptor's scratch: the packet it sends up, then
 * its children's. */
struct tnbc_desc_post {
	struct tnbc_desc_red red;
	struct tnbc_desc_relay relay;
	uint8_t own[FI_TNBC_RED_INLINE];
	struct tnbc_red_pkt slot[];
};

static struct tnbc_cntr *tnbc_desc_cntr(struct tnbc_ep *ep,
					struct fid_cntr *fid, bool *bad)
{
	struct tnbc_cntr *c;

	if (!fid)
		return NULL;
	if (fid->fid.fclass != FI_CLASS_CNTR) {
		*bad = true;
		return NULL;
	}
	c = tnbc_cntr_fid(&fid->fid);
	if (c->domain != ep->domain)
		*bad = true;
	return c;
}

/* One arrival of the descriptor's own, relayed to the CP counter: as an
 * error while C1 has errors not yet relayed. */
static int tnbc_desc_relay(void *arg)
{
	struct tnbc_desc_relay *y = arg;
	uint_fast64_t done = atomic_load(&y->err);

	while (done < atomic_load(&y->own->err))
		if (atomic_compare_exchange_weak(&y->err, &done, done + 1)) {
			tnbc_cntr_inc_err(y->cp);
			return 0;
		}
	tnbc_cntr_inc(y->cp);
	return 0;
}

/* The CP counter reached CPCnt: one of the fold's two marks. */
static int tnbc_desc_nop(void *arg)
{
	(void)arg;
	return 0;
}

static int tnbc_desc_red_check(struct tnbc_ep *ep,
			       const struct fi_tnbc_red_desc *r)
{
	if (!r || r->size < sizeof(*r) || (r->flags & ~FI_TNBC_RED_CP) ||
	    r->tag >= (1ULL << 62) || !r->degree ||
	    r->degree > TNBC_DESC_MAX_FANOUT || r->children > r->degree ||
	    !tnbc_desc_width_ok(r->width) ||
	    !tnbc_desc_op_ok(r->op, r->width) || !r->count ||
	    (size_t)r->count * tnbc_alu_size(tnbc_desc_dt(r->width)) *
			    (tnbc_desc_loc(r->op) ? 2 : 1) >
		    FI_TNBC_RED_INLINE)
		return -FI_EINVAL;
	if (!r->cp_cntr && r->cpcnt != r->children)
		return -FI_EINVAL;
	if (r->dest == FI_ADDR_NOTAVAIL ? !r->result
					: !tnbc_av_get(ep->av, r->dest))
		return -FI_EINVAL;
	return 0;
}

/* Every step but the CP counter's mark.  The arrivals count in C1; the
 * fold fires on C1 alone, or on C2's two marks (C1 full, the CP counter
 * at CPCnt); a member sends the fold up and counts the send in C3 too. */
static int tnbc_desc_steps(struct tnbc_sched *s,
			   const struct fi_tnbc_red_desc *r,
			   struct tnbc_desc_post *p, bool cp, bool root)
{
	struct tnbc_cntr *own = &s->c[TNBC_SCHED_C1];
	uint64_t tag = s->tag;
	int ret = 0;

	for (uint32_t i = 0; !ret && i < r->children; i++)
		ret = tnbc_sched_recv_from(s, TNBC_SCHED_ARM, 1, own,
					   FI_ADDR_UNSPEC, tag, &p->slot[i + 1],
					   sizeof(p->slot[0]));
	/* The relays count in no counter: nothing waits for them but the
	 * order of C1's heap (threshold, then submission), which runs the
	 * last one before the mark queued after it on the same threshold,
	 * and so before the fold and the end. */
	for (uint32_t i = 0; cp && !ret && i < r->children; i++)
		ret = tnbc_sched_fn(s, own, i + 1, TNBC_SCHED_NONE,
				    tnbc_desc_relay, &p->relay);
	if (!ret && cp)
		ret = tnbc_sched_copy(s, TNBC_SCHED_C1, r->children,
				      TNBC_SCHED_C2, NULL, NULL, 0);
	if (!ret)
		ret = tnbc_sched_fn(s, cp ? &s->c[TNBC_SCHED_C2] : own,
				    cp ? 2 : r->children, TNBC_SCHED_C3,
				    tnbc_desc_red_fire, &p->red);
	if (!ret && !root)
		ret = tnbc_sched_send_to(s, TNBC_SCHED_C3, 1, TNBC_SCHED_C3,
					 r->dest, tag, &p->slot[0],
					 sizeof(p->slot[0]));
	if (!ret)
		ret = tnbc_sched_start_unarmed(s, TNBC_SCHED_C3, root ? 1 : 2);
	return ret;
}

static int tnbc_desc_reduce(struct fid_ep *fid,
			    const struct fi_tnbc_red_desc *r)
{
	struct tnbc_ep *ep = TNBC_EP(fid);
	bool root, badc = false;
	struct tnbc_cntr *cp, *done;
	struct tnbc_desc_post *p;
	struct tnbc_desc_red *d;
	struct tnbc_sched *s;
	int ret;

	if (!ep->enabled || !ep->av)
		return -FI_EOPBADSTATE;
	ret = tnbc_desc_red_check(ep, r);
	if (ret)
		return ret;
	cp = tnbc_desc_cntr(ep, r->cp_cntr, &badc);
	done = tnbc_desc_cntr(ep, r->comp_cntr, &badc);
	if (badc)
		return -FI_EINVAL;
	root = r->dest == FI_ADDR_NOTAVAIL;
	ret = tnbc_sched_new_ep(ep, tnbc_desc_tag(r->tag, false), 0,
				sizeof(*p) +
					(r->children + 1) * sizeof(p->slot[0]),
				r->context, &s);
	if (ret)
		return ret;
	p = s->scratch;
	d = &p->red;
	memset(p, 0, sizeof(*p));
	d->hdr = (struct tnbc_red_hdr){
		.magic = TNBC_RED_MAGIC,
		.flags = ((r->flags & FI_TNBC_RED_CP) ? TNBC_RED_PKT_CP : 0) |
			 (tnbc_desc_loc(r->op) ? TNBC_RED_PKT_LOC : 0),
		.op = (uint8_t)tnbc_desc_fi_op(r->op),
		.datatype = (uint8_t)tnbc_desc_dt(r->width),
		.count = r->count,
		.degree = r->degree,
		.order = r->order,
		.errvec = r->errvec,
	};
	memcpy(p->own, r->data, sizeof(p->own));
	d->own = p->own;
	d->slots = (const char *)&p->slot[1];
	d->stride = sizeof(p->slot[0]);
	d->children = r->children;
	/* the packet up: the header, the fold's values and error vector
	 * (all 72 bytes go: none may be stale memory of this process) */
	memset(&p->slot[0], 0, sizeof(p->slot[0]));
	p->slot[0].h = d->hdr;
	d->acc = root ? r->result : p->slot[0].data;
	d->errvec_out = root ? r->errvec_out : &p->slot[0].h.errvec;
	s->done_cntr = done;
	s->hold[0] = cp;
	s->hold[1] = done;
	for (int i = 0; i < 2; i++)
		if (s->hold[i])
			atomic_fetch_add(&s->hold[i]->ref, 1);
	p->relay.cp = cp;
	p->relay.own = &s->c[TNBC_SCHED_C1];
	ret = tnbc_desc_steps(s, r, p, cp != NULL, root);
	if (ret) {
		tnbc_sched_abort(s);
		return ret;
	}
	tnbc_sched_arm(s);
	/* the CP counter's mark, last: a step on a counter not the
	 * schedule's; once armed, a failure fails the operation instead */
	if (cp &&
	    tnbc_sched_fn(s, cp, r->cpcnt, TNBC_SCHED_C2, tnbc_desc_nop, NULL))
		tnbc_cntr_inc_err(&s->c[TNBC_SCHED_C2]);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Broadcast                                                            */

struct tnbc_desc_bc {
	struct tnbc_sched *s;
	struct tnbc_cntr *trig;
	uint64_t trig_err; /* the trigger's errors when posted */
	fi_addr_t dests[];
};

/* The root's broadcast fires.  An error completion on its trigger
 * since it was posted (the root reduce descriptor's, which refused a
 * child) goes down the tree in place of the result. */
static int tnbc_desc_arm(void *arg)
{
	struct tnbc_desc_bc *d = arg;
	struct tnbc_cntr *arm = &d->s->c[TNBC_SCHED_ARM];

	if (atomic_load(&d->trig->err) != d->trig_err)
		tnbc_cntr_inc_err(arm);
	else
		tnbc_cntr_inc(arm);
	return 0;
}

static int tnbc_desc_bcast(struct fid_ep *fid,
			   const struct fi_tnbc_bcast_desc *b)
{
	struct tnbc_ep *ep = TNBC_EP(fid);
	struct tnbc_cntr *trig, *done;
	bool badc = false, root;
	struct tnbc_desc_bc *d;
	struct tnbc_sched *s;
	uint64_t tag;
	int ret = 0, at;

	if (!ep->enabled || !ep->av)
		return -FI_EOPBADSTATE;
	if (!b || b->size < sizeof(*b) || b->flags || b->tag >= (1ULL << 62) ||
	    b->ndests > TNBC_DESC_MAX_FANOUT || (b->ndests && !b->dests) ||
	    (b->len && !b->result))
		return -FI_EINVAL;
	for (size_t i = 0; i < b->ndests; i++)
		if (!tnbc_av_get(ep->av, b->dests[i]))
			return -FI_EINVAL;
	trig = tnbc_desc_cntr(ep, b->trig_cntr, &badc);
	done = tnbc_desc_cntr(ep, b->comp_cntr, &badc);
	root = trig != NULL;
	if (badc ||
	    (!root && b->src != FI_ADDR_UNSPEC && !tnbc_av_get(ep->av, b->src)))
		return -FI_EINVAL;
	tag = tnbc_desc_tag(b->tag, true);
	ret = tnbc_sched_new_ep(ep, tag, 0,
				sizeof(*d) + b->ndests * sizeof(d->dests[0]),
				b->context, &s);
	if (ret)
		return ret;
	d = s->scratch;
	d->s = s;
	d->trig = trig;
	d->trig_err = trig ? atomic_load(&trig->err) : 0;
	if (b->ndests)
		memcpy(d->dests, b->dests, b->ndests * sizeof(d->dests[0]));
	s->done_cntr = done;
	s->hold[0] = trig;
	s->hold[1] = done;
	for (int i = 0; i < 2; i++)
		if (s->hold[i])
			atomic_fetch_add(&s->hold[i]->ref, 1);
	/* the others forward what arrives (C1); the root, once armed */
	at = root ? TNBC_SCHED_ARM : TNBC_SCHED_C1;
	if (!root)
		ret = tnbc_sched_recv_from(s, TNBC_SCHED_ARM, 1,
					   &s->c[TNBC_SCHED_C1], b->src, tag,
					   b->result, b->len);
	for (size_t i = 0; !ret && i < b->ndests; i++)
		ret = tnbc_sched_send_to(s, at, 1, TNBC_SCHED_C2, d->dests[i],
					 tag, b->result, b->len);
	if (!ret)
		ret = tnbc_sched_copy(s, at, 1, TNBC_SCHED_C2, NULL, NULL, 0);
	if (!ret)
		ret = tnbc_sched_start_unarmed(s, TNBC_SCHED_C2, b->ndests + 1);
	if (ret) {
		tnbc_sched_abort(s);
		return ret;
	}
	if (!root) {
		tnbc_sched_arm(s);
		return 0;
	}
	/* re-triggered by the application's counter (the root reduce
	 * descriptor's completion).  A threshold of 0 is met already: a
	 * step would take it for "wait for the arming", which only this
	 * step does. */
	if (!b->threshold)
		tnbc_desc_arm(d);
	else if (tnbc_sched_fn(s, trig, b->threshold, TNBC_SCHED_NONE,
			       tnbc_desc_arm, d))
		tnbc_cntr_inc_err(&s->c[TNBC_SCHED_ARM]);
	tnbc_trig_run(ep->domain, false);
	return 0;
}

struct fi_tnbc_ops_coll tnbc_desc_ops = {
	.size = sizeof(struct fi_tnbc_ops_coll),
	.reduce = tnbc_desc_reduce,
	.bcast = tnbc_desc_bcast,
	.join = tnbc_coll_join_named,
	.over_link = tnbc_coll_over_link,
};
