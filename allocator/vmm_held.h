/* gpuarena vmm pool: the general area's parked blocks kept past an allocation they did not
 * serve (gen_fit_stands, its answer 2): that test, the one-chunk test and its remembered
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

/* Whether an allocation of `rounded` bytes that goes to the general area (under half a granule,
 * or 3 granules and more with no multiple) lands where it would with the area's parked blocks
 * given back first: 1 when the area's best fit now is smaller than every parked block, so none of
 * them, freed and merged with its free neighbours, would fit tighter, and no parked block borders
 * it, so it stays as it is. Then they stay parked: a training step's small buffers, allocated
 * while its larger ones wait parked, gave those back every time (examples/ex_train's recorded
 * loop at the pool, nothing mapped: 569 -> 532 instructions a pair, arena 439; scripts/
 * bench-patterns-instr.sh build pool -- trace:FILE). The replays' peaks are unchanged, their maps
 * within 0.3% (decomfl 3,221 -> 3,230), ex_train's 39 the same.
 * 2 when the best fit, its granules all mapped and far from the cap, is where the one chunk the
 * free chunks and parked blocks would make starts (gen_whole_at): the parked blocks stay too,
 * but each one taken back must then lie where that chunk would place it (held(), held_serves). A
 * step freed in reverse (bench-patterns' step) frees its small buffers last, between its larger
 * ones parked and the rest of the area: its first small allocation gave them all back, and the
 * gwaste that followed kept the area from parking again. */
static inline __attribute__((always_inline)) int
gen_fit_stands_at(ga_pool_t *p, size_t size, size_t rounded, int remember, ga_chunk_t **fit,
                  unsigned *fbin)
{
    ga_vmm_t *v = p->vmm;
    if (!(size - 1 < v->small_lim || (rounded >= v->general_cut && (rounded & v->gmask))))
        return 0; /* another area's, or a size that may have a class */
    ga_chunk_t *f = ga_find_fit(v->area[AREA_GENERAL].arena, rounded, fbin);
    if (!f)
        return 0; /* the area would grow */
    *fit = f; /* the fit the allocation takes when the answer is not 0 */
    /* Held at this start since the last allocation: the remembered answer first, no walk. */
    if (held(v) && f->base == v->gw_start && gen_whole_fits(p, f, rounded, remember))
        return 2;
    for (size_t j = 0; j < v->ngparked; j++) /* at most 64, looked at here, not kept up */
        if (v->gpark[j]->size <= f->size)
            goto whole; /* freed, it might fit tighter */
    const ga_chunk_t *n[2] = {f->prev_phys, f->next_phys};
    for (int i = 0; i < 2; i++)
        if (n[i] && !ga_is_free(n[i]) && (n[i]->u.area & GA_AREA_PARKED))
            goto whole; /* freed, it would merge with the fit */
    return 1;
whole:
    return gen_whole_fits(p, f, rounded, remember) ? 2 : 0;
}

/* The same for ga_vmm_fits, which needs no fit: its locals' addresses, inlined in the shim's
 * allocation path, made every mode's allocation save a register (arena through the shim +2
 * instructions a pair, scripts/bench-patterns-instr.sh build shim). */
static OUT_OF_LINE int gen_fit_stands(ga_pool_t *p, size_t size, size_t rounded)
{
    ga_chunk_t *f;
    unsigned bin;
    return gen_fit_stands_at(p, size, rounded, 0, &f, &bin);
}

#endif
