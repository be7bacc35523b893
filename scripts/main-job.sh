#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# The main job: installs what is missing, builds and installs tnbc, then
# runs a real MPI program over Open MPI's OFI MTL on tnbc, 4 ranks, shared
# memory on this host.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

"$top/scripts/deps.sh"
"$top/scripts/build.sh" "$top/build"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
"${sudo_cmd[@]}" make -C "$top/build" install >/dev/null
make -C "$top/build" tests/mpi/bin/tnbc_main_job >/dev/null

echo "== FI_PROVIDER=tnbc fi_info (installed provider, no extra environment)"
FI_PROVIDER=tnbc fi_info | head -6
echo "== mpirun -np 4 over Open MPI's OFI MTL, provider tnbc"
unset FI_PROVIDER_PATH
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# opal_common_ofi_verbose makes each rank's OFI MTL name the provider it
# selected ("mtl:ofi:prov: tnbc"), among other lines of its own, some of
# which look alarming ("mtl_ofi_component.c:735: fi_getinfo(): Success").
# All of the OFI MTL's verbose lines are kept out of what is shown; the
# job's own report and any other output are shown as they came.
status=0
"$top/scripts/mpirun-tnbc.sh" --mca opal_common_ofi_verbose 1 -np 4 \
	"$top/build/tests/mpi/bin/tnbc_main_job" --require-tnbc >"$out" 2>&1 ||
	status=$?
grep -v -E -e '^\[[^]]*\] [^ ]*(mtl_ofi|common_ofi)[a-z_]*\.c:[0-9]+: ' \
	-e 'mtl:ofi:' "$out" || true
prov=$(grep -o 'mtl:ofi:prov: [^ ]*' "$out" | sed 's/mtl:ofi:prov: //' || true)
echo "OFI MTL provider selected, per rank: $(printf '%s\n' "$prov" | grep . |
	sort | uniq -c | sed 's/^ *//' | tr '\n' ' ')"
if [ "$(printf '%s\n' "$prov" | grep -c '^tnbc$')" -ne 4 ]; then
	echo "main-job: not every one of the 4 ranks selected tnbc"
	[ "$status" -ne 0 ] || status=1
fi

# The same program through the MPI glue (mpi-glue/, tnbc-mpi(7)):
# tnbc-mpirun preloads the glue into every rank; collectives go to tnbc's
# engine, and a non-blocking allreduce completes while every rank sleeps
# with no MPI call.  The report says, per collective, what was offloaded.
echo "== tnbc-mpirun -np 4, the MPI glue preloaded, OFI MTL on tnbc"
glue_status=0
TNBC_MPI_REPORT=1 tnbc-mpirun --allow-run-as-root --oversubscribe \
	--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tnbc \
	--mca btl self --mca mpi_yield_when_idle 1 -np 4 \
	"$top/build/tests/mpi/bin/tnbc_main_job" --require-tnbc --glue \
	>"$out" 2>&1 || glue_status=$?
grep -v -E -e 'mtl:ofi:' "$out" || true
if ! grep -q '^tnbc-mpi: MPI_Iallreduce offloaded [1-9]' "$out"; then
	echo "main-job: the glue offloaded no MPI_Iallreduce"
	[ "$glue_status" -ne 0 ] || glue_status=1
fi
[ "$status" -ne 0 ] || status=$glue_status
exit $status
