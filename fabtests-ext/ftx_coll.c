/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fi_collective(3): joins, every collective call on groups of several
 * sizes, each result checked against one computed here (an ALU of this
 * test's own, not the provider's) from what every rank contributed.
 *
 *   sweep        every reducing op x datatype fi_query_collective allows
 *                x size, allreduce, reduce and reduce-scatter; the data
 *                movers at every size; groups of 1, 2, 3, 5 and 8 ranks
 *                (with -F: 11 ranks, 1 MiB for every pair)
 *   determinism  an allreduce of doubles whose sum rounds, 20 times:
 *                bit-identical across runs and ranks
 *   concurrent   operations in flight on two overlapping groups at once
 *   late_join    one rank joins after the others already posted work
 *   sleep        8 ranks post an allreduce and stop calling libfabric;
 *                the result appears in memory anyway
 *   bad_input    what must be refused is, and the group still works
 *   alltoall     slices of 1 B to 1 MiB, several in flight, under the
 *                pinned or chosen algorithm (direct, PLP, LSS); with
 *                FTX_A2A_SYNC, the synchronisation packets counted (and
 *                with FTX_A2A_PKTS, the packets handled)
 *   alltoall_death  a member dies mid-alltoall: the others end
 */
#include "common/ftx.h"
#include "common/ftx_trig.h"

#include <rdma/fi_collective.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_ext_tnbc.h>

#include <complex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool full_sweep;

struct group {
	struct fid_av_set *set;
	struct fid_mc *mc;
	fi_addr_t coll;
	int size, rank; /* rank < 0: not a member */
	fi_addr_t members[FTX_MAX_PROCS];
};

static struct fid_eq *eq;

static void
bind_eq(struct ftx_ctx *ctx)
{
	struct fi_eq_attr attr = {.wait_obj = FI_WAIT_UNSPEC};

	FTX_CHK(fi_eq_open(ctx->fabric, &attr, &eq, NULL));
	FTX_CHK(fi_ep_bind(ctx->ep, &eq->fid, 0));
	ctx->eq = eq;
}

/* Drives progress until the EQ reports want for fid. */
static void
wait_event(struct ftx_ctx *ctx, uint32_t want, struct fid *fid)
{
	struct fi_eq_entry e;
	uint32_t ev;
	unsigned spins = 0;

	for (;;) {
		ssize_t n = fi_eq_read(eq, &ev, &e, sizeof(e), 0);

		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry err = {0};

			fi_eq_readerr(eq, &err, 0);
			ftx_fail("EQ error %d (%s)", err.err,
				 fi_strerror(err.err));
		}
		if (n > 0) {
			FTX_EXPECT(ev == want && e.fid == fid,
				   "EQ event %u fid %p, expected %u fid %p", ev,
				   (void *) e.fid, want, (void *) fid);
			return;
		}
		FTX_EXPECT(!ftx_expired(ctx), "no EQ event %u", want);
		ftx_progress(ctx);
		ftx_relax(&spins);
	}
}

/* Joins the ranks start, start + stride, ... below size; every rank
 * calls it, members join. */
static void
join(struct ftx_ctx *ctx, struct group *g, int start, int stride, int size)
{
	struct fi_av_set_attr attr = {
		.start_addr = (fi_addr_t) start,
		.end_addr = (fi_addr_t) size - 1,
		.stride = (uint64_t) stride,
	};
	fi_addr_t set_addr;

	memset(g, 0, sizeof(*g));
	g->rank = -1;
	for (int r = start; r < size; r += stride) {
		if (r == ctx->rank)
			g->rank = g->size;
		g->members[g->size++] = ctx->addrs[r];
	}
	if (g->rank < 0)
		return;
	FTX_CHK(fi_av_set(ctx->av, &attr, &g->set, NULL));
	FTX_CHK(fi_av_set_addr(g->set, &set_addr));
	ftx_note("join %d/%d/%d", start, stride, size);
	FTX_CHK(fi_join_collective(ctx->ep, set_addr, g->set, 0, &g->mc, g));
	wait_event(ctx, FI_JOIN_COMPLETE, &g->mc->fid);
	g->coll = fi_mc_addr(g->mc);
}

static void
leave(struct group *g)
{
	if (g->rank < 0)
		return;
	FTX_CHK(fi_close(&g->mc->fid));
	FTX_CHK(fi_close(&g->set->fid));
}

/* Waits for the collective completion of context (others are kept). */
static void
wait_coll(struct ftx_ctx *ctx, void *context)
{
	struct ftx_comp c;

	ftx_wait_ok(ctx, FTX_TX, &c);
	FTX_EXPECT(c.op_context == context, "completion of %p, expected %p",
		   c.op_context, context);
	FTX_EXPECT(c.flags & FI_COLLECTIVE, "flags 0x%llx lack FI_COLLECTIVE",
		   (unsigned long long) c.flags);
}

/* ------------------------------------------------------------------ */
/* The reference ALU                                                    */

static size_t
dt_size(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8:
	case FI_UINT8:
		return 1;
	case FI_INT16:
	case FI_UINT16:
		return 2;
	case FI_INT32:
	case FI_UINT32:
	case FI_FLOAT:
		return 4;
	case FI_INT64:
	case FI_UINT64:
	case FI_DOUBLE:
	case FI_FLOAT_COMPLEX:
		return 8;
	case FI_DOUBLE_COMPLEX:
		return 16;
	case FI_LONG_DOUBLE:
		return sizeof(long double);
	case FI_LONG_DOUBLE_COMPLEX:
		return sizeof(long double complex);
	default:
		return 0;
	}
}

static const enum fi_datatype all_dts[] = {
	FI_INT8,	  FI_UINT8,
	FI_INT16,	  FI_UINT16,
	FI_INT32,	  FI_UINT32,
	FI_INT64,	  FI_UINT64,
	FI_FLOAT,	  FI_DOUBLE,
	FI_FLOAT_COMPLEX, FI_DOUBLE_COMPLEX,
	FI_LONG_DOUBLE,	  FI_LONG_DOUBLE_COMPLEX,
};
#define NDTS (sizeof(all_dts) / sizeof(all_dts[0]))

static const enum fi_op all_ops[] = {FI_MIN,  FI_MAX,  FI_SUM, FI_PROD,
				     FI_LOR,  FI_LAND, FI_BOR, FI_BAND,
				     FI_LXOR, FI_BXOR};
#define NOPS (sizeof(all_ops) / sizeof(all_ops[0]))

/* The ops of every real type; the integers add the bitwise ones. */
#define REF_REAL_OPS(T)               \
	case FI_MIN:                  \
		d[i] = b < a ? b : a; \
		break;                \
	case FI_MAX:                  \
		d[i] = b > a ? b : a; \
		break;                \
	case FI_SUM:                  \
		d[i] = (T) (a + b);   \
		break;                \
	case FI_PROD:                 \
		d[i] = (T) (a * b);   \
		break;                \
	case FI_LOR:                  \
		d[i] = a || b;        \
		break;                \
	case FI_LAND:                 \
		d[i] = a && b;        \
		break;                \
	case FI_LXOR:                 \
		d[i] = !a != !b;      \
		break;
#define REF_BIT_OPS           \
	case FI_BOR:          \
		d[i] = a | b; \
		break;        \
	case FI_BAND:         \
		d[i] = a & b; \
		break;        \
	case FI_BXOR:         \
		d[i] = a ^ b; \
		break;
#define REF_FN(T, EXTRA)                                                       \
	static void ref_##T(enum fi_op op, void *dv, const void *sv, size_t n) \
	{                                                                      \
		T *d = dv;                                                     \
		const T *s = sv;                                               \
		for (size_t i = 0; i < n; i++) {                               \
			T a = d[i], b = s[i];                                  \
			switch (op) {                                          \
				REF_REAL_OPS(T)                                \
				EXTRA                                          \
			default:                                               \
				abort();                                       \
			}                                                      \
		}                                                              \
	}
