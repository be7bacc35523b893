/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Event queues (tnbc_eq.c).
 */
#ifndef TNBC_EQ_H
#define TNBC_EQ_H

#include "tnbc.h"

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
	/* items queued, written under lock: a read that would not wait
	 * looks here first, since the glue and fabtests poll an EQ that
	 * is empty almost always, once per progress call */
	atomic_size_t nitems;
};

int tnbc_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		 struct fid_eq **eq, void *context);
/* Queues an event (is_err: buf is a struct fi_eq_err_entry). */
int tnbc_eq_post(struct tnbc_eq *eq, uint32_t event, const void *buf,
		 size_t len, bool is_err);

#endif /* TNBC_EQ_H */
