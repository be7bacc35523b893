/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The MPI glue's core (prefix tg_): tnbc's collectives for a message
 * passing library, knowing no MPI ABI.  It speaks of world ranks, bytes,
 * libfabric datatypes and ops; the front-ends (mpi-glue/front/) turn MPI
 * handles into these and core completions into MPI requests.
 *
 * Design and the reasons for it: docs/mpi-glue-design.md; the user's
 * reference: tnbc-mpi(7).
 *
 * Threads.  Posting takes the core's lock.  tg_poll() only tries it, so
 * that a progress callback never blocks behind a thread that posts; the
 * provider's engine moves the data in either case.  The engine never
 * enters this code: it writes completion entries, which tg_poll() turns
 * into marks on requests, on an application thread.
 */
#ifndef TG_H
#define TG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_collective.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* The process                                                          */

/* Opens the process's tnbc endpoint.  *name (*len bytes, malloc'd, the
 * caller frees) is what every world member must learn. */
int tg_open(void **name, size_t *len);
/* Inserts the world's names, world rank order (n names of len bytes);
 * my is this process's world rank. */
int tg_connect(const void *names, size_t len, int n, int my);
/* Closes everything (groups still busy are abandoned: their process is
 * ending). */
void tg_close(void);
bool tg_ready(void);
/* The engine statistics of the glue's domain: the domains of this process
 * its engine thread serves (the MPI's own on tnbc among them), and the
 * packets it moved. */
int tg_engine(uint64_t *domains, uint64_t *engine_pkts);
/* The application leaves after a non-blocking post of bytes, or its
 * last one completed (TG_HANDOFF_LAST): from TNBC_MPI_HANDOFF bytes on
 * (default: TNBC_MPI_DEFER's; off: never, but for the last) the
 * provider's engine is told at once instead of after its nap.  True when
 * work was left to the engine. */
#define TG_HANDOFF_LAST SIZE_MAX
bool tg_handoff(size_t bytes);
/* Whether work was left to the engine within the last TG_OWED_NS: a
 * thread that spins meanwhile (in the MPI's own waits) should yield. */
bool tg_engine_owed(void);
struct tg_comm;
/* Around a non-blocking post of bytes on c: from TNBC_MPI_DEFER bytes on
 * (default 8192; off: never), or TNBC_MPI_DEFER_LINK (default 0) where
 * c's messages cross a link, its first steps, copies of the payload
 * among them, are left to the engine instead of run in the posting
 * call.  c may be NULL (as if in one host). */
void tg_defer(const struct tg_comm *c, size_t bytes, bool on);
int tg_world_rank(void);
int tg_world_size(void);

/* ------------------------------------------------------------------ */
/* Requests                                                             */

struct tg_req;
/* Called by tg_poll() on the application thread, for each request that
 * completed, once; the front-end turns it into an MPI completion.  An
 * owner told this way frees its request only after being told; a
 * front-end whose owners free requests on their own sets none. */
typedef void (*tg_done_fn)(struct tg_req *req, void *owner);
void tg_set_done_fn(tg_done_fn fn);

/* Called by a wait inside an MPI call (tg_req_wait, T-NBC's) each time a
 * look finds nothing: the front-end drives its MPI's own progress there.
 * Traffic the MPI moves only from this process's calls (the rest of a
 * large send, a lock on its window) would otherwise wait on a member
 * that waits in turn for this process to join the collective.  Never
 * called with the core's lock held, nor from a fault handler. */
typedef void (*tg_idle_fn)(void);
void tg_set_idle_fn(tg_idle_fn fn);

struct tg_req *tg_req_new(void *owner);
/* 0: pending; 1: complete (err says how). */
bool tg_req_done(const struct tg_req *req);
int tg_req_err(const struct tg_req *req);
void *tg_req_owner(const struct tg_req *req);
void tg_req_set_owner(struct tg_req *req, void *owner);
/* Frees a request; one still in flight is freed when it completes. */
void tg_req_free(struct tg_req *req);
/* Waits for req (polling the completion queue, running the idle function
 * and yielding the core to the engine between looks); returns its
 * error. */
int tg_req_wait(struct tg_req *req);

/* Reads the completion queue and marks what completed.  Never blocks;
 * returns how many requests completed. */
int tg_poll(void);

/* ------------------------------------------------------------------ */
/* Communicators                                                        */

