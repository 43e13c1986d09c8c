/* The vmm pool's pending free (pool_vmm.c, pend_hold; vmm_alloc.c, alloc_pend): a general-area
 * block's arena free put off to the pool's next call, and an allocation that the free and a best
 * fit would place at the block's base given the block with its size changed in place. Asserted
 * from the outside against a reference: two pools on two fake backends that hand out the same
 * addresses, the same calls made on both, and the reference asked for its figures after every
 * call (ga_pool_stats finishes a pending free first, so the reference frees at once, as before
 * the hold). After each allocation the two agree on the status, the address, every
 * ga_pool_stats figure and the backend's maps, unmaps and mapped bytes; after each free on the
 * status and the backend's counters at once (an unmap under GPUARENA_VMM_KEEP=0 or past the
 * keep happens at the free, not at the next call). Two and three sizes taking turns in one slot
 * (small, large, mixed), with blocks live around the slot or not, under keeps of 0, 4, 8, 16 and
 * 64 MiB; a seeded random mix, with and without a cap; and the pending block itself: freed
 * memory to its user (a lookup says not owned, its live size is 0, a second free is GA_EDOUBLE)
 * while the allocation after it is still placed as the reference places it; and the shared
 * lifetimes traces (somas) driven through both. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ga_trace.h"
#include "vmm_fake.h"

typedef struct twin {
    vfake_t fa, fb;
    ga_pool_t *a, *b; /* a: with the hold; b: the reference, its figures read after each call */
} twin_t;

static void twin_open(twin_t *t, size_t limit, size_t keep)
{
    t->a = vmm_pool(&t->fa, limit, keep);
    t->b = vmm_pool(&t->fb, limit, keep);
}

static void same_backend(const twin_t *t, const char *what, size_t step)
{
    REQUIRE(t->fa.maps == t->fb.maps && t->fa.unmaps == t->fb.unmaps &&
                t->fa.mapped == t->fb.mapped,
            "%s at step %zu: maps %u/%u, unmaps %u/%u, mapped %zu/%zu (hold/reference)", what,
            step, t->fa.maps, t->fb.maps, t->fa.unmaps, t->fb.unmaps, t->fa.mapped,
            t->fb.mapped);
}

static void same_stats(const twin_t *t, size_t step)
{
    ga_stats_t sa, sb;
    ga_pool_stats(t->a, &sa);
    ga_pool_stats(t->b, &sb);
#define GA_SAME(name, unit, desc)                                                              \
    REQUIRE(sa.name == sb.name, "step %zu: " #name " %" PRIu64 " with the hold, %" PRIu64      \
            " in the reference", step, sa.name, sb.name);
    GA_STATS_LIST(GA_SAME)
#undef GA_SAME
}

/* An allocation on both: same status, address, figures and backend counters. */
static ga_status_t twin_alloc(twin_t *t, size_t size, uintptr_t *out, size_t step)
{
    uintptr_t x = 0, y = 0;
    ga_status_t sa = ga_pool_alloc(t->a, size, &x), sb = ga_pool_alloc(t->b, size, &y);
    REQUIRE(sa == sb, "step %zu: alloc(%zu) %s with the hold, %s in the reference", step, size,
            ga_status_str(sa), ga_status_str(sb));
    REQUIRE(sa != GA_OK || x == y, "step %zu: alloc(%zu) at %#" PRIxPTR " with the hold, %#"
            PRIxPTR " in the reference", step, size, x, y);
    same_backend(t, "alloc", step);
    same_stats(t, step);
    *out = x;
    return sa;
}

/* A free on both: same status and backend counters at once; only the reference's figures read. */
static ga_status_t twin_free(twin_t *t, uintptr_t x, size_t step)
{
    ga_status_t sa = ga_pool_free(t->a, x, NULL), sb = ga_pool_free(t->b, x, NULL);
    REQUIRE(sa == sb, "step %zu: free %s with the hold, %s in the reference", step,
            ga_status_str(sa), ga_status_str(sb));
    same_backend(t, "free", step);
    ga_stats_t s;
    ga_pool_stats(t->b, &s);
    return sa;
}

