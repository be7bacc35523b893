/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Tag matching and the message protocols, with endpoints of one domain
 * talking to each other through the shm transport.
 *
 * Endpoint roles: R (ep[0]) receives, A (ep[1]) and B (ep[2]) send.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <inttypes.h>

#include "tnbc_unit.h"

#define R 0
#define A 1
#define B 2

#define EAGER_LEN 100
#define RNDV_LEN  (64 * 1024)

static size_t inject_size(struct tu_world *w)
{
	return w->d.info->tx_attr->inject_size;
}

/* Sends len bytes of pattern seed from ep[from] to ep[to]. */
static void tsend(struct tu_world *w, int from, int to, const void *buf,
		  size_t len, uint64_t tag, void *ctx)
{
	ssize_t ret =
		fi_tsend(w->ep[from].ep, buf, len, NULL, w->addr[to], tag, ctx);

	ck_assert_msg(ret == 0, "fi_tsend: %zd (%s)", ret,
		      fi_strerror((int)-ret));
}

static void trecv(struct tu_world *w, int at, void *buf, size_t len,
		  fi_addr_t src, uint64_t tag, uint64_t ignore, void *ctx)
{
	ssize_t ret =
		fi_trecv(w->ep[at].ep, buf, len, NULL, src, tag, ignore, ctx);

	ck_assert_msg(ret == 0, "fi_trecv: %zd (%s)", ret,
		      fi_strerror((int)-ret));
}

/* Waits for the send completion carrying ctx. */
static void expect_tx(struct tu_world *w, int at, void *ctx)
{
	struct fi_cq_tagged_entry e;

	tu_cq_expect(w->ep[at].tx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, ctx);
	ck_assert_uint_eq(e.flags & (FI_SEND | FI_RECV), FI_SEND);
}

/* Waits for a receive completion and checks the common fields. */
static void expect_rx(struct tu_world *w, int at, void *ctx, size_t len,
		      uint64_t tag, int from)
{
	struct fi_cq_tagged_entry e;
	fi_addr_t src = FI_ADDR_UNSPEC;

	tu_cq_expect(w->ep[at].rx_cq, &e, &src);
	ck_assert_ptr_eq(e.op_context, ctx);
	ck_assert_uint_eq(e.flags & (FI_RECV | FI_TAGGED), FI_RECV | FI_TAGGED);
	ck_assert_uint_eq(e.len, len);
	ck_assert_uint_eq(e.tag, tag);
	if (from >= 0)
		ck_assert_uint_eq(src, w->addr[from]);
}

static int ctx[64];

/* ------------------------------------------------------------------ */

START_TEST(match_tag_ignore)
{
	const uint64_t hi = 0x8000000000000001ULL;
	struct tu_world w;
	char s1[8] = "low", s2[8] = "high", s3[8] = "masked", s4[8] = "b63";
	char r1[8], r2[8], r3[8], r4[8], r5[8];

	tu_world_open(&w, 3, NULL);

	/* bit 63 takes part: tag 1 does not match a receive for 2^63 + 1 */
	trecv(&w, R, r1, sizeof(r1), FI_ADDR_UNSPEC, hi, 0, &ctx[1]);
	tsend(&w, A, R, s1, sizeof(s1), 0x1, &ctx[11]);
	expect_tx(&w, A, &ctx[11]);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	tsend(&w, A, R, s2, sizeof(s2), hi, &ctx[12]);
	expect_tx(&w, A, &ctx[12]);
	expect_rx(&w, R, &ctx[1], sizeof(s2), hi, A);
	ck_assert_str_eq(r1, "high");
	/* the tag-1 message waited unexpected */
	trecv(&w, R, r2, sizeof(r2), FI_ADDR_UNSPEC, 0x1, 0, &ctx[2]);
	expect_rx(&w, R, &ctx[2], sizeof(s1), 0x1, A);
	ck_assert_str_eq(r2, "low");

	/* ignore bits: the completion reports the sender's full tag */
	trecv(&w, R, r3, sizeof(r3), FI_ADDR_UNSPEC, 0xabcd000000000000ULL,
	      0x0000ffffffffffffULL, &ctx[3]);
	tsend(&w, A, R, s3, sizeof(s3), 0xabce123456789abcULL, &ctx[13]);
	expect_tx(&w, A, &ctx[13]);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	tsend(&w, A, R, s3, sizeof(s3), 0xabcd123456789abcULL, &ctx[14]);
	expect_tx(&w, A, &ctx[14]);
	expect_rx(&w, R, &ctx[3], sizeof(s3), 0xabcd123456789abcULL, A);
	ck_assert_str_eq(r3, "masked");

	/* ignoring only bit 63 */
	trecv(&w, R, r4, sizeof(r4), FI_ADDR_UNSPEC, 0x5, 1ULL << 63, &ctx[4]);
	tsend(&w, A, R, s4, sizeof(s4), 0x8000000000000005ULL, &ctx[15]);
	expect_tx(&w, A, &ctx[15]);
	expect_rx(&w, R, &ctx[4], sizeof(s4), 0x8000000000000005ULL, A);
	ck_assert_str_eq(r4, "b63");

	/* the 0xabce... message is still there for an all-ignoring recv */
	trecv(&w, R, r5, sizeof(r5), FI_ADDR_UNSPEC, 0, ~0ULL, &ctx[5]);
	expect_rx(&w, R, &ctx[5], sizeof(s3), 0xabce123456789abcULL, A);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	tu_world_close(&w);
}
END_TEST

START_TEST(match_tagged_untagged)
{
	struct tu_world w;
	char t[8] = "tagged", m[8] = "msg", rb1[8], rb2[8];
	struct fi_cq_tagged_entry e;

	tu_world_open(&w, 2, NULL);
	ck_assert_int_eq(fi_recv(w.ep[R].ep, rb1, sizeof(rb1), NULL,
				 FI_ADDR_UNSPEC, &ctx[1]),
			 0);
	/* a tagged message (tag 0) never satisfies an untagged receive */
	tsend(&w, A, R, t, sizeof(t), 0, &ctx[10]);
	expect_tx(&w, A, &ctx[10]);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	ck_assert_int_eq(
		fi_send(w.ep[A].ep, m, sizeof(m), NULL, w.addr[R], &ctx[11]),
		0);
	tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[11]);
	ck_assert_uint_eq(e.flags, FI_SEND | FI_MSG);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[1]);
	ck_assert_uint_eq(e.flags, FI_RECV | FI_MSG);
	ck_assert_uint_eq(e.len, sizeof(m));
	ck_assert_str_eq(rb1, "msg");
	/* and the tagged one is still there for a tagged receive */
	trecv(&w, R, rb2, sizeof(rb2), FI_ADDR_UNSPEC, 0, 0, &ctx[2]);
	expect_rx(&w, R, &ctx[2], sizeof(t), 0, A);
	ck_assert_str_eq(rb2, "tagged");

	/* an untagged message waits for an untagged receive */
	memset(rb1, 0, sizeof(rb1));
	trecv(&w, R, rb2, sizeof(rb2), FI_ADDR_UNSPEC, 0, ~0ULL, &ctx[3]);
	ck_assert_int_eq(
		fi_send(w.ep[A].ep, m, sizeof(m), NULL, w.addr[R], &ctx[12]),
		0);
	expect_tx(&w, A, &ctx[12]);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	ck_assert_int_eq(fi_recv(w.ep[R].ep, rb1, sizeof(rb1), NULL,
				 FI_ADDR_UNSPEC, &ctx[4]),
			 0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[4]);
	ck_assert_str_eq(rb1, "msg");
	ck_assert_int_eq(fi_cancel(&w.ep[R].ep->fid, &ctx[3]), 0);
	tu_cq_expect_err(w.ep[R].rx_cq, &(struct fi_cq_err_entry){0});
	tu_world_close(&w);
}
END_TEST

START_TEST(match_directed_recv)
{
	struct tu_world w;
	char fa[8] = "from A", fb[8] = "from B", r1[8], r2[8], r3[8];
	struct fi_cq_tagged_entry e;
	fi_addr_t src;

	tu_world_open(&w, 3, NULL);
	trecv(&w, R, r1, sizeof(r1), w.addr[A], 7, 0, &ctx[1]);
	tsend(&w, B, R, fb, sizeof(fb), 7, &ctx[10]);
	expect_tx(&w, B, &ctx[10]);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	tsend(&w, A, R, fa, sizeof(fa), 7, &ctx[11]);
	expect_tx(&w, A, &ctx[11]);
	expect_rx(&w, R, &ctx[1], sizeof(fa), 7, A);
	ck_assert_str_eq(r1, "from A");
	/* B's message went unexpected; a receive from anyone gets it and
	 * FI_SOURCE names B */
	trecv(&w, R, r2, sizeof(r2), FI_ADDR_UNSPEC, 7, 0, &ctx[2]);
	expect_rx(&w, R, &ctx[2], sizeof(fb), 7, B);
	ck_assert_str_eq(r2, "from B");

	/* unexpected first: a receive directed at A skips B's message */
	tsend(&w, B, R, fb, sizeof(fb), 8, &ctx[12]);
	expect_tx(&w, B, &ctx[12]);
	tsend(&w, A, R, fa, sizeof(fa), 8, &ctx[13]);
	expect_tx(&w, A, &ctx[13]);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 10)); /* let both arrive */
	trecv(&w, R, r3, sizeof(r3), w.addr[A], 8, 0, &ctx[3]);
	expect_rx(&w, R, &ctx[3], sizeof(fa), 8, A);
	ck_assert_str_eq(r3, "from A");
	trecv(&w, R, r3, sizeof(r3), w.addr[B], 8, 0, &ctx[4]);
	expect_rx(&w, R, &ctx[4], sizeof(fb), 8, B);
	ck_assert_str_eq(r3, "from B");

	/* untagged directed receive */
	ck_assert_int_eq(
		fi_recv(w.ep[R].ep, r1, sizeof(r1), NULL, w.addr[B], &ctx[5]),
		0);
	ck_assert_int_eq(
		fi_send(w.ep[A].ep, fa, sizeof(fa), NULL, w.addr[R], &ctx[14]),
		0);
	ck_assert_int_eq(
		fi_send(w.ep[B].ep, fb, sizeof(fb), NULL, w.addr[R], &ctx[15]),
		0);
	tu_cq_expect(w.ep[R].rx_cq, &e, &src);
	ck_assert_ptr_eq(e.op_context, &ctx[5]);
	ck_assert_uint_eq(src, w.addr[B]);
	ck_assert_str_eq(r1, "from B");
	ck_assert_int_eq(fi_recv(w.ep[R].ep, r2, sizeof(r2), NULL,
				 FI_ADDR_UNSPEC, &ctx[6]),
			 0);
	tu_cq_expect(w.ep[R].rx_cq, &e, &src);
	ck_assert_ptr_eq(e.op_context, &ctx[6]);
	ck_assert_uint_eq(src, w.addr[A]);
	ck_assert_str_eq(r2, "from A");
	tu_world_close(&w);
}
END_TEST

/* _i: 0 = eager, 1 = rendezvous (single copy), 2 = rendezvous streamed,
 * 3 = rendezvous read early into a provider buffer (FI_TNBC_UNEXP_PULL):
 * the unexpected send completes before its receive is posted */
