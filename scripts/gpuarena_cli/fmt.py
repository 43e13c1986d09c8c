"""Sizes, human-readable figures and text tables shared by the subcommands.

parse_size is the command's copy of the one size grammar (allocator/ga_size.h, allocator/size.c):
surrounding white space ignored; a decimal number, optional white space, an optional unit in any
case (B; K M G T and KiB MiB GiB TiB x1024; kB MB GB TB x1000; % where a percentage is allowed);
fractional bytes rounded down; 0 bytes, more than 2^64 - 1, exponents, signs, hexadecimal and junk
refused. It is a copy because the command is Python and the shim is C, so the same table of cases
(test/sizes.tsv) runs through both, and the messages are word for word the C parser's. Arithmetic
is exact (integers and Fractions), as in C. Tables are plain text, one column per mode, so two
modes are compared on one screen.
"""

import reprlib
from fractions import Fraction

from . import GaError

_SPACE = " \t\n\v\f\r"  # the C parser's white space: ASCII only, whatever the locale
BLANKS = _SPACE  # around every value a user types: sizes, names, fractions (str.strip() took any
#                  Unicode space, a no-break space the shim refuses)
_DIGITS = "0123456789"
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_UNITS = {"b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 1000, "m": 1 << 20, "mib": 1 << 20,
          "mb": 1000**2, "g": 1 << 30, "gib": 1 << 30, "gb": 1000**3, "t": 1 << 40,
          "tib": 1 << 40, "tb": 1000**4}
U64_MAX = (1 << 64) - 1


def is_unit(word):
    """Whether `word` alone is a unit of the grammar, or %: what the shell leaves as a word of its
    own from `--limit 8 GiB`."""
    return word.lower() in _UNITS or word == "%"
PERCENT_DIGITS = 17  # digits after the point kept in a percentage (GA_SIZE_PERCENT_DIGITS)
_PCT_RANGE = "a percentage must be more than 0 and at most 100"


def _scan_number(text, p):
    """(whole digits, fraction digits, position after the number) or a reason string."""
    n = len(text)
    if p == n:
        return "nothing given"
    if text[p] in "+-":
        return "signs are not accepted"
    if text[p] == ".":
        return "write a digit before the point: 0.5, not .5"
    if text[p] not in _DIGITS:
        return "it does not start with a number"
    start = p
    while p < n and text[p] in _DIGITS:
        p += 1
    whole, frac = text[start:p], ""
    if p < n and text[p] == ".":
        start = p = p + 1
        while p < n and text[p] in _DIGITS:
            p += 1
        frac = text[start:p]
        if not frac:
            return "write a digit after the point: 5.0, not 5."
    nxt = text[p + 1:p + 2]
    if text[p:p + 1] in ("e", "E") and nxt and nxt in _DIGITS + "+-":
        return "exponents are not accepted: write the number out, as 1000 or 1GB, not 1e3 or 1e9"
    if text[p:p + 1] in ("x", "X") and whole == "0" and not frac:
        return "hexadecimal is not accepted"
    if text[p:p + 1] == "," and nxt and nxt in _DIGITS:
        return "commas are not accepted: write 1.5 or 1000000"
    return whole, frac, p


def _scan(text):
    """(whole, frac, unit) or a reason string, as allocator/size.c scans."""
    p, n = 0, len(text)
    while p < n and text[p] in _SPACE:
        p += 1
    got = _scan_number(text, p)
    if isinstance(got, str):
        return got
    whole, frac, p = got
    while p < n and text[p] in _SPACE:
        p += 1
    start = p
    if p < n and text[p] == "%":
        p += 1
    else:
        while p < n and text[p] in _LETTERS:
            p += 1
    unit = text[start:p]
    while p < n and text[p] in _SPACE:
        p += 1
    if p < n:  # a no-break space looks like a space: said (helper-67 F17.4), as size.c says it
        wide = (" (a character that is not ASCII, such as a no-break space: write the size with "
                "plain spaces)" if any(ord(ch) > 127 for ch in text[p:]) else "")
        return f"unexpected '{text[p:]}' after the {'unit' if unit else 'number'}{wide}"
    return whole, frac, unit


def _whole(digits):
    """The whole part's value, or None above 2^64 - 1, for any number of digits: int() of more
    than 4,300 digits raised ValueError (Python's guard), a traceback (helper-60 F4)."""
    d = digits.lstrip("0")
    return None if len(d) > 20 else int(d or "0")


