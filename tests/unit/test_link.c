/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The host's link board (tnbc_link.h) between real processes: a child
 * joins and says it has a transfer of priority 200 queued; this process
 * must then hold its own of a lower priority back, let equal and higher
 * ones go, go anyway once FI_TNBC_LINK_HOLD_MS has passed, stop
 * counting a neighbour that was killed without leaving, and refuse a
 * board file another user could write.
 *
 * Each test runs in a network namespace of its own where it can make
 * one (root), so that no other test's traffic shares its board.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tnbc_unit.h"

#include "tnbc_link.h"

/* A neighbour: a child that joins, queues one transfer of `prio`, says
 * so on the pipe, then leaves (or dies, `die`) when told. */
struct neighbour {
	pid_t pid;
	int go[2]; /* parent -> child: leave now */
};

static void neighbour_start(struct neighbour *n, uint8_t prio, bool die)
{
	int ready[2];
	char c = 0;

	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(n->go), 0);
	n->pid = fork();
	ck_assert_int_ge(n->pid, 0);
	if (!n->pid) {
		if (!tnbc_link_join())
			_exit(2);
		tnbc_link_queued(prio, 1);
		(void)!write(ready[1], "r", 1);
		(void)!read(n->go[0], &c, 1);
		if (die)
			raise(SIGKILL); /* no leave: its slot stays */
		tnbc_link_queued(prio, -1);
		tnbc_link_leave();
		_exit(0);
	}
	close(ready[1]);
	ck_assert_msg(read(ready[0], &c, 1) == 1,
		      "the neighbour could not join the board");
	close(ready[0]);
}

static void neighbour_end(struct neighbour *n, bool died)
{
	int st;

	(void)!write(n->go[1], "g", 1);
	ck_assert_int_eq(waitpid(n->pid, &st, 0), n->pid);
	if (died)
		ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	else
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(n->go[0]);
	close(n->go[1]);
}

/* The board's name in this network namespace. */
static void board_name(char *name, size_t len)
{
	struct stat ns;

	ck_assert_int_eq(stat("/proc/self/ns/net", &ns), 0);
	snprintf(name, len, "/tnbc-link-%u-%" PRIu64, (unsigned)geteuid(),
		 (uint64_t)ns.st_ino);
}

/* Whether the test has a board of its own (root); else it shares the
 * host's, which only traffic to other hosts at priorities above 0 uses.
 * A new namespace may have a dead one's number, and find its board. */
static bool link_setup(void)
{
	bool own = unshare(CLONE_NEWNET) == 0;
	char name[96];

	if (own) {
		board_name(name, sizeof(name));
		(void)shm_unlink(name);
	}
	tnbc_env.link_share = 1;
	tnbc_env.link_hold_ms = TU_WAIT_MS;
	return own;
}

/* A namespace's board outlives it: the test's own goes with it. */
static void link_teardown(bool own)
{
	char name[96];

	if (own) {
		board_name(name, sizeof(name));
		(void)shm_unlink(name);
	}
}

/* Turns until the transfer may go, at most TU_WAIT_MS; its time in ms. */
static uint64_t turn_wait_ms(uint8_t prio)
{
	uint64_t held = 0, t0 = tnbc_now_ns();

	while (!tnbc_link_turn(prio, &held)) {
		ck_assert_msg(tnbc_now_ns() - t0 <
				      (uint64_t)TU_WAIT_MS * 1000000u,
			      "held for over %d ms", TU_WAIT_MS);
		usleep(200);
	}
	return (tnbc_now_ns() - t0) / 1000000u;
}

START_TEST(link_order)
{
	bool own;
	struct neighbour n;
	uint64_t held = 0, holds;

	own = link_setup();
	neighbour_start(&n, 200, false);
	ck_assert(tnbc_link_join());
	holds = tnbc_link_holds();
	/* lower waits, once counted; equal and higher go */
	ck_assert(!tnbc_link_turn(100, &held));
	ck_assert(held != 0);
	ck_assert(!tnbc_link_turn(100, &held));
	ck_assert_uint_eq(tnbc_link_holds(), holds + 1);
	ck_assert(tnbc_link_turn(200, &(uint64_t){0}));
	ck_assert(tnbc_link_turn(255, &(uint64_t){0}));
	/* its own queued transfers hold nobody of its own process */
	tnbc_link_queued(250, 1);
	ck_assert(tnbc_link_turn(250, &(uint64_t){0}));
	tnbc_link_queued(250, -1);
	/* the neighbour's transfer leaves: the held one goes */
	neighbour_end(&n, false);
	ck_assert(tnbc_link_turn(100, &held));
	ck_assert_uint_eq(held, 0);
	tnbc_link_leave();
	link_teardown(own);
}
END_TEST

