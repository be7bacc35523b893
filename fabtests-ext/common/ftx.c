/* SPDX-License-Identifier: BSD-2-Clause */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ftx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FTX_GUARD	  64
#define FTX_GUARD_BYTE	  0xa5
#define FTX_FINAL_BARRIER (FTX_NBARRIERS - 1)

struct ftx_barrier {
	_Atomic uint32_t count;
	_Atomic uint32_t gen;
};

/* Everything the ranks share; lives in a MAP_SHARED page set up pre-fork. */
struct ftx_shared {
	_Atomic int abort;
	struct ftx_barrier bar[FTX_NBARRIERS];
	size_t namelen[FTX_MAX_PROCS];
	uint8_t names[FTX_MAX_PROCS][FTX_NAME_MAX];
	char msg[FTX_MAX_PROCS][FTX_MSG_MAX];
	/* the step a rank last announced, for ranks that die silently */
	char note[FTX_MAX_PROCS][160];
	_Atomic int expect_death[FTX_MAX_PROCS];
	_Atomic int dead[FTX_MAX_PROCS];
	_Atomic uint64_t scratch[FTX_NSCRATCH];
};

struct ftx_opts ftx_opts;
static struct ftx_shared *shared;
static int my_rank = -1;
static unsigned ncpus = 1;

uint64_t
ftx_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

void
ftx_sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

bool
ftx_expired(const struct ftx_ctx *ctx)
{
	return ftx_now_ns() > ctx->deadline_ns;
}

static _Noreturn void
vreport(int code, const char *prefix, const char *fmt, va_list ap)
{
	char buf[FTX_MSG_MAX];
	int n;

	n = snprintf(buf, sizeof(buf), "%s", prefix);
	vsnprintf(buf + n, sizeof(buf) - (size_t) n, fmt, ap);
	if (shared && my_rank >= 0) {
		memcpy(shared->msg[my_rank], buf, sizeof(buf));
		/* peers blocked on this rank must not wait for the timeout */
		atomic_store(&shared->abort, 1);
	}
	if (ftx_opts.verbose || !shared || my_rank < 0)
		fprintf(stderr, "[rank %d] %s\n", my_rank, buf);
	fflush(stdout);
	fflush(stderr);
	/*
	 * exit(), not _exit(): libfabric's destructor lets providers such as
	 * shm unlink their named regions instead of leaking them.
	 */
	exit(code);
}

void
ftx_fail_at(const char *file, int line, const char *fmt, ...)
{
	char prefix[128];
	const char *base = strrchr(file, '/');
	va_list ap;

	snprintf(prefix, sizeof(prefix), "%s:%d: ", base ? base + 1 : file,
		 line);
	va_start(ap, fmt);
	vreport(FTX_EXIT_FAIL, prefix, fmt, ap);
	va_end(ap);
}

static int ndeferred;
static char first_deferred[FTX_MSG_MAX];

void
ftx_defer_fail_at(const char *file, int line, const char *fmt, ...)
{
	const char *base = strrchr(file, '/');
	char buf[FTX_MSG_MAX - 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "# rank %d: %s:%d: %s\n", my_rank,
		base ? base + 1 : file, line, buf);
	if (!ndeferred++)
		snprintf(first_deferred, sizeof(first_deferred), "%s:%d: %s",
			 base ? base + 1 : file, line, buf);
}

void
ftx_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(FTX_EXIT_SKIP, "", fmt, ap);
	va_end(ap);
}

void
ftx_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(shared->note[my_rank], sizeof(shared->note[0]), fmt, ap);
	va_end(ap);
}

void
ftx_log(const char *fmt, ...)
{
	va_list ap;

	if (!ftx_opts.verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "[rank %d] ", my_rank);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static _Noreturn void
ftx_aborted(void)
{
	fflush(stdout);
	exit(FTX_EXIT_ABORTED);
}

/* Give other ranks the CPU when there are more ranks than cores: at
 * every idle poll, as MPI libraries do then (Open MPI's
 * mpi_yield_when_idle), or a rank whose peer is off the CPU burns what
 * is left of its slice before that peer can answer. */
static void
relax(unsigned *spins)
{
	if (++*spins >= 64) {
		*spins = 0;
		if (atomic_load(&shared->abort))
			ftx_aborted();
	}
	if (ftx_opts.nprocs > (int) ncpus || ncpus == 1)
		sched_yield();
}

void
ftx_relax(unsigned *spins)
{
	relax(spins);
}

const char *
ftx_caps_str(uint64_t caps, char *buf, size_t len)
{
	char *s = fi_tostr(&caps, FI_TYPE_CAPS);

	snprintf(buf, len, "%s", s ? s : "?");
	return buf;
}

/* Accepts plain numbers and k/m suffixes (powers of two): "8,4k,1m+3". */
int
ftx_parse_sizes(const char *arg, size_t *out, int max)
{
	const char *p = arg;
	char *end;
	int n = 0;

	while (*p && n < max) {
		unsigned long long v = strtoull(p, &end, 0);

		if (end == p)
			return -1;
		if (*end == 'k' || *end == 'K')
			v <<= 10, end++;
		else if (*end == 'm' || *end == 'M')
			v <<= 20, end++;
		if (*end == '+') {
			p = end + 1;
			v += strtoull(p, &end, 0);
		}
		out[n++] = (size_t) v;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		p = end;
	}
	return n ? n : -1;
}

/* ---------------------------------------------------------------- data */

uint64_t
ftx_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t
ftx_seed(uint64_t a, uint64_t b, uint64_t c)
{
	return ftx_mix(ftx_mix(ftx_mix(a) ^ b) ^ c);
}

/* Byte i of the pattern is byte i%8 of mix(seed + i/8), on any offset. */
void
ftx_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	size_t words = len / 8, i;
	uint64_t v;

	for (i = 0; i < words; i++) {
		v = ftx_mix(seed + i);
		memcpy(p + i * 8, &v, 8);
	}
	if (len % 8) {
		v = ftx_mix(seed + words);
		memcpy(p + words * 8, &v, len % 8);
	}
}

