/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The collectives' k-ary tree maths, alone: every group size 1 to 64,
 * every degree 1 to 8, and three roots each; and how a payload is cut
 * into a pipeline's segments.
 */
#include "tnbc_unit.h"

#include "coll/tnbc_tree.h"

/* Every ck_assert of Check writes its place to the runner, passing or
 * not: a few million of them (tree_groups) took longer than the test's
 * timeout on a loaded machine.  These check first and call Check only
 * when the check fails. */
#define TREE_ASSERT_OP(a, op, b)                                               \
	do {                                                                   \
		long tree_a_ = (long)(a), tree_b_ = (long)(b);                 \
		if (!(tree_a_ op tree_b_))                                     \
			ck_abort_msg("%s %s %s: %ld vs %ld", #a, #op, #b,      \
				     tree_a_, tree_b_);                        \
	} while (0)
#define TREE_ASSERT_EQ(a, b) TREE_ASSERT_OP(a, ==, b)
#define TREE_ASSERT_NE(a, b) TREE_ASSERT_OP(a, !=, b)
#define TREE_ASSERT_LT(a, b) TREE_ASSERT_OP(a, <, b)
#define TREE_ASSERT_LE(a, b) TREE_ASSERT_OP(a, <=, b)
#define TREE_ASSERT_GT(a, b) TREE_ASSERT_OP(a, >, b)
#define TREE_ASSERT_GE(a, b) TREE_ASSERT_OP(a, >=, b)
#define TREE_ASSERT_MSG(c, ...)                                                \
	do {                                                                   \
		if (!(c))                                                      \
			ck_abort_msg(__VA_ARGS__);                             \
	} while (0)

/* Every member but the root has one parent, which counts it among its
 * children once; depths and subtree sizes agree with the edges. */
static void tree_check(const struct tnbc_tree *t)
{
	int n = t->size, edges = 0, height = 0;

	TREE_ASSERT_EQ(tnbc_tree_parent(t, t->root), -1);
	TREE_ASSERT_EQ(tnbc_tree_depth(t, t->root), 0);
	TREE_ASSERT_EQ(tnbc_tree_subtree(t, t->root), n);
	for (int m = 0; m < n; m++) {
		int nc = tnbc_tree_nchildren(t, m), sub = 1, p, d, steps = 0;

		TREE_ASSERT_GE(nc, 0);
		TREE_ASSERT_LE(nc, t->fanout);
		edges += nc;
		for (int i = 0; i < nc; i++) {
			int c = tnbc_tree_child(t, m, i);

			TREE_ASSERT_GE(c, 0);
			TREE_ASSERT_LT(c, n);
			TREE_ASSERT_EQ(tnbc_tree_parent(t, c), m);
			TREE_ASSERT_EQ(tnbc_tree_depth(t, c),
				       tnbc_tree_depth(t, m) + 1);
			sub += tnbc_tree_subtree(t, c);
		}
		TREE_ASSERT_EQ(tnbc_tree_child(t, m, nc), -FI_EINVAL);
		TREE_ASSERT_EQ(tnbc_tree_subtree(t, m), sub);
		if (m == t->root)
			continue;
		p = tnbc_tree_parent(t, m);
		TREE_ASSERT_GE(p, 0);
		TREE_ASSERT_LT(p, n);
		TREE_ASSERT_NE(p, m);
		/* p's children hold m once */
		d = 0;
		for (int i = 0; i < tnbc_tree_nchildren(t, p); i++)
			d += tnbc_tree_child(t, p, i) == m;
		TREE_ASSERT_EQ(d, 1);
		/* up to the root in exactly depth steps */
		for (int q = m; q != t->root; q = tnbc_tree_parent(t, q))
			TREE_ASSERT_LE(++steps, n);
		TREE_ASSERT_EQ(steps, tnbc_tree_depth(t, m));
		if (steps > height)
			height = steps;
	}
	TREE_ASSERT_EQ(edges, n - 1);
	TREE_ASSERT_EQ(tnbc_tree_height(t), height);
}

START_TEST(tree_shapes)
{
	for (int n = 1; n <= 64; n++)
		for (int k = 1; k <= 8; k++) {
			const int roots[] = {0, n / 2, n - 1};

			for (int i = 0; i < 3; i++) {
				struct tnbc_tree t;

				TREE_ASSERT_EQ(
					tnbc_tree_init(&t, n, roots[i], k), 0);
				tree_check(&t);
			}
		}
}
END_TEST

