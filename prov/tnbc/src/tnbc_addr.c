/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Endpoint addresses in the formats applications use.
 *
 * The native one (FI_FORMAT_UNSPEC) is struct tnbc_addr: who the
 * endpoint is, and where each network transport reaches it.
 * FI_ADDR_STR is the same as text, every field kept, so that it goes
 * back into the same address:
 *
 *   fi_addr_tnbc://<host>/<pid>/<uid>/<nonce>?v=8[&svc]&shm&tcp=ip:port
 *
 * (host and nonce in hex; one key per transport reaching it, with its
 * address where it has one).  FI_SOCKADDR_IN (and the text forms
 * fi_sockaddr_in://ip:port, fi_sockaddr://...) says only where an
 * endpoint listens for the transport whose addresses applications know
 * (TCP): which endpoint listens there is asked over the network when
 * such an address goes into an AV.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tnbc.h"
#include "tnbc_xports.h"
#include "tnbc_addr.h"

#define TNBC_ADDR_SCHEME "fi_addr_tnbc://"

int tnbc_addr_svc(const char *node, const char *service, bool source,
		  struct tnbc_addr *out)
{
	char *end;
	long svc = 0;

	memset(out, 0, sizeof(*out));
	out->name.version = TNBC_PROTO_VERSION;
	if (service) {
		errno = 0;
		svc = strtol(service, &end, 10);
		if (errno || end == service || *end || svc < 0 ||
		    svc > UINT32_MAX)
			return -FI_EINVAL;
		out->name.kind = TNBC_NAME_SVC;
		out->name.uid = (uint32_t)svc;
	} else {
		out->name.kind = TNBC_NAME_PID;
		out->name.pid = (uint32_t)getpid();
		out->name.uid = TNBC_UID_ANY;
	}
	/* the transports that can use the address: shm reaches a service
	 * on this host whatever node says, a network transport only where
	 * node resolves to an address it can use */
	for (unsigned i = 0; i < tnbc_env.nxport; i++) {
		const struct tnbc_xport_ops *ops = tnbc_env.xport_list[i];

		if (ops->xaddr_off < 0)
			out->name.xports |= (uint16_t)TNBC_XPORT_BIT(ops->id);
		else if (!ops->addr_parse(node, service, source,
					  out->xaddr + ops->xaddr_off))
			out->name.xports |= (uint16_t)TNBC_XPORT_BIT(ops->id);
	}
	return out->name.xports ? 0 : -FI_ENODATA;
}

/* The transport applications' socket addresses belong to: the first
 * this provider has that says what it is. */
static const struct tnbc_xport_ops *tnbc_addr_sock_xport(void)
{
	for (unsigned id = 1; id < TNBC_XPORT_ID_MAX; id++) {
		const struct tnbc_xport_ops *ops = tnbc_xport_of(id);

		if (ops && ops->addr_sock && ops->resolve)
			return ops;
	}
	return NULL;
}

bool tnbc_addr_format_ok(uint32_t fmt)
{
	const struct tnbc_xport_ops *ops;

	if (fmt == FI_FORMAT_UNSPEC || fmt == FI_ADDR_STR)
		return true;
	if (fmt != FI_SOCKADDR_IN)
		return false;
	ops = tnbc_addr_sock_xport();
	for (unsigned i = 0; ops && i < tnbc_env.nxport; i++)
		if (tnbc_env.xport_list[i] == ops)
			return true;
	return false;
}

static bool tnbc_addr_slot_set(const struct tnbc_addr *a,
			       const struct tnbc_xport_ops *ops)
{
	for (int i = 0; i < ops->xaddr_len; i++)
		if (a->xaddr[ops->xaddr_off + i])
			return true;
	return false;
}

size_t tnbc_addr_print(const struct tnbc_addr *a, char *buf, size_t len)
{
	const struct tnbc_name *n = &a->name;
	char tmp[512];
	size_t at;

	at = (size_t)snprintf(
		tmp, sizeof(tmp),
		TNBC_ADDR_SCHEME "%" PRIx64 "/%" PRIu32 "/%" PRIu32 "/%" PRIx64
				 "?v=%u%s",
		n->host, n->pid, n->uid, n->nonce, (unsigned)n->version,
		n->kind == TNBC_NAME_SVC ? "&svc" : "");
	for (unsigned id = 1; id < TNBC_XPORT_ID_MAX; id++) {
		const struct tnbc_xport_ops *ops = tnbc_xport_of(id);

		if (!ops || !(n->xports & TNBC_XPORT_BIT(id)))
			continue;
		at += (size_t)snprintf(tmp + at, sizeof(tmp) - at, "&%s",
				       ops->name);
		if (at < sizeof(tmp) - 1 && ops->xaddr_off >= 0 &&
		    tnbc_addr_slot_set(a, ops)) {
			tmp[at++] = '=';
			at += (size_t)ops->addr_str(a->xaddr + ops->xaddr_off,
						    tmp + at, sizeof(tmp) - at);
		}
		if (at >= sizeof(tmp))
			at = sizeof(tmp) - 1;
	}
	if (buf && len)
		snprintf(buf, len, "%s", tmp);
	return at;
}

bool tnbc_addr_is_str(const char *text)
{
	return text && strstr(text, "://");
}

static int tnbc_addr_num(const char **p, int base, char stop, uint64_t max,
			 uint64_t *v)
{
	char *end;

	errno = 0;
	if (**p == '-' || **p == '+')
		return -FI_EINVAL;
	*v = strtoull(*p, &end, base);
	if (errno || end == *p || *v > max || *end != stop)
		return -FI_EINVAL;
	*p = end + 1;
	return 0;
}

/* One key of the query: "v=N", "svc", or a transport (with its address
 * after '='); a transport this provider lacks is passed over. */
static int tnbc_addr_key(const char *key, size_t len, struct tnbc_addr *out)
{
	const char *eq = memchr(key, '=', len);
	size_t klen = eq ? (size_t)(eq - key) : len;
	const struct tnbc_xport_ops *ops;
	char val[256];
	uint64_t v;

	if (eq) {
		size_t vlen = len - klen - 1;

		if (vlen >= sizeof(val))
			return -FI_EINVAL;
		memcpy(val, eq + 1, vlen);
		val[vlen] = '\0';
	}
	if (klen == 1 && key[0] == 'v') {
		const char *p = val;

		if (!eq || tnbc_addr_num(&p, 10, '\0', UINT16_MAX, &v))
			return -FI_EINVAL;
		out->name.version = (uint16_t)v;
		return 0;
	}
	if (klen == 3 && !memcmp(key, "svc", 3) && !eq) {
		out->name.kind = TNBC_NAME_SVC;
		return 0;
	}
	ops = tnbc_xport_named(key, klen);
	if (!ops) {
		FI_INFO(&tnbc_prov, FI_LOG_AV,
			"address names a transport this tnbc lacks: %.*s\n",
			(int)klen, key);
		return 0;
	}
	out->name.xports |= (uint16_t)TNBC_XPORT_BIT(ops->id);
	if (!eq)
		return 0;
	if (ops->xaddr_off < 0 || !ops->addr_scan)
		return -FI_EINVAL;
	return ops->addr_scan(val, out->xaddr + ops->xaddr_off);
}

/* tnbc_addr_print's text back into an address. */
static int tnbc_addr_scan(const char *text, struct tnbc_addr *out)
{
	const char *p = text + strlen(TNBC_ADDR_SCHEME);
	uint64_t host, pid, uid, nonce;
	int ret;

	memset(out, 0, sizeof(*out));
	out->name.kind = TNBC_NAME_PID;
	if (tnbc_addr_num(&p, 16, '/', UINT64_MAX, &host) ||
	    tnbc_addr_num(&p, 10, '/', UINT32_MAX, &pid) ||
	    tnbc_addr_num(&p, 10, '/', UINT32_MAX, &uid) ||
	    tnbc_addr_num(&p, 16, '?', UINT64_MAX, &nonce))
		return -FI_EINVAL;
	out->name.host = host;
	out->name.pid = (uint32_t)pid;
	out->name.uid = (uint32_t)uid;
	out->name.nonce = nonce;
	while (*p) {
		size_t len = strcspn(p, "&");

		ret = tnbc_addr_key(p, len, out);
		if (ret)
			return ret;
		p += len;
		if (*p)
			p++;
	}
	return out->name.version ? 0 : -FI_EINVAL;
}

/* "fi_sockaddr_in://ip:port" and its kin into a socket address. */
static int tnbc_addr_sock_scan(const char *text, struct sockaddr_storage *ss)
{
	static const char *const schemes[] = {
		"fi_sockaddr_in://", "fi_sockaddr_in6://", "fi_sockaddr://"};
	uint8_t ip[16];
	uint16_t port;
	int family;

	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		size_t n = strlen(schemes[i]);

		if (strncmp(text, schemes[i], n))
			continue;
		if (tnbc_ip_scan(text + n, true, &family, ip, &port))
			return -FI_EINVAL;
		memset(ss, 0, sizeof(*ss));
		if (family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

			s6->sin6_family = AF_INET6;
			s6->sin6_port = port;
			memcpy(&s6->sin6_addr, ip, 16);
		} else {
			struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

			s4->sin_family = AF_INET;
			s4->sin_port = port;
			memcpy(&s4->sin_addr, ip, 4);
		}
		return 0;
	}
	return -FI_EINVAL;
}

