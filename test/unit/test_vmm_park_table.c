/* The vmm pool's table of parked sizes (vmm_internal.h, park_find): each rounded size's parked
 * blocks in one entry found by probing from the size's home, so that many sizes park at once and
 * an entry freed by its last block leaves every other size findable. Asserted from the outside:
 * a burst of 40 sizes freed and allocated again in reverse takes every block back where it lay
 * (freed instead, their room merged, the largest size would land first at the lowest address),
 * with nothing mapped after the first round, round after round (the table of one size an entry
 * parked none of them from the fifth round on); a seeded mix of more sizes than the table has
 * homes (general, class-size and granule-multiple blocks, frees and allocations interleaved)
 * keeps the pool's figures those of its live blocks, mapped memory its reserved figure, and
 * ga_vmm_check clean after every operation (it checks that each parked block is in the entry its
 * size's search finds, and each general one's place among the general area's parked ones); trim
 * then gives every granule back. The walk that gives every parked block back (from the homes
 * marked at park, park_mark) is checked on such a mix and on sizes that share homes, parked,
 * partly taken back and trimmed. Added to the vmm suite's "placement" case by
 * vmm_park_table_add(). */
#include <inttypes.h>
#include <stdio.h>

#include "vmm_fake.h"
#include "vmm_internal.h" /* park_home: sizes that share homes */

#define BURST 40

/* bench-patterns' sizes40: 1 MiB + i x 8 KiB, each alone (no class: the general area). */
START_TEST(vmm_burst_of_sizes_taken_back_in_place)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool(&f, 0, GA_VMM_KEEP_DEFAULT);
    uintptr_t at[BURST], lo = UINTPTR_MAX, hi = 0;
    size_t rounded = 0, requested = 0;
    for (int i = 0; i < BURST; i++) {
        size_t size = MIB + (size_t)i * 8 * KIB;
        at[i] = pool_alloc(p, size);
        lo = at[i] < lo ? at[i] : lo;
        hi = at[i] + size > hi ? at[i] + size : hi;
        rounded += size, requested += size; /* multiples of GA_ALIGN */
    }
    uint64_t spanned = ((hi + GRAN - 1) / GRAN - lo / GRAN) * GRAN; /* 24 granules */
    ck_assert_uint_le(spanned, GA_VMM_KEEP_DEFAULT);
    unsigned maps = f.maps, unmaps = f.unmaps;
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < BURST; i++)
            ck_assert_int_eq(ga_pool_free(p, at[i], NULL), GA_OK);
        ga_stats_t s;
        ga_pool_stats(p, &s);
        ck_assert_uint_eq(s.live, 0);
        ck_assert_uint_eq(s.in_use, 0);
        ck_assert_uint_eq(s.in_use_requested, 0);
        ck_assert_uint_eq(s.frees, (uint64_t)BURST * (round + 1));
        ck_assert_uint_eq(s.kept, spanned); /* every granule they touched, none in use */
        ck_assert_uint_eq(s.reserved, spanned);
        POOL_HEALTHY(p);
        for (int i = BURST - 1; i >= 0; i--) /* the largest first */
            ck_assert_uint_eq(pool_alloc(p, MIB + (size_t)i * 8 * KIB), at[i]);
        ga_pool_stats(p, &s);
        ck_assert_uint_eq(s.live, BURST);
        ck_assert_uint_eq(s.in_use, rounded);
        ck_assert_uint_eq(s.in_use_requested, requested);
        ck_assert_uint_eq(s.allocs, (uint64_t)BURST * (round + 2));
        ck_assert_uint_eq(s.kept, 0);
        ck_assert_uint_eq(f.maps, maps);
        ck_assert_uint_eq(f.unmaps, unmaps);
        POOL_HEALTHY(p);
    }
    for (int i = 0; i < BURST; i++)
        ck_assert_int_eq(ga_pool_free(p, at[i], NULL), GA_OK);
    destroy_clean(p, &f);
}
END_TEST

