/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Runner of the tnbc unit tests, and the fixtures they share.
 *
 *   ./tests/unit/tnbc_unit                 all suites
 *   CK_RUN_SUITE=match ./tests/unit/tnbc_unit
 *   CK_RUN_CASE=rendezvous ./tests/unit/tnbc_unit
 *
 * Exit status is non-zero when any test fails.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tnbc_unit.h"

struct fi_provider *fi_prov_ini(void);

struct tnbc_env tu_env_defaults;

void tu_prov_init(void)
{
	static struct fi_provider *prov;

	/* also called from main(), outside any test: no ck_assert here */
	if (!prov) {
		/* tnbc_env holds the built-in defaults until fi_prov_ini()
		 * reads FI_TNBC_*; the tests run on those defaults whatever
		 * the environment says, and set what they need themselves,
		 * but for the transport: FI_TNBC_XPORTS=loop runs the
		 * suites that need no shared memory over the loopback */
		tu_env_defaults = tnbc_env;
		prov = fi_prov_ini();
		if (prov != &tnbc_prov) {
			fprintf(stderr,
				"fi_prov_ini() returned %p, not "
				"&tnbc_prov\n",
				(void *)prov);
			abort();
		}
		tu_env_defaults.xports = tnbc_env.xports;
		memcpy(tu_env_defaults.xport_list, tnbc_env.xport_list,
		       sizeof(tnbc_env.xport_list));
		tu_env_defaults.nxport = tnbc_env.nxport;
		tu_env_defaults.xport = tnbc_env.xport;
		/* the protocol's suites split eager from rendezvous where
		 * shared memory does, over whichever transport they run
		 * (test_tcp.c checks TCP's own split) */
		tu_env_defaults.tcp_eager_size = tu_env_defaults.eager_size;
		tnbc_env = tu_env_defaults;
	}
}

uint16_t tu_xmask(void)
{
	uint16_t m = 0;

	for (unsigned i = 0; i < tnbc_env.nxport; i++)
		m |= (uint16_t)TNBC_XPORT_BIT(tnbc_env.xport_list[i]->id);
	return m;
}

uint64_t tu_now_ms(void)
{
	return tnbc_now_ns() / 1000000u;
}

void tu_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static inline uint8_t tu_pattern(uint32_t seed, size_t i)
{
	uint32_t x =
		seed * 2654435761u + (uint32_t)i * 40503u + (uint32_t)(i >> 16);

	return (uint8_t)(x ^ (x >> 8) ^ (x >> 19));
}

void tu_fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = tu_pattern(seed, i);
}

size_t tu_check(const void *buf, size_t len, uint32_t seed, size_t off)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != tu_pattern(seed, off + i))
			return i;
	return (size_t)-1;
}

/* ------------------------------------------------------------------ */

void tu_dom_open(struct tu_dom *d, const struct fi_info *hints)
{
	int ret;

	memset(d, 0, sizeof(*d));
	tu_prov_init();
	ret = tnbc_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &d->info);
	ck_assert_int_eq(ret, 0);
	ck_assert_ptr_nonnull(d->info);
	ret = tnbc_fabric_open(d->info->fabric_attr, &d->fabric, NULL);
	ck_assert_int_eq(ret, 0);
	ret = fi_domain(d->fabric, d->info, &d->domain, NULL);
	ck_assert_int_eq(ret, 0);
}

void tu_dom_close(struct tu_dom *d)
{
	if (d->domain)
		ck_assert_int_eq(fi_close(&d->domain->fid), 0);
	if (d->fabric)
		ck_assert_int_eq(fi_close(&d->fabric->fid), 0);
	fi_freeinfo(d->info);
	memset(d, 0, sizeof(*d));
}

struct tnbc_domain *tu_tnbc_domain(struct tu_dom *d)
{
	return tnbc_container_of(d->domain, struct tnbc_domain, domain_fid);
}

/* A domain of its own with one endpoint, its auth_key key (NULL: none),
 * addresses of format fmt. */
void tu_kside_open(struct tu_kside *k, const char *key, uint32_t fmt)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};

	ck_assert_ptr_nonnull(hints);
	hints->addr_format = fmt;
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
	k->addrlen = sizeof(k->addr);
	ck_assert_int_eq(fi_getname(&k->ep->fid, k->addr, &k->addrlen), 0);
}

/* k->ep may be closed already (NULL) */
void tu_kside_close(struct tu_kside *k)
{
	if (k->ep)
		ck_assert_int_eq(fi_close(&k->ep->fid), 0);
	ck_assert_int_eq(fi_close(&k->cq->fid), 0);
	ck_assert_int_eq(fi_close(&k->av->fid), 0);
	ck_assert_int_eq(fi_close(&k->dom->fid), 0);
	ck_assert_int_eq(fi_close(&k->fabric->fid), 0);
	fi_freeinfo(k->info);
}

/* Inserts the world's endpoints into its AV, in the domain's format. */
static void tu_world_insert(struct tu_world *w, const struct tnbc_addr *names)
{
	size_t n = w->n;
	int ret;

	switch (w->d.info->addr_format) {
	case FI_ADDR_STR: {
		const char *strs[TU_MAX_EPS];

		for (size_t i = 0; i < n; i++)
			strs[i] = (const char *)w->ep[i].faddr;
		ret = fi_av_insert(w->av, strs, n, w->addr, 0, NULL);
		break;
	}
	case FI_SOCKADDR_IN: {
		struct sockaddr_in sin[TU_MAX_EPS];

		for (size_t i = 0; i < n; i++) {
			ck_assert_uint_eq(w->ep[i].faddr_len, sizeof(sin[i]));
			memcpy(&sin[i], w->ep[i].faddr, sizeof(sin[i]));
		}
		ret = fi_av_insert(w->av, sin, n, w->addr, 0, NULL);
		break;
	}
	default:
		ret = fi_av_insert(w->av, names, n, w->addr, 0, NULL);
		break;
	}
	ck_assert_int_eq(ret, (int)n);
}

