/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The offload policy, its variables and the report.
 *
 * Non-blocking calls always go to the offload: that is where progress
 * matters.  A blocking call goes there where the offload was measured at
 * least as fast as the MPI's own algorithm, from tg_cuts[] (bytes of one
 * member's share at or above which the offload wins, by MPI and by
 * whether a host has more ranks than cores);
 * how the table was measured is in tnbc-mpi(7).  Every input of the
 * decision is the same on every member, so all members decide alike.
 *
 * Variables (tnbc-mpi(7) mirrors this function):
 *   TNBC_MPI=0                 the glue stays out of everything
 *   TNBC_MPI_OFFLOAD=auto|all|none   blocking calls: by the table, all
 *                              of them, or none
 *   TNBC_MPI_<FN>=auto|on|off  one function (FN as in MPI_<Fn>, upper
 *                              case: ALLREDUCE, IALLTOALLV, ...)
 *   TNBC_MPI_<FN>_MIN=bytes    move that function's cutoff
 *   TNBC_MPI_TNBC=list|all     T-NBC for these blocking functions
 *                              (MPI_Alltoall, MPI_Alltoallv, MPI_Bcast)
 *   TNBC_MPI_TNBC_MIN=bytes    from this largest message on (4096)
 *   TNBC_MPI_TNBC_PIECE=bytes  a broadcast's pieces (65536)
 *   TNBC_MPI_TNBC_ADAPT=n      periods of each way a call site tries
 *                              before T-NBC is kept or left there (2;
 *                              0: T-NBC at every call)
 *   TNBC_MPI_REPORT=1          rank 0 prints the counts at MPI_Finalize
 *
 * Every rank reads them, and every rank must read the same: a launcher
 * that does not forward them (Open MPI's mpirun without -x, to another
 * host) would make one member offload what another falls back on.  The
 * front-end compares tg_policy_env_hash() across the world at start.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tg_priv.h"

static const char *const tg_names[TG_NFN] = {
	[TG_ALLREDUCE] = "MPI_Allreduce",
	[TG_REDUCE] = "MPI_Reduce",
	[TG_BCAST] = "MPI_Bcast",
	[TG_BARRIER] = "MPI_Barrier",
	[TG_ALLGATHER] = "MPI_Allgather",
	[TG_ALLTOALL] = "MPI_Alltoall",
	[TG_ALLTOALLV] = "MPI_Alltoallv",
	[TG_REDUCE_SCATTER_BLOCK] = "MPI_Reduce_scatter_block",
	[TG_GATHER] = "MPI_Gather",
	[TG_SCATTER] = "MPI_Scatter",
	[TG_ALLGATHERV] = "MPI_Allgatherv",
	[TG_GATHERV] = "MPI_Gatherv",
	[TG_SCATTERV] = "MPI_Scatterv",
	[TG_REDUCE_SCATTER] = "MPI_Reduce_scatter",
	[TG_NEIGHBOR_ALLGATHER] = "MPI_Neighbor_allgather",
	[TG_NEIGHBOR_ALLTOALL] = "MPI_Neighbor_alltoall",
	[TG_NEIGHBOR_ALLGATHERV] = "MPI_Neighbor_allgatherv",
	[TG_NEIGHBOR_ALLTOALLV] = "MPI_Neighbor_alltoallv",
	[TG_SCAN] = "MPI_Scan",
	[TG_EXSCAN] = "MPI_Exscan",
	[TG_ALLTOALLW] = "MPI_Alltoallw",
	[TG_NEIGHBOR_ALLTOALLW] = "MPI_Neighbor_alltoallw",
	[TG_IALLREDUCE] = "MPI_Iallreduce",
	[TG_IREDUCE] = "MPI_Ireduce",
	[TG_IBCAST] = "MPI_Ibcast",
	[TG_IBARRIER] = "MPI_Ibarrier",
	[TG_IALLGATHER] = "MPI_Iallgather",
	[TG_IALLTOALL] = "MPI_Ialltoall",
	[TG_IALLTOALLV] = "MPI_Ialltoallv",
	[TG_IALLGATHERV] = "MPI_Iallgatherv",
	[TG_IGATHERV] = "MPI_Igatherv",
	[TG_ISCATTERV] = "MPI_Iscatterv",
	[TG_IREDUCE_SCATTER_BLOCK] = "MPI_Ireduce_scatter_block",
	[TG_IGATHER] = "MPI_Igather",
	[TG_ISCATTER] = "MPI_Iscatter",
	[TG_IREDUCE_SCATTER] = "MPI_Ireduce_scatter",
	[TG_INEIGHBOR_ALLGATHER] = "MPI_Ineighbor_allgather",
	[TG_INEIGHBOR_ALLTOALL] = "MPI_Ineighbor_alltoall",
	[TG_INEIGHBOR_ALLGATHERV] = "MPI_Ineighbor_allgatherv",
	[TG_INEIGHBOR_ALLTOALLV] = "MPI_Ineighbor_alltoallv",
	[TG_ISCAN] = "MPI_Iscan",
	[TG_IEXSCAN] = "MPI_Iexscan",
	[TG_IALLTOALLW] = "MPI_Ialltoallw",
	[TG_INEIGHBOR_ALLTOALLW] = "MPI_Ineighbor_alltoallw",
};

