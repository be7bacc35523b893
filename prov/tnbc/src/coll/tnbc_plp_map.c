/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * PLP's maths (tnbc_plp_map.h): the hosts' members, their leaders, and
 * the offsets of the messages between them.  Linear in the group's size
 * and hosts; no allocation.
 */
#include <stdint.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "coll/tnbc_plp_map.h"

size_t tnbc_plp_map_ints(int size, int nhosts)
{
	return 2 * (size_t)size + 2 * (size_t)nhosts + 1;
}

int tnbc_plp_map_init(struct tnbc_plp_map *m, int size, const int *host,
		      int nhosts, int *table)
{
	int *first = table, *ord = first + nhosts + 1, *local = ord + size;
	int *fill = local + size;

	if (size < 1 || nhosts < 1 || nhosts > size)
		return -FI_EINVAL;
	memset(first, 0, (size_t)(nhosts + 1) * sizeof(*first));
	for (int j = 0; j < size; j++) {
		if (host[j] < 0 || host[j] >= nhosts)
			return -FI_EINVAL;
		first[host[j] + 1]++;
	}
	m->nmax = 0;
	for (int h = 0; h < nhosts; h++) {
		if (!first[h + 1])
			return -FI_EINVAL;
		if (first[h + 1] > m->nmax)
			m->nmax = first[h + 1];
		first[h + 1] += first[h];
	}
	/* fill[h]: the next place of host h in ord (scratch: ints that
	 * only init uses, past what the map keeps) */
	memcpy(fill, first, (size_t)nhosts * sizeof(*fill));
	for (int j = 0; j < size; j++) {
		local[j] = fill[host[j]] - first[host[j]];
		ord[fill[host[j]]++] = j;
	}
	m->size = size;
	m->nhosts = nhosts;
	m->host = host;
	m->first = first;
	m->ord = ord;
	m->local = local;
	return 0;
}

void tnbc_plp_plan(const struct tnbc_plp_map *m, int h, int L, int *lead,
		   size_t *off, size_t *share)
{
	int lh = tnbc_plp_leaders(m, h, L);

	for (int k = 0; k < lh; k++)
		share[k] = 0;
	for (int g = 0; g < m->nhosts; g++) {
		if (g == h) {
			lead[g] = -1;
			off[g] = 0;
			continue;
		}
		lead[g] = tnbc_plp_carrier(m, h, g, L);
		off[g] = share[lead[g]];
		share[lead[g]] += (size_t)tnbc_plp_n(m, g);
	}
}

int tnbc_plp_choose(const struct tnbc_plp_map *m, size_t len,
		    size_t leader_bytes)
{
	uint64_t most = 0, L;

	/* a host's bytes across: each of its n_h members' slices for the
	 * size - n_h members elsewhere */
	for (int h = 0; h < m->nhosts; h++) {
		uint64_t n = (uint64_t)tnbc_plp_n(m, h);
		uint64_t b = n * ((uint64_t)m->size - n) * len;

		if (b > most)
			most = b;
	}
	if (!leader_bytes)
		return m->nmax;
	L = (most + leader_bytes - 1) / leader_bytes;
	if (L < 1)
		L = 1;
	return L > (uint64_t)m->nmax ? m->nmax : (int)L;
}

