#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Upstream fabtests between two hosts made of namespaces on this machine
# (tests/netns-lib.sh: each its own network, /dev/shm, PIDs and
# hostname, joined by veth pairs), the way they run between real hosts:
# runfabtests.sh with the server's and the client's addresses, through a
# stand-in for ssh that runs each command inside the host whose address
# it is given.  Prints runfabtests' summary and the bytes that crossed
# the links.  Root only; fabtests are built locally (never committed).
#
#   netns_fabtests.sh <fabtests bin dir> [runfabtests.sh options]
#   e.g. netns_fabtests.sh /work/fabtests/install/bin -t quick
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "${1:?usage: $0 <fabtests bin dir> [runfabtests options]}" && pwd)
shift
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$src/build/.libs}
export FI_TNBC_XPORTS=${FI_TNBC_XPORTS:-shm,tcp}
# shellcheck source=../../tests/netns-lib.sh
. "$src/tests/netns-lib.sh"
why=$(netns_usable) || { echo "cannot run: $why" >&2; exit 1; }
fake=$(mktemp -d)
trap 'netns_cleanup; rm -rf "$fake"' EXIT
netns_hosts 2

netns_agent "$fake/ssh"

before=$(netns_link_bytes 1 2)
rc=0
PATH=$fake:$bin:$PATH runfabtests.sh -p "$bin" "$@" tnbc 10.231.0.1 10.231.0.2 || rc=$?
after=$(netns_link_bytes 1 2)
echo "bytes over the links: $((after - before))"
exit $rc
