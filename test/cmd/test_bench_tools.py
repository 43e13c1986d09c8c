"""The benchmark programs run by `make bench` (bench-scale, bench-alloc), driven as a user would.

Checked from outside: `-h` prints the usage and exits 0 without writing anything; an option
where the output path goes, a bad number and a missing argument are refused with exit status 2,
a `gpuarena:` message and no file left behind (an earlier bench-scale took `-h` for its output
path and wrote a file of that name); a short bench-scale run writes its JSON with a row per hole
count and the same rows in its table; its churn frees a random one of many allocated holes, not
the block it has just allocated. bench-pairs (scripts/bench-pool-instr.sh's loop) takes sizes in
the one grammar, refuses bad arguments the same way, and in vmm mode maps nothing after its first
round: the loop it counts is one of allocations and frees that map nothing."""

import json
import os
import subprocess
import tempfile
import unittest

import gatest

SCALE = os.path.join(gatest.BUILD, "bin", "bench-scale")
ALLOC = os.path.join(gatest.BUILD, "bin", "bench-alloc")
PAIRS = os.path.join(gatest.BUILD, "bin", "bench-pairs")


def run(prog, *args, env=None, cwd=None):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run([prog] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=full, cwd=cwd, check=False, timeout=120)


class BenchToolsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def left_behind(self):
        return sorted(os.listdir(self.tmp.name))

    def test_help_prints_usage_and_writes_nothing(self):
        for prog in (SCALE, ALLOC, PAIRS):
            for flag in ("-h", "--help"):
                r = run(prog, flag, cwd=self.tmp.name, env={"GA_TRACES_DIR": gatest.TRACES})
                self.assertEqual(r.returncode, 0, (prog, flag, r.stderr))
                self.assertIn("usage:", r.stdout)
        self.assertEqual(self.left_behind(), [])

    def test_refusals(self):
        env = {"GA_TRACES_DIR": gatest.TRACES}
        cases = [(SCALE, []), (SCALE, ["--bogus"]), (SCALE, ["out.json", "abc"]),
                 (SCALE, ["out.json", "50"]), (SCALE, ["out.json", "1000", "0"]),
                 (SCALE, ["out.json", "1000", "-5"]), (ALLOC, []), (ALLOC, ["-x"]),
                 (PAIRS, []), (PAIRS, ["platform", "4KiB", "10"]), (PAIRS, ["vmm", "0", "10"]),
                 (PAIRS, ["vmm", "3XB", "10"]), (PAIRS, ["vmm", "-1", "10"]),
                 (PAIRS, ["vmm", "5GiB", "10"]), (PAIRS, ["vmm", "4KiB", "x"]),
                 (PAIRS, ["vmm", "4KiB", "10", "0"]), (PAIRS, ["vmm", "4KiB", "10", "65"]),
                 (PAIRS, ["arena", "4KiB", "10", "2x"])]
        for prog, args in cases:
            r = run(prog, *args, cwd=self.tmp.name, env=env)
            self.assertEqual(r.returncode, 2, (prog, args, r.stderr))
            self.assertIn("gpuarena:", r.stderr, (prog, args))
            self.assertIn("usage:", r.stderr, (prog, args))
        self.assertEqual(self.left_behind(), [])

    def test_pairs_map_nothing_after_the_first_round(self):
        # 16 blocks of 3 MiB tile 24 granules of 2 MiB: mapped in the first round, never again,
        # however many pairs follow; arena mode holds its one region and maps nothing.
        for pairs in ("0", "5000"):
            r = run(PAIRS, "vmm", "3MiB", pairs)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("50331648 bytes held, 24 backend maps", r.stdout)
        r = run(PAIRS, "vmm", "1.5MiB", "3000", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2097152 bytes held, 1 backend maps", r.stdout)
        r = run(PAIRS, "arena", "4096", "3000")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(" 0 backend maps", r.stdout)

    def test_short_scale_run(self):
        out = os.path.join(self.tmp.name, "scale.json")
        r = run(SCALE, out, "1000", "2000")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [line for line in r.stdout.splitlines() if line.startswith("| 1")]
        self.assertEqual([line.split("|")[1].strip() for line in rows], ["100", "1000"])
        with open(out) as f:
            data = json.load(f)
        self.assertEqual(data["pairs"], 2000)
        for shape in ("one_size", "mixed_sizes"):
            self.assertEqual([row["holes"] for row in data[shape]], [100, 1000])
            for row in data[shape]:
                self.assertGreater(row["ns_per_pair"], 0)
                self.assertEqual(row["check_failures"], 0)

    def scale_json(self, pairs):
        # a short bench-scale run (up to 1,000 holes): its JSON
        out = os.path.join(self.tmp.name, "scale.json")
        r = run(SCALE, out, "1000", pairs)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            return json.load(f)

    def test_scale_churn_frees_other_blocks(self):
        # churn: allocate the size of a random free hole, free a random allocated hole. Until
        # 2026-12-06 it started with no allocated hole, so the hole it freed was always the block
        # it had just allocated (churn was pair with random sizes); the JSON counts such pairs.
        data = self.scale_json("2000")
        for shape in ("one_size", "mixed_sizes"):
            for row in data[shape]:
                same = row.get("churn_freed_just_allocated", data["pairs"])
                # one in holes + 1 by chance: 2000 / 101 at 100 holes, about 2 at 1000
                self.assertLess(same, data["pairs"] // 10, (shape, row))

    def test_scale_pairs_draw_a_hole_each(self):
        # pair: allocate the size of a random hole, free it. Until 2026-12-07 the sizes came from a
        # ring of 4,096 draws repeated over all the pairs (200,000 by default), so at 100,000 holes
        # the pairs touched at most 4% of the holes and read a warm subset of the bins (an outside
        # check of issue 9); each pair now draws its own hole.
        data = self.scale_json("10000")
        for shape in ("one_size", "mixed_sizes"):
            for row in data[shape]:
                self.assertEqual(row.get("pair_draws", 4096), data["pairs"], (shape, row))

if __name__ == "__main__":
    unittest.main()
