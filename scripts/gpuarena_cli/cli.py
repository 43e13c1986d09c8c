"""Argument parsing and dispatch for the `gpuarena` command; the only place that prints errors.

Every subcommand's work lives in its own module; this file turns arguments into calls, a GaError
into "gpuarena: message" with exit code 1, and argparse's usage errors into exit code 2, so no user
ever sees a traceback for bad input.
"""

import argparse
import json
import os
import re
import sys

from . import GaError
from . import importers
from . import plot
from . import replay as replay_mod
from . import report as report_mod
from . import runner
from . import tracefile as tf
from .fmt import parse_size

EPILOG = """exit codes: 0 success; 1 bad input or setup (the message says how to fix it);
2 usage error; `run` exits with the program's own code (128+N if killed by signal N).
Environment: GPUARENA_BUILD=DIR uses DIR/lib/libgpuarena.so and DIR/bin/gpuarena-replay."""

IMPORT_HELP = """formats:
  pytorch-snapshot  torch.cuda.memory._dump_snapshot pickle (loaded without running any code)
  kineto            torch.profiler Chrome trace JSON (.json or .json.gz, profile_memory=True)
  lifetimes         CSV id,lower,upper,size (buffer live over [lower, upper))
  rmm               RMM logging CSV Thread,Time,Action,Pointer,Size,Stream
  auto              detect from the content"""


def _size(text):
    try:
        return parse_size(text)
    except GaError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _limit(text):
    """GPUARENA_LIMIT syntax: a size or a percentage of the device; passed on as written."""
    if re.fullmatch(r"\s*\d+(\.\d+)?\s*%\s*", text):
        return text.strip()
    _size(text)
    return text.strip()


def _fraction(text):
    m = re.fullmatch(r"(\d*\.?\d+)(\+?)", text.strip())
    if not m or not 0 < float(m.group(1)) <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in (0, 1] (try 0.75, or "
                                         "0.75+ to let the arena grow past it up to the limit)")
    return text.strip()


def _add_input_opts(p):
    p.add_argument("--format", default="auto", choices=importers.FORMATS + ("trace",),
                   help="input format (default: detect)")
    p.add_argument("--level", default="tensor", choices=("tensor", "segment"),
                   help="PyTorch snapshots: tensor blocks or the caching allocator's segments")


def _add_shim_opts(p):
    p.add_argument("--limit", type=_limit, help="cap per device: 8GiB, 512MiB, 8G or 50%%")
    p.add_argument("--fraction", type=_fraction, help="arena size as a fraction of the cap "
                   "(0.75 hard, 0.75+ may grow; default 0.75+)")
    p.add_argument("--sim", action="store_true",
                   help="use the simulated driver (<build>/sim on LD_LIBRARY_PATH), for demos")
    p.add_argument("--env", action="append", metavar="K=V", default=[],
                   help="extra environment variable for the program (repeatable)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS]",
                   help="the program to run and its arguments, after --")


def build_parser():
    top = argparse.ArgumentParser(
        prog="gpuarena", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run programs under the gpuarena GPU memory shim, compare allocation modes, "
                    "and import, replay and plot allocation traces.")
    sub = top.add_subparsers(dest="cmd", metavar="SUBCOMMAND", required=True)
    fmt = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser("import", help="convert a foreign allocation record to a gpuarena trace",
                       epilog=IMPORT_HELP + "\n\n" + EPILOG, formatter_class=fmt)
    p.add_argument("format", choices=importers.FORMATS, metavar="FORMAT",
                   help="pytorch-snapshot | kineto | lifetimes | rmm | auto")
    p.add_argument("file", metavar="FILE")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="trace to write")
    p.add_argument("--level", default="tensor", choices=("tensor", "segment"),
                   help="snapshots: tensor (alloc/free_completed, default) or segment "
                        "(segment_alloc/segment_free: what a driver-level allocator sees)")
    p.add_argument("--close", action="store_true", help="free blocks still live at the end")
    p.add_argument("--time-unit", default="s", choices=tuple(importers.TIME_UNITS),
                   help="rmm: unit of numeric Time values (default s)")

    p = sub.add_parser("replay", help="replay a trace through the allocator (no GPU needed)",
                       epilog=EPILOG, formatter_class=fmt)
    p.add_argument("trace", metavar="TRACE", help="gpuarena trace or any importable file")
    p.add_argument("--mode", default="all", choices=("arena", "grow", "platform", "all"),
                   help="arena: one preallocated region; grow: regions on demand; platform: "
                        "one driver call per allocation; all (default)")
    p.add_argument("--arena-size", type=_size, help="preallocated arena size (e.g. 2GiB)")
    p.add_argument("--limit", type=_size, help="cap on reserved bytes (e.g. 8GiB)")
    p.add_argument("--no-min", action="store_true",
                   help="skip the search for the smallest arena that runs without OOM")
    p.add_argument("--check", action="store_true", help="check allocator invariants each step")
    p.add_argument("--json", action="store_true", help="print the replay tool's JSON")
    _add_input_opts(p)

    p = sub.add_parser("report", help="timeline of bytes in use/reserved (Perfetto JSON, PNG)",
                       epilog=EPILOG, formatter_class=fmt)
    p.add_argument("trace", metavar="TRACE", help="gpuarena trace or any importable file")
    p.add_argument("-o", "--output", metavar="PREFIX",
                   help="writes PREFIX.json and PREFIX.png (default: the input's name)")
    p.add_argument("--mode", default="arena", choices=("arena", "grow", "platform"),
                   help="allocator mode whose reserved bytes are drawn, from a replay of the "
                        "trace (default arena)")
    _add_input_opts(p)

    p = sub.add_parser("run", help="run a program under the shim", epilog=EPILOG,
                       formatter_class=fmt, usage="gpuarena run [options] -- PROGRAM [ARGS...]")
    p.set_defaults(subparser=p)
    p.add_argument("--mode", default="arena", choices=("arena", "platform"),
                   help="arena: sub-allocate from large driver blocks (default); platform: one "
                        "driver call per allocation, memory returned at once")
    p.add_argument("--no-preallocate", action="store_true",
                   help="arena: take memory on demand instead of at first use")
    p.add_argument("--stats", metavar="F", help="write the statistics JSON to F (- for stderr) "
                   "instead of printing a summary")
    p.add_argument("--trace", metavar="F", help="record every allocation event to trace F")
    _add_shim_opts(p)

    p = sub.add_parser("compare", help="run a program under each mode, side by side",
                       epilog=EPILOG, formatter_class=fmt,
                       usage="gpuarena compare [options] -- PROGRAM [ARGS...]")
    p.set_defaults(subparser=p)
    p.add_argument("--modes", default="arena,arena-nopre,platform",
                   help=f"comma-separated, from {', '.join(runner.MODES)}")
    p.add_argument("--repeat", type=int, default=1, help="runs per mode (median wall time)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--plot", metavar="PREFIX", help="also draw PREFIX.png: bars of wall time, "
                   "peak reserved and driver calls per mode (needs matplotlib)")
    _add_shim_opts(p)
    return top


