#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# The MPI glue side by side with the MPI's own collectives, in one run:
# bench_glue (OSU's method: blocking latency as the slowest rank's
# average, and non-blocking overlap with a compute phase that sleeps or
# busy-loops) for each MPI the glue was built for, at 2 and 4 ranks on
# this host, three ways: the MPI alone (mpi), the glue with its default
# policy (glue), and the glue with every blocking call offloaded
# (glue-all).  Figures only: nothing passes or fails on time.
#
# WHERE=netns runs Open MPI's instead across 2 namespace hosts
# (tests/netns-lib.sh; root only), NPS ranks split between them, ob1
# with its TCP BTL under all three: there a collective's time is the
# link's, not the post's; its rows' mpi column reads openmpi@netns.
#
# ROUNDS=N repeats every configuration N times, the labels alternating
# within each round, and the tables take each figure's median: one round
# of 4 ranks on 2 cores moves single sizes by 2x, so a policy judged on
# one round is judged on noise.  The blocking table ends with the
# policy's aim: the sizes where the glue's default is more than 10 %
# slower than the MPI alone, by the best of the rounds (interference
# only ever adds time; on the development VM whole runs flip between
# modes up to 3x apart, which moves medians too).  The label mpi-again
# (LABELS="mpi glue mpi-again") runs the MPI alone a second time in each
# round, and the same count for it against mpi is the noise floor.
#
# usage: tests/mpi/bench-glue.sh [BUILDDIR]   (default: build)
# environment: NPS="2 4", MPIS="openmpi mpich", MAXB=1048576, ITER=200,
#              WHERE="local" (or "netns", or both), ROUNDS=1,
#              COMPUTE="sleep busy", LABELS="mpi glue glue-all",
#              OUT=DIR (default ./bench-glue-YYYYmmdd-HHMMSS), PLOT=0,
#              TABLES_ONLY=1 (tables and plot again from OUT/results.csv),
#              ONLY=COLL (one collective of bench_glue's, e.g. reduce_scatter),
#              DTYPE=char (the reductions fold OSU's bytes, not floats)
# OUT holds results.csv (every row; its round column counts from 1),
# ratio.csv (medians: glue and glue-all over mpi per blocking size;
# overlap per non-blocking size), table.txt and bench_glue.png.
set -euo pipefail

b=$(cd "${1:-build}" && pwd)
out=${OUT:-$PWD/bench-glue-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$b/.libs}
export TNBC_MPI_LIBDIR=$b/mpi-glue/.libs
run=$b/mpi-glue/tnbc-mpirun
csv=$out/results.csv
# Debian's python3, with Debian's matplotlib, before another on PATH
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
[ "${TABLES_ONLY:-0}" = 1 ] ||
	echo "label,mpi,np,coll,bytes,us,pure_us,total_us,overlap_pct,post_us,wait_us,compute,round" >"$csv"

src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
netns_up=0
cleanup() {
	[ $netns_up = 1 ] && netns_cleanup
	rm -rf "$work"
}
trap cleanup EXIT

# one configuration: $1 mpi, $2 where, $3 np, $4 compute, $5 round
run_one() {
	local mpi=$1 where=$2 np=$3 compute=$4 round=$5 lopts pre=() tag=$1
	local label launch
	local bin=$b/tests/mpi/glue-bin/bench_glue.$mpi
	local args=(-m "${MAXB:-1048576}" -i "${ITER:-200}" -c "$compute"
		${ONLY:+-o "$ONLY"} ${DTYPE:+-d "$DTYPE"})
	if [ "$mpi" = openmpi ]; then
		lopts=(--allow-run-as-root --oversubscribe)
	else
		lopts=()
	fi
	if [ "$where" = netns ]; then
		# shellcheck disable=SC2054
		lopts+=(--mca plm_rsh_agent "$work/rsh"
			--mca mpi_yield_when_idle 1 --mca pml ob1
			--mca btl self,vader,tcp
			--mca oob_tcp_if_include 10.231.0.0/24
			--mca btl_tcp_if_include 10.231.0.0/24
			-H "10.231.0.1:$(((np + 1) / 2)),10.231.0.2:$((np / 2))")
		pre=(nsenter -t "${HOSTPID[1]}" -n -u env PATH="$PATH")
		tag=$mpi@netns
	fi
	echo "== $tag np=$np compute=$compute round=$round" >&2
	for label in ${LABELS:-mpi glue glue-all}; do
		launch=("$run")
		case $label in mpi | mpi-again) launch=(mpirun."$mpi") ;; esac
		[ $label = glue-all ] && launch=(env TNBC_MPI_OFFLOAD=all "$run")
		"${pre[@]}" "${launch[@]}" "${lopts[@]}" -np "$np" "$bin" \
			-l $label "${args[@]}" | tail -n +2 |
			sed "s/^\([^,]*\),$mpi,/\1,$tag,/; s/\$/,$compute,$round/" \
				>>"$csv"
	done
}

