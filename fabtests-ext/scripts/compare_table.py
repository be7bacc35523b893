# SPDX-License-Identifier: BSD-2-Clause
"""Medians, ratios, table and plot of a two-stack comparison.

usage: python3 compare_table.py OUT REF TITLE PNG
  OUT    directory holding raw.csv (round,stack,test,np,bytes,value,unit);
         stack is "tnbc", REF, or "floor" (netns_compare.sh's kernel floor,
         ftx_tcp_floor: shown beside the rows it has, with its ratio to REF,
         the lowest ratio a stack that uses TCP sockets could show here)
  REF    the stack tnbc is compared with (e.g. "tcp;ofi_rxm")
  TITLE  the plot's title
  PNG    the plot's file name in OUT (PLOT=0 in the environment: none)
Writes OUT/table.txt and OUT/results.csv and prints the table.  For
latency and allreduce a ratio below 1 means tnbc is faster, for bandwidth
above 1.  "ratio" is the medians' ratio; "paired" the median of each
round's own ratio (the two stacks ran minutes apart at most within a
round, while a shared machine's speed moves between rounds), with the
lowest and highest of those.  Shared by netns_compare.sh,
netns_osu.sh and rxe_compare.sh.
"""
import csv
import os
import statistics
import sys

out, ref, title, png = sys.argv[1:5]
rows = list(csv.DictReader(open(os.path.join(out, "raw.csv"))))
med = {}
by_round = {}
for r in rows:
    key = (r["test"], int(r["np"]), int(r["bytes"]), r["stack"], r["unit"])
    med.setdefault(key, []).append(float(r["value"]))
    by_round[key + (r["round"],)] = float(r["value"])
keys = sorted({k[:3] for k in med})
res = []
has_floor = any(r["stack"] == "floor" for r in rows)
lines = ["%-10s %3s %8s %14s %14s %7s %7s %13s" % ("test", "np", "bytes", "tnbc", ref, "ratio", "paired",
                                                   "range") + ("  %9s %7s" % ("floor", "f/ref") if has_floor else "")]


def fmt(v):
    return "n/a" if v is None else "%.3f" % v


for t, np_, b in keys:
    unit = next(k[4] for k in med if k[:3] == (t, np_, b))
    a = med.get((t, np_, b, "tnbc", unit))
    x = med.get((t, np_, b, ref, unit))
    am = statistics.median(a) if a else None
    xm = statistics.median(x) if x else None
    ratio = am / xm if am and xm else None
    rounds = sorted({k[5] for k in by_round if k[:3] == (t, np_, b)})
    per = [by_round[(t, np_, b, "tnbc", unit, rd)] / by_round[(t, np_, b, ref, unit, rd)]
           for rd in rounds
           if (t, np_, b, "tnbc", unit, rd) in by_round and by_round.get((t, np_, b, ref, unit, rd))]
    paired = statistics.median(per) if per else None
    span = "%.3f-%.3f" % (min(per), max(per)) if per else "n/a"
    f = med.get((t, np_, b, "floor", unit))
    fm = statistics.median(f) if f else None
    fr = fm / xm if fm and xm else None
    res.append((t, np_, b, unit, am, xm, ratio, paired, min(per) if per else None, max(per) if per else None,
                fm, fr))
    lines.append("%-10s %3d %8d %11s %-2s %11s %-2s %7s %7s %13s" % (t, np_, b, fmt(am), "", fmt(xm), "", fmt(ratio),
                                                                   fmt(paired), span) +
                 ("  %9s %7s" % (fmt(fm), fmt(fr)) if has_floor and fm else ""))
lines.append("units: lat and allreduce in us (ratio < 1: tnbc faster), bw in GB/s (ratio > 1: tnbc faster)")
if has_floor:
    lines.append("floor: two processes exchanging the bytes over one TCP socket, no provider (ftx_tcp_floor); "
                 "f/ref: its ratio to " + ref)
open(os.path.join(out, "table.txt"), "w").write("\n".join(lines) + "\n")
with open(os.path.join(out, "results.csv"), "w") as fh:
    w = csv.writer(fh)
    w.writerow(["test", "np", "bytes", "unit", "tnbc", ref.replace(";", "_"), "ratio", "paired_ratio",
                "paired_min", "paired_max", "floor", "floor_ratio"])
    w.writerows(res)
print("\n".join(lines))
if os.environ.get("PLOT", "1") != "0":
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        ok = [r for r in res if r[6]]
        fig, ax = plt.subplots(figsize=(9, 4))
        ax.bar(range(len(ok)), [r[6] for r in ok], label="tnbc / " + ref)
        fl = [(i, r[11]) for i, r in enumerate(ok) if r[11]]
        if fl:
            ax.plot([i for i, _ in fl], [v for _, v in fl], "rv", label="TCP socket floor / " + ref)
            ax.legend(fontsize=7)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(ok)))
        ax.set_xticklabels(["%s\nnp=%d %dB" % (r[0], r[1], r[2]) for r in ok], fontsize=7)
        ax.set_ylabel("tnbc / " + ref)
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(out, png), dpi=120)
    except ImportError:
        print("(no matplotlib: no plot)")
