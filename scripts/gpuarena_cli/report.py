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
import tempfile

from . import GaError
from . import paths
from . import plot
from . import tracefile as tf

MAX_SLICES = 20000  # above this the viewer slows to a crawl and slices are unreadable anyway


def in_use_series(trace):
    """{device: [(time_ns, bytes in use)]}, one point per change (same-time changes merged)."""
    series, level, live = {}, {}, {}
    for ev in trace.events:
        kind, dev = ev[tf.T_KIND], ev[tf.T_DEVICE]
        key = (dev, ev[tf.T_ADDR])
        if kind == tf.ALLOC:
            # An address allocated again while live: its earlier block is gone, as the replay
            # counts it (reused_addrs), not live for ever.
            level[dev] = level.get(dev, 0) - live.get(key, 0) + ev[tf.T_SIZE]
            live[key] = ev[tf.T_SIZE]
        elif kind == tf.FREE and key in live:
            level[dev] -= live.pop(key)
        else:
            continue
        pts = series.setdefault(dev, [])
        if pts and pts[-1][0] == ev[tf.T_TIME]:
            pts[-1] = (ev[tf.T_TIME], level[dev])
        else:
            pts.append((ev[tf.T_TIME], level[dev]))
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


def _counter(name, dev, t_ns, value):
    return {"name": name, "ph": "C", "ts": t_ns / 1000.0, "pid": dev, "tid": 0,
            "args": {name: value}}


def chrome_trace(trace, reserved=None, title="gpuarena"):
    """The Chrome trace-event document. reserved: {device: [(time_ns, bytes)]} or None."""
    events = []
    series = in_use_series(trace)
    devices = sorted(set(series) | set(reserved or {}))
    for dev in devices:
        events.append({"name": "process_name", "ph": "M", "pid": dev,
                       "args": {"name": f"{title} device {dev}"}})
        events += [_counter("in_use", dev, t, v) for t, v in series.get(dev, [])]
        events += [_counter("reserved", dev, t, v) for t, v in (reserved or {}).get(dev, [])]
    slices = allocation_slices(trace)
    end = trace.events[-1][tf.T_TIME] if trace.events else 0
    if len(slices) <= MAX_SLICES:
        for i, (dev, start, stop, addr, size) in enumerate(slices):
            common = {"name": f"{size} B", "cat": "allocation", "id": i, "pid": dev, "tid": 1}
            events.append(dict(common, ph="b", ts=start / 1000.0,
                               args={"addr": hex(addr), "size": size}))
            events.append(dict(common, ph="e", ts=(end if stop is None else stop) / 1000.0))
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"generator": "gpuarena report", "allocations": len(slices),
                          "slices_included": len(slices) <= MAX_SLICES,
                          "reserved_included": reserved is not None}}


def write_json(path, doc):
    tf.write_atomic(path, json.dumps(doc, separators=(",", ":")).encode())


def write_png(path, trace, reserved=None):
    """Draws the timeline (plot.py); returns False (nothing written) without matplotlib."""
    lines = [[f"in use, device {dev}", pts] for dev, pts in sorted(in_use_series(trace).items())]
    lines += [[f"reserved, device {dev}", pts] for dev, pts in sorted((reserved or {}).items())]
    return plot.draw("timeline", path, {"lines": lines})


def read_timeline(path):
    """([(time_ns, reserved)] with same-time points merged to the last, max reserved over every
    point) from the CSV gpuarena-replay --timeline writes."""
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
            if pts and pts[-1][0] == t:
                pts[-1] = (t, res)
            else:
                pts.append((t, res))
    return pts, peak


def reserved_series(trace, mode):
    """({device: [(time_ns, reserved bytes)]}, None), or (None, why not).

    The replay tool replays the trace in `mode` (arena: one region of its default size, twice the
    peak in use; grow: regions on demand; vmm: granules mapped where allocations lie; platform: one
    reservation per allocation) and writes
    reserved bytes after every event; its maximum is checked against the tool's peak_reserved
    before it is drawn."""
    from . import replay
    if not trace.events:
        return None, "the trace is empty"
    if len({ev[tf.T_DEVICE] for ev in trace.events}) > 1:
        return None, "the replay tool models one device and this trace has several"
    if paths.replay_tool(required=False) is None:
        return None, "the replay tool gpuarena-replay is not built (run `make`)"
    with tempfile.TemporaryDirectory(prefix="gpuarena-") as tmp:
        path = os.path.join(tmp, "t.gatrace")
        tf.write(path, trace)
        csv = os.path.join(tmp, "timeline.csv")
        doc = replay.run_tool(path, mode, find_min=False, timeline=csv)
        pts, peak = read_timeline(csv)
    if not pts:
        return None, "no allocation or free in the trace was replayed"
    tool_peak = dict(replay.mode_results(doc)).get(mode, {}).get("peak_reserved")
    if peak != tool_peak:
        return None, (f"the {mode} timeline peaks at {peak} reserved bytes but the replay "
                      f"tool says {tool_peak}; not drawing a wrong curve")
    return {trace.events[0][tf.T_DEVICE]: pts}, None
