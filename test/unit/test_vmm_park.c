/* The vmm pool's parked blocks (pool_vmm.c): a block from half a granule up freed while the keep
 * has room for what it holds is held where it lies, its granules still mapped and in use, and the
 * next allocation of its size takes it back with no placement and no granule work. Asserted from
 * the outside (the pool's answers, its figures, the fake backend's map counts): a parked block is
 * freed memory to every query (a second free, an interior free, a lookup, the live size and
 * bases); the figures are a free's and an allocation's, its granules kept ones; what parked
 * blocks hold and the kept granules stay within the keep; an allocation of another size that
 * would map a granule takes the parked blocks' room first, and any allocation the general area's
 * parked blocks do not serve is placed as if they were freed; trim gives everything back; a
 * block that maps takes its kept granules before it maps; and a seeded workload of few sizes,
 * checked after every step, agrees with a model. Added to the vmm suite's "placement" case by
 * vmm_park_add(). */
#include <inttypes.h>
#include <stdio.h>

#include "vmm_fake.h"

/* A block freed once, allocated again at its place and freed again: from its second free on its
 * granules are on the kept stack, and it is parked (a granule multiple, or a size that has a class:
 * the caller keeps a first block of the size live). */
static uintptr_t park_one(ga_pool_t *p, size_t size)
{
    uintptr_t a = pool_alloc(p, size);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ck_assert_uint_eq(pool_alloc(p, size), a);
    size_t got = 0;
    ck_assert_int_eq(ga_pool_free(p, a, &got), GA_OK);
    ck_assert_uint_eq(got, (size + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN);
    return a;
}

/* Every query answers for a parked block as for freed memory, the figures are a free's, and an
 * allocation of its size (another request rounding to it) takes it back at no backend cost. */
START_TEST(vmm_parked_block_answers_as_freed)
{
    static const size_t sizes[] = {GRAN / 2, 3 * MIB / 2, 2 * GRAN, 3 * MIB, 5 * MIB + 512,
                                   7 * MIB + 4 * KIB};
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 64 * MIB);
    uintptr_t keep_live = pool_alloc(p, 4 * KIB);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t rounded = (sizes[i] + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN;
        uintptr_t first = pool_alloc(p, sizes[i]); /* the second block of the size gets a class */
        ck_assert_int_eq(ga_pool_free(p, keep_live, NULL), GA_OK);
        keep_live = first;
        uintptr_t a = park_one(p, sizes[i]);
        unsigned maps = f.maps, unmaps = f.unmaps;
        ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_EDOUBLE);
        ck_assert_int_eq(ga_pool_free(p, a + GA_ALIGN, NULL), GA_EDOUBLE);
        ck_assert_int_eq(ga_pool_lookup(p, a, NULL, NULL), GA_ENOTOWNED);
        ck_assert_int_eq(ga_pool_lookup(p, a + rounded - 1, NULL, NULL), GA_ENOTOWNED);
        ck_assert_uint_eq(ga_pool_live_size(p, a), 0);
        ck_assert(ga_pool_owns(p, a)); /* address space the pool holds, as any freed block's */
        ga_stats_t s;
        ga_pool_stats(p, &s);
        ck_assert_uint_eq(s.live, 1);
        ck_assert_uint_eq(s.in_use, rounded);
        ck_assert_uint_eq(s.in_use_requested, sizes[i]);
        ck_assert_uint_eq(s.allocs, 1 + 4 * i + 3);
        ck_assert_uint_eq(s.frees, 4 * i + 3);
        uintptr_t bases[4] = {0};
        ck_assert_uint_eq(ga_pool_live_bases(p, bases, 4), 1);
        ck_assert_uint_eq(bases[0], keep_live);
        POOL_HEALTHY(p);
        /* another request of the same rounded size: taken back, with its own figure */
        ck_assert_uint_eq(pool_alloc(p, sizes[i] - 100), a);
        ck_assert_uint_eq(ga_pool_live_size(p, a), rounded);
        ck_assert_uint_eq(f.maps, maps);
        ck_assert_uint_eq(f.unmaps, unmaps);
        ga_pool_stats(p, &s);
        ck_assert_uint_eq(s.in_use_requested, 2 * sizes[i] - 100);
        ck_assert_uint_eq(s.in_use, 2 * rounded);
        ck_assert_uint_eq(s.live, 2);
        ck_assert_uint_eq(s.allocs, 1 + 4 * i + 4);
        POOL_HEALTHY(p);
        ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    }
    ck_assert_int_eq(ga_pool_free(p, keep_live, NULL), GA_OK);
    trim_clean(p, &f); /* parked blocks, kept granules: everything goes back */
    destroy_clean(p, &f);
}
END_TEST

