/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Address vectors (tnbc_av.c): the names behind fi_addr_t, and the
 * peer each reaches.  The send path's lookup, tnbc_av_get, is tnbc.h's.
 */
#ifndef TNBC_AV_H
#define TNBC_AV_H

#include "tnbc.h"

int tnbc_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		 struct fid_av **av, void *context);
fi_addr_t tnbc_av_reverse(struct tnbc_av *av, const struct tnbc_name *name);
/* The same, answered from memo while the AV has not changed (messages
 * mostly come from the sender of the last one); memo is the caller's. */
fi_addr_t tnbc_av_reverse_memo(struct tnbc_av *av, const struct tnbc_name *name,
			       struct tnbc_av_memo *memo);
int tnbc_av_peer(struct tnbc_av *av, fi_addr_t addr, struct tnbc_xpeer **peer);

#endif /* TNBC_AV_H */
