#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# tnbc over rdma-core verbs, in a soft-RoCE guest: this machine's kernel
# has no rdma_rxe, so ../shared/softroce boots Debian's kernel under
# qemu with this machine's root file system read-only, makes rxe0 on the
# guest's own interface, and runs tests/verbs-guest.sh there (the unit
# suites and ftx programs with FI_TNBC_XPORTS=verbs, all ranks on rxe0).
# In an AddressSanitizer build only four unit suites run there (about 2
# minutes; everything is ten times slower again under the emulator).
# Skipped (77) when verbs is not built, in a ThreadSanitizer build,
# without root, or where the recipe is missing or not set up
# (scripts/test.sh sets it up: ../shared/softroce/setup.sh).
set -euo pipefail
src=${TNBC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
rxe=${TNBC_SOFTROCE:-$src/../shared/softroce}
lib=./.libs/libtnbc-fi.so
[[ $(ldd "$lib" 2>/dev/null) == *libibverbs* ]] ||
	{ echo "SKIP: the verbs transport is not built"; exit 77; }
mode=all
case ${TNBC_SAN_FLAGS:-} in
*thread*) echo "SKIP: a ThreadSanitizer build"; exit 77 ;;
*address*) mode=unit ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the guest needs root"; exit 77; }
[ -x "$rxe/run.sh" ] || [ -f "$rxe/run.sh" ] ||
	{ echo "SKIP: no soft-RoCE recipe at $rxe"; exit 77; }
[ -f "${RXE_DIR:-/var/tmp/softroce}/initrd-9p.img" ] ||
	{ echo "SKIP: soft-RoCE not set up (sh $rxe/setup.sh)"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
OUT=$out RXE_TIMEOUT=${RXE_TIMEOUT:-1500} \
	bash "$src/tests/softroce-run.sh" "$rxe" "$src/tests/verbs-guest.sh" \
	"$PWD" "$mode" && rc=0 ||
	rc=$?
if [ "$rc" -eq 125 ]; then
	echo "FAIL: the guest never ran the tests; its console:"
	tail -30 "$out/console.log"
fi
[ "$rc" -eq 0 ] && echo "PASS verbs (in the soft-RoCE guest)"
exit "$rc"
