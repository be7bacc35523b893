/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Counters.  Values are atomics so that the engine can bump them without
 * a lock; the mutex guards the heap of triggered work (tnbc_trig_heap.c)
 * and, for an application's counter, the condition variable of
 * fi_cntr_wait.  The provider's own counters (collective schedules make
 * them by the dozen) have no fid and no condition: nobody blocks on
 * them, and nothing outside the provider can name them.  Every change goes
 * through tnbc_cntr_changed() (tnbc_comp.c), which releases the work it
 * satisfies.
 */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tnbc.h"
#include "tnbc_trigger.h"
#include "tnbc_unsupp.h"
#include "tnbc_progress.h"
#include "tnbc_comp.h"

/* An application call changed the counter: it holds no provider lock,
 * so it starts the released work itself, without waiting for the
 * engine to wake up. */
static void tnbc_cntr_app_changed(struct tnbc_cntr *cntr)
{
	tnbc_cntr_signal(cntr);
	tnbc_trig_check_app(cntr);
}

static uint64_t tnbc_cntr_read(struct fid_cntr *fid)
{
	struct tnbc_cntr *cntr = tnbc_cntr_fid(&fid->fid);

	tnbc_domain_progress(cntr->domain, false);
	return atomic_load(&cntr->cnt);
}

static uint64_t tnbc_cntr_readerr(struct fid_cntr *fid)
{
	struct tnbc_cntr *cntr = tnbc_cntr_fid(&fid->fid);

	tnbc_domain_progress(cntr->domain, false);
	return atomic_load(&cntr->err);
}

static int tnbc_cntr_add(struct fid_cntr *fid, uint64_t value)
{
	struct tnbc_cntr *cntr = tnbc_cntr_fid(&fid->fid);

	atomic_fetch_add(&cntr->cnt, value);
	tnbc_cntr_app_changed(cntr);
	return 0;
}

static int tnbc_cntr_set(struct fid_cntr *fid, uint64_t value)
{
	struct tnbc_cntr *cntr = tnbc_cntr_fid(&fid->fid);

	atomic_store(&cntr->cnt, value);
	tnbc_cntr_app_changed(cntr);
	return 0;
}

static int tnbc_cntr_adderr(struct fid_cntr *fid, uint64_t value)
{
	struct tnbc_cntr *cntr = tnbc_cntr_fid(&fid->fid);

	atomic_fetch_add(&cntr->err, value);
	tnbc_cntr_app_changed(cntr);
	return 0;
}

static int tnbc_cntr_seterr(struct fid_cntr *fid, uint64_t value)
{
	struct tnbc_cntr *cntr = tnbc_cntr_fid(&fid->fid);

	atomic_store(&cntr->err, value);
	tnbc_cntr_app_changed(cntr);
	return 0;
}

static int tnbc_cntr_wait(struct fid_cntr *fid, uint64_t threshold, int timeout)
{
	struct tnbc_cntr_user *u =
		tnbc_container_of(fid, struct tnbc_cntr_user, cntr_fid);
	struct tnbc_cntr *cntr = &u->c;
	uint64_t err0 = atomic_load(&cntr->err);
	uint64_t deadline = 0;
	int ret = 0;

	if (timeout >= 0)
		deadline = tnbc_now_ns() + (uint64_t)timeout * 1000000u;
	atomic_fetch_add(&u->waiters, 1);
	for (;;) {
		struct timespec ts;
		uint64_t slice;

		tnbc_domain_progress(cntr->domain, false);
		if (atomic_load(&cntr->cnt) >= threshold)
			break;
		if (atomic_load(&cntr->err) != err0) {
			ret = -FI_EAVAIL;
			break;
		}
		if (deadline && tnbc_now_ns() >= deadline) {
			ret = -FI_ETIMEDOUT;
			break;
		}
		/* The engine signals the condition; the bounded slice keeps
		 * a waiter progressing when the engine is disabled. */
		slice = cntr->domain->engine.running ? 10000000u : 100000u;
		if (u->wait_obj == FI_WAIT_NONE) {
			/* no wait object was asked for: poll */
			sched_yield();
			continue;
		}
		tnbc_abstime(&ts, slice);
		tnbc_app_wait(cntr->domain, true);
		pthread_mutex_lock(&cntr->lock);
		/* the lowest threshold of all waiters; reset by a wake-up */
		if (threshold < atomic_load(&u->wait_min))
			atomic_store(&u->wait_min, threshold);
		atomic_store(&u->wait_err, err0);
		if (atomic_load(&cntr->cnt) < threshold &&
		    atomic_load(&cntr->err) == err0)
			pthread_cond_timedwait(&u->cond, &cntr->lock, &ts);
		pthread_mutex_unlock(&cntr->lock);
		tnbc_app_wait(cntr->domain, false);
	}
	atomic_fetch_sub(&u->waiters, 1);
	return ret;
}

