/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The host's link board (tnbc_link.h).  One file per user and network
 * namespace in the host's /dev/shm: processes that share both share the
 * link.  Its layout is zero when fresh, so whoever creates it needs no
 * step of its own, and every field is read and written atomically by
 * processes that do not trust each other: what a slot says can at worst
 * hold a transfer back for FI_TNBC_LINK_HOLD_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tnbc.h"
#include "tnbc_link.h"

#define TNBC_LINK_MAGIC	  0x4b4e494c43424e54ull /* "TNBCLINK" */
#define TNBC_LINK_VERSION 1u
#define TNBC_LINK_SLOTS	  64
/* How long a hold lasts before the holder's process is asked whether it
 * still lives, and how often that is asked again (a /proc read). */
#define TNBC_LINK_CHECK_NS 5000000u

struct tnbc_link_slot {
	_Atomic int32_t pid; /* 0: free */
	/* the highest priority among the process's queued transfers to
	 * other hosts, plus one; 0: none */
	_Atomic uint32_t top;
	/* when the process started (/proc/PID/stat): a pid reused after
	 * its holder died is not its holder; 0 while being claimed */
	_Atomic uint64_t start;
	char pad[48];
};

struct tnbc_link_board {
	_Atomic uint64_t magic; /* TNBC_LINK_MAGIC ^ TNBC_LINK_VERSION */
	_Atomic uint32_t used; /* slots claimed at least once: scans end */
	char pad[52];
	struct tnbc_link_slot slot[TNBC_LINK_SLOTS];
};

static struct {
	pthread_mutex_t lock;
	int refs;
	struct tnbc_link_board *_Atomic board;
	int mine; /* this process's slot */
	unsigned top; /* what it says there; under lock */
	atomic_uint cnt[FI_TNBC_PRIO_MAX + 1];
	atomic_uint_fast64_t holds, overruns, checked_ns;
	bool atfork;
} tnbc_link = {.lock = PTHREAD_MUTEX_INITIALIZER, .mine = -1};

/* Field 22 of /proc/PID/stat, the start time in clock ticks since boot;
 * 0 when it cannot be read (the process is gone). */
static uint64_t tnbc_link_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: fields count
	 * from the last ')' */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1,
			 " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u"
			 " %*d %*d %*d %*d %*d %*d %llu",
			 &start) != 1)
		return 0;
	return start;
}

static bool tnbc_link_alive(struct tnbc_link_slot *s, int32_t pid)
{
	uint64_t start = atomic_load(&s->start);

	if (pid <= 0)
		return false;
	if (!start) /* being claimed, or from a process we cannot read */
		return kill(pid, 0) == 0 || errno != ESRCH;
	return tnbc_link_start(pid) == start;
}

/* A fork's child inherits the mapping and the counts but not the
 * transfers: it must not speak for its parent's slot, nor publish the
 * parent's queue if it joins on its own. */
static void tnbc_link_atfork_child(void)
{
	atomic_store(&tnbc_link.board, NULL);
	tnbc_link.mine = -1;
	tnbc_link.refs = 0;
	tnbc_link.top = 0;
	for (unsigned p = 0; p <= FI_TNBC_PRIO_MAX; p++)
		atomic_store(&tnbc_link.cnt[p], 0);
	pthread_mutex_init(&tnbc_link.lock, NULL);
}

static struct tnbc_link_board *tnbc_link_map(void)
{
	struct tnbc_link_board *b;
	char name[96];
	struct stat st, ns;
	uint64_t want = TNBC_LINK_MAGIC ^ TNBC_LINK_VERSION, magic = 0;
	int fd;

