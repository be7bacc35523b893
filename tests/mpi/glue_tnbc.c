/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * T-NBC through the MPI glue (tnbc-mpi(7), "T-NBC"): blocking
 * MPI_Alltoall, MPI_Alltoallv and MPI_Bcast that return before their
 * data has arrived, the receive buffer guarded page by page.  Run under
 * tnbc-mpirun with TNBC_MPI_TNBC=all (tests/mpi/check-glue.sh).
 *
 * Every result is checked exactly against what each rank computes for
 * itself, and read the ways a program reads it: at once (the fault
 * path), last byte first, page by page in random order from two
 * threads; buffers that share pages with live data; a received buffer
 * handed straight to MPI_Send, MPI_Put and collectives; a send buffer
 * overwritten as soon as the call returns; a program with its own
 * SIGSEGV handler; fork after a call; a buffer freed unread and
 * reused by the kernel.
 *
 * Rank 1 sleeps before its sends in some rounds, so that the others'
 * calls return before its data is there and their reads must wait.
 * Run with TNBC_MPI_TNBC_ADAPT=0 (T-NBC at every call), but for
 * --adapt, which runs the trial of T-NBC against the plain way alone.
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
#include <unistd.h>

#include "mpitest.h"

static size_t pg;

/* The byte member src sends to member dst at offset i of its slice. */
static unsigned char val(int src, int dst, size_t i, int round)
{
	return (unsigned char)(src * 131 + dst * 17 + i * 7 + i / 4096 +
			       round * 29 + 1);
}

static void fill_send(unsigned char *s, size_t per, int round)
{
	for (int d = 0; d < mt_size; d++)
		for (size_t i = 0; i < per; i++)
			s[(size_t)d * per + i] = val(mt_rank, d, i, round);
}

/* Which byte of slice src was wrong (SIZE_MAX: none), reading in the
 * order given: 0 forward, 1 backward. */
static size_t check_slice(const unsigned char *r, int src, size_t per,
			  int round, int order)
{
	for (size_t k = 0; k < per; k++) {
		size_t i = order ? per - 1 - k : k;

		if (r[i] != val(src, mt_rank, i, round))
			return i;
	}
	return SIZE_MAX;
}

static void check_all(const unsigned char *r, size_t per, int round, int order,
		      const char *what)
{
	for (int k = 0; k < mt_size; k++) {
		int s = order ? mt_size - 1 - k : k;
		size_t bad =
			check_slice(r + (size_t)s * per, s, per, round, order);

		MT_CHECK(bad == SIZE_MAX,
			 "%s: byte %zu from rank %d: got %u want %u", what, bad,
			 s, r[(size_t)s * per + bad],
			 val(s, mt_rank, bad, round));
	}
}

/* One alltoall of per bytes each way; rank 1 late when slow. */
static void a2a(unsigned char *s, unsigned char *r, size_t per, int round,
		bool slow)
{
	fill_send(s, per, round);
	if (slow && mt_rank == 1)
		mt_sleep_ms(50);
	MT_MPI(MPI_Alltoall(s, (int)per, MPI_BYTE, r, (int)per, MPI_BYTE,
			    MPI_COMM_WORLD));
}

/* ------------------------------------------------------------------ */

static void t_read_at_once(size_t per)
{
	unsigned char *s = mt_malloc(per * mt_size);
	unsigned char *r = mt_malloc(per * mt_size);

	mt_phase("read at once, %zu B", per);
	for (int round = 0; round < 4; round++) {
		a2a(s, r, per, round, round & 1);
		check_all(r, per, round, round & 2 ? 1 : 0, "read at once");
	}
	free(s);
	free(r);
}

/* Page-aligned: every page guarded, the last byte read first. */
static void t_last_byte_first(size_t per)
{
	size_t len = per * mt_size;
	unsigned char *s = mt_malloc(len), *r;

	mt_phase("last byte first");
	MT_CHECK(!posix_memalign((void **)&r, pg, len), "posix_memalign");
	a2a(s, r, per, 5, true);
	{
		int last = mt_size - 1;
		unsigned char b = ((volatile unsigned char *)r)[len - 1];

		MT_CHECK(b == val(last, mt_rank, per - 1, 5),
			 "last byte %u want %u", b,
			 val(last, mt_rank, per - 1, 5));
	}
	check_all(r, per, 5, 0, "after the last byte");
	free(s);
	free(r);
}

