/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The shared-memory transport's layout in /dev/shm, version 7.
 *
 * Everything in this file is visible to, and writable by, every process
 * that may send to an endpoint.  The consumer therefore never trusts it:
 * it keeps its own copy of its queue's geometry, reads each cell's
 * length and format once, and treats any value it reads here as a hint
 * a buggy or hostile peer may have changed.  The packets themselves are
 * the protocol's frames and payloads, which this transport never reads:
 * the protocol copies a frame out once before it checks it.
 *
 * Region names (POSIX shm, under /dev/shm):
 *   /tnbc-<pid>-<ep>-<nonce>   an endpoint's receive queue
 *   /tnbc-<pid>-b-<nonce>      a domain's doorbell
 *   /tnbc-svc-<service>        an endpoint opened on a service number
 * The nonce is 64 random bits, carried in the endpoint's name, so that
 * nobody can create an endpoint's file before it exists.
 *
 * The queue (version 5): a ring of 64-byte cells in which a packet takes
 * as many consecutive cells as its length needs, so that small messages
 * take one cache line each and the ring's bytes, not its packet count,
 * set its cache footprint.  A packet never wraps: a sender that would
 * cross the end first fills the rest of the lap with a pad packet.
 *
 * A sender claims cells [t, t + k) by moving tail from t to t + k with a
 * CAS, after checking against head (positions before head are free) that
 * they were consumed on the last lap.  It then marks its first cell
 * claimed (sequence word TNBC_SHM_CLAIM(pid, pos), with the packet length
 * in len), writes the packet and publishes it (sequence word pos + 1).
 * The consumer sets the sequence word of every cell of a packet back to
 * 0 before it moves head past it, so a packet's first cell only ever
 * holds 0, a claim or a publication for its own position, never a stale
 * word of an older packet's payload.
 *
 * The claim names the sender, so a consumer that finds a cell claimed for
 * too long can tell whether its sender died and step over the packet.  A
 * sender that dies between its CAS and its mark leaves tail ahead of an
 * unmarked cell; after a longer bound the consumer steps over to the next
 * marked cell (fi_tnbc(7)).
 *
 * The mailbox (version 6): beside the queue, TNBC_SHM_MBOX_SLOTS slots of
 * TNBC_SHM_MBOX_SLOT bytes for small packets that need not keep their
 * order (TNBC_XPKT_UNORDERED in the transport interface: a collective's
 * contributions and results).  A contribution is a tree's hot path: a
 * slot spares it the queue's tail, which every sender of the endpoint
 * contends for, and the queue's order, which would hold it behind a
 * large message.  A slot holds a frame and its payload.
 * A slot's first 16 bytes are a struct tnbc_shm_cell whose seq is the
 * slot's state:
 *   0                         empty: any sender may claim it
 *   TNBC_SHM_CLAIM(pid, 0)    a sender claimed it (CAS from 0) and writes
 *   TNBC_SHM_MBOX_FULL        published: the consumer's to read
 * After publishing, the sender sets the slot's bit in mbox_full (an
 * atomic OR): the consumer looks at that one word while idle, takes it
 * with an exchange, and reads only the slots it names.  Having copied a
 * packet out, the consumer sets the state back to 0.
 * A sender that finds its slots taken sends through the queue instead:
 * the mailbox never refuses what the queue would accept.  A bit without
 * a published slot behind it is ignored, and a published slot is checked
 * as a queue cell is.  Now and then the consumer also looks at every
 * slot: one published by a sender that died before setting its bit is
 * taken, and one claimed across two looks (at least 100 ms apart) by a
 * process that no longer exists is handed back.
 *
 * Holds (version 8): a sender whose messages nobody has asked for yet
 * fills the queue with packets the consumer must keep (no room left to
 * buffer them, FI_TNBC_UNEXP_MAX), and senders claim cells from head on:
 * kept packets at head would stop every sender.  Once kept packets hold
 * half the queue the consumer moves the oldest into its own memory and
 * names, in hold[], the senders most of them came from.  A sender named
 * there sends nothing that could be kept (eager messages and RTS) to
 * this endpoint until it is no longer named; its answers and the other
 * senders' messages go on.  Only the consumer writes hold[], and a
 * sender reads it before each such packet (holds first, which is 0 but
 * for a flood).  A sender that ignores its name only makes the consumer
 * stop moving packets (it moves at most as many bytes as the queue
 * holds): back to a full queue, never to anything lost.
 */
#ifndef TNBC_SHM_REGION_H
#define TNBC_SHM_REGION_H

#include <stdatomic.h>
#include <stdint.h>

#define TNBC_SHM_MAGIC	    0x74626e63u /* "tnbc" */
#define TNBC_SHM_VERSION    8
#define TNBC_SHM_CELL_HDR   16
#define TNBC_SHM_NAME_MAX   64
#define TNBC_SHM_CELL	    64 /* bytes per queue cell */
#define TNBC_SHM_MBOX_SLOTS 64 /* the bits of mbox_full */
#define TNBC_SHM_MBOX_SLOT  128 /* bytes per slot, its cell header included */
#define TNBC_SHM_MBOX_FULL  1u /* a slot's seq once its packet is written */
#define TNBC_SHM_HOLD_MAX   31 /* senders hold[] can name */

/* A sender as hold[] names it: its process and endpoint number. */
#define TNBC_SHM_HOLD_KEY(pid, ep)                                             \
	(((uint64_t)(uint32_t)(pid) << 32) | (uint32_t)(ep))

