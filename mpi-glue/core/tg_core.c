/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The process's endpoint, its names, requests and the completion poll.
 *
 * One endpoint serves every communicator: world ranks are AV indices,
 * inserted in world order, so a member's fi_addr_t is its world rank.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "tg_priv.h"

/* Below this a post's first steps (an eager send) cost less than waking
 * the engine for them, and a wait right after the post would find them
 * undone: measured with bench_glue, 8-byte Iallreduce + Wait 2.5 us
 * inline against 5 us deferred, while from 8 KiB on a sleeping rank's
 * collective completed during the sleep only when deferred.  A small
 * post handing off costs as much again (7 to 15 us posts: the wake-up of
 * an engine that slept), for an overlap OSU's formula leaves at 0 anyway
 * when the post takes as long as the whole operation. */
#define TG_DEFER_MIN 8192u

struct tg_state tg = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void tg_req_cache_drain(void);

static struct fi_info *tg_getinfo(uint64_t extra_caps)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;

	if (!hints)
		return NULL;
	hints->caps = FI_MSG | FI_TAGGED | FI_COLLECTIVE | FI_DIRECTED_RECV |
		      extra_caps;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->av_type = FI_AV_TABLE;
	hints->fabric_attr->prov_name = strdup(FI_TNBC_PROV_NAME);
	if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info))
		info = NULL;
	fi_freeinfo(hints);
	return info;
}

