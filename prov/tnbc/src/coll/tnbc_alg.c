/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The collective algorithms, chosen from a table by name.  Each entry
 * says which collectives it implements, whether it can run an operation
 * at all (a shape it does not handle, a payload too big for its
 * packets), and whether the automatic choice takes it: the rules
 * measured on the development host (fi_tnbc(7), Collectives).  The
 * first entry whose rule takes an operation runs it, so the table's
 * order is the preference.
 *
 * FI_TNBC_COLL_ALG pins one per collective ("allreduce=rsag,barrier=flat",
 * or a name alone for every collective it implements), so that tests
 * and tuning reach an algorithm by its name rather than by bending a
 * threshold.  A pinned algorithm runs whenever it can; an operation it
 * cannot run takes the automatic choice, and the log says so once.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "tnbc_sched.h"

#define TNBC_NCOLL (FI_GATHER + 1)

static bool tnbc_alg_flat_pick(const struct tnbc_mc *mc,
			       enum fi_collective_op coll, size_t len)
{
	return tnbc_alg_flat_can(mc, coll, len) &&
	       (size_t)mc->size <= tnbc_env.coll_flat_max;
}

static bool tnbc_alg_hosts_pick(const struct tnbc_mc *mc,
				enum fi_collective_op coll, size_t len)
{
	return tnbc_env.coll_hosts &&
	       (size_t)mc->nhosts <= tnbc_env.coll_flat_hosts &&
	       tnbc_alg_hosts_can(mc, coll, len);
}

static bool tnbc_alg_rsag_can(const struct tnbc_mc *mc,
			      enum fi_collective_op coll, size_t len)
{
	(void)len;
	return coll == FI_ALLREDUCE && mc->size > 1;
}

static bool tnbc_alg_rsag_pick(const struct tnbc_mc *mc,
			       enum fi_collective_op coll, size_t len)
{
	return tnbc_alg_rsag_can(mc, coll, len) &&
	       len >= tnbc_env.coll_rsag_min;
}

static bool tnbc_alg_plp_pick(const struct tnbc_mc *mc,
			      enum fi_collective_op coll, size_t len)
{
	return tnbc_alg_plp_can(mc, coll, len) && len <= tnbc_env.coll_plp_max;
}

/* LSS pays where the direct exchange would take a rendezvous over the
 * link: above FI_TNBC_COLL_LSS_ABOVE, TCP's eager size by default.  A
 * job-wide figure, not the link's own: every member must choose the
 * same. */
static bool tnbc_alg_lss_pick(const struct tnbc_mc *mc,
			      enum fi_collective_op coll, size_t len)
{
	return tnbc_alg_lss_can(mc, coll, len) && mc->host && mc->nhosts > 1 &&
	       len > tnbc_env.coll_lss_above;
}

/* The descriptors' tree and the direct exchange take every operation
 * of the collectives they implement. */
static bool tnbc_alg_always(const struct tnbc_mc *mc,
			    enum fi_collective_op coll, size_t len)
{
	(void)mc;
	(void)coll;
	(void)len;
	return true;
}

static const struct tnbc_alg tnbc_algs[] = {
	{"flat", TNBC_ALG_BIT(FI_ALLREDUCE) | TNBC_ALG_BIT(FI_BARRIER),
	 tnbc_alg_flat_can, tnbc_alg_flat_pick, tnbc_alg_flat},
	{"hosts", TNBC_ALG_BIT(FI_ALLREDUCE) | TNBC_ALG_BIT(FI_BARRIER),
	 tnbc_alg_hosts_can, tnbc_alg_hosts_pick, tnbc_alg_hosts},
	{"rsag", TNBC_ALG_BIT(FI_ALLREDUCE), tnbc_alg_rsag_can,
	 tnbc_alg_rsag_pick, tnbc_alg_rsag},
	{"desc",
	 TNBC_ALG_BIT(FI_ALLREDUCE) | TNBC_ALG_BIT(FI_REDUCE) |
		 TNBC_ALG_BIT(FI_BARRIER) | TNBC_ALG_BIT(FI_BROADCAST),
	 tnbc_alg_always, tnbc_alg_always, tnbc_alg_desc},
	{"plp", TNBC_ALG_BIT(FI_ALLTOALL), tnbc_alg_plp_can, tnbc_alg_plp_pick,
	 tnbc_alg_plp},
	{"lss", TNBC_ALG_BIT(FI_ALLTOALL), tnbc_alg_lss_can, tnbc_alg_lss_pick,
	 tnbc_alg_lss},
	{"direct",
	 TNBC_ALG_BIT(FI_ALLTOALL) | TNBC_ALG_BIT(FI_ALLGATHER) |
		 TNBC_ALG_BIT(FI_REDUCE_SCATTER) | TNBC_ALG_BIT(FI_SCATTER) |
		 TNBC_ALG_BIT(FI_GATHER),
	 tnbc_alg_always, tnbc_alg_always, tnbc_alg_direct},
};

