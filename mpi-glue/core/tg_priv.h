/* SPDX-License-Identifier: BSD-2-Clause */
/* The core's own state, shared by its files; nothing here is seen by a
 * front-end. */
#ifndef TG_PRIV_H
#define TG_PRIV_H

#include <pthread.h>

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_ext_tnbc.h>
#include <rdma/fi_tagged.h>

#include "tg.h"
#include "tg_cut.h"

struct tg_req {
	/* first: a completion's op_context points at a word that holds the
	 * request, this one or the first word of a deferred work's context
	 * (tg_ctx_req) */
	struct tg_req *self;
	/* completions still to come (an alltoallv has one per message) */
	atomic_int left;
	atomic_bool done;
	int err; /* negative fi_errno, written before done */
	bool posted;
	bool freed; /* the owner let go; free once done */
	void *owner;
	struct tg_req *done_next; /* tg.done, until its owner is told */
	struct tg_req *free_next; /* the free list (tg_core.c) */
	void *tmp; /* the core's copy of an in-place input */
	void *sink; /* a result nobody keeps (a scatter root in place) */
	struct tg_comm *comm; /* counts the group's operations in flight */
	/* wide value/location pairs land in sink, in the descriptors'
	 * layout, and are copied out to loc_out in MPI's */
	void *loc_out;
	size_t loc_count;
	/* a result that lands padded in sink, its first copy_len bytes
	 * copied out (a reduce_scatter's uneven block) */
	void *copy_out;
	size_t copy_len;
	struct fid_cntr *cntr; /* a root's trigger for its broadcast */
	/* counters of a schedule of deferred work (a scan's), returned to
	 * the pool with the last part: every step counting in them has
	 * run by then */
	struct fid_cntr **keep;
	int nkeep;
	fi_addr_t kids[8];
};

/* The request a completion's op_context names. */
static inline struct tg_req *tg_ctx_req(void *op_context)
{
	return *(struct tg_req **)op_context;
}

struct tg_tnbc_op;
struct tg_tnbc_site;

struct tg_comm {
	uint32_t id;
	int size, rank;
	int *world; /* world rank of each member */
	struct fid_av_set *set;
	struct fid_mc *mc; /* NULL until the first collective joins */
	bool link; /* its messages cross a link (known once joined) */
	fi_addr_t coll;
	atomic_int inflight;
	bool closing; /* freed by its owner, closed when idle */
	uint32_t seq; /* alltoallv operations posted */
	uint32_t dseq; /* descriptor reductions posted */
	int tnbc_err; /* a T-NBC call that returned early failed later */
	struct tg_tnbc_site *sites; /* T-NBC's trials at its call sites */
	struct tg_comm *next; /* tg.closing */
	struct tg_comm *all_next; /* tg.all */
};

struct tg_state {
	pthread_mutex_t lock; /* posting and group state */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_eq *eq;
	struct fi_tnbc_ops_coll *coll_ops;
	struct fi_tnbc_ops_domain *dom_ops; /* NULL: no handoff */
	size_t handoff_min; /* bytes from which a post hands off */
	size_t defer_min; /* bytes from which a post's steps are deferred */
	size_t defer_link_min; /* the same on a group that crosses a link */
	_Atomic uint64_t owed_until; /* tg_engine_owed's end, ns; 0: none */
	atomic_bool deferred; /* a post was deferred since the last handoff */
	int rank, size;
	bool ready;
	tg_done_fn done_fn;
	tg_idle_fn idle_fn;
	/* owned requests marked done under tg.lock, told to their owners
	 * (done_fn, an MPI call) once it is let go */
	struct tg_req *_Atomic done;
	struct tg_comm *closing; /* groups waiting for their operations */
	struct tg_comm *all; /* every group not yet closed */
	struct tg_tnbc_op *tnbc; /* T-NBC calls not yet finished */
	struct fid_cntr *go; /* stays 0: deferred work at threshold 0 */
	struct fid_cntr **cntr_free; /* counters to reuse */
	size_t ncntr_free, cntr_cap;
};

extern struct tg_state tg;

/* A post, the queue made room for by reading completions; under
 * tg.lock. */
#define TG_POST(call)                                                          \
	({                                                                     \
		ssize_t _r;                                                    \
		while ((_r = (call)) == -FI_EAGAIN)                            \
			tg_poll_held();                                        \
		(int)_r;                                                       \
	})

/* Posts the pieces of a message of len bytes at buf to member `to` of c
 * that go in pass 0 (the edges) or 1 (the bodies), tagged from tag, as
 * parts of req; under tg.lock.  Counts them in *posted; a negative
 * fi_errno stops at the piece that failed. */
int tg_a2a_send(struct tg_comm *c, int to, const char *buf, size_t len,
		bool cut, int pass, uint64_t tag, struct tg_req *req,
		int *posted);
/* Counts one more completion of a posted part of req. */
void tg_req_posted(struct tg_req *req, struct tg_comm *c, int parts);
/* Joins c if it was not yet; under tg.lock. */
int tg_comm_join(struct tg_comm *c);
/* One completion of a part of req (the last marks it); under tg.lock. */
void tg_req_part_done(struct tg_req *req, int err);
/* tg_poll() for a caller that holds tg.lock. */
int tg_poll_held(void);
/* tg_poll() of one batch of completions, one progress pass: a waiter
 * that looks at its own word between passes (T-NBC's settle). */
int tg_poll_once(void);
/* The front-end's idle function, if any (tg_set_idle_fn). */
void tg_idle(void);
/* A wait's look that found nothing, outside tg.lock: the idle function,
 * then the core to the engine once *spins such looks passed 64. */
void tg_idle_look(unsigned *spins);
/* Tries to close groups freed while busy; under tg.lock. */
void tg_comm_reap(void);
/* Closes what every group still holds of the provider, the end of the
 * process's endpoint (communicators a program never freed); under
 * tg.lock. */
void tg_comm_close_all(void);
/* Finishes T-NBC calls: of c (NULL: all), waiting for their data and
 * opening their ranges; or, wait false, only those already complete
 * whose ranges are open.  Under tg.lock. */
void tg_tnbc_reap(struct tg_comm *c, bool wait);
/* Closes what T-NBC kept (its trace and verdicts written, copies
 * freed); under tg.lock. */
void tg_tnbc_close(void);
/* Frees c's T-NBC trials, their verdicts kept for the file first; with
 * c, under tg.lock. */
void tg_tnbc_comm_fini(struct tg_comm *c);
/* Counters for schedules of deferred work, reset and kept for reuse;
 * under tg.lock.  NULL: none could be opened. */
struct fid_cntr *tg_cntr_get(void);
void tg_cntr_put(struct fid_cntr *k);
/* Opens tg.go (deferred work at threshold 0 on it starts at once). */
int tg_go_open(void);
/* Closes the kept counters and tg.go. */
void tg_cntr_close_all(void);

#endif /* TG_PRIV_H */
