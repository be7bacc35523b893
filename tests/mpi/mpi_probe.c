/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_probe: MPI_Probe / MPI_Iprobe and matched probes (MPI_Mprobe /
 * MPI_Improbe with MPI_Mrecv / MPI_Imrecv) on small and large (1 MiB)
 * messages.
 *
 * Each rank sends to its right neighbour and probes messages coming from
 * its left neighbour; all sends are non-blocking so that probing before
 * the receive is posted cannot deadlock on large messages.  Phases are
 * separated by barriers so wildcard probes only see their own phase.
 */
#include "mpitest.h"

#include <stdlib.h>
#include <string.h>

#define SMALL 45
#define LARGE ((1u << 20) + 3)

static int left, right;
static uint8_t *sbuf[2], *rbuf;

static size_t msg_size(int which, int rank)
{
	/* Vary sizes by rank so a wrong match shows up in the count. */
	return which ? LARGE + (size_t)rank : SMALL + (size_t)rank;
}

static uint32_t seed_of(int src, int tag)
{
	return (uint32_t)(src * 1009 + tag * 17);
}

/* Start the small (tag_s) and large (tag_l) message to the right. */
static void send_pair(int tag_s, int tag_l, MPI_Request reqs[2])
{
	mt_fill(sbuf[0], msg_size(0, mt_rank), seed_of(mt_rank, tag_s));
	mt_fill(sbuf[1], msg_size(1, mt_rank), seed_of(mt_rank, tag_l));
	MT_MPI(MPI_Isend(sbuf[0], (int)msg_size(0, mt_rank), MPI_BYTE, right,
			 tag_s, MPI_COMM_WORLD, &reqs[0]));
	MT_MPI(MPI_Isend(sbuf[1], (int)msg_size(1, mt_rank), MPI_BYTE, right,
			 tag_l, MPI_COMM_WORLD, &reqs[1]));
}

static void check_probe_status(const MPI_Status *st, int src, int tag,
			       size_t count, const char *what)
{
	int n;

	MT_CHECK(st->MPI_SOURCE == src, "%s: MPI_SOURCE %d, expected %d", what,
		 st->MPI_SOURCE, src);
	MT_CHECK(st->MPI_TAG == tag, "%s: MPI_TAG %d, expected %d", what,
		 st->MPI_TAG, tag);
	MT_MPI(MPI_Get_count(st, MPI_BYTE, &n));
	MT_CHECK(n == (int)count, "%s: MPI_Get_count %d, expected %zu", what, n,
		 count);
}

static void recv_check(int which, int tag, const char *what)
{
	MPI_Status st;
	size_t len = msg_size(which, left);

	memset(rbuf, 0, len);
	MT_MPI(MPI_Recv(rbuf, (int)LARGE + mt_size, MPI_BYTE, left, tag,
			MPI_COMM_WORLD, &st));
	check_probe_status(&st, left, tag, len, what);
	MT_VERIFY(rbuf, len, seed_of(left, tag), "%s", what);
}

/* Wait until a probe for (src, tag) would find nothing. */
static void check_absent(int src, int tag, const char *what)
{
	int flag;

	MT_MPI(MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
	MT_CHECK(!flag,
		 "%s: MPI_Iprobe found a message that was already "
		 "received or claimed",
		 what);
}

/* MPI_Probe followed by MPI_Recv, probing the large message first. */
static void test_probe(void)
{
	MPI_Request reqs[2];
	MPI_Status st;

	mt_phase("probe");
	send_pair(1, 2, reqs);

	MT_MPI(MPI_Probe(left, 2, MPI_COMM_WORLD, &st));
	check_probe_status(&st, left, 2, msg_size(1, left), "probe large");
	/* Probing again must find the same, still unreceived message. */
	MT_MPI(MPI_Probe(MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &st));
	check_probe_status(&st, left, 2, msg_size(1, left), "re-probe large");
	recv_check(1, 2, "recv after probe (large)");

	/* Only the small message is left: a full wildcard must find it. */
	MT_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
	check_probe_status(&st, left, 1, msg_size(0, left),
			   "wildcard probe small");
	recv_check(0, 1, "recv after probe (small)");
	check_absent(left, 1, "probe");
	MT_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
}

/* MPI_Iprobe polling; nothing must be found for an unused tag. */
static void test_iprobe(void)
{
	MPI_Request reqs[2];
	MPI_Status st;
	int flag = 0, which;
	long spins = 0;

	mt_phase("iprobe");
	MT_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag,
			  MPI_STATUS_IGNORE));
	MT_CHECK(!flag, "MPI_Iprobe found a message with an unused tag");
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	send_pair(3, 4, reqs);

	for (which = 1; which >= 0; which--) {
		flag = 0;
		while (!flag) {
			MT_MPI(MPI_Iprobe(left, 3 + which, MPI_COMM_WORLD,
					  &flag, &st));
			spins++;
		}
		check_probe_status(&st, left, 3 + which, msg_size(which, left),
				   which ? "iprobe large" : "iprobe small");
		recv_check(which, 3 + which,
			   which ? "recv after iprobe (large)"
				 : "recv after iprobe (small)");
	}
	check_absent(left, 3, "iprobe");
	check_absent(left, 4, "iprobe");
	MT_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
	MT_CHECK(spins > 0, "iprobe loop did not run");
}

