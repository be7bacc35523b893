/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Address vectors: insert, lookup, remove, straddr, the reverse lookup
 * that FI_SOURCE and directed receives rely on, and error handling.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tnbc_unit.h"

static struct tnbc_addr mkname(uint16_t kind, uint32_t pid, uint32_t uid)
{
	struct tnbc_addr n;

	memset(&n, 0, sizeof(n));
	n.name.version = TNBC_PROTO_VERSION;
	n.name.xports = (uint16_t)TNBC_XPORT_BIT(tnbc_env.xport->id);
	n.name.kind = kind;
	n.name.pid = pid;
	n.name.uid = uid;
	return n;
}

static struct fid_av *av_open(struct tu_dom *d, enum fi_av_type type)
{
	struct fi_av_attr attr = {.type = type};
	struct fid_av *av = NULL;

	ck_assert_int_eq(fi_av_open(d->domain, &attr, &av, NULL), 0);
	ck_assert_ptr_nonnull(av);
	return av;
}

static struct tnbc_av *tav(struct fid_av *av)
{
	return tnbc_container_of(av, struct tnbc_av, av_fid);
}

/* _i: 0 = FI_AV_TABLE, 1 = FI_AV_MAP */
static enum fi_av_type loop_type(int i)
{
	return i ? FI_AV_MAP : FI_AV_TABLE;
}

START_TEST(av_insert_lookup)
{
	struct tu_dom d;
	struct fid_av *av;
	struct tnbc_addr names[3] = {
		mkname(TNBC_NAME_PID, 100, 1),
		mkname(TNBC_NAME_PID, 100, 2),
		mkname(TNBC_NAME_SVC, 0, 5555),
	};
	fi_addr_t addr[3];
	struct tnbc_addr out;
	size_t len;

	tu_dom_open(&d, NULL);
	av = av_open(&d, loop_type(_i));
	ck_assert_int_eq(fi_av_insert(av, names, 3, addr, 0, NULL), 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_ne(addr[i], FI_ADDR_NOTAVAIL);
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(addr[i], addr[j]);
		memset(&out, 0xff, sizeof(out));
		len = sizeof(out);
		ck_assert_int_eq(fi_av_lookup(av, addr[i], &out, &len), 0);
		ck_assert_uint_eq(len, sizeof(struct tnbc_addr));
		ck_assert_mem_eq(&out, &names[i], sizeof(out));
	}
	if (loop_type(_i) == FI_AV_TABLE)
		for (int i = 0; i < 3; i++)
			ck_assert_uint_eq(addr[i], (fi_addr_t)i);

	/* a short buffer gets a truncated copy and the real length */
	{
		uint8_t small[8];

		len = sizeof(small);
		ck_assert_int_eq(fi_av_lookup(av, addr[1], small, &len), 0);
		ck_assert_uint_eq(len, sizeof(struct tnbc_addr));
		ck_assert_mem_eq(small, &names[1], sizeof(small));
		/* size query */
		len = 0;
		ck_assert_int_eq(fi_av_lookup(av, addr[1], NULL, &len), 0);
		ck_assert_uint_eq(len, sizeof(struct tnbc_addr));
	}

	/* insertsvc adds a service name */
	{
		fi_addr_t a = FI_ADDR_NOTAVAIL;

		ck_assert_int_eq(fi_av_insertsvc(av, NULL, "6000", &a, 0, NULL),
				 1);
		len = sizeof(out);
		ck_assert_int_eq(fi_av_lookup(av, a, &out, &len), 0);
		ck_assert_int_eq(out.name.kind, TNBC_NAME_SVC);
		ck_assert_uint_eq(out.name.uid, 6000);
		ck_assert_int_eq(fi_av_insertsvc(av, NULL, "x6", &a, 0, NULL),
				 -FI_EINVAL);
	}
	ck_assert_int_eq(fi_close(&av->fid), 0);
	tu_dom_close(&d);
}
END_TEST

