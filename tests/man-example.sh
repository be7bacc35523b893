#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Builds and runs the EXAMPLE of fi_tnbc_coll(3) as the page prints it,
# so that the page cannot drift from what the provider does.
set -euo pipefail
src=${TNBC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk '/^# EXAMPLE/ { ex = 1 } ex && /^```c$/ { on = 1; next }
     on && /^```$/ { exit } on' "$src/man/fi_tnbc_coll.3.md" >"$work/example.c"
test -s "$work/example.c" || { echo "no example in fi_tnbc_coll.3.md"; exit 1; }
# built as the provider was (a sanitizer's runtime must be in the program)
# shellcheck disable=SC2086
${CC:-cc} -Wall -Wextra -Werror ${TNBC_SAN_FLAGS:-} -I"$src/include" \
	"$work/example.c" -o "$work/example" -lfabric
timeout 60 "$work/example"
