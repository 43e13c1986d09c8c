"""The command ended by a signal while it holds temporary files: replay, report and import waiting
on a slow step. Python's default death by SIGTERM or SIGHUP ran no cleanup, and every
/tmp/gpuarena-XXXXXXXX (an imported trace as large as the input) stayed (helper-82, 2026-12-06).
A stand-in gpuarena-replay that waits keeps the command where it holds its folder."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import gatest

LIFETIMES = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")


def default_signals():
    """preexec_fn: the signals these tests send at their default action in the command, whatever
    the test run inherited. A run started as `nohup ... &` has SIGHUP and SIGINT ignored, which
    the command rightly keeps ignored (nohup's promise, a background job's immunity to Ctrl-C):
    the SIGHUP and SIGINT cases then waited 60 s for a command that went on."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


class EndedBySignal(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="sig-")
        self.d = self._tmp.name
        os.makedirs(os.path.join(self.d, "build", "bin"))
        self.tmpdir = os.path.join(self.d, "tmp")
        os.mkdir(self.tmpdir)
        self.pidfile = os.path.join(self.d, "pid")
        tool = os.path.join(self.d, "build", "bin", "gpuarena-replay")
        with open(tool, "w") as f:  # writes its pid once it runs, then waits to be killed
            f.write(f"#!/bin/sh\necho $$ > {self.pidfile}.tmp && mv {self.pidfile}.tmp "
                    f"{self.pidfile}\nexec sleep 600\n")
        os.chmod(tool, 0o755)

    def tearDown(self):
        self._tmp.cleanup()

    def start(self, *args, env=None):
        """The command started with the stand-in tool and TMPDIR=self.tmpdir, once its tool runs
        and its temporary folder exists."""
        full = dict(os.environ, GPUARENA_BUILD=os.path.join(self.d, "build"),
                    TMPDIR=self.tmpdir, **(env or {}))
        proc = subprocess.Popen([sys.executable, gatest.SCRIPT] + list(args), env=full,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=default_signals)
        for _ in range(6000):  # until the tool runs (at most 60 s)
            if os.path.exists(self.pidfile) or proc.poll() is not None:
                break
            time.sleep(0.01)
        if not os.path.exists(self.pidfile):
            proc.kill()
            self.fail(f"the stand-in tool never ran: {proc.communicate()}")
        self.assertTrue([n for n in os.listdir(self.tmpdir) if n.startswith("gpuarena-")],
                        "the command made no temporary folder")
        return proc

    def ended(self, proc, sig):
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        with open(self.pidfile) as f:
            child = int(f.read())
        try:
            os.kill(child, signal.SIGKILL)  # the tool, should it have outlived the command
        except ProcessLookupError:
            pass
        return proc.returncode, err

    def test_replay_removes_its_folder(self):
        """replay of a CSV (imported to a temporary trace first): SIGTERM and SIGHUP end it by
        that signal, its folder removed; SIGINT (Ctrl-C, Python's KeyboardInterrupt) by 130."""
        for sig, want in ((signal.SIGTERM, -signal.SIGTERM), (signal.SIGHUP, -signal.SIGHUP),
                          (signal.SIGINT, 130)):
            with self.subTest(sig=sig.name):
                os.unlink(self.pidfile) if os.path.exists(self.pidfile) else None
                proc = self.start("replay", LIFETIMES)
                code, err = self.ended(proc, sig)
                self.assertEqual(code, want, err)
                self.assertNotIn("Traceback", err)
                self.assertEqual(os.listdir(self.tmpdir), [], "temporary files left behind")
                if sig != signal.SIGINT:
                    self.assertIn(f"gpuarena: stopped by {sig.name}", err)

    def test_tool_killed_by_a_signal_named(self):
        """A replay tool killed by a signal (a crash) was "gpuarena-replay failed (exit -11):
        no message"; now the signal is named, for replay and report, exit 1."""
        tool = os.path.join(self.d, "build", "bin", "gpuarena-replay")
        with open(tool, "w") as f:
            f.write("#!/bin/sh\necho half a line >&2\nkill -SEGV $$\n")
        env = dict(os.environ, GPUARENA_BUILD=os.path.join(self.d, "build"), TMPDIR=self.tmpdir)
        for args in (("replay", LIFETIMES), ("report", LIFETIMES, "-o",
                                             os.path.join(self.d, "r"))):
            with self.subTest(cmd=args[0]):
                p = subprocess.run([sys.executable, gatest.SCRIPT, *args], env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn("gpuarena-replay was killed by SIGSEGV", p.stderr)
                self.assertIn("its stderr: half a line", p.stderr)
                self.assertEqual(os.listdir(self.tmpdir), [])

    def test_stdout_closed_then_signalled(self):
        """Started with standard output closed (>&-) and then ended by SIGTERM: the flush before
        dying met Python's None stdout. `report -o` (its output a folder, so a closed standard
        output is no reason to refuse it: `replay`, whose result is standard output, refuses one
        at once since 2026-12-07)."""
        full = dict(os.environ, GPUARENA_BUILD=os.path.join(self.d, "build"),
                    TMPDIR=self.tmpdir)
        out = os.path.join(self.d, "report-closed")
        proc = subprocess.Popen([sys.executable, gatest.SCRIPT, "report", LIFETIMES, "-o", out],
                                env=full,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: (default_signals(), os.close(1)))
        for _ in range(6000):
            if os.path.exists(self.pidfile) or proc.poll() is not None:
                break
            time.sleep(0.01)
        code, err = self.ended(proc, signal.SIGTERM)
        self.assertEqual(code, -signal.SIGTERM, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(os.listdir(self.tmpdir), [])

    def test_report_removes_its_folder(self):
        """report replays the trace for its reserved curve, in a temporary folder of its own;
        nothing is written at -o either."""
        out = os.path.join(self.d, "out")
        proc = self.start("report", LIFETIMES, "-o", out)
        code, err = self.ended(proc, signal.SIGTERM)
        self.assertEqual(code, -signal.SIGTERM, err)
        self.assertEqual(os.listdir(self.tmpdir), [])
        self.assertEqual(sorted(n for n in os.listdir(self.d) if n.startswith("out")), [])

    def test_nohup_keeps_sighup_ignored(self):
        """A command started with SIGHUP ignored (nohup) goes on past one, as before."""
        full = dict(os.environ, GPUARENA_BUILD=os.path.join(self.d, "build"),
                    TMPDIR=self.tmpdir)
        proc = subprocess.Popen(["nohup", sys.executable, gatest.SCRIPT, "replay", LIFETIMES],
                                env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=self.d)
        for _ in range(6000):
            if os.path.exists(self.pidfile) or proc.poll() is not None:
                break
            time.sleep(0.01)
        self.assertTrue(os.path.exists(self.pidfile))
        proc.send_signal(signal.SIGHUP)
        with open(self.pidfile) as f:
            child = int(f.read())
        os.kill(child, signal.SIGTERM)  # the stand-in tool ends: the command goes on to fail
        proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 1)  # the tool's death, not SIGHUP's
        self.assertEqual(os.listdir(self.tmpdir), [])

    def test_doctor_kills_its_children(self, sig=signal.SIGTERM):
        """doctor's children run in sessions of their own (its timeout kills their groups): a
        SIGTERM to doctor left them running up to --timeout (120 s). Here --python is a stand-in
        that waits."""
        python = os.path.join(self.d, "python")
        with open(python, "w") as f:
            f.write(f"#!/bin/sh\necho $$ > {self.pidfile}.tmp && mv {self.pidfile}.tmp "
                    f"{self.pidfile}\nexec sleep 600\n")
        os.chmod(python, 0o755)
        full = dict(os.environ, TMPDIR=self.tmpdir)
        proc = subprocess.Popen([sys.executable, gatest.SCRIPT, "doctor", "--sim", "--python",
                                 python], env=full, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
        for _ in range(6000):  # until the stand-in runs (at most 60 s)
            if os.path.exists(self.pidfile) or proc.poll() is not None:
                break
            time.sleep(0.01)
        self.assertTrue(os.path.exists(self.pidfile), proc.poll())
        with open(self.pidfile) as f:
            child = int(f.read())
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, -sig, err)
        alive = True
        for _ in range(6000):  # the child gone (at most 60 s; at once when it was killed)
            try:
                os.kill(child, 0)
                with open(f"/proc/{child}/stat") as f:  # a zombie of init's is gone too
                    alive = f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except (ProcessLookupError, FileNotFoundError):
                alive = False
            if not alive:
                break
            time.sleep(0.01)
        if alive:
            os.kill(child, signal.SIGKILL)
        self.assertFalse(alive, "doctor's child outlived it")

    def test_doctor_killed_takes_its_children(self):
        """The same when doctor is killed outright (SIGKILL, `timeout -s KILL`), which no
        handler sees: its children, in sessions of their own, ran on; now each gets SIGTERM
        when the command dies (PR_SET_PDEATHSIG)."""
        self.test_doctor_kills_its_children(signal.SIGKILL)



class CtrlCWhileStarting(unittest.TestCase):
    def test_ctrl_c_while_importing_or_parsing_is_quiet(self):
        # Ctrl-C while Python loaded the package printed a traceback (a check of 2026-12-06;
        # fixed 2026-12-07): a KeyboardInterrupt raised from an import hook, as a SIGINT there
        # would
        d = tempfile.mkdtemp(prefix="gpuarena-ctrlc-")
        try:
            with open(os.path.join(d, "sitecustomize.py"), "w") as f:
                f.write("import os, sys\n"
                        "class F:\n"
                        "    def find_spec(self, name, path=None, target=None):\n"
                        "        if name == os.environ['GA_CTRLC_AT']:\n"
                        "            raise KeyboardInterrupt\n"
                        "sys.meta_path.insert(0, F())\n")
            for at, args in (("gpuarena_cli.report", ["--help"]),
                             ("gpuarena_cli.argtypes", ["replay", LIFETIMES])):
                env = {"PYTHONPATH": d, "GA_CTRLC_AT": at}
                p = gatest.cli(*args, env=env)
                self.assertEqual(p.returncode, 130, (at, p.stderr))
                self.assertNotIn("Traceback", p.stderr)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class CleanupNotCutShort(unittest.TestCase):
    def test_signal_during_removal_waits_for_it(self):
        """A SIGTERM that arrives while the temporary folder is being removed (on the way out of
        a command that finished) arrives once it is gone: it raised in the middle of the removal
        and part of the folder stayed. In this process, with the command's handlers in place and
        the removal made to send the signal itself before it starts."""
        import shutil
        from gpuarena_cli import ending
        real = shutil.rmtree
        calls = []

        def rmtree_signalled(path, *a, **kw):
            calls.append(path)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0)  # a bytecode boundary, where a Python handler would run
            real(path, *a, **kw)

        old = ending.install()
        try:
            with tempfile.TemporaryDirectory() as base:
                shutil.rmtree = rmtree_signalled
                try:
                    with self.assertRaises(ending.Ended):
                        with ending.temporary_folder(dir=base) as d:
                            with open(os.path.join(d, "imported.gatrace"), "wb") as f:
                                f.write(b"x" * 4096)
                finally:
                    shutil.rmtree = real
                self.assertEqual(len(calls), 1)
                self.assertEqual(os.listdir(base), [])
        finally:
            ending.restore(old)


if __name__ == "__main__":
    unittest.main()