static const char *const tg_why_names[TG_NWHY] = {
	[TG_WHY_POLICY] = "policy", [TG_WHY_TYPE] = "type",
	[TG_WHY_COMM] = "comm",	    [TG_WHY_ARGS] = "args",
	[TG_WHY_POST] = "refused",  [TG_WHY_OFF] = "off",
};

enum tg_mode { TG_AUTO, TG_ON, TG_OFF };

/*
 * Cutoffs for blocking calls: bytes of one member's share at or above
 * which the offload goes first (SIZE_MAX: never), per MPI, for hosts
 * whose ranks have a core each and for hosts with more ranks than cores
 * (oversubscribed: then every rank's wait competes with the engines).
 * Measured on the 2-core development host with tests/mpi/bench-glue.sh
 * (OSU's method, back to back; 2 ranks, and 4 ranks oversubscribed):
 *
 * - Open MPI 4.1 (ob1/vader), 2 ranks: its own algorithms won at every
 *   size (tnbc's post costs 2-3 us, vader's small collectives 0.1-1 us).
 *   4 ranks: the offload won allgather and alltoall from 128 KiB (0.61
 *   and 0.74 of the time).
 * - MPICH 4.0 (ch4:ucx), 2 ranks: the offload won allreduce from 32 KiB
 *   (0.61-0.83) and reduce from 128 KiB (0.29-0.98).  4 ranks: MPICH's
 *   own wait loops never yield, and its collectives took 0.1 to 24 ms
 *   per call; the offload 2 to 870 us: it wins at every size.
 *
 *
 * Then checked against OSU itself (tests/mpi/bench-apps.sh, whose
 * blocking benchmarks reduce MPI_CHAR): MPICH's allreduce offloaded from
 * 32 KiB was 1.13-1.28 times its own there (bytes fold slower than
 * floats), so it is no longer offloaded; MPICH's own bcast at 4 ranks
 * took 1 us up to 64 B against the offload's 2 (and 4-8 us from 128 B);
 * Open MPI's alltoall at 4 ranks lost at 128 and 256 KiB (1.19, 1.09)
 * and won at 512 KiB (0.85).
 *
 * Allgatherv (every member's count the same, as OSU's; bench_glue,
 * medians of four alternating rounds): Open MPI at 2 ranks won up to 2
 * KiB (the offload 2.7 to 5.8 times slower) and at 128 KiB (1.12), lost
 * at 8 and 32 KiB (0.69, 0.86): never; at 4 ranks the offload won from
 * 2 KiB (0.84 down to 0.25).  MPICH at 2 ranks: the offload from 32 KiB
 * (0.63, 0.46); at 4 ranks MPICH's own took 4.6 to 93 ms, the offload
 * 14 to 120 us.  Gatherv and scatterv are decided by the group alone
 * (a member does not know the others' counts): never where nothing
 * was measured, every call where MPICH's ranks outnumber the cores.
 *
 * Reduce_scatter (floats, OSU's blocks; bench-glue.sh ONLY=reduce_scatter
 * ROUNDS=4): the offload won from 8 KiB of the whole vector under both
 * MPIs, Open MPI's 0.79 to 0.33 at 2 ranks and 0.88 to 0.26 at 4, MPICH's
 * 0.78 to 0.50 at 2; at 512 KiB it tied or lost (1.01, 1.21, 1.17), and
 * below 8 KiB the MPIs' own won where ranks had a core each (the offload
 * 1.5 to 6.9 times slower under Open MPI).  Its share is the whole
 * vector's bytes, which every member knows.
 *
 * Neighbor_alltoall on a ring (bench-glue.sh ONLY=neighbor_alltoall
 * ROUNDS=4): the offload won between 8 and 32 KiB per neighbour only
 * (0.56 to 0.91), lost at 128 KiB (1.09 to 1.26) and below 8 KiB (1.9 to
 * 4.6 under Open MPI): never, but where MPICH is oversubscribed.
 *
 * Scan and exscan (floats summed; bench-glue.sh ONLY=scan and ONLY=exscan
 * ROUNDS=4): MPICH's own at 2 ranks took 164 and 977 us at 128 and 512
 * KiB, the offload 23 and 82 (0.14, 0.08; exscan 0.27, 0.08), and lost
 * below (1.09 to 2.1).  Open MPI's own won or tied at every size, at 2
 * ranks (0.92 and 1.03 from 128 KiB, 2.8 to 39 below) and at 4 (1.8 to
 * 28): never.
 *
 * Allreduce again, stop 66, once the provider's folds were vectorized
 * (its byte folds had been scalar, 2 times slower at 512 KiB):
 * bench-glue.sh ONLY=allreduce ROUNDS=5, floats and bytes (DTYPE=char),
 * 2 ranks, every call offloaded over the MPI's own, medians: from 32
 * KiB the offload won under both MPIs, Open MPI's 0.42 to 0.96 with
 * bytes and 0.45 to 1.01 with floats, MPICH's 0.36 to 0.54 and 0.43 to
 * 1.01; below, it lost (1.5 to 13 times slower).  Oversubscribed Open
 * MPI at 4 ranks (3 rounds) won from 8 KiB but for 1.03 and 1.26 at 512
 * KiB: unchanged there.
 *
 * tnbc-mpi(7), "Policy", has the tables.
 */
