#!/bin/sh
# Runs one libFuzzer target for a bounded time and prints one TAP line for it.
#   run-fuzz.sh FUZZDIR TARGET SECONDS [keep]
# FUZZDIR holds the built fuzz_TARGET and seeds/TARGET (make_seeds.py). The run is seeded
# (-seed=1) and starts from the seeds alone, so CI runs are comparable; with "keep" (make
# fuzz-long) the corpus it grows is kept in FUZZDIR/corpus-TARGET and the next run resumes from it.
# A crash leaves its input in FUZZDIR/crash-TARGET-*; rerun it with: FUZZDIR/fuzz_TARGET FILE
set -u
dir=$1 target=$2 secs=$3 keep=${4:-}
bin=$dir/fuzz_$target
corpus=$dir/corpus-$target
log=$dir/fuzz-$target.log
[ -n "$keep" ] || rm -rf "$corpus"
mkdir -p "$corpus"
dict=""
[ -f "test/fuzz/$target.dict" ] && dict="-dict=test/fuzz/$target.dict"
# close_fd_mask=2: the targets' own stderr (rejected option values) is noise; libFuzzer and the
# sanitizers still report through their own copy of stderr.
"$bin" -seed=1 -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$dir/crash-$target-" $dict \
    "$corpus" "$dir/seeds/$target" >"$log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
if [ "$rc" = 0 ]; then
    echo "ok - fuzz $target: ${runs:-?} inputs in ${secs}s, no crash, no property failure"
else
    why=$(grep -m1 -E 'ERROR: |property failed|runtime error|deadly signal' "$log" | cut -c1-160)
    art=$(ls "$dir"/crash-"$target"-* "$dir"/timeout-"$target"-* "$dir"/oom-"$target"-* 2>/dev/null \
          | head -n 1)
    echo "not ok - fuzz $target: exit $rc: ${why:-see $log} (input: ${art:-none}; rerun: $bin FILE)"
fi
