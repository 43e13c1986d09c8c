"""Findings of an outside check of the README's first hour and the gpuarena command (helper-131).

- The README block that plays a trace through the shim (Benchmarks of replay against the shim)
  began with a bare `gpuarena`, not on PATH in a checkout ("command not found"), wrote A.gatrace
  in the checkout itself, and ran build/test/traceplay before any line built it.
- An option written after `--` (`replay T -- --no-min`) said "unrecognized arguments: --no-min
  (did you mean --no-min?)"; a required one there (`import auto -- F -o OUT`) said "the following
  arguments are required: -o/--output". A last `--` with nothing after it (`replay T --`) was
  "unrecognized arguments: --", where gpuarena-replay takes it.
- An option of one value given twice with two values kept the last without a word (`run --stats
  a.json --stats b.json` wrote b.json alone; `--limit 1GiB --limit 2GiB`), as `--env K=1 --env
  K=2` did, and gpuarena-replay's; `--mode` alone was refused so.
- `run --no-preallocate --mode vmm` said the two conflict, not what to do.
- `--repeat`, `doctor --timeout` and `top --interval` took what Python's int() and float() take:
  `1_0` as 10, `+3`, non-ASCII digits, `1e1`.
- `report -o .json` (or `out/.png`) wrote the hidden `.json` and `.png`: the PREFIX less its
  extension was empty; `compare --plot .png` the same.
- `gpuarena run` of a program killed by a signal (SIGKILL from the OOM killer, SIGSEGV) listed
  every reason a program may write no statistics, but not the signal, which compare names.
- An option before the subcommand (`gpuarena --limit 1G run ...`) was "invalid choice: '1G'",
  `gpuarena --bogus` "the following arguments are required: SUBCOMMAND"; a misspelt subcommand
  (`rpelay`) got no suggestion, where misspelt options do.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

import gatest

sys.path.insert(0, os.path.join(gatest.REPO, "scripts"))
from gpuarena_cli import argparser  # noqa: E402

LIFETIMES = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")


def readme_commands():
    """(block line, command words) of every command in the README's ```sh blocks: continuation
    lines joined, comments and `# output` lines dropped."""
    with open(os.path.join(gatest.REPO, "README.md"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, block, start = [], None, 0
    for n, line in enumerate(lines, 1):
        if line.startswith("```"):
            block, start = ([] if block is None and line == "```sh" else None), n
            continue
        if block is None:
            continue
        if block and block[-1].endswith("\\"):
            block[-1] = block[-1][:-1] + " " + line.strip()
        else:
            block.append(line)
        if not line.endswith("\\"):
            text = re.sub(r"(^|\s)#.*$", "", block[-1]).strip()
            if text:
                out.append((start, shlex.split(text)))
    return out


class ReadmeBlocks(unittest.TestCase):
    def test_readme_blocks_run_from_a_checkout(self):
        """Every program a README block runs is there in a checkout (scripts/, build/ as the build
        builds it or a `make build/...` line of the same block makes it, or on PATH), none is a
        bare `gpuarena` (installed only), and no output is written in the checkout's root."""
        made, problems = {}, []
        for start, words in readme_commands():
            while words and (re.fullmatch(r"[A-Z_]+=.*", words[0]) or words[0] == "env"):
                words = words[1:]
            self.assertTrue(words, start)
            prog = words[0]
            if prog == "make":
                made.setdefault(start, set()).update(w for w in words[1:] if "/" in w)
            elif prog == "gpuarena":
                problems.append(f"block at line {start}: a bare gpuarena (not on PATH in a "
                                f"checkout; scripts/gpuarena there): {' '.join(words)}")
            elif prog.startswith("build/"):
                built = os.path.join(gatest.BUILD, prog[len("build/"):])
                if not os.path.exists(built) and prog not in made.get(start, ()):
                    problems.append(f"block at line {start}: {prog} is neither built by the "
                                    "build nor made by a line before it")
            elif "/" in prog and not prog.startswith("$"):
                if not os.path.exists(os.path.join(gatest.REPO, prog)):
                    problems.append(f"block at line {start}: {prog} is not in the checkout")
            elif "/" not in prog and not shutil.which(prog):
                problems.append(f"block at line {start}: {prog} is not on PATH")
            for opt, value in zip(words, words[1:]):
                if opt in ("-o", "--output", "--stats", "--trace", "--plot") and "/" not in value \
                        and value != "-":
                    problems.append(f"block at line {start}: {opt} {value} writes in the "
                                    "checkout's root (write under build/ or a temporary folder)")
        self.assertEqual(problems, [])


