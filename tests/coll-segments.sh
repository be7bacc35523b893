#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The collectives with segments of 64 bytes on a binary tree: every
# payload above one descriptor's worth becomes a pipeline of many
# segments, each with its own fold and forwarding, and 1 MiB reaches the
# limit of segments per operation (the segment size then grows).
set -euo pipefail
FI_TNBC_COLL_SEG=64 FI_TNBC_COLL_DEGREE=2 exec ./fabtests-ext/ftx_coll -n 5
