/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Completion queue.  Completions are stored in one generic form and
 * converted to the CQ's format when read.  The ring grows instead of
 * overrunning: a completion is never dropped.  Error completions queue
 * separately; while any is pending, reads return -FI_EAVAIL.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <sched.h>

#include "tnbc.h"
#include "tnbc_comp.h"
#include "tnbc_unsupp.h"
#include "tnbc_progress.h"

static size_t tnbc_cq_entry_size(enum fi_cq_format format)
{
	switch (format) {
	case FI_CQ_FORMAT_CONTEXT:
		return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return 0;
	}
}

/* cq->lock held; entries or errors were taken */
static void tnbc_cq_unnotify(struct tnbc_cq *cq)
{
	atomic_store_explicit(&cq->avail,
			      cq->count || !tnbc_list_empty(&cq->err_list),
			      memory_order_relaxed);
	if (cq->efd >= 0 && atomic_load(&cq->signaled) && !cq->count &&
	    tnbc_list_empty(&cq->err_list)) {
		uint64_t v;

		if (read(cq->efd, &v, sizeof(v)) == sizeof(v) ||
		    errno == EAGAIN)
			atomic_store(&cq->signaled, false);
	}
}

static void tnbc_cq_copy(struct tnbc_cq *cq, void *dst,
			 const struct tnbc_cq_slot *s)
{
	switch (cq->format) {
	case FI_CQ_FORMAT_CONTEXT: {
		struct fi_cq_entry *e = dst;

		e->op_context = s->e.op_context;
		break;
	}
	case FI_CQ_FORMAT_MSG: {
		struct fi_cq_msg_entry *e = dst;

		e->op_context = s->e.op_context;
		e->flags = s->e.flags;
		e->len = s->e.len;
		break;
	}
	case FI_CQ_FORMAT_DATA: {
		struct fi_cq_data_entry *e = dst;

		e->op_context = s->e.op_context;
		e->flags = s->e.flags;
		e->len = s->e.len;
		e->buf = s->e.buf;
		e->data = s->e.data;
		break;
	}
	default:
		*(struct fi_cq_tagged_entry *)dst = s->e;
		break;
	}
}

/* Copies entries of the application's queue to buf from index n on;
 * returns the new n.  Application threads only. */
static ssize_t tnbc_cq_aq_read(struct tnbc_cq *cq, void *buf, size_t count,
			       fi_addr_t *src_addr, size_t n)
{
	size_t esize = tnbc_cq_entry_size(cq->format);

	if (!cq->app_queue)
		return (ssize_t)n;
	while (n < count && cq->aq_count) {
		const struct tnbc_cq_slot *s = &cq->aq[cq->aq_head];

		tnbc_cq_copy(cq, (uint8_t *)buf + n * esize, s);
		if (src_addr)
			src_addr[n] = s->src;
		cq->aq_head = (cq->aq_head + 1) & (cq->aq_size - 1);
		cq->aq_count--;
		n++;
	}
	return (ssize_t)n;
}

static ssize_t tnbc_cq_readfrom(struct fid_cq *fid, void *buf, size_t count,
				fi_addr_t *src_addr)
{
	struct tnbc_cq *cq = tnbc_container_of(fid, struct tnbc_cq, cq_fid);
	size_t esize = tnbc_cq_entry_size(cq->format);
	ssize_t n = 0;

	if (!buf && count)
		return -FI_EINVAL;
	/* Progress only for a read that would otherwise find nothing: an
	 * application drains a queue and answers what it read only after,
	 * and a progress call in between asks every TCP socket (a system
	 * call, 1 to 2 us in a virtual machine).  The read that finds the
	 * queue empty progresses.  (Skipping that one too, once after each
	 * read that returned entries, made Open MPI's one-sided tests 7
	 * times slower at 8 ranks on 2 cores: each skipped read made its
	 * caller yield the core.) */
	if (!atomic_load_explicit(&cq->avail, memory_order_relaxed) &&
	    !(cq->app_queue && cq->aq_count))
		tnbc_domain_progress(cq->domain, false);
	/* An empty poll, the common one, takes no lock: an entry queued
	 * meanwhile is read by the next poll.  A signaled wait fd with
	 * nothing queued still needs the lock, to be drained. */
	if (!atomic_load_explicit(&cq->avail, memory_order_relaxed) &&
	    !atomic_load_explicit(&cq->signaled, memory_order_relaxed)) {
		n = tnbc_cq_aq_read(cq, buf, count, src_addr, 0);
		if (n)
			return n;
		n = -FI_EAGAIN;
		goto yield;
	}
	pthread_mutex_lock(&cq->lock);
	if (!tnbc_list_empty(&cq->err_list)) {
		n = -FI_EAVAIL;
		goto out;
	}
	while ((size_t)n < count && cq->count) {
		const struct tnbc_cq_slot *s = &cq->ring[cq->head];

		tnbc_cq_copy(cq, (uint8_t *)buf + (size_t)n * esize, s);
		if (src_addr)
			src_addr[n] = s->src;
		cq->head = (cq->head + 1) & (cq->ring_size - 1);
		cq->count--;
		n++;
	}
	/* the engine's entries and the application's are concurrent: any
	 * interleaving is an order they could have completed in */
	n = tnbc_cq_aq_read(cq, buf, count, src_addr, (size_t)n);
	if (!n)
		n = -FI_EAGAIN;
	tnbc_cq_unnotify(cq);
out:
	pthread_mutex_unlock(&cq->lock);
yield:
	/* On an oversubscribed host, the peer that must answer a
	 * rendezvous send or an RMA operation may be waiting for this
	 * core: a caller that spins on an empty queue without yielding (an
	 * MPI library waiting for a blocking send does) would keep it from
	 * the peer for a whole time slice. */
	if (n == -FI_EAGAIN &&
	    atomic_load_explicit(&cq->domain->engine.host_busy,
				 memory_order_relaxed) &&
	    atomic_load_explicit(&cq->domain->engine.peer_waits,
				 memory_order_relaxed) > 0)
		sched_yield();
	return n;
}

