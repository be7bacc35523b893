/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * ftx: a small multi-process harness for provider-agnostic libfabric tests.
 *
 * The parent process never touches libfabric: it forks the ranks first so
 * that no provider state (shared memory regions, progress threads, sockets)
 * is ever duplicated by fork.  Ranks meet through an anonymous shared
 * mapping created before the fork.
 */
#ifndef FTX_H
#define FTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

/* A test that watches memory the provider writes with no libfabric call
 * (independent progress) races with the provider's thread by design:
 * the watch, and only the watch, is hidden from ThreadSanitizer. */
#if defined(__SANITIZE_THREAD__)
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define FTX_WATCH_BEGIN() __tsan_ignore_thread_begin()
#define FTX_WATCH_END()	  __tsan_ignore_thread_end()
#else
#define FTX_WATCH_BEGIN() ((void) 0)
#define FTX_WATCH_END()	  ((void) 0)
#endif

#define FTX_MAX_PROCS 16
#define FTX_NAME_MAX  256
#define FTX_MSG_MAX   512
#define FTX_NBARRIERS 4
#define FTX_NSCRATCH  64

/* automake test-driver exit codes */
#define FTX_EXIT_PASS 0
#define FTX_EXIT_FAIL 1
#define FTX_EXIT_SKIP 77
/* a rank that stopped because another one failed */
#define FTX_EXIT_ABORTED 3

struct ftx_ctx;

/* A case is one launch of all ranks; a test has one or more. */
struct ftx_case {
	const char *name;
	int (*run)(struct ftx_ctx *ctx);
	uint64_t caps; /* added to the test's caps for this case */
	unsigned flags;
	/* CQ attributes when not the default tagged, polled CQ */
	enum fi_cq_format cq_format;
	enum fi_wait_obj cq_wait;
	/* binds more to ctx->ep before fi_enable (counters, ...) */
	void (*pre_enable)(struct ftx_ctx *ctx);
};

/* The case opens nothing through the harness but may use ctx->hints. */
#define FTX_CASE_NO_SETUP (1u << 0)
/* Skip the closing barrier: the case synchronises its own shutdown. */
#define FTX_CASE_NO_FINAL_BARRIER (1u << 1)
/*
 * The harness never reads the case's CQs (barriers included); the case
 * reads them itself, e.g. with ftx_cq_read_raw or fi_cq_sread.
 */
#define FTX_CASE_RAW_CQ (1u << 2)

struct ftx_test {
	const char *name;
	const char *desc;
	uint64_t caps;
	int nprocs; /* default group size */
	int min_procs;
	int max_procs;
	int timeout; /* default seconds per launch */
	/* per-test getopt letters, handler and help text */
	const char *optstr;
	int (*opt)(int c, const char *arg);
	const char *opthelp;
	/* last word on the hints before fi_getinfo */
	void (*hints)(struct ftx_ctx *ctx, struct fi_info *hints);
	const struct ftx_case *cases; /* terminated by a NULL name */
	bool quiet; /* benchmarks: no PASS line, output is the figures */
};

struct ftx_opts {
	const char *prov;
	int nprocs;
	int timeout;
	enum fi_av_type av_type;
	uint32_t addr_format; /* fi_getinfo(3)'s; default FI_FORMAT_UNSPEC */
	const char *only_case;
	int verbose;
};

extern struct ftx_opts ftx_opts;

/* One completion, successful or not, as the harness queued it. */
struct ftx_comp {
	int err; /* 0, or positive fi_errno of an error completion */
	int prov_errno;
	void *op_context;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data;
	uint64_t tag;
	size_t olen;
	fi_addr_t src;
	char errstr[96];
};

struct ftx_cqq {
	struct ftx_comp *v;
	size_t head, count, cap;
};

enum ftx_which { FTX_TX = 0, FTX_RX = 1 };

struct ftx_ctx {
	int rank;
	int nprocs;
	const struct ftx_test *test;
	const struct ftx_case *tcase;
	uint64_t caps;
	struct fi_info *hints;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq[2]; /* FTX_TX, FTX_RX */
	struct fid_ep *ep;
	struct fid_cntr *cntr[2]; /* optional; closed after the ep */
	struct fid_eq *eq; /* optional; closed after the ep */
	fi_addr_t addrs[FTX_MAX_PROCS];
	struct ftx_cqq q[2];
	uint64_t deadline_ns;
	/* named in timeout reports: what the rank was doing */
	const char *what;
	void *priv; /* the test's own per-rank state */
};

/* fi_info and helpers */
const char *ftx_caps_str(uint64_t caps, char *buf, size_t len);

