# SPDX-License-Identifier: BSD-2-Clause
"""Medians, ratios, table and plot of alltoall_compare.sh's runs.

usage: python3 alltoall_table.py OUT [PNG]
  OUT  directory holding raw.csv (round,stack,shape,np,bytes,value,unit)
  PNG  the plot's file name in OUT (default alltoall_compare.png; PLOT=0
       in the environment: none)
Writes OUT/table.txt and OUT/results.csv and prints the table: per shape
and slice size, each stack's median completion time over the rounds (us),
each over tnbc-direct's (below 1: faster than the direct exchange), which
of tnbc's algorithms was fastest and the automatic choice over it (1: the
choice was the best), and the seed's two aims side by side: PLP over
direct for slices up to 1 KiB, LSS over the 3-message rendezvous
(tnbc-rndv3) at 32 and 64 KiB.  Figures only.
"""
import csv
import os
import statistics
import sys

out = sys.argv[1]
png = sys.argv[2] if len(sys.argv) > 2 else "alltoall_compare.png"
rows = list(csv.DictReader(open(os.path.join(out, "raw.csv"))))
vals = {}
for r in rows:
    vals.setdefault((r["shape"], int(r["bytes"]), r["stack"]), []).append(float(r["value"]))
med = {k: statistics.median(v) for k, v in vals.items()}
shapes = sorted({k[0] for k in med})
sizes = sorted({k[1] for k in med})
order = ["tnbc-auto", "tnbc-direct", "tnbc-plp", "tnbc-plp1", "tnbc-plp2", "tnbc-plp3", "tnbc-lss",
         "tnbc-rndv3", "rxm-host", "ompi"]
stacks = [s for s in order if any(k[2] == s for k in med)]
stacks += sorted({k[2] for k in med} - set(stacks))
algs = [s for s in ("tnbc-direct", "tnbc-plp", "tnbc-lss") if s in stacks]


def get(shape, b, st):
    return med.get((shape, b, st))


def ratio(a, b):
    return a / b if a and b else None


def fmt(v, w=9, p=2):
    return ("%*.*f" % (w, p, v)) if v is not None else "%*s" % (w, "n/a")


lines = []
res = []
head = "%-5s %8s " % ("shape", "bytes") + " ".join("%11s" % s for s in stacks)
head += "  %-11s %9s %9s %9s" % ("best", "auto/best", "plp/dir", "lss/rndv3")
lines.append("completion time, median of rounds (us); ratios below 1: faster")
lines.append(head)
for sh in shapes:
    for b in sizes:
        line = "%-5s %8d " % (sh, b) + " ".join(fmt(get(sh, b, s), 11) for s in stacks)
        times = {a: get(sh, b, a) for a in algs if get(sh, b, a)}
        best = min(times, key=times.get) if times else None
        ab = ratio(get(sh, b, "tnbc-auto"), times[best]) if best else None
        pd = ratio(get(sh, b, "tnbc-plp"), get(sh, b, "tnbc-direct"))
        lr = ratio(get(sh, b, "tnbc-lss"), get(sh, b, "tnbc-rndv3"))
        line += "  %-11s %9s %9s %9s" % (best or "n/a", fmt(ab), fmt(pd), fmt(lr))
        lines.append(line)
        row = {"shape": sh, "bytes": b, "best": best or "", "auto_over_best": ab or "",
               "plp_over_direct": pd or "", "lss_over_rndv3": lr or ""}
        for s in stacks:
            row[s] = get(sh, b, s) or ""
            row[s + "_over_direct"] = ratio(get(sh, b, s), get(sh, b, "tnbc-direct")) or ""
        res.append(row)
    lines.append("")

# the aims, as figures
lines.append("aims (figures, not verdicts):")
for sh in shapes:
    small = [ratio(get(sh, b, "tnbc-direct"), get(sh, b, "tnbc-plp")) for b in sizes if b <= 1024]
    small = [x for x in small if x]
    if small:
        lines.append("  %s: direct / plp for slices <= 1 KiB: %s (aim >= 1.2 at 3x3)" %
                     (sh, " ".join("%.2f" % x for x in small)))
    big = [ratio(get(sh, b, "tnbc-rndv3"), get(sh, b, "tnbc-lss")) for b in (32768, 65536)]
    if any(big):
        lines.append("  %s: rndv3 / lss at 32, 64 KiB: %s (aim >= 1.2)" %
                     (sh, " ".join(fmt(x, 4) for x in big)))
    ab = [ratio(get(sh, b, "tnbc-auto"), min(v for v in (get(sh, b, a) for a in algs) if v))
          for b in sizes if any(get(sh, b, a) for a in algs)]
    ab = [x for x in ab if x]
    if ab:
        lines.append("  %s: auto / best algorithm, worst size: %.2f" % (sh, max(ab)))
text = "\n".join(lines)
print(text)
open(os.path.join(out, "table.txt"), "w").write(text + "\n")
if res:
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(res[0].keys()))
        w.writeheader()
        w.writerows(res)

if os.environ.get("PLOT", "1") == "0":
    sys.exit(0)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
n = len(shapes)
cols = 2 if n > 1 else 1
rws = (n + cols - 1) // cols
fig, axes = plt.subplots(rws, cols, figsize=(6 * cols, 4.2 * rws), squeeze=False)
for i, sh in enumerate(shapes):
    ax = axes[i // cols][i % cols]
    for s in stacks:
        xs = [b for b in sizes if get(sh, b, s)]
        if xs:
            ax.plot(xs, [get(sh, b, s) for b in xs], marker="o", ms=3, label=s,
                    lw=2 if s == "tnbc-auto" else 1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_title("fi_alltoall, %s (hosts x ranks)" % sh)
    ax.set_xlabel("slice bytes")
    ax.set_ylabel("completion time (us, median)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
for j in range(n, rws * cols):
    axes[j // cols][j % cols].axis("off")
fig.tight_layout()
fig.savefig(os.path.join(out, png), dpi=110)
