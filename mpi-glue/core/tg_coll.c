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

/* Under tg.lock: posts one operation, making room while the provider
 * says its queues are full. */
#define TG_POST(call)                                                          \
	({                                                                     \
		ssize_t _r;                                                    \
		while ((_r = (call)) == -FI_EAGAIN)                            \
			tg_poll_held();                                        \
		(int)_r;                                                       \
	})

static size_t tg_dt_size(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8:
	case FI_UINT8:
		return 1;
	case FI_INT16:
	case FI_UINT16:
		return 2;
	case FI_INT32:
	case FI_UINT32:
	case FI_FLOAT:
		return 4;
	case FI_INT64:
	case FI_UINT64:
	case FI_DOUBLE:
	case FI_FLOAT_COMPLEX:
		return 8;
	case FI_DOUBLE_COMPLEX:
		return 16;
	case FI_LONG_DOUBLE:
		return sizeof(long double);
	case FI_LONG_DOUBLE_COMPLEX:
		return 2 * sizeof(long double);
	default:
		return 0;
	}
}

bool tg_query(enum fi_collective_op coll, enum fi_datatype dt, enum fi_op op)
{
	struct fi_collective_attr attr = {.op = op, .datatype = dt};

	return tg.ready && !fi_query_collective(tg.domain, coll, &attr, 0);
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

/*
 * One message each way per member with a non-empty count, tagged with
 * the group's id and the operation's number on the group (the same on
 * every member: MPI orders collectives per communicator), from the
 * member's own address, so nothing else on the endpoint can match it.
 * Receives go first, so most messages find theirs posted.
 */
int tg_alltoallv(struct tg_comm *c, const void *sbuf, const size_t *scounts,
		 const size_t *sdispls, void *rbuf, const size_t *rcounts,
		 const size_t *rdispls, struct tg_req *req)
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
			parts += (rcounts[i] != 0) + (scounts[i] != 0);
	/* the self part is done before anything is posted; an exchange
	 * with nothing to move is complete at once */
	if (rcounts[c->rank])
		memcpy((char *)rbuf + rdispls[c->rank],
		       (const char *)sbuf + sdispls[c->rank],
		       rcounts[c->rank] < scounts[c->rank] ? rcounts[c->rank]
							   : scounts[c->rank]);
	c->seq++;
	tg_req_posted(req, c, parts + 1);
	for (int k = 1; k < c->size; k++) {
		int i = (c->rank + c->size - k) % c->size;

		if (!rcounts[i])
			continue;
		ret = TG_POST(fi_trecv(tg.ep, (char *)rbuf + rdispls[i],
				       rcounts[i], NULL, (fi_addr_t)c->world[i],
				       tag, 0, req));
		if (ret)
			goto broken;
		posted++;
	}
	for (int k = 1; k < c->size; k++) {
		int i = (c->rank + k) % c->size;

		if (!scounts[i])
			continue;
		ret = TG_POST(fi_tsend(tg.ep, (const char *)sbuf + sdispls[i],
				       scounts[i], NULL, (fi_addr_t)c->world[i],
				       tag, req));
		if (ret)
			goto broken;
		posted++;
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
