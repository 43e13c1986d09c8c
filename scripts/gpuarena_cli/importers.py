"""Importers: foreign allocation records (PyTorch snapshots, Kineto traces, buffer-lifetime CSV,
RMM logs) turned into gpuarena traces, so every allocation pattern replays through one tool.

Each importer returns (Trace, counts): counts is an ordered dict of what was read, kept, paired and
dropped, so the user sees what the conversion lost. Pairing is the common core (Pairer): an alloc
opens a key, the matching free closes it; a free of an unknown key is dropped and counted (traces
recorded as ring buffers lose the allocs of their first frees). Every malformed input raises
GaError naming the file, the place and the fix; nothing here writes files (cli does, atomically).
Pickles are loaded with an Unpickler that refuses every global, so a snapshot cannot run code.
"""

import csv
import gzip
import io
import json
import pickle
import math
import os
import re
import stat
import sys
import zlib

from . import GaError, UsageError
from .fmt import shown as _shown
from . import memory
from . import tracefile as tf

FORMATS = ("pytorch-snapshot", "kineto", "lifetimes", "rmm", "auto")


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
        raise GaError(f"cannot read {path}: {e.strerror}") from None


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


# ---------------------------------------------------------------- PyTorch memory snapshots

class _Refused(pickle.UnpicklingError):
    """A global was asked for: the message is already the whole explanation."""


class _SafeUnpickler(pickle.Unpickler):
    """Plain data only: a snapshot is dicts, lists, strings and numbers."""

    def find_class(self, module, name):
        raise _Refused(
            f"the pickle asks for the global {module}.{name}; gpuarena loads only plain data "
            "(dict/list/str/number) so that no code in the file can run. Re-dump the snapshot "
            "with torch.cuda.memory._dump_snapshot, or export it to plain types")


def _load_snapshot(path):
    data = _read_bytes(path)
    try:
        snap = _SafeUnpickler(io.BytesIO(data)).load()
    except _Refused as e:
        raise GaError(f"{path}: not a loadable PyTorch memory snapshot: {e}") from None
    except Exception as e:  # a damaged pickle can fail in many ways; all mean the same to a user
        raise GaError(f"{path}: not a PyTorch memory snapshot (unpickling failed: "
                      f"{type(e).__name__}: {e}); produce one with "
                      "torch.cuda.memory._dump_snapshot(path)") from None
    if not isinstance(snap, dict) or not isinstance(snap.get("device_traces"), list):
        raise GaError(f"{path}: a pickle, but not a PyTorch memory snapshot (no 'device_traces' "
                      "list); record with torch.cuda.memory._record_memory_history() before "
                      "_dump_snapshot")
    return snap


def _snapshot_events(path, snap):
    """Yields (device, index, event dict) for every trace entry, checking the basic shape."""
    for dev, entries in enumerate(snap["device_traces"]):
        if not isinstance(entries, list):
            raise GaError(f"{path}: device_traces[{dev}] is not a list of events")
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or not isinstance(e.get("action"), str):
                raise GaError(f"{path}: device_traces[{dev}][{i}] is not an event with an "
                              "'action' name; the snapshot is damaged")
            yield dev, i, e


def _snapshot_segments_before(path, snap, seen_allocs):
    """Segments live at dump time whose segment_alloc fell out of the ring buffer."""
    out = []
    for j, seg in enumerate(snap.get("segments") or []):
        if not isinstance(seg, dict):
            raise GaError(f"{path}: segments[{j}] is not a dict; the snapshot is damaged")
        dev = _device(seg.get("device", 0), path, f"segments[{j}]", "device")
        addr = _int(seg.get("address"), path, f"segments[{j}]", "address")
        if (dev, addr) not in seen_allocs:
            size = _int(seg.get("total_size"), path, f"segments[{j}]", "total_size")
            out.append((dev, addr, size, _int(seg.get("stream", 0) or 0, path,
                                              f"segments[{j}]", "stream")))
    return out


