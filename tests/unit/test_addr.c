/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Address formats (fi_getinfo(3)'s addr_format): FI_ADDR_STR text that
 * goes back into the very address it came from, and FI_SOCKADDR_IN,
 * whose endpoint is asked who it is over TCP when the address goes into
 * an AV.  Messages then flow, and FI_SOURCE names the sender, exactly
 * as with native addresses; bad text, a port nobody listens at, a
 * listener that is no tnbc and a peer of another job are refused with
 * an error, within the bound.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include "tnbc_unit.h"

static struct fi_info *fmt_hints(uint32_t fmt)
{
	struct fi_info *h = fi_allocinfo();

	ck_assert_ptr_nonnull(h);
	h->addr_format = fmt;
	h->caps = FI_TAGGED | FI_SOURCE;
	return h;
}

/* Whether TCP, the transport socket addresses belong to, is among the
 * domain's (FI_TNBC_XPORTS). */
static bool have_tcp(void)
{
	tu_prov_init();
	for (unsigned i = 0; i < tnbc_env.nxport; i++)
		if (tnbc_env.xport_list[i] == &tnbc_tcp_ops)
			return true;
	return false;
}

/* Every native address of a world prints as text that reads back into
 * the same bytes. */
START_TEST(addr_str_round_trip)
{
	struct tu_world w;
	struct tnbc_addr back, svc;
	char text[512];

	tu_world_open(&w, 2, NULL);
	for (size_t i = 0; i < w.n; i++) {
		size_t n = tnbc_addr_print(&w.ep[i].addr, text, sizeof(text));

		ck_assert_uint_eq(n, strlen(text));
		ck_assert_msg(!strncmp(text, "fi_addr_tnbc://", 15), "%s",
			      text);
		ck_assert_int_eq(tnbc_addr_import(NULL, FI_ADDR_STR, text, 0,
						  false, &back),
				 0);
		ck_assert_mem_eq(&back, &w.ep[i].addr, sizeof(back));
	}
	/* a service, with each network transport's address */
	ck_assert_int_eq(tnbc_addr_svc("127.0.0.1", "7000", false, &svc), 0);
	tnbc_addr_print(&svc, text, sizeof(text));
	ck_assert_ptr_nonnull(strstr(text, "&svc"));
	ck_assert_int_eq(
		tnbc_addr_import(NULL, FI_ADDR_STR, text, 0, false, &back), 0);
	ck_assert_mem_eq(&back, &svc, sizeof(back));
	tu_world_close(&w);
}
END_TEST

/* Text that is no address is refused, whole or in part. */
START_TEST(addr_str_bad)
{
	static const char *const bad[] = {
		"",
		"garbage",
		"fi_addr_tnbc://",
		"fi_addr_tnbc://zz/1/2/3?v=8",
		"fi_addr_tnbc://0/1/2/3",
		"fi_addr_tnbc://0/1/2/3?shm",
		"fi_addr_tnbc://0/99999999999/2/3?v=8&shm",
		"fi_addr_tnbc://0/-1/2/3?v=8&shm",
		"fi_addr_tnbc://0/1/2/3?v=8&tcp=10.0.0.1",
		"fi_addr_tnbc://0/1/2/3?v=8&tcp=10.0.0.1:70000",
		"fi_addr_tnbc://0/1/2/3?v=8&tcp=300.0.0.1:7",
		"fi_addr_tnbc://0/1/2/3?v=8&shm=1.2.3.4:5",
		"fi_sockaddr_in://10.0.0.1",
		"fi_sockaddr_in://10.0.0.1:x",
		"fi_foo://10.0.0.1:7",
	};
	struct tnbc_addr a;
	char unterminated[8];

	tu_prov_init();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(tnbc_addr_import(NULL, FI_ADDR_STR, bad[i], 0,
					       false, &a) == -FI_EINVAL,
			      "accepted %s", bad[i]);
	/* a string with no NUL within its length */
	memcpy(unterminated, "fi_addr_", sizeof(unterminated));
	ck_assert_int_eq(tnbc_addr_import(NULL, FI_ADDR_STR, unterminated,
					  sizeof(unterminated), false, &a),
			 -FI_EINVAL);
	/* hints in a format tnbc does not offer */
	{
		struct fi_info *h = fmt_hints(FI_SOCKADDR_IN6), *info = NULL;

		ck_assert_int_eq(tnbc_getinfo(FI_VERSION(1, 17), NULL, NULL, 0,
					      h, &info),
				 -FI_ENODATA);
		fi_freeinfo(h);
	}
}
END_TEST

/* Receives one tagged message at w.ep[r] from w.ep[s], and checks that
 * FI_SOURCE names the sender's fi_addr. */
static void send_check_source(struct tu_world *w, int s, int r, uint64_t tag)
{
	char out[32] = "by any name", in[32] = "";
	struct fi_cq_tagged_entry e;
	fi_addr_t src = FI_ADDR_NOTAVAIL;

	ck_assert_int_eq(fi_trecv(w->ep[r].ep, in, sizeof(in), NULL,
				  FI_ADDR_UNSPEC, tag, 0, in),
			 0);
	ck_assert_int_eq(fi_tsend(w->ep[s].ep, out, sizeof(out), NULL,
				  w->addr[r], tag, out),
			 0);
	tu_cq_expect(w->ep[s].tx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, out);
	tu_cq_expect(w->ep[r].rx_cq, &e, &src);
	ck_assert_ptr_eq(e.op_context, in);
	ck_assert_str_eq(in, out);
	ck_assert_uint_eq(src, w->addr[s]);
}

/* A world of FI_ADDR_STR addresses: fi_getinfo's, fi_getname's,
 * fi_av_insert's (char **), fi_av_lookup's and fi_av_straddr's are
 * text, and fi_av_insertsvc takes one as its node. */
START_TEST(addr_str_world)
{
	struct fi_info *h = fmt_hints(FI_ADDR_STR);
	struct tu_world_opts o = {.hints = h};
	struct tu_world w;
	char buf[512], small[16];
	size_t len;
	fi_addr_t again;

	tu_world_open(&w, 2, &o);
	ck_assert_uint_eq(w.d.info->addr_format, FI_ADDR_STR);
	ck_assert_ptr_nonnull(w.d.info->src_addr);
	ck_assert_uint_eq(w.d.info->src_addrlen,
			  strlen(w.d.info->src_addr) + 1);
	for (int i = 0; i < 2; i++) {
		const char *name = (const char *)w.ep[i].faddr;

		ck_assert_msg(!strncmp(name, "fi_addr_tnbc://", 15), "%s",
			      name);
		ck_assert_uint_eq(w.ep[i].faddr_len, strlen(name) + 1);
		len = sizeof(buf);
		ck_assert_int_eq(fi_av_lookup(w.av, w.addr[i], buf, &len), 0);
		ck_assert_str_eq(buf, name);
		len = sizeof(buf);
		ck_assert_ptr_eq(fi_av_straddr(w.av, name, buf, &len), buf);
		ck_assert_str_eq(buf, name);
	}
	/* a short buffer: cut, still a string, and the length needed */
	len = sizeof(small);
	ck_assert_int_eq(fi_getname(&w.ep[0].ep->fid, small, &len),
			 -FI_ETOOSMALL);
	ck_assert_uint_eq(len, w.ep[0].faddr_len);
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
	send_check_source(&w, 0, 1, 11);
	send_check_source(&w, 1, 0, 12);
	/* the node of fi_av_insertsvc */
	ck_assert_int_eq(fi_av_insertsvc(w.av, (const char *)w.ep[1].faddr,
					 NULL, &again, 0, NULL),
			 1);
	len = sizeof(buf);
	ck_assert_int_eq(fi_av_lookup(w.av, again, buf, &len), 0);
	ck_assert_str_eq(buf, (const char *)w.ep[1].faddr);
	tu_world_close(&w);
	fi_freeinfo(h);
}
END_TEST

/* fi_getinfo's node may be an FI_ADDR_STR address, and the addresses
 * it gives back are in the format asked for. */
START_TEST(addr_getinfo_formats)
{
	struct fi_info *h = fmt_hints(FI_ADDR_STR), *info = NULL;
	struct tnbc_addr a;

	tu_prov_init();
	ck_assert_int_eq(tnbc_getinfo(FI_VERSION(1, 17),
				      "fi_sockaddr_in://127.0.0.1:7123", NULL,
				      0, h, &info),
			 0);
	ck_assert_ptr_nonnull(info->dest_addr);
	ck_assert_int_eq(tnbc_addr_import(NULL, FI_ADDR_STR, info->dest_addr,
					  info->dest_addrlen, false, &a),
			 0);
	ck_assert_uint_eq(a.name.kind, TNBC_NAME_SVC);
	ck_assert_uint_eq(a.name.uid, 7123);
	if (have_tcp())
		ck_assert_ptr_nonnull(
			strstr(info->dest_addr, "&tcp=127.0.0.1:7123"));
	fi_freeinfo(info);
	fi_freeinfo(h);

	h = fmt_hints(FI_SOCKADDR_IN);
	info = NULL;
	if (!have_tcp()) {
		/* no transport knows endpoints by socket addresses */
		ck_assert_int_eq(tnbc_getinfo(FI_VERSION(1, 17), "127.0.0.1",
					      "7123", 0, h, &info),
				 -FI_ENODATA);
	} else {
		const struct sockaddr_in *sin;

		ck_assert_int_eq(tnbc_getinfo(FI_VERSION(1, 17), "127.0.0.1",
					      "7123", 0, h, &info),
				 0);
		ck_assert_uint_eq(info->addr_format, FI_SOCKADDR_IN);
		ck_assert_uint_eq(info->dest_addrlen, sizeof(*sin));
		sin = info->dest_addr;
		ck_assert_uint_eq(sin->sin_family, AF_INET);
		ck_assert_uint_eq(ntohs(sin->sin_port), 7123);
		ck_assert_uint_eq(ntohl(sin->sin_addr.s_addr), INADDR_LOOPBACK);
		ck_assert_uint_eq(info->src_addrlen, sizeof(*sin));
		fi_freeinfo(info);
	}
	fi_freeinfo(h);
}
END_TEST

/* A world of FI_SOCKADDR_IN addresses: inserting one asks the endpoint
 * listening there who it is, and the AV then holds its whole name, so
 * that messages flow (over whichever transport reaches it) and
 * FI_SOURCE names the sender. */
START_TEST(addr_sockaddr_world)
{
	struct fi_info *h = fmt_hints(FI_SOCKADDR_IN);
	struct tu_world_opts o = {.hints = h};
	struct tu_world w;
	struct sockaddr_in sin;
	char buf[128], want[128], ip[INET_ADDRSTRLEN];
	size_t len;

	if (!have_tcp()) {
		fi_freeinfo(h);
		return; /* addr_getinfo_formats checks the refusal */
	}
	tu_world_open(&w, 2, &o);
	for (int i = 0; i < 2; i++) {
		struct tnbc_av_entry *e = tnbc_av_get(
			tnbc_container_of(w.av, struct tnbc_av, av_fid),
			w.addr[i]);

		ck_assert_uint_eq(w.ep[i].faddr_len, sizeof(sin));
		memcpy(&sin, w.ep[i].faddr, sizeof(sin));
		ck_assert_uint_eq(sin.sin_family, AF_INET);
		ck_assert_uint_ne(sin.sin_port, 0);
		/* the lookup gave the whole name */
		ck_assert_ptr_nonnull(e);
		ck_assert_mem_eq(&e->name, &w.ep[i].name, sizeof(e->name));
		len = sizeof(sin);
		ck_assert_int_eq(fi_av_lookup(w.av, w.addr[i], &sin, &len), 0);
		ck_assert_uint_eq(len, sizeof(sin));
		ck_assert_mem_eq(&sin, w.ep[i].faddr, sizeof(sin));
		len = sizeof(buf);
		fi_av_straddr(w.av, &sin, buf, &len);
		inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip));
		snprintf(want, sizeof(want), "fi_sockaddr_in://%s:%u", ip,
			 ntohs(sin.sin_port));
		ck_assert_str_eq(buf, want);
	}
	send_check_source(&w, 0, 1, 21);
	send_check_source(&w, 1, 0, 22);
	tu_world_close(&w);
	fi_freeinfo(h);
}
END_TEST

