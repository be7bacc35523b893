/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_osc: MPI one-sided communication (RMA) with checked results.
 *
 * Windows of three flavors (MPI_Win_allocate, MPI_Win_create and
 * MPI_Win_create_dynamic + MPI_Win_attach), each driven through seven
 * kinds of epoch: MPI_Win_lock exclusive and shared, MPI_Win_lock_all
 * with MPI_Win_flush, MPI_Win_flush_all or MPI_Win_flush_local(_all),
 * MPI_Win_fence and post/start/complete/wait.  In every epoch:
 *
 * - MPI_Put / MPI_Get of 8 B, 65537 B (odd offsets, neighbouring bytes
 *   checked) and 1 MiB (far above any eager limit) to and from the right
 *   neighbour;
 * - MPI_Accumulate from every rank to every rank (itself included):
 *   MPI_SUM on int (4 and 300 elements) and double, MPI_MAX on int,
 *   MPI_REPLACE on long (private and contended locations), MPI_BOR on
 *   unsigned long;
 * - MPI_Fetch_and_op on long: MPI_SUM (the fetched values of all origins
 *   must form one chain of increments), MPI_NO_OP and MPI_REPLACE, in
 *   program order on one location;
 * - MPI_Compare_and_swap on int and long, failing and succeeding;
 * - concurrency: every rank MPI_Accumulate's and MPI_Fetch_and_op's SUM
 *   into the same locations on rank 0 many times; the totals are checked
 *   exactly and the fetched values must again form one chain.
 *
 * Passive target only: a lock built from MPI_Compare_and_swap on rank 0
 * that protects a get/increment/put counter, and lock-free CAS counters
 * (int and long) whose successful CASes must have seen every value once,
 * all contended by all ranks.
 * Finally MPI_Rput/MPI_Rget/MPI_Get_accumulate on a window with
 * disp_unit = sizeof(long).
 *
 * Values are integers (or exact binary fractions in doubles), so every
 * result is exact.  Origins check fetched data as soon as the epoch (or
 * MPI_Win_flush_local) completes them, then scribble over their buffers;
 * targets check their window memory after a barrier, under
 * MPI_Win_lock(MPI_LOCK_EXCLUSIVE, self).
 *
 * Environment (optional, set by run-mpi-tests.sh in its *-osc modes):
 *   MPITEST_OSC_BTLS  comma separated BTL components (e.g. "ofi,self")
 *                     that must be exactly the mca_btl_* objects loaded
 *                     after MPI_Init and after each window creation;
 *   MPITEST_OSC_OSCS  the same for the osc components (e.g. "rdma").
 * The program works around two Open MPI bugs (see alloc_cas_long_broken
 * and btl_bitops_broken below) and says so on its PASS line.
 *
 * Open MPI unloads components that were not selected, so with
 * MPITEST_OSC_BTLS=ofi,self and MPITEST_OSC_OSCS=rdma the windows can
 * only have been created by osc/rdma, and osc/rdma can only have chosen
 * btl/ofi (btl/self has no atomics and reaches only its own process).
 */
#define _GNU_SOURCE
#include "mpitest.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG	    (1u << 20) /* large put/get */
#define SMALL	    8
#define MID	    65537 /* odd size, at odd offsets */
#define MID_PAD	    16
#define ACC_N	    4 /* elements of the small accumulates */
#define ACC_V	    300 /* elements of the large accumulate (get-op-put) */
#define CONC_EPOCHS 6
#define CONC_BATCH  32
#define CONC_ITERS  (CONC_EPOCHS * CONC_BATCH) /* per rank and op */
#define LOCK_ITERS  16
#define CAS_ITERS   16
#define SCRIBBLE    0xEE

enum flavor { FL_ALLOCATE, FL_CREATE, FL_DYNAMIC, NFLAVORS };
static const char *const flavor_name[NFLAVORS] = {"win_allocate", "win_create",
						  "win_dynamic"};

enum sync {
	SY_LOCK_EXCL,
	SY_LOCK_SHARED,
	SY_LOCK_ALL_FLUSH,
	SY_LOCK_ALL_FLUSH_ALL,
	SY_LOCK_ALL_FLUSH_LOCAL,
	SY_FENCE,
	SY_PSCW,
	NSYNCS
};
static const char *const sync_name[NSYNCS] = {
	"lock(exclusive)",	   "lock(shared)",	   "lock_all+flush",
	"lock_all+flush_all",	   "lock_all+flush_local", "fence",
	"post/start/complete/wait"};

struct win {
	MPI_Win win;
	enum flavor flavor;
	uint8_t *base; /* local window memory */
	MPI_Aint *tbase; /* per target: displacement of its window start */
	const char *label;
};

/* Window layout (byte offsets, disp_unit 1), set by layout_init(). */
static size_t off_bigput, off_bigget, off_small, off_smallget, off_mid;
static size_t off_midget;
static size_t off_acc_int, off_acc_vec, off_acc_dbl, off_acc_max;
static size_t off_acc_repl, off_acc_bor, off_acc_hot;
static size_t off_fop_sum, off_fop_slot, off_cas_int, off_cas_long;
static size_t off_conc, off_lock, off_counter, off_cas_ctr;
static size_t win_size, layout_next;

/* conc[] slots on rank 0 */
enum { C_ACC_LONG, C_ACC_INT, C_FOP, C_MIX, C_NSLOTS };

static int me, np, left, right;
static int *all_ranks;
static unsigned int round_id; /* changes every epoch test: no stale data */
static int checks; /* epoch tests run (for the PASS line) */

/*
 * Open MPI before 4.1.5: osc/rdma does an 8-byte MPI_Compare_and_swap on
 * memory it otherwise accesses directly (the own process; all ranks of a
 * MPI_Win_allocate window on one node) with a BTL atomic, at the address
 * as mapped in the origin and without a registration handle: it crashes
 * (segfault, with vader as well as with ofi).  Fixed by
 * open-mpi/ompi#10513 ("RDMA osc: perform CAS in shared memory if
 * possible").  Such CASes are skipped there.
 */
static int alloc_cas_long_broken;

/*
 * Open MPI 4.x btl/ofi implements only the ADD and SWAP network atomics,
 * but osc/rdma hands it MPI_MAX, MPI_BOR, ... as well (it checks no
 * btl_atomic_flags): "Unknown or unsupported atomic op", "BTL OFI will
 * now abort".  So where btl/ofi is loaded and osc_rdma_acc_use_amo is
 * true (the default), MPI_MAX and MPI_BOR only go to peers whose memory
 * osc/rdma accesses directly (own process; win_allocate on one node).
 * With --mca osc_rdma_acc_use_amo 0 osc/rdma emulates every accumulate
 * with compare-and-swap and all of them are tested (run-mpi-tests.sh
 * runs mpi_osc both ways in its OFI modes).
 */
static int btl_bitops_broken, single_node, acc_use_amo = -1;

#define AT(w, off, type) ((type *)((w)->base + (off)))

/* Are MPI_MAX / MPI_BOR from o to t skipped (see btl_bitops_broken)? */
static int bitops_skipped(const struct win *w, int o, int t)
{
	return btl_bitops_broken && acc_use_amo != 0 && o != t &&
	       !(w->flavor == FL_ALLOCATE && single_node);
}

/* Is a MPI_LONG CAS from o to t skipped (see alloc_cas_long_broken)? */
static int cas_long_skipped(const struct win *w, int o, int t)
{
	return alloc_cas_long_broken && (w->flavor == FL_ALLOCATE || o == t);
}

/* Read a boolean or integer MPI_T control variable; -1 if unknown. */
static int get_cvar(const char *name)
{
	MPI_T_cvar_handle h;
	unsigned long long buf = 0;
	int idx, count, rc;

	if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS ||
	    MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS)
		return -1;
	rc = MPI_T_cvar_read(h, &buf);
	MPI_T_cvar_handle_free(&h);
	return rc == MPI_SUCCESS ? buf != 0 : -1;
}

static void detect_mpi_bugs(void)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING];
	const char *p;
	int len, a, b, c;

	MT_MPI(MPI_Get_library_version(v, &len));
	p = strstr(v, "Open MPI v");
	if (!p || sscanf(p + 10, "%d.%d.%d", &a, &b, &c) != 3)
		return;
	alloc_cas_long_broken =
		a < 4 || (a == 4 && (b < 1 || (b == 1 && c < 5)));
	btl_bitops_broken = a < 5 && mt_find_loaded("mca_btl_ofi", NULL, 0);
}