/* An allocation of another size that would map a granule while blocks are parked takes their room
 * first: a granule multiple of 3 granules after a parked one of 4 lands in its place, and nothing
 * is mapped. */
START_TEST(vmm_parked_room_serves_before_mapping)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 64 * MIB);
    uintptr_t y = park_one(p, 4 * GRAN);
    unsigned maps = f.maps;
    ck_assert_uint_eq(pool_alloc(p, 3 * GRAN), y);
    ck_assert_uint_eq(f.maps, maps);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, GRAN); /* the fourth granule, left by the smaller block */
    ck_assert_uint_eq(s.live, 1);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* The general area's blocks are parked too (a size seen alone, large odd sizes), and given back
 * before any allocation they do not serve: their room serves the area's other sizes, small ones
 * included, as a free's would. */
START_TEST(vmm_general_area_parked_blocks_give_way)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 64 * MIB);
    uintptr_t x = park_one(p, 3 * MIB / 2); /* seen alone: the general area's */
    ck_assert_uint_eq(ga_pool_live_size(p, x), 0);
    unsigned maps = f.maps;
    ck_assert_uint_eq(pool_alloc(p, 5 * MIB / 4), x);
    ck_assert_uint_eq(f.maps, maps);
    POOL_HEALTHY(p);
    ck_assert_int_eq(ga_pool_free(p, x, NULL), GA_OK);
    destroy_clean(p, &f);
    /* A 7 MiB + 4 KiB block between two live ones, parked, then a 4 KiB allocation: the small
     * block lands at its place, as after a free (the smallest free chunk), with nothing mapped or
     * given back. */
    p = vmm_pool(&f, 0, 64 * MIB);
    uintptr_t lo = pool_alloc(p, 7 * MIB + 4 * KIB), mid = pool_alloc(p, 7 * MIB + 4 * KIB);
    uintptr_t hi = pool_alloc(p, 7 * MIB + 4 * KIB);
    ck_assert_int_eq(ga_pool_free(p, mid, NULL), GA_OK);
    ck_assert_uint_eq(ga_pool_live_size(p, mid), 0);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.live, 2);
    maps = f.maps;
    unsigned unmaps = f.unmaps;
    uintptr_t small = pool_alloc(p, 4 * KIB);
    ck_assert_uint_eq(small, mid);
    ck_assert_uint_eq(f.maps, maps);
    ck_assert_uint_eq(f.unmaps, unmaps);
    POOL_HEALTHY(p);
    /* the room back, its size again there, then parked and taken back at the same place */
    ck_assert_int_eq(ga_pool_free(p, small, NULL), GA_OK);
    ck_assert_uint_eq(pool_alloc(p, 7 * MIB + 4 * KIB), mid);
    ck_assert_int_eq(ga_pool_free(p, mid, NULL), GA_OK);
    ck_assert_uint_eq(pool_alloc(p, 7 * MIB + 4 * KIB), mid);
    ck_assert_uint_eq(f.maps, maps);
    POOL_HEALTHY(p);
    ck_assert_int_eq(ga_pool_free(p, lo, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, mid, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, hi, NULL), GA_OK);
    destroy_clean(p, &f);
}
END_TEST