int tnbc_cntr_init(struct tnbc_cntr *cntr, struct tnbc_domain *dom)
{
	memset(cntr, 0, sizeof(*cntr));
	cntr->domain = dom;
	if (pthread_mutex_init(&cntr->lock, NULL))
		return -FI_ENOMEM;
	return 0;
}

void tnbc_cntr_quiesce(struct tnbc_cntr *cntr)
{
	/* queued triggered work holds references; a request that just
	 * ran drops its own once it returns */
	while (atomic_load(&cntr->ref) || atomic_load(&cntr->changing))
		sched_yield();
	if (cntr->heap != cntr->heap_inline)
		free(cntr->heap);
	cntr->heap = NULL;
}

void tnbc_cntr_reuse(struct tnbc_cntr *cntr, struct tnbc_domain *dom)
{
	const size_t a = offsetof(struct tnbc_cntr, lock);
	const size_t b = a + sizeof(cntr->lock);

	memset(cntr, 0, a);
	memset((char *)cntr + b, 0, sizeof(*cntr) - b);
	cntr->domain = dom;
}

void tnbc_cntr_fini(struct tnbc_cntr *cntr)
{
	tnbc_cntr_quiesce(cntr);
	pthread_mutex_destroy(&cntr->lock);
}

static int tnbc_cntr_close(struct fid *fid)
{
	struct tnbc_cntr_user *u =
		tnbc_container_of(fid, struct tnbc_cntr_user, cntr_fid.fid);
	struct tnbc_cntr *cntr = &u->c;
	struct tnbc_domain *dom = cntr->domain;

	/* bound endpoints and MRs, and queued triggered work, hold refs */
	if (atomic_load(&cntr->ref))
		tnbc_trig_quiesce(dom);
	if (atomic_load(&cntr->ref))
		return -FI_EBUSY;
	pthread_mutex_lock(&dom->cntr_lock);
	tnbc_list_remove(&u->dom_entry);
	pthread_mutex_unlock(&dom->cntr_lock);
	tnbc_cntr_fini(cntr);
	pthread_cond_destroy(&u->cond);
	free(u);
	atomic_fetch_sub(&dom->ref, 1);
	return 0;
}

static int tnbc_cntr_control(struct fid *fid, int command, void *arg)
{
	(void)fid;
	(void)arg;
	/* There is no wait fd: waiting uses fi_cntr_wait. */
	return command == FI_GETWAIT ? -FI_ENODATA : -FI_ENOSYS;
}

static struct fi_ops tnbc_cntr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_cntr_close,
	.bind = tnbc_no_bind,
	.control = tnbc_cntr_control,
	.ops_open = tnbc_no_ops_open,
};

static struct fi_ops_cntr tnbc_cntr_ops = {
	.size = sizeof(struct fi_ops_cntr),
	.read = tnbc_cntr_read,
	.readerr = tnbc_cntr_readerr,
	.add = tnbc_cntr_add,
	.set = tnbc_cntr_set,
	.wait = tnbc_cntr_wait,
	.adderr = tnbc_cntr_adderr,
	.seterr = tnbc_cntr_seterr,
};

int tnbc_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		   struct fid_cntr **cntr_out, void *context)
{
	struct tnbc_cntr_user *u;
	struct tnbc_domain *dom;
	enum fi_wait_obj wait = FI_WAIT_UNSPEC;

	if (!domain || !cntr_out)
		return -FI_EINVAL;
	if (attr) {
		if (attr->events != FI_CNTR_EVENTS_COMP || attr->flags)
			return -FI_EINVAL;
		switch (attr->wait_obj) {
		case FI_WAIT_NONE:
		case FI_WAIT_UNSPEC:
		case FI_WAIT_MUTEX_COND:
		case FI_WAIT_YIELD:
			wait = attr->wait_obj;
			break;
		default:
			return -FI_ENOSYS;
		}
	}
	dom = tnbc_container_of(domain, struct tnbc_domain, domain_fid);
	u = calloc(1, sizeof(*u));
	if (!u)
		return -FI_ENOMEM;
	if (tnbc_cntr_init(&u->c, dom)) {
		free(u);
		return -FI_ENOMEM;
	}
	atomic_fetch_add(&dom->ref, 1);
	u->c.user = u;
	u->wait_obj = wait;
	atomic_init(&u->wait_min, UINT64_MAX);
	pthread_cond_init(&u->cond, NULL);
	u->cntr_fid.fid.fclass = FI_CLASS_CNTR;
	u->cntr_fid.fid.context = context;
	u->cntr_fid.fid.ops = &tnbc_cntr_fi_ops;
	u->cntr_fid.ops = &tnbc_cntr_ops;
	pthread_mutex_lock(&dom->cntr_lock);
	tnbc_list_insert_tail(&u->dom_entry, &dom->cntr_list);
	pthread_mutex_unlock(&dom->cntr_lock);
	*cntr_out = &u->cntr_fid;
	return 0;
}
