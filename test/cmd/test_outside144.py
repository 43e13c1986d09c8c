"""An outside check of report -o / compare --plot PREFIX refusals (06707a6, 2026-12-07; helper-144).

A PREFIX that is a device, FIFO or socket is refused since 06707a6; one that leads through /proc
to a descriptor of the command (`-o /dev/stdout`) was refused only while that descriptor was a
pipe or a terminal: with the standard output sent to a file, /dev/stdout passed as a regular file,
and as root `report -o /dev/stdout > out.txt` wrote /dev/stdout.json and /dev/stdout.png into
/dev. The tests use a link of their own to /proc/self/fd/1, so that a failure writes nothing
into /dev.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import gatest

LIFETIMES = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")


class PrefixRefusals(unittest.TestCase, gatest.CliAsserts):
    def setUp(self):
        self.d = tempfile.mkdtemp(prefix="gpuarena-o144-")
        self.trace = os.path.join(self.d, "A.gatrace")
        self.assertEqual(gatest.cli("import", "auto", LIFETIMES, "-o", self.trace).returncode, 0)

    def tearDown(self):
        shutil.rmtree(self.d, ignore_errors=True)

    def _run_to_file(self, *args):
        """The command with its standard output sent to a regular file: (code, stderr)."""
        out = os.path.join(self.d, "stdout.txt")
        with open(out, "w") as f:
            p = subprocess.run([sys.executable, gatest.SCRIPT] + list(args), stdout=f,
                               stderr=subprocess.PIPE, text=True, cwd=self.d, timeout=120,
                               check=False)
        os.unlink(out)
        return p.returncode, p.stderr

    def test_prefix_through_proc_refused_with_stdout_a_file(self):
        os.symlink("/proc/self/fd/1", os.path.join(self.d, "out"))
        for args in (("report", self.trace, "-o", "out"), ("report", self.trace, "-o", "out.json"),
                     ("compare", "--sim", "--modes", "arena", "--plot", "out", "--", "true")):
            code, err = self._run_to_file(*args)
            self.assertEqual(code, 2, (args, err))
            self.assertIn("a descriptor of this process", err)
            self.assertIn("(nothing was written)", err)
            self.assertEqual(sorted(os.listdir(self.d)), ["A.gatrace", "out"], args)

    def test_prefix_whose_twin_is_a_device_written_through(self):
        # out.json a link to /dev/null: the twin is written through (as any output that is a
        # device), the PREFIX itself names no device; the PNG beside it is a file
        os.symlink("/dev/null", os.path.join(self.d, "twin.json"))
        p = gatest.cli("report", self.trace, "-o", "twin", cwd=self.d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.islink(os.path.join(self.d, "twin.json")))

    def test_relative_and_linked_device_prefixes_refused(self):
        os.symlink("/dev/null", os.path.join(self.d, "lnk"))
        os.symlink("lnk", os.path.join(self.d, "lnk2"))
        for prefix in ("lnk", "lnk2", "lnk.png", "../" + os.path.basename(self.d) + "/lnk"):
            p = gatest.cli("report", self.trace, "-o", prefix, cwd=self.d)
            self.assertCleanError(p, "is a device, and a PREFIX names the files to write", code=2)
        self.assertEqual(sorted(os.listdir(self.d)), ["A.gatrace", "lnk", "lnk2"])


class KinetoMessages(unittest.TestCase, gatest.CliAsserts):
    def test_ts_text_not_a_number_says_the_field_and_the_fix(self):
        # e61c925 gave a 'ts' that is no number its fix; one written as text that is no number
        # ("abc") took the shared parse and said "'abc' is not a finite number" alone
        d = tempfile.mkdtemp(prefix="gpuarena-o144-")
        try:
            for ts in ('"abc"', "null", '"nan"'):
                path = os.path.join(d, "k.json")
                with open(path, "w") as f:
                    f.write('{"traceEvents":[{"name":"[memory]","ph":"i","ts":%s,"args":'
                            '{"Device Type":1,"Bytes":5,"Addr":1}}]}' % ts)
                p = gatest.cli("import", "kineto", path, "-o", os.path.join(d, "k.gatrace"))
                self.assertCleanError(p, "traceEvents[0]: 'ts' ", "is not a number (microseconds); "
                                      "the trace is damaged or was edited: export it again")
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
