/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Memory regions.  tnbc requires no registration for local buffers
 * (mr_mode 0); a region exists so that peers can reach memory by key
 * with RMA and atomics.  Regions live in a per-domain hash by key, read
 * by the target side of every RMA request under mr_lock (read) and
 * changed under it (write), so a region cannot disappear while a
 * request uses it.  Keys are provider-chosen unless the application
 * asks for one (and the domain has no FI_MR_PROV_KEY).
 */
#include <stdlib.h>

#include "tnbc.h"
#include "tnbc_unsupp.h"
#include "tnbc_mr.h"

#define TNBC_MR_ACCESS                                                         \
	(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |             \
	 FI_REMOTE_WRITE)

static size_t tnbc_mr_bucket(uint64_t key)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 54) % TNBC_MR_HASH;
}

/* mr_lock held */
struct tnbc_mr *tnbc_mr_find(struct tnbc_domain *dom, uint64_t key)
{
	struct tnbc_mr *mr = dom->mr_hash[tnbc_mr_bucket(key)];

	while (mr && mr->mr_fid.key != key)
		mr = mr->hnext;
	return mr;
}

/* mr_lock held (write) */
void tnbc_mr_hash_remove(struct tnbc_mr *mr)
{
	struct tnbc_mr **p =
		&mr->domain->mr_hash[tnbc_mr_bucket(mr->mr_fid.key)];

	while (*p && *p != mr)
		p = &(*p)->hnext;
	if (*p)
		*p = mr->hnext;
}

static int tnbc_mr_close(struct fid *fid)
{
	struct tnbc_mr *mr = tnbc_container_of(fid, struct tnbc_mr, mr_fid.fid);
	struct tnbc_domain *dom = mr->domain;

	pthread_rwlock_wrlock(&dom->mr_lock);
	tnbc_mr_hash_remove(mr);
	pthread_rwlock_unlock(&dom->mr_lock);
	/* no request finds it now: its exposures go (a peer still reading
	 * it reads a region the application closed, as with any NIC) */
	for (unsigned i = 0; i < TNBC_XPORTS_MAX; i++) {
		struct tnbc_mr_xexp *x = &mr->xexp[i];

		if (x->peer && x->reg && tnbc_xpeer_ops(x->peer)->unexpose)
			tnbc_xpeer_ops(x->peer)->unexpose(x->peer, x->reg);
	}
	if (mr->rma_cntr)
		atomic_fetch_sub(&mr->rma_cntr->ref, 1);
	atomic_fetch_sub(&dom->ref, 1);
	free(mr);
	return 0;
}

/* FI_RMA_EVENT: a counter counting remote accesses to this region. */
static int tnbc_mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct tnbc_mr *mr = tnbc_container_of(fid, struct tnbc_mr, mr_fid.fid);
	struct tnbc_cntr *cntr;

	if (!bfid)
		return -FI_EINVAL;
	if (bfid->fclass == FI_CLASS_EP)
		return 0; /* FI_MR_ENDPOINT is not required: nothing to do */
	if (bfid->fclass != FI_CLASS_CNTR)
		return -FI_EINVAL;
	if (!flags || (flags & ~(uint64_t)(FI_REMOTE_READ | FI_REMOTE_WRITE)))
		return -FI_EBADFLAGS;
	cntr = tnbc_cntr_fid(bfid);
	if (cntr->domain != mr->domain || mr->rma_cntr)
		return -FI_EINVAL;
	pthread_rwlock_wrlock(&mr->domain->mr_lock);
	mr->rma_cntr = cntr;
	mr->cntr_flags = flags;
	pthread_rwlock_unlock(&mr->domain->mr_lock);
	atomic_fetch_add(&cntr->ref, 1);
	return 0;
}

static int tnbc_mr_control(struct fid *fid, int command, void *arg)
{
	(void)fid;
	(void)arg;
	/* regions are usable at once; enabling is accepted (FI_MR_RMA_EVENT
	 * applications call it) */
	return command == FI_ENABLE ? 0 : -FI_ENOSYS;
}

