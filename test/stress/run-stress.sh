#!/bin/sh
# Tier test-stress: runs each stress program under LD_PRELOAD of the shim on the simulated driver
# (two devices), in several configurations, and writes TAP lines to one file.
#   run-stress.sh BUILD TAPFILE [SANITIZER_RUNTIME] [tsan]
# Each program prints its own TAP lines; this script prefixes them with the configuration, and
# turns a crash, a sanitizer report (non-zero exit) or a hang (timeout) into a "not ok" line, so
# one bad run never hides the others. Logs: BUILD/stress/*.log. Iteration counts are scaled down
# under TSan (4th argument), which is ~10x slower; nothing here measures time.
set -u
build=$1 tap=$2 sanrt=${3:-} tsan=${4:-}
dir=$build/stress
shim=$(cd "$build/lib" && pwd)/libgpuarena.so
sim=$(cd "$build/sim" && pwd)
: >"$tap"
scale=1
[ -n "$tsan" ] && scale=4

# run LABEL PROGRAM [VAR=VALUE...]: one configuration under the shim.
run() {
    label=$1 prog=$2
    shift 2
    log=$dir/$(printf %s "$label" | tr -c "A-Za-z0-9-" _).log
    env SIMCUDA_DEVICES=2 SIMCUDA_TOTAL_MEM=1GiB LD_LIBRARY_PATH="$sim" \
        LD_PRELOAD="$sanrt${shim:+ $shim}" "$@" timeout -k 5 120 "$dir/stress_$prog" >"$log" 2>&1
    rc=$?
    grep -E '^(not )?ok - ' "$log" | sed -E "s/^(not ok|ok) - /\1 - $label: /" >>"$tap"
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        echo "not ok - $label: timed out after 120 s (deadlock?), see $log" >>"$tap"
    elif [ $rc != 0 ]; then
        echo "not ok - $label: exit $rc ($(grep -m1 -E 'ERROR|SUMMARY|WARNING: ThreadSanitizer|gpuarena:' "$log" | cut -c1-120)), see $log" >>"$tap"
    elif ! grep -q '^ok - \|^not ok - ' "$log"; then
        echo "not ok - $label: printed no results, see $log" >>"$tap"
    fi
}

# stats_check LABEL FILE: the shim's exit statistics say nothing is left allocated.
stats_check() {
    python3 - "$2" "$1" >>"$tap" 2>&1 <<'PY' || echo "not ok - $1: the check failed (above)" >>"$tap"
import json, sys
path, label = sys.argv[1], sys.argv[2]
try:
    t = json.load(open(path))["totals"]
except Exception as e:
    print(f"not ok - {label}: stats JSON unreadable ({type(e).__name__}: {e})")
    sys.exit(0)
ok = t.get("in_use") == 0 and t.get("alloc_calls", 0) > 0
print(f"{'ok' if ok else 'not ok'} - {label}: stats at exit: in_use {t.get('in_use')}, "
      f"{t.get('alloc_calls')} allocs, {t.get('free_calls')} frees, "
      f"{t.get('failed_allocs')} failed, peak_in_use {t.get('peak_in_use')}")
PY
}

# trace_check LABEL FILE: a trace recorded by 12 threads replays in time order with every free
# after its own alloc (no free of an address not live, no alloc of an address still live), each
# device's events on their own (the replay keeps one pool per device, as the shim does).
trace_check() {
    python3 - "$1" "$2" "$build/bin/gpuarena-replay" >>"$tap" 2>&1 <<'PY' || echo "not ok - $1: the check failed (above)" >>"$tap"
import json, subprocess, sys
label, path, tool = sys.argv[1:4]
r, devices = {}, 0
for dev in ("0", "1"):  # the stress run's two devices
    p = subprocess.run([tool, "--mode", "platform", "--json", "--device", dev, path],
                       capture_output=True, text=True)
    if p.returncode == 1 and "no events on device" in p.stderr:
        continue
    try:
        one = json.loads(p.stdout)
    except ValueError:
        print(f"not ok - {label}: replay of device {dev} failed: {p.stderr.strip()[:100]}")
        sys.exit(0)
    devices += 1
    try:
        got = one["modes"]["platform"]
        for k in ("allocs", "frees", "unmatched_frees", "reused_addrs"):
            r[k] = r.get(k, 0) + got[k]
    except (KeyError, TypeError) as e:  # a check that cannot read its figures fails, visibly
        print(f"not ok - {label}: replay JSON of device {dev} lacks {e}")
        sys.exit(0)
if not devices:
    print(f"not ok - {label}: no events on devices 0 and 1")
    sys.exit(0)
bad = r["unmatched_frees"] + r["reused_addrs"]
print(f"{'ok' if bad == 0 and r['allocs'] > 0 else 'not ok'} - {label}: "
      f"{r['allocs']} allocs, {r['frees']} frees from 12 threads on {devices} devices replay in "
      f"order ({r['unmatched_frees']} unmatched frees, {r['reused_addrs']} reused live "
      f"addresses)")
PY
}

