/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * T-NBC tried against the plain offload at each call site, and kept only
 * where it paid (TNBC_MPI_TNBC_ADAPT).
 *
 * What T-NBC costs is not the call alone: the send copy and the guard's
 * system calls are in it, but so are the faults after it, the waits for
 * data another process's engine moves, and the cores the engines take
 * from the computation in between.  All of it shows in one figure: the
 * period of the program's loop at the site, from one call there to the
 * next.  The ways alternate, T-NBC first, and the first call of each is
 * a warm-up that counts for neither: the first T-NBC call pays T-NBC's
 * one-time costs (the fault handler installed, the communicator joined,
 * staging and send-copy memory first touched), and the period after
 * the second call may hold the program's own (NPB FT class B's: 1.6 s
 * against 0.7 after, its work arrays written for the first time).  Then each
 * way runs its trials, and T-NBC is kept for the rest of the run only if its
 * mean period was more than TG_ADAPT_MARGIN % shorter.  The caller completes a
 * T-NBC call's data before the next call's clock is read, so that no wait of a
 * T-NBC call at the site is counted in the plain call after it.
 *
 * Pure bookkeeping: the caller holds whatever lock keeps the site's
 * record, and passes the clock.
 */
#ifndef TG_ADAPT_H
#define TG_ADAPT_H

#include <stdbool.h>
#include <stdint.h>

enum tg_way {
	TG_WAY_PLAIN, /* all data in place before the return */
	TG_WAY_TNBC, /* return early, the receive buffer guarded */
};

struct tg_adapt {
	uint64_t t_last; /* the clock at the site's previous call */
	int last; /* its way, or -1: none yet */
	bool counted; /* whether its period counts (not the warm-up's) */
	unsigned calls;
	unsigned n[2]; /* periods counted, by way */
	uint64_t sum[2]; /* their total, ns */
	int verdict; /* the way kept, or -1 while trying */
};

/* A site not tried yet. */
void tg_adapt_init(struct tg_adapt *a);

/* The way of the call starting at `now` (ns, monotonic), with `trials`
 * periods of each way before the verdict; trials 0: T-NBC always. */
enum tg_way tg_adapt_pick(struct tg_adapt *a, uint64_t now, unsigned trials);

/* A site that starts on a verdict taken earlier (an earlier run's), with
 * the mean periods, ms by way, it was taken on: it tries nothing. */
void tg_adapt_tell(struct tg_adapt *a, enum tg_way verdict, const double ms[2]);

/* The mean period of way w so far, ms (0: none counted). */
double tg_adapt_mean_ms(const struct tg_adapt *a, enum tg_way w);

/* Whether the previous call at the site went the T-NBC way while trying
 * (the warm-up among them): its data is to be completed before the
 * clock of this call is read. */
bool tg_adapt_settle_first(const struct tg_adapt *a);

#endif
