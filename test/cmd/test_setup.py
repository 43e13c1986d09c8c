"""scripts/setup.sh, the packages `make`, `make demo` and `make test` install first, run from the
outside on a PATH of the test's own: stand-ins for the tools it looks for (a missing one is left
out), for `id` (root or a user) and for `apt-get` (absent, as off Debian, or one that records what
it was asked and succeeds or fails). Nothing is installed on the machine.

An outside check on 2026-12-07 found that off Debian, as root, the script ended in
`apt-get: not found` (exit 127, no word of what to do), that a user was told to run a
`sudo apt-get` the machine does not have, and that `make demo` stopped for a user lacking valgrind
although the demo needs none of the packages."""

import glob
import os
import shutil
import stat
import subprocess
import tempfile
import unittest

import gatest

SETUP = os.path.join(gatest.REPO, "scripts", "setup.sh")
CUDA_DIR = os.environ.get("GA_CUDA", "/usr/local/cuda")
TOOLS = ("pkg-config", "clang", "g++", "valgrind")


def files_present():
    """Whether the packages setup.sh finds by file (not on PATH) are here, so that a missing tool
    on the stand-in PATH is the only thing missing."""
    mpl = subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], check=False,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0 \
        if os.path.exists("/usr/bin/python3") else False
    return (os.path.exists("/usr/include/check.h") and os.path.exists("/usr/include/uthash.h")
            and mpl and bool(glob.glob(
                f"/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-{os.uname().machine}.a")))


