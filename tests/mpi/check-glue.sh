#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# "make check" entry point for the MPI glue (mpi-glue/, tnbc-mpi(7)): runs
# tests/mpi/glue-bin/glue_coll and glue_tnbc (T-NBC) under each MPI the
# glue was built for, at 1, 2, 3, 4, 5 and 8 ranks, through tnbc-mpirun
# with the glue just built, and checks what the report says was
# offloaded.
#
# Environment:
#   GLUE_TEST_NPS     rank counts (default "1 2 3 4 5 8")
#   GLUE_TEST_MPIS    "openmpi mpich" (default: those built)
#   GLUE_TEST_SET     "all" (default) or "package": one run of each
#                     program at 3 ranks under each MPI, which is what
#                     make distcheck needs to prove the package (the
#                     plain build ran the rest)
#   FI_PROVIDER_PATH  as for check-mpi.sh: the provider just built
set -u

nps=${GLUE_TEST_NPS:-1 2 3 4 5 8}
set_=${GLUE_TEST_SET:-all}
case $set_ in
all) ;;
package) nps=3 ;;
*) echo "GLUE_TEST_SET: all or package, not $set_"; exit 99 ;;
esac
# full: true unless only the package is proved
full() { [ "$set_" = all ]; }
if [ -z "${FI_PROVIDER_PATH:-}" ] && [ -e .libs/libtnbc-fi.so ]; then
	FI_PROVIDER_PATH=$PWD/.libs
fi
export FI_PROVIDER_PATH
export TNBC_MPI_LIBDIR=$PWD/mpi-glue/.libs
export MPITEST_TIMEOUT=${MPITEST_TIMEOUT:-240}
run=$PWD/mpi-glue/tnbc-mpirun
out=$(mktemp)
note=$(mktemp)
faillog=$(mktemp)
trap 'rm -f "$out" "$note" "$faillog"' EXIT
fails=0

# fail MESSAGE: one failure, said now and again at the end, where a log
# cut to its last lines (as CI prints it) still shows it
fail() {
	echo "FAIL: $*" | tee -a "$faillog"
	fails=$((fails + 1))
}
# detail COMMAND...: a failure's evidence, indented, kept for the end too
detail() { "$@" | sed 's/^/    /' | tee -a "$faillog"; }
# summary: the failures again; the status is the script's
summary() {
	[ "$fails" -eq 0 ] && return 0
	echo "check-glue: $fails failed:"
	cat "$faillog"
	return 1
}

mpis=${GLUE_TEST_MPIS:-}
if [ -z "$mpis" ]; then
	for m in openmpi mpich; do
		[ -x "tests/mpi/glue-bin/glue_coll.$m" ] && mpis="$mpis $m"
	done
fi

