#!/bin/bash
# The one-hop allreduce and barrier (every member sends its contribution
# to all others) in every group of the sweep, not only the groups of two
# the default FI_TNBC_COLL_FLAT_MAX gives it: sizes 3, 5 and 8 mix it
# with the tree's broadcast and reduce, and with each other, in flight.
set -euo pipefail
FI_TNBC_COLL_FLAT_MAX=64 exec ./fabtests-ext/ftx_coll -n 8
