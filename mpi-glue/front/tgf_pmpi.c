/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The PMPI front-end: start and end, communicators, and the handles of a
 * call turned into the core's terms.  The collectives themselves are in
 * tgf_coll.c.
 *
 * Every path that cannot offload calls the PMPI_ function with the very
 * arguments it got: correct first, always.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tgf_coll.h"
#include "tgf_req.h"

static int tgf_key = MPI_KEYVAL_INVALID;
static bool tgf_nb_ok; /* non-blocking calls have a completion path */
static struct tgf_comm tgf_world_state = {.id = 1};
static struct tgf_comm tgf_self_state = {.id = 2};

/* ------------------------------------------------------------------ */
/* Communicators                                                        */

static int tgf_attr_delete(MPI_Comm comm, int key, void *val, void *extra)
{
	struct tgf_comm *fc = val;

	(void)comm;
	(void)key;
	(void)extra;
	tg_comm_free(fc->tc);
	fc->tc = NULL;
	if (fc != &tgf_world_state && fc != &tgf_self_state)
		free(fc);
	return MPI_SUCCESS;
}

static struct tgf_comm *tgf_idup_claim(MPI_Comm comm);

struct tgf_comm *tgf_comm(MPI_Comm comm)
{
	struct tgf_comm *fc;
	int flag = 0;

	if (comm == MPI_COMM_NULL || tgf_key == MPI_KEYVAL_INVALID)
		return NULL;
	if (PMPI_Comm_get_attr(comm, tgf_key, &fc, &flag) != MPI_SUCCESS)
		return NULL;
	return flag ? fc : tgf_idup_claim(comm);
}

bool tgf_nb_enabled(void)
{
	return tgf_nb_ok;
}

/* The world ranks of comm's members, in its rank order: found locally. */
static int *tgf_world_ranks(MPI_Comm comm, int *n)
{
	MPI_Group g, wg;
	int *ranks, *world;

	if (PMPI_Comm_size(comm, n) != MPI_SUCCESS)
		return NULL;
	ranks = malloc((size_t)*n * sizeof(int));
	world = malloc((size_t)*n * sizeof(int));
	if (!ranks || !world)
		goto err;
	for (int i = 0; i < *n; i++)
		ranks[i] = i;
	PMPI_Comm_group(comm, &g);
	PMPI_Comm_group(MPI_COMM_WORLD, &wg);
	PMPI_Group_translate_ranks(g, *n, ranks, wg, world);
	PMPI_Group_free(&g);
	PMPI_Group_free(&wg);
	free(ranks);
	for (int i = 0; i < *n; i++)
		if (world[i] == MPI_UNDEFINED) { /* spawned or connected */
			free(world);
			return NULL;
		}
	return world;
err:
	free(ranks);
	free(world);
	return NULL;
}

static void tgf_comm_attach(MPI_Comm comm, struct tgf_comm *fc)
{
	int inter = 0, n = 0, *world;

	PMPI_Comm_test_inter(comm, &inter);
	if (!inter && tg_ready()) {
		world = tgf_world_ranks(comm, &n);
		if (world)
			fc->tc = tg_comm_new(fc->id, world, n);
		free(world);
	}
	PMPI_Comm_set_attr(comm, tgf_key, fc);
}

static void tgf_comm_name(MPI_Comm newcomm, uint32_t id)
{
	struct tgf_comm *fc;

	/* no key: the glue never started (a program of MPI sessions
	 * alone, which never calls MPI_Init); a communicator it cannot
	 * name falls back */
	if (newcomm == MPI_COMM_NULL || tgf_key == MPI_KEYVAL_INVALID)
		return;
	fc = calloc(1, sizeof(*fc));
	if (!fc)
		return; /* unnamed: it falls back */
	fc->id = id;
	tgf_comm_attach(newcomm, fc);
}

/* Whether ints l[0 .. k - 1], members of a group of n, name none twice. */
static bool tgf_once_each(const int *l, int k, int n)
{
	char *seen = calloc((size_t)n + 1, 1);
	bool ok = seen != NULL;

	for (int j = 0; ok && j < k; j++) {
		ok = l[j] >= 0 && l[j] < n && !seen[l[j]];
		if (ok)
			seen[l[j]] = 1;
	}
	free(seen);
	return ok;
}

