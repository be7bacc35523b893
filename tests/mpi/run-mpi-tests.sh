#!/usr/bin/env bash
#
# Run the MPI test programs under Open MPI 4.1 at several rank counts.
#
# Usage: run-mpi-tests.sh -m MODE [-d DIR] [-n "2 3 4 5 8"] [-p "PROGS"]
#                         [-t SECONDS] [-l LOGDIR]
#
#   -m MODE  tnbc     pml cm + OFI MTL on the tnbc provider (btl self only)
#            vader    pml ob1 + btl self,vader (reference, no libfabric)
#            ofi-tcp  pml cm + OFI MTL on libfabric's tcp;ofi_rxm
#            ofi-shm  pml cm + OFI MTL on libfabric's shm
#   -d DIR   directory with the built programs (default: bin/ next to
#            this script, where build.sh puts them)
#   -n LIST  rank counts (default "2 3 4 5 8")
#   -p LIST  programs (default: all six)
#   -t SEC   timeout per mpirun (default 120); each rank also arms a
#            watchdog 15 s earlier that names the phase it was stuck in
#   -l DIR   keep the per-run logs there (default: a temporary directory,
#            removed when everything passed)
#
# tnbc mode: FI_PROVIDER_PATH, when set, is forwarded to every rank (-x)
# and must contain libtnbc-fi.so; otherwise libfabric's default provider
# directory is used.  A run only passes when
#   - mpirun exits 0 and the program printed "<prog>: PASS (np=N)";
#   - every rank's OFI MTL reported the provider it selected
#     ("mtl:ofi:prov: <name>", printed because of opal_common_ofi_verbose)
#     and that provider is tnbc (for ofi-tcp / ofi-shm: tcp / shm);
#   - in tnbc mode, every rank found libtnbc-fi.so loaded in its own
#     process (MPITEST_REQUIRE_LIB, checked by the programs after MPI_Init;
#     with FI_PROVIDER_PATH it must be the file from that directory).
#
# The last line is "N passed, N failed"; the exit status is non-zero if
# anything failed (or nothing ran).

set -u

here=$(cd "$(dirname "$0")" && pwd)
mode=
dir=$here/bin
nps="2 3 4 5 8"
progs="tnbc_main_job mpi_p2p mpi_probe mpi_ssend mpi_nonblocking mpi_coll"
tmo=120
logdir=

usage() {
	sed -n '3,20p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while getopts "m:d:n:p:t:l:h" opt; do
	case $opt in
	m) mode=$OPTARG ;;
	d) dir=$OPTARG ;;
	n) nps=$OPTARG ;;
	p) progs=$OPTARG ;;
	t) tmo=$OPTARG ;;
	l) logdir=$OPTARG ;;
	*) usage ;;
	esac
done
[ -n "$mode" ] || usage

# --allow-run-as-root: CI runs as root.  --oversubscribe/--bind-to none:
# up to 8 ranks on a 2-core host (binding would also pin a provider's
# progress thread to its rank's core).  mpi_yield_when_idle: ranks waiting
# for a message call sched_yield(), which on an oversubscribed host makes
# the suite several times faster.
mpirun_args=(--allow-run-as-root --oversubscribe --bind-to none
	--mca mpi_yield_when_idle 1)
# Debian's /etc/openmpi/openmpi-mca-params.conf sets "mtl = ^ofi" and
# "btl = ^uct,openib,ofi"; "--mca mtl ofi" on the command line overrides
# the exclusion.  opal_common_ofi_verbose 1 makes the OFI MTL print the
# provider it selected, one line per rank.
ofi_args=(--mca pml cm --mca mtl ofi --mca btl self
	--mca opal_common_ofi_verbose 1)
expect_prov=
prog_env=()
main_job_args=()

case $mode in
vader)
	# shellcheck disable=SC2054 # the comma is part of the value
	mpirun_args+=(--mca pml ob1 --mca btl self,vader)
	;;
tnbc)
	expect_prov=tnbc
	mpirun_args+=("${ofi_args[@]}" --mca mtl_ofi_provider_include tnbc)
	lib=libtnbc-fi.so
	if [ -n "${FI_PROVIDER_PATH:-}" ]; then
		# Require the library from FI_PROVIDER_PATH, not another copy.
		IFS=: read -r -a pdirs <<<"$FI_PROVIDER_PATH"
		lib=
		for d in "${pdirs[@]}"; do
			if [ -e "$d/libtnbc-fi.so" ]; then
				lib=$(readlink -f "$d/libtnbc-fi.so")
				break
			fi
		done
		if [ -z "$lib" ]; then
			echo "error: no libtnbc-fi.so in FI_PROVIDER_PATH=$FI_PROVIDER_PATH" >&2
			lib=/nonexistent/libtnbc-fi.so
		fi
		mpirun_args+=(-x FI_PROVIDER_PATH)
	fi
	prog_env+=(MPITEST_REQUIRE_LIB="$lib")
	main_job_args=(--require-tnbc)
	;;
ofi-tcp)
	expect_prov=tcp
	mpirun_args+=("${ofi_args[@]}" --mca mtl_ofi_provider_include tcp)
	# Work around two libfabric 1.17 tcp;ofi_rxm bugs the tests hit:
	# with dynamic receive buffers (default) a truncated receive breaks
	# the connection and hangs; without them, MPI_Mrecv of an
	# MPI_Mprobe-claimed message sent with rxm's SAR protocol hangs.
	prog_env+=(FI_OFI_RXM_ENABLE_DYN_RBUF=0 FI_OFI_RXM_SAR_LIMIT=0)
	;;
ofi-shm)
	expect_prov=shm
	mpirun_args+=("${ofi_args[@]}" --mca mtl_ofi_provider_include shm)
	;;
*)
	echo "error: unknown mode '$mode'" >&2
	usage
	;;
esac

# Forward MPITEST_VERBOSE (phase trace on rank 0) if the user set it.
[ -n "${MPITEST_VERBOSE:-}" ] && prog_env+=(MPITEST_VERBOSE="$MPITEST_VERBOSE")
prog_env+=(MPITEST_TIMEOUT=$((tmo > 30 ? tmo - 15 : tmo)))
for kv in "${prog_env[@]}"; do
	export "${kv?}"
	mpirun_args+=(-x "${kv%%=*}")
done

command -v mpirun >/dev/null || {
	echo "error: mpirun not found" >&2
	exit 2
}
command -v timeout >/dev/null || {
	echo "error: timeout (coreutils) not found" >&2
	exit 2
}

keep_logs=1
if [ -z "$logdir" ]; then
	logdir=$(mktemp -d "${TMPDIR:-/tmp}/mpi-tests.XXXXXX")
	keep_logs=0
fi
mkdir -p "$logdir"

echo "mode $mode: mpirun ${mpirun_args[*]} -np N PROGRAM"
[ -n "${FI_PROVIDER_PATH:-}" ] && echo "FI_PROVIDER_PATH=$FI_PROVIDER_PATH"

# Check the "mtl:ofi:prov: NAME" lines: one per rank, all naming the
# expected provider (possibly layered, e.g. "tcp;ofi_rxm").
check_provider() {
	local log=$1 np=$2 n bad
	n=$(grep -c 'mtl:ofi:prov: ' "$log")
	if [ "$n" -ne "$np" ]; then
		echo "expected $np 'mtl:ofi:prov:' lines (one per rank), found $n: cannot verify that $expect_prov was selected"
		return 1
	fi
	bad=$(grep -o 'mtl:ofi:prov: .*' "$log" | sed 's/^mtl:ofi:prov: //' |
		awk -F';' -v p="$expect_prov" '$1 != p' | sort -u | paste -sd, -)
	if [ -n "$bad" ]; then
		echo "OFI MTL selected provider(s) '$bad', expected $expect_prov"
		return 1
	fi
	return 0
}

pass=0
fail=0
for prog in $progs; do
	for np in $nps; do
		exe=$dir/$prog
		log=$logdir/$prog.np$np.log
		args=()
		[ "$prog" = tnbc_main_job ] && args=("${main_job_args[@]}")
		if [ ! -x "$exe" ]; then
			echo "FAIL  $prog np=$np: $exe not found (build it first)"
			fail=$((fail + 1))
			continue
		fi
		t0=$(date +%s.%N)
		timeout -k 10 "$tmo" mpirun "${mpirun_args[@]}" -np "$np" \
			"$exe" "${args[@]}" >"$log" 2>&1
		rc=$?
		el=$(awk -v a="$t0" -v b="$(date +%s.%N)" \
			'BEGIN { printf "%.1f", b - a }')
		why=
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			why="timed out after $tmo s"
		elif [ "$rc" -ne 0 ]; then
			why="exit status $rc"
		elif ! grep -q "^$prog: PASS (np=$np)" "$log"; then
			why="no '$prog: PASS (np=$np)' line"
		elif [ -n "$expect_prov" ]; then
			why=$(check_provider "$log" "$np")
		fi
		if [ -z "$why" ]; then
			echo "PASS  $prog np=$np (${el} s)"
			pass=$((pass + 1))
			if [ "$prog" = tnbc_main_job ] && [ "$np" -eq 4 ]; then
				sed -n '/^==== tnbc main job report/,/^=====/p' "$log"
			fi
			continue
		fi
		fail=$((fail + 1))
		echo "FAIL  $prog np=$np (${el} s): $why"
		grep -m 3 ': FAIL' "$log" | sed 's/^/      /'
		echo "      --- last lines of $log:"
		tail -n 12 "$log" | sed 's/^/      | /'
		keep_logs=1
		if [ "$mode" = ofi-shm ] && grep -q 'PML cm cannot be selected' "$log"; then
			echo "      (libfabric 1.17 shm does not offer the FI_LOCAL_COMM|FI_REMOTE_COMM caps that Open MPI 4.1's OFI MTL requests)"
		fi
	done
done

if [ "$keep_logs" -eq 1 ]; then
	echo "logs: $logdir"
else
	rm -rf "$logdir"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
