/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Each CQ entry format carries the right fields; a CQ with a wait object
 * blocks in fi_cq_sread until a completion arrives (and times out with
 * -FI_EAGAIN when none does); counters with a wait object count sends and
 * receives and honour read, wait, add, set and their error variants.
 */
#include "common/ftx.h"

#include <rdma/fi_eq.h>
#include <stdio.h>
#include <string.h>

#define TAG  0x3c00000000000bcdull
#define DATA 0xcafef00d
#define LEN  77
#define NCNT 10

static void
exchange_one(struct ftx_ctx *ctx, void *buf, struct fi_context2 *fc)
{
	if (ctx->rank == 1) {
		FTX_POST(ctx, fi_trecv(ctx->ep, buf, LEN + 10, NULL,
				       FI_ADDR_UNSPEC, TAG, 0, fc));
		ftx_barrier(ctx);
	} else {
		ftx_fill(buf, LEN, 0xcf);
		ftx_barrier(ctx);
		FTX_POST(ctx, fi_tsenddata(ctx->ep, buf, LEN, NULL, DATA,
					   ctx->addrs[1], TAG, fc));
	}
}

static void
expect_empty(struct ftx_ctx *ctx, enum ftx_which w)
{
	struct fi_cq_tagged_entry e;
	ssize_t ret = fi_cq_read(ctx->cq[w], &e, 1);

	FTX_EXPECT(ret == -FI_EAGAIN,
		   "%s CQ: one send/receive, but a second "
		   "read returned %zd",
		   w == FTX_TX ? "tx" : "rx", ret);
}

static int
run_format(struct ftx_ctx *ctx)
{
	enum fi_cq_format f = ctx->tcase->cq_format;
	union {
		struct fi_cq_entry ctx;
		struct fi_cq_msg_entry msg;
		struct fi_cq_data_entry data;
		struct fi_cq_tagged_entry tagged;
		uint8_t raw[64];
	} e;
	struct fi_cq_err_entry err;
	struct fi_context2 fc;
	char buf[LEN + 10];
	bool rx = ctx->rank == 1;
	uint64_t want = rx ? FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA :
			     FI_SEND | FI_TAGGED;
	const char *side = rx ? "rx" : "tx";

	memset(buf, 0, sizeof(buf));
	exchange_one(ctx, buf, &fc);
	/* a canary past the entry catches a provider writing a wider one */
	memset(&e, 0xee, sizeof(e));
	if (!ftx_cq_read_raw(ctx, ctx->cq[rx ? FTX_RX : FTX_TX], &e, NULL,
			     &err))
		ftx_fail("%s: error completion %d (%s)", side, err.err,
			 fi_strerror(err.err));

	FTX_EXPECT(e.ctx.op_context == &fc, "%s: op_context %p, expected %p",
		   side, e.ctx.op_context, (void *) &fc);
	switch (f) {
	case FI_CQ_FORMAT_CONTEXT:
		FTX_EXPECT(e.raw[sizeof(e.ctx)] == 0xee,
			   "%s: the provider wrote past a fi_cq_entry", side);
		break;
	case FI_CQ_FORMAT_MSG:
		FTX_EXPECT(e.raw[sizeof(e.msg)] == 0xee,
			   "%s: the provider wrote past a fi_cq_msg_entry",
			   side);
		break;
	case FI_CQ_FORMAT_DATA:
		FTX_EXPECT(e.raw[sizeof(e.data)] == 0xee,
			   "%s: the provider wrote past a fi_cq_data_entry",
			   side);
		break;
	default:
		break;
	}
	if (f != FI_CQ_FORMAT_CONTEXT) {
		FTX_EXPECT((e.msg.flags & want) == want,
			   "%s: flags 0x%llx lack 0x%llx", side,
			   (unsigned long long) e.msg.flags,
			   (unsigned long long) want);
		if (rx)
			FTX_EXPECT(e.msg.len == LEN, "rx: len %zu, expected %d",
				   e.msg.len, LEN);
	}
	if (rx && (f == FI_CQ_FORMAT_DATA || f == FI_CQ_FORMAT_TAGGED))
		FTX_EXPECT(e.data.data == DATA,
			   "rx: data 0x%llx, expected 0x%x",
			   (unsigned long long) e.data.data, DATA);
	if (rx && f == FI_CQ_FORMAT_TAGGED)
		FTX_EXPECT(e.tagged.tag == TAG, "rx: tag 0x%llx",
			   (unsigned long long) e.tagged.tag);
	if (rx)
		ftx_verify(buf, LEN, 0xcf, "received data");
	expect_empty(ctx, rx ? FTX_RX : FTX_TX);
	return 0;
}

