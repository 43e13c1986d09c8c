"""Dispatch for the `gpuarena` command, and the checks of its outputs; the only place that prints
errors besides argparser (its options and usage errors).

Every subcommand's work lives in its own module; this file turns arguments into calls, a GaError
into "gpuarena: message" with exit code 1, a UsageError and argparse's usage errors into exit code
2, a SIGTERM or SIGHUP that run/compare passed on to the program into 128+N, one that ends any
other subcommand into its death by that signal once its temporary files are gone (ending), and an
input too large for memory (MemoryError) into a message with exit code 1, so no user ever sees a
traceback for bad input.
"""

import errno
import json
import os
import re
import shutil
import stat
import sys
import tempfile

from . import GaError, UsageError
from . import argparser
from . import bounded
from . import doctor as doctor_mod
from . import ending
from . import importers
from . import modes as modes_mod
from . import paths
from . import plot
from . import replay as replay_mod
from . import report as report_mod
from . import runner
from . import top as top_mod
from . import tracefile as tf
from .argtypes import _fraction  # noqa: F401 (tests call cli._fraction)
from .fmt import human_bytes


def _command(args):
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        args.subparser.error("no program given: put it after --, e.g. "
                             f"gpuarena {args.cmd} -- python3 train.py")
    if not cmd[0]:  # `-- "$PROG" ...` with PROG unset: "cannot execute : permission denied"
        args.subparser.error("the program's name after -- is empty (an unset variable?); give "
                             "the program to run, e.g. -- python3 train.py")
    return cmd


def _print_counts(counts):
    for k, v in counts.items():
        print(f"  {k.replace('_', ' ')}: {v:,}")


def _not_over_input(src, out, what):
    """GaError when writing `out` would replace the input file `src` (also through a link)."""
    if runner.same_file(src, out):
        raise GaError(f"{what} {out} is the input file {src} (or a link to it): writing it would "
                      "destroy the input; give another output path")


def do_import(a):
    _check_out_path("-o", a.output, dash_ok=False)
    _not_over_input(a.file, a.output, "output")
    _not_a_program("-o", a.output)
    _trace_only_over_a_trace("-o", a.output, link_replaced=True)
    _check_out_folder("-o", a.output, "path", "the input is read")
    trace, counts, used = importers.load_any(a.file, a.format, a.level, a.close, a.time_unit)
    replay_mod.say_cut(a.file, getattr(trace, "truncated_bytes", 0), "imported")
    tf.write(a.output, trace)
    print(f"gpuarena: imported {a.file} ({used}) -> {a.output}: {len(trace.events):,} events")
    _print_counts(counts)
    if importers.kineto_hint(counts):
        print(f"gpuarena: {a.file}: {importers.kineto_hint(counts)}", file=sys.stderr)
    return 0


def _fix_modes(users, option):
    """How to bring a mode of `users` in: run's --mode takes one mode, the others a list."""
    if option == "--mode one":
        return f"use --mode {sorted(users)[0] if len(users) == 1 else ' or '.join(sorted(users))}"
    return f"add {' or '.join(sorted(users))} to {option}"


def _keep_needs_vmm(a, modes, option="--mode"):
    if a.vmm_keep is not None and "vmm" not in modes:
        raise UsageError("--vmm-keep applies to vmm mode only: " + _fix_modes({"vmm"}, option))


def _fraction_needs_pool(a, modes, option):
    """--fraction bounds a pool's share of the cap: a fixed one in arena, grow and vmm mode, one
    with '+' (grow past it up to the cap) only arena's preallocation. Given where no run uses it,
    it would change nothing: a usage error, as --vmm-keep outside vmm."""
    if a.fraction is None:
        return
    if a.fraction.endswith("+"):
        if "arena" not in modes:
            raise UsageError(f"--fraction {a.fraction} changes arena mode only (its preallocated "
                             "share; grow and vmm grow up to the cap as without it, platform "
                             "takes no share): " + _fix_modes({"arena"}, option) +
                             f", or give a fixed fraction such as {a.fraction[:-1]}")
    elif not {"arena", "grow", "vmm"} & set(modes):
        raise UsageError("--fraction applies to arena, grow and vmm (platform takes no share): "
                         + _fix_modes({"arena", "grow", "vmm"}, option))


