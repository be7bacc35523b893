/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Provider entry point: what libfabric calls first and last.
 */
#include <pthread.h>

#include "tnbc.h"
#include "tnbc_trigger.h"
#include "tnbc_progress.h"
#include "tnbc_xports.h"
#include "tnbc_attr.h"
#include "coll/tnbc_sched.h"

/*
 * Provider state: the domains whose engine threads run.  libfabric
 * unloads the provider at fi_fini (process exit included); a domain
 * the application never closed must not leave a thread running code
 * that is about to be unmapped.
 */
static struct {
	pthread_mutex_t lock;
	struct tnbc_list domains;
} tnbc_state = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.domains = {&tnbc_state.domains, &tnbc_state.domains},
};

void tnbc_prov_track(struct tnbc_domain *dom, bool add)
{
	pthread_mutex_lock(&tnbc_state.lock);
	if (add)
		tnbc_list_insert_tail(&dom->prov_entry, &tnbc_state.domains);
	else
		tnbc_list_remove(&dom->prov_entry);
	pthread_mutex_unlock(&tnbc_state.lock);
}

static void tnbc_cleanup(void)
{
	struct tnbc_list *it;

	pthread_mutex_lock(&tnbc_state.lock);
	for (it = tnbc_state.domains.next; it != &tnbc_state.domains;
	     it = it->next)
		tnbc_engine_stop(
			tnbc_container_of(it, struct tnbc_domain, prov_entry));
	pthread_mutex_unlock(&tnbc_state.lock);
	tnbc_trig_cache_drain();
	tnbc_sched_cache_drain();
}

FI_EXT_INI
{
	tnbc_prov.getinfo = tnbc_getinfo;
	tnbc_prov.fabric = tnbc_fabric_open;
	tnbc_prov.cleanup = tnbc_cleanup;
	tnbc_param_read();
	tnbc_xports_choose();
	return &tnbc_prov;
}
