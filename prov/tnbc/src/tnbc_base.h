/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What every part of the provider may use, transports included: the
 * provider itself (for logging), its runtime parameters, the clock,
 * iovec helpers and a free list.  No libfabric object and no wire
 * format lives here: a transport includes this and tnbc_xport.h, never
 * tnbc.h.
 */
#ifndef TNBC_BASE_H
#define TNBC_BASE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

/* ------------------------------------------------------------------ */
/* Intrusive doubly linked list.                                        */

struct tnbc_list {
	struct tnbc_list *next, *prev;
};

static inline void tnbc_list_init(struct tnbc_list *l)
{
	l->next = l->prev = l;
}

static inline bool tnbc_list_empty(const struct tnbc_list *l)
{
	return l->next == l;
}

static inline void tnbc_list_insert_tail(struct tnbc_list *item,
					 struct tnbc_list *head)
{
	item->prev = head->prev;
	item->next = head;
	head->prev->next = item;
	head->prev = item;
}

static inline void tnbc_list_remove(struct tnbc_list *item)
{
	item->prev->next = item->next;
	item->next->prev = item->prev;
	item->next = item->prev = item;
}

#define tnbc_container_of(ptr, type, field)                                    \
	((type *)((char *)(ptr)-offsetof(type, field)))

#define tnbc_list_foreach_safe(head, it, tmp)                                  \
	for ((it) = (head)->next, (tmp) = (it)->next; (it) != (head);          \
	     (it) = (tmp), (tmp) = (it)->next)

extern struct fi_provider tnbc_prov;

/* All runtime parameters, filled once by tnbc_param_read() (tnbc_param.c)
 * and documented in fi_tnbc(7). */
struct tnbc_env {
	size_t rx_slots; /* largest packets each receive queue holds */
	size_t slot_size; /* the largest packet, headers included */
	size_t eager_size; /* largest message sent eagerly */
	int cma; /* allow single-copy process_vm_readv */
	size_t unexp_pull; /* largest unexpected rendezvous pulled early */
	size_t spin_us; /* engine busy-poll before sleeping */
	size_t app_window_us; /* how long an app poll keeps peers quiet */
	int engine; /* run the engine thread at all */
	int engine_batch; /* the engine thread runs as SCHED_BATCH */
	int engine_shared; /* one engine thread for the process's domains */
	char *engine_cpus; /* hwloc list string, or NULL for automatic */
	char *xports; /* FI_TNBC_XPORTS as given */
	char *tcp_iface; /* address or interface TCP endpoints give peers */
	size_t tcp_timeout_ms; /* a silent TCP peer is dead after this */
	size_t tcp_eager_size; /* largest message sent eagerly over TCP */
	size_t tcp_hello_ms; /* a connection proves who it is within this */
	size_t tcp_strangers_max; /* unproven connections an ep holds */
	int job_key; /* a launcher's per-job secret as the default key */
	char *verbs_iface; /* address or interface of the verbs device */
	size_t verbs_timeout_ms; /* an unanswering verbs peer: dead */
	size_t verbs_mr_cache; /* registrations of user buffers kept */
	/* the transports a domain opens, those of xports this provider
	 * has, the one with a doorbell of its own first (TNBC_XPORTS_MAX
	 * at most) */
	const struct tnbc_xport_ops *xport_list[4];
	unsigned nxport;
	/* xport_list[0]; NULL when none (fi_getinfo then offers nothing) */
	const struct tnbc_xport_ops *xport;
	size_t unexp_max; /* bytes of unexpected messages one ep buffers */
	size_t coll_degree; /* children per member in collective trees */
	size_t coll_rsag_min; /* allreduce bytes from which: rs + ag */
	size_t coll_seg; /* bytes per segment of a tree's pipeline */
	int coll_slots; /* contributions on this host go into a slot */
	size_t coll_flat_max; /* group size up to which: one-hop allreduce */
	/* hosts up to which: leaders' one-hop allreduce (tnbc_alg_hosts) */
	size_t coll_flat_hosts;
	int coll_hosts; /* trees of hosts for groups that span several */
	char *coll_alg; /* FI_TNBC_COLL_ALG: algorithms pinned by name */
	size_t coll_plp_max; /* alltoall slice bytes up to which: PLP */
	size_t coll_plp_bytes; /* a PLP leader's bytes across, at most */
	size_t coll_plp_leaders; /* PLP's leaders per host; 0: by size */
	size_t coll_lss_above; /* alltoall slice bytes above which: LSS */
	int link_share; /* order off-host transfers with this host's others */
	size_t link_hold_ms; /* longest a neighbour's priority holds one */
	/* trust model: same user only, or also this group's members */
	char *shm_group_name;
	bool shm_group;
	gid_t shm_gid;
};