int tg_open(void **name, size_t *len)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT,
				     .wait_obj = FI_WAIT_NONE,
				     .size = 4096};
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_NONE};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	size_t n = 0;
	int ret;

	/* other hosts too, where the provider reaches them; this host
	 * alone where it does not */
	tg.info = tg_getinfo(FI_LOCAL_COMM | FI_REMOTE_COMM);
	if (!tg.info)
		tg.info = tg_getinfo(0);
	if (!tg.info)
		return -FI_ENODATA;
	ret = fi_fabric(tg.info->fabric_attr, &tg.fabric, NULL);
	if (ret)
		goto err;
	ret = fi_domain(tg.fabric, tg.info, &tg.domain, NULL);
	if (ret)
		goto err;
	ret = fi_endpoint(tg.domain, tg.info, &tg.ep, NULL);
	if (ret)
		goto err;
	ret = fi_av_open(tg.domain, &av_attr, &tg.av, NULL);
	if (ret)
		goto err;
	ret = fi_cq_open(tg.domain, &cq_attr, &tg.cq, NULL);
	if (ret)
		goto err;
	ret = fi_eq_open(tg.fabric, &eq_attr, &tg.eq, NULL);
	if (ret)
		goto err;
	ret = fi_ep_bind(tg.ep, &tg.av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(tg.ep, &tg.cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_ep_bind(tg.ep, &tg.eq->fid, 0);
	if (!ret)
		ret = fi_enable(tg.ep);
	if (ret)
		goto err;
	ret = fi_open_ops(&tg.ep->fid, FI_TNBC_COLL_OPS_1, 0,
			  (void **)&tg.coll_ops, NULL);
	if (ret)
		goto err;
	/* the named join came with the glue: an older provider lacks it */
	if (tg.coll_ops->size < sizeof(*tg.coll_ops) || !tg.coll_ops->join) {
		ret = -FI_ENOSYS;
		goto err;
	}
	if (fi_open_ops(&tg.domain->fid, FI_TNBC_DOMAIN_OPS_1, 0,
			(void **)&tg.dom_ops, NULL) ||
	    tg.dom_ops->size < sizeof(*tg.dom_ops) || !tg.dom_ops->handoff)
		tg.dom_ops = NULL;
	{
		const char *v = getenv("TNBC_MPI_HANDOFF");

		tg.handoff_min = !v || !*v ? TG_DEFER_MIN
				 : !strcmp(v, "off")
					 ? SIZE_MAX
					 : (size_t)strtoull(v, NULL, 0);
		v = getenv("TNBC_MPI_DEFER");
		tg.defer_min = !v || !*v ? TG_DEFER_MIN
			       : !strcmp(v, "off")
				       ? SIZE_MAX
				       : (size_t)strtoull(v, NULL, 0);
		v = getenv("TNBC_MPI_DEFER_LINK");
		tg.defer_link_min = !v || !*v ? 0
				    : !strcmp(v, "off")
					    ? SIZE_MAX
					    : (size_t)strtoull(v, NULL, 0);
	}
	fi_getname(&tg.ep->fid, NULL, &n);
	*name = calloc(1, n ? n : 1);
	if (!*name) {
		ret = -FI_ENOMEM;
		goto err;
	}
	ret = fi_getname(&tg.ep->fid, *name, &n);
	if (ret) {
		free(*name);
		*name = NULL;
		goto err;
	}
	*len = n;
	return 0;
err:
	tg_close();
	return ret;
}

int tg_connect(const void *names, size_t len, int n, int my)
{
	int ret;

	(void)len;
	ret = fi_av_insert(tg.av, names, (size_t)n, NULL, 0, NULL);
	if (ret != n)
		return ret < 0 ? ret : -FI_EINVAL;
	tg.rank = my;
	tg.size = n;
	tg.ready = true;
	return 0;
}

static void tg_close_fid(void *fidp)
{
	struct fid **f = fidp;

	if (*f)
		fi_close(*f);
	*f = NULL;
}

void tg_close(void)
{
	pthread_mutex_lock(&tg.lock);
	/* guarded data first: the program may read it after Finalize */
	tg_tnbc_reap(NULL, true);
	tg_tnbc_close();
	tg.ready = false;
	tg_comm_reap();
	tg.closing = NULL; /* what is still busy goes with the endpoint */
	tg_comm_close_all();
	tg_close_fid(&tg.ep);
	tg_close_fid(&tg.cq);
	tg_close_fid(&tg.eq);
	tg_close_fid(&tg.av);
	tg_close_fid(&tg.domain);
	tg_close_fid(&tg.fabric);
	fi_freeinfo(tg.info);
	tg.info = NULL;
	pthread_mutex_unlock(&tg.lock);
	tg_req_cache_drain();
}

/* How long a thread that spins elsewhere yields after leaving work to
 * the engine: the longest that work took here (a 1 MiB allreduce's
 * last pieces), with room. */
#define TG_OWED_NS 2000000u

uint64_t tg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool tg_handoff(size_t bytes)
{
	if (!tg.ready || !tg.dom_ops)
		return false;
	/* the last completion hands off only after deferred posts: after
	 * small ones it would make every later send ring a peer (a system
	 * call in the post) for work a poll does in a microsecond */
	if (bytes == TG_HANDOFF_LAST
		    ? !atomic_exchange_explicit(&tg.deferred, false,
						memory_order_relaxed)
		    : bytes < tg.handoff_min)
		return false;
	if (tg.dom_ops->handoff(tg.domain) != 1)
		return false;
	atomic_store_explicit(&tg.owed_until, tg_now_ns() + TG_OWED_NS,
			      memory_order_relaxed);
	return true;
}

bool tg_engine_owed(void)
{
	uint64_t until =
		atomic_load_explicit(&tg.owed_until, memory_order_relaxed);

	if (!until)
		return false;
	if (tg_now_ns() < until)
		return true;
	atomic_store_explicit(&tg.owed_until, 0, memory_order_relaxed);
	return false;
}

void tg_defer(const struct tg_comm *c, size_t bytes, bool on)
{
	/* over a link even a small operation takes tens of microseconds:
	 * the application may as well compute meanwhile (tnbc-mpi(7)) */
	if (!tg.ready || !tg.dom_ops ||
	    bytes < (c && c->link ? tg.defer_link_min : tg.defer_min))
		return;
	if (on)
		atomic_store_explicit(&tg.deferred, true, memory_order_relaxed);
	tg.dom_ops->defer(tg.domain, on);
}

int tg_engine(uint64_t *domains, uint64_t *engine_pkts)
{
	struct fi_tnbc_ops_domain *ops;
	struct fi_tnbc_engine_stats st = {.size = sizeof(st)};
	int ret;

	if (!tg.ready)
		return -FI_EOPBADSTATE;
	ret = fi_open_ops(&tg.domain->fid, FI_TNBC_DOMAIN_OPS_1, 0,
			  (void **)&ops, NULL);
	if (!ret)
		ret = ops->engine_stats(tg.domain, &st);
	if (ret)
		return ret;
	*domains = st.engine_domains;
	*engine_pkts = st.engine_pkts;
	return 0;
}

bool tg_ready(void)
{
	return tg.ready;
}

int tg_world_rank(void)
{
	return tg.rank;
}

int tg_world_size(void)
{
	return tg.size;
}

/* ------------------------------------------------------------------ */
/* Requests                                                             */

void tg_set_done_fn(tg_done_fn fn)
{
	tg.done_fn = fn;
}

void tg_set_idle_fn(tg_idle_fn fn)
{
	tg.idle_fn = fn;
}

void tg_idle(void)
{
	if (tg.idle_fn)
		tg.idle_fn();
}

void tg_idle_look(unsigned *spins)
{
	tg_idle();
	/* the engine needs the core on a host with few of them */
	if (++*spins > 64)
		sched_yield();
}

/* A request comes and goes with every non-blocking call: calloc and
 * free cost about 600 instructions of the glue's own 1,700 per call
 * (callgrind, 8-byte MPI_Iallreduce).  A free list keeps up to
 * TG_REQ_CACHE_MAX; sanitizer builds bypass it, so that a use after
 * free is still caught. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TG_REQ_CACHE 0
#else
#define TG_REQ_CACHE 1
#endif
#define TG_REQ_CACHE_MAX 64u

static struct {
	pthread_mutex_t lock; /* a leaf: taken under tg.lock too */
	struct tg_req *head; /* linked by free_next */
	unsigned n;
} tg_req_cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct tg_req *tg_req_cache_get(void)
{
	struct tg_req *r = NULL;

	if (!TG_REQ_CACHE)
		return NULL;
	pthread_mutex_lock(&tg_req_cache.lock);
	r = tg_req_cache.head;
	if (r) {
		tg_req_cache.head = r->free_next;
		tg_req_cache.n--;
	}
	pthread_mutex_unlock(&tg_req_cache.lock);
	return r;
}

