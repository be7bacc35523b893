/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The TCP transport against hostile input: a raw socket connects to an
 * endpoint's listening address (read from fi_av_straddr, as any client
 * could) and sends garbage, an oversized length, a hello for somebody
 * else, or half a header and then nothing.  Each costs at most that
 * connection: the endpoint goes on exchanging messages over TCP with a
 * real peer meanwhile, and what was malformed is counted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tnbc_unit.h"

enum { R = 0, A = 1 };

/* A raw connection to endpoint e's TCP address. */
static int raw_connect(struct tu_world *w, int e)
{
	char buf[256], ip[64];
	size_t len = sizeof(buf);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	unsigned port;
	const char *t;
	int fd;

	ck_assert_ptr_nonnull(fi_av_straddr(w->av, &w->ep[e].addr, buf, &len));
	t = strstr(buf, "tcp=");
	ck_assert_msg(t != NULL, "no tcp address in %s", buf);
	ck_assert_int_eq(sscanf(t, "tcp=%63[0-9.]:%u", ip, &port), 2);
	ck_assert_int_eq(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	sa.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Whether R closed the raw connection within the bound, R's CQ polled
 * meanwhile (which reads its sockets). */
static bool closed_by_peer(struct tu_world *w, int fd)
{
	for (unsigned ms = 0; ms < TU_WAIT_MS; ms++) {
		struct fi_cq_tagged_entry e;
		char c;
		ssize_t n;

		(void)fi_cq_read(w->ep[R].rx_cq, &e, 1);
		n = recv(fd, &c, 1, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return true;
		tu_sleep_ms(1);
	}
	return false;
}

/* _i: 0 garbage, 1 an oversized length, 2 a hello for another endpoint,
 * 3 a packet before any hello, 4 a lookup of another version */
START_TEST(tcp_bad_stream)
{
	struct fi_tnbc_engine_stats st0, st;
	struct tu_xport_only o;
	struct tu_world w;
	uint8_t junk[256];
	uint32_t hdr[2];
	int fd;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_world_open(&w, 2, NULL);
	tu_still_works(&w, R, A, 1);
	tu_engine_stats(w.d.domain, &st0);
	fd = raw_connect(&w, R);
	switch (_i) {
	case 0:
		/* a record of a type nobody knows, then noise */
		tu_fill(junk, sizeof(junk), 99);
		hdr[0] = 200;
		hdr[1] = 0x7777;
		memcpy(junk, hdr, sizeof(hdr));
		ck_assert_int_eq(send(fd, junk, sizeof(junk), 0),
				 (ssize_t)sizeof(junk));
		break;
	case 1:
		hdr[0] = 1u << 30; /* a gigabyte is coming */
		hdr[1] = 3; /* a packet */
		ck_assert_int_eq(send(fd, hdr, sizeof(hdr), 0),
				 (ssize_t)sizeof(hdr));
		break;
	case 2:
		/* a hello (magic, version 2, no key) naming endpoint A, sent
		 * to R */
		memset(junk, 0, sizeof(junk));
		hdr[0] = 4 + 2 + 2 + sizeof(struct tnbc_name) +
			 TNBC_AUTH_KEY_MAX;
		hdr[1] = 1;
		memcpy(junk, hdr, sizeof(hdr));
		junk[8] = 'T';
		junk[9] = 'N';
		junk[10] = 'B';
		junk[11] = 'T';
		junk[12] = 2;
		memcpy(junk + 16, &w.ep[A].name, sizeof(struct tnbc_name));
		ck_assert_int_eq(send(fd, junk, 8 + hdr[0], 0),
				 (ssize_t)(8 + hdr[0]));
		break;
	case 3:
		hdr[0] = 16;
		hdr[1] = 3;
		memcpy(junk, hdr, sizeof(hdr));
		memset(junk + 8, 0, 16);
		ck_assert_int_eq(send(fd, junk, 24, 0), 24);
		break;
	case 4:
		/* a lookup ("who are you", type 4: magic, version, no key)
		 * in another version of the stream */
		memset(junk, 0, sizeof(junk));
		hdr[0] = 4 + 2 + 2 + TNBC_AUTH_KEY_MAX;
		hdr[1] = 4;
		memcpy(junk, hdr, sizeof(hdr));
		memcpy(junk + 8, "TNBT", 4);
		junk[12] = 2;
		ck_assert_int_eq(send(fd, junk, 8 + hdr[0], 0),
				 (ssize_t)(8 + hdr[0]));
		break;
	}
	ck_assert_msg(closed_by_peer(&w, fd),
		      "case %d: the bad connection stayed open", _i);
	tu_engine_stats(w.d.domain, &st);
	ck_assert_uint_gt(st.bad_pkts + st.refused_peers,
			  st0.bad_pkts + st0.refused_peers);
	tu_still_works(&w, R, A, 2);
	close(fd);
	tu_world_close(&w);
	tu_xport_only_end(&o);
}
END_TEST

/* Where the domain has no shm, the engine sleeps on an eventfd of its
 * own: a message that arrives while it sleeps without a bound and the
 * application does not call in is announced by the connection thread's
 * kick, and the engine delivers it.  The receive buffer is watched
 * directly: nothing here calls into tnbc.  _i 1: the application polls
 * once just before the message comes, and then no more (a kick held
 * back because an application had just polled would leave the message
 * to a poll that never comes). */
START_TEST(tcp_engine_sleep_kick)
{
	struct tu_xport_only o;
	struct tu_world w;
	struct tnbc_engine *e;
	struct fi_cq_tagged_entry ce;
	volatile char *in;
	char buf[64], out[64] = "woken by the socket";
	uint64_t kicks, wakeups, end;
	struct tnbc_ep *rep;
	bool arrived, unlooked;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_world_open(&w, 2, NULL);
	e = &tu_tnbc_domain(&w.d)->engine;
	ck_assert_int_ge(e->kick_fd, 0);
	tu_still_works(&w, R, A, 1); /* the connection is up */
	memset(buf, 0, sizeof(buf));
	in = buf;
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, buf, sizeof(buf), NULL,
				  FI_ADDR_UNSPEC, 7, 0, buf),
			 0);
	/* the engine asleep without a bound (after a second with nothing
	 * to do), so that only the socket can wake it */
	tu_engine_until_asleep(e);
	kicks = atomic_load(&e->kicks);
	wakeups = atomic_load(&e->wakeups);
	if (_i)
		ck_assert_int_eq(fi_cq_read(w.ep[R].rx_cq, &ce, 1), -FI_EAGAIN);
	ck_assert_int_eq(
		fi_tsend(w.ep[A].ep, out, sizeof(out), NULL, w.addr[R], 7, out),
		0);
	TU_WATCH_BEGIN();
	for (end = tu_now_ms() + TU_WAIT_MS; !in[0] && tu_now_ms() < end;)
		tu_sleep_ms(1);
	arrived = in[0] != 0;
	TU_WATCH_END();
	ck_assert_msg(arrived, "the engine never took the message");
	ck_assert_uint_gt(atomic_load(&e->wakeups), wakeups);
	ck_assert_uint_gt(atomic_load(&e->kicks), kicks);
	tu_cq_expect(w.ep[R].rx_cq, &ce, NULL);
	ck_assert_str_eq(buf, out);
	tu_cq_expect(w.ep[A].tx_cq, &ce, NULL);
	/* The engine looked past the point marked when the receive was
	 * posted: nothing from before it waits, so a post does not ask the
	 * sockets again (once wrongly true for good, which made every post
	 * ask them TNBC_RX_POLL_BUDGET times: half a ping-pong's time). */
	rep = TNBC_EP(w.ep[R].ep);
	pthread_mutex_lock(&rep->lock);
	unlooked = tnbc_ep_xunlooked(rep);
	pthread_mutex_unlock(&rep->lock);
	ck_assert_msg(!unlooked, "taken packets still count as unlooked");
	tu_world_close(&w);
	tu_xport_only_end(&o);
}
END_TEST

/* The port k's endpoint listens on for TCP, from its address's text. */
static unsigned tcp_port(struct tu_kside *k)
{
	char buf[256];
	size_t len = sizeof(buf);
	unsigned port = 0;
	const char *t;

	ck_assert_ptr_nonnull(fi_av_straddr(k->av, k->addr, buf, &len));
	t = strstr(buf, "tcp=");
	ck_assert_msg(t != NULL, "no tcp address in %s", buf);
	t = strrchr(t, ':');
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(sscanf(t + 1, "%u", &port), 1);
	return port;
}

/* Established connections to k's endpoint's listening port, as the
 * kernel lists them (the connecting ends: the far port is k's). */
static int tcp_conns_to(struct tu_kside *k)
{
	unsigned port = tcp_port(k), rport, st;
	FILE *f = fopen("/proc/net/tcp", "r");
	char line[512];
	int n = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " %*d: %*x:%*x %*x:%x %x", &rport, &st) == 2 &&
		    rport == port && st == 1 /* TCP_ESTABLISHED */)
			n++;
	fclose(f);
	return n;
}

