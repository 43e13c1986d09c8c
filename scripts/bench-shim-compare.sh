#!/bin/bash
# Two builds of the shim side by side on bench-shim's null-driver loop, in the same minutes: each
# round runs every configuration of build A, then of build B; the best of all rounds is printed.
# Timings on a shared machine drift by tens of percent over minutes, so comparing two separate
# `make bench-shim` runs says little; alternating does.
#   scripts/bench-shim-compare.sh OLD_BUILD NEW_BUILD [ROUNDS]
# A build folder must hold lib/libgpuarena.so, preload/bench_shim and preload/nulldrv/libcuda.so.1
# (make BUILD=DIR DIR/lib/libgpuarena.so DIR/preload/bench_shim DIR/preload/nulldrv/libcuda.so.1).
# Example, this round against the code before it:
#   git worktree add ../before 7b952a3 && make -C ../before build/lib/libgpuarena.so \
#     build/preload/bench_shim build/preload/nulldrv/libcuda.so.1
#   make build/lib/libgpuarena.so build/preload/bench_shim build/preload/nulldrv/libcuda.so.1
#   scripts/bench-shim-compare.sh ../before/build build 6
set -u
if [ $# -lt 2 ]; then
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
A=$(cd "$1" && pwd) || exit 2
B=$(cd "$2" && pwd) || exit 2
ROUNDS=${3:-6}
for d in "$A" "$B"; do
    for f in lib/libgpuarena.so preload/bench_shim preload/nulldrv/libcuda.so.1; do
        [ -e "$d/$f" ] || { echo "gpuarena: $d/$f is missing (build it: see the top of $0)" >&2; exit 2; }
    done
done
CONFIGS="direct pool arena arena-none platform vmm"
declare -A best
one() { # build config -> ns per pair
    local d=$1 what=measure mode=arena sync= pre=1
    case $2 in
        direct) pre= ;;
        pool) what=pool; pre= ;;
        arena-none) sync=none ;;
        platform|vmm) mode=$2 ;;
    esac
    env LD_LIBRARY_PATH="$d/preload/nulldrv" ${pre:+LD_PRELOAD=$d/lib/libgpuarena.so} \
        GPUARENA_MODE=$mode ${sync:+GPUARENA_FREE_SYNC=$sync} SIMCUDA_TOTAL_MEM=16GiB \
        "$d/preload/bench_shim" $what 1000000
}
for r in $(seq "$ROUNDS"); do
    for side in A B; do
        d=$A; [ $side = B ] && d=$B
        for c in $CONFIGS; do
            v=$(one "$d" $c) || v=
            k="$side $c"
            if [ -n "$v" ] && { [ -z "${best[$k]:-}" ] || awk "BEGIN{exit !($v < ${best[$k]})}"; }; then
                best[$k]=$v
            fi
        done
    done
done
echo "| null driver, ns per alloc+free pair (best of $ROUNDS rounds) | $1 | $2 |"
echo "|---|---:|---:|"
for c in $CONFIGS; do
    echo "| $c | ${best[A $c]:--} | ${best[B $c]:--} |"
done
