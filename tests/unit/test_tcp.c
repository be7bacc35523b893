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
#include <netinet/in.h>
#include <sys/socket.h>

#include "tnbc_unit.h"

enum { R = 0, A = 1 };

/* The world's transports forced to TCP alone, for one test. */
struct tcp_only {
	const struct tnbc_xport_ops *list[4], *first;
	unsigned n;
};

static void tcp_only_begin(struct tcp_only *o)
{
	memcpy(o->list, tnbc_env.xport_list, sizeof(o->list));
	o->n = tnbc_env.nxport;
	o->first = tnbc_env.xport;
	tnbc_env.xport_list[0] = &tnbc_tcp_ops;
	tnbc_env.nxport = 1;
	tnbc_env.xport = &tnbc_tcp_ops;
}

static void tcp_only_end(struct tcp_only *o)
{
	memcpy(tnbc_env.xport_list, o->list, sizeof(o->list));
	tnbc_env.nxport = o->n;
	tnbc_env.xport = o->first;
}

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

/* A message from A reaches R over TCP. */
static void still_works(struct tu_world *w, uint64_t tag)
{
	char s[64], r[64];
	struct fi_cq_tagged_entry e;

	tu_fill(s, sizeof(s), (uint32_t)tag);
	ck_assert_int_eq(fi_trecv(w->ep[R].ep, r, sizeof(r), NULL,
				  FI_ADDR_UNSPEC, tag, 0, &r),
			 0);
	ck_assert_int_eq(
		fi_tsend(w->ep[A].ep, s, sizeof(s), NULL, w->addr[R], tag, &s),
		0);
	tu_cq_expect(w->ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &r);
	ck_assert_mem_eq(r, s, sizeof(s));
	tu_cq_expect(w->ep[A].tx_cq, &e, NULL);
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
 * 3 a packet before any hello */
START_TEST(tcp_bad_stream)
{
	struct fi_tnbc_engine_stats st0, st;
	struct tcp_only o;
	struct tu_world w;
	uint8_t junk[256];
	uint32_t hdr[2];
	int fd;

	tcp_only_begin(&o);
	tu_world_open(&w, 2, NULL);
	still_works(&w, 1);
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
	}
	ck_assert_msg(closed_by_peer(&w, fd),
		      "case %d: the bad connection stayed open", _i);
	tu_engine_stats(w.d.domain, &st);
	ck_assert_uint_gt(st.bad_pkts + st.refused_peers,
			  st0.bad_pkts + st0.refused_peers);
	still_works(&w, 2);
	close(fd);
	tu_world_close(&w);
	tcp_only_end(&o);
}
END_TEST

/* Half a header, then nothing: the connection waits, and costs nobody
 * else anything; closing it costs nothing either. */
START_TEST(tcp_half_header_stall)
{
	struct tcp_only o;
	struct tu_world w;
	uint8_t half[4] = {8, 0, 0, 0};
	int fd;

	tcp_only_begin(&o);
	tu_world_open(&w, 2, NULL);
	fd = raw_connect(&w, R);
	ck_assert_int_eq(send(fd, half, sizeof(half), 0),
			 (ssize_t)sizeof(half));
	for (uint64_t k = 0; k < 20; k++)
		still_works(&w, 10 + k);
	close(fd);
	still_works(&w, 40);
	tu_world_close(&w);
	tcp_only_end(&o);
}
END_TEST

/* A peer endpoint that closes: sends to it fail instead of waiting. */
START_TEST(tcp_peer_gone)
{
	struct fi_cq_err_entry err;
	struct tcp_only o;
	struct tu_world w;
	char s[64] = "x";
	int ret = 0;

	tcp_only_begin(&o);
	tu_world_open(&w, 2, NULL);
	still_works(&w, 1);
	ck_assert_int_eq(fi_close(&w.ep[R].ep->fid), 0);
	w.ep[R].ep = NULL;
	/* the connection breaks; a later send fails at once or completes
	 * in error, never hangs */
	for (unsigned ms = 0; ms < TU_WAIT_MS && !ret; ms++) {
		struct fi_cq_tagged_entry e;
		ssize_t n;

		ret = (int)fi_tsend(w.ep[A].ep, s, sizeof(s), NULL, w.addr[R],
				    7, s);
		if (ret)
			break;
		do
			n = fi_cq_read(w.ep[A].tx_cq, &e, 1);
		while (n == -FI_EAGAIN);
		if (n == -FI_EAVAIL) {
			ck_assert_int_eq(fi_cq_readerr(w.ep[A].tx_cq, &err, 0),
					 1);
			ret = -err.err;
			break;
		}
		tu_sleep_ms(1);
	}
	ck_assert_msg(ret == -FI_EHOSTUNREACH, "send to a closed peer: %d",
		      ret);
	tu_world_close(&w);
	tcp_only_end(&o);
}
END_TEST

