/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_collective(3): joins, the joined group (struct tnbc_mc), the
 * collective calls and fi_query_collective.  This layer validates, maps
 * addresses to members and picks an algorithm; the schedules are built in
 * tnbc_alg_*.c and run by the trigger unit.
 *
 * Where fi_collective(3) is silent this follows libfabric's own
 * collectives and the cxi provider: root_addr is the root's fi_addr_t in
 * the AV; for allgather, alltoall, reduce_scatter, scatter and gather,
 * count is one member's slice.  Operations on one group must be posted
 * in the same order on every member.
 *
 * Locks: ep->lock guards ep->groups (and the join table); nothing here
 * runs under it but list walks.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "tnbc_coll.h"
#include "tnbc_sched.h"
#include "../tnbc_unsupp.h"
#include "../tnbc_alu.h"
#include "../tnbc_eq.h"
#include "../tnbc_lock.h"
#include "../tnbc_av_set.h"

/* Joins of one membership an endpoint has made: the count makes the
 * group's id, so that a set joined twice gets two ids on every
 * member. */
struct tnbc_coll_joins {
	struct tnbc_list entry;
	uint64_t hash;
	uint32_t count;
};

/* ------------------------------------------------------------------ */
/* Validation                                                           */

static bool tnbc_coll_reducing(enum fi_collective_op coll)
{
	return coll == FI_ALLREDUCE || coll == FI_REDUCE ||
	       coll == FI_REDUCE_SCATTER;
}

/* Whether op and dt make sense for coll: -FI_EOPNOTSUPP if not. */
static int tnbc_coll_check_type(enum fi_collective_op coll, enum fi_op op,
				enum fi_datatype dt)
{
	if (coll == FI_BARRIER)
		return 0;
	if ((unsigned)coll > FI_GATHER)
		return -FI_EOPNOTSUPP;
	if (tnbc_coll_reducing(coll))
		return op >= FI_MIN && op <= FI_BXOR &&
				       tnbc_alu_valid(TNBC_ATOMIC_PLAIN, op, dt)
			       ? 0
			       : -FI_EOPNOTSUPP;
	return tnbc_alu_size(dt) ? 0 : -FI_EOPNOTSUPP;
}

/* The largest count of one call (elements): one message's limit. */
static size_t tnbc_coll_max_count(enum fi_datatype dt)
{
	size_t es = tnbc_alu_size(dt);

	return es ? TNBC_MAX_MSG_SIZE / es : 0;
}

int tnbc_coll_query(struct fid_domain *domain, enum fi_collective_op coll,
		    struct fi_collective_attr *attr, uint64_t flags)
{
	int ret;

	if (!domain || !attr || flags)
		return -FI_EINVAL;
	if (coll == FI_BARRIER) {
		if (attr->op != FI_NOOP)
			return -FI_EOPNOTSUPP;
	} else if (!tnbc_coll_reducing(coll) && attr->op != FI_NOOP) {
		return -FI_EOPNOTSUPP;
	}
	ret = tnbc_coll_check_type(coll, attr->op, attr->datatype);
	if (ret)
		return ret;
	if (coll == FI_BARRIER) {
		attr->datatype_attr.count = 0;
		attr->datatype_attr.size = 0;
	} else {
		attr->datatype_attr.count = tnbc_coll_max_count(attr->datatype);
		attr->datatype_attr.size = tnbc_alu_size(attr->datatype);
	}
	attr->max_members = (size_t)TNBC_AV_CHUNK * TNBC_AV_MAX_CHUNKS;
	attr->mode = 0;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The group                                                            */

static int tnbc_mc_close(struct fid *fid)
{
	struct tnbc_mc *mc = tnbc_container_of(fid, struct tnbc_mc, mc_fid.fid);
	struct tnbc_ep *ep = mc->ep;
	int finishing = atomic_load(&mc->finishing);

	/* Its schedules name it and end only by completing.  Those already
	 * reported are letting go: wait for them (finishing first, see
	 * tnbc_sched_free). */
	if (atomic_load(&mc->inflight) > finishing)
		return -FI_EBUSY;
	while (atomic_load(&mc->finishing) || atomic_load(&mc->inflight))
		sched_yield();
	tnbc_ep_lock(ep);
	tnbc_list_remove(&mc->entry);
	tnbc_ep_unlock(ep);
	atomic_fetch_sub(&ep->ref, 1);
	free(mc->host);
	free(mc->xports);
	free(mc->members);
	free(mc);
	return 0;
}

static struct fi_ops tnbc_mc_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_mc_close,
	.bind = tnbc_no_bind,
	.control = tnbc_no_control,
	.ops_open = tnbc_no_ops_open,
};

