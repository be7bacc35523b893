/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Persistent collectives: MPI 4's MPI_*_init under MPICH, Open MPI 4.1's
 * MPIX_*_init (its pcollreq extension).
 *
 * A generalized request cannot be persistent: the completion call frees
 * it.  So the program's handle is the MPI's own persistent request, made
 * with the same arguments, and the glue keeps beside it what a start
 * needs.  MPI_Start posts the glue's non-blocking form of the call
 * (offloaded as any, or the MPI's own where that one falls back), whose
 * request stands in for the handle in every completion call until it
 * completes; the handle is then inactive, as the program expects.
 *
 * A start and a completion that both bypass the glue (Open MPI's Fortran
 * bindings, MPICH's mpi_f08 MPI_Start and MPI_Wait call PMPI_) meet the
 * MPI's own persistent request, which runs the MPI's algorithm: correct,
 * not offloaded.  A request started through one door must be completed
 * through the same one.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tgf_coll.h"

#if TGF_MPICH
#define TGF_INIT(x)  MPI_##x##_init
#define TGF_PINIT(x) PMPI_##x##_init
#define TGF_PERSIST  (MPI_VERSION >= 4) /* MPICH 3 named them MPIX_ */
#else
#include <mpi-ext.h>
#define TGF_INIT(x)  MPIX_##x##_init
#define TGF_PINIT(x) PMPIX_##x##_init
#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
#define TGF_PERSIST 1
#else
#define TGF_PERSIST 0
#endif
#endif

#if TGF_PERSIST

enum tgf_pk {
	TGF_P_ALLREDUCE,
	TGF_P_REDUCE,
	TGF_P_BCAST,
	TGF_P_BARRIER,
	TGF_P_ALLGATHER,
	TGF_P_ALLTOALL,
	TGF_P_ALLTOALLV,
	TGF_P_REDUCE_SCATTER_BLOCK,
	TGF_P_REDUCE_SCATTER,
	TGF_P_GATHER,
	TGF_P_SCATTER,
	TGF_P_ALLGATHERV,
	TGF_P_SCAN,
	TGF_P_EXSCAN,
	TGF_P_GATHERV,
	TGF_P_SCATTERV,
	TGF_P_NBR_ALLGATHER,
	TGF_P_NBR_ALLTOALL,
	TGF_P_NBR_ALLGATHERV,
	TGF_P_NBR_ALLTOALLV,
	TGF_P_ALLTOALLW,
	TGF_P_NBR_ALLTOALLW,
};

/* One persistent request: its arguments, bound at the init as MPI binds
 * them (the arrays are the program's, unchanged until it frees the
 * request; a derived datatype is duplicated, for the program may free
 * its own).  A type the call has not is MPI_DATATYPE_NULL, never 0:
 * under Open MPI a handle of 0 is no datatype at all. */
struct tgf_pq {
	MPI_Request h; /* the MPI's own persistent request: the handle */
	MPI_Request inner; /* the active start's; MPI_REQUEST_NULL: none */
	enum tgf_pk kind;
	const void *sbuf;
	void *rbuf;
	int scount, rcount, root;
	const int *scounts, *sdispls, *rcounts, *rdispls;
	MPI_Datatype stype, rtype;
	/* the w forms': a type per block, ns sent then nr received (kept
	 * as the single types are), and the neighbourhood's displacements */
	MPI_Datatype *wtypes;
	int ns, nr;
	const MPI_Aint *sdispls_a, *rdispls_a;
	MPI_Op op;
	MPI_Comm comm;
	struct tgf_pq *next;
};

#define TGF_PQ_BUCKETS 64
static struct tgf_pq *tgf_pqs[TGF_PQ_BUCKETS];
static _Atomic int tgf_npq; /* read without the lock by every completion */
static pthread_mutex_t tgf_pq_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned tgf_pq_bucket(MPI_Request h)
{
	uintptr_t k = 0;

	memcpy(&k, &h, sizeof(h) < sizeof(k) ? sizeof(h) : sizeof(k));
	return (unsigned)((k ^ (k >> 7) ^ (k >> 17)) % TGF_PQ_BUCKETS);
}

static bool tgf_pq_some(void)
{
	return atomic_load_explicit(&tgf_npq, memory_order_relaxed) > 0;
}

/* The record of handle h, or NULL.  A request is used by one thread at a
 * time (MPI's rule), so what the caller does with it needs no lock. */
static struct tgf_pq *tgf_pq_find(MPI_Request h)
{
	struct tgf_pq *q;

	if (h == MPI_REQUEST_NULL || !tgf_pq_some())
		return NULL;
	pthread_mutex_lock(&tgf_pq_lock);
	for (q = tgf_pqs[tgf_pq_bucket(h)]; q && q->h != h; q = q->next)
		;
	pthread_mutex_unlock(&tgf_pq_lock);
	return q;
}

static void tgf_pq_type_free(MPI_Datatype *t)
{
	int ni, na, nd, comb = MPI_COMBINER_NAMED;

	if (*t == MPI_DATATYPE_NULL)
		return;
	PMPI_Type_get_envelope(*t, &ni, &na, &nd, &comb);
	if (comb != MPI_COMBINER_NAMED)
		PMPI_Type_free(t);
}

/* A derived type duplicated, a predefined one kept (the offload knows
 * predefined types by their handles). */
static bool tgf_pq_type_keep(MPI_Datatype in, MPI_Datatype *out)
{
	int ni, na, nd, comb = MPI_COMBINER_NAMED;

	*out = in;
	if (in == MPI_DATATYPE_NULL ||
	    PMPI_Type_get_envelope(in, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
	    comb == MPI_COMBINER_NAMED)
		return true;
	if (PMPI_Type_dup(in, out) == MPI_SUCCESS)
		return true;
	/* never the program's own, which tgf_pq_free would free */
	*out = MPI_DATATYPE_NULL;
	return false;
}

/* Whether op is MPI_OP_NULL (no reduction) or a predefined one.  A
 * program may free its own op after the init, and a start would then
 * pass a dead handle: a user op's request stays the MPI's alone (every
 * member passes the same op, so every member decides alike). */
static bool tgf_pq_op_named(MPI_Op op)
{
	static const MPI_Op named[] = {
		MPI_OP_NULL, MPI_MAX,	 MPI_MIN,    MPI_SUM,	  MPI_PROD,
		MPI_LAND,    MPI_BAND,	 MPI_LOR,    MPI_BOR,	  MPI_LXOR,
		MPI_BXOR,    MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE,
	};

	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (op == named[i])
			return true;
	return false;
}

static void tgf_pq_free(struct tgf_pq *q)
{
	tgf_pq_type_free(&q->stype);
	tgf_pq_type_free(&q->rtype);
	if (q->wtypes)
		for (int i = 0; i < q->ns + q->nr; i++)
			tgf_pq_type_free(&q->wtypes[i]);
	free(q->wtypes);
	free(q);
}

/* The w forms' type arrays kept in q->wtypes: s (ns of them; NULL when
 * the send side is MPI_IN_PLACE) then r.  Each one failed stays
 * MPI_DATATYPE_NULL, which tgf_pq_free skips. */
static bool tgf_pq_wtypes_keep(struct tgf_pq *q, const MPI_Datatype *s,
			       const MPI_Datatype *r)
{
	int n = q->ns + q->nr;
	bool ok = true;

	q->wtypes = malloc((size_t)(n ? n : 1) * sizeof(*q->wtypes));
	if (!q->wtypes)
		return false;
	for (int i = 0; i < n; i++)
		q->wtypes[i] = MPI_DATATYPE_NULL;
	for (int i = 0; ok && s && i < q->ns; i++)
		ok = tgf_pq_type_keep(s[i], &q->wtypes[i]);
	for (int i = 0; ok && r && i < q->nr; i++)
		ok = tgf_pq_type_keep(r[i], &q->wtypes[q->ns + i]);
	return ok;
}

/*
 * After the MPI's init returned rc with *h: the record, filled by the
 * caller from *proto.  Every member registers alike or fails: a member
 * whose starts ran the MPI's persistent algorithm while the others ran
 * the glue's would wait for them for ever.
 */
static int tgf_pq_add_w(int rc, MPI_Request *h, const struct tgf_pq *proto,
			const MPI_Datatype *wst, const MPI_Datatype *wrt)
{
	struct tgf_pq *q, *stale = NULL;
	unsigned b;

	if (rc != MPI_SUCCESS || !tg_ready() || !tgf_nb_enabled() ||
	    !tgf_pq_op_named(proto->op))
		return rc;
	q = malloc(sizeof(*q));
	if (q) {
		*q = *proto;
		q->stype = q->rtype = MPI_DATATYPE_NULL;
		q->wtypes = NULL;
	}
	if (!q || !tgf_pq_type_keep(proto->stype, &q->stype) ||
	    !tgf_pq_type_keep(proto->rtype, &q->rtype) ||
	    ((wst || wrt) && !tgf_pq_wtypes_keep(q, wst, wrt))) {
		if (q)
			tgf_pq_free(q);
		PMPI_Request_free(h);
		*h = MPI_REQUEST_NULL;
		PMPI_Comm_call_errhandler(proto->comm, MPI_ERR_NO_MEM);
		return MPI_ERR_NO_MEM;
	}
	q->h = *h;
	q->inner = MPI_REQUEST_NULL;
	b = tgf_pq_bucket(q->h);
	pthread_mutex_lock(&tgf_pq_lock);
	/* one the program freed behind the glue's back (a binding that
	 * calls PMPI_Request_free), its handle now reused: unlinked here,
	 * freed (an MPI call) once the lock is dropped */
	for (struct tgf_pq **pp = &tgf_pqs[b]; *pp; pp = &(*pp)->next)
		if ((*pp)->h == q->h) {
			stale = *pp;
			*pp = stale->next;
			atomic_fetch_sub(&tgf_npq, 1);
			break;
		}
	q->next = tgf_pqs[b];
	tgf_pqs[b] = q;
	atomic_fetch_add(&tgf_npq, 1);
	pthread_mutex_unlock(&tgf_pq_lock);
	if (stale)
		tgf_pq_free(stale);
	return rc;
}

static int tgf_pq_add(int rc, MPI_Request *h, const struct tgf_pq *proto)
{
	return tgf_pq_add_w(rc, h, proto, NULL, NULL);
}

static void tgf_pq_remove(struct tgf_pq *q)
{
	pthread_mutex_lock(&tgf_pq_lock);
	for (struct tgf_pq **pp = &tgf_pqs[tgf_pq_bucket(q->h)]; *pp;
	     pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			atomic_fetch_sub(&tgf_npq, 1);
			break;
		}
	pthread_mutex_unlock(&tgf_pq_lock);
}

/* The glue's non-blocking call with the bound arguments. */
static int tgf_pq_start(struct tgf_pq *q, MPI_Request *r)
{
	switch (q->kind) {
	case TGF_P_ALLREDUCE:
		return MPI_Iallreduce(q->sbuf, q->rbuf, q->rcount, q->stype,
				      q->op, q->comm, r);
	case TGF_P_REDUCE:
		return MPI_Ireduce(q->sbuf, q->rbuf, q->rcount, q->stype, q->op,
				   q->root, q->comm, r);
	case TGF_P_BCAST:
		return MPI_Ibcast(q->rbuf, q->rcount, q->rtype, q->root,
				  q->comm, r);
	case TGF_P_BARRIER:
		return MPI_Ibarrier(q->comm, r);
	case TGF_P_ALLGATHER:
		return MPI_Iallgather(q->sbuf, q->scount, q->stype, q->rbuf,
				      q->rcount, q->rtype, q->comm, r);
	case TGF_P_ALLTOALL:
		return MPI_Ialltoall(q->sbuf, q->scount, q->stype, q->rbuf,
				     q->rcount, q->rtype, q->comm, r);
	case TGF_P_ALLTOALLV:
		return MPI_Ialltoallv(q->sbuf, q->scounts, q->sdispls, q->stype,
				      q->rbuf, q->rcounts, q->rdispls, q->rtype,
				      q->comm, r);
	case TGF_P_REDUCE_SCATTER_BLOCK:
		return MPI_Ireduce_scatter_block(q->sbuf, q->rbuf, q->rcount,
						 q->stype, q->op, q->comm, r);
	case TGF_P_REDUCE_SCATTER:
		return MPI_Ireduce_scatter(q->sbuf, q->rbuf, q->rcounts,
					   q->stype, q->op, q->comm, r);
	case TGF_P_GATHER:
		return MPI_Igather(q->sbuf, q->scount, q->stype, q->rbuf,
				   q->rcount, q->rtype, q->root, q->comm, r);
	case TGF_P_SCATTER:
		return MPI_Iscatter(q->sbuf, q->scount, q->stype, q->rbuf,
				    q->rcount, q->rtype, q->root, q->comm, r);
	case TGF_P_ALLGATHERV:
		return MPI_Iallgatherv(q->sbuf, q->scount, q->stype, q->rbuf,
				       q->rcounts, q->rdispls, q->rtype,
				       q->comm, r);
	case TGF_P_SCAN:
		return MPI_Iscan(q->sbuf, q->rbuf, q->rcount, q->stype, q->op,
				 q->comm, r);
	case TGF_P_EXSCAN:
		return MPI_Iexscan(q->sbuf, q->rbuf, q->rcount, q->stype, q->op,
				   q->comm, r);
	case TGF_P_GATHERV:
		return MPI_Igatherv(q->sbuf, q->scount, q->stype, q->rbuf,
				    q->rcounts, q->rdispls, q->rtype, q->root,
				    q->comm, r);
	case TGF_P_SCATTERV:
		return MPI_Iscatterv(q->sbuf, q->scounts, q->sdispls, q->stype,
				     q->rbuf, q->rcount, q->rtype, q->root,
				     q->comm, r);
	case TGF_P_NBR_ALLGATHER:
		return MPI_Ineighbor_allgather(q->sbuf, q->scount, q->stype,
					       q->rbuf, q->rcount, q->rtype,
					       q->comm, r);
	case TGF_P_NBR_ALLTOALL:
		return MPI_Ineighbor_alltoall(q->sbuf, q->scount, q->stype,
					      q->rbuf, q->rcount, q->rtype,
					      q->comm, r);
	case TGF_P_NBR_ALLGATHERV:
		return MPI_Ineighbor_allgatherv(q->sbuf, q->scount, q->stype,
						q->rbuf, q->rcounts, q->rdispls,
						q->rtype, q->comm, r);
	case TGF_P_NBR_ALLTOALLV:
		return MPI_Ineighbor_alltoallv(
			q->sbuf, q->scounts, q->sdispls, q->stype, q->rbuf,
			q->rcounts, q->rdispls, q->rtype, q->comm, r);
	case TGF_P_ALLTOALLW:
		return MPI_Ialltoallw(
			q->sbuf, q->scounts, q->sdispls, q->wtypes, q->rbuf,
			q->rcounts, q->rdispls, q->wtypes + q->ns, q->comm, r);
	case TGF_P_NBR_ALLTOALLW:
		return MPI_Ineighbor_alltoallw(q->sbuf, q->scounts,
					       q->sdispls_a, q->wtypes, q->rbuf,
					       q->rcounts, q->rdispls_a,
					       q->wtypes + q->ns, q->comm, r);
	}
	return MPI_ERR_INTERN;
}

/* ------------------------------------------------------------------ */
/* The inits                                                            */

/* A reduction's or a scan's arguments (root: MPI_Reduce's). */
static int tgf_pq_red(int rc, MPI_Request *req, enum tgf_pk kind,
		      const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		      MPI_Op op, int root, MPI_Comm comm)
{
	return tgf_pq_add(rc, req,
			  &(struct tgf_pq){.kind = kind,
					   .sbuf = sbuf,
					   .rbuf = rbuf,
					   .rcount = count,
					   .stype = dt,
					   .rtype = MPI_DATATYPE_NULL,
					   .op = op,
					   .root = root,
					   .comm = comm});
}

/* A data mover's with counts and displacements on either side (root:
 * gatherv's, scatterv's); a side with one count has NULL arrays. */
static int tgf_pq_movv(int rc, MPI_Request *req, enum tgf_pk kind,
		       const void *sbuf, int scount, const int scounts[],
		       const int sdispls[], MPI_Datatype stype, void *rbuf,
		       int rcount, const int rcounts[], const int rdispls[],
		       MPI_Datatype rtype, int root, MPI_Comm comm)
{
	return tgf_pq_add(rc, req,
			  &(struct tgf_pq){.kind = kind,
					   .sbuf = sbuf,
					   .scount = scount,
					   .scounts = scounts,
					   .sdispls = sdispls,
					   .stype = stype,
					   .rbuf = rbuf,
					   .rcount = rcount,
					   .rcounts = rcounts,
					   .rdispls = rdispls,
					   .rtype = rtype,
					   .op = MPI_OP_NULL,
					   .root = root,
					   .comm = comm});
}

/* A data mover's of one block each way (root: gather's, scatter's). */
static int tgf_pq_mov(int rc, MPI_Request *req, enum tgf_pk kind,
		      const void *sbuf, int scount, MPI_Datatype stype,
		      void *rbuf, int rcount, MPI_Datatype rtype, int root,
		      MPI_Comm comm)
{
	return tgf_pq_movv(rc, req, kind, sbuf, scount, NULL, NULL, stype, rbuf,
			   rcount, NULL, NULL, rtype, root, comm);
}

int TGF_INIT(Allreduce)(const void *sbuf, void *rbuf, int count,
			MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
			MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Allreduce)(sbuf, rbuf, count, dt, op, comm, info,
				      req);

	return tgf_pq_red(rc, req, TGF_P_ALLREDUCE, sbuf, rbuf, count, dt, op,
			  0, comm);
}

int TGF_INIT(Reduce)(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		     MPI_Op op, int root, MPI_Comm comm, MPI_Info info,
		     MPI_Request *req)
{
	int rc = TGF_PINIT(Reduce)(sbuf, rbuf, count, dt, op, root, comm, info,
				   req);

	return tgf_pq_red(rc, req, TGF_P_REDUCE, sbuf, rbuf, count, dt, op,
			  root, comm);
}

int TGF_INIT(Reduce_scatter_block)(const void *sbuf, void *rbuf, int count,
				   MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
				   MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Reduce_scatter_block)(sbuf, rbuf, count, dt, op,
						 comm, info, req);

	return tgf_pq_red(rc, req, TGF_P_REDUCE_SCATTER_BLOCK, sbuf, rbuf,
			  count, dt, op, 0, comm);
}

int TGF_INIT(Scan)(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		   MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Scan)(sbuf, rbuf, count, dt, op, comm, info, req);

	return tgf_pq_red(rc, req, TGF_P_SCAN, sbuf, rbuf, count, dt, op, 0,
			  comm);
}

