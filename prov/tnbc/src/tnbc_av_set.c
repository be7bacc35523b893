/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * AV sets (fi_av_set(3)): ordered lists of an AV's addresses, the
 * membership a collective group is joined with.  A member's place in
 * the set is its rank in the group.  Set operations keep the order of
 * the destination and append what they add in the source's order.
 */
#include <stdlib.h>
#include <string.h>

#include "tnbc.h"
#include "tnbc_av_set.h"
#include "tnbc_unsupp.h"

struct tnbc_av_set {
	struct fid_av_set set_fid;
	struct tnbc_av *av;
	fi_addr_t *addrs;
	size_t n, cap;
};

static struct fi_ops_av_set tnbc_av_set_ops;

static struct tnbc_av_set *tnbc_av_set_of(const struct fid_av_set *fid)
{
	if (!fid || fid->fid.fclass != FI_CLASS_AV_SET ||
	    fid->ops != &tnbc_av_set_ops)
		return NULL;
	return tnbc_container_of(fid, struct tnbc_av_set, set_fid);
}

static bool tnbc_av_set_has(const struct tnbc_av_set *s, fi_addr_t a)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->addrs[i] == a)
			return true;
	return false;
}

static int tnbc_av_set_add(struct tnbc_av_set *s, fi_addr_t a)
{
	if (s->n == s->cap) {
		size_t ncap = s->cap ? 2 * s->cap : 16;
		fi_addr_t *na = realloc(s->addrs, ncap * sizeof(*na));

		if (!na)
			return -FI_ENOMEM;
		s->addrs = na;
		s->cap = ncap;
	}
	s->addrs[s->n++] = a;
	return 0;
}

/* Keeps the members of dst for which keep(member in src) holds. */
static int tnbc_av_set_filter(struct fid_av_set *dst_fid,
			      const struct fid_av_set *src_fid, bool keep)
{
	struct tnbc_av_set *d = tnbc_av_set_of(dst_fid);
	const struct tnbc_av_set *s = tnbc_av_set_of(src_fid);
	size_t k = 0;

	if (!d || !s || d->av != s->av)
		return -FI_EINVAL;
	for (size_t i = 0; i < d->n; i++)
		if (tnbc_av_set_has(s, d->addrs[i]) == keep)
			d->addrs[k++] = d->addrs[i];
	d->n = k;
	return 0;
}

static int tnbc_av_set_union(struct fid_av_set *dst_fid,
			     const struct fid_av_set *src_fid)
{
	struct tnbc_av_set *d = tnbc_av_set_of(dst_fid);
	const struct tnbc_av_set *s = tnbc_av_set_of(src_fid);

	if (!d || !s || d->av != s->av)
		return -FI_EINVAL;
	for (size_t i = 0; i < s->n; i++) {
		int ret;

		if (tnbc_av_set_has(d, s->addrs[i]))
			continue;
		ret = tnbc_av_set_add(d, s->addrs[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static int tnbc_av_set_intersect(struct fid_av_set *dst,
				 const struct fid_av_set *src)
{
	return tnbc_av_set_filter(dst, src, true);
}

static int tnbc_av_set_diff(struct fid_av_set *dst,
			    const struct fid_av_set *src)
{
	return tnbc_av_set_filter(dst, src, false);
}

static int tnbc_av_set_insert(struct fid_av_set *fid, fi_addr_t addr)
{
	struct tnbc_av_set *s = tnbc_av_set_of(fid);

	if (!s || !tnbc_av_get(s->av, addr) || tnbc_av_set_has(s, addr))
		return -FI_EINVAL;
	return tnbc_av_set_add(s, addr);
}

static int tnbc_av_set_remove(struct fid_av_set *fid, fi_addr_t addr)
{
	struct tnbc_av_set *s = tnbc_av_set_of(fid);

	if (!s)
		return -FI_EINVAL;
	for (size_t i = 0; i < s->n; i++) {
		if (s->addrs[i] != addr)
			continue;
		memmove(&s->addrs[i], &s->addrs[i + 1],
			(s->n - i - 1) * sizeof(*s->addrs));
		s->n--;
		return 0;
	}
	return -FI_EINVAL;
}

/* The set's own address: what fi_join_collective may be given. */
static int tnbc_av_set_addr(struct fid_av_set *fid, fi_addr_t *coll_addr)
{
	struct tnbc_av_set *s = tnbc_av_set_of(fid);

	if (!s || !coll_addr)
		return -FI_EINVAL;
	*coll_addr = (fi_addr_t)(uintptr_t)s;
	return 0;
}

static int tnbc_av_set_close(struct fid *fid)
{
	struct tnbc_av_set *s =
		tnbc_container_of(fid, struct tnbc_av_set, set_fid.fid);

	atomic_fetch_sub(&s->av->ref, 1);
	free(s->addrs);
	free(s);
	return 0;
}

static struct fi_ops tnbc_av_set_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_av_set_close,
	.bind = tnbc_no_bind,
	.control = tnbc_no_control,
	.ops_open = tnbc_no_ops_open,
};

static struct fi_ops_av_set tnbc_av_set_ops = {
	.size = sizeof(struct fi_ops_av_set),
	.set_union = tnbc_av_set_union,
	.intersect = tnbc_av_set_intersect,
	.diff = tnbc_av_set_diff,
	.insert = tnbc_av_set_insert,
	.remove = tnbc_av_set_remove,
	.addr = tnbc_av_set_addr,
};

int tnbc_av_set_members(const struct fid_av_set *fid, struct tnbc_av *av,
			const fi_addr_t **addrs, size_t *n)
{
	const struct tnbc_av_set *s = tnbc_av_set_of(fid);

	if (!s || s->av != av)
		return -FI_EINVAL;
	*addrs = s->addrs;
	*n = s->n;
	return 0;
}

int tnbc_av_set_open(struct tnbc_av *av, struct fi_av_set_attr *attr,
		     struct fid_av_set **set_out, void *context)
{
	size_t count = atomic_load(&av->count);
	struct tnbc_av_set *s;
	int ret = 0;

	if (!attr || !set_out || attr->comm_key_size ||
	    (attr->flags & ~(uint64_t)FI_UNIVERSE))
		return -FI_EINVAL;
	if (!(attr->flags & FI_UNIVERSE) &&
	    attr->start_addr != FI_ADDR_NOTAVAIL &&
	    (attr->end_addr < attr->start_addr || attr->end_addr >= count ||
	     (!attr->stride && attr->end_addr != attr->start_addr)))
		return -FI_EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -FI_ENOMEM;
	s->av = av;
	if (attr->flags & FI_UNIVERSE) {
		for (fi_addr_t a = 0; !ret && a < count; a++)
			if (tnbc_av_get(av, a))
				ret = tnbc_av_set_add(s, a);
	} else if (attr->start_addr != FI_ADDR_NOTAVAIL) {
		uint64_t stride = attr->stride ? attr->stride : 1;

		for (fi_addr_t a = attr->start_addr;
		     !ret && a <= attr->end_addr; a += stride)
			ret = tnbc_av_get(av, a) ? tnbc_av_set_add(s, a)
						 : -FI_EINVAL;
	}
	if (ret) {
		free(s->addrs);
		free(s);
		return ret;
	}
	s->set_fid.fid.fclass = FI_CLASS_AV_SET;
	s->set_fid.fid.context = context;
	s->set_fid.fid.ops = &tnbc_av_set_fi_ops;
	s->set_fid.ops = &tnbc_av_set_ops;
	atomic_fetch_add(&av->ref, 1);
	*set_out = &s->set_fid;
	return 0;
}