# launch MPI NP [LAUNCHER-ARGS...] -- PROGRAM-ARGS...: one run, output
# in $out; the exit status is the job's
launch() {
	local mpi=$1 np=$2
	shift 2
	local largs=() pargs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		largs+=("$1")
		shift
	done
	[ $# -gt 0 ] && shift
	pargs=("$@")
	if [ "$mpi" = openmpi ]; then
		largs=(--allow-run-as-root --oversubscribe
			--mca btl "${OMPI_BTL:-self,vader}" "${largs[@]}")
	fi
	timeout 600 "$run" "${largs[@]}" -np "$np" \
		"tests/mpi/glue-bin/$prog.$mpi" "${pargs[@]}" >"$out" 2>&1
}
prog=glue_coll

# result NAME STATUS: PASS needs status 0 and the program's PASS line
result() {
	if [ "$2" -eq 0 ] && grep -q "$prog: PASS" "$out"; then
		echo "PASS: $1"
	else
		fail "$1 (exit $2)"
		detail tail -20 "$out"
	fi
}

# expect NAME REGEX...: each line must be in the last run's output
expect() {
	local name=$1 re
	shift
	for re in "$@"; do
		if ! grep -Eq "$re" "$out"; then
			fail "$name: no line matching: $re"
			detail grep '^tnbc-mpi:' "$out"
			return
		fi
	done
	echo "PASS: $name"
}

all_offloaded=()
for f in Allreduce Reduce Bcast Barrier Allgather Alltoall Alltoallv \
	Reduce_scatter_block Gather Scatter Allgatherv Gatherv Scatterv \
	Iallreduce Ireduce Ibcast Ibarrier Iallgather Ialltoall Ialltoallv \
	Iallgatherv Igatherv Iscatterv Ireduce_scatter_block Igather Iscatter \
	Reduce_scatter Ireduce_scatter Neighbor_allgather Neighbor_alltoall \
	Neighbor_allgatherv Neighbor_alltoallv Ineighbor_allgather \
	Ineighbor_alltoall Ineighbor_allgatherv Ineighbor_alltoallv \
	Scan Exscan Iscan Iexscan Alltoallw Ialltoallw Neighbor_alltoallw \
	Ineighbor_alltoallw; do
	all_offloaded+=("^tnbc-mpi: MPI_$f offloaded [1-9][0-9]* fallback [0-9]+")
done

for mpi in $mpis; do
	for np in $nps; do
		st=0
		targs=()
		# two threads on two communicators where the MPI gives
		# MPI_THREAD_MULTIPLE, at two sizes
		case $np in 2 | 5) targs=(--threads) ;; esac
		TNBC_MPI_OFFLOAD=all TNBC_MPI_REPORT=1 launch "$mpi" "$np" -- \
			"${targs[@]}" || st=$?
		result "$mpi np=$np${targs:+ ${targs[*]}}" "$st"
		if [ "$np" = 3 ]; then
			# every function offloaded, the fallbacks counted
			expect "$mpi np=3 report" "${all_offloaded[@]}" \
				'^tnbc-mpi: MPI_Allreduce offloaded [0-9]+ fallback [1-9][0-9]* \(.*type'
		fi
	done
	full || continue
	# graph topologies: offloaded where every member lists each
	# neighbour once (agreed when the communicator was made), the
	# multigraph left to the MPI on every member; 4 graphs of the 5
	# and 2 counts, on 3 ranks
	st=0
	TNBC_MPI_OFFLOAD=all TNBC_MPI_REPORT=1 launch "$mpi" 3 -- --graph ||
		st=$?
	result "$mpi np=3 graph neighbourhoods" "$st"
	graph=()
	for f in Neighbor_allgather Neighbor_alltoall Neighbor_allgatherv \
		Neighbor_alltoallv Ineighbor_allgather Ineighbor_alltoall \
		Ineighbor_allgatherv Ineighbor_alltoallv; do
		graph+=("^tnbc-mpi: MPI_$f offloaded 24 fallback 6 \\(comm 6\\)")
	done
	expect "$mpi np=3 graph: offloaded" "${graph[@]}"
	# a program of MPI sessions alone (MPICH: MPI 4), no MPI_Init: the
	# glue stays out of the way of a communicator made from a
	# session's group
	if [ "$mpi" = mpich ]; then
		st=0
		launch "$mpi" 2 -- --sessions || st=$?
		result "$mpi np=2 sessions alone" "$st"
	fi
	# communicators merged from an intercommunicator: named by the
	# glue (no barrier falls back), two merges apart
	st=0
	TNBC_MPI_OFFLOAD=all TNBC_MPI_REPORT=1 launch "$mpi" 3 -- --merge ||
		st=$?
	result "$mpi np=3 merged intercommunicators" "$st"
	expect "$mpi np=3 merged: offloaded" \
		'^tnbc-mpi: MPI_Barrier offloaded [1-9][0-9]* fallback 0' \
		'^tnbc-mpi: MPI_Ialltoallv offloaded [1-9][0-9]* fallback 0'
	# MPI_Comm_idup's children: named at the call, claimed at their
	# first use (no barrier falls back), two in flight apart (under
	# MPICH one of them by MPI_Comm_idup_with_info); under MPICH two of
	# MPI_Comm_create_from_group
	st=0
	TNBC_MPI_OFFLOAD=all TNBC_MPI_REPORT=1 launch "$mpi" 3 -- --idup ||
		st=$?
	result "$mpi np=3 idup communicators" "$st"
	expect "$mpi np=3 idup: offloaded" \
		'^tnbc-mpi: MPI_Barrier offloaded [1-9][0-9]* fallback 0' \
		'^tnbc-mpi: MPI_Ialltoallv offloaded [1-9][0-9]* fallback 0'
	# persistent collectives: every start offloaded as its I form, 5 of
	# them started 4 times on the world and on a split, 3 ranks, the
	# alltoall once more before it is freed; gatherv, scatterv and
	# alltoallw 3 times on both, the neighbourhood ones 3 times on a
	# ring of the world
	st=0
	TNBC_MPI_REPORT=1 launch "$mpi" 3 -- --persist || st=$?
	result "$mpi np=3 persistent collectives" "$st"
	persist=("^tnbc-mpi: MPI_Ialltoall offloaded 30 fallback 0")
	for f in Iallreduce Ibcast Ibarrier Ialltoallv; do
		persist+=("^tnbc-mpi: MPI_$f offloaded 24 fallback 0")
	done
	for f in Igatherv Iscatterv Ialltoallw; do
		persist+=("^tnbc-mpi: MPI_$f offloaded 18 fallback 0")
	done
	for f in Ineighbor_allgather Ineighbor_alltoallv; do
		persist+=("^tnbc-mpi: MPI_$f offloaded 9 fallback 0")
	done
	# and alltoallw twice more on a star of each communicator
	persist+=("^tnbc-mpi: MPI_Ineighbor_alltoallw offloaded 21 fallback 0")
	expect "$mpi np=3 persistent: offloaded" "${persist[@]}"
	# counts that differ between members: every rank's call fails
	# through the error handler, none hangs (MPITEST_TIMEOUT)
	for np in 2 3 5; do
		st=0
		MPITEST_TIMEOUT=60 TNBC_MPI_OFFLOAD=all launch "$mpi" "$np" -- \
			--mismatch || st=$?
		result "$mpi np=$np mismatched counts fail" "$st"
	done
	# the default policy: non-blocking calls offloaded, blocking ones
	# where measured faster
	st=0
	TNBC_MPI_REPORT=1 launch "$mpi" 2 || st=$?
	result "$mpi np=2 default policy" "$st"
	expect "$mpi default policy report" \
		'^tnbc-mpi: MPI_Iallreduce offloaded [1-9][0-9]* fallback 0' \
		'^tnbc-mpi: MPI_Ialltoallv offloaded [1-9][0-9]* fallback 0'
	# the glue switched off: everything falls back, and still passes
	st=0
	TNBC_MPI=0 TNBC_MPI_REPORT=1 launch "$mpi" 2 -- --no-progress-check ||
		st=$?
	result "$mpi np=2 TNBC_MPI=0" "$st"
	expect "$mpi TNBC_MPI=0 report" \
		'^tnbc-mpi: MPI_Iallreduce offloaded 0 fallback [1-9][0-9]* \(off'
	# variables rank 0 reads and the others do not (a launcher that
	# does not forward them): rank 0 alone would offload the small
	# blocking allreduces the others leave to the MPI, and each would
	# wait for the other; the glue turns itself off everywhere instead,
	# and says why.  The report (a reduction at MPI_Finalize) is
	# everyone's when one rank wants it.  Two ranks: MPICH's own
	# collectives at three on two cores take 30 s here.
	st=0
	largs=()
	[ "$mpi" = openmpi ] && largs=(--allow-run-as-root --oversubscribe)
	MPITEST_TIMEOUT=60 timeout 300 "$run" --mpi="$mpi" \
		"${largs[@]}" -np 2 sh -c \
		'[ "${OMPI_COMM_WORLD_RANK:-$PMI_RANK}" = 0 ] &&
		export TNBC_MPI_ALLREDUCE=on TNBC_MPI_REPORT=1
		exec "$0" --no-progress-check' \
		"$PWD/tests/mpi/glue-bin/glue_coll.$mpi" >"$out" 2>&1 || st=$?
	result "$mpi np=2 variables differ between ranks" "$st"
	expect "$mpi variables differ: the glue is off" \
		'^tnbc-mpi: the TNBC_MPI_\* variables differ between ranks' \
		'^tnbc-mpi: MPI_Allreduce offloaded 0 fallback [1-9][0-9]* \(off'
