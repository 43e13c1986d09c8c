"""Limits that leave a replay nothing, and the shim's default arena (`--fraction 0.75+`) replayed,
through gpuarena-replay and `gpuarena replay`.

An outside check (2026-12-07) found `--mode vmm --limit 1MiB` refusing every allocation without a
word (vmm maps whole granules of 2 MiB), and a --limit under one block of 512 bytes failing every
allocation in every mode without a word, where the shim refuses GPUARENA_LIMIT under 512."""

import json
import os
import subprocess
import tempfile
import unittest

import gatest

TOOL = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
SRC = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")


def tool(*args):
    return subprocess.run([TOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=300, check=False)


class TinyLimits(unittest.TestCase):
    def test_vmm_limit_under_a_granule_said(self):
        p = tool("--mode", "vmm", "--json", "--limit", "1MiB", SRC)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gpuarena: vmm mode: --limit 1048576 is under one granule (2097152 bytes: "
                      "2 MiB, current GPUs' granule): vmm maps whole granules, so every "
                      "allocation is refused; give a --limit of at least 2097152", p.stderr)
        vmm = json.loads(p.stdout)["modes"]["vmm"]
        self.assertEqual((vmm["allocs"], vmm["failed_allocs"]), (0, 154))  # the figures stand
        # through the command too, --json or not
        p = gatest.cli("replay", SRC, "--mode", "vmm", "--limit", "1MiB", "--no-min", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gpuarena: vmm mode: --limit 1048576 is under one granule", p.stderr)
        # a fixed share of the cap under a granule is said the same way
        p = tool("--mode", "vmm", "--json", "--fraction", "0.25", "--limit", "4MiB", SRC)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gpuarena: vmm mode: --fraction 0.25 of --limit 4194304 is 1048576 bytes, "
                      "under one granule (2097152 bytes)", p.stderr)
        self.assertEqual(json.loads(p.stdout)["modes"]["vmm"]["allocs"], 0)
        # a granule or more, a smaller granule, or vmm not replayed: nothing said
        for args in (("--mode", "vmm", "--limit", "2MiB"),
                     ("--mode", "vmm", "--limit", "1MiB", "--granularity", "512KiB"),
                     ("--mode", "grow,platform", "--limit", "1MiB"),
                     ("--mode", "vmm", "--fraction", "0.5", "--limit", "4MiB")):
            with self.subTest(args=args):
                p = tool(*args, "--json", SRC)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertNotIn("granule", p.stderr)

    def test_limit_under_a_block_said(self):
        # A cap no block fits under is modelled (every allocation fails: README, Choices), as
        # before, and now said, where the shim refuses GPUARENA_LIMIT under 512 at cuInit.
        why = ("gpuarena: --limit 511 is under one block of 512 bytes: every allocation is "
               "refused in every mode given it (the shim refuses GPUARENA_LIMIT under 512 at "
               "cuInit); give a --limit of at least 512")
        for mode in ("grow", "vmm", "platform", "all"):
            with self.subTest(mode=mode):
                p = tool("--mode", mode, "--limit", "511", "--json", SRC)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stderr.count("gpuarena:"), 1, p.stderr)  # not vmm's too
                self.assertIn(why, p.stderr)
                for m, r in json.loads(p.stdout)["modes"].items():
                    if m != "arena":
                        self.assertEqual(r["allocs"], 0, m)
                p = gatest.cli("replay", SRC, "--mode", mode, "--limit", "511", "--no-min")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(why, p.stderr)
        # one block is a cap: platform serves what fits in it, as under GPUARENA_LIMIT=512
        p = tool("--mode", "platform", "--limit", "512", "--json", SRC)
        self.assertEqual((p.returncode, p.stderr), (0, ""))


SHIM = os.path.join(gatest.BUILD, "lib", "libgpuarena.so")
PLAY = os.path.join(gatest.BUILD, "test", "traceplay")
DEVICE = 64 << 30  # the simulated device's memory below: the cap of a run without GPUARENA_LIMIT