static size_t tnbc_plp_align(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

size_t tnbc_plp_plan_bytes(int size, int nhosts, int L)
{
	size_t H = (size_t)nhosts;

	return tnbc_plp_align(sizeof(struct tnbc_plp_op)) +
	       tnbc_plp_align(H * sizeof(int)) +
	       tnbc_plp_align(tnbc_plp_map_ints(size, nhosts) * sizeof(int)) +
	       2 * tnbc_plp_align(H * sizeof(size_t)) +
	       2 * tnbc_plp_align((size_t)(L + 1) * sizeof(size_t));
}

int tnbc_plp_plan_at(char *scratch, int size, const int *host, int nhosts,
		     int rank, int L, size_t len)
{
	struct tnbc_plp_op *p = (void *)scratch;
	size_t H = (size_t)nhosts, at = tnbc_plp_align(sizeof(*p));
	int *table;

	memset(p, 0, sizeof(*p));
	p->carrier = (int *)(scratch + at);
	at += tnbc_plp_align(H * sizeof(int));
	table = (int *)(scratch + at);
	at += tnbc_plp_align(tnbc_plp_map_ints(size, nhosts) * sizeof(int));
	p->off = (size_t *)(scratch + at);
	at += tnbc_plp_align(H * sizeof(size_t));
	p->xoff = (size_t *)(scratch + at);
	at += tnbc_plp_align(H * sizeof(size_t));
	p->share = (size_t *)(scratch + at);
	at += tnbc_plp_align((size_t)(L + 1) * sizeof(size_t));
	p->upoff = (size_t *)(scratch + at);
	if (L < 1 || rank < 0 || rank >= size ||
	    tnbc_plp_map_init(&p->map, size, host, nhosts, table))
		return -FI_EINVAL;
	p->h = host[rank];
	p->me = p->map.local[rank];
	p->lh = tnbc_plp_leaders(&p->map, p->h, L);
	p->len = len;
	tnbc_plp_plan(&p->map, p->h, L, p->carrier, p->off, p->share);
	p->upoff[0] = 0;
	for (int k = 0; k < p->lh; k++)
		p->upoff[k + 1] = p->upoff[k] + p->share[k];
	p->lead = p->me < p->lh && p->share[p->me] ? p->me : -1;
	for (int g = tnbc_plp_carried(p, 0), x = 0; g < nhosts;
	     g = tnbc_plp_carried(p, g + 1)) {
		p->xoff[g] = (size_t)x * (size_t)tnbc_plp_n(&p->map, p->h);
		x += tnbc_plp_n(&p->map, g);
	}
	return 0;
}

/* a * b slices of len bytes, in whole cache lines; SIZE_MAX when that
 * does not fit a size_t */
static size_t tnbc_plp_block(size_t a, size_t b, size_t len)
{
	size_t n;

	if (__builtin_mul_overflow(a, b, &n) ||
	    __builtin_mul_overflow(n, len, &n) || n > SIZE_MAX - 63)
		return SIZE_MAX;
	return tnbc_plp_align(n);
}

size_t tnbc_plp_data_at(struct tnbc_plp_op *p, char *base)
{
	size_t nh = (size_t)tnbc_plp_n(&p->map, p->h);
	size_t rest = tnbc_plp_block((size_t)p->map.size - nh, 1, p->len);
	size_t lead =
		p->lead < 0 ? 0 : tnbc_plp_block(nh, p->share[p->lead], p->len);

	/* 2 rest + 4 lead, which the scratch's size must hold */
	if (rest > SIZE_MAX / 8 || lead > SIZE_MAX / 8)
		return SIZE_MAX;
	if (base) {
		p->up = base;
		p->down = base + rest;
		p->gath = p->down + rest;
		p->xout = p->gath + lead;
		p->xin = p->xout + lead;
		p->dist = p->xin + lead;
	}
	return 2 * rest + 4 * lead;
}

int tnbc_plp_pack(void *arg)
{
	struct tnbc_plp_op *p = arg;
	const struct tnbc_plp_map *m = &p->map;

	for (int g = 0; g < m->nhosts; g++) {
		size_t at;

		if (g == p->h)
			continue;
		at = p->upoff[p->carrier[g]] + p->off[g];
		for (int x = 0; x < tnbc_plp_n(m, g); x++)
			memcpy(tnbc_plp_at(p->up, at + (size_t)x, p->len),
			       p->in + (size_t)tnbc_plp_member(m, g, x) *
					       p->len,
			       p->len);
	}
	if (p->lead >= 0)
		memcpy(tnbc_plp_at(p->gath, (size_t)p->me * p->share[p->lead],
				   p->len),
		       tnbc_plp_at(p->up, p->upoff[p->lead], p->len),
		       p->share[p->lead] * p->len);
	return 0;
}

/* The share's up messages, [member of h][share], into the across
 * messages, per host g [member of h][member of g]. */
int tnbc_plp_repack(void *arg)
{
	struct tnbc_plp_op *p = arg;
	const struct tnbc_plp_map *m = &p->map;
	size_t sh = p->share[p->lead];
	int nh = tnbc_plp_n(m, p->h);

	for (int g = tnbc_plp_carried(p, 0); g < m->nhosts;
	     g = tnbc_plp_carried(p, g + 1)) {
		size_t ng = (size_t)tnbc_plp_n(m, g);

		for (int i = 0; i < nh; i++)
			memcpy(tnbc_plp_at(p->xout, p->xoff[g] + i * ng,
					   p->len),
			       tnbc_plp_at(p->gath, i * sh + p->off[g], p->len),
			       ng * p->len);
	}
	return 0;
}

/* The across messages received, per host g [member of g][member of h],
 * into the downs, [member of h][share]; this leader's own down goes
 * where the others' land. */
int tnbc_plp_distribute(void *arg)
{
	struct tnbc_plp_op *p = arg;
	const struct tnbc_plp_map *m = &p->map;
	size_t sh = p->share[p->lead];
	int nh = tnbc_plp_n(m, p->h);

	for (int g = tnbc_plp_carried(p, 0); g < m->nhosts;
	     g = tnbc_plp_carried(p, g + 1)) {
		int ng = tnbc_plp_n(m, g);

		for (int j = 0; j < nh; j++)
			for (int i = 0; i < ng; i++)
				memcpy(tnbc_plp_at(p->dist,
						   j * sh + p->off[g] + i,
						   p->len),
				       tnbc_plp_at(p->xin,
						   p->xoff[g] + (size_t)i * nh +
							   j,
						   p->len),
				       p->len);
	}
	memcpy(tnbc_plp_at(p->down, p->upoff[p->lead], p->len),
	       tnbc_plp_at(p->dist, (size_t)p->me * sh, p->len), sh * p->len);
	return 0;
}

int tnbc_plp_unpack(void *arg)
{
	struct tnbc_plp_op *p = arg;
	const struct tnbc_plp_map *m = &p->map;

	for (int g = 0; g < m->nhosts; g++) {
		size_t at;

		if (g == p->h)
			continue;
		at = p->upoff[p->carrier[g]] + p->off[g];
		for (int x = 0; x < tnbc_plp_n(m, g); x++)
			memcpy(p->out + (size_t)tnbc_plp_member(m, g, x) *
						p->len,
			       tnbc_plp_at(p->down, at + (size_t)x, p->len),
			       p->len);
	}
	return 0;
}
