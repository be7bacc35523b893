/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * T-NBC (seed 000): a blocking alltoall(v) that returns before its data
 * has arrived.  docs/t-nbc-design.md has the reasons; tnbc-mpi(7) what a
 * program sees.
 *
 * The schedule is the glue's alltoallv (one tagged message each way per
 * member, the same tags), so a member may take either path on its own.
 * What differs is where the data lands:
 *
 * - The receive buffer is cut into ranges of whole pages that messages
 *   cover completely, one range per run of pages the same messages
 *   land in (a message's interior, or a page two share).  Each range is
 *   guarded (tg_guard.h): PROT_NONE until the messages that land in it
 *   have all arrived, their bytes gathered in a staging mapping.
 * - Every other page (the first and last of an unaligned buffer, a page
 *   shared with data outside the messages) is foreign: never protected.
 *   The messages that touch one are received in place and waited for
 *   before the call returns.
 * - A receive is deferred work with a counter of its own; a copy step
 *   triggered by that counter writes the message's ready word, so the
 *   provider's engine opens the way with no application thread in the
 *   loop.  A fault on a range waits for the words of exactly the
 *   messages that land in it.
 * - The send data is copied during the call (the buffer is the
 *   program's again when it returns) and sent from the copy, in rank
 *   order, the order NPB FT and IS read their results in.
 *
 * A call stays on tg.tnbc until its messages have completed and its
 * ranges are open; a later T-NBC call, MPI_Comm_free and MPI_Finalize
 * finish those still outstanding.
 *
 * Each rank tries T-NBC at each call site against the plain way (the
 * glue's alltoallv; for a broadcast, these messages with nothing
 * guarded) and keeps T-NBC only where its loop ran more than 5 % faster
 * with it (tg_adapt.h, TNBC_MPI_TNBC_ADAPT).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <rdma/fi_errno.h>
#include <rdma/fi_trigger.h>

#include "tg_adapt.h"
#include "tg_guard.h"
#include "tg_priv.h"

/* A message lands in at most three ranges (a page shared with the
 * previous message, its interior, a page shared with the next) and in
 * place between and around them: seven pieces. */
#define TG_TNBC_IOV 8

/* A call's calls outstanding at once: beyond this the oldest is
 * finished first (each holds staging memory and counters). */
#define TG_TNBC_MAX_OPS 64

/* Members a site's trace keeps. */
#define TG_TNBC_SITE_MAX 1024

/* Verdicts a rank keeps for the next run: a program that makes a
 * communicator per step reaches a verdict on each (their ids recur from
 * run to run), and the list is searched as a site starts its trial. */
#define TG_VERDICTS_MAX 4096

struct tg_tnbc_msg {
	/* the receive, deferred work on tg.go; its context's first word
	 * names the request (tg_ctx_req) */
	struct fi_deferred_work w;
	struct fi_op_tagged t;
	struct iovec iov[TG_TNBC_IOV];
	/* the copy step that writes the ready word */
	struct fi_deferred_work cw;
	struct fi_tnbc_op_copy cp;
	struct fid_cntr *k;
	size_t off, len;
	int src; /* member */
	int piece; /* of src's message (tg_a2a_cut): its tag's offset */
	bool wait; /* lands on a foreign page: the call waits for it */
};

struct tg_tnbc_rng {
	uintptr_t lo, hi;
	int mlo, mhi; /* the messages that land in it, by position */
	void *stage; /* NULL: not guarded (the data lands in place) */
	struct tg_guard_range *g; /* NULL too once released early */
	uint64_t touched; /* its first need, kept when released early */
};

/* A broadcast's forward of a piece to a child: deferred work on the
 * piece's counter, after its receive. */
struct tg_tnbc_fwd {
	struct fi_deferred_work w;
	struct fi_op_tagged t;
};

struct tg_tnbc_op {
	struct tg_req *req;
	struct tg_comm *c;
	void *scopy;
	struct tg_tnbc_fwd *fwd; /* a broadcast's: piece by child */
	bool broken; /* a post failed: work may wait on its counters */
	bool trace; /* TNBC_MPI_TNBC_TRACE: its reads are recorded */
	uint64_t t_ret; /* when the call returned, ns */
	char site[200]; /* the call's site (tg_tnbc_site_key) */
	bool told; /* its error went to the front-end already */
	int n;
	struct tg_tnbc_msg *m; /* by position in the receive buffer */
	atomic_uint *ready; /* one per message */
	int nr;
	struct tg_tnbc_rng *r;
	struct tg_tnbc_op *next;
};

static const atomic_uint tg_tnbc_one = 1;

/*
 * Send copies of finished calls, kept for the next: a fresh one of a few
 * MiB comes from mmap, and faulting its pages in cost 150 us of a 1 MiB
 * alltoall's 2 ranks.  Two are kept because a call usually starts while
 * the previous one's sends are still out (the peer pulls them after its
 * own call has begun): with one kept, every call of an 8 MiB alltoallv
 * at 2 ranks took a fresh copy on one rank, 7 ms of its 10 in the copy.
 * A copy's size sits in the 64 bytes before it.
 */
#define TG_SCOPY_KEEP 2
static void *_Atomic tg_spare[TG_SCOPY_KEEP];

static size_t tg_scopy_len(const char *b)
{
	return *(const size_t *)(b - 64);
}

static void *tg_scopy_get(size_t len)
{
	char *b;

	for (int i = 0; i < TG_SCOPY_KEEP; i++) {
		b = atomic_exchange(&tg_spare[i], NULL);
		if (b && tg_scopy_len(b) >= len)
			return b;
		if (b) /* too small for this call: dropped */
			free(b - 64);
	}
	b = malloc(len + 64);
	if (!b)
		return NULL;
	*(size_t *)b = len;
	return b + 64;
}

/* p kept in an empty slot, or freed; NULL: every kept copy freed */
static void tg_scopy_put(void *p)
{
	for (int i = 0; i < TG_SCOPY_KEEP; i++) {
		void *e = NULL;

		if (!p) {
			e = atomic_exchange(&tg_spare[i], NULL);
			if (e)
				free((char *)e - 64);
		} else if (atomic_compare_exchange_strong(&tg_spare[i], &e,
							  p)) {
			return;
		}
	}
	if (p)
		free((char *)p - 64);
}

static bool tg_tnbc_guard_on; /* under tg.lock */

/* A child has no engine to land what its parent still waits for: the
 * guarded data lands and opens before the fork. */
static void tg_tnbc_prefork(void)
{
	if (tg_guard_any())
		tg_guard_open_overlap(NULL, SIZE_MAX);
}

static void tg_tnbc_atfork(void)
{
	pthread_atfork(tg_tnbc_prefork, NULL, NULL);
}

/* ------------------------------------------------------------------ */
/* The order a program reads its messages in: traced, then replayed     */

/*
 * TNBC_MPI_TNBC_TRACE=prefix: every T-NBC call lets all its data land
 * before it returns, and each rank records, per call site, the order it
 * first needed its messages in (the guard's first fault or open of each
 * range, in ns after the call returned), written to prefix.<world rank>
 * at MPI_Finalize.  TNBC_MPI_TNBC_ORDER=prefix reads every rank's file:
 * a sender then gives its message to r the transmit priority of its
 * place in r's order (tg_tnbc_prio), so that on a link several
 * processes share the messages their receivers need first go first.  The format
 * is in tnbc-mpi(7), "T-NBC".
 */
struct tg_site {
	char key[200];
	uint32_t comm;
	int owner; /* the world rank that read in this order */
	int n;
	int order[TG_TNBC_SITE_MAX]; /* member ranks, first read first */
	uint64_t ns[TG_TNBC_SITE_MAX]; /* when, after the return */
	uint64_t calls;
};

/* T-NBC's trial at one call site of one communicator (tg_adapt.h), kept
 * with the communicator and freed with it (its verdict, with
 * TNBC_MPI_TNBC_VERDICTS, in tg_tr.v). */
struct tg_tnbc_site {
	struct tg_tnbc_site *next;
	char key[200];
	struct tg_adapt ad;
	bool told; /* its verdict came from an earlier run */
};

/* A verdict kept from one run for the next (TNBC_MPI_TNBC_VERDICTS). */
struct tg_verdict {
	char key[200];
	uint32_t comm;
	int way;
	double ms[2]; /* the mean periods it was taken on, by way */
};

static struct {
	bool init;
	const char *trace, *replay;
	const char *skip; /* TNBC_MPI_TNBC_SKIP: sites that guard nothing */
	const char *verdicts; /* TNBC_MPI_TNBC_VERDICTS: the file's prefix */
	bool loaded;
	struct tg_site *s;
	size_t n, cap;
	struct tg_verdict *v; /* read from the file, and taken since */
	size_t nv, capv;
	bool ops_tried;
	struct fi_tnbc_ops_ep *ep_ops; /* transmit priorities */
} tg_tr;

static uint64_t tg_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A call site the same on every rank of an SPMD program: the module
 * and the offset in it, and the function. */
static void tg_tnbc_site_key(char *key, size_t len, const char *fn,
			     const void *site)
{
	Dl_info info;

	if (site && dladdr(site, &info) && info.dli_fname)
		snprintf(key, len, "%s@%s+%#lx", fn, info.dli_fname,
			 (unsigned long)((uintptr_t)site -
					 (uintptr_t)info.dli_fbase));
	else
		snprintf(key, len, "%s@?", fn);
}

/* Whether the program opted this call site out of the guard
 * (TNBC_MPI_TNBC_SKIP: prefixes of site keys as the trace writes them,
 * separated by commas: "MPI_Bcast@" every broadcast, a whole key one
 * call site). */
static bool tg_tnbc_skipped(const char *key)
{
	const char *p = tg_tr.skip;

	while (p && *p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n && !strncmp(p, key, n))
			return true;
		p = e ? e + 1 : NULL;
	}
	return false;
}

/* arr (n elements of elem bytes, room for *cap) with room for one
 * more, its room doubled when full; NULL, arr as it was, without
 * memory. */
static void *tg_room(void *arr, size_t n, size_t *cap, size_t elem)
{
	size_t c = *cap ? 2 * *cap : 16;
	void *b;

	if (n < *cap)
		return arr;
	b = realloc(arr, c * elem);
	if (b)
		*cap = c;
	return b;
}

static struct tg_site *tg_site_find(const char *key, uint32_t comm, int owner,
				    bool add)
{
	struct tg_site *a, *st;

	for (size_t i = 0; i < tg_tr.n; i++)
		if (tg_tr.s[i].comm == comm && tg_tr.s[i].owner == owner &&
		    !strcmp(tg_tr.s[i].key, key))
			return &tg_tr.s[i];
	if (!add)
		return NULL;
	a = tg_room(tg_tr.s, tg_tr.n, &tg_tr.cap, sizeof(*a));
	if (!a)
		return NULL;
	tg_tr.s = a;
	st = memset(&a[tg_tr.n++], 0, sizeof(*st));
	snprintf(st->key, sizeof(st->key), "%s", key);
	st->comm = comm;
	st->owner = owner;
	return st;
}

/* Every rank's trace, read once; under tg.lock.  A missing or broken
 * file leaves that rank's messages at the default priority. */
static void tg_tnbc_load(void)
{
	char path[4096], line[512];

	tg_tr.loaded = true;
	for (int r = 0; r < tg.size; r++) {
		struct tg_site *cur = NULL;
		FILE *f;

		snprintf(path, sizeof(path), "%s.%d", tg_tr.replay, r);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char key[200];
			unsigned comm;
			int n, who;
			unsigned long long ns;

			if (sscanf(line, "site %199s comm %u members %d", key,
				   &comm, &n) == 3)
				cur = n > 0 && n <= TG_TNBC_SITE_MAX
					      ? tg_site_find(key, comm, r, true)
					      : NULL;
			else if (cur &&
				 sscanf(line, "read %d %llu", &who, &ns) == 2 &&
				 cur->n < TG_TNBC_SITE_MAX) {
				cur->ns[cur->n] = ns;
				cur->order[cur->n++] = who;
			}
		}
		fclose(f);
	}
}

