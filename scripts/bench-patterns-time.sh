#!/bin/bash
# Nanoseconds per alloc+free pair, arena against vmm, on the allocation patterns of
# test/bench/bench_patterns.c (the patterns of scripts/bench-patterns-instr.sh), timed on this
# machine: through the shim on a null driver, or at the pool. Each figure is the difference of a
# short run and a long one over the pairs made in between (start-up and exit taken out), each the
# fastest of RUNS (default 5), arena's and vmm's runs taken in turn. Wall-clock time moves with
# the machine's load: the instruction counts of bench-patterns-instr.sh are the stable measure;
# this says what they come to in time.
# usage: scripts/bench-patterns-time.sh BUILD [TARGET...] [-- PATTERN...]
# TARGET: pool shim shim-async shim-pitch (default: shim). PATTERN: default one-1m alt2-large
# alt2-small alt2-mix step sizes40 small40 mixed16; trace:PATH (a lifetime CSV or a gpuarena trace,
# run again each round with a keep of KEEP bytes, default 16 GiB, so that vmm maps nothing after
# the first round). PAIRS (default 2000000): about how many pairs the long run makes (its rounds
# found from a one-round run), the short run a hundredth of its rounds. BUILD must hold
# bin/bench-patterns, bench/nulldrv/libcuda.so.1 and lib/libgpuarena.so (make BUILD=DIR build-all).
set -u
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
if [ $# -ge 1 ] && { [ "$1" = -h ] || [ "$1" = --help ]; }; then
    usage
    exit 0
fi
if [ $# -lt 1 ]; then
    echo "gpuarena: bench-patterns-time.sh: name a build folder" >&2
    usage >&2
    exit 2
fi
D=$(cd "$1" 2>/dev/null && pwd) || { echo "gpuarena: $1 is not a build folder (make BUILD=$1 build-all)" >&2; exit 2; }
shift
for f in bin/bench-patterns bench/nulldrv/libcuda.so.1 lib/libgpuarena.so; do
    [ -e "$D/$f" ] || { echo "gpuarena: $D/$f is missing (build it: make BUILD=$D build-all)" >&2; exit 2; }
done
RUNS=${RUNS:-5}
case $RUNS in '' | *[!0-9]* | 0) echo "gpuarena: RUNS=$RUNS: give a count from 1" >&2; exit 2 ;; esac
PAIRS=${PAIRS:-2000000}
case $PAIRS in '' | *[!0-9]* | 0) echo "gpuarena: PAIRS=$PAIRS: give a count from 1" >&2; exit 2 ;; esac
TARGETS=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
        pool | shim | shim-async | shim-pitch) TARGETS="$TARGETS $1" ;;
        *) echo "gpuarena: no target $1 (pool, shim, shim-async, shim-pitch; patterns after --)" >&2; exit 2 ;;
    esac
    shift
done
[ $# -gt 0 ] && shift
TARGETS=${TARGETS:-shim}
PATTERNS=${*:-one-1m alt2-large alt2-small alt2-mix step sizes40 small40 mixed16}
# A sanitizer build's shim needs the sanitizer's runtime loaded first (the test tier's
# GA_SAN_RUNTIME, test/stress/build.mk).
san=${GA_SAN_RUNTIME:+$GA_SAN_RUNTIME }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
timed() { # target mode pattern rounds -> "nanoseconds pairs" of one run
    local t=$1 pre=1 s e
    case $1 in pool) t=pool-$2; pre= ;; esac
    s=$(date +%s%N)
    env LD_LIBRARY_PATH="$D/bench/nulldrv" ${pre:+LD_PRELOAD=$san$D/lib/libgpuarena.so} GPUARENA_MODE=$2 \
        ${keep:+BENCH_KEEP=$keep GPUARENA_VMM_KEEP=$keep} SIMCUDA_TOTAL_MEM=16GiB \
        "$D/bin/bench-patterns" "$t" "$3" "$4" >"$tmp/out" 2>"$tmp/err" ||
        { echo "gpuarena: bench-patterns $t $3 ($2) failed:" >&2; cat "$tmp/err" >&2; return 1; }
    e=$(date +%s%N)
    echo "$((e - s)) $(awk '{print $2}' "$tmp/out")"
}
# One row: arena's and vmm's short and long runs taken in turn, RUNS times, so that both modes
# meet the machine's load alike; each run's fastest time counts.
row() { # target pattern -> "arena-ns vmm-ns" a pair (one decimal each)
    local keep= one long short i k r x
    local -a best pairs
    case $2 in trace:*) keep=${KEEP:-17179869184} ;; esac
    one=$(timed "$1" arena "$2" 1) || return 1
    set -- "$@" $one
    long=$((PAIRS / ($4 > 0 ? $4 : 1)))
    [ "$long" -ge 2 ] || long=2
    short=$((long / 100))
    [ "$short" -ge 1 ] || short=1
    for ((i = 0; i < RUNS; i++)); do
        k=0
        for m in arena vmm; do
            for r in $short $long; do
                x=$(timed "$1" $m "$2" $r) || return 1
                set -- "$1" "$2" $x
                [ -z "${best[k]:-}" ] || [ "$3" -lt "${best[k]}" ] && best[k]=$3
                pairs[k]=$4
                k=$((k + 1))
            done
        done
    done
    awk -v a0="${best[0]}" -v a1="${best[1]}" -v v0="${best[2]}" -v v1="${best[3]}" \
        -v p0="${pairs[0]}" -v p1="${pairs[1]}" -v q0="${pairs[2]}" -v q1="${pairs[3]}" \
        'BEGIN { printf "%.1f %.1f", (a1 - a0) / (p1 - p0), (v1 - v0) / (q1 - q0) }'
}
bad=0
echo "| pattern | target | arena ns a pair | vmm ns a pair | vmm / arena |"
echo "|---|---|---:|---:|---:|"
for t in $TARGETS; do
    for p in $PATTERNS; do
        r=$(row "$t" "$p") || { echo "| $p | $t | - | - | - |"; bad=1; continue; }
        set -- $r
        a=$1 v=$2
        echo "| $p | $t | $a | $v | $(awk -v a="$a" -v v="$v" 'BEGIN { printf "%.2f", (a > 0 ? v / a : 0) }') |"
    done
done
exit $bad
