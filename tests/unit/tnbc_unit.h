/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared declarations of the tnbc unit tests (Check).
 *
 * The tests link the provider's objects directly (libtnbc_core.la), so
 * they call tnbc_getinfo() and tnbc_fabric_open() themselves and then use
 * the ordinary inline fi_* calls on the returned fids.  Every test runs in
 * its own process (CK_FORK), so a test may change tnbc_env before it opens
 * a domain; it restores the old value anyway so that CK_FORK=no runs
 * stay meaningful.
 *
 * Every wait is bounded (TU_WAIT_MS): a provider bug fails a test instead
 * of hanging it.
 */
#ifndef TNBC_UNIT_H
#define TNBC_UNIT_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tnbc.h"
#include "tnbc_frame.h"
#include "tnbc_progress.h"
#include "tnbc_trigger.h"
#include "tnbc_xfer.h"
#include "tnbc_xports.h"
#include "tnbc_comp.h"
#include "tnbc_addr.h"
#include "tnbc_attr.h"
#include "tnbc_msg.h"
#include "tnbc_rma.h"
#include "tnbc_alu.h"
#include "tnbc_av.h"
#include "tnbc_eq.h"
#include "tnbc_mr.h"
#include "tnbc_wake.h"

/* A test that watches memory the engine writes, with no provider call
 * (independent progress), races with the engine by design: the watch
 * is hidden from ThreadSanitizer, and only the watch. */
#if defined(__SANITIZE_THREAD__)
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define TU_WATCH_BEGIN() __tsan_ignore_thread_begin()
#define TU_WATCH_END()	 __tsan_ignore_thread_end()
#else
#define TU_WATCH_BEGIN() ((void)0)
#define TU_WATCH_END()	 ((void)0)
#endif

/* Longest any single wait for a completion may take. */
#define TU_WAIT_MS 10000
/* How long a "nothing must arrive" check watches a queue. */
#define TU_QUIET_MS 40
/* Check timeout (seconds) for test cases that move data. */
#define TU_TCASE_TIMEOUT 30

#define TU_MAX_EPS 4

Suite *tu_attr_suite(void);
Suite *tu_av_suite(void);
Suite *tu_addr_suite(void);
Suite *tu_cq_suite(void);
Suite *tu_match_suite(void);
Suite *tu_proto_suite(void);
Suite *tu_rma_suite(void);
Suite *tu_trigger_suite(void);
Suite *tu_tree_suite(void);
Suite *tu_plp_suite(void);
Suite *tu_desc_suite(void);
Suite *tu_hostile_suite(void);
Suite *tu_tcp_suite(void);
Suite *tu_tcp_trust_suite(void);
Suite *tu_hmac_suite(void);
Suite *tu_link_suite(void);
Suite *tu_alg_suite(void);
Suite *tu_coll_suite(void);
#ifdef TNBC_HAVE_VERBS
Suite *tu_verbs_suite(void);
TCase *tu_verbs_mr_tcase(void);
#endif

/* fi_prov_ini() once per process: defines the FI_TNBC_* parameters.
 * tnbc_env is then reset to the built-in defaults (kept in
 * tu_env_defaults), so FI_TNBC_* variables in the caller's environment
 * do not change what the tests expect. */
void tu_prov_init(void);
extern struct tnbc_env tu_env_defaults;

uint64_t tu_now_ms(void);
/* the transports FI_TNBC_XPORTS gives a domain, as a name's xports */
uint16_t tu_xmask(void);
void tu_sleep_ms(unsigned ms);

/* Deterministic byte patterns, so a test can verify what arrived. */
void tu_fill(void *buf, size_t len, uint32_t seed);
/* Returns the offset of the first wrong byte, or (size_t)-1 when all
 * len bytes match the pattern that tu_fill(seed) writes at offset off. */
size_t tu_check(const void *buf, size_t len, uint32_t seed, size_t off);

/* fabric + domain, from tnbc_getinfo(FI_VERSION(1,17), hints). */
struct tu_dom {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
};

void tu_dom_open(struct tu_dom *d, const struct fi_info *hints);
void tu_dom_close(struct tu_dom *d);
struct tnbc_domain *tu_tnbc_domain(struct tu_dom *d);

/* Several endpoints in one domain sharing one AV in which endpoint i
 * has fi_addr addr[i].  Each endpoint has its own tx and rx CQ
 * (FI_CQ_FORMAT_TAGGED) and optionally tx and rx counters. */
struct tu_ep {
	struct fid_ep *ep;
	struct fid_cq *tx_cq, *rx_cq;
	struct fid_cntr *tx_cntr, *rx_cntr;
	struct tnbc_name name;
	struct tnbc_addr addr; /* the native address: name and more */
	/* what fi_getname gave, in the domain's addr_format */
	uint8_t faddr[256];
	size_t faddr_len;
};

struct tu_world {
	struct tu_dom d;
	struct fid_av *av;
	size_t n;
	struct tu_ep ep[TU_MAX_EPS];
	fi_addr_t addr[TU_MAX_EPS];
};

struct tu_world_opts {
	uint64_t cq_bind_flags; /* e.g. FI_SELECTIVE_COMPLETION */
	bool cntrs;
	enum fi_wait_obj cq_wait; /* FI_WAIT_NONE (0) means FI_WAIT_UNSPEC */
	const struct fi_info *hints; /* for tnbc_getinfo; NULL: none */
	bool cq_wait_none; /* CQs with FI_WAIT_NONE (overrides cq_wait) */
};

