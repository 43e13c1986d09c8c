/* The vmm pool's placement (pool_vmm.c) on a fake virtual-memory backend: address ranges from a
 * bump pointer, map and unmap only counted, a map that can be told to fail. What is asserted is
 * physical memory, counted in granules: small allocations share granules, equal sizes tile them,
 * granule multiples never leave one partly used, a size gets a class only once two of its blocks
 * are live, and a block goes where it maps fewer new granules; and everything a pool promises holds
 * with the placement areas in between (interior lookup, bad frees, the cap, refusal midway, trim,
 * destroy, ga_pool_check after every step of a seeded random workload).
 */
#include "vmm_fake.h"

START_TEST(vmm_small_allocations_share_a_granule)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    uintptr_t a[64];
    for (int i = 0; i < 64; i++) /* 64 x 32 KiB = exactly one granule */
        a[i] = pool_alloc(p, 32 * KIB);
    ck_assert_uint_eq(mapped_granules(p), 1);
    for (int i = 0; i < 64; i++)
        ck_assert_uint_eq(a[i] / GRAN, a[0] / GRAN);
    uintptr_t big = pool_alloc(p, 6 * MIB); /* a granule multiple: three fresh granules */
    ck_assert_uint_eq(big % GRAN, 0);
    ck_assert_uint_eq(mapped_granules(p), 4);
    POOL_HEALTHY(p);
    for (int i = 0; i < 64; i += 2)
        ck_assert_int_eq(ga_pool_free(p, a[i], NULL), GA_OK);
    ck_assert_uint_eq(mapped_granules(p), 4); /* half the small ones still there */
    for (int i = 1; i < 64; i += 2)
        ck_assert_int_eq(ga_pool_free(p, a[i], NULL), GA_OK);
    ck_assert_uint_eq(mapped_granules(p), 3);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* ga_pool_fits in vmm mode (the lazy free fence asks it): yes for a size whose place is on mapped
 * granules, no when it would map one; nothing changes. */
START_TEST(vmm_fits_only_on_mapped_granules)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    ck_assert_int_eq(ga_pool_fits(p, 4 * KIB), 0); /* nothing mapped yet */
    uintptr_t a = pool_alloc(p, 32 * KIB);
    unsigned maps = f.maps;
    ck_assert_int_eq(ga_pool_fits(p, 32 * KIB), 1); /* next to a, in its granule */
    ck_assert_int_eq(ga_pool_fits(p, GRAN - 16 * KIB), 0); /* would reach the next granule */
    ck_assert_int_eq(ga_pool_fits(p, GRAN - 64 * KIB), 1); /* ends inside a's granule */
    ck_assert_int_eq(ga_pool_fits(p, GRAN / 2), 1); /* general area, inside a's granule */
    ck_assert_int_eq(ga_pool_fits(p, GRAN), 0);     /* a granule multiple: its area maps */
    ck_assert_int_eq(ga_pool_fits(p, 0), 0);
    ck_assert_uint_eq(f.maps, maps);
    uintptr_t b = pool_alloc(p, 32 * KIB); /* where fits said: no map */
    ck_assert_uint_eq(f.maps, maps);
    ck_assert_uint_eq(b / GRAN, a / GRAN);
    POOL_HEALTHY(p);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, b, NULL), GA_OK);
    destroy_clean(p, &f);
}
END_TEST

/* ga_pool_fits against what the allocation then does, over a seeded mix of every kind of size
 * (small, half a granule to 3 granules, classes made as sizes repeat, granule multiples), frees
 * and a keep: whenever it says yes, the allocation maps, unmaps and reserves nothing. It said yes
 * only under half a granule until 2026-12-06 (GPUARENA_FREE_SYNC=lazy then synchronised at every
 * larger allocation); here it must also say yes often. */
