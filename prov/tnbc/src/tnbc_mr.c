/*
 * Memory regions.  tnbc requires no registration (mr_mode 0): a region
 * only records its buffers and access so that later RMA can validate
 * keys.  Keys are provider-chosen unless the application asks for one.
 */
#include <stdlib.h>

#include "tnbc.h"
#include "tnbc_unsupp.h"

#define TNBC_MR_ACCESS                                                         \
	(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |             \
	 FI_REMOTE_WRITE)

static int tnbc_mr_close(struct fid *fid)
{
	struct tnbc_mr *mr = tnbc_container_of(fid, struct tnbc_mr, mr_fid.fid);

	atomic_fetch_sub(&mr->domain->ref, 1);
	free(mr);
	return 0;
}

static struct fi_ops tnbc_mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_mr_close,
	.bind = tnbc_no_bind,
	.control = tnbc_no_control,
	.ops_open = tnbc_no_ops_open,
};

int tnbc_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
		    uint64_t flags, struct fid_mr **mr_out)
{
	struct tnbc_domain *dom;
	struct tnbc_mr *mr;

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
	mr->access = attr->access;
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = attr->context;
	mr->mr_fid.fid.ops = &tnbc_mr_fi_ops;
	mr->mr_fid.mem_desc = mr;
	mr->mr_fid.key = attr->requested_key
				 ? attr->requested_key
				 : atomic_fetch_add(&dom->next_mr_key, 1);
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
