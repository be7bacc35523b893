/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The TCP transport against a stranger on the network: a process that
 * knows an endpoint's port and the stream's format (tnbc_tcp_proto.h),
 * and tries to pass for a peer, inject, steal, replay, hold memory or
 * sockets, or make the endpoint dial where it says.  A legitimate pair
 * of endpoints keeps exchanging checked messages around each attempt.
 *
 * "Another host" is a loopback address other than 127.0.0.1 (127.0.0.2,
 * 127.0.0.3): the endpoints listen on any address and give peers this
 * host's own, so a connection from 127.0.0.2 comes from an address that
 * none of their names has.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tnbc_unit.h"
#include "tnbc_proto.h"
#include "xport/tnbc_net.h"
#include "xport/tcp/tnbc_tcp_proto.h"

enum { R = 0, A = 1 };

/* The port endpoint e's TCP address has, from its text form. */
static unsigned trust_port_of(const char *text)
{
	const char *t = strstr(text, "tcp=");
	char ip[64];
	unsigned port;

	ck_assert_msg(t != NULL, "no tcp address in %s", text);
	ck_assert_int_eq(sscanf(t, "tcp=%63[0-9.]:%u", ip, &port), 2);
	return port;
}

static unsigned trust_port(struct tu_world *w, int e)
{
	char buf[256];
	size_t len = sizeof(buf);

	ck_assert_ptr_nonnull(fi_av_straddr(w->av, &w->ep[e].addr, buf, &len));
	return trust_port_of(buf);
}

