#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The MPI glue across hosts made of namespaces (tests/netns-lib.sh), as
# tests/mpi/netns-mpi.sh runs Open MPI there: 2 hosts x 2 ranks, through
# tnbc-mpirun (which forwards the glue's and the provider's variables to
# the other host's ranks), point-to-point over the OFI MTL on tnbc, every
# collective offloaded: glue_coll checked exactly, the report read, and
# the links' byte counters showing the collectives crossed them.  Root
# only; run from the build directory.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
bld=$PWD
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$bld/.libs}
export TNBC_MPI_LIBDIR=$bld/mpi-glue/.libs
# shellcheck source=../netns-lib.sh
. "$src/tests/netns-lib.sh"
why=$(netns_usable) || { echo "cannot run: $why" >&2; exit 77; }
[ -x tests/mpi/glue-bin/glue_coll.openmpi ] ||
	{ echo "no glue_coll.openmpi: the glue for Open MPI was not built"; exit 77; }
work=$(mktemp -d)
trap 'netns_cleanup; rm -rf "$work"' EXIT
netns_hosts 2
netns_agent "$work/rsh" PATH="$PATH" FI_PROVIDER_PATH="$FI_PROVIDER_PATH"

fail=0
before=$(netns_link_bytes 1 2)
log=$work/glue.log
if nsenter -t "${HOSTPID[1]}" -n -u env PATH="$PATH" \
	TNBC_MPI_OFFLOAD=all TNBC_MPI_REPORT=1 MPITEST_TIMEOUT=400 \
	timeout 500 "$bld/mpi-glue/tnbc-mpirun" --allow-run-as-root \
	--mca plm_rsh_agent "$work/rsh" \
	--mca pml cm --mca mtl ofi \
	--mca mtl_ofi_provider_include tnbc --mca btl self \
	--mca oob_tcp_if_include 10.231.0.0/24 \
	-x MPITEST_TIMEOUT -H 10.231.0.1:2,10.231.0.2:2 -np 4 \
	"$bld/tests/mpi/glue-bin/glue_coll.openmpi" >"$log" 2>&1 &&
	grep -q "glue_coll: PASS" "$log" &&
	grep -Eq '^tnbc-mpi: MPI_Ialltoallv offloaded [1-9]' "$log" &&
	grep -Eq '^tnbc-mpi: MPI_Allreduce offloaded [1-9]' "$log"; then
	after=$(netns_link_bytes 1 2)
	echo "ok: glue_coll on 2 hosts x 2 ranks, every collective offloaded: $((after - before)) bytes over the links"
	grep '^tnbc-mpi: MPI_\(Allreduce\|Ialltoallv\) ' "$log"
else
	echo "FAIL: glue_coll on 2 hosts x 2 ranks" >&2
	tail -30 "$log" >&2
	fail=1
fi
exit $fail