def _snapshot_blocks_before(path, snap, rows):
    """Tensor blocks live before the trace's first event (the snapshot's trace is a ring buffer,
    and recording may start mid-run): those the trace frees first without allocating them, live
    from the start until that free; and those active at dump time that the trace never mentions,
    live throughout. Returns [(device, address, size, stream)]."""
    first = {}  # (device, addr) -> the action of its first event
    out = []
    for _t, dev, _i, act, e, where in rows:
        if act == "oom":
            continue
        key = (dev, _int(e.get("addr"), path, where, "addr"))
        if key not in first:
            first[key] = act
            if act == "free_completed":
                out.append((dev, key[1], _int(e.get("size", 0) or 0, path, where, "size"),
                            _int(e.get("stream", 0) or 0, path, where, "stream")))
    for j, seg in enumerate(snap.get("segments") or []):
        if not isinstance(seg, dict):
            raise GaError(f"{path}: segments[{j}] is not a dict; the snapshot is damaged")
        dev = _device(seg.get("device", 0), path, f"segments[{j}]", "device")
        stream = _int(seg.get("stream", 0) or 0, path, f"segments[{j}]", "stream")
        for k, b in enumerate(seg.get("blocks") or []):
            where = f"segments[{j}].blocks[{k}]"
            if not isinstance(b, dict):
                raise GaError(f"{path}: {where} is not a dict; the snapshot is damaged")
            state = b.get("state")  # str() of an int of 4,301+ digits raised
            if not (isinstance(state, str) and state.startswith("active")) or (
                    b.get("address") is None):
                continue
            addr = _int(b.get("address"), path, where, "address")
            size = _int(b.get("size"), path, where, "size")
            if (dev, addr) not in first and size > 0:
                out.append((dev, addr, size, stream))
    return [b for b in out if b[2] > 0]


TENSOR_ACTIONS = {"alloc": tf.ALLOC, "free_completed": tf.FREE}
SEGMENT_ACTIONS = {"segment_alloc": tf.ALLOC, "segment_free": tf.FREE}


def import_snapshot(path, level="tensor", close=False):
    """PyTorch snapshot -> trace. level tensor: alloc/free_completed (the caching allocator's
    blocks); level segment: segment_alloc/segment_free (its cudaMalloc/cudaFree calls). "oom"
    entries become failed allocations at both levels."""
    if level not in ("tensor", "segment"):
        raise GaError(f"unknown snapshot level {level!r}: use tensor or segment")
    snap = _load_snapshot(path)
    actions = TENSOR_ACTIONS if level == "tensor" else SEGMENT_ACTIONS
    rows, ignored = [], {}
    for dev, i, e in _snapshot_events(path, snap):
        act = e["action"]
        if act not in actions and act != "oom":
            ignored[act] = ignored.get(act, 0) + 1
            continue
        where = f"device_traces[{dev}][{i}] ({act})"
        t = _int(e.get("time_us", 0) or 0, path, where, "time_us")
        rows.append((t, dev, i, act, e, where))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    t0 = rows[0][0] if rows else 0
    p = Pairer()
    if level == "segment":
        pre = _snapshot_segments_before(path, snap, {(r[1], _int(r[4].get("addr"), path, r[5],
                                                                   "addr"))
                                                     for r in rows if r[3] == "segment_alloc"})
        for dev, addr, size, stream in pre:
            p.alloc(0, dev, addr, size, stream)
        p.counts["segments_live_before_trace"] = len(pre)
    else:
        pre = _snapshot_blocks_before(path, snap, rows)
        for dev, addr, size, stream in pre:
            p.alloc(0, dev, addr, size, stream)
        p.counts["blocks_live_before_trace"] = len(pre)
        p.counts["bytes_live_before_trace"] = sum(b[2] for b in pre)
    for t, dev, _i, act, e, where in rows:
        tns = _span((t - t0) * 1000, path, where, f"time_us {t} (from the first event's {t0})")
        stream = _int(e.get("stream", 0) or 0, path, where, "stream")
        size = _int(e.get("size", 0) or 0, path, where, "size")
        if act == "oom":
            p.failed(tns, dev, size, stream)
            continue
        addr = _int(e.get("addr"), path, where, "addr")
        if actions[act] == tf.ALLOC:
            if size <= 0:
                raise GaError(f"{path}: {where}: allocation of {size} bytes; the snapshot is "
                              "damaged")
            p.alloc(tns, dev, addr, size, stream)
        else:
            p.free(tns, dev, addr, stream)
    t_end = (rows[-1][0] - t0) * 1000 if rows else 0
    trace, counts = p.finish(close, t_end, t0 * 1000)
    for act, n in sorted(ignored.items()):
        counts[f"ignored_{act if len(act) <= 60 else _shown(act)}"] = n
    mapped = ignored.get("segment_map", 0) + ignored.get("segment_unmap", 0)
    if level == "segment" and mapped:  # was silent (an outside check)
        print(f"gpuarena: {path}: {mapped:,} segment_map/segment_unmap events: PyTorch ran with "
              "expandable_segments and mapped that memory itself (cuMemCreate + cuMemMap, which "
              "gpuarena passes through), so the segment level leaves it out; --level tensor "
              "replays every tensor", file=sys.stderr)
    return trace, counts


# ---------------------------------------------------------------- Kineto / Chrome trace JSON

def _json_int(text):
    """A JSON integer; int() of more than 4,300 digits refused with Python's advice to raise its
    limit (helper-60 F4). Such a number fits no trace field; a long one in a field never read
    (up to 4,300 digits) still loads, as before."""
    n = len(text.lstrip("-").lstrip("0"))
    if n > 4300:
        raise ValueError(f"a number of {n:,} digits: more than any field of a trace holds "
                         "(2^64 - 1)")
    return int(text)


def _load_json(path, data):
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise GaError(f"{path}: damaged gzip data ({e}); re-export the trace") from None
    try:
        return json.loads(data, parse_int=_json_int)
    except RecursionError:  # said "report it as a gpuarena bug" (an outside check)
        raise GaError(f"{path}: JSON nested deeper than {sys.getrecursionlimit():,} levels, where "
                      "a Kineto trace's events lie 3 deep: not a Kineto trace, or a damaged "
                      "one; re-export it") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise GaError(f"{path}: not valid JSON ({e}); a Kineto trace is the .json(.gz) that "
                      "torch.profiler writes with profile_memory=True") from None


def _kineto_rows(path, doc):
    """Kineto writes {"traceEvents": [event objects]}; Chrome's JSON Array Format, a bare list of
    event objects, is read too. Anything else in place of an event means it is not a trace."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise GaError(f"{path}: no 'traceEvents' list; not a Chrome/Kineto trace")
    rows, other_devices = [], 0
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            where = f"traceEvents[{i}]" if isinstance(doc, dict) else f"item {i} of the list"
            raise GaError(f"{path}: {where} is {json.dumps(e)[:40]}, not an event "
                          "object; not a Kineto trace (torch.profiler writes {\"traceEvents\": "
                          "[{...}, ...]} with profile_memory=True)")
        if e.get("name") != "[memory]":
            continue
        args = e.get("args")
        where = f"traceEvents[{i}]"
        if not isinstance(args, dict):
            raise GaError(f"{path}: {where}: a [memory] event without 'args'")
        if args.get("Device Type") != 1:
            other_devices += 1
            continue
        ts = e.get("ts")
        if isinstance(ts, str):
            ts = _float(ts, path, where)
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not math.isfinite(ts):
            raise GaError(f"{path}: {where}: 'ts' {_shown(ts)} is not a number (microseconds)")
        _span(abs(ts) * 1000, path, where, f"'ts' {ts!r}")
        nbytes = _int(args.get("Bytes"), path, where, "Bytes")
        addr = args.get("Addr")
        addr = None if addr is None else _int(addr, path, where, "Addr")
        dev = _device(args.get("Device Id", 0), path, where, "Device Id")
        total = args.get("Total Allocated")
        total = None if total is None else _int(total, path, where, "Total Allocated")
        rows.append((ts, i, dev, addr, nbytes, e.get("tid", 0), total))
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows, other_devices


def _float(text, path, where):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise GaError(f"{path}: {where}: {_shown(text)} is not a finite number")
    return value


def _tid(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _kineto_before(rows):
    """Bytes each device held before the profile began: PyTorch's "Total Allocated" after each
    event less the sum of the events' Bytes so far, its smallest value over the device's events
    (a profile starts mid-run; what was allocated before is live throughout it). {device: bytes}"""
    running, before = {}, {}
    for _ts, _i, dev, _addr, nbytes, _tid, total in rows:
        running[dev] = running.get(dev, 0) + nbytes
        if total is not None:
            gap = total - running[dev]
            before[dev] = gap if dev not in before else min(before[dev], gap)
    return {dev: b for dev, b in before.items() if b > 0}


def import_kineto(path, close=False):
    """Kineto trace -> trace. GPU "[memory]" events, Bytes > 0 alloc, < 0 free, paired by Addr;
    events with no Addr pair a free with the most recent live block of the same size. What a
    device held before the profile began ("Total Allocated" says) is one block live throughout."""
    rows, other = _kineto_rows(path, _load_json(path, _read_bytes(path)))
    t0 = rows[0][0] if rows else 0
    p = Pairer()
    before = _kineto_before(rows)
    for n, (dev, nbytes) in enumerate(sorted(before.items())):
        p.alloc(0, dev, (1 << 62) + n, nbytes)  # a key no real pointer or anon key uses
    if before:
        p.counts["bytes_live_before_trace"] = sum(before.values())
    by_size = {}  # (device, size) -> keys of address-less live blocks, newest last
    anon = 1 << 63  # keys for address-less blocks, far from any real pointer
    zero = 0
    for ts, i, dev, addr, nbytes, tid, _total in rows:
        tns = round(_span((ts - t0) * 1000, path, f"traceEvents[{i}]",
                               f"'ts' {ts!r} (from the first event's {t0!r})"))
        if nbytes == 0:
            zero += 1
        elif nbytes > 0:
            if addr is None:
                anon += 1
                by_size.setdefault((dev, nbytes), []).append(anon)
                addr = anon
            p.alloc(tns, dev, addr, nbytes, thread=_tid(tid))
        elif addr is not None:
            p.free(tns, dev, addr, thread=_tid(tid))
        else:
            keys = by_size.get((dev, -nbytes))
            if keys:
                p.free(tns, dev, keys.pop(), thread=_tid(tid))
            else:
                p.counts["frees_without_alloc_dropped"] += 1
    t_end = round((rows[-1][0] - t0) * 1000) if rows else 0
    trace, counts = p.finish(close, t_end, round(t0 * 1000))
    counts["gpu_memory_events"] = len(rows)
    counts["non_gpu_memory_events_ignored"] = other
    if zero:
        counts["zero_byte_events_ignored"] = zero
    return trace, counts


# ---------------------------------------------------------------- CSV formats

def _csv_rows(path, expected, raw=False):
    """Rows of a CSV whose header must be exactly `expected` (case and spaces ignored). With raw,
    quotes are plain characters and cells keep their blanks (as gpuarena-replay reads a CSV)."""
    data = _read_bytes(path)
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
                          f"header {','.join(expected)}")
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
        if bid < 0 or lo < 0 or size <= 0:
            raise GaError(f"{path}: {where}: id, lower must be >= 0 and size > 0")
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
        stream = _hex_or_int(stream, path, where, "Stream")
        tid = _hex_or_int(thread, path, where, "Thread") if thread else 0
        act = action.strip().lower().replace("_", " ")
        if act == "allocate":
            if size <= 0:
                raise GaError(f"{path}: {where}: allocate of {size} bytes; Size must be > 0")
        elif act not in ("free", "allocate failure"):
            raise GaError(f"{path}: {where}: Action {_shown(action)} is not allocate, free or "
                          "allocate failure")
        key = _hex_or_int(ptr, path, where, "Pointer") if act != "allocate failure" else 0
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


# ---------------------------------------------------------------- detection and dispatch

def check_regular(path):
    """GaError unless path is a regular file (or missing: the reader says so). An input is read
    more than once (its first bytes tell the format, then it is read whole, here or by the
    replay tool), so a FIFO lost its first bytes or blocked for ever with no writer, and a
    device such as /dev/zero was read without end."""
    if not path:  # "cannot read : No such file or directory" (an outside check)
        raise UsageError("the input file name is empty (a \"$VAR\" that is unset?): give a "
                         "trace or record file")
    try:
        st = os.stat(path)
    except OSError:
        if path == "-":  # "cannot read -: No such file or directory" said nothing of why
            raise GaError("- (standard input) is not read: an input is read more than once; "
                          "save it to a file first, e.g. cat ... > trace.gatrace") from None
        return
    if stat.S_ISREG(st.st_mode):
        return
    what = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
            else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device")
    raise GaError(f"{path}: {what}, not a regular file; give a trace or record file (save a "
                  "stream to a file first, e.g. cat ... > trace.gatrace)")


def _read_head(path, n=4096):
    """The first n bytes of a file: detection never reads more, whatever the file's size."""
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError as e:
        raise GaError(f"cannot read {path}: {e.strerror}") from None


