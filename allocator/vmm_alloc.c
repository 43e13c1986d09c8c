/* gpuarena vmm pool: placement and allocation. pool_vmm.c's head comment says how the pool works
 * (the areas, the granules, the kept cache); this file chooses a block's area and place, takes
 * its granules (mapping through vmm_granules.c where some are unmapped) and counts it: the
 * paths, parked blocks taken back (alloc_parked) and the pending free's allocation (alloc_pend).
 * Taking a placed block's granules and counting what a place would take new (cover_placed,
 * fresh_in and their helpers) are in vmm_cover.h, a header so that they inline here as before.
 * The free paths, the pool's making and its areas' backends are in pool_vmm.c.
 *
 * The paths are split by what they do, each entered by a jump from ga_vmm_alloc before a frame
 * is set up (scripts/bench-pool-instr.sh and scripts/bench-shim-instr.sh count them): a size
 * under half a granule (alloc_small), a granule multiple (alloc_aligned), a size of 3 granules
 * or more (alloc_general), and the sizes that may have a class (alloc_slow).
 */
#include <stdint.h>

#include "vmm_internal.h"
#include "vmm_cover.h" /* a placed block's granules: taken, or counted to choose a place */
#include "vmm_held.h"  /* the general area's parked blocks kept past an allocation */

/* A block the fast path of ga_vmm_alloc placed in the general area that maps or reuses a
 * granule, or lies outside the first range. */
static OUT_OF_LINE ga_status_t alloc_cover(ga_pool_t *p, size_t rounded, uintptr_t a,
                                           uintptr_t *out)
{
    return cover_placed(p, &p->vmm->area[AREA_GENERAL], -1, a, rounded, out);
}

/* A best fit the area's arena found could not be taken (out of host memory): as ga_alloc fails. */
static OUT_OF_LINE ga_status_t take_failed(ga_pool_t *p, ga_varea_t *ar, size_t rounded)
{
    (void)rounded;
    ga_fail_nohost(ar->arena);
    mark_dirty(p->vmm, ar);
    p->own.failed_allocs++;
    return GA_ENOHOST;
}

/* A block of a class or the aligned area whose best fit there, chunk c (of bin `bin`), maps new
 * granules or lies outside the first range: the choice place_tried makes, from the two areas'
 * best fits found but not yet taken, so that neither the losing area's block nor its free is
 * paid for (an allocation and a free in an arena, about 300 instructions, on every such block).
 * Finding a best fit changes nothing and taking it is what the allocation would do, so the block
 * lands where it did with the trial. Only when the general area has no fit (it would grow, and a
 * region it takes may come from the own area's empty ones) is the own block taken first and the
 * trial made as before. */
static inline __attribute__((always_inline)) ga_status_t
fresh_choose(ga_pool_t *p, ga_varea_t *ar, int slot, ga_chunk_t *c, unsigned bin, size_t size,
             size_t rounded, uintptr_t *out, size_t fresh, ga_varea_t *gen, ga_chunk_t *gc,
             unsigned gbin)
{
    ga_vmm_t *v = p->vmm;
    uintptr_t a = c->base;
    mark_dirty(v, ar);
    if (gc && fresh_in(p, gc->base, rounded) < fresh &&
        ga_take_in(gen->arena, &v->ltab, 1, AREA_GENERAL, gc, gbin, rounded, size) == GA_OK) {
        mark_dirty(v, gen);
        ar->unmapped_fit = ar->size != 0; /* unchanged: alloc_slow may skip its fit next time */
        return cover_placed(p, gen, slot, gc->base, rounded, out);
    }
    if (ga_take_in(ar->arena, &v->ltab, 1, ar->id, c, bin, rounded, size) != GA_OK)
        return take_failed(p, ar, rounded);
    if (gen && !gc)
        place_tried(p, &ar, size, rounded, &a, GA_OK); /* GA_OK whatever it chooses */
    return cover_placed(p, ar, slot, a, rounded, out);
}

static OUT_OF_LINE ga_status_t alloc_fresh(ga_pool_t *p, ga_varea_t *ar, int slot, ga_chunk_t *c,
                                           unsigned bin, size_t size, size_t rounded,
                                           uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    size_t fresh = fresh_in(p, c->base, rounded);
    ga_varea_t *gen = fresh ? area_ready(v, AREA_GENERAL) : NULL;
    unsigned gbin = 0;
    ga_chunk_t *gc = gen ? ga_find_fit(gen->arena, rounded, &gbin) : NULL;
    return fresh_choose(p, ar, slot, c, bin, size, rounded, out, fresh, gen, gc, gbin);
}

/* A block for area ar that its arena has no best fit for yet (it grows, or fails), or any block of
 * the general area from alloc_slow: the allocation first, as ga_alloc, and the placement from its
 * answer. Out of line, so that the callers' fast paths take no local's address. */