/* The group coll_addr names on ep, or NULL. */
static struct tnbc_mc *tnbc_coll_group(struct tnbc_ep *ep, fi_addr_t coll_addr)
{
	struct tnbc_mc *found = NULL;
	struct tnbc_list *it;

	tnbc_ep_lock(ep);
	for (it = ep->groups.next; it != &ep->groups; it = it->next) {
		struct tnbc_mc *mc =
			tnbc_container_of(it, struct tnbc_mc, entry);

		if (mc->mc_fid.fi_addr == coll_addr) {
			found = mc;
			break;
		}
	}
	tnbc_ep_unlock(ep);
	return found;
}

static uint64_t tnbc_coll_hash(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL; /* FNV-1a */
	}
	return h;
}

struct tnbc_mc_hostkey {
	uint64_t host;
	int member;
};

static int tnbc_mc_hostkey_cmp(const void *a, const void *b)
{
	const struct tnbc_mc_hostkey *x = a, *y = b;

	if (x->host != y->host)
		return x->host < y->host ? -1 : 1;
	return x->member - y->member;
}

/* Numbers the members' hosts (their names say), the same way at every
 * member: the trees of hosts are built from them (tnbc_alg_desc.c).
 * Keeps the transports each member's name says reach it, from which
 * both members of a pair learn alike what may carry it. */
static int tnbc_mc_hosts(struct tnbc_ep *ep, struct tnbc_mc *mc)
{
	struct tnbc_mc_hostkey *k = malloc((size_t)mc->size * sizeof(*k));

	mc->host = malloc((size_t)mc->size * sizeof(*mc->host));
	mc->xports = malloc((size_t)mc->size * sizeof(*mc->xports));
	if (!k || !mc->host || !mc->xports) {
		free(k);
		return -FI_ENOMEM;
	}
	for (int i = 0; i < mc->size; i++) {
		struct tnbc_av_entry *e = tnbc_av_get(ep->av, mc->members[i]);

		if (!e) {
			free(k);
			return -FI_EINVAL;
		}
		k[i] = (struct tnbc_mc_hostkey){.host = e->name.host,
						.member = i};
		/* a service address's transports are what the inserter's
		 * own list parses, not what the member has: none known */
		mc->xports[i] =
			e->name.kind == TNBC_NAME_PID ? e->name.xports : 0;
	}
	qsort(k, (size_t)mc->size, sizeof(*k), tnbc_mc_hostkey_cmp);
	mc->nhosts = 0;
	for (int i = 0; i < mc->size; i++) {
		if (i && k[i].host != k[i - 1].host)
			mc->nhosts++;
		mc->host[k[i].member] = mc->nhosts;
	}
	mc->nhosts++;
	free(k);
	return 0;
}

/* The group's id: its membership, in order, and how many times this
 * endpoint joined that membership before.  Every member computes the
 * same one with no message, as long as every member joins the
 * memberships it shares with the others in the same order.  A caller
 * that cannot promise that names its groups itself (named != 0). */
