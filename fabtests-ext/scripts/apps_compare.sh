#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# Real MPI applications over Open MPI on tnbc (pml cm + OFI MTL, provider
# tnbc) beside ob1/vader (pml ob1 + btl self,vader, Open MPI's own shared
# memory), in one invocation: HPC Challenge (hpcc: HPL, PTRANS,
# MPIRandomAccess, MPIFFT, ring and ping-pong latency and bandwidth) with
# 2 ranks (P=1 Q=2) and 4 ranks (P=2 Q=2), and the LAMMPS Lennard-Jones
# melt (lmp, in.lj written here) with 2 and 4 ranks at two sizes: x=10
# (4000 atoms, 2000 steps, communication-heavy) and x=20 (32000 atoms, 200
# steps), its loop time and the Comm row of its timing breakdown.  Every
# round runs every application on both stacks, the stack that goes first
# alternating from round to round; the table shows the median over rounds
# and tnbc_x, tnbc's time over vader's (lower-better figures, us and s:
# tnbc/vader; higher-better figures: vader/tnbc): above 1, tnbc is slower.
# Figures only: nothing passes or fails on time.  Installs the Debian
# packages hpcc, lammps and python3-matplotlib when absent; never
# downloads anything else.
#
# usage: apps_compare.sh
# environment:
#   ROUNDS=3  rounds (each round: every application once on each stack)
#   QUICK=1   smoke test: 1 round, HPCC_N=1000 (unless HPCC_N is set),
#             LAMMPS steps divided by 10
#   OUT=DIR   output directory (default ./apps-compare-YYYYmmdd-HHMMSS)
#   TMO=600   timeout per mpirun, seconds
#   HPCC_N=4000  HPL problem size N of hpcc
#   LMP_STEPS_SCALE=1  multiplies the LAMMPS steps (2000 and 200)
#   YIELD=auto  mpi_yield_when_idle for both stacks: auto leaves it to
#             Open MPI (it yields only when ranks oversubscribe the cores),
#             or 0 or 1
#   BIND=     --bind-to for both stacks (none, core, ...); default: Open
#             MPI's own (core for 2 ranks, numa or socket above)
#   PLOT=0    no PNG (by default python3-matplotlib is installed if absent)
# Uses the tnbc libfabric finds (installed by make install);
# FI_PROVIDER_PATH, when set, is passed to the ranks.
# OUT holds: table.txt (what is printed), results.csv (medians:
# app,np,figure,stack,value,unit), ratio.csv (app,np,figure,unit,tnbc,
# vader,tnbc_x), raw.csv (every round), apps_compare.png, in.lj, env.txt,
# logs/ (each run's stdout and stderr; hpcc's in its own directory with
# hpccinf.txt and hpccoutf.txt; LAMMPS's log).
# Exit status: 0 every run gave figures; 1 a run failed or timed out, hpcc
# reported FAILED (its figures are n/a) or a tnbc run did not run on tnbc
# (stops at once); 2 usage, tools, applications or the tnbc provider not
# found.

set -u

# shellcheck disable=SC2034 # read by compare_lib.sh
cmp_name=apps_compare.sh
# shellcheck source-path=SCRIPTDIR source=compare_lib.sh
. "$(dirname "$0")/compare_lib.sh"

usage() { sed -n '4,45p' "$0" | sed 's/^# \{0,1\}//'; }

case ${1:-} in
-h | --help) usage; exit 0 ;;
'') ;;
*) usage >&2; exit 2 ;;
esac
quick=${QUICK:-0}
rounds=${ROUNDS:-3}
hpcc_n=${HPCC_N:-4000}
lmp_div=1
if [ "$quick" = 1 ]; then
	rounds=1
	hpcc_n=${HPCC_N:-1000}
	lmp_div=10
fi
lmp_scale=${LMP_STEPS_SCALE:-1}
tmo=${TMO:-600}
yield=${YIELD:-auto}
bind=${BIND:-}
plot=${PLOT:-1}
out=${OUT:-./apps-compare-$(date +%Y%m%d-%H%M%S)}

cmp_positive_int ROUNDS "$rounds" || exit 2
cmp_positive_int TMO "$tmo" || exit 2
cmp_positive_int HPCC_N "$hpcc_n" || exit 2

if ! [[ $lmp_scale =~ ^[0-9]*\.?[0-9]+$ ]] ||
	! awk -v s="$lmp_scale" 'BEGIN { exit !(s > 0) }'; then
	echo "apps_compare.sh: LMP_STEPS_SCALE must be a positive number" >&2
	exit 2
fi