START_TEST(match_unexpected_and_posted)
{
	const size_t len = _i ? RNDV_LEN : EAGER_LEN;
	int old_cma = tnbc_env.cma;
	size_t old_pull = tnbc_env.unexp_pull;
	struct tu_world w;
	uint8_t *sbuf = malloc(len), *rbuf = calloc(1, len);
	struct fi_tnbc_engine_stats st;

	if (_i == 2)
		tnbc_env.cma = 0;
	tnbc_env.unexp_pull = _i == 3 ? len : 0;
	/* a transport that cannot read the sender's memory streams every
	 * rendezvous, and reads none early */
	const bool pulls = tu_pulls(), early = _i == 3 && tu_pulls_now();

	tu_world_open(&w, 2, NULL);
	tu_fill(sbuf, len, 1);

	/* unexpected, then posted */
	tsend(&w, A, R, sbuf, len, 42, &ctx[10]);
	if (early) {
		/* Nobody calls in: the engine, finding the receiver away,
		 * reads the message early.  Watched without a provider
		 * call, which would make the application present. */
		for (unsigned ms = 0; ms < TU_WAIT_MS; ms++) {
			tu_engine_stats(w.d.domain, &st);
			if (st.rndv_pull)
				break;
			tu_sleep_ms(1);
		}
		ck_assert_uint_eq(st.rndv_pull, 1);
	}
	if (!_i || early)
		expect_tx(&w, A, &ctx[10]); /* done with no receive posted */
	else
		ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	if (early)
		tu_fill(sbuf, len, 9); /* the sender may reuse its buffer */
	trecv(&w, R, rbuf, len, FI_ADDR_UNSPEC, 42, 0, &ctx[1]);
	expect_rx(&w, R, &ctx[1], len, 42, A);
	ck_assert_uint_eq(tu_check(rbuf, len, 1, 0), (size_t)-1);
	if (_i && !early)
		expect_tx(&w, A, &ctx[10]);

	/* posted, then sent */
	memset(rbuf, 0, len);
	tu_fill(sbuf, len, 2);
	trecv(&w, R, rbuf, len, FI_ADDR_UNSPEC, 43, 0, &ctx[2]);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 5));
	tsend(&w, A, R, sbuf, len, 43, &ctx[11]);
	expect_rx(&w, R, &ctx[2], len, 43, A);
	expect_tx(&w, A, &ctx[11]);
	ck_assert_uint_eq(tu_check(rbuf, len, 2, 0), (size_t)-1);

	tu_engine_stats(w.d.domain, &st);
	if ((_i == 1 || _i == 3) && pulls) {
		ck_assert_uint_eq(st.rndv_pull, 2);
		ck_assert_uint_eq(st.rndv_stream, 0);
	} else if (_i) {
		ck_assert_uint_eq(st.rndv_pull, 0);
		ck_assert_uint_eq(st.rndv_stream, 2);
	} else {
		ck_assert_uint_eq(st.rndv_pull + st.rndv_stream, 0);
	}
	tu_world_close(&w);
	free(sbuf);
	free(rbuf);
	tnbc_env.cma = old_cma;
	tnbc_env.unexp_pull = old_pull;
}
END_TEST

/*
 * FI_ORDER_SAS: same-tag messages match receives in send order, also
 * when eager and rendezvous sizes alternate.  _i: bit 0 = receives
 * posted late (messages unexpected), bit 1 = streamed rendezvous.
 */
/*
 * A burst of eager messages waits in the receiver's queue, and the
 * application posts a receive for each in turn: each post takes the
 * queue only up to its own message, so the others stay there for the
 * receives posted next and none goes through an unexpected buffer (one
 * copy each, not two and an allocation).  _i = 1: the first receive was
 * posted before the burst came (an application waiting in MPI_Recv), and
 * the progress call that finds its message must stop there too.
 */
START_TEST(match_burst_single_copy)
{
	const bool early = _i;
	const size_t len = 4000;
	int old_engine = tnbc_env.engine;
	uint8_t *sbuf = malloc(len), *rbuf = calloc(4, len);
	struct tnbc_ep *rep;
	struct tu_world w;

	tnbc_env.engine = 0; /* nobody takes the queue but these calls */
	tu_world_open(&w, 2, NULL);
	rep = TNBC_EP(w.ep[R].ep);
	if (early)
		trecv(&w, R, rbuf, len, FI_ADDR_UNSPEC, 50, 0, &ctx[30]);
	/* Without early, no CQ is read until every receive is posted: A
	 * and R share a domain, and a read of A's CQ would progress R's
	 * queue too. */
	for (int k = 0; k < 4; k++) {
		tu_fill(sbuf, len, 30 + k);
		tsend(&w, A, R, sbuf, len, 50 + (uint64_t)k, &ctx[20 + k]);
	}
	for (int k = 0; k < 4; k++) {
		if (k || !early)
			trecv(&w, R, rbuf + (size_t)k * len, len,
			      FI_ADDR_UNSPEC, 50 + (uint64_t)k, 0,
			      &ctx[30 + k]);
		if (early)
			expect_rx(&w, R, &ctx[30 + k], len, 50 + (uint64_t)k,
				  A);
		/* a queue in memory lends its packets; a socket's
		 * are read out before anyone knows what they are */
		if (tnbc_env.xport->flags & TNBC_XPORT_LOCAL)
			ck_assert_uint_eq(rep->ux_bytes, 0);
	}
	for (int k = 0; k < 4; k++)
		expect_tx(&w, A, &ctx[20 + k]);
	for (int k = 0; k < 4; k++) {
		if (!early)
			expect_rx(&w, R, &ctx[30 + k], len, 50 + (uint64_t)k,
				  A);
		ck_assert_uint_eq(
			tu_check(rbuf + (size_t)k * len, len, 30 + k, 0),
			(size_t)-1);
	}
	tu_world_close(&w);
	free(sbuf);
	free(rbuf);
	tnbc_env.engine = old_engine;
}
END_TEST

START_TEST(match_order_sas)
{
	enum { N = 16 };
	const bool late = _i & 1;
	int old_cma = tnbc_env.cma;
	struct tu_world w;
	uint8_t *sbuf[N], *rbuf[N];
	size_t len[N];
	int got[N] = {0};
	struct fi_cq_tagged_entry e;

	if (_i & 2)
		tnbc_env.cma = 0;
	tu_world_open(&w, 2, NULL);
	for (int i = 0; i < N; i++) {
		len[i] = (i % 2) ? RNDV_LEN + i : EAGER_LEN + i;
		sbuf[i] = malloc(len[i]);
		rbuf[i] = calloc(1, RNDV_LEN + N);
		tu_fill(sbuf[i], len[i], 100 + i);
	}
	if (!late)
		for (int i = 0; i < N; i++)
			trecv(&w, R, rbuf[i], RNDV_LEN + N, FI_ADDR_UNSPEC, 5,
			      0, &ctx[i]);
	for (int i = 0; i < N; i++)
		tsend(&w, A, R, sbuf[i], len[i], 5, &ctx[32 + i]);
	if (late) {
		tu_sleep_ms(20);
		for (int i = 0; i < N; i++)
			trecv(&w, R, rbuf[i], RNDV_LEN + N, FI_ADDR_UNSPEC, 5,
			      0, &ctx[i]);
	}
	for (int n = 0; n < N; n++) {
		int i;

		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		i = (int)((int *)e.op_context - ctx);
		ck_assert_msg(i >= 0 && i < N, "bad context");
		ck_assert_msg(!got[i], "receive %d completed twice", i);
		got[i] = 1;
		/* receive i holds message i */
		ck_assert_msg(e.len == len[i], "recv %d: len %zu, want %zu", i,
			      e.len, len[i]);
		ck_assert_msg(tu_check(rbuf[i], len[i], 100 + i, 0) ==
				      (size_t)-1,
			      "recv %d holds the wrong message", i);
	}
	for (int n = 0; n < N; n++) {
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		ck_assert_msg((int *)e.op_context >= &ctx[32] &&
				      (int *)e.op_context < &ctx[32 + N],
			      "bad tx context %p", e.op_context);
	}
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 5));
	tu_world_close(&w);
	for (int i = 0; i < N; i++) {
		free(sbuf[i]);
		free(rbuf[i]);
	}
	tnbc_env.cma = old_cma;
}
END_TEST

/* _i: 0 = eager, 1 = rendezvous pull, 2 = rendezvous streamed */
START_TEST(match_truncation)
{
	const size_t len = _i ? RNDV_LEN : EAGER_LEN;
	const size_t rlen = _i ? 1000 : 10;
	int old_cma = tnbc_env.cma;
	struct tu_world w;
	uint8_t *sbuf = malloc(len), *rbuf = malloc(rlen + 16);
	struct fi_cq_err_entry err;

	if (_i == 2)
		tnbc_env.cma = 0;
	tu_world_open(&w, 2, NULL);
	tu_fill(sbuf, len, 9);
	memset(rbuf, 0xee, rlen + 16);
	trecv(&w, R, rbuf, rlen, FI_ADDR_UNSPEC, 3, 0, &ctx[1]);
	tsend(&w, A, R, sbuf, len, 3, &ctx[10]);
	tu_cq_expect_err(w.ep[R].rx_cq, &err);
	ck_assert_int_eq(err.err, FI_ETRUNC);
	ck_assert_ptr_eq(err.op_context, &ctx[1]);
	ck_assert_uint_eq(err.olen, len - rlen);
	ck_assert_uint_eq(err.len, rlen);
	ck_assert_uint_eq(err.tag, 3);
	ck_assert_uint_eq(err.flags & (FI_RECV | FI_TAGGED),
			  FI_RECV | FI_TAGGED);
	ck_assert_uint_eq(tu_check(rbuf, rlen, 9, 0), (size_t)-1);
	/* not a byte past the buffer */
	for (size_t i = rlen; i < rlen + 16; i++)
		ck_assert_uint_eq(rbuf[i], 0xee);
	/* the send itself succeeded */
	expect_tx(&w, A, &ctx[10]);

	/* the endpoint carries on normally */
	trecv(&w, R, rbuf, rlen, FI_ADDR_UNSPEC, 4, 0, &ctx[2]);
	tsend(&w, A, R, sbuf, rlen, 4, &ctx[11]);
	expect_rx(&w, R, &ctx[2], rlen, 4, A);
	expect_tx(&w, A, &ctx[11]);
	tu_world_close(&w);
	free(sbuf);
	free(rbuf);
	tnbc_env.cma = old_cma;
}
END_TEST