/* A connection to 127.0.0.1:port from the address from (NULL: any). */
static int trust_dial(unsigned port, const char *from)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	if (from) {
		struct sockaddr_in me = {.sin_family = AF_INET};

		ck_assert_int_eq(inet_pton(AF_INET, from, &me.sin_addr), 1);
		ck_assert_int_eq(bind(fd, (struct sockaddr *)&me, sizeof(me)),
				 0);
	}
	ck_assert_int_eq(inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr), 1);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void trust_write(int fd, const void *buf, size_t len)
{
	ck_assert_int_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* A hello for to, from from; addr: where from says it listens (NULL:
 * any address, port 4000). */
static void trust_hello(int fd, const struct tnbc_name *to,
			const struct tnbc_name *from,
			const struct tnbc_tcp_addr *addr, uint16_t flags)
{
	struct {
		struct tnbc_tcp_rec rec;
		struct tnbc_tcp_hello h;
	} m = {.rec = {.len = sizeof(m.h), .type = TNBC_TCP_HELLO},
	       .h = {.magic = TNBC_TCP_MAGIC,
		     .version = TNBC_TCP_VERSION,
		     .flags = flags}};

	m.h.to = *to;
	m.h.from = *from;
	if (addr) {
		m.h.from_addr = *addr;
	} else {
		m.h.from_addr.family = 4;
		m.h.from_addr.port = htons(4000);
	}
	trust_write(fd, &m, sizeof(m));
}

/* A packet: hdr and len bytes of payload. */
static void trust_pkt(int fd, const struct tnbc_hdr *hdr, const void *payload,
		      size_t len)
{
	uint8_t buf[4096] = {0};
	struct tnbc_tcp_rec rec = {.len = (uint32_t)(sizeof(*hdr) + len),
				   .type = TNBC_TCP_PKT};

	ck_assert_uint_le(sizeof(rec) + TNBC_TCP_SPAN(rec.len), sizeof(buf));
	memcpy(buf, &rec, sizeof(rec));
	memcpy(buf + sizeof(rec), hdr, sizeof(*hdr));
	if (len)
		memcpy(buf + sizeof(rec) + sizeof(*hdr), payload, len);
	trust_write(fd, buf, sizeof(rec) + TNBC_TCP_SPAN(rec.len));
}

static struct tnbc_hdr trust_hdr(uint8_t type, const struct tnbc_name *src,
				 uint64_t tag, uint32_t payload, uint64_t size)
{
	struct tnbc_hdr h = {.version = TNBC_PROTO_VERSION,
			     .type = type,
			     .flags = TNBC_HDR_TAGGED,
			     .payload_len = payload,
			     .tag = tag,
			     .size = size,
			     .src = *src};

	return h;
}

/* A name nobody has: a process of another host. */
static struct tnbc_name trust_stranger(const struct tnbc_name *like)
{
	struct tnbc_name n = *like;

	n.pid = 4242;
	n.host ^= 0x5a5a5a5a5a5aull;
	n.uid = 7;
	n.nonce = 0x1234567;
	return n;
}

/* Whether the peer closed fd within TU_WAIT_MS, cq polled meanwhile. */
static bool trust_closed(int fd, struct fid_cq *cq)
{
	for (unsigned ms = 0; ms < TU_WAIT_MS; ms++) {
		struct fi_cq_tagged_entry e;
		char c[256];
		ssize_t n;

		if (cq)
			(void)fi_cq_read(cq, &e, 1);
		n = recv(fd, c, sizeof(c), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return true;
		tu_sleep_ms(1);
	}
	return false;
}

static struct fi_tnbc_engine_stats trust_stats(struct fid_domain *d)
{
	struct fi_tnbc_engine_stats st;

	tu_engine_stats(d, &st);
	return st;
}

/* Polls cq for up to ms: true if nothing completed meanwhile.  For what
 * must not happen: the wait bounds how long it is looked for. */
static bool trust_nothing(struct fid_cq *cq, unsigned ms)
{
	return tu_cq_quiet(cq, ms);
}

/* Takes back a receive posted with context ctx and its report. */
static void trust_unpost(struct fid_ep *ep, struct fid_cq *cq, void *ctx)
{
	struct fi_cq_err_entry err;

	ck_assert_int_eq(fi_cancel(&ep->fid, ctx), 0);
	tu_cq_expect_err(cq, &err);
	ck_assert_int_eq(err.err, FI_ECANCELED);
}

/*
 * Frames naming a source their connection is not from (_i 0: eager, 1:
 * a rendezvous request with the receive's tag, 2: acknowledgements of
 * a rendezvous in flight): a stranger that says who it is (its own
 * name) and then writes frames in the real peer's name.  None is
 * delivered or matched, each is counted, and the real exchange goes
 * on: R's receive gets A's message, R's rendezvous completes only when
 * A took it.
 */
START_TEST(trust_forged_src)
{
	struct tu_xport_only o;
	struct tu_world w;
	struct fi_tnbc_engine_stats st0, st;
	struct fi_cq_tagged_entry e;
	struct tnbc_name x;
	static char big[200000], got[200000];
	char buf[64] = "", payload[64] = "forged";
	int fd;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_world_open(&w, 2, NULL);
	tu_still_works(&w, R, A, 1);
	st0 = trust_stats(w.d.domain);
	x = trust_stranger(&w.ep[A].name);
	fd = trust_dial(trust_port(&w, R), NULL);
	trust_hello(fd, &w.ep[R].name, &x, NULL, 0);
	if (_i < 2) {
		ck_assert_int_eq(fi_trecv(w.ep[R].ep, buf, sizeof(buf), NULL,
					  FI_ADDR_UNSPEC, 77, 0, buf),
				 0);
	}
	if (_i == 0) {
		struct tnbc_hdr h = trust_hdr(TNBC_PKT_EAGER, &w.ep[A].name, 77,
					      sizeof(payload), sizeof(payload));

		for (int k = 0; k < 20; k++)
			trust_pkt(fd, &h, payload, sizeof(payload));
	} else if (_i == 1) {
		struct tnbc_rts_iov iov = {.addr = 4096, .len = 64};
		struct tnbc_hdr h = trust_hdr(TNBC_PKT_RTS, &w.ep[A].name, 77,
					      sizeof(iov), 64);

		h.msg_id = 1;
		trust_pkt(fd, &h, &iov, sizeof(iov));
	} else {
		/* R sends A a rendezvous A has not asked for yet; the
		 * stranger acknowledges every id a table of a few slots
		 * could give it */
		tu_fill(big, sizeof(big), 5);
		ck_assert_int_eq(fi_tsend(w.ep[R].ep, big, sizeof(big), NULL,
					  w.addr[A], 78, big),
				 0);
		for (uint64_t gen = 1; gen <= 8; gen++)
			for (uint64_t slot = 0; slot < 8; slot++) {
				struct tnbc_hdr h = trust_hdr(
					TNBC_PKT_ACK, &w.ep[A].name, 78, 0, 0);

				h.msg_id = gen << 32 | slot;
				trust_pkt(fd, &h, NULL, 0);
			}
	}
	/* every forged frame is counted: they were read */
	for (unsigned ms = 0;; ms++) {
		st = trust_stats(w.d.domain);
		if (st.forged_pkts > st0.forged_pkts)
			break;
		(void)fi_cq_read(w.ep[R].rx_cq, &e, 1);
		ck_assert_msg(ms < TU_WAIT_MS, "no forged frame counted");
		tu_sleep_ms(1);
	}
	if (_i < 2) {
		char real[64];

		ck_assert_msg(trust_nothing(w.ep[R].rx_cq, 200),
			      "a forged frame matched the receive");
		/* A's own message takes the receive */
		tu_fill(real, sizeof(real), 9);
		ck_assert_int_eq(fi_tsend(w.ep[A].ep, real, sizeof(real), NULL,
					  w.addr[R], 77, real),
				 0);
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_mem_eq(buf, real, sizeof(real));
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	} else {
		ck_assert_msg(trust_nothing(w.ep[R].tx_cq, 200),
			      "a forged ACK completed the send");
		ck_assert_int_eq(fi_trecv(w.ep[A].ep, got, sizeof(got), NULL,
					  FI_ADDR_UNSPEC, 78, 0, got),
				 0);
		tu_cq_expect(w.ep[A].rx_cq, &e, NULL);
		ck_assert_uint_eq(tu_check(got, sizeof(got), 5, 0), (size_t)-1);
		tu_cq_expect(w.ep[R].tx_cq, &e, NULL);
	}
	tu_still_works(&w, R, A, 2);
	close(fd);
	tu_world_close(&w);
	tu_xport_only_end(&o);
}
END_TEST

/*
 * A stranger on another host claims to be A, before R first sends to
 * A (_i 0: with A's own address in the hello, 1: with none, so that its
 * own would be taken).  The claim is refused, nothing of R's reaches
 * the stranger, and A gets R's message.
 */
START_TEST(trust_hijack)
{
	struct tu_xport_only o;
	struct tu_world w;
	struct fi_tnbc_engine_stats st0;
	struct fi_cq_tagged_entry e;
	const struct tnbc_tcp_addr *aaddr;
	char s[64], buf[64];
	int fd;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_world_open(&w, 2, NULL);
	st0 = trust_stats(w.d.domain);
	aaddr = (const void *)(w.ep[A].addr.xaddr + TNBC_XADDR_TCP_OFF);
	fd = trust_dial(trust_port(&w, R), "127.0.0.2");
	trust_hello(fd, &w.ep[R].name, &w.ep[A].name, _i ? NULL : aaddr,
		    TNBC_TCP_HELLO_TWO_WAY);
	ck_assert_msg(trust_closed(fd, w.ep[R].rx_cq),
		      "the claim to be A stayed open");
	ck_assert_uint_gt(trust_stats(w.d.domain).refused_peers,
			  st0.refused_peers);
	/* R's first message to A goes to A */
	tu_fill(s, sizeof(s), 3);
	ck_assert_int_eq(fi_trecv(w.ep[A].ep, buf, sizeof(buf), NULL,
				  FI_ADDR_UNSPEC, 5, 0, buf),
			 0);
	ck_assert_int_eq(
		fi_tsend(w.ep[R].ep, s, sizeof(s), NULL, w.addr[A], 5, s), 0);
	tu_cq_expect(w.ep[A].rx_cq, &e, NULL);
	ck_assert_mem_eq(buf, s, sizeof(s));
	tu_cq_expect(w.ep[R].tx_cq, &e, NULL);
	close(fd);
	tu_world_close(&w);
	tu_xport_only_end(&o);
}
END_TEST

/* Generations of a transfer slot used again at once are not the one
 * before plus one: an outsider cannot name a transfer in flight. */
START_TEST(trust_ids_unpredictable)
{
	struct tnbc_id_table t = {0};
	uint64_t prev = 0, id;
	unsigned steps = 0;

	for (int k = 0; k < 1000; k++) {
		ck_assert_int_eq(tnbc_id_add(&t, NULL, &id), 0);
		ck_assert_uint_ne(id >> 32, 0);
		ck_assert_uint_ne(id, prev);
		if (prev && (id >> 32) == (prev >> 32) + 1)
			steps++;
		ck_assert_ptr_eq(tnbc_id_find(&t, prev), NULL);
		tnbc_id_del(&t, id);
		prev = id;
	}
	/* by chance: about 1000 / 2^32 */
	ck_assert_uint_le(steps, 1);
	free(t.slot);
	free(t.gen);
}
END_TEST

/* A relay between a connector and a listener that records what the
 * connector wrote. */
struct trust_relay {
	int lfd;
	struct sockaddr_in to;
	uint8_t rec[65536];
	size_t rec_len;
	atomic_bool done;
	pthread_t thr;
};

static void *trust_relay_main(void *arg)
{
	struct trust_relay *r = arg;
	int a = accept(r->lfd, NULL, NULL), b;
	uint8_t buf[8192];

	if (a < 0)
		return NULL;
	b = socket(AF_INET, SOCK_STREAM, 0);
	if (b < 0 || connect(b, (struct sockaddr *)&r->to, sizeof(r->to))) {
		close(a);
		return NULL;
	}
	while (!atomic_load(&r->done)) {
		struct pollfd p[2] = {{.fd = a, .events = POLLIN},
				      {.fd = b, .events = POLLIN}};

		if (poll(p, 2, 50) <= 0)
			continue;
		if (p[0].revents) {
			ssize_t n = recv(a, buf, sizeof(buf), 0);

			if (n <= 0)
				break;
			if (r->rec_len + (size_t)n <= sizeof(r->rec)) {
				memcpy(r->rec + r->rec_len, buf, (size_t)n);
				r->rec_len += (size_t)n;
			}
			if (send(b, buf, (size_t)n, MSG_NOSIGNAL) != n)
				break;
		}
		if (p[1].revents) {
			ssize_t n = recv(b, buf, sizeof(buf), 0);

			if (n <= 0 ||
			    send(a, buf, (size_t)n, MSG_NOSIGNAL) != n)
				break;
		}
	}
	close(a);
	close(b);
	return NULL;
}

/* k's text address of r with the port of a relay in place of r's. */
static void trust_relay_start(struct trust_relay *rl, const char *raddr,
			      char *text, size_t len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	const char *at = strstr(raddr, "tcp=");
	unsigned port = trust_port_of(raddr);

	rl->to.sin_family = AF_INET;
	rl->to.sin_port = htons((uint16_t)port);
	ck_assert_int_eq(inet_pton(AF_INET, "127.0.0.1", &rl->to.sin_addr), 1);
	rl->lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(rl->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(rl->lfd, 4), 0);
	ck_assert_int_eq(getsockname(rl->lfd, (struct sockaddr *)&sa, &sl), 0);
	at = strchr(at, ':') + 1;
	snprintf(text, len, "%.*s%u%s", (int)(at - raddr), raddr,
		 (unsigned)ntohs(sa.sin_port), at + strspn(at, "0123456789"));
	ck_assert_int_eq(pthread_create(&rl->thr, NULL, trust_relay_main, rl),
			 0);
}

/*
 * With an auth_key: a relay records a whole keyed session (handshake
 * and a message) from k to r; the key is nowhere in it, and the
 * recording replayed on a fresh connection is refused at its proof
 * (r's fresh challenge): the message is not delivered again.  And a
 * listener that does not hold the key (the relay's port with nobody
 * proving anything) gets the hello and nothing after it.
 */
START_TEST(trust_keyed_replay)
{
	static const char key[] = "job-42-secret";
	struct tu_xport_only o;
	struct tu_kside r, k;
	struct trust_relay rl = {0};
	struct fi_cq_tagged_entry e;
	struct fi_tnbc_engine_stats st0;
	char text[256], *addr = text, s[64] = "once", buf[64];
	fi_addr_t to;
	uint64_t refused0;
	int fd;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_kside_open(&r, key, FI_ADDR_STR);
	tu_kside_open(&k, key, FI_ADDR_STR);
	trust_relay_start(&rl, (const char *)r.addr, text, sizeof(text));
	ck_assert_int_eq(fi_av_insert(k.av, &addr, 1, &to, 0, NULL), 1);
	ck_assert_int_eq(fi_trecv(r.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC,
				  9, 0, buf),
			 0);
	ck_assert_int_eq(fi_tsend(k.ep, s, sizeof(s), NULL, to, 9, s), 0);
	for (unsigned ms = 0, got = 0, sent = 0; !got || !sent; ms++) {
		ck_assert_msg(ms < TU_WAIT_MS, "the keyed message never came");
		if (fi_cq_read(r.cq, &e, 1) == 1)
			got = 1;
		if (fi_cq_read(k.cq, &e, 1) == 1)
			sent = 1;
		tu_sleep_ms(1);
	}
	ck_assert_str_eq(buf, "once");
	atomic_store(&rl.done, true);
	pthread_join(rl.thr, NULL);
	close(rl.lfd);
	ck_assert_uint_gt(rl.rec_len, sizeof(struct tnbc_tcp_hello));
	ck_assert_ptr_null(memmem(rl.rec, rl.rec_len, key, strlen(key)));
	/* the recording, on a connection of its own */
	tu_engine_stats(r.dom, &st0);
	refused0 = st0.refused_peers;
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(fi_trecv(r.ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC,
				  9, 0, buf),
			 0);
	fd = trust_dial(trust_port_of((const char *)r.addr), NULL);
	trust_write(fd, rl.rec, rl.rec_len);
	ck_assert_msg(trust_closed(fd, r.cq), "the replay stayed open");
	ck_assert_uint_gt(trust_stats(r.dom).refused_peers, refused0);
	ck_assert_msg(trust_nothing(r.cq, 200), "the replay was delivered");
	trust_unpost(r.ep, r.cq, buf);
	close(fd);
	tu_kside_close(&k);
	tu_kside_close(&r);
	tu_xport_only_end(&o);
}
END_TEST

/* A keyed connector reaching a listener that does not prove the key
 * (_i 0: a socket that only listens; 1: one that answers the hello with
 * a challenge whose MAC it made up) writes its hello and nothing else,
 * and its sends then fail rather than wait for ever (0: past its
 * handshake's deadline; 1: at once, the challenge refused). */
START_TEST(trust_keyed_impostor)
{
	size_t saved = tnbc_env.tcp_timeout_ms;
	struct tu_xport_only o;
	struct tu_kside r, k;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct fi_cq_err_entry err;
	char text[256], *addr = text, s[64] = "secret";
	const char *at;
	uint8_t got[4096];
	size_t have = 0;
	fi_addr_t to;
	int lfd, fd;
	bool failed = false;

	tnbc_env.tcp_timeout_ms = 1000;
	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_kside_open(&r, "job-1", FI_ADDR_STR);
	tu_kside_open(&k, "job-1", FI_ADDR_STR);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	at = strchr(strstr((char *)r.addr, "tcp="), ':') + 1;
	snprintf(text, sizeof(text), "%.*s%u%s", (int)(at - (char *)r.addr),
		 (char *)r.addr, (unsigned)ntohs(sa.sin_port),
		 at + strspn(at, "0123456789"));
	ck_assert_int_eq(fi_av_insert(k.av, &addr, 1, &to, 0, NULL), 1);
	ck_assert_int_eq(fi_tsend(k.ep, s, sizeof(s), NULL, to, 3, s), 0);
	fd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	if (_i == 1) {
		struct {
			struct tnbc_tcp_rec rec;
			struct tnbc_net_chal chal;
		} m = {.rec = {.len = sizeof(m.chal), .type = TNBC_TCP_CHAL}};
		uint64_t refused = trust_stats(k.dom).refused_peers;
		size_t hl = sizeof(struct tnbc_tcp_rec) +
			    sizeof(struct tnbc_tcp_hello);

		/* its hello first, then the made-up challenge */
		ck_assert_int_eq(recv(fd, got, hl, MSG_WAITALL), (ssize_t)hl);
		have = hl;
		tu_fill(&m.chal, sizeof(m.chal), 77);
		trust_write(fd, &m, sizeof(m));
		ck_assert_msg(trust_closed(fd, k.cq),
			      "k kept a connection whose challenge is forged");
		ck_assert_uint_gt(trust_stats(k.dom).refused_peers, refused);
	}
	for (uint64_t end = tu_now_ms() + 1500; tu_now_ms() < end;) {
		struct fi_cq_tagged_entry e;
		ssize_t n;

		n = recv(fd, got + have, sizeof(got) - have, MSG_DONTWAIT);
		if (n > 0)
			have += (size_t)n;
		n = fi_cq_read(k.cq, &e, 1);
		if (n == -FI_EAVAIL) {
			ck_assert_int_eq(fi_cq_readerr(k.cq, &err, 0), 1);
			failed = true;
		}
		tu_sleep_ms(1);
	}
	if (!failed)
		failed = tu_send_until_refused(k.ep, k.cq, to, 4) != 0;
	ck_assert_msg(failed, "k's sends to the impostor never failed");
	ck_assert_uint_eq(have, sizeof(struct tnbc_tcp_rec) +
					sizeof(struct tnbc_tcp_hello));
	ck_assert_ptr_null(memmem(got, have, "job-1", 5));
	close(fd);
	close(lfd);
	tu_kside_close(&k);
	tu_kside_close(&r);
	tu_xport_only_end(&o);
	tnbc_env.tcp_timeout_ms = saved;
}
END_TEST

/*
 * Bounded work for strangers.  _i 0: a hello's header announcing a
 * megabyte is refused at its header; 1: half a hello, then nothing,
 * is closed at the hello deadline; 2: more idle connections than
 * FI_TNBC_TCP_STRANGERS_MAX: the oldest are closed at once; 3: a
 * megabyte's packet header before any hello is refused at its header.
 * Only case 1 waits for the deadline (the others' is a minute).  The
 * real exchange goes on meanwhile.
 */
START_TEST(trust_strangers)
{
	size_t saved_ms = tnbc_env.tcp_hello_ms,
	       saved_max = tnbc_env.tcp_strangers_max;
	struct tu_xport_only o;
	struct tu_world w;
	struct fi_tnbc_engine_stats st0, st;
	int fds[12];
	unsigned port, closed = 0;

	tnbc_env.tcp_hello_ms = _i == 1 ? 300 : 60000;
	tnbc_env.tcp_strangers_max = 4;
	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_world_open(&w, 2, NULL);
	tu_still_works(&w, R, A, 1);
	st0 = trust_stats(w.d.domain);
	port = trust_port(&w, R);
	if (_i == 0 || _i == 3) {
		struct tnbc_tcp_rec rec = {.len = 1u << 20,
					   .type = _i ? TNBC_TCP_PKT
						      : TNBC_TCP_HELLO};
		uint8_t junk[60000];

		fds[0] = trust_dial(port, NULL);
		trust_write(fds[0], &rec, sizeof(rec));
		memset(junk, 7, sizeof(junk));
		(void)send(fds[0], junk, sizeof(junk),
			   MSG_NOSIGNAL | MSG_DONTWAIT);
		ck_assert_msg(trust_closed(fds[0], w.ep[R].rx_cq),
			      "an oversized hello stayed open");
		st = trust_stats(w.d.domain);
		ck_assert_uint_gt(st.bad_pkts, st0.bad_pkts);
		close(fds[0]);
	} else if (_i == 1) {
		struct tnbc_tcp_rec rec = {.len = sizeof(struct tnbc_tcp_hello),
					   .type = TNBC_TCP_HELLO};
		uint8_t part[16] = "TNBT";

		fds[0] = trust_dial(port, NULL);
		trust_write(fds[0], &rec, sizeof(rec));
		trust_write(fds[0], part, sizeof(part));
		/* and the application does not poll R meanwhile */
		for (unsigned ms = 0; !closed; ms++) {
			char c;
			ssize_t n = recv(fds[0], &c, 1, MSG_DONTWAIT);

			ck_assert_msg(ms < TU_WAIT_MS,
				      "half a hello stayed open");
			closed = n == 0 || (n < 0 && errno != EAGAIN);
			tu_sleep_ms(1);
		}
		st = trust_stats(w.d.domain);
		ck_assert_uint_gt(st.strangers_closed, st0.strangers_closed);
		close(fds[0]);
	} else {
		for (int k = 0; k < 12; k++)
			fds[k] = trust_dial(port, NULL);
		/* the first 8 go, the last 4 stay (until their deadline) */
		for (int k = 0; k < 8; k++)
			ck_assert_msg(trust_closed(fds[k], w.ep[R].rx_cq),
				      "stranger %d of 12 stayed open", k);
		st = trust_stats(w.d.domain);
		ck_assert_uint_ge(st.strangers_closed,
				  st0.strangers_closed + 8);
		for (int k = 0; k < 12; k++)
			close(fds[k]);
	}
	tu_still_works(&w, R, A, 2);
	tu_world_close(&w);
	tu_xport_only_end(&o);
	tnbc_env.tcp_hello_ms = saved_ms;
	tnbc_env.tcp_strangers_max = saved_max;
}
END_TEST

/* CPU time of this process, in ms. */
static uint64_t trust_cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/*
 * Out of descriptors, a listener with connections waiting does not spin
 * (it used to fail accept tens of thousands of times a second): over a
 * second, the process spends a fraction of it on the CPU.  Once
 * descriptors free, the waiting connections are served.
 */
START_TEST(trust_emfile)
{
	struct tu_xport_only o;
	struct tu_world w;
	struct rlimit lim, low;
	uint64_t cpu0, cpu, wall0;
	unsigned port;
	int fds[4], spare;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_world_open(&w, 2, NULL);
	tu_still_works(&w, R, A, 1);
	port = trust_port(&w, R);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &lim), 0);
	/* dial first, then leave the process no descriptor to accept
	 * them with */
	for (int k = 0; k < 4; k++)
		fds[k] = trust_dial(port, NULL);
	spare = dup(0);
	ck_assert_int_ge(spare, 0);
	low = lim;
	low.rlim_cur = (rlim_t)spare;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	tu_sleep_ms(100);
	cpu0 = trust_cpu_ms();
	wall0 = tu_now_ms();
	tu_sleep_ms(1000);
	cpu = trust_cpu_ms() - cpu0;
	ck_assert_msg(cpu < (tu_now_ms() - wall0) / 2,
		      "%llu ms of CPU in %llu ms with no descriptor to accept",
		      (unsigned long long)cpu,
		      (unsigned long long)(tu_now_ms() - wall0));
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	close(spare);
	/* the waiting connections are accepted: one that writes no hello
	 * is closed at once */
	trust_write(fds[0], "garbage!", 8);
	ck_assert_msg(trust_closed(fds[0], w.ep[R].rx_cq),
		      "a connection that waited was never served");
	for (int k = 0; k < 4; k++)
		close(fds[k]);
	tu_still_works(&w, R, A, 2);
	tu_world_close(&w);
	tu_xport_only_end(&o);
}
END_TEST