struct reader {
	const unsigned char *r;
	size_t per, npages;
	unsigned seed;
	int round;
	size_t bad;
};

static void *read_pages(void *arg)
{
	struct reader *x = arg;
	size_t len = x->per * mt_size;

	x->bad = SIZE_MAX;
	for (size_t k = 0; k < x->npages; k++) {
		size_t p = (size_t)rand_r(&x->seed) % x->npages;

		for (size_t o = p * pg; o < (p + 1) * pg && o < len; o++) {
			int src = (int)(o / x->per);
			size_t i = o % x->per;

			if (x->r[o] != val(src, mt_rank, i, x->round)) {
				x->bad = o;
				return NULL;
			}
		}
	}
	return NULL;
}

static void t_two_threads(size_t per)
{
	size_t len = per * mt_size;
	unsigned char *s = mt_malloc(len), *r;
	struct reader a, b;
	pthread_t ta, tb;

	mt_phase("two threads, random pages");
	MT_CHECK(!posix_memalign((void **)&r, pg, len), "posix_memalign");
	a2a(s, r, per, 6, true);
	a = (struct reader){r, per, (len + pg - 1) / pg, 11u + mt_rank, 6, 0};
	b = a;
	b.seed = 97u + mt_rank;
	pthread_create(&ta, NULL, read_pages, &a);
	pthread_create(&tb, NULL, read_pages, &b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	MT_CHECK(a.bad == SIZE_MAX && b.bad == SIZE_MAX,
		 "random pages: bad byte %zu / %zu", a.bad, b.bad);
	check_all(r, per, 6, 0, "two threads");
	free(s);
	free(r);
}

/* The send buffer is the program's again on return: overwrite it at
 * once; the others must still get what it held during the call. */
static void t_send_reuse(size_t per)
{
	unsigned char *s = mt_malloc(per * mt_size);
	unsigned char *r = mt_malloc(per * mt_size);

	mt_phase("send buffer reused");
	a2a(s, r, per, 7, true);
	memset(s, 0xa5, per * mt_size);
	check_all(r, per, 7, 0, "send reuse");
	free(s);
	free(r);
}

/* A buffer inside a larger allocation: the bytes around it share its
 * first and last pages, are never protected, and never change. */
static void t_shared_pages(size_t per)
{
	size_t len = per * mt_size, pad = 100;
	unsigned char *big = mt_malloc(len + 2 * pad + 3);
	unsigned char *r = big + pad + 3, *s = mt_malloc(len);

	mt_phase("shared pages");
	memset(big, 0x3c, len + 2 * pad + 3);
	a2a(s, r, per, 8, true);
	/* the neighbours first: readable and untouched before the data */
	for (size_t i = 0; i < pad + 3; i++)
		MT_CHECK(big[i] == 0x3c, "byte %zu before the buffer", i);
	for (size_t i = 0; i < pad; i++)
		MT_CHECK(r[len + i] == 0x3c, "byte %zu after the buffer", i);
	big[0] = 1;
	r[len] = 2;
	check_all(r, per, 8, 0, "shared pages");
	MT_CHECK(big[0] == 1 && r[len] == 2, "neighbours lost their writes");
	free(s);
	free(big);
}

/* Straight from the call to the MPI: the kernel would fail on a guarded
 * page (a single-copy read), so the glue opens it first. */
static void t_pass_on(size_t per)
{
	size_t len = per * mt_size;
	unsigned char *s = mt_malloc(len), *r = mt_malloc(len);
	unsigned char *got = mt_malloc(len), *win_mem;
	int right = (mt_rank + 1) % mt_size,
	    left = (mt_rank + mt_size - 1) % mt_size;
	MPI_Win win;
	unsigned long sum = 0, want = 0, all = 0, allwant = 0;

	mt_phase("received buffer passed on");
	/* MPI_Send / MPI_Recv around a ring */
	a2a(s, r, per, 9, true);
	MT_MPI(MPI_Sendrecv(r, (int)len, MPI_BYTE, right, 1, got, (int)len,
			    MPI_BYTE, left, 1, MPI_COMM_WORLD,
			    MPI_STATUS_IGNORE));
	for (size_t o = 0; o < len; o++)
		MT_CHECK(got[o] == val((int)(o / per), left, o % per, 9),
			 "sendrecv byte %zu", o);
		/* MPI_Put into the right neighbour's window.  Not under
		 * MPICH 4.0 (ch4:ucx): its own Put of this buffer delivers
		 * wrong bytes at 3 ranks without the glue too (fence and
		 * passive target alike). */
#if !defined(MPICH_VERSION)
	MT_MPI(MPI_Win_allocate((MPI_Aint)len, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
				&win_mem, &win));
	a2a(s, r, per, 10, true);
	MT_MPI(MPI_Win_fence(0, win));
	MT_MPI(MPI_Put(r, (int)len, MPI_BYTE, right, 0, (int)len, MPI_BYTE,
		       win));
	MT_MPI(MPI_Win_fence(0, win));
	for (size_t o = 0; o < len; o++)
		MT_CHECK(win_mem[o] == val((int)(o / per), left, o % per, 10),
			 "put byte %zu", o);
	MT_MPI(MPI_Win_free(&win));
#else
	(void)win;
	(void)win_mem;
#endif
	/* a collective (not one T-NBC takes) */
	a2a(s, r, per, 11, true);
	MT_MPI(MPI_Allreduce(r, got, (int)len, MPI_BYTE, MPI_BXOR,
			     MPI_COMM_WORLD));
	for (size_t o = 0; o < len; o++) {
		unsigned char x = 0;

		for (int d = 0; d < mt_size; d++)
			x ^= val((int)(o / per), d, o % per, 11);
		sum += got[o];
		want += x;
	}
	MT_CHECK(sum == want, "allreduce of received data: %lu want %lu", sum,
		 want);
	/* an alltoallw, which T-NBC does not take: each block goes back to
	 * the member it came from */
	{
		int *c = calloc(2 * (size_t)mt_size, sizeof(int)),
		    *d = c + mt_size;
		MPI_Datatype *t = malloc((size_t)mt_size * sizeof(*t));
		size_t bad = 0;

		MT_CHECK(c && t, "out of memory");
		for (int q = 0; q < mt_size; q++) {
			c[q] = (int)per;
			d[q] = q * (int)per;
			t[q] = MPI_BYTE;
		}
		a2a(s, r, per, 18, true);
		MT_MPI(MPI_Alltoallw(r, c, d, t, got, c, d, t, MPI_COMM_WORLD));
		for (size_t o = 0; o < len; o++)
			bad += got[o] !=
			       val(mt_rank, (int)(o / per), o % per, 18);
		MT_CHECK(!bad, "alltoallw of received data: %zu bytes wrong",
			 bad);
		free(c);
		free(t);
	}
	/* a reduce_scatter of uneven blocks (member 0 the largest), a
	 * received buffer its input, and one in place */
	for (int ip = 0; ip < 2; ip++) {
		int *cnt = calloc((size_t)mt_size, sizeof(int));
		size_t at = 0;
		int bad = 0;

		for (int i = 0; i < mt_size; i++)
			cnt[i] = (int)per;
		if (mt_size > 1) {
			cnt[0] += (int)(per / 2);
			cnt[mt_size - 1] -= (int)(per / 2);
		}
		for (int i = 0; i < mt_rank; i++)
			at += (size_t)cnt[i];
		a2a(s, r, per, 13 + ip, true);
		if (ip)
			MT_MPI(MPI_Reduce_scatter(MPI_IN_PLACE, r, cnt,
						  MPI_BYTE, MPI_BXOR,
						  MPI_COMM_WORLD));
		else
			MT_MPI(MPI_Reduce_scatter(r, got, cnt, MPI_BYTE,
						  MPI_BXOR, MPI_COMM_WORLD));
		for (size_t i = 0; i < (size_t)cnt[mt_rank]; i++) {
			size_t g = at + i;
			unsigned char x = 0;

			for (int d = 0; d < mt_size; d++)
				x ^= val((int)(g / per), d, g % per, 13 + ip);
			bad += (ip ? r : got)[i] != x;
		}
		MT_CHECK(!bad, "reduce_scatter%s of received data: %d wrong",
			 ip ? " in place" : "", bad);
		free(cnt);
	}
	/* and again at once with the result as the next send buffer */
	a2a(s, r, per, 12, true);
	MT_MPI(MPI_Alltoall(r, (int)per, MPI_BYTE, got, (int)per, MPI_BYTE,
			    MPI_COMM_WORLD));
	for (int src = 0; src < mt_size; src++)
		for (size_t i = 0; i < per; i++) {
			all += got[(size_t)src * per + i];
			allwant += val(mt_rank, src, i, 12);
		}
	MT_CHECK(all == allwant, "alltoall of received data");
	free(s);
	free(r);
	free(got);
}

/* Alltoallv with uneven counts, gaps and a slice out of order. */
static void t_alltoallv(size_t per)
{
	int n = mt_size;
	int *sc = calloc(n, sizeof(int)), *sd = calloc(n, sizeof(int));
	int *rc = calloc(n, sizeof(int)), *rd = calloc(n, sizeof(int));
	size_t stot = 0, rtot = 0;
	unsigned char *s, *r;

	mt_phase("alltoallv");
	/* src sends dst (per / (1 + (src + dst) % 3)) bytes; the receive
	 * slices in reverse rank order, 64 bytes apart */
	for (int d = 0; d < n; d++) {
		sc[d] = (int)(per / (1 + (mt_rank + d) % 3));
		sd[d] = (int)stot;
		stot += (size_t)sc[d];
	}
	for (int k = n - 1; k >= 0; k--) {
		rc[k] = (int)(per / (1 + (k + mt_rank) % 3));
		rd[k] = (int)rtot;
		rtot += (size_t)rc[k] + 64;
	}
	s = mt_malloc(stot + 1);
	r = mt_malloc(rtot + 1);
	memset(r, 0x77, rtot);
	for (int d = 0; d < n; d++)
		for (int i = 0; i < sc[d]; i++)
			s[sd[d] + i] = val(mt_rank, d, (size_t)i, 13);
	if (mt_rank == 1)
		mt_sleep_ms(50);
	MT_MPI(MPI_Alltoallv(s, sc, sd, MPI_BYTE, r, rc, rd, MPI_BYTE,
			     MPI_COMM_WORLD));
	for (int k = 0; k < n; k++) {
		for (int i = 0; i < rc[k]; i++)
			MT_CHECK(r[rd[k] + i] == val(k, mt_rank, (size_t)i, 13),
				 "alltoallv byte %d from %d", i, k);
		for (int i = 0; i < 64; i++)
			MT_CHECK(r[rd[k] + rc[k] + i] == 0x77,
				 "alltoallv gap byte %d after %d", i, k);
	}
	free(s);
	free(r);
	free(sc);
	free(sd);
	free(rc);
	free(rd);
}

static void t_in_place(size_t per)
{
	unsigned char *r = mt_malloc(per * mt_size);

	mt_phase("in place");
	fill_send(r, per, 14);
	if (mt_rank == 1)
		mt_sleep_ms(50);
	MT_MPI(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, (int)per,
			    MPI_BYTE, MPI_COMM_WORLD));
	check_all(r, per, 14, 1, "in place");
	free(r);
}

