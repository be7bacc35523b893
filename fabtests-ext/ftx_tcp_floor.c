/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The kernel's floor under a 2-rank allreduce over TCP: two processes
 * exchange n bytes on one TCP socket (TCP_NODELAY; each writes its bytes
 * and busy-reads the other's), and nothing else crosses that socket.
 * They are timed the way ftx_bench_coll times fi_allreduce, and meet the
 * way its ranks do, through memory both share (common/ftx.c): rank 0
 * posts a start time 200 us ahead, both spin until it and exchange, and
 * the operation's time is from that start until the later of the two
 * holds the other's bytes.  No provider runs: this is what any stack
 * that moves one packet each way over a TCP socket pays on this machine,
 * the reference netns_compare.sh puts beside tnbc's and tcp;ofi_rxm's
 * allreduce.  Uses no libfabric.
 *
 *   ftx_tcp_floor -a ADDR [-p PORT] [-s 8,16] [-i N] [-t SEC]
 *
 * Rank 0 listens on ADDR (its own address).  As for the ftx programs,
 * FTX_HOSTS=pid0,pid1 puts rank r into the network namespace of the
 * r-th process (a host of tests/netns-lib.sh), and FTX_BIND=1 binds rank
 * r to the r-th CPU the program may use.  Prints CSV lines
 * "label,nprocs,bytes,median_us,min_us" (-l label, default x), as
 * ftx_bench_coll does.  Figures only: nothing passes or fails on time; a
 * wrong byte, a lost peer or the time limit (-t, default 600 s) is an
 * error (exit 1).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES  16
#define MAX_BYTES  4096
#define LEAD_NS	   200000 /* ftx_bench_coll's start, ahead of its broadcast */
#define CONNECT_NS 30000000000ull

/* What the two ranks share; each field has one writer. */
struct floor_shared {
	_Atomic uint64_t listening; /* rank 0: its socket takes connections */
	_Atomic uint64_t go; /* rank 0: operation number go started */
	uint64_t t0; /* its start, written before go */
	_Atomic uint64_t fin[2]; /* rank r: operation fin[r] done */
	uint64_t done[2]; /* when, written before fin */
};

static pid_t kid[2];

/* the time limit: both ranks end, and the run fails */
static void
on_alarm(int sig)
{
	static const char msg[] = "ftx_tcp_floor: time limit reached\n";

	(void) sig;
	for (int r = 0; r < 2; r++)
		if (kid[r] > 0)
			kill(kid[r], SIGKILL);
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

struct floor_opts {
	const char *addr, *label;
	int port, iters, nsizes;
	size_t sizes[MAX_SIZES];
};

static uint64_t
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t) t.tv_sec * 1000000000u + (uint64_t) t.tv_nsec;
}

static void
die(int rank, const char *what)
{
	fprintf(stderr, "ftx_tcp_floor: rank %d: %s: %s\n", rank, what,
		errno ? strerror(errno) : "failed");
	_exit(1);
}

/* All of len bytes, busy-reading (as a stack whose application polls
 * its completion queue would). */
static void
read_all(int rank, int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r =
			recv(fd, (char *) buf + got, len - got, MSG_DONTWAIT);

		if (r > 0) {
			got += (size_t) r;
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (!r)
			errno = ECONNRESET;
		die(rank, "read");
	}
}

static void
write_all(int rank, int fd, const void *buf, size_t len)
{
	size_t put = 0;

	while (put < len) {
		ssize_t r = send(fd, (const char *) buf + put, len - put,
				 MSG_NOSIGNAL);

		if (r > 0)
			put += (size_t) r;
		else if (r < 0 && errno != EAGAIN && errno != EINTR)
			die(rank, "write");
	}
}

