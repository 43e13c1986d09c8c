/* gpuarena allocator: the hot paths of ga_alloc and ga_free, as always-inline bodies.
 *
 * arena.c defines ga_alloc and ga_free_sized from these, and the vmm pool's common case
 * (pool_vmm.c: a small block of the general area) inlines them into its own entry points, so
 * that an allocation or free there is one function, one frame, as in arena mode, rather than a
 * frame of its own around the arena's (scripts/bench-shim-instr.sh: vmm 964 -> 914 instructions
 * a pair, 155 -> 111 above arena; with 1-64 MiB blocks 1,091 -> 1,037). The slow and cold
 * steps stay out of line in arena.c, so each includer carries only the common path.
 * Nothing outside allocator/ includes this header; the arena's lock, where there is one, is the
 * caller's (ga_arena.h).
 */
#ifndef GA_ARENA_HOT_H
#define GA_ARENA_HOT_H

#include "internal.h"

/* Inlined wherever used: each is one step of the two paths. */
#define GA_HOT static inline __attribute__((always_inline))

/* arena.c: the out-of-line steps of the search, and the cold ends of the two paths. */
ga_chunk_t *ga_bin_fit(ga_arena_t *a, unsigned bin, size_t need); /* descent of a whole bin */
ga_chunk_t *ga_sub_fit(const ga_subbins_t *sub, size_t rounded);  /* a subdivided bin */
ga_status_t ga_fail_nomem(ga_arena_t *a, size_t rounded);
/* A host-memory failure (GA_ENOHOST): counted as a failed allocation, never as fragmentation. */
ga_status_t ga_fail_nohost(ga_arena_t *a);
ga_status_t ga_classify_bad_free(const ga_arena_t *a, uintptr_t ptr);
ga_status_t ga_alloc_full(ga_arena_t *a, size_t size, uintptr_t *out); /* ga_alloc_body, on lt */

/* Size rounded up to GA_ALIGN; 0 when size is 0 or rounding would overflow, with no test: 0
 * rounds to 0, and a size within GA_ALIGN - 1 of SIZE_MAX wraps round to under GA_ALIGN, which
 * rounds down to 0 too. */
static inline size_t ga_round_up(size_t size)
{
    return (size + GA_ALIGN - 1) & ~(GA_ALIGN - 1);
}

/* The first non-empty bin strictly above `bin`, or -1. A first-level bit whose word has emptied
 * since (ga_bin_unmark leaves it) is cleared on the way. Inline: it runs on most allocations of
 * the real traces, whose request's own bin is usually empty. */
GA_HOT int ga_next_bin(ga_arena_t *a, unsigned bin)
{
    /* ~1 << k: the bits above k, none for k = 63, with no test of k */
    unsigned fl = bin / GA_SL_COUNT, sl = bin % GA_SL_COUNT;
    uint64_t slmap = a->sl_bitmap[fl] & (~1ull << sl);
    if (!slmap) {
        uint64_t flmap = a->fl_bitmap & (~1ull << fl);
        for (;;) {
            if (!flmap)
                return -1;
            fl = (unsigned)__builtin_ctzll(flmap);
            if ((slmap = a->sl_bitmap[fl]))
                break;
            a->fl_bitmap &= ~(1ull << fl);
            flmap &= flmap - 1;
        }
    }
    return (int)(fl * GA_SL_COUNT + (unsigned)__builtin_ctzll(slmap));
}

/* The bin's lowest chunk is its smallest: when it fits (always, in an exact-size bin) it is the
 * answer; otherwise one descent (or a subdivided bin's slices) finds the smallest that does. */