size_t
ftx_check(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *p = buf;
	size_t words = len / 8, i, j;
	uint64_t v;

	for (i = 0; i <= words; i++) {
		size_t n = i < words ? 8 : len % 8;

		if (!n)
			break;
		v = ftx_mix(seed + i);
		if (!memcmp(p + i * 8, &v, n))
			continue;
		for (j = 0; j < n; j++)
			if (p[i * 8 + j] != ((uint8_t *) &v)[j])
				return i * 8 + j;
	}
	return SIZE_MAX;
}

void
ftx_verify(const void *buf, size_t len, uint64_t seed, const char *what)
{
	size_t off = ftx_check(buf, len, seed);

	if (off != SIZE_MAX)
		ftx_fail("%s: data mismatch at byte %zu of %zu", what, off,
			 len);
}

void *
ftx_alloc(size_t len)
{
	void *p;

	if (posix_memalign(&p, 64, len + FTX_GUARD))
		ftx_fail("out of memory allocating %zu bytes", len);
	/* stale data must never look like a valid pattern */
	memset(p, 0x5a, len);
	memset((uint8_t *) p + len, FTX_GUARD_BYTE, FTX_GUARD);
	return p;
}

void
ftx_free(void *p)
{
	free(p);
}

void
ftx_guard_verify(const void *p, size_t len, const char *what)
{
	const uint8_t *g = (const uint8_t *) p + len;
	int i;

	for (i = 0; i < FTX_GUARD; i++)
		if (g[i] != FTX_GUARD_BYTE)
			ftx_fail("%s: write past the end of a %zu-byte buffer "
				 "(guard byte %d)",
				 what, len, i);
}

/* --------------------------------------------------------- completions */

static void
q_push(struct ftx_cqq *q, const struct ftx_comp *c)
{
	if (q->count == q->cap) {
		size_t ncap = q->cap ? q->cap * 2 : 256, i;
		struct ftx_comp *nv = malloc(ncap * sizeof(*nv));

		if (!nv)
			ftx_fail("out of memory queueing completions");
		for (i = 0; i < q->count; i++)
			nv[i] = q->v[(q->head + i) % q->cap];
		free(q->v);
		q->v = nv;
		q->head = 0;
		q->cap = ncap;
	}
	q->v[(q->head + q->count) % q->cap] = *c;
	q->count++;
}

static bool
q_pop(struct ftx_cqq *q, struct ftx_comp *c)
{
	if (!q->count)
		return false;
	*c = q->v[q->head];
	q->head = (q->head + 1) % q->cap;
	q->count--;
	return true;
}

static void
read_err(struct fid_cq *cq, struct ftx_comp *c)
{
	struct fi_cq_err_entry e;
	const char *s;
	ssize_t ret;

	memset(&e, 0, sizeof(e));
	memset(c, 0, sizeof(*c));
	ret = fi_cq_readerr(cq, &e, 0);
	if (ret != 1)
		ftx_fail("fi_cq_readerr after -FI_EAVAIL returned %zd (%s)",
			 ret, fi_strerror((int) -ret));
	c->err = e.err ? e.err : -1;
	c->prov_errno = e.prov_errno;
	c->op_context = e.op_context;
	c->flags = e.flags;
	c->len = e.len;
	c->buf = e.buf;
	c->data = e.data;
	c->tag = e.tag;
	c->olen = e.olen;
	c->src = FI_ADDR_NOTAVAIL;
	s = fi_cq_strerror(cq, e.prov_errno, e.err_data, NULL, 0);
	snprintf(c->errstr, sizeof(c->errstr), "%s", s ? s : "");
}

static void
poll_cq(struct ftx_ctx *ctx, enum ftx_which w)
{
	struct fi_cq_tagged_entry e[16];
	fi_addr_t src[16];
	struct ftx_comp c;
	bool from = w == FTX_RX && (ctx->info->caps & FI_SOURCE);
	ssize_t ret, i;

	for (;;) {
		if (from)
			ret = fi_cq_readfrom(ctx->cq[w], e, 16, src);
		else
			ret = fi_cq_read(ctx->cq[w], e, 16);
		if (ret == -FI_EAGAIN)
			return;
		if (ret == -FI_EAVAIL) {
			read_err(ctx->cq[w], &c);
			if (ftx_opts.verbose)
				ftx_print_comp(w == FTX_TX ? "tx" : "rx", &c);
			q_push(&ctx->q[w], &c);
			continue;
		}
		if (ret < 0)
			ftx_fail("fi_cq_read(%s): %s (%zd)",
				 w == FTX_TX ? "tx" : "rx",
				 fi_strerror((int) -ret), ret);
		for (i = 0; i < ret; i++) {
			memset(&c, 0, sizeof(c));
			c.op_context = e[i].op_context;
			c.flags = e[i].flags;
			c.len = e[i].len;
			c.buf = e[i].buf;
			c.data = e[i].data;
			c.tag = e[i].tag;
			c.src = from ? src[i] : FI_ADDR_NOTAVAIL;
			q_push(&ctx->q[w], &c);
		}
		if (ret < 16)
			return;
	}
}

