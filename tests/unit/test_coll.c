/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The collectives (fi_collective(3)) in one process: n endpoints of one
 * domain stand for the members of a group of n, 1 to 11, and this one
 * thread posts every member's part and polls every member's CQ while the
 * engine runs the schedules.  The multi-process test (ftx_coll.c) covers
 * the same calls across processes, with every datatype; this suite is
 * what the sanitizer builds see of the schedule object and the
 * algorithms, in seconds.
 *
 * Each test joins a group of n and runs, one after the other, every
 * collective at one element, at one reduction packet's worth (40 B), at
 * more than a packet (4904 B, eager) and at a slice of more than
 * FI_TNBC_EAGER_SIZE and FI_TNBC_COLL_RSAG_MIN (rendezvous per slice;
 * rsag for allreduce), with roots other than member 0; then several
 * operations in flight at once.  Every member's result is checked
 * element by element against a reference folded here, in integers, so
 * the order of the fold does not matter; inputs must be left as they
 * were, nothing written past a buffer's end, and a reduce must not
 * touch a non-root's result.
 *
 * A test case is one setting of FI_TNBC_COLL_ALG: automatic, flat
 * pinned, rsag pinned, desc on a binary tree cut into small segments.
 * That makes every algorithm of the table (coll/tnbc_alg.c) run every
 * operation it can, and each test checks that the algorithm it pinned
 * did run: the pins are read once per process, so that holds in Check's
 * fork mode only.  hosts is left out: it needs members on several
 * hosts, and the endpoints of one process are on one.
 */
#include <inttypes.h>
#include <sched.h>

#include <rdma/fi_collective.h>
#include <rdma/fi_eq.h>

#include "tnbc_unit.h"

#include "coll/tnbc_sched.h"

/* Members at most: a tree of degree 8 with a second level, uneven
 * slices, a flat exchange of 10 packets each. */
#define CO_MAX	 11
#define CO_GUARD 64
#define CO_MAGIC 0xc011c7a1u
/* Longest a barrier's early members are watched for an early exit. */
#define CO_EARLY_MS 10

/* A member's part in one operation: its completion's context. */
struct co_run;
struct co_ctx {
	uint32_t magic;
	int member;
	bool done;
	struct co_run *run;
};

/* One operation of the group, every member's buffers. */
struct co_run {
	enum fi_collective_op coll;
	enum fi_datatype dt;
	enum fi_op op;
	size_t count;
	int root;
	uint64_t salt;
	const char *alg; /* the table's choice */
	size_t inlen, outlen; /* bytes, per member */
	char *in[CO_MAX], *out[CO_MAX];
	struct co_ctx ctx[CO_MAX];
	char what[128];
};

struct co_world {
	struct tu_dom d;
	struct fid_av *av;
	struct fid_eq *eq;
	struct fid_av_set *set;
	int n;
	struct fid_ep *ep[CO_MAX];
	struct fid_cq *cq[CO_MAX];
	struct fid_mc *mc[CO_MAX];
	fi_addr_t addr[CO_MAX]; /* in the AV: what root_addr takes */
	fi_addr_t coll[CO_MAX]; /* each member's own address of the group */
	struct co_ctx join[CO_MAX];
	uint64_t salt;
	const char *ran[8]; /* the algorithms that ran */
	char where[96];
};

/* ------------------------------------------------------------------ */
/* Values and the reference                                             */

static const char *co_coll_name(enum fi_collective_op c)
{
	static const char *const names[] = {
		[FI_BARRIER] = "barrier",
		[FI_BROADCAST] = "broadcast",
		[FI_ALLTOALL] = "alltoall",
		[FI_ALLREDUCE] = "allreduce",
		[FI_ALLGATHER] = "allgather",
		[FI_REDUCE_SCATTER] = "reduce_scatter",
		[FI_REDUCE] = "reduce",
		[FI_SCATTER] = "scatter",
		[FI_GATHER] = "gather",
	};

	return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "?";
}

static const char *co_op_name(enum fi_op op)
{
	switch (op) {
	case FI_SUM:
		return " sum";
	case FI_MIN:
		return " min";
	case FI_MAX:
		return " max";
	case FI_BAND:
		return " band";
	default:
		return "";
	}
}

static size_t co_es(enum fi_datatype dt)
{
	return dt == FI_INT32 ? 4 : 8;
}

static bool co_reducing(enum fi_collective_op c)
{
	return c == FI_ALLREDUCE || c == FI_REDUCE || c == FI_REDUCE_SCATTER;
}

static bool co_rooted(enum fi_collective_op c)
{
	return c == FI_BROADCAST || c == FI_REDUCE || c == FI_SCATTER ||
	       c == FI_GATHER;
}

/* A value as the buffer holds it, widened: int32 sign-extended. */
static uint64_t co_norm(enum fi_datatype dt, uint64_t v)
{
	return dt == FI_INT32 ? (uint64_t)(int64_t)(int32_t)(uint32_t)v : v;
}

