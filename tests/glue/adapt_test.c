/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * T-NBC's trial against the plain way at a call site
 * (mpi-glue/core/tg_adapt.c), with a clock the test sets: the ways
 * alternate T-NBC first, the first call of each a warm-up that counts
 * for neither, T-NBC is kept only 5 % ahead on the mean period, each
 * way has its own trials, the verdict holds, a T-NBC call (the warm-up
 * too) is settled before the next call's clock is read only while
 * trying, a clock that did not move counts nothing, trials 0 means T-NBC
 * always.
 */
#include <stdint.h>
#include <stdio.h>

#include "../../mpi-glue/core/tg_adapt.h"

static int fails;

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "adapt_test:%d: FAIL: ", __LINE__);    \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			fails++;                                               \
		}                                                              \
	} while (0)

static const char *way_name(enum tg_way w)
{
	return w == TG_WAY_TNBC ? "tnbc" : "plain";
}

/* Runs a site through calls spaced by the periods given (the period
 * after call k is gap[k]); checks each call's way against want (a
 * string of 't' and 'p'). */
static void run(const char *name, unsigned trials, const uint64_t *gap,
		const char *want)
{
	struct tg_adapt a;
	uint64_t now = 1000;

	tg_adapt_init(&a);
	for (int k = 0; want[k]; k++) {
		enum tg_way w = tg_adapt_pick(&a, now, trials);
		enum tg_way e = want[k] == 't' ? TG_WAY_TNBC : TG_WAY_PLAIN;

		CHECK(w == e, "%s: call %d went %s, expected %s", name, k,
		      way_name(w), way_name(e));
		now += gap[k];
	}
}

