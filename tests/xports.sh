#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# FI_TNBC_XPORTS: a list naming no transport this provider has leaves
# fi_getinfo nothing (and says why); an unknown name among known ones is
# skipped with a warning; a domain with both transports (the loopback
# and shm) reaches processes of this host through shm, for messages and
# for the collectives of three processes; TCP alone reaches them too.  The ftx programs are built as
# the provider is (a sanitizer's runtime must be in the program).
set -euo pipefail
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$PWD/.libs}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if FI_TNBC_XPORTS=bogus FI_LOG_LEVEL=warn timeout 60 \
	./fabtests-ext/ftx_pingpong -p tnbc >"$log" 2>&1; then
	echo "FAIL: FI_TNBC_XPORTS=bogus: tnbc was offered" >&2
	exit 1
fi
grep -q 'names no transport this provider has' "$log" ||
	{ echo "FAIL: no warning for FI_TNBC_XPORTS=bogus" >&2; cat "$log" >&2; exit 1; }

FI_TNBC_XPORTS=loop,bogus,shm FI_LOG_LEVEL=warn timeout 60 \
	./fabtests-ext/ftx_pingpong -p tnbc >"$log" 2>&1 ||
	{ echo "FAIL: FI_TNBC_XPORTS=loop,bogus,shm" >&2; cat "$log" >&2; exit 1; }
grep -q 'no transport "bogus"' "$log" ||
	{ echo "FAIL: no warning for the unknown name" >&2; cat "$log" >&2; exit 1; }

FI_TNBC_XPORTS=loop,shm ./fabtests-ext/ftx_coll -n 3

# processes of this host forced onto TCP: messages, rendezvous streamed
# through the sender, and the collectives; and with both in a domain
FI_TNBC_XPORTS=tcp timeout 120 ./fabtests-ext/ftx_pingpong -p tnbc
FI_TNBC_XPORTS=tcp timeout 300 ./fabtests-ext/ftx_coll -n 3
# a slow receiver holds back only its own sender, and a flood only its
# own sender, per connection (a socket takes far more than a shm queue
# before its sender waits: a longer flood)
FI_TNBC_XPORTS=tcp timeout 120 ./fabtests-ext/ftx_hol -c 4096
FI_TNBC_XPORTS=shm,tcp timeout 120 ./fabtests-ext/ftx_pingpong -p tnbc
echo "PASS xports"
