/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Posting collectives: fi_collective(3) calls on the communicator's
 * group, and alltoallv, which libfabric lacks, as a schedule of tagged
 * receives and sends the engine runs to the end.
 *
 * MPI_IN_PLACE arrives as sbuf == NULL.  The provider never reads a
 * buffer it writes, so the input an in-place call keeps in the result
 * buffer is copied out first (tg_req.tmp, freed with the request).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "tg_priv.h"

/* An element's size, as the provider tells it (a data mover takes any
 * datatype it knows). */
static size_t tg_dt_size(enum fi_datatype dt)
{
	struct fi_collective_attr attr = {.op = FI_NOOP, .datatype = dt};

	return fi_query_collective(tg.domain, FI_GATHER, &attr, 0)
		       ? 0
		       : attr.datatype_attr.size;
}

/* The provider's answers, asked once per (collective, datatype, op):
 * 0 unknown, 1 yes, 2 no.  The answer of one domain never changes. */
static _Atomic uint8_t
	tg_qcache[FI_GATHER + 1][FI_DATATYPE_LAST][FI_ATOMIC_OP_LAST];

bool tg_query(enum fi_collective_op coll, enum fi_datatype dt, enum fi_op op)
{
	struct fi_collective_attr attr = {.op = op, .datatype = dt};
	uint8_t q;

	if (!tg.ready)
		return false;
	if ((unsigned)coll > FI_GATHER || (unsigned)dt >= FI_DATATYPE_LAST ||
	    (unsigned)op >= FI_ATOMIC_OP_LAST)
		return !fi_query_collective(tg.domain, coll, &attr, 0);
	q = atomic_load_explicit(&tg_qcache[coll][dt][op],
				 memory_order_relaxed);
	if (!q) {
		q = fi_query_collective(tg.domain, coll, &attr, 0) ? 2 : 1;
		atomic_store_explicit(&tg_qcache[coll][dt][op], q,
				      memory_order_relaxed);
	}
	return q == 1;
}

/* Enters the core for one post: the group joined, req counted. */
static int tg_begin(struct tg_comm *c)
{
	int ret;

	if (!tg.ready)
		return -FI_EOPBADSTATE;
	pthread_mutex_lock(&tg.lock);
	ret = tg_comm_join(c);
	if (ret)
		pthread_mutex_unlock(&tg.lock);
	return ret;
}

/* Leaves it: a posted operation is counted in flight, a refused one
 * leaves req as it was (the caller falls back). */
static int tg_end(struct tg_comm *c, struct tg_req *req, int ret, int parts)
{
	if (!ret)
		tg_req_posted(req, c, parts);
	else {
		free(req->tmp);
		req->tmp = NULL;
		free(req->sink);
		req->sink = NULL;
	}
	pthread_mutex_unlock(&tg.lock);
	return ret;
}

static int tg_keep(struct tg_req *req, const void *src, size_t len)
{
	req->tmp = malloc(len ? len : 1);
	if (!req->tmp)
		return -FI_ENOMEM;
	memcpy(req->tmp, src, len);
	return 0;
}

int tg_barrier(struct tg_comm *c, struct tg_req *req)
{
	int ret = tg_begin(c);

	if (ret)
		return ret;
	ret = TG_POST(fi_barrier(tg.ep, c->coll, req));
	return tg_end(c, req, ret, 1);
}

int tg_bcast(struct tg_comm *c, void *buf, size_t bytes, int root,
	     struct tg_req *req)
{
	int ret = tg_begin(c);

	if (ret)
		return ret;
	ret = TG_POST(fi_broadcast(tg.ep, buf, bytes, NULL, c->coll,
				   (fi_addr_t)c->world[root], FI_UINT8, 0,
				   req));
	return tg_end(c, req, ret, 1);
}

int tg_allreduce(struct tg_comm *c, const void *sbuf, void *rbuf, size_t count,
		 enum fi_datatype dt, enum fi_op op, struct tg_req *req)
{
	int ret = tg_begin(c);

	if (ret)
		return ret;
	if (!sbuf) {
		ret = tg_keep(req, rbuf, count * tg_dt_size(dt));
		sbuf = req->tmp;
	}
	if (!ret)
		ret = TG_POST(fi_allreduce(tg.ep, sbuf, count, NULL, rbuf, NULL,
					   c->coll, dt, op, 0, req));
	return tg_end(c, req, ret, 1);
}

int tg_reduce(struct tg_comm *c, const void *sbuf, void *rbuf, size_t count,
	      enum fi_datatype dt, enum fi_op op, int root, struct tg_req *req)
{
	int ret = tg_begin(c);

