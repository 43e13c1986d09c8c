"""Malformed input to every importer and to the trace reader, through the command as a user runs
it: exit code 1, one `gpuarena:` message naming the file, no traceback, no output file left."""

import errno
import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

import gatest

RMM_HEAD = "Thread,Time,Action,Pointer,Size,Stream\n"
LT_HEAD = "id,lower,upper,size\n"


def snap(events):
    return pickle.dumps({"segments": [], "device_traces": [events]})


ALLOC = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 1}

# (format, file bytes, text the message must contain)
CASES = [
    ("pytorch-snapshot", pickle.dumps(print), "builtins.print"),
    ("pytorch-snapshot", pickle.dumps({"device_traces": [[ALLOC]]})[:-9], "unpickling failed"),
    ("pytorch-snapshot", b"", "unpickling failed"),
    ("pytorch-snapshot", pickle.dumps([1, 2]), "device_traces"),
    ("pytorch-snapshot", pickle.dumps({"segments": []}), "device_traces"),
    ("pytorch-snapshot", snap([42]), "device_traces[0][0]"),
    ("pytorch-snapshot", snap([dict(ALLOC, addr="xyz")]), "addr 'xyz'"),
    ("pytorch-snapshot", snap([dict(ALLOC, size=0)]), "0 bytes"),
    ("pytorch-snapshot", b"not a pickle at all", "unpickling failed"),
    ("kineto", b"{not json", "not valid JSON"),
    ("kineto", b"\x1f\x8b\x08\x00garbage", "gzip"),
    ("kineto", gzip.compress(b"[1, 2"), "not valid JSON"),
    # the two said no fix until 2026-12-07
    ("kineto", b'{"foo": 1}', "no 'traceEvents' list; not a Chrome/Kineto trace: give the file "
                              "torch.profiler wrote"),
    ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": 1}]}',
     "a [memory] event without 'args' (its bytes, address and device); the trace is damaged or "
     "was edited: export it again"),
    ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": 1, "args": {"Device Type": 1,'
               b' "Bytes": "many"}}]}', "Bytes 'many'"),
    ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": null, "args": {"Device Type": 1,'
               b' "Bytes": 5}}]}', "is not a number (microseconds); the trace is damaged or was "
                                  "edited: export it again"),
    ("pytorch-snapshot", snap([dict(ALLOC, action=["alloc"])]), "'action' name"),
    ("pytorch-snapshot", snap([dict(ALLOC, time_us=float("inf"))]), "time_us inf"),
    ("kineto", gzip.compress(b'{"traceEvents": []}' * 50)[:40] + b"\xff" * 40, "gzip"),
    ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": Infinity, "args": '
               b'{"Device Type": 1, "Bytes": 5}}]}', "'ts' inf"),
    ("lifetimes", b"a,b,c,d\n1,2,3,4\n", "header id,lower,upper,size"),
    ("lifetimes", b"", "header"),
    ("lifetimes", (LT_HEAD + "0,1,2,x\n").encode(), "line 2"),
    ("lifetimes", (LT_HEAD + "0,5,4,10\n").encode(), "upper 4 < lower 5"),
    ("lifetimes", (LT_HEAD + "0,1,2,10\n0,3,4,10\n").encode(), "appears twice"),
    ("lifetimes", (LT_HEAD + "0,1,2\n").encode(), "3 fields"),
    ("lifetimes", (LT_HEAD + "0,1,2,0\n").encode(), "size 0; a buffer holds at least one byte"),
    ("lifetimes", b"\xff\xfe\x00bad", "UTF-8"),
    ("lifetimes", (LT_HEAD + "0,0,2,18446744073709551616\n").encode(),
     "line 2: size 18446744073709551616 is too large (over 2^64-1)"),
    ("lifetimes", (LT_HEAD + "0,0,99999999999999999999999,5\n").encode(), "upper 9999"),
    ("kineto", b"[1, 2, 3]", "item 0 of the list is 1, not an event object"),
    ("kineto", b'{"traceEvents": [{"name": "x"}, "s"]}', "traceEvents[1] is \"s\""),
    ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": 1, "args": {"Device Type": 1,'
               b' "Bytes": -18446744073709551616}}]}', "Bytes -18446744073709551616 is too large"),
    ("rmm", (RMM_HEAD + "1,00:00:01:000000,allocate,0x10000000000000000,5,0\n").encode(),
     "Pointer 18446744073709551616 is too large"),
    ("rmm", b"Thread,When,Action\n", "Thread,Time,Action,Pointer,Size,Stream"),
    ("rmm", (RMM_HEAD + "1,00:00:01:000000,grab,0x10,5,0\n").encode(), "Action 'grab'"),
    ("rmm", (RMM_HEAD + "1,00:00:01:000000,allocate,0xZZ,5,0\n").encode(), "Pointer"),
    ("rmm", (RMM_HEAD + "1,yesterday,allocate,0x10,5,0\n").encode(), "Time 'yesterday'"),
    ("rmm", (RMM_HEAD + "1,00:00:01:000000,allocate,0x10,-5,0\n").encode(), "Size"),
    ("rmm", (RMM_HEAD + "1,inf,allocate,0x10,5,0\n").encode(), "Time 'inf'"),
    ("rmm", (RMM_HEAD + "1,00:00:01:000000,allocate,0x10,5,0,extra\n").encode(), "7 fields"),
    # Times past a trace's 64-bit ns were clamped to 2^64-1 without a word (events far apart ran
    # together), and a Kineto ts of 1e308 ended in "report it as a gpuarena bug"
    ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": 1e308, "args": '
               b'{"Device Type": 1, "Addr": 16, "Bytes": 5}}]}',
     "'ts' 1e+308 is more than 2^64 ns"),
    ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": 0, "args": {"Device Type": 1, '
               b'"Addr": 16, "Bytes": 5}}, {"name": "[memory]", "ts": 100000000000000000, "args":'
               b' {"Device Type": 1, "Addr": 32, "Bytes": 5}}]}', "traceEvents[1]: 'ts' 1000"),
    ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": -1e16, "args": {"Device Type": 1, '
               b'"Addr": 16, "Bytes": 5}}, {"name": "[memory]", "ts": 1e16, "args":'
               b' {"Device Type": 1, "Addr": 16, "Bytes": -5}}]}', "first event's -1e+16"),
    ("pytorch-snapshot", snap([ALLOC, dict(ALLOC, addr=8192, time_us=2**62)]),
     "device_traces[0][1] (alloc): time_us 4611686018427387904 (from the first event's 1) is "
     "more than 2^64 ns (584 years)"),
    ("rmm", (RMM_HEAD + "1,0,allocate,0x10,5,0\n1,1e15,free,0x10,5,0\n").encode(),
     "line 3: Time '1e15' (s) is more than 2^64 ns"),
    ("rmm", (RMM_HEAD + "1,1e300,allocate,0x10,5,0\n").encode(), "Time '1e300' (s) is more"),
    # read as 99 h + 99 min + 99 s, 4 days past midnight
    ("rmm", (RMM_HEAD + "1,99:99:99.9,allocate,0x10,5,0\n").encode(),
     "line 2: Time '99:99:99.9' is not a clock time"),
    ("rmm", (RMM_HEAD + "1,10:00:00.1,allocate,0x10,5,0\n1,10:60:00.1,free,0x10,5,0\n").encode(),
     "line 3: Time '10:60:00.1' is not a clock time"),
    ("kineto", b"[" * 100000 + b"]" * 100000, "JSON nested deeper than"),
    ("auto", b'{"traceEvents": ' + b"[" * 100000 + b"]" * 100000 + b"}", "not a Kineto trace"),
    # CR line ends (old Mac): "cannot tell its format", or Python's "open the file in
    # universal-newline mode" for a named format
    ("auto", b"id,lower,upper,size\r0,0,3,100\r", "line 1: a carriage return (CR) not followed"),
    ("lifetimes", b"id,lower,upper,size\r0,0,3,100\r", "tr '\\r' '\\n' < "),
    ("rmm", (RMM_HEAD + "1,0.1,allocate,0x10,5,0\r1,0.2,free,0x10,5,0\r").encode(),
     "line 2: a carriage return (CR) not followed by a line feed"),
    # an int of 4,301+ digits has no str(): Python's "use sys.set_int_max_str_digits()"
    ("pytorch-snapshot", snap([dict(ALLOC, size=1 << 20000)]), "size of 20,001 bits is too large"),
    ("pytorch-snapshot", pickle.dumps({"segments": [{"address": 4096, "stream": -(1 << 20000),
                                                     "blocks": []}], "device_traces": [[]]}),
     "segments[0]: stream of 20,001 bits is too large"),
    # a negative address was taken, wrapped to 2^64 less it (an outside check)
    ("pytorch-snapshot", snap([dict(ALLOC, addr=-4096)]),
     "device_traces[0][0] (alloc): addr -4096 is negative"),
    ("pytorch-snapshot", pickle.dumps({"segments": [{"address": 0, "blocks": [
        {"state": "active_allocated", "address": -512, "size": 512}]}], "device_traces": [[]]}),
     "segments[0].blocks[0]: address -512 is negative"),
    ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": 1, "args": {"Device Type": 1, '
               b'"Addr": -16, "Bytes": 5}}]}', "traceEvents[0]: Addr -16 is negative"),
    ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": 1, "args": {"Device Type": 1, '
               b'"Addr": 16, "Bytes": 5}}, {"name": "[memory]", "ts": 2, "args": '
               b'{"Device Type": 1, "Addr": "-16", "Bytes": -5}}]}',
     "traceEvents[1]: Addr -16 is negative"),
    ("rmm", (RMM_HEAD + "1,00:00:01:000000,allocate,-0x10,5,0\n").encode(),
     "line 2: Pointer -16 is negative"),
    # a negative stream or RMM thread was wrapped to 2^64 less it without a word, as an address
    ("pytorch-snapshot", snap([dict(ALLOC, stream=-7)]),
     "device_traces[0][0] (alloc): stream -7 is negative"),
    ("pytorch-snapshot", pickle.dumps({"segments": [{"address": 0, "stream": -1, "blocks": [
        {"state": "active_allocated", "address": 512, "size": 512}]}], "device_traces": [[]]}),
     "segments[0]: stream -1 is negative"),
    ("rmm", (RMM_HEAD + "1,00:00:01:000000,allocate,0x10,5,-0x1\n").encode(),
     "line 2: Stream -1 is negative"),
    ("rmm", (RMM_HEAD + "1,00:00:01:000000,allocate,0x10,5,0\n"
             "1,00:00:02:000000,free,0x10,5,-3\n").encode(), "line 3: Stream -3 is negative"),
    ("rmm", (RMM_HEAD + "-12,00:00:01:000000,allocate,0x10,5,0\n").encode(),
     "line 2: Thread -12 is negative"),
    ("auto", b"hello world\n", "cannot tell its format"),
    ("auto", b"GATRACE\0" + b"\x02\0\0\0" + b"\x30\0\0\0" + bytes(16), "version 2"),
    ("auto", b"GATRACE\0" + b"\x01\0\0\0" + b"\x28\0\0\0" + bytes(16), "record size 40"),
    ("auto", b"GATRACE\0\x01\0", "shorter than the 32-byte"),
]


