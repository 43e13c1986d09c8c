"""Size parsing and table printing shared by the subcommands.

Sizes are accepted in the same forms as the shim's GPUARENA_LIMIT (8GiB, 512MiB, 8G, 4096), so a
user types one syntax everywhere; binary units throughout because GPU totals are powers of two.
Tables are plain text, one column per mode, so two modes are compared on one screen.
"""

import re

from . import GaError

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
          "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text, what="size"):
    """Bytes from '8GiB', '512MiB', '8G' or a plain number; GaError on anything else."""
    m = _SIZE.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise GaError(f"{what} {text!r} is not a size (try 8GiB, 512MiB, 8G or a number of "
                      "bytes)")
    n = int(float(m.group(1)) * _UNITS[unit])
    if n <= 0 or n >= 1 << 64:
        raise GaError(f"{what} {text!r} is out of range (1 byte to 16 EiB)")
    return n


def human_bytes(n):
    """'1.50 GiB' style, or '-' when the figure is missing."""
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def human_ns(ns):
    """Durations for humans: ns, us, ms or s with three significant digits."""
    if ns is None:
        return "-"
    ns = float(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def human_count(n):
    return "-" if n is None else f"{int(n):,}"


def human_frac(x):
    return "-" if x is None else f"{float(x):.3f}"


def table(header, rows):
    """Text table: header is the column titles, rows are lists of strings (first column left)."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = []
    for r in [header] + rows:
        cells = [str(r[0]).ljust(widths[0])]
        cells += [str(c).rjust(w) for c, w in zip(r[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
