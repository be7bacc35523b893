#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The protocol's unit suites (matching, rendezvous, RMA and atomics,
# triggered work, descriptors, AV, CQ, attributes) over the loopback
# transport: the same protocol with no shared memory under it, so that a
# second transport keeps the transport interface honest.
set -euo pipefail
# The loopback is a transport for tests.  In a sanitizer build the
# protocol above it runs over shared memory, TCP and verbs already, and
# this run would add two minutes for the loopback's own code alone.
[ -z "${TNBC_SAN_FLAGS:-}" ] ||
	{ echo "SKIP: a sanitizer build (the plain build runs it)"; exit 77; }
# The suites that never open an endpoint (the algorithm table, PLP's and
# the trees' maths, HMAC, the host's link board) ran in the plain run.
FI_TNBC_XPORTS=loop TNBC_UNIT_SKIP=pure \
	exec ./tests/unit/tnbc_unit
