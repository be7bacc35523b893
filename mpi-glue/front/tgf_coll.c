/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The collective wrappers.  Each checks what the offload can take, asks
 * the policy, posts to the core, and otherwise calls the PMPI_ function
 * with its own arguments.  Anything the MPI must judge (a NULL buffer
 * with a count, a bad root, MPI_BOTTOM, a null handle) goes to the MPI,
 * so errors reach the communicator's error handler as without the glue.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>
#include <rdma/fi_ext_tnbc.h>

#include "tgf_coll.h"
#include "tgf_req.h"
#include "tgf_stage.h"
#include "tgf_tnbc.h"

#define TGF_OK (-1)

/* ------------------------------------------------------------------ */
/* Handles                                                              */

static int tgf_fi_dt(MPI_Datatype dt)
{
	int size = 0;
	enum fi_datatype fi;

	if (dt == MPI_SIGNED_CHAR || dt == MPI_INT8_T || dt == MPI_CHAR)
		fi = FI_INT8;
	else if (dt == MPI_UNSIGNED_CHAR || dt == MPI_UINT8_T || dt == MPI_BYTE)
		fi = FI_UINT8;
	else if (dt == MPI_SHORT || dt == MPI_INT16_T)
		fi = FI_INT16;
	else if (dt == MPI_UNSIGNED_SHORT || dt == MPI_UINT16_T)
		fi = FI_UINT16;
	else if (dt == MPI_INT || dt == MPI_INT32_T || dt == MPI_INTEGER ||
		 dt == MPI_INTEGER4)
		fi = FI_INT32;
	else if (dt == MPI_UNSIGNED || dt == MPI_UINT32_T)
		fi = FI_UINT32;
	else if (dt == MPI_LONG || dt == MPI_LONG_LONG || dt == MPI_INT64_T ||
		 dt == MPI_INTEGER8)
		fi = FI_INT64;
	else if (dt == MPI_UNSIGNED_LONG || dt == MPI_UNSIGNED_LONG_LONG ||
		 dt == MPI_UINT64_T)
		fi = FI_UINT64;
	else if (dt == MPI_FLOAT || dt == MPI_REAL || dt == MPI_REAL4)
		fi = FI_FLOAT;
	else if (dt == MPI_DOUBLE || dt == MPI_DOUBLE_PRECISION ||
		 dt == MPI_REAL8)
		fi = FI_DOUBLE;
	else if (dt == MPI_LONG_DOUBLE)
		fi = FI_LONG_DOUBLE;
	else if (dt == MPI_C_FLOAT_COMPLEX || dt == MPI_COMPLEX)
		fi = FI_FLOAT_COMPLEX;
	else if (dt == MPI_C_DOUBLE_COMPLEX || dt == MPI_DOUBLE_COMPLEX)
		fi = FI_DOUBLE_COMPLEX;
	else
		return -1;
	/* a Fortran type of another width than its C namesake is not
	 * what it seems */
	PMPI_Type_size(dt, &size);
	switch (fi) {
	case FI_INT8:
	case FI_UINT8:
		return size == 1 ? (int)fi : -1;
	case FI_INT16:
	case FI_UINT16:
		return size == 2 ? (int)fi : -1;
	case FI_INT32:
	case FI_UINT32:
	case FI_FLOAT:
		return size == 4 ? (int)fi : -1;
	case FI_INT64:
	case FI_UINT64:
	case FI_DOUBLE:
	case FI_FLOAT_COMPLEX:
		return size == 8 ? (int)fi : -1;
	case FI_DOUBLE_COMPLEX:
		return size == 16 ? (int)fi : -1;
	case FI_LONG_DOUBLE:
		return size == (int)sizeof(long double) ? (int)fi : -1;
	default:
		return -1;
	}
}

static int tgf_fi_op(MPI_Op op)
{
	if (op == MPI_SUM)
		return FI_SUM;
	if (op == MPI_PROD)
		return FI_PROD;
	if (op == MPI_MIN)
		return FI_MIN;
	if (op == MPI_MAX)
		return FI_MAX;
	if (op == MPI_LAND)
		return FI_LAND;
	if (op == MPI_LOR)
		return FI_LOR;
	if (op == MPI_LXOR)
		return FI_LXOR;
	if (op == MPI_BAND)
		return FI_BAND;
	if (op == MPI_BOR)
		return FI_BOR;
	if (op == MPI_BXOR)
		return FI_BXOR;
	return -1;
}

/* count elements of dt for a data mover: *bytes, and whether they are
 * one run of bytes at the buffer (TGF_RUN) or must be staged
 * (tgf_stage.c); TGF_BAD for what the MPI must judge. */
enum { TGF_BAD = -1, TGF_STAGED, TGF_RUN };

static int tgf_layout(MPI_Datatype dt, int count, size_t *bytes)
{
	MPI_Aint lb, extent, tlb, textent;
	int size;

	if (count < 0 || dt == MPI_DATATYPE_NULL ||
	    PMPI_Type_size(dt, &size) != MPI_SUCCESS || size < 0)
		return TGF_BAD;
	*bytes = (size_t)size * (size_t)count;
	PMPI_Type_get_extent(dt, &lb, &extent);
	PMPI_Type_get_true_extent(dt, &tlb, &textent);
	if (lb || tlb || extent != size || textent != size)
		return TGF_STAGED;
	return TGF_RUN;
}

static int tgf_comm_check(MPI_Comm comm, struct tgf_comm **fc)
{
	if (comm == MPI_COMM_NULL)
		return TG_WHY_ARGS;
	if (!tg_ready())
		return TG_WHY_OFF;
	*fc = tgf_comm(comm);
	if (!*fc || !(*fc)->tc)
		return TG_WHY_COMM;
	return TGF_OK;
}

static bool tgf_root_ok(const struct tgf_comm *fc, int root)
{
	return root >= 0 && root < tg_comm_size(fc->tc);
}

/* A reduction's handles: TGF_OK or why it falls back. */
static int tgf_red_check(enum fi_collective_op coll, int count, MPI_Datatype dt,
			 MPI_Op op, enum fi_datatype *fdt, enum fi_op *fop)
{
	int d, o;

	if (count <= 0 || dt == MPI_DATATYPE_NULL || op == MPI_OP_NULL)
		return TG_WHY_ARGS;
	d = tgf_fi_dt(dt);
	o = tgf_fi_op(op);
	if (d < 0 || o < 0 ||
	    !tg_query(coll, (enum fi_datatype)d, (enum fi_op)o))
		return TG_WHY_TYPE;
	*fdt = (enum fi_datatype)d;
	*fop = (enum fi_op)o;
	return TGF_OK;
}

static int tgf_policy(int why, enum tg_fn fn, size_t bytes,
		      const struct tgf_comm *fc)
{
	if (why == TGF_OK &&
	    !tg_policy_offload(fn, bytes, tg_comm_size(fc->tc)))
		return TG_WHY_POLICY;
	return why;
}

int tgf_fail(MPI_Comm comm, int err)
{
	int code = err == -FI_ETRUNC || err == -FI_EMSGSIZE ? MPI_ERR_TRUNCATE
		   : err == -FI_ENOMEM			    ? MPI_ERR_NO_MEM
							    : MPI_ERR_OTHER;

	PMPI_Comm_call_errhandler(comm, code);
	return code;
}

int tgf_finish(MPI_Comm comm, struct tg_req *r, struct tgf_stage *st)
{
	int err = tg_req_wait(r);

	tg_req_free(r);
	if (!tgf_stage_end(st, !err) && !err)
		err = -FI_EIO;
	return err ? tgf_fail(comm, err) : MPI_SUCCESS;
}

/* A call every member decided to offload that this member cannot post
 * (err): it fails.  Falling back alone would leave the others waiting
 * for it in the offload, and it for them in the MPI's own algorithm. */
static int tgf_refused(MPI_Comm comm, enum tg_fn fn, int err)
{
	tg_count(fn, false, TG_WHY_POST);
	return tgf_fail(comm, err);
}

/* Whether every member's post is refused alike, so that all of them
 * fall back together: the provider's limits and types, which rest on
 * what the members share (a size in bytes, a count, a type), or an
 * argument error the MPI then reports itself.  No memory, a group
 * broken by a dead peer, are one member's alone. */
static bool tgf_refused_alike(int err)
{
	return err == -FI_EINVAL || err == -FI_EOPNOTSUPP || err == -FI_ENOSYS;
}

/* A call every member offloads whose buffers could not be staged. */
static int tgf_unstaged(MPI_Comm comm, enum tg_fn fn)
{
	return tgf_refused(comm, fn, -FI_ENOMEM);
}

/* Before anything else: what T-NBC guards in the call's buffers opens
 * (one load when nothing is guarded). */
#define TGF_OPEN(...)                                                          \
	do {                                                                   \
		if (tg_tnbc_guarding()) {                                      \
			__VA_ARGS__;                                           \
		}                                                              \
	} while (0)

static int tgf_size(MPI_Comm comm)
{
	int n = 0;

	if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &n) != MPI_SUCCESS)
		return 0;
	return n;
}

