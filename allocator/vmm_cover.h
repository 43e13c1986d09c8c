/* gpuarena vmm pool: a placed block's granules, for vmm_alloc.c's allocation paths. What a place
 * would take new (unmapped_in; unused_in and fresh_in near the cap) and the choice between two
 * places made on it (place_tried); a placed block's granules taken (cover_kept, cover,
 * cover_placed) with the allocation's figures (count_alloc), and a refusal's cold ends (a class
 * of another size with room, alloc_refused; a map while blocks are parked, alloc_unparked). A
 * freed block's side is vmm_uncover.h (pool_vmm.c's), the slow paths of both vmm_granules.c.
 *
 * A header, not a .c file of its own: moved to one (allocator/vmm_pend.c, the pending free's
 * code), vmm_alloc.c's and pool_vmm.c's functions were no longer inlined as within one file, and
 * every pattern of scripts/bench-patterns-instr.sh cost 21 instructions a pair more. Included by
 * vmm_alloc.c only, just after vmm_internal.h, where these definitions stood: the file compiles
 * to the same instructions as before the move (the library's .text byte for byte). A second
 * includer would carry copies of the static out-of-line functions.
 */
#ifndef GA_VMM_COVER_H
#define GA_VMM_COVER_H

#include <stdint.h>

#include "vmm_internal.h"

/* A block that is not the aligned area's takes granules g0..g1 of r when nothing has to be
 * mapped for it and they lie in one bitmap word: its two end counts, its inner granules' bits, and
 * the granules it is the first user of (kept ones, all mapped) leave the kept bytes. 1 when done;
 * 0 with nothing changed (a granule to map, or granules across words: ga_vmm_cover_granules).
 * A training step's blocks mostly find their granules so, used by a neighbour or kept since the
 * last step: out of line, a granule it was the first user of cost ~120 instructions where arena
 * mode's whole allocation costs ~180 (the shared traces' ex_train loop, pool calls only). */
static inline __attribute__((always_inline)) int cover_kept(ga_pool_t *p, const ga_vmm_t *v,
                                                            ga_vrange_t *r, size_t g0, size_t g1)
{
    uint32_t *refs = r->refs;
    size_t w = g0 >> 6;
    if (g0 == g1) {
        if (refs[g0]) {
            refs[g0]++;
            return 1;
        }
        if (!((r->mapped[w] >> (g0 & 63)) & 1))
            return 0;
        refs[g0] = 1;
        p->own.kept -= v->gran;
        return 1;
    }
    if (!one_word(g0, g1))
        return 0;
    /* As uncover_kept: the inner mask by one subtraction, the end counts read once. */
    uint32_t r0 = refs[g0], r1 = refs[g1];
    uint64_t b0 = 1ull << (g0 & 63), b1 = 1ull << (g1 & 63), in = inner_mask(b0, b1);
    uint64_t fresh = in | (r0 ? 0 : b0) | (r1 ? 0 : b1);
    if ((r->mapped[w] & fresh) != fresh)
        return 0;
    refs[g0] = r0 + 1;
    refs[g1] = r1 + 1;
    r->inner[w] |= in;
    p->own.kept -= (uint64_t)(g1 - g0 - 1 + !r0 + !r1) << v->gshift;
    return 1;
}

/* The pending block at offset off of the first range, resized from old to rounded bytes in
 * place (vmm_alloc.c, alloc_pend), while its free left its counts and inner bits as they were
 * (pend_gran: alone in granules g0..g1o, all kept now): its granules taken as cover_kept would
 * take them after the free's stores, in one step on what the new span changes. Within the old
 * span nothing is mapped or looked at (every granule mapped: only a call that finishes the hold
 * gives kept granules back); past it the new granules must be mapped and in the same word. 1
 * when done; 0 with the free's stores made (pend_gran_undo) and nothing else changed. */
