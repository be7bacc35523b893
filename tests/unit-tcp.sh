#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The protocol's unit suites over the TCP transport: endpoints of one
# process that reach each other through sockets on this host, so that
# everything the protocol does (matching, rendezvous streamed through the
# sender, RMA and atomics in chunks, triggered work, descriptors) runs
# over a stream transport.  The shared-memory suites (proto, hostile)
# are left out, as on the loopback.
set -euo pipefail
FI_TNBC_XPORTS=tcp exec ./tests/unit/tnbc_unit
