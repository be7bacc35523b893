/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Tests the network transports (TCP, verbs) share: one transport forced
 * for a test, a message that must still get through, a peer that goes
 * away, and fi_domain(3)'s auth_key between domains of their own.
 */
#include <netinet/in.h>
#include <sys/socket.h>

#include "tnbc_unit.h"

enum { R = 0, A = 1 };

void tu_xport_only_begin(struct tu_xport_only *o,
			 const struct tnbc_xport_ops *ops)
{
	memcpy(o->list, tnbc_env.xport_list, sizeof(o->list));
	o->n = tnbc_env.nxport;
	o->first = tnbc_env.xport;
	tnbc_env.xport_list[0] = ops;
	tnbc_env.nxport = 1;
	tnbc_env.xport = ops;
}

void tu_xport_only_end(struct tu_xport_only *o)
{
	memcpy(tnbc_env.xport_list, o->list, sizeof(o->list));
	tnbc_env.nxport = o->n;
	tnbc_env.xport = o->first;
}

/* A message from endpoint a reaches endpoint r. */
void tu_still_works(struct tu_world *w, int r, int a, uint64_t tag)
{
	char s[64], buf[64];
	struct fi_cq_tagged_entry e;

	tu_fill(s, sizeof(s), (uint32_t)tag);
	ck_assert_int_eq(fi_trecv(w->ep[r].ep, buf, sizeof(buf), NULL,
				  FI_ADDR_UNSPEC, tag, 0, &buf),
			 0);
	ck_assert_int_eq(
		fi_tsend(w->ep[a].ep, s, sizeof(s), NULL, w->addr[r], tag, &s),
		0);
	tu_cq_expect(w->ep[r].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &buf);
	ck_assert_mem_eq(buf, s, sizeof(s));
	tu_cq_expect(w->ep[a].tx_cq, &e, NULL);
}

/* Sends 64 B from ep to a peer that went away until a send fails, at
 * once or in a completion (cq), within TU_WAIT_MS; returns that error
 * (0: every send succeeded).  The connection breaks: a send must fail,
 * never hang. */
int tu_send_until_refused(struct fid_ep *ep, struct fid_cq *cq, fi_addr_t to,
			  uint64_t tag)
{
	struct fi_cq_err_entry err;
	char s[64] = "x";
	int ret = 0;

	for (unsigned ms = 0; ms < TU_WAIT_MS && !ret; ms++) {
		struct fi_cq_tagged_entry e;
		ssize_t n;

		ret = (int)fi_tsend(ep, s, sizeof(s), NULL, to, tag, s);
		if (ret == -FI_EAGAIN)
			ret = 0;
		if (ret)
			break;
		do
			n = fi_cq_read(cq, &e, 1);
		while (n == -FI_EAGAIN);
		if (n == -FI_EAVAIL) {
			ck_assert_int_eq(fi_cq_readerr(cq, &err, 0), 1);
			ret = -err.err;
			break;
		}
		tu_sleep_ms(1);
	}
	return ret;
}

/* A peer endpoint that closes: sends to it fail instead of waiting. */
void tu_net_peer_gone(const struct tnbc_xport_ops *ops)
{
	struct tu_xport_only o;
	struct tu_world w;
	int ret;

	tu_xport_only_begin(&o, ops);
	tu_world_open(&w, 2, NULL);
	tu_still_works(&w, R, A, 1);
	ck_assert_int_eq(fi_close(&w.ep[R].ep->fid), 0);
	w.ep[R].ep = NULL;
	ret = tu_send_until_refused(w.ep[A].ep, w.ep[A].tx_cq, w.addr[R], 7);
	ck_assert_msg(ret == -FI_EHOSTUNREACH, "send to a closed peer: %d",
		      ret);
	tu_world_close(&w);
	tu_xport_only_end(&o);
}

/* k sends 64 B to r's endpoint: 0 once r has it, or the error the send
 * failed with. */