/* Failure and skip end the rank at once; the parent reports the reason. */
_Noreturn void ftx_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
_Noreturn void ftx_skip(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
#define ftx_fail(...) ftx_fail_at(__FILE__, __LINE__, __VA_ARGS__)

/*
 * A failure that does not stop the rank, so that one run shows every
 * deviation; the rank fails when the case is over.
 */
void ftx_defer_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define ftx_defer_fail(...) ftx_defer_fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define FTX_SOFT(cond, ...)                          \
	do {                                         \
		if (!(cond))                         \
			ftx_defer_fail(__VA_ARGS__); \
	} while (0)

/* Names the step under way, reported if the rank then dies silently. */
void ftx_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void ftx_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define FTX_CHK(expr)                                                 \
	do {                                                          \
		ssize_t ftx_r_ = (ssize_t) (expr);                    \
		if (ftx_r_ < 0)                                       \
			ftx_fail("%s: %s (%zd)", #expr,               \
				 fi_strerror((int) -ftx_r_), ftx_r_); \
	} while (0)

#define FTX_EXPECT(cond, ...)                  \
	do {                                   \
		if (!(cond))                   \
			ftx_fail(__VA_ARGS__); \
	} while (0)

/*
 * Post an operation, driving progress while the provider pushes back with
 * -FI_EAGAIN.  Completions read meanwhile are queued, not lost.
 */
#define FTX_POST(ctx, expr)                                           \
	do {                                                          \
		ssize_t ftx_r_;                                       \
		while ((ftx_r_ = (ssize_t) (expr)) == -FI_EAGAIN)     \
			ftx_eagain(ctx, #expr);                       \
		if (ftx_r_ < 0)                                       \
			ftx_fail("%s: %s (%zd)", #expr,               \
				 fi_strerror((int) -ftx_r_), ftx_r_); \
	} while (0)

void ftx_eagain(struct ftx_ctx *ctx, const char *what);

int ftx_parse_sizes(const char *arg, size_t *out, int max);

/* time */
uint64_t ftx_now_ns(void);
void ftx_sleep_ms(unsigned ms);
bool ftx_expired(const struct ftx_ctx *ctx);
/*
 * For polling loops: leaves when another rank failed and yields the CPU
 * now and then when ranks outnumber cores.
 */
void ftx_relax(unsigned *spins);

/* progress and completions on the harness CQs */
void ftx_progress(struct ftx_ctx *ctx);
bool ftx_try_comp(struct ftx_ctx *ctx, enum ftx_which w, struct ftx_comp *out);
void ftx_wait_comp(struct ftx_ctx *ctx, enum ftx_which w, struct ftx_comp *out);
void ftx_wait_ok(struct ftx_ctx *ctx, enum ftx_which w, struct ftx_comp *out);
void ftx_wait_n_ok(struct ftx_ctx *ctx, enum ftx_which w, size_t n);
void ftx_drain_for(struct ftx_ctx *ctx, unsigned ms);
size_t ftx_pending(const struct ftx_ctx *ctx, enum ftx_which w);
void ftx_print_comp(const char *what, const struct ftx_comp *c);

/* read one entry of any format from a raw CQ, with a deadline */
ssize_t ftx_cq_read_raw(struct ftx_ctx *ctx, struct fid_cq *cq, void *entry,
			fi_addr_t *src, struct fi_cq_err_entry *err);

/* group synchronisation through the shared page */
void ftx_barrier(struct ftx_ctx *ctx);
void ftx_barrier_n(struct ftx_ctx *ctx, int slot, int count);
/* every rank's len bytes (at most FTX_NAME_MAX) into all[nprocs * len] */
void ftx_allgather(struct ftx_ctx *ctx, const void *mine, size_t len,
		   void *all);
_Atomic uint64_t *ftx_scratch(int idx);
/* rank 0's value of v, everywhere; each call site needs its own slot */
uint64_t ftx_bcast(struct ftx_ctx *ctx, int slot, uint64_t v);
void ftx_expect_death(struct ftx_ctx *ctx);
bool ftx_rank_dead(int rank);

/* addresses */
void ftx_exchange_names(struct ftx_ctx *ctx, struct fid_ep *ep,
			uint8_t names[][FTX_NAME_MAX], size_t *lens);
void ftx_insert_all(struct ftx_ctx *ctx, struct fid_ep *ep, struct fid_av *av,
		    fi_addr_t *addrs);

/* data patterns and guarded buffers */
void ftx_fill(void *buf, size_t len, uint64_t seed);
/* Returns the offset of the first bad byte, or SIZE_MAX when all match. */
size_t ftx_check(const void *buf, size_t len, uint64_t seed);
void ftx_verify(const void *buf, size_t len, uint64_t seed, const char *what);
uint64_t ftx_seed(uint64_t a, uint64_t b, uint64_t c);
uint64_t ftx_mix(uint64_t x);
/* qsort(3)'s comparison of uint64_t values */
int ftx_cmp_u64(const void *a, const void *b);
void *ftx_alloc(size_t len);
void ftx_free(void *p);
void ftx_guard_verify(const void *p, size_t len, const char *what);

/* objects */
void ftx_setup(struct ftx_ctx *ctx);
void ftx_teardown(struct ftx_ctx *ctx);
int ftx_getinfo(struct ftx_ctx *ctx, struct fi_info *hints,
		struct fi_info **info);
struct fi_info *ftx_hints(struct ftx_ctx *ctx);

int ftx_main(const struct ftx_test *test, int argc, char **argv);

#endif /* FTX_H */
