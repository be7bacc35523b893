#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
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
#          one-sided (RMA) modes, all with osc rdma:
#            tnbc-osc     pml ob1 + btl self,ofi on tnbc (btl_ofi_mode 2:
#                         the OFI BTL carries point-to-point and RMA)
#            tnbc-osc-cm  pml cm + OFI MTL on tnbc, RMA over btl self,ofi
#                         on tnbc (btl_ofi_mode 0: one-sided only)
#            ofi-shm-osc  like tnbc-osc, on libfabric's shm
#            vader-osc    pml ob1 + btl self,vader (reference)
#   -d DIR   directory with the built programs (default: bin/ next to
#            this script, where build.sh puts them)
#   -n LIST  rank counts (default "2 3 4 5 8")
#   -p LIST  programs (default: all six but mpi_osc; in the osc modes
#            mpi_osc, with the OFI BTL also mpi_osc+noamo: mpi_osc run
#            with --mca osc_rdma_acc_use_amo 0)
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
# In the OFI BTL modes (tnbc-osc, tnbc-osc-cm, ofi-shm-osc) also only when
#   - every rank's btl/ofi initialized ("select: init of component ofi
#     returned success", btl_base_verbose) with its provider include list
#     set to the expected provider ('btl:ofi:provider_include = "P"',
#     opal_common_ofi_verbose);
#   - libfabric opened fabrics of the expected provider only, at least
#     one per rank ("Opened fabric: P"; FI_LOG_LEVEL=info is set for this
#     unless FI_LOG_LEVEL is already set: with warn the check is skipped);
#   - the program found exactly the BTL components self,ofi (vader-osc:
#     self,vader) and the osc component rdma loaded in its process
#     (MPITEST_OSC_BTLS / MPITEST_OSC_OSCS, checked after MPI_Init and
#     after each window creation).  Open MPI unloads components that were
#     not selected and btl/self has no atomics, so every window was made
#     by osc/rdma over btl/ofi: there is nothing to fall back to.
# The lines above are looked for in each rank's own output (mpirun
# --output-filename, LOG.ranks beside each log), not in mpirun's merged
# copy, where a line a rank writes in pieces can be cut by another's.
#
# The last line is "N passed, N failed"; the exit status is non-zero if
# anything failed (or nothing ran).

set -u

here=$(cd "$(dirname "$0")" && pwd)
mode=
dir=$here/bin
nps="2 3 4 5 8"
progs=
tmo=120
logdir=

usage() {
	sed -n '3,29p' "$0" | sed 's/^# \{0,1\}//' >&2
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
# OFI BTL modes: the provider btl/ofi must use ("" = no BTL checks)
btl_prov=
# programs of the one-sided modes
osc_progs="mpi_osc"
# btl/ofi for RMA.  btl_base_verbose 10 prints "select: init of component
# ofi returned success/failure", opal_common_ofi_verbose 1 its include
# list.
# shellcheck disable=SC2054 # the comma is part of the value
btl_ofi_args=(--mca btl self,ofi --mca osc rdma --mca btl_base_verbose 10
	--mca opal_common_ofi_verbose 1)

# tnbc modes: forward FI_PROVIDER_PATH and require libtnbc-fi.so from it.
require_tnbc_lib() {
	local lib=libtnbc-fi.so d
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
}

case $mode in
vader)
	# shellcheck disable=SC2054 # the comma is part of the value
	mpirun_args+=(--mca pml ob1 --mca btl self,vader)
	;;
tnbc)
	expect_prov=tnbc
	mpirun_args+=("${ofi_args[@]}" --mca mtl_ofi_provider_include tnbc)
	require_tnbc_lib
	main_job_args=(--require-tnbc)
	;;
vader-osc)
	# shellcheck disable=SC2054 # the commas are part of the values
	mpirun_args+=(--mca pml ob1 --mca btl self,vader --mca osc rdma)
	# shellcheck disable=SC2054
	prog_env+=(MPITEST_OSC_BTLS=self,vader MPITEST_OSC_OSCS=rdma)
	;;
