/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * PLP's maths (coll/tnbc_plp_map.c), alone: host maps of every shape up
 * to 24 members on 6 hosts (members interleaved, hosts uneven), every
 * number of leaders; each plan's carriers and offsets; then a whole
 * alltoall moved by the real pack, repack, distribute and unpack steps,
 * the messages between them copied here as the schedule would send
 * them, and every slice checked where it lands.  How many leaders each
 * size gets (tnbc_plp_choose), and bad maps.
 */
#include "tnbc_unit.h"

#include <stdlib.h>

#include "coll/tnbc_plp_map.h"

/* A map of size members on nhosts hosts drawn from seed (every host
 * has a member; the rest go anywhere). */
static void plp_hosts(int *host, int size, int nhosts, unsigned seed)
{
	for (int j = 0; j < size; j++)
		host[j] = j < nhosts ? j : (int)(rand_r(&seed) % nhosts);
	/* shuffle, so hosts interleave in member order */
	for (int j = size - 1; j > 0; j--) {
		int r = (int)(rand_r(&seed) % (unsigned)(j + 1)), t = host[j];

		host[j] = host[r];
		host[r] = t;
	}
}

static void plp_check_plan(const struct tnbc_plp_map *m, int L)
{
	int lead[8];
	size_t off[8], share[64], total;

	for (int h = 0; h < m->nhosts; h++) {
		int lh = tnbc_plp_leaders(m, h, L);

		ck_assert_int_ge(lh, 1);
		ck_assert_int_le(lh, tnbc_plp_n(m, h));
		tnbc_plp_plan(m, h, L, lead, off, share);
		total = 0;
		for (int k = 0; k < lh; k++)
			total += share[k];
		ck_assert_uint_eq(total, (size_t)(m->size - tnbc_plp_n(m, h)));
		ck_assert_int_eq(lead[h], -1);
		for (int g = 0; g < m->nhosts; g++) {
			if (g == h)
				continue;
			/* the other side's carrier of the pair exists */
			ck_assert_int_lt(tnbc_plp_carrier(m, g, h, L),
					 tnbc_plp_leaders(m, g, L));
			ck_assert_int_ge(lead[g], 0);
			ck_assert_int_lt(lead[g], lh);
			ck_assert_uint_le(off[g] + (size_t)tnbc_plp_n(m, g),
					  share[lead[g]]);
			/* no two hosts of one share overlap */
			for (int x = 0; x < g; x++)
				if (x != h && lead[x] == lead[g])
					ck_assert(off[x] + (size_t)tnbc_plp_n(
								   m, x) <=
							  off[g] ||
						  off[g] + (size_t)tnbc_plp_n(
								   m, g) <=
							  off[x]);
		}
	}
}

/* One alltoall of len-byte slices among the map's members with L
 * leaders, moved by the real steps; every slice checked. */
