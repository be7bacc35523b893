/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What tnbc advertises, and how hints are checked against it.
 *
 * Sizes that depend on runtime parameters (inject size) are filled in when
 * an fi_info is built, so fi_info always reports what the endpoint will
 * really accept.
 */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <unistd.h>

#include "tnbc.h"
#include "tnbc_addr.h"
#include "tnbc_attr.h"

/* The payload every peer takes in one packet, whatever its frame and
 * whichever of the domain's transports reaches it: the smallest they
 * state (fi_tnbc(7), FI_TNBC_SLOT_SIZE). */
size_t tnbc_slot_payload(void)
{
	size_t min = tnbc_env.xport->packet_limit();

	for (unsigned i = 1; i < tnbc_env.nxport; i++)
		if (tnbc_env.xport_list[i]->packet_limit() < min)
			min = tnbc_env.xport_list[i]->packet_limit();
	return min - TNBC_XPKT_FRAME_MAX;
}

static bool tnbc_mr_mode_ok(uint32_t version, int mode)
{
	if (FI_VERSION_LT(version, FI_VERSION(1, 5)))
		return mode == FI_MR_UNSPEC || mode == FI_MR_BASIC ||
		       mode == FI_MR_SCALABLE;
	/* tnbc needs none of the modes: any set the app allows is fine,
	 * except the old enum values, which are not bits. */
	return mode != FI_MR_BASIC && mode != FI_MR_SCALABLE;
}

static int tnbc_check_tx_rx(const struct fi_tx_attr *tx,
			    const struct fi_rx_attr *rx)
{
	if (tx) {
		if (tx->caps & ~TNBC_HINT_CAPS)
			return -FI_ENODATA;
		if (tx->msg_order & ~(uint64_t)FI_ORDER_SAS)
			return -FI_ENODATA;
		if (tx->inject_size > tnbc_slot_payload() ||
		    tx->iov_limit > TNBC_IOV_LIMIT ||
		    tx->rma_iov_limit > TNBC_IOV_LIMIT)
			return -FI_ENODATA;
		if (tx->op_flags & ~TNBC_TX_OP_FLAGS)
			return -FI_ENODATA;
	}
	if (rx) {
		if (rx->caps & ~TNBC_HINT_CAPS)
			return -FI_ENODATA;
		if (rx->msg_order & ~(uint64_t)FI_ORDER_SAS)
			return -FI_ENODATA;
		if (rx->iov_limit > TNBC_IOV_LIMIT)
			return -FI_ENODATA;
		if (rx->op_flags & ~TNBC_RX_OP_FLAGS)
			return -FI_ENODATA;
		if (rx->total_buffered_recv > 0 &&
		    rx->total_buffered_recv > ((size_t)1 << 30))
			return -FI_ENODATA;
	}
	return 0;
}

int tnbc_check_hints(const struct fi_info *hints)
{
	const struct fi_domain_attr *d = hints->domain_attr;
	const struct fi_ep_attr *e = hints->ep_attr;
	const struct fi_fabric_attr *f = hints->fabric_attr;

	if (hints->caps & ~TNBC_HINT_CAPS) {
		FI_INFO(&tnbc_prov, FI_LOG_CORE,
			"unsupported caps 0x%llx requested\n",
			(unsigned long long)(hints->caps & ~TNBC_HINT_CAPS));
		return -FI_ENODATA;
	}
	if (!tnbc_addr_format_ok(hints->addr_format))
		return -FI_ENODATA;
	if (e) {
		if (e->type != FI_EP_UNSPEC && e->type != FI_EP_RDM)
			return -FI_ENODATA;
		if (e->protocol != FI_PROTO_UNSPEC &&
		    e->protocol != FI_PROTO_SHM)
			return -FI_ENODATA;
		if (e->max_msg_size > TNBC_MAX_MSG_SIZE)
			return -FI_ENODATA;
		if (e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1)
			return -FI_ENODATA;
		if (e->msg_prefix_size)
			return -FI_ENODATA;
		if (e->auth_key_size > TNBC_AUTH_KEY_MAX ||
		    (e->auth_key_size && !e->auth_key))
			return -FI_ENODATA;
	}
	if (d) {
		if (d->name && strcmp(d->name, TNBC_DOMAIN_NAME))
			return -FI_ENODATA;
		if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_MAP &&
		    d->av_type != FI_AV_TABLE)
			return -FI_ENODATA;
		if (d->cq_data_size > TNBC_CQ_DATA_SIZE)
			return -FI_ENODATA;
		if (d->caps & ~TNBC_HINT_CAPS)
			return -FI_ENODATA;
		if (d->mr_key_size > 8)
			return -FI_ENODATA;
		if (d->auth_key_size > TNBC_AUTH_KEY_MAX ||
		    (d->auth_key_size && !d->auth_key))
			return -FI_ENODATA;
	}
	if (f && f->name && strcmp(f->name, TNBC_FABRIC_NAME))
		return -FI_ENODATA;
	return tnbc_check_tx_rx(hints->tx_attr, hints->rx_attr);
}