void
ftx_progress(struct ftx_ctx *ctx)
{
	if (ctx->tcase && (ctx->tcase->flags & FTX_CASE_RAW_CQ))
		return;
	if (ctx->cq[FTX_TX])
		poll_cq(ctx, FTX_TX);
	if (ctx->cq[FTX_RX])
		poll_cq(ctx, FTX_RX);
}

void
ftx_eagain(struct ftx_ctx *ctx, const char *what)
{
	static unsigned spins;

	ftx_progress(ctx);
	if (ftx_expired(ctx))
		ftx_fail("timeout: %s kept returning -FI_EAGAIN%s%s", what,
			 ctx->what ? ": " : "", ctx->what ? ctx->what : "");
	relax(&spins);
}

size_t
ftx_pending(const struct ftx_ctx *ctx, enum ftx_which w)
{
	return ctx->q[w].count;
}

bool
ftx_try_comp(struct ftx_ctx *ctx, enum ftx_which w, struct ftx_comp *out)
{
	if (!ctx->q[w].count)
		ftx_progress(ctx);
	return q_pop(&ctx->q[w], out);
}

void
ftx_wait_comp(struct ftx_ctx *ctx, enum ftx_which w, struct ftx_comp *out)
{
	unsigned spins = 0;

	while (!ftx_try_comp(ctx, w, out)) {
		if (ftx_expired(ctx))
			ftx_fail("timeout waiting for a %s completion%s%s",
				 w == FTX_TX ? "send" : "receive",
				 ctx->what ? ": " : "",
				 ctx->what ? ctx->what : "");
		relax(&spins);
	}
}

void
ftx_print_comp(const char *what, const struct ftx_comp *c)
{
	fprintf(stderr,
		"[rank %d] %s completion: err=%d (%s) prov_errno=%d ctx=%p "
		"flags=0x%llx len=%zu olen=%zu tag=0x%llx data=0x%llx %s\n",
		my_rank, what, c->err, c->err ? fi_strerror(c->err) : "ok",
		c->prov_errno, c->op_context, (unsigned long long) c->flags,
		c->len, c->olen, (unsigned long long) c->tag,
		(unsigned long long) c->data, c->errstr);
}

void
ftx_wait_ok(struct ftx_ctx *ctx, enum ftx_which w, struct ftx_comp *out)
{
	ftx_wait_comp(ctx, w, out);
	if (out->err) {
		ftx_print_comp(w == FTX_TX ? "tx" : "rx", out);
		ftx_fail("%s error completion: %s (prov_errno %d: %s), ctx %p",
			 w == FTX_TX ? "send" : "receive",
			 fi_strerror(out->err), out->prov_errno, out->errstr,
			 out->op_context);
	}
}

void
ftx_wait_n_ok(struct ftx_ctx *ctx, enum ftx_which w, size_t n)
{
	struct ftx_comp c;

	while (n--)
		ftx_wait_ok(ctx, w, &c);
}

void
ftx_drain_for(struct ftx_ctx *ctx, unsigned ms)
{
	uint64_t end = ftx_now_ns() + (uint64_t) ms * 1000000ull;
	unsigned spins = 0;

	while (ftx_now_ns() < end) {
		ftx_progress(ctx);
		relax(&spins);
	}
}

ssize_t
ftx_cq_read_raw(struct ftx_ctx *ctx, struct fid_cq *cq, void *entry,
		fi_addr_t *src, struct fi_cq_err_entry *err)
{
	unsigned spins = 0;
	ssize_t ret;

	for (;;) {
		ret = src ? fi_cq_readfrom(cq, entry, 1, src) :
			    fi_cq_read(cq, entry, 1);
		if (ret == 1)
			return 1;
		if (ret == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			ret = fi_cq_readerr(cq, err, 0);
			if (ret != 1)
				ftx_fail("fi_cq_readerr: %zd", ret);
			return 0;
		}
		if (ret != -FI_EAGAIN)
			ftx_fail("fi_cq_read: %s (%zd)",
				 fi_strerror((int) -ret), ret);
		if (ftx_expired(ctx))
			ftx_fail("timeout waiting for a completion");
		relax(&spins);
	}
}

/* ------------------------------------------------------------ barriers */

/*
 * A counting barrier with a generation number; progress is driven while
 * waiting so that a manual-progress provider keeps moving data that peers
 * sent before they arrived here.
 */
void
ftx_barrier_n(struct ftx_ctx *ctx, int slot, int count)
{
	struct ftx_barrier *b = &shared->bar[slot];
	uint32_t gen = atomic_load(&b->gen);
	unsigned spins = 0;

	if (atomic_fetch_add(&b->count, 1) + 1 == (uint32_t) count) {
		atomic_store(&b->count, 0);
		atomic_fetch_add(&b->gen, 1);
		return;
	}
	while (atomic_load(&b->gen) == gen) {
		ftx_progress(ctx);
		if (ftx_expired(ctx))
			ftx_fail("timeout in barrier %d (%u of %d arrived)%s%s",
				 slot, atomic_load(&b->count), count,
				 ctx->what ? ": " : "",
				 ctx->what ? ctx->what : "");
		relax(&spins);
	}
}

