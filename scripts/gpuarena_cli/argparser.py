"""The `gpuarena` command's argument parser: every subcommand's options, argparse's usage errors
in the house form (`gpuarena: ...`, then the usage, exit 2), and the usage errors argparse cannot
see (a size split by the shell at its space, a misspelt option). cli turns the parsed arguments
into calls.
"""

import argparse
import re
import sys

from . import importers
from . import modes as modes_mod
from . import names
from . import paths
from . import runner
from .argtypes import (GRANULARITY_HELP, KEEP_HELP, ModesAction, OneModeAction, _argtype, _device,
                       _fraction, _granularity, _keep, _limit, _mode, _mode_list, _repeat,
                       _seconds, _size, _word, TOP_LEAST_INTERVAL)
from .fmt import BLANKS, is_unit

EPILOG = """exit codes: 0 success; 1 bad input or setup (the message says how to fix it);
2 usage error; `run` exits with the program's own code (128+N if killed by signal N).
SIGTERM, SIGHUP, SIGALRM, SIGUSR1, SIGUSR2: run and compare pass them on to the program (Ctrl-C
is the program's: they wait for it); any other subcommand removes its temporary files and ends
by SIGTERM or SIGHUP (Ctrl-C: exit 130). Output that cannot be written (a full disk): exit 1.
Sizes: a number and an optional unit, any case: B; K/KiB, M/MiB, G/GiB, T/TiB (x1024);
kB, MB, GB, TB (x1000); e.g. 8GiB, 512MiB, 1.5G, 4096; --limit of run/compare also takes 50%.
Environment: GPUARENA_BUILD=DIR uses DIR/lib/libgpuarena.so and DIR/bin/gpuarena-replay (and
nothing else: a piece missing there is an error)."""

IMPORT_HELP = """formats:
  pytorch-snapshot  torch.cuda.memory._dump_snapshot pickle (loaded without running any code)
  kineto            torch.profiler Chrome trace JSON (.json or .json.gz, profile_memory=True)
  lifetimes         CSV id,lower,upper,size (buffer live over [lower, upper))
  rmm               RMM logging CSV Thread,Time,Action,Pointer,Size,Stream
  auto              detect from the content"""


def _add_input_opts(p):
    p.add_argument("--format", default="auto", choices=importers.FORMATS + ("trace",),
                   type=_word, help="input format (default: detect)")
    p.add_argument("--level", default="tensor", choices=("tensor", "segment"), type=_word,
                   help="PyTorch snapshots: tensor blocks or the caching allocator's segments")


def _add_shim_opts(p):
    p.add_argument("--limit", type=_limit, help="cap per device: 8GiB, 512MiB, 8G or 50%%")
    p.add_argument("--fraction", type=_fraction, help="arena size as a fraction of the cap "
                   "(0.75 hard, 0.75+ may grow; default 0.75+)")
    p.add_argument("--vmm-keep", type=_keep, metavar="SIZE", help=KEEP_HELP)
    p.add_argument("--sim", action="store_true",
                   help="use the simulated driver (<build>/sim on LD_LIBRARY_PATH), for demos")
    p.add_argument("--env", action="append", metavar="K=V", default=[],
                   type=_argtype(runner.env_pair),
                   help="extra environment variable for the program (repeatable, one value "
                   "per variable)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS]",
                   help="the program to run and its arguments, after --")


class _Parser(argparse.ArgumentParser):
    """argparse's usage errors in the house form: the first line `gpuarena: ...` as every other
    message of the command (argparse put `usage: ...` first and `gpuarena run: error: ...` last),
    then the usage; exit 2. Subcommands' parsers are of this class too."""

    def error(self, message):
        # A required option written after `--` (`import auto -- F -o OUT`) is a word there, not
        # the option: "the following arguments are required: -o/--output" said the user had not
        # given it (an outside check, helper-131).
        after = _WORDS[_WORDS.index("--") + 1:] if "--" in _WORDS else []
        if message.startswith("the following arguments are required"):
            late = [w.split("=", 1)[0] for w in after for a in self._actions
                    if a.required and w.split("=", 1)[0] in a.option_strings]
            if late:
                message = (f"{late[0]} after --: every word after -- is taken as an argument, "
                           f"not an option; put {late[0]} before --")
        subs = getattr(self, "subcommands", None)
        lead = next((i for i, w in enumerate(_WORDS) if not w.startswith("-")), len(_WORDS))
        opts = [w for w in _WORDS[:lead] if w not in ("-h", "--help", "--")]  # before it
        m = re.match(r"argument SUBCOMMAND: invalid choice: '(.*?)' \(", message)
        if subs and opts and (m or message.startswith("the following arguments are required")):
            # `gpuarena --limit 1G run ...` was "invalid choice: '1G'", `gpuarena --bogus`
            # "the following arguments are required" (an outside check, helper-131)
            name = opts[0].split("=", 1)[0]
            takes = [n for n, p in subs.items()
                     if any(name in a.option_strings for a in p._actions)]
            message = (f"{opts[0]} before the subcommand: "
                       + (f"it is an option of {', '.join(takes)}; put it after the subcommand "
                          f"(gpuarena {takes[0]} {opts[0]} ...)" if takes else
                          f"no subcommand takes {name}")
                       + f"; subcommands: {', '.join(subs)}")
        elif subs and m and names.closest(m.group(1), list(subs), "", fold=False):
            message += f" (did you mean {names.closest(m.group(1), list(subs), '', fold=False)}?)"
        sys.stderr.write(f"gpuarena: {message} (see {self.prog} --help)\n")
        self.print_usage(sys.stderr)
        sys.exit(2)