# Variables run and compare set themselves from their options: an --env of one overrode the
# option (every column of compare ran the --env's mode under its own name) or hid the file the
# command reads its figures from. Refused, naming the option to use. GPUARENA_TRACE is the
# user's own in compare (no --trace there; a %p in its path gives each run its own file).
_OWNED = {"run": {"GPUARENA_MODE": "--mode", "GPUARENA_PREALLOCATE": "--mode grow",
                  "GPUARENA_STATS": "--stats", "GPUARENA_TRACE": "--trace"},
          "compare": {"GPUARENA_MODE": "--modes", "GPUARENA_PREALLOCATE": "--modes",
                      "GPUARENA_STATS": None}}


def _check_env(sub, extra, trace_given=False):
    """UsageError for a variable the command sets itself, given with --env or inherited: an
    exported GPUARENA_MODE, GPUARENA_PREALLOCATE or GPUARENA_STATS (the Options table's way to set
    them) was replaced without a word, so a vmm run ran in arena mode and the user's statistics
    file was never written (helper-60 F5). An inherited GPUARENA_TRACE is the user's own in run
    unless --trace is given too (then it would be replaced)."""
    for key, opt in _OWNED[sub].items():
        how = (f"use {opt} instead" if opt else
               "compare reads each mode's statistics itself (gpuarena run --stats F writes "
               "one run's)")
        if key in extra:
            raise UsageError(f"--env {key}={extra[key]}: gpuarena {sub} sets {key} itself; {how}")
        value = os.environ.get(key, "")
        if value.strip() and (key != "GPUARENA_TRACE" or trace_given):
            raise UsageError(f"{key}={value} is set in the environment, and gpuarena {sub} sets "
                             f"{key} itself (it would replace yours without a word); {how}, and "
                             f"unset {key} (env -u {key} gpuarena {sub} ...)")


def _check_out_path(option, path, dash_ok):
    """UsageError for an output path that names no file: empty, '-' where it is not stderr
    (import wrote a file named '-'), or a folder."""
    if path is None:
        return
    if not path.strip():
        raise UsageError(f"{option} is empty: give a file path" + (", or - for stderr"
                                                                    if dash_ok else ""))
    if path == "-" and not dash_ok:
        raise UsageError(f"{option} -: a trace is binary, not for a terminal; give a file path, "
                         "e.g. run.gatrace")
    if path != "-" and (path.endswith(("/", os.sep)) or os.path.isdir(path)):
        raise UsageError(f"{option} {path} is a folder: name a file in it, e.g. "
                         f"{os.path.join(path, 'run.gatrace' if 'trace' in option or option == '-o' else 'stats.json')}")


def _granularity_needs_vmm(a, modes, option="--mode"):
    if a.granularity and "vmm" not in modes:
        raise UsageError("--granularity applies to vmm mode only: " + _fix_modes({"vmm"}, option))


def do_replay(a):
    _keep_needs_vmm(a, a.mode)
    _granularity_needs_vmm(a, a.mode)
    # As --vmm-keep: an option of a mode not replayed would be ignored without a word.
    if a.arena_size and "arena" not in a.mode:
        raise UsageError("--arena-size applies to arena mode only: add arena to --mode")
    replay_mod.check_fraction(a, a.mode, lambda a, m: _fraction_needs_pool(a, m, "--mode"))
    mode = "all" if tuple(a.mode) == modes_mod.MODES else ",".join(a.mode)
    doc, counts = replay_mod.replay(a.trace, a.format, a.level, mode, a.arena_size,
                                    a.limit, not a.no_min, a.check, a.device, a.vmm_keep,
                                    a.fraction, a.granularity)
    failures = replay_mod.check_failure_messages(doc, a.trace)
    replay_mod.say_cut(a.trace, doc.get("truncated_bytes") if isinstance(doc, dict) else None)
    if a.json:
        print(json.dumps(doc, indent=2))
        return _say_check_failures(failures)
    if counts:
        print(f"imported {a.trace}:")
        _print_counts(counts)
    if a.fraction:  # what the arena's and the min size's rows mean then
        print(f"GPUARENA_MEM_FRACTION={a.fraction} of a cap (--limit) of {human_bytes(a.limit)}: "
              "size limit is the cap, min size the smallest cap")
    print(replay_mod.render(doc))
    return _say_check_failures(failures)