static void twin_close(twin_t *t)
{
    same_stats(t, SIZE_MAX);
    POOL_HEALTHY(t->a);
    ga_pool_trim(t->a);
    ga_pool_trim(t->b);
    same_backend(t, "trim", SIZE_MAX);
    same_stats(t, SIZE_MAX);
    ga_pool_destroy(t->a);
    ga_pool_destroy(t->b);
}

static const size_t keeps[] = {0, 4 * MIB, 8 * MIB, 16 * MIB, 64 * MIB};
#define NKEEPS (sizeof keeps / sizeof keeps[0])

static void turns_after(const size_t *sizes, size_t n, size_t keep, int around, size_t first);

static void turns(const size_t *sizes, size_t n, size_t keep, int around)
{
    turns_after(sizes, n, keep, around, 64 * KIB);
}

/* Sizes taking turns in one slot, with live blocks before and after it (around 1: the first of
 * `first` bytes), before it only (around 2), or none (0). */
static void turns_after(const size_t *sizes, size_t n, size_t keep, int around, size_t first)
{
    twin_t t;
    twin_open(&t, 0, keep);
    uintptr_t before = 0, slot = 0, after = 0, late = 0;
    size_t step = 0;
    if (around)
        ck_assert_int_eq(twin_alloc(&t, first, &before, step++), GA_OK);
    ck_assert_int_eq(twin_alloc(&t, sizes[0], &slot, step++), GA_OK);
    if (around == 1) /* 2: a block before the slot only */
        ck_assert_int_eq(twin_alloc(&t, 24 * KIB, &after, step++), GA_OK);
    for (size_t r = 1; r < 300; r++) {
        ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);
        ck_assert_int_eq(twin_alloc(&t, sizes[r % n], &slot, step++), GA_OK);
        POOL_HEALTHY(t.a); /* the resize's bins and marks (no hold left to finish) */
        if (r == 150 && around == 1) /* a block placed after the slot midway */
            ck_assert_int_eq(twin_alloc(&t, 3 * KIB, &late, step++), GA_OK);
    }
    ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);
    if (around)
        ck_assert_int_eq(twin_free(&t, before, step++), GA_OK);
    if (around == 1) {
        ck_assert_int_eq(twin_free(&t, after, step++), GA_OK);
        ck_assert_int_eq(twin_free(&t, late, step++), GA_OK);
    }
    twin_close(&t);
}

static const size_t set_small[] = {4 * KIB, 8 * KIB};
static const size_t set_large[] = {7 * MIB + 4 * KIB, 9 * MIB + 4 * KIB};
static const size_t set_mix[] = {4 * KIB, 7 * MIB + 4 * KIB};
static const size_t set_three_small[] = {4 * KIB, 12 * KIB, 8 * KIB};
static const size_t set_three_large[] = {9 * MIB + 4 * KIB, 7 * MIB + 4 * KIB, 12 * MIB + 8 * KIB};
static const size_t set_three_mix[] = {300 * KIB, 7 * MIB + 4 * KIB, 1536 * KIB};
static const size_t *sets[] = {set_small, set_large, set_mix, set_three_small, set_three_large,
                               set_three_mix};
static const size_t set_len[] = {2, 2, 2, 3, 3, 3};

START_TEST(vmm_pending_sizes_taking_turns)
{
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++)
        for (size_t k = 0; k < NKEEPS; k++)
            for (int around = 0; around < 2; around++)
                turns(sets[s], set_len[s], keeps[k], around);
}
END_TEST

/* The area's tail free chunk after the slot, its only free chunk, moved between bins whose marks
 * lie in two words (its size either side of 32 MiB in the area's 64 MiB region, with a third size
 * of 40 MiB): the resize's stores of both words (vmm_alloc.c, bin_move_only). */
START_TEST(vmm_pending_tail_across_a_power_of_two)
{
    static const size_t set_40[] = {7 * MIB + 4 * KIB, 9 * MIB + 4 * KIB, 40 * MIB + 4 * KIB};
    for (size_t k = 0; k < NKEEPS; k++)
        for (int around = 0; around < 3; around++)
            turns(set_40, 3, keeps[k], around);
}
END_TEST

/* A slot freed and taken at 7 MiB + 4 KiB and 9 MiB + 4 KiB by turns, first allocated at 9 MiB +
 * 8 KiB with a block of 24 KiB placed after it: the free chunk after the slot is then not the
 * area's only one (the search decides), and the grown block's last granule is the one the block
 * after it starts in (its count 1 already: not counted as taken from the kept ones). */
