#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# Real programs, unchanged, with the MPI glue and without it, side by
# side in one run: the OSU micro-benchmarks' collectives and NPB IS and
# FT, at 2 and 4 ranks on this host and at 2 hosts x 2 ranks over TCP
# between namespace hosts (tests/netns-lib.sh; root only).  Each program
# runs under the MPI alone (mpi) and at once through tnbc-mpirun with
# the glue's default policy (glue), then under the MPI alone again
# (mpi-again, the yardstick: CONTROL=0 leaves it out); TNBC_ALL=1 adds a
# run with every blocking call offloaded (glue-all); TNBC=1 adds, for NPB,
# a run with T-NBC at every call (tnbc: TNBC_MPI_TNBC=all
# TNBC_MPI_TNBC_ADAPT=0, tnbc-mpi(7)), one with T-NBC tried against the
# plain way at each call site and kept where it paid (tnbc-adapt: the
# default TNBC_MPI_TNBC_ADAPT), beside one with
# the glue's plain offload (glue-all), all reporting the time spent in
# MPI_Alltoall(v)/MPI_Bcast calls and, for tnbc, the waits for data after
# them (NPB rows: compute_us holds the calls' ms, pure_us the waits' ms,
# every rank summed); LINK=1 adds beside it the same with the host's link
# unshared (tnbc-nolink: FI_TNBC_LINK_SHARE=0, fi_tnbc(7)).  ROUNDS runs
# of each, the
# best figure of each kept.  Figures only: nothing passes or fails on
# time; an NPB run that does not verify, or a program that fails, is
# reported as such.
#
# The programs are not part of tnbc: build them by hand from their
# public sources and name the directories that hold the binaries.
#
# usage: tests/mpi/bench-apps.sh [--osu-openmpi DIR] [--osu-mpich DIR]
#            [--npb-openmpi DIR] [--npb-mpich DIR] [BUILDDIR]
#   --osu-*  a directory with osu_allreduce, osu_reduce, osu_bcast,
#            osu_barrier, osu_allgather, osu_alltoall, osu_iallreduce,
#            osu_ibcast and osu_ialltoall (those present are run)
#   --npb-*  NPB's bin directory (is.A.x, ft.A.x, ...)
# environment: WHERE="np2 np4 netns" (netns: 2 hosts x 2 ranks),
#   OSU_ARGS="-m 1:1048576 -i 2000 -x 200", OSU_ARGS_SLOW="-m
#   1:1048576 -i 20 -x 2" (MPICH at 4 ranks, netns), NPB="is.A ft.A",
#   ROUNDS=2,
#   NETNS_MPICH=0 (MPICH's own runs there hang in MPI_Finalize),
#   CONTROL=1, TNBC_ALL=0, TNBC=0, LINK=0, OUT=DIR (default ./bench-apps-YYYYmmdd-HHMMSS), PLOT=1,
#   TABLES_ONLY=1 (tables and plot again from OUT/results.csv)
# OUT holds results.csv (every run's every row), table.txt (the side by
# side tables and the aims) and bench_apps.png.
set -uo pipefail