int TGF_INIT(Exscan)(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
		     MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Exscan)(sbuf, rbuf, count, dt, op, comm, info, req);

	return tgf_pq_red(rc, req, TGF_P_EXSCAN, sbuf, rbuf, count, dt, op, 0,
			  comm);
}

int TGF_INIT(Reduce_scatter)(const void *sbuf, void *rbuf, const int rcounts[],
			     MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
			     MPI_Info info, MPI_Request *req)
{
	return tgf_pq_add(TGF_PINIT(Reduce_scatter)(sbuf, rbuf, rcounts, dt, op,
						    comm, info, req),
			  req,
			  &(struct tgf_pq){.kind = TGF_P_REDUCE_SCATTER,
					   .sbuf = sbuf,
					   .rbuf = rbuf,
					   .rcounts = rcounts,
					   .stype = dt,
					   .rtype = MPI_DATATYPE_NULL,
					   .op = op,
					   .comm = comm});
}

int TGF_INIT(Bcast)(void *buf, int count, MPI_Datatype dt, int root,
		    MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Bcast)(buf, count, dt, root, comm, info, req);

	return tgf_pq_mov(rc, req, TGF_P_BCAST, NULL, 0, MPI_DATATYPE_NULL, buf,
			  count, dt, root, comm);
}