START_TEST(vmm_pending_grown_into_a_used_granule)
{
    for (size_t k = 0; k < NKEEPS; k++) {
        twin_t t;
        twin_open(&t, 0, keeps[k]);
        uintptr_t slot = 0, after = 0;
        size_t step = 0;
        ck_assert_int_eq(twin_alloc(&t, 9 * MIB + 8 * KIB, &slot, step++), GA_OK);
        ck_assert_int_eq(twin_alloc(&t, 24 * KIB, &after, step++), GA_OK);
        for (size_t r = 0; r < 200; r++) {
            ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);
            ck_assert_int_eq(twin_alloc(&t, set_large[r % 2], &slot, step++), GA_OK);
            POOL_HEALTHY(t.a);
        }
        ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);
        ck_assert_int_eq(twin_free(&t, after, step++), GA_OK);
        twin_close(&t);
    }
}
END_TEST

/* A held block alone in its granules, all on the kept stack (an earlier block's, given back,
 * lay there), freed when the keep has no room for them all (a parked block of the aligned area
 * holds it): some are given back at the free, as the reference gives them back, none held. */
START_TEST(vmm_pending_held_past_the_keep)
{
    static const size_t other[] = {6 * MIB, 8 * MIB, 12 * MIB};
    for (size_t o = 0; o < sizeof other / sizeof other[0]; o++) {
        twin_t t;
        twin_open(&t, 0, 16 * MIB);
        uintptr_t slot = 0, big = 0;
        size_t step = 0;
        ck_assert_int_eq(twin_alloc(&t, 9 * MIB + 4 * KIB, &slot, step++), GA_OK);
        ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);                /* parked */
        ck_assert_int_eq(twin_alloc(&t, 4 * KIB, &slot, step++), GA_OK);     /* given back */
        ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);                /* held */
        ck_assert_int_eq(twin_alloc(&t, 9 * MIB + 4 * KIB, &slot, step++), GA_OK); /* resized */
        ck_assert_int_eq(twin_alloc(&t, other[o], &big, step++), GA_OK);
        ck_assert_int_eq(twin_free(&t, big, step++), GA_OK);                 /* parked */
        ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);                /* past the keep */
        ck_assert_int_eq(twin_alloc(&t, 7 * MIB + 4 * KIB, &slot, step++), GA_OK);
        ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);
        twin_close(&t);
    }
}
END_TEST

/* A seeded mix of sizes (small, large, granule multiples, class sizes) over 24 slots, frees and
 * allocations interleaved, under each keep, with no cap and under a 48 MiB one (refusals
 * included: the two must refuse alike). */
START_TEST(vmm_pending_seeded_mix)
{
    static const size_t pick[] = {4 * KIB,        8 * KIB,         100 * KIB,     512 * KIB - 512,
                                  1536 * KIB,     2 * MIB,         3 * MIB,       7 * MIB + 4 * KIB,
                                  9 * MIB + 4 * KIB, 12 * MIB + 8 * KIB, 6 * MIB + 512, 24 * KIB};
    for (int capped = 0; capped < 2; capped++) {
        for (size_t k = 0; k < NKEEPS; k++) {
            twin_t t;
            twin_open(&t, capped ? 48 * MIB : 0, keeps[k]);
            uint64_t x = 0x9E3779B97F4A7C15ull ^ (k * 7 + (size_t)capped);
            uintptr_t live[24] = {0};
            size_t step = 0;
            for (int i = 0; i < 4000; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                size_t j = (size_t)(x % 24);
                if (live[j]) {
                    ck_assert_int_eq(twin_free(&t, live[j], step++), GA_OK);
                    live[j] = 0;
                    if ((x >> 20) % 3 == 0) { /* allocated again at once, often another size */
                        size_t sz = pick[(x >> 8) % (sizeof pick / sizeof pick[0])];
                        if (twin_alloc(&t, sz, &live[j], step++) != GA_OK)
                            live[j] = 0;
                    }
                } else {
                    size_t sz = pick[(x >> 8) % (sizeof pick / sizeof pick[0])];
                    if (twin_alloc(&t, sz, &live[j], step++) != GA_OK)
                        live[j] = 0;
                }
            }
            for (size_t j = 0; j < 24; j++)
                if (live[j])
                    ck_assert_int_eq(twin_free(&t, live[j], step++), GA_OK);
            twin_close(&t);
        }
    }
}
END_TEST

