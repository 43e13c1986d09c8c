#!/usr/bin/env python3
"""Seeded mutation fuzz of `gpuarena import` (scripts/gpuarena_cli/importers.py).

Every importer reads files written by other programs, so any input, however damaged, must end in
exit code 0 (imported) or 1 with a one-line `gpuarena:` message, never a Python traceback. For each
format this builds small valid seed files (a PyTorch snapshot pickle, a Kineto JSON(.gz), a
lifetimes CSV, an RMM log CSV), derives N mutants from them with a seeded random.Random (byte
flips, truncation, splices, and format-aware value swaps that reach past the parsers into the
pairing and trace-writing code), and runs `gpuarena import FORMAT` and `gpuarena import auto` on
each, in-process for speed (cli.main, as the command runs it). A few mutants per format also go
through the real command in a subprocess to check the exit code. Prints TAP lines: one "ok" per
format when nothing crashed, else one "not ok" per distinct crash (exception type and place), with
the input saved under the crash directory so it can be replayed:
    scripts/gpuarena import FORMAT CRASH_FILE -o /tmp/x.gat

Usage: fuzz_import.py [--count 300] [--seed 1] [--crash-dir DIR] [--repo .] [--tap FILE]
"""

import argparse
import contextlib
import gzip
import io
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile
import traceback

INTERESTING = [0, -1, 1, 511, 2**31, 2**32 - 1, 2**63, 2**64, 2**70, -2**63, 1.5, -0.0,
               1e300, float("inf"), float("-inf"), float("nan"), "", "0x", "-0x1", "1e999",
               "nan", "abc", None, True, False, [], {}, [1, 2], {"a": 1}, "\u00e9\u0000"]
CSV_VALUES = ["0", "-1", "18446744073709551616", "1e999", "nan", "inf", "0x", "0xffffffffffffffff",
              "", " ", "1.5", "9" * 40, "abc", "\"", "12:00:00:000001", "99:99:99:9",
              "00:00:00.1234567891", "allocate", "free", "allocate failure", "-0", "+5", "1_000"]


# ---------------------------------------------------------------- seeds (small, valid files)

def snapshot_seed():
    dev0 = [
        {"action": "segment_alloc", "addr": 1 << 32, "size": 2 << 20, "stream": 0, "time_us": 10},
        {"action": "alloc", "addr": 1 << 32, "size": 4096, "stream": 0, "time_us": 11,
         "frames": []},
        {"action": "alloc", "addr": (1 << 32) + 4096, "size": 512, "stream": 7, "time_us": 12},
        {"action": "free_requested", "addr": 1 << 32, "size": 4096, "stream": 0, "time_us": 13},
        {"action": "free_completed", "addr": 1 << 32, "size": 4096, "stream": 0, "time_us": 14},
        {"action": "oom", "size": 1 << 40, "stream": 0, "time_us": 15},
        {"action": "free_completed", "addr": 99, "size": 1, "time_us": 16},
        {"action": "segment_free", "addr": 1 << 32, "size": 2 << 20, "stream": 0, "time_us": 17},
    ]
    segs = [{"device": 0, "address": 1 << 33, "total_size": 2 << 20, "stream": 0, "blocks": []}]
    return {"segments": segs, "device_traces": [dev0, []]}


def kineto_seed():
    def mem(ts, addr, nbytes, dev_type=1):
        return {"ph": "i", "name": "[memory]", "ts": ts, "pid": 1, "tid": 2,
                "args": {"Device Type": dev_type, "Device Id": 0, "Addr": addr, "Bytes": nbytes,
                         "Total Allocated": 0, "Total Reserved": 0}}
    evs = [{"ph": "X", "name": "aten::mm", "ts": 1.0, "dur": 2.0, "pid": 1, "tid": 2},
           mem(1.5, 4096, 1024), mem(2.25, 8192, 512), mem(3, 4096, -1024),
           mem(4, 123, 64, dev_type=0), mem("5.5", 8192, -512)]
    anon = mem(6, None, 256)
    del anon["args"]["Addr"]
    evs.append(anon)
    return {"schemaVersion": 1, "traceEvents": evs}


