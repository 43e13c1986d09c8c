/* Unit tests of the arena through its public API only (ga_arena.h): placement, splitting,
 * coalescing, growth, limits, trim (test_arena_regions.c), lookup, statistics, the occupancy map,
 * and every kind of bad input. Regions come from the fake backend (addresses only, every reserve
 * logged) so growth sizes can be asserted exactly; ga_check runs after every step that changes the
 * arena.
 */
#include <stdint.h>

#include "testutil.h"

/* Bad input ----------------------------------------------------------------------------------- */

START_TEST(test_create_bad_args)
{
    ga_status_t st = GA_OK;
    ck_assert_ptr_null(ga_arena_create(NULL, NULL, &st));
    ck_assert_int_eq(st, GA_EINVAL);
    ga_backend_t half = {NULL, NULL, NULL};
    ck_assert_ptr_null(ga_arena_create(&half, NULL, &st));
    ck_assert_int_eq(st, GA_EINVAL);

    fake_backend_t f;
    fake_init(&f);
    ga_backend_t b = fake_backend(&f);
    ga_config_t too_big = {.initial = SIZE_MAX};
    ck_assert_ptr_null(ga_arena_create(&b, &too_big, &st));
    ck_assert_int_eq(st, GA_EINVAL);
    ga_config_t over_limit = {.initial = 4 * MIB, .limit = 2 * MIB};
    ck_assert_ptr_null(ga_arena_create(&b, &over_limit, &st));
    ck_assert_int_eq(st, GA_ENOMEM);
    f.fail_calls = 1;
    ga_config_t refused = {.initial = 4 * MIB};
    ck_assert_ptr_null(ga_arena_create(&b, &refused, NULL)); /* NULL status is allowed */
    ck_assert_uint_eq(f.outstanding, 0);

    ga_arena_t *a = ga_arena_create(&b, NULL, &st); /* NULL config: grow on demand, nothing yet */
    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq(stats_of(a).reserved, 0);
    ck_assert_uint_eq(f.reserves, 0);
    must_alloc(a, 1000);
    ck_assert_uint_eq(f.asked[f.nasked - 1], 2 * MIB);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
    ga_config_t zero = {0}; /* all zero: the same, even though grow says 0 */
    a = ga_arena_create(&b, &zero, &st);
    must_alloc(a, 1000);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_null_arguments)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 0);
    uintptr_t p = must_alloc(a, 1000);
    ga_stats_t before = stats_of(a);
    ASSERT_STATUS(ga_alloc(a, 512, NULL), GA_EINVAL);
    ASSERT_STATUS(ga_alloc(NULL, 512, &p), GA_EINVAL);
    ASSERT_STATUS(ga_free(NULL, p), GA_EINVAL);
    ASSERT_STATUS(ga_lookup(NULL, p, NULL, NULL), GA_EINVAL);
    ASSERT_STATUS(ga_lookup(a, p + 10, NULL, NULL), GA_OK); /* either out-parameter may be NULL */
    ck_assert_int_eq(ga_owns(NULL, p), 0);
    ck_assert_uint_eq(ga_trim(NULL), 0);
    ga_get_stats(a, NULL);
    ck_assert_int_gt(ga_check(NULL, NULL, 0), 0);
    ck_assert_uint_eq(ga_occupancy_map(NULL, NULL, 0, 8), 0);
    ck_assert_double_eq(ga_fragmentation(NULL), 0.0);
    ga_arena_destroy(NULL);
    ga_stats_t after = stats_of(a);
    ck_assert_mem_eq(&before, &after, sizeof before);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_bad_sizes)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 0);
    must_alloc(a, 4096);
    ga_stats_t before = stats_of(a);
    /* Size 0 is invalid; sizes whose rounding would wrap are too big, an error of their own
     * (issue 2: each bad input a distinct error; both were GA_EINVAL). */
    const size_t invalid[] = {0, SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 510, SIZE_MAX - 256};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        uintptr_t p = 77;
        ASSERT_STATUS(ga_alloc(a, invalid[i], &p), i ? GA_ETOOBIG : GA_EINVAL);
        ck_assert_uint_eq(p, 77);
    }
    ga_stats_t after = stats_of(a);
    ck_assert_mem_eq(&before, &after, sizeof before);
    /* Huge sizes that still round without overflow are a plain out-of-memory. */
    const size_t huge[] = {SIZE_MAX - 511, SIZE_MAX & ~(GA_ALIGN - 1), SIZE_MAX / 2 + 1};
    for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
        uintptr_t p;
        f.fail_above = 1ull << 40;
        ASSERT_STATUS(ga_alloc(a, huge[i], &p), GA_ENOMEM);
        ASSERT_HEALTHY(a);
    }
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.failed_allocs, 3);
    ck_assert_uint_eq(s.frag_failures, 0);
    ck_assert_uint_eq(s.reserved, before.reserved);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_bad_free)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 64 * KIB, 0, 0, 0);
    uintptr_t x = must_alloc(a, 2048);
    uintptr_t y = must_alloc(a, 4096);
    uintptr_t z = must_alloc(a, 1024);
    ck_assert_int_eq(ga_free(a, y), GA_OK);
    ga_stats_t before = stats_of(a);
    struct { uintptr_t p; ga_status_t want; } cases[] = {
        {0, GA_ENOTOWNED},
        {x - 1, GA_ENOTOWNED},
        {x + 64 * KIB, GA_ENOTOWNED},
        {UINTPTR_MAX, GA_ENOTOWNED},
        {y, GA_EDOUBLE},             /* freed just now */
        {y + 1536, GA_EDOUBLE},      /* inside the free chunk */
        {z + 4096, GA_EDOUBLE},      /* inside the free tail of the region */
        {x + 512, GA_EINTERIOR},
        {x + 1, GA_EINTERIOR},
        {z + 1023, GA_EINTERIOR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ASSERT_STATUS(ga_free(a, cases[i].p), cases[i].want);
        ASSERT_HEALTHY(a);
        ga_stats_t after = stats_of(a);
        ck_assert_mem_eq(&before, &after, sizeof before);
    }
    ASSERT_STATUS(ga_free(a, x), GA_OK);
    ASSERT_STATUS(ga_free(a, x), GA_EDOUBLE);
    ASSERT_STATUS(ga_free(a, z), GA_OK);
    ck_assert_uint_eq(stats_of(a).live, 0);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_status_strings)
{
    const char *seen[8];
    for (int s = GA_OK; s <= GA_ENOHOST; s++) {
        seen[s] = ga_status_str((ga_status_t)s);
        ck_assert_ptr_nonnull(seen[s]);
        ck_assert_int_gt((int)strlen(seen[s]), 0);
        for (int t = 0; t < s; t++)
            ck_assert_str_ne(seen[s], seen[t]);
    }
    ck_assert_str_eq(ga_status_str((ga_status_t)99), "unknown status");
}
END_TEST