def _say_check_failures(lines):
    """After the output: the modes whose invariant checks failed, and exit 1 if any (it was 0)."""
    if not lines:
        return 0
    sys.stdout.flush()
    for line in lines:
        print(line, file=sys.stderr)
    return 1


def _check_prefix(option, prefix):
    """UsageError for a PREFIX that names no file: empty, or a folder (DIR/ wrote DIR/.json, a
    hidden file)."""
    if prefix is None:
        return
    if not prefix.strip():
        writes = "out/run1.json and .png" if option == "-o" else "out/run1.png"
        raise UsageError(f"{option} is empty: give a PREFIX such as out/run1 (writes {writes})")
    if prefix.endswith(("/", os.sep)) or os.path.isdir(prefix):
        raise UsageError(f"{option} {prefix} is a folder, and a PREFIX names files: give one "
                         f"inside it, e.g. {os.path.join(prefix, 'run1')}")
    for there in dict.fromkeys((prefix, _strip_ext(prefix))):
        # a link through /proc (/dev/stdout) is a descriptor whatever it is now: with the output
        # sent to a file it passed as one, and `-o /dev/stdout > out.txt` wrote /dev/stdout.json
        # into /dev (an outside check, helper-144)
        proc = os.path.exists(there) and tf.via_proc(there)
        if proc or (os.path.exists(there) and not (os.path.isfile(there) or os.path.isdir(there))):
            # `-o /dev/null` wrote /dev/null.json and /dev/null.png beside the device (an outside
            # check, 2026-12-06; fixed in the 25th session): a PREFIX names files to write
            mode = os.stat(there).st_mode
            kind = (f"a descriptor of this process ({proc})" if proc else
                    "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
            stem = _strip_ext(prefix)
            writes = f"{stem}.json and {stem}.png" if option == "-o" else f"{stem}.png"
            raise UsageError(f"{option} {prefix}: {there} is {kind}, and a PREFIX names the "
                             f"files to write ({writes}); give a PREFIX such as out/run1 "
                             "(nothing was written)")
    if not os.path.basename(_strip_ext(prefix)):
        # `-o .json` or `out/.png`: taken without its extension, the PREFIX was empty, and the
        # hidden .json and .png were written (an outside check, helper-131)
        name = os.path.join(os.path.dirname(prefix), "run1")
        writes = f"{name}.json and {name}.png" if option == "-o" else f"{name}.png"
        raise UsageError(f"{option} {prefix} is an extension alone: a PREFIX names the files "
                         f"without theirs; give a name, e.g. {name} (writes {writes})")
    for ext in (".json", ".png") if option == "-o" else (".png",):
        if os.path.isdir(_strip_ext(prefix) + ext):
            raise UsageError(f"{option} {prefix}: {_strip_ext(prefix) + ext} is a folder; "
                             "remove it or give another PREFIX (nothing was written)")


def _strip_ext(prefix):
    """A PREFIX given with the extension of a file it names (out.json, run.png) is taken without
    it: report -o out.json wrote out.json.json."""
    return prefix[:-len(prefix.rsplit(".", 1)[-1]) - 1] if prefix.endswith((".json", ".png")) \
        else prefix


def _default_prefix(path):
    """report's PREFIX without -o: the input's base name less its extension (and a .gz), in the
    current folder; a JSON input (a Kineto X.json or X.json.gz) gets X.report, since X.json is
    the input itself, or its uncompressed twin (helper-60 F8: `report kin.json` was refused)."""
    base = os.path.basename(path)
    base = base[:-3] if base.endswith(".gz") else base
    stem, ext = os.path.splitext(base)
    return stem + ".report" if ext == ".json" else stem


def do_report(a):
    _keep_needs_vmm(a, (a.mode,))
    _granularity_needs_vmm(a, (a.mode,), "--mode one")
    a.arena_size = None
    replay_mod.check_fraction(a, (a.mode,), lambda a, m: _fraction_needs_pool(a, m, "--mode one"))
    _check_prefix("-o", a.output)
    prefix = _strip_ext(a.output) if a.output else _default_prefix(a.trace)
    for ext in (".json", ".png"):
        _not_over_input(a.trace, prefix + ext, "report file")
        _not_a_program("-o", prefix + ext)
        _never_over_a_trace("-o", prefix + ext)
        if not a.output:
            _default_not_over_other(a.trace, prefix + ext)
    # a folder that is not there failed the write after the whole input was read and replayed
    _check_out_folder("-o", prefix + ".json", "PREFIX", "the input is read")
    trace, counts, used = importers.load_any(a.trace, a.format, a.level)
    replay_mod.check_allocates(a.trace, trace.events, "draw", counts)  # drew an empty chart
    replay_mod.say_cut(a.trace, getattr(trace, "truncated_bytes", 0), "drawn")
    failures = []
    reserved, why = report_mod.reserved_series(trace, a.mode, a.vmm_keep, name=a.trace,
                                               failures=failures, limit=a.limit,
                                               fraction=a.fraction, granularity=a.granularity)
    if reserved is None:
        print(f"gpuarena: drawing bytes in use only, not reserved: {why}", file=sys.stderr)
    series = report_mod.in_use_series(trace)
    # the replay's settings beside its mode, so two reports of one trace tell them apart (the
    # keep and the granule were not said, while they change vmm's curve: an outside check,
    # 2026-12-07, test_outside127.py)
    setting = ", ".join(filter(None, (
        a.fraction and f"GPUARENA_MEM_FRACTION={a.fraction}",
        a.limit and f"cap {a.limit} bytes",
        a.vmm_keep is not None and f"GPUARENA_VMM_KEEP={a.vmm_keep} bytes",
        a.granularity and f"granules of {a.granularity} bytes")))
    report_mod.write_chrome_trace(f"{prefix}.json", trace, reserved, series=series,
                                  mode=a.mode, name=a.trace, logical=used == "lifetimes",
                                  setting=setting)
    print(f"gpuarena: wrote {prefix}.json ({len(trace.events):,} events; open it in "
          "https://ui.perfetto.dev or chrome://tracing)")
    if report_mod.write_png(f"{prefix}.png", trace, reserved, series=series, mode=a.mode,
                            name=a.trace, logical=used == "lifetimes", setting=setting):
        print(f"gpuarena: wrote {prefix}.png")
    else:
        _png_skipped(f"{prefix}.png")
    return _say_check_failures(failures)


# How the files report writes begin: a file there that begins otherwise is not an earlier report.
_REPORT_HEADS = {".json": b'{"traceEvents":[', ".png": b"\x89PNG\r\n\x1a\n"}


def _default_not_over_other(src, path):
    """GaError when report's default output (no -o) would replace a file there that is not an
    earlier report: `run --stats run.json --trace run.gatrace`, then `report run.gatrace`,
    replaced the statistics run.json with the chart's JSON (helper-82). An earlier report's
    files are replaced, as before."""
    if not os.path.lexists(path):
        return
    head = _head(path, 32)
    want = _REPORT_HEADS[os.path.splitext(path)[1]]
    if not head.startswith(want):
        what = (" (gpuarena's statistics, by its first bytes)"
                if head.startswith(b'{"gpuarena_stats"') else "")
        raise GaError(f"report {src} would write {path}, which is there and is not an earlier "
                      f"report{what}; give -o PREFIX to write elsewhere, or -o "
                      f"{_strip_ext(path)} to replace it (nothing was written)")


def _png_skipped(path):
    """The line for a chart not drawn (no matplotlib), naming a file already at its path: an
    earlier run's chart, left beside this run's JSON or table without a word (helper-82)."""
    line = f"gpuarena: {plot.MISSING}"
    if os.path.lexists(path):
        line += f"; {path} is from an earlier run, not this one"
    print(line, file=sys.stderr)


def _settings(a):
    return {"GPUARENA_LIMIT": a.limit, "GPUARENA_MEM_FRACTION": a.fraction,
            "GPUARENA_VMM_KEEP": a.vmm_keep}


def _run_mode(a):
    """--mode, with the old --no-preallocate as a spelling of --mode grow."""
    if not a.no_preallocate:
        return a.mode or "arena"
    if a.mode not in (None, "arena", "grow"):
        raise UsageError(f"--no-preallocate (that is, --mode grow) conflicts with --mode {a.mode}"
                         f": give one of them (--mode grow or --mode {a.mode})")
    print("gpuarena: --no-preallocate is now --mode grow; it will go away", file=sys.stderr)
    return "grow"


def _not_over_command(option, out, cmd):
    """UsageError when --stats/--trace names the program (found on PATH as the shell would) or
    an existing file among its arguments, an option's value written `--opt=FILE` included:
    `--stats train.sh -- sh train.sh` (a completion slip for train.json) replaced the script with
    the JSON, exit 0 (helper-60 F2)."""
    if out is None or out == "-" or "%p" in out:
        return
    prog = cmd[0] if os.sep in cmd[0] else shutil.which(cmd[0])
    named = [(prog, "the program")] + [(arg, "the file") for arg in cmd[1:]]
    # the value of an option written as one argument, `--config=cfg.json` (an outside check)
    named += [(arg.split("=", 1)[1], "the file") for arg in cmd[1:]
              if arg.startswith("-") and "=" in arg]
    for path, what in named:
        if path and os.path.isfile(path) and runner.same_file(out, path):
            raise UsageError(f"{option} {out} is {what} {path} named in the command (or a link "
                             "to it): writing it would replace it; give another path")
        # A file the program is to write (`--output results.json`) is named before it exists:
        # the shim's file would replace the program's at exit (helper-67 F8).
        if path and what == "the file" and not os.path.exists(path) and \
                os.path.realpath(path) == os.path.realpath(out):
            raise UsageError(f"{option} {out} is named in the command ({path}), where the "
                             f"program may write it: what {option} writes would replace the "
                             "program's file; give another path")
    # gpuarena's own pieces: statistics over the shim dropped it from every later run, which
    # then ran uncapped with exit 0 (helper-67 F11).
    for rel, what in (("lib/libgpuarena.so", "gpuarena's shim"),
                      ("bin/gpuarena-replay", "gpuarena's replay tool"),
                      ("sim/libcuda.so.1", "the simulated driver"),
                      ("sim/libnvidia-ml.so.1", "the simulated NVML")):
        for piece in paths.candidates(rel):
            if os.path.isfile(piece) and runner.same_file(out, piece):
                raise UsageError(f"{option} {out} is {what} ({piece}): writing it would replace "
                                 "it; give another path")
    # Any other program or library (an installed copy's shim, which the checkout's command
    # does not list above, a script, an archive): statistics and traces are never written over
    # one (a script and gpuarena's own static library were still replaced: helper-77 R2).
    _not_a_program(option, out)
    if option == "--stats" and _head(out, 8) == b"GATRACE\0":  # as the shim refuses it
        raise UsageError(f"--stats {out} is a gpuarena trace, which the statistics would "
                         "replace; give another path")
    if option == "--stats":
        _stats_only_over_stats(out)
    if option == "--trace":
        _trace_only_over_a_trace(option, out)


def _stats_only_over_stats(out):
    """UsageError, as the shim refuses GPUARENA_STATS there, when --stats names a file that
    holds something other than an earlier report, or a read-only file (no write bit, or one
    this user may not write): both were replaced (helper-114)."""
    _unreadable("--stats", out)
    head = _head(out, 64)
    if head and not re.match(rb'\{\s*"gpuarena_stats"', head):
        raise UsageError(f"--stats {out} is there and is not a gpuarena statistics file: writing "
                         "the statistics would replace it; give another path, or remove the file "
                         "first")
    if os.path.isfile(out) and (not os.stat(out).st_mode & 0o222 or not os.access(out, os.W_OK)):
        raise UsageError(f"--stats {out} is read-only: writing the statistics would replace it; "
                         "make it writable (chmod u+w) or give another path")


_TRACE_MAGIC = b"GATRACE\0"  # allocator/ga_trace.h's GA_TRACE_MAGIC, with its NUL


def _trace_only_over_a_trace(option, out, link_replaced=False):
    """UsageError when a trace would replace a file there that holds something and is not a
    trace (nor the first bytes of one, a run cut short): `run --trace notes.txt` and
    `import X -o notes.txt` replaced a user's file with binary records (an outside check,
    helper-102). An empty file, or an earlier trace, is replaced as before; so is a symbolic
    link where the writer replaces the link, not its target (link_replaced: import's)."""
    if link_replaced and os.path.islink(out):
        return
    _unreadable(option, out)
    head = _head(out, 8)
    if head and not _TRACE_MAGIC.startswith(head):
        raise UsageError(f"{option} {out} is there and is not a gpuarena trace: writing the "
                         "trace would replace it; give another path, or remove the file first")


def _never_over_a_trace(option, out):
    """UsageError when an output that is not a trace (report's JSON and PNG, compare's chart)
    would replace a trace: the one file that cannot be made again, which the statistics never
    replace either (`report t.gatrace -o other` replaced the trace other.json: helper-102)."""
    if _head(out, 8) == _TRACE_MAGIC:
        raise UsageError(f"{option} {out} is a gpuarena trace, which this output would replace; "
                         "give another path")


def _unreadable(option, out):  # as the shim: taken for empty, it was replaced (helper-116)
    if runner.unreadable(out):
        raise UsageError(f"{option} {out} holds bytes this user may not read, which writing would "
                         "replace; give another path, or make it readable (chmod u+r)")


def _head(path, n):
    """The first n bytes of a regular file at path, else b"": a FIFO is never opened (that
    blocked until a writer came, for ever: `run --stats FIFO`)."""
    if not os.path.isfile(path):
        return b""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            return os.read(fd, n)
        finally:
            os.close(fd)
    except OSError:
        return b""


def _not_a_program(option, out):
    """UsageError when out is an ELF file, a script or an archive: writing it would replace a
    program or library (import -o libgpuarena.so replaced the shim with a trace: helper-82)."""
    head = _head(out, 8)
    if head.startswith((b"\x7fELF", b"#!", b"!<arch>\n")):
        raise UsageError(f"{option} {out} is a program or library (an ELF file, a script or an "
                         "archive): writing it would replace it; give another path")
    if head == b"GAGROUP\0":  # shim/group_layout.h's GA_LEDGER_MAGIC (an outside re-test)
        raise UsageError(f"{option} {out} is a gpuarena group's ledger (GPUARENA_GROUP): writing "
                         "it would destroy the group's count of its members' memory; give "
                         "another path")


def _check_out_folder(option, path, what, before="the program runs", target=None):
    """GaError, before any program runs, when the folder an output goes to is missing or cannot
    be written: a training run of hours lost its statistics or trace at the end (helper-67 F1).
    A real file is made and removed, not os.access: root passes that check where sysfs still
    refuses. A folder that refuses new files passes where the file written (target: path, or
    the file a link leads to where the link is followed) is one the writer writes in place
    (tracefile.in_place_refusal): it was refused, a file the user may write (helper-119)."""
    if not path or path == "-":
        return
    if os.path.exists(path) and not os.path.isfile(path):
        return  # a device, FIFO or descriptor (/dev/null, /proc/self/fd/1): written through
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise GaError(f"{option} {path}: the folder {folder} does not exist; create it or give "
                      f"another {what} (checked before {before})")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".gpuarena-check-"):
            pass
    except OSError as e:
        target = target or path
        why = tf.in_place_refusal(target) if e.errno in (errno.EACCES, errno.EPERM) else ""
        if why is None:
            return
        why = f", and {why}" if why and os.path.lexists(target) else ""
        raise GaError(f"{option} {path}: cannot write in the folder {folder} ({e.strerror}{why}); "
                      f"give a {what} in a folder you can write (checked before {before})") \
            from None


