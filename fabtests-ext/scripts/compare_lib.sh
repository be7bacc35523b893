# shellcheck shell=bash disable=SC2034,SC2154
# (the caller sets cmp_name and tmp, and reads opts and py)
# SPDX-License-Identifier: BSD-2-Clause
#
# What the comparison scripts share (osu_compare.sh, apps_compare.sh,
# netns_compare.sh, netns_osu.sh, rxe_compare.sh): sourced, never run.  The
# caller sets cmp_name (its own name, for messages) before sourcing it, and
# tmp (a scratch directory) before calling what writes there.  Every
# function here is prefixed cmp_.

# cmp_build_opt "$@": the build directory that -b DIR names (default
# $src/build) in bld; OPTIND then says where the other arguments begin.
cmp_build_opt() {
	local o

	bld=$src/build
	while getopts b: o; do
		case $o in
		b) bld=$(cd "$OPTARG" && pwd) ;;
		*) exit 2 ;;
		esac
	done
}

# cmp_positive_int NAME VALUE: whether VALUE, of the environment variable
# NAME, is a positive integer; says so on stderr when not.
cmp_positive_int() {
	case $2 in
	'' | *[!0-9]* | 0)
		echo "$cmp_name: $1 must be a positive integer" >&2
		return 1
		;;
	esac
}

# cmp_stack_opts STACK: the mpirun options of STACK (tnbc: pml cm and the
# OFI MTL on tnbc; vader: ob1 with Open MPI's own shared memory) in the
# array opts.  Debian's openmpi-mca-params.conf sets "mtl = ^ofi", which
# "--mca mtl ofi" overrides.  opal_common_ofi_verbose makes each rank's OFI
# MTL name its provider ("mtl:ofi:prov: tnbc") on stderr, which
# cmp_check_tnbc reads.
cmp_stack_opts() {
	case $1 in
	tnbc)
		opts=(--mca pml cm --mca mtl ofi --mca btl self
			--mca mtl_ofi_provider_include tnbc
			--mca opal_common_ofi_verbose 1)
		[ -n "${FI_PROVIDER_PATH:-}" ] && opts+=(-x FI_PROVIDER_PATH)
		;;
	vader)
		opts=(--mca pml ob1 --mca btl 'self,vader')
		;;
	esac
}

# cmp_check_tnbc WHAT NP RC ERRLOG: stops the whole comparison (exit 1)
# unless every one of the NP ranks of a tnbc run selected tnbc; then
# shows the first line of stderr beyond the OFI MTL's own.
cmp_check_tnbc() {
	local what=$1 np=$2 rc=$3 err=$4 got n_tnbc

	got=$(grep -o 'mtl:ofi:prov: [^ ]*' "$err" |
		sed 's/^mtl:ofi:prov: //' | sort | uniq -c |
		sed 's/^ *\([0-9]*\) \(.*\)/\2 (\1 ranks)/' | paste -sd, -)
	n_tnbc=$(grep -c 'mtl:ofi:prov: tnbc$' "$err")
	if grep 'mtl:ofi:prov: ' "$err" | grep -qv 'prov: tnbc$' ||
		{ [ "$rc" -eq 0 ] && [ "$n_tnbc" -ne "$np" ]; }; then
		echo "$cmp_name: FATAL: $what on tnbc: the OFI MTL of the" \
			"ranks selected '${got:-nothing}', not tnbc on all $np" \
			"ranks; see $err" >&2
		exit 1
	fi
}

# cmp_lib_sum: the checksum of the provider the ranks load, to notice a
# rebuild or make install during the run: the first libtnbc-fi.so in
# FI_PROVIDER_PATH when that is set, the installed one otherwise.
cmp_lib_sum() {
	local lib d
	local -a dirs

	lib=$(pkg-config --variable=libdir libfabric 2>/dev/null)/libfabric/libtnbc-fi.so
	if [ -n "${FI_PROVIDER_PATH:-}" ]; then
		IFS=: read -r -a dirs <<<"$FI_PROVIDER_PATH"
		for d in "${dirs[@]}"; do
			[ -e "$d/libtnbc-fi.so" ] && { lib=$d/libtnbc-fi.so; break; }
		done
	fi
	if [ -e "$lib" ]; then md5sum "$lib"; else echo "(no $lib)"; fi
}

# cmp_end ENV SUM0: notes the load at the end in ENV (env.txt), and warns
# when the provider changed since its checksum was SUM0.
cmp_end() {
	echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$1"
	if [ "$(cmp_lib_sum)" != "$2" ]; then
		echo "# $cmp_name: WARNING: libtnbc-fi.so changed during the" \
			"run; the tnbc figures mix two builds" >&2
		echo "tnbc at end: $(cmp_lib_sum) (CHANGED during the run)" >>"$1"
	fi
}

# cmp_exit OUT PNG FAILED: names the outputs in OUT and exits, 1 when
# FAILED runs gave no figures, 0 otherwise.
cmp_exit() {
	echo "# ${cmp_name%.sh}: $1/{table.txt,results.csv,ratio.csv,raw.csv}" \
		"$([ -f "$1/$2" ] && echo "$1/$2"), logs/" >&2
	if [ "$3" -gt 0 ]; then
		echo "# ${cmp_name%.sh}: $3 run(s) failed or gave no figures" \
			"(n/a above); see $1/logs" >&2
		exit 1
	fi
	exit 0
}