static ssize_t tnbc_cq_read(struct fid_cq *fid, void *buf, size_t count)
{
	return tnbc_cq_readfrom(fid, buf, count, NULL);
}

static ssize_t tnbc_cq_readerr(struct fid_cq *fid, struct fi_cq_err_entry *buf,
			       uint64_t flags)
{
	struct tnbc_cq *cq = tnbc_container_of(fid, struct tnbc_cq, cq_fid);
	struct tnbc_cq_err *e;
	void *user_err_data;

	if (!buf || flags)
		return -FI_EINVAL;
	pthread_mutex_lock(&cq->lock);
	if (tnbc_list_empty(&cq->err_list)) {
		pthread_mutex_unlock(&cq->lock);
		return -FI_EAGAIN;
	}
	e = tnbc_container_of(cq->err_list.next, struct tnbc_cq_err, entry);
	tnbc_list_remove(&e->entry);
	tnbc_cq_unnotify(cq);
	pthread_mutex_unlock(&cq->lock);

	/* tnbc attaches no provider error data; keep the caller's buffer
	 * fields intact as fi_cq_readerr(3) asks for API >= 1.5. */
	user_err_data = buf->err_data;
	*buf = e->err;
	buf->err_data = user_err_data;
	buf->err_data_size = 0;
	free(e);
	return 1;
}

static ssize_t tnbc_cq_sreadfrom(struct fid_cq *fid, void *buf, size_t count,
				 fi_addr_t *src_addr, const void *cond,
				 int timeout)
{
	struct tnbc_cq *cq = tnbc_container_of(fid, struct tnbc_cq, cq_fid);
	size_t threshold = 1;
	uint64_t deadline = 0;
	ssize_t ret;

	if (cq->wait_obj == FI_WAIT_NONE)
		return -FI_EINVAL;
	if (cq->wait_cond == FI_CQ_COND_THRESHOLD && cond)
		threshold = (size_t)(uintptr_t)cond;
	if (threshold > count)
		threshold = count ? count : 1;
	if (timeout >= 0)
		deadline = tnbc_now_ns() + (uint64_t)timeout * 1000000u;
	for (;;) {
		struct timespec ts;
		uint64_t slice;
		bool ready;

		tnbc_domain_progress(cq->domain, false);
		pthread_mutex_lock(&cq->lock);
		ready = cq->count >= threshold ||
			!tnbc_list_empty(&cq->err_list);
		if (!ready && cq->kicked) {
			cq->kicked = false;
			pthread_mutex_unlock(&cq->lock);
			return -FI_EAGAIN;
		}
		if (!ready) {
			if (deadline && tnbc_now_ns() >= deadline) {
				pthread_mutex_unlock(&cq->lock);
				return -FI_EAGAIN;
			}
			/* The engine signals the condition when it writes a
			 * completion; the slice bounds the wait so a caller
			 * also progresses when the engine is disabled. */
			slice = cq->domain->engine.running ? 10000000u
							   : 100000u;
			tnbc_abstime(&ts, slice);
			pthread_mutex_unlock(&cq->lock);
			tnbc_app_wait(cq->domain, true);
			pthread_mutex_lock(&cq->lock);
			if (cq->count < threshold &&
			    tnbc_list_empty(&cq->err_list) && !cq->kicked)
				pthread_cond_timedwait(&cq->cond, &cq->lock,
						       &ts);
			pthread_mutex_unlock(&cq->lock);
			tnbc_app_wait(cq->domain, false);
			continue;
		}
		pthread_mutex_unlock(&cq->lock);
		if (!ready)
			continue;
		ret = tnbc_cq_readfrom(fid, buf, count, src_addr);
		if (ret != -FI_EAGAIN)
			return ret;
	}
}

static ssize_t tnbc_cq_sread(struct fid_cq *fid, void *buf, size_t count,
			     const void *cond, int timeout)
{
	return tnbc_cq_sreadfrom(fid, buf, count, NULL, cond, timeout);
}

