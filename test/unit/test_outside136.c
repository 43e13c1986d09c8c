/* An outside check of the vmm pool's parking (helper-136, 2026-12-07), written from ga_pool.h and
 * the README: seeded random workloads in vmm mode whose sizes are small (under half a granule),
 * general (odd sizes of 3 granules and up), class sizes (a few odd sizes from half a granule to 3
 * granules, several live at once) and granule multiples, with many frees of a size followed by
 * an allocation of the same size (what parking serves), under keeps of 0, 2, 8 and 64 MiB, with
 * and without a limit. The backend maps granule by granule and keeps its own set of mapped
 * granules. After every step, from the outside:
 *  - the backend's mapped bytes equal the pool's `reserved`;
 *  - every granule a live block touches is mapped, and the mapped bytes are exactly (the granules
 *    live blocks touch) + `kept`, with kept <= keep (parked blocks are freed memory: what they
 *    hold is kept);
 *  - the limit is never passed;
 *  - a ga_pool_fits that answers 1 is followed by an allocation that succeeds with no backend call;
 *  - a freed address answers as freed (lookup GA_ENOTOWNED, live size 0, a second free
 *    GA_EDOUBLE with nothing changed) until it is handed out again;
 *  - live blocks never overlap;
 *  - a trim leaves mapped exactly the granules live blocks touch, and says how much it gave back.
 * And the cost side of parking (issue 10: a keep absorbs remapping churn): blocks freed and
 * allocated again in rounds whose bytes fit the keep map nothing after the first round, and
 * ga_pool_fits says 1 after a parked block where the allocation maps nothing (both failed from
 * 4ef3dd4, the first parking that held granules, until the keep counted the granules parked blocks
 * touch once each and fits gave the general area's parked blocks back first; helper-136). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ga_pool.h"
#include "testutil.h"


#define GR ((size_t)2 << 20)
#define VA0 ((uintptr_t)1 << 40)
#define NG ((size_t)1 << 16) /* granules of fake address space: 128 GiB */
#define MAXLIVE 400