START_TEST(vmm_fits_means_no_backend_call)
{
    static const size_t sizes[] = {4 * KIB,       96 * KIB + 512, 700 * KIB,   GRAN / 2,
                                   GRAN / 2 + 4 * KIB, 3 * MIB / 2, 3 * MIB, 4 * MIB + KIB,
                                   2 * MIB,       4 * MIB,        10 * MIB};
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 64 * MIB);
    uintptr_t live[64] = {0};
    unsigned seed = 12345, yes = 0, asked = 0;
    for (int step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned i = (seed >> 8) % 64;
        if (live[i]) {
            ck_assert_int_eq(ga_pool_free(p, live[i], NULL), GA_OK);
            live[i] = 0;
            continue;
        }
        size_t size = sizes[(seed >> 16) % (sizeof sizes / sizeof *sizes)];
        unsigned maps = f.maps, unmaps = f.unmaps, res = f.va_reserves;
        int fits = ga_pool_fits(p, size);
        ck_assert_uint_eq(f.maps + f.unmaps + f.va_reserves, maps + unmaps + res);
        ck_assert_int_eq(ga_pool_alloc(p, size, &live[i]), GA_OK);
        asked++;
        if (fits) {
            yes++;
            ck_assert_msg(f.maps == maps && f.unmaps == unmaps && f.va_reserves == res,
                          "step %d: fits said yes for %zu bytes, yet maps %u -> %u, unmaps %u -> "
                          "%u, reserves %u -> %u", step, size, maps, f.maps, unmaps, f.unmaps,
                          res, f.va_reserves);
        }
        if (step % 500 == 0)
            POOL_HEALTHY(p);
    }
    ck_assert_msg(yes > asked / 2, "fits said yes %u times of %u", yes, asked);
    for (int i = 0; i < 64; i++)
        if (live[i])
            ck_assert_int_eq(ga_pool_free(p, live[i], NULL), GA_OK);
    destroy_clean(p, &f);
}
END_TEST

/* Equal odd sizes side by side: 4 x 4.5 MiB fill 9 granules and 16 x 1.125 MiB another 9, even
 * with small allocations and granule multiples interleaved in time. */
START_TEST(vmm_equal_sizes_tile_granules)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    for (int i = 0; i < 16; i++) {
        if (i < 4)
            pool_alloc(p, 4 * MIB + 512 * KIB);
        pool_alloc(p, MIB + 128 * KIB);
        pool_alloc(p, 3 * KIB + 100);
        if (i % 4 == 0)
            pool_alloc(p, 4 * MIB);
    }
    /* 9 + 9 + 8 (four 4 MiB) + 1 (16 x 3.5 KiB) */
    ck_assert_uint_eq(mapped_granules(p), 27);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* A freed block of a class is refilled by the same size, so a free-and-reallocate cycle (a
 * training step) maps nothing new and keeps the packing. The first block of a size goes to the
 * general area: the class is made when a second one is asked for while it is live. */
START_TEST(vmm_class_hole_refilled)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    uintptr_t first = pool_alloc(p, 3 * MIB / 2); /* general: one granule, 0.5 MiB left */
    uintptr_t a[8];
    for (int i = 0; i < 8; i++)
        a[i] = pool_alloc(p, 3 * MIB / 2);
    ck_assert_uint_eq(a[0] / GRAN == first / GRAN, 0); /* another area */
    ck_assert_uint_eq(mapped_granules(p), 1 + 6);      /* 8 x 1.5 MiB = 12 MiB */
    for (int step = 0; step < 10; step++) {
        int i = (step * 3) % 8;
        ck_assert_int_eq(ga_pool_free(p, a[i], NULL), GA_OK);
        pool_alloc(p, 40 * KIB); /* the general area, beside `first` */
        uintptr_t again = pool_alloc(p, 3 * MIB / 2);
        ck_assert_uint_eq(again, a[i]);
    }
    ck_assert_uint_eq(mapped_granules(p), 7);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* Holes one size leaves are not cut up by another: 1 MiB blocks allocated into the holes of freed
 * 1.5 MiB ones would leave 0.5 MiB slivers and push the 1.5 MiB blocks that come back onto new
 * granules (a single best-fit arena maps 11 granules here). */
