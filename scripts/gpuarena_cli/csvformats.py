"""The CSV importers: buffer lifetimes (id,lower,upper,size) and RMM logging_resource_adaptor
logs, turned into gpuarena traces; importers.py detects the format and dispatches here. A
lifetimes CSV is read as gpuarena-replay's own reader (allocator/lifetimes.c) reads it, so one
file replays to the same figures either way; every malformed row raises GaError naming the file,
the line and the fix."""

import csv
import io
import math
import re
import sys

from . import GaError, UsageError
from .fmt import shown as _shown
from . import tracefile as tf
from .importbase import (Pairer, wide_encoding, wide_text_error, _address, _digits_fit, _int, _not_negative, _read_bytes, _span,
                         _stream, _too_large)


def _csv_rows(path, expected, raw=False):
    """Rows of a CSV whose header must be exactly `expected` (case and spaces ignored). With raw,
    quotes are plain characters and cells keep their blanks (as gpuarena-replay reads a CSV)."""
    data = _read_bytes(path)
    enc = wide_encoding(data)
    if enc:
        raise wide_text_error(path, enc)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise GaError(f"{path}: not UTF-8 text; expected a CSV with header "
                      f"{','.join(expected)}") from None
    reader = csv.reader(io.StringIO(text), quoting=csv.QUOTE_NONE if raw else csv.QUOTE_MINIMAL)
    try:
        header = next(reader, None)
        norm = [h.strip().lower() for h in header] if header else None
        if norm != [x.lower() for x in expected]:
            first = ",".join(header) if header else ""  # shown escaped and cut: it was
            first = repr(first[:60]) + ("..." if len(first) > 60 else "")  # raw NULs, any length
            raise GaError(f"{path}: first line is {first if header else 'empty'}, expected the "
                          f"header {','.join(expected)}; give a file of that format, or the "
                          "format it is in (auto detects it)")
        last = 0
        for n, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(expected):
                raise GaError(f"{path}: line {n}: {len(row)} fields, expected {len(expected)} "
                              f"({','.join(expected)})")
            last = n
            yield n, row if raw else [c.strip() for c in row]
        if last and last == reader.line_num and not text.endswith(("\n", "\r")):
            # as gpuarena-replay's reader says it (allocator/lifetimes.c)
            print(f"gpuarena: {path}:{last}: the last row has no line end; if the file was cut "
                  f"short there, its last number is cut too (check the row against the source)",
                  file=sys.stderr)
    except csv.Error as e:
        if "new-line character" in str(e):  # Python's advice: "open it in universal-newline mode"
            raise GaError(_lone_cr(path, f"line {reader.line_num}")) from None
        raise GaError(f"{path}: line {reader.line_num}: bad CSV ({e})") from None


def _lone_cr(path, where):
    return (f"{path}: {where}: a carriage return (CR) not followed by a line feed: a CSV's lines "
            f"end in LF or CRLF; convert CR line ends (old Mac): tr '\\r' '\\n' < {path} > F.csv")


_LIFETIMES_NUMBER = re.compile(r"[ \t]*([0-9]+)[ \t]*")


def _lifetimes_int(cell, path, where, what):
    """A lifetimes field as gpuarena-replay's reader (allocator/lifetimes.c) takes it: ASCII digits
    with blanks (space, tab) around, nothing else. int() also took 1_000, +2048, other white
    space and non-ASCII digits, so one file replayed through one reader and not the other."""
    m = _LIFETIMES_NUMBER.fullmatch(cell)
    if m is None:
        why = ("is negative" if cell.strip(" \t").startswith("-") else
               "is empty" if not cell.strip(" \t") else "is not a number")
        raise GaError(f"{path}: {where}: {what} {_shown(cell)} {why}; a lifetimes field is the "
                      "digits 0-9 only (no sign, '_', quotes, fraction or exponent; spaces and "
                      "tabs around it are fine): fix that row")
    _digits_fit(m.group(1), path, where, what)
    return _too_large(int(m.group(1)), path, where, what)


def import_lifetimes(path, close=False):
    """Buffer lifetimes (id,lower,upper,size) -> trace: alloc at lower, free at upper, frees before
    allocs at equal times; addr = id, time_ns = the logical time. A row with lower == upper lives
    for no time: its alloc and free, side by side, come after the frees and before the allocs of
    that instant, as gpuarena-replay's own reader (allocator/lifetimes.c) orders it."""
    del close  # every buffer has its free already
    bufs, ids = [], set()
    for n, (bid, lo, up, size) in _csv_rows(path, ("id", "lower", "upper", "size"), raw=True):
        where = f"line {n}"
        bid, lo, up, size = (_lifetimes_int(v, path, where, k) for v, k in
                             ((bid, "id"), (lo, "lower"), (up, "upper"), (size, "size")))
        if size <= 0:  # a negative field was refused above
            raise GaError(f"{path}: {where}: size 0; a buffer holds at least one byte: fix or "
                          "remove that row")
        if up < lo:
            raise GaError(f"{path}: {where}: upper {up} < lower {lo}; a buffer lives over "
                          "[lower, upper), so upper must not be less")
        if bid in ids:
            raise GaError(f"{path}: {where}: buffer id {bid} appears twice; ids must be unique")
        ids.add(bid)
        bufs.append((bid, lo, up, size))
    # Ties keep file order, as gpuarena-replay's own reader (allocator/lifetimes.c) does: sorted
    # by id instead, the same CSV replayed with other figures through `gpuarena replay`.
    # (time, group, row, kind): frees (0), each zero-length buffer's alloc and free (1), allocs (2)
    evs = [(lo, 1 if up == lo else 2, row, tf.ALLOC, bid, size)
           for row, (bid, lo, up, size) in enumerate(bufs)]
    evs += [(up, 1 if up == lo else 0, row, tf.FREE, bid, size)
            for row, (bid, lo, up, size) in enumerate(bufs)]
    evs.sort(key=lambda e: (e[0], e[1], e[2], e[3] != tf.ALLOC))
    events = [tf.event(t, bid, size, kind) for t, _, _, kind, bid, size in evs]
    counts = {"buffers": len(bufs), "allocs": len(bufs), "frees": len(bufs),
              "events": len(events)}
    return tf.Trace(events), counts


