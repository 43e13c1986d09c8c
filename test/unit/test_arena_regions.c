/* Unit tests of the arena's regions through its public API (ga_arena.h), split from
 * test_arena.c: geometric growth and its bounds, preallocation, no growth, retrying smaller, the
 * limit, releasing empty regions before an out-of-memory answer, trim, destroy. Added to the
 * arena suite's "regions" case by arena_regions_add().
 */
#include <stdint.h>

#include "testutil.h"

/* Regions ------------------------------------------------------------------------------------- */

START_TEST(test_growth_geometric)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 0);
    must_alloc(a, 1 * MIB);            /* first region: min_region 2 MiB */
    must_alloc(a, 1536 * KIB);         /* 1 MiB left: a new region, double the last */
    must_alloc(a, 4 * MIB);            /* 2.5 MiB left: 8 MiB */
    must_alloc(a, 20 * MIB);           /* 4 MiB left: the request beats doubling */
    must_alloc(a, 1 * MIB);            /* fits in what is left: no reserve */
    const size_t want[] = {2 * MIB, 4 * MIB, 8 * MIB, 20 * MIB};
    ck_assert_uint_eq(f.nasked, 4);
    for (unsigned i = 0; i < 4; i++) {
        ck_assert_uint_eq(f.asked[i], want[i]);
        ck_assert_int_eq(f.granted[i], 1);
    }
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.backend_reserves, 4);
    ck_assert_uint_eq(s.regions, 4);
    ck_assert_uint_eq(s.reserved, 34 * MIB);
    ck_assert_uint_eq(s.peak_reserved, 34 * MIB);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
    ck_assert_uint_eq(f.outstanding, 0);
}
END_TEST

START_TEST(test_growth_min_region)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 1 * MIB + 1); /* rounded up to a granule */
    must_alloc(a, 100);
    must_alloc(a, 1 * MIB + 1); /* 1 MiB left: no fit */
    ck_assert_uint_eq(f.nasked, 2);
    ck_assert_uint_eq(f.asked[0], 1 * MIB + 512);
    ck_assert_uint_eq(f.asked[1], 2 * MIB + 1024);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_growth_max_region)
{
    fake_backend_t f;
    fake_init(&f);
    ga_backend_t b = fake_backend(&f);
    ga_config_t cfg = {.grow = 1, .min_region = 2 * MIB, .max_region = 4 * MIB + 1};
    ga_status_t st = GA_EINVAL;
    ga_arena_t *a = ga_arena_create(&b, &cfg, &st);
    ck_assert_msg(a && st == GA_OK, "arena creation failed: %s", ga_status_str(st));
    uintptr_t p[4];
    p[0] = must_alloc(a, 2 * MIB);  /* 2 MiB */
    p[1] = must_alloc(a, 2 * MIB);  /* doubling: 4 MiB */
    p[2] = must_alloc(a, 3 * MIB);  /* 8 MiB would be next: max_region, rounded up to 512 */
    p[3] = must_alloc(a, 10 * MIB); /* larger than max_region: a region of its own size */
    const size_t want[] = {2 * MIB, 4 * MIB, 4 * MIB + 512, 10 * MIB};
    ck_assert_uint_eq(f.nasked, 4);
    for (unsigned i = 0; i < 4; i++)
        ck_assert_uint_eq(f.asked[i], want[i]);
    /* Regions given back and taken again grow no further than max_region. */
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(ga_free(a, p[i]), GA_OK);
        ga_trim(a);
        ck_assert_uint_eq(stats_of(a).reserved, 0);
        p[0] = must_alloc(a, 3 * MIB);
        p[1] = must_alloc(a, 3 * MIB);
        p[2] = must_alloc(a, 3 * MIB);
        p[3] = must_alloc(a, 512);
    }
    for (unsigned i = 0; i < f.nasked; i++)
        ck_assert_uint_le(f.asked[i], 10 * MIB);
    for (unsigned i = 4; i < f.nasked; i++)
        ck_assert_uint_le(f.asked[i], 4 * MIB + 512);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
    ck_assert_uint_eq(f.outstanding, 0);
    /* A largest region below the smallest is refused. */
    cfg = (ga_config_t){.grow = 1, .min_region = 4 * MIB, .max_region = 2 * MIB};
    ck_assert_ptr_null(ga_arena_create(&b, &cfg, &st));
    ck_assert_int_eq(st, GA_EINVAL);
}
END_TEST