LIFETIMES_SEED = "id,lower,upper,size\n0,0,10,1024\n1,2,5,512\n2,5,9,4096\n3,9,12,1\n"
RMM_SEED = ("Thread,Time,Action,Pointer,Size,Stream\n"
            "140,08:00:00:000001,allocate,0x7f0000000000,1024,0x0\n"
            "140,08:00:00:000010,allocate,0x7f0000000400,512,0x0\n"
            "141,08:00:00:000020,free,0x7f0000000000,1024,0x0\n"
            "141,08:00:00:000030,allocate failure,0x0,1099511627776,0x0\n"
            "140,23:59:59:999999,allocate,0x7f0000001000,64,0x1\n"
            "140,00:00:00:000002,free,0x7f0000001000,64,0x1\n")


def seeds():
    """format -> list of seed byte strings."""
    snap = snapshot_seed()
    kin = json.dumps(kineto_seed()).encode()
    return {
        "pytorch-snapshot": [pickle.dumps(snap, protocol=2), pickle.dumps(snap, protocol=4)],
        "kineto": [kin, gzip.compress(kin, mtime=0)],
        "lifetimes": [LIFETIMES_SEED.encode()],
        "rmm": [RMM_SEED.encode()],
    }


# ---------------------------------------------------------------- mutators

