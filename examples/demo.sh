#!/bin/sh
# make demo: ex_train and ex_fragment under each gpuarena mode on the simulated driver, with a driver
# that costs 20 us per allocation and free (SIMCUDA_LATENCY_NS) and a 4 GiB device, then one table:
# wall time, allocation calls that reached the driver, peak device memory the driver handed out, and
# what the program reported. The driver's own report (SIMCUDA_REPORT) is the independent witness;
# the shim's statistics (GPUARENA_STATS=-) are kept beside it in $BUILD/demo/.
# usage: sh examples/demo.sh BUILD
b=${1:-build}
out="$b/demo"
shim="$b/lib/libgpuarena.so"
rm -rf "$out" && mkdir -p "$out" || exit 1
export LD_LIBRARY_PATH="$b/sim" SIMCUDA_LATENCY_NS=20000 SIMCUDA_TOTAL_MEM=4GiB

if [ -f "$shim" ]; then
    modes="arena grow vmm platform"
else
    echo "demo: shim not built yet ($shim missing): running on the driver directly, without gpuarena"
    modes="none"
fi

# Nanoseconds (GNU date), and no python3 here: starting an interpreter costs more than a run.
now() { date +%s%N; }

# field FILE KEY: one counter from a simulated-driver report (one "key": N per line)
field() {
    v=$(sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p" "$1" 2>/dev/null | head -1)
    echo "${v:-?}"
}

# run MODE PROGRAM ARGS...: one row of the table
run() {
    mode=$1; prog=$2; shift 2
    tag="$mode-$prog"
    # The variables that select each mode, as `gpuarena run --mode` sets them.
    case $mode in
        arena) env="GPUARENA_MODE=arena GPUARENA_PREALLOCATE=true" ;;
        grow) env="GPUARENA_MODE=arena GPUARENA_PREALLOCATE=false" ;;
        vmm) env="GPUARENA_MODE=vmm GPUARENA_PREALLOCATE=false" ;;
        platform) env="GPUARENA_MODE=platform GPUARENA_PREALLOCATE=false" ;;
        *) env="" ;;
    esac
    pre=""
    [ "$mode" = none ] || pre="LD_PRELOAD=$shim GPUARENA_STATS=-"
    t0=$(now)
    env $pre $env SIMCUDA_REPORT="$out/$tag.driver.json" "$b/examples/$prog" "$@" \
        >"$out/$tag.out" 2>"$out/$tag.stats"
    rc=$?
    t1=$(now)
    case $prog in
        ex_train) result=$(sed -n 's/.* \([0-9.]* ms\/step\) (\([0-9.]* us\/step after the first\)).*/\1, \2/p' "$out/$tag.out") ;;
        *) result="big block $(sed -n 's/.*block: \(.*\)$/\1/p' "$out/$tag.out")" ;;
    esac
    # A failed run: gpuarena's first message if it said something, else the program's last line.
    [ "$rc" = 0 ] || result="exit $rc: $( (grep -m1 '^gpuarena: ' "$out/$tag.stats"
        tail -n 1 "$out/$tag.out") | head -n 1)"
    peak=$(field "$out/$tag.driver.json" peak_bytes_in_use)
    [ "$peak" = "?" ] || peak=$((peak / 1048576))
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
    # Driver calls that take memory: cuMemAlloc, and for vmm the cuMemCreate of each granule.
    allocs=$(field "$out/$tag.driver.json" alloc_calls)
    creates=$(field "$out/$tag.driver.json" create_calls)
    [ "$allocs" = "?" ] || [ "$creates" = "?" ] || allocs=$((allocs + creates))
    printf '%-9s %-12s %7s %13s %15s  %s\n' "$mode" "$prog" "$secs" "$allocs" "$peak" "$result"
}

printf '%-9s %-12s %7s %13s %15s  %s\n' mode program "wall s" "driver allocs" "peak drv MiB" result
for m in $modes; do
    run "$m" ex_train 50 16 1024
    run "$m" ex_fragment 64 0.95 4
done
# The arena's failure on ex_fragment is fragmentation, and gpuarena says so on stderr: show it.
if grep -q '^gpuarena: out of memory from fragmentation' "$out/arena-ex_fragment.stats" 2>/dev/null; then
    echo
    echo "gpuarena's explanation of the arena's out-of-memory on ex_fragment (from its stderr):"
    grep '^gpuarena: ' "$out/arena-ex_fragment.stats" | grep -v '^gpuarena: *[{}"]' | head -8
fi
echo
echo "demo: outputs, driver reports and gpuarena statistics are in $out/"
