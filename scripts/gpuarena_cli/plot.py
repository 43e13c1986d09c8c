"""PNG charts for `gpuarena report` and `gpuarena compare`, and the one place matplotlib is loaded.

matplotlib is optional (the command runs on the standard library alone). The command runs under
whatever `python3` comes first on PATH, which need not be the interpreter matplotlib was installed
for (scripts/setup.sh installs Debian's python3-matplotlib, for /usr/bin/python3). So a chart is
described as plain data (kind, path, JSON-able series) and drawn by draw(): here when this
interpreter imports matplotlib, otherwise by another interpreter that does (Debian's, then python3
on PATH), which runs this same module with the description on stdin. When none can, draw() returns
False and the caller prints MISSING and carries on with its text output. GPUARENA_NO_MATPLOTLIB=1
forces that path, so tests can prove the fallback on a machine where matplotlib is installed.
"""

import json
import os
import shutil
import subprocess
import sys

from . import GaError

MISSING = ("matplotlib is not installed, skipped the PNG (apt-get install python3-matplotlib for "
           "/usr/bin/python3)")

_SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend, or None when it is unavailable here."""
    if _disabled():
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


# The shim's yes/no words (GPUARENA_PREALLOCATE, the simulated driver's SIMCUDA_VMM), any case,
# blanks around ignored. Only "" and "0" meant no until 2026-12-07, so GPUARENA_NO_MATPLOTLIB=false
# (or off, no) turned the charts off (an outside check; test test_no_matplotlib_words).
_YES, _NO = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _disabled():
    """GPUARENA_NO_MATPLOTLIB as a yes/no (unset or empty: no); GaError for any other word."""
    from .fmt import BLANKS
    raw = os.environ.get("GPUARENA_NO_MATPLOTLIB", "")
    word = raw.strip(BLANKS).lower()
    if not raw or word in _NO:
        return False
    if word in _YES:
        return True
    raise GaError(f"GPUARENA_NO_MATPLOTLIB='{raw}' is not valid (true/false, 1/0, yes/no, on/off; "
                  "set it to 1 to skip the charts, or unset it)")


def check_env():
    """GPUARENA_NO_MATPLOTLIB read once at start: a bad word is said before any work is done."""
    _disabled()


def save(plt, fig, path, title=None, description=None):
    """Writes the figure atomically (a fresh temporary beside it, then a rename), so a PNG that
    exists is complete and nothing already at a temporary name is written through; title, when
    given, also goes in the PNG's Title text chunk."""
    from . import tracefile
    fig.tight_layout()
    meta = {k: v for k, v in (("Title", title), ("Description", description)) if v} or None
    try:
        tracefile.replace_from_temp(path, lambda f: fig.savefig(f, format="png", metadata=meta))
    finally:
        plt.close(fig)


def _draw_compare(plt, path, data):
    """Bars per mode: median wall time, peak reserved, driver alloc and free calls."""
    modes = data["modes"]
    x = range(len(modes))
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    axes[0].bar(x, [v / 1e6 for v in data["wall_ns"]])
    axes[0].set_title("wall time (median), ms")
    axes[1].bar(x, [v / 2**20 for v in data["peak_reserved"]])
    axes[1].set_title("peak reserved, MiB")
    w = 0.4
    axes[2].bar([i - w / 2 for i in x], data["driver_alloc_calls"], w, label="alloc")
    axes[2].bar([i + w / 2 for i in x], data["driver_free_calls"], w, label="free")
    axes[2].set_title("driver calls")
    axes[2].legend()
    for ax in axes:
        ax.set_xticks(list(x))
        ax.set_xticklabels(modes)
    save(plt, fig, path)


def _draw_timeline(plt, path, data):
    """Step lines of bytes over time: [[label, [[t_ns, bytes], ...]], ...]."""
    fig, ax = plt.subplots(figsize=(10, 4))
    scale, xlabel = data.get("xscale", 1e9), data.get("xlabel", "time (s)")
    for label, pts in data["lines"]:
        ax.step([t / scale for t, _ in pts], [v / 2**20 for _, v in pts], where="post", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("MiB")
    ax.legend()
    title = data.get("title")
    if title:
        ax.set_title(title if len(title) <= 100 else "..." + title[-97:], fontsize=9)
    save(plt, fig, path, title, f"x axis: {xlabel}; y axis: MiB")


_DRAWERS = {"compare": _draw_compare, "timeline": _draw_timeline}


def _other_pythons():
    """Interpreters other than this one that may have matplotlib: Debian's first, where
    scripts/setup.sh installs python3-matplotlib, then python3 on PATH."""
    seen, out = {os.path.realpath(sys.executable)}, []
    for py in ("/usr/bin/python3", shutil.which("python3")):
        if py and os.path.exists(py) and os.path.realpath(py) not in seen:
            seen.add(os.path.realpath(py))
            out.append(py)
    return out


def draw(kind, path, data):
    """Draws chart `kind` to path; True when the PNG was written, False when no interpreter on
    this machine can import matplotlib (nothing written). GaError when one can but the drawing
    fails (the path's folder missing, the path a directory, no permission): its reason, not a
    missing matplotlib."""
    if _disabled():
        return False
    plt = pyplot()
    if plt is not None:
        try:
            _DRAWERS[kind](plt, path, data)
        except OSError as e:
            raise GaError(f"cannot write {path}: {e.strerror or e}; give a PNG path in a folder "
                          "that exists and is writable") from None
        return True
    job = json.dumps({"kind": kind, "path": os.path.abspath(path), "data": data})
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from gpuarena_cli import plot; sys.exit(plot.worker())")
    for py in _other_pythons():
        try:
            p = subprocess.run([py, "-c", code, _SCRIPTS_DIR], input=job.encode(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
                               timeout=300)
        except OSError:
            continue
        except subprocess.TimeoutExpired:
            raise GaError(f"drawing {path} with {py} took over 300 s; nothing drawn") from None
        if p.returncode == 0 and os.path.exists(path):
            return True
        if p.returncode != 3:  # this interpreter has matplotlib: the drawing itself failed
            lines = p.stderr.decode("utf-8", "replace").strip().splitlines()
            why = lines[-1] if lines else f"exit {p.returncode}"
            raise GaError(f"cannot write {path} (drawn with {py}): {why}; give a PNG path in a "
                          "folder that exists and is writable")
    return False


def worker():
    """Entry point of draw()'s helper interpreter: one job on stdin; 0 drawn, 3 no matplotlib."""
    plt = pyplot()
    if plt is None:
        return 3
    job = json.load(sys.stdin)
    _DRAWERS[job["kind"]](plt, job["path"], job["data"])
    return 0


def _totals(stats, key):
    t = (stats or {}).get("totals")
    v = t.get(key) if isinstance(t, dict) else None
    return v if isinstance(v, (int, float)) else 0


def compare_png(path, results):
    """Bar charts of `gpuarena compare` results, one bar per mode. Returns False (nothing
    written) without matplotlib. A mode whose run wrote no statistics gets zero bars; the table
    says why."""
    modes = list(results)
    data = {"modes": modes, "wall_ns": [results[m]["wall_ns"] for m in modes]}
    for key in ("peak_reserved", "driver_alloc_calls", "driver_free_calls"):
        data[key] = [_totals(results[m]["stats"], key) for m in modes]
    return draw("compare", path, data)
