/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
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
