#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# softroce-run.sh RECIPE_DIR SCRIPT [ARGS...]: RECIPE_DIR/run.sh (the
# soft-RoCE guest, ../shared/softroce) for a SCRIPT anywhere on this host.
# The guest mounts fresh file systems over /tmp and /run, so a script in
# a checkout under /tmp is not there: it is then started through a
# trampoline outside /tmp that binds the host's root at /run/host and
# runs the script from there.  Paths under /tmp among ARGS are the
# script's to map the same way (tests/verbs-guest.sh and rxe_compare.sh
# --guest do).  Exit code: run.sh's.
set -euo pipefail
rxe=$1 script=$2
shift 2
case $script in
/tmp/*) ;;
*) exec sh "$rxe/run.sh" "$script" "$@" ;;
esac
t=$(mktemp -d /var/tmp/tnbc-guest.XXXXXX)
trap 'rm -rf "$t"' EXIT
cat >"$t/run" <<TRAMPOLINE
#!/bin/sh
mountpoint -q /run/host || { mkdir -p /run/host && mount --bind / /run/host; } || exit 1
exec bash /run/host$script "\$@"
TRAMPOLINE
chmod +x "$t/run"
rc=0
sh "$rxe/run.sh" "$t/run" "$@" || rc=$?
exit "$rc"
