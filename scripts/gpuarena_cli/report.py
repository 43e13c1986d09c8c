"""`gpuarena report`: a timeline of bytes in use (and reserved) as Chrome trace-event JSON and PNG.

In-use over time follows from the trace alone (alloc adds, free subtracts), so it is computed here,
in bytes as the program requested them (the shim's and the replay's "in use" round to 512).
Reserved depends on the allocator's decisions event by event (grow mode's regions above all), so it
comes from the real allocator: the replay tool's per-event timeline (gpuarena-replay --timeline),
the same code and figures as `gpuarena replay`. The JSON is the Chrome
trace-event format (ui.perfetto.dev and chrome://tracing open it): counter events ("ph": "C") named
in_use and reserved, one process per device, and each allocation as an async slice (allocations
overlap without nesting, which complete "X" slices cannot express) when the trace is small enough
to stay readable. The PNG needs matplotlib (plot.py) and is skipped, with a message, without it.
"""

import json
import os
import sys

from . import GaError
from . import ending
from . import paths
from . import plot
from . import tracefile as tf

MAX_SLICES = 20000  # above this the viewer slows to a crawl and slices are unreadable anyway


# A block of this size or more is no device's and no replay's: the replay tool's address space
# ends at 2^62 bytes, so it counts such a block a failed allocation (a negative size written
# unsigned, say), and the curve does not draw it live: it drew 2.77e19 bytes in use, past 2^64,
# beside a replay that said 2 failed allocations (an outside test, 2026-12-06).
UNPLACEABLE = 1 << 62


def _put(pts, t, v):
    """Appends level v at time t to a curve. Changes at one time stamp keep two points at most:
    the highest level reached at t and the last, [(t, high), (t, last)], one point when they are
    equal. Merged to the last alone, a peak reached and left within one stamp (an allocation and
    its free in the same microsecond of an imported trace) was not drawn, and the curve's peak
    read lower than the replay's peak_in_use."""
    if not pts or pts[-1][0] != t:
        pts.append((t, v))
        return
    high = pts.pop()[1]
    if pts and pts[-1][0] == t:
        high = max(high, pts.pop()[1])
    high = max(high, v)
    pts.append((t, high))
    if v < high:
        pts.append((t, v))


def in_use_series(trace):
    """{device: [(time_ns, bytes in use)]}, one point per change (same-time changes kept as their
    highest and last level, _put); blocks of UNPLACEABLE bytes or more are left out, as the replay
    fails them."""
    series, level, live = {}, {}, {}
    for ev in trace.events:
        kind, dev = ev[tf.T_KIND], ev[tf.T_DEVICE]
        key = (dev, ev[tf.T_ADDR])
        if kind == tf.ALLOC and ev[tf.T_SIZE] >= UNPLACEABLE:
            if key in live:  # its address's earlier block is gone all the same
                level[dev] -= live.pop(key)
            else:
                continue
        elif kind == tf.ALLOC:
            # An address allocated again while live: its earlier block is gone, as the replay
            # counts it (reused_addrs), not live for ever.
            level[dev] = level.get(dev, 0) - live.get(key, 0) + ev[tf.T_SIZE]
            live[key] = ev[tf.T_SIZE]
        elif kind == tf.FREE and key in live:
            level[dev] -= live.pop(key)
        else:
            continue
        _put(series.setdefault(dev, []), ev[tf.T_TIME], level[dev])
    return series


def allocation_slices(trace):
    """[(device, start_ns, end_ns or None, addr, size)] for every allocation."""
    open_, out = {}, []
    for ev in trace.events:
        key = (ev[tf.T_DEVICE], ev[tf.T_ADDR])
        if ev[tf.T_KIND] == tf.ALLOC:
            if key in open_:  # reused while live: the earlier block ends here
                out[open_[key]][2] = ev[tf.T_TIME]
            open_[key] = len(out)
            out.append([ev[tf.T_DEVICE], ev[tf.T_TIME], None, ev[tf.T_ADDR], ev[tf.T_SIZE]])
        elif ev[tf.T_KIND] == tf.FREE and key in open_:
            out[open_.pop(key)][2] = ev[tf.T_TIME]
    return out


