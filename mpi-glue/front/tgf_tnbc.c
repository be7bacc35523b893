/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * T-NBC in the front-end (tnbc-mpi(7), "T-NBC"): the blocking alltoall
 * and alltoallv that return early, and the wrappers that open what T-NBC
 * guards before a buffer goes to the MPI.
 *
 * The kernel does not fault on a protected page, it fails (EFAULT): a
 * peer's single-copy read, a socket send, a registration.  So every MPI
 * call that takes a buffer opens the guarded ranges the buffer overlaps
 * first, waiting for their data.  With nothing guarded that costs one
 * load.
 */
#include <stdlib.h>

#include "tgf_tnbc.h"

/* [lo, hi) of count elements of dt at buf: the bytes the MPI may touch. */
static bool tgf_span(const void *buf, MPI_Aint count, MPI_Datatype dt,
		     const char **lo, size_t *len)
{
	MPI_Aint tlb, textent, lb, extent;

	if (!buf || buf == MPI_IN_PLACE || buf == MPI_BOTTOM || count <= 0 ||
	    dt == MPI_DATATYPE_NULL ||
	    PMPI_Type_get_true_extent(dt, &tlb, &textent) != MPI_SUCCESS ||
	    PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS)
		return false;
	if (extent < 0 || textent <= 0)
		return false;
	*lo = (const char *)buf + tlb;
	*len = (size_t)((count - 1) * extent + textent);
	return true;
}

void tgf_open(const void *buf, MPI_Aint count, MPI_Datatype dt)
{
	const char *lo;
	size_t len;

	if (tg_tnbc_guarding() && tgf_span(buf, count, dt, &lo, &len))
		tg_tnbc_open(lo, len);
}

void tgf_open_v(const void *buf, const int *counts, const int *displs,
		MPI_Datatype dt, int n)
{
	MPI_Aint lb, extent;

	if (!tg_tnbc_guarding() || !buf || buf == MPI_IN_PLACE || !counts ||
	    n <= 0 || PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS)
		return;
	for (int i = 0; i < n; i++)
		tgf_open((const char *)buf + (displs ? displs[i] : 0) * extent,
			 counts[i], dt);
}

void tgf_open_w(const void *buf, const int *counts, const int *displs,
		const MPI_Datatype *types, int n)
{
	if (!tg_tnbc_guarding() || !buf || buf == MPI_IN_PLACE || !counts ||
	    !displs || !types)
		return;
	for (int i = 0; i < n; i++)
		if (counts[i] > 0)
			tgf_open((const char *)buf + displs[i], counts[i],
				 types[i]);
}

/* ------------------------------------------------------------------ */
/* The calls T-NBC takes                                                */

_Thread_local const void *tgf_f_site;

/* The program's call: a Fortran entry point's caller when one set it,
 * else the C wrapper's. */
static const void *tgf_site(const void *c_site)
{
	const void *f = tgf_f_site;

	tgf_f_site = NULL;
	return f ? f : c_site;
}

/* A call whose buffer is a stage (tgf_stage.c) returns only once all
 * of it is in, to be unpacked: it is opened, waiting for the data. */
static int tgf_tnbc_end(MPI_Comm comm, struct tg_comm *tc, enum tg_fn fn,
			bool early, void *whole, size_t len)
{
	int err;

	if (whole)
		tg_tnbc_open(whole, len);
	else if (early)
		tg_count_early(fn);
	/* a post that failed midway: the call fails */
	err = tg_tnbc_error(tc);
	return err ? tgf_fail(comm, err) : MPI_SUCCESS;
}