/* Placement, splitting, coalescing ------------------------------------------------------------ */

START_TEST(test_rounding_alignment)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 0);
    const size_t sizes[] = {1, 511, 512, 513, 1000, 4097, 65536 + 1};
    uint64_t rounded = 0, requested = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uintptr_t p = must_alloc(a, sizes[i]);
        size_t want = (sizes[i] + 511) / 512 * 512, got = 0;
        uintptr_t base = 0;
        ASSERT_STATUS(ga_lookup(a, p, &base, &got), GA_OK);
        ck_assert_uint_eq(base, p);
        ck_assert_uint_eq(got, want);
        rounded += want;
        requested += sizes[i];
        ASSERT_HEALTHY(a);
    }
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.in_use, rounded);
    ck_assert_uint_eq(s.in_use_requested, requested);
    ga_arena_destroy(a);
}
END_TEST

/* Lays out guard, hole, guard, hole... in a region; frees the holes; returns their bases. */
static void make_holes(ga_arena_t *a, const size_t *holes, size_t n, uintptr_t *bases)
{
    for (size_t i = 0; i < n; i++) {
        must_alloc(a, 512); /* guard keeps holes from merging */
        bases[i] = must_alloc(a, holes[i]);
    }
    must_alloc(a, 512);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(ga_free(a, bases[i]), GA_OK);
    ASSERT_HEALTHY(a);
}