START_TEST(match_cancel)
{
	struct tu_world w;
	char s[8] = "late", r1[8] = "", r2[8] = "";
	struct fi_cq_err_entry err;

	tu_world_open(&w, 2, NULL);
	trecv(&w, R, r1, sizeof(r1), FI_ADDR_UNSPEC, 77, 0, &ctx[1]);
	ck_assert_int_eq(fi_cancel(&w.ep[R].ep->fid, &ctx[1]), 0);
	tu_cq_expect_err(w.ep[R].rx_cq, &err);
	ck_assert_int_eq(err.err, FI_ECANCELED);
	ck_assert_ptr_eq(err.op_context, &ctx[1]);
	ck_assert_uint_eq(err.flags & FI_RECV, FI_RECV);
	ck_assert_uint_eq(err.tag, 77);
	/* gone: a second cancel finds nothing, and reports nothing */
	ck_assert_int_eq(fi_cancel(&w.ep[R].ep->fid, &ctx[1]), -FI_ENOENT);
	ck_assert_int_eq(fi_cancel(&w.ep[R].ep->fid, &ctx[9]), -FI_ENOENT);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 5));

	/* a message sent now does not land in the cancelled buffer */
	tsend(&w, A, R, s, sizeof(s), 77, &ctx[10]);
	expect_tx(&w, A, &ctx[10]);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	ck_assert_str_eq(r1, "");
	trecv(&w, R, r2, sizeof(r2), FI_ADDR_UNSPEC, 77, 0, &ctx[2]);
	expect_rx(&w, R, &ctx[2], sizeof(s), 77, A);
	ck_assert_str_eq(r2, "late");

	/* untagged cancel */
	ck_assert_int_eq(fi_recv(w.ep[R].ep, r1, sizeof(r1), NULL,
				 FI_ADDR_UNSPEC, &ctx[3]),
			 0);
	ck_assert_int_eq(fi_cancel(&w.ep[R].ep->fid, &ctx[3]), 0);
	tu_cq_expect_err(w.ep[R].rx_cq, &err);
	ck_assert_int_eq(err.err, FI_ECANCELED);
	ck_assert_ptr_eq(err.op_context, &ctx[3]);
	ck_assert_uint_eq(err.flags & (FI_RECV | FI_MSG), FI_RECV | FI_MSG);
	tu_world_close(&w);
}
END_TEST

static void trecvmsg(struct tu_world *w, void *buf, size_t len, uint64_t tag,
		     struct fi_context *fctx, uint64_t flags)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct fi_msg_tagged msg = {
		.msg_iov = buf ? &iov : NULL,
		.iov_count = buf ? 1 : 0,
		.addr = FI_ADDR_UNSPEC,
		.tag = tag,
		.ignore = 0,
		.context = fctx,
	};
	ssize_t ret = fi_trecvmsg(w->ep[R].ep, &msg, flags);

	ck_assert_msg(ret == 0, "fi_trecvmsg(0x%llx): %zd",
		      (unsigned long long)flags, ret);
}

static void expect_peek(struct tu_world *w, struct fi_context *fctx, size_t len,
			uint64_t tag)
{
	struct fi_cq_tagged_entry e;

	tu_cq_expect(w->ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, fctx);
	ck_assert_uint_eq(e.len, len);
	ck_assert_uint_eq(e.tag, tag);
	ck_assert_uint_eq(e.flags & (FI_RECV | FI_TAGGED), FI_RECV | FI_TAGGED);
}

static void expect_enomsg(struct tu_world *w, struct fi_context *fctx)
{
	struct fi_cq_err_entry err;

	tu_cq_expect_err(w->ep[R].rx_cq, &err);
	ck_assert_int_eq(err.err, FI_ENOMSG);
	ck_assert_ptr_eq(err.op_context, fctx);
}

/* Peeks (and reports nothing) until a message of tag has reached R:
 * over a socket a send may complete before its message arrives. */
static void peek_arrived(struct tu_world *w, uint64_t tag,
			 struct fi_context *fctx)
{
	for (unsigned ms = 0;; ms++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		fi_addr_t src;
		ssize_t n;

		trecvmsg(w, NULL, 0, tag, fctx, FI_PEEK);
		do
			n = fi_cq_readfrom(w->ep[R].rx_cq, &e, 1, &src);
		while (n == -FI_EAGAIN);
		if (n == 1)
			return;
		ck_assert_int_eq(n, -FI_EAVAIL);
		ck_assert_int_eq(fi_cq_readerr(w->ep[R].rx_cq, &err, 0), 1);
		ck_assert_int_eq(err.err, FI_ENOMSG);
		ck_assert_msg(ms < TU_WAIT_MS, "tag %llu never arrived",
			      (unsigned long long)tag);
		tu_sleep_ms(1);
	}
}

START_TEST(match_peek_claim_discard)
{
	struct tu_world w;
	char s5[EAGER_LEN], s6[EAGER_LEN], r[EAGER_LEN];
	uint8_t *big = malloc(RNDV_LEN);
	struct fi_context c1, c2, c3, c4, c5;
	struct fi_cq_tagged_entry e;

	/* the plain rendezvous: the sender waits for the discard */
	tnbc_env.unexp_pull = 0;
	tu_world_open(&w, 2, NULL);
	tu_fill(s5, sizeof(s5), 5);
	tu_fill(s6, sizeof(s6), 6);
	tu_fill(big, RNDV_LEN, 7);

	/* nothing there yet */
	trecvmsg(&w, NULL, 0, 5, &c1, FI_PEEK);
	expect_enomsg(&w, &c1);

	tsend(&w, A, R, s5, sizeof(s5), 5, &ctx[10]);
	expect_tx(&w, A, &ctx[10]);
	peek_arrived(&w, 5, &c1);
	/* a peek sees it (the send completed, so it is in R's queue) and
	 * leaves it there, any number of times */
	trecvmsg(&w, NULL, 0, 5, &c1, FI_PEEK);
	expect_peek(&w, &c1, sizeof(s5), 5);
	trecvmsg(&w, NULL, 0, 5, &c1, FI_PEEK);
	expect_peek(&w, &c1, sizeof(s5), 5);
	trecvmsg(&w, NULL, 0, 6, &c1, FI_PEEK);
	expect_enomsg(&w, &c1);

	/* peek + claim reserves it: an ordinary receive no longer sees it */
	trecvmsg(&w, NULL, 0, 5, &c2, FI_PEEK | FI_CLAIM);
	expect_peek(&w, &c2, sizeof(s5), 5);
	trecv(&w, R, r, sizeof(r), FI_ADDR_UNSPEC, 5, 0, &ctx[1]);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	ck_assert_int_eq(fi_cancel(&w.ep[R].ep->fid, &ctx[1]), 0);
	tu_cq_expect_err(w.ep[R].rx_cq, &(struct fi_cq_err_entry){0});
	trecvmsg(&w, NULL, 0, 5, &c3, FI_PEEK);
	expect_enomsg(&w, &c3);
	/* claim takes the data */
	memset(r, 0, sizeof(r));
	trecvmsg(&w, r, sizeof(r), 5, &c2, FI_CLAIM);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &c2);
	ck_assert_uint_eq(e.len, sizeof(s5));
	ck_assert_uint_eq(e.tag, 5);
	ck_assert_mem_eq(r, s5, sizeof(s5));
	/* a claim with nothing reserved under that context is refused */
	{
		struct iovec iov = {.iov_base = r, .iov_len = sizeof(r)};
		struct fi_msg_tagged msg = {.msg_iov = &iov,
					    .iov_count = 1,
					    .addr = FI_ADDR_UNSPEC,
					    .tag = 5,
					    .context = &c4};

		memset(&c4, 0, sizeof(c4));
		ck_assert_int_eq(fi_trecvmsg(w.ep[R].ep, &msg, FI_CLAIM),
				 -FI_EINVAL);
		/* FI_DISCARD alone and FI_PEEK without a context */
		ck_assert_int_eq(fi_trecvmsg(w.ep[R].ep, &msg, FI_DISCARD),
				 -FI_EINVAL);
		msg.context = NULL;
		ck_assert_int_eq(fi_trecvmsg(w.ep[R].ep, &msg, FI_PEEK),
				 -FI_EINVAL);
	}

	/* peek + discard: reported, then gone */
	tsend(&w, A, R, s6, sizeof(s6), 6, &ctx[11]);
	expect_tx(&w, A, &ctx[11]);
	peek_arrived(&w, 6, &c3);
	trecvmsg(&w, NULL, 0, 6, &c3, FI_PEEK | FI_DISCARD);
	expect_peek(&w, &c3, sizeof(s6), 6);
	trecvmsg(&w, NULL, 0, 6, &c3, FI_PEEK);
	expect_enomsg(&w, &c3);

	/* claim + discard after a claiming peek */
	tsend(&w, A, R, s6, sizeof(s6), 6, &ctx[12]);
	expect_tx(&w, A, &ctx[12]);
	peek_arrived(&w, 6, &c4);
	trecvmsg(&w, NULL, 0, 6, &c4, FI_PEEK | FI_CLAIM);
	expect_peek(&w, &c4, sizeof(s6), 6);
	trecvmsg(&w, NULL, 0, 6, &c4, FI_CLAIM | FI_DISCARD);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &c4);
	ck_assert_uint_eq(e.len, 0);
	trecvmsg(&w, NULL, 0, 6, &c4, FI_PEEK);
	expect_enomsg(&w, &c4);

	/* a discarded rendezvous message releases its sender */
	tsend(&w, A, R, big, RNDV_LEN, 9, &ctx[13]);
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	peek_arrived(&w, 9, &c5);
	trecvmsg(&w, NULL, 0, 9, &c5, FI_PEEK);
	expect_peek(&w, &c5, RNDV_LEN, 9);
	trecvmsg(&w, NULL, 0, 9, &c5, FI_PEEK | FI_DISCARD);
	expect_peek(&w, &c5, RNDV_LEN, 9);
	expect_tx(&w, A, &ctx[13]);

	/* a claimed rendezvous message is read in full */
	{
		uint8_t *rb = calloc(1, RNDV_LEN);

		tsend(&w, A, R, big, RNDV_LEN, 10, &ctx[14]);
		/* the RTS is in R's queue once it is sent; give it time */
		ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
		peek_arrived(&w, 10, &c5);
		trecvmsg(&w, NULL, 0, 10, &c5, FI_PEEK | FI_CLAIM);
		expect_peek(&w, &c5, RNDV_LEN, 10);
		trecvmsg(&w, rb, RNDV_LEN, 10, &c5, FI_CLAIM);
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &c5);
		ck_assert_uint_eq(e.len, RNDV_LEN);
		ck_assert_uint_eq(tu_check(rb, RNDV_LEN, 7, 0), (size_t)-1);
		expect_tx(&w, A, &ctx[14]);
		free(rb);
	}
	/* FI_PEEK is tagged-only */
	{
		struct iovec iov = {.iov_base = r, .iov_len = sizeof(r)};
		struct fi_msg msg = {.msg_iov = &iov,
				     .iov_count = 1,
				     .addr = FI_ADDR_UNSPEC,
				     .context = &c1};

		ck_assert_int_eq(fi_recvmsg(w.ep[R].ep, &msg, FI_PEEK),
				 -FI_EBADFLAGS);
	}
	tu_world_close(&w);
	free(big);
	tnbc_env.unexp_pull = tu_env_defaults.unexp_pull;
}
END_TEST

