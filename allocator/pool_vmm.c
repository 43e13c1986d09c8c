/* gpuarena vmm pool: granule-aware placement over a reserved virtual range, physical memory only
 * where live allocations lie.
 *
 * Physical memory is mapped per granule: a granule is mapped (backend map) when a first live
 * allocation touches it and unmapped when the last one goes (ga_vrange_t, in vmm_internal.h, says
 * how that is kept at a cost independent of a block's size; vmm_granules.c maps and unmaps).
 * Addresses never move, and nothing fragments across regions: freed memory goes back to the
 * device granule by granule. What a vmm pool costs beyond the live bytes is therefore only the
 * unused part of partly used granules, and placement is chosen to keep those few.
 *
 * Placement: the virtual range is a parent arena (ga_arena.h) that holds address space only, and
 * it lends granule-aligned regions to placement areas, each an arena of its own with exact best
 * fit inside (VA only, so an area's idle regions cost nothing physical):
 *   aligned  sizes that are a multiple of the granule: they start and end on granule boundaries,
 *            so they never leave a granule partly used;
 *   class    one area per exact size from half a granule up to 3 granules, made when a second
 *            block of the size is asked for while one is live (GA_VMM_CLASSES at most): equal
 *            blocks side by side tile granules (four 4.5 MiB blocks fill nine 2 MiB granules),
 *            and a hole one leaves is refilled by the same size;
 *   general  everything else: small allocations, which fill partly used granules among
 *            themselves, sizes seen alone, and large odd sizes, whose tail granule others share.
 * A block for the aligned area or a class that would map new granules there is also tried in the
 * general area and goes where fewer granules are new (its own area on a tie): when one size
 * replaces another within a step (gradients allocated as activations are freed), the general
 * area reuses the granules just freed and still mapped, where a separate area would map its own
 * and give the freed ones back, every step.
 * Why: one best-fit arena mixes sizes, so the hole one size leaves is cut up by others at
 * arbitrary offsets, and granules stay mapped for a few bytes each. On the cs336 bf16 forward
 * pass (244 MiB live) that mapped 1.106x the live peak; the areas map 1.032x. Each rule was
 * measured on the shared traces and examples/ex_train (README, "vmm's mapped memory on the
 * traces"): classes for every size seen (single blocks of distinct sizes each leave most of a
 * granule unused: ex_train 1.26x) or without the general-area try (ex_train at widths where its
 * gradients get a class remaps 20x more: 887 maps instead of 44) did worse. An owner entry per
 * granule says which area lent it, so a free or a lookup finds its area in O(1); an allocation
 * from half a granule up costs a size lookup (a small hash) and, when it maps something, a second
 * best fit, no scan. The common case is kept to what arena mode does plus a few counts: a size
 * under half a granule goes to the general area with nothing looked up, and a block inside one
 * granule that another live block uses only moves that granule's count (the bitmap words, the
 * limit check and the kept cache are for blocks that take or leave a granule; a granule-by-granule
 * loop only for blocks that map something).
 *
 * Remapping churn (a training step that frees and reallocates the same buffers) is absorbed by a
 * cache: a granule whose last user goes stays mapped ("kept") while the kept bytes stay within
 * cfg.keep, and is reused by the next allocation that touches it at no backend cost. Whenever a
 * new granule must be mapped, a kept one is given back first, so mapped memory only grows when no
 * kept granule is left: the peak of mapped memory is the same as with no cache at all. Kept
 * granules sit on a stack of runs (a freed block's granules are one run) that is cleaned lazily
 * (a granule reused since is skipped when popped), which keeps reuse O(1) and needs no list
 * surgery; a block freed again whose granules are on the stack already pushes nothing.
 *
 * A freed block from half a granule up (or a smaller one alone in its granule, of the last small
 * size allocated) is "parked" instead while the keep has room for what it may hold: it stays
 * allocated in its area, its granules still in use, and the next allocation of its size takes it
 * back with nothing placed or counted on the granule side (free_large, alloc_parked). What parked
 * blocks hold comes off the keep (keep_now), so they and the kept granules stay within cfg.keep;
 * an allocation that would map gives every parked block back first (GA_VMM_UNPARK), and any
 * allocation the general area's parked blocks do not serve gives those back first
 * (ga_vmm_unpark_general), so that placement is what their frees would have left.
 *
 * A general-area block freed and not parked has its arena free put off to the next allocation,
 * which takes it resized in place where the free and a best fit would place it at its base
 * (pend_hold, alloc_pend); placement, mapping and every figure are those of the free and the
 * allocation.
 *
 * This file: the placement areas and their backends, the pool's making, the free paths, the
 * pending free and parking. The common cases of a freed block's granules are in vmm_uncover.h,
 * a header so that they inline here as before; the allocation paths are in vmm_alloc.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm_internal.h"
#include "vmm_uncover.h" /* a freed block's granules, the common cases */

/* Placement areas ----------------------------------------------------------------------------- */

