"""`gpuarena run` and `gpuarena compare`: an unmodified program under the shim, and its figures.

The shim is configured only through the environment (it reads GPUARENA_* once, at first CUDA use),
so running is: prepend libgpuarena.so to LD_PRELOAD (keeping what the user preloads), set the
variables, exec the program, read the statistics JSON the shim writes at exit. Compare repeats that
per mode and prints the median-wall-time run of each mode side by side. The shim writes the stats
file atomically (tmp + rename), so a file that exists is complete.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from . import GaError
from . import paths
from .fmt import human_bytes, human_count, human_frac, human_ns, table

# Mode name -> the variables that select it. Preallocation is explicit in every mode so an
# inherited GPUARENA_PREALLOCATE cannot change what a column means.
MODES = {
    "arena": {"GPUARENA_MODE": "arena", "GPUARENA_PREALLOCATE": "true"},
    "arena-nopre": {"GPUARENA_MODE": "arena", "GPUARENA_PREALLOCATE": "false"},
    "platform": {"GPUARENA_MODE": "platform", "GPUARENA_PREALLOCATE": "false"},
}


def parse_env_pairs(pairs):
    """['K=V', ...] -> dict; GaError for an entry without '='."""
    out = {}
    for p in pairs or []:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise GaError(f"--env {p!r} is not KEY=VALUE (for example --env "
                          "XLA_PYTHON_CLIENT_ALLOCATOR=platform)")
        out[key] = value
    return out


def preload_list(shim, old):
    """LD_PRELOAD with the shim first, except sanitizer runtimes (libasan.so...), which must
    stay ahead of every instrumented library, a sanitizer-built shim included."""
    entries = [e for e in re.split(r"[:\s]+", old or "") if e]
    san = [e for e in entries if re.match(r"lib[a-z]*san\.so", os.path.basename(e))]
    return ":".join(san + [shim] + [e for e in entries if e not in san])


def child_env(settings, sim=False, extra=None):
    """The child's environment: ours plus the preload, the GPUARENA_* settings and extras."""
    env = dict(os.environ)
    env["LD_PRELOAD"] = preload_list(paths.shim(), env.get("LD_PRELOAD"))
    if sim:
        d = paths.sim_dir()
        old = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = f"{d}:{old}" if old else d
    env.update({k: str(v) for k, v in settings.items() if v is not None})
    env.update(extra or {})
    return env


def exit_code(returncode):
    """A child's status the way a shell reports it: 128+N when killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def spawn(cmd, env, **kw):
    if not cmd:
        raise GaError("no command to run; put it after --, e.g. gpuarena run -- python3 train.py")
    try:
        return subprocess.run(cmd, env=env, check=False, **kw)
    except FileNotFoundError:
        raise GaError(f"command not found: {cmd[0]} (check the name and PATH)") from None
    except PermissionError:
        raise GaError(f"cannot execute {cmd[0]}: permission denied (chmod +x?)") from None


def read_stats(path):
    """The shim's statistics JSON, or None when it was not written (program killed early)."""
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise GaError(f"{path}: unreadable statistics ({e}); was it written by libgpuarena?")\
            from None
    if not isinstance(doc, dict) or doc.get("gpuarena_stats") != 1:
        raise GaError(f"{path}: not a gpuarena statistics file (no \"gpuarena_stats\": 1)")
    return doc


def _totals(stats):
    t = stats.get("totals") if stats else None
    return t if isinstance(t, dict) else {}


# Row title, how to get the value from (stats, wall_ns), formatter.
ROWS = [
    ("wall time (median)", lambda s, w: w, human_ns),
    ("peak in use", lambda s, w: _totals(s).get("peak_in_use"), human_bytes),
    ("peak reserved", lambda s, w: _totals(s).get("peak_reserved"), human_bytes),
    ("alloc calls", lambda s, w: _totals(s).get("alloc_calls"), human_count),
    ("driver alloc calls", lambda s, w: _totals(s).get("driver_alloc_calls"), human_count),
    ("driver free calls", lambda s, w: _totals(s).get("driver_free_calls"), human_count),
    ("time in alloc calls", lambda s, w: _totals(s).get("alloc_time_ns"), human_ns),
    ("time in free calls", lambda s, w: _totals(s).get("free_time_ns"), human_ns),
    ("failed allocs", lambda s, w: _totals(s).get("failed_allocs"), human_count),
    ("frag failures", lambda s, w: _totals(s).get("frag_failures"), human_count),
    ("true OOM failures", lambda s, w: _totals(s).get("true_oom_failures"), human_count),
    ("max fragmentation", lambda s, w: _totals(s).get("max_fragmentation"), human_frac),
]