class Setup(unittest.TestCase):
    def setUp(self):
        if not files_present():
            self.skipTest("check, uthash, matplotlib or libclang-rt missing here: run make deps")
        self.tmp = tempfile.TemporaryDirectory()
        self.bin = os.path.join(self.tmp.name, "bin")
        self.log = os.path.join(self.tmp.name, "apt.log")
        os.makedirs(self.bin)

    def tearDown(self):
        self.tmp.cleanup()

    def stub(self, name, body):
        path = os.path.join(self.bin, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)

    def setup_sh(self, goal, missing=(), uid=0, apt=None, machine=None, clang=None):
        """setup.sh GOAL with the tools in `missing` absent, `id -u` saying uid, and apt-get
        absent (None) or exiting with `apt` after logging its arguments; `uname -m` says machine
        (None: this one's), clang's stand-in runs the shell text `clang` (None: exit 0)."""
        for t in TOOLS:
            if t not in missing:
                self.stub(t, clang if t == "clang" and clang else "exit 0")
        self.stub("id", f"echo {uid}")
        self.stub("uname", f"echo {machine or os.uname().machine}")
        if apt is not None:
            self.stub("apt-get", f'echo "$*" >>"{self.log}"; exit {apt}')
        os.symlink(shutil.which("ls"), os.path.join(self.bin, "ls"))
        args = ["/bin/sh", SETUP] + ([goal] if goal else [])
        return subprocess.run(args, env={"PATH": self.bin}, cwd=gatest.REPO, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60,
                              check=False)

    def apt_calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log, encoding="utf-8") as f:
            return f.read().splitlines()

    def test_nothing_missing_is_quiet(self):
        r = self.setup_sh("all", uid=1000, apt=0)
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_user_stops_only_for_what_the_goal_needs(self):
        for goal, missing, rc in (("demo", ["valgrind"], 0), ("build", ["valgrind"], 0),
                                  ("test", ["valgrind"], 0), ("all", ["valgrind"], 1),
                                  (None, ["valgrind"], 1), ("demo", ["clang"], 0),
                                  ("build", ["clang"], 0), ("test", ["clang"], 1),
                                  ("demo", ["pkg-config"], 0), ("build", ["pkg-config"], 1)):
            with self.subTest(goal=goal, missing=missing):
                self.tearDown()
                self.setUp()
                r = self.setup_sh(goal, missing, uid=1000, apt=0)
                self.assertEqual(r.returncode, rc, r.stderr)
                self.assertIn(f"gpuarena: missing packages: {missing[0]}; install them with: "
                              f"sudo apt-get install {missing[0]}", r.stderr)
                self.assertIn(f"it needs {missing[0]}" if rc else "going on without them",
                              r.stderr)
                self.assertEqual(self.apt_calls(), [], "a user's run installs nothing")

    def test_root_installs_everything_missing(self):
        r = self.setup_sh("demo", ["valgrind", "g++"], uid=0, apt=0)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.apt_calls(), ["update -qq", "install -y -qq valgrind g++"])
        self.assertIn("gpuarena: installing missing packages: valgrind g++", r.stderr)

    def test_off_debian_says_so(self):
        for uid in (0, 1000):
            for goal, rc in (("all", 1), ("demo", 0)):
                with self.subTest(uid=uid, goal=goal):
                    self.tearDown()
                    self.setUp()
                    r = self.setup_sh(goal, ["valgrind"], uid=uid, apt=None)
                    self.assertEqual(r.returncode, rc, r.stderr)
                    self.assertTrue(r.stderr.startswith("gpuarena: missing packages (Debian's "
                                                        "names): valgrind; this machine has no "
                                                        "apt-get"), r.stderr)
                    self.assertNotIn("sudo apt-get", r.stderr)
                    self.assertNotIn("not found", r.stderr)

    def test_apt_get_failing_says_what_to_do(self):
        r = self.setup_sh("all", ["valgrind"], uid=0, apt=100)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("gpuarena: apt-get could not install valgrind", r.stderr)
        self.assertIn("apt-get install valgrind", r.stderr)

    def test_libfuzzer_named_by_the_machine(self):
        """libFuzzer's file is named by the machine (libclang_rt.fuzzer-aarch64.a on arm64):
        setup.sh knew the x86-64 name alone, so on arm64 it never installed libclang-rt-dev, or
        here it took the x86-64 file for an arm64 one (an outside check, 2026-12-07)."""
        r = self.setup_sh("test", machine="aarch64", apt=0)  # only the x86-64 file here
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("gpuarena: installing missing packages: libclang-rt-dev", r.stderr)
        for name, sub in (("libclang_rt.fuzzer-aarch64.a", "linux"),
                          ("libclang_rt.fuzzer.a", "aarch64-unknown-linux-gnu")):
            with self.subTest(layout=sub):
                for f in os.listdir(self.bin):  # the stand-ins of the run before
                    os.remove(os.path.join(self.bin, f))
                rt = os.path.join(self.tmp.name, "rt", sub)
                os.makedirs(rt, exist_ok=True)
                open(os.path.join(rt, name), "w").close()
                clang = f'[ "$1" = --print-runtime-dir ] && echo "{rt}"; exit 0'
                r = self.setup_sh("test", machine="aarch64", clang=clang)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                shutil.rmtree(os.path.join(self.tmp.name, "rt"))

    def test_make_asks_for_what_the_goal_needs(self):
        """`make -n GOAL` shows the setup.sh line the goal runs (nothing is built)."""
        for goals, want in ((["demo"], "demo"), ([], "build"),
                            (["valgrind"], "all"), (["deps"], "all")):
            with self.subTest(goals=goals):
                r = subprocess.run(["make", "-n", "-C", gatest.REPO, f"BUILD={gatest.BUILD}"]
                                   + goals, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, timeout=300, check=False)
                lines = [x for x in r.stdout.splitlines() if "scripts/setup.sh" in x]
                self.assertEqual(lines[:1], [f"sh scripts/setup.sh {want}"], r.stderr[-2000:])