	if (ret)
		return ret;
	if (!sbuf) { /* the root's, in place */
		ret = tg_keep(req, rbuf, count * tg_dt_size(dt));
		sbuf = req->tmp;
	}
	if (!ret)
		ret = TG_POST(fi_reduce(tg.ep, sbuf, count, NULL,
					c->rank == root ? rbuf : NULL, NULL,
					c->coll, (fi_addr_t)c->world[root], dt,
					op, 0, req));
	return tg_end(c, req, ret, 1);
}

int tg_reduce_scatter_block(struct tg_comm *c, const void *sbuf, void *rbuf,
			    size_t count, enum fi_datatype dt, enum fi_op op,
			    struct tg_req *req)
{
	int ret = tg_begin(c);

	if (ret)
		return ret;
	if (!sbuf) {
		ret = tg_keep(req, rbuf, count * tg_dt_size(dt) * c->size);
		sbuf = req->tmp;
	}
	if (!ret)
		ret = TG_POST(fi_reduce_scatter(tg.ep, sbuf, count, NULL, rbuf,
						NULL, c->coll, dt, op, 0, req));
	return tg_end(c, req, ret, 1);
}

int tg_reduce_scatter(struct tg_comm *c, const void *sbuf, void *rbuf,
		      const int *counts, enum fi_datatype dt, enum fi_op op,
		      struct tg_req *req)
{
	size_t es = tg_dt_size(dt), max = 0, at = 0;
	bool even = true;
	const char *in;
	int ret;

	for (int i = 0; i < c->size; i++) {
		if (counts[i] < 0)
			return -FI_EINVAL;
		if ((size_t)counts[i] > max)
			max = (size_t)counts[i];
		even = even && counts[i] == counts[0];
	}
	if (!es || !max)
		return -FI_EINVAL;
	if (even)
		return tg_reduce_scatter_block(c, sbuf, rbuf, max, dt, op, req);
	ret = tg_begin(c);
	if (ret)
		return ret;
	/* The provider's blocks are even: every block is padded to the
	 * largest (zeros, folded like the rest and never read), and the
	 * result lands in a block of that size, this member's part of it
	 * copied out once it is done. */
	in = sbuf ? sbuf : rbuf;
	req->tmp = calloc((size_t)c->size, max * es);
	req->sink = malloc(max * es);
	if (!req->tmp || !req->sink) {
		ret = -FI_ENOMEM;
		goto out;
	}
	for (int i = 0; i < c->size; i++) {
		memcpy((char *)req->tmp + (size_t)i * max * es, in + at,
		       (size_t)counts[i] * es);
		at += (size_t)counts[i] * es;
	}
	req->copy_out = rbuf;
	req->copy_len = (size_t)counts[c->rank] * es;
	ret = TG_POST(fi_reduce_scatter(tg.ep, req->tmp, max, NULL, req->sink,
					NULL, c->coll, dt, op, 0, req));
out:
	if (ret)
		req->copy_out = NULL;
	return tg_end(c, req, ret, 1);
}

int tg_allgather(struct tg_comm *c, const void *sbuf, void *rbuf, size_t bytes,
		 struct tg_req *req)
{
	int ret = tg_begin(c);

	if (ret)
		return ret;
	if (!sbuf) {
		ret = tg_keep(req, (char *)rbuf + bytes * c->rank, bytes);
		sbuf = req->tmp;
	}
	if (!ret)
		ret = TG_POST(fi_allgather(tg.ep, sbuf, bytes, NULL, rbuf, NULL,
					   c->coll, FI_UINT8, 0, req));
	return tg_end(c, req, ret, 1);
}

int tg_alltoall(struct tg_comm *c, const void *sbuf, void *rbuf, size_t bytes,
		struct tg_req *req)
{
	int ret = tg_begin(c);

	if (ret)
		return ret;
	if (!sbuf) {
		ret = tg_keep(req, rbuf, bytes * c->size);
		sbuf = req->tmp;
	}
	if (!ret)
		ret = TG_POST(fi_alltoall(tg.ep, sbuf, bytes, NULL, rbuf, NULL,
					  c->coll, FI_UINT8, 0, req));
	return tg_end(c, req, ret, 1);
}

int tg_gather(struct tg_comm *c, const void *sbuf, void *rbuf, size_t bytes,
	      int root, struct tg_req *req)
{
	int ret = tg_begin(c);

	if (ret)
		return ret;
	if (!sbuf) { /* the root's slice is in place */
		ret = tg_keep(req, (char *)rbuf + bytes * c->rank, bytes);
		sbuf = req->tmp;
	}
	if (!ret)
		ret = TG_POST(fi_gather(tg.ep, sbuf, bytes, NULL,
					c->rank == root ? rbuf : NULL, NULL,
					c->coll, (fi_addr_t)c->world[root],
					FI_UINT8, 0, req));
	return tg_end(c, req, ret, 1);
}

