/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The verbs transport's addresses, and a peer's connection begun or
 * given up: what the transport's table (tnbc_verbs_xport.c) and its
 * RDMA reads (tnbc_verbs_rdma.c) both need, below both.
 */
#include "tnbc_verbs.h"

/* ------------------------------------------------------------------ */
/* Addresses                                                            */

void tnbc_verbs_sockaddr(const struct tnbc_verbs_addr *a,
			 struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = a->port;
	memcpy(&sin->sin_addr, a->ip, 4);
}

void tnbc_verbs_from_sockaddr(const struct sockaddr *sa,
			      struct tnbc_verbs_addr *a)
{
	const struct sockaddr_in *sin = (const void *)sa;

	memset(a, 0, sizeof(*a));
	if (sa->sa_family != AF_INET)
		return;
	a->family = 4;
	a->port = sin->sin_port;
	memcpy(a->ip, &sin->sin_addr, 4);
}

bool tnbc_verbs_any(const struct tnbc_verbs_addr *a)
{
	return !a->ip[0] && !a->ip[1] && !a->ip[2] && !a->ip[3];
}

int tnbc_verbs_addr_parse(const char *node, const char *service, bool source,
			  uint8_t *xaddr)
{
	struct tnbc_verbs_addr *a = (struct tnbc_verbs_addr *)(void *)xaddr;
	struct addrinfo hints = {.ai_family = AF_INET,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	long port = 0;
	char *end;

	memset(a, 0, sizeof(*a));
	if (service) {
		port = strtol(service, &end, 10);
		if (end == service || *end || port < 0 || port > 65535)
			return -FI_ENODATA;
	}
	a->family = 4;
	a->port = htons((uint16_t)port);
	/* no node: any address for a source; for a destination, a service
	 * of this host, at the domain's own address (peer_get) */
	if (!node)
		return !source && !port ? -FI_ENODATA : 0;
	if (source)
		hints.ai_flags |= AI_PASSIVE;
	if (getaddrinfo(node, NULL, &hints, &res) || !res)
		return -FI_ENODATA; /* IPv4 only */
	memcpy(a->ip, &((struct sockaddr_in *)res->ai_addr)->sin_addr, 4);
	freeaddrinfo(res);
	return !source && !port ? -FI_ENODATA : 0;
}

int tnbc_verbs_addr_str(const uint8_t *xaddr, char *buf, size_t len)
{
	const struct tnbc_verbs_addr *a = (const void *)xaddr;
	char ip[INET_ADDRSTRLEN] = "?";

	if (a->family == 4)
		inet_ntop(AF_INET, a->ip, ip, sizeof(ip));
	return snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(a->port));
}

int tnbc_verbs_addr_scan(const char *text, uint8_t *xaddr)
{
	struct tnbc_verbs_addr *a = (struct tnbc_verbs_addr *)(void *)xaddr;
	int family;

	memset(a, 0, sizeof(*a));
	a->family = 4;
	return tnbc_ip_scan(text, false, &family, a->ip, &a->port);
}

/* Whether an rdma_cm id bound to a leaves it on an RDMA device. */
/* ------------------------------------------------------------------ */
/* Peers                                                                */

void tnbc_verbs_peer_dead(struct tnbc_xpeer *p, const char *why)
{
	if (atomic_exchange(&p->dead, true))
		return;
	/* a dead peer holds nothing back; no notice will say so */
	if (atomic_exchange(&p->held, false))
		atomic_fetch_sub(&p->xdom->held_peers, 1);
	FI_INFO(&tnbc_prov, FI_LOG_EP_DATA,
		"verbs: peer %u/%u unreachable: %s\n", p->name.pid, p->name.uid,
		why);
}

/* Starts connecting to the peer; peer->lock held. */
int tnbc_verbs_connect(struct tnbc_xpeer *p)
{
	struct tnbc_xdom *xdom = p->xdom;
	struct sockaddr_in src, dst;
	int ret;

	ret = rdma_create_id(xdom->cmch, &p->id, &p->obj, RDMA_PS_TCP);
	if (ret)
		return -errno;
	tnbc_verbs_sockaddr(&xdom->addr, &src);
	src.sin_port = 0;
	tnbc_verbs_sockaddr(&p->addr, &dst);
	if (rdma_resolve_addr(p->id, (struct sockaddr *)&src,
			      (struct sockaddr *)&dst, TNBC_VERBS_RESOLVE_MS)) {
		ret = -errno;
		rdma_destroy_id(p->id);
		p->id = NULL;
		return ret;
	}
	p->state = TNBC_VERBS_CONNECTING;
	return 0;
}
