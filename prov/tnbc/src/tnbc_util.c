/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Small helpers shared by the objects: iovec copies, time, the host's
 * load, address text, and the entry points of interfaces tnbc does not offer
 * (the fi_no_* helpers of libfabric are not exported to DL providers).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tnbc.h"
#include "tnbc_unsupp.h"

uint64_t tnbc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t tnbc_fnv(uint64_t h, const void *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
	return h;
}

/* Two processes share a host, for shm, when they share this boot, the
 * same /dev/shm and the same pid namespace (shm and single-copy reads
 * name peers by pid).  Network namespaces alone share all three, and
 * then are one host; a container with its own /dev/shm or pids is not,
 * though the kernel is the same. */
uint64_t tnbc_host_id(void)
{
	char buf[64] = {0};
	uint64_t h = 1469598103934665603ull;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	struct stat st;

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	h = tnbc_fnv(h, buf, strcspn(buf, "\n"));
	if (!stat("/dev/shm", &st)) {
		h = tnbc_fnv(h, &st.st_dev, sizeof(st.st_dev));
		h = tnbc_fnv(h, &st.st_ino, sizeof(st.st_ino));
	}
	if (!stat("/proc/self/ns/pid", &st))
		h = tnbc_fnv(h, &st.st_ino, sizeof(st.st_ino));
	return h ? h : 1;
}

bool tnbc_pid_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	bool alive = true;
	FILE *f;

	if (pid <= 0 || (kill(pid, 0) && errno == ESRCH))
		return false;
	/* A killed process that nobody reaped yet is a zombie: it exists
	 * for kill(2) but will never answer. */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(buf, sizeof(buf), f)) {
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
			alive = false;
	}
	fclose(f);
	return alive;
}

uint64_t tnbc_nonce(void)
{
	static atomic_uint salt;
	uint64_t n = 0;

	if (getrandom(&n, sizeof(n), GRND_NONBLOCK) != (ssize_t)sizeof(n)) {
		struct timespec ts;

		/* no entropy yet (early boot): still unique, if guessable */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		n = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^
		    ((uint64_t)getpid() << 16) ^ atomic_fetch_add(&salt, 1);
	}
	return n ? n : 1;
}

/* "0.50 0.40 0.30 3/120 4567": the fourth field is runnable/total. */
bool tnbc_loadavg_oversubscribed(const char *loadavg, long ncpu)
{
	const char *p = loadavg;
	unsigned long running;
	char *end;

	if (!p || ncpu < 1)
		return false;
	for (int field = 0; field < 3; field++) {
		p = strchr(p, ' ');
		if (!p)
			return false;
		p++;
	}
	if (*p < '0' || *p > '9')
		return false;
	running = strtoul(p, &end, 10);
	if (*end != '/' || !running)
		return false;
	return running - 1 > (unsigned long)ncpu;
}

void tnbc_abstime(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ns += (uint64_t)ts->tv_nsec;
	ts->tv_sec += (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

size_t tnbc_copy_to_iov(const struct iovec *iov, size_t count, size_t off,
			const void *src, size_t len)
{
	const uint8_t *s = src;
	size_t done = 0;

	for (size_t i = 0; i < count && done < len; i++) {
		size_t n;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		n = iov[i].iov_len - off;
		if (n > len - done)
			n = len - done;
		if (n)
			memcpy((uint8_t *)iov[i].iov_base + off, s + done, n);
		done += n;
		off = 0;
	}
	return done;
}

size_t tnbc_copy_from_iov(void *dst, const struct iovec *iov, size_t count,
			  size_t off, size_t len)
{
	uint8_t *d = dst;
	size_t done = 0;

	for (size_t i = 0; i < count && done < len; i++) {
		size_t n;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		n = iov[i].iov_len - off;
		if (n > len - done)
			n = len - done;
		if (n)
			memcpy(d + done, (const uint8_t *)iov[i].iov_base + off,
			       n);
		done += n;
		off = 0;
	}
	return done;
}

size_t tnbc_iov_slice(const struct iovec *iov, size_t count, size_t off,
		      size_t len, struct iovec *out, size_t out_max)
{
	size_t n = 0;

	for (size_t i = 0; i < count && len && n < out_max; i++) {
		size_t take;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		take = iov[i].iov_len - off;
		if (take > len)
			take = len;
		out[n].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[n].iov_len = take;
		n++;
		len -= take;
		off = 0;
	}
	return n;
}

int tnbc_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid;
	(void)bfid;
	(void)flags;
	return -FI_ENOSYS;
}

int tnbc_no_control(struct fid *fid, int command, void *arg)
{
	(void)fid;
	(void)command;
	(void)arg;
	return -FI_ENOSYS;
}

int tnbc_no_ops_open(struct fid *fid, const char *name, uint64_t flags,
		     void **ops, void *context)
{
	(void)fid;
	(void)name;
	(void)flags;
	(void)ops;
	(void)context;
	return -FI_ENOSYS;
}

int tnbc_ip_scan(const char *text, bool allow6, int *family, void *ip,
		 uint16_t *port)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(text, ':');
	size_t n = colon ? (size_t)(colon - text) : 0;
	unsigned long p;
	char *end;

	if (!colon || !n || n >= sizeof(host))
		return -FI_EINVAL;
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || p > 65535)
		return -FI_EINVAL;
	memcpy(host, text, n);
	host[n] = '\0';
	*port = htons((uint16_t)p);
	if (host[0] == '[' && host[n - 1] == ']') {
		host[n - 1] = '\0';
		*family = AF_INET6;
		return allow6 && inet_pton(AF_INET6, host + 1, ip) == 1
			       ? 0
			       : -FI_EINVAL;
	}
	*family = AF_INET;
	return inet_pton(AF_INET, host, ip) == 1 ? 0 : -FI_EINVAL;
}

void *tnbc_freelist_get(struct tnbc_freelist *fl)
{
	void *obj;

	pthread_mutex_lock(&fl->lock);
	obj = fl->head;
	if (obj) {
		memcpy(&fl->head, obj, sizeof(fl->head));
		fl->n--;
	}
	pthread_mutex_unlock(&fl->lock);
	return obj;
}

bool tnbc_freelist_put(struct tnbc_freelist *fl, void *obj)
{
	bool kept = false;

	if (!TNBC_FREELIST_KEEPS)
		return false;
	pthread_mutex_lock(&fl->lock);
	if (fl->n < fl->max) {
		memcpy(obj, &fl->head, sizeof(fl->head));
		fl->head = obj;
		fl->n++;
		kept = true;
	}
	pthread_mutex_unlock(&fl->lock);
	return kept;
}

void tnbc_freelist_drain(struct tnbc_freelist *fl, void (*fini)(void *obj))
{
	void *obj;

	while ((obj = tnbc_freelist_get(fl)))
		fini(obj);
}