int tu_kside_send(struct tu_kside *k, struct tu_kside *r, uint64_t tag)
{
	char s[64] = "keyed", buf[64];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t to;
	int ret = 0;
	bool sent = false, got = false;

	ck_assert_int_eq(fi_av_insert(k->av, r->addr, 1, &to, 0, NULL), 1);
	ck_assert_int_eq(fi_trecv(r->ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC,
				  tag, 0, buf),
			 0);
	for (unsigned ms = 0; ms < TU_WAIT_MS && !got; ms++) {
		ssize_t n;

		if (!sent) {
			ret = (int)fi_tsend(k->ep, s, sizeof(s), NULL, to, tag,
					    s);
			if (ret && ret != -FI_EAGAIN)
				break;
			sent = !ret;
		}
		n = fi_cq_read(k->cq, &e, 1);
		if (n == -FI_EAVAIL) {
			ck_assert_int_eq(fi_cq_readerr(k->cq, &err, 0), 1);
			ret = -err.err;
			break;
		}
		n = fi_cq_read(r->cq, &e, 1);
		if (n == 1 && e.op_context == buf)
			got = true;
		/* refused: the next send finds the peer gone */
		if (sent && !got && ms % 100 == 99)
			sent = false;
		tu_sleep_ms(1);
	}
	if (!got) {
		/* take back the receive posted for it, and its report */
		ck_assert_int_eq(fi_cancel(&r->ep->fid, buf), 0);
		tu_cq_expect_err(r->cq, &err);
		ck_assert_int_eq(err.err, FI_ECANCELED);
		return ret ? ret : -FI_ETIMEDOUT;
	}
	ck_assert_str_eq(buf, "keyed");
	return 0;
}

/* fi_domain(3)'s auth_key: a connection from a domain with another key,
 * or none, is refused; the same key gets through. */
void tu_net_auth_key(const struct tnbc_xport_ops *ops)
{
	struct fi_tnbc_engine_stats st;
	struct tu_kside r, wrong, none, right;
	struct tu_xport_only o;
	uint64_t refused;
	int ret;

	tu_xport_only_begin(&o, ops);
	tu_kside_open(&r, "job-42", FI_FORMAT_UNSPEC);
	tu_kside_open(&wrong, "job-41", FI_FORMAT_UNSPEC);
	tu_kside_open(&none, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&right, "job-42", FI_FORMAT_UNSPEC);
	ret = tu_kside_send(&wrong, &r, 1);
	ck_assert_msg(ret == -FI_EHOSTUNREACH, "another key: %d", ret);
	ret = tu_kside_send(&none, &r, 2);
	ck_assert_msg(ret == -FI_EHOSTUNREACH, "no key: %d", ret);
	ck_assert_int_eq(tu_kside_send(&right, &r, 3), 0);
	/* no key is refused by r; another key by whichever side finds
	 * the other's proof wrong first (over TCP, the connector) */
	tu_engine_stats(r.dom, &st);
	ck_assert_uint_ge(st.refused_peers, 1);
	refused = st.refused_peers;
	tu_engine_stats(wrong.dom, &st);
	ck_assert_uint_ge(refused + st.refused_peers, 2);
	tu_kside_close(&right);
	tu_kside_close(&none);
	tu_kside_close(&wrong);
	tu_kside_close(&r);
	tu_xport_only_end(&o);
}