int tgf_w_blocks(MPI_Comm comm)
{
	int n = 0, inter = 0;

	if (comm == MPI_COMM_NULL ||
	    PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
	    (inter ? PMPI_Comm_remote_size(comm, &n)
		   : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS)
		return 0;
	return n;
}

/* The first line of every wrapper: a function the policy never offloads
 * goes straight to the MPI, before any handle is looked at. */
#define TGF_SHORTCUT(FN, FALLBACK)                                             \
	do {                                                                   \
		int may_ = tg_policy_may(FN);                                  \
		if (may_ >= 0) {                                               \
			tg_count(FN, false, (enum tg_why)may_);                \
			return FALLBACK;                                       \
		}                                                              \
	} while (0)

/* Then a reduction too small for the function's cutoff whatever its
 * type: COUNT elements of at most TGF_ELEM_MAX bytes, the largest
 * predefined type (a derived one falls back anyway).  Only where every
 * member passes the same count and type, as a reduction's must: a
 * broadcast's members may describe one message with different counts
 * (1 of a contiguous type against 1000 MPI_INT), and would decide apart
 * and wait on each other for ever.  The handle checks cost more
 * than a small reduction of the MPI's own: MPICH's 8-byte MPI_Reduce at
 * 2 ranks took 0.35 us alone, 0.43 through them.  A negative count is
 * left to the checks, which give it to the MPI as an argument error. */
#define TGF_ELEM_MAX 32u
#define TGF_BELOW(FN, COUNT, FALLBACK)                                         \
	do {                                                                   \
		if ((COUNT) >= 0 &&                                            \
		    tg_policy_below(FN, (size_t)(COUNT)*TGF_ELEM_MAX)) {       \
			tg_count(FN, false, TG_WHY_POLICY);                    \
			return FALLBACK;                                       \
		}                                                              \
	} while (0)

/* The dance every wrapper does; POST uses r, FALLBACK is the PMPI call.
 * A data mover's STAGE (TGF_OK or TGF_UNSTAGED) stages its buffers once
 * the call is offloaded, into the chain ST, which the call unpacks. */
#define TGF_UNSTAGED (-2)
/* An alltoallv's byte counts could not be allocated (before the policy,
 * which decides whether that matters). */
#define TGF_NOMEM (-3)
#define TGF_BLOCKING_ST(FN, WHY, STAGE, ST, POST, FALLBACK)                    \
	TGF_BLOCKING_DONE(FN, WHY, STAGE, ST, POST, MPI_SUCCESS, FALLBACK)
/* DONE: the call's return code once it succeeded. */
#define TGF_BLOCKING_DONE(FN, WHY, STAGE, ST, POST, DONE, FALLBACK)            \
	do {                                                                   \
		int why_ = (WHY);                                              \
		if (why_ == TGF_OK)                                            \
			why_ = (STAGE);                                        \
		if (why_ == TGF_UNSTAGED)                                      \
			return tgf_unstaged(comm, FN);                         \
		if (why_ == TGF_OK) {                                          \
			struct tg_req *r = tg_req_new(NULL);                   \
			int err_ = r ? (POST) : -FI_ENOMEM;                    \
			if (!err_) {                                           \
				int rc_;                                       \
				tg_count(FN, true, 0);                         \
				rc_ = tgf_finish(comm, r, ST);                 \
				return rc_ == MPI_SUCCESS ? (DONE) : rc_;      \
			}                                                      \
			tg_req_free(r);                                        \
			if (!tgf_refused_alike(err_)) {                        \
				tgf_stage_end(ST, false);                      \
				return tgf_refused(comm, FN, err_);            \
			}                                                      \
			why_ = TG_WHY_POST;                                    \
		}                                                              \
		tgf_stage_end(ST, false);                                      \
		tg_count(FN, false, (enum tg_why)why_);                        \
		return FALLBACK;                                               \
	} while (0)
#define TGF_BLOCKING(FN, WHY, POST, FALLBACK)                                  \
	TGF_BLOCKING_ST(FN, WHY, TGF_OK, NULL, POST, FALLBACK)

#define TGF_NB_ST(FN, WHY, TC, BYTES, STAGE, ST, POST, FALLBACK)               \
	do {                                                                   \
		int why_ = (WHY);                                              \
		if (why_ == TGF_OK && !tgf_nb_enabled())                       \
			why_ = TG_WHY_OFF;                                     \
		if (why_ == TGF_OK)                                            \
			why_ = (STAGE);                                        \
		if (why_ == TGF_UNSTAGED) {                                    \
			*request = MPI_REQUEST_NULL;                           \
			return tgf_unstaged(comm, FN);                         \
		}                                                              \
		if (why_ == TGF_OK) {                                          \
			struct tg_req *r = tgf_nb_begin(request, ST);          \
			int bad_ = -FI_ENOMEM;                                 \
			if (r) {                                               \
				tg_defer((TC), BYTES, true);                   \
				bad_ = (POST);                                 \
				tg_defer((TC), BYTES, false);                  \
			}                                                      \
			if (!bad_) {                                           \
				tg_count(FN, true, 0);                         \
				tg_handoff(BYTES);                             \
				return MPI_SUCCESS;                            \
			}                                                      \
			tgf_nb_abort(request, r);                              \
			if (!tgf_refused_alike(bad_)) {                        \
				tgf_stage_end(ST, false);                      \
				*request = MPI_REQUEST_NULL;                   \
				return tgf_refused(comm, FN, bad_);            \
			}                                                      \
			why_ = TG_WHY_POST;                                    \
		}                                                              \
		tgf_stage_end(ST, false);                                      \
		tg_count(FN, false, (enum tg_why)why_);                        \
		return FALLBACK;                                               \
	} while (0)
#define TGF_NB(FN, WHY, TC, BYTES, POST, FALLBACK)                             \
	TGF_NB_ST(FN, WHY, TC, BYTES, TGF_OK, NULL, POST, FALLBACK)

/* ------------------------------------------------------------------ */
/* Argument checks, one per shape                                       */

struct tgf_red {
	struct tgf_comm *fc;
	enum fi_datatype dt;
	enum fi_op op;
	const void *sbuf; /* NULL: in place */
	size_t bytes;
};

static int tgf_check_allreduce(MPI_Comm comm, const void *sbuf, void *rbuf,
			       int count, MPI_Datatype dt, MPI_Op op,
			       enum fi_collective_op coll, struct tgf_red *a)
{
	int why = tgf_comm_check(comm, &a->fc);
	int size;

	if (why != TGF_OK)
		return why;
	why = tgf_red_check(coll, count, dt, op, &a->dt, &a->op);
	if (why != TGF_OK)
		return why;
	if (!rbuf || !sbuf || sbuf == rbuf)
		return TG_WHY_ARGS;
	a->sbuf = sbuf == MPI_IN_PLACE ? NULL : sbuf;
	PMPI_Type_size(dt, &size);
	a->bytes = (size_t)size * (size_t)count;
	return TGF_OK;
}

/* Scan and exscan: a reduction's checks, but an exclusive scan's member
 * 0 need not pass a result buffer unless its input is there (in
 * place): MPI makes it insignificant there. */
static int tgf_check_scan(MPI_Comm comm, const void *sbuf, void *rbuf,
			  int count, MPI_Datatype dt, MPI_Op op, bool ex,
			  struct tgf_red *a)
{
	int why = tgf_comm_check(comm, &a->fc);
	int size;

	if (why != TGF_OK)
		return why;
	why = tgf_red_check(FI_ALLREDUCE, count, dt, op, &a->dt, &a->op);
	if (why != TGF_OK)
		return why;
	if (!sbuf || sbuf == rbuf ||
	    (!rbuf &&
	     !(ex && sbuf != MPI_IN_PLACE && !tg_comm_rank(a->fc->tc))))
		return TG_WHY_ARGS;
	a->sbuf = sbuf == MPI_IN_PLACE ? NULL : sbuf;
	PMPI_Type_size(dt, &size);
	a->bytes = (size_t)size * (size_t)count;
	return TGF_OK;
}

static int tgf_check_reduce(MPI_Comm comm, const void *sbuf, void *rbuf,
			    int count, MPI_Datatype dt, MPI_Op op, int root,
			    struct tgf_red *a)
{
	int why = tgf_comm_check(comm, &a->fc);
	int size;
	bool me;

	if (why != TGF_OK)
		return why;
	if (!tgf_root_ok(a->fc, root))
		return TG_WHY_ARGS;
	why = tgf_red_check(FI_REDUCE, count, dt, op, &a->dt, &a->op);
	if (why != TGF_OK)
		return why;
	me = tg_comm_rank(a->fc->tc) == root;
	if (!sbuf || (me && (!rbuf || sbuf == rbuf)) ||
	    (!me && sbuf == MPI_IN_PLACE))
		return TG_WHY_ARGS;
	a->sbuf = sbuf == MPI_IN_PLACE ? NULL : sbuf;
	PMPI_Type_size(dt, &size);
	a->bytes = (size_t)size * (size_t)count;
	return TGF_OK;
}

/* Reduce_scatter: counts may differ per member (every member passes the
 * same array); a->bytes is the whole vector's, which every member knows,
 * and the provider's type check is made on the largest block. */
static int tgf_check_reduce_scatter(MPI_Comm comm, const void *sbuf, void *rbuf,
				    const int counts[], MPI_Datatype dt,
				    MPI_Op op, struct tgf_red *a)
{
	int why = tgf_comm_check(comm, &a->fc);
	int size, n, max = 0;
	size_t total = 0;

	if (why != TGF_OK)
		return why;
	if (!counts)
		return TG_WHY_ARGS;
	n = tg_comm_size(a->fc->tc);
	for (int i = 0; i < n; i++) {
		if (counts[i] < 0)
			return TG_WHY_ARGS;
		if (counts[i] > max)
			max = counts[i];
		total += (size_t)counts[i];
	}
	why = tgf_red_check(FI_REDUCE_SCATTER, max, dt, op, &a->dt, &a->op);
	if (why != TGF_OK)
		return why;
	if (!sbuf || sbuf == rbuf ||
	    (!rbuf &&
	     (sbuf == MPI_IN_PLACE || counts[tg_comm_rank(a->fc->tc)])))
		return TG_WHY_ARGS;
	a->sbuf = sbuf == MPI_IN_PLACE ? NULL : sbuf;
	PMPI_Type_size(dt, &size);
	a->bytes = (size_t)size * total;
	return TGF_OK;
}

struct tgf_mov {
	struct tgf_comm *fc;
	const void *sbuf; /* NULL: in place */
	void *rbuf;
	size_t bytes; /* one member's slice */
	/* a root whose own slice is another size than the others' */
	bool own_differs;
	size_t own;
	/* the send and the receive side, where staged (tgf_stage.h) */
	struct tgf_side side[2];
	struct tgf_stage *st;
};

/* One side of a data mover: count elements of dt at buf, times mult
 * for the whole buffer (a member's slice or all n of them).  A buffer
 * of one run of bytes needs an address; a staged one may be MPI_BOTTOM
 * with absolute displacements. */
static int tgf_side(struct tgf_mov *a, int k, const void *buf, int count,
		    MPI_Datatype dt, int mult, unsigned how, size_t *bytes)
{
	int l = tgf_layout(dt, count, bytes);

	if (l == TGF_BAD)
		return TG_WHY_ARGS;
	if (l == TGF_RUN)
		return buf ? TGF_OK : TG_WHY_ARGS;
	a->side[k] = (struct tgf_side){.buf = buf,
				       .count = (size_t)count * (size_t)mult,
				       .dt = dt,
				       .how = how};
	return TGF_OK;
}

/* Once offloaded: the staged sides become their packed bytes.  A
 * stage that fails (no memory for the copy) fails the call: every
 * member decided to offload, and one that fell back alone would wait
 * for the others for ever. */
static int tgf_stage_sides(const struct tgf_side side[2], const void **sbuf,
			   void **rbuf, struct tgf_stage **st)
{
	for (int k = 0; k < 2; k++) {
		struct tgf_stage *s;
		void *b = NULL;

		if (!side[k].how)
			continue;
		s = tgf_stage_new(&side[k], &b);
		if (!s) {
			tgf_stage_end(*st, false);
			*st = NULL;
			return TGF_UNSTAGED;
		}
		*st = tgf_stage_link(*st, s);
		if (k == 0)
			*sbuf = b;
		else
			*rbuf = b;
	}
	return TGF_OK;
}

static int tgf_mov_stage(struct tgf_mov *a)
{
	return tgf_stage_sides(a->side, &a->sbuf, &a->rbuf, &a->st);
}

/* Allgather (mult 1) and alltoall (mult n): a slice from each to each. */
static int tgf_check_exchange(MPI_Comm comm, const void *sbuf, int scount,
			      MPI_Datatype stype, void *rbuf, int rcount,
			      MPI_Datatype rtype, bool all, struct tgf_mov *a)
{
	int why = tgf_comm_check(comm, &a->fc), n;
	bool in_place = sbuf == MPI_IN_PLACE;
	size_t sb = 0, rb = 0;

	if (why != TGF_OK)
		return why;
	n = tg_comm_size(a->fc->tc);
	why = tgf_side(a, 1, rbuf, rcount, rtype, n,
		       in_place ? TGF_STAGE_IN | TGF_STAGE_OUT : TGF_STAGE_OUT,
		       &rb);
	if (why == TGF_OK && !in_place)
		why = tgf_side(a, 0, sbuf, scount, stype, all ? n : 1,
			       TGF_STAGE_IN, &sb);
	if (why != TGF_OK)
		return why;
	/* one address for both is an error only where both are the
	 * buffer's bytes (MPI_BOTTOM and absolute types may share it) */
	if (!rb ||
	    (!in_place && (sb != rb || (sbuf == rbuf && !a->side[0].how &&
					!a->side[1].how))))
		return TG_WHY_ARGS;
	a->sbuf = in_place ? NULL : sbuf;
	a->rbuf = rbuf;
	a->bytes = rb;
	return TGF_OK;
}

/* Gather (root receives) and scatter (root sends). */
static int tgf_check_rooted(MPI_Comm comm, const void *sbuf, int scount,
			    MPI_Datatype stype, void *rbuf, int rcount,
			    MPI_Datatype rtype, int root, bool gather,
			    struct tgf_mov *a)
{
	int why = tgf_comm_check(comm, &a->fc), n;
	size_t sb = 0, wb = 0;
	bool me, in_place;

	if (why != TGF_OK)
		return why;
	if (!tgf_root_ok(a->fc, root))
		return TG_WHY_ARGS;
	n = tg_comm_size(a->fc->tc);
	me = tg_comm_rank(a->fc->tc) == root;
	/* the slice each member has or gets, and the root's whole buffer */
	const void *slice = gather ? sbuf : rbuf;
	const void *whole = gather ? rbuf : sbuf;
	int scnt = gather ? scount : rcount, wcnt = gather ? rcount : scount;
	MPI_Datatype sty = gather ? stype : rtype, wty = gather ? rtype : stype;
	/* the side (0 send, 1 receive) each is, and what it carries */
	int sk = gather ? 0 : 1, wk = 1 - sk;
	unsigned shw = gather ? TGF_STAGE_IN : TGF_STAGE_OUT;
	unsigned whw = gather ? TGF_STAGE_OUT : TGF_STAGE_IN;

	/* the root's own slice may stay where it is */
	in_place = me && slice == MPI_IN_PLACE;
	/* a root gathering in place sends its slice from the whole */
	if (in_place && gather)
		whw |= TGF_STAGE_IN;
	why = TGF_OK;
	if (!in_place)
		why = tgf_side(a, sk, slice, scnt, sty, 1, shw, &sb);
	if (why == TGF_OK && me)
		why = tgf_side(a, wk, whole, wcnt, wty, n, whw, &wb);
	if (why != TGF_OK)
		return why;
	if (in_place)
		sb = wb;
	if (me && wb != sb && !in_place) {
		/* an erroneous call the MPI answers with MPI_ERR_TRUNCATE
		 * or a short copy: the others send or receive wb bytes and
		 * would wait for a root that fell back alone, so the root
		 * moves its own slice itself (tgf_rooted_post); the copy of
		 * a staged buffer starts as its content, since not all of
		 * it is written */
		a->own_differs = true;
		a->own = sb;
		if (a->side[gather ? wk : sk].how)
			a->side[gather ? wk : sk].how |= TGF_STAGE_IN;
		sb = wb;
	}
	if (!sb ||
	    (me && (whole == slice && !a->side[0].how && !a->side[1].how)) ||
	    (!in_place && slice == MPI_IN_PLACE))
		return TG_WHY_ARGS;
	a->bytes = sb;
	if (gather) {
		a->sbuf = in_place ? NULL : slice;
		a->rbuf = (void *)whole;
	} else {
		a->sbuf = whole;
		a->rbuf = in_place ? NULL : (void *)slice;
	}
	return TGF_OK;
}

/* Gather and scatter: the post, where the root moves its own slice
 * itself when it is another size than the others' (the smaller of the
 * two sizes; the call then runs as if in place). */
static int tgf_rooted_post(struct tgf_mov *a, int root, bool gather,
			   struct tg_req *r)
{
	struct tg_comm *tc = a->fc->tc;
	size_t n = a->own < a->bytes ? a->own : a->bytes;
	char *slot;

	if (!a->own_differs)
		return gather ? tg_gather(tc, a->sbuf, a->rbuf, a->bytes, root,
					  r)
			      : tg_scatter(tc, a->sbuf, a->rbuf, a->bytes, root,
					   r);
	slot = (char *)(gather ? a->rbuf : (void *)a->sbuf) +
	       (size_t)root * a->bytes;
	if (gather) {
		memcpy(slot, a->sbuf, n);
		return tg_gather(tc, NULL, a->rbuf, a->bytes, root, r);
	}
	memcpy(a->rbuf, slot, n);
	return tg_scatter(tc, a->sbuf, NULL, a->bytes, root, r);
}

/* Its return code: a root's own slice longer than where it goes is
 * truncated, as the MPI says. */
static int tgf_rooted_done(MPI_Comm comm, const struct tgf_mov *a, bool gather)
{
	if (a->own_differs && (gather ? a->own > a->bytes : a->bytes > a->own))
		return tgf_fail(comm, -FI_ETRUNC);
	return MPI_SUCCESS;
}

/* The same for a non-blocking call: the root posts all the same (the
 * others wait for it), and its request completes with the error. */
static int tgf_rooted_post_nb(struct tgf_mov *a, int root, bool gather,
			      struct tg_req *r)
{
	int rc = tgf_rooted_post(a, root, gather, r);

	if (!rc && a->own_differs &&
	    (gather ? a->own > a->bytes : a->bytes > a->own))
		tgf_nb_error(r, MPI_ERR_TRUNCATE);
	return rc;
}

/* A broadcast's buffer: read at the root, written elsewhere. */
static int tgf_check_bcast(MPI_Comm comm, void *buf, int count, MPI_Datatype dt,
			   int root, struct tgf_mov *a)
{
	int why = tgf_comm_check(comm, &a->fc);

	if (why != TGF_OK)
		return why;
	if (!tgf_root_ok(a->fc, root))
		return TG_WHY_ARGS;
	why = tgf_side(a, 1, buf, count, dt, 1,
		       tg_comm_rank(a->fc->tc) == root ? TGF_STAGE_IN
						       : TGF_STAGE_OUT,
		       &a->bytes);
	if (why != TGF_OK)
		return why;
	if (!a->bytes)
		return TG_WHY_ARGS;
	a->rbuf = buf;
	return TGF_OK;
}

/* The v exchanges (alltoallv, and allgatherv, gatherv, scatterv as its
 * special cases): byte counts and displacements per member, each way,
 * for tg_alltoallv.  A zero count moves nothing in either direction. */
struct tgf_v {
	struct tgf_comm *fc;
	const void *sbuf; /* NULL: alltoallv in place */
	void *rbuf;
	size_t *sc, *sd, *rc, *rd; /* one allocation, zeroed */
	struct tgf_side side[2]; /* as tgf_mov's */
	struct tgf_stage *st;
	int from_own; /* >= 0: send what this member's receive block holds */
	size_t share; /* bytes per member where every member knows them */
};

/* Where a buffer of no bytes points: a NULL one is legal with a count of
 * 0, and to tg_alltoallv a NULL send buffer means in place. */
static const char tgf_v_none;

static int tgf_v_alloc(struct tgf_v *a)
{
	size_t n = (size_t)tg_comm_size(a->fc->tc);

	a->from_own = -1;
	a->sc = calloc(4 * n, sizeof(size_t));
	if (!a->sc)
		return TGF_NOMEM;
	a->sd = a->sc + n;
	a->rc = a->sd + n;
	a->rd = a->rc + n;
	return TGF_OK;
}

/* Byte counts and displacements of one side: its own, or where staged
 * the packed blocks one after another. */
static bool tgf_v_bytes(const int *counts, const int *displs, size_t elem,
			bool staged, int n, size_t *c, size_t *d)
{
	size_t at = 0;

	for (int i = 0; i < n; i++) {
		if (counts[i] < 0 || displs[i] < 0)
			return false;
		c[i] = (size_t)counts[i] * elem;
		d[i] = staged ? at : (size_t)displs[i] * elem;
		at += c[i];
	}
	return true;
}

/* Side k (0 send, 1 receive), of bytes in all: staged, or its buffer. */
static int tgf_v_put(struct tgf_v *a, int k, struct tgf_side side, bool staged,
		     size_t bytes)
{
	const void *buf = side.buf;

	if (staged)
		a->side[k] = side;
	else if (!buf && !bytes)
		buf = &tgf_v_none;
	else if (!buf)
		return TG_WHY_ARGS;
	if (k)
		a->rbuf = (void *)buf;
	else
		a->sbuf = buf;
	return TGF_OK;
}

/* Side k (0 send, 1 receive) as n blocks of counts and displs. */
static int tgf_v_vec(struct tgf_v *a, int k, const void *buf, const int *counts,
		     const int *displs, MPI_Datatype dt, unsigned how)
{
	int n = tg_comm_size(a->fc->tc), l;
	size_t e = 0, *c = k ? a->rc : a->sc, *d = k ? a->rd : a->sd, all = 0;

	if (!counts || !displs)
		return TG_WHY_ARGS;
	l = tgf_layout(dt, 1, &e);
	if (l == TGF_BAD ||
	    !tgf_v_bytes(counts, displs, e, l == TGF_STAGED, n, c, d))
		return TG_WHY_ARGS;
	for (int i = 0; i < n; i++)
		all += c[i];
	return tgf_v_put(a, k,
			 (struct tgf_side){.buf = buf,
					   .counts = counts,
					   .displs = displs,
					   .n = n,
					   .dt = dt,
					   .how = how},
			 l == TGF_STAGED, all);
}

/* Side k as one block of count (*bytes). */
static int tgf_v_one(struct tgf_v *a, int k, const void *buf, int count,
		     MPI_Datatype dt, unsigned how, size_t *bytes)
{
	int l = tgf_layout(dt, count, bytes);

	if (l == TGF_BAD)
		return TG_WHY_ARGS;
	return tgf_v_put(a, k,
			 (struct tgf_side){.buf = buf,
					   .count = (size_t)count,
					   .dt = dt,
					   .how = how},
			 l == TGF_STAGED, *bytes);
}

/* A check that failed after the allocation. */
static int tgf_v_bad(struct tgf_v *a, int why)
{
	free(a->sc);
	a->sc = NULL;
	return why;
}

/* The start of an alltoall(v/w) check: the communicator, the counts. */
static int tgf_v_begin(MPI_Comm comm, struct tgf_v *a)
{
	int why = tgf_comm_check(comm, &a->fc);

	a->sc = NULL;
	if (why == TGF_OK)
		why = tgf_v_alloc(a);
	return why;
}

/* Its end, once both sides were put: a send buffer that is the receive
 * buffer without MPI_IN_PLACE is the MPI's to judge, and in place
 * tg_alltoallv sends from a copy of rbuf.  TGF_NOMEM passes, for the
 * policy to weigh. */
static int tgf_v_end(struct tgf_v *a, int why, const void *sbuf,
		     const void *rbuf)
{
	bool in_place = sbuf == MPI_IN_PLACE;

	if (why == TGF_OK && !in_place && sbuf == rbuf && sbuf &&
	    !a->side[0].how && !a->side[1].how)
		why = TG_WHY_ARGS;
	if (why != TGF_OK && why != TGF_NOMEM)
		return tgf_v_bad(a, why);
	if (in_place)
		a->sbuf = NULL;
	return why;
}

static int tgf_check_alltoallv(MPI_Comm comm, const void *sbuf,
			       const int *scounts, const int *sdispls,
			       MPI_Datatype stype, void *rbuf,
			       const int *rcounts, const int *rdispls,
			       MPI_Datatype rtype, struct tgf_v *a)
{
	int why = tgf_v_begin(comm, a);
	bool in_place = sbuf == MPI_IN_PLACE;

	if (why != TGF_OK)
		return why;
	why = tgf_v_vec(a, 1, rbuf, rcounts, rdispls, rtype,
			in_place ? TGF_STAGE_IN | TGF_STAGE_OUT
				 : TGF_STAGE_OUT);
	if (why == TGF_OK && !in_place)
		why = tgf_v_vec(a, 0, sbuf, scounts, sdispls, stype,
				TGF_STAGE_IN);
	return tgf_v_end(a, why, sbuf, rbuf);
}

/* Allgatherv: one block to every member; in place, the block this
 * member's receive buffer holds. */
static int tgf_check_allgatherv(MPI_Comm comm, const void *sbuf, int scount,
				MPI_Datatype stype, void *rbuf,
				const int *rcounts, const int *displs,
				MPI_Datatype rtype, size_t share,
				struct tgf_v *a)
{
	int why = tgf_comm_check(comm, &a->fc), n, me;
	bool in_place = sbuf == MPI_IN_PLACE;
	size_t sb = 0;

	a->sc = NULL;
	a->share = share;
	if (why == TGF_OK)
		why = tgf_v_alloc(a);
	if (why != TGF_OK)
		return why;
	n = tg_comm_size(a->fc->tc);
	me = tg_comm_rank(a->fc->tc);
	why = tgf_v_vec(a, 1, rbuf, rcounts, displs, rtype,
			in_place ? TGF_STAGE_IN | TGF_STAGE_OUT
				 : TGF_STAGE_OUT);
	if (why == TGF_OK && !in_place)
		why = tgf_v_one(a, 0, sbuf, scount, stype, TGF_STAGE_IN, &sb);
	if (why == TGF_OK && !in_place && sbuf == rbuf && sbuf &&
	    !a->side[0].how && !a->side[1].how)
		why = TG_WHY_ARGS;
	if (why != TGF_OK)
		return tgf_v_bad(a, why);
	for (int i = 0; i < n; i++)
		a->sc[i] = in_place ? a->rc[me] : sb;
	if (in_place)
		a->from_own = me;
	return TGF_OK;
}

/* Gatherv (gather) and scatterv: the root's side is n blocks, each
 * other member's one block to or from the root; in place, the root's
 * own block stays where it is. */
static int tgf_check_rooted_v(MPI_Comm comm, const void *sbuf, int scount,
			      const int *scounts, const int *sdispls,
			      MPI_Datatype stype, void *rbuf, int rcount,
			      const int *rcounts, const int *rdispls,
			      MPI_Datatype rtype, int root, bool gather,
			      struct tgf_v *a)
{
	int why = tgf_comm_check(comm, &a->fc), me;
	size_t b = 0;
	bool in_place;

	a->sc = NULL;
	if (why != TGF_OK)
		return why;
	if (!tgf_root_ok(a->fc, root))
		return TG_WHY_ARGS;
	why = tgf_v_alloc(a);
	if (why != TGF_OK)
		return why;
	me = tg_comm_rank(a->fc->tc);
	in_place = gather ? sbuf == MPI_IN_PLACE : rbuf == MPI_IN_PLACE;
	if (me != root && in_place)
		why = TG_WHY_ARGS;
	else if (me != root && gather)
		why = tgf_v_one(a, 0, sbuf, scount, stype, TGF_STAGE_IN,
				&a->sc[root]);
	else if (me != root)
		why = tgf_v_one(a, 1, rbuf, rcount, rtype, TGF_STAGE_OUT,
				&a->rc[root]);
	else if (gather) {
		why = tgf_v_vec(a, 1, rbuf, rcounts, rdispls, rtype,
				in_place ? TGF_STAGE_IN | TGF_STAGE_OUT
					 : TGF_STAGE_OUT);
		if (why == TGF_OK && !in_place)
			why = tgf_v_one(a, 0, sbuf, scount, stype, TGF_STAGE_IN,
					&b);
		/* the root's own block: copied, or left in place */
		a->sc[me] = b;
		if (in_place)
			a->rc[me] = 0;
	} else {
		why = tgf_v_vec(a, 0, sbuf, scounts, sdispls, stype,
				TGF_STAGE_IN);
		if (why == TGF_OK && !in_place)
			why = tgf_v_one(a, 1, rbuf, rcount, rtype,
					TGF_STAGE_OUT, &b);
		a->rc[me] = b;
		if (in_place)
			a->sc[me] = 0;
	}
	if (why != TGF_OK)
		return tgf_v_bad(a, why);
	if (!a->sbuf)
		a->sbuf = &tgf_v_none;
	if (!a->rbuf)
		a->rbuf = (void *)&tgf_v_none;
	return TGF_OK;
}

static int tgf_v_stage(struct tgf_v *a)
{
	int why = tgf_stage_sides(a->side, &a->sbuf, &a->rbuf, &a->st);

	if (why == TGF_OK && a->from_own >= 0) {
		/* in place: send the own block, copy nothing to it */
		a->sbuf = (char *)a->rbuf + a->rd[a->from_own];
		a->rc[a->from_own] = 0;
	}
	return why;
}

/* MAXLOC/MINLOC on the pair types the descriptors carry: TGF_OK and the
 * layout, or why it falls back. */
static int tgf_check_loc(MPI_Comm comm, const void *sbuf, void *rbuf, int count,
			 MPI_Datatype dt, struct tgf_comm **fc, bool *wide,
			 int *width)
{
	int why = tgf_comm_check(comm, fc);

	if (why != TGF_OK)
		return why;
	if (dt == MPI_2INT || dt == MPI_2INTEGER) {
		*wide = false;
		*width = FI_TNBC_RED_INT32;
	} else if (dt == MPI_FLOAT_INT) {
		*wide = false;
		*width = FI_TNBC_RED_FLOAT;
	} else if (dt == MPI_DOUBLE_INT) {
		*wide = true;
		*width = FI_TNBC_RED_DOUBLE;
	} else if (dt == MPI_LONG_INT) {
		*wide = true;
		*width = FI_TNBC_RED_INT64;
	} else
		return TG_WHY_TYPE;
	if (count <= 0 || !rbuf || !sbuf || sbuf == rbuf)
		return TG_WHY_ARGS;
	/* the layouts the descriptors' pairs are copied from */
	{
		int size;

		PMPI_Type_size(dt, &size);
		if (size != (*wide ? 12 : 8))
			return TG_WHY_TYPE;
	}
	if ((size_t)count * (*wide ? 16u : 8u) > FI_TNBC_RED_INLINE)
		return TG_WHY_TYPE;
	return TGF_OK;
}

/* ------------------------------------------------------------------ */
/* Blocking                                                             */

int MPI_Barrier(MPI_Comm comm)
{
	TGF_SHORTCUT(TG_BARRIER, PMPI_Barrier(comm));
	struct tgf_comm *fc = NULL;
	int why = tgf_comm_check(comm, &fc);

	TGF_BLOCKING(TG_BARRIER, tgf_policy(why, TG_BARRIER, 0, fc),
		     tg_barrier(fc->tc, r), PMPI_Barrier(comm));
}

static int tgf_bcast_body(const void *site_, void *buf, int count,
			  MPI_Datatype dt, int root, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(buf, count, dt));
	TGF_SHORTCUT(TG_BCAST, PMPI_Bcast(buf, count, dt, root, comm));
	struct tgf_mov a = {0};
	int why = tgf_check_bcast(comm, buf, count, dt, root, &a);

	if (why == TGF_OK && tg_policy_tnbc(TG_BCAST, a.bytes)) {
		int rc;

		if (!a.side[1].how)
			return tgf_tnbc_bcast(comm, a.fc->tc, site_, buf,
					      a.bytes, root, false);
		if (tgf_mov_stage(&a) != TGF_OK)
			return tgf_unstaged(comm, TG_BCAST);
		rc = tgf_tnbc_bcast(comm, a.fc->tc, site_, a.rbuf, a.bytes,
				    root, true);
		if (!tgf_stage_end(a.st, rc == MPI_SUCCESS) && !rc)
			rc = tgf_fail(comm, -FI_EIO);
		return rc;
	}
	TGF_BLOCKING_ST(TG_BCAST, tgf_policy(why, TG_BCAST, a.bytes, a.fc),
			tgf_mov_stage(&a), a.st,
			tg_bcast(a.fc->tc, a.rbuf, a.bytes, root, r),
			PMPI_Bcast(buf, count, dt, root, comm));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
	uint64_t t0;
	int rc;

	if (!tg_report_wanted())
		return tgf_bcast_body(__builtin_return_address(0), buf, count,
				      dt, root, comm);
	t0 = tg_now_ns();
	rc = tgf_bcast_body(__builtin_return_address(0), buf, count, dt, root,
			    comm);
	tg_time(TG_BCAST, tg_now_ns() - t0);
	return rc;
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		  MPI_Op op, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, count, dt); tgf_open(rbuf, count, dt));
	TGF_SHORTCUT(TG_ALLREDUCE,
		     PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm));
	TGF_BELOW(TG_ALLREDUCE, count,
		  PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm));
	struct tgf_red a = {0};
	int why, width = 0;
	bool wide = false;

	if (op == MPI_MAXLOC || op == MPI_MINLOC) {
		why = tgf_check_loc(comm, sbuf, rbuf, count, dt, &a.fc, &wide,
				    &width);
		TGF_BLOCKING(
			TG_ALLREDUCE,
			tgf_policy(why, TG_ALLREDUCE,
				   (size_t)count * (wide ? 16 : 8), a.fc),
			tg_allreduce_loc(a.fc->tc,
					 sbuf == MPI_IN_PLACE ? NULL : sbuf,
					 rbuf, (size_t)count, wide, width,
					 op == MPI_MAXLOC, r),
			PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm));
	}
	why = tgf_check_allreduce(comm, sbuf, rbuf, count, dt, op, FI_ALLREDUCE,
				  &a);

	TGF_BLOCKING(TG_ALLREDUCE, tgf_policy(why, TG_ALLREDUCE, a.bytes, a.fc),
		     tg_allreduce(a.fc->tc, a.sbuf, rbuf, (size_t)count, a.dt,
				  a.op, r),
		     PMPI_Allreduce(sbuf, rbuf, count, dt, op, comm));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
	       MPI_Op op, int root, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, count, dt); tgf_open(rbuf, count, dt));
	TGF_SHORTCUT(TG_REDUCE,
		     PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm));
	TGF_BELOW(TG_REDUCE, count,
		  PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm));
	struct tgf_red a = {0};
	int why = tgf_check_reduce(comm, sbuf, rbuf, count, dt, op, root, &a);

	TGF_BLOCKING(TG_REDUCE, tgf_policy(why, TG_REDUCE, a.bytes, a.fc),
		     tg_reduce(a.fc->tc, a.sbuf, rbuf, (size_t)count, a.dt,
			       a.op, root, r),
		     PMPI_Reduce(sbuf, rbuf, count, dt, op, root, comm));
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int count,
			     MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, (MPI_Aint)count * tgf_size(comm), dt);
		 tgf_open(rbuf,
			  (MPI_Aint)count *
				  (sbuf == MPI_IN_PLACE ? tgf_size(comm) : 1),
			  dt));
	TGF_SHORTCUT(
		TG_REDUCE_SCATTER_BLOCK,
		PMPI_Reduce_scatter_block(sbuf, rbuf, count, dt, op, comm));
	struct tgf_red a = {0};
	int why = tgf_check_allreduce(comm, sbuf, rbuf, count, dt, op,
				      FI_REDUCE_SCATTER, &a);

	TGF_BLOCKING(
		TG_REDUCE_SCATTER_BLOCK,
		tgf_policy(why, TG_REDUCE_SCATTER_BLOCK, a.bytes, a.fc),
		tg_reduce_scatter_block(a.fc->tc, a.sbuf, rbuf, (size_t)count,
					a.dt, a.op, r),
		PMPI_Reduce_scatter_block(sbuf, rbuf, count, dt, op, comm));
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
	     MPI_Op op, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, count, dt); tgf_open(rbuf, count, dt));
	TGF_SHORTCUT(TG_SCAN, PMPI_Scan(sbuf, rbuf, count, dt, op, comm));
	TGF_BELOW(TG_SCAN, count, PMPI_Scan(sbuf, rbuf, count, dt, op, comm));
	struct tgf_red a = {0};
	int why = tgf_check_scan(comm, sbuf, rbuf, count, dt, op, false, &a);

	TGF_BLOCKING(TG_SCAN, tgf_policy(why, TG_SCAN, a.bytes, a.fc),
		     tg_scan(a.fc->tc, a.sbuf, rbuf, (size_t)count, a.dt, a.op,
			     false, r),
		     PMPI_Scan(sbuf, rbuf, count, dt, op, comm));
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
	       MPI_Op op, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, count, dt); tgf_open(rbuf, count, dt));
	TGF_SHORTCUT(TG_EXSCAN, PMPI_Exscan(sbuf, rbuf, count, dt, op, comm));
	TGF_BELOW(TG_EXSCAN, count,
		  PMPI_Exscan(sbuf, rbuf, count, dt, op, comm));
	struct tgf_red a = {0};
	int why = tgf_check_scan(comm, sbuf, rbuf, count, dt, op, true, &a);

	TGF_BLOCKING(TG_EXSCAN, tgf_policy(why, TG_EXSCAN, a.bytes, a.fc),
		     tg_scan(a.fc->tc, a.sbuf, rbuf, (size_t)count, a.dt, a.op,
			     true, r),
		     PMPI_Exscan(sbuf, rbuf, count, dt, op, comm));
}