START_TEST(av_remove)
{
	struct tu_dom d;
	struct fid_av *av;
	struct tnbc_addr names[3] = {
		mkname(TNBC_NAME_PID, 200, 1),
		mkname(TNBC_NAME_PID, 200, 2),
		mkname(TNBC_NAME_PID, 200, 3),
	};
	fi_addr_t addr[3], bogus = 12345;
	struct tnbc_addr out;
	size_t len = sizeof(out);

	tu_dom_open(&d, NULL);
	av = av_open(&d, loop_type(_i));
	ck_assert_int_eq(fi_av_insert(av, names, 3, addr, 0, NULL), 3);
	ck_assert_int_eq(fi_av_remove(av, &addr[1], 1, 0), 0);
	ck_assert_int_lt(fi_av_lookup(av, addr[1], &out, &len), 0);
	/* the others are untouched */
	len = sizeof(out);
	ck_assert_int_eq(fi_av_lookup(av, addr[0], &out, &len), 0);
	ck_assert_mem_eq(&out, &names[0], sizeof(out));
	len = sizeof(out);
	ck_assert_int_eq(fi_av_lookup(av, addr[2], &out, &len), 0);
	ck_assert_mem_eq(&out, &names[2], sizeof(out));
	/* the reverse lookup forgets it too */
	ck_assert_uint_eq(tnbc_av_reverse(tav(av), &names[1].name),
			  FI_ADDR_NOTAVAIL);
	ck_assert_uint_eq(tnbc_av_reverse(tav(av), &names[2].name), addr[2]);
	/* unknown and removed addresses */
	len = sizeof(out);
	ck_assert_int_lt(fi_av_lookup(av, bogus, &out, &len), 0);
	len = sizeof(out);
	ck_assert_int_lt(fi_av_lookup(av, FI_ADDR_NOTAVAIL, &out, &len), 0);
	ck_assert_int_lt(fi_av_remove(av, &bogus, 1, 0), 0);
	ck_assert_int_lt(fi_av_remove(av, &addr[1], 1, 0), 0);
	ck_assert_int_eq(fi_av_remove(av, &addr[0], 1, 0), 0);
	len = sizeof(out);
	ck_assert_int_lt(fi_av_lookup(av, addr[0], &out, &len), 0);

	/* inserting a removed name again gives a working address */
	{
		fi_addr_t a;

		ck_assert_int_eq(fi_av_insert(av, &names[1], 1, &a, 0, NULL),
				 1);
		len = sizeof(out);
		ck_assert_int_eq(fi_av_lookup(av, a, &out, &len), 0);
		ck_assert_mem_eq(&out, &names[1], sizeof(out));
		ck_assert_uint_eq(tnbc_av_reverse(tav(av), &names[1].name), a);
	}
	ck_assert_int_eq(fi_close(&av->fid), 0);
	tu_dom_close(&d);
}
END_TEST

START_TEST(av_straddr)
{
	struct tu_dom d;
	struct fid_av *av;
	struct tnbc_addr svc = mkname(TNBC_NAME_SVC, 0, 1234);
	struct tnbc_addr pid = mkname(TNBC_NAME_PID, 4242, 7);
	char buf[128], want[128];
	size_t len;
	const char *s;

	pid.name.nonce = 0xa5;
	pid.name.host = 0xbeef;
	tu_dom_open(&d, NULL);
	av = av_open(&d, loop_type(_i));
	len = sizeof(buf);
	s = fi_av_straddr(av, &svc, buf, &len);
	ck_assert_ptr_eq(s, buf);
	/* host, pid, uid and nonce; the protocol's version, whether it is
	 * a service, then the transports that reach it (a network one
	 * with its address, none in these names) */
	snprintf(want, sizeof(want), "fi_addr_tnbc://0/0/1234/0?v=%u&svc&%s",
		 TNBC_PROTO_VERSION, tnbc_env.xport->name);
	ck_assert_str_eq(buf, want);
	ck_assert_uint_eq(len, strlen(want) + 1);

	len = sizeof(buf);
	s = fi_av_straddr(av, &pid, buf, &len);
	ck_assert_ptr_eq(s, buf);
	snprintf(want, sizeof(want), "fi_addr_tnbc://beef/4242/7/a5?v=%u&%s",
		 TNBC_PROTO_VERSION, tnbc_env.xport->name);
	ck_assert_str_eq(buf, want);
	ck_assert_uint_eq(len, strlen(want) + 1);

	/* a short buffer is truncated, NUL-terminated, and len tells the
	 * size needed */
	memset(buf, 'X', sizeof(buf));
	len = 6;
	s = fi_av_straddr(av, &svc, buf, &len);
	ck_assert_ptr_eq(s, buf);
	ck_assert_str_eq(buf, "fi_ad");
	snprintf(want, sizeof(want), "fi_addr_tnbc://0/0/1234/0?v=%u&svc&%s",
		 TNBC_PROTO_VERSION, tnbc_env.xport->name);
	ck_assert_uint_eq(len, strlen(want) + 1);
	ck_assert_int_eq(buf[6], 'X');
	ck_assert_int_eq(fi_close(&av->fid), 0);
	tu_dom_close(&d);
}
END_TEST

