/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Hostile and dying peers, and floods: what a buggy or compromised rank
 * of the same job can do to an endpoint's shared memory, and what the
 * endpoint must survive (fi_tnbc(7), SECURITY).  The test plays the
 * hostile peer itself: it maps the victim's queue through the layout
 * header, the way any peer may, and writes into it.  Nothing here is in
 * the provider.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tnbc_unit.h"
#include "xport/shm/tnbc_shm_region.h"

#include <rdma/fi_ext_tnbc.h>

#define R 0
#define A 1

/* A peer's view of an endpoint's queue, geometry read once at map. */
struct hx {
	struct tnbc_shm_region *r;
	size_t len;
	uint64_t mask, ncells;
};

static void hx_map(struct hx *h, const struct tnbc_name *n)
{
	char path[TNBC_SHM_NAME_MAX];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/tnbc-%u-%u-%016llx", n->pid, n->uid,
		 (unsigned long long)n->nonce);
	fd = shm_open(path, O_RDWR, 0);
	ck_assert_msg(fd >= 0, "shm_open %s", path);
	ck_assert_int_eq(fstat(fd, &st), 0);
	h->len = (size_t)st.st_size;
	h->r = mmap(NULL, h->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	ck_assert(h->r != MAP_FAILED);
	h->ncells = h->r->nslots;
	h->mask = h->ncells - 1;
}

static void hx_unmap(struct hx *h)
{
	munmap(h->r, h->len);
}

/* Claims cells for a packet of len bytes as a sender does, without
 * marking them; NULL when the queue is full. */
static struct tnbc_shm_cell *hx_claim_bare(struct hx *h, uint32_t len,
					   uint64_t *pos)
{
	uint64_t k = tnbc_shm_cells(len);

	for (;;) {
		uint64_t p = atomic_load(&h->r->tail);
		uint64_t pad = (p & h->mask) + k > h->ncells
				       ? h->ncells - (p & h->mask)
				       : 0;
		struct tnbc_shm_cell *c;

		if (p + pad + k - atomic_load(&h->r->head) > h->ncells)
			return NULL;
		if (!atomic_compare_exchange_strong(&h->r->tail, &p,
						    p + pad + k))
			continue;
		if (pad) {
			c = tnbc_shm_cell_at(h->r->cells, p, h->mask);
			c->len = (uint32_t)(pad * TNBC_SHM_CELL -
					    TNBC_SHM_CELL_HDR);
			c->fmt = TNBC_SHM_FMT_PAD;
			atomic_store(&c->seq, p + 1);
			p += pad;
		}
		*pos = p;
		return tnbc_shm_cell_at(h->r->cells, p, h->mask);
	}
}

/* Claims and marks cells for a packet of len bytes as a sender does (as
 * process `as`); NULL when the queue is full. */
static struct tnbc_shm_cell *hx_try_claim(struct hx *h, uint32_t len,
					  uint64_t *pos, pid_t as)
{
	struct tnbc_shm_cell *c = hx_claim_bare(h, len, pos);

	if (c) {
		c->len = len;
		atomic_store(&c->seq, TNBC_SHM_CLAIM(as, *pos));
	}
	return c;
}

static struct tnbc_shm_cell *hx_claim(struct hx *h, uint32_t len, uint64_t *pos,
				      pid_t as)
{
	struct tnbc_shm_cell *c = hx_try_claim(h, len, pos, as);

	ck_assert_msg(c, "hostile peer found the queue full");
	return c;
}

static void hx_publish(struct tnbc_shm_cell *c, uint64_t pos,
		       const struct tnbc_hdr *hdr, const void *payload)
{
	uint8_t *dst = (uint8_t *)(c + 1);

	memcpy(dst, hdr, sizeof(*hdr));
	if (hdr->payload_len)
		memcpy(dst + sizeof(*hdr), payload, hdr->payload_len);
	c->len = (uint32_t)(sizeof(*hdr) + hdr->payload_len);
	c->fmt = TNBC_SHM_FMT_PKT;
	atomic_store(&c->seq, pos + 1);
}

static struct tnbc_hdr hx_hdr(uint8_t type, const struct tnbc_name *src,
			      uint64_t tag, uint32_t len)
{
	struct tnbc_hdr h = {
		.version = TNBC_PROTO_VERSION,
		.type = type,
		.flags = TNBC_HDR_TAGGED,
		.payload_len = len,
		.tag = tag,
		.size = len,
		.src = *src,
	};

	return h;
}

/* One packet in one go, as process `as`. */
static void hx_send(struct hx *h, const struct tnbc_hdr *hdr,
		    const void *payload)
{
	uint64_t pos;
	struct tnbc_shm_cell *c = hx_claim(
		h, (uint32_t)(sizeof(*hdr) + hdr->payload_len), &pos, getpid());

	hx_publish(c, pos, hdr, payload);
}

static void h_tsend(struct tu_world *w, int from, int to, const void *buf,
		    size_t len, uint64_t tag, void *ctx)
{
	ssize_t ret;

	while ((ret = fi_tsend(w->ep[from].ep, buf, len, NULL, w->addr[to], tag,
			       ctx)) == -FI_EAGAIN)
		fi_cq_read(w->ep[from].tx_cq, NULL, 0);
	ck_assert_msg(ret == 0, "fi_tsend: %zd", ret);
}

