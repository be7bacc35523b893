/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Domain object: owns the transports and the progress engine.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tnbc.h"
#include "coll/tnbc_coll.h"
#include "tnbc_trigger.h"
#include "tnbc_link.h"
#include "tnbc_unsupp.h"
#include "tnbc_progress.h"
#include "tnbc_rma.h"
#include "tnbc_addr.h"
#include "tnbc_attr.h"
#include "tnbc_wake.h"
#include "tnbc_mr.h"
#include "tnbc_av.h"

/* Packets for this domain's engine came through a transport that
 * cannot ring the first one's doorbell itself: a polling application
 * thread takes them, as shm's senders let it (tnbc_engine_nudge). */
static void tnbc_domain_kick(void *arg)
{
	tnbc_engine_nudge(arg);
}

static void tnbc_domain_xports_close(struct tnbc_domain *dom, unsigned n)
{
	while (n--)
		dom->xp[n].ops->dom_close(dom->xp[n].xdom);
}

static void tnbc_domain_sleep_close(struct tnbc_domain *dom)
{
	if (dom->engine.kick_fd >= 0)
		close(dom->engine.kick_fd);
	dom->engine.kick_fd = -1;
}

/* The eventfd the engine sleeps on, unless the first transport has a
 * doorbell (the engine sleeps there).  A futex in shared memory joins
 * no epoll set, and shm senders ringing a descriptor instead would pay
 * a system call each. */
static int tnbc_domain_sleep_open(struct tnbc_domain *dom)
{
	dom->engine.kick_fd = -1;
	if (tnbc_env.xport_list[0]->bell)
		return 0;
	dom->engine.kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (dom->engine.kick_fd < 0) {
		int ret = -errno;

		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN, "engine's sleep: %s\n",
			fi_strerror(-ret));
		return ret;
	}
	return 0;
}

/* Open MPI's launcher gives every rank of a job the same 128 random bits
 * (for PSM's keys, whatever the network): where the application gave no
 * auth_key, they are the job's, and a network transport then takes
 * connections only from processes that know them (fi_tnbc(7),
 * SECURITY).  MPICH's launcher gives nothing of the kind. */
static void tnbc_domain_job_key(struct tnbc_domain *dom)
{
	const char *v = getenv("OMPI_MCA_orte_precondition_transports");
	int n;

	if (!tnbc_env.job_key || !v || strlen(v) < 16)
		return;
	n = snprintf((char *)dom->auth_key, sizeof(dom->auth_key),
		     "ompi-job:%s", v);
	dom->auth_key_size = n < (int)sizeof(dom->auth_key)
				     ? (size_t)n
				     : sizeof(dom->auth_key);
}

/* Opens every transport FI_TNBC_XPORTS names, the one the engine sleeps
 * on first. */
static int tnbc_domain_xports_open(struct tnbc_domain *dom)
{
	const struct tnbc_xdom_attr attr = {
		.wake = {.kick = tnbc_domain_kick, .arg = dom},
		.auth_key = dom->auth_key,
		.auth_key_size = dom->auth_key_size,
		.host_busy = &dom->engine.host_busy,
	};
	int ret;

	ret = tnbc_domain_sleep_open(dom);
	if (ret)
		return ret;

	for (dom->nxp = 0; dom->nxp < tnbc_env.nxport; dom->nxp++) {
		struct tnbc_xslot *x = &dom->xp[dom->nxp];

		x->ops = tnbc_env.xport_list[dom->nxp];
		ret = x->ops->dom_open(&x->xdom, &attr);
		if (ret) {
			FI_WARN(&tnbc_prov, FI_LOG_DOMAIN, "transport %s: %s\n",
				x->ops->name, fi_strerror(-ret));
			tnbc_domain_xports_close(dom, dom->nxp);
			tnbc_domain_sleep_close(dom);
			return ret;
		}
		dom->xmask |= (uint16_t)TNBC_XPORT_BIT(x->ops->id);
	}
	dom->xops = dom->xp[0].ops;
	dom->xdom = dom->xp[0].xdom;
	return 0;
}

/* The transports' counts, summed. */
static void tnbc_domain_xstats(struct tnbc_domain *dom,
			       struct tnbc_xport_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (unsigned i = 0; i < dom->nxp; i++) {
		struct tnbc_xport_stats x;

		dom->xp[i].ops->stats(dom->xp[i].xdom, &x);
		st->bad_pkts += x.bad_pkts;
		st->dead_cells += x.dead_cells;
		st->refused += x.refused;
		st->slot_pkts += x.slot_pkts;
		st->placed_bytes += x.placed_bytes;
		st->stream_writes += x.stream_writes;
		st->strangers += x.strangers;
		st->spilled += x.spilled;
		st->held += x.held;
	}
}