for t in mpirun fi_info timeout awk; do
	command -v "$t" >/dev/null ||
		{ echo "apps_compare.sh: $t not found (run scripts/deps.sh)" >&2; exit 2; }
done
if ! env -u FI_PROVIDER fi_info -p tnbc >/dev/null 2>&1; then
	echo "apps_compare.sh: libfabric does not find the tnbc provider;" \
		"run make install in the build directory (or set" \
		"FI_PROVIDER_PATH)" >&2
	exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# The applications: hpcc and lmp, Debian's (built against Debian's Open
# MPI).  hpcc's example input is its documentation; where dpkg leaves
# /usr/share/doc out, the same file (hpcc 1.5.0) is written from here.
hpcc_bin=$(command -v hpcc || echo /usr/bin/hpcc)
lmp_bin=$(command -v lmp || echo /usr/bin/lmp)
pkgs=()
[ -x "$hpcc_bin" ] || pkgs+=(hpcc)
[ -x "$lmp_bin" ] || pkgs+=(lammps)
if [ "${#pkgs[@]}" -gt 0 ]; then
	echo "# apps_compare: installing ${pkgs[*]}" >&2
	if ! cmp_apt_install "${pkgs[@]}"; then
		tail -5 "$tmp/apt" >&2
		echo "apps_compare.sh: could not install ${pkgs[*]} (Debian packages)" >&2
		exit 2
	fi
	hpcc_bin=$(command -v hpcc || echo /usr/bin/hpcc)
	lmp_bin=$(command -v lmp || echo /usr/bin/lmp)
fi
for b in "$hpcc_bin" "$lmp_bin"; do
	[ -x "$b" ] || { echo "apps_compare.sh: $b not found" >&2; exit 2; }
done

hpcc_src=
for f in /usr/share/doc/hpcc/examples/_hpccinf.txt \
	/usr/share/doc/hpcc/examples/_hpccinf.txt.gz; do
	if [ -r "$f" ]; then
		hpcc_src=$f
		zcat -f "$f" >"$tmp/hpccinf.in" || exit 2
		break
	fi
done
if [ -z "$hpcc_src" ]; then
	hpcc_src="(the copy in apps_compare.sh; no /usr/share/doc/hpcc/examples)"
	cat >"$tmp/hpccinf.in" <<'EOF'
HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
1000         Ns
1            # of NBs
80           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
2            Ps
2            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                      		Number of additional problem sizes for PTRANS
1200 10000 30000        	values of N
0                       	number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64       	values of NB
EOF
fi
# lines 6, 11 and 12: one N, one P and one Q (replaced for each run)
if ! awk 'NR == 5 && $1 != 1 { bad = 1 } NR == 10 && $1 != 1 { bad = 1 }
	NR == 6 && $2 != "Ns" { bad = 1 } NR == 11 && $2 != "Ps" { bad = 1 }
	NR == 12 && $2 != "Qs" { bad = 1 } END { exit bad || NR < 12 }' \
	"$tmp/hpccinf.in"; then
	echo "apps_compare.sh: $hpcc_src: not the expected HPL input" \
		"(one N on line 6, one P and one Q on lines 11 and 12)" >&2
	exit 2
fi

mkdir -p "$out/logs" || exit 2
out=$(cd "$out" && pwd)

# The LAMMPS Lennard-Jones melt (LAMMPS's bench/in.lj); x and s are set
# on the command line.
cat >"$out/in.lj" <<'EOF'
variable	x index 10
variable	s index 500
units		lj
atom_style	atomic
lattice		fcc 0.8442
region		box block 0 $x 0 $x 0 $x
create_box	1 box
create_atoms	1 box
mass		1 1.0
velocity	all create 1.44 87287 loop geom
pair_style	lj/cut 2.5
pair_coeff	1 1 1.0 1.0 2.5
neighbor	0.3 bin
neigh_modify	delay 0 every 20 check no
fix		1 all nve
thermo		100
run		$s
EOF

lmp_steps() {
	awk -v s="$1" -v k="$lmp_scale" -v d="$lmp_div" \
		'BEGIN { n = int(s * k / d + 0.5); print n < 1 ? 1 : n }'
}

# The tests, one mpirun each: "hpcc NP P Q" or "lammps NP X STEPS".
tests=(
	"hpcc 2 1 2"
	"hpcc 4 2 2"
	"lammps 2 10 $(lmp_steps 2000)"
	"lammps 2 20 $(lmp_steps 200)"
	"lammps 4 10 $(lmp_steps 2000)"
	"lammps 4 20 $(lmp_steps 200)"
)