/* A socket address into an address: see tnbc_addr_import. */
static int tnbc_addr_from_sock(struct tnbc_domain *dom,
			       const struct sockaddr *sa, bool source,
			       struct tnbc_addr *out)
{
	char host[INET6_ADDRSTRLEN], port[8];
	const void *ip;
	uint16_t p;

	if (dom && !source) {
		for (unsigned i = 0; i < dom->nxp; i++)
			if (dom->xp[i].ops->resolve)
				return dom->xp[i].ops->resolve(dom->xp[i].xdom,
							       sa, out);
		FI_WARN(&tnbc_prov, FI_LOG_AV,
			"a socket address, but none of this domain's "
			"transports (FI_TNBC_XPORTS) can look one up\n");
		return -FI_EADDRNOTAVAIL;
	}
	if (sa->sa_family == AF_INET) {
		ip = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
		p = ((const struct sockaddr_in *)(const void *)sa)->sin_port;
	} else if (sa->sa_family == AF_INET6) {
		ip = &((const struct sockaddr_in6 *)(const void *)sa)
			      ->sin6_addr;
		p = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_port;
	} else {
		return -FI_EINVAL;
	}
	if (!inet_ntop(sa->sa_family, ip, host, sizeof(host)))
		return -FI_EINVAL;
	snprintf(port, sizeof(port), "%u", (unsigned)ntohs(p));
	/* a source at port 0 listens where the system puts it */
	return tnbc_addr_svc(host, source && !p ? NULL : port, source, out);
}