/* The transmit priority of my message to member `to` of c at this
 * site: higher the earlier `to` reads it, in its trace or, without one,
 * in rank order (every member reads member 0's first, as NPB FT and IS
 * do).  Among the processes of a host the provider sends the highest
 * first (FI_TNBC_LINK_SHARE), so that each receiver's first-needed
 * messages have the link first. */
static unsigned tg_tnbc_prio(struct tg_tnbc_op *op, int to)
{
	const struct tg_site *st = NULL;
	int k = op->c->rank;

	if (tg_tr.replay) {
		if (!tg_tr.loaded)
			tg_tnbc_load();
		st = tg_site_find(op->site, op->c->id, op->c->world[to], false);
	}
	if (st) {
		for (k = 0; k < st->n && st->order[k] != op->c->rank; k++)
			;
		if (k == st->n)
			return FI_TNBC_PRIO_DEFAULT;
	}
	return FI_TNBC_PRIO_MAX - (unsigned)(k < 254 ? k : 254);
}

/* Records op's reads at its site: a message on a foreign page was
 * needed at the return; one in ranges, at the first need of any. */
static void tg_tnbc_record(struct tg_tnbc_op *op)
{
	struct tg_site *st;
	int n = 0;

	st = tg_site_find(op->site, op->c->id, tg.rank, true);
	if (!st)
		return;
	st->calls++;
	for (int j = 0; j < op->n; j++) {
		uint64_t t = op->m[j].wait ? op->t_ret : UINT64_MAX, ns;
		/* an alltoall's messages by sender, a broadcast's pieces
		 * by number (one sender for all of them) */
		int who = op->fwd ? j : op->m[j].src;

		for (int i = 0; i < op->nr; i++) {
			uint64_t u = op->r[i].g ? tg_guard_touched(op->r[i].g)
						: op->r[i].touched;

			if (u && op->r[i].mlo <= j && j < op->r[i].mhi && u < t)
				t = u;
		}
		ns = t == UINT64_MAX ? UINT64_MAX
		     : t > op->t_ret ? t - op->t_ret
				     : 0;
		/* the pieces of an alltoall's message (tg_a2a_cut), next to
		 * one another: the message's need is its earliest piece's */
		if (n && st->order[n - 1] == who) {
			st->ns[n - 1] = ns < st->ns[n - 1] ? ns : st->ns[n - 1];
			continue;
		}
		if (n == TG_TNBC_SITE_MAX)
			break;
		st->order[n] = who;
		st->ns[n++] = ns;
	}
	st->n = n;
	/* by time, untouched last (insertion sort: a few dozen members) */
	for (int a = 1; a < n; a++)
		for (int b = a; b > 0 && st->ns[b] < st->ns[b - 1]; b--) {
			uint64_t x = st->ns[b];
			int y = st->order[b];

			st->ns[b] = st->ns[b - 1];
			st->order[b] = st->order[b - 1];
			st->ns[b - 1] = x;
			st->order[b - 1] = y;
		}
}

