"""PNG charts for `gpuarena report` and `gpuarena compare`, and the one place matplotlib is loaded.

matplotlib is optional (the command runs on the standard library alone), so every chart goes through
pyplot(), which returns None when it cannot be imported; callers then print MISSING and carry on
with their text output. GPUARENA_NO_MATPLOTLIB=1 forces that path, so tests can prove the fallback
on a machine where matplotlib is installed.
"""

import os

MISSING = ("matplotlib is not installed, skipped the PNG (apt-get install python3-matplotlib for "
           "/usr/bin/python3)")


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend, or None when it is unavailable."""
    if os.environ.get("GPUARENA_NO_MATPLOTLIB", "") not in ("", "0"):
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save(plt, fig, path):
    """Writes the figure atomically (tmp + rename), so a PNG that exists is complete."""
    fig.tight_layout()
    fig.savefig(f"{path}.tmp", format="png")
    plt.close(fig)
    os.replace(f"{path}.tmp", path)


def _totals(stats, key):
    t = (stats or {}).get("totals")
    v = t.get(key) if isinstance(t, dict) else None
    return v if isinstance(v, (int, float)) else 0


def compare_png(path, results):
    """Bar charts of `gpuarena compare` results, one bar per mode: median wall time, peak
    reserved, driver alloc and free calls. Returns False (nothing written) without matplotlib.
    A mode whose run wrote no statistics gets zero bars; the table says why."""
    plt = pyplot()
    if plt is None:
        return False
    modes = list(results)
    x = range(len(modes))
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    axes[0].bar(x, [results[m]["wall_ns"] / 1e6 for m in modes])
    axes[0].set_title("wall time (median), ms")
    axes[1].bar(x, [_totals(results[m]["stats"], "peak_reserved") / 2**20 for m in modes])
    axes[1].set_title("peak reserved, MiB")
    w = 0.4
    axes[2].bar([i - w / 2 for i in x], [_totals(results[m]["stats"], "driver_alloc_calls")
                                         for m in modes], w, label="alloc")
    axes[2].bar([i + w / 2 for i in x], [_totals(results[m]["stats"], "driver_free_calls")
                                         for m in modes], w, label="free")
    axes[2].set_title("driver calls")
    axes[2].legend()
    for ax in axes:
        ax.set_xticks(list(x))
        ax.set_xticklabels(modes)
    save(plt, fig, path)
    return True