unsigned tu_tcp_free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	/* as the provider binds its own (never connected: no TIME_WAIT) */
	ck_assert_int_eq(
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* A flood of n messages of len bytes (tags tag0 + i, contents
 * tu_fill(5000 + i)) from ep to to, nobody having asked for them. */
void tu_flood_init(struct tu_flood *f, struct fid_ep *ep, struct fid_cq *cq,
		   fi_addr_t to, int n, size_t len)
{
	*f = (struct tu_flood){
		.ep = ep, .cq = cq, .to = to, .n = n, .len = len, .tag0 = 1000};
	f->buf = malloc((size_t)n * len);
	ck_assert_ptr_nonnull(f->buf);
	for (int i = 0; i < n; i++)
		tu_fill(f->buf + (size_t)i * len, len, 5000 + (uint32_t)i);
}

void tu_flood_free(struct tu_flood *f)
{
	free(f->buf);
	f->buf = NULL;
}

/* Hands the flooder's endpoint what it takes now, without waiting; true
 * when a send ended (an eager one ends once its packet left: one the
 * endpoint queued for later has not). */
bool tu_flood_pump(struct tu_flood *f)
{
	struct fi_cq_tagged_entry e;
	bool ended = false;

	while (f->next < f->n) {
		ssize_t ret = fi_tsend(f->ep, f->buf + (size_t)f->next * f->len,
				       f->len, NULL, f->to,
				       f->tag0 + (uint64_t)f->next, NULL);

		if (ret == -FI_EAGAIN)
			break;
		ck_assert_msg(ret == 0, "fi_tsend: %zd", ret);
		f->next++;
	}
	while (fi_cq_read(f->cq, &e, 1) == 1) {
		ck_assert_msg(!(e.flags & FI_RECV),
			      "a receive ended on the flooder's queue");
		f->done++;
		ended = true;
	}
	return ended;
}

/* Floods until the sends stop ending (none for 500 ms), the receiver's
 * queue rcq read meanwhile: the receiver holds all it will. */
void tu_flood_until_stalled(struct tu_flood *f, struct fid_cq *rcq)
{
	uint64_t end = tu_now_ms() + 6 * TU_WAIT_MS, still;

	for (still = tu_now_ms(); tu_now_ms() - still < 500;) {
		ck_assert_msg(tu_now_ms() < end, "the flood never stopped");
		ck_assert_msg(f->done < f->n, "R took all %d messages", f->n);
		if (tu_flood_pump(f))
			still = tu_now_ms();
		(void)fi_cq_read(rcq, NULL, 0);
		tu_sleep_ms(1);
	}
}

/* The receiver (rep, its receive completions on rcq) asks for every
 * flooded message in turn: each arrives, in order and whole, and every
 * send ends. */
void tu_flood_drain(struct tu_flood *f, struct fid_ep *rep, struct fid_cq *rcq)
{
	uint8_t *rbuf = malloc(f->len);
	struct fi_cq_tagged_entry e;
	uint64_t end;
	int rctx;

	ck_assert_ptr_nonnull(rbuf);
	for (int i = 0; i < f->n; i++) {
		ck_assert_int_eq(fi_trecv(rep, rbuf, f->len, NULL,
					  FI_ADDR_UNSPEC, f->tag0 + (uint64_t)i,
					  0, &rctx),
				 0);
		for (end = tu_now_ms() + TU_WAIT_MS;;) {
			ssize_t got = fi_cq_read(rcq, &e, 1);

			if (got == 1 && e.op_context == &rctx)
				break;
			ck_assert_msg(got == -FI_EAGAIN || got == 1,
				      "message %d: cq %zd", i, got);
			ck_assert_msg(tu_now_ms() < end, "message %d lost", i);
			tu_flood_pump(f);
		}
		ck_assert_uint_eq(e.tag, f->tag0 + (uint64_t)i);
		ck_assert_msg(tu_check(rbuf, f->len, 5000 + (uint32_t)i, 0) ==
				      (size_t)-1,
			      "message %d corrupted or out of order", i);
	}
	for (end = tu_now_ms() + TU_WAIT_MS; f->done < f->n;) {
		ck_assert_msg(tu_now_ms() < end, "%d of %d sends ended",
			      f->done, f->n);
		tu_flood_pump(f);
	}
	free(rbuf);
}

/* Waits for one completion on k's queue with context ctx (what: which,
 * for the failure's message), pumping f. */
static void tu_flood_expect(struct tu_kside *k, void *ctx, struct tu_flood *f,
			    const char *what)
{
	struct fi_cq_tagged_entry e;

	for (uint64_t end = tu_now_ms() + TU_WAIT_MS;;) {
		ssize_t n = fi_cq_read(k->cq, &e, 1);

		if (n == 1 && e.op_context == ctx)
			return;
		/* the flooder's own queue: its sends that ended meanwhile */
		if (n == 1 && f && k->cq == f->cq && !(e.flags & FI_RECV))
			f->done++;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			ck_assert_int_eq(fi_cq_readerr(k->cq, &err, 0), 1);
			ck_abort_msg("error completion (%s, %s): %s",
				     err.op_context == ctx ? "awaited"
							   : "another",
				     err.flags & FI_RECV ? "recv" : "send",
				     fi_strerror(err.err));
		}
		ck_assert_msg(n == -FI_EAGAIN || n == 1, "cq: %zd", n);
		ck_assert_msg(tu_now_ms() < end,
			      "no completion of %s within %d ms (%d of %d "
			      "flooded sends sent, %d ended)",
			      what, TU_WAIT_MS, f ? f->next : 0, f ? f->n : 0,
			      f ? f->done : 0);
		if (f && k->cq != f->cq)
			tu_flood_pump(f);
	}
}