tnbc-osc | ofi-shm-osc)
	# pml ob1 needs a BTL that sends: btl_ofi_mode 2 makes btl/ofi do
	# both (then it requires FI_MSG as well as FI_RMA | FI_ATOMIC).
	btl_prov=tnbc
	[ "$mode" = ofi-shm-osc ] && btl_prov=shm
	mpirun_args+=(--mca pml ob1 "${btl_ofi_args[@]}" --mca btl_ofi_mode 2
		--mca btl_ofi_provider_include "$btl_prov")
	[ "$btl_prov" = tnbc ] && require_tnbc_lib
	osc_progs="mpi_osc mpi_osc+noamo"
	;;
tnbc-osc-cm)
	# point-to-point over the OFI MTL, RMA over btl/ofi (one-sided only);
	# the MTL and the BTL share one provider include list.
	expect_prov=tnbc
	btl_prov=tnbc
	mpirun_args+=(--mca pml cm --mca mtl ofi "${btl_ofi_args[@]}"
		--mca btl_ofi_mode 0 --mca opal_common_ofi_provider_include tnbc)
	require_tnbc_lib
	osc_progs="mpi_osc mpi_osc+noamo"
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

case $mode in
*-osc | *-osc-*)
	if [ -n "$btl_prov" ]; then
		# shellcheck disable=SC2054 # the comma is part of the value
		prog_env+=(MPITEST_OSC_BTLS=ofi,self MPITEST_OSC_OSCS=rdma)
		# for "Opened fabric: NAME" (libfabric core, info level)
		if [ -z "${FI_LOG_LEVEL:-}" ]; then
			prog_env+=(FI_LOG_LEVEL=info)
		elif [ "${FI_LOG_LEVEL,,}" = warn ]; then
			echo "note: FI_LOG_LEVEL=warn: the fabrics libfabric opens are not checked"
		else
			mpirun_args+=(-x FI_LOG_LEVEL)
		fi
	fi
	[ -n "$progs" ] || progs=$osc_progs
	;;
*)
	[ -n "$progs" ] ||
		progs="tnbc_main_job mpi_p2p mpi_probe mpi_ssend mpi_nonblocking mpi_coll"
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

# What the ranks of the run that wrote $1 printed, each rank's output
# whole (see the top); the merged log where there is no copy.
rank_output() {
	if [ -d "$1.ranks" ]; then
		find "$1.ranks" -type f -path '*/rank.*' -exec cat {} +
	else
		cat "$1"
	fi
}

