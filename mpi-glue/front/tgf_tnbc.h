/* SPDX-License-Identifier: BSD-2-Clause */
/* T-NBC's front-end (tgf_tnbc.c) and the helpers it shares with the
 * collective wrappers. */
#ifndef TGF_TNBC_H
#define TGF_TNBC_H

#include <rdma/fi_errno.h>

#include "tgf.h"

/* tgf_coll.c: the communicator's error handler for a negative fi_errno,
 * and a blocking call's wait. */
int tgf_fail(MPI_Comm comm, int err);
struct tgf_stage;
int tgf_finish(MPI_Comm comm, struct tg_req *r, struct tgf_stage *st);

/* Opens what T-NBC guards in count elements of dt at buf (MPI_IN_PLACE,
 * MPI_BOTTOM and NULL: nothing), or in n such blocks at displs. */
void tgf_open(const void *buf, MPI_Aint count, MPI_Datatype dt);
void tgf_open_v(const void *buf, const int *counts, const int *displs,
		MPI_Datatype dt, int n);
/* As tgf_open_v for alltoallw's blocks: displacements in bytes, a type
 * each. */
void tgf_open_w(const void *buf, const int *counts, const int *displs,
		const MPI_Datatype *types, int n);

/* A blocking alltoall(v) by T-NBC: byte counts and displacements, as
 * tg_tnbc_alltoallv; an MPI return code. */
int tgf_tnbc_run(MPI_Comm comm, struct tg_comm *tc, enum tg_fn fn,
		 const void *site, const void *sbuf, const size_t *sc,
		 const size_t *sd, void *rbuf, const size_t *rc,
		 const size_t *rd);
/* whole: the receive buffer (buf, rbuf) is a stage, to be unpacked on
 * return: the call returns once all of it is in. */
int tgf_tnbc_bcast(MPI_Comm comm, struct tg_comm *tc, const void *site,
		   void *buf, size_t bytes, int root, bool whole);
int tgf_tnbc_alltoall(MPI_Comm comm, struct tg_comm *tc, const void *site,
		      const void *sbuf, void *rbuf, size_t bytes, bool whole);
/* Set by a Fortran entry point to its caller, for T-NBC's trace (the
 * call site of the program, not of the glue's shim). */
extern _Thread_local const void *tgf_f_site;

#endif /* TGF_TNBC_H */
