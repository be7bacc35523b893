/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ftx_trig: helpers for the tests of triggered operations (fi_trigger(3)):
 * one description of an operation (struct ftx_op) that can be posted with
 * the FI_TRIGGER flag or queued as deferred work, counters, memory
 * registration for RMA and atomics, and tnbc's engine statistics when the
 * provider offers them.
 */
#ifndef FTX_TRIG_H
#define FTX_TRIG_H

#include "common/ftx.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_trigger.h>

/*
 * One operation.  buf/len/desc is the local buffer (for atomics: the
 * operand, count elements of dt); res and cmp are the fetch and compare
 * buffers of fetching and compare atomics; cntr/value the target of
 * FI_OP_CNTR_SET and FI_OP_CNTR_ADD.
 */
struct ftx_op {
	enum fi_op_type type;
	struct fid_ep *ep;
	void *buf;
	size_t len;
	void *desc;
	fi_addr_t addr;
	uint64_t tag;
	uint64_t ignore;
	uint64_t data;
	uint64_t raddr;
	uint64_t rkey;
	enum fi_datatype dt;
	enum fi_op aop;
	size_t count;
	void *res;
	void *res_desc;
	void *cmp;
	void *cmp_desc;
	uint64_t flags;
	struct fid_cntr *cntr;
	uint64_t value;
};

/* the iovecs the messages point to; they live as long as the request */
struct ftx_opmem {
	struct iovec iov;
	void *desc;
	struct fi_rma_iov rma_iov;
	struct fi_ioc ioc;
	struct fi_ioc res_ioc;
	struct fi_ioc cmp_ioc;
	struct fi_rma_ioc rma_ioc;
	void *res_desc;
	void *cmp_desc;
};

/* An operation posted with FI_TRIGGER; &t->tc is its op_context. */
struct ftx_trig {
	struct fi_triggered_context2 tc;
	struct ftx_opmem m;
	union {
		struct fi_msg msg;
		struct fi_msg_tagged tagged;
		struct fi_msg_rma rma;
		struct fi_msg_atomic atomic;
	} u;
};

/* Deferred work (FI_QUEUE_WORK); &d->work.context is its op_context. */
struct ftx_dw {
	struct fi_deferred_work work;
	struct ftx_opmem m;
	union {
		struct fi_op_msg msg;
		struct fi_op_tagged tagged;
		struct fi_op_rma rma;
		struct fi_op_atomic atomic;
		struct fi_op_fetch_atomic fetch;
		struct fi_op_compare_atomic compare;
		struct fi_op_cntr cntr;
	} op;
};

const char *ftx_op_name(enum fi_op_type type);

/*
 * Posts op with FI_TRIGGER | op->flags, to start when cntr reaches thr.
 * Returns what the fi_*msg call returned (wrap it in FTX_POST).
 */
ssize_t ftx_trig_post(struct ftx_trig *t, const struct ftx_op *op,
		      struct fid_cntr *cntr, uint64_t thr);

/* Fills d; nothing is queued yet. */
void ftx_dw_init(struct ftx_dw *d, const struct ftx_op *op,
		 struct fid_cntr *trig, uint64_t thr, struct fid_cntr *comp);
/* fi_control(FI_QUEUE_WORK / FI_CANCEL_WORK) on ctx->domain */
int ftx_dw_queue(struct ftx_ctx *ctx, struct ftx_dw *d);
int ftx_dw_cancel(struct ftx_ctx *ctx, struct ftx_dw *d);
/* ftx_dw_init then ftx_dw_queue, failing on anything but success */
void ftx_dw_post(struct ftx_ctx *ctx, struct ftx_dw *d, const struct ftx_op *op,
		 struct fid_cntr *trig, uint64_t thr, struct fid_cntr *comp);
/* FI_FLUSH_WORK: all of the domain's requests, or those on cntr */
int ftx_flush_work(struct ftx_ctx *ctx, struct fid_cntr *cntr);

/*
 * Counters: opened with FI_CNTR_EVENTS_COMP and a wait object, closed by
 * ftx_trig_cleanup() (call it before the case returns; counters bound to
 * the endpoint belong in ctx->cntr[], which the harness closes).
 */
struct fid_cntr *ftx_cntr_new(struct ftx_ctx *ctx);
void ftx_cntr_bind(struct ftx_ctx *ctx, struct fid_cntr *c, uint64_t flags);
/* fi_close; forgets the counter when that succeeds */
int ftx_cntr_close(struct fid_cntr *c);
/* closes the memory registrations and counters these helpers opened */
void ftx_trig_cleanup(struct ftx_ctx *ctx);
/* the same, retrying closes refused with -FI_EBUSY for a while (noted) */
void ftx_trig_cleanup_lenient(struct ftx_ctx *ctx);
/* success count + error count: what a threshold compares with */
uint64_t ftx_cntr_total(struct fid_cntr *c);
/*
 * Waits until fi_cntr_read(c) >= want, draining the harness CQs
 * meanwhile; fails on timeout or when the error count grows.
 */
uint64_t ftx_cntr_wait(struct ftx_ctx *ctx, struct fid_cntr *c, uint64_t want,
		       const char *what);
/* the same without any CQ read (for cases with FTX_CASE_RAW_CQ) */
uint64_t ftx_cntr_wait_raw(struct ftx_ctx *ctx, struct fid_cntr *c,
			   uint64_t want, const char *what);
/* expects exactly val successes and err errors */
void ftx_cntr_expect(struct fid_cntr *c, uint64_t val, uint64_t err,
		     const char *what);

/* memory registration and the peers' view of it */
struct ftx_rma {
	uint64_t addr;
	uint64_t key;
};
struct fid_mr *ftx_mr_reg(struct ftx_ctx *ctx, void *buf, size_t len,
			  uint64_t access, void **desc);
/* every rank's (addr, key) of mr/buf into peers[nprocs] */
void ftx_mr_exchange(struct ftx_ctx *ctx, struct fid_mr *mr, void *buf,
		     struct ftx_rma *peers);

/*
 * Reads the harness CQ for up to ms milliseconds and checks that no
 * completion appeared; prints and fails softly otherwise.
 */
void ftx_expect_no_comp(struct ftx_ctx *ctx, unsigned ms, const char *what);

/* a completion of the harness queue with the given context, or fail */
void ftx_expect_comp(struct ftx_ctx *ctx, enum ftx_which w, void *op_context,
		     int err, const char *what);

/*
 * Collects n completions of w whose op_contexts are the n given ones (any
 * order), each with error err (0 or FI_ECANCELED, ...).
 */
void ftx_expect_comps(struct ftx_ctx *ctx, enum ftx_which w,
		      void *const *op_contexts, size_t n, int err,
		      const char *what);

/* tnbc's engine statistics; false on other providers */
struct fi_tnbc_engine_stats;
bool ftx_tnbc_stats(struct ftx_ctx *ctx, struct fi_tnbc_engine_stats *st);

#endif /* FTX_TRIG_H */