static int
connect_pair(int rank, const struct floor_opts *o, struct floor_shared *sh)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t) o->port)};
	uint64_t end = now_ns() + CONNECT_NS;
	int one = 1, fd;

	if (inet_pton(AF_INET, o->addr, &sa.sin_addr) != 1) {
		errno = EINVAL;
		die(rank, o->addr);
	}
	if (rank == 0) {
		int l = socket(AF_INET, SOCK_STREAM, 0);

		if (l < 0 ||
		    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one,
			       sizeof(one)) ||
		    bind(l, (struct sockaddr *) &sa, sizeof(sa)) ||
		    listen(l, 1))
			die(rank, "listen");
		atomic_store(&sh->listening, 1);
		fd = accept(l, NULL, NULL);
		if (fd < 0)
			die(rank, "accept");
		close(l);
	} else {
		while (!atomic_load(&sh->listening)) {
			if (now_ns() > end) {
				errno = ETIMEDOUT;
				die(rank, "waiting for rank 0");
			}
			usleep(1000);
		}
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)))
			die(rank, "connect");
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die(rank, "TCP_NODELAY");
	return fd;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

static uint8_t
pattern(int rank, uint64_t op, size_t i)
{
	return (uint8_t) ((uint64_t) rank * 131 + op * 7 + i);
}

/* One size: n timed operations after n/10 untimed; *op numbers them
 * across sizes.  Rank 0 fills times, sorted. */
static void
run_size(int fd, int rank, struct floor_shared *sh, uint64_t *op, size_t bytes,
	 int n, uint64_t *times)
{
	uint8_t mine[MAX_BYTES], theirs[MAX_BYTES];

	for (int r = -(n / 10); r < n; r++) {
		uint64_t k = ++*op, t0, done;

		for (size_t i = 0; i < bytes; i++)
			mine[i] = pattern(rank, k, i);
		if (rank == 0) {
			t0 = now_ns() + LEAD_NS;
			sh->t0 = t0;
			atomic_store_explicit(&sh->go, k, memory_order_release);
		} else {
			while (atomic_load_explicit(&sh->go,
						    memory_order_acquire) != k)
				;
			t0 = sh->t0;
		}
		while (now_ns() < t0)
			;
		write_all(rank, fd, mine, bytes);
		read_all(rank, fd, theirs, bytes);
		done = now_ns();
		for (size_t i = 0; i < bytes; i++) {
			if (theirs[i] != pattern(!rank, k, i)) {
				fprintf(stderr,
					"ftx_tcp_floor: rank %d: %zu B, "
					"operation %d: byte %zu is %u, not "
					"%u\n",
					rank, bytes, r, i, theirs[i],
					pattern(!rank, k, i));
				_exit(1);
			}
		}
		sh->done[rank] = done;
		atomic_store_explicit(&sh->fin[rank], k, memory_order_release);
		if (rank == 1)
			continue;
		while (atomic_load_explicit(&sh->fin[1],
					    memory_order_acquire) != k)
			;
		if (sh->done[1] > done)
			done = sh->done[1];
		if (r >= 0)
			times[r] = done - t0;
	}
	if (rank == 0)
		qsort(times, (size_t) n, sizeof(*times), cmp_u64);
}

/* FTX_HOSTS and FTX_BIND, as common/ftx.c reads them (only the network
 * namespace matters here). */
static void
place_rank(int rank)
{
	const char *hosts = getenv("FTX_HOSTS"), *b = getenv("FTX_BIND");

	if (hosts && *hosts) {
		char path[64];
		long pid = strtol(hosts, NULL, 10);
		int fd;

		if (rank) {
			const char *comma = strchr(hosts, ',');

			pid = comma ? strtol(comma + 1, NULL, 10) : pid;
		}
		snprintf(path, sizeof(path), "/proc/%ld/ns/net", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET))
			die(rank, path);
		close(fd);
	}
	if (b && !strcmp(b, "1")) {
		cpu_set_t may, one;
		int cpu, nth = 0;

		if (sched_getaffinity(0, sizeof(may), &may) ||
		    CPU_COUNT(&may) < 2)
			return;
		for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
			if (CPU_ISSET(cpu, &may) && nth++ == rank)
				break;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			die(rank, "binding to a CPU");
	}
}

