#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Runs inside the soft-RoCE guest (tests/verbs.sh boots it): the
# protocol's unit suites and the ftx programs over tnbc's verbs
# transport alone (FI_TNBC_XPORTS=verbs), every endpoint on the guest's
# rxe0 device, and checks that rxe0's packet counters moved.
# Usage: verbs-guest.sh BUILDDIR [all|unit]   (unit: four unit suites
# only, for a sanitizer build)
set -u
build=$1 mode=${2:-all}
# the guest's /tmp is a fresh tmpfs over the host's: a build there is
# reached through a plain bind of the root, which leaves that out
case $build in
/tmp/*)
	mountpoint -q /run/host ||
		{ mkdir -p /run/host && mount --bind / /run/host; } || exit 1
	build=/run/host$build ;;
esac
cd "$build" || exit 1
export FI_TNBC_XPORTS=verbs FI_PROVIDER_PATH=$build/.libs
# everything runs about ten times slower under the emulator
export CK_DEFAULT_TIMEOUT=300
counters=/sys/class/infiniband/rxe0/ports/1/hw_counters
pkts() { cat "$counters/sent_pkts" 2>/dev/null || echo 0; }
status=0
# step NAME CMD...: runs CMD, showing what is not an "ok" line
step() {
	local name=$1 log rc
	shift
	log=$(mktemp)
	"$@" >"$log" 2>&1
	rc=$?
	grep -v '^#.*: ok$\|^Running suite\|left out$' "$log"
	rm -f "$log"
	[ "$rc" -eq 0 ] || { echo "FAIL: $name (exit $rc)"; status=1; }
}
# suite_times XML: seconds per suite, from Check's XML log, so that the
# log shows where the emulator's time goes
suite_times() {
	awk -F'[<>]' '/<title>/ && !s { s = $3 }
		/<duration>/ { t[s] += $3 }
		/<\/suite>/ { order[++n] = s; s = "" }
		END { printf "seconds per suite:"
			for (i = 1; i <= n; i++) printf " %s %.0f", order[i], t[order[i]]
			print "" }' "$1"
}
before=$(pkts)

echo "== unit suites over verbs"
# The suites that never open an endpoint ran on the host already, and
# so did coll's: every collective under each algorithm, which reaches
# the transport only through the messages match and rma send (80 s of
# the emulator's time); ftx_coll below runs every collective over verbs
# between processes.  A sanitizer build runs only the suites that drive
# the transport hardest (messages of every protocol, RMA, and verbs'
# own): the others cost minutes under the emulator and reach no verbs
# code the chosen ones do not.
export TNBC_UNIT_SKIP="pure coll"
[ "$mode" = unit ] && export TNBC_UNIT_SUITES="av match rma verbs"
xml=$(mktemp)
CK_XML_LOG_FILE_NAME=$xml step "unit suites" ./tests/unit/tnbc_unit
suite_times "$xml"
rm -f "$xml"
ran=$(pkts)
echo "rxe0 sent $((ran - before)) packets"
[ "$((ran - before))" -gt 10000 ] ||
	{ echo "FAIL: the unit suites sent almost nothing over rxe0"; status=1; }
[ "$mode" = unit ] && exit $status

echo "== ftx programs over verbs"
# ftx_hol and ftx_priority expect a receive queue that fills at 64
# packets (fi_tnbc(7) LIMITATIONS); ftx_trigger_bcast times progress
# against a 300 ms bound the emulator cannot keep; each launch may take
# 300 s, not 60 (ftx_unexp_storm takes 40 to 60 s here, 7 over shm)
step ftx env FTX_BINDIR=./fabtests-ext FTX_ARGS="-t 300" FTX_TESTS="ftx_pingpong
ftx_unexp_storm ftx_many_recvs ftx_iov ftx_trunc ftx_directed ftx_cancel
ftx_peek_claim ftx_neg ftx_peer_death ftx_cq_formats ftx_trigger_chain
ftx_trigger_cancel" sh "$(dirname "$0")/../fabtests-ext/run-functional.sh"
step ftx_coll ./fabtests-ext/ftx_coll -n 3 -t 300
# fi_alltoall's synchronisation packets per process and peer, 64 KiB
# slices (above the eager size): a rendezvous the receiver reads with
# RDMA read costs 2 (RTS, ACK), one it cannot read 3 (RTS, CTS, ACK:
# FI_TNBC_CMA=0 turns the reads off), LSS 1 (fi_tnbc(7), Collectives)
step "alltoall sync, direct by RDMA read" env FTX_A2A_SYNC=2 \
	FI_TNBC_COLL_ALG=alltoall=direct ./fabtests-ext/ftx_coll -n 3 -t 300 \
	-C alltoall
step "alltoall sync, direct streamed" env FTX_A2A_SYNC=3 FI_TNBC_CMA=0 \
	FI_TNBC_COLL_ALG=alltoall=direct ./fabtests-ext/ftx_coll -n 3 -t 300 \
	-C alltoall
step "alltoall sync, LSS" env FTX_A2A_SYNC=1 FI_TNBC_COLL_ALG=alltoall=lss \
	./fabtests-ext/ftx_coll -n 3 -t 300 -C alltoall
after=$(pkts)
echo "rxe0 sent $((after - ran)) packets"
[ "$((after - ran))" -gt 10000 ] ||
	{ echo "FAIL: the ftx programs sent almost nothing over rxe0"; status=1; }

echo "== Open MPI's OFI MTL over verbs"
# two ranks of the guest, each told to use verbs alone; skipped in a
# build without the MPI tests
if [ -x tests/mpi/bin/mpi_p2p ] && command -v mpirun >/dev/null; then
	# the guest boots with no host name, which mpirun refuses
	hostname rxe-guest
	for p in mpi_p2p mpi_probe mpi_ssend mpi_nonblocking mpi_coll; do
		step "$p" timeout 600 mpirun --allow-run-as-root \
			--oversubscribe --mca pml cm --mca mtl ofi \
			--mca mtl_ofi_provider_include tnbc --mca btl self \
			-x FI_PROVIDER_PATH -x FI_TNBC_XPORTS -np 2 \
			"tests/mpi/bin/$p"
	done
	mpi=$(pkts)
	echo "rxe0 sent $((mpi - after)) packets"
	[ "$((mpi - after))" -gt 1000 ] ||
		{ echo "FAIL: Open MPI sent almost nothing over rxe0"; status=1; }
fi
exit $status
