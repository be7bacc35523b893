/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * RMA and atomics (tnbc_rma.c, entry points in tnbc_rma_ops.c).
 */
#ifndef TNBC_RMA_H
#define TNBC_RMA_H

#include "tnbc.h"
#include "tnbc_xfer.h"

/* rma + atomics (tnbc_rma.c) */
extern const struct fi_ops_rma tnbc_rma_ops;
extern const struct fi_ops_atomic tnbc_atomic_ops;
ssize_t tnbc_rma_post(struct tnbc_ep *ep, const struct tnbc_rma_args *a,
		      const struct tnbc_opx *x);
/* Start a checked RMA or atomic operation (tnbc_rma_check). */
ssize_t tnbc_rma_start(struct tnbc_ep *ep, const struct tnbc_rma_args *a,
		       const struct tnbc_opx *x);
int tnbc_rma_check(struct tnbc_ep *ep, const struct tnbc_rma_args *a);
int tnbc_rma_args_msg(struct tnbc_rma_args *a, const struct fi_msg_rma *msg,
		      uint8_t kind, uint64_t flags);
int tnbc_rma_args_atomic(struct tnbc_rma_args *a,
			 const struct fi_msg_atomic *msg,
			 const struct fi_ioc *res, size_t res_count,
			 const struct fi_ioc *cmp, size_t cmp_count,
			 uint8_t kind, uint64_t flags);
/* A request that came by transport via. */
void tnbc_rma_rx_req(struct tnbc_ep *ep, unsigned via,
		     const struct tnbc_hdr *hdr, const void *payload);
void tnbc_rma_rx_resp(struct tnbc_ep *ep, const struct tnbc_hdr *hdr,
		      const void *payload);
/* Issues an RMA operation's next chunks; -FI_EAGAIN when the peer's
 * queue is full.  ep->lock held. */
int tnbc_rma_tx(struct tnbc_ep *ep, struct tnbc_xfer *tx);
void tnbc_rma_fail(struct tnbc_ep *ep, struct tnbc_xfer *tx, int err);
int tnbc_query_atomic(struct fid_domain *domain, enum fi_datatype dt,
		      enum fi_op op, struct fi_atomic_attr *attr,
		      uint64_t flags);

#endif /* TNBC_RMA_H */