def do_run(a):
    cmd = _command(a)
    mode = _run_mode(a)
    _keep_needs_vmm(a, (mode,), "--mode one")
    _fraction_needs_pool(a, (mode,), "--mode one")
    _check_out_path("--stats", a.stats, dash_ok=True)
    _check_out_path("--trace", a.trace, dash_ok=False)
    if a.stats and a.trace and a.stats != "-" and runner.same_file(a.stats, a.trace):
        raise UsageError(f"--stats {a.stats} and --trace {a.trace} are the same file: the "
                         "statistics would replace the trace; give them different paths")
    for option, out in (("--stats", a.stats), ("--trace", a.trace)):
        _not_over_command(option, out, cmd)
    extra = runner.parse_env_pairs(a.env)
    _check_env("run", extra, a.trace is not None)
    for option, out in (("--stats", a.stats), ("--trace", a.trace)):  # both follow a link
        _check_out_folder(option, out, "path", target=out and os.path.realpath(out))
    paths.shim()  # our own setup first: its message says how to build it
    if not a.sim:
        runner.require_driver("run", extra)
    s = dict(_settings(a), **modes_mod.ENV[mode])
    # Absolute: the shim opens them where the program is at the time, and a program that
    # changes folder first (a launcher, a script's cd) left them somewhere else without a word.
    # A folder whose name holds %p keeps them as typed (runner.out_path).
    s["GPUARENA_TRACE"] = runner.out_path(a.trace) if a.trace else None
    stats = runner.out_path(a.stats) if a.stats and a.stats != "-" else a.stats
    return runner.run(cmd, s, stats, a.sim, extra)


