"""The one size grammar: every row of test/sizes.tsv through the four parsers outside the unit
tier (which runs the C function itself): the command's Python parser, gpuarena-replay --limit, the
simulated driver's SIMCUDA_TOTAL_MEM and the shim's GPUARENA_LIMIT, each from outside (exit
codes, JSON, what cuDeviceTotalMem and cuMemGetInfo report through the probe program). A row's
expectation is what GPUARENA_LIMIT reads; where no percentage is accepted a percent row must be
refused. The Python and the replay tool's messages for a refused size are the same words."""

import json
import os
import re
import subprocess
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import gatest
from gpuarena_cli import GaError
from gpuarena_cli.fmt import human_bytes, human_ns, parse_size, percent_of

TABLE = os.path.join(gatest.REPO, "test", "sizes.tsv")
TOOL = os.path.join(gatest.BUILD, "bin", "gpuarena-replay")
PROBE = os.path.join(gatest.BUILD, "test", "sizeprobe")
SHIM = os.path.join(gatest.BUILD, "lib", "libgpuarena.so")
SIM_DIR = os.path.join(gatest.BUILD, "sim")
BIGGEST = (1 << 64) - 1          # a device that holds any size of the table
PCT_TOTAL = 100 << 40            # 100 TiB: p% of it is p * 2^40, exact for the table's p


def unescape(s):
    """\\s \\t \\n \\\\ and \\{C*N} (N copies of C), as test/unit/test_size.c decodes."""
    out, i = [], 0
    while i < len(s):
        run = re.match(r"\\\{(.)\*(\d+)\}", s[i:])
        if run:
            out.append(run.group(1) * int(run.group(2)))
            i += run.end()
        elif s[i] == "\\" and i + 1 < len(s):
            out.append({"s": " ", "t": "\t", "n": "\n"}.get(s[i + 1], s[i + 1]))
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def rows():
    """[(line number, input, kind, value)]: kind bytes (int), percent (Fraction), zero or error."""
    out = []
    with open(TABLE, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            text, expected = line.split("\t")
            kind, _, value = expected.partition(" ")
            value = int(value) if kind == "bytes" else Fraction(value) if value else None
            out.append((n, unescape(text), kind, value))
    assert len(out) >= 100, "the table lost its rows"
    return out


ROWS = rows()


def probe(what, env):
    """(ok, total) as the probe program saw device 0 ("sim" or "shim"), and its stderr."""
    full = dict(os.environ, LD_LIBRARY_PATH=SIM_DIR, **env)
    full.pop("LD_PRELOAD", None)
    if what == "shim":
        full["LD_PRELOAD"] = " ".join(x for x in (gatest.SAN_RUNTIME, SHIM) if x)
    p = subprocess.run([PROBE, what], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60, check=False)
    word, _, num = p.stdout.strip().partition(" ")
    return word == "ok", int(num or 0), p.stderr


def each_row(fn, rows=ROWS):
    """fn(row) for every row, four at a time (each is its own process)."""
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(fn, rows))


