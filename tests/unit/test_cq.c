/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Completion queues and counters, driven directly through the
 * provider's internal writers (tnbc_cq_write / tnbc_cq_write_err).
 */
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>

#include "tnbc_unit.h"

static struct fid_cq *cq_open(struct tu_dom *d, enum fi_cq_format format,
			      enum fi_wait_obj wait, size_t size)
{
	struct fi_cq_attr attr = {
		.format = format, .wait_obj = wait, .size = size};
	struct fid_cq *cq = NULL;

	ck_assert_int_eq(fi_cq_open(d->domain, &attr, &cq, NULL), 0);
	ck_assert_ptr_nonnull(cq);
	return cq;
}

static struct tnbc_cq *tcq(struct fid_cq *cq)
{
	return tnbc_container_of(cq, struct tnbc_cq, cq_fid);
}

static int ctx[256];

/* One entry of each format carries exactly its fields. _i: format. */
START_TEST(cq_formats)
{
	static const enum fi_cq_format formats[] = {
		FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG, FI_CQ_FORMAT_DATA,
		FI_CQ_FORMAT_TAGGED};
	enum fi_cq_format fmt = formats[_i];
	const uint64_t flags = FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA;
	const uint64_t tag = 0x8123456789abcdefULL;
	const uint64_t data = 0xfeedfacecafebeefULL;
	char buf[16];
	struct tu_dom d;
	struct fid_cq *cq;
	union {
		struct fi_cq_entry c[4];
		struct fi_cq_msg_entry m[4];
		struct fi_cq_data_entry d[4];
		struct fi_cq_tagged_entry t[4];
	} u;

	tu_dom_open(&d, NULL);
	cq = cq_open(&d, fmt, FI_WAIT_NONE, 0);
	/* three entries: a multi-entry read must lay them out with the
	 * format's own stride */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(tnbc_cq_write(tcq(cq), &ctx[i], flags, 100 + i,
					       buf + i, data + i, tag + i,
					       FI_ADDR_NOTAVAIL),
				 0);
	memset(&u, 0, sizeof(u));
	ck_assert_int_eq(fi_cq_read(cq, &u, 4), 3);
	for (int i = 0; i < 3; i++) {
		switch (fmt) {
		case FI_CQ_FORMAT_CONTEXT:
			ck_assert_ptr_eq(u.c[i].op_context, &ctx[i]);
			break;
		case FI_CQ_FORMAT_MSG:
			ck_assert_ptr_eq(u.m[i].op_context, &ctx[i]);
			ck_assert_uint_eq(u.m[i].flags, flags);
			ck_assert_uint_eq(u.m[i].len, 100 + i);
			break;
		case FI_CQ_FORMAT_DATA:
			ck_assert_ptr_eq(u.d[i].op_context, &ctx[i]);
			ck_assert_uint_eq(u.d[i].flags, flags);
			ck_assert_uint_eq(u.d[i].len, 100 + i);
			ck_assert_ptr_eq(u.d[i].buf, buf + i);
			ck_assert_uint_eq(u.d[i].data, data + i);
			break;
		default:
			ck_assert_ptr_eq(u.t[i].op_context, &ctx[i]);
			ck_assert_uint_eq(u.t[i].flags, flags);
			ck_assert_uint_eq(u.t[i].len, 100 + i);
			ck_assert_ptr_eq(u.t[i].buf, buf + i);
			ck_assert_uint_eq(u.t[i].data, data + i);
			ck_assert_uint_eq(u.t[i].tag, tag + i);
			break;
		}
	}
	/* nothing beyond the fourth slot was written over: the read
	 * stopped at the three entries it had */
	if (fmt == FI_CQ_FORMAT_CONTEXT)
		ck_assert_ptr_null(u.c[3].op_context);
	ck_assert_int_eq(fi_cq_read(cq, &u, 4), -FI_EAGAIN);
	ck_assert_int_eq(fi_close(&cq->fid), 0);
	tu_dom_close(&d);
}
END_TEST

