"""Importers against every file in shared/traces, checked against figures this test computes on
its own (a plain walk over the source data), plus synthetic RMM logs (no sample file exists)."""

import csv
import gzip
import json
import os
import pickle
import tempfile
import unittest

import gatest
from gpuarena_cli import GaError
from gpuarena_cli import importers
from gpuarena_cli import tracefile as tf


def consistent(test, trace):
    """Every free closes an open alloc of the same size; time never goes backwards."""
    live, last = {}, 0
    for ev in trace.events:
        key = (ev[tf.T_DEVICE], ev[tf.T_ADDR])
        test.assertGreaterEqual(ev[tf.T_TIME], last)
        last = ev[tf.T_TIME]
        if ev[tf.T_KIND] == tf.ALLOC:
            test.assertNotIn(key, live)
            live[key] = ev[tf.T_SIZE]
        elif ev[tf.T_KIND] == tf.FREE:
            test.assertEqual(live.pop(key), ev[tf.T_SIZE])
    return live


def kinds(trace):
    out = {tf.ALLOC: 0, tf.FREE: 0, tf.ALLOC_FAILED: 0}
    for ev in trace.events:
        out[ev[tf.T_KIND]] += 1
    return out


class PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"{module}.{name}")


class Kineto(unittest.TestCase):
    def test_every_kineto_file(self):
        for path in gatest.traces("kineto"):
            with self.subTest(path=path):
                doc = json.loads(gzip.open(path).read() if path.endswith(".gz")
                                 else open(path, "rb").read())
                mem = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"
                       and e["args"].get("Device Type") == 1]
                mem.sort(key=lambda e: e["ts"])
                live, paired = set(), 0
                for e in mem:
                    key = (e["args"].get("Device Id"), e["args"]["Addr"])
                    if e["args"]["Bytes"] > 0:
                        live.add(key)
                    elif key in live:
                        live.remove(key)
                        paired += 1
                # what each device held before the profile: PyTorch's Total Allocated less the
                # events' bytes so far, at its smallest; one block live throughout
                running, before = {}, {}
                for e in mem:
                    d = e["args"].get("Device Id", 0)
                    running[d] = running.get(d, 0) + e["args"]["Bytes"]
                    if "Total Allocated" in e["args"]:
                        gap = e["args"]["Total Allocated"] - running[d]
                        before[d] = min(before.get(d, gap), gap)
                before = {d: b for d, b in before.items() if b > 0}
                trace, counts = importers.import_kineto(path)
                self.assertEqual(counts["gpu_memory_events"], len(mem))
                self.assertEqual(counts["frees"], paired)
                self.assertEqual(counts["live_at_end"], len(live) + len(before))
                self.assertEqual(counts.get("bytes_live_before_trace", 0), sum(before.values()))
                self.assertEqual(len(trace.events), counts["allocs"] + counts["frees"])
                self.assertEqual(len(consistent(self, trace)), len(before))
                if "hta_ddp" in path:  # the figures the traces README gives
                    self.assertEqual(len(mem), 26770)
                    self.assertEqual(counts["allocs"], counts["frees"] + 1)
                    # Total Allocated runs 4,096,614,400 bytes above the events' sum throughout
                    self.assertEqual(before, {1: 4096614400})

    def test_addressless_frees_pair_by_size(self):
        evs = [{"name": "[memory]", "ts": t, "args": {"Device Type": 1, "Bytes": b}}
               for t, b in ((1, 512), (2, 1024), (3, -512), (4, -1024), (5, -4096))]
        evs.append({"name": "[memory]", "ts": 6, "args": {"Device Type": 0, "Bytes": 8}})
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump({"traceEvents": evs}, f)
            f.flush()
            trace, counts = importers.import_kineto(f.name)
        self.assertEqual((counts["allocs"], counts["frees"]), (2, 2))
        self.assertEqual(counts["frees_without_alloc_dropped"], 1)
        self.assertEqual(counts["non_gpu_memory_events_ignored"], 1)
        self.assertEqual(consistent(self, trace), {})
        self.assertEqual([ev[tf.T_TIME] for ev in trace.events], [0, 1000, 2000, 3000])