def tool_rows(size, *args, extra=()):
    """[(row, process)]: gpuarena-replay --json ARGS ROW-INPUT on a CSV of one block of `size`
    bytes, for every row of the table and the `extra` rows."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "one.csv")
        with open(src, "w") as f:
            f.write(f"id,lower,upper,size\n1,0,1,{size}\n")

        def run(row):
            return row, subprocess.run([TOOL, "--json", *args, row[1], src],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       check=False)
        return each_row(run, ROWS + list(extra))


class SizeTable(unittest.TestCase):
    """Each parser is one test over the whole table; a failure lists every row that disagrees,
    with its line in test/sizes.tsv."""

    def assertNoMisses(self, misses):
        if misses:
            self.fail("rows that disagree with test/sizes.tsv:\n" + "\n".join(misses))

    def test_python(self):
        misses = []
        for n, text, kind, value in ROWS:
            for allow, zero in ((True, False), (False, False), (False, True), (True, True)):
                want_error = (kind == "error" or (kind == "percent" and not allow) or
                              (kind == "zero" and not zero))
                want = 0 if kind == "zero" else value
                how = f"(percent allowed: {allow}, zero allowed: {zero})"
                try:
                    got = parse_size(text, allow, zero)
                except GaError as e:
                    if not want_error or "is not a size: " not in str(e):
                        misses.append(f"line {n} {text!r} {how}: {e}")
                    continue
                if want_error or got != want or isinstance(got, Fraction) != (kind == "percent"):
                    misses.append(f"line {n} {text!r} {how}: {got!r}")
        self.assertNoMisses(misses)

    def test_replay_tool_vmm_keep(self):
        """--vmm-keep takes the grammar with zero allowed: a zero row keeps nothing (a freed
        4 MiB block leaves no granule mapped), a byte row is read, percentages and errors are
        usage errors with the parser's message."""
        results = tool_rows(4194304, "--mode", "vmm", "--vmm-keep",
                            extra=[(0, "64MiB", "keep", None)])
        misses = []
        for (n, text, kind, value), p in results:
            if kind in ("bytes", "zero", "keep"):
                try:
                    got = json.loads(p.stdout)["modes"]["vmm"]["final_reserved"]
                except (ValueError, KeyError, TypeError):
                    misses.append(f"line {n} {text!r}: exit {p.returncode}, {p.stderr!r}")
                    continue
                if (kind == "zero" and got != 0) or (kind == "keep" and got != 4 << 20):
                    misses.append(f"line {n} {text!r}: {got} bytes kept mapped")
                continue
            if p.returncode != 2 or "--vmm-keep: " not in p.stderr or \
                    "is not a size" not in p.stderr:
                misses.append(f"line {n} {text!r}: exit {p.returncode}, {p.stderr!r}")
        self.assertNoMisses(misses)

    def test_shim_vmm_keep(self):
        """GPUARENA_VMM_KEEP through the shim: every zero row is 0 in the statistics' options,
        as are a few byte rows; percentages and errors stop CUDA with the message."""
        picks = [r for r in ROWS if r[2] == "zero"] + \
            [r for r in ROWS if r[2] == "bytes"][:4] + \
            [r for r in ROWS if r[2] in ("error", "percent")][:6]
        misses = []
        with tempfile.TemporaryDirectory() as d:
            def run(row):
                stats = os.path.join(d, f"s{row[0]}.json")
                ok, _, err = probe("shim", {"GPUARENA_MODE": "vmm", "GPUARENA_VMM_KEEP": row[1],
                                            "GPUARENA_STATS": stats})
                doc = None
                if os.path.exists(stats):
                    with open(stats) as f:
                        doc = json.load(f)
                return row, ok, err, doc
            results = each_row(run, picks)
        for (n, text, kind, value), ok, err, doc in results:
            if kind in ("bytes", "zero"):
                got = (doc or {}).get("options", {}).get("vmm_keep")
                want = 0 if kind == "zero" else value
                if not ok or got != want:
                    misses.append(f"line {n} {text!r}: ok {ok}, vmm_keep {got} (want {want}), "
                                  f"{err.strip()}")
            elif ok or "GPUARENA_VMM_KEEP" not in err or "is not a size" not in err:
                misses.append(f"line {n} {text!r}: accepted, {err.strip()}")
        self.assertNoMisses(misses)

    def test_replay_tool(self):
        misses = []
        for (n, text, kind, value), p in tool_rows(512, "--mode", "grow", "--limit"):
            if kind == "bytes":
                try:
                    got = json.loads(p.stdout)["modes"]["grow"]["size_limit"]
                except (ValueError, KeyError, TypeError):
                    got = f"exit {p.returncode}: {p.stderr.strip()}"
                if got != value:
                    misses.append(f"line {n} {text!r}: {got}")
                continue
            try:
                parse_size(text)
                want = None
            except GaError as e:
                want = f"gpuarena: --limit: {e}\n"
            if p.returncode != 2 or p.stderr != want:
                misses.append(f"line {n} {text!r}: exit {p.returncode}, {p.stderr!r}")
        self.assertNoMisses(misses)

    def test_simulated_driver(self):
        def run(row):
            return row, probe("sim", {"SIMCUDA_TOTAL_MEM": row[1]})
        misses = []
        for (n, text, kind, value), (ok, total, err) in each_row(run):
            if text == "":
                continue  # for the simulated driver an empty variable is an unset one
            if kind == "bytes" and (not ok or total != value):
                misses.append(f"line {n} {text!r}: ok {ok}, total {total}, {err.strip()}")
            elif kind != "bytes" and (ok or "SIMCUDA_TOTAL_MEM" not in err):
                misses.append(f"line {n} {text!r}: accepted as {total}")
        self.assertNoMisses(misses)

    def test_shim(self):
        def run(row):
            total = PCT_TOTAL if row[2] == "percent" else BIGGEST
            return row, probe("shim", {"SIMCUDA_TOTAL_MEM": str(total), "GPUARENA_LIMIT": row[1]})
        misses = []
        for (n, text, kind, value), (ok, total, err) in each_row(run):
            if kind in ("error", "zero"):
                if "GPUARENA_LIMIT=" not in err or "is not a size" not in err:
                    misses.append(f"line {n} {text!r}: no message, total {total}")
                continue
            want = percent_of(value, PCT_TOTAL) if kind == "percent" else value
            if want * 3 // 4 < 512:
                # parsed, but a cap whose arena share (0.75) rounds below one 512-byte block can
                # never serve an allocation: the shim refuses it at cuInit (issue 8 item 5)
                if ok or "nothing could ever be allocated" not in err:
                    misses.append(f"line {n} {text!r}: a cap of {want} bytes was not refused")
                continue
            if not ok or total != want or err:
                misses.append(f"line {n} {text!r}: ok {ok}, total {total} (want {want}), "
                              f"{err.strip()}")
        self.assertNoMisses(misses)

    def test_shim_refuses_bad_size(self):
        """A refused GPUARENA_LIMIT stops CUDA (cuInit fails after the message), also on the
        dlsym path the probe takes (issue 8 item 1, the shim's side)."""
        misses = []
        for text in ("12XB", "1e9", "0", "0%", " 8 GiB foo"):
            ok, _, err = probe("shim", {"GPUARENA_LIMIT": text})
            if ok or "is not a size" not in err:
                misses.append(f"{text!r}: cuInit {'succeeded' if ok else 'failed'}, {err!r}")
        self.assertNoMisses(misses)


    def test_no_break_space_named(self):
        """A no-break space looks like a space and is not one: the shim and the command both name
        it (the message read as if spaces were refused: helper-67 F17.4); a plain space passes."""
        hint = "a character that is not ASCII, such as a no-break space"
        ok, _, err = probe("shim", {"GPUARENA_LIMIT": "1\u00a0GiB"})
        self.assertFalse(ok)
        self.assertIn(hint, err)
        from gpuarena_cli import fmt
        with self.assertRaises(Exception) as e:
            fmt.parse_size("1\u00a0GiB")
        self.assertIn(hint, str(e.exception))
        self.assertEqual(fmt.parse_size("1 GiB"), 1 << 30)
        ok, _, err = probe("shim", {"GPUARENA_LIMIT": "1GiBx"})
        self.assertNotIn(hint, err)