/* Two domains of one endpoint each: the answers travel on the
 * connection the first message opened (its hello named the endpoint
 * that reads them), and no second connection is made. */
START_TEST(tcp_two_way)
{
	struct tu_xport_only o;
	struct tu_kside a, b;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_kside_open(&a, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&b, NULL, FI_FORMAT_UNSPEC);
	ck_assert_int_eq(tu_kside_send(&a, &b, 1), 0);
	ck_assert_int_eq(tu_kside_send(&b, &a, 2), 0);
	for (uint64_t t = 3; t < 40; t++)
		ck_assert_int_eq(
			tu_kside_send(t % 2 ? &a : &b, t % 2 ? &b : &a, t), 0);
	ck_assert_int_eq(tcp_conns_to(&b), 1);
	ck_assert_int_eq(tcp_conns_to(&a), 0);
	tu_kside_close(&b);
	tu_kside_close(&a);
	tu_xport_only_end(&o);
}
END_TEST

/* a and b each send the other a message before either has polled, as
 * two ranks do in their first exchange (b's first when b_first), and
 * poll until both are in. */
static void exchange_at_once(struct tu_kside *a, struct tu_kside *b,
			     bool b_first)
{
	struct tu_kside *side[2] = {a, b};
	char s[2][16] = {"from a", "from b"}, r[2][16];
	fi_addr_t to[2];
	bool sent[2] = {false, false}, got[2] = {false, false};
	uint64_t end = tu_now_ms() + TU_WAIT_MS;

	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(fi_av_insert(side[i]->av, side[!i]->addr, 1,
					      &to[i], 0, NULL),
				 1);
		ck_assert_int_eq(fi_trecv(side[i]->ep, r[i], sizeof(r[i]), NULL,
					  FI_ADDR_UNSPEC, 7, 0, r[i]),
				 0);
	}
	/* back to back, before anything else: neither has seen the other's
	 * connection yet.  Then no sleeping: the later-named side waits for
	 * the other's connection only so long (TNBC_TCP_DIAL_WAIT_NS). */
	while (!(sent[0] && sent[1]) && tu_now_ms() < end)
		for (int k = 0; k < 2; k++) {
			int i = b_first ? !k : k;
			ssize_t ret = sent[i] ? 0
					      : fi_tsend(side[i]->ep, s[i],
							 sizeof(s[i]), NULL,
							 to[i], 7, s[i]);

			ck_assert_msg(!ret || ret == -FI_EAGAIN, "send: %zd",
				      ret);
			sent[i] = !ret;
		}
	while (!(got[0] && got[1]) && tu_now_ms() < end)
		for (int i = 0; i < 2; i++) {
			struct fi_cq_tagged_entry e;

			while (fi_cq_read(side[i]->cq, &e, 1) == 1)
				if (e.op_context == r[i])
					got[i] = true;
		}
	ck_assert_msg(got[0] && got[1], "the exchange did not end");
	ck_assert_str_eq(r[0], "from b");
	ck_assert_str_eq(r[1], "from a");
}

/* Both send first, at once: one dials and the other adopts its
 * connection, rather than each opening one that then carries packets
 * one way only (a bare acknowledgement per packet).  The later-named
 * side waits for the other's connection for a bounded time, and a
 * thread that stalls longer than that makes two, legitimately: so up to
 * three pairs are tried.  Without the wait every try makes two.  The
 * endpoint opened first (a) orders first and dials: _i 0 has it send
 * first, _i 1 the one that waits. */
START_TEST(tcp_two_way_at_once)
{
	struct tu_xport_only o;
	int conns = 0;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	for (int tries = 0; tries < 3 && conns != 1; tries++) {
		struct tu_kside a, b;

		tu_kside_open(&a, NULL, FI_FORMAT_UNSPEC);
		tu_kside_open(&b, NULL, FI_FORMAT_UNSPEC);
		exchange_at_once(&a, &b, _i);
		conns = tcp_conns_to(&a) + tcp_conns_to(&b);
		ck_assert_msg(conns == 1 || conns == 2, "%d connections",
			      conns);
		/* and the pair goes on talking both ways */
		for (uint64_t t = 3; t < 20; t++)
			ck_assert_int_eq(tu_kside_send(t % 2 ? &a : &b,
						       t % 2 ? &b : &a, t),
					 0);
		ck_assert_int_eq(tcp_conns_to(&a) + tcp_conns_to(&b), conns);
		tu_kside_close(&b);
		tu_kside_close(&a);
	}
	ck_assert_int_eq(conns, 1);
	tu_xport_only_end(&o);
}
END_TEST