/* A domain of its own with one endpoint, its auth_key key (NULL: none),
 * addresses of format fmt; addr is what fi_getname gave. */
struct tu_kside {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cq *cq;
	uint8_t addr[256];
	size_t addrlen;
};

void tu_kside_open(struct tu_kside *k, const char *key, uint32_t fmt);
int tu_send_until_refused(struct fid_ep *ep, struct fid_cq *cq, fi_addr_t to,
			  uint64_t tag);
int tu_kside_send(struct tu_kside *k, struct tu_kside *r, uint64_t tag);
void tu_kside_close(struct tu_kside *k);

void tu_world_open(struct tu_world *w, size_t n,
		   const struct tu_world_opts *opts);
void tu_world_close(struct tu_world *w);

/*
 * Waits up to timeout_ms for one completion.  Returns 1 with *e (and
 * *src when given) filled, -FI_EAVAIL with *err filled (when given; the
 * error entry is consumed) or -FI_ETIMEDOUT.
 */
ssize_t tu_cq_wait(struct fid_cq *cq, struct fi_cq_tagged_entry *e,
		   fi_addr_t *src, struct fi_cq_err_entry *err,
		   unsigned timeout_ms);
/* Like tu_cq_wait but fails the test unless a good completion arrives. */
void tu_cq_expect(struct fid_cq *cq, struct fi_cq_tagged_entry *e,
		  fi_addr_t *src);
/* Fails the test unless an error completion arrives; returns it. */
void tu_cq_expect_err(struct fid_cq *cq, struct fi_cq_err_entry *err);
/* Watches cq for ms milliseconds; true when nothing (good or error)
 * arrived.  Progresses the domain all the while. */
bool tu_cq_quiet(struct fid_cq *cq, unsigned ms);
/* Waits until the counter reaches value; false on timeout. */
bool tu_cntr_reach(struct fid_cntr *cntr, uint64_t value, unsigned timeout_ms);
/* Waits until the counter's successes and errors together reach n, for
 * work that may end either way; false on timeout. */
bool tu_cntr_settle(struct fid_cntr *cntr, uint64_t n, unsigned timeout_ms);
/* Waits until the engine sleeps without a bound (only a kick or a ring
 * wakes it then); fails after 3 * TU_WAIT_MS. */
void tu_engine_until_asleep(struct tnbc_engine *e);

/* Engine statistics through the FI_TNBC_DOMAIN_OPS_1 extension. */
/* Whether rendezvous and RMA reads go single-copy here: FI_TNBC_CMA on,
 * and the transport reaching peers reads their memory. */
static inline bool tu_pulls(void)
{
	return tnbc_env.cma && (tnbc_env.xport->flags & TNBC_XPORT_PULL);
}

/* and at once: early reads of unexpected messages too */
static inline bool tu_pulls_now(void)
{
	return tu_pulls() && !(tnbc_env.xport->flags & TNBC_XPORT_PULL_LATER);
}

void tu_engine_stats(struct fid_domain *domain,
		     struct fi_tnbc_engine_stats *st);

/* tu_net.c: what the network transports' suites share. */
/* The world's transports forced to one, for one test. */
struct tu_xport_only {
	const struct tnbc_xport_ops *list[4], *first;
	unsigned n;
};
void tu_xport_only_begin(struct tu_xport_only *o,
			 const struct tnbc_xport_ops *ops);
void tu_xport_only_end(struct tu_xport_only *o);
/* A message from endpoint a reaches endpoint r (tags: the caller's). */
void tu_still_works(struct tu_world *w, int r, int a, uint64_t tag);
/* A peer endpoint closes: sends to it fail with FI_EHOSTUNREACH. */
void tu_net_peer_gone(const struct tnbc_xport_ops *ops);
/* auth_key: another key, or none, is refused; the same gets through. */
void tu_net_auth_key(const struct tnbc_xport_ops *ops);
/* A flood of messages nobody asked for (tu_net.c): n of len bytes from
 * ep (its completions on cq) to to, tags tag0 + i; next to post, and
 * sends ended. */
struct tu_flood {
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t to;
	int n, next, done;
	size_t len;
	uint8_t *buf;
	uint64_t tag0;
};
void tu_flood_init(struct tu_flood *f, struct fid_ep *ep, struct fid_cq *cq,
		   fi_addr_t to, int n, size_t len);
void tu_flood_free(struct tu_flood *f);
bool tu_flood_pump(struct tu_flood *f);
void tu_flood_until_stalled(struct tu_flood *f, struct fid_cq *rcq);
void tu_flood_drain(struct tu_flood *f, struct fid_ep *rep, struct fid_cq *rcq);
/* One domain floods another with messages nobody asked for: a third
 * domain's messages still get through, nothing is lost (moved: the
 * transport moves held messages out of its receive buffers). */
void tu_net_flood(const struct tnbc_xport_ops *ops, int n, bool moved);
/* A TCP port that nothing on the host uses now, as the kernel picks one
 * for a bind to port 0: a fixed number from the ephemeral range can be
 * any connection's local port (bind then fails with EADDRINUSE). */
unsigned tu_tcp_free_port(void);

#endif /* TNBC_UNIT_H */
