"""Shared helpers for the `gpuarena` command tests: where things are, and running the command.

Tests drive the command from outside (a subprocess, as a user would) wherever exit codes, messages
and files left behind matter, and import the package directly only for the pure functions.
Locations come from the environment the tier rule sets (GA_TRACES_DIR, GPUARENA_BUILD), with
defaults for a checkout so a test file also runs alone.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "gpuarena")
TRACES = os.environ.get("GA_TRACES_DIR", os.path.join(REPO, "..", "shared", "traces"))
BUILD = os.path.abspath(os.environ.get("GPUARENA_BUILD", os.path.join(REPO, "build")))

sys.path.insert(0, os.path.join(REPO, "scripts"))

# The commands the tests run make their temporary folders under TMPDIR: a folder of this test
# run's own, so that one a command leaves is seen (leftovers(), checked after every test by
# run_tests.py) and never piles up in /tmp (a killed command's folders did, one per run).
if not os.environ.get("GA_TEST_TMPDIR"):
    os.environ["GA_TEST_TMPDIR"] = os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="gatest-")
    tempfile.tempdir = None  # this process's own temporaries go there too
    atexit.register(shutil.rmtree, os.environ["GA_TEST_TMPDIR"], True)


def leftovers():
    """What the command left in the test run's TMPDIR: its gpuarena-* folders; removed here, so
    that the next test starts clean."""
    d = os.environ["GA_TEST_TMPDIR"]
    left = sorted(n for n in os.listdir(d) if n.startswith("gpuarena-"))
    for n in left:
        shutil.rmtree(os.path.join(d, n), ignore_errors=True)
    return left

# In a sanitizer build (make asan) the tier passes the ASan runtime, which a sanitizer-built shim
# needs loaded first; leak checking is off because the Python interpreter itself is not clean.
SAN_RUNTIME = os.environ.get("GA_SAN_RUNTIME", "").strip()
SAN_ENV = {"LD_PRELOAD": SAN_RUNTIME, "ASAN_OPTIONS": "detect_leaks=0"} if SAN_RUNTIME else {}


def python_with_matplotlib():
    """An interpreter that can import matplotlib (this one, or Debian's), or None."""
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run(
                [py, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, check=False).returncode == 0:
            return py
    return None


MPL_PYTHON = python_with_matplotlib()


def traces(sub):
    """Every file of one traces subfolder, sorted; an empty folder is a test setup error."""
    d = os.path.join(TRACES, sub)
    files = sorted(os.path.join(d, f) for f in os.listdir(d))
    assert files, f"no traces in {d}: set GA_TRACES_DIR to shared/traces"
    return files


def cli(*args, env=None, cwd=None, timeout=120):
    """Runs the gpuarena command; returns the CompletedProcess with text stdout/stderr."""
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run([sys.executable, SCRIPT] + [str(a) for a in args], env=full, cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, check=False)


def cli_inproc(*args):
    """Runs the command's main() in this process (fast; same code path after the interpreter
    starts); returns an object with returncode, stdout and stderr like cli()."""
    import contextlib
    import io
    import types
    from gpuarena_cli import cli as cli_mod
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_mod.main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


# test/cmd/group_member.c, built by make test-cmd: a process that joins a group ledger and holds it.
GROUP_MEMBER = os.path.join(BUILD, "test", "group_member")


class MemberProcs:
    """Mixin for tests that start group_member processes: a folder of ledgers of their own
    (self.dir, named from `prefix`) and the processes started (self.procs), each told to leave
    (stdin closed) and waited for at the end."""
    prefix = "gpuarena-member-"

    def setUp(self):
        self.assertTrue(os.path.exists(GROUP_MEMBER), f"{GROUP_MEMBER} missing: make test-cmd builds it")
        self.dir = tempfile.mkdtemp(prefix=self.prefix)
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.stdin.close()
            p.wait(timeout=30)
            p.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class CliAsserts:
    """Mixin: assertions on how the command failed."""

    def assertCleanError(self, proc, *needles, code=1):
        self.assertEqual(proc.returncode, code, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertTrue(proc.stderr.startswith("gpuarena:"), proc.stderr)  # usage errors too
        for n in needles:
            self.assertIn(n, proc.stderr)