/* _i: 0 eager, 1 rendezvous pull, 2 rendezvous streamed */
START_TEST(match_remote_cq_data)
{
	const size_t len = _i ? RNDV_LEN : EAGER_LEN;
	const uint64_t data = 0xdeadbeefcafef00dULL;
	int old_cma = tnbc_env.cma;
	struct tu_world w;
	uint8_t *sbuf = malloc(len), *rbuf = calloc(1, len);
	struct fi_cq_tagged_entry e;

	if (_i == 2)
		tnbc_env.cma = 0;
	tu_world_open(&w, 2, NULL);
	tu_fill(sbuf, len, 3);
	trecv(&w, R, rbuf, len, FI_ADDR_UNSPEC, 21, 0, &ctx[1]);
	ck_assert_int_eq(fi_tsenddata(w.ep[A].ep, sbuf, len, NULL, data,
				      w.addr[R], 21, &ctx[10]),
			 0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[1]);
	ck_assert_uint_eq(e.flags, FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA);
	ck_assert_uint_eq(e.data, data);
	ck_assert_uint_eq(e.len, len);
	ck_assert_uint_eq(e.tag, 21);
	ck_assert_uint_eq(tu_check(rbuf, len, 3, 0), (size_t)-1);
	expect_tx(&w, A, &ctx[10]);

	/* a plain send carries none */
	trecv(&w, R, rbuf, len, FI_ADDR_UNSPEC, 22, 0, &ctx[2]);
	tsend(&w, A, R, sbuf, len, 22, &ctx[11]);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_uint_eq(e.flags & FI_REMOTE_CQ_DATA, 0);
	expect_tx(&w, A, &ctx[11]);

	/* untagged, unexpected first */
	ck_assert_int_eq(fi_senddata(w.ep[A].ep, sbuf, len, NULL, data + 1,
				     w.addr[R], &ctx[12]),
			 0);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 5));
	ck_assert_int_eq(
		fi_recv(w.ep[R].ep, rbuf, len, NULL, FI_ADDR_UNSPEC, &ctx[3]),
		0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[3]);
	ck_assert_uint_eq(e.flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
	ck_assert_uint_eq(e.data, data + 1);
	expect_tx(&w, A, &ctx[12]);

	/* injected with data */
	if (!_i) {
		ck_assert_int_eq(fi_tinjectdata(w.ep[A].ep, sbuf, 16, data + 2,
						w.addr[R], 23),
				 0);
		trecv(&w, R, rbuf, len, FI_ADDR_UNSPEC, 23, 0, &ctx[4]);
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_uint_eq(e.data, data + 2);
		ck_assert_uint_eq(e.len, 16);
		ck_assert_uint_eq(e.flags & FI_REMOTE_CQ_DATA,
				  FI_REMOTE_CQ_DATA);
		ck_assert(tu_cq_quiet(w.ep[A].tx_cq, 5));
	}
	tu_world_close(&w);
	free(sbuf);
	free(rbuf);
	tnbc_env.cma = old_cma;
}
END_TEST

/* FI_SELECTIVE_COMPLETION: only operations with FI_COMPLETION produce
 * CQ entries; the counters still count everything. */
START_TEST(match_selective_completion)
{
	struct tu_world_opts o = {.cq_bind_flags = FI_SELECTIVE_COMPLETION,
				  .cntrs = true};
	struct tu_world w;
	uint8_t *s[4], *r[4];
	const size_t lens[4] = {EAGER_LEN, EAGER_LEN, RNDV_LEN, RNDV_LEN};
	struct fi_cq_tagged_entry e;

	tu_world_open(&w, 2, &o);
	for (int i = 0; i < 4; i++) {
		s[i] = malloc(lens[i]);
		r[i] = calloc(1, lens[i]);
		tu_fill(s[i], lens[i], 60 + i);
	}
	for (int i = 0; i < 4; i++) {
		struct iovec iov = {.iov_base = r[i], .iov_len = lens[i]};
		struct fi_msg_tagged msg = {.msg_iov = &iov,
					    .iov_count = 1,
					    .addr = FI_ADDR_UNSPEC,
					    .tag = (uint64_t)i,
					    .context = &ctx[i]};

		/* odd ones ask for a completion */
		if (i % 2)
			ck_assert_int_eq(
				fi_trecvmsg(w.ep[R].ep, &msg, FI_COMPLETION),
				0);
		else
			trecv(&w, R, r[i], lens[i], FI_ADDR_UNSPEC, (uint64_t)i,
			      0, &ctx[i]);
	}
	for (int i = 0; i < 4; i++) {
		struct iovec iov = {.iov_base = s[i], .iov_len = lens[i]};
		struct fi_msg_tagged msg = {.msg_iov = &iov,
					    .iov_count = 1,
					    .addr = w.addr[R],
					    .tag = (uint64_t)i,
					    .context = &ctx[10 + i]};

		if (i % 2)
			ck_assert_int_eq(
				fi_tsendmsg(w.ep[A].ep, &msg, FI_COMPLETION),
				0);
		else
			tsend(&w, A, R, s[i], lens[i], (uint64_t)i,
			      &ctx[10 + i]);
	}
	ck_assert(tu_cntr_reach(w.ep[R].rx_cntr, 4, TU_WAIT_MS));
	ck_assert(tu_cntr_reach(w.ep[A].tx_cntr, 4, TU_WAIT_MS));
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(tu_check(r[i], lens[i], 60 + i, 0),
				  (size_t)-1);
	/* exactly the two asked for, on each side */
	for (int k = 0; k < 2; k++) {
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_msg(e.op_context == &ctx[1] ||
				      e.op_context == &ctx[3],
			      "unrequested rx completion %p", e.op_context);
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		ck_assert_msg(e.op_context == &ctx[11] ||
				      e.op_context == &ctx[13],
			      "unrequested tx completion %p", e.op_context);
	}
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, 5));
	ck_assert_uint_eq(fi_cntr_read(w.ep[R].rx_cntr), 4);
	ck_assert_uint_eq(fi_cntr_read(w.ep[A].tx_cntr), 4);
	ck_assert_uint_eq(fi_cntr_readerr(w.ep[R].rx_cntr), 0);

	/* an error is always reported */
	{
		char small[4];

		trecv(&w, R, small, sizeof(small), FI_ADDR_UNSPEC, 50, 0,
		      &ctx[5]);
		tsend(&w, A, R, s[0], lens[0], 50, &ctx[15]);
		tu_cq_expect_err(w.ep[R].rx_cq, &(struct fi_cq_err_entry){0});
		/* the engine may write the entry and count it just after:
		 * the counter within the bound */
		for (unsigned ms = 0;
		     ms < TU_WAIT_MS && fi_cntr_readerr(w.ep[R].rx_cntr) < 1;
		     ms++)
			tu_sleep_ms(1);
		ck_assert_uint_eq(fi_cntr_readerr(w.ep[R].rx_cntr), 1);
	}
	tu_world_close(&w);
	for (int i = 0; i < 4; i++) {
		free(s[i]);
		free(r[i]);
	}
}
END_TEST

/* Without selective completion every operation completes; injects never
 * do, but count. */
START_TEST(match_inject)
{
	struct tu_world_opts o = {.cntrs = true};
	struct tu_world w;
	size_t max;
	uint8_t *s, *r;
	struct fi_cq_tagged_entry e;

	tu_world_open(&w, 2, &o);
	max = inject_size(&w);
	s = malloc(max + 1);
	r = calloc(1, max + 1);
	tu_fill(s, max + 1, 31);
	ck_assert_int_eq(fi_tinject(w.ep[A].ep, s, max + 1, w.addr[R], 1),
			 -FI_EMSGSIZE);
	ck_assert_int_eq(fi_inject(w.ep[A].ep, s, max + 1, w.addr[R]),
			 -FI_EMSGSIZE);
	ck_assert_int_eq(fi_tinject(w.ep[A].ep, s, max, w.addr[R], 1), 0);
	/* the buffer is ours again at once */
	memset(s, 0, max);
	trecv(&w, R, r, max + 1, FI_ADDR_UNSPEC, 1, 0, &ctx[1]);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_uint_eq(e.len, max);
	ck_assert_uint_eq(tu_check(r, max, 31, 0), (size_t)-1);
	ck_assert(tu_cntr_reach(w.ep[A].tx_cntr, 1, TU_WAIT_MS));
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));

	/* FI_INJECT through sendmsg honours the same limit */
	{
		struct iovec iov = {.iov_base = s, .iov_len = max + 1};
		struct fi_msg_tagged msg = {.msg_iov = &iov,
					    .iov_count = 1,
					    .addr = w.addr[R],
					    .tag = 2,
					    .context = &ctx[12]};

		ck_assert_int_eq(fi_tsendmsg(w.ep[A].ep, &msg, FI_INJECT),
				 -FI_EMSGSIZE);
		iov.iov_len = 64;
		ck_assert_int_eq(fi_tsendmsg(w.ep[A].ep, &msg,
					     FI_INJECT | FI_COMPLETION),
				 0);
		expect_tx(&w, A, &ctx[12]);
		trecv(&w, R, r, max + 1, FI_ADDR_UNSPEC, 2, 0, &ctx[2]);
		expect_rx(&w, R, &ctx[2], 64, 2, A);
	}

	/* zero-length messages */
	ck_assert_int_eq(
		fi_tsend(w.ep[A].ep, NULL, 0, NULL, w.addr[R], 3, &ctx[13]), 0);
	expect_tx(&w, A, &ctx[13]);
	trecv(&w, R, NULL, 0, FI_ADDR_UNSPEC, 3, 0, &ctx[3]);
	expect_rx(&w, R, &ctx[3], 0, 3, A);
	ck_assert_int_eq(fi_tinject(w.ep[A].ep, NULL, 0, w.addr[R], 4), 0);
	trecv(&w, R, r, 8, FI_ADDR_UNSPEC, 4, 0, &ctx[4]);
	expect_rx(&w, R, &ctx[4], 0, 4, A);
	tu_world_close(&w);
	free(s);
	free(r);
}
END_TEST

START_TEST(match_bad_input)
{
	struct tu_world w;
	char buf[16];
	struct iovec iov[9];
	fi_addr_t gone;

	tu_world_open(&w, 2, NULL);
	for (int i = 0; i < 9; i++) {
		iov[i].iov_base = buf;
		iov[i].iov_len = 1;
	}
	/* NULL buffer with a length */
	ck_assert_int_eq(
		fi_tsend(w.ep[A].ep, NULL, 10, NULL, w.addr[R], 1, &ctx[0]),
		-FI_EINVAL);
	ck_assert_int_eq(
		fi_send(w.ep[A].ep, NULL, 10, NULL, w.addr[R], &ctx[0]),
		-FI_EINVAL);
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, NULL, 10, NULL, FI_ADDR_UNSPEC, 1,
				  0, &ctx[0]),
			 -FI_EINVAL);
	ck_assert_int_eq(
		fi_recv(w.ep[R].ep, NULL, 10, NULL, FI_ADDR_UNSPEC, &ctx[0]),
		-FI_EINVAL);
	/* more than 8 iovecs */
	ck_assert_int_eq(
		fi_tsendv(w.ep[A].ep, iov, NULL, 9, w.addr[R], 1, &ctx[0]),
		-FI_EINVAL);
	ck_assert_int_eq(fi_trecvv(w.ep[R].ep, iov, NULL, 9, FI_ADDR_UNSPEC, 1,
				   0, &ctx[0]),
			 -FI_EINVAL);
	ck_assert_int_eq(fi_sendv(w.ep[A].ep, iov, NULL, 9, w.addr[R], &ctx[0]),
			 -FI_EINVAL);
	ck_assert_int_eq(
		fi_recvv(w.ep[R].ep, iov, NULL, 9, FI_ADDR_UNSPEC, &ctx[0]),
		-FI_EINVAL);
	/* unknown flags */
	{
		struct fi_msg_tagged tm = {.msg_iov = iov,
					   .iov_count = 1,
					   .addr = w.addr[R],
					   .tag = 1,
					   .context = &ctx[0]};
		struct fi_msg m = {.msg_iov = iov,
				   .iov_count = 1,
				   .addr = w.addr[R],
				   .context = &ctx[0]};

		ck_assert_int_eq(fi_tsendmsg(w.ep[A].ep, &tm, FI_RMA_EVENT),
				 -FI_EBADFLAGS);
		ck_assert_int_eq(fi_tsendmsg(w.ep[A].ep, &tm, FI_MULTI_RECV),
				 -FI_EBADFLAGS);
		ck_assert_int_eq(fi_sendmsg(w.ep[A].ep, &m, FI_PEEK),
				 -FI_EBADFLAGS);
		ck_assert_int_eq(fi_trecvmsg(w.ep[R].ep, &tm, FI_INJECT),
				 -FI_EBADFLAGS);
		ck_assert_int_eq(fi_recvmsg(w.ep[R].ep, &m, FI_MULTI_RECV),
				 -FI_EBADFLAGS);
	}
	/* addresses that are not in the AV */
	ck_assert_int_eq(fi_tsend(w.ep[A].ep, buf, 4, NULL, 1000, 1, &ctx[0]),
			 -FI_EADDRNOTAVAIL);
	ck_assert_int_eq(fi_tsend(w.ep[A].ep, buf, 4, NULL, FI_ADDR_NOTAVAIL, 1,
				  &ctx[0]),
			 -FI_EADDRNOTAVAIL);
	ck_assert_int_eq(fi_tinject(w.ep[A].ep, buf, 4, 1000, 1),
			 -FI_EADDRNOTAVAIL);
	ck_assert_int_eq(
		fi_trecv(w.ep[R].ep, buf, 4, NULL, 1000, 1, 0, &ctx[0]),
		-FI_EADDRNOTAVAIL);
	gone = w.addr[R];
	ck_assert_int_eq(fi_av_remove(w.av, &gone, 1, 0), 0);
	ck_assert_int_eq(fi_tsend(w.ep[A].ep, buf, 4, NULL, gone, 1, &ctx[0]),
			 -FI_EADDRNOTAVAIL);
	/* none of that produced a completion */
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, 5));
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 5));
	tu_world_close(&w);
}
END_TEST