def detect(path):
    """Guesses the format of a file from its first 4 KiB; raises GaError when nothing fits."""
    check_regular(path)
    head = _read_head(path)
    if not head:  # helper-67 F6: "name the format" was no help for a recording that never began
        raise GaError(f"{path} is empty (0 bytes): a trace of a process that ended before its "
                      "first allocation (or was killed then), or not a trace at all; record "
                      "again")
    if tf.is_trace_header(head):
        return "trace"
    if head[:2] == b"\x1f\x8b":
        _gzip_of_json(path)
        return "kineto"
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:
        return "pytorch-snapshot"
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped[:1] in (b"{", b"["):
        return "kineto"
    first = stripped.split(b"\n", 1)[0].decode("utf-8", "replace")
    cols = [c.strip().lower() for c in first.split(",")]
    if cols == ["id", "lower", "upper", "size"]:
        return "lifetimes"
    if cols == [c.lower() for c in RMM_HEADER]:
        return "rmm"
    if "\r" in first.rstrip("\r") and first.split("\r")[0].strip().lower() in (
            "id,lower,upper,size", ",".join(RMM_HEADER).lower()):
        raise GaError(_lone_cr(path, "line 1"))  # said "cannot tell its format"
    raise GaError(f"{path}: cannot tell its format (not a gpuarena trace, gzip/JSON Kineto trace, "
                  "pickle snapshot, or a CSV with header id,lower,upper,size or "
                  "Thread,Time,Action,Pointer,Size,Stream); name the format: "
                  f"gpuarena import {{{'|'.join(FORMATS[:-1])}}} FILE -o OUT")


