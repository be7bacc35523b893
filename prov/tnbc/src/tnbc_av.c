/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Address vector.  FI_AV_MAP and FI_AV_TABLE share one representation:
 * fi_addr_t is the index of the entry.  Entries live in fixed chunks that
 * never move, so the send path reads them without the AV lock.  A hash of
 * names gives the reverse lookup that FI_SOURCE and directed receives
 * need for incoming packets.
 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tnbc.h"
#include "tnbc_unsupp.h"
#include "tnbc_addr.h"
#include "tnbc_av.h"
#include "tnbc_av_set.h"

static size_t tnbc_name_hash(const struct tnbc_name *n)
{
	/* a service's process may be unknown (tnbc_av_name_eq) */
	uint64_t pid = n->kind == TNBC_NAME_SVC ? 0 : n->pid;
	uint64_t h = ((uint64_t)n->kind << 56) ^ (pid << 24) ^ n->uid;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (size_t)h;
}

/* The same endpoint, whichever transports each name says reach it (a
 * packet's source names only the one it came through).  A service
 * inserted by its number (fi_av_insertsvc) knows no process or host
 * (0): it is whichever process serves that number. */
static bool tnbc_av_name_eq(const struct tnbc_name *a,
			    const struct tnbc_name *b)
{
	if (a->kind != b->kind || a->uid != b->uid || a->nonce != b->nonce)
		return false;
	if (a->kind != TNBC_NAME_SVC)
		return a->pid == b->pid;
	return (a->pid == b->pid || !a->pid || !b->pid) &&
	       (a->host == b->host || !a->host || !b->host);
}

/* The peer handle of name: the first of the domain's transports that
 * reaches it. */
static int tnbc_domain_peer(struct tnbc_domain *dom,
			    const struct tnbc_name *name, const uint8_t *xaddr,
			    struct tnbc_xpeer **peer)
{
	int ret = -FI_EHOSTUNREACH;

	/* the first of the domain's transports that reaches it; a refusal
	 * to trust it is final (another user's file in /dev/shm posing as
	 * the peer must not send us to whatever listens on its port) */
	for (unsigned i = 0; i < dom->nxp; i++) {
		const struct tnbc_xport_ops *ops = dom->xp[i].ops;
		int r;

		if (!(name->xports & TNBC_XPORT_BIT(ops->id)))
			continue;
		r = ops->peer_get(dom->xp[i].xdom, name,
				  xaddr && ops->xaddr_off >= 0
					  ? xaddr + ops->xaddr_off
					  : NULL,
				  peer);
		if (!r || r == -FI_EACCES)
			return r;
		ret = r;
	}
	return ret;
}

int tnbc_av_peer(struct tnbc_av *av, fi_addr_t addr, struct tnbc_xpeer **peer)
{
	struct tnbc_av_entry *e = tnbc_av_get(av, addr);
	struct tnbc_xpeer *p;
	int ret;

	if (!e)
		return -FI_EINVAL;
	p = __atomic_load_n(&e->peer, __ATOMIC_ACQUIRE);
	if (!p) {
		ret = tnbc_domain_peer(av->domain, &e->name, e->xaddr, &p);
		if (ret)
			return ret;
		__atomic_store_n(&e->peer, p, __ATOMIC_RELEASE);
	}
	*peer = p;
	return 0;
}

static void tnbc_domain_addr_known(struct tnbc_domain *dom,
				   const struct tnbc_name *name,
				   const uint8_t *xaddr)
{
	for (unsigned i = 0; i < dom->nxp; i++) {
		const struct tnbc_xport_ops *ops = dom->xp[i].ops;

		if (ops->addr_known && ops->xaddr_off >= 0 &&
		    (name->xports & TNBC_XPORT_BIT(ops->id)))
			ops->addr_known(dom->xp[i].xdom, name,
					xaddr + ops->xaddr_off);
	}
}