static int
run_sread(struct ftx_ctx *ctx)
{
	struct fi_cq_tagged_entry e;
	struct fi_context2 fc;
	char buf[LEN + 10];
	uint64_t t0;
	ssize_t ret;
	int w = ctx->rank == 1 ? FTX_RX : FTX_TX;

	/* nothing is coming yet: the blocking read must time out */
	if (ctx->rank == 1) {
		FTX_POST(ctx, fi_trecv(ctx->ep, buf, sizeof(buf), NULL,
				       FI_ADDR_UNSPEC, TAG, 0, &fc));
		t0 = ftx_now_ns();
		ftx_note("fi_cq_sread(100 ms) with nothing to read");
		ret = fi_cq_sread(ctx->cq[FTX_RX], &e, 1, NULL, 100);
		FTX_EXPECT(ret == -FI_EAGAIN,
			   "fi_cq_sread with nothing to read returned %zd, "
			   "expected -FI_EAGAIN",
			   ret);
		FTX_EXPECT(ftx_now_ns() - t0 >= 50000000ull,
			   "fi_cq_sread(100 ms) gave up after %llu us",
			   (unsigned long long) (ftx_now_ns() - t0) / 1000);
		ftx_barrier(ctx);
	} else {
		ftx_fill(buf, LEN, 0xcf);
		ftx_barrier(ctx);
		/* the receiver should be asleep in fi_cq_sread by now */
		ftx_sleep_ms(200);
		FTX_POST(ctx, fi_tsenddata(ctx->ep, buf, LEN, NULL, DATA,
					   ctx->addrs[1], TAG, &fc));
	}
	ftx_note("fi_cq_sread(5 s) for the %s completion",
		 w == FTX_TX ? "send" : "receive");
	ret = fi_cq_sread(ctx->cq[w], &e, 1, NULL, 5000);
	if (ret == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};

		fi_cq_readerr(ctx->cq[w], &err, 0);
		ftx_fail("fi_cq_sread: error completion %s",
			 fi_strerror(err.err));
	}
	FTX_EXPECT(ret == 1, "fi_cq_sread(5 s) returned %zd (%s)", ret,
		   fi_strerror((int) -ret));
	FTX_EXPECT(e.op_context == &fc, "fi_cq_sread: op_context %p",
		   e.op_context);
	if (ctx->rank == 1) {
		FTX_EXPECT(e.len == LEN && e.tag == TAG && e.data == DATA,
			   "fi_cq_sread: len %zu tag 0x%llx data 0x%llx", e.len,
			   (unsigned long long) e.tag,
			   (unsigned long long) e.data);
		ftx_verify(buf, LEN, 0xcf, "data read through fi_cq_sread");
	}
	return 0;
}

static void
bind_cntrs(struct ftx_ctx *ctx)
{
	struct fi_cntr_attr attr = {
		.events = FI_CNTR_EVENTS_COMP,
		.wait_obj = FI_WAIT_UNSPEC,
	};

	FTX_CHK(fi_cntr_open(ctx->domain, &attr, &ctx->cntr[FTX_TX], NULL));
	FTX_CHK(fi_cntr_open(ctx->domain, &attr, &ctx->cntr[FTX_RX], NULL));
	FTX_CHK(fi_ep_bind(ctx->ep, &ctx->cntr[FTX_TX]->fid, FI_SEND));
	FTX_CHK(fi_ep_bind(ctx->ep, &ctx->cntr[FTX_RX]->fid, FI_RECV));
}