GA_HOT ga_chunk_t *ga_find_fit(ga_arena_t *a, size_t rounded, unsigned *at)
{
    unsigned bin = ga_bin_of(rounded);
    const ga_bin_t *b = &a->bins[bin];
    ga_chunk_t *c;
    *at = bin;
    if (ga_bin_marked(a, bin)) {
        /* A subdivided bin goes to the request's slice at once: its lowest chunk rarely fits
         * (the bin spans many sizes), and reading it cost bench-scale's pair at 100,000 mixed
         * holes a cache miss. */
        const ga_subbins_t *sub = ga_bin_sub(b);
        if (sub) {
            if ((c = ga_sub_fit(sub, rounded)))
                return c;
        } else {
            c = b->t.min;
            if (c->size >= rounded || (c = ga_bin_fit(a, bin, rounded)))
                return c;
        }
    }
    int nb = ga_next_bin(a, bin);
    *at = (unsigned)nb;
    return nb < 0 ? NULL : a->bins[nb].t.min;
}

/* Absorbs `right` (free, out of its bin, the address neighbour after `left`) into `left`. */
GA_HOT void ga_absorb(ga_arena_t *a, ga_chunk_t *left, ga_chunk_t *right)
{
    left->size += right->size;
    left->next_phys = right->next_phys;
    if (left->next_phys)
        left->next_phys->prev_phys = left;
    ga_run_t *run = ga_chunk_run(right);
    if (run->count > 1) { /* ga_run_leave's common case, inlined */
        run->count--;
        if (run->first == right)
            run->first = right->next_phys;
    } else {
        ga_run_leave(a, right);
    }
    ga_item_put(a, (ga_item_t *)right);
}

/* Splits chunk c (out of its bin) into an allocation of `rounded` bytes at its low end and a
 * free remainder `rest` that joins c's run and goes back to a bin; `fresh` is a spare run struct
 * when c's run is full (taken beforehand, so nothing here can fail). (Taking the high end
 * instead, for all or only small requests, was measured on the somas traces: no better,
 * sometimes worse.) */
/* Links `rest` (rest_size bytes) into c's place after its first `rounded` bytes, in c's run
 * (ga_split's part that ga_alloc_short shares; the run's count is the caller's). */
GA_HOT void ga_link_rest(ga_chunk_t *c, size_t rounded, size_t rest_size, ga_chunk_t *rest,
                         ga_run_t *run)
{
    ga_chunk_t *next = c->next_phys;
    rest->base = c->base + rounded;
    rest->size = rest_size;
    rest->run_free = (uintptr_t)run;
    rest->prev_phys = c;
    rest->next_phys = next;
    if (next)
        next->prev_phys = rest;
    c->next_phys = rest;
    c->size = rounded;
}

GA_HOT void ga_split(ga_arena_t *a, ga_chunk_t *c, size_t rounded, ga_chunk_t *rest,
                     ga_run_t *fresh)
{
    ga_run_t *run = ga_chunk_run(c);
    ga_link_rest(c, rounded, c->size - rounded, rest, run);
    if (++run->count > GA_RUN_MAX)
        ga_run_split(run, fresh);
    ga_bin_insert(a, rest);
}

/* The bodies below that enter or remove a live chunk take its table `t` and `shared` (a
 * constant): arena mode passes the arena's own table and 0, the vmm pool its areas' shared
 * table, 1, and the area (ga_arena_t's `lt`). */

/* Turns free chunk c into a live allocation of `rounded` bytes (size asked: `size`). The two
 * things that can fail (room in the live table, a struct for the remainder) are secured first,
 * so a failure leaves the arena exactly as it was. */
GA_HOT ga_status_t ga_take_in(ga_arena_t *a, ga_livetab_t *t, int shared, size_t area,
                              ga_chunk_t *c, unsigned bin, size_t rounded, size_t size)
{
    ga_item_t *rest = NULL, *fresh = NULL;
    if (ga_live_reserve(t) != 0)
        return GA_ENOHOST;
    if (c->size > rounded) {
        if (!(rest = ga_item_new(a)))
            return GA_ENOHOST;
        if (ga_chunk_run(c)->count == GA_RUN_MAX && !(fresh = ga_item_new(a))) {
            ga_item_put(a, rest);
            return GA_ENOHOST;
        }
    }
    ga_bin_remove_at(a, c, bin);
    if (rest)
        ga_split(a, c, rounded, &rest->chunk, fresh ? &fresh->run : NULL);
    ga_live_insert(t, c);
    c->u.requested = size;
    if (shared)
        c->u.area = area;
    ga_stats_t *s = &a->stats;
    s->in_use += rounded;
    s->in_use_requested += size;
    if (!shared) /* a vmm area keeps no peak: the pool's is counted once, on its path */
        s->peak_in_use = s->in_use > s->peak_in_use ? s->in_use : s->peak_in_use; /* no branch */
    s->allocs++;
    return GA_OK;
}