class ThousandsOfDigits(unittest.TestCase):
    """helper-60 F4: numbers of more than 4,300 digits (Python's int() limit) ended in a
    traceback (doctor), argparse's "invalid _limit value", or Python's advice to call
    sys.set_int_max_str_digits (a lifetimes CSV, a Kineto JSON); each is now the grammar's or
    the reader's own message. The size rows themselves are in test/sizes.tsv."""

    BIG = "9" * 5000

    def assertMessage(self, p, *words):
        out = p.stdout + p.stderr  # doctor reports on stdout
        self.assertNotIn("Traceback", out)
        self.assertNotIn("set_int_max_str_digits", out)
        self.assertNotIn("invalid", out)
        for w in words:
            self.assertIn(w, out)

    def test_options_and_environment(self):
        over = "(5000 characters) is not a size: it is more than 2^64 - 1 bytes"
        for sub in (["run", "--sim", "--limit", self.BIG, "--", "true"],
                    ["compare", "--sim", "--limit", self.BIG, "--", "true"],
                    ["run", "--sim", "--mode", "vmm", "--vmm-keep", self.BIG, "--", "true"],
                    ["replay", "t.gatrace", "--mode", "arena", "--arena-size", self.BIG]):
            p = gatest.cli(*sub)
            self.assertEqual(p.returncode, 2, sub[:3])
            self.assertMessage(p, over)
        p = gatest.cli("replay", "t.gatrace", "--device", self.BIG)
        self.assertEqual(p.returncode, 2)
        self.assertMessage(p, "is not a device number")
        # a fraction of any length is read, as a size is (FractionSpellings): 0.999... in (0, 1]
        # is taken by the command and the shim alike, 1.000...1 refused by both, quoted short
        p = gatest.cli("run", "--sim", "--fraction", "0." + self.BIG, "--", "true")
        self.assertEqual(p.returncode, 0, p.stderr[-300:])
        p = gatest.cli("run", "--sim", "--fraction", "1." + "0" * 5000 + "1", "--", "true")
        self.assertEqual(p.returncode, 2)
        self.assertMessage(p, "is not a fraction", "(5003 characters)")
        for value in (self.BIG, "1." + "0" * 5000 + "GiB"):
            p = gatest.cli("doctor", "--sim", "--timeout", "60",
                           env={"GPUARENA_LIMIT": value})
            self.assertMessage(p)
            self.assertIn(p.returncode, (0, 1))
        p = gatest.cli("doctor", "--sim", "--timeout", "60",
                       env={"GPUARENA_MEM_FRACTION": "1." + self.BIG})
        self.assertMessage(p, "GPUARENA_MEM_FRACTION=")
        self.assertEqual(p.returncode, 1)

    def test_input_files(self):
        with tempfile.TemporaryDirectory() as d:
            csv = os.path.join(d, "long.csv")
            with open(csv, "w") as f:
                f.write(f"id,lower,upper,size\n1,0,10,{self.BIG}\n")
            p = gatest.cli("import", "lifetimes", csv, "-o", os.path.join(d, "t.gatrace"))
            self.assertEqual(p.returncode, 1)
            self.assertMessage(p, "size 9999999999999999...99999999 (5,000 digits) is too large "
                               "(over 2^64-1)")
            kin = os.path.join(d, "kin.json")
            with open(kin, "w") as f:
                f.write('{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": '
                        f'{{"Bytes": {self.BIG}, "Addr": 1, "Device Id": 0}}}}]}}')
            p = gatest.cli("import", "kineto", kin, "-o", os.path.join(d, "k.gatrace"))
            self.assertEqual(p.returncode, 1)
            self.assertMessage(p, "a number of 5,000 digits")