class Traces(unittest.TestCase):
    """Goals that replay the shared traces stop at once where there are none, naming
    GA_TRACES_DIR (a clone away from ../shared ran the whole of `make test` to fail 6 unit tests
    and most of cmd's); a relative GA_TRACES_DIR is from the checkout, passed on absolute."""

    def make_n(self, *args):
        return subprocess.run(["make", "-n", "--no-print-directory", "-C", gatest.REPO, f"BUILD={gatest.BUILD}"]
                              + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=300, check=False)

    def test_no_traces_stops_at_once(self):
        with tempfile.TemporaryDirectory() as d:
            for goal in ("test-unit", "test-cmd", "bench-alloc"):
                with self.subTest(goal=goal):
                    r = self.make_n(goal, f"GA_TRACES_DIR={d}/none")
                    self.assertEqual(r.returncode, 2, r.stdout[-2000:])
                    self.assertIn(f"gpuarena: no shared traces at {d}/none (make {goal} replays "
                                  "them)", r.stderr)
                    self.assertIn(f"make {goal} GA_TRACES_DIR=/path/to/shared/traces", r.stderr)
                    self.assertEqual(r.stdout, "", "nothing was to run")

    def test_relative_traces_dir_from_the_checkout(self):
        rel = os.path.relpath(os.path.abspath(gatest.TRACES), gatest.REPO)
        r = self.make_n("test-unit", f"GA_TRACES_DIR={rel}")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"GA_TRACES_DIR={os.path.realpath(gatest.TRACES)} ",
                      r.stdout.replace(os.path.abspath(gatest.TRACES),
                                       os.path.realpath(gatest.TRACES)))

    def test_fuzz_seeds_read_the_traces_named(self):
        # make test-fuzz's seeds take rows of the real lifetime sets: from GA_TRACES_DIR, as every
        # other goal; they were read from ../shared beside the checkout alone, so a clone elsewhere
        # fuzzed without them and said nothing (an outside check, 2026-12-07)
        with tempfile.TemporaryDirectory() as d:
            # a copy three folders down: no shared/ beside "its checkout" (d)
            script = os.path.join(d, "clone", "test", "fuzz", "make_seeds.py")
            os.makedirs(os.path.dirname(script))
            shutil.copy(os.path.join(gatest.REPO, "test", "fuzz", "make_seeds.py"), script)
            env = dict(os.environ, GA_TRACES_DIR=os.path.abspath(gatest.TRACES))
            out = os.path.join(d, "seeds")
            r = subprocess.run(["python3", script, out], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=120, check=False)
            self.assertEqual(r.returncode, 0, r.stderr)
            real = [f for f in os.listdir(os.path.join(out, "lifetimes")) if f.startswith("real_")]
            self.assertTrue(real, "no rows of " + gatest.TRACES + "/lifetimes among the seeds")
        r = self.make_n("-B", f"{gatest.BUILD}/fuzz/seeds/.done", "GA_TRACES_DIR=/somewhere/traces")
        self.assertIn("GA_TRACES_DIR=/somewhere/traces python3 test/fuzz/make_seeds.py", r.stdout)