static uint64_t co_get(enum fi_datatype dt, const char *buf, size_t k)
{
	if (dt == FI_INT32) {
		uint32_t v;

		memcpy(&v, buf + 4 * k, 4);
		return co_norm(dt, v);
	}
	uint64_t v;

	memcpy(&v, buf + 8 * k, 8);
	return v;
}

static void co_put(enum fi_datatype dt, char *buf, size_t k, uint64_t v)
{
	if (dt == FI_INT32) {
		uint32_t w = (uint32_t)v;

		memcpy(buf + 4 * k, &w, 4);
	} else {
		memcpy(buf + 8 * k, &v, 8);
	}
}

static uint64_t co_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Element k of member m's buffer.  Sums stay far from overflow (11
 * members of +-10^6), and signed, so that min and max see negative
 * values; a bitwise and gets dense bits, so that some survive 11
 * members. */
static uint64_t co_val(const struct co_run *r, int m, size_t k)
{
	uint64_t x = co_mix(r->salt * 0x100000001b3ull ^ (uint64_t)m << 48 ^
			    (uint64_t)k);

	if (r->op == FI_BAND)
		return co_norm(r->dt, x | x >> 3 | x >> 7);
	return (uint64_t)((int64_t)(x % 2000001) - 1000000);
}

static uint64_t co_fold(const struct co_run *r, uint64_t a, uint64_t b)
{
	bool sgn = r->dt != FI_UINT64;
	bool less = sgn ? (int64_t)b < (int64_t)a : b < a;

	switch (r->op) {
	case FI_SUM:
		return co_norm(r->dt, a + b);
	case FI_MIN:
		return less ? b : a;
	case FI_MAX:
		return less ? a : b;
	case FI_BAND:
		return a & b;
	default:
		ck_abort_msg("no reference for op %d", (int)r->op);
		return 0;
	}
}

/* Element k of the members' fold. */
static uint64_t co_ref(const struct co_world *w, const struct co_run *r,
		       size_t k)
{
	uint64_t acc = co_val(r, 0, k);

	for (int m = 1; m < w->n; m++)
		acc = co_fold(r, acc, co_val(r, m, k));
	return acc;
}

/* ------------------------------------------------------------------ */
/* The world: n endpoints, one AV, one EQ, one group                    */

static void co_join_wait(struct co_world *w)
{
	uint64_t end = tu_now_ms() + TU_WAIT_MS;
	int joined = 0;

	while (joined < w->n) {
		struct fi_eq_entry e;
		uint32_t ev = 0;
		ssize_t ret = fi_eq_read(w->eq, &ev, &e, sizeof(e), 0);
		struct co_ctx *c;

		if (ret == -FI_EAGAIN) {
			ck_assert_msg(tu_now_ms() < end,
				      "%s: %d of %d members joined within %d "
				      "ms",
				      w->where, joined, w->n, TU_WAIT_MS);
			sched_yield();
			continue;
		}
		if (ret == -FI_EAVAIL) {
			struct fi_eq_err_entry err = {0};

			ck_assert_int_eq(fi_eq_readerr(w->eq, &err, 0),
					 sizeof(err));
			c = err.context;
			ck_abort_msg("%s: the join of member %d failed: %d "
				     "(%s)",
				     w->where, c ? c->member : -1, err.err,
				     fi_strerror(err.err));
		}
		ck_assert_msg(ret == (ssize_t)sizeof(e) &&
				      ev == FI_JOIN_COMPLETE,
			      "%s: EQ read %zd, event %u", w->where, ret, ev);
		c = e.context;
		ck_assert_msg(c >= w->join && c < w->join + w->n &&
				      e.fid == &w->mc[c->member]->fid &&
				      !c->done,
			      "%s: a join event of context %p fid %p", w->where,
			      e.context, (void *)e.fid);
		c->done = true;
		joined++;
	}
}

/* The members of one process reach each other through shared memory,
 * unless this run's FI_TNBC_XPORTS has none (unit-tcp.sh): then every
 * group of two or more crosses a link. */
static void co_over_link(struct co_world *w)
{
	struct fi_tnbc_ops_coll *ops = NULL;
	struct fid_mc stranger = {.fid = {.fclass = FI_CLASS_MC}};
	bool local = false;

	for (unsigned k = 0; k < tnbc_env.nxport; k++)
		local |=
			(tnbc_env.xport_list[k]->flags & TNBC_XPORT_LOCAL) != 0;
	ck_assert_int_eq(fi_open_ops(&w->ep[0]->fid, FI_TNBC_COLL_OPS_1, 0,
				     (void **)&ops, NULL),
			 0);
	ck_assert_uint_ge(ops->size,
			  offsetof(struct fi_tnbc_ops_coll, over_link) +
				  sizeof(ops->over_link));
	for (int i = 0; i < w->n; i++)
		ck_assert_int_eq(ops->over_link(w->mc[i]), w->n > 1 && !local);
	ck_assert_int_eq(ops->over_link(NULL), -FI_EINVAL);
	ck_assert_int_eq(ops->over_link(&stranger), -FI_EINVAL);
}

