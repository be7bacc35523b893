#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# OSU micro-benchmarks over Open MPI on tnbc (pml cm + OFI MTL, provider
# tnbc) beside ob1/vader (pml ob1 + btl self,vader, Open MPI's own shared
# memory), in one invocation: osu_bw and osu_latency with 2 ranks (the
# default sizes, 1 B to 4 MiB), osu_mbw_mr and osu_multi_lat with 4 and 8
# ranks (2 and 4 pairs), osu_allreduce and osu_alltoall with 4 and 8 ranks
# up to 64 KiB.  Every round runs every benchmark on both stacks, the stack
# that goes first alternating from round to round; the table shows the
# median over rounds and tnbc_x, tnbc's time over vader's (latency
# tnbc/vader, bandwidth vader/tnbc): above 1, tnbc is slower.  Figures
# only: nothing passes or fails on time.  Never downloads anything.
#
# usage: osu_compare.sh [OSU_DIR]
#   OSU_DIR   an OSU micro-benchmarks 7.x build or install directory, searched
#             for osu_bw, osu_latency, ... (default: $OSU_DIR)
# environment:
#   ROUNDS=3  rounds (each round: every benchmark once on each stack)
#   QUICK=1   smoke test: 1 round, -i 20 -x 5 (a few minutes in all)
#   OUT=DIR   output directory (default ./osu-compare-YYYYmmdd-HHMMSS)
#   TMO=300   timeout per mpirun, seconds
#   YIELD=auto  mpi_yield_when_idle for both stacks: auto leaves it to
#             Open MPI (it yields only when ranks oversubscribe the cores),
#             or 0 or 1
#   BIND=     --bind-to for both stacks (none, core, ...); default: Open
#             MPI's own (core for 2 ranks, numa or socket above)
#   PLOT=0    no PNG (by default python3-matplotlib is installed if absent)
# Uses the tnbc libfabric finds (installed by make install);
# FI_PROVIDER_PATH, when set, is passed to the ranks.
# OUT holds: table.txt (what is printed), results.csv (medians:
# benchmark,np,size,stack,value,unit), ratio.csv (benchmark,np,size,unit,
# tnbc,vader,tnbc_x), raw.csv (every round), osu_compare.png, logs/.
# Exit status: 0 every run gave figures; 1 a run failed or timed out (its
# figures are n/a) or a tnbc run did not run on tnbc (stops at once);
# 2 usage, OSU binaries or the tnbc provider not found.

set -u

# shellcheck disable=SC2034 # read by compare_lib.sh
cmp_name=osu_compare.sh
# shellcheck source-path=SCRIPTDIR source=compare_lib.sh
. "$(dirname "$0")/compare_lib.sh"

usage() { sed -n '4,36p' "$0" | sed 's/^# \{0,1\}//'; }

case ${1:-} in
-h | --help) usage; exit 0 ;;
-*) usage >&2; exit 2 ;;
esac
osu=${1:-${OSU_DIR:-}}
quick=${QUICK:-0}
rounds=${ROUNDS:-3}
iter_args=()
if [ "$quick" = 1 ]; then
	rounds=1
	iter_args=(-i 20 -x 5)
fi
tmo=${TMO:-300}
yield=${YIELD:-auto}
bind=${BIND:-}
plot=${PLOT:-1}
out=${OUT:-./osu-compare-$(date +%Y%m%d-%H%M%S)}

cmp_positive_int ROUNDS "$rounds" || exit 2
cmp_positive_int TMO "$tmo" || exit 2

benches=(osu_bw osu_latency osu_mbw_mr osu_multi_lat osu_allreduce osu_alltoall)
if [ -z "$osu" ]; then
	echo "osu_compare.sh: no OSU directory: give it as the first argument" \
		"or in OSU_DIR (an OSU micro-benchmarks build or install tree;" \
		"this script never downloads it)" >&2
	exit 2
fi
if [ ! -d "$osu" ]; then
	echo "osu_compare.sh: $osu: not a directory" >&2
	exit 2
fi
declare -A bin
missing=()
for b in "${benches[@]}"; do
	bin[$b]=$(find "$osu" -type f -name "$b" -perm -u+x -print -quit 2>/dev/null)
	[ -n "${bin[$b]}" ] || missing+=("$b")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "osu_compare.sh: not found under $osu: ${missing[*]}" >&2
	echo "osu_compare.sh: build OSU micro-benchmarks 7.x there first" \
		"(./configure CC=mpicc CXX=mpicxx && make); this script never" \
		"downloads it" >&2
	exit 2
