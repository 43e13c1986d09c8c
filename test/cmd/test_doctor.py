"""`gpuarena doctor`: what the machine has (from the simulated driver, whose answers the test
sets), how the GPUARENA_* settings in force are read (the shim's rules, the size grammar, case and
spaces, unknown names), what the shim itself reports under them, which frameworks import (fake
packages on PYTHONPATH: one imports, one fails, one hangs past the timeout; none is ever imported
into the command), and what the frameworks' own memory settings mean for gpuarena."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import gatest
from gpuarena_cli import doctor as doctor_mod

GIB = 1 << 30


def shim_settings():
    """The names in the shim's options table (shim/options.c, ga_options[]): THE list, which the
    doctor must read in full (it had missed GPUARENA_FREE_SYNC and GPUARENA_GROUP_DIR and called
    them unknown)."""
    with open(os.path.join(gatest.REPO, "shim", "options.c"), encoding="utf-8") as f:
        src = f.read()
    table = src[src.index("ga_options[] = {"):]
    table = table[:table.index("\n};")]
    return tuple(re.findall(r'^    \{"(GPUARENA_[A-Z_]+)"', table, re.M))


SETTINGS = shim_settings()


def doctor(*args, env=None, timeout=120):
    """(process, parsed JSON or None) of `gpuarena doctor ARGS --json` with a clean setting."""
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("GPUARENA_", "XLA_PYTHON", "PYTORCH_")) or k == "GPUARENA_BUILD"}
    full.update(gatest.SAN_ENV)
    full.update(env or {})
    p = subprocess.run([sys.executable, gatest.SCRIPT, "doctor", "--json"] + list(args),
                       env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, check=False)
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        return p, None


class Doctor(unittest.TestCase):
    def test_machine_and_plan_on_the_simulated_driver(self):
        p, doc = doctor("--sim", env={"SIMCUDA_TOTAL_MEM": "24GiB", "SIMCUDA_DEVICES": "2",
                                      "GPUARENA_LIMIT": "50%", "GPUARENA_MEM_FRACTION": "0.5"})
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        self.assertTrue(doc["ok"], doc["problems"])
        m = doc["machine"]
        self.assertEqual(m["driver_path"], os.path.join(gatest.BUILD, "sim", "libcuda.so.1"))
        self.assertEqual([d["total"] for d in m["devices"]], [24 * GIB, 24 * GIB])
        self.assertEqual(doc["mode"], "arena")
        self.assertEqual([(x["cap"], x["arena"], x["cap_from"]) for x in doc["plan"]],
                         [(12 * GIB, 6 * GIB, "GPUARENA_LIMIT")] * 2)
        self.assertEqual(doc["shim"], os.path.join(gatest.BUILD, "lib", "libgpuarena.so"))
        # The shim's own answer: cuMemGetInfo under it reports the cap.
        self.assertEqual(doc["shim_check"]["view"]["total"], 12 * GIB)
        with open(os.path.join(gatest.REPO, "VERSION")) as f:
            self.assertEqual(doc["version"], f.read().strip())
        text = subprocess.run([sys.executable, gatest.SCRIPT, "doctor", "--sim"], text=True,
                              env=dict(os.environ, SIMCUDA_TOTAL_MEM="24GiB",
                                       GPUARENA_LIMIT="50%", **gatest.SAN_ENV),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        self.assertIn("cap 12.00 GiB (GPUARENA_LIMIT) of 24.00 GiB", text.stdout)
        self.assertIn("cuMemGetInfo says total 12.00 GiB", text.stdout)
        self.assertIn("gpuarena would run here", text.stdout)

    def test_limit_above_the_device_said(self):
        """A GPUARENA_LIMIT above the device caps nothing, and the plan says so, as `run` does (a
        typo such as 80GiB for 8GiB went by without a word: helper-67 F17.9)."""
        p, doc = doctor("--sim", env={"SIMCUDA_TOTAL_MEM": "8GiB", "GPUARENA_LIMIT": "9GiB"})
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        self.assertEqual(doc["plan"][0]["cap"], 8 * GIB)
        self.assertEqual(doc["plan"][0]["cap_from"], "the device's total; GPUARENA_LIMIT=9.00 GiB "
                         "is above the device and caps nothing")
        p, doc = doctor("--sim", env={"SIMCUDA_TOTAL_MEM": "8GiB", "GPUARENA_LIMIT": "8GiB"})
        self.assertEqual(doc["plan"][0]["cap_from"], "the device's total")

    def test_settings_read_as_the_shim_reads_them(self):
        p, doc = doctor("--sim", env={"GPUARENA_MODE": " GROW ", "GPUARENA_LOG": "Debug ",
                                      "GPUARENA_PREALLOCATE": " Yes", "GPUARENA_LIMIT": "2 gib",
                                      "SIMCUDA_TOTAL_MEM": "8GiB"})
        self.assertEqual(doc["mode"], "grow")
        self.assertFalse([x for x in doc["problems"] if "GPUARENA_" in x and "refused" in x])
        self.assertEqual(doc["plan"][0]["cap"], 2 * GIB)
        self.assertEqual(doc["plan"][0]["arena"], 0)
        self.assertEqual({s["name"] for s in doc["settings"]}, set(SETTINGS))
        # A limit above the device is the device.
        _, doc = doctor("--sim", env={"GPUARENA_LIMIT": "1TB", "SIMCUDA_TOTAL_MEM": "8GiB"})
        self.assertEqual(doc["plan"][0]["cap"], 8 * GIB)
        # GPUARENA_VMM_KEEP takes zero in any spelling, as the shim does (doctor called "0",
        # which the shim takes, refused, and said the shim would not initialise CUDA).
        for keep in ("0", "0B", "0.0 MiB"):
            p, doc = doctor("--sim", env={"GPUARENA_VMM_KEEP": keep, "GPUARENA_MODE": "vmm"})
            self.assertEqual(doc["problems"], [], (keep, p.stderr))
        _, doc = doctor("--sim", env={"GPUARENA_VMM_KEEP": "0.5"})
        self.assertIn("GPUARENA_VMM_KEEP='0.5' is not a size: it rounds down to 0 bytes",
                      "\n".join(doc["problems"]))

    def test_every_shim_setting_known(self):
        self.assertIn("GPUARENA_FREE_SYNC", SETTINGS)
        self.assertIn("GPUARENA_GROUP_DIR", SETTINGS)
        env = {"GPUARENA_FREE_SYNC": "Lazy", "GPUARENA_GROUP_DIR": "/tmp",
               "GPUARENA_NO_MATPLOTLIB": "1"}
        p, doc = doctor("--sim", env=env)
        self.assertEqual(doc["warnings"], [], p.stderr)
        self.assertEqual(doc["problems"], [], p.stderr)
        _, doc = doctor("--sim", env={"GPUARENA_FREE_SYNC": "sometimes"})
        self.assertIn("GPUARENA_FREE_SYNC='sometimes' is not valid (deferred, lazy, device or none)",
                      "\n".join(doc["problems"]))
        # The shim takes an absolute group folder only; doctor says so, as the shim would.
        _, doc = doctor("--sim", env={"GPUARENA_GROUP_DIR": "ledgers"})
        self.assertIn("GPUARENA_GROUP_DIR='ledgers' is not valid (an absolute path",
                      "\n".join(doc["problems"]))

    def test_bad_and_unknown_settings(self):
        env = {"GPUARENA_LIMIT": "12XB", "GPUARENA_PREALLOCATE": "maybe", "GPUARENA_LIMT": "1",
               "GPUARENA_MODE": "fast", "GPUARENA_VMM_KEEP": "50%"}
        p, doc = doctor("--sim", env=env)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertFalse(doc["ok"])
        problems = "\n".join(doc["problems"])
        # The shim's own words, its examples for the option included (doctor gave the grammar's
        # generic ones, "try 8GiB, 512MiB, 1.5G, 4096", where the shim says "or 0" for the keep).
        for said in ("GPUARENA_LIMIT='12XB' is not a size: unknown unit 'XB' (try 8GiB, 512MiB or "
                     "50%)", "GPUARENA_VMM_KEEP='50%' is not a size: a percentage is not accepted "
                     "here (try 64MiB, 512MiB or 0)"):
            self.assertIn(said + "; the shim will not initialise CUDA", problems)
            self.assertIn(said + "; CUDA will not be initialised", problems)  # under the shim
        self.assertNotIn("gpuarena: gpuarena:", p.stdout + problems)
        self.assertIn("cuInit failed: GPUARENA_MODE='fast'", problems)  # no second prefix
        # Any refused setting leaves no pool (a refused GPUARENA_LIMIT got a plan as if unset).
        self.assertIn("no pool: the shim refuses GPUARENA_MODE, GPUARENA_PREALLOCATE, "
                      "GPUARENA_LIMIT, GPUARENA_VMM_KEEP", doc["plan"][0]["note"])
        self.assertIn("GPUARENA_PREALLOCATE='maybe' is not valid", problems)
        self.assertIn("unknown mode 'fast'", problems)
        self.assertIn("a percentage is not accepted here", problems)
        self.assertEqual(doc["warnings"], ["unknown setting GPUARENA_LIMT (did you mean "
                                           "GPUARENA_LIMIT?); it is ignored"])
        # A name in the wrong case is matched in capitals, as the shim matches it; GPUARENA_SIM,
        # which nothing reads, is not a setting either. The words are the shim's (one language:
        # doctor said "GPUARENA_LIMT is not a gpuarena setting ...; the shim ignores it" beside
        # the shim's "unknown setting GPUARENA_LIMT ...; it is ignored" until 2026-12-07).
        _, doc2 = doctor("--sim", env={"GPUARENA_mode": "vmm", "GPUARENA_SIM": "1",
                                       "GPUARENA_ZZZZZZZZZZZZZZZZ": "1"})
        self.assertEqual(doc2["warnings"], [
            "unknown setting GPUARENA_SIM; it is ignored (the README's Options table lists the "
            "settings)",
            "unknown setting GPUARENA_ZZZZZZZZZZZZZZZZ; it is ignored (the README's Options table "
            "lists the settings)",
            "unknown setting GPUARENA_mode (did you mean GPUARENA_MODE?); it is ignored"])
        said2 = " ".join(doc2["shim_check"].get("messages") or [])
        for w in doc2["warnings"]:
            self.assertIn(w.split(" (the README")[0], said2, "the shim's words")
        said2 = " ".join(doc2["shim_check"].get("messages") or [])
        self.assertIn("unknown setting GPUARENA_mode (did you mean GPUARENA_MODE?)", said2)
        # The shim's own verdict on the same settings is in the report too.
        chk = doc["shim_check"]
        said = chk.get("refused", "") + " ".join(chk.get("messages") or [])
        self.assertIn("GPUARENA_LIMIT='12XB'", said)

    # Likely mistakes and the setting each should suggest (None: none is near). The shim and the
    # doctor named different settings for 8 of the first 13 (difflib here, an edit distance up
    # to 3 on the whole name there), and both named GPUARENA_LOG for GPUARENA_CAP (an outside
    # check, 2026-12-06).
    NEAR = (("GPUARENA_LIMT", "GPUARENA_LIMIT"), ("GPUARENA_LMIIT", "GPUARENA_LIMIT"),
            ("GPUARENA_MDOE", "GPUARENA_MODE"), ("GPUARENA_MEMORY_LIMIT", "GPUARENA_LIMIT"),
            ("GPUARENA_LIMIT_GB", "GPUARENA_LIMIT"), ("GPUARENA_FRACTION", "GPUARENA_MEM_FRACTION"),
            ("GPUARENA_KEEP", "GPUARENA_VMM_KEEP"), ("GPUARENA_SYNC", "GPUARENA_FREE_SYNC"),
            ("GPUARENA_PREALLOC", "GPUARENA_PREALLOCATE"), ("GPUARENA_STAT", "GPUARENA_STATS"),
            ("GPUARENA_MODES", "GPUARENA_MODE"), ("GPUARENA_mode", "GPUARENA_MODE"),
            ("GPUARENA_GROUPDIR", "GPUARENA_GROUP_DIR"), ("GPUARENA_GROUP_NAME", "GPUARENA_GROUP"),
            ("GPUARENA_LIBCUDA_PATH", "GPUARENA_LIBCUDA"), ("GPUARENA_LOGLEVEL", "GPUARENA_LOG"),
            ("GPUARENA_CAP", None), ("GPUARENA_FOO", None), ("GPUARENA_DEBUG", None),
            ("GPUARENA_VERBOSE", None), ("GPUARENA_MAX_MEMORY", None),
            ("GPUARENA_" + "LIMIT" * 12, None))

    def test_unknown_names_one_rule(self):
        """The shim (its lines under doctor's check) and the doctor suggest the same setting for
        each misspelt name, the one in NEAR; a name of 64 characters or more is warned about too
        (the shim skipped it without a word)."""
        env = {name: "1" for name, _ in self.NEAR}
        p, doc = doctor("--sim", env=env)
        self.assertIsNotNone(doc, p.stderr)
        shim_said = {m.split("unknown setting ", 1)[1].split()[0].rstrip(";"): m
                     for m in doc["shim_check"].get("messages") or [] if "unknown setting " in m}
        doctor_said = {w.split("unknown setting ", 1)[1].split()[0].rstrip(";"): w
                       for w in doc["warnings"] if w.startswith("unknown setting ")}
        misses = []
        for name, near in self.NEAR:
            hint = f"(did you mean {near}?)" if near else "Options table lists the settings"
            for who, said in (("shim", shim_said), ("doctor", doctor_said)):
                if hint not in said.get(name, ""):
                    misses.append(f"{who} on {name}: {said.get(name, 'nothing')!r}, want {hint!r}")
        self.assertEqual(misses, [])

    def test_device_plugin_cap(self):
        """Without GPUARENA_LIMIT, HAMi's and KAI's CUDA_DEVICE_MEMORY_LIMIT[_i] is the cap the
        shim keeps: doctor plans it (it planned the device's total, then called the shim's
        correct 1 GiB a failure, exit 1), a value the shim refuses is a problem, and `run`'s
        summary names the cap and its variable (it said "limit none")."""
        for env, cap in (({"CUDA_DEVICE_MEMORY_LIMIT": "1024m"}, 1 << 30),
                         ({"CUDA_DEVICE_MEMORY_LIMIT_0": "2g", "CUDA_DEVICE_MEMORY_LIMIT": "1g"},
                          2 << 30)):
            p, doc = doctor("--sim", env=dict(env, SIMCUDA_TOTAL_MEM="8GiB"))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(doc["ok"], doc["problems"])
            self.assertEqual((doc["plan"][0]["cap"], doc["plan"][0]["cap_from"]),
                             (cap, max(env)), env)  # the per-device one where set
        p, doc = doctor("--sim", env={"CUDA_DEVICE_MEMORY_LIMIT": "lots"})
        self.assertEqual(p.returncode, 1)
        self.assertIn("CUDA_DEVICE_MEMORY_LIMIT='lots' is not a size", doc["problems"][0])
        # Beside GPUARENA_LIMIT, the smaller of the two, as in the shim (the plugin enforces its
        # own: GPUARENA_LIMIT above it won silently, helper-68 F7), said as a warning.
        p, doc = doctor("--sim", env={"CUDA_DEVICE_MEMORY_LIMIT": "1g", "GPUARENA_LIMIT": "3GiB",
                                      "SIMCUDA_TOTAL_MEM": "8GiB"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(doc["ok"], doc["problems"])  # the shim's 1 GiB agrees with the plan
        self.assertEqual((doc["plan"][0]["cap"], doc["plan"][0]["cap_from"]),
                         (1 << 30, "CUDA_DEVICE_MEMORY_LIMIT"))
        self.assertTrue(any("GPUARENA_LIMIT is above the device plugin's CUDA_DEVICE_MEMORY_LIMIT"
                            in w for w in doc["warnings"]), doc["warnings"])
        p, doc = doctor("--sim", env={"CUDA_DEVICE_MEMORY_LIMIT": "2g", "GPUARENA_LIMIT": "1GiB",
                                      "SIMCUDA_TOTAL_MEM": "8GiB"})
        self.assertEqual((doc["plan"][0]["cap"], doc["plan"][0]["cap_from"]),
                         (1 << 30, "GPUARENA_LIMIT"))
        self.assertFalse([w for w in doc["warnings"] if "device plugin" in w], doc["warnings"])
        p, doc = doctor("--sim", env={"CUDA_DEVICE_MEMORY_LIMIT": "lots", "GPUARENA_LIMIT": "1GiB",
                                      "SIMCUDA_TOTAL_MEM": "8GiB"})
        self.assertTrue(doc["ok"], doc["problems"])  # left out, as the shim leaves it
        self.assertTrue(any("left out: the cap is GPUARENA_LIMIT's" in w
                            for w in doc["warnings"]), doc["warnings"])
        prog = os.path.join(gatest.BUILD, "examples", "ex_direct")
        p = gatest.cli("run", "--sim", "--env", "CUDA_DEVICE_MEMORY_LIMIT=1024m", "--", prog,
                       "4", "4", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gpuarena: mode arena, limit 1.00 GiB (CUDA_DEVICE_MEMORY_LIMIT)", p.stderr)

    def test_one_grammar_for_words_and_fractions(self):
        """GPUARENA_MEM_FRACTION has one grammar in the shim, doctor and --fraction (plain
        decimals in (0, 1], '+' after, blanks around ignored), and the shim's words take blanks
        around as its sizes and mode names do. The shim took 0x0.8 and 5e-1 (strtod), which
        doctor and --fraction refused, and refused ' no ', ' info ' and ' lazy '."""
        from gpuarena_cli import cli as cli_mod
        cases = (("0.5", True), (" 0.5+ ", True), ("1", True), (".5", True), ("1.0+", True),
                 ("0x0.8", False), ("5e-1", False), ("1.", False), ("0", False), ("1.5", False),
                 ("1/2", False), ("0.5 +", False), ("+", False), ("-0.5", False), ("", False),
                 ("00.75", True), ("01", True), ("1.0000000000000001", False), ("2", False),
                 ("0.123456789012345678", True))
        for text, ok in cases:
            with self.subTest(fraction=text):
                p, doc = doctor("--sim", env={"GPUARENA_MEM_FRACTION": text})
                chk = doc["shim_check"]
                self.assertEqual(doc["ok"], ok, doc["problems"])
                self.assertEqual("refused" not in chk, ok, chk)  # the shim's own verdict
                try:
                    cli_mod._fraction(text)
                    took = True
                except Exception:
                    took = False
                self.assertEqual(took, ok)
        for name, word in (("GPUARENA_PREALLOCATE", " no "), ("GPUARENA_LOG", " info "),
                           ("GPUARENA_FREE_SYNC", "\tlazy "), ("GPUARENA_MODE", " vmm ")):
            with self.subTest(name=name):
                p, doc = doctor("--sim", env={name: word})
                self.assertTrue(doc["ok"], doc["problems"])
                self.assertNotIn("refused", doc["shim_check"])

    def test_vmm_cap_below_a_granule(self):
        p, doc = doctor("--sim", env={"GPUARENA_MODE": "vmm", "GPUARENA_LIMIT": "1MiB"})
        self.assertEqual(p.returncode, 0, p.stderr)  # it starts; each allocation fails
        self.assertIn("device 0: vmm maps physical memory in granules of 2.00 MiB (current "
                      "GPUs), and a cap of 1.00 MiB holds none", "\n".join(doc["warnings"]))
        self.assertIn({"name": "GPUARENA_PREALLOCATE", "value": None,
                       "shown": "true (default) (not used in vmm mode)"}, doc["settings"])
        _, doc = doctor("--sim", env={"GPUARENA_MODE": "vmm", "GPUARENA_LIMIT": "2MiB"})
        self.assertEqual(doc["warnings"], [])

    def test_preallocate_outside_arena(self):
        """GPUARENA_PREALLOCATE=true with GPUARENA_MODE=grow does nothing: marked as not used and
        the shim's line about it shown (grow ran without a word: an outside check, 2026-12-06);
        GPUARENA_PREALLOCATE=false, which makes arena into grow, is used."""
        p, doc = doctor("--sim", env={"GPUARENA_MODE": "Grow", "GPUARENA_PREALLOCATE": "true"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn({"name": "GPUARENA_PREALLOCATE", "value": "true",
                       "shown": "true (not used in grow mode)"}, doc["settings"])
        self.assertIn("GPUARENA_PREALLOCATE=true applies to arena mode only and does nothing in "
                      "grow mode", " ".join(doc["shim_check"].get("messages") or []))
        _, doc = doctor("--sim", env={"GPUARENA_PREALLOCATE": "false"})
        self.assertIn({"name": "GPUARENA_PREALLOCATE", "value": "false", "shown": "false"},
                      doc["settings"])
        self.assertEqual(doc["shim_check"].get("messages") or [], [])

    def test_blanks_and_digits_as_the_shim(self):
        """Blanks around a value are the size grammar's ASCII white space for every setting, as
        the shim reads them: a CR (an environment file with CRLF line ends) is taken after every
        word, and a no-break space or non-ASCII digits are refused by doctor itself, not only
        under the shim (doctor took 'vmm\\xa0' and '٠.٥'; the shim refused a CR after
        GPUARENA_PREALLOCATE: an outside check, 2026-12-06). A group name too: the shim and doctor
        refused 'o3doc\\r' (an outside check, 2026-12-07)."""
        p, doc = doctor("--sim", env={"GPUARENA_PREALLOCATE": "false\r", "GPUARENA_LOG": "warn\r",
                                      "GPUARENA_FREE_SYNC": "device\r",
                                      "GPUARENA_MEM_FRACTION": "0.5\r",
                                      "GPUARENA_GROUP": "o3doc\r"})
        self.assertEqual(p.returncode, 0, doc["problems"] if doc else p.stderr)
        for env, said in (({"GPUARENA_MODE": "vmm\xa0"}, "unknown mode 'vmm\xa0'"),
                          ({"GPUARENA_MEM_FRACTION": "٠.٥"}, "GPUARENA_MEM_FRACTION='٠.٥' is not "
                                                             "valid")):
            p, doc = doctor("--sim", env=env)
            self.assertEqual(p.returncode, 1)
            self.assertIn(said + " (", doc["problems"][0])
            self.assertTrue(doc["problems"][0].endswith("; the shim will not initialise CUDA"))
        # The command's own options, likewise: a usage error before the program runs.
        for args in (("--fraction", "٠.٥"), ("--mode", "vmm\xa0")):
            p = gatest.cli("run", "--sim", *args, "--", "true")
            self.assertEqual(p.returncode, 2, p.stderr)

    def test_framework_values_jax_refuses(self):
        p, doc = doctor("--sim", env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "abc",
                                      "XLA_PYTHON_CLIENT_ALLOCATOR": "bogus"})
        self.assertEqual(p.returncode, 0, p.stderr)  # gpuarena runs; JAX would not
        self.assertEqual(doc["warnings"], [
            "XLA_PYTHON_CLIENT_MEM_FRACTION=abc is not a fraction in (0, 1]: JAX will not start "
            "with it",
            "XLA_PYTHON_CLIENT_ALLOCATOR=bogus is not an allocator JAX knows (default, platform, "
            "bfc, cuda_async): JAX will not start with it"])
        said = {e["name"]: e["meaning"] for e in doc["framework_env"]}
        self.assertIn("JAX will not start", said["XLA_PYTHON_CLIENT_MEM_FRACTION"])
        self.assertIn("JAX will not start", said["XLA_PYTHON_CLIENT_ALLOCATOR"])
        _, doc = doctor("--sim", env={"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5",
                                      "XLA_PYTHON_CLIENT_ALLOCATOR": "Platform"})
        self.assertEqual(doc["warnings"], [])

    def test_build_folder_missing(self):
        p, _ = doctor("--sim", env={"GPUARENA_BUILD": "/no/build"})
        self.assertEqual(p.returncode, 1)
        self.assertIn("GPUARENA_BUILD=/no/build: no such folder", p.stderr)
        with tempfile.TemporaryDirectory() as d:  # a folder without the shim: a problem
            os.makedirs(os.path.join(d, "sim"))
            os.symlink(os.path.join(gatest.BUILD, "sim", "libcuda.so.1"),
                       os.path.join(d, "sim", "libcuda.so.1"))
            p, doc = doctor("--sim", env={"GPUARENA_BUILD": d})
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"the shim libgpuarena.so is not in GPUARENA_BUILD={d} (build it "
                          f"there: make BUILD={d})", doc["problems"])

    def test_outputs_group_and_mode_checked(self):
        """What the shim would refuse or write nowhere is said before the program runs: a
        GPUARENA_STATS or GPUARENA_TRACE that is a folder, both naming one file (warnings: the
        program still runs), a group name the shim refuses, and no mode line for a refused
        GPUARENA_MODE."""
        with tempfile.TemporaryDirectory() as d:
            p, doc = doctor("--sim", env={"GPUARENA_STATS": d, "GPUARENA_TRACE": d})
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(doc["warnings"], [
                f"GPUARENA_{n}={d} is a folder: the shim will write nothing there; name a file "
                "in it" for n in ("STATS", "TRACE")])
            # A file in a folder that does not exist: the shim writes nothing at exit (it was
            # passed without a word).
            gone = os.path.join(d, "no-such-folder", "s.json")
            _, doc = doctor("--sim", env={"GPUARENA_STATS": gone})
            self.assertIn(f"GPUARENA_STATS={gone}: its folder {os.path.dirname(gone)} does not "
                          "exist, so the shim will write nothing", "\n".join(doc["warnings"]))
            # A group folder that does not exist: cuInit fails under the shim, so no pool is
            # planned (it planned the arena), and the fix named is to create the folder (it said
            # "free space there").
            p, doc = doctor("--sim", env={"GPUARENA_GROUP": "x", "GPUARENA_LIMIT": "1GiB",
                                          "GPUARENA_GROUP_DIR": os.path.dirname(gone)})
            self.assertEqual(p.returncode, 1)
            self.assertEqual(doc["plan"][0]["note"],
                             "no pool: cuInit fails under the shim (see the problems)")
            self.assertIn("create that folder, or set GPUARENA_GROUP_DIR to one that exists",
                          "\n".join(doc["problems"]))
            same = os.path.join(d, "x")
            _, doc = doctor("--sim", env={"GPUARENA_STATS": same, "GPUARENA_TRACE": same})
            self.assertIn(f"GPUARENA_STATS and GPUARENA_TRACE name the same file {same}: the shim "
                          "keeps the trace and writes no statistics", " ".join(doc["warnings"]))
        # A blank inside a name is refused; blanks around it are ignored, as around every value
        # (" team" was refused here until 2026-12-07; test_blanks_and_digits_as_the_shim).
        for bad in ("a/b", "..", ".", "x" * 65, "te am"):
            p, doc = doctor("--sim", env={"GPUARENA_GROUP": bad, "GPUARENA_LIMIT": "1GiB"})
            self.assertEqual(p.returncode, 1, bad)
            self.assertIn(f"GPUARENA_GROUP='{bad}' is not a group name", "\n".join(doc["problems"]))
            self.assertIn({"name": "GPUARENA_GROUP", "value": bad, "shown": f"{bad} (refused)"},
                          doc["settings"])
            # "." and ".." are made of allowed characters: the refusal says they are reserved
            self.assertEqual(bad in (".", ".."), "'.' and '..' are reserved (they name directories)"
                             in "\n".join(doc["problems"]), bad)
            # and the shim's own refusal, which the program sees, says so too (helper-72 NEW-2)
            shim = [x for x in doc["problems"] if x.startswith("under the shim, cuInit failed")]
            self.assertEqual(len(shim), 1, doc["problems"])
            self.assertIn("other than '.' and '..' (they name directories)", shim[0])
        # The simulated driver's own refusal is the reason given, once: it asked whether the GPU
        # was visible, and the sim's line came second under the shim (helper-67 F17.10).
        p, doc = doctor("--sim", env={"SIMCUDA_TOTAL_MEM": "abc"})
        self.assertEqual(p.returncode, 1)
        self.assertEqual(doc["problems"], [
            "the driver was found but cuInit failed with error 1 (simcuda: SIMCUDA_TOTAL_MEM='abc' "
            "is not a size: it does not start with a number (try 8GiB, 512MiB or 8G); cuInit will "
            "fail until it is fixed)"])  # the reason, then the examples, as the shim says it
        p, doc = doctor("--sim", env={"GPUARENA_MODE": "bogus"})
        self.assertEqual(p.returncode, 1)
        self.assertIsNone(doc["mode"])
        self.assertIn("no pool: the shim refuses GPUARENA_MODE", doc["plan"][0]["note"])
        # GPUARENA_VMM_KEEP shows its default and, outside vmm mode, that nothing uses it.
        _, doc = doctor("--sim", env={"GPUARENA_LIMIT": "12XB"})
        self.assertIn("no pool: the shim refuses GPUARENA_LIMIT", doc["plan"][0]["note"])
        self.assertIn({"name": "GPUARENA_VMM_KEEP", "value": None,
                       "shown": "64MiB (default) (not used in arena mode)"}, doc["settings"])
        _, doc = doctor("--sim", env={"GPUARENA_MODE": "vmm"})
        self.assertIn({"name": "GPUARENA_VMM_KEEP", "value": None, "shown": "64MiB (default)"},
                      doc["settings"])
        # Platform mode takes no share: GPUARENA_MEM_FRACTION is not used there, as the shim says
        # (helper-124).
        _, doc = doctor("--sim", env={"GPUARENA_MODE": "platform", "GPUARENA_MEM_FRACTION": "0.5"})
        self.assertIn({"name": "GPUARENA_MEM_FRACTION", "value": "0.5",
                       "shown": "0.5 (not used in platform mode)"}, doc["settings"])
        self.assertIn({"name": "GPUARENA_FREE_SYNC", "value": None,
                       "shown": "deferred (default) (not used in platform mode)"}, doc["settings"])
        p = gatest.cli("doctor", "--sim", env={"GPUARENA_MODE": "bogus"})
        self.assertIn("none: GPUARENA_MODE is refused", p.stdout)
        self.assertNotIn("preallocated", p.stdout)

    def test_bad_timeout_and_python(self):
        for bad in ("99999999999999", "0", "-5", "nan", "1.5"):
            p, _ = doctor("--sim", "--timeout", bad)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(f"argument --timeout: '{bad}' is not a whole number of seconds", p.stderr)
            self.assertNotIn("Traceback", p.stderr)
        for py in ("/bin/false", "/bin/true"):
            p, _ = doctor("--sim", "--python", py)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"gpuarena: {py} did not run as a Python 3 interpreter (exit status "
                          f"{1 if py == '/bin/false' else 0}", p.stderr)

    def test_empty_python_is_a_usage_error(self):
        """`--python "$PY"` with PY unset checked the command's own interpreter, exit 0, as if
        the one asked for had been checked (an outside check); an empty program after `run --`
        is a usage error the same way."""
        for py in ("", " "):
            p, doc = doctor("--sim", "--python", py)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertTrue(p.stderr.startswith("gpuarena: --python is empty: give an "
                                                "interpreter"), p.stderr)
            self.assertIsNone(doc)

    def test_timeout_kills_the_whole_check(self):
        """A check past --timeout is killed with every process it started: a wrapper whose own
        child hangs (a conda shim, a framework import's workers) left that child running."""
        marker = f"61.{os.getpid()}"
        with tempfile.TemporaryDirectory() as d:
            slow = os.path.join(d, "slowpy")
            with open(slow, "w") as f:
                f.write(f"#!/bin/sh\nsleep {marker} &\nwait\n")
            os.chmod(slow, 0o755)
            p, _ = doctor("--sim", "--python", slow, "--timeout", "1")
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("did not run `python -c` within 1 s", p.stderr)

        def left():
            found = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if marker.encode() in f.read():
                            found.append(pid)
                except OSError:
                    pass
            return found
        self.assertEqual(left(), [])

    def test_child_output_bounded(self):
        """A check's child that prints without end (a noisy import that hangs, a --python that is
        not Python) keeps only the end of its output: the command grew by 2.6 GB in a 2 s timeout
        (an outside test, 2026-12-06). The peak resident size of the command is read by a parent
        of its own (RUSAGE_CHILDREN: the largest of its descendants)."""
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "torch"))
            with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
                f.write("import sys\nline = 'x' * 4095 + '\\n'\nwhile True:\n"
                        "    sys.stdout.write(line); sys.stderr.write(line)\n")
            yes = os.path.join(d, "yespy")
            with open(yes, "w") as f:
                f.write("#!/bin/sh\nexec yes\n")
            os.chmod(yes, 0o755)
            full = {k: v for k, v in os.environ.items() if not k.startswith("GPUARENA_")
                    or k == "GPUARENA_BUILD"}
            full.update(gatest.SAN_ENV, PYTHONPATH=d)
            peak = ("import resource, subprocess, sys\n"
                    "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
                    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)\n"
                    "print(p.stdout + p.stderr)\n")
            for extra, said in (([], "torch import did not finish in 2 s"),
                                (["--python", yes], "did not run `python -c` within 2 s")):
                p = subprocess.run([sys.executable, "-c", peak, sys.executable, gatest.SCRIPT,
                                    "doctor", "--sim", "--timeout", "2"] + extra, env=full,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   timeout=120, check=False)
                kib, rc = map(int, p.stdout.split("\n", 1)[0].split())
                self.assertLess(kib, 256 << 10, f"the command held {kib} KiB: {p.stdout[-500:]}")
                self.assertIn(said, p.stdout)
                self.assertNotIn("Traceback", p.stdout)

    def test_shim_path_the_loader_would_split(self):
        with tempfile.TemporaryDirectory() as d:
            spaced = os.path.join(d, "with space")
            os.symlink(gatest.BUILD, spaced)
            p, doc = doctor("--sim", env={"GPUARENA_BUILD": spaced, "GPUARENA_LIMIT": "1GiB"})
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertFalse(doc["ok"])
        self.assertIn(f"the shim's path {spaced}/lib/libgpuarena.so contains white space",
                      "\n".join(doc["problems"]))

    def test_check_under_the_shim_judged(self):
        plan = [{"device": 0, "cap": GIB}]
        ok = {"view": {"total": GIB, "free": GIB}, "messages": [], "shim_loaded": True}
        self.assertEqual(doctor_mod.shim_check_problems(ok, plan, "/s.so"), [])
        wrong = dict(ok, view={"total": 8 * GIB, "free": 8 * GIB})
        self.assertIn("cuMemGetInfo says total 8.00 GiB (8589934592 bytes) on device 0, not the "
                      "cap of 1.00 GiB", doctor_mod.shim_check_problems(wrong, plan, "/s.so")[0])
        unloaded = dict(ok, shim_loaded=False)
        self.assertIn("/s.so was not loaded", doctor_mod.shim_check_problems(unloaded, plan,
                                                                              "/s.so")[0])
        self.assertIn("cuInit failed: no", doctor_mod.shim_check_problems({"refused": "no"},
                                                                          plan, "/s.so")[0])
        p, doc = doctor("--sim", env={"GPUARENA_LIMIT": "1GiB"})  # the real check: loaded
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(doc["shim_check"]["shim_loaded"])
        self.assertEqual(doc["shim_check"]["view"]["total"], GIB)

    def test_no_driver(self):
        p, doc = doctor(env={"GPUARENA_LIBCUDA": "/nonexistent/libcuda.so.1"})
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("driver_error", doc["machine"])
        # The command to type, as run's message gives it: it said "try gpuarena with --sim"
        # (an outside check, 2026-12-06).
        self.assertIn("add --sim (the simulated driver): gpuarena doctor --sim",
                      "\n".join(doc["problems"]))
        self.assertEqual(doc["plan"], [])

    def test_frameworks_in_children(self):
        with tempfile.TemporaryDirectory() as d:
            marker = os.path.join(d, "torch-imported-by")
            for name, body in (
                    ("torch", f"import os\nopen({marker!r}, 'w').write(str(os.getppid()))\n"
                              "print('a banner the import prints')\n"
                              "__version__ = '9.9-fake'\n"),
                    ("jax", "raise ImportError('jaxlib is not installed (fake)')\n"),
                    ("cupy", "import time\ntime.sleep(60)\n")):
                os.makedirs(os.path.join(d, name))
                with open(os.path.join(d, name, "__init__.py"), "w") as f:
                    f.write(body)
            full = dict(os.environ, PYTHONPATH=d, **gatest.SAN_ENV)
            proc = subprocess.Popen([sys.executable, gatest.SCRIPT, "doctor", "--sim", "--json",
                                     "--timeout", "8"], env=full, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            out, err = proc.communicate(timeout=120)
            fw = json.loads(out)["frameworks"]
            self.assertEqual(fw["torch"], {"status": "imports", "detail": "9.9-fake"})
            self.assertEqual(fw["jax"]["status"], "fails")
            self.assertIn("jaxlib is not installed (fake)", fw["jax"]["detail"])
            self.assertEqual(fw["cupy"]["status"], "timeout")
            self.assertEqual(fw["tensorflow"]["status"], "absent")
            with open(marker) as f:  # torch was imported by a child of the command, not by it
                self.assertEqual(int(f.read()), proc.pid)
            self.assertNotIn("Traceback", err)

    def test_framework_import_killed_by_a_signal(self):
        """A framework whose import crashes (SIGSEGV in a native library) is said so, not as its
        last stderr line alone ("no message" when it printed nothing)."""
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "torch"))
            with open(os.path.join(d, "torch", "__init__.py"), "w") as f:
                f.write("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
            p, doc = doctor("--sim", env={"PYTHONPATH": d, "PYTHONFAULTHANDLER": ""})
            self.assertIsNotNone(doc, p.stderr)
            self.assertEqual(doc["frameworks"]["torch"]["status"], "fails")
            self.assertTrue(doc["frameworks"]["torch"]["detail"].startswith(
                "the import killed by SIGSEGV"), doc["frameworks"]["torch"])

    def test_framework_settings_explained(self):
        _, doc = doctor("--sim", env={"XLA_PYTHON_CLIENT_ALLOCATOR": "platform",
                                      "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5",
                                      "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                                      "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
        env = {e["name"]: e for e in doc["framework_env"]}
        self.assertEqual(env["XLA_PYTHON_CLIENT_ALLOCATOR"]["value"], "platform")
        self.assertIn("each one reaches gpuarena", env["XLA_PYTHON_CLIENT_ALLOCATOR"]["meaning"])
        self.assertIn(".5 of the total", env["XLA_PYTHON_CLIENT_MEM_FRACTION"]["meaning"])
        self.assertIn("grows its pool on demand", env["XLA_PYTHON_CLIENT_PREALLOCATE"]["meaning"])
        self.assertIn("cuMemCreate", env["PYTORCH_CUDA_ALLOC_CONF"]["meaning"])
        self.assertIsNone(env["PYTORCH_NO_CUDA_MEMORY_CACHING"]["value"])
        self.assertIn("PYTORCH_NO_CUDA_MEMORY_CACHING=1 sends every tensor",
                      env["PYTORCH_NO_CUDA_MEMORY_CACHING"]["meaning"])


if __name__ == "__main__":
    unittest.main()
