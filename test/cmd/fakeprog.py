#!/usr/bin/env python3
"""A stand-in for a CUDA program under the shim, for testing `gpuarena run/compare` alone.

It writes a statistics JSON where GPUARENA_STATS points, as the shim would at exit, with figures
that depend on the mode so a test can tell the columns apart, and records the environment it was
given (key "seen_env") so a test can check what the command set. Usage: fakeprog.py EXIT_CODE
[--no-stats].
"""

import json
import os
import sys

ENV_KEYS = ("LD_PRELOAD", "LD_LIBRARY_PATH", "GPUARENA_MODE", "GPUARENA_PREALLOCATE",
            "GPUARENA_LIMIT", "GPUARENA_MEM_FRACTION", "GPUARENA_TRACE", "FAKE_EXTRA")


def main():
    code = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    mode = os.environ.get("GPUARENA_MODE", "arena")
    pre = os.environ.get("GPUARENA_PREALLOCATE", "true") == "true"
    driver = 1 if (mode == "arena" and pre) else (5 if mode == "arena" else 100)
    totals = {"alloc_calls": 100, "free_calls": 100, "failed_allocs": 0 if pre else 2,
              "frag_failures": 0, "driver_alloc_calls": driver, "driver_free_calls": driver,
              "alloc_time_ns": driver * 1000, "free_time_ns": driver * 500, "in_use": 0,
              "peak_in_use": 1 << 20, "reserved": 0,
              "peak_reserved": (3 << 20) if pre else (2 << 20) if mode == "arena" else 1 << 20,
              "largest_free": 0, "total_free": 0, "fragmentation": 0.0,
              "max_fragmentation": 0.25 if mode == "arena" else 0.0, "passthrough_bytes": 0}
    stats = {"gpuarena_stats": 1, "pid": os.getpid(), "mode": mode, "preallocate": pre,
             "fraction": 0.75, "fraction_grow": True, "limit": None, "wall_ns": 1000,
             "totals": totals, "by_api": {}, "devices": [],
             "seen_env": {k: os.environ.get(k) for k in ENV_KEYS}}
    print(f"fakeprog: mode {mode}")
    path = os.environ.get("GPUARENA_STATS")
    if path and "--no-stats" not in sys.argv:
        with open(path + ".tmp", "w") as f:
            json.dump(stats, f)
        os.replace(path + ".tmp", path)
    sys.exit(code)


if __name__ == "__main__":
    main()