def _command(args):
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        args.subparser.error("no program given: put it after --, e.g. "
                             f"gpuarena {args.cmd} -- python3 train.py")
    return cmd


def _print_counts(counts):
    for k, v in counts.items():
        print(f"  {k.replace('_', ' ')}: {v:,}")


def do_import(a):
    trace, counts, used = importers.load_any(a.file, a.format, a.level, a.close, a.time_unit)
    tf.write(a.output, trace)
    print(f"gpuarena: imported {a.file} ({used}) -> {a.output}: {len(trace.events):,} events")
    _print_counts(counts)
    return 0


def do_replay(a):
    doc, counts = replay_mod.replay(a.trace, a.format, a.level, a.mode, a.arena_size, a.limit,
                                    not a.no_min, a.check)
    if a.json:
        print(json.dumps(doc, indent=2))
        return 0
    if counts:
        print(f"imported {a.trace}:")
        _print_counts(counts)
    print(replay_mod.render(doc))
    return 0


def do_report(a):
    trace, _counts, _ = importers.load_any(a.trace, a.format, a.level)
    prefix = a.output or os.path.splitext(os.path.basename(a.trace))[0]
    reserved, why = report_mod.reserved_series(trace, a.mode)
    if reserved is None:
        print(f"gpuarena: drawing bytes in use only, not reserved: {why}", file=sys.stderr)
    report_mod.write_json(f"{prefix}.json", report_mod.chrome_trace(trace, reserved))
    print(f"gpuarena: wrote {prefix}.json ({len(trace.events):,} events; open it in "
          "https://ui.perfetto.dev or chrome://tracing)")
    if report_mod.write_png(f"{prefix}.png", trace, reserved):
        print(f"gpuarena: wrote {prefix}.png")
    else:
        print(f"gpuarena: {plot.MISSING}", file=sys.stderr)
    return 0


def _settings(a, mode=None):
    s = {"GPUARENA_LIMIT": a.limit, "GPUARENA_MEM_FRACTION": a.fraction}
    if mode:
        s["GPUARENA_MODE"] = mode
    return s


def do_run(a):
    cmd = _command(a)
    s = _settings(a, a.mode)
    s["GPUARENA_PREALLOCATE"] = "false" if a.no_preallocate else "true"
    s["GPUARENA_TRACE"] = a.trace
    return runner.run(cmd, s, a.stats, a.sim, runner.parse_env_pairs(a.env))


def do_compare(a):
    cmd = _command(a)
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    results = runner.compare(cmd, modes, a.repeat, _settings(a), a.sim,
                             runner.parse_env_pairs(a.env))
    if a.json:
        print(json.dumps(results, indent=2))
    else:
        print(runner.render(results))
    if a.plot:
        if plot.compare_png(f"{a.plot}.png", results):
            print(f"gpuarena: wrote {a.plot}.png", file=sys.stderr)
        else:
            print(f"gpuarena: {plot.MISSING}", file=sys.stderr)
    failed = [m for m, r in results.items() if r["stats"] is None]
    for m in failed:
        print(f"gpuarena: mode {m}: no statistics written (exit {results[m]['exit']}); the "
              f"program's last output:\n{results[m]['output_tail']}", file=sys.stderr)
    return 1 if failed else 0


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.cmd == "import":
            return do_import(args)
        if args.cmd == "replay":
            return do_replay(args)
        if args.cmd == "report":
            return do_report(args)
        if args.cmd == "run":
            return do_run(args)
        return do_compare(args)
    except GaError as e:
        print(f"gpuarena: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