/* This member's neighbour lists on a graph topology each name a member
 * at most once (MPI allows a multigraph; alltoallv's schedule moves one
 * block per member and direction). */
static bool tgf_graph_simple(MPI_Comm comm)
{
	int topo = MPI_UNDEFINED, n = 0, me = 0, in = 0, out = 0, w = 0;
	int *l = NULL, *wt = NULL;
	bool ok = false;

	if (PMPI_Topo_test(comm, &topo) != MPI_SUCCESS ||
	    PMPI_Comm_size(comm, &n) != MPI_SUCCESS ||
	    PMPI_Comm_rank(comm, &me) != MPI_SUCCESS)
		return false;
	if (topo == MPI_GRAPH) {
		if (PMPI_Graph_neighbors_count(comm, me, &in) != MPI_SUCCESS ||
		    in < 0)
			return false;
		l = malloc(((size_t)in + 1) * sizeof(int));
		ok = l &&
		     PMPI_Graph_neighbors(comm, me, in, l) == MPI_SUCCESS &&
		     tgf_once_each(l, in, n);
	} else if (topo == MPI_DIST_GRAPH) {
		if (PMPI_Dist_graph_neighbors_count(comm, &in, &out, &w) !=
			    MPI_SUCCESS ||
		    in < 0 || out < 0)
			return false;
		l = malloc(((size_t)in + (size_t)out + 1) * sizeof(int));
		/* the weights are not used, but an array always takes them */
		wt = malloc(((size_t)in + (size_t)out + 1) * sizeof(int));
		ok = l && wt &&
		     PMPI_Dist_graph_neighbors(comm, in, l, wt, out, l + in,
					       wt + in) == MPI_SUCCESS &&
		     tgf_once_each(l, in, n) && tgf_once_each(l + in, out, n);
	}
	free(l);
	free(wt);
	return ok;
}

/* After a graph constructor, on every member of newcomm: whether its
 * neighbourhood calls can be alltoallv's schedule, agreed by all, since
 * a member that fell back alone would leave the others waiting.  The
 * constructor is collective over newcomm already. */
static void tgf_graph_made(MPI_Comm newcomm)
{
	int ok, all = 0;
	struct tgf_comm *fc;

	if (newcomm == MPI_COMM_NULL || tgf_key == MPI_KEYVAL_INVALID ||
	    !tg_ready())
		return;
	ok = tgf_graph_simple(newcomm);
	if (PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, newcomm) !=
	    MPI_SUCCESS)
		return;
	fc = tgf_comm(newcomm);
	if (fc)
		fc->graph_ok = all;
}

void tgf_comm_made_graph(MPI_Comm parent, MPI_Comm newcomm)
{
	tgf_comm_made(parent, newcomm);
	tgf_graph_made(newcomm);
}

/* A duplicate keeps its parent's topology, and so its agreement. */
static void tgf_comm_made_dup(MPI_Comm parent, MPI_Comm newcomm)
{
	struct tgf_comm *p, *c;

	tgf_comm_made(parent, newcomm);
	p = tgf_comm(parent);
	c = tgf_comm(newcomm);
	if (p && c)
		c->graph_ok = p->graph_ok;
}

void tgf_comm_made(MPI_Comm parent, MPI_Comm newcomm)
{
	struct tgf_comm *p = tgf_comm(parent);

	/* every member of the parent counts the creation, those left out
	 * of the child too, so that the next child's name agrees */
	if (!p || !p->id)
		return;
	tgf_comm_name(newcomm, tg_comm_child_id(p->id, p->children++));
}

/*
 * MPI_Comm_create_group is collective over the new group only, so the
 * parent's count cannot name it.  Its name is the parent's, the tag, the
 * members' world ranks and how many groups of exactly those this process
 * made before with that tag: all alike on every member.
 */