done

# T-NBC: blocking alltoall(v) returning before the data has arrived, the
# receive buffer guarded page by page.  Some calls return early, at 2
# ranks too: there the peer's slice touches the buffer's unaligned first
# or last page, never guarded, and the call waits only for the 4 KiB
# edge of a message of 64 KiB or more that lands there (tg_a2a_cut), and
# the provider writes its ready word before it reads the body.  Every
# call by T-NBC (TNBC_MPI_TNBC_ADAPT=0): each path is tested where it is
# called, not where the trial against the plain way sends it.
prog=glue_tnbc
export TNBC_MPI_TNBC_ADAPT=0
for mpi in $mpis; do
	[ -x "tests/mpi/glue-bin/glue_tnbc.$mpi" ] || continue
	for np in $nps; do
		st=0
		TNBC_MPI_TNBC=all TNBC_MPI_REPORT=1 launch "$mpi" "$np" ||
			st=$?
		result "$mpi np=$np T-NBC" "$st"
		if [ "$np" = 2 ]; then
			# 11 to 15 of 72; 0 or 1 when the call's wait polled
			# past the pass that wrote the edges' words
			expect "$mpi np=2 T-NBC report" \
				'^tnbc-mpi: MPI_Alltoall offloaded [1-9][0-9]* fallback 0 early ([2-9]|[1-9][0-9])'
		elif [ "$np" = 3 ]; then
			expect "$mpi np=3 T-NBC report" \
				'^tnbc-mpi: MPI_Alltoall offloaded [1-9][0-9]* fallback 0 early [1-9]' \
				'^tnbc-mpi: MPI_Alltoallv offloaded [1-9][0-9]* fallback 0 early [0-9]'
		fi
	done
	full || continue
	# every data mover of glue_coll by T-NBC from the smallest size,
	# mixed datatypes among them: a member whose buffer is staged
	# (non-contiguous) takes T-NBC's messages too, and returns once its
	# data is in
	prog=glue_coll
	st=0
	TNBC_MPI_TNBC=all TNBC_MPI_TNBC_MIN=0 TNBC_MPI_OFFLOAD=all \
		launch "$mpi" 3 || st=$?
	result "$mpi np=3 glue_coll by T-NBC" "$st"
	prog=glue_tnbc
	# a call site opted out: every alltoall lands in place
	st=0
	TNBC_MPI_TNBC=all TNBC_MPI_TNBC_SKIP=MPI_Alltoall@ TNBC_MPI_REPORT=1 \
		launch "$mpi" 3 || st=$?
	result "$mpi np=3 T-NBC sites skipped" "$st"
	expect "$mpi np=3 T-NBC skip report" \
		'^tnbc-mpi: MPI_Alltoall offloaded [1-9][0-9]* fallback 0 early 0 '
	# trace, then replay: the same results, the order files written
	tr=$(mktemp -d)
	st=0
	TNBC_MPI_TNBC=all TNBC_MPI_TNBC_TRACE=$tr/t launch "$mpi" 3 || st=$?
	result "$mpi np=3 T-NBC trace" "$st"
	if [ "$(grep -l '^site MPI_Alltoall@.* members 3' "$tr"/t.[012] |
		wc -l)" -ne 3 ]; then
		fail "$mpi T-NBC trace: no alltoall site in every file"
	fi
	st=0
	TNBC_MPI_TNBC=all TNBC_MPI_TNBC_ORDER=$tr/t launch "$mpi" 3 || st=$?
	result "$mpi np=3 T-NBC replay" "$st"
	rm -rf "$tr"
