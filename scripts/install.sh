#!/bin/sh
# make install / make uninstall: puts gpuarena under a prefix so that PREFIX/bin/gpuarena works from
# any directory, and takes exactly that back out.
#   PREFIX/bin/gpuarena                      the command (finds its package in ../lib/gpuarena)
#   PREFIX/bin/gpuarena-replay               the replay tool
#   PREFIX/lib/libgpuarena.so                the shim, for LD_PRELOAD
#   PREFIX/lib/gpuarena/gpuarena_cli/*.py    the command's Python package
#   PREFIX/lib/gpuarena/VERSION
#   PREFIX/lib/gpuarena/sim/libcuda.so.1     the simulated driver, for `run --sim`/`doctor --sim`;
#                                            in a folder of its own, never on the loader's path
# Install writes the list of what it put there to PREFIX/lib/gpuarena/MANIFEST; uninstall removes
# the files that list names (and the bytecode Python wrote beside the package), then the folders
# install made, when empty. DESTDIR stages a package: files go to DESTDIR/PREFIX, and nothing
# installed depends on where it lies (the command finds its pieces relative to itself).
# usage: sh scripts/install.sh install|uninstall BUILD PREFIX [DESTDIR]
set -e
what=$1 build=$2 prefix=$3 destdir=$4
# From any directory: BUILD as the caller named it, the sources from the checkout this script is
# in (run from elsewhere, it said scripts/gpuarena "is not built"; an outside check, 2026-12-07).
if [ "$what" = install ]; then
    build=$(cd "$build" 2>/dev/null && pwd) || {
        echo "gpuarena: no build folder '$2' here: build first (make BUILD=$2), or name it" >&2
        exit 1
    }
fi
case $destdir in ""|/*) ;; *) destdir="$(pwd)/$destdir" ;; esac
cd "$(dirname "$0")/.."
case $prefix in
    /*) ;;
    *) echo "gpuarena: PREFIX must be an absolute path, not '$prefix' (try PREFIX=\$HOME/.local)" >&2
       exit 2 ;;
esac
# ld.so splits LD_PRELOAD at white space and colons: the shim there could not be preloaded.
case $prefix in
    *[[:space:]:]*)
       echo "gpuarena: PREFIX '$prefix' contains white space or a colon, where the loader splits" \
            "LD_PRELOAD, so the shim installed there could never be preloaded; choose a path" \
            "without them (try PREFIX=\$HOME/.local)" >&2
       exit 2 ;;
esac
root="$destdir$prefix"

# folder DIR: made with its parents, or said with what to do: as a user, the default /usr/local
# ended in mkdir's own "Permission denied" and nothing else (an outside check, 2026-12-07).
folder() {
    err=$(mkdir -p "$1" 2>&1) || {
        echo "gpuarena: cannot create $1 (${err##*: }): install where you may write" \
            "(make install PREFIX=\$HOME/.local), or as root" >&2
        exit 1
    }
}
share="$root/lib/gpuarena"
manifest="$share/MANIFEST"

# put MODE SOURCE DEST-RELATIVE-TO-ROOT: through a fresh temporary beside the destination (mktemp:
# a new name, created exclusively, so a file or link already there is never written through), then
# a rename, so a file in use is replaced, never rewritten in place.
put() {
    [ -f "$2" ] || { echo "gpuarena: $2 is not built; run make BUILD=$build first" >&2; exit 1; }
    folder "$(dirname "$root/$3")"
    tmp=$(mktemp "$root/$3.XXXXXX" 2>/dev/null) || {
        echo "gpuarena: cannot write in $(dirname "$root/$3"): install where you may write" \
            "(make install PREFIX=\$HOME/.local), or as root" >&2
        exit 1
    }
    cp "$2" "$tmp" && chmod "$1" "$tmp" && mv -f "$tmp" "$root/$3" || {
        rm -f "$tmp"
        echo "gpuarena: cannot install $root/$3 (is $root writable?)" >&2
        exit 1
    }
    echo "$3" >>"$newlist"
}

install_all() {
    folder "$share"
    newlist=$(mktemp "$manifest.XXXXXX" 2>/dev/null) || {
        echo "gpuarena: cannot write in $share: install where you may write" \
            "(make install PREFIX=\$HOME/.local), or as root" >&2
        exit 1
    }
    trap 'rm -f "$newlist"' EXIT
    put 755 scripts/gpuarena bin/gpuarena
    put 755 "$build/bin/gpuarena-replay" bin/gpuarena-replay
    put 755 "$build/lib/libgpuarena.so" lib/libgpuarena.so
    for f in scripts/gpuarena_cli/*.py; do
        put 644 "$f" "lib/gpuarena/gpuarena_cli/$(basename "$f")"
    done
    put 644 VERSION lib/gpuarena/VERSION
    put 755 "$build/sim/libcuda.so.1" lib/gpuarena/sim/libcuda.so.1
    # An older install may have had files this one has not: take those out.
    if [ -f "$manifest" ]; then
        grep -Fxv -f "$newlist" "$manifest" | while IFS= read -r rel; do
            case $rel in ""|/*|*..*) ;; *) rm -f "$root/$rel" ;; esac
        done
    fi
    chmod 644 "$newlist" && mv -f "$newlist" "$manifest"
    trap - EXIT
    echo "gpuarena: installed $(cat VERSION) in $root: run $prefix/bin/gpuarena --help;" \
        "preload $prefix/lib/libgpuarena.so"
}

uninstall_all() {
    if [ ! -f "$manifest" ]; then
        echo "gpuarena: nothing to uninstall in $root (no $manifest)" >&2
        exit 0
    fi
    while IFS= read -r rel; do
        case $rel in
            ""|/*|*..*) ;;  # never outside the prefix, whatever the file says
            *) err=$(rm -f "$root/$rel" 2>&1) || {
                   echo "gpuarena: cannot remove $root/$rel (${err##*: }): uninstall as the" \
                       "user who installed it (root for /usr/local); the files after it" \
                       "are left in place" >&2
                   exit 1
               } ;;
        esac
    done <"$manifest"
    rm -f "$manifest"
    rm -rf "$share/gpuarena_cli/__pycache__"
    for d in "$share/gpuarena_cli" "$share/sim" "$share" "$root/bin" "$root/lib"; do
        rmdir "$d" 2>/dev/null || true
    done
    echo "gpuarena: uninstalled from $root"
}

case $what in
    install) install_all ;;
    uninstall) uninstall_all ;;
    *) echo "usage: sh scripts/install.sh install|uninstall BUILD PREFIX [DESTDIR]" >&2; exit 2 ;;
esac
