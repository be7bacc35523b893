/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Seed 002's descriptors (coll/tnbc_desc.c) in one process: what a post
 * refuses, and what a fold does with value/location ties and with a child
 * that disagrees.  Endpoints of one domain stand for the members.
 */
#include "tnbc_unit.h"

#include <inttypes.h>
#include <pthread.h>

#include <rdma/fi_ext_tnbc.h>

static struct fi_tnbc_ops_coll *desc_ops(struct tu_world *w)
{
	struct fi_tnbc_ops_coll *ops = NULL;

	ck_assert_int_eq(fi_open_ops(&w->ep[0].ep->fid, FI_TNBC_COLL_OPS_1, 0,
				     (void **)&ops, NULL),
			 0);
	ck_assert_uint_eq(ops->size, sizeof(*ops));
	return ops;
}

/* A valid root descriptor of one double, 0 children. */
static struct fi_tnbc_red_desc good_root(double *result)
{
	struct fi_tnbc_red_desc r = {
		.size = sizeof(r),
		.flags = FI_TNBC_RED_CP,
		.tag = 1,
		.degree = 2,
		.op = FI_TNBC_RED_SUM,
		.width = FI_TNBC_RED_DOUBLE,
		.count = 1,
		.dest = FI_ADDR_NOTAVAIL,
		.result = result,
	};

	return r;
}

enum {
	BAD_SIZE,
	BAD_FLAGS,
	BAD_TAG,
	BAD_DEGREE0,
	BAD_DEGREE65,
	BAD_CHILDREN,
	BAD_OP,
	BAD_WIDTH,
	BAD_BITWISE_FLOAT,
	BAD_LOGICAL_DOUBLE,
	BAD_COUNT0,
	BAD_57B,
	BAD_LOC_64BIT_4,
	BAD_CPCNT,
	BAD_NO_RESULT,
	BAD_DEST,
	BAD_MAX
};

/* Each bad field alone is refused; the good descriptor is taken. */
START_TEST(desc_reduce_refused)
{
	struct tu_world w;
	struct fi_tnbc_ops_coll *ops;
	struct fi_tnbc_red_desc r;
	double result = 0;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *done;

	tu_world_open(&w, 1, NULL);
	ops = desc_ops(&w);
	ck_assert_int_eq(ops->reduce(w.ep[0].ep, NULL), -FI_EINVAL);
	r = good_root(&result);
	switch (_i) {
	case BAD_SIZE:
		r.size = sizeof(r) - 1;
		break;
	case BAD_FLAGS:
		r.flags |= 1ULL << 5;
		break;
	case BAD_TAG:
		r.tag = 1ULL << 62;
		break;
	case BAD_DEGREE0:
		r.degree = 0;
		break;
	case BAD_DEGREE65:
		r.degree = 65;
		break;
	case BAD_CHILDREN:
		r.children = 3;
		r.cpcnt = 3;
		break;
	case BAD_OP:
		r.op = FI_TNBC_RED_BXOR + 1;
		break;
	case BAD_WIDTH:
		r.width = FI_TNBC_RED_DOUBLE + 1;
		break;
	case BAD_BITWISE_FLOAT:
		r.op = FI_TNBC_RED_BAND;
		r.width = FI_TNBC_RED_FLOAT;
		break;
	case BAD_LOGICAL_DOUBLE:
		r.op = FI_TNBC_RED_LOR;
		break;
	case BAD_COUNT0:
		r.count = 0;
		break;
	case BAD_57B:
		r.count = 7; /* 56 B of doubles */
		break;
	case BAD_LOC_64BIT_4:
		r.op = FI_TNBC_RED_MAXLOC;
		r.count = 4; /* 4 pairs of 16 B */
		break;
	case BAD_CPCNT:
		r.cpcnt = 1; /* no cp_cntr: must equal children (0) */
		break;
	case BAD_NO_RESULT:
		r.result = NULL;
		break;
	case BAD_DEST:
		r.dest = 12345;
		break;
	}
	ck_assert_int_eq(ops->reduce(w.ep[0].ep, &r), -FI_EINVAL);
	/* the good one completes at once: a root with no children */
	r = good_root(&result);
	memcpy(r.data, &(double){2.5}, sizeof(double));
	ck_assert_int_eq(fi_cntr_open(w.d.domain, &ca, &done, NULL), 0);
	r.comp_cntr = done;
	ck_assert_int_eq(ops->reduce(w.ep[0].ep, &r), 0);
	ck_assert(tu_cntr_reach(done, 1, 5000));
	ck_assert(result == 2.5);
	ck_assert_int_eq(fi_close(&done->fid), 0);
	tu_world_close(&w);
}
END_TEST

