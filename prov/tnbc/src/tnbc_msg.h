/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Messages (tnbc_msg.c): matching, eager and rendezvous, the receive
 * side of every packet.  ep->lock held unless a call says otherwise.
 */
#ifndef TNBC_MSG_H
#define TNBC_MSG_H

#include "tnbc.h"
#include "tnbc_xfer.h"

/* msg protocol, ep lock held */
void tnbc_ep_check_peers(struct tnbc_ep *ep, bool engine);
void tnbc_ep_report_tx(struct tnbc_ep *ep, struct tnbc_xfer *xfer, int err);
void tnbc_ep_flush_queues(struct tnbc_ep *ep);
int tnbc_ep_cancel_rx(struct tnbc_ep *ep, void *context);
ssize_t tnbc_ep_post_recv(struct tnbc_ep *ep, const struct iovec *iov,
			  size_t count, fi_addr_t src, uint64_t tag,
			  uint64_t ignore, void *context, uint64_t flags,
			  bool tagged, const struct tnbc_opx *x);
ssize_t tnbc_ep_post_send(struct tnbc_ep *ep, const struct iovec *iov,
			  size_t count, fi_addr_t dest, uint64_t tag,
			  uint64_t data, void *context, uint64_t flags,
			  bool tagged, const struct tnbc_opx *x);
/* Start a checked send or receive (see struct tnbc_msg_args). */
ssize_t tnbc_msg_start_send(struct tnbc_ep *ep, const struct tnbc_msg_args *a,
			    const struct tnbc_opx *x);
ssize_t tnbc_msg_start_recv(struct tnbc_ep *ep, const struct tnbc_msg_args *a,
			    const struct tnbc_opx *x);
int tnbc_ep_check_recv(struct tnbc_ep *ep, const struct iovec *iov,
		       size_t count, fi_addr_t src, uint64_t flags,
		       bool tagged);
int tnbc_ep_check_send(struct tnbc_ep *ep, const struct iovec *iov,
		       size_t count, fi_addr_t dest, uint64_t flags);

void tnbc_ep_flush_pulls(struct tnbc_ep *ep);
void tnbc_ep_free_reads(struct tnbc_ep *ep);
/* The entry points (tnbc_msg_ops.c). */
extern const struct fi_ops_msg tnbc_msg_ops;
extern const struct fi_ops_tagged tnbc_tagged_ops;

#endif /* TNBC_MSG_H */