static OUT_OF_LINE ga_status_t alloc_first(ga_pool_t *p, ga_varea_t *ar, int slot, size_t size,
                                           size_t rounded, uintptr_t *out)
{
    uintptr_t a = 0;
    ga_status_t st = ga_alloc_short_in(ar->arena, &p->vmm->ltab, 1, ar->id, size, &a);
    /* The general area's own blocks have no trial to make, and the area is always dirty: no call
     * (26 instructions on each, ex_train's activations). */
    if (ar->id != AREA_GENERAL)
        st = place_tried(p, &ar, size, rounded, &a, st);
    if (st != GA_OK) {
        p->own.failed_allocs++;
        return st == GA_ENOHOST ? st : GA_ENOMEM;
    }
    return cover_placed(p, ar, slot, a, rounded, out);
}

/* A block of the general area from alloc_slow (from half a granule up, of a size with no class):
 * as alloc_small, its granules taken inline when it lies in the first range on mapped ones. */
static inline __attribute__((always_inline)) ga_status_t
alloc_general_body(ga_pool_t *p, int slot, size_t size, size_t rounded, uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    uintptr_t a;
    ga_status_t st = ga_alloc_short_in(v->area[AREA_GENERAL].arena, &v->ltab, 1, AREA_GENERAL,
                                       size, &a);
    if (st != GA_OK) {
        p->own.failed_allocs++;
        return st == GA_ENOHOST ? st : GA_ENOMEM;
    }
    size_t off = a - v->base0;
    if (off < v->size0 && cover_kept(p, v, v->ranges, off >> v->gshift,
                                     (off + rounded - 1) >> v->gshift)) {
        if (slot >= 0)
            v->track[slot].nlive++;
        count_alloc(p, rounded);
        *out = a;
        return GA_OK;
    }
    return cover_placed(p, &v->area[AREA_GENERAL], slot, a, rounded, out);
}

/* The general area's path for a size a class may track (alloc_in: its live count in `slot`). */
static OUT_OF_LINE ga_status_t alloc_general(ga_pool_t *p, int slot, size_t size, size_t rounded,
                                             uintptr_t *out)
{
    return alloc_general_body(p, slot, size, rounded, out);
}

/* The same for a size no class tracks (3 granules and more, no multiple: alloc_large,
 * alloc_gen_parked): with no slot, its test and the register it held are gone
 * (scripts/bench-patterns-instr.sh build pool, vmm: alt2-large 583 -> 577 a pair, alt2-mix
 * 546 -> 542, step 466 -> 465, one-odd7m 337 -> 338). */
static OUT_OF_LINE ga_status_t alloc_general_alone(ga_pool_t *p, size_t size, size_t rounded,
                                                   uintptr_t *out)
{
    return alloc_general_body(p, -1, size, rounded, out);
}

/* A class block whose class's best fit lies on unmapped granules, found so by alloc_fresh with
 * the class unchanged since (no allocation, free or trim there: its best fit is the same chunk,
 * with no granule mapped there since): when the general area's best fit maps nothing, the block
 * goes there, as alloc_fresh would choose (fewer new granules), without the class's fit found
 * again (ex_train's gradients, every step: 16 of its 96 allocations). Otherwise as before. */
static OUT_OF_LINE ga_status_t alloc_general_first(ga_pool_t *p, ga_varea_t *ar, int slot,
                                                   size_t size, size_t rounded, uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    ga_varea_t *gen = area_ready(v, AREA_GENERAL);
    unsigned gbin = 0, bin = 0;
    ga_chunk_t *gc = gen ? ga_find_fit(gen->arena, rounded, &gbin) : NULL;
    size_t off = gc ? gc->base - v->base0 : 0, g0 = off >> v->gshift;
    size_t g1 = (off + rounded - 1) >> v->gshift;
    if (gc && off < v->size0 && one_word(g0, g1) && !tight(p)) {
        /* The common case, in the first range within one bitmap word: its granules tested and
         * then taken with the words and granule numbers found once, as cover_placed would take
         * them, with nothing to map (the general area is always dirty: no mark). Through
         * unmapped_in and cover_placed it cost ~24 instructions more a block (trace:ex.trace at
         * the pool, vmm: 589 -> 583 a pair, somas_resnet50 641 -> 638,
         * scripts/bench-patterns-instr.sh). */
        uint64_t m = span_mask(g0, g1);
        if ((v->ranges->mapped[g0 >> 6] & m) == m &&
            ga_take_in(gen->arena, &v->ltab, 1, AREA_GENERAL, gc, gbin, rounded, size) == GA_OK) {
            uintptr_t a = gc->base;
            (void)cover_kept(p, v, v->ranges, g0, g1); /* all mapped, one word: done */
            if (slot >= 0)
                v->track[slot].nlive++;
            count_alloc(p, rounded);
            *out = a;
            return GA_OK;
        }
    } else if (gc && fresh_in(p, gc->base, rounded) == 0 &&
               ga_take_in(gen->arena, &v->ltab, 1, AREA_GENERAL, gc, gbin, rounded, size) ==
                   GA_OK) {
        mark_dirty(v, gen);
        return cover_placed(p, gen, slot, gc->base, rounded, out);
    }
    ga_chunk_t *c = ga_find_fit(ar->arena, rounded, &bin);
    if (!c) /* cannot be while the mark holds; as alloc_slow would */
        return alloc_first(p, ar, slot, size, rounded, out);
    size_t fresh = fresh_in(p, c->base, rounded); /* >= 1 while the mark holds */
    return fresh_choose(p, ar, slot, c, bin, size, rounded, out, fresh, fresh ? gen : NULL, gc,
                        gbin);
}

