"""Refusing input files that cannot fit in memory, before reading them.

The readers hold a whole file's events in memory (a trace replays as a whole), so a 4 GiB file
under `ulimit -v 3000000`, or on a machine with 2 GB free, cannot work. Python's answer would be
a MemoryError deep inside a reader, or minutes of swapping; this module answers first, from the
file's size and a lower bound on the bytes each reader needs per byte of input, against what this
process may still have: the address-space and data limits (ulimit -v / -d) less what it already
uses, and the machine's available memory. The factors are lower bounds on purpose: a refusal here
must be certain, and whatever slips past meets the MemoryError net in cli.
"""

import os
import resource

from . import GaError
from .fmt import human_bytes

# Bytes of memory per byte of input, at least, for each way a file is read.
FACTORS = {
    "trace": 8,              # gpuarena trace read in Python: a tuple of 10 ints per 48-byte record
    "replay-tool": 2,        # gpuarena-replay: the file buffer plus its decoded events
    "lifetimes": 10,         # CSV: text, rows, then event tuples
    "rmm": 10,
    "kineto": 5,             # JSON text and its objects
    "kineto-gz": 20,         # the same after a typical gzip ratio
    "pytorch-snapshot": 5,   # pickle bytes and the objects they build
}


def _vm_size():
    """Bytes of address space this process uses now (0 when /proc cannot tell)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _mem_available():
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            info = {ln.split(":")[0]: int(ln.split()[1]) * 1024 for ln in f if ":" in ln}
        return info.get("MemAvailable", 0) + info.get("SwapFree", 0) or None
    except (OSError, ValueError, IndexError):
        return None


def available(child=False):
    """(bytes this process, or a child it starts, can still allocate, what limits it) or
    (None, None) when nothing says."""
    used = 0 if child else _vm_size()
    best = (None, None)
    for res, name in ((resource.RLIMIT_AS, "the address-space limit (ulimit -v)"),
                      (resource.RLIMIT_DATA, "the data-size limit (ulimit -d)")):
        soft, _ = resource.getrlimit(res)
        if soft != resource.RLIM_INFINITY:
            left = max(soft - used, 0)
            if best[0] is None or left < best[0]:
                best = (left, f"{name} of {human_bytes(soft)}")
    avail = _mem_available()
    if avail is not None and (best[0] is None or avail < best[0]):
        best = (avail, "the memory available on this machine")
    return best


def check_fits(path, how, child=False):
    """GaError when reading `path` the way `how` (a FACTORS key) says cannot fit in memory."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return  # the reader reports a missing or unreadable file in its own words
    need = size * FACTORS[how]
    left, why = available(child)
    if left is not None and need > left:
        raise GaError(f"{path}: this {human_bytes(size)} file needs at least "
                      f"{human_bytes(need)} of memory to read, and {why} leaves "
                      f"{human_bytes(left)}; use a smaller trace (or a part of it), or run where "
                      "more memory is free")
