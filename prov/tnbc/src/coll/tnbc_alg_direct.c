/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Allgather, alltoall, scatter, gather and reduce-scatter by direct
 * exchange: every member that has a slice for another sends it straight
 * there, in one step.  For the group sizes of one host this is as short
 * as any schedule can be (one message latency), and it posts every
 * receive before the first send fires.
 *
 * Slices: count elements each; member j's slice of a buffer that holds
 * one per member starts at j * count elements, and a slice that arrives
 * shorter fails the operation as a longer one does (a member that passed
 * another count).  Counters: C1 counts the
 * receives, C2 the sends; reduce-scatter folds, in member order, once C1
 * has them all; the operation ends when both are done.
 */
#include <string.h>

#include "tnbc_sched.h"
#include "../tnbc_alu.h"

enum { TNBC_DIRECT_STEP = 1 };

int tnbc_alg_direct(struct tnbc_mc *mc, const struct tnbc_coll_op *op)
{
	size_t len = tnbc_alu_size(op->dt) * op->count;
	int n = mc->size, me = mc->rank, j, ret = 0;
	const char *in = op->buf;
	char *out = op->result, *slots;
	bool sends, recvs;
	uint64_t nsend = 0, nrecv = 0;
	struct tnbc_sched *s;

	ret = tnbc_sched_new(
		mc, 0, op->coll == FI_REDUCE_SCATTER ? (size_t)n * len : 0,
		op->context, &s);
	if (ret)
		return ret;
	s->end = op->end;
	slots = s->scratch;
	/* who sends to whom: everybody to everybody, or one root */
	for (j = 0; !ret && j < n; j++) {
		const char *src;
		char *dst;

		if (j == me)
			continue;
		switch (op->coll) {
		case FI_ALLGATHER:
			src = in;
			dst = out + (size_t)j * len;
			sends = recvs = true;
			break;
		case FI_ALLTOALL:
			src = in + (size_t)j * len;
			dst = out + (size_t)j * len;
			sends = recvs = true;
			break;
		case FI_REDUCE_SCATTER:
			src = in + (size_t)j * len;
			dst = slots + (size_t)j * len;
			sends = recvs = true;
			break;
		case FI_SCATTER:
			src = in + (size_t)j * len;
			dst = out;
			sends = me == op->root;
			recvs = j == op->root;
			break;
		case FI_GATHER:
			src = in;
			dst = out + (size_t)j * len;
			sends = j == op->root;
			recvs = me == op->root;
			break;
		default:
			ret = -FI_EINVAL;
			continue;
		}
		if (recvs) {
			ret = tnbc_sched_recv_how(s, TNBC_SCHED_ARM, 1,
						  TNBC_SCHED_C1, j,
						  TNBC_DIRECT_STEP, dst, len,
						  TNBC_SCHED_MSG_EXACT);
			nrecv++;
		}
		if (!ret && sends) {
			ret = tnbc_sched_send(s, TNBC_SCHED_ARM, 1,
					      TNBC_SCHED_C2, j,
					      TNBC_DIRECT_STEP, src, len);
			nsend++;
		}
	}
	/* this member's own slice */
	if (!ret && len) {
		const char *src = in;
		char *dst = out;

		switch (op->coll) {
		case FI_ALLGATHER:
			dst = out + (size_t)me * len;
			break;
		case FI_ALLTOALL:
			src = in + (size_t)me * len;
			dst = out + (size_t)me * len;
			break;
		case FI_REDUCE_SCATTER:
		case FI_SCATTER:
			src = me == op->root || op->coll == FI_REDUCE_SCATTER
				      ? in + (size_t)me * len
				      : NULL;
			break;
		case FI_GATHER:
			dst = me == op->root ? out + (size_t)me * len : NULL;
			break;
		default:
			break;
		}
		if (src && dst && src != dst)
			ret = tnbc_sched_copy(s, TNBC_SCHED_ARM, 1,
					      TNBC_SCHED_NONE, dst, src, len);
	}
	if (op->coll == FI_REDUCE_SCATTER)
		for (j = 0; !ret && len && j < n; j++)
			if (j != me)
				ret = tnbc_sched_reduce(s, TNBC_SCHED_C1, nrecv,
							TNBC_SCHED_NONE, out,
							slots + (size_t)j * len,
							op->count, op->op,
							op->dt);
	/* the folds run on C1 too: the mark comes after them */
	return tnbc_sched_close(s, ret, TNBC_SCHED_C1, nrecv, TNBC_SCHED_C2,
				nsend);
}