/* Posting before fi_enable is a state error. */
START_TEST(match_not_enabled)
{
	struct tu_dom d;
	struct fid_ep *ep;
	char buf[4];

	tu_dom_open(&d, NULL);
	ck_assert_int_eq(fi_endpoint(d.domain, d.info, &ep, NULL), 0);
	ck_assert_int_eq(fi_tsend(ep, buf, 4, NULL, 0, 1, NULL),
			 -FI_EOPBADSTATE);
	ck_assert_int_eq(fi_trecv(ep, buf, 4, NULL, FI_ADDR_UNSPEC, 1, 0, NULL),
			 -FI_EOPBADSTATE);
	ck_assert_int_eq(fi_enable(ep), -FI_ENOAV);
	ck_assert_int_eq(fi_close(&ep->fid), 0);
	tu_dom_close(&d);
}
END_TEST

/* Scatter/gather on both sides, with iovec boundaries that do not line
 * up.  _i: 0 eager, 1 rendezvous pull, 2 rendezvous streamed. */
START_TEST(match_iov)
{
	static const size_t eager_s[] = {10, 0, 33, 7, 50};
	static const size_t eager_r[] = {1, 64, 0, 35};
	static const size_t rndv_s[] = {5000, 0, 100000, 1, 30000};
	static const size_t rndv_r[] = {77, 65536, 0, 69388};
	const size_t *sl = _i ? rndv_s : eager_s, *rl = _i ? rndv_r : eager_r;
	const size_t ns = 5, nr = 4;
	int old_cma = tnbc_env.cma;
	struct tu_world w;
	struct iovec siov[5], riov[4];
	uint8_t *flat, *got;
	size_t total = 0, rtotal = 0, off;
	struct fi_cq_tagged_entry e;

	if (_i == 2)
		tnbc_env.cma = 0;
	for (size_t i = 0; i < ns; i++)
		total += sl[i];
	for (size_t i = 0; i < nr; i++)
		rtotal += rl[i];
	ck_assert_uint_eq(total, rtotal);
	flat = malloc(total);
	got = malloc(total);
	tu_fill(flat, total, 77);
	off = 0;
	for (size_t i = 0; i < ns; i++) {
		siov[i].iov_base = sl[i] ? malloc(sl[i]) : NULL;
		siov[i].iov_len = sl[i];
		if (sl[i])
			memcpy(siov[i].iov_base, flat + off, sl[i]);
		off += sl[i];
	}
	for (size_t i = 0; i < nr; i++) {
		riov[i].iov_base = rl[i] ? calloc(1, rl[i]) : NULL;
		riov[i].iov_len = rl[i];
	}
	tu_world_open(&w, 2, NULL);
	ck_assert_int_eq(fi_trecvv(w.ep[R].ep, riov, NULL, nr, FI_ADDR_UNSPEC,
				   11, 0, &ctx[1]),
			 0);
	ck_assert_int_eq(
		fi_tsendv(w.ep[A].ep, siov, NULL, ns, w.addr[R], 11, &ctx[10]),
		0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[1]);
	ck_assert_uint_eq(e.len, total);
	expect_tx(&w, A, &ctx[10]);
	ck_assert_uint_eq(tnbc_copy_from_iov(got, riov, nr, 0, total), total);
	ck_assert_uint_eq(tu_check(got, total, 77, 0), (size_t)-1);
	tu_world_close(&w);
	for (size_t i = 0; i < ns; i++)
		free(siov[i].iov_base);
	for (size_t i = 0; i < nr; i++)
		free(riov[i].iov_base);
	free(flat);
	free(got);
	tnbc_env.cma = old_cma;
}
END_TEST

/* 1 MiB through rendezvous; _i: 0 = single-copy pull, 1 = streamed
 * through the receive queue (FI_TNBC_CMA=0). */
/* A receive posted for a rendezvous message the application already
 * took off the queue (engine off: only its own calls progress) puts its
 * read off to the end of the next poll pass; that pass must make it even
 * though the queue is empty by then. */
START_TEST(match_rndv_posted_late_no_engine)
{
	const size_t len = 64 * 1024;
	int old_engine = tnbc_env.engine;
	uint8_t *sbuf[2], *rbuf[2];
	struct tu_world w;

	if (!tu_pulls())
		return; /* no read to put off: the sender streams */
	tnbc_env.engine = 0;
	tu_world_open(&w, 2, NULL);
	for (int i = 0; i < 2; i++) {
		sbuf[i] = malloc(len);
		rbuf[i] = malloc(len);
	}
	for (int round = 0; round < 8; round++) {
		struct fi_cq_tagged_entry e;
		ssize_t n = -FI_EAGAIN;
		uint64_t deadline;

		for (int i = 0; i < 2; i++) {
			memset(rbuf[i], 0, len);
			tu_fill(sbuf[i], len, 0x7777 + i + 2 * round);
			tsend(&w, A, R, sbuf[i], len, 5 + i, &ctx[10 + i]);
		}
		/* R's polls take both RTS into its unexpected list */
		ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 5));
		/* another RTS waits behind this one's: its read is put off
		 * to the next pass, which must come with the next calls (an
		 * idle endpoint is looked at again only every 1024th poll) */
		trecv(&w, R, rbuf[0], len, FI_ADDR_UNSPEC, 5, 0, &ctx[2]);
		/* a read that goes on (RDMA) is started by that pass, and
		 * ended by a later poll */
		deadline = tu_now_ms() + (tu_pulls_now() ? 0 : TU_WAIT_MS);
		for (int poll = 0;
		     (poll < 16 || tu_now_ms() < deadline) && n == -FI_EAGAIN;
		     poll++)
			n = fi_cq_read(w.ep[R].rx_cq, &e, 1);
		ck_assert_msg(n == 1, "round %d: the put-off read was not made",
			      round);
		ck_assert_ptr_eq(e.op_context, &ctx[2]);
		ck_assert_uint_eq(tu_check(rbuf[0], len, 0x7777 + 2 * round, 0),
				  (size_t)-1);
		trecv(&w, R, rbuf[1], len, FI_ADDR_UNSPEC, 6, 0, &ctx[3]);
		expect_rx(&w, R, &ctx[3], len, 6, A);
		ck_assert_uint_eq(tu_check(rbuf[1], len, 0x7778 + 2 * round, 0),
				  (size_t)-1);
		expect_tx(&w, A, &ctx[10]);
		expect_tx(&w, A, &ctx[11]);
	}
	tu_world_close(&w);
	tnbc_env.engine = old_engine;
	for (int i = 0; i < 2; i++) {
		free(sbuf[i]);
		free(rbuf[i]);
	}
}
END_TEST

START_TEST(match_rndv_1mib)
{
	const size_t len = 1 << 20;
	int old_cma = tnbc_env.cma;
	struct tu_world w;
	uint8_t *sbuf = malloc(len), *rbuf = calloc(1, len);
	struct fi_tnbc_engine_stats st;
	struct fi_cq_tagged_entry e;

	tnbc_env.cma = _i ? 0 : 1;
	tu_world_open(&w, 2, NULL);
	tu_fill(sbuf, len, 0x1234);
	trecv(&w, R, rbuf, len, FI_ADDR_UNSPEC, 99, 0, &ctx[1]);
	ck_assert_int_eq(fi_tsenddata(w.ep[A].ep, sbuf, len, NULL, 0x5151,
				      w.addr[R], 99, &ctx[10]),
			 0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[1]);
	ck_assert_uint_eq(e.len, len);
	ck_assert_uint_eq(e.tag, 99);
	ck_assert_uint_eq(e.data, 0x5151);
	ck_assert_ptr_eq(e.buf, rbuf);
	expect_tx(&w, A, &ctx[10]);
	ck_assert_uint_eq(tu_check(rbuf, len, 0x1234, 0), (size_t)-1);

	/* a second one, unexpected this time */
	memset(rbuf, 0, len);
	tu_fill(sbuf, len, 0x4321);
	tsend(&w, A, R, sbuf, len, 98, &ctx[11]);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 10));
	trecv(&w, R, rbuf, len, FI_ADDR_UNSPEC, 98, 0, &ctx[2]);
	expect_rx(&w, R, &ctx[2], len, 98, A);
	expect_tx(&w, A, &ctx[11]);
	ck_assert_uint_eq(tu_check(rbuf, len, 0x4321, 0), (size_t)-1);

	tu_engine_stats(w.d.domain, &st);
	ck_assert_int_eq(st.engine_running, 1);
	if (!tu_pulls()) {
		ck_assert_uint_eq(st.rndv_stream, 2);
		ck_assert_uint_eq(st.rndv_pull, 0);
	} else {
		ck_assert_uint_eq(st.rndv_pull, 2);
		ck_assert_uint_eq(st.rndv_stream, 0);
	}
	ck_assert_uint_gt(st.engine_pkts + st.app_pkts, 0);
	tu_world_close(&w);
	free(sbuf);
	free(rbuf);
	tnbc_env.cma = old_cma;
}
END_TEST

/* Several streamed rendezvous messages in flight at once, from two
 * senders, into receives posted in advance. */
