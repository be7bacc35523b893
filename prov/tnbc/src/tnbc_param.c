/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Runtime parameters, and the provider's descriptor that logging names.
 * Everything reads them; nothing here calls up: the entry point
 * (tnbc_init.c) fills the descriptor's calls and the transport registry
 * (tnbc_xports.c) turns FI_TNBC_XPORTS into transports.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tnbc.h"

#define TNBC_RX_SLOTS_DEFAULT 16

/* Eager up to 32 KiB: below that, a copy in and a copy out through the
 * queue beat the system call and page-table walk of a single-copy read
 * (osu_latency at 16 KiB: 1.6 against 3.5 us). */
struct tnbc_env tnbc_env = {
	.rx_slots = TNBC_RX_SLOTS_DEFAULT,
	.slot_size = 32768 + 128, /* its headers, in whole 64-byte cells */
	.eager_size = 32768,
	.tcp_timeout_ms = 10000,
	.tcp_eager_size = 131072,
	.tcp_hello_ms = 10000,
	.tcp_strangers_max = 64,
	.job_key = 1,
	.verbs_timeout_ms = 10000,
	.verbs_mr_cache = 256,
	.cma = 1,
	.spin_us = 5,
	.app_window_us = 200,
	.engine = 1,
	.engine_batch = 1,
	.engine_shared = 1,
	.unexp_pull = 256 * 1024,
	.unexp_max = 32 * 1024 * 1024,
	.coll_degree = 8,
	.coll_rsag_min = 32768,
	.coll_seg = 65536,
	.coll_slots = 1,
	.coll_hosts = 1,
	.link_share = 1,
	.link_hold_ms = 100,
	.coll_flat_max = 2,
	.coll_flat_hosts = 8,
	.coll_plp_max = 4096,
	.coll_plp_bytes = 98304,
	.coll_lss_above = 131072,
};

/* FI_TNBC_SHM_GROUP: a group name or number; unknown leaves the
 * default, same user only. */
static void tnbc_param_group(void)
{
	char buf[4096], *end;
	struct group gr, *g = NULL;
	unsigned long gid;

	if (fi_param_get_str(&tnbc_prov, "shm_group",
			     &tnbc_env.shm_group_name) != FI_SUCCESS ||
	    !tnbc_env.shm_group_name || !*tnbc_env.shm_group_name)
		return;
	errno = 0;
	gid = strtoul(tnbc_env.shm_group_name, &end, 10);
	if (!*end && !errno && gid < (unsigned long)(gid_t)-1) {
		tnbc_env.shm_gid = (gid_t)gid;
		tnbc_env.shm_group = true;
	} else if (!getgrnam_r(tnbc_env.shm_group_name, &gr, buf, sizeof(buf),
			       &g) &&
		   g) {
		tnbc_env.shm_gid = g->gr_gid;
		tnbc_env.shm_group = true;
	} else {
		FI_WARN(&tnbc_prov, FI_LOG_CORE,
			"FI_TNBC_SHM_GROUP=%s is no group here; only this "
			"user's processes are trusted\n",
			tnbc_env.shm_group_name);
	}
}

static void tnbc_param_size(const char *name, size_t *val, size_t min,
			    size_t max)
{
	size_t v;

	if (fi_param_get_size_t(&tnbc_prov, name, &v) != FI_SUCCESS)
		return;
	if (v < min || v > max) {
		FI_WARN(&tnbc_prov, FI_LOG_CORE,
			"FI_TNBC_%s=%zu out of range [%zu, %zu], using %zu\n",
			name, v, min, max, *val);
		return;
	}
	*val = v;
}

/* Named here so that every file may log; its calls are the entry
 * point's (tnbc_init.c), set when libfabric loads the provider. */
struct fi_provider tnbc_prov = {
	.name = TNBC_PROV_NAME,
	.version = TNBC_PROV_VERSION,
	.fi_version = TNBC_FI_VERSION,
};

/* The only place runtime parameters are defined, read and validated;
 * fi_tnbc(7) RUNTIME PARAMETERS mirrors this function. */
