#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Open MPI's OFI MTL over tnbc across hosts made of namespaces on this
# machine (tests/netns-lib.sh: each its own network, /dev/shm, PIDs and
# hostname, joined by veth pairs): mpirun runs on host 1 and starts
# its daemons on the others through an rsh agent that enters the host of
# the address it is given, as ssh would log in.  Two ranks per host, on
# 2 and on 3 hosts: ranks of one host meet through shm, the others
# through TCP, whose bytes the links' counters show.  Runs the MPI test
# programs (point-to-point, probe, synchronous sends, nonblocking, the
# collectives); prints one line per run, exit status 1 if any failed.
# Root only; run from the build directory (tests/mpi/bin, .libs).
#
#   ../tests/mpi/netns-mpi.sh [programs...]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
bld=$PWD
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$bld/.libs}
progs=${*:-mpi_p2p mpi_probe mpi_ssend mpi_nonblocking mpi_coll}
# shellcheck source=../netns-lib.sh
. "$src/tests/netns-lib.sh"
why=$(netns_usable) || { echo "cannot run: $why" >&2; exit 1; }
work=$(mktemp -d)
trap 'netns_cleanup; rm -rf "$work"' EXIT
netns_hosts 3

netns_agent "$work/rsh" PATH="$PATH" FI_PROVIDER_PATH="$FI_PROVIDER_PATH"

fail=0
for nh in 2 3; do
	hosts=10.231.0.1:2,10.231.0.2:2
	[ "$nh" = 3 ] && hosts=$hosts,10.231.0.3:2
	for p in $progs; do
		ids=$(seq -s ' ' "$nh")
		before=$(netns_link_bytes $ids)
		log=$work/$p-$nh.log
		# mpirun joins host 1's network and name only: its rsh agent
		# must see the other hosts' processes to enter them, and its
		# own ranks then share this machine's /dev/shm and PIDs (still
		# a host of their own to tnbc, apart from the others)
		if nsenter -t "${HOSTPID[1]}" -n -u env PATH="$PATH" \
			timeout 300 mpirun --allow-run-as-root \
			--mca plm_rsh_agent "$work/rsh" \
			--mca pml cm --mca mtl ofi \
			--mca mtl_ofi_provider_include tnbc --mca btl self \
			--mca oob_tcp_if_include 10.231.0.0/24 \
			-x FI_PROVIDER_PATH -H "$hosts" -np $((2 * nh)) \
			"$bld/tests/mpi/bin/$p" >"$log" 2>&1 &&
			grep -q "PASS" "$log"; then
			after=$(netns_link_bytes $ids)
			echo "ok: $p on $nh hosts, $((2 * nh)) ranks: $((after - before)) bytes over the links"
		else
			echo "FAIL: $p on $nh hosts" >&2
			tail -20 "$log" >&2
			fail=1
		fi
	done
done
exit $fail