# hpcc's figures (hpccoutf.txt's summary, key=value) and their units;
# us and s are lower-better, the others higher-better.
hpcc_figs=(
	"HPL_Tflops Tflop/s"
	"PTRANS_GBs GB/s"
	"MPIRandomAccess_GUPs GUP/s"
	"MPIFFT_Gflops Gflop/s"
	"RandomlyOrderedRingLatency_usec us"
	"RandomlyOrderedRingBandwidth_GBytes GB/s"
	"NaturallyOrderedRingLatency_usec us"
	"MaxPingPongLatency_usec us"
	"MaxPingPongBandwidth_GBytes GB/s"
)

# figures_of IDX: the figures test IDX gives, "fidx figure unit" a line
figures_of() {
	local app np a3 a4 i f
	read -r app np a3 a4 <<<"${tests[$1]}"
	case $app in
	hpcc)
		for i in "${!hpcc_figs[@]}"; do
			echo "$i ${hpcc_figs[$i]}"
		done
		;;
	lammps)
		f=lj$((4 * a3 * a3 * a3))
		echo "0 ${f}_loop s"
		echo "1 ${f}_comm s"
		;;
	esac
}

# Both stacks get the same launch options, Open MPI's defaults unless
# BIND or YIELD say otherwise (cmp_stack_opts adds each stack's own).
common=(--allow-run-as-root --oversubscribe)
[ -n "$bind" ] && common+=(--bind-to "$bind")
[ "$yield" != auto ] && common+=(--mca mpi_yield_when_idle "$yield")

lib0=$(cmp_lib_sum)
echo "# apps_compare: $rounds round(s); hpcc N=$hpcc_n; LAMMPS steps" \
	"$(lmp_steps 2000) (x=10) and $(lmp_steps 200) (x=20);" \
	"mpi_yield_when_idle $yield; bind ${bind:-default};" \
	"FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-(unset)}; output in $out" >&2
{
	echo "date: $(date -Is)"
	echo "host: $(uname -n), $(nproc) cpus, $(uname -r)"
	echo "open mpi: $(mpirun --version 2>/dev/null | head -n 1)"
	echo "libfabric: $(fi_info --version 2>/dev/null | tr '\n' ' ')"
	echo "tnbc: $(cmp_lib_sum)"
	echo "hpcc: $hpcc_bin, $(dpkg-query -W -f '${Version}' hpcc 2>/dev/null ||
		echo 'version unknown'); input from $hpcc_src; N=$hpcc_n"
	echo "lammps: $lmp_bin, $(dpkg-query -W -f '${Version}' lammps 2>/dev/null ||
		echo 'version unknown'); steps $(lmp_steps 2000) (x=10)," \
		"$(lmp_steps 200) (x=20); LMP_STEPS_SCALE=$lmp_scale"
	echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "rounds: $rounds; quick: $quick; yield: $yield; bind: ${bind:-default}; timeout: $tmo"
} >"$out/env.txt"

# Every figure expected, "idx,fidx,app,np,figure,unit": the table shows
# n/a for those that no run gave.
: >"$tmp/expect"
for i in "${!tests[@]}"; do
	read -r app np _ <<<"${tests[$i]}"
	figures_of "$i" | while read -r fx f u; do
		echo "$i,$fx,$app,$np,$f,$u"
	done >>"$tmp/expect"
done