static void
rank_main(int rank, const struct floor_opts *o, struct floor_shared *sh)
{
	uint64_t *times = calloc((size_t) o->iters, sizeof(*times)), op = 0;
	int fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (!times)
		die(rank, "memory");
	place_rank(rank);
	fd = connect_pair(rank, o, sh);
	if (rank == 0)
		printf("label,nprocs,bytes,median_us,min_us\n");
	for (int s = 0; s < o->nsizes; s++) {
		run_size(fd, rank, sh, &op, o->sizes[s], o->iters, times);
		if (rank == 0)
			printf("%s,2,%zu,%.3f,%.3f\n", o->label, o->sizes[s],
			       times[o->iters / 2] / 1e3, times[0] / 1e3);
		fflush(stdout);
	}
	close(fd);
	free(times);
	_exit(0);
}

static int
parse_sizes(char *arg, size_t *out)
{
	int n = 0;

	for (char *s = strtok(arg, ","); s; s = strtok(NULL, ",")) {
		char *end;
		unsigned long v = strtoul(s, &end, 0);

		if (*end || !v || v > MAX_BYTES || n == MAX_SIZES)
			return -1;
		out[n++] = v;
	}
	return n;
}

static void
usage(void)
{
	fprintf(stderr,
		"usage: ftx_tcp_floor -a ADDR [-p PORT] [-s SIZES] [-i ITERS] "
		"[-t SEC] [-l LABEL]\n"
		"  ADDR: rank 0's IPv4 address; SIZES: a comma list, 1 to %d "
		"bytes each\n"
		"  environment: FTX_HOSTS=pid0,pid1, FTX_BIND=1 (as the ftx "
		"programs)\n",
		MAX_BYTES);
	exit(2);
}

int
main(int argc, char **argv)
{
	struct floor_opts o = {.label = "x",
			       .port = 7470,
			       .iters = 1000,
			       .nsizes = 1,
			       .sizes = {8}};
	struct floor_shared *sh;
	char size_arg[256];
	int c, timeout_s = 600, rc = 0;

	while ((c = getopt(argc, argv, "a:p:s:i:t:l:h")) != -1) {
		switch (c) {
		case 'a':
			o.addr = optarg;
			break;
		case 'p':
			o.port = atoi(optarg);
			break;
		case 's':
			snprintf(size_arg, sizeof(size_arg), "%s", optarg);
			o.nsizes = parse_sizes(size_arg, o.sizes);
			if (o.nsizes <= 0)
				usage();
			break;
		case 'i':
			o.iters = atoi(optarg);
			break;
		case 't':
			timeout_s = atoi(optarg);
			break;
		case 'l':
			o.label = optarg;
			break;
		default:
			usage();
		}
	}
	if (!o.addr || o.port <= 0 || o.port > 65535 || o.iters < 1 ||
	    o.iters > 10000000 || timeout_s < 1)
		usage();
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die(-1, "shared memory");
	fflush(stdout);
	for (int r = 0; r < 2; r++) {
		kid[r] = fork();
		if (kid[r] < 0)
			die(-1, "fork");
		if (!kid[r])
			rank_main(r, &o, sh);
	}
	/* a rank that fails leaves the other spinning: it is ended too */
	signal(SIGALRM, on_alarm);
	alarm((unsigned) timeout_s);
	for (int left = 2; left;) {
		int st;
		pid_t p = wait(&st);

		if (p < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		left--;
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			int who = p == kid[1];

			/* not a rank this loop itself ended */
			if (WIFSIGNALED(st) && !rc)
				fprintf(stderr,
					"ftx_tcp_floor: rank %d ended by "
					"signal %d\n",
					who, WTERMSIG(st));
			rc = 1;
			for (int r = 0; r < 2; r++)
				if (kid[r] != p)
					kill(kid[r], SIGKILL);
		}
	}
	return rc;
}