/* A block under half a granule alone in its granule is parked too, holding that granule: freed
 * and allocated again it costs no granule work and lands where it was; a freed address answers as
 * freed; its granule counts as kept; a block of another size is placed as if it were freed; and a
 * small block sharing its granule with a live one is freed as before. */
START_TEST(vmm_small_block_alone_parked)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 64 * MIB);
    uintptr_t a = pool_alloc(p, 4 * KIB);
    unsigned maps = f.maps;
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
        ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_EDOUBLE);
        ck_assert_int_eq(ga_pool_lookup(p, a, NULL, NULL), GA_ENOTOWNED);
        ck_assert_uint_eq(ga_pool_live_size(p, a), 0);
        ga_stats_t s;
        ga_pool_stats(p, &s);
        ck_assert_uint_eq(s.kept, GRAN);
        ck_assert_uint_eq(s.in_use, 0);
        ck_assert_uint_eq(s.live, 0);
        POOL_HEALTHY(p);
        ck_assert(ga_pool_fits(p, 4 * KIB - 100));
        ck_assert_uint_eq(pool_alloc(p, 4 * KIB - 100), a);
    }
    ck_assert_uint_eq(f.maps, maps);
    ck_assert_uint_eq(f.unmaps, 0);
    /* parked, then a block of another size: placed as after a free, at a */
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    uintptr_t b = pool_alloc(p, 8 * KIB);
    ck_assert_uint_eq(b, a);
    ck_assert_uint_eq(f.maps, maps);
    /* two in one granule: the one freed is not parked, its room free at once */
    uintptr_t c = pool_alloc(p, 4 * KIB);
    ck_assert_int_eq(ga_pool_free(p, c, NULL), GA_OK);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 0);
    ck_assert_uint_eq(pool_alloc(p, 2 * KIB), c);
    POOL_HEALTHY(p);
    ck_assert_uint_eq(f.maps, maps);
    ck_assert_int_eq(ga_pool_free(p, b, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, c, NULL), GA_OK);
    destroy_clean(p, &f);
}
END_TEST

/* A block placed in another size's class (its granules refused elsewhere under the cap), parked
 * there and asked for again once its own size has a class: taken back where it lies. The take-back
 * sent it to be placed again when its size had a class, as if it were the general area's, and found
 * it again: the shim spun for ever on the fp32 forward pass under a cap (test_replay_refusals.py). */
START_TEST(vmm_parked_in_another_class_taken_back)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 10 * MIB, 64 * MIB);
    uintptr_t b[3];
    for (int i = 0; i < 3; i++)
        b[i] = pool_alloc(p, 3 * MIB);
    ck_assert_uint_eq(f.mapped, 5 * GRAN);
    uintptr_t q = pool_alloc(p, MIB); /* no granule left under the cap: in the 3 MiB class */
    ck_assert_int_eq(ga_pool_free(p, b[0], NULL), GA_OK);
    uintptr_t q2 = pool_alloc(p, MIB); /* the size's second block live: its class */
    ck_assert_int_eq(ga_pool_free(p, q, NULL), GA_OK);
    POOL_HEALTHY(p);
    uintptr_t q3 = pool_alloc(p, MIB);
    ck_assert(q3 == q || q3 != q2);
    POOL_HEALTHY(p);
    ck_assert_uint_le(f.peak_mapped, 10 * MIB);
    ck_assert_int_eq(ga_pool_free(p, q3, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, q2, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, b[1], NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, b[2], NULL), GA_OK);
    destroy_clean(p, &f);
}
END_TEST

/* What parked blocks hold counts against the keep with the kept granules: under a keep of 16 MiB,
 * a freed 9 MiB + 4 KiB block holds up to 6 granules (12 MiB, counted by its size), so a second
 * one is freed as before (its granules kept within the 4 MiB left, the rest given back), and
 * mapped memory beyond the live blocks' granules never passes the keep. */
