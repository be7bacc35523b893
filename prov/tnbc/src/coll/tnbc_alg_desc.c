/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Barrier, broadcast, reduce and allreduce built from seed 002's
 * descriptors on a k-ary tree (tnbc_tree.h): every member's contribution
 * travels as a reduction packet (struct tnbc_red_hdr and its values) to
 * its parent, whose descriptor fires once all its children's packets
 * are in: it checks each against its own (op, type, count, degree) and
 * folds the agreeing ones in member order (tnbc_desc_red_fire).  The
 * root's result re-triggers the way down, as a broadcast descriptor.
 * Barrier is an allreduce of nothing; broadcast is the way down alone.
 *
 * Payloads are cut into segments (FI_TNBC_COLL_SEG bytes; one of at most
 * 48 B is a single descriptor's worth) that move on their own: segment g
 * has counters IN(g) (its children's packets are in), FOLD(g) (its
 * descriptor fired) and DOWN(g) (its result came from the parent), so a
 * member folds and forwards g while g + 1 is still on the wire.
 *
 * One member with nch children, for each segment g ("(C, n)": fires once
 * counter C reaches n):
 *   up:   receive child i's packet into its slot, IN(g)       (ARM, 1)
 *         fold, FOLD(g)                                     (IN(g), nch)
 *         send the folded packet to the parent, END         (FOLD(g), 1)
 *   down: receive the result from the parent, DOWN(g)         (ARM, 1)
 *         send it to each child, END                          (R(g), 1)
 *   complete                                                (END, all)
 * where R(g) is FOLD(g) at the root (ARM for a broadcast) and DOWN(g)
 * elsewhere.  A step that nothing else waits on counts in END itself
 * (the fold of a root that sends nothing down, the result's arrival at
 * a leaf), and a leaf has no fold: its packet is filled when posted and
 * goes up once armed.  An allreduce of two members is then four steps
 * at the root and three at the leaf.  Folding in member order after
 * every child is in makes the result independent of arrival order:
 * repeated runs are bit-identical.
 *
 * The fold of a member that is not the root lands in the packet it
 * sends up, never in its result buffer, and an operation in place folds
 * a copy of its own values: the result arrives from the parent, which
 * the two processes order only between themselves.
 */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_ext_tnbc.h>

#include "tnbc_sched.h"
#include "tnbc_tree.h"
#include "../tnbc_alu.h"

enum {
	TNBC_SEG_END = TNBC_SCHED_C1,
	TNBC_SEG_BASE = TNBC_SCHED_NCNTR,
	/* steps 1 + 2g (up) and 2 + 2g (down) below 2^TNBC_SCHED_STEP_BITS */
	TNBC_SEG_MAX = ((1 << TNBC_SCHED_STEP_BITS) - 2) / 2,
};

#define TNBC_SEG_IN(g)	 (TNBC_SEG_BASE + 3 * (int)(g))
#define TNBC_SEG_FOLD(g) (TNBC_SEG_IN(g) + 1)
#define TNBC_SEG_DOWN(g) (TNBC_SEG_IN(g) + 2)

static size_t tnbc_round64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

static bool tnbc_overlap(const void *a, const void *b, size_t len)
{
	const char *x = a, *y = b;

	return len && x < y + len && y < x + len;
}

/* The tree an operation runs on: of hosts (tnbc_tree_init_groups) when
 * the group's members are on several hosts and some host has more than
 * one, so that each host sends one partial result up and takes one
 * result down (FI_TNBC_COLL_HOSTS); else the k-ary tree.  Every member
 * numbers the hosts alike (tnbc_mc_hosts), so all build the same tree.
 * *table (NULL or malloc'd) must outlive t. */
static int tnbc_desc_tree(struct tnbc_mc *mc, int root, struct tnbc_tree *t,
			  int **table)
{
	int n = mc->size;

	*table = NULL;
	if (tnbc_env.coll_hosts && mc->nhosts > 1 && mc->nhosts < n)
		*table = malloc(tnbc_tree_groups_ints(n, mc->nhosts) *
				sizeof(**table));
	if (*table && (tnbc_tree_init_groups(t, n, root, tnbc_coll_degree(),
					     mc->host, mc->nhosts, *table) ||
		       t->fanout > TNBC_DESC_MAX_FANOUT)) {
		free(*table);
		*table = NULL;
	}
	return *table ? 0 : tnbc_tree_init(t, n, root, tnbc_coll_degree());
}

int tnbc_alg_desc(struct tnbc_mc *mc, const struct tnbc_coll_op *op)
{
	bool up = op->coll != FI_BROADCAST;
	bool down = op->coll != FI_REDUCE;
	size_t es = op->coll == FI_BARRIER ? 1 : tnbc_alu_size(op->dt);
	size_t len = op->coll == FI_BARRIER ? 0 : es * op->count;
	size_t seg, nseg, stride;
	int me = mc->rank, parent, nch, ret;
	struct tnbc_desc_red *red = NULL;
	const char *own = op->buf;
	char *pkts, *dbuf;
	struct tnbc_sched *s;
	struct tnbc_tree t;
	size_t npkt, per, fan, g;
	bool copy_own;
	int *table;

	ret = tnbc_desc_tree(mc, op->root, &t, &table);
	if (ret)
		return ret;
	tnbc_tree_segments(len, es, tnbc_env.coll_seg, TNBC_SEG_MAX, &seg,
			   &nseg);
	stride = tnbc_round64(sizeof(struct tnbc_red_hdr) + seg);
	parent = tnbc_tree_parent(&t, me);
	nch = tnbc_tree_nchildren(&t, me);
	/* per segment: the packet up (not at the root) and the children's */
	npkt = up ? (size_t)nch + (parent >= 0 ? 1 : 0) : 0;
	/* in place: the result lands where the own values are */
	copy_own = up && op->coll != FI_BARRIER &&
		   tnbc_overlap(op->buf, op->result, len);

	ret = tnbc_sched_new(mc, TNBC_SEG_BASE + 3 * (int)nseg,
			     nseg * npkt * stride +
				     (up ? nseg * sizeof(*red) : 0) +
				     (copy_own ? len : 0),
			     op->context, &s);
	if (ret) {
		free(table);
		return ret;
	}
	s->end = op->end;
	pkts = s->scratch;
	if (up)
		red = (struct tnbc_desc_red *)(pkts + nseg * npkt * stride);
	if (copy_own) {
		char *c = (char *)(red + nseg);

		memcpy(c, op->buf, len);
		own = c;
	}
	dbuf = op->coll == FI_BROADCAST ? (char *)op->buf : (char *)op->result;
	fan = down ? (size_t)nch : 0;
	/* END counts every send, and the steps nothing else waits on: the
	 * root's fold where no result goes down from it, the result's
	 * arrival at a member with no children */
	per = (up && parent >= 0 ? 1 : 0) + fan +
	      (up && parent < 0 && !fan ? 1 : 0) +
	      (down && parent >= 0 && !nch ? 1 : 0);

	for (g = 0; !ret && g < nseg; g++) {
		size_t off = g * seg, n = len - off < seg ? len - off : seg;
		char *gp = pkts + g * npkt * stride; /* up, then children */
		char *slots = gp + (parent >= 0 ? stride : 0);
		unsigned sup = 1 + 2 * (unsigned)g, sdown = sup + 1;
		int rc, i;

		if (up) {
			struct tnbc_desc_red *d = &red[g];
			struct tnbc_red_hdr *uh = (void *)gp;

			d->hdr = tnbc_red_hdr_coll(op, (uint32_t)(n / es),
						   (uint32_t)t.fanout,
						   (uint32_t)me);
			d->own = own ? own + off : NULL;
			d->slots = slots;
			d->stride = stride;
			d->children = (uint32_t)nch;
			d->errvec_out = NULL;
			if (parent >= 0) {
				*uh = d->hdr;
				d->acc = uh + 1;
				d->errvec_out = &uh->errvec;
			} else {
				d->acc = op->result ? (char *)op->result + off
						    : NULL;
			}
			for (i = 0; !ret && i < nch; i++)
				ret = tnbc_sched_recv(
					s, TNBC_SCHED_ARM, 1, TNBC_SEG_IN(g),
					tnbc_tree_child(&t, me, i), sup,
					slots + (size_t)i * stride, stride);
			/* a leaf's fold is its own values: copied now */
			if (!nch && parent >= 0 && n)
				memcpy(uh + 1, own + off, n);
			else if (!ret)
				ret = tnbc_sched_fn(
					s, &s->c[TNBC_SEG_IN(g)], (uint64_t)nch,
					parent >= 0 || fan ? TNBC_SEG_FOLD(g)
							   : TNBC_SEG_END,
					tnbc_desc_red_fire, d);
			if (!ret && parent >= 0)
				ret = tnbc_sched_send(s,
						      nch ? TNBC_SEG_FOLD(g)
							  : TNBC_SCHED_ARM,
						      1, TNBC_SEG_END, parent,
						      sup, uh, sizeof(*uh) + n);
		}
		/* what the way down waits for */
		rc = parent >= 0 ? TNBC_SEG_DOWN(g)
		     : up	 ? TNBC_SEG_FOLD(g)
				 : TNBC_SCHED_ARM;
		if (!ret && down && parent >= 0)
			ret = tnbc_sched_recv(
				s, TNBC_SCHED_ARM, 1,
				nch ? TNBC_SEG_DOWN(g) : TNBC_SEG_END, parent,
				sdown, dbuf ? dbuf + off : NULL, n);
		for (i = 0; !ret && down && i < nch; i++)
			ret = tnbc_sched_send(s, rc, 1, TNBC_SEG_END,
					      tnbc_tree_child(&t, me, i), sdown,
					      dbuf ? dbuf + off : NULL, n);
	}
	free(table);
	if (!ret)
		ret = tnbc_sched_start(s, TNBC_SEG_END, nseg * per);
	if (ret)
		tnbc_sched_abort(s);
	return ret;
}
