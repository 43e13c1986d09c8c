#!/bin/bash
# gpu-check.sh: the checks that need a real GPU, in one short run (a few minutes on one GPU).
#
# Builds the shim, the examples and the replay tool (no test packages needed), then on the real
# driver: every example under each mode; ex_alloctime (cuMemAlloc+cuMemFree through the driver
# against each mode, small and large blocks, vmm with and without kept granules); small PyTorch,
# JAX and CuPy jobs in each mode with the framework's own pool and without it (each checked to have
# gone through gpuarena by its statistics); the cap (an allocation past it fails with out-of-memory,
# cuMemGetInfo reports the cap, and nvidia-smi never shows the process above the cap plus context
# overhead); a freed buffer still written by a stream, per GPUARENA_FREE_SYNC; the frameworks' async
# allocators. Prints a markdown table of results and writes it, with every log and statistics file,
# to build/gpu-check/, or under the device tool to $OUT as gpu-check.md and gpu-check-logs.tgz.
#
# usage: scripts/gpu-check.sh          exit 0 when every check passed
#   GPU_CHECK_TIMEOUT=SECONDS bounds each program run (default 90).
# What it builds needs gcc, make and the CUDA toolkit's headers alone (no Check, no uthash: only the
# bench-alloc benchmark, not built here, includes uthash.h).
set -u
cd "$(dirname "$0")/.."
# Under the device tool ($OUT set), whose answer carries only a few files back: the logs go to a
# folder of their own, and $OUT gets the report and one archive of everything, refreshed after
# every section (so a run cut short still brings back what it did).
dest=${OUT:-}
if [ -n "$dest" ]; then
    out=$(mktemp -d) || exit 1
    trap 'rm -rf "$out"' EXIT
else
    out=build/gpu-check
fi
mkdir -p "$out"
report=$out/gpu-check.md
save() {
    [ -n "$dest" ] || return 0
    cp "$report" "$dest/gpu-check.md" && tar czf "$dest/gpu-check-logs.tgz" -C "$out" . 2>/dev/null
}
shim=$PWD/build/lib/libgpuarena.so
ex=$PWD/build/examples
pass=0 fail=0
limit=${GPU_CHECK_TIMEOUT:-90}  # seconds for each program run
: >"$report"

say() { echo "$*" | tee -a "$report"; }
row() { say "| $1 | $2 | $3 |"; }
check() { # check NAME STATUS DETAIL
    if [ "$2" = ok ]; then pass=$((pass + 1)); elif [ "$2" != info ]; then fail=$((fail + 1)); fi
    row "$1" "$2" "$3"
}

say "# gpu-check $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$report"
for m in torch jax cupy; do
    python3 -c "import $m; print('$m', $m.__version__)" 2>&1 | tail -1 | sed 's/^/python: /' | tee -a "$report"
done
make -j"$(nproc)" build/lib/libgpuarena.so build/bin/gpuarena-replay \
    build/examples/ex_direct build/examples/ex_dlsym build/examples/ex_getproc \
    build/examples/ex_train build/examples/ex_fragment build/examples/ex_alloctime \
    >"$out/build.log" 2>&1 || {
    tail -20 "$out/build.log"
    # a build carried from another machine (the device tool's carry) still runs
    [ -x "$shim" ] && [ -x "$ex/ex_alloctime" ] || { say "build failed: see build.log"; exit 1; }
    say "build failed here (see build.log): running the build that came with the tree"
}

