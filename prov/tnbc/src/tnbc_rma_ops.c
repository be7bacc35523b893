/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The RMA and atomic entry points (fi_rma(3), fi_atomic(3)) and
 * fi_query_atomic: each validates its arguments once and either hands
 * the operation to the trigger unit (FI_TRIGGER) or starts it
 * (tnbc_rma.c), then runs the triggered work its completion released.
 */
#include "tnbc.h"
#include "tnbc_trigger.h"
#include "tnbc_rma.h"
#include "tnbc_alu.h"
#include "tnbc_attr.h"

ssize_t tnbc_rma_post(struct tnbc_ep *ep, const struct tnbc_rma_args *a,
		      const struct tnbc_opx *x)
{
	int ret;

	static const enum fi_op_type ops[] = {
		[TNBC_RMA_WRITE] = FI_OP_WRITE,
		[TNBC_RMA_READ] = FI_OP_READ,
		[TNBC_RMA_ATOMIC] = FI_OP_ATOMIC,
		[TNBC_RMA_FETCH] = FI_OP_FETCH_ATOMIC,
		[TNBC_RMA_COMPARE] = FI_OP_COMPARE_ATOMIC,
	};

	if (a->flags & FI_TRIGGER)
		return tnbc_trig_post_rma(ep, ops[a->kind], a);
	ret = tnbc_rma_check(ep, a);
	if (ret)
		return ret;
	ret = (int)tnbc_rma_start(ep, a, x);
	/* its completion may have released triggered work: this thread
	 * holds no lock now, and runs it at once */
	tnbc_trig_run(ep->domain, false);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Entry points                                                         */

/* The op flags of the endpoint or alias the call came through. */
static uint64_t tnbc_rma_tx_flags(struct fid_ep *fid)
{
	return TNBC_HANDLE(fid)->tx_op_flags & TNBC_RMA_FLAGS;
}

static ssize_t tnbc_rma_one(struct fid_ep *fid, uint8_t kind, void *buf,
			    size_t len, fi_addr_t addr, uint64_t raddr,
			    uint64_t key, uint64_t data, void *context,
			    uint64_t flags)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_rma_iov riov = {.addr = raddr, .len = len, .key = key};
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.iov_count = 1,
		.addr = addr,
		.rma_iov = &riov,
		.rma_iov_count = 1,
		.context = context,
		.data = data,
	};
	struct tnbc_rma_args a;
	int ret;

	ret = tnbc_rma_args_msg(&a, &msg, kind, flags);
	return ret ? ret : tnbc_rma_post(TNBC_EP(fid), &a, NULL);
}

static ssize_t tnbc_rma_vec(struct fid_ep *fid, uint8_t kind,
			    const struct iovec *iov, size_t count,
			    fi_addr_t addr, uint64_t raddr, uint64_t key,
			    void *context)
{
	struct fi_rma_iov riov = {.addr = raddr, .key = key};
	struct fi_msg_rma msg = {
		.msg_iov = iov,
		.iov_count = count,
		.addr = addr,
		.rma_iov = &riov,
		.rma_iov_count = 1,
		.context = context,
	};
	struct tnbc_rma_args a;
	int ret;

	if (count > TNBC_IOV_LIMIT || (count && !iov))
		return -FI_EINVAL;
	riov.len = tnbc_iov_len(iov, count);
	ret = tnbc_rma_args_msg(&a, &msg, kind, tnbc_rma_tx_flags(fid));
	return ret ? ret : tnbc_rma_post(TNBC_EP(fid), &a, NULL);
}

static ssize_t tnbc_read(struct fid_ep *fid, void *buf, size_t len, void *desc,
			 fi_addr_t src, uint64_t addr, uint64_t key,
			 void *context)
{
	(void)desc;
	return tnbc_rma_one(fid, TNBC_RMA_READ, buf, len, src, addr, key, 0,
			    context, tnbc_rma_tx_flags(fid));
}

static ssize_t tnbc_readv(struct fid_ep *fid, const struct iovec *iov,
			  void **desc, size_t count, fi_addr_t src,
			  uint64_t addr, uint64_t key, void *context)
{
	(void)desc;
	return tnbc_rma_vec(fid, TNBC_RMA_READ, iov, count, src, addr, key,
			    context);
}

static ssize_t tnbc_rma_msg(struct fid_ep *fid, const struct fi_msg_rma *msg,
			    uint8_t kind, uint64_t flags)
{
	struct tnbc_rma_args a;
	int ret = tnbc_rma_args_msg(&a, msg, kind, flags);

	return ret ? ret : tnbc_rma_post(TNBC_EP(fid), &a, NULL);
}

