/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The page guard of T-NBC (seed 000): ranges of a receive buffer stay
 * unreadable until their data has landed, so that a collective may return
 * before its data has arrived and the first touch of a missing piece waits
 * for exactly that piece.
 *
 * A guarded range is whole pages of anonymous private memory (the caller
 * keeps the first and last page of an unaligned buffer out: nothing
 * foreign is ever protected).  Its data lands in a staging mapping of the
 * same size, which the transfer fills; the range's ready words turn
 * nonzero once the last byte is there (the provider's engine writes
 * each, a triggered copy step after each receive that lands there).  Opening
 * the range moves the staging pages over the protected ones (mremap): the data
 * appears whole, never half written, without a copy.
 *
 * A fault inside a guarded range is served by the guard's SIGSEGV/SIGBUS
 * handler: it waits for the ready word, opens the range and returns, and
 * the faulting instruction runs again.  The handler is async-signal-safe
 * (system calls and atomics only: no lock, no allocation, no MPI), works
 * when several threads fault at once, and hands every other fault to the
 * handler installed before it (or to the default action).
 *
 * While the handler is installed, a program's sigaction(2) and signal(3)
 * for SIGSEGV and SIGBUS (interposed here) set the handler the guard
 * chains to, and the guard's stays the kernel's.
 *
 * The kernel does not fault on a protected page, it fails (EFAULT): a
 * library call that passes a buffer to the kernel must open the ranges
 * it overlaps first (tg_guard_open_overlap).
 */
#ifndef TG_GUARD_H
#define TG_GUARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tg_guard_range;

/* Installs the fault handler (once; later calls count). */
int tg_guard_init(void);
/* Restores the handler found by the first tg_guard_init, when the last
 * user lets go; every range must be open or released by then. */
void tg_guard_fini(void);

/*
 * Guards [addr, addr + len), both page-aligned, len > 0: maps a staging
 * area of len bytes (returned in *stage, where the data must land), then
 * makes the range PROT_NONE.  ready: nready words that have all turned
 * nonzero when the staging area holds all of the range's data (one per
 * message that lands in it).  Returns 0 or a negative errno; nothing is
 * protected on error.
 */
int tg_guard_protect(void *addr, size_t len, const atomic_uint *ready,
		     unsigned nready, void **stage,
		     struct tg_guard_range **out);
/* Waits for the range's data and opens it (idempotent), then forgets it.
 * Not from a signal handler.  Returns 0 or a negative errno (the range
 * is then left readable, its data lost: the staging area could not be
 * moved). */
int tg_guard_release(struct tg_guard_range *r);
/* Forgets a range no data was sent to, as it was before
 * tg_guard_protect (its contents kept): a call that cannot go on.  No
 * thread may touch the range meanwhile. */
void tg_guard_abandon(struct tg_guard_range *r);
/* Opens every guarded range that overlaps [addr, addr + len), waiting
 * for their data: before a buffer goes to the kernel or to the MPI. */
void tg_guard_open_overlap(const void *addr, size_t len);
/* Whether r has been opened (by a fault or a release). */
bool tg_guard_is_open(const struct tg_guard_range *r);
/* When r's data was first needed (a fault, or an open): CLOCK_MONOTONIC
 * ns; 0 while it has not been. */
uint64_t tg_guard_touched(const struct tg_guard_range *r);
/* ns spent waiting for ranges' data (faults and opens), summed. */
uint64_t tg_guard_wait_ns(void);
/* Whether any range is guarded (one load). */
bool tg_guard_any(void);
/* Faults the handler served since init, for reports and tests. */
uint64_t tg_guard_faults(void);
/* Staging bytes mapped anew, not staged into kept pages, since init. */
uint64_t tg_guard_fresh_bytes(void);

#endif /* TG_GUARD_H */