/* The mix's sizes: 40 general (3 granules + (i + 1) x 4.5 KiB: no class ever), 40 of class size
 * (1 MiB + i x 8 KiB, two blocks each: some get a class), 20 granule multiples, 100 in all over
 * 128 homes; two blocks a size at most. */
#define MIX_SIZES 100
static size_t mix_size(unsigned k)
{
    if (k < 40)
        return 3 * GRAN + (k + 1) * 9 * GA_ALIGN;
    if (k < 80)
        return MIB + (k - 40) * 8 * KIB;
    return (k - 79) * GRAN;
}

START_TEST(vmm_many_sizes_parked_and_taken_back)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool_va(&f, 0, 256 * MIB, 4096 * MIB);
    uintptr_t live[2 * MIX_SIZES] = {0};
    uint64_t nlive = 0, in_use = 0, state = 143;
    for (int step = 0; step < 4000; step++) {
        unsigned slot = (unsigned)(tu_splitmix(&state) % (2 * MIX_SIZES));
        size_t size = mix_size(slot / 2);
        if (live[slot]) {
            ck_assert_int_eq(ga_pool_free(p, live[slot], NULL), GA_OK);
            live[slot] = 0, nlive--, in_use -= size;
        } else {
            live[slot] = pool_alloc(p, size);
            nlive++, in_use += size;
        }
        ga_stats_t s;
        ga_pool_stats(p, &s);
        REQUIRE(s.live == nlive && s.in_use == in_use && s.in_use_requested == in_use,
                "step %d: live %" PRIu64 "/%" PRIu64 ", in use %" PRIu64 "/%" PRIu64, step,
                s.live, nlive, s.in_use, in_use);
        REQUIRE(f.mapped == s.reserved && s.kept <= 256 * MIB,
                "step %d: %zu mapped, %" PRIu64 " reserved, %" PRIu64 " kept", step, f.mapped,
                s.reserved, s.kept);
        POOL_HEALTHY(p);
    }
    for (unsigned k = 0; k < 2 * MIX_SIZES; k++) /* all freed: most parked */
        if (live[k])
            ck_assert_int_eq(ga_pool_free(p, live[k], NULL), GA_OK);
    POOL_HEALTHY(p);
    trim_clean(p, &f); /* every parked block given back, every granule unmapped */
    ck_assert_uint_eq(f.maps, f.unmaps);
    destroy_clean(p, &f);
}
END_TEST

/* CHAIN general sizes (no class ever) in CHAIN / 6 homes, 6 a home: their entries lie in runs
 * past their homes, and a take-back moves the entries after it back. */
#define CHAIN 24
static void chain_sizes(size_t *out)
{
    size_t homes[CHAIN / 6], nh = 0, per[CHAIN / 6] = {0}, n = 0;
    for (size_t j = 1; n < CHAIN; j++) {
        size_t size = 3 * GRAN + j * 9 * GA_ALIGN, h = park_home(size), i = 0;
        while (i < nh && homes[i] != h)
            i++;
        if (i == nh && nh < CHAIN / 6)
            homes[nh++] = h;
        if (i < nh && per[i] < 6)
            per[i]++, out[n++] = size;
    }
}

/* The walk that gives every parked block back (ga_vmm_unpark_all) finds the entries in use from
 * the homes marked when a block parked, not from all 144 entries: after a seeded mix of frees
 * (parks), allocations (take-backs, entries freed and the entries after them moved back) and, now
 * and then, over sizes 6 of which share a home (chain_sizes) and the mix's, a 320 MiB allocation
 * that has to map (every parked block given back first) or a trim, ga_vmm_check finds every entry
 * in use with its home marked, every parked block in the entry its size's probe finds, and their
 * counts right (a parked block the walk missed would stay counted, and the 320 MiB allocation
 * would give them back again and again: it returns, mapped); after each trim, with blocks still
 * live, nothing is kept. */