START_TEST(vmm_sizes_do_not_cut_each_others_holes)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    uintptr_t seed_a = pool_alloc(p, 3 * MIB / 2), seed_b = pool_alloc(p, MIB);
    ck_assert_uint_eq(mapped_granules(p), 2); /* both in the general area, [0, 2.5 MiB) */
    uintptr_t a[8];
    for (int i = 0; i < 8; i++) /* a class: 12 MiB, 6 granules */
        a[i] = pool_alloc(p, 3 * MIB / 2);
    for (int i = 1; i < 8; i += 2)
        ck_assert_int_eq(ga_pool_free(p, a[i], NULL), GA_OK);
    for (int i = 0; i < 8; i++) /* a class: 8 MiB, 4 granules */
        pool_alloc(p, MIB);
    for (int i = 1; i < 8; i += 2)
        ck_assert_uint_eq(pool_alloc(p, 3 * MIB / 2), a[i]);
    /* the first 1 MiB one went to the general area's second granule, beside seed_b: no new one */
    ck_assert_uint_eq(mapped_granules(p), 2 + 6 + 4);
    ck_assert_int_eq(ga_pool_free(p, seed_a, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, seed_b, NULL), GA_OK);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* A block of a class size that would map new granules in its class goes to the general area when
 * that maps fewer: gradients allocated as activations are freed reuse the activations' granules,
 * kept mapped, where the class would map its own and unmap the kept ones at every step. */
START_TEST(vmm_replacement_reuses_freed_granules)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 32 * GRAN);
    uintptr_t act[8], grad[8];
    for (int i = 0; i < 8; i++) /* distinct sizes, each alone: the general area */
        act[i] = pool_alloc(p, 2 * MIB + MIB / 4 + (size_t)i * GA_ALIGN);
    size_t before = mapped_granules(p);
    unsigned maps = f.maps;
    uintptr_t keep_live = pool_alloc(p, MIB + MIB / 8); /* makes 1.125 MiB a class at the next */
    for (int i = 7; i >= 0; i--) {
        ck_assert_int_eq(ga_pool_free(p, act[i], NULL), GA_OK);
        grad[i] = pool_alloc(p, MIB + MIB / 8);
    }
    ck_assert_uint_le(mapped_granules(p), before);
    ck_assert_uint_le(f.maps, maps + 1); /* keep_live's granule at most */
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(ga_pool_free(p, grad[i], NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, keep_live, NULL), GA_OK);
    ga_pool_trim(p);
    ck_assert_uint_eq(mapped_granules(p), 0);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* ga_pool_live_bases gives exactly the n bases of want (any order), and no more than it is given
 * room for while still counting every one. */
static void bases_are(const ga_pool_t *p, const uintptr_t *want, size_t n)
{
    uintptr_t got[16] = {0};
    ck_assert_uint_le(n, 15);
    ck_assert_uint_eq(ga_pool_live_bases(p, NULL, 0), n);
    ck_assert_uint_eq(ga_pool_live_bases(p, got, n ? n - 1 : 0), n);
    ck_assert_uint_eq(got[n ? n - 1 : 0], 0); /* room for n - 1: the last slot untouched */
    ck_assert_uint_eq(ga_pool_live_bases(p, got, 16), n);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (size_t k = 0; k < n; k++)
            found += got[k] == want[i];
        ck_assert_msg(found == 1, "base %#lx listed %d times", (unsigned long)want[i], found);
    }
}

