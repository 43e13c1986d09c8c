"""Findings of an outside check of the gpuarena command and trace recording (helper-125).

- `gpuarena run --trace T` while another running process writes T: the shim leaves such a trace
  whole and the program runs untraced, and the command then said `--trace T was not written by
  this run (no allocation was recorded): what it holds is from before`, three claims of which none
  was true (the program allocated; the trace was being written, by the other process), exit 0.
  Now refused before the program starts when T is held already, and said as held by another
  process when it was taken meanwhile; a program that allocated but wrote no trace is said so.
- Two traces joined end to end (`cat a.gatrace b.gatrace > c.gatrace`): b's header was read as
  part of a record and b's records 32 bytes out of step, garbage events replayed with exit 0 (39
  of 78 "skipped" on a real pair) and a note blaming a killed recorder; refused now, by the
  command's reader and by gpuarena-replay's (allocator/trace.c).
- A lifetimes CSV headed `ID,Lower,Upper,Size` (or with blanks around the names) replayed through
  `gpuarena replay` and was refused by gpuarena-replay ("header must be 'id,lower,upper,size'");
  a zero-size row was "id, lower must be >= 0 and size > 0" (neither id nor lower was at fault)
  in the command and "size 0" in the tool, neither saying what to do.
- A PyTorch snapshot pickled with protocol 0 or 1 (re-saved with `pickle.dump(d, f, 0)`; no PROTO
  opcode at its start) was "cannot tell its format (not ... a pickle snapshot ...)" to `import
  auto`, `replay` and `report`, where `import pytorch-snapshot` read it.
- `gpuarena report` of a trace of more than 20,000 allocations wrote its JSON without the
  allocations' slices, said only by `otherData.slices_included` (false): a user looked for them
  in the viewer. Said on stderr now.
- A Kineto trace profiled without `profile_memory=True` (no `[memory]` event), or whose memory
  events are all the CPU's, imported to an empty trace with exit 0 and not a word, and `replay`
  and `report` said only "record a run that allocates GPU memory": each says what to do now.
- A PyTorch snapshot dumped without memory history (`device_traces` empty) imported its live
  blocks alone without a word: said now, with `_record_memory_history()` as the way.
- `gpuarena compare` said of a run killed by SIGKILL "the program exited 137" alone: the signal is
  named now.
- `gpuarena import auto T.gatrace -o OUT --close`: a gpuarena trace's live blocks were left live
  without a word, where `--close` frees blocks still live at the end for every other format.
"""

import fcntl
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import unittest

import gatest

sys.path.insert(0, os.path.join(gatest.REPO, "scripts"))
from gpuarena_cli import tracefile as tf  # noqa: E402

EX_TRAIN = os.path.join(gatest.BUILD, "examples", "ex_train")

