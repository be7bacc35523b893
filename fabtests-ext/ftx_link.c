/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The link of one host shared by its processes by priority (tnbc's
 * FI_TNBC_LINK_SHARE, T-NBC's seed 000 section 5.2.2).  Ranks 0 and 1
 * are on one host, rank 2 on another (FTX_HOSTS, tests/netns.sh); on a
 * single machine all three talk over TCP (FI_TNBC_XPORTS=tcp, and no
 * single-copy reads), and the loopback is the shared link.  Rank 0 sends
 * SIZE bytes to rank 2 at priority 200, rank 1 a quarter of that at 100.
 * Rank 0 starts first; rank 1 starts once rank 2 sees rank 0's data
 * arrive, so that the link is rank 0's when rank 1 comes.
 *
 *  link_share  rank 1 waits (its link_holds counts it) until rank 0's
 *              message has all arrived: when it has, less than half of
 *              rank 1's may have (what was seen is printed)
 *  link_off    FI_TNBC_LINK_SHARE=0: nobody is held, the two share the
 *              link, and rank 1's share by then is printed beside
 *
 * Both check every byte.  Skipped on providers without the extension.
 */
#include "common/ftx.h"

#include <rdma/fi_ext_tnbc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG	     0x11c0000000000000ull
#define FILL	     0x5a
#define PRIO_HIGH    200
#define PRIO_LOW     100
#define SIZE_DEFAULT (256u << 20)

static size_t size = SIZE_DEFAULT;

static int
opt(int c, const char *arg)
{
	if (c != 's')
		return -1;
	size = strtoul(arg, NULL, 0);
	return size >= (4u << 20) ? 0 : -1;
}

static bool
share_case(const struct ftx_ctx *ctx)
{
	return strcmp(ctx->tcase->name, "link_share") == 0;
}

/* what rank s sends */
static size_t
len_of(int s)
{
	return s == 0 ? size : size / 4;
}

/* before the rank's first fi_getinfo, so that tnbc reads them */
static void
hints(struct ftx_ctx *ctx, struct fi_info *h)
{
	const char *hosts = getenv("FTX_HOSTS");

	(void) h;
	/* one machine: every byte through TCP's loopback, none read by
	 * the receiver straight from the sender's memory */
	if (!hosts || !*hosts) {
		setenv("FI_TNBC_XPORTS", "tcp", 1);
		setenv("FI_TNBC_CMA", "0", 1);
	}
	setenv("FI_TNBC_LINK_SHARE", share_case(ctx) ? "1" : "0", 1);
	/* a slow run must not end the hold it checks */
	setenv("FI_TNBC_LINK_HOLD_MS", "60000", 1);
}

static void
stats(struct ftx_ctx *ctx, struct fi_tnbc_engine_stats *st)
{
	struct fi_tnbc_ops_domain *ops = NULL;

	if (fi_open_ops(&ctx->domain->fid, FI_TNBC_DOMAIN_OPS_1, 0,
			(void **) &ops, NULL) ||
	    !ops)
		ftx_skip("no %s on a %s domain", FI_TNBC_DOMAIN_OPS_1,
			 ctx->info->fabric_attr->prov_name);
	memset(st, 0, sizeof(*st));
	st->size = sizeof(*st);
	FTX_CHK(ops->engine_stats(ctx->domain, st));
}

static void
sender(struct ftx_ctx *ctx)
{
	struct fi_tnbc_engine_stats st;
	struct fi_tnbc_ops_ep *ops = NULL;
	struct fi_context2 fc;
	struct ftx_comp c;
	size_t len = len_of(ctx->rank);
	uint8_t *buf = malloc(len);
	bool late = false;
	unsigned prio = ctx->rank == 0 ? PRIO_HIGH : PRIO_LOW;

	if (!buf)
		ftx_fail("out of memory");
	if (fi_open_ops(&ctx->ep->fid, FI_TNBC_EP_OPS_1, 0, (void **) &ops,
			NULL) ||
	    !ops)
		ftx_skip("no %s on a %s endpoint", FI_TNBC_EP_OPS_1,
			 ctx->info->fabric_attr->prov_name);
	memset(buf, FILL, len);
	FTX_CHK(ops->set_priority(ctx->ep, prio));
	ftx_barrier(ctx); /* the receives are posted */
	if (ctx->rank == 1) {
		uint64_t end = ftx_now_ns() + 30000000000ull;
		unsigned spins = 0;

		while (!atomic_load(ftx_scratch(0)) && ftx_now_ns() < end)
			ftx_relax(&spins);
		FTX_EXPECT(atomic_load(ftx_scratch(0)),
			   "rank 0's data did not start arriving in 30 s");
	}
	FTX_POST(ctx, fi_tsend(ctx->ep, buf, len, NULL, ctx->addrs[2],
			       TAG | (uint64_t) ctx->rank, &fc));
	/* rank 0 all sent before rank 1 even posted: nothing to hold */
	late = ctx->rank == 1 && atomic_load(ftx_scratch(1));
	ftx_wait_ok(ctx, FTX_TX, &c);
	if (ctx->rank == 0)
		atomic_store(ftx_scratch(1), 1);
	stats(ctx, &st);
	ftx_log("rank %d (priority %u): link_holds %llu link_overruns %llu",
		ctx->rank, prio, (unsigned long long) st.link_holds,
		(unsigned long long) st.link_overruns);
	FTX_EXPECT(st.link_overruns == 0,
		   "a hold ran out FI_TNBC_LINK_HOLD_MS (%llu times)",
		   (unsigned long long) st.link_overruns);
	if (late)
		ftx_log("rank 0's message had all arrived before rank 1 "
			"posted its own: it had nobody to wait for");
	else if (!share_case(ctx) || ctx->rank == 0)
		FTX_EXPECT(st.link_holds == 0,
			   "rank %d was held %llu times (sharing %s, "
			   "priority %u)",
			   ctx->rank, (unsigned long long) st.link_holds,
			   share_case(ctx) ? "on" : "off", prio);
	else
		FTX_EXPECT(st.link_holds > 0,
			   "rank 1 was never held for rank 0's higher "
			   "priority");
	ftx_barrier(ctx);
	free(buf);
}

static size_t
arrived(const uint8_t *p, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += p[i] == FILL;
	return n;
}

/* Bytes of p that have arrived: a stream lands in order, so they are a
 * prefix, found by bisection while the engine writes on. */
static size_t
frontier(const volatile uint8_t *p, size_t len)
{
	size_t lo = 0, hi = len;

	FTX_WATCH_BEGIN();
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p[mid] == FILL)
			lo = mid + 1;
		else
			hi = mid;
	}
	FTX_WATCH_END();
	return lo;
}