static size_t gran_up(const ga_vmm_t *v, size_t size)
{
    size_t up = (size + v->gran - 1) & ~(v->gran - 1);
    return up < size ? 0 : up;
}

static void set_owner(ga_vmm_t *v, uintptr_t base, size_t size, uint16_t owner)
{
    ga_vrange_t *r = range_of(v, base);
    for (size_t g = (base - r->base) >> v->gshift, n = size >> v->gshift; n--; g++)
        r->owner[g] = owner;
}

/* Gives the empty regions of every area but `except` back to the parent. */
static void trim_areas(ga_vmm_t *v, size_t except)
{
    for (size_t i = 0; i < v->nareas; i++) {
        if (v->area[i].arena && i != except) {
            ga_trim(v->area[i].arena);
            mark_dirty(v, &v->area[i]);
        }
    }
}

/* An area's backend: its regions are granule-aligned blocks of the parent arena's address space,
 * rounded up to whole granules so that no two areas ever share one. */
static int area_reserve(void *ctx, size_t size, uintptr_t *base)
{
    ga_varea_t *ar = ctx;
    ga_pool_t *p = ar->pool;
    ga_vmm_t *v = p->vmm;
    size_t whole = gran_up(v, size);
    uintptr_t b = 0;
    if (!whole)
        return -1;
    ga_stats_t ps;
    ga_get_stats(p->arena, &ps);
    if (ps.largest_free < whole) /* empty regions of the other areas first, then a new range */
        trim_areas(v, ar->id);
    ga_status_t st = ga_alloc(p->arena, whole, &b);
    if (st != GA_OK) /* a range's host memory stays the host's (ga_arena.h) */
        return st == GA_ENOHOST ? GA_ENOHOST : -1;
    ga_vrange_t *r = range_of(v, b);
    if (!r || (b - r->base) % v->gran || whole > r->size - (b - r->base)) {
        ga_free(p->arena, b); /* the parent broke granule alignment: refuse rather than share */
        return -1;
    }
    set_owner(v, b, whole, (uint16_t)(ar->id + 1));
    v->parent_dirty = 1;
    *base = b;
    return 0;
}

static int area_release(void *ctx, uintptr_t base, size_t size)
{
    ga_varea_t *ar = ctx;
    ga_pool_t *p = ar->pool;
    set_owner(p->vmm, base, gran_up(p->vmm, size), 0);
    ga_free(p->arena, base);
    p->vmm->parent_dirty = 1;
    return 0;
}

/* Makes area ar's arena, at its first use. */
OUT_OF_LINE void ga_vmm_area_make(ga_vmm_t *v, ga_varea_t *ar)
{
    /* First regions of 32 granules (a class: 16 blocks), doubling as the area grows, up to a
     * range's size: the shim trims on every out-of-memory, and an area that gave its regions back
     * and grew again, doubling each time, asked for ever larger address space (under an 8 MiB
     * cap, 64 TiB after 800 allocations). A class region much smaller than that cuts its tiling
     * short (capped at 1/16 of a range twice the live peak, the bf16 forward pass mapped 2%
     * more). */
    size_t min = ar->size ? gran_up(v, 16 * ar->size) : 32 * v->gran;
    if (min > v->region)
        min = v->region;
    ga_backend_t be = {area_reserve, area_release, ar};
    ga_config_t ac = {.initial = 0, .grow = 1, .limit = 0, .min_region = min,
                      .max_region = v->region};
    ar->arena = ga_arena_create(&be, &ac, NULL);
    if (!ar->arena)
        return;
    ga_arena_share_live(ar->arena, &v->ltab, ar->id);
    if (ar->id == AREA_GENERAL) {
        v->small_cut = v->small_lim;
        v->general_cut = v->class_end;
    }
}

/* The tracking entry of a size that may get a class; with `add`, made at first sight while
 * fewer than TRACK_MAX are tracked; -1 when there is none. The hash is a 32-bit multiply by an
 * immediate, not a 64-bit one by a loaded constant: as many probes (the table simulated with 192
 * random class sizes: 1.10 a hit, 1.21 a miss, against 1.10 and 1.22), one instruction fewer a
 * lookup (sizes40 at the pool, vmm: 635 -> 633 a pair, step 464 -> 463, over-16 307 -> 306,
 * scripts/bench-patterns-instr.sh). */
int ga_vmm_track_find(ga_vmm_t *v, size_t size, int add)
{
    size_t h = (uint32_t)((uint32_t)(size / GA_ALIGN) * 0x9E3779B1u) >> (32 - TRACK_BITS);
    for (; v->track[h].size; h = (h + 1) & (TRACK_SLOTS - 1))
        if (v->track[h].size == size)
            return (int)h;
    if (!add || v->ntrack == TRACK_MAX)
        return -1;
    v->track[h].size = size;
    v->ntrack++;
    return (int)h;
}