static int tnbc_domain_close(struct fid *fid)
{
	struct tnbc_domain *dom =
		tnbc_container_of(fid, struct tnbc_domain, domain_fid.fid);

	if (atomic_load(&dom->ref)) {
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN,
			"domain still has %d open objects\n",
			atomic_load(&dom->ref));
		return -FI_EBUSY;
	}
	tnbc_prov_track(dom, false);
	tnbc_engine_stop(dom);
	/* what a slow run needs first: who moved the packets, how often
	 * the engine slept and was woken */
	FI_INFO(&tnbc_prov, FI_LOG_DOMAIN,
		"engine: %" PRIu64 " packets, application: %" PRIu64
		", sleeps %" PRIu64 ", wake-ups %" PRIu64 "\n",
		atomic_load(&dom->engine.engine_pkts),
		atomic_load(&dom->engine.app_pkts),
		atomic_load(&dom->engine.sleeps),
		atomic_load(&dom->engine.wakeups));
	tnbc_domain_xports_close(dom, dom->nxp);
	tnbc_domain_sleep_close(dom);
	if (dom->link)
		tnbc_link_leave();
	tnbc_trig_domain_fini(dom);
	pthread_mutex_destroy(&dom->mr_xlock);
	pthread_mutex_destroy(&dom->atomic_lock);
	pthread_rwlock_destroy(&dom->mr_lock);
	pthread_rwlock_destroy(&dom->ep_lock);
	atomic_fetch_sub(&dom->fabric->ref, 1);
	free(dom);
	return 0;
}

static int tnbc_engine_stats(struct fid_domain *domain,
			     struct fi_tnbc_engine_stats *st)
{
	struct tnbc_domain *dom;
	struct tnbc_engine *e;

	struct tnbc_xport_stats xs = {0};

	/* callers built before the hardening counters stop short of them */
	if (!domain || !st ||
	    st->size < offsetof(struct fi_tnbc_engine_stats, bad_pkts))
		return -FI_EINVAL;
	dom = tnbc_container_of(domain, struct tnbc_domain, domain_fid);
	e = &dom->engine;
	st->engine_pkts = atomic_load(&e->engine_pkts);
	st->app_pkts = atomic_load(&e->app_pkts);
	st->engine_sleeps = atomic_load(&e->sleeps);
	st->engine_wakeups = atomic_load(&e->wakeups);
	st->rndv_pull = atomic_load(&e->rndv_pull);
	st->rndv_stream = atomic_load(&e->rndv_stream);
	st->engine_cpu = atomic_load(&e->cpu);
	st->engine_running = e->running;
	st->trig_queued = atomic_load(&e->trig_queued);
	st->trig_fired = atomic_load(&e->trig_fired);
	st->trig_canceled = atomic_load(&e->trig_canceled);
	st->trig_pending = atomic_load(&e->trig_pending);
	st->trig_heap_steps = atomic_load(&e->trig_heap_steps);
	st->trig_fired_by_engine = atomic_load(&e->trig_fired_by_engine);
	if (st->size < offsetof(struct fi_tnbc_engine_stats, slot_pkts))
		return 0;
	tnbc_domain_xstats(dom, &xs);
	st->bad_pkts = xs.bad_pkts;
	st->stray_pkts = atomic_load(&e->stray_pkts);
	st->dead_cells = xs.dead_cells;
	st->refused_peers = xs.refused;
	st->unexp_held = atomic_load(&e->unexp_held);
	if (st->size >= offsetof(struct fi_tnbc_engine_stats, slot_pkts) +
				sizeof(st->slot_pkts))
		st->slot_pkts = xs.slot_pkts;
	if (st->size >= offsetof(struct fi_tnbc_engine_stats, rma_direct) +
				sizeof(st->rma_direct))
		st->rma_direct = atomic_load(&e->rma_direct);
	if (st->size >= offsetof(struct fi_tnbc_engine_stats, placed_bytes) +
				sizeof(st->placed_bytes))
		st->placed_bytes = xs.placed_bytes;
	if (st->size >= offsetof(struct fi_tnbc_engine_stats, stream_writes) +
				sizeof(st->stream_writes))
		st->stream_writes = xs.stream_writes;
	if (st->size >=
	    offsetof(struct fi_tnbc_engine_stats, strangers_closed) +
		    sizeof(st->strangers_closed)) {
		st->forged_pkts = atomic_load(&e->forged_pkts);
		st->strangers_closed = xs.strangers;
	}
	if (st->size >= offsetof(struct fi_tnbc_engine_stats, senders_held) +
				sizeof(st->senders_held)) {
		st->spilled_pkts = xs.spilled;
		st->senders_held = xs.held;
	}
	if (st->size >= offsetof(struct fi_tnbc_engine_stats, engine_domains) +
				sizeof(st->engine_domains))
		st->engine_domains = (uint64_t)tnbc_engine_domains(dom);
	if (st->size >= offsetof(struct fi_tnbc_engine_stats, link_overruns) +
				sizeof(st->link_overruns)) {
		st->link_holds = tnbc_link_holds();
		st->link_overruns = tnbc_link_overruns();
	}
	if (st->size >= sizeof(*st))
		st->sync_pkts = atomic_load(&e->sync_pkts);
	return 0;
}

