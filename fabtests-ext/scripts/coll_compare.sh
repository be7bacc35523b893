#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# Allreduce completion time (seed 002's metric: every rank starts at one
# instant, done when the last rank has the result) side by side, in one
# invocation, doubles (MPI_SUM / FI_SUM):
#   tnbc-offload  fi_allreduce on tnbc: the engine runs the tree
#   tnbc-host     the same tree driven by the application over tnbc's
#                 tagged messages (seed 002's "software")
#   rxm-offload   fi_allreduce of libfabric's tcp;ofi_rxm
#   mpi-vader     MPI_Allreduce, Open MPI ob1 + btl vader, coll tuned
#   mpi-ucx       MPI_Allreduce, Open MPI pml ucx
# at 2, 4, 8 and 16 processes, 8 to 48 B, 4 KiB and 1 MiB.  Each round
# runs every stack once per process count, the order rotating from round
# to round; the table shows the median over rounds of each run's median,
# and tnbc-offload's time over each other stack's (below 1: offload is
# faster).  Figures only: nothing passes or fails on time.
#
# usage: coll_compare.sh [-b BUILDDIR]
#   BUILDDIR  the tnbc build directory (default: build/ beside this
#             checkout), with fabtests-ext/ftx_bench_coll, .libs and
#             tests/mpi/bin/bench_coll
# environment:
#   ROUNDS=3  rounds;  NPS="2 4 8 16";  SIZES=8,16,32,48,4k,1m
#   QUICK=1   1 round, 2 and 4 processes, -i 30 (a smoke test)
#   OUT=DIR   output directory (default ./coll-compare-YYYYmmdd-HHMMSS)
#   TMO=600   timeout per run, seconds;  PLOT=0  no PNG
#   COMPUTE=USEC  every rank computes USEC (no call) between posting
#             the operation and waiting for it (MPI_Iallreduce for MPI, the
#             children's receives posted first for tnbc-host): the time
#             then shows what progressed meanwhile
# OUT holds table.txt, raw.csv (every run: round,stack,np,bytes,median_us,
# min_us), results.csv (medians over rounds), coll_compare.png, logs/.
# A stack that fails at a size (tcp;ofi_rxm gives wrong results above its
# eager size) shows n/a there; the exit status is 1 when any run failed.

set -u
# shellcheck disable=SC2034 # read by compare_lib.sh
cmp_name=coll_compare.sh
# shellcheck source-path=SCRIPTDIR source=compare_lib.sh
. "$(dirname "$0")/compare_lib.sh"

top=$(cd "$(dirname "$0")/../.." && pwd)
bld=$top/build
case ${1:-} in
-h | --help) sed -n '4,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
-b) bld=$(cd "${2:?}" && pwd) ;;
'') ;;
*) sed -n '4,36p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
rounds=${ROUNDS:-3}
nps=${NPS:-2 4 8 16}
sizes=${SIZES:-8,16,32,48,4k,1m}
reps=()
if [ "${QUICK:-0}" = 1 ]; then
	rounds=1
	nps="2 4"
	reps=(-i 30 -w 5)
fi
tmo=${TMO:-600}
out=${OUT:-./coll-compare-$(date +%Y%m%d-%H%M%S)}
ftx=$bld/fabtests-ext/ftx_bench_coll
mpib=$bld/tests/mpi/bin/bench_coll
for f in "$ftx" "$mpib"; do
	[ -x "$f" ] || { echo "$cmp_name: $f not built" >&2; exit 2; }
done
cmp_positive_int ROUNDS "$rounds" || exit 2
mkdir -p "$out/logs" || exit 2
# shellcheck disable=SC2034 # read by compare_lib.sh
tmp=$out/logs
export FI_PROVIDER_PATH=$bld/.libs
mpi_common=(--allow-run-as-root --oversubscribe --bind-to none
	--mca mpi_yield_when_idle 1)
stacks=(tnbc-offload tnbc-host rxm-offload mpi-vader mpi-ucx)
echo "round,stack,np,bytes,median_us,min_us" >"$out/raw.csv"
fail=0

