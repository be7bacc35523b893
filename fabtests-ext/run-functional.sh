#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
#
# Runs every ftx functional test on one provider and summarises.
#   FTX_PROVIDER  provider to test (default tnbc)
#   FTX_BINDIR    where the test programs are (default: found nearby)
#   FTX_ARGS      extra arguments for every test (e.g. "-A map")
#   FTX_TESTS     subset of tests to run (default: all)
# Exit: 0 when nothing failed, 77 when everything was skipped, 1 otherwise.
# For tnbc built as a DL provider, set FI_PROVIDER_PATH; if it is unset,
# a libtnbc-fi.so under the current directory is used when there is one.

set -u

prov=${FTX_PROVIDER:-tnbc}
tests=${FTX_TESTS:-"ftx_pingpong ftx_unexp_storm ftx_many_recvs ftx_hol ftx_iov
ftx_trunc ftx_directed ftx_cancel ftx_peek_claim ftx_neg ftx_peer_death
ftx_cq_formats ftx_trigger_chain ftx_trigger_bcast ftx_trigger_cancel
ftx_priority ftx_link"}

bindir=${FTX_BINDIR:-}
if [ -z "$bindir" ]; then
	here=$(dirname "$0")
	for d in ./fabtests-ext "$here" "$here/build"; do
		if [ -x "$d/ftx_pingpong" ]; then
			bindir=$d
			break
		fi
	done
fi
if [ -z "$bindir" ]; then
	echo "FAIL run-functional: no ftx_* programs found (set FTX_BINDIR)"
	exit 1
fi

if [ "$prov" = tnbc ] && [ -z "${FI_PROVIDER_PATH:-}" ]; then
	lib=$(find . -name 'libtnbc-fi.so' -path '*/.libs/*' 2>/dev/null |
		head -n 1)
	if [ -n "$lib" ]; then
		FI_PROVIDER_PATH=$(cd "$(dirname "$lib")" && pwd)
		export FI_PROVIDER_PATH
		echo "# FI_PROVIDER_PATH=$FI_PROVIDER_PATH"
	fi
fi

pass=0 fail=0 skip=0 failed=
for t in $tests; do
	# shellcheck disable=SC2086 # FTX_ARGS is meant to split
	env -u FI_PROVIDER "$bindir/$t" -p "$prov" ${FTX_ARGS:-}
	case $? in
	0) pass=$((pass + 1)) ;;
	77) skip=$((skip + 1)) ;;
	*) fail=$((fail + 1)) failed="$failed $t" ;;
	esac
done

echo "# $prov: $pass passed, $fail failed, $skip skipped" \
	"${failed:+(failed:$failed)}"
[ "$fail" -gt 0 ] && exit 1
[ "$pass" -eq 0 ] && exit 77
exit 0
