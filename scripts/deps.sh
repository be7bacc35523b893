#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Installs the Debian 12 packages tnbc needs to build, test and run,
# skipping the ones already present.
set -euo pipefail

pkgs=(build-essential autoconf automake libtool pkg-config
      libfabric-dev libfabric-bin libhwloc-dev hwloc
      check libsubunit-dev openmpi-bin libopenmpi-dev mpich libmpich-dev
      gfortran pandoc
      libibverbs-dev librdmacm-dev procps psmisc
      python3-matplotlib)  # the benchmarks' PNGs

# How long to wait for another apt-get or dpkg (unattended-upgrades runs
# for minutes after a cloud machine first boots) to let go of the package
# locks, in seconds.
lock_wait=${TNBC_APT_LOCK_WAIT:-1800}
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)

# apt-get ARGS...: waits for the package locks instead of failing on them.
# DPkg::Lock::Timeout makes apt-get wait for the dpkg lock, but apt-get
# update (apt 2.6) does not apply it to its lists lock, so an attempt that
# fails on a lock is retried, with a line saying so, until lock_wait.
apt_get() {
	local err deadline=$((SECONDS + lock_wait)) rc who
	err=$(mktemp)
	while :; do
		rc=0
		"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get \
			-o DPkg::Lock::Timeout=30 "$@" 2>"$err" || rc=$?
		if [ "$rc" -ne 0 ] && [ "$SECONDS" -lt "$deadline" ] &&
			grep -q -e 'Could not get lock' -e 'Unable to lock' \
				-e 'Unable to acquire' "$err"; then
			who=$(grep -o -m 1 'held by process [0-9]* ([^)]*)' "$err" || true)
			echo "tnbc: waiting for another apt-get/dpkg to release the" \
				"package lock${who:+ ($who)}; giving up in" \
				"$((deadline - SECONDS)) s"
			sleep 30
			continue
		fi
		cat "$err" >&2
		rm -f "$err"
		return "$rc"
	done
}

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "tnbc: installing Debian packages: ${missing[*]}"
	if pgrep -x 'apt|apt-get|aptitude|dpkg|unattended-upgr' >/dev/null 2>&1; then
		echo "tnbc: another apt-get/dpkg is running; waiting for it" \
			"(up to $lock_wait s)"
	fi
	apt_get update -qq
	apt_get install -y -qq "${missing[@]}"
fi