	if (stat("/proc/self/ns/net", &ns))
		ns.st_ino = 0;
	snprintf(name, sizeof(name), "/tnbc-link-%u-%" PRIu64,
		 (unsigned)geteuid(), (uint64_t)ns.st_ino);
	fd = shm_open(name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN,
			"link board %s: %s; transfers to other hosts are not "
			"ordered with this host's other processes\n",
			name, strerror(errno));
		return NULL;
	}
	/* another user's file, or one others may write, is not ours to
	 * trust; a short one would fault */
	if (fstat(fd, &st) || st.st_uid != geteuid() || (st.st_mode & 0077) ||
	    (st.st_size != (off_t)sizeof(*b) &&
	     (st.st_size || ftruncate(fd, sizeof(*b))))) {
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN,
			"link board %s is not this user's own (or has "
			"another size): not used\n",
			name);
		close(fd);
		return NULL;
	}
	b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (b == MAP_FAILED)
		return NULL;
	if (!atomic_compare_exchange_strong(&b->magic, &magic, want) &&
	    magic != want) {
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN,
			"link board %s is of another version: not used\n",
			name);
		munmap(b, sizeof(*b));
		return NULL;
	}
	return b;
}

/* A slot for this process.  Slots of processes that died without
 * leaving (killed) are freed first: the file outlives them. */
static int tnbc_link_claim(struct tnbc_link_board *b)
{
	int32_t me = (int32_t)getpid();
	uint64_t start = tnbc_link_start(me);
	uint32_t used;
	int i;

	for (i = 0; i < TNBC_LINK_SLOTS; i++) {
		struct tnbc_link_slot *s = &b->slot[i];
		int32_t p = atomic_load(&s->pid);
		uint64_t old = atomic_load(&s->start);

		/* its start first: whoever looks meanwhile sees a slot
		 * being claimed, and asks kill() about its pid */
		if (!p || tnbc_link_alive(s, p) ||
		    !atomic_compare_exchange_strong(&s->start, &old, 0))
			continue;
		atomic_store(&s->top, 0);
		(void)atomic_compare_exchange_strong(&s->pid, &p, 0);
	}
	for (i = 0; i < TNBC_LINK_SLOTS; i++) {
		int32_t z = 0;

		if (atomic_compare_exchange_strong(&b->slot[i].pid, &z, me))
			break;
	}
	if (i == TNBC_LINK_SLOTS)
		return -1;
	atomic_store(&b->slot[i].top, 0);
	atomic_store(&b->slot[i].start, start);
	used = atomic_load(&b->used);
	while (used < (uint32_t)i + 1 &&
	       !atomic_compare_exchange_weak(&b->used, &used, (uint32_t)i + 1))
		;
	return i;
}

bool tnbc_link_join(void)
{
	struct tnbc_link_board *b;
	bool ok = true;

	if (!tnbc_env.link_share)
		return false;
	pthread_mutex_lock(&tnbc_link.lock);
	if (tnbc_link.refs) {
		tnbc_link.refs++;
		goto out;
	}
	b = tnbc_link_map();
	if (b)
		tnbc_link.mine = tnbc_link_claim(b);
	if (b && tnbc_link.mine < 0) {
		FI_WARN(&tnbc_prov, FI_LOG_DOMAIN,
			"link board: all %d slots are held by live processes; "
			"this one's transfers are not ordered with theirs\n",
			TNBC_LINK_SLOTS);
		munmap(b, sizeof(*b));
		b = NULL;
	}
	if (!b) {
		ok = false;
		goto out;
	}
	if (!tnbc_link.atfork)
		tnbc_link.atfork =
			!pthread_atfork(NULL, NULL, tnbc_link_atfork_child);
	tnbc_link.top = 0;
	tnbc_link.refs = 1;
	atomic_store(&tnbc_link.board, b);
out:
	pthread_mutex_unlock(&tnbc_link.lock);
	return ok;
}