extern struct tnbc_env tnbc_env;

/* ------------------------------------------------------------------ */

static inline size_t tnbc_iov_len(const struct iovec *iov, size_t count)
{
	size_t len = 0;

	for (size_t i = 0; i < count; i++)
		len += iov[i].iov_len;
	return len;
}

/* Copies up to len bytes of src into the iovec array at byte offset
 * off; returns the number copied. */
size_t tnbc_copy_to_iov(const struct iovec *iov, size_t count, size_t off,
			const void *src, size_t len);
size_t tnbc_copy_from_iov(void *dst, const struct iovec *iov, size_t count,
			  size_t off, size_t len);
/* Builds in out[] the slice [off, off+len) of iov[]; returns its count. */
size_t tnbc_iov_slice(const struct iovec *iov, size_t count, size_t off,
		      size_t len, struct iovec *out, size_t out_max);

uint64_t tnbc_now_ns(void);
/* This host as shared memory sees one: this boot, its /dev/shm and its
 * pid namespace (pids are unique only within them). */
uint64_t tnbc_host_id(void);
/* Whether process pid of this host is there and not a zombie (a
 * killed process nobody reaped yet never answers either). */
bool tnbc_pid_alive(pid_t pid);
/* 64 bits nobody can predict; never 0 (0 marks a service name). */
uint64_t tnbc_nonce(void);
/* "ip:port" or "[ip6]:port" into an IP address of family AF_INET or
 * AF_INET6 (ip: 4 or 16 bytes) and a port in network order;
 * -FI_EINVAL where it is none, or IPv6 and allow6 is false. */
int tnbc_ip_scan(const char *text, bool allow6, int *family, void *ip,
		 uint16_t *port);
/* Whether the text of /proc/loadavg shows more runnable threads than
 * ncpu, the reader itself not counted (false when it cannot tell). */
bool tnbc_loadavg_oversubscribed(const char *loadavg, long ncpu);
/* CLOCK_REALTIME deadline ns from now, for pthread_cond_timedwait. */
void tnbc_abstime(struct timespec *ts, uint64_t ns);

/* ------------------------------------------------------------------ */
/* A bounded free list of one kind of object, for objects one thread
 * makes (the poster) and another frees (the engine): glibc's per-thread
 * caches do not carry them back.  A kept object's first pointer's worth
 * of bytes links the list; the rest stays as it was put.  Sanitizer
 * builds keep nothing, so that a use after free is still caught. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TNBC_FREELIST_KEEPS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TNBC_FREELIST_KEEPS 0
#endif
#endif
#ifndef TNBC_FREELIST_KEEPS
#define TNBC_FREELIST_KEEPS 1
#endif
struct tnbc_freelist {
	pthread_mutex_t lock;
	void *head;
	unsigned n, max;
};
#define TNBC_FREELIST_INIT(cap)                                                \
	{                                                                      \
		.lock = PTHREAD_MUTEX_INITIALIZER, .max = (cap)                \
	}
/* A kept object, or NULL. */
void *tnbc_freelist_get(struct tnbc_freelist *fl);
/* Keeps obj, unless the list is full: false, and obj is the caller's. */
bool tnbc_freelist_put(struct tnbc_freelist *fl, void *obj);
/* Hands every kept object to fini (the provider's cleanup). */
void tnbc_freelist_drain(struct tnbc_freelist *fl, void (*fini)(void *obj));

#endif /* TNBC_BASE_H */
