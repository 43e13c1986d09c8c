"""Findings of an outside check of the command (helper-119).

A bad value of 5,000 characters was quoted whole in the usage error, argparse's own (`invalid
choice: 'xxx...'`) and the command's (`--stats DIR/ is a folder`), a message of 5,000 or 10,000
characters: every user's value in a message is now bounded, by its head, its tail and its length.
`gpuarena-replay --arena-size 100` replayed an arena of 512 bytes, and `--vmm-keep 1MiB` kept no
granule, without a word. A report file the user may write, in a folder the user may not, was
refused or not updated (the command writes a temporary beside it and renames it into place)."""

import os
import subprocess
import sys
import tempfile
import unittest

import gatest

LONG = "x" * 5000


def _lines(text):
    return [line for line in text.splitlines() if line.strip()]


class LongValuesBounded(unittest.TestCase):
    """Every message that echoes a 5,000-character value is a few hundred characters, says the
    value's length, and keeps its `gpuarena:` prefix and its advice."""

    CASES = (  # (arguments, a part of the advice that must survive)
        (("run", "--mode", LONG, "--", "true"), "see gpuarena run --help"),
        (("run", "--mode", "a b " * 1250, "--", "true"), "see gpuarena run --help"),
        (("run", "--limit", LONG, "--", "true"), "try 8GiB"),
        (("run", "--fraction", LONG, "--", "true"), "try 0.75"),
        (("run", "--env", LONG, "--", "true"), "see gpuarena run --help"),
        (("run", "--" + LONG, "--", "true"), "see gpuarena run --help"),
        (("run", "--stats", LONG + "/", "--", "true"), "name a file in it"),
        (("run", "--trace", "/nonexistent/" + LONG, "--", "true"), "create it or give"),
        (("replay", "--format", LONG, "t"), "choose from"),
        (("replay", "--device", LONG, "t"), "-32768 to 32767"),
        (("replay", "--mode", "arena," + LONG, "t"), "see gpuarena replay --help"),
        (("replay", LONG), "cannot read"),
        (("report", "t.gatrace", "-o", LONG + "/"), "give one inside it"),
        (("compare", "--repeat", LONG, "--", "true"), "try --repeat 5"),
        (("doctor", "--timeout", LONG), "try 30 or 300"),
        (("top", "--interval", LONG), "try 2 or 0.5"),
        (("import", LONG, "f", "-o", "o"), "choose from"),
        ((LONG,), "choose from"),
    )

    def test_long_values_bounded(self):
        for args, advice in self.CASES:
            with self.subTest(args=[a[:20] for a in args]):
                p = gatest.cli(*args)
                self.assertIn(p.returncode, (1, 2), p.stderr[:300])
                self.assertNotIn("Traceback", p.stderr)
                lines = _lines(p.stderr)
                self.assertTrue(lines and lines[0].startswith("gpuarena: "), p.stderr[:300])
                self.assertLess(max(map(len, lines)), 600, lines[0][:300])
                self.assertIn("characters)", lines[0])
                self.assertIn("...", lines[0])
                self.assertIn(advice, p.stderr)

    def test_short_values_whole(self):
        """A value of ordinary length is quoted whole, as before."""
        p = gatest.cli("run", "--mode", "arenna", "--", "true")
        self.assertEqual(p.returncode, 2)
        self.assertIn("'arenna'", p.stderr)
        path = "/nonexistent/" + "d" * 120 + "/t.gatrace"
        p = gatest.cli("run", "--sim", "--trace", path, "--", "true")
        self.assertIn(path, p.stderr)


class ReadErrorsSayWhatToDo(unittest.TestCase):
    def test_missing_input_says_what_to_do(self):
        """`replay missing.gatrace` said `cannot read missing.gatrace: No such file or
        directory` and nothing of what to do; so did import and report."""
        with tempfile.TemporaryDirectory() as d:
            missing = os.path.join(d, "missing.gatrace")
            for args in (("replay", missing), ("report", missing, "-o", os.path.join(d, "r")),
                         ("import", "auto", missing, "-o", os.path.join(d, "o.gatrace"))):
                with self.subTest(args=args[0]):
                    p = gatest.cli(*args)
                    self.assertEqual(p.returncode, 1, p.stderr)
                    self.assertRegex(p.stderr, r"^gpuarena: cannot read .*: No such file or "
                                     r"directory; check the path")


if __name__ == "__main__":
    unittest.main()
