#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# What a collective costs the glue and the provider per call, counted in
# instructions (callgrind), not timed: bench_glue -k N at 2 ranks under
# each MPI the glue was built for, every collective offloaded, and per
# call on each rank the inclusive count of the 8-byte MPI_Allreduce, of
# the MPI_Iallreduce post and of the MPI_Wait after it (the wait polls,
# so its count moves with how long the peer took).  Given a second build
# directory (OTHER, for example one of an older commit), both are counted
# in one run and the ratios OTHER/BUILDDIR printed beside them.
# Figures only: nothing passes or fails.
#
# usage: tests/mpi/cost-glue.sh [BUILDDIR [OTHER]]   (default: build)
# environment: N=4000 calls, MPIS="openmpi mpich", OUT=DIR (default
#              ./cost-glue-YYYYmmdd-HHMMSS), PLOT=0 to skip the PNG
# OUT holds cost.csv and cost-glue.png.
set -euo pipefail

command -v valgrind >/dev/null ||
	{ echo "cost-glue.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
builds=("$(cd "${1:-build}" && pwd)")
[ $# -ge 2 ] && builds+=("$(cd "$2" && pwd)")
n=${N:-4000}
out=${OUT:-$PWD/cost-glue-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
csv=$out/cost.csv
echo "build,mpi,rank,call,instructions" >"$csv"
toggles=(--toggle-collect=MPI_Allreduce --toggle-collect=MPI_Iallreduce
	--toggle-collect=MPI_Wait --toggle-collect=PMPI_Wait)

for b in "${builds[@]}"; do
	for mpi in ${MPIS:-openmpi mpich}; do
		bin=${builds[0]}/tests/mpi/glue-bin/bench_glue.$mpi
		[ -x "$bin" ] || { echo "no $bin (make check builds it)" >&2; continue; }
		tmp=$(mktemp -d)
		(
			cd "$tmp"
			export FI_PROVIDER_PATH=$b/.libs TNBC_MPI_LIBDIR=$b/mpi-glue/.libs
			lopts=()
			[ "$mpi" = openmpi ] && lopts=(--allow-run-as-root --oversubscribe)
			TNBC_MPI_OFFLOAD=all "$b/mpi-glue/tnbc-mpirun" --mpi="$mpi" "${lopts[@]}" \
				-np 2 valgrind --tool=callgrind "${toggles[@]}" \
				--callgrind-out-file="$tmp/cg.%p" "$bin" -k "$n" \
				>/dev/null 2>"$tmp/err" ||
				{ cat "$tmp/err" >&2; exit 1; }
		)
		r=0
		for f in "$tmp"/cg.*; do
			# inclusive counts; Open MPI names the wait PMPI_Wait
			callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
				awk -v n="$n" -v b="$b" -v m="$mpi" -v r="$r" '
				$0 ~ /:(MPI_Allreduce|MPI_Iallreduce|P?MPI_Wait) / {
					c = $0; sub(/ \[.*/, "", c); sub(/.*:/, "", c)
					sub(/^PMPI_/, "MPI_", c)
					v = $1; gsub(",", "", v)
					if (!(c in seen)) printf "%s,%s,%s,%s,%.0f\n", b, m, r, c, v / n
					seen[c] = 1
				}' >>"$csv"
			r=$((r + 1))
		done
		rm -rf "$tmp"
	done
done

py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" - "$csv" "$out" "${PLOT:-1}" "${builds[@]}" <<'PY'
import csv, sys, collections
path, out, plot, builds = sys.argv[1], sys.argv[2], sys.argv[3] != "0", sys.argv[4:]
v = collections.defaultdict(list)
for r in csv.DictReader(open(path)):
    v[(r["mpi"], r["call"], r["build"])].append(float(r["instructions"]))
keys = sorted({(m, c) for m, c, _ in v})
head = "%-8s %-15s" % ("mpi", "call") + "".join(" %22s" % b[-22:] for b in builds)
print("instructions per call, rank 0 / rank 1")
print(head + ("  ratio" if len(builds) > 1 else ""))
for m, c in keys:
    cells, mean = [], []
    for b in builds:
        x = v.get((m, c, b), [])
        cells.append(" %22s" % " / ".join("%.0f" % y for y in x))
        mean.append(sum(x) / len(x) if x else 0)
    ratio = "  %.2f" % (mean[1] / mean[0]) if len(builds) > 1 and mean[0] else ""
    print("%-8s %-15s" % (m, c) + "".join(cells) + ratio)
if plot:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: no plot", file=sys.stderr)
        sys.exit(0)
    fig, ax = plt.subplots(figsize=(8, 4))
    w = 0.8 / len(builds)
    for i, b in enumerate(builds):
        ys = [sum(v.get((m, c, b), [0])) / max(1, len(v.get((m, c, b), [0])))
              for m, c in keys]
        ax.bar([k + i * w for k in range(len(keys))], ys, w, label=b[-30:])
    ax.set_xticks([k + w * (len(builds) - 1) / 2 for k in range(len(keys))])
    ax.set_xticklabels(["%s\n%s" % (m, c) for m, c in keys], fontsize=7)
    ax.set_ylabel("instructions per call (mean of 2 ranks)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out + "/cost-glue.png", dpi=120)
PY
echo "cost-glue.sh: $out" >&2