declare -A osu npb
bdir=build
while [ $# -gt 0 ]; do
	case $1 in
	--osu-openmpi | --osu-mpich) osu[${1#--osu-}]=$(cd "$2" && pwd) && shift ;;
	--npb-openmpi | --npb-mpich) npb[${1#--npb-}]=$(cd "$2" && pwd) && shift ;;
	-h | --help) sed -n '3,31p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) bdir=$1 ;;
	esac
	shift
done
b=$(cd "$bdir" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$PWD/bench-apps-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$b/.libs}
export TNBC_MPI_LIBDIR=$b/mpi-glue/.libs
csv=$out/results.csv
log=$out/runs.log
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
osu_progs="allreduce reduce bcast barrier allgather alltoall iallreduce ibcast ialltoall"
# mpi-again: the MPI alone once more, after the glue: how far two runs of
# the same thing differ is the yardstick for the glue's ratio
labels="mpi glue mpi-again"
[ "${CONTROL:-1}" = 0 ] && labels="mpi glue"
[ "${TNBC_ALL:-0}" = 1 ] && labels="$labels glue-all"
npb_labels=$labels
[ "${TNBC:-0}" = 1 ] && npb_labels="$labels glue-all tnbc tnbc-adapt" &&
	npb_labels=$(tr ' ' '\n' <<<"$npb_labels" | awk '!seen[$0]++' | tr '\n' ' ')
[ "${TNBC:-0}" = 1 ] && [ "${LINK:-0}" = 1 ] && npb_labels="$npb_labels tnbc-nolink"

netns_up=0
work=$(mktemp -d)
cleanup() {
	[ $netns_up = 1 ] && netns_cleanup
	rm -rf "$work"
}
trap cleanup EXIT

# one launch: $1 mpi, $2 where, $3 label, then the program and its args
launch() {
	local mpi=$1 where=$2 label=$3
	shift 3
	local np=${where#np} pre=() cmd=() opts=()
	[ "$where" = netns ] && np=4
	if [ "$mpi" = openmpi ]; then
		opts=(--allow-run-as-root --oversubscribe)
		# shellcheck disable=SC2054
		# two slots a host: Open MPI does not see the 2 cores shared by
		# 4 ranks, and its ranks would poll without yielding
		[ "$where" = netns ] && opts+=(--mca plm_rsh_agent "$work/rsh"
			--mca mpi_yield_when_idle 1
			--mca oob_tcp_if_include 10.231.0.0/24
			--mca btl_tcp_if_include 10.231.0.0/24
			-H 10.231.0.1:2,10.231.0.2:2)
		cmd=(mpirun.openmpi)
	else
		# shellcheck disable=SC2054
		[ "$where" = netns ] && opts=(-launcher rsh -launcher-exec "$work/rsh"
			-hosts 10.231.0.1:2,10.231.0.2:2)
		cmd=(mpirun.mpich)
	fi
	case $label in glue* | tnbc*) cmd=("$b/mpi-glue/tnbc-mpirun") ;; esac
	[ "$label" = glue-all ] && pre=(env TNBC_MPI_OFFLOAD=all
		TNBC_MPI_REPORT=1)
	[ "$label" = tnbc ] && pre=(env TNBC_MPI_OFFLOAD=all TNBC_MPI_TNBC=all
		TNBC_MPI_TNBC_ADAPT=0 TNBC_MPI_REPORT=1)
	[ "$label" = tnbc-adapt ] && pre=(env TNBC_MPI_OFFLOAD=all
		TNBC_MPI_TNBC=all TNBC_MPI_REPORT=1)
	[ "$label" = tnbc-nolink ] && pre=(env TNBC_MPI_OFFLOAD=all
		TNBC_MPI_TNBC=all TNBC_MPI_TNBC_ADAPT=0 TNBC_MPI_REPORT=1
		FI_TNBC_LINK_SHARE=0)
	[ "$where" = netns ] && pre=(nsenter -t "${HOSTPID[1]}" -n -u env
		PATH="$PATH" UCX_NET_DEVICES=eth0 "${pre[@]:1}")
	echo "== $mpi $where $label: $*" >>"$log"
	timeout 600 "${pre[@]}" "${cmd[@]}" "${opts[@]}" -np "$np" "$@" \
		2> >(tee "$work/last.err" >>"$log")
}

# MPICH's ranks poll without yielding: at 4 ranks on 2 cores each of
# its own collectives takes milliseconds (a scheduler's time slice), so
# there OSU's default iterations would take an hour; across namespace
# hosts TCP's latency and the shared cores make it as slow
osu_args() {
	if [ "$2" = netns ] || { [ "$1" = mpich ] && [ "$2" != np2 ]; }; then
		echo "${OSU_ARGS_SLOW:--m 1:1048576 -i 20 -x 2}"
	else
		echo "${OSU_ARGS:--m 1:1048576 -i 2000 -x 200}"
	fi
}

run_osu() {
	local mpi=$1 where=$2 round=$3 p label kind
	for p in $osu_progs; do
		[ -x "${osu[$mpi]}/osu_$p" ] || continue
		kind=blocking
		case $p in i*) kind=overlap ;; esac
		for label in $labels; do
			echo "   osu_$p $label" >&2
			# shellcheck disable=SC2046
			launch "$mpi" "$where" "$label" "${osu[$mpi]}/osu_$p" \
				$(osu_args "$mpi" "$where") | tee -a "$log" |
				awk -v pre="$mpi,$where,$round,osu_$p,$label,$kind" \
					'/^ *[0-9]/ { if (NF >= 5) print pre "," $1 "," $2 "," $3 "," $4 "," $5 ",";
					else if (NF == 1) print pre ",0," $1 ",,,,";
					else print pre "," $1 "," $2 ",,,,"; n++ }
					END { if (!n) print pre ",,,,,,FAILED" }' >>"$csv"
		done
	done
}