# How many ranks printed a line that holds $1 (fixed string).
ranks_with() {
	local pat=$1 log=$2 d
	if [ ! -d "$log.ranks" ]; then
		grep -c -F -- "$pat" "$log"
		return
	fi
	for d in "$log".ranks/*/rank.*; do
		cat "$d"/* 2>/dev/null | grep -q -F -- "$pat" && echo
	done | wc -l
}

# Check the "mtl:ofi:prov: NAME" lines: one per rank, all naming the
# expected provider (possibly layered, e.g. "tcp;ofi_rxm").
check_provider() {
	local log=$1 np=$2 n bad
	n=$(ranks_with 'mtl:ofi:prov: ' "$log")
	if [ "$n" -ne "$np" ]; then
		echo "expected an 'mtl:ofi:prov:' line from each of $np ranks, found $n: cannot verify that $expect_prov was selected"
		return 1
	fi
	bad=$(rank_output "$log" | grep -o 'mtl:ofi:prov: .*' | sed 's/^mtl:ofi:prov: //' |
		awk -F';' -v p="$expect_prov" '$1 != p' | sort -u | paste -sd, -)
	if [ -n "$bad" ]; then
		echo "OFI MTL selected provider(s) '$bad', expected $expect_prov"
		return 1
	fi
	return 0
}

# Check that btl/ofi really ran on $btl_prov in every rank.
check_btl() {
	local log=$1 np=$2 n bad lvl
	n=$(ranks_with "btl:ofi:provider_include = \"$btl_prov\"" "$log")
	if [ "$n" -ne "$np" ]; then
		echo "expected a 'btl:ofi:provider_include = \"$btl_prov\"' line from each of $np ranks, found $n"
		return 1
	fi
	n=$(ranks_with 'select: init of component ofi returned success' "$log")
	if [ "$n" -ne "$np" ]; then
		echo "btl/ofi initialized in $n of $np ranks ('select: init of component ofi returned success')"
		return 1
	fi
	lvl=${FI_LOG_LEVEL:-info}
	[ "${lvl,,}" = warn ] && return 0
	n=$(ranks_with 'Opened fabric: ' "$log")
	bad=$(rank_output "$log" | grep -o 'Opened fabric: .*' |
		sed 's/^Opened fabric: //' |
		awk -v p="$btl_prov" '$1 != p' | sort -u | paste -sd, -)
	if [ "$n" -lt "$np" ] || [ -n "$bad" ]; then
		[ -n "$bad" ] && bad=", also $bad"
		echo "libfabric opened fabrics in $n of $np ranks$bad; expected $btl_prov only, in every rank"
		return 1
	fi
	return 0
}

# Hints for a failed run in an OFI BTL mode.
btl_hints() {
	local log=$1
	grep -m 3 -e 'Unknown or unsupported atomic op' \
		-e 'BTL OFI will now abort' -e 'failed with' -e 'fi_cq_readerr' \
		-e 'unreachable' -e 'cannot be selected' "$log" |
		sed 's/^/      | /'
	if ! grep -q 'Opened fabric: ' "$log" && command -v fi_info >/dev/null; then
		echo "      no fabric opened? fi_info -p $btl_prov -c 'FI_RMA|FI_ATOMIC' -t FI_EP_RDM:"
		FI_LOG_LEVEL=warn fi_info -p "$btl_prov" -c 'FI_RMA|FI_ATOMIC' \
			-t FI_EP_RDM 2>&1 |
			head -n 4 | sed 's/^/      | /'
	fi
}

pass=0
fail=0
for spec in $progs; do
	# PROG+VARIANT: the program run with extra MCA parameters
	prog=${spec%%+*}
	variant=
	[ "$prog" != "$spec" ] && variant=${spec#*+}
	vargs=()
	case $variant in
	"") ;;
	noamo) vargs=(--mca osc_rdma_acc_use_amo 0) ;;
	*)
		echo "FAIL  $spec: unknown variant '$variant' (known: noamo)"
		fail=$((fail + 1))
		continue
		;;
	esac
	for np in $nps; do
		exe=$dir/$prog
		log=$logdir/$spec.np$np.log
		args=()
		[ "$prog" = tnbc_main_job ] && args=("${main_job_args[@]}")
		if [ ! -x "$exe" ]; then
			echo "FAIL  $spec np=$np: $exe not found (build it first)"
			fail=$((fail + 1))
			continue
		fi
		t0=$(date +%s.%N)
		rm -rf "$log.ranks"
		timeout -k 10 "$tmo" mpirun "${mpirun_args[@]}" "${vargs[@]}" \
			--output-filename "$log.ranks" \
			-np "$np" "$exe" "${args[@]}" >"$log" 2>&1
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
		else
			[ -n "$expect_prov" ] && why=$(check_provider "$log" "$np")
			[ -z "$why" ] && [ -n "$btl_prov" ] &&
				why=$(check_btl "$log" "$np")
		fi
		if [ -z "$why" ]; then
			echo "PASS  $spec np=$np (${el} s)"
			pass=$((pass + 1))
			if [ "$prog" = tnbc_main_job ] && [ "$np" -eq 4 ]; then
				sed -n '/^==== tnbc main job report/,/^=====/p' "$log"
			fi
			continue
		fi
		fail=$((fail + 1))
		echo "FAIL  $spec np=$np (${el} s): $why"
		grep -m 3 ': FAIL' "$log" | sed 's/^/      /'
		[ -n "$btl_prov" ] && btl_hints "$log"
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