void tu_world_open(struct tu_world *w, size_t n,
		   const struct tu_world_opts *opts)
{
	struct tnbc_addr names[TU_MAX_EPS];
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	uint64_t sel = opts ? opts->cq_bind_flags : 0;
	int ret;

	ck_assert(n >= 1 && n <= TU_MAX_EPS);
	memset(w, 0, sizeof(*w));
	tu_dom_open(&w->d, opts ? opts->hints : NULL);
	w->n = n;
	for (size_t i = 0; i < n; i++) {
		struct tu_ep *e = &w->ep[i];
		struct tnbc_ep *te;

		ret = fi_endpoint(w->d.domain, w->d.info, &e->ep, NULL);
		ck_assert_int_eq(ret, 0);
		e->faddr_len = sizeof(e->faddr);
		ret = fi_getname(&e->ep->fid, e->faddr, &e->faddr_len);
		ck_assert_int_eq(ret, 0);
		/* the native address, whatever the format */
		te = tnbc_container_of(e->ep, struct tnbc_ep, ep_fid);
		names[i].name = te->name;
		memcpy(names[i].xaddr, te->xaddr, sizeof(names[i].xaddr));
		if (w->d.info->addr_format == FI_FORMAT_UNSPEC) {
			ck_assert_uint_eq(e->faddr_len, sizeof(names[i]));
			ck_assert_mem_eq(e->faddr, &names[i], sizeof(names[i]));
		}
		e->addr = names[i];
		e->name = names[i].name;
	}
	ret = fi_av_open(w->d.domain, &av_attr, &w->av, NULL);
	ck_assert_int_eq(ret, 0);
	/* a socket address is asked who it is, and an endpoint answers
	 * once enabled: the others go in when they are */
	if (w->d.info->addr_format == FI_FORMAT_UNSPEC)
		tu_world_insert(w, names);

	for (size_t i = 0; i < n; i++) {
		struct tu_ep *e = &w->ep[i];
		struct fi_cq_attr cq_attr = {
			.format = FI_CQ_FORMAT_TAGGED,
			.wait_obj = opts && opts->cq_wait_none ? FI_WAIT_NONE
				    : opts && opts->cq_wait    ? opts->cq_wait
							    : FI_WAIT_UNSPEC};

		ck_assert_int_eq(
			fi_cq_open(w->d.domain, &cq_attr, &e->tx_cq, NULL), 0);
		ck_assert_int_eq(
			fi_cq_open(w->d.domain, &cq_attr, &e->rx_cq, NULL), 0);
		ck_assert_int_eq(fi_ep_bind(e->ep, &w->av->fid, 0), 0);
		ck_assert_int_eq(
			fi_ep_bind(e->ep, &e->tx_cq->fid, FI_TRANSMIT | sel),
			0);
		ck_assert_int_eq(
			fi_ep_bind(e->ep, &e->rx_cq->fid, FI_RECV | sel), 0);
		if (opts && opts->cntrs) {
			struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP,
						  .wait_obj = FI_WAIT_UNSPEC};

			ck_assert_int_eq(fi_cntr_open(w->d.domain, &ca,
						      &e->tx_cntr, NULL),
					 0);
			ck_assert_int_eq(fi_cntr_open(w->d.domain, &ca,
						      &e->rx_cntr, NULL),
					 0);
			ck_assert_int_eq(
				fi_ep_bind(e->ep, &e->tx_cntr->fid, FI_SEND),
				0);
			ck_assert_int_eq(
				fi_ep_bind(e->ep, &e->rx_cntr->fid, FI_RECV),
				0);
		}
		ck_assert_int_eq(fi_enable(e->ep), 0);
	}
	if (w->d.info->addr_format != FI_FORMAT_UNSPEC)
		tu_world_insert(w, names);
}

void tu_world_close(struct tu_world *w)
{
	for (size_t i = 0; i < w->n; i++) {
		struct tu_ep *e = &w->ep[i];

		if (e->ep) /* a test may have closed it already */
			ck_assert_int_eq(fi_close(&e->ep->fid), 0);
		ck_assert_int_eq(fi_close(&e->tx_cq->fid), 0);
		ck_assert_int_eq(fi_close(&e->rx_cq->fid), 0);
		if (e->tx_cntr)
			ck_assert_int_eq(fi_close(&e->tx_cntr->fid), 0);
		if (e->rx_cntr)
			ck_assert_int_eq(fi_close(&e->rx_cntr->fid), 0);
	}
	ck_assert_int_eq(fi_close(&w->av->fid), 0);
	tu_dom_close(&w->d);
}

ssize_t tu_cq_wait(struct fid_cq *cq, struct fi_cq_tagged_entry *e,
		   fi_addr_t *src, struct fi_cq_err_entry *err,
		   unsigned timeout_ms)
{
	uint64_t deadline = tu_now_ms() + timeout_ms;
	struct fi_cq_tagged_entry tmp_e;
	fi_addr_t tmp_src;
	ssize_t ret;

	for (;;) {
		ret = fi_cq_readfrom(cq, e ? e : &tmp_e, 1,
				     src ? src : &tmp_src);
		if (ret == 1)
			return 1;
		if (ret == -FI_EAVAIL) {
			struct fi_cq_err_entry tmp_err;
			struct fi_cq_err_entry *ee = err ? err : &tmp_err;

			memset(ee, 0, sizeof(*ee));
			ck_assert_int_eq(fi_cq_readerr(cq, ee, 0), 1);
			return -FI_EAVAIL;
		}
		ck_assert_msg(ret == -FI_EAGAIN, "fi_cq_read: %zd", ret);
		if (tu_now_ms() >= deadline)
			return -FI_ETIMEDOUT;
		sched_yield();
	}
}

void tu_cq_expect(struct fid_cq *cq, struct fi_cq_tagged_entry *e,
		  fi_addr_t *src)
{
	struct fi_cq_err_entry err;
	ssize_t ret = tu_cq_wait(cq, e, src, &err, TU_WAIT_MS);

	ck_assert_msg(ret != -FI_EAVAIL,
		      "unexpected error completion: err %d (%s) ctx %p",
		      err.err, fi_strerror(err.err), err.op_context);
	ck_assert_msg(ret == 1, "no completion within %d ms", TU_WAIT_MS);
}

void tu_cq_expect_err(struct fid_cq *cq, struct fi_cq_err_entry *err)
{
	struct fi_cq_tagged_entry e;
	ssize_t ret = tu_cq_wait(cq, &e, NULL, err, TU_WAIT_MS);

	ck_assert_msg(ret != 1, "expected an error, got a completion ctx %p",
		      e.op_context);
	ck_assert_msg(ret == -FI_EAVAIL, "no error completion within %d ms",
		      TU_WAIT_MS);
}

bool tu_cq_quiet(struct fid_cq *cq, unsigned ms)
{
	struct fi_cq_err_entry err;

	return tu_cq_wait(cq, NULL, NULL, &err, ms) == -FI_ETIMEDOUT;
}

/* Waits until e sleeps without a bound: its count of sleeps stays put
 * for 200 ms, longer than any bounded sleep (10 ms steps), and it is in
 * the last of them. */
void tu_engine_until_asleep(struct tnbc_engine *e)
{
	uint64_t sleeps = atomic_load(&e->sleeps);

	for (uint64_t still = tu_now_ms(), end = still + 3 * TU_WAIT_MS;
	     tu_now_ms() - still < 200 ||
	     atomic_load(&e->sleeps) != atomic_load(&e->wakeups) + 1;) {
		ck_assert_msg(tu_now_ms() < end, "the engine never slept");
		if (atomic_load(&e->sleeps) != sleeps) {
			sleeps = atomic_load(&e->sleeps);
			still = tu_now_ms();
		}
		tu_sleep_ms(5);
	}
}

bool tu_cntr_reach(struct fid_cntr *cntr, uint64_t value, unsigned timeout_ms)
{
	uint64_t deadline = tu_now_ms() + timeout_ms;

	while (fi_cntr_read(cntr) < value) {
		if (tu_now_ms() >= deadline)
			return false;
		sched_yield();
	}
	return true;
}

bool tu_cntr_settle(struct fid_cntr *cntr, uint64_t n, unsigned timeout_ms)
{
	uint64_t deadline = tu_now_ms() + timeout_ms;

	while (fi_cntr_read(cntr) + fi_cntr_readerr(cntr) < n) {
		if (tu_now_ms() >= deadline)
			return false;
		sched_yield();
	}
	return true;
}

void tu_engine_stats(struct fid_domain *domain, struct fi_tnbc_engine_stats *st)
{
	struct fi_tnbc_ops_domain *ops = NULL;
	int ret;

	ret = fi_open_ops(&domain->fid, FI_TNBC_DOMAIN_OPS_1, 0, (void **)&ops,
			  NULL);
	ck_assert_int_eq(ret, 0);
	ck_assert_ptr_nonnull(ops);
	ck_assert_uint_ge(ops->size, sizeof(*ops));
	memset(st, 0, sizeof(*st));
	st->size = sizeof(*st);
	ck_assert_int_eq(ops->engine_stats(domain, st), 0);
}

/* ------------------------------------------------------------------ */

/* A test that fails or times out dies before it closes its endpoints;
 * remove the shared-memory regions such dead test processes left behind
 * during this run (only those: never a live process's). */
static void tu_shm_cleanup(time_t since)
{
	DIR *dir = opendir("/dev/shm");
	struct dirent *de;

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		char path[512];
		struct stat st;
		long pid;
		char *end;

		if (strncmp(de->d_name, "tnbc-", 5))
			continue;
		pid = strtol(de->d_name + 5, &end, 10);
		if (end == de->d_name + 5 || *end != '-' || pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", de->d_name);
		if (stat(path, &st) || st.st_mtime < since)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		shm_unlink(path + strlen("/dev/shm")); /* "/tnbc-..." */
	}
	closedir(dir);
}