/* A listener that is no tnbc: it accepts, and then (mode 1) says
 * something else, or (mode 0) nothing. */
struct fake {
	int lfd;
	int mode;
	pthread_t t;
	struct sockaddr_in sa;
};

static void *fake_run(void *arg)
{
	struct fake *f = arg;
	int fd = accept(f->lfd, NULL, NULL);
	char junk[80];

	if (fd < 0)
		return NULL;
	if (f->mode) {
		memset(junk, 'H', sizeof(junk));
		(void)!send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
	}
	/* hold the connection until the asker gives up */
	struct pollfd p = {.fd = fd, .events = POLLIN};

	(void)poll(&p, 1, 20000);
	close(fd);
	return NULL;
}

static void fake_open(struct fake *f, int mode)
{
	socklen_t sl = sizeof(f->sa);

	f->mode = mode;
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(f->lfd, 0);
	memset(&f->sa, 0, sizeof(f->sa));
	f->sa.sin_family = AF_INET;
	f->sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&f->sa, sizeof(f->sa)),
			 0);
	ck_assert_int_eq(listen(f->lfd, 4), 0);
	ck_assert_int_eq(getsockname(f->lfd, (struct sockaddr *)&f->sa, &sl),
			 0);
	if (mode >= 0)
		ck_assert_int_eq(pthread_create(&f->t, NULL, fake_run, f), 0);
}