static const struct tg_cut_row {
	const char *mpi;
	bool oversub;
	int fn; /* an enum tg_fn, or -1: every blocking function */
	size_t cut;
} tg_cuts[] = {
	{"openmpi", false, TG_ALLREDUCE, 32768},
	{"openmpi", true, TG_ALLGATHER, 131072},
	{"openmpi", true, TG_ALLTOALL, 524288},
	{"openmpi", true, TG_ALLGATHERV, 2048},
	{"openmpi", false, TG_REDUCE_SCATTER, 8192},
	{"openmpi", true, TG_REDUCE_SCATTER, 8192},
	{"mpich", false, TG_ALLREDUCE, 32768},
	{"mpich", false, TG_REDUCE, 131072},
	{"mpich", false, TG_ALLGATHERV, 32768},
	{"mpich", false, TG_REDUCE_SCATTER, 8192},
	{"mpich", false, TG_SCAN, 131072},
	{"mpich", false, TG_EXSCAN, 131072},
	{"mpich", true, -1, 0},
	/* a later row for the same function overrides an earlier one */
	{"mpich", true, TG_BCAST, 128},
};

static size_t tg_cut[TG_NFN];

/* T-NBC's cutoff, the largest message of a call: seed 000 found it not
 * worth its cost below 256 B and clearly worth it above 4 KiB, where a
 * message fills a page of its own that can be guarded. */