/* The address book: what the application gave stands; learned names
 * are bounded, the oldest forgotten first. */
START_TEST(trust_book_bounded)
{
	struct tnbc_net_book *b = malloc(sizeof(*b));
	struct tnbc_name n = {.kind = TNBC_NAME_PID, .pid = 1, .host = 2};
	uint32_t addr, got;
	bool pinned;

	ck_assert_ptr_nonnull(b);
	tnbc_net_book_init(b);
	n.uid = 0;
	addr = 111;
	tnbc_net_book_pin(b, &n, &addr, sizeof(addr));
	for (uint32_t k = 1; k <= 3 * TNBC_NET_BOOK_LEARNED; k++) {
		n.uid = k % 7;
		n.nonce = k;
		addr = k;
		tnbc_net_book_put(b, &n, &addr, sizeof(addr));
	}
	ck_assert_uint_eq(b->learned, TNBC_NET_BOOK_LEARNED);
	ck_assert_uint_eq(b->evicted, 2 * TNBC_NET_BOOK_LEARNED);
	/* the newest learned are there, the oldest gone */
	n.nonce = 3 * TNBC_NET_BOOK_LEARNED;
	n.uid = n.nonce % 7;
	ck_assert(tnbc_net_book_find(b, &n, &got, sizeof(got), &pinned));
	ck_assert_uint_eq(got, (uint32_t)n.nonce);
	ck_assert(!pinned);
	n.nonce = 1;
	n.uid = 1;
	ck_assert(!tnbc_net_book_get(b, &n, &got, sizeof(got)));
	/* the pinned one stayed, and no learned address replaces it */
	n.uid = 0;
	n.nonce = 0;
	addr = 999;
	tnbc_net_book_put(b, &n, &addr, sizeof(addr));
	ck_assert(tnbc_net_book_find(b, &n, &got, sizeof(got), &pinned));
	ck_assert_uint_eq(got, 111);
	ck_assert(pinned);
	tnbc_net_book_fini(b);
	free(b);
}
END_TEST