/* Inserting socket addresses that name no tnbc endpoint: each is
 * refused within the lookup's bound (FI_TNBC_TCP_TIMEOUT_MS, here its
 * least, 1 s), with an error per address, and the good one among them
 * goes in.  _i: 0 nobody listens, 1 a listener that says nothing, 2
 * one that says something else. */
START_TEST(addr_sockaddr_nobody)
{
	struct fi_info *h = fmt_hints(FI_SOCKADDR_IN);
	struct tu_world_opts o = {.hints = h};
	struct tu_world w;
	struct sockaddr_in sin[2];
	fi_addr_t got[2];
	int errs[2] = {1, 1};
	size_t saved = tnbc_env.tcp_timeout_ms;
	struct fake f;
	uint64_t t0, took;

	if (!have_tcp()) {
		fi_freeinfo(h);
		return;
	}
	tu_world_open(&w, 1, &o);
	fake_open(&f, _i ? _i - 1 : -1);
	if (!_i)
		close(f.lfd); /* the port is free again: nobody listens */
	sin[0] = f.sa;
	memcpy(&sin[1], w.ep[0].faddr, sizeof(sin[1]));
	tnbc_env.tcp_timeout_ms = 1000;
	t0 = tu_now_ms();
	ck_assert_int_eq(fi_av_insert(w.av, sin, 2, got, FI_SYNC_ERR, errs), 1);
	took = tu_now_ms() - t0;
	tnbc_env.tcp_timeout_ms = saved;
	ck_assert_int_eq(errs[0], -FI_EHOSTUNREACH);
	ck_assert_uint_eq(got[0], FI_ADDR_NOTAVAIL);
	ck_assert_int_eq(errs[1], 0);
	ck_assert_uint_ne(got[1], FI_ADDR_NOTAVAIL);
	/* the bound, with room for a loaded machine */
	ck_assert_msg(took < 1000 + TU_WAIT_MS, "took %llu ms",
		      (unsigned long long)took);
	if (_i) {
		shutdown(f.lfd, SHUT_RDWR);
		pthread_join(f.t, NULL);
		close(f.lfd);
	}
	tu_world_close(&w);
	fi_freeinfo(h);
}
END_TEST

