/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The maths of PLP, seed 001's alltoall for hosts of many processes:
 * which members lead, which pairs of hosts each leader carries, and
 * where every slice sits in the messages between them.  Pure maths,
 * apart from the engine and unit-tested alone (tnbc_alg_plp.c runs it).
 *
 * Members are grouped by host; a host's members, in member order, have
 * local numbers 0 .. n_h - 1.  With L leaders asked for, host h has
 * L_h = min(L, n_h): its members 0 .. L_h - 1 lead.  The slices between
 * hosts h and g travel as one message each way, carried on h by leader
 * (h + g) mod L_h and on g by leader (h + g) mod L_g: every member finds
 * both with no table, and a host's pairs spread evenly over its leaders.
 *
 * Messages of host h's leader k (its "share": the hosts g it carries,
 * in ascending order, each taking n_g slices; A_k slices in all):
 *  - up: each member of h sends k one message of A_k slices, for each g
 *    of the share its slices for g's members in their order;
 *  - across: k sends g n_h * n_g slices, [source member of h][member of
 *    g], and receives the same from g's leader, [member of g][member of
 *    h];
 *  - down: k sends each member of h one message laid out as up, for
 *    each g of the share the slices g's members sent it.
 * Offsets count slices: tnbc_plp_plan gives, for one host, each other
 * host's leader and its offset in that leader's up and down messages.
 */
#ifndef TNBC_PLP_MAP_H
#define TNBC_PLP_MAP_H

#include <stddef.h>

struct tnbc_plp_map {
	int size, nhosts;
	const int *host; /* member -> host, 0 .. nhosts - 1 */
	const int *first; /* host h's members: ord[first[h] .. first[h+1]) */
	const int *ord; /* members grouped by host, each in member order */
	const int *local; /* member -> its number on its host */
	int nmax; /* the most members a host has */
};

/* ints a map of size members on nhosts hosts needs in its table. */
size_t tnbc_plp_map_ints(int size, int nhosts);
/* 0, or -FI_EINVAL for a host out of range or a host with no member.
 * table must outlive the map. */
int tnbc_plp_map_init(struct tnbc_plp_map *m, int size, const int *host,
		      int nhosts, int *table);

static inline int tnbc_plp_n(const struct tnbc_plp_map *m, int h)
{
	return m->first[h + 1] - m->first[h];
}

/* Member number i of host h. */
static inline int tnbc_plp_member(const struct tnbc_plp_map *m, int h, int i)
{
	return m->ord[m->first[h] + i];
}

/* How many of host h's members lead when L are asked for. */
static inline int tnbc_plp_leaders(const struct tnbc_plp_map *m, int h, int L)
{
	int n = tnbc_plp_n(m, h);

	return L < n ? L : n;
}

/* The local number of the leader of host h that carries h <-> g. */
static inline int tnbc_plp_carrier(const struct tnbc_plp_map *m, int h, int g,
				   int L)
{
	return (h + g) % tnbc_plp_leaders(m, h, L);
}

/* Host h's plan: for every other host g, lead[g] (the carrier's local
 * number) and off[g] (g's first slice in that leader's up and down
 * messages); share[k], the slices of leader k's up and down messages
 * (L_h of them).  lead[h] is -1. */
void tnbc_plp_plan(const struct tnbc_plp_map *m, int h, int L, int *lead,
		   size_t *off, size_t *share);

/* The number of leaders for slices of len bytes: the fewest that keep
 * each leader's bytes across, n_h * A_k * len at the largest host, at
 * most leader_bytes (at least 1, at most nmax).  Every member computes
 * the same from the same map. */
int tnbc_plp_choose(const struct tnbc_plp_map *m, size_t len,
		    size_t leader_bytes);

/* One member's operation: its plan and buffers (a schedule's scratch:
 * the plan, then the buffers, which the plan sizes). */
/* One operation's plan and buffers, in its schedule's scratch. */
struct tnbc_plp_op {
	struct tnbc_plp_map map;
	size_t len; /* bytes of a slice */
	int h; /* this member's host */
	int me; /* this member's local number */
	int lh; /* leaders of the host */
	int lead; /* this member's leader number with a share, or -1 */
	const char *in;
	char *out;
	int *carrier; /* per host: its carrier's local number (plan) */
	size_t *off; /* per host: its slices' offset in up and down */
	size_t *share; /* per leader: slices of its up and down messages */
	size_t *upoff; /* per leader: its up (and down) in up, down */
	size_t *xoff; /* per host of the share: its across in xout, xin */
	char *up, *down; /* size - n_h slices each */
	/* a leader's: n_h * share slices each */
	char *gath, *xout, *xin, *dist;
};

/* Slice number slice of a buffer of len-byte slices. */
static inline char *tnbc_plp_at(char *buf, size_t slice, size_t len)
{
	return buf + slice * len;
}

/* The first host from g on that this member's leader share carries
 * (nhosts: none left); a member that leads nothing carries none. */
static inline int tnbc_plp_carried(const struct tnbc_plp_op *p, int g)
{
	if (p->lead < 0)
		return p->map.nhosts;
	while (g < p->map.nhosts && (g == p->h || p->carrier[g] != p->lead))
		g++;
	return g;
}

/* Bytes of the plan of a group of size members on nhosts hosts. */
size_t tnbc_plp_plan_bytes(int size, int nhosts, int L);
/* Makes member rank's plan in scratch (tnbc_plp_plan_bytes of it): 0,
 * or -FI_EINVAL for hosts that do not add up.  Sets neither in, out nor
 * the buffers. */
int tnbc_plp_plan_at(char *scratch, int size, const int *host, int nhosts,
		     int rank, int L, size_t len);
/* The buffers' bytes, which the plan sizes, laid out from base (NULL:
 * only counted); SIZE_MAX when they would not fit a size_t. */
size_t tnbc_plp_data_at(struct tnbc_plp_op *p, char *base);
/* The steps, each a TNBC_TRIG_FN on a struct tnbc_plp_op (always 0):
 * pack in into the up messages (a leader's own into its gather);
 * repack a leader's gathered ups into its across messages; distribute
 * the across messages received into the downs (a leader's own into
 * down); unpack the downs into out. */
int tnbc_plp_pack(void *arg);
int tnbc_plp_repack(void *arg);
int tnbc_plp_distribute(void *arg);
int tnbc_plp_unpack(void *arg);

#endif /* TNBC_PLP_MAP_H */
