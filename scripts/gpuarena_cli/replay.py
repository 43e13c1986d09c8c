"""`gpuarena replay`: any trace or importable file through the C allocator, via gpuarena-replay.

The allocator is C, so the figures come from the real code rather than a Python model: this module
only imports foreign formats to a temporary trace, runs $(BUILD)/bin/gpuarena-replay with --json,
and prints its results as one table, a column per mode. The tool's JSON is nested per mode
({"modes": {"arena": {...}, ...}, "units": {...}}) and the table is built from it alone: one row per
field, in the tool's order, titled by the field's name and formatted by its unit, so a field the C
side adds shows up here without a change.
"""

import functools
import json
import os
import signal
import subprocess
import sys

from . import GaError, UsageError
from . import ending
from . import importers
from . import memory
from . import paths
from . import tracefile as tf
from .fmt import human_bytes, human_count, human_frac, human_ns, table

# Units of the tool's JSON -> cell formatter; "index" (an event number) and "rate" print as counts.
_FORMATTERS = {"bytes": human_bytes, "count": human_count, "ns": human_ns, "ratio": human_frac,
               "index": human_count, "rate": human_count}
_NONE = {"size_limit": "none", "first_oom": "none", "min_size": "-"}


def mode_results(doc):
    """[(mode, {field: value})] from the tool's JSON, in the tool's mode order."""
    modes = doc.get("modes") if isinstance(doc, dict) else None
    if not isinstance(modes, dict) or not all(isinstance(v, dict) for v in modes.values()):
        raise GaError("gpuarena-replay printed JSON without a \"modes\" object; rebuild it "
                      "(`make`) so it matches this gpuarena")
    return list(modes.items())


def as_trace_file(path, fmt="auto", level="tensor", close=False, tmpdir=None):
    """(path of a gpuarena trace for `path`, import counts or None, the input's format); imports
    to tmpdir when the input is another format."""
    importers.check_regular(path)
    kind = importers.detect(path) if fmt == "auto" else fmt
    importers.check_applies(path, kind, level)
    importers.check_named_trace(path, fmt)
    if kind == "trace":
        memory.check_fits(path, "replay-tool", child=True)
        frees = tf.frees_only(path)
        if frees is not None:
            raise GaError(no_allocation(path, frees))
        return path, None, kind
    trace, counts, _ = importers.load_any(path, kind, level, close)
    check_allocates(path, trace.events, counts=counts)
    out = os.path.join(tmpdir, "imported.gatrace")
    tf.write(out, trace)
    return out, counts, kind


def no_allocation(path, frees, doing="replay"):
    """What is said of an input that holds no allocation, `frees` frees at most: every mode
    replayed it to zeros and a min size of 512 B, exit 0, which read as a result (an outside
    check). The words gpuarena-replay says it in (scripts/replay_main.c); exit 1, as a 0-byte
    input and a device without events."""
    only = f", only {frees} free{'s' if frees != 1 else ''}" if frees else ", nor any free"
    return (f"{path} holds no allocation{only}: nothing to {doing}; record a run that allocates "
            "GPU memory (a process that ends before its first allocation leaves none), or give "
            "the file meant")


def check_allocates(path, events, doing="replay", counts=None):
    """GaError (no_allocation) when every event is a free, or there is none; with the import's
    counts, a Kineto trace without GPU memory events says what to do (importers.kineto_hint)."""
    if all(ev[tf.T_KIND] == tf.FREE for ev in events):
        hint = importers.kineto_hint(counts)
        raise GaError(no_allocation(path, len(events), doing) + (f"; {hint}" if hint else ""))


