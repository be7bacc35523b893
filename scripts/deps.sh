#!/usr/bin/env bash
# Installs the Debian 12 packages tnbc needs to build, test and run,
# skipping the ones already present.
set -euo pipefail

pkgs=(build-essential autoconf automake libtool pkg-config
      libfabric-dev libfabric-bin libhwloc-dev hwloc
      check libsubunit-dev openmpi-bin libopenmpi-dev pandoc
      procps psmisc)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "tnbc: installing Debian packages: ${missing[*]}"
	sudo_cmd=()
	[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
	"${sudo_cmd[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi
