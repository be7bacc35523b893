#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
#
# SEMI (sensitivity to send/receive mismatch, seed paper 003) side by side:
# ftx_bench_semi on several libfabric providers and tests/mpi/bench_semi
# on several Open MPI stacks, all with the same parameters, then one table:
# per stack and message size the SEMI slope (its floor is 1/inner), the
# receive time with no injected computation and its ratio to Open MPI
# ob1/vader's.  A stack that cannot run shows n/a.
#
# usage: semi_compare.sh [-b BINDIR] [-M MPIBINDIR] [-L LIBDIR] [-q] [-y]
#                        [-k] [-t SEC] [-p PROVS] [-s STACKS] [-a ARGS]
#   -b BINDIR     where ftx_bench_semi is (default: found nearby)
#   -M MPIBINDIR  where bench_semi is (default: tests/mpi/bin, else BINDIR)
#   -L LIBDIR     directory with libtnbc-fi.so, exported as FI_PROVIDER_PATH
#                 (default: $FI_PROVIDER_PATH, else ../../build/.libs from
#                 here when it has one, else libfabric's own directory)
#   -q            quick: -o 5 -r 1 -T 4 (under a minute in all)
#   -y            poll with sched_yield (ftx -y, mpi_yield_when_idle 1)
#   -k            keep and show each run's raw output
#   -t SEC        timeout per run (default 300)
#   -p PROVS      ftx providers (default "tnbc tcp sockets shm")
#   -s STACKS     MPI stacks (default "tnbc vader ofi-tcp"):
#                   tnbc     pml cm + OFI MTL on tnbc
#                   vader    pml ob1 + btl self,vader (the reference)
#                   ofi-tcp  pml cm + OFI MTL on tcp;ofi_rxm
#   -a ARGS       more options for both programs, e.g. "-m 4000 -u 100"
#                 (-o -i -w -m -u -L -r -T; see ftx_bench_semi -h)

set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bindir=${FTX_BINDIR:-}
mpibindir=
libdir=${FI_PROVIDER_PATH:-}
quick=0
yield=0
keep=0
tmo=300
provs="tnbc tcp sockets shm"
stacks="tnbc vader ofi-tcp"
extra=
while getopts b:M:L:qykt:p:s:a:h opt; do
	case $opt in
	b) bindir=$OPTARG ;;
	M) mpibindir=$OPTARG ;;
	L) libdir=$OPTARG ;;
	q) quick=1 ;;
	y) yield=1 ;;
	k) keep=1 ;;
	t) tmo=$OPTARG ;;
	p) provs=$OPTARG ;;
	s) stacks=$OPTARG ;;
	a) extra=$OPTARG ;;
	*) sed -n '3,29p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

if [ -z "$bindir" ]; then
	for d in "$here/../build" "$here/.." "./fabtests-ext" "$top/build" .; do
		if [ -x "$d/ftx_bench_semi" ]; then
			bindir=$d
			break
		fi
	done
fi
if [ -z "$mpibindir" ]; then
	for d in "$top/tests/mpi/bin" "$top/build/tests/mpi/bin" "$bindir"; do
		if [ -n "$d" ] && [ -x "$d/bench_semi" ]; then
			mpibindir=$d
			break
		fi
	done
fi
if [ -n "$provs" ] && { [ -z "$bindir" ] || [ ! -x "$bindir/ftx_bench_semi" ]; }; then
	echo "semi_compare.sh: ftx_bench_semi not found; use -b BINDIR" >&2
	exit 2
fi
if [ -n "$stacks" ] && { [ -z "$mpibindir" ] || [ ! -x "$mpibindir/bench_semi" ]; }; then
	echo "semi_compare.sh: bench_semi not found; use -M MPIBINDIR" >&2
	exit 2
fi
if [ -z "$libdir" ] && [ -e "$top/build/.libs/libtnbc-fi.so" ]; then
	libdir=$top/build/.libs
fi
if [ -n "$libdir" ]; then
	FI_PROVIDER_PATH=$libdir
	export FI_PROVIDER_PATH
fi

args="-t $tmo"
[ "$quick" = 1 ] && args="$args -o 5 -r 1 -T 4"
[ -n "$extra" ] && args="$args $extra"
ftx_args=$args
[ "$yield" = 1 ] && ftx_args="$ftx_args -y"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

ywhat="busy polling"
[ "$yield" = 1 ] && ywhat="polling with sched_yield"
echo "# semi_compare: FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-(unset)};" \
	"options: $args; $ywhat" >&2

# Lines "NAME semi ..." (the program's machine-readable lines) into rows.
collect() {
	name=$1 out=$2
	if ! grep -q '^semi ' "$out"; then
		echo "$name - n/a" >>"$tmp/rows"
		return
	fi
	grep '^semi ' "$out" | sed "s/^/$name /" >>"$tmp/rows"
}

