#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# OSU micro-benchmarks over Open MPI between hosts made of namespaces on
# this machine (tests/netns-lib.sh: each its own network, /dev/shm, PIDs
# and hostname, joined by veth pairs through a bridge), side by side in
# one invocation, over the same links:
#   tnbc     pml cm + the OFI MTL on tnbc (FI_TNBC_XPORTS=shm,tcp: ranks
#            of one host meet through shm, the others through TCP)
#   ob1-tcp  pml ob1 + Open MPI's own BTLs: tcp between hosts, vader
#            within one, self
# Tests: lat (osu_latency, 8 B and 4 KiB, one rank on each of 2 hosts), bw
# (osu_bw, 64 KiB and 1 MiB, the same two ranks; in GB/s) and arN
# (osu_allreduce, 8 to 64 B, N ranks: 2 on 2 hosts, 4 on 2, 6 on 3).
# mpirun runs on host 1 and starts its daemons on the others through an
# rsh agent that enters the host of the address it is given, as ssh
# would.  Above 2 ranks the 2 cores of this machine are oversubscribed,
# and both stacks yield when idle (mpi_yield_when_idle 1).  Each round
# runs every stack once per test, the order alternating; the table shows
# the median over rounds and tnbc's figure over ob1-tcp's (below 1: tnbc
# is faster).  Figures only: nothing passes or fails on time.  Never
# downloads anything: OSU is built locally.
#
# usage: netns_osu.sh [-b BUILDDIR] OSU_DIR     (root only)
#   OSU_DIR  an OSU micro-benchmarks 7.x build or install directory,
#            searched for osu_latency, osu_bw and osu_allreduce
# environment: ROUNDS=3; TESTS="lat bw ar2 ar4 ar6"; OUT=DIR (default
#   ./netns-osu-YYYYmmdd-HHMMSS); PLOT=0 no PNG; TMO=300 per mpirun
# OUT holds raw.csv (round,stack,test,np,bytes,value,unit), results.csv
# (medians and ratios), table.txt, netns_osu.png, logs/.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck disable=SC2034 # read by compare_lib.sh
cmp_name=netns_osu
# shellcheck source=compare_lib.sh
. "$src/fabtests-ext/scripts/compare_lib.sh"
cmp_build_opt "$@"
shift $((OPTIND - 1))
osu=${1:-${OSU_DIR:-}}
if [ -z "$osu" ] || [ ! -d "$osu" ]; then
	echo "usage: $0 [-b BUILDDIR] OSU_DIR" >&2
	exit 2
fi
lat_bin=$(find "$osu" -name osu_latency -type f -perm -u+x | head -1)
ar_bin=$(find "$osu" -name osu_allreduce -type f -perm -u+x | head -1)
bw_bin=$(find "$osu" -name osu_bw -type f -perm -u+x | head -1)
if [ -z "$lat_bin" ] || [ -z "$ar_bin" ] || [ -z "$bw_bin" ]; then
	echo "no osu_latency, osu_bw or osu_allreduce under $osu" >&2
	exit 2
fi
ROUNDS=${ROUNDS:-3}
TESTS=${TESTS:-lat bw ar2 ar4 ar6}
TMO=${TMO:-300}
OUT=${OUT:-$PWD/netns-osu-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/logs"
tmp=$OUT/logs # cmp_apt_install's output
export FI_PROVIDER_PATH=$bld/.libs
export FI_TNBC_XPORTS=shm,tcp
# shellcheck source=../../tests/netns-lib.sh
. "$src/tests/netns-lib.sh"
why=$(netns_usable) || { echo "cannot run: $why" >&2; exit 1; }
work=$(mktemp -d)
trap 'netns_cleanup; rm -rf "$work"' EXIT
netns_hosts 3 || exit 1
netns_agent "$work/rsh" PATH="$PATH" FI_PROVIDER_PATH="$FI_PROVIDER_PATH" \
	FI_TNBC_XPORTS="$FI_TNBC_XPORTS"

raw=$OUT/raw.csv
echo "round,stack,test,np,bytes,value,unit" >"$raw"
fail=0

# mpirun's -H for np ranks: one per host at 2, two per host above
hosts_for() {
	case $1 in
	2) echo 10.231.0.1:1,10.231.0.2:1 ;;
	4) echo 10.231.0.1:2,10.231.0.2:2 ;;
	6) echo 10.231.0.1:2,10.231.0.2:2,10.231.0.3:2 ;;
	esac
}

stack_opts() {
	case $1 in
	tnbc)
		# every rank names its provider (cmp_check_tnbc)
		echo --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include \
			tnbc --mca btl self --mca opal_common_ofi_verbose 1
		;;
	ob1-tcp)
		echo --mca pml ob1 --mca btl self,vader,tcp \
			--mca btl_tcp_if_include 10.231.0.0/24
		;;
	esac
}

# one run: round stack test np; appends its lines to raw.csv
one() {
	local r=$1 st=$2 test=$3 np=$4 log bin sizes yield=0 what
	log=$OUT/logs/$test-$np-$st-r$r.log
	case $test in
	lat) bin=$lat_bin sizes=8:4096 what=lat ;;
	bw) bin=$bw_bin sizes=65536:1048576 what=bw ;;
	ar) bin=$ar_bin sizes=8:64 what=allreduce ;;
	*) return 1 ;;
	esac
	[ "$np" -gt 2 ] && yield=1
	# shellcheck disable=SC2046 # the options are words
	if ! nsenter -t "${HOSTPID[1]}" -n -u env PATH="$PATH" \
		timeout "$TMO" mpirun --allow-run-as-root \
		--mca plm_rsh_agent "$work/rsh" \
		--mca oob_tcp_if_include 10.231.0.0/24 \
		--bind-to none --oversubscribe \
		--mca mpi_yield_when_idle "$yield" $(stack_opts "$st") \
		-x FI_PROVIDER_PATH -x FI_TNBC_XPORTS \
		-H "$(hosts_for "$np")" -np "$np" "$bin" -m "$sizes" \
		>"$log" 2>&1; then
		fail=1
		return 1
	fi
	[ "$st" = tnbc ] && cmp_check_tnbc "$test" "$np" 0 "$log"
	# lines "size latency" (latency at 8 B and 4 KiB, every allreduce)
	# or "size MB/s" (64 KiB and 1 MiB, written in GB/s)
	awk -v r="$r" -v s="$st" -v t="$what" -v np="$np" \
		'$1 ~ /^[0-9]+$/ && NF >= 2 &&
		 (t != "lat" || $1 == 8 || $1 == 4096) &&
		 (t != "bw" || $1 == 65536 || $1 == 1048576) {
			if (t == "bw")
				print r "," s "," t "," np "," $1 "," $2 / 1000 ",GB/s"
			else
				print r "," s "," t "," np "," $1 "," $2 ",us" }' \
		"$log" >>"$raw"
}

cmp_rounds "$ROUNDS" "$TESTS" tnbc ob1-tcp

# a python3 with matplotlib (Debian's installed if none has it; the
# table alone if that fails, or with PLOT=0)
py=python3
if [ "${PLOT:-1}" != 0 ]; then
	cmp_plot_python || true
fi
"$py" "$src/fabtests-ext/scripts/compare_table.py" "$OUT" ob1-tcp \
	"Open MPI: OFI MTL on tnbc (shm + TCP) vs ob1 with its TCP BTL, across namespaces (lat, allreduce: lower is better; bw: higher)" \
	netns_osu.png
echo "results in $OUT"
exit $fail