static int tnbc_domain_handoff(struct fid_domain *domain)
{
	if (!domain)
		return -FI_EINVAL;
	return tnbc_engine_handoff(
		tnbc_container_of(domain, struct tnbc_domain, domain_fid));
}

__thread bool tnbc_defer_tls __attribute__((tls_model("initial-exec")));

static int tnbc_domain_defer(struct fid_domain *domain, int on)
{
	if (!domain)
		return -FI_EINVAL;
	tnbc_defer_tls = on != 0;
	return 0;
}

static struct fi_tnbc_ops_domain tnbc_ext_domain_ops = {
	.size = sizeof(struct fi_tnbc_ops_domain),
	.engine_stats = tnbc_engine_stats,
	.handoff = tnbc_domain_handoff,
	.defer = tnbc_domain_defer,
};

static int tnbc_domain_ops_open(struct fid *fid, const char *name,
				uint64_t flags, void **ops, void *context)
{
	(void)fid;
	(void)context;
	if (!name || !ops || flags)
		return -FI_EINVAL;
	if (strcmp(name, FI_TNBC_DOMAIN_OPS_1))
		return -FI_ENOSYS;
	*ops = &tnbc_ext_domain_ops;
	return 0;
}

/* Deferred work queues (fi_trigger(3)) are the domain's. */
static int tnbc_domain_control(struct fid *fid, int command, void *arg)
{
	struct tnbc_domain *dom =
		tnbc_container_of(fid, struct tnbc_domain, domain_fid.fid);

	return tnbc_trig_control(dom, command, arg);
}

static struct fi_ops tnbc_domain_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_domain_close,
	.bind = tnbc_no_bind,
	.control = tnbc_domain_control,
	.ops_open = tnbc_domain_ops_open,
};

static int tnbc_no_scalable_ep(struct fid_domain *d, struct fi_info *i,
			       struct fid_ep **ep, void *c)
{
	(void)d;
	(void)i;
	(void)ep;
	(void)c;
	return -FI_ENOSYS;
}

static int tnbc_no_poll_open(struct fid_domain *d, struct fi_poll_attr *a,
			     struct fid_poll **p)
{
	(void)d;
	(void)a;
	(void)p;
	return -FI_ENOSYS;
}

static int tnbc_no_stx(struct fid_domain *d, struct fi_tx_attr *a,
		       struct fid_stx **s, void *c)
{
	(void)d;
	(void)a;
	(void)s;
	(void)c;
	return -FI_ENOSYS;
}

static int tnbc_no_srx(struct fid_domain *d, struct fi_rx_attr *a,
		       struct fid_ep **s, void *c)
{
	(void)d;
	(void)a;
	(void)s;
	(void)c;
	return -FI_ENOSYS;
}

static int tnbc_endpoint2(struct fid_domain *d, struct fi_info *info,
			  struct fid_ep **ep, uint64_t flags, void *context)
{
	if (flags)
		return -FI_EINVAL;
	return tnbc_ep_open(d, info, ep, context);
}

static struct fi_ops_domain tnbc_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = tnbc_av_open,
	.cq_open = tnbc_cq_open,
	.endpoint = tnbc_ep_open,
	.scalable_ep = tnbc_no_scalable_ep,
	.cntr_open = tnbc_cntr_open,
	.poll_open = tnbc_no_poll_open,
	.stx_ctx = tnbc_no_stx,
	.srx_ctx = tnbc_no_srx,
	.query_atomic = tnbc_query_atomic,
	.query_collective = tnbc_coll_query,
	.endpoint2 = tnbc_endpoint2,
};

