/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * fi_getinfo: what tnbc advertises and how it treats hints.
 */
#include "tnbc_unit.h"

static size_t slot_payload(void)
{
	return tnbc_env.slot_size - 16 - sizeof(struct tnbc_hdr);
}

static struct fi_info *getinfo_ok(uint32_t version, const char *service,
				  uint64_t flags, const struct fi_info *hints)
{
	struct fi_info *info = NULL;
	int ret;

	tu_prov_init();
	ret = tnbc_getinfo(version, NULL, service, flags, hints, &info);
	ck_assert_msg(ret == 0, "tnbc_getinfo: %d (%s)", ret,
		      fi_strerror(-ret));
	ck_assert_ptr_nonnull(info);
	return info;
}

static int getinfo_ret(const struct fi_info *hints)
{
	struct fi_info *info = NULL;
	int ret;

	tu_prov_init();
	ret = tnbc_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (!ret)
		fi_freeinfo(info);
	else
		ck_assert_ptr_null(info);
	return ret;
}

START_TEST(attr_defaults)
{
	struct fi_info *info = getinfo_ok(FI_VERSION(1, 17), NULL, 0, NULL);
	const uint64_t need = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE;

	ck_assert_ptr_null(info->next);
	ck_assert_int_eq(info->ep_attr->type, FI_EP_RDM);
	ck_assert_uint_eq(info->caps & need, need);
	ck_assert_uint_eq(info->caps & (FI_SEND | FI_RECV), FI_SEND | FI_RECV);
	ck_assert_uint_eq(
		info->caps & (FI_RMA | FI_ATOMIC | FI_TRIGGER | FI_RMA_EVENT),
		FI_RMA | FI_ATOMIC | FI_TRIGGER | FI_RMA_EVENT);
	ck_assert_uint_eq(info->caps & FI_COLLECTIVE, FI_COLLECTIVE);
	ck_assert_uint_eq(info->tx_attr->caps & FI_COLLECTIVE, FI_COLLECTIVE);
	ck_assert_uint_eq(
		info->caps & (FI_MULTI_RECV | FI_MULTICAST | FI_REMOTE_COMM),
		0);
	ck_assert_uint_eq(info->tx_attr->rma_iov_limit, TNBC_IOV_LIMIT);
	ck_assert_uint_eq(info->tx_attr->inject_size, slot_payload());
	ck_assert_uint_eq(info->tx_attr->inject_size,
			  32768 + 128 - 16 - sizeof(struct tnbc_hdr));
	ck_assert_uint_eq(info->tx_attr->iov_limit, 8);
	ck_assert_uint_eq(info->rx_attr->iov_limit, 8);
	ck_assert_uint_eq(info->domain_attr->cq_data_size, 8);
	ck_assert_uint_eq(info->ep_attr->mem_tag_format, ~0ULL);
	ck_assert_int_eq(info->domain_attr->threading, FI_THREAD_SAFE);
	ck_assert_int_eq(info->domain_attr->control_progress, FI_PROGRESS_AUTO);
	ck_assert_int_eq(info->domain_attr->data_progress, FI_PROGRESS_AUTO);
	ck_assert_int_eq(info->domain_attr->mr_mode, 0);
	ck_assert_uint_eq(info->tx_attr->msg_order & FI_ORDER_SAS,
			  FI_ORDER_SAS);
	ck_assert_uint_eq(info->rx_attr->msg_order & FI_ORDER_SAS,
			  FI_ORDER_SAS);
	ck_assert_uint_eq(info->mode, 0);
	ck_assert_str_eq(info->fabric_attr->name, "tnbc");
	ck_assert_str_eq(info->domain_attr->name, "tnbc");
	ck_assert_int_eq(info->ep_attr->protocol_version, TNBC_PROTO_VERSION);
	/* our own name: an endpoint of this process, numbered at open */
	ck_assert_ptr_nonnull(info->src_addr);
	ck_assert_uint_eq(info->src_addrlen, sizeof(struct tnbc_addr));
	{
		const struct tnbc_name *n = info->src_addr;

		ck_assert_int_eq(n->version, TNBC_PROTO_VERSION);
		ck_assert_int_eq(n->xports, tu_xmask());
		ck_assert_int_eq(n->kind, TNBC_NAME_PID);
		ck_assert_uint_eq(n->pid, (uint32_t)getpid());
		ck_assert_uint_eq(n->uid, TNBC_UID_ANY);
	}
	ck_assert_ptr_null(info->dest_addr);
	fi_freeinfo(info);
}
END_TEST