static void co_open(struct co_world *w, int n, const char *setup)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED,
				     .wait_obj = FI_WAIT_UNSPEC};
	struct fi_av_set_attr set_attr = {
		.start_addr = 0,
		.end_addr = (fi_addr_t)n - 1,
		.stride = 1,
	};
	struct tnbc_addr names[CO_MAX];
	fi_addr_t set_addr;

	ck_assert(n >= 1 && n <= CO_MAX);
	memset(w, 0, sizeof(*w));
	w->n = n;
	snprintf(w->where, sizeof(w->where), "size %d, %s", n, setup);
	tu_dom_open(&w->d, NULL);
	ck_assert_int_eq(w->d.info->addr_format, FI_FORMAT_UNSPEC);
	ck_assert_int_eq(fi_av_open(w->d.domain, &av_attr, &w->av, NULL), 0);
	ck_assert_int_eq(fi_eq_open(w->d.fabric, &eq_attr, &w->eq, NULL), 0);
	for (int i = 0; i < n; i++) {
		size_t len = sizeof(names[i]);

		ck_assert_int_eq(
			fi_endpoint(w->d.domain, w->d.info, &w->ep[i], NULL),
			0);
		ck_assert_int_eq(fi_getname(&w->ep[i]->fid, &names[i], &len),
				 0);
		ck_assert_uint_eq(len, sizeof(names[i]));
	}
	ck_assert_int_eq(
		fi_av_insert(w->av, names, (size_t)n, w->addr, 0, NULL), n);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(
			fi_cq_open(w->d.domain, &cq_attr, &w->cq[i], NULL), 0);
		ck_assert_int_eq(fi_ep_bind(w->ep[i], &w->av->fid, 0), 0);
		ck_assert_int_eq(fi_ep_bind(w->ep[i], &w->cq[i]->fid,
					    FI_TRANSMIT | FI_RECV),
				 0);
		ck_assert_int_eq(fi_ep_bind(w->ep[i], &w->eq->fid, 0), 0);
		ck_assert_int_eq(fi_enable(w->ep[i]), 0);
	}
	/* one set for all: a join copies the membership */
	ck_assert_int_eq(fi_av_set(w->av, &set_attr, &w->set, NULL), 0);
	ck_assert_int_eq(fi_av_set_addr(w->set, &set_addr), 0);
	for (int i = 0; i < n; i++) {
		w->join[i] = (struct co_ctx){.magic = CO_MAGIC, .member = i};
		ck_assert_int_eq(fi_join_collective(w->ep[i], set_addr, w->set,
						    0, &w->mc[i], &w->join[i]),
				 0);
	}
	co_join_wait(w);
	for (int i = 0; i < n; i++)
		w->coll[i] = fi_mc_addr(w->mc[i]);
	co_over_link(w);
}

static void co_close(struct co_world *w)
{
	for (int i = 0; i < w->n; i++)
		ck_assert_int_eq(fi_close(&w->mc[i]->fid), 0);
	ck_assert_int_eq(fi_close(&w->set->fid), 0);
	for (int i = 0; i < w->n; i++) {
		ck_assert_int_eq(fi_close(&w->ep[i]->fid), 0);
		ck_assert_int_eq(fi_close(&w->cq[i]->fid), 0);
	}
	ck_assert_int_eq(fi_close(&w->eq->fid), 0);
	ck_assert_int_eq(fi_close(&w->av->fid), 0);
	tu_dom_close(&w->d);
}

/* ------------------------------------------------------------------ */
/* Operations                                                           */

static char *co_buf(size_t len, int fill)
{
	char *p = malloc(len + CO_GUARD);

	ck_assert_ptr_nonnull(p);
	memset(p, fill, len);
	memset(p + len, 0xa5, CO_GUARD);
	return p;
}

static void co_note_alg(struct co_world *w, const char *alg)
{
	size_t i;

	for (i = 0; i < sizeof(w->ran) / sizeof(w->ran[0]) && w->ran[i]; i++)
		if (!strcmp(w->ran[i], alg))
			return;
	if (i < sizeof(w->ran) / sizeof(w->ran[0]))
		w->ran[i] = alg;
}

static bool co_alg_ran(const struct co_world *w, const char *alg)
{
	for (size_t i = 0; i < sizeof(w->ran) / sizeof(w->ran[0]); i++)
		if (w->ran[i] && !strcmp(w->ran[i], alg))
			return true;
	return false;
}

/* Buffers filled, results poisoned (0xee), guards set; root is a
 * member. */
static void co_init(struct co_world *w, struct co_run *r,
		    enum fi_collective_op coll, enum fi_datatype dt,
		    enum fi_op op, size_t count, int root)
{
	struct tnbc_mc *mc =
		tnbc_container_of(w->mc[0], struct tnbc_mc, mc_fid);
	size_t n = (size_t)w->n, es = co_es(dt);
	bool many_in = coll == FI_ALLTOALL || coll == FI_SCATTER ||
		       coll == FI_REDUCE_SCATTER;
	bool many_out = coll == FI_ALLGATHER || coll == FI_ALLTOALL ||
			coll == FI_GATHER;

