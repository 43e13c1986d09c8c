"""Runs the `gpuarena` command tests (unittest) and writes one TAP line per test.

Usage: run_tests.py OUT.tap. The TAP file is what the tier summary counts; the exit status is 0
even when tests fail (the summary decides), and non-zero only when the runner itself breaks.
A skipped test is reported as "not ok": this tier must not pass by skipping. A test after which
the command left a temporary folder in the run's TMPDIR (gatest.leftovers) gets a "not ok" line of
its own.
"""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gatest  # noqa: E402  (sets TMPDIR for every command the tests run)


class TapResult(unittest.TextTestResult):
    """Collects (ok, name, note) per test in run order."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.lines = []

    def _name(self, test):
        return test.id().replace("__main__.", "")

    def addSuccess(self, test):
        super().addSuccess(test)
        self.lines.append((True, self._name(test), ""))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.lines.append((False, self._name(test), self._exc_info_to_string(err, test)))

    def addError(self, test, err):
        super().addError(test, err)
        self.lines.append((False, self._name(test), self._exc_info_to_string(err, test)))

    def addSubTest(self, test, subtest, err):
        # A failed subtest is the only report its test makes (no addSuccess follows).
        super().addSubTest(test, subtest, err)
        if err is not None:
            self.lines.append((False, self._name(subtest), self._exc_info_to_string(err, test)))

    def stopTest(self, test):
        # A temporary folder the command left (test/cmd/gatest.py points every command's TMPDIR
        # at the run's own folder) fails the test that left it, under its own line.
        super().stopTest(test)
        left = gatest.leftovers()
        if left:
            self.lines.append((False, self._name(test) + " left no temporary files",
                               "the command left in TMPDIR: " + ", ".join(left)))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.lines.append((False, self._name(test), f"skipped: {reason}"))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.lines.append((False, self._name(test), "unexpected success"))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.lines.append((True, self._name(test), ""))


def write_tap(path, lines):
    with open(f"{path}.tmp", "w") as f:
        f.write(f"1..{len(lines)}\n")
        for i, (ok, name, note) in enumerate(lines, 1):
            f.write(f"{'ok' if ok else 'not ok'} {i} - cmd: {name}\n")
            for line in note.rstrip().splitlines():
                f.write(f"# {line}\n")
    os.replace(f"{path}.tmp", path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: run_tests.py OUT.tap")
    sys.path.insert(0, HERE)
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    t0 = time.monotonic()
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=1, resultclass=TapResult)
    result = runner.run(suite)
    write_tap(sys.argv[1], result.lines)
    bad = sum(1 for ok, _, _ in result.lines if not ok)
    print(f"cmd: {len(result.lines) - bad} passed, {bad} failed "
          f"({time.monotonic() - t0:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