struct tg_comm;
/* A group of n world ranks, in the communicator's rank order; id names
 * it on every member (the front-end derives it from the communicator's
 * creation, see docs/mpi-glue-design.md).  Nothing is sent: the group
 * is joined at its first collective. */
struct tg_comm *tg_comm_new(uint32_t id, const int *world_ranks, int n);
/* Frees the group; one with operations in flight is closed once they
 * complete. */
void tg_comm_free(struct tg_comm *c);
int tg_comm_size(const struct tg_comm *c);
int tg_comm_rank(const struct tg_comm *c);
/* The id of the k-th communicator created from c (k counts from 0). */
uint32_t tg_comm_child_id(uint32_t parent, uint32_t k);

/* ------------------------------------------------------------------ */
/* Collectives                                                          */

/*
 * Every call posts and returns: req completes once the result is in
 * place.  Counts are elements of dt, and for the data movers (dt
 * FI_UINT8) bytes; slices are one member's.  Roots are ranks of c.
 * Buffers follow fi_collective(3): send buffers are only read.  An
 * in-place call passes sbuf == NULL where MPI says MPI_IN_PLACE; the
 * core then copies what it must keep (the provider never reads a
 * buffer it writes).  Returns 0 or a negative fi_errno, in which case
 * nothing was posted and the caller falls back.
 */
int tg_barrier(struct tg_comm *c, struct tg_req *req);
int tg_bcast(struct tg_comm *c, void *buf, size_t bytes, int root,
	     struct tg_req *req);
int tg_allreduce(struct tg_comm *c, const void *sbuf, void *rbuf, size_t count,
		 enum fi_datatype dt, enum fi_op op, struct tg_req *req);
int tg_reduce(struct tg_comm *c, const void *sbuf, void *rbuf, size_t count,
	      enum fi_datatype dt, enum fi_op op, int root, struct tg_req *req);
int tg_reduce_scatter_block(struct tg_comm *c, const void *sbuf, void *rbuf,
			    size_t count, enum fi_datatype dt, enum fi_op op,
			    struct tg_req *req);
/* counts: elements per member, which may differ (sbuf, or rbuf in place,
 * holds them one after another). */
int tg_reduce_scatter(struct tg_comm *c, const void *sbuf, void *rbuf,
		      const int *counts, enum fi_datatype dt, enum fi_op op,
		      struct tg_req *req);
int tg_allgather(struct tg_comm *c, const void *sbuf, void *rbuf, size_t bytes,
		 struct tg_req *req);
int tg_alltoall(struct tg_comm *c, const void *sbuf, void *rbuf, size_t bytes,
		struct tg_req *req);
/* Byte counts and displacements, one per member.  cut: each message in
 * the three pieces T-NBC's calls send (every member must pass the same:
 * where T-NBC is named for the call, blocking). */
int tg_alltoallv(struct tg_comm *c, const void *sbuf, const size_t *scounts,
		 const size_t *sdispls, void *rbuf, const size_t *rcounts,
		 const size_t *rdispls, bool cut, struct tg_req *req);
/*
 * T-NBC (seed 000, tnbc-mpi(7)): the blocking alltoallv above, returning
 * before its data has arrived where it can.  The pages of rbuf the
 * messages cover completely stay PROT_NONE until their data has landed
 * (a touch waits for it); the call waits only for messages that land on
 * other pages.  The send data is copied: sbuf is free on return.  Same
 * messages as tg_alltoallv with cut: members may mix the two.  *early: some
 * data had not arrived on return.  Returns 0, or a negative fi_errno with
 * nothing posted (the caller falls back), or TG_TNBC_PLAIN with nothing
 * posted: T-NBC, tried at this site against the plain way, was no better
 * there or is being tried (TNBC_MPI_TNBC_ADAPT, tg_adapt.h); the caller
 * sends it by tg_alltoallv.  fn (an enum tg_fn) and site (the program's
 * call: an address in its code) name the call in T-NBC's trace of the
 * order a program reads its messages in (TNBC_MPI_TNBC_TRACE and
 * TNBC_MPI_TNBC_ORDER), and in that trial.
 */
#define TG_TNBC_PLAIN 1
int tg_tnbc_alltoallv(struct tg_comm *c, int fn, const void *site,
		      const void *sbuf, const size_t *scounts,
		      const size_t *sdispls, void *rbuf, const size_t *rcounts,
		      const size_t *rdispls, bool *early);
