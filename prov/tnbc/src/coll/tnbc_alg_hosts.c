/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Allreduce and barrier of a small payload for a group on several hosts
 * with more than one member on some, in two levels of seed 002's
 * descriptors: each host's members send their contributions to the
 * host's leader (its lowest-numbered member), whose descriptor folds
 * them into the host's packet; the leaders send each other their hosts'
 * packets in one hop, and each folds all of them, in host order, into
 * the result it sends down to its host.  Every leader folds the same
 * packets in the same order, so every member gets the same bytes, and
 * repeated runs are bit-identical.
 *
 * On a tree of hosts (tnbc_alg_desc.c) the result crosses between hosts
 * twice, up to the root's host and back; here once, each leader sending
 * H - 1 packets where the tree sends at most degree + 1.  Chosen up to
 * FI_TNBC_COLL_FLAT_HOSTS hosts and one descriptor's payload (48 B);
 * fi_tnbc(7) says how it was measured.
 *
 * A member that is not its host's leader:
 *   send its packet to the leader, C1                           (ARM, 1)
 *   receive the result from the leader, C1                      (ARM, 1)
 *   complete                                                     (C1, 2)
 * A leader with nloc other members on its host, of H hosts:
 *   receive local member i's packet into local slot i, C1       (ARM, 1)
 *   fold its own values and the local slots into the host's
 *     packet, C2                                             (C1, nloc)
 *   send the host's packet to every other leader, C3              (C2, 1)
 *   receive leader j's packet into host slot j, C3              (ARM, 1)
 *   fold the hosts' packets into the result, C4             (C3, 2H - 2)
 *   send the result to each local member, C1                      (C4, 1)
 *   complete                                                (C1, 2 nloc)
 * C1 counts the local packets first, then the results sent down, which
 * all come after the first fold.  The sends across count in C3 with the
 * receives: the second fold then waits for the first, which every send
 * waits for.  A leader alone on its host fills its host's packet when
 * the operation is posted and sends it once armed, and its second fold,
 * counted in C1, ends the operation (C1, 1).
 */
#include <string.h>

#include "tnbc_sched.h"
#include "../tnbc_alu.h"

enum {
	TNBC_HOSTS_UP = 1, /* to the host's leader */
	TNBC_HOSTS_ACROSS, /* between leaders */
	TNBC_HOSTS_DOWN, /* the result, from the leader */
	TNBC_HOSTS_C4 = TNBC_SCHED_NCNTR,
};

/* Each host's leader, its lowest-numbered member, into lead[nhosts]. */
static void tnbc_hosts_leaders(const struct tnbc_mc *mc, int *lead)
{
	for (int h = 0; h < mc->nhosts; h++)
		lead[h] = -1;
	for (int j = mc->size - 1; j >= 0; j--)
		lead[mc->host[j]] = j;
}

bool tnbc_alg_hosts_can(const struct tnbc_mc *mc, enum fi_collective_op coll,
			size_t len)
{
	int on[TNBC_DESC_MAX_FANOUT + 1] = {0};

	if ((coll != FI_ALLREDUCE && coll != FI_BARRIER) || !mc->host ||
	    mc->nhosts < 2 || mc->nhosts >= mc->size ||
	    mc->nhosts > TNBC_DESC_MAX_FANOUT + 1 || len > TNBC_RED_PKT_BYTES)
		return false;
	/* a leader's descriptor folds at most TNBC_DESC_MAX_FANOUT */
	for (int j = 0; j < mc->size; j++)
		if (++on[mc->host[j]] > TNBC_DESC_MAX_FANOUT + 1)
			return false;
	return true;
}

