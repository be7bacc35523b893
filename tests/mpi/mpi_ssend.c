/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_ssend: synchronous-mode sends.
 *
 * - Deterministic: an MPI_Issend must stay incomplete (polled with
 *   MPI_Test) while the receiver provably has not posted the receive,
 *   because the receiver only posts it after a "go" message that is sent
 *   after the polling.  Done for every ordered pair, self included, with
 *   small and large messages.
 * - Timed, with loose bounds only: the receiver gets a "go" message,
 *   sleeps DELAY_MS and only then posts the receive.  The sender measures
 *   from before sending "go" to the completion of MPI_Ssend, which can
 *   physically not be shorter than DELAY_MS (one machine, one clock).
 * - Data checks for MPI_Ssend / MPI_Issend with sizes 0 B .. 4 MiB.
 */
#include "mpitest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELAY_MS 100
#define POLL_MS	 10
#define MAX_SIZE (4u << 20)

static uint8_t *sbuf, *rbuf;
static double min_ratio = 1e9;
static int timed_runs;

static uint32_t seed_of(int src, int dst, int k)
{
	return (uint32_t)(src * 131 + dst * 1031 + k * 7);
}

static void recv_check(int src, int tag, size_t len, uint32_t seed,
		       const char *what)
{
	MPI_Status st;
	int n;

	memset(rbuf, 0x5a, len);
	MT_MPI(MPI_Recv(rbuf, (int)MAX_SIZE, MPI_BYTE, src, tag, MPI_COMM_WORLD,
			&st));
	MT_CHECK(st.MPI_SOURCE == src && st.MPI_TAG == tag,
		 "%s: status source/tag %d/%d, expected %d/%d", what,
		 st.MPI_SOURCE, st.MPI_TAG, src, tag);
	MT_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
	MT_CHECK(n == (int)len, "%s: count %d, expected %zu", what, n, len);
	MT_VERIFY(rbuf, len, seed, "%s", what);
}