START_TEST(av_malformed_name)
{
	struct tu_dom d;
	struct fid_av *av;
	struct tnbc_addr names[4] = {
		mkname(TNBC_NAME_PID, 300, 1),
		mkname(TNBC_NAME_PID, 300, 2), /* wrong version below */
		mkname(TNBC_NAME_PID, 300, 3),
		mkname(TNBC_NAME_PID, 300, 4), /* wrong kind below */
	};
	fi_addr_t addr[4];
	int errs[4];
	struct tnbc_addr out;
	size_t len;

	names[1].name.version = TNBC_PROTO_VERSION + 1;
	names[3].name.kind = 9;
	tu_dom_open(&d, NULL);
	av = av_open(&d, loop_type(_i));
	memset(errs, 0x55, sizeof(errs));
	ck_assert_int_eq(fi_av_insert(av, names, 4, addr, FI_SYNC_ERR, errs),
			 2);
	ck_assert_int_eq(errs[0], 0);
	ck_assert_int_ne(errs[1], 0);
	ck_assert_int_eq(errs[2], 0);
	ck_assert_int_ne(errs[3], 0);
	ck_assert_uint_eq(addr[1], FI_ADDR_NOTAVAIL);
	ck_assert_uint_eq(addr[3], FI_ADDR_NOTAVAIL);
	ck_assert_uint_ne(addr[0], FI_ADDR_NOTAVAIL);
	ck_assert_uint_ne(addr[2], FI_ADDR_NOTAVAIL);
	ck_assert_uint_ne(addr[0], addr[2]);
	len = sizeof(out);
	ck_assert_int_eq(fi_av_lookup(av, addr[2], &out, &len), 0);
	ck_assert_mem_eq(&out, &names[2], sizeof(out));
	ck_assert_uint_eq(tnbc_av_reverse(tav(av), &names[1].name),
			  FI_ADDR_NOTAVAIL);

	/* without FI_SYNC_ERR the good ones still go in */
	{
		struct tnbc_addr two[2] = {mkname(TNBC_NAME_PID, 301, 1),
					   mkname(TNBC_NAME_PID, 301, 2)};
		fi_addr_t a[2];

		two[0].name.xports =
			TNBC_XPORT_BIT(7); /* a transport this domain lacks */
		ck_assert_int_eq(fi_av_insert(av, two, 2, a, 0, NULL), 1);
		ck_assert_uint_eq(a[0], FI_ADDR_NOTAVAIL);
		ck_assert_uint_ne(a[1], FI_ADDR_NOTAVAIL);
	}
	ck_assert_int_eq(fi_close(&av->fid), 0);
	tu_dom_close(&d);
}
END_TEST