[ "${TABLES_ONLY:-0}" = 1 ] || for where in ${WHERE:-local}; do
	if [ "$where" = netns ]; then
		# shellcheck source=../netns-lib.sh
		. "$src/tests/netns-lib.sh"
		netns_up=1
		netns_setup 2 "$work/rsh" PATH="$PATH" \
			FI_PROVIDER_PATH="$FI_PROVIDER_PATH" \
			TNBC_MPI_LIBDIR="$TNBC_MPI_LIBDIR" || continue
	fi
	for mpi in ${MPIS:-openmpi mpich}; do
		# MPICH 4.0's runs across namespace hosts hang in MPI_Finalize
		# (ch4:ucx over TCP; tests/mpi/bench-apps.sh)
		[ "$where" = netns ] && [ "$mpi" = mpich ] && continue
		bin=$b/tests/mpi/glue-bin/bench_glue.$mpi
		[ -x "$bin" ] || { echo "no $bin (make check builds it)"; continue; }
		for np in ${NPS:-2 4}; do
			for round in $(seq "${ROUNDS:-1}"); do
				for compute in ${COMPUTE:-sleep busy}; do
					run_one "$mpi" "$where" "$np" "$compute" \
						"$round"
				done
			done
		done
	done
done

"$py" - "$out" "${PLOT:-1}" <<'PY'
import csv, sys, collections, statistics
out, plot = sys.argv[1], sys.argv[2] != "0"
rows = list(csv.DictReader(open(out + "/results.csv")))
# every round's figure, by configuration and label; the tables show the
# median.  Blocking rows come with each compute mode's run alike.
blk = collections.defaultdict(lambda: collections.defaultdict(list))
ovl = collections.defaultdict(lambda: collections.defaultdict(list))
rounds = set()
for r in rows:
    key = (r["mpi"], r["np"], r["coll"], int(r["bytes"]))
    rounds.add(r.get("round") or "1")
    if r["us"]:
        blk[key][r["label"]].append(float(r["us"]))
    else:
        ovl[key + (r["compute"],)][r["label"]].append((float(r["overlap_pct"]),
            float(r["post_us"]), float(r["wait_us"]), float(r["pure_us"])))
med = statistics.median
def medt(v):  # a tuple of medians, field by field
    return tuple(med(x[i] for x in v) for i in range(len(v[0])))