#define REF_INT(T)  REF_FN(T, REF_BIT_OPS)
#define REF_REAL(T) REF_FN(T, )
#define REF_CPLX(N, T)                                                         \
	static void ref_##N(enum fi_op op, void *dv, const void *sv, size_t n) \
	{                                                                      \
		T *d = dv;                                                     \
		const T *s = sv;                                               \
		for (size_t i = 0; i < n; i++)                                 \
			d[i] = op == FI_SUM ? d[i] + s[i] : d[i] * s[i];       \
	}

typedef long double ldouble;
REF_INT(int8_t)
REF_INT(uint8_t)
REF_INT(int16_t)
REF_INT(uint16_t)
REF_INT(int32_t)
REF_INT(uint32_t)
REF_INT(int64_t)
REF_INT(uint64_t)
REF_REAL(float)
REF_REAL(double)
REF_REAL(ldouble)
REF_CPLX(fcplx, float complex)
REF_CPLX(dcplx, double complex)
REF_CPLX(ldcplx, long double complex)

static void
ref_fold(enum fi_datatype dt, enum fi_op op, void *d, const void *s, size_t n)
{
	switch (dt) {
	case FI_INT8:
		ref_int8_t(op, d, s, n);
		break;
	case FI_UINT8:
		ref_uint8_t(op, d, s, n);
		break;
	case FI_INT16:
		ref_int16_t(op, d, s, n);
		break;
	case FI_UINT16:
		ref_uint16_t(op, d, s, n);
		break;
	case FI_INT32:
		ref_int32_t(op, d, s, n);
		break;
	case FI_UINT32:
		ref_uint32_t(op, d, s, n);
		break;
	case FI_INT64:
		ref_int64_t(op, d, s, n);
		break;
	case FI_UINT64:
		ref_uint64_t(op, d, s, n);
		break;
	case FI_FLOAT:
		ref_float(op, d, s, n);
		break;
	case FI_DOUBLE:
		ref_double(op, d, s, n);
		break;
	case FI_LONG_DOUBLE:
		ref_ldouble(op, d, s, n);
		break;
	case FI_FLOAT_COMPLEX:
		ref_fcplx(op, d, s, n);
		break;
	case FI_DOUBLE_COMPLEX:
		ref_dcplx(op, d, s, n);
		break;
	case FI_LONG_DOUBLE_COMPLEX:
		ref_ldcplx(op, d, s, n);
		break;
	default:
		abort();
	}
}

/* Element i of member m's contribution: small values, so that every
 * fold order gives the same (exact) result; the product's factors are
 * 1 and 2 so that 11 of them stay exact in a float. */
static void
fill(enum fi_datatype dt, enum fi_op op, void *buf, size_t n, int m,
     uint64_t salt)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t h = ftx_mix((uint64_t) m * 1000003u + i + salt);
		int v = op == FI_PROD ? 1 + (int) (h & 1) :
			op == FI_LAND || op == FI_LOR || op == FI_LXOR ?
					(int) (h % 3 == 0 ? 0 : h % 4) :
					(int) (h % 60);
		switch (dt) {
#define SET(T)                  \
	((T *) buf)[i] = (T) v; \
	break
		case FI_INT8:
			SET(int8_t);
		case FI_UINT8:
			SET(uint8_t);
		case FI_INT16:
			SET(int16_t);
		case FI_UINT16:
			SET(uint16_t);
		case FI_INT32:
			SET(int32_t);
		case FI_UINT32:
			SET(uint32_t);
		case FI_INT64:
			SET(int64_t);
		case FI_UINT64:
			SET(uint64_t);
		case FI_FLOAT:
			SET(float);
		case FI_DOUBLE:
			SET(double);
		case FI_LONG_DOUBLE:
			SET(long double);
		case FI_FLOAT_COMPLEX:
			((float complex *) buf)[i] = v + (v % 3) * I;
			break;
		case FI_DOUBLE_COMPLEX:
			((double complex *) buf)[i] = v + (v % 3) * I;
			break;
		case FI_LONG_DOUBLE_COMPLEX:
			((long double complex *) buf)[i] = v + (v % 3) * I;
			break;
#undef SET
		default:
			abort();
		}
	}
}

/* Compares values, not bytes: long double has padding bytes, and zeros
 * have signs. */
static bool
same(enum fi_datatype dt, const void *a, const void *b, size_t n, size_t *bad)
{
	size_t es = dt_size(dt);

	for (size_t i = 0; i < n; i++) {
		const char *x = (const char *) a + i * es;
		const char *y = (const char *) b + i * es;
		bool eq;

		if (dt == FI_LONG_DOUBLE)
			eq = *(const long double *) x ==
			     *(const long double *) y;
		else if (dt == FI_LONG_DOUBLE_COMPLEX)
			eq = *(const long double complex *) x ==
			     *(const long double complex *) y;
		/* a complex product's zero parts take their sign from the
		 * fold order, which the tree's shape sets: -0 == +0 */
		else if (dt == FI_FLOAT_COMPLEX)
			eq = *(const float complex *) x ==
			     *(const float complex *) y;
		else if (dt == FI_DOUBLE_COMPLEX)
			eq = *(const double complex *) x ==
			     *(const double complex *) y;
		else
			eq = !memcmp(x, y, es);
		if (!eq) {
			*bad = i;
			return false;
		}
	}
	return true;
}

/* ------------------------------------------------------------------ */
/* Sweep                                                                */

static const size_t small_sizes[] = {1, 6, 7, 8, 48, 49, 4096};
#define NSMALL (sizeof(small_sizes) / sizeof(small_sizes[0]))
#define BIG    ((size_t) 1 << 20)

static size_t
elems_of(size_t bytes, enum fi_datatype dt)
{
	size_t c = bytes / dt_size(dt);

	return c ? c : 1;
}

/* Guard bytes after each buffer: nothing may be written past what an
 * operation owns. */
#define GUARD 64

static void *
gbuf(size_t len)
{
	char *p = malloc(len + GUARD);

	if (!p)
		ftx_fail("out of memory");
	memset(p + len, 0xa5, GUARD);
	return p;
}

static void
gcheck(const void *p, size_t len, const char *what)
{
	const unsigned char *g = (const unsigned char *) p + len;

	for (size_t i = 0; i < GUARD; i++)
		FTX_EXPECT(g[i] == 0xa5, "%s: byte %zu past the end written",
			   what, i);
}

static uint64_t salt_seq;
static size_t nchecked; /* operations checked, for the log */

/* One reducing operation of g, checked on every member. */
static void
check_reduce(struct ftx_ctx *ctx, struct group *g, enum fi_collective_op coll,
	     enum fi_datatype dt, enum fi_op op, size_t count, int root)
{
	size_t es = dt_size(dt),
	       slices = coll == FI_REDUCE_SCATTER ? g->size : 1;
	size_t len = es * count * slices;
	char *in = gbuf(len), *copy = gbuf(len), *out = gbuf(len),
	     *want = gbuf(len), *tmp = gbuf(len);
	uint64_t salt = ++salt_seq;
	int ctxv;