/* What a reduce_scatter reads and writes, for T-NBC's guard. */
static MPI_Aint tgf_sum(const int counts[], MPI_Comm comm)
{
	MPI_Aint t = 0;
	int n = tgf_size(comm);

	for (int i = 0; counts && i < n; i++)
		t += counts[i] > 0 ? counts[i] : 0;
	return t;
}

static int tgf_rank(MPI_Comm comm)
{
	int r = -1;

	if (comm == MPI_COMM_NULL || PMPI_Comm_rank(comm, &r) != MPI_SUCCESS)
		return -1;
	return r;
}

static int tgf_my_count(const int counts[], MPI_Comm comm)
{
	int me = tgf_rank(comm);

	return counts && me >= 0 ? counts[me] : 0;
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int counts[],
		       MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, tgf_sum(counts, comm), dt);
		 tgf_open(rbuf,
			  sbuf == MPI_IN_PLACE ? tgf_sum(counts, comm)
					       : tgf_my_count(counts, comm),
			  dt));
	TGF_SHORTCUT(TG_REDUCE_SCATTER,
		     PMPI_Reduce_scatter(sbuf, rbuf, counts, dt, op, comm));
	/* every member passes the same counts and type */
	TGF_BELOW(TG_REDUCE_SCATTER, tgf_sum(counts, comm),
		  PMPI_Reduce_scatter(sbuf, rbuf, counts, dt, op, comm));
	struct tgf_red a = {0};
	int why =
		tgf_check_reduce_scatter(comm, sbuf, rbuf, counts, dt, op, &a);

	TGF_BLOCKING(TG_REDUCE_SCATTER,
		     tgf_policy(why, TG_REDUCE_SCATTER, a.bytes, a.fc),
		     tg_reduce_scatter(a.fc->tc, a.sbuf, rbuf, counts, a.dt,
				       a.op, r),
		     PMPI_Reduce_scatter(sbuf, rbuf, counts, dt, op, comm));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		  int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, scount, stype);
		 tgf_open(rbuf, (MPI_Aint)rcount * tgf_size(comm), rtype));
	TGF_SHORTCUT(TG_ALLGATHER, PMPI_Allgather(sbuf, scount, stype, rbuf,
						  rcount, rtype, comm));
	struct tgf_mov a = {0};
	int why = tgf_check_exchange(comm, sbuf, scount, stype, rbuf, rcount,
				     rtype, false, &a);

	TGF_BLOCKING_ST(
		TG_ALLGATHER, tgf_policy(why, TG_ALLGATHER, a.bytes, a.fc),
		tgf_mov_stage(&a), a.st,
		tg_allgather(a.fc->tc, a.sbuf, a.rbuf, a.bytes, r),
		PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

static int tgf_alltoall_body(const void *site_, const void *sbuf, int scount,
			     MPI_Datatype stype, void *rbuf, int rcount,
			     MPI_Datatype rtype, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, (MPI_Aint)scount * tgf_size(comm), stype);
		 tgf_open(rbuf, (MPI_Aint)rcount * tgf_size(comm), rtype));
	TGF_SHORTCUT(TG_ALLTOALL, PMPI_Alltoall(sbuf, scount, stype, rbuf,
						rcount, rtype, comm));
	struct tgf_mov a = {0};
	int why = tgf_check_exchange(comm, sbuf, scount, stype, rbuf, rcount,
				     rtype, true, &a);

	if (why == TGF_OK && tg_policy_tnbc(TG_ALLTOALL, a.bytes)) {
		bool whole = a.side[1].how;
		int rc;

		if (tgf_mov_stage(&a) != TGF_OK)
			return tgf_unstaged(comm, TG_ALLTOALL);
		rc = tgf_tnbc_alltoall(comm, a.fc->tc, site_, a.sbuf, a.rbuf,
				       a.bytes, whole);
		if (!tgf_stage_end(a.st, rc == MPI_SUCCESS) && !rc)
			rc = tgf_fail(comm, -FI_EIO);
		return rc;
	}
	TGF_BLOCKING_ST(
		TG_ALLTOALL, tgf_policy(why, TG_ALLTOALL, a.bytes, a.fc),
		tgf_mov_stage(&a), a.st,
		tg_alltoall(a.fc->tc, a.sbuf, a.rbuf, a.bytes, r),
		PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		 int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
	uint64_t t0;
	int rc;

	if (!tg_report_wanted())
		return tgf_alltoall_body(__builtin_return_address(0), sbuf,
					 scount, stype, rbuf, rcount, rtype,
					 comm);
	t0 = tg_now_ns();
	rc = tgf_alltoall_body(__builtin_return_address(0), sbuf, scount, stype,
			       rbuf, rcount, rtype, comm);
	tg_time(TG_ALLTOALL, tg_now_ns() - t0);
	return rc;
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
	       int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, scount, stype);
		 tgf_open(rbuf, (MPI_Aint)rcount * tgf_size(comm), rtype));
	TGF_SHORTCUT(TG_GATHER, PMPI_Gather(sbuf, scount, stype, rbuf, rcount,
					    rtype, root, comm));
	struct tgf_mov a = {0};
	int why = tgf_check_rooted(comm, sbuf, scount, stype, rbuf, rcount,
				   rtype, root, true, &a);

	TGF_BLOCKING_DONE(TG_GATHER, tgf_policy(why, TG_GATHER, a.bytes, a.fc),
			  tgf_mov_stage(&a), a.st,
			  tgf_rooted_post(&a, root, true, r),
			  tgf_rooted_done(comm, &a, true),
			  PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype,
				      root, comm));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, (MPI_Aint)scount * tgf_size(comm), stype);
		 tgf_open(rbuf, rcount, rtype));
	TGF_SHORTCUT(TG_SCATTER, PMPI_Scatter(sbuf, scount, stype, rbuf, rcount,
					      rtype, root, comm));
	struct tgf_mov a = {0};
	int why = tgf_check_rooted(comm, sbuf, scount, stype, rbuf, rcount,
				   rtype, root, false, &a);

	TGF_BLOCKING_DONE(
		TG_SCATTER, tgf_policy(why, TG_SCATTER, a.bytes, a.fc),
		tgf_mov_stage(&a), a.st, tgf_rooted_post(&a, root, false, r),
		tgf_rooted_done(comm, &a, false),
		PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root,
			     comm));
}