START_TEST(vmm_parked_blocks_hold_within_keep)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 16 * MIB);
    uintptr_t b[5];
    for (int i = 0; i < 5; i++)
        b[i] = pool_alloc(p, 9 * MIB + 4 * KIB);
    size_t live_gran = f.mapped; /* every block live: every mapped granule in use */
    ck_assert_int_eq(ga_pool_free(p, b[1], NULL), GA_OK);
    ck_assert_uint_eq(f.unmaps, 0); /* parked: nothing given back */
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.reserved, live_gran);
    ck_assert_uint_le(s.kept, 16 * MIB);
    ck_assert_uint_ge(s.kept, 3 * GRAN); /* its inner granules, in use by no live block */
    ck_assert_int_eq(ga_pool_free(p, b[3], NULL), GA_OK);
    ck_assert_uint_gt(f.unmaps, 0); /* not parked: what the keep has no room for went back */
    ga_pool_stats(p, &s);
    ck_assert_uint_le(s.kept, 16 * MIB);
    ck_assert_uint_eq(s.reserved, f.mapped);
    POOL_HEALTHY(p);
    unsigned maps = f.maps;
    ck_assert_uint_eq(pool_alloc(p, 9 * MIB + 4 * KIB), b[1]); /* the parked one, at no cost */
    ck_assert_uint_eq(f.maps, maps);
    POOL_HEALTHY(p);
    ga_pool_trim(p);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 0);
    for (int i = 0; i < 5; i++)
        if (i != 3)
            ck_assert_int_eq(ga_pool_free(p, b[i], NULL), GA_OK);
    destroy_clean(p, &f);
}
END_TEST

/* A block that maps takes the kept granules it lies on before it maps the rest: a map gives back
 * a kept granule first, and taken in address order the block's own kept granules further on were
 * given back and mapped again. Granules g0..g3 freed (two blocks, both parked, then given back
 * when a small block maps its own granule, which gives one kept granule back), then a block of 4
 * granules there: one map, no unmap, in either order of the two blocks. */
START_TEST(vmm_cover_takes_its_kept_granules_first)
{
    for (int order = 0; order < 2; order++) {
        vfake_t f;
        ga_pool_t *p = vmm_pool(&f, 0, 64 * MIB);
        size_t first = order ? 3 * GRAN : GRAN, second = order ? GRAN : 3 * GRAN;
        uintptr_t a = pool_alloc(p, first), b = pool_alloc(p, second);
        uintptr_t guard = pool_alloc(p, GRAN);
        ck_assert_uint_eq(b, a + first);
        ck_assert_int_eq(ga_pool_free(p, b, NULL), GA_OK);
        ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
        uintptr_t small = pool_alloc(p, 4 * KIB); /* maps a granule of its own */
        ga_stats_t s;
        ga_pool_stats(p, &s);
        ck_assert_uint_eq(s.kept, 3 * GRAN);
        unsigned maps = f.maps, unmaps = f.unmaps;
        ck_assert_uint_eq(pool_alloc(p, 4 * GRAN), a);
        ck_assert_msg(f.maps == maps + 1 && f.unmaps == unmaps,
                      "order %d: %u maps and %u unmaps for one granule to map", order,
                      f.maps - maps, f.unmaps - unmaps);
        POOL_HEALTHY(p);
        ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
        ck_assert_int_eq(ga_pool_free(p, small, NULL), GA_OK);
        ck_assert_int_eq(ga_pool_free(p, guard, NULL), GA_OK);
        destroy_clean(p, &f);
    }
}
END_TEST

/* Without a keep nothing is parked: a freed block's granules go back at once. */
START_TEST(vmm_no_keep_parks_nothing)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    uintptr_t a = pool_alloc(p, 2 * GRAN);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ck_assert_uint_eq(pool_alloc(p, 2 * GRAN), a);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ck_assert_uint_eq(f.mapped, 0);
    destroy_clean(p, &f);
}
END_TEST