/* The version range: nothing newer than 1.17, nothing before 1.0. */
START_TEST(attr_version_range)
{
	struct fi_info *info = NULL;

	tu_prov_init();
	ck_assert_int_eq(
		tnbc_getinfo(FI_VERSION(1, 18), NULL, NULL, 0, NULL, &info),
		-FI_ENODATA);
	ck_assert_int_eq(
		tnbc_getinfo(FI_VERSION(2, 0), NULL, NULL, 0, NULL, &info),
		-FI_ENODATA);
	ck_assert_int_eq(
		tnbc_getinfo(FI_VERSION(0, 9), NULL, NULL, 0, NULL, &info),
		-FI_ENODATA);
	info = getinfo_ok(FI_VERSION(1, 5), NULL, 0, NULL);
	ck_assert_int_eq(info->domain_attr->mr_mode, 0);
	fi_freeinfo(info);
}
END_TEST

/* Every hint tnbc cannot satisfy yields -FI_ENODATA.  The loop index
 * picks the unsatisfiable hint. */
enum {
	BAD_EP_MSG,
	BAD_EP_DGRAM,
	BAD_MULTICAST,
	BAD_HMEM,
	BAD_MULTI_RECV,
	BAD_INJECT,
	BAD_TX_IOV,
	BAD_RX_IOV,
	BAD_SOCKADDR_IN6,
	BAD_DOMAIN_NAME,
	BAD_FABRIC_NAME,
	BAD_CQ_DATA,
	BAD_MSG_ORDER,
	BAD_RX_OP_FLAGS,
	BAD_MAX
};

START_TEST(attr_hints_rejected)
{
	struct fi_info *hints = fi_allocinfo();

	ck_assert_ptr_nonnull(hints);
	switch (_i) {
	case BAD_EP_MSG:
		hints->ep_attr->type = FI_EP_MSG;
		break;
	case BAD_EP_DGRAM:
		hints->ep_attr->type = FI_EP_DGRAM;
		break;
	case BAD_MULTICAST:
		hints->caps = FI_TAGGED | FI_MULTICAST;
		break;
	case BAD_HMEM:
		hints->caps = FI_TAGGED | FI_HMEM;
		break;
	case BAD_MULTI_RECV:
		hints->caps = FI_MSG | FI_MULTI_RECV;
		break;
	case BAD_INJECT:
		hints->tx_attr->inject_size = slot_payload() + 1;
		break;
	case BAD_TX_IOV:
		hints->tx_attr->iov_limit = 9;
		break;
	case BAD_RX_IOV:
		hints->rx_attr->iov_limit = 9;
		break;
	case BAD_SOCKADDR_IN6:
		hints->addr_format = FI_SOCKADDR_IN6; /* IPv4 only */
		break;
	case BAD_DOMAIN_NAME:
		hints->domain_attr->name = strdup("mlx5_0");
		break;
	case BAD_FABRIC_NAME:
		hints->fabric_attr->name = strdup("IB-0xfe80");
		break;
	case BAD_CQ_DATA:
		hints->domain_attr->cq_data_size = 16;
		break;
	case BAD_MSG_ORDER:
		hints->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_RAW;
		break;
	case BAD_RX_OP_FLAGS:
		hints->rx_attr->op_flags = FI_MULTI_RECV;
		break;
	default:
		ck_abort_msg("bad loop index %d", _i);
	}
	ck_assert_msg(getinfo_ret(hints) == -FI_ENODATA,
		      "hint case %d was not rejected", _i);
	fi_freeinfo(hints);
}
END_TEST

