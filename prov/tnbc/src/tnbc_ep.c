/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Endpoint object: bindings, enable, names and teardown.  The data path
 * is in tnbc_msg.c; progress in tnbc_progress.c.
 */
#include <stdlib.h>
#include <unistd.h>

#include "tnbc.h"
#include "tnbc_lock.h"
#include "coll/tnbc_coll.h"
#include "tnbc_eq.h"
#include "tnbc_comp.h"
#include "tnbc_trigger.h"
#include "tnbc_xfer.h"
#include "tnbc_unsupp.h"
#include "tnbc_msg.h"
#include "tnbc_rma.h"
#include "tnbc_addr.h"
#include "tnbc_attr.h"

static void tnbc_ep_unbind_all(struct tnbc_ep *ep)
{
	if (ep->av)
		atomic_fetch_sub(&ep->av->ref, 1);
	if (ep->eq)
		atomic_fetch_sub(&ep->eq->ref, 1);
	if (ep->tx_cq)
		atomic_fetch_sub(&ep->tx_cq->ref, 1);
	if (ep->rx_cq)
		atomic_fetch_sub(&ep->rx_cq->ref, 1);
	struct tnbc_cntr *cntrs[] = {ep->tx_cntr, ep->rx_cntr,	ep->rd_cntr,
				     ep->wr_cntr, ep->rrd_cntr, ep->rwr_cntr};

	for (size_t i = 0; i < sizeof(cntrs) / sizeof(cntrs[0]); i++)
		if (cntrs[i])
			atomic_fetch_sub(&cntrs[i]->ref, 1);
}

static void tnbc_ep_xports_close(struct tnbc_ep *ep, unsigned n)
{
	while (n--)
		ep->domain->xp[n].ops->ep_close(ep->xp[n].xep);
}

/* Numbers of this process's endpoints: with pid, host and nonce, who an
 * endpoint is, whichever transport reaches it. */
static atomic_uint tnbc_ep_next_uid;

/* Chooses who the endpoint is, and opens its end of every transport of
 * the domain under that name.  An ordinary endpoint whose random name
 * some transport finds taken (left by a crash, or made by another user
 * ahead of it) tries a fresh one; a service's number is its name. */
static int tnbc_ep_xports_open(struct tnbc_ep *ep)
{
	struct tnbc_domain *dom = ep->domain;
	struct tnbc_name *n = &ep->name;
	uint8_t want[TNBC_XADDR_LEN];
	struct tnbc_addr whole;
	int ret = -FI_EADDRINUSE;

	memset(n, 0, sizeof(*n));
	n->version = TNBC_PROTO_VERSION;
	n->xports = dom->xmask;
	n->pid = (uint32_t)getpid();
	n->host = tnbc_host_id();
	if (ep->svc >= 0) {
		n->kind = TNBC_NAME_SVC;
		n->uid = (uint32_t)ep->svc;
	} else {
		n->kind = TNBC_NAME_PID;
		n->uid = atomic_fetch_add(&tnbc_ep_next_uid, 1);
	}
	for (int tries = 0; ret == -FI_EADDRINUSE && tries < TNBC_EP_NAME_TRIES;
	     tries++) {
		unsigned i;

		if (n->kind == TNBC_NAME_PID)
			n->nonce = tnbc_nonce();
		else if (tries)
			break;
		/* each try asks for the addresses asked for */
		if (!tries)
			memcpy(want, ep->xaddr, sizeof(want));
		else
			memcpy(ep->xaddr, want, sizeof(want));
		for (i = 0; i < dom->nxp; i++) {
			ep->xp[i].ops = dom->xp[i].ops;
			int off = dom->xp[i].ops->xaddr_off;

			ret = dom->xp[i].ops->ep_open(dom->xp[i].xdom, n,
						      off >= 0 ? ep->xaddr + off
							       : NULL,
						      &ep->xp[i].xep);
			if (ret)
				break;
		}
		if (ret)
			tnbc_ep_xports_close(ep, i);
	}
	if (ret)
		return ret;
	ep->nxp = dom->nxp;
	/* the whole address, for transports that answer lookups */
	memcpy(whole.xaddr, ep->xaddr, sizeof(whole.xaddr));
	whole.name = *n;
	for (unsigned i = 0; i < ep->nxp; i++)
		if (ep->xp[i].ops->ep_named)
			ep->xp[i].ops->ep_named(ep->xp[i].xep, &whole);
	return 0;
}

