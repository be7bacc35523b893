/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The descriptors' ALU: a reduction packet's header checked against the
 * descriptor that receives it, and the agreeing contributions folded
 * (the CP/CPCnt step of seed 002).  The descriptor entry points
 * (tnbc_desc.c) and the algorithms that reduce by descriptors
 * (tnbc_alg_desc.c, _flat.c, _hosts.c) fire it.
 */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_ext_tnbc.h>

#include "tnbc_sched.h"
#include "../tnbc_alu.h"
#include "../tnbc_comp.h"

/* The wire tag of a descriptor's packets. */
uint64_t tnbc_desc_tag(uint64_t tag, bool bcast)
{
	return TNBC_DESC_TAG | (tag << 1) | (bcast ? 1 : 0);
}

enum fi_datatype tnbc_desc_dt(uint8_t width)
{
	static const enum fi_datatype dt[] = {
		[FI_TNBC_RED_INT32] = FI_INT32,
		[FI_TNBC_RED_UINT32] = FI_UINT32,
		[FI_TNBC_RED_INT64] = FI_INT64,
		[FI_TNBC_RED_UINT64] = FI_UINT64,
		[FI_TNBC_RED_FLOAT] = FI_FLOAT,
		[FI_TNBC_RED_DOUBLE] = FI_DOUBLE,
	};

	return dt[width];
}

bool tnbc_desc_width_ok(uint8_t width)
{
	return width >= FI_TNBC_RED_INT32 && width <= FI_TNBC_RED_DOUBLE;
}

bool tnbc_desc_loc(uint8_t op)
{
	return op == FI_TNBC_RED_MAXLOC || op == FI_TNBC_RED_MINLOC;
}

/* The ALU's op of a descriptor's (the *LOC ops compare as max/min). */
enum fi_op tnbc_desc_fi_op(uint8_t op)
{
	static const enum fi_op ops[] = {
		[FI_TNBC_RED_SUM] = FI_SUM,    [FI_TNBC_RED_MAX] = FI_MAX,
		[FI_TNBC_RED_MIN] = FI_MIN,    [FI_TNBC_RED_MAXLOC] = FI_MAX,
		[FI_TNBC_RED_MINLOC] = FI_MIN, [FI_TNBC_RED_LAND] = FI_LAND,
		[FI_TNBC_RED_LOR] = FI_LOR,    [FI_TNBC_RED_LXOR] = FI_LXOR,
		[FI_TNBC_RED_BAND] = FI_BAND,  [FI_TNBC_RED_BOR] = FI_BOR,
		[FI_TNBC_RED_BXOR] = FI_BXOR,
	};

	return ops[op];
}

size_t tnbc_desc_bytes(const struct tnbc_red_hdr *h)
{
	size_t w = tnbc_alu_size((enum fi_datatype)h->datatype);

	return (size_t)h->count * ((h->flags & TNBC_RED_PKT_LOC) ? 2 * w : w);
}

bool tnbc_desc_op_ok(uint8_t op, uint8_t width)
{
	bool real = width == FI_TNBC_RED_FLOAT || width == FI_TNBC_RED_DOUBLE;

	if (op < FI_TNBC_RED_SUM || op > FI_TNBC_RED_BXOR)
		return false;
	return op <= FI_TNBC_RED_MINLOC || !real;
}

/* ------------------------------------------------------------------ */
/* The ALU's *LOC pairs (the rest is tnbc_alu_apply)                    */

#define TNBC_LOC_FOLD(T, L, maxloc, d, s, n)                                   \
	do {                                                                   \
		for (size_t i_ = 0; i_ < (n); i_++) {                          \
			T dv, sv;                                              \
			L dl, sl;                                              \
			char *dp = (char *)(d) + i_ * 2 * sizeof(T);           \
			const char *sp =                                       \
				(const char *)(s) + i_ * 2 * sizeof(T);        \
			memcpy(&dv, dp, sizeof(T));                            \
			memcpy(&dl, dp + sizeof(T), sizeof(L));                \
			memcpy(&sv, sp, sizeof(T));                            \
			memcpy(&sl, sp + sizeof(T), sizeof(L));                \
			if ((maxloc ? sv > dv : sv < dv) ||                    \
			    (sv == dv && sl < dl)) {                           \
				memcpy(dp, &sv, sizeof(T));                    \
				memcpy(dp + sizeof(T), &sl, sizeof(L));        \
			}                                                      \
		}                                                              \
	} while (0)