static int tgf_tnbc_run_to(MPI_Comm comm, struct tg_comm *tc, enum tg_fn fn,
			   const void *site, const void *sbuf, const size_t *sc,
			   const size_t *sd, void *rbuf, const size_t *rc,
			   const size_t *rd, size_t whole)
{
	bool early = false;
	int err = tg_tnbc_error(tc), ret;

	/* a call that returned early and failed later fails the next */
	if (err)
		return tgf_fail(comm, err);
	ret = tg_tnbc_alltoallv(tc, fn, tgf_site(site), sbuf, sc, sd, rbuf, rc,
				rd, &early);
	if (ret) {
		/* nothing posted here (T-NBC failed, or left this call to
		 * the plain way: TG_TNBC_PLAIN), while the others expect
		 * these very messages: the glue's plain alltoallv sends them */
		struct tg_req *r = tg_req_new(NULL);

		if (!r)
			return tgf_fail(comm, -FI_ENOMEM);
		ret = tg_alltoallv(tc, sbuf, sc, sd, rbuf, rc, rd, true, r);
		if (ret) {
			tg_req_free(r);
			return tgf_fail(comm, ret);
		}
		tg_count(fn, true, 0);
		return tgf_finish(comm, r, NULL);
	}
	tg_count(fn, true, 0);
	return tgf_tnbc_end(comm, tc, fn, early, whole ? rbuf : NULL, whole);
}

int tgf_tnbc_run(MPI_Comm comm, struct tg_comm *tc, enum tg_fn fn,
		 const void *site, const void *sbuf, const size_t *sc,
		 const size_t *sd, void *rbuf, const size_t *rc,
		 const size_t *rd)
{
	return tgf_tnbc_run_to(comm, tc, fn, site, sbuf, sc, sd, rbuf, rc, rd,
			       0);
}

int tgf_tnbc_bcast(MPI_Comm comm, struct tg_comm *tc, const void *site,
		   void *buf, size_t bytes, int root, bool whole)
{
	bool early = false;
	int err = tg_tnbc_error(tc), ret;

	if (err)
		return tgf_fail(comm, err);
	ret = tg_tnbc_bcast(tc, tgf_site(site), buf, bytes, root,
			    tg_policy_tnbc_piece(), &early);
	if (ret) {
		/* nothing posted here: the pieces the others expect come
		 * through the core's plain messages only with T-NBC, so
		 * the call fails */
		return tgf_fail(comm, ret);
	}
	tg_count(TG_BCAST, true, 0);
	return tgf_tnbc_end(comm, tc, TG_BCAST, early, whole ? buf : NULL,
			    bytes);
}

int tgf_tnbc_alltoall(MPI_Comm comm, struct tg_comm *tc, const void *site,
		      const void *sbuf, void *rbuf, size_t bytes, bool whole)
{
	int n = tg_comm_size(tc), rc;
	size_t *a = malloc(2 * (size_t)n * sizeof(*a));

	if (!a)
		return tgf_fail(comm, -FI_ENOMEM);
	/* every count the same, displacements in rank order */
	for (int i = 0; i < n; i++) {
		a[i] = bytes;
		a[n + i] = (size_t)i * bytes;
	}
	rc = tgf_tnbc_run_to(comm, tc, TG_ALLTOALL, site, sbuf, a, a + n, rbuf,
			     a, a + n, whole ? bytes * (size_t)n : 0);
	free(a);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Calls that take a buffer: open it first                              */

/* The sends: one buffer, opened first; the blocking four and their
 * non-blocking forms. */
#define TGF_SEND(NAME)                                                         \
	int NAME(const void *buf, int count, MPI_Datatype dt, int dest,        \
		 int tag, MPI_Comm comm)                                       \
	{                                                                      \
		tgf_open(buf, count, dt);                                      \
		return P##NAME(buf, count, dt, dest, tag, comm);               \
	}
#define TGF_ISEND(NAME)                                                        \
	int NAME(const void *buf, int count, MPI_Datatype dt, int dest,        \
		 int tag, MPI_Comm comm, MPI_Request *req)                     \
	{                                                                      \
		tgf_open(buf, count, dt);                                      \
		return P##NAME(buf, count, dt, dest, tag, comm, req);          \
	}

TGF_SEND(MPI_Send)
TGF_SEND(MPI_Ssend)
TGF_SEND(MPI_Bsend)
TGF_SEND(MPI_Rsend)
TGF_ISEND(MPI_Isend)
TGF_ISEND(MPI_Issend)
TGF_ISEND(MPI_Ibsend)
TGF_ISEND(MPI_Irsend)

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int src, int tag,
	     MPI_Comm comm, MPI_Status *st)
{
	tgf_open(buf, count, dt);
	return PMPI_Recv(buf, count, dt, src, tag, comm, st);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int src, int tag,
	      MPI_Comm comm, MPI_Request *req)
{
	tgf_open(buf, count, dt);
	return PMPI_Irecv(buf, count, dt, src, tag, comm, req);
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest,
		 int stag, void *rbuf, int rcount, MPI_Datatype rtype, int src,
		 int rtag, MPI_Comm comm, MPI_Status *st)
{
	tgf_open(sbuf, scount, stype);
	tgf_open(rbuf, rcount, rtype);
	return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount,
			     rtype, src, rtag, comm, st);
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest,
			 int stag, int src, int rtag, MPI_Comm comm,
			 MPI_Status *st)
{
	tgf_open(buf, count, dt);
	return PMPI_Sendrecv_replace(buf, count, dt, dest, stag, src, rtag,
				     comm, st);
}