	memset(r, 0, sizeof(*r));
	r->coll = coll;
	r->dt = coll == FI_BARRIER ? FI_INT64 : dt;
	r->op = co_reducing(coll) ? op : FI_NOOP;
	r->count = coll == FI_BARRIER ? 0 : count;
	r->root = co_rooted(coll) ? root % w->n : 0;
	r->salt = ++w->salt;
	r->alg = tnbc_alg_choose(mc, coll, es * r->count)->name;
	co_note_alg(w, r->alg);
	if (co_rooted(coll))
		snprintf(r->what, sizeof(r->what),
			 "%s (%s) of %zu %s%s from root %d", co_coll_name(coll),
			 r->alg, r->count, dt == FI_INT32 ? "int32" : "int64",
			 co_op_name(r->op), r->root);
	else
		snprintf(r->what, sizeof(r->what), "%s (%s) of %zu %s%s",
			 co_coll_name(coll), r->alg, r->count,
			 dt == FI_INT32 ? "int32" : "int64", co_op_name(r->op));
	/* a barrier moves nothing, a broadcast's buffer is in and out */
	r->inlen = es * r->count * (many_in ? n : 1);
	r->outlen =
		coll == FI_BROADCAST ? 0 : es * r->count * (many_out ? n : 1);
	for (int m = 0; m < w->n; m++) {
		bool is_root = m == r->root;

		r->ctx[m] = (struct co_ctx){
			.magic = CO_MAGIC, .member = m, .run = r};
		if (coll == FI_BARRIER)
			continue;
		/* a scatter's non-roots send nothing, a gather's receive
		 * nothing: NULL there, as the caller of the API may */
		if (coll != FI_SCATTER || is_root) {
			r->in[m] = co_buf(r->inlen, 0xee);
			if (coll != FI_BROADCAST || is_root)
				for (size_t k = 0; k < r->inlen / es; k++)
					co_put(dt, r->in[m], k,
					       co_val(r, m, k));
		}
		if (coll != FI_BROADCAST && (coll != FI_GATHER || is_root))
			r->out[m] = co_buf(r->outlen, 0xee);
	}
}

static void co_free(struct co_world *w, struct co_run *r)
{
	for (int m = 0; m < w->n; m++) {
		free(r->in[m]);
		free(r->out[m]);
	}
}

static ssize_t co_post_once(struct co_world *w, struct co_run *r, int m)
{
	struct fid_ep *ep = w->ep[m];
	fi_addr_t coll = w->coll[m], root = w->addr[r->root];
	void *ctx = &r->ctx[m];

	switch (r->coll) {
	case FI_BARRIER:
		return fi_barrier(ep, coll, ctx);
	case FI_BROADCAST:
		return fi_broadcast(ep, r->in[m], r->count, NULL, coll, root,
				    r->dt, 0, ctx);
	case FI_ALLREDUCE:
		return fi_allreduce(ep, r->in[m], r->count, NULL, r->out[m],
				    NULL, coll, r->dt, r->op, 0, ctx);
	case FI_REDUCE:
		return fi_reduce(ep, r->in[m], r->count, NULL, r->out[m], NULL,
				 coll, root, r->dt, r->op, 0, ctx);
	case FI_ALLGATHER:
		return fi_allgather(ep, r->in[m], r->count, NULL, r->out[m],
				    NULL, coll, r->dt, 0, ctx);
	case FI_ALLTOALL:
		return fi_alltoall(ep, r->in[m], r->count, NULL, r->out[m],
				   NULL, coll, r->dt, 0, ctx);
	case FI_REDUCE_SCATTER:
		return fi_reduce_scatter(ep, r->in[m], r->count, NULL,
					 r->out[m], NULL, coll, r->dt, r->op, 0,
					 ctx);
	case FI_SCATTER:
		return fi_scatter(ep, r->in[m], r->count, NULL, r->out[m], NULL,
				  coll, root, r->dt, 0, ctx);
	case FI_GATHER:
		return fi_gather(ep, r->in[m], r->count, NULL, r->out[m], NULL,
				 coll, root, r->dt, 0, ctx);
	default:
		ck_abort_msg("collective %d", (int)r->coll);
		return -FI_EINVAL;
	}
}

/* Reaps every member's completions: each marks its context done. */
static void co_poll(struct co_world *w)
{
	for (int m = 0; m < w->n; m++) {
		struct fi_cq_tagged_entry e[8];
		ssize_t got = fi_cq_read(w->cq[m], e, 8);

		if (got == -FI_EAGAIN)
			continue;
		if (got == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			struct co_ctx *c;

			ck_assert_int_eq(fi_cq_readerr(w->cq[m], &err, 0), 1);
			c = err.op_context;
			ck_abort_msg("%s: %s failed on member %d: err %d (%s)",
				     w->where,
				     c && c->magic == CO_MAGIC ? c->run->what
							       : "?",
				     m, err.err, fi_strerror(err.err));
		}
		ck_assert_msg(got > 0, "%s: fi_cq_read of member %d: %zd",
			      w->where, m, got);
		for (ssize_t i = 0; i < got; i++) {
			struct co_ctx *c = e[i].op_context;

			if (!c || c->magic != CO_MAGIC || c->member != m ||
			    c->done || !(e[i].flags & FI_COLLECTIVE))
				ck_abort_msg("%s: member %d: a completion of "
					     "context %p flags %#" PRIx64
					     " (%s)",
					     w->where, m, (void *)c,
					     (uint64_t)e[i].flags,
					     c && c->magic == CO_MAGIC
						     ? (c->done ? "twice"
								: "not its own")
						     : "not a context posted");
			c->done = true;
		}
	}
}

