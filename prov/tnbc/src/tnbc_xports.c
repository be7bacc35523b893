/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The transports this provider has, and the ones a domain opens
 * (FI_TNBC_XPORTS, read by tnbc_param.c).
 */
#include <stdio.h>
#include <string.h>

#include "tnbc.h"
#include "tnbc_xports.h"

/* The transports this provider has, by the names FI_TNBC_XPORTS uses. */
static const struct tnbc_xport_ops *const tnbc_xports_all[] = {
	&tnbc_shm_ops,
	&tnbc_loop_ops,
	&tnbc_tcp_ops,
#ifdef TNBC_HAVE_VERBS
	&tnbc_verbs_ops,
#endif
};

const struct tnbc_xport_ops *tnbc_xport_named(const char *name, size_t len)
{
	for (size_t i = 0;
	     i < sizeof(tnbc_xports_all) / sizeof(tnbc_xports_all[0]); i++)
		if (strlen(tnbc_xports_all[i]->name) == len &&
		    !strncmp(tnbc_xports_all[i]->name, name, len))
			return tnbc_xports_all[i];
	return NULL;
}

const struct tnbc_xport_ops *tnbc_xport_of(unsigned id)
{
	for (size_t i = 0;
	     i < sizeof(tnbc_xports_all) / sizeof(tnbc_xports_all[0]); i++)
		if (tnbc_xports_all[i]->id == id)
			return tnbc_xports_all[i];
	return NULL;
}

/* FI_TNBC_XPORTS's default: every transport that works here (one this
 * build lacks, or one with no device, is left out quietly). */
#define TNBC_XPORTS_DEFAULT "shm,verbs,tcp"
#ifdef TNBC_HAVE_VERBS
#define TNBC_XPORTS_BUILT "shm, tcp, verbs and loop"
#else
#define TNBC_XPORTS_BUILT "shm, tcp and loop (verbs not built)"
#endif

_Static_assert(sizeof(tnbc_env.xport_list) / sizeof(tnbc_env.xport_list[0]) ==
		       TNBC_XPORTS_MAX,
	       "a domain's transports");

/* Adds x to the domain's transports unless there already: one with a
 * doorbell of its own goes first, and a second such is refused (the
 * engine sleeps on one doorbell). */
static void tnbc_xport_add(const struct tnbc_xport_ops *x)
{
	unsigned n = tnbc_env.nxport;

	for (unsigned i = 0; i < n; i++)
		if (tnbc_env.xport_list[i] == x)
			return;
	if (x->bell && n && tnbc_env.xport_list[0]->bell) {
		FI_WARN(&tnbc_prov, FI_LOG_CORE,
			"FI_TNBC_XPORTS: %s and %s each sleep the engine on "
			"their own doorbell; %s skipped\n",
			tnbc_env.xport_list[0]->name, x->name, x->name);
		return;
	}
	if (n == TNBC_XPORTS_MAX)
		return;
	if (x->bell) {
		memmove(&tnbc_env.xport_list[1], &tnbc_env.xport_list[0],
			n * sizeof(tnbc_env.xport_list[0]));
		tnbc_env.xport_list[0] = x;
	} else {
		tnbc_env.xport_list[n] = x;
	}
	tnbc_env.nxport = n + 1;
}

/* FI_TNBC_XPORTS: a comma list of transport names, each a transport a
 * domain opens; a name the provider does not have is reported and
 * skipped, and a list with none it has leaves fi_getinfo nothing to
 * offer.  A transport named but unusable here stays: opening a domain
 * then fails, saying why. */
void tnbc_xports_choose(void)
{
	char list[256], *save = NULL, *tok;
	bool dflt;

	tnbc_env.xport = NULL;
	tnbc_env.nxport = 0;
	dflt = !tnbc_env.xports;
	if (dflt)
		tnbc_env.xports = TNBC_XPORTS_DEFAULT;
	snprintf(list, sizeof(list), "%s", tnbc_env.xports);
	for (tok = strtok_r(list, ", ", &save); tok;
	     tok = strtok_r(NULL, ", ", &save)) {
		const struct tnbc_xport_ops *x = NULL;

		for (size_t i = 0;
		     i < sizeof(tnbc_xports_all) / sizeof(tnbc_xports_all[0]);
		     i++)
			if (!strcmp(tok, tnbc_xports_all[i]->name))
				x = tnbc_xports_all[i];
		if (!x && !dflt)
			FI_WARN(&tnbc_prov, FI_LOG_CORE,
				"FI_TNBC_XPORTS: no transport \"%s\" (this "
				"build has %s); skipped\n",
				tok, TNBC_XPORTS_BUILT);
		else if (x && dflt && x->usable && !x->usable())
			FI_INFO(&tnbc_prov, FI_LOG_CORE,
				"transport %s: no device here\n", x->name);
		else if (x)
			tnbc_xport_add(x);
	}
	tnbc_env.xport = tnbc_env.nxport ? tnbc_env.xport_list[0] : NULL;
	if (!tnbc_env.xport)
		FI_WARN(&tnbc_prov, FI_LOG_CORE,
			"FI_TNBC_XPORTS=\"%s\" names no transport this "
			"provider has: it offers nothing\n",
			tnbc_env.xports);
}