START_TEST(cq_unspec_format_is_context)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_UNSPEC};
	struct tu_dom d;
	struct fid_cq *cq;
	struct fi_cq_entry e[2] = {{0}};

	tu_dom_open(&d, NULL);
	ck_assert_int_eq(fi_cq_open(d.domain, &attr, &cq, NULL), 0);
	ck_assert_int_eq(attr.format, FI_CQ_FORMAT_CONTEXT);
	tnbc_cq_write(tcq(cq), &ctx[0], FI_SEND, 0, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	tnbc_cq_write(tcq(cq), &ctx[1], FI_SEND, 0, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	ck_assert_int_eq(fi_cq_read(cq, e, 2), 2);
	ck_assert_ptr_eq(e[0].op_context, &ctx[0]);
	ck_assert_ptr_eq(e[1].op_context, &ctx[1]);
	ck_assert_int_eq(fi_close(&cq->fid), 0);

	/* unknown format, bad wait condition */
	attr.format = (enum fi_cq_format)77;
	ck_assert_int_lt(fi_cq_open(d.domain, &attr, &cq, NULL), 0);
	attr.format = FI_CQ_FORMAT_MSG;
	attr.wait_cond = (enum fi_cq_wait_cond)9;
	ck_assert_int_lt(fi_cq_open(d.domain, &attr, &cq, NULL), 0);
	tu_dom_close(&d);
}
END_TEST

/* A CQ of size 4 takes 1000 entries, in order, also when the ring has
 * wrapped before it grows. */
START_TEST(cq_grows)
{
	enum { N = 1000 };
	static int many[N];
	struct tu_dom d;
	struct fid_cq *cq;
	struct fi_cq_msg_entry e[8];
	size_t next_w = 0, next_r = 0;

	tu_dom_open(&d, NULL);
	cq = cq_open(&d, FI_CQ_FORMAT_MSG, FI_WAIT_NONE, 4);
	/* write 3, read 2: the head is no longer at slot 0 */
	for (; next_w < 3; next_w++)
		tnbc_cq_write(tcq(cq), &many[next_w], FI_RECV, next_w, NULL, 0,
			      0, FI_ADDR_NOTAVAIL);
	ck_assert_int_eq(fi_cq_read(cq, e, 2), 2);
	for (int i = 0; i < 2; i++, next_r++) {
		ck_assert_ptr_eq(e[i].op_context, &many[next_r]);
		ck_assert_uint_eq(e[i].len, next_r);
	}
	/* now overflow it many times over */
	for (; next_w < N; next_w++)
		ck_assert_int_eq(tnbc_cq_write(tcq(cq), &many[next_w], FI_RECV,
					       next_w, NULL, 0, 0,
					       FI_ADDR_NOTAVAIL),
				 0);
	while (next_r < N) {
		ssize_t n = fi_cq_read(cq, e, 8);

		ck_assert_int_gt(n, 0);
		for (ssize_t i = 0; i < n; i++, next_r++) {
			ck_assert_msg(e[i].op_context == &many[next_r],
				      "entry %zu out of order", next_r);
			ck_assert_uint_eq(e[i].len, next_r);
		}
	}
	ck_assert_int_eq(fi_cq_read(cq, e, 8), -FI_EAGAIN);
	ck_assert_int_eq(fi_close(&cq->fid), 0);
	tu_dom_close(&d);
}
END_TEST

START_TEST(cq_errors)
{
	struct tu_dom d;
	struct fid_cq *cq;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	char buf[8], edata[32];

	tu_dom_open(&d, NULL);
	cq = cq_open(&d, FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0);
	ck_assert_int_eq(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);

	tnbc_cq_write(tcq(cq), &ctx[0], FI_SEND | FI_TAGGED, 0, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	ck_assert_int_eq(
		tnbc_cq_write_err(tcq(cq), &ctx[1], FI_RECV | FI_TAGGED, 8, buf,
				  0x77, 0x99, 1234, FI_ETRUNC, -FI_ETRUNC, 5),
		0);
	/* a pending error is reported before anything else */
	ck_assert_int_eq(fi_cq_read(cq, &e, 1), -FI_EAVAIL);
	ck_assert_int_eq(fi_cq_read(cq, &e, 1), -FI_EAVAIL);

	memset(&err, 0, sizeof(err));
	err.err_data = edata;
	err.err_data_size = sizeof(edata);
	ck_assert_int_eq(fi_cq_readerr(cq, &err, 0), 1);
	ck_assert_ptr_eq(err.op_context, &ctx[1]);
	ck_assert_uint_eq(err.flags, FI_RECV | FI_TAGGED);
	ck_assert_uint_eq(err.len, 8);
	ck_assert_ptr_eq(err.buf, buf);
	ck_assert_uint_eq(err.data, 0x77);
	ck_assert_uint_eq(err.tag, 0x99);
	ck_assert_uint_eq(err.olen, 1234);
	ck_assert_int_eq(err.err, FI_ETRUNC);
	ck_assert_int_eq(err.prov_errno, -FI_ETRUNC);
	/* the caller's error-data buffer is left in place (API >= 1.5) */
	ck_assert_ptr_eq(err.err_data, edata);
	ck_assert_uint_eq(err.err_data_size, 0);
	ck_assert_ptr_nonnull(
		fi_cq_strerror(cq, err.prov_errno, NULL, NULL, 0));

	/* the good entry is still there */
	ck_assert_int_eq(fi_cq_read(cq, &e, 1), 1);
	ck_assert_ptr_eq(e.op_context, &ctx[0]);
	ck_assert_int_eq(fi_cq_read(cq, &e, 1), -FI_EAGAIN);
	ck_assert_int_eq(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);

	/* several errors come out in order */
	for (int i = 0; i < 3; i++)
		tnbc_cq_write_err(tcq(cq), &ctx[10 + i], FI_RECV, 0, NULL, 0, 0,
				  0, FI_ECANCELED, -FI_ECANCELED,
				  FI_ADDR_NOTAVAIL);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(fi_cq_read(cq, &e, 1), -FI_EAVAIL);
		ck_assert_int_eq(fi_cq_readerr(cq, &err, 0), 1);
		ck_assert_ptr_eq(err.op_context, &ctx[10 + i]);
		ck_assert_int_eq(err.err, FI_ECANCELED);
	}
	ck_assert_int_eq(fi_cq_read(cq, &e, 1), -FI_EAGAIN);

	/* an unread error is freed by close (ASan/LSan would tell) */
	tnbc_cq_write_err(tcq(cq), &ctx[20], FI_RECV, 0, NULL, 0, 0, 0, FI_EIO,
			  -FI_EIO, FI_ADDR_NOTAVAIL);
	ck_assert_int_eq(fi_close(&cq->fid), 0);
	tu_dom_close(&d);
}
END_TEST

START_TEST(cq_readfrom)
{
	struct tu_dom d;
	struct fid_cq *cq;
	struct fi_cq_tagged_entry e[3];
	fi_addr_t src[3] = {99, 99, 99};

	tu_dom_open(&d, NULL);
	cq = cq_open(&d, FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE, 0);
	tnbc_cq_write(tcq(cq), &ctx[0], FI_RECV, 1, NULL, 0, 0, 7);
	tnbc_cq_write(tcq(cq), &ctx[1], FI_RECV, 1, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	tnbc_cq_write(tcq(cq), &ctx[2], FI_RECV, 1, NULL, 0, 0, 0);
	ck_assert_int_eq(fi_cq_readfrom(cq, e, 3, src), 3);
	ck_assert_uint_eq(src[0], 7);
	ck_assert_uint_eq(src[1], FI_ADDR_NOTAVAIL);
	ck_assert_uint_eq(src[2], 0);
	ck_assert_ptr_eq(e[0].op_context, &ctx[0]);
	ck_assert_ptr_eq(e[2].op_context, &ctx[2]);
	ck_assert_int_eq(fi_close(&cq->fid), 0);
	tu_dom_close(&d);
}
END_TEST

/* With FI_THREAD_DOMAIN and FI_WAIT_NONE, completions made by the
 * application's own calls queue without the CQ's lock.  Pass 0 and 1
 * (no engine): each arrives once, in the order the messages matched,
 * with its source and data, read one at a time or in batches, behind
 * an entry queued before the read, through the queue's growth.  Pass 2
 * (engine running, so completions come from both sides): each arrives
 * exactly once. */
START_TEST(cq_thread_domain_app_queue)
{
	enum { N = 3 * TNBC_CQ_APP_QUEUE + 5 };
	struct fi_info *hints = fi_allocinfo();
	int old_engine = tnbc_env.engine;
	static uint64_t rbuf[N];
	static bool seen[N];
	struct fi_cq_tagged_entry e[64];
	fi_addr_t src[64];

	hints->caps = FI_TAGGED | FI_SOURCE;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	for (int pass = 0; pass < 3; pass++) {
		size_t batch = pass ? 64 : 1, want = N + (pass == 1), got = 0;
		uint64_t deadline = tu_now_ms() + TU_WAIT_MS;
		struct tu_world w;

		tnbc_env.engine = pass == 2;
		tu_world_open(&w, 2,
			      &(struct tu_world_opts){.hints = hints,
						      .cq_wait_none = true});
		ck_assert(tcq(w.ep[1].rx_cq)->app_queue);
		for (uint64_t i = 0; i < N; i++) {
			rbuf[i] = 0;
			seen[i] = false;
			ck_assert_int_eq(fi_trecv(w.ep[1].ep, &rbuf[i],
						  sizeof(rbuf[i]), NULL,
						  FI_ADDR_UNSPEC, i, 0,
						  &ctx[i % 200]),
					 0);
		}
		if (pass == 1)
			tnbc_cq_write(tcq(w.ep[1].rx_cq), &ctx[200], FI_RECV, 0,
				      NULL, 0, 0, FI_ADDR_NOTAVAIL);
		for (uint64_t i = 0; i < N; i++) {
			uint64_t v = i + 1000;

			ck_assert_int_eq(fi_tinject(w.ep[0].ep, &v, sizeof(v),
						    w.addr[1], i),
					 0);
		}
		while (got < want) {
			ssize_t n =
				fi_cq_readfrom(w.ep[1].rx_cq, e, batch, src);

			ck_assert_msg(n > 0 || n == -FI_EAGAIN,
				      "fi_cq_readfrom: %zd", n);
			ck_assert_msg(tu_now_ms() < deadline,
				      "pass %d: %zu of %zu completions", pass,
				      got, want);
			for (ssize_t k = 0; k < n; k++, got++) {
				size_t i = got - (pass == 1);

				if (pass == 1 && !got) {
					ck_assert_ptr_eq(e[k].op_context,
							 &ctx[200]);
					continue;
				}
				if (pass == 2)
					i = e[k].tag;
				ck_assert_msg(i < N && !seen[i],
					      "pass %d: completion %zu twice "
					      "or out of order",
					      pass, i);
				seen[i] = true;
				ck_assert_uint_eq(e[k].tag, i);
				ck_assert_ptr_eq(e[k].op_context,
						 &ctx[i % 200]);
				ck_assert_uint_eq(src[k], w.addr[0]);
				ck_assert_uint_eq(rbuf[i], i + 1000);
			}
		}
		ck_assert_int_eq(fi_cq_read(w.ep[1].rx_cq, e, 64), -FI_EAGAIN);
		tu_world_close(&w);
	}
	fi_freeinfo(hints);
	tnbc_env.engine = old_engine;
}
END_TEST

struct delayed {
	struct fid_cq *cq;
	struct fid_cntr *cntr;
	unsigned delay_ms;
	int what; /* 0: cq write, 1: cntr add, 2: cntr adderr */
};

static void *delayed_main(void *arg)
{
	struct delayed *dl = arg;

	tu_sleep_ms(dl->delay_ms);
	switch (dl->what) {
	case 0:
		tnbc_cq_write(tcq(dl->cq), &ctx[42], FI_RECV, 0, NULL, 0, 0,
			      FI_ADDR_NOTAVAIL);
		break;
	case 1:
		fi_cntr_add(dl->cntr, 8);
		break;
	default:
		fi_cntr_adderr(dl->cntr, 1);
		break;
	}
	return NULL;
}

START_TEST(cq_sread)
{
	struct tu_dom d;
	struct fid_cq *cq;
	struct fi_cq_entry e;
	uint64_t t0, dt;
	pthread_t th;
	struct delayed dl;

	tu_dom_open(&d, NULL);
	cq = cq_open(&d, FI_CQ_FORMAT_CONTEXT, FI_WAIT_UNSPEC, 0);

	/* empty: times out after roughly the timeout */
	t0 = tu_now_ms();
	ck_assert_int_eq(fi_cq_sread(cq, &e, 1, NULL, 200), -FI_EAGAIN);
	dt = tu_now_ms() - t0;
	ck_assert_msg(dt >= 190 && dt < 2000, "sread(200 ms) took %llu ms",
		      (unsigned long long)dt);

	/* something queued: returns at once */
	tnbc_cq_write(tcq(cq), &ctx[3], FI_RECV, 0, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	t0 = tu_now_ms();
	ck_assert_int_eq(fi_cq_sread(cq, &e, 1, NULL, 5000), 1);
	ck_assert_ptr_eq(e.op_context, &ctx[3]);
	ck_assert_uint_lt(tu_now_ms() - t0, 1000);

	/* another thread's completion wakes a blocked reader */
	dl = (struct delayed){.cq = cq, .delay_ms = 100, .what = 0};
	ck_assert_int_eq(pthread_create(&th, NULL, delayed_main, &dl), 0);
	t0 = tu_now_ms();
	ck_assert_int_eq(fi_cq_sread(cq, &e, 1, NULL, 5000), 1);
	dt = tu_now_ms() - t0;
	pthread_join(th, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[42]);
	ck_assert_msg(dt >= 80 && dt < 2000, "woke after %llu ms",
		      (unsigned long long)dt);

	/* fi_cq_signal releases a blocked reader with -FI_EAGAIN */
	ck_assert_int_eq(fi_cq_signal(cq), 0);
	t0 = tu_now_ms();
	ck_assert_int_eq(fi_cq_sread(cq, &e, 1, NULL, 5000), -FI_EAGAIN);
	ck_assert_uint_lt(tu_now_ms() - t0, 1000);
	ck_assert_int_eq(fi_close(&cq->fid), 0);

	/* FI_WAIT_NONE has no blocking read */
	cq = cq_open(&d, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	ck_assert_int_eq(fi_cq_sread(cq, &e, 1, NULL, 10), -FI_EINVAL);
	ck_assert_int_eq(fi_close(&cq->fid), 0);
	tu_dom_close(&d);
}
END_TEST

/* FI_CQ_COND_THRESHOLD: sread waits for that many entries. */
START_TEST(cq_sread_threshold)
{
	struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_CONTEXT,
				  .wait_obj = FI_WAIT_UNSPEC,
				  .wait_cond = FI_CQ_COND_THRESHOLD};
	struct tu_dom d;
	struct fid_cq *cq;
	struct fi_cq_entry e[4];
	uint64_t t0;

	tu_dom_open(&d, NULL);
	ck_assert_int_eq(fi_cq_open(d.domain, &attr, &cq, NULL), 0);
	tnbc_cq_write(tcq(cq), &ctx[0], FI_RECV, 0, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	t0 = tu_now_ms();
	/* one entry, threshold three: times out */
	ck_assert_int_eq(fi_cq_sread(cq, e, 4, (void *)(uintptr_t)3, 100),
			 -FI_EAGAIN);
	ck_assert_uint_ge(tu_now_ms() - t0, 90);
	tnbc_cq_write(tcq(cq), &ctx[1], FI_RECV, 0, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	tnbc_cq_write(tcq(cq), &ctx[2], FI_RECV, 0, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	ck_assert_int_eq(fi_cq_sread(cq, e, 4, (void *)(uintptr_t)3, 1000), 3);
	ck_assert_ptr_eq(e[2].op_context, &ctx[2]);
	ck_assert_int_eq(fi_close(&cq->fid), 0);
	tu_dom_close(&d);
}
END_TEST

static int readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int r = poll(&p, 1, 0);

	ck_assert_int_ge(r, 0);
	return r > 0 && (p.revents & POLLIN);
}

START_TEST(cq_wait_fd)
{
	struct tu_dom d;
	struct fid_cq *cq, *cq2;
	struct fi_cq_entry e[2];
	struct fi_cq_err_entry err;
	enum fi_wait_obj wo;
	struct fid *fids[1];
	int fd = -1;

	tu_dom_open(&d, NULL);
	cq = cq_open(&d, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD, 0);
	ck_assert_int_eq(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fi_control(&cq->fid, FI_GETWAITOBJ, &wo), 0);
	ck_assert_int_eq(wo, FI_WAIT_FD);
	fids[0] = &cq->fid;

	ck_assert(!readable(fd));
	ck_assert_int_eq(fi_trywait(d.fabric, fids, 1), 0);
	tnbc_cq_write(tcq(cq), &ctx[0], FI_RECV, 0, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	ck_assert(readable(fd));
	ck_assert_int_eq(fi_trywait(d.fabric, fids, 1), -FI_EAGAIN);
	tnbc_cq_write(tcq(cq), &ctx[1], FI_RECV, 0, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	ck_assert(readable(fd));
	/* partly drained: still readable */
	ck_assert_int_eq(fi_cq_read(cq, e, 1), 1);
	ck_assert(readable(fd));
	ck_assert_int_eq(fi_cq_read(cq, e, 1), 1);
	ck_assert_ptr_eq(e[0].op_context, &ctx[1]);
	ck_assert(!readable(fd));
	ck_assert_int_eq(fi_trywait(d.fabric, fids, 1), 0);

	/* an error entry counts too */
	tnbc_cq_write_err(tcq(cq), &ctx[2], FI_RECV, 0, NULL, 0, 0, 0, FI_EIO,
			  -FI_EIO, FI_ADDR_NOTAVAIL);
	ck_assert(readable(fd));
	ck_assert_int_eq(fi_cq_read(cq, e, 1), -FI_EAVAIL);
	ck_assert(readable(fd));
	ck_assert_int_eq(fi_cq_readerr(cq, &err, 0), 1);
	ck_assert(!readable(fd));

	/* and again after a full cycle */
	tnbc_cq_write(tcq(cq), &ctx[3], FI_RECV, 0, NULL, 0, 0,
		      FI_ADDR_NOTAVAIL);
	ck_assert(readable(fd));
	ck_assert_int_eq(fi_cq_read(cq, e, 2), 1);
	ck_assert(!readable(fd));

	/* a CQ without an fd says so */
	cq2 = cq_open(&d, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE, 0);
	ck_assert_int_eq(fi_control(&cq2->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	ck_assert_int_eq(fi_close(&cq2->fid), 0);
	ck_assert_int_eq(fi_close(&cq->fid), 0);
	tu_dom_close(&d);
}
END_TEST

START_TEST(cntr_basic)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP,
				    .wait_obj = FI_WAIT_UNSPEC};
	struct tu_dom d;
	struct fid_cntr *c;
	uint64_t t0, dt;

	tu_dom_open(&d, NULL);
	ck_assert_int_eq(fi_cntr_open(d.domain, &attr, &c, NULL), 0);
	ck_assert_uint_eq(fi_cntr_read(c), 0);
	ck_assert_uint_eq(fi_cntr_readerr(c), 0);
	ck_assert_int_eq(fi_cntr_add(c, 5), 0);
	ck_assert_uint_eq(fi_cntr_read(c), 5);
	ck_assert_int_eq(fi_cntr_add(c, 3), 0);
	ck_assert_uint_eq(fi_cntr_read(c), 8);
	ck_assert_int_eq(fi_cntr_set(c, 2), 0);
	ck_assert_uint_eq(fi_cntr_read(c), 2);
	ck_assert_uint_eq(fi_cntr_readerr(c), 0);
	ck_assert_int_eq(fi_cntr_adderr(c, 3), 0);
	ck_assert_uint_eq(fi_cntr_readerr(c), 3);
	ck_assert_int_eq(fi_cntr_seterr(c, 1), 0);
	ck_assert_uint_eq(fi_cntr_readerr(c), 1);
	ck_assert_uint_eq(fi_cntr_read(c), 2);
	/* the provider's own increments */
	tnbc_cntr_inc(tnbc_cntr_fid(&c->fid));
	tnbc_cntr_inc_err(tnbc_cntr_fid(&c->fid));
	ck_assert_uint_eq(fi_cntr_read(c), 3);
	ck_assert_uint_eq(fi_cntr_readerr(c), 2);

	/* already reached: returns at once */
	ck_assert_int_eq(fi_cntr_wait(c, 3, 1000), 0);
	/* times out */
	t0 = tu_now_ms();
	ck_assert_int_eq(fi_cntr_wait(c, 10, 150), -FI_ETIMEDOUT);
	dt = tu_now_ms() - t0;
	ck_assert_msg(dt >= 140 && dt < 2000, "wait(150 ms) took %llu ms",
		      (unsigned long long)dt);
	ck_assert_int_eq(fi_close(&c->fid), 0);
	tu_dom_close(&d);
}
END_TEST

START_TEST(cntr_wait_threads)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP,
				    .wait_obj = FI_WAIT_UNSPEC};
	struct tu_dom d;
	struct fid_cntr *c;
	struct delayed dl;
	pthread_t th;
	uint64_t t0, dt;

	tu_dom_open(&d, NULL);
	ck_assert_int_eq(fi_cntr_open(d.domain, &attr, &c, NULL), 0);
	ck_assert_int_eq(fi_cntr_set(c, 2), 0);

	/* another thread adds 8: 2 + 8 reaches 10 */
	dl = (struct delayed){.cntr = c, .delay_ms = 100, .what = 1};
	ck_assert_int_eq(pthread_create(&th, NULL, delayed_main, &dl), 0);
	t0 = tu_now_ms();
	ck_assert_int_eq(fi_cntr_wait(c, 10, 5000), 0);
	dt = tu_now_ms() - t0;
	pthread_join(th, NULL);
	ck_assert_uint_eq(fi_cntr_read(c), 10);
	ck_assert_msg(dt >= 80 && dt < 2000, "woke after %llu ms",
		      (unsigned long long)dt);

	/* an error while waiting ends the wait with -FI_EAVAIL */
	dl = (struct delayed){.cntr = c, .delay_ms = 100, .what = 2};
	ck_assert_int_eq(pthread_create(&th, NULL, delayed_main, &dl), 0);
	t0 = tu_now_ms();
	ck_assert_int_eq(fi_cntr_wait(c, 100, 5000), -FI_EAVAIL);
	pthread_join(th, NULL);
	ck_assert_uint_lt(tu_now_ms() - t0, 2000);
	ck_assert_uint_eq(fi_cntr_readerr(c), 1);
	ck_assert_int_eq(fi_close(&c->fid), 0);

	/* FI_WAIT_NONE: no wait object, so fi_cntr_wait polls (upstream
	 * fabtests wait on such counters) and still times out */
	attr.wait_obj = FI_WAIT_NONE;
	ck_assert_int_eq(fi_cntr_open(d.domain, &attr, &c, NULL), 0);
	ck_assert_int_eq(fi_cntr_wait(c, 1, 10), -FI_ETIMEDOUT);
	ck_assert_int_eq(fi_cntr_add(c, 1), 0);
	ck_assert_int_eq(fi_cntr_wait(c, 1, 10), 0);
	ck_assert_int_eq(fi_close(&c->fid), 0);

	/* NULL attr is allowed; bad events are not */
	ck_assert_int_eq(fi_cntr_open(d.domain, NULL, &c, NULL), 0);
	ck_assert_int_eq(fi_close(&c->fid), 0);
	attr.events = (enum fi_cntr_events)5;
	ck_assert_int_lt(fi_cntr_open(d.domain, &attr, &c, NULL), 0);
	tu_dom_close(&d);
}
END_TEST

/* A CQ or counter bound to an endpoint cannot be closed under it. */
START_TEST(cq_close_busy)
{
	struct tu_world w;

	tu_world_open(&w, 1, &(struct tu_world_opts){.cntrs = true});
	ck_assert_int_eq(fi_close(&w.ep[0].tx_cq->fid), -FI_EBUSY);
	ck_assert_int_eq(fi_close(&w.ep[0].rx_cq->fid), -FI_EBUSY);
	ck_assert_int_eq(fi_close(&w.ep[0].rx_cntr->fid), -FI_EBUSY);
	tu_world_close(&w);
}
END_TEST

Suite *tu_cq_suite(void)
{
	Suite *s = suite_create("cq");
	TCase *tc = tcase_create("cq");
	TCase *tn = tcase_create("cntr");

	tcase_set_timeout(tc, TU_TCASE_TIMEOUT);
	tcase_add_loop_test(tc, cq_formats, 0, 4);
	tcase_add_test(tc, cq_unspec_format_is_context);
	tcase_add_test(tc, cq_grows);
	tcase_add_test(tc, cq_errors);
	tcase_add_test(tc, cq_readfrom);
	tcase_add_test(tc, cq_thread_domain_app_queue);
	tcase_add_test(tc, cq_sread);
	tcase_add_test(tc, cq_sread_threshold);
	tcase_add_test(tc, cq_wait_fd);
	tcase_add_test(tc, cq_close_busy);
	suite_add_tcase(s, tc);

	tcase_set_timeout(tn, TU_TCASE_TIMEOUT);
	tcase_add_test(tn, cntr_basic);
	tcase_add_test(tn, cntr_wait_threads);
	suite_add_tcase(s, tn);
	return s;
}