static void co_post(struct co_world *w, struct co_run *r, int m)
{
	uint64_t end = tu_now_ms() + TU_WAIT_MS;
	ssize_t ret;

	while ((ret = co_post_once(w, r, m)) == -FI_EAGAIN) {
		ck_assert_msg(tu_now_ms() < end,
			      "%s: %s: member %d could not post for %d ms",
			      w->where, r->what, m, TU_WAIT_MS);
		co_poll(w);
	}
	ck_assert_msg(ret == 0, "%s: %s: posting on member %d: %zd (%s)",
		      w->where, r->what, m, ret, fi_strerror((int)-ret));
}

/* Until every member of each run completed. */
static void co_wait(struct co_world *w, struct co_run **runs, int nrun)
{
	uint64_t end = tu_now_ms() + TU_WAIT_MS;

	for (;;) {
		const struct co_run *late = NULL;
		int member = -1, done = 0;

		co_poll(w);
		for (int i = 0; i < nrun; i++)
			for (int m = 0; m < w->n; m++) {
				if (runs[i]->ctx[m].done)
					done++;
				else if (!late) {
					late = runs[i];
					member = m;
				}
			}
		if (!late)
			return;
		if (tu_now_ms() >= end)
			ck_abort_msg("%s: %s: member %d has no completion "
				     "after %d ms (%d of %d parts done)",
				     w->where, late->what, member, TU_WAIT_MS,
				     done, nrun * w->n);
		sched_yield();
	}
}

static void co_expect(const struct co_world *w, const struct co_run *r, int m,
		      const char *buf, const char *which, size_t k,
		      uint64_t want)
{
	uint64_t got = co_get(r->dt, buf, k);

	if (got != want)
		ck_abort_msg("%s: %s: member %d's %s element %zu is %" PRId64
			     " (%#" PRIx64 "), want %" PRId64 " (%#" PRIx64 ")",
			     w->where, r->what, m, which, k, (int64_t)got, got,
			     (int64_t)want, want);
}

static void co_guard(const struct co_world *w, const struct co_run *r, int m,
		     const char *buf, size_t len, const char *which)
{
	for (size_t i = 0; buf && i < CO_GUARD; i++)
		if ((unsigned char)buf[len + i] != 0xa5)
			ck_abort_msg(
				"%s: %s: member %d's %s: byte %zu past its "
				"end written",
				w->where, r->what, m, which, i);
}

static void co_check(const struct co_world *w, const struct co_run *r)
{
	size_t n = (size_t)w->n, c = r->count, es = co_es(r->dt);
	uint64_t *ref = NULL;

	if (co_reducing(r->coll)) {
		size_t nref = r->coll == FI_REDUCE_SCATTER ? n * c : c;

		ref = malloc((nref ? nref : 1) * sizeof(*ref));
		ck_assert_ptr_nonnull(ref);
		for (size_t k = 0; k < nref; k++)
			ref[k] = co_ref(w, r, k);
	}
	for (int m = 0; m < w->n; m++) {
		const char *in = r->in[m], *out = r->out[m];
		bool is_root = m == r->root;

		co_guard(w, r, m, in, r->inlen, "input");
		co_guard(w, r, m, out, r->outlen, "result");
		/* inputs as they were posted */
		if (in && r->coll != FI_BROADCAST)
			for (size_t k = 0; k < r->inlen / es; k++)
				co_expect(w, r, m, in, "input", k,
					  co_val(r, m, k));
		switch (r->coll) {
		case FI_BARRIER:
			break;
		case FI_BROADCAST:
			for (size_t k = 0; k < c; k++)
				co_expect(w, r, m, in, "buffer", k,
					  co_val(r, r->root, k));
			break;
		case FI_ALLREDUCE:
			for (size_t k = 0; k < c; k++)
				co_expect(w, r, m, out, "result", k, ref[k]);
			break;
		case FI_REDUCE:
			for (size_t k = 0; is_root && k < c; k++)
				co_expect(w, r, m, out, "result", k, ref[k]);
			for (size_t k = 0; !is_root && k < r->outlen; k++)
				if ((unsigned char)out[k] != 0xee)
					ck_abort_msg("%s: %s: non-root member "
						     "%d's result byte %zu "
						     "written",
						     w->where, r->what, m, k);
			break;
		case FI_REDUCE_SCATTER:
			for (size_t k = 0; k < c; k++)
				co_expect(w, r, m, out, "result", k,
					  ref[(size_t)m * c + k]);
			break;
		case FI_ALLGATHER:
		case FI_GATHER:
			/* slice j is member j's input */
			for (size_t j = 0; out && j < n; j++)
				for (size_t k = 0; k < c; k++)
					co_expect(w, r, m, out, "result",
						  j * c + k,
						  co_val(r, (int)j, k));
			break;
		case FI_ALLTOALL:
			/* slice j is slice m of member j's input */
			for (size_t j = 0; j < n; j++)
				for (size_t k = 0; k < c; k++)
					co_expect(w, r, m, out, "result",
						  j * c + k,
						  co_val(r, (int)j,
							 (size_t)m * c + k));
			break;
		case FI_SCATTER:
			for (size_t k = 0; k < c; k++)
				co_expect(
					w, r, m, out, "result", k,
					co_val(r, r->root, (size_t)m * c + k));
			break;
		default:
			ck_abort_msg("collective %d", (int)r->coll);
		}
	}
	free(ref);
}