/* The program's own SIGSEGV handler still gets its own faults while
 * T-NBC guards a buffer. */
static sigjmp_buf jb;
static volatile sig_atomic_t app_faults;

static void app_handler(int sig)
{
	(void)sig;
	app_faults++;
	siglongjmp(jb, 1);
}

static void t_own_handler(size_t per)
{
	struct sigaction sa, old;
	unsigned char *s = mt_malloc(per * mt_size),
		      *r = mt_malloc(per * mt_size);
	unsigned char *trap =
		mmap(NULL, pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	mt_phase("own handler");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = app_handler;
	sigemptyset(&sa.sa_mask);
	MT_CHECK(!sigaction(SIGSEGV, &sa, &old), "sigaction");
	a2a(s, r, per, 15, true);
	if (!sigsetjmp(jb, 1))
		(void)*(volatile unsigned char *)trap;
	MT_CHECK(app_faults == 1, "the program's handler ran %d times",
		 (int)app_faults);
	check_all(r, per, 15, 0, "own handler");
	sigaction(SIGSEGV, &old, NULL);
	munmap(trap, pg);
	free(s);
	free(r);
}

/* MPI_Bcast from each root in turn: the pieces read at once (from the
 * end for odd roots), the root's buffer overwritten as soon as its call
 * returns. */
static void t_bcast(size_t len)
{
	unsigned char *b = mt_malloc(len + 1);

	mt_phase("bcast %zu B", len);
	for (int root = 0; root < mt_size; root++) {
		int seed = 18 + root;

		if (mt_rank == root)
			for (size_t i = 0; i < len; i++)
				b[i] = val(root, 0, i, seed);
		else
			memset(b, 0, len);
		if (mt_rank == root)
			mt_sleep_ms(20);
		MT_MPI(MPI_Bcast(b, (int)len, MPI_BYTE, root, MPI_COMM_WORLD));
		if (mt_rank == root) {
			memset(b, 0xee, len);
			continue;
		}
		for (size_t k = 0; k < len; k++) {
			size_t i = root & 1 ? len - 1 - k : k;

			MT_CHECK(b[i] == val(root, 0, i, seed),
				 "bcast from %d: byte %zu of %zu: %u want %u",
				 root, i, len, b[i], val(root, 0, i, seed));
		}
	}
	free(b);
}

/* A buffer freed without being read after a call: malloc hands the
 * memory out again, and the kernel must be able to write there (a read
 * from a pipe), which it cannot on a page still protected. */
static void t_free_unread(size_t per)
{
	size_t len = per * mt_size, chunk = len < 60000 ? len : 60000;
	unsigned char *s = mt_malloc(len), *r = mt_malloc(len), *again;
	int fd[2];
	ssize_t n;

	mt_phase("freed unread");
	a2a(s, r, per, 17, true);
	free(r);
	again = mt_malloc(len);
	MT_CHECK(!pipe(fd), "pipe");
	MT_CHECK(write(fd[1], s, chunk) == (ssize_t)chunk, "write to pipe");
	n = read(fd[0], again, chunk);
	MT_CHECK(n == (ssize_t)chunk, "read(2) into reused memory: %zd (%s)", n,
		 n < 0 ? strerror(errno) : "short");
	MT_CHECK(!memcmp(again, s, chunk), "read(2) data");
	close(fd[0]);
	close(fd[1]);
	MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
	free(again);
	free(s);
}

/* fork right after a call: the child reads the data as the parent
 * does. */
static void t_fork(size_t per)
{
	unsigned char *s = mt_malloc(per * mt_size),
		      *r = mt_malloc(per * mt_size);
	pid_t pid;
	int st = 0;

	mt_phase("fork");
	a2a(s, r, per, 16, true);
	pid = fork();
	if (pid == 0) {
		for (int k = 0; k < mt_size; k++)
			if (check_slice(r + (size_t)k * per, k, per, 16, 0) !=
			    SIZE_MAX)
				_exit(3);
		_exit(0);
	}
	MT_CHECK(pid > 0, "fork");
	waitpid(pid, &st, 0);
	MT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		 "the child read wrong data (status %d)", st);
	check_all(r, per, 16, 0, "fork parent");
	free(s);
	free(r);
}