done
unset TNBC_MPI_TNBC_ADAPT
# T-NBC tried against the plain way at each call site (the default): 12
# calls at each of three sites per rank, the ranks paced differently.
# Whatever each rank's verdict, every result is right; and each rank's
# calls at a site are a warm-up of each way and two trials of each, by
# turns, T-NBC first, then six on its verdict: 3 plain calls where it
# kept T-NBC, 9 where it left it, so the report's sum over the m ranks
# that try (a broadcast's root does not) is 3m + 6k for the k that left
# it, and rank 0's verdict at every site is given
for mpi in $mpis; do
	[ -x "tests/mpi/glue-bin/glue_tnbc.$mpi" ] || continue
	for np in $nps; do
		st=0
		TNBC_MPI_TNBC=all TNBC_MPI_REPORT=1 launch "$mpi" "$np" -- \
			--adapt || st=$?
		result "$mpi np=$np T-NBC adapt" "$st"
		for fn in MPI_Alltoall MPI_Alltoallv MPI_Bcast; do
			m=$np
			[ "$fn" = MPI_Bcast ] && m=$((np - 1))
			p=$(sed -n "s/^tnbc-mpi: $fn offloaded $((12 * np)) fallback 0 early [0-9]* plain \([0-9]*\).*/\1/p" "$out")
			v=$(grep -c "^tnbc-mpi: T-NBC at $fn@[^ ]* comm [0-9]*: \(kept\|left\) " "$out" || true)
			if [ -n "$p" ] && [ "$p" -ge $((3 * m)) ] &&
				[ $(((p - 3 * m) % 6)) -eq 0 ] &&
				[ $(((p - 3 * m) / 6)) -le "$m" ] &&
				[ "$v" -eq $((m > 0)) ]; then
				echo "PASS: $mpi np=$np T-NBC adapt $fn:" \
					"$(((p - 3 * m) / 6)) of $m left it"
			else
				fail "$mpi np=$np T-NBC adapt $fn: plain" \
					"'$p', rank 0's verdicts $v; expected" \
					"3 x $m + 6 k, k <= $m, and $((m > 0))"
				detail grep '^tnbc-mpi:' "$out"
			fi
		done
	done