static void tg_tnbc_write_trace(void)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s.%d", tg_tr.trace, tg.rank);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "tnbc-mpi: TNBC_MPI_TNBC_TRACE: %s: %s\n", path,
			strerror(errno));
		return;
	}
	fprintf(f, "# tnbc-mpi T-NBC trace: world rank %d of %d\n", tg.rank,
		tg.size);
	for (size_t i = 0; i < tg_tr.n; i++) {
		const struct tg_site *st = &tg_tr.s[i];

		if (st->owner != tg.rank)
			continue;
		fprintf(f, "site %s comm %u members %d calls %llu\n", st->key,
			st->comm, st->n, (unsigned long long)st->calls);
		for (int k = 0; k < st->n; k++)
			if (st->ns[k] == UINT64_MAX)
				fprintf(f, "read %d %llu unread\n",
					st->order[k],
					(unsigned long long)st->ns[k]);
			else
				fprintf(f, "read %d %llu\n", st->order[k],
					(unsigned long long)st->ns[k]);
	}
	fclose(f);
}

/*
 * TNBC_MPI_TNBC_VERDICTS=prefix: each rank reads prefix.<world rank> at
 * its first T-NBC call and starts every site the file names on its
 * verdict there, trying nothing; at MPI_Finalize it writes the file
 * back with the verdicts of this run added (a site this run did not
 * reach keeps its line).  A repeated run pays no trial.  The format is
 * in tnbc-mpi(7), "T-NBC".
 */
static struct tg_verdict *tg_verdict_find(const char *key, uint32_t comm,
					  bool add)
{
	struct tg_verdict *a, *v;

	for (size_t i = 0; i < tg_tr.nv; i++)
		if (tg_tr.v[i].comm == comm && !strcmp(tg_tr.v[i].key, key))
			return &tg_tr.v[i];
	if (!add || tg_tr.nv >= TG_VERDICTS_MAX)
		return NULL;
	a = tg_room(tg_tr.v, tg_tr.nv, &tg_tr.capv, sizeof(*a));
	if (!a)
		return NULL;
	tg_tr.v = a;
	v = memset(&a[tg_tr.nv++], 0, sizeof(*v));
	snprintf(v->key, sizeof(v->key), "%s", key);
	v->comm = comm;
	return v;
}

/* Under tg.lock, once: this rank's file, if there is one and it was
 * written at this world size (another size's verdicts are another
 * run's, and said to be left). */
static void tg_verdicts_load(void)
{
	char path[4096], line[512];
	int rank, size;
	FILE *f;

	snprintf(path, sizeof(path), "%s.%d", tg_tr.verdicts, tg.rank);
	f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(line, sizeof(line), f) ||
	    sscanf(line, "# tnbc-mpi T-NBC verdicts: world rank %d of %d",
		   &rank, &size) != 2 ||
	    rank != tg.rank || size != tg.size) {
		fprintf(stderr,
			"tnbc-mpi: TNBC_MPI_TNBC_VERDICTS: %s is not this "
			"rank's of %d ranks; not read (and written anew)\n",
			path, tg.size);
		fclose(f);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char key[200], way[16];
		unsigned comm;
		double t, p;
		struct tg_verdict *v;

		if (sscanf(line, "site %199s comm %u %15s %lf %lf", key, &comm,
			   way, &t, &p) != 5 ||
		    (strcmp(way, "kept") && strcmp(way, "left")) ||
		    !(t >= 0 && t < 1e9 && p >= 0 && p < 1e9))
			continue; /* a comment, or a line of another version */
		v = tg_verdict_find(key, comm, true);
		if (!v)
			break;
		v->way = strcmp(way, "kept") ? TG_WAY_PLAIN : TG_WAY_TNBC;
		v->ms[TG_WAY_TNBC] = t;
		v->ms[TG_WAY_PLAIN] = p;
	}
	fclose(f);
}

/* Under tg.lock: c's verdicts go into the list the file is written
 * from (before c goes, and at MPI_Finalize). */
static void tg_verdicts_take(struct tg_comm *c)
{
	if (!tg_tr.verdicts)
		return;
	for (struct tg_tnbc_site *s = c->sites; s; s = s->next) {
		const struct tg_adapt *a = &s->ad;
		struct tg_verdict *v;

		if (a->verdict < 0 || s->told)
			continue;
		v = tg_verdict_find(s->key, c->id, true);
		if (!v)
			return;
		v->way = a->verdict;
		for (int w = 0; w < 2; w++)
			v->ms[w] = tg_adapt_mean_ms(a, (enum tg_way)w);
	}
}

static void tg_verdicts_write(void)
{
	char path[4096];
	FILE *f;

	for (struct tg_comm *c = tg.all; c; c = c->all_next)
		tg_verdicts_take(c);
	snprintf(path, sizeof(path), "%s.%d", tg_tr.verdicts, tg.rank);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "tnbc-mpi: TNBC_MPI_TNBC_VERDICTS: %s: %s\n",
			path, strerror(errno));
		return;
	}
	fprintf(f, "# tnbc-mpi T-NBC verdicts: world rank %d of %d\n", tg.rank,
		tg.size);
	for (size_t i = 0; i < tg_tr.nv; i++) {
		const struct tg_verdict *v = &tg_tr.v[i];

		fprintf(f, "site %s comm %u %s %.3f %.3f\n", v->key, v->comm,
			v->way == TG_WAY_TNBC ? "kept" : "left",
			v->ms[TG_WAY_TNBC], v->ms[TG_WAY_PLAIN]);
	}
	fclose(f);
}

void tg_tnbc_close(void)
{
	if (tg_tr.trace && tg.ready)
		tg_tnbc_write_trace();
	if (tg_tr.verdicts && tg.ready)
		tg_verdicts_write();
	free(tg_tr.v);
	free(tg_tr.s);
	memset(&tg_tr, 0, sizeof(tg_tr));
	tg_cntr_close_all();
	tg_scopy_put(NULL);
	if (tg_tnbc_guard_on)
		tg_guard_fini();
	tg_tnbc_guard_on = false;
}

/* ------------------------------------------------------------------ */
/* Finishing                                                            */

static bool tg_tnbc_landed(const struct tg_tnbc_op *op)
{
	for (int j = 0; j < op->n; j++)
		if (!atomic_load_explicit(&op->ready[j], memory_order_acquire))
			return false;
	return true;
}

