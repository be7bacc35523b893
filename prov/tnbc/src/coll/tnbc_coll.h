/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What the endpoint and the domain call in coll/: fi_join_collective,
 * the fi_collective(3) and descriptor tables, fi_query_collective, and
 * an endpoint's joins undone at its close.  coll/'s own files share
 * tnbc_sched.h.
 */
#ifndef TNBC_COLL_H
#define TNBC_COLL_H

#include <rdma/fi_ext_tnbc.h>

#include "../tnbc.h"

/* fi_join_collective and fi_collective(3) (coll/tnbc_coll.c) */
int tnbc_coll_join(struct fid_ep *ep, const void *addr, uint64_t flags,
		   struct fid_mc **mc, void *context);
int tnbc_coll_join_named(struct fid_ep *ep,
			 const struct fi_collective_addr *addr, uint32_t id,
			 struct fid_mc **mc, void *context);
int tnbc_coll_over_link(struct fid_mc *mc);
extern struct fi_ops_collective tnbc_coll_ops;
/* seed 002's descriptors (coll/tnbc_desc.c), FI_TNBC_COLL_OPS_1 */
extern struct fi_tnbc_ops_coll tnbc_desc_ops;
int tnbc_coll_query(struct fid_domain *domain, enum fi_collective_op coll,
		    struct fi_collective_attr *attr, uint64_t flags);
/* Frees what joins left on a closing endpoint. */
void tnbc_coll_ep_fini(struct tnbc_ep *ep);

#endif /* TNBC_COLL_H */