static int tnbc_ep_close(struct fid *fid)
{
	struct tnbc_ep *ep = tnbc_container_of(fid, struct tnbc_ep, ep_fid.fid);
	struct tnbc_domain *dom = ep->domain;

	/* Queued triggered work and aliases name this endpoint
	 * (fi_tnbc(7)). */
	if (atomic_load(&ep->ref))
		tnbc_trig_quiesce(dom);
	if (atomic_load(&ep->ref)) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
			"endpoint still has %d aliases or queued triggered "
			"operations\n",
			atomic_load(&ep->ref));
		return -FI_EBUSY;
	}
	/* Unlink first so neither the engine nor an application thread in
	 * fi_cq_read can start progressing this endpoint again. */
	pthread_rwlock_wrlock(&dom->ep_lock);
	tnbc_list_remove(&ep->dom_entry);
	dom->ep_count--;
	pthread_rwlock_unlock(&dom->ep_lock);

	tnbc_ep_lock(ep);
	tnbc_ep_flush_pulls(ep);
	tnbc_ep_flush_queues(ep);
	tnbc_xfer_cache_free(ep);
	tnbc_ep_unlock(ep);

	tnbc_ep_xports_close(ep, dom->nxp);
	tnbc_ep_free_reads(ep);
	tnbc_ep_unbind_all(ep);
	tnbc_coll_ep_fini(ep);
	free(ep->pulls);
	free(ep->rndv.slot);
	free(ep->rndv.gen);
	free(ep->rma_ids.slot);
	free(ep->rma_ids.gen);
	fi_freeinfo(ep->info);
	pthread_mutex_destroy(&ep->lock);
	atomic_fetch_sub(&dom->ref, 1);
	free(ep);
	return 0;
}

static int tnbc_ep_bind_cq(struct tnbc_ep *ep, struct tnbc_cq *cq,
			   uint64_t flags)
{
	if (flags &
	    ~(uint64_t)(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION))
		return -FI_EBADFLAGS;
	if (!(flags & (FI_TRANSMIT | FI_RECV)))
		return -FI_EINVAL;
	if (((flags & FI_TRANSMIT) && ep->tx_cq) ||
	    ((flags & FI_RECV) && ep->rx_cq))
		return -FI_EINVAL;
	if (flags & FI_TRANSMIT) {
		ep->tx_cq = cq;
		ep->tx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
		atomic_fetch_add(&cq->ref, 1);
	}
	if (flags & FI_RECV) {
		ep->rx_cq = cq;
		ep->rx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
		atomic_fetch_add(&cq->ref, 1);
	}
	return 0;
}

static int tnbc_ep_bind_cntr(struct tnbc_ep *ep, struct tnbc_cntr *cntr,
			     uint64_t flags)
{
	static const uint64_t kinds[] = {FI_SEND,	 FI_RECV,
					 FI_READ,	 FI_WRITE,
					 FI_REMOTE_READ, FI_REMOTE_WRITE};
	struct tnbc_cntr **slots[] = {&ep->tx_cntr,  &ep->rx_cntr,
				      &ep->rd_cntr,  &ep->wr_cntr,
				      &ep->rrd_cntr, &ep->rwr_cntr};
	size_t n = sizeof(kinds) / sizeof(kinds[0]);

	if (flags & ~(uint64_t)(FI_SEND | FI_RECV | FI_READ | FI_WRITE |
				FI_REMOTE_READ | FI_REMOTE_WRITE))
		return -FI_EBADFLAGS;
	if (!flags)
		return -FI_EINVAL;
	for (size_t i = 0; i < n; i++)
		if ((flags & kinds[i]) && *slots[i])
			return -FI_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!(flags & kinds[i]))
			continue;
		*slots[i] = cntr;
		atomic_fetch_add(&cntr->ref, 1);
	}
	return 0;
}

