"""Findings of an outside check of the command (helper-119).

A bad value of 5,000 characters was quoted whole in the usage error, argparse's own (`invalid
choice: 'xxx...'`) and the command's (`--stats DIR/ is a folder`), a message of 5,000 or 10,000
characters: every user's value in a message is now bounded, by its head, its tail and its length.
`gpuarena-replay --arena-size 100` replayed an arena of 512 bytes, and `--vmm-keep 1MiB` kept no
granule, without a word. A report file the user may write, in a folder the user may not, was
refused or not updated (the command writes a temporary beside it and renames it into place)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import gatest

LONG = "x" * 5000


def _lines(text):
    return [line for line in text.splitlines() if line.strip()]


class LongValuesBounded(unittest.TestCase):
    """Every message that echoes a 5,000-character value is a few hundred characters, says the
    value's length, and keeps its `gpuarena:` prefix and its advice."""

    CASES = (  # (arguments, a part of the advice that must survive)
        (("run", "--mode", LONG, "--", "true"), "see gpuarena run --help"),
        (("run", "--mode", "a b " * 1250, "--", "true"), "see gpuarena run --help"),
        (("run", "--limit", LONG, "--", "true"), "try 8GiB"),
        (("run", "--fraction", LONG, "--", "true"), "try 0.75"),
        (("run", "--env", LONG, "--", "true"), "see gpuarena run --help"),
        (("run", "--" + LONG, "--", "true"), "see gpuarena run --help"),
        (("run", "--stats", LONG + "/", "--", "true"), "name a file in it"),
        (("run", "--trace", "/nonexistent/" + LONG, "--", "true"), "create it or give"),
        (("replay", "--format", LONG, "t"), "choose from"),
        (("replay", "--device", LONG, "t"), "-32768 to 32767"),
        (("replay", "--mode", "arena," + LONG, "t"), "see gpuarena replay --help"),
        (("replay", LONG), "cannot read"),
        (("report", "t.gatrace", "-o", LONG + "/"), "give one inside it"),
        (("compare", "--repeat", LONG, "--", "true"), "try --repeat 5"),
        (("doctor", "--timeout", LONG), "try 30 or 300"),
        (("top", "--interval", LONG), "try 2 or 0.5"),
        (("import", LONG, "f", "-o", "o"), "choose from"),
        ((LONG,), "choose from"),
    )

    def test_long_values_bounded(self):
        for args, advice in self.CASES:
            with self.subTest(args=[a[:20] for a in args]):
                p = gatest.cli(*args)
                self.assertIn(p.returncode, (1, 2), p.stderr[:300])
                self.assertNotIn("Traceback", p.stderr)
                lines = _lines(p.stderr)
                self.assertTrue(lines and lines[0].startswith("gpuarena: "), p.stderr[:300])
                self.assertLess(max(map(len, lines)), 600, lines[0][:300])
                self.assertIn("characters)", lines[0])
                self.assertIn("...", lines[0])
                self.assertIn(advice, p.stderr)

    def test_short_values_whole(self):
        """A value of ordinary length is quoted whole, as before."""
        p = gatest.cli("run", "--mode", "arenna", "--", "true")
        self.assertEqual(p.returncode, 2)
        self.assertIn("'arenna'", p.stderr)
        path = "/nonexistent/" + "d" * 120 + "/t.gatrace"
        p = gatest.cli("run", "--sim", "--trace", path, "--", "true")
        self.assertIn(path, p.stderr)


