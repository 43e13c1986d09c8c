"""`gpuarena replay` through the real C tool (built by the tier rule; a missing tool fails here,
never skips): figures checked against independent computation, imports on the fly, and errors."""

import json
import os
import subprocess
import tempfile
import time
import unittest

import gatest
from gpuarena_cli import tracefile as tf


def rounded_peak(rows):
    """Peak of 512-rounded live bytes over [lower, upper): what platform mode reserves at most."""
    delta = {}
    for _, lo, up, size in rows:
        r = -(-size // 512) * 512
        delta[lo] = delta.get(lo, 0) + r
        delta[up] = delta.get(up, 0) - r
    level = peak = 0
    for t in sorted(delta):
        level += delta[t]
        peak = max(peak, level)
    return peak


class CheckFailures(unittest.TestCase):
    """Invariant failures found in a replay (check_failures > 0) are a bug in the allocator: the
    command exited 0 with them only as a count in its output, which a CI run of --check took for a
    pass. The checker never fails on correct code, so a stand-in gpuarena-replay prints them, and
    replay_checkfail (the real tool with ga_replay wrapped at link time) forges them."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="checkfail-")
        self.build = os.path.join(self._tmp.name, "build")
        os.makedirs(os.path.join(self.build, "bin"))
        self.trace = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")

    def tearDown(self):
        self._tmp.cleanup()

    def stand_in(self, failures, rc, stderr=""):
        """A tool printing a replay of arena and vmm with these check_failures, then stderr."""
        doc = {"trace": "t", "format": "trace", "events": 4, "modes": {
            m: {"size_limit": 1 << 20, "events": 4, "checks": 4, "check_failures": n}
            for m, n in zip(("arena", "vmm"), failures)}}
        tool = os.path.join(self.build, "bin", "gpuarena-replay")
        with open(tool, "w") as f:
            f.write(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(doc)}\nEOF\n"
                    f"printf '%s' '{stderr}' >&2\nexit {rc}\n")
        os.chmod(tool, 0o755)

    def replay(self, *args):
        return gatest.cli("replay", self.trace, "--mode", "arena", "--mode", "vmm", "--check",
                          *args, env={"GPUARENA_BUILD": self.build})

    def test_failures_exit_1_after_the_output(self):
        # A tool of this version exits 1 and says so itself; an older one exited 0: both the same.
        tool_line = ("gpuarena: vmm mode: the invariant checker found 3 failures (first after "
                     "event 1: x); this is a bug")
        for rc, err in ((1, tool_line), (0, "")):
            self.stand_in((0, 3), rc, err)
            for args in ((), ("--json",)):
                with self.subTest(rc=rc, args=args):
                    p = self.replay(*args)
                    self.assertEqual(p.returncode, 1, p.stderr)
                    if args:
                        doc = json.loads(p.stdout)
                        self.assertEqual(doc["modes"]["vmm"]["check_failures"], 3)
                    else:
                        self.assertIn("check failures", p.stdout)  # the table, printed whole
                    lines = [ln for ln in p.stderr.splitlines() if "invariant checker" in ln]
                    self.assertEqual(lines, [
                        "gpuarena: vmm mode: the invariant checker found 3 failures; this is a "
                        "bug in gpuarena's allocator: please report it with the trace "
                        f"'{self.trace}' and this command line"])

    def test_tool_exits_1_after_its_output(self):
        """gpuarena-replay's own code path (scripts/replay_main.c), linked with ga_replay wrapped to
        add 2 failures in vmm mode under --check (replay_checkfail): exit 1 after the output, one
        line naming the mode, the count and the first failure; the command with it the same."""
        tool = os.path.join(gatest.BUILD, "test", "replay_checkfail")
        self.assertTrue(os.access(tool, os.X_OK), f"{tool} missing: make test-cmd builds it")
        for args in ((), ("--json",)):
            with self.subTest(args=args):
                p = subprocess.run([tool, "--check", "--mode", "arena", "--mode", "vmm", *args,
                                    self.trace], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, timeout=60, check=False)
                self.assertEqual(p.returncode, 1, p.stderr)
                if args:
                    modes = json.loads(p.stdout)["modes"]
                    self.assertEqual((modes["arena"]["check_failures"],
                                      modes["vmm"]["check_failures"]), (0, 2))
                else:
                    self.assertIn("check_failures", p.stdout)
                self.assertEqual(p.stderr.splitlines(), [
                    "gpuarena: vmm mode: the invariant checker found 2 failures (first after "
                    "event 1: forged by replay_checkfail); this is a bug in gpuarena's allocator: "
                    f"please report it with the trace '{self.trace}' and this command line"])
        p = subprocess.run([tool, "--mode", "vmm", "--json", self.trace], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60, check=False)
        self.assertEqual((p.returncode, p.stderr), (0, ""))  # no --check: none forged
        os.symlink(tool, os.path.join(self.build, "bin", "gpuarena-replay"))
        p = self.replay("--json")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(json.loads(p.stdout)["modes"]["vmm"]["check_failures"], 2)
        self.assertEqual([ln for ln in p.stderr.splitlines() if "invariant checker" in ln], [
            "gpuarena: vmm mode: the invariant checker found 2 failures; this is a bug in "
            f"gpuarena's allocator: please report it with the trace '{self.trace}' and this "
            "command line"])

    def test_report_says_failures_exit_1(self):
        """`report` replays the trace for its reserved curve: a replay whose pool checks failed
        is said as `replay` says it, after the files are written, and the exit is 1 (it was 0
        with nothing said). The stand-in writes the timeline the report asks for."""
        tool = os.path.join(self.build, "bin", "gpuarena-replay")
        doc = {"trace": "t", "format": "trace", "events": 2, "modes": {
            "vmm": {"events": 2, "checks": 2, "check_failures": 2, "peak_reserved": 2097152}}}
        with open(tool, "w") as f:
            f.write("#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --timeline ] && tl=$2; shift; "
                    "done\nprintf 'time_ns,in_use,reserved\\n1000,512,2097152\\n2000,0,2097152\\n' "
                    f"> \"$tl\"\ncat <<'EOF'\n{json.dumps(doc)}\nEOF\nexit 1\n")
        os.chmod(tool, 0o755)
        prefix = os.path.join(self._tmp.name, "out")
        p = gatest.cli("report", self.trace, "--mode", "vmm", "-o", prefix,
                       env={"GPUARENA_BUILD": self.build})
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertTrue(os.path.exists(prefix + ".json"))
        self.assertIn("wrote", p.stdout)
        self.assertEqual([ln for ln in p.stderr.splitlines() if "invariant checker" in ln], [
            "gpuarena: vmm mode: the invariant checker found 2 failures; this is a bug in "
            f"gpuarena's allocator: please report it with the trace '{self.trace}' and this "
            "command line"])
        with open(tool, "w") as f:  # the same with no failure: exit 0, nothing said
            f.write("#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --timeline ] && tl=$2; shift; "
                    "done\nprintf 'time_ns,in_use,reserved\\n1000,512,2097152\\n' > \"$tl\"\n"
                    f"cat <<'EOF'\n{json.dumps(dict(doc, modes={'vmm': dict(doc['modes']['vmm'], check_failures=0)}))}\nEOF\n")
        p = gatest.cli("report", self.trace, "--mode", "vmm", "-o", prefix,
                       env={"GPUARENA_BUILD": self.build})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("invariant checker", p.stderr)

    def test_no_failures_exit_0(self):
        self.stand_in((0, 0), 0)
        p = self.replay("--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("invariant checker", p.stderr)


class Replay(unittest.TestCase, gatest.CliAsserts):
    def test_tool_is_built(self):
        path = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        self.assertTrue(os.access(path, os.X_OK), f"{path} missing: build it (make)")

    def test_lifetimes_all_modes(self):
        src = os.path.join(gatest.TRACES, "lifetimes", "somas_resnet50.csv")
        with open(src) as f:
            next(f)
            rows = [tuple(map(int, ln.split(","))) for ln in f if ln.strip()]
        p = gatest.cli("replay", src, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        modes = doc["modes"]
        self.assertEqual(list(modes), ["arena", "grow", "vmm", "platform"])
        self.assertEqual(doc["peak_live"], rounded_peak(rows))
        for m, r in modes.items():
            self.assertEqual(r["events"], 2 * len(rows), m)
            self.assertEqual(r["allocs"], len(rows), m)
            self.assertEqual(r["failed_allocs"], 0, m)
            self.assertEqual(r["peak_in_use"], rounded_peak(rows), m)
            self.assertIsNone(r["first_oom"], m)
            self.assertEqual(set(r), set(doc["units"]), m)
        self.assertEqual(modes["platform"]["peak_reserved"], rounded_peak(rows))
        self.assertEqual(modes["platform"]["backend_reserves"], len(rows))
        self.assertEqual(modes["arena"]["backend_reserves"], 1)
        self.assertGreaterEqual(modes["arena"]["min_size"], rounded_peak(rows))

    def test_table_from_imported_snapshot(self):
        src = os.path.join(gatest.TRACES, "pytorch-snapshot", "cs336_forward_fp32.pickle")
        p = gatest.cli("replay", src, "--mode", "grow", "--limit", "64GiB")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("imported", p.stdout)
        table = {ln.split("  ")[0]: ln for ln in p.stdout.splitlines()}
        # One row per field of the tool's JSON, titled by its name.
        doc = json.loads(gatest.cli("replay", src, "--mode", "grow", "--limit", "64GiB",
                                    "--json").stdout)
        for field in doc["modes"]["grow"]:
            self.assertIn(field.replace("_", " "), table)
        self.assertIn("818", table["allocs"])  # 681 in the trace, and 137 blocks live before it
        self.assertIn("64.00 GiB", table["size limit"])

    def test_small_arena_reports_oom(self):
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "t.gatrace")
            evs = [tf.event(i, i, 1 << 20, tf.ALLOC) for i in range(8)]
            tf.write(trace, tf.Trace(evs + [tf.event(9, 0, 1 << 20, tf.FREE)]))
            with open(trace, "ab") as f:
                f.write(b"\0" * 17)  # a partial record, as a killed process leaves
            p = gatest.cli("replay", trace, "--mode", "arena", "--arena-size", "4MiB", "--json")
            self.assertEqual(p.returncode, 0, p.stderr)
            doc = json.loads(p.stdout)
            self.assertEqual(doc["truncated_bytes"], 17)
            self.assertEqual(doc["modes"]["arena"]["failed_allocs"], 4)
            self.assertEqual(doc["modes"]["arena"]["first_oom"], 4)
            self.assertEqual(doc["modes"]["arena"]["min_size"], 8 << 20)
            # Said too, as gpuarena-replay's header does (helper-67 F7), as a message on stderr
            # with the prefix (it was a line of stdout without it: an outside check).
            p = gatest.cli("replay", trace, "--mode", "arena", "--arena-size", "4MiB")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f"gpuarena: {trace}: 17 trailing bytes of a partial record ignored",
                          p.stderr)
            self.assertNotIn("trailing bytes", p.stdout)
            # An empty file is named as such, by replay and report alike (helper-67 F6: "cannot
            # tell its format ... name the format").
            empty = os.path.join(d, "empty.gatrace")
            open(empty, "wb").close()
            for sub in (("replay", empty), ("report", empty, "-o", os.path.join(d, "r"))):
                p = gatest.cli(*sub)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(f"gpuarena: {empty} is empty (0 bytes): a trace of a process that "
                              "ended before its first allocation", p.stderr)
                self.assertNotIn("cannot tell its format", p.stderr)

    def test_huge_vmm_check_thinned(self):
        """--check walks every granule of a vmm pool: on a pool of millions of granules (blocks of
        1 TiB, a 20 TiB range) the checks are thinned to a budget of granules an event, the final
        state always checked and `checks` saying how many ran (58 s for a 96 KB trace of such
        blocks before, an outside check of issue 8); an ordinary pool, and the other modes, are
        checked after every event."""
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "tib.csv")
            with open(src, "w") as f:
                f.write("id,lower,upper,size\n")
                f.writelines(f"{i},{i},{i + 10},{1 << 40}\n" for i in range(20))
            modes = {}
            for m in ("vmm", "platform"):
                p = subprocess.run([tool, "--mode", m, "--check", "--json", src],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                self.assertEqual(p.returncode, 0, p.stderr)
                modes.update(json.loads(p.stdout)["modes"])
            self.assertEqual(modes["vmm"]["events"], 40)
            self.assertEqual((modes["vmm"]["checks"], modes["vmm"]["check_failures"]), (1, 0))
            self.assertEqual((modes["platform"]["checks"], modes["platform"]["check_failures"]),
                             (40, 0))
        small = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        p = subprocess.run([tool, "--mode", "vmm", "--check", "--json", small],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        vmm = json.loads(p.stdout)["modes"]["vmm"]
        self.assertEqual((vmm["checks"], vmm["check_failures"]), (vmm["events"], 0))

    def test_huge_blocks_every_mode_smallest_size_check(self):
        """Issue 8: a 96 KB trace of 1,000 blocks of 2^40 bytes (10 live at a time), and the same
        with 512 bytes more, replay in every mode with --check and the smallest size. vmm maps
        524,288 granules a block: the replay's backend maps a run in one call, and vmm's smallest
        size comes from the unlimited run's peak, confirmed by two trials (the odd size took
        115 s, a bisection of ~34 whole replays of 3.4 s; the 60 s bound here is a hang guard,
        the replay takes about a second). The figures are main's before the change."""
        gran = 2 << 20
        with tempfile.TemporaryDirectory() as d:
            for extra, maps, vmm_min in ((0, 1000 * (1 << 19) - 990 * 32, 10 << 40),
                                         (512, 524256126, (10 << 40) + 4 * gran)):
                rows = [(i, i, i + 10, (1 << 40) + extra) for i in range(1000)]
                src = os.path.join(d, f"huge{extra}.csv")
                with open(src, "w") as f:
                    f.write("id,lower,upper,size\n")
                    f.writelines(f"{i},{lo},{up},{size}\n" for i, lo, up, size in rows)
                p = gatest.cli("replay", src, "--check", "--json", timeout=60)
                self.assertEqual(p.returncode, 0, p.stderr)
                modes = json.loads(p.stdout)["modes"]
                peak = rounded_peak(rows)
                for m, r in modes.items():
                    self.assertEqual((r["events"], r["failed_allocs"], r["check_failures"]),
                                     (2000, 0, 0), m)
                    self.assertEqual(r["min_size"], vmm_min if m == "vmm" else peak, m)
                    self.assertEqual(r["checks"], 13 if m == "vmm" else 2000, m)
                vmm = modes["vmm"]
                # The last 990 blocks land where a freed block left its 32 kept granules (the
                # cache's 64 MiB), which stay mapped at the end.
                self.assertEqual((vmm["backend_maps"], vmm["backend_unmaps"]), (maps, maps - 32))
                self.assertEqual((vmm["peak_reserved"], vmm["final_reserved"]), (vmm_min, 64 << 20))

    def test_enormous_sizes(self):
        # A petabyte block: vmm keeps host memory per granule of its range, bounded (about 1 GiB,
        # 128 TiB of address space with 2 MiB granules), so the block is an out-of-memory there at
        # once and its smallest size "none"; the other modes place it (nothing caps them here),
        # and 16 TiB and 1 TiB blocks map in vmm too. Before the bound this replay took a minute
        # and 10 GB of host memory.
        rows = [(0, 0, 20, 4096), (1, 1, 2, 1 << 50), (2, 3, 4, 1 << 44), (3, 5, 6, 1 << 40)]
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "enormous.csv")
            with open(src, "w") as f:
                f.write("id,lower,upper,size\n")
                f.writelines(f"{i},{lo},{up},{size}\n" for i, lo, up, size in rows)
            t0 = time.monotonic()
            p = gatest.cli("replay", src, "--json")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertLess(time.monotonic() - t0, 60)
            modes = json.loads(p.stdout)["modes"]
            for m in ("arena", "grow", "platform"):
                self.assertEqual(modes[m]["failed_allocs"], 0, m)
                self.assertGreaterEqual(modes[m]["min_size"], 1 << 50, m)
            vmm = modes["vmm"]
            self.assertEqual(vmm["failed_allocs"], 1)
            self.assertEqual(vmm["first_oom"], 1)
            self.assertIsNone(vmm["min_size"])
            self.assertEqual(vmm["peak_reserved"], (1 << 44) + (2 << 20))
            table = gatest.cli("replay", src, "--mode", "vmm")
            self.assertEqual(table.returncode, 0, table.stderr)
            row = [ln for ln in table.stdout.splitlines() if ln.startswith("min size")]
            self.assertEqual(row and row[0].split()[-1], "-", table.stdout)
            # A block past the replay's address space (2^62): said, not a silent peak_live of 0
            # and failures that read as a real out-of-memory.
            with open(src, "w") as f:
                f.write(f"id,lower,upper,size\n0,0,2,{1 << 62}\n")
            p = gatest.cli("replay", src, "--json", "--no-min")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f"the block of {1 << 62} bytes at event 0 is more than the replay's "
                          "address space can place", p.stderr)
            self.assertEqual(json.loads(p.stdout)["peak_live"], 0)

    def test_blocks_no_mode_places_are_said(self):
        """helper-40 F3: a block of 2^64-511..2^64-1 bytes (a size of -1 written unsigned) was
        counted as "invalid" with no word, and left out of peak_live; and the line said of 2^60
        blocks claimed every mode failed while grow and platform served 3 of 17. Each such block
        is a failed allocation now, said, with the platform count, and no size runs the trace."""
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "max.csv")
            for size in ((1 << 64) - 1, (1 << 64) - 511):
                with open(src, "w") as f:
                    f.write(f"id,lower,upper,size\n0,0,10,{size}\n1,1,10,1\n")
                p = gatest.cli("replay", src, "--json")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(f"the block of {size} bytes at event 0 (over 2^63: a negative size "
                              "written unsigned?) is more than the replay's address space can "
                              "place", p.stderr)
                self.assertIn("(1 in platform mode)", p.stderr)
                doc = json.loads(p.stdout)
                self.assertEqual(doc["peak_live"], 0)
                for m, r in doc["modes"].items():
                    self.assertEqual((r["invalid_allocs"], r["failed_allocs"], r["first_oom"],
                                      r["min_size"], r["allocs"]), (0, 1, 0, None, 1), m)
            with open(src, "w") as f:
                f.write("id,lower,upper,size\n")
                f.writelines(f"{i},0,10,{1 << 60}\n" for i in range(17))
            p = gatest.cli("replay", src, "--json", "--no-min", "--mode", "platform")
            self.assertEqual(p.returncode, 0, p.stderr)
            served = json.loads(p.stdout)["modes"]["platform"]["allocs"]
            self.assertGreater(served, 0)
            self.assertIn(f"({17 - served} in platform mode)", p.stderr)
            self.assertNotIn("every mode", p.stderr)

    def test_tool_timeline(self):
        """gpuarena-replay --timeline: one CSV line per event, in use from the sizes alone, and
        its maxima are the JSON peaks; it refuses several modes and an unwritable path."""
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        with open(src) as f:
            next(f)
            rows = [tuple(map(int, ln.split(","))) for ln in f if ln.strip()]
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        with tempfile.TemporaryDirectory() as tmp:
            csv = os.path.join(tmp, "tl.csv")
            for mode in ("arena", "grow", "vmm", "platform"):
                p = subprocess.run([tool, "--mode", mode, "--json", "--timeline", csv, src],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   check=False)
                self.assertEqual(p.returncode, 0, p.stderr)
                doc = json.loads(p.stdout)
                with open(csv) as f:
                    self.assertEqual(f.readline(), "time_ns,in_use,reserved\n")
                    pts = [tuple(map(int, ln.split(","))) for ln in f]
                self.assertEqual(len(pts), 2 * len(rows))
                self.assertEqual(max(u for _, u, _ in pts), rounded_peak(rows))
                res = doc["modes"][mode]
                self.assertEqual(max(r for _, _, r in pts), res["peak_reserved"])
                self.assertEqual(pts[-1][1:], (0, res["final_reserved"]))
            bad = os.path.join(tmp, "no", "x.csv")
            for args, code, msg in ((["--timeline", csv, src], 2, "exactly one --mode"),
                                    (["--mode", "grow", "--timeline", bad, src], 1,
                                     "cannot write"),
                                    (["--mode", "grow", "--timeline"], 2, "missing value")):
                p = subprocess.run([tool] + args, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, check=False)
                self.assertEqual(p.returncode, code, p.stderr)
                self.assertTrue(p.stderr.startswith("gpuarena:"), p.stderr)
                self.assertIn(msg, p.stderr)

    def test_tool_timeline_never_over_input(self):
        """helper-60 F1: --timeline naming the input (the same path, a hard link or a symlink to
        it) truncated the trace it replays and exited 0; it is refused (exit 2) and the input is
        left whole. A timeline is written through a temporary renamed into place: a symlink
        stays a link to the replaced file, a failed replay leaves an old file alone."""
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        with tempfile.TemporaryDirectory() as tmp:
            with open(src, "rb") as f:
                data = f.read()
            inp = os.path.join(tmp, "in.csv")
            with open(inp, "wb") as f:
                f.write(data)
            os.link(inp, os.path.join(tmp, "hard.csv"))
            os.symlink("in.csv", os.path.join(tmp, "sym.csv"))
            for out in ("in.csv", "./in.csv", "hard.csv", "sym.csv"):
                p = subprocess.run([tool, "--mode", "arena", "--timeline", out, "in.csv"], cwd=tmp,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   check=False)
                self.assertEqual(p.returncode, 2, out)
                self.assertIn("is the input file", p.stderr)
                with open(inp, "rb") as f:
                    self.assertEqual(f.read(), data, out)
            other = os.path.join(tmp, "old.csv")
            with open(other, "w") as f:
                f.write("old\n")
            os.chmod(other, 0o640)
            os.symlink("old.csv", os.path.join(tmp, "tl.csv"))
            p = subprocess.run([tool, "--mode", "grow", "--timeline", "tl.csv", "in.csv"], cwd=tmp,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               check=False)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(os.path.islink(os.path.join(tmp, "tl.csv")))
            with open(other) as f:
                self.assertEqual(f.readline(), "time_ns,in_use,reserved\n")
            self.assertEqual(os.stat(other).st_mode & 0o777, 0o640)
            self.assertEqual(sorted(os.listdir(tmp)),
                             ["hard.csv", "in.csv", "old.csv", "sym.csv", "tl.csv"])

    def test_one_list_of_modes(self):
        """The command's modes are the C list (GA_MODE_LIST), same names, same order; `all`
        means all of them and names are case-insensitive everywhere a user types one."""
        from gpuarena_cli import modes
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        p = subprocess.run([tool, "--list-modes"], stdout=subprocess.PIPE, text=True, check=True)
        self.assertEqual(tuple(p.stdout.split()), modes.MODES)
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        p = gatest.cli("replay", src, "--json", "--no-min", "--mode", " Platform,GROW ")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(list(json.loads(p.stdout)["modes"]), ["grow", "platform"])
        p = subprocess.run([tool, "--mode", "VMM", "--mode", " All", "--json", src],
                           stdout=subprocess.PIPE, text=True, check=True)
        self.assertEqual(tuple(json.loads(p.stdout)["modes"]), modes.MODES)
        # The tool takes the command's comma-separated list too, blank parts skipped (it refused
        # "arena,vmm", which the command takes: an outside check, 2026-12-06).
        p = subprocess.run([tool, "--mode", " Platform,,GROW ", "--json", src],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(list(json.loads(p.stdout)["modes"]), ["grow", "platform"])
        # --format likewise, any case with blanks around (it took the exact word only)
        p = subprocess.run([tool, "--format", " Lifetimes ", "--mode", "grow", "--json", src],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["format"], "lifetimes")
        for bad in (",", "arena,fast"):
            p = subprocess.run([tool, "--mode", bad, src], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, check=False)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(f"--mode takes arena, grow, vmm or platform, or all, not: {bad}",
                          p.stderr)
        p = gatest.cli("replay", src, "--mode", "arena-nopre")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown mode 'arena-nopre' (use arena, grow, vmm, platform or all)",
                      p.stderr)

    def test_tool_misspelt_option_named(self):
        """The replay tool names the option a misspelt one most likely means, by the rule of the
        shim's settings and the command's options (it said "unknown option" alone)."""
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        for typed, want in (("--limt", "--limit"), ("--mdoe", "--mode"),
                            ("--list-mode", "--list-modes"), ("--foo", None)):
            p = subprocess.run([tool, typed, "x"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, check=False)
            self.assertEqual(p.returncode, 2, typed)
            self.assertEqual(p.stderr, f"gpuarena: unknown option: {typed}"
                             + (f" (did you mean {want}?)" if want else "")
                             + " (see gpuarena-replay --help)\n")

    def test_tool_size_split_by_the_shell(self):
        """gpuarena-replay --limit 8 GiB FILE says the shell split the size, as the command does
        (it took GiB for the FILE: "more than one FILE given"); after --, GiB is a FILE."""
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        for args in (("--limit", "8", "GiB", "x.csv"), ("x.csv", "--arena-size", "1.5", "g"),
                     ("--mode", "vmm", "--vmm-keep", "0", "MiB", "x.csv")):
            i = [a.startswith("--") and a != "--mode" for a in args].index(True)
            opt, num, unit = args[i:i + 3]
            p = subprocess.run([tool, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, check=False)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(p.stderr, f"gpuarena: {opt} {num} {unit}: the shell splits a size "
                             f"written with a space in two; write it without the space "
                             f"({num}{unit}) or quote it ('{num} {unit}') (see gpuarena-replay "
                             "--help)\n")
        p = subprocess.run([tool, "--limit", "8", "--", "GiB"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, check=False)
        self.assertIn("cannot open GiB", p.stderr)

    def test_tool_version(self):
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        p = subprocess.run([tool, "--version"], stdout=subprocess.PIPE, text=True, check=True)
        with open(os.path.join(gatest.REPO, "VERSION")) as f:
            self.assertEqual(p.stdout, f"gpuarena-replay {f.read().strip()}\n")

    def test_vmm_keep(self):
        """--vmm-keep is GPUARENA_VMM_KEEP for the replay: the figures of gpuarena-replay's own
        --vmm-keep at the same bytes (any spelling of zero), the tool's default without it, and
        fewer maps the more is kept; refused outside vmm mode and when not a size."""
        src = os.path.join(gatest.TRACES, "lifetimes", "somas_resnet50.csv")
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")

        def figures(doc):
            r = doc["modes"]["vmm"]
            return {k: v for k, v in r.items() if doc["units"].get(k) not in ("ns", "rate")}

        maps = []
        for keep, spelled in ((None, None), ("0", "0B"), ("0", "0MiB"), ("67108864", "64MiB"),
                              ("1073741824", "1GiB")):
            extra = ("--vmm-keep", spelled) if spelled else ()
            p = gatest.cli("replay", src, "--json", "--no-min", "--mode", "vmm", *extra)
            self.assertEqual(p.returncode, 0, p.stderr)
            direct = subprocess.run([tool, "--json", "--mode", "vmm", src]
                                    + (["--vmm-keep", keep] if keep else []),
                                    stdout=subprocess.PIPE, check=True)
            self.assertEqual(figures(json.loads(p.stdout)), figures(json.loads(direct.stdout)),
                             spelled)
            maps.append(figures(json.loads(p.stdout))["backend_maps"])
        self.assertEqual(maps[0], maps[3])  # the default is 64 MiB
        self.assertEqual(maps[1], maps[2])
        self.assertGreater(maps[1], maps[3])
        self.assertGreater(maps[3], maps[4])
        p = gatest.cli("replay", src, "--mode", "arena,grow", "--vmm-keep", "0")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--vmm-keep applies to vmm mode only: add vmm to --mode", p.stderr)
        for bad, why in (("lots", "'lots' is not a size"), ("-1", "signs are not accepted"),
                         ("0.5", "rounds down to 0 bytes; write 0 for none")):
            p = gatest.cli("replay", src, "--mode", "vmm", "--vmm-keep", bad)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(why, p.stderr)
            self.assertNotIn("Traceback", p.stderr)

    def test_vmm_small_trace_maps_its_granule_bound(self):
        """A trace whose live peak is under a granule maps one granule in vmm mode: the replay's
        range is at least 64 granules (it was twice the live peak, one granule, and minimalloc_K
        outgrew it into a second range: two granules, 4.00x its peak)."""
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        for name in ("minimalloc_K.csv", "minimalloc_A.csv"):
            src = os.path.join(gatest.TRACES, "lifetimes", name)
            for gran, bound in (("2MiB", 2 << 20), ("64KiB", None)):
                p = subprocess.run([tool, "--json", "--mode", "vmm", "--granularity", gran, src],
                                   stdout=subprocess.PIPE, text=True, check=True)
                doc = json.loads(p.stdout)
                r = doc["modes"]["vmm"]
                self.assertEqual(r["failed_allocs"], 0, name)
                g = 2 << 20 if bound else 64 << 10
                least = -(-doc["peak_live"] // g) * g  # no placement maps less
                if bound:
                    self.assertEqual(r["peak_reserved"], bound, (name, gran))
                    self.assertEqual(r["backend_maps"], 1, (name, gran))
                self.assertGreaterEqual(r["peak_reserved"], least, (name, gran))
                self.assertLessEqual(r["peak_reserved"], 2 * least, (name, gran))

    def test_format_trace_of_another_format(self):
        """--format trace naming a CSV: replay and report say to leave --format out, not to
        convert the file with gpuarena import, which they do themselves (helper-67 F17.6)."""
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        with tempfile.TemporaryDirectory() as d:
            for sub in (("replay", src), ("report", src, "-o", os.path.join(d, "r"))):
                p = gatest.cli(*sub, "--format", "trace")
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(f"gpuarena: {src}: --format trace, but it is not a gpuarena trace; "
                              "leave --format out", p.stderr)
                self.assertNotIn("gpuarena import", p.stderr)

    def test_options_of_modes_not_replayed(self):
        """An option of a mode not among those replayed is a usage error, in the command and in
        the tool, not ignored: --arena-size without arena, --limit with arena only, --vmm-keep
        and --granularity without vmm. With their mode among others they are taken."""
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        for opts, modes, why in (
                (("--arena-size", "1GiB"), ("grow", "vmm", "platform"),
                 "--arena-size applies to arena mode only"),
                (("--limit", "1GiB"), ("arena",), "--limit applies to grow, vmm and platform"),
                (("--vmm-keep", "0"), ("arena", "grow", "platform"),
                 "--vmm-keep applies to vmm mode only"),
                (("--granularity", "4MiB"), ("arena", "platform"),
                 "--granularity applies to vmm mode only")):
            argv = [tool, "--json", *opts, src]
            for m in modes:
                argv[1:1] = ["--mode", m]
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(p.returncode, 2, (opts, p.stderr))
            self.assertIn(why, p.stderr)
            self.assertEqual(p.stdout, "")
            if opts[0] != "--granularity":  # the command has no --granularity
                p = gatest.cli("replay", src, "--no-min", "--mode", ",".join(modes), *opts)
                self.assertEqual(p.returncode, 2, (opts, p.stderr))
                self.assertIn(why, p.stderr)
        # Among other modes the option is taken, and changes that mode's figures only.
        p = gatest.cli("replay", src, "--json", "--no-min", "--mode", "arena,grow",
                       "--limit", "1MiB")
        self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run([tool, "--json", "--mode", "arena", "--mode", "vmm", "--granularity",
                            "4MiB", src], stdout=subprocess.PIPE, text=True, check=True)
        self.assertEqual(list(json.loads(p.stdout)["modes"]), ["arena", "vmm"])

    def test_level_and_time_unit_need_their_format(self):
        """--level segment reads a PyTorch snapshot's segments and --time-unit an RMM log's
        times; given for another format they would be ignored, so they are usage errors. The
        defaults (tensor, s) pass for any format."""
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        with tempfile.TemporaryDirectory() as d:
            trace = os.path.join(d, "a.gatrace")
            p = gatest.cli("import", "lifetimes", src, "-o", trace)
            self.assertEqual(p.returncode, 0, p.stderr)
            for args in (("replay", src, "--level", "segment"),
                         ("replay", trace, "--level", "segment"),
                         ("report", src, "--level", "segment", "-o", os.path.join(d, "r")),
                         ("import", "lifetimes", src, "-o", os.path.join(d, "b"), "--level",
                          "segment")):
                p = gatest.cli(*args)
                self.assertEqual(p.returncode, 2, (args, p.stderr))
                self.assertIn("--level segment applies to PyTorch snapshots only", p.stderr)
            p = gatest.cli("import", "lifetimes", src, "-o", os.path.join(d, "c"),
                           "--time-unit", "ms")
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("--time-unit ms applies to RMM logs only", p.stderr)
            self.assertEqual(sorted(os.listdir(d)), ["a.gatrace"])  # nothing written
            p = gatest.cli("replay", src, "--no-min", "--level", "tensor", "--mode", "arena")
            self.assertEqual(p.returncode, 0, p.stderr)

    def test_outputs_and_names(self):
        """import -o names a file ('-' made a file named '-', a folder gave a wrong reason, ''
        exit 1): usage errors; the tool's --timeline the same; replay --json names the user's
        file and its format, not the deleted imported temporary."""
        src = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")
        tool = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
        with tempfile.TemporaryDirectory() as d:
            for out, why in (("-", "-o -: a trace is binary"), (d + "/", "is a folder: name a "
                             "file in it"), (d, "is a folder"), ("", "-o is empty")):
                p = gatest.cli("import", "lifetimes", src, "-o", out, cwd=d)
                self.assertEqual(p.returncode, 2, (out, p.stderr))
                self.assertIn(why, p.stderr)
            for bad in ("-", ""):
                p = subprocess.run([tool, "--mode", "arena", "--timeline", bad, src], cwd=d,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("--timeline takes a file path", p.stderr)
            self.assertEqual(os.listdir(d), [])
        p = gatest.cli("replay", src, "--json", "--no-min", "--mode", "arena")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual((doc["trace"], doc["format"]), (src, "lifetimes"))

    def test_errors(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.gatrace")
            with open(bad, "wb") as f:
                f.write(b"GATRACE\0\x07\0\0\0" + bytes(20))
            self.assertCleanError(gatest.cli("replay", bad), "bad.gatrace", "version 7",
                                  "replay it with the newer gpuarena that wrote it")
            for sub in ("report", "import"):  # the Python reader says the same
                args = (sub, bad) if sub == "report" else (sub, "auto", bad, "-o",
                                                           os.path.join(d, "o"))
                self.assertCleanError(gatest.cli(*args), "trace format version 7, this gpuarena "
                                      "reads version 1: replay it with the newer gpuarena")
            with open(bad, "r+b") as f:
                f.seek(8)
                f.write(b"\0")
            self.assertCleanError(gatest.cli("replay", bad), "version 0",
                                  "re-record it with this gpuarena")
            self.assertCleanError(gatest.cli("replay", os.path.join(d, "none")), "none")
            p = gatest.cli("replay", bad, "--arena-size", "lots")
            self.assertEqual(p.returncode, 2)
            self.assertIn("'lots' is not a size", p.stderr)
            self.assertIn("try 8GiB", p.stderr)


if __name__ == "__main__":
    unittest.main()