/* Root 0 with children 1 and 2 (degree 2); member i contributes with
 * order i.  Waits for the root's completion counter. */
static void run_tree(struct tu_world *w, struct fi_tnbc_ops_coll *ops,
		     struct fi_tnbc_red_desc *d, void *result, uint32_t *ev,
		     struct fid_cntr *done)
{
	for (int i = 2; i >= 0; i--) {
		d[i].size = sizeof(d[i]);
		d[i].flags |= FI_TNBC_RED_CP;
		d[i].tag = 7;
		d[i].order = (uint32_t)i;
		d[i].children = i ? 0 : 2;
		d[i].cpcnt = d[i].children;
		d[i].dest = i ? w->addr[0] : FI_ADDR_NOTAVAIL;
		d[i].result = i ? NULL : result;
		d[i].errvec_out = i ? NULL : ev;
		d[i].comp_cntr = i ? NULL : done;
		ck_assert_int_eq(ops->reduce(w->ep[i].ep, &d[i]), 0);
	}
	ck_assert(tu_cntr_settle(done, 1, 5000));
}

/* Ties go to the smaller location, whatever the arrival order. */
START_TEST(desc_maxloc_ties)
{
	struct tu_world w;
	struct fi_tnbc_ops_coll *ops;
	struct fi_tnbc_red_desc d[3] = {0};
	struct fi_tnbc_loc32 res[6] = {0};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *done;
	uint32_t ev = 1;
	/* pair 0: all tie at 5; pair 1: 1 and 2 tie above 0 */
	const int32_t val[3][2] = {{5, 1}, {5, 9}, {5, 9}};

	tu_world_open(&w, 3, NULL);
	ops = desc_ops(&w);
	ck_assert_int_eq(fi_cntr_open(w.d.domain, &ca, &done, NULL), 0);
	for (int i = 0; i < 3; i++) {
		struct fi_tnbc_loc32 p[2];

		d[i].degree = 2;
		d[i].op = FI_TNBC_RED_MAXLOC;
		d[i].width = FI_TNBC_RED_INT32;
		d[i].count = 2;
		for (int k = 0; k < 2; k++) {
			memcpy(&p[k].value, &val[i][k], sizeof(int32_t));
			p[k].loc = 30 - 10 * i; /* member 2 has the smallest */
		}
		memcpy(d[i].data, p, sizeof(p));
	}
	run_tree(&w, ops, d, res, &ev, done);
	ck_assert_uint_eq(fi_cntr_readerr(done), 0);
	ck_assert_uint_eq(ev, 0);
	ck_assert_uint_eq(res[0].value, 5);
	ck_assert_int_eq(res[0].loc, 10);
	ck_assert_uint_eq(res[1].value, 9);
	ck_assert_int_eq(res[1].loc, 10);
	ck_assert_int_eq(fi_close(&done->fid), 0);
	tu_world_close(&w);
}
END_TEST

/* A child whose width (_i 0), degree (1), count (2), CP flag (3) or
 * order (4: the other child's, as when a tag is reused in flight)
 * disagrees is not folded: the root's result is the rest, its error
 * vector says why, and its completion is an error. */
