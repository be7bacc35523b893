/*
 * Barrier, broadcast, reduce and allreduce on a k-ary tree
 * (tnbc_tree.h): children's partial results go up and are folded by
 * their parent, the root's result comes back down.
 *
 * The schedule of one member with nch children (counters of
 * tnbc_coll.h; "(C, n)" fires once counter C reaches n):
 *   up:   own contribution copied into acc                  (ARM, 1)
 *         receive child i into slot i, counted by C1        (ARM, 1)
 *         fold slot 0 .. nch-1 into acc, in child order     (C1, nch)
 *         mark "folded": C2 = 1                             (C1, nch)
 *         send acc to the parent, counted by C3             (C2, 1)
 *   down: receive the result from the parent into acc, C2   (ARM, 1)
 *         send acc to each child, counted by C3             (C2, d)
 *   end:  mark "result here": C3 += 1                       (C2, d)
 *         complete                                          (C3, all)
 * where d is how many C2 events the result needs.  Folding in child
 * order, after every child has arrived, makes the result independent of
 * arrival order: repeated runs are bit-identical, and every member gets
 * the root's bytes.
 *
 * The result can be received into acc while acc is still being sent
 * up: the parent sends it only after it has this member's contribution,
 * which an eager send copied at once and a rendezvous one let it read
 * before its send completed.
 */
#include <string.h>

#include "tnbc_coll.h"
#include "tnbc_tree.h"

enum { TNBC_TREE_STEP_UP = 1, TNBC_TREE_STEP_DOWN = 2 };

int tnbc_alg_tree(struct tnbc_mc *mc, const struct tnbc_coll_op *op)
{
	bool up = op->coll != FI_BROADCAST;
	bool down = op->coll != FI_REDUCE;
	size_t esize = op->coll == FI_BARRIER ? 0 : tnbc_alu_size(op->dt);
	size_t len = esize * op->count;
	struct tnbc_sched *s;
	struct tnbc_tree t;
	int me, parent, nch, i, ret;
	uint64_t d, nterm;
	char *acc, *slots, *down_buf;
	bool relay; /* the result comes down into scratch, then acc */

	ret = tnbc_tree_init(&t, mc->size, op->root, tnbc_coll_degree());
	if (ret)
		return ret;
	me = mc->rank; /* the tree maths counts from the root itself */
	parent = tnbc_tree_parent(&t, me);
	nch = up || down ? tnbc_tree_nchildren(&t, me) : 0;
	relay = up && down && parent >= 0 && len;
	/* a reduce's non-root members fold into scratch after the slots;
	 * an allreduce's receive the result there */
	ret = tnbc_sched_new(
		mc,
		(up ? (size_t)nch * len : 0) +
			((op->coll == FI_REDUCE || relay) && parent >= 0 ? len
									 : 0),
		op->context, &s);
	if (ret)
		return ret;
	s->end = op->end;
	slots = s->scratch;
	if (op->coll == FI_BROADCAST)
		acc = (char *)op->buf;
	else if (op->coll == FI_REDUCE && parent >= 0)
		acc = slots + (size_t)nch * len;
	else
		acc = op->result;
	down_buf = relay ? slots + (size_t)nch * len : acc;

	if (up) {
		if (len && acc != op->buf)
			ret = tnbc_sched_copy(s, TNBC_SCHED_ARM, 1,
					      TNBC_SCHED_NONE, acc, op->buf,
					      len);
		for (i = 0; !ret && i < nch; i++)
			ret = tnbc_sched_recv(
				s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C1,
				tnbc_tree_child(&t, me, i), TNBC_TREE_STEP_UP,
				slots + (size_t)i * len, len);
		for (i = 0; !ret && len && i < nch; i++)
			ret = tnbc_sched_reduce(s, TNBC_SCHED_C1, nch,
						TNBC_SCHED_NONE, acc,
						slots + (size_t)i * len,
						op->count, op->op, op->dt);
		if (!ret)
			ret = tnbc_sched_copy(s, TNBC_SCHED_C1, nch,
					      TNBC_SCHED_C2, NULL, NULL, 0);
		if (!ret && parent >= 0)
			ret = tnbc_sched_send(s, TNBC_SCHED_C2, 1,
					      TNBC_SCHED_C3, parent,
					      TNBC_TREE_STEP_UP, acc, len);
	}
	d = up ? 1 : 0;
	if (!ret && down && parent >= 0) {
		ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C2,
				      parent, TNBC_TREE_STEP_DOWN, down_buf,
				      len);
		d++;
	}
	for (i = 0; !ret && down && i < nch; i++)
		ret = tnbc_sched_send(s, d ? TNBC_SCHED_C2 : TNBC_SCHED_ARM,
				      d ? d : 1, TNBC_SCHED_C3,
				      tnbc_tree_child(&t, me, i),
				      TNBC_TREE_STEP_DOWN, down_buf, len);
	/* the mark that the result is here; an allreduce's non-root member
	 * copies it from scratch, so that the result never lands in the
	 * buffer its own send up may still be reading (the two are ordered
	 * only through the parent, another process) */
	if (!ret)
		ret = tnbc_sched_copy(s, d ? TNBC_SCHED_C2 : TNBC_SCHED_ARM,
				      d ? d : 1, TNBC_SCHED_C3,
				      relay ? acc : NULL,
				      relay ? down_buf : NULL, relay ? len : 0);
	nterm = 1 + (up && parent >= 0 ? 1 : 0) + (down ? (uint64_t)nch : 0);
	if (!ret)
		ret = tnbc_sched_start(s, TNBC_SCHED_C3, nterm);
	if (ret)
		tnbc_sched_abort(s);
	return ret;
}
