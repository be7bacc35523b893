/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Allreduce of large payloads as a reduce-scatter and an allgather, by
 * direct exchange: member j owns slice j of the vector, receives every
 * other member's slice j, folds them (its own first, then in member
 * order), and sends the folded slice to everybody.  Each member moves
 * 2 (n - 1) / n of the vector each way, where a tree's inner members
 * move degree + 1 vectors; and every slice is folded once, by its owner,
 * so every member gets the same bytes.
 *
 *   send slice j of buf to j; receive j's slice me (C1)     (ARM, 1)
 *   receive j's folded slice j into result (C3)             (ARM, 1)
 *   copy own slice of buf into result (C1)                  (ARM, 1)
 *   fold the n - 1 received slices into result[me]          (C1, n)
 *   mark "folded": C2 = 1                                   (C1, n)
 *   send result[me] to every j (C3)                         (C2, 1)
 *   complete                                                (C3, all)
 * Chosen over the tree from FI_TNBC_COLL_RSAG_MIN bytes (fi_tnbc(7)).
 */
#include "tnbc_sched.h"
#include "../tnbc_alu.h"

enum { TNBC_RSAG_STEP_RS = 1, TNBC_RSAG_STEP_AG = 2 };

/* Slice j of count elements among n: where it starts, and how long. */
static size_t tnbc_rsag_off(size_t count, int n, int j)
{
	size_t base = count / (size_t)n, rem = count % (size_t)n;

	return (size_t)j * base + ((size_t)j < rem ? (size_t)j : rem);
}

static size_t tnbc_rsag_len(size_t count, int n, int j)
{
	return count / (size_t)n + ((size_t)j < count % (size_t)n ? 1 : 0);
}

int tnbc_alg_rsag(struct tnbc_mc *mc, const struct tnbc_coll_op *op)
{
	size_t es = tnbc_alu_size(op->dt);
	int n = mc->size, me = mc->rank, j, ret;
	size_t mine = tnbc_rsag_len(op->count, n, me);
	size_t at = tnbc_rsag_off(op->count, n, me) * es;
	const char *in = op->buf;
	char *out = op->result, *slots;
	uint64_t nterm = 0, nin;
	struct tnbc_sched *s;
	bool copy;

	ret = tnbc_sched_new(mc, 0, (size_t)(n - 1) * mine * es, op->context,
			     &s);
	if (ret)
		return ret;
	s->end = op->end;
	slots = s->scratch;
	for (j = 0; !ret && j < n; j++) {
		size_t jo = tnbc_rsag_off(op->count, n, j) * es;
		size_t jl = tnbc_rsag_len(op->count, n, j) * es;
		char *slot = slots + (size_t)(j < me ? j : j - 1) * mine * es;

		if (j == me)
			continue;
		ret = tnbc_sched_send(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C3, j,
				      TNBC_RSAG_STEP_RS, in + jo, jl);
		if (!ret)
			ret = tnbc_sched_recv(
				s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C1, j,
				TNBC_RSAG_STEP_RS, slot, mine * es);
		if (!ret)
			ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1,
					      TNBC_SCHED_C3, j,
					      TNBC_RSAG_STEP_AG, out + jo, jl);
		nterm += 2;
	}
	/* the own slice into result after the sends are queued, so that
	 * the copy overlaps the peers reading this member's slices; the
	 * fold waits for it and the n - 1 slices */
	copy = in != out && mine;
	if (!ret && copy)
		ret = tnbc_sched_copy(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C1,
				      out + at, in + at, mine * es);
	nin = (uint64_t)(n - 1) + (copy ? 1 : 0);
	/* in member order, whatever the order of arrival */
	for (j = 0; !ret && mine && j < n - 1; j++)
		ret = tnbc_sched_reduce(s, TNBC_SCHED_C1, nin, TNBC_SCHED_NONE,
					out + at, slots + (size_t)j * mine * es,
					mine, op->op, op->dt);
	if (!ret)
		ret = tnbc_sched_copy(s, TNBC_SCHED_C1, nin, TNBC_SCHED_C2,
				      NULL, NULL, 0);
	for (j = 0; !ret && j < n; j++) {
		if (j == me)
			continue;
		ret = tnbc_sched_send(s, TNBC_SCHED_C2, 1, TNBC_SCHED_C3, j,
				      TNBC_RSAG_STEP_AG, out + at, mine * es);
		nterm++;
	}
	if (!ret)
		ret = tnbc_sched_start(s, TNBC_SCHED_C3, nterm);
	if (ret)
		tnbc_sched_abort(s);
	return ret;
}