	nchecked++;
	fill(dt, op, in, count * slices, g->rank, salt);
	memcpy(copy, in, len);
	memset(out, 0xee, len);
	/* the reference: members folded in member order */
	fill(dt, op, want, count * slices, 0, salt);
	for (int m = 1; m < g->size; m++) {
		fill(dt, op, tmp, count * slices, m, salt);
		ref_fold(dt, op, want, tmp, count * slices);
	}
	switch (coll) {
	case FI_ALLREDUCE:
		FTX_POST(ctx, fi_allreduce(ctx->ep, in, count, NULL, out, NULL,
					   g->coll, dt, op, 0, &ctxv));
		break;
	case FI_REDUCE:
		FTX_POST(ctx,
			 fi_reduce(ctx->ep, in, count, NULL, out, NULL, g->coll,
				   g->members[root], dt, op, 0, &ctxv));
		break;
	default:
		FTX_POST(ctx,
			 fi_reduce_scatter(ctx->ep, in, count, NULL, out, NULL,
					   g->coll, dt, op, 0, &ctxv));
		break;
	}
	wait_coll(ctx, &ctxv);
	FTX_EXPECT(!memcmp(in, copy, len), "coll %d modified its input",
		   (int) coll);
	gcheck(in, len, "input");
	gcheck(out, len, "result");
	if (coll == FI_ALLREDUCE || (coll == FI_REDUCE && g->rank == root)) {
		size_t bad;

		FTX_EXPECT(same(dt, out, want, count, &bad),
			   "coll %d op %d dt %d count %zu group %d: element "
			   "%zu differs (first bytes %02x, want %02x)",
			   (int) coll, (int) op, (int) dt, count, g->size, bad,
			   (unsigned char) out[bad * es],
			   (unsigned char) want[bad * es]);
	} else if (coll == FI_REDUCE_SCATTER) {
		size_t bad;

		FTX_EXPECT(same(dt, out, want + (size_t) g->rank * count * es,
				count, &bad),
			   "reduce_scatter op %d dt %d count %zu group %d: "
			   "element %zu differs",
			   (int) op, (int) dt, count, g->size, bad);
	} else {
		unsigned char e[GUARD];

		memset(e, 0xee, sizeof(e));
		FTX_EXPECT(!memcmp(out, e, len < GUARD ? len : GUARD),
			   "reduce (op %d dt %d count %zu root %d group %d) "
			   "wrote a non-root's result buffer (%02x %02x %02x)",
			   (int) op, (int) dt, count, root, g->size,
			   (unsigned char) out[0], (unsigned char) out[1],
			   (unsigned char) out[2]);
	}
	free(in);
	free(copy);
	free(out);
	free(want);
	free(tmp);
}

/* One data-moving operation of g, checked on every member. */
static void
check_move(struct ftx_ctx *ctx, struct group *g, enum fi_collective_op coll,
	   size_t bytes, int root)
{
	size_t n = (size_t) g->size, count = bytes;
	size_t inlen =
		coll == FI_ALLTOALL || coll == FI_SCATTER ? n * bytes : bytes;
	size_t outlen = coll == FI_ALLGATHER || coll == FI_ALLTOALL ||
					coll == FI_GATHER ?
				n * bytes :
				bytes;
	char *in = gbuf(inlen), *copy = gbuf(inlen), *out = gbuf(outlen);
	uint64_t salt = ++salt_seq;
	bool root_side = g->rank == root;
	int ctxv;

	nchecked++;
	/* slice j of member m: seed (m, j) */
	for (size_t j = 0; j < inlen / bytes; j++)
		ftx_fill(in + j * bytes, bytes, ftx_seed(salt, g->rank, j));
	memcpy(copy, in, inlen);
	memset(out, 0xee, outlen);
	switch (coll) {
	case FI_BROADCAST:
		FTX_POST(ctx,
			 fi_broadcast(ctx->ep, in, count, NULL, g->coll,
				      g->members[root], FI_UINT8, 0, &ctxv));
		break;
	case FI_ALLGATHER:
		FTX_POST(ctx, fi_allgather(ctx->ep, in, count, NULL, out, NULL,
					   g->coll, FI_UINT8, 0, &ctxv));
		break;
	case FI_ALLTOALL:
		FTX_POST(ctx, fi_alltoall(ctx->ep, in, count, NULL, out, NULL,
					  g->coll, FI_UINT8, 0, &ctxv));
		break;
	case FI_SCATTER:
		FTX_POST(ctx, fi_scatter(ctx->ep, root_side ? in : NULL, count,
					 NULL, out, NULL, g->coll,
					 g->members[root], FI_UINT8, 0, &ctxv));
		break;
	default:
		FTX_POST(ctx, fi_gather(ctx->ep, in, count, NULL,
					root_side ? out : NULL, NULL, g->coll,
					g->members[root], FI_UINT8, 0, &ctxv));
		break;
	}
	wait_coll(ctx, &ctxv);
	gcheck(in, inlen, "input");
	gcheck(out, outlen, "result");
	switch (coll) {
	case FI_BROADCAST:
		FTX_EXPECT(ftx_check(in, bytes, ftx_seed(salt, root, 0)) ==
				   SIZE_MAX,
			   "broadcast of %zu B from %d: wrong data", bytes,
			   root);
		break;
	case FI_ALLGATHER:
	case FI_GATHER:
		FTX_EXPECT(!memcmp(in, copy, inlen), "input modified");
		if (coll == FI_GATHER && !root_side)
			break;
		for (size_t m = 0; m < n; m++)
			FTX_EXPECT(ftx_check(out + m * bytes, bytes,
					     ftx_seed(salt, m, 0)) == SIZE_MAX,
				   "coll %d %zu B: member %zu's slice wrong",
				   (int) coll, bytes, m);
		break;
	case FI_ALLTOALL:
		FTX_EXPECT(!memcmp(in, copy, inlen), "input modified");
		for (size_t m = 0; m < n; m++)
			FTX_EXPECT(ftx_check(out + m * bytes, bytes,
					     ftx_seed(salt, m, g->rank)) ==
					   SIZE_MAX,
				   "alltoall %zu B: slice from %zu wrong",
				   bytes, m);
		break;
	default:
		if (root_side)
			FTX_EXPECT(!memcmp(in, copy, inlen), "input modified");
		FTX_EXPECT(ftx_check(out, bytes,
				     ftx_seed(salt, root, g->rank)) == SIZE_MAX,
			   "scatter %zu B: wrong slice", bytes);
		break;
	}
	free(in);
	free(copy);
	free(out);
}

static bool
supported(struct ftx_ctx *ctx, enum fi_collective_op coll, enum fi_op op,
	  enum fi_datatype dt)
{
	struct fi_collective_attr attr = {.op = op, .datatype = dt};
	int ret = fi_query_collective(ctx->domain, coll, &attr, 0);

	FTX_EXPECT(ret == 0 || ret == -FI_EOPNOTSUPP, "fi_query_collective: %d",
		   ret);
	if (!ret)
		FTX_EXPECT(attr.datatype_attr.size == dt_size(dt) &&
				   attr.datatype_attr.count >= BIG,
			   "fi_query_collective: size %zu count %zu",
			   attr.datatype_attr.size, attr.datatype_attr.count);
	return ret == 0;
}

/* Allreduce and reduce in place (result == buf), below the reduce-
 * scatter switch: the tree folds a copy of each member's own values. */
static void
check_in_place(struct ftx_ctx *ctx, struct group *g, size_t count, int root)
{
	uint64_t *buf = gbuf(count * 8), *want = gbuf(count * 8);
	int ctxv;

	for (int pass = 0; pass < 2; pass++) {
		enum fi_collective_op coll = pass ? FI_REDUCE : FI_ALLREDUCE;

		for (size_t i = 0; i < count; i++) {
			buf[i] = (uint64_t) g->rank * 1000003u + i;
			want[i] = 0;
			for (int m = 0; m < g->size; m++)
				want[i] += (uint64_t) m * 1000003u + i;
		}
		if (coll == FI_ALLREDUCE)
			FTX_POST(ctx,
				 fi_allreduce(ctx->ep, buf, count, NULL, buf,
					      NULL, g->coll, FI_UINT64, FI_SUM,
					      0, &ctxv));
		else
			FTX_POST(ctx, fi_reduce(ctx->ep, buf, count, NULL, buf,
						NULL, g->coll, g->members[root],
						FI_UINT64, FI_SUM, 0, &ctxv));
		wait_coll(ctx, &ctxv);
		gcheck(buf, count * 8, "in-place result");
		if (coll == FI_ALLREDUCE || g->rank == root)
			for (size_t i = 0; i < count; i++)
				FTX_EXPECT(buf[i] == want[i],
					   "in-place coll %d, %zu values: "
					   "element %zu is %llu, want %llu",
					   (int) coll, count, i,
					   (unsigned long long) buf[i],
					   (unsigned long long) want[i]);
	}
	free(buf);
	free(want);
}