static bool tg_req_cache_put(struct tg_req *r)
{
	bool kept = false;

	if (!TG_REQ_CACHE)
		return false;
	pthread_mutex_lock(&tg_req_cache.lock);
	if (tg_req_cache.n < TG_REQ_CACHE_MAX) {
		r->free_next = tg_req_cache.head;
		tg_req_cache.head = r;
		tg_req_cache.n++;
		kept = true;
	}
	pthread_mutex_unlock(&tg_req_cache.lock);
	return kept;
}

static void tg_req_cache_drain(void)
{
	struct tg_req *r;

	while ((r = tg_req_cache_get()))
		free(r);
}

struct tg_req *tg_req_new(void *owner)
{
	struct tg_req *r = tg_req_cache_get();

	if (r)
		memset(r, 0, sizeof(*r));
	else
		r = calloc(1, sizeof(*r));
	if (r) {
		r->self = r;
		r->owner = owner;
	}
	return r;
}

bool tg_req_done(const struct tg_req *req)
{
	return atomic_load_explicit(&req->done, memory_order_acquire);
}

int tg_req_err(const struct tg_req *req)
{
	return req->err;
}

void *tg_req_owner(const struct tg_req *req)
{
	return req->owner;
}

void tg_req_set_owner(struct tg_req *req, void *owner)
{
	req->owner = owner;
}

