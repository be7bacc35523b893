/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The T-NBC page guard (mpi-glue/core/tg_guard.c), without MPI: a thread
 * stands in for the provider's engine, filling staging areas and setting
 * ready words late, while the main thread (or two) touches the guarded
 * pages at once.  Checked: a read of the last byte first waits for the
 * data and sees all of it; pages read in random order by two threads; a
 * write; the kernel's EFAULT on a guarded page and tg_guard_open_overlap
 * before a system call; an application's own SIGSEGV handler still gets
 * the faults that are not the guard's; fork with a range still shut;
 * bad arguments.  Every wait is bounded (seconds) by the lander's
 * schedule, never by a sleep of the checker's own.
 *
 * Sanitizer builds own SIGSEGV: the test is skipped there (77).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../mpi-glue/core/tg_guard.h"

#define NR 8 /* ranges of one page each */

static size_t pg;
static int fails;

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "guard_test:%d: FAIL: ", __LINE__);    \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			fails++;                                               \
		}                                                              \
	} while (0)

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static unsigned char pattern(size_t range, size_t i)
{
	return (unsigned char)(range * 37 + i * 11 + 5);
}

/* The engine's part: fills each staging area, then sets its word, in
 * the order given, after delay_ms each. */
struct lander {
	size_t n, len;
	void **stage;
	atomic_uint *ready;
	const size_t *order;
	unsigned delay_ms;
};

static void *land(void *arg)
{
	struct lander *l = arg;

	for (size_t k = 0; k < l->n; k++) {
		size_t r = l->order[k];
		unsigned char *s = l->stage[r];

		sleep_ms(l->delay_ms);
		for (size_t i = 0; i < l->len; i++)
			s[i] = pattern(r, i);
		atomic_store_explicit(&l->ready[r], 1, memory_order_release);
	}
	return NULL;
}

static unsigned char *guarded(size_t pages)
{
	void *p = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(p, 0xee, pages * pg);
	return p;
}

/* A read of the last byte first: one fault, which waits for the data,
 * and then every byte of the range is there. */
static void last_byte_first(void)
{
	size_t len = 4 * pg, order[1] = {0};
	unsigned char *buf = guarded(4);
	atomic_uint ready = 0;
	void *stage;
	struct tg_guard_range *r;
	struct lander l = {1, len, &stage, &ready, order, 30};
	uint64_t f0 = tg_guard_faults();
	pthread_t t;
	int bad = 0;

	CHECK(tg_guard_protect(buf, len, &ready, 1, &stage, &r) == 0,
	      "protect");
	pthread_create(&t, NULL, land, &l);
	CHECK(((volatile unsigned char *)buf)[len - 1] == pattern(0, len - 1),
	      "last byte");
	CHECK(atomic_load(&ready), "read before the data was ready");
	for (size_t i = 0; i < len; i++)
		bad += buf[i] != pattern(0, i);
	CHECK(!bad, "%d bytes wrong", bad);
	CHECK(tg_guard_faults() - f0 == 1, "faults %llu",
	      (unsigned long long)(tg_guard_faults() - f0));
	CHECK(tg_guard_is_open(r), "open after the fault");
	CHECK(tg_guard_touched(r), "the fault's time kept");
	pthread_join(t, NULL);
	CHECK(tg_guard_release(r) == 0, "release");
	munmap(buf, len);
}

/* A range two messages land in (a page they share): a touch waits for
 * both words, the later one too. */
static void two_words(void)
{
	size_t order[1] = {0};
	unsigned char *buf = guarded(1);
	atomic_uint ready[2];
	void *stage;
	struct tg_guard_range *r;
	/* the lander fills the page and sets the second word; the first
	 * is set now, as if its message came long ago */
	struct lander l = {1, pg, &stage, &ready[1], order, 30};
	pthread_t t;
	int bad = 0;

	atomic_init(&ready[0], 1);
	atomic_init(&ready[1], 0);
	CHECK(tg_guard_protect(buf, pg, ready, 2, &stage, &r) == 0, "protect");
	pthread_create(&t, NULL, land, &l);
	CHECK(((volatile unsigned char *)buf)[0] == pattern(0, 0),
	      "first byte");
	CHECK(atomic_load(&ready[1]), "opened before the second word");
	for (size_t i = 0; i < pg; i++)
		bad += buf[i] != pattern(0, i);
	CHECK(!bad, "%d bytes wrong", bad);
	pthread_join(t, NULL);
	CHECK(tg_guard_release(r) == 0, "release");
	munmap(buf, pg);
}