class _Once(argparse._StoreAction):
    """An option of one value given twice: the same value again is taken, another is a usage
    error, as OneModeAction's rule for --mode. argparse kept the last without a word: `run
    --stats a.json --stats b.json` wrote b.json alone, `--limit 1GiB --limit 2GiB` ran under
    2 GiB (an outside check, helper-131). build_parser gives every such option this class."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(namespace, "_once_given", {})
        if self.dest in given and given[self.dest] != values:
            typed = _typed(self.option_strings)
            said = (f"{typed[0]}, then {typed[1]}" if len(typed) >= 2
                    else f"{given[self.dest]}, then {values}")
            parser.error(f"{option_string} given twice ({said}): it takes one value; give it "
                         "once")
        setattr(namespace, self.dest, values)
        namespace._once_given = {**given, self.dest: values}


def _typed(option_strings):
    """How the options of `option_strings` were typed, in order (`-o a`, `--output=b`), before
    any --: the values as the user wrote them, not as converted."""
    words = _WORDS[:_WORDS.index("--")] if "--" in _WORDS else _WORDS
    typed = []
    for i, w in enumerate(words):
        name, eq, value = w.partition("=")
        if w in option_strings and i + 1 < len(words):
            typed.append(f"{w} {words[i + 1]}")
        elif eq and name in option_strings:
            typed.append(w)
    return typed


def _once_each(parser):
    """Every option of `parser` that stores one value (not a flag, a list or --mode) is _Once."""
    for action in parser._actions:
        if type(action) is argparse._StoreAction and action.option_strings:
            action.__class__ = _Once


def build_parser():
    top = _Parser(
        prog="gpuarena", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run programs under the gpuarena GPU memory shim, compare allocation modes, "
                    "check what this machine has, and import, replay and plot allocation traces.")
    top.add_argument("--version", action="version", version=f"gpuarena {paths.version()}")
    sub = top.add_subparsers(dest="cmd", metavar="SUBCOMMAND", required=True)
    top.subcommands = sub.choices  # name -> parser, for main's errors of unknown options
    fmt = argparse.RawDescriptionHelpFormatter
    mode_help = "modes: " + modes_mod.help_text()

    p = sub.add_parser("run", help="run a program under the shim", epilog=EPILOG,
                       formatter_class=fmt, usage="gpuarena run [options] -- PROGRAM [ARGS...]")
    p.set_defaults(subparser=p)
    p.add_argument("--mode", type=_mode, action=OneModeAction,
                   help=f"{', '.join(modes_mod.MODES)} (default arena); "
                   + mode_help)
    p.add_argument("--no-preallocate", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--stats", metavar="F", help="write the statistics JSON to F (- for stderr) "
                   "instead of printing a summary; several CUDA processes: their sums, and each "
                   "one's under \"processes\" (%%p in F: one file per process)")
    p.add_argument("--trace", metavar="F", help="record every allocation event to trace F")
    _add_shim_opts(p)

    p = sub.add_parser("compare", help="run a program under each mode, side by side",
                       description="Runs the program once per mode (and repeat), side by side. "
                       "Its standard input is /dev/null: the runs cannot share one input (give "
                       "it a file as an argument, or use gpuarena run, which passes yours on).",
                       epilog=EPILOG, formatter_class=fmt,
                       usage="gpuarena compare [options] -- PROGRAM [ARGS...]")
    p.set_defaults(subparser=p)
    p.add_argument("--modes", type=_mode_list, default=list(modes_mod.MODES), action=ModesAction,
                   help=f"comma-separated, from {', '.join(modes_mod.MODES)}, or all (default)")
    p.add_argument("--repeat", type=_repeat, default=1, metavar="N",
                   help="runs per mode (median wall time; default 1, at most 10,000)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--plot", metavar="PREFIX", help="also draw PREFIX.png: bars of wall time, "
                   "peak reserved and driver calls per mode (needs matplotlib)")
    _add_shim_opts(p)

    p = sub.add_parser("doctor", help="what this machine has and what gpuarena would do here",
                       epilog=EPILOG, formatter_class=fmt)
    p.add_argument("--sim", action="store_true", help="check against the simulated driver")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--python", metavar="PY", help="interpreter whose frameworks to check "
                   "(default: the one running gpuarena)")
    p.add_argument("--timeout", type=_seconds(int, "30 or 300"), default=120, metavar="S",
                   help="seconds allowed for each check in a child process (default 120)")

    p = sub.add_parser("import", help="convert a foreign allocation record to a gpuarena trace",
                       epilog=IMPORT_HELP + "\n\n" + EPILOG, formatter_class=fmt)
    p.add_argument("format", choices=importers.FORMATS, metavar="FORMAT", type=_word,
                   help="pytorch-snapshot | kineto | lifetimes | rmm | auto")
    p.add_argument("file", metavar="FILE")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="trace to write")
    p.add_argument("--level", default="tensor", choices=("tensor", "segment"), type=_word,
                   help="snapshots: tensor (alloc/free_completed, default) or segment "
                        "(segment_alloc/segment_free: what a driver-level allocator sees)")
    p.add_argument("--close", action="store_true", help="free blocks still live at the end")
    p.add_argument("--time-unit", default="s", choices=tuple(importers.TIME_UNITS), type=_word,
                   help="rmm: unit of numeric Time values (default s)")

    p = sub.add_parser("replay", help="replay a trace through the allocator (no GPU needed)",
                       epilog=EPILOG, formatter_class=fmt)
    p.add_argument("trace", metavar="TRACE", help="gpuarena trace or any importable file")
    p.add_argument("--mode", type=_mode_list, default=list(modes_mod.MODES), action=ModesAction,
                   help=f"comma-separated, from {', '.join(modes_mod.MODES)}, or all (default); "
                   + mode_help)
    p.add_argument("--arena-size", type=_size, metavar="SIZE", help="arena: the preallocated "
                   "region (e.g. 2GiB; default twice the peak in use), whole blocks of 512 bytes "
                   "(a size rounded up is said)")
    p.add_argument("--limit", type=_size, help="grow, vmm, platform: cap on bytes held (e.g. "
                   "8GiB); with --fraction the cap of every mode (GPUARENA_LIMIT, or the "
                   "device's memory)")
    p.add_argument("--fraction", type=_fraction, help="the shim's GPUARENA_MEM_FRACTION, of "
                   "--limit as the cap: 0.75+ (the shim's default) preallocates 75%% of it in "
                   "arena mode and grows past it up to the cap, 0.75 stops there and bounds grow "
                   "and vmm; the smallest size found is then a cap")
    p.add_argument("--vmm-keep", type=_keep, metavar="SIZE", help=KEEP_HELP)
    p.add_argument("--granularity", type=_granularity, metavar="SIZE", help=GRANULARITY_HELP)
    p.add_argument("--no-min", action="store_true",
                   help="skip the search for the smallest size (arena: region; grow, vmm, "
                   "platform: limit) that runs without OOM")
    p.add_argument("--check", action="store_true", help="check allocator invariants each step")
    p.add_argument("--device", type=_device, metavar="N", help="replay device N's events only "
                   "(a trace with events on several devices needs it; the shim keeps one pool per "
                   "context, and a trace names no context, so a device's contexts replay as one "
                   "pool)")
    p.add_argument("--json", action="store_true", help="print the replay tool's JSON")
    _add_input_opts(p)

    p = sub.add_parser("report", help="timeline of bytes in use/reserved (Perfetto JSON, PNG)",
                       epilog=EPILOG, formatter_class=fmt)
    p.add_argument("trace", metavar="TRACE", help="gpuarena trace or any importable file")
    p.add_argument("-o", "--output", metavar="PREFIX",
                   help="writes PREFIX.json and PREFIX.png (default: the input's base name "
                   "less its extension, in the current folder; X.report for X.json or "
                   "X.json.gz; a PREFIX ending in .json or .png is taken without it)")
    p.add_argument("--mode", type=_mode, default="arena", action=OneModeAction,
                   help=f"mode whose reserved bytes are drawn, from a replay of the trace: "
                   f"{', '.join(modes_mod.MODES)} (default arena)")
    p.add_argument("--limit", type=_size, help="the replay's cap, as replay's --limit")
    p.add_argument("--fraction", type=_fraction, help="the shim's GPUARENA_MEM_FRACTION of "
                   "--limit, as replay's --fraction (0.75+: the shim's default arena)")
    p.add_argument("--vmm-keep", type=_keep, metavar="SIZE", help=KEEP_HELP)
    p.add_argument("--granularity", type=_granularity, metavar="SIZE", help=GRANULARITY_HELP)
    _add_input_opts(p)

    p = sub.add_parser("top", help="groups (GPUARENA_GROUP) and their processes, live",
                       epilog=EPILOG, formatter_class=fmt)
    p.add_argument("--once", action="store_true", help="print one table and exit")
    p.add_argument("--json", action="store_true", help="print the groups as JSON and exit")
    p.add_argument("--prometheus", action="store_true", help="print Prometheus text exposition "
                   "(gauges per group, process and device) and exit")
    p.add_argument("--interval", type=_seconds(float, "2 or 0.5", TOP_LEAST_INTERVAL),
                   metavar="S", help="seconds between refreshes of the live view (default 2, at "
                   "least 0.1)")
    p.add_argument("--dir", help="where the ledgers are (default: $GPUARENA_GROUP_DIR, as the "
                   "members were told, else /dev/shm)")
    for p in sub.choices.values():
        _once_each(p)
    return top


def _split_size(sub, argv):
    """A usage error for a size the shell split at its space (`--limit 8 GiB`, `--env
    SIMCUDA_TOTAL_MEM=4 GiB`): GiB was taken for the program ("command not found: GiB"), the trace,
    or an unknown argument (an outside check, 2026-12-06). Only a unit word right after a size
    option's number, before any --."""
    argv = sys.argv[1:] if argv is None else list(argv)
    opts = ("--limit", "--vmm-keep", "--arena-size", "--env")
    for i in range(2, argv.index("--") if "--" in argv else len(argv)):
        opt, value, word = argv[i - 2:i + 1]
        num = value.split("=", 1)[-1] if opt == "--env" else value
        number = re.fullmatch(r"[0-9]*\.?[0-9]+", num.strip(BLANKS))
        if opt in opts and is_unit(word) and number:
            sub.error(f"{opt} {value} {word}: the shell splits a size written with a space in "
                      f"two; write it without the space ({value}{word}) or quote it ('{value} "
                      f"{word}')")


