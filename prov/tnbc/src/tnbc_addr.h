/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Endpoint addresses in the formats applications use (tnbc_addr.c).
 */
#ifndef TNBC_ADDR_H
#define TNBC_ADDR_H

#include "tnbc.h"

/* addr: endpoint addresses in the formats applications use
 * (fi_getinfo(3)'s addr_format): the native struct tnbc_addr
 * (FI_FORMAT_UNSPEC), its text (FI_ADDR_STR), and FI_SOCKADDR_IN. */

/* The address node and service name (either NULL): a service-named
 * endpoint (the way fabtests and socket-style programs address a
 * server), or, service NULL, "an endpoint of this process" whose number
 * is chosen when it opens; each network transport's part from node
 * (source: to listen on).  -FI_EINVAL for a bad service, -FI_ENODATA
 * when no transport can use it. */
int tnbc_addr_svc(const char *node, const char *service, bool source,
		  struct tnbc_addr *out);
/* Whether tnbc offers format fmt with the transports FI_TNBC_XPORTS
 * allows. */
bool tnbc_addr_format_ok(uint32_t fmt);
/* a as FI_ADDR_STR text, at most len bytes with the NUL; returns the
 * length it needs, the NUL left out. */
size_t tnbc_addr_print(const struct tnbc_addr *a, char *buf, size_t len);
/* Whether text is an FI_ADDR_STR address ("scheme://..."). */
bool tnbc_addr_is_str(const char *text);
/* One address of format fmt (len bytes; 0: as long as the format says)
 * into out.  A socket address says where an endpoint listens, not which
 * endpoint it is: with dom, the domain's transport asks it over the
 * network (fi_av_insert); without, it becomes the name of the service
 * at that port, or as a source, the address to listen at. */
int tnbc_addr_import(struct tnbc_domain *dom, uint32_t fmt, const void *in,
		     size_t len, bool source, struct tnbc_addr *out);
/* a in format fmt into buf (*len bytes; *len becomes the length it
 * needs): -FI_ETOOSMALL when cut short, -FI_ENODATA when the format
 * cannot name it. */
int tnbc_addr_export(uint32_t fmt, const struct tnbc_addr *a, void *buf,
		     size_t *len);
/* The same, into memory it allocates (fi_info's src_addr, dest_addr). */
int tnbc_addr_export_dup(uint32_t fmt, const struct tnbc_addr *a, void **out,
			 size_t *len);
/* fi_av_straddr: addr of format fmt as text. */
void tnbc_addr_straddr(uint32_t fmt, const void *addr, char *buf, size_t *len);

#endif /* TNBC_ADDR_H */