START_TEST(vmm_lookup_and_bad_frees)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    size_t sizes[] = {3000, 700 * KIB, MIB + 512, 2 * GRAN, 7 * MIB + 512, 64 * KIB};
    uintptr_t a[6];
    for (int i = 0; i < 6; i++)
        a[i] = pool_alloc(p, sizes[i]);
    for (int i = 0; i < 6; i++) {
        size_t rounded = (sizes[i] + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN;
        uintptr_t base = 0;
        size_t size = 0;
        uintptr_t probe[] = {a[i], a[i] + 1, a[i] + rounded / 2, a[i] + rounded - 1};
        for (int k = 0; k < 4; k++) {
            ck_assert_int_eq(ga_pool_lookup(p, probe[k], &base, &size), GA_OK);
            ck_assert_uint_eq(base, a[i]);
            ck_assert_uint_eq(size, rounded);
            ck_assert(ga_pool_owns(p, probe[k]));
            /* the free path's exact probe: the base only */
            ck_assert_uint_eq(ga_pool_live_size(p, probe[k]), k == 0 ? rounded : 0);
        }
        ck_assert_int_eq(ga_pool_free(p, a[i] + 512, NULL), GA_EINTERIOR);
    }
    ck_assert_int_eq(ga_pool_lookup(p, 42, NULL, NULL), GA_ENOTOWNED);
    ck_assert_uint_eq(ga_pool_live_size(p, 42), 0);
    ck_assert(!ga_pool_owns(p, 42));
    ck_assert_int_eq(ga_pool_free(p, 42, NULL), GA_ENOTOWNED);
    size_t got = 0;
    ck_assert_int_eq(ga_pool_free(p, a[1], &got), GA_OK);
    ck_assert_uint_eq(got, 700 * KIB);
    ck_assert_int_eq(ga_pool_free(p, a[1], NULL), GA_EDOUBLE);
    ck_assert_int_eq(ga_pool_lookup(p, a[1], NULL, NULL), GA_ENOTOWNED);
    ck_assert_uint_eq(ga_pool_live_size(p, a[1]), 0);
    ck_assert(ga_pool_owns(p, a[1])); /* still address space the pool holds */
    ck_assert_int_eq(ga_pool_free(p, a[3], NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, a[3], NULL), GA_EDOUBLE);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.live, 4);
    bases_are(p, (uintptr_t[]){a[0], a[2], a[4], a[5]}, 4); /* over the areas */
    ck_assert_uint_eq(ga_pool_live_bases(NULL, NULL, 0), 0);
    ck_assert_uint_eq(s.allocs, 6);
    ck_assert_uint_eq(s.frees, 2);
    char map[4096];
    ck_assert_uint_gt(ga_pool_occupancy_map(p, map, sizeof map, 16), 0);
    ck_assert_uint_gt(strlen(map), 0);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* The cap counts mapped bytes; a refusal, by the cap or by the backend midway through an
 * allocation's granules, leaves nothing mapped for it. */
/* ga_pool_live_size in the other modes, on host memory: the rounded size at a live base, 0 at an
 * interior, freed or foreign address and for no pool, and the same answer ga_pool_lookup gives. */
