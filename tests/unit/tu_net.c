/*
 * Tests the network transports (TCP, verbs) share: one transport forced
 * for a test, a message that must still get through, a peer that goes
 * away, and fi_domain(3)'s auth_key between domains of their own.
 */
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

/* A peer endpoint that closes: sends to it fail instead of waiting. */
void tu_net_peer_gone(const struct tnbc_xport_ops *ops)
{
	struct fi_cq_err_entry err;
	struct tu_xport_only o;
	struct tu_world w;
	char s[64] = "x";
	int ret = 0;

	tu_xport_only_begin(&o, ops);
	tu_world_open(&w, 2, NULL);
	tu_still_works(&w, R, A, 1);
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
	tu_xport_only_end(&o);
}

/* A domain of its own with one endpoint, its auth_key key (NULL: none),
 * on the transport the test forced. */
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
void tu_net_auth_key(const struct tnbc_xport_ops *ops)
{
	struct fi_tnbc_engine_stats st;
	struct kside r, wrong, none, right;
	struct tu_xport_only o;
	int ret;

	tu_xport_only_begin(&o, ops);
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
	tu_xport_only_end(&o);
}