/* A parked general-area block that would hold a granule more than its size needs (a 1.5 MiB block
 * placed after a 7 MiB + 4 KiB one lies across two granules): far from the pool's limit it is taken
 * back where it lies; once the room under the limit is under the keep it is placed as if the
 * parked blocks were freed, so that under a 16 MiB limit ten blocks of 1.5 MiB fit, as with no
 * keep (nine until 2026-12-07: helper-135's outside check, o135_parked_straddling_block_taken_back
 * through the shim). */
START_TEST(vmm_straddling_parked_block_near_the_limit)
{
    static const size_t limits[] = {1024 * MIB, 16 * MIB};
    for (size_t i = 0; i < 2; i++) {
        vfake_t f;
        ga_pool_t *p = vmm_pool(&f, limits[i], 64 * MIB);
        uintptr_t a = pool_alloc(p, 7 * MIB + 4 * KIB), b = pool_alloc(p, 3 * MIB / 2);
        ck_assert_uint_eq((b + 3 * MIB / 2 - 1) / GRAN - b / GRAN, 1); /* across two granules */
        ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
        ck_assert_int_eq(ga_pool_free(p, b, NULL), GA_OK);
        POOL_HEALTHY(p);
        uintptr_t f10[16];
        size_t n = 0;
        for (;;) { /* a yes from ga_pool_fits costs no backend call */
            int fits = ga_pool_fits(p, 3 * MIB / 2);
            unsigned maps = f.maps;
            if (n == 16 || ga_pool_alloc(p, 3 * MIB / 2, &f10[n]) != GA_OK)
                break;
            if (fits)
                ck_assert_uint_eq(f.maps, maps);
            POOL_HEALTHY(p);
            n++;
        }
        if (i == 0) {
            ck_assert_uint_eq(f10[0], b); /* taken back where it lay */
            ck_assert_uint_eq(n, 16);
        } else {
            ck_assert_uint_ne(f10[0], b);
            ck_assert_uint_eq(n, 10); /* 15 MiB in 8 granules */
            ck_assert_uint_le(f.peak_mapped, 16 * MIB);
        }
        for (size_t m = 0; m < n; m++)
            ck_assert_int_eq(ga_pool_free(p, f10[m], NULL), GA_OK);
        destroy_clean(p, &f);
    }
}
END_TEST

/* A seeded workload of few sizes (so that freed blocks are parked and taken back often), under a
 * keep that fills: after every step the pool's check is clean, the figures equal the model's, every
 * live block's granules are mapped and the backend maps nothing beyond the live blocks' granules
 * and the kept bytes, every freed address answers as freed, and ga_pool_fits's yes costs no
 * backend call. */
