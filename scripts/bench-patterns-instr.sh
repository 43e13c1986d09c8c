#!/bin/bash
# Instructions per alloc+free pair, arena against vmm, on allocation patterns a program makes
# (test/bench/bench_patterns.c: one buffer freed and allocated again, sizes alternating in one
# slot, a training step freed in reverse, sizes either side of half a granule, 20 blocks of one
# size parked at once, 40 distinct sizes), at the pool and through the shim on a null driver.
# valgrind's callgrind counts a run of 100 rounds and one of 1,100; their difference over the
# pairs made in between is one pair, with start-up, warm-up and exit taken out.
#   scripts/bench-patterns-instr.sh BUILD [TARGET...] [-- PATTERN...]
# TARGET: pool shim shim-async shim-pitch (default: pool shim). PATTERN: default all; trace:PATH
# (a lifetime CSV or a gpuarena trace, run again each round: counted over 2 and 12 rounds, with a
# keep of KEEP bytes, default 16 GiB, so that vmm maps nothing after the first round).
# BUILD must hold bin/bench-patterns, bench/nulldrv/libcuda.so.1 and lib/libgpuarena.so
# (make BUILD=DIR DIR/bin/bench-patterns DIR/lib/libgpuarena.so).
set -u
if [ $# -lt 1 ]; then
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
command -v valgrind >/dev/null || { echo "gpuarena: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
D=$(cd "$1" && pwd) || exit 2
shift
for f in bin/bench-patterns bench/nulldrv/libcuda.so.1 lib/libgpuarena.so; do
    [ -e "$D/$f" ] || { echo "gpuarena: $D/$f is missing (build it: see the top of $0)" >&2; exit 2; }
done
TARGETS=
while [ $# -gt 0 ] && [ "$1" != -- ]; do TARGETS="$TARGETS $1"; shift; done
[ $# -gt 0 ] && shift
TARGETS=${TARGETS:-pool shim}
PATTERNS=${*:-one-4k one-1m one-odd7m mixed16 alt2-small alt2-small-bg alt2-large alt2-mix alt2-class alt3 step step-past-keep under-16 over-16 under-1 over-1 park20-1.5m park20-2m sizes40 small40}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
count() { # target mode pattern rounds -> "instructions pairs maps"
    local t=$1 pre=1
    case $1 in pool) t=pool-$2; pre= ;; esac
    env LD_LIBRARY_PATH="$D/bench/nulldrv" ${pre:+LD_PRELOAD=$D/lib/libgpuarena.so} GPUARENA_MODE=$2 \
        ${keep:+BENCH_KEEP=$keep GPUARENA_VMM_KEEP=$keep} \
        SIMCUDA_TOTAL_MEM=16GiB valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        "$D/bin/bench-patterns" "$t" "$3" "$4" >"$tmp/out" 2>"$tmp/err" ||
        { echo "gpuarena: bench-patterns $t $3 ($2) failed:" >&2; cat "$tmp/err" >&2; return 1; }
    echo "$(sed -n 's/^==[0-9]*== Collected : //p' "$tmp/err") $(awk '{print $2, $4}' "$tmp/out")"
}
per() { # target mode pattern -> "instructions-per-pair maps-in-the-1000-rounds"
    local a b r1=100 r2=1100 keep=
    case $3 in trace:*) r1=2 r2=12 keep=${KEEP:-17179869184} ;; esac
    a=$(count "$1" "$2" "$3" $r1) && b=$(count "$1" "$2" "$3" $r2) || return 1
    set -- $a $b
    echo "$(( ($4 - $1) / ($5 - $2) )) $(( $6 - $3 ))"
}
echo "| pattern | target | arena | vmm | vmm / arena | vmm maps in 1,000 rounds (pool; a trace: in 10) |"
echo "|---|---|---:|---:|---:|---:|"
for t in $TARGETS; do
    for p in $PATTERNS; do
        a=$(per "$t" arena "$p") && v=$(per "$t" vmm "$p") || { echo "| $p | $t | - | - | - | - |"; continue; }
        set -- $a $v
        m=$4; [ "$t" = pool ] || m=-
        echo "| $p | $t | $1 | $3 | $(awk -v a="$1" -v v="$3" 'BEGIN { printf "%.2f", v / a }') | $m |"
    done
done
