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