static void h_trecv(struct tu_world *w, int at, void *buf, size_t len,
		    uint64_t tag, uint64_t ignore, void *ctx)
{
	ck_assert_int_eq(fi_trecv(w->ep[at].ep, buf, len, NULL, FI_ADDR_UNSPEC,
				  tag, ignore, ctx),
			 0);
}

static void h_expect(struct fid_cq *cq, void *ctx, uint64_t tag, size_t len)
{
	struct fi_cq_tagged_entry e;

	tu_cq_expect(cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, ctx);
	if (e.flags & FI_RECV) {
		ck_assert_uint_eq(e.tag, tag);
		ck_assert_uint_eq(e.len, len);
	}
}

static int ctx[1024];

/* The endpoint's buffered bytes, read as the provider does: the engine
 * may be buffering at the same time. */
static size_t ux_bytes(struct tnbc_ep *ep)
{
	size_t v;

	pthread_mutex_lock(&ep->lock);
	v = ep->ux_bytes;
	pthread_mutex_unlock(&ep->lock);
	return v;
}

/* ------------------------------------------------------------------ */

/*
 * The region header rewritten under the consumer (slot size and slot
 * count): the consumer uses its own copy of its queue's geometry.
 */
START_TEST(hostile_region_header)
{
	struct tu_world w;
	struct hx h;
	char sbuf[100], rbuf[100];

	tu_world_open(&w, 2, NULL);
	tu_fill(sbuf, sizeof(sbuf), 1);
	h_tsend(&w, A, R, sbuf, sizeof(sbuf), 1, &ctx[0]);
	h_expect(w.ep[A].tx_cq, &ctx[0], 0, 0);
	hx_map(&h, &w.ep[R].name);
	h.r->slot_size = 0x40000000;
	h.r->nslots = 1u << 30;
	for (int i = 0; i < 32; i++) {
		h_tsend(&w, A, R, sbuf, sizeof(sbuf), 2 + i, &ctx[1 + i]);
		h_expect(w.ep[A].tx_cq, &ctx[1 + i], 0, 0);
	}
	for (int i = 0; i < 33; i++) {
		memset(rbuf, 0, sizeof(rbuf));
		h_trecv(&w, R, rbuf, sizeof(rbuf), 1 + i, 0, &ctx[100 + i]);
		h_expect(w.ep[R].rx_cq, &ctx[100 + i], 1 + i, sizeof(rbuf));
		ck_assert_uint_eq(tu_check(rbuf, sizeof(rbuf), 1, 0),
				  (size_t)-1);
	}
	hx_unmap(&h);
	tu_world_close(&w);
}
END_TEST

struct flipper {
	_Atomic(struct tnbc_shm_cell *) cell;
	atomic_bool stop;
};

static void *flip_main(void *arg)
{
	struct flipper *f = arg;

	while (!atomic_load_explicit(&f->stop, memory_order_relaxed)) {
		struct tnbc_shm_cell *c = atomic_load(&f->cell);
		volatile uint32_t *plen;

		if (!c)
			continue;
		plen = (volatile uint32_t *)((uint8_t *)(c + 1) +
					     offsetof(struct tnbc_hdr,
						      payload_len));
		*plen = 0x7FFFF000u;
		*plen = 72;
	}
	return NULL;
}

/*
 * An eager packet's payload_len flipped between 72 and 0x7FFFF000 while
 * the consumer takes it: each packet is delivered with 72 bytes or
 * dropped and counted, never read past its slot.
 */
START_TEST(hostile_length_flip)
{
	const int n = 400;
	struct fi_tnbc_engine_stats st;
	struct flipper f = {0};
	struct tu_world w;
	struct hx h;
	pthread_t t;
	uint8_t pay[72], rbuf[128];
	char legit[8] = "legit";
	int got = 0;

	tu_world_open(&w, 2, NULL);
	hx_map(&h, &w.ep[R].name);
	tu_fill(pay, sizeof(pay), 5);
	ck_assert_int_eq(pthread_create(&t, NULL, flip_main, &f), 0);
	for (int i = 0; i < n; i++) {
		struct tnbc_hdr hdr =
			hx_hdr(TNBC_PKT_EAGER, &w.ep[A].name, 7, sizeof(pay));
		uint64_t pos;
		struct tnbc_shm_cell *c =
			hx_claim(&h, (uint32_t)(sizeof(hdr) + sizeof(pay)),
				 &pos, getpid());

		/* flipping before it is published: the consumer may take
		 * it at once */
		atomic_store(&f.cell, c);
		hx_publish(c, pos, &hdr, pay);
		/* a legitimate message behind it: once it is in, the
		 * hostile one was taken or dropped */
		h_tsend(&w, A, R, legit, sizeof(legit), 8, &ctx[0]);
		h_trecv(&w, R, rbuf, sizeof(rbuf), 8, 0, &ctx[1]);
		h_expect(w.ep[R].rx_cq, &ctx[1], 8, sizeof(legit));
		h_expect(w.ep[A].tx_cq, &ctx[0], 0, 0);
		atomic_store(&f.cell, NULL);
	}
	atomic_store(&f.stop, true);
	pthread_join(t, NULL);
	/* what was not dropped arrived whole */
	for (;;) {
		struct fi_cq_tagged_entry e;

		memset(rbuf, 0, sizeof(rbuf));
		h_trecv(&w, R, rbuf, sizeof(rbuf), 7, 0, &ctx[2]);
		if (tu_cq_wait(w.ep[R].rx_cq, &e, NULL, NULL, 200) != 1) {
			ck_assert_int_eq(fi_cancel(&w.ep[R].ep->fid, &ctx[2]),
					 0);
			break;
		}
		ck_assert_uint_eq(e.len, sizeof(pay));
		ck_assert_uint_eq(tu_check(rbuf, sizeof(pay), 5, 0),
				  (size_t)-1);
		got++;
	}
	tu_engine_stats(w.d.domain, &st);
	/* the transport caught every flip it saw, in its one copy: nothing
	 * inconsistent reached the protocol */
	ck_assert_uint_eq(st.stray_pkts, 0);
	ck_assert_uint_eq(got + st.bad_pkts, n);
	hx_unmap(&h);
	tu_world_close(&w);
}
END_TEST

