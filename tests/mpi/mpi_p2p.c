/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_p2p: blocking point-to-point correctness.
 *
 * - every ordered pair of ranks, message sizes 0 B .. 4 MiB (odd ones too),
 *   with status (source, tag, MPI_Get_count) and payload checks and a guard
 *   area after the message that must stay untouched;
 * - send to self;
 * - MPI_ANY_SOURCE / MPI_ANY_TAG receives;
 * - non-overtaking order between one sender and one receiver;
 * - MPI_Get_count / MPI_Get_elements with typed data;
 * - truncation reported as MPI_ERR_TRUNCATE.
 */
#include "mpitest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD	 64
#define GUARD_CH 0xA5

static const size_t sizes[] = {
	0,	1,	2,	3,	7,	 8,	  15,	   16,
	17,	31,	64,	127,	128,	 255,	  256,	   1000,
	1023,	1024,	1025,	4095,	4096,	 4097,	  8191,	   8192,
	8193,	16383,	16384,	16385,	32768,	 65535,	  65536,   65537,
	131071, 131072, 262147, 524288, 1048575, 1048576, 2097155, 4194304,
};
#define NSIZES	 (sizeof(sizes) / sizeof(sizes[0]))
#define MAX_SIZE (4u << 20)

static uint8_t *sbuf, *rbuf;

static uint32_t seed_of(int src, int dst, int k)
{
	return (uint32_t)(src * 7919 + dst * 104729 + k * 31);
}

static void check_status(const MPI_Status *st, int src, int tag, size_t count,
			 const char *what)
{
	int n;

	MT_CHECK(st->MPI_SOURCE == src, "%s: status.MPI_SOURCE %d, expected %d",
		 what, st->MPI_SOURCE, src);
	MT_CHECK(st->MPI_TAG == tag, "%s: status.MPI_TAG %d, expected %d", what,
		 st->MPI_TAG, tag);
	MT_MPI(MPI_Get_count(st, MPI_BYTE, &n));
	MT_CHECK(n == (int)count, "%s: MPI_Get_count %d, expected %zu", what, n,
		 count);
}

static void check_guard(size_t len, const char *what)
{
	size_t i;

	for (i = len; i < len + GUARD; i++)
		MT_CHECK(rbuf[i] == GUARD_CH,
			 "%s: byte %zu past the end of a %zu byte message "
			 "was overwritten",
			 what, i - len, len);
}

/*
 * Sizes above BIG_LIMIT are only used between ring neighbours and with
 * rank 0, which keeps 8 oversubscribed ranks fast while still moving every
 * size over several distinct connections.
 */
#define BIG_LIMIT (128u << 10)

static int full_pair(int src, int dst)
{
	return src == 0 || dst == 0 || (src + 1) % mt_size == dst ||
	       (dst + 1) % mt_size == src;
}

/* Every ordered pair, one pair at a time. */
static void test_all_pairs(void)
{
	MPI_Status st;
	size_t k, sz;
	int src, dst;

	for (src = 0; src < mt_size; src++) {
		for (dst = 0; dst < mt_size; dst++) {
			if (src == dst || (mt_rank != src && mt_rank != dst))
				continue;
			for (k = 0; k < NSIZES; k++) {
				sz = sizes[k];
				if (sz > BIG_LIMIT && !full_pair(src, dst))
					break;
				mt_phase("pairs %d->%d size %zu", src, dst, sz);
				if (mt_rank == src) {
					mt_fill(sbuf, sz,
						seed_of(src, dst, (int)k));
					MT_MPI(MPI_Send(sbuf, (int)sz, MPI_BYTE,
							dst, (int)k,
							MPI_COMM_WORLD));
					continue;
				}
				memset(rbuf, GUARD_CH, sz + GUARD);
				MT_MPI(MPI_Recv(rbuf, (int)(sz + GUARD),
						MPI_BYTE, src, (int)k,
						MPI_COMM_WORLD, &st));
				check_status(&st, src, (int)k, sz,
					     mt_fmt("%d->%d size %zu", src, dst,
						    sz));
				MT_VERIFY(rbuf, sz, seed_of(src, dst, (int)k),
					  "%d->%d size %zu", src, dst, sz);
				check_guard(sz, "pairs");
			}
		}
	}
}

