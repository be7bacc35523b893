/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Completion writing (tnbc_comp.c): into CQs and counters, from
 * messages, RMA and the trigger unit, with the owning ep->lock held
 * (the CQ's and counter's locks are leaves).
 */
#ifndef TNBC_COMP_H
#define TNBC_COMP_H

#include "tnbc.h"

int tnbc_cq_write(struct tnbc_cq *cq, void *context, uint64_t flags, size_t len,
		  void *buf, uint64_t data, uint64_t tag, fi_addr_t src);
int tnbc_cq_write_err(struct tnbc_cq *cq, void *context, uint64_t flags,
		      size_t len, void *buf, uint64_t data, uint64_t tag,
		      size_t olen, int err, int prov_errno, fi_addr_t src);
/* Adds value to (or sets) *v, cnt or err of cntr, and reports the change
 * as tnbc_cntr_changed does, safely against a concurrent close. */
void tnbc_cntr_bump(struct tnbc_cntr *cntr, atomic_uint_fast64_t *v,
		    uint64_t value, bool set);
void tnbc_cntr_inc(struct tnbc_cntr *cntr);
void tnbc_cntr_inc_err(struct tnbc_cntr *cntr);
/* After any change of a counter's value: wakes waiters and releases
 * triggered work (which runs later, outside the caller's locks). */
void tnbc_cntr_changed(struct tnbc_cntr *cntr);
/* Wakes the fi_cntr_wait callers the change may satisfy. */
void tnbc_cntr_signal(struct tnbc_cntr *cntr);
/* Counts a completion of an operation carrying these op flags: the
 * endpoint counter, unless deferred; the deferred completion counter.
 * Inline, as the next: every completion asks them. */
static inline void tnbc_count_completion(struct tnbc_cntr *ep_cntr,
					 uint64_t flags,
					 struct tnbc_cntr *comp_cntr, bool err)
{
	if (ep_cntr && !(flags & (TNBC_DEFERRED | TNBC_INTERNAL)))
		(err ? tnbc_cntr_inc_err : tnbc_cntr_inc)(ep_cntr);
	if (comp_cntr)
		(err ? tnbc_cntr_inc_err : tnbc_cntr_inc)(comp_cntr);
}
/* Whether a successful completion goes to the CQ. */
static inline bool tnbc_cq_wanted(bool selective, uint64_t flags)
{
	if (flags & (TNBC_NO_COMPLETION | TNBC_INTERNAL))
		return false;
	/* deferred work reports only when asked to (fi_trigger(3)) */
	if ((selective || (flags & TNBC_DEFERRED)))
		return flags & FI_COMPLETION;
	return true;
}

/* A completion as the provider keeps it; converted to the CQ's format
 * only when the application reads it. */
struct tnbc_cq_slot {
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
};

struct tnbc_cq_err {
	struct tnbc_list entry;
	struct fi_cq_err_entry err;
	fi_addr_t src;
};

struct tnbc_cq {
	struct fid_cq cq_fid;
	struct tnbc_domain *domain;
	atomic_int ref;
	enum fi_cq_format format;
	enum fi_wait_obj wait_obj;
	enum fi_cq_wait_cond wait_cond;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int efd; /* FI_WAIT_FD: readable while completions are queued */
	struct tnbc_cq_slot *ring;
	size_t ring_size, head, count;
	struct tnbc_list err_list;
	/* error entries' err_data stays valid until the next readerr */
	atomic_bool signaled; /* efd holds a count */
	/* entries or errors queued: an empty poll reads this, not the
	 * lock (written under it) */
	atomic_bool avail;
	bool kicked; /* fi_cq_signal: release one sread */
	/* FI_THREAD_DOMAIN and FI_WAIT_NONE: completions made by
	 * application threads queue here, without the lock (tnbc_cq.c) */
	bool app_queue;
	struct tnbc_cq_slot *aq;
	size_t aq_size, aq_head, aq_count;
};

#endif /* TNBC_COMP_H */