static int tnbc_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct tnbc_ep *ep = tnbc_container_of(fid, struct tnbc_ep, ep_fid.fid);
	int ret;

	if (!bfid)
		return -FI_EINVAL;
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	tnbc_ep_lock(ep);
	switch (bfid->fclass) {
	case FI_CLASS_AV: {
		struct tnbc_av *av =
			tnbc_container_of(bfid, struct tnbc_av, av_fid.fid);

		if (av->domain != ep->domain) {
			ret = -FI_EINVAL;
		} else if (ep->av) {
			ret = -FI_EINVAL;
		} else if (flags) {
			ret = -FI_EBADFLAGS;
		} else {
			ep->av = av;
			atomic_fetch_add(&av->ref, 1);
			ret = 0;
		}
		break;
	}
	case FI_CLASS_CQ: {
		struct tnbc_cq *cq =
			tnbc_container_of(bfid, struct tnbc_cq, cq_fid.fid);

		ret = cq->domain != ep->domain ? -FI_EINVAL
					       : tnbc_ep_bind_cq(ep, cq, flags);
		break;
	}
	case FI_CLASS_CNTR: {
		struct tnbc_cntr *c = tnbc_cntr_fid(bfid);

		ret = c->domain != ep->domain ? -FI_EINVAL
					      : tnbc_ep_bind_cntr(ep, c, flags);
		break;
	}
	case FI_CLASS_EQ: {
		/* RDM endpoints raise no connection events: only joins */
		struct tnbc_eq *eq =
			tnbc_container_of(bfid, struct tnbc_eq, eq_fid.fid);

		if (eq->fabric != ep->domain->fabric || ep->eq) {
			ret = -FI_EINVAL;
			break;
		}
		atomic_fetch_add(&eq->ref, 1);
		ep->eq = eq;
		ret = 0;
		break;
	}
	default:
		ret = -FI_EINVAL;
		break;
	}
	tnbc_ep_unlock(ep);
	return ret;
}

static int tnbc_ep_enable(struct tnbc_ep *ep)
{
	struct tnbc_domain *dom = ep->domain;

	if (ep->enabled)
		return 0;
	if (!ep->av)
		return -FI_ENOAV;
	if ((ep->info->caps & FI_SEND) && !ep->tx_cq && !ep->tx_cntr &&
	    !ep->rd_cntr && !ep->wr_cntr)
		return -FI_ENOCQ;
	if ((ep->info->caps & FI_RECV) && !ep->rx_cq && !ep->rx_cntr)
		return -FI_ENOCQ;
	pthread_rwlock_wrlock(&dom->ep_lock);
	tnbc_list_insert_tail(&ep->dom_entry, &dom->ep_list);
	dom->ep_count++;
	ep->enabled = true;
	pthread_rwlock_unlock(&dom->ep_lock);
	return 0;
}

static int tnbc_alias_close(struct fid *fid)
{
	struct tnbc_ep_handle *h = TNBC_HANDLE(fid);

	atomic_fetch_sub(&h->ep->ref, 1);
	free(h);
	return 0;
}

static int tnbc_alias_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid;
	(void)bfid;
	(void)flags;
	return -FI_EINVAL; /* bind to the endpoint itself */
}

static int tnbc_alias_control(struct fid *fid, int command, void *arg);

static struct fi_ops tnbc_alias_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_alias_close,
	.bind = tnbc_alias_bind,
	.control = tnbc_alias_control,
	.ops_open = tnbc_no_ops_open,
};

/* fi_ep_alias(3): the same endpoint with other default op flags. */
static int tnbc_ep_alias(struct tnbc_ep *ep, struct fi_alias *al)
{
	struct tnbc_ep_handle *h;
	uint64_t dir, opf;

	if (!al || !al->fid)
		return -FI_EINVAL;
	dir = al->flags & (FI_TRANSMIT | FI_RECV);
	opf = al->flags & ~dir;
	if (!dir || (opf & ~(TNBC_TX_OP_FLAGS | FI_TRIGGER)))
		return -FI_EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -FI_ENOMEM;
	h->ep_fid = ep->ep_fid;
	h->ep_fid.fid.ops = &tnbc_alias_fi_ops;
	h->ep = ep;
	h->tx_op_flags = (dir & FI_TRANSMIT) ? opf : ep->tx_op_flags;
	h->rx_op_flags = (dir & FI_RECV) ? opf : ep->rx_op_flags;
	atomic_fetch_add(&ep->ref, 1);
	*al->fid = &h->ep_fid.fid;
	return 0;
}