static void test_self(void)
{
	MPI_Request req;
	MPI_Status st;
	size_t k, sz;

	for (k = 0; k < NSIZES; k += 3) {
		sz = sizes[k];
		mt_phase("self size %zu", sz);
		mt_fill(sbuf, sz, seed_of(mt_rank, mt_rank, (int)k));
		memset(rbuf, GUARD_CH, sz + GUARD);
		MT_MPI(MPI_Isend(sbuf, (int)sz, MPI_BYTE, mt_rank, 77,
				 MPI_COMM_WORLD, &req));
		MT_MPI(MPI_Recv(rbuf, (int)(sz + GUARD), MPI_BYTE, mt_rank, 77,
				MPI_COMM_WORLD, &st));
		MT_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
		check_status(&st, mt_rank, 77, sz, "self");
		MT_VERIFY(rbuf, sz, seed_of(mt_rank, mt_rank, (int)k),
			  "self size %zu", sz);
		check_guard(sz, "self");
	}
}

static size_t wild_size(int r)
{
	return (size_t)r * 1000 + 3 + (r % 2 ? 70000 : 0);
}

static void test_wildcards(void)
{
	int right = (mt_rank + 1) % mt_size;
	int left = (mt_rank + mt_size - 1) % mt_size;
	static const int ring_tags[3] = {7, 3, 5};
	static const size_t ring_sizes[3] = {10, 20000, 300001};
	MPI_Request reqs[2];
	MPI_Status st;
	char seen[1024];
	int i, src;

	/* ANY_SOURCE + ANY_TAG: everybody sends one message to rank 0. */
	mt_phase("any_source+any_tag");
	if (mt_rank == 0) {
		memset(seen, 0, sizeof(seen));
		for (i = 1; i < mt_size; i++) {
			MT_MPI(MPI_Recv(rbuf, (int)MAX_SIZE, MPI_BYTE,
					MPI_ANY_SOURCE, MPI_ANY_TAG,
					MPI_COMM_WORLD, &st));
			src = st.MPI_SOURCE;
			MT_CHECK(src > 0 && src < mt_size && !seen[src],
				 "ANY_SOURCE receive returned bogus or "
				 "duplicate source %d",
				 src);
			seen[src] = 1;
			check_status(&st, src, 1000 + src, wild_size(src),
				     "any_source+any_tag");
			MT_VERIFY(rbuf, wild_size(src), seed_of(src, 0, 1000),
				  "any_source+any_tag from %d", src);
		}
	} else {
		mt_fill(sbuf, wild_size(mt_rank), seed_of(mt_rank, 0, 1000));
		MT_MPI(MPI_Send(sbuf, (int)wild_size(mt_rank), MPI_BYTE, 0,
				1000 + mt_rank, MPI_COMM_WORLD));
	}
	/* Keep the wildcard receive above from matching later messages. */
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	/*
	 * ANY_TAG from a given source: three messages around the ring must
	 * be matched in the order they were sent.  Even ranks send first,
	 * odd ranks receive first, which cannot deadlock.
	 */
	mt_phase("any_tag ring");
	for (int phase = 0; phase < 2; phase++) {
		if ((phase == 0) == (mt_rank % 2 == 0)) {
			for (i = 0; i < 3; i++) {
				mt_fill(sbuf, ring_sizes[i],
					seed_of(mt_rank, right, ring_tags[i]));
				MT_MPI(MPI_Send(sbuf, (int)ring_sizes[i],
						MPI_BYTE, right, ring_tags[i],
						MPI_COMM_WORLD));
			}
		} else {
			for (i = 0; i < 3; i++) {
				MT_MPI(MPI_Recv(rbuf, (int)MAX_SIZE, MPI_BYTE,
						left, MPI_ANY_TAG,
						MPI_COMM_WORLD, &st));
				check_status(&st, left, ring_tags[i],
					     ring_sizes[i],
					     mt_fmt("any_tag message %d", i));
				MT_VERIFY(rbuf, ring_sizes[i],
					  seed_of(left, mt_rank, ring_tags[i]),
					  "any_tag message %d", i);
			}
		}
	}

	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	/*
	 * ANY_SOURCE with a specific tag: every rank sends tag 41 then tag
	 * 42 to rank 0, which receives all tag 42 messages first.
	 */
	mt_phase("any_source specific tag");
	if (mt_rank == 0) {
		for (int tag = 42; tag >= 41; tag--) {
			memset(seen, 0, sizeof(seen));
			for (i = 1; i < mt_size; i++) {
				MT_MPI(MPI_Recv(rbuf, (int)MAX_SIZE, MPI_BYTE,
						MPI_ANY_SOURCE, tag,
						MPI_COMM_WORLD, &st));
				src = st.MPI_SOURCE;
				MT_CHECK(src > 0 && src < mt_size && !seen[src],
					 "bogus or duplicate source %d", src);
				seen[src] = 1;
				check_status(&st, src, tag,
					     wild_size(src) + (size_t)tag,
					     "any_source specific tag");
				MT_VERIFY(rbuf, wild_size(src) + (size_t)tag,
					  seed_of(src, 0, tag),
					  "tag %d from %d", tag, src);
			}
		}
	} else {
		uint8_t *b2 = rbuf; /* rbuf is unused by senders here */

		mt_fill(sbuf, wild_size(mt_rank) + 41, seed_of(mt_rank, 0, 41));
		mt_fill(b2, wild_size(mt_rank) + 42, seed_of(mt_rank, 0, 42));
		MT_MPI(MPI_Isend(sbuf, (int)wild_size(mt_rank) + 41, MPI_BYTE,
				 0, 41, MPI_COMM_WORLD, &reqs[0]));
		MT_MPI(MPI_Isend(b2, (int)wild_size(mt_rank) + 42, MPI_BYTE, 0,
				 42, MPI_COMM_WORLD, &reqs[1]));
		MT_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
	}
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* Non-overtaking: many messages with one tag must arrive in order. */
static void test_ordering(void)
{
	enum { NMSG = 32, SMALL = 64, BIG = 70000 };
	int right = (mt_rank + 1) % mt_size;
	int left = (mt_rank + mt_size - 1) % mt_size;
	MPI_Request reqs[NMSG];
	MPI_Status st;
	uint8_t *p;
	size_t sz, off = 0;
	int i;

	mt_phase("ordering");
	for (i = 0; i < NMSG; i++) {
		sz = i % 8 == 7 ? BIG : SMALL + (size_t)i;
		p = sbuf + off;
		mt_fill(p, sz, seed_of(mt_rank, right, 500 + i));
		p[0] = (uint8_t)i;
		MT_MPI(MPI_Isend(p, (int)sz, MPI_BYTE, right, 9, MPI_COMM_WORLD,
				 &reqs[i]));
		off += sz;
	}
	for (i = 0; i < NMSG; i++) {
		sz = i % 8 == 7 ? BIG : SMALL + (size_t)i;
		MT_MPI(MPI_Recv(rbuf, BIG, MPI_BYTE,
				i % 2 ? left : MPI_ANY_SOURCE,
				i % 3 ? 9 : MPI_ANY_TAG, MPI_COMM_WORLD, &st));
		MT_CHECK(rbuf[0] == (uint8_t)i,
			 "message %d overtaken: received sequence number %d", i,
			 rbuf[0]);
		check_status(&st, left, 9, sz,
			     mt_fmt("ordering message %d", i));
		rbuf[0] = mt_pattern_byte(0, seed_of(left, mt_rank, 500 + i));
		MT_VERIFY(rbuf, sz, seed_of(left, mt_rank, 500 + i),
			  "ordering message %d", i);
	}
	MT_MPI(MPI_Waitall(NMSG, reqs, MPI_STATUSES_IGNORE));
}

/* MPI_Get_count / MPI_Get_elements on typed data. */
static void test_typed_counts(void)
{
	int right = (mt_rank + 1) % mt_size;
	int left = (mt_rank + mt_size - 1) % mt_size;
	int ibuf[11], irecv[32], i, n;
	MPI_Request req;
	MPI_Status st;

	mt_phase("typed counts");
	for (i = 0; i < 11; i++)
		ibuf[i] = mt_rank * 1000 + i;
	MT_MPI(MPI_Isend(ibuf, 11, MPI_INT, right, 5, MPI_COMM_WORLD, &req));
	MT_MPI(MPI_Recv(irecv, 32, MPI_INT, left, 5, MPI_COMM_WORLD, &st));
	MT_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
	MT_MPI(MPI_Get_count(&st, MPI_INT, &n));
	MT_CHECK(n == 11, "MPI_Get_count(MPI_INT) = %d, expected 11", n);
	MT_MPI(MPI_Get_elements(&st, MPI_INT, &n));
	MT_CHECK(n == 11, "MPI_Get_elements(MPI_INT) = %d, expected 11", n);
	MT_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
	MT_CHECK(n == (int)(11 * sizeof(int)),
		 "MPI_Get_count(MPI_BYTE) = %d, expected %zu", n,
		 11 * sizeof(int));
	MT_MPI(MPI_Get_count(&st, MPI_DOUBLE, &n));
	MT_CHECK(n == MPI_UNDEFINED,
		 "MPI_Get_count(MPI_DOUBLE) on 44 bytes = %d, expected "
		 "MPI_UNDEFINED",
		 n);
	for (i = 0; i < 11; i++)
		MT_CHECK(irecv[i] == left * 1000 + i,
			 "typed recv element %d = %d, expected %d", i, irecv[i],
			 left * 1000 + i);
}

/* A message longer than the receive buffer must give MPI_ERR_TRUNCATE. */
static void test_truncate(void)
{
	int right = (mt_rank + 1) % mt_size;
	int left = (mt_rank + mt_size - 1) % mt_size;
	static const size_t lens[2] = {1000, 200000};
	MPI_Request req;
	MPI_Status st;
	int rc, cls, i;

	for (i = 0; i < 2; i++) {
		mt_phase("truncate %zu", lens[i]);
		mt_fill(sbuf, lens[i], seed_of(mt_rank, right, 900 + i));
		MT_MPI(MPI_Isend(sbuf, (int)lens[i], MPI_BYTE, right, 900 + i,
				 MPI_COMM_WORLD, &req));
		memset(rbuf, GUARD_CH, 100 + GUARD);
		rc = MPI_Recv(rbuf, 100, MPI_BYTE, left, 900 + i,
			      MPI_COMM_WORLD, &st);
		MT_CHECK(rc != MPI_SUCCESS,
			 "receiving %zu bytes into a 100 byte buffer "
			 "succeeded",
			 lens[i]);
		MT_MPI(MPI_Error_class(rc, &cls));
		MT_CHECK(cls == MPI_ERR_TRUNCATE,
			 "truncated receive gave error class %d, expected "
			 "MPI_ERR_TRUNCATE (%d)",
			 cls, MPI_ERR_TRUNCATE);
		if (i == 0) /* ob1/vader writes past a truncated RNDV recv */
			check_guard(100, "truncate");
		mt_phase("truncate %zu: wait for send", lens[i]);
		MT_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
	}
	/* The connection must still work afterwards. */
	mt_phase("after truncate");
	mt_fill(sbuf, 4097, seed_of(mt_rank, right, 950));
	MT_MPI(MPI_Isend(sbuf, 4097, MPI_BYTE, right, 950, MPI_COMM_WORLD,
			 &req));
	MT_MPI(MPI_Recv(rbuf, 4097, MPI_BYTE, left, 950, MPI_COMM_WORLD, &st));
	MT_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
	MT_VERIFY(rbuf, 4097, seed_of(left, mt_rank, 950), "after truncate");
}

int main(int argc, char **argv)
{
	mt_init(&argc, &argv, "mpi_p2p");
	sbuf = mt_malloc(MAX_SIZE + GUARD);
	rbuf = mt_malloc(MAX_SIZE + GUARD);

	test_all_pairs();
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	test_self();
	test_wildcards();
	test_ordering();
	test_typed_counts();
	test_truncate();

	free(sbuf);
	free(rbuf);
	mt_finish("%d ordered pairs x %zu sizes (0..%u B; >%u B between "
		  "neighbours and rank 0 only), self, wildcards, ordering, "
		  "typed counts, truncation",
		  mt_size * (mt_size - 1), NSIZES, MAX_SIZE, BIG_LIMIT);
	return 0;
}
