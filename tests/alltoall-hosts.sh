#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# fi_alltoall on hosts of several processes (seed 001; fi_tnbc(7),
# Collectives): every algorithm (direct, PLP, LSS and the automatic
# choice) x slices of 1 B to 1 MiB (ftx_coll -C alltoall checks each
# exactly, and several in flight) x group shapes: one host; 2 and 3
# namespace hosts (tests/netns-lib.sh) with 1, 2 and 3 ranks each;
# uneven hosts.  Then the synchronisation packets one alltoall of
# 64 KiB slices sends per process over TCP (3 per peer by rendezvous,
# 1 by LSS), PLP with each number of leaders, and a member dying
# mid-alltoall under each algorithm.  Skipped (77) without what
# namespaces need.
set -euo pipefail
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$PWD/.libs}
# shellcheck source=netns-lib.sh
. "${TNBC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}/tests/netns-lib.sh"
ftx=./fabtests-ext/ftx_coll
log=$(mktemp)

# on one host first: no namespace needed
for alg in direct plp lss auto; do
	pin=alltoall=$alg
	[ $alg = auto ] && pin=
	FI_TNBC_COLL_ALG=$pin timeout 600 $ftx -n 4 -C alltoall >"$log" 2>&1 ||
		{ echo "FAIL: $alg on one host" >&2; cat "$log" >&2; exit 1; }
	echo "ok: alltoall, $alg, 4 ranks on one host"
done

why=$(netns_usable) || { echo "SKIP: $why"; rm -f "$log"; exit 77; }
if [[ $(ldd $ftx 2>/dev/null) == *libtsan* ]]; then
	echo "SKIP: a ThreadSanitizer build's ranks cannot enter a host"
	rm -f "$log"; exit 77
fi
trap 'netns_cleanup; rm -f "$log"' EXIT
netns_hosts 3 || { echo "SKIP: cannot make network namespaces"; exit 77; }
export FI_TNBC_XPORTS=shm,tcp

# run <what> <host list> <env...> -- <ftx arguments>: FTX_HOSTS places
# rank r on host r * nhosts / nranks, so "1,1,2" is two ranks on host 1
# and one on host 2
run() {
	local what=$1 hl=$2 pids="" i
	shift 2
	for i in ${hl//,/ }; do pids=${pids:+$pids,}${HOSTPID[$i]}; done
	if ! timeout 600 env FTX_HOSTS="$pids" "$@" >"$log" 2>&1; then
		echo "FAIL: $what on hosts $hl: $*" >&2
		cat "$log" >&2
		exit 1
	fi
	echo "ok: $what on hosts $hl"
}

shapes=(
	"1,2 2"     # 2 hosts x 1
	"1,2 4"     # 2 hosts x 2
	"1,2 6"     # 2 hosts x 3
	"1,2,3 3"   # 3 hosts x 1
	"1,2,3 6"   # 3 hosts x 2
	"1,2,3 9"   # 3 hosts x 3
	"1,1,2 3"   # uneven: 2 + 1
	"1,1,2,3 5" # uneven: 3 + 1 + 1 (host 1 twice in the list)
)
# a sanitizer build runs three shapes of the eight (two even, one
# uneven): they reach every line the others do, which the plain build
# runs for the results
[ -n "${TNBC_SAN_FLAGS:-}" ] && shapes=("${shapes[1]}" "${shapes[4]}" "${shapes[7]}")
for alg in direct plp lss auto; do
	pin=alltoall=$alg
	[ $alg = auto ] && pin=
	for s in "${shapes[@]}"; do
		read -r hl n <<<"$s"
		run "alltoall $alg, $n ranks" "$hl" FI_TNBC_COLL_ALG=$pin \
			$ftx -n "$n" -C alltoall
	done
done
# PLP with every number of leaders on 3 hosts x 3
for l in 1 2 3; do
	run "alltoall plp, $l leaders, 9 ranks" 1,2,3 \
		FI_TNBC_COLL_ALG=alltoall=plp FI_TNBC_COLL_PLP_LEADERS=$l \
		$ftx -n 9 -C alltoall
done
# synchronisation packets per process, one rank per host: a TCP
# rendezvous (eager size below the slice) costs 3 per peer, LSS 1
run "sync packets: direct by rendezvous, 3 per peer" 1,2,3 \
	FI_TNBC_COLL_ALG=alltoall=direct FI_TNBC_TCP_EAGER_SIZE=16384 \
	FTX_A2A_SYNC=3 $ftx -n 3 -C alltoall
run "sync packets: LSS, 1 per peer" 1,2,3 \
	FI_TNBC_COLL_ALG=alltoall=lss FI_TNBC_TCP_EAGER_SIZE=16384 \
	FTX_A2A_SYNC=1 $ftx -n 3 -C alltoall
# a 1 MiB slice crosses TCP in one packet, as the rendezvous's data
# does: one ready note and one segment in, and the barrier after, not
# the 32 of one-slot segments
run "LSS segments: 1 MiB in one packet over TCP" 1,2,3 \
	FI_TNBC_COLL_ALG=alltoall=lss FTX_A2A_SYNC=1 \
	FTX_A2A_SYNC_LEN=1048576 FTX_A2A_PKTS=6 $ftx -n 3 -C alltoall
# a member dies mid-operation
for alg in direct plp lss; do
	run "alltoall $alg, a member dies" 1,2,3 \
		FI_TNBC_COLL_ALG=alltoall=$alg $ftx -n 6 -C alltoall_death
done