class BuildFolder(unittest.TestCase):
    """A build folder that cannot be made or written (a read-only checkout's build/; here one
    under a file, which root cannot make either) stops make before anything builds, saying to
    build elsewhere; it ended in mkdir's "cannot create directory 'build'" and make's errors."""

    def test_unwritable_build_folder_said_first(self):
        with tempfile.TemporaryDirectory() as d:
            afile = os.path.join(d, "afile")
            open(afile, "w").close()
            for goal in ("demo", "build-all"):
                r = subprocess.run(["make", "-n", "--no-print-directory", "-C", gatest.REPO,
                                    f"BUILD={afile}/b", goal], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, timeout=300, check=False)
                self.assertEqual(r.returncode, 2, r.stdout[-2000:])
                self.assertIn(f"gpuarena: cannot write the build folder {afile}/b (Not a "
                              "directory): a read-only checkout? build elsewhere with make "
                              f"BUILD=DIR (make BUILD=$HOME/gpuarena-build {goal})", r.stderr)
                self.assertEqual(r.stdout, "")
            r = subprocess.run(["make", "-s", "-C", gatest.REPO, f"BUILD={afile}/b", "help"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=60, check=False)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_absolute_build_folder_runs_the_tiers(self):
        # The advice above names an absolute folder ($HOME/gpuarena-build); the tiers and benchmarks
        # that ran ./$(BUILD)/... then ran .//home/.../unit_tests, "not found": make test-unit
        # printed that, wrote no TAP and exited 0 (an outside check, 2026-12-07).
        with tempfile.TemporaryDirectory() as d:
            build = os.path.join(d, "gpuarena-build")
            for goal in ("test-unit", "test-group", "valgrind-unit", "bench-alloc", "bench-scale",
                         "bench-free"):
                with self.subTest(goal=goal):
                    r = subprocess.run(["make", "-n", "--no-print-directory", "-C", gatest.REPO,
                                        f"BUILD={build}", f"GA_TRACES_DIR={gatest.TRACES}", goal],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       timeout=300, check=False)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertNotIn("./" + build, r.stdout)
                    self.assertIn(build + "/", r.stdout)
            self.assertFalse(os.path.exists(build), "make -n made nothing")


class DryRun(unittest.TestCase):
    """`make -n` makes nothing: the sanitizer goals ran their results folder's rm and mkdir on the
    line of their sub-makes, which make runs even in a dry run, so `make -n tsan` left an empty
    build-tsan (an outside check, 2026-12-07). Run in a copy of the checkout, whose build-*
    folders are its own."""

    def test_sanitizer_goals_dry_run_make_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            repo = os.path.join(d, "clone")
            shutil.copytree(gatest.REPO, repo, symlinks=True,
                            ignore=shutil.ignore_patterns(".git", "build", "build-*"))
            for goal in ("tsan", "asan", "ubsan"):
                with self.subTest(goal=goal):
                    r = subprocess.run(["make", "-n", "--no-print-directory", "-C", repo,
                                        f"GA_TRACES_DIR={os.path.abspath(gatest.TRACES)}", goal],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       timeout=300, check=False)
                    self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                    self.assertIn(f"build-{goal}/results", r.stdout)  # shown, not run
                    made = [n for n in os.listdir(repo) if n.startswith("build")]
                    self.assertEqual(made, [], "make -n made nothing")
            # test-asan (a tier of make test) wrote its log and TAP into a results folder there
            results = os.path.join(repo, "build", "results")
            os.makedirs(results)
            r = subprocess.run(["make", "-n", "--no-print-directory", "-C", repo,
                                f"GA_TRACES_DIR={os.path.abspath(gatest.TRACES)}", "BUILD=build",
                                "test-asan"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=300, check=False)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            self.assertIn("san-tiers BUILD=build-asan", r.stdout)
            self.assertEqual(os.listdir(results), [], "make -n test-asan wrote nothing")
            # make -n test: the tiers' loop runs (it names $(MAKE)), and the summary read tiers
            # that never ran: "0 passed, 10 failed", exit 2 (an outside check, 2026-12-07). BUILD
            # given: a run of this suite under make BUILD=DIR test-cmd passes BUILD down in
            # MAKEFLAGS, and the results folder would be DIR's
            os.rmdir(results)
            r = subprocess.run(["make", "-n", "--no-print-directory", "-C", repo,
                                f"GA_TRACES_DIR={os.path.abspath(gatest.TRACES)}", "BUILD=build",
                                "test"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=300, check=False)
            self.assertEqual(r.returncode, 0, r.stdout[-1000:] + r.stderr[-1000:])
            self.assertIn("sh scripts/test-summary.sh build/results sim unit", r.stdout)
            self.assertNotRegex(r.stdout + r.stderr, r"\d+ passed, \d+ failed")  # no summary
            self.assertFalse(os.path.exists(results), "make -n test made no results folder")


class HeadersOnlyToolkit(unittest.TestCase):
    """With a toolkit of headers alone (the README's minimum, or make CUDA=DIR elsewhere), the two
    tests that load the CUDA runtime cannot run: their TAP lines say `# SKIP` and why, and so
    does the summary. They passed without a word, and the preload one looked only under
    /usr/local/cuda whatever CUDA said."""

    def test_runtime_tests_skipped_with_the_reason(self):
        with tempfile.TemporaryDirectory() as d:
            cuda = os.path.join(d, "cuda")
            os.makedirs(cuda)
            os.symlink(os.path.join(CUDA_DIR, "include"), os.path.join(cuda, "include"))
            res = os.path.join(d, "results")
            env = dict(os.environ, CK_RUN_CASE="runtime")
            for tier, test in (("sim", "cuda_runtime_table"),
                               ("preload", "real_cudart_gets_hooks")):
                r = subprocess.run(["make", "-s", "--no-print-directory", "-C", gatest.REPO,
                                    f"BUILD={gatest.BUILD}", f"CUDA={cuda}", f"RESULTS={res}",
                                    f"test-{tier}"], env=env if tier == "preload" else None,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   timeout=600, check=False)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(os.path.join(res, tier + ".tap"), encoding="utf-8") as f:
                    line = [x for x in f if f":{test}:" in x]
                self.assertEqual(len(line), 1)
                self.assertIn(f"# SKIP no {cuda}/lib64/libcudart.so.13 (the CUDA runtime; a "
                              "toolkit of headers alone lacks it)", line[0])
                r = subprocess.run(["sh", os.path.join(gatest.REPO, "scripts", "test-summary.sh"),
                                    res, tier], stdout=subprocess.PIPE, text=True, check=False)
                self.assertIn("(1 of them skipped)", r.stdout)
                self.assertIn(test, r.stdout)


if __name__ == "__main__":
    unittest.main()