START_TEST(test_best_fit_small)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 1 * MIB, 0, 0, 0);
    const size_t holes[] = {1 * KIB, 4 * KIB, 2 * KIB, 3 * KIB};
    uintptr_t h[4];
    make_holes(a, holes, 4, h);
    ck_assert_uint_eq(must_alloc(a, 1536), h[2]); /* 2 KiB is the smallest that fits */
    ck_assert_uint_eq(must_alloc(a, 2560), h[3]); /* then 3 KiB */
    /* both splits left 512 B; the smaller request takes the lower of the two */
    ck_assert_uint_eq(must_alloc(a, 100), h[2] + 1536);
    ck_assert_uint_eq(must_alloc(a, 1 * KIB), h[0]);
    ck_assert_uint_eq(must_alloc(a, 4 * KIB), h[1]);
    ck_assert_uint_eq(must_alloc(a, 512), h[3] + 2560);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_best_fit_large_bins)
{
    /* Above 32 KiB a bin spans several sizes: 201 and 200 granules share one, 300 is higher. */
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 4 * MIB, 0, 0, 0);
    const size_t holes[] = {201 * 512, 300 * 512, 200 * 512};
    uintptr_t h[3];
    make_holes(a, holes, 3, h);
    ck_assert_uint_eq(must_alloc(a, 200 * 512), h[2]); /* exact, though 201 is in the same bin */
    ck_assert_uint_eq(must_alloc(a, 201 * 512 - 100), h[0]);
    ck_assert_uint_eq(must_alloc(a, 250 * 512), h[1]); /* own bin empty: the next bin */
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

/* The first bitmap level is cleared lazily: a bin that empties leaves its first-level bit set,
 * and the next search that meets the bit over an empty word clears it and looks further up. */
START_TEST(test_best_fit_skips_emptied_levels)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 16 * MIB, 0, 0, 0);
    const size_t holes[] = {100 * 512, 1000 * 512, 3000 * 512}; /* first levels 1, 4 and 6 */
    uintptr_t h[3];
    make_holes(a, holes, 3, h);
    ck_assert_uint_eq(must_alloc(a, 100 * 512), h[0]); /* level 1 empties, its bit stays */
    ck_assert_uint_eq(must_alloc(a, 40 * 512), h[1]); /* level 0 has nothing: past level 1 to 4 */
    ASSERT_HEALTHY(a);
    ck_assert_uint_eq(must_alloc(a, 960 * 512), h[1] + 40 * 512); /* the rest of the 1000 */
    ck_assert_uint_eq(must_alloc(a, 1500 * 512), h[2]); /* level 5 has nothing; 4 emptied too */
    ck_assert_int_eq(ga_free(a, h[0]), GA_OK);          /* level 1 filled again */
    ck_assert_uint_eq(must_alloc(a, 60 * 512), h[0]);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_best_fit_ties_lowest_address)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 1 * MIB, 0, 0, 0);
    const size_t holes[] = {2 * KIB, 2 * KIB, 2 * KIB};
    uintptr_t h[3];
    make_holes(a, holes, 3, h);
    ck_assert_uint_eq(must_alloc(a, 2 * KIB), h[0]);
    ck_assert_uint_eq(must_alloc(a, 2 * KIB), h[1]);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_split)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 64 * KIB, 0, 0, 0);
    uintptr_t p = must_alloc(a, 1 * KIB);
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.total_free, 63 * KIB);
    ck_assert_uint_eq(s.largest_free, 63 * KIB);
    ck_assert_int_eq(ga_owns(a, p + 1 * KIB), 1);
    ASSERT_STATUS(ga_lookup(a, p + 1 * KIB, NULL, NULL), GA_ENOTOWNED);
    /* The smallest possible remainder (one granule) is still split off. */
    uintptr_t q = must_alloc(a, 63 * KIB - 512);
    ck_assert_uint_eq(q, p + 1 * KIB);
    s = stats_of(a);
    ck_assert_uint_eq(s.total_free, 512);
    ck_assert_uint_eq(s.largest_free, 512);
    ck_assert_uint_eq(must_alloc(a, 1), q + 63 * KIB - 512); /* exact fit, nothing left */
    s = stats_of(a);
    ck_assert_uint_eq(s.total_free, 0);
    ck_assert_uint_eq(s.largest_free, 0);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

/* Region of exactly guard | A 1K | B 2K | C 4K | guard, all live. Frees the neighbours named in
 * `free_first` (bit 0 = A, bit 1 = C), then B, and checks that what is free is one chunk. */