/*
 * A forged CTS and a forged ACK for a rendezvous send whose RTS is still
 * queued locally: both are dropped and counted, and the send completes
 * once, when the real receiver has the data.
 */
START_TEST(hostile_forged_answers)
{
	const size_t len = 64 * 1024;
	struct fi_tnbc_engine_stats st;
	size_t old_slots = tnbc_env.rx_slots;
	int old_engine = tnbc_env.engine;
	uint8_t *sbuf = malloc(len), *rbuf = calloc(1, len);
	struct tnbc_hdr hdr;
	struct tu_world w;
	struct hx hr, ha;
	char junk[8] = "junk";

	tnbc_env.rx_slots = 8;
	tnbc_env.engine = 0; /* progress only in this thread's calls */
	tu_world_open(&w, 2, NULL);
	hx_map(&hr, &w.ep[R].name);
	hx_map(&ha, &w.ep[A].name);
	/* R's queue full: A's RTS must wait in A's transmit queue */
	hdr = hx_hdr(TNBC_PKT_EAGER, &w.ep[A].name, 99, sizeof(junk));
	for (;;) {
		uint64_t pos;
		struct tnbc_shm_cell *c = hx_try_claim(
			&hr, (uint32_t)(sizeof(hdr) + sizeof(junk)), &pos,
			getpid());

		if (!c)
			break;
		hx_publish(c, pos, &hdr, junk);
	}
	tu_fill(sbuf, len, 3);
	h_tsend(&w, A, R, sbuf, len, 5, &ctx[0]);
	/* answers for A's first rendezvous id, as if from R */
	hdr = hx_hdr(TNBC_PKT_CTS, &w.ep[R].name, 0, 0);
	hdr.msg_id = 1ull << 32;
	hdr.token = 1;
	hdr.size = len;
	hx_send(&ha, &hdr, NULL);
	hdr.type = TNBC_PKT_ACK;
	hdr.size = 0;
	hx_send(&ha, &hdr, NULL);

	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, 100));
	tu_engine_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.stray_pkts, 2);
	h_trecv(&w, R, rbuf, len, 5, 0, &ctx[1]);
	h_expect(w.ep[R].rx_cq, &ctx[1], 5, len);
	ck_assert_uint_eq(tu_check(rbuf, len, 3, 0), (size_t)-1);
	h_expect(w.ep[A].tx_cq, &ctx[0], 0, 0);
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	hx_unmap(&hr);
	hx_unmap(&ha);
	tu_world_close(&w);
	free(sbuf);
	free(rbuf);
	tnbc_env.rx_slots = old_slots;
	tnbc_env.engine = old_engine;
}
END_TEST

/*
 * Rendezvous reads made together: three receives posted, then three
 * RTSs from A in one poll pass, the middle one forged with a source
 * address nothing is mapped at.  The reads of one pass go to the kernel
 * as one call; that call fails on the forged one, and each read is then
 * made alone: the two real messages arrive intact, the forged one fails
 * its receive with FI_EIO, and A's sends complete.
 */
START_TEST(hostile_batched_read_fault)
{
	const size_t len = 64 * 1024;
	int old_engine = tnbc_env.engine;
	uint8_t *sbuf[2], *rbuf[3];
	struct tnbc_rts_iov bad = {.addr = 4096, .len = len};
	struct fi_cq_err_entry err;
	struct fi_cq_tagged_entry e;
	struct tnbc_hdr hdr;
	struct tu_world w;
	struct hx h;

	tnbc_env.engine = 0; /* one pass, made by this thread */
	tu_world_open(&w, 2, NULL);
	hx_map(&h, &w.ep[R].name);
	for (int i = 0; i < 3; i++) {
		rbuf[i] = calloc(1, len);
		h_trecv(&w, R, rbuf[i], len, 5, 0, &ctx[10 + i]);
	}
	for (int i = 0; i < 2; i++) {
		sbuf[i] = malloc(len);
		tu_fill(sbuf[i], len, 20 + i);
	}
	h_tsend(&w, A, R, sbuf[0], len, 5, &ctx[0]);
	hdr = hx_hdr(TNBC_PKT_RTS, &w.ep[A].name, 5, sizeof(bad));
	hdr.size = len;
	hdr.msg_id = 77;
	hx_send(&h, &hdr, &bad);
	h_tsend(&w, A, R, sbuf[1], len, 5, &ctx[1]);

	/* an error completion is reported ahead of the others */
	tu_cq_expect_err(w.ep[R].rx_cq, &err);
	ck_assert_ptr_eq(err.op_context, &ctx[11]);
	ck_assert_int_eq(err.err, FI_EIO);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[10]);
	ck_assert_uint_eq(e.len, len);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[12]);
	ck_assert_uint_eq(e.len, len);
	ck_assert_uint_eq(tu_check(rbuf[0], len, 20, 0), (size_t)-1);
	ck_assert_uint_eq(tu_check(rbuf[2], len, 21, 0), (size_t)-1);
	h_expect(w.ep[A].tx_cq, &ctx[0], 0, 0);
	h_expect(w.ep[A].tx_cq, &ctx[1], 0, 0);
	hx_unmap(&h);
	tu_world_close(&w);
	for (int i = 0; i < 3; i++)
		free(rbuf[i]);
	free(sbuf[0]);
	free(sbuf[1]);
	tnbc_env.engine = old_engine;
}
END_TEST

