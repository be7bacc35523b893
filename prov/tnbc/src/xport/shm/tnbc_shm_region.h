/*
 * The shared-memory transport's layout in /dev/shm, version 3.
 *
 * Everything in this file is visible to, and writable by, every process
 * that may send to an endpoint.  The consumer therefore never trusts it:
 * it keeps its own copy of its queue's geometry, copies each packet
 * header out once before looking at it, and treats any value it reads
 * here as a hint a buggy or hostile peer may have changed.
 *
 * Region names (POSIX shm, under /dev/shm):
 *   /tnbc-<pid>-<ep>-<nonce>   an endpoint's receive queue
 *   /tnbc-<pid>-b-<nonce>      a domain's doorbell
 *   /tnbc-svc-<service>        an endpoint opened on a service number
 * The nonce is 64 random bits, carried in the endpoint's name, so that
 * nobody can create an endpoint's file before it exists.
 *
 * Queue cells (Vyukov's bounded queue, with the claim made visible): the
 * sequence word of the cell for position pos is
 *   pos                       free for pos
 *   TNBC_SHM_CLAIM(pid, pos)  claimed by process pid, being filled
 *   pos + 1                   published
 *   pos + nslots              consumed (free for the next lap)
 * A producer claims the cell with a CAS on its sequence word and then
 * moves tail on (any producer that finds a claimed cell at tail helps).
 * The claim names the producer, so a consumer that finds a cell claimed
 * for too long can tell whether its producer died and step over it.
 */
#ifndef TNBC_SHM_REGION_H
#define TNBC_SHM_REGION_H

#include <stdatomic.h>
#include <stdint.h>

#define TNBC_SHM_MAGIC	  0x74626e63u /* "tnbc" */
#define TNBC_SHM_VERSION  3
#define TNBC_SHM_CELL_HDR 16
#define TNBC_SHM_NAME_MAX 64

#define TNBC_SHM_CLAIMED (1ull << 63)
#define TNBC_SHM_CLAIM(pid, pos)                                               \
	(TNBC_SHM_CLAIMED | ((uint64_t)(uint32_t)(pid) << 32) | (uint32_t)(pos))
#define TNBC_SHM_CLAIM_PID(seq) ((uint32_t)((seq) >> 32) & 0x7fffffffu)
/* whether seq is a claim of the cell for position pos */
#define TNBC_SHM_IS_CLAIM(seq, pos)                                            \
	(((seq)&TNBC_SHM_CLAIMED) && (uint32_t)(seq) == (uint32_t)(pos))

/* Each line is written by one side and read by the other as rarely as
 * the protocol allows: every sender reads sleeping on every packet, so
 * nothing written per message may share its line. */
struct tnbc_shm_bell {
	uint32_t magic;
	uint32_t version;
	_Alignas(64) atomic_uint seq; /* futex word */
	atomic_uint sleeping;
	/* Bumped by application polls; sampled by the engine, which then
	 * publishes app_active for senders.  No clock on the hot path. */
	_Alignas(64) atomic_uint_fast64_t app_polls;
	atomic_uint pulls; /* single-copy reads in flight in this domain */
	_Alignas(64) atomic_uint app_active;
	/* receives posted in this domain: while there are none, an eager
	 * message has nothing to complete and may wait in the queue for
	 * the application's next call, without a wake-up */
	_Alignas(64) atomic_int rx_posted;
};

struct tnbc_shm_cell {
	atomic_uint_fast64_t seq;
	uint32_t len; /* header + payload */
	uint32_t pad;
	/* packet follows: struct tnbc_hdr + payload */
};

_Static_assert(sizeof(struct tnbc_shm_cell) == TNBC_SHM_CELL_HDR, "cell");

struct tnbc_shm_region {
	uint32_t magic;
	uint32_t version;
	uint32_t nslots; /* for producers; the owner keeps its own copy */
	uint32_t slot_size;
	int32_t pid;
	atomic_uint ready;
	char bell_name[TNBC_SHM_NAME_MAX];
	_Alignas(64) atomic_uint_fast64_t tail;
	_Alignas(64) uint8_t cells[];
};

static inline struct tnbc_shm_cell *
tnbc_shm_cell_at(uint8_t *cells, uint64_t pos, uint64_t mask, size_t slot_size)
{
	return (struct tnbc_shm_cell *)(cells + (pos & mask) * slot_size);
}

#endif /* TNBC_SHM_REGION_H */
