"""The common core of the importers (importers.py, csvformats.py): Pairer, which turns alloc/free
observations into trace events, and the checks every reader applies to a field (an integer that
fits a trace field, a whole number, a time a trace can hold, a device number), each refusing a bad
value with a GaError that names the file, the entry and the fix. Apart from importers.py so that
the CSV readers can use them without an import cycle."""

import math
import os
import re

from . import GaError
from .fmt import shown as _shown
from . import tracefile as tf


class Pairer:
    """Builds events from alloc/free observations keyed by (device, key)."""

    def __init__(self):
        self.events = []
        self.live = {}  # (device, key) -> size
        self.counts = {"allocs": 0, "frees": 0, "failed_allocs": 0,
                       "frees_without_alloc_dropped": 0, "reused_keys_closed": 0}

    def alloc(self, t, dev, key, size, stream=0, thread=0):
        if (dev, key) in self.live:
            # The free of the earlier block is missing (lost record): close it so the trace stays
            # consistent, and count it so the user knows.
            self.free(t, dev, key, stream, thread)
            self.counts["frees"] -= 1
            self.counts["reused_keys_closed"] += 1
        self.live[(dev, key)] = size
        self.counts["allocs"] += 1
        self.events.append(tf.event(t, key, size, tf.ALLOC, stream, thread, device=dev))

    def free(self, t, dev, key, stream=0, thread=0):
        size = self.live.pop((dev, key), None)
        if size is None:
            self.counts["frees_without_alloc_dropped"] += 1
            return False
        self.counts["frees"] += 1
        self.events.append(tf.event(t, key, size, tf.FREE, stream, thread, device=dev))
        return True

    def failed(self, t, dev, size, stream=0, thread=0):
        self.counts["failed_allocs"] += 1
        self.events.append(tf.event(t, 0, size, tf.ALLOC_FAILED, stream, thread, device=dev,
                                    result=tf.CUDA_ERROR_OUT_OF_MEMORY))

    def finish(self, close, t_end, start_unix_ns=0):
        """Returns (Trace, counts); with close, frees every block still live at t_end."""
        self.counts["live_at_end"] = len(self.live)
        if close:
            for (dev, key), size in list(self.live.items()):
                self.events.append(tf.event(t_end, key, size, tf.FREE, device=dev))
            self.counts["closed_at_end"] = len(self.live)
            self.live.clear()
        self.counts["events"] = len(self.events)
        return tf.Trace(self.events, start_unix_ns), self.counts


def _read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise tf.read_error(path, e) from None


def wide_encoding(head):
    """"UTF-32" or "UTF-16" when the bytes begin with that byte-order mark (Windows tools save
    text so), else None; the UTF-32 marks are tested first, as FF FE 00 00 begins with FF FE."""
    if head[:4] in (b"\xff\xfe\0\0", b"\0\0\xfe\xff"):
        return "UTF-32"
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "UTF-16"
    return None


def wide_text_error(path, enc):
    """The GaError for a CSV saved as UTF-16 or UTF-32: its name, and the line that converts it
    (it was "not UTF-8 text", or "cannot tell its format", with no way out: helper-109)."""
    import shlex
    stem, ext = os.path.splitext(path)
    return GaError(f"{path}: {enc} text, not UTF-8; convert it first: iconv -f {enc} -t UTF-8 "
                   f"{shlex.quote(path)} > {shlex.quote(stem + '.utf8' + ext)}")


def _too_large(n, path, where, what):
    """n, or the replay tool's refusal when it does not fit a trace field (64 bits): clamping
    it would change the figures without a word."""
    if abs(n) > tf.U64:
        # a pickle's int of 4,301+ digits has no str(): "report it as a gpuarena bug" (outside)
        shown = n if n.bit_length() < 1000 else f"of {n.bit_length():,} bits"
        raise GaError(f"{path}: {where}: {what} {shown} is too large (over 2^64-1); fix or "
                      "remove that entry")
    return n


_WHOLE = re.compile(r"[ \t]*[-+]?[0-9]+[ \t]*")


def _digits_fit(digits, path, where, what):
    """The replay tool's refusal for a number of more than 20 significant digits, before int()
    sees it: int() of more than 4,300 digits raised Python's own ValueError, whose advice (use
    sys.set_int_max_str_digits) reached the user (helper-60 F4)."""
    text = digits.strip(" \t")
    if len(text.lstrip("+-").lstrip("0")) > 20:
        shown = text if len(text) <= 64 else f"{text[:16]}...{text[-8:]} ({len(text):,} digits)"
        raise GaError(f"{path}: {where}: {what} {shown} is too large (over 2^64-1); fix or remove "
                      "that entry")


def _int(value, path, where, what):
    """An integer field, or a GaError that says where the bad value is."""
    shown = value
    if isinstance(value, bool):
        value = None
    if isinstance(value, float) and math.isfinite(value) and not value.is_integer():
        # int() dropped the fraction (Bytes 1000.9 read as 1000), where a lifetimes CSV refuses
        # 1.5: every reader refuses a fraction, naming it
        raise GaError(f"{path}: {where}: {what} {value!r} is not a whole number (it has a "
                      "fraction); fix or remove that entry")
    if isinstance(value, str) and not _WHOLE.fullmatch(value):
        value = None  # int() also took 1_000 and non-ASCII digits
    if isinstance(value, str):
        _digits_fit(value, path, where, what)
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        raise GaError(f"{path}: {where}: {what} {_shown(shown)} is not an integer; fix or remove "
                      "that entry") from None
    return _too_large(n, path, where, what)


def _span(ns, path, where, what):
    """ns after the trace's first event, or the refusal when a trace's 64-bit time cannot hold
    it: it was clamped to 2^64-1 without a word (events far apart ran together), and a Kineto
    ts of 1e308 ended in "report it as a gpuarena bug" (an outside check)."""
    if not ns <= tf.U64:
        raise GaError(f"{path}: {where}: {what} is more than 2^64 ns (584 years), past what "
                      "a trace's time holds; fix or remove that entry")
    return ns


def _device(value, path, where, what):
    """A device number as a trace stores it (16 bits): one outside -32768..32767 was clamped to
    the edge, and two devices (40000 and 50000) merged into one pool without a word."""
    n = _int(value, path, where, what)
    if not -32768 <= n <= 32767:
        raise GaError(f"{path}: {where}: {what} {n} is outside -32768..32767, the device numbers "
                      "a gpuarena trace holds (16 bits); renumber the devices of the file")
    return n


def _not_negative(value, path, where, what, rule, parse=_int):
    """A number that is 0 or more (rule says so, for the message) read by parse, or the
    refusal of a negative one: it was taken as 2^64 less it without a word (an outside check)."""
    n = parse(value, path, where, what)
    if n < 0:
        raise GaError(f"{path}: {where}: {what} {n} is negative; {rule}: fix or "
                      "remove that entry")
    return n


def _address(value, path, where, what, parse=_int):
    """An address (a pointer, 0 or more) read by parse, or the refusal of a negative one: it was
    taken as 2^64 less it without a word (an outside check), a key no free of the same pointer
    written unsigned would match."""
    return _not_negative(value, path, where, what, "an address is 0 or more (a pointer)", parse)


def _stream(value, path, where, what="stream", parse=_int):
    """A stream number (a handle, 0 or more; None, 0 or missing is the default stream) read by
    parse, or the refusal of a negative one: it was wrapped to 2^64 less it without a word."""
    return _not_negative(value, path, where, what, "a stream is 0 or more (a handle)", parse)