# mode_env MODE: the environment for one gpuarena mode ("none" = no shim)
mode_env() {
    case $1 in
        none) echo "" ;;
        arena|grow|vmm|platform) echo "LD_PRELOAD=$shim GPUARENA_MODE=$1" ;;
        vmm-keep0) echo "LD_PRELOAD=$shim GPUARENA_MODE=vmm GPUARENA_VMM_KEEP=0" ;;
        arena-nosync|vmm-nosync) echo "LD_PRELOAD=$shim GPUARENA_MODE=${1%-nosync} GPUARENA_FREE_SYNC=none" ;;
        arena-lazy) echo "LD_PRELOAD=$shim GPUARENA_MODE=arena GPUARENA_FREE_SYNC=lazy" ;;
    esac
}
# run NAME MODE [VAR=VALUE...] -- CMD...: runs one command bounded by $limit s, log in $out
run() {
    name=$1 mode=$2; shift 2
    vars=()
    while [ "$1" != -- ]; do vars+=("$1"); shift; done; shift
    log=$out/$name-$mode.log
    # shellcheck disable=SC2046
    env $(mode_env "$mode") GPUARENA_STATS="$out/$name-$mode.stats.json" "${vars[@]}" \
        timeout "$limit" "$@" >"$log" 2>&1
}
# served NAME MODE: what gpuarena's statistics say it served in that run ("" without the shim);
# returns 1 when a shim mode served no allocation (the program's memory did not go through gpuarena)
served() {
    [ "$2" = none ] && return 0
    python3 - "$out/$1-$2.stats.json" <<'PY'
import json, sys
try:
    t = json.load(open(sys.argv[1]))["totals"]
except Exception as e:
    print(f"no statistics ({type(e).__name__})"); sys.exit(1)
print(f"gpuarena: {t['alloc_calls']} allocs, {t['driver_alloc_calls']} driver allocs, "
      f"peak {t['peak_in_use'] >> 20} MiB in use, {t['peak_reserved'] >> 20} MiB reserved;")
sys.exit(0 if t["alloc_calls"] > 0 else 1)
PY
}
# fwcheck LABEL NAME MODE [VAR=VALUE...] -- CMD...: a framework run; ok when it exits 0 and, under
# the shim, gpuarena served its allocations
fwcheck() {
    label=$1 name=$2 mode=$3; shift 3
    if run "$name" "$mode" "$@"; then r=ok; else r=FAIL; fi
    s=$(served "$name" "$mode") || r=FAIL
    check "$label" $r "$s $(tail -1 "$out/$name-$mode.log" | cut -c1-110)"
}
section() { save; say ""; say "## $1 ($(date -u +%T))"; }

section "Examples on the real driver"; say "| check | result | detail |"; say "|---|---|---|"
for mode in none arena grow vmm platform; do
    for prog in "ex_direct 200 1024 3" "ex_dlsym 64 256" "ex_getproc 32 64" "ex_train 50 16 1024"; do
        set -- $prog
        if run "$1" "$mode" -- "$ex/$1" "${@:2}"; then
            check "$1 ($mode)" ok "$(tail -1 "$out/$1-$mode.log" | cut -c1-90)"
        else
            check "$1 ($mode)" FAIL "$(tail -1 "$out/$1-$mode.log" | cut -c1-90)"
        fi
    done
done

section "cuMemAlloc+cuMemFree: driver against the arena"
say "| mode | sizes | ns per pair | first pair |"; say "|---|---|---|---|"
# small blocks (up to 4 MiB) and large ones (up to 64 MiB; in vmm mode with the default keep and
# with GPUARENA_VMM_KEEP=0, where every free unmaps and every allocation maps: the remapping cost);
# the -nosync rows without the free's fence (GPUARENA_FREE_SYNC=none: nothing runs on the GPU
# here, so nothing is at risk), which separates the fence's cuCtxSynchronize from the rest; the
# rows with 8 GiB held (4,096 more granules mapped in vmm mode) whether the driver's calls on the
# way cost more with more mappings (vmm's gap to arena on an H200 grew from 0.11 to 0.6 us a pair
# from 3 to 32 granules mapped)
for cfg in "none 20000 4096" "platform 20000 4096" "arena 20000 4096" "vmm 20000 4096" \
           "arena-nosync 20000 4096" "vmm-nosync 20000 4096" "arena-lazy 20000 4096" \
           "arena 20000 4096 8192" "vmm 20000 4096 8192" "vmm-nosync 20000 4096 8192" \
           "none 2000 65536" "arena 2000 65536" "vmm 2000 65536" "vmm-keep0 500 65536" \
           "arena-nosync 2000 65536" "vmm-nosync 2000 65536"; do
    set -- $cfg
    name=alloctime$3${4:+-hold$4}
    run "$name" "$1" -- "$ex/ex_alloctime" "$2" "$3" ${4:+"$4"}
    line=$(grep 'ns per' "$out/$name-$1.log")
    ns=$(echo "$line" | sed -n 's/.*: \([0-9]*\) ns per.*/\1/p')
    first=$(echo "$line" | sed -n 's/.*first pair \([0-9.]* ms\).*/\1/p')
    say "| $1 | up to $(($3 / 1024)) MiB${4:+, $4 MiB held} | ${ns:-failed} | ${first:-} |"