/* The limits themselves are fine. */
START_TEST(attr_hints_at_limits)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_info *info;

	hints->caps = FI_TAGGED | FI_MSG;
	hints->ep_attr->type = FI_EP_RDM;
	hints->tx_attr->inject_size = slot_payload();
	hints->tx_attr->iov_limit = 8;
	hints->rx_attr->iov_limit = 8;
	hints->domain_attr->cq_data_size = 8;
	hints->domain_attr->av_type = FI_AV_MAP;
	hints->ep_attr->mem_tag_format = 0x0000ffffffffffffULL;
	info = getinfo_ok(FI_VERSION(1, 17), NULL, 0, hints);
	ck_assert_uint_eq(info->caps & (FI_TAGGED | FI_MSG),
			  FI_TAGGED | FI_MSG);
	/* no capability the application did not ask for, except the
	 * implied FI_SEND | FI_RECV */
	ck_assert_uint_eq(info->caps & (FI_DIRECTED_RECV | FI_SOURCE), 0);
	ck_assert_uint_eq(info->caps & (FI_SEND | FI_RECV), FI_SEND | FI_RECV);
	ck_assert_int_eq(info->domain_attr->av_type, FI_AV_MAP);
	ck_assert_uint_eq(info->ep_attr->mem_tag_format, 0x0000ffffffffffffULL);
	ck_assert_uint_eq(info->tx_attr->inject_size, slot_payload());
	fi_freeinfo(info);
	fi_freeinfo(hints);
}
END_TEST

START_TEST(attr_remote_comm)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_info *info;

	hints->caps = FI_TAGGED | FI_REMOTE_COMM | FI_LOCAL_COMM;
	info = getinfo_ok(FI_VERSION(1, 17), NULL, 0, hints);
	ck_assert_uint_eq(info->caps & FI_REMOTE_COMM, FI_REMOTE_COMM);
	ck_assert_uint_eq(info->caps & FI_LOCAL_COMM, FI_LOCAL_COMM);
	ck_assert_uint_eq(info->domain_attr->caps & FI_REMOTE_COMM,
			  FI_REMOTE_COMM);
	ck_assert_uint_eq(info->caps & FI_TAGGED, FI_TAGGED);
	fi_freeinfo(info);

	/* not asked for: not returned */
	hints->caps = FI_TAGGED;
	info = getinfo_ok(FI_VERSION(1, 17), NULL, 0, hints);
	ck_assert_uint_eq(info->caps & FI_REMOTE_COMM, 0);
	ck_assert_uint_eq(info->domain_attr->caps & FI_REMOTE_COMM, 0);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}
END_TEST

START_TEST(attr_threading_echo)
{
	static const enum fi_threading levels[] = {
		FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_DOMAIN,
		FI_THREAD_COMPLETION, FI_THREAD_ENDPOINT};

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		struct fi_info *hints = fi_allocinfo();
		struct fi_info *info;

		hints->domain_attr->threading = levels[i];
		info = getinfo_ok(FI_VERSION(1, 17), NULL, 0, hints);
		ck_assert_int_eq(info->domain_attr->threading, levels[i]);
		fi_freeinfo(info);
		fi_freeinfo(hints);
	}
}
END_TEST