static void
sweep_group(struct ftx_ctx *ctx, struct group *g)
{
	static const enum fi_collective_op movers[] = {
		FI_BROADCAST, FI_ALLGATHER, FI_ALLTOALL, FI_SCATTER, FI_GATHER};
	static const enum fi_collective_op reducers[] = {
		FI_ALLREDUCE, FI_REDUCE, FI_REDUCE_SCATTER};
	int ctxv;

	salt_seq = 0; /* members of this group only have counted */
	FTX_POST(ctx, fi_barrier(ctx->ep, g->coll, &ctxv));
	wait_coll(ctx, &ctxv);
	for (size_t c = 0; c < 3; c++)
		for (size_t o = 0; o < NOPS; o++)
			for (size_t d = 0; d < NDTS; d++) {
				enum fi_datatype dt = all_dts[d];
				bool ok = supported(ctx, reducers[c],
						    all_ops[o], dt);
				bool big =
					full_sweep || (all_ops[o] == FI_SUM &&
						       dt == FI_DOUBLE);

				if (!ok)
					continue;
				ftx_note("reduce coll %d op %d dt %d",
					 (int) reducers[c], (int) all_ops[o],
					 (int) dt);
				for (size_t s = 0; s < NSMALL; s++)
					check_reduce(
						ctx, g, reducers[c], dt,
						all_ops[o],
						elems_of(small_sizes[s], dt),
						(int) (s % (size_t) g->size));
				if (big && reducers[c] != FI_REDUCE_SCATTER)
					check_reduce(ctx, g, reducers[c], dt,
						     all_ops[o],
						     elems_of(BIG, dt),
						     g->size - 1);
			}
	check_in_place(ctx, g, 1, 0);
	check_in_place(ctx, g, 6, g->size - 1);
	check_in_place(ctx, g, 512, g->size / 2); /* 4 KiB */
	for (size_t c = 0; c < sizeof(movers) / sizeof(movers[0]); c++) {
		FTX_EXPECT(supported(ctx, movers[c], FI_NOOP, FI_UINT8),
			   "coll %d not offered", (int) movers[c]);
		ftx_note("move coll %d", (int) movers[c]);
		for (size_t s = 0; s < NSMALL; s++)
			check_move(ctx, g, movers[c], small_sizes[s],
				   (int) (s % (size_t) g->size));
		check_move(ctx, g, movers[c],
			   movers[c] == FI_BROADCAST ? BIG : BIG / 16,
			   g->size / 2);
	}
}