static inline __attribute__((always_inline)) int cover_resized(ga_pool_t *p, ga_vmm_t *v,
                                                               size_t off, size_t old,
                                                               size_t rounded)
{
    unsigned sh = v->gshift;
    size_t g0 = off >> sh, go = (off + old - 1) >> sh, g1 = (off + rounded - 1) >> sh;
    uint32_t *refs = v->refs0;
    /* the end bits by bts (gran_bit): no shift count moved to cl for each */
    if (g1 <= go) { /* its end back inside the old span: the granules past it left unused */
        v->pend_gran = 0;
        refs[go] = 0;
        refs[g1] = 1;
        /* g1 .. go - 1 (g0's bit, an end's, is clear) */
        v->ranges->inner[g0 >> 6] &= ~(gran_bit(go) - gran_bit(g1));
        p->own.kept -= (uint64_t)(g1 - g0 + 1) << sh;
        return 1;
    }
    /* Past its old end, granules go + 1 .. g1 taken, all mapped (g1 mapped if used, as any
     * granule a live block uses: the test is cover_kept's), in the same word. */
    uint64_t run = gran_bit(g1) - gran_bit(go); /* go .. g1 - 1 */
    if (one_word(g0, g1) && (v->ranges->mapped[g0 >> 6] & run << 1) == run << 1) {
        uint32_t r1 = refs[g1];
        v->pend_gran = 0;
        refs[go] = 0;
        refs[g0] = 1;
        refs[g1] = r1 + 1;
        v->ranges->inner[g0 >> 6] |= run & ~gran_bit(g0); /* not g0's */
        p->own.kept -= (uint64_t)(g1 - g0 + !r1) << sh;
        return 1;
    }
    pend_gran_undo(v, off, old);
    return 0;
}

/* One live block more on the granules of [a, a + len). Most blocks lie inside one granule that
 * a live block already uses: one count more, nothing to map, the limit not concerned. */
static inline __attribute__((always_inline)) int cover(ga_pool_t *p, uintptr_t a, size_t len)
{
    ga_vmm_t *v = p->vmm;
    ga_vrange_t *r = range_of(v, a);
    if (!r)
        return -1;
    size_t off = a - r->base, g0 = off >> v->gshift, g1 = (off + len - 1) >> v->gshift;
    if (cover_kept(p, v, r, g0, g1))
        return 0;
    return ga_vmm_cover_granules(p, r, g0, g1);
}

/* Granules of [a, a + len) with nothing mapped: what a block placed there would map, for any
 * block in any range (the bits counted a word at a time). */
static OUT_OF_LINE size_t unmapped_slow(const ga_vmm_t *v, uintptr_t a, size_t len)
{
    const ga_vrange_t *r = range_of(v, a);
    size_t g0 = (a - r->base) >> v->gshift, g1 = (a + len - 1 - r->base) >> v->gshift;
    return bits_all(r->mapped, g0, g1) ? 0 : g1 - g0 + 1 - bits_count(r->mapped, g0, g1);
}

/* The same, inline for the common case: a block in the first range within one bitmap word (up to
 * 64 granules, usually one to three), whose unmapped bits are counted one at a time, three
 * instructions a bit. Out of line with a range lookup, it cost 40-53 instructions a call, two
 * calls on every class block whose own area would map something (ex_train's 1 MiB blocks). */
static inline __attribute__((always_inline)) size_t unmapped_in(const ga_vmm_t *v, uintptr_t a,
                                                                size_t len)
{
    size_t off = a - v->base0, g0 = off >> v->gshift, g1 = (off + len - 1) >> v->gshift;
    if (off >= v->size0 || !one_word(g0, g1))
        return unmapped_slow(v, a, len);
    size_t n = 0;
    for (uint64_t x = ~v->ranges->mapped[g0 >> 6] & span_mask(g0, g1); x; x &= x - 1)
        n++;
    return n;
}