/* ------------------------------------------------------------------ */
/* Counters, kept for reuse                                             */

/* Schedules built of deferred work (T-NBC's, scan's) take a counter per
 * dependency; opening one sets up a lock and a heap in the provider, so
 * they are kept and reset instead.  Under tg.lock. */
struct fid_cntr *tg_cntr_get(void)
{
	struct fi_cntr_attr a = {.events = FI_CNTR_EVENTS_COMP,
				 .wait_obj = FI_WAIT_NONE};
	struct fid_cntr *k;

	if (tg.ncntr_free)
		return tg.cntr_free[--tg.ncntr_free];
	return fi_cntr_open(tg.domain, &a, &k, NULL) ? NULL : k;
}

void tg_cntr_put(struct fid_cntr *k)
{
	if (!k)
		return;
	/* one that saw an error is not worth resetting */
	if (fi_cntr_readerr(k) || fi_cntr_set(k, 0)) {
		fi_close(&k->fid);
		return;
	}
	if (tg.ncntr_free == tg.cntr_cap) {
		size_t cap = tg.cntr_cap ? 2 * tg.cntr_cap : 64;
		struct fid_cntr **a =
			realloc(tg.cntr_free, cap * sizeof(*tg.cntr_free));

		if (!a) {
			fi_close(&k->fid);
			return;
		}
		tg.cntr_free = a;
		tg.cntr_cap = cap;
	}
	tg.cntr_free[tg.ncntr_free++] = k;
}

int tg_go_open(void)
{
	struct fi_cntr_attr a = {.events = FI_CNTR_EVENTS_COMP,
				 .wait_obj = FI_WAIT_NONE};

	return tg.go ? 0 : fi_cntr_open(tg.domain, &a, &tg.go, NULL);
}

void tg_cntr_close_all(void)
{
	while (tg.ncntr_free)
		fi_close(&tg.cntr_free[--tg.ncntr_free]->fid);
	free(tg.cntr_free);
	tg.cntr_free = NULL;
	tg.cntr_cap = 0;
	if (tg.go)
		fi_close(&tg.go->fid);
	tg.go = NULL;
}

static void tg_req_release(struct tg_req *r)
{
	if (r->cntr)
		fi_close(&r->cntr->fid);
	free(r->tmp);
	free(r->sink);
	if (!tg_req_cache_put(r))
		free(r);
}

void tg_req_free(struct tg_req *req)
{
	if (!req)
		return;
	if (!req->posted || tg_req_done(req)) {
		tg_req_release(req);
		return;
	}
	pthread_mutex_lock(&tg.lock);
	req->freed = true;
	req->owner = NULL;
	pthread_mutex_unlock(&tg.lock);
}

void tg_req_posted(struct tg_req *req, struct tg_comm *c, int parts)
{
	req->comm = c;
	req->posted = true;
	atomic_store(&req->left, parts);
	if (c)
		atomic_fetch_add(&c->inflight, 1);
}

/* Under tg.lock.  One completion of req; the last marks it. */
void tg_req_part_done(struct tg_req *r, int err)
{
	if (err && !r->err)
		r->err = err;
	if (atomic_fetch_sub(&r->left, 1) != 1)
		return;
	if (r->comm)
		atomic_fetch_sub(&r->comm->inflight, 1);
	if (r->loc_out && !r->err) {
		const struct fi_tnbc_loc64 *p = r->sink;

		for (size_t i = 0; i < r->loc_count; i++) {
			char *o = (char *)r->loc_out + i * 16;
			int32_t loc = (int32_t)p[i].loc;

			memcpy(o, &p[i].value, 8);
			memcpy(o + 8, &loc, 4);
		}
	}
	if (r->copy_out && !r->err)
		memcpy(r->copy_out, r->sink, r->copy_len);
	/* the last part completes after every step that counts in them */
	for (int i = 0; i < r->nkeep; i++)
		tg_cntr_put(r->keep[i]);
	r->nkeep = 0;
	atomic_store_explicit(&r->done, true, memory_order_release);
	if (r->freed) {
		tg_req_release(r);
	} else if (r->owner && tg.done_fn) {
		/* A blocking call's request (no owner) is freed by its
		 * waiter as soon as it sees the mark: only owned ones wait
		 * here, and their owner frees them only once told. */
		r->done_next =
			atomic_load_explicit(&tg.done, memory_order_relaxed);
		atomic_store_explicit(&tg.done, r, memory_order_relaxed);
	}
}

