/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A triggered request as the trigger unit keeps it, and the per-counter
 * heap it waits in (tnbc_trig_heap.c).  Only the trigger unit reads it.
 */
#ifndef TNBC_TRIG_HEAP_H
#define TNBC_TRIG_HEAP_H

#include "tnbc.h"
#include "tnbc_xfer.h"

/* The trigger unit's kinds beyond enum fi_op_type: the extension's
 * compute steps (fi_ext_tnbc.h), and a schedule's call of its own. */
enum {
	TNBC_TRIG_REDUCE = FI_OP_CNTR_ADD + 1,
	TNBC_TRIG_COPY,
	TNBC_TRIG_CALL,
	TNBC_TRIG_FN,
};

/* A compute step: reduce count elements of src into dst, copy count
 * bytes, call call(arg) once the request is gone (TNBC_TRIG_CALL), or
 * run fn(arg) as a step that completes like the others (TNBC_TRIG_FN:
 * 0, or a negative fi_errno counted as an error). */
struct tnbc_trig_step {
	void *dst;
	const void *src;
	size_t count;
	enum fi_op op;
	enum fi_datatype dt;
	void (*call)(void *arg);
	int (*fn)(void *arg);
	void *arg;
};

struct tnbc_trig {
	struct tnbc_list
		entry; /* the trigger unit's ready list, or a local one */
	struct tnbc_cntr *cntr; /* triggering counter */
	uint64_t threshold;
	uint64_t seq;
	bool internal; /* built by tnbc_trig_submit */
	uint8_t cls; /* its size class in tnbc_trig_cache, or 0 */
	size_t idx; /* position in cntr->heap */
	enum fi_op_type op;
	struct tnbc_ep *ep;
	struct tnbc_cntr *op_cntr; /* FI_OP_CNTR_SET / ADD */
	uint64_t value;
	struct fi_deferred_work *work; /* NULL for an FI_TRIGGER op */
	void *context; /* what its completion reports */
	struct tnbc_opx x;
	/* TNBC_TRIG_REDUCE, TNBC_TRIG_COPY, TNBC_TRIG_CALL */
	struct tnbc_trig_step step;
	/* FI_OP_SEND, TSEND, RECV, TRECV: msg.iov is iov */
	int (*amend)(void *arg); /* tnbc_trig_req */
	void *amend_arg;
	struct tnbc_msg_args msg;
	struct iovec iov[TNBC_IOV_LIMIT];
	/* FI_OP_READ ... COMPARE_ATOMIC */
	struct tnbc_rma_args rma;
};

/* cntr->lock held.  push: -FI_ENOMEM when the heap cannot grow. */
int tnbc_trig_heap_push(struct tnbc_cntr *c, struct tnbc_trig *t);
void tnbc_trig_heap_remove(struct tnbc_cntr *c, size_t i);

/* A counter changed: moves the requests it releases to the ready list.
 * Callable with any lock held; does not run them. */
void tnbc_trig_check(struct tnbc_cntr *cntr);

#endif /* TNBC_TRIG_HEAP_H */