#define TNBC_NALG (sizeof(tnbc_algs) / sizeof(tnbc_algs[0]))

/* enum fi_collective_op's names, as FI_TNBC_COLL_ALG writes them */
static const char *const tnbc_coll_names[TNBC_NCOLL] = {
	[FI_BARRIER] = "barrier",     [FI_BROADCAST] = "broadcast",
	[FI_ALLTOALL] = "alltoall",   [FI_ALLREDUCE] = "allreduce",
	[FI_ALLGATHER] = "allgather", [FI_REDUCE_SCATTER] = "reduce_scatter",
	[FI_REDUCE] = "reduce",	      [FI_SCATTER] = "scatter",
	[FI_GATHER] = "gather",
};

static struct {
	pthread_once_t once;
	const struct tnbc_alg *pin[TNBC_NCOLL];
	atomic_bool warned[TNBC_NCOLL];
} tnbc_alg_state = {.once = PTHREAD_ONCE_INIT};

const struct tnbc_alg *tnbc_alg_named(const char *name)
{
	for (size_t i = 0; i < TNBC_NALG; i++)
		if (!strcmp(tnbc_algs[i].name, name))
			return &tnbc_algs[i];
	return NULL;
}

/* One item of FI_TNBC_COLL_ALG: "coll=name" or "name". */
static void tnbc_alg_pin_item(char *item)
{
	char *eq = strchr(item, '=');
	const char *name = eq ? eq + 1 : item;
	const struct tnbc_alg *a = tnbc_alg_named(name);
	int c, pinned = 0;

	if (eq)
		*eq = '\0';
	for (c = 0; c < TNBC_NCOLL; c++) {
		if (eq && strcmp(item, tnbc_coll_names[c]))
			continue;
		if (a && (a->colls & TNBC_ALG_BIT(c))) {
			tnbc_alg_state.pin[c] = a;
			pinned++;
		}
	}
	if (!pinned)
		FI_WARN(&tnbc_prov, FI_LOG_CORE,
			"FI_TNBC_COLL_ALG: \"%s%s%s\" names no algorithm of "
			"that collective (algorithms: flat, hosts, rsag, desc, "
			"plp, lss, direct); ignored\n",
			item, eq ? "=" : "", eq ? name : "");
}

static void tnbc_alg_pins(void)
{
	char buf[512], *save = NULL;

	if (!tnbc_env.coll_alg || !*tnbc_env.coll_alg)
		return;
	snprintf(buf, sizeof(buf), "%s", tnbc_env.coll_alg);
	for (char *it = strtok_r(buf, ", ", &save); it;
	     it = strtok_r(NULL, ", ", &save))
		tnbc_alg_pin_item(it);
}

const struct tnbc_alg *tnbc_alg_choose(const struct tnbc_mc *mc,
				       enum fi_collective_op coll, size_t len)
{
	const struct tnbc_alg *pin;

	pthread_once(&tnbc_alg_state.once, tnbc_alg_pins);
	pin = (unsigned)coll < TNBC_NCOLL ? tnbc_alg_state.pin[coll] : NULL;
	if (pin && pin->can(mc, coll, len))
		return pin;
	if (pin && !atomic_exchange(&tnbc_alg_state.warned[coll], true))
		FI_INFO(&tnbc_prov, FI_LOG_CORE,
			"FI_TNBC_COLL_ALG: %s cannot run a %s of %zu bytes in "
			"a group of %d on %d hosts; chosen automatically\n",
			pin->name, tnbc_coll_names[coll], len, mc->size,
			mc->nhosts);
	for (size_t i = 0; i < TNBC_NALG; i++)
		if ((tnbc_algs[i].colls & TNBC_ALG_BIT(coll)) &&
		    tnbc_algs[i].pick(mc, coll, len))
			return &tnbc_algs[i];
	/* every collective has an algorithm that always takes it */
	return &tnbc_algs[TNBC_NALG - 1];
}