done
# The verdicts kept from one run for the next (TNBC_MPI_TNBC_VERDICTS):
# the second run tries nothing, each rank's calls at a site all go the
# way its file names (12 plain calls a site it left, none where it kept
# T-NBC), and rank 0's report says the verdicts were an earlier run's
for mpi in $mpis; do
	[ -x "tests/mpi/glue-bin/glue_tnbc.$mpi" ] || continue
	vd=$(mktemp -d)
	for pass in written read; do
		st=0
		TNBC_MPI_TNBC=all TNBC_MPI_TNBC_VERDICTS=$vd/v TNBC_MPI_REPORT=1 \
			launch "$mpi" 3 -- --adapt || st=$?
		result "$mpi np=3 T-NBC verdicts $pass" "$st"
	done
	for fn in MPI_Alltoall MPI_Alltoallv MPI_Bcast; do
		m=3
		[ "$fn" = MPI_Bcast ] && m=2
		all=$(cat "$vd"/v.* | grep -c "^site $fn@" || true)
		left=$(cat "$vd"/v.* | grep -c "^site $fn@[^ ]* comm [0-9]* left " ||
			true)
		p=$(sed -n "s/^tnbc-mpi: $fn offloaded 36 fallback 0 early [0-9]* plain \([0-9]*\).*/\1/p" "$out")
		told=$(grep -c "^tnbc-mpi: T-NBC at $fn@.*; an earlier run's verdict)" \
			"$out" || true)
		if [ "$all" -eq "$m" ] && [ "$p" = $((12 * left)) ] &&
			[ "$told" -eq 1 ]; then
			echo "PASS: $mpi np=3 T-NBC verdicts $fn: $left of $m left it"
		else
			fail "$mpi np=3 T-NBC verdicts $fn: $all in the" \
				"files ($left left), plain '$p', told $told;" \
				"expected $m, $((12 * left)), 1"
			detail grep '^tnbc-mpi:' "$out"
		fi
	done
	rm -rf "$vd"
done
prog=glue_coll