/* A wait for a peer to dial whose endpoint closes before it ends (the
 * send it held goes with it) ends by itself: the domain's transport is
 * idle again within the wait's bound, and its engine sleeps.  A count of
 * the waits in progress, which such a close left raised, once kept the
 * engine polling for good. */
START_TEST(tcp_dial_wait_closed)
{
	struct tu_xport_only o;
	struct tu_kside a, b;
	struct tnbc_engine *e;
	struct fid_ep *ep2;
	char s[16] = "never sent";
	fi_addr_t to;
	uint64_t sleeps, end;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_kside_open(&a, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&b, NULL, FI_FORMAT_UNSPEC);
	/* b, opened later, names later: its first send waits for a, which
	 * never sends */
	ck_assert_int_eq(fi_av_insert(b.av, a.addr, 1, &to, 0, NULL), 1);
	ck_assert_int_eq(fi_tsend(b.ep, s, sizeof(s), NULL, to, 7, s), 0);
	ck_assert_int_eq(fi_close(&b.ep->fid), 0);
	b.ep = NULL;
	/* an endpoint for the engine to look at */
	ck_assert_int_eq(fi_endpoint(b.dom, b.info, &ep2, NULL), 0);
	ck_assert_int_eq(fi_ep_bind(ep2, &b.av->fid, 0), 0);
	ck_assert_int_eq(fi_ep_bind(ep2, &b.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	ck_assert_int_eq(fi_enable(ep2), 0);
	e = &tnbc_container_of(b.dom, struct tnbc_domain, domain_fid)->engine;
	/* past the wait's bound, and past the naps the engine takes while
	 * the calls above count as an application's polls (16 windows) */
	tu_sleep_ms(100);
	sleeps = atomic_load(&e->sleeps);
	for (end = tu_now_ms() + TU_WAIT_MS;
	     atomic_load(&e->sleeps) == sleeps && tu_now_ms() < end;)
		tu_sleep_ms(1);
	ck_assert_msg(atomic_load(&e->sleeps) != sleeps,
		      "the engine never slept again");
	ck_assert_int_eq(fi_close(&ep2->fid), 0);
	tu_kside_close(&b);
	tu_kside_close(&a);
	tu_xport_only_end(&o);
}
END_TEST

/* The later-named endpoint's first send waits for its peer to dial a
 * connection it can adopt, for at most TNBC_TCP_DIAL_WAIT_NS (10 ms).
 * A peer whose domain has several endpoints dials one way, and its
 * introduction ends that wait at once, or, when it came first, keeps
 * it from starting.  One try: answer false, b sends to a (and waits),
 * then a sends to b; answer true, b has a's message before it sends.
 * Returns the nanoseconds from b's send to its completion, which
 * without the early end are at least the wait's. */
static uint64_t one_way_try(bool answer)
{
	struct tu_kside a, b;
	struct fi_cq_tagged_entry e;
	struct fid_ep *a2;
	char from_a[16] = "from a", from_b[16] = "from b", in[16] = "";
	fi_addr_t a_to_b, b_to_a;
	bool sent, got = false, done = false;
	uint64_t t0, end;
	ssize_t ret;

	tu_kside_open(&a, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&b, NULL, FI_FORMAT_UNSPEC);
	/* a second endpoint in a's domain: a's connections go one way */
	ck_assert_int_eq(fi_endpoint(a.dom, a.info, &a2, NULL), 0);
	ck_assert_int_eq(fi_ep_bind(a2, &a.av->fid, 0), 0);
	ck_assert_int_eq(fi_ep_bind(a2, &a.cq->fid, FI_TRANSMIT | FI_RECV), 0);
	ck_assert_int_eq(fi_enable(a2), 0);
	ck_assert_int_eq(fi_av_insert(a.av, b.addr, 1, &a_to_b, 0, NULL), 1);
	ck_assert_int_eq(fi_av_insert(b.av, a.addr, 1, &b_to_a, 0, NULL), 1);
	ck_assert_int_eq(
		fi_trecv(b.ep, in, sizeof(in), NULL, FI_ADDR_UNSPEC, 7, 0, in),
		0);
	if (answer) {
		ck_assert_int_eq(fi_tsend(a.ep, from_a, sizeof(from_a), NULL,
					  a_to_b, 7, from_a),
				 0);
		for (end = tu_now_ms() + TU_WAIT_MS;
		     !got && tu_now_ms() < end;) {
			(void)fi_cq_read(a.cq, &e, 1);
			while (fi_cq_read(b.cq, &e, 1) == 1)
				got |= e.op_context == in;
		}
		ck_assert_msg(got, "a's message never came");
	}
	/* b names later: its send waits for a to dial */
	t0 = tnbc_now_ns();
	ret = fi_tsend(b.ep, from_b, sizeof(from_b), NULL, b_to_a, 9, from_b);
	ck_assert_msg(!ret || ret == -FI_EAGAIN, "send: %zd", ret);
	sent = !ret;
	if (!answer)
		ck_assert_int_eq(fi_tsend(a.ep, from_a, sizeof(from_a), NULL,
					  a_to_b, 7, from_a),
				 0);
	for (end = tu_now_ms() + TU_WAIT_MS; !done && tu_now_ms() < end;) {
		if (!sent) {
			ret = fi_tsend(b.ep, from_b, sizeof(from_b), NULL,
				       b_to_a, 9, from_b);
			ck_assert_msg(!ret || ret == -FI_EAGAIN, "send: %zd",
				      ret);
			sent = !ret;
		}
		(void)fi_cq_read(a.cq, &e, 1);
		while (fi_cq_read(b.cq, &e, 1) == 1) {
			got |= e.op_context == in;
			done |= e.op_context == from_b;
		}
	}
	ck_assert_msg(done, "b's send never went");
	t0 = tnbc_now_ns() - t0;
	for (end = tu_now_ms() + TU_WAIT_MS; !got && tu_now_ms() < end;)
		while (fi_cq_read(b.cq, &e, 1) == 1)
			got |= e.op_context == in;
	ck_assert_msg(got, "a's message never came");
	ck_assert_str_eq(in, "from a");
	ck_assert_int_eq(fi_close(&a2->fid), 0);
	tu_kside_close(&b);
	tu_kside_close(&a);
	return t0;
}

/* Up to three tries: a thread stalled past the wait's bound makes a try
 * take as long as the wait itself, legitimately.  _i: answer. */
START_TEST(tcp_dial_wait_one_way)
{
	struct tu_xport_only o;
	uint64_t took[3];
	int i;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	for (i = 0; i < 3; i++) {
		took[i] = one_way_try(_i);
		if (took[i] < 10000000u)
			break;
	}
	tu_xport_only_end(&o);
	ck_assert_msg(i < 3,
		      "b's send waited out the bound each time: %" PRIu64
		      ", %" PRIu64 ", %" PRIu64 " ns",
		      took[0], took[1], took[2]);
}
END_TEST

/* An endpoint of a fixed service port closes while its domain stays
 * open: its port refuses connections at once, and an endpoint opened
 * right after takes the same port, although the closed one's
 * listening descriptor is kept until its domain's connection thread
 * has passed every event that could name it (which keeps that thread
 * from accepting on a number another socket reused). */
START_TEST(tcp_close_frees_port)
{
	struct tu_xport_only o;
	struct fi_info *h = fi_allocinfo();
	struct tu_world_opts opts = {.hints = h};
	struct tu_world w1, w2, cli;
	struct tnbc_addr svc;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	char port[16], buf[256], ip[64];
	size_t len = sizeof(buf);
	unsigned p;
	const char *t;
	int fd;

	ck_assert_ptr_nonnull(h);
	h->caps = FI_TAGGED;
	snprintf(port, sizeof(port), "%u", tu_tcp_free_port());
	tu_prov_init();
	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	ck_assert_int_eq(tnbc_addr_svc(NULL, port, true, &svc), 0);
	h->src_addr = malloc(sizeof(svc));
	ck_assert_ptr_nonnull(h->src_addr);
	memcpy(h->src_addr, &svc, sizeof(svc));
	h->src_addrlen = sizeof(svc);
	tu_world_open(&w1, 1, &opts);
	ck_assert_ptr_nonnull(fi_av_straddr(w1.av, &w1.ep[0].addr, buf, &len));
	t = strstr(buf, "tcp=");
	ck_assert_msg(t != NULL, "no tcp address in %s", buf);
	ck_assert_int_eq(sscanf(t, "tcp=%63[0-9.]:%u", ip, &p), 2);
	ck_assert_uint_eq(p, (unsigned)atoi(port));
	ck_assert_int_eq(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	sa.sin_port = htons((uint16_t)p);
	ck_assert_int_eq(fi_close(&w1.ep[0].ep->fid), 0);
	w1.ep[0].ep = NULL;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), -1);
	ck_assert_int_eq(errno, ECONNREFUSED);
	close(fd);
	/* the same port, w1's domain still open */
	tu_world_open(&w2, 1, &opts);
	tu_world_open(&cli, 1, NULL);
	ck_assert_int_eq(
		fi_av_insertsvc(cli.av, NULL, port, &cli.addr[0], 0, NULL), 1);
	ck_assert_int_eq(
		fi_av_insert(w2.av, &cli.ep[0].addr, 1, &w2.addr[0], 0, NULL),
		1);
	/* w2's endpoint answers at the port: a message each way */
	for (int dir = 0; dir < 2; dir++) {
		struct tu_world *from = dir ? &w2 : &cli,
				*to = dir ? &cli : &w2;
		char in[16] = "", out[16] = "through the port";
		struct fi_cq_tagged_entry e;

		ck_assert_int_eq(fi_trecv(to->ep[0].ep, in, sizeof(in), NULL,
					  FI_ADDR_UNSPEC, 3, 0, in),
				 0);
		ck_assert_int_eq(fi_tsend(from->ep[0].ep, out, sizeof(out),
					  NULL, from->addr[0], 3, out),
				 0);
		tu_cq_expect(from->ep[0].tx_cq, &e, NULL);
		tu_cq_expect(to->ep[0].rx_cq, &e, NULL);
		ck_assert_mem_eq(in, out, sizeof(in));
	}
	tu_world_close(&cli);
	tu_world_close(&w2);
	tu_world_close(&w1);
	fi_freeinfo(h);
	tu_xport_only_end(&o);
}
END_TEST

/* A two-way connection's endpoint closes (_i 0: the one that opened
 * it, 1: the one that answered on it): the other's sends to it fail
 * instead of waiting, within the bound. */
START_TEST(tcp_two_way_close)
{
	struct tu_xport_only o;
	struct tu_kside a, b, *gone, *left;
	fi_addr_t to;
	int ret;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_kside_open(&a, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&b, NULL, FI_FORMAT_UNSPEC);
	ck_assert_int_eq(tu_kside_send(&a, &b, 1), 0);
	ck_assert_int_eq(tu_kside_send(&b, &a, 2), 0);
	ck_assert_int_eq(tcp_conns_to(&a), 0);
	gone = _i ? &b : &a;
	left = _i ? &a : &b;
	ck_assert_int_eq(fi_av_insert(left->av, gone->addr, 1, &to, 0, NULL),
			 1);
	ck_assert_int_eq(fi_close(&gone->ep->fid), 0);
	gone->ep = NULL;
	ret = tu_send_until_refused(left->ep, left->cq, to, 9);
	ck_assert_msg(ret == -FI_EHOSTUNREACH, "send to a closed peer: %d",
		      ret);
	tu_kside_close(&b);
	tu_kside_close(&a);
	tu_xport_only_end(&o);
}
END_TEST

/* Half a header, then nothing: the connection waits, and costs nobody
 * else anything; closing it costs nothing either. */
START_TEST(tcp_half_header_stall)
{
	struct tu_xport_only o;
	struct tu_world w;
	uint8_t half[4] = {8, 0, 0, 0};
	int fd;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_world_open(&w, 2, NULL);
	fd = raw_connect(&w, R);
	ck_assert_int_eq(send(fd, half, sizeof(half), 0),
			 (ssize_t)sizeof(half));
	for (uint64_t k = 0; k < 20; k++)
		tu_still_works(&w, R, A, 10 + k);
	close(fd);
	tu_still_works(&w, R, A, 40);
	tu_world_close(&w);
	tu_xport_only_end(&o);
}
END_TEST

/* k sends len bytes to r (a receive posted first) and r checks them;
 * raddr is r's address as k's AV takes it. */
static void kside_big(struct tu_kside *k, struct tu_kside *r, const void *raddr,
		      size_t len, uint64_t tag)
{
	uint8_t *s = malloc(len), *buf = calloc(1, len);
	struct fi_cq_tagged_entry e;
	fi_addr_t to;

	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(buf);
	tu_fill(s, len, (uint32_t)tag);
	ck_assert_int_eq(fi_av_insert(k->av, raddr, 1, &to, 0, NULL), 1);
	ck_assert_int_eq(
		fi_trecv(r->ep, buf, len, NULL, FI_ADDR_UNSPEC, tag, 0, buf),
		0);
	ck_assert_int_eq(fi_tsend(k->ep, s, len, NULL, to, tag, s), 0);
	/* the sender's completion needs the receiver's progress: read both */
	/* bounded by the clock: a spin count ran out in tens of ms when a
	 * loaded host delayed the 4 MiB transfer */
	for (uint64_t t0 = tu_now_ms(), got = 0; got < 2;) {
		ck_assert_msg(tu_now_ms() - t0 < TU_WAIT_MS,
			      "%zu B did not arrive", len);
		if (fi_cq_read(r->cq, &e, 1) == 1) {
			ck_assert_ptr_eq(e.op_context, buf);
			got++;
		}
		if (fi_cq_read(k->cq, &e, 1) == 1) {
			ck_assert_ptr_eq(e.op_context, s);
			got++;
		}
	}
	ck_assert_uint_eq(tu_check(buf, len, (uint32_t)tag, 0), (size_t)-1);
	free(buf);
	free(s);
}

/* CPU time the engine thread of k's domain has used, in ms. */
static uint64_t engine_cpu_ms(struct tu_kside *k)
{
	struct tnbc_engine *e =
		&tnbc_container_of(k->dom, struct tnbc_domain, domain_fid)
			 ->engine;
	struct timespec ts;
	clockid_t clk;
	uint64_t end;

	for (end = tu_now_ms() + TU_WAIT_MS;
	     !atomic_load(&e->self) && tu_now_ms() < end;)
		tu_sleep_ms(1);
	ck_assert_int_eq(
		pthread_getcpuclockid((pthread_t)atomic_load(&e->self), &clk),
		0);
	ck_assert_int_eq(clock_gettime(clk, &ts), 0);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The receiving side of tcp_stream_engine_quiet, in a thread of its own
 * as in a process of its own: posts its receives, then polls. */
struct stream_rx {
	struct tu_kside *r;
	uint8_t *buf;
	int msgs, rounds;
	size_t len;
	atomic_int round; /* the round whose receives are posted */
};

static void *stream_rx_main(void *arg)
{
	struct stream_rx *x = arg;
	struct fi_cq_tagged_entry e;
	uint64_t end = tu_now_ms() + 10u * TU_WAIT_MS;

	for (int round = 0; round < x->rounds; round++) {
		int got = 0;

		for (int i = 0; i < x->msgs; i++)
			ck_assert_int_eq(fi_trecv(x->r->ep,
						  x->buf + (size_t)i * x->len,
						  x->len, NULL, FI_ADDR_UNSPEC,
						  2, 0, NULL),
					 0);
		atomic_store(&x->round, round + 1);
		while (got < x->msgs && tu_now_ms() < end)
			got += fi_cq_read(x->r->cq, &e, 1) == 1;
		if (got < x->msgs)
			return "the stream did not end";
	}
	return NULL;
}

/* An application thread that streams large messages spends long in one
 * progress call (a megabyte read from a socket, or written to one), and
 * is polling all the while: the engines stay out of its way.  Here each
 * side's thread polls its own domain, one endpoint each, as two ranks
 * do.  The engines had taken such a call for an application gone, and
 * tried the endpoint again and again while its lock was held; bound to
 * the application's core, as mpirun binds ranks, that halved 1 MiB
 * bandwidth between namespaces.  (Whether each message's answer wakes
 * the engine was counted here too, and hung on the scheduler: with two
 * CPUs and four threads, a round could find the engine asleep and kick
 * it per message.  proto_nudge_spares_nap decides it.) */
START_TEST(tcp_stream_engine_quiet)
{
	enum { MSGS = 32, LEN = 1 << 20, ROUNDS = 24 };
	struct tu_xport_only o;
	struct tu_kside r, k;
	struct fi_cq_tagged_entry e;
	struct stream_rx x = {.msgs = MSGS, .rounds = ROUNDS, .len = LEN};
	uint8_t *s = malloc(LEN);
	uint64_t t0, wall, cpu0, cpu;
	pthread_t th;
	void *why;
	fi_addr_t to;

	x.buf = malloc((size_t)MSGS * LEN);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(x.buf);
	tu_fill(s, LEN, 5);
	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_kside_open(&r, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&k, NULL, FI_FORMAT_UNSPEC);
	x.r = &r;
	ck_assert_int_eq(fi_av_insert(k.av, r.addr, 1, &to, 0, NULL), 1);
	kside_big(&k, &r, r.addr, LEN, 1); /* connected, warm */
	/* A thread the scheduler leaves off its core for a while is a
	 * thread the engine rightly takes for stuck: a 2-core host running
	 * other jobs did that once in a sanitizer build (238 ms of engine
	 * CPU in 420).  So the measure gets three tries and must hold in
	 * one; an engine that does not stay out of the way fails all. */
	for (int attempt = 0; attempt < 3; attempt++) {
		atomic_store(&x.round, 0);
		cpu0 = engine_cpu_ms(&r) + engine_cpu_ms(&k);
		t0 = tu_now_ms();
		ck_assert_int_eq(pthread_create(&th, NULL, stream_rx_main, &x),
				 0);
		for (int round = 0; round < ROUNDS; round++) {
			int done = 0;

			while (atomic_load(&x.round) <= round &&
			       tu_now_ms() - t0 < 10u * TU_WAIT_MS)
				;
			for (int i = 0; i < MSGS; i++)
				ck_assert_int_eq(fi_tsend(k.ep, s, LEN, NULL,
							  to, 2, NULL),
						 0);
			while (done < MSGS &&
			       tu_now_ms() - t0 < 10u * TU_WAIT_MS)
				done += fi_cq_read(k.cq, &e, 1) == 1;
			ck_assert_msg(done == MSGS, "the sends did not end");
		}
		ck_assert_int_eq(pthread_join(th, &why), 0);
		ck_assert_msg(!why, "%s", (const char *)why);
		wall = tu_now_ms() - t0;
		cpu = engine_cpu_ms(&r) + engine_cpu_ms(&k) - cpu0;
		ck_assert_uint_eq(
			tu_check(x.buf + (size_t)(MSGS - 1) * LEN, LEN, 5, 0),
			(size_t)-1);
		if (cpu * 6 < wall)
			break;
	}
	/* ThreadSanitizer makes a megabyte's read outlast 16 windows: the
	 * engine then rightly takes the application for stuck */
#if !defined(__SANITIZE_THREAD__)
	ck_assert_msg(cpu * 6 < wall,
		      "the engines used %" PRIu64 " ms of CPU in %" PRIu64
		      " ms of streaming, three times",
		      cpu, wall);
#else
	(void)cpu;
	(void)wall;
#endif
	tu_kside_close(&k);
	tu_kside_close(&r);
	tu_xport_only_end(&o);
	free(x.buf);
	free(s);
}
END_TEST

/* An endpoint with shm and a single TCP connection keeps shm's eager
 * messages in their queue while no receive is posted for them, as one
 * with shm alone does (test_match.c, match_burst_single_copy): each
 * receive posted next takes its message from there, one copy.  A TCP
 * endpoint with one connection that said it was never quiet made the
 * whole endpoint so, and every poll then copied the queue's messages
 * into unexpected buffers. */
START_TEST(tcp_lone_keeps_shm_queue)
{
	enum { T = 2, BURST = 4 };
	const size_t len = 4000;
	const struct tnbc_xport_ops *old_list[TNBC_XPORTS_MAX];
	const struct tnbc_xport_ops *old_first = tnbc_env.xport;
	unsigned old_n = tnbc_env.nxport;
	int old_engine = tnbc_env.engine;
	uint8_t *sbuf = malloc(len), *rbuf = calloc(BURST, len);
	uint8_t small[64] = {0}, in[64];
	struct fi_cq_tagged_entry e;
	struct tnbc_addr via_tcp;
	struct tnbc_ep *rep;
	struct tu_world w;
	fi_addr_t to;

	ck_assert_ptr_nonnull(sbuf);
	ck_assert_ptr_nonnull(rbuf);
	memcpy(old_list, tnbc_env.xport_list, sizeof(old_list));
	tnbc_env.xport_list[0] = &tnbc_shm_ops;
	tnbc_env.xport_list[1] = &tnbc_tcp_ops;
	tnbc_env.nxport = 2;
	tnbc_env.xport = &tnbc_shm_ops;
	tnbc_env.engine = 0; /* nobody takes the queue but these calls */
	tu_world_open(&w, 3, NULL);
	rep = TNBC_EP(w.ep[R].ep);
	/* T reaches R over TCP: R's one connection */
	via_tcp = w.ep[R].addr;
	via_tcp.name.xports = TNBC_XPORT_BIT(TNBC_XPORT_TCP);
	ck_assert_int_eq(fi_av_insert(w.av, &via_tcp, 1, &to, 0, NULL), 1);
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, in, sizeof(in), NULL,
				  FI_ADDR_UNSPEC, 7, 0, in),
			 0);
	ck_assert_int_eq(
		fi_tsend(w.ep[T].ep, small, sizeof(small), NULL, to, 7, small),
		0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, in);
	tu_cq_expect(w.ep[T].tx_cq, &e, NULL);
	/* a connection's arrival leaves the endpoint something to look at
	 * (its bytes may have come before it was watched): R's next poll
	 * looks, and R is quiet from then on */
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(fi_cq_read(w.ep[R].rx_cq, &e, 1), -FI_EAGAIN);
	/* the first receive waits before the burst, as in MPI_Recv */
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, rbuf, len, NULL, FI_ADDR_UNSPEC,
				  50, 0, rbuf),
			 0);
	for (int k = 0; k < BURST; k++) {
		tu_fill(sbuf, len, 30 + (uint32_t)k);
		ck_assert_int_eq(fi_tsend(w.ep[A].ep, sbuf, len, NULL,
					  w.addr[R], 50 + (uint64_t)k, NULL),
				 0);
	}
	for (int k = 0; k < BURST; k++) {
		uint8_t *b = rbuf + (size_t)k * len;

		if (k)
			ck_assert_int_eq(fi_trecv(w.ep[R].ep, b, len, NULL,
						  FI_ADDR_UNSPEC,
						  50 + (uint64_t)k, 0, b),
					 0);
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, b);
		ck_assert_msg(rep->ux_bytes == 0,
			      "after receive %d, %zu B copied out of the queue",
			      k, (size_t)rep->ux_bytes);
		ck_assert_uint_eq(tu_check(b, len, 30 + (uint32_t)k, 0),
				  (size_t)-1);
	}
	for (int k = 0; k < BURST; k++)
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	tu_world_close(&w);
	memcpy(tnbc_env.xport_list, old_list, sizeof(old_list));
	tnbc_env.nxport = old_n;
	tnbc_env.xport = old_first;
	tnbc_env.engine = old_engine;
	free(sbuf);
	free(rbuf);
}
END_TEST

