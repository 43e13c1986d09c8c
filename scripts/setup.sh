#!/bin/sh
# Installs what building and testing gpuarena needs, from Debian's archive, when it is missing.
# Quiet and quick when everything is there; as root on Debian it installs everything missing,
# otherwise (a user, or a machine without apt-get) it says what to install and stops only when
# the goal needs one of them.
# usage: sh scripts/setup.sh [GOAL]   GOAL: demo, build, test or all (the default)
#   demo   needs none of them (cc, make and the CUDA headers only)
#   build  `make`, the sanitizer builds: check, uthash-dev, pkg-config
#   test   `make test`, `make bench`: and python3, python3-matplotlib, clang, libclang-rt-dev, g++
#   all    `make deps`, `make valgrind`: and valgrind
set -e
goal=${1:-all}
case $goal in
    demo|build|test|all) ;;
    *) echo "usage: sh scripts/setup.sh [demo|build|test|all]" >&2; exit 2 ;;
esac
need="" needed=""
# miss PACKAGE LEVEL: PACKAGE is missing; LEVEL is the first goal that needs it
miss() {
    need="$need $1"
    case $goal:$2 in
        build:build|test:build|test:test|all:*) needed="$needed $1" ;;
    esac
}
[ -f /usr/include/check.h ] || miss check build
[ -f /usr/include/uthash.h ] || miss uthash-dev build
command -v pkg-config >/dev/null 2>&1 || miss pkg-config build
# The command and its tests run under any python3 on PATH (standard library only); charts are
# drawn by Debian's /usr/bin/python3, for which python3-matplotlib installs, whatever python3 comes
# first on PATH (scripts/gpuarena_cli/plot.py).
[ -x /usr/bin/python3 ] || miss python3 test
/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1 || miss python3-matplotlib test
# Hardening tiers (test/fuzz, test/stress): clang with libFuzzer for the fuzz tier, valgrind for
# `make valgrind`; gcc's own ASan/TSan runtimes come with gcc.
command -v clang >/dev/null 2>&1 || miss clang test
# libFuzzer is compiler-rt's, named by the machine: libclang_rt.fuzzer-x86_64.a, and on arm64
# (Debian's libclang-rt-14-dev) libclang_rt.fuzzer-aarch64.a, in lib/linux of clang's resource
# folder, or libclang_rt.fuzzer.a in a folder per target (lib/aarch64-unknown-linux-gnu) where
# LLVM is built that way. Asked of clang first (its --print-runtime-dir), then of every llvm-*;
# only the x86-64 name was known until 2026-12-07 (an outside check).
fuzzer_found() {
    arch=$(uname -m 2>/dev/null) || arch=
    rt=$(clang --print-runtime-dir 2>/dev/null) || rt=
    [ -n "$arch" ] || return 1
    for f in "$rt/libclang_rt.fuzzer-$arch.a" "$rt/libclang_rt.fuzzer.a" \
             /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-"$arch".a \
             /usr/lib/llvm-*/lib/clang/*/lib/"$arch"-*/libclang_rt.fuzzer.a; do
        [ -f "$f" ] && return 0
    done
    return 1
}
fuzzer_found || miss libclang-rt-dev test
command -v valgrind >/dev/null 2>&1 || miss valgrind all
# scripts/side-by-side.sh (issue 9's yardstick, OffsetAllocator, is C++) and its test.
command -v g++ >/dev/null 2>&1 || miss g++ test
[ -n "$need" ] || exit 0

# Said when nothing is installed here: stop only when the goal needs one of the packages.
give_up() {
    if [ -n "$needed" ]; then
        echo "gpuarena: make stops here: it needs$needed" >&2
        exit 1
    fi
    echo "gpuarena: going on without them: this goal ($goal) needs none of them" >&2
    exit 0
}
if ! command -v apt-get >/dev/null 2>&1; then
    echo "gpuarena: missing packages (Debian's names):$need; this machine has no apt-get (it is" \
        "not Debian or Ubuntu): install the same packages with its own package manager, then" \
        "run make again" >&2
    give_up
fi
if [ "$(id -u)" != 0 ]; then
    echo "gpuarena: missing packages:$need; install them with: sudo apt-get install$need" >&2
    give_up
fi
echo "gpuarena: installing missing packages:$need" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
if ! { apt-get update -qq >/dev/null && apt-get install -y -qq $need >/dev/null; }; then
    echo "gpuarena: apt-get could not install$need (its message is above: no network, or" \
        "another apt-get running?); install them yourself with: apt-get install$need" >&2
    give_up
fi