/* A block of a size that may be tracked (class_size) is freed outside its own class: its
 * size's live count. The last class's size (hot_size, its entry known) with no lookup
 * (trace:ex.trace at the pool, vmm: 583 -> 580 a pair, somas_resnet50 638 -> 637: ex_train's
 * 1 MiB blocks placed in the general area; sizes40, every size missed, 647 -> 649); the lookup
 * inline, not a call (sizes40 647 -> 645, alt2-class 349 -> 346, park20-1.5m 386 -> 383,
 * over-16 312 -> 310, step 475 -> 474, somas_resnet50 637 -> 638, ex.trace 580;
 * scripts/bench-patterns-instr.sh). */
static inline __attribute__((always_inline)) int untrack(ga_vmm_t *v, size_t size)
{
    int slot = size == v->hot_size ? v->hot_slot : ga_vmm_track_find(v, size, 0);
    if (slot >= 0)
        v->track[slot].nlive--;
    return slot;
}

/* The area whose region holds ptr, and the range; NULL area when ptr is in none. */
static ga_varea_t *area_of(const ga_vmm_t *v, uintptr_t ptr, ga_vrange_t **range)
{
    ga_vrange_t *r = range_of(v, ptr);
    if (range)
        *range = r;
    uint16_t o = r ? r->owner[(ptr - r->base) >> v->gshift] : 0;
    return o ? (ga_varea_t *)&v->area[(size_t)o - 1] : NULL;
}

/* The pool ------------------------------------------------------------------------------------ */

ga_status_t ga_vmm_create(ga_pool_t *p)
{
    ga_vmm_t *v = calloc(1, sizeof *v);
    if (!v)
        return GA_ENOHOST;
    v->pool = p;
    v->gran = p->be.granularity;
    if (v->gran < GA_ALIGN || (v->gran & (v->gran - 1))) {
        free(v);
        return GA_EINVAL; /* drivers give powers of two; the shim and the replay check too */
    }
    v->gmask = v->gran - 1;
    v->gshift = (unsigned)__builtin_ctzll((unsigned long long)v->gran);
    v->half = v->gran / 2;
    v->small_lim = v->half > GA_ALIGN ? v->half - GA_ALIGN : 0; /* half: a multiple of GA_ALIGN */
    v->class_end = v->gran <= SIZE_MAX / 3 ? 3 * v->gran : SIZE_MAX;
    v->general_cut = SIZE_MAX;
    v->park_min = p->cfg.keep ? v->half : SIZE_MAX;
    v->keep_now = p->cfg.keep;
    /* tight()'s threshold: with no limit never tight; a limit at or under the keep always;
     * else from limit - keep mapped bytes on (the room left then at most the keep) */
    v->tight_at = !p->cfg.limit                ? UINT64_MAX
                  : p->cfg.limit <= p->cfg.keep ? 0
                                                : (uint64_t)(p->cfg.limit - p->cfg.keep);
    v->park_at = v->tight_at;
    v->gstep = GSTEP_MIN;
    v->pend_step = 1;
    v->park_full.n = PARK_DEPTH; /* never a block in it: no room */
    v->nareas = AREA_FIRST_CLASS;
    if (ga_live_grow(&v->ltab) != 0) { /* slots from the start: no probe tests the count */
        free(v);
        return GA_ENOHOST;
    }
    for (uint16_t i = 0; i < AREA_FIRST_CLASS; i++)
        v->area[i] = (ga_varea_t){.pool = p, .id = i};
    always_dirty(v);
    v->parent_dirty = 1;
    p->vmm = v;
    size_t va = gran_up(v, p->cfg.va_size);
    if (!va) {
        ga_live_fini(&v->ltab);
        free(v);
        p->vmm = NULL;
        return GA_EINVAL;
    }
    if (va >> v->gshift > GA_VMM_MAX_GRANULES) /* the host memory of one range, bounded */
        va = GA_VMM_MAX_GRANULES << v->gshift;
    ga_backend_t be = {ga_vmm_va_reserve, ga_vmm_va_release, p};
    ga_status_t st = GA_OK;
    for (;;) {
        v->region = va;
        ga_config_t ac = {.initial = va, .grow = 1, .limit = 0, .min_region = va, .max_region = va};
        p->arena = ga_arena_create(&be, &ac, &st);
        /* Address space refused (a driver with less of it than twice the cap: the simulated
         * one with 64 TiB of memory): a smaller first range, down to 64 granules; the pool adds
         * ranges as it fills. */
        if (p->arena || st != GA_ENOMEM || va >> v->gshift <= 64) /* no shift of 64 by gshift:
                                                                   * it wraps for granules of 2^58 */
            break;
        va = gran_up(v, va / 2);
    }
    if (!p->arena) {
        ga_live_fini(&v->ltab);
        free(v->ranges);
        free(v);
        p->vmm = NULL;
        return st;
    }
    /* The aligned area's arena now (no region yet: address space only when a block comes), so
     * that a granule multiple's path tests nothing for it (3 instructions an allocation). */
    ga_vmm_area_make(v, &v->area[AREA_ALIGNED]);
    if (!v->area[AREA_ALIGNED].arena) {
        ga_vmm_destroy(p);
        p->vmm = NULL;
        p->arena = NULL;
        return GA_ENOHOST;
    }
    return GA_OK;
}