run_npb() {
	local mpi=$1 where=$2 round=$3 p label
	for p in ${NPB:-is.A ft.A}; do
		[ -x "${npb[$mpi]}/$p.x" ] || continue
		for label in $npb_labels; do
			echo "   $p $label" >&2
			: >"$work/last.err"
			# NPB reads its optional input file from the working directory
			(cd "$work" && launch "$mpi" "$where" "$label" "${npb[$mpi]}/$p.x") |
				tee -a "$log" >"$work/last.out"
			sleep 0.2 # the stderr tee's last lines
			# the report's time in the calls T-NBC takes, and the
			# waits for their data after they returned
			call=$(grep -o 'MPI_\(Alltoall\|Alltoallv\|Bcast\) .*call_ms [0-9.]*' \
				"$work/last.err" | awk '{ s += $NF } END { if (NR) print s }')
			wait=$(grep -o 'tnbc_wait_ms [0-9.]*' "$work/last.err" |
				awk '{ s += $NF } END { if (NR) print s }')
			awk -v pre="$mpi,$where,$round,npb_$p,$label,npb" \
				-v call="$call" -v wait="$wait" \
				'/Time in seconds/ { t = $NF }
				/Verification/ { v = $NF }
				END { print pre ",," t "," call "," wait ",," (v ? v : "FAILED") }' \
				"$work/last.out" >>"$csv"
		done
	done
}

if [ "${TABLES_ONLY:-0}" != 1 ]; then
	echo "mpi,where,round,bench,label,kind,bytes,us,compute_us,pure_us,overlap_pct,status" >"$csv"
	: >"$log"
	for where in ${WHERE:-np2 np4 netns}; do
		if [ "$where" = netns ]; then
			# shellcheck source=../netns-lib.sh
			. "$src/tests/netns-lib.sh"
			netns_up=1
			netns_setup 2 "$work/rsh" PATH="$PATH" \
				FI_PROVIDER_PATH="$FI_PROVIDER_PATH" \
				UCX_NET_DEVICES=eth0 || continue
		fi
		for round in $(seq "${ROUNDS:-2}"); do
			for mpi in openmpi mpich; do
				[ -n "${osu[$mpi]:-}${npb[$mpi]:-}" ] || continue
				# MPICH 4.0's own runs across namespace hosts hang in
				# MPI_Finalize (ch4:ucx over TCP, one rank spinning)
				[ "$where" = netns ] && [ "$mpi" = mpich ] &&
					[ "${NETNS_MPICH:-0}" != 1 ] && continue
				echo "== $mpi $where round $round" >&2
				[ -n "${osu[$mpi]:-}" ] && run_osu "$mpi" "$where" "$round"
				[ -n "${npb[$mpi]:-}" ] && run_npb "$mpi" "$where" "$round"
			done
		done
	done
fi

"$py" - "$out" "${PLOT:-1}" <<'PY'
import csv, sys, collections
out, plot = sys.argv[1], sys.argv[2] != "0"
rows = list(csv.DictReader(open(out + "/results.csv")))
best = collections.defaultdict(dict)    # (mpi, where, bench, bytes) -> label -> row
failed = []
for r in rows:
    if r["status"] == "FAILED":
        failed.append("%s %s %s %s round %s" % (r["mpi"], r["where"], r["bench"], r["label"], r["round"]))
        continue
    key = (r["mpi"], r["where"], r["bench"], r["kind"], int(r["bytes"] or 0))
    have = best[key].get(r["label"])
    t = float(r["us"])
    # best of the rounds: least time; the overlap of the least overall
    if have is None or t < float(have["us"]):
        best[key][r["label"]] = r
labels = ["mpi", "glue", "glue-all"]
t = open(out + "/table.txt", "w")
def say(s=""):
    t.write(s + "\n")
