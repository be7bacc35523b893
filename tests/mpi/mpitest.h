/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Common helpers for the tnbc MPI-level tests.
 *
 * Every test program calls mt_init() first and mt_finish() last.  Any
 * failed check prints a message naming the rank, the source location and
 * what was wrong, then aborts the whole job with a non-zero exit status.
 *
 * Environment (all optional):
 *   MPITEST_REQUIRE_LIB  a shared object that must be loaded in every rank
 *                        after MPI_Init: a basename prefix (libtnbc-fi.so)
 *                        or a path, which must then be the very file that
 *                        is loaded (the runner uses this in tnbc mode).
 *   MPITEST_TIMEOUT      seconds; each rank arms a watchdog that reports
 *                        the phase it was stuck in and exits.
 *   MPITEST_VERBOSE      if set, rank 0 prints each phase with a time stamp.
 */
#ifndef MPITEST_H
#define MPITEST_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

extern int mt_rank;
extern int mt_size;

void mt_init(int *argc, char ***argv, const char *name);
/* mt_init with MPI_Init_thread (required), from min_ranks ranks up. */
void mt_init_thread(int *argc, char ***argv, const char *name, int required,
		    int min_ranks, int *provided);
void mt_finish(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Name the current phase; reported by failures and by the watchdog. */
void mt_phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void mt_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
void mt_mpi_fail(const char *file, int line, const char *call, int rc)
	__attribute__((noreturn));

#define MT_CHECK(cond, ...)                                                    \
	do {                                                                   \
		if (!(cond))                                                   \
			mt_fail(__FILE__, __LINE__, __VA_ARGS__);              \
	} while (0)

#define MT_MPI(call)                                                           \
	do {                                                                   \
		int mt_rc_ = (call);                                           \
		if (mt_rc_ != MPI_SUCCESS)                                     \
			mt_mpi_fail(__FILE__, __LINE__, #call, mt_rc_);        \
	} while (0)

/* Deterministic, position dependent byte pattern identified by seed. */
void mt_fill(void *buf, size_t len, uint32_t seed);
/* Returns len when buf holds the pattern, else the first bad offset. */
size_t mt_check_pattern(const void *buf, size_t len, uint32_t seed);
uint8_t mt_pattern_byte(size_t i, uint32_t seed);

#define MT_VERIFY(buf, len, seed, ...)                                         \
	do {                                                                   \
		size_t mt_off_ = mt_check_pattern((buf), (len), (seed));       \
		if (mt_off_ != (size_t)(len))                                  \
			mt_fail(__FILE__, __LINE__,                            \
				"data mismatch at byte %zu of %zu "            \
				"(got 0x%02x, expected 0x%02x): %s",           \
				mt_off_, (size_t)(len),                        \
				((const uint8_t *)(buf))[mt_off_],             \
				mt_pattern_byte(mt_off_, (seed)),              \
				mt_fmt(__VA_ARGS__));                          \
	} while (0)

/* printf into a static buffer (for composing failure messages). */
const char *mt_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void *mt_malloc(size_t len);
double mt_now(void);
void mt_sleep_ms(unsigned int ms);

/*
 * Look for a loaded shared object whose basename starts with prefix.
 * Returns 1 and copies its path into path (if non-NULL) when found.
 */
int mt_find_loaded(const char *prefix, char *path, size_t len);
/* Comma separated basenames of all loaded objects starting with prefix. */
void mt_list_loaded(const char *prefix, char *out, size_t len);

#endif /* MPITEST_H */
