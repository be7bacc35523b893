#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The protocol's unit suites (matching, rendezvous, RMA and atomics,
# triggered work, descriptors, AV, CQ, attributes) over the loopback
# transport: the same protocol with no shared memory under it, so that a
# second transport keeps the transport interface honest.
set -euo pipefail
FI_TNBC_XPORTS=loop exec ./tests/unit/tnbc_unit
