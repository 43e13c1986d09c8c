"""Findings of an outside check of the merged shim work (helper-116), the command's side.

`gpuarena run --stats F --trace T` (and an inherited relative GPUARENA_TRACE) in a folder whose
name holds `%p`: the command made both absolute, the shim expanded the folder's `%p` as the
file's, and both were lost (`cannot write ... d1234/t.gatrace`), exit 0."""

import os
import tempfile
import unittest

import gatest


class PercentPFolder(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "run%p")
        os.mkdir(self.dir)

    def tearDown(self):
        self.tmp.cleanup()

    def test_outputs_in_a_folder_named_with_percent_p(self):
        """--stats and --trace given relative, and an inherited relative GPUARENA_TRACE, land in
        the folder named `run%p` itself."""
        prog = os.path.join(gatest.BUILD, "examples", "ex_train")
        p = gatest.cli("run", "--sim", "--stats", "s.json", "--trace", "t.gatrace", "--",
                       prog, "1", timeout=60, cwd=self.dir)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("cannot write", p.stderr)
        with open(os.path.join(self.dir, "s.json"), "rb") as f:
            self.assertTrue(f.read().startswith(b'{"gpuarena_stats"'))
        with open(os.path.join(self.dir, "t.gatrace"), "rb") as f:
            self.assertEqual(f.read(8), b"GATRACE\0")
        p = gatest.cli("run", "--sim", "--", prog, "1", timeout=60, cwd=self.dir,
                       env={"GPUARENA_TRACE": "u.gatrace"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("cannot write", p.stderr)
        self.assertTrue(os.path.isfile(os.path.join(self.dir, "u.gatrace")), p.stderr)


if __name__ == "__main__":
    unittest.main()
