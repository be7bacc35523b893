/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The trigger unit (tnbc_trigger.c) as its users see it: the endpoint's
 * FI_TRIGGER entry points, the collectives' own requests, and whoever
 * runs ready work (every poll, the engine).
 */
#ifndef TNBC_TRIGGER_H
#define TNBC_TRIGGER_H

#include "tnbc.h"
#include "tnbc_trig_heap.h"
#include "tnbc_wake.h"

/* A request the provider builds itself (a collective's step): trusted,
 * queued as it is.  A send or receive reports only to comp_cntr
 * (TNBC_INTERNAL). */
struct tnbc_trig_req {
	int op; /* FI_OP_SEND, RECV, TSEND, TRECV or a TNBC_TRIG_* kind */
	struct tnbc_ep *ep;
	struct tnbc_cntr *cntr; /* fires once cnt + err >= threshold */
	uint64_t threshold;
	struct tnbc_cntr *comp_cntr;
	struct tnbc_msg_args msg;
	struct tnbc_trig_step step;
	/* a send asks its owner, as it starts, for an error to carry
	 * instead of success (a positive fi_errno, or 0) */
	int (*amend)(void *arg);
	void *amend_arg;
};

/* triggered work (tnbc_trigger.c) */
int tnbc_trig_domain_init(struct tnbc_domain *dom);
void tnbc_trig_domain_fini(struct tnbc_domain *dom);
int tnbc_trig_control(struct tnbc_domain *dom, int command, void *arg);
/* Queues a request the provider built (struct tnbc_trig_req). */
int tnbc_trig_submit(struct tnbc_domain *dom, const struct tnbc_trig_req *r);
/* Takes every request waiting on c out, unreported; returns how many. */
size_t tnbc_trig_drop(struct tnbc_cntr *c);
/* The same from an application call that holds no provider lock: runs
 * the released work at once instead of waking the engine for it. */
void tnbc_trig_check_app(struct tnbc_cntr *cntr);
uint64_t tnbc_trig_run_ready(struct tnbc_domain *dom, bool engine);
/* Frees the requests kept for reuse (the provider's cleanup). */
void tnbc_trig_cache_drain(void);
/* Waits until no thread is starting triggered work: a request holds
 * its objects until its start returned, and the application may have
 * seen it complete before that. */
void tnbc_trig_quiesce(struct tnbc_domain *dom);
static inline bool tnbc_trig_has_ready(struct tnbc_domain *dom)
{
	return atomic_load_explicit(&dom->tu.nready, memory_order_acquire);
}
/* Runs ready requests.  Must be called with no provider lock held.  Every
 * poll calls it: with nothing ready it is one load. */
/* Set by fi_tnbc_ops_domain's defer: triggered work this thread makes
 * ready is the engine's to run, not this thread's.  Initial-exec: read
 * on the hot path with no __tls_get_addr call, and out of the dynamic
 * TLS that LeakSanitizer tracks for dlopen'd modules (with it, LSan's
 * tracer read a bogus block of this module in one thread of an ASan
 * build across namespace hosts, and crashed).  One bool fits glibc's
 * static TLS surplus for dlopen'd libraries. */
extern __thread bool tnbc_defer_tls __attribute__((tls_model("initial-exec")));

static inline void tnbc_trig_run(struct tnbc_domain *dom, bool engine)
{
	if (!tnbc_trig_has_ready(dom))
		return;
	if (!engine && tnbc_defer_tls && dom->engine.running)
		tnbc_engine_kick(dom);
	else
		tnbc_trig_run_ready(dom, engine);
}
ssize_t tnbc_trig_post_msg(struct tnbc_ep *ep, enum fi_op_type op,
			   const struct tnbc_msg_args *a);
ssize_t tnbc_trig_post_rma(struct tnbc_ep *ep, enum fi_op_type op,
			   const struct tnbc_rma_args *a);
int tnbc_trig_cancel_ctx(struct tnbc_ep *ep, void *context);

#endif /* TNBC_TRIGGER_H */