/* Whether name is a word of list (words apart by spaces or commas). */
static bool tu_listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p += len)
		if ((p == list || p[-1] == ' ' || p[-1] == ',') &&
		    (p[len] == '\0' || p[len] == ' ' || p[len] == ','))
			return true;
	return false;
}

/* TNBC_UNIT_SUITES names the suites to run (all when unset),
 * TNBC_UNIT_SKIP those to leave out; the word "pure" there stands for
 * every suite that never opens an endpoint, which a run over another
 * transport has no reason to repeat (tests/unit-tcp.sh).  The soft-RoCE
 * guest, where everything runs ten times slower, runs in a sanitizer
 * build only the suites that drive verbs hardest (tests/verbs-guest.sh). */
static bool tu_suite_wanted(const char *name, bool pure)
{
	const char *only = getenv("TNBC_UNIT_SUITES"),
		   *skip = getenv("TNBC_UNIT_SKIP");

	if (only && *only && !tu_listed(only, name))
		return false;
	return !skip ||
	       !(tu_listed(skip, name) || (pure && tu_listed(skip, "pure")));
}

/* pure: the suite opens no endpoint (tables, maths, a hash) */
static void tu_add(SRunner *sr, const char *name, Suite *(*make)(void),
		   bool pure)
{
	if (tu_suite_wanted(name, pure))
		srunner_add_suite(sr, make());
	else
		printf("suite %s left out\n", name);
}

int main(void)
{
	time_t start = time(NULL);
	SRunner *sr;
	int failed;

	tu_prov_init();
	sr = srunner_create(NULL);
	tu_add(sr, "attr", tu_attr_suite, false);
	tu_add(sr, "av", tu_av_suite, false);
	tu_add(sr, "addr", tu_addr_suite, false);
	tu_add(sr, "cq", tu_cq_suite, false);
	tu_add(sr, "match", tu_match_suite, false);
	tu_add(sr, "rma", tu_rma_suite, false);
	tu_add(sr, "trigger", tu_trigger_suite, false);
	tu_add(sr, "tree", tu_tree_suite, true);
	tu_add(sr, "plp", tu_plp_suite, true);
	tu_add(sr, "alg", tu_alg_suite, true);
	tu_add(sr, "coll", tu_coll_suite, false);
	tu_add(sr, "desc", tu_desc_suite, false);
	tu_add(sr, "hmac", tu_hmac_suite, true);
	tu_add(sr, "link", tu_link_suite, true);
	/* TCP's own, forced onto it, where this build has it */
	for (unsigned i = 0; i < tnbc_env.nxport; i++)
		if (tnbc_env.xport_list[i] == &tnbc_tcp_ops) {
			tu_add(sr, "tcp", tu_tcp_suite, false);
			tu_add(sr, "tcp_trust", tu_tcp_trust_suite, false);
		}
#ifdef TNBC_HAVE_VERBS
	/* verbs' own, where a device is (the soft-RoCE guest) */
	for (unsigned i = 0; i < tnbc_env.nxport; i++)
		if (tnbc_env.xport_list[i] == &tnbc_verbs_ops)
			tu_add(sr, "verbs", tu_verbs_suite, false);
#endif
	/* the shared-memory transport's own: its queues, regions and
	 * hostile peers (the protocol's are the suites above) */
	if (tnbc_env.xport == &tnbc_shm_ops) {
		tu_add(sr, "proto", tu_proto_suite, false);
		tu_add(sr, "hostile", tu_hostile_suite, false);
	} else {
		printf("transport %s: the suites proto and hostile "
		       "(shared memory's) left out\n",
		       tnbc_env.xport->name);
	}
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tu_shm_cleanup(start - 1);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