static int tnbc_desc_fold(const struct tnbc_red_hdr *h, void *dst,
			  const void *src)
{
	bool max = h->op == FI_MAX;

	if (!(h->flags & TNBC_RED_PKT_LOC))
		return tnbc_alu_apply((enum fi_op)h->op,
				      (enum fi_datatype)h->datatype, dst, src,
				      NULL, NULL, h->count);
	switch (h->datatype) {
	case FI_INT32:
		TNBC_LOC_FOLD(int32_t, int32_t, max, dst, src, h->count);
		break;
	case FI_UINT32:
		TNBC_LOC_FOLD(uint32_t, int32_t, max, dst, src, h->count);
		break;
	case FI_FLOAT:
		TNBC_LOC_FOLD(float, int32_t, max, dst, src, h->count);
		break;
	case FI_INT64:
		TNBC_LOC_FOLD(int64_t, int64_t, max, dst, src, h->count);
		break;
	case FI_UINT64:
		TNBC_LOC_FOLD(uint64_t, int64_t, max, dst, src, h->count);
		break;
	case FI_DOUBLE:
		TNBC_LOC_FOLD(double, int64_t, max, dst, src, h->count);
		break;
	default:
		return -FI_EOPNOTSUPP;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Reduce                                                               */

/* Whether a child's contribution may be folded into r's. */
static uint32_t tnbc_desc_check(const struct tnbc_red_hdr *r,
				const struct tnbc_red_hdr *c)
{
	if (c->magic != TNBC_RED_MAGIC)
		return FI_TNBC_RED_EPEER;
	if (!(c->flags & TNBC_RED_PKT_CP) ||
	    (c->flags & TNBC_RED_PKT_LOC) != (r->flags & TNBC_RED_PKT_LOC) ||
	    c->op != r->op || c->datatype != r->datatype ||
	    c->count != r->count || c->degree != r->degree)
		return FI_TNBC_RED_EMISMATCH;
	return 0;
}

/* The descriptor fires: fold what agrees, in ascending order. */
int tnbc_desc_red_fire(void *arg)
{
	struct tnbc_desc_red *d = arg;
	struct {
		const void *data;
		uint32_t order;
	} in[TNBC_DESC_MAX_FANOUT + 1];
	uint32_t errvec = d->hdr.errvec, bad = 0;
	size_t n = 0, bytes = tnbc_desc_bytes(&d->hdr);
	int ret = 0;

	in[n].data = d->own;
	in[n++].order = d->hdr.order;
	for (uint32_t i = 0; i < d->children; i++) {
		const struct tnbc_red_hdr *c =
			(const void *)(d->slots + i * d->stride);
		uint32_t e = tnbc_desc_check(&d->hdr, c);

		/* a member's place twice: the fold's order would be
		 * arrival's, and one contribution would count double */
		for (size_t k = 0; k < n && !e; k++)
			if (in[k].order == c->order)
				e = FI_TNBC_RED_EDUP;
		if (e) {
			bad |= e;
			continue;
		}
		errvec |= c->errvec;
		/* insertion by order: at most 65 of them */
		size_t j = n++;

		while (j && in[j - 1].order > c->order) {
			in[j] = in[j - 1];
			j--;
		}
		in[j].data = c + 1;
		in[j].order = c->order;
	}
	if (bytes) /* a barrier's have none, and maybe no buffers */
		memcpy(d->acc, in[0].data, bytes);
	for (size_t i = 1; i < n && !ret; i++)
		ret = tnbc_desc_fold(&d->hdr, d->acc, in[i].data);
	if (d->errvec_out)
		*d->errvec_out = errvec | bad;
	if (bad) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_DATA,
			"reduction 0x%x: a child's contribution disagreed "
			"and was not folded\n",
			(unsigned)bad);
		return -FI_EINVAL;
	}
	return ret;
}
