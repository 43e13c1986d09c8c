/* gpuarena vmm pool: a freed block's granules, the common cases, for pool_vmm.c's free paths:
 * a block of the aligned area leaves its whole granules (uncover_whole), any other block its
 * granules' counts (uncover_kept, uncover), a granule it was the last user of kept while the
 * keep has room. The rest (a granule to unmap, the cache full, granules across bitmap words) is
 * vmm_granules.c's; an allocated block's side is vmm_cover.h (vmm_alloc.c's). And the pending
 * free's hold (pend_hold).
 *
 * A header, not a .c file of its own: moved to one (allocator/vmm_pend.c, the pending free's
 * code), vmm_alloc.c's and pool_vmm.c's functions were no longer inlined as within one file, and
 * every pattern of scripts/bench-patterns-instr.sh cost 21 instructions a pair more. Included by
 * pool_vmm.c only, just after vmm_internal.h, where these definitions stood: the file compiles
 * to the same instructions as before the move (the library's .text byte for byte).
 */
#ifndef GA_VMM_UNCOVER_H
#define GA_VMM_UNCOVER_H

#include "vmm_internal.h"

/* A block of the aligned area leaves its len / gran granules from g0: in the common case (one
 * bitmap word, room in the cache, the granules still on the kept stack from an earlier free)
 * three word operations and the kept bytes; else as uncover_body. */
static inline __attribute__((always_inline)) void uncover_whole(ga_pool_t *p, const ga_vmm_t *v,
                                                                ga_vrange_t *r, size_t g0,
                                                                size_t len)
{
    ga_stats_t *s = &p->own;
    size_t n = len >> v->gshift;
    if (run_one_word(g0, n)) {
        uint64_t m = run_mask(g0, n);
        size_t w = g0 >> 6;
        r->inner[w] &= ~m;
        if (s->kept + len <= v->keep_now && (r->stacked[w] & m) == m) {
            s->kept += len;
            if (s->kept > s->peak_kept)
                s->peak_kept = s->kept;
        } else {
            ga_vmm_keep_freed_slow(p, r, g0, g0 + n - 1);
        }
        return;
    }
    ga_vmm_uncover_whole_slow(p, r, g0, g0 + n - 1);
}

/* The reverse, for a freed block on granules g0..g1 of r: the granules it was the last user of
 * become kept when the keep has room for all of them and they are on the kept stack already (as
 * after the first step of a loop), else 0 with nothing changed (ga_vmm_uncover_granules). */
static inline __attribute__((always_inline)) int uncover_kept(ga_pool_t *p, const ga_vmm_t *v,
                                                              ga_vrange_t *r, size_t g0, size_t g1)
{
    uint32_t *refs = r->refs;
    ga_stats_t *s = &p->own;
    size_t w = g0 >> 6;
    if (g0 == g1) {
        if (refs[g0] > 1) {
            refs[g0]--;
            return 1;
        }
        if (s->kept + v->gran > v->keep_now || !((r->stacked[w] >> (g0 & 63)) & 1))
            return 0;
        refs[g0] = 0;
        s->kept += v->gran;
    } else {
        if (!one_word(g0, g1))
            return 0;
        /* The inner granules' mask from the two end bits by one subtraction (inner_mask), the
         * ends added where this block is their last user, their counts read once (with
         * cover_kept's the same, scripts/bench-patterns-instr.sh build pool, vmm: alt2-large
         * 589 -> 583 a pair, alt2-mix 549 -> 546, ex_train's trace 510 -> 508). */
        uint32_t r0 = refs[g0], r1 = refs[g1];
        uint64_t b0 = 1ull << (g0 & 63), b1 = 1ull << (g1 & 63), in = inner_mask(b0, b1);
        uint64_t freed = in | (r0 == 1 ? b0 : 0) | (r1 == 1 ? b1 : 0);
        uint64_t bytes = (uint64_t)(g1 - g0 - 1 + (r0 == 1) + (r1 == 1)) << v->gshift;
        if (s->kept + bytes > v->keep_now || (r->stacked[w] & freed) != freed)
            return 0;
        refs[g0] = r0 - 1;
        refs[g1] = r1 - 1;
        r->inner[w] &= ~in;
        s->kept += bytes;
    }
    if (s->kept > s->peak_kept)
        s->peak_kept = s->kept;
    return 1;
}