int TGF_INIT(Barrier)(MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Barrier)(comm, info, req);

	return tgf_pq_mov(rc, req, TGF_P_BARRIER, NULL, 0, MPI_DATATYPE_NULL,
			  NULL, 0, MPI_DATATYPE_NULL, 0, comm);
}

int TGF_INIT(Allgather)(const void *sbuf, int scount, MPI_Datatype stype,
			void *rbuf, int rcount, MPI_Datatype rtype,
			MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Allgather)(sbuf, scount, stype, rbuf, rcount, rtype,
				      comm, info, req);

	return tgf_pq_mov(rc, req, TGF_P_ALLGATHER, sbuf, scount, stype, rbuf,
			  rcount, rtype, 0, comm);
}

int TGF_INIT(Alltoall)(const void *sbuf, int scount, MPI_Datatype stype,
		       void *rbuf, int rcount, MPI_Datatype rtype,
		       MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Alltoall)(sbuf, scount, stype, rbuf, rcount, rtype,
				     comm, info, req);

	return tgf_pq_mov(rc, req, TGF_P_ALLTOALL, sbuf, scount, stype, rbuf,
			  rcount, rtype, 0, comm);
}

int TGF_INIT(Gather)(const void *sbuf, int scount, MPI_Datatype stype,
		     void *rbuf, int rcount, MPI_Datatype rtype, int root,
		     MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Gather)(sbuf, scount, stype, rbuf, rcount, rtype,
				   root, comm, info, req);

	return tgf_pq_mov(rc, req, TGF_P_GATHER, sbuf, scount, stype, rbuf,
			  rcount, rtype, root, comm);
}