def run_tool(trace_path, mode="all", arena_size=None, limit=None, find_min=True, check=False,
             timeline=None, device=None, name=None, vmm_keep=None, fraction=None,
             granularity=None):
    """Runs gpuarena-replay --json and returns its parsed JSON document. mode: a name or a
    comma-separated list; timeline: a path where the tool writes its per-event CSV
    time_ns,in_use,reserved (one mode only); device: replay that device's events only; name:
    the user's file, named in the tool's messages instead of an imported temporary; vmm_keep:
    bytes of wholly free granules vmm keeps mapped (None: the tool's default, 0 a value);
    fraction: GPUARENA_MEM_FRACTION's text ("0.75+") of limit as the cap; granularity: vmm's
    granule in bytes (None: the tool's 2 MiB)."""
    # Every input reaches the tool as a gpuarena trace (imported first when it is not one), so
    # the tool is told so: left to guess, it read a file named .csv as a lifetimes CSV although
    # the user had said --format trace.
    cmd = [paths.replay_tool(), "--json", "--format", "trace"]
    for m in str(mode).split(","):
        cmd += ["--mode", m]
    if timeline:
        cmd += ["--timeline", timeline]
    if arena_size:
        cmd += ["--arena-size", str(arena_size)]
    if limit:
        cmd += ["--limit", str(limit)]
    if fraction:
        cmd += ["--fraction", fraction]
    if vmm_keep is not None:
        cmd += ["--vmm-keep", str(vmm_keep)]
    if granularity:
        cmd += ["--granularity", str(granularity)]
    if find_min:
        cmd.append("--min")
    if check:
        cmd.append("--check")
    if device is not None:
        cmd += ["--device", str(device)]
    cmd += ["--", trace_path]  # a name starting with '-' is a file, not an option
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                              preexec_fn=functools.partial(paths.die_with_parent, os.getpid()))
    except OSError as e:
        raise GaError(f"cannot run {cmd[0]}: {e.strerror}; rebuild it with `make`") from None
    err = proc.stderr.decode("utf-8", "replace").strip()
    if name:
        err = err.replace(trace_path, name)
    if proc.returncode < 0:  # a crash, whatever it printed: its JSON cannot be trusted whole
        raise GaError(f"gpuarena-replay was killed by {_signame(-proc.returncode)} (a crash, or "
                      "killed from outside); " + (f"its stderr: {err}; " if err else "") +
                      "if it crashed, report it with the input file")
    if proc.returncode != 0 and not proc.stdout.strip():
        raise GaError(f"gpuarena-replay failed (exit {proc.returncode}): "
                      f"{err.removeprefix('gpuarena: ') or 'no message'}")
    try:
        # A file name that is not UTF-8 comes back as its raw bytes: kept as they are
        # (surrogateescape, as Python holds such a name), not a reason to fail.
        doc = json.loads(proc.stdout.decode("utf-8", "surrogateescape"))
    except ValueError:
        what = "printed no JSON" if not proc.stdout.strip() else "printed output that is not JSON"
        raise GaError(f"gpuarena-replay {what} (exit {proc.returncode}); its stderr: "
                      f"{err or 'empty'}; check that {cmd[0]} is up to date (`make`)") from None
    mode_results(doc)  # checks its shape (and brings an older tool's JSON to the nested form)
    # The tool's own lines on check failures are left out: the caller says them after its output
    # (check_failure_messages), as the tool does after its own.
    err = "\n".join(line for line in err.splitlines() if _CHECK_LINE not in line).strip()
    if err:  # the tool's notes on a replay that ran (a block no mode can place)
        print(err, file=sys.stderr)
    return doc


_CHECK_LINE = "the invariant checker found"


def check_failure_messages(doc, trace):
    """One `gpuarena:` line per mode whose replay found invariant failures (check_failures > 0 in
    the tool's JSON): a bug in the allocator, never a property of the trace."""
    out = []
    for mode, r in mode_results(doc):
        n = r.get("check_failures")
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            out.append(f"gpuarena: {mode} mode: {_CHECK_LINE} {n} failure{'s' if n != 1 else ''};"
                       f" this is a bug in gpuarena's allocator: please report it with the trace "
                       f"'{trace}' and this command line")
    return out


