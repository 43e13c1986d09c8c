"""Importers: foreign allocation records (PyTorch snapshots, Kineto traces, buffer-lifetime CSV,
RMM logs) turned into gpuarena traces, so every allocation pattern replays through one tool.

Each importer returns (Trace, counts): counts is an ordered dict of what was read, kept, paired and
dropped, so the user sees what the conversion lost. Pairing is the common core (Pairer, in
importbase.py with the checks of a field every reader applies): an alloc opens a key, the matching
free closes it; a free of an unknown key is dropped and counted (traces recorded as ring buffers
lose the allocs of their first frees). Every malformed input raises
GaError naming the file, the place and the fix; nothing here writes files (cli does, atomically).
Pickles are loaded with an Unpickler that refuses every global, so a snapshot cannot run code.
This module reads snapshots and Kineto traces, detects formats and dispatches; the CSV formats
(lifetimes, RMM) are read in csvformats.py.
"""

import gzip
import io
import json
import pickle
import math
import os
import stat
import sys
import zlib

from . import GaError, UsageError
from .fmt import shown as _shown
from . import memory
from . import importbase
from . import tracefile as tf
# TIME_UNITS and the CSV importers are named here too, where cli and the tests have found them.
from .csvformats import RMM_HEADER, TIME_UNITS, _lone_cr, import_lifetimes, import_rmm  # noqa: F401
from .importbase import Pairer, _address, _device, _int, _read_bytes, _span, _stream