struct tgf_cg {
	uint32_t key;
	uint32_t count;
	struct tgf_cg *next;
};
static struct tgf_cg *tgf_cgs;
/* MPI_THREAD_MULTIPLE: groups of one parent may be made by two threads
 * at once (each collective over its own group) */
static pthread_mutex_t tgf_cg_lock = PTHREAD_MUTEX_INITIALIZER;

static void tgf_comm_made_key(uint32_t seed, uint32_t tag, MPI_Comm newcomm)
{
	struct tgf_cg *cg;
	int *world, n = 0;
	uint32_t key;

	world = tgf_world_ranks(newcomm, &n);
	if (!world)
		return;
	key = tg_comm_child_id(seed, tag);
	for (int i = 0; i < n; i++)
		key = tg_comm_child_id(key, (uint32_t)world[i]);
	free(world);
	pthread_mutex_lock(&tgf_cg_lock);
	for (cg = tgf_cgs; cg && cg->key != key; cg = cg->next)
		;
	if (!cg) {
		cg = calloc(1, sizeof(*cg));
		if (!cg) {
			pthread_mutex_unlock(&tgf_cg_lock);
			return;
		}
		cg->key = key;
		cg->next = tgf_cgs;
		tgf_cgs = cg;
	}
	key = tg_comm_child_id(key, cg->count++);
	pthread_mutex_unlock(&tgf_cg_lock);
	tgf_comm_name(newcomm, key);
}

void tgf_comm_made_group(MPI_Comm parent, MPI_Group group, int tag,
			 MPI_Comm newcomm)
{
	struct tgf_comm *p = tgf_comm(parent);

	(void)group;
	if (!p || !p->id || newcomm == MPI_COMM_NULL)
		return;
	tgf_comm_made_key(p->id ^ 0x5bd1e995u, (uint32_t)tag, newcomm);
}

/*
 * MPI_Intercomm_merge: the two groups have no parent the glue names (an
 * intercommunicator falls back), so the name is made as create_group's
 * is, from a seed of its own and the members' world ranks in the new
 * order, with the count of merges of exactly those members: every one
 * of them takes part in each, so the counts agree.  Only where every
 * member is of this world (one spawned or connected falls back).
 */
void tgf_comm_made_merge(MPI_Comm newcomm)
{
	if (newcomm != MPI_COMM_NULL)
		tgf_comm_made_key(0x7f4a7c15u, 0, newcomm);
}

#if TGF_MPICH && MPI_VERSION >= 4
/*
 * MPI 4's MPI_Comm_create_from_group: no parent either, and the members
 * agree on a string tag instead; it seeds the name, which counts the
 * communicators of exactly those members made with that tag, each made
 * by all of them.
 */
void tgf_comm_made_from_group(const char *tag, size_t len, MPI_Comm newcomm)
{
	uint32_t seed = 0x2545f491u;

	if (!tag || newcomm == MPI_COMM_NULL)
		return;
	for (size_t i = 0; i < len; i++)
		seed = tg_comm_child_id(seed, (unsigned char)tag[i]);
	tgf_comm_made_key(seed, 0, newcomm);
}
#endif

/*
 * MPI_Comm_idup: the child's handle is set when the call returns (under
 * both MPIs), but the child may be used, its attribute set included,
 * only once the request completes, which the glue does not see.  So the
 * name is taken at the call, in order with the parent's other children,
 * and kept beside the handle; the child's first call through the glue
 * that finds no name claims it.  The world ranks kept guard against a
 * handle freed unseen (a Fortran MPI_Comm_free under Open MPI) and
 * reused by a communicator the glue cannot name.
 */
struct tgf_idup {
	MPI_Comm comm;
	uint32_t id;
	bool graph_ok;
	int n;
	int *world; /* NULL: a member outside this world */
	struct tgf_idup *next;
};
static struct tgf_idup *tgf_idups;
static _Atomic int tgf_nidups; /* read without the lock on every miss */
static pthread_mutex_t tgf_idup_lock = PTHREAD_MUTEX_INITIALIZER;