/* A v exchange's decision and its stage: TGF_OK (staged), TGF_UNSTAGED
 * (the others offload, this member cannot: the call fails), or why it
 * falls back.  Where counts differ per member only the group size may
 * decide (a->share 0); every allgatherv member knows them all and
 * decides on its share, summed before anything is allocated. */
static int tgf_v_decide(enum tg_fn fn, int why, struct tgf_v *a, bool nb)
{
	bool nomem = why == TGF_NOMEM;

	why = tgf_policy(nomem ? TGF_OK : why, fn, a->share, a->fc);
	if (why == TGF_OK && nb && !tgf_nb_enabled())
		why = TG_WHY_OFF;
	if (why == TGF_OK && (nomem || tgf_v_stage(a) != TGF_OK))
		return TGF_UNSTAGED;
	return why;
}

/* Posts a decided and staged v exchange, or finishes a call that will
 * not be: true when *rc is the call's result, false when the caller
 * falls back (counted).  request NULL: blocking. */
static bool tgf_v_go(MPI_Comm comm, enum tg_fn fn, int why, struct tgf_v *a,
		     MPI_Request *request, int *rc)
{
	if (why == TGF_UNSTAGED) {
		free(a->sc);
		if (request)
			*request = MPI_REQUEST_NULL;
		*rc = tgf_unstaged(comm, fn);
		return true;
	}
	if (why == TGF_OK) {
		struct tg_req *r = request ? tgf_nb_begin(request, a->st)
					   : tg_req_new(NULL);
		int err = -FI_ENOMEM;
		/* where T-NBC is named for alltoallv, a blocking call's
		 * members may receive by T-NBC: its messages are cut
		 * (tg_cut.h).  An alltoall's members all take T-NBC or
		 * none (one size), and its plain way is T-NBC's own
		 * fallback, which cuts. */
		bool cut = !request && fn == TG_ALLTOALLV &&
			   tg_policy_tnbc(fn, SIZE_MAX);

		if (r) {
			if (request)
				tg_defer(a->fc->tc, SIZE_MAX, true);
			err = tg_alltoallv(a->fc->tc, a->sbuf, a->sc, a->sd,
					   a->rbuf, a->rc, a->rd, cut, r);
			if (request)
				tg_defer(a->fc->tc, SIZE_MAX, false);
		}
		if (!err) {
			free(a->sc);
			tg_count(fn, true, 0);
			if (!request) {
				*rc = tgf_finish(comm, r, a->st);
				return true;
			}
			tg_handoff(SIZE_MAX);
			*rc = MPI_SUCCESS;
			return true;
		}
		if (request)
			tgf_nb_abort(request, r);
		else
			tg_req_free(r);
		if (!tgf_refused_alike(err)) {
			tgf_stage_end(a->st, false);
			free(a->sc);
			if (request)
				*request = MPI_REQUEST_NULL;
			*rc = tgf_refused(comm, fn, err);
			return true;
		}
		why = TG_WHY_POST;
	}
	tgf_stage_end(a->st, false);
	free(a->sc);
	tg_count(fn, false, (enum tg_why)why);
	return false;
}