class Snapshot(unittest.TestCase):
    def expected(self, snap, level):
        alloc, free = (("alloc", "free_completed") if level == "tensor"
                       else ("segment_alloc", "segment_free"))
        n_alloc = n_free = dropped = 0
        live = set()
        if level == "tensor":
            # blocks live before the first event: freed first without an alloc (live from the
            # start), or active at dump time and never mentioned (live throughout)
            first = {}
            for d, t in enumerate(snap["device_traces"]):
                for e in sorted(t, key=lambda e: e.get("time_us", 0)):
                    if e["action"] in (alloc, free):
                        first.setdefault((d, e["addr"]), e["action"])
            pre = {k for k, a in first.items() if a == free}
            for s in snap["segments"]:
                for b in s["blocks"]:
                    k = (s["device"], b["address"])
                    if b["state"].startswith("active") and k not in first:
                        pre.add(k)
            live |= pre
            n_alloc += len(pre)
        if level == "segment":
            in_trace = {(d, e["addr"]) for d, t in enumerate(snap["device_traces"]) for e in t
                        if e["action"] == alloc}
            for s in snap["segments"]:
                if (s["device"], s["address"]) not in in_trace:
                    live.add((s["device"], s["address"]))
                    n_alloc += 1
        for d, t in enumerate(snap["device_traces"]):
            for e in t:
                if e["action"] == alloc:
                    n_alloc += 1
                    live.add((d, e["addr"]))
                elif e["action"] == free:
                    if (d, e["addr"]) in live:
                        live.remove((d, e["addr"]))
                        n_free += 1
                    else:
                        dropped += 1
        return n_alloc, n_free, dropped, len(live)

    def test_every_snapshot_both_levels(self):
        for path in gatest.traces("pytorch-snapshot"):
            with open(path, "rb") as f:
                snap = PlainUnpickler(f).load()
            for level in ("tensor", "segment"):
                with self.subTest(path=path, level=level):
                    n_alloc, n_free, dropped, live = self.expected(snap, level)
                    trace, counts = importers.import_snapshot(path, level)
                    self.assertEqual(kinds(trace)[tf.ALLOC], n_alloc)
                    self.assertEqual(kinds(trace)[tf.FREE], n_free)
                    self.assertEqual(counts["frees_without_alloc_dropped"], dropped)
                    self.assertEqual(counts["live_at_end"], live)
                    self.assertEqual(len(consistent(self, trace)), live)
                    self.assertGreater(n_alloc, 0)
                    closed, _ = importers.import_snapshot(path, level, close=True)
                    self.assertEqual(consistent(self, closed), {})
                    self.assertEqual(kinds(closed)[tf.FREE], n_free + live)

    def test_time_is_relative_ns(self):
        path = gatest.traces("pytorch-snapshot")[0]
        with open(path, "rb") as f:
            snap = PlainUnpickler(f).load()
        first = next(e["time_us"] for e in snap["device_traces"][0] if e["action"] == "alloc")
        trace, _ = importers.import_snapshot(path)
        self.assertEqual(trace.events[0][tf.T_TIME], 0)
        self.assertEqual(trace.start_unix_ns, first * 1000)

    def test_oom_becomes_failed_alloc(self):
        snap = {"segments": [], "device_traces": [[
            {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 10},
            {"action": "oom", "size": 1 << 40, "device_free": 0, "time_us": 11},
            {"action": "free_requested", "addr": 4096, "size": 512, "time_us": 12},
            {"action": "free_completed", "addr": 4096, "size": 512, "time_us": 12},
            {"action": "free_completed", "addr": 8192, "size": 512, "time_us": 13}]]}
        with tempfile.NamedTemporaryFile(suffix=".pickle") as f:
            pickle.dump(snap, f)
            f.flush()
            trace, counts = importers.import_snapshot(f.name)
        # the block freed without an alloc was live before the trace: allocated at its start
        self.assertEqual([ev[tf.T_KIND] for ev in trace.events],
                         [tf.ALLOC, tf.ALLOC, tf.ALLOC_FAILED, tf.FREE, tf.FREE])
        self.assertEqual(trace.events[0][tf.T_ADDR], 8192)
        self.assertEqual(trace.events[2][tf.T_RESULT], tf.CUDA_ERROR_OUT_OF_MEMORY)
        self.assertEqual(counts["frees_without_alloc_dropped"], 0)
        self.assertEqual(counts["blocks_live_before_trace"], 1)
        self.assertEqual(counts["ignored_free_requested"], 1)