/* Thousands of names: the reverse hash grows several times. */
START_TEST(av_reverse_many)
{
	enum { N = 5000 };
	struct tu_dom d;
	struct fid_av *av;
	struct tnbc_addr *names = calloc(N, sizeof(*names));
	fi_addr_t *addr = calloc(N, sizeof(*addr));
	size_t done = 0;

	ck_assert_ptr_nonnull(names);
	ck_assert_ptr_nonnull(addr);
	for (size_t i = 0; i < N; i++)
		names[i] =
			(i % 3 == 2)
				? mkname(TNBC_NAME_SVC, 0, (uint32_t)(9000 + i))
				: mkname(TNBC_NAME_PID,
					 (uint32_t)(1000 + i % 7), (uint32_t)i);
	tu_dom_open(&d, NULL);
	av = av_open(&d, loop_type(_i));
	/* uneven batches, as an application bootstrapping in steps would */
	while (done < N) {
		size_t batch = 1 + (done * 7) % 613;

		if (batch > N - done)
			batch = N - done;
		ck_assert_int_eq(fi_av_insert(av, &names[done], batch,
					      &addr[done], 0, NULL),
				 (int)batch);
		done += batch;
	}
	for (size_t i = 0; i < N; i++) {
		fi_addr_t r = tnbc_av_reverse(tav(av), &names[i].name);

		ck_assert_msg(r == addr[i], "name %zu: reverse %llu, want %llu",
			      i, (unsigned long long)r,
			      (unsigned long long)addr[i]);
		ck_assert_ptr_nonnull(tnbc_av_get(tav(av), addr[i]));
	}
	/* names never inserted are not found */
	for (uint32_t i = 0; i < 100; i++) {
		struct tnbc_addr n = mkname(TNBC_NAME_PID, 77777, i);

		ck_assert_uint_eq(tnbc_av_reverse(tav(av), &n.name),
				  FI_ADDR_NOTAVAIL);
	}
	{
		struct tnbc_addr n = mkname(TNBC_NAME_SVC, 0, 9000 + N + 3);

		ck_assert_uint_eq(tnbc_av_reverse(tav(av), &n.name),
				  FI_ADDR_NOTAVAIL);
	}
	/* removing every other one leaves the rest reachable */
	for (size_t i = 0; i < N; i += 2)
		ck_assert_int_eq(fi_av_remove(av, &addr[i], 1, 0), 0);
	for (size_t i = 0; i < N; i++)
		ck_assert_uint_eq(tnbc_av_reverse(tav(av), &names[i].name),
				  (i % 2) ? addr[i] : FI_ADDR_NOTAVAIL);
	ck_assert_int_eq(fi_close(&av->fid), 0);
	tu_dom_close(&d);
	free(names);
	free(addr);
}
END_TEST

/*
 * The same name inserted twice gets two addresses.  Removing either one
 * must leave the name resolvable to the other: FI_SOURCE and directed
 * receives use this reverse lookup for every incoming message.
 */
START_TEST(av_dup_insert_remove)
{
	struct tu_dom d;
	struct fid_av *av;
	struct tnbc_addr x = mkname(TNBC_NAME_PID, 500, 1);
	fi_addr_t a0, a1;
	fi_addr_t r;

	tu_dom_open(&d, NULL);
	av = av_open(&d, loop_type(_i));
	ck_assert_int_eq(fi_av_insert(av, &x, 1, &a0, 0, NULL), 1);
	ck_assert_int_eq(fi_av_insert(av, &x, 1, &a1, 0, NULL), 1);
	r = tnbc_av_reverse(tav(av), &x.name);
	ck_assert(r == a0 || r == a1);
	ck_assert_int_eq(fi_av_remove(av, &a1, 1, 0), 0);
	r = tnbc_av_reverse(tav(av), &x.name);
	ck_assert_msg(r == a0,
		      "after removing the duplicate, the name resolves to "
		      "%llu instead of the remaining address %llu",
		      (unsigned long long)r, (unsigned long long)a0);
	ck_assert_int_eq(fi_close(&av->fid), 0);
	tu_dom_close(&d);
}
END_TEST