START_TEST(match_stream_concurrent)
{
	enum { N = 6 };
	const size_t len = 300000;
	int old_cma = tnbc_env.cma;
	struct tu_world w;
	uint8_t *s[N], *r[N];
	struct fi_cq_tagged_entry e;

	tnbc_env.cma = 0;
	tu_world_open(&w, 3, NULL);
	for (int i = 0; i < N; i++) {
		s[i] = malloc(len);
		r[i] = calloc(1, len);
		tu_fill(s[i], len, 500 + i);
		trecv(&w, R, r[i], len, w.addr[(i % 2) ? B : A], 1000 + i, 0,
		      &ctx[i]);
	}
	for (int i = 0; i < N; i++)
		tsend(&w, (i % 2) ? B : A, R, s[i], len, 1000 + i,
		      &ctx[32 + i]);
	for (int i = 0; i < N; i++)
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	for (int i = 0; i < N; i++)
		ck_assert_msg(tu_check(r[i], len, 500 + i, 0) == (size_t)-1,
			      "message %d corrupted", i);
	for (int i = 0; i < N / 2; i++) {
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		tu_cq_expect(w.ep[B].tx_cq, &e, NULL);
	}
	tu_world_close(&w);
	for (int i = 0; i < N; i++) {
		free(s[i]);
		free(r[i]);
	}
	tnbc_env.cma = old_cma;
}
END_TEST

/* FI_DELIVERY_COMPLETE sends complete only once the data arrived, even
 * when small. */
START_TEST(match_delivery_complete)
{
	struct tu_world w;
	char s[16] = "delivered", r[16] = "";
	struct iovec iov = {.iov_base = s, .iov_len = sizeof(s)};
	struct fi_msg_tagged msg;
	struct fi_cq_tagged_entry e;

	tu_world_open(&w, 2, NULL);
	msg = (struct fi_msg_tagged){.msg_iov = &iov,
				     .iov_count = 1,
				     .addr = w.addr[R],
				     .tag = 12,
				     .context = &ctx[10]};
	ck_assert_int_eq(fi_tsendmsg(w.ep[A].ep, &msg,
				     FI_DELIVERY_COMPLETE | FI_COMPLETION),
			 0);
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	trecv(&w, R, r, sizeof(r), FI_ADDR_UNSPEC, 12, 0, &ctx[1]);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	expect_tx(&w, A, &ctx[10]);
	ck_assert_str_eq(r, "delivered");
	tu_world_close(&w);
}
END_TEST

/* Closing an endpoint with work still queued releases it all (the
 * sanitizer build checks the "releases"). */
START_TEST(match_close_with_pending)
{
	struct tu_world w;
	uint8_t *big = malloc(RNDV_LEN);
	char small[32] = "x", r[32];
	struct fi_cq_tagged_entry e;

	tu_world_open(&w, 2, NULL);
	tu_fill(big, RNDV_LEN, 1);
	trecv(&w, R, r, sizeof(r), FI_ADDR_UNSPEC, 1, 0, &ctx[1]);
	tsend(&w, A, R, big, RNDV_LEN, 2, &ctx[10]); /* unexpected RTS */
	tsend(&w, A, R, small, sizeof(small), 3, &ctx[11]); /* unexpected */
	/* the rendezvous send may complete first: the engine reads an
	 * unexpected one early while the receiver is away */
	for (;;) {
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		if (e.op_context == &ctx[11])
			break;
		ck_assert_ptr_eq(e.op_context, &ctx[10]);
	}
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 10));
	tu_world_close(&w);
	free(big);
}
END_TEST

/*
 * fi_inject may reuse its buffer at once, for any size up to
 * inject_size.  With FI_TNBC_EAGER_SIZE below inject_size, an injected
 * message larger than the eager size must still be copied at post time.
 * _i: 0 = single-copy rendezvous, 1 = streamed.
 */
START_TEST(match_inject_above_eager)
{
	const size_t old_eager = tnbc_env.eager_size;
	const int old_cma = tnbc_env.cma;
	const size_t len = 4000;
	struct tu_world w;
	uint8_t *buf = malloc(len), *r = calloc(1, len);
	struct fi_cq_tagged_entry e;

	tnbc_env.eager_size = 1024;
	tnbc_env.cma = _i ? 0 : 1;
	tu_world_open(&w, 2, NULL);
	ck_assert_uint_ge(inject_size(&w), len);
	tu_fill(buf, len, 44);
	ck_assert_int_eq(fi_tinject(w.ep[A].ep, buf, len, w.addr[R], 6), 0);
	/* the application owns the buffer again */
	memset(buf, 0xdd, len);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 10));
	trecv(&w, R, r, len, FI_ADDR_UNSPEC, 6, 0, &ctx[1]);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_uint_eq(e.len, len);
	ck_assert_msg(tu_check(r, len, 44, 0) == (size_t)-1,
		      "injected data changed after fi_tinject returned "
		      "(first bad byte %zu)",
		      tu_check(r, len, 44, 0));
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, 5));
	tu_world_close(&w);
	free(buf);
	free(r);
	tnbc_env.eager_size = old_eager;
	tnbc_env.cma = old_cma;
}
END_TEST

/*
 * The same peer inserted twice: once the second address is removed, the
 * first still names the peer, so a receive directed at it must match
 * that peer's messages (libfabric's own AVs return the same fi_addr for
 * a repeated insert; tnbc returns a new one, which is fine, but the
 * reverse lookup must not forget the peer).
 */
START_TEST(match_directed_after_dup_remove)
{
	struct tu_world w;
	fi_addr_t dup = FI_ADDR_NOTAVAIL;
	char s[8] = "dup", r[8] = "";
	struct fi_cq_tagged_entry e;
	fi_addr_t src;

	tu_world_open(&w, 2, NULL);
	ck_assert_int_eq(fi_av_insert(w.av, &w.ep[A].addr, 1, &dup, 0, NULL),
			 1);
	ck_assert_uint_ne(dup, w.addr[A]);
	ck_assert_int_eq(fi_av_remove(w.av, &dup, 1, 0), 0);
	trecv(&w, R, r, sizeof(r), w.addr[A], 1, 0, &ctx[1]);
	tsend(&w, A, R, s, sizeof(s), 1, &ctx[10]);
	expect_tx(&w, A, &ctx[10]);
	ck_assert_msg(tu_cq_wait(w.ep[R].rx_cq, &e, &src, NULL, 2000) == 1,
		      "receive directed at the remaining address of a peer "
		      "inserted twice never matched");
	ck_assert_uint_eq(src, w.addr[A]);
	ck_assert_str_eq(r, "dup");
	tu_world_close(&w);
}
END_TEST

/* The source of an arrival follows the AV as it changes: found, gone
 * once the sender's address is removed, and the new address once it is
 * inserted again (the endpoint remembers its last lookup). */
START_TEST(match_source_follows_av)
{
	struct tu_world w;
	fi_addr_t again = FI_ADDR_NOTAVAIL, want[3];
	struct fi_cq_tagged_entry e;
	char s[8] = "src", r[8];

	tu_world_open(&w, 2, NULL);
	want[0] = w.addr[A];
	want[1] = FI_ADDR_NOTAVAIL;
	for (int round = 0; round < 3; round++) {
		fi_addr_t src = 12345;

		if (round == 1)
			ck_assert_int_eq(fi_av_remove(w.av, &w.addr[A], 1, 0),
					 0);
		if (round == 2) {
			ck_assert_int_eq(fi_av_insert(w.av, &w.ep[A].addr, 1,
						      &again, 0, NULL),
					 1);
			want[2] = again;
		}
		/* A sends to R's address, which stays in the AV */
		trecv(&w, R, r, sizeof(r), FI_ADDR_UNSPEC, 4, 0, &ctx[1]);
		tsend(&w, A, R, s, sizeof(s), 4, &ctx[10]);
		expect_tx(&w, A, &ctx[10]);
		ck_assert_int_eq(
			tu_cq_wait(w.ep[R].rx_cq, &e, &src, NULL, TU_WAIT_MS),
			1);
		ck_assert_msg(src == want[round],
			      "round %d: source %" PRIu64 ", expected %" PRIu64,
			      round, (uint64_t)src, (uint64_t)want[round]);
	}
	tu_world_close(&w);
}
END_TEST

/* Opens an endpoint with its own CQs, bound to av, not yet enabled. */
static void ep_open_av(struct tu_dom *d, struct fid_av *av, struct tu_ep *e)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	size_t len = sizeof(e->addr);

	memset(e, 0, sizeof(*e));
	ck_assert_int_eq(fi_endpoint(d->domain, d->info, &e->ep, NULL), 0);
	ck_assert_int_eq(fi_getname(&e->ep->fid, &e->addr, &len), 0);
	e->name = e->addr.name;
	ck_assert_int_eq(fi_cq_open(d->domain, &cq_attr, &e->tx_cq, NULL), 0);
	ck_assert_int_eq(fi_cq_open(d->domain, &cq_attr, &e->rx_cq, NULL), 0);
	ck_assert_int_eq(fi_ep_bind(e->ep, &av->fid, 0), 0);
	ck_assert_int_eq(fi_ep_bind(e->ep, &e->tx_cq->fid, FI_TRANSMIT), 0);
	ck_assert_int_eq(fi_ep_bind(e->ep, &e->rx_cq->fid, FI_RECV), 0);
}

static void ep_close(struct tu_ep *e)
{
	ck_assert_int_eq(fi_close(&e->ep->fid), 0);
	ck_assert_int_eq(fi_close(&e->tx_cq->fid), 0);
	ck_assert_int_eq(fi_close(&e->rx_cq->fid), 0);
}

/* A sender the receiver's AV does not know: FI_SOURCE says
 * FI_ADDR_NOTAVAIL; once inserted, even a message that arrived before
 * can be received with a receive directed at the new address. */
START_TEST(match_unknown_sender)
{
	struct fi_av_attr attr = {.type = FI_AV_TABLE};
	struct tu_dom d;
	struct fid_av *av_r, *av_a;
	struct tu_ep er, ea;
	fi_addr_t to_r, a_in_r;
	char s1[8] = "one", s2[8] = "two", r[8];
	struct fi_cq_tagged_entry e;
	fi_addr_t src;

	tu_dom_open(&d, NULL);
	ck_assert_int_eq(fi_av_open(d.domain, &attr, &av_r, NULL), 0);
	ck_assert_int_eq(fi_av_open(d.domain, &attr, &av_a, NULL), 0);
	ep_open_av(&d, av_r, &er);
	ep_open_av(&d, av_a, &ea);
	ck_assert_int_eq(fi_av_insert(av_a, &er.addr, 1, &to_r, 0, NULL), 1);
	ck_assert_int_eq(fi_enable(er.ep), 0);
	ck_assert_int_eq(fi_enable(ea.ep), 0);

	/* posted receive, unknown sender */
	ck_assert_int_eq(fi_trecv(er.ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 1,
				  0, &ctx[1]),
			 0);
	ck_assert_int_eq(
		fi_tsend(ea.ep, s1, sizeof(s1), NULL, to_r, 1, &ctx[10]), 0);
	tu_cq_expect(er.rx_cq, &e, &src);
	ck_assert_ptr_eq(e.op_context, &ctx[1]);
	ck_assert_uint_eq(src, FI_ADDR_NOTAVAIL);
	ck_assert_str_eq(r, "one");

	/* unexpected from an unknown sender, then the sender is inserted */
	ck_assert_int_eq(
		fi_tsend(ea.ep, s2, sizeof(s2), NULL, to_r, 2, &ctx[11]), 0);
	ck_assert(tu_cq_quiet(er.rx_cq, 10));
	ck_assert_int_eq(fi_av_insert(av_r, &ea.addr, 1, &a_in_r, 0, NULL), 1);
	ck_assert_int_eq(
		fi_trecv(er.ep, r, sizeof(r), NULL, a_in_r, 2, 0, &ctx[2]), 0);
	tu_cq_expect(er.rx_cq, &e, &src);
	ck_assert_ptr_eq(e.op_context, &ctx[2]);
	ck_assert_uint_eq(src, a_in_r);
	ck_assert_str_eq(r, "two");

	ep_close(&er);
	ep_close(&ea);
	ck_assert_int_eq(fi_close(&av_r->fid), 0);
	ck_assert_int_eq(fi_close(&av_a->fid), 0);
	tu_dom_close(&d);
}
END_TEST