static int tnbc_coll_group_id(struct tnbc_ep *ep, struct tnbc_mc *mc,
			      uint32_t named)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	struct tnbc_coll_joins *j = NULL;
	struct tnbc_list *it;

	for (int i = 0; i < mc->size; i++) {
		struct tnbc_av_entry *e = tnbc_av_get(ep->av, mc->members[i]);

		if (!e)
			return -FI_EINVAL;
		h = tnbc_coll_hash(h, &e->name, sizeof(e->name));
		if (tnbc_name_same(&e->name, &ep->name))
			mc->rank = i;
	}
	if (named) {
		int ret = 0;

		tnbc_ep_lock(ep);
		for (it = ep->groups.next; it != &ep->groups; it = it->next)
			if (tnbc_container_of(it, struct tnbc_mc, entry)->id ==
			    named)
				ret = -FI_EADDRINUSE;
		tnbc_ep_unlock(ep);
		mc->id = named;
		return ret;
	}
	tnbc_ep_lock(ep);
	for (it = ep->coll_joins.next; it != &ep->coll_joins; it = it->next) {
		j = tnbc_container_of(it, struct tnbc_coll_joins, entry);
		if (j->hash == h)
			break;
		j = NULL;
	}
	if (!j) {
		j = calloc(1, sizeof(*j));
		if (!j) {
			tnbc_ep_unlock(ep);
			return -FI_ENOMEM;
		}
		j->hash = h;
		tnbc_list_insert_tail(&j->entry, &ep->coll_joins);
	}
	h = tnbc_coll_hash(h, &j->count, sizeof(j->count));
	j->count++;
	tnbc_ep_unlock(ep);
	/* TNBC_DESC_TAG is the descriptors' */
	mc->id = (uint32_t)(h ^ (h >> 32)) & 0x7fffffffu;
	return 0;
}

void tnbc_coll_ep_fini(struct tnbc_ep *ep)
{
	struct tnbc_list *it, *tmp;

	tnbc_list_foreach_safe (&ep->coll_joins, it, tmp)
		free(tnbc_container_of(it, struct tnbc_coll_joins, entry));
}

static void tnbc_coll_join_end(struct tnbc_sched *s, int err)
{
	struct tnbc_mc *mc = s->mc;
	struct tnbc_eq *eq = mc->ep->eq;

	if (err) {
		struct fi_eq_err_entry e = {.fid = &mc->mc_fid.fid,
					    .context = s->context,
					    .err = err,
					    .prov_errno = err};

		tnbc_eq_post(eq, FI_JOIN_COMPLETE, &e, sizeof(e), true);
		return;
	}
	mc->joined = true;
	tnbc_eq_post(eq, FI_JOIN_COMPLETE,
		     &(struct fi_eq_entry){.fid = &mc->mc_fid.fid,
					   .context = s->context},
		     sizeof(struct fi_eq_entry), false);
}

static int tnbc_coll_join_id(struct fid_ep *fid, const void *addr,
			     uint64_t flags, uint32_t named,
			     struct fid_mc **mc_out, void *context)
{
	const struct fi_collective_addr *ca = addr;
	struct tnbc_ep *ep = TNBC_EP(fid);
	const fi_addr_t *set_addrs;
	struct tnbc_mc *mc;
	size_t n;
	int ret;

