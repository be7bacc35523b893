/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Triggered operations, measured; prints figures, never judges them.
 *
 * Latency: an 8-byte tagged ping-pong where both sides' sends are deferred
 * work: rank 0's send fires on a counter it increments, rank 1's reply
 * fires on the completion counter of its receive, rank 0 watches the
 * completion counter of its own receive.  Half the round trip is the time
 * from a counter increment to the remote completion of the send it
 * triggered.  The same run measures a plain 8-byte fi_tsend ping-pong for
 * comparison.  It runs twice: with rank 1's application thread polling
 * its counter (every hop is the trigger unit's work, nobody waits for a
 * sleeping thread: the cost of triggering itself), and with rank 1's
 * application thread blocked in fi_cntr_wait except to refill the
 * queues of requests (rank 1's engine fires every reply: the soft NIC
 * working alone, which includes waking it).
 *
 * Throughput: deferred FI_OP_CNTR_ADD requests queued on one counter (with
 * scattered thresholds) then fired by one fi_cntr_add, and queued with
 * their threshold already met (each fires at once); deferred 8-byte
 * tsends, at most TS_WINDOW in flight: the first ones fire on one
 * fi_cntr_add, each later one on the completion of the one TS_WINDOW
 * before it (their shared completion_cntr), so the provider clocks the
 * whole stream itself.
 *
 * Output: '#' comments and "metric value unit" lines.
 */
#include "common/ftx_trig.h"

#include <rdma/fi_ext_tnbc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG   0x7c45000000000000ull
#define PROBE 50
/* requests queued ahead in the triggered ping-pong, and slots for them */
#define AHEAD 128
#define RING  (4 * AHEAD)
/* deferred sends in flight in the send rate measurement */
#define TS_WINDOW 64

static int iters = 10000, warmup = 1000, nreq = 10000;
static double budget_s = 3.0;
static bool do_lat = true, do_cntr = true, do_tsend = true;
/* a wait that sees no progress for this long gives up */
#define STALL_NS 5000000000ull

static int
parts(const char *arg)
{
	do_lat = strstr(arg, "lat") != NULL;
	do_cntr = strstr(arg, "cntr") != NULL;
	do_tsend = strstr(arg, "tsend") != NULL;
	return do_lat || do_cntr || do_tsend ? 0 : -1;
}

static int
opt(int c, const char *arg)
{
	switch (c) {
	case 'i':
		iters = atoi(arg);
		return iters > 0 ? 0 : -1;
	case 'w':
		warmup = atoi(arg);
		return warmup >= 0 ? 0 : -1;
	case 'N':
		nreq = atoi(arg);
		return nreq > 0 ? 0 : -1;
	case 'T':
		budget_s = atof(arg);
		return budget_s > 0 ? 0 : -1;
	case 'P':
		return parts(arg);
	}
	return -1;
}

static void
metric(struct ftx_ctx *ctx, const char *name, double v, const char *unit)
{
	if (ctx->rank == 0)
		printf("%-26s %16.3f %s\n", name, v, unit);
}

/* ------------------------------------------------------------- plain */

static uint64_t
plain_pingpong(struct ftx_ctx *ctx, int n)
{
	uint64_t sb = 1, rb = 0, t0 = 0, sum = 0;
	struct fi_context2 sctx, rctx;
	int peer = 1 - ctx->rank, i;

	ftx_barrier(ctx);
	for (i = 0; i < n; i++) {
		FTX_POST(ctx, fi_trecv(ctx->ep, &rb, 8, NULL, ctx->addrs[peer],
				       TAG, 0, &rctx));
		if (ctx->rank == 0) {
			t0 = ftx_now_ns();
			FTX_POST(ctx, fi_tsend(ctx->ep, &sb, 8, NULL,
					       ctx->addrs[peer], TAG, &sctx));
			ftx_wait_n_ok(ctx, FTX_RX, 1);
			sum += ftx_now_ns() - t0;
			ftx_wait_n_ok(ctx, FTX_TX, 1);
		} else {
			ftx_wait_n_ok(ctx, FTX_RX, 1);
			FTX_POST(ctx, fi_tsend(ctx->ep, &sb, 8, NULL,
					       ctx->addrs[peer], TAG, &sctx));
			ftx_wait_n_ok(ctx, FTX_TX, 1);
		}
	}
	return sum;
}

