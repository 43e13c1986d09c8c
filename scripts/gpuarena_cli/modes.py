"""The allocation modes, by the one set of names the shim, the replay tool and the README use.

The C list is GA_MODE_LIST (allocator/ga_pool.h); `gpuarena-replay --list-modes` prints it and a
command test checks that MODES below is the same list in the same order. Each mode is selected in
the shim by environment variables; every mode sets GPUARENA_PREALLOCATE explicitly so that a value
inherited from the user's shell cannot change what a `compare` column means. `grow` is spelt
GPUARENA_MODE=arena GPUARENA_PREALLOCATE=false, which the shim treats as GPUARENA_MODE=grow (same
pool, and the statistics say "grow"), so it works with shims before and after that name existed.
"""

from . import GaError
from .fmt import BLANKS

MODES = ("arena", "grow", "vmm", "platform")

DESCRIPTIONS = {
    "arena": "preallocated arena: a fraction of the cap at first use, best fit",
    "grow": "arena without preallocation: regions on demand, empty ones given back",
    "vmm": "one virtual range, physical granules mapped only where allocations lie",
    "platform": "one driver allocation per allocation, freed at once",
}

ENV = {
    "arena": {"GPUARENA_MODE": "arena", "GPUARENA_PREALLOCATE": "true"},
    "grow": {"GPUARENA_MODE": "arena", "GPUARENA_PREALLOCATE": "false"},
    "vmm": {"GPUARENA_MODE": "vmm", "GPUARENA_PREALLOCATE": "false"},
    "platform": {"GPUARENA_MODE": "platform", "GPUARENA_PREALLOCATE": "false"},
}

# Settings that apply to one mode alone: `compare` gives them to that mode's runs only. Given to
# every run, `--vmm-keep` made the shim say in each other column that GPUARENA_VMM_KEEP was
# ignored there and should be unset (an outside check, 2026-12-06).
ONLY_IN = {"GPUARENA_VMM_KEEP": "vmm"}
# Settings one mode does not use: platform takes no share, and the shim says so when it is given one
# (helper-124); `compare --fraction` gives it to the other modes' runs only.
NOT_IN = {"GPUARENA_MEM_FRACTION": "platform"}


def settings_for(mode, settings):
    """The settings a run in mode takes: those that apply to it (ONLY_IN, NOT_IN)."""
    return {k: v for k, v in (settings or {}).items()
            if ONLY_IN.get(k, mode) == mode and NOT_IN.get(k) != mode}


def parse(text, allow_all=False):
    """A mode name as a user types it (any case, spaces around) -> its canonical name; 'all'
    where allowed. GaError naming the accepted names otherwise."""
    name = str(text).strip(BLANKS).lower()
    if name in MODES or (allow_all and name == "all"):
        return name
    accepted = ", ".join(MODES) + (" or all" if allow_all else "")
    raise GaError(f"unknown mode '{text}' (use {accepted})")


def parse_list(text):
    """'arena,Platform' or 'all' -> canonical names in the order given ('all': every mode, in
    MODES order); duplicates dropped."""
    out = []
    for part in str(text).split(","):
        if not part.strip(BLANKS):
            continue
        name = parse(part, allow_all=True)
        for m in (MODES if name == "all" else (name,)):
            if m not in out:
                out.append(m)
    if not out:
        raise GaError(f"no mode in '{text}' (use a comma-separated list of {', '.join(MODES)}, "
                      "or all)")
    return out


def help_text():
    return "; ".join(f"{m}: {DESCRIPTIONS[m]}" for m in MODES)
