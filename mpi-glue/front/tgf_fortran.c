/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Fortran entry points (mpif.h, `use mpi` and `use mpi_f08`) for Open
 * MPI.
 *
 * Open MPI 4.1's Fortran bindings call PMPI_* directly, so a Fortran
 * program's collectives never reach the C wrappers: these entry points,
 * in the four manglings Open MPI itself exports and the ompi_*_f its
 * mpi_f08 bindings call, turn Fortran handles into C ones and call the
 * wrappers.  MPICH's Fortran bindings call the C MPI_* functions, which
 * the glue already wraps, except those of mpi_f08 without a buffer:
 * tgf_fortran08.c.
 *
 * MPI_IN_PLACE and MPI_BOTTOM are, in Fortran, the addresses of Open
 * MPI's own common blocks; they are found by name once.
 */
#include <dlfcn.h>
#include <rdma/fi_errno.h>
#include <stdlib.h>

#include "tgf_coll.h"
#include "tgf_tnbc.h"

#if !TGF_MPICH

static void *tgf_f_in_place, *tgf_f_bottom;

static void tgf_f_init(void)
{
	static int done;

	if (done)
		return;
	done = 1;
	tgf_f_in_place = dlsym(RTLD_DEFAULT, "mpi_fortran_in_place_");
	tgf_f_bottom = dlsym(RTLD_DEFAULT, "mpi_fortran_bottom_");
}

static void *tgf_f_buf(void *b)
{
	tgf_f_init();
	if (b && b == tgf_f_in_place)
		return MPI_IN_PLACE;
	if (b && b == tgf_f_bottom)
		return MPI_BOTTOM;
	return b;
}

#define C_COMM(f) PMPI_Comm_f2c(*(f))
#define C_TYPE(f) PMPI_Type_f2c(*(f))
#define C_OP(f)	  PMPI_Op_f2c(*(f))
#define B(x)	  tgf_f_buf(x)

/* One entry point, Open MPI's three other spellings of it, and the
 * function its mpi_f08 bindings call (ompi_NAME_f, the same arguments:
 * the f08 binding passes the handles' integers and an ierror of its
 * own).  Its compiler copies a non-contiguous section in and out, so the
 * buffers arrive contiguous, as from mpif.h. */