/* A block of class ar (its arena made; its best fit not known to map), slot: its size's tracking
 * entry. Out of line, apart from the area's choice: its locals' addresses (the best fit's bin)
 * and calls need a frame, which a block going to the general area does not pay for. */
static OUT_OF_LINE ga_status_t alloc_class(ga_pool_t *p, ga_varea_t *ar, int slot, size_t size,
                                           size_t rounded, uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    unsigned bin = 0;
    ga_chunk_t *c = ga_find_fit(ar->arena, rounded, &bin);
    if (!c) /* a class that grows */
        return alloc_first(p, ar, slot, size, rounded, out);
    uintptr_t a = c->base; /* the class's best fit, taken below once the area is settled */
    size_t off = a - v->base0;
    if (off < v->size0) {
        /* A class's block in the first range on granules all mapped: nothing new to map, so no
         * trial in the general area (place_tried would make none) and nothing the limit sees. */
        ga_vrange_t *r = v->ranges;
        size_t g0 = off >> v->gshift, g1 = (off + rounded - 1) >> v->gshift;
        int shared = g0 == g1 && r->refs[g0]; /* inside a granule a live block uses: mapped */
        /* Near the cap (tight()) granules all in use, not all mapped: kept ones are the
         * choice's to weigh (fresh_in). */
        if (shared || (bits_all(r->mapped, g0, g1) &&
                       (!tight(p) || (g1 == g0 + 1 && r->refs[g0] && r->refs[g1])))) {
            if (ga_take_in(ar->arena, &v->ltab, 1, ar->id, c, bin, rounded, size) != GA_OK)
                return take_failed(p, ar, rounded);
            mark_dirty(v, ar);
            if (shared) {
                r->refs[g0]++;
            } else {
                size_t u0 = g0 + (r->refs[g0] != 0), u1 = g1 - (g1 != g0 && r->refs[g1] != 0);
                take_mapped(p, r, g0, g1, u0 <= u1 ? (uint64_t)(u1 - u0 + 1) << v->gshift : 0);
            }
            v->track[slot].nlive++;
            count_alloc(p, rounded);
            *out = a;
            return GA_OK;
        }
    }
    return alloc_fresh(p, ar, slot, c, bin, size, rounded, out);
}

/* The path of a block in area ar (its arena made), once the area is chosen: the general area's
 * own way for a size with no class, alloc_general_first for a class whose best fit is known to
 * map, alloc_class for the rest. */
static inline __attribute__((always_inline)) ga_status_t
alloc_in(ga_pool_t *p, ga_varea_t *ar, int slot, size_t size, size_t rounded, uintptr_t *out)
{
    if (ar->unmapped_fit) /* the class's best fit would map: the general area's may not */
        return alloc_general_first(p, ar, slot, size, rounded, out);
    if (!ar->size) /* the general area: a size seen alone */
        return alloc_general(p, slot, size, rounded, out);
    return alloc_class(p, ar, slot, size, rounded, out);
}

/* alloc_choose's area `id` has no arena yet: made first (NULL when host memory ran out). */
static OUT_OF_LINE ga_status_t alloc_new_area(ga_pool_t *p, uint16_t id, int slot, size_t size,
                                              size_t rounded, uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    ga_varea_t *ar = area_ready(v, id);
    if (!ar) { /* its area's arena could not be made */
        p->own.failed_allocs++;
        return GA_ENOHOST;
    }
    if (ar->size)
        v->hot_size = rounded, v->hot_area = ar->id, v->hot_slot = slot;
    return alloc_in(p, ar, slot, size, rounded, out);
}

/* alloc_choose's size of tracking entry `slot` gets its class (a second block of it while one is
 * live), made here, and the block is placed in it. Out of line: inline, the class's making made
 * alloc_choose save and restore three registers on every call, for work done once a class (sizes40
 * at the pool, vmm: 644 -> 640 a pair, step 467 -> 466, scripts/bench-patterns-instr.sh). */
static OUT_OF_LINE ga_status_t alloc_promote(ga_pool_t *p, int slot, size_t size, size_t rounded,
                                             uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    uint16_t c = (uint16_t)v->nareas++;
    v->area[c] = (ga_varea_t){.pool = v->pool, .size = rounded, .id = c, .slot = (uint16_t)slot};
    v->track[slot].area = c;
    return alloc_new_area(p, c, slot, size, rounded, out); /* its arena is made at first use */
}

/* A size that is not the last class allocated in (alloc_slow), or any size before the general
 * area's first use: its area chosen. The size's tracking entry is found inline, and the general
 * area's own blocks (a class size seen alone) then jump to alloc_general with no frame set up:
 * with area_for's slot returned through memory and the class's fit found here, every such
 * block paid a frame (sizes40 at the pool, vmm: 660 -> 647 a pair with alloc_slow's jump, step
 * 479 -> 475, scripts/bench-patterns-instr.sh). A size gets a class when a
 * second block of it is asked for while one is live (while fewer than GA_VMM_CLASSES have one):
 * sizes that never coexist, such as a layer's activations in a training step, stay in the
 * general area, where their freed granules serve other sizes. No size here is a granule
 * multiple (alloc_large), but 0. */