START_TEST(desc_child_disagrees)
{
	struct tu_world w;
	struct fi_tnbc_ops_coll *ops;
	struct fi_tnbc_red_desc d[3] = {0};
	int64_t res[2] = {0};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *done;
	uint32_t ev = 0;

	tu_world_open(&w, 3, NULL);
	ops = desc_ops(&w);
	ck_assert_int_eq(fi_cntr_open(w.d.domain, &ca, &done, NULL), 0);
	for (int i = 0; i < 3; i++) {
		int64_t v[2] = {i + 1, 10 * (i + 1)};

		d[i].degree = 2;
		d[i].op = FI_TNBC_RED_SUM;
		d[i].width = FI_TNBC_RED_INT64;
		d[i].count = 2;
		memcpy(d[i].data, v, sizeof(v));
	}
	switch (_i) {
	case 0:
		d[2].width = FI_TNBC_RED_UINT64;
		break;
	case 1:
		d[2].degree = 3;
		break;
	case 2:
		d[2].count = 1;
		break;
	case 3:
		d[2].flags = 0; /* run_tree sets CP: cleared after, below */
		break;
	}
	if (_i >= 3) {
		/* post member 2 by hand: without CP, or as member 1 */
		d[2].size = sizeof(d[2]);
		d[2].flags = _i == 4 ? FI_TNBC_RED_CP : 0;
		d[2].tag = 7;
		d[2].order = _i == 4 ? 1 : 2;
		/* as member 1, with member 1's values: whichever comes
		 * second is refused, and the sum is the same */
		if (_i == 4)
			memcpy(d[2].data, d[1].data, sizeof(d[2].data));
		d[2].dest = w.addr[0];
		ck_assert_int_eq(ops->reduce(w.ep[2].ep, &d[2]), 0);
		for (int i = 1; i >= 0; i--) {
			d[i].size = sizeof(d[i]);
			d[i].flags = FI_TNBC_RED_CP;
			d[i].tag = 7;
			d[i].order = (uint32_t)i;
			d[i].children = i ? 0 : 2;
			d[i].cpcnt = d[i].children;
			d[i].dest = i ? w.addr[0] : FI_ADDR_NOTAVAIL;
			d[i].result = i ? NULL : res;
			d[i].errvec_out = i ? NULL : &ev;
			d[i].comp_cntr = i ? NULL : done;
			ck_assert_int_eq(ops->reduce(w.ep[i].ep, &d[i]), 0);
		}
		ck_assert(tu_cntr_settle(done, 1, 5000));
	} else {
		run_tree(&w, ops, d, res, &ev, done);
	}
	ck_assert_uint_eq(fi_cntr_readerr(done), 1);
	ck_assert_uint_eq(ev & (FI_TNBC_RED_EMISMATCH | FI_TNBC_RED_EDUP),
			  _i == 4 ? FI_TNBC_RED_EDUP : FI_TNBC_RED_EMISMATCH);
	ck_assert_int_eq(res[0], 1 + 2);
	ck_assert_int_eq(res[1], 10 + 20);
	ck_assert_int_eq(fi_close(&done->fid), 0);
	tu_world_close(&w);
}
END_TEST

/* A root broadcast whose threshold is already met when it is posted (0,
 * or a counter already there: _i 0 and 1) sends at once; one whose
 * counter gets there later (_i 2) sends then.  Member 1 forwards to
 * member 2. */
