"""`gpuarena run` and `gpuarena compare`: an unmodified program under the shim, and its figures.

The shim is configured only through the environment (it reads GPUARENA_* once, at first CUDA use),
so running is: prepend libgpuarena.so to LD_PRELOAD (keeping what the user preloads), set the
variables, exec the program, read the statistics JSON the shim writes at exit. Compare repeats that
per mode and prints the median-wall-time run of each mode side by side. The shim writes the stats
file atomically (tmp + rename), so a file that exists is complete. While a program runs, SIGTERM
and SIGHUP (a container stopped, a service restarted, a closed terminal) are passed on to it rather
than killing this command alone, which would leave the program running unwatched and the temporary
folders behind: the command waits for the program, cleans up, and exits with the program's status
(compare stops there, with 128+N). ld.so splits LD_PRELOAD at spaces and colons, so a shim whose
path holds one is refused rather than silently not loaded.
"""

import errno
import fcntl
import json
import os
import re
import signal
import stat
import statistics
import subprocess
import sys
import threading
import time

from . import GaError, UsageError
from . import modes as modes_mod
from . import paths
from . import statsfiles
from .fmt import human_bytes, human_count, human_frac, human_ns, parse_size, table

STATS_FORMATS = (1, 2)  # "gpuarena_stats" values this command reads

def env_pair(text):
    """'K=V' unchanged; UsageError for an entry without '=' or without a name."""
    key, sep, _value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"{text!r} is not KEY=VALUE (for example --env "
                         "XLA_PYTHON_CLIENT_ALLOCATOR=platform)")
    return text


def parse_env_pairs(pairs):
    """['K=V', ...] -> dict; UsageError for an entry without '=', or for one variable given two
    values (`--env K=1 --env K=2` kept the last without a word: helper-131)."""
    out = {}
    for p in pairs or []:
        key, _sep, value = env_pair(p).partition("=")
        if key in out and out[key] != value:
            raise UsageError(f"--env {key} given twice ({key}={out[key]}, then {key}={value}): "
                             "a variable takes one value; give it once")
        out[key] = value
    return out


def preload_list(shim, old):
    """LD_PRELOAD with the shim first, except sanitizer runtimes (libasan.so...), which must
    stay ahead of every instrumented library, a sanitizer-built shim included."""
    entries = [e for e in re.split(r"[:\s]+", old or "") if e]
    san = [e for e in entries if re.match(r"lib[a-z]*san\.so", os.path.basename(e))]
    return ":".join(san + [shim] + [e for e in entries if e not in san])


def preload_problem(shim):
    """Why ld.so would not load the shim from this path (it splits LD_PRELOAD at white space and
    colons, and then ignores the pieces without a word), or None."""
    bad = re.search(r"[\s:]", shim)
    if not bad:
        return None
    return (f"the shim's path {shim} contains {'a colon' if bad.group() == ':' else 'white space'}"
            ", where the loader splits LD_PRELOAD, so the shim would not be loaded and the "
            "program would run without the cap; install gpuarena under a path without spaces or "
            "colons (make install PREFIX=...), or point GPUARENA_BUILD at a symlink to the build "
            "folder whose path has none")


def preloadable_shim():
    """The shim's path, checked for LD_PRELOAD (GaError when the loader would drop it)."""
    shim = paths.shim()
    why = preload_problem(shim)
    if why:
        raise GaError(why)
    return shim


def out_path(path):
    """An output path made absolute from the command's folder, so that a program that changes
    folder writes it where it was named; but as typed where that folder's own name holds "%p",
    which the shim would expand in the absolute path as it expands the file's (`run --trace
    t.gatrace` in a folder `d%p` wrote to d1234/, which is not there: the trace and the statistics
    were lost, exit 0, until an outside check, helper-116). The shim keeps such a path relative
    too (options.c): it is then taken from the folder the program is in at its first CUDA call."""
    if os.path.isabs(path):
        return path
    try:
        cwd = os.getcwd()
    except OSError:
        return path
    return path if "%p" in cwd else os.path.abspath(path)


