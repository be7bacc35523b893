#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
#
# Runs ftx_bench_pingpong and ftx_bench_bw on several providers and prints
# one table: latency (us, lower is better) and bandwidth (GB/s, higher is
# better), each followed by its ratio to shm.  A provider that cannot be
# opened or fails shows n/a.  FI_PROVIDER_PATH is passed through, so
#   FI_PROVIDER_PATH=/path/to/tnbc/libs scripts/bench_compare.sh
# measures a tnbc built as a DL provider.
#
# usage: bench_compare.sh [-b BINDIR] [-k] [PROVIDER...]
#   -b BINDIR  where the ftx_bench_* programs are (default: found nearby)
#   -k         keep and show each tool's raw output
#   PROVIDER   default: tnbc shm tcp sockets

set -u

here=$(cd "$(dirname "$0")" && pwd)
bindir=${FTX_BINDIR:-}
keep=0
while getopts b:kh opt; do
	case $opt in
	b) bindir=$OPTARG ;;
	k) keep=1 ;;
	*) sed -n '3,16p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
provs=${*:-tnbc shm tcp sockets}

if [ -z "$bindir" ]; then
	for d in "$here/../build" "$here/.." "./fabtests-ext" .; do
		if [ -x "$d/ftx_bench_pingpong" ]; then
			bindir=$d
			break
		fi
	done
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/ftx_bench_pingpong" ] ||
	[ ! -x "$bindir/ftx_bench_bw" ]; then
	echo "bench_compare.sh: ftx_bench_* not found; use -b BINDIR" >&2
	exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# FI_PROVIDER would hide every provider but one from libfabric itself.
run() {
	env -u FI_PROVIDER "$@"
}

# figure for size $2 in column 3 of tool output $1, or n/a
pick() {
	awk -v s="$2" '!/^#/ && $1 == s { v = $3 }
		END { print v == "" ? "n/a" : v }' "$1"
}

for p in $provs; do
	echo "# running $p ..." >&2
	run "$bindir/ftx_bench_pingpong" -p "$p" -t 60 >"$tmp/$p.lat" 2>&1
	run "$bindir/ftx_bench_bw" -p "$p" -t 60 >"$tmp/$p.bw" 2>&1
	for f in lat bw; do
		if grep -q '^FAIL' "$tmp/$p.$f"; then
			echo "# $p: $(grep '^FAIL' "$tmp/$p.$f" | head -n 1)" >&2
		fi
		[ "$keep" = 1 ] && cat "$tmp/$p.$f" >&2
	done
	printf '%s %s %s %s %s %s\n' "$p" \
		"$(pick "$tmp/$p.lat" 8)" "$(pick "$tmp/$p.lat" 4096)" \
		"$(pick "$tmp/$p.bw" 65536)" "$(pick "$tmp/$p.bw" 1048576)" \
		"$(pick "$tmp/$p.bw" 16777216)" >>"$tmp/table"
done

awk '
function ratio(v, base) {
	if (v == "n/a" || base == "n/a" || base + 0 == 0)
		return "n/a"
	return sprintf("%.2f", v / base)
}
{ row[NR] = $0; if ($1 == "shm") for (i = 2; i <= 6; i++) shm[i] = $i }
END {
	if (!(2 in shm))
		for (i = 2; i <= 6; i++) shm[i] = "n/a"
	printf "%-9s %10s %6s %10s %6s %10s %6s %10s %6s %10s %6s\n", \
		"provider", "lat8B_us", "/shm", "lat4K_us", "/shm", \
		"bw64K_GBs", "/shm", "bw1M_GBs", "/shm", "bw16M_GBs", "/shm"
	for (r = 1; r <= NR; r++) {
		n = split(row[r], f, " ")
		printf "%-9s", f[1]
		for (i = 2; i <= 6; i++)
			printf " %10s %6s", f[i], ratio(f[i], shm[i])
		printf "\n"
	}
}' "$tmp/table"