START_TEST(test_growth_after_prealloc)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 3 * MIB, 1, 0, 0);
    ck_assert_uint_eq(f.nasked, 1);
    ck_assert_uint_eq(f.asked[0], 3 * MIB);
    must_alloc(a, 3 * MIB);
    must_alloc(a, 512);
    ck_assert_uint_eq(f.asked[1], 6 * MIB);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_no_growth)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 1 * MIB, 0, 0, 0);
    must_alloc(a, 768 * KIB);
    uintptr_t p;
    ASSERT_STATUS(ga_alloc(a, 512 * KIB, &p), GA_ENOMEM);
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.failed_allocs, 1);
    ck_assert_uint_eq(s.frag_failures, 0);
    ck_assert_uint_eq(f.nasked, 1); /* no growth attempted */
    ck_assert_uint_eq(f.releases, 0);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_retry_smaller)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 0);
    f.fail_above = 3 * MIB;
    must_alloc(a, 1 * MIB);                  /* 2 MiB granted */
    must_alloc(a, 2560 * KIB);               /* 4 MiB refused, halving gives 2 < 2.5: 2.5 MiB */
    ck_assert_uint_eq(f.nasked, 3);
    ck_assert_uint_eq(f.asked[1], 4 * MIB);
    ck_assert_int_eq(f.granted[1], 0);
    ck_assert_uint_eq(f.asked[2], 2560 * KIB);
    ck_assert_int_eq(f.granted[2], 1);
    f.fail_above = 0;
    f.fail_calls = 1;
    must_alloc(a, 1 * MIB + 512);            /* 5 MiB refused once, then 2.5 MiB granted */
    ck_assert_uint_eq(f.asked[3], 5 * MIB);
    ck_assert_uint_eq(f.asked[4], 2560 * KIB);
    ck_assert_int_eq(f.granted[4], 1);
    f.fail_above = 512 * KIB;
    uintptr_t p;
    unsigned before = f.nasked;
    ASSERT_STATUS(ga_alloc(a, 3 * MIB, &p), GA_ENOMEM);
    /* 5, 3 (halving 5 MiB gives 2.5 < 3, so the request itself), then nothing to release */
    ck_assert_uint_eq(f.nasked - before, 2);
    ck_assert_uint_eq(f.asked[before + 1], 3 * MIB);
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.failed_allocs, 1);
    ck_assert_uint_eq(s.frag_failures, 0); /* only 2.5 MiB - 512 free */
    ck_assert_uint_eq(s.backend_reserves, 3);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

/* A limit under the 512-byte alignment is a limit no region fits under, not "no limit" (rounding
 * it down to 0 once let a grow arena take what it liked). */
START_TEST(test_limit_under_alignment)
{
    for (size_t limit = 1; limit < 512; limit += 73) {
        fake_backend_t f;
        ga_arena_t *a = fake_arena(&f, 0, 1, limit, 0);
        uintptr_t p;
        ASSERT_STATUS(ga_alloc(a, 1, &p), GA_ENOMEM);
        ASSERT_STATUS(ga_alloc(a, 512, &p), GA_ENOMEM);
        ck_assert_uint_eq(f.nasked, 0); /* the backend is never asked */
        ck_assert_uint_eq(stats_of(a).reserved, 0);
        ga_arena_destroy(a);
    }
    fake_backend_t f;
    fake_init(&f);
    ga_backend_t b = fake_backend(&f);
    ga_status_t st = GA_OK;
    ga_config_t fixed = {.initial = 512, .limit = 100};
    ck_assert_ptr_null(ga_arena_create(&b, &fixed, &st)); /* the region is over the limit */
    ASSERT_STATUS(st, GA_ENOMEM);
}
END_TEST

