"""Findings of an outside check of issue 10 (modes as pools, vmm mode; helper-121), the command's
side.

A mode option given twice: `gpuarena replay T --mode vmm --mode arena` replayed arena alone and
`compare --modes vmm --modes arena` ran arena alone (argparse kept the last, without a word), where
gpuarena-replay takes a repeated --mode as the README's own command lines use it; `run --mode vmm
--mode arena` ran in arena mode, and `report` drew the last one's curve.

A trace recorded on a device whose vmm granule is not 2 MiB (the simulated driver's
SIMCUDA_VMM_GRANULARITY=64KiB) replayed in vmm mode with 2 MiB granules, the only ones `gpuarena
replay` and `report` knew: 39 maps where the run made 1,286, and another peak; gpuarena-replay's
--granularity was not reachable from the command."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import gatest

CSV = os.path.join(gatest.TRACES, "lifetimes", "minimalloc_A.csv")


def replay_modes(*args):
    p = gatest.cli("replay", CSV, "--json", "--no-min", *args, timeout=120)
    assert p.returncode == 0, p.stderr
    return list(json.loads(p.stdout)["modes"])


class ModeGivenTwice(unittest.TestCase):
    def test_replay_mode_repeated_takes_every_mode(self):
        """--mode vmm --mode arena replays both, as gpuarena-replay does; one --mode, a list, and
        none replay as before; --vmm-keep with vmm in an earlier --mode is taken."""
        self.assertEqual(sorted(replay_modes("--mode", "vmm", "--mode", "arena")),
                         ["arena", "vmm"])
        tool = subprocess.run([os.path.join(gatest.BUILD, "bin", "gpuarena-replay"), "--json",
                               "--format", "lifetimes", "--mode", "vmm", "--mode", "arena", CSV],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(tool.returncode, 0, tool.stderr)
        self.assertEqual(sorted(json.loads(tool.stdout)["modes"]), ["arena", "vmm"])
        self.assertEqual(replay_modes("--mode", "vmm"), ["vmm"])
        self.assertEqual(sorted(replay_modes("--mode", "grow,vmm")), ["grow", "vmm"])
        self.assertEqual(sorted(replay_modes()), ["arena", "grow", "platform", "vmm"])
        self.assertEqual(sorted(replay_modes("--mode", "vmm", "--mode", "arena",
                                             "--vmm-keep", "0")), ["arena", "vmm"])

    def test_compare_modes_repeated_runs_every_mode(self):
        prog = os.path.join(gatest.BUILD, "examples", "ex_train")
        p = gatest.cli("compare", "--sim", "--json", "--modes", "vmm", "--modes", "platform",
                       "--", prog, "1", timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('"vmm"', p.stdout)
        self.assertIn('"platform"', p.stdout)
        self.assertNotIn('"arena"', p.stdout)

    def test_one_mode_given_twice_refused(self):
        """run and report take one mode: another mode given again is a usage error (exit 2,
        `gpuarena:` first), nothing run or written; the same mode again is taken."""
        prog = os.path.join(gatest.BUILD, "examples", "ex_train")
        p = gatest.cli("run", "--sim", "--mode", "vmm", "--mode", "arena", "--", prog, "1",
                       timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertTrue(p.stderr.startswith("gpuarena: --mode given twice (vmm, then arena)"),
                        p.stderr)
        self.assertNotIn("ex_train:", p.stdout)
        p = gatest.cli("run", "--sim", "--mode", "vmm", "--mode", "VMM", "--", prog, "1",
                       timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "r")
            p = gatest.cli("report", CSV, "--mode", "vmm", "--mode", "grow", "-o", out,
                           timeout=60)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertTrue(p.stderr.startswith("gpuarena: --mode given twice"), p.stderr)
            self.assertFalse(os.path.exists(out + ".json"))


class Granularity(unittest.TestCase):
    def test_replay_at_the_recorded_granularity(self):
        """A vmm run recorded at 64 KiB granules replays with --granularity 64KiB to the run's own
        peak of mapped bytes and cuMemCreate count; --granularity outside vmm, or not a power of
        two from 512 bytes, is a usage error; report takes it."""
        prog = os.path.join(gatest.BUILD, "examples", "ex_train")
        with tempfile.TemporaryDirectory() as tmp:
            trace, stats = os.path.join(tmp, "t.gatrace"), os.path.join(tmp, "s.json")
            p = gatest.cli("run", "--sim", "--mode", "vmm", "--trace", trace, "--stats", stats,
                           "--env", "SIMCUDA_VMM_GRANULARITY=64KiB", "--env",
                           "GPUARENA_FREE_SYNC=device", "--", prog, "3", timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(stats) as f:
                run = json.load(f)["totals"]
            p = gatest.cli("replay", trace, "--mode", "vmm", "--granularity", "64KiB", "--json",
                           "--no-min", timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            vmm = json.loads(p.stdout)["modes"]["vmm"]
            self.assertEqual(vmm["peak_reserved"], run["peak_reserved"])
            self.assertEqual(vmm["backend_maps"], run["backend_maps"])
            self.assertGreater(run["backend_maps"], 1000)  # 64 KiB granules, not 2 MiB ones
            for bad in (["--mode", "arena", "--granularity", "64KiB"],
                        ["--mode", "vmm", "--granularity", "3MiB"],
                        ["--mode", "vmm", "--granularity", "256"]):
                p = gatest.cli("replay", trace, *bad, timeout=60)
                self.assertEqual(p.returncode, 2, (bad, p.stderr))
                self.assertTrue(p.stderr.startswith("gpuarena: "), p.stderr)
                self.assertIn("granularity", p.stderr)
            out = os.path.join(tmp, "r")
            p = gatest.cli("report", trace, "--mode", "vmm", "--granularity", "64KiB", "-o", out,
                           timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(os.path.isfile(out + ".json"))


def doctor(env):
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("GPUARENA_", "XLA_PYTHON", "PYTORCH_", "SIMCUDA_"))
            or k == "GPUARENA_BUILD"}
    full.update(env)
    p = subprocess.run([sys.executable, gatest.SCRIPT, "doctor", "--sim", "--json"], env=full,
                       capture_output=True, text=True, timeout=300, check=False)
    return p, json.loads(p.stdout)


class DoctorVmm(unittest.TestCase):
    def test_device_without_vmm_is_a_problem_in_vmm_mode(self):
        """vmm mode on a device without VMM: a problem naming the attribute and the way out, the
        plan's note says so, not ok; the same device in arena mode, and vmm on a device with it,
        are ok; the machine's devices say whether they have it."""
        p, doc = doctor({"GPUARENA_MODE": "vmm", "SIMCUDA_VMM": "0"})
        self.assertEqual(p.returncode, 1, p.stderr)  # would not run as set up
        self.assertFalse(doc["ok"])
        self.assertEqual([d["vmm"] for d in doc["machine"]["devices"]], [False])
        said = [x for x in doc["problems"] if "virtual memory management" in x]
        self.assertEqual(len(said), 1, doc["problems"])
        self.assertIn("device 0", said[0])
        self.assertIn("GPUARENA_MODE=arena or grow", said[0])
        self.assertIn("every allocation fails", doc["plan"][0]["note"])
        p, doc = doctor({"GPUARENA_MODE": "arena", "SIMCUDA_VMM": "0"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(doc["ok"], doc["problems"])
        p, doc = doctor({"GPUARENA_MODE": "vmm"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(doc["ok"], doc["problems"])
        self.assertEqual([d["vmm"] for d in doc["machine"]["devices"]], [True])


    def test_the_devices_granule(self):
        """The cap's check and the granule warning use the device's granule: 7 MiB at 4 MiB
        granules maps 4 MiB and is ok; 1 MiB at 64 KiB granules holds 16 and is said nothing;
        3 MiB at 4 MiB holds none and is warned of, naming 4 MiB."""
        p, doc = doctor({"GPUARENA_MODE": "vmm", "GPUARENA_LIMIT": "7MiB",
                         "SIMCUDA_VMM_GRANULARITY": "4MiB"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(doc["ok"], doc["problems"])
        self.assertEqual(doc["machine"]["devices"][0]["granularity"], 4 << 20)
        p, doc = doctor({"GPUARENA_MODE": "vmm", "GPUARENA_LIMIT": "1MiB",
                         "SIMCUDA_VMM_GRANULARITY": "64KiB"})
        self.assertTrue(doc["ok"], doc["problems"])
        self.assertFalse([w for w in doc["warnings"] if "granules" in w], doc["warnings"])
        p, doc = doctor({"GPUARENA_MODE": "vmm", "GPUARENA_LIMIT": "3MiB",
                         "SIMCUDA_VMM_GRANULARITY": "4MiB"})
        said = [w for w in doc["warnings"] if "holds none" in w]
        self.assertEqual(len(said), 1, doc["warnings"])
        self.assertIn("granules of 4.00 MiB", said[0])


if __name__ == "__main__":
    unittest.main()
