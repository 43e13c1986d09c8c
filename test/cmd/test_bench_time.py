"""scripts/bench-patterns-time.sh, driven as a user would: its help, its refusals, and a short run.

Checked from outside: `-h` prints the usage and exits 0; no build folder, a folder that is not a
build, an unknown target and a bad PAIRS or RUNS (an empty one is the default) are refused with exit status 2 and a `gpuarena:`
message; a short run prints the table's header and one row a pattern with a figure in each column
(never what the figure is: tests assert no timings), a pattern bench-patterns does not know is a
row of dashes, its message and exit status 1, and nothing is left behind in the folder it ran in."""

import os
import re
import subprocess
import tempfile
import unittest

import gatest

SCRIPT = os.path.join(gatest.REPO, "scripts", "bench-patterns-time.sh")


def run(*args, env=None, cwd=None):
    full = dict(os.environ)
    if gatest.SAN_RUNTIME:  # the script preloads GA_SAN_RUNTIME before the shim itself
        full["ASAN_OPTIONS"] = "detect_leaks=0"
    full.update(env or {})
    return subprocess.run(["bash", SCRIPT] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=full, cwd=cwd, check=False,
                          timeout=300)


class BenchTimeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_help(self):
        for flag in ("-h", "--help"):
            r = run(flag, cwd=self.tmp.name)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("usage: scripts/bench-patterns-time.sh BUILD", r.stdout)
        self.assertEqual(os.listdir(self.tmp.name), [])

    def test_refusals(self):
        cases = [([], {}), ([os.path.join(self.tmp.name, "none")], {}), ([self.tmp.name], {}),
                 ([gatest.BUILD, "gpu"], {}), ([gatest.BUILD], {"PAIRS": "abc"}),
                 ([gatest.BUILD], {"PAIRS": "0"}), ([gatest.BUILD], {"RUNS": "-1"}),
                 ([gatest.BUILD], {"RUNS": "2x"})]
        for args, env in cases:
            r = run(*args, env=env, cwd=self.tmp.name)
            self.assertEqual(r.returncode, 2, (args, env, r.stdout, r.stderr))
            self.assertIn("gpuarena:", r.stderr, (args, env))
            self.assertEqual(r.stdout, "", (args, env))
        self.assertEqual(os.listdir(self.tmp.name), [])

    def test_short_run(self):
        r = run(gatest.BUILD, "shim", "pool", "--", "one-1m", "alt2-large",
                env={"PAIRS": "400", "RUNS": "1"}, cwd=self.tmp.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "| pattern | target | arena ns a pair | vmm ns a pair | "
                                   "vmm / arena |")
        rows = [ln for ln in lines[2:] if ln.startswith("|")]
        self.assertEqual([(row.split("|")[1].strip(), row.split("|")[2].strip()) for row in rows],
                         [("one-1m", "shim"), ("alt2-large", "shim"), ("one-1m", "pool"),
                          ("alt2-large", "pool")])
        for row in rows:
            cells = [c.strip() for c in row.split("|")[3:6]]
            for c in cells:
                self.assertRegex(c, r"^-?[0-9]+\.[0-9]+$", row)
        self.assertEqual(os.listdir(self.tmp.name), [])

    def test_unknown_pattern(self):
        r = run(gatest.BUILD, "--", "nope", env={"PAIRS": "100", "RUNS": "1"}, cwd=self.tmp.name)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("| nope | shim | - | - | - |", r.stdout)
        self.assertTrue(re.search(r"gpuarena: .*no pattern nope", r.stderr), r.stderr)


if __name__ == "__main__":
    unittest.main()