static void tg_tnbc_op_free(struct tg_tnbc_op *op)
{
	tg_req_free(op->req);
	tg_scopy_put(op->scopy);
	free(op->fwd);
	free(op->m);
	free(op->ready);
	free(op->r);
	free(op);
}

static void tg_tnbc_free(struct tg_tnbc_op *op)
{
	if (op->trace && op->m && !op->broken)
		tg_tnbc_record(op);
	for (int i = 0; i < op->nr; i++)
		if (op->r[i].g)
			tg_guard_release(op->r[i].g);
	for (int j = 0; j < op->n; j++) {
		if (op->broken && op->m[j].k) {
			/* work that will never fire must not fire for the
			 * counter's next user */
			struct fi_deferred_work w = {.triggering_cntr =
							     op->m[j].k};

			fi_control(&tg.domain->fid, FI_FLUSH_WORK, &w);
		}
		tg_cntr_put(op->m[j].k);
	}
	if (op->req->err && !op->told && !op->c->tnbc_err)
		op->c->tnbc_err = op->req->err;
	tg_tnbc_op_free(op);
}

/* Under tg.lock: waits (polling) until op's messages have completed
 * and its data has landed, then opens its ranges. */
static void tg_tnbc_finish(struct tg_tnbc_op *op)
{
	unsigned spins = 0;

	while (!tg_req_done(op->req) || !tg_tnbc_landed(op)) {
		if (tg_poll_held())
			continue;
		if (++spins > 64)
			sched_yield();
	}
	tg_tnbc_free(op);
}

void tg_tnbc_reap(struct tg_comm *c, bool wait)
{
	struct tg_tnbc_op **pp = &tg.tnbc;

	while (*pp) {
		struct tg_tnbc_op *op = *pp;
		bool go = false;

		if (wait) {
			go = !c || op->c == c;
		} else if (tg_req_done(op->req) && tg_tnbc_landed(op)) {
			go = true;
			for (int i = 0; i < op->nr && go; i++)
				go = !op->r[i].g ||
				     tg_guard_is_open(op->r[i].g);
		}
		if (!go) {
			pp = &op->next;
			continue;
		}
		*pp = op->next;
		tg_tnbc_finish(op);
	}
}

/* ------------------------------------------------------------------ */
/* The layout of the receive buffer                                     */

