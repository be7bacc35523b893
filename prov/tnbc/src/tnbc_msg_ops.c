/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The message entry points (fi_msg(3), fi_tagged(3)): each validates its
 * arguments once and either hands the operation to the trigger unit
 * (FI_TRIGGER) or starts it (tnbc_msg.c), then runs the triggered work
 * its completion released.  The protocol below never calls back up here
 * or into the trigger unit's posting.
 */
#include "tnbc.h"
#include "tnbc_trigger.h"
#include "tnbc_msg.h"

/* The entry points' common path: trigger, or check and start. */
static ssize_t tnbc_msg_post(struct tnbc_ep *ep, const struct tnbc_msg_args *a,
			     const struct tnbc_opx *x, bool rx)
{
	ssize_t ret;

	if (a->flags & FI_TRIGGER)
		return tnbc_trig_post_msg(
			ep,
			rx ? (a->tagged ? FI_OP_TRECV : FI_OP_RECV)
			   : (a->tagged ? FI_OP_TSEND : FI_OP_SEND),
			a);
	if (!rx) {
		ret = tnbc_ep_check_send(ep, a->iov, a->iov_count, a->addr,
					 a->flags);
		if (!ret)
			ret = tnbc_msg_start_send(ep, a, x);
	} else if ((a->flags & (FI_CLAIM | FI_PEEK)) && !a->context) {
		return -FI_EINVAL;
	} else {
		ret = tnbc_ep_check_recv(ep, a->iov, a->iov_count, a->addr,
					 a->flags, a->tagged);
		if (!ret)
			ret = tnbc_msg_start_recv(ep, a, x);
	}
	/* its completion, or a match, may have released triggered work:
	 * this thread holds no lock now, and runs it at once */
	tnbc_trig_run(ep->domain, false);
	return ret;
}

ssize_t tnbc_ep_post_send(struct tnbc_ep *ep, const struct iovec *iov,
			  size_t count, fi_addr_t dest, uint64_t tag,
			  uint64_t data, void *context, uint64_t flags,
			  bool tagged, const struct tnbc_opx *x)
{
	const struct tnbc_msg_args a = {iov,  count,   dest,  tag,   0,
					data, context, flags, tagged};

	return tnbc_msg_post(ep, &a, x, false);
}

ssize_t tnbc_ep_post_recv(struct tnbc_ep *ep, const struct iovec *iov,
			  size_t count, fi_addr_t src, uint64_t tag,
			  uint64_t ignore, void *context, uint64_t flags,
			  bool tagged, const struct tnbc_opx *x)
{
	const struct tnbc_msg_args a = {iov, count,   src,   tag,   ignore,
					0,   context, flags, tagged};

	return tnbc_msg_post(ep, &a, x, true);
}

/* ------------------------------------------------------------------ */
/* Entry points                                                         */

/* The op flags of the endpoint or alias the call came through. */
static uint64_t tnbc_tx_flags(struct fid_ep *fid)
{
	return TNBC_HANDLE(fid)->tx_op_flags & (TNBC_SEND_FLAGS | FI_TRIGGER);
}

static uint64_t tnbc_rx_flags(struct fid_ep *fid)
{
	return TNBC_HANDLE(fid)->rx_op_flags & (TNBC_RECV_FLAGS | FI_TRIGGER);
}

static ssize_t tnbc_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
			 fi_addr_t src, void *context)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};

	(void)desc;
	return tnbc_ep_post_recv(TNBC_EP(fid), &iov, 1, src, 0, 0, context,
				 tnbc_rx_flags(fid), false, NULL);
}

static ssize_t tnbc_recvv(struct fid_ep *fid, const struct iovec *iov,
			  void **desc, size_t count, fi_addr_t src,
			  void *context)
{
	(void)desc;
	return tnbc_ep_post_recv(TNBC_EP(fid), iov, count, src, 0, 0, context,
				 tnbc_rx_flags(fid), false, NULL);
}

static ssize_t tnbc_recvmsg(struct fid_ep *fid, const struct fi_msg *msg,
			    uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return tnbc_ep_post_recv(TNBC_EP(fid), msg->msg_iov, msg->iov_count,
				 msg->addr, 0, 0, msg->context, flags, false,
				 NULL);
}

static ssize_t tnbc_send(struct fid_ep *fid, const void *buf, size_t len,
			 void *desc, fi_addr_t dest, void *context)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	(void)desc;
	return tnbc_ep_post_send(TNBC_EP(fid), &iov, 1, dest, 0, 0, context,
				 tnbc_tx_flags(fid), false, NULL);
}

static ssize_t tnbc_sendv(struct fid_ep *fid, const struct iovec *iov,
			  void **desc, size_t count, fi_addr_t dest,
			  void *context)
{
	(void)desc;
	return tnbc_ep_post_send(TNBC_EP(fid), iov, count, dest, 0, 0, context,
				 tnbc_tx_flags(fid), false, NULL);
}

static ssize_t tnbc_sendmsg(struct fid_ep *fid, const struct fi_msg *msg,
			    uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return tnbc_ep_post_send(TNBC_EP(fid), msg->msg_iov, msg->iov_count,
				 msg->addr, 0, msg->data, msg->context, flags,
				 false, NULL);
}