/* A rendezvous message's data goes from the socket straight into the
 * receive's buffer: all but the part of each packet that came with its
 * frame (the transport reads a packet's head into its own buffer). */
START_TEST(tcp_rndv_placed)
{
	const size_t len = 4u << 20;
	struct fi_tnbc_engine_stats st0, st;
	struct tu_xport_only o;
	struct tu_kside r, k;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_kside_open(&r, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&k, NULL, FI_FORMAT_UNSPEC);
	tu_engine_stats(r.dom, &st0);
	kside_big(&k, &r, r.addr, len, 21);
	tu_engine_stats(r.dom, &st);
	ck_assert_msg(st.placed_bytes - st0.placed_bytes >= len / 2,
		      "%" PRIu64 " of %zu B read into place",
		      st.placed_bytes - st0.placed_bytes, len);
	tu_kside_close(&k);
	tu_kside_close(&r);
	tu_xport_only_end(&o);
}
END_TEST

/* A large packet goes to the socket a segment's worth per write (at
 * most 64 KiB): written whole, a 1 MiB packet left the kernel's
 * acknowledgements waiting while it was copied, and 1 MiB messages
 * between two namespaces moved half the bytes per second. */
START_TEST(tcp_large_writes_split)
{
	const size_t len = 4u << 20;
	struct fi_tnbc_engine_stats st0, st;
	struct tu_xport_only o;
	struct tu_kside r, k;
	uint64_t writes;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_kside_open(&r, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&k, NULL, FI_FORMAT_UNSPEC);
	tu_engine_stats(k.dom, &st0);
	kside_big(&k, &r, r.addr, len, 23);
	tu_engine_stats(k.dom, &st);
	writes = st.stream_writes - st0.stream_writes;
	ck_assert_msg(writes >= len / 65536,
		      "%zu B went out in %" PRIu64 " writes", len, writes);
	/* not a write per few bytes either */
	ck_assert_msg(writes <= len / 16384,
		      "%zu B went out in %" PRIu64 " writes", len, writes);
	ck_assert_uint_eq(st.placed_bytes, st0.placed_bytes);
	tu_kside_close(&k);
	tu_kside_close(&r);
	tu_xport_only_end(&o);
}
END_TEST