static size_t lay(size_t len)
{
	size_t off = layout_next;

	layout_next += (len + 63) & ~(size_t)63;
	return off;
}

static void layout_init(void)
{
	size_t n = (size_t)np;

	off_bigput = lay(BIG);
	off_bigget = lay(BIG);
	off_small = lay(n * SMALL);
	off_smallget = lay(SMALL);
	off_mid = lay(MID + MID_PAD);
	off_midget = lay(MID + MID_PAD);
	off_acc_int = lay(ACC_N * sizeof(int));
	off_acc_vec = lay(ACC_V * sizeof(int));
	off_acc_dbl = lay(ACC_N * sizeof(double));
	off_acc_max = lay(ACC_N * sizeof(int));
	off_acc_repl = lay(n * 2 * sizeof(long));
	off_acc_bor = lay(ACC_N * sizeof(unsigned long));
	off_acc_hot = lay(sizeof(long));
	off_fop_sum = lay(sizeof(long));
	off_fop_slot = lay(n * sizeof(long));
	off_cas_int = lay(n * sizeof(int));
	off_cas_long = lay(n * sizeof(long));
	off_conc = lay(C_NSLOTS * sizeof(long));
	off_lock = lay(sizeof(long));
	off_counter = lay(sizeof(long));
	off_cas_ctr = lay(sizeof(long) + sizeof(int));
	win_size = layout_next;
}

static MPI_Aint disp(const struct win *w, int t, size_t off)
{
	return MPI_Aint_add(w->tbase[t], (MPI_Aint)off);
}

static uint32_t seed(int a, int b, int k)
{
	return (uint32_t)a * 7919u + (uint32_t)b * 104729u + (uint32_t)k * 31u +
	       round_id * 1009u + 17u;
}

/* ------------------------------------------------------------------ */
/* Component checks (MPITEST_OSC_BTLS / MPITEST_OSC_OSCS)             */

/* Is the comma separated list a the same set as b? */
static int same_set(const char *a, const char *b)
{
	char x[512], y[512], *tok, *save;
	int na = 0, nb = 0;

	snprintf(x, sizeof(x), "%s", a);
	for (tok = strtok_r(x, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char pat[128];
		size_t l;
		const char *p;

		na++;
		snprintf(pat, sizeof(pat), "%s", tok);
		l = strlen(pat);
		/* look for tok as a whole element of b */
		for (p = b; (p = strstr(p, pat)) != NULL; p += l) {
			if ((p == b || p[-1] == ',') &&
			    (p[l] == ',' || p[l] == '\0'))
				break;
		}
		if (!p)
			return 0;
	}
	snprintf(y, sizeof(y), "%s", b);
	for (tok = strtok_r(y, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		nb++;
	return na == nb;
}

static void check_components_one(const char *env, const char *prefix,
				 const char *when, char *out, size_t outlen)
{
	const char *want = getenv(env);
	char have[512], strip[512], *d;
	const char *s;
	size_t pl = strlen(prefix);

	mt_list_loaded(prefix, have, sizeof(have));
	/* "mca_btl_ofi,mca_btl_self" -> "ofi,self" */
	for (s = have, d = strip; *s;) {
		if (!strncmp(s, prefix, pl))
			s += pl;
		while (*s && *s != ',')
			*d++ = *s++;
		if (*s == ',')
			*d++ = *s++;
	}
	*d = '\0';
	if (out)
		snprintf(out, outlen, "%s", strip);
	if (!want || !*want)
		return;
	MT_CHECK(same_set(want, strip),
		 "%s: loaded %s components are '%s', expected exactly '%s' "
		 "(%s): the job is not running over the required components",
		 when, prefix, strip, want, env);
}

static char btl_list[512], osc_list[512];

static void check_components(const char *when)
{
	check_components_one("MPITEST_OSC_BTLS", "mca_btl_", when, btl_list,
			     sizeof(btl_list));
	check_components_one("MPITEST_OSC_OSCS", "mca_osc_", when, osc_list,
			     sizeof(osc_list));
}

/* ------------------------------------------------------------------ */
/* Windows                                                            */

static void win_open(struct win *w, enum flavor fl)
{
	MPI_Aint mybase = 0;
	void *attr;
	int flag;

	w->flavor = fl;
	w->label = flavor_name[fl];
	w->tbase = mt_malloc((size_t)np * sizeof(MPI_Aint));
	mt_phase("%s: create window of %zu B", w->label, win_size);
	switch (fl) {
	case FL_ALLOCATE:
		MT_MPI(MPI_Win_allocate((MPI_Aint)win_size, 1, MPI_INFO_NULL,
					MPI_COMM_WORLD, &w->base, &w->win));
		break;
	case FL_CREATE:
		w->base = mt_malloc(win_size);
		MT_MPI(MPI_Win_create(w->base, (MPI_Aint)win_size, 1,
				      MPI_INFO_NULL, MPI_COMM_WORLD, &w->win));
		break;
	case FL_DYNAMIC:
	default:
		w->base = mt_malloc(win_size);
		MT_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD,
					      &w->win));
		MT_MPI(MPI_Win_attach(w->win, w->base, (MPI_Aint)win_size));
		MT_MPI(MPI_Get_address(w->base, &mybase));
		break;
	}
	MT_MPI(MPI_Win_set_errhandler(w->win, MPI_ERRORS_RETURN));
	MT_MPI(MPI_Allgather(&mybase, 1, MPI_AINT, w->tbase, 1, MPI_AINT,
			     MPI_COMM_WORLD));

	MT_MPI(MPI_Win_get_attr(w->win, MPI_WIN_CREATE_FLAVOR, &attr, &flag));
	MT_CHECK(flag && *(int *)attr ==
				 (fl == FL_ALLOCATE ? MPI_WIN_FLAVOR_ALLOCATE
				  : fl == FL_CREATE ? MPI_WIN_FLAVOR_CREATE
						    : MPI_WIN_FLAVOR_DYNAMIC),
		 "%s: MPI_WIN_CREATE_FLAVOR attribute %d", w->label,
		 flag ? *(int *)attr : -1);
	if (fl != FL_DYNAMIC) {
		MT_MPI(MPI_Win_get_attr(w->win, MPI_WIN_SIZE, &attr, &flag));
		MT_CHECK(flag && *(MPI_Aint *)attr == (MPI_Aint)win_size,
			 "%s: MPI_WIN_SIZE attribute %ld, expected %zu",
			 w->label, flag ? (long)*(MPI_Aint *)attr : -1L,
			 win_size);
		MT_MPI(MPI_Win_get_attr(w->win, MPI_WIN_BASE, &attr, &flag));
		MT_CHECK(flag && attr == (void *)w->base,
			 "%s: MPI_WIN_BASE attribute %p, expected %p", w->label,
			 attr, (void *)w->base);
	}
	check_components(mt_fmt("after creating a %s window", w->label));
}

static void win_close(struct win *w)
{
	mt_phase("%s: free window", w->label);
	if (w->flavor == FL_DYNAMIC)
		MT_MPI(MPI_Win_detach(w->win, w->base));
	MT_MPI(MPI_Win_free(&w->win));
	if (w->flavor != FL_ALLOCATE)
		free(w->base);
	free(w->tbase);
}

/* Local access to the own window memory, as its own passive epoch. */
static void local_begin(struct win *w)
{
	MT_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, w->win));
}

static void local_end(struct win *w)
{
	MT_MPI(MPI_Win_unlock(me, w->win));
}

static MPI_Group make_group(const int *ranks, int n)
{
	MPI_Group world, g;

	MT_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
	MT_MPI(MPI_Group_incl(world, n, ranks, &g));
	MT_MPI(MPI_Group_free(&world));
	return g;
}

/*
 * One access epoch of kind s from this rank to targets[], while this
 * rank's window is exposed to origins[] (only used by PSCW).  issue()
 * starts the operations on one target; done() runs once they are
 * complete at the origin (fetched data is there, buffers are free).
 */
struct ops {
	void (*issue)(struct win *w, int t, void *arg);
	void (*done)(struct win *w, int t, void *arg);
	void *arg;
};