/* Called with av->lock held. */
static int tnbc_av_hash_put(struct tnbc_av *av, const struct tnbc_name *name,
			    size_t idx)
{
	size_t mask, h;

	if ((atomic_load(&av->count) + 1) * 2 > av->hash_size) {
		size_t nsize = av->hash_size ? av->hash_size * 2 : 256;
		size_t *nh = calloc(nsize, sizeof(*nh));

		if (!nh)
			return -FI_ENOMEM;
		for (size_t i = 0; i < av->hash_size; i++) {
			size_t v = av->hash[i], j;
			struct tnbc_av_entry *e;

			if (!v)
				continue;
			e = &av->chunks[(v - 1) / TNBC_AV_CHUNK]
				       [(v - 1) % TNBC_AV_CHUNK];
			j = tnbc_name_hash(&e->name) & (nsize - 1);
			while (nh[j])
				j = (j + 1) & (nsize - 1);
			nh[j] = v;
		}
		free(av->hash);
		av->hash = nh;
		av->hash_size = nsize;
	}
	mask = av->hash_size - 1;
	h = tnbc_name_hash(name) & mask;
	while (av->hash[h]) {
		size_t v = av->hash[h] - 1;
		struct tnbc_av_entry *e =
			&av->chunks[v / TNBC_AV_CHUNK][v % TNBC_AV_CHUNK];

		if (tnbc_av_name_eq(&e->name, name))
			break;
		h = (h + 1) & mask;
	}
	av->hash[h] = idx + 1;
	return 0;
}

fi_addr_t tnbc_av_reverse(struct tnbc_av *av, const struct tnbc_name *name)
{
	fi_addr_t ret = FI_ADDR_NOTAVAIL;
	size_t mask, h;

	if (!av)
		return ret;
	pthread_mutex_lock(&av->lock);
	if (!av->hash_size)
		goto out;
	mask = av->hash_size - 1;
	for (h = tnbc_name_hash(name) & mask; av->hash[h]; h = (h + 1) & mask) {
		size_t v = av->hash[h] - 1;
		struct tnbc_av_entry *e =
			&av->chunks[v / TNBC_AV_CHUNK][v % TNBC_AV_CHUNK];

		if (tnbc_av_name_eq(&e->name, name)) {
			if (atomic_load(&e->valid))
				ret = v;
			break;
		}
	}
out:
	pthread_mutex_unlock(&av->lock);
	return ret;
}

fi_addr_t tnbc_av_reverse_memo(struct tnbc_av *av, const struct tnbc_name *name,
			       struct tnbc_av_memo *memo)
{
	uint64_t gen;

	if (!av)
		return FI_ADDR_NOTAVAIL;
	gen = atomic_load_explicit(&av->gen, memory_order_acquire);
	if (memo->gen == gen && tnbc_av_name_eq(&memo->name, name))
		return memo->addr;
	memo->addr = tnbc_av_reverse(av, name);
	memo->name = *name;
	memo->gen = gen;
	return memo->addr;
}

/* A name one of the domain's transports can resolve. */
static bool tnbc_name_valid(struct tnbc_av *av, const struct tnbc_name *n)
{
	return n->version == TNBC_PROTO_VERSION &&
	       (n->xports & av->domain->xmask) &&
	       (n->kind == TNBC_NAME_PID || n->kind == TNBC_NAME_SVC);
}

static int tnbc_av_insert_one(struct tnbc_av *av, const struct tnbc_addr *addr,
			      fi_addr_t *out)
{
	const struct tnbc_name *name = &addr->name;
	size_t idx = atomic_load(&av->count);
	size_t chunk = idx / TNBC_AV_CHUNK;
	struct tnbc_av_entry *e;
	int ret;

	if (!tnbc_name_valid(av, name))
		return -FI_EINVAL;
	if (chunk >= TNBC_AV_MAX_CHUNKS)
		return -FI_ENOSPC;
	if (!av->chunks[chunk]) {
		av->chunks[chunk] = calloc(TNBC_AV_CHUNK, sizeof(*e));
		if (!av->chunks[chunk])
			return -FI_ENOMEM;
	}
	ret = tnbc_av_hash_put(av, name, idx);
	if (ret)
		return ret;
	e = &av->chunks[chunk][idx % TNBC_AV_CHUNK];
	e->name = *name;
	memcpy(e->xaddr, addr->xaddr, sizeof(e->xaddr));
	e->peer = NULL;
	tnbc_domain_addr_known(av->domain, name, e->xaddr);
	atomic_store(&e->valid, true);
	atomic_store_explicit(&av->count, idx + 1, memory_order_release);
	atomic_fetch_add_explicit(&av->gen, 1, memory_order_release);
	*out = idx;
	return 0;
}

/* The i-th address of an fi_av_insert array of format fmt. */
static const void *tnbc_av_nth(uint32_t fmt, const void *addr, size_t i)
{
	switch (fmt) {
	case FI_ADDR_STR:
		return ((const char *const *)addr)[i];
	case FI_SOCKADDR_IN:
		return (const struct sockaddr_in *)addr + i;
	default:
		return (const struct tnbc_addr *)addr + i;
	}
}