static void coalesce_case(unsigned free_first)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 8 * KIB, 0, 0, 0);
    uintptr_t g1 = must_alloc(a, 512), A = must_alloc(a, 1 * KIB), B = must_alloc(a, 2 * KIB);
    uintptr_t C = must_alloc(a, 4 * KIB), g2 = must_alloc(a, 512);
    ck_assert_uint_eq(g2 + 512, g1 + 8 * KIB);
    if (free_first & 1)
        ck_assert_int_eq(ga_free(a, A), GA_OK);
    if (free_first & 2)
        ck_assert_int_eq(ga_free(a, C), GA_OK);
    ASSERT_HEALTHY(a);
    ck_assert_int_eq(ga_free(a, B), GA_OK);
    ASSERT_HEALTHY(a);
    size_t merged = 2 * KIB + (free_first & 1 ? 1 * KIB : 0) + (free_first & 2 ? 4 * KIB : 0);
    uintptr_t start = free_first & 1 ? A : B;
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.largest_free, merged);
    ck_assert_uint_eq(s.total_free, merged);
    ck_assert_double_eq(ga_fragmentation(&s), 0.0);
    ck_assert_uint_eq(must_alloc(a, merged), start); /* the whole merged chunk is one piece */
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}

START_TEST(test_coalesce_none) { coalesce_case(0); }
END_TEST
START_TEST(test_coalesce_left) { coalesce_case(1); }
END_TEST
START_TEST(test_coalesce_right) { coalesce_case(2); }
END_TEST
START_TEST(test_coalesce_both) { coalesce_case(3); }
END_TEST

START_TEST(test_coalesce_whole_region)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 16 * KIB, 0, 0, 0);
    uintptr_t p[8];
    for (int i = 0; i < 8; i++)
        p[i] = must_alloc(a, 2 * KIB);
    const int order[8] = {3, 5, 0, 7, 1, 6, 2, 4};
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(ga_free(a, p[order[i]]), GA_OK);
        ASSERT_HEALTHY(a);
    }
    ck_assert_uint_eq(stats_of(a).largest_free, 16 * KIB);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_bad_backend_ranges)
{
    /* A backend returning a misaligned range breaks its contract; the arena refuses it. */
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 0);
    f.next_base += 100;
    uintptr_t p;
    ASSERT_STATUS(ga_alloc(a, 1000, &p), GA_ENOMEM);
    ck_assert_uint_eq(f.outstanding, 0);
    ASSERT_HEALTHY(a);
    /* ...and a range overlapping one it holds: starting below (4 MiB covers it), inside, or on
     * its last granule */
    f.next_base = (uintptr_t)1 << 30;
    uintptr_t first = must_alloc(a, 1 * MIB); /* region [1 GiB, +2 MiB) */
    const uintptr_t starts[] = {first - 1 * MIB, first + 1 * MIB, first + 2 * MIB - 512};
    for (int i = 0; i < 3; i++) {
        f.fixed_base = starts[i];
        ASSERT_STATUS(ga_alloc(a, 2 * MIB, &p), GA_ENOMEM);
        ASSERT_HEALTHY(a);
    }
    ck_assert_uint_eq(stats_of(a).regions, 1);
    ck_assert_uint_eq(f.outstanding, 2 * MIB);
    ga_arena_destroy(a);
}
END_TEST

/* Lookup -------------------------------------------------------------------------------------- */

START_TEST(test_lookup_interior)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 0);
    uintptr_t x = must_alloc(a, 3000), y = must_alloc(a, 512);
    uintptr_t b = 0;
    size_t s = 0;
    ASSERT_STATUS(ga_lookup(a, x + 2999, &b, &s), GA_OK);
    ck_assert_uint_eq(b, x);
    ck_assert_uint_eq(s, 3072);
    ASSERT_STATUS(ga_lookup(a, x + 3071, &b, &s), GA_OK); /* rounding slack belongs to it */
    ASSERT_STATUS(ga_lookup(a, y, &b, &s), GA_OK);
    ck_assert_uint_eq(b, y);
    ck_assert_uint_eq(s, 512);
    ASSERT_STATUS(ga_lookup(a, y + 512, &b, &s), GA_ENOTOWNED); /* free tail */
    ASSERT_STATUS(ga_lookup(a, x - 1, &b, &s), GA_ENOTOWNED);
    ck_assert_int_eq(ga_owns(a, y + 512), 1);
    ck_assert_int_eq(ga_owns(a, x + 2 * MIB - 1), 1);
    ck_assert_int_eq(ga_owns(a, x + 2 * MIB), 0);
    ck_assert_int_eq(ga_owns(a, x - 1), 0);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_lookup_many_chunks)
{
    /* 64 MiB of 512-byte granules needs three bitmap levels; every other chunk is freed. */
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 64 * MIB, 0, 0, 0);
    enum { N = 20000 };
    static uintptr_t p[N];
    static size_t sz[N];
    uint64_t seed = 12345;
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        sz[i] = 512 * (1 + (seed >> 33) % 6);
        p[i] = must_alloc(a, sz[i]);
    }
    for (int i = 0; i < N; i += 2)
        ck_assert_int_eq(ga_free(a, p[i]), GA_OK);
    ASSERT_HEALTHY(a);
    for (int i = 0; i < N; i++) {
        uintptr_t b = 0;
        size_t s = 0;
        uintptr_t q = p[i] + (uintptr_t)(i * 7919) % sz[i];
        ga_status_t st = ga_lookup(a, q, &b, &s);
        if (i % 2) {
            ck_assert_int_eq(st, GA_OK);
            ck_assert_uint_eq(b, p[i]);
            ck_assert_uint_eq(s, sz[i]);
            ck_assert_int_eq(ga_free(a, q), q == p[i] ? GA_OK : GA_EINTERIOR);
        } else {
            ck_assert_int_eq(st, GA_ENOTOWNED);
            ck_assert_int_eq(ga_free(a, q), GA_EDOUBLE);
        }
    }
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

