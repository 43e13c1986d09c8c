"""`gpuarena run` and `compare` against a fake program and a do-nothing shim, so the command's own
logic (environment, exit codes, stats reading in both formats, tables built from the statistics,
the --plot chart and its fallback without matplotlib, refusals) is tested without the real shim;
the real shim and simulated driver are exercised in test_e2e.py. The fake build has no driver, so
runs use --sim (its sim/ folder) unless a test is about the driver check itself."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import gatest
from runner_fixture import FAKE, RunnerFixture, fake_build


class RunCompare(RunnerFixture, unittest.TestCase, gatest.CliAsserts):
    def test_run_sets_environment(self):
        seen = self.stats_of("--mode", "platform", "--limit", "8GiB",
                             "--env", "FAKE_EXTRA=yes", "--trace", "/tmp/t.gatrace")
        self.assertEqual(seen["LD_PRELOAD"], self.shim)
        self.assertEqual(seen["GPUARENA_MODE"], "platform")
        self.assertEqual(seen["GPUARENA_LIMIT"], "8GiB")
        self.assertEqual(seen["GPUARENA_TRACE"], "/tmp/t.gatrace")
        self.assertEqual(seen["FAKE_EXTRA"], "yes")
        self.assertEqual(seen["GPUARENA_PREALLOCATE"], "false")
        seen = self.stats_of("--mode", "arena", "--fraction", "0.5+")
        self.assertEqual(seen["GPUARENA_MEM_FRACTION"], "0.5+")
        seen = self.stats_of("--mode", " Arena ")
        self.assertEqual((seen["GPUARENA_MODE"], seen["GPUARENA_PREALLOCATE"]), ("arena", "true"))
        seen = self.stats_of("--mode", "GROW")
        self.assertEqual((seen["GPUARENA_MODE"], seen["GPUARENA_PREALLOCATE"]), ("arena", "false"))
        seen = self.stats_of("--mode", "vmm", "--limit", " 1.5 gib ")
        self.assertEqual(seen["GPUARENA_MODE"], "vmm")
        self.assertEqual(seen["GPUARENA_LIMIT"], "1.5 gib")

    def test_run_keeps_existing_preload_and_sim_path(self):
        seen = self.stats_of("--no-preallocate", "--limit", "50%",
                             env={"LD_PRELOAD": "libm.so.6", "LD_LIBRARY_PATH": "/opt/x"})
        self.assertEqual(seen["LD_PRELOAD"], f"{self.shim}:libm.so.6")
        self.assertEqual(seen["LD_LIBRARY_PATH"], os.path.join(self.build, "sim") + ":/opt/x")
        self.assertEqual(seen["GPUARENA_PREALLOCATE"], "false")
        self.assertEqual(seen["GPUARENA_LIMIT"], "50%")

    def test_run_exit_code_and_summary(self):
        p = self.run_cli("run", "--sim", "--", sys.executable, FAKE, "7")
        self.assertEqual(p.returncode, 7, p.stderr)
        self.assertIn("fakeprog: mode arena", p.stdout)
        self.assertIn("gpuarena: mode arena", p.stderr)
        self.assertIn("peak in use 1.00 MiB", p.stderr)
        for fmt in ("1", "2"):  # the summary reads both statistics formats
            p = self.run_cli("run", "--sim", "--mode", "grow", "--", sys.executable, FAKE, "0",
                             env={"FAKE_STATS_FORMAT": fmt})
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("gpuarena: mode grow, limit none", p.stderr)
        p = gatest.cli("run", "--sim", "--limit", "1000000TiB", "--",
                       os.path.join(gatest.BUILD, "examples", "ex_direct"), "4", "4", "1",
                       env={"SIMCUDA_TOTAL_MEM": "8GiB"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("limit 976.56 PiB (above the device: cap 8.00 GiB) per device", p.stderr)
        self.assertNotIn("raise --limit", p.stderr)
        # Out of memory under --limit: the summary names the option the user typed, where the
        # shim's line names GPUARENA_LIMIT (helper-67 F17.8).
        p = gatest.cli("run", "--sim", "--limit", "1MiB", "--",
                       os.path.join(gatest.BUILD, "examples", "ex_train"), "1")
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertIn("raise GPUARENA_LIMIT", p.stderr)
        self.assertIn("gpuarena: 1 of the failures found too few bytes left under the limit: "
                      "raise --limit", p.stderr)
        # ... and the way the cap was set when it was not --limit: an exported GPUARENA_LIMIT,
        # one given with --env, a device plugin's variable (helper-51 R6: "raise --limit" for the
        # first two, nothing for the last)
        train = os.path.join(gatest.BUILD, "examples", "ex_train")
        for args, env, what in (
                ([], {"GPUARENA_LIMIT": "1MiB"}, "raise the GPUARENA_LIMIT exported in the environment"),
                (["--env", "GPUARENA_LIMIT=1MiB"], {}, "raise the GPUARENA_LIMIT given with --env"),
                ([], {"CUDA_DEVICE_MEMORY_LIMIT": "1m"},
                 "raise the device plugin's CUDA_DEVICE_MEMORY_LIMIT (HAMi, KAI"),
                ([], {"CUDA_DEVICE_MEMORY_LIMIT_0": "1m"},
                 "raise the device plugin's CUDA_DEVICE_MEMORY_LIMIT_<i> (HAMi, KAI")):
            p = gatest.cli("run", "--sim", *args, "--", train, "1", env=env)
            self.assertNotEqual(p.returncode, 0, p.stderr)
            self.assertIn("1 of the failures found too few bytes left under the limit: " + what,
                          p.stderr)
            self.assertNotIn("raise --limit", p.stderr)
        # a program that sets its own GPUARENA_LIMIT under --limit: named as such (helper-81 F2)
        p = gatest.cli("run", "--sim", "--limit", "1GiB", "--", "sh", "-c",
                       f"GPUARENA_LIMIT=1MiB {train} 1")
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertIn("raise the GPUARENA_LIMIT the program sets itself", p.stderr)
        p = gatest.cli("run", "--sim", "--limit", "50%", "--", "sh", "-c",
                       f"GPUARENA_LIMIT=1MiB {train} 1")
        self.assertIn("raise the GPUARENA_LIMIT the program sets itself", p.stderr)
        # a per-device variable above the limit does not bind: the limit is named (helper-81 F1)
        for args, env, what in (
                (["--limit", "1MiB"], {}, "raise --limit"),
                (["--env", "GPUARENA_LIMIT=1MiB"], {}, "raise the GPUARENA_LIMIT given with --env"),
                ([], {"GPUARENA_LIMIT": "1MiB"}, "raise the GPUARENA_LIMIT exported")):
            p = gatest.cli("run", "--sim", *args, "--", train, "1",
                           env=dict(env, CUDA_DEVICE_MEMORY_LIMIT_0="1g"))
            self.assertNotEqual(p.returncode, 0, p.stderr)
            self.assertIn("gpuarena: mode arena, limit 1.00 MiB per device\n", p.stderr)
            self.assertIn("1 of the failures found too few bytes left under the limit: " + what,
                          p.stderr)
            self.assertNotIn("CUDA_DEVICE_MEMORY_LIMIT_<i>", p.stderr)
        # Two devices: the cap is each device's, the peaks are sums (helper-49 F3: "limit 512 MiB
        # ... peak reserved 768 MiB" read as a cap exceeded)
        from gpuarena_cli import runner
        two = {"gpuarena_stats": 2, "mode": "arena", "options": {"limit": 512 << 20},
               "totals": {"peak_in_use": 108 << 20, "peak_reserved": 768 << 20},
               "devices": [{"device": 1, "cap": 512 << 20}, {"device": 0, "cap": 512 << 20}]}
        text = runner.summary(two)
        self.assertIn("gpuarena: mode arena, limit 512.00 MiB per device\n", text)
        self.assertIn("peak reserved 768.00 MiB (summed over 2 devices)", text)
        p = self.run_cli("run", "--sim", "--", sys.executable, FAKE, "0", "--no-stats")
        self.assertEqual(p.returncode, 0)
        self.assertIn("wrote no statistics", p.stderr)
        # HAMi's per-device caps are named, not "limit none" (helper-49 F10)
        p = gatest.cli("run", "--sim", "--",
                       os.path.join(gatest.BUILD, "examples", "ex_direct"), "4", "4", "1",
                       env={"SIMCUDA_TOTAL_MEM": "1GiB", "CUDA_DEVICE_MEMORY_LIMIT_0": "64m"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gpuarena: mode arena, limit 64.00 MiB on device 0 "
                      "(CUDA_DEVICE_MEMORY_LIMIT_<i>)\n", p.stderr)
        text = runner.summary(dict(two, options={}), {"CUDA_DEVICE_MEMORY_LIMIT_0": "512m",
                                                      "CUDA_DEVICE_MEMORY_LIMIT_1": "512m"})
        self.assertIn("limit 512.00 MiB on device 0, 512.00 MiB on device 1 "
                      "(CUDA_DEVICE_MEMORY_LIMIT_<i>)", text)
        # the global variable with one device's own: each device's cap, not "64 MiB per device"
        mixed = dict(two, options={"limit": 64 << 20, "limit_from": "CUDA_DEVICE_MEMORY_LIMIT"},
                     devices=[{"device": 0, "cap": 64 << 20}, {"device": 1, "cap": 128 << 20}])
        text = runner.summary(mixed, {"CUDA_DEVICE_MEMORY_LIMIT": "64m",
                                      "CUDA_DEVICE_MEMORY_LIMIT_1": "128m"})
        self.assertIn("limit 64.00 MiB on device 0, 128.00 MiB on device 1 "
                      "(CUDA_DEVICE_MEMORY_LIMIT_<i>)\n", text)

    def test_run_signal_exit_code(self):
        p = self.run_cli("run", "--sim", "--", sys.executable, "-c",
                         "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
        self.assertEqual(p.returncode, 128 + 15)

    def signalled(self, sig, sub, handler_exit, *opts):
        """Starts `gpuarena SUB --sim OPTS -- <a program that waits for a signal>`, sends `sig`
        to the command alone once the program is ready, and returns (command's process, stderr,
        program's pids, signals the program got, what is left in the command's TMPDIR)."""
        d = tempfile.mkdtemp(dir=self.tmp.name)
        tmpdir, marker = os.path.join(d, "tmp"), os.path.join(d, "got")
        os.mkdir(tmpdir)
        prog = ("import os, signal, sys\n"
                "marker, code = sys.argv[1], sys.argv[2]\n"
                "def on(sig, _):\n"
                "    open(marker, 'a').write(signal.Signals(sig).name + '\\n')\n"
                "    sys.exit(int(code))\n"
                "if code != 'default':\n"
                "    signal.signal(signal.SIGTERM, on)\n"
                "    signal.signal(signal.SIGHUP, on)\n"
                "    signal.signal(signal.SIGUSR1, on)\n"
                "    signal.signal(signal.SIGUSR2, on)\n"
                "    signal.signal(signal.SIGALRM, on)\n"
                "open(marker + '.ready', 'a').write(f'{os.getpid()}\\n')\n"
                "while True:\n    signal.pause()\n")
        full = dict(os.environ, **self.env, TMPDIR=tmpdir)
        proc = subprocess.Popen([sys.executable, gatest.SCRIPT, sub, "--sim", *opts, "--",
                                 sys.executable, "-c", prog, marker, handler_exit], env=full,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = marker + ".ready"
        for _ in range(1200):  # until the program has its handlers in place (at most a minute)
            # not only made: written (the program opens it, then writes its pid; a test that read
            # it in between found no pid, a failure once in a few hundred runs under load)
            if (os.path.exists(ready) and os.path.getsize(ready) > 0) or proc.poll() is not None:
                break
            time.sleep(0.05)
        try:
            self.assertIsNone(proc.poll(), "the command ended before its program was ready")
            proc.send_signal(sig)
            proc.wait(timeout=120)
        finally:
            with open(marker + ".ready") as f:
                pids = [int(x) for x in f.read().split()]
            survivors = [pid for pid in pids if self.running(pid)]
            for pid in survivors:  # a program left behind by the command: the bug itself
                os.kill(pid, signal.SIGKILL)
            _, err = proc.communicate(timeout=120)
        got = []
        if os.path.exists(marker):
            with open(marker) as f:
                got = f.read().split()
        self.assertEqual(survivors, [], "the program was left running")
        return proc, err, pids, got, os.listdir(tmpdir)

    @staticmethod
    def running(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:  # reaped by the command before it exited
            return False
        return True

    def test_run_passes_sigterm_and_sighup_on(self):
        for sig, code, want_rc in ((signal.SIGTERM, "7", 7), (signal.SIGHUP, "0", 0),
                                   (signal.SIGALRM, "3", 3),
                                   (signal.SIGTERM, "default", 128 + signal.SIGTERM),
                                   (signal.SIGHUP, "default", 128 + signal.SIGHUP)):
            with self.subTest(sig=sig.name, program_exit=code):
                proc, err, pids, got, left = self.signalled(sig, "run", code)
                self.assertEqual(proc.returncode, want_rc, err)
                self.assertEqual(got, [] if code == "default" else [sig.name])
                self.assertEqual(len(pids), 1)
                self.assertEqual(left, [], "temporary folders left behind")
                self.assertNotIn("Traceback", err)

    def test_run_passes_sigusr_on(self):
        """SIGUSR1 and SIGUSR2 (Slurm's --signal=USR1@60 asks for a checkpoint) reach the program,
        and the command waits for it (they killed the command and left the program running,
        unsignalled: helper-67 F2)."""
        for sig in (signal.SIGUSR1, signal.SIGUSR2):
            with self.subTest(sig=sig.name):
                proc, err, pids, got, left = self.signalled(sig, "run", "4")
                self.assertEqual(proc.returncode, 4, err)
                self.assertEqual(got, [sig.name])
                self.assertEqual(left, [], "temporary folders left behind")
                self.assertNotIn("Traceback", err)

    def test_relative_trace_from_the_environment_made_absolute(self):
        """An exported or --env GPUARENA_TRACE that is relative reaches the program absolute, as
        --trace does (it was passed as it was, and a program that changed folder first wrote it
        there: helper-67 F15)."""
        want = os.path.abspath("rel-%p.gatrace")
        self.assertEqual(self.stats_of(env={"GPUARENA_TRACE": "rel-%p.gatrace"})
                         ["GPUARENA_TRACE"], want)
        p = self.run_cli("compare", "--sim", "--json", "--modes", "arena", "--env",
                         "GPUARENA_TRACE=rel-%p.gatrace", "--", sys.executable, FAKE, "0")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["arena"]["stats"]["seen_env"]["GPUARENA_TRACE"],
                         want)

    def test_unknown_options_are_the_subcommands(self):
        """An option a subcommand does not know is its usage error, with its usage (it was said
        at the top level, with the top-level usage: helper-67 F17.1)."""
        for sub in (("run", "--sim"), ("compare",), ("replay", "x.csv"), ("top", "--once")):
            p = self.run_cli(*sub, "--mdoe", "vmm", "--", "true")
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(f"gpuarena: unrecognized arguments: --mdoe", p.stderr)
            self.assertIn(f"(see gpuarena {sub[0]} --help)", p.stderr)
            self.assertIn(f"usage: gpuarena {sub[0]} ", p.stderr)

    def test_size_split_by_the_shell(self):
        """`--limit 8 GiB` (the grammar's 8 GiB, unquoted) is a usage error that says the shell
        split it, in run, compare and replay: GiB was "command not found", the trace, or an
        unknown argument (an outside check, 2026-12-06). After --, a program may be named GiB."""
        for args in (("run", "--sim", "--limit", "8", "GiB", "--", "true"),
                     ("compare", "--sim", "--limit", "50", "%", "--", "true"),
                     ("run", "--sim", "--mode", "vmm", "--vmm-keep", "0", "MiB", "--", "true"),
                     ("replay", "x.csv", "--limit", "1.5", "g"),
                     ("replay", "--arena-size", "8", "GiB", "x.csv")):
            i = args.index("--limit") if "--limit" in args else \
                args.index("--vmm-keep") if "--vmm-keep" in args else args.index("--arena-size")
            opt, num, unit = args[i:i + 3]
            p = self.run_cli(*args)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(f"gpuarena: {opt} {num} {unit}: the shell splits a size written with a "
                          f"space in two; write it without the space ({num}{unit}) or quote it "
                          f"('{num} {unit}') (see gpuarena {args[0]} --help)", p.stderr)
        p = self.run_cli("compare", "--sim", "--env", "SIMCUDA_TOTAL_MEM=4", "GiB", "--", "true")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("gpuarena: --env SIMCUDA_TOTAL_MEM=4 GiB: the shell splits a size written "
                      "with a space in two; write it without the space (SIMCUDA_TOTAL_MEM=4GiB)",
                      p.stderr)
        p = self.run_cli("run", "--sim", "--limit", "8", "--", "GiB")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("command not found: GiB", p.stderr)

    def test_misspelt_option_named(self):
        """A misspelt option names the one it most likely means, by the rule of the shim's
        misspelt settings (it said "unrecognized arguments: --limt" alone: an outside check,
        2026-12-06); one nothing is near gets no guess."""
        for sub, rest in ((("run", "--sim"), ("--", "true")), (("compare", "--sim"), ("--", "true")),
                          (("replay", "x.csv"), ())):
            for typed, want in (("--limt=1GiB", "--limit"), ("--limit-gb=1", "--limit"),
                                ("--lmiit=1GiB", "--limit")):
                p = self.run_cli(*sub, typed, *rest)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(f"gpuarena: unrecognized arguments: {typed} (did you mean {want}?) "
                              f"(see gpuarena {sub[0]} --help)", p.stderr)
        p = self.run_cli("run", "--sim", "--mdoe", "vmm", "--", "true")
        self.assertIn("--mdoe (did you mean --mode?)", p.stderr)
        p = self.run_cli("run", "--sim", "--foo", "--", "true")
        self.assertIn("gpuarena: unrecognized arguments: --foo (see gpuarena run --help)",
                      p.stderr)

    def test_stats_into_a_closed_pipe(self):
        """--stats /dev/stdout into a pipe whose reader is gone: the hint names the pipe, not the
        folder (helper-67 F17.5)."""
        r, w = os.pipe()
        os.close(r)
        p = subprocess.run([sys.executable, gatest.SCRIPT, "run", "--sim", "--stats",
                            "/dev/stdout", "--", sys.executable, FAKE, "0"],
                           env=dict(os.environ, **self.env, FAKE_QUIET="1"), stdout=w,
                           stderr=subprocess.PIPE,
                           text=True, check=False)
        os.close(w)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("cannot write the statistics: Broken pipe (the reader of the pipe went "
                      "away", p.stderr)

    def test_compare_stops_on_sigterm(self):
        for sig in (signal.SIGTERM, signal.SIGHUP):
            with self.subTest(sig=sig.name):
                proc, err, pids, got, left = self.signalled(sig, "compare", "0", "--modes",
                                                            "arena,platform", "--repeat", "2")
                self.assertEqual(proc.returncode, 128 + sig, err)
                self.assertIn(f"gpuarena: stopped by {sig.name}, passed on to the program", err)
                self.assertEqual((len(pids), got), (1, [sig.name]))  # no run started after it
                self.assertEqual(left, [])

    def test_ctrl_c_is_left_to_the_program(self):
        """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) reaches the program
        itself: the command waits while the program's handler finishes its work, then exits with
        the program's code (helper-67 F2: the program was SIGKILLed 0.25 s after, its handler cut
        off). A SIGINT sent to the command alone is passed on the second time."""
        prog = ("import os, signal, sys, time\n"
                "marker = sys.argv[1]\n"
                "def on(sig, _):\n"
                "    open(marker, 'a').write(signal.Signals(sig).name + '\\n')\n"
                "    while not os.path.exists(marker + '.release'):\n"
                "        time.sleep(0.01)\n"
                "    open(marker, 'a').write('saved\\n')\n"
                "    sys.exit(5)\n"
                "signal.signal(signal.SIGINT, on)\n"
                "signal.signal(signal.SIGQUIT, on)\n"
                "open(marker + '.ready', 'a').close()\n"
                "while True:\n    signal.pause()\n")
        for sub, group, sig in (("run", True, signal.SIGINT), ("compare", True, signal.SIGINT),
                                ("run", False, signal.SIGINT), ("run", True, signal.SIGQUIT)):
            with self.subTest(sub=sub, group=group, sig=sig.name):
                d = tempfile.mkdtemp(dir=self.tmp.name)
                marker = os.path.join(d, "got")
                extra = ("--modes", "arena,grow") if sub == "compare" else ()
                proc = subprocess.Popen([sys.executable, gatest.SCRIPT, sub, "--sim", *extra,
                                         "--", sys.executable, "-c", prog, marker],
                                        env=dict(os.environ, **self.env), start_new_session=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                try:
                    for _ in range(1200):  # the program's handler in place (a minute at most)
                        if os.path.exists(marker + ".ready") or proc.poll() is not None:
                            break
                        time.sleep(0.05)
                    self.assertIsNone(proc.poll(), "the command ended before its program")
                    if group:  # what a terminal's Ctrl-C (Ctrl-\\) does
                        os.killpg(proc.pid, sig)
                    else:
                        proc.send_signal(sig)
                        time.sleep(0.2)
                        self.assertFalse(os.path.exists(marker), "a first SIGINT to the "
                                         "command alone was passed on")
                        proc.send_signal(sig)
                    for _ in range(1200):
                        if os.path.exists(marker):
                            break
                        time.sleep(0.05)
                    # The handler now waits for the release: the command must wait with it
                    # (it killed the program 0.25 s after the SIGINT before).
                    for _ in range(20):
                        self.assertIsNone(proc.poll(), "the command ended while the program's "
                                          "handler ran")
                        time.sleep(0.05)
                    open(marker + ".release", "w").close()
                    _, err = proc.communicate(timeout=120)
                finally:
                    if proc.poll() is None:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                with open(marker) as f:
                    self.assertEqual(f.read().split(), [sig.name, "saved"])
                self.assertNotIn("Traceback", err)
                if sub == "run":
                    self.assertEqual(proc.returncode, 5, err)
                else:  # the runs left are not started
                    self.assertEqual(proc.returncode, 128 + signal.SIGINT, err)
                    self.assertIn("stopped by SIGINT, which the program got too", err)

    def test_run_checks_output_folders_first(self):
        """--stats and --trace in a folder that is missing or cannot be written are refused
        before the program runs (the program ran to its end and the output was lost; a lost
        trace even exited 0: helper-67 F1)."""
        marker = os.path.join(self.tmp.name, "ran")
        prog = [sys.executable, "-c", f"open({marker!r}, 'w').close()"]
        for option, path, why in (("--stats", "/nonexistent/d/s.json", "does not exist"),
                                  ("--trace", "/nonexistent/t.gatrace", "does not exist"),
                                  ("--stats", "/proc/s.json", "cannot write in the folder"),
                                  ("--trace", "/proc/t%p.gatrace", "cannot write in the folder")):
            with self.subTest(option=option, path=path):
                p = self.run_cli("run", "--sim", option, path, "--", *prog)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(f"gpuarena: {option} {path}: ", p.stderr)
                self.assertIn(why, p.stderr)
                self.assertIn("checked before the program runs", p.stderr)
                self.assertFalse(os.path.exists(marker), "the program ran")

    def test_compare_shows_the_shims_lines_and_failures(self):
        """What the shim printed (a misspelt setting) is shown under the table, once per mode;
        a mode whose program failed is said with its last output; the command fails when the
        program failed in every mode (it exited 0: helper-67 F3)."""
        say = "gpuarena: unknown setting GPUARENA_LIMT (did you mean GPUARENA_LIMIT?); it is ignored"
        p = self.run_cli("compare", "--sim", "--modes", "arena,vmm", "--repeat", "2", "--",
                         sys.executable, FAKE, "0", env={"FAKE_SAY": say})
        self.assertEqual(p.returncode, 0, p.stderr)
        for m in ("arena", "vmm"):
            self.assertIn(f"gpuarena: mode {m}: the shim said:\n  {say}\n", p.stderr)
        self.assertEqual(p.stderr.count(say), 2)
        p = self.run_cli("compare", "--sim", "--modes", "arena,grow", "--", sys.executable, FAKE,
                         "0", env={"FAKE_FAIL_MODE": "grow"})
        self.assertEqual(p.returncode, 0, p.stderr)  # a failure in one mode is a result
        self.assertIn("gpuarena: mode grow: the program exited 1; its last output:\n"
                      "fakeprog: mode grow", p.stderr)
        self.assertNotIn("mode arena: the program exited", p.stderr)
        p = self.run_cli("compare", "--sim", "--modes", "arena,grow", "--", sys.executable, FAKE,
                         "3", env={"FAKE_SAY": "gpuarena: out of memory: raise GPUARENA_LIMIT"})
        self.assertEqual(p.returncode, 1, p.stderr)
        for m in ("arena", "grow"):
            self.assertIn(f"gpuarena: mode {m}: the program exited 3; its last output:\n"
                          f"fakeprog: mode {m}\n", p.stderr)
        self.assertEqual(p.stderr.count("out of memory: raise GPUARENA_LIMIT"), 2)  # not thrice
        doc = json.loads(self.run_cli("compare", "--sim", "--json", "--modes", "arena", "--",
                                      sys.executable, FAKE, "0", env={"FAKE_SAY": say}).stdout)
        self.assertEqual(doc["arena"]["shim_said"], [say])

    def test_compare_output_bounded(self):
        """A run's output is not kept on disk: what the command's temporary folder holds while a
        program prints 4 MiB a run stays under 64 KiB whatever the number of runs (each run's whole
        output was kept there until the table: helper-67 F4)."""
        d = tempfile.mkdtemp(dir=self.tmp.name)
        tmpdir, log = os.path.join(d, "tmp"), os.path.join(d, "held")
        os.mkdir(tmpdir)
        p = self.run_cli("compare", "--sim", "--modes", "arena,grow", "--repeat", "3", "--",
                         sys.executable, FAKE, "0",
                         env={"FAKE_NOISE": str(4 << 20), "FAKE_NOISE_LOG": log,
                              "TMPDIR": tmpdir})
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(log) as f:
            held = [int(x) for x in f.read().split()]
        self.assertEqual(len(held), 6)
        self.assertLess(max(held), 64 << 10, held)
        self.assertEqual(os.listdir(tmpdir), [])

    def test_outputs_never_over_files_to_be_or_gpuarenas_own(self):
        """--stats/--trace naming a file the program is to write (named in the command, not there
        yet: the program's result was replaced at exit, helper-67 F8), or gpuarena's own shim,
        replay tool or simulated driver (the shim became JSON and every later run ran uncapped,
        F11): a usage error, nothing run, nothing written."""
        d = tempfile.mkdtemp(dir=self.tmp.name)
        out = os.path.join(d, "result.json")
        marker = os.path.join(d, "ran")
        prog = [sys.executable, "-c", f"open({marker!r}, 'w').close()"]
        with open(self.shim, "rb") as f:
            shim_bytes = f.read()
        with open(os.path.join(d, "copy.so"), "wb") as f:
            f.write(shim_bytes)
        with open(os.path.join(d, "train.sh"), "w") as f:
            f.write("#!/bin/sh\necho training\n")
        with open(os.path.join(d, "lib.a"), "wb") as f:
            f.write(b"!<arch>\nmember/")
        for option, path, args, why in (
                ("--stats", out, [out], "is named in the command"),
                ("--trace", out, ["--output", out], "is named in the command"),
                ("--stats", out, [f"--output={out}"], "is named in the command"),
                ("--stats", self.shim, [], "is gpuarena's shim"),
                ("--trace", os.path.join(self.build, "sim", "libcuda.so.1"), [],
                 "is the simulated driver"),
                # a copy of the shim elsewhere (an installed one), or any program: ELF files
                ("--stats", os.path.join(d, "copy.so"), [], "is a program or library"),
                ("--trace", os.path.join(d, "copy.so"), [], "is a program or library"),
                ("--stats", os.path.join(d, "train.sh"), [], "is a program or library"),
                ("--trace", os.path.join(d, "lib.a"), [], "is a program or library")):
            with self.subTest(option=option, args=args):
                p = self.run_cli("run", "--sim", option, path, "--", *prog, *args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(why, p.stderr)
                self.assertFalse(os.path.exists(marker), "the program ran")
                self.assertFalse(os.path.exists(out))
        for piece in (self.shim, os.path.join(d, "copy.so")):
            with open(piece, "rb") as f:
                self.assertEqual(f.read(), shim_bytes)
        # A file of another name, or the same name in another folder, is fine.
        p = self.run_cli("run", "--sim", "--stats", out, "--", sys.executable, FAKE, "0",
                         os.path.join(d, "sub", "result.json"))
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_plot_never_over_the_programs_files(self):
        """compare --plot PREFIX: a PREFIX.png the command names (existing or not) is refused as
        run's --stats is, nothing run (the plot replaced it, exit 0: helper-72 NEW-1); and
        --stats over the simulated NVML (helper-72 NEW-3)."""
        d = tempfile.mkdtemp(dir=self.tmp.name)
        png = os.path.join(d, "mine.png")
        marker = os.path.join(d, "ran")
        prog = [sys.executable, "-c", f"open({marker!r}, 'w').close()"]
        for exists in (False, True):
            if exists:
                with open(png, "w") as f:
                    f.write("keep")
            p = self.run_cli("compare", "--sim", "--modes", "arena", "--plot",
                             os.path.join(d, "mine"), "--", *prog, png)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(f"--plot {png} is", p.stderr)
            self.assertFalse(os.path.exists(marker))
        with open(png) as f:
            self.assertEqual(f.read(), "keep")
        nvml = os.path.join(self.build, "sim", "libnvidia-ml.so.1")
        open(nvml, "w").close()
        try:
            p = self.run_cli("run", "--sim", "--stats", nvml, "--", *prog)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("is the simulated NVML", p.stderr)
            self.assertEqual(os.path.getsize(nvml), 0)
        finally:
            os.remove(nvml)

    def test_compare_repeats_that_fail(self):
        """--repeat: every run's exit code is in the table (0,7,0) and --json (`exits`), the
        column's figures are the median of the runs that succeeded, and the failed run is said
        (a failed repeat vanished, its wall time counted: helper-67 F13)."""
        d = tempfile.mkdtemp(dir=self.tmp.name)
        count = os.path.join(d, "n")
        prog = ("import os, subprocess, sys\n"
                f"n = int(open({count!r}).read()) + 1 if os.path.exists({count!r}) else 1\n"
                f"open({count!r}, 'w').write(str(n))\n"
                f"subprocess.run([sys.executable, {FAKE!r}, '7' if n == 2 else '0'])\n"
                "sys.exit(7 if n == 2 else 0)\n")
        p = self.run_cli("compare", "--sim", "--modes", "arena", "--repeat", "3", "--",
                         sys.executable, "-c", prog)
        self.assertEqual(p.returncode, 0, p.stderr)  # two of three succeeded
        self.assertEqual(p.stdout.splitlines()[-1].split(), ["exit", "code", "0,7,0"])
        self.assertIn("gpuarena: mode arena: the program exited 7 in 1 of its 3 runs (the figures "
                      "are of the runs that succeeded)", p.stderr)
        os.remove(count)
        doc = json.loads(self.run_cli("compare", "--sim", "--json", "--modes", "arena",
                                      "--repeat", "3", "--", sys.executable, "-c", prog).stdout)
        self.assertEqual(doc["arena"]["exits"], [0, 7, 0])
        self.assertEqual(doc["arena"]["exit"], 7)
        self.assertEqual(len(doc["arena"]["walls_ns"]), 3)

    def test_compare_stdin_is_dev_null(self):
        """compare gives the program /dev/null as its standard input (several runs cannot share
        one), and says so in its help and the README (helper-67 F17.12)."""
        prog = ("import subprocess, sys\n"
                "x = sys.stdin.read()\n"
                f"subprocess.run([sys.executable, {FAKE!r}, '0'])\n"
                "sys.exit(3 if x else 0)\n")
        full = dict(os.environ, **self.env)
        p = subprocess.run([sys.executable, gatest.SCRIPT, "compare", "--sim", "--modes", "arena",
                            "--", sys.executable, "-c", prog], input="5\n", env=full, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)  # the program read nothing
        self.assertEqual(p.stdout.splitlines()[-1].split(), ["exit", "code", "0"])
        self.assertIn("standard input is /dev/null", " ".join(self.run_cli("compare", "--help").stdout.split()))

    def test_shim_path_the_loader_would_split(self):
        # ld.so splits LD_PRELOAD at spaces and colons and drops the pieces without a word: the
        # program would run uncapped, so the command refuses, and a link without them works.
        for name in ("with space", "co:lon"):
            with self.subTest(name=name):
                build = os.path.join(self.tmp.name, name)
                if not os.path.exists(build):
                    fake_build(build)
                for sub in ("run", "compare"):
                    p = gatest.cli(sub, "--sim", "--", sys.executable, FAKE, "0",
                                   env=dict(self.env, GPUARENA_BUILD=build))
                    self.assertCleanError(p, f"the shim's path {build}/lib/libgpuarena.so",
                                          "where the loader splits LD_PRELOAD",
                                          "GPUARENA_BUILD at a symlink")
                    self.assertNotIn("fakeprog", p.stdout)
        link = os.path.join(self.tmp.name, "nospace")
        os.symlink(os.path.join(self.tmp.name, "with space"), link)
        path = os.path.join(self.tmp.name, "s.json")
        p = gatest.cli("run", "--sim", "--stats", path, "--", sys.executable, FAKE, "0",
                       env=dict(self.env, GPUARENA_BUILD=link))
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(path) as f:
            self.assertEqual(json.load(f)["seen_env"]["LD_PRELOAD"],
                             os.path.join(link, "lib", "libgpuarena.so"))


if __name__ == "__main__":
    unittest.main()
