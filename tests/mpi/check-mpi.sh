#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
#
# "make check" entry point for the MPI tests (see Makefile.include): runs
# run-mpi-tests.sh on the programs built in tests/mpi/bin of the build
# directory (the current directory when make check runs it).
#
# Environment:
#   MPI_TEST_MODE     "tnbc tnbc-osc" (default), vader, ofi-tcp or ofi-shm, or one of
#                     the one-sided modes tnbc-osc, tnbc-osc-cm, vader-osc,
#                     ofi-shm-osc; several separated by spaces run one
#                     after the other (e.g. "tnbc tnbc-osc")
#   MPI_TEST_NPS      rank counts (default "2 3 4 5 8")
#   FI_PROVIDER_PATH  where libfabric finds libtnbc-fi.so; if unset and the
#                     build directory has .libs/libtnbc-fi.so, that one is
#                     used, so make check tests the provider just built
set -u

here=$(cd "$(dirname "$0")" && pwd)
modes=${MPI_TEST_MODE:-tnbc tnbc-osc}

case " $modes " in
*" tnbc"*)
	if [ -z "${FI_PROVIDER_PATH:-}" ] && [ -e .libs/libtnbc-fi.so ]; then
		FI_PROVIDER_PATH=$PWD/.libs
		export FI_PROVIDER_PATH
	fi
	;;
esac

if [ "$modes" = "${modes%% *}" ]; then
	exec "$here/run-mpi-tests.sh" -m "$modes" -d tests/mpi/bin \
		-n "${MPI_TEST_NPS:-2 3 4 5 8}"
fi
rc=0
for mode in $modes; do
	"$here/run-mpi-tests.sh" -m "$mode" -d tests/mpi/bin \
		-n "${MPI_TEST_NPS:-2 3 4 5 8}" || rc=1
done
exit $rc