def play(trace, limit=None, mode="arena", fraction=None):
    """The trace through cuMemAlloc/cuMemFree under the shim on the simulated driver (traceplay):
    {failed, first_failed, peak_bytes (the driver's: the arena's regions), peak_vmm_mapped, ...}."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUARENA_", "SIMCUDA_")) and k != "LD_PRELOAD"}
    env.update(gatest.SAN_ENV)
    env.update({"LD_LIBRARY_PATH": os.path.join(gatest.BUILD, "sim"),
                "LD_PRELOAD": " ".join(filter(None, [gatest.SAN_RUNTIME, SHIM])),
                "GPUARENA_MODE": mode, "GPUARENA_FREE_SYNC": "none",  # frees at once, as replayed
                "SIMCUDA_TOTAL_MEM": str(DEVICE)})
    if limit:
        env["GPUARENA_LIMIT"] = str(limit)
    if fraction:
        env["GPUARENA_MEM_FRACTION"] = fraction
    p = subprocess.run([PLAY, trace], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


class DefaultArena(unittest.TestCase):
    """`--fraction F` replays the shim's GPUARENA_MEM_FRACTION of a cap given by --limit: the
    shim's default, an arena of 0.75 of the cap preallocated and then growing up to the cap
    (0.75+), could not be replayed at all (arena mode was one fixed region, grow had no
    preallocation: an outside check, 2026-12-07)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.traces = {}
        for sub, name in (("lifetimes", "somas_bert_base.csv"),
                          ("pytorch-snapshot", "cs336_forward_bf16.pickle")):
            out = os.path.join(cls.tmp.name, name + ".gatrace")
            p = gatest.cli("import", "auto", os.path.join(gatest.TRACES, sub, name), "-o", out,
                           timeout=300)
            assert p.returncode == 0, p.stderr
            cls.traces[name] = out

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def replay(self, trace, mode, fraction, limit, *extra):
        p = tool("--mode", mode, "--fraction", fraction, "--limit", str(limit), "--json", *extra,
                 trace)
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["fraction"], fraction)
        return doc["modes"][mode]

    def same(self, shim, rep, mode):
        """Refusals, the first one and the peak the driver saw, against the replay's."""
        peak = shim["peak_vmm_mapped"] if mode == "vmm" else shim["peak_bytes"]
        first = -1 if rep["first_oom"] is None else rep["first_oom"]
        self.assertEqual((shim["failed"], shim["first_failed"], peak),
                         (rep["failed_allocs"], first, rep["peak_reserved"]))

    def test_default_as_the_shim_runs_it(self):
        # The shim's default (no GPUARENA_MEM_FRACTION, no cap: the device's 64 GiB) and 0.75+
        # under caps the arena grows past (90% of the live peak / 0.75) and, on the BERT trace,
        # one under the live peak (refusals); the fixed 0.75 in arena, grow and vmm mode.
        for name, trace in sorted(self.traces.items()):
            live = self.replay(trace, "arena", "0.75+", DEVICE)["peak_in_use"]
            grows = int(live / 0.75 * 0.9) // 512 * 512
            caps = [None, grows] + ([int(live * 0.9) // 512 * 512] if "bert" in name else [])
            for cap in caps:
                for mode, fraction in (("arena", "0.75+"), ("arena", "0.75"), ("grow", "0.75"),
                                       ("vmm", "0.75")):
                    with self.subTest(trace=name, cap=cap, mode=mode, fraction=fraction):
                        shim = play(trace, cap, mode, None if fraction == "0.75+" else fraction)
                        rep = self.replay(trace, mode, fraction, cap or DEVICE)
                        self.same(shim, rep, mode)
                        if mode == "arena" and fraction == "0.75+" and cap is None:
                            self.assertEqual(rep["peak_reserved"], DEVICE * 3 // 4)
                        if mode == "arena" and fraction == "0.75+" and cap == grows:
                            self.assertGreater(rep["peak_reserved"], cap * 3 // 4)  # grew past
                            self.assertEqual(rep["failed_allocs"], 0)

    def test_smallest_cap_runs_through_the_shim(self):
        trace = self.traces["somas_bert_base.csv"]
        rep = self.replay(trace, "arena", "0.75+", DEVICE, "--min")
        least = rep["min_size"]
        self.assertEqual(play(trace, least)["failed"], 0)
        self.assertGreater(self.replay(trace, "arena", "0.75+", least - 512)["failed_allocs"], 0)
        # the fixed share: the arena is 0.75 of the cap, so the smallest cap is about 4/3 larger
        hard = self.replay(trace, "arena", "0.75", DEVICE, "--min")["min_size"]
        self.assertEqual(play(trace, hard, fraction="0.75")["failed"], 0)
        self.assertGreater(hard, least)

    def test_grammar_and_usage(self):
        # GPUARENA_MEM_FRACTION's grammar (one parser with the shim's), blanks around ignored
        p = tool("--mode", "arena", "--fraction", " 0.5+ ", "--limit", "1GiB", "--json", SRC)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["fraction"], "0.5+")
        for bad in ("1.5", "0", "5e-1", "0.5++", "-0.5", "0x1p-1", ".", "abc", ""):
            with self.subTest(fraction=bad):
                p = tool("--fraction", bad, "--limit", "1GiB", SRC)
                self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
                self.assertIn("--fraction takes a fraction in (0, 1] as GPUARENA_MEM_FRACTION",
                              p.stderr)
        for args, why in (
                (("--fraction", "0.75+"), "--fraction 0.75+ is a share of the cap: give the cap "
                 "with --limit"),
                (("--fraction", "0.75", "--limit", "1GiB", "--arena-size", "1GiB"),
                 "--fraction 0.75 sizes the arena (0.75 of --limit): give --fraction or "
                 "--arena-size, not both"),
                (("--mode", "grow,vmm", "--fraction", "0.75+", "--limit", "1GiB"),
                 "--fraction 0.75+ changes arena mode only"),
                (("--mode", "platform", "--fraction", "0.75", "--limit", "1GiB"),
                 "--fraction applies to arena, grow and vmm")):
            with self.subTest(args=args):
                p = tool(*args, SRC)
                self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
                self.assertIn(f"gpuarena: {why}", p.stderr)
                p = gatest.cli("replay", SRC, "--no-min", *args)
                self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
                self.assertIn(f"gpuarena: {why}", p.stderr)
        # the command passes it on; --limit with arena alone is the cap then, not a usage error
        p = gatest.cli("replay", SRC, "--mode", "arena", "--fraction", "0.75+", "--limit",
                       "2MiB", "--no-min")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("GPUARENA_MEM_FRACTION=0.75+ of a cap (--limit) of 2.00 MiB", p.stdout)
        # a share of no block, where the share bounds the pool, as the shim refuses it at cuInit
        # (the fraction as typed, and the smallest cap that gives a block); with 0.0001+ outside
        # arena mode the cap alone bounds the pool
        p = tool("--mode", "arena,vmm", "--fraction", "0.0001", "--limit", "1MiB", SRC)
        self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
        self.assertIn("gpuarena: --fraction 0.0001 of --limit 1048576 is a share that rounds to "
                      "0 bytes, which bounds the arena pool: nothing could ever be allocated; give "
                      "a larger --fraction, or a --limit of at least 5120000 bytes", p.stderr)
        p = gatest.cli("replay", SRC, "--mode", "arena,vmm", "--fraction", "0.0001", "--limit",
                       "1MiB")
        self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
        self.assertIn("a --limit of at least 5120000 bytes", p.stderr)
        p = tool("--mode", "grow", "--fraction", "0.0000001", "--limit", "1MiB", SRC)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--fraction 0.0000001 of --limit 1048576", p.stderr)  # not 1e-07
        p = tool("--mode", "arena,vmm", "--fraction", "0.0001+", "--limit", "1MiB", SRC)
        self.assertEqual(p.returncode, 2, p.stderr)  # arena's share still bounds it
        p = tool("--mode", "vmm", "--fraction", "0.0001", "--limit", "4GiB", "--json", SRC)
        self.assertEqual(p.returncode, 0, p.stderr)
        # a share past the replay's address space (2^62 bytes less 1 TiB) is named as such
        p = tool("--mode", "arena", "--fraction", "0.5", "--limit", str(2**64 - 1), SRC)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("gpuarena: arena mode: an arena of 9223372036854775808 bytes is more than "
                      "replay's address space (4611684918915760128 bytes); give a smaller cap or "
                      "fraction", p.stderr)


if __name__ == "__main__":
    unittest.main()


class FractionSpellings(unittest.TestCase):
    """One table of GPUARENA_MEM_FRACTION spellings through every reader of it: the command's
    --fraction, gpuarena-replay --fraction and the shim (doctor --sim asks it). A fraction of 64
    characters or more was refused by the shim and the tool (a 64-byte copy) and taken by the
    command until 2026-12-07 (an outside check); 5,000 digits were refused by the command alone."""
    CASES = (("0.5", True), (" 0.5+ ", True), ("1", True), (".5", True), ("1.0+", True),
             ("00.75", True), ("0.123456789012345678", True), ("\t0.75\n", True),
             ("0.75" + "0" * 70, True), ("0" * 70 + "0.5+", True), ("0.75" + "0" * 5000, True),
             ("1." + "0" * 80, True), ("0." + "0" * 4 + "1" + "0" * 70, True),
             ("1." + "0" * 70 + "1", False), ("0." + "0" * 80, False), ("0x0.8", False),
             ("5e-1", False), ("1.", False), ("0", False), ("1.5", False), ("0.5 +", False),
             ("+", False), ("-0.5", False), ("", False), ("0.75++", False), ("0,75", False),
             ("0.75\u00a0", False), ("2", False))

    def test_one_table_through_every_reader(self):
        from gpuarena_cli import cli as cli_mod
        import test_doctor
        with tempfile.TemporaryDirectory() as d:
            csv = os.path.join(d, "t.csv")
            with open(csv, "w", encoding="ascii") as f:
                f.write("id,lower,upper,size\n0,0,2,4096\n")
            for text, ok in self.CASES:
                with self.subTest(fraction=text[:40], length=len(text)):
                    try:
                        cli_mod._fraction(text)
                        took = True
                    except Exception:  # argparse's ArgumentTypeError
                        took = False
                    self.assertEqual(took, ok, "the command's --fraction")
                    p = tool("--fraction", text, "--limit", "1GiB", "--mode", "arena", csv)
                    self.assertEqual(p.returncode, 0 if ok else 2, p.stderr)
                    if ok:
                        self.assertEqual(p.stderr, "")
                    if len(text) > 60 or not ok:
                        continue  # the shim's verdict costs a run: the long ones and one refusal
                    _, doc = test_doctor.doctor("--sim", env={"GPUARENA_MEM_FRACTION": text})
                    self.assertEqual("refused" not in doc["shim_check"], ok, doc["shim_check"])
            for text, ok in ((self.CASES[8][0], True), (self.CASES[13][0], False)):
                _, doc = test_doctor.doctor("--sim", env={"GPUARENA_MEM_FRACTION": text})
                self.assertEqual("refused" not in doc["shim_check"], ok, doc["shim_check"])
