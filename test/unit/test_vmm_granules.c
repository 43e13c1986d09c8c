/* The vmm pool's granules on the fake backend of vmm_fake.h, split from test_vmm.c: the
 * granularity's checks, granules of up to 2^63 bytes, exact per-granule counts, long blocks under
 * the keep and the cap, the aligned area's frees and bitmap word edges, address space and host
 * memory bounded, mapped memory exactly what live blocks touch. Added to the vmm suite's
 * "placement" case by vmm_granules_add().
 */
#include "vmm_fake.h"

/* The granularity must be a power of two of at least 512 bytes (granule arithmetic is by shift):
 * anything else is refused at create, with nothing reserved. */
START_TEST(vmm_granularity_must_be_power_of_two)
{
    static const size_t bad[] = {3 * MIB, 1000, 256, 0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vfake_t f;
        memset(&f, 0, sizeof f);
        f.next = (uint64_t)1 << 40;
        ga_pool_backend_t be = {.va_reserve = vf_va_reserve, .va_release = vf_va_release,
                                .map = vf_map, .unmap = vf_unmap, .granularity = bad[i], .ctx = &f};
        ga_pool_config_t cfg = {.mode = GA_MODE_VMM, .va_size = 1024 * MIB};
        ga_status_t st = GA_OK;
        ga_pool_t *p = ga_pool_create(&be, &cfg, &st);
        ck_assert_msg(!p && st == GA_EINVAL, "granularity %zu: refused with EINVAL", bad[i]);
        ck_assert_uint_eq(f.mapped, 0);
        ck_assert_uint_eq(f.va_reserves, f.va_releases);
    }
}
END_TEST

/* Huge granules (2^40 to 2^63 bytes; no driver has them, the pool's API takes them): create
 * ends, whether the backend refuses every range (the pool halves its first range down to a floor
 * of 64 granules, computed without a shift that wraps: granules from 2^58 looped for ever) or
 * gives one; an allocation either fits or is an out-of-memory, and nothing is left held. */
static int huge_refuse(void *ctx, size_t size, uintptr_t *base)
{
    (void)size;
    (void)base;
    ++*(unsigned *)ctx;
    return -1;
}
static int huge_give(void *ctx, size_t size, uintptr_t *base)
{
    (void)size;
    ++*(unsigned *)ctx;
    *base = (uintptr_t)1 << 62; /* aligned to granules up to 2^62; with 2^63 the range wraps */
    return 0;
}
static void huge_release(void *ctx, uintptr_t base, size_t size)
{
    (void)base;
    (void)size;
    --*(unsigned *)ctx;
}
static int huge_map(void *ctx, uintptr_t addr, size_t size, uint64_t *handle)
{
    (void)ctx;
    (void)addr;
    (void)size;
    (void)handle;
    return -1; /* nothing that large can be had */
}
static void huge_unmap(void *ctx, uintptr_t addr, size_t size, uint64_t handle)
{
    (void)ctx;
    (void)addr;
    (void)size;
    (void)handle;
}

START_TEST(vmm_huge_granules_end)
{
    static const unsigned shifts[] = {40, 57, 58, 60, 62, 63};
    for (size_t i = 0; i < sizeof shifts / sizeof shifts[0]; i++) {
        for (int give = 0; give < 2; give++) {
            unsigned calls = 0;
            ga_pool_backend_t be = {.va_reserve = give ? huge_give : huge_refuse,
                                    .va_release = huge_release, .map = huge_map,
                                    .unmap = huge_unmap, .granularity = (size_t)1 << shifts[i],
                                    .ctx = &calls};
            ga_pool_config_t cfg = {.mode = GA_MODE_VMM, .va_size = (size_t)1 << 62};
            ga_status_t st = GA_OK;
            ga_pool_t *p = ga_pool_create(&be, &cfg, &st);
            if (!give) {
                ck_assert_msg(!p && st == GA_ENOMEM, "2^%u refused: %s", shifts[i],
                              ga_status_str(st));
                ck_assert_uint_le(calls, 64); /* halvings, not a loop */
                continue;
            }
            if (!p) { /* only a 2^63 granule, whose one range cannot fit below 2^64 */
                ck_assert_uint_eq(shifts[i], 63);
                ck_assert_uint_eq(calls, 0);
                continue;
            }
            ck_assert_msg(st == GA_OK, "2^%u given: %s", shifts[i], ga_status_str(st));
            uintptr_t a = 0;
            ck_assert_int_eq(ga_pool_alloc(p, 4096, &a), GA_ENOMEM); /* the map fails */
            POOL_HEALTHY(p);
            ga_pool_destroy(p);
            ck_assert_uint_eq(calls, 0); /* every range given back */
        }
    }
}
END_TEST

