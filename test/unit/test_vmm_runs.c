/* The vmm pool over a backend that maps runs of granules (map_run/unmap_run, ga_pool.h: what
 * gpuarena-replay gives it) against the same pool over a backend that maps granule by granule
 * (the driver's way): the same workload must give the same answers, addresses, figures and
 * backend counts on both, while the run backend is called once a run. Only counts are kept, no
 * memory: a refused run must leave nothing mapped, and a backend with half the pair is refused.
 */
#include <stdlib.h>

#include "ga_pool.h"
#include "testutil.h"

#define GRAN (2 * MIB)

/* One fake for both kinds of backend: address ranges from a bump pointer, granules counted. */
typedef struct rfake {
    uint64_t next;
    uint64_t maps, unmaps, calls; /* granules mapped, unmapped; map or map_run calls */
    uint64_t mapped, peak_mapped;
    size_t refuse_over; /* > 0: a map of more than this many granules at once is refused */
    int refuse_in;      /* > 0: the map call that many calls from now is refused */
} rfake_t;

static int rf_va_reserve(void *ctx, size_t size, uintptr_t *base)
{
    rfake_t *f = ctx;
    *base = (uintptr_t)f->next;
    f->next += (size + GRAN - 1) / GRAN * GRAN + GRAN;
    return 0;
}

static void rf_va_release(void *ctx, uintptr_t base, size_t size)
{
    (void)ctx, (void)base, (void)size;
}

static int rf_map_run(void *ctx, uintptr_t addr, size_t size, size_t n)
{
    rfake_t *f = ctx;
    REQUIRE(addr % GRAN == 0 && size == GRAN && n > 0, "map_run of %zu x %zu bytes", n, size);
    f->calls++;
    if ((f->refuse_in > 0 && --f->refuse_in == 0) || (f->refuse_over && n > f->refuse_over))
        return -1;
    f->maps += n;
    f->mapped += n;
    f->peak_mapped = f->mapped > f->peak_mapped ? f->mapped : f->peak_mapped;
    return 0;
}

static void rf_unmap_run(void *ctx, uintptr_t addr, size_t size, size_t n)
{
    rfake_t *f = ctx;
    REQUIRE(addr % GRAN == 0 && size == GRAN && n > 0 && n <= f->mapped, "unmap_run of %zu", n);
    f->unmaps += n;
    f->mapped -= n;
}

static int rf_map(void *ctx, uintptr_t addr, size_t size, uint64_t *handle)
{
    *handle = (uint64_t)addr | 1;
    return rf_map_run(ctx, addr, size, 1);
}

static void rf_unmap(void *ctx, uintptr_t addr, size_t size, uint64_t handle)
{
    REQUIRE(handle == ((uint64_t)addr | 1), "unmap with a handle not from map");
    rf_unmap_run(ctx, addr, size, 1);
}

/* A vmm pool over f: granule by granule (runs == 0) or by runs. */
static ga_pool_t *rf_pool(rfake_t *f, int runs, size_t limit, size_t keep)
{
    memset(f, 0, sizeof *f);
    f->next = (uint64_t)1 << 40;
    ga_pool_backend_t be = {.va_reserve = rf_va_reserve, .va_release = rf_va_release,
                            .granularity = GRAN, .ctx = f};
    if (runs)
        be.map_run = rf_map_run, be.unmap_run = rf_unmap_run;
    else
        be.map = rf_map, be.unmap = rf_unmap;
    ga_pool_config_t cfg = {.mode = GA_MODE_VMM, .limit = limit, .va_size = 4096 * MIB,
                            .keep = keep};
    ga_status_t st = GA_EINVAL;
    ga_pool_t *p = ga_pool_create(&be, &cfg, &st);
    ck_assert_msg(p && st == GA_OK, "vmm pool: %s", ga_status_str(st));
    return p;
}

#define HEALTHY(p)                                                             \
    do {                                                                       \
        char rep_[1024];                                                       \
        int n_ = ga_pool_check((p), rep_, sizeof rep_);                        \
        REQUIRE(n_ == 0, "ga_pool_check found %d failures:\n%s", n_, rep_);    \
    } while (0)

/* Both pools' figures and their backends' counts agree, and each backend holds what its pool
 * says is mapped. */