/*
 * Introductions: a proven stranger may introduce only endpoints of its
 * own process listening on its own host.  _i 0: one naming another
 * process is refused with its connection; 1: one of its own process
 * listening on another host (where the test listens) is not taken, and
 * a rendezvous request from that name makes R dial nowhere.
 */
START_TEST(trust_intro)
{
	struct tu_xport_only o;
	struct tu_world w;
	struct fi_tnbc_engine_stats st0, st;
	struct fi_cq_tagged_entry e;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	struct tnbc_name x, y;
	char buf[64];
	int fd, lfd;

	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_world_open(&w, 2, NULL);
	tu_still_works(&w, R, A, 1);
	st0 = trust_stats(w.d.domain);
	x = trust_stranger(&w.ep[A].name);
	y = x;
	y.uid = 8;
	y.nonce = 0x7654321;
	if (_i == 0)
		y.pid = 4243;
	ck_assert_int_eq(inet_pton(AF_INET, "127.0.0.3", &sa.sin_addr), 1);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 16), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	fd = trust_dial(trust_port(&w, R), NULL);
	trust_hello(fd, &w.ep[R].name, &x, NULL, 0);
	{
		struct {
			struct tnbc_tcp_rec rec;
			struct tnbc_tcp_intro in;
		} m = {.rec = {.len = sizeof(m.in), .type = TNBC_TCP_INTRO}};

		m.in.src = y;
		m.in.addr.family = 4;
		m.in.addr.port = sa.sin_port;
		memcpy(m.in.addr.ip, &sa.sin_addr, 4);
		trust_write(fd, &m, sizeof(m));
	}
	if (_i == 0) {
		ck_assert_msg(trust_closed(fd, w.ep[R].rx_cq),
			      "an introduction of another process was taken");
		st = trust_stats(w.d.domain);
		ck_assert_uint_gt(st.bad_pkts, st0.bad_pkts);
	} else {
		struct tnbc_rts_iov iov = {.addr = 4096, .len = 64};
		struct tnbc_hdr h =
			trust_hdr(TNBC_PKT_RTS, &y, 11, sizeof(iov), 64);
		bool dialed = false;

		h.msg_id = 1;
		ck_assert_int_eq(fi_trecv(w.ep[R].ep, buf, sizeof(buf), NULL,
					  FI_ADDR_UNSPEC, 11, 0, buf),
				 0);
		trust_pkt(fd, &h, &iov, sizeof(iov));
		/* R answers the request, or fails the receive; either way
		 * it never connects to where the introduction said */
		for (unsigned ms = 0; ms < 1000 && !dialed; ms++) {
			int c = accept(lfd, NULL, NULL);

			if (c >= 0) {
				dialed = true;
				close(c);
			}
			(void)fi_cq_read(w.ep[R].rx_cq, &e, 1);
			tu_sleep_ms(1);
		}
		ck_assert_msg(!dialed, "R dialed where a stranger said");
		/* the receive the request matched fails: its source cannot
		 * be reached */
		if (fi_cq_read(w.ep[R].rx_cq, &e, 1) == -FI_EAVAIL) {
			struct fi_cq_err_entry err;

			ck_assert_int_eq(fi_cq_readerr(w.ep[R].rx_cq, &err, 0),
					 1);
		} else {
			trust_unpost(w.ep[R].ep, w.ep[R].rx_cq, buf);
		}
		st = trust_stats(w.d.domain);
		ck_assert_uint_gt(st.refused_peers, st0.refused_peers);
	}
	close(fd);
	close(lfd);
	tu_still_works(&w, R, A, 2);
	tu_world_close(&w);
	tu_xport_only_end(&o);
}
END_TEST