done

section "Frameworks under each mode"; say "| check | result | detail |"; say "|---|---|---|"
for fw in torch jax cupy; do
    for mode in none arena grow vmm platform; do
        for pool in framework fair; do
            v=(GPUARENA_LOG=warn) arg=()
            if [ $pool = fair ]; then
                case $fw in
                    torch) v=(PYTORCH_NO_CUDA_MEMORY_CACHING=1) ;;
                    jax) v=(XLA_PYTHON_CLIENT_ALLOCATOR=platform) ;;
                    cupy) arg=(--no-pool) ;;
                esac
            fi
            fwcheck "$fw ($pool pool, $mode)" "${fw}_$pool" "$mode" "${v[@]}" -- python3 "examples/${fw}_small.py" "${arg[@]}"
        done
    done
done

# The cap: 4 GiB. PyTorch without its cache allocates 512 MiB blocks until it fails; nvidia-smi
# samples the process's memory meanwhile. Context overhead on a recent GPU is ~0.5 GiB.
section "The cap (GPUARENA_LIMIT=4GiB)"; say "| check | result | detail |"; say "|---|---|---|"
cat >"$out/cap.py" <<'PY'
import sys, time, torch
free, total = torch.cuda.mem_get_info()
print(f"mem_get_info total {total >> 20} MiB free {free >> 20} MiB", flush=True)
held = []
try:
    while True:
        held.append(torch.empty(512 << 20, dtype=torch.uint8, device="cuda"))
except Exception as e:  # OutOfMemoryError; without the cache PyTorch 2.11 raises AcceleratorError
    what = "OOM" if "out of memory" in str(e) else f"{type(e).__name__}"
    print(f"{what} after {len(held) * 512} MiB: {str(e).splitlines()[0][:80]}", flush=True)
time.sleep(1.5)
print(f"held {len(held) * 512} MiB")
PY
base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
for mode in arena platform; do
    # the process's own figure where nvidia-smi lists processes (not in every container); the
    # GPU's used memory above what it was before otherwise
    (while sleep 0.1; do
        nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits
        nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | sed 's/^/gpu, /'
    done) >"$out/smi-$mode.csv" 2>/dev/null &
    mon=$!
    run cap "$mode" PYTORCH_NO_CUDA_MEMORY_CACHING=1 GPUARENA_LIMIT=4GiB -- python3 "$out/cap.py"
    kill $mon 2>/dev/null; wait $mon 2>/dev/null
    log=$out/cap-$mode.log
    peak=$(awk -F', ' '$1 != "gpu" { if ($2 > m) m = $2 } END { print m + 0 }' "$out/smi-$mode.csv")
    how="process"
    if [ "$peak" = 0 ]; then
        peak=$(awk -F', ' -v b="${base:-0}" '$1 == "gpu" { if ($2 - b > m) m = $2 - b } END { print m + 0 }' "$out/smi-$mode.csv")
        how="GPU memory.used above the ${base:-0} MiB before"
    fi
    grep -q "total 4096 MiB" "$log" && r=ok || r=FAIL
    check "cuMemGetInfo total = cap ($mode)" $r "$(head -1 "$log")"
    held=$(sed -n 's/^held \([0-9]*\) MiB/\1/p' "$log")
    grep -q "^OOM after" "$log" && [ "${held:-99999}" -le 4096 ] && r=ok || r=FAIL
    check "allocation past the cap fails ($mode)" $r "$(grep -m1 '^OOM' "$log")"
    [ "$peak" -gt 0 ] && [ "$peak" -le $((4096 + 768)) ] && r=ok || r=FAIL
    check "nvidia-smi peak <= cap + 768 MiB context ($mode)" $r "peak ${peak} MiB ($how)"