void
ftx_barrier(struct ftx_ctx *ctx)
{
	ftx_barrier_n(ctx, 0, ctx->nprocs);
}

/* Uses the address-exchange slots, so len is at most FTX_NAME_MAX. */
void
ftx_allgather(struct ftx_ctx *ctx, const void *mine, size_t len, void *all)
{
	int i;

	if (len > FTX_NAME_MAX)
		ftx_fail("ftx_allgather: %zu bytes per rank is too many", len);
	memcpy(shared->names[ctx->rank], mine, len);
	ftx_barrier(ctx);
	for (i = 0; i < ctx->nprocs; i++)
		memcpy((uint8_t *) all + (size_t) i * len, shared->names[i],
		       len);
	/* the slots are reused by the next exchange */
	ftx_barrier(ctx);
}

_Atomic uint64_t *
ftx_scratch(int idx)
{
	return &shared->scratch[idx];
}

uint64_t
ftx_bcast(struct ftx_ctx *ctx, int slot, uint64_t v)
{
	if (ctx->rank == 0)
		atomic_store(&shared->scratch[slot], v);
	ftx_barrier(ctx);
	return atomic_load(&shared->scratch[slot]);
}

void
ftx_expect_death(struct ftx_ctx *ctx)
{
	atomic_store(&shared->expect_death[ctx->rank], 1);
}

bool
ftx_rank_dead(int rank)
{
	return atomic_load(&shared->dead[rank]);
}

/* ----------------------------------------------------------- addresses */

void
ftx_exchange_names(struct ftx_ctx *ctx, struct fid_ep *ep,
		   uint8_t names[][FTX_NAME_MAX], size_t *lens)
{
	size_t len = FTX_NAME_MAX;
	int i;

	FTX_CHK(fi_getname(&ep->fid, shared->names[ctx->rank], &len));
	shared->namelen[ctx->rank] = len;
	ftx_barrier(ctx);
	for (i = 0; i < ctx->nprocs; i++) {
		lens[i] = shared->namelen[i];
		memcpy(names[i], shared->names[i], lens[i]);
	}
	/* the slots are reused by the next exchange */
	ftx_barrier(ctx);
}

void
ftx_insert_all(struct ftx_ctx *ctx, struct fid_ep *ep, struct fid_av *av,
	       fi_addr_t *addrs)
{
	static uint8_t names[FTX_MAX_PROCS][FTX_NAME_MAX];
	size_t lens[FTX_MAX_PROCS];
	int i, ret;

	ftx_exchange_names(ctx, ep, names, lens);
	for (i = 0; i < ctx->nprocs; i++) {
		/* fi_av(3): FI_ADDR_STR addresses come as an array of
		 * strings */
		const char *str = (const char *) names[i];

		addrs[i] = FI_ADDR_NOTAVAIL;
		ret = fi_av_insert(av,
				   ctx->info->addr_format == FI_ADDR_STR ?
					   (const void *) &str :
					   (const void *) names[i],
				   1, &addrs[i], 0, NULL);
		if (ret != 1)
			ftx_fail("fi_av_insert(rank %d) returned %d (%s)", i,
				 ret, fi_strerror(-ret));
	}
}

/* ------------------------------------------------------------- objects */

/*
 * Some libraries that libfabric loads (PSM's, for one) turn a crash into
 * exit(1); die by the signal instead so that the parent can tell.
 */
static void
crash_handler(int sig)
{
	signal(sig, SIG_DFL);
	raise(sig);
}

static void
catch_crashes(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = crash_handler;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

struct fi_info *
ftx_hints(struct ftx_ctx *ctx)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		ftx_fail("fi_allocinfo failed");
	h->ep_attr->type = FI_EP_RDM;
	h->caps = ctx->caps;
	/* every context we pass is a struct fi_context2 */
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	/* only relevant to RMA; keeps providers that want them in the set */
	h->domain_attr->mr_mode =
		FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->av_type = ftx_opts.av_type;
	h->addr_format = ftx_opts.addr_format;
	/* several tests check send-after-send matching order */
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	h->fabric_attr->prov_name = strdup(ftx_opts.prov);
	return h;
}

/*
 * A provider that offers no RDM endpoint at all is a failure (it is not
 * loaded, or broken); only a missing capability is a reason to skip.
 */
int
ftx_getinfo(struct ftx_ctx *ctx, struct fi_info *hints, struct fi_info **info)
{
	struct fi_info *probe, *pinfo = NULL;
	char caps[512], sizes[32];
	int ret;

	snprintf(sizes, sizeof(sizes), "%zu", hints->rx_attr->size);
	probe = fi_allocinfo();
	if (!probe)
		ftx_fail("fi_allocinfo failed");
	probe->ep_attr->type = FI_EP_RDM;
	probe->mode = hints->mode;
	probe->domain_attr->mr_mode = hints->domain_attr->mr_mode;
	probe->fabric_attr->prov_name = strdup(ftx_opts.prov);
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL,
			 NULL, 0, probe, &pinfo);
	fi_freeinfo(probe);
	if (ret)
		ftx_fail(
			"provider '%s' offers no FI_EP_RDM endpoint: %s (%d)%s",
			ftx_opts.prov, fi_strerror(-ret), ret,
			getenv("FI_PROVIDER_PATH") ?
				"" :
				" (FI_PROVIDER_PATH is not set)");
	fi_freeinfo(pinfo);

	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL,
			 NULL, 0, hints, info);
	catch_crashes();
	if (ret == -FI_ENODATA)
		ftx_skip("provider '%s' cannot satisfy caps %s%s%s: "
			 "-FI_ENODATA",
			 ftx_opts.prov,
			 ftx_caps_str(hints->caps, caps, sizeof(caps)),
			 hints->rx_attr->size ? ", rx_attr->size " : "",
			 hints->rx_attr->size ? sizes : "");
	if (ret)
		ftx_fail("fi_getinfo: %s (%d)", fi_strerror(-ret), ret);
	(void) ctx;
	return 0;
}