failed=0
# run_one IDX ROUND STACK: one mpirun, figures appended to $tmp/raw as
# "idx,fidx,app,np,figure,stack,round,value,unit".
# shellcheck disable=SC2317 # called by cmp_rounds
run_one() {
	local idx=$1 round=$2 stack=$3 app np a3 a4 log dir desc rc t0 bad
	local -a opts cmd
	read -r app np a3 a4 <<<"${tests[$idx]}"
	cmp_stack_opts "$stack"
	case $app in
	hpcc)
		log=$out/logs/hpcc.np$np.$stack.r$round
		desc="hpcc -np $np (N=$hpcc_n, P=$a3 Q=$a4)"
		# hpcc reads hpccinf.txt from, and writes hpccoutf.txt to, its
		# working directory: one for each run
		dir=$log.d
		rm -rf "$dir"
		mkdir -p "$dir" || exit 2
		awk -v n="$hpcc_n" -v p="$a3" -v q="$a4" '
			NR == 6 { $0 = sprintf("%-12s Ns", n) }
			NR == 11 { $0 = sprintf("%-12s Ps", p) }
			NR == 12 { $0 = sprintf("%-12s Qs", q) }
			{ print }' "$tmp/hpccinf.in" >"$dir/hpccinf.txt"
		cmd=("$hpcc_bin")
		;;
	lammps)
		log=$out/logs/lammps.np$np.x$a3.$stack.r$round
		desc="lmp -np $np (in.lj x=$a3, $((4 * a3 * a3 * a3)) atoms, $a4 steps)"
		dir=$tmp
		cmd=("$lmp_bin" -in "$out/in.lj" -var x "$a3" -var s "$a4"
			-log "$log.log" -screen none)
		;;
	esac
	t0=$(date +%s)
	(cd "$dir" && timeout -k 10 "$tmo" env -u FI_PROVIDER mpirun \
		"${common[@]}" "${opts[@]}" -np "$np" "${cmd[@]}" \
		>"$log.out" 2>"$log.err" </dev/null)
	rc=$?
	echo "# round $round/$rounds: $desc on $stack: exit $rc," \
		"$(($(date +%s) - t0)) s" >&2
	[ "$stack" = tnbc ] && cmp_check_tnbc "$app -np $np" "$np" "$rc" "$log.err"
	cmp_stderr_note "$log.err"
	if [ "$rc" -ne 0 ]; then
		[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "#   timed out after $tmo s" >&2
		failed=$((failed + 1))
		return 0
	fi

	# The figures, "fidx value" a line, in $tmp/fig; bad: why none count.
	bad=
	case $app in
	hpcc)
		if [ ! -s "$dir/hpccoutf.txt" ]; then
			bad="no $dir/hpccoutf.txt"
		elif grep -q FAILED "$dir/hpccoutf.txt"; then
			bad="hpcc reports FAILED: $(grep -m 1 FAILED "$dir/hpccoutf.txt" |
				tr -s ' ')"
		else
			figures_of "$idx" | awk -v f="$dir/hpccoutf.txt" '
				{ want[$2] = $1; name[$1] = $2; n++ }
				END {
					while ((getline l < f) > 0) {
						split(l, kv, "=")
						if ((kv[1] in want) && kv[2] ~ /^[0-9.eE+-]+$/)
							val[want[kv[1]]] = kv[2]
					}
					for (i = 0; i < n; i++) {
						if (i in val)
							print i, val[i]
						else
							miss = miss " " name[i]
					}
					if (miss != "")
						print "missing in hpccoutf.txt:" miss > "/dev/stderr"
				}' >"$tmp/fig" 2>"$tmp/miss"
			[ -s "$tmp/miss" ] && bad=$(cat "$tmp/miss")
		fi
		;;
	lammps)
		# "Loop time of T on N procs for S steps with A atoms", and the
		# Comm row of "Section | min time | avg time | max time | ..."
		awk -v np="$np" -v s="$a4" -v at="$((4 * a3 * a3 * a3))" -F'|' '
			/^Loop time of / {
				split($0, w, " ")
				t = w[4]
				if (w[6] != np || w[9] != s || w[12] != at)
					err = "unexpected: " $0
			}
			$1 ~ /^Comm *$/ { c = $3; gsub(/ /, "", c) }
			END {
				if (err != "")
					print err > "/dev/stderr"
				else if (t == "" || c == "")
					print "no Loop time or Comm row" > "/dev/stderr"
				else {
					print 0, t
					print 1, c
				}
			}' "$log.log" >"$tmp/fig" 2>"$tmp/miss"
		[ -s "$tmp/miss" ] && bad="$(cat "$tmp/miss") in $log.log"
		;;
	esac
	if [ -n "$bad" ]; then
		echo "#   $bad" >&2
		failed=$((failed + 1))
		return 0
	fi
	figures_of "$idx" | awk -v pre="$idx" -v app="$app" -v np="$np" \
		-v st="$stack" -v r="$round" '
		NR == FNR { v[$1] = $2; next }
		($1 in v) {
			printf "%s,%s,%s,%s,%s,%s,%s,%s,%s\n", pre, $1, app, np, $2,
				st, r, v[$1], $3
		}' "$tmp/fig" - >>"$tmp/raw"
	return 0
}

: >"$tmp/raw"
cmp_rounds "$rounds" "${#tests[@]}" run_one

cmp_end "$out/env.txt" "$lib0"

# Medians over rounds (the mean of the middle two for an even count).
echo "app,np,figure,stack,round,value,unit" >"$out/raw.csv"
cut -d, -f3- "$tmp/raw" >>"$out/raw.csv"
sort -t, -k1,1n -k2,2n -k6,6 -k8,8g "$tmp/raw" | cmp_medians 6 >"$tmp/med"
echo "app,np,figure,stack,value,unit" >"$out/results.csv"
cut -d, -f3- "$tmp/med" >>"$out/results.csv"