void ga_vmm_destroy(ga_pool_t *p)
{
    ga_vmm_t *v = p->vmm;
    pend_done(v);
    for (size_t i = 0; i < v->nareas; i++)
        ga_arena_destroy(v->area[i].arena); /* their regions go back to the parent */
    ga_arena_destroy(p->arena); /* releases every range, unmapping what is mapped there */
    ga_live_fini(&v->ltab);
    free(v->ranges);
    free(v->stack);
    free(v);
}

/* The figures of a freed block of len bytes, and its size's tracking; `ar`: its area when known
 * (NULL for the general area's fast path), a class's block of its size counted through the
 * class's own entry, any other block of a size that may be tracked looked up (blocks of a class
 * size placed in the general area, before or after the class was made, and a block that found
 * room in another size's class only when nothing else could serve it: place_on_mapped). */
static inline __attribute__((always_inline)) void count_free(ga_pool_t *p, ga_vmm_t *v,
                                                             const ga_varea_t *ar, size_t len,
                                                             size_t *size)
{
    if (ar && ar->size == len)
        v->track[ar->slot].nlive--;
    else if (len >= v->half && class_size(v, len))
        untrack(v, len);
    p->own.in_use -= len; /* the frees are counted by the areas' live tables (ga_vmm_stats) */
    if (size)
        *size = len;
}

/* Frees live block c, found at slot i of the shared table, of area ar in range r: its entry
 * and chunk go back to the area, then its granules and figures follow. With `aligned` (a
 * constant: the aligned area, whose blocks share no granule, so every granule of the block is
 * left with no user) they are given back by uncover_whole, inline in the common case. */
static inline __attribute__((always_inline)) ga_status_t free_in(ga_pool_t *p, ga_varea_t *ar,
                                                                ga_vrange_t *r, ga_chunk_t *c,
                                                                size_t i, size_t *size,
                                                                int aligned)
{
    ga_vmm_t *v = p->vmm; /* read once: the stores below could alias p->vmm for the compiler */
    uintptr_t ptr = c->base;
    size_t len = 0;
    ga_free_at(ar->arena, &v->ltab, 1, c, i, &len);
    if (!aligned) /* the aligned area is always dirty */
        mark_dirty(v, ar);
    if (aligned) { /* a granule multiple: never a class size, nothing to untrack */
        uncover_whole(p, v, r, (ptr - r->base) >> v->gshift, len);
        p->own.in_use -= len;
        if (size)
            *size = len;
    } else {
        uncover(p, v, r, ptr - r->base, len);
        count_free(p, v, ar, len, size);
    }
    return GA_OK;
}

/* The pending free ---------------------------------------------------------------------------- */

/* pend_hold, which holds the free: vmm_uncover.h. */

/* The arena's free put off. The live table has moved since the hold when frees of other
 * blocks came between (the hold stays while they free nothing of the area that it needs: the
 * arena's free chunks merged in another order are the same chunks), so its slot is found again. */
void ga_vmm_pend_finish(ga_vmm_t *v)
{
    ga_chunk_t *c = v->pend;
    if (v->pend_gran) /* its granules' counts and bits as its free would have left them */
        pend_gran_undo(v, c->base - v->base0, c->size);
    size_t i = ga_live_home(&v->ltab, c->base);
    while (v->ltab.slots[i].chunk != c)
        i = (i + 1) & v->ltab.mask;
    v->pend = NULL;
    v->pend_skip = v->pend_step;
    v->pend_step = v->pend_step < PEND_STEP_MAX ? 2 * v->pend_step : PEND_STEP_MAX;
    v->small_cut = v->ngparked ? 0 : v->small_lim;
    ga_free_at(v->area[AREA_GENERAL].arena, &v->ltab, 1, c, i, NULL);
}

/* Whether base is a parked block's. */
static int parked_at(const ga_vmm_t *v, uintptr_t base)
{
    const ga_chunk_t *c = ga_live_find_made(&v->ltab, base);
    return c && (c->u.area & GA_AREA_PARKED);
}

/* Parking ------------------------------------------------------------------------------------ */

/* Gives parked block c back to its area: the free its park put off (its figures went then), its
 * granules given back as a free gives them, within the keep's room it leaves. */
static void unpark_free(ga_pool_t *p, ga_chunk_t *c)
{
    ga_vmm_t *v = p->vmm;
    size_t area = c->u.area & ~GA_AREA_PARKED, len = 0;
    ga_varea_t *ar = &v->area[area];
    uintptr_t ptr = c->base;
    park_leave(v, c, area);
    size_t i = ga_live_home(&v->ltab, ptr);
    while (v->ltab.slots[i].chunk != c)
        i = (i + 1) & v->ltab.mask;
    ga_free_at(ar->arena, &v->ltab, 1, c, i, &len);
    mark_dirty(v, ar);
    ga_vrange_t *r = range_of(v, ptr);
    if (area == AREA_ALIGNED)
        uncover_whole(p, v, r, (ptr - r->base) >> v->gshift, len);
    else
        uncover(p, v, r, ptr - r->base, len);
}