void
ftx_setup(struct ftx_ctx *ctx)
{
	struct fi_cq_attr cq_attr = {0};
	struct fi_av_attr av_attr = {0};
	struct fi_info *fi;
	int w;

	ftx_getinfo(ctx, ctx->hints, &ctx->info);
	fi = ctx->info;
	ftx_log("using %s / %s / %s", fi->fabric_attr->prov_name,
		fi->fabric_attr->name, fi->domain_attr->name);

	FTX_CHK(fi_fabric(fi->fabric_attr, &ctx->fabric, NULL));
	FTX_CHK(fi_domain(ctx->fabric, fi, &ctx->domain, NULL));

	av_attr.type = ftx_opts.av_type;
	av_attr.count = (size_t) ctx->nprocs;
	FTX_CHK(fi_av_open(ctx->domain, &av_attr, &ctx->av, NULL));

	cq_attr.format = ctx->tcase->cq_format ? ctx->tcase->cq_format :
						 FI_CQ_FORMAT_TAGGED;
	cq_attr.wait_obj =
		ctx->tcase->cq_wait ? ctx->tcase->cq_wait : FI_WAIT_NONE;
	for (w = 0; w < 2; w++)
		FTX_CHK(fi_cq_open(ctx->domain, &cq_attr, &ctx->cq[w], NULL));

	FTX_CHK(fi_endpoint(ctx->domain, fi, &ctx->ep, NULL));
	FTX_CHK(fi_ep_bind(ctx->ep, &ctx->av->fid, 0));
	FTX_CHK(fi_ep_bind(ctx->ep, &ctx->cq[FTX_TX]->fid, FI_TRANSMIT));
	FTX_CHK(fi_ep_bind(ctx->ep, &ctx->cq[FTX_RX]->fid, FI_RECV));
	if (ctx->tcase->pre_enable)
		ctx->tcase->pre_enable(ctx);
	FTX_CHK(fi_enable(ctx->ep));

	ftx_insert_all(ctx, ctx->ep, ctx->av, ctx->addrs);
}

static void
close_fid(struct fid **fid, const char *what)
{
	int ret;

	if (!*fid)
		return;
	ret = fi_close(*fid);
	if (ret)
		ftx_fail("fi_close(%s): %s (%d)", what, fi_strerror(-ret), ret);
	*fid = NULL;
}

void
ftx_teardown(struct ftx_ctx *ctx)
{
	close_fid((struct fid **) &ctx->ep, "ep");
	close_fid((struct fid **) &ctx->eq, "eq");
	close_fid((struct fid **) &ctx->cntr[FTX_TX], "tx counter");
	close_fid((struct fid **) &ctx->cntr[FTX_RX], "rx counter");
	close_fid((struct fid **) &ctx->cq[FTX_TX], "tx cq");
	close_fid((struct fid **) &ctx->cq[FTX_RX], "rx cq");
	close_fid((struct fid **) &ctx->av, "av");
	close_fid((struct fid **) &ctx->domain, "domain");
	close_fid((struct fid **) &ctx->fabric, "fabric");
	if (ctx->info)
		fi_freeinfo(ctx->info);
	ctx->info = NULL;
	if (ctx->hints)
		fi_freeinfo(ctx->hints);
	ctx->hints = NULL;
	free(ctx->q[0].v);
	free(ctx->q[1].v);
	memset(ctx->q, 0, sizeof(ctx->q));
}

/* ------------------------------------------------------------ launcher */

/*
 * FTX_BIND=1: rank r runs alone on the r-th CPU it may use while there
 * are no more ranks than those CPUs, as mpirun binds ranks to cores by
 * default; with more ranks than CPUs nothing is bound, as mpirun does
 * not bind an oversubscribed job.  Unbound, tnbc's 2-rank allreduce
 * between namespaces on a 2-CPU machine had slow medians (up to 72 us
 * against 13) in 7 of 32 sizes and rounds, bound in none of 32: its
 * engine and connection threads wake beside the ranks, and the
 * scheduler moves ranks that are not bound.
 */
static void
bind_rank(int rank)
{
	const char *b = getenv("FTX_BIND");
	cpu_set_t may, one;
	int cpu, nth = 0;

	if (!b || strcmp(b, "1") || sched_getaffinity(0, sizeof(may), &may) ||
	    ftx_opts.nprocs > CPU_COUNT(&may))
		return;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &may) && nth++ == rank)
			break;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		fprintf(stderr, "rank %d: cannot bind to CPU %d: %s\n", rank,
			cpu, strerror(errno));
}

/*
 * FTX_HOSTS="pid,pid,...": each pid is a process whose namespaces make
 * a host (its own network, mount with a private /dev/shm, PID and UTS
 * namespaces, as tests/netns.sh builds them).  Rank r runs on host
 * r * nhosts / nprocs: it enters that host's namespaces and runs in a
 * child there (a PID namespace is entered by the children of whoever
 * joins it), while this process mirrors the child's end so that the
 * launcher sees the rank's own exit or signal.
 */