static void __attribute__((noinline)) poison_stack(void)
{
	volatile uint8_t junk[16384];

	memset((uint8_t *)junk, 0xa5, sizeof(junk));
}

/* A domain with shm and TCP that moved nothing counts nothing: shm left
 * the stream transports' counts of its stats as the stack had them, and
 * the domain added them up (the stack is filled first, so that a field
 * left so is never zero by chance). */
START_TEST(tcp_stats_start_at_zero)
{
	struct fi_tnbc_engine_stats st;
	struct tu_dom d;

	tu_dom_open(&d, NULL);
	poison_stack();
	tu_engine_stats(d.domain, &st);
	ck_assert_uint_eq(st.placed_bytes, 0);
	ck_assert_uint_eq(st.stream_writes, 0);
	ck_assert_uint_eq(st.slot_pkts, 0);
	tu_dom_close(&d);
}
END_TEST

/* FI_TNBC_TCP_EAGER_SIZE, not FI_TNBC_EAGER_SIZE, splits eager from
 * rendezvous over TCP: a message within it completes at its sender with
 * no receive posted, one past it waits for the receive. */
START_TEST(tcp_eager_size)
{
	const size_t eager = 100000, rndv = 200000;
	const size_t saved = tnbc_env.tcp_eager_size;
	struct fi_cq_tagged_entry e;
	struct tu_xport_only o;
	struct tu_kside r, k;
	uint8_t *s = malloc(rndv), *buf = calloc(1, rndv);
	fi_addr_t to;

	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(buf);
	tnbc_env.tcp_eager_size = 131072;
	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_kside_open(&r, NULL, FI_FORMAT_UNSPEC);
	tu_kside_open(&k, NULL, FI_FORMAT_UNSPEC);
	ck_assert_int_eq(fi_av_insert(k.av, r.addr, 1, &to, 0, NULL), 1);
	for (int i = 0; i < 2; i++) {
		size_t len = i ? rndv : eager;

		tu_fill(s, len, 40 + (uint32_t)i);
		ck_assert_int_eq(fi_tsend(k.ep, s, len, NULL, to, 40 + i, s),
				 0);
		if (!i) {
			tu_cq_expect(k.cq, &e, NULL);
			tu_fill(s, len, 99); /* the buffer is the sender's */
		} else {
			ck_assert(tu_cq_quiet(k.cq, TU_QUIET_MS));
		}
		ck_assert_int_eq(fi_trecv(r.ep, buf, len, NULL, FI_ADDR_UNSPEC,
					  40 + i, 0, buf),
				 0);
		tu_cq_expect(r.cq, &e, NULL);
		ck_assert_uint_eq(e.len, len);
		ck_assert_uint_eq(tu_check(buf, len, 40 + (uint32_t)i, 0),
				  (size_t)-1);
		if (i)
			tu_cq_expect(k.cq, &e, NULL);
	}
	tu_kside_close(&k);
	tu_kside_close(&r);
	tu_xport_only_end(&o);
	tnbc_env.tcp_eager_size = saved;
	free(buf);
	free(s);
}
END_TEST

