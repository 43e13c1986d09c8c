"""The shim's GPUARENA_* settings as `gpuarena doctor` reads them: each variable parsed with the
shim's own rules (the size grammar is fmt.parse_size, the C parser's twin), a misspelt name matched
to the closest known one, and what the shim will say at exit about its output files, said now.
Split from doctor.py, which shows the result; argtypes.py takes its GPUARENA_MEM_FRACTION rule.
"""

import os
import re
from fractions import Fraction

from . import GaError
from . import modes as modes_mod
from . import names
from . import paths
from . import runner
from .fmt import BLANKS, parse_size


def _p_mode(v):
    return modes_mod.parse(v)


def _p_bool(v):
    t = v.strip(BLANKS).lower()
    if t in ("true", "1", "yes", "on"):
        return True
    if t in ("false", "0", "no", "off"):
        return False
    raise GaError(f"GPUARENA_PREALLOCATE='{v}' is not valid (true/false, 1/0, yes/no, on/off)")


# The shim's (parse_fraction) and --fraction's: ASCII digits (\d took ٠.٥, which the shim refuses).
FRACTION = re.compile(r"([0-9]*\.?[0-9]+)(\+?)")


def _p_fraction(v):
    """(F, grow) of a fraction of any length, read by its digits as the shim reads it: Fraction()
    of more than 4,300 digits raised Python's ValueError (helper-60 F4), and a fraction of 64
    characters or more was refused by the shim and taken here until 2026-12-07."""
    m = FRACTION.fullmatch(v.strip(BLANKS))
    whole, _, frac = m.group(1).partition(".") if m else ("", "", "")
    whole = whole.lstrip("0")
    ok = m is not None and ((not whole and frac.strip("0") != "") or
                            (whole == "1" and not frac.strip("0")))
    if not ok:
        raise GaError(f"GPUARENA_MEM_FRACTION='{v}' is not valid (a fraction in (0,1], e.g. 0.75 "
                      "or 0.75+)")
    head = frac[:40]  # the value for figures; validity was decided on every digit above
    value = Fraction(1) if whole else Fraction(int(head or "0"), 10 ** len(head))
    return (value or Fraction(1, 10 ** 40), m.group(2) == "+")


def _p_log(v):
    t = v.strip(BLANKS).lower()
    if t not in ("error", "warn", "info", "debug"):
        raise GaError(f"GPUARENA_LOG='{v}' is not valid (error, warn, info or debug)")
    return t


def _p_path(name, allow_dash=True):
    def parse(v):
        if not v or (v == "-" and not allow_dash):
            raise GaError(f"{name}='{v}' is not valid (a file path"
                          f"{', or - for stderr' if allow_dash else ''})")
        return v
    return parse


def _p_group_dir(v):
    # The shim takes an absolute path only (shim/options.c): members started from different
    # working directories would otherwise find different ledgers.
    if not v.startswith("/"):
        raise GaError(f"GPUARENA_GROUP_DIR='{v}' is not valid (an absolute path to a directory, "
                      "e.g. /dev/shm)")
    return v


def _p_free_sync(v):
    t = v.strip(BLANKS).lower()
    if t not in ("deferred", "lazy", "device", "none"):
        raise GaError(f"GPUARENA_FREE_SYNC='{v}' is not valid (deferred, lazy, device or none)")
    return t


GROUP_NAME_MAX = 64  # shim/ga_group.h GA_GROUP_NAME_MAX


def _p_name(raw):
    # The shim's rule and wording (shim/group_host.c ga_group_name_ok): the name is part of the
    # ledger's file name; "." and ".." are made of its characters but name directories. Blanks
    # around it are ignored, as the shim ignores them (shim/options.c parse_group).
    v = raw.strip(BLANKS)
    reserved = v in (".", "..")
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,%d}" % GROUP_NAME_MAX, v) or reserved:
        why = "'.' and '..' are reserved (they name directories); " if reserved else ""
        raise GaError(f"GPUARENA_GROUP='{v}' is not a group name: {why}use 1 to {GROUP_NAME_MAX} "
                      "letters, digits, '-', '_' or '.' (e.g. GPUARENA_GROUP=team-a)")
    return v


def _sized(name, allow_percent, allow_zero, hint):
    # The shim's message (shim/options.c): the grammar's reason, then the option's own examples.
    def parse(v):
        try:
            return parse_size(v, allow_percent, allow_zero)
        except GaError as e:
            raise GaError(f"{name}=" + re.sub(r" \(try 8GiB, .*\)$", f" ({hint})", str(e))) from None
    return parse


# The shim's options (shim/options.c), with the default in force when a variable is unset.
OPTIONS = (
    ("GPUARENA_MODE", _p_mode, "arena"),
    ("GPUARENA_PREALLOCATE", _p_bool, "true"),
    ("GPUARENA_MEM_FRACTION", _p_fraction, "0.75+"),
    ("GPUARENA_LIMIT", _sized("GPUARENA_LIMIT", True, False, "try 8GiB, 512MiB or 50%"), None),
    ("GPUARENA_FREE_SYNC", _p_free_sync, "deferred"),
    ("GPUARENA_STATS", _p_path("GPUARENA_STATS"), None),
    ("GPUARENA_TRACE", _p_path("GPUARENA_TRACE", False), None),
    ("GPUARENA_LOG", _p_log, "warn"),
    ("GPUARENA_LIBCUDA", _p_path("GPUARENA_LIBCUDA", False), None),
    ("GPUARENA_VMM_KEEP", _sized("GPUARENA_VMM_KEEP", False, True, "try 64MiB, 512MiB or 0"),
     "64MiB"),
    ("GPUARENA_GROUP", _p_name, None),
    ("GPUARENA_GROUP_DIR", _p_group_dir, None),
)
# Read by other gpuarena parts, so not unknown (the shim's own list of these: shim/options.c).
COMMAND_VARS = ("GPUARENA_BUILD", "GPUARENA_NO_MATPLOTLIB")


