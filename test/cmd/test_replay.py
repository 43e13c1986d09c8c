"""`gpuarena replay` through the real C tool (built by the tier rule; a missing tool fails here,
never skips): figures checked against independent computation, imports on the fly, and errors."""

import json
import os
import subprocess
import tempfile
import unittest

import gatest
from gpuarena_cli import tracefile as tf


def rounded_peak(rows):
    """Peak of 512-rounded live bytes over [lower, upper): what platform mode reserves at most."""
    delta = {}
    for _, lo, up, size in rows:
        r = -(-size // 512) * 512
        delta[lo] = delta.get(lo, 0) + r
        delta[up] = delta.get(up, 0) - r
    level = peak = 0
    for t in sorted(delta):
        level += delta[t]
        peak = max(peak, level)
    return peak


class Replay(unittest.TestCase, gatest.CliAsserts):
    def test_tool_is_built(self):
        path = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        self.assertTrue(os.access(path, os.X_OK), f"{path} missing: build it (make)")

    def test_lifetimes_all_modes(self):
        src = os.path.join(gatest.TRACES, "lifetimes", "somas_resnet50.csv")
        with open(src) as f:
            next(f)
            rows = [tuple(map(int, ln.split(","))) for ln in f if ln.strip()]
        p = gatest.cli("replay", src, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["modes"], "arena,grow,platform")
        for m in ("arena", "grow", "platform"):
            self.assertEqual(doc[f"{m}_events"], 2 * len(rows))
            self.assertEqual(doc[f"{m}_allocs"], len(rows))
            self.assertEqual(doc[f"{m}_failed_allocs"], 0)
            self.assertEqual(doc[f"{m}_peak_in_use"], rounded_peak(rows))
        self.assertEqual(doc["platform_peak_reserved"], rounded_peak(rows))
        self.assertEqual(doc["platform_backend_reserves"], len(rows))
        self.assertEqual(doc["arena_backend_reserves"], 1)
        self.assertGreaterEqual(doc["arena_min_size"], rounded_peak(rows))

    def test_table_from_imported_snapshot(self):
        src = os.path.join(gatest.TRACES, "pytorch-snapshot", "cs336_forward_fp32.pickle")
        p = gatest.cli("replay", src, "--mode", "grow", "--limit", "64GiB")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("imported", p.stdout)
        table = {ln.split("  ")[0]: ln for ln in p.stdout.splitlines()}
        for row in ("peak in use", "peak reserved", "driver reserve calls", "failed allocs",
                    "max fragmentation", "smallest size w/o OOM", "allocations"):
            self.assertIn(row, table)
        self.assertIn("681", table["allocations"])
        self.assertIn("64.00 GiB", table["arena size / limit"])

    def test_small_arena_reports_oom(self):
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "t.gatrace")
            evs = [tf.event(i, i, 1 << 20, tf.ALLOC) for i in range(8)]
            tf.write(trace, tf.Trace(evs + [tf.event(9, 0, 1 << 20, tf.FREE)]))
            with open(trace, "ab") as f:
                f.write(b"\0" * 17)  # a partial record, as a killed process leaves
            p = gatest.cli("replay", trace, "--mode", "arena", "--arena-size", "4MiB", "--json")
            self.assertEqual(p.returncode, 0, p.stderr)
            doc = json.loads(p.stdout)
            self.assertEqual(doc["truncated_bytes"], 17)
            self.assertEqual(doc["arena_failed_allocs"], 4)
            self.assertEqual(doc["arena_min_size"], 8 << 20)

    def test_tool_timeline(self):
        """gpuarena-replay --timeline: one CSV line per event, in use from the sizes alone, and
        its maxima are the JSON peaks; it refuses several modes and an unwritable path."""
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        with open(src) as f:
            next(f)
            rows = [tuple(map(int, ln.split(","))) for ln in f if ln.strip()]
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        with tempfile.TemporaryDirectory() as tmp:
            csv = os.path.join(tmp, "tl.csv")
            for mode in ("arena", "grow", "platform"):
                p = subprocess.run([tool, "--mode", mode, "--json", "--timeline", csv, src],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   check=False)
                self.assertEqual(p.returncode, 0, p.stderr)
                doc = json.loads(p.stdout)
                with open(csv) as f:
                    self.assertEqual(f.readline(), "time_ns,in_use,reserved\n")
                    pts = [tuple(map(int, ln.split(","))) for ln in f]
                self.assertEqual(len(pts), 2 * len(rows))
                self.assertEqual(max(u for _, u, _ in pts), rounded_peak(rows))
                self.assertEqual(max(r for _, _, r in pts), doc[f"{mode}_peak_reserved"])
                self.assertEqual(pts[-1][1:], (0, doc[f"{mode}_final_reserved"]))
            bad = os.path.join(tmp, "no", "x.csv")
            for args, code, msg in ((["--timeline", csv, src], 2, "exactly one --mode"),
                                    (["--mode", "grow", "--timeline", bad, src], 1,
                                     "cannot write"),
                                    (["--mode", "grow", "--timeline"], 2, "missing value")):
                p = subprocess.run([tool] + args, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, check=False)
                self.assertEqual(p.returncode, code, p.stderr)
                self.assertTrue(p.stderr.startswith("gpuarena:"), p.stderr)
                self.assertIn(msg, p.stderr)

    def test_errors(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.gatrace")
            with open(bad, "wb") as f:
                f.write(b"GATRACE\0\x07\0\0\0" + bytes(20))
            self.assertCleanError(gatest.cli("replay", bad), "bad.gatrace", "version 7")
            self.assertCleanError(gatest.cli("replay", os.path.join(d, "none")), "none")
            p = gatest.cli("replay", bad, "--arena-size", "lots")
            self.assertEqual(p.returncode, 2)
            self.assertIn("'lots' is not a size", p.stderr)


if __name__ == "__main__":
    unittest.main()
