/*
 * tnbc: a libfabric provider with a software progress engine ("soft NIC").
 *
 * Design
 * ------
 * Objects follow libfabric's hierarchy: fabric > domain > {av, cq, cntr,
 * mr, ep}.  Each domain owns one transport domain (struct tnbc_xdom, see
 * tnbc_xport.h) and one progress engine thread.  Each endpoint owns one
 * transport receive queue.  The protocol (tag matching, eager, rendezvous
 * with single-copy pull or streamed bounce buffers, completions) lives in
 * tnbc_msg.c and tnbc_progress.c and never sees transport internals.
 *
 * Progress is FI_PROGRESS_AUTO.  Two kinds of threads drive it:
 *  - the domain's engine thread, which polls every endpoint, spins for a
 *    short while after the last activity and then sleeps on the transport
 *    doorbell, which peers ring when they queue a packet for it;
 *  - application threads, which progress their endpoints opportunistically
 *    inside fi_cq_read() and friends.  While they poll at least once per
 *    FI_TNBC_APP_WINDOW_US, the application owns progress: the engine
 *    does no work and naps one window at a time, so it never takes the
 *    core a polling thread needs, and peers need not ring the doorbell (a
 *    syscall and a context switch per message).  Once a window passes
 *    without a poll the engine takes over, so a message waits at most
 *    about one window, never for the application to call in again.
 *
 * Lock discipline
 * ---------------
 * Locks are only ever taken in this order, and none is held across a call
 * into another endpoint or out of the provider:
 *
 *   domain->ep_lock (rwlock; read to progress, write to add/remove an ep)
 *     > ep->lock   (mutex; matching lists, tx queues, rendezvous tables,
 *                   and the right to consume the endpoint's receive queue)
 *       > cq->lock, cntr->lock, eq->lock  (leaf locks)
 *
 * av->lock is a leaf taken only by AV insert/remove; the send path reads
 * AV entries without it (entries live in fixed chunks that never move, and
 * the count is published with release semantics).
 * Progress uses trylock on ep->lock: whichever thread gets there first does
 * the work, and nobody waits for another thread to finish polling.
 */
#ifndef TNBC_H
#define TNBC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "rdma/fi_ext_tnbc.h"
#include "tnbc_proto.h"
#include "tnbc_xport.h"

#define TNBC_PROV_NAME	  FI_TNBC_PROV_NAME
#define TNBC_FI_VERSION	  FI_VERSION(1, 17)
#define TNBC_PROV_VERSION FI_VERSION(FI_TNBC_MAJOR, FI_TNBC_MINOR)
#define TNBC_FABRIC_NAME  "tnbc"
#define TNBC_DOMAIN_NAME  "shm"

#define TNBC_IOV_LIMIT	    8
#define TNBC_MAX_MSG_SIZE   ((size_t)1 << 40)
#define TNBC_CQ_DATA_SIZE   8
#define TNBC_DEF_CQ_SIZE    1024
#define TNBC_DEF_QUEUE_SIZE 65536

#define TNBC_EP_CAPS                                                           \
	(FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE)
#define TNBC_TX_CAPS (FI_MSG | FI_TAGGED | FI_SEND)
#define TNBC_RX_CAPS                                                           \
	(FI_MSG | FI_TAGGED | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE)
#define TNBC_DOM_CAPS (FI_LOCAL_COMM)
#define TNBC_CAPS     (TNBC_EP_CAPS | TNBC_DOM_CAPS)
/* Accepted in hints, returned only when asked for: multi-host MPI stacks
 * request it.  The shm transport reaches this host only; a peer elsewhere
 * fails with -FI_EHOSTUNREACH (fi_tnbc(7), LIMITATIONS). */
#define TNBC_HINT_CAPS (TNBC_CAPS | FI_REMOTE_COMM)
#define TNBC_TX_OP_FLAGS                                                       \
	(FI_INJECT | FI_COMPLETION | FI_INJECT_COMPLETE |                      \
	 FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA)
#define TNBC_RX_OP_FLAGS (FI_COMPLETION)

extern struct fi_provider tnbc_prov;

/* All runtime parameters, filled once by tnbc_init_env() (tnbc_init.c)
 * and documented in fi_tnbc(7). */
struct tnbc_env {
	size_t rx_slots; /* packets in each endpoint's receive queue */
	size_t slot_size; /* bytes per packet slot, header included */
	size_t eager_size; /* largest message sent eagerly */
	int cma; /* allow single-copy process_vm_readv */
	size_t spin_us; /* engine busy-poll before sleeping */
	size_t app_window_us; /* how long an app poll keeps peers quiet */
	int engine; /* run the engine thread at all */
	char *engine_cpus; /* hwloc list string, or NULL for automatic */
};

extern struct tnbc_env tnbc_env;

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

/* ------------------------------------------------------------------ */

struct tnbc_fabric {
	struct fid_fabric fabric_fid;
	atomic_int ref;
};

