"""Trace format: round trip, byte-level layout against allocator/ga_trace.h, truncation at every
byte, and rejection of files that are not traces."""

import os
import random
import struct
import tempfile
import unittest

import gatest
from gpuarena_cli import GaError
from gpuarena_cli import tracefile as tf


def sample_events(n, seed=1):
    rng = random.Random(seed)
    evs = []
    for i in range(n):
        evs.append(tf.event(i * 1000, rng.getrandbits(64), rng.getrandbits(40), rng.choice(
            (tf.ALLOC, tf.FREE, tf.ALLOC_FAILED)), rng.getrandbits(64), rng.getrandbits(32),
            rng.getrandbits(32), rng.randint(-1, 7), rng.randrange(13), rng.getrandbits(32)))
    return evs


class TraceFormat(unittest.TestCase, gatest.CliAsserts):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_round_trip(self):
        trace = tf.Trace(sample_events(500), start_unix_ns=1234567890123456789)
        path = os.path.join(self.dir, "t.gatrace")
        tf.write(path, trace)
        self.assertEqual(os.path.getsize(path), 32 + 48 * 500)
        back = tf.read(path)
        self.assertEqual(back.events, trace.events)
        self.assertEqual(back.start_unix_ns, trace.start_unix_ns)
        self.assertEqual(back.truncated_bytes, 0)
        self.assertFalse(os.path.exists(path + ".tmp"))

    def test_read_sorts_threads_by_time(self):
        # Threads append their buffers in blocks: the reader returns time order, ties in file order.
        a = [tf.event(10 * k, k, 512, tf.ALLOC, thread=1) for k in range(100)]
        b = [tf.event(10 * k + 5, 1000 + k, 512, tf.ALLOC, thread=2) for k in range(100)]
        ties = [tf.event(7, 5001, 512, tf.ALLOC), tf.event(7, 5002, 512, tf.FREE)]
        path = os.path.join(self.dir, "threads.gatrace")
        tf.write(path, tf.Trace(b[50:] + a[:50] + b[:50] + ties + a[50:]))
        back = tf.read(path).events
        self.assertEqual([e[0] for e in back], sorted(e[0] for e in back))
        self.assertEqual(len(back), 202)
        keys = [e[1] for e in back]
        self.assertLess(keys.index(5001), keys.index(5002))

    def test_layout_matches_header(self):
        # Offsets written out by hand from the comment in allocator/ga_trace.h.
        ev = tf.event(1, 2, 3, tf.FREE, stream=4, thread=5, duration_ns=6, device=-1, api=7,
                      result=8)
        data = tf.encode(tf.Trace([ev], 9))
        self.assertEqual(data[:8], b"GATRACE\0")
        self.assertEqual(struct.unpack_from("<IIQQ", data, 8), (1, 48, 9, 0))
        rec = data[32:]
        self.assertEqual(len(rec), 48)
        self.assertEqual(struct.unpack_from("<QQQQ", rec, 0), (1, 2, 3, 4))
        self.assertEqual(struct.unpack_from("<II", rec, 32), (5, 6))
        self.assertEqual(struct.unpack_from("<h", rec, 40), (-1,))
        self.assertEqual((rec[42], rec[43]), (tf.FREE, 7))
        self.assertEqual(struct.unpack_from("<I", rec, 44), (8,))

    def test_event_clamps_fields(self):
        ev = tf.event(-5, -1, 1 << 70, tf.ALLOC, duration_ns=1 << 40, device=1 << 20)
        self.assertEqual((ev[tf.T_TIME], ev[tf.T_ADDR], ev[tf.T_SIZE]), (0, tf.U64, tf.U64))
        self.assertEqual((ev[tf.T_DUR], ev[tf.T_DEVICE]), (tf.U32, 32767))

    def test_truncated_at_every_byte(self):
        trace = tf.Trace(sample_events(4, seed=2), 77)
        data = tf.encode(trace)
        for cut in range(len(data) + 1):
            if cut < 32:
                with self.assertRaises(GaError, msg=f"cut {cut}"):
                    tf.parse(data[:cut], "cut")
                continue
            back = tf.parse(data[:cut], "cut")
            whole = (cut - 32) // 48
            self.assertEqual(back.events, trace.events[:whole], f"cut {cut}")
            self.assertEqual(back.truncated_bytes, (cut - 32) % 48, f"cut {cut}")

    def test_rejects_bad_headers(self):
        good = tf.encode(tf.Trace(sample_events(1)))
        bad = {
            "magic": b"GATRACX\0" + good[8:],
            "version": good[:8] + struct.pack("<I", 2) + good[12:],
            "record size": good[:12] + struct.pack("<I", 40) + good[16:],
        }
        for what, data in bad.items():
            with self.assertRaises(GaError, msg=what) as cm:
                tf.parse(data, "f.gatrace")
            self.assertIn("f.gatrace", str(cm.exception))
            self.assertIn(what.split()[0], str(cm.exception))

    def test_missing_file_is_clear(self):
        with self.assertRaises(GaError) as cm:
            tf.read(os.path.join(self.dir, "nope"))
        self.assertIn("nope", str(cm.exception))

    def test_failed_write_leaves_nothing(self):
        path = os.path.join(self.dir, "no-such-dir", "t.gatrace")
        with self.assertRaises(GaError):
            tf.write(path, tf.Trace(sample_events(3)))
        self.assertFalse(os.path.exists(path + ".tmp"))

    def test_cli_reads_truncated_trace(self):
        data = tf.encode(tf.Trace(sample_events(3)))
        src = os.path.join(self.dir, "cut.gatrace")
        with open(src, "wb") as f:
            f.write(data[:-7])
        out = os.path.join(self.dir, "copy.gatrace")
        p = gatest.cli("import", "auto", src, "-o", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("truncated bytes ignored: 41", p.stdout)
        self.assertEqual(len(tf.read(out).events), 2)


if __name__ == "__main__":
    unittest.main()