# trace_count LABEL FILE N: a trace that reads back whole (header, whole records) with N records.
trace_count() {
    python3 - "$1" "$2" "$3" >>"$tap" 2>&1 <<'PY' || echo "not ok - $1: the check failed (above)" >>"$tap"
import sys
label, path, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    data = open(path, "rb").read()
except OSError as e:
    print(f"not ok - {label}: no trace ({e})")
    sys.exit(0)
n, rest = divmod(len(data) - 32, 48)
ok = data[:8] == b"GATRACE\0" and rest == 0 and n == want
print(f"{'ok' if ok else 'not ok'} - {label}: {n} whole records of {want} expected, "
      f"{rest} stray bytes")
PY
}

# Platform mode maps and unmaps driver memory on every call, ~10x slower: fewer iterations.
for mode in arena grow vmm platform; do
    iters=$((2000 / scale))
    set -- GPUARENA_MODE=$mode
    [ "$mode" = platform ] && iters=$((500 / scale))
    rm -f "$dir/stats-$mode.json" "$dir/trace-$mode.gatrace"
    run "threads $mode" threads "$@" GPUARENA_LIMIT=64MiB STRESS_ITERS=$iters \
        GPUARENA_STATS="$dir/stats-$mode.json" GPUARENA_TRACE="$dir/trace-$mode.gatrace"
    stats_check "threads $mode" "$dir/stats-$mode.json"
    trace_check "threads $mode trace" "$dir/trace-$mode.gatrace"
done

# Host memory of the tracer (issue 8 item 7): thousands of short-lived traced threads, one
# allocation and one free each. Resident memory is checked only without a sanitizer (its own
# allocator dwarfs it). Then 8 threads of 16 pairs exit while the process exits (their buffers'
# frees race the exit flush, under TSan too); afterwards the file holds every event: the short
# threads', the racing threads' and the main thread's two.
nthreads=$((6000 / scale))
rssmax=16
[ -n "$sanrt" ] && rssmax=0
rm -f "$dir/tracemem.gatrace"
run "tracemem" tracemem STRESS_THREADS=$nthreads STRESS_RSS_MAX_MIB=$rssmax \
    STRESS_EXIT_THREADS=8 STRESS_EXIT_PAIRS=16 GPUARENA_TRACE="$dir/tracemem.gatrace"
trace_count "tracemem trace after exit" "$dir/tracemem.gatrace" $((2 * nthreads + 2 + 2 * 8 * 16))

# Every thread on device 0 (of 2): the driver's exact peak must stay under the cap.
run "threads arena one-device" threads GPUARENA_LIMIT=48MiB STRESS_DEVICES=1 \
    STRESS_ITERS=$((2000 / scale))

run "threads vmm one-device" threads GPUARENA_MODE=vmm GPUARENA_LIMIT=48MiB STRESS_DEVICES=1 \
    STRESS_ITERS=$((2000 / scale))

# The lazy fence: allocations go ahead with frees pending; the cap and the data hold as before.
run "threads arena lazy one-device" threads GPUARENA_FREE_SYNC=lazy GPUARENA_LIMIT=48MiB \
    STRESS_DEVICES=1 STRESS_ITERS=$((2000 / scale))
run "threads vmm lazy one-device" threads GPUARENA_MODE=vmm GPUARENA_FREE_SYNC=lazy \
    GPUARENA_LIMIT=48MiB STRESS_DEVICES=1 STRESS_ITERS=$((2000 / scale))

for mode in arena vmm platform; do
    run "teardown $mode" teardown GPUARENA_MODE=$mode STRESS_ITERS=$((600 / scale))
    run "fork $mode" fork GPUARENA_MODE=$mode STRESS_FORKS=$((48 / scale))
done
# The same fork test on the simulated driver alone: if this fails too, the driver is to blame.
shim_saved=$shim
shim=""
run "fork without the shim (simulated driver alone)" fork STRESS_FORKS=$((24 / scale))
shim=$shim_saved

# Another interposer preloaded after the shim: its dlsym(RTLD_NEXT) must stay relative to it.
shim_saved=$shim
shim="$shim $(cd "$dir" && pwd)/libganext.so"
run "rtld-next" next
run "mutex" mutex STRESS_ITERS=$((200000 / scale))
shim=$shim_saved

# Bad arguments: the driver's own answers first (no shim), then the shim's in both modes.
ref=$dir/badargs-driver.txt
rm -f "$ref"
env SIMCUDA_DEVICES=2 LD_LIBRARY_PATH="$sim" ${sanrt:+LD_PRELOAD=$sanrt} BADARGS_REFERENCE="$ref" \
    timeout -k 5 60 "$dir/stress_badargs" >"$dir/badargs-driver.log" 2>&1 ||
    echo "not ok - badargs: the reference run without the shim failed, see $dir/badargs-driver.log" >>"$tap"
for mode in arena platform; do
    run "badargs $mode" badargs GPUARENA_MODE=$mode BADARGS_COMPARE="$ref"
done
exit 0