int MPI_Put(const void *obuf, int ocount, MPI_Datatype otype, int target,
	    MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Win win)
{
	tgf_open(obuf, ocount, otype);
	return PMPI_Put(obuf, ocount, otype, target, disp, tcount, ttype, win);
}

int MPI_Get(void *obuf, int ocount, MPI_Datatype otype, int target,
	    MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Win win)
{
	tgf_open(obuf, ocount, otype);
	return PMPI_Get(obuf, ocount, otype, target, disp, tcount, ttype, win);
}

int MPI_Accumulate(const void *obuf, int ocount, MPI_Datatype otype, int target,
		   MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Op op,
		   MPI_Win win)
{
	tgf_open(obuf, ocount, otype);
	return PMPI_Accumulate(obuf, ocount, otype, target, disp, tcount, ttype,
			       op, win);
}

int MPI_Get_accumulate(const void *obuf, int ocount, MPI_Datatype otype,
		       void *rbuf, int rcount, MPI_Datatype rtype, int target,
		       MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Op op,
		       MPI_Win win)
{
	tgf_open(obuf, ocount, otype);
	tgf_open(rbuf, rcount, rtype);
	return PMPI_Get_accumulate(obuf, ocount, otype, rbuf, rcount, rtype,
				   target, disp, tcount, ttype, op, win);
}

int MPI_Rput(const void *obuf, int ocount, MPI_Datatype otype, int target,
	     MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Win win,
	     MPI_Request *req)
{
	tgf_open(obuf, ocount, otype);
	return PMPI_Rput(obuf, ocount, otype, target, disp, tcount, ttype, win,
			 req);
}

int MPI_Rget(void *obuf, int ocount, MPI_Datatype otype, int target,
	     MPI_Aint disp, int tcount, MPI_Datatype ttype, MPI_Win win,
	     MPI_Request *req)
{
	tgf_open(obuf, ocount, otype);
	return PMPI_Rget(obuf, ocount, otype, target, disp, tcount, ttype, win,
			 req);
}

/* MPI-IO: one buffer, opened first. */
#define TGF_FILE_IO(NAME, CONST)                                               \
	int NAME(MPI_File fh, CONST void *buf, int count, MPI_Datatype dt,     \
		 MPI_Status *st)                                               \
	{                                                                      \
		tgf_open(buf, count, dt);                                      \
		return P##NAME(fh, buf, count, dt, st);                        \
	}
#define TGF_FILE_IO_AT(NAME, CONST)                                            \
	int NAME(MPI_File fh, MPI_Offset off, CONST void *buf, int count,      \
		 MPI_Datatype dt, MPI_Status *st)                              \
	{                                                                      \
		tgf_open(buf, count, dt);                                      \
		return P##NAME(fh, off, buf, count, dt, st);                   \
	}

TGF_FILE_IO(MPI_File_write, const)
TGF_FILE_IO(MPI_File_write_all, const)
TGF_FILE_IO(MPI_File_read, )
TGF_FILE_IO(MPI_File_read_all, )
TGF_FILE_IO_AT(MPI_File_write_at, const)
TGF_FILE_IO_AT(MPI_File_write_at_all, const)
TGF_FILE_IO_AT(MPI_File_read_at, )
TGF_FILE_IO_AT(MPI_File_read_at_all, )