static int hm_reserve(void *ctx, size_t size, uintptr_t *base)
{
    (void)ctx;
    void *m = aligned_alloc(GA_ALIGN, (size + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN);
    *base = (uintptr_t)m;
    return m ? 0 : -1;
}

static int hm_release(void *ctx, uintptr_t base, size_t size)
{
    (void)ctx, (void)size;
    free((void *)base);
    return 0;
}

START_TEST(pool_live_size_every_mode)
{
    ga_mode_t modes[] = {GA_MODE_ARENA, GA_MODE_GROW, GA_MODE_PLATFORM};
    ga_pool_backend_t be = {.reserve = hm_reserve, .release = hm_release};
    ck_assert_uint_eq(ga_pool_live_size(NULL, 4096), 0);
    for (int m = 0; m < 3; m++) {
        ga_pool_config_t cfg = {.mode = modes[m], .initial = modes[m] == GA_MODE_ARENA ? 8 * MIB : 0};
        ga_status_t st = GA_EINVAL;
        ga_pool_t *p = ga_pool_create(&be, &cfg, &st);
        ck_assert_msg(p && st == GA_OK, "mode %d: %s", m, ga_status_str(st));
        size_t sizes[] = {1, 512, 513, 70000, 3 * MIB + 1};
        uintptr_t a[5];
        for (int i = 0; i < 5; i++) {
            a[i] = pool_alloc(p, sizes[i]);
            size_t rounded = (sizes[i] + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN, size = 0;
            ck_assert_uint_eq(ga_pool_live_size(p, a[i]), rounded);
            ck_assert_int_eq(ga_pool_lookup(p, a[i], NULL, &size), GA_OK);
            ck_assert_uint_eq(size, rounded);
            if (rounded > GA_ALIGN)
                ck_assert_uint_eq(ga_pool_live_size(p, a[i] + GA_ALIGN), 0);
        }
        ck_assert_uint_eq(ga_pool_live_size(p, 0), 0);
        ck_assert_uint_eq(ga_pool_live_size(p, 42), 0);
        for (int i = 0; i < 5; i += 2) {
            ck_assert_int_eq(ga_pool_free(p, a[i], NULL), GA_OK);
            ck_assert_uint_eq(ga_pool_live_size(p, a[i]), 0);
        }
        ck_assert_uint_eq(ga_pool_live_size(p, a[3]), 70144);
        bases_are(p, (uintptr_t[]){a[1], a[3]}, 2);
        POOL_HEALTHY(p);
        ga_pool_destroy(p);
    }
}
END_TEST

/* The pool's allocation and free counts are its areas' less the blocks it took back at once (a
 * losing trial in the general area, a block whose granules the backend refused): every figure
 * is what the caller saw succeed, through trials, classes, granule multiples, a refused map, a
 * refused free and a trim. */
static void figures_are(ga_pool_t *p, uint64_t allocs, uint64_t frees, uint64_t failed)
{
    ga_stats_t s;
    ga_pool_stats(p, &s);
    REQUIRE(s.allocs == allocs && s.frees == frees && s.live == allocs - frees &&
                s.failed_allocs == failed,
            "%llu allocs, %llu frees, %llu live, %llu failed; want %llu, %llu, %llu, %llu",
            (unsigned long long)s.allocs, (unsigned long long)s.frees,
            (unsigned long long)s.live, (unsigned long long)s.failed_allocs,
            (unsigned long long)allocs, (unsigned long long)frees,
            (unsigned long long)(allocs - frees), (unsigned long long)failed);
    POOL_HEALTHY(p);
}

START_TEST(vmm_counts_through_trials_and_refusals)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    uintptr_t small = pool_alloc(p, 10 * KIB); /* general */
    figures_are(p, 1, 0, 0);
    unsigned maps = f.maps;
    uintptr_t big = pool_alloc(p, 3 * GRAN); /* aligned, its area's first: tried in general too */
    ck_assert_uint_eq(f.maps - maps, 3);
    figures_are(p, 2, 0, 0);
    uintptr_t c[3];
    for (int i = 0; i < 3; i++) /* the second and third get a class */
        c[i] = pool_alloc(p, MIB + 512);
    figures_are(p, 5, 0, 0);
    uintptr_t x = 0;
    f.fail_map_in = 1; /* placed, then its first granule refused: given back */
    ck_assert_int_eq(ga_pool_alloc(p, 2 * GRAN, &x), GA_ENOMEM);
    figures_are(p, 5, 0, 1);
    f.fail_map_in = 1;
    ck_assert_int_eq(ga_pool_alloc(p, 5 * MIB + 512, &x), GA_ENOMEM); /* general, across granules */
    figures_are(p, 5, 0, 2);
    ck_assert_int_eq(ga_pool_free(p, c[1], NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, c[1], NULL), GA_EDOUBLE); /* refused: no free counted */
    ck_assert_int_eq(ga_pool_free(p, big, NULL), GA_OK);
    figures_are(p, 5, 2, 2);
    c[1] = pool_alloc(p, MIB + 512); /* back into the class's hole */
    big = pool_alloc(p, 3 * GRAN);
    figures_are(p, 7, 2, 2);
    ga_pool_trim(p);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ga_pool_free(p, c[i], NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, small, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, big, NULL), GA_OK);
    figures_are(p, 7, 7, 2);
    destroy_clean(p, &f);
}
END_TEST

/* Every area's live blocks are in one table of the pool: a free and a live-size query find the
 * block and its area there, in every range. A first range of 8 granules fills at once, so most
 * blocks of each kind (small, class, granule multiple) land in later ranges; each answers its
 * size at its base only, frees once (then a double free), and with nothing kept every granule
 * goes back. */
