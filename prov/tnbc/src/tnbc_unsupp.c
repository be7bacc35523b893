/*
 * Interfaces that a tnbc endpoint does not offer yet answer -FI_ENOSYS
 * through properly typed entry points, so a program that calls them
 * anyway (without asking fi_getinfo) gets an error instead of a crash.
 */
#include "tnbc.h"
#include "tnbc_unsupp.h"

/* The parameters exist only to match the table's function types. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* clang-format cannot lay out parameter lists passed to a macro. */
/* clang-format off */

#define TNBC_NOSYS(name, params)                                              \
	static ssize_t name params                                            \
	{                                                                     \
		return -FI_ENOSYS;                                            \
	}

TNBC_NOSYS(nr_read, (struct fid_ep *ep, void *buf, size_t len, void *desc,
		     fi_addr_t a, uint64_t addr, uint64_t key, void *ctx))
TNBC_NOSYS(nr_readv, (struct fid_ep *ep, const struct iovec *iov, void **desc,
		      size_t count, fi_addr_t a, uint64_t addr, uint64_t key,
		      void *ctx))
TNBC_NOSYS(nr_msg, (struct fid_ep *ep, const struct fi_msg_rma *msg,
		    uint64_t flags))
TNBC_NOSYS(nr_write, (struct fid_ep *ep, const void *buf, size_t len,
		      void *desc, fi_addr_t a, uint64_t addr, uint64_t key,
		      void *ctx))
TNBC_NOSYS(nr_inject, (struct fid_ep *ep, const void *buf, size_t len,
		       fi_addr_t a, uint64_t addr, uint64_t key))
TNBC_NOSYS(nr_writedata, (struct fid_ep *ep, const void *buf, size_t len,
			  void *desc, uint64_t data, fi_addr_t a,
			  uint64_t addr, uint64_t key, void *ctx))
TNBC_NOSYS(nr_injectdata, (struct fid_ep *ep, const void *buf, size_t len,
			   uint64_t data, fi_addr_t a, uint64_t addr,
			   uint64_t key))

struct fi_ops_rma tnbc_no_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = nr_read,
	.readv = nr_readv,
	.readmsg = nr_msg,
	.write = nr_write,
	.writev = nr_readv,
	.writemsg = nr_msg,
	.inject = nr_inject,
	.writedata = nr_writedata,
	.injectdata = nr_injectdata,
};

TNBC_NOSYS(na_write, (struct fid_ep *ep, const void *buf, size_t count,
		      void *desc, fi_addr_t a, uint64_t addr, uint64_t key,
		      enum fi_datatype dt, enum fi_op op, void *ctx))
TNBC_NOSYS(na_writev, (struct fid_ep *ep, const struct fi_ioc *iov,
		       void **desc, size_t count, fi_addr_t a, uint64_t addr,
		       uint64_t key, enum fi_datatype dt, enum fi_op op,
		       void *ctx))
TNBC_NOSYS(na_writemsg, (struct fid_ep *ep, const struct fi_msg_atomic *msg,
			 uint64_t flags))
TNBC_NOSYS(na_inject, (struct fid_ep *ep, const void *buf, size_t count,
		       fi_addr_t a, uint64_t addr, uint64_t key,
		       enum fi_datatype dt, enum fi_op op))
TNBC_NOSYS(na_rw, (struct fid_ep *ep, const void *buf, size_t count,
		   void *desc, void *result, void *result_desc, fi_addr_t a,
		   uint64_t addr, uint64_t key, enum fi_datatype dt,
		   enum fi_op op, void *ctx))
TNBC_NOSYS(na_rwv, (struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
		    size_t count, struct fi_ioc *resultv, void **result_desc,
		    size_t result_count, fi_addr_t a, uint64_t addr,
		    uint64_t key, enum fi_datatype dt, enum fi_op op,
		    void *ctx))
TNBC_NOSYS(na_rwmsg, (struct fid_ep *ep, const struct fi_msg_atomic *msg,
		      struct fi_ioc *resultv, void **result_desc,
		      size_t result_count, uint64_t flags))