/* --------------------------------------------------------- triggered */

struct tpp {
	struct ftx_dw send[RING];
	struct ftx_dw recv[RING];
	uint64_t sbuf, rbuf[RING];
	struct fid_cntr *start, *rc, *sc;
	int queued;
};

/* queues iteration j (1-based): receive j on rc >= j-1, send j */
static void
tpp_queue(struct ftx_ctx *ctx, struct tpp *p, int j)
{
	int s = j % RING, peer = 1 - ctx->rank;
	struct ftx_op r = {
		.type = FI_OP_TRECV,
		.ep = ctx->ep,
		.buf = &p->rbuf[s],
		.len = 8,
		.addr = ctx->addrs[peer],
		.tag = TAG,
	};
	struct ftx_op w = {
		.type = FI_OP_TSEND,
		.ep = ctx->ep,
		.buf = &p->sbuf,
		.len = 8,
		.addr = ctx->addrs[peer],
		.tag = TAG,
	};

	/* slot s last served iteration j - RING: it must be complete */
	if (j > RING && (fi_cntr_read(p->sc) < (uint64_t) (j - RING) ||
			 fi_cntr_read(p->rc) < (uint64_t) (j - RING)))
		ftx_cntr_wait(ctx, p->sc, (uint64_t) (j - RING),
			      "send completions before reusing a slot");
	ftx_dw_post(ctx, &p->recv[s], &r, p->rc, (uint64_t) j - 1, p->rc);
	/* rank 0's send fires on its start counter, rank 1's reply on the
	 * completion of receive j */
	ftx_dw_post(ctx, &p->send[s], &w, ctx->rank ? p->rc : p->start,
		    (uint64_t) j, p->sc);
	p->queued = j;
}

/* blocks in fi_cntr_wait until c reaches v, bounded */
static void
wait_blocking(struct ftx_ctx *ctx, struct fid_cntr *c, uint64_t v)
{
	uint64_t last = fi_cntr_read(c), since = ftx_now_ns(), now;
	int ret;

	while (fi_cntr_read(c) < v) {
		now = ftx_now_ns();
		if (fi_cntr_read(c) != last) {
			last = fi_cntr_read(c);
			since = now;
		} else if (now - since > STALL_NS) {
			ftx_fail("stalled: counter stuck at %llu for 5 s, "
				 "waiting for %llu",
				 (unsigned long long) last,
				 (unsigned long long) v);
		}
		ret = fi_cntr_wait(c, v, 100);
		/* sockets answers a timeout with +FI_ETIMEDOUT */
		if (ret && ret != -FI_ETIMEDOUT && ret != FI_ETIMEDOUT &&
		    ret != -FI_EAGAIN)
			ftx_fail("fi_cntr_wait: %s (%d), counter %llu, errors "
				 "%llu",
				 fi_strerror(-ret), ret,
				 (unsigned long long) fi_cntr_read(c),
				 (unsigned long long) fi_cntr_readerr(c));
		if (ftx_expired(ctx))
			ftx_fail("timeout: counter %llu, waiting for %llu",
				 (unsigned long long) fi_cntr_read(c),
				 (unsigned long long) v);
		ftx_progress(ctx);
	}
}

/* spins on fi_cntr_read until c reaches v, bounded */
static void
wait_polling(struct ftx_ctx *ctx, struct fid_cntr *c, uint64_t v)
{
	uint64_t since = ftx_now_ns();
	unsigned spins = 0;

	while (fi_cntr_read(c) < v) {
		if (!(++spins & 0xffff) &&
		    (ftx_expired(ctx) || ftx_now_ns() - since > STALL_NS))
			ftx_fail("stalled: counter at %llu, waiting for %llu",
				 (unsigned long long) fi_cntr_read(c),
				 (unsigned long long) v);
	}
}