# A lifetimes CSV's times are logical steps (its lower and upper), imported as nanoseconds: the
# viewer showed step 12 as 12 ns. In the JSON a step is 1 s of the viewer's clock (ts is in
# microseconds), so its ruler reads steps as seconds, and the names and otherData say so. A CSV
# whose steps run past what a viewer holds at 1 s a step (Perfetto keeps ts as int64 ns: past
# 2^53 us it wrapped or lost them; steps up to 10^13 were written as 10^19 us until 2026-12-07,
# an outside check) shows each step as 1 ms, 1 us or 1 ns, the largest that fits, said as 1 s is.
STEP_US = 1_000_000
STEP_UNITS = ((1_000_000, "1 s"), (1000, "1 ms"), (1, "1 us"), (0, "1 ns"))  # 0: t / 1000 us
TS_MAX_US = 2 ** 53  # exact in a double, and under int64 nanoseconds


def step_unit(trace):
    """(us a step, its name) for a lifetimes CSV's trace: 1 s a step unless its last step would
    pass TS_MAX_US; past even 1 ns a step, 1 ns (steps_fit says they do not fit)."""
    last = max((ev[tf.T_TIME] for ev in trace.events), default=0)
    for us, said in STEP_UNITS:
        if (last * us if us else last // 1000) <= TS_MAX_US:
            return us, said
    return STEP_UNITS[-1]


def steps_said(unit_name):
    return f"time: the CSV's logical steps, each shown as {unit_name}"


STEPS_SAID = steps_said("1 s")


def _ts(t, logical):
    """The JSON's ts (microseconds) of a trace time: ns, or a lifetimes CSV's step (logical: the
    step's (us, name), from step_unit)."""
    if logical and logical[0]:
        return t * logical[0]
    return t / 1000.0


def _counter(name, dev, t_ns, value, logical=False):
    # Formatted as json.dumps(..., separators=(",", ":")) would write the same dict, without
    # building one: a long trace has millions of points, and the dicts alone took gigabytes.
    return (f'{{"name":"{name}","ph":"C","ts":{_ts(t_ns, logical)!r},"pid":{dev},"tid":0,'
            f'"args":{{"{name}":{value}}}}}')


def _event_strings(trace, reserved, title, series, mode=None, name=None, logical=False,
                   setting=""):
    """Every trace event of the document as its compact JSON text, in document order; then,
    as the last item, the otherData dict. mode: the replay the reserved track comes from, said
    in each device's name and in otherData with the input's name (two reports of one trace in
    two modes could not be told apart: an outside check, helper-109). logical: the trace's times
    are a lifetimes CSV's steps (STEP_US). setting: the replay's cap and fraction, said beside
    the mode ("GPUARENA_MEM_FRACTION=0.75+, cap 1073741824 bytes")."""
    devices = sorted(set(series) | set(reserved or {}))
    said = f", reserved in {mode} mode" if mode and reserved is not None else ""
    said += f" ({setting})" if said and setting else ""
    said += f" ({steps_said(logical[1])})" if logical else ""
    for dev in devices:
        yield json.dumps({"name": "process_name", "ph": "M", "pid": dev,
                          "args": {"name": f"{title} device {dev}{said}"}},
                         separators=(",", ":"))
        for t, v in series.get(dev, []):
            yield _counter("in_use", dev, t, v, logical)
        for t, v in (reserved or {}).get(dev, []):
            yield _counter("reserved", dev, t, v, logical)
    allocs = sum(1 for ev in trace.events if ev[tf.T_KIND] == tf.ALLOC)  # one slice each
    end = trace.events[-1][tf.T_TIME] if trace.events else 0
    if allocs <= MAX_SLICES:
        for i, (dev, start, stop, addr, size) in enumerate(allocation_slices(trace)):
            common = {"name": f"{size} B", "cat": "allocation", "id": i, "pid": dev, "tid": 1}
            args = {"addr": hex(addr), "size": size}
            if logical:  # the CSV's own numbers beside the viewer's seconds
                args.update(lower=start, upper=end if stop is None else stop)
            yield json.dumps(dict(common, ph="b", ts=_ts(start, logical), args=args),
                             separators=(",", ":"))
            yield json.dumps(dict(common, ph="e", ts=_ts(end if stop is None else stop, logical)),
                             separators=(",", ":"))
    yield {"generator": "gpuarena report", "trace": name,
           "mode": mode if reserved is not None else None, "allocations": allocs,
           "slices_included": allocs <= MAX_SLICES, "reserved_included": reserved is not None,
           "time_unit": "step" if logical else "ns",
           **({"setting": setting} if setting and reserved is not None else {}),
           **({"time_said": steps_said(logical[1])} if logical else {})}


def write_chrome_trace(path, trace, reserved=None, title="gpuarena", series=None, mode=None,
                       name=None, logical=False, setting=""):
    """Writes the Chrome trace-event document (reserved: {device: [(time_ns, bytes)]} or None;
    series: in_use_series(trace) if already computed) to path, streamed in pieces and renamed
    into place as write_json does: a million events take seconds and no more memory than the
    trace itself. logical: a lifetimes CSV's steps, each 1 s of the viewer's clock."""
    series = in_use_series(trace) if series is None else series
    unit = "ms" if logical else "ns"
    logical = step_unit(trace) if logical else None
    last = max((ev[tf.T_TIME] for ev in trace.events), default=0) if logical else 0
    if last // 1000 > TS_MAX_US:
        print(f"gpuarena: {name or path}: its last step, {last:,}, is past what a trace viewer "
              f"holds even at 1 ns a step ({TS_MAX_US * 1000:,}): the JSON's times past it are "
              "not exact; renumber the CSV's lower and upper from 0 to draw them", file=sys.stderr)

    def fill(f):
        f.write(b'{"traceEvents":[')
        batch, sep = [], ""
        for item in _event_strings(trace, reserved, title, series, mode, name, logical,
                                   setting):
            if isinstance(item, dict):
                other = item
                break
            batch.append(sep + item)
            sep = ","
            if len(batch) >= 65536:
                f.write("".join(batch).encode())
                batch = []
        f.write("".join(batch).encode())
        f.write((f'],"displayTimeUnit":"{unit}","otherData":'
                 + json.dumps(other, separators=(",", ":")) + "}").encode())
    tf.write_filled(path, fill)
    allocs = sum(1 for ev in trace.events if ev[tf.T_KIND] == tf.ALLOC)
    if allocs > MAX_SLICES:
        # Said only in otherData until 2026-12-07 (an outside check, helper-125): a user looked
        # in the viewer for the allocations' slices the README describes and found none.
        print(f"gpuarena: {name or path}: {allocs:,} allocations, more than {MAX_SLICES:,}: "
              "the JSON holds the in_use and reserved counter tracks without a slice per "
              "allocation (that many make the viewer crawl); to see the slices, report a part "
              "of the run", file=sys.stderr)


def chrome_trace(trace, reserved=None, title="gpuarena", mode=None, name=None, logical=False):
    """The Chrome trace-event document as a dict (what write_chrome_trace writes)."""
    items = list(_event_strings(trace, reserved, title, in_use_series(trace), mode, name,
                                step_unit(trace) if logical else None))
    return {"traceEvents": [json.loads(x) for x in items[:-1]],
            "displayTimeUnit": "ms" if logical else "ns", "otherData": items[-1]}


PNG_BUCKETS = 4000  # a 10-inch figure is about 1,000-1,500 pixels wide


def downsample_steps(pts, buckets=PNG_BUCKETS):
    """At most 4 points per time bucket of a step series: each bucket's first, lowest, highest
    and last, in time order, so the drawn envelope (every peak and trough) is the full series'
    at any width the figure has. Short series are returned as they are."""
    if len(pts) <= 4 * buckets:
        return pts
    t0, span = pts[0][0], pts[-1][0] - pts[0][0] + 1
    out, cur, group = [], None, []

    def flush():
        if group:
            lo = min(range(len(group)), key=lambda k: group[k][1])
            hi = max(range(len(group)), key=lambda k: group[k][1])
            for k in sorted({0, lo, hi, len(group) - 1}):
                out.append(group[k])
    for p in pts:
        b = (p[0] - t0) * buckets // span
        if b != cur:
            flush()
            cur, group = b, []
        group.append(p)
    flush()
    return out


def write_png(path, trace, reserved=None, series=None, mode=None, name=None, logical=False,
              setting=""):
    """Draws the timeline (plot.py), each series downsampled to its envelope; returns False
    (nothing written) without matplotlib. mode and name (the input) go in the title, the
    legend and the PNG's Title text chunk, as in write_chrome_trace."""
    series = in_use_series(trace) if series is None else series
    how = f" ({mode} mode{', ' + setting if setting else ''})" if mode else ""
    lines = [[f"in use, device {dev}", downsample_steps(pts)] for dev, pts in sorted(series.items())]
    lines += [[f"reserved{how}, device {dev}", downsample_steps(pts)]
              for dev, pts in sorted((reserved or {}).items())]
    title = "bytes in use" + (f", and reserved in {mode} mode" if mode and reserved else "") \
        + (f" ({setting})" if mode and reserved and setting else "")
    if name:  # a file name's bytes that are not UTF-8 (surrogateescape) cannot be drawn
        name = os.fsencode(name).decode("utf-8", "replace")
        title = f"{name}: {title}"
    data = {"lines": lines, "title": title}
    if logical:  # a lifetimes CSV's steps, imported as ns: "time (s)" ran to about 1e-6 s
        data.update(xlabel="logical time (the CSV's lower and upper)", xscale=1)
    return plot.draw("timeline", path, data)


def read_timeline(path):
    """([(time_ns, reserved)] with same-time points kept as their highest and last (_put), max
    reserved over every point) from the CSV gpuarena-replay --timeline writes."""
    pts, peak = [], 0
    with open(path, encoding="ascii") as f:
        if f.readline().strip() != "time_ns,in_use,reserved":
            raise GaError(f"{path}: not a gpuarena-replay timeline; rebuild the tool (`make`)")
        for n, line in enumerate(f, 2):
            try:
                t, _use, res = (int(x) for x in line.split(","))
            except ValueError:
                raise GaError(f"gpuarena-replay timeline line {n} is malformed: {line.strip()!r}"
                              "; rebuild the tool (`make`)") from None
            peak = max(peak, res)
            _put(pts, t, res)
    return pts, peak


def reserved_series(trace, mode, vmm_keep=None, name=None, failures=None, limit=None,
                    fraction=None, granularity=None):
    """({device: [(time_ns, reserved bytes)]}, None), or (None, why not).

    The replay tool replays the trace in `mode` (arena: one region of its default size, twice the
    peak in use; grow: regions on demand; vmm: granules mapped where allocations lie; platform: one
    reservation per allocation; vmm_keep: its GPUARENA_VMM_KEEP in bytes, None for the default),
    one device at a time (the shim keeps one pool per context; a trace names no context, so a
    device's contexts replay as one pool), and
    writes reserved bytes after every event; its maximum is checked against the tool's
    peak_reserved before it is drawn. name: the user's file, which the tool's messages name
    instead of the temporary it replays (they named a deleted /tmp file: an outside test).
    failures: a list that gets the `gpuarena:` line of each device's replay whose pool checks
    failed (replay.check_failure_messages: a bug in the allocator; `report` said nothing of them,
    the lead, 2026-12-06). limit, fraction: the cap (--limit) and GPUARENA_MEM_FRACTION
    (--fraction) the replay runs under, as `gpuarena replay` takes them."""
    from . import replay
    if not trace.events:
        return None, "the trace is empty"
    if paths.replay_tool(required=False) is None:
        return None, "the replay tool gpuarena-replay is not built (run `make`)"
    # Device -1 on a free marks what the shim could not place on a device (the free of a pointer
    # it does not own, passed to the driver or refused): no pool's event. The replay tool leaves
    # such events out of its device count too; every other number, negative too, is a device.
    devices = sorted({ev[tf.T_DEVICE] for ev in trace.events
                      if not (ev[tf.T_DEVICE] == -1 and ev[tf.T_KIND] == tf.FREE)})
    out = {}
    with ending.temporary_folder() as tmp:
        path = os.path.join(tmp, "t.gatrace")
        tf.write(path, trace)
        for dev in devices:
            csv = os.path.join(tmp, f"timeline{dev}.csv")
            doc = replay.run_tool(path, mode, find_min=False, timeline=csv,
                                  device=dev if len(devices) > 1 else None, vmm_keep=vmm_keep,
                                  name=name, limit=limit, fraction=fraction,
                                  granularity=granularity)
            if failures is not None:
                failures += replay.check_failure_messages(doc, name or path)
            pts, peak = read_timeline(csv)
            if not pts:
                continue
            tool_peak = dict(replay.mode_results(doc)).get(mode, {}).get("peak_reserved")
            if peak != tool_peak:
                return None, (f"the {mode} timeline of device {dev} peaks at {peak} reserved "
                              f"bytes but the replay tool says {tool_peak}; not drawing a wrong "
                              "curve")
            out[dev] = pts
    if not out:
        return None, "no allocation or free in the trace was replayed"
    return out, None
