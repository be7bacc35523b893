/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Core completions as MPI requests: generalized requests, completed on
 * an application thread once the core has marked them.
 *
 * - MPICH: MPIX_Grequest_start's poll function, which MPICH's progress
 *   calls from every completion call, reads the mark.
 * - Open MPI 4.1 has no public poll hook (ompi_grequestx_start is not
 *   exported before 5.0), but what it does is register a progress
 *   callback, and opal_progress_register is exported by libopen-pal.  The
 *   callback reads the core's completion queue, and the core's done
 *   function completes each request it marks.
 *
 * Either way the engine thread never calls MPI, and every completion call
 * (Wait, Test, the any/some/all forms, Request_free), mixed with the
 * MPI's own requests, works on them as on any request.
 */
#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>

#include "tgf_req.h"
#include "tgf_stage.h"

struct tgf_nb {
	struct tg_req *r;
	MPI_Request mreq;
	struct tgf_stage *st; /* unpacked on completion */
	bool unpack_failed;
	int err; /* an MPI error class the call found while posting */
	atomic_bool completed; /* MPI_Grequest_complete was called */
};

static atomic_int tgf_outstanding;

static void tgf_nb_complete(struct tgf_nb *nb)
{
	bool was = false;

	if (!atomic_compare_exchange_strong(&nb->completed, &was, true))
		return;
	/* the data lands in the program's own buffer before the request
	 * completes, on this application thread */
	nb->unpack_failed = !tgf_stage_end(nb->st, !tg_req_err(nb->r));
	nb->st = NULL;
	/* The last one: the application stops polling the glue's domain,
	 * and sends of this operation still queued there (a member that
	 * finished first may owe the others its last pieces) must not wait
	 * for the end of the engine's nap. */
	if (atomic_fetch_sub(&tgf_outstanding, 1) == 1)
		tg_handoff(TG_HANDOFF_LAST);
	/* nb may be freed by another thread as soon as this returns */
	PMPI_Grequest_complete(nb->mreq);
}

static int tgf_query(void *state, MPI_Status *status)
{
	struct tgf_nb *nb = state;

	PMPI_Status_set_elements(status, MPI_BYTE, 0);
	PMPI_Status_set_cancelled(status, 0);
	status->MPI_SOURCE = MPI_UNDEFINED;
	status->MPI_TAG = MPI_UNDEFINED;
	if (nb->err)
		return nb->err;
	return tg_req_err(nb->r) || nb->unpack_failed ? MPI_ERR_OTHER
						      : MPI_SUCCESS;
}

static int tgf_free(void *state)
{
	struct tgf_nb *nb = state;

	tg_req_free(nb->r);
	free(nb);
	return MPI_SUCCESS;
}

/* A collective cannot be withdrawn: it completes as if not cancelled. */
static int tgf_cancel(void *state, int complete)
{
	(void)state;
	(void)complete;
	return MPI_SUCCESS;
}

#if TGF_MPICH
/* MPICH 4.0 exports no progress call; an MPI_Iprobe that matches nothing
 * runs one pass of it.  The communicator is the glue's own, on which
 * nothing is ever sent. */
static MPI_Comm tgf_probe_comm = MPI_COMM_NULL;

static void tgf_mpi_progress(void)
{
	int flag;

	if (tgf_probe_comm != MPI_COMM_NULL)
		PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, tgf_probe_comm, &flag,
			    MPI_STATUS_IGNORE);
}

/* MPICH's MPI_Wait on a request with a poll function calls only that
 * function, and MPI_Waitall calls the wait function before it looks at
 * the other requests: neither runs MPICH's own progress, which the
 * glue's request may wait on (tg_set_idle_fn).  MPICH lets go of its
 * lock around both, so they may call it. */
static int tgf_poll(void *state, MPI_Status *status)
{
	struct tgf_nb *nb = state;

	(void)status;
	tg_poll();
	if (tg_req_done(nb->r))
		tgf_nb_complete(nb);
	else {
		tgf_mpi_progress();
		/* MPICH's wait loop never yields: on a host with fewer cores
		 * than ranks the engine that does the work would wait for a
		 * time slice (12 ms per call at 5 ranks on 2 cores) */
		sched_yield();
	}
	return MPI_SUCCESS;
}

static int tgf_wait(int count, void **states, double timeout,
		    MPI_Status *status)
{
	(void)timeout;
	(void)status;
	for (int i = 0; i < count; i++) {
		struct tgf_nb *nb = states[i];

		tg_req_wait(nb->r);
		tgf_nb_complete(nb);
	}
	return MPI_SUCCESS;
}

