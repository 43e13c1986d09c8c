#!/bin/sh
# Sums the TAP files the test tiers wrote and prints one closing line "N passed, N failed".
# A tier that wrote no TAP file (it crashed or did not build) counts as one failure. Every test that
# did not pass is listed with the first line of its reason (the "# ..." lines after it), and every
# skipped one with its SKIP reason, so a test that could not run says why here, not only in the
# .tap file.
dir=$1; shift
tp=0; tf=0
for tier in "$@"; do
    f="$dir/$tier.tap"
    if [ ! -s "$f" ]; then
        echo "$tier: no results (the tier did not run to the end; see $dir/$tier.log): 0 passed, 1 failed"
        tf=$((tf + 1)); continue
    fi
    p=$(grep -c '^ok' "$f"); n=$(grep -c '^not ok' "$f")
    k=$(grep -c '^ok.*# *SKIP' "$f")
    if [ "$k" = 0 ]; then echo "$tier: $p passed, $n failed"
    else echo "$tier: $p passed ($k of them skipped), $n failed"; fi
    # A skipped test is counted as passed (TAP's rule) but said, with its reason (issue 12: a test
    # that cannot run says why in the summary; only failures were listed).
    [ "$k" = 0 ] || grep '^ok.*# *SKIP' "$f" | sed "s/^/  $tier: /"
    [ "$n" = 0 ] || awk -v t="$tier" '
        /^not ok/ { if (name != "") print name; name = "  " t ": " $0; next }
        /^# / && name != "" { sub(/^# /, ""); print name " (" $0 ")"; name = ""; next }
        { if (name != "") print name; name = "" }
        END { if (name != "") print name }' "$f"
    tp=$((tp + p)); tf=$((tf + n))
done
echo "$tp passed, $tf failed"
[ "$tf" = 0 ]
