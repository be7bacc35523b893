/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The TCP transport's addresses: the ops table's calls on the xaddr
 * slot of a name (parse, print, scan, to a socket address), and the
 * helpers its other files compare and convert addresses with.  Apart
 * because they touch no object: only struct tnbc_tcp_addr.
 */
#include "tnbc_tcp.h"

socklen_t tnbc_tcp_sockaddr(const struct tnbc_tcp_addr *a,
			    struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == 6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = a->port;
		memcpy(&s6->sin6_addr, a->ip, 16);
		return sizeof(*s6);
	}
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

	s4->sin_family = AF_INET;
	s4->sin_port = a->port;
	memcpy(&s4->sin_addr, a->ip, 4);
	return sizeof(*s4);
}

int tnbc_tcp_from_sockaddr(const struct sockaddr *sa, struct tnbc_tcp_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)sa;

		a->family = 4;
		a->port = s4->sin_port;
		memcpy(a->ip, &s4->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;

		a->family = 6;
		a->port = s6->sin6_port;
		memcpy(a->ip, &s6->sin6_addr, 16);
		return 0;
	}
	return -FI_EINVAL;
}

bool tnbc_tcp_any(const struct tnbc_tcp_addr *a)
{
	static const uint8_t zero[16];

	return !memcmp(a->ip, zero, a->family == 6 ? 16 : 4);
}

/* The address this host's endpoints give peers when they listen on any:
 * FI_TNBC_TCP_IFACE (an address, or an interface's name), else the
 * first IPv4 address of an interface that is up and not a loopback,
 * else the loopback. */
void tnbc_tcp_host_addr(struct tnbc_tcp_addr *a)
{
	const char *want = tnbc_env.tcp_iface;
	struct ifaddrs *ifs = NULL, *it;
	struct in_addr lo = {.s_addr = htonl(INADDR_LOOPBACK)};

	memset(a, 0, sizeof(*a));
	if (want && *want) {
		if (inet_pton(AF_INET, want, a->ip) == 1) {
			a->family = 4;
			return;
		}
		if (inet_pton(AF_INET6, want, a->ip) == 1) {
			a->family = 6;
			return;
		}
	}
	if (!getifaddrs(&ifs)) {
		for (it = ifs; it; it = it->ifa_next) {
			if (!it->ifa_addr || !(it->ifa_flags & IFF_UP) ||
			    it->ifa_addr->sa_family != AF_INET)
				continue;
			if (want && *want ? strcmp(it->ifa_name, want) != 0
					  : (it->ifa_flags & IFF_LOOPBACK) != 0)
				continue;
			tnbc_tcp_from_sockaddr(it->ifa_addr, a);
			a->port = 0;
			break;
		}
		freeifaddrs(ifs);
	}
	if (!a->family) {
		if (want && *want)
			FI_WARN(&tnbc_prov, FI_LOG_CORE,
				"FI_TNBC_TCP_IFACE=%s: no such address or "
				"interface up; using the loopback\n",
				want);
		a->family = 4;
		memcpy(a->ip, &lo, 4);
	}
}

int tnbc_tcp_addr_parse(const char *node, const char *service, bool source,
			uint8_t *xaddr)
{
	struct tnbc_tcp_addr *a = (struct tnbc_tcp_addr *)(void *)xaddr;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	long port = 0;
	char *end;
	int ret;

	memset(a, 0, sizeof(*a));
	if (service) {
		port = strtol(service, &end, 10);
		if (end == service || *end || port < 0 || port > 65535)
			return -FI_ENODATA;
	}
	if (!node) {
		/* a source listens on any address; a destination with no
		 * node is a service of this host */
		struct in_addr lo = {.s_addr = htonl(INADDR_LOOPBACK)};

		a->family = 4;
		if (!source)
			memcpy(a->ip, &lo, 4);
		a->port = htons((uint16_t)port);
		return !source && !port ? -FI_ENODATA : 0;
	}
	if (source)
		hints.ai_flags |= AI_PASSIVE;
	ret = getaddrinfo(node, NULL, &hints, &res);
	if (ret || !res)
		return -FI_ENODATA;
	ret = tnbc_tcp_from_sockaddr(res->ai_addr, a);
	freeaddrinfo(res);
	if (ret)
		return -FI_ENODATA;
	a->port = htons((uint16_t)port);
	/* a destination needs a port to reach */
	return !source && !port ? -FI_ENODATA : 0;
}

int tnbc_tcp_addr_str(const uint8_t *xaddr, char *buf, size_t len)
{
	const struct tnbc_tcp_addr *a = (const void *)xaddr;
	char ip[INET6_ADDRSTRLEN] = "?";

	if (a->family == 4 || a->family == 6)
		inet_ntop(a->family == 6 ? AF_INET6 : AF_INET, a->ip, ip,
			  sizeof(ip));
	return snprintf(buf, len, a->family == 6 ? "[%s]:%u" : "%s:%u", ip,
			(unsigned)ntohs(a->port));
}

int tnbc_tcp_addr_scan(const char *text, uint8_t *xaddr)
{
	struct tnbc_tcp_addr *a = (struct tnbc_tcp_addr *)(void *)xaddr;
	int family, ret;

	memset(a, 0, sizeof(*a));
	ret = tnbc_ip_scan(text, true, &family, a->ip, &a->port);
	a->family = family == AF_INET6 ? 6 : 4;
	return ret;
}

int tnbc_tcp_addr_sock(const uint8_t *xaddr, int family,
		       struct sockaddr_storage *ss)
{
	const struct tnbc_tcp_addr *a = (const void *)xaddr;

	if (a->family != (family == AF_INET6 ? 6 : 4))
		return -FI_ENODATA;
	return (int)tnbc_tcp_sockaddr(a, ss);
}

/* Whether a is a loopback address. */
bool tnbc_tcp_loopback(const struct tnbc_tcp_addr *a)
{
	static const uint8_t lo6[16] = {[15] = 1};

	return a->family == 6 ? !memcmp(a->ip, lo6, 16) : a->ip[0] == 127;
}

/* Whether two addresses are of one host. */
bool tnbc_tcp_same_host(const struct tnbc_tcp_addr *a,
			const struct tnbc_tcp_addr *b)
{
	return a->family == b->family &&
	       !memcmp(a->ip, b->ip, a->family == 6 ? 16 : 4);
}