static OUT_OF_LINE ga_status_t alloc_choose(ga_pool_t *p, size_t size, size_t rounded,
                                            uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    int slot = -1;
    uint16_t id = AREA_GENERAL;
    if (!class_size(v, rounded)) {
        /* A size of no class, 0 (too large, or none) among them: tested here only (sizes40 at
         * the pool, vmm: 637 -> 635 a pair, step 465 -> 464, scripts/bench-patterns-instr.sh). */
        if (!rounded)
            return size ? GA_ETOOBIG : GA_EINVAL;
    } else if ((slot = ga_vmm_track_find(v, rounded, 1)) >= 0) {
        /* The live count first: a size seen alone (none live) is out in one test (sizes40 at
         * the pool, vmm: 649 -> 647 a pair, scripts/bench-patterns-instr.sh). */
        if (v->track[slot].nlive && !v->track[slot].area && v->nareas < AREAS_MAX)
            return alloc_promote(p, slot, size, rounded, out);
        id = v->track[slot].area;
    }
    ga_varea_t *ar = &v->area[id];
    if (!ar->arena)
        return alloc_new_area(p, id, slot, size, rounded, out);
    /* The general area (never unmapped_fit): a size seen alone, to alloc_general before the last
     * class's figures are touched (sizes40 640 -> 637, step 466 -> 465). */
    if (!ar->size)
        return alloc_general(p, slot, size, rounded, out);
    v->hot_size = rounded, v->hot_area = id, v->hot_slot = slot;
    return alloc_in(p, ar, slot, size, rounded, out);
}

/* The sizes that may have a class: the last class allocated in (hot_size) goes to its path by a
 * jump before any frame, with nothing looked up; the rest choose their area (alloc_choose). Half
 * the class-size allocations of ex_train's loop are of the last class, its best fit known to map
 * (its 1 MiB blocks: alloc_general_first): the frame the choice set up cost them 16 instructions
 * (trace:ex.trace at the pool, vmm: 596 -> 591 a pair, scripts/bench-patterns-instr.sh). The
 * last class is never the general area (hot_size 0 before any class: a rounded size of 0 finds
 * the general area, whose size is 0). */
static OUT_OF_LINE ga_status_t alloc_slow(ga_pool_t *p, size_t size, size_t rounded,
                                          uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    if (rounded == v->hot_size) {
        ga_varea_t *ar = &v->area[v->hot_area];
        if (ar->unmapped_fit)
            return alloc_general_first(p, ar, v->hot_slot, size, rounded, out);
        if (ar->size)
            return alloc_class(p, ar, v->hot_slot, size, rounded, out);
    }
    return alloc_choose(p, size, rounded, out);
}

/* A granule multiple (the aligned area). Its blocks start and end on granule boundaries and
 * share no granule, so when the one its area's best fit gives lies in the first range on granules
 * all still mapped (kept since a block there was freed: a training step's large buffers), the
 * block takes them in a few word operations: no area choice, no second best fit, nothing mapped.
 * Otherwise the placement goes on as alloc_slow's would from the same first answer. */
static OUT_OF_LINE ga_status_t alloc_aligned(ga_pool_t *p, size_t size, size_t rounded,
                                             uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    ga_varea_t *ar = &v->area[AREA_ALIGNED]; /* made with the pool */
    unsigned bin = 0;
    ga_chunk_t *c = ga_find_fit(ar->arena, rounded, &bin);
    if (!c) /* the area grows */
        return alloc_first(p, ar, -1, size, rounded, out);
    uintptr_t a = c->base; /* the area's best fit, taken below once the area is settled */
    size_t off = a - v->base0;
    if (off < v->size0) {
        ga_vrange_t *r = v->ranges;
        size_t g0 = off >> v->gshift, n = rounded >> v->gshift;
        /* No other user there: every granule a kept one. Granules in one bitmap word (a block
         * of up to 64, nearly always) are tested and taken with one mask; a block across words
         * takes alloc_fresh's way, which with nothing to map places it here all the same. */
        if (run_one_word(g0, n) && !tight(p)) { /* near the cap: the choice (fresh_in) */
            uint64_t m = run_mask(g0, n);
            if ((r->mapped[g0 >> 6] & m) == m) {
                /* The granules first, taken back if the take fails: nothing is then kept in
                 * registers across it (the mask and word were saved and reloaded: 4 a pair). */
                r->inner[g0 >> 6] |= m;
                p->own.kept -= rounded;
                if (ga_take_in(ar->arena, &v->ltab, 1, AREA_ALIGNED, c, bin, rounded, size) !=
                    GA_OK) {
                    r->inner[g0 >> 6] &= ~m;
                    p->own.kept += rounded;
                    return take_failed(p, ar, rounded);
                }
                count_alloc(p, rounded);
                *out = a;
                return GA_OK;
            }
        }
    }
    return alloc_fresh(p, ar, -1, c, bin, size, rounded, out);
}

