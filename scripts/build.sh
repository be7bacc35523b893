#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Builds and installs tnbc: autogen, configure, make, make install.
# Usage: scripts/build.sh [builddir] [extra configure args...]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-$top/build}
shift || true

cd "$top"
[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p "$builddir"
cd "$builddir"
if [ ! -f Makefile ]; then
	"$top/configure" --enable-werror "$@" >configure.out
fi
make -j"$(nproc)" >make.out 2>&1 || { tail -50 make.out; exit 1; }
