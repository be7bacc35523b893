/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * AV sets (tnbc_av_set.c): fi_av_set through an AV's table, and the
 * members a collective group is joined with.
 */
#ifndef TNBC_AV_SET_H
#define TNBC_AV_SET_H

#include "tnbc.h"

int tnbc_av_set_open(struct tnbc_av *av, struct fi_av_set_attr *attr,
		     struct fid_av_set **set, void *context);
/* The addresses of a set of av, in order (valid while it is open). */
int tnbc_av_set_members(const struct fid_av_set *set, struct tnbc_av *av,
			const fi_addr_t **addrs, size_t *n);

#endif /* TNBC_AV_SET_H */