/* One operation alone: posted by every member, starting at member
 * first (so that each member is sometimes the last to come, and
 * packets sometimes wait for their receives), then checked. */
static void co_one(struct co_world *w, enum fi_collective_op coll,
		   enum fi_datatype dt, enum fi_op op, size_t count, int root,
		   int first)
{
	struct co_run *r = malloc(sizeof(*r));

	ck_assert_ptr_nonnull(r);
	co_init(w, r, coll, dt, op, count, root);
	for (int i = 0; i < w->n; i++)
		co_post(w, r, (first + i) % w->n);
	co_wait(w, &r, 1);
	co_check(w, r);
	co_free(w, r);
	free(r);
}

/* A barrier lets nobody out before the last member came: last comes
 * after the others were watched for a while. */
static void co_barrier(struct co_world *w, int last)
{
	struct co_run r;
	struct co_run *rp = &r;
	uint64_t end;

	co_init(w, &r, FI_BARRIER, FI_INT64, FI_NOOP, 0, 0);
	for (int i = 1; i < w->n; i++)
		co_post(w, &r, (last + i) % w->n);
	for (end = tu_now_ms() + CO_EARLY_MS; tu_now_ms() < end;) {
		co_poll(w);
		for (int m = 0; m < w->n; m++)
			if (r.ctx[m].done)
				ck_abort_msg("%s: %s: member %d left before "
					     "member %d came",
					     w->where, r.what, m, last);
		sched_yield();
	}
	co_post(w, &r, last);
	co_wait(w, &rp, 1);
	co_free(w, &r);
}

/* ------------------------------------------------------------------ */
/* The list                                                             */

enum { CO_ONE, CO_SMALL, CO_MID, CO_BIG, CO_NCOUNT };

/* Elements of dt at each size: one; one reduction packet's worth
 * (40 B); more than a packet, eager; a slice of more than the eager
 * size and the rsag threshold. */
static size_t co_count(int which, enum fi_datatype dt)
{
	size_t big = tnbc_env.eager_size > tnbc_env.coll_rsag_min
			     ? tnbc_env.eager_size
			     : tnbc_env.coll_rsag_min;

	switch (which) {
	case CO_ONE:
		return 1;
	case CO_SMALL:
		return 40 / co_es(dt);
	case CO_MID:
		return 613;
	default:
		return big / co_es(dt) + 3;
	}
}

/* A root other than 0 but for the single elements, each size another. */
static int co_root(const struct co_world *w, int which)
{
	int n = w->n;

	switch (which) {
	case CO_ONE:
		return 0;
	case CO_SMALL:
		return n - 1;
	case CO_MID:
		return n / 2;
	default:
		return 1 % n;
	}
}

#define CO_ALL	((1u << CO_NCOUNT) - 1)
#define CO_C(c) (1u << (c))

static const struct co_step {
	enum fi_collective_op coll;
	enum fi_datatype dt;
	enum fi_op op;
	unsigned counts; /* CO_C(CO_*) */
} co_steps[] = {
	{FI_BROADCAST, FI_INT64, FI_NOOP, CO_ALL},
	{FI_ALLREDUCE, FI_INT64, FI_SUM, CO_ALL},
	{FI_ALLREDUCE, FI_INT64, FI_MIN, CO_C(CO_SMALL) | CO_C(CO_BIG)},
	{FI_ALLREDUCE, FI_INT64, FI_MAX, CO_C(CO_SMALL) | CO_C(CO_MID)},
	{FI_ALLREDUCE, FI_UINT64, FI_BAND, CO_C(CO_SMALL) | CO_C(CO_BIG)},
	{FI_ALLREDUCE, FI_INT32, FI_SUM, CO_C(CO_SMALL) | CO_C(CO_BIG)},
	{FI_REDUCE, FI_INT64, FI_SUM, CO_ALL},
	{FI_REDUCE, FI_INT64, FI_MAX, CO_C(CO_SMALL)},
	{FI_REDUCE, FI_UINT64, FI_BAND, CO_C(CO_MID)},
	{FI_ALLGATHER, FI_INT64, FI_NOOP, CO_ALL},
	{FI_ALLTOALL, FI_INT64, FI_NOOP, CO_ALL},
	{FI_REDUCE_SCATTER, FI_INT64, FI_SUM, CO_ALL},
	{FI_REDUCE_SCATTER, FI_INT64, FI_MIN, CO_C(CO_SMALL)},
	{FI_REDUCE_SCATTER, FI_INT32, FI_SUM, CO_C(CO_MID)},
	{FI_SCATTER, FI_INT64, FI_NOOP, CO_ALL},
	{FI_GATHER, FI_INT64, FI_NOOP, CO_ALL},
};

