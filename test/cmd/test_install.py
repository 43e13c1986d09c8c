"""`make install` / `make uninstall`: the installed command works from any directory, with no
build folder and no checkout in sight, and uninstall takes out exactly what install put in.

The tier's build folder is installed into a temporary prefix; the installed command is then run
from another directory, with GPUARENA_BUILD unset, under its own path and through a symlink:
--version, a replay of a shared trace, `run --sim` (the installed simulated driver and shim are
the ones used) and `doctor --sim`. A DESTDIR staging install works the same way."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import gatest


def make(*args):
    return subprocess.run(["make", "-s", "--no-print-directory", "-C", gatest.REPO,
                           f"BUILD={gatest.BUILD}"] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=600, check=False)


def files_under(root):
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(out)


class Install(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.elsewhere = os.path.join(self.dir, "elsewhere")
        os.makedirs(self.elsewhere)
        with open(os.path.join(gatest.REPO, "VERSION")) as f:
            self.version = f.read().strip()

    def tearDown(self):
        self.tmp.cleanup()

    def installed(self, exe, *args):
        """The installed command from another directory, without any build folder set."""
        env = dict(os.environ, **gatest.SAN_ENV)
        env.pop("GPUARENA_BUILD", None)
        return subprocess.run([sys.executable, exe] + [str(a) for a in args], env=env,
                              cwd=self.elsewhere, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=300, check=False)

    def test_install_use_uninstall(self):
        prefix = os.path.join(self.dir, "prefix")
        p = make(f"PREFIX={prefix}", "install")
        self.assertEqual(p.returncode, 0, p.stderr)
        got = files_under(prefix)
        for f in ("bin/gpuarena", "bin/gpuarena-replay", "lib/libgpuarena.so",
                  "lib/gpuarena/VERSION", "lib/gpuarena/MANIFEST",
                  "lib/gpuarena/sim/libcuda.so.1", "lib/gpuarena/gpuarena_cli/cli.py"):
            self.assertIn(f, got)
        exe = os.path.join(prefix, "bin", "gpuarena")
        self.assertTrue(os.access(exe, os.X_OK))

        p = self.installed(exe, "--version")
        self.assertEqual((p.returncode, p.stdout), (0, f"gpuarena {self.version}\n"), p.stderr)
        link = os.path.join(self.dir, "ga")
        os.symlink(exe, link)
        self.assertEqual(self.installed(link, "--version").stdout, f"gpuarena {self.version}\n")

        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_B.csv")
        p = self.installed(exe, "replay", src, "--json", "--no-min", "--mode", "grow")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertGreater(json.loads(p.stdout)["modes"]["grow"]["allocs"], 0)

        p = self.installed(exe, "run", "--sim", "--", "/bin/sh", "-c",
                           'echo "$LD_PRELOAD|$LD_LIBRARY_PATH"')
        self.assertEqual(p.returncode, 0, p.stderr)
        preload, libpath = p.stdout.strip().split("|")
        self.assertIn(os.path.join(prefix, "lib", "libgpuarena.so"), preload.split(":"))
        self.assertEqual(libpath.split(":")[0], os.path.join(prefix, "lib", "gpuarena", "sim"))
        stats = os.path.join(self.dir, "s.json")
        p = self.installed(exe, "run", "--sim", "--stats", stats, "--",
                           os.path.join(gatest.BUILD, "examples", "ex_direct"), "10", "64", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(stats) as f:
            self.assertEqual(json.load(f)["totals"]["alloc_calls"], 10)

        p = self.installed(exe, "doctor", "--sim", "--json", "--timeout", "60")
        doc = json.loads(p.stdout)
        self.assertEqual(doc["shim"], os.path.join(prefix, "lib", "libgpuarena.so"))
        self.assertEqual(doc["machine"]["driver_path"],
                         os.path.join(prefix, "lib", "gpuarena", "sim", "libcuda.so.1"))

        p = make(f"PREFIX={prefix}", "uninstall")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(files_under(prefix), [])
        self.assertFalse(os.path.exists(os.path.join(prefix, "lib", "gpuarena")))
        p = make(f"PREFIX={prefix}", "uninstall")  # again: nothing there, and says so
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("nothing to uninstall", p.stderr)

    def test_destdir_and_bad_prefix(self):
        stage = os.path.join(self.dir, "stage")
        p = make("PREFIX=/opt/gpuarena", f"DESTDIR={stage}", "install")
        self.assertEqual(p.returncode, 0, p.stderr)
        exe = os.path.join(stage, "opt", "gpuarena", "bin", "gpuarena")
        self.assertEqual(self.installed(exe, "--version").stdout, f"gpuarena {self.version}\n")
        p = make("PREFIX=/opt/gpuarena", f"DESTDIR={stage}", "uninstall")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(files_under(stage), [])
        p = make("PREFIX=relative/dir", "install")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("PREFIX must be an absolute path", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(gatest.REPO, "relative")))

    def test_uninstall_that_cannot_remove_says_so(self):
        """A file uninstall cannot remove (a user's uninstall of root's install; here a folder
        planted where a file was, which root cannot rm -f either) ended in rm's message alone."""
        prefix = os.path.join(self.dir, "prefix")
        self.assertEqual(make(f"PREFIX={prefix}", "install").returncode, 0)
        planted = os.path.join(prefix, "lib", "gpuarena", "VERSION")
        os.remove(planted)
        os.mkdir(planted)
        p = make(f"PREFIX={prefix}", "uninstall")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"gpuarena: cannot remove {planted} (Is a directory): uninstall as the user "
                      "who installed it (root for /usr/local)", p.stderr)
        self.assertNotIn("rm:", p.stderr)
        self.assertTrue(os.path.exists(os.path.join(prefix, "lib", "gpuarena", "MANIFEST")),
                        "the list stays for a second try")

    def test_script_from_another_directory(self):
        """scripts/install.sh run from elsewhere (its usage line's way): BUILD and DESTDIR as the
        caller names them, the sources from its own checkout; it said scripts/gpuarena "is not
        built"."""
        script = os.path.join(gatest.REPO, "scripts", "install.sh")
        rel = os.path.relpath(gatest.BUILD, self.elsewhere)
        p = subprocess.run(["sh", script, "install", rel, "/opt/ga", "stage"], cwd=self.elsewhere,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300,
                           check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        exe = os.path.join(self.elsewhere, "stage", "opt", "ga", "bin", "gpuarena")
        self.assertEqual(self.installed(exe, "--version").stdout, f"gpuarena {self.version}\n")
        p = subprocess.run(["sh", script, "uninstall", rel, "/opt/ga", "stage"],
                           cwd=self.elsewhere, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=300, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(files_under(os.path.join(self.elsewhere, "stage")), [])
        p = subprocess.run(["sh", script, "install", "nowhere", "/opt/ga", "stage"],
                           cwd=self.elsewhere, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=300, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertIn("gpuarena: no build folder 'nowhere' here", p.stderr)

    def test_prefix_that_cannot_be_made_says_what_to_do(self):
        """A PREFIX whose folders cannot be made (a user's default /usr/local; here, one under a
        file, which root cannot make either) ended in mkdir's own message alone."""
        afile = os.path.join(self.dir, "afile")
        open(afile, "w").close()
        p = make(f"PREFIX={afile}/p", "install")
        self.assertEqual(p.returncode, 2, p.stderr)  # make's code for a failed recipe
        self.assertIn(f"gpuarena: cannot create {afile}/p/lib/gpuarena (Not a directory): install "
                      "where you may write (make install PREFIX=$HOME/.local), or as root",
                      p.stderr)
        self.assertNotIn("mkdir:", p.stderr)

    def test_prefix_the_loader_would_split_and_planted_links(self):
        for name in ("with space", "co:lon"):
            prefix = os.path.join(self.dir, name)
            p = make(f"PREFIX={prefix}", "install")
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("contains white space or a colon, where the loader splits LD_PRELOAD",
                          p.stderr)
            self.assertFalse(os.path.exists(prefix))
        # Files once went through fixed NAME.tmp paths: links planted there were written through.
        prefix = os.path.join(self.dir, "prefix")
        precious = os.path.join(self.dir, "precious")
        with open(precious, "w") as f:
            f.write("precious data")
        for rel in ("bin/gpuarena.tmp", "lib/libgpuarena.so.tmp", "lib/gpuarena/MANIFEST.tmp"):
            os.makedirs(os.path.dirname(os.path.join(prefix, rel)), exist_ok=True)
            os.symlink(precious, os.path.join(prefix, rel))
        p = make(f"PREFIX={prefix}", "install")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(precious) as f:
            self.assertEqual(f.read(), "precious data")
        self.assertEqual(oct(os.stat(os.path.join(prefix, "bin", "gpuarena")).st_mode & 0o777),
                         oct(0o755))
        self.assertEqual(oct(os.stat(os.path.join(prefix, "lib", "gpuarena", "MANIFEST")).st_mode
                             & 0o777), oct(0o644))
        p = make(f"PREFIX={prefix}", "uninstall")
        self.assertEqual(p.returncode, 0, p.stderr)
        left = files_under(prefix)  # only the planted links: nothing of install's own
        self.assertEqual(left, ["bin/gpuarena.tmp", "lib/gpuarena/MANIFEST.tmp",
                                "lib/libgpuarena.so.tmp"])

    def test_summary_says_skips_and_failures(self):
        """scripts/test-summary.sh, which ends `make test`: a skipped test is counted as passed but
        listed with its reason (issue 12: a test that cannot run says why in the summary; only
        failures were listed), a failure with its reason, a tier with no results as a failure."""
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "a.tap"), "w") as f:
                f.write("ok 1 - runs\nok 2 - full folder # SKIP no tmpfs here (mount one)\n"
                        "not ok 3 - breaks\n# the reason\n")
            with open(os.path.join(d, "b.tap"), "w") as f:
                f.write("ok 1 - fine\n")
            p = subprocess.run(["sh", os.path.join(gatest.REPO, "scripts", "test-summary.sh"), d,
                                "a", "b", "c"], stdout=subprocess.PIPE, text=True, check=False)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout.splitlines(), [
            "a: 2 passed (1 of them skipped), 1 failed",
            "  a: ok 2 - full folder # SKIP no tmpfs here (mount one)",
            "  a: not ok 3 - breaks (the reason)",
            "b: 1 passed, 0 failed",
            f"c: no results (the tier did not run to the end; see {d}/c.log): 0 passed, 1 failed",
            "3 passed, 2 failed"])

    def test_make_help_and_version(self):
        p = make("help")
        self.assertEqual(p.returncode, 0, p.stderr)
        for target in ("all", "demo", "test", "test-cmd", "bench", "install", "uninstall",
                       "help", "version", "asan", "tsan"):
            self.assertRegex(p.stdout, rf"(?m)^  {target}\b")
        # Every variable a newcomer may need to set, GA_TRACES_DIR too (make test stops without
        # the traces and names it; help did not list it until 2026-12-07).
        for var in ("BUILD=", "CUDA", "PREFIX", "DESTDIR", "GA_TRACES_DIR"):
            self.assertIn(var, p.stdout)
        self.assertEqual(make("version").stdout, f"gpuarena {self.version}\n")
        # No CUDA toolkit: said with the fix before anything builds (it was the compiler's bare
        # "cuda.h: No such file or directory"); goals that build nothing still work.
        with tempfile.TemporaryDirectory() as d:
            p = make(f"CUDA={d}/none", "build-all")
            self.assertEqual(p.returncode, 2)
            self.assertIn(f"gpuarena: {d}/none/include/cuda.h not found: install the CUDA toolkit",
                          p.stderr)
            self.assertIn("set CUDA=DIR", p.stderr)
            self.assertEqual(make(f"CUDA={d}/none", "help").returncode, 0)


if __name__ == "__main__":
    unittest.main()