static int
run_cntr(struct ftx_ctx *ctx)
{
	int me = ctx->rank == 1 ? FTX_RX : FTX_TX;
	struct fid_cntr *c = ctx->cntr[me], *other = ctx->cntr[!me];
	char bufs[NCNT][16];
	uint64_t v;
	int i, ret;

	if (me == FTX_RX)
		for (i = 0; i < NCNT; i++)
			FTX_POST(ctx, fi_trecv(ctx->ep, bufs[i], 16, NULL,
					       FI_ADDR_UNSPEC, TAG, 0, NULL));
	ftx_barrier(ctx);
	if (me == FTX_TX)
		for (i = 0; i < NCNT; i++)
			FTX_POST(ctx, fi_tsend(ctx->ep, bufs[i], 16, NULL,
					       ctx->addrs[1], TAG, NULL));

	ftx_note("fi_cntr_wait(%d, 5 s)", NCNT);
	ret = fi_cntr_wait(c, NCNT, 5000);
	FTX_EXPECT(ret == 0, "fi_cntr_wait(%d) returned %d (%s), count %llu",
		   NCNT, ret, fi_strerror(ret < 0 ? -ret : ret),
		   (unsigned long long) fi_cntr_read(c));
	FTX_EXPECT((v = fi_cntr_read(c)) == NCNT, "%s counter reads %llu",
		   me == FTX_TX ? "send" : "recv", (unsigned long long) v);
	FTX_EXPECT((v = fi_cntr_readerr(c)) == 0, "error counter reads %llu",
		   (unsigned long long) v);
	FTX_EXPECT((v = fi_cntr_read(other)) == 0,
		   "the %s counter counted %llu, but this rank did none",
		   me == FTX_TX ? "recv" : "send", (unsigned long long) v);
	/* the counters count; the CQ still gets every completion */
	ftx_wait_n_ok(ctx, me, NCNT);

	FTX_CHK(fi_cntr_add(c, 5));
	FTX_EXPECT((v = fi_cntr_read(c)) == NCNT + 5,
		   "after fi_cntr_add(5): %llu", (unsigned long long) v);
	FTX_CHK(fi_cntr_set(c, 0));
	FTX_EXPECT((v = fi_cntr_read(c)) == 0, "after fi_cntr_set(0): %llu",
		   (unsigned long long) v);
	ftx_note("fi_cntr_wait(1, 100 ms) that must time out");
	ret = fi_cntr_wait(c, 1, 100);
	FTX_EXPECT(ret == -FI_ETIMEDOUT,
		   "fi_cntr_wait for an event that never comes returned %d, "
		   "expected -FI_ETIMEDOUT",
		   ret);
	FTX_CHK(fi_cntr_set(c, 3));
	ftx_note("fi_cntr_wait(3, 100 ms) with the counter at 3");
	FTX_EXPECT(fi_cntr_wait(c, 3, 100) == 0,
		   "fi_cntr_wait for a value already reached did not return 0");
	FTX_CHK(fi_cntr_adderr(c, 2));
	FTX_EXPECT((v = fi_cntr_readerr(c)) == 2,
		   "after fi_cntr_adderr(2): "
		   "%llu",
		   (unsigned long long) v);
	FTX_CHK(fi_cntr_seterr(c, 0));
	FTX_EXPECT((v = fi_cntr_readerr(c)) == 0,
		   "after fi_cntr_seterr(0): "
		   "%llu",
		   (unsigned long long) v);
	ftx_barrier(ctx);
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "context",
	 .run = run_format,
	 .flags = FTX_CASE_RAW_CQ,
	 .cq_format = FI_CQ_FORMAT_CONTEXT},
	{.name = "msg",
	 .run = run_format,
	 .flags = FTX_CASE_RAW_CQ,
	 .cq_format = FI_CQ_FORMAT_MSG},
	{.name = "data",
	 .run = run_format,
	 .flags = FTX_CASE_RAW_CQ,
	 .cq_format = FI_CQ_FORMAT_DATA},
	{.name = "tagged",
	 .run = run_format,
	 .flags = FTX_CASE_RAW_CQ,
	 .cq_format = FI_CQ_FORMAT_TAGGED},
	{.name = "sread",
	 .run = run_sread,
	 .flags = FTX_CASE_RAW_CQ,
	 .cq_wait = FI_WAIT_UNSPEC},
	{.name = "cntr", .run = run_cntr, .pre_enable = bind_cntrs},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_cq_formats",
	.desc = "CQ formats, blocking CQ reads, counters",
	.caps = FI_TAGGED,
	.nprocs = 2,
	.min_procs = 2,
	.max_procs = 2,
	.timeout = 20,
	.cases = cases,
};

int
main(int argc, char **argv)
{
	return ftx_main(&test, argc, argv);
}
