/* The vmm pool from outside (an outside check of 2026-12-06, written from ga_pool.h and the
 * README): a seeded random mix of allocations (small, odd, granule multiples, blocks of up to
 * 64 MiB), frees, interior and double frees, interior lookups and trims, under keeps of 0, 8 and
 * 64 MiB and with and without a limit. The backend keeps the set of mapped granules itself. After
 * every step: live blocks never overlap and are aligned; every granule under a live block is
 * mapped; the mapped granules are exactly those under live blocks plus `kept`, and kept <= keep;
 * the limit is never passed; in_use, live, in_use_requested, peak_in_use, reserved and
 * peak_reserved equal the model's; ga_pool_check is clean (every tenth step). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "ga_pool.h"
#include "testutil.h"

#define G ((size_t)2 << 20)
static uint64_t rs;
static uint64_t rnd(void)
{
    uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static long step;
static uint64_t seed;
static char fail_msg[512];
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(fail_msg, sizeof fail_msg, __VA_ARGS__);                                          \
        ck_abort_msg("seed %" PRIu64 " step %ld: %s", seed, step, fail_msg);                       \
    } while (0)
/* mapped granules: a sorted array of addresses */
static uintptr_t *mg;
static size_t nmg, capmg, peak_mapped;
static uintptr_t vnext = (uintptr_t)1 << 40;
static size_t find(uintptr_t a)
{
    size_t lo = 0, hi = nmg;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (mg[m] < a)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}