int tnbc_alg_hosts(struct tnbc_mc *mc, const struct tnbc_coll_op *op)
{
	bool barrier = op->coll == FI_BARRIER;
	size_t es = barrier ? 1 : tnbc_alu_size(op->dt);
	size_t len = barrier ? 0 : es * op->count;
	size_t stride = sizeof(struct tnbc_red_pkt);
	int me = mc->rank, hosts = mc->nhosts, nloc = 0, i, j, ret;
	int leads[TNBC_DESC_MAX_FANOUT + 1], lead;
	struct tnbc_red_hdr *pkt, hdr;
	struct tnbc_desc_red *loc, *glob;
	char *lslots, *gslots;
	struct tnbc_sched *s;

	tnbc_hosts_leaders(mc, leads);
	lead = leads[mc->host[me]];
	for (j = 0; j < mc->size; j++)
		nloc += j != me && mc->host[j] == mc->host[me];
	/* a leader's: the host's packet, the local slots, the hosts'
	 * slots, two descriptors; a member's: its own packet */
	if (lead != me)
		ret = tnbc_sched_new(mc, 0, stride, op->context, &s);
	else
		ret = tnbc_sched_new(mc, TNBC_HOSTS_C4 + 1,
				     (1 + (size_t)nloc + (size_t)hosts - 1) *
						     stride +
					     2 * sizeof(struct tnbc_desc_red),
				     op->context, &s);
	if (ret)
		return ret;
	s->end = op->end;
	pkt = s->scratch;
	/* all of it goes out: no stale bytes past the values */
	memset(pkt, 0, stride);
	/* the first level's packets: one degree for all of the group's */
	hdr = tnbc_red_hdr_coll(op, (uint32_t)(len / es), (uint32_t)mc->size,
				(uint32_t)me);

	if (lead != me) {
		*pkt = hdr;
		if (len)
			memcpy(pkt + 1, op->buf, len);
		ret = tnbc_sched_send(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C1, lead,
				      TNBC_HOSTS_UP, pkt, sizeof(*pkt) + len);
		if (!ret)
			ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1,
					      TNBC_SCHED_C1, lead,
					      TNBC_HOSTS_DOWN, op->result, len);
		if (!ret)
			ret = tnbc_sched_start(s, TNBC_SCHED_C1, 2);
		if (ret)
			tnbc_sched_abort(s);
		return ret;
	}

	lslots = (char *)s->scratch + stride;
	gslots = lslots + (size_t)nloc * stride;
	loc = (struct tnbc_desc_red *)(gslots + (size_t)(hosts - 1) * stride);
	glob = loc + 1;
	/* the second level's: the host's number orders the fold */
	glob->hdr = hdr;
	glob->hdr.degree = (uint32_t)(hosts - 1);
	glob->hdr.order = (uint32_t)mc->host[me];
	*pkt = glob->hdr;
	glob->own = len ? (const void *)(pkt + 1) : NULL;
	glob->acc = len ? op->result : NULL;
	glob->errvec_out = NULL;
	glob->slots = gslots;
	glob->stride = stride;
	glob->children = (uint32_t)(hosts - 1);

	*loc = (struct tnbc_desc_red){
		.hdr = hdr,
		.own = len ? op->buf : NULL,
		.acc = len ? (void *)(pkt + 1) : NULL,
		.errvec_out = &pkt->errvec,
		.slots = lslots,
		.stride = stride,
		.children = (uint32_t)nloc,
	};
	for (j = 0, i = 0; !ret && j < mc->size; j++) {
		if (j == me || mc->host[j] != mc->host[me])
			continue;
		ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C1, j,
				      TNBC_HOSTS_UP,
				      lslots + (size_t)i++ * stride, stride);
	}
	if (!ret && nloc)
		ret = tnbc_sched_fn(s, &s->c[TNBC_SCHED_C1], (uint64_t)nloc,
				    TNBC_SCHED_C2, tnbc_desc_red_fire, loc);
	else if (len)
		memcpy(pkt + 1, op->buf, len);
	/* the other leaders, in host order (a slot per host but ours) */
	i = 0;
	for (int h = 0; !ret && h < hosts; h++) {
		if (h == mc->host[me])
			continue;
		j = leads[h];
		ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C3, j,
				      TNBC_HOSTS_ACROSS,
				      gslots + (size_t)i++ * stride, stride);
		if (!ret)
			ret = tnbc_sched_send(
				s, nloc ? TNBC_SCHED_C2 : TNBC_SCHED_ARM, 1,
				TNBC_SCHED_C3, j, TNBC_HOSTS_ACROSS, pkt,
				sizeof(*pkt) + len);
	}
	if (!ret)
		ret = tnbc_sched_fn(s, &s->c[TNBC_SCHED_C3],
				    2 * (uint64_t)(hosts - 1),
				    nloc ? TNBC_HOSTS_C4 : TNBC_SCHED_C1,
				    tnbc_desc_red_fire, glob);
	for (j = 0; !ret && j < mc->size; j++)
		if (j != me && mc->host[j] == mc->host[me])
			ret = tnbc_sched_send(s, TNBC_HOSTS_C4, 1,
					      TNBC_SCHED_C1, j, TNBC_HOSTS_DOWN,
					      op->result, len);
	/* C1 counts the local packets first: the end waits past them */
	if (!ret)
		ret = tnbc_sched_start(s, TNBC_SCHED_C1,
				       nloc ? 2 * (uint64_t)nloc : 1);
	if (ret)
		tnbc_sched_abort(s);
	return ret;
}
