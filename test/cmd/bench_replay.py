#!/usr/bin/env python3
"""Replay speed (events per second) of gpuarena-replay over every trace in shared/traces, per mode,
for the README. Each trace is imported once; the replay tool's own loop timer (ns_total) is used,
so Python start-up and file reading are not counted. A repeated copy of the Kineto trace (20
back-to-back steps, about half a million events) gives a figure less dominated by fixed costs.
Prints a table; never fails on speed (timings are reported, not asserted).
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))

from gpuarena_cli import importers, paths  # noqa: E402
from gpuarena_cli import tracefile as tf  # noqa: E402
from gpuarena_cli.fmt import table  # noqa: E402

TRACES = os.environ.get("GA_TRACES_DIR",
                        os.path.join(os.path.dirname(os.path.dirname(HERE)), "..", "shared",
                                     "traces"))
MODES = ("arena", "grow", "vmm", "platform")


def repeated(trace, times):
    """The trace played `times` times back to back, keys shifted so the copies never collide."""
    span = trace.events[-1][tf.T_TIME] + 1
    out = []
    for k in range(times):
        for ev in trace.events:
            out.append((ev[0] + k * span, ev[1] ^ (k << 56)) + ev[2:])
    return tf.Trace(out)


def speed(tool, path):
    proc = subprocess.run([tool, "--mode", "all", "--json", path], stdout=subprocess.PIPE,
                          check=True)
    doc = json.loads(proc.stdout)
    modes = doc["modes"]
    return doc["events"], [modes[m]["events"] * 1e9 / max(modes[m]["ns_total"], 1)
                           for m in MODES]


def trace_files():
    out = []
    for sub in sorted(os.listdir(TRACES)):
        d = os.path.join(TRACES, sub)
        if os.path.isdir(d):
            out += [os.path.join(d, f) for f in sorted(os.listdir(d))]
    return out


def main():
    tool = paths.replay_tool()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for path in trace_files():
            trace, _, _ = importers.load_any(path)
            out = os.path.join(tmp, os.path.basename(path) + ".gatrace")
            tf.write(out, trace)
            jobs.append((os.path.basename(path), out))
            if "kineto" in path:
                big = os.path.join(tmp, "x20.gatrace")
                tf.write(big, repeated(trace, 20))
                jobs.append((os.path.basename(path) + " x20", big))
        for name, out in jobs:
            n, per_mode = speed(tool, out)
            rows.append([name, f"{n:,}"] + [f"{s / 1e6:.2f}" for s in per_mode])
    print(table(["trace", "events"] + [f"{m} Mev/s" for m in MODES], rows))


if __name__ == "__main__":
    main()