static void co_each(struct co_world *w)
{
	int first = 0;

	co_barrier(w, w->n - 1);
	co_barrier(w, 0);
	for (size_t s = 0; s < sizeof(co_steps) / sizeof(co_steps[0]); s++) {
		const struct co_step *st = &co_steps[s];

		for (int c = 0; c < CO_NCOUNT; c++)
			if (st->counts & CO_C(c))
				co_one(w, st->coll, st->dt, st->op,
				       co_count(c, st->dt), co_root(w, c),
				       first++);
	}
}

/* Several operations in flight on the group: each member posts all of
 * them before anybody waits, so that their packets, of several
 * algorithms, meet on the wire and in the unexpected queues. */
static void co_inflight(struct co_world *w)
{
	static const struct {
		enum fi_collective_op coll;
		enum fi_datatype dt;
		enum fi_op op;
		int which; /* CO_ONE .. CO_BIG */
	} batch[] = {
		{FI_ALLREDUCE, FI_INT64, FI_SUM, CO_SMALL},
		{FI_ALLREDUCE, FI_INT64, FI_MAX, CO_BIG},
		{FI_BARRIER, FI_INT64, FI_NOOP, CO_ONE},
		{FI_ALLREDUCE, FI_UINT64, FI_BAND, CO_MID},
		{FI_BROADCAST, FI_INT64, FI_NOOP, CO_MID},
		{FI_ALLTOALL, FI_INT64, FI_NOOP, CO_SMALL},
		{FI_REDUCE_SCATTER, FI_INT64, FI_SUM, CO_MID},
		{FI_GATHER, FI_INT64, FI_NOOP, CO_SMALL},
		{FI_REDUCE, FI_INT64, FI_SUM, CO_BIG},
		{FI_ALLREDUCE, FI_INT64, FI_MIN, CO_ONE},
	};
	enum { NB = sizeof(batch) / sizeof(batch[0]) };
	struct co_run *runs[NB];

	for (int b = 0; b < NB; b++) {
		int c = batch[b].which;

		runs[b] = malloc(sizeof(*runs[b]));
		ck_assert_ptr_nonnull(runs[b]);
		co_init(w, runs[b], batch[b].coll, batch[b].dt, batch[b].op,
			co_count(c, batch[b].dt),
			co_root(w, (b + c) % CO_NCOUNT));
	}
	/* member by member, from the last: member n - 1 has all of them
	 * posted before member 0 has any */
	for (int m = w->n - 1; m >= 0; m--)
		for (int b = 0; b < NB; b++)
			co_post(w, runs[b], m);
	co_wait(w, runs, NB);
	for (int b = 0; b < NB; b++) {
		co_check(w, runs[b]);
		co_free(w, runs[b]);
		free(runs[b]);
	}
}

/* ------------------------------------------------------------------ */
/* The cases                                                            */

static char co_pin_flat[] = "allreduce=flat,barrier=flat";
static char co_pin_rsag[] = "allreduce=rsag";
static char co_pin_desc[] = "desc";

static const struct co_setup {
	const char *name;
	char *pins; /* FI_TNBC_COLL_ALG; NULL: automatic */
	size_t degree, seg; /* FI_TNBC_COLL_DEGREE, _SEG; 0: the default */
	/* what must have run, in groups of two and more / of one (flat
	 * and rsag need a second member) */
	const char *must[3], *must1[3];
} co_setups[] = {
	{
		.name = "automatic",
		.must = {"desc", "direct", "rsag"},
		.must1 = {"desc", "direct"},
	},
	{
		.name = "allreduce=flat,barrier=flat",
		.pins = co_pin_flat,
		.must = {"flat"},
	},
	{
		.name = "allreduce=rsag",
		.pins = co_pin_rsag,
		.must = {"rsag"},
	},
	/* a binary tree, deeper than the default's (degree 8), and
	 * segments of 1 KiB: 5 of them at 4904 B, 33 at the largest */
	{
		.name = "desc, degree 2, segments of 1 KiB",
		.pins = co_pin_desc,
		.degree = 2,
		.seg = 1024,
		.must = {"desc"},
		.must1 = {"desc"},
	},
};

enum { CO_AUTO, CO_FLAT, CO_RSAG, CO_DESC };