/* Inserts addresses of format fmt.  One whose peer must be asked who
 * it is (a socket address) is asked before the AV is locked. */
static int tnbc_av_insert_addrs(struct tnbc_av *av, uint32_t fmt,
				const void *addr, size_t count,
				fi_addr_t *fi_addr, int *errors)
{
	int inserted = 0;

	for (size_t i = 0; i < count; i++) {
		fi_addr_t a = FI_ADDR_NOTAVAIL;
		struct tnbc_addr name;
		int ret;

		ret = tnbc_addr_import(av->domain, fmt,
				       tnbc_av_nth(fmt, addr, i), 0, false,
				       &name);
		if (!ret) {
			pthread_mutex_lock(&av->lock);
			ret = tnbc_av_insert_one(av, &name, &a);
			pthread_mutex_unlock(&av->lock);
		}
		if (ret)
			FI_WARN(&tnbc_prov, FI_LOG_AV,
				"address %zu rejected: %s\n", i,
				fi_strerror(-ret));
		else
			inserted++;
		if (fi_addr)
			fi_addr[i] = a;
		if (errors)
			errors[i] = ret;
	}
	return inserted;
}

static int tnbc_av_insert(struct fid_av *fid, const void *addr, size_t count,
			  fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct tnbc_av *av = tnbc_container_of(fid, struct tnbc_av, av_fid);
	int *errors = (flags & FI_SYNC_ERR) ? context : NULL;

	if (flags & ~(uint64_t)(FI_MORE | FI_SYNC_ERR))
		return -FI_EINVAL;
	if (count && !addr)
		return -FI_EINVAL;
	return tnbc_av_insert_addrs(av, av->domain->addr_format, addr, count,
				    fi_addr, errors);
}

static int tnbc_av_insertsvc(struct fid_av *fid, const char *node,
			     const char *service, fi_addr_t *fi_addr,
			     uint64_t flags, void *context)
{
	struct tnbc_av *av = tnbc_container_of(fid, struct tnbc_av, av_fid);
	struct tnbc_addr addr;
	int ret;

	if (!fid)
		return -FI_EINVAL;
	/* fi_av(3): an FI_ADDR_STR address may come as the node */
	if (tnbc_addr_is_str(node) && !service) {
		ret = tnbc_addr_import(av->domain, FI_ADDR_STR, node, 0, false,
				       &addr);
	} else {
		if (!service)
			return -FI_EINVAL;
		ret = tnbc_addr_svc(node, service, false, &addr);
	}
	if (ret)
		return ret;
	if (flags & ~(uint64_t)(FI_MORE | FI_SYNC_ERR))
		return -FI_EINVAL;
	return tnbc_av_insert_addrs(av, FI_FORMAT_UNSPEC, &addr, 1, fi_addr,
				    (flags & FI_SYNC_ERR) ? context : NULL);
}

static int tnbc_av_insertsym(struct fid_av *fid, const char *node,
			     size_t nodecnt, const char *service, size_t svccnt,
			     fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	char buf[32];
	long base;
	int total = 0;

	if (!service || !nodecnt || !svccnt)
		return -FI_EINVAL;
	base = strtol(service, NULL, 10);
	for (size_t n = 0; n < nodecnt; n++) {
		for (size_t s = 0; s < svccnt; s++) {
			int ret;

			snprintf(buf, sizeof(buf), "%ld", base + (long)s);
			ret = tnbc_av_insertsvc(fid, node, buf,
						fi_addr ? &fi_addr[total]
							: NULL,
						flags, context);
			if (ret < 0)
				return ret;
			total += ret;
		}
	}
	return total;
}

/* After a removal, point the name's hash slot at another live entry for
 * the same name, if the application inserted it more than once. */
static void tnbc_av_rehash_name(struct tnbc_av *av, const struct tnbc_name *n)
{
	size_t count = atomic_load(&av->count);

	for (size_t i = count; i-- > 0;) {
		struct tnbc_av_entry *e =
			&av->chunks[i / TNBC_AV_CHUNK][i % TNBC_AV_CHUNK];

		if (atomic_load(&e->valid) && tnbc_av_name_eq(&e->name, n)) {
			tnbc_av_hash_put(av, n, i);
			return;
		}
	}
}