class ReadErrorsSayWhatToDo(unittest.TestCase):
    def test_missing_input_says_what_to_do(self):
        """`replay missing.gatrace` said `cannot read missing.gatrace: No such file or
        directory` and nothing of what to do; so did import and report."""
        with tempfile.TemporaryDirectory() as d:
            missing = os.path.join(d, "missing.gatrace")
            for args in (("replay", missing), ("report", missing, "-o", os.path.join(d, "r")),
                         ("import", "auto", missing, "-o", os.path.join(d, "o.gatrace"))):
                with self.subTest(args=args[0]):
                    p = gatest.cli(*args)
                    self.assertEqual(p.returncode, 1, p.stderr)
                    self.assertRegex(p.stderr, r"^gpuarena: cannot read .*: No such file or "
                                     r"directory; check the path")
            for name in ("missing.gatrace", "missing.csv"):  # gpuarena-replay's own reader
                p = subprocess.run([os.path.join(gatest.BUILD, "bin", "gpuarena-replay"),
                                    os.path.join(d, name)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, timeout=60, check=False)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertEqual(p.stderr, f"gpuarena: cannot open {os.path.join(d, name)}: No "
                                 "such file or directory; check the path, or give the trace or "
                                 "lifetimes CSV to read\n")


class HelpAndMessages(unittest.TestCase):
    """What --help and a few wrong invocations said against the README: `--mode arena,grow`
    of run or report was an unknown mode; an RMM or lifetimes CSV header that did not match
    said what was expected but not what to do; --help named SIGTERM and SIGHUP alone as passed
    on (the README: SIGALRM, SIGUSR1 and SIGUSR2 too), replay's --no-min skipped "the smallest
    arena" (every mode's smallest size), and compare's --repeat gave no default or bound."""

    def test_one_mode_not_a_list(self):
        for sub in (("run", "--mode", "arena,grow", "--", "true"),
                    ("report", "t.gatrace", "--mode", "Arena, grow")):
            with self.subTest(sub=sub[0]):
                p = gatest.cli(*sub)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(": one mode here, not a list (use one of arena, grow, vmm, "
                              "platform; compare --modes and replay --mode take a list)", p.stderr)

    def test_csv_header_says_what_to_do(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "notes.csv")
            with open(src, "w", encoding="ascii") as f:
                f.write("a,b\n1,2\n")
            for fmt in ("rmm", "lifetimes"):
                p = gatest.cli("import", fmt, src, "-o", os.path.join(d, "o.gatrace"))
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn("expected the header", p.stderr)
                self.assertIn("give a file of that format, or the format it is in (auto detects "
                              "it)", p.stderr)

    def test_help_agrees_with_the_readme(self):
        top = gatest.cli("--help").stdout
        self.assertIn("SIGTERM, SIGHUP, SIGALRM, SIGUSR1, SIGUSR2: run and compare pass them on",
                      " ".join(top.split()))
        replay = " ".join(gatest.cli("replay", "--help").stdout.split())
        self.assertNotIn("smallest arena", replay)
        self.assertIn("--arena-size SIZE", replay)
        self.assertIn("whole blocks of 512 bytes (a size rounded up is said)", replay)
        compare = " ".join(gatest.cli("compare", "--help").stdout.split())
        self.assertIn("--repeat N runs per mode (median wall time; default 1, at most 10,000)",
                      compare)


class RoundedSizesSaid(unittest.TestCase):
    """An arena is whole blocks of 512 bytes and vmm keeps whole granules: a size the replay
    used other than as given was taken without a word (`--arena-size 100` replayed a 512-byte
    arena, `--vmm-keep 1MiB` kept nothing), now said on stderr with what is used instead."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.csv = os.path.join(self.tmp.name, "t.csv")
        with open(self.csv, "w", encoding="ascii") as f:
            f.write("id,lower,upper,size\n0,0,2,4096\n1,1,3,100\n")

    def tearDown(self):
        self.tmp.cleanup()

    def tool(self, *args):
        return subprocess.run([os.path.join(gatest.BUILD, "bin", "gpuarena-replay"), "--json",
                               *args, self.csv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=60, check=False)

    def test_arena_size_rounded_said(self):
        for size, used, said in (("100", 512, "is under one block (512 bytes): an arena is whole "
                                  "blocks, so it is 512 bytes; give at least 512"),
                                 ("1000", 1024, "is not a whole number of blocks (512 bytes "
                                  "each): an arena is whole blocks, so it is 1024 bytes; "
                                  "give a multiple of 512"),
                                 ("1024", 1024, None)):
            with self.subTest(size=size):
                p = self.tool("--mode", "arena", "--arena-size", size)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(json.loads(p.stdout)["modes"]["arena"]["size_limit"], used)
                if said:
                    self.assertEqual(p.stderr, f"gpuarena: arena mode: --arena-size {size} "
                                     f"{said}" + (" (e.g. 1024)" if size == "1000" else "") + "\n")
                else:
                    self.assertEqual(p.stderr, "")
        p = gatest.cli("replay", "--mode", "arena", "--arena-size", "100", self.csv)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gpuarena: arena mode: --arena-size 100 is under one block", p.stderr)

    def test_vmm_keep_under_a_granule_said(self):
        for keep, said in (("1MiB", "--vmm-keep 1048576 is under one granule (2097152 bytes: "
                            "2 MiB, current GPUs' granule): vmm keeps whole granules, so none is "
                            "kept mapped, as with --vmm-keep 0"),
                           ("3MiB", "--vmm-keep 3145728 is not a whole number of granules "
                            "(2097152 bytes each: 2 MiB, current GPUs' granule): vmm keeps whole "
                            "granules, so at most 2097152 bytes (1 granule) are kept mapped"),
                           ("0", None), ("4MiB", None)):
            with self.subTest(keep=keep):
                p = self.tool("--mode", "vmm", "--vmm-keep", keep)
                self.assertEqual(p.returncode, 0, p.stderr)
                if said:
                    self.assertTrue(p.stderr.startswith(f"gpuarena: vmm mode: {said}"), p.stderr)
                else:
                    self.assertEqual(p.stderr, "")
        p = self.tool("--mode", "vmm", "--vmm-keep", "1000", "--granularity", "512")
        self.assertIn("(512 bytes each: --granularity)", p.stderr)
        p = gatest.cli("replay", "--mode", "vmm", "--vmm-keep", "1MiB", self.csv)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gpuarena: vmm mode: --vmm-keep 1048576 is under one granule", p.stderr)


class LockedFolder(unittest.TestCase):
    """A file the user may write, in a folder the user may not (no new file there): the command
    wrote each output to a temporary beside it and renamed it into place, so `import -o`,
    `report -o` and `run --stats` were refused before they began (`cannot write in the folder`).
    Such a file is now written in place; a link, a file of several names (a hard link) or a
    missing file is still refused, saying why. As root (whom no folder refuses) the command runs
    as nobody, in a folder of root's."""

    def setUp(self):
        self.root = os.geteuid() == 0
        self.tmp = tempfile.TemporaryDirectory(dir="/tmp")  # one nobody can reach
        top = self.tmp.name
        os.chmod(top, 0o777)
        self.env = dict(os.environ, TMPDIR=top, GPUARENA_NO_MATPLOTLIB="1")
        self.csv = os.path.join(top, "in.csv")
        with open(self.csv, "w", encoding="ascii") as f:
            f.write("id,lower,upper,size\n0,0,2,4096\n1,1,3,8192\n")
        self.ref = os.path.join(top, "ref.gatrace")
        self.assertEqual(gatest.cli("import", "lifetimes", self.csv, "-o", self.ref).returncode, 0)
        self.locked = os.path.join(top, "locked")
        os.mkdir(self.locked)
        self.files = {"t.gatrace": b"GATRACE\0", "r.json": b'{"traceEvents":[]}',
                      "s.json": b'{"gpuarena_stats": 1}\n', "h.gatrace": b"GATRACE\0"}
        for name, data in self.files.items():
            path = os.path.join(self.locked, name)
            with open(path, "wb") as f:
                f.write(data)
            if self.root:
                os.chown(path, 65534, 65534)
        os.link(os.path.join(self.locked, "h.gatrace"), os.path.join(self.locked, "h2.gatrace"))
        os.symlink(os.path.join(top, "elsewhere.gatrace"), os.path.join(self.locked, "l.gatrace"))
        os.chmod(self.locked, 0o755 if self.root else 0o555)
        self.python = self._python()

    def tearDown(self):
        os.chmod(self.locked, 0o755)
        self.tmp.cleanup()

    def _as_nobody(self):
        if self.root:
            os.setgid(65534)
            os.setuid(65534)

    def _python(self):
        for x in (sys.executable, "/usr/bin/python3"):  # nobody may not reach root's pyenv
            try:
                subprocess.run([x, gatest.SCRIPT, "--help"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=60, check=True, env=self.env,
                               preexec_fn=self._as_nobody)
                return x
            except (OSError, subprocess.SubprocessError):
                continue
        self.skipTest("no interpreter or command this user (nobody) may run")
        return None

    def cli(self, *args):
        return subprocess.run([self.python, gatest.SCRIPT, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False,
                              env=self.env, cwd=self.tmp.name, preexec_fn=self._as_nobody)

    def read(self, name):
        with open(os.path.join(self.locked, name), "rb") as f:
            return f.read()

    def test_files_written_in_place(self):
        p = self.cli("import", "lifetimes", self.csv, "-o", os.path.join(self.locked, "t.gatrace"))
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.ref, "rb") as f:
            self.assertEqual(self.read("t.gatrace"), f.read())
        p = self.cli("report", self.csv, "-o", os.path.join(self.locked, "r"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(self.read("r.json").startswith(b'{"traceEvents":['))
        self.assertGreater(len(self.read("r.json")), len(self.files["r.json"]))
        prog = os.path.join(gatest.BUILD, "examples", "ex_train")
        p = self.cli("run", "--sim", "--stats", os.path.join(self.locked, "s.json"), "--", prog,
                     "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotEqual(self.read("s.json"), self.files["s.json"])
        self.assertTrue(json.loads(self.read("s.json"))["gpuarena_stats"])
        # the shim writes a trace in place itself (truncated under its lock): let through too
        p = self.cli("run", "--sim", "--trace", os.path.join(self.locked, "t.gatrace"), "--",
                     prog, "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("untraced", p.stderr)
        with open(self.ref, "rb") as f:
            self.assertNotEqual(self.read("t.gatrace"), f.read())
        self.assertTrue(self.read("t.gatrace").startswith(b"GATRACE\0"))
        self.assertEqual(sorted(os.listdir(self.locked)),
                         ["h.gatrace", "h2.gatrace", "l.gatrace", "r.json", "s.json",
                          "t.gatrace"])

    def test_a_trace_being_written_is_not_written_over(self):
        """The shim holds a trace it writes locked (flock) for its life: written in place, an
        import over it would mix the two; it is refused, the file left whole."""
        import fcntl
        path = os.path.join(self.locked, "t.gatrace")
        with open(path, "rb") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)
            p = self.cli("import", "lifetimes", self.csv, "-o", path)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("a running process is writing it", p.stderr)
        self.assertEqual(self.read("t.gatrace"), self.files["t.gatrace"])

    def test_links_and_new_files_refused(self):
        for name, why in (("h.gatrace", "other name(s) (hard links)"),
                          ("l.gatrace", "is a symbolic link"), ("new.gatrace", None)):
            with self.subTest(name=name):
                out = os.path.join(self.locked, name)
                p = self.cli("import", "lifetimes", self.csv, "-o", out)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertTrue(p.stderr.startswith(f"gpuarena: -o {out}: cannot write in the "
                                                    f"folder {self.locked} ("), p.stderr)
                self.assertIn("give a path in a folder you can write", p.stderr)
                if why:
                    self.assertIn(why, p.stderr)
        self.assertEqual(self.read("h2.gatrace"), b"GATRACE\0")
        self.assertFalse(os.path.lexists(os.path.join(self.locked, "new.gatrace")))
        self.assertFalse(os.path.lexists(os.path.join(self.tmp.name, "elsewhere.gatrace")))


if __name__ == "__main__":
    unittest.main()