static void
enter_host(int rank)
{
	static const char *const ns[] = {"net", "uts", "ipc", "pid", "mnt"};
	const char *list = getenv("FTX_HOSTS");
	char path[64], *end;
	long pids[FTX_MAX_PROCS];
	int nhosts = 0, host, st;
	pid_t child;

	if (!list || !*list)
		return;
	while (*list && nhosts < FTX_MAX_PROCS) {
		pids[nhosts++] = strtol(list, &end, 10);
		list = *end == ',' ? end + 1 : end;
		if (end == list && *end)
			break;
	}
	host = rank * nhosts / ftx_opts.nprocs;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		int fd;

		snprintf(path, sizeof(path), "/proc/%ld/ns/%s", pids[host],
			 ns[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, 0)) {
			fprintf(stderr, "rank %d: host %d: %s: %s\n", rank,
				host, path, strerror(errno));
			_exit(FTX_EXIT_FAIL);
		}
		close(fd);
	}
	child = fork();
	if (child < 0)
		_exit(FTX_EXIT_FAIL);
	if (!child) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		return;
	}
	while (waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(st)) {
		signal(WTERMSIG(st), SIG_DFL);
		raise(WTERMSIG(st));
	}
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : FTX_EXIT_FAIL);
}

static _Noreturn void
rank_main(const struct ftx_test *t, const struct ftx_case *c, int rank)
{
	struct ftx_ctx ctx;
	uint64_t t_ns = (uint64_t) ftx_opts.timeout * 1000000000ull;
	int alive, i;

	my_rank = rank;
	memset(&ctx, 0, sizeof(ctx));
	ctx.rank = rank;
	ctx.nprocs = ftx_opts.nprocs;
	ctx.test = t;
	ctx.tcase = c;
	ctx.caps = t->caps | c->caps;
	/* leave a second so that a stuck rank can say where it got stuck */
	ctx.deadline_ns =
		ftx_now_ns() +
		(t_ns > 2000000000ull ? t_ns - 1000000000ull : t_ns / 2);
	catch_crashes();
	bind_rank(rank);
	ctx.hints = ftx_hints(&ctx);
	if (t->hints)
		t->hints(&ctx, ctx.hints);
	if (!(c->flags & FTX_CASE_NO_SETUP))
		ftx_setup(&ctx);

	c->run(&ctx);
	if (ndeferred)
		ftx_fail("%d problem%s, first: %s", ndeferred,
			 ndeferred > 1 ? "s" : "", first_deferred);

	if (!(c->flags & FTX_CASE_NO_FINAL_BARRIER)) {
		/* nobody tears down while a peer may still need it */
		for (alive = 0, i = 0; i < ctx.nprocs; i++)
			alive += !atomic_load(&shared->expect_death[i]);
		ftx_barrier_n(&ctx, FTX_FINAL_BARRIER, alive);
	}
	ftx_teardown(&ctx);
	fflush(stdout);
	exit(FTX_EXIT_PASS);
}

/*
 * A rank that died by a signal or failed (exit() does not make every
 * provider unlink) leaves its shared memory behind, and most intra-node
 * providers name theirs after the pid.  Remove our own
 * regular files in /dev/shm whose name holds that pid as a whole number,
 * so that peer_death and crashes do not fill the tmpfs run after run.
 */
static void
unlink_shm_leftovers(pid_t pid)
{
	char want[24], path[300];
	struct dirent *d;
	struct stat sb;
	DIR *dir;
	size_t wl;

	snprintf(want, sizeof(want), "%d", (int) pid);
	wl = strlen(want);
	dir = opendir("/dev/shm");
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		const char *n = d->d_name, *p = n;

		while ((p = strstr(p, want))) {
			bool left = p == n || p[-1] < '0' || p[-1] > '9';
			bool right = p[wl] < '0' || p[wl] > '9';

			if (left && right)
				break;
			p++;
		}
		if (!p)
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", n);
		if (!lstat(path, &sb) && S_ISREG(sb.st_mode) &&
		    sb.st_uid == getuid())
			unlink(path);
	}
	closedir(dir);
}

enum { R_PASS, R_SKIP, R_FAIL };

struct launch_result {
	int res;
	char reason[FTX_MSG_MAX + 64];
};

static void
stop_children(pid_t *pids, bool *done, int n, int sig)
{
	int i;

	for (i = 0; i < n; i++)
		if (!done[i] && pids[i] > 0)
			kill(pids[i], sig);
}

/* Until a rank ends (SIGCHLD, held by the caller) or the next time the
 * launcher must act (the deadline, or stop_at), at most 100 ms.  The
 * launcher used to look every 2 ms: each look woke it on a CPU where a
 * rank was bound and polling, and took that CPU from it in the middle
 * of a timed operation now and then (318 to 385 times in a 2-rank
 * allreduce run of 2200 operations). */
static void
wait_child(uint64_t now, uint64_t deadline, uint64_t stop_at,
	   const sigset_t *chld)
{
	uint64_t until = now + 100000000ull;
	struct timespec ts;

	if (deadline > now && deadline < until)
		until = deadline;
	if (stop_at && stop_at > now && stop_at < until)
		until = stop_at;
	until -= now;
	ts.tv_sec = (time_t) (until / 1000000000ull);
	ts.tv_nsec = (long) (until % 1000000000ull);
	(void) sigtimedwait(chld, NULL, &ts);
}

