#!/bin/bash
# Instructions per free+allocation pair at the pool, arena against vmm, one size at a time: the
# cost of an allocation and a free that map nothing (issue 10), without the shim around them.
# valgrind's callgrind counts bench-pairs' run of 12,000 pairs and of 2,000 (LIVE blocks of SIZE,
# each freed and allocated again in turn), and the difference over 10,000 is one pair.
#   scripts/bench-pool-instr.sh BUILD [LIVE [SIZE...]]
# LIVE: blocks kept live (default 16; 1 = one block freed and allocated again). SIZE: bytes, as
# many as wanted, in the sizes grammar (default: 4KiB 300kB 1MiB 1.5MiB 2MiB 3MiB 8MiB 7172KiB).
# BUILD must hold bin/bench-pairs (make BUILD=DIR DIR/bin/bench-pairs).
set -u
if [ $# -lt 1 ]; then
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
command -v valgrind >/dev/null || { echo "gpuarena: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
B=$(cd "$1" && pwd)/bin/bench-pairs
[ -x "$B" ] || { echo "gpuarena: $B is missing (build it: make BUILD=$1 $1/bin/bench-pairs)" >&2; exit 2; }
LIVE=${2:-16}
shift $(( $# > 1 ? 2 : 1 ))
SIZES=${*:-4KiB 300kB 1MiB 1.5MiB 2MiB 3MiB 8MiB 7172KiB}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
count() { # mode size pairs -> instructions of the whole run
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$B" "$1" "$2" "$3" "$LIVE" \
        >/dev/null 2>"$tmp/err" || { echo "gpuarena: bench-pairs $1 $2 failed:" >&2; cat "$tmp/err" >&2; return 1; }
    sed -n 's/^==[0-9]*== Collected : //p' "$tmp/err"
}
per() { local a b; a=$(count "$1" "$2" 2000) && b=$(count "$1" "$2" 12000) && echo $(( (b - a) / 10000 )); }
echo "| size, $LIVE live | arena | vmm | vmm / arena |"
echo "|---:|---:|---:|---:|"
for s in $SIZES; do
    a=$(per arena "$s") && v=$(per vmm "$s") || { echo "| $s | - | - | - |"; continue; }
    echo "| $s | $a | $v | $(awk -v a="$a" -v v="$v" 'BEGIN { printf "%.2f", v / a }') |"
done