#define TNBC_DIR_CAPS                                                          \
	(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |             \
	 FI_REMOTE_WRITE)

uint64_t tnbc_caps_from(uint64_t req)
{
	uint64_t caps;

	if (!req)
		return TNBC_CAPS;
	caps = req;
	/* No direction named means every direction (fi_getinfo(3)), for
	 * messages and for RMA separately, as libfabric's own providers
	 * read it: FI_WRITE alone does not take sends away. */
	if (!(caps & (FI_SEND | FI_RECV)))
		caps |= FI_SEND | FI_RECV;
	if ((caps & (FI_RMA | FI_ATOMIC)) &&
	    !(caps & (TNBC_DIR_CAPS & ~(uint64_t)(FI_SEND | FI_RECV))))
		caps |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	return caps;
}

struct fi_info *tnbc_info_build(const struct fi_info *hints)
{
	struct fi_info *info = fi_allocinfo();
	uint64_t caps;

	if (!info)
		return NULL;
	caps = tnbc_caps_from(hints ? hints->caps : 0);
	info->caps = caps;
	info->mode = 0;
	info->addr_format = hints ? hints->addr_format : FI_FORMAT_UNSPEC;

	info->tx_attr->caps = caps & TNBC_TX_CAPS;
	info->tx_attr->mode = 0;
	info->tx_attr->op_flags = FI_TRANSMIT_COMPLETE;
	info->tx_attr->msg_order = FI_ORDER_SAS;
	info->tx_attr->comp_order = FI_ORDER_NONE;
	info->tx_attr->inject_size = tnbc_slot_payload();
	info->tx_attr->size = TNBC_DEF_QUEUE_SIZE;
	info->tx_attr->iov_limit = TNBC_IOV_LIMIT;
	info->tx_attr->rma_iov_limit = TNBC_IOV_LIMIT;

	info->rx_attr->caps = caps & TNBC_RX_CAPS;
	info->rx_attr->mode = 0;
	info->rx_attr->op_flags = 0;
	info->rx_attr->msg_order = FI_ORDER_SAS;
	info->rx_attr->comp_order = FI_ORDER_NONE;
	info->rx_attr->total_buffered_recv = 0;
	info->rx_attr->size = TNBC_DEF_QUEUE_SIZE;
	info->rx_attr->iov_limit = TNBC_IOV_LIMIT;

	info->ep_attr->type = FI_EP_RDM;
	info->ep_attr->protocol = FI_PROTO_SHM;
	info->ep_attr->protocol_version = TNBC_PROTO_VERSION;
	info->ep_attr->max_msg_size = TNBC_MAX_MSG_SIZE;
	info->ep_attr->msg_prefix_size = 0;
	info->ep_attr->max_order_raw_size = 0;
	info->ep_attr->max_order_war_size = 0;
	info->ep_attr->max_order_waw_size = 0;
	/* every one of the 64 tag bits takes part in matching */
	info->ep_attr->mem_tag_format = ~0ULL;
	info->ep_attr->tx_ctx_cnt = 1;
	info->ep_attr->rx_ctx_cnt = 1;