static ssize_t tnbc_inject(struct fid_ep *fid, const void *buf, size_t len,
			   fi_addr_t dest)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return tnbc_ep_post_send(TNBC_EP(fid), &iov, 1, dest, 0, 0, NULL,
				 FI_INJECT | TNBC_NO_COMPLETION, false, NULL);
}

static ssize_t tnbc_senddata(struct fid_ep *fid, const void *buf, size_t len,
			     void *desc, uint64_t data, fi_addr_t dest,
			     void *context)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	(void)desc;
	return tnbc_ep_post_send(TNBC_EP(fid), &iov, 1, dest, 0, data, context,
				 tnbc_tx_flags(fid) | FI_REMOTE_CQ_DATA, false,
				 NULL);
}

static ssize_t tnbc_injectdata(struct fid_ep *fid, const void *buf, size_t len,
			       uint64_t data, fi_addr_t dest)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return tnbc_ep_post_send(TNBC_EP(fid), &iov, 1, dest, 0, data, NULL,
				 FI_INJECT | FI_REMOTE_CQ_DATA |
					 TNBC_NO_COMPLETION,
				 false, NULL);
}

const struct fi_ops_msg tnbc_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = tnbc_recv,
	.recvv = tnbc_recvv,
	.recvmsg = tnbc_recvmsg,
	.send = tnbc_send,
	.sendv = tnbc_sendv,
	.sendmsg = tnbc_sendmsg,
	.inject = tnbc_inject,
	.senddata = tnbc_senddata,
	.injectdata = tnbc_injectdata,
};

static ssize_t tnbc_trecv(struct fid_ep *fid, void *buf, size_t len, void *desc,
			  fi_addr_t src, uint64_t tag, uint64_t ignore,
			  void *context)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};

	(void)desc;
	return tnbc_ep_post_recv(TNBC_EP(fid), &iov, 1, src, tag, ignore,
				 context, tnbc_rx_flags(fid), true, NULL);
}

static ssize_t tnbc_trecvv(struct fid_ep *fid, const struct iovec *iov,
			   void **desc, size_t count, fi_addr_t src,
			   uint64_t tag, uint64_t ignore, void *context)
{
	(void)desc;
	return tnbc_ep_post_recv(TNBC_EP(fid), iov, count, src, tag, ignore,
				 context, tnbc_rx_flags(fid), true, NULL);
}

static ssize_t tnbc_trecvmsg(struct fid_ep *fid,
			     const struct fi_msg_tagged *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return tnbc_ep_post_recv(TNBC_EP(fid), msg->msg_iov, msg->iov_count,
				 msg->addr, msg->tag, msg->ignore, msg->context,
				 flags, true, NULL);
}

static ssize_t tnbc_tsend(struct fid_ep *fid, const void *buf, size_t len,
			  void *desc, fi_addr_t dest, uint64_t tag,
			  void *context)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	(void)desc;
	return tnbc_ep_post_send(TNBC_EP(fid), &iov, 1, dest, tag, 0, context,
				 tnbc_tx_flags(fid), true, NULL);
}

static ssize_t tnbc_tsendv(struct fid_ep *fid, const struct iovec *iov,
			   void **desc, size_t count, fi_addr_t dest,
			   uint64_t tag, void *context)
{
	(void)desc;
	return tnbc_ep_post_send(TNBC_EP(fid), iov, count, dest, tag, 0,
				 context, tnbc_tx_flags(fid), true, NULL);
}

static ssize_t tnbc_tsendmsg(struct fid_ep *fid,
			     const struct fi_msg_tagged *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	return tnbc_ep_post_send(TNBC_EP(fid), msg->msg_iov, msg->iov_count,
				 msg->addr, msg->tag, msg->data, msg->context,
				 flags, true, NULL);
}

static ssize_t tnbc_tinject(struct fid_ep *fid, const void *buf, size_t len,
			    fi_addr_t dest, uint64_t tag)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return tnbc_ep_post_send(TNBC_EP(fid), &iov, 1, dest, tag, 0, NULL,
				 FI_INJECT | TNBC_NO_COMPLETION, true, NULL);
}

static ssize_t tnbc_tsenddata(struct fid_ep *fid, const void *buf, size_t len,
			      void *desc, uint64_t data, fi_addr_t dest,
			      uint64_t tag, void *context)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	(void)desc;
	return tnbc_ep_post_send(
		TNBC_EP(fid), &iov, 1, dest, tag, data, context,
		tnbc_tx_flags(fid) | FI_REMOTE_CQ_DATA, true, NULL);
}

static ssize_t tnbc_tinjectdata(struct fid_ep *fid, const void *buf, size_t len,
				uint64_t data, fi_addr_t dest, uint64_t tag)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return tnbc_ep_post_send(
		TNBC_EP(fid), &iov, 1, dest, tag, data, NULL,
		FI_INJECT | FI_REMOTE_CQ_DATA | TNBC_NO_COMPLETION, true, NULL);
}

const struct fi_ops_tagged tnbc_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = tnbc_trecv,
	.recvv = tnbc_trecvv,
	.recvmsg = tnbc_trecvmsg,
	.send = tnbc_tsend,
	.sendv = tnbc_tsendv,
	.sendmsg = tnbc_tsendmsg,
	.inject = tnbc_tinject,
	.senddata = tnbc_tsenddata,
	.injectdata = tnbc_tinjectdata,
};
