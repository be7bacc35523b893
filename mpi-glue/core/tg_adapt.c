/* SPDX-License-Identifier: BSD-2-Clause */
/* T-NBC against the plain offload, per call site (see tg_adapt.h). */
#include "tg_adapt.h"

#include <string.h>

/* How much shorter T-NBC's mean period must be to be kept, in percent:
 * above the spread of a rank's periods between two ways that cost the
 * same (NPB FT A at 2 ranks: a rank kept T-NBC on 196 ms against 201,
 * and every later run that followed it took 5 to 30 % longer). */
#define TG_ADAPT_MARGIN 5

void tg_adapt_init(struct tg_adapt *a)
{
	memset(a, 0, sizeof(*a));
	a->last = -1;
	a->verdict = -1;
}

void tg_adapt_tell(struct tg_adapt *a, enum tg_way verdict, const double ms[2])
{
	tg_adapt_init(a);
	a->verdict = verdict;
	/* kept as one period each, so that the means read back */
	for (int w = 0; w < 2; w++) {
		a->n[w] = 1;
		a->sum[w] = (uint64_t)(ms[w] * 1e6);
	}
}

double tg_adapt_mean_ms(const struct tg_adapt *a, enum tg_way w)
{
	return a->n[w] ? (double)a->sum[w] / a->n[w] / 1e6 : 0;
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
		/* the means compared without a division: T-NBC is kept
		 * only TG_ADAPT_MARGIN % ahead, for the plain way moves no
		 * page, takes no signal, and costs the other ranks nothing
		 * a rank's own periods do not show */
		unsigned __int128 t = (unsigned __int128)a->sum[TG_WAY_TNBC] *
				      a->n[TG_WAY_PLAIN] * 100,
				  p = (unsigned __int128)a->sum[TG_WAY_PLAIN] *
				      a->n[TG_WAY_TNBC] *
				      (100 - TG_ADAPT_MARGIN);

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
