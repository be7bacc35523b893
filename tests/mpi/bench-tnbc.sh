#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# Seed 000's micro-benchmark of T-NBC (bench_tnbc.c), side by side in one
# run: for each MPI the glue was built for, each rank count and each
# size, the alltoall and the computation after it once without T-NBC
# (the glue's default policy: the blocking call) and once with it, in
# the five scenarios; beside each, the overlap the seed's model predicts,
# min(Tcomm - Tinit, T_CURC + Tcomm * Rcomm / R_CRC), and the one
# measured (the time the whole took less with T-NBC).  Figures only:
# nothing passes or fails on time.
#
# usage: tests/mpi/bench-tnbc.sh [BUILDDIR]   (default: build)
# environment: NPS="2 4", MPIS="openmpi mpich", SIZES="65536 1048576",
#              ITERS=20, OUT=DIR (default ./bench-tnbc-YYYYmmdd-HHMMSS),
#              PLOT=0
# OUT holds results.csv (both runs' rows), model.csv (per scenario:
# predicted and measured overlap, as us and as a share of Tcomm),
# table.txt and bench_tnbc.png.
set -euo pipefail

b=$(cd "${1:-build}" && pwd)
out=${OUT:-$PWD/bench-tnbc-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$b/.libs}
export TNBC_MPI_LIBDIR=$b/mpi-glue/.libs
run=$b/mpi-glue/tnbc-mpirun
csv=$out/results.csv
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
echo "label,mpi,scenario,np,bytes,tcomm_us,t_curc_us,t_crc_us,call_us,total_us" >"$csv"

for mpi in ${MPIS:-openmpi mpich}; do
	bin=$b/tests/mpi/glue-bin/bench_tnbc.$mpi
	[ -x "$bin" ] || { echo "no $bin (make check builds it)"; continue; }
	lopts=()
	[ "$mpi" = openmpi ] && lopts=(--allow-run-as-root --oversubscribe)
	for np in ${NPS:-2 4}; do
		for bytes in ${SIZES:-65536 1048576}; do
			echo "== $mpi np=$np bytes=$bytes" >&2
			args=(--bytes "$bytes" --iters "${ITERS:-20}")
			o=$("$run" "${lopts[@]}" -np "$np" "$bin" "${args[@]}" \
				--calibrate)
			t=$(sed -n 's/^tcomm_us //p' <<<"$o")
			grep -v '^tcomm_us\|^scenario' <<<"$o" |
				sed "s/^/blocking,$mpi,/" >>"$csv"
			TNBC_MPI_TNBC=MPI_Alltoall TNBC_MPI_TNBC_ADAPT=0 \
				"$run" "${lopts[@]}" -np "$np" \
				"$bin" "${args[@]}" --tcomm-us "$t" |
				grep -v '^scenario' | sed "s/^/tnbc,$mpi,/" >>"$csv"
		done
	done
done

"$py" - "$out" "${PLOT:-1}" <<'PY'
import csv, sys, collections
out, plot = sys.argv[1], sys.argv[2] != "0"
rows = list(csv.DictReader(open(out + "/results.csv")))
by = collections.defaultdict(dict)
for r in rows:
    by[(r["mpi"], int(r["np"]), int(r["bytes"]), r["scenario"])][r["label"]] = r
order = ["curc_long", "crc_slow", "crc_fast", "mixed_slow", "mixed_fast"]
res = []
for k in sorted(by, key=lambda k: (k[0], k[1], k[2], order.index(k[3]))):
    v = by[k]
    if "blocking" not in v or "tnbc" not in v:
        continue
    b, t = v["blocking"], v["tnbc"]
    tcomm = float(b["tcomm_us"]); tinit = float(t["call_us"])
    curc = float(b["t_curc_us"]); tcrc = float(b["t_crc_us"])
    # Tcomm * Rcomm / R_CRC is the time reading the data takes, T_CRC
    model = max(0.0, min(tcomm - tinit, curc + tcrc))
    meas = float(b["total_us"]) - float(t["total_us"])
    res.append(k + (tcomm, tinit, curc, tcrc, float(b["total_us"]), float(t["total_us"]), model, meas))
with open(out + "/model.csv", "w") as f, open(out + "/table.txt", "w") as tt:
    f.write("mpi,np,bytes,scenario,tcomm_us,tinit_us,t_curc_us,t_crc_us,total_blocking_us,total_tnbc_us,model_overlap_us,measured_overlap_us,tinit_share,model_share,measured_share\n")
    tt.write("T-NBC, seed 000's scenarios: overlap predicted (model) and measured, us and share of Tcomm\n")
    tt.write("%-8s %2s %8s %-11s %9s %9s %9s %9s %9s %9s %7s %7s %7s\n" % ("mpi", "np", "bytes", "scenario", "Tcomm", "Tinit", "T_CURC", "T_CRC", "model", "measured", "init%", "model%", "meas%"))
    for r in res:
        mpi, np_, by_, sc, tcomm, tinit, curc, tcrc, tb, tn, model, meas = r
        f.write("%s,%d,%d,%s,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.3f,%.3f,%.3f\n" % (mpi, np_, by_, sc, tcomm, tinit, curc, tcrc, tb, tn, model, meas, tinit / tcomm, model / tcomm, meas / tcomm))
        tt.write("%-8s %2d %8d %-11s %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %7.1f %7.1f %7.1f\n" % (mpi, np_, by_, sc, tcomm, tinit, curc, tcrc, model, meas, 100 * tinit / tcomm, 100 * model / tcomm, 100 * meas / tcomm))
print(open(out + "/table.txt").read())
if plot and res:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups = sorted({r[:3] for r in res})
    fig, axes = plt.subplots(1, len(groups), figsize=(4 * len(groups), 4), squeeze=False)
    for ax, g in zip(axes[0], groups):
        rr = [r for r in res if r[:3] == g]
        x = range(len(rr))
        ax.bar([i - 0.2 for i in x], [100 * r[10] / r[4] for r in rr], 0.4, label="model")
        ax.bar([i + 0.2 for i in x], [100 * r[11] / r[4] for r in rr], 0.4, label="measured")
        ax.set_xticks(list(x)); ax.set_xticklabels([r[3] for r in rr], rotation=45, fontsize=7)
        ax.set_title("%s np=%d %d B" % g, fontsize=8)
        ax.set_ylabel("overlap, % of Tcomm")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out + "/bench_tnbc.png", dpi=120)
    print("wrote", out + "/bench_tnbc.png")
PY
echo "results in $out"