/* The one-granule fast paths (vmm_cover.h cover, vmm_uncover.h uncover): a granule is mapped when
 * its first block comes and given back exactly when its last one goes, also for a block across a
 * granule boundary, whose two granules are counted apart; a kept granule is reused without a map. */
START_TEST(vmm_granule_counts_exact)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    enum { N = 64 };
    const size_t sz = 96 * KIB; /* not a divisor of the granule: some block straddles */
    uintptr_t a[N];
    int n = 0, cross = -1;
    while (cross < 0 && n < N) {
        a[n] = pool_alloc(p, sz);
        if (a[n] / GRAN != (a[n] + sz - 1) / GRAN)
            cross = n;
        n++;
    }
    REQUIRE(cross > 0, "no block across a granule boundary in %d allocations", n);
    uintptr_t lo = a[cross] / GRAN, hi = lo + 1;
    for (int i = 0; i < cross; i++)
        REQUIRE(a[i] / GRAN == lo, "block %d not in the first granule", i);
    ck_assert_uint_eq(f.maps, 2);
    uintptr_t y = pool_alloc(p, sz); /* in the upper granule, which the straddler maps already */
    REQUIRE(y / GRAN == hi && (y + sz - 1) / GRAN == hi, "next block not in the upper granule");
    ck_assert_uint_eq(f.maps, 2);
    POOL_HEALTHY(p);
    for (int i = 0; i < cross; i++) /* the straddler still holds the lower granule */
        ck_assert_int_eq(ga_pool_free(p, a[i], NULL), GA_OK);
    ck_assert_uint_eq(f.unmaps, 0);
    ck_assert_uint_eq(f.mapped, 2 * GRAN);
    POOL_HEALTHY(p);
    ck_assert_int_eq(ga_pool_free(p, a[cross], NULL), GA_OK); /* lower goes, upper has y */
    ck_assert_uint_eq(f.unmaps, 1);
    ck_assert_uint_eq(f.mapped, GRAN);
    POOL_HEALTHY(p);
    ck_assert_int_eq(ga_pool_free(p, y, NULL), GA_OK);
    ck_assert_uint_eq(f.unmaps, 2);
    ck_assert_uint_eq(f.mapped, 0);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);

    p = vmm_pool(&f, 0, 2 * GRAN); /* with a cache: the last block out leaves its granule kept */
    uintptr_t b = pool_alloc(p, 4 * KIB), c = pool_alloc(p, 4 * KIB);
    REQUIRE(b / GRAN == c / GRAN, "two small blocks in different granules");
    ck_assert_int_eq(ga_pool_free(p, b, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, c, NULL), GA_OK);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, GRAN);
    ck_assert_uint_eq(f.maps, 1);
    ck_assert_uint_eq(f.unmaps, 0);
    uintptr_t d = pool_alloc(p, 4 * KIB), e = pool_alloc(p, 4 * KIB);
    REQUIRE(d / GRAN == b / GRAN && e / GRAN == b / GRAN, "not placed on the kept granule");
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 0); /* reused, no map */
    ck_assert_uint_eq(f.maps, 1);
    ck_assert_int_eq(ga_pool_free(p, d, NULL), GA_OK);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 0); /* e still there */
    ck_assert_int_eq(ga_pool_free(p, e, NULL), GA_OK);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, GRAN);
    ck_assert_uint_eq(f.unmaps, 0);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* Blocks of many granules, across the 64-granule words of the pool's granule bitmaps: freeing one
 * keeps its lowest granules while the cache has room and gives back the rest, and allocating it
 * again takes the kept ones back without a map, maps only what was given back, and maps nothing
 * more; a map refused in the middle of a long block leaves nothing mapped for it. */
