/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * tnbc_main_job: the "main job" shown to a user.
 *
 * Meant for 4 ranks (works with any number >= 2): a ring exchange, an
 * allreduce and an alltoall, all with checked results.  Rank 0 then
 * reports what was checked and which transport is really in use: the
 * PML/MTL/BTL components and libfabric found loaded in the process
 * (dl_iterate_phdr), the MCA settings in effect (MPI_T), and whether the
 * tnbc provider library (libtnbc-fi.so) is loaded, in how many ranks and
 * from where.  tnbc not being loaded is reported, not treated as an error,
 * unless --require-tnbc is given (the runner enforces it in tnbc mode
 * with MPITEST_REQUIRE_LIB, which every test program honours).
 *
 * Note that libfabric dlopen()s every provider found in its provider
 * directory (FI_PROVIDER_PATH, or the default one), so "loaded" means
 * "available in this process"; which provider the OFI MTL selected is
 * fixed by mtl_ofi_provider_include, shown next to it.
 *
 * Usage: tnbc_main_job [--require-tnbc]
 */
#include "mpitest.h"

#include <stdbool.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TNBC_LIB "libtnbc-fi.so"
#define RING_LEN (256u << 10)
#define VEC_LEN	 1000
#define PATH_LEN 512

/* Value of MPI_T control variable name, or "(unset)". */
static void cvar_value(const char *name, char *out, int len)
{
	char cname[256], desc[256], *buf;
	int i, n, nlen, dlen, verb, bind, scope, count;
	MPI_Datatype dt;
	MPI_T_enum en;
	MPI_T_cvar_handle h;

	snprintf(out, (size_t)len, "(unset)");
	if (MPI_T_init_thread(MPI_THREAD_SINGLE, &i) != MPI_SUCCESS)
		return;
	if (MPI_T_cvar_get_num(&n) != MPI_SUCCESS)
		n = 0;
	for (i = 0; i < n; i++) {
		nlen = sizeof(cname);
		dlen = sizeof(desc);
		if (MPI_T_cvar_get_info(i, cname, &nlen, &verb, &dt, &en, desc,
					&dlen, &bind, &scope) != MPI_SUCCESS)
			continue;
		if (strcmp(cname, name) != 0 || dt != MPI_CHAR)
			continue;
		if (MPI_T_cvar_handle_alloc(i, NULL, &h, &count) != MPI_SUCCESS)
			break;
		/* count is the capacity of the string, often 2048. */
		buf = mt_malloc((size_t)count + 1);
		buf[0] = '\0';
		if (MPI_T_cvar_read(h, buf) != MPI_SUCCESS)
			snprintf(out, (size_t)len, "(unreadable)");
		else
			snprintf(out, (size_t)len, "%s",
				 buf[0] ? buf : "(empty)");
		free(buf);
		MPI_T_cvar_handle_free(&h);
		break;
	}
	MPI_T_finalize();
}

static int ring_exchange(void)
{
	int right = (mt_rank + 1) % mt_size;
	int left = (mt_rank + mt_size - 1) % mt_size;
	uint8_t *sb = mt_malloc(RING_LEN), *rb = mt_malloc(RING_LEN);
	MPI_Status st;
	int token, n;

	/* A token travels once around the ring, each rank adding rank+1. */
	mt_phase("ring token");
	if (mt_rank == 0) {
		token = 1;
		MT_MPI(MPI_Send(&token, 1, MPI_INT, right, 1, MPI_COMM_WORLD));
		MT_MPI(MPI_Recv(&token, 1, MPI_INT, left, 1, MPI_COMM_WORLD,
				&st));
		MT_CHECK(token == mt_size * (mt_size + 1) / 2,
			 "ring token came back as %d, expected %d", token,
			 mt_size * (mt_size + 1) / 2);
	} else {
		MT_MPI(MPI_Recv(&token, 1, MPI_INT, left, 1, MPI_COMM_WORLD,
				&st));
		token += mt_rank + 1;
		MT_MPI(MPI_Send(&token, 1, MPI_INT, right, 1, MPI_COMM_WORLD));
	}

	/* Everybody shifts a 256 KiB block to the right at once. */
	mt_phase("ring shift");
	mt_fill(sb, RING_LEN, (uint32_t)mt_rank + 100);
	memset(rb, 0, RING_LEN);
	MT_MPI(MPI_Sendrecv(sb, RING_LEN, MPI_BYTE, right, 2, rb, RING_LEN,
			    MPI_BYTE, left, 2, MPI_COMM_WORLD, &st));
	MT_MPI(MPI_Get_count(&st, MPI_BYTE, &n));
	MT_CHECK(st.MPI_SOURCE == left && n == (int)RING_LEN,
		 "ring shift: got %d B from %d, expected %u B from %d", n,
		 st.MPI_SOURCE, RING_LEN, left);
	MT_VERIFY(rb, RING_LEN, (uint32_t)left + 100,
		  "ring shift block from rank %d", left);
	free(sb);
	free(rb);
	return token;
}