/* A proxy between a sender and r's endpoint: it passes everything both
 * ways but the last `hold` bytes the sender wrote, which it keeps, and
 * notes when r closed its end. */
struct stall_proxy {
	int lfd;
	atomic_int hold;
	struct sockaddr_in to;
	pthread_t thr;
	atomic_bool stop, r_closed;
};

static void *stall_proxy_main(void *arg)
{
	struct stall_proxy *p = arg;
	size_t cap = 1u << 20, have = 0, sent = 0;
	uint8_t *kb = malloc(cap), tmp[4096];
	int kfd = -1, rfd = -1;

	while (!atomic_load(&p->stop) && kfd < 0) {
		struct pollfd l = {.fd = p->lfd, .events = POLLIN};

		if (poll(&l, 1, 10) > 0)
			kfd = accept(p->lfd, NULL, NULL);
	}
	if (kfd >= 0) {
		rfd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(rfd, (struct sockaddr *)&p->to, sizeof(p->to))) {
			close(rfd);
			rfd = -1;
		}
	}
	while (kb && rfd >= 0 && !atomic_load(&p->stop)) {
		struct pollfd f[2] = {{.fd = kfd, .events = POLLIN},
				      {.fd = rfd, .events = POLLIN}};
		ssize_t n;

		/* what it holds back goes as soon as hold says so */
		if (poll(f, 2, 10) < 0)
			continue;
		if (f[0].revents && have < cap) {
			n = recv(kfd, kb + have, cap - have, 0);
			if (n > 0)
				have += (size_t)n;
		}
		if (have > sent + (size_t)atomic_load(&p->hold)) {
			n = send(rfd, kb + sent,
				 have - (size_t)atomic_load(&p->hold) - sent,
				 MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
		}
		if (f[1].revents) {
			n = recv(rfd, tmp, sizeof(tmp), 0);
			if (n <= 0) {
				atomic_store(&p->r_closed, true);
				break;
			}
			(void)!send(kfd, tmp, (size_t)n, MSG_NOSIGNAL);
		}
	}
	if (kfd >= 0)
		close(kfd);
	if (rfd >= 0)
		close(rfd);
	free(kb);
	return NULL;
}