/* n round trips; returns the time of the last n - w on rank 0.  With
 * polls, rank 1 spins on its counter instead of blocking. */
static uint64_t
trig_pingpong(struct ftx_ctx *ctx, int n, int w, bool polls)
{
	struct tpp *p = calloc(1, sizeof(*p));
	uint64_t sum = 0, t0;
	unsigned spins;
	int i, j;

	if (!p)
		ftx_fail("out of memory");
	p->start = ftx_cntr_new(ctx);
	p->rc = ftx_cntr_new(ctx);
	p->sc = ftx_cntr_new(ctx);
	for (j = 1; j <= n && j <= AHEAD; j++)
		tpp_queue(ctx, p, j);
	ftx_barrier(ctx);
	if (ctx->rank == 1) {
		/* refill by halves; the replies never wait for this thread */
		while (p->queued < n) {
			if (polls)
				wait_polling(
					ctx, p->rc,
					(uint64_t) (p->queued - AHEAD / 2));
			else
				wait_blocking(
					ctx, p->rc,
					(uint64_t) (p->queued - AHEAD / 2));
			for (j = p->queued + 1;
			     j <= n && j <= p->queued + AHEAD / 2; j++)
				tpp_queue(ctx, p, j);
		}
		wait_blocking(ctx, p->sc, (uint64_t) n);
	} else {
		for (i = 1; i <= n; i++) {
			while (p->queued < n && p->queued < i + AHEAD - 1)
				tpp_queue(ctx, p, p->queued + 1);
			spins = 0;
			t0 = ftx_now_ns();
			FTX_CHK(fi_cntr_add(p->start, 1));
			while (fi_cntr_read(p->rc) < (uint64_t) i) {
				if (!(++spins & 0xffff) &&
				    (ftx_expired(ctx) ||
				     ftx_now_ns() - t0 > STALL_NS))
					ftx_fail(
						"timeout in triggered "
						"ping-pong %d: receive "
						"counter %llu, errors %llu",
						i,
						(unsigned long long)
							fi_cntr_read(p->rc),
						(unsigned long long)
							fi_cntr_readerr(p->rc));
			}
			if (i > w)
				sum += ftx_now_ns() - t0;
		}
		ftx_cntr_wait(ctx, p->sc, (uint64_t) n, "send completions");
	}
	ftx_barrier(ctx);
	ftx_trig_cleanup_lenient(ctx);
	free(p);
	return sum;
}

/* ----------------------------------------------------------- latency */

static void
latency(struct ftx_ctx *ctx)
{
	uint64_t t;
	double per, plain, trig;
	int n, w;

	/* plain: probe, then size the run to the budget */
	plain_pingpong(ctx, 10);
	t = plain_pingpong(ctx, PROBE);
	per = (double) t / PROBE / 1e9;
	n = iters;
	if (per * (n + warmup) > budget_s)
		n = (int) (budget_s / per * 0.8) + 1;
	w = warmup < n / 10 ? warmup : n / 10;
	n = (int) ftx_bcast(ctx, 0, (uint64_t) n);
	w = (int) ftx_bcast(ctx, 1, (uint64_t) w);
	plain_pingpong(ctx, w);
	t = plain_pingpong(ctx, n);
	plain = (double) t / 1e3 / n / 2;
	metric(ctx, "lat_plain_iters", n, "iterations");
	metric(ctx, "lat_plain_us", plain, "us");

	for (int polls = 1; polls >= 0; polls--) {
		const char *v = polls ? "poll" : "sleep";
		char name[64];

		t = trig_pingpong(ctx, PROBE + 10, 10, polls);
		per = (double) t / PROBE / 1e9;
		n = iters;
		if (per * (n + warmup) > budget_s)
			n = (int) (budget_s / per * 0.8) + 1;
		w = warmup < n / 10 ? warmup : n / 10;
		n = (int) ftx_bcast(ctx, 2, (uint64_t) n);
		w = (int) ftx_bcast(ctx, 3, (uint64_t) w);
		t = trig_pingpong(ctx, n + w, w, polls);
		trig = (double) t / 1e3 / n / 2;
		snprintf(name, sizeof(name), "lat_trig_%s_iters", v);
		metric(ctx, name, n, "iterations");
		snprintf(name, sizeof(name), "lat_trig_%s_us", v);
		metric(ctx, name, trig, "us");
		snprintf(name, sizeof(name), "lat_%s_ratio", v);
		metric(ctx, name, plain > 0 ? trig / plain : 0, "trig/plain");
	}
}