/* Every parked block really freed, each size's in the order they were parked (so that their
 * granules are kept in the order their frees would have kept them), the sizes in
 * ga_vmm_park_order's order (vmm_park.c: the replays' figures depend on it). */
void ga_vmm_unpark_all(ga_pool_t *p)
{
    ga_vmm_t *v = p->vmm;
    pend_done(v);
    if (!v->nparked)
        return;
    ga_vpark_t *in[PARK_ENTRIES];
    for (size_t i = 0, n = ga_vmm_park_order(v, in); i < n; i++) {
        for (size_t j = 0; j < in[i]->n; j++)
            unpark_free(p, in[i]->c[j]);
        in[i]->n = 0;
    }
}

/* The general area's parked blocks really freed, the other areas' left parked: before an
 * allocation that none of them serves, so that it is placed as if they had been freed (each one's
 * room is then free for any size, as its free would have left it). Found through gpark, not a
 * walk of the 32 entries (366 instructions a pair on two sizes taking turns, helper-136 F1); each
 * given back unused makes the area's next frees go unparked (gwaste), twice as many at each such
 * call until a parked block serves again (gstep: 8, 16, ... GSTEP_MAX). Sizes taking turns in one
 * slot thus stop paying a park and its give-back every ninth pair (a fixed 8 cost two sizes
 * of 7 and 9 MiB taking turns 38 instructions a pair at the pool, scripts/bench-patterns-instr.sh
 * alt2-large). */
void ga_vmm_unpark_general(ga_pool_t *p)
{
    ga_vmm_t *v = p->vmm;
    pend_done(v);
    while (v->ngparked) {
        ga_chunk_t *c = v->gpark[v->ngparked - 1];
        ga_vpark_t *k = park_find(v, c->size, 0);
        size_t j = k->n;
        while (j && k->c[j - 1] != c)
            j--;
        for (; j < k->n; j++) /* out of its entry, the order of the rest kept */
            k->c[j - 1] = k->c[j];
        if (!--k->n)
            park_vacate(v, k);
        unpark_free(p, c);
    }
    v->gwaste = v->gstep;
    v->gstep = v->gstep < GSTEP_MAX ? 2 * v->gstep : GSTEP_MAX;
}

/* Why ptr, a live base of no area, cannot be freed (nothing changes): as a single arena would
 * answer, an address in the range but in no live allocation is a double free (an interior one
 * is said so), one outside every range is not ours. */
static OUT_OF_LINE ga_status_t free_refused(ga_pool_t *p, uintptr_t ptr)
{
    ga_vrange_t *r = NULL;
    ga_varea_t *ar = area_of(p->vmm, ptr, &r);
    if (!ar)
        return r ? GA_EDOUBLE : GA_ENOTOWNED;
    uintptr_t base = 0;
    if (ga_lookup(ar->arena, ptr, &base, NULL) == GA_OK && parked_at(p->vmm, base))
        return GA_EDOUBLE; /* inside a block freed already (parked) */
    ga_status_t st = ga_classify_bad_free(ar->arena, ptr);
    return st == GA_ENOTOWNED ? GA_EDOUBLE : st;
}

/* A block of the aligned area: its granules given back inline. */
static OUT_OF_LINE ga_status_t free_aligned(ga_pool_t *p, ga_chunk_t *c, size_t i, size_t *size)
{
    ga_vmm_t *v = p->vmm;
    return free_in(p, &v->area[AREA_ALIGNED], range_of(v, c->base), c, i, size, 1);
}

/* A block of a class: the size's live count found through the class. */
static OUT_OF_LINE ga_status_t free_class(ga_pool_t *p, ga_chunk_t *c, size_t i, size_t *size)
{
    ga_vmm_t *v = p->vmm;
    return free_in(p, &v->area[c->u.area], range_of(v, c->base), c, i, size, 0);
}

/* A block of the general area outside the first range: its granules. */
static OUT_OF_LINE void uncover_far(ga_pool_t *p, uintptr_t ptr, size_t len)
{
    ga_vrange_t *r = range_of(p->vmm, ptr);
    uncover(p, p->vmm, r, ptr - r->base, len);
}

/* A block of the general area in the first range that leaves a granule or spans two: its count,
 * taken down by the caller when the block lies in one granule, is given back to the slow path. */
static OUT_OF_LINE void uncover_general(ga_pool_t *p, size_t g0, size_t g1)
{
    ga_vmm_t *v = p->vmm;
    if (g0 == g1)
        v->refs0[g0]++;
    if (!uncover_kept(p, v, v->ranges, g0, g1))
        ga_vmm_uncover_granules(p, v->ranges, g0, g1);
}

/* A block of the general area under half a granule (with no keep, of any size) that lies outside
 * the first range or leaves a granule with no user that the keep cannot take as it stands
 * (free_small): the arena's free, then its granules, as any block's. */
