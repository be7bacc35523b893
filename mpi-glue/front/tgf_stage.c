/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Non-contiguous buffers of the data movers, staged through packed bytes.
 *
 * Why not fall back: a data mover's members may describe one message
 * with different datatypes (a vector at the root, MPI_INT elsewhere).
 * A member that fell back to the MPI's own algorithm because of its
 * type, while the others offloaded, would wait for them for ever.  So
 * every member decides on what all of them share, the message's size
 * in bytes, and a member whose buffer is not one run of bytes packs it
 * (PMPI_Pack: native bytes in type-map order, which is what a member of
 * a contiguous type sends and receives) and unpacks what it received
 * once the call completes, on the application's thread.
 *
 * The stage holds a duplicate of the datatype: the program may free its
 * own before a non-blocking call completes.
 *
 * MPI_BOTTOM (a NULL buffer, with a type of absolute addresses) is what
 * MPICH 4.0's MPI_Pack and MPI_Unpack refuse ("Null pointer in parameter
 * outbuf"), though its MPI_Bcast takes it: such a side is moved through
 * the type shifted down by TGF_STAGE_BASE, from that address.
 */
#include <limits.h>
#include <stdlib.h>

#include "tgf_stage.h"

#define TGF_STAGE_BASE ((MPI_Aint)1 << 20)

struct tgf_blk {
	char *user;
	size_t count;
	MPI_Datatype dt; /* one of the stage's duplicates */
	int size; /* bytes of one element; 0: the block moves nothing */
	MPI_Aint extent;
};

struct tgf_stage {
	struct tgf_stage *next;
	bool out;
	char *bytes;
	MPI_Datatype *dts; /* the duplicates the blocks use */
	int nt;
	int n;
	struct tgf_blk blk[];
};

/* A block's elements from/to at: PMPI_Pack takes an int size, so in
 * runs of at most INT_MAX bytes. */
static bool tgf_stage_move(const struct tgf_blk *b, char *at, bool pack)
{
	size_t run = b->size ? (size_t)INT_MAX / (size_t)b->size : 0;
	size_t count = run ? b->count : 0;
	char *user = b->user;

	while (count) {
		size_t k = count < run ? count : run;
		int len = (int)(k * (size_t)b->size), pos = 0, rc;

		if (pack)
			rc = PMPI_Pack(user, (int)k, b->dt, at, len, &pos,
				       MPI_COMM_SELF);
		else
			rc = PMPI_Unpack(at, len, &pos, user, (int)k, b->dt,
					 MPI_COMM_SELF);
		if (rc != MPI_SUCCESS || pos != len)
			return false;
		user += (MPI_Aint)k * b->extent;
		at += len;
		count -= k;
	}
	return true;
}

static size_t tgf_blk_bytes(const struct tgf_blk *b)
{
	return b->count * (size_t)b->size;
}

static void tgf_stage_free(struct tgf_stage *s)
{
	for (int i = 0; i < s->nt; i++)
		PMPI_Type_free(&s->dts[i]);
	free(s->dts);
	free(s->bytes);
	free(s);
}

/* What the stage keeps of dt: a duplicate, or for a side at MPI_BOTTOM
 * dt shifted down by TGF_STAGE_BASE (a struct's extent may be rounded
 * up to its alignment: the shifted type keeps the user's bounds). */
static int tgf_stage_type(MPI_Datatype dt, bool bottom, MPI_Datatype *out)
{
	MPI_Aint lb, extent, down = -TGF_STAGE_BASE;
	MPI_Datatype shifted;
	int one = 1, rc;

	if (!bottom)
		return PMPI_Type_dup(dt, out);
	PMPI_Type_get_extent(dt, &lb, &extent);
	rc = PMPI_Type_create_struct(1, &one, &down, &dt, &shifted);
	if (rc != MPI_SUCCESS)
		return rc;
	rc = PMPI_Type_create_resized(shifted, lb + down, extent, out);
	PMPI_Type_free(&shifted);
	if (rc != MPI_SUCCESS)
		return rc;
	rc = PMPI_Type_commit(out);
	if (rc != MPI_SUCCESS)
		PMPI_Type_free(out);
	return rc;
}

/* Block i of a side: where it starts, how many elements of which type
 * (alltoallw: a type and a byte displacement of its own). */
static void tgf_side_blk(const struct tgf_side *side, const char *base, int i,
			 MPI_Datatype *dt, struct tgf_blk *b)
{
	MPI_Aint lb;

	*dt = side->types ? side->types[i] : side->dt;
	b->user = (char *)base;
	b->count = side->counts ? (size_t)side->counts[i] : side->count;
	if (!b->count)
		return; /* moves nothing: its type is not looked at */
	PMPI_Type_get_extent(*dt, &lb, &b->extent);
	if (side->types)
		b->user += side->at[i];
	else if (side->counts)
		b->user += (MPI_Aint)side->displs[i] * b->extent;
}

struct tgf_stage *tgf_stage_new(const struct tgf_side *side, void **bytes)
{
	int n = side->counts ? side->n : 1;
	struct tgf_stage *s = calloc(1, sizeof(*s) + (size_t)(n > 0 ? n : 1) *
							     sizeof(s->blk[0]));
	bool bottom = !side->buf;
	const char *base = bottom ? (const char *)TGF_STAGE_BASE : side->buf;
	MPI_Datatype last = MPI_DATATYPE_NULL;
	size_t total = 0;
	char *at;

	if (!s)
		return NULL;
	s->out = side->how & TGF_STAGE_OUT;
	s->n = n;
	s->dts = calloc(side->types && n > 0 ? (size_t)n : 1, sizeof(*s->dts));
	if (!s->dts)
		goto err;
	for (int i = 0; i < n; i++) {
		struct tgf_blk *b = &s->blk[i];
		MPI_Datatype dt;

		tgf_side_blk(side, base, i, &dt, b);
		if (!b->count)
			continue;
		/* blocks of one type share a duplicate */
		if (!s->nt || dt != last) {
			if (tgf_stage_type(dt, bottom, &s->dts[s->nt]) !=
			    MPI_SUCCESS)
				goto err;
			last = dt;
			s->nt++;
		}
		b->dt = s->dts[s->nt - 1];
		PMPI_Type_size(b->dt, &b->size);
		if (b->size < 0)
			goto err;
		total += tgf_blk_bytes(b);
	}
	/* a stage of nothing still has an address of its own */
	s->bytes = malloc(total ? total : 1);
	if (!s->bytes)
		goto err;
	at = s->bytes;
	for (int i = 0; i < n && (side->how & TGF_STAGE_IN); i++) {
		if (!tgf_stage_move(&s->blk[i], at, true))
			goto err;
		at += tgf_blk_bytes(&s->blk[i]);
	}
	*bytes = s->bytes;
	return s;
err:
	tgf_stage_free(s);
	return NULL;
}

struct tgf_stage *tgf_stage_link(struct tgf_stage *a, struct tgf_stage *b)
{
	struct tgf_stage *t = a;

	if (!a)
		return b;
	while (t->next)
		t = t->next;
	t->next = b;
	return a;
}

bool tgf_stage_end(struct tgf_stage *s, bool ok)
{
	bool all = true;

	while (s) {
		struct tgf_stage *next = s->next;
		char *at = s->bytes;

		for (int i = 0; i < s->n && ok && s->out; i++) {
			all &= tgf_stage_move(&s->blk[i], at, false);
			at += tgf_blk_bytes(&s->blk[i]);
		}
		tgf_stage_free(s);
		s = next;
	}
	return all;
}
