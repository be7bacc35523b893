/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Memory regions (tnbc_mr.c): registration, and the key lookup that
 * RMA's target side makes.
 */
#ifndef TNBC_MR_H
#define TNBC_MR_H

#include "tnbc.h"

struct tnbc_mr {
	struct fid_mr mr_fid;
	struct tnbc_domain *domain;
	struct tnbc_mr *hnext; /* domain->mr_hash chain */
	struct iovec iov[TNBC_IOV_LIMIT];
	size_t iov_count;
	size_t len;
	uint64_t access;
	/* remote address of byte 0: the virtual address with
	 * FI_MR_VIRT_ADDR, else the registration's offset */
	uint64_t base;
	struct tnbc_cntr *rma_cntr; /* fi_mr_bind(FI_REMOTE_READ|WRITE) */
	uint64_t cntr_flags;
	/* The region exposed to peers' single-copy reads through the
	 * domain's transport i (expose), on a direct read's first request:
	 * until the region closes (domain->mr_xlock). */
	struct tnbc_mr_xexp {
		struct tnbc_xpeer *peer; /* NULL: not exposed */
		void *reg;
		uint64_t keys[TNBC_IOV_LIMIT];
	} xexp[TNBC_XPORTS_MAX];
};

int tnbc_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
		uint64_t offset, uint64_t requested_key, uint64_t flags,
		struct fid_mr **mr, void *context);
int tnbc_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		 uint64_t access, uint64_t offset, uint64_t requested_key,
		 uint64_t flags, struct fid_mr **mr, void *context);
int tnbc_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
		    uint64_t flags, struct fid_mr **mr);

struct tnbc_mr *tnbc_mr_find(struct tnbc_domain *dom, uint64_t key);
void tnbc_mr_hash_remove(struct tnbc_mr *mr);

#endif /* TNBC_MR_H */