/* An endpoint sending to itself, eager and rendezvous. */
START_TEST(match_loopback)
{
	struct tu_world w;
	uint8_t *s = malloc(RNDV_LEN), *r = calloc(1, RNDV_LEN);

	tu_world_open(&w, 1, NULL);
	tu_fill(s, RNDV_LEN, 12);
	tsend(&w, 0, 0, s, EAGER_LEN, 1, &ctx[10]);
	tsend(&w, 0, 0, s, RNDV_LEN, 2, &ctx[11]);
	trecv(&w, 0, r, RNDV_LEN, w.addr[0], 2, 0, &ctx[2]);
	expect_rx(&w, 0, &ctx[2], RNDV_LEN, 2, 0);
	ck_assert_uint_eq(tu_check(r, RNDV_LEN, 12, 0), (size_t)-1);
	memset(r, 0, RNDV_LEN);
	trecv(&w, 0, r, RNDV_LEN, FI_ADDR_UNSPEC, 1, 0, &ctx[1]);
	expect_rx(&w, 0, &ctx[1], EAGER_LEN, 1, 0);
	ck_assert_uint_eq(tu_check(r, EAGER_LEN, 12, 0), (size_t)-1);
	expect_tx(&w, 0, &ctx[10]);
	expect_tx(&w, 0, &ctx[11]);
	tu_world_close(&w);
	free(s);
	free(r);
}
END_TEST

/* A rendezvous message into a zero-length receive: truncated to
 * nothing, and the sender is released.  _i: cma on/off. */
START_TEST(match_rndv_into_empty)
{
	const int old_cma = tnbc_env.cma;
	struct tu_world w;
	uint8_t *s = malloc(RNDV_LEN);
	struct fi_cq_err_entry err;

	tnbc_env.cma = _i ? 0 : 1;
	tu_world_open(&w, 2, NULL);
	tu_fill(s, RNDV_LEN, 2);
	trecv(&w, R, NULL, 0, FI_ADDR_UNSPEC, 3, 0, &ctx[1]);
	tsend(&w, A, R, s, RNDV_LEN, 3, &ctx[10]);
	tu_cq_expect_err(w.ep[R].rx_cq, &err);
	ck_assert_int_eq(err.err, FI_ETRUNC);
	ck_assert_uint_eq(err.olen, RNDV_LEN);
	ck_assert_uint_eq(err.len, 0);
	expect_tx(&w, A, &ctx[10]);
	tu_world_close(&w);
	free(s);
	tnbc_env.cma = old_cma;
}
END_TEST

/* Several application threads send on the same endpoints at once
 * (FI_THREAD_SAFE): nothing is lost, and each thread's messages arrive
 * in its own order. */
enum { ST_THREADS = 4, ST_MSGS = 400 };

struct stress_arg {
	struct tu_world *w;
	int from;
	uint64_t tag;
};

static size_t stress_len(int k)
{
	return (k % 50 == 49) ? 20000 : 16 + (size_t)(k % 7) * 100;
}

static void *stress_sender(void *p)
{
	struct stress_arg *a = p;
	uint8_t *buf[ST_MSGS];

	for (int k = 0; k < ST_MSGS; k++) {
		size_t len = stress_len(k);
		ssize_t ret;

		buf[k] = malloc(len);
		tu_fill(buf[k], len, (uint32_t)(a->tag * 100000 + k));
		do {
			ret = fi_tsend(a->w->ep[a->from].ep, buf[k], len, NULL,
				       a->w->addr[R], a->tag, NULL);
		} while (ret == -FI_EAGAIN);
		if (ret)
			return (void *)(intptr_t)ret;
	}
	/* the buffers must live until the sends complete: the main thread
	 * counts tx completions before it closes anything */
	for (;;) {
		struct fi_cq_tagged_entry e[16];
		static _Atomic int done[TU_MAX_EPS];
		ssize_t n = fi_cq_read(a->w->ep[a->from].tx_cq, e, 16);

		if (n > 0)
			atomic_fetch_add(&done[a->from], (int)n);
		if (atomic_load(&done[a->from]) >=
		    ST_MSGS * (a->from == A ? ST_THREADS - 1 : 1))
			break;
		if (n < 0 && n != -FI_EAGAIN)
			return (void *)(intptr_t)n;
	}
	for (int k = 0; k < ST_MSGS; k++)
		free(buf[k]);
	return NULL;
}

START_TEST(match_threads)
{
	struct tu_world w;
	struct stress_arg args[ST_THREADS];
	pthread_t th[ST_THREADS];
	uint8_t *rb[ST_THREADS][ST_MSGS];
	uint32_t rctx[ST_THREADS][ST_MSGS];
	uint64_t deadline;
	int got = 0;

	tu_world_open(&w, 3, NULL);
	for (int t = 0; t < ST_THREADS; t++)
		for (int k = 0; k < ST_MSGS; k++) {
			rb[t][k] = calloc(1, stress_len(k));
			rctx[t][k] = (uint32_t)(t * ST_MSGS + k);
			trecv(&w, R, rb[t][k], stress_len(k), FI_ADDR_UNSPEC,
			      100 + (uint64_t)t, 0, &rctx[t][k]);
		}
	/* threads 0..2 share endpoint A, thread 3 uses B */
	for (int t = 0; t < ST_THREADS; t++) {
		args[t] =
			(struct stress_arg){.w = &w,
					    .from = t < ST_THREADS - 1 ? A : B,
					    .tag = 100 + (uint64_t)t};
		ck_assert_int_eq(
			pthread_create(&th[t], NULL, stress_sender, &args[t]),
			0);
	}
	deadline = tu_now_ms() + TU_WAIT_MS;
	while (got < ST_THREADS * ST_MSGS && tu_now_ms() < deadline) {
		struct fi_cq_tagged_entry e[16];
		ssize_t n = fi_cq_read(w.ep[R].rx_cq, e, 16);

		ck_assert_msg(n > 0 || n == -FI_EAGAIN, "rx cq: %zd", n);
		for (ssize_t i = 0; i < n; i++) {
			uint32_t id = *(uint32_t *)e[i].op_context;
			int t = (int)(id / ST_MSGS), k = (int)(id % ST_MSGS);

			ck_assert_uint_eq(e[i].tag, 100 + (uint64_t)t);
			ck_assert_uint_eq(e[i].len, stress_len(k));
			ck_assert_msg(
				tu_check(rb[t][k], stress_len(k),
					 (uint32_t)(e[i].tag * 100000 + k),
					 0) == (size_t)-1,
				"thread %d message %d out of order or "
				"corrupted",
				t, k);
		}
		/* the bound is on a stall, not on the whole burst: under
		 * an emulator on a loaded host (the verbs guest) 1600
		 * messages take longer than it */
		if (n > 0) {
			got += (int)n;
			deadline = tu_now_ms() + TU_WAIT_MS;
		}
	}
	ck_assert_int_eq(got, ST_THREADS * ST_MSGS);
	for (int t = 0; t < ST_THREADS; t++) {
		void *ret;

		pthread_join(th[t], &ret);
		ck_assert_ptr_null(ret);
	}
	tu_world_close(&w);
	for (int t = 0; t < ST_THREADS; t++)
		for (int k = 0; k < ST_MSGS; k++)
			free(rb[t][k]);
}
END_TEST

/*
 * A rendezvous whose source buffer became unreadable before the receiver
 * read it fails on both sides, and both error entries carry a positive fi_errno
 * in err (fi_cq(3): err is the positive error code), the receive's as
 * well as the send's.
 */