# Holds an exclusive flock on argv[1] (as the shim holds a trace it writes), says its pid in
# argv[2] once it holds it, and sleeps until killed.
HOLDER = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
time.sleep(120)
"""


class TraceHeldByAnotherProcess(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.trace = os.path.join(self.tmp.name, "t.gatrace")

    def tearDown(self):
        self.tmp.cleanup()

    def test_refused_before_the_program_starts(self):
        """T held (flock) by another process when `run` starts: exit 1 before the program runs,
        saying so and what to do; T left as it was."""
        with open(self.trace, "wb") as f:
            f.write(tf.HEADER.pack(tf.MAGIC, tf.VERSION, tf.RECORD.size, 0, 0))
        fd = os.open(self.trace, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            p = gatest.cli("run", "--sim", "--trace", self.trace, "--", EX_TRAIN, "2",
                           timeout=60)
        finally:
            os.close(fd)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertNotIn("ex_train:", p.stdout + p.stderr)  # the program never ran
        self.assertIn("is being written by another running process", p.stderr)
        self.assertIn("%p", p.stderr)
        self.assertNotIn("no allocation was recorded", p.stderr)
        self.assertEqual(os.path.getsize(self.trace), tf.HEADER.size)

    def test_taken_during_the_run_said_as_the_other_process(self):
        """T taken by another process after `run` started (the program starts the holder, waits
        until it holds T, then allocates): the shim runs the program untraced, and the command
        says T is the other process's, not "no allocation was recorded ... from before"."""
        ready = os.path.join(self.tmp.name, "ready")
        script = ('"$PY" -c "$HOLDER" "$TT" "$READY" >/dev/null 2>&1 & '
                  'while [ ! -s "$READY" ]; do sleep 0.05; done; exec "$0" 2')
        env = {"PY": sys.executable, "HOLDER": HOLDER, "TT": self.trace, "READY": ready}
        try:
            p = gatest.cli("run", "--sim", "--trace", self.trace, "--", "sh", "-c", script,
                           EX_TRAIN, env=env, timeout=60)
        finally:
            if os.path.exists(ready):
                with open(ready) as f:
                    os.kill(int(f.read()), signal.SIGKILL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ex_train:", p.stdout)
        self.assertIn(f"--trace {self.trace} was not written by this run: it is being written "
                      "by another running process", p.stderr)
        self.assertNotIn("no allocation was recorded", p.stderr)


class JoinedTraces(unittest.TestCase):
    def test_joined_traces_refused(self):
        """A file of two traces joined end to end, with whole records or a partial one before
        the second header, is refused by every reader, naming the byte where the second
        header begins; each part alone replays."""
        ev = tf.event
        part = tf.encode(tf.Trace([ev(10, 0x1000, 4096, tf.ALLOC), ev(20, 0x1000, 0, tf.FREE)]))
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        with tempfile.TemporaryDirectory() as d:
            for cut in (0, 5):  # whole records; a record cut 5 bytes short (a killed recorder)
                first = part[:len(part) - cut]
                path = os.path.join(d, f"joined{cut}.gatrace")
                with open(path, "wb") as f:
                    f.write(first + part)
                said = f"a second trace header at byte {len(first)}"
                with self.assertRaises(tf.GaError) as e:
                    tf.read(path)
                self.assertIn(said, str(e.exception))
                for args in (["replay", path, "--no-min"], ["report", path, "-o",
                             os.path.join(d, "r")], ["import", "auto", path, "-o",
                             os.path.join(d, "o.gatrace")]):
                    p = gatest.cli(*args)
                    self.assertEqual(p.returncode, 1, (args, p.stderr))
                    self.assertIn(said, p.stderr, args)
                    self.assertIn("replay each file on its own", p.stderr, args)
                p = subprocess.run([tool, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, timeout=60, check=False)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(said, p.stderr)
                self.assertFalse(os.path.exists(os.path.join(d, "o.gatrace")))
            alone = os.path.join(d, "alone.gatrace")
            with open(alone, "wb") as f:
                f.write(part)
            self.assertEqual(gatest.cli("replay", alone, "--no-min").returncode, 0)


class LifetimesHeaderAndRows(unittest.TestCase):
    TOOL = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")

    def tool(self, *args):
        return subprocess.run([self.TOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=60, check=False)

    def test_header_any_case_in_both_readers(self):
        """The header in any case, blanks around its names: both readers take it, to the same
        figures as the plain header; another header is refused by both."""
        body = "0,0,3,100\n1,1,4,700\n"
        with tempfile.TemporaryDirectory() as d:
            figures = []
            for i, head in enumerate(("id,lower,upper,size", "ID,Lower,Upper,Size",
                                      " id , LOWER,upper\t,Size ")):
                path = os.path.join(d, f"h{i}.csv")
                with open(path, "w") as f:
                    f.write(head + "\n" + body)
                t = self.tool(path, "--json", "--mode", "arena")
                self.assertEqual(t.returncode, 0, (head, t.stderr))
                c = gatest.cli("replay", path, "--json", "--mode", "arena", "--no-min")
                self.assertEqual(c.returncode, 0, (head, c.stderr))
                tool_arena = json.loads(t.stdout)["modes"]["arena"]
                cmd_arena = json.loads(c.stdout)["modes"]["arena"]
                keys = ("events", "allocs", "frees", "peak_in_use", "peak_reserved")
                self.assertEqual([tool_arena[k] for k in keys], [cmd_arena[k] for k in keys])
                figures.append([tool_arena[k] for k in keys])
            self.assertEqual(figures[0], figures[1])
            self.assertEqual(figures[0], figures[2])
            path = os.path.join(d, "other.csv")
            with open(path, "w") as f:
                f.write("id,lower,upper,sizes\n" + body)
            self.assertEqual(self.tool(path).returncode, 1)
            self.assertEqual(gatest.cli("replay", path).returncode, 1)

    def test_bad_rows_say_what_to_do(self):
        """A row of size 0 is named as such and, like every refused row of the tool, with what
        to do."""
        with tempfile.TemporaryDirectory() as d:
            for body, said in (("0,0,3,0\n", "size 0"), ("0,5,3,1\n", "upper is before lower"),
                               ("0,x,3,1\n", "not a number")):
                path = os.path.join(d, "bad.csv")
                with open(path, "w") as f:
                    f.write("id,lower,upper,size\n" + body)
                t = self.tool(path)
                self.assertEqual(t.returncode, 1)
                self.assertIn(f"bad.csv:2: {said}; fix or remove that row", t.stderr)
            path = os.path.join(d, "zero.csv")
            with open(path, "w") as f:
                f.write("id,lower,upper,size\n0,0,3,0\n")
            c = gatest.cli("replay", path)
            self.assertEqual(c.returncode, 1)
            self.assertIn("line 2: size 0; a buffer holds at least one byte: fix or remove that "
                          "row", c.stderr)
            self.assertNotIn("id, lower", c.stderr)


class OldPickleProtocols(unittest.TestCase):
    def test_snapshot_of_every_pickle_protocol_detected(self):
        """A shared snapshot re-pickled with each protocol 0-5 imports with `auto` to the bytes
        `import pytorch-snapshot` gives of the original, and replays."""
        src = os.path.join(gatest.TRACES, "pytorch-snapshot", "cs336_forward_bf16.pickle")

        class Plain(pickle.Unpickler):
            def find_class(self, module, name):
                raise pickle.UnpicklingError(f"{module}.{name}")

        with open(src, "rb") as f:
            doc = Plain(f).load()
        with tempfile.TemporaryDirectory() as d:
            ref = os.path.join(d, "ref.gatrace")
            p = gatest.cli("import", "pytorch-snapshot", src, "-o", ref)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(ref, "rb") as f:
                want = f.read()
            for proto in range(pickle.HIGHEST_PROTOCOL + 1):
                path = os.path.join(d, f"p{proto}.pickle")
                with open(path, "wb") as f:
                    pickle.dump(doc, f, protocol=proto)
                out = os.path.join(d, f"p{proto}.gatrace")
                p = gatest.cli("import", "auto", path, "-o", out)
                self.assertEqual(p.returncode, 0, (proto, p.stderr))
                with open(out, "rb") as f:
                    self.assertEqual(f.read(), want, proto)
            p = gatest.cli("replay", os.path.join(d, "p0.pickle"), "--mode", "arena", "--no-min")
            self.assertEqual(p.returncode, 0, p.stderr)


class ReportSlicesLeftOut(unittest.TestCase):
    def test_slices_left_out_said(self):
        """A report past 20,000 allocations says on stderr that the slices are left out; one at
        20,000 says nothing of them and holds a slice each."""
        ev = tf.event
        with tempfile.TemporaryDirectory() as d:
            for n, said in ((20001, True), (20000, False)):
                path = os.path.join(d, f"n{n}.gatrace")
                events = []
                for i in range(n):
                    events += [ev(2 * i + 1, 0x1000, 4096, tf.ALLOC),
                               ev(2 * i + 2, 0x1000, 0, tf.FREE)]
                tf.write(path, tf.Trace(events))
                p = gatest.cli("report", path, "-o", os.path.join(d, "r"), "--mode", "platform",
                               env={"GPUARENA_NO_MATPLOTLIB": "1"})
                self.assertEqual(p.returncode, 0, p.stderr)
                line = (f"gpuarena: {path}: {n:,} allocations, more than 20,000: the JSON "
                        "holds the in_use and reserved counter tracks without a slice per "
                        "allocation")
                with open(os.path.join(d, "r.json")) as f:
                    doc = json.load(f)
                if said:
                    self.assertIn(line, p.stderr)
                    self.assertFalse(doc["otherData"]["slices_included"])
                else:
                    self.assertNotIn("allocations, more than", p.stderr)
                    self.assertEqual(sum(e["ph"] == "b" for e in doc["traceEvents"]), n)


class KinetoWithoutGpuMemory(unittest.TestCase):
    def test_profile_memory_named(self):
        """No [memory] event, or CPU ones alone: import says so on stderr (the trace is written,
        exit 0, as before), replay and report refuse as before and add what to do."""
        cpu = {"name": "[memory]", "ph": "i", "ts": 1, "args": {
            "Device Type": 0, "Device Id": -1, "Addr": 4096, "Bytes": 512}}
        kernel = {"name": "gemm", "ph": "X", "ts": 1, "dur": 3, "pid": 0, "tid": 0}
        with tempfile.TemporaryDirectory() as d:
            for events, said in (([kernel], 'it holds no "[memory]" event: the profile was '
                                  "taken without memory recording"),
                                 ([kernel, cpu, cpu], "its 2 memory events are not a GPU's")):
                path = os.path.join(d, "k.json")
                with open(path, "w") as f:
                    json.dump({"traceEvents": events}, f)
                todo = "profile_memory=True) and export it again"
                p = gatest.cli("import", "kineto", path, "-o", os.path.join(d, "o.gatrace"))
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(f"gpuarena: {path}: a Kineto trace with no GPU memory event: "
                              f"{said}", p.stderr)
                self.assertIn(todo, p.stderr)
                for args in (["replay", path], ["report", path, "-o", os.path.join(d, "r")]):
                    p = gatest.cli(*args)
                    self.assertEqual(p.returncode, 1, p.stderr)
                    self.assertIn("holds no allocation", p.stderr)
                    self.assertIn(said, p.stderr)
                    self.assertIn(todo, p.stderr)
            real = gatest.traces("kineto")[0]
            p = gatest.cli("import", "kineto", real, "-o", os.path.join(d, "o.gatrace"))
            self.assertEqual((p.returncode, p.stderr), (0, ""))


class SnapshotWithoutHistory(unittest.TestCase):
    def test_no_history_said(self):
        """device_traces empty: import (both levels) and replay say that only what was live at
        the dump came in and how to record; a snapshot with events says nothing of it."""
        mib = 1 << 20
        seg = {"device": 0, "address": 1 << 30, "total_size": 4 * mib, "stream": 0,
               "segment_type": "large", "blocks": [
                   {"address": 1 << 30, "size": mib, "state": "active_allocated"},
                   {"address": (1 << 30) + mib, "size": 3 * mib, "state": "inactive"}]}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.pickle")
            with open(path, "wb") as f:
                pickle.dump({"segments": [seg], "device_traces": [[]]}, f)
            for level, n, what in (("tensor", 1, "blocks"), ("segment", 1, "segments")):
                p = gatest.cli("import", "pytorch-snapshot", path, "--level", level, "-o",
                               os.path.join(d, "o.gatrace"))
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(f"gpuarena: {path}: the snapshot holds no event (its device_traces "
                              f"are empty: memory history was not recorded), so only the {n} "
                              f"{what} live at the dump are imported", p.stderr)
                self.assertIn("_record_memory_history()", p.stderr)
            p = gatest.cli("replay", path, "--mode", "arena", "--no-min")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("memory history was not recorded", p.stderr)
            real = gatest.traces("pytorch-snapshot")[0]
            p = gatest.cli("import", "auto", real, "-o", os.path.join(d, "o.gatrace"))
            self.assertEqual((p.returncode, p.stderr), (0, ""))


class CompareNamesTheSignal(unittest.TestCase):
    def test_killed_run_names_its_signal(self):
        """A mode whose program is killed by SIGKILL after its CUDA work: 137 in the table, and
        the line under it names the signal; a plain exit 3 names none."""
        script = ('"$0" 1; if [ "$GPUARENA_MODE" = platform ]; then kill -9 $$; fi; '
                  '[ "$GPUARENA_MODE" = arena ] && exit 3; exit 0')
        p = gatest.cli("compare", "--sim", "--modes", "arena,vmm,platform", "--", "sh", "-c",
                       script, EX_TRAIN, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout + p.stderr
        self.assertIn("mode platform: the program exited 137 (128+9: killed by SIGKILL); ", out)
        self.assertIn("mode arena: the program exited 3; ", out)


class CloseOnATrace(unittest.TestCase):
    def test_close_frees_a_traces_live_blocks(self):
        """`import auto T.gatrace --close` frees each block live at the end (per device), at the
        last event's time, and says how many, as the other formats' --close does; without
        --close the trace is copied as it is."""
        with tempfile.TemporaryDirectory() as d:
            src, out = os.path.join(d, "in.gatrace"), os.path.join(d, "out.gatrace")
            ev = tf.event
            tf.write(src, tf.Trace([
                ev(10, 0x1000, 4096, tf.ALLOC), ev(20, 0x2000, 8192, tf.ALLOC),
                ev(30, 0x1000, 4096, tf.FREE), ev(40, 0x1000, 512, tf.ALLOC, device=1),
                ev(50, 0x9000, 0, tf.FREE, device=-1),  # a pointer no pool owned
                ev(60, 0, 1 << 40, tf.ALLOC_FAILED, result=2)]))
            p = gatest.cli("import", "auto", src, "-o", out, "--close")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("closed at end: 2", p.stdout + p.stderr)
            got = tf.read(out).events
            self.assertEqual(len(got), 8)
            closed = sorted((e[tf.T_DEVICE], e[tf.T_ADDR], e[tf.T_SIZE], e[tf.T_TIME])
                            for e in got[6:])
            self.assertEqual(closed, [(0, 0x2000, 8192, 60), (1, 0x1000, 512, 60)])
            self.assertTrue(all(e[tf.T_KIND] == tf.FREE for e in got[6:]))
            p = gatest.cli("import", "auto", src, "-o", out)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(len(tf.read(out).events), 6)


if __name__ == "__main__":
    unittest.main()