#define TNBC_SHM_CLAIMED (1ull << 63)
#define TNBC_SHM_CLAIM(pid, pos)                                               \
	(TNBC_SHM_CLAIMED | ((uint64_t)(uint32_t)(pid) << 32) | (uint32_t)(pos))
#define TNBC_SHM_CLAIM_PID(seq) ((uint32_t)((seq) >> 32) & 0x7fffffffu)
/* whether seq is a claim of the cell for position pos */
#define TNBC_SHM_IS_CLAIM(seq, pos)                                            \
	(((seq)&TNBC_SHM_CLAIMED) && (uint32_t)(seq) == (uint32_t)(pos))

/* bell.sleeping: what the engine is doing */
#define TNBC_SHM_AWAKE	0
#define TNBC_SHM_ASLEEP 1 /* until rung: every packet it needs rings */
/* a nap with a timeout, taken while the application polls: a packet that
 * comes within a window of its last poll is the application's to take,
 * and rings only once the application has stopped for a window */
#define TNBC_SHM_NAPPING 2

/* Each line is written by one side and read by the other as rarely as
 * the protocol allows: every sender reads sleeping on every packet, so
 * nothing written per message may share its line. */
struct tnbc_shm_bell {
	uint32_t magic;
	uint32_t version;
	/* Set once, at creation: before an unbounded sleep the engine runs
	 * a global expedited membarrier(2), a full barrier on every CPU
	 * that runs a registered process.  A registered sender may then
	 * publish and look at sleeping without a fence of its own (the
	 * barrier is the engine's side of both), and fences only when it
	 * finds the engine asleep. */
	uint32_t asym;
	_Alignas(64) atomic_uint seq; /* futex word */
	atomic_uint sleeping; /* TNBC_SHM_AWAKE, _ASLEEP or _NAPPING */
	/* how long an application poll counts as polling (ns): the engine
	 * lengthens it on a host with more runnable threads than CPUs */
	atomic_uint_fast64_t window_ns;
	/* CLOCK_MONOTONIC ns of an application poll, refreshed at most a
	 * few times a window so that senders reading it mostly hit their
	 * cache; 0 while no application thread polls */
	_Alignas(64) atomic_uint_fast64_t app_seen;
	atomic_uint pulls; /* single-copy reads in flight in this domain */
	/* endpoints of this domain with receives posted (or that had some
	 * since the engine last slept): while there are none, an eager
	 * message has nothing to complete and may wait in the queue for
	 * the application's next call, without a wake-up */
	_Alignas(64) atomic_int rx_posted;
};

/* cell.fmt: what the cell holds (version 7: a word of this transport's
 * own; in 6 it said how the protocol had framed its header) */
#define TNBC_SHM_FMT_PKT   0 /* a packet */
#define TNBC_SHM_FMT_PARKS 1 /* a packet sent with TNBC_XPKT_PARKS */
#define TNBC_SHM_FMT_PAD   3 /* nothing: the rest of the lap is unused */

/* The first cell of a packet; the packet runs on into the next cells. */
struct tnbc_shm_cell {
	atomic_uint_fast64_t seq; /* 0, a claim or a publication (above) */
	uint32_t len; /* header + payload */
	uint32_t fmt; /* TNBC_SHM_FMT_* */
	/* packet follows: its header (see fmt), then the payload */
};

_Static_assert(sizeof(struct tnbc_shm_cell) == TNBC_SHM_CELL_HDR, "cell");

struct tnbc_shm_region {
	uint32_t magic;
	uint32_t version;
	/* cells, a power of two; the owner keeps its own copy */
	uint32_t nslots;
	uint32_t slot_size; /* the largest packet, cell header included */
	int32_t pid;
	atomic_uint ready;
	char bell_name[TNBC_SHM_NAME_MAX];
	_Alignas(64) atomic_uint_fast64_t tail; /* next position to claim */
	/* Written by the consumer after it freed the cells before it; read
	 * by a sender only when its own copy says the ring is full. */
	_Alignas(64) atomic_uint_fast64_t head;
	/* bit i: slot i of mbox was published since the consumer last
	 * took this word */
	_Alignas(64) atomic_uint_fast64_t mbox_full;
	/* senders held back (above): hold[0, holds) name them */
	_Alignas(64) atomic_uint holds;
	atomic_uint_fast64_t hold[TNBC_SHM_HOLD_MAX]; /* TNBC_SHM_HOLD_KEY */
	_Alignas(64) uint8_t mbox[TNBC_SHM_MBOX_SLOTS * TNBC_SHM_MBOX_SLOT];
	_Alignas(64) uint8_t cells[];
};

static inline struct tnbc_shm_cell *
tnbc_shm_cell_at(uint8_t *cells, uint64_t pos, uint64_t mask)
{
	return (struct tnbc_shm_cell *)(cells + (pos & mask) * TNBC_SHM_CELL);
}

static inline struct tnbc_shm_cell *tnbc_shm_mbox_at(uint8_t *mbox, unsigned i)
{
	return (struct tnbc_shm_cell *)(mbox +
					(size_t)(i % TNBC_SHM_MBOX_SLOTS) *
						TNBC_SHM_MBOX_SLOT);
}

/* Cells a packet of len bytes (header and payload) takes. */
static inline uint64_t tnbc_shm_cells(uint64_t len)
{
	return (TNBC_SHM_CELL_HDR + len + TNBC_SHM_CELL - 1) / TNBC_SHM_CELL;
}

#endif /* TNBC_SHM_REGION_H */
