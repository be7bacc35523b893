/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_nonblocking: hundreds of outstanding MPI_Isend / MPI_Irecv.
 *
 * Every rank exchanges nmsg messages with every rank (itself included),
 * sizes 0 B .. ~100 KB, with nmsg chosen so that at least 320 receives and
 * 320 sends are in flight at once per rank.
 *
 *   A: receives posted first (in shuffled order), completed with Waitany;
 *   B: sends first (unexpected messages), receives posted in reverse
 *      order, everything completed with Testsome;
 *   C: MPI_ANY_SOURCE receives with unique tags, half posted before and
 *      half after the sends, completed with Waitsome;
 *   D: fan-in to rank 0 with MPI_ANY_SOURCE/MPI_ANY_TAG: per-sender order
 *      must be preserved;
 *   E: MPI_Cancel of a receive that never matches.
 */
#include "mpitest.h"

#include <stdlib.h>
#include <string.h>

#define FANIN 64

static int nmsg; /* messages per peer, >= 32 */
static int nreq; /* mt_size * nmsg, >= 320 */
static uint8_t **sbufs, **rbufs;
static MPI_Request *sreqs, *rreqs;
static int *done;

static size_t msg_len(int src, int dst, int k)
{
	if (k % 16 == 15)
		return 100000 + (size_t)(src * 10 + dst);
	return (size_t)((k * 97 + src * 13 + dst * 5) % 2048);
}

static uint32_t seed_of(int src, int dst, int k, int phase)
{
	return (uint32_t)(phase * 100003 + src * 1777 + dst * 313 + k);
}

/* Deterministic shuffle of 0..n-1. */
static void shuffle(int *v, int n, uint32_t seed)
{
	int i, j, t;

	for (i = 0; i < n; i++)
		v[i] = i;
	for (i = n - 1; i > 0; i--) {
		seed = seed * 1664525u + 1013904223u;
		j = (int)((seed >> 8) % (uint32_t)(i + 1));
		t = v[i];
		v[i] = v[j];
		v[j] = t;
	}
}

static void alloc_bufs(void)
{
	int p, k;

	sbufs = mt_malloc(sizeof(*sbufs) * (size_t)nreq);
	rbufs = mt_malloc(sizeof(*rbufs) * (size_t)nreq);
	for (p = 0; p < mt_size; p++) {
		for (k = 0; k < nmsg; k++) {
			sbufs[p * nmsg + k] = mt_malloc(msg_len(mt_rank, p, k));
			rbufs[p * nmsg + k] = mt_malloc(msg_len(p, mt_rank, k));
		}
	}
}

static void free_bufs(void)
{
	int i;

	for (i = 0; i < nreq; i++) {
		free(sbufs[i]);
		free(rbufs[i]);
	}
	free(sbufs);
	free(rbufs);
}

/* Receive index i = src * nmsg + k completed with status st. */
static void check_recv(int i, const MPI_Status *st, int phase, int tag_base,
		       int any_src)
{
	int src = i / nmsg, k = i % nmsg, n;
	size_t len = msg_len(src, mt_rank, k);

	MT_CHECK(!done[i], "phase %c: receive %d completed twice", 'A' + phase,
		 i);
	done[i] = 1;
	MT_CHECK(st->MPI_SOURCE == src,
		 "phase %c: message %d: source %d, expected %d", 'A' + phase, i,
		 st->MPI_SOURCE, src);
	MT_CHECK(st->MPI_TAG == tag_base + (any_src ? i : k),
		 "phase %c: message %d: tag %d, expected %d", 'A' + phase, i,
		 st->MPI_TAG, tag_base + (any_src ? i : k));
	MT_MPI(MPI_Get_count(st, MPI_BYTE, &n));
	MT_CHECK(n == (int)len, "phase %c: message %d: count %d, expected %zu",
		 'A' + phase, i, n, len);
	MT_VERIFY(rbufs[i], len, seed_of(src, mt_rank, k, phase),
		  "phase %c: message %d from %d", 'A' + phase, i, src);
}

static void post_recv(int i, int tag_base, int any_src)
{
	int src = i / nmsg, k = i % nmsg;

	memset(rbufs[i], 0, msg_len(src, mt_rank, k));
	MT_MPI(MPI_Irecv(rbufs[i], (int)msg_len(src, mt_rank, k), MPI_BYTE,
			 any_src ? MPI_ANY_SOURCE : src,
			 tag_base + (any_src ? i : k), MPI_COMM_WORLD,
			 &rreqs[i]));
}