/* free_general's hold in one step where nothing is pending or paused (pend_skip) and nothing
 * else is to do: a block in the first range, no class size (count_free untracks nothing), alone
 * in its granules (end counts 1, one word), all to stay kept (uncover_kept's test: room in the
 * keep, on the kept stack): its figures (count_free's), the hold (pend_hold's) and the kept
 * bytes and their peak; its counts and bits left (pend_gran) for the resize (vmm_cover.h,
 * cover_resized). 1 when so; 0 with nothing changed. */
static inline __attribute__((always_inline)) int free_held(ga_pool_t *p, ga_vmm_t *v,
                                                           ga_chunk_t *c, size_t *size)
{
    size_t len = c->size, off = c->base - v->base0;
    unsigned sh = v->gshift;
    size_t g0 = off >> sh, g1 = (off + len - 1) >> sh;
    const uint32_t *refs = v->refs0;
    if (off >= v->size0 || class_size(v, len) || !one_word(g0, g1) || refs[g0] != 1 ||
        refs[g1] != 1)
        return 0;
    ga_stats_t *s = &p->own;
    uint64_t b1 = gran_bit(g1), span = b1 + b1 - gran_bit(g0); /* g0 .. g1 (b1 + b1: 0 at 63) */
    uint64_t kept = s->kept + ((uint64_t)(g1 - g0 + 1) << sh);
    if (kept > v->keep_now || (v->ranges->stacked[g0 >> 6] & span) != span)
        return 0;
    s->kept = kept;
    if (kept > s->peak_kept)
        s->peak_kept = kept;
    s->in_use -= len;
    if (size)
        *size = len;
    v->pend = c;
    c->u.area = AREA_GENERAL | GA_AREA_PARKED; /* freed to its user (pend_hold) */
    v->small_cut = 0;
    v->pend_gran = 1;
    return 1;
}

/* One live block fewer on the granules of the block of len bytes at offset off in r. In the
 * common case, inside one granule that another block still uses, there is nothing to give back. */
static inline __attribute__((always_inline)) void uncover(ga_pool_t *p, const ga_vmm_t *v,
                                                          ga_vrange_t *r, size_t off, size_t len)
{
    unsigned sh = v->gshift;
    size_t g0 = off >> sh, g1 = (off + len - 1) >> sh;
    if (!uncover_kept(p, v, r, g0, g1))
        ga_vmm_uncover_granules(p, r, g0, g1);
}

/* A general-area block freed on a fast path (free_general, free_small: not parked) is freed at
 * once to its user, its figures and its granules (so that an unmap under GPUARENA_VMM_KEEP=0 or
 * past the keep happens at the free, as the driver's counters show), but its arena free is put
 * off: an allocation that the free and its best fit would place at the block's base takes the
 * block with its size changed in place (vmm_alloc.c, alloc_pend), the figures of a free and an
 * allocation, and neither the free's merge and binning nor the best fit's unbinning and split is
 * done; any other call that reads the area or its figures finishes the free first (pend_done).
 * Two sizes taking turns in one slot, at the pool, vmm: 4/8 KiB 487 -> 342 instructions a pair,
 * 7/9 MiB + 4 KiB 571 -> 462, 4 KiB / 7 MiB + 4 KiB 535 -> 432 (arena 398; through the shim
 * 970 / 1,053 / 1,018 -> 825 / 945 / 915, arena 872; scripts/bench-patterns-instr.sh alt2-small
 * alt2-large alt2-mix). Where the next call is another free or an allocation placed elsewhere
 * the hold costs a call and a check, so a finished hold pauses holding (pend_skip). */
static inline __attribute__((always_inline)) void pend_hold(ga_vmm_t *v, ga_chunk_t *c)
{
    if (__builtin_expect(v->pend != NULL, 0)) /* one at a time: the one before it done */
        ga_vmm_pend_finish(v);
    v->pend = c;
    c->u.area = AREA_GENERAL | GA_AREA_PARKED; /* freed to its user: lookup, live size, free */
    v->small_cut = 0;
}

#endif