TNBC_NOSYS(na_cw, (struct fid_ep *ep, const void *buf, size_t count,
		   void *desc, const void *compare, void *compare_desc,
		   void *result, void *result_desc, fi_addr_t a,
		   uint64_t addr, uint64_t key, enum fi_datatype dt,
		   enum fi_op op, void *ctx))
TNBC_NOSYS(na_cwv, (struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
		    size_t count, const struct fi_ioc *comparev,
		    void **compare_desc, size_t compare_count,
		    struct fi_ioc *resultv, void **result_desc,
		    size_t result_count, fi_addr_t a, uint64_t addr,
		    uint64_t key, enum fi_datatype dt, enum fi_op op,
		    void *ctx))
TNBC_NOSYS(na_cwmsg, (struct fid_ep *ep, const struct fi_msg_atomic *msg,
		      const struct fi_ioc *comparev, void **compare_desc,
		      size_t compare_count, struct fi_ioc *resultv,
		      void **result_desc, size_t result_count,
		      uint64_t flags))

static int na_valid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
		    size_t *count)
{
	return -FI_ENOSYS;
}

struct fi_ops_atomic tnbc_no_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = na_write,
	.writev = na_writev,
	.writemsg = na_writemsg,
	.inject = na_inject,
	.readwrite = na_rw,
	.readwritev = na_rwv,
	.readwritemsg = na_rwmsg,
	.compwrite = na_cw,
	.compwritev = na_cwv,
	.compwritemsg = na_cwmsg,
	.writevalid = na_valid,
	.readwritevalid = na_valid,
	.compwritevalid = na_valid,
};

TNBC_NOSYS(nc_barrier, (struct fid_ep *ep, fi_addr_t coll, void *ctx))
TNBC_NOSYS(nc_bcast, (struct fid_ep *ep, void *buf, size_t count, void *desc,
		      fi_addr_t coll, fi_addr_t root, enum fi_datatype dt,
		      uint64_t flags, void *ctx))
TNBC_NOSYS(nc_a2a, (struct fid_ep *ep, const void *buf, size_t count,
		    void *desc, void *result, void *result_desc,
		    fi_addr_t coll, enum fi_datatype dt, uint64_t flags,
		    void *ctx))
TNBC_NOSYS(nc_red, (struct fid_ep *ep, const void *buf, size_t count,
		    void *desc, void *result, void *result_desc,
		    fi_addr_t coll, enum fi_datatype dt, enum fi_op op,
		    uint64_t flags, void *ctx))
TNBC_NOSYS(nc_rooted_red, (struct fid_ep *ep, const void *buf, size_t count,
			   void *desc, void *result, void *result_desc,
			   fi_addr_t coll, fi_addr_t root,
			   enum fi_datatype dt, enum fi_op op, uint64_t flags,
			   void *ctx))
TNBC_NOSYS(nc_rooted, (struct fid_ep *ep, const void *buf, size_t count,
		       void *desc, void *result, void *result_desc,
		       fi_addr_t coll, fi_addr_t root, enum fi_datatype dt,
		       uint64_t flags, void *ctx))
TNBC_NOSYS(nc_msg, (struct fid_ep *ep, const struct fi_msg_collective *msg,
		    struct fi_ioc *resultv, void **result_desc,
		    size_t result_count, uint64_t flags))
TNBC_NOSYS(nc_barrier2, (struct fid_ep *ep, fi_addr_t coll, uint64_t flags,
			 void *ctx))

struct fi_ops_collective tnbc_no_coll_ops = {
	.size = sizeof(struct fi_ops_collective),
	.barrier = nc_barrier,
	.broadcast = nc_bcast,
	.alltoall = nc_a2a,
	.allreduce = nc_red,
	.allgather = nc_a2a,
	.reduce_scatter = nc_red,
	.reduce = nc_rooted_red,
	.scatter = nc_rooted,
	.gather = nc_rooted,
	.msg = nc_msg,
	.barrier2 = nc_barrier2,
};
/* clang-format on */
