#!/usr/bin/env bash
#
# "make check" entry point for the MPI tests (see Makefile.include): runs
# run-mpi-tests.sh on the programs built in tests/mpi/bin of the build
# directory (the current directory when make check runs it).
#
# Environment:
#   MPI_TEST_MODE     tnbc (default), vader, ofi-tcp or ofi-shm
#   MPI_TEST_NPS      rank counts (default "2 3 4 5 8")
#   FI_PROVIDER_PATH  where libfabric finds libtnbc-fi.so; if unset and the
#                     build directory has .libs/libtnbc-fi.so, that one is
#                     used, so make check tests the provider just built
set -u

here=$(cd "$(dirname "$0")" && pwd)
mode=${MPI_TEST_MODE:-tnbc}

if [ "$mode" = tnbc ] && [ -z "${FI_PROVIDER_PATH:-}" ] &&
	[ -e .libs/libtnbc-fi.so ]; then
	FI_PROVIDER_PATH=$PWD/.libs
	export FI_PROVIDER_PATH
fi

exec "$here/run-mpi-tests.sh" -m "$mode" -d tests/mpi/bin \
	-n "${MPI_TEST_NPS:-2 3 4 5 8}"
