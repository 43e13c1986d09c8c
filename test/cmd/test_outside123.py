"""Findings of an outside check of issues 12 (one language everywhere) and 13, the command's side.

GPUARENA_NO_MATPLOTLIB, the command's own yes/no, meant "no" only when empty or "0": `false`,
`off` and `no` turned the charts off, and a word that is none (`maybe`) was taken as yes, where
the shim's yes/no settings (GPUARENA_PREALLOCATE, the simulated driver's SIMCUDA_VMM) take
true/false, 1/0, yes/no, on/off in any case, blanks around ignored, and refuse anything else."""

import os
import tempfile
import unittest

import gatest


class NoMatplotlibWords(gatest.CliAsserts, unittest.TestCase):
    def test_no_matplotlib_words(self):
        """`report -o PREFIX` draws PREFIX.png for every "no" (and unset or empty), never for a
        "yes", and refuses another word before it writes anything (exit 1, naming the variable
        and the words)."""
        src = gatest.traces("lifetimes")[0]
        with tempfile.TemporaryDirectory() as d:
            prefix = os.path.join(d, "r")
            for word, drawn in (("false", True), ("OFF", True), (" no ", True), ("0", True),
                                ("", True), ("1", False), ("true", False), (" Yes\r", False),
                                ("on", False)):
                with self.subTest(word=word):
                    p = gatest.cli("report", src, "-o", prefix,
                                   env={"GPUARENA_NO_MATPLOTLIB": word})
                    self.assertEqual(p.returncode, 0, p.stderr)
                    png = os.path.exists(prefix + ".png")
                    if drawn and gatest.MPL_PYTHON:
                        self.assertTrue(png, f"no PNG with GPUARENA_NO_MATPLOTLIB={word!r}: "
                                        f"{p.stdout}{p.stderr}")
                    if not drawn:
                        self.assertFalse(png, f"a PNG with GPUARENA_NO_MATPLOTLIB={word!r}")
                    for f in os.listdir(d):
                        os.remove(os.path.join(d, f))
            p = gatest.cli("report", src, "-o", prefix, env={"GPUARENA_NO_MATPLOTLIB": "maybe"})
            self.assertCleanError(p, "GPUARENA_NO_MATPLOTLIB='maybe' is not valid "
                                  "(true/false, 1/0, yes/no, on/off")
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    unittest.main()
