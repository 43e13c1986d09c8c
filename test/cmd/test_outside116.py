"""Findings of an outside check of the merged shim work (helper-116), the command's side.

`gpuarena run --stats F --trace T` (and an inherited relative GPUARENA_TRACE) in a folder whose
name holds `%p`: the command made both absolute, the shim expanded the folder's `%p` as the
file's, and both were lost (`cannot write ... d1234/t.gatrace`), exit 0. `run --stats F` and
`--trace F` over a file F that holds bytes the user may not read (mode 0200) replaced it, as the
shim did (it took such a file for an empty one)."""

import json
import os
import subprocess
import sys
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


class UnreadableFile(unittest.TestCase):
    def test_run_never_over_an_unreadable_file(self):
        """--stats and --trace naming a file of the user's that the user may not read are
        refused (exit 2), the file kept; as root (who reads every file) the command runs as
        nobody over nobody's file."""
        with tempfile.TemporaryDirectory(dir="/tmp") as tmp:  # one nobody can reach
            os.chmod(tmp, 0o777)
            env = dict(os.environ, TMPDIR=tmp)
            path = os.path.join(tmp, "f.out")
            with open(path, "wb") as f:
                f.write(b"my notes\n")
            os.chmod(path, 0o200)
            root = os.geteuid() == 0
            if root:
                os.chown(path, 65534, 65534)

            def as_nobody():
                os.setgid(65534)
                os.setuid(65534)

            # nobody may not reach an interpreter under root's home (pyenv): the system's then
            python = None
            for x in (sys.executable, "/usr/bin/python3"):
                try:
                    subprocess.run([x, gatest.SCRIPT, "--help"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, timeout=60, check=True, env=env,
                                   preexec_fn=as_nobody if root else None)
                    python = x
                    break
                except (OSError, subprocess.SubprocessError):
                    continue
            if python is None:
                self.skipTest("no interpreter or command this user (nobody) may run")
            prog = os.path.join(gatest.BUILD, "examples", "ex_train")
            for option in ("--stats", "--trace"):
                p = subprocess.run([python, gatest.SCRIPT, "run", "--sim", option, path,
                                    "--", prog, "1"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, timeout=60, check=False, env=env,
                                   cwd=tmp, preexec_fn=as_nobody if root else None)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("holds bytes this user may not read", p.stderr)
            # doctor warns of it beforehand, as of the shim's other refusals
            p = subprocess.run([python, gatest.SCRIPT, "doctor", "--json", "--sim"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=120, check=False, cwd=tmp, preexec_fn=as_nobody if root else None,
                               env=dict(env, GPUARENA_STATS=path, **gatest.SAN_ENV))
            warnings = json.loads(p.stdout)["warnings"]
            self.assertTrue(any(w.startswith(f"GPUARENA_STATS={path} holds bytes this user may "
                                             "not read") for w in warnings), warnings)
            os.chmod(path, 0o600)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), b"my notes\n")


if __name__ == "__main__":
    unittest.main()