# Fortran programs: `use mpi`, whose Open MPI bindings call PMPI_*
# directly (the glue's own Fortran entry points there), and `use
# mpi_f08`, whose bindings reach the C calls only in part under both
# MPIs (Open MPI's through ompi_*_f, MPICH's init, barrier and
# constructors through PMPI_*): the report shows the glue saw them
for mpi in $mpis; do
	for prog in glue_fortran glue_fortran08; do
		f=tests/mpi/glue-bin/$prog.$mpi
		[ -x "$f" ] || continue
		st=0
		largs=()
		[ "$mpi" = openmpi ] && largs=(--allow-run-as-root --oversubscribe)
		TNBC_MPI_OFFLOAD=all TNBC_MPI_REPORT=1 timeout 300 "$run" \
			"${largs[@]}" -np 3 "$f" >"$out" 2>&1 || st=$?
		if [ "$st" -eq 0 ] && grep -q "$prog: PASS" "$out"; then
			expect "$mpi $prog np=3" \
				'^tnbc-mpi: MPI_Allreduce offloaded [1-9]' \
				'^tnbc-mpi: MPI_Iallreduce offloaded [1-9]' \
				'^tnbc-mpi: MPI_Alltoall offloaded [1-9]' \
				'^tnbc-mpi: MPI_Ineighbor_alltoall offloaded 3 fallback 0' \
				'^tnbc-mpi: MPI_Ineighbor_alltoallw offloaded 3 fallback 0'
			[ "$prog" = glue_fortran08 ] ||
				expect "$mpi $prog np=3 ireduce_scatter_block" \
					'^tnbc-mpi: MPI_Ireduce_scatter_block offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Igather offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Iscatter offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Reduce_scatter offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Neighbor_alltoall offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Neighbor_alltoallw offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Iscan offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Alltoallw offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Ialltoallw offloaded 3 fallback 0'
			[ "$prog" = glue_fortran ] ||
				expect "$mpi $prog np=3 barrier, bcast" \
					'^tnbc-mpi: MPI_Barrier offloaded [1-9]' \
					'^tnbc-mpi: MPI_Bcast offloaded 6 fallback 0' \
					'^tnbc-mpi: MPI_Ibcast offloaded [1-9]' \
					'^tnbc-mpi: MPI_Allgatherv offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Gatherv offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Iscatterv offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Iallgather offloaded 3 fallback 0'
			# MPI 4's constructors, named through MPICH's f08
			[ "$prog.$mpi" = glue_fortran08.mpich ] &&
				expect "$mpi $prog np=3 idup_with_info, create_from_group" \
					'^tnbc-mpi: MPI_Iexscan offloaded 3 fallback 0' \
					'^tnbc-mpi: MPI_Exscan offloaded 3 fallback 0'
		else
			fail "$mpi $prog np=3 (exit $st)"
			detail tail -20 "$out"
		fi
	done
	full || continue
	# MPI_Ialltoallw and MPI_Ineighbor_alltoallw left to the MPI: under
	# Open MPI the glue's Fortran entry points hand them to Open MPI's
	# own bindings, which keep their converted type arrays until the
	# request completes
	f=tests/mpi/glue-bin/glue_fortran.$mpi
	if [ -x "$f" ]; then
		st=0
		TNBC_MPI_OFFLOAD=all TNBC_MPI_IALLTOALLW=off \
			TNBC_MPI_INEIGHBOR_ALLTOALLW=off TNBC_MPI_REPORT=1 \
			timeout 300 "$run" "${largs[@]}" -np 3 "$f" >"$out" \
			2>&1 || st=$?
		if [ "$st" -eq 0 ] && grep -q "glue_fortran: PASS" "$out"; then
			expect "$mpi glue_fortran np=3 Ialltoallw by the MPI" \
				'^tnbc-mpi: MPI_Ialltoallw offloaded 0 fallback 3 \(policy 3\)' \
				'^tnbc-mpi: MPI_Ineighbor_alltoallw offloaded 0 fallback 3 \(policy 3\)'
		else
			fail "$mpi glue_fortran np=3 Ialltoallw by the MPI (exit $st)"
			detail tail -20 "$out"
		fi
	fi
	# T-NBC on: its alltoall's result is sent on untouched
	f=tests/mpi/glue-bin/glue_fortran08.$mpi
	[ -x "$f" ] || continue
	st=0
	TNBC_MPI_OFFLOAD=all TNBC_MPI_TNBC=all TNBC_MPI_TNBC_MIN=1 TNBC_MPI_TNBC_ADAPT=0 \
		TNBC_MPI_REPORT=1 timeout 300 "$run" "${largs[@]}" -np 3 "$f" \
		>"$out" 2>&1 || st=$?
	if [ "$st" -eq 0 ] && grep -q "glue_fortran08: PASS" "$out"; then
		expect "$mpi glue_fortran08 np=3 T-NBC" \
			'^tnbc-mpi: MPI_Alltoall offloaded [1-9][0-9]* fallback 0 early '
	else
		fail "$mpi glue_fortran08 np=3 T-NBC (exit $st)"
		detail tail -20 "$out"
	fi
