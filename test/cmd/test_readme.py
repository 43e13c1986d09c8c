"""The README's reference tables against what the code does, from the outside: the Options table
against the shim's one table of settings (shim/options.c: every variable, its default), and the
statistics table against the file a run under GPUARENA_STATS writes (every totals key, in order,
with its unit and its sentence). A README check on 2026-12-06 found the statistics text naming 25
of the 39 totals keys; these keep the tables from drifting again. The demo's table and out-of-memory explanation, the
first output a newcomer compares with the README, against a run of examples/demo.sh: on
2026-12-07 they still showed the arena's ex_fragment before 2bbf493 (3 driver allocations and a
4032 MiB peak, where `make demo` printed 2 and 4096, and another explanation)."""

import json
import os
import re
import subprocess
import tempfile
import unittest

import gatest

README = os.path.join(gatest.REPO, "README.md")
OPTIONS_C = os.path.join(gatest.REPO, "shim", "options.c")


def section(title):
    """The README's text from the heading `## title` to the next `## ` heading."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    start = text.index("\n## " + title + "\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def table(text, header):
    """The rows of the markdown table whose header row starts with `header`, as lists of cells
    (backticks kept)."""
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


def plain(cell):
    return cell.replace("`", "").strip()


class OptionsTable(unittest.TestCase):
    def code_options(self):
        """(variable, default) of every entry of ga_options[] in shim/options.c."""
        with open(OPTIONS_C, encoding="utf-8") as f:
            src = f.read()
        body = src[src.index("ga_options[] = {"):]
        body = body[:body.index("\n};")]
        return re.findall(r'\{"(GPUARENA_[A-Z_]+)",\s*"([^"]*)"', body)

    def test_every_setting_in_the_table_with_its_default(self):
        code = self.code_options()
        self.assertGreaterEqual(len(code), 12, "the scanner found the table")
        rows = table(section("Options"), "| variable |")
        readme = {plain(r[0]): plain(r[2]) for r in rows}
        self.assertEqual(sorted(readme), sorted(name for name, _ in code),
                         "the README's Options table lists exactly shim/options.c's settings")
        for name, default in code:
            self.assertEqual(readme[name], default, f"{name}: README default against options.c")

    def test_scanner_reads_a_sample(self):
        rows = table("x\n| variable | values | default | meaning |\n|---|---|---|---|\n"
                     "| `GPUARENA_A` | a | `1` | m |\n\nafter\n", "| variable |")
        self.assertEqual(rows, [["`GPUARENA_A`", "a", "`1`", "m"]])


class HookedList(unittest.TestCase):
    def test_every_hook_named_in_how_it_works(self):
        """Every function the shim exports (the build's hook list, from shim/hooks.def) is named
        in How it works, each by its base name (the _v2, _v3 and _ptsz forms are listed beside
        it); cuStreamSynchronize, cuEventSynchronize and the capture hooks were missing there."""
        with open(os.path.join(gatest.BUILD, "gen", "hooks.txt"), encoding="utf-8") as f:
            hooks = f.read().split()
        self.assertIn("cuMemAlloc_v2", hooks)
        # "cuCtxSynchronize(_v2)", "cuPointerGetAttribute(s)": each form written out
        text = re.sub(r"\b(\w+)\(([\w, ]+)\)", lambda m: " ".join(
            [m.group(1)] + [m.group(1) + x.strip() for x in m.group(2).split(",")]),
            section("How it works"))
        missing = [h for h in hooks
                   if not re.search(r"\b" + re.sub(r"(_v\d)?(_ptsz)?$", "", h) + r"\b", text)]
        self.assertEqual(missing, [], "hooks the README's How it works does not name")


class StatisticsTable(unittest.TestCase):
    def test_readme_statistics_table(self):
        """ex_direct on the simulated driver under GPUARENA_STATS, in vmm mode (every key is
        written in every mode); the README's table equals the file's totals, units and about."""
        out = os.path.join(os.environ["GA_TEST_TMPDIR"], "readme-stats.json")
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(gatest.BUILD, "sim"),
                   LD_PRELOAD=" ".join(filter(None, [gatest.SAN_RUNTIME, os.path.join(
                       gatest.BUILD, "lib", "libgpuarena.so")])),
                   GPUARENA_MODE="vmm", GPUARENA_STATS=out, SIMCUDA_TOTAL_MEM="1GiB")
        if gatest.SAN_RUNTIME:
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        r = subprocess.run([os.path.join(gatest.BUILD, "examples", "ex_direct"), "20", "64", "1"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=60, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, encoding="utf-8") as f:
            doc = json.load(f)
        rows = table(section("Statistics and traces"), "| key | unit | meaning |")
        self.assertEqual([plain(r[0]) for r in rows], list(doc["totals"]),
                         "the table's keys are the file's totals, in its order")
        for key, unit, meaning in rows:
            key = plain(key)
            self.assertEqual(unit, doc["units"][key], key)
            self.assertEqual(meaning, doc["about"][key], key)


class Demo(unittest.TestCase):
    @staticmethod
    def figures(text):
        """The demo table's rows without the timings (mode, program, driver allocs, peak, the
        result less its ms/step), then every `gpuarena:` line of the explanation."""
        rows, said = [], []
        for line in text.splitlines():
            cells = line.split()
            if len(cells) > 5 and cells[0] in ("arena", "grow", "vmm", "platform"):
                result = " ".join(cells[5:])
                rows.append(cells[:2] + cells[3:5] + ([] if "ms/step" in result else [result]))
            elif line.startswith("gpuarena:"):
                said.append(line)
        return rows, said

    def test_readme_demo_output_is_the_demos(self):
        with tempfile.TemporaryDirectory() as b:
            for d in ("lib", "sim", "examples"):
                os.symlink(os.path.join(gatest.BUILD, d), os.path.join(b, d))
            r = subprocess.run(["sh", os.path.join(gatest.REPO, "examples", "demo.sh"), b],
                               cwd=gatest.REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, timeout=300, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = section("The demo")
        block = text[text.index("\n```\nmode ") + 5:]
        block = block[:block.index("```")]
        got, want = self.figures(r.stdout), self.figures(block)
        self.assertEqual(len(got[0]), 8, r.stdout)
        self.assertEqual(want, got, "the README's demo table and explanation against the demo's")
        text = section("Statistics and traces")
        text = text[text.index("**The OOM explainer.**"):]
        block = text[text.index("\n```\n") + 5:]
        self.assertEqual(self.figures(block[:block.index("```")])[1], got[1],
                         "the OOM explainer's example (the demo's) against the demo's")


if __name__ == "__main__":
    unittest.main()
