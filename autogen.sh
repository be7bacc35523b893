#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Regenerates the autotools build files from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
mkdir -p config
autoreconf -ivf