/* The common case is kept to what arena mode does plus one granule count: a size under half a
 * granule (neither a multiple nor a class) goes to the general area with nothing looked up, and
 * when it lands in the first range inside one granule another live block uses, nothing is
 * mapped. The general area is always reread for statistics (refresh_seen), so nothing is marked
 * here either. A block that maps or reuses a granule takes alloc_cover. Its best fit is found
 * here (ga_alloc, inlined), or given (fit, its bin) by alloc_gen_parked. */
static inline __attribute__((always_inline)) ga_status_t
alloc_small_at(ga_pool_t *p, size_t size, ga_chunk_t *fit, unsigned fit_bin, uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    size_t rounded = ga_round_up(size); /* 1 <= size <= small_lim: no overflow; the arena's own */
    v->small_prev = v->small_last;
    v->small_last = rounded;
    uintptr_t a; /* set on GA_OK, the only answer it is read after (no store of 0: 1 a pair) */
    ga_arena_t *gen = v->area[AREA_GENERAL].arena;
    ga_status_t st = fit ? ga_alloc_short_at(gen, &v->ltab, 1, AREA_GENERAL, fit, fit_bin, size,
                                             &a)
                         : ga_alloc_short_in(gen, &v->ltab, 1, AREA_GENERAL, size, &a);
    if (st != GA_OK) {
        p->own.failed_allocs++;
        return st == GA_ENOHOST ? st : GA_ENOMEM;
    }
    size_t off = a - v->base0, g0 = off >> v->gshift, g1 = (off + rounded - 1) >> v->gshift;
    uint32_t *refs = v->refs0;
    if (__builtin_expect(off < v->size0 && g0 == g1, 1)) {
        if (__builtin_expect(refs[g0] != 0, 1)) {
            refs[g0]++;
        } else if ((v->mapped0[g0 >> 6] >> (g0 & 63)) & 1) { /* a kept granule */
            refs[g0] = 1;
            p->own.kept -= v->gran;
        } else {
            return alloc_cover(p, rounded, a, out);
        }
    } else if (off < v->size0 && refs[g0] && refs[g1]) {
        /* Across two granules (g1 is g0 + 1) that others use: their two counts, as alloc_cover
         * would (with free_small's the same, free_general_body's until 2026-12-07: 16 blocks of
         * 1 MiB - 512 B, under-16 in scripts/bench-patterns-instr.sh, 411 -> 339 instructions a
         * pair, arena 271). */
        refs[g0]++;
        refs[g1]++;
    } else {
        return alloc_cover(p, rounded, a, out);
    }
    count_alloc(p, rounded);
    *out = a;
    return GA_OK;
}
static OUT_OF_LINE ga_status_t alloc_small(ga_pool_t *p, size_t size, uintptr_t *out)
{
    return alloc_small_at(p, size, NULL, 0, out);
}

/* The path of an allocation from half a granule up (rounded: its size rounded, maybe 0). */
static inline __attribute__((always_inline)) ga_status_t alloc_large(ga_pool_t *p, size_t size,
                                                                     size_t rounded,
                                                                     uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    /* The multiple test first, the test of 0 (an overflow) only for multiples: one test less on
     * every other size (alt2-large 574 -> 573 a pair, park20-2m 233 -> 232, step, one-odd7m,
     * one-1m, sizes40, alt2-class, ex_train's trace each -1; scripts/bench-patterns-instr.sh). */
    if (!(rounded & v->gmask))
        return rounded ? alloc_aligned(p, size, rounded, out) : alloc_slow(p, size, rounded, out);
    if (rounded >= v->general_cut) /* 3 granules or more, no multiple: the general area's, as
                                    * alloc_slow would say after looking the size up */
        return alloc_general_alone(p, size, rounded, out);
    return alloc_slow(p, size, rounded, out);
}

/* Parked block c of area ar, the top of entry k, taken back for an allocation of `size` bytes: its
 * entry, mark and counts (its area's requested bytes become the new request's). */
static inline __attribute__((always_inline)) void unpark(ga_vmm_t *v, ga_vpark_t *k,
                                                         ga_chunk_t *c, size_t area, size_t size)
{
    if (!--k->n)
        park_vacate(v, k);
    park_leave(v, c, area);
    if (area == AREA_GENERAL)
        v->gwaste = 0, v->gstep = GSTEP_MIN; /* parking there served */
    v->park_hits++;
    if (c->u.requested != size) {
        ga_varea_t *ar = &v->area[area];
        ar->arena->stats.in_use_requested += size - c->u.requested; /* wraps back if smaller */
        c->u.requested = size;
        mark_dirty(v, ar);
    }
}

/* An allocation that no parked block serves while the general area has some: they stay parked
 * where it lands as if they were given back (gen_fit_stands), else they are given back first
 * and it is placed as if they were freed, whatever its size. Out of line: inlined in
 * alloc_parked, a parked block taken back cost 17 instructions a pair more (one-1m). */