START_TEST(av_bad_flags)
{
	struct tu_dom d;
	struct fid_av *av;
	struct tnbc_addr n = mkname(TNBC_NAME_PID, 400, 1);
	fi_addr_t a = 0;

	tu_dom_open(&d, NULL);
	av = av_open(&d, loop_type(_i));
	ck_assert_int_eq(fi_av_insert(av, &n, 1, &a, 1ULL << 40, NULL),
			 -FI_EINVAL);
	ck_assert_int_eq(fi_av_insert(av, &n, 1, &a, FI_SYMMETRIC, NULL),
			 -FI_EINVAL);
	ck_assert_int_eq(fi_av_insert(av, NULL, 1, &a, 0, NULL), -FI_EINVAL);
	/* FI_MORE is a hint and must be accepted */
	ck_assert_int_eq(fi_av_insert(av, &n, 1, &a, FI_MORE, NULL), 1);
	ck_assert_int_eq(fi_av_remove(av, &a, 1, 1ULL << 40), -FI_EINVAL);
	/* the address survived the refused remove */
	ck_assert_ptr_nonnull(tnbc_av_get(tav(av), a));
	ck_assert_int_eq(fi_close(&av->fid), 0);

	/* fi_av_open: unsupported flags and types */
	{
		struct fi_av_attr attr = {.type = loop_type(_i),
					  .flags = FI_EVENT};

		av = NULL;
		ck_assert_int_eq(fi_av_open(d.domain, &attr, &av, NULL),
				 -FI_EINVAL);
		attr.flags = 1ULL << 40;
		ck_assert_int_eq(fi_av_open(d.domain, &attr, &av, NULL),
				 -FI_EINVAL);
		attr.flags = 0;
		attr.type = (enum fi_av_type)42;
		ck_assert_int_eq(fi_av_open(d.domain, &attr, &av, NULL),
				 -FI_EINVAL);
		ck_assert_ptr_null(av);
	}
	tu_dom_close(&d);
}
END_TEST

START_TEST(av_close_busy)
{
	struct tu_world w;

	tu_world_open(&w, 2, NULL);
	ck_assert_int_eq(fi_close(&w.av->fid), -FI_EBUSY);
	/* still usable after the refused close */
	{
		struct tnbc_addr out;
		size_t len = sizeof(out);

		ck_assert_int_eq(fi_av_lookup(w.av, w.addr[1], &out, &len), 0);
		ck_assert_mem_eq(&out, &w.ep[1].addr, sizeof(out));
	}
	/* and the domain refuses to close under its objects */
	ck_assert_int_eq(fi_close(&w.d.domain->fid), -FI_EBUSY);
	ck_assert_int_eq(fi_close(&w.ep[0].ep->fid), 0);
	/* ep[1] still holds it */
	ck_assert_int_eq(fi_close(&w.av->fid), -FI_EBUSY);
	ck_assert_int_eq(fi_close(&w.ep[1].ep->fid), 0);
	ck_assert_int_eq(fi_close(&w.av->fid), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(fi_close(&w.ep[i].tx_cq->fid), 0);
		ck_assert_int_eq(fi_close(&w.ep[i].rx_cq->fid), 0);
	}
	tu_dom_close(&w.d);
}
END_TEST

/* An AV bound to an endpoint that is not enabled is also in use. */
START_TEST(av_close_bound_not_enabled)
{
	struct tu_dom d;
	struct fid_av *av;
	struct fid_ep *ep;

	tu_dom_open(&d, NULL);
	av = av_open(&d, loop_type(_i));
	ck_assert_int_eq(fi_endpoint(d.domain, d.info, &ep, NULL), 0);
	ck_assert_int_eq(fi_ep_bind(ep, &av->fid, 0), 0);
	ck_assert_int_eq(fi_ep_bind(ep, &av->fid, 0), -FI_EINVAL);
	ck_assert_int_eq(fi_close(&av->fid), -FI_EBUSY);
	/* not enabled: no CQ bound yet */
	ck_assert_int_eq(fi_enable(ep), -FI_ENOCQ);
	ck_assert_int_eq(fi_close(&ep->fid), 0);
	ck_assert_int_eq(fi_close(&av->fid), 0);
	tu_dom_close(&d);
}
END_TEST

Suite *tu_av_suite(void)
{
	Suite *s = suite_create("av");
	TCase *tc = tcase_create("av");

	tcase_set_timeout(tc, TU_TCASE_TIMEOUT);
	tcase_add_loop_test(tc, av_insert_lookup, 0, 2);
	tcase_add_loop_test(tc, av_remove, 0, 2);
	tcase_add_loop_test(tc, av_straddr, 0, 2);
	tcase_add_loop_test(tc, av_malformed_name, 0, 2);
	tcase_add_loop_test(tc, av_reverse_many, 0, 2);
	tcase_add_loop_test(tc, av_dup_insert_remove, 0, 2);
	tcase_add_loop_test(tc, av_bad_flags, 0, 2);
	tcase_add_test(tc, av_close_busy);
	tcase_add_loop_test(tc, av_close_bound_not_enabled, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