static void same_state(ga_pool_t *a, const rfake_t *fa, ga_pool_t *b, const rfake_t *fb, int step)
{
    ga_stats_t x, y;
    ga_pool_stats(a, &x);
    ga_pool_stats(b, &y);
    REQUIRE(x.reserved == y.reserved && x.kept == y.kept && x.peak_reserved == y.peak_reserved &&
            x.peak_kept == y.peak_kept && x.in_use == y.in_use,
            "step %d: granule by granule reserved %lu kept %lu peak %lu, by runs %lu %lu %lu",
            step, (unsigned long)x.reserved, (unsigned long)x.kept,
            (unsigned long)x.peak_reserved, (unsigned long)y.reserved, (unsigned long)y.kept,
            (unsigned long)y.peak_reserved);
    REQUIRE(fa->maps == fb->maps && fa->unmaps == fb->unmaps,
            "step %d: maps/unmaps %lu/%lu granule by granule, %lu/%lu by runs", step,
            (unsigned long)fa->maps, (unsigned long)fa->unmaps, (unsigned long)fb->maps,
            (unsigned long)fb->unmaps);
    REQUIRE_EQ(fb->mapped * GRAN, y.reserved);
    REQUIRE_EQ(fb->peak_mapped * GRAN, y.peak_reserved);
}

/* A seeded workload of small, odd, class and long blocks (up to 300 granules, over several bitmap
 * words), under a limit that refuses some and a cache that keeps some: every allocation has the
 * same outcome and address on both pools, and the figures agree after every step. */
static void paired_workload(size_t limit, size_t keep, uint64_t seed)
{
    rfake_t fa, fb;
    ga_pool_t *a = rf_pool(&fa, 0, limit, keep), *b = rf_pool(&fb, 1, limit, keep);
    enum { N = 4000, SLOTS = 64 };
    uintptr_t live[SLOTS] = {0};
    uint64_t x = seed;
    unsigned refused = 0;
    for (int step = 0; step < N; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int i = (int)(x % SLOTS);
        if (live[i]) {
            REQUIRE(ga_pool_free(a, live[i], NULL) == GA_OK, "free at step %d", step);
            REQUIRE(ga_pool_free(b, live[i], NULL) == GA_OK, "free at step %d", step);
            live[i] = 0;
        } else {
            static const size_t kinds[] = {700, 300 * KIB, MIB + 512, 5 * MIB + 512, 4 * MIB,
                                           37 * GRAN, 70 * GRAN + 4 * KIB, 0};
            size_t s = kinds[(x >> 20) % 8];
            if (!s) /* a long block: up to 300 granules, odd or whole */
                s = (1 + (x >> 24) % 300) * GRAN + ((x >> 40) % 2) * 1536;
            uintptr_t pa = 0, pb = 0;
            ga_status_t sa = ga_pool_alloc(a, s, &pa), sb = ga_pool_alloc(b, s, &pb);
            REQUIRE(sa == sb && pa == pb, "step %d, %zu bytes: %s at %#lx granule by granule, "
                    "%s at %#lx by runs", step, s, ga_status_str(sa), (unsigned long)pa,
                    ga_status_str(sb), (unsigned long)pb);
            live[i] = sa == GA_OK ? pa : 0;
            refused += sa != GA_OK;
        }
        same_state(a, &fa, b, &fb, step);
        if (step % 64 == 0) {
            HEALTHY(a);
            HEALTHY(b);
        }
    }
    HEALTHY(b);
    if (limit)
        ck_assert_msg(refused > 0, "the limit refused nothing: the workload misses refusals");
    ck_assert_uint_eq(ga_pool_trim(a), ga_pool_trim(b));
    same_state(a, &fa, b, &fb, N);
    ck_assert_msg(fb.calls < fa.calls, "runs: %lu calls, granule by granule %lu",
                  (unsigned long)fb.calls, (unsigned long)fa.calls);
    ga_pool_destroy(a);
    ga_pool_destroy(b);
    ck_assert_uint_eq(fa.mapped, 0);
    ck_assert_uint_eq(fb.mapped, 0);
}

START_TEST(vmm_runs_same_as_granules)
{
    paired_workload(0, 0, 0x9E3779B97F4A7C15ull);
    paired_workload(0, 16 * GRAN, 0x2545F4914F6CDD1Dull);
    paired_workload(600 * GRAN, 8 * GRAN, 0xD1B54A32D192ED03ull);
    paired_workload(400 * GRAN + 3 * KIB, 64 * GRAN, 0x8CB92BA72F3D8DD7ull);
}
END_TEST

/* A block of 1,000 granules maps in one call and is given back in one (the cache keeps none);
 * with a cache of 32 granules, those are kept and the rest unmapped in one call, and the same
 * block again reuses them and maps the rest in one call. */
