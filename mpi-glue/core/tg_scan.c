/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Scan and exclusive scan, which libfabric 1.17 lacks, as a schedule of
 * deferred work the provider's engine runs to the end: tagged sends and
 * receives, and the provider's compute steps (fi_tnbc_work_reduce,
 * fi_tnbc_work_copy) that fold what arrived.  No thread of the glue
 * folds or copies anything, so a non-blocking scan completes while the
 * program computes, like the other collectives, and its post costs the
 * same at every size.
 *
 * The algorithm is recursive doubling (Hillis and Steele): at step k,
 * with d = 2^k, member r sends the fold of members r - 2d + 1 .. r so
 * far to r + d, and folds what r - d sent into it.  After ceil(log2 n)
 * steps member r holds members 0 .. r.  Every predefined MPI op is
 * commutative, so folding a lower member's part in after one's own
 * gives the same value; bitwise for integers, and for floating point
 * within what MPI allows any algorithm.  A member's sends stop once
 * r + d passes the group (ns of them), its receives once r - d goes
 * below 0 (nr).
 *
 * Scan: what is sent is the result so far, so the result buffer is the
 * only one.  One counter per receiving step (g[k]), one (s) for folds a
 * later send waits on, one (done) for the last fold:
 *   copy        rbuf = sbuf, at once (not in place); into g[0], or done
 *   recv[k]     at once, into g[k]
 *   send[0]     the input itself, at once; send[k] rbuf once s counts
 *               the folds before k; into g[k] (rbuf not folded before
 *               it left)
 *   fold[k]     rbuf op= recv[k], once g[k] has its receive, its send,
 *               and the copy or the fold before where no send carries
 *               them; into s where a send follows, else into g[k + 1]
 *               or, the last, done
 * Exscan: the result leaves out one's own part, so what is sent (acc)
 * is a buffer of its own where it is folded at all (nr > 0, ns > 1),
 * copied from the input at once (into g[0]: the first fold of an
 * in-place call overwrites the input); fold_res[k] chains through
 * g[k + 1] into done, the first a copy, and fold_acc[k] counts in s.
 * Either way a message to itself once the last fold is done completes
 * the request: its completion entry, the request's last part, says the
 * result is in place.
 */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>
#include <rdma/fi_trigger.h>

#include "tg_priv.h"

/* Steps of a group of up to 2^31 members. */
#define TG_SCAN_STEPS 31

struct tg_scan_step {
	struct fi_deferred_work recv, send, fold_res, fold_acc;
	struct fi_op_tagged rt, st;
	struct iovec riov, siov;
	struct fi_tnbc_op_reduce res_red, acc_red;
	struct fi_tnbc_op_copy res_copy;
};

struct tg_scan {
	/* s, done, then g[0 .. nr - 1] */
	struct fid_cntr *k[TG_SCAN_STEPS + 2];
	struct fi_deferred_work self_send, self_recv, copy;
	struct fi_op_tagged self_st, self_rt;
	struct iovec self_siov, self_riov;
	struct fi_tnbc_op_copy cp;
	struct tg_scan_step st[TG_SCAN_STEPS];
};

/* Buffers after the schedule, each on its own cache lines. */
#define TG_SCAN_ALIGN 64u

static size_t tg_scan_round(size_t n)
{
	return (n + TG_SCAN_ALIGN - 1) & ~(size_t)(TG_SCAN_ALIGN - 1);
}

static int tg_scan_queue(struct fi_deferred_work *w)
{
	int ret;

	while ((ret = fi_control(&tg.domain->fid, FI_QUEUE_WORK, w)) ==
	       -FI_EAGAIN)
		tg_poll_held();
	return ret;
}

/* A tagged message step of req: its completion entry names req. */
static void tg_scan_msg(struct fi_deferred_work *w, struct fi_op_tagged *t,
			struct iovec *iov, void *buf, size_t len, int peer,
			uint64_t tag, struct tg_comm *c, struct tg_req *req)
{
	*iov = (struct iovec){buf, len};
	t->ep = tg.ep;
	t->msg.msg_iov = iov;
	t->msg.iov_count = 1;
	t->msg.addr = (fi_addr_t)c->world[peer];
	t->msg.tag = tag;
	t->flags = FI_COMPLETION;
	w->op.tagged = t;
	w->context.internal[0] = req;
}

