/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Bad input must be refused with a negative fi_errno, never accepted and
 * never a crash.  Each case is a fresh launch, so a crash in one does not
 * hide the others; within a case every check runs and all refusals that
 * did not happen are reported together.
 */
#include "common/ftx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD_ADDR ((fi_addr_t) 12345)
/* no libfabric header defines this bit for any operation */
#define UNKNOWN_FLAG (1ULL << 23)

static void
expect_neg(struct ftx_ctx *ctx, ssize_t ret, const char *what)
{
	struct ftx_comp c;

	if (ret < 0) {
		ftx_log("%s -> %zd (%s)", what, ret, fi_strerror((int) -ret));
		return;
	}
	/* say whether it turned into an error completion instead */
	ftx_drain_for(ctx, 20);
	if (ftx_try_comp(ctx, FTX_TX, &c) || ftx_try_comp(ctx, FTX_RX, &c))
		ftx_defer_fail("%s returned %zd instead of a negative "
			       "fi_errno (then a completion with err %d: %s)",
			       what, ret, c.err,
			       c.err ? fi_strerror(c.err) : "success");
	else
		ftx_defer_fail("%s returned %zd instead of a negative "
			       "fi_errno",
			       what, ret);
}

/* -FI_EAGAIN is no verdict on the input: retry until a real answer */
#define NEG(ctx, call)                                            \
	do {                                                      \
		ssize_t neg_r_;                                   \
		ftx_note("%s", #call);                            \
		while ((neg_r_ = (ssize_t) (call)) == -FI_EAGAIN) \
			ftx_eagain(ctx, #call);                   \
		expect_neg(ctx, neg_r_, #call);                   \
	} while (0)

static int
run_bad_hints(struct ftx_ctx *ctx)
{
	struct fi_info *info = NULL, *h;
	int ret;

	h = fi_dupinfo(ctx->hints);
	h->ep_attr->type = FI_EP_SOCK_STREAM;
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL,
			 NULL, 0, h, &info);
	FTX_SOFT(ret == -FI_ENODATA,
		 "fi_getinfo(ep_type FI_EP_SOCK_STREAM) returned %d, "
		 "expected -FI_ENODATA",
		 ret);
	if (!ret)
		fi_freeinfo(info);
	info = NULL;

	h->ep_attr->type = (enum fi_ep_type) 0x7f;
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL,
			 NULL, 0, h, &info);
	FTX_SOFT(ret == -FI_ENODATA,
		 "fi_getinfo(undefined ep_type 0x7f) returned %d, expected "
		 "-FI_ENODATA",
		 ret);
	if (!ret)
		fi_freeinfo(info);
	info = NULL;

	/* CQ data is a uint64_t, so no provider can offer 4096 bytes */
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->cq_data_size = 4096;
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL,
			 NULL, 0, h, &info);
	FTX_SOFT(ret == -FI_ENODATA,
		 "fi_getinfo(cq_data_size 4096) returned %d, expected "
		 "-FI_ENODATA",
		 ret);
	if (!ret)
		fi_freeinfo(info);
	fi_freeinfo(h);
	return 0;
}

static int
run_null_buf(struct ftx_ctx *ctx)
{
	struct fi_context2 fctx;
	fi_addr_t peer = ctx->addrs[1 - ctx->rank];

	if (ctx->rank != 0)
		return 0;
	NEG(ctx, fi_tsend(ctx->ep, NULL, 64, NULL, peer, 1, &fctx));
	NEG(ctx, fi_send(ctx->ep, NULL, 64, NULL, peer, &fctx));
	NEG(ctx, fi_tinject(ctx->ep, NULL, 8, peer, 1));
	NEG(ctx, fi_inject(ctx->ep, NULL, 8, peer));
	NEG(ctx, fi_tsenddata(ctx->ep, NULL, 64, NULL, 5, peer, 1, &fctx));
	NEG(ctx,
	    fi_trecv(ctx->ep, NULL, 64, NULL, FI_ADDR_UNSPEC, 1, 0, &fctx));
	NEG(ctx, fi_recv(ctx->ep, NULL, 64, NULL, FI_ADDR_UNSPEC, &fctx));
	return 0;
}

static int
run_bad_addr(struct ftx_ctx *ctx)
{
	struct fi_context2 fctx;
	char buf[64] = {0};
	struct iovec iov = {buf, sizeof(buf)};
	struct fi_msg_tagged tm = {
		.msg_iov = &iov,
		.iov_count = 1,
		.addr = BAD_ADDR,
		.tag = 1,
		.context = &fctx,
	};

	if (ctx->rank != 0)
		return 0;
	NEG(ctx, fi_tsend(ctx->ep, buf, sizeof(buf), NULL, BAD_ADDR, 1, &fctx));
	NEG(ctx, fi_send(ctx->ep, buf, sizeof(buf), NULL, BAD_ADDR, &fctx));
	NEG(ctx, fi_tinject(ctx->ep, buf, 8, BAD_ADDR, 1));
	NEG(ctx, fi_inject(ctx->ep, buf, 8, BAD_ADDR));
	NEG(ctx, fi_tsendmsg(ctx->ep, &tm, 0));
	NEG(ctx, fi_tsend(ctx->ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 1,
			  &fctx));
	return 0;
}

