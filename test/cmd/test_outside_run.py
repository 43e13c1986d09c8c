"""`gpuarena run --trace` from outside (an outside check of issue 4, helper-109): what the command
says about a trace the run did not write, on the simulated driver with the shim's real recording."""

import os
import tempfile
import unittest

import gatest

EX_TRAIN = os.path.join(gatest.BUILD, "examples", "ex_train")


class RunTrace(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_trace_not_written_by_this_run_said(self):
        # A program that allocates nothing writes no trace. With --trace T the command said only
        # "the program wrote no statistics": an earlier run's T stayed there and `gpuarena replay
        # T` replayed it as this run's, where --stats F says "was not written by this run: what
        # it holds is from before".
        path = os.path.join(self.tmp.name, "t.gatrace")
        p = gatest.cli("run", "--sim", "--trace", path, "--", EX_TRAIN, "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(path, "rb") as f:
            before = f.read()
        self.assertTrue(before.startswith(b"GATRACE\0"))
        p = gatest.cli("run", "--sim", "--trace", path, "--", "true")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"gpuarena: --trace {path} was not written by this run (no allocation "
                      "was recorded): what it holds is from before\n", p.stderr)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)
        new = os.path.join(self.tmp.name, "new.gatrace")
        p = gatest.cli("run", "--sim", "--trace", new, "--", "true")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"gpuarena: --trace {new} was not written (no allocation was recorded)\n",
                      p.stderr)
        self.assertFalse(os.path.exists(new))
        # A run that writes it says nothing of the kind.
        p = gatest.cli("run", "--sim", "--trace", path, "--", EX_TRAIN, "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("was not written", p.stderr)


if __name__ == "__main__":
    unittest.main()
