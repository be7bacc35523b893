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
};

struct tgf_stage {
	struct tgf_stage *next;
	MPI_Datatype dt; /* a duplicate */
	int size; /* bytes of one element */
	MPI_Aint extent;
	bool out;
	char *bytes;
	int n;
	struct tgf_blk blk[];
};

/* count elements of s->dt at user from/to at: PMPI_Pack takes an int
 * size, so in runs of at most INT_MAX bytes. */
static bool tgf_stage_move(const struct tgf_stage *s, char *user, char *at,
			   size_t count, bool pack)
{
	size_t run = (size_t)INT_MAX / (size_t)s->size;

	while (count) {
		size_t k = count < run ? count : run;
		int len = (int)(k * (size_t)s->size), pos = 0, rc;

		if (pack)
			rc = PMPI_Pack(user, (int)k, s->dt, at, len, &pos,
				       MPI_COMM_SELF);
		else
			rc = PMPI_Unpack(at, len, &pos, user, (int)k, s->dt,
					 MPI_COMM_SELF);
		if (rc != MPI_SUCCESS || pos != len)
			return false;
		user += (MPI_Aint)k * s->extent;
		at += len;
		count -= k;
	}
	return true;
}

static void tgf_stage_free(struct tgf_stage *s)
{
	PMPI_Type_free(&s->dt);
	free(s->bytes);
	free(s);
}

struct tgf_stage *tgf_stage_new(const struct tgf_side *side, void **bytes)
{
	int n = side->displs ? side->n : 1;
	struct tgf_stage *s = calloc(1, sizeof(*s) + (size_t)(n > 0 ? n : 1) *
							     sizeof(s->blk[0]));
	MPI_Aint lb, down = -TGF_STAGE_BASE;
	const char *base = side->buf;
	size_t total = 0;
	char *at;
	int one = 1, rc;

	if (!s)
		return NULL;
	PMPI_Type_get_extent(side->dt, &lb, &s->extent);
	if (base) {
		rc = PMPI_Type_dup(side->dt, &s->dt);
	} else {
		MPI_Datatype shifted;

		/* a struct's extent may be rounded up to its alignment:
		 * the shifted type keeps the user's bounds */
		base = (const char *)TGF_STAGE_BASE;
		rc = PMPI_Type_create_struct(
			1, &one, &down, (MPI_Datatype *)&side->dt, &shifted);
		if (rc != MPI_SUCCESS)
			goto err_nodt;
		rc = PMPI_Type_create_resized(shifted, lb + down, s->extent,
					      &s->dt);
		PMPI_Type_free(&shifted);
		if (rc != MPI_SUCCESS)
			goto err_nodt;
		rc = PMPI_Type_commit(&s->dt);
		if (rc != MPI_SUCCESS) {
			PMPI_Type_free(&s->dt);
			goto err_nodt;
		}
	}
	if (rc != MPI_SUCCESS)
		goto err_nodt;
	PMPI_Type_size(s->dt, &s->size);
	s->out = side->how & TGF_STAGE_OUT;
	s->n = n;
	for (int i = 0; i < n; i++) {
		s->blk[i].user = (char *)base;
		s->blk[i].count = side->count;
		if (side->displs) {
			s->blk[i].user += (MPI_Aint)side->displs[i] * s->extent;
			s->blk[i].count = (size_t)side->counts[i];
		}
		total += s->blk[i].count * (size_t)s->size;
	}
	/* a stage of nothing still has an address of its own */
	s->bytes = malloc(total ? total : 1);
	if (!s->bytes || s->size <= 0)
		goto err_free;
	at = s->bytes;
	for (int i = 0; i < n && (side->how & TGF_STAGE_IN); i++) {
		if (!tgf_stage_move(s, s->blk[i].user, at, s->blk[i].count,
				    true))
			goto err_free;
		at += s->blk[i].count * (size_t)s->size;
	}
	*bytes = s->bytes;
	return s;
err_free:
	tgf_stage_free(s);
	return NULL;
err_nodt:
	free(s);
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
			all &= tgf_stage_move(s, s->blk[i].user, at,
					      s->blk[i].count, false);
			at += s->blk[i].count * (size_t)s->size;
		}
		tgf_stage_free(s);
		s = next;
	}
	return all;
}