/* -------------------------------------------------------- throughput */

static void
cntr_rates(struct ftx_ctx *ctx)
{
	struct ftx_dw *d;
	struct fid_cntr *c, *t;
	uint64_t t0, t1, t2;
	int i, n = nreq;

	if (ctx->rank != 0) {
		ftx_barrier(ctx);
		return;
	}
	d = calloc((size_t) n, sizeof(*d));
	if (!d)
		ftx_fail("out of memory");
	c = ftx_cntr_new(ctx);
	t = ftx_cntr_new(ctx);
	/* thresholds 1..n in a scattered order (7919 is prime) */
	t0 = ftx_now_ns();
	for (i = 0; i < n; i++) {
		struct ftx_op op = {.type = FI_OP_CNTR_ADD,
				    .cntr = t,
				    .value = 1};

		ftx_dw_post(ctx, &d[i], &op, c,
			    (uint64_t) i * 7919 % (uint64_t) n + 1, NULL);
	}
	t1 = ftx_now_ns();
	FTX_CHK(fi_cntr_add(c, (uint64_t) n));
	ftx_cntr_wait(ctx, t, (uint64_t) n, "fired counter ops");
	t2 = ftx_now_ns();
	metric(ctx, "cntr_add_n", n, "requests");
	metric(ctx, "cntr_add_queue_rate", n / ((double) (t1 - t0) / 1e9),
	       "req/s");
	metric(ctx, "cntr_add_fire_rate", n / ((double) (t2 - t1) / 1e9),
	       "req/s");
	metric(ctx, "cntr_add_total_rate", n / ((double) (t2 - t0) / 1e9),
	       "req/s");
	/* thresholds already met: each fires as it is queued */
	t0 = ftx_now_ns();
	for (i = 0; i < n; i++) {
		struct ftx_op op = {.type = FI_OP_CNTR_ADD,
				    .cntr = t,
				    .value = 1};

		ftx_dw_post(ctx, &d[i], &op, c, (uint64_t) n, NULL);
	}
	ftx_cntr_wait(ctx, t, 2 * (uint64_t) n, "immediate counter ops");
	t1 = ftx_now_ns();
	metric(ctx, "cntr_add_immediate_rate", n / ((double) (t1 - t0) / 1e9),
	       "req/s");
	ftx_trig_cleanup_lenient(ctx);
	free(d);
	ftx_barrier(ctx);
}