def closest_setting(name, known):
    """The known GPUARENA_* name an unknown one most likely means, or None: the shim's rule
    (names.closest). difflib named another setting than the shim for 8 of 13 likely mistakes
    (GPUARENA_CAP: GPUARENA_LIBCUDA here, GPUARENA_LOG there)."""
    return names.closest(name, known, "GPUARENA_")


def settings(env):
    """({name: parsed value}, [(name, raw value or None, shown value)], [problems], [warnings])
    for the GPUARENA_* variables in env, as the shim would read them."""
    values, shown, problems, warnings = {}, [], [], []
    for name, parse, default in OPTIONS:
        raw = env.get(name)
        if raw is None:
            values[name] = parse(default) if default is not None else None
            shown.append((name, None, f"{default} (default)" if default else "unset"))
            continue
        try:
            values[name] = parse(raw)
            shown.append((name, raw, raw))
        except GaError as e:
            problems.append(f"{e}; the shim will not initialise CUDA")
            values[name] = parse(default) if default is not None else None
            shown.append((name, raw, f"{raw} (refused)"))
    known = [n for n, _, _ in OPTIONS] + list(COMMAND_VARS)
    for name in sorted(k for k in env if k.startswith("GPUARENA_") and k not in known):
        near = closest_setting(name, known)
        # The shim's words for the same warning (shim/options.c), which doctor also shows from
        # its check under the shim: they were two phrasings of one thing until 2026-12-07.
        warnings.append(f"unknown setting {name} (did you mean {near}?); it is ignored" if near
                        else f"unknown setting {name}; it is ignored (the README's Options table "
                        "lists the settings)")
    if values["GPUARENA_MODE"] == "arena" and values["GPUARENA_PREALLOCATE"] is False:
        values["GPUARENA_MODE"] = "grow"  # the same pool, by its name
    if "GPUARENA_MODE" in env and any(n == "GPUARENA_MODE" and s.endswith("(refused)")
                                      for n, _, s in shown):
        values["GPUARENA_MODE"] = None  # no mode runs: the shim refuses CUDA
    # Any refused setting: the shim initialises nothing, so no device gets a pool (plan()).
    values["refused"] = [n for n, _, s in shown if s.endswith("(refused)")]
    warnings += _output_warnings(values)
    return values, shown, problems, warnings


def _file_refused(name, path):
    """The shim's refusals of a file that is there, said now (helper-114): statistics replace
    only an earlier report (or an empty file), a trace only a trace, neither a read-only file."""
    keep = "the shim will leave it as it is and write nothing"
    if runner.unreadable(path):
        return [f"{name}={path} holds bytes this user may not read: {keep}; make it readable "
                "(chmod u+r) or name another path"]
    try:
        with open(path, "rb") as f:
            head = f.read(64)
        st = os.stat(path)
    except OSError:
        return []
    if name == "GPUARENA_STATS" and head.startswith(b"GATRACE\0"):
        return [f"GPUARENA_STATS={path} is a gpuarena trace: {keep}; name another file"]
    if name == "GPUARENA_STATS" and head and not re.match(rb'\{\s*"gpuarena_stats"', head):
        return [f"GPUARENA_STATS={path} is there and is not a gpuarena statistics file: {keep}; "
                "name another path, or remove the file first"]
    if name == "GPUARENA_TRACE" and head and not b"GATRACE\0".startswith(head[:8]):
        return [f"GPUARENA_TRACE={path} is there and is not a gpuarena trace: {keep}; name "
                "another path, or remove the file first"]
    if not st.st_mode & 0o222 or not os.access(path, os.W_OK):
        return [f"{name}={path} is read-only: {keep}; make it writable (chmod u+w) or name "
                "another path"]
    return []


def _output_warnings(values):
    """What the shim will say at exit about GPUARENA_STATS and GPUARENA_TRACE, said now: a folder
    gets nothing written, and one file named by both keeps the trace only."""
    out = []
    stats, trace = values.get("GPUARENA_STATS"), values.get("GPUARENA_TRACE")
    for name, path in (("GPUARENA_STATS", stats), ("GPUARENA_TRACE", trace)):
        if path and path != "-" and os.path.isdir(path):
            out.append(f"{name}={path} is a folder: the shim will write nothing there; name a "
                       "file in it")
        elif path and path != "-" and not path.startswith("/dev/"):
            folder = os.path.dirname(os.path.abspath(path.replace("%p", "0")))
            if not os.path.isdir(folder):
                out.append(f"{name}={path}: its folder {folder} does not exist, so the shim will "
                           "write nothing; create it or name a file in a folder that exists")
            elif not os.access(folder, os.W_OK | os.X_OK):
                out.append(f"{name}={path}: its folder {folder} is not writable for this user, so "
                           "the shim will write nothing; name a file in a folder that is")
            elif "%p" not in path and os.path.isfile(path):
                out += _file_refused(name, path)
    if stats and trace and stats != "-" and not out and runner.same_file(stats, trace):
        out.append(f"GPUARENA_STATS and GPUARENA_TRACE name the same file {stats}: the shim keeps "
                   "the trace and writes no statistics; give them different paths")
    return out