static OUT_OF_LINE ga_status_t alloc_gen_parked(ga_pool_t *p, size_t size, size_t rounded,
                                                uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    ga_chunk_t *f;
    unsigned bin;
    int stands = gen_fit_stands_at(p, size, rounded, 1, &f, &bin);
    if (stands) {
        if (stands == 2) /* after gen_fit_stands: its memory is read only while held() */
            v->park_at = 0;
        /* A small block takes the fit found, not found twice: bench-patterns' step, its 4 small
         * allocations a round, 434 -> 416 a pair at the pool (423 out of line). */
        return size - 1 < v->small_lim ? alloc_small_at(p, size, f, bin, out)
                                       : alloc_general_alone(p, size, rounded, out);
    }
    ga_vmm_unpark_general(p);
    return ga_vmm_alloc(p, size, out);
}

/* Whether a block of `rounded` bytes at `base` crosses one granule boundary more than its size
 * needs (it holds a granule more than a block placed afresh). A parked block of the general area
 * that would, taken back where it lies, is placed as if the parked blocks were
 * freed instead while the room under the pool's limit is under the keep (tight()): near the cap
 * that granule is a block fewer before an out-of-memory (an outside check, helper-135 F1: a 1.5 MiB
 * block placed after a 7 MiB + 4 KiB one, both parked, taken back across two granules; under a
 * 16 MiB cap 9 blocks of 1.5 MiB fit where 10 do with no keep). Far from the cap a granule held a
 * while is what the keep allows, and taking the block back stays the cheaper way (two class sizes
 * taking turns, at the pool: 338 instructions a pair, 488 when such blocks were given back every
 * time; scripts/bench-patterns-instr.sh build pool -- alt2-class). */
static inline int straddles(const ga_vmm_t *v, uintptr_t base, size_t rounded)
{
    return ((base + rounded - 1) >> v->gshift) - (base >> v->gshift) > ((rounded - 1) >> v->gshift);
}

/* Parked block c, the top of entry k, taken back for an allocation of `size` bytes (alloc_parked,
 * alloc_parked_moved): its size's live count, unless a class now wants it placed afresh. */
static inline __attribute__((always_inline)) ga_status_t
alloc_parked_at(ga_pool_t *p, ga_vpark_t *k, ga_chunk_t *c, size_t size, size_t rounded,
                uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    size_t area = c->u.area & ~GA_AREA_PARKED;
    if (area != AREA_ALIGNED) {
        ga_varea_t *ar = &v->area[area];
        if (ar->size == rounded) {
            v->track[ar->slot].nlive++;
        } else if (area == AREA_GENERAL ? c->u.slot >= 0 : class_size(v, rounded)) {
            /* a general-area block's entry, found when it was parked (park) */
            int slot = area == AREA_GENERAL ? c->u.slot : ga_vmm_track_find(v, rounded, 0);
            /* A general-area block of a size that has a class not known to map for it: placed
             * as if the parked blocks were freed, so that the class takes it when it has room
             * on mapped granules (four 1.5 MiB blocks, the first placed before the class was
             * made, held 4 granules instead of 3 when it was taken back where it lay). A block
             * in another size's class is taken back: given back, it was found again for ever. */
            if (area == AREA_GENERAL && slot >= 0 && v->track[slot].area &&
                !v->area[v->track[slot].area].unmapped_fit) {
                ga_vmm_unpark_general(p);
                return ga_vmm_alloc(p, size, out);
            }
            if (slot >= 0)
                v->track[slot].nlive++;
        }
    }
    unpark(v, k, c, area, size);
    count_alloc(p, rounded);
    *out = c->base;
    return GA_OK;
}

/* Taken back unless near the cap it would hold a granule more than its size needs (straddles),
 * or while held() it does not lie where the allocation would land (held_serves): then placed as if
 * the general area's parked blocks were freed. Out of line: alloc_parked's one compare of the
 * reserved bytes with park_at sends both cases here. */
static OUT_OF_LINE ga_status_t alloc_parked_moved(ga_pool_t *p, ga_vpark_t *k, ga_chunk_t *c,
                                                  size_t size, size_t rounded, uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    if ((tight(p) && straddles(v, c->base, rounded)) ||
        (held(v) && !held_serves(p, c, rounded, 1))) {
        ga_vmm_unpark_general(p);
        return ga_vmm_alloc(p, size, out);
    }
    return alloc_parked_at(p, k, c, size, rounded, out);
}

/* An allocation from half a granule up while blocks are parked: the last parked block of its
 * rounded size, taken back where it lies. It held its granules while parked (mapped, and counted
 * as used), so nothing is covered and nothing is looked up but its size's live count. */
static OUT_OF_LINE ga_status_t alloc_parked(ga_pool_t *p, size_t size, size_t rounded,
                                            uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    ga_vpark_t *k = park_find(v, rounded, 0);
    if (!k->n) { /* none of its size parked */
        if (!v->ngparked)
            return alloc_large(p, size, rounded, out);
        return alloc_gen_parked(p, size, rounded, out);
    }
    ga_chunk_t *c = k->c[k->n - 1];
    size_t area = c->u.area & ~GA_AREA_PARKED;
    /* Near the cap, a general-area block that would hold a granule more than its size needs
     * (straddles), and while held() one that does not lie where the allocation would land, is
     * placed as if the parked blocks were freed: both tested in one compare (park_at). */
    if (__builtin_expect(p->own.reserved >= v->park_at, 0) && area == AREA_GENERAL)
        return alloc_parked_moved(p, k, c, size, rounded, out);
    return alloc_parked_at(p, k, c, size, rounded, out);
}

