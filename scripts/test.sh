#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The whole test suite: installs what is missing, builds and installs
# tnbc, runs `make check` (Check unit tests, fabtests-ext functional tests,
# MPI tests over Open MPI), then the same unit and functional tests in an
# AddressSanitizer + UBSan build, then `make distcheck`.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
status=0
start=$(date +%s)

step() { printf '\n== %s (%ds)\n' "$*" $(( $(date +%s) - start )); }
# quiet LOG CMD...: runs CMD with its output in LOG and, while it runs, a
# line every 60 s with the time so far and what LOG says it is doing
# (the test results so far, else its last make directory), so that a
# long silent step shows it is alive without flooding the log.  Returns
# CMD's exit status.
quiet() {
	local log=$1 t0=$SECONDS ticker rc=0
	shift
	(
		nap=
		trap 'kill $nap 2>/dev/null; exit 0' TERM
		while :; do
			sleep 60 >/dev/null 2>&1 &
			nap=$!
			wait "$nap"
			kill -0 $$ 2>/dev/null || exit 0
			printf '   ... still running, %ds: %s\n' $((SECONDS - t0)) \
				"$(awk '/^(PASS|SKIP|XFAIL): / { ok++ }
					/^(FAIL|XPASS|ERROR): / { bad++ }
					/Entering directory/ { d = $NF; gsub(/\047/, "", d)
						n = split(d, a, "/"); dir = a[n - 1] "/" a[n] }
					END { if (ok + bad)
							printf "%d tests passed, %d failed so far", ok, bad
						else
							printf "in %s", dir ? dir : "(starting)" }' \
					"$log" 2>/dev/null)"
		done
	) &
	ticker=$!
	"$@" >"$log" 2>&1 || rc=$?
	kill "$ticker" 2>/dev/null
	wait "$ticker" 2>/dev/null
	return $rc
}
show_logs() {
	local dir=$1
	find "$dir" -name '*.log' -newer "$dir/Makefile" -path '*tests*' \
		-o -name '*.log' -newer "$dir/Makefile" -path '*fabtests-ext*' |
		while read -r f; do
			grep -q '^:test-result: \(FAIL\|ERROR\|XPASS\)' "${f%.log}.trs" 2>/dev/null &&
				{ echo "---- $f"; grep -E '^[^ ]+:[0-9]+:[EF]:' "$f"
				  tail -40 "$f"; }
		done
}

"$top/scripts/deps.sh" || exit 1
# The soft-RoCE guest that tests/verbs.sh boots (qemu, Debian's kernel,
# rdma-core; about a minute, once per machine).  Without the recipe
# beside the repository, or root, tests/verbs.sh skips.
rxe=$top/../shared/softroce
if [ -f "$rxe/setup.sh" ] && [ "$(id -u)" -eq 0 ] &&
	[ ! -f "${RXE_DIR:-/var/tmp/softroce}/initrd-9p.img" ]; then
	step "soft-RoCE guest set-up"
	sh "$rxe/setup.sh" || echo "soft-RoCE set-up failed: tests/verbs.sh will skip"
fi

step "build and install"
"$top/scripts/build.sh" "$top/build" || exit 1
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
"${sudo_cmd[@]}" make -C "$top/build" install >/dev/null || exit 1
[[ $(FI_PROVIDER=tnbc fi_info -l) == *tnbc* ]] ||
	{ echo "installed provider not found by fi_info"; status=1; }

step "make check"
if ! make -C "$top/build" -j1 check; then
	show_logs "$top/build"
	status=1
fi

step "make check in an ASan + UBSan build, locks asserted (--enable-debug)"
"$top/scripts/build.sh" "$top/build-asan" --enable-asan --enable-ubsan \
	--enable-debug --without-mpi || exit 1
if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	make -C "$top/build-asan" -j1 check; then
	show_logs "$top/build-asan"
	status=1
fi

step "make check in a ThreadSanitizer build"
# halt_on_error=0: every report is printed; exitcode makes any fail the
# test.  Ordering through shared memory mapped twice in one process is
# annotated in the transport, never suppressed.
"$top/scripts/build.sh" "$top/build-tsan" --enable-tsan --without-mpi ||
	exit 1
if ! TSAN_OPTIONS=halt_on_error=0:exitcode=66:second_deadlock_stack=1 \
	quiet "$top/build-tsan/check.out" make -C "$top/build-tsan" -j1 check; then
	grep -E '^(PASS|FAIL|ERROR|SKIP)' "$top/build-tsan/check.out" | grep -v '^PASS'
	show_logs "$top/build-tsan"
	status=1
fi

# distcheck proves the package: that the tarball builds, installs,
# uninstalls and passes tests out of its own tree.  The plain build above
# ran the whole suite already; a set that touches every part of the
# package (the unit suite, a collective program, the man page's example,
# the MPI glue's programs once each under both MPIs) proves it, in a
# quarter of the time.
distcheck_tests="tests/unit/tnbc_unit tests/unit/tnbc_users \
tests/man-example.sh fabtests-ext/ftx_coll tests/mpi/check-glue.sh"
step "make distcheck"
if ! GLUE_TEST_SET=package quiet "$top/build/distcheck.out" \
	make -C "$top/build" distcheck \
	TESTS="$distcheck_tests"; then
	tail -60 "$top/build/distcheck.out"
	# distcheck leaves its tree behind when it fails: the failing
	# tests' own logs are there
	for d in "$top"/build/tnbc-*/_build/sub; do
		[ -f "$d/Makefile" ] && show_logs "$d"
	done
	status=1
else
	grep -E '^[=]+$|archives ready|tnbc-.*tar' "$top/build/distcheck.out" | tail -3
fi

step "done"
# One closing line over every automake test result of the three builds.
pass=$(cat "$top"/build/*/*/*.trs "$top"/build/*/*.trs \
	"$top"/build-asan/*/*/*.trs "$top"/build-asan/*/*.trs \
	"$top"/build-tsan/*/*/*.trs "$top"/build-tsan/*/*.trs 2>/dev/null |
	grep -c '^:test-result: PASS')
fail=$(cat "$top"/build/*/*/*.trs "$top"/build/*/*.trs \
	"$top"/build-asan/*/*/*.trs "$top"/build-asan/*/*.trs \
	"$top"/build-tsan/*/*/*.trs "$top"/build-tsan/*/*.trs 2>/dev/null |
	grep -c '^:test-result: \(FAIL\|ERROR\)')
skip=$(cat "$top"/build/*/*/*.trs "$top"/build/*/*.trs \
	"$top"/build-asan/*/*/*.trs "$top"/build-asan/*/*.trs \
	"$top"/build-tsan/*/*/*.trs "$top"/build-tsan/*/*.trs 2>/dev/null |
	grep -c '^:test-result: SKIP')
[ "$status" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "$pass passed, $fail failed, $skip skipped"
exit $status
