/* SPDX-License-Identifier: BSD-2-Clause */
/* T-NBC against the plain offload, per call site (see tg_adapt.h). */
#include "tg_adapt.h"

#include <string.h>

void tg_adapt_init(struct tg_adapt *a)
{
	memset(a, 0, sizeof(*a));
	a->last = -1;
	a->verdict = -1;
}

bool tg_adapt_settle_first(const struct tg_adapt *a)
{
	return a->verdict < 0 && a->last == TG_WAY_TNBC;
}

enum tg_way tg_adapt_pick(struct tg_adapt *a, uint64_t now, unsigned trials)
{
	enum tg_way way;

	if (!trials)
		return TG_WAY_TNBC;
	if (a->verdict >= 0)
		return (enum tg_way)a->verdict;
	if (a->counted && now > a->t_last) {
		a->sum[a->last] += now - a->t_last;
		a->n[a->last]++;
	}
	if (a->n[TG_WAY_PLAIN] >= trials && a->n[TG_WAY_TNBC] >= trials) {
		/* the means compared without a division; a tie keeps the
		 * plain way, which moves no page and takes no signal */
		unsigned __int128 t = (unsigned __int128)a->sum[TG_WAY_TNBC] *
				      a->n[TG_WAY_PLAIN],
				  p = (unsigned __int128)a->sum[TG_WAY_PLAIN] *
				      a->n[TG_WAY_TNBC];

		a->verdict = t < p ? TG_WAY_TNBC : TG_WAY_PLAIN;
		return (enum tg_way)a->verdict;
	}
	/* T-NBC on even calls, plain on odd ones; the first of each way
	 * a warm-up, uncounted */
	way = a->calls & 1 ? TG_WAY_PLAIN : TG_WAY_TNBC;
	a->last = (int)way;
	a->counted = a->calls > 1;
	a->calls++;
	a->t_last = now;
	return way;
}