	if (!(flags & FI_COLLECTIVE))
		return -FI_ENOSYS; /* multicast groups: not offered */
	if (!ca || !mc_out || !ca->set || (flags & ~(uint64_t)FI_COLLECTIVE))
		return -FI_EINVAL;
	if (!(ep->info->caps & FI_COLLECTIVE))
		return -FI_EOPNOTSUPP;
	if (!ep->enabled || !ep->av)
		return -FI_EOPBADSTATE;
	if (!ep->eq)
		return -FI_ENOEQ;
	ret = tnbc_av_set_members(ca->set, ep->av, &set_addrs, &n);
	if (ret)
		return ret;
	if (!n || n > INT32_MAX)
		return -FI_EINVAL;
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return -FI_ENOMEM;
	mc->members = malloc(n * sizeof(*mc->members));
	if (!mc->members) {
		ret = -FI_ENOMEM;
		goto err;
	}
	memcpy(mc->members, set_addrs, n * sizeof(*mc->members));
	mc->size = (int)n;
	mc->rank = -1;
	ret = tnbc_coll_group_id(ep, mc, named);
	if (!ret)
		ret = tnbc_mc_hosts(ep, mc);
	if (ret)
		goto err;
	if (mc->rank < 0) {
		ret = -FI_EINVAL; /* this endpoint is not a member */
		goto err;
	}
	mc->ep = ep;
	mc->mc_fid.fid.fclass = FI_CLASS_MC;
	mc->mc_fid.fid.context = context;
	mc->mc_fid.fid.ops = &tnbc_mc_fi_ops;
	mc->mc_fid.fi_addr = (fi_addr_t)(uintptr_t)mc;
	atomic_fetch_add(&ep->ref, 1);
	tnbc_ep_lock(ep);
	tnbc_list_insert_tail(&mc->entry, &ep->groups);
	tnbc_ep_unlock(ep);
	/* the join is a barrier of the new group: complete once every
	 * member has joined */
	ret = tnbc_alg_desc(mc, &(struct tnbc_coll_op){
					.coll = FI_BARRIER,
					.context = context,
					.end = tnbc_coll_join_end,
				});
	if (ret) {
		tnbc_mc_close(&mc->mc_fid.fid);
		return ret;
	}
	*mc_out = &mc->mc_fid;
	return 0;
err:
	free(mc->host);
	free(mc->xports);
	free(mc->members);
	free(mc);
	return ret;
}

int tnbc_coll_join(struct fid_ep *fid, const void *addr, uint64_t flags,
		   struct fid_mc **mc_out, void *context)
{
	return tnbc_coll_join_id(fid, addr, flags, 0, mc_out, context);
}

/* FI_TNBC_COLL_OPS_1's join: the caller's id instead of the count. */
int tnbc_coll_join_named(struct fid_ep *fid,
			 const struct fi_collective_addr *addr, uint32_t id,
			 struct fid_mc **mc, void *context)
{
	if (!id || id > 0x7fffffffu)
		return -FI_EINVAL;
	return tnbc_coll_join_id(fid, addr, FI_COLLECTIVE, id, mc, context);
}

/* FI_TNBC_COLL_OPS_1's over_link: whether some member is reached by a
 * link transport, as the algorithms see it (tnbc_sched_over_link). */