FORMATS = ("pytorch-snapshot", "kineto", "lifetimes", "rmm", "auto")


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
        addr = _address(seg.get("address"), path, f"segments[{j}]", "address")
        if (dev, addr) not in seen_allocs:
            size = _int(seg.get("total_size"), path, f"segments[{j}]", "total_size")
            out.append((dev, addr, size, _stream(seg.get("stream", 0) or 0, path,
                                                 f"segments[{j}]")))
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
        key = (dev, _address(e.get("addr"), path, where, "addr"))
        if key not in first:
            first[key] = act
            if act == "free_completed":
                out.append((dev, key[1], _int(e.get("size", 0) or 0, path, where, "size"),
                            _stream(e.get("stream", 0) or 0, path, where)))
    for j, seg in enumerate(snap.get("segments") or []):
        if not isinstance(seg, dict):
            raise GaError(f"{path}: segments[{j}] is not a dict; the snapshot is damaged")
        dev = _device(seg.get("device", 0), path, f"segments[{j}]", "device")
        stream = _stream(seg.get("stream", 0) or 0, path, f"segments[{j}]")
        for k, b in enumerate(seg.get("blocks") or []):
            where = f"segments[{j}].blocks[{k}]"
            if not isinstance(b, dict):
                raise GaError(f"{path}: {where} is not a dict; the snapshot is damaged")
            state = b.get("state")  # str() of an int of 4,301+ digits raised
            if not (isinstance(state, str) and state.startswith("active")) or (
                    b.get("address") is None):
                continue
            addr = _address(b.get("address"), path, where, "address")
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
        pre = _snapshot_segments_before(path, snap, {(r[1], _address(r[4].get("addr"), path, r[5],
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
        stream = _stream(e.get("stream", 0) or 0, path, where)
        size = _int(e.get("size", 0) or 0, path, where, "size")
        if act == "oom":
            p.failed(tns, dev, size, stream)
            continue
        addr = _address(e.get("addr"), path, where, "addr")
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
    if not rows and not ignored:
        # Dumped without memory history: only what was live at the dump came in, without a word
        # (an outside check, helper-125).
        what = "segments" if level == "segment" else "blocks"
        print(f"gpuarena: {path}: the snapshot holds no event (its device_traces are empty: "
              f"memory history was not recorded), so only the {len(pre):,} {what} live at the "
              "dump are imported, allocated at its start; call "
              "torch.cuda.memory._record_memory_history() before the allocations to record "
              "and dump the snapshot again", file=sys.stderr)
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
        raise GaError(f"{path}: no 'traceEvents' list; not a Chrome/Kineto trace: give the "
                      "file torch.profiler wrote (prof.export_chrome_trace(PATH) or "
                      "tensorboard_trace_handler, with profile_memory=True), or its .json.gz "
                      "as it is")
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
            raise GaError(f"{path}: {where}: a [memory] event without 'args' (its bytes, "
                          "address and device); the trace is damaged or was edited: export it "
                          "again from torch.profiler with profile_memory=True")
        if args.get("Device Type") != 1:
            other_devices += 1
            continue
        ts = e.get("ts")
        if isinstance(ts, str):
            try:  # text that is no number is said below, with the field and the fix
                ts = float(ts)
            except ValueError:
                pass
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not math.isfinite(ts):
            raise GaError(f"{path}: {where}: 'ts' {_shown(ts)} is not a number (microseconds); "
                          "the trace is damaged or was edited: export it again")
        _span(abs(ts) * 1000, path, where, f"'ts' {ts!r}")
        nbytes = _int(args.get("Bytes"), path, where, "Bytes")
        addr = args.get("Addr")
        addr = None if addr is None else _address(addr, path, where, "Addr")
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


def kineto_hint(counts):
    """What to do about a Kineto trace with no GPU memory event, or "": the profile was taken
    without profile_memory=True (no [memory] event at all), or its memory events are all the
    CPU's. Such a file imported to an empty trace with exit 0, and replay said only "record a
    run that allocates GPU memory" (an outside check, helper-125)."""
    if not counts or counts.get("gpu_memory_events", 1) != 0:
        return ""
    other = counts.get("non_gpu_memory_events_ignored", 0)
    held = (f"its {other:,} memory event{'s are' if other != 1 else ' is'} not a GPU's "
            "(\"Device Type\" other than 1; 0 is the CPU)" if other else
            "it holds no \"[memory]\" event: the profile was taken without memory recording")
    return (f"a Kineto trace with no GPU memory event: {held}; profile the GPU part of the run "
            "with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
            "ProfilerActivity.CUDA], profile_memory=True) and export it again")


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
        raise tf.read_error(path, e) from None


def _old_pickle_snapshot(head):
    """A snapshot pickled with protocol 0 or 1 (a dict re-saved with pickle.dump(..., protocol=0)
    or 1, which start with no PROTO opcode): MARK DICT or EMPTY_DICT, and a snapshot's key among
    the first bytes. `auto` said "cannot tell its format (not ... a pickle snapshot ...)" of them,
    which `import pytorch-snapshot` read (an outside check, helper-125)."""
    return (head[:2] == b"(d" or head[:1] == b"}") and any(
        k in head for k in (b"segments", b"device_traces"))


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
    if _old_pickle_snapshot(head):
        return "pytorch-snapshot"
    enc = importbase.wide_encoding(head)
    if enc:  # UTF-16/32 JSON is read by the Kineto reader (json.loads takes it); a CSV is not
        text = head.decode(enc.lower().replace("-", ""), "ignore").lstrip("\ufeff \t\r\n")
        if text[:1] in ("{", "["):
            return "kineto"
        raise importbase.wide_text_error(path, enc)
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


def close_trace(trace):
    """--close for a gpuarena trace (it was ignored without a word until 2026-12-07, an outside
    check, helper-125): every block live after the last event gets a free at that time, on its
    device, paired by (device, address) as the replay pairs them (a free on device -1 is the
    shim's free of a pointer no pool owned, and frees nothing). The counts to add."""
    live = {}
    for ev in trace.events:
        key = (ev[tf.T_DEVICE], ev[tf.T_ADDR])
        if ev[tf.T_KIND] == tf.ALLOC and ev[tf.T_RESULT] == 0:
            live[key] = ev
        elif ev[tf.T_KIND] == tf.FREE:
            live.pop(key, None)
    end = trace.events[-1][tf.T_TIME] if trace.events else 0
    for (dev, addr), ev in live.items():
        trace.events.append(tf.event(end, addr, ev[tf.T_SIZE], tf.FREE, ev[tf.T_STREAM],
                                     ev[tf.T_THREAD], device=dev))
    return {"live_at_end": len(live), "closed_at_end": len(live), "events": len(trace.events)}


def _load(path, fmt, level, close, time_unit):
    if fmt == "trace":
        trace = tf.read(path)
        counts = {"events": len(trace.events)}
        if trace.truncated_bytes:
            counts["truncated_bytes_ignored"] = trace.truncated_bytes
        if close:
            counts.update(close_trace(trace))
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