/* Unlinks comm's entry; the caller holds the lock and frees it. */
static struct tgf_idup *tgf_idup_take(MPI_Comm comm)
{
	for (struct tgf_idup **pp = &tgf_idups; *pp; pp = &(*pp)->next) {
		struct tgf_idup *d = *pp;

		if (d->comm == comm) {
			*pp = d->next;
			atomic_fetch_sub(&tgf_nidups, 1);
			return d;
		}
	}
	return NULL;
}

static void tgf_idup_free(struct tgf_idup *d)
{
	if (d)
		free(d->world);
	free(d);
}

static void tgf_idup_record(MPI_Comm parent, MPI_Comm newcomm)
{
	struct tgf_comm *p = tgf_comm(parent);
	struct tgf_idup *d;

	if (!p || !p->id)
		return;
	/* counted even where the record fails: the next child's name must
	 * agree on every member */
	d = calloc(1, sizeof(*d));
	if (d) {
		d->comm = newcomm;
		d->id = tg_comm_child_id(p->id, p->children);
		d->graph_ok = p->graph_ok;
		d->world = tgf_world_ranks(parent, &d->n);
	}
	p->children++;
	if (!d || newcomm == MPI_COMM_NULL) {
		tgf_idup_free(d);
		return;
	}
	pthread_mutex_lock(&tgf_idup_lock);
	tgf_idup_free(tgf_idup_take(newcomm)); /* a stale one, freed unseen */
	d->next = tgf_idups;
	tgf_idups = d;
	atomic_fetch_add(&tgf_nidups, 1);
	pthread_mutex_unlock(&tgf_idup_lock);
}

/* A communicator without the glue's attribute: the child of an idup,
 * named now, or NULL.  Under the lock, so that a second thread waits for
 * the name rather than falling back alone. */
static struct tgf_comm *tgf_idup_claim(MPI_Comm comm)
{
	struct tgf_comm *fc = NULL;
	struct tgf_idup *d;
	int n = 0, *world, flag = 0;

	if (!atomic_load_explicit(&tgf_nidups, memory_order_relaxed))
		return NULL;
	pthread_mutex_lock(&tgf_idup_lock);
	if (PMPI_Comm_get_attr(comm, tgf_key, &fc, &flag) == MPI_SUCCESS &&
	    flag) {
		pthread_mutex_unlock(&tgf_idup_lock);
		return fc;
	}
	fc = NULL;
	d = tgf_idup_take(comm);
	if (d) {
		world = tgf_world_ranks(comm, &n);
		if (!world == !d->world &&
		    (!world || (n == d->n && !memcmp(world, d->world,
						     (size_t)n * sizeof(int)))))
			fc = calloc(1, sizeof(*fc));
		free(world);
	}
	if (fc) {
		fc->id = d->id;
		fc->graph_ok = d->graph_ok;
		tgf_comm_attach(comm, fc);
	}
	pthread_mutex_unlock(&tgf_idup_lock);
	tgf_idup_free(d);
	return fc;
}

static void tgf_idup_fini(void)
{
	pthread_mutex_lock(&tgf_idup_lock);
	while (tgf_idups)
		tgf_idup_free(tgf_idup_take(tgf_idups->comm));
	pthread_mutex_unlock(&tgf_idup_lock);
}

/* ------------------------------------------------------------------ */
/* Start and end                                                        */

/* Whether some host runs more ranks than the cores they may use: agreed
 * by every rank, so that the policy decides alike everywhere. */
static bool tgf_oversubscribed(void)
{
	MPI_Comm node;
	int here = 0, over, any = 0;
	cpu_set_t set;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	if (!sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) > 0)
		cores = CPU_COUNT(&set);
	if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
				 MPI_INFO_NULL, &node) == MPI_SUCCESS) {
		PMPI_Comm_size(node, &here);
		PMPI_Comm_free(&node);
	}
	/* a rank bound to one core sees one: count the host's instead */
	if (cores < sysconf(_SC_NPROCESSORS_ONLN) && cores == 1)
		cores = sysconf(_SC_NPROCESSORS_ONLN);
	over = here > cores;
	PMPI_Allreduce(&over, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return any != 0;
}