/* The heights a full k-ary tree gives, and a chain for degree 1. */
START_TEST(tree_heights)
{
	struct tnbc_tree t;

	TREE_ASSERT_EQ(tnbc_tree_init(&t, 1, 0, 2), 0);
	TREE_ASSERT_EQ(tnbc_tree_height(&t), 0);
	TREE_ASSERT_EQ(tnbc_tree_init(&t, 7, 3, 2), 0);
	TREE_ASSERT_EQ(tnbc_tree_height(&t), 2);
	TREE_ASSERT_EQ(tnbc_tree_init(&t, 8, 3, 2), 0);
	TREE_ASSERT_EQ(tnbc_tree_height(&t), 3);
	TREE_ASSERT_EQ(tnbc_tree_init(&t, 64, 0, 4), 0);
	TREE_ASSERT_EQ(tnbc_tree_height(&t), 3);
	TREE_ASSERT_EQ(tnbc_tree_nchildren(&t, 0), 4);
	TREE_ASSERT_EQ(tnbc_tree_init(&t, 10, 9, 1), 0);
	TREE_ASSERT_EQ(tnbc_tree_height(&t), 9);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 0), 9);
	TREE_ASSERT_EQ(tnbc_tree_child(&t, 9, 0), 0);
	/* large groups stay in range: no position overflows an int */
	TREE_ASSERT_EQ(tnbc_tree_init(&t, 2147483647, 5, 2147483647), 0);
	TREE_ASSERT_EQ(tnbc_tree_nchildren(&t, 5), 2147483646);
	TREE_ASSERT_EQ(tnbc_tree_nchildren(&t, 6), 0);
	TREE_ASSERT_EQ(tnbc_tree_subtree(&t, 5), 2147483647);
	TREE_ASSERT_EQ(tnbc_tree_height(&t), 1);
}
END_TEST

START_TEST(tree_bad_input)
{
	struct tnbc_tree t;

	TREE_ASSERT_EQ(tnbc_tree_init(&t, 0, 0, 2), -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_init(&t, -3, 0, 2), -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_init(&t, 4, 0, 0), -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_init(&t, 4, -1, 2), -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_init(&t, 4, 4, 2), -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_init(&t, 4, 1, 2), 0);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 4), -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, -1), -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_nchildren(&t, 4), -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_child(&t, 1, -1), -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_depth(&t, 7), -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_subtree(&t, 7), -FI_EINVAL);
}
END_TEST

/* Segments cover the payload exactly once, in whole elements, never more
 * of them than allowed, and at least the preferred size but the last. */
START_TEST(tree_segments)
{
	const size_t lens[] = {0,     1,	8,	  48,	     49,
			       4096,  65535,	65536,	  65537,     1048576,
			       12345, 1u << 30, 3u << 20, 2047u * 64};
	const size_t ess[] = {1, 4, 8, 16};
	const size_t prefs[] = {64, 1000, 65536};
	size_t seg, n;

	for (size_t a = 0; a < sizeof(lens) / sizeof(lens[0]); a++)
		for (size_t b = 0; b < 4; b++)
			for (size_t c = 0; c < 3; c++) {
				size_t len = lens[a] / ess[b] * ess[b];

				tnbc_tree_segments(len, ess[b], prefs[c], 2047,
						   &seg, &n);
				ck_assert_uint_ge(n, 1);
				ck_assert_uint_le(n, 2047);
				if (len <= prefs[c]) {
					ck_assert_uint_eq(n, 1);
					ck_assert_uint_eq(seg, len);
					continue;
				}
				ck_assert_uint_eq(seg % ess[b], 0);
				ck_assert_uint_ge(seg, prefs[c]);
				ck_assert_uint_ge(n * seg, len);
				ck_assert_uint_lt((n - 1) * seg, len);
			}
	/* 1 MiB of doubles in 64-byte segments: too many, so they grow */
	tnbc_tree_segments(1u << 20, 8, 64, 2047, &seg, &n);
	ck_assert_uint_eq(seg, 520);
	ck_assert_uint_eq(n, 2017);
}
END_TEST

/* A tree of groups: as any tree, and crossing between groups only from
 * a group's leader (its first member counted from the root) to another
 * leader, once per group but the root's. */