/* Tells the owners of what completed, with tg.lock let go: done_fn is
 * an MPI call (MPI_Grequest_complete), and no MPI call runs under the
 * core's lock. */
static void tg_tell_owners(void)
{
	struct tg_req *r;

	pthread_mutex_lock(&tg.lock);
	r = atomic_exchange_explicit(&tg.done, NULL, memory_order_relaxed);
	pthread_mutex_unlock(&tg.lock);
	while (r) {
		struct tg_req *next = r->done_next;

		/* r may be freed by its owner once told */
		tg.done_fn(r, r->owner);
		r = next;
	}
}

static void tg_drain_eq(void)
{
	struct fi_eq_entry e;
	uint32_t ev;

	/* join completions: a failed join fails the group's operations
	 * too, which report it themselves */
	for (;;) {
		ssize_t n = fi_eq_read(tg.eq, &ev, &e, sizeof(e), 0);

		if (n == -FI_EAVAIL) {
			struct fi_eq_err_entry err = {0};

			fi_eq_readerr(tg.eq, &err, 0);
			continue;
		}
		if (n <= 0)
			return;
	}
}

/* Reads completions, a batch at a time, until none are left, or after
 * one batch (once): a read that finds the queue empty runs a progress
 * pass. */
static int tg_poll_held_to(bool once)
{
	struct fi_cq_entry e[32];
	int done = 0;

	for (bool go = true; go; go = !once) {
		ssize_t n = fi_cq_read(tg.cq, e, 32);

		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			if (fi_cq_readerr(tg.cq, &err, 0) == 1 &&
			    err.op_context) {
				tg_req_part_done(
					tg_ctx_req(err.op_context),
					-(int)(err.err ? err.err : FI_EIO));
				done++;
			}
			continue;
		}
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (!e[i].op_context)
				continue;
			tg_req_part_done(tg_ctx_req(e[i].op_context), 0);
			done++;
		}
	}
	tg_drain_eq();
	if (tg.closing)
		tg_comm_reap();
	return done;
}

int tg_poll_held(void)
{
	return tg_poll_held_to(false);
}

static int tg_poll_to(bool once)
{
	int done;

	if (!tg.ready || pthread_mutex_trylock(&tg.lock))
		return 0;
	done = tg_poll_held_to(once);
	pthread_mutex_unlock(&tg.lock);
	/* a list filled by a posting thread's own look (TG_POST) is told
	 * at the next poll */
	if (atomic_load_explicit(&tg.done, memory_order_relaxed))
		tg_tell_owners();
	return done;
}

int tg_poll(void)
{
	return tg_poll_to(false);
}

int tg_poll_once(void)
{
	return tg_poll_to(true);
}

int tg_req_wait(struct tg_req *req)
{
	unsigned spins = 0;

	while (!tg_req_done(req)) {
		if (tg_poll() || tg_req_done(req)) {
			spins = 0;
			continue;
		}
		tg_idle_look(&spins);
	}
	/* and once after: what a member had the MPI deliver before it joined
	 * is then there for this process's next look that does not wait
	 * (MPI_Win_test, MPI_Iprobe), as after the MPI's own collective,
	 * which comes down the same channel behind it */
	tg_idle();
	return req->err;
}