static ssize_t tnbc_readmsg(struct fid_ep *fid, const struct fi_msg_rma *msg,
			    uint64_t flags)
{
	return tnbc_rma_msg(fid, msg, TNBC_RMA_READ, flags);
}

static ssize_t tnbc_write(struct fid_ep *fid, const void *buf, size_t len,
			  void *desc, fi_addr_t dest, uint64_t addr,
			  uint64_t key, void *context)
{
	(void)desc;
	return tnbc_rma_one(fid, TNBC_RMA_WRITE, (void *)buf, len, dest, addr,
			    key, 0, context, tnbc_rma_tx_flags(fid));
}

static ssize_t tnbc_writev(struct fid_ep *fid, const struct iovec *iov,
			   void **desc, size_t count, fi_addr_t dest,
			   uint64_t addr, uint64_t key, void *context)
{
	(void)desc;
	return tnbc_rma_vec(fid, TNBC_RMA_WRITE, iov, count, dest, addr, key,
			    context);
}

static ssize_t tnbc_writemsg(struct fid_ep *fid, const struct fi_msg_rma *msg,
			     uint64_t flags)
{
	return tnbc_rma_msg(fid, msg, TNBC_RMA_WRITE, flags);
}

static ssize_t tnbc_inject_write(struct fid_ep *fid, const void *buf,
				 size_t len, fi_addr_t dest, uint64_t addr,
				 uint64_t key)
{
	return tnbc_rma_one(fid, TNBC_RMA_WRITE, (void *)buf, len, dest, addr,
			    key, 0, NULL, FI_INJECT | TNBC_NO_COMPLETION);
}

static ssize_t tnbc_writedata(struct fid_ep *fid, const void *buf, size_t len,
			      void *desc, uint64_t data, fi_addr_t dest,
			      uint64_t addr, uint64_t key, void *context)
{
	(void)desc;
	return tnbc_rma_one(fid, TNBC_RMA_WRITE, (void *)buf, len, dest, addr,
			    key, data, context,
			    tnbc_rma_tx_flags(fid) | FI_REMOTE_CQ_DATA);
}

static ssize_t tnbc_inject_writedata(struct fid_ep *fid, const void *buf,
				     size_t len, uint64_t data, fi_addr_t dest,
				     uint64_t addr, uint64_t key)
{
	return tnbc_rma_one(fid, TNBC_RMA_WRITE, (void *)buf, len, dest, addr,
			    key, data, NULL,
			    FI_INJECT | TNBC_NO_COMPLETION | FI_REMOTE_CQ_DATA);
}

const struct fi_ops_rma tnbc_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = tnbc_read,
	.readv = tnbc_readv,
	.readmsg = tnbc_readmsg,
	.write = tnbc_write,
	.writev = tnbc_writev,
	.writemsg = tnbc_writemsg,
	.inject = tnbc_inject_write,
	.writedata = tnbc_writedata,
	.injectdata = tnbc_inject_writedata,
};

/* Atomics: every entry point builds an fi_msg_atomic and comes here. */
static ssize_t tnbc_atomic_submit(struct fid_ep *fid, uint8_t kind,
				  const struct fi_msg_atomic *msg,
				  const struct fi_ioc *res, size_t res_count,
				  const struct fi_ioc *cmp, size_t cmp_count,
				  uint64_t flags)
{
	struct tnbc_rma_args a;
	int ret;

	ret = tnbc_rma_args_atomic(&a, msg, res, res_count, cmp, cmp_count,
				   kind, flags);
	return ret ? ret : tnbc_rma_post(TNBC_EP(fid), &a, NULL);
}

static ssize_t tnbc_atomic_simple(struct fid_ep *fid, uint8_t kind,
				  const void *buf, size_t count,
				  const void *compare, void *result,
				  fi_addr_t dest, uint64_t addr, uint64_t key,
				  enum fi_datatype dt, enum fi_op op,
				  void *context, uint64_t flags)
{
	struct fi_ioc ioc = {.addr = (void *)buf, .count = count};
	struct fi_ioc rioc = {.addr = result, .count = count};
	struct fi_ioc cioc = {.addr = (void *)compare, .count = count};
	struct fi_rma_ioc rma = {.addr = addr, .count = count, .key = key};
	struct fi_msg_atomic msg = {
		.msg_iov = &ioc,
		.iov_count = buf ? 1 : 0,
		.addr = dest,
		.rma_iov = &rma,
		.rma_iov_count = 1,
		.datatype = dt,
		.op = op,
		.context = context,
	};

	return tnbc_atomic_submit(fid, kind, &msg, result ? &rioc : NULL,
				  result ? 1 : 0, compare ? &cioc : NULL,
				  compare ? 1 : 0, flags);
}