static OUT_OF_LINE ga_status_t free_small_leave(ga_pool_t *p, ga_chunk_t *c, size_t i,
                                                size_t *size)
{
    ga_vmm_t *v = p->vmm;
    uintptr_t ptr = c->base;
    size_t len = c->size;
    ga_free_at(v->area[AREA_GENERAL].arena, &v->ltab, 1, c, i, NULL);
    size_t off = ptr - v->base0, g0 = off >> v->gshift, g1 = (off + len - 1) >> v->gshift;
    if (off >= v->size0) {
        uncover_far(p, ptr, len);
    } else {
        if (g0 == g1) /* its last user: the count uncover_general expects taken down */
            v->refs0[g0]--;
        uncover_general(p, g0, g1);
    }
    count_free(p, v, NULL, len, size);
    return GA_OK;
}

/* A block of the general area from half a granule up: as free_small's, its granules' common
 * case (the block's last user of them, the keep with room) inline (a call for it cost 40
 * instructions a pair on two sizes of 7 and 9 MiB taking turns, scripts/bench-patterns-instr.sh
 * alt2-large). */
static OUT_OF_LINE ga_status_t free_general_body(ga_pool_t *p, ga_chunk_t *c, size_t i,
                                                 size_t *size)
{
    ga_vmm_t *v = p->vmm;
    uintptr_t ptr = c->base;
    size_t len = c->size;
    /* The figures first (the granule paths read none of them): `size` is then not kept across
     * the arena's free (alt2-large 577 -> 574 a pair, alt2-mix 542 -> 541, step 465 -> 464). */
    count_free(p, v, NULL, len, size);
    size_t off = ptr - v->base0, g0 = off >> v->gshift, g1 = (off + len - 1) >> v->gshift;
    if (__builtin_expect(v->pend_skip != 0, 0)) {
        v->pend_skip--;
        ga_free_at(v->area[AREA_GENERAL].arena, &v->ltab, 1, c, i, NULL);
    } else {
        pend_hold(v, c);
    }
    if (off >= v->size0)
        uncover_far(p, ptr, len);
    else if (!uncover_kept(p, v, v->ranges, g0, g1))
        ga_vmm_uncover_granules(p, v->ranges, g0, g1);
    return GA_OK;
}

/* Its hold with nothing pending, in a frame of no saved register (free_held; at the pool, vmm:
 * alt2-large 400 -> 385 a pair, alt2-mix 401 -> 393); else free_general_body, whose holds
 * make the granules' stores (in a burst the next free finished them: step 476 -> 472). */
static OUT_OF_LINE ga_status_t free_general(ga_pool_t *p, ga_chunk_t *c, size_t i, size_t *size)
{
    ga_vmm_t *v = p->vmm;
    if (!(v->pend_skip | (uintptr_t)v->pend) && free_held(p, v, c, size))
        return GA_OK;
    return free_general_body(p, c, i, size);
}

static inline __attribute__((always_inline)) void park(ga_pool_t *p, ga_vmm_t *v, ga_vpark_t *k,
                                                       ga_chunk_t *c, size_t area, size_t hold,
                                                       size_t *size);

/* A block under half a granule, in the first range, alone in granule g0, parked (1; else 0 with
 * nothing changed): of the size last allocated under half a granule, with room in its size's
 * entry and the keep (it holds that one granule), as a larger block is (free_large), so that a
 * block freed and allocated again with nothing else in its granule costs no granule work (a loop
 * of one 4 KiB block: 473 instructions a pair at the pool against arena's 373, its granule kept
 * and taken back each time). Else it is freed as any block of the general area (free_small),
 * its one granule's common case (the keep with room, the granule on the kept stack) inline:
 * through free_general_body, uncover_general and uncover_kept it cost two calls more and the
 * granule's count taken down and up again (4 and 8 KiB taking turns, scripts/bench-patterns-
 * instr.sh alt2-small: 546 -> 503 a pair, arena 398); and with a frame of its own, free_small
 * set its frame up and took it down before the jump (alt2-small 503 -> 479, a 4 KiB block alone
 * one-4k 348 -> 324, ex_train's trace replayed with nothing mapped 596 -> 590). */
static inline __attribute__((always_inline)) int free_small_alone(ga_pool_t *p, ga_chunk_t *c,
                                                                  size_t *size, size_t g0)
{
    ga_vmm_t *v = p->vmm;
    size_t len = c->size;
    ga_vpark_t *k = park_find(v, len, 1);
    if (len != v->small_last || len != v->small_prev || k->n == PARK_DEPTH ||
        p->own.kept + v->gran > v->keep_now ||
        v->ngparked == GPARK_MAX || (v->gwaste && v->gwaste--))
        return 0;
    park(p, v, k, c, AREA_GENERAL, park_touch(v, v->ranges, g0, g0, AREA_GENERAL, 1), size);
    return 1;
}

