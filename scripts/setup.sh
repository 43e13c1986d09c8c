#!/bin/sh
# Installs what building and testing gpuarena needs, from Debian's archive, when it is missing.
# Quiet and quick when everything is there; as root it installs, otherwise it says what to run.
set -e
need=""
[ -f /usr/include/check.h ] || need="$need check"
[ -f /usr/include/uthash.h ] || need="$need uthash-dev"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
# The command and its tests run under any python3 on PATH (standard library only); charts are
# drawn by Debian's /usr/bin/python3, for which python3-matplotlib installs, whatever python3 comes
# first on PATH (scripts/gpuarena_cli/plot.py).
[ -x /usr/bin/python3 ] || need="$need python3"
/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1 || need="$need python3-matplotlib"
# Hardening tiers (test/fuzz, test/stress): clang with libFuzzer for the fuzz tier, valgrind for
# `make valgrind`; gcc's own ASan/TSan runtimes come with gcc.
command -v clang >/dev/null 2>&1 || need="$need clang"
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
    need="$need libclang-rt-dev"
command -v valgrind >/dev/null 2>&1 || need="$need valgrind"
# scripts/side-by-side.sh (issue 9's yardstick, OffsetAllocator, is C++) and its test.
command -v g++ >/dev/null 2>&1 || need="$need g++"
[ -n "$need" ] || exit 0
if [ "$(id -u)" != 0 ]; then
    echo "gpuarena: missing packages:$need; install them with: sudo apt-get install$need" >&2
    exit 1
fi
echo "gpuarena: installing missing packages:$need" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# shellcheck disable=SC2086
apt-get install -y -qq $need >/dev/null
