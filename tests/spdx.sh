#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
# Every source file names its licence (LICENSE) in an SPDX line among its
# first three: the provider's are BSD-2-Clause OR GPL-2.0-only, the rest
# BSD-2-Clause.
set -euo pipefail
src=${TNBC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$src"
bad=0
while IFS= read -r f; do
	want="BSD-2-Clause"
	case $f in ./prov/* | ./include/*) want="BSD-2-Clause OR GPL-2.0-only" ;; esac
	if ! head -n 3 "$f" | grep -q "SPDX-License-Identifier: $want\( \*/\)\?\$"; then
		echo "FAIL: $f has no \"SPDX-License-Identifier: $want\" line"
		bad=1
	fi
done < <(find . \( -path ./build -o -path './build-*' -o -path ./.git \
	-o -path './tnbc-*' -o -path ./autom4te.cache -o -path ./config \) -prune \
	-o -type f \( -name '*.c' -o -name '*.h' -o -name '*.sh' -o -name '*.py' \
	-o -name '*.f90' -o -name Makefile.am -o -name configure.ac \) -print |
	grep -v '/_build/\|/_inst/\|\.libs/\|/config\.h$')
[ $bad = 0 ] && echo "PASS spdx"
exit $bad
