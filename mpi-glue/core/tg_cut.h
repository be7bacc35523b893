/* SPDX-License-Identifier: BSD-2-Clause */
/* How the glue's alltoall(v) messages are cut: maths only, no state. */
#ifndef TG_CUT_H
#define TG_CUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * How an alltoall(v) message travels where T-NBC is named for the call:
 * in three pieces, its first and last TG_A2A_EDGE bytes apart from the
 * body, tagged the call's tag + piece, cut alike by both ends (the
 * glue's plain exchange and T-NBC's, so that members may take either).
 * A T-NBC receive whose first or last bytes share a page with other
 * data (an unaligned buffer, a receive that ends inside a page) cannot
 * guard that page, so its call waits for what lands there: the edges,
 * no longer the whole message (in NPB IS every call waited for all its
 * data).  Below TG_A2A_CUT_MIN the edges are empty: both ends still post
 * three, so that nonzero counts that differ between them (an erroneous
 * program) mismatch message for message and never leave one unmatched.
 * The edge is 4 KiB whatever the page size (the ends must agree): where
 * pages are larger, a shared page reaches into the body, and the call
 * waits for the whole message, as before the cut.
 */
#define TG_A2A_EDGE    ((size_t)4096)
#define TG_A2A_CUT_MIN ((size_t)64 << 10)
#define TG_A2A_TAGS    3

struct tg_a2a_piece {
	size_t off, len;
	int piece; /* its tag is the call's + piece */
	bool edge; /* a call may wait for it: sent first */
};

/* len's pieces in p, their number returned: 3 cut, else 1. */
static inline int tg_a2a_cut(size_t len, bool cut,
			     struct tg_a2a_piece p[TG_A2A_TAGS])
{
	size_t e = len < TG_A2A_CUT_MIN ? 0 : TG_A2A_EDGE;

	if (!cut) {
		p[0] = (struct tg_a2a_piece){0, len, 0, true};
		return 1;
	}
	p[0] = (struct tg_a2a_piece){0, e, 0, true};
	p[1] = (struct tg_a2a_piece){e, len - 2 * e, 1, !e};
	p[2] = (struct tg_a2a_piece){len - e, e, 2, true};
	return 3;
}

/* How many messages len bytes travel as (0 for none). */
static inline int tg_a2a_nparts(size_t len, bool cut)
{
	return !len ? 0 : cut ? TG_A2A_TAGS : 1;
}

/* A piece's tag: the sequence half wraps, the group's half stays. */
static inline uint64_t tg_a2a_tag(uint64_t tag, int piece)
{
	return (tag & ~(uint64_t)UINT32_MAX) |
	       (uint32_t)((uint32_t)tag + (uint32_t)piece);
}

#endif /* TG_CUT_H */