void tnbc_link_leave(void)
{
	struct tnbc_link_board *b;
	struct tnbc_link_slot *s;

	pthread_mutex_lock(&tnbc_link.lock);
	b = atomic_load(&tnbc_link.board);
	if (!b || --tnbc_link.refs) {
		pthread_mutex_unlock(&tnbc_link.lock);
		return;
	}
	atomic_store(&tnbc_link.board, NULL);
	s = &b->slot[tnbc_link.mine];
	atomic_store(&s->top, 0);
	atomic_store(&s->start, 0);
	atomic_store(&s->pid, 0);
	tnbc_link.mine = -1;
	pthread_mutex_unlock(&tnbc_link.lock);
	munmap(b, sizeof(*b));
}

void tnbc_link_queued(uint8_t prio, int delta)
{
	struct tnbc_link_board *b;
	unsigned old = atomic_fetch_add(&tnbc_link.cnt[prio], (unsigned)delta);
	unsigned top = 0;

	/* only a count that crosses zero can move the top; each crossing
	 * looks again after its own change, so the last look is right */
	if (!(delta > 0 ? old == 0 : old == 1))
		return;
	pthread_mutex_lock(&tnbc_link.lock);
	for (unsigned p = FI_TNBC_PRIO_MAX + 1; p-- > 0;)
		if (atomic_load(&tnbc_link.cnt[p])) {
			top = p + 1;
			break;
		}
	b = atomic_load(&tnbc_link.board);
	if (b && top != tnbc_link.top)
		atomic_store(&b->slot[tnbc_link.mine].top, top);
	tnbc_link.top = top;
	pthread_mutex_unlock(&tnbc_link.lock);
}

/* Forgets a slot whose process is gone, if `blocker` is one. */
static void tnbc_link_check(struct tnbc_link_board *b, int blocker,
			    uint64_t now)
{
	struct tnbc_link_slot *s = &b->slot[blocker];
	uint64_t last = atomic_load(&tnbc_link.checked_ns);
	int32_t pid = atomic_load(&s->pid);

	if (now - last < TNBC_LINK_CHECK_NS ||
	    !atomic_compare_exchange_strong(&tnbc_link.checked_ns, &last, now))
		return;
	if (tnbc_link_alive(s, pid))
		return;
	FI_INFO(&tnbc_prov, FI_LOG_DOMAIN,
		"link board: slot %d's process %d is gone\n", blocker,
		(int)pid);
	atomic_store(&s->top, 0);
}

bool tnbc_link_turn(uint8_t prio, uint64_t *held_ns)
{
	struct tnbc_link_board *b = atomic_load(&tnbc_link.board);
	uint32_t used;
	uint64_t now;
	int blocker = -1;

	if (!b || *held_ns == UINT64_MAX)
		return true;
	used = atomic_load_explicit(&b->used, memory_order_relaxed);
	if (used > TNBC_LINK_SLOTS)
		used = TNBC_LINK_SLOTS;
	for (int i = 0; i < (int)used && blocker < 0; i++)
		if (i != tnbc_link.mine &&
		    atomic_load_explicit(&b->slot[i].top,
					 memory_order_relaxed) > prio + 1u)
			blocker = i;
	if (blocker < 0) {
		*held_ns = 0;
		return true;
	}
	now = tnbc_now_ns();
	if (!*held_ns) {
		*held_ns = now;
		atomic_fetch_add_explicit(&tnbc_link.holds, 1,
					  memory_order_relaxed);
		return false;
	}
	if (now - *held_ns >= tnbc_env.link_hold_ms * 1000000u) {
		/* a neighbour that never drains: go on, and stay gone */
		*held_ns = UINT64_MAX;
		atomic_fetch_add_explicit(&tnbc_link.overruns, 1,
					  memory_order_relaxed);
		return true;
	}
	if (now - *held_ns >= TNBC_LINK_CHECK_NS)
		tnbc_link_check(b, blocker, now);
	return false;
}

uint64_t tnbc_link_holds(void)
{
	return atomic_load(&tnbc_link.holds);
}

uint64_t tnbc_link_overruns(void)
{
	return atomic_load(&tnbc_link.overruns);
}