/* A sender that stops in the middle of a placed payload (here a proxy
 * holds back its last bytes) holds nothing else up: another peer gets
 * through while the connection waits (it used to wait in the reader,
 * the endpoint's consumer, for FI_TNBC_TCP_TIMEOUT_MS).  The receive it
 * was placed into neither completes nor fails meanwhile.  _i 0: the
 * rest never comes, and the connection is closed after
 * FI_TNBC_TCP_TIMEOUT_MS, the receive still posted; 1: it comes, and
 * the receive completes with every byte; 2: the receive is shorter than
 * the message: it completes truncated at once, and the rest, when it
 * comes, is dropped with the connection kept (dropping it used to wait
 * for bytes that had not come, and end the connection); 3: nobody asked
 * for the message and there is no room for it (FI_TNBC_UNEXP_MAX 0):
 * it is read whole as it comes (that read used to wait on the socket),
 * and delivered once a receive asks for it. */
START_TEST(tcp_placed_stall)
{
	const size_t len = 30000; /* eager: placed */
	size_t saved_timeout = tnbc_env.tcp_timeout_ms;
	struct stall_proxy px = {.hold = 64};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct tu_xport_only o;
	struct tu_kside r, k, other;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	char text[256], ip[64], *at, *addr = text;
	uint8_t *s = malloc(len), *buf = calloc(1, len);
	unsigned port;
	fi_addr_t to;
	bool failed = false;
	ssize_t n;

	size_t saved_unexp = tnbc_env.unexp_max, want = _i == 2 ? 10000 : len;

	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(buf);
	tnbc_env.tcp_timeout_ms = 4000;
	if (_i == 3)
		tnbc_env.unexp_max = 0;
	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_kside_open(&r, NULL, FI_ADDR_STR);
	tu_kside_open(&k, NULL, FI_ADDR_STR);
	tu_kside_open(&other, NULL, FI_ADDR_STR);
	/* the proxy listens where k will think r is */
	at = strstr((char *)r.addr, "tcp=");
	ck_assert_msg(at != NULL, "no tcp address in %s", r.addr);
	ck_assert_int_eq(sscanf(at, "tcp=%63[0-9.]:%u", ip, &port), 2);
	px.to.sin_family = AF_INET;
	px.to.sin_port = htons((uint16_t)port);
	ck_assert_int_eq(inet_pton(AF_INET, ip, &px.to.sin_addr), 1);
	sa.sin_addr = px.to.sin_addr;
	px.lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(px.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(px.lfd, 4), 0);
	ck_assert_int_eq(getsockname(px.lfd, (struct sockaddr *)&sa, &sl), 0);
	/* r's text with the proxy's port in place of r's */
	at = strchr(at, ':') + 1;
	snprintf(text, sizeof(text), "%.*s%u%s", (int)(at - (char *)r.addr),
		 (char *)r.addr, (unsigned)ntohs(sa.sin_port),
		 at + strspn(at, "0123456789"));
	ck_assert_int_eq(pthread_create(&px.thr, NULL, stall_proxy_main, &px),
			 0);
	ck_assert_int_eq(fi_av_insert(k.av, &addr, 1, &to, 0, NULL), 1);
	tu_fill(s, len, 31);
	if (_i != 3)
		ck_assert_int_eq(fi_trecv(r.ep, buf, want, NULL, FI_ADDR_UNSPEC,
					  31, 0, buf),
				 0);
	ck_assert_int_eq(fi_tsend(k.ep, s, len, NULL, to, 31, s), 0);
	/* the packet's head and most of its payload came: r has taken it
	 * up (its stall counted in the bytes it placed or parked) */
	for (unsigned ms = 0; ms < 200; ms++) {
		if (_i != 2)
			(void)fi_cq_read(r.cq, &e, 1);
		(void)fi_cq_read(k.cq, &e, 1);
		tu_sleep_ms(1);
	}
	if (_i == 2) {
		/* all it asked for is there: truncated, now */
		tu_cq_expect_err(r.cq, &err);
		ck_assert_ptr_eq(err.op_context, buf);
		ck_assert_int_eq(err.err, FI_ETRUNC);
		ck_assert_uint_eq(tu_check(buf, want, 31, 0), (size_t)-1);
	}
	/* another peer gets through while the stalled connection waits */
	addr = (char *)r.addr;
	kside_big(&other, &r, &addr, 64, 32);
	ck_assert_msg(!atomic_load(&px.r_closed),
		      "another peer waited for the stalled connection");
	ck_assert_int_eq(fi_cq_read(r.cq, &e, 1), -FI_EAGAIN);
	if (_i == 1 || _i == 3) {
		/* the rest comes: the receive has every byte */
		atomic_store(&px.hold, 0);
		if (_i == 3) {
			/* read whole and kept: a receive takes it */
			for (unsigned ms = 0; ms < 200; ms++) {
				(void)fi_cq_read(k.cq, &e, 1);
				tu_sleep_ms(1);
			}
			ck_assert_int_eq(fi_cq_read(r.cq, &e, 1), -FI_EAGAIN);
			ck_assert_int_eq(fi_trecv(r.ep, buf, len, NULL,
						  FI_ADDR_UNSPEC, 31, 0, buf),
					 0);
		}
		tu_cq_expect(r.cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, buf);
		ck_assert_uint_eq(tu_check(buf, len, 31, 0), (size_t)-1);
		failed = true;
	}
	if (_i == 2) {
		/* the rest comes, and is dropped: the connection carries k's
		 * next message */
		atomic_store(&px.hold, 0);
		kside_big(&k, &r, &addr, 64, 33);
		ck_assert_msg(!atomic_load(&px.r_closed),
			      "the truncated message's rest ended the "
			      "connection");
		failed = true;
	}
	/* or never: the connection ends, the receive stays posted */
	for (unsigned ms = 0; !failed && !atomic_load(&px.r_closed); ms++) {
		ck_assert_msg(ms < TU_WAIT_MS,
			      "the stalled connection stayed open %u ms", ms);
		n = fi_cq_read(r.cq, &e, 1);
		ck_assert_msg(n != 1, "the receive completed");
		ck_assert_msg(n != -FI_EAVAIL, "the receive failed");
		(void)fi_cq_read(k.cq, &e, 1);
		tu_sleep_ms(1);
	}
	if (!failed) {
		ck_assert_int_eq(fi_cancel(&r.ep->fid, buf), 0);
		tu_cq_expect_err(r.cq, &err);
		ck_assert_int_eq(err.err, FI_ECANCELED);
	}
	atomic_store(&px.stop, true);
	pthread_join(px.thr, NULL);
	close(px.lfd);
	tu_kside_close(&other);
	tu_kside_close(&k);
	tu_kside_close(&r);
	tu_xport_only_end(&o);
	tnbc_env.tcp_timeout_ms = saved_timeout;
	tnbc_env.unexp_max = saved_unexp;
	free(buf);
	free(s);
}
END_TEST