START_TEST(link_hold_bound)
{
	bool own;
	struct neighbour n;
	uint64_t over, ms;

	own = link_setup();
	tnbc_env.link_hold_ms = 50;
	neighbour_start(&n, 200, false);
	ck_assert(tnbc_link_join());
	over = tnbc_link_overruns();
	/* a live neighbour that never drains holds for the bound only */
	ms = turn_wait_ms(10);
	ck_assert_msg(ms >= 50, "went after %" PRIu64 " ms, before the bound",
		      ms);
	ck_assert_uint_eq(tnbc_link_overruns(), over + 1);
	neighbour_end(&n, false);
	tnbc_link_leave();
	link_teardown(own);
}
END_TEST

START_TEST(link_dead_neighbour)
{
	bool own;
	struct neighbour n;
	uint64_t over, ms;

	own = link_setup();
	neighbour_start(&n, 200, true);
	neighbour_end(&n, true);
	ck_assert(tnbc_link_join());
	over = tnbc_link_overruns();
	/* killed with its transfer counted: its slot stops counting once
	 * asked, long before the bound */
	ms = turn_wait_ms(10);
	ck_assert_msg(ms < (uint64_t)TU_WAIT_MS / 2,
		      "held %" PRIu64 " ms by a dead neighbour", ms);
	ck_assert_uint_eq(tnbc_link_overruns(), over);
	tnbc_link_leave();
	/* killed again: whoever joins next frees its slot at once */
	neighbour_start(&n, 200, true);
	neighbour_end(&n, true);
	ck_assert(tnbc_link_join());
	ck_assert(tnbc_link_turn(10, &(uint64_t){0}));
	tnbc_link_leave();
	link_teardown(own);
}
END_TEST

/* A fork's child that joins on its own does not publish the queue it
 * inherited from its parent. */
START_TEST(link_fork_child)
{
	int ready[2], go[2], st;
	bool own;
	pid_t pid;
	char c = 0;

	own = link_setup();
	ck_assert(tnbc_link_join());
	tnbc_link_queued(200, 1);
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		if (!tnbc_link_join())
			_exit(2);
		tnbc_link_queued(5, 1); /* one transfer of its own */
		(void)!write(ready[1], "r", 1);
		(void)!read(go[0], &c, 1);
		tnbc_link_queued(5, -1);
		tnbc_link_leave();
		_exit(0);
	}
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	/* the child has priority 5 queued, not its parent's 200 */
	ck_assert(tnbc_link_turn(100, &(uint64_t){0}));
	ck_assert(!tnbc_link_turn(4, &(uint64_t){0}));
	(void)!write(go[1], "g", 1);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	tnbc_link_queued(200, -1);
	tnbc_link_leave();
	link_teardown(own);
}
END_TEST

/* A board file others may write, or of another size, is not used. */
START_TEST(link_foreign_board)
{
	char name[96];
	int fd;

	/* the host's own board is not this test's to spoil */
	if (!link_setup())
		return;
	board_name(name, sizeof(name));
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchmod(fd, _i ? 0600 : 0666), 0);
	ck_assert_int_eq(ftruncate(fd, _i ? 100 : 0), 0);
	close(fd);
	ck_assert(!tnbc_link_join());
	/* and without a board every transfer goes */
	ck_assert(tnbc_link_turn(0, &(uint64_t){0}));
	ck_assert_int_eq(shm_unlink(name), 0);
	ck_assert(tnbc_link_join());
	tnbc_link_leave();
	tnbc_env.link_share = 0;
	ck_assert(!tnbc_link_join());
	link_teardown(true);
}
END_TEST

Suite *tu_link_suite(void)
{
	Suite *s = suite_create("link");
	TCase *tc = tcase_create("link");

	tcase_set_timeout(tc, 3 * TU_WAIT_MS / 1000);
	tcase_add_test(tc, link_order);
	tcase_add_test(tc, link_hold_bound);
	tcase_add_test(tc, link_dead_neighbour);
	tcase_add_test(tc, link_fork_child);
	tcase_add_loop_test(tc, link_foreign_board, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