static void
launch(const struct ftx_test *t, const struct ftx_case *c,
       struct launch_result *lr)
{
	pid_t pids[FTX_MAX_PROCS];
	bool done[FTX_MAX_PROCS] = {false};
	int codes[FTX_MAX_PROCS];
	char how[FTX_MAX_PROCS][64];
	int n = ftx_opts.nprocs, ndone = 0, first_fail = -1, i, st;
	uint64_t start = ftx_now_ns(), stop_at = 0, now;
	uint64_t deadline = start + (uint64_t) ftx_opts.timeout * 1000000000ull;
	bool timed_out = false, termed = false;
	sigset_t chld, old;

	memset(shared, 0, sizeof(*shared));
	/* Held from before the first fork, so that a rank that ends
	 * between a look at the ranks and the wait below still ends that
	 * wait (it stays pending). */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	lr->res = R_PASS;
	lr->reason[0] = '\0';
	fflush(stdout);
	fflush(stderr);

	for (i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			stop_children(pids, done, i, SIGKILL);
			exit(FTX_EXIT_FAIL);
		}
		if (pids[i] == 0) {
			/* never outlive a parent that was killed */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() == 1)
				_exit(FTX_EXIT_FAIL);
			sigprocmask(SIG_SETMASK, &old, NULL);
			enter_host(i);
			rank_main(t, c, i);
		}
	}

	while (ndone < n) {
		bool reaped = false;

		for (i = 0; i < n; i++) {
			pid_t p;

			if (done[i])
				continue;
			p = waitpid(pids[i], &st, WNOHANG);
			if (p != pids[i])
				continue;
			reaped = true;
			done[i] = true;
			ndone++;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != FTX_EXIT_PASS)
				unlink_shm_leftovers(pids[i]);
			if (WIFEXITED(st)) {
				codes[i] = WEXITSTATUS(st);
				snprintf(how[i], sizeof(how[i]),
					 "exited with code %d", codes[i]);
			} else if (WTERMSIG(st) == SIGKILL &&
				   atomic_load(&shared->expect_death[i])) {
				codes[i] = FTX_EXIT_PASS;
				atomic_store(&shared->dead[i], 1);
			} else {
				codes[i] = FTX_EXIT_FAIL;
				snprintf(how[i], sizeof(how[i]),
					 "killed by signal %d (%s)",
					 WTERMSIG(st), strsignal(WTERMSIG(st)));
			}
			if (codes[i] != FTX_EXIT_PASS && !stop_at) {
				atomic_store(&shared->abort, 1);
				/* let the others leave through exit() */
				stop_at = ftx_now_ns() + 2000000000ull;
			}
			if (codes[i] != FTX_EXIT_PASS &&
			    codes[i] != FTX_EXIT_SKIP &&
			    codes[i] != FTX_EXIT_ABORTED && first_fail < 0)
				first_fail = i;
		}
		if (reaped)
			continue;
		now = ftx_now_ns();
		if (!timed_out && now > deadline) {
			timed_out = true;
			atomic_store(&shared->abort, 1);
			stop_children(pids, done, n, SIGTERM);
			stop_at = now + 1000000000ull;
			termed = true;
		} else if (stop_at && now > stop_at) {
			if (!termed) {
				stop_children(pids, done, n, SIGTERM);
				termed = true;
				stop_at = now + 1000000000ull;
			} else {
				stop_children(pids, done, n, SIGKILL);
				stop_at = 0;
			}
		}
		wait_child(now, deadline, stop_at, &chld);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);

	if (timed_out) {
		int len;

		lr->res = R_FAIL;
		len = snprintf(lr->reason, sizeof(lr->reason),
			       "timeout after %d s", ftx_opts.timeout);
		for (i = 0; i < n && len < (int) sizeof(lr->reason); i++)
			if (shared->msg[i][0])
				len += snprintf(
					lr->reason + len,
					sizeof(lr->reason) - (size_t) len,
					"; rank %d: %s", i, shared->msg[i]);
			else if (shared->note[i][0])
				len += snprintf(
					lr->reason + len,
					sizeof(lr->reason) - (size_t) len,
					"; rank %d stuck, last step: %s", i,
					shared->note[i]);
		return;
	}
	if (first_fail >= 0) {
		i = first_fail;
		lr->res = R_FAIL;
		if (shared->msg[i][0])
			snprintf(lr->reason, sizeof(lr->reason), "rank %d: %s",
				 i, shared->msg[i]);
		else
			snprintf(lr->reason, sizeof(lr->reason),
				 "rank %d: %s%s%s", i, how[i],
				 shared->note[i][0] ? ", last step: " :
						      " without a reason",
				 shared->note[i]);
		return;
	}
	for (i = 0; i < n; i++)
		if (codes[i] == FTX_EXIT_SKIP) {
			lr->res = R_SKIP;
			snprintf(lr->reason, sizeof(lr->reason), "%s",
				 shared->msg[i]);
			return;
		}
	for (i = 0; i < n; i++)
		if (codes[i] != FTX_EXIT_PASS) {
			lr->res = R_FAIL;
			snprintf(lr->reason, sizeof(lr->reason),
				 "rank %d: aborted without a reason", i);
			return;
		}
}

