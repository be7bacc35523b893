/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Another user on the same host (fi_tnbc(7), SECURITY): tnbc must never
 * send to, or be stopped by, files a different user put in /dev/shm.
 *
 *  hijack: user B pre-creates a world-writable /dev/shm/tnbc-svc-N that
 *          looks like a live service.  User A's fi_tsend to service N
 *          must fail with -FI_EACCES and write nothing into B's queue;
 *          A opening service N itself gets -FI_EADDRINUSE.
 *  squat:  user B pre-creates the names an endpoint of A's next
 *          process would have had under guessable naming.  A's
 *          fi_domain and fi_endpoint must still succeed.
 *
 * Needs root (it creates two system users, tnbc-ut-a and tnbc-ut-b, and
 * runs each side as one of them); exits 77 (skipped) otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tnbc.h"
#include "tnbc_attr.h"
#include "xport/shm/tnbc_shm_region.h"

struct fi_provider *fi_prov_ini(void);

#define SKIP 77

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("not ok: " __VA_ARGS__);                        \
			printf("\n");                                          \
			failures++;                                            \
		}                                                              \
	} while (0)

static int user_ensure(const char *name, uid_t *uid, gid_t *gid)
{
	char cmd[256];
	struct passwd *pw = getpwnam(name);

	if (!pw) {
		snprintf(cmd, sizeof(cmd),
			 "useradd --system --no-create-home --shell "
			 "/usr/sbin/nologin %s >/dev/null 2>&1",
			 name);
		if (system(cmd))
			return -1;
		pw = getpwnam(name);
		if (!pw)
			return -1;
	}
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return 0;
}

static void become(uid_t uid, gid_t gid)
{
	if (setgroups(0, NULL) || setgid(gid) || setuid(uid)) {
		perror("become");
		_exit(2);
	}
}

/* A domain with one endpoint (on service svc when svc >= 0) as the
 * calling user; returns 0 or the first failing call's fi_errno. */
struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

static int side_open(struct side *s, long svc)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	struct tnbc_addr addr = {0};
	struct tnbc_name *name = &addr.name;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = tnbc_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &s->info);
	if (ret)
		return ret;
	if (svc >= 0) {
		name->version = TNBC_PROTO_VERSION;
		name->xports = TNBC_XPORT_BIT(TNBC_XPORT_SHM);
		name->kind = TNBC_NAME_SVC;
		name->uid = (uint32_t)svc;
		free(s->info->src_addr);
		s->info->src_addr = malloc(sizeof(addr));
		memcpy(s->info->src_addr, &addr, sizeof(addr));
		s->info->src_addrlen = sizeof(addr);
	}
	ret = tnbc_fabric_open(s->info->fabric_attr, &s->fabric, NULL);
	if (!ret)
		ret = fi_domain(s->fabric, s->info, &s->domain, NULL);
	if (!ret)
		ret = fi_endpoint(s->domain, s->info, &s->ep, NULL);
	if (!ret)
		ret = fi_av_open(s->domain, &av_attr, &s->av, NULL);
	if (!ret)
		ret = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL);
	if (!ret)
		ret = fi_ep_bind(s->ep, &s->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_enable(s->ep);
	return ret;
}

static void side_close(struct side *s)
{
	struct fid *fids[] = {
		s->ep ? &s->ep->fid : NULL, s->cq ? &s->cq->fid : NULL,
		s->av ? &s->av->fid : NULL, s->domain ? &s->domain->fid : NULL,
		s->fabric ? &s->fabric->fid : NULL};

	for (size_t i = 0; i < sizeof(fids) / sizeof(fids[0]); i++)
		if (fids[i])
			fi_close(fids[i]);
	fi_freeinfo(s->info);
	memset(s, 0, sizeof(*s));
}

/* Pretends to be service svc: a region and a doorbell that any user may
 * map, owned by the calling user, naming a live process. */
static int plant_service(long svc, char *bell, size_t bell_len)
{
	size_t slot = 8192, nslots = 8 * slot / TNBC_SHM_CELL;
	size_t len = sizeof(struct tnbc_shm_region) + nslots * TNBC_SHM_CELL;
	struct tnbc_shm_region *r;
	struct tnbc_shm_bell *b;
	char name[64];
	int fd;

	snprintf(bell, bell_len, "/tnbc-evil-%ld-b", svc);
	fd = shm_open(bell, O_RDWR | O_CREAT | O_EXCL, 0666);
	if (fd < 0 || fchmod(fd, 0666) || ftruncate(fd, sizeof(*b)))
		return -1;
	b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (b == MAP_FAILED)
		return -1;
	b->magic = TNBC_SHM_MAGIC;
	b->version = TNBC_SHM_VERSION;
	snprintf(name, sizeof(name), "/tnbc-svc-%ld", svc);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0666);
	if (fd < 0 || fchmod(fd, 0666) || ftruncate(fd, (off_t)len))
		return -1;
	r = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (r == MAP_FAILED)
		return -1;
	r->magic = TNBC_SHM_MAGIC;
	r->version = TNBC_SHM_VERSION;
	r->nslots = (uint32_t)nslots;
	r->slot_size = (uint32_t)slot;
	r->pid = (int32_t)getppid(); /* alive: looks like a real service */
	snprintf(r->bell_name, sizeof(r->bell_name), "%s", bell);
	atomic_store(&r->ready, 1);
	return 0;
}