/*
 * Per-connection back pressure between domains of their own.  F floods
 * R with n messages nobody asked for: past FI_TNBC_UNEXP_MAX R holds
 * them, and once F's sends stop ending, A's message to a receive R
 * posted still gets through, F (held back) still answers R's
 * rendezvous send, and every one of F's messages arrives, in order and
 * whole, once receives ask for them.  F is held back by a notice
 * (senders_held); moved: the transport moves held messages out of its
 * receive buffers (verbs) and says so in spilled_pkts.
 */
void tu_net_flood(const struct tnbc_xport_ops *ops, int n, bool moved)
{
	const size_t len = 4000, big = 200000;
	size_t saved = tnbc_env.unexp_max;
	unsigned saved_timeout = tnbc_env.tcp_timeout_ms;
	struct tu_xport_only o;
	struct tu_kside r, f, a;
	struct tu_flood fl;
	struct fi_tnbc_engine_stats st;
	uint8_t *rbuf = malloc(big), *sbig = malloc(big), abuf[4000];
	fi_addr_t f_to_r, r_at_a, f_at_r;
	uint64_t end;
	int ctx[4];

	tnbc_env.unexp_max = 64 * 1024;
	tnbc_env.tcp_timeout_ms = 1000;
	tu_xport_only_begin(&o, ops);
	tu_kside_open(&r, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&f, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&a, NULL, FI_FORMAT_UNSPEC);
	ck_assert_int_eq(fi_av_insert(f.av, r.addr, 1, &f_to_r, 0, NULL), 1);
	ck_assert_int_eq(fi_av_insert(a.av, r.addr, 1, &r_at_a, 0, NULL), 1);
	ck_assert_int_eq(fi_av_insert(r.av, f.addr, 1, &f_at_r, 0, NULL), 1);
	tu_flood_init(&fl, f.ep, f.cq, f_to_r, n, len);

	ck_assert_int_eq(
		fi_trecv(r.ep, rbuf, len, NULL, FI_ADDR_UNSPEC, 1, 0, &ctx[0]),
		0);
	tu_flood_until_stalled(&fl, r.cq);
	tu_engine_stats(r.dom, &st);
	ck_assert_uint_ge(st.unexp_held, 1);
	/* R receives nothing of F's for three times FI_TNBC_TCP_TIMEOUT_MS:
	 * a connection held back on purpose is no dead one */
	for (end = tu_now_ms() + 3 * tnbc_env.tcp_timeout_ms;
	     tu_now_ms() < end;) {
		ck_assert_int_eq(fi_cq_read(f.cq, NULL, 0), -FI_EAGAIN);
		(void)fi_cq_read(r.cq, NULL, 0);
		tu_sleep_ms(10);
	}

	/* A is not held back by F's flood */
	tu_fill(abuf, len, 77);
	ck_assert_int_eq(fi_tsend(a.ep, abuf, len, NULL, r_at_a, 1, &ctx[1]),
			 0);
	tu_flood_expect(&r, &ctx[0], NULL, "R's receive of A's message");
	ck_assert_uint_eq(tu_check(rbuf, len, 77, 0), (size_t)-1);
	tu_flood_expect(&a, &ctx[1], NULL, "A's send to R");
	tu_engine_stats(r.dom, &st);
	ck_assert_uint_ge(st.senders_held, 1);
	if (moved)
		ck_assert_uint_gt(st.spilled_pkts, 0);

	/* F, held back, still answers: R's rendezvous send to it ends */
	tu_fill(sbig, big, 88);
	ck_assert_int_eq(fi_tsend(r.ep, sbig, big, NULL, f_at_r, 2, &ctx[2]),
			 0);
	ck_assert_int_eq(
		fi_trecv(f.ep, rbuf, big, NULL, FI_ADDR_UNSPEC, 2, 0, &ctx[3]),
		0);
	tu_flood_expect(&f, &ctx[3], &fl, "F's receive of R's rendezvous");
	ck_assert_uint_eq(tu_check(rbuf, big, 88, 0), (size_t)-1);
	tu_flood_expect(&r, &ctx[2], &fl, "R's rendezvous send to F");

	tu_flood_drain(&fl, r.ep, r.cq);
	tu_kside_close(&a);
	tu_kside_close(&f);
	tu_kside_close(&r);
	tu_xport_only_end(&o);
	tnbc_env.unexp_max = saved;
	tnbc_env.tcp_timeout_ms = saved_timeout;
	tu_flood_free(&fl);
	free(rbuf);
	free(sbig);
}
