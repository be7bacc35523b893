#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# tnbc over TCP against libfabric's tcp;ofi_rxm between hosts made of
# namespaces on this machine (tests/netns-lib.sh: each its own network,
# /dev/shm, PIDs and hostname, joined by veth pairs through a bridge),
# side by side in one invocation, over the same links:
#   latency    ftx_bench_pingpong, 8 B and 4 KiB, one rank on each of 2
#              hosts (half the round trip)
#   bandwidth  ftx_bench_bw, 64 KiB and 1 MiB, one rank on each of 2 hosts
#              (2 GiB per size: a quarter of that varied by half from run
#              to run on a shared virtual machine)
#   allreduce  ftx_bench_coll (fi_allreduce, completion time), 8 to 48 B,
#              at 2 ranks on 2 hosts, 4 on 2 and 6 on 3 (tnbc reaches the
#              ranks of one host through shm, as a user's job would;
#              tcp;ofi_rxm has no shm and uses TCP for them too)
#   floor      ftx_tcp_floor beside the 2-rank allreduce: the same bytes
#              exchanged over one TCP socket by two processes, no provider,
#              timed as ftx_bench_coll times fi_allreduce: what the kernel
#              takes here, and so the lowest ratio to tcp;ofi_rxm a stack
#              over TCP sockets could show on this machine
# Ranks are bound to one CPU each where there are no more ranks than
# CPUs, as mpirun binds them (FTX_BIND=1, fabtests-ext/common/ftx.c):
# lat, bw and the 2-rank allreduce on a 2-CPU machine; 4 and 6 ranks
# run unbound.
# Each round runs every stack once per test, the order alternating; the
# table shows the median over rounds and tnbc's figure over rxm's (for
# latency and allreduce below 1 means tnbc is faster, for bandwidth above
# 1).  Figures only: nothing passes or fails on time.
#
# usage: netns_compare.sh [-b BUILDDIR]     (root only)
# environment: ROUNDS=3; TESTS="lat bw ar2 ar4 ar6" (ar<np>: allreduce at
#   np ranks); OUT=DIR (default ./netns-compare-YYYYmmdd-HHMMSS); PLOT=0 no
#   PNG
# OUT holds raw.csv (round,stack,test,np,bytes,value,unit), results.csv
# (medians and ratios), table.txt, netns_compare.png, logs/.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
cmp_name=netns_compare
# shellcheck source=compare_lib.sh
. "$src/fabtests-ext/scripts/compare_lib.sh"
cmp_build_opt "$@"
ROUNDS=${ROUNDS:-3}
TESTS=${TESTS:-lat bw ar2 ar4 ar6}
OUT=${OUT:-$PWD/netns-compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/logs"
tmp=$OUT/logs # cmp_apt_install's output
export FI_PROVIDER_PATH=$bld/.libs
export FTX_BIND=${FTX_BIND:-1}
# shellcheck source=../../tests/netns-lib.sh
. "$src/tests/netns-lib.sh"
why=$(netns_usable) || { echo "cannot run: $why" >&2; exit 1; }
trap netns_cleanup EXIT
netns_hosts 3 || exit 1

raw=$OUT/raw.csv
echo "round,stack,test,np,bytes,value,unit" >"$raw"
stacks=(tnbc "tcp;ofi_rxm")
fail=0

# hosts for np ranks: one rank per host at 2, two per host above
hosts_for() {
	case $1 in
	2) echo "${HOSTPID[1]},${HOSTPID[2]}" ;;
	4) echo "${HOSTPID[1]},${HOSTPID[2]}" ;;
	6) echo "${HOSTPID[1]},${HOSTPID[2]},${HOSTPID[3]}" ;;
	esac
}

# one run: stack test np; appends its lines to raw.csv
one() {
	local r=$1 st=$2 test=$3 np=$4 lab log
	lab=$(echo "$st" | tr ';' '+')
	log=$OUT/logs/$test-$np-$lab-r$r.log
	case $test in
	lat)
		FTX_HOSTS=$(hosts_for 2) timeout 300 \
			"$bld/fabtests-ext/ftx_bench_pingpong" -p "$st" -s 8,4096 \
			>"$log" 2>&1 || { fail=1; return; }
		awk -v r="$r" -v s="$st" '!/^#/ && NF == 3 {
			print r "," s ",lat,2," $1 "," $3 ",us" }' "$log" >>"$raw"
		;;
	bw)
		FTX_HOSTS=$(hosts_for 2) timeout 300 \
			"$bld/fabtests-ext/ftx_bench_bw" -p "$st" -s 64k,1m -B 2048 \
			>"$log" 2>&1 || { fail=1; return; }
		awk -v r="$r" -v s="$st" '!/^#/ && NF >= 3 && $1 ~ /^[0-9]+$/ {
			print r "," s ",bw,2," $1 "," $NF ",GB/s" }' "$log" >>"$raw"
		;;
	floor)
		FTX_HOSTS=$(hosts_for 2) timeout 600 \
			"$bld/fabtests-ext/ftx_tcp_floor" -a 10.231.0.1 \
			-s 8,16,32,48 -i 200 -l x >"$log" 2>&1 ||
			{ fail=1; return; }
		awk -F, -v r="$r" '$1 == "x" {
			print r ",floor,allreduce,2," $3 "," $4 ",us" }' \
			"$log" >>"$raw"
		;;
	ar)
		FTX_HOSTS=$(hosts_for "$np") timeout 600 \
			"$bld/fabtests-ext/ftx_bench_coll" -p "$st" -n "$np" \
			-C allreduce -s 8,16,32,48 -i 200 -l x >"$log" 2>&1 ||
			{ fail=1; return; }
		# CSV lines: label,np,bytes,median_us,...
		awk -F, -v r="$r" -v s="$st" -v np="$np" '$1 == "x" {
			print r "," s ",allreduce," np "," $3 "," $4 ",us" }' \
			"$log" >>"$raw"
		# the kernel's floor beside the 2-rank allreduce, right
		# after tnbc's in each round
		if [ "$np" = 2 ] && [ "$st" = tnbc ]; then
			one "$r" floor floor 2
		fi
		;;
	esac
}

cmp_rounds "$ROUNDS" "$TESTS" "${stacks[0]}" "${stacks[1]}"

# a python3 with matplotlib (Debian's installed if none has it; the
# table alone if that fails, or with PLOT=0)
py=python3
if [ "${PLOT:-1}" != 0 ]; then
	cmp_plot_python || true
fi
"$py" "$src/fabtests-ext/scripts/compare_table.py" "$OUT" "tcp;ofi_rxm" \
	"tnbc over TCP vs tcp;ofi_rxm across namespaces (lat, allreduce: lower is better; bw: higher)" \
	netns_compare.png
echo "results in $OUT"
exit $fail