int tg_scatter(struct tg_comm *c, const void *sbuf, void *rbuf, size_t bytes,
	       int root, struct tg_req *req)
{
	int ret = tg_begin(c);

	if (ret)
		return ret;
	if (!rbuf) { /* the root keeps its slice where it is */
		req->sink = malloc(bytes ? bytes : 1);
		rbuf = req->sink;
		ret = rbuf ? 0 : -FI_ENOMEM;
	}
	if (!ret)
		ret = TG_POST(fi_scatter(tg.ep, c->rank == root ? sbuf : NULL,
					 bytes, NULL, rbuf, NULL, c->coll,
					 (fi_addr_t)c->world[root], FI_UINT8, 0,
					 req));
	return tg_end(c, req, ret, 1);
}

/* ------------------------------------------------------------------ */
/* Alltoallv: a schedule of tagged messages                             */

int tg_a2a_send(struct tg_comm *c, int to, const char *buf, size_t len,
		bool cut, int pass, uint64_t tag, struct tg_req *req,
		int *posted)
{
	struct tg_a2a_piece p[TG_A2A_TAGS];
	int np = len ? tg_a2a_cut(len, cut, p) : 0;

	for (int q = 0; q < np; q++) {
		int ret;

		if (p[q].edge != !pass)
			continue;
		ret = TG_POST(fi_tsend(tg.ep, p[q].len ? buf + p[q].off : NULL,
				       p[q].len, NULL, (fi_addr_t)c->world[to],
				       tg_a2a_tag(tag, p[q].piece), req));
		if (ret)
			return ret;
		(*posted)++;
	}
	return 0;
}

/*
 * One message each way per member with a non-empty count, tagged with
 * the group's id and the operation's number on the group (the same on
 * every member: MPI orders collectives per communicator), from the
 * member's own address, so nothing else on the endpoint can match it.
 * Receives go first, so most messages find theirs posted.
 */
int tg_alltoallv(struct tg_comm *c, const void *sbuf, const size_t *scounts,
		 const size_t *sdispls, void *rbuf, const size_t *rcounts,
		 const size_t *rdispls, bool cut, struct tg_req *req)
{
	int ret = 0, parts = 0, posted = 0;
	uint64_t tag;

	if (!tg.ready)
		return -FI_EOPBADSTATE;
	pthread_mutex_lock(&tg.lock);
	tag = (uint64_t)c->id << 32 | c->seq;
	if (!sbuf) {
		size_t end = 0;

		for (int i = 0; i < c->size; i++)
			if (rcounts[i] && rdispls[i] + rcounts[i] > end)
				end = rdispls[i] + rcounts[i];
		ret = tg_keep(req, rbuf, end);
		if (ret)
			goto out;
		sbuf = req->tmp;
		scounts = rcounts;
		sdispls = rdispls;
	}
	for (int i = 0; i < c->size; i++)
		if (i != c->rank)
			parts += tg_a2a_nparts(rcounts[i], cut) +
				 tg_a2a_nparts(scounts[i], cut);
	/* the self part is done before anything is posted; an exchange
	 * with nothing to move is complete at once */
	if (rcounts[c->rank])
		memcpy((char *)rbuf + rdispls[c->rank],
		       (const char *)sbuf + sdispls[c->rank],
		       rcounts[c->rank] < scounts[c->rank] ? rcounts[c->rank]
							   : scounts[c->rank]);
	c->seq += cut ? TG_A2A_TAGS : 1;
	tg_req_posted(req, c, parts + 1);
	for (int k = 1; k < c->size; k++) {
		int i = (c->rank + c->size - k) % c->size;
		struct tg_a2a_piece p[TG_A2A_TAGS];
		int np = rcounts[i] ? tg_a2a_cut(rcounts[i], cut, p) : 0;

		for (int q = 0; q < np; q++) {
			ret = TG_POST(fi_trecv(
				tg.ep, (char *)rbuf + rdispls[i] + p[q].off,
				p[q].len, NULL, (fi_addr_t)c->world[i],
				tg_a2a_tag(tag, p[q].piece), 0, req));
			if (ret)
				goto broken;
			posted++;
		}
	}
	/* the edges first (a T-NBC member's call waits for them), then the
	 * bodies */
	for (int pass = 0; pass < 2; pass++)
		for (int k = 1; k < c->size; k++) {
			int i = (c->rank + k) % c->size;

			ret = tg_a2a_send(c, i, (const char *)sbuf + sdispls[i],
					  scounts[i], cut, pass, tag, req,
					  &posted);
			if (ret)
				goto broken;
		}
	/* the extra part, counted above: complete at once when nothing
	 * was posted, else with the last message */
	tg_req_part_done(req, 0);
	ret = 0;
	goto out;
broken:
	/* The others went on with the exchange, and what was posted cannot
	 * be withdrawn: the operation completes with the error (the MPI
	 * call fails) once what was posted has. */
	atomic_fetch_sub(&req->left, parts - posted);
	tg_req_part_done(req, ret);
	ret = 0;
out:
	pthread_mutex_unlock(&tg.lock);
	return ret;
}

