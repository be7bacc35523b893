/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The host's link, shared by its processes (T-NBC, seed 000 section
 * 5.2.2): when several processes of one host send off the host at once
 * each gets a share of the link, and each one's first-needed message
 * arrives as late as its last.  With this board they agree instead: a
 * transfer to another host waits while a neighbour has one of a higher
 * priority queued, so the link serves the host's most urgent data first.
 *
 * The board is a small shared-memory file per user and network
 * namespace; each process holds one slot and publishes there the
 * highest priority among its queued off-host transfers.  Nobody is
 * trusted to behave: a hold lasts FI_TNBC_LINK_HOLD_MS at most, and a
 * slot whose process has died stops counting.
 */
#ifndef TNBC_LINK_H
#define TNBC_LINK_H

#include <stdbool.h>
#include <stdint.h>

/* A domain that reaches other hosts joins the board (its first one
 * opens it); false when there is none to join (FI_TNBC_LINK_SHARE off,
 * or no slot or file could be had: a warning said why). */
bool tnbc_link_join(void);
void tnbc_link_leave(void);

/* A transfer of this priority to another host entered (+1) or left
 * (-1) a transmit queue of this process. */
void tnbc_link_queued(uint8_t prio, int delta);

/* Whether a queued transfer of this priority may go on now: no
 * neighbour has a higher one queued.  *held_ns is the transfer's own
 * record of when its hold began (0: not held). */
bool tnbc_link_turn(uint8_t prio, uint64_t *held_ns);

/* Transfers held back for a neighbour so far (each counted once per
 * hold), and holds that ran out FI_TNBC_LINK_HOLD_MS. */
uint64_t tnbc_link_holds(void);
uint64_t tnbc_link_overruns(void);

#endif /* TNBC_LINK_H */
