/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One-sided operations (fi_rma(3), fi_atomic(3)), memory regions
 * (fi_mr(3)) and their counters (fi_cntr(3), fi_endpoint(3)).
 *
 * RMA: every call (write, read, the v and msg forms) at sizes around
 * one packet, across the 16-chunk window and at 1 MiB + 3, with several
 * local iovecs and several remote segments, each byte checked on both
 * sides and the bytes around the target ranges checked untouched;
 * injection, remote CQ data, completion flags, counters, selective
 * completion, RMA events (endpoint and region counters), errors,
 * addressing (offsets or FI_MR_VIRT_ADDR) and keys.
 *
 * Atomics: the validity of every fi_op x fi_datatype pair against a
 * table written here from fi_atomic(3), every valid pair performed and
 * compared with a reference computed here, operations larger than one
 * packet, and atomicity among three initiators.
 *
 * Only the public API is used.  Endpoint roles: TGT (ep[0]) owns the
 * memory regions, INI (ep[1]) initiates; the atomicity test adds ep[2]
 * and ep[3] as initiators.  Triggered RMA is covered in test_trigger.c.
 */
#include <complex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "tnbc_unit.h"

#define TGT 0
#define INI 1

#define RW_CAPS                                                                \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE |        \
	 FI_REMOTE_READ | FI_REMOTE_WRITE)
#define RW_RW (FI_REMOTE_READ | FI_REMOTE_WRITE)

/* The completion flags a test compares. */
#define RW_FLAG_MASK                                                           \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV |         \
	 FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE |               \
	 FI_REMOTE_CQ_DATA)

static int rw_ctx[16];

/* ------------------------------------------------------------------ */
/* A world of endpoints with RMA counters                               */

struct rw_opts {
	size_t n; /* endpoints; 0 means 2 */
	uint64_t mr_mode; /* the domain's, e.g. FI_MR_VIRT_ADDR */
	uint64_t cq_bind_flags; /* e.g. FI_SELECTIVE_COMPLETION */
	bool events; /* FI_RMA_EVENT, FI_REMOTE_* counters on each ep */
};

/* tu_world's endpoints and CQs, plus counters bound to each endpoint
 * with FI_WRITE, FI_READ and FI_SEND (and FI_REMOTE_WRITE /
 * FI_REMOTE_READ with events). */
struct rw {
	struct tu_world w;
	bool virt;
	struct fid_cntr *wr[TU_MAX_EPS], *rd[TU_MAX_EPS], *snd[TU_MAX_EPS];
	struct fid_cntr *rwr[TU_MAX_EPS], *rrd[TU_MAX_EPS];
};

static struct fid_cntr *rw_cntr_open(struct rw *r)
{
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP,
				    .wait_obj = FI_WAIT_UNSPEC};
	struct fid_cntr *c = NULL;

	ck_assert_int_eq(fi_cntr_open(r->w.d.domain, &attr, &c, NULL), 0);
	ck_assert_ptr_nonnull(c);
	return c;
}

static void rw_bind(struct fid_ep *ep, struct fid_cntr *c, uint64_t flags)
{
	int ret = fi_ep_bind(ep, &c->fid, flags);

	ck_assert_msg(ret == 0, "fi_ep_bind(cntr, 0x%llx): %d (%s)",
		      (unsigned long long)flags, ret, fi_strerror(-ret));
}

static void rw_open(struct rw *r, const struct rw_opts *o)
{
	struct tu_world *w = &r->w;
	struct tu_dom *d = &w->d;
	struct fi_info *hints = fi_allocinfo();
	struct tnbc_addr names[TU_MAX_EPS];
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	size_t n = o && o->n ? o->n : 2;
	uint64_t sel = o ? o->cq_bind_flags : 0;
	bool events = o && o->events;
	int ret;

	memset(r, 0, sizeof(*r));
	ck_assert(n >= 2 && n <= TU_MAX_EPS);
	ck_assert_ptr_nonnull(hints);
	hints->caps = RW_CAPS | (events ? FI_RMA_EVENT : 0);
	hints->ep_attr->type = FI_EP_RDM;
	tu_prov_init();
	ret = tnbc_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &d->info);
	fi_freeinfo(hints);
	ck_assert_int_eq(ret, 0);
	ck_assert_ptr_nonnull(d->info);
	ck_assert_uint_eq(d->info->caps & RW_CAPS, RW_CAPS);
	if (events)
		ck_assert(d->info->caps & FI_RMA_EVENT);
	/* the application states the modes it uses when it opens the
	 * domain (fi_domain(3)) */
	d->info->domain_attr->mr_mode = o ? (int)o->mr_mode : 0;
	r->virt = o && (o->mr_mode & FI_MR_VIRT_ADDR);
	ck_assert_int_eq(
		tnbc_fabric_open(d->info->fabric_attr, &d->fabric, NULL), 0);
	ck_assert_int_eq(fi_domain(d->fabric, d->info, &d->domain, NULL), 0);

	w->n = n;
	for (size_t i = 0; i < n; i++) {
		size_t len = sizeof(names[i]);

		ret = fi_endpoint(d->domain, d->info, &w->ep[i].ep, NULL);
		ck_assert_int_eq(ret, 0);
		ret = fi_getname(&w->ep[i].ep->fid, &names[i], &len);
		ck_assert_int_eq(ret, 0);
		w->ep[i].addr = names[i];
		w->ep[i].name = names[i].name;
	}
	ck_assert_int_eq(fi_av_open(d->domain, &av_attr, &w->av, NULL), 0);
	ck_assert_int_eq(fi_av_insert(w->av, names, n, w->addr, 0, NULL),
			 (int)n);
	for (size_t i = 0; i < n; i++) {
		struct tu_ep *e = &w->ep[i];
		struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED,
					     .wait_obj = FI_WAIT_UNSPEC};

		ck_assert_int_eq(
			fi_cq_open(d->domain, &cq_attr, &e->tx_cq, NULL), 0);
		ck_assert_int_eq(
			fi_cq_open(d->domain, &cq_attr, &e->rx_cq, NULL), 0);
		ck_assert_int_eq(fi_ep_bind(e->ep, &w->av->fid, 0), 0);
		ck_assert_int_eq(
			fi_ep_bind(e->ep, &e->tx_cq->fid, FI_TRANSMIT | sel),
			0);
		ck_assert_int_eq(
			fi_ep_bind(e->ep, &e->rx_cq->fid, FI_RECV | sel), 0);
		r->wr[i] = rw_cntr_open(r);
		r->rd[i] = rw_cntr_open(r);
		r->snd[i] = rw_cntr_open(r);
		rw_bind(e->ep, r->wr[i], FI_WRITE);
		rw_bind(e->ep, r->rd[i], FI_READ);
		rw_bind(e->ep, r->snd[i], FI_SEND);
		if (events) {
			r->rwr[i] = rw_cntr_open(r);
			r->rrd[i] = rw_cntr_open(r);
			rw_bind(e->ep, r->rwr[i], FI_REMOTE_WRITE);
			rw_bind(e->ep, r->rrd[i], FI_REMOTE_READ);
		}
		ck_assert_int_eq(fi_enable(e->ep), 0);
	}
}

static void rw_close_fid(struct fid *fid)
{
	int ret;

	if (!fid)
		return;
	ret = fi_close(fid);
	ck_assert_msg(ret == 0, "fi_close(class %zu): %d (%s)", fid->fclass,
		      ret, fi_strerror(-ret));
}

static void rw_close(struct rw *r)
{
	struct tu_world *w = &r->w;

	for (size_t i = 0; i < w->n; i++) {
		rw_close_fid(&w->ep[i].ep->fid);
		rw_close_fid(&w->ep[i].tx_cq->fid);
		rw_close_fid(&w->ep[i].rx_cq->fid);
	}
	for (size_t i = 0; i < w->n; i++) {
		struct fid_cntr *c[] = {r->wr[i], r->rd[i], r->snd[i],
					r->rwr[i], r->rrd[i]};

		for (size_t j = 0; j < sizeof(c) / sizeof(c[0]); j++)
			if (c[j])
				rw_close_fid(&c[j]->fid);
	}
	rw_close_fid(&w->av->fid);
	tu_dom_close(&w->d);
}

static struct fid_ep *rw_ep(struct rw *r, int i)
{
	return r->w.ep[i].ep;
}

/* A region of the target: the caller closes it. */
static struct fid_mr *rw_mr(struct rw *r, void *buf, size_t len,
			    uint64_t access, uint64_t requested_key)
{
	struct fid_mr *mr = NULL;
	int ret = fi_mr_reg(r->w.d.domain, buf, len, access, 0, requested_key,
			    0, &mr, NULL);

	ck_assert_msg(ret == 0, "fi_mr_reg(len %zu, access 0x%llx): %d (%s)",
		      len, (unsigned long long)access, ret, fi_strerror(-ret));
	ck_assert_ptr_nonnull(mr);
	return mr;
}

/* The address a peer names for byte off of a region starting at base. */
static uint64_t rw_addr(const struct rw *r, const void *base, size_t off)
{
	return r->virt ? (uint64_t)(uintptr_t)base + off : off;
}