def summary(stats):
    """A few lines on what the shim saw, for `gpuarena run` without --stats."""
    t = _totals(stats)
    mode = stats.get("mode", "?")
    if mode == "arena":
        mode += "" if stats.get("preallocate", True) else " (no preallocation)"
    limit = human_bytes(stats["limit"]) if stats.get("limit") else "none"
    lines = [f"gpuarena: mode {mode}, limit {limit}",
             f"gpuarena: {human_count(t.get('alloc_calls'))} allocs, "
             f"{human_count(t.get('failed_allocs'))} failed; peak in use "
             f"{human_bytes(t.get('peak_in_use'))}, peak reserved "
             f"{human_bytes(t.get('peak_reserved'))}",
             f"gpuarena: {human_count(t.get('driver_alloc_calls'))} driver allocs, "
             f"{human_ns(t.get('alloc_time_ns'))} in alloc calls, max fragmentation "
             f"{human_frac(t.get('max_fragmentation'))}"]
    return "\n".join(lines)


def run(cmd, settings, stats_path=None, sim=False, extra=None):
    """Runs cmd under the shim; prints a summary when no stats path was given. Returns the
    exit code to exit with."""
    with tempfile.TemporaryDirectory(prefix="gpuarena-") as tmp:
        path = stats_path or os.path.join(tmp, "stats.json")
        env = child_env(dict(settings, GPUARENA_STATS=path), sim, extra)
        code = exit_code(spawn(cmd, env).returncode)
        if stats_path is None:
            stats = read_stats(path)
            if stats is None:
                print("gpuarena: the program wrote no statistics (it made no CUDA call, or "
                      "exited through a crash before the shim's exit handler)", file=sys.stderr)
            else:
                print(summary(stats), file=sys.stderr)
    return code


def _one_run(cmd, env, tmp, tag):
    """(wall_ns, exit code, stats or None, output tail) of one run of cmd."""
    stats_path = os.path.join(tmp, f"{tag}.json")
    env = dict(env, GPUARENA_STATS=stats_path)
    with open(os.path.join(tmp, f"{tag}.out"), "w+b") as out:
        t0 = time.perf_counter_ns()
        proc = spawn(cmd, env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wall = time.perf_counter_ns() - t0
        out.seek(max(0, out.seek(0, 2) - 2000))
        tail = out.read().decode("utf-8", "replace")
    return wall, exit_code(proc.returncode), read_stats(stats_path), tail


def compare(cmd, modes, repeat=1, settings=None, sim=False, extra=None):
    """{mode: {"wall_ns", "walls_ns", "exit", "stats"}} with the median run of each mode."""
    for m in modes:
        if m not in MODES:
            raise GaError(f"unknown mode {m!r} in --modes (use {', '.join(MODES)})")
    if repeat < 1:
        raise GaError(f"--repeat {repeat}: must be at least 1")
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpuarena-") as tmp:
        for m in modes:
            env = child_env(dict(settings or {}, **MODES[m]), sim, extra)
            runs = [_one_run(cmd, env, tmp, f"{m}-{i}") for i in range(repeat)]
            med = statistics.median_low([r[0] for r in runs])
            wall, code, stats, tail = next(r for r in runs if r[0] == med)
            results[m] = {"wall_ns": wall, "walls_ns": [r[0] for r in runs], "exit": code,
                          "stats": stats, "output_tail": tail if code or stats is None else ""}
    return results


def render(results):
    header = ["figure"] + list(results)
    rows = [[title] + [show(get(r["stats"], r["wall_ns"])) for r in results.values()]
            for title, get, show in ROWS]
    rows.append(["exit code"] + [str(r["exit"]) for r in results.values()])
    return table(header, rows)