static void epoch(struct win *w, enum sync s, const int *targets, int nt,
		  const int *origins, int no, const struct ops *op)
{
	MPI_Group tg, og;
	int i;

	switch (s) {
	case SY_LOCK_EXCL:
	case SY_LOCK_SHARED:
		for (i = 0; i < nt; i++) {
			MT_MPI(MPI_Win_lock(s == SY_LOCK_EXCL
						    ? MPI_LOCK_EXCLUSIVE
						    : MPI_LOCK_SHARED,
					    targets[i], 0, w->win));
			op->issue(w, targets[i], op->arg);
			MT_MPI(MPI_Win_unlock(targets[i], w->win));
			if (op->done)
				op->done(w, targets[i], op->arg);
		}
		break;
	case SY_LOCK_ALL_FLUSH:
		MT_MPI(MPI_Win_lock_all(0, w->win));
		for (i = 0; i < nt; i++)
			op->issue(w, targets[i], op->arg);
		for (i = nt - 1; i >= 0; i--) {
			MT_MPI(MPI_Win_flush(targets[i], w->win));
			if (op->done)
				op->done(w, targets[i], op->arg);
		}
		MT_MPI(MPI_Win_unlock_all(w->win));
		break;
	case SY_LOCK_ALL_FLUSH_ALL:
		MT_MPI(MPI_Win_lock_all(0, w->win));
		for (i = 0; i < nt; i++)
			op->issue(w, targets[i], op->arg);
		MT_MPI(MPI_Win_flush_all(w->win));
		for (i = 0; i < nt; i++)
			if (op->done)
				op->done(w, targets[i], op->arg);
		MT_MPI(MPI_Win_unlock_all(w->win));
		break;
	case SY_LOCK_ALL_FLUSH_LOCAL:
		/* done() scribbles over the origin buffers before the
		 * operations are known to be complete at the target. */
		MT_MPI(MPI_Win_lock_all(0, w->win));
		for (i = 0; i < nt; i++) {
			op->issue(w, targets[i], op->arg);
			if (i % 2 == 0) {
				MT_MPI(MPI_Win_flush_local(targets[i], w->win));
				if (op->done)
					op->done(w, targets[i], op->arg);
			}
		}
		MT_MPI(MPI_Win_flush_local_all(w->win));
		for (i = 1; i < nt; i += 2)
			if (op->done)
				op->done(w, targets[i], op->arg);
		MT_MPI(MPI_Win_unlock_all(w->win));
		break;
	case SY_FENCE:
		MT_MPI(MPI_Win_fence(0, w->win));
		for (i = 0; i < nt; i++)
			op->issue(w, targets[i], op->arg);
		MT_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, w->win));
		for (i = 0; i < nt; i++)
			if (op->done)
				op->done(w, targets[i], op->arg);
		break;
	case SY_PSCW:
	default:
		if (no > 0) {
			og = make_group(origins, no);
			MT_MPI(MPI_Win_post(og, 0, w->win));
			MT_MPI(MPI_Group_free(&og));
		}
		if (nt > 0) {
			tg = make_group(targets, nt);
			MT_MPI(MPI_Win_start(tg, 0, w->win));
			MT_MPI(MPI_Group_free(&tg));
			for (i = 0; i < nt; i++)
				op->issue(w, targets[i], op->arg);
			MT_MPI(MPI_Win_complete(w->win));
			for (i = 0; i < nt; i++)
				if (op->done)
					op->done(w, targets[i], op->arg);
		}
		if (no > 0)
			MT_MPI(MPI_Win_wait(w->win));
		break;
	}
}

/* ------------------------------------------------------------------ */
/* Put / Get: 8 B and 1 MiB to and from the right neighbour           */

static uint8_t *big_src, *big_dst;
static uint8_t small_src[SMALL], small_dst[SMALL];
static uint8_t mid_src[MID + MID_PAD], mid_dst[MID + MID_PAD];

/* The bytes of buf outside [from, from + len) must all be SCRIBBLE. */
static void check_pad(const uint8_t *buf, size_t from, size_t len,
		      const char *what)
{
	size_t i;

	for (i = 0; i < MID + MID_PAD; i++)
		MT_CHECK((i >= from && i < from + len) || buf[i] == SCRIBBLE,
			 "%s: byte %zu outside the %zu B at offset %zu changed",
			 what, i, len, from);
}

static void pg_issue(struct win *w, int t, void *arg)
{
	(void)arg;
	mt_fill(small_src, SMALL, seed(me, t, 1));
	mt_fill(big_src, BIG, seed(me, t, 2));
	memset(small_dst, SCRIBBLE, SMALL);
	memset(big_dst, SCRIBBLE, BIG);
	mt_fill(mid_src + 1, MID, seed(me, t, 5));
	memset(mid_dst, SCRIBBLE, sizeof(mid_dst));
	MT_MPI(MPI_Put(mid_src + 1, MID, MPI_BYTE, t, disp(w, t, off_mid + 3),
		       MID, MPI_BYTE, w->win));
	MT_MPI(MPI_Get(mid_dst + 3, MID, MPI_BYTE, t,
		       disp(w, t, off_midget + 5), MID, MPI_BYTE, w->win));
	MT_MPI(MPI_Put(small_src, SMALL, MPI_BYTE, t,
		       disp(w, t, off_small + (size_t)me * SMALL), SMALL,
		       MPI_BYTE, w->win));
	MT_MPI(MPI_Put(big_src, BIG, MPI_BYTE, t, disp(w, t, off_bigput), BIG,
		       MPI_BYTE, w->win));
	MT_MPI(MPI_Get(small_dst, SMALL, MPI_BYTE, t, disp(w, t, off_smallget),
		       SMALL, MPI_BYTE, w->win));
	MT_MPI(MPI_Get(big_dst, BIG, MPI_BYTE, t, disp(w, t, off_bigget), BIG,
		       MPI_BYTE, w->win));
}

static void pg_done(struct win *w, int t, void *arg)
{
	const char *what = arg;

	MT_VERIFY(small_dst, SMALL, seed(t, t, 3),
		  "%s %s: MPI_Get of %d B from %d", w->label, what, SMALL, t);
	MT_VERIFY(big_dst, BIG, seed(t, t, 4), "%s %s: MPI_Get of %u B from %d",
		  w->label, what, BIG, t);
	MT_VERIFY(mid_dst + 3, MID, seed(t, t, 6),
		  "%s %s: MPI_Get of %d B from %d (offset 5)", w->label, what,
		  MID, t);
	check_pad(mid_dst, 3, MID,
		  mt_fmt("%s %s: MPI_Get of %d B", w->label, what, MID));
	/* The origin buffers are ours again. */
	memset(mid_src, SCRIBBLE, sizeof(mid_src));
	memset(small_src, SCRIBBLE, SMALL);
	memset(big_src, SCRIBBLE, BIG);
}