START_TEST(vmm_runs_one_call_a_run)
{
    rfake_t f;
    ga_pool_t *p = rf_pool(&f, 1, 0, 0);
    uintptr_t a = 0;
    ck_assert_int_eq(ga_pool_alloc(p, 1000 * GRAN, &a), GA_OK);
    ck_assert_uint_eq(f.calls, 1);
    ck_assert_uint_eq(f.maps, 1000);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ck_assert_uint_eq(f.unmaps, 1000);
    ck_assert_uint_eq(f.mapped, 0);
    HEALTHY(p);
    ga_pool_destroy(p);

    p = rf_pool(&f, 1, 0, 32 * GRAN);
    ck_assert_int_eq(ga_pool_alloc(p, 1000 * GRAN, &a), GA_OK);
    ck_assert_int_eq(ga_pool_free(p, a, NULL), GA_OK);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 32 * GRAN);
    ck_assert_uint_eq(f.mapped, 32);
    ck_assert_uint_eq(f.unmaps, 968);
    uintptr_t b = 0;
    ck_assert_int_eq(ga_pool_alloc(p, 1000 * GRAN, &b), GA_OK);
    ck_assert_uint_eq(b, a);
    ck_assert_uint_eq(f.calls, 2);
    ck_assert_uint_eq(f.maps, 1968);
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.kept, 0);
    ck_assert_uint_eq(s.reserved, 1000 * GRAN);
    ck_assert_uint_eq(s.peak_reserved, 1000 * GRAN);
    HEALTHY(p);
    ga_pool_destroy(p);
    ck_assert_uint_eq(f.mapped, 0);
}
END_TEST

/* A refused run leaves nothing of the block mapped: neither the run itself (all or nothing) nor
 * the kept granules the block had taken back before it; the pool is as with the granule-by-
 * granule backend refusing the same block, and serves it once the backend does. */
START_TEST(vmm_runs_refused_leaves_nothing)
{
    rfake_t fa, fb;
    ga_pool_t *a = rf_pool(&fa, 0, 0, 64 * GRAN), *b = rf_pool(&fb, 1, 0, 64 * GRAN);
    uintptr_t x = 0, y = 0, z = 0;
    ck_assert_int_eq(ga_pool_alloc(b, 8 * GRAN, &x), GA_OK);
    ck_assert_int_eq(ga_pool_alloc(b, 8 * GRAN, &y), GA_OK);
    ck_assert_int_eq(ga_pool_free(b, x, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(b, y, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_alloc(a, 8 * GRAN, &x), GA_OK);
    ck_assert_int_eq(ga_pool_alloc(a, 8 * GRAN, &y), GA_OK);
    ck_assert_int_eq(ga_pool_free(a, x, NULL), GA_OK);
    ck_assert_int_eq(ga_pool_free(a, y, NULL), GA_OK);
    ck_assert_uint_eq(fb.mapped, 16); /* both kept */
    /* 20 granules over the 16 kept ones: 4 to map, refused */
    fb.refuse_over = 3;
    fa.refuse_in = 1;
    ck_assert_int_eq(ga_pool_alloc(b, 20 * GRAN, &z), GA_ENOMEM);
    ck_assert_int_eq(ga_pool_alloc(a, 20 * GRAN, &z), GA_ENOMEM);
    same_state(a, &fa, b, &fb, 0);
    ck_assert_uint_eq(fb.mapped, 0);
    ga_stats_t s;
    ga_pool_stats(b, &s);
    ck_assert_uint_eq(s.reserved, 0);
    ck_assert_uint_eq(s.kept, 0);
    ck_assert_uint_eq(s.in_use, 0);
    HEALTHY(a);
    HEALTHY(b);
    fb.refuse_over = 0;
    ck_assert_int_eq(ga_pool_alloc(b, 20 * GRAN, &z), GA_OK);
    ck_assert_uint_eq(fb.mapped, 20);
    HEALTHY(b);
    ga_pool_destroy(a);
    ga_pool_destroy(b);
    ck_assert_uint_eq(fb.mapped, 0);
}
END_TEST

/* map_run without unmap_run, or the reverse, is no backend: refused at create. */
START_TEST(vmm_runs_half_a_pair_refused)
{
    rfake_t f = {0};
    for (int half = 0; half < 2; half++) {
        ga_pool_backend_t be = {.va_reserve = rf_va_reserve, .va_release = rf_va_release,
                                .map = rf_map, .unmap = rf_unmap, .granularity = GRAN, .ctx = &f};
        if (half)
            be.unmap_run = rf_unmap_run;
        else
            be.map_run = rf_map_run;
        ga_pool_config_t cfg = {.mode = GA_MODE_VMM, .va_size = 1024 * MIB};
        ga_status_t st = GA_OK;
        ck_assert_ptr_null(ga_pool_create(&be, &cfg, &st));
        ck_assert_int_eq(st, GA_EINVAL);
    }
}
END_TEST

Suite *vmm_runs_suite(void)
{
    Suite *s = suite_create("vmm_runs");
    TCase *tc = tcase_create("vmm_runs");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, vmm_runs_same_as_granules);
    tcase_add_test(tc, vmm_runs_one_call_a_run);
    tcase_add_test(tc, vmm_runs_refused_leaves_nothing);
    tcase_add_test(tc, vmm_runs_half_a_pair_refused);
    suite_add_tcase(s, tc);
    return s;
}