START_TEST(desc_bcast_threshold)
{
	static const uint64_t thr[] = {0, 3, 5};
	struct tu_world w;
	struct fi_tnbc_ops_coll *ops;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *trig, *done[3];
	int64_t v[3][4] = {{11, 22, 33, 44}};

	tu_world_open(&w, 3, NULL);
	ops = desc_ops(&w);
	ck_assert_int_eq(fi_cntr_open(w.d.domain, &ca, &trig, NULL), 0);
	ck_assert_int_eq(fi_cntr_set(trig, 3), 0);
	/* the others post first, so that they wait for the root */
	for (int i = 2; i >= 0; i--) {
		fi_addr_t to = i < 2 ? w.addr[i + 1] : FI_ADDR_UNSPEC;
		struct fi_tnbc_bcast_desc b = {
			.size = sizeof(b),
			.tag = 9,
			.trig_cntr = i ? NULL : trig,
			.threshold = i ? 0 : thr[_i],
			.src = i ? w.addr[i - 1] : FI_ADDR_UNSPEC,
			.dests = i < 2 ? &to : NULL,
			.ndests = i < 2 ? 1 : 0,
			.result = v[i],
			.len = sizeof(v[i]),
		};

		ck_assert_int_eq(fi_cntr_open(w.d.domain, &ca, &done[i], NULL),
				 0);
		b.comp_cntr = done[i];
		ck_assert_int_eq(ops->bcast(w.ep[i].ep, &b), 0);
	}
	if (thr[_i] > 3) {
		ck_assert(!tu_cntr_reach(done[2], 1, 200));
		ck_assert_int_eq(fi_cntr_add(trig, thr[_i] - 3), 0);
	}
	for (int i = 0; i < 3; i++)
		ck_assert_msg(tu_cntr_reach(done[i], 1, 5000),
			      "member %d's broadcast did not complete "
			      "(threshold %" PRIu64 ")",
			      i, thr[_i]);
	for (int i = 1; i < 3; i++)
		ck_assert_mem_eq(v[i], v[0], sizeof(v[0]));
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(fi_close(&done[i]->fid), 0);
	ck_assert_int_eq(fi_close(&trig->fid), 0);
	tu_world_close(&w);
}
END_TEST

/* Root broadcasts posted on the application's trigger counter while
 * another thread keeps adding to it: each is queued on a counter that
 * is changing (the schedule's own are its builder's alone until armed,
 * this one never is), and each fires once, none lost. */
#define BUSY_POSTS 2000

struct busy_adder {
	struct fid_cntr *trig;
	atomic_int go;
};

static void *busy_add(void *arg)
{
	struct busy_adder *a = arg;

	while (!atomic_load(&a->go))
		sched_yield();
	for (int i = 0; i < BUSY_POSTS; i++) {
		ck_assert_int_eq(fi_cntr_add(a->trig, 1), 0);
		if (i % 8 == 0)
			sched_yield();
	}
	return NULL;
}

START_TEST(desc_bcast_trig_busy)
{
	struct tu_world w;
	struct fi_tnbc_ops_coll *ops;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct busy_adder a = {0};
	struct fid_cntr *done;
	pthread_t thr;
	int64_t v = 0;

	tu_world_open(&w, 1, NULL);
	ops = desc_ops(&w);
	ck_assert_int_eq(fi_cntr_open(w.d.domain, &ca, &a.trig, NULL), 0);
	ck_assert_int_eq(fi_cntr_open(w.d.domain, &ca, &done, NULL), 0);
	ck_assert_int_eq(pthread_create(&thr, NULL, busy_add, &a), 0);
	atomic_store(&a.go, 1);
	for (uint64_t k = 0; k < BUSY_POSTS; k++) {
		struct fi_tnbc_bcast_desc b = {
			.size = sizeof(b),
			.tag = k,
			.trig_cntr = a.trig,
			.threshold = k + 1,
			.src = FI_ADDR_UNSPEC,
			.result = &v,
			.len = sizeof(v),
			.comp_cntr = done,
		};

		ck_assert_int_eq(ops->bcast(w.ep[0].ep, &b), 0);
	}
	pthread_join(thr, NULL);
	ck_assert_msg(tu_cntr_reach(done, BUSY_POSTS, 10000),
		      "%" PRIu64 " of %d broadcasts fired", fi_cntr_read(done),
		      BUSY_POSTS);
	ck_assert_uint_eq(fi_cntr_readerr(done), 0);
	ck_assert_int_eq(fi_close(&done->fid), 0);
	ck_assert_int_eq(fi_close(&a.trig->fid), 0);
	tu_world_close(&w);
}
END_TEST