def do_compare(a):
    cmd = _command(a)
    _keep_needs_vmm(a, a.modes, "--modes")
    _fraction_needs_pool(a, a.modes, "--modes")
    _check_prefix("--plot", a.plot)
    a.plot = _strip_ext(a.plot) if a.plot else a.plot
    _check_out_folder("--plot", a.plot, "PREFIX", target=a.plot and f"{a.plot}.png")
    if a.plot:  # the PNG over a file the program names, or gpuarena's own (helper-72 NEW-1)
        _not_over_command("--plot", f"{a.plot}.png", cmd)
        _never_over_a_trace("--plot", f"{a.plot}.png")
    extra = runner.parse_env_pairs(a.env)
    _check_env("compare", extra)
    trace = extra.get("GPUARENA_TRACE", os.environ.get("GPUARENA_TRACE"))
    if trace and "%p" not in trace:
        raise UsageError(f"GPUARENA_TRACE={trace}: compare runs the program once per mode (and "
                         "--repeat), and each run would replace the last one's trace; put %p in "
                         "the path (it becomes the pid: one trace per run), or record one mode "
                         "with gpuarena run --trace")
    paths.shim()
    if not a.sim:
        runner.require_driver("compare", extra)
    results = runner.compare(cmd, a.modes, a.repeat, _settings(a), a.sim, extra)
    if a.json:
        print(json.dumps(results, indent=2))
    else:
        print(runner.render(results))
    if a.plot:
        if plot.compare_png(f"{a.plot}.png", results):
            print(f"gpuarena: wrote {a.plot}.png", file=sys.stderr)
        else:
            _png_skipped(f"{a.plot}.png")
    several = [f"{m} {r['processes']}" for m, r in results.items() if r["processes"] > 1]
    if several:
        print(f"gpuarena: the program started several CUDA processes ({', '.join(several)}); "
              "each column sums their statistics, a peak as the sum of each process's own "
              "peak", file=sys.stderr)
    for m, r in results.items():  # a misspelt setting, an out-of-memory explained (helper-67 F3)
        if r["shim_said"]:
            print(f"gpuarena: mode {m}: the shim said:\n  " + "\n  ".join(r["shim_said"]),
                  file=sys.stderr)
    failed = [m for m, r in results.items() if r["stats"] is None]
    for m in failed:
        print(f"gpuarena: {runner.no_stats_message(m, results[m])}", file=sys.stderr)
    for m, r in results.items():
        if any(r["exits"]) and m not in failed:
            print(f"gpuarena: {runner.failed_run_message(m, r)}", file=sys.stderr)
    # 1 when a column is missing, or when the program failed in every mode: a script's
    # `gpuarena compare ... && next` must not go on from a comparison of failures. A program
    # that fails in some modes only (an out-of-memory under a cap) is a result: 0, said above.
    return 1 if failed or all(all(r["exits"]) for r in results.values()) else 0