def _gzip_of_json(path):
    """GaError when a gzip file holds something other than JSON: only a Kineto trace is read
    compressed, and a gzipped gpuarena trace, CSV or snapshot was "not valid JSON (... can't
    decode byte 0xc0 ...); a Kineto trace is ..." (helper-82). Reads the first 4 KiB it holds."""
    import gzip
    import zlib
    try:
        with gzip.open(path, "rb") as f:
            inner = f.read(4096)
    except (OSError, EOFError, zlib.error):
        return  # a damaged gzip: the Kineto reader says so
    if inner.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[", b""):
        return
    what = ("a gpuarena trace" if tf.is_trace_header(inner) else
            "a pickle (a PyTorch snapshot?)" if inner[:1] == b"\x80" else
            "something other than JSON (a CSV?)")
    raise GaError(f"{path}: a gzip file holding {what}; only a Kineto JSON trace is read "
                  f"compressed: decompress it first (gunzip -k {path}) and give the file inside")


def _memory_kind(path, fmt):
    """How the reader of fmt holds the file, for memory.check_fits."""
    if fmt == "kineto" and _read_head(path, 2) == b"\x1f\x8b":
        return "kineto-gz"
    return fmt


def check_applies(path, fmt, level="tensor", time_unit="s"):
    """UsageError when --level or --time-unit asks for something the input's format does not have:
    the option would be ignored and the user would read figures of what they did not ask for. The
    default values (tensor, s) mean the same for every format, so they pass."""
    if level != "tensor" and fmt != "pytorch-snapshot":
        raise UsageError(f"--level {level} applies to PyTorch snapshots only, and {path} is a "
                         f"{fmt} file: drop --level (or give a snapshot)")
    if time_unit != "s" and fmt != "rmm":
        raise UsageError(f"--time-unit {time_unit} applies to RMM logs only, and {path} is a "
                         f"{fmt} file: drop --time-unit (or give an RMM log)")


def check_named_trace(path, fmt):
    """GaError when --format trace names a file that is not a gpuarena trace: the reader's own
    advice (convert it with gpuarena import) does not fit replay and report, which import by
    themselves (helper-67 F17.6)."""
    if fmt == "trace" and not tf.is_trace_header(_read_head(path)):
        raise GaError(f"{path}: --format trace, but it is not a gpuarena trace; leave --format "
                      "out (the format is detected and the file imported), or name its format")


def _looks_like(path, fmt):
    """What a file named in the wrong format looks like: a snapshot given as kineto said only
    "not valid JSON ('utf-8' codec can't decode byte 0x80 ...)" (an outside check)."""
    try:
        found = detect(path)
    except GaError:
        return ""
    if found == fmt:
        return ""
    if found == "trace":
        return "; it looks like a gpuarena trace: name auto as the format (or leave it out)"
    what = {"pytorch-snapshot": "a PyTorch memory snapshot", "kineto": "a Kineto trace",
            "lifetimes": "a buffer-lifetimes CSV", "rmm": "an RMM log"}[found]
    return f"; it looks like {what}: name {found} or auto as the format"


def load_any(path, fmt="auto", level="tensor", close=False, time_unit="s"):
    """Any supported input -> (Trace, counts, format actually used). A file too large for the
    memory this process may use is refused before it is read."""
    check_regular(path)
    named = fmt != "auto"
    if fmt == "auto":
        fmt = detect(path)
    check_named_trace(path, fmt)
    check_applies(path, fmt, level, time_unit)
    if fmt in memory.FACTORS:
        memory.check_fits(path, _memory_kind(path, fmt))
    try:
        return _load(path, fmt, level, close, time_unit)
    except UsageError:
        raise
    except GaError as e:
        raise GaError(f"{e}{_looks_like(path, fmt) if named else ''}") from None
    except (TypeError, ValueError, OverflowError, KeyError, AttributeError, IndexError,
            RecursionError) as e:
        # Each known defect has its own message above; this net keeps an unforeseen one from
        # reaching the user as a traceback.
        raise GaError(f"{path}: malformed {fmt} input ({type(e).__name__}: {e}); check the "
                      "file, and report it as a gpuarena bug if the file is valid") from None


def _load(path, fmt, level, close, time_unit):
    if fmt == "trace":
        trace = tf.read(path)
        counts = {"events": len(trace.events)}
        if trace.truncated_bytes:
            counts["truncated_bytes_ignored"] = trace.truncated_bytes
        return trace, counts, fmt
    if fmt == "pytorch-snapshot":
        trace, counts = import_snapshot(path, level, close)
    elif fmt == "kineto":
        trace, counts = import_kineto(path, close)
    elif fmt == "lifetimes":
        trace, counts = import_lifetimes(path, close)
    elif fmt == "rmm":
        trace, counts = import_rmm(path, close, time_unit)
    else:
        raise GaError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    return trace, counts, fmt