START_TEST(vmm_long_blocks_keep_and_refuse)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 40 * GRAN);
    uintptr_t x = pool_alloc(p, 100 * GRAN);
    ck_assert_uint_eq(f.maps, 100);
    ck_assert_int_eq(ga_pool_free(p, x, NULL), GA_OK);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 40 * GRAN);
    ck_assert_uint_eq(f.unmaps, 60);
    POOL_HEALTHY(p);
    uintptr_t y = pool_alloc(p, 100 * GRAN);
    ck_assert_uint_eq(y, x);
    ck_assert_uint_eq(f.maps, 160); /* the 60 given back, not the 40 kept */
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 0);
    POOL_HEALTHY(p);
    for (int i = 0; i < 3; i++) { /* freed and allocated again: the same 60 go and come back */
        ck_assert_int_eq(ga_pool_free(p, y, NULL), GA_OK);
        y = pool_alloc(p, 100 * GRAN);
    }
    ck_assert_uint_eq(f.maps, 160 + 3 * 60);
    ck_assert_uint_eq(f.unmaps, 60 + 3 * 60);
    ck_assert_int_eq(ga_pool_free(p, y, NULL), GA_OK);
    ga_pool_trim(p);
    ck_assert_uint_eq(f.mapped, 0);
    unsigned maps = f.maps, unmaps = f.unmaps;
    f.fail_map_in = 70; /* the 70th granule of a 130-granule block cannot be mapped */
    uintptr_t z = 0;
    ck_assert_int_eq(ga_pool_alloc(p, 130 * GRAN, &z), GA_ENOMEM);
    ck_assert_uint_eq(f.mapped, 0);
    ck_assert_uint_eq(f.maps - maps, f.unmaps - unmaps);
    POOL_HEALTHY(p);
    z = pool_alloc(p, 130 * GRAN);
    ck_assert_uint_eq(f.mapped, 130 * GRAN);
    ck_assert_int_eq(ga_pool_free(p, z, NULL), GA_OK);
    destroy_clean(p, &f);
}
END_TEST

/* A granule-multiple block freed with the cache nearly full, inside one 64-granule bitmap word
 * and across two: as many of its granules kept as the cache has room for, the rest given back, and
 * taking the block again maps only those given back; counted at the backend. */
START_TEST(vmm_aligned_free_keeps_what_fits)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 8 * GRAN);
    ga_stats_t s;
    uintptr_t a = pool_alloc(p, 10 * GRAN); /* one word: the range starts on a 64-granule line */
    size_t g = (size_t)((a - ((uintptr_t)1 << 40)) / GRAN);
    REQUIRE(g / 64 == (g + 9) / 64, "granules %zu..%zu are meant to lie in one word", g, g + 9);
    ck_assert_uint_eq(f.maps, 10);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ck_assert_uint_eq(f.unmaps, 2);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 8 * GRAN);
    POOL_HEALTHY(p);
    ck_assert_uint_eq(pool_alloc(p, 10 * GRAN), a);
    ck_assert_uint_eq(f.maps, 12);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 0);
    POOL_HEALTHY(p);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK); /* the same again, 8 stale on the stack */
    ck_assert_uint_eq(f.unmaps, 4);
    ck_assert_uint_eq(f.mapped, 8 * GRAN);
    POOL_HEALTHY(p);
    ck_assert_uint_eq(pool_alloc(p, 10 * GRAN), a);
    ck_assert_uint_eq(f.mapped, 10 * GRAN);
    uintptr_t blk[16];
    int n = 0, cross = -1;
    while (n < 16 && cross < 0) { /* blocks of 10 granules until one crosses a word line */
        blk[n] = pool_alloc(p, 10 * GRAN);
        g = (size_t)((blk[n] - ((uintptr_t)1 << 40)) / GRAN);
        cross = g / 64 != (g + 9) / 64 ? n : -1;
        n++;
    }
    REQUIRE(cross >= 0, "none of %d blocks of 10 granules crosses a word line", n);
    ck_assert_uint_eq(f.mapped, (10 + 10 * (size_t)n) * GRAN);
    unsigned unmaps = f.unmaps;
    ck_assert_int_eq(ga_pool_free(p, blk[cross], NULL), GA_OK); /* 8 of 10 kept */
    ck_assert_uint_eq(f.unmaps - unmaps, 2);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 8 * GRAN);
    POOL_HEALTHY(p);
    if (n > 1) {
        ck_assert_int_eq(ga_pool_free(p, blk[0], NULL), GA_OK); /* no room: all 10 given back */
        ck_assert_uint_eq(f.unmaps - unmaps, 12);
        POOL_HEALTHY(p);
        blk[0] = pool_alloc(p, 10 * GRAN);
    }
    blk[cross] = pool_alloc(p, 10 * GRAN);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.reserved, f.mapped);
    ck_assert_uint_eq(s.in_use, (10 + 10 * (size_t)n) * GRAN);
    ck_assert_uint_eq(f.mapped, s.in_use + s.kept);
    POOL_HEALTHY(p);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(ga_pool_free(p, blk[i], NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 8 * GRAN);
    ck_assert_uint_eq(f.mapped, 8 * GRAN);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* Granules touched by the live blocks, counted from their addresses: the union of the blocks'
 * granule spans (sorted, merged). */
static size_t live_granules(const uintptr_t *addr, const size_t *size, int n)
{
    uintptr_t lo[64], hi[64];
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!addr[i])
            continue;
        uintptr_t l = addr[i] / GRAN, h = (addr[i] + size[i] - 1) / GRAN;
        int j = k++;
        for (; j > 0 && lo[j - 1] > l; j--)
            lo[j] = lo[j - 1], hi[j] = hi[j - 1];
        lo[j] = l, hi[j] = h;
    }
    size_t total = 0;
    for (int i = 0; i < k;) {
        uintptr_t l = lo[i], h = hi[i];
        for (i++; i < k && lo[i] <= h; i++)
            h = hi[i] > h ? hi[i] : h;
        total += (size_t)(h - l + 1);
    }
    return total;
}