say("blocking OSU: us per call, best of the rounds; x = over the MPI alone;")
say("again = the MPI alone run again over its first run (the noise)")
say("%-8s %-6s %-14s %8s %9s %9s %6s %6s %9s %6s" % ("mpi", "where", "bench", "bytes", "mpi", "glue", "x", "again", "glue-all", "x-all"))
worst, above, nblk, ratios, noisy = None, [], 0, [], []
for k in sorted(best):
    if k[3] != "blocking":
        continue
    v = best[k]
    if "mpi" not in v or "glue" not in v:
        continue
    m, g = float(v["mpi"]["us"]), float(v["glue"]["us"])
    a = float(v["glue-all"]["us"]) if "glue-all" in v else None
    x = g / m if m > 0 else 1.0
    c = float(v["mpi-again"]["us"]) / m if "mpi-again" in v and m > 0 else None
    nblk += 1
    ratios.append(x)
    if x > 1.10:
        above.append((x, k, c))
    if c is not None and (c > 1.10 or c < 1 / 1.10):
        noisy.append(k)
    if worst is None or x > worst[0]:
        worst = (x, k)
    say("%-8s %-6s %-14s %8d %9.2f %9.2f %6.2f %6s %9s %6s" % (k[0], k[1], k[2], k[4], m, g, x,
        "%.2f" % c if c is not None else "",
        "%.2f" % a if a else "", "%.2f" % (a / m) if a and m > 0 else ""))
say()
say("non-blocking OSU (its busy compute phase): overlap %, best overall of the rounds")
say("%-8s %-6s %-14s %8s %8s %8s %9s %9s" % ("mpi", "where", "bench", "bytes", "mpi%", "glue%", "pure-mpi", "pure-glue"))
ovl = collections.defaultdict(list)
for k in sorted(best):
    if k[3] != "overlap":
        continue
    v = best[k]
    if "mpi" not in v or "glue" not in v:
        continue
    om, og = float(v["mpi"]["overlap_pct"]), float(v["glue"]["overlap_pct"])
    ovl[(k[0], k[1], k[2])].append((k[4], om, og))
    say("%-8s %-6s %-14s %8d %8.1f %8.1f %9.2f %9.2f" % (k[0], k[1], k[2], k[4], om, og,
        float(v["mpi"]["pure_us"]), float(v["glue"]["pure_us"])))
say()
say("NPB: seconds, best of the rounds, and verification")
say("%-8s %-6s %-10s %9s %9s %6s %s" % ("mpi", "where", "bench", "mpi", "glue", "x", "verified (mpi/glue)"))
npb = []
for k in sorted(best):
    if k[3] != "npb":
        continue
    v = best[k]
    if "mpi" not in v or "glue" not in v:
        continue
    m, g = float(v["mpi"]["us"]), float(v["glue"]["us"])
    npb.append((k, m, g))
    say("%-8s %-6s %-10s %9.2f %9.2f %6.2f %s/%s" % (k[0], k[1], k[2][4:], m, g, g / m,
        v["mpi"]["status"], v["glue"]["status"]))
say()
tn = [(k, best[k]) for k in sorted(best) if k[3] == "npb" and "tnbc" in best[k] and "glue-all" in best[k]]
if tn:
    say("NPB with T-NBC (tnbc) beside the glue's plain offload (glue-all): seconds; the time in")
    say("MPI_Alltoall(v)/Bcast calls (ms, every rank summed) and T-NBC's as a share of the")
    say("plain one's; hidden = 1 - (T-NBC's calls + waits for data after them) / plain calls;")
    say("adapt: T-NBC tried at each call site and kept where it paid (tnbc-adapt), x its time")
    say("over plain")
    say("%-8s %-6s %-10s %8s %8s %8s %5s %9s %9s %8s %6s %7s %8s %5s %s" % ("mpi", "where", "bench", "mpi", "plain", "tnbc", "x", "call", "tcall", "wait", "share", "hidden", "adapt", "x", "verified (mpi/plain/tnbc/adapt)"))
    for k, v in tn:
        p, q = v["glue-all"], v["tnbc"]
        a = v.get("tnbc-adapt")
        m = float(v["mpi"]["us"]) if "mpi" in v else 0
        pc = float(p["compute_us"] or 0); tc = float(q["compute_us"] or 0); w = float(q["pure_us"] or 0)
        say("%-8s %-6s %-10s %8.2f %8.2f %8.2f %5.2f %9.1f %9.1f %8.1f %6.2f %7.2f %8.2f %5.2f %s/%s/%s/%s" % (k[0], k[1], k[2][4:],
            m, float(p["us"]), float(q["us"]), float(q["us"]) / float(p["us"]), pc, tc, w,
            tc / pc if pc else 0, 1 - (tc + w) / pc if pc else 0,
            float(a["us"]) if a else 0, float(a["us"]) / float(p["us"]) if a else 0,
            v["mpi"]["status"] if "mpi" in v else "-", p["status"], q["status"],
            a["status"] if a else "-"))
    say()