struct tnbc_engine {
	pthread_t thread;
	bool running;
	atomic_bool stop;
	atomic_uint_fast64_t engine_pkts;
	atomic_uint_fast64_t app_pkts;
	atomic_uint_fast64_t sleeps;
	atomic_uint_fast64_t wakeups;
	atomic_uint_fast64_t rndv_pull;
	atomic_uint_fast64_t rndv_stream;
	atomic_int cpu;
};

struct tnbc_domain {
	struct fid_domain domain_fid;
	struct tnbc_fabric *fabric;
	atomic_int ref;
	enum fi_threading threading;
	uint64_t mr_mode;

	const struct tnbc_xport_ops *xops;
	struct tnbc_xdom *xdom;

	pthread_rwlock_t ep_lock;
	struct tnbc_list ep_list;
	size_t ep_count;

	atomic_uint_fast64_t next_mr_key;
	struct tnbc_engine engine;
};

struct tnbc_av_entry {
	struct tnbc_name name;
	struct tnbc_xpeer *peer; /* resolved lazily on first send */
	atomic_bool valid;
};

#define TNBC_AV_CHUNK	   1024
#define TNBC_AV_MAX_CHUNKS 4096

struct tnbc_av {
	struct fid_av av_fid;
	struct tnbc_domain *domain;
	atomic_int ref;
	enum fi_av_type type;
	size_t addrlen;
	pthread_mutex_t lock;
	struct tnbc_av_entry *chunks[TNBC_AV_MAX_CHUNKS];
	atomic_size_t count;
	/* open-addressed hash: name -> index + 1 (0 = empty), for FI_SOURCE */
	size_t *hash;
	size_t hash_size;
};

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
	bool kicked; /* fi_cq_signal: release one sread */
};

struct tnbc_cntr {
	struct fid_cntr cntr_fid;
	struct tnbc_domain *domain;
	atomic_int ref;
	enum fi_wait_obj wait_obj;
	atomic_uint_fast64_t cnt;
	atomic_uint_fast64_t err;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_int waiters;
};

struct tnbc_eq_item {
	struct tnbc_list entry;
	uint32_t event;
	bool is_err;
	size_t len;
	union {
		struct fi_eq_entry entry;
		struct fi_eq_err_entry err;
		uint8_t raw[256];
	} u;
};

struct tnbc_eq {
	struct fid_eq eq_fid;
	struct tnbc_fabric *fabric;
	atomic_int ref;
	enum fi_wait_obj wait_obj;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct tnbc_list items;
};

struct tnbc_mr {
	struct fid_mr mr_fid;
	struct tnbc_domain *domain;
	struct iovec iov[TNBC_IOV_LIMIT];
	size_t iov_count;
	uint64_t access;
};

/* A posted receive, or a send that cannot complete at post time. */
struct tnbc_xfer {
	struct tnbc_list entry;
	void *context;
	uint64_t flags; /* FI_* op flags as posted */
	uint64_t tag;
	uint64_t ignore;
	uint64_t cq_data;
	fi_addr_t addr;
	struct iovec iov[TNBC_IOV_LIMIT];
	size_t iov_count;
	size_t len; /* total of iov */
	/* sender side */
	struct tnbc_xpeer *peer;
	struct tnbc_hdr hdr; /* fully built at post time */
	void *inject_buf; /* owned copy for FI_INJECT sends */
	uint64_t stall_ns; /* when the peer's queue was first found full */
	uint64_t stream_off; /* streamed rendezvous: bytes handed out */
	uint64_t stream_len;
	/* receiver side, streamed rendezvous */
	uint64_t recv_bytes;
	uint64_t msg_size;
	uint64_t msg_tag;
	uint64_t msg_data;
	uint16_t msg_flags;
	fi_addr_t msg_src;
	bool done;
};

/* An arrived message with no matching receive yet. */
struct tnbc_unexp {
	struct tnbc_list entry;
	struct tnbc_hdr hdr;
	fi_addr_t src_addr;
	struct tnbc_xpeer *peer;
	void *claim_ctx; /* set once FI_CLAIMed */
	size_t data_len;
	uint8_t data[]; /* eager payload or RTS iovecs */
};

/* Rendezvous sends waiting for their ACK, looked up by msg_id. */
struct tnbc_rndv_table {
	struct tnbc_xfer **slot;
	uint32_t *gen;
	size_t size;
	size_t used;
};

/* A control packet (ACK/CTS) that found the peer's queue full. */
struct tnbc_ctrl {
	struct tnbc_list entry;
	struct tnbc_xpeer *peer;
	struct tnbc_hdr hdr;
};

struct tnbc_ep {
	struct fid_ep ep_fid;
	struct tnbc_domain *domain;
	atomic_int ref;
	struct fi_info *info;
	struct tnbc_list dom_entry;
	pthread_mutex_t lock;
	bool enabled;
	long svc;