struct trust_flooder {
	int fd;
	struct tnbc_name src;
	atomic_ullong sent;
	atomic_bool stop;
	pthread_t thr;
};

static void *trust_flood_main(void *arg)
{
	struct trust_flooder *f = arg;
	static char payload[3000];
	struct tnbc_hdr h = trust_hdr(TNBC_PKT_EAGER, &f->src, 900,
				      sizeof(payload), sizeof(payload));
	uint8_t buf[4096] = {0};
	struct tnbc_tcp_rec rec = {
		.len = (uint32_t)(sizeof(h) + sizeof(payload)),
		.type = TNBC_TCP_PKT};
	size_t len = sizeof(rec) + TNBC_TCP_SPAN(rec.len);

	memcpy(buf, &rec, sizeof(rec));
	memcpy(buf + sizeof(rec), &h, sizeof(h));
	while (!atomic_load(&f->stop)) {
		/* blocks once nobody reads: that is the point */
		if (send(f->fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
			break;
		atomic_fetch_add(&f->sent, len);
	}
	return NULL;
}

/*
 * A connection flooding messages nobody asked for fills the unexpected
 * room and then its own share of what the endpoint holds, and is left
 * unread (its writes stop): the back pressure falls on it alone.  A's
 * message to a posted receive comes meanwhile, and A's own unexpected
 * one once a receive asks for it.
 */
START_TEST(trust_flood)
{
	size_t saved = tnbc_env.unexp_max;
	struct tu_xport_only o;
	struct tu_world w;
	struct trust_flooder f = {0};
	struct fi_cq_tagged_entry e;
	char s[64], buf[64];
	unsigned long long last = 0;
	uint64_t still = 0;

	tnbc_env.unexp_max = 65536;
	tu_xport_only_begin(&o, &tnbc_tcp_ops);
	tu_world_open(&w, 2, NULL);
	tu_still_works(&w, R, A, 1);
	f.src = trust_stranger(&w.ep[A].name);
	f.fd = trust_dial(trust_port(&w, R), NULL);
	trust_hello(f.fd, &w.ep[R].name, &f.src, NULL, 0);
	ck_assert_int_eq(pthread_create(&f.thr, NULL, trust_flood_main, &f), 0);
	/* until R stops reading the flood (its writes stop for 500 ms),
	 * R polled meanwhile */
	for (uint64_t end = tu_now_ms() + 6 * TU_WAIT_MS;;) {
		unsigned long long now = atomic_load(&f.sent);

		ck_assert_msg(tu_now_ms() < end,
			      "R read the flood without end (%llu bytes)", now);
		(void)fi_cq_read(w.ep[R].rx_cq, &e, 1);
		if (now != last || !now) {
			last = now;
			still = tu_now_ms();
		} else if (tu_now_ms() - still > 500) {
			break;
		}
		tu_sleep_ms(1);
	}
	ck_assert_uint_gt(trust_stats(w.d.domain).unexp_held, 0);
	/* A gets through, to a posted receive */
	tu_still_works(&w, R, A, 2);
	/* and with a message nobody asked for yet */
	tu_fill(s, sizeof(s), 4);
	ck_assert_int_eq(
		fi_tsend(w.ep[A].ep, s, sizeof(s), NULL, w.addr[R], 3, s), 0);
	tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, buf, sizeof(buf), NULL, w.addr[A],
				  3, 0, buf),
			 0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_mem_eq(buf, s, sizeof(s));
	atomic_store(&f.stop, true);
	shutdown(f.fd, SHUT_RDWR);
	pthread_join(f.thr, NULL);
	close(f.fd);
	tu_world_close(&w);
	tu_xport_only_end(&o);
	tnbc_env.unexp_max = saved;
}
END_TEST

/* A flood from a provider of its own, not raw bytes: its process is
 * held back by a notice, and a third domain's messages still get
 * through.  16000 messages of 4000 B: more than may be on their way
 * (the sender's buffer, both kernels' socket buffers) before the notice
 * is taken, however slowly the sender's engine takes it. */
START_TEST(trust_flood_domains)
{
	tu_net_flood(&tnbc_tcp_ops, 16000, false);
}
END_TEST

Suite *tu_tcp_trust_suite(void)
{
	Suite *s = suite_create("tcp_trust");
	TCase *tc = tcase_create("stranger");

	tcase_set_timeout(tc, TU_TCASE_TIMEOUT);
	tcase_add_loop_test(tc, trust_forged_src, 0, 3);
	tcase_add_loop_test(tc, trust_hijack, 0, 2);
	tcase_add_test(tc, trust_ids_unpredictable);
	tcase_add_test(tc, trust_keyed_replay);
	tcase_add_loop_test(tc, trust_keyed_impostor, 0, 2);
	tcase_add_loop_test(tc, trust_strangers, 0, 4);
	tcase_add_test(tc, trust_emfile);
	tcase_add_test(tc, trust_book_bounded);
	tcase_add_loop_test(tc, trust_intro, 0, 2);
	tcase_add_test(tc, trust_flood);
	tcase_add_test(tc, trust_flood_domains);
	suite_add_tcase(s, tc);
	return s;
}
