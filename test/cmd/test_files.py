"""Files the command must not destroy, and files too large to read (issue 8 items 8 and 9).

`import` and `report` refuse to write over their input, also through a symbolic or hard link, and
leave it untouched. A 4 GiB file (sparse: no disk used) under an address-space limit of
3,000,000 KiB (ulimit -v), with or without a trace header or another format's header, ends in one
`gpuarena:` message and exit 1, quickly, never a MemoryError traceback; a gzip file that expands
past the limit meets the same end through the MemoryError net."""

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

import gatest
from gpuarena_cli import tracefile as tf

LIMIT_KIB = 3000000


def limited(kib):
    """preexec_fn: the child's address space limited to kib KiB, as `ulimit -v kib` does."""
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (kib * 1024, kib * 1024))
    return apply


class Files(unittest.TestCase, gatest.CliAsserts):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def cli_limited(self, *args, kib=LIMIT_KIB):
        return subprocess.run([sys.executable, gatest.SCRIPT] + list(args), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                              preexec_fn=limited(kib), check=False)

    def test_import_refuses_to_overwrite_its_input(self):
        src = os.path.join(self.dir, "in.csv")
        shutil.copy(gatest.traces("lifetimes")[0], src)
        with open(src, "rb") as f:
            before = f.read()
        sym, hard = os.path.join(self.dir, "sym.gatrace"), os.path.join(self.dir, "hard.gatrace")
        os.symlink(src, sym)
        os.link(src, hard)
        for fmt, inp, out in (("lifetimes", src, src), ("auto", src, sym), ("lifetimes", src, hard),
                              ("auto", sym, src), ("auto", src,
                                                   os.path.join(self.dir, ".", "in.csv"))):
            with self.subTest(inp=inp, out=out):
                p = gatest.cli("import", fmt, inp, "-o", out)
                self.assertCleanError(p, "is the input file", "another output path")
                with open(src, "rb") as f:
                    self.assertEqual(f.read(), before)
                self.assertTrue(os.path.islink(sym))
                self.assertFalse(os.path.exists(out + ".tmp"))
        # A different output path is fine.
        p = gatest.cli("import", "auto", sym, "-o", os.path.join(self.dir, "ok.gatrace"))
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_outputs_never_over_a_program(self):
        """import -o and report -o refuse a program or library (an ELF file, a script, an
        archive), as run --stats does: `import ... -o build/lib/libgpuarena.so` replaced the shim
        with a trace, exit 0. A copy of the shim, a script and an archive here."""
        src = gatest.traces("lifetimes")[0]
        shim = os.path.join(self.dir, "libgpuarena.so")
        shutil.copy(os.path.join(gatest.BUILD, "lib", "libgpuarena.so"), shim)
        script, archive = os.path.join(self.dir, "train.sh"), os.path.join(self.dir, "lib.a")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho training\n")
        with open(archive, "wb") as f:
            f.write(b"!<arch>\n")
        for path in (shim, script, archive):
            with open(path, "rb") as f:
                before = f.read()
            with self.subTest(path=os.path.basename(path)):
                p = gatest.cli("import", "lifetimes", src, "-o", path)
                self.assertCleanError(p, "is a program or library", code=2)
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), before)
        png = os.path.join(self.dir, "chart.png")
        shutil.copy(shim, png)
        p = gatest.cli("report", src, "-o", os.path.join(self.dir, "chart"),
                       env={"GPUARENA_NO_MATPLOTLIB": "1"})
        self.assertCleanError(p, f"-o {png} is a program or library", code=2)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "chart.json")))

    def test_outputs_never_over_a_ledger(self):
        """import -o, run --stats and run --trace refuse a group's ledger (a file that begins
        with GAGROUP and a NUL): each replaced it, and the group's members then lost the count
        of one another's memory (an outside re-test, 2026-12-06)."""
        src = gatest.traces("lifetimes")[0]
        ledger = os.path.join(self.dir, "gpuarena-0-g-0123")
        before = b"GAGROUP\0" + bytes(504)
        with open(ledger, "wb") as f:
            f.write(before)
        for args in (("import", "lifetimes", src, "-o", ledger),
                     ("run", "--sim", "--stats", ledger, "--", "true"),
                     ("run", "--sim", "--trace", ledger, "--", "true")):
            with self.subTest(args=args[:3]):
                p = gatest.cli(*args)
                self.assertCleanError(p, "is a gpuarena group's ledger", code=2)
                with open(ledger, "rb") as f:
                    self.assertEqual(f.read(), before)

    def test_run_stats_never_over_a_trace(self):
        """run --stats naming a trace (a file that begins GATRACE: another run's) is refused
        before the program runs, as the shim refuses GPUARENA_STATS there; it replaced it."""
        trace = os.path.join(self.dir, "old.gatrace")
        before = b"GATRACE\0" + bytes(24)
        with open(trace, "wb") as f:
            f.write(before)
        p = gatest.cli("run", "--sim", "--stats", trace, "--", "true")
        self.assertCleanError(p, "is a gpuarena trace", code=2)
        with open(trace, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_run_stats_to_a_fifo(self):
        """run --stats FIFO hung for ever before the program started: the check for a program
        at that path opened the FIFO to read its first bytes. Now the shim's writer says that
        nobody reads it (with a reader, the statistics go through: not tried here)."""
        fifo = os.path.join(self.dir, "stats.fifo")
        os.mkfifo(fifo)
        p = gatest.cli("run", "--sim", "--stats", fifo, "--",
                       os.path.join(gatest.BUILD, "examples", "ex_train"), "1", timeout=60)
        self.assertCleanError(p, "is a FIFO that nobody is reading")

    def test_trace_only_over_a_trace_and_never_under_other_outputs(self):
        """A trace never replaces a file that holds something else (run --trace notes.txt,
        import -o notes.txt: the user's file was replaced by binary records), and no other
        output replaces a trace (report -o X over X.json, compare --plot X over X.png, both
        traces: replaced, where --stats refuses it). Each refused before anything runs or is
        read, exit 2, the file as it was; an earlier trace and an empty file are still replaced."""
        notes = os.path.join(self.dir, "notes.txt")
        with open(notes, "wb") as f:
            f.write(b"precious notes\n")
        ex = os.path.join(gatest.BUILD, "examples", "ex_train")
        p = gatest.cli("run", "--sim", "--trace", notes, "--", ex, "1")
        self.assertCleanError(p, "is there and is not a gpuarena trace", code=2)
        csv = os.path.join(self.dir, "run.csv")
        shutil.copy(gatest.traces("lifetimes")[0], csv)
        p = gatest.cli("import", "lifetimes", csv, "-o", notes)
        self.assertCleanError(p, "is there and is not a gpuarena trace", code=2)
        with open(notes, "rb") as f:
            self.assertEqual(f.read(), b"precious notes\n")
        src = os.path.join(self.dir, "run.gatrace")
        open(src, "wb").close()  # an empty file: replaced
        p = gatest.cli("import", "lifetimes", csv, "-o", src)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(src, "rb") as f:
            trace = f.read()
        self.assertTrue(trace.startswith(b"GATRACE\0"))
        for name in ("other.json", "chart.png"):
            shutil.copy(src, os.path.join(self.dir, name))
        p = gatest.cli("report", src, "-o", os.path.join(self.dir, "other"))
        self.assertCleanError(p, "is a gpuarena trace, which this output would replace", code=2)
        p = gatest.cli("compare", "--sim", "--plot", os.path.join(self.dir, "chart"), "--", ex, "1")
        self.assertCleanError(p, "is a gpuarena trace, which this output would replace", code=2)
        for name in ("other.json", "chart.png"):
            with open(os.path.join(self.dir, name), "rb") as f:
                self.assertEqual(f.read(), trace)
        p = gatest.cli("run", "--sim", "--trace", src, "--", ex, "1")  # an earlier trace: replaced
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_report_default_not_over_other_files(self):
        """report without -o writes PREFIX.json and .png beside the input's name in the current
        folder: after `run --stats run.json --trace run.gatrace`, `report run.gatrace` replaced
        the statistics with the chart's JSON. A file there that is not an earlier report is
        refused now (nothing written); an earlier report is replaced, and -o replaces anything."""
        src = os.path.join(self.dir, "run.gatrace")
        shutil.copy(gatest.traces("lifetimes")[0], os.path.join(self.dir, "run.csv"))
        p = gatest.cli("import", "lifetimes", "run.csv", "-o", src, cwd=self.dir)
        self.assertEqual(p.returncode, 0, p.stderr)
        stats = os.path.join(self.dir, "run.json")
        with open(stats, "w") as f:
            f.write('{"gpuarena_stats": 2, "totals": {}}\n')
        env = {"GPUARENA_NO_MATPLOTLIB": "1"}
        p = gatest.cli("report", "run.gatrace", cwd=self.dir, env=env)
        self.assertCleanError(p, "would write run.json, which is there and is not an earlier "
                              "report (gpuarena's statistics", "nothing was written")
        with open(stats) as f:
            self.assertTrue(f.read().startswith('{"gpuarena_stats"'))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "run.png")))
        os.unlink(stats)
        for _ in range(2):  # the second replaces the first's report
            p = gatest.cli("report", "run.gatrace", cwd=self.dir, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.dir, "run.png"), "w") as f:
            f.write("not a picture")
        p = gatest.cli("report", "run.gatrace", cwd=self.dir, env=env)
        self.assertCleanError(p, "would write run.png, which is there and is not an earlier")
        p = gatest.cli("report", "run.gatrace", "-o", "run", cwd=self.dir, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_output_written_through_a_fresh_temporary(self):
        # The output once went through a fixed OUT.tmp: a link planted there was written
        # through, and an input named OUT.tmp was deleted. Now the temporary is a new name.
        precious = os.path.join(self.dir, "precious.txt")
        with open(precious, "w") as f:
            f.write("precious data")
        out = os.path.join(self.dir, "out.gatrace")
        os.symlink(precious, out + ".tmp")
        src = gatest.traces("lifetimes")[0]
        p = gatest.cli("import", "lifetimes", src, "-o", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(precious) as f:
            self.assertEqual(f.read(), "precious data")
        self.assertEqual(tf.read(out).events[0][tf.T_KIND], tf.ALLOC)
        self.assertEqual(oct(os.stat(out).st_mode & 0o777), oct(0o666 & ~self.umask()))
        inp = os.path.join(self.dir, "run1.gatrace.tmp")  # an input named OUT.tmp survives
        shutil.copy(src, inp)
        p = gatest.cli("import", "lifetimes", inp, "-o", os.path.join(self.dir, "run1.gatrace"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.isfile(inp))
        # An OUT that is a link is replaced by the file, as the shim's writer does; its target
        # is left alone.
        link = os.path.join(self.dir, "link.gatrace")
        os.symlink(precious, link)
        p = gatest.cli("import", "lifetimes", src, "-o", link)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.islink(link))
        with open(precious) as f:
            self.assertEqual(f.read(), "precious data")
        # report writes PREFIX.json the same way.
        os.symlink(precious, os.path.join(self.dir, "rep.json.tmp"))
        p = gatest.cli("report", out, "-o", os.path.join(self.dir, "rep"),
                       env={"GPUARENA_NO_MATPLOTLIB": "1"})
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(precious) as f:
            self.assertEqual(f.read(), "precious data")
        left = [n for n in os.listdir(self.dir) if n.endswith(".tmp")]
        self.assertEqual(sorted(left), ["out.gatrace.tmp", "rep.json.tmp", "run1.gatrace.tmp"])

    def test_png_written_through_a_fresh_temporary(self):
        if gatest.MPL_PYTHON is None:
            self.skipTest("no python3 with matplotlib on this machine")
        precious = os.path.join(self.dir, "precious.txt")
        with open(precious, "w") as f:
            f.write("precious data")
        os.symlink(precious, os.path.join(self.dir, "rep.png.tmp"))
        trace = os.path.join(self.dir, "t.gatrace")
        tf.write(trace, tf.Trace([tf.event(0, 1, 512, tf.ALLOC), tf.event(5, 1, 512, tf.FREE)]))
        p = subprocess.run([gatest.MPL_PYTHON, gatest.SCRIPT, "report", trace, "-o",
                            os.path.join(self.dir, "rep")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=300, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.dir, "rep.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        with open(precious) as f:
            self.assertEqual(f.read(), "precious data")

    def test_failed_write_leaves_no_temporary(self):
        sub = os.path.join(self.dir, "ro")
        os.mkdir(sub)
        out = os.path.join(sub, "out.gatrace")
        os.mkdir(out)
        # The command refuses a folder as -o before writing anything (a usage error)...
        p = gatest.cli("import", "lifetimes", gatest.traces("lifetimes")[0], "-o", out)
        self.assertCleanError(p, f"-o {out} is a folder", code=2)
        self.assertEqual(os.listdir(sub), ["out.gatrace"])
        # ...and the writer itself, whose rename onto the folder fails after the temporary is
        # written, removes the temporary.
        with self.assertRaises(Exception):
            tf.write(out, tf.Trace([tf.event(0, 1, 512, tf.ALLOC)]))
        self.assertEqual(os.listdir(sub), ["out.gatrace"])
        self.assertEqual(os.listdir(out), [])

    @staticmethod
    def umask():
        mask = os.umask(0o022)
        os.umask(mask)
        return mask

    def test_report_refuses_to_overwrite_its_input(self):
        trace = os.path.join(self.dir, "t.json")
        tf.write(trace, tf.Trace([tf.event(0, 1, 512, tf.ALLOC), tf.event(5, 1, 512, tf.FREE)]))
        with open(trace, "rb") as f:
            before = f.read()
        p = gatest.cli("report", trace, "-o", os.path.join(self.dir, "t"))
        self.assertCleanError(p, "is the input file")
        with open(trace, "rb") as f:
            self.assertEqual(f.read(), before)

    def sparse(self, name, head):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(head)
        os.truncate(path, 4 << 30)
        return path

    def test_huge_files_under_a_memory_limit(self):
        header = tf.HEADER.pack(tf.MAGIC, tf.VERSION, tf.RECORD.size, 0, 0)
        cases = [("trace", header, "needs at least"),
                 ("zeros", b"", "cannot tell its format"),
                 ("lifetimes", b"id,lower,upper,size\n", "needs at least"),
                 ("rmm", b"Thread,Time,Action,Pointer,Size,Stream\n", "needs at least"),
                 ("kineto", b'{"traceEvents": [', "needs at least"),
                 ("snapshot", b"\x80\x04", "needs at least")]
        out = os.path.join(self.dir, "out.gatrace")
        for name, head, needle in cases:
            path = self.sparse(name, head)
            for args in (["replay", path], ["import", "auto", path, "-o", out],
                         ["report", path, "-o", os.path.join(self.dir, "rep")]):
                with self.subTest(file=name, cmd=args[0]):
                    t0 = time.monotonic()
                    p = self.cli_limited(*args)
                    self.assertCleanError(p, needle, path)
                    self.assertNotIn("MemoryError", p.stderr)
                    self.assertLess(time.monotonic() - t0, 60)
                    self.assertFalse(os.path.exists(out))
            os.unlink(path)
        # A format named explicitly reads no more than detection does.
        path = self.sparse("explicit", b"")
        for fmt in ("lifetimes", "rmm", "kineto", "pytorch-snapshot"):
            with self.subTest(fmt=fmt):
                p = self.cli_limited("import", fmt, path, "-o", out)
                self.assertCleanError(p, "needs at least")

    def test_gzip_bomb_meets_the_memory_net(self):
        # 400 MiB of JSON blanks in a few hundred KiB of gzip: small enough to pass the size
        # check, too large to expand under a 300 MiB address-space limit.
        path = os.path.join(self.dir, "bomb.json.gz")
        comp = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = b" " * (1 << 20)
        with open(path, "wb") as f:
            f.write(comp.compress(b"{"))
            for _ in range(400):
                f.write(comp.compress(chunk))
            f.write(comp.compress(b"}") + comp.flush())
        p = self.cli_limited("import", "kineto", path, "-o", os.path.join(self.dir, "o"),
                             kib=300 * 1024)
        self.assertCleanError(p, "out of memory")
        self.assertNotIn("Traceback", p.stderr)


class FullOutput(unittest.TestCase, gatest.CliAsserts):
    """Standard output that cannot be written (/dev/full: a full disk) is one `gpuarena:` line
    and exit 1: `replay --json`, `replay`, `top --once` and `doctor` ended in a traceback
    (helper-82, 2026-12-06)."""

    def test_stdout_on_a_full_device(self):
        trace = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        with tempfile.TemporaryDirectory() as d, open("/dev/full", "w") as full:
            for args in (("replay", trace, "--json", "--mode", "platform"),
                         ("replay", trace, "--mode", "platform", "--no-min"),
                         ("top", "--once", "--dir", d)):
                with self.subTest(args=args[:2]):
                    p = subprocess.run([sys.executable, gatest.SCRIPT, *args], stdout=full,
                                       stderr=subprocess.PIPE, text=True, timeout=120)
                    self.assertCleanError(p, "cannot write the output: No space left on device")

    def test_stdout_closed(self):
        """Started with standard output closed (>&-), `run` exits with its program's code: the
        flush above met Python's sys.stdout None (a traceback, exit 1)."""
        p = subprocess.run([sys.executable, gatest.SCRIPT, "run", "--sim", "--", "sh", "-c",
                            "exit 3"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True, timeout=120, pass_fds=(), close_fds=True,
                           preexec_fn=lambda: os.close(1))
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertNotIn("Traceback", p.stderr)

    def test_stdout_closed_where_the_output_is_the_result(self):
        """replay, compare, doctor and top print their result on standard output: started with
        it closed (>&-) they ran to the end and exited 0 with the result lost, where a full
        device is exit 1 (an outside check, helper-109). They now refuse at once, exit 1."""
        trace = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        with tempfile.TemporaryDirectory() as d:
            for args in (("replay", trace, "--mode", "platform", "--no-min"),
                         ("compare", "--sim", "--", "true"), ("doctor", "--sim"),
                         ("top", "--once", "--dir", d)):
                with self.subTest(args=args[:2]):
                    p = subprocess.run([sys.executable, gatest.SCRIPT, *args],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True, timeout=120, preexec_fn=lambda: os.close(1))
                    self.assertCleanError(p, "gpuarena: standard output is closed (>&-), and "
                                          "the result is printed there: send it to a file or "
                                          "to /dev/null")


if __name__ == "__main__":
    unittest.main()
