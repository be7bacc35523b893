/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Common helpers for the tnbc MPI-level tests; see mpitest.h.
 */
#define _GNU_SOURCE
#include "mpitest.h"

#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int mt_rank = -1;
int mt_size = -1;

static const char *mt_name = "mpitest";
static char mt_phase_buf[256] = "MPI_Init";
static char mt_fmt_buf[1024];
static int mt_verbose;
static double mt_t0;

const char *mt_fmt(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(mt_fmt_buf, sizeof(mt_fmt_buf), fmt, ap);
	va_end(ap);
	return mt_fmt_buf;
}

void mt_phase(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(mt_phase_buf, sizeof(mt_phase_buf), fmt, ap);
	va_end(ap);
	if (mt_verbose && mt_rank == 0) {
		fprintf(stderr, "%s: %8.3f s: %s\n", mt_name, mt_now() - mt_t0,
			mt_phase_buf);
		fflush(stderr);
	}
}

void mt_fail(const char *file, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: FAIL: rank %d/%d at %s:%d [phase: %s]: %s\n",
		mt_name, mt_rank, mt_size, file, line, mt_phase_buf, msg);
	fflush(stderr);
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, 2);
	_exit(2);
}

void mt_mpi_fail(const char *file, int line, const char *call, int rc)
{
	char err[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(rc, err, &len) != MPI_SUCCESS)
		snprintf(err, sizeof(err), "unknown error");
	mt_fail(file, line, "%s returned %d (%s)", call, rc, err);
}

static void mt_watchdog(int sig)
{
	char msg[512];
	int n;

	(void)sig;
	/* snprintf is not async-signal-safe, but we exit right after. */
	n = snprintf(msg, sizeof(msg),
		     "%s: FAIL: rank %d/%d: watchdog timeout [phase: %s]\n",
		     mt_name, mt_rank, mt_size, mt_phase_buf);
	if (n > 0)
		(void)!write(STDERR_FILENO, msg, (size_t)n);
	_exit(3);
}

/* See MPITEST_REQUIRE_LIB in mpitest.h. */
static void mt_check_required(const char *req)
{
	char path[PATH_MAX], real_have[PATH_MAX], real_want[PATH_MAX];
	const char *base = strrchr(req, '/');

	MT_CHECK(mt_find_loaded(base ? base + 1 : req, path, sizeof(path)),
		 "%s is not loaded in this process: the job is not running "
		 "over the required provider",
		 base ? base + 1 : req);
	if (!base)
		return;
	MT_CHECK(realpath(req, real_want),
		 "MPITEST_REQUIRE_LIB=%s: no such file", req);
	MT_CHECK(realpath(path, real_have) && !strcmp(real_have, real_want),
		 "%s is loaded from %s, not from %s", base + 1, path, req);
}

static void mt_init_common(int *argc, char ***argv, const char *name,
			   int required, int min_ranks, int *provided);

void mt_init(int *argc, char ***argv, const char *name)
{
	mt_init_common(argc, argv, name, -1, 2, NULL);
}

void mt_init_thread(int *argc, char ***argv, const char *name, int required,
		    int min_ranks, int *provided)
{
	mt_init_common(argc, argv, name, required, min_ranks, provided);
}

static void mt_init_common(int *argc, char ***argv, const char *name,
			   int required, int min_ranks, int *provided)
{
	const char *req, *tmo;

	mt_name = name;
	mt_t0 = mt_now();
	mt_verbose = getenv("MPITEST_VERBOSE") != NULL;
	tmo = getenv("MPITEST_TIMEOUT");
	if (tmo && atoi(tmo) > 0) {
		signal(SIGALRM, mt_watchdog);
		alarm((unsigned int)atoi(tmo));
	}

	if (required < 0)
		MT_MPI(MPI_Init(argc, argv));
	else
		MT_MPI(MPI_Init_thread(argc, argv, required, provided));
	MT_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
	MT_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank));
	MT_MPI(MPI_Comm_size(MPI_COMM_WORLD, &mt_size));
	mt_phase("startup");

	req = getenv("MPITEST_REQUIRE_LIB");
	if (req && *req)
		mt_check_required(req);
	MT_CHECK(mt_size >= min_ranks, "needs at least %d ranks, got %d",
		 min_ranks, mt_size);
}

void mt_finish(const char *fmt, ...)
{
	const char *req;
	char details[512];
	char path[512] = "";
	va_list ap;

	mt_phase("finish");
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	if (mt_rank == 0) {
		va_start(ap, fmt);
		vsnprintf(details, sizeof(details), fmt, ap);
		va_end(ap);
		req = getenv("MPITEST_REQUIRE_LIB");
		if (req && strrchr(req, '/'))
			req = strrchr(req, '/') + 1;
		if (req && *req)
			mt_find_loaded(req, path, sizeof(path));
		printf("%s: PASS (np=%d) %s%s%s\n", mt_name, mt_size, details,
		       *path ? "; loaded " : "", path);
		fflush(stdout);
	}
	MT_MPI(MPI_Finalize());
	alarm(0);
}

uint8_t mt_pattern_byte(size_t i, uint32_t seed)
{
	return (uint8_t)(i + (i >> 8) * 7 + (i >> 16) * 13 + seed * 31 +
			 (seed >> 8) * 101);
}

void mt_fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = mt_pattern_byte(i, seed);
}

size_t mt_check_pattern(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		if (p[i] != mt_pattern_byte(i, seed))
			return i;
	}
	return len;
}

void *mt_malloc(size_t len)
{
	void *p = malloc(len ? len : 1);

	MT_CHECK(p, "out of memory allocating %zu bytes", len);
	return p;
}

double mt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void mt_sleep_ms(unsigned int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

struct mt_dl_search {
	const char *prefix;
	char *out;
	size_t len;
	int found;
	int list;
};

static int mt_dl_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct mt_dl_search *s = arg;
	const char *base;
	size_t used;

	(void)size;
	if (!info->dlpi_name || !*info->dlpi_name)
		return 0;
	base = strrchr(info->dlpi_name, '/');
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, s->prefix, strlen(s->prefix)) != 0)
		return 0;
	s->found++;
	if (!s->out || !s->len)
		return s->list ? 0 : 1;
	if (!s->list) {
		snprintf(s->out, s->len, "%s", info->dlpi_name);
		return 1;
	}
	used = strlen(s->out);
	snprintf(s->out + used, s->len - used, "%s%.*s", used ? "," : "",
		 strstr(base, ".so") ? (int)(strstr(base, ".so") - base)
				     : (int)strlen(base),
		 base);
	return 0;
}

int mt_find_loaded(const char *prefix, char *path, size_t len)
{
	struct mt_dl_search s = {prefix, path, len, 0, 0};

	if (path && len)
		path[0] = '\0';
	dl_iterate_phdr(mt_dl_cb, &s);
	return s.found > 0;
}

void mt_list_loaded(const char *prefix, char *out, size_t len)
{
	struct mt_dl_search s = {prefix, out, len, 0, 1};

	if (out && len)
		out[0] = '\0';
	dl_iterate_phdr(mt_dl_cb, &s);
}
