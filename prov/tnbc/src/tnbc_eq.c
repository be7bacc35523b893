/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Event queue.  RDM endpoints produce no connection events; the EQ holds
 * what the application writes and asynchronous AV completions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tnbc.h"
#include "tnbc_unsupp.h"
#include "tnbc_eq.h"

static ssize_t tnbc_eq_read_common(struct tnbc_eq *eq, uint32_t *event,
				   void *buf, size_t len, uint64_t flags,
				   int timeout)
{
	struct tnbc_eq_item *item;
	struct timespec ts;
	ssize_t ret;

	if ((!buf && len) || (flags & ~(uint64_t)FI_PEEK))
		return -FI_EINVAL;
	if (!timeout &&
	    !atomic_load_explicit(&eq->nitems, memory_order_acquire))
		return -FI_EAGAIN;
	pthread_mutex_lock(&eq->lock);
	if (timeout != 0) {
		if (timeout > 0)
			tnbc_abstime(&ts, (uint64_t)timeout * 1000000u);
		while (tnbc_list_empty(&eq->items)) {
			int rc = timeout < 0 ? pthread_cond_wait(&eq->cond,
								 &eq->lock)
					     : pthread_cond_timedwait(&eq->cond,
								      &eq->lock,
								      &ts);
			if (rc == ETIMEDOUT)
				break;
		}
	}
	if (tnbc_list_empty(&eq->items)) {
		ret = -FI_EAGAIN;
		goto out;
	}
	item = tnbc_container_of(eq->items.next, struct tnbc_eq_item, entry);
	if (item->is_err) {
		ret = -FI_EAVAIL;
		goto out;
	}
	/* A short buffer gets what fits, as libfabric's own EQs do: an
	 * event that carries nothing the reader needs (a join's, for
	 * fabtests) is read with no buffer at all. */
	if (len > item->len)
		len = item->len;
	if (event)
		*event = item->event;
	if (len)
		memcpy(buf, item->u.raw, len);
	ret = (ssize_t)len;
	if (!(flags & FI_PEEK)) {
		tnbc_list_remove(&item->entry);
		atomic_fetch_sub_explicit(&eq->nitems, 1, memory_order_relaxed);
		free(item);
	}
out:
	pthread_mutex_unlock(&eq->lock);
	return ret;
}

static ssize_t tnbc_eq_read(struct fid_eq *fid, uint32_t *event, void *buf,
			    size_t len, uint64_t flags)
{
	struct tnbc_eq *eq = tnbc_container_of(fid, struct tnbc_eq, eq_fid);

	return tnbc_eq_read_common(eq, event, buf, len, flags, 0);
}

static ssize_t tnbc_eq_sread(struct fid_eq *fid, uint32_t *event, void *buf,
			     size_t len, int timeout, uint64_t flags)
{
	struct tnbc_eq *eq = tnbc_container_of(fid, struct tnbc_eq, eq_fid);

	if (eq->wait_obj == FI_WAIT_NONE)
		return -FI_EINVAL;
	return tnbc_eq_read_common(eq, event, buf, len, flags,
				   timeout ? timeout : 1);
}

static ssize_t tnbc_eq_readerr(struct fid_eq *fid, struct fi_eq_err_entry *buf,
			       uint64_t flags)
{
	struct tnbc_eq *eq = tnbc_container_of(fid, struct tnbc_eq, eq_fid);
	struct tnbc_eq_item *item;
	ssize_t ret = -FI_EAGAIN;

	if (!buf || (flags & ~(uint64_t)FI_PEEK))
		return -FI_EINVAL;
	if (!atomic_load_explicit(&eq->nitems, memory_order_acquire))
		return -FI_EAGAIN;
	pthread_mutex_lock(&eq->lock);
	if (!tnbc_list_empty(&eq->items)) {
		item = tnbc_container_of(eq->items.next, struct tnbc_eq_item,
					 entry);
		if (item->is_err) {
			*buf = item->u.err;
			ret = sizeof(*buf);
			if (!(flags & FI_PEEK)) {
				tnbc_list_remove(&item->entry);
				atomic_fetch_sub_explicit(&eq->nitems, 1,
							  memory_order_relaxed);
				free(item);
			}
		}
	}
	pthread_mutex_unlock(&eq->lock);
	return ret;
}