static int tnbc_ep_control(struct fid *fid, int command, void *arg)
{
	struct tnbc_ep *ep = tnbc_container_of(fid, struct tnbc_ep, ep_fid.fid);
	uint64_t *flags = arg;

	switch (command) {
	case FI_ENABLE:
		return tnbc_ep_enable(ep);
	case FI_ALIAS:
		return tnbc_ep_alias(ep, arg);
	case FI_GETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if ((*flags & (FI_TRANSMIT | FI_RECV)) ==
		    (FI_TRANSMIT | FI_RECV))
			return -FI_EINVAL;
		if (*flags & FI_TRANSMIT)
			*flags = ep->tx_op_flags;
		else if (*flags & FI_RECV)
			*flags = ep->rx_op_flags;
		else
			return -FI_EINVAL;
		return 0;
	case FI_SETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if (*flags & FI_TRANSMIT) {
			if (*flags & ~(TNBC_TX_OP_FLAGS | FI_TRANSMIT))
				return -FI_EINVAL;
			ep->tx_op_flags = *flags & ~(uint64_t)FI_TRANSMIT;
		} else if (*flags & FI_RECV) {
			if (*flags & ~(uint64_t)(TNBC_RX_OP_FLAGS | FI_RECV))
				return -FI_EINVAL;
			ep->rx_op_flags = *flags & ~(uint64_t)FI_RECV;
		} else {
			return -FI_EINVAL;
		}
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static int tnbc_ep_set_priority(struct fid_ep *fid, unsigned int prio)
{
	struct tnbc_ep *ep;

	if (!fid || fid->fid.fclass != FI_CLASS_EP || prio > FI_TNBC_PRIO_MAX)
		return -FI_EINVAL;
	ep = TNBC_EP(fid);
	atomic_store(&ep->prio, prio);
	return 0;
}

static int tnbc_ep_get_priority(struct fid_ep *fid, unsigned int *prio)
{
	struct tnbc_ep *ep;

	if (!fid || fid->fid.fclass != FI_CLASS_EP || !prio)
		return -FI_EINVAL;
	ep = TNBC_EP(fid);
	*prio = atomic_load(&ep->prio);
	return 0;
}

static int tnbc_alias_control(struct fid *fid, int command, void *arg)
{
	struct tnbc_ep_handle *h = TNBC_HANDLE(fid);
	uint64_t *flags = arg;

	switch (command) {
	case FI_GETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if ((*flags & (FI_TRANSMIT | FI_RECV)) == FI_TRANSMIT)
			*flags = h->tx_op_flags;
		else if ((*flags & (FI_TRANSMIT | FI_RECV)) == FI_RECV)
			*flags = h->rx_op_flags;
		else
			return -FI_EINVAL;
		return 0;
	case FI_ALIAS:
		return tnbc_ep_alias(h->ep, arg);
	default:
		return -FI_ENOSYS;
	}
}

static struct fi_tnbc_ops_ep tnbc_ext_ep_ops = {
	.size = sizeof(struct fi_tnbc_ops_ep),
	.set_priority = tnbc_ep_set_priority,
	.get_priority = tnbc_ep_get_priority,
};

static int tnbc_ep_ops_open(struct fid *fid, const char *name, uint64_t flags,
			    void **ops, void *context)
{
	(void)fid;
	(void)context;
	if (!name || !ops || flags)
		return -FI_EINVAL;
	if (!strcmp(name, FI_TNBC_EP_OPS_1)) {
		*ops = &tnbc_ext_ep_ops;
		return 0;
	}
	if (!strcmp(name, FI_TNBC_COLL_OPS_1)) {
		*ops = &tnbc_desc_ops;
		return 0;
	}
	return -FI_ENOSYS;
}

static struct fi_ops tnbc_ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_ep_close,
	.bind = tnbc_ep_bind,
	.control = tnbc_ep_control,
	.ops_open = tnbc_ep_ops_open,
};

static ssize_t tnbc_ep_cancel(fid_t fid, void *context)
{
	struct tnbc_ep *ep;
	int ret;

	if (!fid || fid->fclass != FI_CLASS_EP)
		return -FI_EINVAL;
	ep = TNBC_EP(fid); /* an alias cancels on its endpoint */
	tnbc_ep_lock(ep);
	ret = tnbc_ep_cancel_rx(ep, context);
	tnbc_ep_unlock(ep);
	if (ret == -FI_ENOENT && context)
		ret = tnbc_trig_cancel_ctx(ep, context);
	else
		tnbc_trig_run(ep->domain, false); /* the error count may fire */
	return ret;
}

static int tnbc_ep_getopt(fid_t fid, int level, int optname, void *optval,
			  size_t *optlen)
{
	(void)fid;
	(void)optval;
	(void)optlen;
	(void)level;
	(void)optname;
	return -FI_ENOPROTOOPT; /* tnbc has no endpoint options yet */
}

static int tnbc_ep_setopt(fid_t fid, int level, int optname, const void *optval,
			  size_t optlen)
{
	(void)fid;
	(void)optval;
	(void)optlen;
	(void)level;
	(void)optname;
	return -FI_ENOPROTOOPT; /* tnbc has no endpoint options yet */
}

static int tnbc_ep_no_ctx(struct fid_ep *sep, int index,
			  struct fi_tx_attr *attr, struct fid_ep **tx_ep,
			  void *context)
{
	(void)sep;
	(void)index;
	(void)attr;
	(void)tx_ep;
	(void)context;
	return -FI_ENOSYS;
}

static int tnbc_ep_no_rx_ctx(struct fid_ep *sep, int index,
			     struct fi_rx_attr *attr, struct fid_ep **rx_ep,
			     void *context)
{
	(void)sep;
	(void)index;
	(void)attr;
	(void)rx_ep;
	(void)context;
	return -FI_ENOSYS;
}

static ssize_t tnbc_ep_size_left(struct fid_ep *fid)
{
	(void)fid;
	return TNBC_DEF_QUEUE_SIZE;
}

static struct fi_ops_ep tnbc_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = tnbc_ep_cancel,
	.getopt = tnbc_ep_getopt,
	.setopt = tnbc_ep_setopt,
	.tx_ctx = tnbc_ep_no_ctx,
	.rx_ctx = tnbc_ep_no_rx_ctx,
	.rx_size_left = tnbc_ep_size_left,
	.tx_size_left = tnbc_ep_size_left,
};

