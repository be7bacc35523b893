/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The verbs transport's memory registration cache (private to
 * xport/verbs/).
 *
 * A registration pins pages and costs a system call, so registrations
 * of user buffers outlive the transfer that made them, up to a number
 * of entries.  One kept past the memory it names would read the pages
 * the buffer had before the application freed it: a userfaultfd
 * monitor hears of every unmap, move and discard of a cached range
 * (UFFD_EVENT_UNMAP, _REMAP, _REMOVE) before the call that made it
 * returns, and drops the entries it touches.  A range the monitor
 * cannot watch (no userfaultfd here, a mapping it does not take, a
 * range another userfaultfd watches) is registered for one transfer
 * only.
 *
 * Threading: get and put from any thread; the cache's lock covers the
 * entries, and the monitor thread takes it too.  Nothing is called
 * under it that could unmap a watched range (the monitor would wait
 * for the lock while the unmapping thread waits for the monitor).
 */
#ifndef TNBC_VERBS_MR_H
#define TNBC_VERBS_MR_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

struct tnbc_verbs_mrc;

/* A registration handed out by get: mr covers what was asked for. */
struct tnbc_verbs_mr {
	struct ibv_mr *mr;
};

struct tnbc_verbs_mrc_stats {
	uint64_t hits, misses; /* get found an entry, or registered */
	uint64_t uncached; /* registered for one transfer only */
	uint64_t invalidated; /* entries dropped by the monitor */
	uint64_t evicted; /* dropped to make room */
	size_t entries;
};

/* A cache of at most max entries (0: none kept, every get registers)
 * for registrations in pd. */
int tnbc_verbs_mrc_open(struct tnbc_verbs_mrc **c, struct ibv_pd *pd,
			size_t max);
/* Every handle must have been put back. */
void tnbc_verbs_mrc_close(struct tnbc_verbs_mrc *c);
/* A registration covering [addr, addr + len) with at least access
 * (IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_READ); NULL with errno set
 * when the device refuses. */
struct tnbc_verbs_mr *tnbc_verbs_mr_get(struct tnbc_verbs_mrc *c, void *addr,
					size_t len, int access);
void tnbc_verbs_mr_put(struct tnbc_verbs_mrc *c, struct tnbc_verbs_mr *m);
void tnbc_verbs_mrc_stats(struct tnbc_verbs_mrc *c,
			  struct tnbc_verbs_mrc_stats *st);

#endif /* TNBC_VERBS_MR_H */