/* ------------------------------------------------------------------ */
/* MAXLOC and MINLOC: seed 002's descriptors                            */

/* Branch degree of the glue's descriptor trees: member i's parent is
 * (i - 1) / TG_LOC_DEGREE, rooted at member 0. */
#define TG_LOC_DEGREE 8

int tg_allreduce_loc(struct tg_comm *c, const void *sbuf, void *rbuf,
		     size_t count, bool wide, int width, bool max,
		     struct tg_req *req)
{
	size_t pair = wide ? sizeof(struct fi_tnbc_loc64)
			   : sizeof(struct fi_tnbc_loc32);
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_tnbc_red_desc r = {.size = sizeof(r)};
	struct fi_tnbc_bcast_desc b = {.size = sizeof(b)};
	const char *in = sbuf ? sbuf : rbuf;
	int me = c->rank, nk = 0, ret;
	void *result;

	if (!tg.ready)
		return -FI_EOPBADSTATE;
	if (!count || count * pair > FI_TNBC_RED_INLINE)
		return -FI_EOPNOTSUPP;
	pthread_mutex_lock(&tg.lock);
	/* the contribution, in the descriptors' layout */
	if (wide) {
		struct fi_tnbc_loc64 *d = (struct fi_tnbc_loc64 *)r.data;

		for (size_t i = 0; i < count; i++) {
			int32_t loc;

			memcpy(&d[i].value, in + i * 16, 8);
			memcpy(&loc, in + i * 16 + 8, 4);
			d[i].loc = loc;
		}
		req->sink = calloc(count, pair);
		if (!req->sink) {
			ret = -FI_ENOMEM;
			goto out;
		}
		req->loc_out = rbuf;
		req->loc_count = count;
		result = req->sink;
	} else {
		memcpy(r.data, in, count * pair);
		result = rbuf;
	}
	for (int k = TG_LOC_DEGREE * me + 1;
	     k <= TG_LOC_DEGREE * me + TG_LOC_DEGREE && k < c->size; k++)
		req->kids[nk++] = (fi_addr_t)c->world[k];
	if (!me) { /* the root's broadcast fires on its reduce's end */
		ret = fi_cntr_open(tg.domain, &ca, &req->cntr, NULL);
		if (ret)
			goto out;
	}
	r.flags = FI_TNBC_RED_CP;
	r.tag = (uint64_t)c->id << 20 | (c->dseq & 0xfffffu);
	r.order = (uint32_t)me;
	r.degree = TG_LOC_DEGREE;
	r.children = (uint32_t)nk;
	r.cpcnt = (uint64_t)nk;
	r.op = max ? FI_TNBC_RED_MAXLOC : FI_TNBC_RED_MINLOC;
	r.width = (uint8_t)width;
	r.count = (uint16_t)count;
	r.dest = me ? (fi_addr_t)c->world[(me - 1) / TG_LOC_DEGREE]
		    : FI_ADDR_NOTAVAIL;
	r.result = me ? NULL : result;
	r.comp_cntr = me ? NULL : req->cntr;
	r.context = req;
	b.tag = r.tag;
	b.trig_cntr = me ? NULL : req->cntr;
	b.threshold = 1;
	b.src = me ? r.dest : FI_ADDR_UNSPEC;
	b.dests = req->kids;
	b.ndests = (size_t)nk;
	b.result = result;
	b.len = count * pair;
	b.context = req;
	/* the root: one completion (the broadcast's; the reduce's goes to
	 * the counter); the others: the reduce's and the broadcast's */
	tg_req_posted(req, c, me ? 2 : 1);
	/* The reduce first: its checks are the same on every member, so a
	 * refusal is everyone's, and all fall back alike.  The root's
	 * broadcast, posted after, finds its counter already reached if the
	 * reduce ended meanwhile; a result that reaches a member before its
	 * broadcast descriptor waits for it, as contributions do. */
	ret = tg.coll_ops->reduce(tg.ep, &r);
	if (ret)
		goto unpost;
	c->dseq++;
	ret = tg.coll_ops->bcast(tg.ep, &b);
	if (ret) {
		/* the reduce went out: the call fails once it is done (the
		 * root's reduce counts in the counter only: fail it now) */
		tg_req_part_done(req, ret);
	}
	pthread_mutex_unlock(&tg.lock);
	return 0;
unpost:
	req->posted = false;
	atomic_fetch_sub(&c->inflight, 1);
out:
	if (req->cntr) {
		fi_close(&req->cntr->fid);
		req->cntr = NULL;
	}
	free(req->sink);
	req->sink = NULL;
	req->loc_out = NULL;
	pthread_mutex_unlock(&tg.lock);
	return ret;
}
