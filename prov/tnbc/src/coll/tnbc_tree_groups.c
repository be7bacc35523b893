/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Trees over members in groups (one group per host): a collective's
 * packets cross between groups only along a tree of the groups' leaders,
 * so a group of n members sends one partial result up and takes one
 * result down instead of n.  See tnbc_tree.h.
 *
 * Counted from the root (r = (member - root) mod size, as in the k-ary
 * tree), a group's leader is its first member, so the root leads its
 * own.  The leaders, in that order, form a k-ary tree; so do the members
 * of each group, in that order, under their leader.  A member's children
 * are those of its group's tree first, then, for a leader, those of the
 * leaders' tree: every member builds the same tree from the same
 * groups, and so folds in the same order.  Linear in the group's size.
 */
#include <stdint.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "coll/tnbc_tree.h"

size_t tnbc_tree_groups_ints(int size, int ngroups)
{
	return 6 * (size_t)size + 4 * (size_t)ngroups + 2;
}

int tnbc_tree_init_groups(struct tnbc_tree *t, int size, int root, int degree,
			  const int *group, int ngroups, int *table)
{
	/* what t keeps, then scratch */
	int *parent = table, *first = parent + size, *kids = first + size + 1;
	int *pos = kids + size, *ord = pos + size, *cur = ord + size;
	int *start = cur + size, *fill = start + ngroups + 1;
	int *lidx = fill + ngroups, *leaders = lidx + ngroups;
	int nlead = 0;

	if (tnbc_tree_init(t, size, root, degree) || ngroups < 1)
		return -FI_EINVAL;
	for (int m = 0; m < size; m++)
		if (group[m] < 0 || group[m] >= ngroups)
			return -FI_EINVAL;
	/* each group's members in root order: ord[start[g] ..] */
	memset(start, 0, (size_t)(ngroups + 1) * sizeof(*start));
	for (int m = 0; m < size; m++)
		start[group[m] + 1]++;
	for (int g = 0; g < ngroups; g++)
		start[g + 1] += start[g];
	memcpy(fill, start, (size_t)ngroups * sizeof(*fill));
	for (int r = 0; r < size; r++) {
		int m = (r + root) % size, g = group[m];

		pos[m] = fill[g] - start[g];
		ord[fill[g]++] = m;
		if (!pos[m]) {
			lidx[g] = nlead;
			leaders[nlead++] = m;
		}
	}
	for (int m = 0; m < size; m++) {
		int g = group[m], li = lidx[g];

		if (pos[m])
			parent[m] = ord[start[g] + (pos[m] - 1) / degree];
		else
			parent[m] = li ? leaders[(li - 1) / degree] : -1;
	}
	/* children: the group's, then the leaders', each in root order */
	memset(first, 0, (size_t)(size + 1) * sizeof(*first));
	for (int m = 0; m < size; m++)
		if (parent[m] >= 0)
			first[parent[m] + 1]++;
	t->fanout = 1;
	for (int m = 0; m < size; m++) {
		if (first[m + 1] > t->fanout)
			t->fanout = first[m + 1];
		first[m + 1] += first[m];
	}
	memcpy(cur, first, (size_t)size * sizeof(*cur));
	for (int pass = 0; pass < 2; pass++)
		for (int r = 0; r < size; r++) {
			int m = (r + root) % size, p = parent[m];

			if (p >= 0 && (group[m] == group[p]) == !pass)
				kids[cur[p]++] = m;
		}
	t->parent_of = parent;
	t->first = first;
	t->kids = kids;
	return 0;
}