static int vr(void *c, size_t s, uintptr_t *b)
{
    (void)c;
    *b = vnext;
    vnext += s + G;
    return 0;
}
static void vrel(void *c, uintptr_t b, size_t s)
{
    (void)c, (void)b, (void)s;
}
static int mp(void *c, uintptr_t a, size_t s, uint64_t *h)
{
    (void)c;
    if (s != G || a % G)
        FAIL("map %zu at %#lx", s, (unsigned long)a);
    size_t i = find(a);
    if (i < nmg && mg[i] == a)
        FAIL("granule %#lx mapped twice", (unsigned long)a);
    if (nmg == capmg)
        mg = realloc(mg, (capmg = capmg ? 2 * capmg : 1024) * sizeof *mg);
    memmove(&mg[i + 1], &mg[i], (nmg - i) * sizeof *mg);
    mg[i] = a;
    nmg++;
    if (nmg * G > peak_mapped)
        peak_mapped = nmg * G;
    *h = a | 1;
    return 0;
}
static void ump(void *c, uintptr_t a, size_t s, uint64_t h)
{
    (void)c;
    (void)s;
    size_t i = find(a);
    if (i >= nmg || mg[i] != a || h != (a | 1))
        FAIL("unmap of unmapped %#lx", (unsigned long)a);
    memmove(&mg[i], &mg[i + 1], (nmg - i - 1) * sizeof *mg);
    nmg--;
}
typedef struct {
    uintptr_t a;
    size_t s, req;
} blk_t;
static blk_t *L;
static size_t nl, capl;
static int cmpb(const void *x, const void *y)
{
    uintptr_t a = ((const blk_t *)x)->a, b = ((const blk_t *)y)->a;
    return a < b ? -1 : a > b;
}
static size_t pick(int wl)
{
    uint64_t r = rnd();
    switch (wl) {
    case 0:
        return r % 10 == 0 ? (r >> 8) % (64 << 20) + 1
               : r % 3     ? (r >> 8) % 8192 + 1
                           : (r >> 8) % (1 << 20) + 1;
    case 1: {
        static const size_t k[] = {512, 4096, 100000, 1 << 20, 3 << 20, (2 << 20) + 512, 6 << 20};
        return k[r % 7];
    }
    default: return ((r >> 8) % 64 + 1) * G - (r % 2 ? 0 : 512);
    }
}
static void run_vmm(uint64_t seed_in, long steps, int wl, size_t keep, size_t limit)
{
    seed = seed_in;
    rs = seed;
    nmg = 0;
    peak_mapped = 0;
    nl = 0;
    vnext = (uintptr_t)1 << 40;
    ga_pool_backend_t be = {
        .va_reserve = vr, .va_release = vrel, .map = mp, .unmap = ump, .granularity = G};
    ga_pool_config_t cfg = {
        .mode = GA_MODE_VMM, .va_size = (size_t)1 << 34, .keep = keep, .limit = limit};
    ga_status_t st;
    ga_pool_t *p = ga_pool_create(&be, &cfg, &st);
    if (!p)
        FAIL("create %s", ga_status_str(st));
    uint64_t in_use = 0, req = 0, peak = 0, fails = 0;
    for (step = 0; step < steps; step++) {
        uint64_t r = rnd() % 100;
        if (r < 50) {
            size_t s = pick(wl);
            uintptr_t a;
            st = ga_pool_alloc(p, s, &a);
            if (st == GA_OK) {
                if (a % 512)
                    FAIL("unaligned");
                if (nl == capl)
                    L = realloc(L, (capl = capl ? 2 * capl : 1024) * sizeof *L);
                L[nl++] = (blk_t){a, (s + 511) & ~(size_t)511, s};
                in_use += L[nl - 1].s;
                req += s;
                if (in_use > peak)
                    peak = in_use;
            } else if (st == GA_ENOMEM)
                fails++;
            else
                FAIL("alloc %zu: %s", s, ga_status_str(st));
        } else if (r < 90 && nl) {
            size_t k = rnd() % nl;
            size_t sz = 0;
            size_t off = (512 * (1 + rnd() % 4)) % L[k].s;
            if (off && rnd() % 8 == 0) {
                st = ga_pool_free(p, L[k].a + off, &sz);
                if (L[k].s > 512 && st != GA_EINTERIOR && st != GA_OK)
                    FAIL("interior free: %s", ga_status_str(st));
                if (st == GA_OK)
                    FAIL("interior free accepted");
                continue;
            }
            st = ga_pool_free(p, L[k].a, &sz);
            if (st != GA_OK || sz != L[k].s)
                FAIL("free: %s %zu/%zu", ga_status_str(st), sz, L[k].s);
            in_use -= L[k].s;
            req -= L[k].req;
            uintptr_t gone = L[k].a;
            L[k] = L[--nl];
            st = ga_pool_free(p, gone, &sz);
            if (st == GA_OK)
                FAIL("double free accepted");
        } else if (r < 97 && nl) {
            size_t k = rnd() % nl;
            uintptr_t b;
            size_t s;
            uintptr_t q = L[k].a + rnd() % L[k].s;
            st = ga_pool_lookup(p, q, &b, &s);
            if (st != GA_OK || b != L[k].a || s != L[k].s)
                FAIL("lookup: %s", ga_status_str(st));
            if (ga_pool_live_size(p, L[k].a) != L[k].s)
                FAIL("live_size");
        } else {
            ga_pool_trim(p);
        }
        /* checks */
        if (nl) /* qsort of a NULL array: undefined even when empty */
            qsort(L, nl, sizeof *L, cmpb);
        size_t need = 0;
        uintptr_t last_g = 0;
        int have = 0;
        for (size_t i = 0; i < nl; i++) {
            if (i && L[i - 1].a + L[i - 1].s > L[i].a)
                FAIL("overlap");
            for (uintptr_t g = L[i].a / G * G; g < L[i].a + L[i].s; g += G) {
                size_t j = find(g);
                if (j >= nmg || mg[j] != g)
                    FAIL("live block %#lx: granule %#lx not mapped", (unsigned long)L[i].a,
                         (unsigned long)g);
                if (!have || g != last_g)
                    need++;
                last_g = g;
                have = 1;
            }
        }
        ga_stats_t s;
        ga_pool_stats(p, &s);
        if (s.in_use != in_use || s.live != nl || s.in_use_requested != req ||
            s.peak_in_use != peak)
            FAIL("stats in_use %" PRIu64 "/%" PRIu64 " live %" PRIu64 "/%zu req %" PRIu64
                 "/%" PRIu64 " peak %" PRIu64 "/%" PRIu64,
                 s.in_use, in_use, s.live, nl, s.in_use_requested, req, s.peak_in_use, peak);
        if (s.reserved != nmg * G)
            FAIL("reserved %" PRIu64 " mapped %zu", s.reserved, nmg * G);
        if (nmg * G != need * G + s.kept)
            FAIL("mapped %zu granules, live need %zu, kept %" PRIu64, nmg, need, s.kept / G);
        if (s.kept > keep)
            FAIL("kept %" PRIu64 " > keep %zu", s.kept, keep);
        if (limit && nmg * G > limit)
            FAIL("mapped over the limit");
        if (s.peak_reserved != peak_mapped)
            FAIL("peak_reserved %" PRIu64 " peak mapped %zu", s.peak_reserved, peak_mapped);
        if (step % 10 == 0) {
            char rep[256];
            int n = ga_pool_check(p, rep, sizeof rep);
            if (n)
                FAIL("check %d: %s", n, rep);
        }
    }
    (void)fails;
    ga_pool_destroy(p);
    free(mg);
    free(L);
    mg = NULL;
    L = NULL;
    nmg = capmg = nl = capl = 0;
}

START_TEST(test_vmm_matches_outside_model)
{
    static const size_t keeps[] = {0, 8 << 20, 64 << 20};
    int wl = _i / 6, k = (_i / 2) % 3, lim = _i % 2;
    run_vmm(0x7e5eedull + (uint64_t)_i, 2500, wl, keeps[k], lim ? (size_t)512 << 20 : 0);
}
END_TEST

Suite *outside_vmm_suite(void)
{
    Suite *s = suite_create("outside_vmm");
    TCase *tc = tcase_create("outside_vmm");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_vmm_matches_outside_model, 0, 18);
    suite_add_tcase(s, tc);
    return s;
}