#define TG_TNBC_MIN 4096u

/* A broadcast's piece: large enough that its per-piece cost (a counter,
 * three deferred steps) stays small against the copy, small enough that
 * a 1 MiB broadcast is 16 pieces a reader can start on one by one. */
#define TG_TNBC_PIECE 65536u

/* The periods of each way a call site tries before T-NBC is kept or
 * left there (tg_adapt.h): more than one, so that a single scheduler's
 * slice (2 to 4 ms on 2 cores) does not decide alone; few, so that a
 * loop of a dozen calls still runs half of them on the verdict (the
 * seventh call on, after a warm-up of each way). */
#define TG_TNBC_TRIALS	   2u
#define TG_TNBC_TRIALS_MAX 1000u

/* The blocking functions T-NBC takes. */
static bool tg_tnbc_takes(int fn)
{
	return fn == TG_ALLTOALL || fn == TG_ALLTOALLV || fn == TG_BCAST;
}

static struct {
	bool init;
	bool off;
	bool report;
	enum tg_mode mode[TG_NFN];
	bool tnbc[TG_NFN];
	size_t tnbc_min, tnbc_piece;
	unsigned tnbc_trials;
	_Atomic uint64_t count[TG_NFN][TG_NCOUNT];
} tgp;

const char *tg_fn_name(enum tg_fn fn)
{
	return (unsigned)fn < TG_NFN ? tg_names[fn] : "?";
}

/* Every function never, then the rows measured for this MPI and host. */
static void tg_policy_defaults(const char *mpi, bool oversub)
{
	for (int f = 0; f < TG_NFN; f++)
		tg_cut[f] = SIZE_MAX;
	for (size_t i = 0; i < sizeof(tg_cuts) / sizeof(tg_cuts[0]); i++) {
		const struct tg_cut_row *row = &tg_cuts[i];

		if (strcmp(row->mpi, mpi) || row->oversub != oversub)
			continue;
		for (int f = 0; f < TG_IALLREDUCE; f++)
			if (row->fn < 0 || row->fn == f)
				tg_cut[f] = row->cut;
	}
}

/* TNBC_MPI_TNBC: "all", or names with or without "MPI_", any case,
 * separated by commas; a name T-NBC does not take is said once. */
static void tg_tnbc_parse(const char *v)
{
	char *copy, *tok, *save = NULL;

	if (!v || !*v)
		return;
	copy = strdup(v);
	if (!copy)
		return;
	for (tok = strtok_r(copy, ", ", &save); tok;
	     tok = strtok_r(NULL, ", ", &save)) {
		bool known = false;

		if (!strcasecmp(tok, "all")) {
			for (int f = 0; f < TG_NFN; f++)
				tgp.tnbc[f] = tg_tnbc_takes(f);
			continue;
		}
		for (int f = 0; f < TG_NFN; f++) {
			const char *n = tg_names[f];

			if (strcasecmp(tok, n) && strcasecmp(tok, n + 4))
				continue;
			known = tg_tnbc_takes(f);
			tgp.tnbc[f] = known;
		}
		if (!known)
			fprintf(stderr,
				"tnbc-mpi: TNBC_MPI_TNBC: %s is not a function "
				"T-NBC takes (MPI_Alltoall, MPI_Alltoallv, "
				"MPI_Bcast)\n",
				tok);
	}
	free(copy);
}

