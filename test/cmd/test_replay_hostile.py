"""Hostile inputs to the replay path: `gpuarena replay`, `import` and `report`, and the C tool
gpuarena-replay under them. Each case is an input or option that once hung, read without end,
ran with a wrong meaning, or gave figures that differ between the two ways of replaying one file;
and a tiny trace whose every figure is computed here by hand, in every mode."""

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import gatest
from gpuarena_cli import tracefile as tf

G = 2 << 20  # vmm's default granule


def tool(*args, timeout=20):
    """Runs gpuarena-replay; a hang fails the test (TimeoutExpired) instead of the tier."""
    return subprocess.run([os.path.join(gatest.BUILD, "bin", "gpuarena-replay")]
                          + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)


def write_trace(path, events):
    tf.write(path, tf.Trace(events))
    return path


# Sizes at every edge of the 512-byte unit and the 2 MiB granule; all allocated, then all freed.
EDGE_SIZES = [1, 511, 512, 513, G // 2 - 1, G // 2, G - 1, G, G + 1, 3 * G, 3 * G + 1]


def edge_events():
    evs = [tf.event(i, 0x1000 + i, s, tf.ALLOC) for i, s in enumerate(EDGE_SIZES)]
    n = len(evs)
    return evs + [tf.event(n + i, 0x1000 + i, 0, tf.FREE) for i in range(n)]


class Hostile(unittest.TestCase, gatest.CliAsserts):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="h20-")
        self.d = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.d, name)

    def test_replay_tool_dies_with_the_command(self):
        """The command killed alone (a `timeout` that sends SIGTERM to it, not to its group)
        left gpuarena-replay running, orphaned, to its end (helper-79, 2026-12-06): the tool now
        gets SIGTERM when the command dies. A stand-in tool that waits is the child here."""
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "bin"))
            tool, pidfile = os.path.join(d, "bin", "gpuarena-replay"), os.path.join(d, "pid")
            with open(tool, "w") as f:
                f.write(f"#!/bin/sh\necho $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}\n"
                        "exec sleep 600\n")
            os.chmod(tool, 0o755)
            trace = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
            cmd = subprocess.Popen([sys.executable, gatest.SCRIPT, "replay", trace],
                                   env=dict(os.environ, GPUARENA_BUILD=d),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(6000):  # until the tool runs (at most 60 s)
                if os.path.exists(pidfile) or cmd.poll() is not None:
                    break
                time.sleep(0.01)
            self.assertTrue(os.path.exists(pidfile), "the stand-in tool never ran")
            with open(pidfile) as f:
                child = int(f.read())
            cmd.send_signal(signal.SIGTERM)
            cmd.wait(timeout=60)
            for _ in range(6000):  # the tool gone (at most 60 s)
                try:
                    os.kill(child, 0)
                except ProcessLookupError:
                    break
                try:
                    with open(f"/proc/{child}/stat") as f:  # a zombie of init's is gone too
                        if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                            break
                except FileNotFoundError:
                    break
                time.sleep(0.01)
            else:
                os.kill(child, signal.SIGKILL)
                self.fail("gpuarena-replay outlived the command")

    def test_streams_and_devices_refused(self):
        """A FIFO blocked the tool and the command for ever (no writer; with one, the format
        check ate its first bytes and the real read blocked), and /dev/zero was read until host
        memory ran out: now one `gpuarena:` line each, exit 1."""
        fifo = self.path("t.gatrace")
        os.mkfifo(fifo)
        for src, what in ((fifo, "a FIFO"), ("/dev/zero", "a device"), (self.d, "a directory")):
            p = tool("--mode", "platform", src)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertTrue(p.stderr.startswith(f"gpuarena: {src}: {what}, not a regular file"),
                            p.stderr)
            for args in (("replay", src), ("replay", src, "--format", "trace"),
                         ("import", "auto", src, "-o", self.path("o.gatrace")),
                         ("import", "lifetimes", src, "-o", self.path("o.gatrace")),
                         ("report", src, "-o", self.path("r"))):
                self.assertCleanError(gatest.cli(*args, timeout=30), what, "not a regular file")
            self.assertFalse(os.path.exists(self.path("o.gatrace")))

    def test_limit_below_the_unit(self):
        """grow mode rounded a --limit under 512 bytes down to 0, that is no limit: `--limit 1`
        ran the trace as if unlimited while vmm and platform failed every allocation. Now no
        region fits under it in grow mode either."""
        src = write_trace(self.path("e.gatrace"), edge_events())
        n = len(EDGE_SIZES)
        for limit in ("1", "511B", "0.4KiB"):
            p = gatest.cli("replay", src, "--json", "--limit", limit)
            self.assertEqual(p.returncode, 0, p.stderr)
            for m, r in json.loads(p.stdout)["modes"].items():
                if m == "arena":
                    continue  # --limit is not the arena's size
                self.assertEqual((r["allocs"], r["failed_allocs"], r["first_oom"],
                                  r["peak_reserved"]), (0, n, 0, 0), (limit, m))
        doc = json.loads(tool("--json", "--mode", "grow", "--mode", "vmm", "--mode", "platform",
                              "--limit", "512", src).stdout)
        for m, r in doc["modes"].items():  # only the 1-byte block fits under 512 bytes
            self.assertEqual(r["allocs"], 1 if m != "vmm" else 0, m)
            self.assertLessEqual(r["peak_reserved"], 512, m)

    def test_granularity_past_1tib_refused(self):
        """--granularity 4194304TiB (2^62) made creating the vmm pool loop for ever."""
        src = write_trace(self.path("e.gatrace"), edge_events())
        for g in ("4194304TiB", "8388608TiB", "2TiB"):
            p = tool("--mode", "vmm", "--json", "--granularity", g, src)
            self.assertEqual(p.returncode, 2, p.stdout)
            self.assertIn("from 512 bytes to 1TiB", p.stderr)
        p = tool("--mode", "vmm", "--json", "--granularity", "1TiB", src)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["modes"]["vmm"]["peak_reserved"], 1 << 40)

    def test_vmm_keep_zero_any_spelling(self):
        """`--vmm-keep 0` keeps nothing; 00, 0B and 0MiB, the same value, were usage errors."""
        src = write_trace(self.path("e.gatrace"), edge_events())
        for keep in ("0", "00", "0B", " 0MiB ", "0.0"):
            p = tool("--mode", "vmm", "--json", "--vmm-keep", keep, src)
            self.assertEqual(p.returncode, 0, f"{keep!r}: {p.stderr}")
            r = json.loads(p.stdout)["modes"]["vmm"]
            self.assertEqual(r["final_reserved"], 0, keep)
            self.assertEqual(r["backend_maps"], r["backend_unmaps"], keep)
        for keep in ("-1", "0x0", "zero", ""):
            self.assertEqual(tool("--mode", "vmm", "--vmm-keep", keep, src).returncode, 2, keep)

    def test_peak_live_zero_when_nothing_lives(self):
        """A trace whose only allocations are of 0 bytes or 2^64-1 bytes (refused as invalid)
        has no live bytes: peak_live said 512. (An empty trace has nothing to replay at all:
        test_no_allocation_nothing_to_replay.)"""
        cases = {"zero": [tf.event(0, 1, 0, tf.ALLOC), tf.event(1, 1, 0, tf.FREE)],
                 "max": [tf.event(0, 1, tf.U64, tf.ALLOC), tf.event(1, 1, 0, tf.FREE)]}
        for name, evs in cases.items():
            src = write_trace(self.path(name + ".gatrace"), evs)
            p = tool("--json", src)
            self.assertEqual(p.returncode, 0, p.stderr)
            doc = json.loads(p.stdout)
            self.assertEqual(doc["peak_live"], 0, name)
            for m, r in doc["modes"].items():
                self.assertEqual((r["peak_in_use"], r["allocs"]), (0, 0), (name, m))

    def test_no_allocation_nothing_to_replay(self):
        """A trace with no allocation (a header alone, a lifetimes CSV of its header line, an
        import of a file with none, frees alone) printed a full table, a min size of 512 B in
        every mode, exit 0, through `replay`, `report` (an empty chart) and gpuarena-replay (an
        outside check). Each now says it in one `gpuarena:` line naming the file, exit 1, as a
        0-byte input and a device without events are, and `report` writes nothing."""
        empty = write_trace(self.path("empty.gatrace"), [])
        frees = write_trace(self.path("frees.gatrace"), [tf.event(0, 0x1000, 0, tf.FREE),
                                                         tf.event(1, 0x2000, 0, tf.FREE)])
        csv, kineto = self.path("empty.csv"), self.path("cpu.json")
        with open(csv, "w") as f:
            f.write("id,lower,upper,size\n")
        with open(kineto, "w") as f:  # a CPU memory event only: an import with no allocation
            json.dump({"traceEvents": [{"name": "[memory]", "ts": 1, "args": {
                "Device Type": 0, "Addr": 4096, "Bytes": 512}}]}, f)
        nothing = ", nor any free: nothing to "
        for src, said in ((empty, nothing), (frees, ", only 2 frees: nothing to "),
                          (csv, nothing), (kineto, nothing)):
            with self.subTest(src=os.path.basename(src)):
                line = f"gpuarena: {src} holds no allocation{said}"
                if src != kineto:  # the tool reads traces and lifetimes CSVs
                    p = tool("--json", "--min", src)
                    self.assertEqual((p.returncode, p.stdout), (1, ""), p.stderr)
                    self.assertEqual(p.stderr.splitlines()[0][:len(line) + 6],
                                     line + "replay")
                p = gatest.cli("replay", src)
                self.assertCleanError(p, line + "replay", "record a run that allocates")
                self.assertEqual(p.stdout, "")
                self.assertNotIn("512 B", p.stderr)
                prefix = self.path("rep")
                p = gatest.cli("report", src, "-o", prefix)
                self.assertCleanError(p, line + "draw")
                self.assertFalse(os.path.exists(prefix + ".json"))
                self.assertFalse(os.path.exists(prefix + ".png"))
        p = tool("--device", "0", frees)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("frees.gatrace holds no allocation on device 0, only 2 frees", p.stderr)
        one = write_trace(self.path("one.gatrace"), [tf.event(0, 0x1000, 0, tf.FREE),
                                                     tf.event(1, 0x1000, 512, tf.ALLOC)])
        self.assertEqual(gatest.cli("replay", one, "--no-min").returncode, 0)

    def test_lifetimes_nul_byte_and_bom(self):
        """A NUL byte in the last line of a CSV cut the size "1\\0002" to 1 without a word; a byte
        order mark before the header (as spreadsheets save) was refused by the tool although
        `gpuarena replay` read it."""
        nul = self.path("nul.csv")
        with open(nul, "wb") as f:
            f.write(b"id,lower,upper,size\n0,0,5,1\x002")
        p = tool("--json", nul)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("nul.csv:2: a NUL byte", p.stderr)
        bom = self.path("bom.csv")
        with open(bom, "wb") as f:
            f.write(b"\xef\xbb\xbfid,lower,upper,size\r\n0,0,5,100\r\n1,2,3,4096\r\n")
        p = tool("--json", "--mode", "platform", bom)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["peak_live"], 512 + 4096)

    def test_tool_cr_line_ends_and_empty_name(self):
        """A CSV with CR line ends (old Mac) was one wrong header to the tool ("header must be
        'id,lower,upper,size'"), or "line too long" past 511 bytes; an empty FILE (`"$F"`, F
        unset) was "cannot open : No such file or directory", exit 1 (an outside check)."""
        for rows in (1, 100):
            cr = self.path(f"cr{rows}.csv")
            with open(cr, "wb") as f:
                f.write(b"id,lower,upper,size\r" + b"".join(b"%d,0,5,100\r" % i
                                                          for i in range(rows)))
            p = tool("--json", cr)
            self.assertEqual(p.returncode, 1, p.stdout)
            self.assertIn(f"cr{rows}.csv:1: a carriage return (CR) not followed by a line feed",
                          p.stderr)
            self.assertIn("tr '\\r' '\\n'", p.stderr)
        crlf = self.path("crlf.csv")  # CRLF still reads
        with open(crlf, "wb") as f:
            f.write(b"id,lower,upper,size\r\n0,0,5,100\r\n")
        self.assertEqual(tool("--json", crlf).returncode, 0)
        p = tool("--json", "")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("gpuarena: the FILE name is empty", p.stderr)

    def test_csv_same_figures_either_way(self):
        """`gpuarena replay x.csv` (imported in Python) and `gpuarena-replay x.csv` (read in C)
        replay one event order: buffers starting together in file order. The importer sorted
        them by id, and a CSV whose ids run backwards gave other peaks (grow 93 vs 126 MiB)."""
        src = self.path("rev.csv")
        seed, rows = 1, []
        for i in range(300):
            seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            lo, span, pick = seed >> 59, (seed >> 50) % 9 + 1, (seed >> 40) % 5
            rows.append((1000 - i, lo, lo + span, [512, 4096, 1 << 20, 3 << 20, 700000][pick]))
        with open(src, "w") as f:
            f.write("id,lower,upper,size\n")
            f.writelines(f"{i},{lo},{up},{s}\n" for i, lo, up, s in rows)
        fields = ("peak_in_use", "peak_reserved", "max_frag", "backend_reserves", "backend_maps",
                  "min_size")
        c = json.loads(tool("--json", "--min", src, timeout=60).stdout)["modes"]
        p = gatest.cli("replay", src, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        py = json.loads(p.stdout)["modes"]
        for m in c:
            self.assertEqual({k: c[m][k] for k in fields}, {k: py[m][k] for k in fields}, m)

    def test_tool_json_names_any_file(self):
        """helper-60 F9: gpuarena-replay --json copied a file name's bytes raw into "trace", so a
        name that is not UTF-8 made the document invalid JSON; such bytes are written as
        Python's surrogateescape (\\udcXX), which reads back to the name's bytes."""
        raw = os.fsencode(self.d) + b"/\xff\xfe-\xc3\xa9-\xed\xa0\x80-\x01.gatrace"
        write_trace(os.fsdecode(raw), [tf.event(0, 1, 512, tf.ALLOC), tf.event(1, 1, 512, tf.FREE)])
        p = subprocess.run([os.path.join(gatest.BUILD, "bin", "gpuarena-replay"), "--json",
                            "--mode", "platform", raw], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=20, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual(os.fsencode(doc["trace"]), raw)
        self.assertIn(b"\\udcff\\udcfe-\xc3\xa9-\\udced\\udca0\\udc80-\\u0001", p.stdout)

    def test_csv_zero_lifetime_rows_either_way(self):
        """A row with lower == upper (live over the empty [t, t)): gpuarena-replay's reader takes
        it; the Python importer refused the file. Both now read it, in one order: the same
        figures either way. Its alloc and free come after the frees and before the allocs of its
        instant (helper-60 F6: after the allocs, it was counted live beside a buffer born at t,
        which [lower, upper) says it never meets)."""
        src = self.path("zero.csv")
        with open(src, "w") as f:
            f.write("id,lower,upper,size\n0,0,5,1048576\n1,5,5,4194304\n2,5,9,2097152\n"
                    "3,3,3,512\n4,0,3,8192\n")
        fields = ("peak_in_use", "peak_reserved", "max_frag", "backend_reserves", "backend_maps",
                  "min_size", "allocs", "frees")
        c = tool("--json", "--min", src, timeout=60)
        self.assertEqual(c.returncode, 0, c.stderr)
        c = json.loads(c.stdout)["modes"]
        p = gatest.cli("replay", src, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        py = json.loads(p.stdout)["modes"]
        for m in c:
            self.assertEqual({k: c[m][k] for k in fields}, {k: py[m][k] for k in fields}, m)
        # at t=5: 0 ends, the zero-lifetime buffer 1 comes and goes alone, then 2 starts: the
        # peak is 4 MiB (1 alone), not 1 and 2 together (6 MiB)
        self.assertEqual(c["platform"]["peak_in_use"], 4194304)
        out = self.path("zero.gatrace")
        p = gatest.cli("import", "lifetimes", src, "-o", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        order = [(ev[tf.T_TIME], ev[tf.T_KIND], ev[tf.T_ADDR]) for ev in tf.read(out).events]
        self.assertEqual(order, [(0, tf.ALLOC, 0), (0, tf.ALLOC, 4), (3, tf.FREE, 4),
                                 (3, tf.ALLOC, 3), (3, tf.FREE, 3), (5, tf.FREE, 0),
                                 (5, tf.ALLOC, 1), (5, tf.FREE, 1), (5, tf.ALLOC, 2),
                                 (9, tf.FREE, 2)])
        # the report's case: 1,5,5,1000 and 2,5,6,10 never meet
        src = self.path("zero2.csv")
        with open(src, "w") as f:
            f.write("id,lower,upper,size\n1,5,5,1000\n2,5,6,10\n")
        c = json.loads(tool("--json", "--mode", "platform", src).stdout)
        self.assertEqual((c["peak_live"], c["modes"]["platform"]["peak_in_use"]), (1024, 1024))
        p = gatest.cli("replay", src, "--json", "--mode", "platform", "--no-min")
        self.assertEqual(json.loads(p.stdout)["peak_live"], 1024)

    def test_csv_numbers_one_grammar_either_way(self):
        """helper-40 F9: `gpuarena replay x.csv` read its numbers with Python's int(), which also
        takes 1_000, +2048, any Unicode white space and digits (Arabic-Indic 3 read as 3), and a
        quoted "1000"; gpuarena-replay refused them. Both readers now take or refuse each field
        alike, and replay what they take to the same peak."""
        cells = ["1000", " 1000 ", "\t1000\t", "1_000", "+2048", "-0", "\u0663000", "1000\u00a0",
                 "\u20031000", "1000\v", '"1000"', "1.5", "1e3", "0x10", "", " ", "10 00",
                 "\uff11000", "18446744073709551616", "18446744073709551615"]
        for i, cell in enumerate(cells):
            src = self.path(f"n{i}.csv")
            with open(src, "w", encoding="utf-8", newline="") as f:
                f.write(f"id,lower,upper,size\n0,0,10,{cell}\n{cell},1,10,4096\n")
            c = tool("--json", "--mode", "platform", src)
            py = gatest.cli_inproc("replay", src, "--json", "--mode", "platform", "--no-min")
            self.assertEqual(py.returncode, c.returncode, (cell, c.stderr, py.stderr))
            if c.returncode == 0:
                self.assertEqual(json.loads(py.stdout)["peak_live"],
                                 json.loads(c.stdout)["peak_live"], cell)
            else:
                self.assertTrue(py.stderr.startswith("gpuarena: "), (cell, py.stderr))
                self.assertIn(f"n{i}.csv: line 2: ", py.stderr, cell)  # the first bad field

    def test_csv_last_row_without_line_end(self):
        """A CSV cut short mid-number read as a smaller last row without a word (a size 194560
        cut to 19). Both readers now name the row when the file does not end its last row, and
        still replay it (a hand-written file may just lack the final newline); a file whose last
        line is blank, or ended, draws nothing."""
        cases = {"cut.csv": (b"id,lower,upper,size\n0,0,5,4096\n1,2,3,19", 3),
                 "crlf.csv": (b"id,lower,upper,size\r\n0,0,5,4096\r\n", 0),
                 "blank.csv": (b"id,lower,upper,size\n0,0,5,4096\n   ", 0),
                 "rmm.csv": (b"Thread,Time,Action,Pointer,Size,Stream\n1,0.5,allocate,0x10,4096,0x0\n"
                             b"1,0.6,free,0x10,4096,0", 3)}
        for name, (data, line) in cases.items():
            path = self.path(name)
            with open(path, "wb") as f:
                f.write(data)
            said = f"{name}:{line}: the last row has no line end"
            runs = [gatest.cli("replay", path)]
            if not name.startswith("rmm"):
                runs.append(tool(path))
            for p in runs:
                self.assertEqual(p.returncode, 0, (name, p.stderr))
                if line:
                    self.assertIn(said, p.stderr, name)
                else:
                    self.assertNotIn("no line end", p.stderr, name)

    def test_devices_one_pool_each(self):
        """A trace over two devices was replayed through one pool, mixing their peaks (here
        5 MiB live, while no device ever holds more than 4). Now the tool refuses it naming the
        devices, `--device N` replays N's events alone (the same figures as a trace of those
        events only), and `report` draws reserved bytes per device."""
        evs, solo = [], {0: [], 1: []}
        seed = 7
        for i in range(400):
            seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            dev, size = (seed >> 60) & 1, [512, 4096, 1 << 20, 3 << 20][(seed >> 50) % 4]
            evs.append(tf.event(2 * i, 0x1000 + i, size, tf.ALLOC, device=dev))
            solo[dev].append(evs[-1])
            if i >= 3:
                gone = evs[-4] if evs[-4][tf.T_KIND] == tf.ALLOC else None
                if gone:
                    evs.append(tf.event(2 * i + 1, gone[tf.T_ADDR], 0, tf.FREE,
                                        device=gone[tf.T_DEVICE]))
                    solo[gone[tf.T_DEVICE]].append(evs[-1])
        src = write_trace(self.path("two.gatrace"), evs)
        p = tool("--json", src)
        self.assertEqual(p.returncode, 1)
        self.assertIn("has events on 2 devices (0, 1)", p.stderr)
        self.assertIn("--device N", p.stderr)
        # the shim keeps one pool per context, merged per device in a replay (helper-49 F5)
        self.assertIn("one pool per context", p.stderr)
        for help_text in (tool("--help").stdout + tool("--help").stderr,
                          gatest.cli("replay", "--help").stdout):
            self.assertIn("one pool per context", " ".join(help_text.split()))
            self.assertNotIn("one pool per device, as the shim keeps", " ".join(help_text.split()))
        self.assertEqual(p.stdout, "")
        for dev in (0, 1):
            one = write_trace(self.path(f"solo{dev}.gatrace"), solo[dev])
            got = tool("--json", "--min", "--device", dev, src, timeout=60)
            want = tool("--json", "--min", one, timeout=60)
            self.assertEqual(got.returncode, 0, got.stderr)
            g, w = json.loads(got.stdout), json.loads(want.stdout)
            self.assertEqual(g["device"], dev)
            self.assertEqual(g["events"], len(solo[dev]))
            for m in w["modes"]:
                for k in ("peak_in_use", "peak_reserved", "min_size", "backend_maps",
                          "failed_allocs"):
                    self.assertEqual(g["modes"][m][k], w["modes"][m][k], (dev, m, k))
            py = gatest.cli("replay", src, "--json", "--no-min", "--device", str(dev))
            self.assertEqual(py.returncode, 0, py.stderr)
            self.assertEqual(json.loads(py.stdout)["modes"]["platform"]["peak_in_use"],
                             w["modes"]["platform"]["peak_in_use"])
        p = tool("--device", "2", src)
        self.assertEqual(p.returncode, 1)
        self.assertIn("no events on device 2 (its devices: 0, 1)", p.stderr)
        for bad in ("x", "32768", "-32769", "1.0", "", "-", "+1"):
            p = tool("--device", bad, src)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn("--device takes a device number", p.stderr)
        # the command names the user's file, not the temporary it imported into
        csv = self.path("one.csv")
        with open(csv, "w") as f:
            f.write("id,lower,upper,size\n1,0,1,512\n")
        p = gatest.cli("replay", csv, "--device", "3")
        self.assertCleanError(p, "one.csv has no events on device 3")
        prefix = self.path("rep")
        p = gatest.cli("report", src, "-o", prefix, "--mode", "grow")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(prefix + ".json") as f:
            doc = json.load(f)
        for dev in (0, 1):
            res = [e["args"]["reserved"] for e in doc["traceEvents"]
                   if e["ph"] == "C" and e["name"] == "reserved" and e["pid"] == dev]
            want = json.loads(tool("--json", "--mode", "grow", "--device", dev, src).stdout)
            self.assertEqual(max(res), want["modes"]["grow"]["peak_reserved"], dev)

    def test_negative_devices_are_devices(self):
        """helper-40 F10: only devices 0 and up were counted, so events on device 0 and on -7
        replayed through one pool without the "events on 2 devices" refusal, --device 0 dropped
        the -7 events without a word, and --device -7 was refused. A negative number is a device
        now; only device -1 on a free (the shim's free of a pointer no pool owns) is none."""
        m = 1 << 20
        evs = [tf.event(0, 0x1000, 3 * m, tf.ALLOC, device=0),
               tf.event(1, 0x1000, 2 * m, tf.ALLOC, device=-7),
               tf.event(2, 0x1000, 0, tf.FREE, device=-7),
               tf.event(3, 0x1000, 0, tf.FREE, device=0)]
        src = write_trace(self.path("neg.gatrace"), evs)
        p = tool("--json", src)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("has events on 2 devices (-7, 0)", p.stderr)
        py = gatest.cli_inproc("replay", src, "--no-min")
        self.assertCleanError(py, "has events on 2 devices (-7, 0)")
        for dev, peak in ((0, 3 * m), (-7, 2 * m)):
            p = tool("--json", "--mode", "platform", "--device", dev, src)
            self.assertEqual(p.returncode, 0, p.stderr)
            doc = json.loads(p.stdout)
            self.assertEqual((doc["device"], doc["events"], doc["peak_live"]), (dev, 2, peak))
            py = gatest.cli_inproc("replay", src, "--json", "--no-min", "--mode", "platform",
                                   "--device", str(dev))
            self.assertEqual(py.returncode, 0, py.stderr)
            self.assertEqual(json.loads(py.stdout)["peak_live"], peak)
        # the shim's own device -1: a free no pool owned (here a double free, refused) is no
        # device's event, so a one-device trace with it replays without --device as before
        one = write_trace(self.path("one.gatrace"), evs[:1] + evs[3:] + [
            tf.event(4, 0x1000, 0, tf.FREE, device=-1, result=1)])
        p = tool("--json", "--mode", "platform", one)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["peak_live"], 3 * m)

    def test_recorded_oom_is_tried(self):
        """helper-40 F1: an allocation that ran out of memory in the recorded run was skipped, so
        replay said the trace fits in less than the run had (failed allocs 0, min size 896 MiB
        where the request tried gives 1.12 GiB). It is tried now: freed at once when served,
        counted in recorded_failures, and in failed_allocs when it fails here too, so min size
        covers it. A failure of another kind (result 1) is still skipped."""
        m = 1 << 20
        evs = [tf.event(0, 0xA, m, tf.ALLOC), tf.event(1, 0xB, m, tf.ALLOC),
               tf.event(2, 0xC, m, tf.ALLOC), tf.event(3, 0xB, 0, tf.FREE),
               tf.event(4, 0, 2 * m, tf.ALLOC_FAILED, result=tf.CUDA_ERROR_OUT_OF_MEMORY),
               tf.event(5, 0, 8 * m, tf.ALLOC_FAILED, result=1),
               tf.event(6, 0xA, 0, tf.FREE), tf.event(7, 0xC, 0, tf.FREE)]
        src = write_trace(self.path("oom.gatrace"), evs)
        p = tool("--json", "--min", src, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["peak_live"], 4 * m)  # A and C live with the 2 MiB try
        for mode, r in doc["modes"].items():
            self.assertEqual((r["recorded_failures"], r["skipped"], r["allocs"], r["frees"]),
                             (1, 1, 3, 3), mode)
            self.assertEqual(r["peak_in_use"], 4 * m, mode)
            self.assertGreaterEqual(r["min_size"], 4 * m, mode)
        self.assertEqual(doc["modes"]["platform"]["min_size"], 4 * m)
        # under a cap that held the run's 3 MiB, the try fails here too: a failed allocation
        p = tool("--json", "--mode", "platform", "--limit", "3MiB", src)
        r = json.loads(p.stdout)["modes"]["platform"]
        self.assertEqual((r["failed_allocs"], r["first_oom"], r["peak_in_use"]), (1, 4, 3 * m))
        table = gatest.cli("replay", src, "--mode", "platform", "--no-min")
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertRegex(table.stdout, r"(?m)^recorded failures +1$")
        # the curve shows the try's moment: report's check of its peak against the tool's holds
        for mode in ("platform", "vmm"):
            rep = gatest.cli("report", src, "-o", self.path(f"rep-{mode}"), "--mode", mode)
            self.assertEqual(rep.returncode, 0, rep.stderr)
            self.assertNotIn("not drawing", rep.stderr)
        # a trace without a recorded failure has the field at 0 and nothing else changes
        plain = write_trace(self.path("plain.gatrace"), evs[:4] + evs[6:])
        r = json.loads(tool("--json", "--mode", "platform", plain).stdout)["modes"]["platform"]
        self.assertEqual((r["recorded_failures"], r["peak_in_use"], r["skipped"]), (0, 3 * m, 0))

    def test_edges_by_hand_every_mode(self):
        """Every size edge of the unit and the granule, checked against figures computed here,
        with the invariant checker after every event."""
        src = write_trace(self.path("e.gatrace"), edge_events())
        rounded = [-(-s // 512) * 512 for s in EDGE_SIZES]
        live = sum(rounded)
        p = gatest.cli("replay", src, "--json", "--check")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["peak_live"], live)
        n = len(EDGE_SIZES)
        for m, r in doc["modes"].items():
            self.assertEqual((r["events"], r["allocs"], r["frees"], r["failed_allocs"],
                              r["check_failures"], r["final_in_use"]), (2 * n, n, n, 0, 0, 0), m)
            self.assertEqual(r["peak_in_use"], live, m)
            self.assertEqual(r["peak_requested"], sum(EDGE_SIZES), m)
            self.assertGreaterEqual(r["peak_reserved"], live, m)
            # the trace's own backend calls (the replay's teardown is not counted): what was
            # reserved or mapped and not given back is what the pool holds at the end
            self.assertLessEqual(r["backend_releases"], r["backend_reserves"], m)
            if m == "vmm":  # 2 MiB granules
                self.assertEqual((r["backend_maps"] - r["backend_unmaps"]) << 21,
                                 r["final_reserved"], m)
        self.assertEqual(doc["modes"]["arena"]["peak_reserved"], 2 * live)
        self.assertEqual(doc["modes"]["arena"]["min_size"], live)
        plat = doc["modes"]["platform"]
        self.assertEqual((plat["peak_reserved"], plat["backend_reserves"], plat["final_reserved"],
                          plat["min_size"]), (live, n, 0, live))
        vmm = doc["modes"]["vmm"]
        bound = math.ceil(live / G) * G  # no placement maps fewer granules
        self.assertEqual(vmm["peak_reserved"], bound)
        self.assertEqual(vmm["min_size"], bound)
        # 512-byte granules map exactly the live bytes, one map per granule.
        r = json.loads(tool("--json", "--mode", "vmm", "--granularity", "512", "--vmm-keep", "0",
                            "--check", src).stdout)["modes"]["vmm"]
        self.assertEqual((r["peak_reserved"], r["backend_maps"], r["final_reserved"],
                          r["check_failures"]), (live, live // 512, 0, 0))

    def test_live_peak_over_limit_in_vmm(self):
        """A limit one granule under the live peak: vmm fails at the allocation that passes it,
        maps no more than the limit, and --min answers the granule bound."""
        src = write_trace(self.path("e.gatrace"), edge_events())
        live = sum(-(-s // 512) * 512 for s in EDGE_SIZES)
        bound = math.ceil(live / G) * G
        p = gatest.cli("replay", src, "--json", "--mode", "vmm", "--limit", bound - G)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)["modes"]["vmm"]
        self.assertGreater(r["failed_allocs"], 0)
        self.assertIsNotNone(r["first_oom"])
        self.assertLessEqual(r["peak_reserved"], bound - G)
        self.assertEqual(r["min_size"], bound)

    def test_report_address_reused_while_live(self):
        """`gpuarena report` drew an address allocated again while live as two live blocks, so
        its in_use curve peaked above the replay's and ended above 0 with nothing live; now it
        follows the replay (the earlier block ends there) and its slices end where they did."""
        src = write_trace(self.path("w.gatrace"), [
            tf.event(0, 0x10, 0, tf.FREE), tf.event(1, 0x20, 1000, tf.ALLOC),
            tf.event(2, 0x20, 0, tf.FREE), tf.event(3, 0x20, 0, tf.FREE),
            tf.event(4, 0x30, 4096, tf.ALLOC), tf.event(5, 0x30, 8192, tf.ALLOC),
            tf.event(6, 0x31, 0, tf.FREE), tf.event(7, 0x30, 0, tf.FREE)])
        p = gatest.cli("report", src, "-o", self.path("r"), "--mode", "platform")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(self.path("r.json")) as f:
            doc = json.load(f)
        in_use = [(e["ts"] * 1000, e["args"]["in_use"]) for e in doc["traceEvents"]
                  if e.get("name") == "in_use"]
        self.assertEqual(in_use, [(1, 1000), (2, 0), (4, 4096), (5, 8192), (7, 0)])
        ends = sorted(e["ts"] * 1000 for e in doc["traceEvents"] if e.get("ph") == "e")
        self.assertEqual(ends, [2, 5, 7])
        r = json.loads(tool("--json", "--mode", "platform", src).stdout)["modes"]["platform"]
        self.assertEqual((r["peak_in_use"], r["reused_addrs"], r["unmatched_frees"]), (8192, 1, 3))

    def test_file_named_like_an_option(self):
        """`gpuarena replay -- -t.gatrace` handed the name to gpuarena-replay, which took it for
        an unknown option (exit 1, "gpuarena-replay failed"); the tool now takes `--` too."""
        write_trace(self.path("-t.gatrace"), edge_events())
        p = gatest.cli("replay", "--json", "--no-min", "--mode", "platform", "--", "-t.gatrace",
                       cwd=self.d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["modes"]["platform"]["allocs"], len(EDGE_SIZES))
        p = subprocess.run([os.path.join(gatest.BUILD, "bin", "gpuarena-replay"), "--json", "--",
                            "-t.gatrace"], cwd=self.d, stdout=subprocess.PIPE, text=True,
                           timeout=20, check=False)
        self.assertEqual(p.returncode, 0)
        self.assertEqual(tool("--", "a", "b").returncode, 2)

    def test_arena_past_replay_address_space(self):
        """A 2^61-byte block made the default arena (twice the peak) larger than replay's
        address space, and the whole replay, every mode, failed with "cannot create the arena
        pool"; the default now stops inside it, and an --arena-size past it says what to do."""
        src = self.path("e61.csv")
        with open(src, "w") as f:
            f.write(f"id,lower,upper,size\n0,0,5,4096\n1,1,2,{1 << 61}\n")
        p = tool("--json", src, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        modes = json.loads(p.stdout)["modes"]
        self.assertEqual(list(modes), ["arena", "grow", "vmm", "platform"])
        self.assertEqual(modes["platform"]["failed_allocs"], 0)
        self.assertEqual(modes["arena"]["size_limit"], 1 << 61)
        self.assertEqual(modes["arena"]["failed_allocs"], 1)
        edges = write_trace(self.path("e.gatrace"), edge_events())
        p = tool("--mode", "arena", "--arena-size", "16777215TiB", edges)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn("more than replay's address space", p.stderr)
        self.assertIn("give a smaller arena size", p.stderr)

    def test_import_out_fifo_written_through(self):
        """`import -o FIFO` renamed a regular file over the FIFO (and `-o /dev/null`, run as
        root, over /dev/null, for the whole machine; not tried here). Now a FIFO with a reader
        gets the trace, and one with none is a message, not a hang; it stays a FIFO."""
        import stat
        import threading
        src = self.path("in.csv")
        with open(src, "w") as f:
            f.write("id,lower,upper,size\n0,0,5,100\n1,2,3,4096\n")
        out = self.path("out.fifo")
        os.mkfifo(out)
        p = gatest.cli("import", "lifetimes", src, "-o", out, timeout=30)
        self.assertCleanError(p, "nobody is reading")
        got = []
        reader = threading.Thread(target=lambda: got.append(open(out, "rb").read()))
        reader.start()
        p = gatest.cli("import", "lifetimes", src, "-o", out, timeout=30)
        if reader.is_alive():  # the old code never opened the FIFO: release the reader
            with open(out, "wb"):
                pass
        reader.join(10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(stat.S_ISFIFO(os.lstat(out).st_mode), "the FIFO was replaced")
        trace = tf.parse(got[0])
        self.assertEqual([e[tf.T_SIZE] for e in trace.events], [100, 4096, 4096, 100])
        # Through a link to it, as /dev/stdout is: the link and the FIFO both stay.
        link = self.path("link")
        os.symlink(out, link)
        p = gatest.cli("import", "lifetimes", src, "-o", link, timeout=30)
        self.assertCleanError(p, "nobody is reading")
        self.assertTrue(os.path.islink(link), "the link was replaced")
        p = subprocess.run([sys.executable, gatest.SCRIPT, "import", "lifetimes", src, "-o",
                            "/dev/stdout"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith(tf.MAGIC), p.stdout[:40])
        with open(self.path("stdout.gatrace"), "wb") as f:  # stdout a regular file
            p = subprocess.run([sys.executable, gatest.SCRIPT, "import", "lifetimes", src, "-o",
                                "/dev/stdout"], stdout=f, stderr=subprocess.PIPE, timeout=30,
                               check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.islink("/dev/stdout"))
        with open(self.path("stdout.gatrace"), "rb") as f:
            self.assertTrue(f.read().startswith(tf.MAGIC))

    def test_format_trace_is_obeyed(self):
        """`gpuarena replay x.csv --format trace` replayed the CSV as buffer lifetimes (the tool
        went by the .csv name); the user said trace, and it is not one. A real trace named .csv
        replays as a trace either way."""
        src = self.path("x.csv")
        with open(src, "w") as f:
            f.write("id,lower,upper,size\n0,0,5,100\n")
        self.assertCleanError(gatest.cli("replay", src, "--format", "trace"), "not a gpuarena")
        self.assertEqual(gatest.cli("replay", src, "--no-min").returncode, 0)
        named = write_trace(self.path("t.csv"), edge_events())
        for args in ((), ("--format", "trace")):
            p = gatest.cli("replay", named, "--json", "--no-min", "--mode", "platform", *args)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(json.loads(p.stdout)["modes"]["platform"]["allocs"], len(EDGE_SIZES))

    def test_malformed_inputs_clean_errors(self):
        """Truncated, duplicated, negative and huge fields: one `gpuarena:` line, exit 1, from
        the tool and from the command."""
        cases = {"trunc.csv": b"id,lower,upper,size\n0,0,5,100\n1,2",
                 "duphdr.csv": b"id,lower,upper,size\nid,lower,upper,size\n0,0,5,100\n",
                 "neg.csv": b"id,lower,upper,size\n0,0,5,-100\n",
                 "big.csv": b"id,lower,upper,size\n0,0,5,99999999999999999999999\n",
                 "short.gatrace": b"GATRACE\0\1\0\0\0",
                 "empty.csv": b""}
        for name, data in cases.items():
            src = self.path(name)
            with open(src, "wb") as f:
                f.write(data)
            p = tool(src)
            self.assertEqual(p.returncode, 1, name)
            self.assertTrue(p.stderr.startswith("gpuarena: "), (name, p.stderr))
            self.assertCleanError(gatest.cli("replay", src), name)


if __name__ == "__main__":
    unittest.main()