# cmp_stderr_note ERRLOG: the first line of stderr beyond the OFI MTL's
# verbose lines, shown under the run's line.
cmp_stderr_note() {
	local why

	why=$(grep -v -e 'mtl_ofi_component\.c:' -e '^$' "$1" | head -n 1)
	[ -n "$why" ] && echo "#   stderr: $why" >&2
	return 0
}

# cmp_rounds ROUNDS NTESTS FUNCTION: FUNCTION IDX ROUND STACK for every
# test on both stacks, every round, the stack that goes first alternating.
cmp_rounds() {
	local r i st
	local -a order

	for ((r = 1; r <= $1; r++)); do
		order=(tnbc vader)
		[ $((r % 2)) -eq 0 ] && order=(vader tnbc)
		for ((i = 0; i < $2; i++)); do
			for st in "${order[@]}"; do
				"$3" "$i" "$r" "$st"
			done
		done
	done
}

# cmp_medians K: reads "key fields (K of them),round,value,unit" lines
# sorted by key then value, writes "key fields,median,unit" (the mean of
# the middle two for an even count).
cmp_medians() {
	awk -F, -v nk="$1" '
	function flush() {
		if (n == 0)
			return
		m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		printf "%s,%.6g,%s\n", key, m, unit
		n = 0
	}
	{
		k = $1
		for (i = 2; i <= nk; i++)
			k = k "," $i
		if (k != key) { flush(); key = k }
		v[++n] = $(nk + 2)
		unit = $(nk + 3)
	}
	END { flush() }'
}

# cmp_table RATIO ROUNDS FMT HOW GMW NAME...: prints RATIO ("group,np,
# what,unit,tnbc,vader,tnbc_x" lines) as a table with columns NAME... in
# printf format FMT, a blank line between groups of one np, then each
# group's geometric mean of tnbc_x (labels GMW wide); HOW says which way
# tnbc_x was taken.
cmp_table() {
	local ratio=$1 rounds=$2 fmt=$3 how=$4 gmw=$5
	shift 5
	awk -F, -v rounds="$rounds" -v fmt="$fmt" -v how="$how" -v gmw="$gmw" \
		-v head="$*" '
BEGIN {
	split(head, h, " ")
	printf fmt, h[1], h[2], h[3], h[4], h[5], h[6], h[7]
}
{
	if (NR > 1 && ($1 != pg || $2 != pn))
		printf "\n"
	pg = $1; pn = $2
	printf fmt, $1, $2, $3, $4, $5, $6, $7
	g = $1 " -np " $2
	if (!(g in cnt)) { order[++ng] = g; cnt[g] = 0 }
	if ($7 != "n/a") { cnt[g]++; lsum[g] += log($7) }
}
END {
	printf "\n# medians over %d round(s); tnbc_x: tnbc time over vader time " \
		"(%s), > 1: tnbc slower\n", rounds, how
	for (i = 1; i <= ng; i++)
		printf "# geometric mean tnbc_x, %-" gmw "s %s\n", order[i] ":", \
			cnt[order[i]] ? sprintf("%.2f", exp(lsum[order[i]] / cnt[order[i]])) : "n/a"
}' "$ratio"
}

# cmp_apt_install PACKAGE...: installs Debian packages (sudo unless root,
# waiting for another apt-get's lock); its output goes to $tmp/apt.
cmp_apt_install() {
	local -a sudo_cmd=() lock=(-o DPkg::Lock::Timeout=600)

	[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
	{ "${sudo_cmd[@]}" apt-get "${lock[@]}" update -qq &&
		DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get "${lock[@]}" \
			install -y -qq "$@"; } >"$tmp/apt" 2>&1
}

# cmp_plot_python: sets py to a python3 that has matplotlib, installing
# Debian's python3-matplotlib when none has; returns 1 (no plot) when that
# fails.  Debian's package is for /usr/bin/python3, which another python3
# first in PATH (pyenv, a venv) may hide.
cmp_find_python() {
	local p

	for p in "$(command -v python3)" /usr/bin/python3; do
		if [ -n "$p" ] && "$p" -c 'import matplotlib' 2>/dev/null; then
			py=$p
			return 0
		fi
	done
	return 1
}
cmp_plot_python() {
	cmp_find_python && return 0
	echo "# $cmp_name: installing python3-matplotlib for the plot" >&2
	cmp_apt_install python3-matplotlib && cmp_find_python && return 0
	tail -5 "$tmp/apt" >&2
	echo "# $cmp_name: matplotlib unavailable: no plot" >&2
	return 1
}

# cmp_rounds ROUNDS TESTS STACK_A STACK_B: calls the caller's
# `one ROUND STACK TEST NP` for every round, test and stack, the stack
# that goes first alternating from round to round; a test named arN runs
# at N ranks, any other at 2.
cmp_rounds() {
	local rounds=$1 tests=$2 a=$3 b=$4 r t np st order

	for r in $(seq "$rounds"); do
		order=("$a" "$b")
		[ $((r % 2)) = 0 ] && order=("$b" "$a")
		for t in $tests; do
			np=${t#ar}
			[ "$np" = "$t" ] && np=2
			for st in "${order[@]}"; do
				echo "round $r: $st ${t%%[0-9]*} $np"
				one "$r" "$st" "${t%%[0-9]*}" "$np" ||
					echo "  failed: see logs/"
			done
		done
	done
}