/* A peer endpoint that closes: sends to it fail instead of waiting. */
START_TEST(tcp_peer_gone)
{
	tu_net_peer_gone(&tnbc_tcp_ops);
}
END_TEST

/* fi_domain(3)'s auth_key: a connection from a domain with another key,
 * or none, is refused; the same key gets through. */
START_TEST(tcp_auth_key)
{
	tu_net_auth_key(&tnbc_tcp_ops);
}
END_TEST

Suite *tu_tcp_suite(void)
{
	Suite *s = suite_create("tcp");
	TCase *tc = tcase_create("hostile");

	tcase_set_timeout(tc, TU_TCASE_TIMEOUT);
	tcase_add_loop_test(tc, tcp_bad_stream, 0, 5);
	tcase_add_test(tc, tcp_half_header_stall);
	tcase_add_test(tc, tcp_rndv_placed);
	tcase_add_test(tc, tcp_large_writes_split);
	tcase_add_test(tc, tcp_stats_start_at_zero);
	tcase_add_test(tc, tcp_stream_engine_quiet);
	tcase_add_test(tc, tcp_lone_keeps_shm_queue);
	tcase_add_test(tc, tcp_eager_size);
	tcase_add_loop_test(tc, tcp_placed_stall, 0, 4);
	tcase_add_loop_test(tc, tcp_engine_sleep_kick, 0, 2);
	tcase_add_test(tc, tcp_two_way);
	tcase_add_loop_test(tc, tcp_two_way_at_once, 0, 2);
	tcase_add_test(tc, tcp_dial_wait_closed);
	tcase_add_test(tc, tcp_close_frees_port);
	tcase_add_loop_test(tc, tcp_dial_wait_one_way, 0, 2);
	tcase_add_loop_test(tc, tcp_two_way_close, 0, 2);
	tcase_add_test(tc, tcp_peer_gone);
	tcase_add_test(tc, tcp_auth_key);
	suite_add_tcase(s, tc);
	return s;
}