/* The broadcast by T-NBC: bytes of buf from member root, cut into
 * pieces of piece bytes (by offset: the same on every member) that
 * travel down a binomial tree; a member's pages guarded as above, or,
 * the plain way (see above), none: the call waits for all of them. */
int tg_tnbc_bcast(struct tg_comm *c, const void *site, void *buf, size_t bytes,
		  int root, size_t piece, bool *early);
/* A T-NBC call on c that returned early and failed afterwards: its
 * error, once (0: none), for the communicator's error handler. */
int tg_tnbc_error(struct tg_comm *c);
/* Before a buffer goes to the MPI or the kernel: opens what T-NBC
 * guards in it, waiting for that data. */
void tg_tnbc_open(const void *buf, size_t len);
/* Whether T-NBC guards anything now (one load: the wrappers' fast
 * path). */
bool tg_tnbc_guarding(void);
/* Faults T-NBC's guard served in this process. */
uint64_t tg_tnbc_faults(void);
/* Prints, on stderr, this rank's trial of T-NBC at each call site
 * (TNBC_MPI_TNBC_ADAPT): the way kept, or trying, and the mean periods
 * of each way.  For the report, by rank 0. */
void tg_tnbc_report(void);
/* ns the guard's waits for data took in this process (faults and
 * opens by calls), summed. */
uint64_t tg_tnbc_wait_ns(void);
int tg_gather(struct tg_comm *c, const void *sbuf, void *rbuf, size_t bytes,
	      int root, struct tg_req *req);
int tg_scatter(struct tg_comm *c, const void *sbuf, void *rbuf, size_t bytes,
	       int root, struct tg_req *req);
/* MAXLOC and MINLOC on value/location pairs, by seed 002's descriptors
 * (fi_tnbc_coll(3)) on a tree of the group: count pairs of a 4-byte
 * value and an int (wide false: MPI_2INT, MPI_FLOAT_INT), or of an
 * 8-byte value, an int and padding (wide true: MPI_DOUBLE_INT,
 * MPI_LONG_INT), width an enum fi_tnbc_red_width; the lowest location
 * wins ties.  At most FI_TNBC_RED_INLINE bytes of pairs in the
 * descriptors' layout (6 narrow, 3 wide): -FI_EOPNOTSUPP above. */
int tg_allreduce_loc(struct tg_comm *c, const void *sbuf, void *rbuf,
		     size_t count, bool wide, int width, bool max,
		     struct tg_req *req);

/* MPI_Scan (exclusive false) or MPI_Exscan: count elements of dt
 * folded with op, a commutative reduction of fi_atomic(3), over members
 * 0 .. rank (0 .. rank - 1), by a schedule of the provider's deferred
 * work (no fi_collective call has it).  Every member's count is the
 * same.  An exclusive scan leaves member 0's rbuf alone. */
int tg_scan(struct tg_comm *c, const void *sbuf, void *rbuf, size_t count,
	    enum fi_datatype dt, enum fi_op op, bool exclusive,
	    struct tg_req *req);

/* Whether the provider takes (coll, dt, op) at all. */
bool tg_query(enum fi_collective_op coll, enum fi_datatype dt, enum fi_op op);

/* ------------------------------------------------------------------ */
/* Policy and report                                                    */

enum tg_fn {
	TG_ALLREDUCE,
	TG_REDUCE,
	TG_BCAST,
	TG_BARRIER,
	TG_ALLGATHER,
	TG_ALLTOALL,
	TG_ALLTOALLV,
	TG_REDUCE_SCATTER_BLOCK,
	TG_GATHER,
	TG_SCATTER,
	TG_ALLGATHERV,
	TG_GATHERV,
	TG_SCATTERV,
	TG_REDUCE_SCATTER,
	TG_NEIGHBOR_ALLGATHER,
	TG_NEIGHBOR_ALLTOALL,
	TG_NEIGHBOR_ALLGATHERV,
	TG_NEIGHBOR_ALLTOALLV,
	TG_SCAN,
	TG_EXSCAN,
	TG_ALLTOALLW,
	TG_NEIGHBOR_ALLTOALLW,
	TG_IALLREDUCE, /* the first non-blocking one */
	TG_IREDUCE,
	TG_IBCAST,
	TG_IBARRIER,
	TG_IALLGATHER,
	TG_IALLTOALL,
	TG_IALLTOALLV,
	TG_IALLGATHERV,
	TG_IGATHERV,
	TG_ISCATTERV,
	TG_IREDUCE_SCATTER_BLOCK,
	TG_IGATHER,
	TG_ISCATTER,
	TG_IREDUCE_SCATTER,
	TG_INEIGHBOR_ALLGATHER,
	TG_INEIGHBOR_ALLTOALL,
	TG_INEIGHBOR_ALLGATHERV,
	TG_INEIGHBOR_ALLTOALLV,
	TG_ISCAN,
	TG_IEXSCAN,
	TG_IALLTOALLW,
	TG_INEIGHBOR_ALLTOALLW,
	TG_NFN
};