def unreadable(path):
    """Whether path is a regular file that holds bytes this user may not read (mode 0200): the
    shim cannot tell it for an earlier report or trace and leaves it; taken for empty, such a
    file was replaced (an outside check, helper-116)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > 0 and not os.access(path, os.R_OK)


def child_env(settings, sim=False, extra=None):
    """The child's environment: ours plus the preload, the GPUARENA_* settings and extras."""
    env = dict(os.environ)
    env.update({k: str(v) for k, v in settings.items() if v is not None})
    # An --env LD_PRELOAD or LD_LIBRARY_PATH is merged as the inherited ones are, never in place
    # of the shim or the simulated driver: replaced, the program ran uncapped with exit 0.
    env.update(extra or {})
    # A relative trace path is made absolute here, as --trace is: the shim opens it where the
    # program is at its first allocation, and a program that changed folder first wrote it
    # elsewhere (an inherited GPUARENA_TRACE was passed as it was: helper-67 F15).
    trace = env.get("GPUARENA_TRACE", "")
    if trace.strip() and trace != "-":
        env["GPUARENA_TRACE"] = out_path(trace)
    env["LD_PRELOAD"] = preload_list(preloadable_shim(), env.get("LD_PRELOAD"))
    if sim:
        d = paths.sim_dir()
        old = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = f"{d}:{old}" if old else d
    return env


_PROBE = ("import ctypes, sys\n"
          "try:\n    ctypes.CDLL(sys.argv[1])\n"
          "except OSError as e:\n    print(e)\n    sys.exit(3)\n")