static void tgf_start(void)
{
	int bad, lens[5], mylens[5];
	void *name = NULL;
	size_t len = 0;
	char *all = NULL, *mine = NULL;
	int rank, size, rc;

	tg_policy_init(TGF_MPICH ? "mpich" : "openmpi", tgf_oversubscribed());
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &size);
	{
		const char *v = getenv("TNBC_MPI");

		bad = v && !strcmp(v, "0");
	}
	if (!bad && tg_open(&name, &len))
		bad = 1;
	/* every member must agree: one that cannot open turns the glue off
	 * everywhere, or the others would wait in collectives it never
	 * joins; so do variables read differently (the highest and the
	 * lowest digest, 31 bits of it); and the report, itself a
	 * collective, is everyone's if anyone's */
	mylens[0] = bad;
	mylens[1] = (int)len;
	mylens[2] = (int)(tg_policy_env_hash() & INT32_MAX);
	mylens[3] = -mylens[2];
	mylens[4] = tg_report_wanted();
	PMPI_Allreduce(mylens, lens, 5, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	tg_report_set(lens[4]);
	if (!lens[0] && lens[2] != -lens[3]) {
		if (rank == 0)
			fprintf(stderr,
				"tnbc-mpi: the TNBC_MPI_* variables differ "
				"between ranks (Open MPI's mpirun forwards "
				"only what -x names; tnbc-mpirun forwards "
				"them all): the glue is off\n");
		lens[0] = 1;
	}
	if (lens[0])
		goto off;
	mine = calloc(1, (size_t)lens[1]);
	all = malloc((size_t)lens[1] * (size_t)size);
	bad = !mine || !all;
	if (mine)
		memcpy(mine, name, len);
	rc = PMPI_Allgather(mine, lens[1], MPI_BYTE, all, lens[1], MPI_BYTE,
			    MPI_COMM_WORLD);
	bad |= rc != MPI_SUCCESS;
	if (!bad)
		bad = tg_connect(all, (size_t)lens[1], size, rank) != 0;
	if (!bad)
		bad = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN,
					      tgf_attr_delete, &tgf_key,
					      NULL) != MPI_SUCCESS;
	PMPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (bad)
		goto off;
	tgf_nb_ok = tgf_req_init() == 0;
	tgf_comm_attach(MPI_COMM_WORLD, &tgf_world_state);
	tgf_comm_attach(MPI_COMM_SELF, &tgf_self_state);
	free(name);
	free(mine);
	free(all);
	return;
off:
	free(name);
	free(mine);
	free(all);
	tg_close();
}

int MPI_Init(int *argc, char ***argv)
{
	int rc = PMPI_Init(argc, argv);

	if (rc == MPI_SUCCESS)
		tgf_start();
	return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int rc = PMPI_Init_thread(argc, argv, required, provided);

	if (rc == MPI_SUCCESS)
		tgf_start();
	return rc;
}