/* The shim answers an out-of-memory by trimming the pool and trying again (ga_dev_trim): the
 * areas give their empty regions back to the range, and the next allocations take regions anew.
 * Under a small cap that happens over and over; address space must stay bounded through it. (It
 * did not: the areas and the range grew geometrically from their last region after every trim,
 * so a program under an 8 MiB cap had reserved 64 TiB after 800 allocations and then spent
 * minutes in refused reservations.) Seeded sizes from 512 B to 4 MiB, 64 slots, one live 3 MiB
 * block throughout, 20,000 steps; then blocks larger than the cap, refused without a range. */
START_TEST(vmm_address_space_bounded_under_trim)
{
    vfake_t f;
    const size_t cap = 8 * MIB, va = 2 * cap;
    ga_pool_t *p = vmm_pool_va(&f, cap, 0, va);
    uintptr_t big = pool_alloc(p, 3 * MIB), live[64] = {0};
    unsigned x = 1, ooms = 0;
    for (int i = 0; i < 20000; i++) {
        x = x * 1103515245u + 12345u;
        int slot = (int)((x >> 20) % 64);
        if (live[slot]) {
            ck_assert_int_eq(ga_pool_free(p, live[slot], NULL), GA_OK);
            live[slot] = 0;
            continue;
        }
        size_t size = (size_t)512 << ((x >> 8) % 14);
        if (ga_pool_alloc(p, size, &live[slot]) != GA_OK) {
            ooms++;
            ga_pool_trim(p); /* as the shim does before its one retry */
            if (ga_pool_alloc(p, size, &live[slot]) != GA_OK)
                live[slot] = 0;
        }
        if (i % 1000 == 0)
            POOL_HEALTHY(p);
    }
    ck_assert_uint_gt(ooms, 100); /* the cap was hit, and trimmed after, many times */
    /* Blocks larger than the cap can never be mapped: refused with no address space taken. */
    unsigned reserves = f.va_reserves;
    uintptr_t huge;
    ck_assert_int_eq(ga_pool_alloc(p, 64 * MIB, &huge), GA_ENOMEM);
    ck_assert_int_eq(ga_pool_alloc(p, (size_t)1 << 46, &huge), GA_ENOMEM);
    ck_assert_uint_eq(f.va_reserves, reserves);
    REQUIRE(f.va_largest <= va, "a range of %zu bytes reserved (at most %zu wanted)", f.va_largest,
            va);
    REQUIRE(f.va_peak <= 16 * va, "%zu bytes of address space held at once under a %zu-byte cap",
            f.va_peak, cap);
    for (int s = 0; s < 64; s++)
        if (live[s])
            ck_assert_int_eq(ga_pool_free(p, live[s], NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, big, NULL), GA_OK);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
    ck_assert_uint_eq(f.va_held, 0);
}
END_TEST