START_TEST(vmm_live_blocks_found_in_every_area_and_range)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool_va(&f, 0, 0, 8 * GRAN);
    size_t sizes[] = {3000, 64 * KIB, MIB + 512, 3 * GRAN, 700 * KIB, 5 * MIB + 512, GRAN};
    enum { N = 42 };
    uintptr_t a[N];
    size_t want[N];
    for (int i = 0; i < N; i++) {
        size_t sz = sizes[i % 7];
        a[i] = pool_alloc(p, sz);
        want[i] = (sz + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN;
    }
    ck_assert_uint_ge(f.va_reserves, 3);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(ga_pool_live_size(p, a[i]), want[i]);
        ck_assert_uint_eq(ga_pool_live_size(p, a[i] + GA_ALIGN), 0);
        uintptr_t base = 0;
        ck_assert_int_eq(ga_pool_lookup(p, a[i] + want[i] - 1, &base, NULL), GA_OK);
        ck_assert_uint_eq(base, a[i]);
    }
    POOL_HEALTHY(p);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = pass; i < N; i += 2) { /* every other block, then the rest */
            ck_assert_int_eq(ga_pool_free(p, a[i] + GA_ALIGN, NULL), GA_EINTERIOR);
            size_t got = 0;
            ck_assert_int_eq(ga_pool_free(p, a[i], &got), GA_OK);
            ck_assert_uint_eq(got, want[i]);
            ck_assert_uint_eq(ga_pool_live_size(p, a[i]), 0);
            ck_assert_int_eq(ga_pool_free(p, a[i], NULL), GA_EDOUBLE);
        }
        POOL_HEALTHY(p);
    }
    ck_assert_uint_eq(ga_pool_live_bases(p, NULL, 0), 0);
    ck_assert_uint_eq(f.mapped, 0);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.allocs, N);
    ck_assert_uint_eq(s.frees, N);
    destroy_clean(p, &f);
}
END_TEST

START_TEST(vmm_cap_and_refusal_midway)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 8 * GRAN, 0);
    pool_alloc(p, 3 * GRAN); /* aligned: three granules */
    pool_alloc(p, 10 * KIB); /* general: one */
    ck_assert_uint_eq(mapped_granules(p), 4);
    uintptr_t x = 0;
    ck_assert_int_eq(ga_pool_alloc(p, 5 * GRAN, &x), GA_ENOMEM);
    ck_assert_uint_eq(mapped_granules(p), 4);
    f.fail_map_in = 2; /* the second granule of the next one fails */
    ck_assert_int_eq(ga_pool_alloc(p, 2 * GRAN, &x), GA_ENOMEM);
    ck_assert_uint_eq(mapped_granules(p), 4);
    ck_assert_uint_eq(f.mapped, 4 * GRAN);
    POOL_HEALTHY(p);
    pool_alloc(p, 4 * GRAN); /* exactly up to the cap */
    ck_assert_uint_eq(mapped_granules(p), 8);
    pool_alloc(p, 512); /* in the general granule's free part: nothing new */
    ck_assert_int_eq(ga_pool_alloc(p, GRAN + 512, &x), GA_ENOMEM);
    ck_assert_uint_eq(mapped_granules(p), 8);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.failed_allocs, 3);
    ck_assert_uint_eq(s.peak_reserved, 8 * GRAN);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* A block of GA_VMM_PRECHECK granules or more that the device cannot hold beside what is mapped
 * (its free bytes, from the backend's device_free, plus the kept granules that would be given back
 * first) is refused with nothing mapped; one that fits with the kept granules given back is
 * served; smaller blocks do not ask. */
START_TEST(vmm_device_free_checked_first)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 8 * GRAN);
    f.device = 32 * GRAN;
    pool_alloc(p, 10 * GRAN);
    uintptr_t k[8];
    for (int i = 0; i < 8; i++)
        k[i] = pool_alloc(p, GRAN);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(ga_pool_free(p, k[i], NULL), GA_OK);
    ck_assert_uint_eq(f.mapped, 18 * GRAN); /* 10 live, 8 kept; the device has 14 free */
    ck_assert_uint_eq(f.free_asks, 0);
    unsigned maps = f.maps;
    uintptr_t x = 0;
    ck_assert_int_eq(ga_pool_alloc(p, 23 * GRAN, &x), GA_ENOMEM);
    ck_assert_uint_eq(f.maps, maps);
    ck_assert_uint_eq(f.free_asks, 1);
    POOL_HEALTHY(p);
    x = pool_alloc(p, 22 * GRAN); /* the kept granules taken or given back, 14 new */
    ck_assert_uint_eq(f.mapped, 32 * GRAN);
    POOL_HEALTHY(p);
    ck_assert_int_eq(ga_pool_free(p, x, NULL), GA_OK);
    f.device = 0;
    unsigned asks = f.free_asks;
    pool_alloc(p, 15 * GRAN); /* under GA_VMM_PRECHECK granules to map: not asked */
    ck_assert_uint_eq(f.free_asks, asks);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* Sizes past the last class (GA_VMM_CLASSES), and past the sizes tracked for one, go to the
 * general area, and everything still checks out. */