/* Why a call fell back (the report counts each). */
enum tg_why {
	TG_WHY_POLICY, /* the policy chose the MPI's own algorithm */
	TG_WHY_TYPE, /* datatype or op the offload cannot take */
	TG_WHY_COMM, /* intercommunicator, or one the glue did not see made */
	TG_WHY_ARGS, /* arguments the MPI must judge (errors, MPI_BOTTOM) */
	TG_WHY_POST, /* the provider refused the post */
	TG_WHY_OFF, /* the glue is not running */
	TG_NWHY
};

const char *tg_fn_name(enum tg_fn fn);
/* Reads TNBC_MPI_* once.  mpi names the MPI ("openmpi", "mpich") and
 * oversub says whether some host runs more ranks than it has cores, as
 * agreed by every member, for the table of measured cutoffs. */
void tg_policy_init(const char *mpi, bool oversub);
/* -1 when some call of fn may go to the offload, else why none does
 * (enum tg_why): a wrapper that gets a reason passes its call through at
 * once, so that the glue costs a call it does not take next to nothing. */
int tg_policy_may(enum tg_fn fn);
/* Whether a blocking call of fn over bytes (one member's share, the
 * same on every member) on a group of size members goes to the offload.
 * Non-blocking calls always do.  Every member decides the same. */
bool tg_policy_offload(enum tg_fn fn, size_t bytes, int size);
/* Whether the policy certainly leaves a blocking call of fn of at most
 * bytes to the MPI (its cutoff, unforced, no T-NBC): a wrapper may pass
 * it through before looking at its handles. */
bool tg_policy_below(enum tg_fn fn, size_t bytes);
bool tg_report_wanted(void);
/* The report as every rank agreed (the report is a collective). */
void tg_report_set(bool on);
/* A digest of the TNBC_MPI_* variables that steer the decisions (all
 * but TNBC_MPI_LIBDIR and TNBC_MPI_REPORT): every rank's must agree. */
uint32_t tg_policy_env_hash(void);
/* A call of fn, offloaded or fallen back and why (kept only when the
 * report is wanted). */
void tg_count(enum tg_fn fn, bool offloaded, enum tg_why why);
/* Time spent in a call of fn (the report's; T-NBC's functions). */
void tg_time(enum tg_fn fn, uint64_t ns);
uint64_t tg_now_ns(void);
/* A T-NBC call of fn returned before all its data had arrived. */
void tg_count_early(enum tg_fn fn);
/* Whether a blocking call of fn whose largest message is bytes goes to
 * T-NBC (TNBC_MPI_TNBC, TNBC_MPI_TNBC_MIN); false for a function T-NBC
 * does not take. */
bool tg_policy_tnbc(enum tg_fn fn, size_t bytes);
/* The piece a T-NBC broadcast is cut into (TNBC_MPI_TNBC_PIECE). */
size_t tg_policy_tnbc_piece(void);
/* The periods of each way a call site tries before T-NBC is kept or left
 * there (TNBC_MPI_TNBC_ADAPT; 0: T-NBC at every call). */
unsigned tg_policy_tnbc_trials(void);
/* A call T-NBC would take that went the plain way, T-NBC having measured
 * itself no better at its site (or trying). */
void tg_count_plain(enum tg_fn fn);
/* Counts per function: offloaded, the fallbacks by reason, the T-NBC
 * calls that returned early, the ns spent in its calls (T-NBC's
 * functions), the ns T-NBC's guard made the program wait for data
 * after the calls returned (for MPI_Alltoall only: the whole
 * process's), and the calls T-NBC left to the plain way. */
#define TG_NCOUNT (5 + TG_NWHY)
/* This process's counts: TG_NFN x TG_NCOUNT, for the front-end to sum
 * over the world. */
void tg_counts(uint64_t *out);
/* Prints the summed counts (rank 0). */
void tg_report_print(const uint64_t *sums);

#ifdef __cplusplus
}
#endif

#endif /* TG_H */