struct reader {
	unsigned char *buf;
	const size_t *order;
	int bad;
};

static void *read_pages(void *arg)
{
	struct reader *rd = arg;

	for (size_t k = 0; k < NR; k++) {
		size_t r = rd->order[k];
		volatile unsigned char *p = rd->buf + r * pg;

		for (size_t i = 0; i < pg; i += 97)
			rd->bad += p[i] != pattern(r, i);
	}
	return NULL;
}

static void shuffle(size_t *a, size_t n, unsigned *seed)
{
	for (size_t i = 0; i < n; i++)
		a[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)rand_r(seed) % (i + 1), x = a[i];

		a[i] = a[j];
		a[j] = x;
	}
}

/* Eight one-page ranges landing in one random order, read by two
 * threads in two others, while they land. */
static void random_pages_two_threads(void)
{
	unsigned char *buf = guarded(NR);
	atomic_uint ready[NR];
	void *stage[NR];
	struct tg_guard_range *r[NR];
	size_t land_order[NR], o1[NR], o2[NR];
	unsigned seed = 7;
	struct lander l = {NR, pg, stage, ready, land_order, 5};
	struct reader a = {buf, o1, 0}, b = {buf, o2, 0};
	pthread_t tl, ta, tb;

	shuffle(land_order, NR, &seed);
	shuffle(o1, NR, &seed);
	shuffle(o2, NR, &seed);
	for (size_t i = 0; i < NR; i++) {
		atomic_init(&ready[i], 0);
		CHECK(tg_guard_protect(buf + i * pg, pg, &ready[i], 1,
				       &stage[i], &r[i]) == 0,
		      "protect %zu", i);
	}
	pthread_create(&tl, NULL, land, &l);
	pthread_create(&ta, NULL, read_pages, &a);
	pthread_create(&tb, NULL, read_pages, &b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_join(tl, NULL);
	CHECK(!a.bad && !b.bad, "wrong bytes: %d and %d", a.bad, b.bad);
	for (size_t i = 0; i < NR; i++)
		CHECK(tg_guard_release(r[i]) == 0, "release %zu", i);
	munmap(buf, NR * pg);
}

/* A write to a guarded page waits too, and then stays. */
static void write_waits(void)
{
	unsigned char *buf = guarded(1);
	atomic_uint ready = 0;
	void *stage;
	struct tg_guard_range *r;
	size_t order[1] = {0};
	struct lander l = {1, pg, &stage, &ready, order, 20};
	pthread_t t;

	CHECK(tg_guard_protect(buf, pg, &ready, 1, &stage, &r) == 0, "protect");
	pthread_create(&t, NULL, land, &l);
	buf[5] = 0x42;
	pthread_join(t, NULL);
	CHECK(buf[5] == 0x42 && buf[6] == pattern(0, 6),
	      "write then data: %#x %#x", buf[5], buf[6]);
	tg_guard_release(r);
	munmap(buf, pg);
}

/* Whether the kernel moves pages out leaving the range mapped (5.7 on):
 * without it the guard keeps no pages. */
static bool dontunmap(void)
{
	void *p = mmap(NULL, pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *q = mremap(p, pg, pg, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);

	if (q != MAP_FAILED)
		munmap(q, pg);
	munmap(p, pg);
	if (q == MAP_FAILED)
		puts("guard_test: no MREMAP_DONTUNMAP: kept pages not checked");
	return q != MAP_FAILED;
}

/* One range of 8 pages opened by a touch leaves its old pages kept;
 * ranges of 5 and then 12 pages stage into them (the surplus dropped,
 * the shortfall grown), with no fresh run of their size, and every byte
 * lands. */
static void staging_kept_for_other_sizes(void)
{
	static const size_t pages[3] = {8, 5, 12};
	unsigned char *buf[3];
	bool keeps = dontunmap();

	for (int k = 0; k < 3; k++) {
		size_t len = pages[k] * pg, order[1] = {0};
		atomic_uint ready = 0;
		void *stage;
		struct tg_guard_range *r;
		struct lander l = {1, len, &stage, &ready, order, 5};
		uint64_t fresh = tg_guard_fresh_bytes();
		pthread_t t;
		int bad = 0;

		buf[k] = guarded(pages[k]);
		CHECK(tg_guard_protect(buf[k], len, &ready, 1, &stage, &r) == 0,
		      "protect %zu pages", pages[k]);
		if (k && keeps) {
			size_t want = pages[k] > pages[k - 1]
					      ? (pages[k] - pages[k - 1]) * pg
					      : 0;

			CHECK(tg_guard_fresh_bytes() - fresh == want,
			      "%zu pages staged after %zu kept: %llu bytes "
			      "fresh, not %zu",
			      pages[k], pages[k - 1],
			      (unsigned long long)(tg_guard_fresh_bytes() -
						   fresh),
			      want);
		}
		pthread_create(&t, NULL, land, &l);
		for (size_t i = len; i-- > 0;)
			bad += buf[k][i] != pattern(0, i);
		pthread_join(t, NULL);
		CHECK(!bad, "%zu pages: %d bytes wrong", pages[k], bad);
		tg_guard_release(r);
	}
	for (int k = 0; k < 3; k++)
		munmap(buf[k], pages[k] * pg);
}

/* The kernel fails on a guarded page; opening what overlaps first
 * makes the same call work, with no fault taken. */
static void kernel_efault_and_open_overlap(void)
{
	unsigned char *buf = guarded(2);
	atomic_uint ready = 0;
	void *stage;
	struct tg_guard_range *r;
	int pfd[2], fd;
	uint64_t f0;
	ssize_t n;

	/* a pipe copies what is written (/dev/null does not look) */
	CHECK(!pipe(pfd), "pipe");
	fd = pfd[1];
	CHECK(tg_guard_protect(buf, 2 * pg, &ready, 1, &stage, &r) == 0,
	      "protect");
	memset(stage, 0x5a, 2 * pg);
	atomic_store(&ready, 1);
	n = write(fd, buf + pg, 16);
	CHECK(n < 0 && errno == EFAULT, "write from a guarded page: %zd %d", n,
	      errno);
	f0 = tg_guard_faults();
	tg_guard_open_overlap(buf + pg, 16);
	CHECK(tg_guard_is_open(r), "open_overlap opened it");
	CHECK(tg_guard_faults() == f0, "open_overlap took a fault");
	CHECK(write(fd, buf + pg, 16) == 16, "write after opening");
	CHECK(buf[0] == 0x5a && buf[2 * pg - 1] == 0x5a, "data after open");
	/* a range elsewhere is left alone */
	tg_guard_open_overlap(buf + 4 * pg, pg);
	close(pfd[0]);
	close(pfd[1]);
	tg_guard_release(r);
	munmap(buf, 2 * pg);
}

static sigjmp_buf app_jump;
static volatile sig_atomic_t app_faults;

static void app_handler(int sig, siginfo_t *info, void *uctx)
{
	(void)sig;
	(void)info;
	(void)uctx;
	app_faults++;
	siglongjmp(app_jump, 1);
}

/* A fault on a page the guard does not know reaches the handler the
 * application installed before the guard. */
static void chains_to_application(void)
{
	unsigned char *buf = guarded(1);

	mprotect(buf, pg, PROT_NONE);
	if (!sigsetjmp(app_jump, 1))
		(void)((volatile unsigned char *)buf)[3];
	CHECK(app_faults == 1, "application's handler ran %d times",
	      (int)app_faults);
	munmap(buf, pg);
}

static volatile sig_atomic_t late_faults;

static void late_handler(int sig)
{
	(void)sig;
	late_faults++;
	siglongjmp(app_jump, 1);
}

/* A handler the application installs after the guard's gets its own
 * faults, and the guard keeps serving its ranges: sigaction and signal
 * only change what the guard chains to. */
static void handler_installed_later(void)
{
	struct sigaction sa, prev, now;
	unsigned char *buf = guarded(1), *g = guarded(1);
	atomic_uint ready = 0;
	void *stage;
	struct tg_guard_range *r;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = late_handler;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGSEGV, &sa, &prev) == 0, "sigaction");
	CHECK(prev.sa_sigaction == app_handler,
	      "the handler before is the application's");
	CHECK(sigaction(SIGSEGV, NULL, &now) == 0 &&
		      now.sa_handler == late_handler,
	      "sigaction reports the application's new handler");
	CHECK(tg_guard_protect(g, pg, &ready, 1, &stage, &r) == 0, "protect");
	memset(stage, 0x42, pg);
	atomic_store(&ready, 1);
	CHECK(((volatile unsigned char *)g)[9] == 0x42, "guarded read");
	CHECK(late_faults == 0, "the guard's fault reached the application");
	mprotect(buf, pg, PROT_NONE);
	if (!sigsetjmp(app_jump, 1))
		(void)((volatile unsigned char *)buf)[3];
	CHECK(late_faults == 1, "the later handler ran %d times",
	      (int)late_faults);
	CHECK(signal(SIGSEGV, SIG_DFL) == late_handler, "signal's old handler");
	CHECK(sigaction(SIGSEGV, &prev, NULL) == 0, "sigaction back");
	CHECK(tg_guard_release(r) == 0, "release");
	munmap(buf, pg);
	munmap(g, pg);
}