/* A block of the general area under half a granule (with no keep, of any size: park_min): one
 * alone in its granule may be parked; the common case (in the first range, inside a granule
 * another live block still uses) costs a range test and a count beyond the arena's own free, as
 * free_general's. */
static OUT_OF_LINE ga_status_t free_small(ga_vmm_t *v, ga_chunk_t *c, size_t i, size_t *size)
{
    ga_pool_t *p = v->pool;
    size_t len = c->size, off = c->base - v->base0, g0 = off >> v->gshift;
    size_t g1 = (off + len - 1) >> v->gshift;
    uint32_t *refs = v->refs0;
    if (off >= v->size0)
        return free_small_leave(p, c, i, size);
    if (g0 == g1) {
        if (refs[g0] == 1) { /* alone in its granule: parked, or its granule kept or given back */
            if (free_small_alone(p, c, size, g0))
                return GA_OK;
            /* Kept before the arena's free, the granule's number then no longer needed, the
             * rest out of line (free_small_leave): alt2-small at the pool, vmm: 480 -> 477 a pair
             * (arena 398), scripts/bench-patterns-instr.sh. */
            ga_stats_t *s = &p->own;
            if (s->kept + v->gran > v->keep_now ||
                !((v->ranges->stacked[g0 >> 6] >> (g0 & 63)) & 1))
                return free_small_leave(p, c, i, size);
            refs[g0] = 0;
            s->kept += v->gran;
            if (s->kept > s->peak_kept)
                s->peak_kept = s->kept;
        } else {
            refs[g0]--;
        }
    } else if (g1 == g0 + 1 && refs[g0] != 1 && refs[g1] != 1) {
        /* Across two granules others still use: their counts, as uncover_general would (with
         * alloc_small's the same: under-16, 411 -> 339 a pair). Taken down before the arena's
         * free, with the granule numbers found here, and the rest out of line (free_small_leave):
         * found again after the free, inline, they cost 7 instructions a pair more (at the pool,
         * vmm: under-16 338 -> 331, arena 271; alt2-small 485 -> 480, one-4k 326 -> 322,
         * trace:ex.trace 510 -> 508; scripts/bench-patterns-instr.sh). */
        refs[g0]--;
        refs[g1]--;
    } else {
        return free_small_leave(p, c, i, size);
    }
    if (__builtin_expect(v->pend_skip != 0, 0)) {
        v->pend_skip--;
        ga_free_at(v->area[AREA_GENERAL].arena, &v->ltab, 1, c, i, NULL);
    } else {
        pend_hold(v, c);
    }
    count_free(p, v, NULL, len, size);
    return GA_OK;
}

/* A block from half a granule up that is not parked: its area's free. */
static inline __attribute__((always_inline)) ga_status_t free_unparked(ga_pool_t *p, ga_chunk_t *c,
                                                                       size_t i, size_t *size,
                                                                       size_t area)
{
    if (area == AREA_ALIGNED)
        return free_aligned(p, c, i, size);
    return area == AREA_GENERAL ? free_general(p, c, i, size) : free_class(p, c, i, size);
}

/* A block from half a granule up, with a keep (park_min): parked when its size's entry has room
 * and the keep has room for what it holds (park_hold: its granules stay mapped and counted as
 * used, so the granule side costs nothing now and nothing when it is taken back); else freed by
 * its area's path. A parked block is freed already to its user. A block of the general area is
 * given back before any allocation it does not serve (ga_vmm_unpark_general): held there, it cut
 * the room the area's other sizes share, and placed around it a step's allocations mapped anew
 * (examples/ex_train: 41 maps in 3 steps instead of 39, a granule more at the peak). */
static OUT_OF_LINE ga_status_t free_large(ga_vmm_t *v, ga_chunk_t *c, size_t i, size_t *size)
{
    ga_pool_t *p = v->pool;
    size_t area = c->u.area, len = c->size;
    if (area & GA_AREA_PARKED)
        return GA_EDOUBLE;
    ga_vpark_t *k = park_find(v, len, 1);
    if (k->n == PARK_DEPTH ||
        (area == AREA_GENERAL && v->ngparked == GPARK_MAX)) /* gwaste: 0 here (ga_vmm_free) */
        return free_unparked(p, c, i, size, area);
    if (area == AREA_ALIGNED) { /* its granules its own: no counts */
        if (p->own.kept + len > v->keep_now)
            return free_aligned(p, c, i, size);
        park(p, v, k, c, area, len, size);
        return GA_OK;
    }
    ga_vrange_t *r;
    size_t g0, g1;
    park_span(v, c->base, len, &r, &g0, &g1);
    /* its granules, less ends counted already (the last one's test only where it is another
     * granule: as one expression, the two tests' flags were spilled; over-16 304 -> 301 a pair) */
    uint8_t *pk = r->parked;
    size_t n = g1 - g0 + (pk[g0] == 0);
    if (g1 != g0)
        n -= pk[g1] != 0;
    size_t gain = n << v->gshift;
    if (p->own.kept + gain > v->keep_now)
        return area == AREA_GENERAL ? free_general(p, c, i, size) : free_class(p, c, i, size);
    pk[g0]++;
    if (g1 != g0)
        pk[g1]++;
    park(p, v, k, c, area, gain, size);
    return GA_OK;
}