static int tnbc_av_remove(struct fid_av *fid, fi_addr_t *fi_addr, size_t count,
			  uint64_t flags)
{
	struct tnbc_av *av = tnbc_container_of(fid, struct tnbc_av, av_fid);
	int ret = 0;

	if (flags || (count && !fi_addr))
		return -FI_EINVAL;
	pthread_mutex_lock(&av->lock);
	for (size_t i = 0; i < count; i++) {
		struct tnbc_av_entry *e = tnbc_av_get(av, fi_addr[i]);

		if (!e) {
			ret = -FI_EINVAL;
			continue;
		}
		atomic_store(&e->valid, false);
		tnbc_av_rehash_name(av, &e->name);
		atomic_fetch_add_explicit(&av->gen, 1, memory_order_release);
	}
	pthread_mutex_unlock(&av->lock);
	return ret;
}

static int tnbc_av_lookup(struct fid_av *fid, fi_addr_t fi_addr, void *addr,
			  size_t *addrlen)
{
	struct tnbc_av *av = tnbc_container_of(fid, struct tnbc_av, av_fid);
	struct tnbc_av_entry *e;
	struct tnbc_addr a;
	int ret;

	if (!addrlen || (!addr && *addrlen))
		return -FI_EINVAL;
	e = tnbc_av_get(av, fi_addr);
	if (!e)
		return -FI_EINVAL;
	a.name = e->name;
	memcpy(a.xaddr, e->xaddr, sizeof(a.xaddr));
	/* fi_av(3): a short buffer gets what fits, and the length */
	ret = tnbc_addr_export(av->domain->addr_format, &a, addr, addrlen);
	return ret == -FI_ETOOSMALL ? 0 : ret;
}

static const char *tnbc_av_straddr(struct fid_av *fid, const void *addr,
				   char *buf, size_t *len)
{
	struct tnbc_av *av = tnbc_container_of(fid, struct tnbc_av, av_fid);

	if (!addr || !len || (!buf && *len))
		return NULL;
	tnbc_addr_straddr(av->domain->addr_format, addr, buf, len);
	return buf;
}

static int tnbc_av_set(struct fid_av *fid, struct fi_av_set_attr *attr,
		       struct fid_av_set **av_set, void *context)
{
	return tnbc_av_set_open(tnbc_container_of(fid, struct tnbc_av, av_fid),
				attr, av_set, context);
}

static int tnbc_av_close(struct fid *fid)
{
	struct tnbc_av *av = tnbc_container_of(fid, struct tnbc_av, av_fid.fid);

	if (atomic_load(&av->ref))
		return -FI_EBUSY;
	for (size_t i = 0; i < TNBC_AV_MAX_CHUNKS && av->chunks[i]; i++)
		free(av->chunks[i]);
	free(av->hash);
	atomic_fetch_sub(&av->domain->ref, 1);
	pthread_mutex_destroy(&av->lock);
	free(av);
	return 0;
}

static struct fi_ops tnbc_av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_av_close,
	.bind = tnbc_no_bind,
	.control = tnbc_no_control,
	.ops_open = tnbc_no_ops_open,
};

static struct fi_ops_av tnbc_av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = tnbc_av_insert,
	.insertsvc = tnbc_av_insertsvc,
	.insertsym = tnbc_av_insertsym,
	.remove = tnbc_av_remove,
	.lookup = tnbc_av_lookup,
	.straddr = tnbc_av_straddr,
	.av_set = tnbc_av_set,
};

int tnbc_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		 struct fid_av **av_out, void *context)
{
	struct tnbc_domain *dom;
	struct tnbc_av *av;

	if (!domain || !attr || !av_out)
		return -FI_EINVAL;
	if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP &&
	    attr->type != FI_AV_TABLE)
		return -FI_EINVAL;
	if (attr->flags & ~(uint64_t)(FI_SYMMETRIC))
		return -FI_EINVAL; /* FI_EVENT (async insert) is not offered */
	if (attr->name || attr->rx_ctx_bits)
		return -FI_ENOSYS;
	dom = tnbc_container_of(domain, struct tnbc_domain, domain_fid);
	av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->domain = dom;
	av->type = attr->type == FI_AV_UNSPEC ? FI_AV_TABLE : attr->type;
	av->addrlen = sizeof(struct tnbc_addr);
	atomic_init(&av->gen, 1); /* a memo of generation 0 is empty */
	pthread_mutex_init(&av->lock, NULL);
	av->av_fid.fid.fclass = FI_CLASS_AV;
	av->av_fid.fid.context = context;
	av->av_fid.fid.ops = &tnbc_av_fi_ops;
	av->av_fid.ops = &tnbc_av_ops;
	atomic_fetch_add(&dom->ref, 1);
	*av_out = &av->av_fid;
	return 0;
}