static int tg_msg_cmp(const void *a, const void *b)
{
	const struct tg_tnbc_msg *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * The ranges: walks the pages that runs of adjacent messages cover
 * completely, and starts a range wherever the messages landing in a
 * page change.  op->m sorted, op->r sized for the worst case (3 per
 * message).
 */
static void tg_tnbc_ranges(struct tg_tnbc_op *op, uintptr_t base, size_t pg,
			   int self)
{
	int j = 0;

	op->nr = 0;
	while (j < op->n) {
		/* a run: messages that follow one another without a gap */
		int a = j;
		uintptr_t s = base + op->m[j].off, e = s + op->m[j].len;

		while (j + 1 < op->n && op->m[j + 1].off == e - base) {
			j++;
			e += op->m[j].len;
		}
		j++;
		uintptr_t p = (s + pg - 1) / pg * pg, end = e / pg * pg;
		int lo = a;

		for (; p < end; p += pg) {
			int mlo, mhi;

			/* the messages overlapping [p, p + pg) */
			while (base + op->m[lo].off + op->m[lo].len <= p)
				lo++;
			mlo = lo;
			mhi = lo;
			while (mhi < j && base + op->m[mhi].off < p + pg)
				mhi++;
			/* pages of the own slice alone need no guard: it is
			 * copied in place before the call returns, without
			 * fresh staging pages to fault in and move */
			if (mhi == mlo + 1 && op->m[mlo].src == self)
				continue;
			if (op->nr && op->r[op->nr - 1].hi == p &&
			    op->r[op->nr - 1].mlo == mlo &&
			    op->r[op->nr - 1].mhi == mhi) {
				op->r[op->nr - 1].hi = p + pg;
				continue;
			}
			op->r[op->nr++] = (struct tg_tnbc_rng){
				.lo = p, .hi = p + pg, .mlo = mlo, .mhi = mhi};
		}
	}
}

/* Message j's pieces: staging where a guarded range takes it, in place
 * elsewhere (and then the call waits for it). */
static int tg_tnbc_pieces(struct tg_tnbc_op *op, int j, uintptr_t base)
{
	struct tg_tnbc_msg *m = &op->m[j];
	uintptr_t s = base + m->off, e = s + m->len, at = s;
	size_t k = 0;

	for (int i = 0; i < op->nr && at < e; i++) {
		const struct tg_tnbc_rng *r = &op->r[i];

		if (r->hi <= at || !r->stage)
			continue;
		if (r->lo >= e)
			break;
		if (r->lo > at) { /* in place, up to the range */
			if (k == TG_TNBC_IOV)
				return -FI_E2BIG;
			m->iov[k++] = (struct iovec){(void *)at, r->lo - at};
			m->wait = true;
			at = r->lo;
		}

		uintptr_t stop = e < r->hi ? e : r->hi;

		if (k == TG_TNBC_IOV)
			return -FI_E2BIG;
		m->iov[k++] = (struct iovec){(char *)r->stage + (at - r->lo),
					     stop - at};
		at = stop;
	}
	if (at < e) {
		if (k == TG_TNBC_IOV)
			return -FI_E2BIG;
		m->iov[k++] = (struct iovec){(void *)at, e - at};
		m->wait = true;
	}
	m->t.msg.iov_count = k;
	return 0;
}

static void tg_tnbc_scatter(const struct tg_tnbc_msg *m, const char *src)
{
	for (size_t k = 0; k < m->t.msg.iov_count; k++) {
		memcpy(m->iov[k].iov_base, src, m->iov[k].iov_len);
		src += m->iov[k].iov_len;
	}
}

/* ------------------------------------------------------------------ */
/* The call                                                             */

/* Posts message j's receive and the copy step behind it, which writes
 * the ready word after that many completions on the message's counter
 * (its receive, and a broadcast's forwards of it). */
static int tg_tnbc_post_recv(struct tg_tnbc_op *op, int j, uint64_t tag,
			     uint64_t after)
{
	struct tg_tnbc_msg *m = &op->m[j];
	int ret;

	m->k = tg_cntr_get();
	if (!m->k)
		return -FI_ENOMEM;
	m->cp = (struct fi_tnbc_op_copy){.size = sizeof(m->cp),
					 .dst = &op->ready[j],
					 .src = &tg_tnbc_one,
					 .len = sizeof(op->ready[j])};
	m->cw = (struct fi_deferred_work){.threshold = after,
					  .triggering_cntr = m->k};
	fi_tnbc_work_copy(&m->cw, &m->cp);
	ret = fi_control(&tg.domain->fid, FI_QUEUE_WORK, &m->cw);
	if (ret)
		return ret;
	m->t.ep = tg.ep;
	m->t.msg.msg_iov = m->iov;
	m->t.msg.addr = (fi_addr_t)op->c->world[m->src];
	m->t.msg.tag = tag;
	m->t.flags = FI_COMPLETION;
	m->w = (struct fi_deferred_work){.threshold = 0,
					 .triggering_cntr = tg.go,
					 .completion_cntr = m->k,
					 .op_type = FI_OP_TRECV,
					 .op.tagged = &m->t};
	m->w.context.internal[0] = op->req;
	while ((ret = fi_control(&tg.domain->fid, FI_QUEUE_WORK, &m->w)) ==
	       -FI_EAGAIN)
		tg_poll_held();
	return ret;
}

/* The trace's variables, read by the first call; under tg.lock. */
static void tg_tnbc_env(void)
{
	const char *v;

	if (tg_tr.init)
		return;
	tg_tr.init = true;
	v = getenv("TNBC_MPI_TNBC_TRACE");
	tg_tr.trace = v && *v ? v : NULL;
	v = getenv("TNBC_MPI_TNBC_ORDER");
	tg_tr.replay = v && *v ? v : NULL;
	v = getenv("TNBC_MPI_TNBC_SKIP");
	tg_tr.skip = v && *v ? v : NULL;
	v = getenv("TNBC_MPI_TNBC_VERDICTS");
	tg_tr.verdicts = v && *v ? v : NULL;
	if (tg_tr.verdicts)
		tg_verdicts_load();
}

/* Under tg.lock: c's trial at site key, made on first use (NULL: no
 * memory). */
static struct tg_adapt *tg_tnbc_trial(struct tg_comm *c, const char *key)
{
	struct tg_tnbc_site *s;

	for (s = c->sites; s; s = s->next)
		if (!strcmp(s->key, key))
			return &s->ad;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	snprintf(s->key, sizeof(s->key), "%s", key);
	{
		const struct tg_verdict *v = tg_verdict_find(key, c->id, false);

		s->told = v != NULL; /* an earlier run's verdict: no trial */
		if (v)
			tg_adapt_tell(&s->ad, (enum tg_way)v->way, v->ms);
		else
			tg_adapt_init(&s->ad);
	}
	s->next = c->sites;
	c->sites = s;
	return &s->ad;
}

void tg_tnbc_comm_fini(struct tg_comm *c)
{
	tg_verdicts_take(c);
	while (c->sites) {
		struct tg_tnbc_site *s = c->sites;

		c->sites = s->next;
		free(s);
	}
}

/* Under tg.lock: finishes c's T-NBC calls made at site key (their data
 * landed, their ranges opened), and no other's: a site that kept T-NBC
 * goes on overlapping while another tries. */
static void tg_tnbc_reap_site(struct tg_comm *c, const char *key)
{
	struct tg_tnbc_op **pp = &tg.tnbc;

	while (*pp) {
		struct tg_tnbc_op *op = *pp;

		if (op->c != c || strcmp(op->site, key)) {
			pp = &op->next;
			continue;
		}
		*pp = op->next;
		tg_tnbc_finish(op);
	}
}

/*
 * The way of a call of fn at site key on c (tg_adapt.h): T-NBC, or the
 * plain way while T-NBC is tried there or where it lost.  A T-NBC call
 * before it at the site, while trying, is finished first, so that what
 * T-NBC left to wait for counts in its own period.  Tracing, every call
 * is T-NBC: the trace is of T-NBC's reads.  Under tg.lock.
 */
static enum tg_way tg_tnbc_way(struct tg_comm *c, enum tg_fn fn,
			       const char *key)
{
	unsigned trials = tg_policy_tnbc_trials();
	struct tg_adapt *a;
	enum tg_way way;

	tg_tnbc_env();
	if (!trials || tg_tr.trace)
		return TG_WAY_TNBC;
	a = tg_tnbc_trial(c, key);
	if (!a)
		return TG_WAY_TNBC; /* no room to keep score: as asked */
	if (tg_adapt_settle_first(a))
		tg_tnbc_reap_site(c, key);
	way = tg_adapt_pick(a, tg_now(), trials);
	if (way == TG_WAY_PLAIN)
		tg_count_plain(fn);
	return way;
}

/* Under tg.lock, before a call takes a send copy: earlier calls whose
 * completions wait in the queue are finished, their copies kept for it.
 * A rank that returned before its sends completed found them unread at
 * its next call, took a fresh copy every call, and faulted it in: 7 ms
 * of a 10 ms call of an 8 MiB alltoallv at 2 ranks. */
static void tg_tnbc_tidy(void)
{
	if (!tg.tnbc)
		return;
	tg_poll_held();
	tg_tnbc_reap(NULL, false);
}

/* Under tg.lock, at the start of op's call: c joined, the fault
 * handler and the go counter there, finished calls reaped, room for one
 * more; op traced or not. */
static int tg_tnbc_enter(struct tg_comm *c, struct tg_tnbc_op *op)
{
	int ret = tg_comm_join(c), nops = 0;

	tg_tnbc_env();
	/* without them, every send at the default priority */
	if (!ret && !tg_tr.ops_tried) {
		tg_tr.ops_tried = true;
		if (fi_open_ops(&tg.ep->fid, FI_TNBC_EP_OPS_1, 0,
				(void **)&tg_tr.ep_ops, NULL) ||
		    tg_tr.ep_ops->size < sizeof(*tg_tr.ep_ops))
			tg_tr.ep_ops = NULL;
	}

	if (!ret && !tg_tnbc_guard_on) {
		/* the fault handler, installed by the first call */
		static pthread_once_t once = PTHREAD_ONCE_INIT;

		ret = tg_guard_init() ? -FI_EOTHER : 0;
		tg_tnbc_guard_on = !ret;
		pthread_once(&once, tg_tnbc_atfork);
	}
	if (!ret)
		ret = tg_go_open();
	if (ret)
		return ret;
	tg_tnbc_reap(NULL, false);
	for (struct tg_tnbc_op *o = tg.tnbc; o; o = o->next)
		nops++;
	if (nops >= TG_TNBC_MAX_OPS) {
		struct tg_tnbc_op **pp = &tg.tnbc;

		while ((*pp)->next)
			pp = &(*pp)->next;
		tg_tnbc_finish(*pp);
		*pp = NULL;
	}
	op->trace = tg_tr.trace != NULL;
	return 0;
}

/* Under tg.lock: ranges of earlier calls in [lo, hi) leave the guard
 * (their data landed and opened first), so that a new call can guard
 * the same pages even while the old one's sends are still going. */
static void tg_tnbc_release_overlap(uintptr_t lo, uintptr_t hi)
{
	for (struct tg_tnbc_op *o = tg.tnbc; o; o = o->next)
		for (int i = 0; i < o->nr; i++) {
			struct tg_tnbc_rng *r = &o->r[i];

			if (r->g && r->lo < hi && r->hi > lo) {
				r->touched = tg_guard_touched(r->g);
				tg_guard_release(r->g);
				r->g = NULL;
			}
		}
}

/* Guards op's ranges, all or none (a range the guard refuses, at the
 * kernel's map count, makes the call a plain blocking one, the buffer
 * as it was), and lays each message out on them. */
static void tg_tnbc_guard(struct tg_tnbc_op *op, void *rbuf)
{
	for (int i = 0; i < op->nr; i++) {
		struct tg_tnbc_rng *r = &op->r[i];

		if (!tg_guard_protect(
			    (void *)r->lo, r->hi - r->lo, &op->ready[r->mlo],
			    (unsigned)(r->mhi - r->mlo), &r->stage, &r->g))
			continue;
		while (i--)
			tg_guard_abandon(op->r[i].g);
		op->nr = 0;
		break;
	}
	for (int j = 0; j < op->n; j++) {
		if (tg_tnbc_pieces(op, j, (uintptr_t)rbuf)) {
			/* cannot happen (TG_TNBC_IOV): then in place */
			for (int i = 0; i < op->nr; i++)
				tg_guard_abandon(op->r[i].g);
			op->nr = 0;
			j = -1;
		}
	}
}

/*
 * After the posts, with tg.lock let go: waits for the messages that land
 * on foreign pages (all of them when tracing); whether any other is
 * still on its way.  The wait polls: on two cores a wait that left the
 * moving to the engines and yielded made a 1 MiB alltoall of 2 ranks
 * take 2 ms in the call instead of 0.65 (the engines' naps and wake-ups
 * in the path); what a poll moves meanwhile is moved.
 */
static bool tg_tnbc_settle(struct tg_tnbc_op *op)
{
	bool early = false;

	for (int j = 0; j < op->n; j++) {
		unsigned spins = 0;

		/* tracing, the call lets everything land: the reads it
		 * records are the program's order, not the arrivals' */
		if (!op->m[j].wait && !op->trace)
			continue;
		while (!atomic_load_explicit(&op->ready[j],
					     memory_order_acquire)) {
			/* a pass at a time: a poll that read completions
			 * until none were left ran the pass that made the
			 * edges' words ready and then the next, which read
			 * the body the call need not wait for */
			if (tg_poll_once())
				continue;
			tg_idle_look(&spins);
		}
	}
	for (int j = 0; j < op->n && !early; j++)
		early = !atomic_load_explicit(&op->ready[j],
					      memory_order_acquire);
	op->t_ret = tg_now();
	return early;
}

/* Under tg.lock, after the posts: what was not posted will not
 * complete (a failed post fails the call once the rest has), and op
 * goes on the list. */
static void tg_tnbc_posted(struct tg_tnbc_op *op, int expect, int posted,
			   int err)
{
	if (err) {
		op->broken = true;
		atomic_fetch_sub(&op->req->left, expect - posted);
	}
	tg_req_part_done(op->req, err);
	op->next = tg.tnbc;
	tg.tnbc = op;
}

/* A call some of whose posts failed, with tg.lock let go: once what was
 * posted has completed (nothing writes to a staging area any more), the
 * ranges open as they are, their missing data lost, and the error waits
 * for the front-end (tg_tnbc_error), which fails the call. */
static void tg_tnbc_broken(struct tg_tnbc_op *op)
{
	tg_req_wait(op->req);
	for (int j = 0; j < op->n; j++)
		atomic_store(&op->ready[j], 1);
	pthread_mutex_lock(&tg.lock);
	if (!op->c->tnbc_err)
		op->c->tnbc_err = op->req->err ? op->req->err : -FI_EIO;
	op->told = true;
	pthread_mutex_unlock(&tg.lock);
}

/* The end of a call, tg.lock held on entry: op goes on the list, the
 * engine is told (bytes: the call's largest message), a call some of
 * whose posts failed is finished, and the data the call waits for is
 * waited for; whether some is still on its way. */
static bool tg_tnbc_launch(struct tg_tnbc_op *op, int expect, int posted,
			   int err, size_t bytes)
{
	bool early;

	tg_tnbc_posted(op, expect, posted, err);
	pthread_mutex_unlock(&tg.lock);
	tg_handoff(bytes);
	if (err)
		tg_tnbc_broken(op);
	early = tg_tnbc_settle(op);
	/* what the wait's polls left (a large read held for the pass after
	 * the ready words, tnbc's progress) is the engine's now */
	if (early)
		tg_handoff(bytes);
	return early;
}

int tg_tnbc_alltoallv(struct tg_comm *c, int fn, const void *site,
		      const void *sbuf, const size_t *scounts,
		      const size_t *sdispls, void *rbuf, const size_t *rcounts,
		      const size_t *rdispls, bool *early)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), rlo = SIZE_MAX, rhi = 0;
	size_t slo = SIZE_MAX, shi = 0, stot = 0, maxmsg = 0;
	const char *src;
	struct tg_tnbc_op *op;
	int ret, me = c->rank, parts = 1, self = -1, posted = 0;
	bool packself = false;
	uint64_t tag;
	char key[sizeof(op->site)];
	enum tg_way way;

	*early = false;
	if (!tg.ready)
		return -FI_EOPBADSTATE;
	tg_tnbc_site_key(key, sizeof(key), tg_fn_name((enum tg_fn)fn), site);
	pthread_mutex_lock(&tg.lock);
	way = tg_tnbc_way(c, (enum tg_fn)fn, key);
	if (way == TG_WAY_TNBC)
		tg_tnbc_tidy();
	pthread_mutex_unlock(&tg.lock);
	if (way == TG_WAY_PLAIN)
		return TG_TNBC_PLAIN;
	if (!sbuf) { /* in place: the sends come from the receive buffer */
		packself = true;
		sbuf = rbuf;
		scounts = rcounts;
		sdispls = rdispls;
	}
	for (int i = 0; i < c->size; i++) {
		if (rcounts[i]) {
			rlo = rdispls[i] < rlo ? rdispls[i] : rlo;
			if (rdispls[i] + rcounts[i] > rhi)
				rhi = rdispls[i] + rcounts[i];
			/* the handoffs' size: a rank that sends little may
			 * have large reads left to the engine */
			maxmsg = rcounts[i] > maxmsg ? rcounts[i] : maxmsg;
		}
		if (scounts[i]) {
			slo = sdispls[i] < slo ? sdispls[i] : slo;
			if (sdispls[i] + scounts[i] > shi)
				shi = sdispls[i] + scounts[i];
			stot += scounts[i];
			maxmsg = scounts[i] > maxmsg ? scounts[i] : maxmsg;
		}
	}
	/* what earlier calls guard in the send data opens before the copy
	 * (the receive buffer's leaves the guard below) */
	if (shi)
		tg_guard_open_overlap((const char *)sbuf + slo, shi - slo);

	op = calloc(1, sizeof(*op));
	if (!op)
		return -FI_ENOMEM;
	op->req = tg_req_new(NULL);
	op->m = calloc(TG_A2A_TAGS * (size_t)c->size, sizeof(*op->m));
	op->ready = calloc(TG_A2A_TAGS * (size_t)c->size, sizeof(*op->ready));
	op->r = calloc(3 * TG_A2A_TAGS * (size_t)c->size, sizeof(*op->r));
	if (!packself)
		stot -= scounts[me];
	op->scopy = tg_scopy_get(stot ? stot : 1);
	if (!op->req || !op->m || !op->ready || !op->r || !op->scopy) {
		ret = -FI_ENOMEM;
		goto err_free;
	}
	op->c = c;
	memcpy(op->site, key, sizeof(key));
	/* the send data, packed in rank order; the own slice goes from the
	 * program's buffer straight to its place, except in place (it is in
	 * the buffer about to be protected): copying it twice made an 8 MiB
	 * slice cost 1 ms more */
	{
		char *d = op->scopy;

		for (int i = 0; i < c->size; i++) {
			if (i == me && !packself)
				continue;
			memcpy(d, (const char *)sbuf + sdispls[i], scounts[i]);
			d += scounts[i];
		}
	}
	/* a message per piece; the own slice whole, and empty pieces
	 * received apart (nothing lands) */
	for (int i = 0; i < c->size; i++) {
		struct tg_a2a_piece p[TG_A2A_TAGS];
		int np = rcounts[i] ? tg_a2a_cut(rcounts[i], true, p) : 0;

		if (i == me && np) {
			np = 1;
			p[0] = (struct tg_a2a_piece){0, rcounts[i], 0, true};
		}
		for (int q = 0; q < np; q++) {
			if (!p[q].len) {
				parts++;
				continue;
			}
			op->m[op->n++] = (struct tg_tnbc_msg){
				.off = rdispls[i] + p[q].off,
				.len = p[q].len,
				.src = i,
				.piece = p[q].piece};
		}
	}
	qsort(op->m, (size_t)op->n, sizeof(*op->m), tg_msg_cmp);
	for (int j = 0; j + 1 < op->n; j++)
		if (op->m[j].off + op->m[j].len > op->m[j + 1].off) {
			ret = -FI_EINVAL; /* overlapping receives: MPI's to
					     judge */
			goto err_free;
		}

	pthread_mutex_lock(&tg.lock);
	ret = tg_tnbc_enter(c, op);
	if (ret)
		goto err_unlock;
	if (rhi)
		tg_tnbc_release_overlap((uintptr_t)rbuf + rlo,
					(uintptr_t)rbuf + rhi);
	tg_tnbc_ranges(op, (uintptr_t)rbuf, pg, me);
	if (tg_tr.skip && tg_tnbc_skipped(op->site))
		op->nr = 0; /* opted out: everything lands in place */
	tg_tnbc_guard(op, rbuf);
	for (int j = 0; j < op->n; j++) {
		if (op->m[j].src == me)
			self = j;
		else
			parts++;
	}
	for (int i = 0; i < c->size; i++)
		if (i != me)
			parts += tg_a2a_nparts(scounts[i], true);
	tag = (uint64_t)c->id << 32 | c->seq;
	c->seq += TG_A2A_TAGS;
	tg_req_posted(op->req, c, parts);
	/* From here on the others go on with the exchange: a post that
	 * fails fails the call once what was posted has completed. */
	if (self >= 0) {
		src = (const char *)op->scopy;
		for (int i = 0; i < me; i++)
			src += scounts[i];
		if (!packself)
			src = (const char *)sbuf + sdispls[me];
		tg_tnbc_scatter(&op->m[self], src);
		atomic_store(&op->ready[self], 1);
	}
	for (int j = 0; j < op->n && !ret; j++) {
		if (j == self)
			continue;
		ret = tg_tnbc_post_recv(op, j, tg_a2a_tag(tag, op->m[j].piece),
					1);
		posted += !ret;
	}
	for (int i = 0; i < c->size && !ret; i++) {
		struct tg_a2a_piece p[TG_A2A_TAGS];
		int np = i != me && rcounts[i] ? tg_a2a_cut(rcounts[i], true, p)
					       : 0;

		for (int q = 0; q < np && !ret; q++) {
			if (p[q].len)
				continue;
			ret = TG_POST(fi_trecv(
				tg.ep, NULL, 0, NULL, (fi_addr_t)c->world[i],
				tg_a2a_tag(tag, p[q].piece), 0, op->req));
			posted += !ret;
		}
	}
	/* the sends start in the call (not deferred to the engine): the
	 * call waits for some of the data anyway, and leaving the sends to
	 * the engine's wake-up made a 1 MiB alltoall of 2 ranks take 1.96
	 * ms in the call instead of 0.76.  The edges first: the calls of
	 * members whose buffers share a page with other data wait for
	 * them. */
	for (int pass = 0; pass < 2; pass++) {
		src = (const char *)op->scopy;
		for (int i = 0; i < c->size && !ret; i++) {
			if (i != me && scounts[i]) {
				if (tg_tr.ep_ops)
					tg_tr.ep_ops->set_priority(
						tg.ep, tg_tnbc_prio(op, i));
				ret = tg_a2a_send(c, i, src, scounts[i], true,
						  pass, tag, op->req, &posted);
			}
			if (i != me || packself)
				src += scounts[i];
		}
	}
	if (tg_tr.ep_ops)
		tg_tr.ep_ops->set_priority(tg.ep, FI_TNBC_PRIO_DEFAULT);
	*early = tg_tnbc_launch(op, parts - 1, posted, ret, maxmsg);
	return 0;