class Lifetimes(unittest.TestCase):
    def test_every_lifetimes_file(self):
        for path in gatest.traces("lifetimes"):
            with self.subTest(path=path):
                with open(path, newline="") as f:
                    rows = [tuple(int(r[k]) for k in ("id", "lower", "upper", "size"))
                            for r in csv.DictReader(f)]
                # Peak of sum(size) over intervals [lower, upper): a difference array over the
                # distinct times, a different method from the importer's event sort.
                delta = {}
                for _, lo, up, s in rows:
                    delta[lo] = delta.get(lo, 0) + s
                    delta[up] = delta.get(up, 0) - s
                level = peak = 0
                for t in sorted(delta):
                    level += delta[t]
                    peak = max(peak, level)
                trace, counts = importers.import_lifetimes(path)
                self.assertEqual(counts["buffers"], len(rows))
                self.assertEqual(len(trace.events), 2 * len(rows))
                self.assertEqual(consistent(self, trace), {})
                level = best = 0
                for ev in trace.events:
                    level += ev[tf.T_SIZE] if ev[tf.T_KIND] == tf.ALLOC else -ev[tf.T_SIZE]
                    best = max(best, level)
                self.assertEqual(best, peak)

    def test_frees_before_allocs_at_equal_times(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv") as f:
            f.write("id,lower,upper,size\n0,0,5,100\n1,5,9,200\n")
            f.flush()
            trace, _ = importers.import_lifetimes(f.name)
        self.assertEqual([(ev[tf.T_TIME], ev[tf.T_KIND], ev[tf.T_ADDR]) for ev in trace.events],
                         [(0, tf.ALLOC, 0), (5, tf.FREE, 0), (5, tf.ALLOC, 1), (9, tf.FREE, 1)])


class NamesAnyCase(unittest.TestCase):
    def test_formats_levels_units_any_case(self):
        """A format, a level and a time unit are read as modes are, any case and blanks around
        ignored (`import Kineto` and `--format Lifetimes` were invalid choices while `--mode
        Grow` was taken: an outside check, 2026-12-06); a name not in the list is still refused."""
        snap = os.path.join(gatest.TRACES, "pytorch-snapshot", "cs336_forward_fp32.pickle")
        csv_in = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.gatrace")
            p = gatest.cli_inproc("import", " Pytorch-Snapshot", snap, "-o", out, "--level",
                                  "SEGMENT", "--time-unit", "S ")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("(pytorch-snapshot)", p.stdout + p.stderr)
            p = gatest.cli_inproc("replay", csv_in, "--format", "Lifetimes", "--mode", "grow",
                                  "--no-min", "--json")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(json.loads(p.stdout)["format"], "lifetimes")
            p = gatest.cli_inproc("import", "Kinetoo", snap, "-o", out)
            self.assertEqual(p.returncode, 2)
            self.assertIn("invalid choice: 'kinetoo'", p.stderr)


class WholeNumbers(unittest.TestCase):
    """helper-40 F8: a fractional Kineto Bytes (1000.9) or snapshot size (512.7) / time_us (1.9)
    was cut to its whole part without a word, where a lifetimes CSV refuses 1.5. Each is refused
    now, naming the file, the entry and the field; a float with no fraction (4096.0) is read."""

    def kineto(self, nbytes):
        freed = -4096 if isinstance(nbytes, str) else -nbytes
        evs = [{"name": "[memory]", "ph": "i", "ts": 1, "args": {"Device Type": 1, "Device Id": 0,
                                                                "Addr": 100, "Bytes": nbytes}},
               {"name": "[memory]", "ph": "i", "ts": 2, "args": {"Device Type": 1, "Device Id": 0,
                                                                "Addr": 100, "Bytes": freed}}]
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            json.dump({"traceEvents": evs}, f)
            f.flush()
            return importers.import_kineto(f.name)

    def snapshot(self, size, time_us):
        snap = {"segments": [], "device_traces": [[
            {"action": "alloc", "addr": 1, "size": size, "stream": 0, "time_us": time_us},
            {"action": "free_completed", "addr": 1, "size": size, "time_us": 5}]]}
        with tempfile.NamedTemporaryFile("wb", suffix=".pickle") as f:
            pickle.dump(snap, f, protocol=2)
            f.flush()
            return importers.import_snapshot(f.name)

    def test_fractions_refused(self):
        for load, args, needle in ((self.kineto, (1000.9,), "traceEvents[0]: Bytes 1000.9"),
                                   (self.snapshot, (512.7, 1), "size 512.7"),
                                   (self.snapshot, (512, 1.9), "time_us 1.9")):
            with self.subTest(needle=needle):
                with self.assertRaises(GaError) as e:
                    load(*args)
                self.assertIn(needle, str(e.exception))
                self.assertIn("is not a whole number", str(e.exception))
                self.assertIn(".json: " if load == self.kineto else ".pickle: ",
                              str(e.exception))

    def test_whole_floats_read(self):
        trace, _ = self.kineto(4096.0)
        self.assertEqual([ev[tf.T_SIZE] for ev in trace.events], [4096, 4096])
        trace, _ = self.snapshot(512.0, 1.0)
        self.assertEqual([ev[tf.T_SIZE] for ev in trace.events], [512, 512])

    def test_device_outside_16_bits_refused(self):
        # helper-40 F7: Device Id 40000 and 50000 were both clamped to 32767, one pool for two
        # devices; now refused, naming the event. The edges themselves are read.
        for dev, ok in ((40000, False), (32768, False), (-32769, False), (32767, True),
                        (-32768, True)):
            evs = [{"name": "[memory]", "ph": "i", "ts": 1,
                    "args": {"Device Type": 1, "Device Id": dev, "Addr": 100, "Bytes": 4096}}]
            with self.subTest(dev=dev), tempfile.NamedTemporaryFile("w", suffix=".json") as f:
                json.dump({"traceEvents": evs}, f)
                f.flush()
                if ok:
                    trace, _ = importers.import_kineto(f.name)
                    self.assertEqual([ev[tf.T_DEVICE] for ev in trace.events], [dev])
                    continue
                with self.assertRaises(GaError) as e:
                    importers.import_kineto(f.name)
                self.assertIn(f"traceEvents[0]: Device Id {dev} is outside -32768..32767",
                              str(e.exception))

    def test_python_literal_strings_refused(self):
        for text in ("1_000", "\u0663000"):
            with self.subTest(text=text), self.assertRaises(GaError):
                self.kineto(text)


class Rmm(unittest.TestCase):
    def load(self, text, **kw):
        with tempfile.NamedTemporaryFile("w", suffix=".csv") as f:
            f.write(text)
            f.flush()
            return importers.import_rmm(f.name, **kw)

    def test_clock_format_and_pairing(self):
        trace, counts = self.load(
            "Thread,Time,Action,Pointer,Size,Stream\n"
            "140,23:59:59:999000,allocate,0x7f0000000000,1024,0x0\n"
            "140,23:59:59:999500,allocate failure,0x0,99999999999,0x0\n"
            "141,00:00:00:000250,free,0x7f0000000000,1024,0x0\n"
            "141,00:00:00:000300,free,0x7f00deadbeef,64,0x0\n"
            "141,00:00:01:000000,allocate,7f0000001000,2048,1\n")
        self.assertEqual([ev[tf.T_KIND] for ev in trace.events],
                         [tf.ALLOC, tf.ALLOC_FAILED, tf.FREE, tf.ALLOC])
        # The free after midnight comes 1.25 ms after the alloc.
        self.assertEqual([ev[tf.T_TIME] for ev in trace.events],
                         [0, 500000, 1250000, 1001000000])
        self.assertEqual(trace.events[0][tf.T_ADDR], 0x7f0000000000)
        self.assertEqual(trace.events[3][tf.T_STREAM], 1)
        self.assertEqual(trace.events[0][tf.T_THREAD], 140)
        self.assertEqual(counts["frees_without_alloc_dropped"], 1)
        self.assertEqual(counts["failed_allocs"], 1)
        self.assertEqual(counts["live_at_end"], 1)

    def test_rows_out_of_time_order(self):
        """helper-40 F4: a threaded RMM log is not written in time order. Rows earlier than the
        first row all became time 0 and pairing went by line order, so one log in two line orders
        gave peaks of 2 MiB and 1 MiB (1 MiB by time). Rows are paired in time order now, from
        the earliest time, and the summary counts the rows earlier than a row above them."""
        rows = ["1,10:00:00.000005,allocate,0xA000,1048576,0x0",
                "2,10:00:00.000003,allocate,0xB000,1048576,0x0",
                "2,10:00:00.000004,free,0xB000,1048576,0x0",
                "1,10:00:00.000006,free,0xA000,1048576,0x0"]
        head = "Thread,Time,Action,Pointer,Size,Stream\n"
        for order, late in (((0, 1, 2, 3), 2), ((1, 0, 2, 3), 1), ((1, 2, 0, 3), 0),
                            ((3, 2, 1, 0), 3)):
            with self.subTest(order=order):
                trace, counts = self.load(head + "".join(rows[i] + "\n" for i in order))
                self.assertEqual([(ev[tf.T_TIME], ev[tf.T_KIND], ev[tf.T_ADDR])
                                  for ev in trace.events],
                                 [(0, tf.ALLOC, 0xB000), (1000, tf.FREE, 0xB000),
                                  (2000, tf.ALLOC, 0xA000), (3000, tf.FREE, 0xA000)])
                self.assertEqual(counts.get("rows_out_of_time_order", 0), late)
                self.assertEqual(counts["frees_without_alloc_dropped"], 0)

    def test_numeric_times(self):
        text = ("Thread,Time,Action,Pointer,Size,Stream\n1,1.5,allocate,0x1000,512,0\n"
                "1,2.0,free,0x1000,512,0\n")
        trace, _ = self.load(text)
        self.assertEqual([ev[tf.T_TIME] for ev in trace.events], [0, 500000000])
        trace, _ = self.load(text, time_unit="us")
        self.assertEqual([ev[tf.T_TIME] for ev in trace.events], [0, 500])
        # Clock times need no unit: --time-unit there would change nothing, so it is refused.
        clock = ("Thread,Time,Action,Pointer,Size,Stream\n1,00:00:01:000000,allocate,0x1000,512,0"
                 "\n1,00:00:02:000000,free,0x1000,512,0\n")
        with self.assertRaises(GaError) as e:
            self.load(clock, time_unit="ms")
        self.assertIn("--time-unit ms: ", str(e.exception))
        self.assertIn("clock times (HH:MM:SS.ffffff), which need no unit", str(e.exception))
        self.assertEqual(len(self.load(clock)[0].events), 2)

    def test_auto_detects_every_format(self):
        with tempfile.TemporaryDirectory() as d:
            rmm = os.path.join(d, "log.csv")
            with open(rmm, "w") as f:
                f.write("Thread,Time,Action,Pointer,Size,Stream\n")
            plain = os.path.join(d, "k.json")
            with open(plain, "w") as f:
                f.write('{"traceEvents": []}')
            trace = os.path.join(d, "t.gatrace")
            tf.write(trace, tf.Trace())
            cases = {rmm: "rmm", plain: "kineto", trace: "trace",
                     gatest.traces("kineto")[0]: "kineto",
                     gatest.traces("lifetimes")[0]: "lifetimes",
                     gatest.traces("pytorch-snapshot")[0]: "pytorch-snapshot"}
            for path, fmt in cases.items():
                self.assertEqual(importers.detect(path), fmt, path)


class ImportCommand(unittest.TestCase):
    def test_cli_import_every_file(self):
        with tempfile.TemporaryDirectory() as d:
            for sub in ("kineto", "lifetimes", "pytorch-snapshot"):
                for path in gatest.traces(sub)[:2]:
                    out = os.path.join(d, os.path.basename(path) + ".gatrace")
                    p = gatest.cli("import", sub, path, "-o", out)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    n = len(tf.read(out).events)
                    self.assertIn(f"{n:,} events", p.stdout)
            self.assertFalse([f for f in os.listdir(d) if f.endswith(".tmp")])


if __name__ == "__main__":
    unittest.main()
