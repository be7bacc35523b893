/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * k-ary trees over the members of a group, rooted at any member: the
 * shape seed 002's reduction descriptors run on (children send their
 * partial results up, the root's result comes back down).
 *
 * Members are 0 .. size - 1.  Counted from the root (r = (member - root)
 * mod size), member r's parent is (r - 1) / degree and its children are
 * degree * r + 1 ... degree * r + degree, those below size: a member finds
 * its neighbours with no table, and every level but the last is full, so
 * the height is the smallest a tree of that degree can have.
 *
 * Pure maths, apart from the engine and unit-tested alone.  Members out of
 * range give -FI_EINVAL.
 */
#ifndef TNBC_TREE_H
#define TNBC_TREE_H

#include <stddef.h>
#include <stdint.h>

struct tnbc_tree {
	int size;
	int root;
	int degree; /* the k-ary trees' branch degree; 1 makes a chain */
	int fanout; /* the most children a member has */
	/* a tree of groups (tnbc_tree_init_groups): the caller's table;
	 * NULL: the k-ary tree */
	const int *parent_of, *first, *kids;
};

/* 0, or -FI_EINVAL unless size >= 1, 0 <= root < size and degree >= 1. */
int tnbc_tree_init(struct tnbc_tree *t, int size, int root, int degree);

/* The tree of groups (tnbc_tree_groups.c): member m is in group[m], 0 to
 * ngroups - 1 (one per host); packets cross between groups only along a
 * k-ary tree of the groups' leaders, and each group is a k-ary tree
 * under its leader, so a leader has up to 2 * degree children.  table
 * holds tnbc_tree_groups_ints(size, ngroups) ints and must outlive t. */
size_t tnbc_tree_groups_ints(int size, int ngroups);
int tnbc_tree_init_groups(struct tnbc_tree *t, int size, int root, int degree,
			  const int *group, int ngroups, int *table);
/* The parent of member, or -1 for the root. */
int tnbc_tree_parent(const struct tnbc_tree *t, int member);
/* How many children member has: its branch degree in a reduction. */
int tnbc_tree_nchildren(const struct tnbc_tree *t, int member);
/* Child i of member, i < tnbc_tree_nchildren(). */
int tnbc_tree_child(const struct tnbc_tree *t, int member, int i);
/* Edges between member and the root. */
int tnbc_tree_depth(const struct tnbc_tree *t, int member);
/* The largest depth. */
int tnbc_tree_height(const struct tnbc_tree *t);
/* Members in member's subtree, itself included. */
int tnbc_tree_subtree(const struct tnbc_tree *t, int member);

/* A pipeline's segments: len bytes of es-byte elements cut into *nseg
 * segments of *seg bytes (the last may be shorter).  At most pref bytes
 * is one segment; beyond, segments are whole elements of at least pref
 * bytes, and more than max_segs of them grows them instead.  0 bytes is
 * one empty segment. */
void tnbc_tree_segments(size_t len, size_t es, size_t pref, size_t max_segs,
			size_t *seg, size_t *nseg);

#endif /* TNBC_TREE_H */