static uint64_t rs;
static uint64_t rnd(void)
{
    uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Backend: address space handed out from VA0, granules mapped one by one. */
static struct {
    uintptr_t next;
    long calls;          /* every call the pool makes */
    long maps;
    size_t mapped;       /* bytes */
    unsigned char *gmap; /* per granule of the fake space: mapped */
} be;

static size_t gidx(uintptr_t a) { return (size_t)((a - VA0) / GR); }

static int b_va_reserve(void *ctx, size_t size, uintptr_t *base)
{
    (void)ctx;
    be.calls++;
    if (size % GR || be.next + size > VA0 + NG * GR)
        return -1;
    *base = be.next;
    be.next += size;
    return 0;
}
static void b_va_release(void *ctx, uintptr_t base, size_t size)
{
    (void)ctx;
    be.calls++;
    for (size_t g = gidx(base); g < gidx(base + size); g++)
        ck_assert_msg(!be.gmap[g], "a range released with granule %zu still mapped", g);
}
static int b_map(void *ctx, uintptr_t addr, size_t size, uint64_t *handle)
{
    (void)ctx;
    be.calls++;
    be.maps++;
    ck_assert_msg(size == GR && addr % GR == 0 && addr >= VA0 && gidx(addr) < NG,
                  "map of %zu bytes at %#" PRIxPTR, size, addr);
    ck_assert_msg(!be.gmap[gidx(addr)], "granule %#" PRIxPTR " mapped twice", addr);
    be.gmap[gidx(addr)] = 1;
    be.mapped += GR;
    *handle = addr;
    return 0;
}
static void b_unmap(void *ctx, uintptr_t addr, size_t size, uint64_t handle)
{
    (void)ctx;
    be.calls++;
    ck_assert_msg(size == GR && handle == addr && be.gmap[gidx(addr)],
                  "unmap of a granule not mapped (%#" PRIxPTR ")", addr);
    be.gmap[gidx(addr)] = 0;
    be.mapped -= GR;
}

static ga_pool_t *make(size_t keep, size_t limit)
{
    memset(&be, 0, sizeof be);
    be.next = VA0;
    be.gmap = calloc(NG, 1);
    ck_assert_ptr_nonnull(be.gmap);
    ga_pool_backend_t b = {.va_reserve = b_va_reserve, .va_release = b_va_release, .map = b_map,
                           .unmap = b_unmap, .granularity = GR};
    ga_pool_config_t cfg = {.mode = GA_MODE_VMM, .va_size = (size_t)1 << 30, .keep = keep,
                            .limit = limit};
    ga_status_t st = GA_OK;
    ga_pool_t *p = ga_pool_create(&b, &cfg, &st);
    ck_assert_msg(p != NULL, "no vmm pool (%s)", ga_status_str(st));
    return p;
}

static void unmake(ga_pool_t *p)
{
    ga_pool_destroy(p);
    ck_assert_msg(be.mapped == 0, "%zu bytes left mapped after destroy", be.mapped);
    free(be.gmap);
}

/* The model: live blocks, and addresses freed since (not handed out again). */
typedef struct {
    uintptr_t base;
    size_t size; /* rounded */
} blk_t;
static blk_t live[MAXLIVE];
static int nlive;
static uintptr_t freed[64];
static int nfreed;
static unsigned char *touch; /* scratch: granules live blocks touch */
static long nfits, nback, nfail; /* coverage: fits said 1; a block taken back where its size was
                                  * just freed (parking's way); refused allocations */

static size_t rnd_size(void)
{
    static const size_t cls[] = {MIB, 3 * MIB / 2, MIB + 512, 3 * MIB + 4 * KIB, 5 * MIB / 2,
                                 5 * MIB + 512};
    switch (rnd() % 8) {
    case 0:
    case 1:
    case 2: /* small, some just under half a granule */
        return rnd() % 4 ? 1 + rnd() % (64 * KIB) : MIB - 512 * (1 + rnd() % 4);
    case 3:
    case 4:
        return cls[rnd() % (sizeof cls / sizeof cls[0])];
    case 5: /* granule multiples */
        return GR << (rnd() % 4);
    case 6: /* general: odd, 3 granules and up */
        return 6 * MIB + 512 * (1 + rnd() % 8192);
    default: /* big, either kind */
        return rnd() % 2 ? 32 * MIB : 20 * MIB + 4 * KIB;
    }
}

/* Granules live blocks touch, in bytes; every one must be mapped. */
static size_t touched(const char *where, long step)
{
    size_t n = 0;
    for (int i = 0; i < nlive; i++) {
        for (size_t g = gidx(live[i].base); g <= gidx(live[i].base + live[i].size - 1); g++) {
            REQUIRE(be.gmap[g], "%s, step %ld: granule %zu under the live block %#" PRIxPTR
                    " (%zu bytes) is not mapped", where, step, g, live[i].base, live[i].size);
            if (!touch[g]) {
                touch[g] = 1;
                n += GR;
            }
        }
    }
    for (int i = 0; i < nlive; i++)
        for (size_t g = gidx(live[i].base); g <= gidx(live[i].base + live[i].size - 1); g++)
            touch[g] = 0;
    return n;
}

static void check_all(ga_pool_t *p, size_t keep, size_t limit, const char *where, long step)
{
    ga_stats_t s;
    ga_pool_stats(p, &s);
    REQUIRE(be.mapped == s.reserved, "%s, step %ld: the backend maps %zu bytes, the pool says "
            "reserved %" PRIu64, where, step, be.mapped, s.reserved);
    size_t t = touched(where, step);
    REQUIRE(be.mapped == t + s.kept, "%s, step %ld: mapped %zu != %zu under live blocks + kept %"
            PRIu64, where, step, be.mapped, t, s.kept);
    REQUIRE(s.kept <= keep, "%s, step %ld: kept %" PRIu64 " over the keep %zu", where, step,
            s.kept, keep);
    REQUIRE(!limit || be.mapped <= limit, "%s, step %ld: mapped %zu over the limit %zu", where,
            step, be.mapped, limit);
    for (int i = 0; i < nfreed; i++) {
        uintptr_t a = freed[i];
        REQUIRE(ga_pool_lookup(p, a, NULL, NULL) == GA_ENOTOWNED && ga_pool_live_size(p, a) == 0,
                "%s, step %ld: freed %#" PRIxPTR " answers as live", where, step, a);
    }
}

static void forget_freed(uintptr_t a, size_t size)
{
    for (int i = 0; i < nfreed; i++)
        if (freed[i] >= a && freed[i] < a + size)
            freed[i--] = freed[--nfreed];
}

static void do_alloc(ga_pool_t *p, size_t size, const char *where, long step)
{
    if (nlive == MAXLIVE)
        return;
    int fits = ga_pool_fits(p, size);
    long calls = be.calls;
    uintptr_t a = 0;
    ga_status_t st = ga_pool_alloc(p, size, &a);
    if (fits)
        REQUIRE(st == GA_OK && be.calls == calls, "%s, step %ld: ga_pool_fits(%zu) said 1, the "
                "allocation answered %s after %ld backend calls", where, step, size,
                ga_status_str(st), be.calls - calls);
    nfits += fits;
    if (st != GA_OK) {
        nfail++;
        REQUIRE(st == GA_ENOMEM, "%s, step %ld: allocation of %zu: %s", where, step, size,
                ga_status_str(st));
        return;
    }
    size_t r = (size + GA_ALIGN - 1) & ~(GA_ALIGN - 1);
    REQUIRE(a % GA_ALIGN == 0, "unaligned block");
    for (int i = 0; i < nlive; i++)
        REQUIRE(a + r <= live[i].base || live[i].base + live[i].size <= a,
                "%s, step %ld: [%#" PRIxPTR ", +%zu) overlaps the live [%#" PRIxPTR ", +%zu)",
                where, step, a, r, live[i].base, live[i].size);
    forget_freed(a, r);
    live[nlive++] = (blk_t){a, r};
}

static void do_free(ga_pool_t *p, int i, const char *where, long step)
{
    blk_t b = live[i];
    live[i] = live[--nlive];
    size_t got = 0;
    ASSERT_STATUS(ga_pool_free(p, b.base, &got), GA_OK);
    REQUIRE(got == b.size, "%s, step %ld: freed %zu bytes, allocated %zu", where, step, got,
            b.size);
    /* A second free: refused, nothing changed. */
    ga_stats_t s0, s1;
    ga_pool_stats(p, &s0);
    long calls = be.calls;
    ASSERT_STATUS(ga_pool_free(p, b.base, NULL), GA_EDOUBLE);
    ga_pool_stats(p, &s1);
    REQUIRE(be.calls == calls && !memcmp(&s0, &s1, sizeof s0), "%s, step %ld: a double free "
            "changed the pool", where, step);
    if (nfreed < 64)
        freed[nfreed++] = b.base;
    else
        freed[rnd() % 64] = b.base;
}

static void workload(uint64_t seed, size_t keep, size_t limit, long steps)
{
    char where[96];
    snprintf(where, sizeof where, "seed %" PRIu64 ", keep %zu MiB, limit %zu MiB", seed,
             keep / MIB, limit / MIB);
    rs = seed;
    ga_pool_t *p = make(keep, limit);
    touch = calloc(NG, 1);
    nlive = nfreed = 0;
    nfits = nback = nfail = 0;
    size_t last = 0;
    for (long step = 0; step < steps; step++) {
        unsigned op = (unsigned)(rnd() % 100);
        size_t target = 24 + rnd() % 40; /* live blocks the workload hovers around */
        if (op < 2) {
            ga_stats_t s0;
            ga_pool_stats(p, &s0);
            size_t before = be.mapped, gave = ga_pool_trim(p);
            REQUIRE(gave == before - be.mapped, "%s, step %ld: trim said %zu, gave back %zu",
                    where, step, gave, before - be.mapped);
            REQUIRE(be.mapped == touched(where, step), "%s, step %ld: after a trim %zu bytes "
                    "mapped, %zu under live blocks", where, step, be.mapped, touched(where, step));
        } else if (op < 30 && nlive) { /* one freed and its size allocated again (parking) */
            int i = (int)(rnd() % (unsigned)nlive);
            size_t sz = live[i].size;
            uintptr_t was = live[i].base;
            do_free(p, i, where, step);
            check_all(p, keep, limit, where, step);
            do_alloc(p, sz, where, step);
            nback += nlive && live[nlive - 1].base == was;
        } else if (op < 40 && nlive > 1) { /* two freed, allocated again the other way round */
            size_t a = live[nlive - 1].size, b = live[nlive - 2].size;
            do_free(p, nlive - 1, where, step);
            do_free(p, nlive - 1, where, step);
            do_alloc(p, a, where, step);
            check_all(p, keep, limit, where, step);
            do_alloc(p, b, where, step);
        } else if (op < 70 && nlive < (int)target) {
            last = op < 50 && last ? last : rnd_size();
            do_alloc(p, last, where, step);
        } else if (nlive) {
            do_free(p, (int)(rnd() % (unsigned)nlive), where, step);
        }
        check_all(p, keep, limit, where, step);
        if (step % 97 == 0) {
            char rep[512];
            int n = ga_pool_check(p, rep, sizeof rep);
            REQUIRE(n == 0, "%s, step %ld: ga_pool_check: %s", where, step, rep);
        }
    }
    while (nlive)
        do_free(p, nlive - 1, where, steps);
    check_all(p, keep, limit, where, steps);
    ga_pool_trim(p);
    REQUIRE(be.mapped == 0, "%s: %zu bytes mapped after everything was freed and trimmed", where,
            be.mapped);
    /* The workload reached what it is for: fits answered yes, blocks taken back where they
     * lay (with a keep), the limit refusing (with one). */
    REQUIRE(nfits > 100 && (keep < 8 * MIB || nback > 100) && (!limit || nfail > 0),
            "%s: coverage: %ld fits, %ld taken back, %ld refused", where, nfits, nback, nfail);
    free(touch);
    unmake(p);
}

START_TEST(vmm_parking_from_outside)
{
    static const size_t keeps[] = {0, 2 * MIB, 8 * MIB, 64 * MIB};
    for (uint64_t seed = 1; seed <= 2; seed++)
        for (int k = 0; k < 4; k++)
            workload(seed * 1000 + (uint64_t)k, keeps[k], 0, 1500);
}
END_TEST

START_TEST(vmm_parking_from_outside_limited)
{
    static const size_t keeps[] = {0, 2 * MIB, 8 * MIB, 64 * MIB};
    for (uint64_t seed = 1; seed <= 2; seed++)
        for (int k = 0; k < 4; k++)
            workload(seed * 7000 + (uint64_t)k, keeps[k], 160 * MIB, 1500);
}
END_TEST

/* Rounds of n blocks of one size, all freed then all allocated again, their granules within the
 * default keep: after the first round nothing more is mapped (the keep holds the freed granules,
 * or parked blocks hold them). maps: the backend's maps over rounds 2..10. */
static long churn(size_t size, int n)
{
    ga_pool_t *p = make(GA_VMM_KEEP_DEFAULT, 0);
    uintptr_t b[64];
    long maps = 0;
    for (int round = 0; round < 10; round++) {
        long m0 = be.maps;
        for (int i = 0; i < n; i++)
            ASSERT_STATUS(ga_pool_alloc(p, size, &b[i]), GA_OK);
        if (round)
            maps += be.maps - m0;
        for (int i = 0; i < n; i++)
            ASSERT_STATUS(ga_pool_free(p, b[i], NULL), GA_OK);
    }
    unmake(p);
    return maps;
}

/* 20 blocks of 1.5 MiB (30 MiB, 15 granules) and of 2 MiB (40 MiB) under the 64 MiB keep. */
START_TEST(vmm_rounds_within_keep_map_nothing)
{
    long m2 = churn(2 * MIB, 20);
    ck_assert_msg(m2 == 0, "20 blocks of 2 MiB: %ld maps in rounds 2-10", m2);
    long m15 = churn(3 * MIB / 2, 20);
    ck_assert_msg(m15 == 0, "20 blocks of 1.5 MiB (30 MiB in 15 granules, keep 64 MiB): %ld maps "
                  "in rounds 2-10", m15);
}
END_TEST

/* One block freed (parked), then ga_pool_fits of another size that the allocation serves with no
 * backend call: answered 1 before parking (165fcd9), 0 now, and under GPUARENA_FREE_SYNC=lazy a 0
 * makes the shim synchronise the device before the allocation (helper-136 F6: free_syncs 10 in 10
 * rounds on the simulated driver, 0 in arena mode). The header allows a 0 ("where it would
 * choose"): this is the cost, not the contract. */
START_TEST(vmm_fits_after_a_parked_block)
{
    static const size_t pairs[][2] = {{MIB, 3 * MIB / 2}, {7 * MIB + 4 * KIB, MIB - 512}};
    for (int k = 0; k < 2; k++) {
        ga_pool_t *p = make(GA_VMM_KEEP_DEFAULT, 0);
        uintptr_t a, b;
        ASSERT_STATUS(ga_pool_alloc(p, pairs[k][0], &a), GA_OK);
        ASSERT_STATUS(ga_pool_free(p, a, NULL), GA_OK);
        int fits = ga_pool_fits(p, pairs[k][1]);
        long calls = be.calls;
        ASSERT_STATUS(ga_pool_alloc(p, pairs[k][1], &b), GA_OK);
        ck_assert_msg(be.calls != calls || fits, "%zu freed, then %zu: fits said 0, the allocation "
                      "made no backend call", pairs[k][0], pairs[k][1]);
        unmake(p);
    }
}
END_TEST

Suite *outside136_suite(void)
{
    Suite *s = suite_create("outside136");
    TCase *tc = tcase_create("vmm_parking");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, vmm_parking_from_outside);
    tcase_add_test(tc, vmm_parking_from_outside_limited);
    tcase_add_test(tc, vmm_rounds_within_keep_map_nothing);
    tcase_add_test(tc, vmm_fits_after_a_parked_block);
    suite_add_tcase(s, tc);
    return s;
}