/* Send all messages, peers in rotated order, k ascending. */
static void post_sends(int phase, int tag_base, int any_src)
{
	int j, p, k, i, tag;

	for (j = 0; j < mt_size; j++) {
		p = (mt_rank + j + 1) % mt_size;
		for (k = 0; k < nmsg; k++) {
			i = p * nmsg + k;
			tag = tag_base + (any_src ? mt_rank * nmsg + k : k);
			mt_fill(sbufs[i], msg_len(mt_rank, p, k),
				seed_of(mt_rank, p, k, phase));
			MT_MPI(MPI_Isend(sbufs[i], (int)msg_len(mt_rank, p, k),
					 MPI_BYTE, p, tag, MPI_COMM_WORLD,
					 &sreqs[i]));
		}
	}
}

static void phase_a(void)
{
	int *order = mt_malloc(sizeof(int) * (size_t)nreq);
	MPI_Status st;
	int i, idx;

	mt_phase("A: post %d receives", nreq);
	memset(done, 0, sizeof(int) * (size_t)nreq);
	shuffle(order, nreq, (uint32_t)mt_rank + 1);
	for (i = 0; i < nreq; i++)
		post_recv(order[i], 1000, 0);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	mt_phase("A: sends + Waitany");
	post_sends(0, 1000, 0);
	for (i = 0; i < nreq; i++) {
		MT_MPI(MPI_Waitany(nreq, rreqs, &idx, &st));
		MT_CHECK(idx >= 0 && idx < nreq, "Waitany returned index %d",
			 idx);
		MT_CHECK(rreqs[idx] == MPI_REQUEST_NULL,
			 "Waitany did not free the request");
		check_recv(idx, &st, 0, 1000, 0);
	}
	MT_MPI(MPI_Waitany(nreq, rreqs, &idx, &st));
	MT_CHECK(idx == MPI_UNDEFINED,
		 "Waitany on inactive requests returned %d", idx);
	MT_MPI(MPI_Waitall(nreq, sreqs, MPI_STATUSES_IGNORE));
	free(order);
}

static void phase_b(void)
{
	MPI_Request *all = mt_malloc(sizeof(*all) * 2 * (size_t)nreq);
	MPI_Status *sts = mt_malloc(sizeof(*sts) * 2 * (size_t)nreq);
	int *idx = mt_malloc(sizeof(int) * 2 * (size_t)nreq);
	int i, n, left = 2 * nreq, calls = 0;

	mt_phase("B: unexpected sends");
	memset(done, 0, sizeof(int) * (size_t)nreq);
	post_sends(1, 2000, 0);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	mt_phase("B: receives in reverse order + Testsome");
	for (i = nreq - 1; i >= 0; i--)
		post_recv(i, 2000, 0);
	memcpy(all, rreqs, sizeof(*all) * (size_t)nreq);
	memcpy(all + nreq, sreqs, sizeof(*all) * (size_t)nreq);
	while (left > 0) {
		MT_MPI(MPI_Testsome(2 * nreq, all, &n, idx, sts));
		calls++;
		MT_CHECK(n != MPI_UNDEFINED,
			 "Testsome: MPI_UNDEFINED with %d requests left", left);
		for (i = 0; i < n; i++) {
			MT_CHECK(all[idx[i]] == MPI_REQUEST_NULL,
				 "Testsome did not free request %d", idx[i]);
			if (idx[i] < nreq)
				check_recv(idx[i], &sts[i], 1, 2000, 0);
		}
		left -= n;
	}
	MT_MPI(MPI_Testsome(2 * nreq, all, &n, idx, sts));
	MT_CHECK(n == MPI_UNDEFINED, "Testsome on inactive requests gave %d",
		 n);
	free(all);
	free(sts);
	free(idx);
}

static void phase_c(void)
{
	MPI_Status *sts = mt_malloc(sizeof(*sts) * (size_t)nreq);
	int *idx = mt_malloc(sizeof(int) * (size_t)nreq);
	int i, n, left = nreq;

	mt_phase("C: ANY_SOURCE receives, first half");
	memset(done, 0, sizeof(int) * (size_t)nreq);
	for (i = 0; i < nreq; i += 2)
		post_recv(i, 3000, 1);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	mt_phase("C: sends");
	post_sends(2, 3000, 1);
	mt_phase("C: ANY_SOURCE receives, second half + Waitsome");
	for (i = nreq - 1; i >= 0; i--) {
		if (i % 2)
			post_recv(i, 3000, 1);
	}
	while (left > 0) {
		MT_MPI(MPI_Waitsome(nreq, rreqs, &n, idx, sts));
		MT_CHECK(n > 0, "Waitsome returned %d with %d left", n, left);
		for (i = 0; i < n; i++)
			check_recv(idx[i], &sts[i], 2, 3000, 1);
		left -= n;
	}
	MT_MPI(MPI_Waitall(nreq, sreqs, MPI_STATUSES_IGNORE));
	free(sts);
	free(idx);
}