class DoubleDash(unittest.TestCase, gatest.CliAsserts):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpuarena-o131-")
        self.trace = os.path.join(self.dir, "A.gatrace")
        p = gatest.cli("import", "auto", LIFETIMES, "-o", self.trace)
        self.assertEqual(p.returncode, 0, p.stderr)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_option_after_double_dash_named(self):
        p = gatest.cli("replay", "--", self.trace, "--no-min")
        self.assertCleanError(p, "gpuarena: --no-min after --: every word after -- is taken as "
                              "TRACE, not an option; put it before --", code=2)
        self.assertNotIn("did you mean --no-min", p.stderr)
        out = os.path.join(self.dir, "B.gatrace")
        p = gatest.cli("import", "auto", "--", self.trace, "-o", out)
        self.assertCleanError(p, "gpuarena: -o after --: every word after -- is taken as an "
                              "argument, not an option; put -o before --", code=2)
        self.assertFalse(os.path.exists(out))
        p = gatest.cli("top", "--once", "--", "--json")
        self.assertCleanError(p, "gpuarena: --json after --: gpuarena top takes no word after --",
                              code=2)

    def test_last_double_dash_ends_the_options(self):
        plain = gatest.cli("replay", self.trace, "--no-min", "--mode", "arena", "--json")
        dash = gatest.cli("replay", self.trace, "--no-min", "--mode", "arena", "--json", "--")
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual(dash.returncode, 0, dash.stderr)
        strip = lambda s: re.sub(r'"(ns_total|events_per_s)": [0-9]+', "", s)  # noqa: E731
        self.assertEqual(strip(dash.stdout), strip(plain.stdout))
        tool = subprocess.run([os.path.join(gatest.BUILD, "bin", "gpuarena-replay"), "--mode",
                               "arena", self.trace, "--"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, check=False)
        self.assertEqual(tool.returncode, 0, tool.stderr)  # as the tool takes it
        # `--` twice: the second is the file's name, read as such
        p = gatest.cli("replay", "--no-min", "--", "--")
        self.assertCleanError(p, "cannot read --: No such file or directory")


class OptionsGivenTwice(unittest.TestCase, gatest.CliAsserts):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpuarena-o131-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_one_value_options_given_twice(self):
        a, b = os.path.join(self.dir, "a.json"), os.path.join(self.dir, "b.json")
        mark = os.path.join(self.dir, "ran")
        p = gatest.cli("run", "--sim", "--stats", a, "--stats", b, "--", "touch", mark)
        self.assertCleanError(p, f"gpuarena: --stats given twice (--stats {a}, then --stats "
                              f"{b}): it takes one value; give it once", code=2)
        self.assertEqual(os.listdir(self.dir), [])  # the program did not run, nothing written
        p = gatest.cli("run", "--sim", "--limit", "1GiB", "--limit=2GiB", "--", "touch", mark)
        self.assertCleanError(p, "--limit given twice (--limit 1GiB, then --limit=2GiB)", code=2)
        p = gatest.cli("run", "--sim", "--env", "K=1", "--env", "K=2", "--", "touch", mark)
        self.assertCleanError(p, "gpuarena: --env K given twice (K=1, then K=2): a variable takes "
                              "one value; give it once", code=2)
        self.assertFalse(os.path.exists(mark))
        out = os.path.join(self.dir, "x.gatrace")
        p = gatest.cli("import", "auto", LIFETIMES, "-o", out, "--output", out + "2")
        self.assertCleanError(p, f"--output given twice (-o {out}, then --output {out}2)", code=2)
        self.assertEqual(os.listdir(self.dir), [])
        for args in (("compare", "--repeat", "2", "--repeat", "3", "--", "true"),
                     ("top", "--dir", "/a", "--dir", "/b", "--once"),
                     ("doctor", "--timeout", "5", "--timeout", "6")):
            p = gatest.cli(*args)
            self.assertCleanError(p, f"gpuarena: {args[1]} given twice", code=2)

    def test_tool_one_value_options_given_twice(self):
        """gpuarena-replay, the engine, reads them by the same rule."""
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        run = lambda *a: subprocess.run([tool, *a, LIFETIMES], stdout=subprocess.PIPE,  # noqa
                                        stderr=subprocess.PIPE, text=True, check=False)
        for args, said in ((("--mode", "grow", "--limit", "1G", "--limit", "2G"),
                            "--limit given twice (--limit 1G, then --limit 2G)"),
                           (("--mode", "vmm", "--granularity", "64KiB", "--granularity", "2MiB"),
                            "--granularity given twice"),
                           (("--fraction", "0.75", "--fraction", "0.75+", "--limit", "1G"),
                            "--fraction given twice"),
                           (("--device", "0", "--device", "1"), "--device given twice")):
            p = run(*args)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertTrue(p.stderr.startswith(f"gpuarena: {said}"), p.stderr)
            self.assertEqual(p.stdout, "")
        p = run("--mode", "grow", "--json", "--limit", "1G", "--limit", "1GiB", "--format",
                "lifetimes", "--format", "LIFETIMES", "--mode", "vmm")  # same values, two modes
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('"size_limit": 1073741824', p.stdout)
        self.assertIn('"vmm"', p.stdout)

    def test_old_spelling_against_a_mode_says_what_to_do(self):
        p = gatest.cli("run", "--sim", "--no-preallocate", "--mode", "vmm", "--", "true")
        self.assertCleanError(p, "gpuarena: --no-preallocate (that is, --mode grow) conflicts "
                              "with --mode vmm: give one of them (--mode grow or --mode vmm)",
                              code=2)

    def test_the_same_value_again_is_taken(self):
        p = gatest.cli("replay", LIFETIMES, "--mode", "grow", "--no-min", "--limit", "1GiB",
                       "--limit=1G", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('"size_limit": 1073741824', p.stdout)
        a = argparser.parse(["run", "--env", "K=1", "--env", "K=1", "--", "true"])
        self.assertEqual(a.env, ["K=1", "K=1"])


class NumbersAreDigits(unittest.TestCase, gatest.CliAsserts):
    def test_counts_and_seconds_are_ascii_digits(self):
        for bad in ("1_0", "+3", "\u0663", "1e1", "0x3"):
            p = gatest.cli("compare", "--sim", "--repeat", bad, "--", "true")
            self.assertCleanError(p, f"argument --repeat: {bad!r} is not a whole number of runs",
                                  code=2)
            p = gatest.cli("doctor", "--sim", "--timeout", bad)
            self.assertCleanError(p, f"argument --timeout: {bad!r} is not a whole number of "
                                  "seconds", code=2)
        for bad in ("1_0", "+3", "\u0660.\u0665", "1e1", "5e-1", ".5", "2."):  # as sizes
            p = gatest.cli("top", "--interval", bad)
            self.assertCleanError(p, f"argument --interval: {bad!r} is not a number of seconds",
                                  code=2)
        # blanks around are ignored, as around every value
        self.assertEqual(argparser.parse(["compare", "--repeat", " 2 ", "--", "true"]).repeat, 2)
        self.assertEqual(argparser.parse(["doctor", "--timeout", "30\r"]).timeout, 30)
        self.assertEqual(argparser.parse(["top", "--interval", " 0.5"]).interval, 0.5)


class Prefixes(unittest.TestCase, gatest.CliAsserts):
    def test_prefix_of_an_extension_alone_refused(self):
        d = tempfile.mkdtemp(prefix="gpuarena-o131-")
        try:
            trace = os.path.join(d, "A.gatrace")
            self.assertEqual(gatest.cli("import", "auto", LIFETIMES, "-o", trace).returncode, 0)
            for prefix in (".json", ".png", os.path.join(d, ".json")):
                p = gatest.cli("report", trace, "-o", prefix, cwd=d)
                self.assertCleanError(p, f"gpuarena: -o {prefix} is an extension alone", code=2)
            p = gatest.cli("compare", "--sim", "--plot", os.path.join(d, ".png"), "--", "true")
            self.assertCleanError(p, "is an extension alone", code=2)
            self.assertEqual(os.listdir(d), ["A.gatrace"])  # no hidden .json or .png
        finally:
            shutil.rmtree(d, ignore_errors=True)


    def test_prefix_naming_a_device_refused(self):
        # `report -o /dev/null` wrote /dev/null.json and /dev/null.png (fixed 2026-12-07)
        d = tempfile.mkdtemp(prefix="gpuarena-o131-")
        try:
            trace = os.path.join(d, "A.gatrace")
            self.assertEqual(gatest.cli("import", "auto", LIFETIMES, "-o", trace).returncode, 0)
            before = set(os.listdir("/dev"))
            for prefix in ("/dev/null", "/dev/null.json"):
                p = gatest.cli("report", trace, "-o", prefix, cwd=d)
                self.assertCleanError(p, "gpuarena: -o %s: /dev/null is a device, and a PREFIX "
                                      "names the files to write (/dev/null.json and "
                                      "/dev/null.png)" % prefix, code=2)
            fifo = os.path.join(d, "pipe")
            os.mkfifo(fifo)
            p = gatest.cli("compare", "--sim", "--plot", fifo, "--", "true")
            self.assertCleanError(p, f"{fifo} is not a regular file", code=2)
            self.assertEqual(set(os.listdir("/dev")), before)
            self.assertEqual(sorted(os.listdir(d)), ["A.gatrace", "pipe"])
        finally:
            shutil.rmtree(d, ignore_errors=True)


class RunKilled(unittest.TestCase):
    def test_run_names_the_signal_that_killed_the_program(self):
        d = tempfile.mkdtemp(prefix="gpuarena-o131-")
        try:
            stats = os.path.join(d, "s.json")
            for sig, num, extra in (("KILL", 9, ()), ("SEGV", 11, ("--stats", stats))):
                p = gatest.cli("run", "--sim", *extra, "--", "sh", "-c", f"kill -{sig} $$")
                self.assertEqual(p.returncode, 128 + num, p.stderr)
                self.assertIn(f"gpuarena: the program was killed by SIG{sig} (exit {128 + num}) "
                              "before the shim's exit handler, and wrote no statistics", p.stderr)
            self.assertIn(f"--stats {stats} was not written", p.stderr)
            p = gatest.cli("run", "--sim", "--", "sh", "-c", "exit 3")  # an exit is no signal
            self.assertEqual(p.returncode, 3)
            self.assertNotIn("killed", p.stderr)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class BeforeTheSubcommand(unittest.TestCase, gatest.CliAsserts):
    def test_option_before_the_subcommand_named(self):
        p = gatest.cli("--limit", "1G", "run", "--", "true")
        self.assertCleanError(p, "gpuarena: --limit before the subcommand: it is an option of "
                              "run, compare, replay, report; put it after the subcommand", code=2)
        p = gatest.cli("--bogus")
        self.assertCleanError(p, "gpuarena: --bogus before the subcommand: no subcommand takes "
                              "--bogus", code=2)
        p = gatest.cli("rpelay", "x")
        self.assertCleanError(p, "invalid choice: 'rpelay'", "(did you mean replay?)", code=2)
        p = gatest.cli()
        self.assertCleanError(p, "the following arguments are required: SUBCOMMAND", code=2)


if __name__ == "__main__":
    unittest.main()
