#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Sourced: hosts made of Linux namespaces on this machine (tests/netns.sh,
# fabtests-ext/scripts/netns_fabtests.sh).  netns_hosts N makes hosts
# 1..N: each a network namespace on a bridge (in namespace $NETNS_SW)
# through a veth pair (eth0, 10.231.0.i), with its own mount namespace
# (a private /dev/shm), PID, UTS and IPC namespaces held by one process,
# HOSTPID[i]; netns_cleanup removes them all.  Needs root, ip, unshare,
# nsenter and pgrep (netns_usable says whether they are there).

NETNS_TAG=tnbc$$
NETNS_SW=${NETNS_TAG}sw
declare -a HOSTPID
NETNS_NAMES=()
NETNS_PIDS=()

netns_usable() {
	local t
	[ "$(id -u)" = 0 ] || { echo "needs root"; return 1; }
	for t in ip unshare nsenter pgrep; do
		command -v $t >/dev/null || { echo "no $t"; return 1; }
	done
}

netns_cleanup() {
	local p h
	# a PID namespace's init takes only the signals it handles, but SIGKILL
	for p in "${NETNS_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	for h in "${NETNS_NAMES[@]}"; do ip netns del "$h" 2>/dev/null || true; done
	ip netns del "$NETNS_SW" 2>/dev/null || true
}

# The hosts speak IPv4 only.  With IPv6 on, every new interface starts
# duplicate address detection and multicast listener reports, kernel
# work ("kworker/...-mld") that once took a CPU for 133 ms in the
# middle of a benchmark run on a 2-CPU machine.
netns_no_ipv6() {
	ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
		net.ipv6.conf.default.disable_ipv6=1 2>/dev/null || true
}

netns_add_host() {
	local i=$1 h=${NETNS_TAG}h$1 up pid=""

	ip netns add "$h"
	NETNS_NAMES+=("$h")
	netns_no_ipv6 "$h"
	ip link add "${NETNS_TAG}e$i" netns "$h" type veth peer name "p$i" netns "$NETNS_SW"
	ip -n "$h" link set "${NETNS_TAG}e$i" name eth0
	ip -n "$h" addr add "10.231.0.$i/24" dev eth0
	ip -n "$h" link set eth0 up
	ip -n "$h" link set lo up
	ip -n "$NETNS_SW" link set "p$i" master br0
	ip -n "$NETNS_SW" link set "p$i" up
	ip netns exec "$h" unshare --mount --pid --uts --ipc --fork \
		--mount-proc --propagation private sh -c \
		"mount -t tmpfs tmpfs /dev/shm && hostname h$i && exec sleep 100000" &
	up=$!
	disown "$up" # killed on the way out, without a word from bash
	NETNS_PIDS+=("$up")
	# the process inside the namespaces is the unshare's child
	for _ in $(seq 100); do
		pid=$(pgrep -P "$up" || true)
		if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ]; then
			break
		fi
		pid=""
		sleep 0.1
	done
	[ -n "$pid" ] || { echo "host $i did not start" >&2; return 1; }
	NETNS_PIDS+=("$pid")
	HOSTPID[$i]=$pid
}

netns_hosts() {
	local i
	ip netns add "$NETNS_SW" || return 1
	netns_no_ipv6 "$NETNS_SW"
	ip -n "$NETNS_SW" link add br0 type bridge
	ip -n "$NETNS_SW" link set br0 up
	for i in $(seq "$1"); do netns_add_host "$i" || return 1; done
}

# netns_setup N FILE [VAR=value...]: hosts 1..N and FILE, an ssh
# stand-in for them (netns_agent); says why on standard error and fails
# where this machine cannot make them.
netns_setup() {
	local n=$1 f=$2 why
	shift 2
	why=$(netns_usable) || { echo "no namespace hosts: $why" >&2; return 1; }
	netns_hosts "$n" || return 1
	netns_agent "$f" "$@"
}

# Bytes the bridge took in from hosts "$@" so far.
netns_link_bytes() {
	local sum=0 i
	for i in "$@"; do
		sum=$((sum + $(ip netns exec "$NETNS_SW" cat "/sys/class/net/p$i/statistics/rx_bytes")))
	done
	echo $sum
}

# netns_agent FILE [VAR=value...]: writes an ssh (or rsh agent) stand-in
# that runs its command inside the host whose address it is given, with
# those variables set, as a login on that host would (options before the
# host are dropped).
netns_agent() {
	local f=$1 i
	shift
	{
		echo '#!/bin/bash'
		echo '# ssh stand-in: runs the command inside the namespace host of that address'
		echo 'while [ $# -gt 0 ]; do'
		echo '	case "$1" in -o|-p|-i|-l) shift 2;; -*) shift;; *) break;; esac'
		echo 'done'
		echo 'case "$1" in'
		for i in "${!HOSTPID[@]}"; do
			echo "10.231.0.$i) pid=${HOSTPID[$i]};;"
		done
		echo '*) echo "ssh stand-in: no host $1" >&2; exit 255;;'
		echo 'esac'
		echo 'shift'
		echo "exec nsenter -t \"\$pid\" -a env $* bash -c \"\$*\" </dev/null"
	} >"$f"
	chmod +x "$f"
}
