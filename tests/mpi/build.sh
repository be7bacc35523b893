#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# Build the MPI test programs with mpicc, standalone (no autotools).
#
# Usage: build.sh [OUTDIR]    (default: bin/ next to this script)
# Environment: MPICC (default mpicc), CFLAGS (added after the defaults).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/bin}
mpicc=${MPICC:-mpicc}
flags=(-std=c11 -O2 -g -Wall -Wextra -Werror)
progs="tnbc_main_job mpi_p2p mpi_probe mpi_ssend mpi_nonblocking mpi_coll
	mpi_osc"

mkdir -p "$out"
for p in $progs; do
	echo "  CC  $out/$p"
	# shellcheck disable=SC2086
	"$mpicc" "${flags[@]}" ${CFLAGS:-} -o "$out/$p" "$here/$p.c" \
		"$here/mpitest.c"
done