static void
receiver(struct ftx_ctx *ctx)
{
	uint8_t *buf[2] = {calloc(1, len_of(0)), calloc(1, len_of(1))};
	struct fi_context2 fc[2];
	struct ftx_comp c;
	size_t f[2] = {0, 0}, other = 0;
	uint64_t end;
	unsigned spins = 0;
	int first = -1;

	if (!buf[0] || !buf[1])
		ftx_fail("out of memory");
	for (int s = 0; s < 2; s++)
		FTX_POST(ctx, fi_trecv(ctx->ep, buf[s], len_of(s), NULL,
				       ctx->addrs[s], TAG | (uint64_t) s, 0,
				       &fc[s]));
	ftx_barrier(ctx);
	/* watch the buffers, not the completions, whose reading may come
	 * late: whose data is all there first, and how much of the other's
	 * is there then */
	end = ftx_now_ns() + 60000000000ull;
	while (!frontier(buf[0], len_of(0)) && ftx_now_ns() < end)
		ftx_relax(&spins);
	atomic_store(ftx_scratch(0), 1); /* rank 1 starts */
	while (first < 0 && ftx_now_ns() < end) {
		for (int s = 0; s < 2 && first < 0; s++) {
			f[s] = frontier(buf[s], len_of(s));
			if (f[s] == len_of(s)) {
				first = s;
				other = frontier(buf[!s], len_of(!s));
			}
		}
		ftx_relax(&spins);
	}
	if (first < 0)
		ftx_fail("neither message arrived within 60 s (%zu of %zu and "
			 "%zu of %zu bytes)",
			 f[0], len_of(0), f[1], len_of(1));
	ftx_wait_ok(ctx, FTX_RX, &c);
	ftx_wait_ok(ctx, FTX_RX, &c);
	ftx_log("rank %d's message arrived first; by then %.0f %% of rank "
		"%d's had (sharing %s)",
		first, 100.0 * (double) other / (double) len_of(!first), !first,
		share_case(ctx) ? "on" : "off");
	for (int s = 0; s < 2; s++)
		FTX_EXPECT(arrived(buf[s], len_of(s)) == len_of(s),
			   "rank %d's message is not all there", s);
	if (share_case(ctx)) {
		FTX_EXPECT(first == 0,
			   "rank 1's (priority %d) message arrived before "
			   "rank 0's (priority %d)",
			   PRIO_LOW, PRIO_HIGH);
		FTX_EXPECT(other < len_of(1) / 2,
			   "%zu of rank 1's %zu bytes had arrived when rank "
			   "0's message had: they shared the link",
			   other, len_of(1));
	}
	ftx_barrier(ctx);
	free(buf[0]);
	free(buf[1]);
}

static int
run(struct ftx_ctx *ctx)
{
	if (ctx->rank == 2)
		receiver(ctx);
	else
		sender(ctx);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "link_share", .run = run},
	{.name = "link_off", .run = run},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_link",
	.desc = "one host's processes share its link by priority",
	.caps = FI_TAGGED,
	.nprocs = 3,
	.min_procs = 3,
	.max_procs = 3,
	.timeout = 120,
	.optstr = "s:",
	.opt = opt,
	.opthelp = "  -s N     bytes each sender sends (default 256 MiB, "
		   "at least 4 MiB)\n",
	.hints = hints,
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