fi
for t in mpirun fi_info timeout; do
	command -v "$t" >/dev/null ||
		{ echo "osu_compare.sh: $t not found (run scripts/deps.sh)" >&2; exit 2; }
done
if ! env -u FI_PROVIDER fi_info -p tnbc >/dev/null 2>&1; then
	echo "osu_compare.sh: libfabric does not find the tnbc provider;" \
		"run make install in the build directory (or set" \
		"FI_PROVIDER_PATH)" >&2
	exit 2
fi

mkdir -p "$out/logs" || exit 2
out=$(cd "$out" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# The tests: benchmark, ranks, options.
tests=(
	"osu_bw 2"
	"osu_latency 2"
	"osu_mbw_mr 4"
	"osu_mbw_mr 8"
	"osu_multi_lat 4"
	"osu_multi_lat 8"
	"osu_allreduce 4 -m 65536"
	"osu_allreduce 8 -m 65536"
	"osu_alltoall 4 -m 65536"
	"osu_alltoall 8 -m 65536"
)

# Both stacks get the same launch options, Open MPI's defaults unless
# BIND or YIELD say otherwise (cmp_stack_opts adds each stack's own).
common=(--allow-run-as-root --oversubscribe)
[ -n "$bind" ] && common+=(--bind-to "$bind")
[ "$yield" != auto ] && common+=(--mca mpi_yield_when_idle "$yield")

# shellcheck disable=SC2317 # called by run_one
unit_of() {
	case $1 in
	osu_bw | osu_mbw_mr) echo MB/s ;;
	*) echo us ;;
	esac
}

lib0=$(cmp_lib_sum)
echo "# osu_compare: OSU in $osu; $rounds round(s)${iter_args[*]:+, ${iter_args[*]}};" \
	"mpi_yield_when_idle $yield; bind ${bind:-default}; FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-(unset)};" \
	"output in $out" >&2
{
	echo "date: $(date -Is)"
	echo "host: $(uname -n), $(nproc) cpus, $(uname -r)"
	echo "osu: $osu"
	echo "open mpi: $(mpirun --version 2>/dev/null | head -n 1)"
	echo "libfabric: $(fi_info --version 2>/dev/null | tr '\n' ' ')"
	echo "tnbc: $(cmp_lib_sum)"
	echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "rounds: $rounds; quick: $quick; yield: $yield; bind: ${bind:-default}; timeout: $tmo"
} >"$out/env.txt"

failed=0
# run_one IDX ROUND STACK: one mpirun, figures appended to $tmp/raw as
# "idx,benchmark,np,size,stack,round,value,unit".
# shellcheck disable=SC2317 # called by cmp_rounds
run_one() {
	local idx=$1 round=$2 stack=$3 b np args_s log rc t0
	local -a args opts
	read -r b np args_s <<<"${tests[$idx]}"
	read -r -a args <<<"${args_s:-}"
	cmp_stack_opts "$stack"
	log=$out/logs/$b.np$np.$stack.r$round
	t0=$(date +%s)
	timeout -k 10 "$tmo" env -u FI_PROVIDER mpirun "${common[@]}" \
		"${opts[@]}" -np "$np" "${bin[$b]}" "${args[@]}" \
		"${iter_args[@]}" >"$log.out" 2>"$log.err" </dev/null
	rc=$?
	echo "# round $round/$rounds: $b -np $np${args_s:+ $args_s} on $stack:" \
		"exit $rc, $(($(date +%s) - t0)) s" >&2
	[ "$stack" = tnbc ] && cmp_check_tnbc "$b -np $np" "$np" "$rc" "$log.err"
	cmp_stderr_note "$log.err"
	if [ "$rc" -ne 0 ]; then
		[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "#   timed out after $tmo s" >&2
		failed=$((failed + 1))
	fi
	awk -v idx="$idx" -v b="$b" -v np="$np" -v st="$stack" -v r="$round" \
		-v u="$(unit_of "$b")" '
		!/^#/ && NF >= 2 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ {
			printf "%s,%s,%s,%s,%s,%s,%s,%s\n", idx, b, np, $1, st, r, $2, u
			n++
		}
		END { exit n == 0 }' "$log.out" >>"$tmp/raw" ||
		{ [ "$rc" -eq 0 ] && echo "#   no figures in $log.out" >&2 && failed=$((failed + 1)); }
	return 0
}