GA_HOT ga_status_t ga_take(ga_arena_t *a, ga_chunk_t *c, unsigned bin, size_t rounded,
                           size_t size)
{
    return ga_take_in(a, &a->live, 0, 0, c, bin, rounded, size);
}

/* ga_alloc (ga_arena.h) for a non-NULL arena and out-parameter, on table t (ga_take_in). */
GA_HOT ga_status_t ga_alloc_body(ga_arena_t *a, ga_livetab_t *t, int shared, size_t area,
                                 size_t size, uintptr_t *out)
{
    size_t rounded = ga_round_up(size);
    if (!rounded)
        return size ? GA_ETOOBIG : GA_EINVAL;
    unsigned bin;
    ga_chunk_t *c = ga_find_fit(a, rounded, &bin);
    if (!c) {
        /* The host memory ga_take_in may need, secured before a region is added for this call
         * (region_new takes two items, the split two more): else a GA_ENOHOST after ga_grow kept
         * the new region. */
        ga_item_t *it[4];
        int k = 0;
        if (ga_live_reserve(t) != 0)
            return ga_fail_nohost(a);
        while (k < 4 && (it[k] = ga_item_new(a)))
            k++;
        for (int j = k; j-- > 0;)
            ga_item_put(a, it[j]);
        if (k < 4)
            return ga_fail_nohost(a);
        ga_status_t st = ga_grow(a, rounded);
        if (st == GA_ENOHOST)
            return ga_fail_nohost(a);
        if (st != GA_OK || !(c = ga_find_fit(a, rounded, &bin)))
            return ga_fail_nomem(a, rounded);
    }
    if (ga_take_in(a, t, shared, area, c, bin, rounded, size) != GA_OK)
        return ga_fail_nohost(a);
    *out = c->base;
    return GA_OK;
}

/* The live chunk c, found at slot i of table t, freed (ga_free_sized's work once the chunk is
 * found): its entry removed, then merged with its free neighbours and binned. */
GA_HOT void ga_free_at(ga_arena_t *a, ga_livetab_t *t, int shared, ga_chunk_t *c, size_t i,
                       size_t *size)
{
    ga_live_close_hole(t, i);
    t->count--;
    if (shared)
        a->stats.frees++;
    if (size)
        *size = c->size;
    ga_stats_t *s = &a->stats;
    s->in_use -= c->size;
    s->in_use_requested -= c->u.requested; /* frees: derived (ga_get_stats) */
    ga_chunk_t *prev = c->prev_phys, *next = c->next_phys;
    if (next && ga_is_free(next)) {
        ga_bin_remove(a, next);
        ga_absorb(a, c, next);
    }
    if (prev && ga_is_free(prev)) {
        ga_bin_remove(a, prev);
        ga_absorb(a, prev, c);
        c = prev;
    }
    ga_bin_insert(a, c);
}

/* ga_free_sized (ga_arena.h) for a non-NULL arena, on table t (whose slots exist: every table
 * an arena uses has them). */
GA_HOT ga_status_t ga_free_body(ga_arena_t *a, ga_livetab_t *t, int shared, uintptr_t ptr,
                                size_t *size)
{
    size_t i = ga_live_home(t, ptr);
    ga_chunk_t *c;
    while ((c = t->slots[i].chunk) && c->base != ptr)
        i = (i + 1) & t->mask;
    if (!c)
        return ga_classify_bad_free(a, ptr);
    ga_free_at(a, t, shared, c, i, size);
    return GA_OK;
}