done

# A driver pool keeps freed memory when its release threshold is above 0 (PyTorch's cudaMallocAsync
# backend sets it to the maximum): in platform mode gpuarena counts that memory and trims the pool
# when another allocation needs the room, so 3 GiB kept and 3 GiB more never sit under 4 GiB.
cat >"$out/cap_async.py" <<'PY'
import time, torch, cupy
x = [torch.empty(512 << 20, dtype=torch.uint8, device="cuda") for _ in range(6)]
del x
torch.cuda.synchronize()
p = cupy.cuda.runtime.malloc(3 << 30)
print("cudaMalloc of 3 GiB after 3 GiB went back to the pool: served", flush=True)
time.sleep(1.5)
cupy.cuda.runtime.free(p)
PY
(while sleep 0.1; do
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | sed 's/^/gpu, /'
done) >"$out/smi-async.csv" 2>/dev/null &
mon=$!
run cap_async platform PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync GPUARENA_LIMIT=4GiB -- \
    python3 "$out/cap_async.py"
kill $mon 2>/dev/null; wait $mon 2>/dev/null
peak=$(awk -F', ' '$1 != "gpu" { if ($2 > m) m = $2 } END { print m + 0 }' "$out/smi-async.csv")
[ "$peak" = 0 ] && peak=$(awk -F', ' -v b="${base:-0}" '$1 == "gpu" { if ($2 - b > m) m = $2 - b } END { print m + 0 }' "$out/smi-async.csv")
grep -q "served" "$out/cap_async-platform.log" && [ "$peak" -gt 0 ] && [ "$peak" -le $((4096 + 768)) ] && r=ok || r=FAIL
check "pool-kept memory under the cap (torch cudaMallocAsync, platform)" $r "peak ${peak} MiB; $(tail -1 "$out/cap_async-platform.log" | cut -c1-80)"

# Stream-ordered safety (issue 13): a cudaFree while a side stream still writes the buffer, then a
# new allocation of the same size. Safe settings must keep the data; none may lose it (reported).
section "Freed memory and streams"; say "| check | result | detail |"; say "|---|---|---|"
for sync in deferred lazy device none; do
    for mode in arena vmm; do
        run "hazard_$sync" "$mode" PYTORCH_NO_CUDA_MEMORY_CACHING=1 GPUARENA_FREE_SYNC=$sync -- \
            python3 examples/torch_hazard.py
        rc=$?
        if [ $sync = none ]; then r=info; elif [ $rc = 0 ]; then r=ok; else r=FAIL; fi
        check "torch hazard ($mode, FREE_SYNC=$sync)" $r "$(tail -1 "$out/hazard_$sync-$mode.log" | cut -c1-100)"
    done
done
# PyTorch without its cache under the lazy fence (a training loop's frees with the GPU busy).
fwcheck "torch (fair pool, arena, FREE_SYNC=lazy)" torch_lazy arena PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
    GPUARENA_FREE_SYNC=lazy -- python3 examples/torch_small.py
# The stream-ordered pool: the frameworks' async allocators reach cuMemAllocAsync/cuMemFreeAsync.
for mode in arena vmm platform; do
    fwcheck "torch cudaMallocAsync backend ($mode)" torch_async "$mode" PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- python3 examples/torch_small.py
    fwcheck "jax cuda_async allocator ($mode)" jax_async "$mode" XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async -- python3 examples/jax_small.py
done

# CUDA graphs: temporaries allocated and freed inside a capture, the graph replayed (the capture
# rules: graph memory passed to the driver, pool blocks freed in a capture kept; not run by the
# simulated driver, which has no graphs).
for mode in arena vmm platform; do
    fwcheck "torch CUDA graph ($mode)" torch_graph "$mode" -- python3 examples/torch_graph.py
    fwcheck "torch CUDA graph, cudaMallocAsync backend ($mode)" torch_graph_async "$mode" \
        PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync -- python3 examples/torch_graph.py
done

say ""; say "$pass passed, $fail failed"
save
[ "$fail" = 0 ]