static int
run_iov_limit(struct ftx_ctx *ctx)
{
	size_t txl = ctx->info->tx_attr->iov_limit;
	size_t rxl = ctx->info->rx_attr->iov_limit;
	size_t n = (txl > rxl ? txl : rxl) + 1, i;
	struct iovec *iov = calloc(n, sizeof(*iov));
	void **desc = calloc(n, sizeof(*desc));
	char *buf = ftx_alloc(n * 8);
	struct fi_context2 fctx;
	struct fi_msg_tagged tm = {0};
	struct fi_msg m = {0};

	if (ctx->rank != 0)
		goto out;
	for (i = 0; i < n; i++) {
		iov[i].iov_base = buf + i * 8;
		iov[i].iov_len = 8;
	}
	tm.msg_iov = m.msg_iov = iov;
	tm.desc = m.desc = desc;
	tm.context = m.context = &fctx;
	tm.tag = 1;

	tm.iov_count = m.iov_count = txl + 1;
	tm.addr = m.addr = ctx->addrs[1];
	NEG(ctx, fi_tsendmsg(ctx->ep, &tm, 0));
	NEG(ctx, fi_sendmsg(ctx->ep, &m, 0));
	NEG(ctx,
	    fi_tsendv(ctx->ep, iov, desc, txl + 1, ctx->addrs[1], 1, &fctx));

	tm.iov_count = m.iov_count = rxl + 1;
	tm.addr = m.addr = FI_ADDR_UNSPEC;
	NEG(ctx, fi_trecvmsg(ctx->ep, &tm, 0));
	NEG(ctx, fi_recvmsg(ctx->ep, &m, 0));
out:
	ftx_free(buf);
	free(desc);
	free(iov);
	return 0;
}

static int
run_bad_flags(struct ftx_ctx *ctx)
{
	struct fi_context2 fctx;
	char buf[64] = {0};
	struct iovec iov = {buf, sizeof(buf)};
	struct fi_msg_tagged tm = {
		.msg_iov = &iov,
		.iov_count = 1,
		.tag = 1,
		.context = &fctx,
	};
	struct fi_msg m = {
		.msg_iov = &iov,
		.iov_count = 1,
		.context = &fctx,
	};

	if (ctx->rank != 0)
		return 0;
	tm.addr = m.addr = ctx->addrs[1];
	NEG(ctx, fi_tsendmsg(ctx->ep, &tm, UNKNOWN_FLAG));
	NEG(ctx, fi_sendmsg(ctx->ep, &m, UNKNOWN_FLAG));
	tm.addr = m.addr = FI_ADDR_UNSPEC;
	NEG(ctx, fi_trecvmsg(ctx->ep, &tm, UNKNOWN_FLAG));
	NEG(ctx, fi_recvmsg(ctx->ep, &m, UNKNOWN_FLAG));
	return 0;
}

static int
run_inject_size(struct ftx_ctx *ctx)
{
	size_t len = ctx->info->tx_attr->inject_size + 1;
	char *buf = ftx_alloc(len);

	if (ctx->rank == 0) {
		NEG(ctx, fi_tinject(ctx->ep, buf, len, ctx->addrs[1], 1));
		NEG(ctx, fi_inject(ctx->ep, buf, len, ctx->addrs[1]));
		NEG(ctx,
		    fi_tinjectdata(ctx->ep, buf, len, 3, ctx->addrs[1], 1));
	}
	ftx_free(buf);
	return 0;
}

/* a close that succeeds here leaves a dangling object: stop at once */
static void
expect_busy(struct fid *fid, const char *what)
{
	int ret;

	ftx_note("fi_close(%s)", what);
	ret = fi_close(fid);

	if (ret == -FI_EBUSY)
		return;
	ftx_fail("fi_close(%s) while still in use returned %d (%s), expected "
		 "-FI_EBUSY",
		 what, ret, ret ? fi_strerror(-ret) : "closed");
}

static int
run_close_busy(struct ftx_ctx *ctx)
{
	ftx_barrier(ctx);
	expect_busy(&ctx->domain->fid, "domain with an endpoint");
	expect_busy(&ctx->av->fid, "av bound to an endpoint");
	expect_busy(&ctx->cq[FTX_TX]->fid, "tx cq bound to an endpoint");
	expect_busy(&ctx->cq[FTX_RX]->fid, "rx cq bound to an endpoint");
	expect_busy(&ctx->fabric->fid, "fabric with a domain");
	/* once the endpoint is gone the rest closes in the usual order */
	ftx_note("fi_close(ep) after the refused closes");
	FTX_CHK(fi_close(&ctx->ep->fid));
	ctx->ep = NULL;
	expect_busy(&ctx->fabric->fid, "fabric with a domain");
	return 0;
}