START_TEST(attr_service_source)
{
	struct fi_info *info;
	const struct tnbc_name *n;

	info = getinfo_ok(FI_VERSION(1, 17), "1234", FI_SOURCE, NULL);
	ck_assert_ptr_nonnull(info->src_addr);
	ck_assert_uint_eq(info->src_addrlen, sizeof(struct tnbc_addr));
	ck_assert_ptr_null(info->dest_addr);
	n = info->src_addr;
	ck_assert_int_eq(n->kind, TNBC_NAME_SVC);
	ck_assert_uint_eq(n->uid, 1234);
	ck_assert_int_eq(n->version, TNBC_PROTO_VERSION);
	ck_assert_int_eq(n->xports, tu_xmask());
	fi_freeinfo(info);

	/* without FI_SOURCE the service names the destination, and our
	 * own endpoint gets a fresh name */
	info = getinfo_ok(FI_VERSION(1, 17), "4321", 0, NULL);
	ck_assert_ptr_nonnull(info->src_addr);
	n = info->src_addr;
	ck_assert_int_eq(n->kind, TNBC_NAME_PID);
	ck_assert_uint_eq(n->uid, TNBC_UID_ANY);
	ck_assert_ptr_nonnull(info->dest_addr);
	ck_assert_uint_eq(info->dest_addrlen, sizeof(struct tnbc_addr));
	n = info->dest_addr;
	ck_assert_int_eq(n->kind, TNBC_NAME_SVC);
	ck_assert_uint_eq(n->uid, 4321);
	fi_freeinfo(info);

	/* not a number */
	{
		struct fi_info *bad = NULL;

		ck_assert_int_eq(tnbc_getinfo(FI_VERSION(1, 17), NULL, "http",
					      FI_SOURCE, NULL, &bad),
				 -FI_ENODATA);
		ck_assert_int_eq(tnbc_getinfo(FI_VERSION(1, 17), NULL, "-5",
					      FI_SOURCE, NULL, &bad),
				 -FI_ENODATA);
	}
}
END_TEST

/* Progress modes asked for are echoed (the engine runs either way);
 * nodes must name this host. */
START_TEST(attr_progress_node)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_info *info;

	/* what upstream fi_multinode_coll asks for */
	hints->caps = FI_MSG | FI_COLLECTIVE;
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	info = getinfo_ok(FI_VERSION(1, 17), NULL, 0, hints);
	ck_assert_uint_eq(info->caps & FI_COLLECTIVE, FI_COLLECTIVE);
	ck_assert_int_eq(info->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	ck_assert_int_eq(info->domain_attr->control_progress,
			 FI_PROGRESS_MANUAL);
	fi_freeinfo(info);
	fi_freeinfo(hints);

	tu_prov_init();
	ck_assert_int_eq(tnbc_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, 0,
				      NULL, &info),
			 0);
	fi_freeinfo(info);
	ck_assert_int_eq(tnbc_getinfo(FI_VERSION(1, 17), "localhost", "77", 0,
				      NULL, &info),
			 0);
	ck_assert_ptr_nonnull(info->dest_addr);
	fi_freeinfo(info);
}
END_TEST

/* An endpoint opened from a service src_addr really is named by it. */
START_TEST(attr_service_endpoint)
{
	struct tu_dom d;
	struct fi_info *info;
	struct fid_ep *ep;
	struct tnbc_addr addr;
	struct tnbc_name name;
	size_t len = sizeof(addr);
	char svc[16];
	unsigned s = 0;
	int ret = -FI_EADDRINUSE;

	tu_dom_open(&d, NULL);
	/* a port free now may be another process's by the time we bind */
	for (int tries = 0; ret == -FI_EADDRINUSE && tries < 8; tries++) {
		s = tu_tcp_free_port();
		snprintf(svc, sizeof(svc), "%u", s);
		info = getinfo_ok(FI_VERSION(1, 17), svc, FI_SOURCE, NULL);
		ret = fi_endpoint(d.domain, info, &ep, NULL);
		if (ret)
			fi_freeinfo(info);
	}
	ck_assert_int_eq(ret, 0);
	ck_assert_int_eq(fi_getname(&ep->fid, &addr, &len), 0);
	name = addr.name;
	ck_assert_int_eq(name.kind, TNBC_NAME_SVC);
	ck_assert_uint_eq(name.uid, s);
	ck_assert_int_eq(fi_close(&ep->fid), 0);
	fi_freeinfo(info);
	tu_dom_close(&d);
}
END_TEST