int TGF_INIT(Scatter)(const void *sbuf, int scount, MPI_Datatype stype,
		      void *rbuf, int rcount, MPI_Datatype rtype, int root,
		      MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Scatter)(sbuf, scount, stype, rbuf, rcount, rtype,
				    root, comm, info, req);

	return tgf_pq_mov(rc, req, TGF_P_SCATTER, sbuf, scount, stype, rbuf,
			  rcount, rtype, root, comm);
}

int TGF_INIT(Alltoallv)(const void *sbuf, const int scounts[],
			const int sdispls[], MPI_Datatype stype, void *rbuf,
			const int rcounts[], const int rdispls[],
			MPI_Datatype rtype, MPI_Comm comm, MPI_Info info,
			MPI_Request *req)
{
	int rc = TGF_PINIT(Alltoallv)(sbuf, scounts, sdispls, stype, rbuf,
				      rcounts, rdispls, rtype, comm, info, req);

	return tgf_pq_movv(rc, req, TGF_P_ALLTOALLV, sbuf, 0, scounts, sdispls,
			   stype, rbuf, 0, rcounts, rdispls, rtype, 0, comm);
}

int TGF_INIT(Allgatherv)(const void *sbuf, int scount, MPI_Datatype stype,
			 void *rbuf, const int rcounts[], const int displs[],
			 MPI_Datatype rtype, MPI_Comm comm, MPI_Info info,
			 MPI_Request *req)
{
	int rc = TGF_PINIT(Allgatherv)(sbuf, scount, stype, rbuf, rcounts,
				       displs, rtype, comm, info, req);

	return tgf_pq_movv(rc, req, TGF_P_ALLGATHERV, sbuf, scount, NULL, NULL,
			   stype, rbuf, 0, rcounts, displs, rtype, 0, comm);
}