/*
 * A forged DATA packet for a streamed receive, its offset past the
 * message: dropped and counted; the real data completes the receive.
 */
START_TEST(hostile_forged_data)
{
	const size_t len = 64 * 1024;
	struct fi_tnbc_engine_stats st;
	int old_cma = tnbc_env.cma, old_engine = tnbc_env.engine;
	uint8_t *sbuf = malloc(len), *rbuf = calloc(1, len);
	uint8_t junk[100];
	struct tnbc_hdr hdr;
	struct tu_world w;
	struct hx h;

	tnbc_env.cma = 0; /* the receiver asks for the data to be streamed */
	tnbc_env.engine = 0;
	tu_world_open(&w, 2, NULL);
	hx_map(&h, &w.ep[R].name);
	tu_fill(sbuf, len, 4);
	memset(junk, 0xee, sizeof(junk));
	h_trecv(&w, R, rbuf, len, 6, 0, &ctx[1]);
	h_tsend(&w, A, R, sbuf, len, 6, &ctx[0]);
	/* behind the RTS: R's first streamed receive has token 1 */
	for (int i = 0; i < 2; i++) {
		hdr = hx_hdr(TNBC_PKT_DATA, &w.ep[A].name, 0, sizeof(junk));
		hdr.token = 1;
		hdr.offset = i ? len - 10 : 1ull << 40;
		hx_send(&h, &hdr, junk);
	}
	h_expect(w.ep[R].rx_cq, &ctx[1], 6, len);
	ck_assert_uint_eq(tu_check(rbuf, len, 4, 0), (size_t)-1);
	h_expect(w.ep[A].tx_cq, &ctx[0], 0, 0);
	tu_engine_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.stray_pkts, 2);
	hx_unmap(&h);
	tu_world_close(&w);
	free(sbuf);
	free(rbuf);
	tnbc_env.cma = old_cma;
	tnbc_env.engine = old_engine;
}
END_TEST

/* The short frame of a tagged eager message of len bytes from src. */
static struct tnbc_hdr_short hx_short(const struct tnbc_name *src, uint64_t tag,
				      uint32_t len)
{
	return (struct tnbc_hdr_short){
		.version = TNBC_PROTO_VERSION,
		.type = TNBC_PKT_EAGER,
		.flags = TNBC_HDR_TAGGED | TNBC_HDR_SHORT,
		.payload_len = len,
		.tag = tag,
		.pid = src->pid,
		.uid = src->uid,
		.nonce = src->nonce,
	};
}

/* One short-framed packet (cell.fmt), its lengths as a peer chose. */
static void hx_send_short(struct hx *h, uint32_t fmt,
			  const struct tnbc_hdr_short *sh, uint32_t len,
			  const void *payload, size_t plen)
{
	uint64_t pos;
	struct tnbc_shm_cell *c = hx_claim(h, len, &pos, getpid());
	uint8_t *dst = (uint8_t *)(c + 1);

	memcpy(dst, sh, sizeof(*sh));
	memcpy(dst + sizeof(*sh), payload, plen);
	c->len = len;
	c->fmt = fmt;
	atomic_store(&c->seq, pos + 1);
}

/*
 * Short frames (the protocol's compact header for eager messages on this
 * host): one whose payload_len disagrees with the cell length, one that
 * claims a type the short frame cannot carry, one of another protocol
 * version, and one that says it carries CQ data the cell has no room
 * for are all dropped and counted; a well-formed one after them is
 * delivered, its source rebuilt as the sender's full name (FI_SOURCE
 * finds the sender).
 */
