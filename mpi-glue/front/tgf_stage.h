/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A buffer of a non-contiguous datatype seen by the offload as its
 * packed bytes (tgf_stage.c).
 */
#ifndef TGF_STAGE_H
#define TGF_STAGE_H

#include "tgf.h"

enum {
	TGF_STAGE_IN = 1, /* packed when staged: the call reads it */
	TGF_STAGE_OUT = 2, /* unpacked back at the end: the call writes it */
};

/* One side of a data mover that goes through a stage: counts in
 * elements of dt; counts NULL for one block at buf. */
struct tgf_side {
	const void *buf;
	size_t count; /* one block */
	const int *counts, *displs; /* n blocks (alltoallv), extents of dt */
	int n;
	MPI_Datatype dt;
	/* or n blocks of their own types (alltoallw): counts[i] elements
	 * of types[i] at[i] bytes from buf */
	const MPI_Datatype *types;
	const MPI_Aint *at;
	unsigned how; /* 0: not staged */
};

struct tgf_stage;

/* Stages one side: its packed bytes in a fresh buffer (*bytes), IN
 * packed now.  Block i's bytes follow block i - 1's.  NULL when out of
 * memory or the MPI would not pack: the other members have decided to
 * offload too, so the call must fail, not fall back. */
struct tgf_stage *tgf_stage_new(const struct tgf_side *side, void **bytes);
/* Chains b after a (either may be NULL); the head is returned. */
struct tgf_stage *tgf_stage_link(struct tgf_stage *a, struct tgf_stage *b);
/* Unpacks the OUT stages of the chain when ok, and frees it (NULL:
 * none).  False when an unpack failed: the call fails. */
bool tgf_stage_end(struct tgf_stage *s, bool ok);

#endif /* TGF_STAGE_H */
