/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A domain's transports: the ones this provider has (tnbc_xports.c) and
 * those FI_TNBC_XPORTS picks, and an endpoint's or a domain's
 * transports called as one (inlines: each poll makes these calls).
 */
#ifndef TNBC_XPORTS_H
#define TNBC_XPORTS_H

#include "tnbc.h"

/* A transport this provider has, by its name (len bytes of it) or id;
 * NULL if none. */
const struct tnbc_xport_ops *tnbc_xport_named(const char *name, size_t len);
const struct tnbc_xport_ops *tnbc_xport_of(unsigned id);

/* xports: opens no transport; picks those FI_TNBC_XPORTS names */
void tnbc_xports_choose(void);

/* An endpoint's receive queues, one per transport of its domain, taken
 * as one.  The consumer's calls (all but idle) need ep->lock. */

/* The transports' receive callback (tnbc_rx_fn; msg protocol, ep lock
 * held) */
int tnbc_rx_packet(void *arg, struct tnbc_xrx *rx);

/* Each of these takes the first transport before looking at how many
 * there are: the common endpoint has one, and these run on every poll. */

/* A poll of an endpoint's transports, as the receive callback sees it:
 * how the packet came and who takes it.  Whoever polls builds it, and
 * the handlers get it passed down, never from the endpoint. */
struct tnbc_rx_ctx {
	struct tnbc_ep *ep;
	unsigned via; /* the transport polled (tnbc_domain.xp) */
	bool engine; /* the engine polls: it may read a rendezvous early */
	/* stop at an eager message nobody waits for while the queue is
	 * quiet: its receive takes it from there (tnbc_ep_progress) */
	bool lazy;
	bool batch; /* rendezvous reads wait for the end of the pass */
	bool app; /* an application thread polls: each packet says so */
};

/* Packets taken, up to budget from each transport (ep->lock held). */
static inline int tnbc_ep_xpoll(struct tnbc_rx_ctx *c, int budget)
{
	struct tnbc_ep_xport *x = c->ep->xp;
	int n;

	c->via = 0;
	n = x->ops->poll(x->xep, tnbc_rx_packet, c, budget);
	for (unsigned i = 1; i < c->ep->nxp; i++) {
		c->via = i;
		n += x[i].ops->poll(x[i].xep, tnbc_rx_packet, c, budget);
	}
	return n;
}

static inline void tnbc_ep_xrewind(struct tnbc_ep *ep)
{
	for (unsigned i = 0; i < ep->nxp; i++)
		ep->xp[i].ops->rewind(ep->xp[i].xep);
}

static inline void tnbc_ep_xlook_mark(struct tnbc_ep *ep)
{
	for (unsigned i = 0; i < ep->nxp; i++)
		ep->xp[i].ops->look_mark(ep->xp[i].xep);
}

/* Whether any of them (pending, unlooked, stalled) or all of them
 * (idle, quiet) say so: the transport interface's calls of those
 * names. */
#define TNBC_EP_XANY(name)                                                     \
	static inline bool tnbc_ep_x##name(struct tnbc_ep *ep)                 \
	{                                                                      \
		struct tnbc_ep_xport *x = ep->xp;                              \
                                                                               \
		if (x->ops->name(x->xep))                                      \
			return true;                                           \
		for (unsigned i = 1; i < ep->nxp; i++)                         \
			if (x[i].ops->name(x[i].xep))                          \
				return true;                                   \
		return false;                                                  \
	}
#define TNBC_EP_XALL(name)                                                     \
	static inline bool tnbc_ep_x##name(struct tnbc_ep *ep)                 \
	{                                                                      \
		struct tnbc_ep_xport *x = ep->xp;                              \
                                                                               \
		if (!x->ops->name(x->xep))                                     \
			return false;                                          \
		for (unsigned i = 1; i < ep->nxp; i++)                         \
			if (!x[i].ops->name(x[i].xep))                         \
				return false;                                  \
		return true;                                                   \
	}
TNBC_EP_XANY(pending)
TNBC_EP_XANY(unlooked)
TNBC_EP_XANY(stalled)
TNBC_EP_XALL(idle)
TNBC_EP_XALL(quiet)

/* The domain-wide calls every transport takes (tnbc_xport.h), the
 * first (xops) straight. */
static inline void tnbc_dom_xrx_posted(struct tnbc_domain *dom, int delta)
{
	dom->xops->rx_posted(dom->xdom, delta);
	for (unsigned i = 1; i < dom->nxp; i++)
		dom->xp[i].ops->rx_posted(dom->xp[i].xdom, delta);
}

static inline void tnbc_dom_xapp_mark(struct tnbc_domain *dom, bool active)
{
	dom->xops->app_mark(dom->xdom, active);
	for (unsigned i = 1; i < dom->nxp; i++)
		dom->xp[i].ops->app_mark(dom->xp[i].xdom, active);
}

static inline void tnbc_dom_xset_window(struct tnbc_domain *dom, uint64_t ns)
{
	dom->xops->set_window(dom->xdom, ns);
	for (unsigned i = 1; i < dom->nxp; i++)
		dom->xp[i].ops->set_window(dom->xp[i].xdom, ns);
}

/* The endpoint's end of the transport that reaches peer. */
static inline struct tnbc_xep *tnbc_ep_xep_of(struct tnbc_ep *ep,
					      const struct tnbc_xpeer *peer)
{
	const struct tnbc_xport_ops *ops = tnbc_xpeer_ops(peer);
	unsigned i = 0;

	while (i + 1 < ep->nxp && ep->xp[i].ops != ops)
		i++;
	return ep->xp[i].xep;
}

/* A single-copy read from peer (the transport interface's pull). */
static inline ssize_t tnbc_ep_pull(struct tnbc_ep *ep, struct tnbc_xpeer *peer,
				   const struct iovec *local, size_t lcount,
				   const struct tnbc_xrmem *remote,
				   size_t rcount, struct tnbc_xread *rd)
{
	return tnbc_xpeer_ops(peer)->pull(tnbc_ep_xep_of(ep, peer), peer, local,
					  lcount, remote, rcount, rd);
}

#endif /* TNBC_XPORTS_H */