int TGF_INIT(Gatherv)(const void *sbuf, int scount, MPI_Datatype stype,
		      void *rbuf, const int rcounts[], const int displs[],
		      MPI_Datatype rtype, int root, MPI_Comm comm,
		      MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Gatherv)(sbuf, scount, stype, rbuf, rcounts, displs,
				    rtype, root, comm, info, req);

	return tgf_pq_movv(rc, req, TGF_P_GATHERV, sbuf, scount, NULL, NULL,
			   stype, rbuf, 0, rcounts, displs, rtype, root, comm);
}

int TGF_INIT(Scatterv)(const void *sbuf, const int scounts[],
		       const int displs[], MPI_Datatype stype, void *rbuf,
		       int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
		       MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Scatterv)(sbuf, scounts, displs, stype, rbuf, rcount,
				     rtype, root, comm, info, req);

	return tgf_pq_movv(rc, req, TGF_P_SCATTERV, sbuf, 0, scounts, displs,
			   stype, rbuf, rcount, NULL, NULL, rtype, root, comm);
}

int TGF_INIT(Neighbor_allgather)(const void *sbuf, int scount,
				 MPI_Datatype stype, void *rbuf, int rcount,
				 MPI_Datatype rtype, MPI_Comm comm,
				 MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Neighbor_allgather)(sbuf, scount, stype, rbuf,
					       rcount, rtype, comm, info, req);

	return tgf_pq_mov(rc, req, TGF_P_NBR_ALLGATHER, sbuf, scount, stype,
			  rbuf, rcount, rtype, 0, comm);
}