err_unlock:
	pthread_mutex_unlock(&tg.lock);
err_free:
	tg_tnbc_op_free(op);
	return ret;
}

/*
 * The broadcast: the buffer cut into pieces by offset (the same on every
 * member, whatever its alignment), sent down a binomial tree rooted at
 * root.  A member's pieces are its messages, laid out on its own pages
 * as an alltoall's are; each piece's forwards to the children are
 * deferred sends triggered by its receive, from where it landed, and
 * its ready word waits for them too (the staging pages must stay until
 * the last forward has read them).  The root copies the buffer and
 * sends the first piece and the last two first: they land on the pages
 * a member's call waits for.
 */
int tg_tnbc_bcast(struct tg_comm *c, const void *site, void *buf, size_t bytes,
		  int root, size_t piece, bool *early)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), np;
	int n = c->size, vr = (c->rank - root + n) % n, nk = 0, ret;
	int kids[32], parent = -1, parts = 1, posted = 0;
	struct tg_tnbc_op *op;
	uint64_t tag;
	enum tg_way way;

	*early = false;
	if (!tg.ready)
		return -FI_EOPBADSTATE;
	if (!bytes)
		return -FI_EINVAL;
	piece = piece ? piece : bytes;
	np = (bytes + piece - 1) / piece;
	if (np > UINT32_MAX / 2)
		return -FI_EINVAL;
	if (vr)
		parent = ((vr & (vr - 1)) + root) % n;
	for (int mask = 1; mask < n && !(vr & mask); mask <<= 1)
		if (vr + mask < n)
			kids[nk++] = (vr + mask + root) % n;

	op = calloc(1, sizeof(*op));
	if (!op)
		return -FI_ENOMEM;
	op->req = tg_req_new(NULL);
	op->c = c;
	tg_tnbc_site_key(op->site, sizeof(op->site), "MPI_Bcast", site);
	if (!vr) {
		pthread_mutex_lock(&tg.lock);
		tg_tnbc_tidy();
		pthread_mutex_unlock(&tg.lock);
		op->scopy = tg_scopy_get(bytes);
	} else {
		op->m = calloc(np, sizeof(*op->m));
		op->ready = calloc(np, sizeof(*op->ready));
		op->r = calloc(3 * np, sizeof(*op->r));
		op->fwd = calloc(np * (size_t)(nk ? nk : 1), sizeof(*op->fwd));
	}
	if (!op->req || (!vr && !op->scopy) ||
	    (vr && (!op->m || !op->ready || !op->r || !op->fwd))) {
		ret = -FI_ENOMEM;
		goto err_free;
	}
	pthread_mutex_lock(&tg.lock);
	/* a member's plain way is T-NBC's messages with nothing guarded:
	 * the others' way is theirs to choose; the root guards nothing
	 * either way, and tries nothing */
	way = vr ? tg_tnbc_way(c, TG_BCAST, op->site) : TG_WAY_TNBC;
	ret = tg_tnbc_enter(c, op);
	if (ret)
		goto err_unlock;
	/* what earlier calls guard here leaves the guard (the root's
	 * data opens before its copy) */
	tg_tnbc_release_overlap((uintptr_t)buf, (uintptr_t)buf + bytes);
	if (!vr)
		memcpy(op->scopy, buf, bytes);
	tag = (uint64_t)c->id << 32;
	tag |= c->seq;
	c->seq += (uint32_t)np;
	if (!vr) {
		/* the root: the first and last pieces first */
		parts += (int)np * nk;
		tg_req_posted(op->req, c, parts);
		for (size_t q = 0; q < np; q++) {
			/* 0, np - 1, np - 2, then 1 ...: a member's first
			 * page lies in piece 0, its last in the last piece
			 * and, when that is short, the one before */
			size_t p = q == 0	      ? 0
				   : q <= 2 && np > 3 ? np - q
				   : np > 3	      ? q - 2
						      : q;
			size_t off = p * piece,
			       len = bytes - off < piece ? bytes - off : piece;

			for (int k = 0; k < nk && !ret; k++) {
				ret = TG_POST(fi_tsend(
					tg.ep, (char *)op->scopy + off, len,
					NULL, (fi_addr_t)c->world[kids[k]],
					tag + p, op->req));
				posted += !ret;
			}
		}
		goto posted;
	}
	for (size_t p = 0; p < np; p++)
		op->m[op->n++] = (struct tg_tnbc_msg){
			.off = p * piece,
			.len = bytes - p * piece < piece ? bytes - p * piece
							 : piece,
			.src = parent};
	tg_tnbc_ranges(op, (uintptr_t)buf, pg, -1);
	if (way == TG_WAY_PLAIN || (tg_tr.skip && tg_tnbc_skipped(op->site)))
		op->nr = 0;
	tg_tnbc_guard(op, buf);
	parts += (int)np * (1 + nk);
	tg_req_posted(op->req, c, parts);
	for (int j = 0; j < op->n && !ret; j++) {
		struct tg_tnbc_msg *m = &op->m[j];

		ret = tg_tnbc_post_recv(op, j, tag + (uint64_t)j,
					1 + (uint64_t)nk);
		posted += !ret;
		for (int k = 0; k < nk && !ret; k++) {
			struct tg_tnbc_fwd *f = &op->fwd[(size_t)j * nk + k];

			f->t = m->t;
			f->t.msg.addr = (fi_addr_t)c->world[kids[k]];
			f->w = (struct fi_deferred_work){
				.threshold = 1,
				.triggering_cntr = m->k,
				.completion_cntr = m->k,
				.op_type = FI_OP_TSEND,
				.op.tagged = &f->t};
			f->w.context.internal[0] = op->req;
			while ((ret = fi_control(&tg.domain->fid, FI_QUEUE_WORK,
						 &f->w)) == -FI_EAGAIN)
				tg_poll_held();
			posted += !ret;
		}
	}