def driver_problem(extra=None):
    """Why the program could not load its CUDA driver (libcuda.so.1, or GPUARENA_LIBCUDA), or
    None when it can. Tried in a child with the program's environment (its LD_LIBRARY_PATH), so
    the answer is the program's, not this command's."""
    env = dict(os.environ)
    env.update(extra or {})
    env.pop("LD_PRELOAD", None)
    name = env.get("GPUARENA_LIBCUDA") or "libcuda.so.1"
    try:
        p = subprocess.run([sys.executable, "-c", _PROBE, name], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None  # cannot tell: let the program itself try
    if p.returncode == 0:
        return None
    return p.stdout.decode("utf-8", "replace").strip() or f"{name} cannot be loaded"


def require_driver(sub, extra=None):
    """GaError that suggests --sim when the program could not load a CUDA driver."""
    why = driver_problem(extra)
    if why:
        raise GaError(f"no CUDA driver can be loaded here ({why}): this machine has no NVIDIA "
                      "driver, or it is not on the loader's path. To try gpuarena without a GPU, "
                      f"add --sim (the simulated driver): gpuarena {sub} --sim -- PROGRAM; "
                      "`gpuarena doctor` says what this machine has")


def same_file(a, b):
    """True when paths a and b name one file (equal, or links to one another, hard or
    symbolic), whether or not it exists yet."""
    if a == b:
        return True
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def exit_code(returncode):
    """A child's status the way a shell reports it: 128+N when killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)
# The terminal's keys (Ctrl-C, Ctrl-\): sent to the whole foreground process group, the program
# included, so left to it; passed on only at the second (a kill of the command alone). Ctrl-\
# killed the command and orphaned the program (helper-72 NEW-4).
TERMINAL = (signal.SIGINT, signal.SIGQUIT)
# Passed on and nothing more: requests to the program, not to stop (Slurm's --signal=USR1@60
# asks for a checkpoint before preemption). They killed the command and left the program
# running, unsignalled (helper-67 F2).
PASSED_ONLY = (signal.SIGUSR1, signal.SIGUSR2)


class Stopped(Exception):
    """A forwarded signal ended the work early; `code` is the status to exit with."""

    def __init__(self, signum):
        super().__init__(f"stopped by {signal.Signals(signum).name}, " +
                         ("which the program got too (the terminal's keys reach its whole "
                          "process group)" if signum in TERMINAL else "passed on to the program"))
        self.code = 128 + signum


class Forwarding:
    """While in effect, SIGTERM, SIGHUP and SIGALRM go to the program being run (spawn) instead
    of killing this command; `got` is the last one received. SIGUSR1 and SIGUSR2 are passed on
    too, and change nothing else. Handlers are in place before the
    program starts, so a signal that arrives while it is being started is passed on at once.
    SIGINT (Ctrl-C) is the terminal's, sent to its whole foreground process group, the program
    included: the command leaves it to the program and waits for it to end, so that a program
    that saves its work on Ctrl-C can (the command killed it 0.25 s later, as subprocess.run
    does, and the program's handler and the shim's statistics were lost: helper-67 F2). Only a
    second SIGINT is passed on as well, for a SIGINT sent to the command alone (kill -INT)."""

    def __init__(self):
        self.proc, self.got, self.old, self.interrupts = None, None, {}, {}

    def __enter__(self):
        for s in FORWARDED + PASSED_ONLY + TERMINAL:
            self.old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)

    def _handle(self, signum, _frame):
        if signum in PASSED_ONLY:
            if self.proc is not None:
                self.proc.send_signal(signum)
            return
        self.got = signum
        if signum in TERMINAL:
            self.interrupts[signum] = self.interrupts.get(signum, 0) + 1
            if self.interrupts[signum] < 2:
                return  # the program has it from the terminal
        if self.proc is not None:
            self.proc.send_signal(signum)  # a no-op once the program is reaped

    def spawn(self, cmd, env, **kw):
        """Runs cmd to its end; a CompletedProcess-like object with returncode."""
        if not cmd:
            raise GaError("no command to run; put it after --, e.g. gpuarena run -- python3 "
                          "train.py")
        try:
            self.proc = subprocess.Popen(cmd, env=env, **kw)
        except FileNotFoundError:
            if os.sep in cmd[0] and os.path.isfile(cmd[0]):  # the file is there: its #! is not
                raise GaError(f"cannot execute {cmd[0]}: the interpreter its #! line names was "
                              "not found") from None
            raise GaError(f"command not found: {cmd[0]} (check the name and PATH)") from None
        except PermissionError:
            if os.path.isdir(cmd[0]):
                raise GaError(f"cannot execute {cmd[0]}: it is a folder, not a program; give "
                              "the program inside it") from None
            raise GaError(f"cannot execute {cmd[0]}: permission denied (chmod +x?)") from None
        except OSError as e:  # ENOEXEC above all: a script without a #! line
            hint = ("a script needs a #! line, e.g. #!/bin/sh, or run it through its "
                    f"interpreter: -- sh {cmd[0]}" if e.errno == errno.ENOEXEC else
                    "check the program")
            raise GaError(f"cannot execute {cmd[0]}: {e.strerror} ({hint})") from None
        try:
            if self.got is not None and self.got not in TERMINAL:
                self.proc.send_signal(self.got)
            self.proc.wait()
        finally:
            proc, self.proc = self.proc, None
        return proc


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
    if not isinstance(doc, dict) or doc.get("gpuarena_stats") not in STATS_FORMATS:
        raise GaError(f"{path}: not a gpuarena statistics file this command reads (\"gpuarena_stats\""
                      f" is {doc.get('gpuarena_stats') if isinstance(doc, dict) else None!r}, "
                      f"expected one of {', '.join(map(str, STATS_FORMATS))}); use the gpuarena "
                      "command that came with the shim")
    return doc


def _totals(stats):
    t = stats.get("totals") if stats else None
    return t if isinstance(t, dict) else {}


def _option(stats, key, default=None):
    """An option from format 2 ("options": {...}) or format 1 (top level)."""
    opts = stats.get("options") if isinstance(stats.get("options"), dict) else stats
    return opts.get(key, default)


def _guess_unit(key):
    """Format 1 files carry no "units": the unit from the name, as format 2 would give it."""
    if key.endswith("_ns"):
        return "ns"
    if "fragmentation" in key:
        return "ratio"
    if key.endswith(("_calls", "_allocs", "_failures")):
        return "count"
    if any(w in key for w in ("in_use", "reserved", "free", "bytes", "mapped", "kept")):
        return "bytes"
    return "count"


_FORMATTERS = {"bytes": human_bytes, "count": human_count, "ns": human_ns, "ratio": human_frac}


def show_value(value, unit):
    """One table cell: the value formatted by its unit ("-" when missing or not a number)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return _FORMATTERS.get(unit, str)(value)


def _per_device_caps(stats, env):
    """HAMi's per-device caps (CUDA_DEVICE_MEMORY_LIMIT_<i>, i the CUDA ordinal) the shim used, as
    "64.00 MiB on device 0, 128.00 MiB on device 1", or None: the statistics carry no limit
    then (options.limit is the one limit of every device), only each device entry's cap
    (helper-49 F10: the summary said "limit none" under such caps)."""
    caps = {}
    for e in stats.get("devices") or []:
        if (isinstance(e, dict) and isinstance(e.get("device"), int) and
                isinstance(e.get("cap"), int)):
            caps[e["device"]] = e["cap"]
    # Only where a per-device variable is set; every device then, since the others' caps (the
    # global CUDA_DEVICE_MEMORY_LIMIT, or none) differ from it (helper-57: "64 MiB per device"
    # was said with CUDA_DEVICE_MEMORY_LIMIT_1=128m in force on device 1).
    if not any(f"CUDA_DEVICE_MEMORY_LIMIT_{d}" in env for d in caps):
        return None
    return ", ".join(f"{human_bytes(caps[d])} on device {d}" for d in sorted(caps))


def summary(stats, env=None, limit_set=None):
    """A few lines on what the shim saw, for `gpuarena run` without --stats; env: the program's
    environment (HAMi's per-device caps are named from it); limit_set: how GPUARENA_LIMIT was
    given (limit_given(), below), named in the hint to raise it."""
    t = _totals(stats)
    every = stats.get("processes") or [stats]  # several processes: each one's devices
    entries = [e for d in every if isinstance(d, dict) for e in d.get("devices") or []]
    stats = dict(stats, devices=entries)
    mode = stats.get("mode", "?")
    if mode == "arena" and _option(stats, "preallocate", True) is False:
        mode = "grow"  # a format 1 file says arena with preallocate false
    limit_bytes, limit_from = _option(stats, "limit"), _option(stats, "limit_from")
    limit = human_bytes(limit_bytes) if limit_bytes else "none"
    per_device = _per_device_caps(stats, env or {})
    caps = sorted({e["cap"] for e in stats.get("devices") or []
                   if isinstance(e, dict) and isinstance(e.get("cap"), int)})
    if (per_device and limit_from == "GPUARENA_LIMIT" and limit_bytes and caps and
            caps[0] >= limit_bytes):
        # GPUARENA_LIMIT is at or under every device's cap: it binds everywhere, and a per-device
        # variable that is set did not (helper-81 F1: "raise CUDA_DEVICE_MEMORY_LIMIT_<i>" was
        # said for a 64 MiB --limit beside a 1 GiB per-device variable)
        per_device = None
    if per_device:
        limit = f"{per_device} (CUDA_DEVICE_MEMORY_LIMIT_<i>)"
        limit_bytes = None  # said per device: no "per device" or "above the device" below
    elif limit_from and limit_from != "GPUARENA_LIMIT":
        limit += f" ({limit_from})"  # a device plugin's cap (HAMi, KAI)
    # The cap in force is the limit or the device, whichever is smaller: say so when it is the
    # device (a limit of 976 PiB read as if it held).
    if limit_bytes and caps and caps[-1] < limit_bytes:
        limit += (f" (above the device: cap {', '.join(human_bytes(c) for c in caps)})")
    if limit_bytes:
        limit += " per device"  # the cap holds on each device; the peaks below are sums
    devices = {e.get("device") for e in stats.get("devices") or [] if isinstance(e, dict)}
    summed = f" (summed over {len(devices)} devices)" if len(devices) > 1 else ""
    lines = [f"gpuarena: mode {mode}, limit {limit}",
             f"gpuarena: {human_count(t.get('alloc_calls'))} allocs, "
             f"{human_count(t.get('failed_allocs'))} failed; peak in use "
             f"{human_bytes(t.get('peak_in_use'))}, peak reserved "
             f"{human_bytes(t.get('peak_reserved'))}{summed}",
             f"gpuarena: {human_count(t.get('driver_alloc_calls'))} driver allocs, "
             f"{human_ns(t.get('alloc_time_ns'))} in alloc calls, max fragmentation "
             f"{human_frac(t.get('max_fragmentation'))}"]
    # What to raise, named as the user set it (helper-67 F17.8: the shim's line names
    # GPUARENA_LIMIT, which `run` sets from --limit; helper-51 R6: "raise --limit" was said for an
    # exported GPUARENA_LIMIT and one given with --env, and nothing under a device plugin's cap).
    oom = t.get("true_oom_failures")
    above = bool(limit_bytes and caps and caps[-1] < limit_bytes)
    if limit_set and limit_from == "GPUARENA_LIMIT" and not _limit_as_given(stats, env or {}):
        limit_set = None  # the program set another GPUARENA_LIMIT itself (helper-81 F2)
    if isinstance(oom, int) and oom > 0 and (per_device or (limit_bytes and not above)):
        what = _raise_what("CUDA_DEVICE_MEMORY_LIMIT_<i>" if per_device else limit_from, limit_set)
        lines.append(f"gpuarena: {human_count(oom)} of the failures found too few bytes left "
                     f"under the limit: raise {what} or use less")
    return "\n".join(lines)


def _limit_as_given(stats, env):
    """Whether the limit the shim took is the GPUARENA_LIMIT the command gave the program (env):
    a program that sets its own in its environment is named as such, not as --limit. Unknown
    (not parseable here): taken as given."""
    given = str(env.get("GPUARENA_LIMIT", "")).strip()
    try:
        want = parse_size(given, allow_percent=True)
    except GaError:
        return True
    if isinstance(want, int):
        return _option(stats, "limit") == want
    percent = _option(stats, "limit_percent")
    return percent is not None and abs(float(percent) - float(want)) < 1e-9


def limit_given(settings, extra=None):
    """How the program's GPUARENA_LIMIT was given, as child_env applies them (a later one wins):
    '--env', '--limit', 'exported' or None."""
    if "GPUARENA_LIMIT" in (extra or {}):
        return "--env"
    if settings.get("GPUARENA_LIMIT") is not None:
        return "--limit"
    return "exported" if os.environ.get("GPUARENA_LIMIT", "").strip() else None


def _raise_what(limit_from, how):
    """The closing hint's thing to raise: the variable the cap came from (stats' limit_from), as
    the user gave it (how: limit_given's answer)."""
    if limit_from and limit_from.startswith("CUDA_DEVICE_MEMORY_LIMIT"):
        return (f"the device plugin's {limit_from} (HAMi, KAI: the GPU memory the pod asked "
                "for; --limit cannot go above it)")
    if how == "--env":
        return "the GPUARENA_LIMIT given with --env (the one the shim's messages name)"
    if how == "exported":
        return ("the GPUARENA_LIMIT exported in the environment (the one the shim's messages "
                "name; --limit takes its place)")
    if how is None:  # the program set it in its own environment
        return "the GPUARENA_LIMIT the program sets itself (neither --limit nor the environment gave it)"
    return "--limit (the GPUARENA_LIMIT the shim's messages name)"


def run(cmd, settings, stats_path=None, sim=False, extra=None):
    """Runs cmd under the shim; prints a summary when no stats path was given. Returns the
    exit code to exit with. Every CUDA process under cmd writes its own statistics into a
    private folder (statsfiles), read here: the summary, or --stats, covers them all."""
    with Forwarding() as fwd, statsfiles.private_folder() as tmp:
        owned = stats_path is None or statsfiles.stats_owned(stats_path)
        path = statsfiles.template(tmp) if owned else stats_path
        env = child_env(dict(settings, GPUARENA_STATS=path), sim, extra)
        trace = env.get("GPUARENA_TRACE", "")
        trace = trace if trace and "%p" not in trace else None
        shown = settings.get("GPUARENA_TRACE") or trace
        if trace and _trace_held_elsewhere(trace):
            raise GaError(f"--trace {shown} {HELD_ELSEWHERE}: the program would run untraced "
                          "(the shim leaves a trace another live process writes whole); wait "
                          "for that process to end, name another file, or put %p in the path "
                          "(it becomes the pid) for one trace per process")
        before = _file_signature(trace)
        status = fwd.spawn(cmd, env).returncode
        code = exit_code(status)
        if trace and (_file_signature(trace) == before or _trace_held_elsewhere(trace)):
            _say_trace_not_written(shown, before, _allocations(tmp) if owned else None,
                                   _trace_held_elsewhere(trace))
        if owned:
            try:
                _report_run(statsfiles.collect(tmp, read_stats), stats_path, env,
                            settings.get("GPUARENA_TRACE"), limit_given(settings, extra),
                            killed=-status if status < 0 else None)
            except GaError as e:  # the program's own status still wins when it failed
                print(f"gpuarena: {e}", file=sys.stderr)
                return code or 1
    return code


def _file_signature(path):
    """What tells a file rewritten from the one that was there: None when there is none."""
    try:
        st = os.stat(path) if path else None
    except OSError:
        return None
    return st and (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


HELD_ELSEWHERE = "is being written by another running process"


def _trace_held_elsewhere(path):
    """Whether another live process holds the trace at path: the shim takes an exclusive flock on
    a trace file it writes (shim/outfile.c), and refuses one another process holds."""
    try:  # a FIFO is never opened here: that would meet a writer waiting for its reader
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            return e.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
        return False
    finally:
        os.close(fd)  # releases the shared lock, if taken


def _allocations(folder):
    """Allocations the run's processes made, from their statistics in folder; None when unknown."""
    try:
        docs = [doc for _path, doc in statsfiles.collect(folder, read_stats)]
    except (GaError, OSError):
        return None
    counts = [d.get("totals", {}).get("alloc_calls") for d in docs]
    if not docs or not all(isinstance(c, int) for c in counts):
        return None
    return sum(counts)


def _say_trace_not_written(shown, before, allocations=None, held=False):
    """The line for a --trace (or GPUARENA_TRACE) the run did not write: a program that made no
    allocation writes none, and an earlier run's trace left there was replayed as this run's
    (an outside check, helper-109), where --stats already said so. A trace another running
    process writes (held) is that process's, and a program that allocated was refused the path
    by the shim: both read "no allocation was recorded ... from before" until 2026-12-07 (an
    outside check, helper-125)."""
    if held:
        line = (f"gpuarena: --trace {shown} was not written by this run: it {HELD_ELSEWHERE}, "
                "and what it holds is that process's; put %p in the path (it becomes the pid) "
                "for one trace per process")
    elif allocations:
        line = (f"gpuarena: --trace {shown} was not written by this run, though the program "
                f"made {allocations:,} allocations: the shim said why above")
    elif before is None:
        line = f"gpuarena: --trace {shown} was not written (no allocation was recorded)"
    else:
        line = (f"gpuarena: --trace {shown} was not written by this run (no allocation was "
                "recorded): what it holds is from before")
    print(line, file=sys.stderr)


def _no_stats(stats_path, killed=None):
    """The line for a run that wrote no statistics; with --stats F, what F holds now: an earlier
    run's file left there was read as this run's (helper-60 F12). A program killed by a signal
    is said so first, as compare says it (run listed the reasons alone: helper-131)."""
    line = f"gpuarena: the program wrote no statistics ({NO_STATS_WHY})"
    if killed:
        line = (f"gpuarena: the program was killed by {_signame(killed)} (exit {128 + killed}) "
                "before the shim's exit handler, and wrote no statistics")
    if stats_path is None:
        return line
    if os.path.lexists(stats_path):
        return (line + f"; --stats {stats_path} was not written by this run: what it holds is "
                "from before")
    return line + f"; --stats {stats_path} was not written"


def _report_run(found, stats_path, env, trace, given=None, killed=None):
    """The summary (no --stats) or the --stats file, from the documents found, and what a
    reader must know: several processes are summed, a trace path without %p kept one of them."""
    if not found:
        print(_no_stats(stats_path, killed), file=sys.stderr)
        return
    docs = [doc for _path, doc in found]
    merged = statsfiles.merge(docs, _guess_unit) if len(docs) > 1 else None
    if merged:
        where = (" (below, then each process)" if stats_path is None else
                 f"; --stats {stats_path} holds the sums, and each process's own statistics "
                 "under \"processes\"")
        print(f"gpuarena: {len(docs)} processes wrote statistics (pids {statsfiles.pids(docs)}, "
              "in the order they exited); their figures are summed, a peak as the sum of each "
              f"process's own peak{where}", file=sys.stderr)
        if trace and "%p" not in trace:
            # The shim's rule (README, two processes and one trace path): a process that
            # starts while another writes the trace runs untraced; one that starts after the
            # other ended replaces it (helper-67 F5: this said "replaced" in both cases).
            print(f"gpuarena: --trace {trace}: it holds one process's events (a process that "
                  "started while another wrote it ran untraced, one that started after "
                  "replaced it); put %p in the path (it becomes the pid) for one trace per "
                  "process", file=sys.stderr)
    if stats_path is not None:
        statsfiles.write(stats_path, (None, merged) if merged else found[0])
        return
    print(summary(merged or docs[0], env, given), file=sys.stderr)
    for doc in docs if merged else ():
        t = _totals(doc)
        print(f"gpuarena:   pid {doc.get('pid', '?')}: {human_count(t.get('alloc_calls'))} "
              f"allocs, {human_count(t.get('failed_allocs'))} failed; peak in use "
              f"{human_bytes(t.get('peak_in_use'))}, peak reserved "
              f"{human_bytes(t.get('peak_reserved'))}", file=sys.stderr)


# What compare keeps of a run's output (the program's stdout and stderr together): its last
# bytes, for the lines shown when the run failed, and the first distinct lines the shim printed
# ("gpuarena: ..."; a misspelt setting, an out-of-memory explained), shown under the table.
OUTPUT_TAIL_KEPT = 1 << 16
SHIM_LINES_KEPT = 20
SHIM_LINE_MAX = 1000


class _Output:
    """Reads a run's output from a pipe while the program runs and keeps only OUTPUT_TAIL_KEPT
    bytes of it and SHIM_LINES_KEPT shim lines: a run costs bounded memory and no disk however
    much it prints. Before, each run's whole output went to a temporary file kept until the
    table was printed: 573 MiB after 30 runs of a program printing 19 MiB (helper-67 F4)."""

    def __init__(self, pipe, shim_lines):
        self.tail, self.shim, self._line = bytearray(), shim_lines, b""
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe):
        with pipe:
            while chunk := os.read(pipe.fileno(), 65536):
                self.tail += chunk
                if len(self.tail) > 2 * OUTPUT_TAIL_KEPT:
                    del self.tail[:len(self.tail) - OUTPUT_TAIL_KEPT]
                lines = (self._line + chunk).split(b"\n")
                self._line = lines.pop()[:SHIM_LINE_MAX]  # a line's start is what is looked at
                for line in lines:
                    self._note(line)
            self._note(self._line)

    def _note(self, line):
        if line.startswith(b"gpuarena:") and len(self.shim) < SHIM_LINES_KEPT:
            text = line[:SHIM_LINE_MAX].decode("utf-8", "replace").rstrip()
            if text not in self.shim:
                self.shim.append(text)

    def finish(self):
        """The last 2,000 bytes, once the program's end closed the pipe. A process the program
        left running may hold the pipe open: after 2 s the output read so far is used."""
        self._thread.join(timeout=2)
        return bytes(self.tail[-2000:]).decode("utf-8", "replace")


def _one_run(fwd, cmd, env, tmp, tag, shim_lines):
    """(wall_ns, exit code, stats or None, output tail, processes) of one run of cmd: stats
    summed over the CUDA processes that wrote any (statsfiles.merge); Stopped when a forwarded
    signal arrived (the runs left are not started). The shim's lines go to shim_lines."""
    folder = os.path.join(tmp, tag)
    os.mkdir(folder)
    env = dict(env, GPUARENA_STATS=statsfiles.template(folder))
    r, w = os.pipe()
    out = _Output(os.fdopen(r, "rb", buffering=0), shim_lines)  # its thread closes the pipe
    try:
        t0 = time.perf_counter_ns()
        proc = fwd.spawn(cmd, env, stdout=w, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wall = time.perf_counter_ns() - t0
    finally:
        os.close(w)  # the program's copies are its own: the reader sees the end when they go
    tail = out.finish()
    if fwd.got is not None:
        raise Stopped(fwd.got)
    docs = [doc for _path, doc in statsfiles.collect(folder, read_stats)]
    stats = None if not docs else docs[0] if len(docs) == 1 else statsfiles.merge(docs,
                                                                                   _guess_unit)
    return wall, exit_code(proc.returncode), stats, tail, len(docs)


# Why a run can end without the statistics file: `run` and `compare` say the same.
NO_STATS_WHY = ("it made no CUDA allocation (statistics are written only by a process that "
                "allocated), the shim refused a setting (its message comes first), "
                "it exited through a crash or _exit before the shim's exit handler, or its CUDA "
                "work runs in a process it left running (a background child: the command reads "
                "the statistics when the program exits, and that process's are lost)")


def failed_run_message(mode, result, lines=10):
    """compare's line for a mode whose program exited non-zero (in any of its runs): its code,
    how many runs failed, and the last output lines of the first failed run."""
    said = set(result.get("shim_said", ()))  # shown already, under "the shim said"
    tail = [ln for ln in result["output_tail"].rstrip("\n").split("\n")
            if ln.rstrip() not in said][-lines:]
    codes = result.get("exits") or [result["exit"]]
    runs = (f" in {sum(1 for c in codes if c)} of its {len(codes)} runs (the figures are of "
            "the runs that succeeded)" if len(codes) > 1 and not all(codes) else "")
    return (f"mode {mode}: the program exited {result['exit']}{_by_signal(result['exit'])}"
            f"{runs}; " +
            ("its last output:\n" + "\n".join(tail) if any(tail) else "it printed nothing"))


def _signame(signum):
    """SIGKILL for 9; "signal N" for a number Python does not name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _by_signal(code):
    """What an exit code past 128 says: the signal that ended the program, named (a run killed
    with SIGKILL read "the program exited 137" alone until 2026-12-07: helper-125)."""
    try:
        name = signal.Signals(code - 128).name if code > 128 else None
    except ValueError:
        name = None
    return f" (128+{code - 128}: killed by {name})" if name else ""


def no_stats_message(mode, result):
    """compare's line for a mode whose run wrote no statistics, with the program's last output."""
    tail = result["output_tail"].rstrip("\n")
    return (f"mode {mode}: no statistics written (exit {result['exit']}"
            f"{_by_signal(result['exit'])}; {NO_STATS_WHY}); "
            + (f"the program's last output:\n{tail}" if tail else "the program printed nothing"))


def compare(cmd, modes, repeat=1, settings=None, sim=False, extra=None):
    """{mode: {"wall_ns", "walls_ns", "exit", "stats"}} with the median run of each mode."""
    modes = [modes_mod.parse(m) for m in modes]
    if repeat < 1:
        raise UsageError(f"--repeat {repeat}: must be at least 1")
    results = {}
    with Forwarding() as fwd, statsfiles.private_folder() as tmp:
        for m in modes:
            env = child_env(dict(modes_mod.settings_for(m, settings), **modes_mod.ENV[m]), sim,
                            extra)
            said = []
            runs = [_one_run(fwd, cmd, env, tmp, f"{m}-{i}", said) for i in range(repeat)]
            # The median over the runs that succeeded (exit 0, statistics written), when any
            # did: a run that failed early is not a timing of the program, and its statistics
            # became the column's when its wall time was the median (helper-67 F13).
            good = [r for r in runs if r[1] == 0 and r[2] is not None] or runs
            med = statistics.median_low([r[0] for r in good])
            wall, code, stats, tail, procs = next(r for r in good if r[0] == med)
            failed = next((r for r in runs if r[1]), None)
            if failed and not code:  # the column's run succeeded: say the first that did not
                code, tail = failed[1], failed[3]
            results[m] = {"wall_ns": wall, "walls_ns": [r[0] for r in runs], "exit": code,
                          "exits": [r[1] for r in runs], "stats": stats, "processes": procs,
                          "output_tail": tail if code or stats is None else "",
                          "shim_said": said}
    return results


def rows(results):
    """[(key, title, unit)] of the table: every key of every mode's "totals", in JSON order
    (first mode first), titled by the key, with the unit its file gives ("units", format 2)."""
    out, seen = [], set()
    for r in results.values():
        stats = r["stats"] or {}
        units = stats.get("units") if isinstance(stats.get("units"), dict) else {}
        for key in _totals(stats):
            if key not in seen:
                seen.add(key)
                unit = units.get(key) or _guess_unit(key)
                out.append((key, _title(key, unit), unit))
    return out


def _title(key, unit):
    """A row's title: the key in words, less a unit suffix its cells already show (alloc_time_ns
    is "alloc time", its cells "38.3 us"; the title kept "ns" before 2026-12-06)."""
    if unit == "ns" and key.endswith("_ns"):
        key = key[:-3]
    return key.replace("_", " ")


def _exits(r):
    """The exit code cell: the code, or every run's where the repeats differ (0,7,0)."""
    codes = r.get("exits") or [r["exit"]]
    return str(codes[0]) if len(set(codes)) == 1 else ",".join(map(str, codes))


def render(results):
    """The side-by-side table: wall time, then one row per statistic, then the exit codes."""
    header = ["figure"] + list(results)
    body = [["wall time (median)"] + [human_ns(r["wall_ns"]) for r in results.values()]]
    if any(r.get("processes", 1) > 1 for r in results.values()):  # columns summed over them
        body.append(["processes"] + [str(r.get("processes", 1)) for r in results.values()])
    for key, title, unit in rows(results):
        body.append([title] + [show_value(_totals(r["stats"]).get(key), unit)
                               for r in results.values()])
    body.append(["exit code"] + [_exits(r) for r in results.values()])
    return table(header, body)
