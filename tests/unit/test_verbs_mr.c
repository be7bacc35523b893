/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The verbs registration cache alone (xport/verbs/tnbc_verbs_mr.c), on
 * a protection domain of the first RDMA device: a registration is kept
 * and found again, also for part of it and for the other right; memory
 * unmapped, or discarded with MADV_DONTNEED, drops its entry before it
 * can be found again, and a discarded page can be touched again (the
 * monitor lets its fault through, else the test hangs); a full cache
 * drops its least recently used entry; with no cache every get
 * registers.  Runs where verbs does (tests/verbs-guest.sh).
 */
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "tnbc_unit.h"
#include "xport/verbs/tnbc_verbs_mr.h"

#define MR_LEN (64 * 1024)

struct mr_dev {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
};

static void mr_dev_open(struct mr_dev *d)
{
	int n = 0;

	d->list = ibv_get_device_list(&n);
	ck_assert_msg(d->list && n > 0, "no RDMA device");
	d->ctx = ibv_open_device(d->list[0]);
	ck_assert_ptr_nonnull(d->ctx);
	d->pd = ibv_alloc_pd(d->ctx);
	ck_assert_ptr_nonnull(d->pd);
}

static void mr_dev_close(struct mr_dev *d)
{
	ibv_dealloc_pd(d->pd);
	ibv_close_device(d->ctx);
	ibv_free_device_list(d->list);
}

/* Whether this process may watch memory with a userfaultfd: the cache
 * keeps nothing where it may not. */