/* Parks live block c of area `area` in entry k, `hold` bytes of granules parked blocks touch now
 * and did not before (park_touch, done): its figures are a free's, its chunk stays allocated and
 * marked, its granules stay in use. v is p->vmm, passed: read again here after the byte stores
 * of the parked counts (which may alias anything), it cost a load a park. */
static inline __attribute__((always_inline)) void park(ga_pool_t *p, ga_vmm_t *v, ga_vpark_t *k,
                                                       ga_chunk_t *c, size_t area, size_t hold,
                                                       size_t *size)
{
    size_t len = c->size;
    v->keep_now -= hold;
    if (area == AREA_GENERAL) {
        /* count_free's figures, its size's tracking entry kept in the chunk for the allocation
         * that takes it back (alloc_parked: no second search; at the pool, vmm: sizes40 377 ->
         * 358 a pair, one-1m 366 -> 347, scripts/bench-patterns-instr.sh) */
        c->u.slot = class_size(v, len) ? untrack(v, len) : -1;
        p->own.in_use -= len;
        if (size)
            *size = len;
    } else {
        count_free(p, v, &v->area[area], len, size);
    }
    k->size = len; /* a free entry (park_find) becomes its size's */
    k->c[k->n++] = c;
    c->u.area = area | GA_AREA_PARKED;
    v->nparked++;
    v->parked_req += c->u.requested;
    if (area == AREA_GENERAL) { /* every allocation but its size's gives it back first */
        c->u.gpark = (uint32_t)v->ngparked;
        v->gpark[v->ngparked++] = c;
        v->small_cut = 0;
    }
}

/* One probe of the shared live table finds the block and, from its chunk, its area, which picks
 * the path before any frame is set up: each path is a function of its own, entered by a jump.
 * (The owner of the pointer's granule picked it before: 8 instructions more, and the area's
 * table probed after.) The two common paths are given v, the rest v->pool: with p passed on,
 * the probe kept p and the size in other registers and moved them back for the jump (at the
 * pool, vmm: mixed16 431 -> 428 a pair, one-4k 316 -> 312, scripts/bench-patterns-instr.sh). */
ga_status_t ga_vmm_free(ga_pool_t *p, uintptr_t ptr, size_t *size)
{
    /* A pending free is left pending: its block is marked parked (a second free of it is a
     * double free, below), and the frees of other blocks do not need it done (pend_hold). */
    ga_vmm_t *v = p->vmm;
    ga_livetab_t *t = &v->ltab;
    size_t i = ga_live_home(t, ptr);
    ga_chunk_t *c;
    while ((c = t->slots[i].chunk) && c->base != ptr)
        i = (i + 1) & t->mask;
    if (!c)
        return free_refused(v->pool, ptr);
    if (c->size >= v->park_min) { /* a parked block among them: none without a keep */
        /* A general-area block while its frees go unparked (gwaste): no parking entry read. */
        if (__builtin_expect(v->gwaste != 0, 0) && c->u.area == AREA_GENERAL) {
            v->gwaste--;
            return free_general(v->pool, c, i, size);
        }
        return free_large(v, c, i, size);
    }
    if (c->u.area == AREA_GENERAL)
        return free_small(v, c, i, size);
    if (c->u.area & GA_AREA_PARKED) /* a small block parked (free_small_alone) */
        return GA_EDOUBLE;
    if (c->u.area == AREA_ALIGNED)
        return free_aligned(v->pool, c, i, size);
    return free_class(v->pool, c, i, size);
}

ga_status_t ga_vmm_lookup(const ga_pool_t *p, uintptr_t ptr, uintptr_t *base, size_t *size)
{
    ga_varea_t *ar = area_of(p->vmm, ptr, NULL);
    uintptr_t b = 0;
    size_t n = 0;
    if (!ar || ga_lookup(ar->arena, ptr, &b, &n) != GA_OK || parked_at(p->vmm, b))
        return GA_ENOTOWNED; /* a parked (or pending) block is freed memory to its user */
    if (base)
        *base = b;
    if (size)
        *size = n;
    return GA_OK;
}

/* One probe of the shared live table, whatever the area or range. */
size_t ga_vmm_live_size(const ga_pool_t *p, uintptr_t ptr)
{
    const ga_chunk_t *c = ga_live_find_made(&p->vmm->ltab, ptr);
    return c && !(c->u.area & GA_AREA_PARKED) ? c->size : 0;
}

/* Kept granules back to the device, then the areas' empty regions back to the parent (address
 * space only, not counted). */
size_t ga_vmm_trim(ga_pool_t *p)
{
    pend_done(p->vmm);
    ga_vmm_unpark_all(p);
    size_t bytes = ga_vmm_release_all_kept(p);
    trim_areas(p->vmm, AREAS_MAX);
    return bytes;
}