def _frac_times(digits, mult):
    """floor(0.DIGITS * mult), exactly, for any number of digits: the C parser's frac_times,
    from the last digit back, so no integer of the digits' length is ever made."""
    x = 0
    for c in reversed(digits):
        x = ((ord(c) - 48) * mult + x) // 10
    return x


def _value(whole, frac, unit, allow_percent, allow_zero=False):
    """int bytes or Fraction percent, or a reason string."""
    w = _whole(whole)
    if unit == "%":
        if not allow_percent:
            return "a percentage is not accepted here"
        if w is None or w > 100:
            return _PCT_RANGE
        kept = frac[:PERCENT_DIGITS]
        pct = Fraction(w * 10 ** len(kept) + int(kept or "0"), 10 ** len(kept))
        if pct == 0 or (w == 100 and frac.strip("0")):
            return _PCT_RANGE
        return pct
    mult = _UNITS.get(unit.lower(), 0) if unit else 1
    if not mult:
        return f"unknown unit '{unit}'"
    n = None if w is None else w * mult + _frac_times(frac, mult)
    if n is None or n > U64_MAX:
        return "it is more than 2^64 - 1 bytes"
    if n == 0:
        exact_zero = w == 0 and not frac.strip("0")
        if exact_zero and allow_zero:
            return 0
        if exact_zero:
            return "it is 0 bytes"
        return "it rounds down to 0 bytes" + ("; write 0 for none" if allow_zero else "")
    return n


QUOTE_MAX = 64  # allocator/size.c: a longer input is quoted by its head, tail and length


def _quote(text):
    text = str(text)
    if len(text) <= QUOTE_MAX:
        return f"'{text}'"
    return f"'{text[:32]}...{text[-16:]}' ({len(text)} characters)"


def size_error(text, why, allow_percent=False):
    """The C parser's message for a refused size."""
    return (f"{_quote(text)} is not a size: {why} (try 8GiB, 512MiB, 1.5G, 4096"
            f"{' or 50%' if allow_percent else ''}; units B, K/KiB, M/MiB, G/GiB, T/TiB = x1024, "
            "kB, MB, GB, TB = x1000, in any case)")


def parse_size(text, allow_percent=False, allow_zero=False):
    """Bytes (int) from '8GiB', '512 MiB', '1.5G', '4096'; with allow_percent, '50%' gives the
    percentage as a Fraction; with allow_zero, exactly 0 bytes ('0', '0B') is 0 (GA_SIZE_ZERO).
    GaError with the C parser's message otherwise."""
    got = _scan(str(text))
    if not isinstance(got, str):
        got = _value(*got, allow_percent, allow_zero)
    if isinstance(got, str):
        raise GaError(size_error(text, got, allow_percent))
    return got


def percent_of(size, total):
    """Bytes a parsed size stands for on a device of `total` bytes: floor(total * p / 100) for a
    percentage (0 when the share rounds to nothing), the size itself otherwise."""
    if isinstance(size, Fraction):
        return int(total * size / 100)
    return size


def human_bytes(n):
    """'1.50 GiB' style, or '-' when the figure is missing."""
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if unit == "B":
            if abs(n) < 1024:
                return f"{int(n)} B"
        elif unit == "EiB" or float(f"{abs(n):.2f}") < 1024:
            # tested as printed: 1048575 is "1.00 MiB", not "1024.00 KiB"
            return f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def human_ns(ns):
    """Durations for humans: ns, us, ms or s with three significant digits."""
    if ns is None:
        return "-"
    ns = float(ns)
    shown = float(f"{ns:.3g}")  # the unit chosen as printed: 999999 is "1 ms", not "1e+03 us"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if shown >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if v < 1000 else f"{v:.0f} {unit}"
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


class _Short(reprlib.Repr):
    """repr cut short: strings and other values to about 60 characters, containers to a few items
    and levels, ints of 1,000+ bits by their size (their str() raises past 4,300 digits)."""

    def __init__(self):
        super().__init__()
        self.maxstring = self.maxother = 60

    def repr_int(self, x, level):
        return f"<an int of {x.bit_length():,} bits>" if x.bit_length() >= 1000 else repr(x)


def shown(value):
    """A value from an input file as a message quotes it: a string of a million characters in a
    snapshot or a Kineto trace was printed whole (an outside check)."""
    return _Short().repr(value)