static int
run_sweep(struct ftx_ctx *ctx)
{
	static const int sizes[] = {1, 2, 3, 5, 8, 11};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct group g;

		if (sizes[i] > ctx->nprocs)
			break;
		join(ctx, &g, 0, 1, sizes[i]);
		if (g.rank >= 0) {
			nchecked = 0;
			sweep_group(ctx, &g);
			if (!ctx->rank)
				ftx_log("group of %d: %zu operations checked",
					sizes[i], nchecked);
		}
		leave(&g);
		ftx_barrier(ctx);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Determinism, concurrency, late joins, sleep, bad input               */

static int
run_determinism(struct ftx_ctx *ctx)
{
	enum { N = 1000, RUNS = 20 };
	double *in = malloc(N * sizeof(*in)), *out = malloc(N * sizeof(*out)),
	       *first = malloc(N * sizeof(*first));
	uint64_t h = 0, all[FTX_MAX_PROCS];
	struct group g;
	int ctxv;

	join(ctx, &g, 0, 1, ctx->nprocs);
	for (int i = 0; i < N; i++)
		in[i] = (double) (ftx_mix((uint64_t) ctx->rank * N + i) %
				  1000003) /
			7.0e3;
	for (int r = 0; r < RUNS; r++) {
		FTX_POST(ctx,
			 fi_allreduce(ctx->ep, in, N, NULL, out, NULL, g.coll,
				      FI_DOUBLE, FI_SUM, 0, &ctxv));
		wait_coll(ctx, &ctxv);
		if (!r)
			memcpy(first, out, N * sizeof(*out));
		FTX_EXPECT(!memcmp(first, out, N * sizeof(*out)),
			   "run %d differs from run 0", r);
	}
	for (int i = 0; i < N; i++)
		h = ftx_mix(h ^ ftx_mix(((uint64_t *) first)[i]));
	ftx_allgather(ctx, &h, sizeof(h), all);
	for (int r = 0; r < ctx->nprocs; r++)
		FTX_EXPECT(all[r] == h, "rank %d's result differs", r);
	leave(&g);
	free(in);
	free(out);
	free(first);
	return 0;
}

/* Work in flight on the whole group and on the odd ranks at once. */
static int
run_concurrent(struct ftx_ctx *ctx)
{
	enum { K = 4 };
	struct group all, odd;
	uint64_t v[K], r[K], ro[K];
	int ctxa[K], ctxo[K];
	uint64_t want = 0, want_odd = 0;
	size_t left = 0;

	join(ctx, &all, 0, 1, ctx->nprocs);
	join(ctx, &odd, 1, 2, ctx->nprocs);
	for (int k = 0; k < K; k++) {
		v[k] = (uint64_t) (ctx->rank + 1) * (k + 1);
		FTX_POST(ctx, fi_allreduce(ctx->ep, &v[k], 1, NULL, &r[k], NULL,
					   all.coll, FI_UINT64, FI_SUM, 0,
					   &ctxa[k]));
		left++;
		if (odd.rank >= 0) {
			FTX_POST(ctx,
				 fi_allreduce(ctx->ep, &v[k], 1, NULL, &ro[k],
					      NULL, odd.coll, FI_UINT64, FI_MAX,
					      0, &ctxo[k]));
			left++;
		}
	}
	while (left--) {
		struct ftx_comp c;

		ftx_wait_ok(ctx, FTX_TX, &c);
		FTX_EXPECT(c.flags & FI_COLLECTIVE, "not a collective's");
	}
	for (int m = 0; m < ctx->nprocs; m++) {
		want += (uint64_t) m + 1;
		if (m & 1)
			want_odd = (uint64_t) m + 1;
	}
	for (int k = 0; k < K; k++) {
		FTX_EXPECT(r[k] == want * (k + 1), "sum %d: %llu", k,
			   (unsigned long long) r[k]);
		if (odd.rank >= 0)
			FTX_EXPECT(ro[k] == want_odd * (k + 1), "max %d: %llu",
				   k, (unsigned long long) ro[k]);
	}
	leave(&odd);
	leave(&all);
	return 0;
}

/* The last rank joins late: the others' join and first allreduce wait
 * for it, their messages held for a group it has not joined yet. */
static int
run_late_join(struct ftx_ctx *ctx)
{
	uint64_t v = (uint64_t) ctx->rank + 1, r = 0, want = 0;
	struct group g;
	int ctxv;

	if (ctx->rank == ctx->nprocs - 1)
		ftx_sleep_ms(300);
	join(ctx, &g, 0, 1, ctx->nprocs);
	FTX_POST(ctx, fi_allreduce(ctx->ep, &v, 1, NULL, &r, NULL, g.coll,
				   FI_UINT64, FI_SUM, 0, &ctxv));
	wait_coll(ctx, &ctxv);
	for (int m = 0; m < ctx->nprocs; m++)
		want += (uint64_t) m + 1;
	FTX_EXPECT(r == want, "sum %llu, expected %llu", (unsigned long long) r,
		   (unsigned long long) want);
	leave(&g);
	return 0;
}

/* Two groups of one membership, joined in opposite orders on rank 0
 * and on the others (as two MPI communicators first used in different
 * orders): derived ids would cross, named ones keep each group's
 * operations apart.  A name in use is refused. */
static int
run_named(struct ftx_ctx *ctx)
{
	struct fi_tnbc_ops_coll *ops;
	struct fi_av_set_attr attr = {
		.start_addr = 0,
		.end_addr = (fi_addr_t) ctx->nprocs - 1,
		.stride = 1,
	};
	struct fid_av_set *set;
	struct fid_mc *mc[2], *dup;
	fi_addr_t set_addr;
	uint64_t v[2], r[2] = {0, 0}, want[2] = {0, 0};
	int ctxv[2];

	FTX_CHK(fi_open_ops(&ctx->ep->fid, FI_TNBC_COLL_OPS_1, 0,
			    (void **) &ops, NULL));
	FTX_EXPECT(ops->size >= sizeof(*ops) && ops->join, "no named join");
	FTX_CHK(fi_av_set(ctx->av, &attr, &set, NULL));
	FTX_CHK(fi_av_set_addr(set, &set_addr));
	struct fi_collective_addr ca = {.set = set, .coll_addr = set_addr};
	for (int i = 0; i < 2; i++) {
		int g = ctx->rank ? 1 - i : i;

		FTX_CHK(ops->join(ctx->ep, &ca, 0x1000u + (uint32_t) g, &mc[g],
				  &mc[g]));
	}
	FTX_EXPECT(ops->join(ctx->ep, &ca, 0x1000u, &dup, NULL) ==
			   -FI_EADDRINUSE,
		   "a name in use was taken");
	FTX_EXPECT(ops->join(ctx->ep, &ca, 0, &dup, NULL) == -FI_EINVAL,
		   "name 0 was taken");
	/* the same order on every member within each group, opposite
	 * orders across them, before the joins are known complete */
	for (int i = 0; i < 2; i++) {
		int g = ctx->rank ? 1 - i : i;

		v[g] = g ? (uint64_t) ctx->rank + 1 : 1000u * (ctx->rank + 1);
		FTX_POST(ctx, fi_allreduce(ctx->ep, &v[g], 1, NULL, &r[g], NULL,
					   fi_mc_addr(mc[g]), FI_UINT64,
					   g ? FI_MAX : FI_SUM, 0, &ctxv[g]));
	}
	/* the joins complete in either order; the collectives were
	 * posted before, and wait for them */
	for (int left = 3; left;) {
		struct fi_eq_entry e;
		uint32_t ev;
		ssize_t n = fi_eq_read(eq, &ev, &e, sizeof(e), 0);

		FTX_EXPECT(n != -FI_EAVAIL, "join failed");
		if (n > 0) {
			FTX_EXPECT(ev == FI_JOIN_COMPLETE &&
					   (e.fid == &mc[0]->fid ||
					    e.fid == &mc[1]->fid),
				   "EQ event %u", ev);
			left &= e.fid == &mc[0]->fid ? ~1 : ~2;
			continue;
		}
		FTX_EXPECT(!ftx_expired(ctx), "joins incomplete");
		ftx_progress(ctx);
	}
	for (int i = 0; i < 2; i++) {
		struct ftx_comp c;

		ftx_wait_ok(ctx, FTX_TX, &c);
	}
	for (int m = 0; m < ctx->nprocs; m++)
		want[0] += 1000u * (m + 1);
	want[1] = (uint64_t) ctx->nprocs;
	for (int g = 0; g < 2; g++)
		FTX_EXPECT(r[g] == want[g], "group %d: %llu, expected %llu", g,
			   (unsigned long long) r[g],
			   (unsigned long long) want[g]);
	for (int g = 0; g < 2; g++)
		FTX_CHK(fi_close(&mc[g]->fid));
	FTX_CHK(fi_close(&set->fid));
	return 0;
}

/* Post, then touch no libfabric call: the engine alone must finish. */
static int
run_sleep(struct ftx_ctx *ctx)
{
	enum { N = 6 };
	uint64_t v[N], want[N];
	volatile uint64_t r[N];
	struct group g;
	uint64_t deadline;
	int ctxv, done = 0;

	join(ctx, &g, 0, 1, ctx->nprocs);
	for (int i = 0; i < N; i++) {
		v[i] = ((uint64_t) ctx->rank + 1) << i;
		r[i] = 0;
		want[i] = 0;
		for (int m = 0; m < ctx->nprocs; m++)
			want[i] += ((uint64_t) m + 1) << i;
	}
	ftx_barrier(ctx);
	FTX_POST(ctx, fi_allreduce(ctx->ep, v, N, NULL, (void *) r, NULL,
				   g.coll, FI_UINT64, FI_SUM, 0, &ctxv));
	deadline = ftx_now_ns() + 20ull * 1000000000ull;
	FTX_WATCH_BEGIN();
	while (!done && ftx_now_ns() < deadline) {
		done = 1;
		for (int i = 0; i < N; i++)
			done &= r[i] == want[i];
		if (!done)
			ftx_sleep_ms(1);
	}
	FTX_WATCH_END();
	FTX_EXPECT(done, "no result after 20 s without libfabric calls");
	wait_coll(ctx, &ctxv);
	leave(&g);
	return 0;
}

static int
run_bad_input(struct ftx_ctx *ctx)
{
	uint64_t v = (uint64_t) ctx->rank + 1, r = 0, want = 0;
	float f = 1.0f, fr;
	struct group g;
	int ctxv;

	join(ctx, &g, 0, 1, ctx->nprocs);
	/* an address never joined, and the set's own address */
	FTX_EXPECT(fi_allreduce(ctx->ep, &v, 1, NULL, &r, NULL,
				(fi_addr_t) 12345, FI_UINT64, FI_SUM, 0,
				&ctxv) == -FI_EINVAL,
		   "allreduce on a group never joined was taken");
	FTX_EXPECT(fi_barrier(ctx->ep, ctx->addrs[0], &ctxv) == -FI_EINVAL,
		   "barrier on a peer's address was taken");
	/* pairs that do not exist */
	FTX_EXPECT(fi_allreduce(ctx->ep, &f, 1, NULL, &fr, NULL, g.coll,
				FI_FLOAT, FI_BOR, 0, &ctxv) == -FI_EOPNOTSUPP,
		   "FI_BOR on floats was taken");
	FTX_EXPECT(fi_allreduce(ctx->ep, &v, 1, NULL, &r, NULL, g.coll,
				FI_UINT64, FI_CSWAP, 0,
				&ctxv) == -FI_EOPNOTSUPP,
		   "FI_CSWAP was taken as a reduction");
	FTX_EXPECT(fi_allreduce(ctx->ep, &v, 1, NULL, &r, NULL, g.coll,
				(enum fi_datatype) 999, FI_SUM, 0,
				&ctxv) == -FI_EOPNOTSUPP,
		   "datatype 999 was taken");
	/* beyond the query's limit, NULL buffers, a root not a member */
	FTX_EXPECT(fi_allreduce(ctx->ep, &v, SIZE_MAX / 2, NULL, &r, NULL,
				g.coll, FI_UINT64, FI_SUM, 0,
				&ctxv) == -FI_EINVAL,
		   "a count beyond the limit was taken");
	FTX_EXPECT(fi_allreduce(ctx->ep, NULL, 1, NULL, &r, NULL, g.coll,
				FI_UINT64, FI_SUM, 0, &ctxv) == -FI_EINVAL,
		   "a NULL buffer was taken");
	FTX_EXPECT(fi_broadcast(ctx->ep, &v, 1, NULL, g.coll, 777, FI_UINT64, 0,
				&ctxv) == -FI_EINVAL,
		   "a root outside the group was taken");
	FTX_EXPECT(fi_allreduce(ctx->ep, &v, 1, NULL, &r, NULL, g.coll,
				FI_UINT64, FI_SUM, FI_INJECT,
				&ctxv) == -FI_EINVAL,
		   "FI_INJECT was taken");
	/* the group still works */
	FTX_POST(ctx, fi_allreduce(ctx->ep, &v, 1, NULL, &r, NULL, g.coll,
				   FI_UINT64, FI_SUM, 0, &ctxv));
	wait_coll(ctx, &ctxv);
	for (int m = 0; m < ctx->nprocs; m++)
		want += (uint64_t) m + 1;
	FTX_EXPECT(r == want, "sum %llu after refusals",
		   (unsigned long long) r);
	leave(&g);
	return 0;
}

/* The last rank dies after the join; the survivors' next allreduce
 * must end in an error completion, within the documented bound. */
static int
run_member_death(struct ftx_ctx *ctx)
{
	int victim = ctx->nprocs - 1;
	uint64_t v = 1, r = 0, t0, ms;
	struct ftx_comp c;
	struct group g;
	int ctxv;

	join(ctx, &g, 0, 1, ctx->nprocs);
	FTX_POST(ctx, fi_barrier(ctx->ep, g.coll, &ctxv));
	wait_coll(ctx, &ctxv);
	if (ctx->rank == victim) {
		ftx_expect_death(ctx);
		fflush(stderr);
		raise(SIGKILL);
		abort();
	}
	ctx->what = "waiting for the victim to die";
	while (!ftx_rank_dead(victim)) {
		FTX_EXPECT(!ftx_expired(ctx), "the victim never died");
		ftx_sleep_ms(1);
	}
	ctx->what = NULL;
	t0 = ftx_now_ns();
	FTX_POST(ctx, fi_allreduce(ctx->ep, &v, 1, NULL, &r, NULL, g.coll,
				   FI_UINT64, FI_SUM, 0, &ctxv));
	ftx_wait_comp(ctx, FTX_TX, &c);
	ms = (ftx_now_ns() - t0) / 1000000u;
	FTX_EXPECT(c.op_context == &ctxv && c.err,
		   "allreduce with a dead member: err %d context %p", c.err,
		   c.op_context);
	/* fi_tnbc(7): within 2 s (200 ms a tree level, and slack for a
	 * loaded machine) */
	FTX_EXPECT(ms < 2000, "the error took %llu ms",
		   (unsigned long long) ms);
	ftx_log("error %d (%s) after %llu ms", c.err, fi_strerror(c.err),
		(unsigned long long) ms);

	/* A pipelined reduce (1 MiB: many segments) to member 0: the
	 * members whose subtree holds the victim fail, the root among
	 * them; the others' part is done and completes.  None hangs. */
	size_t n = (size_t) 1 << 17; /* uint64_t: 1 MiB */
	uint64_t *in = ftx_alloc(n * sizeof(*in)), *out = ftx_alloc(n * 8);

	for (size_t i = 0; i < n; i++)
		in[i] = i;
	t0 = ftx_now_ns();
	FTX_POST(ctx, fi_reduce(ctx->ep, in, n, NULL, out, NULL, g.coll,
				g.members[0], FI_UINT64, FI_SUM, 0, &ctxv));
	ftx_wait_comp(ctx, FTX_TX, &c);
	ms = (ftx_now_ns() - t0) / 1000000u;
	FTX_EXPECT(c.op_context == &ctxv && (ctx->rank || c.err),
		   "1 MiB reduce with a dead member: err %d context %p", c.err,
		   c.op_context);
	FTX_EXPECT(ms < 2000, "the 1 MiB reduce took %llu ms",
		   (unsigned long long) ms);
	ftx_log("1 MiB reduce: %s after %llu ms",
		c.err ? fi_strerror(c.err) : "done", (unsigned long long) ms);
	ftx_free(in);
	ftx_free(out);
	leave(&g);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Alltoall for hosts of many processes (seed 001: PLP, LSS)           */

/* The slice sizes every algorithm must get right. */
static const size_t a2a_sizes[] = {1, 7, 48, 4096, 65536, 1 << 20};
#define A2A_NSIZES (sizeof(a2a_sizes) / sizeof(a2a_sizes[0]))

/* Every size, twice, then one of each size in flight at once, checked
 * exactly; the algorithm is whatever FI_TNBC_COLL_ALG pins or the
 * automatic choice takes.  With FTX_A2A_SYNC=k, also counts the
 * synchronisation packets (fi_tnbc_engine_stats.sync_pkts) one
 * alltoall of FTX_A2A_SYNC_LEN bytes (64 KiB) sends from this process:
 * k per other member (run with one rank per host); with FTX_A2A_PKTS=p,
 * that the packets progress handled meanwhile (engine_pkts + app_pkts:
 * what came in, the barrier after and the transmit queue's turns, an
 * upper bound) are at most p per other member: how many segments a
 * slice crossed in, one or dozens. */
static int
run_alltoall(struct ftx_ctx *ctx)
{
	size_t n = (size_t) ctx->nprocs;
	char *in[A2A_NSIZES], *out[A2A_NSIZES];
	int ctxv[A2A_NSIZES];
	uint64_t salt[A2A_NSIZES];
	const char *sync = getenv("FTX_A2A_SYNC");
	const char *pkts = getenv("FTX_A2A_PKTS");
	struct group g;
	size_t left;

	join(ctx, &g, 0, 1, ctx->nprocs);
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < A2A_NSIZES; i++)
			check_move(ctx, &g, FI_ALLTOALL, a2a_sizes[i], 0);
	/* several in flight: posted together, completed in any order */
	for (size_t i = 0; i < A2A_NSIZES; i++) {
		size_t b = a2a_sizes[i];

		in[i] = gbuf(n * b);
		out[i] = gbuf(n * b);
		salt[i] = ++salt_seq;
		for (size_t j = 0; j < n; j++)
			ftx_fill(in[i] + j * b, b,
				 ftx_seed(salt[i], g.rank, j));
		memset(out[i], 0xee, n * b);
		FTX_POST(ctx, fi_alltoall(ctx->ep, in[i], b, NULL, out[i], NULL,
					  g.coll, FI_UINT8, 0, &ctxv[i]));
	}
	for (left = A2A_NSIZES; left; left--) {
		struct ftx_comp c;

		ftx_wait_ok(ctx, FTX_TX, &c);
		FTX_EXPECT(c.flags & FI_COLLECTIVE, "not a collective's");
	}
	for (size_t i = 0; i < A2A_NSIZES; i++) {
		size_t b = a2a_sizes[i];

		gcheck(out[i], n * b, "result");
		for (size_t m = 0; m < n; m++)
			FTX_EXPECT(ftx_check(out[i] + m * b, b,
					     ftx_seed(salt[i], m, g.rank)) ==
					   SIZE_MAX,
				   "in flight, %zu B: slice from %zu wrong", b,
				   m);
		free(in[i]);
		free(out[i]);
	}
	if (sync && *sync) {
		const char *l = getenv("FTX_A2A_SYNC_LEN");
		size_t b = l && *l ? strtoull(l, NULL, 0) : 65536;
		uint64_t want = strtoull(sync, NULL, 0) * (n - 1);
		struct fi_tnbc_engine_stats st0, st1;
		char *a = gbuf(n * b), *r = gbuf(n * b);
		int cv;

		memset(a, 1, n * b);
		FTX_POST(ctx, fi_barrier(ctx->ep, g.coll, &cv));
		wait_coll(ctx, &cv);
		FTX_EXPECT(ftx_tnbc_stats(ctx, &st0), "no engine statistics");
		FTX_POST(ctx, fi_alltoall(ctx->ep, a, b, NULL, r, NULL, g.coll,
					  FI_UINT8, 0, &cv));
		wait_coll(ctx, &cv);
		/* every answer this process owes is sent by then */
		FTX_POST(ctx, fi_barrier(ctx->ep, g.coll, &cv));
		wait_coll(ctx, &cv);
		FTX_EXPECT(ftx_tnbc_stats(ctx, &st1), "no engine statistics");
		ftx_log("alltoall of %zu B slices among %zu: %llu "
			"synchronisation packets sent",
			b, n,
			(unsigned long long) (st1.sync_pkts - st0.sync_pkts));
		FTX_EXPECT(st1.sync_pkts - st0.sync_pkts == want,
			   "%llu synchronisation packets, not %llu",
			   (unsigned long long) (st1.sync_pkts - st0.sync_pkts),
			   (unsigned long long) want);
		if (pkts && *pkts) {
			uint64_t got = st1.engine_pkts + st1.app_pkts -
				       st0.engine_pkts - st0.app_pkts,
				 most = strtoull(pkts, NULL, 0) * (n - 1);

			ftx_log("%llu packets handled",
				(unsigned long long) got);
			FTX_EXPECT(got <= most,
				   "%llu packets handled, more than %llu",
				   (unsigned long long) got,
				   (unsigned long long) most);
		}
		free(a);
		free(r);
	}
	leave(&g);
	return 0;
}

/* The last rank posts an alltoall of 1 MiB slices and dies at once:
 * every survivor's alltoall ends, within the documented bound, in an
 * error, or in success with every slice right (the victim's slices
 * may all have left before it died); none hangs. */
static int
run_alltoall_death(struct ftx_ctx *ctx)
{
	int victim = ctx->nprocs - 1, cv;
	size_t n = (size_t) ctx->nprocs, b = (size_t) 1 << 20;
	char *in = gbuf(n * b), *out = gbuf(n * b);
	uint64_t salt = ++salt_seq, t0, ms;
	struct ftx_comp c;
	struct group g;

	join(ctx, &g, 0, 1, ctx->nprocs);
	for (size_t j = 0; j < n; j++)
		ftx_fill(in + j * b, b, ftx_seed(salt, g.rank, j));
	FTX_POST(ctx, fi_barrier(ctx->ep, g.coll, &cv));
	wait_coll(ctx, &cv);
	if (ctx->rank == victim)
		ftx_sleep_ms(20); /* the others' operations are under way */
	t0 = ftx_now_ns();
	FTX_POST(ctx, fi_alltoall(ctx->ep, in, b, NULL, out, NULL, g.coll,
				  FI_UINT8, 0, &cv));
	if (ctx->rank == victim) {
		ftx_expect_death(ctx);
		fflush(stderr);
		raise(SIGKILL);
		abort();
	}
	ftx_wait_comp(ctx, FTX_TX, &c);
	ms = (ftx_now_ns() - t0) / 1000000u;
	FTX_EXPECT(c.op_context == &cv, "context %p", c.op_context);
	if (!c.err)
		for (size_t m = 0; m < n; m++)
			FTX_EXPECT(ftx_check(out + m * b, b,
					     ftx_seed(salt, m, g.rank)) ==
					   SIZE_MAX,
				   "a success with slice %zu wrong", m);
	FTX_EXPECT(ms < 5000, "the alltoall took %llu ms",
		   (unsigned long long) ms);
	ftx_log("alltoall with a member dying: %s after %llu ms",
		c.err ? fi_strerror(c.err) : "done", (unsigned long long) ms);
	free(in);
	free(out);
	leave(&g);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Seed 002's descriptors (fi_tnbc_coll(3))                             */

static struct fi_tnbc_ops_coll *
desc_ops(struct ftx_ctx *ctx)
{
	struct fi_tnbc_ops_coll *ops = NULL;

	if (fi_open_ops(&ctx->ep->fid, FI_TNBC_COLL_OPS_1, 0, (void **) &ops,
			NULL))
		ftx_skip("no %s on this provider", FI_TNBC_COLL_OPS_1);
	return ops;
}

struct desc_run {
	uint8_t op, width;
	uint16_t count;
	int bad_rank; /* this rank's descriptor disagrees (-1: none) */
};

/* One allreduce built from descriptors on a k-ary tree of all ranks:
 * reduce up, the root's completion re-triggers its broadcast, which
 * goes down.  Returns the root's error vector on every rank (through
 * the result). */
static int
desc_allreduce(struct ftx_ctx *ctx, struct fi_tnbc_ops_coll *ops,
	       struct fid_cntr *done, const struct desc_run *run, uint64_t tag,
	       const void *mine, void *result, uint32_t *errvec)
{
	int n = ctx->nprocs, me = ctx->rank, k = 3, nch = 0;
	fi_addr_t kids[8];
	struct fi_tnbc_red_desc r = {.size = sizeof(r)};
	struct fi_tnbc_bcast_desc b = {.size = sizeof(b)};
	uint64_t base = fi_cntr_read(done);
	unsigned spins = 0;
	int ret;

	for (int c = k * me + 1; c <= k * me + k && c < n; c++)
		kids[nch++] = ctx->addrs[c];
	r.flags = FI_TNBC_RED_CP;
	r.tag = tag;
	r.order = (uint32_t) me;
	r.degree = (uint32_t) k;
	r.children = (uint32_t) nch;
	r.op = run->op;
	r.width = run->bad_rank == me ? (uint8_t) (run->width % 6 + 1) :
					run->width;
	r.count = run->count;
	r.cpcnt = (uint64_t) nch;
	r.dest = me ? ctx->addrs[(me - 1) / k] : FI_ADDR_NOTAVAIL;
	memcpy(r.data, mine, sizeof(r.data));
	r.result = me ? NULL : result;
	r.errvec_out = me ? NULL : errvec;
	r.comp_cntr = done;
	/* The broadcast first: the root's sends the error instead of the
	 * result only for an error completion counted on its trigger after
	 * it was posted (fi_tnbc_coll(3)), and the engine may complete the
	 * root's reduce (its children's contributions may all be waiting)
	 * before the reduce call returns. */
	b.tag = tag;
	b.trig_cntr = me ? NULL : done; /* re-triggered by the reduce */
	b.threshold = base + 1;
	b.src = me ? ctx->addrs[(me - 1) / k] : FI_ADDR_UNSPEC;
	b.dests = kids;
	b.ndests = (size_t) nch;
	b.result = result;
	b.len = FI_TNBC_RED_INLINE;
	b.comp_cntr = done;
	FTX_CHK(ops->bcast(ctx->ep, &b));
	ret = ops->reduce(ctx->ep, &r);
	if (ret)
		return ret;
	/* the reduce and the broadcast: two completions, errors included */
	while (fi_cntr_read(done) + fi_cntr_readerr(done) < base + 2) {
		FTX_EXPECT(!ftx_expired(ctx), "descriptors never completed");
		ftx_relax(&spins);
	}
	return 0;
}

static int
run_descriptors(struct ftx_ctx *ctx)
{
	struct fi_tnbc_ops_coll *ops = desc_ops(ctx);
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *done;
	uint64_t tag = 1;
	static const struct {
		uint8_t op, width;
		enum fi_datatype dt;
		enum fi_op fop;
	} plain[] = {
		{FI_TNBC_RED_SUM, FI_TNBC_RED_DOUBLE, FI_DOUBLE, FI_SUM},
		{FI_TNBC_RED_SUM, FI_TNBC_RED_INT32, FI_INT32, FI_SUM},
		{FI_TNBC_RED_MAX, FI_TNBC_RED_UINT64, FI_UINT64, FI_MAX},
		{FI_TNBC_RED_MIN, FI_TNBC_RED_FLOAT, FI_FLOAT, FI_MIN},
		{FI_TNBC_RED_LXOR, FI_TNBC_RED_INT64, FI_INT64, FI_LXOR},
		{FI_TNBC_RED_BAND, FI_TNBC_RED_UINT32, FI_UINT32, FI_BAND},
		{FI_TNBC_RED_BOR, FI_TNBC_RED_INT64, FI_INT64, FI_BOR},
	};

	FTX_CHK(fi_cntr_open(ctx->domain, &ca, &done, NULL));
	for (size_t t = 0; t < sizeof(plain) / sizeof(plain[0]); t++) {
		struct desc_run run = {.op = plain[t].op,
				       .width = plain[t].width,
				       .bad_rank = -1};
		size_t es = dt_size(plain[t].dt);
		uint8_t mine[FI_TNBC_RED_INLINE], want[FI_TNBC_RED_INLINE],
			tmp[FI_TNBC_RED_INLINE], res[FI_TNBC_RED_INLINE];
		uint32_t ev = 0;

		run.count = (uint16_t) (FI_TNBC_RED_INLINE / es);
		fill(plain[t].dt, plain[t].fop, mine, run.count, ctx->rank,
		     tag);
		fill(plain[t].dt, plain[t].fop, want, run.count, 0, tag);
		for (int m = 1; m < ctx->nprocs; m++) {
			fill(plain[t].dt, plain[t].fop, tmp, run.count, m, tag);
			ref_fold(plain[t].dt, plain[t].fop, want, tmp,
				 run.count);
		}
		FTX_CHK(desc_allreduce(ctx, ops, done, &run, tag++, mine, res,
				       &ev));
		FTX_EXPECT(!memcmp(res, want, es * run.count),
			   "descriptor op %d width %d: wrong result", run.op,
			   run.width);
		FTX_EXPECT(ctx->rank || !ev, "error vector 0x%x", ev);
		FTX_EXPECT(!fi_cntr_readerr(done), "an error completion");
	}
	/* The root's children are processes of this host: their
	 * contributions came through its mailbox unless slots are off
	 * (the first child to post always finds its slot free), or shared
	 * memory is not what reaches them (FI_TNBC_XPORTS). */
	if (!ctx->rank && ctx->nprocs > 1) {
		struct fi_tnbc_engine_stats st;
		const char *slots = getenv("FI_TNBC_COLL_SLOTS");
		const char *xp = getenv("FI_TNBC_XPORTS");
		bool off = (slots && (!strcmp(slots, "0") ||
				      !strcasecmp(slots, "false") ||
				      !strcasecmp(slots, "no"))) ||
			   (xp && !strstr(xp, "shm"));

		FTX_EXPECT(ftx_tnbc_stats(ctx, &st), "no engine statistics");
		FTX_EXPECT(off ? st.slot_pkts == 0 : st.slot_pkts > 0,
			   "%llu contributions through slots with slots %s",
			   (unsigned long long) st.slot_pkts,
			   off ? "off" : "on");
	}
	/* maxloc/minloc of doubles with ties: the smaller location wins */
	for (int mx = 0; mx < 2; mx++) {
		struct desc_run run = {.op = mx ? FI_TNBC_RED_MAXLOC :
						  FI_TNBC_RED_MINLOC,
				       .width = FI_TNBC_RED_DOUBLE,
				       .count = 3,
				       .bad_rank = -1};
		struct fi_tnbc_loc64 mine[3], res[3];
		uint32_t ev = 0;

		for (int i = 0; i < 3; i++) {
			double v = i == 0 ? 7.0 /* a tie everywhere */
				   :
				   i == 1 ? (double) (ctx->rank % 3) :
					    (double) ctx->rank;
			memcpy(&mine[i].value, &v, sizeof(v));
			mine[i].loc = 100 + ctx->rank;
		}
		FTX_CHK(desc_allreduce(ctx, ops, done, &run, tag++, mine, res,
				       &ev));
		for (int i = 0; i < 3; i++) {
			double v;
			int64_t want_loc;
			double want_v;

			memcpy(&v, &res[i].value, sizeof(v));
			if (i == 0) {
				want_v = 7.0;
				want_loc = 100;
			} else if (i == 1) {
				int top = ctx->nprocs > 2 ? 2 : ctx->nprocs - 1;

				want_v = mx ? top : 0;
				want_loc = 100 + (mx ? top : 0);
			} else {
				want_v = mx ? ctx->nprocs - 1 : 0;
				want_loc = 100 + (mx ? ctx->nprocs - 1 : 0);
			}
			FTX_EXPECT(v == want_v && res[i].loc == want_loc,
				   "%s pair %d: (%g, %lld), expected (%g, "
				   "%lld)",
				   mx ? "maxloc" : "minloc", i, v,
				   (long long) res[i].loc, want_v,
				   (long long) want_loc);
		}
	}
	/* a child whose width disagrees: its parent refuses to fold it and
	 * the root's error vector and completion say so */
	if (ctx->nprocs > 1) {
		struct desc_run run = {.op = FI_TNBC_RED_SUM,
				       .width = FI_TNBC_RED_INT64,
				       .count = 2,
				       .bad_rank = ctx->nprocs - 1};
		int64_t mine[6] = {1, 1}, res[6];
		uint32_t ev = 0;
		uint64_t errs = fi_cntr_readerr(done);

		FTX_CHK(desc_allreduce(ctx, ops, done, &run, tag++, mine, res,
				       &ev));
		if (!ctx->rank)
			FTX_EXPECT(ev & FI_TNBC_RED_EMISMATCH,
				   "root error vector 0x%x lacks the mismatch",
				   ev);
		FTX_EXPECT(ctx->rank == ctx->nprocs - 1 ||
				   fi_cntr_readerr(done) > errs,
			   "rank %d saw no error completion", ctx->rank);
	}
	ftx_barrier(ctx);
	/* refused when posted */
	{
		struct fi_tnbc_red_desc r = {.size = sizeof(r),
					     .flags = FI_TNBC_RED_CP,
					     .degree = 2,
					     .op = FI_TNBC_RED_SUM,
					     .width = FI_TNBC_RED_DOUBLE,
					     .count = 1,
					     .dest = FI_ADDR_NOTAVAIL,
					     .result = &r.data};

		r.degree = 0;
		FTX_EXPECT(ops->reduce(ctx->ep, &r) == -FI_EINVAL,
			   "branch degree 0 was taken");
		r.degree = 2;
		r.count = 7; /* 56 B */
		FTX_EXPECT(ops->reduce(ctx->ep, &r) == -FI_EINVAL,
			   "56 B in one descriptor was taken");
		r.count = 1;
		r.op = FI_TNBC_RED_BXOR;
		FTX_EXPECT(ops->reduce(ctx->ep, &r) == -FI_EINVAL,
			   "BXOR on doubles was taken");
		r.op = FI_TNBC_RED_SUM;
		r.children = 3;
		FTX_EXPECT(ops->reduce(ctx->ep, &r) == -FI_EINVAL,
			   "more children than the degree was taken");
		r.children = 0;
		r.tag = 1ULL << 62;
		FTX_EXPECT(ops->reduce(ctx->ep, &r) == -FI_EINVAL,
			   "a tag of 2^62 was taken");
	}
	FTX_CHK(fi_close(&done->fid));
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "sweep", .run = run_sweep, .pre_enable = bind_eq},
	{.name = "determinism", .run = run_determinism, .pre_enable = bind_eq},
	{.name = "concurrent", .run = run_concurrent, .pre_enable = bind_eq},
	{.name = "late_join", .run = run_late_join, .pre_enable = bind_eq},
	{.name = "named", .run = run_named, .pre_enable = bind_eq},
	{.name = "sleep", .run = run_sleep, .pre_enable = bind_eq},
	{.name = "bad_input", .run = run_bad_input, .pre_enable = bind_eq},
	{.name = "descriptors", .run = run_descriptors},
	{.name = "member_death",
	 .run = run_member_death,
	 .pre_enable = bind_eq,
	 .flags = FTX_CASE_NO_FINAL_BARRIER},
	{.name = "alltoall", .run = run_alltoall, .pre_enable = bind_eq},
	{.name = "alltoall_death",
	 .run = run_alltoall_death,
	 .pre_enable = bind_eq,
	 .flags = FTX_CASE_NO_FINAL_BARRIER},
	{0},
};

static int
opt(int c, const char *arg)
{
	(void) arg;
	if (c != 'F')
		return -1;
	full_sweep = true;
	return 0;
}

static const struct ftx_test test = {
	.name = "ftx_coll",
	.desc = "fi_collective(3): joins and every collective, checked",
	.caps = FI_MSG | FI_TAGGED | FI_COLLECTIVE,
	.nprocs = 8,
	.min_procs = 1,
	.max_procs = FTX_MAX_PROCS,
	.timeout = 300,
	.optstr = "F",
	.opt = opt,
	.opthelp = "  -F       full sweep: 1 MiB for every op and datatype\n",
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