/*
 * TNBC_MPI_TNBC_ADAPT (on by default): at each call site T-NBC is tried
 * against the plain way and kept only where the program's loop ran
 * faster with it.  Three sites, each in a loop of ADAPT_ROUNDS; the
 * ranks behave differently (rank 0 reads at once, rank 1 is late with
 * its sends, the others compute before they read) so that their
 * verdicts may differ, which both ways' shared messages allow.  Every
 * result is checked; check-glue reads the report: each rank's warm-up
 * and plain trials, and its T-NBC trials, at each site.
 */
#define ADAPT_ROUNDS 12

/* Rank 1 last at every call (its slice lies inside the others'
 * buffers, on guarded pages), ranks from 2 on computing before they
 * read, rank 0 reading at once. */
static void adapt_pace(bool before)
{
	if (before && mt_rank == 1)
		mt_sleep_ms(4);
	if (!before && mt_rank >= 2)
		mt_sleep_ms(2);
}

static void t_adapt(size_t per)
{
	int n = mt_size;
	unsigned char *s = mt_malloc(per * n), *r = mt_malloc(per * n);
	size_t blen = 4 * per; /* pieces that land on guarded pages */
	unsigned char *b = mt_malloc(blen + 1);
	int *sc = calloc(n, sizeof(int)), *sd = calloc(n, sizeof(int));
	int *rc = calloc(n, sizeof(int)), *rd = calloc(n, sizeof(int));
	size_t rtot = 0, stot = 0;

	mt_phase("adapt, %d rounds a site", ADAPT_ROUNDS);
	for (int round = 0; round < ADAPT_ROUNDS; round++) {
		fill_send(s, per, round);
		adapt_pace(true);
		MT_MPI(MPI_Alltoall(s, (int)per, MPI_BYTE, r, (int)per,
				    MPI_BYTE, MPI_COMM_WORLD));
		adapt_pace(false);
		check_all(r, per, round, round & 1, "adapt alltoall");
	}
	/* alltoallv: uneven slices, packed */
	for (int d = 0; d < n; d++) {
		sc[d] = (int)(per / (1 + (mt_rank + d) % 2));
		sd[d] = (int)stot;
		stot += (size_t)sc[d];
		rc[d] = (int)(per / (1 + (d + mt_rank) % 2));
		rd[d] = (int)rtot;
		rtot += (size_t)rc[d];
	}
	for (int round = 0; round < ADAPT_ROUNDS; round++) {
		for (int d = 0; d < n; d++)
			for (int i = 0; i < sc[d]; i++)
				s[sd[d] + i] =
					val(mt_rank, d, (size_t)i, round + 40);
		adapt_pace(true);
		MT_MPI(MPI_Alltoallv(s, sc, sd, MPI_BYTE, r, rc, rd, MPI_BYTE,
				     MPI_COMM_WORLD));
		adapt_pace(false);
		for (int k = n - 1; k >= 0; k--) {
			int bad = -1;

			for (int i = rc[k] - 1; i >= 0 && bad < 0; i--)
				if (r[rd[k] + i] !=
				    val(k, mt_rank, (size_t)i, round + 40))
					bad = i;
			MT_CHECK(bad < 0,
				 "adapt alltoallv round %d: byte %d from %d",
				 round, bad, k);
		}
	}
	/* bcast from rank 1, the late one; the receivers' ways are their
	 * own (the root's does not matter: it guards nothing) */
	for (int round = 0; round < ADAPT_ROUNDS; round++) {
		int root = n > 1 ? 1 : 0;

		for (size_t i = 0; i < blen; i++)
			b[i] = mt_rank == root ? val(root, 0, i, round + 80)
					       : 0;
		adapt_pace(true);
		MT_MPI(MPI_Bcast(b, (int)blen, MPI_BYTE, root, MPI_COMM_WORLD));
		adapt_pace(false);
		for (size_t k = 0; k < blen; k++) {
			size_t i = round & 1 ? blen - 1 - k : k;

			if (b[i] != val(root, 0, i, round + 80)) {
				MT_CHECK(0, "adapt bcast round %d: byte %zu",
					 round, i);
				break;
			}
		}
	}
	free(s);
	free(r);
	free(b);
	free(sc);
	free(sd);
	free(rc);
	free(rd);
}