class HumanBytes(unittest.TestCase):
    def test_units_up_to_eib(self):
        # It stopped at TiB: 2^64-1 printed as 16777216.00 TiB.
        for n, text in ((None, "-"), (0, "0 B"), (1023, "1023 B"), (1 << 10, "1.00 KiB"),
                        (1536 << 20, "1.50 GiB"), (1023 << 40, "1023.00 TiB"),
                        (1 << 50, "1.00 PiB"), (3 << 60, "3.00 EiB"),
                        ((1 << 64) - 1, "16.00 EiB")):
            self.assertEqual(human_bytes(n), text)

    def test_unit_edges_as_printed(self):
        # helper-40 F12: tested before rounding, 1048575 printed as 1024.00 KiB.
        for n, text in ((1048575, "1.00 MiB"), ((1 << 30) - 1, "1.00 GiB"),
                        (1048570, "1023.99 KiB"), (1023, "1023 B"), (-1048575, "-1.00 MiB")):
            self.assertEqual(human_bytes(n), text)


class HumanNs(unittest.TestCase):
    def test_unit_edges_as_printed(self):
        # helper-40 F12: %.3g of 999.999 printed 1e+03 us.
        for ns, text in ((None, "-"), (0, "0 ns"), (999, "999 ns"), (999.6, "1 us"), (999.4, "999 ns"),
                         (1500, "1.5 us"), (999999, "1 ms"), (999999999, "1 s"),
                         (123456789, "123 ms"), (1234 * 10**9, "1234 s")):
            self.assertEqual(human_ns(ns), text)


if __name__ == "__main__":
    unittest.main()
