/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The verbs transport against hostile peers: a raw rdma_cm client
 * connects to an endpoint's verbs address (read from fi_av_straddr, as
 * any client could) with no request, a request for somebody else, or a
 * good request and then a packet before its hello, or a hello with
 * another magic.  Each costs at most that connection: refused, or
 * disconnected by the endpoint, and counted; the endpoint goes on
 * exchanging messages over verbs with a real peer.  Runs where the
 * domain has verbs (tests/verbs-guest.sh, in the soft-RoCE guest).
 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include "tnbc_unit.h"
#include "tnbc_proto.h"
#include "xport/verbs/tnbc_verbs.h"

enum { R = 0, A = 1 };

/* What the transport's connect request carries. */
#define raw_req tnbc_verbs_req

struct raw {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t buf[256];
};

/* The next connection event within the bound, R's CQ polled meanwhile
 * (its consumer reads what came); -1 when none came. */
static int raw_event(struct tu_world *w, struct raw *r)
{
	for (unsigned ms = 0; ms < TU_WAIT_MS; ms++) {
		struct pollfd p = {.fd = r->ch->fd, .events = POLLIN};
		struct fi_cq_tagged_entry e;
		struct rdma_cm_event *ev;
		int type;

		(void)fi_cq_read(w->ep[R].rx_cq, &e, 1);
		if (poll(&p, 1, 1) <= 0)
			continue;
		ck_assert_int_eq(rdma_get_cm_event(r->ch, &ev), 0);
		type = ev->event;
		rdma_ack_cm_event(ev);
		return type;
	}
	return -1;
}

/* Connects to endpoint e's verbs address with req (NULL: none); returns
 * the event that ends the attempt. */