int main(int argc, char **argv)
{
	int provided;
	size_t per = 3 * 4096 + 40; /* unaligned slices of several pages */

	mt_init_thread(&argc, &argv, "glue_tnbc", MPI_THREAD_MULTIPLE, 1,
		       &provided);
	pg = (size_t)sysconf(_SC_PAGESIZE);
	if (argc > 1 && !strcmp(argv[1], "--adapt")) {
		t_adapt(64 * 1024 + 40);
		mt_finish("T-NBC tried against the plain way, %d rounds a site",
			  ADAPT_ROUNDS);
		return 0;
	}
	if (argc > 1)
		per = (size_t)strtoull(argv[1], NULL, 0);
	t_read_at_once(per);
	t_read_at_once(pg);
	t_read_at_once(64 * 1024);
	t_last_byte_first(per);
	t_two_threads(per);
	t_send_reuse(per);
	t_shared_pages(per);
	t_pass_on(per);
	/* past Open MPI vader's 32 KiB first fragment: the rest goes by
	 * a single-copy read the kernel makes (CMA) */
	t_pass_on(64 * 1024);
	t_alltoallv(per);
	t_in_place(per);
	t_own_handler(per);
	t_fork(per);
	t_free_unread(per);
	t_bcast(per);
	t_bcast(1024 * 1024 + 13);
	t_bcast(8 * 1024 * 1024 + 13);
	mt_finish("T-NBC alltoall, alltoallv and bcast, %zu B slices", per);
	return 0;
}