static ssize_t tnbc_atomic_vec(struct fid_ep *fid, uint8_t kind,
			       const struct fi_ioc *iov, size_t count,
			       const struct fi_ioc *cmp, size_t cmp_count,
			       struct fi_ioc *res, size_t res_count,
			       fi_addr_t dest, uint64_t addr, uint64_t key,
			       enum fi_datatype dt, enum fi_op op,
			       void *context)
{
	struct fi_rma_ioc rma = {.addr = addr, .key = key};
	struct fi_msg_atomic msg = {
		.msg_iov = iov,
		.iov_count = count,
		.addr = dest,
		.rma_iov = &rma,
		.rma_iov_count = 1,
		.datatype = dt,
		.op = op,
		.context = context,
	};
	const struct fi_ioc *n = iov ? iov : res;
	size_t nc = iov ? count : res_count;

	if (nc > TNBC_IOV_LIMIT || (nc && !n))
		return -FI_EINVAL;
	for (size_t i = 0; i < nc; i++)
		rma.count += n[i].count;
	return tnbc_atomic_submit(fid, kind, &msg, res, res_count, cmp,
				  cmp_count, tnbc_rma_tx_flags(fid));
}

static ssize_t tnbc_atomic_write(struct fid_ep *fid, const void *buf,
				 size_t count, void *desc, fi_addr_t dest,
				 uint64_t addr, uint64_t key,
				 enum fi_datatype dt, enum fi_op op,
				 void *context)
{
	(void)desc;
	return tnbc_atomic_simple(fid, TNBC_RMA_ATOMIC, buf, count, NULL, NULL,
				  dest, addr, key, dt, op, context,
				  tnbc_rma_tx_flags(fid));
}

static ssize_t tnbc_atomic_writev(struct fid_ep *fid, const struct fi_ioc *iov,
				  void **desc, size_t count, fi_addr_t dest,
				  uint64_t addr, uint64_t key,
				  enum fi_datatype dt, enum fi_op op,
				  void *context)
{
	(void)desc;
	return tnbc_atomic_vec(fid, TNBC_RMA_ATOMIC, iov, count, NULL, 0, NULL,
			       0, dest, addr, key, dt, op, context);
}

static ssize_t tnbc_atomic_writemsg(struct fid_ep *fid,
				    const struct fi_msg_atomic *msg,
				    uint64_t flags)
{
	return tnbc_atomic_submit(fid, TNBC_RMA_ATOMIC, msg, NULL, 0, NULL, 0,
				  flags);
}

static ssize_t tnbc_atomic_inject(struct fid_ep *fid, const void *buf,
				  size_t count, fi_addr_t dest, uint64_t addr,
				  uint64_t key, enum fi_datatype dt,
				  enum fi_op op)
{
	return tnbc_atomic_simple(fid, TNBC_RMA_ATOMIC, buf, count, NULL, NULL,
				  dest, addr, key, dt, op, NULL,
				  FI_INJECT | TNBC_NO_COMPLETION);
}

static ssize_t tnbc_atomic_readwrite(struct fid_ep *fid, const void *buf,
				     size_t count, void *desc, void *result,
				     void *result_desc, fi_addr_t dest,
				     uint64_t addr, uint64_t key,
				     enum fi_datatype dt, enum fi_op op,
				     void *context)
{
	(void)desc;
	(void)result_desc;
	return tnbc_atomic_simple(fid, TNBC_RMA_FETCH, buf, count, NULL, result,
				  dest, addr, key, dt, op, context,
				  tnbc_rma_tx_flags(fid));
}

static ssize_t tnbc_atomic_readwritev(struct fid_ep *fid,
				      const struct fi_ioc *iov, void **desc,
				      size_t count, struct fi_ioc *resultv,
				      void **result_desc, size_t result_count,
				      fi_addr_t dest, uint64_t addr,
				      uint64_t key, enum fi_datatype dt,
				      enum fi_op op, void *context)
{
	(void)desc;
	(void)result_desc;
	return tnbc_atomic_vec(fid, TNBC_RMA_FETCH, iov, count, NULL, 0,
			       resultv, result_count, dest, addr, key, dt, op,
			       context);
}

static ssize_t tnbc_atomic_readwritemsg(struct fid_ep *fid,
					const struct fi_msg_atomic *msg,
					struct fi_ioc *resultv,
					void **result_desc, size_t result_count,
					uint64_t flags)
{
	(void)result_desc;
	return tnbc_atomic_submit(fid, TNBC_RMA_FETCH, msg, resultv,
				  result_count, NULL, 0, flags);
}