/* The body of a v wrapper: CHECK fills a, REQ is the request (NULL:
 * blocking), FALLBACK the PMPI call. */
#define TGF_V(FN, REQ, CHECK, FALLBACK)                                        \
	do {                                                                   \
		struct tgf_v a = {0};                                          \
		int why_ = (CHECK), rc_;                                       \
		why_ = tgf_v_decide(FN, why_, &a, (REQ) != NULL);              \
		if (tgf_v_go(comm, FN, why_, &a, REQ, &rc_))                   \
			return rc_;                                            \
		return FALLBACK;                                               \
	} while (0)

static int tgf_alltoallv_body(const void *site_, const void *sbuf,
			      const int scounts[], const int sdispls[],
			      MPI_Datatype stype, void *rbuf,
			      const int rcounts[], const int rdispls[],
			      MPI_Datatype rtype, MPI_Comm comm)
{
	TGF_OPEN(tgf_open_v(sbuf, scounts, sdispls, stype, tgf_size(comm));
		 tgf_open_v(rbuf, rcounts, rdispls, rtype, tgf_size(comm)));
	TGF_SHORTCUT(TG_ALLTOALLV,
		     PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf,
				    rcounts, rdispls, rtype, comm));
	struct tgf_v a = {0};
	int why = tgf_check_alltoallv(comm, sbuf, scounts, sdispls, stype, rbuf,
				      rcounts, rdispls, rtype, &a);
	int rc;

	/* with T-NBC named every other member offloads (tgf_v_decide
	 * asks the policy otherwise) */
	if (why == TGF_NOMEM && tg_policy_tnbc(TG_ALLTOALLV, SIZE_MAX))
		return tgf_unstaged(comm, TG_ALLTOALLV);
	/* With T-NBC named, every member sends the offload's messages (the
	 * variable is the same everywhere); each then receives by T-NBC or
	 * not by its own largest message, which the others cannot know, and
	 * a staged receive buffer (unpacked at the end) not by T-NBC. */
	if (why == TGF_OK && tg_policy_tnbc(TG_ALLTOALLV, SIZE_MAX)) {
		size_t big = 0;

		for (int i = 0; i < tg_comm_size(a.fc->tc); i++)
			big = a.rc[i] > big ? a.rc[i] : big;
		why = tgf_v_stage(&a);
		if (why == TGF_UNSTAGED) {
			free(a.sc);
			return tgf_unstaged(comm, TG_ALLTOALLV);
		}
		if (!a.side[1].how && tg_policy_tnbc(TG_ALLTOALLV, big)) {
			rc = tgf_tnbc_run(comm, a.fc->tc, TG_ALLTOALLV, site_,
					  a.sbuf, a.sc, a.sd, a.rbuf, a.rc,
					  a.rd);
			tgf_stage_end(a.st, false);
			free(a.sc);
			return rc;
		}
	} else {
		why = tgf_v_decide(TG_ALLTOALLV, why, &a, false);
	}
	if (tgf_v_go(comm, TG_ALLTOALLV, why, &a, NULL, &rc))
		return rc;
	return PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts,
			      rdispls, rtype, comm);
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[],
		  MPI_Datatype stype, void *rbuf, const int rcounts[],
		  const int rdispls[], MPI_Datatype rtype, MPI_Comm comm)
{
	uint64_t t0;
	int rc;

	if (!tg_report_wanted())
		return tgf_alltoallv_body(__builtin_return_address(0), sbuf,
					  scounts, sdispls, stype, rbuf,
					  rcounts, rdispls, rtype, comm);
	t0 = tg_now_ns();
	rc = tgf_alltoallv_body(__builtin_return_address(0), sbuf, scounts,
				sdispls, stype, rbuf, rcounts, rdispls, rtype,
				comm);
	tg_time(TG_ALLTOALLV, tg_now_ns() - t0);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Non-blocking: always offloaded where the offload can take them       */

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
	TGF_SHORTCUT(TG_IBARRIER, PMPI_Ibarrier(comm, request));
	struct tgf_comm *fc = NULL;
	int why = tgf_comm_check(comm, &fc);

	TGF_NB(TG_IBARRIER, tgf_policy(why, TG_IBARRIER, 0, fc), fc->tc, 0,
	       tg_barrier(fc->tc, r), PMPI_Ibarrier(comm, request));
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
	       MPI_Request *request)
{
	TGF_OPEN(tgf_open(buf, count, dt));
	TGF_SHORTCUT(TG_IBCAST,
		     PMPI_Ibcast(buf, count, dt, root, comm, request));
	struct tgf_mov a = {0};
	int why = tgf_check_bcast(comm, buf, count, dt, root, &a);

	TGF_NB_ST(TG_IBCAST, tgf_policy(why, TG_IBCAST, a.bytes, a.fc),
		  a.fc->tc, a.bytes, tgf_mov_stage(&a), a.st,
		  tg_bcast(a.fc->tc, a.rbuf, a.bytes, root, r),
		  PMPI_Ibcast(buf, count, dt, root, comm, request));
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		   MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, count, dt); tgf_open(rbuf, count, dt));
	TGF_SHORTCUT(TG_IALLREDUCE,
		     PMPI_Iallreduce(sbuf, rbuf, count, dt, op, comm, request));
	struct tgf_red a = {0};
	int why, width = 0;
	bool wide = false;

	if (op == MPI_MAXLOC || op == MPI_MINLOC) {
		why = tgf_check_loc(comm, sbuf, rbuf, count, dt, &a.fc, &wide,
				    &width);
		TGF_NB(TG_IALLREDUCE,
		       tgf_policy(why, TG_IALLREDUCE,
				  (size_t)count * (wide ? 16 : 8), a.fc),
		       a.fc->tc, (size_t)count * 16,
		       tg_allreduce_loc(a.fc->tc,
					sbuf == MPI_IN_PLACE ? NULL : sbuf,
					rbuf, (size_t)count, wide, width,
					op == MPI_MAXLOC, r),
		       PMPI_Iallreduce(sbuf, rbuf, count, dt, op, comm,
				       request));
	}
	why = tgf_check_allreduce(comm, sbuf, rbuf, count, dt, op, FI_ALLREDUCE,
				  &a);

	TGF_NB(TG_IALLREDUCE, tgf_policy(why, TG_IALLREDUCE, a.bytes, a.fc),
	       a.fc->tc, a.bytes,
	       tg_allreduce(a.fc->tc, a.sbuf, rbuf, (size_t)count, a.dt, a.op,
			    r),
	       PMPI_Iallreduce(sbuf, rbuf, count, dt, op, comm, request));
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		MPI_Op op, int root, MPI_Comm comm, MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, count, dt); tgf_open(rbuf, count, dt));
	TGF_SHORTCUT(TG_IREDUCE, PMPI_Ireduce(sbuf, rbuf, count, dt, op, root,
					      comm, request));
	struct tgf_red a = {0};
	int why = tgf_check_reduce(comm, sbuf, rbuf, count, dt, op, root, &a);

	TGF_NB(TG_IREDUCE, tgf_policy(why, TG_IREDUCE, a.bytes, a.fc), a.fc->tc,
	       a.bytes,
	       tg_reduce(a.fc->tc, a.sbuf, rbuf, (size_t)count, a.dt, a.op,
			 root, r),
	       PMPI_Ireduce(sbuf, rbuf, count, dt, op, root, comm, request));
}

int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int count,
			      MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
			      MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, (MPI_Aint)count * tgf_size(comm), dt);
		 tgf_open(rbuf,
			  (MPI_Aint)count *
				  (sbuf == MPI_IN_PLACE ? tgf_size(comm) : 1),
			  dt));
	TGF_SHORTCUT(TG_IREDUCE_SCATTER_BLOCK,
		     PMPI_Ireduce_scatter_block(sbuf, rbuf, count, dt, op, comm,
						request));
	struct tgf_red a = {0};
	int why = tgf_check_allreduce(comm, sbuf, rbuf, count, dt, op,
				      FI_REDUCE_SCATTER, &a);

	TGF_NB(TG_IREDUCE_SCATTER_BLOCK,
	       tgf_policy(why, TG_IREDUCE_SCATTER_BLOCK, a.bytes, a.fc),
	       a.fc->tc, a.bytes * (size_t)tgf_size(comm),
	       tg_reduce_scatter_block(a.fc->tc, a.sbuf, rbuf, (size_t)count,
				       a.dt, a.op, r),
	       PMPI_Ireduce_scatter_block(sbuf, rbuf, count, dt, op, comm,
					  request));
}

int MPI_Iscan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
	      MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, count, dt); tgf_open(rbuf, count, dt));
	TGF_SHORTCUT(TG_ISCAN,
		     PMPI_Iscan(sbuf, rbuf, count, dt, op, comm, request));
	struct tgf_red a = {0};
	int why = tgf_check_scan(comm, sbuf, rbuf, count, dt, op, false, &a);

	TGF_NB(TG_ISCAN, tgf_policy(why, TG_ISCAN, a.bytes, a.fc), a.fc->tc,
	       a.bytes,
	       tg_scan(a.fc->tc, a.sbuf, rbuf, (size_t)count, a.dt, a.op, false,
		       r),
	       PMPI_Iscan(sbuf, rbuf, count, dt, op, comm, request));
}

int MPI_Iexscan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, count, dt); tgf_open(rbuf, count, dt));
	TGF_SHORTCUT(TG_IEXSCAN,
		     PMPI_Iexscan(sbuf, rbuf, count, dt, op, comm, request));
	struct tgf_red a = {0};
	int why = tgf_check_scan(comm, sbuf, rbuf, count, dt, op, true, &a);

	TGF_NB(TG_IEXSCAN, tgf_policy(why, TG_IEXSCAN, a.bytes, a.fc), a.fc->tc,
	       a.bytes,
	       tg_scan(a.fc->tc, a.sbuf, rbuf, (size_t)count, a.dt, a.op, true,
		       r),
	       PMPI_Iexscan(sbuf, rbuf, count, dt, op, comm, request));
}

int MPI_Ireduce_scatter(const void *sbuf, void *rbuf, const int counts[],
			MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
			MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, tgf_sum(counts, comm), dt);
		 tgf_open(rbuf,
			  sbuf == MPI_IN_PLACE ? tgf_sum(counts, comm)
					       : tgf_my_count(counts, comm),
			  dt));
	TGF_SHORTCUT(TG_IREDUCE_SCATTER,
		     PMPI_Ireduce_scatter(sbuf, rbuf, counts, dt, op, comm,
					  request));
	struct tgf_red a = {0};
	int why =
		tgf_check_reduce_scatter(comm, sbuf, rbuf, counts, dt, op, &a);

	TGF_NB(TG_IREDUCE_SCATTER,
	       tgf_policy(why, TG_IREDUCE_SCATTER, a.bytes, a.fc), a.fc->tc,
	       a.bytes,
	       tg_reduce_scatter(a.fc->tc, a.sbuf, rbuf, counts, a.dt, a.op, r),
	       PMPI_Ireduce_scatter(sbuf, rbuf, counts, dt, op, comm, request));
}

int MPI_Igather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
		MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, scount, stype);
		 tgf_open(rbuf, (MPI_Aint)rcount * tgf_size(comm), rtype));
	TGF_SHORTCUT(TG_IGATHER, PMPI_Igather(sbuf, scount, stype, rbuf, rcount,
					      rtype, root, comm, request));
	struct tgf_mov a = {0};
	int why = tgf_check_rooted(comm, sbuf, scount, stype, rbuf, rcount,
				   rtype, root, true, &a);

	TGF_NB_ST(TG_IGATHER, tgf_policy(why, TG_IGATHER, a.bytes, a.fc),
		  a.fc->tc, a.bytes, tgf_mov_stage(&a), a.st,
		  tgf_rooted_post_nb(&a, root, true, r),
		  PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root,
			       comm, request));
}