static void allreduce_check(void)
{
	double v[VEC_LEN], r[VEC_LEN], e;
	int i, sum = 0, one = mt_rank + 1;

	mt_phase("allreduce");
	MT_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
	MT_CHECK(sum == mt_size * (mt_size + 1) / 2,
		 "allreduce sum of rank+1 = %d, expected %d", sum,
		 mt_size * (mt_size + 1) / 2);
	for (i = 0; i < VEC_LEN; i++)
		v[i] = (double)(mt_rank * VEC_LEN + i);
	MT_MPI(MPI_Allreduce(v, r, VEC_LEN, MPI_DOUBLE, MPI_SUM,
			     MPI_COMM_WORLD));
	for (i = 0; i < VEC_LEN; i++) {
		/* sum over ranks of (rank * VEC_LEN + i) */
		e = (double)VEC_LEN * mt_size * (mt_size - 1) / 2 +
		    (double)i * mt_size;
		MT_CHECK(r[i] == e, "allreduce vector [%d] = %f, expected %f",
			 i, r[i], e);
	}
}

static void alltoall_check(void)
{
	int *sb = mt_malloc(sizeof(int) * 2 * (size_t)mt_size);
	int *rb = mt_malloc(sizeof(int) * 2 * (size_t)mt_size);
	int r;

	mt_phase("alltoall");
	for (r = 0; r < mt_size; r++) {
		sb[2 * r] = mt_rank * 1000 + r;
		sb[2 * r + 1] = -(mt_rank * 1000 + r);
	}
	MT_MPI(MPI_Alltoall(sb, 2, MPI_INT, rb, 2, MPI_INT, MPI_COMM_WORLD));
	for (r = 0; r < mt_size; r++)
		MT_CHECK(rb[2 * r] == r * 1000 + mt_rank &&
				 rb[2 * r + 1] == -(r * 1000 + mt_rank),
			 "alltoall block from rank %d = (%d, %d), expected "
			 "(%d, %d)",
			 r, rb[2 * r], rb[2 * r + 1], r * 1000 + mt_rank,
			 -(r * 1000 + mt_rank));
	free(sb);
	free(rb);
}

static void report(int token)
{
	char pml[128], mtl[128], btl[128], libfab[PATH_LEN], tnbc[PATH_LEN];
	char c_pml[256], c_mtl[256], c_btl[256], c_inc[256];
	char lib[MPI_MAX_LIBRARY_VERSION_STRING], *all = NULL;
	char all_path[PATH_LEN] = "";
	int loaded, nloaded = 0, same = 1, len, r;
	const char *fpp = getenv("FI_PROVIDER_PATH");

	loaded = mt_find_loaded(TNBC_LIB, tnbc, sizeof(tnbc));
	if (mt_rank == 0)
		all = mt_malloc(PATH_LEN * (size_t)mt_size);
	MT_MPI(MPI_Gather(tnbc, PATH_LEN, MPI_CHAR, all, PATH_LEN, MPI_CHAR, 0,
			  MPI_COMM_WORLD));
	MT_MPI(MPI_Reduce(&loaded, &nloaded, 1, MPI_INT, MPI_SUM, 0,
			  MPI_COMM_WORLD));
	if (mt_rank != 0)
		return;
	for (r = 0; r < mt_size; r++) {
		if (!all[(size_t)r * PATH_LEN])
			continue;
		if (!*all_path)
			snprintf(all_path, sizeof(all_path), "%s",
				 all + (size_t)r * PATH_LEN);
		same &= strcmp(all + (size_t)r * PATH_LEN, all_path) == 0;
	}
	free(all);

	mt_list_loaded("mca_pml_", pml, sizeof(pml));
	mt_list_loaded("mca_mtl_", mtl, sizeof(mtl));
	mt_list_loaded("mca_btl_", btl, sizeof(btl));
	mt_find_loaded("libfabric.so", libfab, sizeof(libfab));
	cvar_value("pml", c_pml, sizeof(c_pml));
	cvar_value("mtl", c_mtl, sizeof(c_mtl));
	cvar_value("btl", c_btl, sizeof(c_btl));
	cvar_value("mtl_ofi_provider_include", c_inc, sizeof(c_inc));
	MT_MPI(MPI_Get_library_version(lib, &len));
	lib[strcspn(lib, ",\n")] = '\0';

	printf("==== tnbc main job report ====\n");
	printf("ranks          : %d%s\n", mt_size,
	       mt_size == 4 ? "" : " (the main job is meant for 4)");
	printf("MPI library    : %s\n", lib);
	printf("MCA settings   : pml=%s mtl=%s btl=%s "
	       "mtl_ofi_provider_include=%s\n",
	       c_pml, c_mtl, c_btl, c_inc);
	printf("loaded (rank 0): PML %s, MTL %s, BTL %s\n", *pml ? pml : "none",
	       *mtl ? mtl : "none", *btl ? btl : "none");
	printf("libfabric      : %s%s%s\n", *libfab ? libfab : "not loaded",
	       fpp ? ", FI_PROVIDER_PATH=" : "", fpp ? fpp : "");
	if (nloaded)
		printf("tnbc provider  : %s loaded in %d of %d ranks: %s%s\n",
		       TNBC_LIB, nloaded, mt_size, all_path,
		       same ? "" : " (paths differ between ranks!)");
	else
		printf("tnbc provider  : %s is NOT loaded in any rank\n",
		       TNBC_LIB);
	if (strstr(pml, "mca_pml_cm") && strstr(mtl, "mca_mtl_ofi"))
		printf("transport      : PML cm -> OFI MTL -> libfabric, "
		       "provider restricted to \"%s\"%s\n",
		       c_inc,
		       strcmp(c_inc, "tnbc") != 0 ? ""
		       : nloaded == mt_size
			       ? " = tnbc, loaded in every rank"
			       : " but tnbc is NOT loaded everywhere");
	else if (strstr(pml, "mca_pml_ob1"))
		printf("transport      : PML ob1 over BTLs %s (libfabric "
		       "provider tnbc is not used)\n",
		       btl);
	else
		printf("transport      : PML %s, MTL %s\n", pml, mtl);
	printf("checked        : ring token %d (expected %d), ring shift of "
	       "%u B per rank, allreduce (int sum + %d doubles), alltoall "
	       "(%d x 2 ints)\n",
	       token, mt_size * (mt_size + 1) / 2, RING_LEN, VEC_LEN, mt_size);
	printf("==============================\n");
	fflush(stdout);
}

