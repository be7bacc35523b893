/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * k-ary tree maths for the collectives (see tnbc_tree.h).  Positions are
 * computed in 64 bits: degree * r + degree overflows an int long before
 * either does.
 */
#include <stdint.h>

#include <rdma/fi_errno.h>

#include "coll/tnbc_tree.h"

static int64_t tnbc_tree_rel(const struct tnbc_tree *t, int member)
{
	return ((int64_t)member - t->root + t->size) % t->size;
}

static int tnbc_tree_abs(const struct tnbc_tree *t, int64_t rel)
{
	return (int)((rel + t->root) % t->size);
}

static int tnbc_tree_bad(const struct tnbc_tree *t, int member)
{
	return member < 0 || member >= t->size;
}

int tnbc_tree_init(struct tnbc_tree *t, int size, int root, int degree)
{
	if (size < 1 || degree < 1 || root < 0 || root >= size)
		return -FI_EINVAL;
	t->size = size;
	t->root = root;
	t->degree = degree;
	t->fanout = degree;
	t->parent_of = t->first = t->kids = NULL;
	return 0;
}

int tnbc_tree_parent(const struct tnbc_tree *t, int member)
{
	int64_t r;

	if (tnbc_tree_bad(t, member))
		return -FI_EINVAL;
	if (t->kids)
		return t->parent_of[member];
	r = tnbc_tree_rel(t, member);
	return r ? tnbc_tree_abs(t, (r - 1) / t->degree) : -1;
}

int tnbc_tree_nchildren(const struct tnbc_tree *t, int member)
{
	int64_t first, n;

	if (tnbc_tree_bad(t, member))
		return -FI_EINVAL;
	if (t->kids)
		return t->first[member + 1] - t->first[member];
	first = (int64_t)t->degree * tnbc_tree_rel(t, member) + 1;
	if (first >= t->size)
		return 0;
	n = t->size - first;
	return n < t->degree ? (int)n : t->degree;
}

int tnbc_tree_child(const struct tnbc_tree *t, int member, int i)
{
	int n = tnbc_tree_nchildren(t, member);

	if (n < 0 || i < 0 || i >= n)
		return -FI_EINVAL;
	if (t->kids)
		return t->kids[t->first[member] + i];
	return tnbc_tree_abs(t, (int64_t)t->degree * tnbc_tree_rel(t, member) +
					1 + i);
}

int tnbc_tree_depth(const struct tnbc_tree *t, int member)
{
	int64_t r;
	int d = 0;

	if (tnbc_tree_bad(t, member))
		return -FI_EINVAL;
	if (t->kids) {
		for (int m = t->parent_of[member]; m >= 0; m = t->parent_of[m])
			d++;
		return d;
	}
	for (r = tnbc_tree_rel(t, member); r; r = (r - 1) / t->degree)
		d++;
	return d;
}

int tnbc_tree_height(const struct tnbc_tree *t)
{
	if (t->kids) {
		int h = 0;

		for (int m = 0; m < t->size; m++)
			if (tnbc_tree_depth(t, m) > h)
				h = tnbc_tree_depth(t, m);
		return h;
	}
	/* depth never falls as the position grows: the last is deepest */
	return tnbc_tree_depth(t, tnbc_tree_abs(t, t->size - 1));
}

int tnbc_tree_subtree(const struct tnbc_tree *t, int member)
{
	int64_t first, last, n = 0;

	if (tnbc_tree_bad(t, member))
		return -FI_EINVAL;
	if (t->kids) {
		/* the members member is an ancestor of, itself included */
		for (int m = 0; m < t->size; m++)
			for (int a = m; a >= 0; a = t->parent_of[a])
				if (a == member) {
					n++;
					break;
				}
		return (int)n;
	}
	/* one level at a time: positions first .. last of the subtree */
	first = last = tnbc_tree_rel(t, member);
	while (first < t->size) {
		if (last >= t->size)
			last = t->size -
			       1; /* and the next level stays in 64 bits */
		n += last - first + 1;
		first = first * t->degree + 1;
		last = last * t->degree + t->degree;
	}
	return (int)n;
}

void tnbc_tree_segments(size_t len, size_t es, size_t pref, size_t max_segs,
			size_t *seg, size_t *nseg)
{
	size_t s = pref, min = (len + max_segs - 1) / max_segs;

	if (len <= pref) {
		*seg = len;
		*nseg = 1;
		return;
	}
	if (s < min)
		s = min;
	s = (s + es - 1) / es * es;
	*seg = s;
	*nseg = (len + s - 1) / s;
}
