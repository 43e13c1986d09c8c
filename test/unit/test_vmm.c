/* The vmm pool's placement (pool_vmm.c) on a fake virtual-memory backend: address ranges from a
 * bump pointer, map and unmap only counted, a map that can be told to fail. What is asserted is
 * physical memory, counted in granules: small allocations share granules, equal sizes tile them,
 * granule multiples never leave one partly used, a size gets a class only once two of its blocks
 * are live, and a block goes where it maps fewer new granules; and everything a pool promises holds
 * with the placement areas in between (interior lookup, bad frees, the cap, refusal midway, trim,
 * destroy, ga_pool_check after every step of a seeded random workload).
 */
#include <stdlib.h>

#include "ga_pool.h"
#include "pool_internal.h"
#include "testutil.h"

#define GRAN (2 * MIB)

typedef struct vfake {
    uint64_t next;
    unsigned va_reserves, va_releases, maps, unmaps;
    size_t mapped, peak_mapped;
    size_t va_held, va_peak, va_largest; /* address space reserved now, at most, in one range */
    int fail_map_in; /* > 0: the map call that many calls from now fails */
} vfake_t;

static int vf_va_reserve(void *ctx, size_t size, uintptr_t *base)
{
    vfake_t *f = ctx;
    *base = (uintptr_t)f->next;
    f->next += (size + GRAN - 1) / GRAN * GRAN + GRAN; /* a gap: ranges never touch */
    f->va_reserves++;
    f->va_held += size;
    f->va_peak = f->va_held > f->va_peak ? f->va_held : f->va_peak;
    f->va_largest = size > f->va_largest ? size : f->va_largest;
    return 0;
}

static void vf_va_release(void *ctx, uintptr_t base, size_t size)
{
    vfake_t *f = ctx;
    (void)base;
    f->va_releases++;
    f->va_held -= size;
}

static int vf_map(void *ctx, uintptr_t addr, size_t size, uint64_t *handle)
{
    vfake_t *f = ctx;
    if (f->fail_map_in > 0 && --f->fail_map_in == 0)
        return -1;
    REQUIRE(addr % GRAN == 0 && size == GRAN, "map of %#lx, %zu bytes", (unsigned long)addr, size);
    *handle = (uint64_t)addr | 1;
    f->maps++;
    f->mapped += size;
    if (f->mapped > f->peak_mapped)
        f->peak_mapped = f->mapped;
    return 0;
}

static void vf_unmap(void *ctx, uintptr_t addr, size_t size, uint64_t handle)
{
    vfake_t *f = ctx;
    REQUIRE(handle == ((uint64_t)addr | 1), "unmap with a handle not from map");
    f->unmaps++;
    f->mapped -= size;
}

static ga_pool_t *vmm_pool_va(vfake_t *f, size_t limit, size_t keep, size_t va_size)
{
    memset(f, 0, sizeof *f);
    f->next = (uint64_t)1 << 40;
    ga_pool_backend_t be = {.va_reserve = vf_va_reserve, .va_release = vf_va_release,
                            .map = vf_map, .unmap = vf_unmap, .granularity = GRAN, .ctx = f};
    ga_pool_config_t cfg = {.mode = GA_MODE_VMM, .limit = limit, .va_size = va_size,
                            .keep = keep};
    ga_status_t st = GA_EINVAL;
    ga_pool_t *p = ga_pool_create(&be, &cfg, &st);
    ck_assert_msg(p && st == GA_OK, "vmm pool: %s", ga_status_str(st));
    return p;
}

static ga_pool_t *vmm_pool(vfake_t *f, size_t limit, size_t keep)
{
    return vmm_pool_va(f, limit, keep, 1024 * MIB);
}

#define POOL_HEALTHY(p)                                                        \
    do {                                                                       \
        char rep_[1024];                                                       \
        int n_ = ga_pool_check((p), rep_, sizeof rep_);                        \
        REQUIRE(n_ == 0, "ga_pool_check found %d failures:\n%s", n_, rep_);    \
    } while (0)

static uintptr_t pool_alloc(ga_pool_t *p, size_t size)
{
    uintptr_t a = 0;
    ga_status_t st = ga_pool_alloc(p, size, &a);
    REQUIRE(st == GA_OK, "ga_pool_alloc(%zu): %s", size, ga_status_str(st));
    return a;
}

static size_t mapped_granules(const ga_pool_t *p)
{
    ga_stats_t s;
    ga_pool_stats(p, &s);
    return (size_t)(s.reserved / GRAN);
}

/* Destroy gives back every granule and every range. */
static void destroy_clean(ga_pool_t *p, vfake_t *f)
{
    ga_pool_destroy(p);
    ck_assert_uint_eq(f->mapped, 0);
    ck_assert_uint_eq(f->maps, f->unmaps);
    ck_assert_uint_eq(f->va_reserves, f->va_releases);
}

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

/* ga_pool_fits in vmm mode (the lazy free fence asks it): yes for a small size whose place is on
 * mapped granules, no when it would map one, no for sizes from half a granule up; nothing changes. */
START_TEST(vmm_fits_only_on_mapped_granules)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, 0);
    ck_assert_int_eq(ga_pool_fits(p, 4 * KIB), 0); /* nothing mapped yet */
    uintptr_t a = pool_alloc(p, 32 * KIB);
    unsigned maps = f.maps;
    ck_assert_int_eq(ga_pool_fits(p, 32 * KIB), 1); /* next to a, in its granule */
    ck_assert_int_eq(ga_pool_fits(p, GRAN - 64 * KIB), 0); /* would reach the next granule */
    ck_assert_int_eq(ga_pool_fits(p, GRAN / 2), 0); /* not a fast-path size */
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

/* The one-granule fast paths (pool_vmm.c, cover and uncover): a granule is mapped when its first
 * block comes and given back exactly when its last one goes, also for a block across a granule
 * boundary, whose two granules are counted apart; a kept granule is reused without a map. */
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

Suite *vmm_suite(void)
{
    Suite *s = suite_create("vmm");
    TCase *tc = tcase_create("placement");
    /* The seeded workloads check the whole pool after every step: about a second under ASan at
     * -O1, which overran Check's default 4 s once when the machine was loaded by other work. */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, vmm_granularity_must_be_power_of_two);
    tcase_add_test(tc, vmm_huge_granules_end);
    tcase_add_test(tc, vmm_small_allocations_share_a_granule);
    tcase_add_test(tc, vmm_fits_only_on_mapped_granules);
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
    tcase_add_test(tc, vmm_keep_and_trim);
    tcase_add_test(tc, vmm_aligned_blocks_reuse_kept_granules);
    tcase_add_test(tc, vmm_granule_counts_exact);
    tcase_add_test(tc, vmm_random_workload_checked);
    tcase_add_test(tc, vmm_long_blocks_keep_and_refuse);
    tcase_add_test(tc, vmm_aligned_free_keeps_what_fits);
    tcase_add_test(tc, vmm_aligned_word_edges);
    tcase_add_test(tc, vmm_mapped_is_what_live_blocks_touch);
    tcase_add_test(tc, vmm_address_space_bounded_under_trim);
    tcase_add_test(tc, vmm_range_host_memory_bounded);
    suite_add_tcase(s, tc);
    return s;
}