/* ga_alloc (ga_arena.h) for a non-NULL arena and out-parameter: the short path (arena.c says
 * why), the same placement as ga_alloc_body. The vmm pool's small blocks take it too, inline: 9
 * instructions fewer a pair than the body (scripts/bench-shim-instr.sh vmm). */
GA_HOT ga_status_t ga_alloc_short_in(ga_arena_t *a, ga_livetab_t *t, int shared, size_t area,
                                     size_t size, uintptr_t *out)
{
    size_t rounded = ga_round_up(size);
    unsigned bin;
    ga_chunk_t *c = rounded ? ga_find_fit(a, rounded, &bin) : NULL;
    if (!c)
        goto full; /* growth, or a size that cannot be: the full path */
    if (t->count >= t->limit)
        goto full;
    size_t rest_size = c->size - rounded;
    ga_run_t *run = ga_chunk_run(c);
    ga_item_t *it = a->spare;
    if (rest_size && (run->count >= GA_RUN_MAX || (!it && a->carve == a->carve_end)))
        goto full;
    /* Committed. */
    ga_bin_remove_at(a, c, bin);
    if (rest_size) {
        if (it)
            a->spare = it->next_spare;
        else
            it = a->carve++;
        ga_chunk_t *rest = &it->chunk;
        ga_link_rest(c, rounded, rest_size, rest, run);
        run->count++;
        ga_bin_insert(a, rest);
    }
    ga_live_insert(t, c);
    c->u.requested = size;
    if (shared)
        c->u.area = area;
    ga_stats_t *s = &a->stats;
    s->in_use += rounded;
    s->in_use_requested += size;
    if (!shared)
        s->peak_in_use = s->in_use > s->peak_in_use ? s->in_use : s->peak_in_use;
    s->allocs++;
    *out = c->base;
    return GA_OK;
full:
    return ga_alloc_full(a, size, out); /* on the arena's `lt` */
}

/* ga_alloc_short_in from best fit c (its bin) that the caller found for this size, the arena
 * unchanged since (the vmm pool's small block after its parked-block test). Its own copy, so
 * that ga_alloc_short_in, arena mode's, stays the code it was: both made from one inline body
 * (tried after helper-153), arena cost 1 instruction a pair more on every pattern at the pool
 * (one-4k 401 -> 402, scripts/bench-patterns-instr.sh), vmm the same. */
GA_HOT ga_status_t ga_alloc_short_at(ga_arena_t *a, ga_livetab_t *t, int shared, size_t area,
                                     ga_chunk_t *c, unsigned bin, size_t size, uintptr_t *out)
{
    size_t rounded = ga_round_up(size);
    if (t->count >= t->limit)
        goto full;
    size_t rest_size = c->size - rounded;
    ga_run_t *run = ga_chunk_run(c);
    ga_item_t *it = a->spare;
    if (rest_size && (run->count >= GA_RUN_MAX || (!it && a->carve == a->carve_end)))
        goto full;
    ga_bin_remove_at(a, c, bin);
    if (rest_size) {
        if (it)
            a->spare = it->next_spare;
        else
            it = a->carve++;
        ga_chunk_t *rest = &it->chunk;
        ga_link_rest(c, rounded, rest_size, rest, run);
        run->count++;
        ga_bin_insert(a, rest);
    }
    ga_live_insert(t, c);
    c->u.requested = size;
    if (shared)
        c->u.area = area;
    ga_stats_t *s = &a->stats;
    s->in_use += rounded;
    s->in_use_requested += size;
    if (!shared)
        s->peak_in_use = s->in_use > s->peak_in_use ? s->in_use : s->peak_in_use;
    s->allocs++;
    *out = c->base;
    return GA_OK;
full:
    return ga_alloc_full(a, size, out); /* on the arena's `lt` */
}

GA_HOT ga_status_t ga_alloc_short(ga_arena_t *a, size_t size, uintptr_t *out)
{
    return ga_alloc_short_in(a, &a->live, 0, 0, size, out);
}

#endif