int tnbc_addr_import(struct tnbc_domain *dom, uint32_t fmt, const void *in,
		     size_t len, bool source, struct tnbc_addr *out)
{
	struct sockaddr_storage ss;
	int ret;

	if (!in)
		return -FI_EINVAL;
	switch (fmt) {
	case FI_FORMAT_UNSPEC:
		if (len && len != sizeof(*out))
			return -FI_EINVAL;
		memcpy(out, in, sizeof(*out));
		return 0;
	case FI_ADDR_STR: {
		const char *text = in;

		if (len && strnlen(text, len) == len)
			return -FI_EINVAL; /* no NUL within len */
		if (!strncmp(text, TNBC_ADDR_SCHEME,
			     strlen(TNBC_ADDR_SCHEME))) {
			ret = tnbc_addr_scan(text, out);
			if (ret)
				FI_WARN(&tnbc_prov, FI_LOG_AV,
					"not a tnbc address: %.80s\n", text);
			return ret;
		}
		ret = tnbc_addr_sock_scan(text, &ss);
		if (ret) {
			FI_WARN(&tnbc_prov, FI_LOG_AV,
				"an address tnbc cannot read: %.80s\n", text);
			return ret;
		}
		return tnbc_addr_from_sock(dom, (struct sockaddr *)&ss, source,
					   out);
	}
	case FI_SOCKADDR_IN: {
		const struct sockaddr_in *s4 = in;

		if ((len && len < sizeof(*s4)) || s4->sin_family != AF_INET)
			return -FI_EINVAL;
		return tnbc_addr_from_sock(dom, in, source, out);
	}
	default:
		return -FI_EINVAL;
	}
}