posted:
	*early = tg_tnbc_launch(op, parts - 1, posted, ret, piece);
	return 0;

err_unlock:
	pthread_mutex_unlock(&tg.lock);
err_free:
	tg_tnbc_op_free(op);
	return ret;
}

int tg_tnbc_error(struct tg_comm *c)
{
	int err;

	pthread_mutex_lock(&tg.lock);
	tg_tnbc_reap(NULL, false);
	err = c->tnbc_err;
	c->tnbc_err = 0;
	pthread_mutex_unlock(&tg.lock);
	return err;
}

void tg_tnbc_open(const void *buf, size_t len)
{
	tg_guard_open_overlap(buf, len);
}

bool tg_tnbc_guarding(void)
{
	return tg_guard_any();
}

uint64_t tg_tnbc_wait_ns(void)
{
	return tg_guard_wait_ns();
}

uint64_t tg_tnbc_faults(void)
{
	return tg_guard_faults();
}

void tg_tnbc_report(void)
{
	pthread_mutex_lock(&tg.lock);
	for (struct tg_comm *c = tg.all; c; c = c->all_next)
		for (struct tg_tnbc_site *s = c->sites; s; s = s->next) {
			const struct tg_adapt *a = &s->ad;

			fprintf(stderr,
				"tnbc-mpi: T-NBC at %s comm %u: %s (a period "
				"%.3f ms with T-NBC, %.3f plain; rank %d%s)\n",
				s->key, c->id,
				a->verdict == TG_WAY_TNBC    ? "kept"
				: a->verdict == TG_WAY_PLAIN ? "left"
							     : "trying",
				tg_adapt_mean_ms(a, TG_WAY_TNBC),
				tg_adapt_mean_ms(a, TG_WAY_PLAIN), tg.rank,
				s->told ? "; an earlier run's verdict" : "");
		}
	pthread_mutex_unlock(&tg.lock);
}