/* Blocks of one size freed and allocated again in random order over 16 slots (the held block of
 * exactly the size, often with no free neighbour after it), so that holes of that very size lie
 * before and after it: the block is resized in place only when no hole of its size comes first
 * (alloc_pend skips the best fit's search when the size's bin is empty). A few allocations of a
 * size either side vary the bins. Sizes inside one granule and across two, under each keep. */
START_TEST(vmm_pending_same_size_holes)
{
    static const size_t base[] = {96 * KIB, MIB - 512, 24 * KIB + 512};
    for (size_t s = 0; s < sizeof base / sizeof base[0]; s++) {
        for (size_t k = 0; k < NKEEPS; k++) {
            twin_t t;
            twin_open(&t, 0, keeps[k]);
            uint64_t x = 0x2545F4914F6CDD1Dull ^ (s * 131 + k);
            uintptr_t live[16] = {0};
            size_t step = 0;
            for (size_t j = 0; j < 16; j++)
                ck_assert_int_eq(twin_alloc(&t, base[s], &live[j], step++), GA_OK);
            for (int i = 0; i < 1500; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                size_t j = (size_t)(x % 16);
                if (live[j]) {
                    ck_assert_int_eq(twin_free(&t, live[j], step++), GA_OK);
                    live[j] = 0;
                }
                if ((x >> 24) % 4 == 0) /* a hole left open a while */
                    continue;
                size_t sz = (x >> 32) % 8 == 0 ? base[s] + 512 : (x >> 32) % 8 == 1 ? base[s] - 512
                                                                                     : base[s];
                ck_assert_int_eq(twin_alloc(&t, sz, &live[j], step++), GA_OK);
            }
            for (size_t j = 0; j < 16; j++)
                if (live[j])
                    ck_assert_int_eq(twin_free(&t, live[j], step++), GA_OK);
            twin_close(&t);
        }
    }
}
END_TEST

/* The pending block is freed memory to its user: a lookup of it or inside it says not owned, its
 * live size is 0, a second free of it is a double free (and the first free's hold is then done,
 * as a free's is); the next allocation is still placed as the reference places it. */
START_TEST(vmm_pending_block_is_freed)
{
    for (size_t s = 0; s < 3; s++) {
        for (size_t k = 0; k < NKEEPS; k++) {
            twin_t t;
            twin_open(&t, 0, keeps[k]);
            uintptr_t keepalive = 0, slot = 0;
            size_t step = 0;
            ck_assert_int_eq(twin_alloc(&t, 16 * KIB, &keepalive, step++), GA_OK);
            ck_assert_int_eq(twin_alloc(&t, sets[s][0], &slot, step++), GA_OK);
            for (int r = 0; r < 4; r++) {
                ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);
                uintptr_t base = 1;
                size_t size = 1;
                ck_assert_int_eq(ga_pool_lookup(t.a, slot, &base, &size), GA_ENOTOWNED);
                ck_assert_int_eq(ga_pool_lookup(t.a, slot + 512, &base, &size), GA_ENOTOWNED);
                ck_assert_uint_eq(ga_pool_live_size(t.a, slot), 0);
                ck_assert_int_eq(ga_pool_lookup(t.b, slot, &base, &size), GA_ENOTOWNED);
                if (r == 2) /* a double free: refused alike, the hold done */
                    ck_assert_int_eq(twin_free(&t, slot, step++), GA_EDOUBLE);
                ck_assert_int_eq(twin_alloc(&t, sets[s][(r + 1) % 2], &slot, step++), GA_OK);
                ck_assert_uint_eq(ga_pool_live_size(t.a, slot), ga_pool_live_size(t.b, slot));
            }
            ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);
            ck_assert_int_eq(twin_free(&t, slot, step++), GA_EDOUBLE); /* pending, then freed */
            ck_assert_int_eq(twin_free(&t, keepalive, step++), GA_OK);
            twin_close(&t);
        }
    }
}
END_TEST