static int
run_av_ops(struct ftx_ctx *ctx)
{
	static uint8_t names[FTX_MAX_PROCS][FTX_NAME_MAX];
	size_t lens[FTX_MAX_PROCS], len;
	uint8_t addr[FTX_NAME_MAX];
	char str[256], tiny[4];
	const char *s;
	int ret, peer = 1 - ctx->rank;

	ftx_exchange_names(ctx, ctx->ep, names, lens);

	len = sizeof(addr);
	ftx_note("fi_av_lookup(peer)");
	ret = fi_av_lookup(ctx->av, ctx->addrs[peer], addr, &len);
	FTX_SOFT(ret == 0, "fi_av_lookup(peer) returned %d", ret);
	FTX_SOFT(len == lens[peer] && !memcmp(addr, names[peer], len),
		 "fi_av_lookup(peer) gave %zu bytes that differ from the %zu "
		 "byte name fi_getname produced",
		 len, lens[peer]);

	len = 1;
	ftx_note("fi_av_lookup(peer) into 1 byte");
	ret = fi_av_lookup(ctx->av, ctx->addrs[peer], addr, &len);
	FTX_SOFT(ret == 0 || ret == -FI_ETOOSMALL,
		 "fi_av_lookup with a 1-byte buffer returned %d", ret);
	FTX_SOFT(len == lens[peer],
		 "fi_av_lookup with a 1-byte buffer set addrlen %zu, expected "
		 "the needed %zu",
		 len, lens[peer]);

	len = sizeof(str);
	ftx_note("fi_av_straddr");
	s = fi_av_straddr(ctx->av, names[peer], str, &len);
	FTX_SOFT(s && *s && len > 1 && len <= sizeof(str),
		 "fi_av_straddr gave %s (len %zu)", s ? s : "NULL", len);
	ftx_log("peer address: %s", s ? s : "(null)");
	len = sizeof(tiny);
	s = fi_av_straddr(ctx->av, names[peer], tiny, &len);
	FTX_SOFT(s == tiny && strnlen(tiny, sizeof(tiny)) < sizeof(tiny),
		 "fi_av_straddr into 4 bytes did not truncate safely (returned "
		 "%s buf, %s NUL)",
		 s == tiny ? "the" : "not the",
		 strnlen(tiny, sizeof(tiny)) < sizeof(tiny) ? "with" :
							      "without");
	FTX_SOFT(len > sizeof(tiny),
		 "fi_av_straddr into 4 bytes reports "
		 "only %zu bytes needed",
		 len);

	return 0;
}

static int
run_av_removed(struct ftx_ctx *ctx)
{
	uint8_t addr[FTX_NAME_MAX];
	size_t len;
	int ret, peer = 1 - ctx->rank;

	/* a removed address is as invalid as one never inserted */
	ftx_barrier(ctx);
	ftx_note("fi_av_remove(peer)");
	ret = fi_av_remove(ctx->av, &ctx->addrs[peer], 1, 0);
	FTX_SOFT(ret == 0, "fi_av_remove(peer) returned %d", ret);
	len = sizeof(addr);
	NEG(ctx, fi_av_lookup(ctx->av, ctx->addrs[peer], addr, &len));
	NEG(ctx, fi_av_remove(ctx->av, &ctx->addrs[peer], 1, 0));
	return 0;
}

/* apart from av_lookup, since providers tend to crash on these */
static int
run_av_bad_addr(struct ftx_ctx *ctx)
{
	uint8_t addr[FTX_NAME_MAX];
	size_t len = sizeof(addr);
	fi_addr_t bad = BAD_ADDR;

	NEG(ctx, fi_av_lookup(ctx->av, BAD_ADDR, addr, &len));
	NEG(ctx, fi_av_remove(ctx->av, &bad, 1, 0));
	return 0;
}

static const struct ftx_case cases[] = {
	{.name = "bad_hints", .run = run_bad_hints, .flags = FTX_CASE_NO_SETUP},
	{.name = "null_buf", .run = run_null_buf},
	{.name = "bad_addr", .run = run_bad_addr},
	{.name = "iov_limit", .run = run_iov_limit},
	{.name = "bad_flags", .run = run_bad_flags},
	{.name = "inject_size", .run = run_inject_size},
	{.name = "close_busy", .run = run_close_busy},
	{.name = "av_lookup", .run = run_av_ops},
	{.name = "av_removed", .run = run_av_removed},
	{.name = "av_bad_addr", .run = run_av_bad_addr},
	{0},
};

static const struct ftx_test test = {
	.name = "ftx_neg",
	.desc = "bad input is refused with a negative fi_errno",
	.caps = FI_MSG | FI_TAGGED,
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
