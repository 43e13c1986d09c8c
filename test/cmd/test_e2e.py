"""`gpuarena run` and `compare` end to end: the real shim, the simulated driver and the example
programs, built by the tier rule. Nothing here skips: a missing piece is a failure. What reached
the driver is read from the simulated driver's own counters (SIMCUDA_REPORT), an observer that
does not trust the shim's statistics."""

import json
import os
import tempfile
import unittest

import gatest

SHIM = os.path.join(gatest.BUILD, "lib", "libgpuarena.so")
SIM = os.path.join(gatest.BUILD, "sim", "libcuda.so.1")
EX = os.path.join(gatest.BUILD, "examples")
# ex_direct BLOCKS MAX_KIB ROUNDS: BLOCKS*ROUNDS allocations of up to MAX_KIB each.
DIRECT = [os.path.join(EX, "ex_direct"), "40", "256", "2"]


def cli(*args, env=None):
    """The command with the sanitizer runtime preloaded when the build needs it."""
    return gatest.cli(*args, env=dict(gatest.SAN_ENV, **(env or {})))


def option(stats, key):
    """An option from the statistics: format 2 keeps them in "options", format 1 at the top."""
    return (stats["options"] if stats["gpuarena_stats"] >= 2 else stats)[key]


class EndToEnd(unittest.TestCase, gatest.CliAsserts):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        for path in (SHIM, SIM, DIRECT[0]):
            self.assertTrue(os.path.isfile(path), f"{path} is not built (run make)")

    def tearDown(self):
        self.tmp.cleanup()

    def run_observed(self, *args, cmd=DIRECT):
        """(process, shim stats, simulated driver counters) of `gpuarena run --sim ARGS`."""
        stats, report = os.path.join(self.dir, "stats.json"), os.path.join(self.dir, "sim.json")
        for p in (stats, report):
            if os.path.exists(p):
                os.unlink(p)
        p = cli("run", "--sim", "--stats", stats, *args, "--", *cmd,
                env={"SIMCUDA_REPORT": report})
        with open(stats) as f:
            s = json.load(f)
        with open(report) as f:
            sim = json.load(f)["counters"]
        return p, s, sim

    def test_arena_mode_preallocates(self):
        p, s, sim = self.run_observed("--mode", "arena")
        self.assertEqual(p.returncode, 0, p.stderr)
        t = s["totals"]
        self.assertIn(s["gpuarena_stats"], (1, 2))
        self.assertEqual((s["mode"], option(s, "preallocate")), ("arena", True))
        self.assertEqual(t["alloc_calls"], 80)
        self.assertEqual(t["failed_allocs"], 0)
        self.assertEqual(t["driver_alloc_calls"], sim["alloc_calls"])
        self.assertLessEqual(sim["alloc_calls"], 2)
        self.assertGreater(t["peak_reserved"], t["peak_in_use"])

    def test_platform_mode_passes_through(self):
        p, s, sim = self.run_observed("--mode", "platform")
        self.assertEqual(p.returncode, 0, p.stderr)
        t = s["totals"]
        self.assertEqual(s["mode"], "platform")
        self.assertEqual(t["alloc_calls"], 80)
        self.assertEqual(sim["alloc_calls"], 80)
        self.assertEqual(t["driver_alloc_calls"], 80)
        self.assertEqual(sim["free_calls"], t["driver_free_calls"])

    def test_limit_makes_program_fail_and_exit_code_passes(self):
        # 40 blocks (about 1.1 MiB in all, live together) cannot fit under a 512 KiB cap.
        big = [DIRECT[0], "40", "1024", "1"]
        p, s, _ = self.run_observed("--limit", "0.5 mib", "--mode", "grow", cmd=big)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertGreater(s["totals"]["failed_allocs"], 0)
        self.assertEqual(option(s, "limit"), 512 << 10)
        self.assertEqual(option(s, "preallocate"), False)
        self.assertIn("CUDA_ERROR_OUT_OF_MEMORY", p.stderr)

    def test_vmm_keep_reaches_the_shim(self):
        """run --vmm-keep is the shim's GPUARENA_VMM_KEEP (its statistics say what it took; with
        0 the driver sees every freed granule unmapped by the end); a usage error outside vmm."""
        for keep, want in (("0B", 0), ("1GiB", 1 << 30), (None, 64 << 20)):
            with self.subTest(keep=keep):
                extra = ("--vmm-keep", keep) if keep else ()
                p, s, sim = self.run_observed("--mode", "vmm", *extra)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(option(s, "vmm_keep"), want)
                self.assertEqual(s["totals"]["alloc_calls"], 80)
        for args, fix in ((("run", "--mode", "arena"), "use --mode vmm"),
                          (("compare", "--modes", "arena,grow"), "add vmm to --modes")):
            p = cli(*args, "--sim", "--vmm-keep", "0", "--", *DIRECT)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(f"--vmm-keep applies to vmm mode only: {fix}", p.stderr)
        p = cli("run", "--sim", "--mode", "vmm", "--vmm-keep", "0.5", "--", *DIRECT)
        self.assertEqual(p.returncode, 2)
        self.assertIn("'0.5' is not a size: it rounds down to 0 bytes", p.stderr)
        p = cli("compare", "--sim", "--modes", "arena,vmm", "--vmm-keep", "0", "--json", "--",
                *DIRECT)
        self.assertEqual(p.returncode, 0, p.stderr)
        # --vmm-keep goes to the vmm runs alone: given to every run, the arena column said
        # "GPUARENA_VMM_KEEP applies to vmm mode only ... unset it" (an outside check)
        doc = json.loads(p.stdout)
        self.assertEqual(option(doc["vmm"]["stats"], "vmm_keep"), 0)
        self.assertEqual(doc["arena"]["shim_said"], [])

    def test_every_interposition_path_under_run(self):
        for name in ("ex_dlsym", "ex_getproc"):
            with self.subTest(example=name):
                p, s, sim = self.run_observed("--mode", "platform",
                                              cmd=[os.path.join(EX, name)])
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertGreater(s["totals"]["alloc_calls"], 0)
                self.assertEqual(s["totals"]["driver_alloc_calls"], sim["alloc_calls"])

    def test_recorded_trace_replays(self):
        trace = os.path.join(self.dir, "rec.gatrace")
        p, s, _ = self.run_observed("--trace", trace)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = cli("replay", trace, "--json", "--mode", "grow")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)["modes"]["grow"]
        t = s["totals"]
        self.assertEqual(doc["allocs"], t["alloc_calls"])
        self.assertEqual(doc["frees"], t["free_calls"])
        self.assertEqual(doc["events"], t["alloc_calls"] + t["free_calls"])
        self.assertEqual(doc["peak_in_use"], t["peak_in_use"])
        rep = os.path.join(self.dir, "rep")
        p = cli("report", trace, "-o", rep)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(rep + ".json") as f:
            counters = [e for e in json.load(f)["traceEvents"]
                        if e["ph"] == "C" and e["name"] == "in_use"]
        # The report draws bytes as requested; the shim and the replay also know them rounded.
        self.assertEqual(max(e["args"]["in_use"] for e in counters), doc["peak_requested"])
        self.assertLessEqual(doc["peak_requested"], t["peak_in_use"])

    def test_run_prints_summary(self):
        p = cli("run", "--sim", "--", *DIRECT)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gpuarena: mode arena", p.stderr)
        self.assertIn("80 allocs, 0 failed", p.stderr)

    def test_tmpdir_with_percent_p(self):
        """The shim reads %p anywhere in GPUARENA_STATS as the pid, and the command's private
        folder is under TMPDIR: a TMPDIR holding %p lost every run's statistics ("the program
        wrote no statistics", exit 0) and every compare column. The folder goes elsewhere then."""
        tmpdir = os.path.join(self.dir, "job%p dir")
        os.mkdir(tmpdir)
        env = {"TMPDIR": tmpdir}
        p = cli("run", "--sim", "--", *DIRECT, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("80 allocs, 0 failed", p.stderr)
        p = cli("compare", "--sim", "--json", "--modes", "platform", "--", *DIRECT, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["platform"]["stats"]["totals"]["allocs"], 80)
        self.assertEqual(os.listdir(tmpdir), [])

    def test_compare_three_modes(self):
        p = cli("compare", "--sim", "--json", "--repeat", "2", "--modes", "arena,grow,platform",
                "--", *DIRECT)
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual(list(doc), ["arena", "grow", "platform"])
        calls = {m: r["stats"]["totals"]["driver_alloc_calls"] for m, r in doc.items()}
        self.assertLessEqual(calls["arena"], calls["grow"])
        self.assertLess(calls["grow"], calls["platform"])
        self.assertEqual(calls["platform"], 80)
        for m, r in doc.items():
            self.assertEqual(r["exit"], 0, m)
            self.assertEqual(r["stats"]["totals"]["alloc_calls"], 80, m)
        self.assertEqual(option(doc["grow"]["stats"], "preallocate"), False)

    def test_compare_every_mode_by_default(self):
        # All four modes, the shim's statistics as rows. Needs GPUARENA_MODE=vmm in the shim.
        p = cli("compare", "--sim", "--", *DIRECT)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["figure", "arena", "grow", "vmm", "platform"])
        self.assertIn("driver alloc calls", p.stdout)
        self.assertEqual(lines[-1].split(), ["exit", "code", "0", "0", "0", "0"])

    def test_compare_counts_true_oom(self):
        # Under a 512 KiB cap the 40 live blocks cannot fit in any mode: true out-of-memory,
        # counted on its own table row, with the program's exit code kept; the program failed
        # in every mode, so the command fails too, and the shim's explanation is shown.
        big = [DIRECT[0], "40", "1024", "1"]
        p = cli("compare", "--sim", "--limit", "512KiB", "--modes", "grow,platform",
                "--", *big)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("gpuarena: mode grow: the shim said:\n  gpuarena: out of memory: cuMemAlloc "
                      "of 192 KiB failed", p.stderr)
        self.assertIn("gpuarena: mode platform: the program exited 1; its last output:\n"
                      "ex_direct: cuMemAlloc", p.stderr)
        row = [l for l in p.stdout.splitlines() if l.startswith("true oom failures")]
        self.assertEqual(len(row), 1, p.stdout)
        self.assertEqual(row[0].split()[-2:], ["1", "1"])
        code = [l for l in p.stdout.splitlines() if l.startswith("exit code")]
        self.assertEqual(code[0].split()[-2:], ["1", "1"])

    def test_several_cuda_processes_summed(self):
        """helper-60 F3: a program that starts several CUDA processes (a shell script, a launcher)
        was reported as the last one to exit: every process writes its own statistics, and run's
        summary, --stats F and compare's columns sum them (one after the other, and at once)."""
        a, b = " ".join(DIRECT), " ".join(DIRECT[:1] + ["10", "256", "1"])  # 80 and 10 allocs
        for how, script in (("one after the other", f"{a}; {b}"), ("at once", f"{a} & {b}; wait")):
            p = cli("run", "--sim", "--", "sh", "-c", script)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("gpuarena: 2 processes wrote statistics", p.stderr, how)
            self.assertIn("gpuarena: 90 allocs, 0 failed", p.stderr, how)
            self.assertIn(": 80 allocs, 0 failed", p.stderr, how)
            self.assertIn(": 10 allocs, 0 failed", p.stderr, how)
            stats = os.path.join(self.dir, "s.json")
            p = cli("run", "--sim", "--stats", stats, "--", "sh", "-c", script)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(stats) as f:
                doc = json.load(f)
            self.assertEqual(doc["totals"]["alloc_calls"], 90, how)
            procs = doc["processes"]
            self.assertEqual(sorted(d["totals"]["alloc_calls"] for d in procs), [10, 80], how)
            self.assertEqual(len({d["pid"] for d in procs}), 2, how)
            self.assertEqual(doc["totals"]["peak_in_use"],
                             sum(d["totals"]["peak_in_use"] for d in procs))
            # every key explained, the ones of the last process said so (helper-81 F6)
            about = doc["about_keys"]["document"]
            self.assertEqual(set(doc) - set(about), set(), how)
            self.assertIn("in the order they exited", about["processes"])
            self.assertIn("summed", about["totals"])
            for key in ("pid", "by_api", "devices"):
                self.assertIn("the last process to exit's", about[key], key)
        p = cli("compare", "--sim", "--json", "--modes", "grow,platform", "--", "sh", "-c",
                f"{a}; {b}")
        self.assertEqual(p.returncode, 0, p.stderr)
        for m, r in json.loads(p.stdout).items():
            self.assertEqual((r["processes"], r["stats"]["totals"]["alloc_calls"]), (2, 90), m)
        p = cli("compare", "--sim", "--modes", "platform", "--", "sh", "-c", f"{a}; {b}")
        self.assertIn("\nprocesses ", p.stdout)
        self.assertIn("several CUDA processes (platform 2)", p.stderr)
        # a trace path without %p kept one process's events: said
        p = cli("run", "--sim", "--trace", os.path.join(self.dir, "t.gatrace"), "--", "sh", "-c",
                f"{a}; {b}")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("it holds one process's events (a process that started while another "
                      "wrote it ran untraced, one that started after replaced it)", p.stderr)
        # one process: --stats F is the shim's own file, no "processes"
        stats = os.path.join(self.dir, "one.json")
        p = cli("run", "--sim", "--stats", stats, "--", *DIRECT)
        with open(stats) as f:
            doc = json.load(f)
        self.assertNotIn("processes", doc)
        self.assertEqual(doc["totals"]["alloc_calls"], 80)


if __name__ == "__main__":
    unittest.main()