static void
tsend_rates(struct ftx_ctx *ctx)
{
	int n = nreq, i, posted = 0, done = 0;

	if (ctx->rank == 1) {
		enum { WIN = 256 };
		uint64_t rb[WIN];
		struct fi_context2 rctx[WIN];
		struct ftx_comp c;

		for (; posted < n && posted < WIN; posted++)
			FTX_POST(ctx, fi_trecv(ctx->ep, &rb[posted], 8, NULL,
					       FI_ADDR_UNSPEC, TAG, 0,
					       &rctx[posted]));
		ftx_barrier(ctx);
		while (done < n) {
			ftx_wait_ok(ctx, FTX_RX, &c);
			done++;
			if (posted < n) {
				int k = (int) ((struct fi_context2 *)
						       c.op_context -
					       rctx);

				FTX_POST(ctx, fi_trecv(ctx->ep, &rb[k], 8, NULL,
						       FI_ADDR_UNSPEC, TAG, 0,
						       &rctx[k]));
				posted++;
			}
		}
		ftx_barrier(ctx);
		return;
	}
	{
		struct ftx_dw *d = calloc((size_t) n, sizeof(*d));
		struct fid_cntr *c = ftx_cntr_new(ctx), *sc = ftx_cntr_new(ctx);
		uint64_t sb = 7, t0, t1, t2;

		if (!d)
			ftx_fail("out of memory");
		ftx_barrier(ctx);
		t0 = ftx_now_ns();
		for (i = 0; i < n; i++) {
			struct ftx_op op = {
				.type = FI_OP_TSEND,
				.ep = ctx->ep,
				.buf = &sb,
				.len = 8,
				.addr = ctx->addrs[1],
				.tag = TAG,
			};

			/* the first WINDOW on the start counter, then each
			 * when the one WINDOW ahead of it completed */
			if (i < TS_WINDOW)
				ftx_dw_post(ctx, &d[i], &op, c, 1, sc);
			else
				ftx_dw_post(ctx, &d[i], &op, sc,
					    (uint64_t) (i - TS_WINDOW + 1), sc);
		}
		t1 = ftx_now_ns();
		FTX_CHK(fi_cntr_add(c, 1));
		ftx_cntr_wait(ctx, sc, (uint64_t) n, "fired sends");
		t2 = ftx_now_ns();
		metric(ctx, "tsend8_n", n, "requests");
		metric(ctx, "tsend8_queue_rate", n / ((double) (t1 - t0) / 1e9),
		       "req/s");
		metric(ctx, "tsend8_fire_rate", n / ((double) (t2 - t1) / 1e9),
		       "req/s");
		metric(ctx, "tsend8_total_rate", n / ((double) (t2 - t0) / 1e9),
		       "req/s");
		ftx_barrier(ctx);
		ftx_trig_cleanup_lenient(ctx);
		free(d);
	}
}

static void
print_stats(struct ftx_ctx *ctx)
{
	struct fi_tnbc_engine_stats st;
	uint64_t ops;

	if (ctx->rank != 0 || !ftx_tnbc_stats(ctx, &st))
		return;
	ops = st.trig_queued + st.trig_fired;
	printf("# tnbc rank 0: trig_queued %llu fired %llu (by engine "
	       "%llu) canceled %llu pending %llu heap_steps %llu (%.2f per "
	       "queue/fire)\n",
	       (unsigned long long) st.trig_queued,
	       (unsigned long long) st.trig_fired,
	       (unsigned long long) st.trig_fired_by_engine,
	       (unsigned long long) st.trig_canceled,
	       (unsigned long long) st.trig_pending,
	       (unsigned long long) st.trig_heap_steps,
	       ops ? (double) st.trig_heap_steps / (double) ops : 0.0);
}

static int
run(struct ftx_ctx *ctx)
{
	if (ctx->rank == 0) {
		printf("# ftx_bench_trigger: provider %s, up to %d "
		       "iterations and %.1f s per latency, %d warmup, %d "
		       "requests per rate\n",
		       ctx->info->fabric_attr->prov_name, iters, budget_s,
		       warmup, nreq);
		printf("# %-24s %16s %s\n", "metric", "value", "unit");
	}
	if (do_lat)
		latency(ctx);
	if (do_cntr)
		cntr_rates(ctx);
	if (do_tsend)
		tsend_rates(ctx);
	print_stats(ctx);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "bench", .run = run},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_bench_trigger",
	.desc = "triggered operations: latency and request rates",
	.caps = FI_TAGGED | FI_DIRECTED_RECV | FI_TRIGGER,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = 2,
	.timeout = 120,
	.optstr = "i:w:N:T:P:",
	.opt = opt,
	.opthelp = "  -i N     timed ping-pong iterations (default 10000)\n"
		   "  -w N     warmup iterations (default 1000)\n"
		   "  -N N     requests per rate measurement (default 10000)\n"
		   "  -T SEC   time budget per latency figure (default 3)\n"
		   "  -P LIST  parts to run: lat,cntr,tsend (default all)\n",
	.cases = cases,
	.quiet = true,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