def do_doctor(a):
    if a.python is not None and not a.python.strip():  # `--python "$PY"`, PY unset: it checked
        raise UsageError("--python is empty: give an interpreter, e.g. --python "  # its own
                         "/usr/bin/python3, or leave the option out for the one running gpuarena")
    doc = doctor_mod.diagnose(a.sim, a.python, a.timeout)
    print(json.dumps(doc, indent=2) if a.json else doctor_mod.render(doc))
    return 0 if doc["ok"] else 1


def do_top(a):
    if a.json and a.prometheus:
        raise UsageError("--json and --prometheus: choose one output format")
    one_shot = "--once" if a.once else "--json" if a.json else "--prometheus" if a.prometheus else ""
    if a.interval is not None and one_shot:
        raise UsageError(f"--interval applies to the live view only, and {one_shot} prints once: "
                         f"drop one of them")
    directory = a.dir if a.dir is not None else os.environ.get("GPUARENA_GROUP_DIR") or "/dev/shm"
    if not directory.strip():
        raise UsageError("--dir is empty: give the folder of the ledgers (the members' "
                         "GPUARENA_GROUP_DIR; default /dev/shm)")
    return top_mod.run(directory, a.once, a.json, a.prometheus,
                       2.0 if a.interval is None else a.interval)