static int tnbc_ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct tnbc_ep *ep = TNBC_EP(fid);
	struct tnbc_addr a;

	if (!addrlen || (!addr && *addrlen))
		return -FI_EINVAL;
	a.name = ep->name;
	memcpy(a.xaddr, ep->xaddr, sizeof(a.xaddr));
	return tnbc_addr_export(ep->info->addr_format, &a, addr, addrlen);
}

static int tnbc_cm_setname(fid_t fid, void *addr, size_t addrlen)
{
	(void)fid;
	(void)addr;
	(void)addrlen;
	return -FI_ENOSYS; /* the name is chosen when the endpoint opens */
}

static int tnbc_cm_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	(void)ep;
	(void)addr;
	(void)addrlen;
	return -FI_ENOSYS; /* connectionless */
}

static int tnbc_cm_connect(struct fid_ep *ep, const void *addr,
			   const void *param, size_t paramlen)
{
	(void)ep;
	(void)addr;
	(void)param;
	(void)paramlen;
	return -FI_ENOSYS;
}

static int tnbc_cm_listen(struct fid_pep *pep)
{
	(void)pep;
	return -FI_ENOSYS;
}

static int tnbc_cm_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	(void)ep;
	(void)param;
	(void)paramlen;
	return -FI_ENOSYS;
}

static int tnbc_cm_reject(struct fid_pep *pep, fid_t handle, const void *param,
			  size_t paramlen)
{
	(void)pep;
	(void)handle;
	(void)param;
	(void)paramlen;
	return -FI_ENOSYS;
}

static int tnbc_cm_shutdown(struct fid_ep *ep, uint64_t flags)
{
	(void)ep;
	(void)flags;
	return -FI_ENOSYS;
}

static struct fi_ops_cm tnbc_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = tnbc_cm_setname,
	.getname = tnbc_ep_getname,
	.getpeer = tnbc_cm_getpeer,
	.connect = tnbc_cm_connect,
	.listen = tnbc_cm_listen,
	.accept = tnbc_cm_accept,
	.reject = tnbc_cm_reject,
	.shutdown = tnbc_cm_shutdown,
	.join = tnbc_coll_join,
};