/* With no keep, a large block alone in its granules gives them back at its free: the backend's
 * unmaps rise at the free itself, not at the next call. */
START_TEST(vmm_pending_keep0_unmaps_at_the_free)
{
    twin_t t;
    twin_open(&t, 0, 0);
    uintptr_t slot = 0;
    size_t step = 0;
    ck_assert_int_eq(twin_alloc(&t, 9 * MIB + 4 * KIB, &slot, step++), GA_OK);
    unsigned unmaps = t.fa.unmaps;
    ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);
    ck_assert_uint_eq(t.fa.unmaps, unmaps + 5); /* its five granules */
    ck_assert_uint_eq(t.fa.mapped, 0);
    ck_assert_int_eq(twin_alloc(&t, 7 * MIB + 4 * KIB, &slot, step++), GA_OK);
    ck_assert_int_eq(twin_free(&t, slot, step++), GA_OK);
    ck_assert_uint_eq(t.fa.mapped, 0);
    twin_close(&t);
}
END_TEST

/* The shared lifetimes traces driven through both pools with the default keep (the replay
 * command reads the pool's figures after every event, which finishes every pending free: it
 * would not see the resize; here only the reference is read between calls). */
START_TEST(vmm_pending_shared_traces)
{
    static const char *const names[] = {"somas_tiny_bert.csv", "somas_resnet50.csv",
                                        "somas_bert_base.csv"};
    const char *dir = getenv("GA_TRACES_DIR");
    ck_assert_msg(dir && *dir, "GA_TRACES_DIR is not set: point it at shared/traces");
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        char path[1024], err[256];
        snprintf(path, sizeof path, "%s/lifetimes/%s", dir, names[n]);
        ga_trace_t tr;
        ga_trace_init(&tr);
        ck_assert_msg(ga_lifetimes_read(path, &tr, err, sizeof err) == 0, "%s", err);
        uint64_t ids = 0;
        for (size_t i = 0; i < tr.count; i++)
            ids = tr.events[i].addr + 1 > ids ? tr.events[i].addr + 1 : ids;
        uintptr_t *at = calloc((size_t)ids, sizeof *at);
        ck_assert_ptr_nonnull(at);
        size_t allocs = 0;
        twin_t t;
        t.a = vmm_pool_va(&t.fa, 0, GA_VMM_KEEP_DEFAULT, (size_t)64 << 30);
        t.b = vmm_pool_va(&t.fb, 0, GA_VMM_KEEP_DEFAULT, (size_t)64 << 30);
        for (size_t i = 0; i < tr.count; i++) {
            const ga_event_t *e = &tr.events[i];
            if (e->kind == GA_EV_ALLOC && !at[e->addr]) {
                if (twin_alloc(&t, (size_t)e->size, &at[e->addr], i) != GA_OK)
                    at[e->addr] = 0;
                allocs++;
            } else if (e->kind == GA_EV_FREE && at[e->addr]) {
                ck_assert_int_eq(twin_free(&t, at[e->addr], i), GA_OK);
                at[e->addr] = 0;
            }
        }
        ck_assert_uint_ge(allocs, 500); /* the trace was read and driven */
        ck_assert_uint_ge(t.fa.maps, 100);
        for (uint64_t id = 0; id < ids; id++)
            if (at[id])
                ck_assert_int_eq(twin_free(&t, at[id], tr.count), GA_OK);
        twin_close(&t);
        free(at);
        ga_trace_free(&tr);
    }
}
END_TEST

Suite *vmm_pending_suite(void)
{
    Suite *s = suite_create("vmm_pending");
    TCase *tc = tcase_create("against_reference");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, vmm_pending_sizes_taking_turns);
    tcase_add_test(tc, vmm_pending_tail_across_a_power_of_two);
    tcase_add_test(tc, vmm_pending_grown_into_a_used_granule);
    tcase_add_test(tc, vmm_pending_held_past_the_keep);
    tcase_add_test(tc, vmm_pending_seeded_mix);
    tcase_add_test(tc, vmm_pending_same_size_holes);
    tcase_add_test(tc, vmm_pending_block_is_freed);
    tcase_add_test(tc, vmm_pending_keep0_unmaps_at_the_free);
    tcase_add_test(tc, vmm_pending_shared_traces);
    suite_add_tcase(s, tc);
    return s;
}
