#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
#
# Runs ftx_bench_trigger on tnbc, on sockets with its defaults and on
# sockets with FI_SOCKETS_PE_WAITTIME=0 (its progress thread never naps),
# and prints one table: plain and triggered 8-byte latency (us, lower is
# better) and their ratio, deferred-work request rates (req/s, higher is
# better), then the ratios tnbc/sockets for each sockets setting.  Each
# part of the benchmark runs on its own, so a part that fails or hangs
# (sockets deadlocks in some trigger chains) shows n/a and costs at most
# its timeout.  FI_PROVIDER_PATH is passed through; when it is unset, a
# libtnbc-fi.so under the current directory is used when there is one.
#
# usage: trigger_compare.sh [-b BINDIR] [-k] [-t SEC] [-- BENCH_ARGS...]
#   -b BINDIR  where ftx_bench_trigger is (default: found nearby)
#   -k         keep and show the raw output
#   -t SEC     timeout per part (default 60)
#   BENCH_ARGS passed to every run (e.g. -T 1 -N 5000)

set -u

here=$(cd "$(dirname "$0")" && pwd)
bindir=${FTX_BINDIR:-}
keep=0
tmo=60
while getopts b:kt:h opt; do
	case $opt in
	b) bindir=$OPTARG ;;
	k) keep=1 ;;
	t) tmo=$OPTARG ;;
	*) sed -n '3,19p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

if [ -z "$bindir" ]; then
	for d in "$here/../build" "$here/.." "./fabtests-ext" .; do
		if [ -x "$d/ftx_bench_trigger" ]; then
			bindir=$d
			break
		fi
	done
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/ftx_bench_trigger" ]; then
	echo "trigger_compare.sh: ftx_bench_trigger not found; use -b BINDIR" >&2
	exit 2
fi

if [ -z "${FI_PROVIDER_PATH:-}" ]; then
	# the plain build, never a sanitizer one (it needs its runtime first)
	lib=$(find . -name 'libtnbc-fi.so' -path '*/.libs/*' \
		-not -path '*asan*' 2>/dev/null | sort | head -n 1)
	if [ -n "$lib" ]; then
		FI_PROVIDER_PATH=$(cd "$(dirname "$lib")" && pwd)
		export FI_PROVIDER_PATH
		echo "# FI_PROVIDER_PATH=$FI_PROVIDER_PATH" >&2
	fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

metrics="lat_plain_us lat_trig_poll_us lat_poll_ratio lat_trig_sleep_us
lat_sleep_ratio cntr_add_fire_rate cntr_add_total_rate cntr_add_immediate_rate
tsend8_total_rate"

bench_args="$*"

# config name, provider, env assignments (one word each, may be empty)
run_config() {
	name=$1 prov=$2 envs=$3
	: >"$tmp/$name.out"
	for part in lat cntr tsend; do
		echo "# running $name: $part ..." >&2
		# FI_PROVIDER would hide every provider but one from libfabric;
		# envs and bench_args are meant to split
		# shellcheck disable=SC2086
		env -u FI_PROVIDER $envs "$bindir/ftx_bench_trigger" \
			-p "$prov" -t "$tmo" -P "$part" $bench_args \
			>"$tmp/$name.$part" 2>&1
		if grep -q '^FAIL' "$tmp/$name.$part"; then
			echo "# $name $part: $(grep '^FAIL' "$tmp/$name.$part" |
				head -n 1)" >&2
		fi
		[ "$keep" = 1 ] && cat "$tmp/$name.$part" >&2
		cat "$tmp/$name.$part" >>"$tmp/$name.out"
	done
	line=$name
	for m in $metrics; do
		v=$(awk -v m="$m" '$1 == m { v = $2 }
			END { print v == "" ? "n/a" : v }' "$tmp/$name.out")
		line="$line $v"
	done
	echo "$line" >>"$tmp/table"
}

run_config tnbc tnbc ""
run_config sockets sockets ""
run_config sockets-pe0 sockets FI_SOCKETS_PE_WAITTIME=0

awk '
function ratio(v, base) {
	if (v == "n/a" || base == "n/a" || base + 0 == 0)
		return "n/a"
	return sprintf("%.3g", v / base)
}
function fmt(v) {
	if (v == "n/a")
		return v
	return sprintf(v + 0 >= 1000 ? "%.0f" : "%.3f", v)
}
BEGIN { split("0 9 9 8 9 8 11 11 11 11", w, " ") }
{ n++; for (i = 1; i <= NF; i++) f[n, i] = $i; nf = NF; name[$1] = n }
END {
	printf "%-14s %9s %9s %8s %9s %8s %11s %11s %11s %11s\n", "config", \
		"plain_us", "tpoll_us", "tpoll/pl", "tslp_us", "tslp/pl", \
		"cntr_fire/s", "cntr_tot/s", "cntr_imm/s", "tsend8/s"
	for (r = 1; r <= n; r++) {
		printf "%-14s", f[r, 1]
		for (i = 2; i <= nf; i++)
			printf " %*s", w[i], fmt(f[r, i])
		printf "\n"
	}
	t = name["tnbc"]
	for (r = 1; r <= n; r++) {
		if (r == t || !t)
			continue
		printf "%-14s", "tnbc/" f[r, 1]
		for (i = 2; i <= nf; i++)
			printf " %*s", w[i], ratio(f[t, i], f[r, i])
		printf "\n"
	}
	print "# latency ratios below 1 and rate ratios above 1 favour tnbc"
}' "$tmp/table"