START_TEST(hostile_short_frames)
{
	struct fi_tnbc_engine_stats st;
	int old_engine = tnbc_env.engine;
	const struct tnbc_name *an;
	struct tnbc_hdr_short sh;
	struct fi_cq_tagged_entry e;
	fi_addr_t from = FI_ADDR_NOTAVAIL;
	char msg[8] = "shortfr", rbuf[64] = {0};
	const uint32_t ok_len = sizeof(sh) + sizeof(msg);
	struct tu_world w;
	struct hx h;
	ssize_t n;

	tnbc_env.engine = 0;
	tu_world_open(&w, 2, NULL);
	an = &w.ep[A].name;
	hx_map(&h, &w.ep[R].name);
	sh = hx_short(an, 9, sizeof(msg));
	sh.payload_len = 0x7ffff000;
	hx_send_short(&h, TNBC_SHM_FMT_PARKS, &sh, ok_len, msg, sizeof(msg));
	sh.payload_len = sizeof(msg);
	sh.type = TNBC_PKT_RTS;
	hx_send_short(&h, TNBC_SHM_FMT_PARKS, &sh, ok_len, msg, sizeof(msg));
	sh.type = TNBC_PKT_EAGER;
	sh.version = TNBC_PROTO_VERSION + 1;
	hx_send_short(&h, TNBC_SHM_FMT_PARKS, &sh, ok_len, msg, sizeof(msg));
	sh.version = TNBC_PROTO_VERSION;
	sh.flags |= TNBC_HDR_CQ_DATA;
	hx_send_short(&h, TNBC_SHM_FMT_PARKS, &sh, sizeof(sh), msg, 0);
	sh.flags = TNBC_HDR_TAGGED | TNBC_HDR_SHORT;
	hx_send_short(&h, TNBC_SHM_FMT_PARKS, &sh, ok_len, msg, sizeof(msg));

	h_trecv(&w, R, rbuf, sizeof(rbuf), 9, 0, &ctx[0]);
	while ((n = fi_cq_readfrom(w.ep[R].rx_cq, &e, 1, &from)) == -FI_EAGAIN)
		;
	ck_assert_int_eq(n, 1);
	ck_assert_ptr_eq(e.op_context, &ctx[0]);
	ck_assert_uint_eq(e.tag, 9);
	ck_assert_uint_eq(e.len, sizeof(msg));
	ck_assert_mem_eq(rbuf, msg, sizeof(msg));
	ck_assert_uint_eq(from, w.addr[A]);
	tu_engine_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.bad_pkts, 4);
	hx_unmap(&h);
	tu_world_close(&w);
	tnbc_env.engine = old_engine;
}
END_TEST

/*
 * A sender that dies between claiming a queue cell and publishing it
 * (_i = 0), one that is slow but alive (_i = 1), and one that dies
 * between moving tail and marking its cell (_i = 2): the consumer steps
 * over a dead one's cells within the documented bound and delivers
 * everything else in order; it waits for the live one.
 */
START_TEST(hostile_dead_claim)
{
	struct fi_tnbc_engine_stats st;
	struct tu_world w;
	struct hx h;
	uint64_t t0, took;
	char sbuf[16] = "after", rbuf[256], slow[208];
	int sync[2];
	pid_t pid;

	tu_world_open(&w, 2, NULL);
	hx_map(&h, &w.ep[R].name);
	ck_assert_int_eq(pipe(sync), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		uint64_t pos;
		struct tnbc_hdr hdr =
			hx_hdr(TNBC_PKT_EAGER, &w.ep[A].name, 30, 8);
		/* a packet of several cells: the consumer steps over all */
		uint32_t len = (uint32_t)(sizeof(hdr) + 8 + 200);
		struct tnbc_shm_cell *c =
			_i == 2 ? hx_claim_bare(&h, len, &pos)
				: hx_claim(&h, len, &pos, getpid());
		char b = 0;

		if (write(sync[1], &b, 1) != 1 || _i != 1)
			_exit(0); /* died holding the cell */
		tu_sleep_ms(300);
		hdr.payload_len = hdr.size = 8 + 200;
		memset(slow, 0, sizeof(slow));
		memcpy(slow, "slowpkt", 8);
		hx_publish(c, pos, &hdr, slow);
		_exit(0);
	}
	{
		char b;

		ck_assert_int_eq(read(sync[0], &b, 1), 1);
	}
	if (_i != 1)
		ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	t0 = tu_now_ms();
	for (int i = 0; i < 4; i++)
		h_tsend(&w, A, R, sbuf, sizeof(sbuf), 31 + i, &ctx[i]);
	if (_i == 1) {
		/* the slow sender's packet first, though it came last */
		h_trecv(&w, R, rbuf, sizeof(rbuf), 0, ~0ull, &ctx[10]);
		h_expect(w.ep[R].rx_cq, &ctx[10], 30, sizeof(slow));
		ck_assert_str_eq(rbuf, "slowpkt");
		ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	}
	for (int i = 0; i < 4; i++) {
		h_trecv(&w, R, rbuf, sizeof(rbuf), 0, ~0ull, &ctx[20 + i]);
		h_expect(w.ep[R].rx_cq, &ctx[20 + i], 31 + i, sizeof(sbuf));
	}
	took = tu_now_ms() - t0;
	tu_engine_stats(w.d.domain, &st);
	ck_assert_uint_eq(st.dead_cells, _i == 1 ? 0 : 1);
	/* fi_tnbc(7): about 0.2 s with a mark, 1.1 s without; generous
	 * for a loaded machine */
	ck_assert_msg(took < 5000, "took %llu ms", (unsigned long long)took);
	close(sync[0]);
	close(sync[1]);
	hx_unmap(&h);
	tu_world_close(&w);
}
END_TEST

/*
 * A flood of messages nobody receives: the receiver buffers at most
 * FI_TNBC_UNEXP_MAX bytes, the rest wait in the queue and in the sender,
 * and all of them arrive, in order, once receives are posted.
 */
