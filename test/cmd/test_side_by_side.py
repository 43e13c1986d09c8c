"""scripts/side-by-side.sh: gpuarena's arena against OffsetAllocator on the same traces.

OffsetAllocator's code is not in this repository, so the tests give the script a stand-in with
the same interface, written here (a bump allocator that never reuses: it must never report out of
memory on these traces). What is checked from outside: the usage text and its exit status, the
refusal of a folder without the two files (nothing built), and a full run on two shared
lifetime CSVs: the harness is compiled and run, a table row per trace with both timings and their
ratio, and the median line, and no out-of-memory note; the scaling measure (--scale): a row per
number of holes with both allocators' figures and ratios, and its bad arguments refused."""

import os
import re
import subprocess
import tempfile
import unittest

import gatest

SCRIPT = os.path.join(gatest.REPO, "scripts", "side-by-side.sh")

STAND_IN_HPP = """
namespace OffsetAllocator {
typedef unsigned int uint32;
struct Allocation {
    static constexpr uint32 NO_SPACE = 0xffffffff;
    uint32 offset = NO_SPACE;
    uint32 metadata = NO_SPACE;
};
class Allocator {
public:
    Allocator(uint32 size, uint32 maxAllocs = 128 * 1024);
    Allocation allocate(uint32 size);
    void free(Allocation allocation);
private:
    unsigned long long next_;
};
}
"""

STAND_IN_CPP = """
#include "offsetAllocator.hpp"
namespace OffsetAllocator {
Allocator::Allocator(uint32, uint32) : next_(0) {}
Allocation Allocator::allocate(uint32 size)
{
    Allocation a;
    a.offset = (uint32)(next_ & 0x7fffffff);
    a.metadata = 0;
    next_ += size;
    return a;
}
void Allocator::free(Allocation) {}
}
"""


def run(*args, env=None):
    full = dict(os.environ)
    full["BUILD"] = gatest.BUILD
    full.update(env or {})
    return subprocess.run(["sh", SCRIPT] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=600, check=False, env=full)


class SideBySide(unittest.TestCase):
    def test_usage(self):
        r = run()
        self.assertEqual(r.returncode, 2)
        self.assertIn("side-by-side.sh OFFSETALLOCATOR_DIR", r.stdout)
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("OffsetAllocator", r.stdout)

    def test_folder_without_the_files(self):
        with tempfile.TemporaryDirectory() as d:
            r = run(d)
        self.assertEqual(r.returncode, 2)
        self.assertIn("gpuarena:", r.stderr)
        self.assertIn("offsetAllocator.hpp not found", r.stderr)
        self.assertEqual(r.stdout, "")

    def stand_in(self, d):
        with open(os.path.join(d, "offsetAllocator.hpp"), "w") as f:
            f.write(STAND_IN_HPP)
        with open(os.path.join(d, "offsetAllocator.cpp"), "w") as f:
            f.write(STAND_IN_CPP)

    def test_scale(self):
        with tempfile.TemporaryDirectory() as d:
            self.stand_in(d)
            r = run(d, "--scale", "1000", "2000")
            bad = [run(d, "--scale", x) for x in ("99", "2000000", "10k")]
            no_pairs = run(d, "--scale", "1000", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        num = r"([\d.]+)"
        rows = re.findall(r"^\| (\d+)" + r" \| ".join([""] + [num] * 8) + r" \|$", r.stdout,
                          re.M)
        self.assertEqual([x[0] for x in rows], ["100", "1000"])
        for row in rows:
            figures = [float(x) for x in row[1:]]
            for k in range(0, 8, 2):
                self.assertGreater(figures[k], 0)
            # the ratio column is each allocator's figure over its own 100-hole figure
            base = [float(x) for x in rows[0][1:]]
            for k in range(0, 8, 2):
                self.assertAlmostEqual(figures[k + 1], figures[k] / base[k],
                                       delta=0.05 * figures[k + 1] + 0.01)
        self.assertIn("best of 7 runs of 2000 pairs", r.stdout)
        for b in bad + [no_pairs]:
            self.assertEqual(b.returncode, 2)
            self.assertIn("gpuarena: side-by-side --scale:", b.stderr)
            self.assertEqual(b.stdout, "")

    def test_runs_both_on_the_same_traces(self):
        csvs = [f for f in gatest.traces("lifetimes")
                if os.path.basename(f) in ("minimalloc_A.csv", "somas_resnet50.csv")]
        self.assertEqual(len(csvs), 2)
        with tempfile.TemporaryDirectory() as d:
            self.stand_in(d)
            r = run(d, *csvs)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = re.findall(r"^\| (\S+\.csv) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                          r.stdout, re.M)
        self.assertEqual([x[0] for x in rows], ["minimalloc_A.csv", "somas_resnet50.csv"])
        for name, events, ga, oa, ratio in rows:
            self.assertGreater(int(events), 0)
            self.assertGreater(float(ga), 0)
            self.assertGreater(float(oa), 0)
            # the two timings are printed rounded to 0.1 ns, the ratio from the unrounded ones
            self.assertAlmostEqual(float(ratio), float(ga) / float(oa),
                                   delta=0.1 * float(ratio) + 0.01)
        self.assertRegex(r.stdout, r"median over 2 traces: gpuarena [\d.]+ ns/op, "
                                   r"OffsetAllocator [\d.]+")
        self.assertNotIn("out of memory", r.stdout)


if __name__ == "__main__":
    unittest.main()