def _signame(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _cell(value, unit, field):
    if value is None:
        return _NONE.get(field, "-")
    return _FORMATTERS.get(unit, str)(value)


def render(doc):
    """The results as a text table, one column per mode, one row per field of the tool's JSON."""
    results = mode_results(doc)
    units = doc.get("units") if isinstance(doc.get("units"), dict) else {}
    fields = []
    for _, r in results:
        fields += [f for f in r if f not in fields]
    header = ["figure"] + [m for m, _ in results]
    rows = [[f.replace("_", " ")] + [_cell(r.get(f), units.get(f), f) for _, r in results]
            for f in fields]
    return table(header, rows)


def replay(path, fmt="auto", level="tensor", mode="all", arena_size=None, limit=None,
           find_min=True, check=False, device=None, vmm_keep=None, fraction=None,
           granularity=None):
    """(tool JSON document, import counts or None) for any input file."""
    with ending.temporary_folder() as tmp:
        trace_path, counts, kind = as_trace_file(path, fmt, level, tmpdir=tmp)
        doc = run_tool(trace_path, mode, arena_size, limit, find_min, check, device=device,
                       name=path, vmm_keep=vmm_keep, fraction=fraction,
                       granularity=granularity)
    # The user's file and its format, not the imported temporary (deleted by now) and "trace".
    if isinstance(doc, dict) and "trace" in doc:
        doc["trace"], doc["format"] = path, kind
    return doc, counts


def check_fraction(a, modes, needs_pool):
    """UsageError unless replay's or report's --limit and --fraction can be used as given (`a`,
    the parsed options; `modes`, those replayed): --limit needs a mode it bounds, or a fraction
    to take a share of; a fraction is a share of the cap, so the cap (--limit) is needed and
    --arena-size (which the share replaces) is not; and, as run's, a mode it changes among the
    modes (needs_pool(a, modes): cli's check of that). The tool refuses the same
    (scripts/replay_args.c)."""
    if a.limit and not a.fraction and not {"grow", "vmm", "platform"} & set(modes):
        raise UsageError("--limit applies to grow, vmm and platform (an arena is bounded by "
                         "--arena-size, or by --fraction of --limit): add one of them to --mode")
    if a.fraction is None:
        return
    if not a.limit:
        raise UsageError(f"--fraction {a.fraction} is a share of the cap: give the cap with "
                         "--limit (GPUARENA_LIMIT, or the device's memory for a run without it, "
                         "e.g. --limit 80GiB)")
    if a.arena_size:
        raise UsageError(f"--fraction {a.fraction} sizes the arena ({a.fraction.rstrip('+')} of "
                         "--limit): give --fraction or --arena-size, not both")
    needs_pool(a, modes)
    grow = a.fraction.endswith("+")
    bounds = [m for m in ("arena", "grow", "vmm") if m in modes and (m == "arena" or not grow)]
    frac = float(a.fraction.rstrip("+"))
    if bounds and not _share(a.limit, frac):  # as the tool says it (replay_args.c)
        least = 512 / frac
        need = int(least) if least < 1e19 else None
        while need is not None and not _share(need, frac):
            need += 1
        raise UsageError(f"--fraction {a.fraction} of --limit {a.limit} is a share that rounds to "
                         f"0 bytes, which bounds the {bounds[0]} pool: nothing could ever be "
                         "allocated; give a larger --fraction"
                         + (f", or a --limit of at least {need} bytes" if need else ""))


def _share(cap, frac):
    """ga_fraction_share (allocator/size.c): floor(cap x F) in whole 512-byte blocks."""
    share = cap * frac
    return (cap if share >= cap else int(share)) & ~511


def say_cut(path, cut, doing="replayed"):
    """A trace cut short, said on stderr as a message (`gpuarena:`), with --json too: it was a
    line of the table's stdout without the prefix (helper-67 F7, then an outside check)."""
    if cut:
        print(f"gpuarena: {path}: {cut} trailing bytes of a partial record ignored (the "
              "recording was cut: its process was killed, or is still writing); the events "
              f"before it are {doing}", file=sys.stderr)
