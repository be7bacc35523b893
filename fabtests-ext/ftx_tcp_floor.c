/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The kernel's floor under a 2-rank allreduce over TCP: two processes
 * exchange n bytes on one TCP socket (TCP_NODELAY, each writes its bytes
 * and busy-reads the other's), timed the way ftx_bench_coll times
 * fi_allreduce: rank 0 sends a start time 200 us ahead, both spin until
 * it, exchange, and the operation's time is from that start until the
 * later of the two ranks holds the other's bytes.  No provider runs: this
 * is what any stack that moves one packet each way over a TCP socket
 * pays on this machine, the reference that netns_compare.sh puts beside
 * tnbc's and tcp;ofi_rxm's allreduce.  Uses no libfabric.
 *
 *   rank 0: ftx_tcp_floor -r 0 -a ADDR -p PORT [-s 8,16] [-i N] [-c CPU]
 *   rank 1: ftx_tcp_floor -r 1 -a ADDR -p PORT (the same sizes, count)
 *
 * ADDR is rank 0's address (it listens there).  Rank 0 prints CSV lines
 * "label,nprocs,bytes,median_us,min_us", as ftx_bench_coll does.  Figures
 * only: nothing passes or fails on time; a wrong byte or a lost peer is an
 * error (exit 1).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES  16
#define MAX_BYTES  4096
#define LEAD_NS	   200000 /* ftx_bench_coll's start, ahead of its broadcast */
#define CONNECT_NS 30000000000ull

static uint64_t
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t) t.tv_sec * 1000000000u + (uint64_t) t.tv_nsec;
}

static void
die(const char *what)
{
	fprintf(stderr, "ftx_tcp_floor: %s: %s\n", what,
		errno ? strerror(errno) : "failed");
	exit(1);
}

/* All of len bytes, busy-reading (as a stack whose application polls
 * its completion queue would). */
static void
read_all(int fd, void *buf, size_t len)
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
		die("read");
	}
}

static void
write_all(int fd, const void *buf, size_t len)
{
	size_t put = 0;

	while (put < len) {
		ssize_t r = send(fd, (const char *) buf + put, len - put,
				 MSG_NOSIGNAL);

		if (r > 0)
			put += (size_t) r;
		else if (r < 0 && errno != EAGAIN && errno != EINTR)
			die("write");
	}
}

static int
connect_pair(int rank, const char *addr, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t) port)};
	uint64_t end = now_ns() + CONNECT_NS;
	int one = 1, fd;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		errno = EINVAL;
		die(addr);
	}
	if (rank == 0) {
		int l = socket(AF_INET, SOCK_STREAM, 0);

		if (l < 0 ||
		    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one,
			       sizeof(one)) ||
		    bind(l, (struct sockaddr *) &sa, sizeof(sa)) ||
		    listen(l, 1))
			die("listen");
		fd = accept(l, NULL, NULL);
		if (fd < 0)
			die("accept");
		close(l);
	} else {
		for (;;) {
			fd = socket(AF_INET, SOCK_STREAM, 0);
			if (fd < 0)
				die("socket");
			if (!connect(fd, (struct sockaddr *) &sa, sizeof(sa)))
				break;
			close(fd);
			if (now_ns() > end)
				die("connect");
			usleep(10000); /* rank 0 not listening yet */
		}
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die("TCP_NODELAY");
	return fd;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

static uint8_t
pattern(int rank, int iter, size_t i)
{
	return (uint8_t) (rank * 131 + iter * 7 + (int) i);
}

/* One size: n timed operations after n/10 untimed; rank 0 returns the
 * sorted times. */
static void
run_size(int fd, int rank, size_t bytes, int n, uint64_t *times)
{
	uint8_t mine[MAX_BYTES], theirs[MAX_BYTES];

	for (int r = -(n / 10); r < n; r++) {
		uint64_t t0, done, other;

		for (size_t i = 0; i < bytes; i++)
			mine[i] = pattern(rank, r, i);
		if (rank == 0) {
			t0 = now_ns() + LEAD_NS;
			write_all(fd, &t0, sizeof(t0));
		} else {
			read_all(fd, &t0, sizeof(t0));
		}
		while (now_ns() < t0)
			;
		write_all(fd, mine, bytes);
		read_all(fd, theirs, bytes);
		done = now_ns();
		for (size_t i = 0; i < bytes; i++) {
			if (theirs[i] != pattern(!rank, r, i)) {
				fprintf(stderr,
					"ftx_tcp_floor: %zu B, operation %d: "
					"byte %zu is %u, not %u\n",
					bytes, r, i, theirs[i],
					pattern(!rank, r, i));
				exit(1);
			}
		}
		if (rank == 1) {
			write_all(fd, &done, sizeof(done));
			continue;
		}
		read_all(fd, &other, sizeof(other));
		if (other > done)
			done = other;
		if (r >= 0)
			times[r] = done - t0;
	}
	if (rank == 0)
		qsort(times, (size_t) n, sizeof(*times), cmp_u64);
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
		"usage: ftx_tcp_floor -r 0|1 -a ADDR -p PORT "
		"[-s SIZES] [-i ITERS] [-c CPU] [-l LABEL]\n"
		"  SIZES: a comma list, 1 to %d bytes each\n",
		MAX_BYTES);
	exit(2);
}

int
main(int argc, char **argv)
{
	size_t sizes[MAX_SIZES] = {8};
	int nsizes = 1, iters = 1000, rank = -1, port = 0, cpu = -1, c, fd;
	const char *addr = NULL, *label = "x";
	char size_arg[256];
	uint64_t *times;

	while ((c = getopt(argc, argv, "r:a:p:s:i:c:l:h")) != -1) {
		switch (c) {
		case 'r':
			rank = atoi(optarg);
			break;
		case 'a':
			addr = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 's':
			snprintf(size_arg, sizeof(size_arg), "%s", optarg);
			nsizes = parse_sizes(size_arg, sizes);
			if (nsizes <= 0)
				usage();
			break;
		case 'i':
			iters = atoi(optarg);
			break;
		case 'c':
			cpu = atoi(optarg);
			break;
		case 'l':
			label = optarg;
			break;
		default:
			usage();
		}
	}
	if ((rank != 0 && rank != 1) || !addr || port <= 0 || port > 65535 ||
	    iters < 1 || iters > 10000000)
		usage();
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			die("binding to the CPU");
	}
	times = calloc((size_t) iters, sizeof(*times));
	if (!times)
		die("memory");
	fd = connect_pair(rank, addr, port);
	if (rank == 0)
		printf("label,nprocs,bytes,median_us,min_us\n");
	for (int s = 0; s < nsizes; s++) {
		run_size(fd, rank, sizes[s], iters, times);
		if (rank == 0)
			printf("%s,2,%zu,%.3f,%.3f\n", label, sizes[s],
			       times[iters / 2] / 1e3, times[0] / 1e3);
		fflush(stdout);
	}
	close(fd);
	free(times);
	return 0;
}
