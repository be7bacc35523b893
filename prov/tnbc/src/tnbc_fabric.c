/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Fabric object.
 */
#include <stdlib.h>

#include "tnbc.h"
#include "tnbc_comp.h"
#include "tnbc_unsupp.h"
#include "tnbc_eq.h"

static int tnbc_fabric_close(struct fid *fid)
{
	struct tnbc_fabric *fab =
		tnbc_container_of(fid, struct tnbc_fabric, fabric_fid.fid);

	if (atomic_load(&fab->ref))
		return -FI_EBUSY;
	free(fab);
	return 0;
}

static struct fi_ops tnbc_fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_fabric_close,
	.bind = tnbc_no_bind,
	.control = tnbc_no_control,
	.ops_open = tnbc_no_ops_open,
};

static int tnbc_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	(void)fabric;
	if (count < 0 || (count && !fids))
		return -FI_EINVAL;
	/* The engine writes completions and signals wait objects at any
	 * time, so blocking is safe unless something is already queued. */
	for (int i = 0; i < count; i++) {
		if (fids[i]->fclass == FI_CLASS_CQ &&
		    tnbc_cq_has_entries(tnbc_container_of(
			    fids[i], struct tnbc_cq, cq_fid.fid)))
			return -FI_EAGAIN;
	}
	return 0;
}

static int tnbc_no_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
			      struct fid_pep **pep, void *context)
{
	(void)fabric;
	(void)info;
	(void)pep;
	(void)context;
	return -FI_ENOSYS; /* RDM only: nothing listens */
}

static int tnbc_no_wait_open(struct fid_fabric *fabric,
			     struct fi_wait_attr *attr,
			     struct fid_wait **waitset)
{
	(void)fabric;
	(void)attr;
	(void)waitset;
	return -FI_ENOSYS; /* wait sets are not offered */
}

static struct fi_ops_fabric tnbc_fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = tnbc_domain_open,
	.passive_ep = tnbc_no_passive_ep,
	.eq_open = tnbc_eq_open,
	.wait_open = tnbc_no_wait_open,
	.trywait = tnbc_trywait,
};

int tnbc_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		     void *context)
{
	struct tnbc_fabric *fab;

	if (!attr || !fabric)
		return -FI_EINVAL;
	if (attr->name && strcmp(attr->name, TNBC_FABRIC_NAME))
		return -FI_ENODATA;
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return -FI_ENOMEM;
	fab->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fab->fabric_fid.fid.context = context;
	fab->fabric_fid.fid.ops = &tnbc_fabric_fi_ops;
	fab->fabric_fid.ops = &tnbc_fabric_ops;
	fab->fabric_fid.api_version = TNBC_FI_VERSION;
	*fabric = &fab->fabric_fid;
	return 0;
}