START_TEST(match_tx_error)
{
	struct tu_world_opts o = {.cntrs = true};
	size_t old_pull = tnbc_env.unexp_pull;
	struct tu_world w;
	uint8_t *sb, *r = calloc(1, RNDV_LEN);
	struct fi_cq_err_entry err;

	/* The read must come after the unmap: with the receiver idle, the
	 * engine would otherwise be free to read the message early, before
	 * it, and the send would rightly succeed. */
	tnbc_env.unexp_pull = 0;
	/* the receiver's read of the sender's memory fails; a transport
	 * that cannot read it has the sender write it instead, and one
	 * that reads with RDMA read registered (pinned) the buffer when the
	 * RTS went, so that the read still finds the data */
	if (!tu_pulls_now()) {
		free(r);
		return;
	}
	tu_world_open(&w, 2, &o);
	sb = mmap(NULL, RNDV_LEN, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(sb != MAP_FAILED);
	tu_fill(sb, RNDV_LEN, 1);
	tsend(&w, A, R, sb, RNDV_LEN, 5, &ctx[10]);
	/* PROT_NONE, not munmap: sender and receiver share this process,
	 * and an unmapped range may be mapped again by the time of the
	 * read (seen once), which then succeeds */
	ck_assert_int_eq(mprotect(sb, RNDV_LEN, PROT_NONE), 0);
	trecv(&w, R, r, RNDV_LEN, FI_ADDR_UNSPEC, 5, 0, &ctx[1]);
	tu_cq_expect_err(w.ep[R].rx_cq, &err);
	ck_assert_ptr_eq(err.op_context, &ctx[1]);
	ck_assert_msg(err.err > 0, "receive error err %d", err.err);
	ck_assert_uint_eq(fi_cntr_readerr(w.ep[R].rx_cntr), 1);

	tu_cq_expect_err(w.ep[A].tx_cq, &err);
	ck_assert_ptr_eq(err.op_context, &ctx[10]);
	ck_assert_uint_eq(err.flags & FI_SEND, FI_SEND);
	ck_assert_uint_eq(fi_cntr_readerr(w.ep[A].tx_cntr), 1);
	ck_assert_msg(err.err > 0,
		      "send error completion has err %d (%s); fi_cq(3) wants "
		      "a positive fi_errno",
		      err.err, fi_strerror(err.err < 0 ? -err.err : err.err));
	ck_assert_int_eq(err.err, FI_EIO);
	tu_world_close(&w);
	munmap(sb, RNDV_LEN);
	free(r);
	tnbc_env.unexp_pull = old_pull;
}
END_TEST

/*
 * A receiver process dies holding an RTS it never read.  The sender's
 * rendezvous send must fail with FI_EHOSTUNREACH instead of waiting
 * forever, both while the dead process is an unreaped zombie (_i 0) and
 * after it was reaped (_i 1).
 */
START_TEST(match_rndv_dead_receiver)
{
	int to_parent[2], to_child[2];
	struct fi_cq_err_entry err;
	struct tnbc_addr peer_name;
	char region[64], go = 0;
	struct tu_world w;
	fi_addr_t peer;
	uint8_t *sb;
	pid_t child;

	/* the receiver must not take the data before it dies */
	tnbc_env.unexp_pull = 0;
	ck_assert_int_eq(pipe(to_parent), 0);
	ck_assert_int_eq(pipe(to_child), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		struct tu_world cw;

		tu_world_open(&cw, 1, NULL);
		if (write(to_parent[1], &cw.ep[0].addr,
			  sizeof(cw.ep[0].addr)) != sizeof(cw.ep[0].addr))
			_exit(2);
		/* die without reading anything or closing */
		if (read(to_child[0], &go, 1) != 1)
			_exit(3);
		_exit(0);
	}
	ck_assert_int_eq(read(to_parent[0], &peer_name, sizeof(peer_name)),
			 (ssize_t)sizeof(peer_name));
	tu_world_open(&w, 1, NULL);
	ck_assert_int_eq(fi_av_insert(w.av, &peer_name, 1, &peer, 0, NULL), 1);
	sb = malloc(RNDV_LEN);
	tu_fill(sb, RNDV_LEN, 3);
	if (tnbc_env.xport == &tnbc_loop_ops) {
		/* the loopback reaches this process only: another one's
		 * endpoint is refused at once */
		ck_assert_int_eq(fi_tsend(w.ep[0].ep, sb, RNDV_LEN, NULL, peer,
					  9, &ctx[0]),
				 -FI_EHOSTUNREACH);
		ck_assert_int_eq(write(to_child[1], &go, 1), 1);
		ck_assert_int_eq(waitpid(child, NULL, 0), child);
		tu_world_close(&w);
		free(sb);
		tnbc_env.unexp_pull = tu_env_defaults.unexp_pull;
		return;
	}
	ck_assert_int_eq(
		fi_tsend(w.ep[0].ep, sb, RNDV_LEN, NULL, peer, 9, &ctx[0]), 0);
	ck_assert_int_eq(write(to_child[1], &go, 1), 1);
	if (_i == 1)
		ck_assert_int_eq(waitpid(child, NULL, 0), child);
	else
		tu_sleep_ms(100); /* let it become a zombie */

	tu_cq_expect_err(w.ep[0].tx_cq, &err);
	ck_assert_ptr_eq(err.op_context, &ctx[0]);
	ck_assert_int_eq(err.err, FI_EHOSTUNREACH);
	ck_assert_uint_eq(err.flags & FI_SEND, FI_SEND);

	if (_i == 0)
		ck_assert_int_eq(waitpid(child, NULL, 0), child);
	snprintf(region, sizeof(region), "/tnbc-%u-%u", peer_name.name.pid,
		 peer_name.name.uid);
	shm_unlink(region);
	tu_world_close(&w);
	free(sb);
	tnbc_env.unexp_pull = tu_env_defaults.unexp_pull;
}
END_TEST

/*
 * FI_PROGRESS_AUTO: once posted, a transfer completes with no further
 * call into the provider; the application only blocks in poll(2) on the
 * CQs' wait fds.  _i: 0 eager, 1 rendezvous pull, 2 rendezvous streamed.
 */
START_TEST(match_auto_progress)
{
	struct tu_world_opts o = {.cq_wait = FI_WAIT_FD};
	const size_t len = _i ? (1 << 20) : EAGER_LEN;
	const int old_cma = tnbc_env.cma;
	struct tu_world w;
	uint8_t *sbuf = malloc(len), *rbuf = calloc(1, len);
	struct fi_tnbc_engine_stats st;
	struct pollfd pfd[2];
	struct fi_cq_tagged_entry e;
	uint64_t deadline;
	int fds_ready = 0;

	tnbc_env.cma = _i == 2 ? 0 : 1;
	tu_world_open(&w, 2, &o);
	ck_assert_int_eq(
		fi_control(&w.ep[R].rx_cq->fid, FI_GETWAIT, &pfd[0].fd), 0);
	ck_assert_int_eq(
		fi_control(&w.ep[A].tx_cq->fid, FI_GETWAIT, &pfd[1].fd), 0);
	tu_fill(sbuf, len, 71);
	trecv(&w, R, rbuf, len, FI_ADDR_UNSPEC, 1, 0, &ctx[1]);
	tsend(&w, A, R, sbuf, len, 1, &ctx[10]);

	/* no provider call from here until both fds fire */
	deadline = tu_now_ms() + TU_WAIT_MS;
	while (fds_ready != 3 && tu_now_ms() < deadline) {
		pfd[0].events = pfd[1].events = POLLIN;
		pfd[0].revents = pfd[1].revents = 0;
		ck_assert_int_ge(poll(pfd, 2, 100), 0);
		if (pfd[0].revents & POLLIN)
			fds_ready |= 1;
		if (pfd[1].revents & POLLIN)
			fds_ready |= 2;
	}
	ck_assert_msg(fds_ready == 3,
		      "no completion without application progress "
		      "(rx fd %s, tx fd %s)",
		      fds_ready & 1 ? "ready" : "silent",
		      fds_ready & 2 ? "ready" : "silent");
	/* the engine bumps its counter just after it wrote the completion:
	 * give it a moment */
	deadline = tu_now_ms() + 1000;
	do {
		tu_engine_stats(w.d.domain, &st);
	} while (!st.engine_pkts && tu_now_ms() < deadline);
	ck_assert_uint_eq(st.app_pkts, 0);
	ck_assert_uint_gt(st.engine_pkts, 0);

	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[1]);
	ck_assert_uint_eq(e.len, len);
	ck_assert_uint_eq(tu_check(rbuf, len, 71, 0), (size_t)-1);
	expect_tx(&w, A, &ctx[10]);
	tu_world_close(&w);
	free(sbuf);
	free(rbuf);
	tnbc_env.cma = old_cma;
}
END_TEST

/* Capabilities the endpoint was not opened with are not offered, and
 * without FI_DIRECTED_RECV / FI_SOURCE the source address plays no
 * part. */
START_TEST(match_caps_subset)
{
	struct fi_info *hints = fi_allocinfo();
	struct tu_world w;
	char s[8] = "any", r[8] = "";
	struct fi_cq_tagged_entry e;
	fi_addr_t src = 0;

	hints->caps = FI_TAGGED;
	tu_world_open(&w, 3, &(struct tu_world_opts){.hints = hints});
	ck_assert_uint_eq(w.d.info->caps & (FI_DIRECTED_RECV | FI_SOURCE |
					    FI_RMA | FI_ATOMIC | FI_TRIGGER),
			  0);
	/* only what was asked for is reported ... */
	ck_assert_uint_eq(w.d.info->caps & FI_MSG, 0);
	ck_assert_int_eq(fi_write(w.ep[A].ep, s, sizeof(s), NULL, w.addr[R], 0,
				  1, &ctx[0]),
			 -FI_EOPNOTSUPP);
	ck_assert_int_eq(fi_atomic(w.ep[A].ep, s, 1, NULL, w.addr[R], 0, 1,
				   FI_UINT64, FI_SUM, &ctx[0]),
			 -FI_EOPNOTSUPP);
	/* a receive "from A" takes B's message: the address is ignored */
	trecv(&w, R, r, sizeof(r), w.addr[A], 1, 0, &ctx[1]);
	tsend(&w, B, R, s, sizeof(s), 1, &ctx[10]);
	tu_cq_expect(w.ep[R].rx_cq, &e, &src);
	ck_assert_ptr_eq(e.op_context, &ctx[1]);
	ck_assert_str_eq(r, "any");
	ck_assert_uint_eq(src, FI_ADDR_NOTAVAIL);
	tu_world_close(&w);

	fi_freeinfo(hints);
}
END_TEST

/* FI_SETOPSFLAG / FI_GETOPSFLAG: a default FI_COMPLETION makes plain
 * receives complete on a selective-completion CQ. */
START_TEST(match_ops_flags)
{
	struct tu_world_opts o = {.cq_bind_flags = FI_SELECTIVE_COMPLETION};
	struct tu_world w;
	uint64_t flags;
	char s[8] = "flags", r[8];

	tu_world_open(&w, 2, &o);
	flags = FI_RECV | FI_COMPLETION;
	ck_assert_int_eq(fi_control(&w.ep[R].ep->fid, FI_SETOPSFLAG, &flags),
			 0);
	flags = FI_RECV;
	ck_assert_int_eq(fi_control(&w.ep[R].ep->fid, FI_GETOPSFLAG, &flags),
			 0);
	ck_assert_uint_eq(flags & FI_COMPLETION, FI_COMPLETION);
	flags = FI_RECV | FI_MULTI_RECV;
	ck_assert_int_lt(fi_control(&w.ep[R].ep->fid, FI_SETOPSFLAG, &flags),
			 0);
	trecv(&w, R, r, sizeof(r), FI_ADDR_UNSPEC, 1, 0, &ctx[1]);
	tsend(&w, A, R, s, sizeof(s), 1, &ctx[10]);
	expect_rx(&w, R, &ctx[1], sizeof(s), 1, A);
	ck_assert_str_eq(r, "flags");
	/* the sender kept its default: no completion */
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, TU_QUIET_MS));
	tu_world_close(&w);
}
END_TEST

Suite *tu_match_suite(void)
{
	Suite *s = suite_create("match");
	TCase *tc = tcase_create("matching");
	TCase *tr = tcase_create("rendezvous");

	tcase_set_timeout(tc, TU_TCASE_TIMEOUT);
	tcase_add_test(tc, match_tag_ignore);
	tcase_add_test(tc, match_tagged_untagged);
	tcase_add_test(tc, match_directed_recv);
	tcase_add_loop_test(tc, match_unexpected_and_posted, 0, 4);
	tcase_add_loop_test(tc, match_burst_single_copy, 0, 2);
	tcase_add_loop_test(tc, match_order_sas, 0, 4);
	tcase_add_loop_test(tc, match_truncation, 0, 3);
	tcase_add_test(tc, match_cancel);
	tcase_add_test(tc, match_peek_claim_discard);
	tcase_add_loop_test(tc, match_remote_cq_data, 0, 3);
	tcase_add_test(tc, match_selective_completion);
	tcase_add_test(tc, match_inject);
	tcase_add_test(tc, match_bad_input);
	tcase_add_test(tc, match_not_enabled);
	tcase_add_loop_test(tc, match_iov, 0, 3);
	tcase_add_test(tc, match_delivery_complete);
	tcase_add_test(tc, match_close_with_pending);
	tcase_add_loop_test(tc, match_inject_above_eager, 0, 2);
	tcase_add_test(tc, match_directed_after_dup_remove);
	tcase_add_test(tc, match_source_follows_av);
	tcase_add_test(tc, match_unknown_sender);
	tcase_add_test(tc, match_loopback);
	tcase_add_loop_test(tc, match_rndv_into_empty, 0, 2);
	tcase_add_test(tc, match_threads);
	tcase_add_test(tc, match_tx_error);
	tcase_add_loop_test(tc, match_rndv_dead_receiver, 0, 2);
	tcase_add_test(tc, match_caps_subset);
	tcase_add_test(tc, match_ops_flags);
	suite_add_tcase(s, tc);

	tcase_set_timeout(tr, TU_TCASE_TIMEOUT);
	tcase_add_loop_test(tr, match_rndv_1mib, 0, 2);
	tcase_add_test(tr, match_stream_concurrent);
	tcase_add_test(tr, match_rndv_posted_late_no_engine);
	tcase_add_loop_test(tr, match_auto_progress, 0, 3);
	suite_add_tcase(s, tr);
	return s;
}