/* Statistics and occupancy -------------------------------------------------------------------- */

START_TEST(test_every_stat)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 6 * MIB, 0);
    uintptr_t x = must_alloc(a, 1000);         /* 1024 rounded, region 2 MiB */
    uintptr_t y = must_alloc(a, 1 * MIB);
    uintptr_t z = must_alloc(a, 2 * MIB);      /* region 4 MiB (limit leaves 4) */
    ck_assert_int_eq(ga_free(a, y), GA_OK);
    uintptr_t p;
    ASSERT_STATUS(ga_alloc(a, 3 * MIB, &p), GA_ENOMEM); /* free 1M+.. and 2M: total >= 3M */
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.in_use, 1024 + 2 * MIB);
    ck_assert_uint_eq(s.in_use_requested, 1000 + 2 * MIB);
    ck_assert_uint_eq(s.peak_in_use, 1024 + 3 * MIB);
    ck_assert_uint_eq(s.reserved, 6 * MIB);
    ck_assert_uint_eq(s.peak_reserved, 6 * MIB);
    ck_assert_uint_eq(s.allocs, 3);
    ck_assert_uint_eq(s.frees, 1);
    ck_assert_uint_eq(s.failed_allocs, 1);
    ck_assert_uint_eq(s.frag_failures, 1);
    ck_assert_uint_eq(s.backend_reserves, 2);
    ck_assert_uint_eq(s.backend_releases, 0);
    ck_assert_uint_eq(s.regions, 2);
    ck_assert_uint_eq(s.live, 2);
    ck_assert_uint_eq(s.largest_free, 2 * MIB);
    ck_assert_uint_eq(s.total_free, 4 * MIB - 1024);
    ck_assert_double_eq_tol(ga_fragmentation(&s), 1.0 - (2.0 * MIB) / (4.0 * MIB - 1024),
                            1e-12);
    ck_assert_int_eq(ga_free(a, z), GA_OK);
    ck_assert_int_eq(ga_free(a, x), GA_OK);
    ck_assert_uint_eq(ga_trim(a), 6 * MIB);
    s = stats_of(a);
    ck_assert_uint_eq(s.backend_releases, 2);
    ck_assert_uint_eq(s.regions + s.live + s.in_use + s.reserved + s.total_free, 0);
    ck_assert_uint_eq(s.largest_free, 0);
    ck_assert_double_eq(ga_fragmentation(&s), 0.0);
    ck_assert_uint_eq(s.peak_in_use, 1024 + 3 * MIB);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_occupancy_map)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 8 * KIB, 1, 0, 16 * KIB);
    uintptr_t p = must_alloc(a, 2 * KIB);
    char buf[128];
    ck_assert_uint_eq(ga_occupancy_map(a, buf, sizeof buf, 16), 17);
    ck_assert_str_eq(buf, "####............\n");
    ck_assert_int_eq(ga_free(a, p), GA_OK);
    must_alloc(a, 512);                 /* a quarter of the first 2 KiB cell */
    must_alloc(a, 2 * KIB);             /* the rest of cell 0 and half of cell 1 */
    must_alloc(a, 12 * KIB);            /* second region, 16 KiB */
    ga_occupancy_map(a, buf, sizeof buf, 4);
    ck_assert_str_eq(buf, "#+..\n###.\n");
    /* snprintf-like: the full length is returned, what fits is written and terminated */
    char small[6];
    ck_assert_uint_eq(ga_occupancy_map(a, small, sizeof small, 4), 10);
    ck_assert_str_eq(small, "#+..\n");
    ck_assert_uint_eq(ga_occupancy_map(a, NULL, 0, 4), 10);
    ck_assert_uint_eq(ga_occupancy_map(a, buf, sizeof buf, 0), 0);
    ck_assert_str_eq(buf, "");
    /* more cells than granules still gives one character per cell */
    ck_assert_uint_eq(ga_occupancy_map(a, buf, sizeof buf, 40), 82);
    ga_arena_destroy(a);
}
END_TEST