START_TEST(hostile_flood_bounded)
{
	const int n = 600;
	const size_t len = 4096;
	size_t old_max = tnbc_env.unexp_max;
	struct fi_tnbc_engine_stats st;
	struct tnbc_ep *rep;
	struct tu_world w;
	uint8_t *sbuf = malloc((size_t)n * len), *rbuf = malloc(len);
	int sent = 0;

	tnbc_env.unexp_max = 256 * 1024;
	tu_world_open(&w, 2, NULL);
	rep = TNBC_EP(w.ep[R].ep);
	for (int i = 0; i < n; i++) {
		tu_fill(sbuf + (size_t)i * len, len, 1000 + i);
		h_tsend(&w, A, R, sbuf + (size_t)i * len, len, i, &ctx[i]);
	}
	/* let both sides move what they can */
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 300));
	for (struct fi_cq_tagged_entry e;
	     fi_cq_read(w.ep[A].tx_cq, &e, 1) == 1;)
		sent++;
	ck_assert_uint_le(ux_bytes(rep), tnbc_env.unexp_max);
	ck_assert_int_lt(sent, n);
	tu_engine_stats(w.d.domain, &st);
	ck_assert_uint_ge(st.unexp_held, 1);

	/* a wildcard receive gets the oldest message */
	h_trecv(&w, R, rbuf, len, 0, ~0ull, &ctx[1000]);
	h_expect(w.ep[R].rx_cq, &ctx[1000], 0, len);
	ck_assert_uint_eq(tu_check(rbuf, len, 1000, 0), (size_t)-1);
	for (int i = 1; i < n; i++) {
		h_trecv(&w, R, rbuf, len, i, 0, &ctx[1001]);
		h_expect(w.ep[R].rx_cq, &ctx[1001], i, len);
		ck_assert_msg(tu_check(rbuf, len, 1000 + i, 0) == (size_t)-1,
			      "message %d corrupted", i);
		ck_assert_uint_le(ux_bytes(rep), tnbc_env.unexp_max);
	}
	while (sent < n) {
		struct fi_cq_tagged_entry e;

		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		sent++;
	}
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	tu_world_close(&w);
	free(sbuf);
	free(rbuf);
	tnbc_env.unexp_max = old_max;
}
END_TEST

/*
 * Per-sender back pressure over shared memory.  One sender floods
 * messages nobody asked for: past FI_TNBC_UNEXP_MAX they wait in R's
 * queue, which every sender of R shares, and once they take half of it
 * R moves them out and holds that sender alone back.  A's message to a
 * posted receive gets through meanwhile, so does the held sender's
 * answer to R's rendezvous send, and every flooded message arrives, in
 * order and whole, once receives ask for them.
 */
START_TEST(hostile_flood_per_sender)
{
	enum { F = 2 };
	const size_t len = 4000, big = 200000;
	size_t old_max = tnbc_env.unexp_max;
	struct fi_tnbc_engine_stats st;
	struct tu_xport_only o;
	struct tu_world w;
	struct tu_flood f;
	uint8_t *rbuf = malloc(big), *sbig = malloc(big), abuf[4000];
	uint64_t ring;

	tnbc_env.unexp_max = 64 * 1024;
	tu_xport_only_begin(&o, &tnbc_shm_ops);
	tu_world_open(&w, 3, NULL);
	tu_flood_init(&f, w.ep[F].ep, w.ep[F].tx_cq, w.addr[R], 2000, len);
	/* R waits for A's message while F floods until its sends stop
	 * ending (none for 500 ms) */
	ck_assert_int_eq(
		fi_trecv(w.ep[R].ep, rbuf, len, NULL, w.addr[A], 1, 0, &ctx[1]),
		0);
	tu_flood_until_stalled(&f, w.ep[R].rx_cq);
	tu_engine_stats(w.d.domain, &st);
	ck_assert_uint_ge(st.unexp_held, 1);
	ck_assert_uint_le(ux_bytes(TNBC_EP(w.ep[R].ep)), tnbc_env.unexp_max);

	/* A is not held back by F's flood */
	tu_fill(abuf, len, 77);
	h_tsend(&w, A, R, abuf, len, 1, &ctx[2]);
	h_expect(w.ep[R].rx_cq, &ctx[1], 1, len);
	ck_assert_uint_eq(tu_check(rbuf, len, 77, 0), (size_t)-1);
	h_expect(w.ep[A].tx_cq, &ctx[2], 1, len);
	tu_engine_stats(w.d.domain, &st);
	ck_assert_uint_gt(st.spilled_pkts, 0);
	ck_assert_uint_ge(st.senders_held, 1);
	/* F was held back once its moved messages passed an eighth of the
	 * queue's size: no more than the three quarters of the queue a
	 * move may take at once moved, not the queue's size, the most R
	 * may move before it holds back whoever comes next */
	for (ring = 64; ring < tnbc_env.rx_slots * tnbc_env.slot_size;)
		ring <<= 1;
	ck_assert_uint_le(st.spilled_pkts * len, ring * 13 / 16);

	/* F, held back, still answers: R's rendezvous send to it ends */
	tu_fill(sbig, big, 88);
	h_tsend(&w, R, F, sbig, big, 2, &ctx[3]);
	h_trecv(&w, F, rbuf, big, 2, 0, &ctx[4]);
	h_expect(w.ep[F].rx_cq, &ctx[4], 2, big);
	ck_assert_uint_eq(tu_check(rbuf, big, 88, 0), (size_t)-1);
	h_expect(w.ep[R].tx_cq, &ctx[3], 2, big);

	/* every flooded message, in order and whole */
	tu_flood_drain(&f, w.ep[R].ep, w.ep[R].rx_cq);
	tu_world_close(&w);
	tu_xport_only_end(&o);
	tnbc_env.unexp_max = old_max;
	tu_flood_free(&f);
	free(rbuf);
	free(sbig);
}
END_TEST