/*
 * With the MPI glue (tnbc-mpirun): a non-blocking allreduce, then a sleep
 * with no MPI call at all, watching the result buffer.  tnbc's engine
 * completes it meanwhile; without the glue nothing moves until MPI_Wait.
 * Returns the milliseconds it took, or -1.
 */
static double overlap_check(void)
{
	enum { N = 1 << 16 };
	static double in[N], out[N];
	volatile double *vo = out;
	double want = 0, t0, seen = -1;
	MPI_Request rq;

	mt_phase("overlap");
	for (int i = 0; i < N; i++) {
		in[i] = mt_rank + 1 + (double)(i % 7);
		out[i] = 0;
	}
	for (int r = 0; r < mt_size; r++)
		want += r + 1 + (double)((N - 1) % 7);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	MT_MPI(MPI_Iallreduce(in, out, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
			      &rq));
	t0 = mt_now();
	while (mt_now() - t0 < 3.0) {
		if (vo[N - 1] == want) {
			seen = (mt_now() - t0) * 1e3;
			break;
		}
		mt_sleep_ms(1);
	}
	MT_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
	MT_CHECK(out[N - 1] == want, "iallreduce result %g, expected %g",
		 out[N - 1], want);
	return seen;
}

int main(int argc, char **argv)
{
	char path[PATH_LEN];
	double t0;
	int token;

	bool glue = false;

	mt_init(&argc, &argv, "tnbc_main_job");
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--require-tnbc") == 0)
			MT_CHECK(mt_find_loaded(TNBC_LIB, path, sizeof(path)),
				 "--require-tnbc: %s is not loaded in this "
				 "rank",
				 TNBC_LIB);
		else if (strcmp(argv[i], "--glue") == 0)
			glue = true;
	}
	t0 = mt_now();
	token = ring_exchange();
	allreduce_check();
	alltoall_check();
	if (glue) {
		double ms = overlap_check(), worst;
		int late = ms < 0, any_late;

		MT_MPI(MPI_Reduce(&ms, &worst, 1, MPI_DOUBLE, MPI_MAX, 0,
				  MPI_COMM_WORLD));
		MT_MPI(MPI_Allreduce(&late, &any_late, 1, MPI_INT, MPI_MAX,
				     MPI_COMM_WORLD));
		if (mt_rank == 0)
			printf("overlap        : MPI_Iallreduce of 512 KiB, "
			       "then "
			       "a sleep with no MPI call: %s\n",
			       any_late ? "NOT complete after 3 s (no "
					  "progress without MPI calls)"
					: mt_fmt("complete in place after %.1f "
						 "ms, while every rank slept",
						 worst));
		MT_CHECK(!any_late, "--glue: the non-blocking allreduce did "
				    "not complete while the ranks slept");
	}
	mt_phase("report");
	report(token);
	mt_finish("ring, allreduce, alltoall checked in %.3f s", mt_now() - t0);
	return 0;
}