/* A domain of its own with one endpoint, its auth_key key (NULL: none),
 * on TCP alone. */
struct kside {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct tnbc_addr addr;
};

static void kside_open(struct kside *k, const char *key)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	size_t len = sizeof(k->addr);

	ck_assert_ptr_nonnull(hints);
	if (key) {
		hints->domain_attr->auth_key = (uint8_t *)strdup(key);
		hints->domain_attr->auth_key_size = strlen(key);
	}
	ck_assert_int_eq(
		tnbc_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &k->info),
		0);
	fi_freeinfo(hints);
	ck_assert_uint_eq(k->info->domain_attr->auth_key_size,
			  key ? strlen(key) : 0);
	ck_assert_int_eq(
		tnbc_fabric_open(k->info->fabric_attr, &k->fabric, NULL), 0);
	ck_assert_int_eq(fi_domain(k->fabric, k->info, &k->dom, NULL), 0);
	ck_assert_int_eq(fi_endpoint(k->dom, k->info, &k->ep, NULL), 0);
	ck_assert_int_eq(fi_av_open(k->dom, &av_attr, &k->av, NULL), 0);
	ck_assert_int_eq(fi_cq_open(k->dom, &cq_attr, &k->cq, NULL), 0);
	ck_assert_int_eq(fi_ep_bind(k->ep, &k->av->fid, 0), 0);
	ck_assert_int_eq(fi_ep_bind(k->ep, &k->cq->fid, FI_TRANSMIT | FI_RECV),
			 0);
	ck_assert_int_eq(fi_enable(k->ep), 0);
	ck_assert_int_eq(fi_getname(&k->ep->fid, &k->addr, &len), 0);
}

static void kside_close(struct kside *k)
{
	ck_assert_int_eq(fi_close(&k->ep->fid), 0);
	ck_assert_int_eq(fi_close(&k->cq->fid), 0);
	ck_assert_int_eq(fi_close(&k->av->fid), 0);
	ck_assert_int_eq(fi_close(&k->dom->fid), 0);
	ck_assert_int_eq(fi_close(&k->fabric->fid), 0);
	fi_freeinfo(k->info);
}

/* k sends 64 B to r's endpoint: 0 once r has it, or the error the send
 * failed with. */
static int kside_send(struct kside *k, struct kside *r, uint64_t tag)
{
	char s[64] = "keyed", buf[64];
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t to;
	int ret = 0;
	bool sent = false, got = false;

	ck_assert_int_eq(fi_av_insert(k->av, &r->addr, 1, &to, 0, NULL), 1);
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
START_TEST(tcp_auth_key)
{
	struct fi_tnbc_engine_stats st;
	struct kside r, wrong, none, right;
	struct tcp_only o;
	int ret;

	tcp_only_begin(&o);
	kside_open(&r, "job-42");
	kside_open(&wrong, "job-41");
	kside_open(&none, NULL);
	kside_open(&right, "job-42");
	ret = kside_send(&wrong, &r, 1);
	ck_assert_msg(ret == -FI_EHOSTUNREACH, "another key: %d", ret);
	ret = kside_send(&none, &r, 2);
	ck_assert_msg(ret == -FI_EHOSTUNREACH, "no key: %d", ret);
	ck_assert_int_eq(kside_send(&right, &r, 3), 0);
	tu_engine_stats(r.dom, &st);
	ck_assert_uint_ge(st.refused_peers, 2);
	kside_close(&right);
	kside_close(&none);
	kside_close(&wrong);
	kside_close(&r);
	tcp_only_end(&o);
}
END_TEST

Suite *tu_tcp_suite(void)
{
	Suite *s = suite_create("tcp");
	TCase *tc = tcase_create("hostile");

	tcase_set_timeout(tc, TU_TCASE_TIMEOUT);
	tcase_add_loop_test(tc, tcp_bad_stream, 0, 4);
	tcase_add_test(tc, tcp_half_header_stall);
	tcase_add_test(tc, tcp_peer_gone);
	tcase_add_test(tc, tcp_auth_key);
	suite_add_tcase(s, tc);
	return s;
}