	info->domain_attr->name = strdup(TNBC_DOMAIN_NAME);
	info->domain_attr->threading = FI_THREAD_SAFE;
	info->domain_attr->control_progress = FI_PROGRESS_AUTO;
	info->domain_attr->data_progress = FI_PROGRESS_AUTO;
	info->domain_attr->resource_mgmt = FI_RM_ENABLED;
	info->domain_attr->av_type = FI_AV_UNSPEC;
	info->domain_attr->mr_mode = 0;
	info->domain_attr->mr_key_size = 8;
	info->domain_attr->cq_data_size = TNBC_CQ_DATA_SIZE;
	info->domain_attr->cq_cnt = 1024;
	info->domain_attr->ep_cnt = 256;
	info->domain_attr->tx_ctx_cnt = 256;
	info->domain_attr->rx_ctx_cnt = 256;
	info->domain_attr->max_ep_tx_ctx = 1;
	info->domain_attr->max_ep_rx_ctx = 1;
	info->domain_attr->max_ep_stx_ctx = 0;
	info->domain_attr->max_ep_srx_ctx = 0;
	info->domain_attr->cntr_cnt = 1024;
	info->domain_attr->mr_iov_limit = TNBC_IOV_LIMIT;
	info->domain_attr->caps = TNBC_DOM_CAPS | (caps & FI_REMOTE_COMM);
	info->domain_attr->mode = 0;
	info->domain_attr->max_err_data = 0;
	info->domain_attr->mr_cnt = 65536;

	info->fabric_attr->name = strdup(TNBC_FABRIC_NAME);
	info->fabric_attr->prov_version = TNBC_PROV_VERSION;

	if (!info->domain_attr->name || !info->fabric_attr->name) {
		fi_freeinfo(info);
		return NULL;
	}
	if (!hints)
		return info;

	/* tnbc is thread-safe internally, so any level the app asks for
	 * is met; report the one it asked for. */
	if (hints->domain_attr) {
		const struct fi_domain_attr *d = hints->domain_attr;

		/* The engine progresses automatically in either mode; an
		 * application that asked for manual progress calls in
		 * anyway, which is harmless. */
		if (d->control_progress != FI_PROGRESS_UNSPEC)
			info->domain_attr->control_progress =
				d->control_progress;
		if (d->data_progress != FI_PROGRESS_UNSPEC)
			info->domain_attr->data_progress = d->data_progress;
		if (d->threading != FI_THREAD_UNSPEC)
			info->domain_attr->threading = d->threading;
		if (d->av_type != FI_AV_UNSPEC)
			info->domain_attr->av_type = d->av_type;
		if (d->resource_mgmt != FI_RM_UNSPEC)
			info->domain_attr->resource_mgmt = d->resource_mgmt;
		info->domain_attr->caps |= d->caps & FI_REMOTE_COMM;
	}
	if (hints->ep_attr && hints->ep_attr->mem_tag_format)
		info->ep_attr->mem_tag_format = hints->ep_attr->mem_tag_format;
	/* the auth_key, the domain's or else the endpoint's, on both:
	 * fi_freeinfo frees them */
	{
		const struct fi_ep_attr *e = hints->ep_attr;
		const struct fi_domain_attr *d = hints->domain_attr;
		const void *key = d && d->auth_key_size	  ? d->auth_key
				  : e && e->auth_key_size ? e->auth_key
							  : NULL;
		size_t len = d && d->auth_key_size   ? d->auth_key_size
			     : e && e->auth_key_size ? e->auth_key_size
						     : 0;

		if (key) {
			info->domain_attr->auth_key = malloc(len);
			info->ep_attr->auth_key = malloc(len);
			if (!info->domain_attr->auth_key ||
			    !info->ep_attr->auth_key) {
				fi_freeinfo(info);
				return NULL;
			}
			memcpy(info->domain_attr->auth_key, key, len);
			memcpy(info->ep_attr->auth_key, key, len);
			info->domain_attr->auth_key_size = len;
			info->ep_attr->auth_key_size = len;
		}
	}
	if (hints->tx_attr) {
		if (hints->tx_attr->op_flags)
			info->tx_attr->op_flags = hints->tx_attr->op_flags;
		if (hints->tx_attr->msg_order)
			info->tx_attr->msg_order = hints->tx_attr->msg_order;
		if (hints->tx_attr->size &&
		    hints->tx_attr->size < TNBC_DEF_QUEUE_SIZE)
			info->tx_attr->size = hints->tx_attr->size;
	}
	if (hints->rx_attr) {
		if (hints->rx_attr->op_flags)
			info->rx_attr->op_flags = hints->rx_attr->op_flags;
		if (hints->rx_attr->msg_order)
			info->rx_attr->msg_order = hints->rx_attr->msg_order;
		if (hints->rx_attr->size &&
		    hints->rx_attr->size < TNBC_DEF_QUEUE_SIZE)
			info->rx_attr->size = hints->rx_attr->size;
	}
	return info;
}

