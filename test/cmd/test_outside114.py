"""Findings of a second hostile outside check of issues 8 and 5 (helper-114), the command's side.

`gpuarena run --stats F` replaced F whatever it held (a user's notes, a read-only earlier report):
the shim's GPUARENA_STATS now refuses both, and the command refuses them before the program runs
(exit 2), as it refuses a trace there; `gpuarena doctor` says beforehand what the shim will refuse."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import gatest


class StatsOverFiles(unittest.TestCase, gatest.CliAsserts):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data, mode=0o644):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        return path

    def test_run_stats_never_over_a_users_file(self):
        """--stats naming a file that holds something else is refused, the file kept; an
        earlier report and an empty file are written as before."""
        notes = self.write("notes.txt", b"important notes\n")
        p = gatest.cli("run", "--sim", "--stats", notes, "--", "true")
        self.assertCleanError(p, "is there and is not a gpuarena statistics file", code=2)
        with open(notes, "rb") as f:
            self.assertEqual(f.read(), b"important notes\n")
        prog = os.path.join(gatest.BUILD, "examples", "ex_train")
        for name, data in (("old.json", b'{\n "gpuarena_stats": 2}\n'), ("empty.json", b"")):
            path = self.write(name, data)
            p = gatest.cli("run", "--sim", "--stats", path, "--", prog, "1", timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(path, "rb") as f:
                self.assertTrue(f.read().startswith(b'{"gpuarena_stats": 2'), name)

    def test_run_stats_never_over_a_read_only_file(self):
        """--stats naming a read-only file (mode 0444; root may write it, and a rename needs
        only the folder) is refused, the file kept."""
        old = self.write("old.json", b'{"gpuarena_stats": 2}\n', 0o444)
        p = gatest.cli("run", "--sim", "--stats", old, "--", "true")
        self.assertCleanError(p, "is read-only", code=2)
        with open(old, "rb") as f:
            self.assertEqual(f.read(), b'{"gpuarena_stats": 2}\n')

    def test_doctor_says_which_files_the_shim_leaves(self):
        """doctor warns, before the program runs, of every file the shim will leave as it is:
        statistics over a user's file, a trace over a user's file, either over a read-only one
        (it said nothing)."""
        notes = self.write("notes.txt", b"important notes\n")
        old = self.write("old.json", b'{"gpuarena_stats": 2}\n', 0o444)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GPUARENA_") or k == "GPUARENA_BUILD"}
        env.update(gatest.SAN_ENV)
        cases = ((("GPUARENA_STATS", notes), "is there and is not a gpuarena statistics file"),
                 (("GPUARENA_TRACE", notes), "is there and is not a gpuarena trace"),
                 (("GPUARENA_STATS", old), "is read-only"))
        for (name, path), said in cases:
            p = subprocess.run([sys.executable, gatest.SCRIPT, "doctor", "--json", "--sim"],
                               env=dict(env, **{name: path}), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=120, check=False)
            warnings = json.loads(p.stdout)["warnings"]
            self.assertTrue(any(w.startswith(f"{name}={path} {said}") for w in warnings),
                            (name, warnings))


if __name__ == "__main__":
    unittest.main()