static int tnbc_cq_signal(struct fid_cq *fid)
{
	struct tnbc_cq *cq = tnbc_container_of(fid, struct tnbc_cq, cq_fid);

	pthread_mutex_lock(&cq->lock);
	cq->kicked = true;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

static const char *tnbc_cq_strerror(struct fid_cq *fid, int prov_errno,
				    const void *err_data, char *buf, size_t len)
{
	(void)fid;
	(void)err_data;
	if (buf && len) {
		snprintf(buf, len, "%s", fi_strerror(prov_errno));
		return buf;
	}
	return fi_strerror(prov_errno);
}

static int tnbc_cq_close(struct fid *fid)
{
	struct tnbc_cq *cq = tnbc_container_of(fid, struct tnbc_cq, cq_fid.fid);
	struct tnbc_list *it, *tmp;

	if (atomic_load(&cq->ref))
		return -FI_EBUSY;
	tnbc_list_foreach_safe (&cq->err_list, it, tmp)
		free(tnbc_container_of(it, struct tnbc_cq_err, entry));
	if (cq->efd >= 0)
		close(cq->efd);
	free(cq->ring);
	free(cq->aq);
	atomic_fetch_sub(&cq->domain->ref, 1);
	pthread_cond_destroy(&cq->cond);
	pthread_mutex_destroy(&cq->lock);
	free(cq);
	return 0;
}

static int tnbc_cq_control(struct fid *fid, int command, void *arg)
{
	struct tnbc_cq *cq = tnbc_container_of(fid, struct tnbc_cq, cq_fid.fid);

	switch (command) {
	case FI_GETWAIT:
		if (cq->efd < 0 || !arg)
			return -FI_ENODATA;
		*(int *)arg = cq->efd;
		return 0;
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *)arg = cq->wait_obj;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static struct fi_ops tnbc_cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_cq_close,
	.bind = tnbc_no_bind,
	.control = tnbc_cq_control,
	.ops_open = tnbc_no_ops_open,
};

static struct fi_ops_cq tnbc_cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = tnbc_cq_read,
	.readfrom = tnbc_cq_readfrom,
	.readerr = tnbc_cq_readerr,
	.sread = tnbc_cq_sread,
	.sreadfrom = tnbc_cq_sreadfrom,
	.signal = tnbc_cq_signal,
	.strerror = tnbc_cq_strerror,
};

bool tnbc_cq_has_entries(struct tnbc_cq *cq)
{
	bool ret;

	pthread_mutex_lock(&cq->lock);
	ret = cq->count || !tnbc_list_empty(&cq->err_list);
	pthread_mutex_unlock(&cq->lock);
	/* an application call: the application's queue is its own */
	return ret || (cq->app_queue && cq->aq_count);
}

int tnbc_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		 struct fid_cq **cq_out, void *context)
{
	struct tnbc_domain *dom;
	struct tnbc_cq *cq;
	int ret;

	if (!domain || !attr || !cq_out)
		return -FI_EINVAL;
	if (attr->format == FI_CQ_FORMAT_UNSPEC)
		attr->format = FI_CQ_FORMAT_CONTEXT;
	if (!tnbc_cq_entry_size(attr->format))
		return -FI_ENOSYS;
	if (attr->flags & ~(uint64_t)FI_AFFINITY)
		return -FI_EINVAL;
	if (attr->wait_cond != FI_CQ_COND_NONE &&
	    attr->wait_cond != FI_CQ_COND_THRESHOLD)
		return -FI_EINVAL;
	switch (attr->wait_obj) {
	case FI_WAIT_NONE:
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
	case FI_WAIT_MUTEX_COND:
	case FI_WAIT_YIELD:
		break;
	default:
		return -FI_ENOSYS;
	}
	dom = tnbc_container_of(domain, struct tnbc_domain, domain_fid);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->domain = dom;
	cq->format = attr->format;
	cq->wait_obj = attr->wait_obj;
	cq->app_queue = dom->threading == FI_THREAD_DOMAIN &&
			attr->wait_obj == FI_WAIT_NONE;
	cq->wait_cond = attr->wait_cond;
	cq->efd = -1;
	/* a power of two, and only a start: the ring grows as it fills */
	cq->ring_size = TNBC_DEF_CQ_SIZE;
	while (cq->ring_size < attr->size && cq->ring_size < TNBC_CQ_START_MAX)
		cq->ring_size *= 2;
	cq->ring = malloc(cq->ring_size * sizeof(*cq->ring));
	if (!cq->ring) {
		ret = -FI_ENOMEM;
		goto err_free;
	}
	if (attr->wait_obj == FI_WAIT_FD) {
		cq->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (cq->efd < 0) {
			ret = -errno;
			goto err_ring;
		}
	}
	tnbc_list_init(&cq->err_list);
	pthread_mutex_init(&cq->lock, NULL);
	pthread_cond_init(&cq->cond, NULL);
	cq->cq_fid.fid.fclass = FI_CLASS_CQ;
	cq->cq_fid.fid.context = context;
	cq->cq_fid.fid.ops = &tnbc_cq_fi_ops;
	cq->cq_fid.ops = &tnbc_cq_ops;
	atomic_fetch_add(&dom->ref, 1);
	*cq_out = &cq->cq_fid;
	return 0;

err_ring:
	free(cq->ring);
err_free:
	free(cq);
	return ret;
}
