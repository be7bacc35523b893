/*
 * Allreduce and reduce of at most 48 bytes built from seed 002's
 * descriptors: every member's contribution travels as a descriptor
 * packet (struct tnbc_red_pkt) up the k-ary tree, and each parent runs
 * the descriptor engine's fold (tnbc_desc_red_fire): it checks each
 * child's packet against its own and folds the agreeing ones in member
 * order, once all have arrived.  The root's result comes back down.
 *
 *   receive child i's packet into slot i (C1)               (ARM, 1)
 *   fold: the descriptor fires (C2)                         (C1, nch)
 *   send the folded packet to the parent (C3)               (C2, 1)
 *   allreduce, not the root: receive the result into scratch (C2),
 *   copy it into result (C3)                                (C2, 2)
 *   send the result to each child (C3)                      (C2, d)
 *   complete                                                (C3, all)
 * Used where the op and datatype have a descriptor form (tnbc_desc_map);
 * the others take tnbc_alg_tree.c.
 */
#include <string.h>

#include <rdma/fi_ext_tnbc.h>

#include "tnbc_coll.h"
#include "tnbc_tree.h"

enum { TNBC_DESC_STEP_UP = 1, TNBC_DESC_STEP_DOWN = 2 };

int tnbc_alg_desc(struct tnbc_mc *mc, const struct tnbc_coll_op *op)
{
	size_t len = tnbc_alu_size(op->dt) * op->count;
	bool down = op->coll == FI_ALLREDUCE;
	int me = mc->rank, parent, nch, i, ret;
	struct tnbc_desc_red *d;
	struct tnbc_sched *s;
	struct tnbc_tree t;
	uint8_t rop, width;
	uint64_t dd, nterm;
	char *down_buf;

	if (len > FI_TNBC_RED_INLINE || !op->count ||
	    tnbc_desc_map(op->op, op->dt, &rop, &width))
		return -FI_EOPNOTSUPP;
	ret = tnbc_tree_init(&t, mc->size, op->root, tnbc_coll_degree());
	if (ret)
		return ret;
	parent = tnbc_tree_parent(&t, me);
	nch = tnbc_tree_nchildren(&t, me);
	ret = tnbc_sched_new(
		mc, sizeof(*d) + (size_t)nch * sizeof(d->slot[0]) + len,
		op->context, &s);
	if (ret)
		return ret;
	s->end = op->end;
	d = s->scratch;
	down_buf = (char *)&d->slot[nch];
	memset(d, 0, sizeof(*d));
	d->out = (struct tnbc_red_pkt){
		.magic = TNBC_RED_MAGIC,
		.flags = TNBC_RED_PKT_CP,
		.op = rop,
		.width = width,
		.count = (uint16_t)op->count,
		.degree = (uint32_t)t.degree,
		.order = (uint32_t)me,
	};
	memcpy(d->out.data, op->buf, len);
	d->children = (uint32_t)nch;
	d->result = parent < 0 ? op->result : NULL;
	for (i = 0; !ret && i < nch; i++)
		ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C1,
				      tnbc_tree_child(&t, me, i),
				      TNBC_DESC_STEP_UP, &d->slot[i],
				      sizeof(d->slot[i]));
	if (!ret)
		ret = tnbc_sched_fn(s, &s->c[TNBC_SCHED_C1], (uint64_t)nch,
				    TNBC_SCHED_C2, tnbc_desc_red_fire, d);
	if (!ret && parent >= 0)
		ret = tnbc_sched_send(s, TNBC_SCHED_C2, 1, TNBC_SCHED_C3,
				      parent, TNBC_DESC_STEP_UP, &d->out,
				      sizeof(d->out));
	dd = 1;
	if (!ret && down && parent >= 0) {
		ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C2,
				      parent, TNBC_DESC_STEP_DOWN, down_buf,
				      len);
		dd = 2;
	}
	for (i = 0; !ret && down && i < nch; i++)
		ret = tnbc_sched_send(s, TNBC_SCHED_C2, dd, TNBC_SCHED_C3,
				      tnbc_tree_child(&t, me, i),
				      TNBC_DESC_STEP_DOWN,
				      parent >= 0 ? down_buf : op->result, len);
	/* the result is in place: copied from scratch (its own send up may
	 * still read the packet, never result) or written by the fold */
	if (!ret)
		ret = tnbc_sched_copy(s, TNBC_SCHED_C2, dd, TNBC_SCHED_C3,
				      down && parent >= 0 ? op->result : NULL,
				      down && parent >= 0 ? down_buf : NULL,
				      down && parent >= 0 ? len : 0);
	nterm = 1 + (parent >= 0 ? 1 : 0) + (down ? (uint64_t)nch : 0);
	if (!ret)
		ret = tnbc_sched_start(s, TNBC_SCHED_C3, nterm);
	if (ret)
		tnbc_sched_abort(s);
	return ret;
}