COMMANDS = {"import": do_import, "replay": do_replay, "report": do_report, "run": do_run,
            "compare": do_compare, "doctor": do_doctor, "top": do_top}


# The subcommands whose result is what they print (an outside check, helper-109).
_RESULT_ON_STDOUT = ("replay", "compare", "doctor", "top")

# errno values of a write that failed for want of room or a working device (/dev/full, a full disk)
_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def main(argv=None):
    """The command: its exit code. What it prints is flushed before the code is returned, so an
    output that could not be written (`--json > /dev/full`, a full disk) is a `gpuarena:` line and
    exit 1: it was a traceback, or exit 0 with the output lost (--help, a short table)."""
    try:
        # a user's value of thousands of characters is shown by its head and tail (bounded)
        with bounded.stderr(sys.argv[1:] if argv is None else [str(a) for a in argv]):
            try:
                code = _main(argv)
            except SystemExit as e:  # argparse's --help and usage errors
                code = e.code
        if sys.stdout is not None:  # None when started with it closed (>&-)
            sys.stdout.flush()
    except KeyboardInterrupt:  # Ctrl-C before _main's own handler (reading the options)
        return 130
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        _stdout_gone()
        return 0
    except OSError as e:
        if e.errno not in _WRITE_ERRORS:
            raise
        _stdout_gone()
        print(f"gpuarena: cannot write the output: {e.strerror}; free space where it goes or "
              "send it elsewhere", file=sys.stderr)
        return 1
    return code


def _stdout_gone():
    """Standard output pointed at /dev/null, so that Python's own flush at exit, of what is
    still buffered, fails no second time."""
    if sys.stdout is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _main(argv):
    args = argparser.parse(argv)
    old = ending.install()
    try:
        plot.check_env()
        if sys.stdout is None and args.cmd in _RESULT_ON_STDOUT:
            # started with it closed (>&-): the whole run went by and exit 0 lost its result
            raise GaError("standard output is closed (>&-), and the result is printed there: "
                          "send it to a file or to /dev/null")
        return COMMANDS[args.cmd](args)
    except ending.Ended as e:  # the with blocks on the way here removed the temporary files
        print(f"gpuarena: stopped by {e}", file=sys.stderr)
        return ending.die(e.signum)
    except UsageError as e:
        print(f"gpuarena: {e}", file=sys.stderr)
        return 2
    except runner.Stopped as e:
        print(f"gpuarena: {e}", file=sys.stderr)
        return e.code
    except GaError as e:
        print(f"gpuarena: {e}", file=sys.stderr)
        return 1
    except MemoryError:
        print("gpuarena: out of memory: the input is too large for the memory this process may "
              "use (see `ulimit -v` and free memory); use a smaller input", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        ending.restore(old)
