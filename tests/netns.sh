#!/bin/bash
# Several hosts on one machine: each host is a network namespace joined
# to the others through a bridge by a veth pair, with its own mount
# namespace (a private /dev/shm), PID, UTS and IPC namespaces, so that
# shared memory cannot carry what should cross the link.  The ftx
# programs run their ranks on these hosts (FTX_HOSTS, fabtests-ext/common)
# with FI_TNBC_XPORTS=shm,tcp: ranks of one host talk through shm, the
# others through TCP over the veth, whose byte counters must show it.
# The namespaces are made here and removed on the way out.  Needs root,
# ip, unshare, nsenter and pgrep; skipped (77) without them.
set -euo pipefail
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$PWD/.libs}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
for t in ip unshare nsenter pgrep; do
	command -v $t >/dev/null || { echo "SKIP: no $t"; exit 77; }
done

tag=tnbc$$
sw=${tag}sw
hosts=()
hostpids=()
log=$(mktemp)

cleanup() {
	# a PID namespace's init takes only the signals it handles, but SIGKILL
	for p in "${hostpids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	for h in "${hosts[@]}"; do ip netns del "$h" 2>/dev/null || true; done
	ip netns del "$sw" 2>/dev/null || true
	rm -f "$log"
}
trap cleanup EXIT

ip netns add "$sw" || { echo "SKIP: cannot make network namespaces"; exit 77; }
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up

# host i: namespace, veth eth0 (10.231.0.i) <-> p<i> on the bridge, and
# a process that holds the other namespaces (its /dev/shm its own)
add_host() {
	local i=$1 h=${tag}h$1 up pid=""

	ip netns add "$h"
	hosts+=("$h")
	ip link add "${tag}e$i" netns "$h" type veth peer name "p$i" netns "$sw"
	ip -n "$h" link set "${tag}e$i" name eth0
	ip -n "$h" addr add "10.231.0.$i/24" dev eth0
	ip -n "$h" link set eth0 up
	ip -n "$h" link set lo up
	ip -n "$sw" link set "p$i" master br0
	ip -n "$sw" link set "p$i" up
	ip netns exec "$h" unshare --mount --pid --uts --ipc --fork \
		--mount-proc --propagation private sh -c \
		"mount -t tmpfs tmpfs /dev/shm && hostname h$i && exec sleep 100000" &
	up=$!
	disown "$up" # killed on the way out, without a word from bash
	hostpids+=("$up")
	# the process inside the namespaces is the unshare's child
	for _ in $(seq 100); do
		pid=$(pgrep -P "$up" || true)
		if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ]; then
			break
		fi
		pid=""
		sleep 0.1
	done
	[ -n "$pid" ] || { echo "FAIL: host $i did not start" >&2; exit 1; }
	hostpids+=("$pid")
	HOSTPID[$i]=$pid
}

declare -a HOSTPID
link_bytes() {
	local sum=0 i
	for i in "$@"; do
		sum=$((sum + $(ip netns exec "$sw" cat "/sys/class/net/p$i/statistics/rx_bytes")))
	done
	echo $sum
}

for i in 1 2 3; do add_host $i; done
# the hosts really are apart: their own hostname and /dev/shm
[ "$(nsenter -t "${HOSTPID[1]}" -u hostname)" = h1 ] ||
	{ echo "FAIL: host 1 has no hostname of its own" >&2; exit 1; }
touch /dev/shm/"$tag"-probe
if nsenter -t "${HOSTPID[1]}" -m test -e /dev/shm/"$tag"-probe; then
	rm -f /dev/shm/"$tag"-probe
	echo "FAIL: host 1 sees this machine's /dev/shm" >&2; exit 1
fi
rm -f /dev/shm/"$tag"-probe

export FI_TNBC_XPORTS=shm,tcp

# run <min bytes> <hosts> <program and arguments>: the program passes,
# and at least that many bytes crossed the hosts' links
run() {
	local min=$1 hl=$2 before after ids
	shift 2
	ids=${hl//,/ }
	before=$(link_bytes $ids)
	pids=""
	for i in $ids; do pids=${pids:+$pids,}${HOSTPID[$i]}; done
	if ! FTX_HOSTS=$pids timeout 600 "$@" >"$log" 2>&1; then
		echo "FAIL: $* on hosts $hl" >&2
		cat "$log" >&2
		exit 1
	fi
	after=$(link_bytes $ids)
	echo "ok: $* on hosts $hl: $((after - before)) bytes over the links"
	[ $((after - before)) -ge "$min" ] ||
		{ echo "FAIL: only $((after - before)) bytes crossed the links" >&2; exit 1; }
}

# one rank per host: every byte crosses
run 100000 1,2 ./fabtests-ext/ftx_pingpong -p tnbc
# two ranks per host: shm inside a host, TCP between them
run 50000 1,2 ./fabtests-ext/ftx_coll -n 4
run 50000 1,2,3 ./fabtests-ext/ftx_coll -n 6
run 10000 1,2 ./fabtests-ext/ftx_trigger_chain -n 2
run 10000 1,2 ./fabtests-ext/ftx_peer_death
echo "PASS netns"