/* Copies need bytes of src into buf as far as *len allows. */
static int tnbc_addr_give(const void *src, size_t need, void *buf, size_t *len)
{
	size_t have = *len;

	*len = need;
	if (buf && have)
		memcpy(buf, src, have < need ? have : need);
	return have < need ? -FI_ETOOSMALL : 0;
}

/* a's socket address, if it has one of family. */
static int tnbc_addr_sock(const struct tnbc_addr *a, int family,
			  struct sockaddr_storage *ss)
{
	const struct tnbc_xport_ops *ops = tnbc_addr_sock_xport();

	if (!ops || !(a->name.xports & TNBC_XPORT_BIT(ops->id)))
		return -FI_ENODATA;
	return ops->addr_sock(a->xaddr + ops->xaddr_off, family, ss);
}

int tnbc_addr_export(uint32_t fmt, const struct tnbc_addr *a, void *buf,
		     size_t *len)
{
	struct sockaddr_storage ss;
	char text[512];
	size_t need;
	int n;

	switch (fmt) {
	case FI_FORMAT_UNSPEC:
		return tnbc_addr_give(a, sizeof(*a), buf, len);
	case FI_ADDR_STR:
		need = tnbc_addr_print(a, text, sizeof(text)) + 1;
		/* cut short, it is still a string */
		if (buf && *len)
			snprintf(buf, *len, "%s", text);
		n = *len < need ? -FI_ETOOSMALL : 0;
		*len = need;
		return n;
	case FI_SOCKADDR_IN:
		n = tnbc_addr_sock(a, AF_INET, &ss);
		if (n < 0)
			return n;
		return tnbc_addr_give(&ss, sizeof(struct sockaddr_in), buf,
				      len);
	default:
		return -FI_EINVAL;
	}
}

int tnbc_addr_export_dup(uint32_t fmt, const struct tnbc_addr *a, void **out,
			 size_t *len)
{
	size_t n = 0;
	void *buf;
	int ret;

	ret = tnbc_addr_export(fmt, a, NULL, &n);
	if (ret && ret != -FI_ETOOSMALL)
		return ret;
	buf = malloc(n);
	if (!buf)
		return -FI_ENOMEM;
	ret = tnbc_addr_export(fmt, a, buf, &n);
	if (ret) {
		free(buf);
		return ret;
	}
	*out = buf;
	*len = n;
	return 0;
}

void tnbc_addr_straddr(uint32_t fmt, const void *addr, char *buf, size_t *len)
{
	char text[512], ip[INET_ADDRSTRLEN] = "?";
	const struct sockaddr_in *s4 = addr;
	size_t n;

	switch (fmt) {
	case FI_ADDR_STR:
		snprintf(text, sizeof(text), "%s", (const char *)addr);
		break;
	case FI_SOCKADDR_IN:
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(text, sizeof(text), "fi_sockaddr_in://%s:%u", ip,
			 (unsigned)ntohs(s4->sin_port));
		break;
	default:
		tnbc_addr_print(addr, text, sizeof(text));
		break;
	}
	n = strlen(text) + 1;
	if (buf && *len)
		snprintf(buf, *len, "%s", text);
	*len = n;
}