int TGF_INIT(Neighbor_alltoall)(const void *sbuf, int scount,
				MPI_Datatype stype, void *rbuf, int rcount,
				MPI_Datatype rtype, MPI_Comm comm,
				MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Neighbor_alltoall)(sbuf, scount, stype, rbuf, rcount,
					      rtype, comm, info, req);

	return tgf_pq_mov(rc, req, TGF_P_NBR_ALLTOALL, sbuf, scount, stype,
			  rbuf, rcount, rtype, 0, comm);
}

int TGF_INIT(Neighbor_allgatherv)(const void *sbuf, int scount,
				  MPI_Datatype stype, void *rbuf,
				  const int rcounts[], const int displs[],
				  MPI_Datatype rtype, MPI_Comm comm,
				  MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Neighbor_allgatherv)(sbuf, scount, stype, rbuf,
						rcounts, displs, rtype, comm,
						info, req);

	return tgf_pq_movv(rc, req, TGF_P_NBR_ALLGATHERV, sbuf, scount, NULL,
			   NULL, stype, rbuf, 0, rcounts, displs, rtype, 0,
			   comm);
}

int TGF_INIT(Neighbor_alltoallv)(const void *sbuf, const int scounts[],
				 const int sdispls[], MPI_Datatype stype,
				 void *rbuf, const int rcounts[],
				 const int rdispls[], MPI_Datatype rtype,
				 MPI_Comm comm, MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Neighbor_alltoallv)(sbuf, scounts, sdispls, stype,
					       rbuf, rcounts, rdispls, rtype,
					       comm, info, req);

	return tgf_pq_movv(rc, req, TGF_P_NBR_ALLTOALLV, sbuf, 0, scounts,
			   sdispls, stype, rbuf, 0, rcounts, rdispls, rtype, 0,
			   comm);
}

/* The w forms: a type per block, dup'ed where derived, for the program
 * may free its own; the sides' lengths from the communicator (the
 * remote group's on an intercommunicator, the degrees on a topology). */
int TGF_INIT(Alltoallw)(const void *sbuf, const int scounts[],
			const int sdispls[], const MPI_Datatype stypes[],
			void *rbuf, const int rcounts[], const int rdispls[],
			const MPI_Datatype rtypes[], MPI_Comm comm,
			MPI_Info info, MPI_Request *req)
{
	int rc =
		TGF_PINIT(Alltoallw)(sbuf, scounts, sdispls, stypes, rbuf,
				     rcounts, rdispls, rtypes, comm, info, req);
	int n = rc == MPI_SUCCESS ? tgf_w_blocks(comm) : 0;

	return tgf_pq_add_w(rc, req,
			    &(struct tgf_pq){.kind = TGF_P_ALLTOALLW,
					     .sbuf = sbuf,
					     .scounts = scounts,
					     .sdispls = sdispls,
					     .rbuf = rbuf,
					     .rcounts = rcounts,
					     .rdispls = rdispls,
					     .stype = MPI_DATATYPE_NULL,
					     .rtype = MPI_DATATYPE_NULL,
					     .ns = sbuf == MPI_IN_PLACE ? 0 : n,
					     .nr = n,
					     .op = MPI_OP_NULL,
					     .comm = comm},
			    sbuf == MPI_IN_PLACE ? NULL : stypes, rtypes);
}

