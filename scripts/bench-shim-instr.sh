#!/bin/bash
# Instructions per cuMemAlloc+cuMemFree pair through the shim, on bench-shim's null-driver loop, for
# each configuration of scripts/bench-shim-compare.sh: valgrind's callgrind counts a run of 60,000
# pairs and one of 10,000 (bench_shim repeats its loop 3 times), and the difference over 150,000 is
# the cost of one pair with start-up and exit taken out. Counts do not drift with the machine's load, so they settle what timings cannot.
#   scripts/bench-shim-instr.sh BUILD [CONFIG...]     (CONFIG: direct pool arena arena-none platform vmm
#   arena-large vmm-large arena-odd vmm-odd; -large: bench-shim's 1-64 MiB blocks freed and allocated
#   again at their size; -odd: its 1.5-24 MiB plus 4 KiB blocks, no granule multiple, the same way)
# BUILD must hold lib/libgpuarena.so, preload/bench_shim and preload/nulldrv/libcuda.so.1
# (make BUILD=DIR DIR/lib/libgpuarena.so DIR/preload/bench_shim DIR/preload/nulldrv/libcuda.so.1).
set -u
if [ $# -lt 1 ]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
command -v valgrind >/dev/null || { echo "gpuarena: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
D=$(cd "$1" && pwd) || exit 2
shift
CONFIGS=${*:-pool arena arena-none platform vmm}
for f in lib/libgpuarena.so preload/bench_shim preload/nulldrv/libcuda.so.1; do
    [ -e "$D/$f" ] || { echo "gpuarena: $D/$f is missing (build it: see the top of $0)" >&2; exit 2; }
done
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
count() { # config pairs -> instructions of the whole run
    local what=measure mode=arena sync= pre=1
    case $1 in
        arena-large) what=measure-large ;;
        vmm-large) what=measure-large; mode=vmm ;;
        arena-odd) what=measure-odd ;;
        vmm-odd) what=measure-odd; mode=vmm ;;
        direct) pre= ;;
        pool) what=pool; pre= ;;
        arena-none) sync=none ;;
        platform|vmm) mode=$1 ;;
    esac
    env LD_LIBRARY_PATH="$D/preload/nulldrv" ${pre:+LD_PRELOAD=$D/lib/libgpuarena.so} \
        GPUARENA_MODE=$mode ${sync:+GPUARENA_FREE_SYNC=$sync} SIMCUDA_TOTAL_MEM=16GiB \
        valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$D/preload/bench_shim" $what "$2" \
        >/dev/null 2>"$tmp/err" || { echo "gpuarena: $1 failed under valgrind:" >&2; cat "$tmp/err" >&2; return 1; }
    sed -n 's/^==[0-9]*== Collected : //p' "$tmp/err"
}
echo "| configuration | instructions per alloc+free pair |"
echo "|---|---:|"
for c in $CONFIGS; do
    a=$(count "$c" 10000) && b=$(count "$c" 60000) || { echo "| $c | - |"; continue; }
    echo "| $c | $(( (b - a) / 150000 )) |"
done
