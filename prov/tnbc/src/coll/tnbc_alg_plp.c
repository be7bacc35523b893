/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Alltoall of small slices for groups whose hosts hold several members:
 * seed 001's PLP.  Slices between members of one host go straight, as
 * in the direct exchange; those between hosts are aggregated through
 * shared memory at leaders, so that each pair of hosts exchanges one
 * message each way instead of n_h * n_g, and the number of leaders per
 * host follows the slice size (FI_TNBC_COLL_PLP_BYTES: the fewest that
 * keep each leader's bytes across under it), since any fixed number is
 * wrong for some size: one leader serialises the packing and the
 * link's messages, many leaders multiply the shared-memory ones.
 * FI_TNBC_COLL_PLP_LEADERS pins the number.  The layout of every
 * message is tnbc_plp_map.h's; that maths is unit-tested alone.
 *
 * Counters (TNBC_SCHED_C1 .. C3, then PLP_*):
 *   receive slices of the host's other members, C1            (ARM, 1)
 *   receive down from each other leader with a share, C1      (ARM, 1)
 *   pack the up messages (one per leader), PACKED             (ARM, 1)
 *   send slices to the host's other members, SENT             (ARM, 1)
 *   send up to each other leader with a share, SENT        (PACKED, 1)
 *   unpack the downs into the result, SENT         (C1, local + downs)
 * and a leader with a share:
 *   receive up from each other member of the host, C2         (ARM, 1)
 *   its own up message joins them, C2                      (PACKED, 1)
 *   repack by host, ACROSS_OUT                               (C2, n_h)
 *   send across to each host of the share, SENT        (ACROSS_OUT, 1)
 *   receive across from each host of the share, C3            (ARM, 1)
 *   build the downs, DOWN_OUT                         (C3, its hosts)
 *   send down to each other member, SENT                 (DOWN_OUT, 1)
 *   its own down joins the member's, C1                  (DOWN_OUT, 1)
 * The operation ends when SENT has every send and the unpack.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tnbc_sched.h"
#include "tnbc_plp_map.h"
#include "../tnbc_alu.h"

enum {
	TNBC_PLP_LOCAL = 1, /* between members of one host */
	TNBC_PLP_UP, /* member to leader */
	TNBC_PLP_ACROSS, /* leader to leader */
	TNBC_PLP_DOWN, /* leader to member */
};

enum {
	TNBC_PLP_PACKED = TNBC_SCHED_NCNTR,
	TNBC_PLP_ACROSS_OUT,
	TNBC_PLP_DOWN_OUT,
	TNBC_PLP_SENT,
	TNBC_PLP_NCNTR,
};

bool tnbc_alg_plp_can(const struct tnbc_mc *mc, enum fi_collective_op coll,
		      size_t len)
{
	(void)len;
	return coll == FI_ALLTOALL && mc->host && mc->nhosts >= 2 &&
	       mc->nhosts < mc->size;
}

/* Messages between this member and each other member of its host,
 * bytes each, the i-th at buf + i * bytes (its local number i); counted
 * in *n. */
static int tnbc_plp_locals(struct tnbc_sched *s, const struct tnbc_plp_op *p,
			   bool send, int trig, int comp, unsigned step,
			   char *buf, size_t bytes, uint64_t *n)
{
	int ret = 0;

	for (int i = 0; !ret && i < tnbc_plp_n(&p->map, p->h); i++) {
		int j = tnbc_plp_member(&p->map, p->h, i);
		char *at = buf + (size_t)i * bytes;

		if (i == p->me)
			continue;
		ret = send ? tnbc_sched_send(s, trig, 1, comp, j, step, at,
					     bytes)
			   : tnbc_sched_recv(s, trig, 1, comp, j, step, at,
					     bytes);
		(*n)++;
	}
	return ret;
}

/* A leader's part: gather its host's ups, repack, exchange with the
 * carriers of its share's hosts, hand the downs out; its own down joins
 * the member's receives (C1).  Counts its sends in *nsend. */
static int tnbc_plp_lead(struct tnbc_sched *s, struct tnbc_plp_op *p, int L,
			 uint64_t *nsend)
{
	size_t len = p->len, sh = p->share[p->lead];
	size_t nh = (size_t)tnbc_plp_n(&p->map, p->h);
	uint64_t nup = 0, nacross = 0;
	int ret;

	ret = tnbc_plp_locals(s, p, false, TNBC_SCHED_ARM, TNBC_SCHED_C2,
			      TNBC_PLP_UP, p->gath, sh * len, &nup);
	if (!ret)
		ret = tnbc_sched_copy(s, TNBC_PLP_PACKED, 1, TNBC_SCHED_C2,
				      NULL, NULL, 0);
	if (!ret)
		ret = tnbc_sched_fn(s, &s->c[TNBC_SCHED_C2], nup + 1,
				    TNBC_PLP_ACROSS_OUT, tnbc_plp_repack, p);
	for (int g = tnbc_plp_carried(p, 0); !ret && g < p->map.nhosts;
	     g = tnbc_plp_carried(p, g + 1)) {
		size_t bytes = nh * (size_t)tnbc_plp_n(&p->map, g) * len;
		int peer = tnbc_plp_member(
			&p->map, g, tnbc_plp_carrier(&p->map, g, p->h, L));

		ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C3, peer,
				      TNBC_PLP_ACROSS,
				      tnbc_plp_at(p->xin, p->xoff[g], len),
				      bytes);
		if (!ret)
			ret = tnbc_sched_send(
				s, TNBC_PLP_ACROSS_OUT, 1, TNBC_PLP_SENT, peer,
				TNBC_PLP_ACROSS,
				tnbc_plp_at(p->xout, p->xoff[g], len), bytes);
		nacross++;
		(*nsend)++;
	}
	if (!ret)
		ret = tnbc_sched_fn(s, &s->c[TNBC_SCHED_C3], nacross,
				    TNBC_PLP_DOWN_OUT, tnbc_plp_distribute, p);
	if (!ret)
		ret = tnbc_plp_locals(s, p, true, TNBC_PLP_DOWN_OUT,
				      TNBC_PLP_SENT, TNBC_PLP_DOWN, p->dist,
				      sh * len, nsend);
	if (!ret)
		ret = tnbc_sched_copy(s, TNBC_PLP_DOWN_OUT, 1, TNBC_SCHED_C1,
				      NULL, NULL, 0);
	return ret;
}

/* A schedule whose scratch holds the plan, then the buffers. */
static int tnbc_plp_new(struct tnbc_mc *mc, const struct tnbc_coll_op *op,
			int L, size_t len, struct tnbc_sched **out)
{
	size_t plan = tnbc_plp_plan_bytes(mc->size, mc->nhosts, L), data;
	char *probe = malloc(plan);
	int ret;

	if (!probe)
		return -FI_ENOMEM;
	ret = tnbc_plp_plan_at(probe, mc->size, mc->host, mc->nhosts, mc->rank,
			       L, len);
	data = ret ? 0 : tnbc_plp_data_at((void *)probe, NULL);
	free(probe);
	if (ret)
		return ret;
	if (data > SIZE_MAX - plan)
		return -FI_ENOMEM;
	ret = tnbc_sched_new(mc, TNBC_PLP_NCNTR, plan + data, op->context, out);
	if (ret)
		return ret;
	/* the same inputs make the same plan */
	tnbc_plp_plan_at((*out)->scratch, mc->size, mc->host, mc->nhosts,
			 mc->rank, L, len);
	tnbc_plp_data_at((*out)->scratch, (char *)(*out)->scratch + plan);
	return 0;
}

int tnbc_alg_plp(struct tnbc_mc *mc, const struct tnbc_coll_op *op)
{
	size_t len = tnbc_alu_size(op->dt) * op->count;
	struct tnbc_plp_map map0;
	struct tnbc_plp_op *p;
	struct tnbc_sched *s;
	uint64_t nsend = 0, nlocal = 0, ndown = 0;
	int *tab, L, nh, ret;

	/* the number of leaders: pinned, or by size */
	tab = malloc(tnbc_plp_map_ints(mc->size, mc->nhosts) * sizeof(int));
	if (!tab)
		return -FI_ENOMEM;
	ret = tnbc_plp_map_init(&map0, mc->size, mc->host, mc->nhosts, tab);
	L = ret || tnbc_env.coll_plp_leaders
		    ? (int)tnbc_env.coll_plp_leaders
		    : tnbc_plp_choose(&map0, len, tnbc_env.coll_plp_bytes);
	if (!ret && L > map0.nmax)
		L = map0.nmax;
	free(tab);
	if (ret)
		return ret;
	ret = tnbc_plp_new(mc, op, L, len, &s);
	if (ret)
		return ret;
	s->end = op->end;
	p = s->scratch;
	p->in = op->buf;
	p->out = op->result;
	nh = tnbc_plp_n(&p->map, p->h);

	/* the host's other members: straight */
	for (int i = 0; !ret && i < nh; i++) {
		int j = tnbc_plp_member(&p->map, p->h, i);

		if (i == p->me)
			continue;
		ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C1, j,
				      TNBC_PLP_LOCAL, p->out + (size_t)j * len,
				      len);
		if (!ret)
			ret = tnbc_sched_send(s, TNBC_SCHED_ARM, 1,
					      TNBC_PLP_SENT, j, TNBC_PLP_LOCAL,
					      p->in + (size_t)j * len, len);
		nlocal++;
		nsend++;
	}
	if (!ret && len)
		ret = tnbc_sched_copy(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_NONE,
				      p->out + (size_t)mc->rank * len,
				      p->in + (size_t)mc->rank * len, len);
	/* the leaders' downs, and the ups to them */
	for (int k = 0; !ret && k < p->lh; k++) {
		int j = tnbc_plp_member(&p->map, p->h, k);

		if (!p->share[k] || k == p->me)
			continue;
		ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C1, j,
				      TNBC_PLP_DOWN,
				      tnbc_plp_at(p->down, p->upoff[k], len),
				      p->share[k] * len);
		if (!ret)
			ret = tnbc_sched_send(
				s, TNBC_PLP_PACKED, 1, TNBC_PLP_SENT, j,
				TNBC_PLP_UP,
				tnbc_plp_at(p->up, p->upoff[k], len),
				p->share[k] * len);
		ndown++;
		nsend++;
	}
	if (!ret)
		ret = tnbc_sched_fn(s, &s->c[TNBC_SCHED_ARM], 1,
				    TNBC_PLP_PACKED, tnbc_plp_pack, p);
	if (!ret && p->lead >= 0) {
		ret = tnbc_plp_lead(s, p, L, &nsend);
		ndown++;
	}
	if (!ret)
		ret = tnbc_sched_fn(s, &s->c[TNBC_SCHED_C1], nlocal + ndown,
				    TNBC_PLP_SENT, tnbc_plp_unpack, p);
	if (!ret)
		ret = tnbc_sched_start(s, TNBC_PLP_SENT, nsend + 1);
	if (ret)
		tnbc_sched_abort(s);
	return ret;
}