/* A step of w that folds src into dst (dst = dst op src). */
static void tg_scan_fold(struct fi_deferred_work *w,
			 struct fi_tnbc_op_reduce *red, void *dst,
			 const void *src, size_t count, enum fi_datatype dt,
			 enum fi_op op)
{
	*red = (struct fi_tnbc_op_reduce){.size = sizeof(*red),
					  .dst = dst,
					  .src = src,
					  .count = count,
					  .op = op,
					  .datatype = dt};
	fi_tnbc_work_reduce(w, red);
}

int tg_scan(struct tg_comm *c, const void *sbuf, void *rbuf, size_t count,
	    enum fi_datatype dt, enum fi_op op, bool exclusive,
	    struct tg_req *req)
{
	struct fi_collective_attr attr = {.op = FI_NOOP, .datatype = dt};
	int r = c->rank, n = c->size, ns = 0, nr = 0, nk, parts, posted = 0;
	int ret;
	size_t es, len, off;
	struct tg_scan *s;
	const char *in = sbuf ? sbuf : rbuf;
	char *acc = NULL, *rb;
	bool copy, self;
	uint64_t tag;

	if (!tg.ready)
		return -FI_EOPBADSTATE;
	if (fi_query_collective(tg.domain, FI_GATHER, &attr, 0))
		return -FI_EOPNOTSUPP;
	es = attr.datatype_attr.size;
	if (!es || count > SIZE_MAX / 2 / es / (TG_SCAN_STEPS + 1))
		return -FI_EINVAL;
	len = count * es;
	for (long d = 1; d < n; d *= 2) {
		ns += r + d < n;
		nr += r - d >= 0;
	}
	/* scan: the input into the result; exscan: into acc, where acc is
	 * folded at all */
	copy = exclusive ? nr && ns > 1 : sbuf != NULL;
	self = nr || (!exclusive && copy);

	pthread_mutex_lock(&tg.lock);
	ret = tg_comm_join(c);
	if (!ret)
		ret = tg_go_open();
	if (ret)
		goto out;
	if (!count || (!ns && !nr)) {
		/* every member's count is the same: nothing moves; a group
		 * of one: its own part, at once */
		if (count && copy)
			memcpy(rbuf, sbuf, len);
		tg_req_posted(req, c, 1);
		tg_req_part_done(req, 0);
		goto out;
	}
	off = tg_scan_round(sizeof(*s));
	s = malloc(off + tg_scan_round(len) * (size_t)(nr + exclusive * copy));
	if (!s) {
		ret = -FI_ENOMEM;
		goto out;
	}
	memset(s, 0, sizeof(*s));
	nk = nr || copy ? nr + 2 : 0;
	for (int i = 0; i < nk; i++)
		if (!(s->k[i] = tg_cntr_get())) {
			while (i--)
				tg_cntr_put(s->k[i]);
			free(s);
			ret = -FI_ENOMEM;
			goto out;
		}
	rb = (char *)s + off;
	if (exclusive && copy)
		acc = rb + (size_t)nr * tg_scan_round(len);

	tag = (uint64_t)c->id << 32 | c->seq++;
	req->tmp = s;
	req->keep = s->k;
	parts = ns + nr + (self ? 2 : 0);
	tg_req_posted(req, c, parts + 1);

