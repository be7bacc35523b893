/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A triggered broadcast along a binomial tree rooted at rank 0, moved by
 * the provider alone: every rank pre-posts its receive and the triggered
 * sends to its children (threshold on its receive counter; the root's on
 * a start counter), then every application thread sleeps, making no
 * libfabric call at all, while the root's data goes down the tree.  On
 * waking, each rank first checks its receive buffer's bytes directly,
 * which proves that the provider delivered them on its own, and only
 * then reads counters and completions.
 *
 * A provider without autonomous progress (FI_PROGRESS_MANUAL, or an auto
 * progress that needs application calls) fails this test; that is what
 * it is for.  The sleep is cut into short naps between which a rank looks
 * (memory only) at the end of its buffer, to time the tree.
 *
 *  tree_trig  receives posted with fi_trecv, sends with FI_TRIGGER on the
 *             endpoint's receive counter
 *  tree_dw    receives and sends as deferred work (FI_QUEUE_WORK), the
 *             sends triggered by the receives' completion_cntr
 */
#include "common/ftx_trig.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SIZES  8
#define TAG	   0x7c41000000000000ull
#define MAX_ROUNDS 64
/* scratch slots: the root's start time, then each rank's arrival time */
#define SLOT_T0	     0
#define SLOT_ARR(r)  (1 + (r))
#define SLOT_LATE(r) (1 + FTX_MAX_PROCS + (r))

static size_t sizes[MAX_SIZES] = {8, 65536, 1048576};
static int nsizes = 3;
static int iters = 3;
static unsigned sleep_ms = 300;
static unsigned nap_us = 100;

static int
opt(int c, const char *arg)
{
	switch (c) {
	case 's':
		nsizes = ftx_parse_sizes(arg, sizes, MAX_SIZES);
		return nsizes > 0 ? 0 : -1;
	case 'i':
		iters = atoi(arg);
		return iters > 0 && iters * nsizes <= MAX_ROUNDS ? 0 : -1;
	case 'S':
		sleep_ms = (unsigned) atoi(arg);
		return sleep_ms > 0 ? 0 : -1;
	case 'g':
		nap_us = (unsigned) atoi(arg);
		return 0;
	}
	return -1;
}

static void
bind_cntrs(struct ftx_ctx *ctx)
{
	struct fi_cntr_attr attr = {
		.events = FI_CNTR_EVENTS_COMP,
		.wait_obj = FI_WAIT_UNSPEC,
	};

	FTX_CHK(fi_cntr_open(ctx->domain, &attr, &ctx->cntr[FTX_TX], NULL));
	FTX_CHK(fi_cntr_open(ctx->domain, &attr, &ctx->cntr[FTX_RX], NULL));
	FTX_CHK(fi_ep_bind(ctx->ep, &ctx->cntr[FTX_TX]->fid, FI_SEND));
	FTX_CHK(fi_ep_bind(ctx->ep, &ctx->cntr[FTX_RX]->fid, FI_RECV));
}

/* binomial tree rooted at 0: children of r are r + m for m below r's
 * lowest set bit (below the size for the root) */
static int
children(int r, int n, int *kids)
{
	int low = r ? (r & -r) : 1, nk = 0, m;

	if (!r)
		while (low < n)
			low <<= 1;
	for (m = low >> 1; m >= 1; m >>= 1)
		if (r + m < n)
			kids[nk++] = r + m;
	return nk;
}

static bool
tail_ok(const uint8_t *buf, const uint8_t *ref, size_t len)
{
	size_t t = len < 64 ? len : 64;
	bool ok;

	FTX_WATCH_BEGIN();
	ok = !memcmp(buf + len - t, ref + len - t, t) && !memcmp(buf, ref, t);
	FTX_WATCH_END();
	return ok;
}

/*
 * Sleeps for sleep_ms without a libfabric call; between naps looks at the
 * ends of buf and records when they first matched.  Returns that time, or
 * 0 when they never did.
 */
static uint64_t
sleep_watching(const uint8_t *buf, const uint8_t *ref, size_t len)
{
	uint64_t end = ftx_now_ns() + (uint64_t) sleep_ms * 1000000ull;
	uint64_t seen = 0, now;
	struct timespec ts;

	if (!nap_us) {
		ftx_sleep_ms(sleep_ms);
		return 0;
	}
	while ((now = ftx_now_ns()) < end) {
		if (!seen && buf && tail_ok(buf, ref, len))
			seen = now;
		ts.tv_sec = 0;
		ts.tv_nsec = seen ? 5000000L : (long) nap_us * 1000L;
		if ((uint64_t) ts.tv_nsec > end - now)
			ts.tv_nsec = (long) (end - now);
		nanosleep(&ts, NULL);
	}
	return seen;
}

