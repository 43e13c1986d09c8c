#!/bin/sh
# gpuarena's arena and OffsetAllocator (github.com/sebbbi/OffsetAllocator, MIT) replaying the same
# traces in the same loop and the same minutes (test/bench/side_by_side.cc says how): issue 9 sets
# the arena's speed target relative to OffsetAllocator's, and on a machine whose speed drifts
# only a side-by-side run compares. Nothing of OffsetAllocator is in this repository: give the
# folder of a checkout (offsetAllocator.hpp and offsetAllocator.cpp).
#   scripts/side-by-side.sh OFFSETALLOCATOR_DIR [TRACE...]
#   scripts/side-by-side.sh OFFSETALLOCATOR_DIR --scale [MAX_HOLES [PAIRS]]
# TRACE: lifetime CSVs or gpuarena traces (default: every CSV in ../shared/traces/lifetimes).
# --scale: bench-scale's pair measure for both (100 .. MAX_HOLES free holes, default 100000).
# Needs g++ (apt-get install g++) and builds into $BUILD (default build).
set -u
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    [ $# -ge 1 ] && exit 0 || exit 2
fi
OA=$1
shift
for f in offsetAllocator.hpp offsetAllocator.cpp; do
    [ -f "$OA/$f" ] || { echo "gpuarena: $OA/$f not found: give the folder of an OffsetAllocator checkout" >&2; exit 2; }
done
command -v g++ >/dev/null || { echo "gpuarena: g++ is not installed (apt-get install g++)" >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2
BUILD=${BUILD:-build}
make --no-print-directory -s BUILD="$BUILD" "$BUILD/lib/libgaalloc.a" || exit 1
mkdir -p "$BUILD/bench"
BIN=$BUILD/bench/side_by_side
g++ -std=c++17 -O2 -g -Iallocator -I"$OA" -o "$BIN" test/bench/side_by_side.cc "$OA/offsetAllocator.cpp" \
    "$BUILD/lib/libgaalloc.a" || exit 1
if [ $# -eq 0 ]; then
    set -- ../shared/traces/lifetimes/*.csv
fi
exec "$BIN" "$@"