/* No done function: the poll function completes a request, and its
 * owner frees it from MPI_Wait (tgf_wait) without a poll, so a list of
 * requests to tell could outlive them. */
int tgf_req_init(void)
{
	/* collective: every rank gets here, or none (tgf_start) */
	if (PMPI_Comm_dup(MPI_COMM_WORLD, &tgf_probe_comm) == MPI_SUCCESS)
		PMPI_Comm_set_errhandler(tgf_probe_comm, MPI_ERRORS_RETURN);
	else
		tgf_probe_comm = MPI_COMM_NULL;
	tg_set_idle_fn(tgf_mpi_progress);
	return 0;
}

void tgf_req_fini(void)
{
	tg_set_idle_fn(NULL);
	if (tgf_probe_comm != MPI_COMM_NULL)
		PMPI_Comm_free(&tgf_probe_comm);
}
#else
typedef int (*tgf_opal_cb)(void);
static int (*tgf_unregister)(tgf_opal_cb);
static int (*tgf_opal_progress)(void);

static void tgf_mpi_progress(void)
{
	if (tgf_opal_progress)
		tgf_opal_progress();
}

static void tgf_done(struct tg_req *r, void *owner)
{
	(void)r;
	if (owner)
		tgf_nb_complete(owner);
}

/*
 * On every opal_progress pass.  Open MPI's ranks poll without yielding
 * unless the host is oversubscribed as it counts, and it does not count
 * the provider's engine threads: where the ranks take every core, an
 * engine woken for work a rank left it (the last pieces of a collective
 * the rank has finished with) runs behind that rank's spinning in
 * MPI_Wait or Open MPI's own barrier only at the next scheduler tick (4
 * ms stalls in 1 % of OSU-style iterations at 2 ranks on 2 cores).  So
 * a pass that finds nothing of the glue's gives the core away while the
 * engine has work: a request of the glue waits, or one just completed
 * left work behind.
 */
static int tgf_progress(void)
{
	int n;

	if (!atomic_load_explicit(&tgf_outstanding, memory_order_relaxed)) {
		if (tg_engine_owed())
			sched_yield();
		return 0;
	}
	n = tg_poll();
	if (!n)
		sched_yield();
	return n;
}

int tgf_req_init(void)
{
	int (*reg)(tgf_opal_cb) = (int (*)(tgf_opal_cb))dlsym(
		RTLD_DEFAULT, "opal_progress_register");

	tgf_unregister = (int (*)(tgf_opal_cb))dlsym(
		RTLD_DEFAULT, "opal_progress_unregister");
	/* a blocking call's wait runs Open MPI's progress (tg_set_idle_fn):
	 * over TCP the rest of a large send moves only from its sender's */
	tgf_opal_progress = (int (*)(void))dlsym(RTLD_DEFAULT, "opal_progress");
	tg_set_idle_fn(tgf_mpi_progress);
	tg_set_done_fn(tgf_done);
	if (!reg || reg(tgf_progress))
		return -1;
	return 0;
}

void tgf_req_fini(void)
{
	tg_set_idle_fn(NULL);
	if (tgf_unregister)
		tgf_unregister(tgf_progress);
}
#endif

struct tg_req *tgf_nb_begin(MPI_Request *request, struct tgf_stage *st)
{
	struct tgf_nb *nb = calloc(1, sizeof(*nb));
	int rc;

	if (!nb)
		return NULL;
	nb->r = tg_req_new(nb);
	if (!nb->r) {
		free(nb);
		return NULL;
	}
#if TGF_MPICH
	rc = MPIX_Grequest_start(tgf_query, tgf_free, tgf_cancel, tgf_poll,
				 tgf_wait, nb, request);
#else
	rc = PMPI_Grequest_start(tgf_query, tgf_free, tgf_cancel, nb, request);
#endif
	if (rc != MPI_SUCCESS) {
		tg_req_free(nb->r);
		free(nb);
		return NULL;
	}
	nb->mreq = *request;
	nb->st = st;
	atomic_fetch_add(&tgf_outstanding, 1);
	return nb->r;
}

void tgf_nb_error(struct tg_req *r, int err)
{
	struct tgf_nb *nb = tg_req_owner(r);

	nb->err = err;
}

void tgf_nb_abort(MPI_Request *request, struct tg_req *r)
{
	struct tgf_nb *nb;

	if (!r)
		return;
	/* nothing was posted: the stage stays the caller's */
	nb = tg_req_owner(r);
	nb->st = NULL;
	tgf_nb_complete(nb);
	PMPI_Request_free(request);
	*request = MPI_REQUEST_NULL;
}