/* An application of API 1.0 that asks for FI_MR_BASIC is served, and
 * can open a domain with what it got. */
START_TEST(attr_v10_mr_basic)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;

	hints->caps = FI_TAGGED;
	hints->domain_attr->mr_mode = FI_MR_BASIC;
	info = getinfo_ok(FI_VERSION(1, 0), NULL, 0, hints);
	/* a pre-1.5 mr_mode is one of the old enum values */
	ck_assert_msg(info->domain_attr->mr_mode == FI_MR_BASIC ||
			      info->domain_attr->mr_mode == FI_MR_SCALABLE,
		      "mr_mode %d", info->domain_attr->mr_mode);
	ck_assert_int_eq(tnbc_fabric_open(info->fabric_attr, &fabric, NULL), 0);
	ck_assert_int_eq(fi_domain(fabric, info, &domain, NULL), 0);
	ck_assert_int_eq(fi_close(&domain->fid), 0);
	ck_assert_int_eq(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);

	/* FI_MR_UNSPEC is fine too */
	hints->domain_attr->mr_mode = FI_MR_UNSPEC;
	info = getinfo_ok(FI_VERSION(1, 0), NULL, 0, hints);
	fi_freeinfo(info);

	/* 1.5+ semantics: FI_MR_BASIC is not a mode bit any more */
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR;
	info = getinfo_ok(FI_VERSION(1, 17), NULL, 0, hints);
	ck_assert_int_eq(info->domain_attr->mr_mode, 0);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}
END_TEST

/*
 * Under the 1.0 API mr_mode is an enum and FI_MR_BASIC in hints means
 * the application can only work with basic registration; a provider that
 * accepts the hints must then report FI_MR_BASIC (libfabric's own
 * ofi_check_mr_mode and the sockets provider do).  tnbc needs no mode at
 * all, so it can serve either.
 */
START_TEST(attr_v10_mr_basic_echo)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_info *info;

	hints->domain_attr->mr_mode = FI_MR_BASIC;
	info = getinfo_ok(FI_VERSION(1, 0), NULL, 0, hints);
	ck_assert_msg(info->domain_attr->mr_mode == FI_MR_BASIC,
		      "asked for FI_MR_BASIC (API 1.0), got mr_mode %d",
		      info->domain_attr->mr_mode);
	fi_freeinfo(info);

	hints->domain_attr->mr_mode = FI_MR_SCALABLE;
	info = getinfo_ok(FI_VERSION(1, 0), NULL, 0, hints);
	ck_assert_int_eq(info->domain_attr->mr_mode, FI_MR_SCALABLE);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}
END_TEST

/* A src_addr in the hints is echoed, and a wrong-sized one refused. */
START_TEST(attr_hint_addrs)
{
	struct fi_info *hints = fi_allocinfo();
	struct tnbc_addr *n = calloc(1, sizeof(*n));
	struct fi_info *info;

	n->name.version = TNBC_PROTO_VERSION;
	n->name.xports = (uint16_t)TNBC_XPORT_BIT(tnbc_env.xport->id);
	n->name.kind = TNBC_NAME_SVC;
	n->name.uid = 77;
	hints->src_addr = n;
	hints->src_addrlen = sizeof(*n);
	info = getinfo_ok(FI_VERSION(1, 17), NULL, 0, hints);
	ck_assert_uint_eq(info->src_addrlen, sizeof(*n));
	ck_assert_mem_eq(info->src_addr, n, sizeof(*n));
	fi_freeinfo(info);
	hints->src_addrlen = sizeof(struct tnbc_name); /* an old size */
	ck_assert_int_eq(getinfo_ret(hints), -FI_ENODATA);
	fi_freeinfo(hints); /* frees n */
}
END_TEST

struct fi_provider *fi_prov_ini(void);

