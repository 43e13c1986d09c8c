#!/bin/sh
# Sums the TAP files the test tiers wrote and prints one closing line "N passed, N failed".
# A tier that wrote no TAP file (it crashed or did not build) counts as one failure.
dir=$1; shift
tp=0; tf=0
for tier in "$@"; do
    f="$dir/$tier.tap"
    if [ ! -s "$f" ]; then
        echo "$tier: no results (the tier did not run to the end): 0 passed, 1 failed"
        tf=$((tf + 1)); continue
    fi
    p=$(grep -c '^ok' "$f"); n=$(grep -c '^not ok' "$f")
    echo "$tier: $p passed, $n failed"
    [ "$n" = 0 ] || grep '^not ok' "$f" | sed "s/^/  $tier: /"
    tp=$((tp + p)); tf=$((tf + n))
done
echo "$tp passed, $tf failed"
[ "$tf" = 0 ]
