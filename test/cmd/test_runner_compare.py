"""`gpuarena run` and `compare` against a fake program and a do-nothing shim, continued from
test_runner.py (the shared fake build is runner_fixture.py): refusals and errors, the compare
table, JSON and its older format, the --plot chart and its fallbacks, programs that cannot run,
library paths, options the runs would ignore, the driver check, and the output files."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import gatest
from runner_fixture import FAKE, RunnerFixture, fakeprog_totals

MPL_PYTHON = gatest.MPL_PYTHON


class RunCompareMore(RunnerFixture, unittest.TestCase, gatest.CliAsserts):
    def test_run_errors(self):
        self.assertCleanError(self.run_cli("run", "--sim", "--", "/no/such/program"),
                              "not found")
        for bad in ("NOEQUALS", "=x"):  # usage errors (exit 2), as the README says
            self.assertCleanError(self.run_cli("run", "--env", bad, "--", "true"),
                                  f"'{bad}' is not KEY=VALUE", code=2)
        # GPUARENA_BUILD names the build to use: a folder that is not there, or lacks a piece,
        # is an error, never a silent fall back to the checkout's build or to PATH.
        p = gatest.cli("run", "--sim", "--", "true", env={"GPUARENA_BUILD": "/no/build"})
        self.assertCleanError(p, "GPUARENA_BUILD=/no/build: no such folder")
        p = gatest.cli("run", "--sim", "--", "true", env={"GPUARENA_BUILD": FAKE})  # a file
        self.assertCleanError(p, f"GPUARENA_BUILD={FAKE}: not a folder;")
        p = gatest.cli("replay", os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv"),
                       env={"GPUARENA_BUILD": self.build})  # has lib/ and sim/, no bin/
        self.assertCleanError(p, "the replay tool gpuarena-replay not found in GPUARENA_BUILD=",
                              "build it there")

    def test_compare_table(self):
        p = self.run_cli("compare", "--sim", "--repeat", "3", "--", sys.executable, FAKE, "0")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["figure", "arena", "grow", "vmm", "platform"])
        cells = [re.split(r"\s{2,}", ln.strip()) for ln in lines[2:]]
        rows = {c[0]: c[1:] for c in cells}
        self.assertEqual(rows["driver alloc calls"], ["1", "5", "7", "100"])
        self.assertEqual(rows["peak reserved"], ["3.00 MiB", "2.00 MiB", "1.00 MiB", "1.00 MiB"])
        self.assertEqual(rows["failed allocs"], ["0", "2", "0", "2"])
        self.assertEqual(rows["alloc time"], ["1 us", "5 us", "7 us", "100 us"])
        self.assertEqual(rows["max fragmentation"], ["0.250", "0.250", "0.125", "0.000"])
        # Rows are the statistics' own keys (union over modes, JSON order), between wall time and
        # the exit codes; a key only vmm has shows "-" elsewhere.
        self.assertEqual(rows["map calls"], ["-", "-", "42", "-"])
        _, units = fakeprog_totals("vmm")
        self.assertEqual([c[0] for c in cells],
                         ["wall time (median)"]
                         + [(k[:-3] if units[k] == "ns" else k).replace("_", " ") for k in units]
                         + ["exit code"])
        self.assertNotIn("fakeprog", p.stdout)

    def test_compare_reads_format_1(self):
        p = self.run_cli("compare", "--sim", "--modes", "arena,platform", "--", sys.executable,
                         FAKE, "0", env={"FAKE_STATS_FORMAT": "1"})
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {c[0]: c[1:] for c in (re.split(r"\s{2,}", ln.strip())
                                       for ln in p.stdout.splitlines()[2:])}
        self.assertEqual(rows["peak reserved"], ["3.00 MiB", "1.00 MiB"])
        self.assertEqual(rows["free time"], ["500 ns", "50 us"])
        self.assertEqual(rows["max fragmentation"], ["0.250", "0.000"])
        self.assertEqual(rows["driver free calls"], ["1", "100"])

    def test_compare_json(self):
        p = self.run_cli("compare", "--sim", "--json", "--modes", "platform,ARENA", "--repeat", "2",
                         "--", sys.executable, FAKE, "0")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual(list(doc), ["platform", "arena"])
        self.assertEqual(len(doc["arena"]["walls_ns"]), 2)
        self.assertIn(doc["arena"]["wall_ns"], doc["arena"]["walls_ns"])
        self.assertEqual(doc["platform"]["stats"]["totals"]["driver_alloc_calls"], 100)

    def compare_plot(self, python, env):
        """Runs compare --plot with `python`; returns (process, PNG path)."""
        prefix = os.path.join(self.tmp.name, "cmp")
        if os.path.exists(prefix + ".png"):
            os.remove(prefix + ".png")
        full = dict(os.environ, **self.env, **env)
        p = subprocess.run([python, gatest.SCRIPT, "compare", "--sim", "--plot", prefix, "--",
                            sys.executable, FAKE, "0"], env=full, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120, check=False)
        return p, prefix + ".png"

    def assertPlotSkipped(self, p, png):
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gpuarena: matplotlib is not installed, skipped the PNG (apt-get install "
                      "python3-matplotlib for /usr/bin/python3)", p.stderr)
        self.assertEqual(p.stdout.splitlines()[0].split(),
                         ["figure", "arena", "grow", "vmm", "platform"])
        self.assertFalse(os.path.exists(png))

    def test_compare_plot_forced_without_matplotlib(self):
        self.assertPlotSkipped(*self.compare_plot(sys.executable,
                                                  {"GPUARENA_NO_MATPLOTLIB": "1"}))

    def test_plot_skipped_names_an_earlier_chart(self):
        """Without matplotlib, a PREFIX.png already there (an earlier run's) is named as such:
        it stayed beside the new table, or report's new JSON, without a word."""
        prefix = os.path.join(self.tmp.name, "old")
        with open(prefix + ".png", "wb") as f:
            f.write(b"an earlier chart")
        env = dict(os.environ, **self.env, GPUARENA_NO_MATPLOTLIB="1")
        trace = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        for args in (("compare", "--sim", "--modes", "arena", "--plot", prefix, "--",
                      sys.executable, FAKE, "0"), ("report", trace, "-o", prefix)):
            with self.subTest(cmd=args[0]):
                p = subprocess.run([sys.executable, gatest.SCRIPT, *args], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   timeout=120, check=False)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(f"skipped the PNG (apt-get install python3-matplotlib for "
                              f"/usr/bin/python3); {prefix}.png is from an earlier run, not this "
                              "one", p.stderr)
        p = self.compare_plot(sys.executable, {"GPUARENA_NO_MATPLOTLIB": "1"})[0]
        self.assertNotIn("earlier run", p.stderr)  # nothing there: nothing said

    def test_compare_plot_import_fails(self):
        # A matplotlib package that raises on import, ahead of any real one on the path.
        shim = os.path.join(self.tmp.name, "nompl", "matplotlib")
        os.makedirs(shim, exist_ok=True)
        with open(os.path.join(shim, "__init__.py"), "w") as f:
            f.write("raise ImportError('hidden for the test')\n")
        python = MPL_PYTHON or sys.executable
        self.assertPlotSkipped(*self.compare_plot(python, {"PYTHONPATH": os.path.dirname(shim)}))

    def test_compare_plot_png(self):
        if MPL_PYTHON is None:
            self.skipTest("no python3 with matplotlib on this machine")
        p, png = self.compare_plot(MPL_PYTHON, {})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("wrote", p.stderr)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertIn("driver alloc calls", p.stdout)

    def test_compare_plot_png_from_any_python(self):
        # The command under this interpreter (on a fresh machine: not Debian's, no matplotlib)
        # still draws, through an interpreter that has matplotlib.
        if MPL_PYTHON is None:
            self.skipTest("no python3 with matplotlib on this machine (scripts/setup.sh installs "
                          "python3-matplotlib)")
        p, png = self.compare_plot(sys.executable, {})
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_programs_that_cannot_run_and_relative_outputs(self):
        """A script without #! (exec format error) and one whose interpreter is missing are
        named, never a traceback; --stats and --trace given relative are written where the
        command was run, also when the program changes folder first."""
        d = self.tmp.name
        for name, body, why in (("nosheb.sh", "echo hi\n", "Exec format error (a script needs "
                                 "a #! line"),
                                ("badsheb", "#!/nonexistent/interp\n", "the interpreter its #! "
                                 "line names was not found")):
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write(body)
            os.chmod(path, 0o755)
            for sub in ("run", "compare"):
                p = self.run_cli(sub, "--sim", "--", path)
                self.assertCleanError(p, f"cannot execute {path}: ", why)
        # An empty name (`-- "$PROG"` with PROG unset) was "cannot execute : permission denied
        # (chmod +x?)", exit 1: a usage error now, saying what is empty.
        for sub in ("run", "compare"):
            p = self.run_cli(sub, "--sim", "--", "", "train.py")
            self.assertCleanError(p, "the program's name after -- is empty", code=2)
        work, elsewhere = os.path.join(d, "work"), os.path.join(d, "elsewhere")
        os.makedirs(work)
        os.makedirs(elsewhere)
        p = gatest.cli("run", "--sim", "--stats", "s.json", "--trace", "t.gatrace", "--", "sh",
                       "-c", f'cd {elsewhere} && exec "$0" "$@"', sys.executable, FAKE, "0",
                       env=self.env, cwd=work)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(work, "s.json")) as f:
            seen = json.load(f)["seen_env"]
        self.assertEqual(seen["GPUARENA_TRACE"], os.path.join(work, "t.gatrace"))
        self.assertEqual(os.listdir(elsewhere), [])

    def test_env_library_paths_merged(self):
        """--env LD_PRELOAD and LD_LIBRARY_PATH are merged like inherited ones: the shim stays
        first in the preload and the simulated driver's folder first on the library path (they
        replaced them: the program ran without the cap, exit 0)."""
        seen = self.stats_of("--env", "LD_PRELOAD=/lib/extra.so", "--env",
                             "LD_LIBRARY_PATH=/opt/lib")
        self.assertEqual(seen["LD_PRELOAD"], f"{self.shim}:/lib/extra.so")
        first, second = seen["LD_LIBRARY_PATH"].split(":")[:2]
        self.assertTrue(first.endswith("/sim") and os.path.exists(
            os.path.join(first, "libcuda.so.1")), seen["LD_LIBRARY_PATH"])
        self.assertEqual(second, "/opt/lib")

    def test_options_the_runs_would_ignore(self):
        """Options that change nothing for the modes run, and --env of a variable the command
        sets from an option, are usage errors (exit 2) before anything runs; each message names
        the option to use instead."""
        prog = ["--", sys.executable, FAKE, "0"]
        for args, why in (
                (("run", "--mode", "platform", "--fraction", "0.5"),
                 "--fraction applies to arena, grow and vmm (platform takes no share): use "
                 "--mode arena or grow or vmm"),
                (("run", "--mode", "grow", "--fraction", "0.5+"),
                 "--fraction 0.5+ changes arena mode only"),
                (("compare", "--modes", "grow,vmm", "--fraction", "0.5+"),
                 "add arena to --modes, or give a fixed fraction such as 0.5"),
                (("compare", "--modes", "platform", "--fraction", "0.5"),
                 "add arena or grow or vmm to --modes"),
                (("run", "--env", "GPUARENA_MODE=vmm"),
                 "--env GPUARENA_MODE=vmm: gpuarena run sets GPUARENA_MODE itself; use --mode"),
                (("run", "--env", "GPUARENA_STATS=/tmp/x.json"), "use --stats instead"),
                (("run", "--env", "GPUARENA_TRACE=/tmp/x.gatrace"), "use --trace instead"),
                (("run", "--env", "GPUARENA_PREALLOCATE=false"), "use --mode grow instead"),
                (("compare", "--env", "GPUARENA_MODE=platform"),
                 "gpuarena compare sets GPUARENA_MODE itself; use --modes instead"),
                (("compare", "--env", "GPUARENA_PREALLOCATE=false"), "use --modes instead"),
                (("compare", "--env", "GPUARENA_STATS=/tmp/x.json"),
                 "compare reads each mode's statistics itself"),
                (("compare", "--env", "GPUARENA_TRACE=/tmp/t.gatrace"),
                 "each run would replace the last one's trace; put %p in the path"),
                (("run", "--stats", ""), "--stats is empty: give a file path, or - for stderr"),
                (("run", "--trace", ""), "--trace is empty: give a file path"),
                (("run", "--trace", "-"), "--trace -: a trace is binary")):
            p = self.run_cli(args[0], "--sim", *args[1:], *prog)
            self.assertCleanError(p, why, code=2)
            self.assertEqual(p.stdout, "")
        # Where a mode run uses it, each is taken.
        self.assertEqual(self.stats_of("--mode", "vmm", "--fraction", "0.5")
                         ["GPUARENA_MEM_FRACTION"], "0.5")
        p = self.run_cli("compare", "--sim", "--modes", "arena,platform", "--fraction", "0.5+",
                         "--json", *prog)
        self.assertEqual(p.returncode, 0, p.stderr)
        # platform's run is not given the share, which the shim would say it ignores (helper-124)
        self.assertNotIn("GPUARENA_MEM_FRACTION applies", p.stderr)
        # An inherited GPUARENA_TRACE is the same question; with %p each run has its own file.
        p = self.run_cli("compare", "--sim", "--modes", "arena", *prog,
                         env={"GPUARENA_TRACE": "/tmp/t.gatrace"})
        self.assertCleanError(p, "put %p in the path", code=2)
        p = self.run_cli("compare", "--sim", "--modes", "arena", "--json", *prog,
                         env={"GPUARENA_TRACE": os.path.join(self.tmp.name, "t-%p.gatrace")})
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_compare_errors(self):
        p = self.run_cli("compare", "--modes", "arena,turbo", "--", "true")
        self.assertCleanError(p, "unknown mode 'turbo'", code=2)
        p = self.run_cli("compare", "--modes", "arena-nopre", "--", "true")
        self.assertCleanError(p, "(use arena, grow, vmm, platform or all)", code=2)
        # helper-60 F11: no upper bound, and 10^20 runs kept every result in memory
        for n in ("0", "-3", "x", "10001", "100000000000000000000", "9" * 5000):
            p = self.run_cli("compare", "--sim", "--repeat", n, "--", "true")
            # a value of more than 200 characters by its head, tail and length (helper-119)
            said = f"'{n}'" if len(n) <= 200 else f"'{n[:48]}...{n[-32:]}' ({len(n)} characters)"
            self.assertCleanError(p, f"argument --repeat: {said} is not a whole number of runs "
                                  "from 1 to 10,000", code=2)
        p = self.run_cli("compare", "--sim", "--modes", "platform", "--", sys.executable, FAKE,
                         "3", "--no-stats")
        self.assertCleanError(p, "no statistics written (exit 3; it made no CUDA allocation",
                              "the program's last output:\nfakeprog: mode platform")
        self.assertEqual(self.run_cli("compare").returncode, 2)
        # A program that printed nothing: said so, not an empty "last output".
        p = self.run_cli("compare", "--sim", "--modes", "arena", "--", "true")
        self.assertCleanError(p, "mode arena: no statistics written (exit 0; it made no CUDA "
                              "allocation (statistics are written only by a process that allocated)",
                              "the program printed nothing")
        self.assertNotIn("last output", p.stderr)
        # A folder given as the program: said so, not "permission denied (chmod +x?)".
        for sub in ("compare", "run"):
            p = self.run_cli(sub, "--sim", "--", self.tmp.name)
            self.assertCleanError(p, f"cannot execute {self.tmp.name}: it is a folder, not a "
                                  "program")
            self.assertNotIn("chmod", p.stderr)


    def test_no_driver_suggests_sim(self):
        # A driver that cannot be loaded, whatever this machine has: GPUARENA_LIBCUDA names it.
        env = {"GPUARENA_LIBCUDA": os.path.join(self.tmp.name, "no", "libcuda.so.1")}
        for sub in ("run", "compare"):
            with self.subTest(sub=sub):
                p = self.run_cli(sub, "--", sys.executable, FAKE, "0", env=env)
                self.assertCleanError(p, "no CUDA driver can be loaded here", "--sim",
                                      f"gpuarena {sub} --sim -- PROGRAM")
                self.assertNotIn("fakeprog", p.stdout)

    def test_stats_and_trace_must_differ(self):
        d = self.tmp.name
        same = os.path.join(d, "same.out")
        with open(same, "w") as f:
            f.write("keep me")
        sym, hard = os.path.join(d, "sym.out"), os.path.join(d, "hard.out")
        for link in (sym, hard):
            if os.path.lexists(link):
                os.unlink(link)
        os.symlink(same, sym)
        os.link(same, hard)
        fresh = os.path.join(d, "fresh.out")
        for stats, trace in ((same, same), (same, sym), (hard, same), (fresh, fresh),
                             (fresh, os.path.join(d, ".", "fresh.out"))):
            with self.subTest(stats=stats, trace=trace):
                p = self.run_cli("run", "--sim", "--stats", stats, "--trace", trace, "--",
                                 sys.executable, FAKE, "0")
                self.assertCleanError(p, "are the same file", code=2)
                self.assertNotIn("fakeprog", p.stdout)
        with open(same) as f:
            self.assertEqual(f.read(), "keep me")
        self.assertFalse(os.path.exists(fresh))

    def test_stats_file_not_written_by_this_run(self):
        """helper-60 F12: run --stats F whose program wrote no statistics left an earlier run's F
        there without a word, read as this run's: it says so, and exits as the program did."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.json")
            p = self.run_cli("run", "--sim", "--stats", path, "--", sys.executable, FAKE, "0")
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(path, "rb") as f:
                before = f.read()
            p = self.run_cli("run", "--sim", "--stats", path, "--", sys.executable, FAKE, "3",
                             "--no-stats")
            self.assertEqual(p.returncode, 3, p.stderr)
            self.assertIn("the program wrote no statistics", p.stderr)
            self.assertIn(f"--stats {path} was not written by this run: what it holds is from "
                          "before", p.stderr)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), before)
            new = os.path.join(d, "new.json")
            p = self.run_cli("run", "--sim", "--stats", new, "--", "true")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f"--stats {new} was not written\n", p.stderr)
            self.assertFalse(os.path.exists(new))

    def test_outputs_never_over_the_command(self):
        """helper-60 F2: --stats naming the script being run (or the program) replaced it with
        the JSON, exit 0; --stats and --trace that are the program (found on PATH too), or an
        existing file among its arguments, also through a link, are refused (exit 2)."""
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "train.sh")
            with open(script, "w") as f:
                f.write(f"#!/bin/sh\nexec {sys.executable} {FAKE} 0\n")
            os.chmod(script, 0o755)
            os.symlink("train.sh", os.path.join(d, "link.sh"))
            with open(script, "rb") as f:
                data = f.read()
            path_env = {"PATH": d + os.pathsep + os.environ.get("PATH", "")}
            for opt, out, cmd in (("--stats", script, ["sh", script]),
                                  ("--trace", script, ["sh", script]),
                                  ("--stats", os.path.join(d, "link.sh"), ["sh", script]),
                                  ("--stats", script, [script]),
                                  ("--stats", script, ["train.sh"]),
                                  ("--stats", script, ["sh", FAKE, f"--config={script}"]),
                                  ("--trace", FAKE, [sys.executable, FAKE, "0"])):
                p = self.run_cli("run", "--sim", opt, out, "--", *cmd, env=path_env)
                self.assertEqual(p.returncode, 2, (opt, out, cmd, p.stderr))
                self.assertIn("named in the command", p.stderr)
                self.assertNotIn("fakeprog", p.stdout)
                with open(script, "rb") as f:
                    self.assertEqual(f.read(), data)
            # a new file, or one the command does not name, is written as before
            p = self.run_cli("run", "--sim", "--stats", os.path.join(d, "s.json"), "--", "sh",
                             script)
            self.assertEqual(p.returncode, 0, p.stderr)

    def test_inherited_variables_the_command_sets(self):
        """helper-60 F5: an exported GPUARENA_MODE, GPUARENA_PREALLOCATE or GPUARENA_STATS was
        replaced by run (and compare) without a word (a vmm run in arena mode, the user's
        statistics file never written): a usage error naming the option, as --env is; an
        inherited GPUARENA_TRACE is used by run unless --trace is given too."""
        with tempfile.TemporaryDirectory() as d:
            mine = os.path.join(d, "mine.json")
            for sub, key, value, opt in (("run", "GPUARENA_MODE", "vmm", "use --mode instead"),
                                         ("run", "GPUARENA_PREALLOCATE", "false", "--mode grow"),
                                         ("run", "GPUARENA_STATS", mine, "use --stats instead"),
                                         ("compare", "GPUARENA_MODE", "vmm", "--modes"),
                                         ("compare", "GPUARENA_STATS", mine, "compare reads")):
                p = self.run_cli(sub, "--sim", "--", sys.executable, FAKE, "0",
                                 env={key: value})
                self.assertEqual(p.returncode, 2, (sub, key, p.stderr))
                self.assertIn(f"{key}={value} is set in the environment", p.stderr)
                self.assertIn(opt, p.stderr)
                self.assertIn(f"unset {key}", p.stderr)
                self.assertNotIn("fakeprog", p.stdout)
            self.assertFalse(os.path.exists(mine))
            trace = os.path.join(d, "t.gatrace")
            p = self.run_cli("run", "--sim", "--", sys.executable, FAKE, "0",
                             env={"GPUARENA_TRACE": trace})
            self.assertEqual(p.returncode, 0, p.stderr)
            p = self.run_cli("run", "--sim", "--trace", os.path.join(d, "u.gatrace"), "--",
                             sys.executable, FAKE, "0", env={"GPUARENA_TRACE": trace})
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("use --trace instead", p.stderr)
            p = self.run_cli("run", "--sim", "--", sys.executable, FAKE, "0",
                             env={"GPUARENA_MODE": ""})  # empty: nothing of the user's lost
            self.assertEqual(p.returncode, 0, p.stderr)

    def test_no_preallocate_is_grow(self):
        p = self.run_cli("run", "--sim", "--no-preallocate", "--", sys.executable, FAKE, "0")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("--no-preallocate is now --mode grow", p.stderr)
        self.assertIn("fakeprog: mode grow", p.stdout)
        p = self.run_cli("run", "--sim", "--no-preallocate", "--mode", "platform", "--", "true")
        self.assertCleanError(p, "conflicts with --mode platform", code=2)
        self.assertNotIn("--no-preallocate", self.run_cli("run", "--help").stdout)


if __name__ == "__main__":
    unittest.main()
