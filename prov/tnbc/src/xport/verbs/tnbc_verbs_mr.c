/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The verbs transport's memory registration cache: entries, most
 * recently used first, and the userfaultfd monitor that drops them when
 * their memory goes (see tnbc_verbs_mr.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tnbc_base.h"
#include "tnbc_verbs_mr.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

struct tnbc_verbs_mre {
	struct tnbc_verbs_mr pub;
	/* c->head..tail while cached (found by get) */
	struct tnbc_verbs_mre *prev, *next;
	uintptr_t start, end; /* whole pages */
	int access;
	unsigned refs; /* handles out */
	bool cached;
};

struct tnbc_verbs_mrc {
	struct ibv_pd *pd;
	size_t max;
	uintptr_t page;
	pthread_mutex_t lock; /* the list, refs, cached, st */
	struct tnbc_verbs_mre *head, *tail;
	int uffd; /* -1: nothing is kept */
	int stopfd;
	pthread_t monitor;
	bool running;
	struct tnbc_verbs_mrc_stats st;
};

static void tnbc_verbs_mre_unlink(struct tnbc_verbs_mrc *c,
				  struct tnbc_verbs_mre *m)
{
	if (m->prev)
		m->prev->next = m->next;
	else
		c->head = m->next;
	if (m->next)
		m->next->prev = m->prev;
	else
		c->tail = m->prev;
	m->prev = m->next = NULL;
	c->st.entries--;
}

static void tnbc_verbs_mre_push(struct tnbc_verbs_mrc *c,
				struct tnbc_verbs_mre *m)
{
	m->prev = NULL;
	m->next = c->head;
	if (c->head)
		c->head->prev = m;
	else
		c->tail = m;
	c->head = m;
	c->st.entries++;
}

static void tnbc_verbs_mre_free(struct tnbc_verbs_mre *m)
{
	ibv_dereg_mr(m->pub.mr);
	free(m);
}

/* Whether a cached entry still needs the monitor on [start, end);
 * c->lock held. */
static bool tnbc_verbs_mrc_watched(struct tnbc_verbs_mrc *c, uintptr_t start,
				   uintptr_t end)
{
	for (struct tnbc_verbs_mre *m = c->head; m; m = m->next)
		if (m->start < end && start < m->end)
			return true;
	return false;
}

static void tnbc_verbs_unwatch(struct tnbc_verbs_mrc *c, uintptr_t start,
			       uintptr_t end)
{
	struct uffdio_range r = {.start = start, .len = end - start};

	/* a range partly unmapped already is refused: nothing to do */
	(void)ioctl(c->uffd, UFFDIO_UNREGISTER, &r);
}

/* Takes the entries that overlap [start, end) out of the cache; those
 * no handle holds are freed.  The monitor's. */
static void tnbc_verbs_mrc_drop(struct tnbc_verbs_mrc *c, uintptr_t start,
				uintptr_t end, bool unwatch)
{
	struct tnbc_verbs_mre *m, *next, *dead = NULL;

	pthread_mutex_lock(&c->lock);
	for (m = c->head; m; m = next) {
		next = m->next;
		if (m->end <= start || end <= m->start)
			continue;
		tnbc_verbs_mre_unlink(c, m);
		m->cached = false;
		c->st.invalidated++;
		if (unwatch && !tnbc_verbs_mrc_watched(c, m->start, m->end))
			tnbc_verbs_unwatch(c, m->start, m->end);
		if (!m->refs) {
			m->next = dead;
			dead = m;
		}
	}
	pthread_mutex_unlock(&c->lock);
	while (dead) {
		next = dead->next;
		tnbc_verbs_mre_free(dead);
		dead = next;
	}
}

/* Reads the monitor's events.  An unmapping, moving or discarding
 * thread waits in the kernel until its event is read here; a thread
 * that touches a discarded page of a watched range waits until the
 * range is no longer watched. */
static void *tnbc_verbs_mrc_monitor(void *arg)
{
	struct tnbc_verbs_mrc *c = arg;
	struct pollfd pfd[2] = {{.fd = c->uffd, .events = POLLIN},
				{.fd = c->stopfd, .events = POLLIN}};

	for (;;) {
		struct uffd_msg msg[16];
		ssize_t n;

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		n = read(c->uffd, msg, sizeof(msg));
		if (n < 0)
			continue;
		for (size_t i = 0; i < (size_t)n / sizeof(msg[0]); i++) {
			uintptr_t s, e;

			switch (msg[i].event) {
			case UFFD_EVENT_UNMAP:
				tnbc_verbs_mrc_drop(c, msg[i].arg.remove.start,
						    msg[i].arg.remove.end,
						    false);
				break;
			case UFFD_EVENT_REMOVE:
				s = msg[i].arg.remove.start;
				e = msg[i].arg.remove.end;
				tnbc_verbs_mrc_drop(c, s, e, true);
				tnbc_verbs_unwatch(c, s, e);
				break;
			case UFFD_EVENT_REMAP:
				s = msg[i].arg.remap.from;
				e = s + msg[i].arg.remap.len;
				tnbc_verbs_mrc_drop(c, s, e, false);
				/* the watch moved with the mapping */
				s = msg[i].arg.remap.to;
				tnbc_verbs_unwatch(c, s,
						   s + msg[i].arg.remap.len);
				break;
			case UFFD_EVENT_PAGEFAULT:
				/* a page discarded since: let it fault in
				 * as usual (unwatching wakes the thread) */
				s = msg[i].arg.pagefault.address &
				    ~(c->page - 1);
				tnbc_verbs_unwatch(c, s, s + c->page);
				tnbc_verbs_mrc_drop(c, s, s + c->page, true);
				break;
			default:
				break;
			}
		}
	}
	return NULL;
}

static int tnbc_verbs_uffd_open(void)
{
	struct uffdio_api api = {.api = UFFD_API,
				 .features = UFFD_FEATURE_EVENT_UNMAP |
					     UFFD_FEATURE_EVENT_REMOVE |
					     UFFD_FEATURE_EVENT_REMAP};
	int fd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0 && errno == EPERM) /* vm.unprivileged_userfaultfd=0 */
		fd = (int)syscall(__NR_userfaultfd,
				  O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, UFFDIO_API, &api)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

int tnbc_verbs_mrc_open(struct tnbc_verbs_mrc **out, struct ibv_pd *pd,
			size_t max)
{
	struct tnbc_verbs_mrc *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -FI_ENOMEM;
	c->pd = pd;
	c->max = max;
	c->page = (uintptr_t)sysconf(_SC_PAGESIZE);
	c->uffd = -1;
	c->stopfd = -1;
	pthread_mutex_init(&c->lock, NULL);
	if (max) {
		c->uffd = tnbc_verbs_uffd_open();
		if (c->uffd < 0) {
			FI_INFO(&tnbc_prov, FI_LOG_DOMAIN,
				"verbs: no registration cache (userfaultfd: "
				"%s)\n",
				strerror(-c->uffd));
			c->uffd = -1;
		}
	}
	if (c->uffd >= 0) {
		c->stopfd = eventfd(0, EFD_CLOEXEC);
		ret = c->stopfd < 0 ? errno
				    : pthread_create(&c->monitor, NULL,
						     tnbc_verbs_mrc_monitor, c);
		if (ret) {
			FI_INFO(&tnbc_prov, FI_LOG_DOMAIN,
				"verbs: no registration cache: %s\n",
				strerror(ret));
			close(c->uffd);
			c->uffd = -1;
		} else {
			c->running = true;
		}
	}
	*out = c;
	return 0;
}

void tnbc_verbs_mrc_close(struct tnbc_verbs_mrc *c)
{
	uint64_t one = 1;

	if (c->running) {
		if (write(c->stopfd, &one, sizeof(one)) != sizeof(one))
			FI_WARN(&tnbc_prov, FI_LOG_DOMAIN,
				"verbs: the registration monitor was not "
				"told to stop\n");
		pthread_join(c->monitor, NULL);
	}
	while (c->head) {
		struct tnbc_verbs_mre *m = c->head;

		tnbc_verbs_mre_unlink(c, m);
		tnbc_verbs_mre_free(m);
	}
	if (c->uffd >= 0)
		close(c->uffd); /* drops every watch */
	if (c->stopfd >= 0)
		close(c->stopfd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Makes room for one more entry; c->lock held.  Returns the entries to
 * free (no handle holds them). */
static struct tnbc_verbs_mre *tnbc_verbs_mrc_evict(struct tnbc_verbs_mrc *c)
{
	struct tnbc_verbs_mre *m = c->tail, *dead = NULL;

	while (m && c->st.entries >= c->max) {
		struct tnbc_verbs_mre *prev = m->prev;

		if (!m->refs) {
			tnbc_verbs_mre_unlink(c, m);
			m->cached = false;
			c->st.evicted++;
			if (!tnbc_verbs_mrc_watched(c, m->start, m->end))
				tnbc_verbs_unwatch(c, m->start, m->end);
			m->next = dead;
			dead = m;
		}
		m = prev;
	}
	return dead;
}

struct tnbc_verbs_mr *tnbc_verbs_mr_get(struct tnbc_verbs_mrc *c, void *addr,
					size_t len, int access)
{
	uintptr_t a = (uintptr_t)addr, e = a + len;
	struct tnbc_verbs_mre *m, *dead = NULL;
	struct uffdio_register reg;

	if (!len || e < a) {
		errno = EINVAL;
		return NULL;
	}
	if (c->uffd >= 0) {
		pthread_mutex_lock(&c->lock);
		for (m = c->head; m; m = m->next) {
			if (m->start > a || e > m->end ||
			    (m->access & access) != access)
				continue;
			if (m != c->head) {
				tnbc_verbs_mre_unlink(c, m);
				tnbc_verbs_mre_push(c, m);
			}
			m->refs++;
			c->st.hits++;
			pthread_mutex_unlock(&c->lock);
			return &m->pub;
		}
		pthread_mutex_unlock(&c->lock);
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->start = a & ~(c->page - 1);
	m->end = (e + c->page - 1) & ~(c->page - 1);
	m->refs = 1;
	/* both rights where the pages allow, so that one entry serves
	 * sending and receiving; read-only pages take what was asked */
	m->access = access | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	m->pub.mr = ibv_reg_mr(c->pd, (void *)m->start, m->end - m->start,
			       m->access);
	if (!m->pub.mr && m->access != access) {
		m->access = access;
		m->pub.mr = ibv_reg_mr(c->pd, (void *)m->start,
				       m->end - m->start, access);
	}
	if (!m->pub.mr) {
		int err = errno;

		free(m);
		errno = err;
		return NULL;
	}
	reg.range.start = m->start;
	reg.range.len = m->end - m->start;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	m->cached = c->uffd >= 0 && !ioctl(c->uffd, UFFDIO_REGISTER, &reg);
	pthread_mutex_lock(&c->lock);
	c->st.misses++;
	if (m->cached) {
		dead = tnbc_verbs_mrc_evict(c);
		tnbc_verbs_mre_push(c, m);
	} else {
		c->st.uncached++;
	}
	pthread_mutex_unlock(&c->lock);
	while (dead) {
		struct tnbc_verbs_mre *next = dead->next;

		tnbc_verbs_mre_free(dead);
		dead = next;
	}
	return &m->pub;
}

void tnbc_verbs_mr_put(struct tnbc_verbs_mrc *c, struct tnbc_verbs_mr *h)
{
	struct tnbc_verbs_mre *m = (struct tnbc_verbs_mre *)h;
	bool last;

	pthread_mutex_lock(&c->lock);
	last = !--m->refs && !m->cached;
	pthread_mutex_unlock(&c->lock);
	if (last)
		tnbc_verbs_mre_free(m);
}

void tnbc_verbs_mrc_stats(struct tnbc_verbs_mrc *c,
			  struct tnbc_verbs_mrc_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->st;
	pthread_mutex_unlock(&c->lock);
}
