#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# tnbc over verbs against libfabric's verbs;ofi_rxm on the same rxe
# device, in the soft-RoCE guest (../shared/softroce: qemu, Debian's
# kernel, rxe0 on the guest's own interface), side by side in one run:
#   latency    ftx_bench_pingpong, 8 B and 4 KiB (half the round trip)
#   bandwidth  ftx_bench_bw, 64 KiB and 1 MiB
#   allreduce  ftx_bench_coll (fi_allreduce), 8 to 48 B, 2 and 4 ranks
# Every rank is a process of the guest on rxe0; tnbc runs with
# FI_TNBC_XPORTS=verbs so that its ranks use the device as rxm's do.
# Each round runs both stacks once per test, the order alternating; the
# table gives medians and tnbc's figure over rxm's.  The guest emulates
# its CPU (about ten times slower than this machine): compare the two
# stacks, never read the figures as RDMA performance.  Figures only:
# nothing passes or fails on time.
#
# usage: rxe_compare.sh [-b BUILDDIR]     (root; setup.sh run once)
# environment: ROUNDS=3; TESTS="lat bw ar2 ar4"; OUT=DIR (default
#   ./rxe-compare-YYYYmmdd-HHMMSS); PLOT=0 no PNG
# OUT holds raw.csv, results.csv, table.txt, rxe_compare.png, logs/.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
cmp_name=rxe_compare
# shellcheck source=compare_lib.sh
. "$src/fabtests-ext/scripts/compare_lib.sh"
if [ "${1:-}" = --guest ]; then
	# inside the guest: the build, the output folder, rounds, tests
	# (a comma list: the guest gets one command line, unquoted)
	bld=$2 OUT=$3 ROUNDS=$4 TESTS=${5//,/ }
	case $bld in /tmp/*)
		{ mountpoint -q /run/host ||
		{ mkdir -p /run/host && mount --bind / /run/host; }; } &&
		bld=/run/host$bld ;;
	esac
	export FI_PROVIDER_PATH=$bld/.libs
	# rxm sizes its verbs completion queues by the universe (256 by
	# default), past what rxe takes (32767 entries)
	export FI_UNIVERSE_SIZE=${FI_UNIVERSE_SIZE:-8}
	raw=$OUT/raw.csv
	echo "round,stack,test,np,bytes,value,unit" >"$raw"
	mkdir -p "$OUT/logs"
	stacks=(tnbc "verbs;ofi_rxm")
	one() {
		local r=$1 st=$2 test=$3 np=$4 log
		log=$OUT/logs/$test-$np-$(echo "$st" | tr ';' '+')-r$r.log
		case $test in
		lat)
			FI_TNBC_XPORTS=verbs timeout 600 \
				"$bld/fabtests-ext/ftx_bench_pingpong" -p "$st" \
				-s 8,4096 -t 600 >"$log" 2>&1 || return
			awk -v r="$r" -v s="$st" '!/^#/ && NF == 3 {
				print r "," s ",lat,2," $1 "," $3 ",us" }' \
				"$log" >>"$raw" ;;
		bw)
			FI_TNBC_XPORTS=verbs timeout 600 \
				"$bld/fabtests-ext/ftx_bench_bw" -p "$st" \
				-s 64k,1m -B 64 -t 600 >"$log" 2>&1 || return
			awk -v r="$r" -v s="$st" '!/^#/ && NF >= 3 &&
				$1 ~ /^[0-9]+$/ {
				print r "," s ",bw,2," $1 "," $NF ",GB/s" }' \
				"$log" >>"$raw" ;;
		ar)
			FI_TNBC_XPORTS=verbs timeout 900 \
				"$bld/fabtests-ext/ftx_bench_coll" -p "$st" \
				-n "$np" -C allreduce -s 8,16,32,48 -i 100 -l x \
				-t 900 \
				>"$log" 2>&1 || return
			awk -F, -v r="$r" -v s="$st" -v np="$np" '$1 == "x" {
				print r "," s ",allreduce," np "," $3 "," $4 ",us" }' \
				"$log" >>"$raw" ;;
		esac
	}
	cmp_rounds "$ROUNDS" "$TESTS" "${stacks[0]}" "${stacks[1]}"
	exit 0
fi

cmp_build_opt "$@"
rxe=${TNBC_SOFTROCE:-$src/../shared/softroce}
[ -f "$rxe/run.sh" ] || { echo "no soft-RoCE recipe at $rxe" >&2; exit 1; }
OUT=${OUT:-$PWD/rxe-compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
# the guest sees OUT at its own /tmp/out
tests=${TESTS:-lat bw ar2 ar4}
OUT=$OUT RXE_TIMEOUT=${RXE_TIMEOUT:-5400} bash "$src/tests/softroce-run.sh" "$rxe" \
	"$src/fabtests-ext/scripts/rxe_compare.sh" --guest "$bld" /tmp/out \
	"${ROUNDS:-3}" "${tests// /,}"
# a python3 with matplotlib if there is one (else the table alone)
py=python3
cmp_find_python || true
"$py" "$src/fabtests-ext/scripts/compare_table.py" "$OUT" "verbs;ofi_rxm" \
	"tnbc over verbs vs verbs;ofi_rxm on soft-RoCE (emulated guest; lat, allreduce: lower is better; bw: higher)" \
	rxe_compare.png
echo "results in $OUT"