int MPI_Iscatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		 int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
		 MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, (MPI_Aint)scount * tgf_size(comm), stype);
		 tgf_open(rbuf, rcount, rtype));
	TGF_SHORTCUT(TG_ISCATTER,
		     PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype,
				   root, comm, request));
	struct tgf_mov a = {0};
	int why = tgf_check_rooted(comm, sbuf, scount, stype, rbuf, rcount,
				   rtype, root, false, &a);

	TGF_NB_ST(TG_ISCATTER, tgf_policy(why, TG_ISCATTER, a.bytes, a.fc),
		  a.fc->tc, a.bytes, tgf_mov_stage(&a), a.st,
		  tgf_rooted_post_nb(&a, root, false, r),
		  PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root,
				comm, request));
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		   int rcount, MPI_Datatype rtype, MPI_Comm comm,
		   MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, scount, stype);
		 tgf_open(rbuf, (MPI_Aint)rcount * tgf_size(comm), rtype));
	TGF_SHORTCUT(TG_IALLGATHER,
		     PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype,
				     comm, request));
	struct tgf_mov a = {0};
	int why = tgf_check_exchange(comm, sbuf, scount, stype, rbuf, rcount,
				     rtype, false, &a);

	TGF_NB_ST(TG_IALLGATHER, tgf_policy(why, TG_IALLGATHER, a.bytes, a.fc),
		  a.fc->tc, a.bytes, tgf_mov_stage(&a), a.st,
		  tg_allgather(a.fc->tc, a.sbuf, a.rbuf, a.bytes, r),
		  PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype,
				  comm, request));
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		  int rcount, MPI_Datatype rtype, MPI_Comm comm,
		  MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, (MPI_Aint)scount * tgf_size(comm), stype);
		 tgf_open(rbuf, (MPI_Aint)rcount * tgf_size(comm), rtype));
	TGF_SHORTCUT(TG_IALLTOALL,
		     PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype,
				    comm, request));
	struct tgf_mov a = {0};
	int why = tgf_check_exchange(comm, sbuf, scount, stype, rbuf, rcount,
				     rtype, true, &a);

	TGF_NB_ST(TG_IALLTOALL, tgf_policy(why, TG_IALLTOALL, a.bytes, a.fc),
		  a.fc->tc, a.bytes, tgf_mov_stage(&a), a.st,
		  tg_alltoall(a.fc->tc, a.sbuf, a.rbuf, a.bytes, r),
		  PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm,
				 request));
}

int MPI_Ialltoallv(const void *sbuf, const int scounts[], const int sdispls[],
		   MPI_Datatype stype, void *rbuf, const int rcounts[],
		   const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
		   MPI_Request *request)
{
	TGF_OPEN(tgf_open_v(sbuf, scounts, sdispls, stype, tgf_size(comm));
		 tgf_open_v(rbuf, rcounts, rdispls, rtype, tgf_size(comm)));
	TGF_SHORTCUT(TG_IALLTOALLV,
		     PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf,
				     rcounts, rdispls, rtype, comm, request));
	TGF_V(TG_IALLTOALLV, request,
	      tgf_check_alltoallv(comm, sbuf, scounts, sdispls, stype, rbuf,
				  rcounts, rdispls, rtype, &a),
	      PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts,
			      rdispls, rtype, comm, request));
}

/*
 * Alltoallw: alltoallv's schedule, block j of count[j] elements of its
 * own type[j] at displs[j] bytes.  Where every block is one run of bytes
 * at or after buf the counts and displacements are its bytes; where one
 * is not (or buf is MPI_BOTTOM), the side is staged whole, block after
 * block, each packed with its own type (tgf_stage.c), so that no side
 * is bounded by one PMPI_Pack's int.  A block of no elements moves
 * nothing and its type is not looked at.
 */
/* One side of an alltoallw: per member a count of its type at a byte
 * displacement, an int (alltoallw) or an MPI_Aint (the neighbourhood
 * form, da set). */
struct tgf_w_side {
	const void *buf;
	const int *counts;
	const int *di;
	const MPI_Aint *da;
	const MPI_Datatype *types;
};

static MPI_Aint tgf_w_at(const struct tgf_w_side *w, int i)
{
	return w->da ? w->da[i] : (MPI_Aint)w->di[i];
}

/* *at: the byte displacements a staged side reads, freed by the caller
 * once the decision staged what it would. */
static int tgf_w_vec(struct tgf_v *a, int k, const struct tgf_w_side *w,
		     unsigned how, MPI_Aint **at)
{
	int n = tg_comm_size(a->fc->tc);
	size_t *c = k ? a->rc : a->sc, *d = k ? a->rd : a->sd, all = 0;
	bool staged = false;

	if (!w->counts || (!w->di && !w->da) || !w->types)
		return TG_WHY_ARGS;
	for (int i = 0; i < n; i++) {
		int l = TGF_RUN;

		c[i] = d[i] = 0;
		if (w->counts[i] < 0)
			return TG_WHY_ARGS;
		if (!w->counts[i])
			continue;
		l = tgf_layout(w->types[i], w->counts[i], &c[i]);
		if (l == TGF_BAD)
			return TG_WHY_ARGS;
		/* a block before the buffer is reached through the stage */
		staged |= l == TGF_STAGED || tgf_w_at(w, i) < 0;
		d[i] = (size_t)tgf_w_at(w, i);
		all += c[i];
	}
	/* MPI_BOTTOM, absolute addresses in the types: the stage reaches
	 * them, as every member decides alike whatever its buffers */
	staged |= !w->buf && all;
	if (!staged)
		return tgf_v_put(a, k, (struct tgf_side){.buf = w->buf}, false,
				 all);
	if (!w->da) {
		*at = malloc((size_t)n * sizeof(**at));
		if (!*at)
			return TGF_NOMEM;
		for (int i = 0; i < n; i++)
			(*at)[i] = tgf_w_at(w, i);
	}
	all = 0;
	for (int i = 0; i < n; i++) {
		d[i] = all;
		all += c[i];
	}
	return tgf_v_put(a, k,
			 (struct tgf_side){.buf = w->buf,
					   .counts = w->counts,
					   .n = n,
					   .types = w->types,
					   .at = w->da ? w->da : *at,
					   .how = how},
			 true, all);
}

/* w[0] the send side, w[1] the receive side; at: as tgf_w_vec's. */
static int tgf_check_alltoallw(MPI_Comm comm, const struct tgf_w_side w[2],
			       struct tgf_v *a, MPI_Aint *at[2])
{
	int why = tgf_v_begin(comm, a);
	bool in_place = w[0].buf == MPI_IN_PLACE;

	if (why != TGF_OK)
		return why;
	why = tgf_w_vec(a, 1, &w[1],
			in_place ? TGF_STAGE_IN | TGF_STAGE_OUT : TGF_STAGE_OUT,
			&at[1]);
	if (why == TGF_OK && !in_place)
		why = tgf_w_vec(a, 0, &w[0], TGF_STAGE_IN, &at[0]);
	return tgf_v_end(a, why, w[0].buf, w[1].buf);
}

/* An alltoallw, blocking (request NULL) or not: TGF_V's dance, the
 * displacements freed between the decision and the post.  why: a reason
 * found before (the neighbourhood form's), or TGF_OK. */
static bool tgf_alltoallw_go(MPI_Comm comm, enum tg_fn fn, int why,
			     const struct tgf_w_side w[2], MPI_Request *request,
			     int *rc)
{
	MPI_Aint *at[2] = {NULL, NULL};
	struct tgf_v a = {0};

	if (why == TGF_OK)
		why = tgf_check_alltoallw(comm, w, &a, at);
	else if (why == TGF_NOMEM && tgf_comm_check(comm, &a.fc) != TGF_OK)
		why = TG_WHY_COMM; /* the policy weighs a member's NOMEM */
	why = tgf_v_decide(fn, why, &a, request != NULL);
	free(at[0]);
	free(at[1]);
	return tgf_v_go(comm, fn, why, &a, request, rc);
}

#define TGF_W_SIDES(SBUF, SC, SD, ST, RBUF, RC, RD, RT)                        \
	((const struct tgf_w_side[2]){                                         \
		{.buf = (SBUF), .counts = (SC), .di = (SD), .types = (ST)},    \
		{.buf = (RBUF), .counts = (RC), .di = (RD), .types = (RT)}})

int MPI_Alltoallw(const void *sbuf, const int scounts[], const int sdispls[],
		  const MPI_Datatype stypes[], void *rbuf, const int rcounts[],
		  const int rdispls[], const MPI_Datatype rtypes[],
		  MPI_Comm comm)
{
	int rc;

	TGF_OPEN(tgf_open_w(sbuf, scounts, sdispls, stypes, tgf_size(comm));
		 tgf_open_w(rbuf, rcounts, rdispls, rtypes, tgf_size(comm)));
	TGF_SHORTCUT(TG_ALLTOALLW,
		     PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf,
				    rcounts, rdispls, rtypes, comm));
	if (tgf_alltoallw_go(comm, TG_ALLTOALLW, TGF_OK,
			     TGF_W_SIDES(sbuf, scounts, sdispls, stypes, rbuf,
					 rcounts, rdispls, rtypes),
			     NULL, &rc))
		return rc;
	return PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts,
			      rdispls, rtypes, comm);
}

bool tgf_ialltoallw_try(const void *sbuf, const int scounts[],
			const int sdispls[], const MPI_Datatype stypes[],
			void *rbuf, const int rcounts[], const int rdispls[],
			const MPI_Datatype rtypes[], MPI_Comm comm,
			MPI_Request *request, int *rc)
{
	int may;

	TGF_OPEN(tgf_open_w(sbuf, scounts, sdispls, stypes, tgf_size(comm));
		 tgf_open_w(rbuf, rcounts, rdispls, rtypes, tgf_size(comm)));
	may = tg_policy_may(TG_IALLTOALLW);
	if (may >= 0) {
		tg_count(TG_IALLTOALLW, false, (enum tg_why)may);
		return false;
	}
	return tgf_alltoallw_go(comm, TG_IALLTOALLW, TGF_OK,
				TGF_W_SIDES(sbuf, scounts, sdispls, stypes,
					    rbuf, rcounts, rdispls, rtypes),
				request, rc);
}

int MPI_Ialltoallw(const void *sbuf, const int scounts[], const int sdispls[],
		   const MPI_Datatype stypes[], void *rbuf, const int rcounts[],
		   const int rdispls[], const MPI_Datatype rtypes[],
		   MPI_Comm comm, MPI_Request *request)
{
	int rc;

	if (tgf_ialltoallw_try(sbuf, scounts, sdispls, stypes, rbuf, rcounts,
			       rdispls, rtypes, comm, request, &rc))
		return rc;
	return PMPI_Ialltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts,
			       rdispls, rtypes, comm, request);
}

/* Allgatherv, gatherv and scatterv: alltoallv's schedule with one block
 * each way (tg_alltoallv skips zero counts); counts differ per member,
 * so only the group size decides. */

/* Allgatherv's share of one member, as every member computes it, before
 * anything is allocated: a call below the cutoff goes to the MPI at the
 * cost of a sum (the full check, an allocation and three datatype
 * queries, made MPICH's 8-byte allgatherv 1.2 times its own).  SIZE_MAX
 * where the arguments are for the check to judge. */
static size_t tgf_v_share(const int *counts, MPI_Datatype dt, MPI_Comm comm)
{
	int n = tgf_size(comm), size;
	size_t all = 0;

	if (!counts || n <= 0 || dt == MPI_DATATYPE_NULL ||
	    PMPI_Type_size(dt, &size) != MPI_SUCCESS || size < 0)
		return SIZE_MAX;
	for (int i = 0; i < n; i++) {
		if (counts[i] < 0)
			return SIZE_MAX;
		all += (size_t)counts[i];
	}
	return all * (size_t)size / (size_t)n;
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		   const int rcounts[], const int displs[], MPI_Datatype rtype,
		   MPI_Comm comm)
{
	TGF_OPEN(tgf_open(sbuf, scount, stype);
		 tgf_open_v(rbuf, rcounts, displs, rtype, tgf_size(comm)));
	TGF_SHORTCUT(TG_ALLGATHERV,
		     PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs,
				     rtype, comm));
	size_t share = tgf_v_share(rcounts, rtype, comm);

	if (tg_policy_below(TG_ALLGATHERV, share)) {
		tg_count(TG_ALLGATHERV, false, TG_WHY_POLICY);
		return PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts,
				       displs, rtype, comm);
	}
	TGF_V(TG_ALLGATHERV, NULL,
	      tgf_check_allgatherv(comm, sbuf, scount, stype, rbuf, rcounts,
				   displs, rtype, share, &a),
	      PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype,
			      comm));
}

int MPI_Iallgatherv(const void *sbuf, int scount, MPI_Datatype stype,
		    void *rbuf, const int rcounts[], const int displs[],
		    MPI_Datatype rtype, MPI_Comm comm, MPI_Request *request)
{
	TGF_OPEN(tgf_open(sbuf, scount, stype);
		 tgf_open_v(rbuf, rcounts, displs, rtype, tgf_size(comm)));
	TGF_SHORTCUT(TG_IALLGATHERV,
		     PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts,
				      displs, rtype, comm, request));
	TGF_V(TG_IALLGATHERV, request,
	      tgf_check_allgatherv(comm, sbuf, scount, stype, rbuf, rcounts,
				   displs, rtype, 0, &a),
	      PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs,
			       rtype, comm, request));
}

/* The root's n blocks are opened at the root only: elsewhere the
 * arrays need not exist. */
