/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Alltoall of large slices between hosts with fewer synchronisation
 * messages: seed 001's LSS.  A rendezvous costs a slice three of them
 * when the data must be streamed (request, ready, finish: RTS, CTS and
 * ACK over TCP, or wherever the receiver cannot read the sender's
 * memory), and two when it reads it (RTS, ACK); when all the processes
 * of a host send theirs through one link at once, these tiny messages
 * queue behind the data and cost far more than their size.
 *
 * In an alltoall every receiver knows whom it receives from, so it
 * needs no request: it posts the receive and sends its ready note, and
 * the sender, once the note is in, sends the slice eagerly straight
 * into that receive (in segments of one packet each), whose arrival is
 * the finish.  One synchronisation message per slice instead of three:
 * the paper's LSS needs two because its data is an RDMA write the
 * receiver cannot see land; here the data completes its own receive.
 * The engine's sync_pkts counts them (fi_tnbc_engine_stats).
 *
 * Slices to members of this host go as in the direct exchange when
 * shared memory carries them (its single-copy read: no link to queue
 * behind, and no extra copy through its queue); the others cross a
 * link (tnbc_sched_over_link: another host, or no shared memory in
 * FI_TNBC_XPORTS), decided so that both members of a pair agree.
 *
 * Counters: C1 counts the receives; SENT the sends and the end mark;
 * READY + k, the ready note of the k-th member over a link.
 *   receive each segment from a member over a link, C1         (ARM, 1)
 *   send it the ready note, SENT                               (ARM, 1)
 *   receive its ready note, READY + k                          (ARM, 1)
 *   send it each segment, as ready, SENT                   (READY + k, 1)
 *   the host's members: receive, C1, and send, SENT            (ARM, 1)
 *   mark once every receive is in, SENT                     (C1, recvs)
 */
#include <stdlib.h>

#include "tnbc_sched.h"
#include "../tnbc_alu.h"

enum {
	TNBC_LSS_LOCAL = 1,
	TNBC_LSS_READY,
	TNBC_LSS_DATA, /* segment i is TNBC_LSS_DATA + i */
	/* the steps a slice's segments may take */
	TNBC_LSS_MAX_SEGS = (1 << TNBC_SCHED_STEP_BITS) - TNBC_LSS_DATA,
};

enum {
	TNBC_LSS_SENT = TNBC_SCHED_NCNTR,
	TNBC_LSS_READY_CNTR, /* one per member elsewhere */
};

bool tnbc_alg_lss_can(const struct tnbc_mc *mc, enum fi_collective_op coll,
		      size_t len)
{
	(void)len;
	return coll == FI_ALLTOALL && mc->size > 1;
}

/* A slice's segments over a link: one packet of pkt bytes each, unless
 * that takes more steps than a slice has.  Both sides cut the same way:
 * pkt follows what both members' names say (tnbc_sched_link_payload).
 * One slot's packets cost a 1 MiB slice 32 messages instead of one, and
 * with them LSS lost to the direct exchange's rendezvous by 12 to 22 %
 * over TCP (docs/alltoall-design.md). */
static size_t tnbc_lss_seg(size_t pkt, size_t len)
{
	size_t least = (len + TNBC_LSS_MAX_SEGS - 1) / TNBC_LSS_MAX_SEGS;

	return pkt < least ? least : pkt;
}

int tnbc_alg_lss(struct tnbc_mc *mc, const struct tnbc_coll_op *op)
{
	size_t len = tnbc_alu_size(op->dt) * op->count;
	int n = mc->size, me = mc->rank, nfar = 0, k = 0, j, ret = 0;
	const char *in = op->buf;
	char *out = op->result;
	uint64_t nsend = 0, nrecv = 0;
	struct tnbc_sched *s;
	bool *far = calloc((size_t)n, sizeof(*far));

	if (!far)
		return -FI_ENOMEM;
	for (j = 0; j < n; j++) {
		far[j] = j != me && tnbc_sched_over_link(mc, j);
		nfar += far[j];
	}
	ret = tnbc_sched_new(mc, TNBC_LSS_READY_CNTR + nfar, 0, op->context,
			     &s);
	if (ret) {
		free(far);
		return ret;
	}
	s->end = op->end;
	for (j = 0; !ret && j < n; j++) {
		const char *src = in + (size_t)j * len;
		char *dst = out + (size_t)j * len;
		size_t off, seg;
		unsigned i;

		if (j == me)
			continue;
		if (!far[j]) {
			ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1,
					      TNBC_SCHED_C1, j, TNBC_LSS_LOCAL,
					      dst, len);
			if (!ret)
				ret = tnbc_sched_send(s, TNBC_SCHED_ARM, 1,
						      TNBC_LSS_SENT, j,
						      TNBC_LSS_LOCAL, src, len);
			nrecv++;
			nsend++;
			continue;
		}
		seg = tnbc_lss_seg(tnbc_sched_link_payload(mc, j), len);
		/* the receive first, then the note that says it is there */
		for (off = 0, i = 0; !ret && (off < len || !i);
		     off += seg, i++) {
			size_t part = len - off < seg ? len - off : seg;

			ret = tnbc_sched_recv(
				s, TNBC_SCHED_ARM, 1, TNBC_SCHED_C1, j,
				TNBC_LSS_DATA + i, dst + off, part);
			nrecv++;
		}
		if (!ret)
			ret = tnbc_sched_send_how(
				s, TNBC_SCHED_ARM, 1, TNBC_LSS_SENT, j,
				TNBC_LSS_READY, NULL, 0, TNBC_SCHED_MSG_SYNC);
		if (!ret)
			ret = tnbc_sched_recv(s, TNBC_SCHED_ARM, 1,
					      TNBC_LSS_READY_CNTR + k, j,
					      TNBC_LSS_READY, NULL, 0);
		nsend++;
		for (off = 0, i = 0; !ret && (off < len || !i);
		     off += seg, i++) {
			size_t part = len - off < seg ? len - off : seg;

			ret = tnbc_sched_send_how(s, TNBC_LSS_READY_CNTR + k, 1,
						  TNBC_LSS_SENT, j,
						  TNBC_LSS_DATA + i, src + off,
						  part, TNBC_SCHED_MSG_READY);
			nsend++;
		}
		k++;
	}
	if (!ret && len)
		ret = tnbc_sched_copy(s, TNBC_SCHED_ARM, 1, TNBC_SCHED_NONE,
				      out + (size_t)me * len,
				      in + (size_t)me * len, len);
	free(far);
	return tnbc_sched_close(s, ret, TNBC_SCHED_C1, nrecv, TNBC_LSS_SENT,
				nsend);
}