/* A node must at least name a host. */
static bool tnbc_node_ok(const char *node)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC}, *res = NULL;

	if (!node)
		return true;
	if (getaddrinfo(node, NULL, &hints, &res))
		return false;
	freeaddrinfo(res);
	return true;
}

/* fi_info's src_addr and dest_addr, in its addr_format: from node and
 * service (or an FI_ADDR_STR address as node), or the hints'. */
static int tnbc_info_addrs(const char *node, const char *service,
			   uint64_t flags, const struct fi_info *hints,
			   struct fi_info *fi)
{
	uint32_t fmt = fi->addr_format;
	bool source = flags & FI_SOURCE;
	struct tnbc_addr src, dst;
	bool have_src = false, have_dst = false;
	int ret;

	if (tnbc_addr_is_str(node) && !service) {
		ret = tnbc_addr_import(NULL, FI_ADDR_STR, node, 0, source,
				       source ? &src : &dst);
		if (ret)
			return -FI_ENODATA;
		have_src = source;
		have_dst = !source;
	} else if (!tnbc_node_ok(node)) {
		FI_INFO(&tnbc_prov, FI_LOG_CORE, "cannot resolve node %s\n",
			node);
		return -FI_ENODATA;
	} else {
		/* A service without FI_SOURCE names the peer to reach; our
		 * own endpoint then gets a fresh name when it opens. */
		if (!source && service) {
			ret = tnbc_addr_svc(node, service, false, &dst);
			if (ret)
				goto no_xport;
			have_dst = true;
		}
		if (!source)
			node = service = NULL;
		ret = tnbc_addr_svc(node, service, true, &src);
		if (ret)
			goto no_xport;
		have_src = true;
	}
	if (!have_src) {
		ret = tnbc_addr_svc(NULL, NULL, true, &src);
		if (ret)
			goto no_xport;
	}
	if (hints && hints->src_addr &&
	    tnbc_addr_import(NULL, fmt, hints->src_addr, hints->src_addrlen,
			     true, &src))
		return -FI_ENODATA;
	if (hints && hints->dest_addr) {
		if (tnbc_addr_import(NULL, fmt, hints->dest_addr,
				     hints->dest_addrlen, false, &dst))
			return -FI_ENODATA;
		have_dst = true;
	}
	ret = tnbc_addr_export_dup(fmt, &src, &fi->src_addr, &fi->src_addrlen);
	if (!ret && have_dst)
		ret = tnbc_addr_export_dup(fmt, &dst, &fi->dest_addr,
					   &fi->dest_addrlen);
	return ret == -FI_ENOMEM ? ret : ret ? -FI_ENODATA : 0;
no_xport:
	FI_INFO(&tnbc_prov, FI_LOG_CORE,
		"no transport can use node %s service %s\n",
		node ? node : "(none)", service ? service : "(none)");
	return -FI_ENODATA;
}

int tnbc_getinfo(uint32_t version, const char *node, const char *service,
		 uint64_t flags, const struct fi_info *hints,
		 struct fi_info **info)
{
	struct fi_info *fi;
	int ret;

	if (FI_VERSION_LT(version, FI_VERSION(1, 0)) ||
	    FI_VERSION_LT(TNBC_FI_VERSION, version) || !tnbc_env.xport)
		return -FI_ENODATA;
	if (hints) {
		ret = tnbc_check_hints(hints);
		if (ret)
			return ret;
		if (hints->domain_attr &&
		    !tnbc_mr_mode_ok(version, hints->domain_attr->mr_mode))
			return -FI_ENODATA;
	}

	fi = tnbc_info_build(hints);
	if (!fi)
		return -FI_ENOMEM;
	/* Before 1.5 mr_mode is an enum: echo the one asked for. */
	if (FI_VERSION_LT(version, FI_VERSION(1, 5)))
		fi->domain_attr->mr_mode =
			hints && hints->domain_attr &&
					hints->domain_attr->mr_mode ==
						FI_MR_BASIC
				? FI_MR_BASIC
				: FI_MR_SCALABLE;

	ret = tnbc_info_addrs(node, service, flags, hints, fi);
	if (ret)
		goto err;
	*info = fi;
	return 0;
err:
	fi_freeinfo(fi);
	return ret;
}