#define TGF_OPEN_ROOTED(BUF, COUNT, DT, VBUF, COUNTS, DISPLS, VDT)             \
	TGF_OPEN(tgf_open(BUF, COUNT, DT);                                     \
		 if (tgf_rank(comm) == root) tgf_open_v(VBUF, COUNTS, DISPLS,  \
							VDT, tgf_size(comm)))

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		const int rcounts[], const int displs[], MPI_Datatype rtype,
		int root, MPI_Comm comm)
{
	TGF_OPEN_ROOTED(sbuf, scount, stype, rbuf, rcounts, displs, rtype);
	TGF_SHORTCUT(TG_GATHERV,
		     PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs,
				  rtype, root, comm));
	TGF_V(TG_GATHERV, NULL,
	      tgf_check_rooted_v(comm, sbuf, scount, NULL, NULL, stype, rbuf, 0,
				 rcounts, displs, rtype, root, true, &a),
	      PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype,
			   root, comm));
}

int MPI_Igatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
		 const int rcounts[], const int displs[], MPI_Datatype rtype,
		 int root, MPI_Comm comm, MPI_Request *request)
{
	TGF_OPEN_ROOTED(sbuf, scount, stype, rbuf, rcounts, displs, rtype);
	TGF_SHORTCUT(TG_IGATHERV,
		     PMPI_Igatherv(sbuf, scount, stype, rbuf, rcounts, displs,
				   rtype, root, comm, request));
	TGF_V(TG_IGATHERV, request,
	      tgf_check_rooted_v(comm, sbuf, scount, NULL, NULL, stype, rbuf, 0,
				 rcounts, displs, rtype, root, true, &a),
	      PMPI_Igatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype,
			    root, comm, request));
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[],
		 MPI_Datatype stype, void *rbuf, int rcount, MPI_Datatype rtype,
		 int root, MPI_Comm comm)
{
	TGF_OPEN_ROOTED(rbuf, rcount, rtype, sbuf, scounts, displs, stype);
	TGF_SHORTCUT(TG_SCATTERV,
		     PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount,
				   rtype, root, comm));
	TGF_V(TG_SCATTERV, NULL,
	      tgf_check_rooted_v(comm, sbuf, 0, scounts, displs, stype, rbuf,
				 rcount, NULL, NULL, rtype, root, false, &a),
	      PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype,
			    root, comm));
}

int MPI_Iscatterv(const void *sbuf, const int scounts[], const int displs[],
		  MPI_Datatype stype, void *rbuf, int rcount,
		  MPI_Datatype rtype, int root, MPI_Comm comm,
		  MPI_Request *request)
{
	TGF_OPEN_ROOTED(rbuf, rcount, rtype, sbuf, scounts, displs, stype);
	TGF_SHORTCUT(TG_ISCATTERV,
		     PMPI_Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount,
				    rtype, root, comm, request));
	TGF_V(TG_ISCATTERV, request,
	      tgf_check_rooted_v(comm, sbuf, 0, scounts, displs, stype, rbuf,
				 rcount, NULL, NULL, rtype, root, false, &a),
	      PMPI_Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype,
			     root, comm, request));
}

/* ------------------------------------------------------------------ */
/* Neighbourhood collectives                                           */

/*
 * A neighbourhood call is alltoallv's schedule with member m's block the
 * block of the neighbour m is: receive block j from the j-th source,
 * send block j to the j-th destination.
 * - Cartesian: both lists are the same, two per dimension, the -1
 *   neighbour then the +1 (MPI_Cart_shift's source and destination);
 *   MPI_PROC_NULL where a non-periodic dimension ends.  A neighbour
 *   twice in the list (a periodic dimension of 1 or 2 members) is one
 *   member to alltoallv, which moves one block per member each way:
 *   every member has such a dimension alike (the same dims and
 *   periods), so all fall back.
 * - Graph and distributed graph: the lists MPI_Graph_neighbors and
 *   MPI_Dist_graph_neighbors give.  A multigraph's member may list a
 *   neighbour twice, and the others cannot know it: the members agreed
 *   when the communicator was made whether any does (tgf_graph_made),
 *   and where one does, all fall back.
 * *nb holds kin sources, then kout destinations.
 */
static int tgf_nbr_list(MPI_Comm comm, int **nb, int *kin, int *kout)
{
	int topo = MPI_UNDEFINED, nd = 0, n = 0, me = 0, w = 0, *l, *mark;
	struct tgf_comm *fc;

	*nb = NULL;
	if (comm == MPI_COMM_NULL ||
	    PMPI_Topo_test(comm, &topo) != MPI_SUCCESS ||
	    PMPI_Comm_size(comm, &n) != MPI_SUCCESS || n <= 0)
		return TG_WHY_COMM;
	if (topo == MPI_GRAPH || topo == MPI_DIST_GRAPH) {
		fc = tgf_comm(comm);
		if (!fc || !fc->graph_ok)
			return TG_WHY_COMM;
		if (topo == MPI_GRAPH) {
			if (PMPI_Comm_rank(comm, &me) != MPI_SUCCESS ||
			    PMPI_Graph_neighbors_count(comm, me, kin) !=
				    MPI_SUCCESS)
				return TG_WHY_COMM;
			*kout = *kin;
		} else if (PMPI_Dist_graph_neighbors_count(comm, kin, kout,
							   &w) != MPI_SUCCESS) {
			return TG_WHY_COMM;
		}
		l = malloc(((size_t)*kin + (size_t)*kout + 1) * sizeof(int));
		if (!l)
			return TGF_NOMEM;
		*nb = l;
		if (topo == MPI_GRAPH) {
			if (PMPI_Graph_neighbors(comm, me, *kin, l) !=
			    MPI_SUCCESS)
				return TG_WHY_COMM;
			memcpy(l + *kin, l, (size_t)*kin * sizeof(int));
		} else {
			/* the weights are not used, but an array always
			 * takes them, weighted or not */
			int *wt = malloc(((size_t)*kin + (size_t)*kout + 1) *
					 sizeof(int));
			int rc;

			if (!wt)
				return TGF_NOMEM;
			rc = PMPI_Dist_graph_neighbors(comm, *kin, l, wt, *kout,
						       l + *kin, wt + *kin);
			free(wt);
			if (rc != MPI_SUCCESS)
				return TG_WHY_COMM;
		}
		for (int j = 0; j < *kin + *kout; j++)
			if (l[j] < 0 || l[j] >= n)
				return TG_WHY_COMM;
		return TGF_OK;
	}
	if (topo != MPI_CART || PMPI_Cartdim_get(comm, &nd) != MPI_SUCCESS ||
	    nd < 0)
		return TG_WHY_COMM;
	l = calloc(4 * (size_t)nd + (size_t)n + 1, sizeof(int));
	if (!l)
		return TGF_NOMEM;
	*nb = l;
	*kin = *kout = 2 * nd;
	mark = l + 4 * nd;
	for (int d = 0; d < nd; d++) {
		int *p = l + 2 * d;

		if (PMPI_Cart_shift(comm, d, 1, &p[0], &p[1]) != MPI_SUCCESS)
			return TG_WHY_COMM;
		for (int j = 0; j < 2; j++) {
			if (p[j] == MPI_PROC_NULL)
				continue;
			if (p[j] < 0 || p[j] >= n || mark[p[j]]++)
				return TG_WHY_COMM;
		}
	}
	memcpy(l + 2 * nd, l, 2 * (size_t)nd * sizeof(int));
	return TGF_OK;
}

/* T-NBC's guard needs it on every topology, the ones that fall back
 * too; the persistent w form sizes its type arrays with it. */
void tgf_nbr_degree(MPI_Comm comm, int *in, int *out)
{
	int topo = MPI_UNDEFINED, w = 0;

	*in = *out = 0;
	if (comm == MPI_COMM_NULL || PMPI_Topo_test(comm, &topo) != MPI_SUCCESS)
		return;
	if (topo == MPI_CART && PMPI_Cartdim_get(comm, in) == MPI_SUCCESS) {
		*in *= 2;
		*out = *in;
	} else if (topo == MPI_GRAPH) {
		int me;

		if (PMPI_Comm_rank(comm, &me) == MPI_SUCCESS &&
		    PMPI_Graph_neighbors_count(comm, me, in) == MPI_SUCCESS)
			*out = *in;
	} else if (topo == MPI_DIST_GRAPH) {
		PMPI_Dist_graph_neighbors_count(comm, in, out, &w);
	}
}

/* A neighbourhood call as alltoallv's counts and displacements per
 * member, in elements (4 n ints: sc, sd, rc, rd): each side is the same
 * block for every neighbour (counts NULL; sblock: displacements 0, the
 * one send block of an allgather) or one per neighbour. */
struct tgf_nbr_side {
	int count; /* counts NULL */
	const int *counts, *displs;
	bool same; /* one block, sent to every neighbour */
};

static int tgf_nbr_counts(MPI_Comm comm, struct tgf_nbr_side s,
			  struct tgf_nbr_side r, int **out)
{
	int *nb, kin = 0, kout = 0, n = tgf_size(comm), *v;
	int why = tgf_nbr_list(comm, &nb, &kin, &kout);

	*out = NULL;
	if (why != TGF_OK) {
		free(nb);
		return why;
	}
	/* Displacements are ints, as alltoallv's: k blocks of count must
	 * fit (a block of 2^31 / 6 elements does not, and goes to the MPI).
	 * Judged against a number of blocks every member shares, so that
	 * all decide alike: a graph's members have different degrees, but
	 * none above the group's size once each neighbour is listed once;
	 * a Cartesian one's are all 2 per dimension.  An allgather's one
	 * send block sits at 0. */
	int kb = n > kin ? n : kin;

	kb = kb > kout ? kb : kout;
	if ((!s.counts &&
	     (s.count < 0 || (!s.same && s.count > INT_MAX / kb))) ||
	    (!r.counts && (r.count < 0 || r.count > INT_MAX / kb)) ||
	    (s.counts && !s.displs) || (r.counts && !r.displs)) {
		free(nb);
		return TG_WHY_ARGS;
	}
	v = calloc(4 * (size_t)n, sizeof(int));
	if (!v) {
		free(nb);
		return TGF_NOMEM;
	}
	for (int j = 0; j < kout; j++) {
		int m = nb[kin + j];

		if (m == MPI_PROC_NULL)
			continue;
		v[m] = s.counts ? s.counts[j] : s.count;
		v[n + m] = s.counts ? s.displs[j] : s.same ? 0 : j * s.count;
	}
	for (int j = 0; j < kin; j++) {
		int m = nb[j];

		if (m == MPI_PROC_NULL)
			continue;
		v[2 * n + m] = r.counts ? r.counts[j] : r.count;
		v[3 * n + m] = r.counts ? r.displs[j] : j * r.count;
	}
	free(nb);
	*out = v;
	return TGF_OK;
}

/* The body of every neighbourhood wrapper: true when *rc is the call's
 * result, false when the caller falls back (counted). */
static bool tgf_nbr_go(enum tg_fn fn, const void *sbuf, MPI_Datatype stype,
		       struct tgf_nbr_side s, void *rbuf, MPI_Datatype rtype,
		       struct tgf_nbr_side r, MPI_Comm comm,
		       MPI_Request *request, int *rc)
{
	struct tgf_v a = {0};
	int *v = NULL, n = tgf_size(comm);
	/* the communicator first: the decision on a member that could not
	 * allocate the counts (TGF_NOMEM) asks its policy */
	int why = tgf_comm_check(comm, &a.fc);

	if (why == TGF_OK)
		why = tgf_nbr_counts(comm, s, r, &v);
	if (why == TGF_OK && (sbuf == MPI_IN_PLACE || rbuf == MPI_IN_PLACE))
		why = TG_WHY_ARGS;
	if (why == TGF_OK)
		why = tgf_check_alltoallv(comm, sbuf, v, v + n, stype, rbuf,
					  v + 2 * n, v + 3 * n, rtype, &a);
	/* staging copies the counts it needs */
	why = tgf_v_decide(fn, why, &a, request != NULL);
	free(v);
	return tgf_v_go(comm, fn, why, &a, request, rc);
}

#define TGF_NBR_OPEN(SBUF, SN, STYPE, RBUF, RN, RTYPE)                         \
	do {                                                                   \
		if (tg_tnbc_guarding()) {                                      \
			int in_, out_;                                         \
			tgf_nbr_degree(comm, &in_, &out_);                     \
			tgf_open(SBUF, SN, STYPE);                             \
			tgf_open(RBUF, RN, RTYPE);                             \
		}                                                              \
	} while (0)

/* The end of a v neighbourhood call's guard: the span its blocks cover */
static MPI_Aint tgf_nbr_span(const int *counts, const int *displs, int k)
{
	MPI_Aint end = 0;

	for (int j = 0; counts && displs && j < k; j++)
		if (counts[j] > 0 && (MPI_Aint)displs[j] + counts[j] > end)
			end = (MPI_Aint)displs[j] + counts[j];
	return end;
}

int MPI_Neighbor_allgather(const void *sbuf, int scount, MPI_Datatype stype,
			   void *rbuf, int rcount, MPI_Datatype rtype,
			   MPI_Comm comm)
{
	int rc;

	TGF_NBR_OPEN(sbuf, scount, stype, rbuf, (MPI_Aint)rcount * in_, rtype);
	TGF_SHORTCUT(TG_NEIGHBOR_ALLGATHER,
		     PMPI_Neighbor_allgather(sbuf, scount, stype, rbuf, rcount,
					     rtype, comm));
	if (tgf_nbr_go(TG_NEIGHBOR_ALLGATHER, sbuf, stype,
		       (struct tgf_nbr_side){.count = scount, .same = true},
		       rbuf, rtype, (struct tgf_nbr_side){.count = rcount},
		       comm, NULL, &rc))
		return rc;
	return PMPI_Neighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype,
				       comm);
}

