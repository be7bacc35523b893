#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Several hosts on one machine (tests/netns-lib.sh): each host is a
# network namespace joined to the others through a bridge by a veth
# pair, with its own mount namespace (a private /dev/shm), PID, UTS and
# IPC namespaces, so that shared memory cannot carry what should cross
# the link.  The ftx programs run their ranks on these hosts (FTX_HOSTS,
# fabtests-ext/common) with FI_TNBC_XPORTS=shm,tcp: ranks of one host
# talk through shm, the others through TCP over the veth, whose byte
# counters must show it.  The namespaces are made here and removed on
# the way out.  Skipped (77) without root, ip, unshare, nsenter or pgrep.
set -euo pipefail
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$PWD/.libs}
# shellcheck source=netns-lib.sh
. "${TNBC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}/tests/netns-lib.sh"
why=$(netns_usable) || { echo "SKIP: $why"; exit 77; }
# ThreadSanitizer's own thread makes every rank multithreaded, and a
# multithreaded process cannot enter a mount namespace (setns(2))
if [[ $(ldd ./fabtests-ext/ftx_pingpong 2>/dev/null) == *libtsan* ]]; then
	echo "SKIP: a ThreadSanitizer build's ranks cannot enter a host"
	exit 77
fi
log=$(mktemp)
trap 'netns_cleanup; rm -f "$log"' EXIT

netns_hosts 3 || { echo "SKIP: cannot make network namespaces"; exit 77; }
# the hosts really are apart: their own hostname and /dev/shm
[ "$(nsenter -t "${HOSTPID[1]}" -u hostname)" = h1 ] ||
	{ echo "FAIL: host 1 has no hostname of its own" >&2; exit 1; }
touch /dev/shm/"$NETNS_TAG"-probe
if nsenter -t "${HOSTPID[1]}" -m test -e /dev/shm/"$NETNS_TAG"-probe; then
	rm -f /dev/shm/"$NETNS_TAG"-probe
	echo "FAIL: host 1 sees this machine's /dev/shm" >&2; exit 1
fi
rm -f /dev/shm/"$NETNS_TAG"-probe

export FI_TNBC_XPORTS=shm,tcp

# run <min bytes> <hosts> <program and arguments>: the program passes,
# and at least that many bytes crossed the hosts' links
run() {
	local min=$1 hl=$2 before after ids
	shift 2
	ids=${hl//,/ }
	before=$(netns_link_bytes $ids)
	pids=""
	for i in $ids; do pids=${pids:+$pids,}${HOSTPID[$i]}; done
	if ! FTX_HOSTS=$pids timeout 600 "$@" >"$log" 2>&1; then
		echo "FAIL: $* on hosts $hl" >&2
		cat "$log" >&2
		exit 1
	fi
	after=$(netns_link_bytes $ids)
	echo "ok: $* on hosts $hl: $((after - before)) bytes over the links"
	[ $((after - before)) -ge "$min" ] ||
		{ echo "FAIL: only $((after - before)) bytes crossed the links" >&2; exit 1; }
}

# one rank per host: every byte crosses
run 100000 1,2 ./fabtests-ext/ftx_pingpong -p tnbc
# two ranks per host: shm inside a host, TCP between them
run 50000 1,2 ./fabtests-ext/ftx_coll -n 4
run 50000 1,2,3 ./fabtests-ext/ftx_coll -n 6
# small allreduces and barriers fold at each host's leader
# (tnbc_alg_hosts): with a host of one rank, whose leader has no one to
# fold, and on the tree of hosts they ran on before
run 50000 1,2,3 ./fabtests-ext/ftx_coll -n 5
run 50000 1,2,3 env FI_TNBC_COLL_ALG=allreduce=desc,barrier=desc \
	./fabtests-ext/ftx_coll -n 5
run 10000 1,2 ./fabtests-ext/ftx_trigger_chain -n 2
run 10000 1,2 ./fabtests-ext/ftx_peer_death
# ranks 0 and 1 on host 1 share its link by priority: rank 1's transfer
# waits for rank 0's (FI_TNBC_LINK_SHARE), then the same unordered; each
# case moves 256 + 64 MiB
run 600000000 1,2 ./fabtests-ext/ftx_link
# addresses as socket-style programs give them: FI_SOCKADDR_IN, whose
# endpoint is asked over the link who it is (and a rank of the same host
# is then reached through shm), and FI_ADDR_STR text
run 100000 1,2 ./fabtests-ext/ftx_pingpong -p tnbc -a sockaddr_in
run 50000 1,2 ./fabtests-ext/ftx_coll -n 4 -a sockaddr_in
run 100000 1,2 ./fabtests-ext/ftx_pingpong -p tnbc -a str
# with a key, every connection between the hosts proves it holds it
# (fi_tnbc(7), SECURITY): the job's secret, as Open MPI's mpirun gives
# every rank (FI_TNBC_JOB_KEY), and the lookups of FI_SOCKADDR_IN too
job=OMPI_MCA_orte_precondition_transports=$(od -An -N8 -tx8 /dev/urandom |
	tr -d ' ')-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
run 100000 1,2 env "$job" ./fabtests-ext/ftx_pingpong -p tnbc
run 50000 1,2,3 env "$job" ./fabtests-ext/ftx_coll -n 6
run 50000 1,2 env "$job" ./fabtests-ext/ftx_coll -n 4 -a sockaddr_in
echo "PASS netns"