/* The FI_TNBC_* runtime parameters reach tnbc_env, and what getinfo
 * reports follows them; out-of-range values are refused. */
START_TEST(attr_env_params)
{
	struct fi_info *info;
	struct tu_dom d;
	struct fi_tnbc_engine_stats st;

	tu_prov_init(); /* parameters defined once */
	setenv("FI_TNBC_RX_SLOTS", "64", 1);
	setenv("FI_TNBC_SLOT_SIZE", "2000", 1); /* rounded up to 2048 */
	setenv("FI_TNBC_EAGER_SIZE", "512", 1);
	setenv("FI_TNBC_CMA", "0", 1);
	setenv("FI_TNBC_ENGINE", "0", 1);
	tnbc_env = tu_env_defaults;
	ck_assert_ptr_eq(fi_prov_ini(), &tnbc_prov);
	ck_assert_uint_eq(tnbc_env.rx_slots, 64);
	ck_assert_uint_eq(tnbc_env.slot_size, 2048);
	ck_assert_uint_eq(tnbc_env.eager_size, 512);
	ck_assert_int_eq(tnbc_env.cma, 0);
	ck_assert_int_eq(tnbc_env.engine, 0);
	info = getinfo_ok(FI_VERSION(1, 17), NULL, 0, NULL);
	ck_assert_uint_eq(info->tx_attr->inject_size,
			  2048 - 16 - sizeof(struct tnbc_hdr));
	fi_freeinfo(info);
	tu_dom_open(&d, NULL);
	tu_engine_stats(d.domain, &st);
	ck_assert_int_eq(st.engine_running, 0);
	ck_assert_int_eq(st.engine_cpu, -1);
	tu_dom_close(&d);

	/* bad values leave the defaults in place */
	setenv("FI_TNBC_RX_SLOTS", "100", 1); /* not a power of two */
	setenv("FI_TNBC_SLOT_SIZE", "100", 1); /* below 1024 */
	setenv("FI_TNBC_EAGER_SIZE", "99999999", 1); /* above 1 MiB */
	unsetenv("FI_TNBC_CMA");
	unsetenv("FI_TNBC_ENGINE");
	tnbc_env = tu_env_defaults;
	ck_assert_ptr_eq(fi_prov_ini(), &tnbc_prov);
	ck_assert_uint_eq(tnbc_env.rx_slots, tu_env_defaults.rx_slots);
	ck_assert_uint_eq(tnbc_env.slot_size, tu_env_defaults.slot_size);
	ck_assert_uint_eq(tnbc_env.eager_size, tu_env_defaults.eager_size);
	ck_assert_int_eq(tnbc_env.cma, tu_env_defaults.cma);
	ck_assert_int_eq(tnbc_env.engine, tu_env_defaults.engine);
	unsetenv("FI_TNBC_RX_SLOTS");
	unsetenv("FI_TNBC_SLOT_SIZE");
	unsetenv("FI_TNBC_EAGER_SIZE");
	tnbc_env = tu_env_defaults;
}
END_TEST

Suite *tu_attr_suite(void)
{
	Suite *s = suite_create("attr");
	TCase *tc = tcase_create("getinfo");

	tcase_add_test(tc, attr_defaults);
	tcase_add_test(tc, attr_version_range);
	tcase_add_loop_test(tc, attr_hints_rejected, 0, BAD_MAX);
	tcase_add_test(tc, attr_hints_at_limits);
	tcase_add_test(tc, attr_remote_comm);
	tcase_add_test(tc, attr_threading_echo);
	tcase_add_test(tc, attr_service_source);
	tcase_add_test(tc, attr_progress_node);
	tcase_add_test(tc, attr_service_endpoint);
	tcase_add_test(tc, attr_v10_mr_basic);
	tcase_add_test(tc, attr_v10_mr_basic_echo);
	tcase_add_test(tc, attr_hint_addrs);
	tcase_add_test(tc, attr_env_params);
	suite_add_tcase(s, tc);
	return s;
}