static void groups_check(const struct tnbc_tree *t, const int *g)
{
	int n = t->size, cross = 0, groups = 0, most = 0;

	tree_check(t);
	for (int m = 0; m < n; m++) {
		int p = tnbc_tree_parent(t, m), nc = tnbc_tree_nchildren(t, m);
		bool leader = true;

		for (int r = 0; (r + t->root) % n != m; r++)
			if (g[(r + t->root) % n] == g[m])
				leader = false;
		groups += leader;
		TREE_ASSERT_LE(nc, 2 * t->degree);
		if (nc > most)
			most = nc;
		if (p < 0 || g[p] == g[m]) {
			TREE_ASSERT_MSG(p >= 0 || leader, "root not a leader");
			continue;
		}
		TREE_ASSERT_MSG(leader, "member %d leaves its group", m);
		cross++;
	}
	TREE_ASSERT_EQ(cross, groups - 1);
	TREE_ASSERT_EQ(t->fanout, most ? most : 1);
}

/* Pattern pat of n members' groups: blocks of 1 to 4 members (0 to 3),
 * or members dealt round robin over 2 or 3 groups (4, 5); three roots. */
static void groups_try(int n, int k, int pat, int *g, int *table)
{
	const int roots[] = {0, n / 2, n - 1};
	int ng = pat < 4 ? (n + pat) / (pat + 1) : (n < pat - 2 ? n : pat - 2);

	for (int m = 0; m < n; m++)
		g[m] = pat < 4 ? m / (pat + 1) : m % (pat - 2);
	for (int i = 0; i < 3; i++) {
		struct tnbc_tree t;

		TREE_ASSERT_EQ(
			tnbc_tree_init_groups(&t, n, roots[i], k, g, ng, table),
			0);
		groups_check(&t, g);
	}
}

START_TEST(tree_groups)
{
	int g[40], table[6 * 40 + 4 * 40 + 2];

	for (int n = 1; n <= 40; n++)
		for (int k = 1; k <= 8; k++)
			for (int pat = 0; pat < 6; pat++)
				groups_try(n, k, pat, g, table);
}
END_TEST

/* Three hosts of two: each host's second member hangs off its first,
 * and only the leaders' edges cross; the root's children come in the
 * order its own group, then the other leaders. */
START_TEST(tree_groups_hosts)
{
	const int g[6] = {1, 1, 2, 2, 0, 0};
	int table[6 * 6 + 4 * 3 + 2];
	struct tnbc_tree t;

	TREE_ASSERT_EQ(tnbc_tree_init_groups(&t, 6, 0, 8, g, 3, table), 0);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 1), 0);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 2), 0);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 3), 2);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 4), 0);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 5), 4);
	TREE_ASSERT_EQ(tnbc_tree_nchildren(&t, 0), 3);
	TREE_ASSERT_EQ(tnbc_tree_child(&t, 0, 0), 1);
	TREE_ASSERT_EQ(tnbc_tree_child(&t, 0, 1), 2);
	TREE_ASSERT_EQ(tnbc_tree_child(&t, 0, 2), 4);
	TREE_ASSERT_EQ(t.fanout, 3);
	/* rooted at 3: its host leads, 2 under it; 4 and 0 lead the others */
	TREE_ASSERT_EQ(tnbc_tree_init_groups(&t, 6, 3, 8, g, 3, table), 0);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 2), 3);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 4), 3);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 5), 4);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 0), 3);
	TREE_ASSERT_EQ(tnbc_tree_parent(&t, 1), 0);
	TREE_ASSERT_EQ(tnbc_tree_height(&t), 2);
	/* a group out of range, none at all */
	TREE_ASSERT_EQ(tnbc_tree_init_groups(&t, 6, 0, 8, g, 2, table),
		       -FI_EINVAL);
	TREE_ASSERT_EQ(tnbc_tree_init_groups(&t, 6, 0, 8, g, 0, table),
		       -FI_EINVAL);
}
END_TEST

Suite *tu_tree_suite(void)
{
	Suite *s = suite_create("tree");
	TCase *tc = tcase_create("tree");

	tcase_add_test(tc, tree_shapes);
	tcase_add_test(tc, tree_heights);
	tcase_add_test(tc, tree_bad_input);
	tcase_add_test(tc, tree_segments);
	tcase_add_test(tc, tree_groups);
	tcase_add_test(tc, tree_groups_hosts);
	suite_add_tcase(s, tc);
	return s;
}
