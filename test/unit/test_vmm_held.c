/* The vmm pool's general-area parked blocks kept past an allocation they do not serve
 * (vmm_alloc.c, gen_fit_stands's 2; vmm_held.h): a training step freed in reverse leaves its
 * small buffers' room between nothing before it and its larger buffers parked after it, so that
 * with those freed the area would be one free chunk starting where the small ones go. Asserted
 * from the outside against a reference: a pool with no keep (nothing parked, every free done at
 * once, so every block placed where a best fit with every freed block given back places it) on
 * a second fake backend handing out the same addresses. The general area's sizes only (under
 * half a granule, sizes seen alone, 3 granules and more with no multiple: no granule multiple,
 * no two blocks of a class size live at once), so that the aligned area's take-backs, which
 * the keep decides, do not enter. Each round frees every block in reverse (some rounds a block
 * allocated first, before them, too; some rounds a hole before them between two live blocks,
 * larger than the small ones' room), then allocates the small ones in order and the larger
 * ones in a seeded order (out of address order, each must be placed as the reference places it,
 * not taken back where it lies); after every allocation the address and the live figures agree,
 * and after the first round the kept pool maps nothing more (but with the hole, which the kept
 * pool's first round with it free maps once more, as before this test's change). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "vmm_fake.h"

static void same_live(ga_pool_t *a, ga_pool_t *b, size_t step)
{
    ga_stats_t sa, sb;
    ga_pool_stats(a, &sa);
    ga_pool_stats(b, &sb);
    REQUIRE(sa.in_use == sb.in_use && sa.in_use_requested == sb.in_use_requested &&
                sa.live == sb.live && sa.allocs == sb.allocs && sa.frees == sb.frees,
            "step %zu: in_use %" PRIu64 "/%" PRIu64 ", requested %" PRIu64 "/%" PRIu64
            ", live %" PRIu64 "/%" PRIu64 ", allocs %" PRIu64 "/%" PRIu64 " (kept/reference)",
            step, sa.in_use, sb.in_use, sa.in_use_requested, sb.in_use_requested, sa.live,
            sb.live, sa.allocs, sb.allocs);
}

static void step_rounds(uint64_t seed, int shuffle, int pin, int hole)
{
    static const size_t small[] = {4 * KIB, 64 * KIB, 300000, MIB - 512};
    static const size_t large[] = {MIB, MIB + 512, 3 * MIB / 2, 3 * MIB + 4 * KIB,
                                   6 * MIB + 4 * KIB};
    enum { NS = 4, NL = 5, N = NS + NL };
    size_t sizes[N];
    for (int i = 0; i < NS; i++)
        sizes[i] = small[i];
    for (int i = 0; i < NL; i++)
        sizes[NS + i] = large[i];
    vfake_t fa, fb;
    ga_pool_t *a = vmm_pool(&fa, 0, 64 * MIB), *b = vmm_pool(&fb, 0, 0);
    uintptr_t xa[N + 4] = {0}, xb[N + 4] = {0};
    size_t step = 0;
    /* A hole larger than the small ones' room between two live blocks, before the step's, freed
     * in some rounds: the free chunks are then two, and the hole the small ones' best fit with
     * the parked blocks given back. */
    static const size_t around[] = {40 * KIB, 2 * MIB + 4 * KIB, 40 * KIB};
    for (int i = 0; hole && i < 3; i++) {
        ck_assert_int_eq(ga_pool_alloc(a, around[i], &xa[N + 1 + i]), GA_OK);
        ck_assert_int_eq(ga_pool_alloc(b, around[i], &xb[N + 1 + i]), GA_OK);
        ck_assert(xa[N + 1 + i] == xb[N + 1 + i]);
    }
    if (pin) { /* a block before the step's, freed in some rounds */
        ck_assert_int_eq(ga_pool_alloc(a, 40 * KIB, &xa[N]), GA_OK);
        ck_assert_int_eq(ga_pool_alloc(b, 40 * KIB, &xb[N]), GA_OK);
        ck_assert(xa[N] == xb[N]);
    }
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(ga_pool_alloc(a, sizes[i], &xa[i]), GA_OK);
        ck_assert_int_eq(ga_pool_alloc(b, sizes[i], &xb[i]), GA_OK);
        ck_assert(xa[i] == xb[i]);
    }
    uint64_t x = seed;
    unsigned maps_after_first = 0;
    for (int r = 0; r < 60; r++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int unpin = pin && (x >> 40) % 3 == 0, unhole = hole && (x >> 44) % 3 == 1;
        if (unhole) {
            ck_assert_int_eq(ga_pool_free(a, xa[N + 2], NULL), GA_OK);
            ck_assert_int_eq(ga_pool_free(b, xb[N + 2], NULL), GA_OK);
        }
        for (int i = N - 1; i >= 0; i--) {
            ck_assert_int_eq(ga_pool_free(a, xa[i], NULL), GA_OK);
            ck_assert_int_eq(ga_pool_free(b, xb[i], NULL), GA_OK);
        }
        if (unpin) {
            ck_assert_int_eq(ga_pool_free(a, xa[N], NULL), GA_OK);
            ck_assert_int_eq(ga_pool_free(b, xb[N], NULL), GA_OK);
        }
        int order[N];
        for (int i = 0; i < N; i++)
            order[i] = i;
        for (int i = N - 1; shuffle && i > NS; i--) { /* the larger ones, after the small ones */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int j = NS + (int)(x % (uint64_t)(i - NS + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (int k = 0; k < N; k++, step++) {
            int i = order[k];
            ga_status_t sa = ga_pool_alloc(a, sizes[i], &xa[i]);
            ga_status_t sb = ga_pool_alloc(b, sizes[i], &xb[i]);
            ck_assert_int_eq(sa, GA_OK);
            ck_assert_int_eq(sb, GA_OK);
            REQUIRE(xa[i] == xb[i], "seed %" PRIu64 " round %d: %zu B at %#" PRIxPTR
                    " kept, %#" PRIxPTR " in the reference", seed, r, sizes[i], xa[i], xb[i]);
            same_live(a, b, step);
        }
        if (unpin) {
            ck_assert_int_eq(ga_pool_alloc(a, 40 * KIB, &xa[N]), GA_OK);
            ck_assert_int_eq(ga_pool_alloc(b, 40 * KIB, &xb[N]), GA_OK);
            ck_assert(xa[N] == xb[N]);
        }
        if (unhole) {
            ck_assert_int_eq(ga_pool_alloc(a, around[1], &xa[N + 2]), GA_OK);
            ck_assert_int_eq(ga_pool_alloc(b, around[1], &xb[N + 2]), GA_OK);
            ck_assert(xa[N + 2] == xb[N + 2]);
        }
        POOL_HEALTHY(a);
        if (r == 0)
            maps_after_first = fa.maps;
    }
    if (!hole) /* within the keep: nothing mapped again */
        ck_assert_uint_eq(fa.maps, maps_after_first);
    ck_assert_uint_eq(fa.unmaps, 0);
    ga_pool_destroy(a);
    ga_pool_destroy(b);
}

START_TEST(vmm_held_step_in_order)
{
    for (int v = 0; v < 4; v++)
        step_rounds(0x9E3779B97F4A7C15ull, 0, v & 1, v >> 1);
}
END_TEST

START_TEST(vmm_held_step_seeded_orders)
{
    for (uint64_t s = 1; s <= 12; s++) {
        for (int v = 0; v < 4; v++)
            step_rounds(s * 0x2545F4914F6CDD1Dull, 1, v & 1, v >> 1);
    }
}
END_TEST

Suite *vmm_held_suite(void)
{
    Suite *s = suite_create("vmm_held");
    TCase *tc = tcase_create("against_no_keep");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, vmm_held_step_in_order);
    tcase_add_test(tc, vmm_held_step_seeded_orders);
    suite_add_tcase(s, tc);
    return s;
}
