/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Entry points for interfaces a tnbc object does not offer.  They return
 * -FI_ENOSYS, which is what fi_getinfo's answer already promised: the
 * capability is not advertised.
 */
#ifndef TNBC_UNSUPP_H
#define TNBC_UNSUPP_H

#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_rma.h>

int tnbc_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int tnbc_no_control(struct fid *fid, int command, void *arg);
int tnbc_no_ops_open(struct fid *fid, const char *name, uint64_t flags,
		     void **ops, void *context);

extern struct fi_ops_collective tnbc_no_coll_ops;

#endif /* TNBC_UNSUPP_H */