static void plp_move(const int *host, int size, int nhosts, int L, size_t len)
{
	size_t plan = tnbc_plp_plan_bytes(size, nhosts, L);
	struct tnbc_plp_op **p = calloc((size_t)size, sizeof(*p));
	char **in = calloc((size_t)size, sizeof(*in));
	char **out = calloc((size_t)size, sizeof(*out));

	ck_assert(p && in && out);
	for (int r = 0; r < size; r++) {
		char *s = malloc(plan);
		size_t data;

		ck_assert(s);
		ck_assert_int_eq(
			tnbc_plp_plan_at(s, size, host, nhosts, r, L, len), 0);
		data = tnbc_plp_data_at((void *)s, NULL);
		s = realloc(s, plan + data);
		ck_assert(s);
		/* the plan's pointers point into s: make it again there */
		ck_assert_int_eq(
			tnbc_plp_plan_at(s, size, host, nhosts, r, L, len), 0);
		p[r] = (void *)s;
		tnbc_plp_data_at(p[r], s + plan);
		in[r] = malloc((size_t)size * len);
		out[r] = malloc((size_t)size * len);
		ck_assert(in[r] && out[r]);
		for (size_t i = 0; i < (size_t)size * len; i++)
			in[r][i] = (char)(r * 131 + (int)i * 7 + 1);
		memset(out[r], 0, (size_t)size * len);
		p[r]->in = in[r];
		p[r]->out = out[r];
	}
	/* within a host: straight, and the member's own slice */
	for (int r = 0; r < size; r++)
		for (int j = 0; j < size; j++)
			if (host[j] == host[r])
				memcpy(out[j] + (size_t)r * len,
				       in[r] + (size_t)j * len, len);
	for (int r = 0; r < size; r++) {
		/* a leader carries something, or it would send empty downs
		 * nobody waits for */
		if (p[r]->lead >= 0)
			ck_assert_uint_gt(p[r]->share[p[r]->lead], 0);
		ck_assert_int_eq(tnbc_plp_pack(p[r]), 0);
	}
	/* up: each member's message for leader k, into k's gather */
	for (int r = 0; r < size; r++) {
		const struct tnbc_plp_map *m = &p[r]->map;
		int h = host[r];

		for (int k = 0; k < p[r]->lh; k++) {
			int l = tnbc_plp_member(m, h, k);
			size_t sh = p[r]->share[k];

			if (!sh || k == p[r]->me)
				continue;
			ck_assert_int_eq(p[l]->lead, k);
			memcpy(tnbc_plp_at(p[l]->gath, (size_t)p[r]->me * sh,
					   len),
			       tnbc_plp_at(p[r]->up, p[r]->upoff[k], len),
			       sh * len);
		}
	}
	for (int r = 0; r < size; r++)
		if (p[r]->lead >= 0)
			ck_assert_int_eq(tnbc_plp_repack(p[r]), 0);
	/* across: leader to the other host's carrier of the pair */
	for (int r = 0; r < size; r++) {
		const struct tnbc_plp_map *m = &p[r]->map;
		int h = host[r];

		if (p[r]->lead < 0)
			continue;
		for (int g = 0; g < nhosts; g++) {
			int peer;
			size_t bytes;

			if (g == h || p[r]->carrier[g] != p[r]->lead)
				continue;
			peer = tnbc_plp_member(m, g,
					       tnbc_plp_carrier(m, g, h, L));
			ck_assert_int_eq(p[peer]->carrier[h], p[peer]->lead);
			bytes = (size_t)tnbc_plp_n(m, h) *
				(size_t)tnbc_plp_n(m, g) * len;
			memcpy(tnbc_plp_at(p[peer]->xin, p[peer]->xoff[h], len),
			       tnbc_plp_at(p[r]->xout, p[r]->xoff[g], len),
			       bytes);
		}
	}
	for (int r = 0; r < size; r++)
		if (p[r]->lead >= 0)
			ck_assert_int_eq(tnbc_plp_distribute(p[r]), 0);
	/* down: each leader's message for each other member of its host */
	for (int r = 0; r < size; r++) {
		const struct tnbc_plp_map *m = &p[r]->map;
		size_t sh;

		if (p[r]->lead < 0)
			continue;
		sh = p[r]->share[p[r]->lead];
		for (int i = 0; i < tnbc_plp_n(m, host[r]); i++) {
			int j = tnbc_plp_member(m, host[r], i);

			if (j == r)
				continue;
			memcpy(tnbc_plp_at(p[j]->down, p[j]->upoff[p[r]->lead],
					   len),
			       tnbc_plp_at(p[r]->dist, (size_t)i * sh, len),
			       sh * len);
		}
	}
	for (int r = 0; r < size; r++)
		ck_assert_int_eq(tnbc_plp_unpack(p[r]), 0);
	for (int r = 0; r < size; r++) {
		for (int j = 0; j < size; j++)
			if (memcmp(out[r] + (size_t)j * len,
				   in[j] + (size_t)r * len, len))
				ck_abort_msg("%d members on %d hosts, %d "
					     "leaders, %zu B: member %d's "
					     "slice from %d is wrong",
					     size, nhosts, L, len, r, j);
	}
	for (int r = 0; r < size; r++) {
		free(p[r]);
		free(in[r]);
		free(out[r]);
	}
	free(p);
	free(in);
	free(out);
}

START_TEST(plp_shapes)
{
	int host[24], table[128];
	struct tnbc_plp_map m;

	for (int size = 1; size <= 24; size++)
		for (int nhosts = 1; nhosts <= 6 && nhosts <= size; nhosts++)
			for (unsigned seed = 1; seed <= 4; seed++) {
				plp_hosts(host, size, nhosts,
					  seed * 977u + (unsigned)size);
				ck_assert_uint_le(
					tnbc_plp_map_ints(size, nhosts),
					sizeof(table) / sizeof(table[0]));
				ck_assert_int_eq(tnbc_plp_map_init(&m, size,
								   host, nhosts,
								   table),
						 0);
				for (int j = 0; j < size; j++)
					ck_assert_int_eq(
						tnbc_plp_member(&m, host[j],
								m.local[j]),
						j);
				for (int L = 1; L <= m.nmax + 1; L++)
					plp_check_plan(&m, L);
			}
}
END_TEST

