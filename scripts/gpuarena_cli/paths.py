"""Where the built pieces are: the shim, the replay tool and the simulated driver; and the version.

The command runs from a checkout (<repo>/scripts/gpuarena, builds in <repo>/build), from another
build folder ($GPUARENA_BUILD, which tests use for their own build) or from an installed layout
(`make install`: <prefix>/bin/gpuarena, the package in <prefix>/lib/gpuarena/gpuarena_cli, the shim
<prefix>/lib/libgpuarena.so, <prefix>/bin/gpuarena-replay, the simulated driver in
<prefix>/lib/gpuarena/sim). Which one is told by where this package lies, never by the current
directory, so the command works from anywhere. Looking in a fixed order keeps the choice
predictable, and the error lists every place looked.
"""

import os
import shutil

from . import GaError

PKG_DIR = os.path.dirname(os.path.realpath(__file__))
SCRIPTS_DIR = os.path.dirname(PKG_DIR)  # <repo>/scripts, or <prefix>/lib/gpuarena installed
INSTALLED = (os.path.basename(SCRIPTS_DIR) == "gpuarena"
             and os.path.basename(os.path.dirname(SCRIPTS_DIR)) == "lib")
PREFIX = os.path.dirname(os.path.dirname(SCRIPTS_DIR)) if INSTALLED else None
REPO_DIR = None if INSTALLED else os.path.dirname(SCRIPTS_DIR)

# Build-folder relative path -> where `make install` puts it, relative to the prefix.
_INSTALLED_AT = {
    "lib/libgpuarena.so": "lib/libgpuarena.so",
    "bin/gpuarena-replay": "bin/gpuarena-replay",
    "sim/libcuda.so.1": "lib/gpuarena/sim/libcuda.so.1",
}


def version():
    """The version in the VERSION file beside the package (checkout or install)."""
    path = os.path.join(SCRIPTS_DIR if INSTALLED else REPO_DIR, "VERSION")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or "unknown"
    except OSError:
        return "unknown"


def build_dirs():
    """Candidate build folders, most specific first."""
    dirs = []
    env = os.environ.get("GPUARENA_BUILD")
    if env:
        dirs.append(os.path.abspath(env))
    if REPO_DIR:
        dirs.append(os.path.join(REPO_DIR, "build"))
    return dirs


def candidates(rel):
    out = [os.path.join(d, rel) for d in build_dirs()]
    if INSTALLED and rel in _INSTALLED_AT:
        out.append(os.path.join(PREFIX, _INSTALLED_AT[rel]))
    return out


def _how_to_get():
    if INSTALLED:
        return (f"reinstall gpuarena (make install PREFIX={PREFIX} in its source tree), or set "
                "GPUARENA_BUILD to a build folder")
    return f"build it with `make` in {REPO_DIR}, or set GPUARENA_BUILD to your build folder"


def find(rel, required=True, what=None):
    """Path of a built file such as 'lib/libgpuarena.so', or None / GaError when missing. With
    GPUARENA_BUILD set, from that folder only: a typo in it, or a folder missing one piece, fell
    back to the checkout's build (or any gpuarena-replay on PATH), so another build was measured
    without a sign."""
    env = os.environ.get("GPUARENA_BUILD")
    if env:
        path = os.path.join(os.path.abspath(env), rel)
        if os.path.isfile(path):
            return path
        if not required:
            return None
        if not os.path.isdir(env):
            what_is = "not a folder" if os.path.exists(env) else "no such folder"
            raise GaError(f"GPUARENA_BUILD={env}: {what_is}; point it at a build folder "
                          "(make BUILD=DIR builds one there) or unset it")
        raise GaError(f"{what or os.path.basename(rel)} not found in GPUARENA_BUILD={env} "
                      f"(looked for {path}); build it there (make BUILD={env}) or unset "
                      "GPUARENA_BUILD")
    for path in candidates(rel):
        if os.path.isfile(path):
            return path
    if rel.startswith("bin/"):
        found = shutil.which(os.path.basename(rel))
        if found:
            return found
    if not required:
        return None
    looked = ", ".join(candidates(rel)) or "nowhere"
    raise GaError(f"{what or os.path.basename(rel)} not found (looked in {looked}); "
                  f"{_how_to_get()}")


def shim(required=True):
    return find("lib/libgpuarena.so", required, "the shim libgpuarena.so")


def die_with_parent(parent):
    """For preexec_fn (functools.partial(die_with_parent, os.getpid())) of a helper tool the
    command waits for (gpuarena-replay): it gets SIGTERM when the command dies, as under a
    `timeout` that kills the command alone (the replay went on, orphaned, to its end: helper-79,
    2026-12-06). Linux's PR_SET_PDEATHSIG; elsewhere nothing."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the command died before the signal was asked for
        os._exit(1)


def replay_tool(required=True):
    return find("bin/gpuarena-replay", required, "the replay tool gpuarena-replay")


def sim_dir(required=True):
    path = find("sim/libcuda.so.1", required, "the simulated driver libcuda.so.1")
    return os.path.dirname(path) if path else None