done
prog=glue_coll

[ -n "$mpis" ] || { echo "SKIP: no MPI glue built"; exit 77; }
full || { summary; exit; }

# a member killed during an offloaded collective: Open MPI's launcher
# keeps the job (--enable-recovery), and every survivor's call fails
# within the provider's bound (MPICH's hydra ends the job with the rank)
case " $mpis " in
*" openmpi "*)
	for np in 3 5; do
		st=0
		MPITEST_TIMEOUT=30 TNBC_MPI_OFFLOAD=all launch openmpi "$np" \
			--enable-recovery -- --member-death || st=$?
		n=$(grep -c 'the allreduce failed .* ms after the post' "$out")
		if [ "$n" -eq $((np - 1)) ]; then
			echo "PASS: openmpi np=$np member death:" \
				"$(grep -o 'failed [0-9]* ms' "$out" | tr '\n' ' ')"
		else
			fail "openmpi np=$np member death: $n of" \
				"$((np - 1)) survivors saw their call fail (exit $st)"
			detail tail -20 "$out"
		fi
	done
	;;
esac

# one member that cannot post what all decided to offload (a malloc the
# program fails once on rank 1): its call fails with MPI_ERR_NO_MEM and
# the job ends, where falling back alone would hang it
for mpi in $mpis; do
	for mode in post-nomem post-nomem-nb; do
		st=0
		: >"$note"
		GLUE_NOTE=$note MPITEST_TIMEOUT=30 TNBC_MPI_OFFLOAD=all \
			launch "$mpi" 3 -- "--$mode" || st=$?
		if [ "$st" -ne 0 ] && [ "$st" -ne 124 ] &&
			grep -q 'rank 1: the .* allreduce failed with MPI_ERR_NO_MEM' \
				"$out" "$note" && ! grep -q 'watchdog' "$out"; then
			echo "PASS: $mpi np=3 $mode: the call failed, the job ended"
		else
			fail "$mpi np=3 $mode (exit $st)"
			detail tail -20 "$out"
		fi
	done
done

# an alltoallw whose staged receive side on member 0 is larger than
# one PMPI_Pack moves (2.3 GiB): offloaded, every int checked; a host
# with less than 12 GiB free says SKIP and passes
for mpi in $mpis; do
	st=0
	TNBC_MPI_REPORT=1 launch "$mpi" 2 -- --big-w || st=$?
	if grep -q '^glue_coll: SKIP' "$out"; then
		echo "SKIP: $mpi np=2 alltoallw past INT_MAX: $(sed -n "s/^glue_coll: SKIP: //p" "$out")"
		continue
	fi
	result "$mpi np=2 alltoallw staged past INT_MAX bytes" "$st"
	expect "$mpi np=2 alltoallw past INT_MAX: offloaded" \
		'^tnbc-mpi: MPI_Ialltoallw offloaded 2 fallback 0'
done

# Open MPI's other point-to-point stack: cm with the OFI MTL on tnbc,
# beside the glue's own tnbc endpoint in the same process
case " $mpis " in
*" openmpi "*)
	st=0
	OMPI_BTL=self TNBC_MPI_OFFLOAD=all TNBC_MPI_REPORT=1 GLUE_ENGINES=1 \
		launch openmpi 3 --mca pml cm --mca mtl ofi \
		--mca mtl_ofi_provider_include tnbc \
		--mca mpi_yield_when_idle 1 || st=$?
	result "openmpi np=3 cm/ofi on tnbc" "$st"
	# the MTL's domain and the glue's: one engine thread serves both
	expect "openmpi cm/ofi: one engine for two domains" \
		'^tnbc-mpi: engine: one thread per process serves 2 to 2 tnbc domains'
	;;
esac

[ -n "$mpis" ] || { echo "SKIP: no MPI glue built"; exit 77; }
summary