void tnbc_param_read(void)
{
	int b;

	fi_param_define(&tnbc_prov, "rx_slots", FI_PARAM_SIZE_T,
			"How many of the largest packets each endpoint's "
			"shared-memory receive queue holds (smaller ones "
			"take less room); a power of two (default: %zu)",
			tnbc_env.rx_slots);
	fi_param_define(&tnbc_prov, "slot_size", FI_PARAM_SIZE_T,
			"The largest packet in bytes, headers included; "
			"bounds the eager and inject sizes (default: %zu)",
			tnbc_env.slot_size);
	fi_param_define(&tnbc_prov, "eager_size", FI_PARAM_SIZE_T,
			"Largest message sent eagerly; larger ones use "
			"rendezvous. Capped by the slot payload (default: %zu)",
			tnbc_env.eager_size);
	fi_param_define(
		&tnbc_prov, "cma", FI_PARAM_BOOL,
		"Use single-copy reads for rendezvous and large RMA reads: "
		"cross-memory attach (process_vm_readv) over shared memory, "
		"RDMA read over verbs; "
		"when off or denied, large messages stream through the "
		"receive queue and reads go as chunks (default: %s)",
		tnbc_env.cma ? "true" : "false");
	fi_param_define(&tnbc_prov, "unexp_pull", FI_PARAM_SIZE_T,
			"Largest rendezvous message the engine reads into a "
			"buffer of its own when no receive matches it yet, so "
			"that the send completes without waiting for the "
			"receiver to call in; 0 turns this off (default: %zu)",
			tnbc_env.unexp_pull);
	fi_param_define(&tnbc_prov, "unexp_max", FI_PARAM_SIZE_T,
			"Bytes of unexpected messages (those no receive was "
			"posted for) one endpoint buffers; past it they wait "
			"in the sender's queue, and senders see back pressure "
			"(default: %zu)",
			tnbc_env.unexp_max);
	fi_param_define(&tnbc_prov, "coll_degree", FI_PARAM_SIZE_T,
			"Children per member in the trees of fi_barrier, "
			"fi_broadcast, fi_reduce and fi_allreduce, 1 to 64 "
			"(default: %zu)",
			tnbc_env.coll_degree);
	fi_param_define(
		&tnbc_prov, "coll_rsag_min", FI_PARAM_SIZE_T,
		"Bytes from which fi_allreduce runs as a reduce-scatter "
		"and an allgather instead of on a tree (default: %zu)",
		tnbc_env.coll_rsag_min);
	fi_param_define(&tnbc_prov, "coll_seg", FI_PARAM_SIZE_T,
			"Bytes per segment of the tree pipeline of fi_reduce, "
			"fi_allreduce and fi_broadcast, at least 64 "
			"(default: %zu)",
			tnbc_env.coll_seg);
	fi_param_define(&tnbc_prov, "coll_flat_max", FI_PARAM_SIZE_T,
			"Members up to which fi_allreduce of at most 48 bytes "
			"and fi_barrier run in one hop, every member sending "
			"its contribution to all others, instead of on a tree; "
			"0 to 64 (default: %zu)",
			tnbc_env.coll_flat_max);
	fi_param_define(&tnbc_prov, "coll_flat_hosts", FI_PARAM_SIZE_T,
			"Hosts up to which fi_allreduce of at most 48 bytes "
			"and fi_barrier of a group on several hosts (with "
			"coll_hosts) fold at each host's leader, the leaders "
			"exchanging their hosts' results in one hop, instead "
			"of on a tree of hosts; 0 to 64 (default: %zu)",
			tnbc_env.coll_flat_hosts);
	fi_param_define(&tnbc_prov, "coll_plp_max", FI_PARAM_SIZE_T,
			"Slice bytes up to which fi_alltoall of a group whose "
			"hosts hold several members aggregates the slices "
			"between hosts at leaders (PLP) (default: %zu)",
			tnbc_env.coll_plp_max);
	fi_param_define(&tnbc_prov, "coll_plp_bytes", FI_PARAM_SIZE_T,
			"Bytes a PLP leader sends across at most: the number "
			"of leaders per host is the fewest that keep under it "
			"(default: %zu)",
			tnbc_env.coll_plp_bytes);
	fi_param_define(&tnbc_prov, "coll_plp_leaders", FI_PARAM_SIZE_T,
			"PLP's leaders per host, 1 to 64; 0 chooses them by "
			"slice size with coll_plp_bytes (default: %zu)",
			tnbc_env.coll_plp_leaders);
	fi_param_define(&tnbc_prov, "coll_lss_above", FI_PARAM_SIZE_T,
			"Slice bytes above which fi_alltoall of a group on "
			"several hosts sends each slice between hosts after "
			"one ready note from its receiver (LSS); the same on "
			"every member (default: %zu, TCP's eager size)",
			tnbc_env.coll_lss_above);
	fi_param_define(
		&tnbc_prov, "coll_hosts", FI_PARAM_BOOL,
		"Trees of a group whose members are on several hosts "
		"cross between hosts only from one member per host, the "
		"others joining it on their own host; every member of a "
		"group must use the same value (default: %s)",
		tnbc_env.coll_hosts ? "true" : "false");
	fi_param_define(&tnbc_prov, "coll_alg", FI_PARAM_STRING,
			"Algorithms pinned by name, per collective: a comma "
			"list of COLL=ALG (COLL: barrier, broadcast, "
			"alltoall, allreduce, allgather, reduce_scatter, "
			"reduce, scatter, gather) or ALG alone for every "
			"collective it implements (ALG: flat, hosts, rsag, "
			"desc, direct). A pinned algorithm runs whenever it "
			"can run the operation (default: none, every choice "
			"automatic)");
	fi_param_define(&tnbc_prov, "link_share", FI_PARAM_BOOL,
			"The processes of one host (one user, one network "
			"namespace) share its link by priority: a transfer "
			"to another host waits while a neighbour has one of "
			"a higher priority queued (fi_ext_tnbc.h, "
			"set_priority) (default: %s)",
			tnbc_env.link_share ? "true" : "false");
	fi_param_define(&tnbc_prov, "link_hold_ms", FI_PARAM_SIZE_T,
			"Longest a transfer waits for a neighbour's higher "
			"priority (FI_TNBC_LINK_SHARE) before it goes anyway "
			"(default: %zu)",
			tnbc_env.link_hold_ms);
	fi_param_define(
		&tnbc_prov, "coll_slots", FI_PARAM_BOOL,
		"A collective's small contributions to a member on "
		"this host go into a slot of its shared-memory mailbox "
		"rather than its queue, while one is free (default: %s)",
		tnbc_env.coll_slots ? "true" : "false");
	fi_param_define(&tnbc_prov, "shm_group", FI_PARAM_STRING,
			"A group (name or number) whose members' processes may "
			"exchange messages with this one. Default: only "
			"processes of the same user");
	fi_param_define(&tnbc_prov, "spin_us", FI_PARAM_SIZE_T,
			"Microseconds the progress engine busy-polls after the "
			"last activity before it sleeps (default: %zu)",
			tnbc_env.spin_us);
	fi_param_define(&tnbc_prov, "app_window_us", FI_PARAM_SIZE_T,
			"Microseconds an application poll counts as active: "
			"within it peers do not wake the engine, which then "
			"naps for at most 16 windows (default: %zu)",
			tnbc_env.app_window_us);
	fi_param_define(&tnbc_prov, "engine", FI_PARAM_BOOL,
			"Run the progress engine thread. Off makes progress "
			"happen only inside application calls; for debugging "
			"(default: %s)",
			tnbc_env.engine ? "true" : "false");

	fi_param_define(&tnbc_prov, "engine_batch", FI_PARAM_BOOL,
			"Run the progress engine thread as SCHED_BATCH: a "
			"doorbell then does not preempt the thread running on "
			"a busy CPU (default: %s)",
			tnbc_env.engine_batch ? "true" : "false");
	fi_param_define(&tnbc_prov, "engine_shared", FI_PARAM_BOOL,
			"One engine thread serves every domain of the process "
			"whose doorbell is shared memory's (an MPI's "
			"point-to-point domain and the MPI glue's, say); off "
			"gives each domain a thread of its own (default: %s)",
			tnbc_env.engine_shared ? "true" : "false");
	fi_param_define(
		&tnbc_prov, "engine_cpus", FI_PARAM_STRING,
		"CPUs the progress engine thread may run on, as an hwloc "
		"list (e.g. \"3\" or \"2,6\"). Default: an idle "
		"hyperthread sibling of the CPUs the process is bound "
		"to, else the process's own binding");
	fi_param_define(&tnbc_prov, "xports", FI_PARAM_STRING,
			"Transports a domain may use, a comma list of shm "
			"(processes of this host), verbs (an RDMA device, "
			"if built), tcp (any host) and loop (endpoints of one "
			"process, for tests); each peer is reached through "
			"the first of them that reaches it (default: "
			"shm,verbs,tcp, verbs only where a device exists)");
	fi_param_define(&tnbc_prov, "tcp_iface", FI_PARAM_STRING,
			"The address (or the interface whose first IPv4 "
			"address) TCP endpoints listen on and give peers "
			"(default: the first interface that is up and not a "
			"loopback)");
	fi_param_define(&tnbc_prov, "tcp_eager_size", FI_PARAM_SIZE_T,
			"Largest message sent eagerly to a peer over TCP, "
			"where FI_TNBC_EAGER_SIZE does not apply: a stream "
			"fills no queue slots, and the payload is read into "
			"the receive as it comes (default: %zu)",
			tnbc_env.tcp_eager_size);
	fi_param_define(&tnbc_prov, "tcp_timeout_ms", FI_PARAM_SIZE_T,
			"How long a TCP peer may leave data unacknowledged, "
			"keepalive probes unanswered, or a record it began "
			"unfinished, before it counts as dead and what "
			"waits on it fails; also how long "
			"fi_av_insert of a socket address waits for the "
			"endpoint there to say who it is (default: %zu)",
			tnbc_env.tcp_timeout_ms);
	fi_param_define(&tnbc_prov, "tcp_hello_ms", FI_PARAM_SIZE_T,
			"How long a connection to a TCP endpoint may take to "
			"say who it is and, with an auth_key, prove it, "
			"before it is closed (default: %zu)",
			tnbc_env.tcp_hello_ms);
	fi_param_define(&tnbc_prov, "tcp_strangers_max", FI_PARAM_SIZE_T,
			"Connections to one TCP endpoint that have not yet "
			"proven who they are; past this the oldest is closed "
			"(default: %zu)",
			tnbc_env.tcp_strangers_max);
	fi_param_define(&tnbc_prov, "job_key", FI_PARAM_BOOL,
			"Where the application gives a domain no auth_key, "
			"use the secret its launcher gives every rank of the "
			"job (Open MPI's mpirun: "
			"OMPI_MCA_orte_precondition_transports), so that "
			"only ranks of the job connect (default: %s)",
			tnbc_env.job_key ? "true" : "false");
	fi_param_define(&tnbc_prov, "verbs_iface", FI_PARAM_STRING,
			"The IPv4 address (or the interface whose first IPv4 "
			"address) of the RDMA device verbs endpoints listen "
			"on and give peers (default: the first interface "
			"that is up, not a loopback, and on an RDMA device)");
	fi_param_define(&tnbc_prov, "verbs_timeout_ms", FI_PARAM_SIZE_T,
			"About how long a verbs peer may leave a send "
			"unacknowledged (the device's retries) before it "
			"counts as dead and what waits on it fails "
			"(default: %zu)",
			tnbc_env.verbs_timeout_ms);
	fi_param_define(
		&tnbc_prov, "verbs_mr_cache", FI_PARAM_SIZE_T,
		"How many registrations of user buffers (rendezvous "
		"and fi_read over verbs) a domain keeps for reuse; each is "
		"dropped when its memory is unmapped, moved or "
		"discarded, as a userfaultfd monitor sees.  0: "
		"register for each transfer (default: %zu)",
		tnbc_env.verbs_mr_cache);

	tnbc_param_size("rx_slots", &tnbc_env.rx_slots, 8, 1u << 20);
	if (tnbc_env.rx_slots & (tnbc_env.rx_slots - 1)) {
		FI_WARN(&tnbc_prov, FI_LOG_CORE,
			"FI_TNBC_RX_SLOTS must be a power of two, using %d\n",
			TNBC_RX_SLOTS_DEFAULT);
		tnbc_env.rx_slots = TNBC_RX_SLOTS_DEFAULT;
	}
	tnbc_param_size("slot_size", &tnbc_env.slot_size, 1024, 1u << 20);
	tnbc_env.slot_size = (tnbc_env.slot_size + 63) & ~(size_t)63;
	tnbc_param_size("eager_size", &tnbc_env.eager_size, 0, 1u << 20);
	if (fi_param_get_bool(&tnbc_prov, "cma", &b) == FI_SUCCESS)
		tnbc_env.cma = !!b;
	if (fi_param_get_bool(&tnbc_prov, "job_key", &b) == FI_SUCCESS)
		tnbc_env.job_key = !!b;
	tnbc_param_size("unexp_pull", &tnbc_env.unexp_pull, 0, 1u << 30);
	tnbc_param_size("unexp_max", &tnbc_env.unexp_max, 0, (size_t)1 << 40);
	tnbc_param_size("coll_degree", &tnbc_env.coll_degree, 1, 64);
	tnbc_param_size("coll_rsag_min", &tnbc_env.coll_rsag_min, 0,
			TNBC_MAX_MSG_SIZE);
	tnbc_param_size("coll_seg", &tnbc_env.coll_seg, 64, (size_t)1 << 30);
	tnbc_param_size("coll_flat_max", &tnbc_env.coll_flat_max, 0, 64);
	tnbc_param_size("coll_flat_hosts", &tnbc_env.coll_flat_hosts, 0, 64);
	tnbc_param_size("coll_plp_max", &tnbc_env.coll_plp_max, 0,
			TNBC_MAX_MSG_SIZE);
	tnbc_param_size("coll_plp_bytes", &tnbc_env.coll_plp_bytes, 1,
			TNBC_MAX_MSG_SIZE);
	tnbc_param_size("coll_plp_leaders", &tnbc_env.coll_plp_leaders, 0, 64);
	tnbc_param_size("coll_lss_above", &tnbc_env.coll_lss_above, 0,
			TNBC_MAX_MSG_SIZE);
	if (fi_param_get_bool(&tnbc_prov, "coll_slots", &b) == FI_SUCCESS)
		tnbc_env.coll_slots = !!b;
	if (fi_param_get_bool(&tnbc_prov, "coll_hosts", &b) == FI_SUCCESS)
		tnbc_env.coll_hosts = !!b;
	fi_param_get_str(&tnbc_prov, "coll_alg", &tnbc_env.coll_alg);
	if (fi_param_get_bool(&tnbc_prov, "link_share", &b) == FI_SUCCESS)
		tnbc_env.link_share = !!b;
	tnbc_param_size("link_hold_ms", &tnbc_env.link_hold_ms, 1, 600000);
	tnbc_param_group();
	tnbc_param_size("spin_us", &tnbc_env.spin_us, 0, 1000000);
	tnbc_param_size("app_window_us", &tnbc_env.app_window_us, 1, 1000000);
	if (fi_param_get_bool(&tnbc_prov, "engine", &b) == FI_SUCCESS)
		tnbc_env.engine = !!b;
	if (fi_param_get_bool(&tnbc_prov, "engine_batch", &b) == FI_SUCCESS)
		tnbc_env.engine_batch = !!b;
	if (fi_param_get_bool(&tnbc_prov, "engine_shared", &b) == FI_SUCCESS)
		tnbc_env.engine_shared = !!b;
	fi_param_get_str(&tnbc_prov, "engine_cpus", &tnbc_env.engine_cpus);
	fi_param_get_str(&tnbc_prov, "tcp_iface", &tnbc_env.tcp_iface);
	tnbc_param_size("tcp_eager_size", &tnbc_env.tcp_eager_size, 0,
			1u << 20);
	tnbc_param_size("tcp_timeout_ms", &tnbc_env.tcp_timeout_ms, 1000,
			3600000);
	tnbc_param_size("tcp_hello_ms", &tnbc_env.tcp_hello_ms, 100, 3600000);
	tnbc_param_size("tcp_strangers_max", &tnbc_env.tcp_strangers_max, 1,
			65536);
	fi_param_get_str(&tnbc_prov, "verbs_iface", &tnbc_env.verbs_iface);
	tnbc_param_size("verbs_timeout_ms", &tnbc_env.verbs_timeout_ms, 100,
			3600000);
	tnbc_param_size("verbs_mr_cache", &tnbc_env.verbs_mr_cache, 0, 65536);
	/* NULL unless given: tnbc_xports_choose then quietly skips what
	 * this host lacks */
	tnbc_env.xports = NULL;
	fi_param_get_str(&tnbc_prov, "xports", &tnbc_env.xports);
}