static void co_run_setup(int n, int which)
{
	const struct co_setup *su = &co_setups[which];
	struct tnbc_env saved = tnbc_env;
	struct co_world w;

	/* before the first collective: the table reads the pins once */
	tnbc_env.coll_alg = su->pins;
	if (su->degree)
		tnbc_env.coll_degree = su->degree;
	if (su->seg)
		tnbc_env.coll_seg = su->seg;
	co_open(&w, n, su->name);
	co_each(&w);
	co_inflight(&w);
	for (int i = 0; i < 3; i++) {
		const char *alg = n > 1 ? su->must[i] : su->must1[i];

		ck_assert_msg(!alg || co_alg_ran(&w, alg),
			      "%s: %s never ran (the pins were read before "
			      "this test set them: CK_FORK=no?)",
			      w.where, alg);
	}
	co_close(&w);
	tnbc_env = saved;
}

/* _i + 1 members */
START_TEST(coll_automatic)
{
	co_run_setup(_i + 1, CO_AUTO);
}
END_TEST

START_TEST(coll_flat)
{
	co_run_setup(_i + 1, CO_FLAT);
}
END_TEST

START_TEST(coll_rsag)
{
	co_run_setup(_i + 1, CO_RSAG);
}
END_TEST

START_TEST(coll_desc)
{
	co_run_setup(_i + 1, CO_DESC);
}
END_TEST

/*
 * The direct exchange with counts that differ between the members
 * (member 0 posts 2 elements a slice, the others 3): every member's
 * operation must fail.  Member 0's receives are truncated; the others'
 * are short, and used to complete as if whole, so that they succeeded
 * on what they never received.  Loop: reduce_scatter, alltoall,
 * allgather.
 */
START_TEST(coll_direct_mismatch)
{
	static const enum fi_collective_op colls[] = {
		FI_REDUCE_SCATTER, FI_ALLTOALL, FI_ALLGATHER};
	enum fi_collective_op coll = colls[_i];
	struct tnbc_env saved = tnbc_env;
	struct co_world w;
	int64_t in[CO_MAX][3 * 4], out[CO_MAX][3 * 4];
	int ctxs[CO_MAX], failed = 0, ok = 0;
	bool seen[CO_MAX] = {false};
	uint64_t end;

	static char pins[] = "alltoall=direct,allgather=direct,"
			     "reduce_scatter=direct";

	tnbc_env.coll_alg = pins;
	co_open(&w, 3, "direct, mismatched counts");
	for (int m = 0; m < w.n; m++) {
		size_t count = m ? 3 : 2;
		ssize_t ret;

		for (int k = 0; k < 12; k++)
			in[m][k] = m * 100 + k;
		end = tu_now_ms() + TU_WAIT_MS;
		do {
			ret = coll == FI_REDUCE_SCATTER
				      ? fi_reduce_scatter(w.ep[m], in[m], count,
							  NULL, out[m], NULL,
							  w.coll[m], FI_INT64,
							  FI_SUM, 0, &ctxs[m])
			      : coll == FI_ALLTOALL
				      ? fi_alltoall(w.ep[m], in[m], count, NULL,
						    out[m], NULL, w.coll[m],
						    FI_INT64, 0, &ctxs[m])
				      : fi_allgather(w.ep[m], in[m], count,
						     NULL, out[m], NULL,
						     w.coll[m], FI_INT64, 0,
						     &ctxs[m]);
		} while (ret == -FI_EAGAIN && tu_now_ms() < end);
		ck_assert_int_eq(ret, 0);
	}
	end = tu_now_ms() + TU_WAIT_MS;
	while (failed + ok < w.n && tu_now_ms() < end) {
		for (int m = 0; m < w.n; m++) {
			struct fi_cq_tagged_entry e;
			struct fi_cq_err_entry err = {0};
			ssize_t got;

			if (seen[m])
				continue;
			got = fi_cq_read(w.cq[m], &e, 1);
			if (got == -FI_EAVAIL) {
				ck_assert_int_eq(
					fi_cq_readerr(w.cq[m], &err, 0), 1);
				ck_assert_ptr_eq(err.op_context, &ctxs[m]);
				seen[m] = true;
				failed++;
			} else if (got == 1) {
				ck_assert_ptr_eq(e.op_context, &ctxs[m]);
				seen[m] = true;
				ok++;
			}
		}
		sched_yield();
	}
	ck_assert_msg(failed == w.n,
		      "%s with mismatched counts: %d of %d members failed, "
		      "%d succeeded",
		      co_coll_name(coll), failed, w.n, ok);
	co_close(&w);
	tnbc_env = saved;
}
END_TEST

Suite *tu_coll_suite(void)
{
	Suite *s = suite_create("coll");
	TCase *tc = tcase_create("coll");

	tcase_set_timeout(tc, 2 * TU_TCASE_TIMEOUT);
	tcase_add_loop_test(tc, coll_automatic, 0, CO_MAX);
	tcase_add_loop_test(tc, coll_flat, 0, CO_MAX);
	tcase_add_loop_test(tc, coll_rsag, 0, CO_MAX);
	tcase_add_loop_test(tc, coll_desc, 0, CO_MAX);
	tcase_add_loop_test(tc, coll_direct_mismatch, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}
