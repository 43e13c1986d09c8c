/* gpuarena vmm pool: the general area's parked blocks kept past an allocation they did not
 * serve (vmm_alloc.c's gen_fit_stands, its answer 2): the one-chunk test and its remembered
 * answer, and the test of a block taken back while they are so kept. A header included by
 * vmm_alloc.c only, after vmm_cover.h, as that one is (so that these inline there as within
 * the file, which they would have taken past 800 lines).
 */
#ifndef GA_VMM_HELD_H
#define GA_VMM_HELD_H

#include <stdint.h>

#include "vmm_internal.h"
#include "vmm_cover.h"

/* Whether the general area's free chunks and parked blocks would make one free chunk starting
 * at c's base were the parked blocks freed: the walk on from c over free and parked chunks finds
 * every parked block and every free byte of the area (so c's previous neighbour is neither).
 * That chunk is then the only one, and so the best fit of any size it holds. While held(), the
 * answer is remembered (gw_*) as it stands after the allocation the caller makes at that start:
 * the next one, with the area's arena and parked blocks changed by nothing else, is then a few
 * compares, not a walk (a step's every allocation while its larger blocks are parked). */
static OUT_OF_LINE int gen_whole_walk(const ga_vmm_t *v, const ga_chunk_t *c)
{
    const ga_stats_t *s = &v->area[AREA_GENERAL].arena->stats;
    uint64_t free_bytes = 0;
    size_t n = 0;
    for (const ga_chunk_t *x = c; x; x = x->next_phys) {
        if (ga_is_free(x))
            free_bytes += x->size;
        else if (x->u.area & GA_AREA_PARKED)
            n++;
        else
            break;
    }
    return n == v->ngparked && free_bytes == s->reserved - s->in_use;
}
static inline int gen_whole_at(const ga_vmm_t *v, const ga_chunk_t *c)
{
    const ga_stats_t *s = &v->area[AREA_GENERAL].arena->stats;
    if (held(v) && c->base == v->gw_start && v->ngparked == v->gw_n &&
        s->allocs == v->gw_allocs && s->frees == v->gw_frees)
        return 1;
    return gen_whole_walk(v, c);
}

/* What gen_whole_at remembers once an allocation of `rounded` bytes is made at the start of that
 * one chunk: the start moved past it; `taken` 1 for a parked block taken back (one parked fewer),
 * 0 for a block the arena places (one allocation more). */
static void gen_whole_next(ga_vmm_t *v, uintptr_t start, size_t rounded, int taken)
{
    const ga_stats_t *s = &v->area[AREA_GENERAL].arena->stats;
    v->gw_start = start + rounded;
    v->gw_n = v->ngparked - (size_t)taken;
    v->gw_allocs = s->allocs + (uint64_t)!taken;
    v->gw_frees = s->frees;
}

/* Whether an allocation of `rounded` bytes at best fit f, a free chunk of the general area, lands
 * where it would with the parked blocks given back: far from the cap, on granules all mapped, at
 * the start of the one chunk (gen_whole_at); remembered for the next (`remember`). */
static inline int gen_whole_fits(ga_pool_t *p, const ga_chunk_t *f, size_t rounded, int remember)
{
    ga_vmm_t *v = p->vmm;
    if (tight(p) || unmapped_in(v, f->base, rounded) || !gen_whole_at(v, f))
        return 0;
    if (remember)
        gen_whole_next(v, f->base, rounded, 0);
    return 1;
}

/* While held(): whether general-area parked block c, taken back for `rounded` bytes, lies where
 * the allocation would land with the parked blocks given back (the general area's, for a size
 * of no class that makes none: the start of the one chunk they would make). */
static inline int held_serves(ga_pool_t *p, const ga_chunk_t *c, size_t rounded,
                               int remember)
{
    ga_vmm_t *v = p->vmm;
    int slot = c->u.slot;
    if (rounded < v->half || tight(p) ||
        (slot >= 0 && (v->track[slot].area || (v->track[slot].nlive && v->nareas < AREAS_MAX))))
        return 0;
    if (!gen_whole_at(v, c))
        return 0;
    if (remember)
        gen_whole_next(v, c->base, rounded, 1);
    return 1;
}

#endif