START_TEST(vmm_more_sizes_than_classes)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    size_t n = 250; /* two blocks of each size, so that each would get a class */
    uintptr_t *a = calloc(2 * n, sizeof *a);
    ck_assert_ptr_nonnull(a);
    for (size_t i = 0; i < 2 * n; i++)
        a[i] = pool_alloc(p, MIB + (i / 2 + 1) * GA_ALIGN);
    POOL_HEALTHY(p);
    for (size_t i = 0; i < 2 * n; i++) {
        uintptr_t base = 0;
        ck_assert_int_eq(ga_pool_lookup(p, a[i] + MIB, &base, NULL), GA_OK);
        ck_assert_uint_eq(base, a[i]);
    }
    for (size_t i = 0; i < 2 * n; i++)
        ck_assert_int_eq(ga_pool_free(p, a[i], NULL), GA_OK);
    ck_assert_uint_eq(mapped_granules(p), 0);
    POOL_HEALTHY(p);
    free(a);
    destroy_clean(p, &f);
}
END_TEST

/* Kept granules are reused at no backend cost and given back by trim. */
START_TEST(vmm_keep_and_trim)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 8 * GRAN);
    uintptr_t a[4];
    for (int i = 0; i < 4; i++)
        a[i] = pool_alloc(p, MIB + 512 * KIB);
    unsigned maps = f.maps;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ga_pool_free(p, a[i], NULL), GA_OK);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 4 * GRAN); /* the first in the general area, 3 in the class */
    for (int i = 0; i < 4; i++) /* all four in the class now, on its kept granules */
        pool_alloc(p, MIB + 512 * KIB);
    ck_assert_uint_eq(f.maps, maps);
    ga_pool_trim(p);
    POOL_HEALTHY(p);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 0);
    ck_assert_uint_eq(s.reserved, 3 * GRAN);
    destroy_clean(p, &f);
}
END_TEST

/* Granule multiples take the granules a freed one left kept with nothing mapped (the aligned
 * area's quick path), take what is kept and map the rest when a block needs more than is kept,
 * and map everything anew when nothing is kept; every figure agrees with the backend's. */
START_TEST(vmm_aligned_blocks_reuse_kept_granules)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 8 * GRAN);
    uintptr_t a = pool_alloc(p, 4 * GRAN), b = pool_alloc(p, GRAN);
    ck_assert_uint_eq(f.maps, 5);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 4 * GRAN);
    ck_assert_uint_eq(pool_alloc(p, 4 * GRAN), a); /* the same place, on its kept granules */
    ck_assert_uint_eq(f.maps, 5);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 0);
    ck_assert_uint_eq(s.reserved, 5 * GRAN);
    ck_assert_uint_eq(s.in_use, 5 * GRAN);
    POOL_HEALTHY(p);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ck_assert_uint_eq(pool_alloc(p, 2 * GRAN), a); /* half of the hole: two kept granules */
    ck_assert_uint_eq(f.maps, 5);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 2 * GRAN);
    POOL_HEALTHY(p);
    ck_assert_int_eq(ga_pool_free(p, b, NULL), GA_OK); /* 3 kept granules after a's two */
    uintptr_t c = pool_alloc(p, 4 * GRAN);             /* those 3, and one mapped */
    ck_assert_uint_eq(c, a + 2 * GRAN);
    ck_assert_uint_eq(f.maps, 6);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 0);
    ck_assert_uint_eq(s.reserved, 6 * GRAN);
    POOL_HEALTHY(p);
    ck_assert_int_eq(ga_pool_free(p, c + GRAN, NULL), GA_EINTERIOR);
    ck_assert_int_eq(ga_pool_free(p, c, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, c, NULL), GA_EDOUBLE);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 6 * GRAN);
    ck_assert_uint_eq(s.in_use, 0);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);

    p = vmm_pool(&f, 0, 0); /* nothing kept: every reuse maps again */
    a = pool_alloc(p, 3 * GRAN);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ck_assert_uint_eq(f.mapped, 0);
    ck_assert_uint_eq(pool_alloc(p, 3 * GRAN), a);
    ck_assert_uint_eq(f.maps, 6);
    ck_assert_uint_eq(f.mapped, 3 * GRAN);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

