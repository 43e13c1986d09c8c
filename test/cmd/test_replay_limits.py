"""Limits that leave a replay nothing, and the shim's default arena (`--fraction 0.75+`) replayed,
through gpuarena-replay and `gpuarena replay`.

An outside check (2026-12-07) found `--mode vmm --limit 1MiB` refusing every allocation without a
word (vmm maps whole granules of 2 MiB), and a --limit under one block of 512 bytes failing every
allocation in every mode without a word, where the shim refuses GPUARENA_LIMIT under 512."""

import json
import os
import subprocess
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
        # a granule or more, a smaller granule, or vmm not replayed: nothing said
        for args in (("--mode", "vmm", "--limit", "2MiB"),
                     ("--mode", "vmm", "--limit", "1MiB", "--granularity", "512KiB"),
                     ("--mode", "grow,platform", "--limit", "1MiB")):
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


if __name__ == "__main__":
    unittest.main()
