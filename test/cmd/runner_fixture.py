"""The fixture the `gpuarena run`/`compare` tests share (test_runner.py, test_runner_compare.py): a
fake build (a do-nothing shim, an empty sim/ folder), the fake program, and the class-level setup
that makes one build per test class."""

import json
import os
import subprocess
import sys
import tempfile

import gatest

FAKE = os.path.join(gatest.HERE, "fakeprog.py")
sys.path.insert(0, gatest.HERE)
from fakeprog import totals_and_units as fakeprog_totals  # noqa: E402,F401


def fake_build(root):
    """A build folder with an empty (but loadable) lib/libgpuarena.so and a sim/ folder."""
    os.makedirs(os.path.join(root, "lib"))
    os.makedirs(os.path.join(root, "sim"))
    src = os.path.join(root, "empty.c")
    with open(src, "w") as f:
        f.write("int ga_fake_shim_marker;\n")
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-o",
                    os.path.join(root, "lib", "libgpuarena.so"), src], check=True)
    open(os.path.join(root, "sim", "libcuda.so.1"), "w").close()


class RunnerFixture:
    """Mixed into a unittest.TestCase: a fake build per class, and run_cli/stats_of against it."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.build = os.path.join(cls.tmp.name, "build")
        fake_build(cls.build)
        cls.env = {"GPUARENA_BUILD": cls.build, "LD_PRELOAD": "", "LD_LIBRARY_PATH": ""}
        cls.shim = os.path.join(cls.build, "lib", "libgpuarena.so")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_cli(self, *args, env=None):
        return gatest.cli(*args, env=dict(self.env, **(env or {})))

    def stats_of(self, *args, env=None):
        path = os.path.join(self.tmp.name, "s.json")
        p = self.run_cli("run", "--sim", "--stats", path, *args, "--", sys.executable, FAKE, "0",
                         env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(path) as f:
            return json.load(f)["seen_env"]
