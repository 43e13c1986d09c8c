#!/usr/bin/env python3
"""A stand-in for a CUDA program under the shim, for testing `gpuarena run/compare` alone.

It writes a statistics JSON where GPUARENA_STATS points, as the shim would at exit (format 2 of
decisions.md: options, totals and their units; format 1 with FAKE_STATS_FORMAT=1), with figures
that depend on the mode so a test can tell the columns apart, a vmm-only figure so the table's
rows are the union over modes, and records the environment it was given (key "seen_env") so a
test can check what the command set. Usage: fakeprog.py EXIT_CODE [--no-stats]. Environment:
FAKE_SAY (a line printed on stderr, as the shim's), FAKE_NOISE (bytes printed, then the bytes
under TMPDIR appended to the file FAKE_NOISE_LOG), FAKE_FAIL_MODE (exit 1 in that mode), FAKE_QUIET (prints nothing).
"""

import json
import os
import sys

ENV_KEYS = ("LD_PRELOAD", "LD_LIBRARY_PATH", "GPUARENA_MODE", "GPUARENA_PREALLOCATE",
            "GPUARENA_LIMIT", "GPUARENA_MEM_FRACTION", "GPUARENA_TRACE", "FAKE_EXTRA")

# Figures per mode: driver calls, failed allocs, peak reserved (MiB), max fragmentation.
FIGURES = {"arena": (1, 0, 3, 0.25), "grow": (5, 2, 2, 0.25), "vmm": (7, 0, 1, 0.125),
           "platform": (100, 2, 1, 0.0)}


def totals_and_units(mode):
    driver, failed, reserved_mib, frag = FIGURES[mode]
    rows = [("alloc_calls", 100, "count"), ("free_calls", 100, "count"),
            ("failed_allocs", failed, "count"), ("frag_failures", 0, "count"),
            ("true_oom_failures", failed, "count"), ("driver_alloc_calls", driver, "count"),
            ("driver_free_calls", driver, "count"), ("alloc_time_ns", driver * 1000, "ns"),
            ("free_time_ns", driver * 500, "ns"), ("in_use", 0, "bytes"),
            ("peak_in_use", 1 << 20, "bytes"), ("reserved", 0, "bytes"),
            ("peak_reserved", reserved_mib << 20, "bytes"), ("largest_free", 0, "bytes"),
            ("total_free", 0, "bytes"), ("fragmentation", 0.0, "ratio"),
            ("max_fragmentation", frag, "ratio"), ("passthrough_bytes", 0, "bytes")]
    if mode == "vmm":
        rows.append(("map_calls", 42, "count"))
    return {k: v for k, v, _ in rows}, {k: u for k, _, u in rows}


def main():
    code = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    mode = os.environ.get("GPUARENA_MODE", "arena").strip().lower()
    pre = os.environ.get("GPUARENA_PREALLOCATE", "true").strip().lower() == "true"
    if mode == "arena" and not pre:
        mode = "grow"
    totals, units = totals_and_units(mode)
    seen = {k: os.environ.get(k) for k in ENV_KEYS}
    if os.environ.get("FAKE_STATS_FORMAT") == "1":
        stats = {"gpuarena_stats": 1, "pid": os.getpid(), "mode": "arena" if mode == "grow"
                 else mode, "preallocate": pre, "fraction": 0.75, "fraction_grow": True,
                 "limit": None, "wall_ns": 1000, "totals": totals, "by_api": {}, "devices": [],
                 "seen_env": seen}
    else:
        stats = {"gpuarena_stats": 2, "version": "0.2.0", "pid": os.getpid(), "mode": mode,
                 "options": {"preallocate": pre, "fraction": 0.75, "fraction_grow": True,
                             "limit": None},
                 "wall_ns": 1000, "totals": totals, "units": units, "by_api": {},
                 "contexts": [], "seen_env": seen}
    if not os.environ.get("FAKE_QUIET"):
        print(f"fakeprog: mode {mode}")
    if os.environ.get("FAKE_SAY"):  # a line as the shim prints them, on stderr
        print(os.environ["FAKE_SAY"], file=sys.stderr)
    noise = int(os.environ.get("FAKE_NOISE", "0"))  # bytes of output, then what TMPDIR holds
    if noise:
        sys.stdout.flush()
        chunk = b"x" * 65535 + b"\n"
        for _ in range(noise // len(chunk)):
            os.write(1, chunk)
        held = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in
                   os.walk(os.environ["TMPDIR"]) for f in fs)
        with open(os.environ["FAKE_NOISE_LOG"], "a") as f:
            f.write(f"{held}\n")
    if os.environ.get("FAKE_FAIL_MODE") == mode:
        code = 1
    path = os.environ.get("GPUARENA_STATS", "").replace("%p", str(os.getpid()))
    if path and "--no-stats" not in sys.argv:
        with open(path + ".tmp", "w") as f:
            json.dump(stats, f)
        os.replace(path + ".tmp", path)
    sys.exit(code)


if __name__ == "__main__":
    main()
