"""Where the built pieces are: the shim, the replay tool and the simulated driver.

The command runs from a checkout (<repo>/scripts/gpuarena, builds in <repo>/build), from another
build folder ($GPUARENA_BUILD, which tests use for their own build) or from an installed layout
(<prefix>/bin/gpuarena with <prefix>/lib/libgpuarena.so, <prefix>/bin/gpuarena-replay). Looking in
that fixed order keeps the choice predictable, and the error lists every place looked.
"""

import os
import shutil

from . import GaError

PKG_DIR = os.path.dirname(os.path.realpath(__file__))
SCRIPTS_DIR = os.path.dirname(PKG_DIR)
REPO_DIR = os.path.dirname(SCRIPTS_DIR)


def build_dirs():
    """Candidate build folders, most specific first."""
    dirs = []
    env = os.environ.get("GPUARENA_BUILD")
    if env:
        dirs.append(os.path.abspath(env))
    dirs.append(os.path.join(REPO_DIR, "build"))
    return dirs


def _installed(rel):
    prefix = os.path.dirname(SCRIPTS_DIR)
    base = os.path.basename(rel)
    if rel.startswith("bin/"):
        return [os.path.join(SCRIPTS_DIR, base)]
    return [os.path.join(prefix, "lib", base), os.path.join(prefix, "lib", "gpuarena", base)]


def candidates(rel):
    return [os.path.join(d, rel) for d in build_dirs()] + _installed(rel)


def find(rel, required=True, what=None):
    """Path of a built file such as 'lib/libgpuarena.so', or None / GaError when missing."""
    for path in candidates(rel):
        if os.path.isfile(path):
            return path
    if rel.startswith("bin/"):
        found = shutil.which(os.path.basename(rel))
        if found:
            return found
    if not required:
        return None
    looked = ", ".join(candidates(rel))
    raise GaError(f"{what or os.path.basename(rel)} not found (looked in {looked}); build it "
                  f"with `make` in {REPO_DIR}, or set GPUARENA_BUILD to your build folder")


def shim():
    return find("lib/libgpuarena.so", what="the shim libgpuarena.so")


def replay_tool(required=True):
    return find("bin/gpuarena-replay", required, "the replay tool gpuarena-replay")


def sim_dir():
    return os.path.dirname(find("sim/libcuda.so.1", what="the simulated driver libcuda.so.1"))