START_TEST(test_limit)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 5 * MIB + 100, 0); /* limit rounds down to 5 MiB */
    uintptr_t x = must_alloc(a, 1 * MIB);  /* 2 MiB region */
    must_alloc(a, 2 * MIB);                /* doubling wants 4 MiB, the limit leaves 3 MiB */
    ck_assert_uint_eq(f.asked[1], 3 * MIB);
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.reserved, 5 * MIB);
    unsigned asked = f.nasked;
    uintptr_t p;
    ASSERT_STATUS(ga_alloc(a, 3 * MIB, &p), GA_ENOMEM); /* 2 MiB free in total: not frag */
    ASSERT_STATUS(ga_alloc(a, 1536 * KIB, &p), GA_ENOMEM); /* 2 MiB free, 1 MiB pieces: frag */
    ASSERT_STATUS(ga_alloc(a, 64 * MIB, &p), GA_ENOMEM);
    ck_assert_uint_eq(f.nasked, asked); /* the limit stops before the backend is asked */
    s = stats_of(a);
    ck_assert_uint_eq(s.failed_allocs, 3);
    ck_assert_uint_eq(s.frag_failures, 1);
    ck_assert_uint_eq(s.total_free, 2 * MIB);
    ck_assert_uint_eq(s.largest_free, 1 * MIB);
    ck_assert_double_eq_tol(ga_fragmentation(&s), 0.5, 1e-12);
    must_alloc(a, 1 * MIB);
    ASSERT_STATUS(ga_free(a, x), GA_OK);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_release_before_oom)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 0);
    f.capacity = 8 * MIB;
    must_alloc(a, 1536 * KIB);             /* region 1: 2 MiB */
    uintptr_t big = must_alloc(a, 3 * MIB); /* region 2: 4 MiB */
    ck_assert_int_eq(ga_free(a, big), GA_OK); /* region 2 now empty but kept */
    ck_assert_uint_eq(stats_of(a).regions, 2);
    must_alloc(a, 5 * MIB);
    /* 8 and 5 refused (6 MiB out), region 2 released, 8 refused, 5 granted */
    ck_assert_uint_eq(f.releases, 1);
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.backend_releases, 1);
    ck_assert_uint_eq(s.regions, 2);
    ck_assert_uint_eq(s.reserved, 7 * MIB);
    ck_assert_uint_eq(s.peak_reserved, 7 * MIB);
    ck_assert_uint_eq(s.failed_allocs, 0);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_release_before_oom_then_fail)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 0);
    must_alloc(a, 1 * MIB);
    uintptr_t big = must_alloc(a, 3 * MIB);
    ck_assert_int_eq(ga_free(a, big), GA_OK);
    f.fail_above = 1;
    uintptr_t p;
    ASSERT_STATUS(ga_alloc(a, 6 * MIB, &p), GA_ENOMEM);
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.regions, 1); /* the empty region went back even though it did not help */
    ck_assert_uint_eq(s.failed_allocs, 1);
    ck_assert_uint_eq(s.frag_failures, 0);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_trim)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 0, 1, 0, 0);
    uintptr_t r1 = must_alloc(a, 2 * MIB);
    uintptr_t r2 = must_alloc(a, 4 * MIB);
    uintptr_t r3 = must_alloc(a, 8 * MIB);
    uintptr_t keep = must_alloc(a, 2 * MIB); /* region 4 (16 MiB) */
    ck_assert_int_eq(ga_free(a, r1), GA_OK);
    ck_assert_int_eq(ga_free(a, r3), GA_OK);
    ck_assert_uint_eq(ga_trim(a), 10 * MIB);
    ASSERT_HEALTHY(a);
    ga_stats_t s = stats_of(a);
    ck_assert_uint_eq(s.regions, 2);
    ck_assert_uint_eq(s.reserved, 20 * MIB);
    ck_assert_uint_eq(s.peak_reserved, 30 * MIB);
    ck_assert_uint_eq(s.backend_releases, 2);
    ck_assert_uint_eq(f.releases, 2);
    ck_assert_int_eq(ga_owns(a, r1), 0);
    ck_assert_int_eq(ga_owns(a, r3 + 5), 0);
    ck_assert_int_eq(ga_owns(a, r2 + 5), 1);
    ASSERT_STATUS(ga_free(a, r1), GA_ENOTOWNED);
    ck_assert_uint_eq(ga_trim(a), 0);
    ck_assert_int_eq(ga_free(a, r2), GA_OK);
    ck_assert_int_eq(ga_free(a, keep), GA_OK);
    ck_assert_uint_eq(ga_trim(a), 20 * MIB);
    ck_assert_uint_eq(f.outstanding, 0);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_trim_preallocated)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 1 * MIB, 0, 0, 0);
    uintptr_t p = must_alloc(a, 1000);
    ck_assert_uint_eq(ga_trim(a), 0);
    ck_assert_int_eq(ga_free(a, p), GA_OK);
    ck_assert_uint_eq(ga_trim(a), 1 * MIB);
    ck_assert_uint_eq(stats_of(a).reserved, 0);
    must_alloc(a, 1000); /* without growth, the preallocated region is taken again */
    ck_assert_uint_eq(f.asked[1], 1 * MIB);
    uintptr_t q;
    ASSERT_STATUS(ga_alloc(a, 2 * MIB, &q), GA_ENOMEM);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_destroy_releases_everything)
{
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 1 * MIB, 1, 0, 0);
    for (int i = 0; i < 10; i++)
        must_alloc(a, (size_t)(i + 1) * 300 * KIB);
    ck_assert_uint_gt(f.reserves, 1);
    ga_arena_destroy(a);
    ck_assert_uint_eq(f.outstanding, 0);
    ck_assert_uint_eq(f.releases, f.reserves);
}
END_TEST

void arena_regions_add(TCase *reg)
{
    tcase_add_test(reg, test_growth_geometric);
    tcase_add_test(reg, test_growth_min_region);
    tcase_add_test(reg, test_growth_max_region);
    tcase_add_test(reg, test_growth_after_prealloc);
    tcase_add_test(reg, test_no_growth);
    tcase_add_test(reg, test_retry_smaller);
    tcase_add_test(reg, test_limit);
    tcase_add_test(reg, test_limit_under_alignment);
    tcase_add_test(reg, test_release_before_oom);
    tcase_add_test(reg, test_release_before_oom_then_fail);
    tcase_add_test(reg, test_trim);
    tcase_add_test(reg, test_trim_preallocated);
    tcase_add_test(reg, test_destroy_releases_everything);
}