#define TGF_FORTRAN(name, upper, params)                                       \
	void mpi_##name params __attribute__((alias("mpi_" #name "_")));       \
	void mpi_##name##__ params __attribute__((alias("mpi_" #name "_")));   \
	void upper params __attribute__((alias("mpi_" #name "_")));            \
	void ompi_##name##_f params __attribute__((alias("mpi_" #name "_")));  \
	void mpi_##name##_ params

TGF_FORTRAN(init, MPI_INIT, (MPI_Fint * ierr))
{
	*ierr = MPI_Init(NULL, NULL);
}

TGF_FORTRAN(init_thread, MPI_INIT_THREAD,
	    (MPI_Fint * required, MPI_Fint *provided, MPI_Fint *ierr))
{
	int p = 0;

	*ierr = MPI_Init_thread(NULL, NULL, *required, &p);
	*provided = p;
}

TGF_FORTRAN(finalize, MPI_FINALIZE, (MPI_Fint * ierr))
{
	*ierr = MPI_Finalize();
}

TGF_FORTRAN(comm_dup, MPI_COMM_DUP,
	    (MPI_Fint * comm, MPI_Fint *newcomm, MPI_Fint *ierr))
{
	MPI_Comm c;

	*ierr = MPI_Comm_dup(C_COMM(comm), &c);
	if (*ierr == MPI_SUCCESS)
		*newcomm = PMPI_Comm_c2f(c);
}

TGF_FORTRAN(comm_idup, MPI_COMM_IDUP,
	    (MPI_Fint * comm, MPI_Fint *newcomm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Comm c;
	MPI_Request r;

	*ierr = MPI_Comm_idup(C_COMM(comm), &c, &r);
	if (*ierr == MPI_SUCCESS) {
		*newcomm = PMPI_Comm_c2f(c);
		*req = PMPI_Request_c2f(r);
	}
}

TGF_FORTRAN(comm_split, MPI_COMM_SPLIT,
	    (MPI_Fint * comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm,
	     MPI_Fint *ierr))
{
	MPI_Comm c;

	*ierr = MPI_Comm_split(C_COMM(comm), *color, *key, &c);
	if (*ierr == MPI_SUCCESS)
		*newcomm = PMPI_Comm_c2f(c);
}

TGF_FORTRAN(comm_create, MPI_COMM_CREATE,
	    (MPI_Fint * comm, MPI_Fint *group, MPI_Fint *newcomm,
	     MPI_Fint *ierr))
{
	MPI_Comm c;

	*ierr = MPI_Comm_create(C_COMM(comm), PMPI_Group_f2c(*group), &c);
	if (*ierr == MPI_SUCCESS)
		*newcomm = PMPI_Comm_c2f(c);
}

TGF_FORTRAN(intercomm_merge, MPI_INTERCOMM_MERGE,
	    (MPI_Fint * comm, MPI_Fint *high, MPI_Fint *newcomm,
	     MPI_Fint *ierr))
{
	MPI_Comm c;

	/* Fortran LOGICAL: nonzero is true under both MPIs' compilers */
	*ierr = MPI_Intercomm_merge(C_COMM(comm), *high != 0, &c);
	if (*ierr == MPI_SUCCESS)
		*newcomm = PMPI_Comm_c2f(c);
}

TGF_FORTRAN(cart_create, MPI_CART_CREATE,
	    (MPI_Fint * comm, MPI_Fint *ndims, MPI_Fint *dims,
	     MPI_Fint *periods, MPI_Fint *reorder, MPI_Fint *newcomm,
	     MPI_Fint *ierr))
{
	int n = *ndims, d[64], p[64];
	MPI_Comm c;

	if (n < 0 || n > 64) {
		*ierr = MPI_ERR_DIMS;
		return;
	}
	for (int i = 0; i < n; i++) {
		d[i] = dims[i];
		p[i] = periods[i] != 0; /* Fortran LOGICAL */
	}
	*ierr = MPI_Cart_create(C_COMM(comm), n, d, p, *reorder != 0, &c);
	if (*ierr == MPI_SUCCESS)
		*newcomm = PMPI_Comm_c2f(c);
}

/*
 * The graph constructors: Open MPI's own binding of NAME converts the
 * arguments (LOGICAL reorder, the weights' sentinels, which are the
 * addresses of its common blocks), then the glue names the child and
 * agrees on its neighbour lists, as the C wrappers do.
 */
#define TGF_FORTRAN_GRAPH(name, proto, args, comm, newcomm, ierr)              \
	do {                                                                   \
		static void(*next_) proto;                                     \
		if (!next_)                                                    \
			*(void **)&next_ = dlsym(RTLD_NEXT, "mpi_" #name "_"); \
		*(ierr) = MPI_ERR_INTERN;                                      \
		if (next_)                                                     \
			next_ args;                                            \
		if (*(ierr) == MPI_SUCCESS)                                    \
			tgf_comm_made_graph(C_COMM(comm), C_COMM(newcomm));    \
	} while (0)

TGF_FORTRAN(graph_create, MPI_GRAPH_CREATE,
	    (MPI_Fint * comm, MPI_Fint *nnodes, MPI_Fint *index,
	     MPI_Fint *edges, MPI_Fint *reorder, MPI_Fint *newcomm,
	     MPI_Fint *ierr))
{
	TGF_FORTRAN_GRAPH(graph_create,
			  (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
			   MPI_Fint *, MPI_Fint *, MPI_Fint *),
			  (comm, nnodes, index, edges, reorder, newcomm, ierr),
			  comm, newcomm, ierr);
}

TGF_FORTRAN(dist_graph_create, MPI_DIST_GRAPH_CREATE,
	    (MPI_Fint * comm, MPI_Fint *n, MPI_Fint *sources, MPI_Fint *degrees,
	     MPI_Fint *dests, MPI_Fint *weights, MPI_Fint *info,
	     MPI_Fint *reorder, MPI_Fint *newcomm, MPI_Fint *ierr))
{
	TGF_FORTRAN_GRAPH(dist_graph_create,
			  (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
			   MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
			   MPI_Fint *, MPI_Fint *),
			  (comm, n, sources, degrees, dests, weights, info,
			   reorder, newcomm, ierr),
			  comm, newcomm, ierr);
}

TGF_FORTRAN(dist_graph_create_adjacent, MPI_DIST_GRAPH_CREATE_ADJACENT,
	    (MPI_Fint * comm, MPI_Fint *indegree, MPI_Fint *sources,
	     MPI_Fint *sourceweights, MPI_Fint *outdegree, MPI_Fint *dests,
	     MPI_Fint *destweights, MPI_Fint *info, MPI_Fint *reorder,
	     MPI_Fint *newcomm, MPI_Fint *ierr))
{
	TGF_FORTRAN_GRAPH(dist_graph_create_adjacent,
			  (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
			   MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
			   MPI_Fint *, MPI_Fint *, MPI_Fint *),
			  (comm, indegree, sources, sourceweights, outdegree,
			   dests, destweights, info, reorder, newcomm, ierr),
			  comm, newcomm, ierr);
}

TGF_FORTRAN(barrier, MPI_BARRIER, (MPI_Fint * comm, MPI_Fint *ierr))
{
	*ierr = MPI_Barrier(C_COMM(comm));
}

TGF_FORTRAN(bcast, MPI_BCAST,
	    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root,
	     MPI_Fint *comm, MPI_Fint *ierr))
{
	tgf_f_site = __builtin_return_address(0);
	*ierr = MPI_Bcast(B(buf), *count, C_TYPE(type), *root, C_COMM(comm));
}

TGF_FORTRAN(allreduce, MPI_ALLREDUCE,
	    (void *s, void *r, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Allreduce(B(s), B(r), *count, C_TYPE(type), C_OP(op),
			      C_COMM(comm));
}

TGF_FORTRAN(reduce, MPI_REDUCE,
	    (void *s, void *r, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Reduce(B(s), B(r), *count, C_TYPE(type), C_OP(op), *root,
			   C_COMM(comm));
}

TGF_FORTRAN(reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK,
	    (void *s, void *r, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Reduce_scatter_block(B(s), B(r), *count, C_TYPE(type),
					 C_OP(op), C_COMM(comm));
}

TGF_FORTRAN(scan, MPI_SCAN,
	    (void *s, void *r, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Scan(B(s), B(r), *count, C_TYPE(type), C_OP(op),
			 C_COMM(comm));
}

TGF_FORTRAN(exscan, MPI_EXSCAN,
	    (void *s, void *r, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Exscan(B(s), B(r), *count, C_TYPE(type), C_OP(op),
			   C_COMM(comm));
}

TGF_FORTRAN(reduce_scatter, MPI_REDUCE_SCATTER,
	    (void *s, void *r, MPI_Fint *counts, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Reduce_scatter(B(s), B(r), counts, C_TYPE(type), C_OP(op),
				   C_COMM(comm));
}

TGF_FORTRAN(allgather, MPI_ALLGATHER,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Allgather(B(s), *sc, C_TYPE(st), B(r), *rc, C_TYPE(rt),
			      C_COMM(comm));
}

TGF_FORTRAN(alltoall, MPI_ALLTOALL,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr))
{
	tgf_f_site = __builtin_return_address(0);
	*ierr = MPI_Alltoall(B(s), *sc, C_TYPE(st), B(r), *rc, C_TYPE(rt),
			     C_COMM(comm));
}

TGF_FORTRAN(gather, MPI_GATHER,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Gather(B(s), *sc, C_TYPE(st), B(r), *rc, C_TYPE(rt), *root,
			   C_COMM(comm));
}

TGF_FORTRAN(scatter, MPI_SCATTER,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Scatter(B(s), *sc, C_TYPE(st), B(r), *rc, C_TYPE(rt), *root,
			    C_COMM(comm));
}

/* MPI_Fint and int are one width here (both 4 bytes on Debian's builds);
 * the arrays pass through. */
_Static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint is not an int");

TGF_FORTRAN(alltoallv, MPI_ALLTOALLV,
	    (void *s, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *r,
	     MPI_Fint *rc, MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm,
	     MPI_Fint *ierr))
{
	tgf_f_site = __builtin_return_address(0);
	*ierr = MPI_Alltoallv(B(s), sc, sd, C_TYPE(st), B(r), rc, rd,
			      C_TYPE(rt), C_COMM(comm));
}

/* n Fortran type handles as C ones; NULL where there are none.  *nomem
 * when they could not be. */
static MPI_Datatype *tgf_f_ntypes(const MPI_Fint *t, int n, bool *nomem)
{
	MPI_Datatype *ct;

	if (!t || n <= 0)
		return NULL;
	ct = malloc((size_t)n * sizeof(*ct));
	if (!ct) {
		*nomem = true;
		return NULL;
	}
	for (int i = 0; i < n; i++)
		ct[i] = PMPI_Type_f2c(t[i]);
	return ct;
}

/* Alltoallw's, one per member (of the remote group on an
 * intercommunicator): NULL for in place's send side, where they are not
 * looked at. */
static MPI_Datatype *tgf_f_types(const MPI_Fint *t, MPI_Fint *comm, void *buf,
				 bool *nomem)
{
	if (B(buf) == MPI_IN_PLACE)
		return NULL;
	return tgf_f_ntypes(t, tgf_w_blocks(C_COMM(comm)), nomem);
}

/* Neighbor_alltoallw's: one per neighbour, sent (out) or received. */
static MPI_Datatype *tgf_f_nbr_types(const MPI_Fint *t, MPI_Fint *comm,
				     bool out, bool *nomem)
{
	int in = 0, n = 0;

	tgf_nbr_degree(C_COMM(comm), &in, &n);
	return tgf_f_ntypes(t, out ? n : in, nomem);
}

TGF_FORTRAN(alltoallw, MPI_ALLTOALLW,
	    (void *s, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *r,
	     MPI_Fint *rc, MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm,
	     MPI_Fint *ierr))
{
	bool nomem = false;
	MPI_Datatype *cst = tgf_f_types(st, comm, s, &nomem),
		     *crt = tgf_f_types(rt, comm, r, &nomem);

	if (nomem)
		*ierr = tgf_fail(C_COMM(comm), -FI_ENOMEM);
	else
		*ierr = MPI_Alltoallw(B(s), sc, sd, cst, B(r), rc, rd, crt,
				      C_COMM(comm));
	free(cst);
	free(crt);
}

TGF_FORTRAN(allgatherv, MPI_ALLGATHERV,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Allgatherv(B(s), *sc, C_TYPE(st), B(r), rc, rd, C_TYPE(rt),
			       C_COMM(comm));
}

TGF_FORTRAN(gatherv, MPI_GATHERV,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm,
	     MPI_Fint *ierr))
{
	*ierr = MPI_Gatherv(B(s), *sc, C_TYPE(st), B(r), rc, rd, C_TYPE(rt),
			    *root, C_COMM(comm));
}

TGF_FORTRAN(scatterv, MPI_SCATTERV,
	    (void *s, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *r,
	     MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm,
	     MPI_Fint *ierr))
{
	*ierr = MPI_Scatterv(B(s), sc, sd, C_TYPE(st), B(r), *rc, C_TYPE(rt),
			     *root, C_COMM(comm));
}

TGF_FORTRAN(ibarrier, MPI_IBARRIER,
	    (MPI_Fint * comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ibarrier(C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(ibcast, MPI_IBCAST,
	    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *root,
	     MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ibcast(B(buf), *count, C_TYPE(type), *root, C_COMM(comm),
			   &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(iallreduce, MPI_IALLREDUCE,
	    (void *s, void *r, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Iallreduce(B(s), B(r), *count, C_TYPE(type), C_OP(op),
			       C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(ireduce, MPI_IREDUCE,
	    (void *s, void *r, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ireduce(B(s), B(r), *count, C_TYPE(type), C_OP(op), *root,
			    C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(ireduce_scatter, MPI_IREDUCE_SCATTER,
	    (void *s, void *r, MPI_Fint *counts, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ireduce_scatter(B(s), B(r), counts, C_TYPE(type), C_OP(op),
				    C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK,
	    (void *s, void *r, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ireduce_scatter_block(B(s), B(r), *count, C_TYPE(type),
					  C_OP(op), C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(iscan, MPI_ISCAN,
	    (void *s, void *r, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Iscan(B(s), B(r), *count, C_TYPE(type), C_OP(op),
			  C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(iexscan, MPI_IEXSCAN,
	    (void *s, void *r, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
	     MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Iexscan(B(s), B(r), *count, C_TYPE(type), C_OP(op),
			    C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(igather, MPI_IGATHER,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req,
	     MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Igather(B(s), *sc, C_TYPE(st), B(r), *rc, C_TYPE(rt), *root,
			    C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(iscatter, MPI_ISCATTER,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *req,
	     MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Iscatter(B(s), *sc, C_TYPE(st), B(r), *rc, C_TYPE(rt),
			     *root, C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(iallgather, MPI_IALLGATHER,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Iallgather(B(s), *sc, C_TYPE(st), B(r), *rc, C_TYPE(rt),
			       C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(ialltoall, MPI_IALLTOALL,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ialltoall(B(s), *sc, C_TYPE(st), B(r), *rc, C_TYPE(rt),
			      C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(ialltoallv, MPI_IALLTOALLV,
	    (void *s, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *r,
	     MPI_Fint *rc, MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm,
	     MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ialltoallv(B(s), sc, sd, C_TYPE(st), B(r), rc, rd,
			       C_TYPE(rt), C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

/* The offload reads the C handles in the call only.  Where it falls
 * back, Open MPI's own binding runs: it keeps its C arrays until the
 * request completes (the MPI releases the types then). */
TGF_FORTRAN(ialltoallw, MPI_IALLTOALLW,
	    (void *s, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *r,
	     MPI_Fint *rc, MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm,
	     MPI_Fint *req, MPI_Fint *ierr))
{
	static void (*next)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *,
			    MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
			    MPI_Fint *, MPI_Fint *);
	bool nomem = false;
	MPI_Datatype *cst = tgf_f_types(st, comm, s, &nomem),
		     *crt = tgf_f_types(rt, comm, r, &nomem);
	MPI_Request q;
	int ret;

	if (nomem) {
		*ierr = tgf_fail(C_COMM(comm), -FI_ENOMEM);
	} else if (tgf_ialltoallw_try(B(s), sc, sd, cst, B(r), rc, rd, crt,
				      C_COMM(comm), &q, &ret)) {
		*ierr = ret;
		if (ret == MPI_SUCCESS)
			*req = PMPI_Request_c2f(q);
	} else {
		if (!next)
			*(void **)&next = dlsym(RTLD_NEXT, "mpi_ialltoallw_");
		*ierr = MPI_ERR_INTERN;
		if (next)
			next(s, sc, sd, st, r, rc, rd, rt, comm, req, ierr);
	}
	free(cst);
	free(crt);
}

TGF_FORTRAN(iallgatherv, MPI_IALLGATHERV,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *req,
	     MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Iallgatherv(B(s), *sc, C_TYPE(st), B(r), rc, rd, C_TYPE(rt),
				C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(igatherv, MPI_IGATHERV,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm,
	     MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Igatherv(B(s), *sc, C_TYPE(st), B(r), rc, rd, C_TYPE(rt),
			     *root, C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(iscatterv, MPI_ISCATTERV,
	    (void *s, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *r,
	     MPI_Fint *rc, MPI_Fint *rt, MPI_Fint *root, MPI_Fint *comm,
	     MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Iscatterv(B(s), sc, sd, C_TYPE(st), B(r), *rc, C_TYPE(rt),
			      *root, C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(neighbor_allgather, MPI_NEIGHBOR_ALLGATHER,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Neighbor_allgather(B(s), *sc, C_TYPE(st), B(r), *rc,
				       C_TYPE(rt), C_COMM(comm));
}

TGF_FORTRAN(neighbor_alltoall, MPI_NEIGHBOR_ALLTOALL,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Neighbor_alltoall(B(s), *sc, C_TYPE(st), B(r), *rc,
				      C_TYPE(rt), C_COMM(comm));
}

TGF_FORTRAN(neighbor_allgatherv, MPI_NEIGHBOR_ALLGATHERV,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Neighbor_allgatherv(B(s), *sc, C_TYPE(st), B(r), rc, rd,
					C_TYPE(rt), C_COMM(comm));
}

TGF_FORTRAN(neighbor_alltoallv, MPI_NEIGHBOR_ALLTOALLV,
	    (void *s, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *r,
	     MPI_Fint *rc, MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm,
	     MPI_Fint *ierr))
{
	*ierr = MPI_Neighbor_alltoallv(B(s), sc, sd, C_TYPE(st), B(r), rc, rd,
				       C_TYPE(rt), C_COMM(comm));
}

TGF_FORTRAN(ineighbor_allgather, MPI_INEIGHBOR_ALLGATHER,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ineighbor_allgather(B(s), *sc, C_TYPE(st), B(r), *rc,
					C_TYPE(rt), C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(ineighbor_alltoall, MPI_INEIGHBOR_ALLTOALL,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ineighbor_alltoall(B(s), *sc, C_TYPE(st), B(r), *rc,
				       C_TYPE(rt), C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(ineighbor_allgatherv, MPI_INEIGHBOR_ALLGATHERV,
	    (void *s, MPI_Fint *sc, MPI_Fint *st, void *r, MPI_Fint *rc,
	     MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm, MPI_Fint *req,
	     MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ineighbor_allgatherv(B(s), *sc, C_TYPE(st), B(r), rc, rd,
					 C_TYPE(rt), C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

TGF_FORTRAN(ineighbor_alltoallv, MPI_INEIGHBOR_ALLTOALLV,
	    (void *s, MPI_Fint *sc, MPI_Fint *sd, MPI_Fint *st, void *r,
	     MPI_Fint *rc, MPI_Fint *rd, MPI_Fint *rt, MPI_Fint *comm,
	     MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request q;

	*ierr = MPI_Ineighbor_alltoallv(B(s), sc, sd, C_TYPE(st), B(r), rc, rd,
					C_TYPE(rt), C_COMM(comm), &q);
	if (*ierr == MPI_SUCCESS)
		*req = PMPI_Request_c2f(q);
}

/* The displacements are INTEGER(KIND=MPI_ADDRESS_KIND): MPI_Aint. */
TGF_FORTRAN(neighbor_alltoallw, MPI_NEIGHBOR_ALLTOALLW,
	    (void *s, MPI_Fint *sc, MPI_Aint *sd, MPI_Fint *st, void *r,
	     MPI_Fint *rc, MPI_Aint *rd, MPI_Fint *rt, MPI_Fint *comm,
	     MPI_Fint *ierr))
{
	bool nomem = false;
	MPI_Datatype *cst = tgf_f_nbr_types(st, comm, true, &nomem),
		     *crt = tgf_f_nbr_types(rt, comm, false, &nomem);

	if (nomem)
		*ierr = tgf_fail(C_COMM(comm), -FI_ENOMEM);
	else
		*ierr = MPI_Neighbor_alltoallw(B(s), sc, sd, cst, B(r), rc, rd,
					       crt, C_COMM(comm));
	free(cst);
	free(crt);
}

/* As MPI_IALLTOALLW: Open MPI's own binding where the offload falls
 * back, which keeps its C arrays until the request completes. */
TGF_FORTRAN(ineighbor_alltoallw, MPI_INEIGHBOR_ALLTOALLW,
	    (void *s, MPI_Fint *sc, MPI_Aint *sd, MPI_Fint *st, void *r,
	     MPI_Fint *rc, MPI_Aint *rd, MPI_Fint *rt, MPI_Fint *comm,
	     MPI_Fint *req, MPI_Fint *ierr))
{
	static void (*next)(void *, MPI_Fint *, MPI_Aint *, MPI_Fint *, void *,
			    MPI_Fint *, MPI_Aint *, MPI_Fint *, MPI_Fint *,
			    MPI_Fint *, MPI_Fint *);
	bool nomem = false;
	MPI_Datatype *cst = tgf_f_nbr_types(st, comm, true, &nomem),
		     *crt = tgf_f_nbr_types(rt, comm, false, &nomem);
	MPI_Request q;
	int ret;

	if (nomem) {
		*ierr = tgf_fail(C_COMM(comm), -FI_ENOMEM);
	} else if (tgf_ineighbor_alltoallw_try(B(s), sc, sd, cst, B(r), rc, rd,
					       crt, C_COMM(comm), &q, &ret)) {
		*ierr = ret;
		if (ret == MPI_SUCCESS)
			*req = PMPI_Request_c2f(q);
	} else {
		if (!next)
			*(void **)&next =
				dlsym(RTLD_NEXT, "mpi_ineighbor_alltoallw_");
		*ierr = MPI_ERR_INTERN;
		if (next)
			next(s, sc, sd, st, r, rc, rd, rt, comm, req, ierr);
	}
	free(cst);
	free(crt);
}

/* Point to point: the buffers T-NBC may guard open first (the C
 * wrappers do it), which Open MPI's own Fortran bindings, calling PMPI_*,
 * would skip. */
TGF_FORTRAN(send, MPI_SEND,
	    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest,
	     MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *ierr))
{
	*ierr = MPI_Send(B(buf), *count, C_TYPE(type), *dest, *tag,
			 C_COMM(comm));
}

TGF_FORTRAN(isend, MPI_ISEND,
	    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *dest,
	     MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request r = MPI_REQUEST_NULL;

	*ierr = MPI_Isend(B(buf), *count, C_TYPE(type), *dest, *tag,
			  C_COMM(comm), &r);
	*req = PMPI_Request_c2f(r);
}

TGF_FORTRAN(recv, MPI_RECV,
	    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *src,
	     MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr))
{
	MPI_Status st;

	*ierr = MPI_Recv(B(buf), *count, C_TYPE(type), *src, *tag, C_COMM(comm),
			 &st);
	if (*ierr == MPI_SUCCESS && status != MPI_F_STATUS_IGNORE)
		PMPI_Status_c2f(&st, status);
}

TGF_FORTRAN(irecv, MPI_IRECV,
	    (void *buf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *src,
	     MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr))
{
	MPI_Request r = MPI_REQUEST_NULL;

	*ierr = MPI_Irecv(B(buf), *count, C_TYPE(type), *src, *tag,
			  C_COMM(comm), &r);
	*req = PMPI_Request_c2f(r);
}

#endif /* !TGF_MPICH */