/* fork with a range shut whose data is ready: the child's touch opens
 * its own copy. */
static void fork_child_opens(void)
{
	unsigned char *buf = guarded(1);
	atomic_uint ready = 0;
	void *stage;
	struct tg_guard_range *r;
	pid_t pid;
	int st = 0;

	CHECK(tg_guard_protect(buf, pg, &ready, 1, &stage, &r) == 0, "protect");
	memset(stage, 0x77, pg);
	atomic_store(&ready, 1);
	pid = fork();
	if (!pid)
		_exit(((volatile unsigned char *)buf)[100] == 0x77 ? 0 : 3);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x", st);
	CHECK(!tg_guard_is_open(r), "the child opened the parent's range");
	CHECK(tg_guard_release(r) == 0 && buf[100] == 0x77, "parent's data");
	munmap(buf, pg);
}

static void bad_arguments(void)
{
	unsigned char *buf = guarded(2);
	atomic_uint ready = 1;
	void *stage;
	struct tg_guard_range *r, *r2;

	CHECK(tg_guard_protect(buf + 1, pg, &ready, 1, &stage, &r) == -EINVAL,
	      "unaligned");
	CHECK(tg_guard_protect(buf, pg + 3, &ready, 1, &stage, &r) == -EINVAL,
	      "partial page");
	CHECK(tg_guard_protect(buf, 0, &ready, 1, &stage, &r) == -EINVAL,
	      "empty");
	CHECK(tg_guard_protect(buf, pg, NULL, 1, &stage, &r) == -EINVAL,
	      "no ready word");
	CHECK(tg_guard_protect(buf, pg, &ready, 0, &stage, &r) == -EINVAL,
	      "no ready words");
	CHECK(tg_guard_protect(buf, 2 * pg, &ready, 1, &stage, &r) == 0,
	      "protect");
	CHECK(tg_guard_protect(buf + pg, pg, &ready, 1, &stage, &r2) == -EEXIST,
	      "overlap");
	CHECK(tg_guard_release(NULL) == -EINVAL, "release NULL");
	CHECK(!tg_guard_touched(r), "a range nobody needed has no time");
	tg_guard_release(r);
	munmap(buf, 2 * pg);
}

int main(void)
{
	struct sigaction sa;
	unsigned char probe;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	puts("guard_test: SKIP (a sanitizer owns SIGSEGV)");
	return 77;
#endif
	pg = (size_t)sysconf(_SC_PAGESIZE);
	{
		atomic_uint ready = 1;
		void *stage;
		struct tg_guard_range *r;

		CHECK(tg_guard_protect(&probe - ((uintptr_t)&probe % pg), pg,
				       &ready, 1, &stage, &r) == -EPERM,
		      "protect without a handler");
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	if (tg_guard_init()) {
		fprintf(stderr, "guard_test: tg_guard_init failed\n");
		return 1;
	}
	last_byte_first();
	two_words();
	random_pages_two_threads();
	write_waits();
	staging_kept_for_other_sizes();
	kernel_efault_and_open_overlap();
	chains_to_application();
	handler_installed_later();
	fork_child_opens();
	bad_arguments();
	tg_guard_fini();
	if (fails) {
		fprintf(stderr, "guard_test: %d checks failed\n", fails);
		return 1;
	}
	printf("guard_test: PASS (%llu faults served)\n",
	       (unsigned long long)tg_guard_faults());
	return 0;
}