static int
run_tree(struct ftx_ctx *ctx, bool dw)
{
	int n = ctx->nprocs, me = ctx->rank, kids[FTX_MAX_PROCS];
	int nk = children(me, n, kids), s, it, q = 0, i;
	struct fid_cntr *start = ftx_cntr_new(ctx);
	struct fid_cntr *rc = dw ? ftx_cntr_new(ctx) : ctx->cntr[FTX_RX];
	struct fid_cntr *sc = dw ? ftx_cntr_new(ctx) : ctx->cntr[FTX_TX];
	struct fid_cntr *trig = me ? rc : start;
	struct ftx_trig *tt = calloc(FTX_MAX_PROCS, sizeof(*tt));
	struct ftx_dw *dd = calloc(FTX_MAX_PROCS + 1, sizeof(*dd));
	struct fi_context2 rctx;
	void *sctx[FTX_MAX_PROCS];
	uint64_t nsent = 0;

	if (!tt || !dd)
		ftx_fail("out of memory");
	for (s = 0; s < nsizes; s++) {
		size_t len = sizes[s];
		uint8_t *buf = ftx_alloc(len), *ref = ftx_alloc(len);

		for (it = 0; it < iters; it++, q++) {
			uint64_t seed = ftx_seed(0x42, (uint64_t) q, len);
			uint64_t seen, woke, t0, last = 0, v;
			size_t off;
			int lastr = 0;

			ftx_fill(ref, len, seed);
			if (me == 0)
				memcpy(buf, ref, len);
			else
				memset(buf, 0x5a, len);
			ftx_note("round %d: posting", q);
			if (me && dw) {
				struct ftx_op op = {
					.type = FI_OP_TRECV,
					.ep = ctx->ep,
					.buf = buf,
					.len = len,
					.addr = FI_ADDR_UNSPEC,
					.tag = TAG | (uint64_t) q,
				};

				/* threshold 0: posted at once */
				ftx_dw_post(ctx, &dd[FTX_MAX_PROCS], &op, rc, 0,
					    rc);
			} else if (me) {
				FTX_POST(ctx, fi_trecv(ctx->ep, buf, len, NULL,
						       FI_ADDR_UNSPEC,
						       TAG | (uint64_t) q, 0,
						       &rctx));
			}
			for (i = 0; i < nk; i++) {
				struct ftx_op op = {
					.type = FI_OP_TSEND,
					.ep = ctx->ep,
					.buf = buf,
					.len = len,
					.addr = ctx->addrs[kids[i]],
					.tag = TAG | (uint64_t) q,
				};

				if (dw) {
					ftx_dw_post(ctx, &dd[i], &op, trig,
						    (uint64_t) q + 1, sc);
				} else {
					sctx[i] = &tt[i].tc;
					FTX_POST(ctx,
						 ftx_trig_post(
							 &tt[i], &op, trig,
							 (uint64_t) q + 1));
				}
			}
			atomic_store(ftx_scratch(SLOT_ARR(me)), 0);
			atomic_store(ftx_scratch(SLOT_LATE(me)), 0);
			ftx_barrier(ctx);

			/* from here to the wake-up: no libfabric call */
			ftx_note("round %d: sleeping without libfabric calls",
				 q);
			if (me == 0) {
				t0 = ftx_now_ns();
				atomic_store(ftx_scratch(SLOT_T0), t0);
				FTX_CHK(fi_cntr_add(start, 1));
				seen = t0;
				sleep_watching(NULL, NULL, 0);
			} else {
				seen = sleep_watching(buf, ref, len);
			}
			woke = ftx_now_ns();
			FTX_WATCH_BEGIN(); /* still no libfabric call */
			off = ftx_check(buf, len, seed);
			FTX_WATCH_END();
			atomic_store(ftx_scratch(SLOT_ARR(me)), seen);
			if (off != SIZE_MAX) {
				ftx_defer_fail("round %d (%zu bytes): after "
					       "%u ms asleep the receive "
					       "buffer is not complete (first "
					       "bad byte %zu): the provider "
					       "did not deliver it without "
					       "application calls",
					       q, len, sleep_ms, off);
				/* does it come with progress calls? */
				ftx_note("round %d: driving progress", q);
				while (ftx_check(buf, len, seed) != SIZE_MAX &&
				       ftx_now_ns() - woke < 5000000000ull) {
					ftx_progress(ctx);
					fi_cntr_read(rc);
				}
				if (ftx_check(buf, len, seed) == SIZE_MAX) {
					atomic_store(ftx_scratch(SLOT_LATE(me)),
						     ftx_now_ns() - woke);
					fprintf(stderr,
						"# rank %d: round %d arrived "
						"%.3f ms after the application "
						"started calling libfabric\n",
						me, q,
						(double) (ftx_now_ns() - woke) /
							1e6);
				}
			}
			/* now counters, which may progress */
			if (me) {
				v = fi_cntr_read(rc);
				FTX_SOFT(v == (uint64_t) q + 1 ||
						 off != SIZE_MAX,
					 "round %d: data is there but the "
					 "receive counter reads %llu, "
					 "expected %llu",
					 q, (unsigned long long) v,
					 (unsigned long long) q + 1);
			}
			nsent += (uint64_t) nk;
			v = fi_cntr_read(sc);
			FTX_SOFT(v == nsent || off != SIZE_MAX,
				 "round %d: after %u ms the send counter "
				 "reads %llu, expected %llu (the children's "
				 "sends did not all complete)",
				 q, sleep_ms, (unsigned long long) v,
				 (unsigned long long) nsent);
			ftx_cntr_wait(ctx, sc, nsent, "send counter");
			if (me)
				ftx_cntr_wait(ctx, rc, (uint64_t) q + 1,
					      "receive counter");
			if (!dw) {
				if (me)
					ftx_expect_comp(ctx, FTX_RX, &rctx, 0,
							"receive");
				ftx_expect_comps(ctx, FTX_TX, sctx, (size_t) nk,
						 0, "triggered sends");
			}
			ftx_expect_no_comp(ctx, 0, "tree round");
			ftx_barrier(ctx);
			if (me == 0) {
				t0 = atomic_load(ftx_scratch(SLOT_T0));
				for (i = 1; i < n; i++) {
					uint64_t a = atomic_load(
						ftx_scratch(SLOT_ARR(i)));

					if (!a) {
						last = 0;
						break;
					}
					if (a - t0 > last) {
						last = a - t0;
						lastr = i;
					}
				}
				if (nap_us && last)
					printf("# %s: %s: %zu B round %d: "
					       "all %d ranks had the data "
					       "%.0f us after the start "
					       "(rank %d last; seen to %u "
					       "us)\n",
					       ctx->test->name,
					       ctx->tcase->name, len, q, n,
					       (double) last / 1e3, lastr,
					       nap_us);
				else if (nap_us)
					printf("# %s: %s: %zu B round %d: "
					       "not all ranks had the data "
					       "while asleep\n",
					       ctx->test->name,
					       ctx->tcase->name, len, q);
			}
			ftx_barrier(ctx);
		}
		ftx_free(buf);
		ftx_free(ref);
	}
	free(tt);
	free(dd);
	ftx_barrier(ctx);
	ftx_trig_cleanup(ctx);
	return 0;
}

static int
run_tree_trig(struct ftx_ctx *ctx)
{
	return run_tree(ctx, false);
}

static int
run_tree_dw(struct ftx_ctx *ctx)
{
	return run_tree(ctx, true);
}

static const struct ftx_case cases[] = {
	{.name = "tree_trig", .run = run_tree_trig, .pre_enable = bind_cntrs},
	{.name = "tree_dw", .run = run_tree_dw, .pre_enable = bind_cntrs},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_trigger_bcast",
	.desc = "triggered broadcast tree moved while all ranks sleep",
	.caps = FI_TAGGED | FI_TRIGGER,
	.nprocs = 8,
	.min_procs = 2,
	.max_procs = FTX_MAX_PROCS,
	.timeout = 90,
	.optstr = "s:i:S:g:",
	.opt = opt,
	.opthelp = "  -s LIST  sizes (default 8,64k,1m)\n"
		   "  -i N     rounds per size (default 3)\n"
		   "  -S MS    how long every rank sleeps per round (default "
		   "300)\n"
		   "  -g US    nap between looks at the buffer while asleep; "
		   "0: one\n"
		   "           nanosleep, no timing (default 100)\n",
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