	struct tnbc_av *av;
	struct tnbc_cq *tx_cq, *rx_cq;
	struct tnbc_cntr *tx_cntr, *rx_cntr;
	uint64_t tx_op_flags, rx_op_flags;
	bool tx_selective, rx_selective;

	struct tnbc_xep *xep;
	struct tnbc_name name;

	struct tnbc_list rx_msg, rx_tagged; /* posted receives */
	struct tnbc_list unexp_msg, unexp_tagged;
	struct tnbc_list tx_queue; /* sends waiting for queue space */
	struct tnbc_list ctrl_queue; /* ACK/CTS waiting for queue space */
	struct tnbc_list stream_rx; /* receives fed by DATA packets */
	struct tnbc_rndv_table rndv;
	uint64_t next_token;
	uint64_t peer_check_ns; /* last liveness check of waiting peers */
};

/* ------------------------------------------------------------------ */
/* Cross-object helpers.                                                */

int tnbc_getinfo(uint32_t version, const char *node, const char *service,
		 uint64_t flags, const struct fi_info *hints,
		 struct fi_info **info);
int tnbc_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		     void *context);
int tnbc_domain_open(struct fid_fabric *fabric, struct fi_info *info,
		     struct fid_domain **domain, void *context);
int tnbc_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		 struct fid_eq **eq, void *context);
int tnbc_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		 struct fid_av **av, void *context);
int tnbc_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		 struct fid_cq **cq, void *context);
int tnbc_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		   struct fid_cntr **cntr, void *context);
int tnbc_ep_open(struct fid_domain *domain, struct fi_info *info,
		 struct fid_ep **ep, void *context);
int tnbc_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
		uint64_t offset, uint64_t requested_key, uint64_t flags,
		struct fid_mr **mr, void *context);
int tnbc_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		 uint64_t access, uint64_t offset, uint64_t requested_key,
		 uint64_t flags, struct fid_mr **mr, void *context);
int tnbc_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
		    uint64_t flags, struct fid_mr **mr);

extern const struct fi_info tnbc_info_template;
extern const struct fi_ops_msg tnbc_msg_ops;
extern const struct fi_ops_tagged tnbc_tagged_ops;

/* attr */
int tnbc_check_hints(const struct fi_info *hints);
struct fi_info *tnbc_info_build(const struct fi_info *hints);

/* av */
struct tnbc_av_entry *tnbc_av_get(struct tnbc_av *av, fi_addr_t addr);
fi_addr_t tnbc_av_reverse(struct tnbc_av *av, const struct tnbc_name *name);
int tnbc_av_peer(struct tnbc_av *av, fi_addr_t addr, struct tnbc_xpeer **peer);

/* cq / cntr: called with the owning ep lock held (leaf locks inside) */
int tnbc_cq_write(struct tnbc_cq *cq, void *context, uint64_t flags, size_t len,
		  void *buf, uint64_t data, uint64_t tag, fi_addr_t src);
int tnbc_cq_write_err(struct tnbc_cq *cq, void *context, uint64_t flags,
		      size_t len, void *buf, uint64_t data, uint64_t tag,
		      size_t olen, int err, int prov_errno, fi_addr_t src);
bool tnbc_cq_has_entries(struct tnbc_cq *cq);
void tnbc_cntr_inc(struct tnbc_cntr *cntr);
void tnbc_cntr_inc_err(struct tnbc_cntr *cntr);

/* progress */
int tnbc_ep_progress(struct tnbc_ep *ep, bool engine);
void tnbc_domain_progress(struct tnbc_domain *domain, bool engine);
int tnbc_engine_start(struct tnbc_domain *domain);
void tnbc_engine_stop(struct tnbc_domain *domain);
void tnbc_engine_kick(struct tnbc_domain *domain);

/* msg protocol, ep lock held */
void tnbc_rx_packet(void *arg, const struct tnbc_hdr *hdr, const void *payload);
int tnbc_tx_queue_progress(struct tnbc_ep *ep);
void tnbc_ep_check_peers(struct tnbc_ep *ep);
void tnbc_ep_report_tx(struct tnbc_ep *ep, struct tnbc_xfer *xfer, int err);
void tnbc_ep_flush_queues(struct tnbc_ep *ep);
int tnbc_ep_cancel_rx(struct tnbc_ep *ep, void *context);
ssize_t tnbc_ep_post_recv(struct tnbc_ep *ep, const struct iovec *iov,
			  size_t count, fi_addr_t src, uint64_t tag,
			  uint64_t ignore, void *context, uint64_t flags,
			  bool tagged);
ssize_t tnbc_ep_post_send(struct tnbc_ep *ep, const struct iovec *iov,
			  size_t count, fi_addr_t dest, uint64_t tag,
			  uint64_t data, void *context, uint64_t flags,
			  bool tagged);

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
/* CLOCK_REALTIME deadline ns from now, for pthread_cond_timedwait. */
void tnbc_abstime(struct timespec *ts, uint64_t ns);

#endif /* TNBC_H */
