"""`gpuarena report`: the Chrome trace-event JSON parses, holds the in_use and reserved counter
tracks with the right values in every mode, one async slice pair per allocation, and the PNG is
written or clearly skipped."""

import gzip
import json
import os
import tempfile
import unittest

import gatest
from gpuarena_cli import importers
from gpuarena_cli import report as report_mod
from gpuarena_cli import tracefile as tf

HAVE_MPL = gatest.MPL_PYTHON is not None


def png_text(path):
    """The tEXt chunks of a PNG, {keyword: text}: read from the file's bytes, no library."""
    import struct
    import zlib
    out = {}
    with open(path, "rb") as f:
        data = f.read()
    pos = 8
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"tEXt":
            key, _, text = body.partition(b"\0")
            out[key.decode("latin-1")] = text.decode("latin-1")
        elif kind == b"iTXt":  # keyword, flag, method, language, translated keyword, text
            key, _, rest = body.partition(b"\0")
            flag, rest = rest[0], rest[2:]
            text = rest.split(b"\0", 2)[2]
            out[key.decode("latin-1")] = (zlib.decompress(text) if flag else text).decode()
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            out[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        pos += 12 + n
    return out


class Report(unittest.TestCase, gatest.CliAsserts):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def report(self, src, *extra):
        prefix = os.path.join(self.dir, "rep")
        p = gatest.cli("report", src, "-o", prefix, *extra)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(prefix + ".json") as f:
            doc = json.load(f)
        if HAVE_MPL:
            self.assertTrue(os.path.getsize(prefix + ".png") > 0)
        else:
            self.assertIn("gpuarena: matplotlib is not installed, skipped the PNG (apt-get "
                          "install python3-matplotlib for /usr/bin/python3)", p.stderr)
            self.assertFalse(os.path.exists(prefix + ".png"))
        return doc, p

    def test_lifetimes_timeline(self):
        src = os.path.join(gatest.TRACES, "lifetimes", "somas_resnet50.csv")
        doc, p = self.report(src, "--mode", "grow")
        self.assertNotIn("in use only", p.stderr)
        evs = doc["traceEvents"]
        self.assertEqual({e["name"] for e in evs if e["ph"] == "C"}, {"in_use", "reserved"})
        self.assertTrue(doc["otherData"]["reserved_included"])
        # Grow mode's reserved track: the tool's peak, and never below in use at any sample time.
        tool = json.loads(gatest.cli("replay", src, "--json", "--no-min", "--mode",
                                     "grow").stdout)
        res = {e["ts"]: e["args"]["reserved"] for e in evs if e.get("name") == "reserved"}
        use = {e["ts"]: e["args"]["in_use"] for e in evs if e.get("name") == "in_use"}
        self.assertEqual(max(res.values()), tool["modes"]["grow"]["peak_reserved"])
        self.assertEqual(set(res), set(use))
        for ts, v in use.items():
            self.assertGreaterEqual(res[ts], v, ts)
        counters = [e for e in evs if e["ph"] == "C" and e["name"] == "in_use"]
        # Independent figure: peak of summed sizes over [lower, upper) intervals.
        delta = {}
        with open(src) as f:
            next(f)
            rows = [tuple(map(int, ln.split(","))) for ln in f if ln.strip()]
        for _, lo, up, size in rows:
            delta[lo] = delta.get(lo, 0) + size
            delta[up] = delta.get(up, 0) - size
        level = peak = 0
        for t in sorted(delta):
            level += delta[t]
            peak = max(peak, level)
        self.assertEqual(max(e["args"]["in_use"] for e in counters), peak)
        self.assertEqual(counters[-1]["args"]["in_use"], 0)
        self.assertEqual(sum(1 for e in evs if e["ph"] == "b"), len(rows))
        self.assertEqual(sum(1 for e in evs if e["ph"] == "e"), len(rows))
        ts = [e["ts"] for e in counters]
        self.assertEqual(ts, sorted(ts))

    def test_reserved_tracks(self):
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_C.csv")
        with open(src) as f:
            next(f)
            rows = [tuple(map(int, ln.split(","))) for ln in f if ln.strip()]
        delta = {}
        for _, lo, up, size in rows:  # platform reserves the 512-rounded live bytes
            delta[lo] = delta.get(lo, 0) + -(-size // 512) * 512
            delta[up] = delta.get(up, 0) - -(-size // 512) * 512
        level = peak = 0
        for t in sorted(delta):
            level += delta[t]
            peak = max(peak, level)
        tool = json.loads(gatest.cli("replay", src, "--json", "--no-min").stdout)
        modes = tool["modes"]
        for mode, want in (("platform", peak), ("arena", modes["arena"]["size_limit"]),
                           ("grow", modes["grow"]["peak_reserved"])):
            with self.subTest(mode=mode):
                doc, p = self.report(src, "--mode", mode)
                self.assertNotIn("in use only", p.stderr)
                res = [e["args"]["reserved"] for e in doc["traceEvents"]
                       if e["ph"] == "C" and e["name"] == "reserved"]
                use = [e["args"]["in_use"] for e in doc["traceEvents"]
                       if e["ph"] == "C" and e["name"] == "in_use"]
                self.assertEqual(max(res), want)
                self.assertGreaterEqual(max(res), max(use))
                self.assertTrue(doc["otherData"]["reserved_included"])

    def test_report_names_its_mode(self):
        # The reserved curve is one mode's replay (default arena): two reports of one trace in
        # arena and vmm mode looked the same, nothing in the JSON or the PNG said which mode
        # (an outside check of issue 4, helper-109). The JSON says it in otherData and in each
        # device's process name; the PNG in its title, its legend and its Title text chunk.
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_C.csv")
        for mode in ("arena", "vmm"):
            with self.subTest(mode=mode):
                doc, _p = self.report(src, "--mode", mode)
                self.assertEqual(doc["otherData"]["mode"], mode)
                self.assertEqual(doc["otherData"]["trace"], src)
                names = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"]
                self.assertEqual(names, [f"gpuarena device 0, reserved in {mode} mode (time: "
                                         "the CSV's logical steps, each shown as 1 s)"])
                if HAVE_MPL:
                    self.assertEqual(png_text(os.path.join(self.dir, "rep.png")).get("Title"),
                                     f"{src}: bytes in use, and reserved in {mode} mode")
        # A lifetimes CSV's times are logical steps, not seconds: the axis says so (it read
        # "time (s)" and ran to about 1e-6 s).
        if HAVE_MPL:
            self.assertIn("logical time (the CSV's lower and upper)", png_text(os.path.join(
                self.dir, "rep.png")).get("Description", ""))
        # A name that is not UTF-8 is drawn with a replacement character, not refused.
        odd = os.path.join(os.fsencode(self.dir), b"odd\xff.csv")
        with open(src, "rb") as f, open(odd, "wb") as g:
            g.write(f.read())
        doc, _p = self.report(os.fsdecode(odd))
        self.assertEqual(doc["otherData"]["mode"], "arena")
        if HAVE_MPL:
            self.assertTrue(png_text(os.path.join(self.dir, "rep.png"))["Title"].endswith(
                "odd\ufffd.csv: bytes in use, and reserved in arena mode"))

    def test_reserved_under_the_shims_settings(self):
        """--fraction and --limit, as replay takes them: the reserved curve of the shim's default
        arena (0.75+ of the cap, grown past it) or of a pool under a cap; report drew arena mode
        as one region of twice the peak only (an outside check, 2026-12-07). The settings are said
        beside the mode, and misused they are usage errors as in replay."""
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_C.csv")
        for mode, opts in (("arena", ("--fraction", "0.75+", "--limit", "1MiB")),
                           ("arena", ("--fraction", "0.75", "--limit", "4MiB")),
                           ("grow", ("--limit", "1MiB"))):
            with self.subTest(mode=mode, opts=opts):
                tool = json.loads(gatest.cli("replay", src, "--json", "--no-min", "--mode", mode,
                                             *opts).stdout)["modes"][mode]
                doc, _p = self.report(src, "--mode", mode, *opts)
                res = [e["args"]["reserved"] for e in doc["traceEvents"]
                       if e["ph"] == "C" and e["name"] == "reserved"]
                self.assertEqual(max(res), tool["peak_reserved"])
                setting = ", ".join(filter(None, (
                    "--fraction" in opts and f"GPUARENA_MEM_FRACTION={opts[1]}",
                    f"cap {tool['size_limit']} bytes")))
                self.assertEqual(doc["otherData"]["setting"], setting)
                names = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"]
                self.assertIn(f"reserved in {mode} mode ({setting})", names[0])
        # 0.75+ of 1 MiB: a 768 KiB arena, grown past it (the live peak is above it)
        self.assertGreater(max(res), 0)
        for args, why in ((("--limit", "1MiB"), "--limit applies to grow, vmm and platform"),
                          (("--fraction", "0.75+"), "is a share of the cap"),
                          (("--mode", "grow", "--fraction", "0.75+", "--limit", "1MiB"),
                           "--fraction 0.75+ changes arena mode only")):
            with self.subTest(args=args):
                p = gatest.cli("report", src, "-o", os.path.join(self.dir, "bad"), *args)
                self.assertCleanError(p, why, code=2)
                self.assertFalse(os.path.exists(os.path.join(self.dir, "bad.json")))

    def test_lifetimes_steps_in_the_json(self):
        """A lifetimes CSV's lower and upper are logical steps: the Perfetto/Chrome JSON showed
        them as nanoseconds (step 7 at 0.007 us; an outside check, 2026-12-07), where the PNG's
        axis already said steps. Each step is now 1 s of the viewer's clock, said in each
        device's name and in otherData, and each slice carries the CSV's lower and upper; a
        trace's times stay nanoseconds."""
        src = os.path.join(self.dir, "steps.csv")
        with open(src, "w") as f:
            f.write("id,lower,upper,size\n1,3,7,1024\n2,5,9,512\n")
        doc, _p = self.report(src, "--mode", "platform")
        use = [(e["ts"], e["args"]["in_use"]) for e in doc["traceEvents"]
               if e["ph"] == "C" and e["name"] == "in_use"]
        self.assertEqual(use, [(3e6, 1024), (5e6, 1536), (7e6, 512), (9e6, 0)])
        self.assertEqual(doc["otherData"]["time_unit"], "step")
        self.assertIn("logical steps, each shown as 1 s", doc["otherData"]["time_said"])
        names = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"]
        self.assertTrue(names[0].endswith("(time: the CSV's logical steps, each shown as 1 s)"))
        begins = [e for e in doc["traceEvents"] if e["ph"] == "b"]
        self.assertEqual([(e["ts"], e["args"]["lower"], e["args"]["upper"]) for e in begins],
                         [(3e6, 3, 7), (5e6, 5, 9)])
        self.assertEqual(sorted(e["ts"] for e in doc["traceEvents"] if e["ph"] == "e"),
                         [7e6, 9e6])
        # a trace's times are nanoseconds, shown as such (ts in microseconds)
        trace = os.path.join(self.dir, "t.gatrace")
        tf.write(trace, tf.Trace([tf.event(3000, 1, 1024, tf.ALLOC),
                                  tf.event(7000, 1, 0, tf.FREE)]))
        doc, _p = self.report(trace, "--mode", "platform")
        self.assertEqual([e["ts"] for e in doc["traceEvents"] if e.get("name") == "in_use"],
                         [3.0, 7.0])
        self.assertEqual((doc["otherData"]["time_unit"], doc["displayTimeUnit"]), ("ns", "ns"))
        self.assertNotIn("time_said", doc["otherData"])

    def test_lifetimes_steps_past_a_viewers_clock(self):
        """Steps at 1 s each are held by a viewer up to 2^53 us (Perfetto keeps int64 ns): a CSV
        whose upper is 10^13 was written as ts 10^19 us, past it (an outside check, 2026-12-07).
        The largest of 1 s, 1 ms, 1 us and 1 ns a step that fits is taken and said; past even
        1 ns a step, a gpuarena: line says so."""
        for upper, unit, ts in ((9_007_199_254, "1 s", 9_007_199_254_000_000),
                                (10 ** 13, "1 us", 10 ** 13), (10 ** 17, "1 ns", 10 ** 14)):
            with self.subTest(upper=upper):
                src = os.path.join(self.dir, "far.csv")
                with open(src, "w") as f:
                    f.write(f"id,lower,upper,size\n1,0,{upper},1024\n2,5,9,512\n")
                doc, p = self.report(src, "--mode", "platform")
                self.assertNotIn("past what a trace viewer holds", p.stderr)
                self.assertIn(f"each shown as {unit}", doc["otherData"]["time_said"])
                times = [e["ts"] for e in doc["traceEvents"] if e.get("name") == "in_use"]
                self.assertEqual(max(times), ts)
                self.assertLessEqual(max(times), 2 ** 53)
        with open(src, "w") as f:
            f.write(f"id,lower,upper,size\n1,0,{2 ** 64 - 1},1024\n")
        doc, p = self.report(src, "--mode", "platform")
        self.assertIn("gpuarena: " + src + ": its last step, 18,446,744,073,709,551,615, is past "
                      "what a trace viewer holds even at 1 ns a step", p.stderr)

    def test_png_not_writable_says_why(self):
        """A PNG that cannot be written (a link to /dev/full, written through as devices are:
        every write fails, for root too): with matplotlib on the machine, exit 1 and the
        drawing's own reason, never "matplotlib is not installed" (which it printed, with exit 0,
        when the drawing ran in Debian's interpreter and failed there). (A PNG path that is a
        folder is refused before anything is drawn: test_prefix_names_files.)"""
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        prefix = os.path.join(self.dir, "d")
        os.symlink("/dev/full", prefix + ".png")
        p = gatest.cli("report", src, "-o", prefix)
        self.assertNotIn("Traceback", p.stderr)
        if HAVE_MPL:
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"gpuarena: cannot write {prefix}.png", p.stderr)
            self.assertIn("No space left on device", p.stderr)
            self.assertNotIn("not installed", p.stderr)
        else:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("matplotlib is not installed", p.stderr)

    def test_compare_plot_folder_checked_first(self):
        """compare --plot into a folder that does not exist: exit 1 before any mode runs."""
        prog = os.path.join(gatest.BUILD, "examples", "ex_direct")
        p = gatest.cli("compare", "--sim", "--plot", os.path.join(self.dir, "none", "p"), "--",
                       prog, "4", "4", "1")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("does not exist; create it", p.stderr)
        self.assertEqual(p.stdout, "")
        # A folder where no file can be made (sysfs refuses root too): found before any run.
        p = gatest.cli("compare", "--sim", "--plot", "/sys/gpuarena-p", "--", prog, "4", "4", "1")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("--plot /sys/gpuarena-p: cannot write in the folder /sys", p.stderr)
        self.assertEqual(p.stdout, "")
        p = gatest.cli("compare", "--sim", "--plot", "", "--", prog, "4", "4", "1")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("(writes out/run1.png)", p.stderr)

    def test_unknown_device_events(self):
        """The shim records the free of a pointer it does not own on device -1 (unknown): the
        report of such a trace draws reserved bytes for the real device, as the replay reads
        it, instead of failing on a replay of 'device -1'."""
        evs = [tf.event(0, 0x1000, 4096, tf.ALLOC), tf.event(10, 0x2000, 8192, tf.ALLOC),
               tf.event(20, 0x1000, 0, tf.FREE), tf.event(30, 0x9000, 0, tf.FREE, device=-1),
               tf.event(40, 0x2000, 0, tf.FREE)]
        src = os.path.join(self.dir, "foreign.gatrace")
        tf.write(src, tf.Trace(evs))
        prefix = os.path.join(self.dir, "foreign")
        p = gatest.cli("report", src, "-o", prefix, "--mode", "platform")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("drawing bytes in use only", p.stderr)
        with open(prefix + ".json") as f:
            doc = json.load(f)
        self.assertTrue(doc["otherData"]["reserved_included"])
        reserved = [e["args"]["reserved"] for e in doc["traceEvents"] if e["name"] == "reserved"]
        self.assertEqual(max(reserved), 12288)
        self.assertEqual({e["pid"] for e in doc["traceEvents"] if e["ph"] == "C"}, {0})
        p = gatest.cli("replay", src, "--json", "--no-min", "--mode", "platform")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)["modes"]["platform"]
        self.assertEqual((r["peak_reserved"], r["unmatched_frees"]), (12288, 1))

    def test_unplaceable_blocks_not_drawn(self):
        """Blocks no replay can place (2^64 - 1 and 2^63 bytes: negative sizes written unsigned)
        are not drawn in use (the curve reached 2.77e19 bytes), and the warning about them names
        the user's file, not the report's deleted temporary."""
        evs = [tf.event(0, 0x1000, (1 << 64) - 1, tf.ALLOC), tf.event(10, 0x2000, 1 << 63, tf.ALLOC),
               tf.event(20, 0x3000, 1000, tf.ALLOC), tf.event(30, 0x3000, 0, tf.FREE)]
        src = os.path.join(self.dir, "huge.gatrace")
        tf.write(src, tf.Trace(evs))
        doc, p = self.report(src, "--mode", "platform")
        in_use = [e["args"]["in_use"] for e in doc["traceEvents"] if e["name"] == "in_use"]
        self.assertEqual(max(in_use), 1000)
        self.assertIn(f"gpuarena: {src}: the block of 18446744073709551615 bytes", p.stderr)
        self.assertNotIn("/gpuarena-", p.stderr.replace(self.dir, "DIR"))  # under any TMPDIR

    def test_same_time_peak_drawn(self):
        """A block allocated and freed within one time stamp (microsecond traces) still shows in
        the curves: each stamp keeps its highest and its last level (merged to the last, the
        in-use curve never reached the replay's peak_in_use)."""
        evs = [tf.event(0, 0x1000, 4096, tf.ALLOC), tf.event(10, 0x2000, 1 << 20, tf.ALLOC),
               tf.event(10, 0x2000, 0, tf.FREE), tf.event(10, 0x3000, 8192, tf.ALLOC),
               tf.event(20, 0x1000, 0, tf.FREE), tf.event(20, 0x4000, 512, tf.ALLOC)]
        self.assertEqual(report_mod.in_use_series(tf.Trace(evs))[0],
                         [(0, 4096), (10, 4096 + (1 << 20)), (10, 4096 + 8192), (20, 8192 + 512)])
        src = os.path.join(self.dir, "same.gatrace")
        tf.write(src, tf.Trace(evs))
        doc, _ = self.report(src, "--mode", "platform")
        in_use = [e["args"]["in_use"] for e in doc["traceEvents"] if e["name"] == "in_use"]
        self.assertEqual(max(in_use), 4096 + (1 << 20))
        p = gatest.cli("replay", src, "--json", "--no-min", "--mode", "platform")
        self.assertEqual(json.loads(p.stdout)["modes"]["platform"]["peak_in_use"],
                         4096 + (1 << 20))
        reserved = [e["args"]["reserved"] for e in doc["traceEvents"] if e["name"] == "reserved"]
        self.assertEqual(max(reserved), 4096 + (1 << 20))

    def test_prefix_names_files(self):
        """-o and --plot take a PREFIX of files: a folder (DIR/ wrote DIR/.json, a hidden file)
        or an empty one (it fell back to the default name) is a usage error, and nothing is
        written or run."""
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        prog = os.path.join(gatest.BUILD, "examples", "ex_direct")
        for prefix, why in ((self.dir + "/", "is a folder"), (self.dir, "is a folder"),
                            ("", "-o is empty")):
            p = gatest.cli("report", src, "-o", prefix)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(why, p.stderr)
            p = gatest.cli("compare", "--sim", "--plot", prefix, "--", prog, "4", "4", "1")
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(why.replace("-o", "--plot"), p.stderr)
            self.assertEqual(p.stdout, "")
        self.assertEqual(os.listdir(self.dir), [])
        p = gatest.cli("report", src, "-o", os.path.join(self.dir, "r"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("r.json", os.listdir(self.dir))
        # A PREFIX with its file's extension is taken without it (out.json wrote out.json.json).
        p = gatest.cli("report", src, "-o", os.path.join(self.dir, "out.json"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("out.json", os.listdir(self.dir))
        self.assertNotIn("out.json.json", os.listdir(self.dir))
        # PREFIX.png already a folder: refused before anything is written (it wrote the JSON,
        # then failed on the PNG).
        os.mkdir(os.path.join(self.dir, "dd.png"))
        p = gatest.cli("report", src, "-o", os.path.join(self.dir, "dd"))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("dd.png is a folder; remove it or give another PREFIX", p.stderr)
        self.assertNotIn("dd.json", os.listdir(self.dir))

    def test_vmm_keep(self):
        """report --mode vmm --vmm-keep draws the replay's vmm curve at that keep: its peak is
        the tool's peak_reserved for the same keep (which differs between 0 and the default)."""
        src = os.path.join(gatest.TRACES, "lifetimes", "somas_resnet50.csv")
        peaks = []
        for keep in ("0", "64MiB"):
            tool = json.loads(gatest.cli("replay", src, "--json", "--no-min", "--mode", "vmm",
                                         "--vmm-keep", keep).stdout)
            doc, p = self.report(src, "--mode", "vmm", "--vmm-keep", keep)
            res = [e["args"]["reserved"] for e in doc["traceEvents"]
                   if e["ph"] == "C" and e["name"] == "reserved"]
            self.assertEqual(max(res), tool["modes"]["vmm"]["peak_reserved"], keep)
            peaks.append(max(res))
        self.assertNotEqual(peaks[0], peaks[1])
        p = gatest.cli("report", src, "-o", os.path.join(self.dir, "no"), "--vmm-keep", "0")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--vmm-keep applies to vmm mode only", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "no.json")))

    def test_snapshot_timeline_ring_buffer(self):
        src = os.path.join(gatest.TRACES, "pytorch-snapshot", "cs336_transformer_step.pickle")
        doc, _ = self.report(src)
        trace, counts, _ = importers.load_any(src)
        live = sum(ev[tf.T_SIZE] for ev in trace.events if ev[tf.T_KIND] == tf.ALLOC) - \
            sum(ev[tf.T_SIZE] for ev in trace.events if ev[tf.T_KIND] == tf.FREE)
        counters = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == "in_use"]
        self.assertEqual(counters[-1]["args"]["in_use"], live)
        self.assertGreater(counts["live_at_end"], 0)

    def test_bad_input_leaves_nothing(self):
        src = os.path.join(self.dir, "bad.csv")
        with open(src, "w") as f:
            f.write("id,lower,upper,size\n1,2\n")
        prefix = os.path.join(self.dir, "out")
        p = gatest.cli("report", src, "-o", prefix)
        self.assertCleanError(p, "bad.csv", "line 2")
        self.assertEqual(os.listdir(self.dir), ["bad.csv"])

    def test_default_prefix_is_input_name(self):
        trace = os.path.join(self.dir, "mine.gatrace")
        tf.write(trace, tf.Trace([tf.event(0, 1, 512, tf.ALLOC), tf.event(5, 1, 512, tf.FREE)]))
        p = gatest.cli("report", trace, cwd=self.dir)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.dir, "mine.json")) as f:
            # metadata, 2 in_use and 2 reserved counter samples, one begin/end slice pair
            self.assertEqual(len(json.load(f)["traceEvents"]), 1 + 2 + 2 + 2)
        # helper-60 F8: a Kineto X.json in the current folder was its own default output (refused,
        # exit 1), and X.json.gz wrote X.json.json; both write X.report.json now
        evs = [{"name": "[memory]", "ph": "i", "ts": t, "args": {
            "Device Type": 1, "Device Id": 0, "Addr": 100, "Bytes": b}} for t, b in ((1, 4096),
                                                                                 (2, -4096))]
        data = json.dumps({"traceEvents": evs}).encode()
        for name, body in (("kin.json", data), ("kz.json.gz", gzip.compress(data))):
            with open(os.path.join(self.dir, name), "wb") as f:
                f.write(body)
            p = gatest.cli("report", name, cwd=self.dir, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            stem = name.split(".")[0]
            self.assertIn(f"wrote {stem}.report.json", p.stdout)
            with open(os.path.join(self.dir, name), "rb") as f:
                self.assertEqual(f.read(), body)


class ReportLarge(unittest.TestCase):
    """A long trace: the document streamed in pieces equals the one built whole (json.dumps of
    the dict), a trace past MAX_SLICES still counts its allocations, and the PNG's series keep
    their envelope in a bounded number of points."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    @staticmethod
    def churn(n, seed=7):
        import random
        rng, live, evs, t = random.Random(seed), [], [], 0
        for i in range(n):
            t += 1000 + rng.randrange(3)  # ts with a fraction, as real traces have
            if live and rng.random() < 0.5:
                a, size = live.pop(rng.randrange(len(live)))
                evs.append(tf.event(t, a, size, tf.FREE, device=a % 2))
            else:
                size = rng.choice([512, 4096, 1 << 20, 7777])
                live.append((i + 1, size))
                evs.append(tf.event(t, i + 1, size, tf.ALLOC, device=(i + 1) % 2))
        return tf.Trace(evs)

    def test_streamed_document_equals_whole(self):
        trace = self.churn(3000)
        reserved = {0: [(0, 0), (5000, 1 << 21), (9000.5, 1 << 22)], 1: [(7, 512)]}
        path = os.path.join(self.dir, "doc.json")
        report_mod.write_chrome_trace(path, trace, reserved, title="t")
        with open(path, "rb") as f:
            got = f.read()
        want = json.dumps(report_mod.chrome_trace(trace, reserved, title="t"),
                          separators=(",", ":")).encode()
        self.assertEqual(got, want)
        doc = json.loads(got)
        allocs = sum(1 for ev in trace.events if ev[tf.T_KIND] == tf.ALLOC)
        self.assertEqual(doc["otherData"]["allocations"], allocs)
        self.assertEqual(sum(1 for e in doc["traceEvents"] if e["ph"] == "b"), allocs)

    def test_past_max_slices_counts_allocations(self):
        trace = self.churn(3000)
        allocs = sum(1 for ev in trace.events if ev[tf.T_KIND] == tf.ALLOC)
        saved, report_mod.MAX_SLICES = report_mod.MAX_SLICES, allocs - 1
        try:
            path = os.path.join(self.dir, "doc.json")
            report_mod.write_chrome_trace(path, trace)
            with open(path) as f:
                doc = json.load(f)
        finally:
            report_mod.MAX_SLICES = saved
        self.assertEqual(doc["otherData"]["allocations"], allocs)
        self.assertFalse(doc["otherData"]["slices_included"])
        self.assertFalse([e for e in doc["traceEvents"] if e["ph"] in "be"])

    def test_downsample_keeps_envelope(self):
        import random
        rng = random.Random(3)
        pts, level = [], 0
        for i in range(100000):
            level = max(0, level + rng.randrange(-5, 6))
            pts.append((i * 10, level))
        pts[54321] = (pts[54321][0], 10 ** 9)  # one spike a pixel could hide
        small = report_mod.downsample_steps(pts, buckets=500)
        self.assertLessEqual(len(small), 4 * 500)
        self.assertEqual(small[0], pts[0])
        self.assertEqual(small[-1], pts[-1])
        self.assertEqual(max(v for _, v in small), 10 ** 9)
        self.assertEqual(min(v for _, v in small), min(v for _, v in pts))
        self.assertEqual(small, sorted(small))  # in time order, every point one of the series'
        self.assertTrue(set(small) <= set(pts))
        span = pts[-1][0] - pts[0][0] + 1
        for b in range(500):  # each bucket's highest and lowest are kept
            whole = [v for t, v in pts if t * 500 // span == b]
            kept = [v for t, v in small if t * 500 // span == b]
            if whole:
                self.assertEqual((min(kept), max(kept)), (min(whole), max(whole)))
        self.assertEqual(report_mod.downsample_steps(pts[:2000], buckets=500), pts[:2000])


if __name__ == "__main__":
    unittest.main()
