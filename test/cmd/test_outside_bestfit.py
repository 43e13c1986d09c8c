"""An outside model of `gpuarena replay` on buffer-lifetime CSVs (an outside check of issues 2
and 4, helper-109), written from ga_arena.h, the README and ../shared/traces/README.md alone.

Seeded random CSVs (zero-length rows, equal times and sizes that are not multiples of 512
included) are replayed by the command, and every figure it prints is recomputed here:
  - the events in the order the README gives: at one time, frees first, then each zero-length
    row's alloc and free together, then allocs; rows in file order within each;
  - arena mode: one region of the arena size, placement in the smallest free chunk that fits
    (lowest address among equal sizes), a chunk split when anything is left over, frees merged at
    once with free neighbours; failed allocations, the first out-of-memory, the fragmentation
    after every event (1 - largest free / total free) at its highest and at the end, and the
    smallest arena size that runs the whole CSV (every size from the peak up, in 512-byte steps);
  - platform mode under --limit: one reservation per block of its 512-rounded size, refused when
    the bytes held would pass the limit;
  - the peaks of 512-rounded and of requested live bytes, and --check finding nothing.
"""

import json
import os
import random
import tempfile
import unittest

import gatest

SEEDS = range(12)


def rnd512(n):
    return -(-n // 512) * 512


def make_rows(rng):
    rows, times = [], rng.randint(8, 60)
    sizes = [rng.choice((512, 1000, 4096, 5000)) * rng.randint(1, 40) for _ in range(6)]
    for i in range(rng.randint(20, 90)):
        lo = rng.randrange(times)
        up = lo + rng.choice((0, 1, 1, 2, 3, 5, 8, rng.randint(0, times)))
        size = rng.choice(sizes) if rng.random() < 0.6 else rng.randint(1, 300000)
        rows.append((i * 3 + 7, lo, up, size))
    rng.shuffle(rows)
    return rows


def events(rows):
    """(kind, row index, size) in replay order: kind 'a' alloc, 'f' free."""
    keyed = []
    for n, (_id, lo, up, size) in enumerate(rows):
        if lo == up:
            keyed += [((lo, 1, n, 0), ("a", n, size)), ((lo, 1, n, 1), ("f", n, size))]
        else:
            keyed += [((lo, 2, n, 0), ("a", n, size)), ((up, 0, n, 0), ("f", n, size))]
    return [ev for _k, ev in sorted(keyed)]


def live_peaks(evs):
    cur = req = peak = peak_req = 0
    for kind, _n, size in evs:
        sign = 1 if kind == "a" else -1
        cur += sign * rnd512(size)
        req += sign * size
        peak, peak_req = max(peak, cur), max(peak_req, req)
    return peak, peak_req


def best_fit(evs, arena):
    """The arena's answers over the events: failed allocs, first oom index, max and final frag."""
    free = {0: arena} if arena else {}  # start -> size
    where, failed, first, max_frag = {}, 0, None, 0.0

    def frag():
        total = sum(free.values())
        return 1 - max(free.values()) / total if total else 0.0
    for i, (kind, n, size) in enumerate(evs):
        if kind == "a":
            need = rnd512(size)
            fits = [(s, a) for a, s in free.items() if s >= need]
            if not fits:
                failed += 1
                first = i if first is None else first
                where[n] = None
            else:
                s, a = min(fits)
                del free[a]
                if s > need:
                    free[a + need] = s - need
                where[n] = (a, need)
        else:
            got = where.pop(n)
            if got is not None:
                a, size = got
                if a + size in free:
                    size += free.pop(a + size)
                before = [b for b, s in free.items() if b + s == a]
                if before:
                    a = before[0]
                    size += free.pop(a)
                free[a] = size
        max_frag = max(max_frag, frag())
    return failed, first, max_frag, frag()


def platform(evs, limit):
    held, failed, first, served = 0, 0, None, set()
    for i, (kind, n, size) in enumerate(evs):
        if kind == "a":
            if held + rnd512(size) > limit:
                failed += 1
                first = i if first is None else first
            else:
                held += rnd512(size)
                served.add(n)
        elif n in served:
            held -= rnd512(size)
    return failed, first


class OutsideBestFit(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def replay(self, path, *args):
        p = gatest.cli("replay", path, "--json", "--check", *args)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_replay_matches_outside_model(self):
        for seed in SEEDS:
            with self.subTest(seed=seed):
                rng = random.Random(seed)
                rows = make_rows(rng)
                path = os.path.join(self.tmp.name, f"r{seed}.csv")
                with open(path, "w") as f:
                    f.write("id,lower,upper,size\n")
                    f.writelines(f"{i},{lo},{up},{s}\n" for i, lo, up, s in rows)
                evs = events(rows)
                peak, peak_req = live_peaks(evs)
                smallest = peak
                while best_fit(evs, smallest)[0]:
                    smallest += 512
                tight = max(512, rnd512(peak * 9 // 10) if seed % 2 else peak)
                limit = max(512, rnd512(peak * 3 // 4))
                doc = self.replay(path, "--mode", "arena,platform", "--arena-size", str(tight),
                                  "--limit", str(limit))
                self.assertEqual(doc["events"], len(evs))
                self.assertEqual(doc["peak_live"], peak)
                arena, plat = doc["modes"]["arena"], doc["modes"]["platform"]
                failed, first, max_frag, final_frag = best_fit(evs, tight)
                self.assertEqual(arena["size_limit"], tight)
                self.assertEqual(arena["failed_allocs"], failed)
                self.assertEqual(arena["first_oom"], first)
                self.assertAlmostEqual(arena["max_frag"], max_frag, places=5)
                self.assertAlmostEqual(arena["final_frag"], final_frag, places=5)
                self.assertEqual(arena["min_size"], smallest)
                self.assertEqual(arena["check_failures"], 0)
                self.assertGreater(arena["checks"], 0)
                if not failed:
                    self.assertEqual(arena["peak_in_use"], peak)
                    self.assertEqual(arena["peak_requested"], peak_req)
                pfailed, pfirst = platform(evs, limit)
                self.assertEqual(plat["size_limit"], limit)
                self.assertEqual((plat["failed_allocs"], plat["first_oom"]), (pfailed, pfirst))
                self.assertEqual(plat["min_size"], peak)
                self.assertLessEqual(plat["peak_reserved"], limit)
                self.assertEqual(plat["check_failures"], 0)


if __name__ == "__main__":
    unittest.main()