static void
usage(const struct ftx_test *t, FILE *f)
{
	const struct ftx_case *c;

	fprintf(f,
		"usage: %s [options]\n%s\n\n"
		"  -p PROV  provider (default: $FI_PROVIDER, else tnbc)\n"
		"  -n N     number of ranks (default %d, %d..%d)\n"
		"  -t SEC   timeout per launch (default %d)\n"
		"  -A TYPE  av type: table (default) or map\n"
		"  -a FMT   address format: unspec (default), str or "
		"sockaddr_in\n"
		"  -C CASE  run only this case\n"
		"  -v       verbose\n"
		"%s",
		t->name, t->desc ? t->desc : "", t->nprocs, t->min_procs,
		t->max_procs, t->timeout, t->opthelp ? t->opthelp : "");
	if (t->cases[1].name) {
		fprintf(f, "cases:");
		for (c = t->cases; c->name; c++)
			fprintf(f, " %s", c->name);
		fprintf(f, "\n");
	}
}

int
ftx_main(const struct ftx_test *t, int argc, char **argv)
{
	char optstr[128];
	const struct ftx_case *c;
	struct launch_result lr;
	char fails[2048] = "";
	const char *skip_reason = NULL;
	static char skip_buf[FTX_MSG_MAX + 64];
	int opt, npass = 0, nskip = 0, nfail = 0, multi;
	long ncpu;

	ftx_opts.prov = getenv("FI_PROVIDER") && *getenv("FI_PROVIDER") ?
				getenv("FI_PROVIDER") :
				"tnbc";
	ftx_opts.nprocs = t->nprocs;
	ftx_opts.timeout = t->timeout;
	ftx_opts.av_type = FI_AV_TABLE;

	snprintf(optstr, sizeof(optstr), "p:n:t:A:a:C:vh%s",
		 t->optstr ? t->optstr : "");
	while ((opt = getopt(argc, argv, optstr)) != -1) {
		switch (opt) {
		case 'p':
			ftx_opts.prov = optarg;
			break;
		case 'n':
			ftx_opts.nprocs = atoi(optarg);
			break;
		case 't':
			ftx_opts.timeout = atoi(optarg);
			break;
		case 'A':
			if (!strcmp(optarg, "map")) {
				ftx_opts.av_type = FI_AV_MAP;
			} else if (!strcmp(optarg, "table")) {
				ftx_opts.av_type = FI_AV_TABLE;
			} else {
				usage(t, stderr);
				return FTX_EXIT_FAIL;
			}
			break;
		case 'a':
			if (!strcmp(optarg, "unspec")) {
				ftx_opts.addr_format = FI_FORMAT_UNSPEC;
			} else if (!strcmp(optarg, "str")) {
				ftx_opts.addr_format = FI_ADDR_STR;
			} else if (!strcmp(optarg, "sockaddr_in")) {
				ftx_opts.addr_format = FI_SOCKADDR_IN;
			} else {
				usage(t, stderr);
				return FTX_EXIT_FAIL;
			}
			break;
		case 'C':
			ftx_opts.only_case = optarg;
			break;
		case 'v':
			ftx_opts.verbose++;
			break;
		case 'h':
			usage(t, stdout);
			return FTX_EXIT_PASS;
		default:
			if (t->opt && opt != '?' && !t->opt(opt, optarg))
				break;
			usage(t, stderr);
			return FTX_EXIT_FAIL;
		}
	}
	if (ftx_opts.nprocs < t->min_procs || ftx_opts.nprocs > t->max_procs ||
	    ftx_opts.nprocs > FTX_MAX_PROCS || ftx_opts.timeout <= 0) {
		printf("FAIL %s: -n %d out of range %d..%d or bad -t\n",
		       t->name, ftx_opts.nprocs, t->min_procs, t->max_procs);
		return FTX_EXIT_FAIL;
	}
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	ncpus = ncpu > 0 ? (unsigned) ncpu : 1;

	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		perror("mmap");
		return FTX_EXIT_FAIL;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	multi = t->cases[1].name != NULL;
	for (c = t->cases; c->name; c++) {
		if (ftx_opts.only_case && strcmp(ftx_opts.only_case, c->name))
			continue;
		launch(t, c, &lr);
		if (lr.res == R_PASS) {
			npass++;
			if (multi && !t->quiet)
				printf("# %s: case %s: ok\n", t->name, c->name);
		} else if (lr.res == R_SKIP) {
			nskip++;
			snprintf(skip_buf, sizeof(skip_buf), "%s%s%s",
				 multi ? c->name : "", multi ? ": " : "",
				 lr.reason);
			skip_reason = skip_buf;
			if (multi && !t->quiet)
				printf("# %s: case %s: SKIP %s\n", t->name,
				       c->name, lr.reason);
		} else {
			size_t l = strlen(fails);

			nfail++;
			if (multi && !t->quiet)
				printf("# %s: case %s: FAIL %s\n", t->name,
				       c->name, lr.reason);
			if (l < sizeof(fails) - 1)
				snprintf(fails + l, sizeof(fails) - l,
					 "%s%s%s%s", l ? "; " : "",
					 multi ? c->name : "",
					 multi ? ": " : "", lr.reason);
		}
	}
	if (!npass && !nskip && !nfail) {
		printf("FAIL %s: no case named '%s'\n", t->name,
		       ftx_opts.only_case);
		return FTX_EXIT_FAIL;
	}
	if (nfail) {
		printf("FAIL %s: %s\n", t->name, fails);
		return FTX_EXIT_FAIL;
	}
	if (!npass) {
		printf("SKIP %s: %s\n", t->name, skip_reason);
		return FTX_EXIT_SKIP;
	}
	if (!t->quiet)
		printf("PASS %s\n", t->name);
	return FTX_EXIT_PASS;
}

int
ftx_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}