int tnbc_eq_post(struct tnbc_eq *eq, uint32_t event, const void *buf,
		 size_t len, bool is_err)
{
	struct tnbc_eq_item *item = calloc(1, sizeof(*item));

	if (!item)
		return -FI_ENOMEM;
	item->event = event;
	item->is_err = is_err;
	item->len = len;
	if (len)
		memcpy(item->u.raw, buf, len);
	pthread_mutex_lock(&eq->lock);
	tnbc_list_insert_tail(&item->entry, &eq->items);
	atomic_fetch_add_explicit(&eq->nitems, 1, memory_order_release);
	pthread_cond_broadcast(&eq->cond);
	pthread_mutex_unlock(&eq->lock);
	return 0;
}

static ssize_t tnbc_eq_write(struct fid_eq *fid, uint32_t event,
			     const void *buf, size_t len, uint64_t flags)
{
	struct tnbc_eq *eq = tnbc_container_of(fid, struct tnbc_eq, eq_fid);
	int ret;

	if ((!buf && len) || len > sizeof(((struct tnbc_eq_item *)0)->u.raw) ||
	    flags)
		return -FI_EINVAL;
	ret = tnbc_eq_post(eq, event, buf, len, false);
	return ret ? ret : (ssize_t)len;
}

static const char *tnbc_eq_strerror(struct fid_eq *fid, int prov_errno,
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

static int tnbc_eq_close(struct fid *fid)
{
	struct tnbc_eq *eq = tnbc_container_of(fid, struct tnbc_eq, eq_fid.fid);
	struct tnbc_list *it, *tmp;

	if (atomic_load(&eq->ref))
		return -FI_EBUSY;
	tnbc_list_foreach_safe (&eq->items, it, tmp)
		free(tnbc_container_of(it, struct tnbc_eq_item, entry));
	atomic_fetch_sub(&eq->fabric->ref, 1);
	pthread_cond_destroy(&eq->cond);
	pthread_mutex_destroy(&eq->lock);
	free(eq);
	return 0;
}

static int tnbc_eq_control(struct fid *fid, int command, void *arg)
{
	(void)fid;
	(void)arg;
	return command == FI_GETWAIT ? -FI_ENODATA : -FI_ENOSYS;
}

static struct fi_ops tnbc_eq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = tnbc_eq_close,
	.bind = tnbc_no_bind,
	.control = tnbc_eq_control,
	.ops_open = tnbc_no_ops_open,
};

static struct fi_ops_eq tnbc_eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = tnbc_eq_read,
	.readerr = tnbc_eq_readerr,
	.write = tnbc_eq_write,
	.sread = tnbc_eq_sread,
	.strerror = tnbc_eq_strerror,
};

int tnbc_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		 struct fid_eq **eq_out, void *context)
{
	struct tnbc_fabric *fab;
	struct tnbc_eq *eq;

	if (!fabric || !attr || !eq_out)
		return -FI_EINVAL;
	if (attr->flags & ~(uint64_t)FI_WRITE)
		return -FI_EINVAL;
	switch (attr->wait_obj) {
	case FI_WAIT_NONE:
	case FI_WAIT_UNSPEC:
	case FI_WAIT_MUTEX_COND:
	case FI_WAIT_YIELD:
		break;
	default:
		return -FI_ENOSYS;
	}
	fab = tnbc_container_of(fabric, struct tnbc_fabric, fabric_fid);
	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -FI_ENOMEM;
	eq->fabric = fab;
	eq->wait_obj = attr->wait_obj;
	pthread_mutex_init(&eq->lock, NULL);
	pthread_cond_init(&eq->cond, NULL);
	tnbc_list_init(&eq->items);
	eq->eq_fid.fid.fclass = FI_CLASS_EQ;
	eq->eq_fid.fid.context = context;
	eq->eq_fid.fid.ops = &tnbc_eq_fi_ops;
	eq->eq_fid.ops = &tnbc_eq_ops;
	atomic_fetch_add(&fab->ref, 1);
	*eq_out = &eq->eq_fid;
	return 0;
}