static struct fi_ops tnbc_mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_mr_close,
	.bind = tnbc_mr_bind,
	.control = tnbc_mr_control,
	.ops_open = tnbc_no_ops_open,
};

static bool tnbc_mr_virt(const struct tnbc_domain *dom)
{
	return (dom->mr_mode & FI_MR_VIRT_ADDR) || dom->mr_mode == FI_MR_BASIC;
}

static bool tnbc_mr_prov_key(const struct tnbc_domain *dom)
{
	return (dom->mr_mode & FI_MR_PROV_KEY) || dom->mr_mode == FI_MR_BASIC;
}

int tnbc_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
		    uint64_t flags, struct fid_mr **mr_out)
{
	struct tnbc_domain *dom;
	struct tnbc_mr *mr;
	uint64_t key;

	if (!fid || fid->fclass != FI_CLASS_DOMAIN || !attr || !mr_out)
		return -FI_EINVAL;
	if (flags || attr->iov_count > TNBC_IOV_LIMIT ||
	    (attr->iov_count && !attr->mr_iov) ||
	    (attr->access & ~(uint64_t)TNBC_MR_ACCESS))
		return -FI_EINVAL;
	if (attr->iface != FI_HMEM_SYSTEM)
		return -FI_EOPNOTSUPP;
	for (size_t i = 0; i < attr->iov_count; i++)
		if (!attr->mr_iov[i].iov_base && attr->mr_iov[i].iov_len)
			return -FI_EINVAL;
	dom = tnbc_container_of(fid, struct tnbc_domain, domain_fid.fid);
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	mr->domain = dom;
	mr->iov_count = attr->iov_count;
	if (attr->iov_count)
		memcpy(mr->iov, attr->mr_iov,
		       attr->iov_count * sizeof(struct iovec));
	mr->len = tnbc_iov_len(mr->iov, mr->iov_count);
	mr->access = attr->access;
	/* Without FI_MR_VIRT_ADDR a peer addresses the region from 0. */
	mr->base = tnbc_mr_virt(dom) && mr->iov_count
			   ? (uint64_t)(uintptr_t)mr->iov[0].iov_base
			   : 0;
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = attr->context;
	mr->mr_fid.fid.ops = &tnbc_mr_fi_ops;
	mr->mr_fid.mem_desc = mr;

	pthread_rwlock_wrlock(&dom->mr_lock);
	if (!tnbc_mr_prov_key(dom) && attr->requested_key) {
		key = attr->requested_key;
		if (tnbc_mr_find(dom, key)) {
			pthread_rwlock_unlock(&dom->mr_lock);
			free(mr);
			return -FI_ENOKEY;
		}
	} else {
		do
			key = atomic_fetch_add(&dom->next_mr_key, 1);
		while (!key || tnbc_mr_find(dom, key));
	}
	mr->mr_fid.key = key;
	mr->hnext = dom->mr_hash[tnbc_mr_bucket(key)];
	dom->mr_hash[tnbc_mr_bucket(key)] = mr;
	pthread_rwlock_unlock(&dom->mr_lock);
	atomic_fetch_add(&dom->ref, 1);
	*mr_out = &mr->mr_fid;
	return 0;
}

int tnbc_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		 uint64_t access, uint64_t offset, uint64_t requested_key,
		 uint64_t flags, struct fid_mr **mr, void *context)
{
	struct fi_mr_attr attr = {
		.mr_iov = iov,
		.iov_count = count,
		.access = access,
		.offset = offset,
		.requested_key = requested_key,
		.context = context,
		.iface = FI_HMEM_SYSTEM,
	};

	return tnbc_mr_regattr(fid, &attr, flags, mr);
}

int tnbc_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
		uint64_t offset, uint64_t requested_key, uint64_t flags,
		struct fid_mr **mr, void *context)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return tnbc_mr_regv(fid, &iov, 1, access, offset, requested_key, flags,
			    mr, context);
}