with open(out + "/ratio.csv", "w") as f, open(out + "/table.txt", "w") as t:
    f.write("kind,mpi,np,coll,bytes,compute,mpi_us,glue_us,glue_all_us,glue_x,glue_all_x,mpi_overlap,glue_overlap\n")
    t.write("blocking: us per call (slowest rank's average; median of %d round(s)); x = over the MPI's own\n" % len(rounds))
    t.write("%-8s %2s %-10s %8s %9s %9s %9s %6s %6s\n" % ("mpi", "np", "coll", "bytes", "mpi", "glue", "glue-all", "x", "x-all"))
    slow, judged, floor = [], 0, []
    for k in sorted(blk):
        v = blk[k]
        if "mpi" not in v or "glue" not in v:
            continue
        m, g = med(v["mpi"]), med(v["glue"])
        a = med(v["glue-all"]) if "glue-all" in v else float("nan")
        f.write("blocking,%s,%s,%s,%d,,%.3f,%.3f,%.3f,%.2f,%.2f,,\n" % (k + (m, g, a, g / m, a / m)))
        t.write("%-8s %2s %-10s %8d %9.2f %9.2f %9.2f %6.2f %6.2f\n" % (k + (m, g, a, g / m, a / m)))
        judged += 1
        bm, bg = min(v["mpi"]), min(v["glue"])
        if bg > 1.10 * bm:
            slow.append("%s np=%s %s %d B: %.2fx" % (k + (bg / bm,)))
        if "mpi-again" in v and min(v["mpi-again"]) > 1.10 * bm:
            floor.append(k)
    t.write("\naim (the policy's): no size more than 10 %% slower with the glue's default "
            "(best of %d round(s)); %d of %d sizes are:\n" % (len(rounds), len(slow), judged))
    for x in slow:
        t.write("  %s\n" % x)
    if any("mpi-again" in v for v in blk.values()):
        t.write("noise floor: the MPI alone again, the same way, is more than 10 %% slower "
                "than itself at %d of %d sizes\n" % (len(floor), judged))
    t.write("\nnon-blocking: OSU overlap % (post and wait us of the glue; medians)\n")
    t.write("%-8s %2s %-11s %8s %-6s %7s %7s %8s %8s %8s\n" % ("mpi", "np", "coll", "bytes", "comp", "mpi%", "glue%", "pure", "post", "wait"))
    for k in sorted(ovl):
        v = ovl[k]
        if "mpi" not in v or "glue" not in v:
            continue
        m, g = medt(v["mpi"]), medt(v["glue"])
        f.write("overlap,%s,%s,%s,%d,%s,,,,,,%.1f,%.1f\n" % (k + (m[0], g[0])))
        t.write("%-8s %2s %-11s %8d %-6s %7.1f %7.1f %8.2f %8.2f %8.2f\n" % (k + (m[0], g[0], g[3], g[1], g[2])))
print(open(out + "/table.txt").read())
if plot:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(13, 5))
    series = collections.defaultdict(list)
    for k in sorted(blk):
        v = blk[k]
        for lab in ("glue", "glue-all"):
            if "mpi" in v and lab in v:
                series[(lab, k[0], k[1], k[2])].append((k[3] or 1, med(v[lab]) / med(v["mpi"])))
    for s, pts in sorted(series.items()):
        ax[0].plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="%s %s np=%s %s" % s,
                   ls="-" if s[0] == "glue" else ":")
    ax[0].axhline(1.0, color="k", lw=0.8)
    ax[0].set_xscale("log", base=2); ax[0].set_yscale("log")
    ax[0].set_xlabel("bytes"); ax[0].set_ylabel("offloaded / MPI's own (lower: glue faster)")
    ax[0].axhline(1.1, color="r", lw=0.6, ls="--")
    ax[0].set_title("blocking: the glue's default (solid), every call offloaded (dotted)")
    ax[0].legend(fontsize=5)
    series = collections.defaultdict(list)
    for k in sorted(ovl):
        v = ovl[k]
        for lab in ("mpi", "glue"):
            if lab in v:
                series[(lab,) + k[:3] + (k[4],)].append((k[3], medt(v[lab])[0]))
    for s, pts in sorted(series.items()):
        ax[1].plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label="%s %s np=%s %s %s" % s,
                   ls="-" if s[0] == "glue" else ":")
    ax[1].set_xscale("log", base=2); ax[1].set_ylim(-2, 102)
    ax[1].set_xlabel("bytes"); ax[1].set_ylabel("overlap % (OSU)")
    ax[1].set_title("non-blocking overlap, compute sleeps or busy-loops")
    ax[1].legend(fontsize=4)
    fig.tight_layout()
    fig.savefig(out + "/bench_glue.png", dpi=120)
    print("wrote", out + "/bench_glue.png")
PY
echo "results in $out"
