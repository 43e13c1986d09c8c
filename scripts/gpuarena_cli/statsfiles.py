"""The statistics of every CUDA process a run started, one file each, and what the command makes of them.

A program run by `gpuarena run` or `compare` may start several CUDA processes (a shell script, a
launcher such as torchrun, a data-loader child that uses CUDA). Each process's shim writes its own
statistics at exit, so the command gives the shim a path with %p (the pid) in a private folder and
reads every file there: with one statistics path for all of them, each exit replaced the last
one's file, and the summary and compare's table showed whichever process exited last without a
word (helper-60 F3). Several processes are summed: counts, times and bytes add up, a ratio
(fragmentation) is the largest; a peak is the sum of each process's own peak, which is what they
could have held at once, an upper bound when they ran one after the other. `run --stats F` gets one
file still: one process's statistics as the shim wrote them, or for several the summed document
(merge) with each process's own statistics under "processes".
"""

import errno
import json
import os
import re
import tempfile

from . import GaError
from . import ending
from . import tracefile as tf

# The name the shim is given (stats-%p.json) and the files it leaves: the pid in place of %p.
TEMPLATE = "stats-%p.json"
_WRITTEN = re.compile(r"stats-(\d+)\.json\Z")


def template(folder):
    return os.path.join(folder, TEMPLATE)


def private_folder():
    """The temporary folder (ending.temporary_folder) the shims write their statistics in: under TMPDIR, unless
    its path holds %p, which the shim takes for the pid wherever it stands in GPUARENA_STATS (a
    TMPDIR of /scratch/run%p lost every run's statistics, exit 0: helper-82); then under the
    first of /tmp, /var/tmp and /dev/shm that this user can write."""
    base = tempfile.gettempdir()
    if "%p" in base:
        base = next((d for d in ("/tmp", "/var/tmp", "/dev/shm")
                     if os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)), None)
        if base is None:
            raise GaError(f"TMPDIR {tempfile.gettempdir()} holds %p, which the shim reads as the "
                          "pid in the statistics path it is given; set TMPDIR to a folder "
                          "without it")
    return ending.temporary_folder(dir=base)


def collect(folder, read):
    """Every statistics document in folder, in the order the processes exited (the files' times,
    then pids); read(path) reads one (runner.read_stats)."""
    found = []
    for name in os.listdir(folder):
        m = _WRITTEN.match(name)
        if m:
            path = os.path.join(folder, name)
            doc = read(path)
            if doc is not None:
                found.append((os.stat(path).st_mtime_ns, int(m.group(1)), path, doc))
    found.sort(key=lambda f: (f[0], f[1]))
    return [(path, doc) for _t, _pid, path, doc in found]


def _unit(doc, key, guess):
    units = doc.get("units") if isinstance(doc.get("units"), dict) else {}
    return units.get(key) or guess(key)


def merge(docs, guess_unit):
    """One document for several processes: the last to exit's fields, "totals" summed over all
    (a "ratio" the largest), and "processes": each one's whole document, in exit order.
    guess_unit(key) gives the unit of a format 1 file's figure."""
    totals = {}
    for doc in docs:
        t = doc.get("totals") if isinstance(doc.get("totals"), dict) else {}
        for key, v in t.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if key not in totals:
                totals[key] = v
            elif _unit(doc, key, guess_unit) == "ratio":
                totals[key] = max(totals[key], v)
            else:
                totals[key] += v
    out = dict(docs[-1])
    out["totals"] = totals
    out["processes"] = list(docs)
    # The shim's about_keys describe one process's file; say what differs here (an outside check,
    # 2026-12-06: "processes" was explained nowhere, and pid, by_api and devices read as the
    # whole run's while they are the last process's).
    ak = out.get("about_keys")
    if isinstance(ak, dict) and isinstance(ak.get("document"), dict):
        doc = dict(ak["document"])
        doc["processes"] = ("each CUDA process's whole statistics, as its shim wrote them, in the "
                            "order they exited (written by gpuarena run for several processes)")
        doc["totals"] = ("the processes' figures summed (a ratio: the largest): what each counts "
                         "in about, its unit in units")
        last = ("; here the last process to exit's (every process's in processes)")
        for key in ("pid", "wall_ns", "by_api", "devices", "mode", "options"):
            if isinstance(doc.get(key), str):
                doc[key] += last
        out["about_keys"] = dict(ak, document=doc)
    return out


def pids(docs):
    return ", ".join(str(d.get("pid", "?")) for d in docs)


def _through_proc(path):
    """Whether path leads through /proc (/dev/stdout, /dev/fd/1): a descriptor, whatever file it
    is now, written through and never replaced (the program's own output may be that file)."""
    cur = os.path.abspath(path)
    for _ in range(40):
        cur = os.path.join(os.path.realpath(os.path.dirname(cur)), os.path.basename(cur))
        if cur.startswith("/proc/"):
            return True
        try:
            cur = os.path.join(os.path.dirname(cur), os.readlink(cur))
        except OSError:
            return False
    return False


def write(path, found):
    """Writes --stats path for the documents found: one process's file byte for byte, several
    merged (merge, already done by the caller: found is then [(None, merged)]). A symlink is
    followed and its target replaced, as the shim does; a device, a FIFO or a /proc fd link
    (/dev/stdout) is written through (tracefile.replace_from_temp)."""
    src, doc = found
    if src is not None:
        with open(src, "rb") as f:
            data = f.read()
    else:
        data = (json.dumps(doc, indent=2) + "\n").encode()
    target = path if _through_proc(path) else os.path.realpath(path)
    try:
        tf.replace_from_temp(target, lambda f: f.write(data))
    except OSError as e:  # the hint fits the cause (a pipe's reader gone is no folder's fault)
        hint = ("the reader of the pipe went away before the statistics were written"
                if e.errno == errno.EPIPE else tf.write_hint(target, e.errno))
        raise GaError(f"--stats {path}: cannot write the statistics: {e.strerror} ({hint})") \
            from None


def stats_owned(path):
    """Whether the command collects the statistics for --stats path itself (a file or a device
    named once), rather than handing the path to the shim: '-' (descriptor 2 of each process)
    and a path with %p (one file per process, as the user asked) go to the shim as given."""
    return path is not None and path != "-" and "%p" not in path