static void test_put_get(struct win *w, enum sync s)
{
	const char *what = sync_name[s];
	struct ops op = {pg_issue, pg_done, (void *)what};
	uint8_t *p;
	int i;

	mt_phase("%s %s: put/get setup", w->label, what);
	local_begin(w);
	memset(w->base + off_bigput, SCRIBBLE, BIG);
	memset(w->base + off_small, SCRIBBLE, (size_t)np * SMALL);
	mt_fill(w->base + off_bigget, BIG, seed(me, me, 4));
	mt_fill(w->base + off_smallget, SMALL, seed(me, me, 3));
	memset(w->base + off_mid, SCRIBBLE, MID + MID_PAD);
	mt_fill(w->base + off_midget + 5, MID, seed(me, me, 6));
	local_end(w);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	mt_phase("%s %s: put/get %d, %d and %u B to/from %d", w->label, what,
		 SMALL, MID, BIG, right);
	epoch(w, s, &right, 1, &left, 1, &op);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	mt_phase("%s %s: put/get check at target", w->label, what);
	local_begin(w);
	MT_VERIFY(w->base + off_bigput, BIG, seed(left, me, 2),
		  "%s %s: %u B MPI_Put from %d", w->label, what, BIG, left);
	for (i = 0; i < np; i++) {
		p = w->base + off_small + (size_t)i * SMALL;
		if (i == left) {
			MT_VERIFY(p, SMALL, seed(left, me, 1),
				  "%s %s: %d B MPI_Put from %d", w->label, what,
				  SMALL, left);
			continue;
		}
		for (int k = 0; k < SMALL; k++)
			MT_CHECK(p[k] == SCRIBBLE,
				 "%s %s: slot of rank %d (which sent nothing) "
				 "changed",
				 w->label, what, i);
	}
	MT_VERIFY(w->base + off_mid + 3, MID, seed(left, me, 5),
		  "%s %s: %d B MPI_Put from %d (offset 3)", w->label, what, MID,
		  left);
	check_pad(w->base + off_mid, 3, MID,
		  mt_fmt("%s %s: %d B MPI_Put from %d", w->label, what, MID,
			 left));
	/* Gets must not have changed their source. */
	MT_VERIFY(w->base + off_bigget, BIG, seed(me, me, 4),
		  "%s %s: source of a %u B MPI_Get changed", w->label, what,
		  BIG);
	local_end(w);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* ------------------------------------------------------------------ */
/* Accumulate from every rank to every rank                           */

static int acc_int_init(int t, int i)
{
	return t * 1000 + i;
}
static int acc_int_val(int o, int t, int i)
{
	return o * 7 + t + i + 1;
}
static int acc_vec_val(int o, int t, int i)
{
	return (o + 1) * (i % 13) - t;
}
static double acc_dbl_init(int t, int i)
{
	return t + 0.5 * i;
}
static double acc_dbl_val(int o, int t, int i)
{
	return (o + 1) * 0.25 + i * (t + 1) + 0.125;
}
static int acc_max_init(int i)
{
	return 60 + i;
}
static int acc_max_val(int o, int t, int i)
{
	return (o * 31 + t * 17 + i * 5 + (int)round_id) % 97;
}
static long acc_repl_val(int o, int t, int k)
{
	long v = ((long)(o + 1) << 32) | ((long)t << 8) | (round_id & 0xff);

	return k ? ~v : v;
}
static unsigned long acc_bor_val(int o, int t, int i)
{
	return 1UL << ((o * 3 + i + t) % 63);
}
static long acc_hot_val(int o, int t)
{
	return 5000 + o * 10 + t;
}

struct acc_bufs {
	int ival[ACC_N], vval[ACC_V], mval[ACC_N];
	double dval[ACC_N];
	long rval[2], hval;
	unsigned long bval[ACC_N];
};
static struct acc_bufs *accb; /* one per target */

static void acc_issue(struct win *w, int t, void *arg)
{
	struct acc_bufs *b = &accb[t];
	int i;

	(void)arg;
	for (i = 0; i < ACC_N; i++) {
		b->ival[i] = acc_int_val(me, t, i);
		b->dval[i] = acc_dbl_val(me, t, i);
		b->mval[i] = acc_max_val(me, t, i);
		b->bval[i] = acc_bor_val(me, t, i);
	}
	for (i = 0; i < ACC_V; i++)
		b->vval[i] = acc_vec_val(me, t, i);
	b->rval[0] = acc_repl_val(me, t, 0);
	b->rval[1] = acc_repl_val(me, t, 1);
	b->hval = acc_hot_val(me, t);

	MT_MPI(MPI_Accumulate(b->ival, ACC_N, MPI_INT, t,
			      disp(w, t, off_acc_int), ACC_N, MPI_INT, MPI_SUM,
			      w->win));
	MT_MPI(MPI_Accumulate(b->vval, ACC_V, MPI_INT, t,
			      disp(w, t, off_acc_vec), ACC_V, MPI_INT, MPI_SUM,
			      w->win));
	MT_MPI(MPI_Accumulate(b->dval, ACC_N, MPI_DOUBLE, t,
			      disp(w, t, off_acc_dbl), ACC_N, MPI_DOUBLE,
			      MPI_SUM, w->win));
	if (!bitops_skipped(w, me, t))
		MT_MPI(MPI_Accumulate(b->mval, ACC_N, MPI_INT, t,
				      disp(w, t, off_acc_max), ACC_N, MPI_INT,
				      MPI_MAX, w->win));
	MT_MPI(MPI_Accumulate(
		b->rval, 2, MPI_LONG, t,
		disp(w, t, off_acc_repl + (size_t)me * 2 * sizeof(long)), 2,
		MPI_LONG, MPI_REPLACE, w->win));
	if (!bitops_skipped(w, me, t))
		MT_MPI(MPI_Accumulate(b->bval, ACC_N, MPI_UNSIGNED_LONG, t,
				      disp(w, t, off_acc_bor), ACC_N,
				      MPI_UNSIGNED_LONG, MPI_BOR, w->win));
	MT_MPI(MPI_Accumulate(&b->hval, 1, MPI_LONG, t, disp(w, t, off_acc_hot),
			      1, MPI_LONG, MPI_REPLACE, w->win));
}

static void acc_done(struct win *w, int t, void *arg)
{
	(void)w;
	(void)arg;
	/* Origin buffers may be reused now: scribble over them. */
	memset(&accb[t], SCRIBBLE, sizeof(accb[t]));
}

static void test_accumulate(struct win *w, enum sync s)
{
	const char *what = sync_name[s];
	struct ops op = {acc_issue, acc_done, NULL};
	int i, o, ie;
	double de;
	unsigned long be;
	long h;

	mt_phase("%s %s: accumulate setup", w->label, what);
	local_begin(w);
	for (i = 0; i < ACC_N; i++) {
		AT(w, off_acc_int, int)[i] = acc_int_init(me, i);
		AT(w, off_acc_dbl, double)[i] = acc_dbl_init(me, i);
		AT(w, off_acc_max, int)[i] = acc_max_init(i);
		AT(w, off_acc_bor, unsigned long)[i] = 1UL << 63;
	}
	for (i = 0; i < ACC_V; i++)
		AT(w, off_acc_vec, int)[i] = i;
	for (i = 0; i < 2 * np; i++)
		AT(w, off_acc_repl, long)[i] = -1;
	*AT(w, off_acc_hot, long) = -1;
	local_end(w);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	mt_phase("%s %s: accumulate to all ranks", w->label, what);
	epoch(w, s, all_ranks, np, all_ranks, np, &op);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	mt_phase("%s %s: accumulate check at target", w->label, what);
	local_begin(w);
	for (i = 0; i < ACC_N; i++) {
		ie = acc_int_init(me, i);
		de = acc_dbl_init(me, i);
		be = 1UL << 63;
		for (o = 0; o < np; o++) {
			ie += acc_int_val(o, me, i);
			de += acc_dbl_val(o, me, i);
			if (!bitops_skipped(w, o, me))
				be |= acc_bor_val(o, me, i);
		}
		MT_CHECK(AT(w, off_acc_int, int)[i] == ie,
			 "%s %s: MPI_SUM int element %d is %d, expected %d",
			 w->label, what, i, AT(w, off_acc_int, int)[i], ie);
		MT_CHECK(AT(w, off_acc_dbl, double)[i] == de,
			 "%s %s: MPI_SUM double element %d is %.17g, expected "
			 "%.17g",
			 w->label, what, i, AT(w, off_acc_dbl, double)[i], de);
		MT_CHECK(AT(w, off_acc_bor, unsigned long)[i] == be,
			 "%s %s: MPI_BOR unsigned long element %d is %#lx, "
			 "expected %#lx",
			 w->label, what, i,
			 AT(w, off_acc_bor, unsigned long)[i], be);
		ie = acc_max_init(i);
		for (o = 0; o < np; o++)
			if (!bitops_skipped(w, o, me) &&
			    acc_max_val(o, me, i) > ie)
				ie = acc_max_val(o, me, i);
		MT_CHECK(AT(w, off_acc_max, int)[i] == ie,
			 "%s %s: MPI_MAX int element %d is %d, expected %d",
			 w->label, what, i, AT(w, off_acc_max, int)[i], ie);
	}
	for (i = 0; i < ACC_V; i++) {
		ie = i;
		for (o = 0; o < np; o++)
			ie += acc_vec_val(o, me, i);
		MT_CHECK(AT(w, off_acc_vec, int)[i] == ie,
			 "%s %s: MPI_SUM of %d ints: element %d is %d, "
			 "expected %d",
			 w->label, what, ACC_V, i, AT(w, off_acc_vec, int)[i],
			 ie);
	}
	for (o = 0; o < np; o++)
		for (i = 0; i < 2; i++)
			MT_CHECK(AT(w, off_acc_repl, long)[2 * o + i] ==
					 acc_repl_val(o, me, i),
				 "%s %s: MPI_REPLACE long from %d element %d "
				 "is %#lx, expected %#lx",
				 w->label, what, o, i,
				 AT(w, off_acc_repl, long)[2 * o + i],
				 acc_repl_val(o, me, i));
	h = *AT(w, off_acc_hot, long);
	for (o = 0; o < np; o++)
		if (h == acc_hot_val(o, me))
			break;
	MT_CHECK(o < np,
		 "%s %s: contended MPI_REPLACE left %ld, which no rank wrote",
		 w->label, what, h);
	local_end(w);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* ------------------------------------------------------------------ */
/* Fetch_and_op and Compare_and_swap from every rank to every rank    */

static long fop_sum_init(int t)
{
	return 1000L * t + 3;
}
static long fop_slot_init(int o, int t)
{
	return t * 100L + o + ((long)round_id << 20);
}
static long fop_repl_val(int o, int t)
{
	return -(o + 1) * 1000L - t - ((long)round_id << 24);
}
static int cas_int_init(int o, int t)
{
	return t * 1000 + o + (int)(round_id % 1000) * 100000;
}
static int cas_int_new(int o, int t)
{
	return -(t * 1000 + o + 1);
}
static long cas_long_init(int o, int t)
{
	return ((long)t << 40) + ((long)round_id << 20) + o;
}
static long cas_long_new(int o, int t)
{
	return -(((long)o << 36) + t + 7);
}

struct fop_bufs {
	long inc, sum_res;
	long noop1, repl, repl_res, noop2;
	int ci_cmp_bad, ci_new, ci_res_bad, ci_cmp, ci_res, ci_res_stale;
	long cl_cmp_bad, cl_new, cl_res_bad, cl_cmp, cl_res, cl_res_stale;
};
static struct fop_bufs *fopb; /* one per target */
static long *fop_fetched; /* sum_res per target, kept for the chain */

static void fop_issue(struct win *w, int t, void *arg)
{
	struct fop_bufs *b = &fopb[t];
	MPI_Aint slot = disp(w, t, off_fop_slot + (size_t)me * sizeof(long));
	MPI_Aint ci = disp(w, t, off_cas_int + (size_t)me * sizeof(int));
	MPI_Aint cl = disp(w, t, off_cas_long + (size_t)me * sizeof(long));

	(void)arg;
	memset(b, SCRIBBLE, sizeof(*b));
	b->inc = me + 1;
	b->repl = fop_repl_val(me, t);
	b->ci_cmp_bad = cas_int_init(me, t) + 1;
	b->ci_cmp = cas_int_init(me, t);
	b->ci_new = cas_int_new(me, t);
	b->cl_cmp_bad = cas_long_init(me, t) ^ (1L << 50);
	b->cl_cmp = cas_long_init(me, t);
	b->cl_new = cas_long_new(me, t);

	MT_MPI(MPI_Fetch_and_op(&b->inc, &b->sum_res, MPI_LONG, t,
				disp(w, t, off_fop_sum), MPI_SUM, w->win));
	/* Same origin, same location: these are ordered. */
	MT_MPI(MPI_Fetch_and_op(NULL, &b->noop1, MPI_LONG, t, slot, MPI_NO_OP,
				w->win));
	MT_MPI(MPI_Fetch_and_op(&b->repl, &b->repl_res, MPI_LONG, t, slot,
				MPI_REPLACE, w->win));
	MT_MPI(MPI_Fetch_and_op(NULL, &b->noop2, MPI_LONG, t, slot, MPI_NO_OP,
				w->win));

	MT_MPI(MPI_Compare_and_swap(&b->ci_new, &b->ci_cmp_bad, &b->ci_res_bad,
				    MPI_INT, t, ci, w->win));
	MT_MPI(MPI_Compare_and_swap(&b->ci_new, &b->ci_cmp, &b->ci_res, MPI_INT,
				    t, ci, w->win));
	MT_MPI(MPI_Compare_and_swap(&b->ci_cmp, &b->ci_cmp, &b->ci_res_stale,
				    MPI_INT, t, ci, w->win));
	if (cas_long_skipped(w, me, t))
		return;
	MT_MPI(MPI_Compare_and_swap(&b->cl_new, &b->cl_cmp_bad, &b->cl_res_bad,
				    MPI_LONG, t, cl, w->win));
	MT_MPI(MPI_Compare_and_swap(&b->cl_new, &b->cl_cmp, &b->cl_res,
				    MPI_LONG, t, cl, w->win));
	MT_MPI(MPI_Compare_and_swap(&b->cl_cmp, &b->cl_cmp, &b->cl_res_stale,
				    MPI_LONG, t, cl, w->win));
}

static void fop_done(struct win *w, int t, void *arg)
{
	struct fop_bufs *b = &fopb[t];
	const char *what = arg;
	const char *l = w->label;

	MT_CHECK(b->noop1 == fop_slot_init(me, t),
		 "%s %s: MPI_Fetch_and_op(MPI_NO_OP) on %d fetched %ld, "
		 "expected %ld",
		 l, what, t, b->noop1, fop_slot_init(me, t));
	MT_CHECK(b->repl_res == fop_slot_init(me, t),
		 "%s %s: MPI_Fetch_and_op(MPI_REPLACE) on %d fetched %ld, "
		 "expected %ld",
		 l, what, t, b->repl_res, fop_slot_init(me, t));
	MT_CHECK(b->noop2 == fop_repl_val(me, t),
		 "%s %s: MPI_NO_OP after MPI_REPLACE on %d fetched %ld, "
		 "expected %ld (the value just written)",
		 l, what, t, b->noop2, fop_repl_val(me, t));
	MT_CHECK(b->ci_res_bad == cas_int_init(me, t),
		 "%s %s: failing MPI_Compare_and_swap(MPI_INT) on %d "
		 "returned %d, expected %d",
		 l, what, t, b->ci_res_bad, cas_int_init(me, t));
	MT_CHECK(b->ci_res == cas_int_init(me, t),
		 "%s %s: MPI_Compare_and_swap(MPI_INT) on %d returned %d, "
		 "expected %d",
		 l, what, t, b->ci_res, cas_int_init(me, t));
	MT_CHECK(b->ci_res_stale == cas_int_new(me, t),
		 "%s %s: stale MPI_Compare_and_swap(MPI_INT) on %d "
		 "returned %d, expected %d",
		 l, what, t, b->ci_res_stale, cas_int_new(me, t));
	fop_fetched[t] = b->sum_res;
	if (cas_long_skipped(w, me, t)) {
		memset(b, SCRIBBLE, sizeof(*b));
		return;
	}
	MT_CHECK(b->cl_res_bad == cas_long_init(me, t),
		 "%s %s: failing MPI_Compare_and_swap(MPI_LONG) on %d "
		 "returned %#lx, expected %#lx",
		 l, what, t, b->cl_res_bad, cas_long_init(me, t));
	MT_CHECK(b->cl_res == cas_long_init(me, t),
		 "%s %s: MPI_Compare_and_swap(MPI_LONG) on %d returned "
		 "%#lx, expected %#lx",
		 l, what, t, b->cl_res, cas_long_init(me, t));
	MT_CHECK(b->cl_res_stale == cas_long_new(me, t),
		 "%s %s: stale MPI_Compare_and_swap(MPI_LONG) on %d "
		 "returned %#lx, expected %#lx",
		 l, what, t, b->cl_res_stale, cas_long_new(me, t));
	memset(b, SCRIBBLE, sizeof(*b));
}

static int cmp_pair(const void *a, const void *b)
{
	const long *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/*
 * n fetch-and-add results (fetched value, increment) on one location
 * that started at init and ended at final: sorted by fetched value, each
 * must be the previous one plus its increment, which holds only if every
 * fetch-and-add was atomic.  pairs is sorted in place.
 */
static void check_chain(long *pairs, size_t n, long init, long final,
			const char *what)
{
	long cur = init;
	size_t k;

	qsort(pairs, n, 2 * sizeof(long), cmp_pair);
	for (k = 0; k < n; k++) {
		MT_CHECK(pairs[2 * k] == cur,
			 "%s: fetched values do not form a chain: after %zu "
			 "of %zu operations the value should be %ld, but the "
			 "next smallest fetched value is %ld (lost or "
			 "duplicated update)",
			 what, k, n, cur, pairs[2 * k]);
		cur += pairs[2 * k + 1];
	}
	MT_CHECK(cur == final, "%s: final value %ld, expected %ld", what, final,
		 cur);
}

static void test_fetch_cas(struct win *w, enum sync s)
{
	const char *what = sync_name[s];
	struct ops op = {fop_issue, fop_done, (void *)what};
	long *got = mt_malloc((size_t)np * sizeof(long));
	long *pairs = mt_malloc((size_t)np * 2 * sizeof(long));
	long final, sum, lexp;
	int o;

	mt_phase("%s %s: fetch_and_op/cas setup", w->label, what);
	local_begin(w);
	*AT(w, off_fop_sum, long) = fop_sum_init(me);
	for (o = 0; o < np; o++) {
		AT(w, off_fop_slot, long)[o] = fop_slot_init(o, me);
		AT(w, off_cas_int, int)[o] = cas_int_init(o, me);
		AT(w, off_cas_long, long)[o] = cas_long_init(o, me);
	}
	local_end(w);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	mt_phase("%s %s: fetch_and_op/compare_and_swap to all ranks", w->label,
		 what);
	epoch(w, s, all_ranks, np, all_ranks, np, &op);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	mt_phase("%s %s: fetch_and_op/cas check at target", w->label, what);
	/* got[o]: what origin o fetched from me with MPI_SUM */
	MT_MPI(MPI_Alltoall(fop_fetched, 1, MPI_LONG, got, 1, MPI_LONG,
			    MPI_COMM_WORLD));
	local_begin(w);
	final = *AT(w, off_fop_sum, long);
	sum = fop_sum_init(me);
	for (o = 0; o < np; o++) {
		sum += o + 1;
		pairs[2 * o] = got[o];
		pairs[2 * o + 1] = o + 1;
		MT_CHECK(AT(w, off_fop_slot, long)[o] == fop_repl_val(o, me),
			 "%s %s: slot of %d after MPI_REPLACE is %ld, "
			 "expected %ld",
			 w->label, what, o, AT(w, off_fop_slot, long)[o],
			 fop_repl_val(o, me));
		MT_CHECK(AT(w, off_cas_int, int)[o] == cas_int_new(o, me),
			 "%s %s: int CAS slot of %d is %d, expected %d",
			 w->label, what, o, AT(w, off_cas_int, int)[o],
			 cas_int_new(o, me));
		lexp = cas_long_skipped(w, o, me) ? cas_long_init(o, me)
						  : cas_long_new(o, me);
		MT_CHECK(AT(w, off_cas_long, long)[o] == lexp,
			 "%s %s: long CAS slot of %d is %#lx, expected %#lx",
			 w->label, what, o, AT(w, off_cas_long, long)[o], lexp);
	}
	MT_CHECK(final == sum,
		 "%s %s: MPI_Fetch_and_op(MPI_SUM) total %ld, expected %ld",
		 w->label, what, final, sum);
	check_chain(pairs, (size_t)np, fop_sum_init(me), final,
		    mt_fmt("%s %s: MPI_Fetch_and_op(MPI_SUM)", w->label, what));
	local_end(w);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	free(got);
	free(pairs);
}

/* ------------------------------------------------------------------ */
/* Concurrent SUM into the same locations on rank 0                   */

static long conc_res[CONC_ITERS], conc_mix_res[CONC_ITERS];
static int conc_epoch_no;

static void conc_issue(struct win *w, int t, void *arg)
{
	static long inc_l, inc_mix_acc, inc_mix_fop;
	static int inc_i;
	int k, it;

	(void)arg;
	inc_l = me + 1;
	inc_i = me + 1;
	inc_mix_acc = me + 1;
	inc_mix_fop = (me + 1) * 1000L;
	for (k = 0; k < CONC_BATCH; k++) {
		it = conc_epoch_no * CONC_BATCH + k;
		MT_MPI(MPI_Accumulate(
			&inc_l, 1, MPI_LONG, t,
			disp(w, t, off_conc + C_ACC_LONG * sizeof(long)), 1,
			MPI_LONG, MPI_SUM, w->win));
		MT_MPI(MPI_Accumulate(
			&inc_i, 1, MPI_INT, t,
			disp(w, t, off_conc + C_ACC_INT * sizeof(long)), 1,
			MPI_INT, MPI_SUM, w->win));
		MT_MPI(MPI_Fetch_and_op(
			&inc_l, &conc_res[it], MPI_LONG, t,
			disp(w, t, off_conc + C_FOP * sizeof(long)), MPI_SUM,
			w->win));
		/* accumulate and fetch_and_op on one location */
		if (k % 2)
			MT_MPI(MPI_Accumulate(
				&inc_mix_acc, 1, MPI_LONG, t,
				disp(w, t, off_conc + C_MIX * sizeof(long)), 1,
				MPI_LONG, MPI_SUM, w->win));
		else
			MT_MPI(MPI_Fetch_and_op(
				&inc_mix_fop, &conc_mix_res[it], MPI_LONG, t,
				disp(w, t, off_conc + C_MIX * sizeof(long)),
				MPI_SUM, w->win));
	}
}

static void test_concurrent(struct win *w, enum sync s)
{
	const char *what = sync_name[s];
	struct ops op = {conc_issue, NULL, NULL};
	int zero = 0, nt = me == 0 ? np : 0;
	long *pairs = NULL, per_rank = 0, expect, v;
	int o, k;

	mt_phase("%s %s: concurrent setup", w->label, what);
	local_begin(w);
	memset(w->base + off_conc, 0, C_NSLOTS * sizeof(long));
	local_end(w);
	memset(conc_res, SCRIBBLE, sizeof(conc_res));
	memset(conc_mix_res, SCRIBBLE, sizeof(conc_mix_res));
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	for (conc_epoch_no = 0; conc_epoch_no < CONC_EPOCHS; conc_epoch_no++) {
		mt_phase("%s %s: concurrent SUM into rank 0, epoch %d of %d",
			 w->label, what, conc_epoch_no + 1, CONC_EPOCHS);
		/* All ranks target rank 0; rank 0 is exposed to all. */
		epoch(w, s, &zero, 1, all_ranks, nt, &op);
	}
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	mt_phase("%s %s: concurrent check", w->label, what);
	if (me == 0)
		pairs = mt_malloc((size_t)np * CONC_ITERS * 2 * sizeof(long));
	/* fetched values with their increments, gathered on rank 0 */
	{
		long *mine = mt_malloc(CONC_ITERS * 2 * sizeof(long));

		for (k = 0; k < CONC_ITERS; k++) {
			mine[2 * k] = conc_res[k];
			mine[2 * k + 1] = me + 1;
		}
		MT_MPI(MPI_Gather(mine, 2 * CONC_ITERS, MPI_LONG, pairs,
				  2 * CONC_ITERS, MPI_LONG, 0, MPI_COMM_WORLD));
		free(mine);
	}
	if (me == 0) {
		for (o = 0; o < np; o++)
			per_rank += o + 1;
		expect = per_rank * CONC_ITERS;
		local_begin(w);
		v = AT(w, off_conc, long)[C_ACC_LONG];
		MT_CHECK(v == expect,
			 "%s %s: %d ranks x %d MPI_Accumulate(MPI_SUM, "
			 "MPI_LONG) into one location: %ld, expected %ld",
			 w->label, what, np, CONC_ITERS, v, expect);
		v = *(int *)(w->base + off_conc + C_ACC_INT * sizeof(long));
		MT_CHECK(v == expect,
			 "%s %s: %d ranks x %d MPI_Accumulate(MPI_SUM, "
			 "MPI_INT) into one location: %ld, expected %ld",
			 w->label, what, np, CONC_ITERS, v, expect);
		v = AT(w, off_conc, long)[C_FOP];
		MT_CHECK(v == expect,
			 "%s %s: %d ranks x %d MPI_Fetch_and_op(MPI_SUM) into "
			 "one location: %ld, expected %ld",
			 w->label, what, np, CONC_ITERS, v, expect);
		check_chain(
			pairs, (size_t)np * CONC_ITERS, 0, v,
			mt_fmt("%s %s: concurrent MPI_Fetch_and_op(MPI_SUM)",
			       w->label, what));
		v = AT(w, off_conc, long)[C_MIX];
		expect = per_rank * (CONC_ITERS / 2) * 1001;
		MT_CHECK(v == expect,
			 "%s %s: MPI_Accumulate and MPI_Fetch_and_op SUM mixed "
			 "on one location: %ld, expected %ld",
			 w->label, what, v, expect);
		local_end(w);
		free(pairs);
	}
	/* the mixed fetches of one origin must be increasing */
	for (k = 2; k < CONC_ITERS; k += 2)
		MT_CHECK(conc_mix_res[k] > conc_mix_res[k - 2],
			 "%s %s: mixed fetch_and_op %d fetched %ld after %ld",
			 w->label, what, k, conc_mix_res[k],
			 conc_mix_res[k - 2]);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* ------------------------------------------------------------------ */
/* Passive target: CAS lock and CAS counters (contended)              */

/*
 * Back off after a failed CAS.  MPI_Iprobe drives Open MPI's progress
 * engine: osc/rdma performs a rank's CAS on its own memory with CPU
 * atomics and does not progress the BTL, so a host spinning on its own
 * lock would never serve the RMA of the other ranks with a provider that
 * needs target-side progress (FI_PROGRESS_MANUAL, e.g. libfabric shm).
 */
static void backoff(void)
{
	int flag;

	MT_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
			  MPI_STATUS_IGNORE));
	sched_yield();
}

/* MPI_Compare_and_swap of an int or a long, completed with a flush. */
static long cas_flush(struct win *w, MPI_Datatype dt, long nv, long cmp, int t,
		      MPI_Aint d)
{
	long nl = nv, cl = cmp, rl = 0;
	int ni = (int)nv, ci = (int)cmp, ri = 0;

	if (dt == MPI_INT)
		MT_MPI(MPI_Compare_and_swap(&ni, &ci, &ri, MPI_INT, t, d,
					    w->win));
	else
		MT_MPI(MPI_Compare_and_swap(&nl, &cl, &rl, MPI_LONG, t, d,
					    w->win));
	MT_MPI(MPI_Win_flush(t, w->win));
	return dt == MPI_INT ? ri : rl;
}

static long read_local(struct win *w, MPI_Datatype dt, size_t off)
{
	return dt == MPI_INT ? *AT(w, off, int) : *AT(w, off, long);
}

/*
 * Which ranks take part in a contended test of MPI_LONG CASes on host:
 * all ranks, or where such a CAS to the own process is broken (see
 * alloc_cas_long_broken) all but the host, or none (win_allocate).
 * Returns the number of participants; *me_in tells about this rank.
 */
static int cas_participants(const struct win *w, MPI_Datatype dt, int host,
			    int *me_in)
{
	if (dt == MPI_INT || !alloc_cas_long_broken) {
		*me_in = 1;
		return np;
	}
	if (w->flavor == FL_ALLOCATE) {
		*me_in = 0;
		return 0;
	}
	*me_in = me != host;
	return np - 1;
}

/*
 * A spin lock on rank 0 built from MPI_Compare_and_swap of dt under
 * lock_all, protecting a counter that is read with MPI_Get and written
 * with MPI_Put.  Returns the number of participants.
 */
static int test_cas_lock(struct win *w, MPI_Datatype dt)
{
	const char *tn = dt == MPI_INT ? "int" : "long";
	long mine = me + 1, res, holder, ctr, nctr;
	MPI_Aint lk = disp(w, 0, off_lock), cn = disp(w, 0, off_counter);
	int it, tries = 0, in, nin = cas_participants(w, dt, 0, &in);

	if (nin == 0)
		return 0;
	mt_phase("%s: CAS lock (%s) setup", w->label, tn);
	local_begin(w);
	*AT(w, off_lock, long) = 0;
	*AT(w, off_counter, long) = 0;
	local_end(w);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	MT_MPI(MPI_Win_lock_all(0, w->win));
	for (it = 0; in && it < LOCK_ITERS; it++) {
		mt_phase("%s: CAS lock (%s) iteration %d (%d tries so far)",
			 w->label, tn, it, tries);
		for (;;) {
			tries++;
			res = cas_flush(w, dt, mine, 0, 0, lk);
			if (res == 0)
				break;
			MT_CHECK(res >= 1 && res <= np && res != mine,
				 "%s: CAS lock (%s) held by bogus value %ld",
				 w->label, tn, res);
			backoff();
		}
		MT_MPI(MPI_Get(&ctr, 1, MPI_LONG, 0, cn, 1, MPI_LONG, w->win));
		MT_MPI(MPI_Win_flush(0, w->win));
		/* a CAS that cannot succeed reads the lock */
		holder = cas_flush(w, dt, -1, -1, 0, lk);
		MT_CHECK(holder == mine,
			 "%s: CAS lock (%s) taken, but it holds %ld, not %ld",
			 w->label, tn, holder, mine);
		nctr = ctr + 1;
		MT_MPI(MPI_Put(&nctr, 1, MPI_LONG, 0, cn, 1, MPI_LONG, w->win));
		MT_MPI(MPI_Win_flush(0, w->win));
		res = cas_flush(w, dt, 0, mine, 0, lk);
		MT_CHECK(res == mine,
			 "%s: releasing the CAS lock (%s) found %ld in it, not "
			 "%ld",
			 w->label, tn, res, mine);
	}
	MT_MPI(MPI_Win_unlock_all(w->win));
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	mt_phase("%s: CAS lock (%s) check", w->label, tn);
	if (me == 0) {
		local_begin(w);
		MT_CHECK(*AT(w, off_counter, long) == (long)nin * LOCK_ITERS,
			 "%s: counter protected by the CAS lock (%s) is %ld, "
			 "expected %ld (mutual exclusion broken or lost put)",
			 w->label, tn, *AT(w, off_counter, long),
			 (long)nin * LOCK_ITERS);
		MT_CHECK(read_local(w, dt, off_lock) == 0,
			 "%s: CAS lock (%s) left at %ld", w->label, tn,
			 read_local(w, dt, off_lock));
		local_end(w);
	}
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	return nin;
}

/*
 * A lock-free counter of dt on host: CAS(guess -> guess + 1) until it
 * succeeds.  Every successful CAS saw a distinct value, so together they
 * must have seen 0 .. participants * CAS_ITERS - 1 exactly once.  With
 * per_op_lock every attempt is its own MPI_Win_lock(MPI_LOCK_SHARED)
 * epoch, else all run in one lock_all epoch with MPI_Win_flush.
 * Returns the number of participants.
 */
static int test_cas_counter(struct win *w, MPI_Datatype dt, int host,
			    int per_op_lock)
{
	const char *tn = dt == MPI_INT ? "int" : "long";
	MPI_Aint d = disp(w, host, off_cas_ctr);
	long g = 0, r, seen[CAS_ITERS], *all = NULL;
	int in, nin = cas_participants(w, dt, host, &in), n, it, k;
	int *counts = NULL, *displs = NULL, nmine;
	char *hit;

	if (nin == 0)
		return 0;
	n = nin * CAS_ITERS;
	mt_phase("%s: CAS counter (%s) on %d setup", w->label, tn, host);
	local_begin(w);
	*AT(w, off_cas_ctr, long) = 0;
	local_end(w);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	if (!per_op_lock)
		MT_MPI(MPI_Win_lock_all(0, w->win));
	for (it = 0; in && it < CAS_ITERS; it++) {
		mt_phase("%s: CAS counter (%s) on %d: increment %d", w->label,
			 tn, host, it);
		for (;;) {
			if (per_op_lock)
				MT_MPI(MPI_Win_lock(MPI_LOCK_SHARED, host, 0,
						    w->win));
			r = cas_flush(w, dt, g + 1, g, host, d);
			if (per_op_lock)
				MT_MPI(MPI_Win_unlock(host, w->win));
			if (r == g)
				break;
			MT_CHECK(r > g && r < n,
				 "%s: CAS counter (%s) on %d went from %ld to "
				 "%ld",
				 w->label, tn, host, g, r);
			g = r;
			backoff();
		}
		seen[it] = g++;
	}
	if (!per_op_lock)
		MT_MPI(MPI_Win_unlock_all(w->win));
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	mt_phase("%s: CAS counter (%s) on %d check", w->label, tn, host);
	nmine = in ? CAS_ITERS : 0;
	if (me == 0) {
		all = mt_malloc((size_t)np * CAS_ITERS * sizeof(long));
		counts = mt_malloc((size_t)np * sizeof(int));
		displs = mt_malloc((size_t)np * sizeof(int));
	}
	MT_MPI(MPI_Gather(&nmine, 1, MPI_INT, counts, 1, MPI_INT, 0,
			  MPI_COMM_WORLD));
	if (me == 0)
		for (k = 0; k < np; k++)
			displs[k] = k * CAS_ITERS;
	MT_MPI(MPI_Gatherv(seen, nmine, MPI_LONG, all, counts, displs, MPI_LONG,
			   0, MPI_COMM_WORLD));
	if (me == 0) {
		hit = mt_malloc((size_t)n);
		memset(hit, 0, (size_t)n);
		for (int o = 0; o < np; o++) {
			for (k = 0; k < counts[o]; k++) {
				r = all[displs[o] + k];
				MT_CHECK(r >= 0 && r < n && !hit[r],
					 "%s: CAS counter (%s) on %d: two "
					 "successful CASes saw %ld",
					 w->label, tn, host, r);
				hit[r] = 1;
			}
		}
		free(hit);
		free(all);
		free(counts);
		free(displs);
	}
	if (me == host) {
		local_begin(w);
		MT_CHECK(read_local(w, dt, off_cas_ctr) == n,
			 "%s: CAS counter (%s) on %d ended at %ld, expected %d",
			 w->label, tn, host, read_local(w, dt, off_cas_ctr), n);
		local_end(w);
	}
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	return nin;
}

/* ------------------------------------------------------------------ */
/* disp_unit, request-based operations, MPI_Get_accumulate            */

static void test_disp_unit(void)
{
	enum { PER = 8 };
	long *mem = mt_malloc((size_t)np * PER * sizeof(long));
	long val[2], got[2], gacc_in[3], gacc_out[3], exp;
	MPI_Request req[3];
	MPI_Win win;
	int i, o;

	mt_phase("disp_unit window");
	for (i = 0; i < np * PER; i++)
		mem[i] = me * 100000L + i;
	MT_MPI(MPI_Win_create(mem, (MPI_Aint)((size_t)np * PER * sizeof(long)),
			      sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD,
			      &win));
	MT_MPI(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	MT_MPI(MPI_Win_lock_all(0, win));
	/* element me * PER (+1) of the right neighbour */
	val[0] = -(me + 1L);
	val[1] = -(me + 1L) * 3;
	for (i = 0; i < 3; i++)
		gacc_in[i] = me + i;
	MT_MPI(MPI_Rput(val, 2, MPI_LONG, right, me * PER, 2, MPI_LONG, win,
			&req[0]));
	MT_MPI(MPI_Rget(got, 2, MPI_LONG, left, left * PER + 4, 2, MPI_LONG,
			win, &req[1]));
	MT_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
	MT_CHECK(got[0] == left * 100000L + left * PER + 4 &&
			 got[1] == left * 100000L + left * PER + 5,
		 "MPI_Rget with disp_unit %zu from %d got %ld %ld",
		 sizeof(long), left, got[0], got[1]);
	MT_MPI(MPI_Win_flush_all(win));
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	/* every rank adds into elements 6..7 of rank 0 and reads them back */
	MT_MPI(MPI_Rget_accumulate(gacc_in, 2, MPI_LONG, gacc_out, 2, MPI_LONG,
				   0, 6, 2, MPI_LONG, MPI_SUM, win, &req[2]));
	MT_MPI(MPI_Wait(&req[2], MPI_STATUS_IGNORE));
	MT_CHECK(gacc_out[0] >= 6 && gacc_out[1] >= 7,
		 "MPI_Rget_accumulate fetched %ld %ld", gacc_out[0],
		 gacc_out[1]);
	MT_MPI(MPI_Win_unlock_all(win));
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));

	mt_phase("disp_unit window check");
	MT_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
	MT_CHECK(mem[left * PER] == -(left + 1L) &&
			 mem[left * PER + 1] == -(left + 1L) * 3,
		 "MPI_Rput with disp_unit %zu from %d: found %ld %ld",
		 sizeof(long), left, mem[left * PER], mem[left * PER + 1]);
	if (me == 0) {
		for (i = 0; i < 2; i++) {
			exp = i + 6;
			for (o = 0; o < np; o++)
				exp += o + i;
			MT_CHECK(
				mem[6 + i] == exp,
				"MPI_Rget_accumulate(MPI_SUM) element %d: %ld, "
				"expected %ld",
				i, mem[6 + i], exp);
		}
	}
	MT_MPI(MPI_Win_unlock(me, win));
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	MT_MPI(MPI_Win_free(&win));
	free(mem);
}

int main(int argc, char **argv)
{
	struct win w;
	char cas_note[256] = "";
	int fl, s, i, lock_long;
	size_t used;

	mt_init(&argc, &argv, "mpi_osc");
	me = mt_rank;
	np = mt_size;
	right = (me + 1) % np;
	left = (me + np - 1) % np;
	all_ranks = mt_malloc((size_t)np * sizeof(int));
	for (i = 0; i < np; i++)
		all_ranks[i] = i;
	layout_init();
	big_src = mt_malloc(BIG);
	big_dst = mt_malloc(BIG);
	accb = mt_malloc((size_t)np * sizeof(*accb));
	fopb = mt_malloc((size_t)np * sizeof(*fopb));
	fop_fetched = mt_malloc((size_t)np * sizeof(long));
	detect_mpi_bugs();
	{
		MPI_Comm node;
		int nsize, provided;

		MT_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED,
					   0, MPI_INFO_NULL, &node));
		MT_MPI(MPI_Comm_size(node, &nsize));
		MT_MPI(MPI_Comm_free(&node));
		single_node = nsize == np;
		MT_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
		acc_use_amo = get_cvar("osc_rdma_acc_use_amo");
	}
	check_components("after MPI_Init");

	for (fl = 0; fl < NFLAVORS; fl++) {
		win_open(&w, (enum flavor)fl);
		for (s = 0; s < NSYNCS; s++) {
			round_id++;
			test_put_get(&w, (enum sync)s);
			round_id++;
			test_accumulate(&w, (enum sync)s);
			round_id++;
			test_fetch_cas(&w, (enum sync)s);
			round_id++;
			test_concurrent(&w, (enum sync)s);
			checks += 4;
		}
		lock_long = test_cas_lock(&w, MPI_LONG);
		test_cas_lock(&w, MPI_INT);
		test_cas_counter(&w, MPI_LONG, np - 1, 0);
		test_cas_counter(&w, MPI_LONG, 0, 1);
		test_cas_counter(&w, MPI_INT, 0, 0);
		test_cas_counter(&w, MPI_INT, np - 1, 1);
		used = strlen(cas_note);
		snprintf(cas_note + used, sizeof(cas_note) - used, "%s%s:%d",
			 fl ? "," : "", w.label + 4, lock_long);
		win_close(&w);
	}
	test_disp_unit();
	check_components("at the end");
	MT_MPI(MPI_T_finalize());

	free(big_src);
	free(big_dst);
	free(accb);
	free(fopb);
	free(fop_fetched);
	free(all_ranks);
	mt_finish(
		"%d window flavors x %d epoch kinds (%d epoch tests): put/get "
		"%d, %d (odd offsets) and %u B; accumulate sum/max/replace/"
		"bor; fetch_and_op sum/no_op/replace; cas int/long; 4 x %d "
		"SUMs per rank into rank 0; CAS locks/counters (long by "
		"ranks: %s); "
		"disp_unit; btl %s; osc %s%s%s",
		NFLAVORS, NSYNCS, checks, SMALL, MID, BIG, CONC_ITERS, cas_note,
		btl_list, osc_list,
		alloc_cas_long_broken ? "; no long CAS to win_allocate/self "
					"(Open MPI < 4.1.5 bug)"
				      : "",
		!btl_bitops_broken ? ""
		: acc_use_amo == 0
			? "; acc_use_amo=0"
			: "; MAX/BOR not over btl/ofi (Open MPI 4.x aborts)");
	return 0;
}