RMM_HEADER = ("Thread", "Time", "Action", "Pointer", "Size", "Stream")
TIME_UNITS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_HMS = re.compile(r"^(\d+):(\d\d):(\d\d)(?:[:.](\d{1,9}))?$")


def _rmm_time(text, unit, path, where):
    """RMM times are "HH:MM:SS:ffffff" (spdlog %f, microseconds) or a plain number in `unit`."""
    m = _HMS.match(text)
    if m:
        h, mi, s, frac = m.groups()
        if int(h) > 23 or int(mi) > 59 or int(s) > 60:  # 99:99:99 read as 4 days (outside check)
            raise GaError(f"{path}: {where}: Time {text!r} is not a clock time (hours 0-23, "
                          "minutes 0-59, seconds 0-60, as RMM's log writes them); fix that row")
        ns = int(frac.ljust(9, "0")) if frac else 0
        return ((int(h) * 60 + int(mi)) * 60 + int(s)) * 10**9 + ns
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise GaError(f"{path}: {where}: Time {_shown(text)} is neither HH:MM:SS:ffffff nor a "
                      "non-negative number")
    return round(_span(value * TIME_UNITS[unit], path, where, f"Time {text!r} ({unit})"))


def _hex_or_int(text, path, where, what):
    try:
        n = int(text, 16) if text.lower().startswith("0x") else int(text or "0", 0)
    except ValueError:
        try:
            n = int(text, 16)
        except ValueError:
            raise GaError(f"{path}: {where}: {what} {_shown(text)} is not a number (hex 0x... or "
                          "decimal)") from None
    return _too_large(n, path, where, what)


def import_rmm(path, close=False, time_unit="s"):
    """RMM logging_resource_adaptor CSV -> trace. Clock wraps at midnight are unwrapped."""
    if time_unit not in TIME_UNITS:
        raise GaError(f"unknown time unit {time_unit!r}: use one of {', '.join(TIME_UNITS)}")
    p = Pairer()
    t0 = prev = None
    day = 86400 * 10**9
    wrap = 0
    numeric = 0  # rows whose Time is a number: the only ones --time-unit reads
    rows, late, hi = [], 0, None
    for n, (thread, tm, action, ptr, size, stream) in _csv_rows(path, RMM_HEADER):
        where = f"line {n}"
        t = _rmm_time(tm, time_unit, path, where)
        numeric += not _HMS.match(tm)
        if prev is not None and _HMS.match(tm) and t + wrap < prev - day // 2:
            wrap += day  # an HH:MM:SS clock went past midnight
        t += wrap
        late += hi is not None and t < hi  # earlier than a row above it
        hi = t if hi is None else max(hi, t)
        prev = t
        t0 = t if t0 is None else min(t0, t)
        size = _int(size or 0, path, where, "Size")
        stream = _stream(stream, path, where, "Stream", _hex_or_int)
        tid = (_not_negative(thread, path, where, "Thread",
                             "a thread is 0 or more (an id)", _hex_or_int)
               if thread else 0)
        act = action.strip().lower().replace("_", " ")
        if act == "allocate":
            if size <= 0:
                raise GaError(f"{path}: {where}: allocate of {size} bytes; Size must be > 0")
        elif act not in ("free", "allocate failure"):
            raise GaError(f"{path}: {where}: Action {_shown(action)} is not allocate, free or "
                          "allocate failure")
        key = (_address(ptr, path, where, "Pointer", _hex_or_int) if act != "allocate failure"
               else 0)
        rows.append((t, len(rows), act, key, size, stream, tid))
    # Threads write an RMM log out of time order: the rows are paired in time order (file order
    # where times are equal) from the earliest time. Paired in file order from the first row's
    # time, earlier rows all became time 0 and the peak changed with the order of the lines.
    rows.sort()
    tns = 0
    for t, _, act, key, size, stream, tid in rows:
        tns = t - t0
        if act == "allocate":
            p.alloc(tns, 0, key, size, stream, tid)
        elif act == "free":
            p.free(tns, 0, key, stream, tid)
        else:
            p.failed(tns, 0, size, stream, tid)
    if late:
        p.counts["rows_out_of_time_order"] = late
    if time_unit != "s" and t0 is not None and not numeric:
        raise UsageError(f"--time-unit {time_unit}: {path} gives its times as clock times "
                         "(HH:MM:SS.ffffff), which need no unit; drop --time-unit")
    return p.finish(close, tns)