	if (copy) {
		s->copy = (struct fi_deferred_work){
			.triggering_cntr = tg.go,
			.completion_cntr = nr ? s->k[2] : s->k[1]};
		s->cp = (struct fi_tnbc_op_copy){.size = sizeof(s->cp),
						 .dst = exclusive ? acc : rbuf,
						 .src = in,
						 .len = len};
		fi_tnbc_work_copy(&s->copy, &s->cp);
	}
	for (int k = 0; k < nr; k++) {
		struct tg_scan_step *st = &s->st[k];
		char *got = rb + (size_t)k * tg_scan_round(len);
		struct fid_cntr *g = s->k[2 + k], *next;
		/* its receive, its send, and the step before where no send
		 * of this step carries it: the copy (into g[0]) or an
		 * exscan's previous fold_res */
		uint64_t need =
			1 + (k < ns) + (k ? exclusive || k >= ns : copy);

		st->recv = (struct fi_deferred_work){.triggering_cntr = tg.go,
						     .completion_cntr = g,
						     .op_type = FI_OP_TRECV};
		tg_scan_msg(&st->recv, &st->rt, &st->riov, got, len,
			    r - (1 << k), tag, c, req);

		if (!exclusive && k + 1 < ns)
			next = s->k[0];
		else
			next = k + 1 < nr ? s->k[3 + k] : s->k[1];
		st->fold_res =
			(struct fi_deferred_work){.threshold = need,
						  .triggering_cntr = g,
						  .completion_cntr = next};
		if (exclusive && !k) {
			st->res_copy = (struct fi_tnbc_op_copy){
				.size = sizeof(st->res_copy),
				.dst = rbuf,
				.src = got,
				.len = len};
			fi_tnbc_work_copy(&st->fold_res, &st->res_copy);
		} else {
			tg_scan_fold(&st->fold_res, &st->res_red, rbuf, got,
				     count, dt, op);
		}
		if (acc && k + 1 < ns) {
			st->fold_acc = (struct fi_deferred_work){
				.threshold = need,
				.triggering_cntr = g,
				.completion_cntr = s->k[0]};
			tg_scan_fold(&st->fold_acc, &st->acc_red, acc, got,
				     count, dt, op);
		}
	}
	for (int k = 0; k < ns; k++) {
		struct tg_scan_step *st = &s->st[k];
		/* the first send, and every send of a member that folds
		 * nothing into what it sends, carries the input as it is */
		bool now = !k || !nr || (exclusive && !acc);

		st->send = (struct fi_deferred_work){
			.threshold = now ? 0 : (uint64_t)(k < nr ? k : nr),
			.triggering_cntr = now ? tg.go : s->k[0],
			.completion_cntr = k < nr ? s->k[2 + k] : NULL,
			.op_type = FI_OP_TSEND};
		tg_scan_msg(&st->send, &st->st, &st->siov,
			    now		? (void *)in
			    : exclusive ? acc
					: rbuf,
			    len, r + (1 << k), tag, c, req);
	}
	if (self) {
		/* the last fold counts in s where a send follows it */
		bool in_s = !exclusive && nr && nr < ns;

		s->self_recv = (struct fi_deferred_work){
			.triggering_cntr = tg.go, .op_type = FI_OP_TRECV};
		tg_scan_msg(&s->self_recv, &s->self_rt, &s->self_riov, NULL, 0,
			    r, tag, c, req);
		s->self_send = (struct fi_deferred_work){
			.threshold = in_s ? (uint64_t)nr : 1,
			.triggering_cntr = in_s ? s->k[0] : s->k[1],
			.op_type = FI_OP_TSEND};
		tg_scan_msg(&s->self_send, &s->self_st, &s->self_siov, NULL, 0,
			    r, tag, c, req);
	}

	/* Receives first, so that most messages find theirs posted; the
	 * folds before the sends whose completions release them. */
	for (int k = 0; k < nr && !ret; k++) {
		ret = tg_scan_queue(&s->st[k].recv);
		posted += !ret;
	}
	if (self && !ret) {
		ret = tg_scan_queue(&s->self_recv);
		posted += !ret;
	}
	if (copy && !ret)
		ret = tg_scan_queue(&s->copy);
	for (int k = 0; k < nr && !ret; k++) {
		ret = tg_scan_queue(&s->st[k].fold_res);
		if (!ret && acc && k + 1 < ns)
			ret = tg_scan_queue(&s->st[k].fold_acc);
	}
	if (self && !ret) {
		ret = tg_scan_queue(&s->self_send);
		posted += !ret;
	}
	for (int k = 0; k < ns && !ret; k++) {
		ret = tg_scan_queue(&s->st[k].send);
		posted += !ret;
	}
	if (ret) {
		/* What was queued cannot be withdrawn once it may have
		 * started, and may still wait on these counters and read
		 * this memory: both are left to it (a leak on a path only
		 * exhausted memory takes).  The operation completes with
		 * the error once what was posted has. */
		req->tmp = NULL;
		req->keep = NULL;
		atomic_fetch_sub(&req->left, parts - posted);
		tg_req_part_done(req, ret);
		ret = 0;
		goto out;
	}
	req->nkeep = nk;
	tg_req_part_done(req, 0); /* the extra part */
out:
	pthread_mutex_unlock(&tg.lock);
	return ret;
}
