"""The `gpuarena` command's argument types: argparse converters that refuse a bad value with a
usage error (exit 2) naming the value and an example, over the grammars of fmt, modes and doctor.
"""

import argparse
import math
import re

from . import GaError
from . import doctor as doctor_mod
from . import modes as modes_mod
from .fmt import BLANKS, QUOTE_MAX, _quote, parse_size


def _argtype(parse):
    """An argparse type from a parser that raises GaError (usage error, exit 2)."""
    def convert(text):
        try:
            return parse(text)
        except GaError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return convert


_size = _argtype(parse_size)
_keep = _argtype(lambda t: parse_size(t, allow_zero=True))  # GPUARENA_VMM_KEEP: 0 is a value
KEEP_HELP = ("vmm: wholly free granules kept mapped, as GPUARENA_VMM_KEEP (e.g. 0, 256MiB; "
             "default 64MiB)")
GRANULARITY_HELP = ("vmm: the granule of the device the trace was recorded on, a power of two "
                    "from 512 bytes to 1TiB (default 2MiB, current GPUs; the driver's "
                    "cuMemGetAllocationGranularity, recommended)")


def _parse_granularity(text):
    n = parse_size(text)
    if n < 512 or n > 1 << 40 or n & (n - 1):
        raise GaError(f"'{text}' is not a granularity: give a power of two from 512 bytes to "
                      "1TiB, e.g. 2MiB or 64KiB")
    return n


_granularity = _argtype(_parse_granularity)


def _device(text):
    """A device number, -32768 to 32767 (a trace records it in 16 bits), as gpuarena-replay
    takes: ASCII digits with an optional minus."""
    # at most 6 digits before int(): more than 4,300 raised Python's ValueError (helper-60 F4)
    if not re.fullmatch(r"-?[0-9]{1,6}", text) or not -32768 <= int(text) <= 32767:
        raise argparse.ArgumentTypeError(f"'{text}' is not a device number (-32768 to 32767)")
    return int(text)


def _limit(text):
    """GPUARENA_LIMIT syntax: a size or a percentage of the device; passed on as written."""
    _argtype(lambda t: parse_size(t, allow_percent=True))(text)
    return text.strip(BLANKS)


def _one_mode(text):
    """run's and report's --mode: one mode; a list (`--mode arena,grow`) was an unknown mode."""
    if "," in text and all(p.strip(BLANKS).lower() in modes_mod.MODES + ("all",)
                           for p in text.split(",")):
        raise GaError(f"'{text}': one mode here, not a list (use one of "
                      f"{', '.join(modes_mod.MODES)}; compare --modes and replay --mode take a "
                      "list)")
    return modes_mod.parse(text)


_mode = _argtype(_one_mode)
_mode_list = _argtype(modes_mod.parse_list)


class ModesAction(argparse.Action):
    """A list of modes given more than once (`--mode vmm --mode arena`) takes them all, in the
    order given, as gpuarena-replay takes a repeated --mode: argparse kept the last alone, without
    a word (a replay of arena only; an outside check, 2026-12-07)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(namespace, "_modes_given", set())
        old = getattr(namespace, self.dest) if self.dest in given else []
        setattr(namespace, self.dest, old + [m for m in values if m not in old])
        namespace._modes_given = given | {self.dest}


class OneModeAction(argparse.Action):
    """One mode: the same mode again is taken, another is a usage error (argparse kept the last
    without a word: `run --mode vmm --mode arena` ran in arena mode)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(namespace, "_modes_given", set())
        old = getattr(namespace, self.dest)
        if self.dest in given and old != values:
            parser.error(f"{option_string} given twice ({old}, then {values}): one mode runs; "
                         f"give one {option_string}")
        setattr(namespace, self.dest, values)
        namespace._modes_given = given | {self.dest}


_DIGITS = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]+(\.[0-9]+)?")  # as in a size: 0.5, not .5 or 5.


MAX_SECONDS = 86400  # a day: longer is a typo, and time.sleep/timeouts overflow far past it


def _seconds(convert, examples, least=0):
    """An argparse type for a time in seconds: finite, above 0 (at least `least` where one is
    given), at most MAX_SECONDS."""
    def parse(text):
        try:
            # ASCII digits alone, as every number the user types (blanks around ignored):
            # Python's int() and float() also took `1_0`, `٣` and `1e1` (helper-131)
            digits = _DIGITS if convert is int else _DECIMAL
            value = convert(text.strip(BLANKS)) if digits.fullmatch(text.strip(BLANKS)) else None
        except (ValueError, OverflowError):
            value = None
        if (value is None or not math.isfinite(value) or not 0 < value <= MAX_SECONDS
                or value < least):
            what = ("a whole number of seconds from 1 to" if convert is int
                    else f"a number of seconds from {least:g} to" if least
                    else "a number of seconds above 0 and at most")
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} {MAX_SECONDS} (a day); "
                                             f"try {examples}")
        return value
    return parse


# top's live view redraws at most ten times a second: --interval 1e-9 was taken and redrew in a
# busy loop, a core's worth of reading ledgers (an outside check, 2026-12-07).
TOP_LEAST_INTERVAL = 0.1


# At most this many runs per mode: each run's results are kept to the end (its statistics and
# output tail, about 20 KB), and --repeat 10^20 was taken, and grew for ever (helper-60 F11),
# where doctor's --timeout and top's --interval are bounded.
MAX_REPEAT = 10000


def _repeat(text):
    t = text.strip(BLANKS)
    # ASCII digits alone: int() took `1_0` as 10 and non-ASCII digits (helper-131)
    n = 0 if not _DIGITS.fullmatch(t) else int(t) if len(t) <= 12 else MAX_REPEAT + 1
    if not 1 <= n <= MAX_REPEAT:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of runs from 1 to "
                                         f"{MAX_REPEAT:,} (try --repeat 5)")
    return n


def _said(text):
    """A value in a message: as Python writes it, or a long one by its head, tail and length (a
    5,000-digit fraction was quoted whole before the examples)."""
    return repr(text) if len(text) <= QUOTE_MAX else _quote(text)


def _fraction(text):
    try:
        doctor_mod._p_fraction(text)  # one grammar with the shim's and doctor's
    except GaError:
        raise argparse.ArgumentTypeError(f"{_said(text)} is not a fraction in (0, 1] (try 0.75, or "
                                         "0.75+ to let the arena grow past it up to the limit)")
    return text.strip(BLANKS)


def _word(text):
    """A name from a list (a format, a level, a time unit) as modes are read: any case, blanks
    around ignored (`--format Kineto` was an invalid choice while `--mode Grow` was taken)."""
    return text.strip(BLANKS).lower()
