/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * MPICH's mpi_f08 entry points that bypass the C calls.
 *
 * MPICH 4.0's mpi_f08 bindings with a buffer (mpi_*_f08ts_) call the C
 * MPI_* functions, which the glue wraps; those without one
 * (mpi_init_f08_, mpi_finalize_f08_, mpi_barrier_f08_, the
 * communicator constructors) call PMPI_* directly.  Without these a
 * `use mpi_f08` program never starts the glue, and every call falls
 * back; a communicator made behind its back would too.
 *
 * They take MPICH's f08 arguments: each handle a pointer to its integer
 * (an MPICH handle is that integer), LOGICALs as Fortran ones, and an
 * optional ierror, NULL when the caller left it out.  Where the
 * arguments need converting (LOGICAL arrays, the weights' sentinels)
 * MPICH's own binding runs, and the glue then names the child.
 *
 * Open MPI's mpi_f08 bindings of those constructors bypass the C calls
 * too, by another road (below); the rest reach tgf_fortran.c.
 */
#include <dlfcn.h>

#include "tgf.h"

static void tgf_f08_ret(MPI_Fint *ierr, int rc)
{
	if (ierr)
		*ierr = rc;
}

/* An entry point, declared for -Wmissing-prototypes. */
#define TGF_F08(name, params)                                                  \
	void name params;                                                      \
	void name params

/* The MPI's own binding of NAME, called with ierror set, then the child
 * named on success by MADE (tgf_comm_made or its graph form). */
#define TGF_F08_NEXT(name, proto, args, comm, newcomm, ierr, made)             \
	do {                                                                   \
		static void(*next_) proto;                                     \
		MPI_Fint rc_ = MPI_ERR_INTERN;                                 \
		if (!next_)                                                    \
			*(void **)&next_ = dlsym(RTLD_NEXT, #name);            \
		if (next_)                                                     \
			next_ args;                                            \
		if (rc_ == MPI_SUCCESS)                                        \
			made(PMPI_Comm_f2c(*(comm)),                           \
			     PMPI_Comm_f2c(*(newcomm)));                       \
		tgf_f08_ret(ierr, rc_);                                        \
	} while (0)

#if TGF_MPICH

_Static_assert(sizeof(MPI_Comm) == sizeof(MPI_Fint) &&
		       sizeof(MPI_Request) == sizeof(MPI_Fint) &&
		       sizeof(MPI_Group) == sizeof(MPI_Fint) &&
		       sizeof(MPI_Info) == sizeof(MPI_Fint),
	       "an MPICH handle is not a Fortran integer");

TGF_F08(mpi_init_f08_, (MPI_Fint * ierr))
{
	tgf_f08_ret(ierr, MPI_Init(NULL, NULL));
}

TGF_F08(mpi_init_thread_f08_,
	(MPI_Fint * required, MPI_Fint *provided, MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Init_thread(NULL, NULL, *required, provided));
}

TGF_F08(mpi_finalize_f08_, (MPI_Fint * ierr))
{
	tgf_f08_ret(ierr, MPI_Finalize());
}

TGF_F08(mpi_barrier_f08_, (MPI_Comm * comm, MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Barrier(*comm));
}

TGF_F08(mpi_ibarrier_f08_, (MPI_Comm * comm, MPI_Request *req, MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Ibarrier(*comm, req));
}

/* A persistent collective made by a binding with a buffer (which calls
 * the C init) and freed by this one: the glue drops its record. */
TGF_F08(mpi_request_free_f08_, (MPI_Request * req, MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Request_free(req));
}

TGF_F08(mpi_comm_dup_f08_, (MPI_Comm * comm, MPI_Comm *newcomm, MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Comm_dup(*comm, newcomm));
}

TGF_F08(mpi_comm_dup_with_info_f08_,
	(MPI_Comm * comm, MPI_Info *info, MPI_Comm *newcomm, MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Comm_dup_with_info(*comm, *info, newcomm));
}

TGF_F08(mpi_comm_idup_f08_,
	(MPI_Comm * comm, MPI_Comm *newcomm, MPI_Request *req, MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Comm_idup(*comm, newcomm, req));
}

TGF_F08(mpi_comm_split_f08_, (MPI_Comm * comm, MPI_Fint *color, MPI_Fint *key,
			      MPI_Comm *newcomm, MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Comm_split(*comm, *color, *key, newcomm));
}

void mpi_comm_split_type_f08_(MPI_Comm *comm, MPI_Fint *type, MPI_Fint *key,
			      MPI_Info *info, MPI_Comm *newcomm,
			      MPI_Fint *ierr);
void mpi_comm_split_type_f08_(MPI_Comm *comm, MPI_Fint *type, MPI_Fint *key,
			      MPI_Info *info, MPI_Comm *newcomm, MPI_Fint *ierr)
{
	tgf_f08_ret(ierr,
		    MPI_Comm_split_type(*comm, *type, *key, *info, newcomm));
}

TGF_F08(mpi_comm_create_f08_,
	(MPI_Comm * comm, MPI_Group *group, MPI_Comm *newcomm, MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Comm_create(*comm, *group, newcomm));
}

TGF_F08(mpi_comm_create_group_f08_,
	(MPI_Comm * comm, MPI_Group *group, MPI_Fint *tag, MPI_Comm *newcomm,
	 MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Comm_create_group(*comm, *group, *tag, newcomm));
}

#if MPI_VERSION >= 4
TGF_F08(mpi_comm_idup_with_info_f08_,
	(MPI_Comm * comm, MPI_Info *info, MPI_Comm *newcomm, MPI_Request *req,
	 MPI_Fint *ierr))
{
	tgf_f08_ret(ierr, MPI_Comm_idup_with_info(*comm, *info, newcomm, req));
}

/* A Fortran string tag, its length passed after the arguments: MPICH's
 * binding converts it, and the child is named from it trimmed of its
 * trailing blanks, as the binding trims it. */
TGF_F08(mpi_comm_create_from_group_f08_,
	(MPI_Group * group, const char *tag, MPI_Info *info,
	 MPI_Errhandler *errhandler, MPI_Comm *newcomm, MPI_Fint *ierr,
	 size_t len))
{
	static void (*next)(MPI_Group *, const char *, MPI_Info *,
			    MPI_Errhandler *, MPI_Comm *, MPI_Fint *, size_t);
	MPI_Fint rc = MPI_ERR_INTERN;

	if (!next)
		*(void **)&next =
			dlsym(RTLD_NEXT, "mpi_comm_create_from_group_f08_");
	if (next)
		next(group, tag, info, errhandler, newcomm, &rc, len);
	while (len && tag[len - 1] == ' ')
		len--;
	if (rc == MPI_SUCCESS)
		tgf_comm_made_from_group(tag, len, PMPI_Comm_f2c(*newcomm));
	tgf_f08_ret(ierr, rc);
}
#endif

#endif /* TGF_MPICH */

/*
 * Both MPIs: constructors with LOGICALs or the weights' sentinels, which
 * the MPI's own binding converts.  Open MPI's mpi_f08 bindings of these
 * call its mpif.h PMPI layer (pmpi_cart_create_ and the like), not the
 * ompi_*_f functions tgf_fortran.c takes over.  A handle is a Fortran
 * integer under both (an f08 handle's one component).
 */
TGF_F08(mpi_cart_create_f08_,
	(MPI_Fint * comm, MPI_Fint *ndims, MPI_Fint *dims, MPI_Fint *periods,
	 MPI_Fint *reorder, MPI_Fint *newcomm, MPI_Fint *ierr))
{
	TGF_F08_NEXT(mpi_cart_create_f08_,
		     (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
		      MPI_Fint *, MPI_Fint *, MPI_Fint *),
		     (comm, ndims, dims, periods, reorder, newcomm, &rc_), comm,
		     newcomm, ierr, tgf_comm_made);
}

TGF_F08(mpi_cart_sub_f08_,
	(MPI_Fint * comm, MPI_Fint *remain, MPI_Fint *newcomm, MPI_Fint *ierr))
{
	TGF_F08_NEXT(mpi_cart_sub_f08_,
		     (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *),
		     (comm, remain, newcomm, &rc_), comm, newcomm, ierr,
		     tgf_comm_made);
}

TGF_F08(mpi_graph_create_f08_,
	(MPI_Fint * comm, MPI_Fint *nnodes, MPI_Fint *index, MPI_Fint *edges,
	 MPI_Fint *reorder, MPI_Fint *newcomm, MPI_Fint *ierr))
{
	TGF_F08_NEXT(mpi_graph_create_f08_,
		     (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
		      MPI_Fint *, MPI_Fint *, MPI_Fint *),
		     (comm, nnodes, index, edges, reorder, newcomm, &rc_), comm,
		     newcomm, ierr, tgf_comm_made_graph);
}

TGF_F08(mpi_dist_graph_create_f08_,
	(MPI_Fint * comm, MPI_Fint *n, MPI_Fint *sources, MPI_Fint *degrees,
	 MPI_Fint *dests, MPI_Fint *weights, MPI_Fint *info, MPI_Fint *reorder,
	 MPI_Fint *newcomm, MPI_Fint *ierr))
{
	TGF_F08_NEXT(mpi_dist_graph_create_f08_,
		     (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
		      MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
		      MPI_Fint *, MPI_Fint *),
		     (comm, n, sources, degrees, dests, weights, info, reorder,
		      newcomm, &rc_),
		     comm, newcomm, ierr, tgf_comm_made_graph);
}

TGF_F08(mpi_dist_graph_create_adjacent_f08_,
	(MPI_Fint * comm, MPI_Fint *indegree, MPI_Fint *sources,
	 MPI_Fint *sourceweights, MPI_Fint *outdegree, MPI_Fint *dests,
	 MPI_Fint *destweights, MPI_Fint *info, MPI_Fint *reorder,
	 MPI_Fint *newcomm, MPI_Fint *ierr))
{
	TGF_F08_NEXT(mpi_dist_graph_create_adjacent_f08_,
		     (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
		      MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
		      MPI_Fint *, MPI_Fint *, MPI_Fint *),
		     (comm, indegree, sources, sourceweights, outdegree, dests,
		      destweights, info, reorder, newcomm, &rc_),
		     comm, newcomm, ierr, tgf_comm_made_graph);
}

/* Its merge has a LOGICAL; both MPIs' bindings call PMPI_. */
static void tgf_f08_merged(MPI_Comm parent, MPI_Comm newcomm)
{
	(void)parent;
	tgf_comm_made_merge(newcomm);
}

TGF_F08(mpi_intercomm_merge_f08_,
	(MPI_Fint * comm, MPI_Fint *high, MPI_Fint *newcomm, MPI_Fint *ierr))
{
	TGF_F08_NEXT(mpi_intercomm_merge_f08_,
		     (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *),
		     (comm, high, newcomm, &rc_), comm, newcomm, ierr,
		     tgf_f08_merged);
}