tl = [(k, best[k]) for k in sorted(best) if k[3] == "npb" and "tnbc" in best[k] and "tnbc-nolink" in best[k]]
if tl:
    say("NPB with T-NBC, the host's link shared by priority (tnbc) and not (tnbc-nolink,")
    say("FI_TNBC_LINK_SHARE=0): seconds, and the waits for data after the calls (ms, summed)")
    say("%-8s %-6s %-10s %8s %8s %6s %9s %9s %s" % ("mpi", "where", "bench", "shared", "not", "x", "wait", "wait-not", "verified"))
    for k, v in tl:
        p, q = v["tnbc"], v["tnbc-nolink"]
        say("%-8s %-6s %-10s %8.2f %8.2f %6.2f %9.1f %9.1f %s/%s" % (k[0], k[1], k[2][4:],
            float(p["us"]), float(q["us"]), float(p["us"]) / float(q["us"]),
            float(p["pure_us"] or 0), float(q["pure_us"] or 0), p["status"], q["status"]))
    say()
say("aims")
if nblk:
    ratios.sort()
    say("  blocking, glue over the MPI alone: %d sizes, median %.2f, worst %.2f (%s); %d above 1.10" %
        (nblk, ratios[len(ratios) // 2], worst[0], " ".join(map(str, worst[1][:3] + (worst[1][4],))), len(above)))
    say("  the MPI alone against itself: %d of those sizes differ by more than 10 %%" % len(noisy))
    for x, k, c in sorted(above, key=lambda e: e[0], reverse=True)[:12]:
        say("    %.2f  %s %s %s %d B%s" % (x, k[0], k[1], k[2], k[4],
            "  (again: %.2f)" % c if c is not None else ""))
for s, pts in sorted(ovl.items()):
    g = sorted(p[2] for p in pts)
    m = sorted(p[1] for p in pts)
    say("  overlap %s %s %s: glue %.0f-%.0f %% (median %.0f), mpi %.0f-%.0f %% (median %.0f)" %
        (s + (g[0], g[-1], g[len(g) // 2], m[0], m[-1], m[len(m) // 2])))
for f in failed:
    say("  FAILED: " + f)
t.close()
print(open(out + "/table.txt").read())
if plot:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(18, 5.5))
    series = collections.defaultdict(list)
    for k in sorted(best):
        v = best[k]
        if k[3] == "blocking" and "mpi" in v and "glue" in v and float(v["mpi"]["us"]) > 0:
            series[k[:3]].append((k[4] or 1, float(v["glue"]["us"]) / float(v["mpi"]["us"])))
    for s, pts in sorted(series.items()):
        ax[0].plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label="%s %s %s" % s)
    ax[0].axhline(1.0, color="k", lw=0.8)
    ax[0].axhline(1.1, color="r", lw=0.8, ls=":")
    ax[0].set_xscale("log", base=2); ax[0].set_yscale("log")
    ax[0].set_xlabel("bytes"); ax[0].set_ylabel("glue / MPI alone (lower: glue faster)")
    ax[0].set_title("OSU blocking collectives, default policy")
    ax[0].legend(fontsize=4, ncol=2)
    for s, pts in sorted(ovl.items()):
        l = ax[1].plot([p[0] for p in pts], [p[2] for p in pts], marker=".", label="glue %s %s %s" % s)
        ax[1].plot([p[0] for p in pts], [p[1] for p in pts], ls=":", color=l[0].get_color(),
                   label="mpi %s %s %s" % s)
    ax[1].set_xscale("log", base=2); ax[1].set_ylim(-2, 102)
    ax[1].set_xlabel("bytes"); ax[1].set_ylabel("overlap % (OSU, busy compute)")
    ax[1].set_title("OSU non-blocking collectives")
    ax[1].legend(fontsize=4, ncol=2)
    names = ["%s\n%s\n%s" % (k[0], k[1], k[2][4:]) for k, m, g in npb]
    xs = range(len(npb))
    ax[2].bar([x - 0.2 for x in xs], [m for k, m, g in npb], 0.4, label="mpi")
    ax[2].bar([x + 0.2 for x in xs], [g for k, m, g in npb], 0.4, label="glue")
    ax[2].set_xticks(list(xs)); ax[2].set_xticklabels(names, fontsize=5)
    ax[2].set_ylabel("seconds (NPB's own timer)"); ax[2].set_title("NPB IS and FT")
    ax[2].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out + "/bench_apps.png", dpi=120)
    print("wrote", out + "/bench_apps.png")
PY
echo "results in $out"