static void tgf_report(void)
{
	enum { N = TG_NFN * TG_NCOUNT };
	uint64_t mine[N], sums[N];
	int rank;

	uint64_t eng[2] = {0, 0}, emax[2] = {0, 0}, emin = 0;

	tg_counts(mine);
	PMPI_Reduce(mine, sums, N, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	/* one engine thread per process serves the glue's domain and the
	 * MPI's own on tnbc: the domains it serves, fewest and most */
	tg_engine(&eng[0], &eng[1]);
	PMPI_Reduce(eng, emax, 2, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
	PMPI_Reduce(&eng[0], &emin, 1, MPI_UINT64_T, MPI_MIN, 0,
		    MPI_COMM_WORLD);
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (rank == 0) {
		tg_report_print(sums);
		if (tg_ready())
			fprintf(stderr,
				"tnbc-mpi: engine: one thread per process "
				"serves %llu to %llu tnbc domains\n",
				(unsigned long long)emin,
				(unsigned long long)emax[0]);
		tg_tnbc_report();
	}
}

int MPI_Finalize(void)
{
	if (tg_report_wanted())
		tgf_report();
	if (tgf_key != MPI_KEYVAL_INVALID) {
		/* the world's and self's groups close with the endpoint */
		PMPI_Comm_delete_attr(MPI_COMM_SELF, tgf_key);
		PMPI_Comm_delete_attr(MPI_COMM_WORLD, tgf_key);
		PMPI_Comm_free_keyval(&tgf_key);
	}
	tgf_idup_fini();
	tgf_persist_fini();
	tgf_req_fini();
	tg_close();
	return PMPI_Finalize();
}

/* ------------------------------------------------------------------ */
/* Constructors: each names its child                                   */

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_dup(comm, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made_dup(comm, *newcomm);
	return rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made_dup(comm, *newcomm);
	return rc;
}

int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request)
{
	int rc = PMPI_Comm_idup(comm, newcomm, request);

	if (rc == MPI_SUCCESS)
		tgf_idup_record(comm, *newcomm);
	return rc;
}

#if TGF_MPICH && MPI_VERSION >= 4 /* MPI 4's; Open MPI 4.1 has none */
int MPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm,
			    MPI_Request *request)
{
	int rc = PMPI_Comm_idup_with_info(comm, info, newcomm, request);

	if (rc == MPI_SUCCESS)
		tgf_idup_record(comm, *newcomm);
	return rc;
}

int MPI_Comm_create_from_group(MPI_Group group, const char *stringtag,
			       MPI_Info info, MPI_Errhandler errhandler,
			       MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_create_from_group(group, stringtag, info, errhandler,
					     newcomm);

	if (rc == MPI_SUCCESS && stringtag)
		tgf_comm_made_from_group(stringtag, strlen(stringtag),
					 *newcomm);
	return rc;
}
#endif

/* An idup's child freed before the glue saw it used: its record goes,
 * lest a later communicator given the same handle take its name. */
int MPI_Comm_free(MPI_Comm *comm)
{
	if (comm && atomic_load_explicit(&tgf_nidups, memory_order_relaxed)) {
		pthread_mutex_lock(&tgf_idup_lock);
		tgf_idup_free(tgf_idup_take(*comm));
		pthread_mutex_unlock(&tgf_idup_lock);
	}
	return PMPI_Comm_free(comm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_split(comm, color, key, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made(comm, *newcomm);
	return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
			MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_split_type(comm, split_type, key, info, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made(comm, *newcomm);
	return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_create(comm, group, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made(comm, *newcomm);
	return rc;
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag,
			  MPI_Comm *newcomm)
{
	int rc = PMPI_Comm_create_group(comm, group, tag, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made_group(comm, group, tag, *newcomm);
	return rc;
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newcomm)
{
	int rc = PMPI_Intercomm_merge(intercomm, high, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made_merge(*newcomm);
	return rc;
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[],
		    const int periods[], int reorder, MPI_Comm *newcomm)
{
	int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made(comm, *newcomm);
	return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
	int rc = PMPI_Cart_sub(comm, remain_dims, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made(comm, *newcomm);
	return rc;
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[],
		     const int edges[], int reorder, MPI_Comm *newcomm)
{
	int rc =
		PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made_graph(comm, *newcomm);
	return rc;
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[],
			  const int degrees[], const int destinations[],
			  const int weights[], MPI_Info info, int reorder,
			  MPI_Comm *newcomm)
{
	int rc = PMPI_Dist_graph_create(comm, n, sources, degrees, destinations,
					weights, info, reorder, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made_graph(comm, *newcomm);
	return rc;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree,
				   const int sources[],
				   const int sourceweights[], int outdegree,
				   const int destinations[],
				   const int destweights[], MPI_Info info,
				   int reorder, MPI_Comm *newcomm)
{
	int rc = PMPI_Dist_graph_create_adjacent(
		comm, indegree, sources, sourceweights, outdegree, destinations,
		destweights, info, reorder, newcomm);

	if (rc == MPI_SUCCESS)
		tgf_comm_made_graph(comm, *newcomm);
	return rc;
}