int main(void)
{
	/* the period after call k is gap[k]: the two warm-ups' first
	 * (T-NBC's, plain's), then T-NBC's (even calls) and plain's (odd
	 * calls) by turns */
	/* T-NBC's periods shorter: kept */
	static const uint64_t faster[] = {500, 500, 10, 20, 10, 20, 99, 99, 99};
	/* T-NBC's longer: left */
	static const uint64_t slower[] = {500, 500, 20, 10, 20, 10, 1, 1, 1};
	/* the same means: plain, which moves no page */
	static const uint64_t tie[] = {500, 500, 15, 15, 15, 15, 1, 1, 1};
	/* T-NBC 4 % ahead (96 against 100): plain, inside the margin */
	static const uint64_t close[] = {500, 500, 96, 100, 96, 100, 1, 1, 1};
	/* exactly 5 % ahead: plain still */
	static const uint64_t at[] = {500, 500, 95, 100, 95, 100, 1, 1, 1};
	/* 6 % ahead (94 against 100): kept */
	static const uint64_t ahead[] = {500, 500, 94, 100, 94, 100, 1, 1, 1};
	/* a T-NBC warm-up far longer than everything else decides
	 * nothing (counted, T-NBC would lose) */
	static const uint64_t warm_t[] = {100000, 500, 10, 11, 10, 11, 1, 1};
	/* nor a plain one (counted, plain would lose) */
	static const uint64_t warm_p[] = {500, 100000, 11, 10, 11, 10, 1, 1};
	/* means, not a single period: T-NBC 5 and 30 (17.5) against
	 * plain 20 and 20 */
	static const uint64_t mean[] = {500, 500, 5, 20, 30, 20, 1, 1};
	/* three trials a way: the verdict on call 8 */
	static const uint64_t three[] = {500, 500, 10, 20, 10,
					 20,  10,  20, 1,  1};
	/* a clock that did not move after call 3 (plain) counts for no
	 * way: plain's second trial comes at call 7, T-NBC has three by
	 * then, and the verdict waits for plain's (a still clock counted,
	 * plain's mean would be 10 and win at call 6; both ways' trials
	 * summed, T-NBC would win at call 7) */
	static const uint64_t still[] = {500, 500, 15, 0, 15, 20, 15, 20, 1, 1};
	struct tg_adapt a;

	run("faster", 2, faster, "tptptpttt");
	run("slower", 2, slower, "tptptpppp");
	run("tie", 2, tie, "tptptpppp");
	run("inside the margin", 2, close, "tptptpppp");
	run("at the margin", 2, at, "tptptpppp");
	run("past the margin", 2, ahead, "tptptpttt");
	run("T-NBC warm-up", 2, warm_t, "tptptptt");
	run("plain warm-up", 2, warm_p, "tptptppp");
	run("mean", 2, mean, "tptptptt");
	run("three trials", 3, three, "tptptptptt");
	run("clock still", 2, still, "tptptptptt");

	/* trials 0: T-NBC at every call, the record untouched */
	tg_adapt_init(&a);
	for (int k = 0; k < 4; k++)
		CHECK(tg_adapt_pick(&a, 1000 + (uint64_t)k, 0) == TG_WAY_TNBC,
		      "trials 0: call %d not T-NBC", k);
	CHECK(a.calls == 0 && a.verdict < 0, "trials 0 changed the record");

	/* settled first after a T-NBC call, the warm-up too, and only
	 * while trying */
	tg_adapt_init(&a);
	CHECK(!tg_adapt_settle_first(&a), "a fresh site settles");
	tg_adapt_pick(&a, 1000, 2); /* warm-up, T-NBC */
	CHECK(tg_adapt_settle_first(&a), "no settle after the warm-up");
	tg_adapt_pick(&a, 1010, 2); /* warm-up, plain */
	CHECK(!tg_adapt_settle_first(&a), "settles after a plain warm-up");
	tg_adapt_pick(&a, 1020, 2); /* T-NBC */
	CHECK(tg_adapt_settle_first(&a), "no settle after a T-NBC trial");
	tg_adapt_pick(&a, 1025, 2); /* plain */
	CHECK(!tg_adapt_settle_first(&a), "settles after a plain trial");
	tg_adapt_pick(&a, 1045, 2);
	tg_adapt_pick(&a, 1050, 2);
	tg_adapt_pick(&a, 1070, 2); /* verdict: T-NBC (5 against 20) */
	CHECK(a.verdict == TG_WAY_TNBC, "verdict %d, expected T-NBC",
	      a.verdict);
	CHECK(!tg_adapt_settle_first(&a), "settles after the verdict");
	/* a verdict right after a T-NBC trial (a still clock after call 2
	 * made the ways uneven): nothing to settle once it is given */
	tg_adapt_init(&a);
	{
		static const uint64_t t[] = {1000, 1500, 1520, 1520,
					     1540, 1550, 1570, 1580};

		for (int k = 0; k < 8; k++)
			tg_adapt_pick(&a, t[k], 2);
	}
	CHECK(a.verdict == TG_WAY_TNBC,
	      "still clock: verdict %d, expected T-NBC", a.verdict);
	CHECK(!tg_adapt_settle_first(&a),
	      "settles after a verdict that followed a T-NBC trial");

	/* told an earlier verdict: it holds from the first call, nothing
	 * to settle, and its means read back */
	{
		static const double ms[2] = {
			[TG_WAY_PLAIN] = 12.5, [TG_WAY_TNBC] = 10.25};

		tg_adapt_tell(&a, TG_WAY_TNBC, ms);
		for (int k = 0; k < 3; k++)
			CHECK(tg_adapt_pick(&a, 1000 + 10 * (uint64_t)k, 2) ==
				      TG_WAY_TNBC,
			      "told T-NBC: call %d went plain", k);
		CHECK(!tg_adapt_settle_first(&a), "a told site settles");
		CHECK(tg_adapt_mean_ms(&a, TG_WAY_TNBC) == 10.25 &&
			      tg_adapt_mean_ms(&a, TG_WAY_PLAIN) == 12.5,
		      "told means %.3f %.3f, expected 10.25 12.5",
		      tg_adapt_mean_ms(&a, TG_WAY_TNBC),
		      tg_adapt_mean_ms(&a, TG_WAY_PLAIN));
		tg_adapt_tell(&a, TG_WAY_PLAIN, ms);
		CHECK(tg_adapt_pick(&a, 2000, 2) == TG_WAY_PLAIN,
		      "told plain: the first call went T-NBC");
	}
	/* the means of what was counted, in ms: none at first, then T-NBC's
	 * 10 and 10 and plain's 20, the warm-ups left out */
	tg_adapt_init(&a);
	CHECK(tg_adapt_mean_ms(&a, TG_WAY_TNBC) == 0, "a fresh mean not 0");
	{
		static const uint64_t t[] = {0,		 500000000,
					     1000000000, 1010000000,
					     1030000000, 1040000000};

		for (int k = 0; k < 6; k++)
			tg_adapt_pick(&a, t[k], 2);
	}
	CHECK(tg_adapt_mean_ms(&a, TG_WAY_TNBC) == 10.0 &&
		      tg_adapt_mean_ms(&a, TG_WAY_PLAIN) == 20.0,
	      "means %.3f %.3f ms, expected 10 and 20",
	      tg_adapt_mean_ms(&a, TG_WAY_TNBC),
	      tg_adapt_mean_ms(&a, TG_WAY_PLAIN));

	if (fails) {
		fprintf(stderr, "adapt_test: %d failed\n", fails);
		return 1;
	}
	printf("adapt_test: PASS\n");
	return 0;
}