static struct fi_ops_mr tnbc_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = tnbc_mr_reg,
	.regv = tnbc_mr_regv,
	.regattr = tnbc_mr_regattr,
};

int tnbc_domain_open(struct fid_fabric *fabric, struct fi_info *info,
		     struct fid_domain **domain, void *context)
{
	struct tnbc_fabric *fab;
	struct tnbc_domain *dom;
	int ret;

	if (!fabric || !info || !domain)
		return -FI_EINVAL;
	if (!tnbc_env.xport)
		return -FI_ENODEV; /* FI_TNBC_XPORTS named none (logged) */
	if (info->domain_attr) {
		if (info->domain_attr->name &&
		    strcmp(info->domain_attr->name, TNBC_DOMAIN_NAME))
			return -FI_EINVAL;
		ret = tnbc_check_hints(info);
		if (ret)
			return -FI_EINVAL;
	}
	if (!tnbc_addr_format_ok(info->addr_format))
		return -FI_EINVAL;
	fab = tnbc_container_of(fabric, struct tnbc_fabric, fabric_fid);
	dom = calloc(1, sizeof(*dom));
	if (!dom)
		return -FI_ENOMEM;
	dom->fabric = fab;
	dom->addr_format = info->addr_format;
	dom->threading = info->domain_attr ? info->domain_attr->threading
					   : FI_THREAD_SAFE;
	dom->mr_mode = info->domain_attr ? info->domain_attr->mr_mode : 0;
	/* tnbc_check_hints bounded it */
	if (info->domain_attr && info->domain_attr->auth_key_size) {
		dom->auth_key_size = info->domain_attr->auth_key_size;
		memcpy(dom->auth_key, info->domain_attr->auth_key,
		       dom->auth_key_size);
	} else {
		tnbc_domain_job_key(dom);
	}
	tnbc_list_init(&dom->ep_list);
	atomic_init(&dom->next_mr_key, 1);
	atomic_init(&dom->engine.cpu, -1);
	ret = pthread_rwlock_init(&dom->ep_lock, NULL);
	if (ret) {
		ret = -FI_ENOMEM;
		goto err_free;
	}
	if (pthread_rwlock_init(&dom->mr_lock, NULL)) {
		ret = -FI_ENOMEM;
		goto err_lock;
	}
	if (pthread_mutex_init(&dom->atomic_lock, NULL)) {
		ret = -FI_ENOMEM;
		goto err_mr_lock;
	}
	if (pthread_mutex_init(&dom->mr_xlock, NULL)) {
		ret = -FI_ENOMEM;
		goto err_atomic_lock;
	}
	ret = tnbc_trig_domain_init(dom);
	if (ret)
		goto err_mr_xlock;
	ret = tnbc_domain_xports_open(dom);
	if (ret)
		goto err_trig;
	/* without the board, transfers still go, in this process's order */
	for (unsigned i = 0; i < dom->nxp; i++)
		if (!(dom->xp[i].ops->flags & TNBC_XPORT_LOCAL)) {
			dom->link = tnbc_link_join();
			break;
		}
	if (tnbc_env.engine) {
		ret = tnbc_engine_start(dom);
		if (ret)
			goto err_xdom;
	}
	dom->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom->domain_fid.fid.context = context;
	dom->domain_fid.fid.ops = &tnbc_domain_fi_ops;
	dom->domain_fid.ops = &tnbc_domain_ops;
	dom->domain_fid.mr = &tnbc_mr_ops;
	tnbc_prov_track(dom, true);
	atomic_fetch_add(&fab->ref, 1);
	*domain = &dom->domain_fid;
	return 0;

err_xdom:
	tnbc_domain_xports_close(dom, dom->nxp);
	tnbc_domain_sleep_close(dom);
	if (dom->link)
		tnbc_link_leave();
err_trig:
	tnbc_trig_domain_fini(dom);
err_mr_xlock:
	pthread_mutex_destroy(&dom->mr_xlock);
err_atomic_lock:
	pthread_mutex_destroy(&dom->atomic_lock);
err_mr_lock:
	pthread_rwlock_destroy(&dom->mr_lock);
err_lock:
	pthread_rwlock_destroy(&dom->ep_lock);
err_free:
	free(dom);
	return ret;
}
