"""Every line the command and the replay tool write on stderr is a message that starts with
`gpuarena:` (README, "The gpuarena command"), over a set of bad or odd inputs: malformed files of
every format (test_malformed's cases), a trace cut short, empty, of its header alone or of frees
alone, a folder, a missing file, a trace over two devices, a CSV whose last row has no line end.
A trace cut short was said as `T: 17 trailing bytes ...` on stdout, the one note without the
prefix (an outside check)."""

import os
import tempfile
import unittest

import gatest
import test_malformed
from gpuarena_cli import tracefile as tf

TOOL = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")


def unprefixed(text):
    return [line for line in text.splitlines() if line and not line.startswith("gpuarena:")]


class MessagesPrefixed(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name, data=None):
        p = os.path.join(self.dir, name)
        if data is not None:
            with open(p, "wb") as f:
                f.write(data)
        return p

    def odd_inputs(self):
        """(name, path, whether the replay tool reads it too) of inputs other than the
        importers' malformed ones."""
        evs = [tf.event(i, i, 1 << 20, tf.ALLOC) for i in range(4)]
        cut = self.path("cut.gatrace")
        tf.write(cut, tf.Trace(evs))
        with open(cut, "ab") as f:
            f.write(b"\0" * 17)  # a partial record, as a killed process leaves
        header = self.path("header.gatrace")
        tf.write(header, tf.Trace([]))
        frees = self.path("frees.gatrace")
        tf.write(frees, tf.Trace([tf.event(0, 1, 0, tf.FREE)]))
        two = self.path("two.gatrace")
        tf.write(two, tf.Trace([tf.event(0, 1, 512, tf.ALLOC, device=0),
                                tf.event(1, 2, 512, tf.ALLOC, device=1)]))
        with open(header, "rb") as f:
            head = f.read()
        os.mkdir(self.path("folder"))
        return [("cut", cut, True), ("empty", self.path("empty.gatrace", b""), True),
                ("header alone", header, True), ("frees alone", frees, True),
                ("two devices", two, True), ("folder", self.path("folder"), True),
                ("missing", self.path("missing.gatrace"), True),
                ("short header", self.path("short.gatrace", head[:10]), True),
                ("no line end", self.path("open.csv", b"id,lower,upper,size\n1,0,3,100"), True),
                ("junk", self.path("junk.bin", b"\x01\x02garbage" * 100), True)]

    def test_cut_trace_said_with_the_prefix(self):
        cut = dict((n, p) for n, p, _ in self.odd_inputs())["cut"]
        for args in (("replay", cut, "--no-min"), ("replay", cut, "--no-min", "--json"),
                     ("report", cut, "-o", self.path("r")),
                     ("import", "auto", cut, "-o", self.path("whole.gatrace"))):
            with self.subTest(args=args[0:1] + args[2:]):
                p = gatest.cli(*args, env={"GPUARENA_NO_MATPLOTLIB": "1"})
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(f"gpuarena: {cut}: 17 trailing bytes of a partial record ignored",
                              p.stderr)
                self.assertNotIn("trailing bytes", p.stdout.split("\n")[0])
                self.assertEqual(unprefixed(p.stderr), [])

    def test_every_stderr_line_prefixed(self):
        env = {"GPUARENA_NO_MATPLOTLIB": "1"}
        for name, path, tool in self.odd_inputs():
            runs = [("replay", path, "--no-min"), ("report", path, "-o", self.path("r")),
                    ("import", "auto", path, "-o", self.path("o.gatrace"))]
            for args in runs:
                with self.subTest(input=name, sub=args[0]):
                    p = gatest.cli(*args, env=env)
                    self.assertNotIn("Traceback", p.stderr)
                    self.assertEqual(unprefixed(p.stderr), [], p.stderr)
            if tool:
                with self.subTest(input=name, sub="gpuarena-replay"):
                    p = gatest.subprocess.run([TOOL, path], stdout=gatest.subprocess.PIPE,
                                              stderr=gatest.subprocess.PIPE, text=True,
                                              check=False)
                    self.assertEqual(unprefixed(p.stderr), [], p.stderr)
        # The importers' malformed inputs, through replay (in this process, for speed).
        for i, (fmt, data, _) in enumerate(test_malformed.CASES):
            src = self.path(f"bad{i}", data)
            with self.subTest(case=i, fmt=fmt):
                p = gatest.cli_inproc("replay", src, "--format", fmt, "--no-min")
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertEqual(unprefixed(p.stderr), [], p.stderr)


if __name__ == "__main__":
    unittest.main()
