/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The collectives' algorithm table (coll/tnbc_alg.c), alone: which
 * algorithm the automatic choice takes for each collective, size and
 * group shape, and what FI_TNBC_COLL_ALG pins, including names it does
 * not know and algorithms that cannot run the operation.  Each test
 * runs in a process of its own (Check's fork mode), so each reads its
 * own FI_TNBC_COLL_ALG once.
 */
#include "tnbc_unit.h"

#include "coll/tnbc_sched.h"
#include "xport/tcp/tnbc_tcp.h"

/* A group of n members, on hosts[] (NULL: one host). */
static struct tnbc_mc group(int n, int *hosts, int nhosts)
{
	return (struct tnbc_mc){
		.size = n,
		.host = hosts,
		.nhosts = hosts ? nhosts : 1,
	};
}

static const char *chosen(const struct tnbc_mc *mc, enum fi_collective_op coll,
			  size_t len)
{
	return tnbc_alg_choose(mc, coll, len)->name;
}

START_TEST(alg_automatic)
{
	int two_hosts[4] = {0, 0, 1, 1};
	struct tnbc_mc one = group(1, NULL, 1), two = group(2, NULL, 1);
	struct tnbc_mc three = group(3, NULL, 1);
	struct tnbc_mc spread = group(4, two_hosts, 2);

	tnbc_env.coll_alg = NULL;
	/* small allreduce and barrier: one hop in the smallest groups
	 * (FI_TNBC_COLL_FLAT_MAX, 2), the tree above */
	ck_assert_str_eq(chosen(&two, FI_ALLREDUCE, 8), "flat");
	ck_assert_str_eq(chosen(&two, FI_BARRIER, 0), "flat");
	ck_assert_str_eq(chosen(&three, FI_ALLREDUCE, 8), "desc");
	ck_assert_str_eq(chosen(&one, FI_ALLREDUCE, 8), "desc");
	/* too big for one packet */
	ck_assert_str_eq(chosen(&two, FI_ALLREDUCE, 4096), "desc");
	/* large: reduce-scatter + allgather from FI_TNBC_COLL_RSAG_MIN */
	ck_assert_str_eq(chosen(&three, FI_ALLREDUCE, tnbc_env.coll_rsag_min),
			 "rsag");
	ck_assert_str_eq(
		chosen(&three, FI_ALLREDUCE, tnbc_env.coll_rsag_min - 1),
		"desc");
	ck_assert_str_eq(chosen(&one, FI_ALLREDUCE, 1 << 20), "desc");
	/* several hosts: folded at the leaders */
	ck_assert_str_eq(chosen(&spread, FI_ALLREDUCE, 8), "hosts");
	ck_assert_str_eq(chosen(&spread, FI_BARRIER, 0), "hosts");
	ck_assert_str_eq(chosen(&spread, FI_ALLREDUCE, 4096), "desc");
	/* the rest */
	ck_assert_str_eq(chosen(&three, FI_BROADCAST, 8), "desc");
	ck_assert_str_eq(chosen(&three, FI_REDUCE, 8), "desc");
	ck_assert_str_eq(chosen(&three, FI_ALLTOALL, 8), "direct");
	ck_assert_str_eq(chosen(&three, FI_ALLGATHER, 8), "direct");
	ck_assert_str_eq(chosen(&three, FI_REDUCE_SCATTER, 8), "direct");
	ck_assert_str_eq(chosen(&three, FI_SCATTER, 8), "direct");
	ck_assert_str_eq(chosen(&three, FI_GATHER, 8), "direct");
}
END_TEST

/* Alltoall: PLP for small slices when hosts hold several members, LSS
 * for large ones between hosts, direct otherwise. */
START_TEST(alg_alltoall)
{
	int two_hosts[4] = {0, 0, 1, 1}, apart[3] = {0, 1, 2};
	struct tnbc_mc one = group(4, NULL, 1);
	struct tnbc_mc spread = group(4, two_hosts, 2);
	struct tnbc_mc single = group(3, apart, 3);

	tnbc_env.coll_alg = NULL;
	ck_assert_str_eq(chosen(&spread, FI_ALLTOALL, 1), "plp");
	ck_assert_str_eq(chosen(&spread, FI_ALLTOALL, tnbc_env.coll_plp_max),
			 "plp");
	ck_assert_str_eq(
		chosen(&spread, FI_ALLTOALL, tnbc_env.coll_plp_max + 1),
		"direct");
	/* one member per host: nothing to aggregate */
	ck_assert_str_eq(chosen(&single, FI_ALLTOALL, 1), "direct");
	/* one host: no link */
	ck_assert_str_eq(chosen(&one, FI_ALLTOALL, 1), "direct");
	ck_assert_str_eq(chosen(&one, FI_ALLTOALL, 1 << 20), "direct");
	/* LSS above FI_TNBC_COLL_LSS_ABOVE (TCP's eager size by default),
	 * between hosts */
	ck_assert_str_eq(chosen(&spread, FI_ALLTOALL, 131072), "direct");
	ck_assert_str_eq(chosen(&spread, FI_ALLTOALL, 131073), "lss");
	ck_assert_str_eq(chosen(&single, FI_ALLTOALL, 1 << 20), "lss");
	ck_assert_str_eq(chosen(&one, FI_ALLTOALL, 1 << 20), "direct");
	tnbc_env.coll_lss_above = 65535;
	ck_assert_str_eq(chosen(&spread, FI_ALLTOALL, 65535), "direct");
	ck_assert_str_eq(chosen(&spread, FI_ALLTOALL, 65536), "lss");
	/* the choice follows FI_TNBC_COLL_PLP_MAX */
	tnbc_env.coll_plp_max = 0;
	ck_assert_str_eq(chosen(&spread, FI_ALLTOALL, 1), "direct");
}
END_TEST

/* Which of LSS's pairs cross a link: both members of a pair must
 * agree, from what is the same for both (hosts, FI_TNBC_XPORTS). */
START_TEST(alg_lss_links)
{
	int hosts[3] = {0, 0, 1};
	struct tnbc_mc mc = group(3, hosts, 2);

	mc.rank = 0;
	tnbc_env.xport_list[0] = &tnbc_shm_ops;
	tnbc_env.xport_list[1] = &tnbc_tcp_ops;
	tnbc_env.nxport = 2;
	ck_assert(!tnbc_sched_over_link(&mc, 1));
	ck_assert(tnbc_sched_over_link(&mc, 2));
	mc.rank = 2;
	ck_assert(tnbc_sched_over_link(&mc, 0));
	/* no shared memory: every pair crosses one */
	tnbc_env.xport_list[0] = &tnbc_tcp_ops;
	tnbc_env.nxport = 1;
	mc.rank = 0;
	ck_assert(tnbc_sched_over_link(&mc, 1));
	/* segments: one packet of every link transport, the same for
	 * every member; TCP alone takes its stream's large packets */
	ck_assert_uint_eq(tnbc_sched_link_payload(&mc, 1) + TNBC_XPKT_FRAME_MAX,
			  tnbc_tcp_rx_max());
	ck_assert_uint_gt(tnbc_sched_link_payload(&mc, 1), (size_t)1 << 20);
	tnbc_env.xport_list[0] = &tnbc_shm_ops;
	tnbc_env.xport_list[1] = &tnbc_tcp_ops;
	tnbc_env.nxport = 2;
	ck_assert_uint_eq(tnbc_sched_link_payload(&mc, 2) + TNBC_XPKT_FRAME_MAX,
			  tnbc_tcp_rx_max());
	{
		/* names: member 1's has no TCP, member 2 is known by a
		 * service address (no transports known): a slot */
		uint16_t tcp = TNBC_XPORT_BIT(tnbc_shm_ops.id) |
			       TNBC_XPORT_BIT(tnbc_tcp_ops.id);
		uint16_t names[3] = {tcp, TNBC_XPORT_BIT(tnbc_shm_ops.id), 0};
		size_t slot = tnbc_env.slot_size - 16 - TNBC_XPKT_FRAME_MAX;

		mc.xports = names;
		mc.rank = 0;
		ck_assert_uint_eq(tnbc_sched_link_payload(&mc, 1), slot);
		ck_assert_uint_eq(tnbc_sched_link_payload(&mc, 2), slot);
		names[1] = tcp;
		ck_assert_uint_eq(tnbc_sched_link_payload(&mc, 1) +
					  TNBC_XPKT_FRAME_MAX,
				  tnbc_tcp_rx_max());
		mc.rank = 2;
		ck_assert_uint_eq(tnbc_sched_link_payload(&mc, 0), slot);
		mc.xports = NULL;
	}
#ifdef TNBC_HAVE_VERBS
	{
		/* member 0 has no RDMA device, 1 and 2 have: verbs may
		 * carry 1-2 (a slot), TCP alone 0-1 and 0-2, whichever
		 * end asks */
		uint16_t tcp = TNBC_XPORT_BIT(tnbc_shm_ops.id) |
			       TNBC_XPORT_BIT(tnbc_tcp_ops.id),
			 both = tcp | TNBC_XPORT_BIT(tnbc_verbs_ops.id);
		uint16_t names[3] = {tcp, both, both};
		size_t slot = tnbc_env.slot_size - 16 - TNBC_XPKT_FRAME_MAX;

		tnbc_env.xport_list[1] = &tnbc_verbs_ops;
		tnbc_env.xport_list[2] = &tnbc_tcp_ops;
		tnbc_env.nxport = 3;
		mc.xports = names;
		for (mc.rank = 0; mc.rank < 3; mc.rank++)
			for (int j = 0; j < 3; j++) {
				bool rdma = mc.rank && j;

				if (j == mc.rank)
					continue;
				ck_assert_uint_eq(
					tnbc_sched_link_payload(&mc, j),
					rdma ? slot
					     : tnbc_tcp_rx_max() -
							TNBC_XPKT_FRAME_MAX);
			}
		/* member 0 alone, with no verbs in its list: the same */
		tnbc_env.xport_list[1] = &tnbc_tcp_ops;
		tnbc_env.nxport = 2;
		mc.rank = 0;
		ck_assert_uint_eq(tnbc_sched_link_payload(&mc, 1) +
					  TNBC_XPKT_FRAME_MAX,
				  tnbc_tcp_rx_max());
		mc.xports = NULL;
	}
#endif
	/* shared memory alone: no link, a slot all the same */
	tnbc_env.xport_list[0] = &tnbc_shm_ops;
	tnbc_env.nxport = 1;
	ck_assert_uint_eq(tnbc_sched_link_payload(&mc, 1) +
				  TNBC_XPKT_FRAME_MAX + 16,
			  tnbc_env.slot_size);
}
END_TEST

START_TEST(alg_alltoall_pinned)
{
	int two_hosts[4] = {0, 0, 1, 1};
	struct tnbc_mc one = group(4, NULL, 1);
	struct tnbc_mc spread = group(4, two_hosts, 2);

	static char pins[] = "alltoall=plp";

	tnbc_env.coll_alg = pins;
	ck_assert_str_eq(chosen(&spread, FI_ALLTOALL, 1 << 20), "plp");
	/* one host: PLP cannot, the choice is automatic */
	ck_assert_str_eq(chosen(&one, FI_ALLTOALL, 1), "direct");
	ck_assert_str_eq(tnbc_alg_named("lss")->name, "lss");
}
END_TEST

/* The rules follow their parameters. */
START_TEST(alg_rules_follow_parameters)
{
	int two_hosts[4] = {0, 0, 1, 1};
	struct tnbc_mc five = group(5, NULL, 1);
	struct tnbc_mc spread = group(4, two_hosts, 2);

	tnbc_env.coll_alg = NULL;
	tnbc_env.coll_flat_max = 8;
	tnbc_env.coll_hosts = 0;
	tnbc_env.coll_rsag_min = 64;
	ck_assert_str_eq(chosen(&five, FI_ALLREDUCE, 8), "flat");
	ck_assert_str_eq(chosen(&five, FI_ALLREDUCE, 64), "rsag");
	/* no trees of hosts: spread's 4 members fold in one hop */
	ck_assert_str_eq(chosen(&spread, FI_ALLREDUCE, 8), "flat");
}
END_TEST

START_TEST(alg_pinned)
{
	struct tnbc_mc two = group(2, NULL, 1), five = group(5, NULL, 1);

	static char pins[] = "allreduce=rsag, barrier=flat";

	tnbc_env.coll_alg = pins;
	ck_assert_str_eq(chosen(&two, FI_ALLREDUCE, 8), "rsag");
	ck_assert_str_eq(chosen(&five, FI_BARRIER, 0), "flat");
	/* not pinned: automatic */
	ck_assert_str_eq(chosen(&five, FI_BROADCAST, 8), "desc");
	ck_assert_str_eq(chosen(&five, FI_ALLTOALL, 8), "direct");
}
END_TEST

/* A name alone pins every collective the algorithm implements. */
START_TEST(alg_pinned_by_name_alone)
{
	struct tnbc_mc two = group(2, NULL, 1);

	static char pins[] = "desc";

	tnbc_env.coll_alg = pins;
	ck_assert_str_eq(chosen(&two, FI_ALLREDUCE, 8), "desc");
	ck_assert_str_eq(chosen(&two, FI_BARRIER, 0), "desc");
	ck_assert_str_eq(chosen(&two, FI_ALLTOALL, 8), "direct");
}
END_TEST

/* A pinned algorithm that cannot run the operation gives way. */
START_TEST(alg_pinned_cannot)
{
	struct tnbc_mc one = group(1, NULL, 1), three = group(3, NULL, 1);

	static char pins[] = "allreduce=flat,barrier=hosts";

	tnbc_env.coll_alg = pins;
	ck_assert_str_eq(chosen(&three, FI_ALLREDUCE, 8), "flat");
	ck_assert_str_eq(chosen(&three, FI_ALLREDUCE, 4096), "desc");
	ck_assert_str_eq(chosen(&one, FI_ALLREDUCE, 8), "desc");
	/* one host: nothing for leaders to fold */
	ck_assert_str_eq(chosen(&three, FI_BARRIER, 0), "desc");
}
END_TEST

/* What it does not know, or what does not fit, is ignored. */
START_TEST(alg_pinned_bad)
{
	struct tnbc_mc two = group(2, NULL, 1), three = group(3, NULL, 1);

	static char pins[] = "allreduce=nosuch,bogus=desc,alltoall=rsag,,=,"
			     "broadcast=direct,gather";

	tnbc_env.coll_alg = pins;
	ck_assert_str_eq(chosen(&two, FI_ALLREDUCE, 8), "flat");
	ck_assert_str_eq(chosen(&three, FI_ALLTOALL, 8), "direct");
	ck_assert_str_eq(chosen(&three, FI_BROADCAST, 8), "desc");
	ck_assert_ptr_null(tnbc_alg_named("nosuch"));
	ck_assert_str_eq(tnbc_alg_named("rsag")->name, "rsag");
}
END_TEST

Suite *tu_alg_suite(void)
{
	Suite *s = suite_create("alg");
	TCase *tc = tcase_create("alg");

	tcase_add_test(tc, alg_automatic);
	tcase_add_test(tc, alg_alltoall);
	tcase_add_test(tc, alg_alltoall_pinned);
	tcase_add_test(tc, alg_lss_links);
	tcase_add_test(tc, alg_rules_follow_parameters);
	tcase_add_test(tc, alg_pinned);
	tcase_add_test(tc, alg_pinned_by_name_alone);
	tcase_add_test(tc, alg_pinned_cannot);
	tcase_add_test(tc, alg_pinned_bad);
	suite_add_tcase(s, tc);
	return s;
}