/* A lookup from a domain of another job (another auth_key, or none) is
 * refused; the same key is answered. */
START_TEST(addr_sockaddr_auth_key)
{
	struct tu_kside r, wrong, right;
	fi_addr_t a;
	int err = 1;

	if (!have_tcp())
		return;
	tu_kside_open(&r, "job-7", FI_SOCKADDR_IN);
	tu_kside_open(&wrong, _i ? NULL : "job-8", FI_SOCKADDR_IN);
	tu_kside_open(&right, "job-7", FI_SOCKADDR_IN);
	ck_assert_uint_eq(r.addrlen, sizeof(struct sockaddr_in));
	ck_assert_int_eq(
		fi_av_insert(wrong.av, r.addr, 1, &a, FI_SYNC_ERR, &err), 0);
	ck_assert_int_eq(err, -FI_EACCES);
	ck_assert_int_eq(
		fi_av_insert(right.av, r.addr, 1, &a, FI_SYNC_ERR, &err), 1);
	ck_assert_int_eq(err, 0);
	tu_kside_close(&right);
	tu_kside_close(&wrong);
	tu_kside_close(&r);
}
END_TEST

/* A service inserted by its number (fi_av_insertsvc, which knows no
 * process) is the source of what that service's endpoint sends. */
START_TEST(addr_svc_source)
{
	struct tnbc_addr svc;
	struct fi_info *h = fmt_hints(FI_FORMAT_UNSPEC);
	struct tu_world_opts o = {.hints = h};
	struct tu_world srv, cli;
	struct fi_cq_tagged_entry e;
	char port[16], in[16] = "", out[16] = "from the service";
	fi_addr_t to_srv, to_cli, src = FI_ADDR_NOTAVAIL;

	snprintf(port, sizeof(port), "%u", tu_tcp_free_port());
	tu_prov_init();
	ck_assert_int_eq(tnbc_addr_svc(NULL, port, true, &svc), 0);
	h->src_addr = malloc(sizeof(svc));
	memcpy(h->src_addr, &svc, sizeof(svc));
	h->src_addrlen = sizeof(svc);
	tu_world_open(&srv, 1, &o);
	ck_assert_uint_eq(srv.ep[0].name.kind, TNBC_NAME_SVC);
	tu_world_open(&cli, 1, NULL);
	ck_assert_int_eq(fi_av_insertsvc(cli.av, NULL, port, &to_srv, 0, NULL),
			 1);
	ck_assert_int_eq(
		fi_av_insert(srv.av, &cli.ep[0].addr, 1, &to_cli, 0, NULL), 1);
	ck_assert_int_eq(fi_trecv(cli.ep[0].ep, in, sizeof(in), NULL,
				  FI_ADDR_UNSPEC, 5, 0, in),
			 0);
	ck_assert_int_eq(
		fi_tsend(srv.ep[0].ep, out, sizeof(out), NULL, to_cli, 5, out),
		0);
	tu_cq_expect(srv.ep[0].tx_cq, &e, NULL);
	tu_cq_expect(cli.ep[0].rx_cq, &e, &src);
	ck_assert_mem_eq(in, out, sizeof(in));
	ck_assert_uint_eq(src, to_srv);
	/* and a directed receive from it matches */
	ck_assert_int_eq(
		fi_trecv(cli.ep[0].ep, in, sizeof(in), NULL, to_srv, 6, 0, in),
		0);
	ck_assert_int_eq(
		fi_tsend(srv.ep[0].ep, out, sizeof(out), NULL, to_cli, 6, out),
		0);
	tu_cq_expect(srv.ep[0].tx_cq, &e, NULL);
	tu_cq_expect(cli.ep[0].rx_cq, &e, NULL);
	tu_world_close(&cli);
	tu_world_close(&srv);
	fi_freeinfo(h);
}
END_TEST

Suite *tu_addr_suite(void)
{
	Suite *s = suite_create("addr");
	TCase *tc = tcase_create("formats");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, addr_str_round_trip);
	tcase_add_test(tc, addr_str_bad);
	tcase_add_test(tc, addr_str_world);
	tcase_add_test(tc, addr_getinfo_formats);
	tcase_add_test(tc, addr_sockaddr_world);
	tcase_add_loop_test(tc, addr_sockaddr_nobody, 0, 3);
	tcase_add_loop_test(tc, addr_sockaddr_auth_key, 0, 2);
	tcase_add_test(tc, addr_svc_source);
	suite_add_tcase(s, tc);
	return s;
}