int tnbc_coll_over_link(struct fid_mc *fid)
{
	struct tnbc_mc *mc;

	if (!fid || fid->fid.fclass != FI_CLASS_MC ||
	    fid->fid.ops != &tnbc_mc_fi_ops)
		return -FI_EINVAL;
	mc = tnbc_container_of(fid, struct tnbc_mc, mc_fid);
	for (int i = 0; i < mc->size; i++)
		if (i != mc->rank && tnbc_sched_over_link(mc, i))
			return 1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The calls                                                            */

static ssize_t tnbc_coll_post(struct fid_ep *fid, struct tnbc_coll_op *op,
			      fi_addr_t coll_addr, fi_addr_t root_addr,
			      uint64_t flags)
{
	struct tnbc_ep *ep = TNBC_EP(fid);
	struct tnbc_mc *mc = tnbc_coll_group(ep, coll_addr);
	size_t es, n;
	int ret;

	if (!mc || (flags & ~(uint64_t)FI_COMPLETION))
		return -FI_EINVAL;
	ret = tnbc_coll_check_type(op->coll, op->op, op->dt);
	if (ret)
		return ret;
	es = op->coll == FI_BARRIER ? 0 : tnbc_alu_size(op->dt);
	/* a whole buffer of one slice per member must be addressable */
	n = op->coll == FI_BARRIER || op->coll == FI_BROADCAST ||
			    op->coll == FI_REDUCE || op->coll == FI_ALLREDUCE
		    ? 1
		    : (size_t)mc->size;
	if (es && op->count > tnbc_coll_max_count(op->dt) / n)
		return -FI_EINVAL;
	if (op->coll == FI_BROADCAST || op->coll == FI_REDUCE ||
	    op->coll == FI_SCATTER || op->coll == FI_GATHER) {
		op->root = -1;
		for (int i = 0; i < mc->size; i++)
			if (mc->members[i] == root_addr)
				op->root = i;
		if (op->root < 0)
			return -FI_EINVAL;
	}
	if (es && op->count) {
		bool is_root = op->root == mc->rank;
		bool need_in = op->coll != FI_SCATTER || is_root;
		bool need_out = op->coll == FI_BROADCAST ? false
				: op->coll == FI_REDUCE || op->coll == FI_GATHER
					? is_root
					: true;

		if ((need_in && !op->buf) || (need_out && !op->result))
			return -FI_EINVAL;
	}
	return tnbc_alg_choose(mc, op->coll, es * op->count)->run(mc, op);
}

static ssize_t tnbc_coll_barrier(struct fid_ep *ep, fi_addr_t coll_addr,
				 void *context)
{
	struct tnbc_coll_op op = {.coll = FI_BARRIER, .context = context};

	return tnbc_coll_post(ep, &op, coll_addr, FI_ADDR_NOTAVAIL, 0);
}

static ssize_t tnbc_coll_barrier2(struct fid_ep *ep, fi_addr_t coll_addr,
				  uint64_t flags, void *context)
{
	struct tnbc_coll_op op = {.coll = FI_BARRIER, .context = context};

	return tnbc_coll_post(ep, &op, coll_addr, FI_ADDR_NOTAVAIL, flags);
}

static ssize_t tnbc_coll_broadcast(struct fid_ep *ep, void *buf, size_t count,
				   void *desc, fi_addr_t coll_addr,
				   fi_addr_t root_addr,
				   enum fi_datatype datatype, uint64_t flags,
				   void *context)
{
	struct tnbc_coll_op op = {.coll = FI_BROADCAST,
				  .buf = buf,
				  .count = count,
				  .dt = datatype,
				  .op = FI_NOOP,
				  .context = context};

	(void)desc;
	return tnbc_coll_post(ep, &op, coll_addr, root_addr, flags);
}

/* The calls that take a buffer and a result and no root. */
static ssize_t tnbc_coll_both(struct fid_ep *ep, enum fi_collective_op coll,
			      const void *buf, size_t count, void *result,
			      fi_addr_t coll_addr, fi_addr_t root_addr,
			      enum fi_datatype datatype, enum fi_op o,
			      uint64_t flags, void *context)
{
	struct tnbc_coll_op op = {.coll = coll,
				  .buf = buf,
				  .result = result,
				  .count = count,
				  .dt = datatype,
				  .op = o,
				  .context = context};

	return tnbc_coll_post(ep, &op, coll_addr, root_addr, flags);
}

static ssize_t tnbc_coll_alltoall(struct fid_ep *ep, const void *buf,
				  size_t count, void *desc, void *result,
				  void *result_desc, fi_addr_t coll_addr,
				  enum fi_datatype datatype, uint64_t flags,
				  void *context)
{
	(void)desc;
	(void)result_desc;
	return tnbc_coll_both(ep, FI_ALLTOALL, buf, count, result, coll_addr,
			      FI_ADDR_NOTAVAIL, datatype, FI_NOOP, flags,
			      context);
}

static ssize_t tnbc_coll_allreduce(struct fid_ep *ep, const void *buf,
				   size_t count, void *desc, void *result,
				   void *result_desc, fi_addr_t coll_addr,
				   enum fi_datatype datatype, enum fi_op op,
				   uint64_t flags, void *context)
{
	(void)desc;
	(void)result_desc;
	return tnbc_coll_both(ep, FI_ALLREDUCE, buf, count, result, coll_addr,
			      FI_ADDR_NOTAVAIL, datatype, op, flags, context);
}

static ssize_t tnbc_coll_allgather(struct fid_ep *ep, const void *buf,
				   size_t count, void *desc, void *result,
				   void *result_desc, fi_addr_t coll_addr,
				   enum fi_datatype datatype, uint64_t flags,
				   void *context)
{
	(void)desc;
	(void)result_desc;
	return tnbc_coll_both(ep, FI_ALLGATHER, buf, count, result, coll_addr,
			      FI_ADDR_NOTAVAIL, datatype, FI_NOOP, flags,
			      context);
}

static ssize_t tnbc_coll_reduce_scatter(struct fid_ep *ep, const void *buf,
					size_t count, void *desc, void *result,
					void *result_desc, fi_addr_t coll_addr,
					enum fi_datatype datatype,
					enum fi_op op, uint64_t flags,
					void *context)
{
	(void)desc;
	(void)result_desc;
	return tnbc_coll_both(ep, FI_REDUCE_SCATTER, buf, count, result,
			      coll_addr, FI_ADDR_NOTAVAIL, datatype, op, flags,
			      context);
}

static ssize_t tnbc_coll_reduce(struct fid_ep *ep, const void *buf,
				size_t count, void *desc, void *result,
				void *result_desc, fi_addr_t coll_addr,
				fi_addr_t root_addr, enum fi_datatype datatype,
				enum fi_op op, uint64_t flags, void *context)
{
	(void)desc;
	(void)result_desc;
	return tnbc_coll_both(ep, FI_REDUCE, buf, count, result, coll_addr,
			      root_addr, datatype, op, flags, context);
}

static ssize_t tnbc_coll_scatter(struct fid_ep *ep, const void *buf,
				 size_t count, void *desc, void *result,
				 void *result_desc, fi_addr_t coll_addr,
				 fi_addr_t root_addr, enum fi_datatype datatype,
				 uint64_t flags, void *context)
{
	(void)desc;
	(void)result_desc;
	return tnbc_coll_both(ep, FI_SCATTER, buf, count, result, coll_addr,
			      root_addr, datatype, FI_NOOP, flags, context);
}

static ssize_t tnbc_coll_gather(struct fid_ep *ep, const void *buf,
				size_t count, void *desc, void *result,
				void *result_desc, fi_addr_t coll_addr,
				fi_addr_t root_addr, enum fi_datatype datatype,
				uint64_t flags, void *context)
{
	(void)desc;
	(void)result_desc;
	return tnbc_coll_both(ep, FI_GATHER, buf, count, result, coll_addr,
			      root_addr, datatype, FI_NOOP, flags, context);
}

/* One buffer each way, as the calls above take them. */
static ssize_t tnbc_coll_msg(struct fid_ep *ep,
			     const struct fi_msg_collective *msg,
			     struct fi_ioc *resultv, void **result_desc,
			     size_t result_count, uint64_t flags)
{
	const void *buf = NULL;
	void *result = NULL;
	size_t count = 0;

	(void)result_desc;
	if (!msg || msg->iov_count > 1 || result_count > 1 ||
	    (result_count && !resultv) || (msg->iov_count && !msg->msg_iov))
		return -FI_EINVAL;
	if (msg->iov_count) {
		buf = msg->msg_iov[0].addr;
		count = msg->msg_iov[0].count;
	}
	if (result_count)
		result = resultv[0].addr;
	if (msg->coll == FI_BROADCAST)
		return tnbc_coll_broadcast(ep, (void *)buf, count, NULL,
					   msg->coll_addr, msg->root_addr,
					   msg->datatype, flags, msg->context);
	return tnbc_coll_both(ep, msg->coll, buf, count, result, msg->coll_addr,
			      msg->root_addr, msg->datatype, msg->op, flags,
			      msg->context);
}

struct fi_ops_collective tnbc_coll_ops = {
	.size = sizeof(struct fi_ops_collective),
	.barrier = tnbc_coll_barrier,
	.broadcast = tnbc_coll_broadcast,
	.alltoall = tnbc_coll_alltoall,
	.allreduce = tnbc_coll_allreduce,
	.allgather = tnbc_coll_allgather,
	.reduce_scatter = tnbc_coll_reduce_scatter,
	.reduce = tnbc_coll_reduce,
	.scatter = tnbc_coll_scatter,
	.gather = tnbc_coll_gather,
	.msg = tnbc_coll_msg,
	.barrier2 = tnbc_coll_barrier2,
};