/* A two-member reduction of seed 002's descriptors: A's value goes to R,
 * which adds its own.  Returns R's result; *ev gets its error vector.
 * Without post_a, A's contribution is the test's to send. */
static int64_t mb_reduce(struct tu_world *w, int64_t a, int64_t r, uint32_t *ev,
			 bool post_a)
{
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_tnbc_ops_coll *ops = NULL;
	struct fi_tnbc_red_desc d[2] = {0};
	struct fid_cntr *done;
	int64_t res = 0;

	ck_assert_int_eq(fi_open_ops(&w->ep[R].ep->fid, FI_TNBC_COLL_OPS_1, 0,
				     (void **)&ops, NULL),
			 0);
	ck_assert_int_eq(fi_cntr_open(w->d.domain, &ca, &done, NULL), 0);
	for (int i = 0; i < 2; i++) {
		d[i].size = sizeof(d[i]);
		d[i].flags = FI_TNBC_RED_CP;
		d[i].tag = 11;
		d[i].degree = 1;
		d[i].op = FI_TNBC_RED_SUM;
		d[i].width = FI_TNBC_RED_INT64;
		d[i].count = 1;
		d[i].order = (uint32_t)i;
		memcpy(d[i].data, i ? &a : &r, sizeof(int64_t));
	}
	d[R].children = 1;
	d[R].cpcnt = 1;
	d[R].dest = FI_ADDR_NOTAVAIL;
	d[R].result = &res;
	d[R].errvec_out = ev;
	d[R].comp_cntr = done;
	d[A].dest = w->addr[R];
	if (post_a)
		ck_assert_int_eq(ops->reduce(w->ep[A].ep, &d[A]), 0);
	ck_assert_int_eq(ops->reduce(w->ep[R].ep, &d[R]), 0);
	ck_assert(tu_cntr_reach(done, 1, 5000));
	ck_assert_int_eq(fi_close(&done->fid), 0);
	return res;
}

static struct tnbc_shm_cell *mb_slot(struct hx *h, unsigned i)
{
	return tnbc_shm_mbox_at(h->r->mbox, i);
}

/* Puts a packet into slot i of h's mailbox and sets its bit (unless
 * nobit: a sender that died right after publishing), as a sender does;
 * the lengths are the peer's. */
static void hx_slot(struct hx *h, unsigned i, uint32_t fmt,
		    const struct tnbc_hdr_short *sh, uint32_t len,
		    const void *payload, size_t plen, bool nobit)
{
	struct tnbc_shm_cell *c = mb_slot(h, i);
	uint8_t *dst = (uint8_t *)(c + 1);

	ck_assert_uint_eq(atomic_load(&c->seq), 0);
	memcpy(dst, sh, sizeof(*sh));
	memcpy(dst + sizeof(*sh), payload, plen);
	c->len = len;
	c->fmt = fmt;
	atomic_store(&c->seq, TNBC_SHM_MBOX_FULL);
	if (!nobit)
		atomic_fetch_or(&h->r->mbox_full, 1ull << i);
}

/* Polls R, a receive posted (a queued eager message, or a slot, waits
 * for one), until slots i and j of h's mailbox are 0. */
static void mb_drain(struct tu_world *w, struct hx *h, unsigned i, unsigned j)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	char rbuf[8];

	h_trecv(w, R, rbuf, sizeof(rbuf), 99, 0, &ctx[0]);
	for (int t = 0; t < 5000 && (atomic_load(&mb_slot(h, i)->seq) ||
				     atomic_load(&mb_slot(h, j)->seq));
	     t++)
		ck_assert(tu_cq_quiet(w->ep[R].rx_cq, 1));
	ck_assert_int_eq(fi_cancel(&w->ep[R].ep->fid, &ctx[0]), 0);
	/* the cancelled receive's entry, out of the way */
	ck_assert_int_eq(tu_cq_wait(w->ep[R].rx_cq, &e, NULL, &err, 5000),
			 -FI_EAVAIL);
	ck_assert_int_eq(err.err, FI_ECANCELED);
	ck_assert_uint_eq(atomic_load(&mb_slot(h, i)->seq), 0);
	ck_assert_uint_eq(atomic_load(&mb_slot(h, j)->seq), 0);
}

/*
 * The mailbox (tnbc_shm_region.h, FI_TNBC_COLL_SLOTS).  A child's
 * contribution to a member on this host goes through a slot (_i = 0),
 * or through the queue with slots off (1).  With every slot claimed by
 * a live peer that never publishes and every bit set by hand,
 * contributions take the queue and arrive (2).  A published slot whose
 * length runs past it is dropped and counted, and one that holds a
 * well-formed message of a peer's own is delivered as that message, as
 * the queue would; both are handed back, and the mailbox goes on working
 * (3).  A slot claimed by a sender that died is handed back, and a
 * contribution whose sender died before setting its bit is folded (4).
 */