START_TEST(vmm_unpark_all_finds_every_parked_block)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool_va(&f, 0, 256 * MIB, 4096 * MIB);
    size_t chain[CHAIN];
    chain_sizes(chain);
    uintptr_t live[2 * CHAIN + 2 * MIX_SIZES] = {0};
    uint64_t state = 146;
    for (int step = 0; step < 3000; step++) {
        uint64_t r = tu_splitmix(&state);
        if (r % 53 == 0) { /* a map while blocks are parked: they all go back first */
            uintptr_t big = pool_alloc(p, 320 * MIB); /* past the keep */
            POOL_HEALTHY(p);
            ck_assert_int_eq(ga_pool_free(p, big, NULL), GA_OK);
        } else if (r % 97 == 1) {
            ga_pool_trim(p); /* every parked block given back, every kept granule */
            ga_stats_t s;
            ga_pool_stats(p, &s);
            REQUIRE(s.kept == 0 && f.mapped == s.reserved,
                    "step %d: after a trim %" PRIu64 " kept, %" PRIu64 " reserved, %zu mapped",
                    step, s.kept, s.reserved, f.mapped);
        } else {
            unsigned slot = (unsigned)((r >> 8) % (2 * CHAIN + 2 * MIX_SIZES));
            if (live[slot]) {
                ck_assert_int_eq(ga_pool_free(p, live[slot], NULL), GA_OK);
                live[slot] = 0;
            } else {
                live[slot] = pool_alloc(p, slot < 2 * CHAIN ? chain[slot / 2]
                                                          : mix_size((slot - 2 * CHAIN) / 2));
            }
        }
        POOL_HEALTHY(p);
    }
    for (unsigned k = 0; k < 2 * CHAIN + 2 * MIX_SIZES; k++)
        if (live[k])
            ck_assert_int_eq(ga_pool_free(p, live[k], NULL), GA_OK);
    trim_clean(p, &f);
    destroy_clean(p, &f);
}
END_TEST

/* Rounds of the chained sizes alone, on a pool whose general frees park (the mix above leaves
 * them unparked for long: gwaste): each allocated, freed in a seeded order (all parked, in runs
 * past their homes), a seeded half taken back (entries freed, the ones after moved back), then a
 * trim gives the rest back from the marks: nothing kept, and ga_vmm_check finds no parked block
 * left uncounted or in an entry whose home is not marked. */
START_TEST(vmm_unpark_all_finds_chained_entries)
{
    vfake_t f;
    ga_pool_t *p = vmm_pool_va(&f, 0, 256 * MIB, 4096 * MIB);
    size_t chain[CHAIN];
    chain_sizes(chain);
    uint64_t state = 1146;
    for (int round = 0; round < 40; round++) {
        uintptr_t at[CHAIN];
        unsigned order[CHAIN];
        for (unsigned k = 0; k < CHAIN; k++)
            at[k] = pool_alloc(p, chain[k]), order[k] = k;
        for (unsigned k = CHAIN - 1; k > 0; k--) { /* a seeded shuffle */
            unsigned j = (unsigned)(tu_splitmix(&state) % (k + 1)), t = order[k];
            order[k] = order[j], order[j] = t;
        }
        for (unsigned k = 0; k < CHAIN; k++)
            ck_assert_int_eq(ga_pool_free(p, at[order[k]], NULL), GA_OK);
        POOL_HEALTHY(p);
        for (unsigned k = 0; k < CHAIN; k++)
            at[k] = tu_splitmix(&state) & 1 ? pool_alloc(p, chain[k]) : 0;
        POOL_HEALTHY(p);
        ga_pool_trim(p);
        ga_stats_t s;
        ga_pool_stats(p, &s);
        ck_assert_uint_eq(s.kept, 0);
        POOL_HEALTHY(p);
        for (unsigned k = 0; k < CHAIN; k++)
            if (at[k])
                ck_assert_int_eq(ga_pool_free(p, at[k], NULL), GA_OK);
        trim_clean(p, &f);
    }
    destroy_clean(p, &f);
}
END_TEST

void vmm_park_table_add(TCase *tc)
{
    tcase_add_test(tc, vmm_unpark_all_finds_every_parked_block);
    tcase_add_test(tc, vmm_unpark_all_finds_chained_entries);
    tcase_add_test(tc, vmm_burst_of_sizes_taken_back_in_place);
    tcase_add_test(tc, vmm_many_sizes_parked_and_taken_back);
}