def mutate_bytes(rng, data):
    """Generic byte-level damage: what a truncated download or a bit flip does."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if not b:
            b = bytearray(rng.randbytes(rng.randint(1, 8)))
        pos = rng.randrange(len(b))
        if op == 0:
            b[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[pos] = rng.randrange(256)
        elif op == 2:
            del b[pos:pos + rng.randint(1, 16)]
        elif op == 3:
            b[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op == 4:
            b = b[:pos]
        else:
            end = min(len(b), pos + rng.randint(1, 64))
            b[pos:pos] = b[pos:end]
    return bytes(b)


def mutate_value(rng, obj, depth=0):
    """Replaces one value somewhere in a dict/list tree with an interesting one."""
    if isinstance(obj, dict) and obj:
        k = rng.choice(list(obj))
        if depth > 0 and rng.random() < 0.25:
            obj[k] = rng.choice(INTERESTING)
        elif rng.random() < 0.1:
            del obj[k]
        else:
            obj[k] = mutate_value(rng, obj[k], depth + 1)
        return obj
    if isinstance(obj, list) and obj:
        i = rng.randrange(len(obj))
        if rng.random() < 0.2:
            obj.insert(i, rng.choice(INTERESTING))
        else:
            obj[i] = mutate_value(rng, obj[i], depth + 1)
        return obj
    return rng.choice(INTERESTING)


def mutate_csv(rng, text):
    lines = text.splitlines()
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(1, len(lines)) if len(lines) > 1 else 0
        cells = lines[i].split(",")
        op = rng.randrange(4)
        if op == 0:
            cells[rng.randrange(len(cells))] = rng.choice(CSV_VALUES)
        elif op == 1:
            cells.insert(rng.randrange(len(cells) + 1), rng.choice(CSV_VALUES))
        elif op == 2:
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
        else:
            lines[i], lines[-1] = lines[-1], lines[i]
        if op < 2:
            lines[i] = ",".join(cells)
    return ("\n".join(lines) + ("\n" if rng.random() < 0.8 else "")).encode()


def mutate(rng, fmt, seed):
    """One mutant: half format-aware (valid container, odd values), half raw bytes."""
    if rng.random() < 0.5:
        return mutate_bytes(rng, seed)
    if fmt == "pytorch-snapshot":
        snap = mutate_value(rng, mutate_value(rng, snapshot_seed()))
        return pickle.dumps(snap, protocol=rng.choice([2, 4]))
    if fmt == "kineto":
        doc = kineto_seed()
        for _ in range(rng.randint(1, 3)):
            doc = mutate_value(rng, doc)
        text = json.dumps(doc, allow_nan=True).encode()
        return gzip.compress(text, mtime=0) if seed[:2] == b"\x1f\x8b" else text
    return mutate_csv(rng, seed.decode())


# ---------------------------------------------------------------- running the importer

def run_in_process(cli, argv):
    """(outcome, detail): ok, rejected, bad-reject (exit 1 without a message) or crash."""
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = cli.main(argv)
    except SystemExit as e:
        return "crash", f"SystemExit({e.code}) from argument parsing"
    except Exception as e:  # the finding: an exception that reaches the user as a traceback
        tb = traceback.extract_tb(e.__traceback__)[-1]
        where = f"{type(e).__name__} at {os.path.basename(tb.filename)}:{tb.lineno} ({tb.name})"
        return "crash", (where, str(e)[:100])
    if rc == 0:
        return "ok", ""
    if rc == 1 and "gpuarena:" in err.getvalue():
        return "rejected", ""
    return "crash", (f"exit {rc} without a gpuarena: message", err.getvalue()[:100])


def run_subprocess(repo, fmt, path, out):
    p = subprocess.run([sys.executable, os.path.join(repo, "scripts", "gpuarena"), "import", fmt,
                        path, "-o", out], capture_output=True, text=True, timeout=60)
    if p.returncode in (0, 1) and "Traceback" not in p.stderr and \
            (p.returncode == 0 or "gpuarena:" in p.stderr):
        return None
    return f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1:] if p.stderr else ''}"


def fuzz_format(cli, args, fmt, seed_list, tmp):
    rng = random.Random(f"{args.seed}:{fmt}")
    crashes = {}  # signature (exception type and place) -> description with the saved input
    tally = {"ok": 0, "rejected": 0}
    for n in range(args.count):
        data = mutate(rng, fmt, rng.choice(seed_list))
        path = os.path.join(tmp, f"in-{n}")
        with open(path, "wb") as f:
            f.write(data)
        for name in (fmt, "auto"):
            outcome, detail = run_in_process(cli, ["import", name, path, "-o",
                                                   os.path.join(tmp, "out.gat")])
            if outcome != "crash":
                tally[outcome] += 1
                continue
            sig, message = detail
            if sig not in crashes:
                os.makedirs(args.crash_dir, exist_ok=True)
                saved = os.path.join(args.crash_dir, f"{fmt}-{n}")
                with open(saved, "wb") as f:
                    f.write(data)
                crashes[sig] = f"'{message}' (gpuarena import {name} {saved} -o x.gat)"
        if n < args.subprocess_count:
            bad = run_subprocess(args.repo, fmt, path, os.path.join(tmp, "out.gat"))
            if bad and f"subprocess: {bad}" not in crashes:
                crashes[f"subprocess: {bad}"] = f"(input {path})"
    return tally, crashes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=300, help="mutants per format")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--subprocess-count", type=int, default=3,
                    help="mutants per format also run through the real command")
    ap.add_argument("--crash-dir", default="fuzz-import-crashes")
    ap.add_argument("--repo", default=".")
    ap.add_argument("--formats", default="pytorch-snapshot,kineto,lifetimes,rmm")
    ap.add_argument("--tap", help="write the TAP lines here (default stdout)")
    args = ap.parse_args()
    # A file, not stdout: the importers print their counts to the stdout they saw at import time.
    tap = open(args.tap, "a") if args.tap else sys.stdout
    sys.path.insert(0, os.path.join(args.repo, "scripts"))
    try:
        from gpuarena_cli import cli
    except ImportError as e:
        print(f"not ok - import fuzz: cannot load scripts/gpuarena_cli ({e})", file=tap)
        return 0
    with tempfile.TemporaryDirectory(prefix="gpuarena-import-fuzz-") as tmp:
        for fmt in args.formats.split(","):
            seed_list = seeds()[fmt]
            tally, crashes = fuzz_format(cli, args, fmt, seed_list, tmp)
            if not crashes:
                print(f"ok - import fuzz {fmt}: {args.count} mutants x (named, auto): "
                      f"{tally['ok']} imported, {tally['rejected']} rejected with a gpuarena: "
                      "message, no traceback", file=tap)
            for sig, what in sorted(crashes.items()):
                print(f"not ok - import fuzz {fmt}: {sig}: {what}", file=tap)
            tap.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