void tg_policy_init(const char *mpi, bool oversub)
{
	const char *v;
	enum tg_mode all = TG_AUTO;

	if (tgp.init)
		return;
	tgp.init = true;
	tg_policy_defaults(mpi, oversub);
	v = getenv("TNBC_MPI");
	tgp.off = v && !strcmp(v, "0");
	v = getenv("TNBC_MPI_REPORT");
	tgp.report = v && *v && strcmp(v, "0");
	v = getenv("TNBC_MPI_OFFLOAD");
	if (v && !strcmp(v, "all"))
		all = TG_ON;
	else if (v && !strcmp(v, "none"))
		all = TG_OFF;
	tg_tnbc_parse(getenv("TNBC_MPI_TNBC"));
	v = getenv("TNBC_MPI_TNBC_MIN");
	tgp.tnbc_min = v && *v ? (size_t)strtoull(v, NULL, 0) : TG_TNBC_MIN;
	v = getenv("TNBC_MPI_TNBC_PIECE");
	tgp.tnbc_piece = v && *v ? (size_t)strtoull(v, NULL, 0) : 0;
	if (!tgp.tnbc_piece)
		tgp.tnbc_piece = TG_TNBC_PIECE;
	v = getenv("TNBC_MPI_TNBC_ADAPT");
	tgp.tnbc_trials = TG_TNBC_TRIALS;
	if (v && *v) {
		char *end;
		unsigned long t = strtoul(v, &end, 10);

		if (*end || *v == '-' || t > TG_TNBC_TRIALS_MAX)
			fprintf(stderr,
				"tnbc-mpi: TNBC_MPI_TNBC_ADAPT: '%s' is not a "
				"count of trials from 0 to %u; %u it is\n",
				v, TG_TNBC_TRIALS_MAX, TG_TNBC_TRIALS);
		else
			tgp.tnbc_trials = (unsigned)t;
	}
	for (int f = 0; f < TG_NFN; f++) {
		char var[64], *p;

		snprintf(var, sizeof(var), "TNBC_%s", tg_names[f]);
		for (p = var; *p; p++)
			*p = (char)toupper((unsigned char)*p);
		tgp.mode[f] = f >= TG_IALLREDUCE ? TG_ON : all;
		v = getenv(var);
		if (v && !strcmp(v, "on"))
			tgp.mode[f] = TG_ON;
		else if (v && !strcmp(v, "off"))
			tgp.mode[f] = TG_OFF;
		else if (v && !strcmp(v, "auto"))
			tgp.mode[f] = f >= TG_IALLREDUCE ? TG_ON : TG_AUTO;
		strcat(var, "_MIN");
		v = getenv(var);
		if (v && *v)
			tg_cut[f] = (size_t)strtoull(v, NULL, 0);
	}
}

int tg_policy_may(enum tg_fn fn)
{
	if (tgp.off || !tg.ready)
		return TG_WHY_OFF;
	if (tgp.tnbc[fn])
		return -1;
	if (tgp.mode[fn] == TG_OFF ||
	    (tgp.mode[fn] == TG_AUTO && tg_cut[fn] == SIZE_MAX))
		return TG_WHY_POLICY;
	return -1;
}

bool tg_policy_offload(enum tg_fn fn, size_t bytes, int size)
{
	(void)size; /* measured apart only by oversubscription so far */
	if (tgp.off || !tg.ready)
		return false;
	switch (tgp.mode[fn]) {
	case TG_ON:
		return true;
	case TG_OFF:
		return false;
	default:
		return bytes >= tg_cut[fn];
	}
}

bool tg_policy_below(enum tg_fn fn, size_t bytes)
{
	return !tgp.off && tg.ready && tgp.mode[fn] == TG_AUTO &&
	       !tgp.tnbc[fn] && bytes < tg_cut[fn];
}

bool tg_policy_tnbc(enum tg_fn fn, size_t bytes)
{
	return !tgp.off && tg.ready && (unsigned)fn < TG_NFN && tgp.tnbc[fn] &&
	       bytes >= tgp.tnbc_min;
}

size_t tg_policy_tnbc_piece(void)
{
	return tgp.tnbc_piece;
}

unsigned tg_policy_tnbc_trials(void)
{
	return tgp.tnbc_trials;
}

void tg_time(enum tg_fn fn, uint64_t ns)
{
	atomic_fetch_add_explicit(&tgp.count[fn][2 + TG_NWHY], ns,
				  memory_order_relaxed);
}