# run_one ROUND STACK NP: one run, its CSV lines into raw.csv.
run_one() {
	local log=$out/logs/$2-np$3-r$1
	local -a cmd

	case $2 in
	tnbc-offload) cmd=("$ftx" -p tnbc -m offload) ;;
	tnbc-host) cmd=("$ftx" -p tnbc -m host) ;;
	rxm-offload) cmd=(env -u FI_PROVIDER_PATH "$ftx" -p 'tcp;ofi_rxm'
		-m offload) ;;
	mpi-vader) cmd=(mpirun "${mpi_common[@]}" --mca pml ob1
		--mca btl 'self,vader' -np "$3" "$mpib") ;;
	mpi-ucx) cmd=(mpirun "${mpi_common[@]}" --mca pml ucx
		--mca pml_ucx_tls any --mca pml_ucx_devices any -np "$3"
		"$mpib") ;;
	esac
	case $2 in
	mpi-*) cmd+=(-s "$sizes" -l "$2" "${reps[@]}") ;;
	*) cmd+=(-n "$3" -t "$tmo" -s "$sizes" -l "$2" "${reps[@]}"
		-C allreduce) ;;
	esac
	[ -n "${COMPUTE:-}" ] && cmd+=(-c "$COMPUTE")
	if ! timeout "$tmo" "${cmd[@]}" >"$log.out" 2>"$log.err"; then
		fail=1
		echo "# $2 -np $3 round $1 failed: $(grep -m1 -e FAIL -e rror \
			"$log.out" "$log.err" | head -n 1)" >&2
	fi
	awk -F, -v r="$1" -v st="$2" \
		'NF == 5 && $3 ~ /^[0-9]+$/ { print r "," st "," $2 "," $3 "," $4 "," $5 }' \
		"$log.out" >>"$out/raw.csv"
}

for ((r = 1; r <= rounds; r++)); do
	for np in $nps; do
		for ((k = 0; k < ${#stacks[@]}; k++)); do
			run_one "$r" "${stacks[$(((k + r - 1) % ${#stacks[@]}))]}" \
				"$np"
		done
	done
done

# medians over rounds: stack,np,bytes,median_us
tail -n +2 "$out/raw.csv" | awk -F, '{ print $2 "," $3 "," $4 "," $1 "," $5 ",us" }' |
	sort -t, -k1,1 -k2,2n -k3,3n -k5,5g | cmp_medians 3 |
	cut -d, -f1-4 >"$out/results.csv"

{
	printf "# allreduce completion time, doubles, median over %d round(s) of " "$rounds"
	printf "each run's median (us); x_: tnbc-offload / that stack\n"
	printf "%4s %8s" np bytes
	for s in "${stacks[@]}"; do printf " %13s" "$s"; done
	printf " %7s %7s %7s %7s\n" x_host x_rxm x_vader x_best
	awk -F, -v stacks="${stacks[*]}" '
	BEGIN { ns = split(stacks, st, " ") }
	{ v[$2 "," $3 "," $1] = $4; key[$2 "," $3] = 1; nps[$2] = 1; by[$3] = 1 }
	END {
		for (k in key) { split(k, a, ","); print a[1], a[2] }
	}' "$out/results.csv" | sort -k1,1n -k2,2n | while read -r np b; do
		printf "%4s %8s" "$np" "$b"
		awk -F, -v np="$np" -v b="$b" -v stacks="${stacks[*]}" '
		BEGIN { ns = split(stacks, st, " ") }
		$2 == np && $3 == b { v[$1] = $4 }
		END {
			for (i = 1; i <= ns; i++)
				printf " %13s", (st[i] in v) ? sprintf("%.2f", v[st[i]]) : "n/a"
			o = v["tnbc-offload"]
			best = ""
			if ("mpi-vader" in v) best = v["mpi-vader"]
			if (("mpi-ucx" in v) && (best == "" || v["mpi-ucx"] < best)) best = v["mpi-ucx"]
			r["x_host"] = ("tnbc-host" in v) && o ? o / v["tnbc-host"] : ""
			r["x_rxm"] = ("rxm-offload" in v) && o ? o / v["rxm-offload"] : ""
			r["x_vader"] = ("mpi-vader" in v) && o ? o / v["mpi-vader"] : ""
			r["x_best"] = best != "" && o ? o / best : ""
			split("x_host x_rxm x_vader x_best", xs, " ")
			for (i = 1; i <= 4; i++)
				printf " %7s", r[xs[i]] != "" ? sprintf("%.2f", r[xs[i]]) : "n/a"
			printf "\n"
		}' "$out/results.csv"
	done
} | tee "$out/table.txt"

if [ "${PLOT:-1}" != 0 ] && cmp_plot_python; then
	"$py" - "$out/results.csv" "$out/coll_compare.png" <<'PYEOF'
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.reader(open(sys.argv[1])))
nps = sorted({int(r[1]) for r in rows})
fig, axes = plt.subplots(1, len(nps), figsize=(4.5 * len(nps), 4), squeeze=False)
for ax, np_ in zip(axes[0], nps):
    for st in sorted({r[0] for r in rows}):
        pts = sorted((int(r[2]), float(r[3])) for r in rows
                     if r[0] == st and int(r[1]) == np_)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=st)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_title(f"{np_} processes")
    ax.set_xlabel("bytes")
    ax.set_ylabel("completion time (us)")
    ax.grid(True, which="both", alpha=0.3)
axes[0][0].legend(fontsize=8)
fig.suptitle("allreduce completion time (median; lower is better)")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
PYEOF
	echo "# plot: $out/coll_compare.png"
fi
exit "$fail"
