#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# The one-hop allreduce and barrier (every member sends its contribution
# to all others) in every group of the sweep, pinned by name
# (FI_TNBC_COLL_ALG), not only in the groups of two the automatic choice
# gives it: sizes 3, 5 and 8 mix it with the tree's broadcast and reduce,
# and with each other, in flight.  Allreduces too big for one packet
# still take the tree.
set -euo pipefail
FI_TNBC_COLL_ALG=allreduce=flat,barrier=flat exec ./fabtests-ext/ftx_coll -n 8