/*
 * Memory given back while T-NBC guards part of it: malloc hands it out
 * again, and a later write by the kernel there (read(2), a peer's
 * single-copy write) would fail on a page still protected.  free and
 * realloc (interposed here, the glue being preloaded or linked before
 * libc) open what they give back first, then call the allocator that
 * comes next (libc's, or one the program brought); with nothing guarded
 * that costs one load.  munmap is not interposed: a program that unmaps
 * a buffer it never read after a T-NBC call must open it first
 * (tnbc-mpi(7)).
 */
void __libc_free(void *p);
void *__libc_realloc(void *p, size_t n);

static struct {
	void (*free)(void *);
	void *(*realloc)(void *, size_t);
	size_t (*usable)(void *);
} tg_next;
static _Thread_local bool tg_next_busy;

/* The next allocator's functions, found once; a free inside the lookup
 * itself is libc's (dlsym allocates only from libc). */
static bool tg_next_init(void)
{
	if (tg_next.free)
		return true;
	if (tg_next_busy)
		return false;
	tg_next_busy = true;
	tg_next.usable =
		(size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
	tg_next.realloc =
		(void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	tg_next.free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	tg_next_busy = false;
	return tg_next.free && tg_next.realloc;
}

static void tg_open_block(void *p)
{
	if (p && tg_guard_any() && tg_next.usable)
		tg_guard_open_overlap(p, tg_next.usable(p));
}

void free(void *p)
{
	if (!tg_next_init()) {
		__libc_free(p);
		return;
	}
	tg_open_block(p);
	tg_next.free(p);
}

void *realloc(void *p, size_t n)
{
	if (!tg_next_init())
		return __libc_realloc(p, n);
	tg_open_block(p);
	return tg_next.realloc(p, n);
}
