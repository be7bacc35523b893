#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# mpirun over tnbc through Open MPI's OFI MTL.  Debian's
# /etc/openmpi/openmpi-mca-params.conf disables the OFI MTL and BTL
# ("mtl = ^ofi", "btl = ^...,ofi"); the --mca options below override it.
# Usage: scripts/mpirun-tnbc.sh -np N program [args...]
exec mpirun --allow-run-as-root --oversubscribe \
	--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tnbc \
	--mca btl self --mca mpi_yield_when_idle 1 \
	${FI_PROVIDER_PATH:+-x FI_PROVIDER_PATH} "$@"