/* A seeded mix of every kind of size, frees in random order, the pool checked after each step;
 * and physical memory never above what each area's live bytes need plus a granule per area
 * boundary it touches: here a loose global bound, 1.5 x the live bytes plus 16 granules. */
START_TEST(vmm_random_workload_checked)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 4 * GRAN);
    enum { N = 3000, SLOTS = 96 };
    uintptr_t live[SLOTS] = {0};
    size_t live_bytes = 0, sz[SLOTS] = {0};
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int step = 0; step < N; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int i = (int)(x % SLOTS);
        if (live[i]) {
            size_t got = 0;
            REQUIRE(ga_pool_free(p, live[i], &got) == GA_OK, "free at step %d", step);
            REQUIRE_EQ(got, sz[i]);
            live_bytes -= got, live[i] = 0;
        } else {
            static const size_t kinds[] = {700, 40 * KIB, MIB + 512, 3 * MIB / 2, 4 * MIB,
                                           4 * MIB + 512 * KIB, 9 * MIB + 1000, 300 * KIB};
            size_t s = kinds[(x >> 20) % 8] + ((x >> 40) % 3) * GA_ALIGN;
            live[i] = pool_alloc(p, s);
            sz[i] = (s + GA_ALIGN - 1) / GA_ALIGN * GA_ALIGN;
            live_bytes += sz[i];
        }
        POOL_HEALTHY(p);
        REQUIRE(mapped_granules(p) * GRAN <= live_bytes + live_bytes / 2 + 16 * GRAN,
                "step %d: %zu granules mapped for %zu live bytes", step, mapped_granules(p),
                live_bytes);
    }
    for (int i = 0; i < SLOTS; i++)
        if (live[i])
            ck_assert_int_eq(ga_pool_free(p, live[i], NULL), GA_OK);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.in_use, 0);
    ck_assert_uint_eq(s.live, 0);
    ck_assert_uint_eq(s.reserved, s.kept);
    POOL_HEALTHY(p);
    destroy_clean(p, &f);
}
END_TEST

Suite *vmm_suite(void)
{
    Suite *s = suite_create("vmm");
    TCase *tc = tcase_create("placement");
    /* The seeded workloads check the whole pool after every step: about a second under ASan at
     * -O1, which overran Check's default 4 s once when the machine was loaded by other work. */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, vmm_small_allocations_share_a_granule);
    tcase_add_test(tc, vmm_fits_only_on_mapped_granules);
    tcase_add_test(tc, vmm_fits_means_no_backend_call);
    tcase_add_test(tc, vmm_equal_sizes_tile_granules);
    tcase_add_test(tc, vmm_class_hole_refilled);
    tcase_add_test(tc, vmm_sizes_do_not_cut_each_others_holes);
    tcase_add_test(tc, vmm_replacement_reuses_freed_granules);
    tcase_add_test(tc, vmm_lookup_and_bad_frees);
    tcase_add_test(tc, pool_live_size_every_mode);
    tcase_add_test(tc, vmm_cap_and_refusal_midway);
    tcase_add_test(tc, vmm_counts_through_trials_and_refusals);
    tcase_add_test(tc, vmm_live_blocks_found_in_every_area_and_range);
    tcase_add_test(tc, vmm_more_sizes_than_classes);
    tcase_add_test(tc, vmm_device_free_checked_first);
    tcase_add_test(tc, vmm_keep_and_trim);
    tcase_add_test(tc, vmm_aligned_blocks_reuse_kept_granules);
    tcase_add_test(tc, vmm_random_workload_checked);
    vmm_granules_add(tc); /* test_vmm_granules.c */
    vmm_park_add(tc);     /* test_vmm_park.c */
    vmm_park_table_add(tc); /* test_vmm_park_table.c */
    suite_add_tcase(s, tc);
    return s;
}
