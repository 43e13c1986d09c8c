#!/bin/sh
# Runs fuzz_hooks (random sequences of hooked calls, test/fuzz/fuzz_hooks.c) under the preloaded shim
# on the simulated driver, in every mode, and prints one TAP line per mode.
#   run-hooks.sh FUZZDIR SIMDIR SHIM SEEDS OPS
# Seeds 1..SEEDS, OPS steps each, a 128 MiB cap on a 1 GiB device. A failing seed's steps are in
# FUZZDIR/hooks-MODE.log; rerun one with the line the log gives.
set -u
dir=$1 sim=$2 shim=$3 seeds=$4 ops=$5
for mode in arena grow vmm platform; do
    log=$dir/hooks-$mode.log
    : >"$log"
    bad=""
    s=1
    while [ "$s" -le "$seeds" ]; do
        cmd="SIMCUDA_TOTAL_MEM=1GiB LD_LIBRARY_PATH=$sim LD_PRELOAD=$shim GPUARENA_MODE=$mode GPUARENA_LIMIT=128MiB GPUARENA_LOG=error $dir/fuzz_hooks $s $ops"
        echo "# $cmd" >>"$log"
        if ! env SIMCUDA_TOTAL_MEM=1GiB LD_LIBRARY_PATH="$sim" LD_PRELOAD="$shim" GPUARENA_MODE=$mode \
                GPUARENA_LIMIT=128MiB GPUARENA_LOG=error timeout 300 "$dir/fuzz_hooks" "$s" "$ops" >>"$log" 2>&1; then
            bad="$bad $s"
        fi
        s=$((s + 1))
    done
    if [ -z "$bad" ]; then
        echo "ok - fuzz hooks $mode: $seeds seeds x $ops hooked calls (hostile arguments, contexts destroyed), every check held"
    else
        echo "not ok - fuzz hooks $mode: seeds$bad failed (see $log)"
    fi
done