static bool mr_uffd_works(void)
{
	int fd = (int)syscall(__NR_userfaultfd, O_CLOEXEC);

	if (fd < 0)
		fd = (int)syscall(__NR_userfaultfd, O_CLOEXEC | 1);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static uint8_t *mr_map(void)
{
	uint8_t *p = mmap(NULL, MR_LEN, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert(p != MAP_FAILED);
	memset(p, 0x5a, MR_LEN);
	return p;
}

/* The monitor drops entries in its own thread, just after the unmapping
 * call returns: waits, within the bound, for the count to reach n. */
static void mr_wait_invalidated(struct tnbc_verbs_mrc *c, uint64_t n)
{
	struct tnbc_verbs_mrc_stats st;

	for (unsigned ms = 0; ms < TU_WAIT_MS; ms++) {
		tnbc_verbs_mrc_stats(c, &st);
		if (st.invalidated >= n)
			return;
		tu_sleep_ms(1);
	}
	ck_abort_msg("the monitor dropped %" PRIu64 " entries, not %" PRIu64,
		     st.invalidated, n);
}

START_TEST(verbs_mr_cache_reuse_and_unmap)
{
	struct tnbc_verbs_mrc_stats st;
	struct tnbc_verbs_mrc *c;
	struct tnbc_verbs_mr *m1, *m2, *m3;
	struct mr_dev d;
	uint8_t *p;

	mr_dev_open(&d);
	ck_assert_int_eq(tnbc_verbs_mrc_open(&c, d.pd, 8), 0);
	p = mr_map();
	m1 = tnbc_verbs_mr_get(c, p, MR_LEN, IBV_ACCESS_REMOTE_READ);
	ck_assert_ptr_nonnull(m1);
	tnbc_verbs_mr_put(c, m1);
	m2 = tnbc_verbs_mr_get(c, p, MR_LEN, IBV_ACCESS_REMOTE_READ);
	m3 = tnbc_verbs_mr_get(c, p + 100, 5000, IBV_ACCESS_LOCAL_WRITE);
	ck_assert(m2 && m3);
	tnbc_verbs_mrc_stats(c, &st);
	ck_assert_uint_eq(st.uncached, mr_uffd_works() ? 0 : 3);
	if (st.uncached) {
		/* no userfaultfd here: nothing may be kept */
		ck_assert_uint_eq(st.hits, 0);
		ck_assert_uint_eq(st.uncached, 3);
		tnbc_verbs_mr_put(c, m2);
		tnbc_verbs_mr_put(c, m3);
		goto out;
	}
	ck_assert_ptr_eq(m2, m1);
	ck_assert_ptr_eq(m3, m1);
	ck_assert_uint_eq(st.misses, 1);
	ck_assert_uint_eq(st.hits, 2);
	ck_assert_uint_eq(st.entries, 1);
	tnbc_verbs_mr_put(c, m2);
	tnbc_verbs_mr_put(c, m3);

	/* mapped again at the same address, over the old pages (an unmap
	 * of them, as the kernel tells a userfaultfd): new pages, a new
	 * registration.  Not munmap and then a map there: the hole may be
	 * taken meanwhile (seen under AddressSanitizer, whose allocator
	 * maps memory of its own). */
	ck_assert(mmap(p, MR_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
	mr_wait_invalidated(c, 1);
	memset(p, 0x5a, MR_LEN);
	m1 = tnbc_verbs_mr_get(c, p, MR_LEN, IBV_ACCESS_REMOTE_READ);
	ck_assert_ptr_nonnull(m1);
	tnbc_verbs_mrc_stats(c, &st);
	ck_assert_uint_eq(st.misses, 2);
	ck_assert_uint_eq(st.hits, 2);
	tnbc_verbs_mr_put(c, m1);

	/* discarded: dropped, and its pages fault in again as usual */
	ck_assert_int_eq(madvise(p + 4096, 4096, MADV_DONTNEED), 0);
	mr_wait_invalidated(c, 2);
	ck_assert_uint_eq(p[4096], 0);
	p[4096] = 7;
	ck_assert_uint_eq(p[4096], 7);
	m1 = tnbc_verbs_mr_get(c, p, MR_LEN, IBV_ACCESS_REMOTE_READ);
	ck_assert_ptr_nonnull(m1);
	tnbc_verbs_mrc_stats(c, &st);
	ck_assert_uint_eq(st.misses, 3);
	tnbc_verbs_mr_put(c, m1);
out:
	tnbc_verbs_mrc_close(c);
	munmap(p, MR_LEN);
	mr_dev_close(&d);
}
END_TEST

/* _i 0: a cache of 2 entries drops the least recently used one for a
 * third; 1: no cache, every get registers and nothing is kept. */
START_TEST(verbs_mr_cache_evict)
{
	struct tnbc_verbs_mrc_stats st;
	struct tnbc_verbs_mrc *c;
	struct mr_dev d;
	uint8_t *p[3];

	mr_dev_open(&d);
	ck_assert_int_eq(tnbc_verbs_mrc_open(&c, d.pd, _i ? 0 : 2), 0);
	for (int i = 0; i < 3; i++)
		p[i] = mr_map();
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 3; i++) {
			/* 0 1 2 0 1 2: with 2 entries each is gone again
			 * by the time it comes back */
			struct tnbc_verbs_mr *m = tnbc_verbs_mr_get(
				c, p[i], MR_LEN, IBV_ACCESS_REMOTE_READ);

			ck_assert_ptr_nonnull(m);
			tnbc_verbs_mr_put(c, m);
		}
	tnbc_verbs_mrc_stats(c, &st);
	ck_assert_uint_eq(st.hits, 0);
	ck_assert_uint_eq(st.misses, 6);
	if (_i) {
		ck_assert_uint_eq(st.uncached, 6);
		ck_assert_uint_eq(st.entries, 0);
	} else if (mr_uffd_works()) {
		ck_assert_uint_eq(st.uncached, 0);
		ck_assert_uint_eq(st.entries, 2);
		ck_assert_uint_eq(st.evicted, 4);
	}
	tnbc_verbs_mrc_close(c);
	for (int i = 0; i < 3; i++)
		munmap(p[i], MR_LEN);
	mr_dev_close(&d);
}
END_TEST

TCase *tu_verbs_mr_tcase(void)
{
	TCase *tc = tcase_create("mr_cache");

	tcase_add_test(tc, verbs_mr_cache_reuse_and_unmap);
	tcase_add_loop_test(tc, verbs_mr_cache_evict, 0, 2);
	return tc;
}