static uint64_t service_tail(long svc)
{
	struct tnbc_shm_region *r;
	char name[64];
	uint64_t tail;
	int fd;

	snprintf(name, sizeof(name), "/tnbc-svc-%ld", svc);
	fd = shm_open(name, O_RDONLY, 0);
	if (fd < 0)
		return UINT64_MAX;
	r = mmap(NULL, sizeof(*r), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (r == MAP_FAILED)
		return UINT64_MAX;
	tail = atomic_load(&r->tail);
	munmap(r, sizeof(*r));
	return tail;
}

static int wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void test_hijack(uid_t ua, gid_t ga, uid_t ub, gid_t gb)
{
	long svc = 40000 + getpid() % 20000;
	char bell[64], name[64];
	pid_t pid;
	int rc;

	pid = fork();
	if (!pid) {
		become(ub, gb);
		_exit(plant_service(svc, bell, sizeof(bell)) ? 2 : 0);
	}
	rc = wait_child(pid);
	CHECK(rc == 0, "hijack: user B could not plant service %ld", svc);
	if (rc)
		return;
	pid = fork();
	if (!pid) {
		struct side s, s2;
		fi_addr_t addr;
		char svcs[16];
		ssize_t ret;

		become(ua, ga);
		if (side_open(&s, -1))
			_exit(3);
		snprintf(svcs, sizeof(svcs), "%ld", svc);
		if (fi_av_insertsvc(s.av, NULL, svcs, &addr, 0, NULL) != 1)
			_exit(4);
		ret = fi_tsend(s.ep, "secret", 7, NULL, addr, 1, NULL);
		printf("# hijack: user A's fi_tsend to service %ld: %zd (%s)\n",
		       svc, ret, fi_strerror((int)-ret));
		if (ret != -FI_EACCES)
			_exit(5);
		/* the real service cannot start either, and says why */
		ret = side_open(&s2, svc);
		printf("# hijack: user A opening service %ld: %zd (%s)\n", svc,
		       ret, fi_strerror((int)-ret));
		side_close(&s2);
		side_close(&s);
		_exit(ret == -FI_EADDRINUSE ? 0 : 6);
	}
	rc = wait_child(pid);
	CHECK(rc == 0, "hijack: user A's side failed at step %d", rc);
	CHECK(service_tail(svc) == 0,
	      "hijack: user A wrote into user B's queue (tail %llu)",
	      (unsigned long long)service_tail(svc));
	snprintf(name, sizeof(name), "/tnbc-svc-%ld", svc);
	shm_unlink(name);
	snprintf(bell, sizeof(bell), "/tnbc-evil-%ld-b", svc);
	shm_unlink(bell);
	if (!rc)
		printf("ok: hijack refused\n");
}

static void test_squat(uid_t ua, gid_t ga, uid_t ub, gid_t gb)
{
	/* what guessable naming gave the first domain and endpoints */
	static const char *const fmts[] = {"/tnbc-%d-0", "/tnbc-%d-1",
					   "/tnbc-%d-b0", "/tnbc-%d-b-0"};
	int go[2];
	pid_t victim, pid;
	char name[64];
	int rc;

	if (pipe(go))
		return;
	victim = fork();
	if (!victim) {
		struct side s;
		char b;
		int ret;

		become(ua, ga);
		if (read(go[0], &b, 1) != 1)
			_exit(2);
		ret = side_open(&s, -1);
		printf("# squat: user A's domain and endpoint: %d (%s)\n", ret,
		       fi_strerror(-ret));
		side_close(&s);
		_exit(ret ? 3 : 0);
	}
	pid = fork();
	if (!pid) {
		become(ub, gb);
		for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
			int fd;

			snprintf(name, sizeof(name), fmts[i], (int)victim);
			fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0644);
			if (fd < 0)
				_exit(2);
			close(fd);
		}
		_exit(0);
	}
	rc = wait_child(pid);
	CHECK(rc == 0, "squat: user B could not create the names");
	if (write(go[1], "x", 1) != 1)
		failures++;
	rc = wait_child(victim);
	CHECK(rc == 0, "squat: user A could not open a domain and endpoint");
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		snprintf(name, sizeof(name), fmts[i], (int)victim);
		shm_unlink(name);
	}
	close(go[0]);
	close(go[1]);
	if (!rc)
		printf("ok: squatted names do not stop a new endpoint\n");
}

int main(void)
{
	uid_t ua, ub;
	gid_t ga, gb;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (geteuid()) {
		printf("SKIP: needs root to run two users' processes\n");
		return SKIP;
	}
	if (user_ensure("tnbc-ut-a", &ua, &ga) ||
	    user_ensure("tnbc-ut-b", &ub, &gb)) {
		printf("SKIP: cannot create the test users (useradd)\n");
		return SKIP;
	}
	fi_prov_ini();
	test_hijack(ua, ga, ub, gb);
	test_squat(ua, ga, ub, gb);
	printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
