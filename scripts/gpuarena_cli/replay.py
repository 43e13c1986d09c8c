"""`gpuarena replay`: any trace or importable file through the C allocator, via gpuarena-replay.

The allocator is C, so the figures come from the real code rather than a Python model: this module
only imports foreign formats to a temporary trace, runs $(BUILD)/bin/gpuarena-replay with --json,
and prints its results as one table, a column per mode. The tool's JSON is read through a small
field map (FIELDS) so a renamed field is a one-line change here.
"""

import json
import os
import subprocess
import tempfile

from . import GaError
from . import importers
from . import paths
from . import tracefile as tf
from .fmt import human_bytes, human_count, human_frac, table

# Row title, candidate JSON names (first found wins), formatter. The tool prints one flat object
# with keys MODE_name (see gpuarena-replay --help); mode_results splits it per mode.
FIELDS = [
    ("arena size / limit", ("size",), lambda v: human_bytes(v) if v else "none"),
    ("events", ("events",), human_count),
    ("allocations", ("allocs",), human_count),
    ("frees without alloc", ("unmatched_frees",), human_count),
    ("peak in use", ("peak_in_use",), human_bytes),
    ("peak reserved", ("peak_reserved",), human_bytes),
    ("driver reserve calls", ("backend_reserves",), human_count),
    ("driver release calls", ("backend_releases",), human_count),
    ("failed allocs", ("failed_allocs",), human_count),
    ("max fragmentation", ("max_frag", "max_fragmentation"), human_frac),
    ("fragmentation at end", ("final_frag", "fragmentation"), human_frac),
    ("smallest size w/o OOM", ("min_size",), human_bytes),
    ("replay speed (events/s)", ("events_per_s",), human_count),
]


def field(d, names):
    """First of names present in d; None when absent."""
    for n in names:
        if d.get(n) is not None:
            return d[n]
    return None


def mode_results(doc):
    """[{mode, events, ...}] from the tool's flat JSON (keys MODE_field, "modes": "a,b")."""
    if not isinstance(doc, dict) or not isinstance(doc.get("modes"), str):
        raise GaError("gpuarena-replay printed JSON without a \"modes\" list; rebuild it "
                      "(`make`) so it matches this gpuarena")
    out = []
    for m in [x for x in doc["modes"].split(",") if x]:
        r = {"mode": m}
        r.update({k[len(m) + 1:]: v for k, v in doc.items() if k.startswith(m + "_")})
        if r.get("ns_total") and r.get("events"):
            r["events_per_s"] = round(r["events"] * 1e9 / r["ns_total"])
        out.append(r)
    return out


def as_trace_file(path, fmt="auto", level="tensor", close=False, tmpdir=None):
    """(path of a gpuarena trace for `path`, import counts or None); imports to tmpdir when
    the input is another format."""
    kind = importers.detect(path) if fmt == "auto" else fmt
    if kind == "trace":
        return path, None
    trace, counts, _ = importers.load_any(path, kind, level, close)
    out = os.path.join(tmpdir, "imported.gatrace")
    tf.write(out, trace)
    return out, counts


def run_tool(trace_path, mode="all", arena_size=None, limit=None, find_min=True, check=False,
             timeline=None):
    """Runs gpuarena-replay --json and returns its parsed JSON document. timeline: a path where
    the tool writes its per-event CSV time_ns,in_use,reserved (one mode only)."""
    cmd = [paths.replay_tool(), "--mode", mode, "--json"]
    if timeline:
        cmd += ["--timeline", timeline]
    if arena_size:
        cmd += ["--arena-size", str(arena_size)]
    if limit:
        cmd += ["--limit", str(limit)]
    if find_min:
        cmd.append("--min")
    if check:
        cmd.append("--check")
    cmd.append(trace_path)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    except OSError as e:
        raise GaError(f"cannot run {cmd[0]}: {e.strerror}; rebuild it with `make`") from None
    err = proc.stderr.decode("utf-8", "replace").strip()
    if proc.returncode != 0 and not proc.stdout.strip():
        raise GaError(f"gpuarena-replay failed (exit {proc.returncode}): "
                      f"{err.removeprefix('gpuarena: ') or 'no message'}")
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise GaError(f"gpuarena-replay printed no JSON (exit {proc.returncode}); its stderr: "
                      f"{err or 'empty'}; check that {cmd[0]} is up to date (`make`)") from None


def render(doc):
    """The results as a text table, one column per mode."""
    results = mode_results(doc)
    header = ["figure"] + [r["mode"] for r in results]
    rows = []
    for title, names, show in FIELDS:
        values = [field(r, names) for r in results]
        if any(v is not None for v in values):
            rows.append([title] + [show(v) for v in values])
    return table(header, rows)


def replay(path, fmt="auto", level="tensor", mode="all", arena_size=None, limit=None,
           find_min=True, check=False):
    """(tool JSON document, import counts or None) for any input file."""
    with tempfile.TemporaryDirectory(prefix="gpuarena-") as tmp:
        trace_path, counts = as_trace_file(path, fmt, level, tmpdir=tmp)
        return run_tool(trace_path, mode, arena_size, limit, find_min, check), counts