/* The granules of [a, a + len) that a block placed there would be the first user of (no live or
 * parked block uses them: its inner granules, and its ends where their counts are 0). */
static OUT_OF_LINE size_t unused_in(const ga_vmm_t *v, uintptr_t a, size_t len)
{
    const ga_vrange_t *r = range_of(v, a);
    size_t g0 = (a - r->base) >> v->gshift, g1 = (a + len - 1 - r->base) >> v->gshift;
    return g1 - g0 + 1 - (r->refs[g0] != 0) - (g1 != g0 && r->refs[g1] != 0);
}

/* What the choice between two places counts as new: the granules that would be mapped, so that a
 * kept granule counts as mapped; but once the room under the limit is at most the keep
 * (tight()), the granules the block would be the first user of, kept ones among them, as with
 * GPUARENA_VMM_KEEP=0 (where a granule no block uses is unmapped). Near the cap a kept granule is
 * given back before any out-of-memory, so it is room like any other; counted as mapped, it
 * steered a class size into the general area, denser there at first and less so at the cap (an
 * outside check, helper-144 F2; test_outside144.c): a 7 MiB + 4 KiB block and a 1.5 MiB one
 * parked, then 1.5 MiB blocks until refused, under a 32 MiB limit with the 64 MiB keep: the
 * second 1.5 MiB block went to a kept granule beside the first in the general area (two blocks
 * in two granules, where the class holds four in three), and 20 fit where 21 do with the keep 0;
 * now 21. Far from the cap (the room over the keep) the keep steers as before: the shim's limit
 * is the device's cap whenever GPUARENA_LIMIT is not set, and the replay with no limit, whose
 * figures the shim's must equal, counts kept granules as mapped. */
static inline size_t fresh_in(const ga_pool_t *p, uintptr_t a, size_t len)
{
    const ga_vmm_t *v = p->vmm;
    return __builtin_expect(tight(p), 0) ? unused_in(v, a, len) : unmapped_in(v, a, len);
}

/* Frees the live block at a of area ar: a trial that lost, or a block whose granules were
 * refused (no granule or figure of the pool's changes). */
static OUT_OF_LINE void area_free(ga_vmm_t *v, ga_varea_t *ar, uintptr_t a)
{
    (void)ga_free_body(ar->arena, &v->ltab, 1, a, NULL);
}

/* The rest of placing a block in area *ar once its own arena answered (st, *a). A block of the
 * aligned area or a class that would map new granules there is also tried in the general area,
 * and goes where fewer granules are new (its own area on a tie; the trial is freed, which leaves
 * the general area's free space as it was). alloc_fresh makes the same choice without the
 * trial where it can; this is for the rest (an area that grows first, the general area's own
 * blocks, the general area growing for the trial). */
static OUT_OF_LINE ga_status_t place_tried(ga_pool_t *p, ga_varea_t **ar, size_t size,
                                           size_t rounded, uintptr_t *a, ga_status_t st)
{
    ga_vmm_t *v = p->vmm;
    mark_dirty(v, *ar);
    if ((*ar)->id == AREA_GENERAL)
        return st;
    size_t fresh = st == GA_OK ? fresh_in(p, *a, rounded) : 0;
    ga_varea_t *gen = fresh ? area_ready(v, AREA_GENERAL) : NULL;
    uintptr_t b = 0;
    if (!gen || ga_alloc_short_in(gen->arena, &v->ltab, 1, AREA_GENERAL, size, &b) != GA_OK)
        return st;
    mark_dirty(v, gen);
    if (fresh_in(p, b, rounded) < fresh) {
        area_free(v, *ar, *a);
        *ar = gen, *a = b;
    } else {
        area_free(v, gen, b);
    }
    v->undone++; /* the loser, allocated and freed: not the pool's */
    return GA_OK;
}

ga_status_t ga_vmm_alloc(ga_pool_t *p, size_t size, uintptr_t *out);

