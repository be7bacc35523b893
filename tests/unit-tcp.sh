#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The protocol's unit suites over the TCP transport: endpoints of one
# process that reach each other through sockets on this host, so that
# everything the protocol does (matching, rendezvous streamed through the
# sender, RMA and atomics in chunks, triggered work, descriptors) runs
# over a stream transport.  The shared-memory suites (proto, hostile)
# are left out, as on the loopback.
set -euo pipefail
# The suites that never open an endpoint (the algorithm table, PLP's and
# the trees' maths, HMAC, the host's link board) ran in the plain run,
# and so did TCP's own two, which force the transport themselves.
FI_TNBC_XPORTS=tcp TNBC_UNIT_SKIP="pure tcp tcp_trust" \
	exec ./tests/unit/tnbc_unit
