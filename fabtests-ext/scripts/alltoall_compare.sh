#!/bin/bash
# SPDX-License-Identifier: BSD-2-Clause
#
# fi_alltoall for hosts of several processes (seed 001; fi_tnbc(7),
# Collectives), side by side in one invocation over the same namespace
# hosts (tests/netns-lib.sh: each its own network, /dev/shm, PIDs and
# hostname, joined by veth pairs through a bridge), completion time
# (ftx_bench_coll -o alltoall: from a common start until the last rank
# is done), slices of 1 B to 1 MiB:
#   tnbc-auto    the automatic choice
#   tnbc-direct  FI_TNBC_COLL_ALG=alltoall=direct (every slice straight)
#   tnbc-plp     ... =plp (leaders per host by slice size)
#   tnbc-lss     ... =lss (one ready note per slice between hosts)
#   tnbc-plpN    PLP with N leaders per host (FI_TNBC_COLL_PLP_LEADERS;
#                not in the default STACKS: what the size rule is tuned
#                from)
#   tnbc-rndv3   direct with FI_TNBC_TCP_EAGER_SIZE=16384: slices from
#                32 KiB between hosts take the 3-message rendezvous (RTS,
#                CTS, ACK) LSS is measured against
#   rxm-host     tcp;ofi_rxm: libfabric 1.17's has no fi_alltoall (its
#                fi_query_collective says -FI_ENOSYS, logged here), so
#                the application's direct exchange over its tagged
#                messages (ftx_bench_coll -m host)
#   ompi         Open MPI's MPI_Alltoall, ob1 with its TCP BTL and vader
#                (tests/mpi/bin/bench_coll -o alltoall -H), launched by
#                mpirun through netns_agent as tests/mpi/netns-mpi.sh does
# at shapes 2x2, 2x3, 3x2 and 3x3 (hosts x ranks per host).  tnbc reaches
# the ranks of one host through shm and the others through TCP.
# With RXE=1 it runs instead in the soft-RoCE guest (../shared/softroce,
# about ten times slower than this machine: compare, never read the
# figures as RDMA performance): shape 1x3, three ranks of the guest
# over rxe0, tnbc with FI_TNBC_XPORTS=verbs (tnbc-rndv3 there: reads off,
# FI_TNBC_CMA=0, and an eager size of 16 KiB, so that 32 KiB slices too
# take RTS, CTS and ACK), verbs;ofi_rxm for rxm-host, no ompi.
# Each round runs every stack once per shape, the order rotating from
# round to round; tables show the median over rounds.  Figures only:
# nothing passes or fails on time.
#
# usage: alltoall_compare.sh [-b BUILDDIR]     (root only; RXE=1: the
#   soft-RoCE recipe's setup.sh run once)
# environment: ROUNDS=3; SHAPES="2x2 2x3 3x2 3x3"; SIZES=1,8,64,256,1k,4k,
#   16k,32k,64k,256k,1m; STACKS (default all above); REPS=100;
#   OUT=DIR (default ./alltoall-compare-YYYYmmdd-HHMMSS); PLOT=0 no PNG
# OUT holds raw.csv (round,stack,shape,np,bytes,value,unit), results.csv
# (medians and ratios), table.txt, alltoall_compare.png, logs/.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
cmp_name=alltoall_compare
# shellcheck source=compare_lib.sh
. "$src/fabtests-ext/scripts/compare_lib.sh"
if [ "${1:-}" = --guest ]; then
	# inside the guest: build, output folder, rounds, sizes, stacks,
	# reps (the guest gets one command line, unquoted: commas)
	bld=$2 OUT=$3 ROUNDS=$4 SIZES=$5 STACKS=${6//,/ } REPS=$7
	case $bld in /tmp/*)
		{ mountpoint -q /run/host ||
		{ mkdir -p /run/host && mount --bind / /run/host; }; } &&
		bld=/run/host$bld ;;
	esac
	guest=1 SHAPES=1x3
	mkdir -p "$OUT/logs"
	export FI_PROVIDER_PATH=$bld/.libs FI_TNBC_XPORTS=verbs
	# rxm sizes its verbs completion queues by the universe (256 by
	# default), past what rxe takes
	export FI_UNIVERSE_SIZE=${FI_UNIVERSE_SIZE:-8}
else
	guest=0
	cmp_build_opt "$@"
	ROUNDS=${ROUNDS:-3}
	SHAPES=${SHAPES:-2x2 2x3 3x2 3x3}
	SIZES=${SIZES:-1,8,64,256,1k,4k,16k,32k,64k,256k,1m}
	STACKS=${STACKS:-tnbc-auto tnbc-direct tnbc-plp tnbc-lss tnbc-rndv3 rxm-host ompi}
	REPS=${REPS:-100}
	OUT=${OUT:-$PWD/alltoall-compare-$(date +%Y%m%d-%H%M%S)}
	mkdir -p "$OUT/logs"
	tmp=$OUT/logs # cmp_apt_install's output
	if [ "${RXE:-0}" = 1 ]; then
		rxe=${TNBC_SOFTROCE:-$src/../shared/softroce}
		[ -f "$rxe/run.sh" ] ||
			{ echo "no soft-RoCE recipe at $rxe" >&2; exit 1; }
		st=${STACKS// ompi/}
		st=${st//tnbc-plp /}
		# the guest sees OUT at its own /tmp/out
		OUT=$OUT RXE_TIMEOUT=${RXE_TIMEOUT:-5400} \
			bash "$src/tests/softroce-run.sh" "$rxe" \
			"$src/fabtests-ext/scripts/alltoall_compare.sh" --guest \
			"$bld" /tmp/out "$ROUNDS" "$SIZES" "${st// /,}" "$REPS"
		py=python3
		cmp_find_python || true
		"$py" "$src/fabtests-ext/scripts/alltoall_table.py" "$OUT" \
			alltoall_rxe.png
		echo "results in $OUT"
		exit 0
	fi
	export FI_PROVIDER_PATH=$bld/.libs
	# shellcheck source=../../tests/netns-lib.sh
	. "$src/tests/netns-lib.sh"
	why=$(netns_usable) || { echo "cannot run: $why" >&2; exit 1; }
	work=$(mktemp -d)
	trap 'netns_cleanup; rm -rf "$work"' EXIT
	netns_hosts 3 || exit 1
	netns_agent "$work/rsh" PATH="$PATH" \
		FI_PROVIDER_PATH="$FI_PROVIDER_PATH"
fi

raw=$OUT/raw.csv
echo "round,stack,shape,np,bytes,value,unit" >"$raw"
fail=0
ftx=$bld/fabtests-ext/ftx_bench_coll

# one run: round stack shape; appends its lines to raw.csv
one() {
	local r=$1 st=$2 shape=$3 nh np pids="" hl="" i log cmd=()
	nh=${shape%x*}
	np=$((nh * ${shape#*x}))
	for i in $(seq "$nh"); do
		[ "$guest" = 1 ] && break
		pids=${pids:+$pids,}${HOSTPID[$i]}
		hl=${hl:+$hl,}10.231.0.$i:${shape#*x}
	done
	local xp=shm,tcp rxm='tcp;ofi_rxm' rndv3=(FI_TNBC_TCP_EAGER_SIZE=16384)
	if [ "$guest" = 1 ]; then
		xp=verbs rxm='verbs;ofi_rxm'
		rndv3=(FI_TNBC_CMA=0 FI_TNBC_EAGER_SIZE=16384)
	fi
	log=$OUT/logs/$shape-$st-r$r.log
	case $st in
	tnbc-auto) cmd=(env -u FI_TNBC_COLL_ALG) ;;
	tnbc-direct | tnbc-plp | tnbc-lss)
		cmd=(env FI_TNBC_COLL_ALG=alltoall=${st#tnbc-}) ;;
	tnbc-plp[1-9]*)
		cmd=(env FI_TNBC_COLL_ALG=alltoall=plp
			FI_TNBC_COLL_PLP_LEADERS=${st#tnbc-plp}) ;;
	tnbc-rndv3)
		cmd=(env FI_TNBC_COLL_ALG=alltoall=direct "${rndv3[@]}") ;;
	esac
	case $st in
	tnbc-*)
		FTX_HOSTS=$pids FI_TNBC_XPORTS=$xp timeout 900 "${cmd[@]}" \
			"$ftx" -n "$np" -C allreduce -o alltoall -s "$SIZES" \
			-i "$REPS" -l x -t 900 >"$log" 2>&1 ;;
	rxm-host)
		FTX_HOSTS=$pids timeout 900 env -u FI_PROVIDER_PATH "$ftx" \
			-p "$rxm" -n "$np" -C allreduce -m host \
			-o alltoall -s "$SIZES" -i "$REPS" -l x -t 900 \
			>"$log" 2>&1 ;;
	ompi)
		nsenter -t "${HOSTPID[1]}" -n -u env PATH="$PATH" \
			timeout 900 mpirun --allow-run-as-root \
			--mca plm_rsh_agent "$work/rsh" --mca pml ob1 \
			--mca mpi_yield_when_idle 1 \
			--mca btl self,vader,tcp \
			--mca btl_tcp_if_include 10.231.0.0/24 \
			--mca oob_tcp_if_include 10.231.0.0/24 \
			-H "$hl" -np "$np" "$bld/tests/mpi/bin/bench_coll" \
			-o alltoall -H -s "$SIZES" -i "$REPS" -l x >"$log" 2>&1 ;;
	esac || { fail=1; echo "  $st at $shape failed: $log"; return; }
	awk -F, -v r="$r" -v s="$st" -v sh="$shape" '$1 == "x" {
		print r "," s "," sh "," $2 "," $3 "," $4 ",us" }' "$log" >>"$raw"
}

# rxm's own fi_alltoall, for the record (libfabric 1.17: -FI_ENOSYS,
# "Function not implemented")
rxm='tcp;ofi_rxm'
[ "$guest" = 1 ] && rxm='verbs;ofi_rxm'
timeout 300 env -u FI_PROVIDER_PATH "$ftx" -p "$rxm" -n 2 -C allreduce \
	-o alltoall -s 8 -i 5 >"$OUT/logs/rxm-fi_alltoall.log" 2>&1
echo "$rxm fi_alltoall: $(grep -o 'Function not implemented' \
	"$OUT/logs/rxm-fi_alltoall.log" | head -1)"

read -r -a stacks <<<"$STACKS"
for r in $(seq "$ROUNDS"); do
	k=$(((r - 1) % ${#stacks[@]}))
	order=("${stacks[@]:k}" "${stacks[@]:0:k}")
	for shape in $SHAPES; do
		for st in "${order[@]}"; do
			echo "round $r: $st at $shape"
			one "$r" "$st" "$shape"
		done
	done
done

[ "$guest" = 1 ] && exit 0
py=python3
if [ "${PLOT:-1}" != 0 ]; then
	cmp_plot_python || true
fi
"$py" "$src/fabtests-ext/scripts/alltoall_table.py" "$OUT"
echo "results in $OUT"
exit $fail