static void mrecv_check(MPI_Message *msg, int which, int tag, int nonblocking,
			const char *what)
{
	MPI_Request req;
	MPI_Status st;
	size_t len = msg_size(which, left);

	memset(rbuf, 0, len);
	if (nonblocking) {
		MT_MPI(MPI_Imrecv(rbuf, (int)LARGE + mt_size, MPI_BYTE, msg,
				  &req));
		MT_CHECK(*msg == MPI_MESSAGE_NULL,
			 "%s: MPI_Imrecv did not reset the message handle",
			 what);
		MT_MPI(MPI_Wait(&req, &st));
	} else {
		MT_MPI(MPI_Mrecv(rbuf, (int)LARGE + mt_size, MPI_BYTE, msg,
				 &st));
		MT_CHECK(*msg == MPI_MESSAGE_NULL,
			 "%s: MPI_Mrecv did not reset the message handle",
			 what);
	}
	check_probe_status(&st, left, tag, len, what);
	MT_VERIFY(rbuf, len, seed_of(left, tag), "%s", what);
}

/*
 * MPI_Mprobe: claim the large message, then a full wildcard mprobe must
 * see the small one (the large one is no longer matchable); receive them
 * in the opposite order of claiming.
 */
static void test_mprobe(void)
{
	MPI_Message msg_l, msg_s;
	MPI_Request reqs[2];
	MPI_Status st;

	mt_phase("mprobe");
	send_pair(5, 6, reqs);
	MT_MPI(MPI_Mprobe(left, 6, MPI_COMM_WORLD, &msg_l, &st));
	check_probe_status(&st, left, 6, msg_size(1, left), "mprobe large");
	MT_MPI(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg_s,
			  &st));
	check_probe_status(&st, left, 5, msg_size(0, left),
			   "wildcard mprobe small");
	check_absent(MPI_ANY_SOURCE, MPI_ANY_TAG, "mprobe");
	mrecv_check(&msg_s, 0, 5, 0, "mrecv small");
	mrecv_check(&msg_l, 1, 6, 0, "mrecv large");
	MT_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
}

/* MPI_Improbe polling + MPI_Imrecv, small message first this time. */
static void test_improbe(void)
{
	MPI_Message msg[2];
	MPI_Request reqs[2];
	MPI_Status st;
	int flag, which;

	mt_phase("improbe");
	send_pair(7, 8, reqs);
	for (which = 0; which < 2; which++) {
		flag = 0;
		while (!flag)
			MT_MPI(MPI_Improbe(left, MPI_ANY_TAG, MPI_COMM_WORLD,
					   &flag, &msg[which], &st));
		/* Same source, so the non-overtaking rule fixes the order. */
		check_probe_status(&st, left, 7 + which, msg_size(which, left),
				   which ? "improbe large" : "improbe small");
	}
	check_absent(left, MPI_ANY_TAG, "improbe");
	mrecv_check(&msg[1], 1, 8, 1, "imrecv large");
	mrecv_check(&msg[0], 0, 7, 1, "imrecv small");
	MT_MPI(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
}

/* Zero-byte messages through every probe flavour. */
static void test_zero(void)
{
	MPI_Request req;
	MPI_Message msg;
	MPI_Status st;
	int n, flag = 0;

	mt_phase("zero-byte probes");
	MT_MPI(MPI_Isend(NULL, 0, MPI_BYTE, right, 11, MPI_COMM_WORLD, &req));
	MT_MPI(MPI_Probe(left, 11, MPI_COMM_WORLD, &st));
	MT_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
	MT_CHECK(n == 0, "zero-byte probe: count %d", n);
	while (!flag)
		MT_MPI(MPI_Improbe(left, 11, MPI_COMM_WORLD, &flag, &msg, &st));
	MT_MPI(MPI_Mrecv(NULL, 0, MPI_BYTE, &msg, &st));
	check_probe_status(&st, left, 11, 0, "zero-byte mrecv");
	MT_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

static size_t hub_size(int rank)
{
	return rank % 2 ? LARGE - (size_t)rank : (size_t)rank * 4099;
}

/*
 * Everybody sends to rank 0, which discovers the senders with wildcard
 * probes (alternating Probe+Recv and Mprobe+Mrecv) and sizes its buffer
 * from MPI_Get_count.
 */
static void test_hub(void)
{
	MPI_Request req;
	MPI_Message msg;
	MPI_Status st;
	char seen[1024];
	uint8_t *buf;
	int i, n, src;
	size_t len;

	mt_phase("hub");
	if (mt_rank != 0) {
		len = hub_size(mt_rank);
		mt_fill(sbuf[0], len, seed_of(mt_rank, 20));
		MT_MPI(MPI_Isend(sbuf[0], (int)len, MPI_BYTE, 0, 20,
				 MPI_COMM_WORLD, &req));
		MT_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
		return;
	}
	memset(seen, 0, sizeof(seen));
	for (i = 1; i < mt_size; i++) {
		mt_phase("hub: message %d of %d", i, mt_size - 1);
		if (i % 2)
			MT_MPI(MPI_Probe(MPI_ANY_SOURCE, 20, MPI_COMM_WORLD,
					 &st));
		else
			MT_MPI(MPI_Mprobe(MPI_ANY_SOURCE, 20, MPI_COMM_WORLD,
					  &msg, &st));
		src = st.MPI_SOURCE;
		MT_CHECK(src > 0 && src < mt_size && !seen[src],
			 "hub: probe returned bogus or duplicate source %d",
			 src);
		seen[src] = 1;
		len = hub_size(src);
		MT_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
		MT_CHECK(n == (int)len, "hub: count %d from %d, expected %zu",
			 n, src, len);
		buf = mt_malloc((size_t)n);
		mt_phase("hub: message %d of %d: receive %d B from %d", i,
			 mt_size - 1, n, src);
		if (i % 2)
			MT_MPI(MPI_Recv(buf, n, MPI_BYTE, src, 20,
					MPI_COMM_WORLD, &st));
		else
			MT_MPI(MPI_Mrecv(buf, n, MPI_BYTE, &msg, &st));
		check_probe_status(&st, src, 20, len, "hub recv");
		MT_VERIFY(buf, len, seed_of(src, 20), "hub message from %d",
			  src);
		free(buf);
	}
}

int main(int argc, char **argv)
{
	int iter;

	mt_init(&argc, &argv, "mpi_probe");
	left = (mt_rank + mt_size - 1) % mt_size;
	right = (mt_rank + 1) % mt_size;
	sbuf[0] = mt_malloc(LARGE + (size_t)mt_size);
	sbuf[1] = mt_malloc(LARGE + (size_t)mt_size);
	rbuf = mt_malloc(LARGE + (size_t)mt_size);

	for (iter = 0; iter < 2; iter++) {
		test_probe();
		MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
		test_iprobe();
		MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
		test_mprobe();
		MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
		test_improbe();
		MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
		test_zero();
		MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
		test_hub();
		MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	}

	free(sbuf[0]);
	free(sbuf[1]);
	free(rbuf);
	mt_finish("Probe/Iprobe/Mprobe/Improbe + Recv/Mrecv/Imrecv with "
		  "%d B and %u B messages, zero-byte, wildcard hub",
		  SMALL, LARGE);
	return 0;
}