/* Two root descriptors on one CP counter: A (threshold 1, child member
 * 1) and B (threshold 2, child member 2).  B's child arrives first, or
 * (_i 1) the counter is past both thresholds before either is posted:
 * A still folds its own child, not a slot nothing was written to. */
START_TEST(desc_shared_cp)
{
	struct tu_world w;
	struct fi_tnbc_ops_coll *ops;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *cp, *done[2];
	double res[2] = {-1, -1};
	uint32_t ev[2] = {7, 7};
	const uint64_t base = _i ? 10 : 0;

	tu_world_open(&w, 3, NULL);
	ops = desc_ops(&w);
	ck_assert_int_eq(fi_cntr_open(w.d.domain, &ca, &cp, NULL), 0);
	ck_assert_int_eq(fi_cntr_set(cp, base), 0);
	for (int k = 0; k < 2; k++) {
		struct fi_tnbc_red_desc r = good_root(&res[k]);

		ck_assert_int_eq(fi_cntr_open(w.d.domain, &ca, &done[k], NULL),
				 0);
		r.tag = 1 + (uint64_t)k;
		r.children = 1;
		r.cp_cntr = cp;
		r.cpcnt = 1 + (uint64_t)k;
		r.errvec_out = &ev[k];
		r.comp_cntr = done[k];
		memcpy(r.data, &(double){1.0 + 9 * k}, sizeof(double));
		ck_assert_int_eq(ops->reduce(w.ep[0].ep, &r), 0);
	}
	/* the children, B's first: member k + 1 contributes 2 (A), 20 (B) */
	for (int k = 1; k >= 0; k--) {
		struct fi_tnbc_red_desc c = good_root(NULL);

		c.tag = 1 + (uint64_t)k;
		c.order = 1;
		c.dest = w.addr[0];
		c.result = NULL;
		memcpy(c.data, &(double){2.0 + 18 * k}, sizeof(double));
		ck_assert_int_eq(ops->reduce(w.ep[k + 1].ep, &c), 0);
		if (k == 1) {
			ck_assert(tu_cntr_reach(cp, base + 1, 5000));
			ck_assert_msg(!tu_cntr_reach(done[0], 1, 200) &&
					      fi_cntr_readerr(done[0]) == 0,
				      "A completed without its own child");
		}
	}
	for (int k = 0; k < 2; k++)
		ck_assert_msg(tu_cntr_reach(done[k], 1, 5000),
			      "descriptor %d did not complete", k);
	ck_assert_uint_eq(fi_cntr_readerr(done[0]) + fi_cntr_readerr(done[1]),
			  0);
	ck_assert_uint_eq(fi_cntr_read(cp), base + 2);
	ck_assert_uint_eq(fi_cntr_readerr(cp), 0);
	ck_assert_uint_eq(ev[0] | ev[1], 0);
	ck_assert(res[0] == 3.0 && res[1] == 30.0);
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(fi_close(&done[k]->fid), 0);
	ck_assert_int_eq(fi_close(&cp->fid), 0);
	tu_world_close(&w);
}
END_TEST

Suite *tu_desc_suite(void)
{
	Suite *s = suite_create("desc");
	TCase *tc = tcase_create("desc");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, desc_reduce_refused, 0, BAD_MAX);
	tcase_add_test(tc, desc_maxloc_ties);
	tcase_add_loop_test(tc, desc_child_disagrees, 0, 5);
	tcase_add_loop_test(tc, desc_bcast_threshold, 0, 3);
	tcase_add_loop_test(tc, desc_shared_cp, 0, 2);
	tcase_add_test(tc, desc_bcast_trig_busy);
	suite_add_tcase(s, tc);
	return s;
}
