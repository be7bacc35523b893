/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Allreduce and barrier of a small group in one hop, from seed 002's
 * descriptors: every member is the root of a reduction whose children
 * are all the other members.  Its contribution (the tree's reduction
 * packet: struct tnbc_red_hdr and its values) goes to every other member
 * as soon as the operation is armed, and its descriptor fires once the
 * n - 1 other packets are in, checking each and folding all n in member
 * order (tnbc_desc_red_fire).  Every member folds the same packets in the
 * same order, so all get the same bytes, and repeated runs are
 * bit-identical, as on the tree.
 *
 * A tree's allreduce takes two hops per level, and its root folds while
 * the others wait; here every member sends and folds n - 1 packets, and
 * the result is ready one hop after the last member posted.  That pays
 * while n is small and the payload one descriptor's (48 B): chosen up to
 * FI_TNBC_COLL_FLAT_MAX members (fi_tnbc(7) says how it was measured).
 *
 *   send this member's packet to member j, C2          (ARM, 1)  j != me
 *   receive member j's packet into slot j, C1          (ARM, 1)  j != me
 *   fold own and all slots into result, C2             (C1, n - 1)
 *   complete                                           (C2, n)
 * An operation in place folds the packet's copy of the own values, made
 * when it is posted.
 */
#include <string.h>

#include "tnbc_sched.h"
#include "../tnbc_alu.h"

enum { TNBC_FLAT_STEP = 1 };

bool tnbc_alg_flat_can(const struct tnbc_mc *mc, enum fi_collective_op coll,
		       size_t len)
{
	return (coll == FI_ALLREDUCE || coll == FI_BARRIER) && mc->size > 1 &&
	       mc->size <= TNBC_ALG_FLAT_MAX && len <= TNBC_RED_PKT_BYTES;
}

int tnbc_alg_flat(struct tnbc_mc *mc, const struct tnbc_coll_op *op)
{
	bool barrier = op->coll == FI_BARRIER;
	size_t es = barrier ? 1 : tnbc_alu_size(op->dt);
	size_t len = barrier ? 0 : es * op->count;
	size_t stride = sizeof(struct tnbc_red_pkt);
	int n = mc->size, me = mc->rank, j, ret;
	struct tnbc_red_hdr *mine;
	struct tnbc_desc_red *d;
	struct tnbc_sched *s;
	char *slots;

	/* the own packet, the n - 1 others', the descriptor */
	ret = tnbc_sched_new(mc, 0, (size_t)n * stride + sizeof(*d),
			     op->context, &s);
	if (ret)
		return ret;
	s->end = op->end;
	mine = s->scratch;
	slots = (char *)s->scratch + stride;
	d = (struct tnbc_desc_red *)(slots + (size_t)(n - 1) * stride);
	d->hdr = tnbc_red_hdr_coll(op, (uint32_t)(len / es), (uint32_t)(n - 1),
				   (uint32_t)me);
	/* all of it goes out: no stale bytes past the values */
	memset(mine, 0, stride);
	*mine = d->hdr;
	if (len)
		memcpy(mine + 1, op->buf, len);
	d->own = len ? (const void *)(mine + 1) : NULL;
	d->acc = len ? op->result : NULL;
	d->errvec_out = NULL;
	d->slots = slots;
	d->stride = stride;
	d->children = (uint32_t)(n - 1);

	/* the sends first: steps released together run in the order they
	 * were queued, and a packet that comes before its receive is
	 * posted waits for it as any early one does */
	for (j = 0; !ret && j < n; j++)
		if (j != me)
			ret = tnbc_sched_send(s, TNBC_SCHED_ARM, 1,
					      TNBC_SCHED_C2, j, TNBC_FLAT_STEP,
					      mine, sizeof(*mine) + len);
	for (j = 0; !ret && j < n; j++) {
		char *slot = slots + (size_t)(j < me ? j : j - 1) * stride;

		if (j != me)
			ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1,
					      TNBC_SCHED_C1, j, TNBC_FLAT_STEP,
					      slot, stride);
	}
	if (!ret)
		ret = tnbc_sched_fn(s, &s->c[TNBC_SCHED_C1], (uint64_t)(n - 1),
				    TNBC_SCHED_C2, tnbc_desc_red_fire, d);
	if (!ret)
		ret = tnbc_sched_start(s, TNBC_SCHED_C2, (uint64_t)n);
	if (ret)
		tnbc_sched_abort(s);
	return ret;
}