/* An allocation while a general-area block's free is pending (pool_vmm.c, pend_hold): where
 * the free and a best fit would place it at that block's base, the block takes it with its size
 * changed in place; else the free is finished and the allocation made as usual. The place is
 * the best fit's when the block's previous neighbour is not free (its free would merge nothing
 * before it) and the chunk the free would leave, the block and its free next neighbour (of the
 * same run, taking its place as the remainder, as the split would take that struct back) or
 * the block alone of exactly the size, is the smallest fitting one: nothing fits now, or what
 * fits best now is larger (or as large and after it), or is that neighbour and alone in its
 * bin with every bin above empty. Its figures are then a free's and an allocation's; its
 * granules were given back at the free, and are taken as the allocation's would be; where the
 * free left them as they were (pend_gran: the block alone in them, all kept), only what the new
 * span changes (cover_resized). */
static OUT_OF_LINE ga_status_t alloc_pend(ga_pool_t *p, size_t size, size_t rounded,
                                          uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    ga_chunk_t *c = v->pend, *n = c->next_phys, *prev = c->prev_phys;
    int small = size - 1 < v->small_lim;
    if (v->ngparked || !(small || (rounded >= v->general_cut && (rounded & v->gmask))) ||
        (prev && ga_is_free(prev)))
        goto finish;
    ga_arena_t *a = v->area[AREA_GENERAL].arena;
    size_t old = c->size;
    int nfree = n && ga_is_free(n) && ga_chunk_run(n) == ga_chunk_run(c);
    size_t m = old + (nfree ? n->size : 0);
    if (nfree ? rounded >= m : rounded != m)
        goto finish;
    unsigned nb = nfree ? ga_bin_of(n->size) : 0;
    const ga_rbnode_t *nd = nfree ? &n->u.bin_node : NULL;
    int alone = nfree && a->bins[nb].t.root == nd && !nd->left && !nd->right;
    /* The neighbour the area's only free chunk (its bin's only one, and no other bin marked: a
     * first-level bit left stale only sends this to the search) is the common case of a slot at
     * the area's end: the free would leave one free chunk, the best fit. Else the search says.
     * With no free neighbour (the block of exactly the size), a free chunk that fits as tightly
     * is of that very size, in the size's own bin (the second-level bits are exact): that bin
     * empty, every fit is larger and the block is the best fit, with no search (16 blocks of
     * 1 MiB - 512 B freed and allocated again in turn, under-16 at the pool: 324 -> 282 a pair,
     * arena 271; scripts/bench-patterns-instr.sh). */
    int only = alone && a->fl_bitmap == ga_bit_set(0, nb / GA_SL_COUNT) &&
               a->sl_bitmap[nb / GA_SL_COUNT] == ga_bit_set(0, nb); /* bts: nb mod 64 */
    if (!only && (nfree || ga_bin_marked(a, ga_bin_of(rounded)))) { /* only: nfree */
        unsigned bin = 0;
        ga_chunk_t *f = ga_find_fit(a, rounded, &bin);
        if (f == n && nfree) {
            if (!alone || ga_next_bin(a, bin) >= 0)
                goto finish;
        } else if (f && !(m < f->size || (m == f->size && c->base < f->base))) {
            goto finish;
        }
    }
    if (nfree && rounded != old) { /* the remainder: the neighbour, its start moved */
        size_t rest = m - rounded;
        unsigned nb2 = alone ? ga_bin_of(rest) : nb;
        if (alone && (nb2 == nb || only)) {
            n->base = c->base + rounded; /* alone in its bin, which stays its: no new order */
            n->size = rest;
            if (nb2 != nb) /* the area's only free chunk: its bin's and the marks' words set */
                ga_bin_move_only(a, n, nb, nb2);
        } else {
            ga_bin_remove_at(a, n, nb);
            n->base = c->base + rounded;
            n->size = rest;
            ga_bin_insert(a, n);
        }
        c->size = rounded;
    }
    ga_stats_t *s = &a->stats;
    s->frees++;
    s->allocs++;
    s->in_use += rounded - old; /* wraps back if smaller */
    s->in_use_requested += size - c->u.requested;
    c->u.requested = size;
    c->u.area = AREA_GENERAL; /* its parked mark (pend_hold) gone */
    v->pend = NULL;
    v->pend_step = 1;
    v->small_cut = v->small_lim; /* ngparked is 0 */
    if (small) {
        v->small_prev = v->small_last;
        v->small_last = rounded;
    }
    uintptr_t b = c->base;
    size_t off = b - v->base0;
    if (v->pend_gran ? cover_resized(p, v, off, old, rounded)
                     : off < v->size0 && cover_kept(p, v, v->ranges, off >> v->gshift,
                                                    (off + rounded - 1) >> v->gshift)) {
        count_alloc(p, rounded);
        *out = b;
        return GA_OK;
    }
    return cover_placed(p, &v->area[AREA_GENERAL], -1, b, rounded, out);
finish:
    ga_vmm_pend_finish(v);
    return ga_vmm_alloc(p, size, out);
}