_WORDS = []  # the words being parsed, for _Parser.error


def parse(argv):
    """The parsed arguments of argv (sys.argv[1:] when None); a usage error exits 2."""
    parser = build_parser()
    _WORDS[:] = sys.argv[1:] if argv is None else list(argv)
    # An option the subcommand does not know is the subcommand's usage error, with its usage
    # (parse_args said it at the top level, with the top-level usage: helper-67 F17.1).
    args, unknown = parser.parse_known_args(argv)
    _split_size(parser.subcommands.get(args.cmd, parser), argv)
    words = sys.argv[1:] if argv is None else list(argv)
    if "--" in unknown and "--" in words and words[-1] == "--" and words.count("--") == 1:
        # A last `--` that ends the options with nothing after it (`replay T --`, as a script
        # that always writes one): argparse 3.11 left it over as "unrecognized arguments: --",
        # where gpuarena-replay and getopt take it (an outside check, helper-131).
        unknown.remove("--")
    if unknown:
        sub = parser.subcommands.get(args.cmd, parser)
        # A misspelt option names the one it most likely means, by the rule of the shim's
        # misspelt settings (names.closest): `--limt` said only "unrecognized arguments".
        options = [o for a in sub._actions for o in a.option_strings if o.startswith("--")]
        # An option written after `--` is a word, not an option: `replay T -- --no-min` said
        # "unrecognized arguments: --no-min (did you mean --no-min?)" (an outside check,
        # helper-131). Say where it went instead.
        after = words[words.index("--") + 1:] if "--" in words else []
        placed = [u for u in unknown if u in after
                  and u.split("=", 1)[0] in [o for a in sub._actions for o in a.option_strings]]
        if placed:
            files = [a.metavar for a in sub._actions if not a.option_strings and a.metavar]
            sub.error(f"{' '.join(placed)} after --: "
                      + (f"every word after -- is taken as {' or '.join(files)}, not an option; "
                         f"put {'it' if len(placed) == 1 else 'them'} before -- (gpuarena "
                         f"{args.cmd} {placed[0]} ... -- {' '.join(files)})" if files else
                         f"gpuarena {args.cmd} takes no word after --; put "
                         f"{'it' if len(placed) == 1 else 'them'} before it, or leave -- out"))
        near = [(f"{u}: " if len(unknown) > 1 else "") + f"did you mean {n}?"
                for u in unknown if u.startswith("--")
                for n in [names.closest(u.split("=", 1)[0], options, "--", fold=False)] if n]
        sub.error(f"unrecognized arguments: {' '.join(unknown)}"
                  + (f" ({'; '.join(near)})" if near else ""))
    return args