/* Poll req for POLL_MS; it must not complete. */
static void poll_incomplete(MPI_Request *req, const char *what)
{
	double end = mt_now() + POLL_MS * 1e-3;
	long polls = 0;
	int flag;

	while (mt_now() < end || polls < 100) {
		MT_MPI(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
		MT_CHECK(!flag,
			 "%s: MPI_Issend completed although the matching "
			 "receive has not been posted",
			 what);
		polls++;
	}
}

static void test_issend_deterministic(void)
{
	static const size_t lens[] = {0, 8, 70001, 1u << 20};
	MPI_Request sreq, greq;
	int shift, dst, src, k;
	char go = 'g';

	for (shift = 0; shift < mt_size; shift++) {
		dst = (mt_rank + shift) % mt_size;
		src = (mt_rank + mt_size - shift) % mt_size;
		for (k = 0; k < 4; k++) {
			mt_phase("issend deterministic %d->%d size %zu",
				 mt_rank, dst, lens[k]);
			mt_fill(sbuf, lens[k], seed_of(mt_rank, dst, k));
			MT_MPI(MPI_Issend(sbuf, (int)lens[k], MPI_BYTE, dst,
					  10 + k, MPI_COMM_WORLD, &sreq));
			poll_incomplete(&sreq, mt_fmt("%d->%d %zu B", mt_rank,
						      dst, lens[k]));
			MT_MPI(MPI_Isend(&go, 1, MPI_CHAR, dst, 1,
					 MPI_COMM_WORLD, &greq));
			MT_MPI(MPI_Recv(&go, 1, MPI_CHAR, src, 1,
					MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			recv_check(src, 10 + k, lens[k],
				   seed_of(src, mt_rank, k),
				   mt_fmt("issend %d->%d %zu B", src, mt_rank,
					  lens[k]));
			MT_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
			MT_MPI(MPI_Wait(&greq, MPI_STATUS_IGNORE));
		}
	}
}

/* One timed MPI_Ssend from sender to receiver (others do nothing). */
static void timed_ssend(int sender, int receiver, size_t len)
{
	MPI_Request greq;
	double t0, el;
	char go = 'g';

	mt_phase("timed ssend %d->%d %zu B", sender, receiver, len);
	if (mt_rank == sender) {
		mt_fill(sbuf, len, seed_of(sender, receiver, 99));
		t0 = mt_now();
		MT_MPI(MPI_Isend(&go, 1, MPI_CHAR, receiver, 2, MPI_COMM_WORLD,
				 &greq));
		MT_MPI(MPI_Ssend(sbuf, (int)len, MPI_BYTE, receiver, 3,
				 MPI_COMM_WORLD));
		el = mt_now() - t0;
		MT_MPI(MPI_Wait(&greq, MPI_STATUS_IGNORE));
		/* 0.9: allow for timer granularity, nothing else. */
		MT_CHECK(el >= 0.9 * DELAY_MS * 1e-3,
			 "MPI_Ssend of %zu B returned after %.1f ms, before "
			 "the receiver (delayed by %d ms) posted the receive",
			 len, el * 1e3, DELAY_MS);
		if (el / (DELAY_MS * 1e-3) < min_ratio)
			min_ratio = el / (DELAY_MS * 1e-3);
		timed_runs++;
	} else if (mt_rank == receiver) {
		MT_MPI(MPI_Recv(&go, 1, MPI_CHAR, sender, 2, MPI_COMM_WORLD,
				MPI_STATUS_IGNORE));
		mt_sleep_ms(DELAY_MS);
		recv_check(sender, 3, len, seed_of(sender, receiver, 99),
			   "timed ssend");
	}
}

static void test_ssend_timed(void)
{
	static const size_t lens[] = {16, 1u << 20};
	int k, r, odd = mt_size % 2;

	for (k = 0; k < 2; k++) {
		/* Disjoint pairs in parallel, both directions. */
		r = mt_rank ^ 1;
		if (r < mt_size - odd && mt_rank < mt_size - odd) {
			timed_ssend(mt_rank & ~1, (mt_rank & ~1) + 1, lens[k]);
			timed_ssend((mt_rank & ~1) + 1, mt_rank & ~1, lens[k]);
		}
		if (odd) {
			timed_ssend(mt_size - 1, 0, lens[k]);
			timed_ssend(0, mt_size - 1, lens[k]);
		}
		MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	}
}

/* MPI_Ssend around the ring; even ranks send first, odd receive first. */
static void test_ssend_data(void)
{
	static const size_t lens[] = {0,     1,	    7,	    4096,     4097,
				      65536, 65537, 262143, 1u << 20, MAX_SIZE};
	int right = (mt_rank + 1) % mt_size;
	int left = (mt_rank + mt_size - 1) % mt_size;
	int k, step;

	for (k = 0; k < (int)(sizeof(lens) / sizeof(lens[0])); k++) {
		mt_phase("ssend ring %zu B", lens[k]);
		for (step = 0; step < 2; step++) {
			if ((step == 0) == (mt_rank % 2 == 0)) {
				mt_fill(sbuf, lens[k],
					seed_of(mt_rank, right, 200 + k));
				MT_MPI(MPI_Ssend(sbuf, (int)lens[k], MPI_BYTE,
						 right, 200 + k,
						 MPI_COMM_WORLD));
			} else {
				recv_check(left, 200 + k, lens[k],
					   seed_of(left, mt_rank, 200 + k),
					   mt_fmt("ssend ring %zu B", lens[k]));
			}
		}
	}
}

/* MPI_Issend to every rank (self included) with MPI_Irecv, Waitall. */
static void test_issend_all(void)
{
	static const size_t lens[] = {0, 3, 8193, 300001};
	MPI_Request *reqs = mt_malloc(sizeof(*reqs) * 2 * (size_t)mt_size);
	uint8_t **sb = mt_malloc(sizeof(*sb) * (size_t)mt_size);
	uint8_t **rb = mt_malloc(sizeof(*rb) * (size_t)mt_size);
	int k, p;

	for (k = 0; k < 4; k++) {
		mt_phase("issend all %zu B", lens[k]);
		for (p = 0; p < mt_size; p++) {
			sb[p] = mt_malloc(lens[k]);
			rb[p] = mt_malloc(lens[k]);
			MT_MPI(MPI_Irecv(rb[p], (int)lens[k], MPI_BYTE, p,
					 300 + k, MPI_COMM_WORLD,
					 &reqs[mt_size + p]));
		}
		for (p = 0; p < mt_size; p++) {
			mt_fill(sb[p], lens[k], seed_of(mt_rank, p, 300 + k));
			MT_MPI(MPI_Issend(sb[p], (int)lens[k], MPI_BYTE, p,
					  300 + k, MPI_COMM_WORLD, &reqs[p]));
		}
		MT_MPI(MPI_Waitall(2 * mt_size, reqs, MPI_STATUSES_IGNORE));
		for (p = 0; p < mt_size; p++) {
			MT_VERIFY(rb[p], lens[k], seed_of(p, mt_rank, 300 + k),
				  "issend all %zu B from %d", lens[k], p);
			free(sb[p]);
			free(rb[p]);
		}
	}
	free(reqs);
	free(sb);
	free(rb);
}

int main(int argc, char **argv)
{
	mt_init(&argc, &argv, "mpi_ssend");
	sbuf = mt_malloc(MAX_SIZE);
	rbuf = mt_malloc(MAX_SIZE);

	test_issend_deterministic();
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	test_ssend_timed();
	test_ssend_data();
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	test_issend_all();

	MT_MPI(MPI_Allreduce(MPI_IN_PLACE, &min_ratio, 1, MPI_DOUBLE, MPI_MIN,
			     MPI_COMM_WORLD));
	MT_MPI(MPI_Allreduce(MPI_IN_PLACE, &timed_runs, 1, MPI_INT, MPI_SUM,
			     MPI_COMM_WORLD));
	free(sbuf);
	free(rbuf);
	mt_finish("Issend incomplete before recv posted (all pairs+self), "
		  "%d timed Ssends (shortest %.2fx the %d ms receiver delay), "
		  "Ssend/Issend data 0..%u B",
		  timed_runs, min_ratio, DELAY_MS, MAX_SIZE);
	return 0;
}