/* Fan-in with full wildcards: order per sender must be preserved. */
static void phase_d(void)
{
	int nrecv = (mt_size - 1) * FANIN, i, src, n;
	int *next = mt_malloc(sizeof(int) * (size_t)mt_size);
	int(*data)[8];
	MPI_Request *reqs;
	MPI_Status *sts;

	mt_phase("D: fan-in");
	if (mt_rank != 0) {
		data = mt_malloc(sizeof(*data) * FANIN);
		reqs = mt_malloc(sizeof(*reqs) * FANIN);
		for (i = 0; i < FANIN; i++) {
			data[i][0] = mt_rank;
			data[i][1] = i;
			for (n = 2; n < 8; n++)
				data[i][n] = mt_rank * 7 + i * 3 + n;
			MT_MPI(MPI_Isend(data[i], 8, MPI_INT, 0, 5000 + i % 7,
					 MPI_COMM_WORLD, &reqs[i]));
		}
		MT_MPI(MPI_Waitall(FANIN, reqs, MPI_STATUSES_IGNORE));
		free(data);
		free(reqs);
		free(next);
		return;
	}
	data = mt_malloc(sizeof(*data) * (size_t)nrecv);
	reqs = mt_malloc(sizeof(*reqs) * (size_t)nrecv);
	sts = mt_malloc(sizeof(*sts) * (size_t)nrecv);
	for (i = 0; i < nrecv; i++)
		MT_MPI(MPI_Irecv(data[i], 8, MPI_INT, MPI_ANY_SOURCE,
				 MPI_ANY_TAG, MPI_COMM_WORLD, &reqs[i]));
	MT_MPI(MPI_Waitall(nrecv, reqs, sts));
	memset(next, 0, sizeof(int) * (size_t)mt_size);
	/* Receives match in posting order, so scan in that order. */
	for (i = 0; i < nrecv; i++) {
		src = sts[i].MPI_SOURCE;
		MT_CHECK(src > 0 && src < mt_size, "fan-in: bogus source %d",
			 src);
		MT_CHECK(data[i][0] == src && data[i][1] == next[src],
			 "fan-in: receive %d from %d carries (%d, seq %d), "
			 "expected seq %d: per-sender order violated",
			 i, src, data[i][0], data[i][1], next[src]);
		MT_CHECK(sts[i].MPI_TAG == 5000 + next[src] % 7,
			 "fan-in: tag %d, expected %d", sts[i].MPI_TAG,
			 5000 + next[src] % 7);
		for (n = 2; n < 8; n++)
			MT_CHECK(data[i][n] == src * 7 + next[src] * 3 + n,
				 "fan-in: payload word %d wrong", n);
		next[src]++;
	}
	for (src = 1; src < mt_size; src++)
		MT_CHECK(next[src] == FANIN, "fan-in: %d messages from %d",
			 next[src], src);
	free(data);
	free(reqs);
	free(sts);
	free(next);
}

static void phase_e(void)
{
	int right = (mt_rank + 1) % mt_size;
	int left = (mt_rank + mt_size - 1) % mt_size;
	MPI_Request req, sreq;
	MPI_Status st;
	int buf[4] = {0}, val = mt_rank, flag;

	mt_phase("E: cancel");
	MT_MPI(MPI_Irecv(buf, 4, MPI_INT, left, 6000, MPI_COMM_WORLD, &req));
	MT_MPI(MPI_Cancel(&req));
	MT_MPI(MPI_Wait(&req, &st));
	MT_MPI(MPI_Test_cancelled(&st, &flag));
	MT_CHECK(flag, "receive that could not match was not cancelled");
	/*
	 * Nobody sends tag 6000 before this barrier.  Afterwards a message
	 * with the tag of the cancelled receive goes to the next one.
	 */
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	MT_MPI(MPI_Isend(&val, 1, MPI_INT, right, 6000, MPI_COMM_WORLD, &sreq));
	MT_MPI(MPI_Recv(buf, 4, MPI_INT, left, 6000, MPI_COMM_WORLD, &st));
	MT_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
	MT_CHECK(buf[0] == left, "after cancel: got %d, expected %d", buf[0],
		 left);
}

int main(int argc, char **argv)
{
	mt_init(&argc, &argv, "mpi_nonblocking");
	nmsg = 320 / mt_size > 32 ? (320 + mt_size - 1) / mt_size : 32;
	nreq = mt_size * nmsg;
	sreqs = mt_malloc(sizeof(*sreqs) * (size_t)nreq);
	rreqs = mt_malloc(sizeof(*rreqs) * (size_t)nreq);
	done = mt_malloc(sizeof(int) * (size_t)nreq);
	alloc_bufs();

	phase_a();
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	phase_b();
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	phase_c();
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	phase_d();
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	phase_e();

	free_bufs();
	free(sreqs);
	free(rreqs);
	free(done);
	mt_finish("%d sends + %d receives outstanding per rank "
		  "(Waitany/Testsome/Waitsome, expected/unexpected, "
		  "ANY_SOURCE), fan-in of %d, cancel",
		  nreq, nreq, (mt_size - 1) * FANIN);
	return 0;
}