class Malformed(unittest.TestCase, gatest.CliAsserts):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_every_importer_rejects_bad_input(self):
        # In-process for speed, and the first case of each format through the real command.
        first = {}
        for i, (fmt, _, _) in enumerate(CASES):
            first.setdefault(fmt, i)
        for i, (fmt, data, needle) in enumerate(CASES):
            with self.subTest(case=i, fmt=fmt, needle=needle):
                src = os.path.join(self.dir, f"in{i}")
                with open(src, "wb") as f:
                    f.write(data)
                out = os.path.join(self.dir, f"out{i}.gatrace")
                run = gatest.cli if first[fmt] == i else gatest.cli_inproc
                p = run("import", fmt, src, "-o", out)
                self.assertCleanError(p, needle, src)
                self.assertFalse(os.path.exists(out))
                self.assertFalse(os.path.exists(out + ".tmp"))

    def test_utf16_and_utf32_inputs(self):
        # A Kineto JSON saved as UTF-16 or UTF-32 with a byte-order mark (Windows PowerShell's
        # `>`): `import kineto` read it, but `auto`, `replay` and `report` said "cannot tell its
        # format ... name the format"; a CSV so saved was "not UTF-8 text" with no way out (an
        # outside check of issue 4, helper-109). JSON is now detected as Kineto; a CSV is named
        # as UTF-16 or UTF-32 with the iconv line that converts it.
        ev = [{"ph": "i", "name": "[memory]", "ts": t, "pid": 1, "tid": 1,
               "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": b}}
              for t, b in ((1.0, 1000), (2.0, -1000))]
        text = json.dumps({"traceEvents": ev})
        csv_text = "id,lower,upper,size\n1,0,3,100\n"
        for enc in ("utf-16", "utf-16-be", "utf-32", "utf-32-be"):
            bom = {"utf-16": "", "utf-32": ""}.get(enc, "\ufeff")
            with self.subTest(enc=enc):
                src = os.path.join(self.dir, f"k-{enc}.json")
                with open(src, "wb") as f:
                    f.write((bom + text).encode(enc))
                out = os.path.join(self.dir, f"k-{enc}.gatrace")
                p = gatest.cli("import", "auto", src, "-o", out)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("(kineto)", p.stdout)
                p = gatest.cli("replay", src, "--mode", "platform", "--no-min", "--json")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(json.loads(p.stdout)["modes"]["platform"]["allocs"], 1)
                name = enc.upper().replace("-BE", "")
                src = os.path.join(self.dir, f"l-{enc}.csv")
                with open(src, "wb") as f:
                    f.write((bom + csv_text).encode(enc))
                for args in (("import", "auto", src, "-o", out), ("replay", src),
                             ("import", "lifetimes", src, "-o", out)):
                    p = gatest.cli(*args)
                    self.assertCleanError(p, f"{src}: {name} text, not UTF-8; convert it first: "
                                          f"iconv -f {name} -t UTF-8 {src} > ", src)
                # the replay tool too (it said "a NUL byte; not a text CSV")
                tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
                p = subprocess.run([tool, src], capture_output=True, text=True, check=False)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(f"gpuarena: {src}: {name} text, not UTF-8; convert it first: iconv "
                              f"-f {name} -t UTF-8 FILE > FILE.utf8.csv", p.stderr)

    def test_record_size_says_what_to_do(self):
        # A header whose record size is not 48: `replay` said "gpuarena-replay failed (exit 1):
        # X: record size 64 in header, version 1 uses 48", with no way out, where `report` and
        # `import` say the file is damaged or from another tool (an outside check, helper-109).
        src = os.path.join(self.dir, "rs64.gatrace")
        with open(src, "wb") as f:
            f.write(b"GATRACE\0" + (1).to_bytes(4, "little") + (64).to_bytes(4, "little")
                    + bytes(16) + bytes(64))
        p = gatest.cli("replay", src, "--no-min")
        self.assertCleanError(p, f"{src}: record size 64 in the header, expected 48 (trace "
                              "format version 1); the file is damaged or from another tool: "
                              "re-record it, or import its source again", src)

    def test_negative_segment_address_refused(self):
        """A snapshot segment's negative address (read at the segment level) was taken as 2^64
        less it, as a negative addr was (an outside check)."""
        src = os.path.join(self.dir, "seg.pickle")
        with open(src, "wb") as f:
            f.write(pickle.dumps({"segments": [{"address": -1, "total_size": 512, "blocks": []}],
                                  "device_traces": [[]]}))
        out = os.path.join(self.dir, "o.gatrace")
        p = gatest.cli_inproc("import", "pytorch-snapshot", src, "--level", "segment", "-o", out)
        self.assertCleanError(p, f"{src}: segments[0]: address -1 is negative")
        self.assertFalse(os.path.exists(out))

    def test_negative_segment_stream_refused(self):
        """A snapshot segment's negative stream read at the segment level was wrapped to 2^64
        less it without a word, as a negative address was."""
        src = os.path.join(self.dir, "seg.pickle")
        with open(src, "wb") as f:
            f.write(pickle.dumps({"segments": [{"address": 4096, "total_size": 512, "stream": -2,
                                                "blocks": []}], "device_traces": [[]]}))
        out = os.path.join(self.dir, "o.gatrace")
        p = gatest.cli_inproc("import", "pytorch-snapshot", src, "--level", "segment", "-o", out)
        self.assertCleanError(p, f"{src}: segments[0]: stream -2 is negative")
        self.assertFalse(os.path.exists(out))

    def test_values_quoted_short(self):
        """A value an importer refuses is quoted cut short: a snapshot's addr of a million
        characters made a message of a megabyte, so did a Kineto ts that is a long list, and an
        unknown action of that length a summary line; a block state that is an int of 4,301+
        digits ended in "report it as a gpuarena bug" (an outside check)."""
        long = "x" * 1000000
        cases = [("pytorch-snapshot", snap([dict(ALLOC, addr=long)]), "addr 'xxx"),
                 ("kineto", b'{"traceEvents": [{"name": "[memory]", "ts": [' + b"1," * 100000
                  + b'1], "args": {"Device Type": 1, "Bytes": 5}}]}', "'ts' [1, 1, 1"),
                 ("rmm", (RMM_HEAD + "1,0,allocate,0x10,5," + "9" * 100000 + "z\n").encode(),
                  "Stream '999")]
        out = os.path.join(self.dir, "o.gatrace")
        for fmt, data, needle in cases:
            with self.subTest(fmt=fmt):
                src = os.path.join(self.dir, "in")
                with open(src, "wb") as f:
                    f.write(data)
                p = gatest.cli_inproc("import", fmt, src, "-o", out)
                self.assertCleanError(p, needle, "...")
                self.assertLess(len(p.stderr), 400)
        src = os.path.join(self.dir, "act.pickle")
        with open(src, "wb") as f:
            f.write(snap([dict(ALLOC, action=long)]))
        p = gatest.cli_inproc("import", "auto", src, "-o", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(len(p.stdout), 1000)
        with open(src, "wb") as f:
            f.write(pickle.dumps({"device_traces": [[ALLOC]], "segments": [{
                "address": 0, "blocks": [{"state": 1 << 20000, "address": 0, "size": 512}]}]}))
        p = gatest.cli_inproc("import", "auto", src, "-o", out)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_expandable_segments_said_at_segment_level(self):
        """A snapshot recorded with expandable_segments logs segment_map/segment_unmap, memory
        PyTorch maps itself: the segment level imported it without a word, as if PyTorch had
        made no such call (an outside check). Said now; the tensor level says nothing."""
        seg = {"action": "segment_map", "addr": 1 << 30, "size": 2 << 20, "stream": 0,
               "time_us": 1}
        src = os.path.join(self.dir, "exp.pickle")
        with open(src, "wb") as f:
            f.write(snap([seg, ALLOC, dict(seg, action="segment_unmap", time_us=5)]))
        out = os.path.join(self.dir, "o.gatrace")
        p = gatest.cli("import", "pytorch-snapshot", src, "--level", "segment", "-o", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"gpuarena: {src}: 2 segment_map/segment_unmap events: PyTorch ran with "
                      "expandable_segments", p.stderr)
        self.assertIn("--level tensor replays every tensor", p.stderr)
        p = gatest.cli("import", "pytorch-snapshot", src, "-o", out)
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    def test_full_disk_says_free_space(self):
        """A write that failed for want of room said "check the folder exists and is writable",
        and a full TMPDIR did so naming the command's own temporary (an outside check with a
        64 KiB tmpfs as TMPDIR): the hint now fits the cause."""
        src = gatest.traces("lifetimes")[0]
        p = gatest.cli("import", "lifetimes", src, "-o", "/dev/full")
        self.assertCleanError(p, "cannot write /dev/full: No space left on device (free space "
                              "there, or give a path on a file system with room)")
        p = gatest.cli("run", "--sim", "--stats", "/dev/full", "--",
                       os.path.join(gatest.BUILD, "examples", "ex_train"), "1")
        self.assertCleanError(p, "--stats /dev/full: cannot write the statistics: No space left "
                              "on device (free space there")
        # A temporary of the command's own folder under TMPDIR (a tmpfs cannot be mounted
        # here): tracefile's writer, in this process, with a write that finds no room.
        from gpuarena_cli import GaError, ending, tracefile

        def full(_f):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        with ending.temporary_folder() as tmp:
            with self.assertRaises(GaError) as e:
                tracefile.write_filled(os.path.join(tmp, "imported.gatrace"), full)
            self.assertFalse(os.path.exists(os.path.join(tmp, "imported.gatrace")))
        self.assertIn("or set TMPDIR to a folder with room", str(e.exception))
        with self.assertRaises(GaError) as e:
            tracefile.write_filled(os.path.join(self.dir, "t.gatrace"), full)
        self.assertIn("(free space there", str(e.exception))

    def test_numbers_past_64_bits_refused_like_the_replay_tool(self):
        # They were clamped to 2^64-1 without a word; gpuarena-replay refuses them (exit 1).
        src = os.path.join(self.dir, "huge.csv")
        with open(src, "w") as f:
            f.write(LT_HEAD + "0,0,2,18446744073709551616\n")
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        if os.path.exists(tool):
            c = subprocess.run([tool, src], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, check=False)
            self.assertEqual(c.returncode, 1, c.stderr)
            self.assertIn(f"{src}:2: number too large (over 2^64-1)", c.stderr)
        for args in (["replay", src], ["import", "auto", src, "-o", src + ".gatrace"]):
            with self.subTest(cmd=args[0]):
                p = gatest.cli(*args)
                self.assertCleanError(p, f"{src}: line 2: size 18446744073709551616 is too "
                                      "large (over 2^64-1)")
        self.assertFalse(os.path.exists(src + ".gatrace"))

    def test_pickle_cannot_run_code(self):
        marker = os.path.join(self.dir, "ran")

        class Evil:
            def __reduce__(self):
                return (os.system, (f"touch {marker}",))

        src = os.path.join(self.dir, "evil.pickle")
        with open(src, "wb") as f:
            pickle.dump({"device_traces": [[Evil()]]}, f)
        p = gatest.cli("import", "pytorch-snapshot", src, "-o", os.path.join(self.dir, "o"))
        self.assertCleanError(p, "no code in the file can run")
        self.assertFalse(os.path.exists(marker))

    def test_missing_input_and_unwritable_output(self):
        p = gatest.cli("import", "lifetimes", os.path.join(self.dir, "absent.csv"), "-o", "x")
        self.assertCleanError(p, "absent.csv")
        src = gatest.traces("lifetimes")[0]
        out = os.path.join(self.dir, "no", "such", "dir.gatrace")
        p = gatest.cli("import", "lifetimes", src, "-o", out)
        # said before the input is read (a large one was read whole first, then "cannot write")
        self.assertCleanError(p, f"-o {out}: the folder {os.path.dirname(out)} does not exist",
                              "checked before the input is read")
        p = gatest.cli("report", src, "-o", out[:-len(".gatrace")])
        self.assertCleanError(p, "the folder", "does not exist", "checked before the input")
        # A descriptor or device is written through, whatever its folder allows: the folder
        # check refused /proc/self/fd/1 (no file can be made in /proc/self/fd), for run --stats
        # /proc/self/fd/2 too.
        p = subprocess.run([sys.executable, gatest.SCRIPT, "import", "lifetimes", src, "-o",
                            "/proc/self/fd/1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=120, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith(b"GATRACE"))
        p = gatest.cli("run", "--sim", "--stats", "/proc/self/fd/1", "--",
                       os.path.join(gatest.BUILD, "examples", "ex_train"), "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('"gpuarena_stats"', p.stdout)

    def test_standard_input_named(self):
        """`-` as the input (standard input) was "cannot read -: No such file or directory"; it
        is not read (an input is read more than once), and the message says so."""
        for args in (["import", "lifetimes", "-", "-o", os.path.join(self.dir, "o.gatrace")],
                     ["replay", "-"], ["report", "-", "-o", os.path.join(self.dir, "r")]):
            with self.subTest(cmd=args[0]):
                p = gatest.cli(*args, cwd=self.dir)
                self.assertCleanError(p, "- (standard input) is not read", "save it to a file")

    def test_empty_input_name_is_a_usage_error(self):
        """`replay "$T"` with T unset said "cannot read : No such file or directory" (exit 1),
        naming nothing (an outside check); an empty name is a usage error as an empty -o is."""
        for args in (["import", "auto", "", "-o", os.path.join(self.dir, "o.gatrace")],
                     ["replay", ""], ["report", "", "-o", os.path.join(self.dir, "r")]):
            with self.subTest(cmd=args[0]):
                p = gatest.cli(*args, cwd=self.dir)
                self.assertCleanError(p, "the input file name is empty", code=2)
        self.assertEqual(os.listdir(self.dir), [])

    def test_gzip_of_another_format_named(self):
        """Any gzip file was taken for a Kineto trace, so a gzipped gpuarena trace, CSV or
        snapshot read "not valid JSON (... can't decode byte ...)": it is named now, with the way
        out (decompress it). A gzipped Kineto JSON is still read."""
        lifetimes = gatest.traces("lifetimes")[0]
        trace = os.path.join(self.dir, "t.gatrace")
        self.assertEqual(gatest.cli("import", "lifetimes", lifetimes, "-o", trace).returncode, 0)
        snapshot = gatest.traces("pytorch-snapshot")[0]
        for src, what in ((trace, "a gpuarena trace"), (lifetimes, "something other than JSON"),
                          (snapshot, "a pickle")):
            gz = os.path.join(self.dir, os.path.basename(src) + ".gz")
            with open(src, "rb") as f, gzip.open(gz, "wb") as g:
                g.write(f.read())
            for args in (["replay", gz, "--no-min"], ["import", "auto", gz, "-o", trace + "2"]):
                with self.subTest(src=os.path.basename(src), cmd=args[0]):
                    p = gatest.cli(*args)
                    self.assertCleanError(p, f"{gz}: a gzip file holding {what}",
                                          f"gunzip -k {gz}")
        kineto = gatest.traces("kineto")[0]
        p = gatest.cli("import", "auto", kineto, "-o", trace + "3")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_wrong_format_named_says_what_the_file_is(self):
        """A file given under another format's name said only that format's complaint (a
        snapshot as kineto: "not valid JSON ('utf-8' codec can't decode byte 0x80 ...)"), and a
        CSV reader echoed the whole first line raw, NUL bytes of a gpuarena trace included
        (an outside check)."""
        trace = os.path.join(self.dir, "t.gatrace")
        lifetimes = gatest.traces("lifetimes")[0]
        self.assertEqual(gatest.cli("import", "lifetimes", lifetimes, "-o", trace).returncode, 0)
        rmm = os.path.join(self.dir, "r.csv")
        with open(rmm, "w") as f:
            f.write(RMM_HEAD + "1,0.5,allocate,0x10,5,0\n")
        snapshot = os.path.join(self.dir, "s.pickle")
        with open(snapshot, "wb") as f:
            f.write(snap([ALLOC]))
        out = os.path.join(self.dir, "o.gatrace")
        for fmt, src, said in (("kineto", snapshot, "a PyTorch memory snapshot: name "
                                "pytorch-snapshot or auto"),
                               ("pytorch-snapshot", lifetimes, "a buffer-lifetimes CSV: name "
                                "lifetimes or auto"),
                               ("lifetimes", rmm, "an RMM log: name rmm or auto"),
                               ("rmm", trace, "a gpuarena trace: name auto")):
            with self.subTest(fmt=fmt):
                p = gatest.cli_inproc("import", fmt, src, "-o", out)
                self.assertCleanError(p, f"; it looks like {said} as the format")
                self.assertFalse(os.path.exists(out))
        p = gatest.cli("replay", "--format", "kineto", snapshot)
        self.assertCleanError(p, "it looks like a PyTorch memory snapshot")
        with open(trace, "rb") as f:
            head = f.read(32)
        with open(trace, "wb") as f:  # the header alone: UTF-8 text, NULs and all
            f.write(head)
        p = gatest.cli("import", "lifetimes", trace, "-o", out)
        self.assertCleanError(p, "first line is 'GATRACE\\x00\\x01")
        self.assertNotIn("\0", p.stderr)
        with open(rmm, "w") as f:  # a long first line is cut
            f.write(",".join(["x" * 50] * 1000) + "\n")
        p = gatest.cli_inproc("import", "lifetimes", rmm, "-o", out)
        self.assertCleanError(p, "'...,")
        self.assertLess(len(p.stderr), 400)

    def test_usage_errors_exit_2(self):
        for args in (["import", "nonsense", "f", "-o", "x"], ["import", "auto", "f"],
                     ["replay"], ["run", "--limit", "12XB", "--", "true"], ["run"],
                     ["compare", "--fraction", "1.5", "--", "true"], ["frobnicate"]):
            with self.subTest(args=args):
                p = gatest.cli(*args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertNotIn("Traceback", p.stderr)
                self.assertIn("usage:", p.stderr)

    def test_help_everywhere(self):
        for sub in ([], ["import"], ["replay"], ["report"], ["run"], ["compare"], ["doctor"]):
            with self.subTest(sub=sub):
                p = gatest.cli(*sub, "--help")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("exit codes", p.stdout)


if __name__ == "__main__":
    unittest.main()