static int raw_connect(struct tu_world *w, int e, struct raw *r,
		       const struct raw_req *req)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct ibv_qp_init_attr qa = {
		.cap = {.max_send_wr = 4,
			.max_recv_wr = 4,
			.max_send_sge = 1,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	struct rdma_conn_param cp = {.retry_count = 7, .rnr_retry_count = 7};
	char buf[256], ip[64];
	size_t len = sizeof(buf);
	unsigned port;
	const char *t;

	ck_assert_ptr_nonnull(fi_av_straddr(w->av, &w->ep[e].addr, buf, &len));
	t = strstr(buf, "verbs=");
	ck_assert_msg(t != NULL, "no verbs address in %s", buf);
	ck_assert_int_eq(sscanf(t, "verbs=%63[0-9.]:%u", ip, &port), 2);
	ck_assert_int_eq(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	sa.sin_port = htons((uint16_t)port);
	memset(r, 0, sizeof(*r));
	r->ch = rdma_create_event_channel();
	ck_assert_ptr_nonnull(r->ch);
	ck_assert_int_eq(rdma_create_id(r->ch, &r->id, NULL, RDMA_PS_TCP), 0);
	ck_assert_int_eq(
		rdma_resolve_addr(r->id, NULL, (struct sockaddr *)&sa, 2000),
		0);
	ck_assert_int_eq(raw_event(w, r), RDMA_CM_EVENT_ADDR_RESOLVED);
	ck_assert_int_eq(rdma_resolve_route(r->id, 2000), 0);
	ck_assert_int_eq(raw_event(w, r), RDMA_CM_EVENT_ROUTE_RESOLVED);
	r->pd = ibv_alloc_pd(r->id->verbs);
	r->cq = ibv_create_cq(r->id->verbs, 16, NULL, NULL, 0);
	ck_assert_ptr_nonnull(r->pd);
	ck_assert_ptr_nonnull(r->cq);
	r->mr = ibv_reg_mr(r->pd, r->buf, sizeof(r->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	ck_assert_ptr_nonnull(r->mr);
	qa.send_cq = qa.recv_cq = r->cq;
	ck_assert_int_eq(rdma_create_qp(r->id, r->pd, &qa), 0);
	if (req) {
		cp.private_data = req;
		cp.private_data_len = sizeof(*req);
	}
	ck_assert_int_eq(rdma_connect(r->id, &cp), 0);
	return raw_event(w, r);
}

/* Sends len bytes of r->buf with immediate data imm. */
static void raw_send(struct raw *r, uint32_t imm, size_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)r->buf,
			      .length = (uint32_t)len,
			      .lkey = r->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND_WITH_IMM,
				 .send_flags = IBV_SEND_SIGNALED,
				 .imm_data = htonl(imm)},
			   *bad;

	ck_assert_int_eq(ibv_post_send(r->id->qp, &wr, &bad), 0);
}

static void raw_close(struct raw *r)
{
	rdma_destroy_qp(r->id);
	ibv_dereg_mr(r->mr);
	ibv_destroy_cq(r->cq);
	ibv_dealloc_pd(r->pd);
	rdma_destroy_id(r->id);
	rdma_destroy_event_channel(r->ch);
}

/* _i: 0 no request, 1 a request for another endpoint, 2 a packet before
 * any hello, 3 a hello with another magic */
START_TEST(verbs_bad_connect)
{
	struct fi_tnbc_engine_stats st0, st;
	struct raw_req req = {.magic = TNBC_VERBS_MAGIC,
			      .version = TNBC_VERBS_VERSION};
	struct tu_xport_only o;
	struct tu_world w;
	struct raw r;
	int ev;

	tu_xport_only_begin(&o, &tnbc_verbs_ops);
	tu_world_open(&w, 2, NULL);
	tu_still_works(&w, R, A, 1);
	tu_engine_stats(w.d.domain, &st0);
	req.to = _i == 1 ? w.ep[A].name : w.ep[R].name;
	ev = raw_connect(&w, R, &r, _i ? &req : NULL);
	if (_i < 2) {
		ck_assert_msg(
			ev == RDMA_CM_EVENT_REJECTED,
			"case %d: connect ended with %s", _i,
			ev < 0 ? "nothing"
			       : rdma_event_str((enum rdma_cm_event_type)ev));
	} else {
		ck_assert_int_eq(ev, RDMA_CM_EVENT_ESTABLISHED);
		memset(r.buf, 0, sizeof(r.buf));
		if (_i == 2) {
			raw_send(&r, 3, 64); /* a packet */
		} else {
			memcpy(r.buf, "nope", 4);
			raw_send(&r, TNBC_VERBS_HELLO,
				 sizeof(struct tnbc_verbs_hello));
		}
		ev = raw_event(&w, &r);
		ck_assert_msg(ev == RDMA_CM_EVENT_DISCONNECTED,
			      "case %d: the bad connection stayed (%d)", _i,
			      ev);
	}
	tu_engine_stats(w.d.domain, &st);
	ck_assert_uint_gt(st.bad_pkts + st.refused_peers,
			  st0.bad_pkts + st0.refused_peers);
	tu_still_works(&w, R, A, 2);
	raw_close(&r);
	tu_still_works(&w, R, A, 3);
	tu_world_close(&w);
	tu_xport_only_end(&o);
}
END_TEST

/*
 * A connection's identity is its hello's (verbs as TCP, see
 * test_tcp_trust.c).  _i 0: a stranger that names itself, then sends a
 * packet in A's name: dropped and counted (forged_pkts), the receive
 * stays for A's own message; 1: a hello that says it listens on
 * another host than it connects from: refused.
 */
START_TEST(verbs_identity)
{
	struct fi_tnbc_engine_stats st0, st;
	struct raw_req req = {.magic = TNBC_VERBS_MAGIC,
			      .version = TNBC_VERBS_VERSION};
	struct tnbc_verbs_hello h = {.magic = TNBC_VERBS_MAGIC,
				     .version = TNBC_VERBS_VERSION};
	struct fi_cq_tagged_entry e;
	struct tu_xport_only o;
	struct tu_world w;
	struct raw r;
	char buf[16] = "", real[16] = "from A";
	int ev;

	tu_xport_only_begin(&o, &tnbc_verbs_ops);
	tu_world_open(&w, 2, NULL);
	tu_still_works(&w, R, A, 1);
	tu_engine_stats(w.d.domain, &st0);
	req.to = w.ep[R].name;
	ev = raw_connect(&w, R, &r, &req);
	ck_assert_int_eq(ev, RDMA_CM_EVENT_ESTABLISHED);
	h.from = w.ep[A].name;
	h.from.pid = 4242; /* a process of its own */
	h.from.nonce ^= 0x77;
	h.from_addr.family = 4;
	h.from_addr.port = htons(4000);
	if (_i == 1)
		inet_pton(AF_INET, "10.9.9.9", h.from_addr.ip);
	memcpy(r.buf, &h, sizeof(h));
	raw_send(&r, TNBC_VERBS_HELLO, sizeof(h));
	if (_i == 1) {
		ev = raw_event(&w, &r);
		ck_assert_msg(ev == RDMA_CM_EVENT_DISCONNECTED,
			      "a hello of another host stayed (%d)", ev);
		tu_engine_stats(w.d.domain, &st);
		ck_assert_uint_gt(st.refused_peers, st0.refused_peers);
	} else {
		struct tnbc_hdr f = {.version = TNBC_PROTO_VERSION,
				     .type = TNBC_PKT_EAGER,
				     .flags = TNBC_HDR_TAGGED,
				     .payload_len = sizeof(buf),
				     .tag = 21,
				     .size = sizeof(buf),
				     .src = w.ep[A].name};

		ck_assert_int_eq(fi_trecv(w.ep[R].ep, buf, sizeof(buf), NULL,
					  FI_ADDR_UNSPEC, 21, 0, buf),
				 0);
		memcpy(r.buf, &f, sizeof(f));
		memcpy(r.buf + sizeof(f), "forged", 7);
		raw_send(&r, TNBC_VERBS_PKT, sizeof(f) + sizeof(buf));
		for (unsigned ms = 0;; ms++) {
			tu_engine_stats(w.d.domain, &st);
			if (st.forged_pkts > st0.forged_pkts)
				break;
			ck_assert_msg(ms < 10 * TU_WAIT_MS,
				      "the forged packet was not counted");
			ck_assert_int_ne(fi_cq_read(w.ep[R].rx_cq, &e, 1), 1);
			tu_sleep_ms(1);
		}
		ck_assert_int_eq(fi_tsend(w.ep[A].ep, real, sizeof(real), NULL,
					  w.addr[R], 21, real),
				 0);
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_str_eq(buf, "from A");
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	}
	raw_close(&r);
	tu_still_works(&w, R, A, 2);
	tu_world_close(&w);
	tu_xport_only_end(&o);
}
END_TEST

START_TEST(verbs_peer_gone)
{
	tu_net_peer_gone(&tnbc_verbs_ops);
}
END_TEST

/* fi_domain(3)'s auth_key over verbs, as over TCP. */
START_TEST(verbs_auth_key)
{
	tu_net_auth_key(&tnbc_verbs_ops);
}
END_TEST

/* A flood from one domain holds back that connection alone. */
START_TEST(verbs_flood)
{
	tu_net_flood(&tnbc_verbs_ops, 2000, true);
}
END_TEST

Suite *tu_verbs_suite(void)
{
	Suite *s = suite_create("verbs");
	TCase *tc = tcase_create("hostile");

	/* the soft-RoCE guest runs about ten times slower */
	tcase_set_timeout(tc, 10 * TU_TCASE_TIMEOUT);
	tcase_add_loop_test(tc, verbs_bad_connect, 0, 4);
	tcase_add_loop_test(tc, verbs_identity, 0, 2);
	tcase_add_test(tc, verbs_peer_gone);
	tcase_add_test(tc, verbs_auth_key);
	tcase_add_test(tc, verbs_flood);
	suite_add_tcase(s, tc);
	tc = tu_verbs_mr_tcase();
	tcase_set_timeout(tc, 10 * TU_TCASE_TIMEOUT);
	suite_add_tcase(s, tc);
	return s;
}