int MPI_Neighbor_alltoall(const void *sbuf, int scount, MPI_Datatype stype,
			  void *rbuf, int rcount, MPI_Datatype rtype,
			  MPI_Comm comm)
{
	int rc;

	TGF_NBR_OPEN(sbuf, (MPI_Aint)scount * out_, stype, rbuf,
		     (MPI_Aint)rcount * in_, rtype);
	TGF_SHORTCUT(TG_NEIGHBOR_ALLTOALL,
		     PMPI_Neighbor_alltoall(sbuf, scount, stype, rbuf, rcount,
					    rtype, comm));
	if (tgf_nbr_go(TG_NEIGHBOR_ALLTOALL, sbuf, stype,
		       (struct tgf_nbr_side){.count = scount}, rbuf, rtype,
		       (struct tgf_nbr_side){.count = rcount}, comm, NULL, &rc))
		return rc;
	return PMPI_Neighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype,
				      comm);
}

int MPI_Neighbor_allgatherv(const void *sbuf, int scount, MPI_Datatype stype,
			    void *rbuf, const int rcounts[], const int displs[],
			    MPI_Datatype rtype, MPI_Comm comm)
{
	int rc;

	TGF_NBR_OPEN(sbuf, scount, stype, rbuf,
		     tgf_nbr_span(rcounts, displs, in_), rtype);
	TGF_SHORTCUT(TG_NEIGHBOR_ALLGATHERV,
		     PMPI_Neighbor_allgatherv(sbuf, scount, stype, rbuf,
					      rcounts, displs, rtype, comm));
	if (tgf_nbr_go(
		    TG_NEIGHBOR_ALLGATHERV, sbuf, stype,
		    (struct tgf_nbr_side){.count = scount, .same = true}, rbuf,
		    rtype,
		    (struct tgf_nbr_side){.counts = rcounts, .displs = displs},
		    comm, NULL, &rc))
		return rc;
	return PMPI_Neighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts,
					displs, rtype, comm);
}

int MPI_Neighbor_alltoallv(const void *sbuf, const int scounts[],
			   const int sdispls[], MPI_Datatype stype, void *rbuf,
			   const int rcounts[], const int rdispls[],
			   MPI_Datatype rtype, MPI_Comm comm)
{
	int rc;

	TGF_NBR_OPEN(sbuf, tgf_nbr_span(scounts, sdispls, out_), stype, rbuf,
		     tgf_nbr_span(rcounts, rdispls, in_), rtype);
	TGF_SHORTCUT(TG_NEIGHBOR_ALLTOALLV,
		     PMPI_Neighbor_alltoallv(sbuf, scounts, sdispls, stype,
					     rbuf, rcounts, rdispls, rtype,
					     comm));
	if (tgf_nbr_go(
		    TG_NEIGHBOR_ALLTOALLV, sbuf, stype,
		    (struct tgf_nbr_side){.counts = scounts, .displs = sdispls},
		    rbuf, rtype,
		    (struct tgf_nbr_side){.counts = rcounts, .displs = rdispls},
		    comm, NULL, &rc))
		return rc;
	return PMPI_Neighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf,
				       rcounts, rdispls, rtype, comm);
}

int MPI_Ineighbor_allgather(const void *sbuf, int scount, MPI_Datatype stype,
			    void *rbuf, int rcount, MPI_Datatype rtype,
			    MPI_Comm comm, MPI_Request *request)
{
	int rc;

	TGF_NBR_OPEN(sbuf, scount, stype, rbuf, (MPI_Aint)rcount * in_, rtype);
	TGF_SHORTCUT(TG_INEIGHBOR_ALLGATHER,
		     PMPI_Ineighbor_allgather(sbuf, scount, stype, rbuf, rcount,
					      rtype, comm, request));
	if (tgf_nbr_go(TG_INEIGHBOR_ALLGATHER, sbuf, stype,
		       (struct tgf_nbr_side){.count = scount, .same = true},
		       rbuf, rtype, (struct tgf_nbr_side){.count = rcount},
		       comm, request, &rc))
		return rc;
	return PMPI_Ineighbor_allgather(sbuf, scount, stype, rbuf, rcount,
					rtype, comm, request);
}

int MPI_Ineighbor_alltoall(const void *sbuf, int scount, MPI_Datatype stype,
			   void *rbuf, int rcount, MPI_Datatype rtype,
			   MPI_Comm comm, MPI_Request *request)
{
	int rc;

	TGF_NBR_OPEN(sbuf, (MPI_Aint)scount * out_, stype, rbuf,
		     (MPI_Aint)rcount * in_, rtype);
	TGF_SHORTCUT(TG_INEIGHBOR_ALLTOALL,
		     PMPI_Ineighbor_alltoall(sbuf, scount, stype, rbuf, rcount,
					     rtype, comm, request));
	if (tgf_nbr_go(TG_INEIGHBOR_ALLTOALL, sbuf, stype,
		       (struct tgf_nbr_side){.count = scount}, rbuf, rtype,
		       (struct tgf_nbr_side){.count = rcount}, comm, request,
		       &rc))
		return rc;
	return PMPI_Ineighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype,
				       comm, request);
}

int MPI_Ineighbor_allgatherv(const void *sbuf, int scount, MPI_Datatype stype,
			     void *rbuf, const int rcounts[],
			     const int displs[], MPI_Datatype rtype,
			     MPI_Comm comm, MPI_Request *request)
{
	int rc;

	TGF_NBR_OPEN(sbuf, scount, stype, rbuf,
		     tgf_nbr_span(rcounts, displs, in_), rtype);
	TGF_SHORTCUT(TG_INEIGHBOR_ALLGATHERV,
		     PMPI_Ineighbor_allgatherv(sbuf, scount, stype, rbuf,
					       rcounts, displs, rtype, comm,
					       request));
	if (tgf_nbr_go(
		    TG_INEIGHBOR_ALLGATHERV, sbuf, stype,
		    (struct tgf_nbr_side){.count = scount, .same = true}, rbuf,
		    rtype,
		    (struct tgf_nbr_side){.counts = rcounts, .displs = displs},
		    comm, request, &rc))
		return rc;
	return PMPI_Ineighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts,
					 displs, rtype, comm, request);
}

int MPI_Ineighbor_alltoallv(const void *sbuf, const int scounts[],
			    const int sdispls[], MPI_Datatype stype, void *rbuf,
			    const int rcounts[], const int rdispls[],
			    MPI_Datatype rtype, MPI_Comm comm,
			    MPI_Request *request)
{
	int rc;

	TGF_NBR_OPEN(sbuf, tgf_nbr_span(scounts, sdispls, out_), stype, rbuf,
		     tgf_nbr_span(rcounts, rdispls, in_), rtype);
	TGF_SHORTCUT(TG_INEIGHBOR_ALLTOALLV,
		     PMPI_Ineighbor_alltoallv(sbuf, scounts, sdispls, stype,
					      rbuf, rcounts, rdispls, rtype,
					      comm, request));
	if (tgf_nbr_go(
		    TG_INEIGHBOR_ALLTOALLV, sbuf, stype,
		    (struct tgf_nbr_side){.counts = scounts, .displs = sdispls},
		    rbuf, rtype,
		    (struct tgf_nbr_side){.counts = rcounts, .displs = rdispls},
		    comm, request, &rc))
		return rc;
	return PMPI_Ineighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf,
					rcounts, rdispls, rtype, comm, request);
}

/*
 * Neighbor_alltoallw: block j of the j-th neighbour, its own count of its
 * own type at an MPI_Aint byte displacement, laid onto the members as
 * alltoallw's sides (a neighbour listed twice falls back with the
 * others, as every neighbourhood call does).
 */
static bool tgf_nbr_w_go(enum tg_fn fn, const void *sbuf, const int *scounts,
			 const MPI_Aint *sdispls, const MPI_Datatype *stypes,
			 void *rbuf, const int *rcounts,
			 const MPI_Aint *rdispls, const MPI_Datatype *rtypes,
			 MPI_Comm comm, MPI_Request *request, int *rc)
{
	struct tgf_comm *fc;
	int *nb = NULL, kin = 0, kout = 0, n = tgf_size(comm), *cnt = NULL;
	MPI_Aint *at = NULL;
	MPI_Datatype *ty = NULL;
	int why = tgf_comm_check(comm, &fc);
	bool done;

	if (why == TGF_OK)
		why = tgf_nbr_list(comm, &nb, &kin, &kout);
	if (why == TGF_OK && (sbuf == MPI_IN_PLACE || rbuf == MPI_IN_PLACE ||
			      (kout && (!scounts || !sdispls || !stypes)) ||
			      (kin && (!rcounts || !rdispls || !rtypes))))
		why = TG_WHY_ARGS;
	if (why == TGF_OK) {
		cnt = calloc(2 * (size_t)n, sizeof(*cnt));
		at = calloc(2 * (size_t)n, sizeof(*at));
		ty = malloc(2 * (size_t)n * sizeof(*ty));
		if (!cnt || !at || !ty)
			why = TGF_NOMEM;
	}
	if (why == TGF_OK) {
		for (int m = 0; m < 2 * n; m++)
			ty[m] = MPI_BYTE;
		for (int j = 0; j < kout; j++) {
			int m = nb[kin + j];

			if (m == MPI_PROC_NULL)
				continue;
			cnt[m] = scounts[j];
			at[m] = sdispls[j];
			ty[m] = stypes[j];
		}
		for (int j = 0; j < kin; j++) {
			int m = nb[j];

			if (m == MPI_PROC_NULL)
				continue;
			cnt[n + m] = rcounts[j];
			at[n + m] = rdispls[j];
			ty[n + m] = rtypes[j];
		}
	}
	done = tgf_alltoallw_go(
		comm, fn, why,
		(const struct tgf_w_side[2]){
			{.buf = sbuf, .counts = cnt, .da = at, .types = ty},
			{.buf = rbuf,
			 .counts = cnt ? cnt + n : NULL,
			 .da = at ? at + n : NULL,
			 .types = ty ? ty + n : NULL}},
		request, rc);
	free(nb);
	free(cnt);
	free(at);
	free(ty);
	return done;
}

/* What T-NBC guards in a Neighbor_alltoallw's blocks opens first. */
static void tgf_nbr_w_open(MPI_Comm comm, const void *sbuf, const int *scounts,
			   const MPI_Aint *sdispls, const MPI_Datatype *stypes,
			   const void *rbuf, const int *rcounts,
			   const MPI_Aint *rdispls, const MPI_Datatype *rtypes)
{
	int in = 0, out = 0;

	tgf_nbr_degree(comm, &in, &out);
	for (int j = 0; sbuf && scounts && sdispls && stypes && j < out; j++)
		if (scounts[j] > 0)
			tgf_open((const char *)sbuf + sdispls[j], scounts[j],
				 stypes[j]);
	for (int j = 0; rbuf && rcounts && rdispls && rtypes && j < in; j++)
		if (rcounts[j] > 0)
			tgf_open((const char *)rbuf + rdispls[j], rcounts[j],
				 rtypes[j]);
}

int MPI_Neighbor_alltoallw(const void *sbuf, const int scounts[],
			   const MPI_Aint sdispls[],
			   const MPI_Datatype stypes[], void *rbuf,
			   const int rcounts[], const MPI_Aint rdispls[],
			   const MPI_Datatype rtypes[], MPI_Comm comm)
{
	int rc;

	TGF_OPEN(tgf_nbr_w_open(comm, sbuf, scounts, sdispls, stypes, rbuf,
				rcounts, rdispls, rtypes));
	TGF_SHORTCUT(TG_NEIGHBOR_ALLTOALLW,
		     PMPI_Neighbor_alltoallw(sbuf, scounts, sdispls, stypes,
					     rbuf, rcounts, rdispls, rtypes,
					     comm));
	if (tgf_nbr_w_go(TG_NEIGHBOR_ALLTOALLW, sbuf, scounts, sdispls, stypes,
			 rbuf, rcounts, rdispls, rtypes, comm, NULL, &rc))
		return rc;
	return PMPI_Neighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf,
				       rcounts, rdispls, rtypes, comm);
}

bool tgf_ineighbor_alltoallw_try(const void *sbuf, const int scounts[],
				 const MPI_Aint sdispls[],
				 const MPI_Datatype stypes[], void *rbuf,
				 const int rcounts[], const MPI_Aint rdispls[],
				 const MPI_Datatype rtypes[], MPI_Comm comm,
				 MPI_Request *request, int *rc)
{
	int may;

	TGF_OPEN(tgf_nbr_w_open(comm, sbuf, scounts, sdispls, stypes, rbuf,
				rcounts, rdispls, rtypes));
	may = tg_policy_may(TG_INEIGHBOR_ALLTOALLW);
	if (may >= 0) {
		tg_count(TG_INEIGHBOR_ALLTOALLW, false, (enum tg_why)may);
		return false;
	}
	return tgf_nbr_w_go(TG_INEIGHBOR_ALLTOALLW, sbuf, scounts, sdispls,
			    stypes, rbuf, rcounts, rdispls, rtypes, comm,
			    request, rc);
}

int MPI_Ineighbor_alltoallw(const void *sbuf, const int scounts[],
			    const MPI_Aint sdispls[],
			    const MPI_Datatype stypes[], void *rbuf,
			    const int rcounts[], const MPI_Aint rdispls[],
			    const MPI_Datatype rtypes[], MPI_Comm comm,
			    MPI_Request *request)
{
	int rc;

	if (tgf_ineighbor_alltoallw_try(sbuf, scounts, sdispls, stypes, rbuf,
					rcounts, rdispls, rtypes, comm, request,
					&rc))
		return rc;
	return PMPI_Ineighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf,
					rcounts, rdispls, rtypes, comm,
					request);
}