/* Counted only for the report: otherwise an atomic add on a line every
 * thread's collectives share would be the whole cost of a fallback
 * beyond the MPI's own call. */
void tg_count_early(enum tg_fn fn)
{
	if (!tgp.report)
		return;
	atomic_fetch_add_explicit(&tgp.count[fn][1 + TG_NWHY], 1,
				  memory_order_relaxed);
}

void tg_count_plain(enum tg_fn fn)
{
	if (!tgp.report)
		return;
	atomic_fetch_add_explicit(&tgp.count[fn][4 + TG_NWHY], 1,
				  memory_order_relaxed);
}

bool tg_report_wanted(void)
{
	return tgp.report;
}

void tg_report_set(bool on)
{
	tgp.report = on;
}

/* FNV-1a of each TNBC_MPI_* entry, summed: the same whatever the order
 * of the environment. */
uint32_t tg_policy_env_hash(void)
{
	extern char **environ;
	uint32_t sum = 0;

	for (char **e = environ; e && *e; e++) {
		uint32_t h = 2166136261u;

		if (strncmp(*e, "TNBC_MPI", 8) ||
		    !strncmp(*e, "TNBC_MPI_LIBDIR=", 16) ||
		    !strncmp(*e, "TNBC_MPI_REPORT=", 16))
			continue;
		for (const char *c = *e; *c; c++)
			h = (h ^ (unsigned char)*c) * 16777619u;
		sum += h;
	}
	return sum;
}

void tg_count(enum tg_fn fn, bool offloaded, enum tg_why why)
{
	if (!tgp.report)
		return;
	atomic_fetch_add_explicit(&tgp.count[fn][offloaded ? 0 : 1 + why], 1,
				  memory_order_relaxed);
}

void tg_counts(uint64_t *out)
{
	for (int f = 0; f < TG_NFN; f++)
		for (int w = 0; w < TG_NCOUNT; w++)
			out[f * TG_NCOUNT + w] = atomic_load(&tgp.count[f][w]);
	out[TG_ALLTOALL * TG_NCOUNT + 3 + TG_NWHY] = tg_tnbc_wait_ns();
}

void tg_report_print(const uint64_t *sums)
{
	for (int f = 0; f < TG_NFN; f++) {
		const uint64_t *s = sums + f * TG_NCOUNT;
		uint64_t fb = 0;
		char why[256] = "", early[128] = "";
		size_t o = 0;

		for (int w = 0; w < TG_NWHY; w++)
			fb += s[1 + w];
		if (!s[0] && !fb)
			continue;
		for (int w = 0; w < TG_NWHY && fb; w++)
			if (s[1 + w])
				o += (size_t)snprintf(
					why + o, sizeof(why) - o, "%s%s %llu",
					o ? ", " : " (", tg_why_names[w],
					(unsigned long long)s[1 + w]);
		if (o)
			snprintf(why + o, sizeof(why) - o, ")");
		if (tgp.tnbc[f])
			snprintf(early, sizeof(early), " early %llu plain %llu",
				 (unsigned long long)s[1 + TG_NWHY],
				 (unsigned long long)s[4 + TG_NWHY]);
		if (s[2 + TG_NWHY])
			snprintf(early + strlen(early),
				 sizeof(early) - strlen(early), " call_ms %.1f",
				 (double)s[2 + TG_NWHY] / 1e6);
		if (f == TG_ALLTOALL && s[3 + TG_NWHY])
			snprintf(early + strlen(early),
				 sizeof(early) - strlen(early),
				 " tnbc_wait_ms %.1f",
				 (double)s[3 + TG_NWHY] / 1e6);
		fprintf(stderr,
			"tnbc-mpi: %s offloaded %llu fallback %llu%s%s\n",
			tg_names[f], (unsigned long long)s[0],
			(unsigned long long)fb, early, why);
	}
	fflush(stderr);
}