START_TEST(plp_moves)
{
	static const size_t lens[] = {1, 7, 48};
	int host[24];

	for (int size = 2; size <= 14; size += 3)
		for (int nhosts = 2; nhosts <= 4 && nhosts <= size; nhosts++)
			for (int L = 1; L <= 4; L++)
				for (size_t i = 0; i < 3; i++) {
					plp_hosts(host, size, nhosts,
						  (unsigned)(size * 31 +
							     nhosts * 7 + L));
					plp_move(host, size, nhosts, L,
						 lens[i]);
				}
	/* the shapes the namespace tests run: 3 hosts x 3, uneven 3+1+1 */
	{
		int h9[9] = {0, 0, 0, 1, 1, 1, 2, 2, 2};
		int h5[5] = {0, 0, 0, 1, 2};

		for (int L = 1; L <= 3; L++) {
			plp_move(h9, 9, 3, L, 4096);
			plp_move(h5, 5, 3, L, 48);
		}
	}
}
END_TEST

START_TEST(plp_choose)
{
	int h9[9] = {0, 0, 0, 1, 1, 1, 2, 2, 2}, table[64];
	struct tnbc_plp_map m;

	ck_assert_int_eq(tnbc_plp_map_init(&m, 9, h9, 3, table), 0);
	/* a host's bytes across: 3 members x 6 elsewhere x len */
	ck_assert_int_eq(tnbc_plp_choose(&m, 1, 16384), 1);
	ck_assert_int_eq(tnbc_plp_choose(&m, 910, 16384), 1);
	ck_assert_int_eq(tnbc_plp_choose(&m, 911, 16384), 2);
	ck_assert_int_eq(tnbc_plp_choose(&m, 1820, 16384), 2);
	ck_assert_int_eq(tnbc_plp_choose(&m, 1821, 16384), 3);
	/* never more than a host has */
	ck_assert_int_eq(tnbc_plp_choose(&m, 1 << 20, 16384), 3);
	ck_assert_int_eq(tnbc_plp_choose(&m, 8, 0), 3);
}
END_TEST

START_TEST(plp_bad_maps)
{
	int host[4] = {0, 1, 1, 3}, table[64];
	struct tnbc_plp_map m;
	_Alignas(64) char plan[4096];

	/* host 2 has no member; a host out of range; more hosts than
	 * members */
	ck_assert_int_eq(tnbc_plp_map_init(&m, 4, host, 4, table), -FI_EINVAL);
	ck_assert_int_eq(tnbc_plp_map_init(&m, 4, host, 3, table), -FI_EINVAL);
	host[3] = -1;
	ck_assert_int_eq(tnbc_plp_map_init(&m, 4, host, 2, table), -FI_EINVAL);
	host[3] = 0;
	ck_assert_int_eq(tnbc_plp_map_init(&m, 4, host, 5, table), -FI_EINVAL);
	ck_assert_int_eq(tnbc_plp_map_init(&m, 4, host, 2, table), 0);
	ck_assert_uint_le(tnbc_plp_plan_bytes(4, 2, 2), sizeof(plan));
	/* no leader, or a member out of range */
	ck_assert_int_eq(tnbc_plp_plan_at(plan, 4, host, 2, 0, 0, 8),
			 -FI_EINVAL);
	ck_assert_int_eq(tnbc_plp_plan_at(plan, 4, host, 2, 4, 1, 8),
			 -FI_EINVAL);
	ck_assert_int_eq(tnbc_plp_plan_at(plan, 4, host, 2, 3, 2, 8), 0);
	/* buffers past what a size_t counts: refused, not wrapped */
	ck_assert_int_eq(tnbc_plp_plan_at(plan, 4, host, 2, 0, 1, SIZE_MAX / 2),
			 0);
	ck_assert_uint_eq(tnbc_plp_data_at((void *)plan, NULL), SIZE_MAX);
}
END_TEST

Suite *tu_plp_suite(void)
{
	Suite *s = suite_create("plp");
	TCase *tc = tcase_create("plp");

	tcase_add_test(tc, plp_shapes);
	tcase_add_test(tc, plp_moves);
	tcase_add_test(tc, plp_choose);
	tcase_add_test(tc, plp_bad_maps);
	suite_add_tcase(s, tc);
	return s;
}