# One row per application, ranks and figure; tnbc_x: tnbc's time over
# vader's (us and s are lower-better, every other unit higher-better).
awk -F, '
NR == FNR {
	k = $1 SUBSEP $2
	keys[++nk] = k; app[k] = $3; np[k] = $4; fig[k] = $5; unit[k] = $6
	next
}
{ val[$1, $2, $6] = $7 }
END {
	for (i = 1; i <= nk; i++) {
		k = keys[i]
		t = ((k, "tnbc") in val) ? val[k, "tnbc"] : "n/a"
		v = ((k, "vader") in val) ? val[k, "vader"] : "n/a"
		x = "n/a"
		if (t != "n/a" && v != "n/a" && t + 0 > 0 && v + 0 > 0)
			x = sprintf("%.2f", (unit[k] == "us" || unit[k] == "s") ? t / v : v / t)
		printf "%s,%s,%s,%s,%s,%s,%s\n", app[k], np[k], fig[k], unit[k], t, v, x
	}
}' "$tmp/expect" "$tmp/med" >"$tmp/ratio"
echo "app,np,figure,unit,tnbc,vader,tnbc_x" >"$out/ratio.csv"
cat "$tmp/ratio" >>"$out/ratio.csv"

cmp_table "$tmp/ratio" "$rounds" "%-6s %3s %-36s %-7s %11s %11s %7s\n" \
	"us, s: tnbc/vader; others: vader/tnbc" 14 \
	app np figure unit tnbc vader tnbc_x | tee "$out/table.txt"

# The plot: matplotlib, installed from Debian when absent.
py=
[ "$plot" = 1 ] && ! cmp_plot_python && plot=0
if [ "$plot" = 1 ]; then
	MPLBACKEND=Agg "$py" - "$out" "$rounds" <<'EOF' ||
import csv, sys
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, NullFormatter

out, rounds = sys.argv[1], sys.argv[2]
rows = {}
with open(out + "/ratio.csv") as f:
    for r in csv.DictReader(f):
        rows.setdefault(r["app"], []).append(r)
colour = {2: "tab:blue", 4: "tab:orange", 8: "tab:green"}
fig, axes = plt.subplots(len(rows), 1, squeeze=False,
                         figsize=(12, 4.5 * len(rows)))
for ax, (app, rs) in zip(axes.flat, rows.items()):
    figs = list(dict.fromkeys(r["figure"] for r in rs))
    nps = sorted({int(r["np"]) for r in rs})
    width = 0.8 / len(nps)
    lo, hi = 1.0, 1.0
    labelled = set()
    for j, np in enumerate(nps):
        for i, name in enumerate(figs):
            r = [r for r in rs if r["figure"] == name and int(r["np"]) == np]
            if not r:
                continue
            pos = i - 0.4 + width * (j + 0.5)
            if r[0]["tnbc_x"] == "n/a":
                ax.text(pos, 1.0, "n/a", ha="center", va="bottom",
                        fontsize=7, rotation=90)
                continue
            x = float(r[0]["tnbc_x"])
            lo, hi = min(lo, x), max(hi, x)
            # bars start at 1.0: up, tnbc slower; down, tnbc faster
            ax.bar(pos, x - 1.0, width, bottom=1.0,
                   color=colour.get(np, "tab:gray"),
                   label=None if np in labelled else "%d ranks" % np)
            labelled.add(np)
            ax.text(pos, x, "%.2f" % x, ha="center",
                    va="bottom" if x >= 1 else "top", fontsize=7)
    ax.axhline(1.0, color="k", linewidth=1)
    ax.set_yscale("log", base=2)
    ax.set_ylim(lo / 1.4, hi * 1.4)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: "%g" % y))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(range(len(figs)))
    ax.set_xticklabels(["%s (%s)" % (n, next(r["unit"] for r in rs
                                             if r["figure"] == n))
                        for n in figs], rotation=25, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(figs) - 0.4)
    ax.set_title(app)
    ax.set_ylabel("tnbc_x (> 1: tnbc slower)")
    ax.grid(True, axis="y", which="both", alpha=0.4)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, fontsize=8)
fig.suptitle("MPI applications over Open MPI: tnbc (pml cm + OFI MTL) vs "
             "ob1/vader, tnbc time / vader time, median of %s round(s)"
             % rounds)
fig.tight_layout()
fig.savefig(out + "/apps_compare.png", dpi=100)
EOF
		echo "# apps_compare: the plot failed" >&2
fi

cmp_exit "$out" apps_compare.png "$failed"