/* Only chooses the path and jumps to it, before any frame is set up: a granule-multiple or class
 * block does not pay for the registers the general fast path saves (measured alone: vmm-large
 * -22 instructions a pair, small blocks -2 with the one-compare size test). The size test is on
 * the unrounded size: 1 <= size <= small_lim is exactly a rounded size under half a granule; it
 * also says the general area exists (small_cut is 0 before). */
ga_status_t ga_vmm_alloc(ga_pool_t *p, size_t size, uintptr_t *out)
{
    ga_vmm_t *v = p->vmm;
    if (size - 1 < v->small_cut)
        return alloc_small(p, size, out);
    size_t rounded = ga_pool_round(size);
    if (v->pend)
        return alloc_pend(p, size, rounded, out);
    if (v->nparked)
        return alloc_parked(p, size, rounded, out);
    return alloc_large(p, size, rounded, out);
}

/* park_find for ga_vmm_fits, with no call: with park_find's out-of-line probe (or all of it out
 * of line), the shim's allocation path, which inlines ga_vmm_fits for GPUARENA_FREE_SYNC=lazy
 * (ga_fence_before_alloc), saved one register more on every call, in every mode (arena through
 * the shim: 872 -> 874 instructions a pair, scripts/bench-patterns-instr.sh build shim --
 * alt2-large). The entry of the size's parked blocks, or one that does not hold them. */
static inline const ga_vpark_t *park_lookup(const ga_vmm_t *v, size_t rounded)
{
    const ga_vpark_t *k = &v->park[park_home(rounded)];
    for (unsigned i = 1; i < PARK_PROBE && k->n && k->size != rounded; i++)
        k++;
    return k;
}

/* Whether ga_vmm_alloc would serve size with no backend call; changes nothing a caller sees (but
 * for a size no parked block serves, the general area's parked blocks are given back first, as
 * the allocation would give them back: it answered 0 with any parked, and under
 * GPUARENA_FREE_SYNC=lazy each such allocation synchronised, helper-136 F6). Said from the place
 * the allocation would take without a choice to make: the best fit of the area the size goes to
 * (or, for a class whose own fit is known to map, the general area's, which alloc_general_first
 * takes when it maps nothing), on granules all mapped. 0 whenever the allocation would have to
 * choose (a fit that maps, a class about to be made, an area with no fit: it would grow): the
 * caller then takes the safe way. Under GPUARENA_FREE_SYNC=lazy this decides whether an
 * allocation needs the pending frees first; it said so only for sizes under half a granule, so
 * a loop of granule multiples and class sizes on kept granules synchronised at every allocation
 * (an outside check, helper-94, 2026-12-06). */
int ga_vmm_fits(ga_pool_t *p, size_t size)
{
    ga_vmm_t *v = p->vmm;
    pend_done(v);
    size_t rounded = ga_pool_round(size);
    if (!rounded)
        return 0;
    if (v->nparked) {
        const ga_vpark_t *k = park_lookup(v, rounded);
        if (k->n && k->size == rounded) { /* a parked block of its size, taken back where it
                                            * lies, on the granules it held (alloc_parked) */
            const ga_chunk_t *c = k->c[k->n - 1];
            int slot = c->u.area == (AREA_GENERAL | GA_AREA_PARKED) && class_size(v, rounded)
                       ? ga_vmm_track_find(v, rounded, 0) : -1;
            int moved = tight(p) && c->u.area == (AREA_GENERAL | GA_AREA_PARKED) &&
                        straddles(v, c->base, rounded); /* placed afresh (alloc_parked) */
            if (!moved && !(held(v) && c->u.area == (AREA_GENERAL | GA_AREA_PARKED) &&
                             !held_serves(p, c, rounded, 0)) &&
                (slot < 0 || !v->track[slot].area || v->area[v->track[slot].area].unmapped_fit))
                return 1;
        }
    }
    if (v->ngparked && !gen_fit_stands(p, size, rounded)) /* given back first, as alloc_parked
                                                            * does: the placement is then known */
        ga_vmm_unpark_general(p);
    uint16_t id = AREA_GENERAL;
    if (!(rounded & v->gmask)) {
        id = AREA_ALIGNED;
    } else if (class_size(v, rounded)) {
        int slot = ga_vmm_track_find(v, rounded, 0);
        if (slot >= 0 && v->track[slot].area)
            id = v->track[slot].area;
        else if (slot >= 0 && v->track[slot].nlive && v->nareas < AREAS_MAX)
            return 0; /* this allocation makes the size's class, empty: it grows */
    }
    uint16_t asked = id;
    if (v->area[id].unmapped_fit)
        id = AREA_GENERAL;
    ga_arena_t *ar = v->area[id].arena;
    uintptr_t a = 0;
    if (!ar || !ga_arena_fits(ar, size, &a) || !range_of(v, a))
        return 0;
    /* A block with a choice to make near the cap weighs kept granules as new (fresh_in): said
     * only where it would take this place with nothing new. */
    return (asked == AREA_GENERAL ? unmapped_in(v, a, rounded) : fresh_in(p, a, rounded)) == 0;
}

