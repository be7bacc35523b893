/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * How an alltoall(v) message is cut (mpi-glue/core/tg_cut.h), which both
 * ends must do alike: the pieces cover the message exactly, in order;
 * cut, there are always three (so that ends whose counts differ still
 * pair message for message); from TG_A2A_CUT_MIN on the edges hold
 * every byte a page shared with other data can hold at either end; a
 * piece's tag never carries into the group's half.
 */
#include <stdio.h>

#include "../../mpi-glue/core/tg_cut.h"

static int fails;

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "cut_test:%d: FAIL: ", __LINE__);      \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			fails++;                                               \
		}                                                              \
	} while (0)

static void one(size_t len, bool cut)
{
	struct tg_a2a_piece p[TG_A2A_TAGS];
	int n = tg_a2a_cut(len, cut, p);
	size_t at = 0;

	CHECK(n == (cut ? 3 : 1), "%zu B: %d pieces", len, n);
	for (int q = 0; q < n; q++) {
		CHECK(p[q].off == at, "%zu B: piece %d at %zu, not %zu", len, q,
		      p[q].off, at);
		CHECK(p[q].piece == q, "%zu B: piece %d tagged %d", len, q,
		      p[q].piece);
		at += p[q].len;
	}
	CHECK(at == len, "%zu B: pieces cover %zu", len, at);
	if (!cut)
		return;
	if (len >= TG_A2A_CUT_MIN) {
		/* a page's worth less one byte at each end: what an
		 * unaligned buffer's first or last page can hold of it */
		CHECK(p[0].len >= 4095 && p[2].len >= 4095,
		      "%zu B: edges %zu and %zu", len, p[0].len, p[2].len);
		CHECK(p[0].len <= TG_A2A_EDGE && p[2].len <= TG_A2A_EDGE,
		      "%zu B: edges %zu and %zu, larger than %zu", len,
		      p[0].len, p[2].len, TG_A2A_EDGE);
		CHECK(p[0].edge && !p[1].edge && p[2].edge, "%zu B: edge flags",
		      len);
	} else {
		CHECK(!p[0].len && !p[2].len, "%zu B: edges %zu and %zu", len,
		      p[0].len, p[2].len);
		CHECK(p[1].edge, "%zu B: a small body goes first", len);
	}
}

int main(void)
{
	static const size_t lens[] = {1,
				      4095,
				      4096,
				      TG_A2A_CUT_MIN - 1,
				      TG_A2A_CUT_MIN,
				      TG_A2A_CUT_MIN + 1,
				      (size_t)1 << 20,
				      ((size_t)8 << 20) + 13,
				      ((size_t)5 << 30) + 7};
	uint64_t id = (uint64_t)0xabcd1234 << 32;

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		one(lens[i], true);
		one(lens[i], false);
	}
	CHECK(tg_a2a_tag(id | 0xffffffffu, 2) == (id | 1u),
	      "a wrapping tag: %#llx",
	      (unsigned long long)tg_a2a_tag(id | 0xffffffffu, 2));
	CHECK(tg_a2a_tag(id | 7u, 1) == (id | 8u), "tag + 1: %#llx",
	      (unsigned long long)tg_a2a_tag(id | 7u, 1));
	if (fails) {
		fprintf(stderr, "cut_test: %d checks failed\n", fails);
		return 1;
	}
	puts("cut_test: PASS");
	return 0;
}
