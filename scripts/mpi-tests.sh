#!/usr/bin/env bash
# Runs the MPI test programs over Open MPI's OFI MTL on tnbc at 2 to 8
# ranks.  Each program checks its own results; the tnbc selection is
# checked inside every rank (MPITEST_REQUIRE_LIB, --require-tnbc).
# Environment: TNBC_BUILDDIR (the build dir), FI_PROVIDER_PATH (set by
# make check to the uninstalled provider).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${TNBC_BUILDDIR:-$top/build}/tests/mpi/bin
pass=0
fail=0

run() {
	local np=$1
	shift
	if MPITEST_REQUIRE_LIB=libtnbc-fi.so MPITEST_TIMEOUT=100 \
		timeout 150 "$top/scripts/mpirun-tnbc.sh" -np "$np" \
		-x MPITEST_REQUIRE_LIB -x MPITEST_TIMEOUT "$@" >mpi-run.out 2>&1; then
		pass=$((pass + 1))
		echo "PASS np=$np $(basename "$1")"
	else
		fail=$((fail + 1))
		echo "FAIL np=$np $*"
		tail -20 mpi-run.out
	fi
}

for np in 2 3 4 5 8; do
	run "$np" "$bin/tnbc_main_job" --require-tnbc
	for p in "$bin"/mpi_*; do
		[ -x "$p" ] && run "$np" "$p"
	done
done
rm -f mpi-run.out
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