report_failure() {
	name=$1 out=$2 rc=$3
	if [ "$rc" -ne 0 ] || ! grep -q '^semi ' "$out"; then
		why=$(grep -m 1 -E '^FAIL|^SKIP|bench_semi:|rror' "$out")
		[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && why="timed out; $why"
		echo "# $name: exit status $rc${why:+: $why}" >&2
	fi
}

# ftx: FI_PROVIDER would hide every provider but one from libfabric.
for p in $provs; do
	echo "# running ftx_bench_semi -p $p ..." >&2
	out=$tmp/ftx.$p
	# shellcheck disable=SC2086 # word splitting of the options is wanted
	timeout -k 10 $((tmo + 30)) env -u FI_PROVIDER \
		"$bindir/ftx_bench_semi" -p "$p" $ftx_args >"$out" 2>&1
	rc=$?
	report_failure "ftx:$p" "$out" "$rc"
	[ "$keep" = 1 ] && cat "$out" >&2
	collect "ftx:$p" "$out"
done

# MPI: the same options as scripts/mpirun-tnbc.sh and
# tests/mpi/run-mpi-tests.sh: Debian's /etc/openmpi/openmpi-mca-params.conf
# sets "mtl = ^ofi", which "--mca mtl ofi" overrides; --bind-to none lets a
# provider's progress thread run on any core.
for st in $stacks; do
	echo "# running bench_semi over Open MPI $st ..." >&2
	out=$tmp/mpi.$st
	expect=
	case $st in
	tnbc)
		expect=tnbc
		set -- --mca pml cm --mca mtl ofi --mca btl self \
			--mca mtl_ofi_provider_include tnbc
		[ -n "${FI_PROVIDER_PATH:-}" ] && set -- "$@" -x FI_PROVIDER_PATH
		;;
	vader)
		set -- --mca pml ob1 --mca btl self,vader
		;;
	ofi-tcp)
		expect=tcp
		set -- --mca pml cm --mca mtl ofi --mca btl self \
			--mca mtl_ofi_provider_include "tcp;ofi_rxm"
		;;
	*)
		echo "# unknown MPI stack '$st' (tnbc, vader, ofi-tcp)" >&2
		echo "mpi:$st - n/a" >>"$tmp/rows"
		continue
		;;
	esac
	[ -n "$expect" ] && set -- "$@" --mca opal_common_ofi_verbose 1
	# shellcheck disable=SC2086 # word splitting of the options is wanted
	timeout -k 10 $((tmo + 30)) env -u FI_PROVIDER mpirun \
		--allow-run-as-root --oversubscribe --bind-to none \
		--mca mpi_yield_when_idle "$yield" "$@" -np 2 \
		"$mpibindir/bench_semi" -l "mpi:$st" $args >"$out" 2>&1
	rc=$?
	report_failure "mpi:$st" "$out" "$rc"
	if [ -n "$expect" ]; then
		# the OFI MTL names its provider once per rank
		got=$(grep -o 'mtl:ofi:prov: .*' "$out" | sed 's/^mtl:ofi:prov: //' |
			sort -u | paste -sd, -)
		case $got in
		"$expect" | "$expect;"*) ;;
		*)
			echo "# mpi:$st: OFI MTL selected '${got:-nothing}'," \
				"not $expect: figures dropped" >&2
			sed -i '/^semi /d' "$out"
			;;
		esac
	fi
	[ "$keep" = 1 ] && cat "$out" >&2
	collect "mpi:$st" "$out"
done

# One row per stack and size.  The ratio compares the receive time per
# message at level 0 with mpi:vader's for the same size (the outer count
# may differ between stacks when a slow one ran out of its time budget).
awk '
function kv(s,   i, n, a, b) {
	delete f
	n = split(s, a, " ")
	for (i = 3; i <= n; i++)
		if (split(a[i], b, "=") == 2)
			f[b[1]] = b[2]
}
{
	row[NR] = $0
	if ($1 == "mpi:vader" && $2 == "semi") {
		kv($0)
		base[f["m"]] = f["recv0_msg_us"]
	}
}
END {
	printf "%-12s %6s %5s %8s %6s %10s %10s %8s %6s\n", "stack", "m", \
		"outer", "slope", "/floor", "recv0_ms", "recv0/msg", "/ob1", \
		"comp_x"
	for (r = 1; r <= NR; r++) {
		split(row[r], a, " ")
		if (a[2] != "semi") {
			printf "%-12s %6s %5s %8s %6s %10s %10s %8s %6s\n", \
				a[1], "-", "-", "n/a", "n/a", "n/a", "n/a", \
				"n/a", "n/a"
			continue
		}
		kv(row[r])
		xf = "n/a"
		if (f["slope"] != "n/a" && f["floor"] + 0 > 0)
			xf = sprintf("%.1f", f["slope"] / f["floor"])
		ratio = "n/a"
		if ((f["m"] in base) && base[f["m"]] + 0 > 0)
			ratio = sprintf("%.3g", f["recv0_msg_us"] / base[f["m"]])
		printf "%-12s %6s %5s %8s %6s %10.2f %10.3f %8s %6s\n", \
			a[1], f["m"], f["outer"], f["slope"], xf, \
			f["recv0_us"] / 1000, f["recv0_msg_us"], ratio, \
			("comp_x" in f) ? f["comp_x"] : "n/a"
	}
	printf "# slope: d(receive time)/d(computation time), ideal (floor) " \
		"1/inner; /floor: slope over floor\n"
	printf "# recv0: receive time per rank with no injected " \
		"computation (ms in all, us per message); /ob1: per message, " \
		"over mpi:vader\n"
	printf "# comp_x: computation time over its calibrated time; " \
		"well above 1, the CPU was shared and the row is noisy\n"
	for (r = 1; r <= NR; r++) {
		split(row[r], a, " ")
		if (a[2] != "semi" || (a[1] != "mpi:tnbc" && a[1] != "ftx:tnbc"))
			continue
		kv(row[r])
		if (!(f["m"] in base) || base[f["m"]] + 0 <= 0)
			continue
		line[f["m"]] = line[f["m"]] sprintf(" %s %.3gx", a[1], \
			f["recv0_msg_us"] / base[f["m"]])
		if (!(f["m"] in seen)) {
			seen[f["m"]] = 1
			order[++nm] = f["m"]
		}
	}
	for (k = 1; k <= nm; k++)
		printf "# tnbc / ob1-vader receive time at zero mismatch, " \
			"m=%s:%s\n", order[k], line[order[k]]
}' "$tmp/rows"
