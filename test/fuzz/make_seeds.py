#!/usr/bin/env python3
"""Writes the seed corpora for the libFuzzer targets in test/fuzz/ (deterministic, stdlib only).

Seeds are generated rather than committed: they are small, they follow the formats in
allocator/ga_trace.h and shim/options.c, and regenerating them keeps binary files out of the
repository. A few rows of the real lifetime sets in GA_TRACES_DIR/lifetimes (default
../shared/traces beside the checkout) are added when that folder is there, so the CSV fuzzer
starts from what real files look like.

Usage: make_seeds.py OUTDIR    (writes OUTDIR/trace, lifetimes, options, replay)
"""

import glob
import os
import struct
import sys

HEADER = b"GATRACE\0" + struct.pack("<IIQQ", 1, 48, 1_700_000_000_000_000_000, 0)


def record(t, addr, size, kind, api=1, dev=0, result=0, stream=0, thread=7, dur=100):
    return struct.pack("<QQQQIIhBBI", t, addr, size, stream, thread, dur, dev, kind, api, result)


def trace_seeds():
    body = record(0, 1 << 32, 4096, 1) + record(10, 1 << 32, 0, 2, api=3) + \
        record(20, 0, 1 << 40, 3, result=2) + record(30, 5, 512, 1, api=4, dev=-1)
    return {
        "empty_body": HEADER,
        "four_records": HEADER + body,
        "partial_last": HEADER + body + body[:17],
        "bad_version": HEADER[:8] + struct.pack("<II", 2, 48) + HEADER[16:] + body[:48],
        "bad_record_size": HEADER[:8] + struct.pack("<II", 1, 64) + HEADER[16:],
        "short_header": HEADER[:20],
    }


def lifetimes_seeds(shared):
    seeds = {
        "small": b"id,lower,upper,size\n0,0,10,1024\n1,2,5,512\n2,5,9,4096\n3,9,12,1\n",
        "zero_length": b"id,lower,upper,size\n0,3,3,64\n1,0,3,8\n",
        "header_only": b"id,lower,upper,size\n",
        "crlf_spaces": b"id, lower, upper, size\r\n7, 1, 2, 3\r\n",
    }
    for path in sorted(glob.glob(os.path.join(shared, "lifetimes", "*.csv")))[:4]:
        with open(path, "rb") as f:
            lines = f.read().splitlines(keepends=True)[:24]
        seeds["real_" + os.path.basename(path)] = b"".join(lines)
    return seeds


def options_seeds():
    # First byte of a line selects the variable (see fuzz_options.c: index mod 15).
    return {
        "limit": b"\x04512MiB\n\x030.5+\n\x01platform",
        "percent": b"\x0450%\n\x02no",
        "units": b"\x041.5GiB\n\x0412345\n\x048G",
        "decimal": b"\x0410GB\n\x00debug\n\x05-",
        "paths": b"\x06/tmp/t.gat\n\x07/usr/lib/libcuda.so.1\n\x030.75",
        # 10 GPUARENA_GROUP, 11 GPUARENA_GROUP_DIR, 12 CUDA_DEVICE_MEMORY_LIMIT, 13 its _0, 14 free form
        "group": b"\x0ateam-a\r\n\x0b/dev/shm\n\x04 8GiB",
        "plugin": b"\x0c8g\n\x0d1024m\n\x0e_LIMT=4GiB",
        "unknown": b"\x0eMEMORY_LIMIT=1\n\x0efraction\n\x0eGROUPDIR=/x",
    }


def replay_seeds():
    # fuzz_replay.c: 4 bytes per event (kind bit, key, size shift, size fraction).
    grow_shrink = b"".join(bytes([0, k, 10 + k % 12, k * 37 % 256]) for k in range(32))
    grow_shrink += b"".join(bytes([1, k, 0, 0]) for k in range(0, 32, 2))
    return {
        "grow_shrink": grow_shrink,
        "big_blocks": bytes([0, 1, 25, 255, 0, 2, 25, 255, 1, 1, 0, 0, 0, 3, 24, 0]),
        "reuse": bytes([0, 5, 9, 1, 0, 5, 9, 2, 1, 5, 0, 0, 1, 5, 0, 0]),
    }


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_seeds.py OUTDIR")
    out = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    # the traces make names (GA_TRACES_DIR, absolute), else ../shared beside the checkout
    shared = os.environ.get("GA_TRACES_DIR") or os.path.join(here, "..", "..", "..", "shared",
                                                               "traces")
    for name, seeds in (("trace", trace_seeds()), ("lifetimes", lifetimes_seeds(shared)),
                        ("options", options_seeds()), ("replay", replay_seeds())):
        os.makedirs(os.path.join(out, name), exist_ok=True)
        for fname, data in seeds.items():
            with open(os.path.join(out, name, fname), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