START_TEST(hostile_mailbox)
{
	struct fi_tnbc_engine_stats st0, st;
	int old_slots = tnbc_env.coll_slots;
	struct tnbc_hdr_short sh;
	char msg[8] = "notcoll", rbuf[8];
	struct tu_world w;
	uint32_t ev = 1;
	struct hx h;

	tnbc_env.coll_slots = _i != 1;
	tu_world_open(&w, 2, NULL);
	hx_map(&h, &w.ep[R].name);
	tu_engine_stats(w.d.domain, &st0);
	if (_i == 2) {
		for (unsigned i = 0; i < TNBC_SHM_MBOX_SLOTS; i++)
			atomic_store(&mb_slot(&h, i)->seq,
				     TNBC_SHM_CLAIM(getpid(), 0));
		atomic_store(&h.r->mbox_full, ~0ull);
	}
	if (_i == 3) {
		sh = hx_short(&w.ep[A].name, 9, sizeof(msg));
		hx_slot(&h, 4, TNBC_SHM_FMT_PARKS, &sh,
			(uint32_t)(sizeof(sh) + sizeof(msg)), msg, sizeof(msg),
			false);
		sh.flags |= TNBC_HDR_COLL;
		hx_slot(&h, 5, TNBC_SHM_FMT_PARKS, &sh, 5000, msg, sizeof(msg),
			false);
		mb_drain(&w, &h, 4, 5);
		tu_engine_stats(w.d.domain, &st);
		ck_assert_uint_eq(st.bad_pkts - st0.bad_pkts, 1);
		memset(rbuf, 0, sizeof(rbuf));
		h_trecv(&w, R, rbuf, sizeof(rbuf), 9, 0, &ctx[1]);
		h_expect(w.ep[R].rx_cq, &ctx[1], 9, sizeof(msg));
		ck_assert_mem_eq(rbuf, msg, sizeof(msg));
	}
	if (_i == 4) {
		struct tnbc_red_pkt pkt = {
			.h = {.magic = TNBC_RED_MAGIC,
			      .flags = TNBC_RED_PKT_CP,
			      .op = FI_SUM,
			      .datatype = FI_INT64,
			      .count = 1,
			      .degree = 1,
			      .order = 1},
		};
		const int64_t a = 40;
		pid_t dead = fork();

		ck_assert_int_ge(dead, 0);
		if (!dead)
			_exit(0);
		ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
		atomic_store(&mb_slot(&h, 7)->seq, TNBC_SHM_CLAIM(dead, 0));
		/* A's contribution to reduction 11, as A's provider frames
		 * it, published without its bit */
		memcpy(pkt.data, &a, sizeof(a));
		sh = hx_short(&w.ep[A].name, TNBC_DESC_TAG | (11ull << 1),
			      sizeof(pkt));
		sh.flags |= TNBC_HDR_COLL;
		hx_slot(&h, 9, TNBC_SHM_FMT_PARKS, &sh,
			(uint32_t)(sizeof(sh) + sizeof(pkt)), &pkt, sizeof(pkt),
			true);
		ck_assert_int_eq(mb_reduce(&w, 40, 2, &ev, false), 42);
		ck_assert_uint_eq(ev, 0);
		mb_drain(&w, &h, 7, 9);
		tu_engine_stats(w.d.domain, &st);
		ck_assert_uint_eq(st.slot_pkts - st0.slot_pkts, 1);
		ck_assert_uint_eq(st.dead_cells - st0.dead_cells, 1);
		/* the slot works again */
		atomic_store(&mb_slot(&h, 7)->seq, 0);
	}
	ck_assert_int_eq(mb_reduce(&w, 40, 2, &ev, true), 42);
	ck_assert_uint_eq(ev, 0);
	tu_engine_stats(w.d.domain, &st);
	/* 3: the message of slot 4 came through its slot too */
	ck_assert_uint_eq(st.slot_pkts - st0.slot_pkts, _i == 1 || _i == 2 ? 0
							: _i >= 3	   ? 2
									   : 1);
	if (_i == 2) {
		/* slots handed back: the next contribution takes one */
		for (unsigned i = 0; i < TNBC_SHM_MBOX_SLOTS; i++)
			atomic_store(&mb_slot(&h, i)->seq, 0);
		ck_assert_int_eq(mb_reduce(&w, -7, 7, &ev, true), 0);
		ck_assert_uint_eq(ev, 0);
		tu_engine_stats(w.d.domain, &st);
		ck_assert_uint_eq(st.slot_pkts - st0.slot_pkts, 1);
	}
	hx_unmap(&h);
	tu_world_close(&w);
	tnbc_env.coll_slots = old_slots;
}
END_TEST

Suite *tu_hostile_suite(void)
{
	Suite *s = suite_create("hostile");
	TCase *tc = tcase_create("hostile");

	tcase_set_timeout(tc, TU_TCASE_TIMEOUT);
	tcase_add_test(tc, hostile_region_header);
	tcase_add_test(tc, hostile_length_flip);
	tcase_add_test(tc, hostile_forged_answers);
	tcase_add_test(tc, hostile_forged_data);
	tcase_add_test(tc, hostile_short_frames);
	tcase_add_test(tc, hostile_batched_read_fault);
	tcase_add_loop_test(tc, hostile_dead_claim, 0, 3);
	tcase_add_test(tc, hostile_flood_bounded);
	tcase_add_test(tc, hostile_flood_per_sender);
	tcase_add_loop_test(tc, hostile_mailbox, 0, 5);
	suite_add_tcase(s, tc);
	return s;
}