int TGF_INIT(Neighbor_alltoallw)(const void *sbuf, const int scounts[],
				 const MPI_Aint sdispls[],
				 const MPI_Datatype stypes[], void *rbuf,
				 const int rcounts[], const MPI_Aint rdispls[],
				 const MPI_Datatype rtypes[], MPI_Comm comm,
				 MPI_Info info, MPI_Request *req)
{
	int rc = TGF_PINIT(Neighbor_alltoallw)(sbuf, scounts, sdispls, stypes,
					       rbuf, rcounts, rdispls, rtypes,
					       comm, info, req);
	int in = 0, out = 0;

	if (rc == MPI_SUCCESS)
		tgf_nbr_degree(comm, &in, &out);
	return tgf_pq_add_w(rc, req,
			    &(struct tgf_pq){.kind = TGF_P_NBR_ALLTOALLW,
					     .sbuf = sbuf,
					     .scounts = scounts,
					     .sdispls_a = sdispls,
					     .rbuf = rbuf,
					     .rcounts = rcounts,
					     .rdispls_a = rdispls,
					     .stype = MPI_DATATYPE_NULL,
					     .rtype = MPI_DATATYPE_NULL,
					     .ns = out,
					     .nr = in,
					     .op = MPI_OP_NULL,
					     .comm = comm},
			    stypes, rtypes);
}

/* ------------------------------------------------------------------ */
/* Start and the completion calls                                       */

static int tgf_pq_start_one(MPI_Request *h)
{
	struct tgf_pq *q = tgf_pq_find(*h);
	MPI_Request r = MPI_REQUEST_NULL;
	int rc;

	if (!q)
		return PMPI_Start(h);
	if (q->inner != MPI_REQUEST_NULL) { /* started twice */
		PMPI_Comm_call_errhandler(q->comm, MPI_ERR_REQUEST);
		return MPI_ERR_REQUEST;
	}
	rc = tgf_pq_start(q, &r);
	if (rc == MPI_SUCCESS)
		q->inner = r;
	return rc;
}

int MPI_Start(MPI_Request *h)
{
	if (!h || !tgf_pq_some())
		return PMPI_Start(h);
	return tgf_pq_start_one(h);
}

/* In array order: a persistent collective's starts must be in the same
 * order on every member. */
int MPI_Startall(int n, MPI_Request hs[])
{
	int rc = MPI_SUCCESS;

	if (!hs || n <= 0 || !tgf_pq_some())
		return PMPI_Startall(n, hs);
	for (int i = 0; i < n && rc == MPI_SUCCESS; i++)
		rc = tgf_pq_start_one(&hs[i]);
	return rc;
}

/* A completion call's array with every active handle of the glue's
 * replaced by its start's request: sub[i] its record, NULL elsewhere.
 * False when none is. */
static bool tgf_pq_swap_in(int n, const MPI_Request *reqs, MPI_Request *tmp,
			   struct tgf_pq **sub)
{
	bool any = false;

	for (int i = 0; i < n; i++) {
		struct tgf_pq *q = tgf_pq_find(reqs[i]);

		sub[i] = q && q->inner != MPI_REQUEST_NULL ? q : NULL;
		tmp[i] = sub[i] ? q->inner : reqs[i];
		any |= sub[i] != NULL;
	}
	return any;
}

/* After the call: a start whose request completed (the MPI set it to
 * MPI_REQUEST_NULL) leaves its handle inactive, and the handle, not
 * MPI_REQUEST_NULL, is what the program finds in its array. */
static void tgf_pq_swap_out(int n, MPI_Request *reqs, const MPI_Request *tmp,
			    struct tgf_pq **sub)
{
	for (int i = 0; i < n; i++) {
		if (sub[i])
			sub[i]->inner = tmp[i];
		else
			reqs[i] = tmp[i];
	}
}

/* The arrays a completion call needs: on the stack for a few. */
#define TGF_PQ_STACK 16
struct tgf_pq_arr {
	MPI_Request *tmp, stmp[TGF_PQ_STACK];
	struct tgf_pq **sub, *ssub[TGF_PQ_STACK];
};

static bool tgf_pq_arr_get(struct tgf_pq_arr *a, int n)
{
	a->tmp = a->stmp;
	a->sub = a->ssub;
	if (n <= TGF_PQ_STACK)
		return true;
	a->tmp = malloc((size_t)n * sizeof(*a->tmp));
	a->sub = malloc((size_t)n * sizeof(*a->sub));
	return a->tmp && a->sub;
}