int tnbc_ep_open(struct fid_domain *domain, struct fi_info *info,
		 struct fid_ep **ep_out, void *context)
{
	struct tnbc_domain *dom;
	struct tnbc_ep *ep;
	struct tnbc_addr src;
	int ret;

	if (!domain || !info || !ep_out)
		return -FI_EINVAL;
	if (info->ep_attr && info->ep_attr->type != FI_EP_RDM &&
	    info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	ret = tnbc_check_hints(info);
	if (ret)
		return -FI_EINVAL;
	dom = tnbc_container_of(domain, struct tnbc_domain, domain_fid);
	/* an endpoint's key is its domain's: the domain's connections
	 * present it */
	if (info->ep_attr && info->ep_attr->auth_key_size &&
	    (info->ep_attr->auth_key_size != dom->auth_key_size ||
	     memcmp(info->ep_attr->auth_key, dom->auth_key,
		    dom->auth_key_size))) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
			"an endpoint's auth_key must be its domain's\n");
		return -FI_EINVAL;
	}
	/* an address of another provider, or of an older tnbc */
	if (info->src_addr &&
	    tnbc_addr_import(NULL, info->addr_format, info->src_addr,
			     info->src_addrlen, true, &src)) {
		FI_WARN(&tnbc_prov, FI_LOG_EP_CTRL,
			"src_addr of %zu bytes is no tnbc address of format "
			"%u\n",
			info->src_addrlen, (unsigned)info->addr_format);
		return -FI_EINVAL;
	}
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->info = fi_dupinfo(info);
	if (!ep->info) {
		ret = -FI_ENOMEM;
		goto err_free;
	}
	ep->info->caps = tnbc_caps_from(ep->info->caps);
	ep->domain = dom;
	ep->self = ep;
	ep->svc = -1;
	ep->rndv.waits = &dom->engine.peer_waits;
	ep->rma_ids.waits = &dom->engine.peer_waits;
	/* the address asked for: a service number, and where each network
	 * transport listens (the transport fills in what it takes) */
	if (info->src_addr) {
		if (src.name.kind == TNBC_NAME_SVC)
			ep->svc = src.name.uid;
		memcpy(ep->xaddr, src.xaddr, sizeof(ep->xaddr));
	}
	ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	pthread_mutex_init(&ep->lock, NULL);
	tnbc_list_init(&ep->dom_entry);
	tnbc_list_init(&ep->rx_msg);
	tnbc_list_init(&ep->rx_tagged);
	tnbc_list_init(&ep->unexp_msg);
	tnbc_list_init(&ep->unexp_tagged);
	tnbc_list_init(&ep->rx_coll);
	tnbc_list_init(&ep->unexp_coll);
	tnbc_list_init(&ep->groups);
	tnbc_list_init(&ep->coll_joins);
	tnbc_list_init(&ep->tx_queue);
	tnbc_list_init(&ep->ctrl_queue);
	tnbc_list_init(&ep->stream_rx);
	tnbc_list_init(&ep->reads);

	ret = tnbc_ep_xports_open(ep);
	if (ret)
		goto err_info;

	ep->ep_fid.fid.fclass = FI_CLASS_EP;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &tnbc_ep_fi_ops;
	ep->ep_fid.ops = &tnbc_ep_ops;
	ep->ep_fid.cm = &tnbc_cm_ops;
	ep->ep_fid.msg = (struct fi_ops_msg *)&tnbc_msg_ops;
	ep->ep_fid.tagged = (struct fi_ops_tagged *)&tnbc_tagged_ops;
	ep->ep_fid.rma = (struct fi_ops_rma *)&tnbc_rma_ops;
	ep->ep_fid.atomic = (struct fi_ops_atomic *)&tnbc_atomic_ops;
	ep->ep_fid.collective = &tnbc_coll_ops;
	atomic_fetch_add(&dom->ref, 1);
	*ep_out = &ep->ep_fid;
	return 0;

err_info:
	pthread_mutex_destroy(&ep->lock);
	fi_freeinfo(ep->info);
err_free:
	free(ep);
	return ret;
}