/* A range's host memory is bounded (GA_VMM_MAX_GRANULES): a pool asked for a petabyte of address
 * space starts with the bound's range, a block past it is refused at once with no range reserved,
 * and smaller blocks are served as usual. */
START_TEST(vmm_range_host_memory_bounded)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool_va(&f, 0, 0, (size_t)1 << 50);
    ck_assert_uint_eq(f.va_reserves, 1);
    ck_assert_uint_le(f.va_largest, GA_VMM_MAX_GRANULES * GRAN);
    uintptr_t a = pool_alloc(p, 4096), huge;
    ck_assert_int_eq(ga_pool_alloc(p, (size_t)1 << 49, &huge), GA_ENOMEM);
    ck_assert_uint_le(f.va_largest, GA_VMM_MAX_GRANULES * GRAN);
    uintptr_t b = pool_alloc(p, (size_t)1 << 30); /* served as usual (no ga_pool_check here: it
                                                    * walks every granule of the range) */
    ck_assert_uint_eq(mapped_granules(p), 1 + ((size_t)1 << 30) / GRAN);
    ck_assert_int_eq(ga_pool_free(p, b, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    destroy_clean(p, &f);
}
END_TEST

/* Physical memory from the outside: with no cache, exactly the granules the live blocks touch
 * are mapped after every step; with one, those plus the kept bytes, which stay within the keep.
 * Sizes from 512 bytes to 150 granules in a seeded mix, so blocks share end granules and span
 * bitmap words. */
START_TEST(vmm_mapped_is_what_live_blocks_touch)
{
    static const size_t keeps[] = {0, 7 * GRAN};
    for (int k = 0; k < 2; k++) {
        vfake_t f;
        ga_pool_t *p = vmm_pool(&f, 0, keeps[k]);
        enum { N = 2000, SLOTS = 24 };
        uintptr_t live[SLOTS] = {0};
        size_t sz[SLOTS] = {0};
        uint64_t x = 0x2545F4914F6CDD1Dull + (uint64_t)k;
        for (int step = 0; step < N; step++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int i = (int)(x % SLOTS);
            if (live[i]) {
                ck_assert_int_eq(ga_pool_free(p, live[i], NULL), GA_OK);
                live[i] = 0;
            } else {
                static const size_t kinds[] = {512, 100 * KIB, MIB + 512, 3 * GRAN, 5 * GRAN + MIB,
                                               70 * GRAN, 70 * GRAN + 3 * MIB / 2, 150 * GRAN};
                sz[i] = kinds[(x >> 20) % 8] + ((x >> 40) % 2) * GA_ALIGN;
                live[i] = pool_alloc(p, sz[i]);
            }
            ga_stats_t s;
            ga_pool_stats(p, &s);
            size_t want = live_granules(live, sz, SLOTS) * GRAN;
            REQUIRE(f.mapped == want + s.kept && s.kept <= keeps[k],
                    "keep %zu, step %d: %zu bytes mapped, the live blocks touch %zu, %llu kept",
                    keeps[k], step, f.mapped, want, (unsigned long long)s.kept);
            if (step % 50 == 0)
                POOL_HEALTHY(p);
        }
        for (int i = 0; i < SLOTS; i++)
            if (live[i])
                ck_assert_int_eq(ga_pool_free(p, live[i], NULL), GA_OK);
        POOL_HEALTHY(p);
        destroy_clean(p, &f);
    }
}
END_TEST

/* Granule multiples at the edges of a 64-granule bitmap word, the aligned area's one-mask path:
 * a block filling a whole word, one ending on a word's last granule, and one across a word line
 * (which takes the general way), each freed and taken again on its kept granules with no map and
 * at the same address; given back instead (trimmed), each maps all its granules again.
 * Asserted at the backend: map and unmap calls, bytes mapped. */
START_TEST(vmm_aligned_word_edges)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 128 * GRAN);
    const uintptr_t base = (uintptr_t)1 << 40; /* the range's first granule starts a word */
    uintptr_t w = pool_alloc(p, 64 * GRAN);    /* granules 0..63: the whole first word */
    uintptr_t e = pool_alloc(p, 60 * GRAN), t = pool_alloc(p, 4 * GRAN);
    size_t gw = (w - base) / GRAN, ge = (e - base) / GRAN, gt = (t - base) / GRAN;
    REQUIRE(gw % 64 == 0, "the 64-granule block starts at granule %zu, not on a word line", gw);
    REQUIRE(gt % 64 == 60 && ge % 64 == 0, "the 4-granule block starts at granule %zu (the "
            "60-granule one at %zu): it is meant to end on a word's last granule", gt, ge);
    uintptr_t more[16], y = 0;
    int n = 0;
    while (n < 16 && !y) { /* blocks of 24 granules until one crosses a word line */
        more[n] = pool_alloc(p, 24 * GRAN);
        size_t g = (more[n] - base) / GRAN;
        y = g / 64 != (g + 23) / 64 ? more[n] : 0;
        n++;
    }
    REQUIRE(y, "none of %d blocks of 24 granules crosses a word line", n);
    ck_assert_uint_eq(f.maps, 64 + 60 + 4 + 24 * (unsigned)n);
    uintptr_t blk[] = {w, t, y, e};
    size_t len[] = {64 * GRAN, 4 * GRAN, 24 * GRAN, 60 * GRAN};
    for (int i = 0; i < 4; i++) { /* kept, then taken back at the same place, nothing mapped */
        unsigned maps = f.maps, unmaps = f.unmaps;
        ck_assert_int_eq(ga_pool_free(p, blk[i], NULL), GA_OK);
        ck_assert_uint_eq(f.unmaps, unmaps);
        ga_stats_t s;
        ga_pool_stats(p, &s);
        ck_assert_uint_eq(s.kept, len[i]);
        POOL_HEALTHY(p);
        ck_assert_uint_eq(pool_alloc(p, len[i]), blk[i]);
        ck_assert_uint_eq(f.maps, maps);
        ga_pool_stats(p, &s);
        ck_assert_uint_eq(s.kept, 0);
        ck_assert_uint_eq(s.reserved, f.mapped);
        POOL_HEALTHY(p);
    }
    for (int i = 0; i < 4; i++) { /* given back (nothing kept), then mapped anew, wherever */
        ck_assert_int_eq(ga_pool_free(p, blk[i], NULL), GA_OK);
        ga_pool_trim(p);
        unsigned maps = f.maps;
        size_t mapped = f.mapped;
        blk[i] = pool_alloc(p, len[i]);
        ck_assert_uint_eq(f.maps - maps, len[i] / GRAN);
        ck_assert_uint_eq(f.mapped - mapped, len[i]);
        POOL_HEALTHY(p);
    }
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ga_pool_free(p, blk[i], NULL), GA_OK);
    for (int i = 0; i < n; i++)
        if (more[i] != y)
            ck_assert_int_eq(ga_pool_free(p, more[i], NULL), GA_OK);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.in_use, 0);
    ck_assert_uint_eq(s.kept, 128 * GRAN); /* the cache full: the rest given back */
    ck_assert_uint_eq(f.mapped, 128 * GRAN);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

void vmm_granules_add(TCase *tc)
{
    tcase_add_test(tc, vmm_granularity_must_be_power_of_two);
    tcase_add_test(tc, vmm_huge_granules_end);
    tcase_add_test(tc, vmm_granule_counts_exact);
    tcase_add_test(tc, vmm_long_blocks_keep_and_refuse);
    tcase_add_test(tc, vmm_aligned_free_keeps_what_fits);
    tcase_add_test(tc, vmm_address_space_bounded_under_trim);
    tcase_add_test(tc, vmm_range_host_memory_bounded);
    tcase_add_test(tc, vmm_mapped_is_what_live_blocks_touch);
    tcase_add_test(tc, vmm_aligned_word_edges);
}