static void tgf_pq_arr_put(struct tgf_pq_arr *a)
{
	if (a->tmp != a->stmp)
		free(a->tmp);
	if (a->sub != a->ssub)
		free(a->sub);
}

/* The body of every array completion call: CALL on a.tmp where a handle
 * of the glue's is active, else on reqs as they are. */
#define TGF_PQ_ARRAY(n, reqs, CALL_TMP, CALL_REQS)                             \
	do {                                                                   \
		struct tgf_pq_arr a;                                           \
		int rc_;                                                       \
		if (!tgf_pq_some() || !(reqs) || (n) <= 0)                     \
			return CALL_REQS;                                      \
		if (!tgf_pq_arr_get(&a, (n))) {                                \
			tgf_pq_arr_put(&a);                                    \
			PMPI_Comm_call_errhandler(MPI_COMM_WORLD,              \
						  MPI_ERR_NO_MEM);             \
			return MPI_ERR_NO_MEM;                                 \
		}                                                              \
		if (!tgf_pq_swap_in((n), (reqs), a.tmp, a.sub)) {              \
			tgf_pq_arr_put(&a);                                    \
			return CALL_REQS;                                      \
		}                                                              \
		rc_ = CALL_TMP;                                                \
		tgf_pq_swap_out((n), (reqs), a.tmp, a.sub);                    \
		tgf_pq_arr_put(&a);                                            \
		return rc_;                                                    \
	} while (0)

int MPI_Wait(MPI_Request *h, MPI_Status *st)
{
	TGF_PQ_ARRAY(1, h, PMPI_Wait(a.tmp, st), PMPI_Wait(h, st));
}

int MPI_Test(MPI_Request *h, int *flag, MPI_Status *st)
{
	TGF_PQ_ARRAY(1, h, PMPI_Test(a.tmp, flag, st), PMPI_Test(h, flag, st));
}

int MPI_Request_get_status(MPI_Request h, int *flag, MPI_Status *st)
{
	struct tgf_pq *q = tgf_pq_find(h);

	if (q && q->inner != MPI_REQUEST_NULL)
		return PMPI_Request_get_status(q->inner, flag, st);
	return PMPI_Request_get_status(h, flag, st);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
	TGF_PQ_ARRAY(n, reqs, PMPI_Waitall(n, a.tmp, sts),
		     PMPI_Waitall(n, reqs, sts));
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
	TGF_PQ_ARRAY(n, reqs, PMPI_Testall(n, a.tmp, flag, sts),
		     PMPI_Testall(n, reqs, flag, sts));
}

int MPI_Waitany(int n, MPI_Request reqs[], int *idx, MPI_Status *st)
{
	TGF_PQ_ARRAY(n, reqs, PMPI_Waitany(n, a.tmp, idx, st),
		     PMPI_Waitany(n, reqs, idx, st));
}

int MPI_Testany(int n, MPI_Request reqs[], int *idx, int *flag, MPI_Status *st)
{
	TGF_PQ_ARRAY(n, reqs, PMPI_Testany(n, a.tmp, idx, flag, st),
		     PMPI_Testany(n, reqs, idx, flag, st));
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outn, int idx[],
		 MPI_Status sts[])
{
	TGF_PQ_ARRAY(n, reqs, PMPI_Waitsome(n, a.tmp, outn, idx, sts),
		     PMPI_Waitsome(n, reqs, outn, idx, sts));
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outn, int idx[],
		 MPI_Status sts[])
{
	TGF_PQ_ARRAY(n, reqs, PMPI_Testsome(n, a.tmp, outn, idx, sts),
		     PMPI_Testsome(n, reqs, outn, idx, sts));
}

/* Freeing an active persistent request is legal, and its start goes on
 * to the end; the glue's request of a collective must not be freed
 * while the offload runs, and every member started it, so the free
 * waits for it. */
int MPI_Request_free(MPI_Request *h)
{
	struct tgf_pq *q = h ? tgf_pq_find(*h) : NULL;

	if (!q)
		return PMPI_Request_free(h);
	tgf_pq_remove(q);
	if (q->inner != MPI_REQUEST_NULL)
		PMPI_Wait(&q->inner, MPI_STATUS_IGNORE);
	tgf_pq_free(q);
	return PMPI_Request_free(h);
}

void tgf_persist_fini(void)
{
	pthread_mutex_lock(&tgf_pq_lock);
	for (int b = 0; b < TGF_PQ_BUCKETS; b++)
		while (tgf_pqs[b]) {
			struct tgf_pq *q = tgf_pqs[b];

			tgf_pqs[b] = q->next;
			tgf_pq_free(q);
		}
	atomic_store(&tgf_npq, 0);
	pthread_mutex_unlock(&tgf_pq_lock);
}

#else /* !TGF_PERSIST */

void tgf_persist_fini(void)
{
}

#endif