/* Posts, retrying while the provider answers -FI_EAGAIN. */
#define RW_POST(call)                                                          \
	do {                                                                   \
		uint64_t dl_ = tu_now_ms() + TU_WAIT_MS;                       \
		ssize_t ret_;                                                  \
                                                                               \
		while ((ret_ = (call)) == -FI_EAGAIN && tu_now_ms() < dl_)     \
			sched_yield();                                         \
		ck_assert_msg(ret_ == 0, "line %d: %s: %zd (%s)", __LINE__,    \
			      #call, ret_, fi_strerror((int)-ret_));           \
	} while (0)

static void rw_expect(struct rw *r, int at, void *ctx, uint64_t flags)
{
	struct fi_cq_tagged_entry e;

	tu_cq_expect(r->w.ep[at].tx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, ctx);
	ck_assert_msg((e.flags & RW_FLAG_MASK) == flags,
		      "completion flags 0x%llx, expected 0x%llx",
		      (unsigned long long)(e.flags & RW_FLAG_MASK),
		      (unsigned long long)flags);
}

static void rw_expect_err(struct rw *r, int at, void *ctx, int err,
			  uint64_t flags, const char *what)
{
	struct fi_cq_err_entry ee;
	struct fi_cq_tagged_entry e;
	ssize_t ret = tu_cq_wait(r->w.ep[at].tx_cq, &e, NULL, &ee, TU_WAIT_MS);

	ck_assert_msg(ret != 1, "%s: completed successfully, expected %s", what,
		      fi_strerror(err));
	ck_assert_msg(ret == -FI_EAVAIL, "%s: no error completion", what);
	ck_assert_ptr_eq(ee.op_context, ctx);
	ck_assert_msg(ee.err == err, "%s: error %d (%s), expected %d (%s)",
		      what, ee.err, fi_strerror(ee.err), err, fi_strerror(err));
	ck_assert_msg((ee.flags & RW_FLAG_MASK) == flags,
		      "%s: error flags 0x%llx, expected 0x%llx", what,
		      (unsigned long long)(ee.flags & RW_FLAG_MASK),
		      (unsigned long long)flags);
}

/* Waits until c shows value (and errors errs), then checks it is exactly
 * that. */
static void rw_cntr_is(struct fid_cntr *c, uint64_t value, uint64_t errs,
		       const char *what)
{
	uint64_t deadline = tu_now_ms() + TU_WAIT_MS;

	while ((fi_cntr_read(c) < value || fi_cntr_readerr(c) < errs) &&
	       tu_now_ms() < deadline)
		sched_yield();
	ck_assert_msg(fi_cntr_read(c) == value && fi_cntr_readerr(c) == errs,
		      "%s: counter %llu (errors %llu), expected %llu (errors "
		      "%llu)",
		      what, (unsigned long long)fi_cntr_read(c),
		      (unsigned long long)fi_cntr_readerr(c),
		      (unsigned long long)value, (unsigned long long)errs);
}

/* Fails with the first differing offset unless got == want. */
static void rw_same(const void *got, const void *want, size_t len,
		    const char *what, size_t size)
{
	const uint8_t *g = got, *w = want;

	if (!memcmp(got, want, len))
		return;
	for (size_t i = 0; i < len; i++)
		ck_assert_msg(g[i] == w[i],
			      "%s (size %zu): byte %zu is 0x%02x, expected "
			      "0x%02x",
			      what, size, i, g[i], w[i]);
}

/* ------------------------------------------------------------------ */
/* RMA data movement                                                    */

#define RW_MAX	((size_t)(1 << 20) + 3)
#define RW_BUF	(RW_MAX + 4096)
#define RW_GAP	5 /* untouched bytes between two pieces */
#define RW_LEAD 67 /* untouched bytes before the first piece */

/* Weights of the local and remote cuts: they differ, so chunks and
 * pieces end in different places. */
static const unsigned rw_wl[8] = {3, 1, 4, 1, 5, 9, 2, 6};
static const unsigned rw_wr[8] = {2, 7, 1, 8, 2, 8, 1, 8};

/* Cuts len into parts pieces (some possibly empty) weighted by w, laid
 * out from RW_LEAD with RW_GAP bytes between them. */
static void rw_layout(size_t len, size_t parts, const unsigned *w, size_t *off,
		      size_t *plen)
{
	size_t tot = 0, acc = 0, prev = 0, pos = RW_LEAD;

	for (size_t i = 0; i < parts; i++)
		tot += w[i];
	for (size_t i = 0; i < parts; i++) {
		size_t cut;

		acc += w[i];
		cut = i == parts - 1 ? len : len * acc / tot;
		plen[i] = cut - prev;
		prev = cut;
		off[i] = pos;
		pos += plen[i] + RW_GAP;
	}
}

static void rw_scatter(uint8_t *buf, const uint8_t *stream, size_t parts,
		       const size_t *off, const size_t *plen)
{
	for (size_t i = 0, s = 0; i < parts; s += plen[i], i++)
		memcpy(buf + off[i], stream + s, plen[i]);
}

static const char *const rw_api_name[] = {"fi_write",	 "fi_read",
					  "fi_writev",	 "fi_readv",
					  "fi_writemsg", "fi_readmsg"};

/*
 * _i % 6 selects the call (rw_api_name).  For each size, the stream of
 * len pattern bytes goes from the local pieces to the remote pieces (or
 * back); both whole buffers must then equal their expected images, so
 * every gap and guard byte is checked too.  Reads larger than a packet
 * go as one direct request (a single-copy read), every one of them; with
 * _i >= 6, FI_TNBC_CMA off, none does, and all go as chunks.
 */
START_TEST(rma_sizes)
{
	const int api = _i % 6;
	const bool chunked = _i >= 6;
	struct fi_tnbc_engine_stats st0, st;
	uint64_t ndirect = 0;
	const bool rd = api & 1;
	const size_t nl = api < 2 ? 1 : api < 4 ? 4 : 8;
	const size_t nr = api < 4 ? 1 : 8;
	struct rw r;
	struct fid_mr *mr;
	uint8_t *tb, *lb, *xt, *xl, *stream;
	size_t sizes[12], nsizes = 0, is, wc;
	uint64_t key, nops = 0;

	tnbc_env.cma = !chunked;
	rw_open(&r, NULL);
	tu_engine_stats(r.w.d.domain, &st0);
	is = r.w.d.info->tx_attr->inject_size;
	/* a write chunk carries the request header too */
	wc = is - sizeof(struct tnbc_rma_req);
	sizes[nsizes++] = 0;
	sizes[nsizes++] = 1;
	sizes[nsizes++] = wc - 1;
	sizes[nsizes++] = wc;
	sizes[nsizes++] = wc + 1;
	sizes[nsizes++] = 8087;
	sizes[nsizes++] = 8088;
	sizes[nsizes++] = 8089;
	sizes[nsizes++] = 16 * wc + 1; /* one chunk past a full window */
	sizes[nsizes++] = 64 * 1024;
	sizes[nsizes++] = RW_MAX;
	tb = malloc(RW_BUF);
	lb = malloc(RW_BUF);
	xt = malloc(RW_BUF);
	xl = malloc(RW_BUF);
	stream = malloc(RW_MAX);
	ck_assert(tb && lb && xt && xl && stream);
	mr = rw_mr(&r, tb, RW_BUF, RW_RW, 0);
	key = fi_mr_key(mr);

	for (size_t k = 0; k < nsizes; k++) {
		size_t len = sizes[k];
		size_t loff[8], llen[8], roff[8], rlen[8];
		struct iovec iov[8];
		struct fi_rma_iov riov[8];
		struct fi_msg_rma msg;
		void *ctx = &rw_ctx[k];
		char what[64];

		ck_assert(len <= RW_MAX);
		tu_fill(stream, len, 100 + (uint32_t)(k * 7 + api));
		rw_layout(len, nl, rw_wl, loff, llen);
		rw_layout(len, nr, rw_wr, roff, rlen);
		tu_fill(tb, RW_BUF, 1000 + (uint32_t)k);
		tu_fill(lb, RW_BUF, 2000 + (uint32_t)k);
		if (rd)
			rw_scatter(tb, stream, nr, roff, rlen);
		else
			rw_scatter(lb, stream, nl, loff, llen);
		memcpy(xt, tb, RW_BUF);
		memcpy(xl, lb, RW_BUF);
		if (rd)
			rw_scatter(xl, stream, nl, loff, llen);
		else
			rw_scatter(xt, stream, nr, roff, rlen);
		for (size_t i = 0; i < nl; i++)
			iov[i] = (struct iovec){.iov_base = lb + loff[i],
						.iov_len = llen[i]};
		for (size_t i = 0; i < nr; i++)
			riov[i] = (struct fi_rma_iov){
				.addr = rw_addr(&r, tb, roff[i]),
				.len = rlen[i],
				.key = key};
		msg = (struct fi_msg_rma){.msg_iov = iov,
					  .iov_count = nl,
					  .addr = r.w.addr[TGT],
					  .rma_iov = riov,
					  .rma_iov_count = nr,
					  .context = ctx};

		switch (api) {
		case 0:
			RW_POST(fi_write(rw_ep(&r, INI), iov[0].iov_base, len,
					 NULL, r.w.addr[TGT], riov[0].addr, key,
					 ctx));
			break;
		case 1:
			RW_POST(fi_read(rw_ep(&r, INI), iov[0].iov_base, len,
					NULL, r.w.addr[TGT], riov[0].addr, key,
					ctx));
			break;
		case 2:
			RW_POST(fi_writev(rw_ep(&r, INI), iov, NULL, nl,
					  r.w.addr[TGT], riov[0].addr, key,
					  ctx));
			break;
		case 3:
			RW_POST(fi_readv(rw_ep(&r, INI), iov, NULL, nl,
					 r.w.addr[TGT], riov[0].addr, key,
					 ctx));
			break;
		case 4:
			RW_POST(fi_writemsg(rw_ep(&r, INI), &msg,
					    FI_COMPLETION));
			break;
		default:
			RW_POST(fi_readmsg(rw_ep(&r, INI), &msg,
					   FI_COMPLETION));
			break;
		}
		rw_expect(&r, INI, ctx, FI_RMA | (rd ? FI_READ : FI_WRITE));
		nops++;
		ndirect += tu_pulls() && !chunked && rd && len > is;
		snprintf(what, sizeof(what), "%s target", rw_api_name[api]);
		rw_same(tb, xt, RW_BUF, what, len);
		snprintf(what, sizeof(what), "%s local", rw_api_name[api]);
		rw_same(lb, xl, RW_BUF, what, len);
		rw_cntr_is(rd ? r.rd[INI] : r.wr[INI], nops, 0,
			   "initiator's counter");
		rw_cntr_is(rd ? r.wr[INI] : r.rd[INI], 0, 0,
			   "initiator's other counter");
	}
	/* plain RMA makes no entry at the target, and no sends */
	ck_assert(tu_cq_quiet(r.w.ep[TGT].rx_cq, TU_QUIET_MS));
	ck_assert(tu_cq_quiet(r.w.ep[INI].tx_cq, 0));
	rw_cntr_is(r.snd[INI], 0, 0, "FI_SEND counter");
	rw_cntr_is(r.wr[TGT], 0, 0, "target's FI_WRITE counter");
	rw_cntr_is(r.rd[TGT], 0, 0, "target's FI_READ counter");
	tu_engine_stats(r.w.d.domain, &st);
	ck_assert_uint_eq(st.rma_direct - st0.rma_direct, ndirect);
	if (!chunked && rd && tu_pulls())
		ck_assert_uint_gt(ndirect, 0);

	rw_close_fid(&mr->fid);
	free(tb);
	free(lb);
	free(xt);
	free(xl);
	free(stream);
	rw_close(&r);
	tnbc_env.cma = tu_env_defaults.cma;
}
END_TEST

/*
 * Direct reads.  From an endpoint that counts RMA events (only chunks say
 * when the data has gone) one is answered FI_ENOSYS, and the initiator
 * sends it again as chunks, with the right data and one completion, and
 * its later reads as chunks too; the target's remote-read counter counts
 * each once.  Otherwise a direct read of an unknown key or past a region
 * fails as chunks do, and, checked before anything moves, leaves the
 * local buffer as it was.
 */
START_TEST(rma_direct_fallback)
{
	const size_t len = 256 * 1024;
	struct rw_opts o = {.events = true};
	struct fi_tnbc_engine_stats st0, st;
	uint8_t *tb = malloc(len), *lb = malloc(len), *snap = malloc(len);
	struct fid_mr *mr;
	struct rw r_fb;
	uint64_t key;

	ck_assert(tb && lb && snap);
	for (int ev = 0; ev < 2; ev++) {
		o.events = ev;
		rw_open(&r_fb, &o);
		tu_engine_stats(r_fb.w.d.domain, &st0);
		tu_fill(tb, len, 71);
		mr = rw_mr(&r_fb, tb, len, RW_RW, 0);
		key = fi_mr_key(mr);
		for (uint32_t k = 0; k < 2; k++) {
			memset(lb, 0, len);
			RW_POST(fi_read(rw_ep(&r_fb, INI), lb, len, NULL,
					r_fb.w.addr[TGT], rw_addr(&r_fb, tb, 0),
					key, &rw_ctx[k]));
			rw_expect(&r_fb, INI, &rw_ctx[k], FI_RMA | FI_READ);
			ck_assert_uint_eq(tu_check(lb, len, 71, 0), (size_t)-1);
			tu_engine_stats(r_fb.w.d.domain, &st);
			ck_assert_uint_eq(st.rma_direct - st0.rma_direct,
					  ev || !tu_pulls() ? 0 : k + 1);
			if (ev)
				rw_cntr_is(r_fb.rrd[TGT], k + 1, 0,
					   "target's remote-read counter");
		}
		tu_fill(lb, len, 72);
		memcpy(snap, lb, len);
		RW_POST(fi_read(rw_ep(&r_fb, INI), lb, len, NULL,
				r_fb.w.addr[TGT], rw_addr(&r_fb, tb, 0),
				key + 99, &rw_ctx[2]));
		rw_expect_err(&r_fb, INI, &rw_ctx[2], FI_EKEYREJECTED,
			      FI_RMA | FI_READ, "large read, unknown key");
		RW_POST(fi_read(rw_ep(&r_fb, INI), lb, len, NULL,
				r_fb.w.addr[TGT], rw_addr(&r_fb, tb, 8), key,
				&rw_ctx[3]));
		rw_expect_err(&r_fb, INI, &rw_ctx[3], FI_EINVAL,
			      FI_RMA | FI_READ, "large read past the end");
		/* a direct read fails whole, before any byte lands (chunks
		 * inside the region land before the last one fails) */
		if (!ev && tu_pulls())
			ck_assert_mem_eq(lb, snap, len);
		rw_close_fid(&mr->fid);
		rw_close(&r_fb);
	}
	free(tb);
	free(lb);
	free(snap);
}
END_TEST

/* rma_iov_limit is 8: 8 local and 8 remote pieces work, 9 do not; the
 * local and remote lengths must agree. */
START_TEST(rma_iov_limit)
{
	struct rw r;
	struct fid_mr *mr;
	uint8_t tb[256], snap[256], lb[256];
	struct iovec iov[9];
	struct fi_rma_iov riov[9];
	struct fi_ioc ioc[2], res[2], cmp[2];
	struct fi_rma_ioc rioc[2];
	struct fi_msg_rma msg;
	struct fi_msg_atomic am;
	uint64_t key;
	ssize_t ret;

	rw_open(&r, NULL);
	ck_assert_uint_eq(r.w.d.info->tx_attr->rma_iov_limit, 8);
	ck_assert_uint_ge(r.w.d.info->tx_attr->iov_limit, 8);
	tu_fill(tb, sizeof(tb), 1);
	tu_fill(lb, sizeof(lb), 2);
	memcpy(snap, tb, sizeof(tb));
	mr = rw_mr(&r, tb, sizeof(tb), RW_RW, 0);
	key = fi_mr_key(mr);
	for (int i = 0; i < 9; i++) {
		iov[i] = (struct iovec){.iov_base = lb + 20 * i, .iov_len = 3};
		riov[i] =
			(struct fi_rma_iov){.addr = rw_addr(&r, tb, 20 * i + 7),
					    .len = 3,
					    .key = key};
	}
	msg = (struct fi_msg_rma){.msg_iov = iov,
				  .iov_count = 9,
				  .addr = r.w.addr[TGT],
				  .rma_iov = riov,
				  .rma_iov_count = 8,
				  .context = &rw_ctx[0]};
	riov[7].len = 6; /* 9 * 3 bytes both sides */
	ret = fi_writemsg(rw_ep(&r, INI), &msg, 0);
	ck_assert_int_eq(ret, -FI_EINVAL);
	ret = fi_readmsg(rw_ep(&r, INI), &msg, 0);
	ck_assert_int_eq(ret, -FI_EINVAL);
	ret = fi_writev(rw_ep(&r, INI), iov, NULL, 9, r.w.addr[TGT],
			riov[0].addr, key, &rw_ctx[0]);
	ck_assert_int_eq(ret, -FI_EINVAL);
	ret = fi_readv(rw_ep(&r, INI), iov, NULL, 9, r.w.addr[TGT],
		       riov[0].addr, key, &rw_ctx[0]);
	ck_assert_int_eq(ret, -FI_EINVAL);
	msg.iov_count = 8;
	riov[7].len = 3;
	riov[8].len = 3;
	msg.rma_iov_count = 9;
	ret = fi_writemsg(rw_ep(&r, INI), &msg, 0);
	ck_assert_int_eq(ret, -FI_EINVAL);

	/* local 24 bytes, remote 23 or 25 */
	msg.rma_iov_count = 8;
	riov[7].len = 2;
	ck_assert_int_eq(fi_writemsg(rw_ep(&r, INI), &msg, 0), -FI_EINVAL);
	ck_assert_int_eq(fi_readmsg(rw_ep(&r, INI), &msg, 0), -FI_EINVAL);
	riov[7].len = 4;
	ck_assert_int_eq(fi_writemsg(rw_ep(&r, INI), &msg, 0), -FI_EINVAL);
	ck_assert_int_eq(fi_readmsg(rw_ep(&r, INI), &msg, 0), -FI_EINVAL);

	/* atomics: operands, results or compare values of another count */
	ioc[0] = (struct fi_ioc){.addr = lb, .count = 2};
	ioc[1] = (struct fi_ioc){.addr = lb + 64, .count = 1};
	res[0] = (struct fi_ioc){.addr = lb + 128, .count = 3};
	cmp[0] = (struct fi_ioc){.addr = lb + 160, .count = 3};
	rioc[0] = (struct fi_rma_ioc){
		.addr = rw_addr(&r, tb, 8), .count = 2, .key = key};
	rioc[1] = (struct fi_rma_ioc){
		.addr = rw_addr(&r, tb, 64), .count = 2, .key = key};
	am = (struct fi_msg_atomic){.msg_iov = ioc,
				    .iov_count = 2,
				    .addr = r.w.addr[TGT],
				    .rma_iov = rioc,
				    .rma_iov_count = 2,
				    .datatype = FI_UINT64,
				    .op = FI_SUM,
				    .context = &rw_ctx[1]};
	ck_assert_int_eq(fi_atomicmsg(rw_ep(&r, INI), &am, 0), -FI_EINVAL);
	rioc[1].count = 1; /* 3 = 3 */
	res[0].count = 2;
	ck_assert_int_eq(
		fi_fetch_atomicmsg(rw_ep(&r, INI), &am, res, NULL, 1, 0),
		-FI_EINVAL);
	res[0].count = 3;
	cmp[0].count = 4;
	am.op = FI_CSWAP;
	ck_assert_int_eq(fi_compare_atomicmsg(rw_ep(&r, INI), &am, cmp, NULL, 1,
					      res, NULL, 1, 0),
			 -FI_EINVAL);
	ck_assert(tu_cq_quiet(r.w.ep[INI].tx_cq, TU_QUIET_MS));
	rw_same(tb, snap, sizeof(tb), "target after rejected posts", 0);

	/* exactly 8 and 8: works */
	riov[7].len = 3;
	msg.iov_count = 8;
	msg.rma_iov_count = 8;
	RW_POST(fi_writemsg(rw_ep(&r, INI), &msg, 0));
	rw_expect(&r, INI, &rw_ctx[0], FI_RMA | FI_WRITE);
	for (int i = 0; i < 8; i++) {
		ck_assert_mem_eq(tb + 20 * i + 7, lb + 20 * i, 3);
		ck_assert_mem_eq(tb + 20 * i + 10, snap + 20 * i + 10, 17);
	}
	rw_cntr_is(r.wr[INI], 1, 0, "FI_WRITE counter");
	rw_close_fid(&mr->fid);
	rw_close(&r);
}
END_TEST

/* fi_inject_write: the buffer is reusable on return, no CQ entry, the
 * FI_WRITE counter counts it; fi_inject_writedata and fi_inject_atomic
 * likewise. */
START_TEST(rma_inject)
{
	static const size_t sizes[] = {1, 64, 1000, 4000};
	struct rw r;
	struct fid_mr *mr;
	uint8_t *tb, *snap, src[4096];
	uint64_t key, n = 0, v[3], t64[3];
	struct fi_cq_tagged_entry e;
	size_t off = 16, is;
	ssize_t ret;

	rw_open(&r, NULL);
	is = r.w.d.info->tx_attr->inject_size;
	tb = calloc(1, 65536);
	snap = malloc(65536);
	ck_assert(tb && snap);
	tu_fill(tb, 65536, 3);
	memcpy(snap, tb, 65536);
	mr = rw_mr(&r, tb, 65536, RW_RW, 0);
	key = fi_mr_key(mr);

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len = sizes[k];

		tu_fill(src, len, 40 + (uint32_t)k);
		RW_POST(fi_inject_write(rw_ep(&r, INI), src, len, r.w.addr[TGT],
					rw_addr(&r, tb, off), key));
		memset(src, 0xee, sizeof(src)); /* the buffer is ours again */
		rw_cntr_is(r.wr[INI], ++n, 0, "FI_WRITE counter (inject)");
		ck_assert_msg(tu_check(tb + off, len, 40 + (uint32_t)k, 0) ==
				      (size_t)-1,
			      "fi_inject_write of %zu bytes: wrong data", len);
		memcpy(snap + off, tb + off, len);
		rw_same(tb, snap, 65536, "target around inject", len);
		off += len + 3;
	}
	ck_assert_msg(tu_cq_quiet(r.w.ep[INI].tx_cq, TU_QUIET_MS),
		      "fi_inject_write wrote a CQ entry");

	/* remote CQ data, injected */
	tu_fill(src, 24, 77);
	RW_POST(fi_inject_writedata(rw_ep(&r, INI), src, 24,
				    0x1122334455667788ull, r.w.addr[TGT],
				    rw_addr(&r, tb, 30000), key));
	memset(src, 0xee, 24);
	tu_cq_expect(r.w.ep[TGT].rx_cq, &e, NULL);
	ck_assert_uint_eq(e.flags & RW_FLAG_MASK,
			  FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	ck_assert_uint_eq(e.data, 0x1122334455667788ull);
	ck_assert(tu_check(tb + 30000, 24, 77, 0) == (size_t)-1);
	rw_cntr_is(r.wr[INI], ++n, 0, "FI_WRITE counter (injectdata)");
	ck_assert(tu_cq_quiet(r.w.ep[TGT].rx_cq, TU_QUIET_MS));

	/* injected atomic */
	memset(tb + 40000, 0, 24);
	for (int i = 0; i < 3; i++)
		v[i] = 1000 + i;
	RW_POST(fi_inject_atomic(rw_ep(&r, INI), v, 3, r.w.addr[TGT],
				 rw_addr(&r, tb, 40000), key, FI_UINT64,
				 FI_SUM));
	memset(v, 0xee, sizeof(v));
	rw_cntr_is(r.wr[INI], ++n, 0, "FI_WRITE counter (inject atomic)");
	memcpy(t64, tb + 40000, sizeof(t64));
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(t64[i], 1000 + i);
	ck_assert_msg(tu_cq_quiet(r.w.ep[INI].tx_cq, TU_QUIET_MS),
		      "an injected operation wrote a CQ entry");
	rw_cntr_is(r.rd[INI], 0, 0, "FI_READ counter");

	/* more than inject_size: refused at once */
	{
		uint8_t *big = calloc(1, is + 1);

		ck_assert_ptr_nonnull(big);
		ret = fi_inject_write(rw_ep(&r, INI), big, is + 1,
				      r.w.addr[TGT], rw_addr(&r, tb, 0), key);
		ck_assert_msg(ret < 0 && ret != -FI_EAGAIN,
			      "fi_inject_write(inject_size + 1): %zd", ret);
		free(big);
	}
	rw_cntr_is(r.wr[INI], n, 0, "FI_WRITE counter (refused inject)");
	rw_close_fid(&mr->fid);
	free(tb);
	free(snap);
	rw_close(&r);
}
END_TEST

/* inject_size (fi_endpoint(3)) bounds fi_inject_write and
 * fi_inject_writedata too: exactly inject_size bytes must be accepted. */
START_TEST(rma_inject_max)
{
	struct rw r;
	struct fid_mr *mr;
	uint8_t *tb, *src;
	uint64_t key;
	size_t is;
	ssize_t ret;

	rw_open(&r, NULL);
	is = r.w.d.info->tx_attr->inject_size;
	ck_assert_uint_gt(is, 0);
	tb = calloc(1, 2 * is + 64);
	src = malloc(is);
	ck_assert(tb && src);
	mr = rw_mr(&r, tb, 2 * is + 64, RW_RW, 0);
	key = fi_mr_key(mr);
	tu_fill(src, is, 9);
	ret = fi_inject_write(rw_ep(&r, INI), src, is, r.w.addr[TGT],
			      rw_addr(&r, tb, 0), key);
	ck_assert_msg(ret == 0, "fi_inject_write(inject_size = %zu): %zd (%s)",
		      is, ret, fi_strerror((int)-ret));
	memset(src, 0, is);
	rw_cntr_is(r.wr[INI], 1, 0, "FI_WRITE counter");
	ck_assert(tu_check(tb, is, 9, 0) == (size_t)-1);
	tu_fill(src, is, 10);
	ret = fi_inject_writedata(rw_ep(&r, INI), src, is, 5, r.w.addr[TGT],
				  rw_addr(&r, tb, is + 32), key);
	ck_assert_msg(ret == 0,
		      "fi_inject_writedata(inject_size = %zu): %zd (%s)", is,
		      ret, fi_strerror((int)-ret));
	rw_cntr_is(r.wr[INI], 2, 0, "FI_WRITE counter");
	ck_assert(tu_check(tb + is + 32, is, 10, 0) == (size_t)-1);
	rw_close_fid(&mr->fid);
	free(tb);
	free(src);
	rw_close(&r);
}
END_TEST

/* Remote CQ data: one target entry per operation, however many chunks,
 * written once the data is in place. */
START_TEST(rma_writedata)
{
	static const size_t sizes[] = {8, 8089, 65536 + 5};
	struct rw r;
	struct fid_mr *mr;
	uint8_t *tb, *src;
	uint64_t key;
	struct fi_cq_tagged_entry e;
	struct iovec iov[2];
	struct fi_rma_iov riov[3];
	struct fi_msg_rma msg;
	const size_t tlen = 4 * 65536;

	rw_open(&r, NULL);
	tb = calloc(1, tlen);
	src = malloc(tlen);
	ck_assert(tb && src);
	mr = rw_mr(&r, tb, tlen, RW_RW, 0);
	key = fi_mr_key(mr);

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len = sizes[k];
		uint64_t data = 0xdada000000000000ull + k;

		tu_fill(src, len, 50 + (uint32_t)k);
		RW_POST(fi_writedata(rw_ep(&r, INI), src, len, NULL, data,
				     r.w.addr[TGT], rw_addr(&r, tb, 1 + k), key,
				     &rw_ctx[k]));
		tu_cq_expect(r.w.ep[TGT].rx_cq, &e, NULL);
		/* the data is there when the entry is */
		ck_assert_msg(tu_check(tb + 1 + k, len, 50 + (uint32_t)k, 0) ==
				      (size_t)-1,
			      "fi_writedata %zu bytes: data not in place", len);
		ck_assert_uint_eq(e.flags & RW_FLAG_MASK,
				  FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
		ck_assert_uint_eq(e.data, data);
		rw_expect(&r, INI, &rw_ctx[k], FI_RMA | FI_WRITE);
		ck_assert_msg(tu_cq_quiet(r.w.ep[TGT].rx_cq, TU_QUIET_MS),
			      "fi_writedata of %zu bytes: more than one "
			      "target entry",
			      len);
	}

	/* fi_writemsg with FI_REMOTE_CQ_DATA, several segments */
	tu_fill(src, 30000, 60);
	iov[0] = (struct iovec){.iov_base = src, .iov_len = 10000};
	iov[1] = (struct iovec){.iov_base = src + 10000, .iov_len = 20000};
	riov[0] = (struct fi_rma_iov){
		.addr = rw_addr(&r, tb, 100000), .len = 9000, .key = key};
	riov[1] = (struct fi_rma_iov){
		.addr = rw_addr(&r, tb, 120000), .len = 17000, .key = key};
	riov[2] = (struct fi_rma_iov){
		.addr = rw_addr(&r, tb, 150000), .len = 4000, .key = key};
	msg = (struct fi_msg_rma){.msg_iov = iov,
				  .iov_count = 2,
				  .addr = r.w.addr[TGT],
				  .rma_iov = riov,
				  .rma_iov_count = 3,
				  .context = &rw_ctx[8],
				  .data = 0xfeed};
	RW_POST(fi_writemsg(rw_ep(&r, INI), &msg,
			    FI_REMOTE_CQ_DATA | FI_COMPLETION));
	tu_cq_expect(r.w.ep[TGT].rx_cq, &e, NULL);
	ck_assert_uint_eq(e.flags & RW_FLAG_MASK,
			  FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	ck_assert_uint_eq(e.data, 0xfeed);
	ck_assert(tu_check(tb + 100000, 9000, 60, 0) == (size_t)-1);
	ck_assert(tu_check(tb + 120000, 17000, 60, 9000) == (size_t)-1);
	ck_assert(tu_check(tb + 150000, 4000, 60, 26000) == (size_t)-1);
	rw_expect(&r, INI, &rw_ctx[8], FI_RMA | FI_WRITE);

	/* without data: nothing at the target */
	RW_POST(fi_write(rw_ep(&r, INI), src, 100, NULL, r.w.addr[TGT],
			 rw_addr(&r, tb, 0), key, &rw_ctx[9]));
	rw_expect(&r, INI, &rw_ctx[9], FI_RMA | FI_WRITE);
	ck_assert(tu_cq_quiet(r.w.ep[TGT].rx_cq, TU_QUIET_MS));
	rw_close_fid(&mr->fid);
	free(tb);
	free(src);
	rw_close(&r);
}
END_TEST

/* A zero-length write still carries its remote CQ data (fi_rma(3):
 * the data is delivered with the completion at the target). */
START_TEST(rma_writedata_zero)
{
	struct rw r;
	struct fid_mr *mr;
	uint8_t tb[64], src[8] = {0};
	struct fi_cq_tagged_entry e;
	ssize_t ret;
	uint64_t key;

	rw_open(&r, NULL);
	mr = rw_mr(&r, tb, sizeof(tb), RW_RW, 0);
	key = fi_mr_key(mr);
	RW_POST(fi_writedata(rw_ep(&r, INI), src, 0, NULL, 0xabc, r.w.addr[TGT],
			     rw_addr(&r, tb, 0), key, &rw_ctx[0]));
	rw_expect(&r, INI, &rw_ctx[0], FI_RMA | FI_WRITE);
	ret = tu_cq_wait(r.w.ep[TGT].rx_cq, &e, NULL, NULL, 1000);
	ck_assert_msg(ret == 1,
		      "zero-length fi_writedata: no target entry (%zd)", ret);
	ck_assert_uint_eq(e.flags & RW_FLAG_MASK,
			  FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	ck_assert_uint_eq(e.data, 0xabc);
	RW_POST(fi_inject_writedata(rw_ep(&r, INI), src, 0, 0xabd,
				    r.w.addr[TGT], rw_addr(&r, tb, 0), key));
	ret = tu_cq_wait(r.w.ep[TGT].rx_cq, &e, NULL, NULL, 1000);
	ck_assert_msg(ret == 1,
		      "zero-length fi_inject_writedata: no target entry (%zd)",
		      ret);
	ck_assert_uint_eq(e.data, 0xabd);
	rw_close_fid(&mr->fid);
	rw_close(&r);
}
END_TEST

/* Completion flags of each kind of operation, and which counter counts
 * it (fi_endpoint(3): FI_WRITE = RMA writes and base atomics, FI_READ =
 * RMA reads, fetching and compare atomics; errors count as errors). */
START_TEST(rma_cntr_flags)
{
	struct rw r;
	struct fid_mr *mr;
	uint64_t tb[64] = {0}, lb[8] = {0}, v = 5, old = 0, cmpv = 0;
	struct iovec iov[2];
	uint64_t key;

	rw_open(&r, NULL);
	mr = rw_mr(&r, tb, sizeof(tb), RW_RW, 0);
	key = fi_mr_key(mr);
	for (int i = 0; i < 8; i++)
		lb[i] = 0x100 + i;

#define EXPECT_CNTRS(w, r_)                                                    \
	do {                                                                   \
		rw_cntr_is(r.wr[INI], (w), 0, "FI_WRITE counter");             \
		rw_cntr_is(r.rd[INI], (r_), 0, "FI_READ counter");             \
	} while (0)

	RW_POST(fi_write(rw_ep(&r, INI), lb, 16, NULL, r.w.addr[TGT],
			 rw_addr(&r, tb, 0), key, &rw_ctx[0]));
	rw_expect(&r, INI, &rw_ctx[0], FI_RMA | FI_WRITE);
	EXPECT_CNTRS(1, 0);
	RW_POST(fi_read(rw_ep(&r, INI), lb + 4, 16, NULL, r.w.addr[TGT],
			rw_addr(&r, tb, 0), key, &rw_ctx[1]));
	rw_expect(&r, INI, &rw_ctx[1], FI_RMA | FI_READ);
	ck_assert_uint_eq(lb[4], 0x100);
	ck_assert_uint_eq(lb[5], 0x101);
	EXPECT_CNTRS(1, 1);
	iov[0] = (struct iovec){.iov_base = &lb[0], .iov_len = 8};
	iov[1] = (struct iovec){.iov_base = &lb[2], .iov_len = 8};
	RW_POST(fi_writev(rw_ep(&r, INI), iov, NULL, 2, r.w.addr[TGT],
			  rw_addr(&r, tb, 16), key, &rw_ctx[2]));
	rw_expect(&r, INI, &rw_ctx[2], FI_RMA | FI_WRITE);
	ck_assert_uint_eq(tb[2], 0x100);
	ck_assert_uint_eq(tb[3], 0x102);
	EXPECT_CNTRS(2, 1);
	RW_POST(fi_readv(rw_ep(&r, INI), iov, NULL, 2, r.w.addr[TGT],
			 rw_addr(&r, tb, 8), key, &rw_ctx[3]));
	rw_expect(&r, INI, &rw_ctx[3], FI_RMA | FI_READ);
	ck_assert_uint_eq(lb[0], 0x101);
	ck_assert_uint_eq(lb[2], 0x100);
	EXPECT_CNTRS(2, 2);

	RW_POST(fi_atomic(rw_ep(&r, INI), &v, 1, NULL, r.w.addr[TGT],
			  rw_addr(&r, tb, 80), key, FI_UINT64, FI_SUM,
			  &rw_ctx[4]));
	rw_expect(&r, INI, &rw_ctx[4], FI_ATOMIC | FI_WRITE);
	ck_assert_uint_eq(tb[10], 5);
	EXPECT_CNTRS(3, 2);
	RW_POST(fi_fetch_atomic(rw_ep(&r, INI), &v, 1, NULL, &old, NULL,
				r.w.addr[TGT], rw_addr(&r, tb, 80), key,
				FI_UINT64, FI_SUM, &rw_ctx[5]));
	rw_expect(&r, INI, &rw_ctx[5], FI_ATOMIC | FI_READ);
	ck_assert_uint_eq(old, 5);
	ck_assert_uint_eq(tb[10], 10);
	EXPECT_CNTRS(3, 3);
	RW_POST(fi_fetch_atomic(rw_ep(&r, INI), NULL, 1, NULL, &old, NULL,
				r.w.addr[TGT], rw_addr(&r, tb, 80), key,
				FI_UINT64, FI_ATOMIC_READ, &rw_ctx[6]));
	rw_expect(&r, INI, &rw_ctx[6], FI_ATOMIC | FI_READ);
	ck_assert_uint_eq(old, 10);
	EXPECT_CNTRS(3, 4);
	cmpv = 10;
	v = 99;
	RW_POST(fi_compare_atomic(rw_ep(&r, INI), &v, 1, NULL, &cmpv, NULL,
				  &old, NULL, r.w.addr[TGT],
				  rw_addr(&r, tb, 80), key, FI_UINT64, FI_CSWAP,
				  &rw_ctx[7]));
	rw_expect(&r, INI, &rw_ctx[7], FI_ATOMIC | FI_READ);
	ck_assert_uint_eq(old, 10);
	ck_assert_uint_eq(tb[10], 99);
	EXPECT_CNTRS(3, 5);

	RW_POST(fi_inject_write(rw_ep(&r, INI), lb, 8, r.w.addr[TGT],
				rw_addr(&r, tb, 88), key));
	EXPECT_CNTRS(4, 5);
	RW_POST(fi_inject_atomic(rw_ep(&r, INI), &v, 1, r.w.addr[TGT],
				 rw_addr(&r, tb, 96), key, FI_UINT64, FI_SUM));
	EXPECT_CNTRS(5, 5);
	ck_assert_uint_eq(tb[11], 0x101);
	ck_assert_uint_eq(tb[12], 99);
	ck_assert_msg(tu_cq_quiet(r.w.ep[INI].tx_cq, TU_QUIET_MS),
		      "an injected operation wrote a CQ entry");

	/* failures count as errors on the same counters */
	RW_POST(fi_write(rw_ep(&r, INI), lb, 8, NULL, r.w.addr[TGT],
			 rw_addr(&r, tb, 0), key + 12345, &rw_ctx[8]));
	rw_expect_err(&r, INI, &rw_ctx[8], FI_EKEYREJECTED, FI_RMA | FI_WRITE,
		      "write, unknown key");
	rw_cntr_is(r.wr[INI], 5, 1, "FI_WRITE counter after an error");
	RW_POST(fi_fetch_atomic(rw_ep(&r, INI), &v, 1, NULL, &old, NULL,
				r.w.addr[TGT], rw_addr(&r, tb, 0), key + 12345,
				FI_UINT64, FI_SUM, &rw_ctx[9]));
	rw_expect_err(&r, INI, &rw_ctx[9], FI_EKEYREJECTED, FI_ATOMIC | FI_READ,
		      "fetch atomic, unknown key");
	rw_cntr_is(r.rd[INI], 5, 1, "FI_READ counter after an error");
#undef EXPECT_CNTRS

	rw_cntr_is(r.snd[INI], 0, 0, "FI_SEND counter");
	rw_cntr_is(r.wr[TGT], 0, 0, "target's FI_WRITE counter");
	rw_cntr_is(r.rd[TGT], 0, 0, "target's FI_READ counter");
	ck_assert(tu_cq_quiet(r.w.ep[TGT].rx_cq, 0));
	ck_assert(tu_cq_quiet(r.w.ep[TGT].tx_cq, 0));
	rw_close_fid(&mr->fid);
	rw_close(&r);
}
END_TEST

/* FI_SELECTIVE_COMPLETION: only operations with FI_COMPLETION report
 * success; counters count all; failures always report. */
START_TEST(rma_selective)
{
	struct rw_opts o = {.cq_bind_flags = FI_SELECTIVE_COMPLETION};
	struct rw r;
	struct fid_mr *mr;
	uint64_t tb[16] = {0}, lb[4] = {1, 2, 3, 4}, old = 0, v = 3;
	struct iovec iov = {.iov_base = lb, .iov_len = 16};
	struct fi_rma_iov riov;
	struct fi_msg_rma msg;
	struct fi_ioc ioc = {.addr = &v, .count = 1};
	struct fi_ioc res = {.addr = &old, .count = 1};
	struct fi_rma_ioc rioc;
	struct fi_msg_atomic am;
	uint64_t key;

	rw_open(&r, &o);
	ck_assert_uint_eq(r.w.d.info->tx_attr->op_flags & FI_COMPLETION, 0);
	mr = rw_mr(&r, tb, sizeof(tb), RW_RW, 0);
	key = fi_mr_key(mr);
	riov = (struct fi_rma_iov){
		.addr = rw_addr(&r, tb, 0), .len = 16, .key = key};
	rioc = (struct fi_rma_ioc){
		.addr = rw_addr(&r, tb, 64), .count = 1, .key = key};
	msg = (struct fi_msg_rma){.msg_iov = &iov,
				  .iov_count = 1,
				  .addr = r.w.addr[TGT],
				  .rma_iov = &riov,
				  .rma_iov_count = 1,
				  .context = &rw_ctx[0]};
	am = (struct fi_msg_atomic){.msg_iov = &ioc,
				    .iov_count = 1,
				    .addr = r.w.addr[TGT],
				    .rma_iov = &rioc,
				    .rma_iov_count = 1,
				    .datatype = FI_UINT64,
				    .op = FI_SUM,
				    .context = &rw_ctx[1]};

	RW_POST(fi_write(rw_ep(&r, INI), lb, 16, NULL, r.w.addr[TGT],
			 rw_addr(&r, tb, 0), key, &rw_ctx[2]));
	rw_cntr_is(r.wr[INI], 1, 0, "FI_WRITE counter");
	ck_assert_uint_eq(tb[1], 2);
	RW_POST(fi_read(rw_ep(&r, INI), lb + 2, 8, NULL, r.w.addr[TGT],
			rw_addr(&r, tb, 0), key, &rw_ctx[3]));
	rw_cntr_is(r.rd[INI], 1, 0, "FI_READ counter");
	RW_POST(fi_writemsg(rw_ep(&r, INI), &msg, 0));
	rw_cntr_is(r.wr[INI], 2, 0, "FI_WRITE counter");
	RW_POST(fi_readmsg(rw_ep(&r, INI), &msg, 0));
	rw_cntr_is(r.rd[INI], 2, 0, "FI_READ counter");
	RW_POST(fi_atomicmsg(rw_ep(&r, INI), &am, 0));
	rw_cntr_is(r.wr[INI], 3, 0, "FI_WRITE counter");
	RW_POST(fi_fetch_atomicmsg(rw_ep(&r, INI), &am, &res, NULL, 1, 0));
	rw_cntr_is(r.rd[INI], 3, 0, "FI_READ counter");
	ck_assert_uint_eq(old, 3);
	ck_assert_msg(tu_cq_quiet(r.w.ep[INI].tx_cq, TU_QUIET_MS),
		      "an operation without FI_COMPLETION was reported");

	RW_POST(fi_writemsg(rw_ep(&r, INI), &msg, FI_COMPLETION));
	rw_expect(&r, INI, &rw_ctx[0], FI_RMA | FI_WRITE);
	RW_POST(fi_readmsg(rw_ep(&r, INI), &msg, FI_COMPLETION));
	rw_expect(&r, INI, &rw_ctx[0], FI_RMA | FI_READ);
	RW_POST(fi_atomicmsg(rw_ep(&r, INI), &am, FI_COMPLETION));
	rw_expect(&r, INI, &rw_ctx[1], FI_ATOMIC | FI_WRITE);
	RW_POST(fi_fetch_atomicmsg(rw_ep(&r, INI), &am, &res, NULL, 1,
				   FI_COMPLETION));
	rw_expect(&r, INI, &rw_ctx[1], FI_ATOMIC | FI_READ);
	ck_assert_uint_eq(old, 9);
	ck_assert_uint_eq(tb[8], 12);

	/* a failure reports without FI_COMPLETION */
	riov.key = key + 777;
	RW_POST(fi_writemsg(rw_ep(&r, INI), &msg, 0));
	rw_expect_err(&r, INI, &rw_ctx[0], FI_EKEYREJECTED, FI_RMA | FI_WRITE,
		      "selective write, unknown key");
	rw_cntr_is(r.wr[INI], 5, 1, "FI_WRITE counter");
	ck_assert(tu_cq_quiet(r.w.ep[INI].tx_cq, TU_QUIET_MS));
	rw_close_fid(&mr->fid);
	rw_close(&r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* RMA events                                                           */

struct ev_state {
	struct fid_cntr *ma, *mb;
	uint64_t rwr, rrd, na, nb;
};

static void ev_check(struct rw *r, const struct ev_state *s, const char *step)
{
	char what[96];

	snprintf(what, sizeof(what), "%s: target FI_REMOTE_WRITE counter",
		 step);
	rw_cntr_is(r->rwr[TGT], s->rwr, 0, what);
	snprintf(what, sizeof(what), "%s: target FI_REMOTE_READ counter", step);
	rw_cntr_is(r->rrd[TGT], s->rrd, 0, what);
	snprintf(what, sizeof(what), "%s: region A counter", step);
	rw_cntr_is(s->ma, s->na, 0, what);
	if (s->mb) {
		snprintf(what, sizeof(what), "%s: region B counter", step);
		rw_cntr_is(s->mb, s->nb, 0, what);
	}
	/* the initiator is no target */
	snprintf(what, sizeof(what), "%s: initiator FI_REMOTE_WRITE", step);
	rw_cntr_is(r->rwr[INI], 0, 0, what);
	snprintf(what, sizeof(what), "%s: initiator FI_REMOTE_READ", step);
	rw_cntr_is(r->rrd[INI], 0, 0, what);
}

static void ev_mr_bind(struct fid_mr *mr, struct fid_cntr *c, uint64_t flags)
{
	int ret = fi_mr_bind(mr, &c->fid, flags);

	ck_assert_msg(ret == 0, "fi_mr_bind: %d (%s)", ret, fi_strerror(-ret));
	ck_assert_int_eq(fi_mr_enable(mr), 0);
}

/*
 * FI_RMA_EVENT: the target endpoint's FI_REMOTE_WRITE / FI_REMOTE_READ
 * counters and a counter bound to a region count each remote operation
 * once, however many chunks it takes.  Region A's counter is bound with
 * FI_REMOTE_WRITE, region B's with FI_REMOTE_READ.
 */
START_TEST(rma_events)
{
	struct rw_opts o = {.events = true};
	struct rw r;
	struct ev_state s = {0};
	struct fid_mr *mra, *mrb;
	const size_t alen = 256 * 1024;
	uint8_t *a, *src, b[256];
	uint64_t ka, kb, v[16384], old; /* 3 atomic chunks and one more */
	struct iovec iov;
	struct fi_rma_iov riov[3];
	struct fi_msg_rma msg;
	struct fi_cq_tagged_entry e;
	size_t maxc = 0;

	rw_open(&r, &o);
	a = calloc(1, alen);
	src = malloc(alen);
	ck_assert(a && src);
	tu_fill(src, alen, 8);
	memset(b, 0, sizeof(b));
	mra = rw_mr(&r, a, alen, RW_RW, 0);
	mrb = rw_mr(&r, b, sizeof(b), RW_RW, 0);
	ka = fi_mr_key(mra);
	kb = fi_mr_key(mrb);
	s.ma = rw_cntr_open(&r);
	s.mb = rw_cntr_open(&r);
	ev_mr_bind(mra, s.ma, FI_REMOTE_WRITE);
	ev_mr_bind(mrb, s.mb, FI_REMOTE_READ);
	ev_check(&r, &s, "start");

	RW_POST(fi_write(rw_ep(&r, INI), src, 8, NULL, r.w.addr[TGT],
			 rw_addr(&r, a, 0), ka, &rw_ctx[0]));
	rw_expect(&r, INI, &rw_ctx[0], FI_RMA | FI_WRITE);
	s.rwr++;
	s.na++;
	ev_check(&r, &s, "8-byte write to A");

	RW_POST(fi_write(rw_ep(&r, INI), src, 100000, NULL, r.w.addr[TGT],
			 rw_addr(&r, a, 8), ka, &rw_ctx[1]));
	rw_expect(&r, INI, &rw_ctx[1], FI_RMA | FI_WRITE);
	s.rwr++;
	s.na++;
	ev_check(&r, &s, "100000-byte write to A");

	iov = (struct iovec){.iov_base = src, .iov_len = 30000};
	riov[0] = (struct fi_rma_iov){
		.addr = rw_addr(&r, a, 110000), .len = 10000, .key = ka};
	riov[1] = (struct fi_rma_iov){
		.addr = rw_addr(&r, a, 130000), .len = 15000, .key = ka};
	riov[2] = (struct fi_rma_iov){
		.addr = rw_addr(&r, a, 150000), .len = 5000, .key = ka};
	msg = (struct fi_msg_rma){.msg_iov = &iov,
				  .iov_count = 1,
				  .addr = r.w.addr[TGT],
				  .rma_iov = riov,
				  .rma_iov_count = 3,
				  .context = &rw_ctx[2]};
	RW_POST(fi_writemsg(rw_ep(&r, INI), &msg, FI_COMPLETION));
	rw_expect(&r, INI, &rw_ctx[2], FI_RMA | FI_WRITE);
	s.rwr++;
	s.na++;
	ev_check(&r, &s, "3-segment writemsg to A");

	RW_POST(fi_read(rw_ep(&r, INI), src, 100000, NULL, r.w.addr[TGT],
			rw_addr(&r, a, 0), ka, &rw_ctx[3]));
	rw_expect(&r, INI, &rw_ctx[3], FI_RMA | FI_READ);
	s.rrd++;
	ev_check(&r, &s, "100000-byte read of A");

	RW_POST(fi_read(rw_ep(&r, INI), src, 64, NULL, r.w.addr[TGT],
			rw_addr(&r, b, 0), kb, &rw_ctx[4]));
	rw_expect(&r, INI, &rw_ctx[4], FI_RMA | FI_READ);
	s.rrd++;
	s.nb++;
	ev_check(&r, &s, "read of B");

	RW_POST(fi_write(rw_ep(&r, INI), src, 64, NULL, r.w.addr[TGT],
			 rw_addr(&r, b, 0), kb, &rw_ctx[5]));
	rw_expect(&r, INI, &rw_ctx[5], FI_RMA | FI_WRITE);
	s.rwr++;
	ev_check(&r, &s, "write to B");

	v[0] = 1;
	RW_POST(fi_atomic(rw_ep(&r, INI), v, 1, NULL, r.w.addr[TGT],
			  rw_addr(&r, a, 0), ka, FI_UINT64, FI_SUM,
			  &rw_ctx[6]));
	rw_expect(&r, INI, &rw_ctx[6], FI_ATOMIC | FI_WRITE);
	s.rwr++;
	s.na++;
	ev_check(&r, &s, "atomic on A");

	ck_assert_int_eq(
		fi_atomicvalid(rw_ep(&r, INI), FI_UINT64, FI_SUM, &maxc), 0);
	maxc = 3 * maxc + 1;
	ck_assert_uint_le(maxc, sizeof(v) / sizeof(v[0]));
	for (size_t i = 0; i < maxc; i++)
		v[i] = i;
	RW_POST(fi_atomic(rw_ep(&r, INI), v, maxc, NULL, r.w.addr[TGT],
			  rw_addr(&r, a, 8), ka, FI_UINT64, FI_SUM,
			  &rw_ctx[7]));
	rw_expect(&r, INI, &rw_ctx[7], FI_ATOMIC | FI_WRITE);
	s.rwr++;
	s.na++;
	ev_check(&r, &s, "multi-chunk atomic on A");

	RW_POST(fi_fetch_atomic(rw_ep(&r, INI), NULL, 1, NULL, &old, NULL,
				r.w.addr[TGT], rw_addr(&r, b, 0), kb, FI_UINT64,
				FI_ATOMIC_READ, &rw_ctx[8]));
	rw_expect(&r, INI, &rw_ctx[8], FI_ATOMIC | FI_READ);
	s.rrd++;
	s.nb++;
	ev_check(&r, &s, "atomic read of B");

	/* failed operations are no events */
	RW_POST(fi_write(rw_ep(&r, INI), src, 16, NULL, r.w.addr[TGT],
			 rw_addr(&r, a, alen - 8), ka, &rw_ctx[9]));
	rw_expect_err(&r, INI, &rw_ctx[9], FI_EINVAL, FI_RMA | FI_WRITE,
		      "write past the end of A");
	RW_POST(fi_read(rw_ep(&r, INI), src, 16, NULL, r.w.addr[TGT],
			rw_addr(&r, b, 0), kb + 1000, &rw_ctx[10]));
	rw_expect_err(&r, INI, &rw_ctx[10], FI_EKEYREJECTED, FI_RMA | FI_READ,
		      "read with an unknown key");
	ev_check(&r, &s, "failed operations");

	RW_POST(fi_inject_write(rw_ep(&r, INI), src, 32, r.w.addr[TGT],
				rw_addr(&r, a, 64), ka));
	rw_cntr_is(r.wr[INI], 7, 1, "initiator FI_WRITE counter");
	s.rwr++;
	s.na++;
	ev_check(&r, &s, "injected write to A");

	RW_POST(fi_writedata(rw_ep(&r, INI), src, 20000, NULL, 42,
			     r.w.addr[TGT], rw_addr(&r, a, 1000), ka,
			     &rw_ctx[11]));
	rw_expect(&r, INI, &rw_ctx[11], FI_RMA | FI_WRITE);
	tu_cq_expect(r.w.ep[TGT].rx_cq, &e, NULL);
	ck_assert_uint_eq(e.data, 42);
	s.rwr++;
	s.na++;
	ev_check(&r, &s, "fi_writedata to A");

	rw_close_fid(&mra->fid);
	rw_close_fid(&mrb->fid);
	rw_close_fid(&s.ma->fid);
	rw_close_fid(&s.mb->fid);
	free(a);
	free(src);
	rw_close(&r);
}
END_TEST

/*
 * Fetching and compare atomics are remote reads for the endpoint's
 * counters (fi_endpoint(3): FI_REMOTE_READ counts "an RMA read, atomic
 * fetch, or atomic compare operation", FI_REMOTE_WRITE "an RMA write or
 * base atomic operation"), and remote writes for a region counter bound
 * with FI_REMOTE_WRITE (fi_mr(3): "a remote RMA write or atomic
 * operation modifies the memory region").
 */
START_TEST(rma_events_fetch)
{
	struct rw_opts o = {.events = true};
	struct rw r;
	struct ev_state s = {0};
	struct fid_mr *mra;
	uint64_t a[8] = {0}, v = 4, old = 1, cmpv = 4, ka;

	rw_open(&r, &o);
	mra = rw_mr(&r, a, sizeof(a), RW_RW, 0);
	ka = fi_mr_key(mra);
	s.ma = rw_cntr_open(&r);
	ev_mr_bind(mra, s.ma, FI_REMOTE_WRITE);

	RW_POST(fi_fetch_atomic(rw_ep(&r, INI), &v, 1, NULL, &old, NULL,
				r.w.addr[TGT], rw_addr(&r, a, 0), ka, FI_UINT64,
				FI_SUM, &rw_ctx[0]));
	rw_expect(&r, INI, &rw_ctx[0], FI_ATOMIC | FI_READ);
	ck_assert_uint_eq(old, 0);
	ck_assert_uint_eq(a[0], 4);
	s.rrd++;
	s.na++;
	ev_check(&r, &s, "fetch-add on A");

	v = 7;
	RW_POST(fi_compare_atomic(rw_ep(&r, INI), &v, 1, NULL, &cmpv, NULL,
				  &old, NULL, r.w.addr[TGT], rw_addr(&r, a, 0),
				  ka, FI_UINT64, FI_CSWAP, &rw_ctx[1]));
	rw_expect(&r, INI, &rw_ctx[1], FI_ATOMIC | FI_READ);
	ck_assert_uint_eq(old, 4);
	ck_assert_uint_eq(a[0], 7);
	s.rrd++;
	s.na++;
	ev_check(&r, &s, "compare-swap on A");

	rw_close_fid(&mra->fid);
	rw_close_fid(&s.ma->fid);
	rw_close(&r);
}
END_TEST

/* One writemsg whose segments lie in two regions is one event for the
 * endpoint and one for each region's counter. */
START_TEST(rma_events_multi_mr)
{
	struct rw_opts o = {.events = true};
	struct rw r;
	struct ev_state s = {0};
	struct fid_mr *mra, *mrb;
	uint8_t a[512], b[512], src[400];
	struct iovec iov = {.iov_base = src, .iov_len = 300};
	struct fi_rma_iov riov[2];
	struct fi_msg_rma msg;

	rw_open(&r, &o);
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	tu_fill(src, sizeof(src), 5);
	mra = rw_mr(&r, a, sizeof(a), RW_RW, 0);
	mrb = rw_mr(&r, b, sizeof(b), RW_RW, 0);
	s.ma = rw_cntr_open(&r);
	s.mb = rw_cntr_open(&r);
	ev_mr_bind(mra, s.ma, FI_REMOTE_WRITE);
	ev_mr_bind(mrb, s.mb, FI_REMOTE_WRITE);
	riov[0] = (struct fi_rma_iov){
		.addr = rw_addr(&r, a, 10), .len = 100, .key = fi_mr_key(mra)};
	riov[1] = (struct fi_rma_iov){
		.addr = rw_addr(&r, b, 20), .len = 200, .key = fi_mr_key(mrb)};
	msg = (struct fi_msg_rma){.msg_iov = &iov,
				  .iov_count = 1,
				  .addr = r.w.addr[TGT],
				  .rma_iov = riov,
				  .rma_iov_count = 2,
				  .context = &rw_ctx[0]};
	RW_POST(fi_writemsg(rw_ep(&r, INI), &msg, FI_COMPLETION));
	rw_expect(&r, INI, &rw_ctx[0], FI_RMA | FI_WRITE);
	ck_assert(tu_check(a + 10, 100, 5, 0) == (size_t)-1);
	ck_assert(tu_check(b + 20, 200, 5, 100) == (size_t)-1);
	s.rwr = 1;
	s.na = 1;
	s.nb = 1;
	ev_check(&r, &s, "writemsg to regions A and B");
	rw_close_fid(&mra->fid);
	rw_close_fid(&mrb->fid);
	rw_close_fid(&s.ma->fid);
	rw_close_fid(&s.mb->fid);
	rw_close(&r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Errors, addressing, keys                                             */

/*
 * Every failure the target detects becomes an error completion with the
 * operation's context and flags; the target region is left unchanged.
 */
START_TEST(rma_errors)
{
	struct rw r;
	struct fid_mr *mrw, *mro, *mwo;
	uint8_t rwb[4096], rob[4096], wob[4096], snap[3][4096];
	uint8_t *src, lb[256];
	const uint64_t krw = 0x100, kro = 0x101, kwo = 0x102, kbad = 0x999;
	uint64_t v[4] = {1, 2, 3, 4}, res[4], cmpv[4] = {0};
	uint64_t nw = 0, nr = 0, ew = 0, er = 0;
	struct iovec iov;
	struct fi_rma_iov riov[2];
	struct fi_msg_rma msg;
	int c = 0;

	rw_open(&r, NULL);
	src = malloc(65536);
	ck_assert_ptr_nonnull(src);
	tu_fill(src, 65536, 11);
	tu_fill(rwb, sizeof(rwb), 1);
	tu_fill(rob, sizeof(rob), 2);
	tu_fill(wob, sizeof(wob), 3);
	memcpy(snap[0], rwb, 4096);
	memcpy(snap[1], rob, 4096);
	memcpy(snap[2], wob, 4096);
	mrw = rw_mr(&r, rwb, sizeof(rwb), RW_RW, krw);
	mro = rw_mr(&r, rob, sizeof(rob), FI_REMOTE_READ, kro);
	mwo = rw_mr(&r, wob, sizeof(wob), FI_REMOTE_WRITE, kwo);
	ck_assert_uint_eq(fi_mr_key(mrw), krw);
	ck_assert_uint_eq(fi_mr_key(mro), kro);
	ck_assert_uint_eq(fi_mr_key(mwo), kwo);

#define WRITE_ERR(buf, off, len, key, err, what)                               \
	do {                                                                   \
		RW_POST(fi_write(rw_ep(&r, INI), src, (len), NULL,             \
				 r.w.addr[TGT], rw_addr(&r, (buf), (off)),     \
				 (key), &rw_ctx[c]));                          \
		rw_expect_err(&r, INI, &rw_ctx[c], (err), FI_RMA | FI_WRITE,   \
			      (what));                                         \
		c = (c + 1) % 16;                                              \
		rw_cntr_is(r.wr[INI], nw, ++ew, "FI_WRITE counter");           \
	} while (0)
#define READ_ERR(buf, off, len, key, err, what)                                \
	do {                                                                   \
		RW_POST(fi_read(rw_ep(&r, INI), lb, (len), NULL,               \
				r.w.addr[TGT], rw_addr(&r, (buf), (off)),      \
				(key), &rw_ctx[c]));                           \
		rw_expect_err(&r, INI, &rw_ctx[c], (err), FI_RMA | FI_READ,    \
			      (what));                                         \
		c = (c + 1) % 16;                                              \
		rw_cntr_is(r.rd[INI], nr, ++er, "FI_READ counter");            \
	} while (0)

	WRITE_ERR(rwb, 0, 8, kbad, FI_EKEYREJECTED, "write, unknown key");
	READ_ERR(rwb, 0, 8, kbad, FI_EKEYREJECTED, "read, unknown key");
	WRITE_ERR(rob, 0, 8, kro, FI_EACCES, "write to a read-only region");
	READ_ERR(wob, 0, 8, kwo, FI_EACCES, "read of a write-only region");
	WRITE_ERR(rwb, 4096 - 4, 8, krw, FI_EINVAL, "write across the end");
	WRITE_ERR(rwb, 4097, 1, krw, FI_EINVAL, "write past the end");
	READ_ERR(rwb, 4090, 7, krw, FI_EINVAL, "read across the end");
	/* a multi-chunk write that fails on every chunk: one completion */
	WRITE_ERR(rwb, 0, 65536, krw, FI_EINVAL, "64 KiB into 4 KiB");
	WRITE_ERR(rwb, 0, 30000, kbad, FI_EKEYREJECTED,
		  "multi-chunk write, unknown key");
	ck_assert(tu_cq_quiet(r.w.ep[INI].tx_cq, TU_QUIET_MS));
	/* an address that wraps around, or lies below the region */
	RW_POST(fi_write(rw_ep(&r, INI), src, 8, NULL, r.w.addr[TGT],
			 UINT64_MAX - 3, krw, &rw_ctx[c]));
	rw_expect_err(&r, INI, &rw_ctx[c], FI_EINVAL, FI_RMA | FI_WRITE,
		      "write at a wrapping address");
	rw_cntr_is(r.wr[INI], nw, ++ew, "FI_WRITE counter");

	/* atomics */
	RW_POST(fi_atomic(rw_ep(&r, INI), v, 2, NULL, r.w.addr[TGT],
			  rw_addr(&r, rob, 0), kro, FI_UINT64, FI_SUM,
			  &rw_ctx[0]));
	rw_expect_err(&r, INI, &rw_ctx[0], FI_EACCES, FI_ATOMIC | FI_WRITE,
		      "atomic on a read-only region");
	RW_POST(fi_fetch_atomic(rw_ep(&r, INI), NULL, 2, NULL, res, NULL,
				r.w.addr[TGT], rw_addr(&r, wob, 0), kwo,
				FI_UINT64, FI_ATOMIC_READ, &rw_ctx[1]));
	rw_expect_err(&r, INI, &rw_ctx[1], FI_EACCES, FI_ATOMIC | FI_READ,
		      "atomic read of a write-only region");
	RW_POST(fi_fetch_atomic(rw_ep(&r, INI), v, 2, NULL, res, NULL,
				r.w.addr[TGT], rw_addr(&r, wob, 0), kwo,
				FI_UINT64, FI_SUM, &rw_ctx[2]));
	rw_expect_err(&r, INI, &rw_ctx[2], FI_EACCES, FI_ATOMIC | FI_READ,
		      "fetch-add on a write-only region");
	RW_POST(fi_compare_atomic(rw_ep(&r, INI), v, 4, NULL, cmpv, NULL, res,
				  NULL, r.w.addr[TGT], rw_addr(&r, rwb, 0),
				  kbad, FI_UINT64, FI_CSWAP, &rw_ctx[3]));
	rw_expect_err(&r, INI, &rw_ctx[3], FI_EKEYREJECTED, FI_ATOMIC | FI_READ,
		      "compare atomic, unknown key");
	RW_POST(fi_atomic(rw_ep(&r, INI), v, 4, NULL, r.w.addr[TGT],
			  rw_addr(&r, rwb, 4096 - 24), krw, FI_UINT64, FI_SUM,
			  &rw_ctx[4]));
	rw_expect_err(&r, INI, &rw_ctx[4], FI_EINVAL, FI_ATOMIC | FI_WRITE,
		      "atomic across the end");
	ew += 2;
	er += 3;

	/* a multi-segment write whose second segment is bad fails */
	iov = (struct iovec){.iov_base = src, .iov_len = 16};
	riov[0] = (struct fi_rma_iov){
		.addr = rw_addr(&r, rwb, 0), .len = 8, .key = krw};
	riov[1] = (struct fi_rma_iov){
		.addr = rw_addr(&r, rob, 0), .len = 8, .key = kro};
	msg = (struct fi_msg_rma){.msg_iov = &iov,
				  .iov_count = 1,
				  .addr = r.w.addr[TGT],
				  .rma_iov = riov,
				  .rma_iov_count = 2,
				  .context = &rw_ctx[5]};
	RW_POST(fi_writemsg(rw_ep(&r, INI), &msg, FI_COMPLETION));
	rw_expect_err(&r, INI, &rw_ctx[5], FI_EACCES, FI_RMA | FI_WRITE,
		      "writemsg, second segment read-only");
	ew++;
	rw_same(rob, snap[1], 4096, "read-only region", 0);
	memcpy(rwb, snap[0], 8); /* the first segment may have landed */

	/* an injected write that fails: no crash, an error on the counter
	 * (an error entry, if any, is consumed) */
	RW_POST(fi_inject_write(rw_ep(&r, INI), src, 8, r.w.addr[TGT],
				rw_addr(&r, rwb, 0), kbad));
	rw_cntr_is(r.wr[INI], nw, ++ew, "FI_WRITE counter (failed inject)");
	(void)tu_cq_wait(r.w.ep[INI].tx_cq, NULL, NULL, NULL, TU_QUIET_MS);

	rw_same(rwb, snap[0], 4096, "read-write region", 0);
	rw_same(rob, snap[1], 4096, "read-only region", 0);
	rw_same(wob, snap[2], 4096, "write-only region", 0);
	rw_cntr_is(r.wr[INI], nw, ew, "FI_WRITE counter");
	rw_cntr_is(r.rd[INI], nr, er, "FI_READ counter");
	ck_assert(tu_cq_quiet(r.w.ep[INI].tx_cq, TU_QUIET_MS));

	/* the endpoint still works */
	RW_POST(fi_write(rw_ep(&r, INI), src, 4096, NULL, r.w.addr[TGT],
			 rw_addr(&r, rwb, 0), krw, &rw_ctx[6]));
	rw_expect(&r, INI, &rw_ctx[6], FI_RMA | FI_WRITE);
	ck_assert_mem_eq(rwb, src, 4096);
	RW_POST(fi_read(rw_ep(&r, INI), lb, 256, NULL, r.w.addr[TGT],
			rw_addr(&r, rob, 100), kro, &rw_ctx[7]));
	rw_expect(&r, INI, &rw_ctx[7], FI_RMA | FI_READ);
	ck_assert_mem_eq(lb, rob + 100, 256);
	RW_POST(fi_write(rw_ep(&r, INI), src, 4096, NULL, r.w.addr[TGT],
			 rw_addr(&r, wob, 0), kwo, &rw_ctx[8]));
	rw_expect(&r, INI, &rw_ctx[8], FI_RMA | FI_WRITE);
	ck_assert_mem_eq(wob, src, 4096);
	rw_cntr_is(r.wr[INI], 2, ew, "FI_WRITE counter");
	rw_cntr_is(r.rd[INI], 1, er, "FI_READ counter");
#undef WRITE_ERR
#undef READ_ERR

	rw_close_fid(&mrw->fid);
	rw_close_fid(&mro->fid);
	rw_close_fid(&mwo->fid);
	free(src);
	rw_close(&r);
}
END_TEST

/* _i = 0: default domain, addresses are offsets into the region;
 * _i = 1: FI_MR_VIRT_ADDR domain, addresses are virtual addresses. */
START_TEST(rma_addressing)
{
	struct rw_opts o = {.mr_mode = _i ? FI_MR_VIRT_ADDR : 0};
	struct rw r;
	struct fid_mr *mr;
	uint8_t *tb, snap[4096], src[256], lb[256];
	uint64_t key, good, other;
	uint64_t v = 21, old = 0;
	int c = 0;

	rw_open(&r, &o);
	ck_assert(r.virt == (_i == 1));
	tb = malloc(4096);
	ck_assert_ptr_nonnull(tb);
	tu_fill(tb, 4096, 4);
	tu_fill(src, sizeof(src), 5);
	memcpy(snap, tb, 4096);
	mr = rw_mr(&r, tb, 4096, RW_RW, 0);
	key = fi_mr_key(mr);

	/* byte 100 of the region */
	good = _i ? (uint64_t)(uintptr_t)tb + 100 : 100;
	other = _i ? 100 : (uint64_t)(uintptr_t)tb + 100;
	RW_POST(fi_write(rw_ep(&r, INI), src, 50, NULL, r.w.addr[TGT], good,
			 key, &rw_ctx[c]));
	rw_expect(&r, INI, &rw_ctx[c++], FI_RMA | FI_WRITE);
	memcpy(snap + 100, src, 50);
	rw_same(tb, snap, 4096, "write at byte 100", 50);
	RW_POST(fi_read(rw_ep(&r, INI), lb, 60, NULL, r.w.addr[TGT], good - 5,
			key, &rw_ctx[c]));
	rw_expect(&r, INI, &rw_ctx[c++], FI_RMA | FI_READ);
	ck_assert_mem_eq(lb, snap + 95, 60);
	memset(tb + 2000, 0, 8);
	memset(snap + 2000, 0, 8);
	RW_POST(fi_fetch_atomic(rw_ep(&r, INI), &v, 1, NULL, &old, NULL,
				r.w.addr[TGT], good + 1900, key, FI_UINT64,
				FI_SUM, &rw_ctx[c]));
	rw_expect(&r, INI, &rw_ctx[c++], FI_ATOMIC | FI_READ);
	ck_assert_uint_eq(old, 0);
	memcpy(snap + 2000, &v, 8);
	rw_same(tb, snap, 4096, "atomic at byte 2000", 8);

	/* the other kind of address misses the region */
	RW_POST(fi_write(rw_ep(&r, INI), src, 50, NULL, r.w.addr[TGT], other,
			 key, &rw_ctx[c]));
	rw_expect_err(&r, INI, &rw_ctx[c++], FI_EINVAL, FI_RMA | FI_WRITE,
		      _i ? "offset in a FI_MR_VIRT_ADDR domain"
			 : "virtual address in an offset domain");
	RW_POST(fi_atomic(rw_ep(&r, INI), &v, 1, NULL, r.w.addr[TGT],
			  other + 1900, key, FI_UINT64, FI_SUM, &rw_ctx[c]));
	rw_expect_err(&r, INI, &rw_ctx[c++], FI_EINVAL, FI_ATOMIC | FI_WRITE,
		      "atomic at the wrong kind of address");
	if (_i) {
		/* just below and just past the region */
		RW_POST(fi_write(rw_ep(&r, INI), src, 8, NULL, r.w.addr[TGT],
				 (uint64_t)(uintptr_t)tb - 1, key, &rw_ctx[c]));
		rw_expect_err(&r, INI, &rw_ctx[c++], FI_EINVAL,
			      FI_RMA | FI_WRITE, "write below the region");
		RW_POST(fi_read(rw_ep(&r, INI), lb, 8, NULL, r.w.addr[TGT],
				(uint64_t)(uintptr_t)tb - 4, key, &rw_ctx[c]));
		rw_expect_err(&r, INI, &rw_ctx[c++], FI_EINVAL,
			      FI_RMA | FI_READ, "read below the region");
		RW_POST(fi_write(rw_ep(&r, INI), src, 8, NULL, r.w.addr[TGT],
				 (uint64_t)(uintptr_t)tb + 4092, key,
				 &rw_ctx[c]));
		rw_expect_err(&r, INI, &rw_ctx[c++], FI_EINVAL,
			      FI_RMA | FI_WRITE, "write across the end");
		/* the very first and last bytes */
		RW_POST(fi_write(rw_ep(&r, INI), src, 1, NULL, r.w.addr[TGT],
				 (uint64_t)(uintptr_t)tb, key, &rw_ctx[c]));
		rw_expect(&r, INI, &rw_ctx[c++], FI_RMA | FI_WRITE);
		RW_POST(fi_write(rw_ep(&r, INI), src + 1, 1, NULL,
				 r.w.addr[TGT], (uint64_t)(uintptr_t)tb + 4095,
				 key, &rw_ctx[c]));
		rw_expect(&r, INI, &rw_ctx[c++], FI_RMA | FI_WRITE);
	} else {
		RW_POST(fi_write(rw_ep(&r, INI), src, 1, NULL, r.w.addr[TGT], 0,
				 key, &rw_ctx[c]));
		rw_expect(&r, INI, &rw_ctx[c++], FI_RMA | FI_WRITE);
		RW_POST(fi_write(rw_ep(&r, INI), src + 1, 1, NULL,
				 r.w.addr[TGT], 4095, key, &rw_ctx[c]));
		rw_expect(&r, INI, &rw_ctx[c++], FI_RMA | FI_WRITE);
		RW_POST(fi_write(rw_ep(&r, INI), src, 2, NULL, r.w.addr[TGT],
				 4095, key, &rw_ctx[c]));
		rw_expect_err(&r, INI, &rw_ctx[c++], FI_EINVAL,
			      FI_RMA | FI_WRITE, "write across the end");
	}
	snap[0] = src[0];
	snap[4095] = src[1];
	rw_same(tb, snap, 4096, "region after addressing errors", 0);
	rw_close_fid(&mr->fid);
	free(tb);
	rw_close(&r);
}
END_TEST

/* A region of three separate buffers: offsets run through them in
 * order, and nothing around them is touched. */
START_TEST(rma_regv)
{
	static const size_t plen[3] = {100, 50, 200};
	struct rw r;
	struct fid_mr *mr = NULL;
	uint8_t piece[3][400], snap[3][400], src[400], lb[400];
	struct iovec iov[3];
	size_t pos = 0;
	uint64_t key;
	int ret;

	rw_open(&r, NULL);
	for (int i = 0; i < 3; i++) {
		tu_fill(piece[i], 400, 20 + i);
		memcpy(snap[i], piece[i], 400);
		iov[i] = (struct iovec){.iov_base = piece[i] + 32,
					.iov_len = plen[i]};
	}
	ret = fi_mr_regv(r.w.d.domain, iov, 3, RW_RW, 0, 0, 0, &mr, NULL);
	ck_assert_msg(ret == 0, "fi_mr_regv: %d (%s)", ret, fi_strerror(-ret));
	key = fi_mr_key(mr);
	tu_fill(src, sizeof(src), 30);
	/* bytes 20..320 of the 350 */
	RW_POST(fi_write(rw_ep(&r, INI), src, 300, NULL, r.w.addr[TGT], 20, key,
			 &rw_ctx[0]));
	rw_expect(&r, INI, &rw_ctx[0], FI_RMA | FI_WRITE);
	for (int i = 0; i < 3; i++) {
		for (size_t j = 0; j < plen[i]; j++, pos++)
			if (pos >= 20 && pos < 320)
				snap[i][32 + j] = src[pos - 20];
		rw_same(piece[i], snap[i], 400, "regv piece", 300);
	}
	RW_POST(fi_read(rw_ep(&r, INI), lb, 340, NULL, r.w.addr[TGT], 5, key,
			&rw_ctx[1]));
	rw_expect(&r, INI, &rw_ctx[1], FI_RMA | FI_READ);
	ck_assert_mem_eq(lb, snap[0] + 32 + 5, 95);
	ck_assert_mem_eq(lb + 95, snap[1] + 32, 50);
	ck_assert_mem_eq(lb + 145, snap[2] + 32, 195);
	RW_POST(fi_write(rw_ep(&r, INI), src, 10, NULL, r.w.addr[TGT], 345, key,
			 &rw_ctx[2]));
	rw_expect_err(&r, INI, &rw_ctx[2], FI_EINVAL, FI_RMA | FI_WRITE,
		      "write across the end of a 3-piece region");
	for (int i = 0; i < 3; i++)
		rw_same(piece[i], snap[i], 400, "regv piece after error", 10);
	rw_close_fid(&mr->fid);
	rw_close(&r);
}
END_TEST

/* Requested keys are the keys (no FI_MR_PROV_KEY); a key in use is
 * -FI_ENOKEY; with FI_MR_PROV_KEY the provider picks distinct keys. */
START_TEST(rma_keys)
{
	const uint64_t k1 = 0x5eed, k2 = 0xfedcba9876543210ull;
	struct rw r;
	struct rw_opts o = {.mr_mode = FI_MR_PROV_KEY};
	struct fid_mr *m1, *m2, *m3, *dup = NULL;
	uint8_t b1[64] = {0}, b2[64] = {0}, b3[64] = {0}, src[16];
	int ret;

	rw_open(&r, NULL);
	tu_fill(src, sizeof(src), 70);
	m1 = rw_mr(&r, b1, sizeof(b1), RW_RW, k1);
	ck_assert_uint_eq(fi_mr_key(m1), k1);
	ret = fi_mr_reg(r.w.d.domain, b2, sizeof(b2), RW_RW, 0, k1, 0, &dup,
			NULL);
	ck_assert_int_eq(ret, -FI_ENOKEY);
	m2 = rw_mr(&r, b2, sizeof(b2), RW_RW, k2);
	ck_assert_uint_eq(fi_mr_key(m2), k2);

	RW_POST(fi_write(rw_ep(&r, INI), src, 8, NULL, r.w.addr[TGT], 4, k1,
			 &rw_ctx[0]));
	rw_expect(&r, INI, &rw_ctx[0], FI_RMA | FI_WRITE);
	RW_POST(fi_write(rw_ep(&r, INI), src + 8, 8, NULL, r.w.addr[TGT], 8, k2,
			 &rw_ctx[1]));
	rw_expect(&r, INI, &rw_ctx[1], FI_RMA | FI_WRITE);
	ck_assert_mem_eq(b1 + 4, src, 8);
	ck_assert_mem_eq(b2 + 8, src + 8, 8);
	ck_assert_uint_eq(b1[3], 0);
	ck_assert_uint_eq(b1[12], 0);
	ck_assert_uint_eq(b2[7], 0);
	ck_assert_uint_eq(b2[16], 0);

	/* a closed region's key reaches nothing, and can be used again */
	rw_close_fid(&m1->fid);
	RW_POST(fi_write(rw_ep(&r, INI), src, 8, NULL, r.w.addr[TGT], 0, k1,
			 &rw_ctx[2]));
	rw_expect_err(&r, INI, &rw_ctx[2], FI_EKEYREJECTED, FI_RMA | FI_WRITE,
		      "write to a closed region");
	m3 = rw_mr(&r, b3, sizeof(b3), RW_RW, k1);
	ck_assert_uint_eq(fi_mr_key(m3), k1);
	RW_POST(fi_write(rw_ep(&r, INI), src, 8, NULL, r.w.addr[TGT], 0, k1,
			 &rw_ctx[3]));
	rw_expect(&r, INI, &rw_ctx[3], FI_RMA | FI_WRITE);
	ck_assert_mem_eq(b3, src, 8);
	ck_assert_uint_eq(b1[0], 0);
	rw_close_fid(&m2->fid);
	rw_close_fid(&m3->fid);
	rw_close(&r);

	/* FI_MR_PROV_KEY: the requested key is only a hint */
	rw_open(&r, &o);
	m1 = rw_mr(&r, b1, sizeof(b1), RW_RW, 7);
	m2 = rw_mr(&r, b2, sizeof(b2), RW_RW, 7);
	ck_assert_uint_ne(fi_mr_key(m1), fi_mr_key(m2));
	RW_POST(fi_write(rw_ep(&r, INI), src, 16, NULL, r.w.addr[TGT], 0,
			 fi_mr_key(m2), &rw_ctx[4]));
	rw_expect(&r, INI, &rw_ctx[4], FI_RMA | FI_WRITE);
	ck_assert_mem_eq(b2, src, 16);
	rw_close_fid(&m1->fid);
	rw_close_fid(&m2->fid);
	rw_close(&r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Atomics                                                              */

enum { AK_PLAIN, AK_FETCH, AK_CMP, AK_N };

static const char *const ak_name[] = {"atomic", "fetch_atomic",
				      "compare_atomic"};

typedef float complex at_fc;
typedef double complex at_dc;
typedef long double complex at_ldc;
typedef __int128 at_i128;
typedef unsigned __int128 at_u128;

/* Every point-to-point datatype, with 2 not in the list after them. */
static const enum fi_datatype at_types[] = {
	FI_INT8,	   FI_UINT8,
	FI_INT16,	   FI_UINT16,
	FI_INT32,	   FI_UINT32,
	FI_INT64,	   FI_UINT64,
	FI_INT128,	   FI_UINT128,
	FI_FLOAT,	   FI_DOUBLE,
	FI_LONG_DOUBLE,	   FI_FLOAT_COMPLEX,
	FI_DOUBLE_COMPLEX, FI_LONG_DOUBLE_COMPLEX};
#define AT_NTYPES (sizeof(at_types) / sizeof(at_types[0]))

static size_t at_size(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8:
	case FI_UINT8:
		return 1;
	case FI_INT16:
	case FI_UINT16:
		return 2;
	case FI_INT32:
	case FI_UINT32:
		return 4;
	case FI_INT64:
	case FI_UINT64:
		return 8;
	case FI_INT128:
	case FI_UINT128:
		return 16;
	case FI_FLOAT:
		return sizeof(float);
	case FI_DOUBLE:
		return sizeof(double);
	case FI_LONG_DOUBLE:
		return sizeof(long double);
	case FI_FLOAT_COMPLEX:
		return sizeof(at_fc);
	case FI_DOUBLE_COMPLEX:
		return sizeof(at_dc);
	case FI_LONG_DOUBLE_COMPLEX:
		return sizeof(at_ldc);
	default:
		return 0;
	}
}

static bool at_is_int(enum fi_datatype dt)
{
	return (dt >= FI_INT8 && dt <= FI_UINT64) || dt == FI_INT128 ||
	       dt == FI_UINT128;
}

static bool at_is_signed(enum fi_datatype dt)
{
	return dt == FI_INT8 || dt == FI_INT16 || dt == FI_INT32 ||
	       dt == FI_INT64 || dt == FI_INT128;
}

static bool at_is_cplx(enum fi_datatype dt)
{
	return dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX ||
	       dt == FI_LONG_DOUBLE_COMPLEX;
}

static bool at_is_real(enum fi_datatype dt)
{
	return dt == FI_FLOAT || dt == FI_DOUBLE || dt == FI_LONG_DOUBLE;
}

/*
 * The table, from fi_atomic(3): base (and fetching) atomics are the
 * arithmetic, logical and bitwise ops and FI_ATOMIC_WRITE, fetching ones
 * add FI_ATOMIC_READ; compare atomics are the CSWAP family and MSWAP.
 * Bitwise ops and MSWAP need integers; MIN/MAX, the logical ops and the
 * ordered CSWAPs need an ordered type (not complex).
 */
static bool at_valid(int kind, enum fi_op op, enum fi_datatype dt)
{
	bool in = at_is_int(dt), cx = at_is_cplx(dt);

	if (!in && !cx && !at_is_real(dt))
		return false;
	switch (op) {
	case FI_SUM:
	case FI_PROD:
	case FI_ATOMIC_WRITE:
		return kind != AK_CMP;
	case FI_MIN:
	case FI_MAX:
	case FI_LOR:
	case FI_LAND:
	case FI_LXOR:
		return kind != AK_CMP && !cx;
	case FI_BOR:
	case FI_BAND:
	case FI_BXOR:
		return kind != AK_CMP && in;
	case FI_ATOMIC_READ:
		return kind == AK_FETCH;
	case FI_CSWAP:
	case FI_CSWAP_NE:
		return kind == AK_CMP;
	case FI_CSWAP_LE:
	case FI_CSWAP_LT:
	case FI_CSWAP_GE:
	case FI_CSWAP_GT:
		return kind == AK_CMP && !cx;
	case FI_MSWAP:
		return kind == AK_CMP && in;
	default:
		return false;
	}
}

static int at_validcall(struct fid_ep *ep, int kind, enum fi_datatype dt,
			enum fi_op op, size_t *count)
{
	switch (kind) {
	case AK_PLAIN:
		return fi_atomicvalid(ep, dt, op, count);
	case AK_FETCH:
		return fi_fetch_atomicvalid(ep, dt, op, count);
	default:
		return fi_compare_atomicvalid(ep, dt, op, count);
	}
}

static const uint64_t at_qflags[AK_N] = {0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC};

/* The valid calls and fi_query_atomic agree with the table, for every
 * op and datatype, and for a few values outside the enums. */
START_TEST(atomic_valid)
{
	struct rw r;
	struct fid_ep *ep;
	struct fid_domain *dom;
	enum fi_datatype dts[AT_NTYPES + 2];
	enum fi_op ops[FI_ATOMIC_OP_LAST + 2];
	size_t ndt = 0, nop = 0, nvalid[AK_N] = {0};

	rw_open(&r, NULL);
	ep = rw_ep(&r, INI);
	dom = r.w.d.domain;
	for (size_t i = 0; i < AT_NTYPES; i++)
		dts[ndt++] = at_types[i];
	dts[ndt++] = (enum fi_datatype)(FI_UINT128 + 1);
	dts[ndt++] = FI_VOID;
	for (int op = 0; op < FI_ATOMIC_OP_LAST; op++)
		ops[nop++] = (enum fi_op)op;
	ops[nop++] = FI_ATOMIC_OP_LAST;
	ops[nop++] = FI_NOOP;

	for (size_t d = 0; d < ndt; d++) {
		for (size_t o = 0; o < nop; o++) {
			enum fi_datatype dt = dts[d];
			enum fi_op op = ops[o];
			bool known = d < AT_NTYPES && o < FI_ATOMIC_OP_LAST;

			for (int k = 0; k < AK_N; k++) {
				bool want = at_valid(k, op, dt);
				size_t count = 0xdead;
				struct fi_atomic_attr attr = {0xdead, 0xdead};
				int ret, qret, tret;

				ret = at_validcall(ep, k, dt, op, &count);
				qret = fi_query_atomic(dom, dt, op, &attr,
						       at_qflags[k]);
				tret = fi_query_atomic(dom, dt, op, &attr,
						       at_qflags[k] |
							       FI_TAGGED);
				ck_assert_msg(tret == -FI_EOPNOTSUPP,
					      "query %s(dt %d, op %d) "
					      "FI_TAGGED: %d",
					      ak_name[k], dt, op, tret);
				if (want) {
					nvalid[k]++;
					ck_assert_msg(ret == 0,
						      "%svalid(dt %d, op %d): "
						      "%d, expected 0",
						      ak_name[k], dt, op, ret);
					ck_assert_msg(qret == 0,
						      "query %s(dt %d, op %d): "
						      "%d, expected 0",
						      ak_name[k], dt, op, qret);
					ck_assert_uint_ge(count, 1);
					ck_assert_uint_ne(count, 0xdead);
					ck_assert_uint_eq(attr.count, count);
					ck_assert_msg(attr.size == at_size(dt),
						      "query(dt %d): size %zu, "
						      "expected %zu",
						      dt, attr.size,
						      at_size(dt));
					continue;
				}
				if (known) {
					ck_assert_msg(ret == -FI_EOPNOTSUPP,
						      "%svalid(dt %d, op %d): "
						      "%d, expected "
						      "-FI_EOPNOTSUPP",
						      ak_name[k], dt, op, ret);
					ck_assert_msg(qret == -FI_EOPNOTSUPP,
						      "query %s(dt %d, op %d): "
						      "%d, expected "
						      "-FI_EOPNOTSUPP",
						      ak_name[k], dt, op, qret);
				} else {
					ck_assert_msg(ret < 0 && qret < 0,
						      "%s(dt %d, op %d): valid "
						      "%d, query %d",
						      ak_name[k], dt, op, ret,
						      qret);
				}
			}
		}
	}
	/* 16 types: 10 integer, 3 real, 3 complex */
	ck_assert_uint_eq(nvalid[AK_PLAIN], 10 * 11 + 3 * 8 + 3 * 3);
	ck_assert_uint_eq(nvalid[AK_FETCH], 10 * 12 + 3 * 9 + 3 * 4);
	ck_assert_uint_eq(nvalid[AK_CMP], 10 * 7 + 3 * 6 + 3 * 2);
	{
		struct fi_atomic_attr attr;

		ck_assert_int_lt(
			fi_query_atomic(dom, FI_UINT64, FI_SUM, &attr,
					FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC),
			0);
		ck_assert_int_eq(fi_query_atomic(dom, FI_UINT64, FI_SUM, &attr,
						 FI_TAGGED),
				 -FI_EOPNOTSUPP);
	}
	rw_close(&r);
}
END_TEST

/* --- values and a reference ALU ----------------------------------- */

static uint32_t at_hash(uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
	uint32_t x = a * 0x9e3779b1u ^ b * 0x85ebca77u ^ c * 0xc2b2ae3du ^
		     d * 0x27d4eb2fu;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	x *= 0x297a2d39u;
	x ^= x >> 15;
	return x;
}

/* Small values whose sums and products are exact in every type. */
static const double at_small[] = {-2, -1.5, -1, -0.5, 0.5, 1, 1.5, 2, 3, 4.25};
#define AT_NSMALL (sizeof(at_small) / sizeof(at_small[0]))

/* Stores re (+ im i) as element of type dt; padding bytes are zero. */
static void at_put_real(enum fi_datatype dt, void *p, double re, double im)
{
	switch (dt) {
	case FI_FLOAT: {
		float v = (float)re;

		memcpy(p, &v, sizeof(v));
		break;
	}
	case FI_DOUBLE:
		memcpy(p, &re, sizeof(re));
		break;
	case FI_LONG_DOUBLE: {
		long double v;

		memset(&v, 0, sizeof(v));
		v = re;
		memcpy(p, &v, sizeof(v));
		break;
	}
	case FI_FLOAT_COMPLEX: {
		at_fc v = CMPLXF((float)re, (float)im);

		memcpy(p, &v, sizeof(v));
		break;
	}
	case FI_DOUBLE_COMPLEX: {
		at_dc v = CMPLX(re, im);

		memcpy(p, &v, sizeof(v));
		break;
	}
	default: {
		at_ldc v;

		memset(&v, 0, sizeof(v));
		v = CMPLXL(re, im);
		memcpy(p, &v, sizeof(v));
		break;
	}
	}
}

static void at_put_int(enum fi_datatype dt, void *p, int64_t x)
{
	switch (dt) {
#define AT_PUT(E, T)                                                           \
	case E: {                                                              \
		T v = (T)x;                                                    \
                                                                               \
		memcpy(p, &v, sizeof(v));                                      \
		break;                                                         \
	}
		AT_PUT(FI_INT8, int8_t)
		AT_PUT(FI_UINT8, uint8_t)
		AT_PUT(FI_INT16, int16_t)
		AT_PUT(FI_UINT16, uint16_t)
		AT_PUT(FI_INT32, int32_t)
		AT_PUT(FI_UINT32, uint32_t)
		AT_PUT(FI_INT64, int64_t)
		AT_PUT(FI_UINT64, uint64_t)
		AT_PUT(FI_INT128, at_i128)
		AT_PUT(FI_UINT128, at_u128)
#undef AT_PUT
	default:
		break;
	}
}

/* A filler element outside the operated range (index idx). */
static void at_bg(enum fi_datatype dt, void *p, size_t idx)
{
	if (at_is_int(dt))
		tu_fill(p, at_size(dt), 5000 + (uint32_t)idx);
	else
		at_put_real(dt, p, 1000.0 + (double)idx, 77.0 - (double)idx);
}

/*
 * Element i of the target, operand and compare buffers for op:
 * logical ops see zeros on either side; compare values equal the target
 * in every third element and lie above or below it in the others;
 * integers are full-width random bits except under SUM and PROD, where
 * small values keep signed arithmetic defined.
 */
static void at_gen(enum fi_datatype dt, enum fi_op op, size_t i, uint32_t salt,
		   void *t, void *b, void *c)
{
	size_t es = at_size(dt);
	bool logical = op == FI_LOR || op == FI_LAND || op == FI_LXOR;
	bool zt = logical && (i % 4 == 0 || i % 4 == 2);
	bool zb = logical && (i % 4 == 1 || i % 4 == 2);
	uint32_t h[6];

	for (int k = 0; k < 6; k++)
		h[k] = at_hash(dt, op, (uint32_t)i * 8 + k, salt);
	if (at_is_int(dt) && op != FI_SUM && op != FI_PROD) {
		tu_fill(t, es, h[0]);
		tu_fill(b, es, h[1]);
		tu_fill(c, es, h[2]);
		if (zt)
			memset(t, 0, es);
		if (zb)
			memset(b, 0, es);
		if (i % 3 == 0)
			memcpy(c, t, es);
		return;
	}
	if (at_is_int(dt)) {
		int64_t lo = at_is_signed(dt) ? -9 : 0;

		at_put_int(dt, t, lo + (int64_t)(h[0] % 19));
		at_put_int(dt, b, lo + (int64_t)(h[1] % 19));
		at_put_int(dt, c, lo + (int64_t)(h[2] % 19));
		return;
	}
	{
		double tr = at_small[h[0] % AT_NSMALL];
		double ti = at_small[h[1] % AT_NSMALL];
		double br = at_small[h[2] % AT_NSMALL];
		double bi = at_small[h[3] % AT_NSMALL];
		double cr = tr, ci = ti;

		if (zt)
			tr = ti = cr = ci = 0;
		if (zb)
			br = bi = 0;
		if (i % 3 == 1)
			cr -= 1;
		else if (i % 3 == 2)
			cr += 1;
		at_put_real(dt, t, tr, ti);
		at_put_real(dt, b, br, bi);
		at_put_real(dt, c, cr, ci);
	}
}

#define AT_LOAD(T, p, i)                                                       \
	({                                                                     \
		T v_;                                                          \
		memcpy(&v_, (const char *)(p) + (i) * sizeof(T), sizeof(T));   \
		v_;                                                            \
	})

/* addr[i] = op(addr[i], buf[i], compare[i]) as fi_atomic(3) writes it;
 * old[i] = the previous addr[i]. */
#define AT_REF(T, ORDERED, BITWISE)                                            \
	for (size_t i = 0; i < n; i++) {                                       \
		T a = AT_LOAD(T, tgt, i), r = a;                               \
		T b = buf ? AT_LOAD(T, buf, i) : (T)0;                         \
		T c = cmp ? AT_LOAD(T, cmp, i) : (T)0;                         \
                                                                               \
		(void)b;                                                       \
		(void)c;                                                       \
		if (old)                                                       \
			memcpy((char *)old + i * sizeof(T),                    \
			       (char *)tgt + i * sizeof(T), sizeof(T));        \
		switch (op) {                                                  \
		case FI_SUM:                                                   \
			r = a + b;                                             \
			break;                                                 \
		case FI_PROD:                                                  \
			r = a * b;                                             \
			break;                                                 \
		case FI_ATOMIC_READ:                                           \
			break;                                                 \
		case FI_ATOMIC_WRITE:                                          \
			r = b;                                                 \
			break;                                                 \
		case FI_CSWAP:                                                 \
			if (c == a)                                            \
				r = b;                                         \
			break;                                                 \
		case FI_CSWAP_NE:                                              \
			if (c != a)                                            \
				r = b;                                         \
			break;                                                 \
			ORDERED                                                \
			BITWISE                                                \
		default:                                                       \
			return false;                                          \
		}                                                              \
		memcpy((char *)tgt + i * sizeof(T), &r, sizeof(T));            \
	}                                                                      \
	return true

#define AT_ORDERED                                                             \
	case FI_MIN:                                                           \
		if (b < a)                                                     \
			r = b;                                                 \
		break;                                                         \
	case FI_MAX:                                                           \
		if (b > a)                                                     \
			r = b;                                                 \
		break;                                                         \
	case FI_LOR:                                                           \
		r = (a || b);                                                  \
		break;                                                         \
	case FI_LAND:                                                          \
		r = (a && b);                                                  \
		break;                                                         \
	case FI_LXOR:                                                          \
		r = ((a && !b) || (!a && b));                                  \
		break;                                                         \
	case FI_CSWAP_LE:                                                      \
		if (c <= a)                                                    \
			r = b;                                                 \
		break;                                                         \
	case FI_CSWAP_LT:                                                      \
		if (c < a)                                                     \
			r = b;                                                 \
		break;                                                         \
	case FI_CSWAP_GE:                                                      \
		if (c >= a)                                                    \
			r = b;                                                 \
		break;                                                         \
	case FI_CSWAP_GT:                                                      \
		if (c > a)                                                     \
			r = b;                                                 \
		break;

#define AT_BITWISE                                                             \
	case FI_BOR:                                                           \
		r = a | b;                                                     \
		break;                                                         \
	case FI_BAND:                                                          \
		r = a & b;                                                     \
		break;                                                         \
	case FI_BXOR:                                                          \
		r = a ^ b;                                                     \
		break;                                                         \
	case FI_MSWAP:                                                         \
		r = (b & c) | (a & ~c);                                        \
		break;

#define AT_NONE

static bool at_ref(enum fi_op op, enum fi_datatype dt, void *tgt,
		   const void *buf, const void *cmp, void *old, size_t n)
{
	switch (dt) {
	case FI_INT8:
		AT_REF(int8_t, AT_ORDERED, AT_BITWISE);
	case FI_UINT8:
		AT_REF(uint8_t, AT_ORDERED, AT_BITWISE);
	case FI_INT16:
		AT_REF(int16_t, AT_ORDERED, AT_BITWISE);
	case FI_UINT16:
		AT_REF(uint16_t, AT_ORDERED, AT_BITWISE);
	case FI_INT32:
		AT_REF(int32_t, AT_ORDERED, AT_BITWISE);
	case FI_UINT32:
		AT_REF(uint32_t, AT_ORDERED, AT_BITWISE);
	case FI_INT64:
		AT_REF(int64_t, AT_ORDERED, AT_BITWISE);
	case FI_UINT64:
		AT_REF(uint64_t, AT_ORDERED, AT_BITWISE);
	case FI_INT128:
		AT_REF(at_i128, AT_ORDERED, AT_BITWISE);
	case FI_UINT128:
		AT_REF(at_u128, AT_ORDERED, AT_BITWISE);
	case FI_FLOAT:
		AT_REF(float, AT_ORDERED, AT_NONE);
	case FI_DOUBLE:
		AT_REF(double, AT_ORDERED, AT_NONE);
	case FI_LONG_DOUBLE:
		AT_REF(long double, AT_ORDERED, AT_NONE);
	case FI_FLOAT_COMPLEX:
		AT_REF(at_fc, AT_NONE, AT_NONE);
	case FI_DOUBLE_COMPLEX:
		AT_REF(at_dc, AT_NONE, AT_NONE);
	case FI_LONG_DOUBLE_COMPLEX:
		AT_REF(at_ldc, AT_NONE, AT_NONE);
	default:
		return false;
	}
}

/* Index of the first element of a and b that differs, or -1.  Exact
 * comparison: bytes, except for the long double types, whose padding
 * bytes carry no value and are compared by value. */
static long at_diff(enum fi_datatype dt, const void *a, const void *b, size_t n)
{
	size_t es = at_size(dt);

	for (size_t i = 0; i < n; i++) {
		bool same;

		if (dt == FI_LONG_DOUBLE) {
			same = AT_LOAD(long double, a, i) ==
			       AT_LOAD(long double, b, i);
		} else if (dt == FI_LONG_DOUBLE_COMPLEX) {
			at_ldc x = AT_LOAD(at_ldc, a, i);
			at_ldc y = AT_LOAD(at_ldc, b, i);

			same = creall(x) == creall(y) && cimagl(x) == cimagl(y);
		} else {
			same = !memcmp((const char *)a + i * es,
				       (const char *)b + i * es, es);
		}
		if (!same)
			return (long)i;
	}
	return -1;
}

/*
 * One atomic operation of n elements over the provider, checked against
 * at_ref.  shape 0: fi_atomic / fi_fetch_atomic / fi_compare_atomic;
 * shape 1: the v forms, local buffers cut in two; shape 2: the msg
 * forms, local buffers cut in two elsewhere and the target range in two
 * segments with an untouched element between them.  The target range
 * starts at element 3 of a region with background elements all around.
 */
static void at_run(struct rw *r, int kind, enum fi_op op, enum fi_datatype dt,
		   size_t n, int shape, uint32_t salt)
{
	const size_t es = at_size(dt), nel = n + 8;
	const bool rd = kind == AK_FETCH && op == FI_ATOMIC_READ;
	size_t k1 = shape == 2 ? n * 4 / 5 : n, pos2 = 3 + k1 + 1;
	size_t ob = n * 2 / 5, rb = n / 5, cb = n * 3 / 5;
	uint8_t *region, *xregion, *t0, *buf, *cmp, *res, *xold, *xt;
	struct fid_mr *mr;
	struct fid_ep *ep = rw_ep(r, INI);
	fi_addr_t dest = r->w.addr[TGT];
	struct fi_ioc ioc[2], resv[2], cmpv[2];
	struct fi_rma_ioc rioc[2];
	struct fi_msg_atomic msg;
	uint64_t key, ra;
	void *ctx = &rw_ctx[shape];
	long bad;

	ck_assert(n >= 1 && (shape == 0 || n >= 2));
	region = calloc(nel, es);
	xregion = calloc(nel, es);
	t0 = calloc(n, es);
	buf = calloc(n, es);
	cmp = calloc(n, es);
	res = calloc(n + 2, es);
	xold = calloc(n, es);
	xt = calloc(n, es);
	ck_assert(region && xregion && t0 && buf && cmp && res && xold && xt);
	for (size_t i = 0; i < nel; i++)
		at_bg(dt, region + i * es, i);
	for (size_t i = 0; i < n + 2; i++)
		at_bg(dt, res + i * es, 900 + i);
	for (size_t i = 0; i < n; i++)
		at_gen(dt, op, i, salt, t0 + i * es, buf + i * es,
		       cmp + i * es);
	memcpy(region + 3 * es, t0, k1 * es);
	memcpy(region + pos2 * es, t0 + k1 * es, (n - k1) * es);

	memcpy(xt, t0, n * es);
	ck_assert(at_ref(op, dt, xt, rd ? NULL : buf,
			 kind == AK_CMP ? cmp : NULL,
			 kind == AK_PLAIN ? NULL : xold, n));
	memcpy(xregion, region, nel * es);
	memcpy(xregion + 3 * es, xt, k1 * es);
	memcpy(xregion + pos2 * es, xt + k1 * es, (n - k1) * es);

	mr = rw_mr(r, region, nel * es, RW_RW, 0);
	key = fi_mr_key(mr);
	ra = rw_addr(r, region, 3 * es);
	ioc[0] = (struct fi_ioc){.addr = buf, .count = ob};
	ioc[1] = (struct fi_ioc){.addr = buf + ob * es, .count = n - ob};
	resv[0] = (struct fi_ioc){.addr = res + es, .count = rb};
	resv[1] = (struct fi_ioc){.addr = res + es + rb * es, .count = n - rb};
	cmpv[0] = (struct fi_ioc){.addr = cmp, .count = cb};
	cmpv[1] = (struct fi_ioc){.addr = cmp + cb * es, .count = n - cb};
	rioc[0] = (struct fi_rma_ioc){.addr = ra, .count = k1, .key = key};
	rioc[1] = (struct fi_rma_ioc){.addr = rw_addr(r, region, pos2 * es),
				      .count = n - k1,
				      .key = key};
	msg = (struct fi_msg_atomic){.msg_iov = rd ? NULL : ioc,
				     .iov_count = rd ? 0 : 2,
				     .addr = dest,
				     .rma_iov = rioc,
				     .rma_iov_count = 2,
				     .datatype = dt,
				     .op = op,
				     .context = ctx};

	switch (kind * 3 + shape) {
	case AK_PLAIN * 3 + 0:
		RW_POST(fi_atomic(ep, buf, n, NULL, dest, ra, key, dt, op,
				  ctx));
		break;
	case AK_PLAIN * 3 + 1:
		RW_POST(fi_atomicv(ep, ioc, NULL, 2, dest, ra, key, dt, op,
				   ctx));
		break;
	case AK_PLAIN * 3 + 2:
		RW_POST(fi_atomicmsg(ep, &msg, FI_COMPLETION));
		break;
	case AK_FETCH * 3 + 0:
		RW_POST(fi_fetch_atomic(ep, rd ? NULL : buf, n, NULL, res + es,
					NULL, dest, ra, key, dt, op, ctx));
		break;
	case AK_FETCH * 3 + 1:
		RW_POST(fi_fetch_atomicv(ep, rd ? NULL : ioc, NULL, rd ? 0 : 2,
					 resv, NULL, 2, dest, ra, key, dt, op,
					 ctx));
		break;
	case AK_FETCH * 3 + 2:
		RW_POST(fi_fetch_atomicmsg(ep, &msg, resv, NULL, 2,
					   FI_COMPLETION));
		break;
	case AK_CMP * 3 + 0:
		RW_POST(fi_compare_atomic(ep, buf, n, NULL, cmp, NULL, res + es,
					  NULL, dest, ra, key, dt, op, ctx));
		break;
	case AK_CMP * 3 + 1:
		RW_POST(fi_compare_atomicv(ep, ioc, NULL, 2, cmpv, NULL, 2,
					   resv, NULL, 2, dest, ra, key, dt, op,
					   ctx));
		break;
	default:
		RW_POST(fi_compare_atomicmsg(ep, &msg, cmpv, NULL, 2, resv,
					     NULL, 2, FI_COMPLETION));
		break;
	}
	{
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry ee;
		ssize_t ret = tu_cq_wait(r->w.ep[INI].tx_cq, &e, NULL, &ee,
					 TU_WAIT_MS);

		ck_assert_msg(ret == 1,
			      "%s(op %d, dt %d, n %zu, shape %d): %s %d (%s)",
			      ak_name[kind], op, dt, n, shape,
			      ret == -FI_EAVAIL ? "error" : "no completion",
			      ret == -FI_EAVAIL ? ee.err : 0,
			      ret == -FI_EAVAIL ? fi_strerror(ee.err) : "");
		ck_assert_ptr_eq(e.op_context, ctx);
		ck_assert_msg((e.flags & RW_FLAG_MASK) ==
				      (FI_ATOMIC |
				       (kind == AK_PLAIN ? FI_WRITE : FI_READ)),
			      "%s: completion flags 0x%llx", ak_name[kind],
			      (unsigned long long)e.flags);
	}
	bad = at_diff(dt, region, xregion, nel);
	ck_assert_msg(bad < 0,
		      "%s(op %d, dt %d, n %zu, shape %d): target element %ld "
		      "(range %d..%zu) wrong",
		      ak_name[kind], op, dt, n, shape, bad, 3, 3 + n);
	if (kind != AK_PLAIN) {
		bad = at_diff(dt, res + es, xold, n);
		ck_assert_msg(bad < 0,
			      "%s(op %d, dt %d, n %zu, shape %d): fetched "
			      "element %ld wrong",
			      ak_name[kind], op, dt, n, shape, bad);
	}
	/* the elements around the results are untouched */
	at_bg(dt, xold, 900);
	ck_assert(at_diff(dt, res, xold, 1) < 0);
	at_bg(dt, xold, 900 + n + 1);
	ck_assert(at_diff(dt, res + (n + 1) * es, xold, 1) < 0);

	rw_close_fid(&mr->fid);
	free(region);
	free(xregion);
	free(t0);
	free(buf);
	free(cmp);
	free(res);
	free(xold);
	free(xt);
}

/* _i = kind: every valid pair, with count 1 (plain call) and count 5
 * (v and msg calls). */
START_TEST(atomic_pairs)
{
	const int kind = _i;
	struct rw r;
	size_t runs = 0;

	rw_open(&r, NULL);
	for (size_t d = 0; d < AT_NTYPES; d++) {
		for (int op = 0; op < FI_ATOMIC_OP_LAST; op++) {
			if (!at_valid(kind, (enum fi_op)op, at_types[d]))
				continue;
			at_run(&r, kind, (enum fi_op)op, at_types[d], 1, 0, 1);
			at_run(&r, kind, (enum fi_op)op, at_types[d], 5, 1, 2);
			at_run(&r, kind, (enum fi_op)op, at_types[d], 5, 2, 3);
			runs += 3;
		}
	}
	ck_assert_uint_gt(runs, 0);
	rw_close(&r);
}
END_TEST

/* The count one call of kind carries in one packet. */
static size_t at_maxc(struct rw *r, int kind, enum fi_datatype dt,
		      enum fi_op op)
{
	size_t c = 0;

	ck_assert_int_eq(at_validcall(rw_ep(r, INI), kind, dt, op, &c), 0);
	ck_assert_uint_ge(c, 1);
	return c;
}

/* Atomics larger than one packet (the count the valid calls report)
 * and larger than the 16-chunk window. */
START_TEST(atomic_large)
{
	struct rw r;

	rw_open(&r, NULL);
	at_run(&r, AK_PLAIN, FI_SUM, FI_UINT64,
	       3 * at_maxc(&r, AK_PLAIN, FI_UINT64, FI_SUM) + 7, 0, 11);
	at_run(&r, AK_FETCH, FI_SUM, FI_INT32,
	       5 * at_maxc(&r, AK_FETCH, FI_INT32, FI_SUM) + 1, 2, 12);
	at_run(&r, AK_FETCH, FI_ATOMIC_READ, FI_DOUBLE,
	       2 * at_maxc(&r, AK_FETCH, FI_DOUBLE, FI_ATOMIC_READ) + 3, 1, 13);
	at_run(&r, AK_CMP, FI_CSWAP, FI_LONG_DOUBLE_COMPLEX,
	       3 * at_maxc(&r, AK_CMP, FI_LONG_DOUBLE_COMPLEX, FI_CSWAP) + 2, 2,
	       14);
	at_run(&r, AK_CMP, FI_MSWAP, FI_UINT128,
	       2 * at_maxc(&r, AK_CMP, FI_UINT128, FI_MSWAP) + 1, 1, 15);
	at_run(&r, AK_PLAIN, FI_BXOR, FI_UINT8,
	       17 * at_maxc(&r, AK_PLAIN, FI_UINT8, FI_BXOR) + 3, 0, 16);
	at_run(&r, AK_CMP, FI_CSWAP_GE, FI_INT16,
	       17 * at_maxc(&r, AK_CMP, FI_INT16, FI_CSWAP_GE) + 5, 2, 17);
	rw_close(&r);
}
END_TEST

/* --- atomicity ----------------------------------------------------- */

#define AT_THREADS 3
#define AT_OPS	   1500

struct at_thr {
	struct rw *r;
	int ep;
	uint64_t key;
	uint64_t base; /* address of the two counters */
	uint64_t fetched[AT_OPS];
	char err[160];
};

/* No Check asserts off the main thread: failures are reported back. */
static bool at_thr_wait(struct at_thr *t, void *ctx)
{
	struct fid_cq *cq = t->r->w.ep[t->ep].tx_cq;
	uint64_t deadline = tu_now_ms() + TU_WAIT_MS;
	struct fi_cq_tagged_entry e;

	for (;;) {
		ssize_t ret = fi_cq_read(cq, &e, 1);

		if (ret == 1) {
			if (e.op_context == ctx)
				return true;
			snprintf(t->err, sizeof(t->err), "ep %d: wrong context",
				 t->ep);
			return false;
		}
		if (ret != -FI_EAGAIN) {
			struct fi_cq_err_entry ee = {0};

			if (ret == -FI_EAVAIL)
				fi_cq_readerr(cq, &ee, 0);
			snprintf(t->err, sizeof(t->err),
				 "ep %d: fi_cq_read %zd, err %d (%s)", t->ep,
				 ret, ee.err, fi_strerror(ee.err));
			return false;
		}
		if (tu_now_ms() > deadline) {
			snprintf(t->err, sizeof(t->err), "ep %d: no completion",
				 t->ep);
			return false;
		}
		sched_yield();
	}
}

static bool at_thr_post(struct at_thr *t, ssize_t ret, const char *what)
{
	if (!ret)
		return true;
	snprintf(t->err, sizeof(t->err), "ep %d: %s: %zd", t->ep, what, ret);
	return false;
}

static void *at_thr_main(void *p)
{
	struct at_thr *t = p;
	struct fid_ep *ep = t->r->w.ep[t->ep].ep;
	fi_addr_t dest = t->r->w.addr[TGT];
	int ctx;

	for (size_t i = 0; i < AT_OPS; i++) {
		uint64_t one = 1, add = (uint64_t)t->ep, old = ~0ull;
		uint64_t dl = tu_now_ms() + TU_WAIT_MS;
		ssize_t ret;

		while ((ret = fi_fetch_atomic(ep, &one, 1, NULL, &old, NULL,
					      dest, t->base, t->key, FI_UINT64,
					      FI_SUM, &ctx)) == -FI_EAGAIN &&
		       tu_now_ms() < dl)
			sched_yield();
		if (!at_thr_post(t, ret, "fi_fetch_atomic") ||
		    !at_thr_wait(t, &ctx))
			return NULL;
		t->fetched[i] = old;
		while ((ret = fi_atomic(ep, &add, 1, NULL, dest, t->base + 8,
					t->key, FI_UINT64, FI_SUM, &ctx)) ==
			       -FI_EAGAIN &&
		       tu_now_ms() < dl)
			sched_yield();
		if (!at_thr_post(t, ret, "fi_atomic") || !at_thr_wait(t, &ctx))
			return NULL;
	}
	return NULL;
}

/* Three initiators fetch-add 1 into one location (and add their number
 * into another) at once: the sums are exact and every fetched value is
 * distinct, 0 .. 3 * AT_OPS - 1. */
START_TEST(atomic_concurrent)
{
	struct rw_opts o = {.n = 1 + AT_THREADS};
	struct rw r;
	struct fid_mr *mr;
	uint64_t tgt[4] = {0};
	struct at_thr *t;
	pthread_t th[AT_THREADS];
	uint8_t *seen;
	const size_t total = (size_t)AT_THREADS * AT_OPS;

	rw_open(&r, &o);
	mr = rw_mr(&r, tgt, sizeof(tgt), RW_RW, 0);
	t = calloc(AT_THREADS, sizeof(*t));
	seen = calloc(total, 1);
	ck_assert(t && seen);
	for (int i = 0; i < AT_THREADS; i++) {
		t[i].r = &r;
		t[i].ep = 1 + i;
		t[i].key = fi_mr_key(mr);
		t[i].base = rw_addr(&r, tgt, 8);
		ck_assert_int_eq(
			pthread_create(&th[i], NULL, at_thr_main, &t[i]), 0);
	}
	for (int i = 0; i < AT_THREADS; i++)
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
	for (int i = 0; i < AT_THREADS; i++)
		ck_assert_msg(!t[i].err[0], "%s", t[i].err);
	ck_assert_uint_eq(tgt[0], 0);
	ck_assert_uint_eq(tgt[1], total);
	ck_assert_uint_eq(tgt[2], (uint64_t)AT_OPS * (1 + 2 + 3));
	ck_assert_uint_eq(tgt[3], 0);
	for (int i = 0; i < AT_THREADS; i++) {
		for (size_t k = 0; k < AT_OPS; k++) {
			uint64_t v = t[i].fetched[k];

			ck_assert_msg(v < total && !seen[v],
				      "fetched value %llu twice or out of "
				      "range",
				      (unsigned long long)v);
			seen[v] = 1;
			if (k)
				ck_assert_uint_gt(v, t[i].fetched[k - 1]);
		}
	}
	free(seen);
	free(t);
	rw_close_fid(&mr->fid);
	rw_close(&r);
}
END_TEST

Suite *tu_rma_suite(void)
{
	Suite *s = suite_create("rma");
	TCase *tc = tcase_create("rma");
	TCase *ta = tcase_create("atomic");

	tcase_set_timeout(tc, TU_TCASE_TIMEOUT);
	tcase_add_loop_test(tc, rma_sizes, 0, 12);
	tcase_add_test(tc, rma_direct_fallback);
	tcase_add_test(tc, rma_iov_limit);
	tcase_add_test(tc, rma_inject);
	tcase_add_test(tc, rma_inject_max);
	tcase_add_test(tc, rma_writedata);
	tcase_add_test(tc, rma_writedata_zero);
	tcase_add_test(tc, rma_cntr_flags);
	tcase_add_test(tc, rma_selective);
	tcase_add_test(tc, rma_events);
	tcase_add_test(tc, rma_events_fetch);
	tcase_add_test(tc, rma_events_multi_mr);
	tcase_add_test(tc, rma_errors);
	tcase_add_loop_test(tc, rma_addressing, 0, 2);
	tcase_add_test(tc, rma_regv);
	tcase_add_test(tc, rma_keys);
	suite_add_tcase(s, tc);

	tcase_set_timeout(ta, TU_TCASE_TIMEOUT);
	tcase_add_test(ta, atomic_valid);
	tcase_add_loop_test(ta, atomic_pairs, 0, AK_N);
	tcase_add_test(ta, atomic_large);
	tcase_add_test(ta, atomic_concurrent);
	suite_add_tcase(s, ta);
	return s;
}
