/*
 * fi_ext_tnbc.h: the public extension interface of the tnbc provider.
 *
 * Applications reach these through fi_open_ops() on a tnbc domain.  The
 * structures carry their own size so that later versions can grow them
 * without breaking binaries built against this one.  See fi_tnbc(7).
 */
#ifndef FI_EXT_TNBC_H
#define FI_EXT_TNBC_H

#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FI_TNBC_PROV_NAME "tnbc"
#define FI_TNBC_MAJOR	  0
#define FI_TNBC_MINOR	  1

/* Provider-specific error codes and options. */
#define FI_PROV_SPECIFIC_TNBC (0x7bc << 16)

/* fi_open_ops(&domain->fid, FI_TNBC_DOMAIN_OPS_1, 0, &ops, NULL) */
#define FI_TNBC_DOMAIN_OPS_1 "tnbc_domain_ops_1"

/*
 * Counters kept by the domain's progress engine (the "soft NIC").  They
 * let a test or a tool see who moved the data: the engine thread, or an
 * application thread that happened to call in.
 */
struct fi_tnbc_engine_stats {
	uint64_t size; /* set by the caller to sizeof(struct ...) */
	uint64_t engine_pkts; /* packets the engine thread handled */
	uint64_t app_pkts; /* packets handled inside application calls */
	uint64_t engine_sleeps; /* times the engine went to sleep */
	uint64_t engine_wakeups; /* times a peer or a call woke it */
	uint64_t rndv_pull; /* rendezvous moved by single-copy read */
	uint64_t rndv_stream; /* rendezvous moved through bounce buffers */
	int32_t engine_cpu; /* CPU the engine last ran on, -1 if none */
	int32_t engine_running; /* 1 while the engine thread exists */
};

struct fi_tnbc_ops_domain {
	size_t size; /* sizeof(struct fi_tnbc_ops_domain) */
	int (*engine_stats)(struct fid_domain *domain,
			    struct fi_tnbc_engine_stats *stats);
};

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_TNBC_H */