static ssize_t tnbc_atomic_compwrite(struct fid_ep *fid, const void *buf,
				     size_t count, void *desc,
				     const void *compare, void *compare_desc,
				     void *result, void *result_desc,
				     fi_addr_t dest, uint64_t addr,
				     uint64_t key, enum fi_datatype dt,
				     enum fi_op op, void *context)
{
	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	return tnbc_atomic_simple(fid, TNBC_RMA_COMPARE, buf, count, compare,
				  result, dest, addr, key, dt, op, context,
				  tnbc_rma_tx_flags(fid));
}

static ssize_t tnbc_atomic_compwritev(
	struct fid_ep *fid, const struct fi_ioc *iov, void **desc, size_t count,
	const struct fi_ioc *comparev, void **compare_desc,
	size_t compare_count, struct fi_ioc *resultv, void **result_desc,
	size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key,
	enum fi_datatype dt, enum fi_op op, void *context)
{
	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	return tnbc_atomic_vec(fid, TNBC_RMA_COMPARE, iov, count, comparev,
			       compare_count, resultv, result_count, dest, addr,
			       key, dt, op, context);
}

static ssize_t
tnbc_atomic_compwritemsg(struct fid_ep *fid, const struct fi_msg_atomic *msg,
			 const struct fi_ioc *comparev, void **compare_desc,
			 size_t compare_count, struct fi_ioc *resultv,
			 void **result_desc, size_t result_count,
			 uint64_t flags)
{
	(void)compare_desc;
	(void)result_desc;
	return tnbc_atomic_submit(fid, TNBC_RMA_COMPARE, msg, resultv,
				  result_count, comparev, compare_count, flags);
}

/* Largest count one operation may carry: one packet's worth. */
static size_t tnbc_atomic_max_count(enum tnbc_atomic_kind kind,
				    enum fi_datatype dt)
{
	size_t room = tnbc_slot_payload() - sizeof(struct tnbc_rma_req);

	if (kind == TNBC_ATOMIC_COMPARE)
		room /= 2;
	return room / tnbc_alu_size(dt);
}

static int tnbc_atomic_valid(enum tnbc_atomic_kind kind, enum fi_op op,
			     enum fi_datatype dt, size_t *count)
{
	if (!tnbc_alu_valid(kind, op, dt))
		return -FI_EOPNOTSUPP;
	if (count)
		*count = tnbc_atomic_max_count(kind, dt);
	return 0;
}

static int tnbc_atomic_writevalid(struct fid_ep *fid, enum fi_datatype dt,
				  enum fi_op op, size_t *count)
{
	(void)fid;
	return tnbc_atomic_valid(TNBC_ATOMIC_PLAIN, op, dt, count);
}

static int tnbc_atomic_readwritevalid(struct fid_ep *fid, enum fi_datatype dt,
				      enum fi_op op, size_t *count)
{
	(void)fid;
	return tnbc_atomic_valid(TNBC_ATOMIC_FETCH, op, dt, count);
}

static int tnbc_atomic_compwritevalid(struct fid_ep *fid, enum fi_datatype dt,
				      enum fi_op op, size_t *count)
{
	(void)fid;
	return tnbc_atomic_valid(TNBC_ATOMIC_COMPARE, op, dt, count);
}

int tnbc_query_atomic(struct fid_domain *domain, enum fi_datatype dt,
		      enum fi_op op, struct fi_atomic_attr *attr,
		      uint64_t flags)
{
	enum tnbc_atomic_kind kind = TNBC_ATOMIC_PLAIN;
	int ret;

	(void)domain;
	if (!attr || (flags & ~(uint64_t)(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC |
					  FI_TAGGED)))
		return -FI_EINVAL;
	if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC))
		return -FI_EINVAL;
	if (flags & FI_TAGGED)
		return -FI_EOPNOTSUPP; /* no tagged atomics */
	if (flags & FI_FETCH_ATOMIC)
		kind = TNBC_ATOMIC_FETCH;
	else if (flags & FI_COMPARE_ATOMIC)
		kind = TNBC_ATOMIC_COMPARE;
	ret = tnbc_atomic_valid(kind, op, dt, &attr->count);
	if (ret)
		return ret;
	attr->size = tnbc_alu_size(dt);
	return 0;
}

const struct fi_ops_atomic tnbc_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = tnbc_atomic_write,
	.writev = tnbc_atomic_writev,
	.writemsg = tnbc_atomic_writemsg,
	.inject = tnbc_atomic_inject,
	.readwrite = tnbc_atomic_readwrite,
	.readwritev = tnbc_atomic_readwritev,
	.readwritemsg = tnbc_atomic_readwritemsg,
	.compwrite = tnbc_atomic_compwrite,
	.compwritev = tnbc_atomic_compwritev,
	.compwritemsg = tnbc_atomic_compwritemsg,
	.writevalid = tnbc_atomic_writevalid,
	.readwritevalid = tnbc_atomic_readwritevalid,
	.compwritevalid = tnbc_atomic_compwritevalid,
};