START_TEST(vmm_parking_matches_a_model)
{
    static const size_t sizes[] = {GRAN / 2,   3 * MIB / 2, 2 * GRAN, 3 * MIB,
                                   5 * MIB + 512, 8 * GRAN,  64 * KIB, 9 * MIB};
    enum { LIVE = 24 };
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 16 * MIB);
    uintptr_t live[LIVE] = {0}, gone[LIVE] = {0};
    size_t sz[LIVE] = {0}, req[LIVE] = {0};
    uint64_t allocs = 0, frees = 0, seed = 0x9a4c;
    for (int step = 0; step < 6000; step++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        unsigned i = (unsigned)(seed >> 33) % LIVE;
        if (live[i]) {
            size_t got = 0;
            ck_assert_int_eq(ga_pool_free(p, live[i], &got), GA_OK);
            ck_assert_uint_eq(got, sz[i]);
            gone[i] = live[i];
            live[i] = 0;
            frees++;
        } else {
            size_t s = sizes[(seed >> 45) % (sizeof sizes / sizeof *sizes)] - (seed >> 20) % 300;
            unsigned maps = f.maps, unmaps = f.unmaps;
            int fits = ga_pool_fits(p, s);
            ck_assert_int_eq(ga_pool_alloc(p, s, &live[i]), GA_OK);
            if (fits)
                ck_assert_msg(f.maps == maps && f.unmaps == unmaps,
                              "step %d: fits said yes for %zu bytes, yet mapped", step, s);
            sz[i] = (s + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN;
            req[i] = s;
            allocs++;
        }
        uint64_t in_use = 0, requested = 0, nlive = 0, touched = 0;
        for (unsigned k = 0; k < LIVE; k++) {
            if (!live[k]) {
                int inside = 0; /* a freed address no live block covers now */
                for (unsigned j = 0; j < LIVE; j++)
                    inside |= live[j] && gone[k] - live[j] < sz[j];
                if (gone[k] && !inside) {
                    ck_assert_int_eq(ga_pool_lookup(p, gone[k], NULL, NULL), GA_ENOTOWNED);
                    ck_assert_uint_eq(ga_pool_live_size(p, gone[k]), 0);
                    ck_assert_int_eq(ga_pool_free(p, gone[k], NULL), GA_EDOUBLE);
                }
                continue;
            }
            nlive++, in_use += sz[k], requested += req[k];
            uintptr_t b = 0;
            size_t n = 0;
            ck_assert_int_eq(ga_pool_lookup(p, live[k] + sz[k] - 1, &b, &n), GA_OK);
            ck_assert(b == live[k] && n == sz[k]);
        }
        /* The granules the live blocks touch, counted once each (blocks sorted by address). */
        uintptr_t order[LIVE];
        size_t m = 0;
        for (unsigned k = 0; k < LIVE; k++)
            if (live[k])
                order[m++] = k;
        for (size_t x = 1; x < m; x++)
            for (size_t y = x; y > 0 && live[order[y - 1]] > live[order[y]]; y--) {
                uintptr_t t = order[y];
                order[y] = order[y - 1];
                order[y - 1] = t;
            }
        uintptr_t last = 0;
        for (size_t x = 0; x < m; x++) {
            uintptr_t a = live[order[x]], e = a + sz[order[x]];
            for (uintptr_t g = a / GRAN * GRAN; g < e; g += GRAN)
                if (g != last)
                    touched++, last = g;
        }
        ga_stats_t s;
        ga_pool_stats(p, &s);
        ck_assert_msg(s.in_use == in_use && s.in_use_requested == requested && s.live == nlive &&
                          s.allocs == allocs && s.frees == frees,
                      "step %d: in_use %" PRIu64 "/%" PRIu64 " requested %" PRIu64 "/%" PRIu64
                      " live %" PRIu64 "/%" PRIu64 " allocs %" PRIu64 "/%" PRIu64,
                      step, s.in_use, in_use, s.in_use_requested, requested, s.live, nlive,
                      s.allocs, allocs);
        ck_assert_uint_eq(f.mapped, s.reserved);
        ck_assert_msg(s.reserved == touched * GRAN + s.kept && s.kept <= 16 * MIB,
                      "step %d: %zu mapped, live blocks touch %" PRIu64 " granules, kept %" PRIu64,
                      step, f.mapped, touched, s.kept);
        if (step % 7 == 0)
            POOL_HEALTHY(p);
        if (step % 1000 == 999)
            ga_pool_trim(p);
    }
    for (unsigned k = 0; k < LIVE; k++)
        if (live[k])
            ck_assert_int_eq(ga_pool_free(p, live[k], NULL), GA_OK);
    destroy_clean(p, &f);
}
END_TEST

void vmm_park_add(TCase *tc)
{
    tcase_add_test(tc, vmm_parked_block_answers_as_freed);
    tcase_add_test(tc, vmm_parked_room_serves_before_mapping);
    tcase_add_test(tc, vmm_general_area_parked_blocks_give_way);
    tcase_add_test(tc, vmm_parked_blocks_hold_within_keep);
    tcase_add_test(tc, vmm_small_block_alone_parked);
    tcase_add_test(tc, vmm_parked_in_another_class_taken_back);
    tcase_add_test(tc, vmm_cover_takes_its_kept_granules_first);
    tcase_add_test(tc, vmm_no_keep_parks_nothing);
    tcase_add_test(tc, vmm_parking_matches_a_model);
    tcase_add_test(tc, vmm_straddling_parked_block_near_the_limit);
}