/* A block placed at a in area ar that would map a granule while blocks are parked: the block
 * goes back to its area, every parked block is really freed (their granules kept or given back),
 * and the allocation is placed again from the start, now with nothing parked (so with no second
 * return here). Mapped memory thus grows only when no parked block could have served. */
static OUT_OF_LINE ga_status_t alloc_unparked(ga_pool_t *p, ga_varea_t *ar, uintptr_t a,
                                              uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    size_t size = ga_live_find_made(&v->ltab, a)->u.requested;
    area_free(v, ar, a);
    v->undone++;
    ga_vmm_unpark_all(p);
    return ga_vmm_alloc(p, size, out);
}

/* The allocation's figures, once it is placed and covered (the count of allocations is its
 * area's: ga_vmm_t's `allocs`). */
static inline void count_alloc(ga_pool_t *p, size_t rounded)
{
    ga_stats_t *s = &p->own;
    s->in_use += rounded;
    if (s->in_use > s->peak_in_use)
        s->peak_in_use = s->in_use;
}

/* A block of no granule multiple whose granules at a in area ar were refused (the cap, the device,
 * a map): given back, and placed instead where a class of another size has room for it on
 * granules all mapped, when one has (the classes are tried in order; the general area was tried
 * first where it maps fewer granules: place_tried, fresh_choose). Without it such a request was
 * an out-of-memory while the bytes it needed lay free and mapped in another size's class (under a
 * 10 MiB cap, three 3 MiB blocks left 1 MiB free in their class's last granule, and 1 MiB was
 * refused: an outside check, helper-127 F1, 2026-12-07). The class then holds a block of another
 * size, counted by its own size's entry (count_free). Else an out-of-memory, nothing changed. */
static OUT_OF_LINE ga_status_t alloc_refused(ga_pool_t *p, ga_varea_t *ar, int slot, uintptr_t a,
                                             size_t rounded, uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    size_t size = ga_live_find_made(&v->ltab, a)->u.requested;
    area_free(v, ar, a);
    v->undone++;
    for (size_t id = AREA_FIRST_CLASS; (rounded & v->gmask) && id < v->nareas; id++) {
        ga_varea_t *cl = &v->area[id];
        unsigned bin = 0;
        ga_chunk_t *c = id != ar->id && cl->arena ? ga_find_fit(cl->arena, rounded, &bin) : NULL;
        if (!c || unmapped_in(v, c->base, rounded) != 0)
            continue;
        uintptr_t b = c->base;
        if (ga_take_in(cl->arena, &v->ltab, 1, id, c, bin, rounded, size) != GA_OK)
            break;
        mark_dirty(v, cl);
        if (cover(p, b, rounded) != 0) { /* all mapped: cannot be; as a refusal */
            area_free(v, cl, b);
            v->undone++;
            break;
        }
        if (slot >= 0)
            v->track[slot].nlive++;
        count_alloc(p, rounded);
        *out = b;
        return GA_OK;
    }
    p->own.failed_allocs++;
    return GA_ENOMEM;
}

/* A block placed at `a` in area ar: its granules taken (a refusal gives the block back to the
 * area and is an out-of-memory), its size's live count and the figures kept. */
static inline __attribute__((always_inline)) ga_status_t
cover_placed(ga_pool_t *p, ga_varea_t *ar, int slot, uintptr_t a, size_t rounded, uintptr_t *out)
{
    int rc = ar->id == AREA_ALIGNED ? ga_vmm_cover_whole(p, a, rounded) : cover(p, a, rounded);
    if (rc != 0) {
        if (rc == GA_VMM_UNPARK)
            return alloc_unparked(p, ar, a, out);
        return alloc_refused(p, ar, slot, a, rounded, out);
    }
    if (slot >= 0)
        p->vmm->track[slot].nlive++;
    count_alloc(p, rounded);
    *out = a;
    return GA_OK;
}

#endif