/* ga_arena_fits says whether ga_alloc would be served from the regions held now, and changes
 * nothing: the lazy free fence (shim/fence.c) decides by it whether to synchronise. */
START_TEST(test_fits_held_memory_only)
{
    fake_backend_t f;
    fake_init(&f);
    ga_backend_t b = fake_backend(&f);
    ga_config_t cfg = {.initial = 4 * MIB, .grow = 1};
    ga_arena_t *a = ga_arena_create(&b, &cfg, NULL);
    ck_assert_ptr_nonnull(a);
    uintptr_t p, q;
    ck_assert_int_eq(ga_alloc(a, 3 * MIB, &p), GA_OK);
    ga_stats_t before = stats_of(a);
    unsigned reserves = f.reserves;
    uintptr_t at = 0;
    ck_assert_int_eq(ga_arena_fits(a, MIB, &at), 1);  /* the free 1 MiB at the end */
    ck_assert_uint_eq(at, p + 3 * MIB);
    ck_assert_int_eq(ga_arena_fits(a, MIB + 1, NULL), 0); /* would need a new region */
    ck_assert_int_eq(ga_arena_fits(a, 0, NULL), 0);
    ck_assert_int_eq(ga_arena_fits(a, SIZE_MAX, NULL), 0);
    ck_assert_int_eq(ga_arena_fits(NULL, MIB, NULL), 0);
    ga_stats_t after = stats_of(a);
    ck_assert_uint_eq(f.reserves, reserves);          /* nothing reserved, nothing changed */
    ck_assert_uint_eq(after.live, before.live);
    ck_assert_uint_eq(after.total_free, before.total_free);
    ck_assert_uint_eq(after.failed_allocs, before.failed_allocs);
    ck_assert_int_eq(ga_free(a, p), GA_OK);
    ck_assert_int_eq(ga_arena_fits(a, 4 * MIB, NULL), 1); /* coalesced whole again */
    ck_assert_int_eq(ga_alloc(a, 4 * MIB, &q), GA_OK);
    ck_assert_uint_eq(q, p);
    ga_arena_destroy(a);
    ck_assert_uint_eq(f.outstanding, 0);
}
END_TEST

Suite *arena_suite(void)
{
    Suite *s = suite_create("arena");
    TCase *bad = tcase_create("bad_input");
    tcase_add_test(bad, test_create_bad_args);
    tcase_add_test(bad, test_null_arguments);
    tcase_add_test(bad, test_bad_sizes);
    tcase_add_test(bad, test_bad_free);
    tcase_add_test(bad, test_status_strings);
    tcase_add_test(bad, test_bad_backend_ranges);
    suite_add_tcase(s, bad);
    TCase *place = tcase_create("placement");
    tcase_add_test(place, test_rounding_alignment);
    tcase_add_test(place, test_best_fit_small);
    tcase_add_test(place, test_best_fit_large_bins);
    tcase_add_test(place, test_best_fit_ties_lowest_address);
    tcase_add_test(place, test_best_fit_skips_emptied_levels);
    tcase_add_test(place, test_split);
    tcase_add_test(place, test_coalesce_none);
    tcase_add_test(place, test_coalesce_left);
    tcase_add_test(place, test_coalesce_right);
    tcase_add_test(place, test_coalesce_both);
    tcase_add_test(place, test_coalesce_whole_region);
    tcase_add_test(place, test_fits_held_memory_only);
    suite_add_tcase(s, place);
    TCase *reg = tcase_create("regions");
    arena_regions_add(reg); /* test_arena_regions.c */
    suite_add_tcase(s, reg);
    TCase *look = tcase_create("lookup_stats");
    tcase_add_test(look, test_lookup_interior);
    tcase_add_test(look, test_lookup_many_chunks);
    tcase_add_test(look, test_every_stat);
    tcase_add_test(look, test_occupancy_map);
    suite_add_tcase(s, look);
    return s;
}