: >"$tmp/raw"
cmp_rounds "$rounds" "${#tests[@]}" run_one

cmp_end "$out/env.txt" "$lib0"

# Medians over rounds (the mean of the middle two for an even count).
echo "benchmark,np,size,stack,round,value,unit" >"$out/raw.csv"
cut -d, -f2- "$tmp/raw" >>"$out/raw.csv"
sort -t, -k1,1n -k3,3n -k4,4n -k5,5 -k7,7g "$tmp/raw" | cmp_medians 5 >"$tmp/med"
echo "benchmark,np,size,stack,value,unit" >"$out/results.csv"
cut -d, -f2- "$tmp/med" >>"$out/results.csv"

# One row per benchmark, ranks and size; tnbc_x: tnbc's time over vader's.
awk -F, '
{
	k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
	if (!(k in seen)) { seen[k] = 1; keys[++nk] = k; unit[k] = $7 }
	val[k, $5] = $6
}
END {
	for (i = 1; i <= nk; i++) {
		k = keys[i]
		split(k, a, SUBSEP)
		t = ((k, "tnbc") in val) ? val[k, "tnbc"] : "n/a"
		v = ((k, "vader") in val) ? val[k, "vader"] : "n/a"
		x = "n/a"
		if (t != "n/a" && v != "n/a" && t + 0 > 0 && v + 0 > 0)
			x = sprintf("%.2f", unit[k] == "MB/s" ? v / t : t / v)
		printf "%s,%s,%s,%s,%s,%s,%s\n", a[2], a[3], a[4], unit[k], t, v, x
	}
}' "$tmp/med" >"$tmp/ratio"
echo "benchmark,np,size,unit,tnbc,vader,tnbc_x" >"$out/ratio.csv"
cat "$tmp/ratio" >>"$out/ratio.csv"

cmp_table "$tmp/ratio" "$rounds" "%-14s %3s %8s %5s %11s %11s %7s\n" \
	"latency tnbc/vader, bandwidth vader/tnbc" 20 \
	benchmark np size unit tnbc vader tnbc_x | tee "$out/table.txt"

# The plot: matplotlib, installed from Debian when absent.
py=
[ "$plot" = 1 ] && ! cmp_plot_python && plot=0
if [ "$plot" = 1 ]; then
	MPLBACKEND=Agg "$py" - "$out" "$rounds" <<'EOF' ||
import csv, sys
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter


def size_label(x, _pos):
    for unit, n in (("M", 1 << 20), ("K", 1 << 10)):
        if x >= n:
            return "%g%s" % (x / n, unit)
    return "%g" % x


out, rounds = sys.argv[1], sys.argv[2]
data = {}
with open(out + "/results.csv") as f:
    for r in csv.DictReader(f):
        key = (r["benchmark"], int(r["np"]), r["stack"])
        data.setdefault(key, []).append((int(r["size"]), float(r["value"])))
panels = [("osu_bw", "bandwidth, MB/s"), ("osu_latency", "latency, us"),
          ("osu_mbw_mr", "aggregate bandwidth, MB/s"),
          ("osu_multi_lat", "latency, us"),
          ("osu_allreduce", "latency, us"), ("osu_alltoall", "latency, us")]
colour = {"tnbc": "tab:red", "vader": "tab:blue"}
style = {2: "-", 4: "-", 8: "--"}
fig, axes = plt.subplots(3, 2, figsize=(12, 13))
for ax, (bench, ylabel) in zip(axes.flat, panels):
    for (b, np, stack), pts in sorted(data.items()):
        if b != bench:
            continue
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style.get(np, ":"),
                marker="o", markersize=3, color=colour.get(stack, "k"),
                label="%s, %d ranks" % (stack if stack == "tnbc" else
                                        "ob1/vader", np))
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(size_label))
    ax.set_yscale("log")
    ax.set_title(bench)
    ax.set_xlabel("message size, bytes")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.4)
    if ax.has_data():
        ax.legend(fontsize=8)
fig.suptitle("OSU 7.4 over Open MPI: tnbc (pml cm + OFI MTL) vs ob1/vader, "
             "median of %s round(s)" % rounds)
fig.tight_layout()
fig.savefig(out + "/osu_compare.png", dpi=100)
EOF
		echo "# osu_compare: the plot failed" >&2
fi

cmp_exit "$out" osu_compare.png "$failed"
