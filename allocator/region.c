/* gpuarena allocator regions: obtaining address ranges from the backend (preallocation,
 * geometric growth, retry smaller, the byte limit), giving them back (trim, release before
 * OOM), and resolving an arbitrary address to its region and chunk.
 *
 * Regions are few (growth doubles), so they live in a plain array sorted by base and are found
 * by binary search. Inside a region, the chunks are cut into runs of at most GA_RUN_MAX neighbours
 * and the runs form an address-ordered tree, so the chunk holding an address is one descent and a
 * short walk, O(log n) in the region's chunks, and the host memory behind it is a few words per
 * chunk: a 4 TiB region with three chunks costs three chunk structs and a run, not an index sized
 * by its bytes. Whether that chunk is live is its own flag; free chunks need no other lookup.
 * (Before runs, a bitmap with one bit per 512-byte granule did this: 1/4096 of the region in host
 * memory, 1 GiB for a 4 TiB replay region, and cache misses on every split in a 15 GB one. A tree
 * over every chunk was measured too: exact, but a rebalance on every split and merge cost 8 ns
 * per operation on somas_bert_base; runs touch the tree once per 16 splits at most.)
 */
#include <stdlib.h>

#include "internal.h"

/* Region array -------------------------------------------------------------------------------- */

/* Index of the last region with base <= p, or -1. */
static ptrdiff_t region_floor(const ga_arena_t *a, uintptr_t p)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)a->nregions - 1, found = -1;
    while (lo <= hi) {
        ptrdiff_t mid = lo + (hi - lo) / 2;
        if (a->regions[mid]->base <= p) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

ga_region_t *ga_region_find(const ga_arena_t *a, uintptr_t p)
{
    ptrdiff_t i = region_floor(a, p);
    if (i < 0)
        return NULL;
    ga_region_t *r = a->regions[i];
    return p - r->base < r->size ? r : NULL;
}

/* Whether [base, base + size) meets a held region: only the last region starting below the end
 * can, since regions are sorted and disjoint. */
static int overlaps(const ga_arena_t *a, uintptr_t base, size_t size)
{
    ptrdiff_t i = region_floor(a, base + size - 1);
    return i >= 0 && a->regions[i]->base + a->regions[i]->size > base;
}

static int region_insert(ga_arena_t *a, ga_region_t *r)
{
    if (a->nregions == a->cap_regions) {
        size_t cap = a->cap_regions ? a->cap_regions * 2 : 8;
        ga_region_t **grown = ga_host_realloc(a->regions, cap * sizeof *grown);
        if (!grown)
            return -1;
        a->regions = grown;
        a->cap_regions = cap;
    }
    size_t at = (size_t)(region_floor(a, r->base) + 1);
    memmove(&a->regions[at + 1], &a->regions[at], (a->nregions - at) * sizeof *a->regions);
    a->regions[at] = r;
    a->nregions++;
    return 0;
}

/* Builds the host-side region for a range the backend gave: one free chunk in one run; NULL if
 * host memory ran out. */
static ga_region_t *region_new(ga_arena_t *a, uintptr_t base, size_t size, ga_region_t **rec)
{
    ga_region_t *r = rec && *rec ? *rec : ga_host_calloc(1, sizeof *r);
    if (rec)
        *rec = NULL; /* taken: freed below on failure, else the region's */
    ga_item_t *ci = r ? ga_item_new(a) : NULL;
    ga_item_t *ri = ci ? ga_item_new(a) : NULL;
    if (!ri) {
        if (ci)
            ga_item_put(a, ci);
        free(r);
        return NULL;
    }
    ga_chunk_t *c = &ci->chunk;
    ga_run_t *run = &ri->run;
    memset(c, 0, sizeof *c);
    c->base = base;
    c->size = size;
    c->run_free = (uintptr_t)run;
    run->first = c;
    run->region = r;
    run->count = 1;
    ga_rb_link(&run->node, NULL, &r->runs);
    ga_rb_insert_fixup(&r->runs, &run->node);
    r->base = base;
    r->size = size;
    r->first = c;
    return r;
}

static void region_free(ga_arena_t *a, ga_region_t *r)
{
    ga_item_put(a, (ga_item_t *)ga_chunk_run(r->first));
    ga_item_put(a, (ga_item_t *)r->first);
    free(r);
}

/* ga_region_add with the region's record made beforehand (*rec, zeroed; NULL: made here), which
 * it takes whenever it builds a region (*rec then NULL). */
static ga_status_t region_add_rec(ga_arena_t *a, size_t size, ga_region_t **rec)
{
    uintptr_t base = 0;
    int got = a->backend.reserve(a->backend.ctx, size, &base);
    if (got != 0) /* the backend's host memory (ga_arena.h), or its memory */
        return got == GA_ENOHOST ? GA_ENOHOST : GA_ENOMEM;
    /* A backend that breaks its contract must not corrupt the arena: refuse the range. */
    ga_region_t *r = NULL;
    int sound = base % GA_ALIGN == 0 && base + size > base && !overlaps(a, base, size);
    if (sound)
        r = region_new(a, base, size, rec);
    if (!r || region_insert(a, r) != 0) {
        if (r)
            region_free(a, r);
        (void)a->backend.release(a->backend.ctx, base, size); /* refused: the backend's (ga_arena.h) */
        a->stats.backend_reserves++;
        a->stats.backend_releases++;
        return sound ? GA_ENOHOST : GA_ENOMEM; /* no host memory for its records, or a bad range */
    }
    ga_bin_insert(a, r->first);
    ga_stats_t *s = &a->stats;
    s->backend_reserves++;
    s->regions++;
    s->reserved += size;
    if (s->reserved > s->peak_reserved)
        s->peak_reserved = s->reserved;
    a->last_region_size = size;
    return GA_OK;
}

ga_status_t ga_region_add(ga_arena_t *a, size_t size)
{
    return region_add_rec(a, size, NULL);
}

/* The backend first: a region it refuses to release (the driver would not free it) stays as it
 * was, empty and usable, and is tried again at the next release. 0 when it went. */
int ga_region_release(ga_arena_t *a, size_t i)
{
    ga_region_t *r = a->regions[i];
    size_t size = r->size;
    if (a->backend.release(a->backend.ctx, r->base, size) != 0) {
        r->refused = 1;
        return 1;
    }
    ga_bin_remove(a, r->first);
    region_free(a, r);
    memmove(&a->regions[i], &a->regions[i + 1], (a->nregions - i - 1) * sizeof *a->regions);
    a->nregions--;
    ga_stats_t *s = &a->stats;
    s->backend_releases++;
    s->regions--;
    s->reserved -= size;
    return 0;
}

size_t ga_release_empty(ga_arena_t *a)
{
    size_t bytes = 0;
    for (size_t i = a->nregions; i-- > 0;) {
        ga_region_t *r = a->regions[i];
        size_t size = r->size; /* r is freed once released */
        if (ga_is_free(r->first) && r->first->size == size && ga_region_release(a, i) == 0)
            bytes += size;
    }
    return bytes;
}

/* Growth -------------------------------------------------------------------------------------- */

/* One growth attempt: the geometric size (at most max_region) clipped to the limit, halving on
 * backend refusal down to the request itself. */
static ga_status_t try_grow(ga_arena_t *a, size_t rounded, ga_region_t **rec)
{
    const ga_config_t *cfg = &a->config;
    size_t held = (size_t)a->stats.reserved;
    size_t room = !cfg->limit ? SIZE_MAX : cfg->limit > held ? cfg->limit - held : 0;
    if (rounded > room)
        return GA_ENOMEM;
    size_t top = SIZE_MAX & ~(GA_ALIGN - 1);
    size_t want = a->last_region_size > top / 2 ? top : a->last_region_size * 2;
    if (want < cfg->min_region)
        want = cfg->min_region;
    if (cfg->max_region && want > cfg->max_region)
        want = cfg->max_region;
    if (want < rounded)
        want = rounded;
    if (want > room)
        want = room & ~(GA_ALIGN - 1);
    for (;;) {
        ga_status_t st = region_add_rec(a, want, rec);
        if (st == GA_OK || st == GA_ENOHOST) /* host memory: a smaller region needs as much */
            return st;
        if (want == rounded)
            return GA_ENOMEM;
        want = ((want / 2) + GA_ALIGN - 1) & ~(GA_ALIGN - 1);
        if (want < rounded)
            want = rounded;
    }
}

ga_status_t ga_grow(ga_arena_t *a, size_t rounded)
{
    if (!a->config.grow) {
        /* Only the preallocated region; if a trim gave it back, take it again. */
        if (a->nregions == 0 && a->config.initial >= rounded)
            return ga_region_add(a, a->config.initial);
        return GA_ENOMEM;
    }
    ga_status_t st = try_grow(a, rounded, NULL);
    if (st == GA_OK || st == GA_ENOHOST || a->config.keep_empty)
        return st;
    /* The record of the region to come made before an empty one goes: else a GA_ENOHOST after
     * ga_release_empty had given an empty region back (ga_arena.h: GA_ENOHOST changes nothing;
     * an outside check, 2026-12-06: grow under a limit, regions 2 -> 1). The other host memory
     * it needs is there already: ga_alloc_body's items, and the regions array's slot the
     * released region leaves. */
    ga_region_t *rec = ga_host_calloc(1, sizeof *rec);
    if (!rec)
        return GA_ENOHOST;
    if (ga_release_empty(a) == 0) {
        free(rec);
        return GA_ENOMEM;
    }
    st = try_grow(a, rounded, &rec);
    free(rec); /* NULL once a region took it */
    return st;
}

/* Runs ---------------------------------------------------------------------------------------- */

/* A full run (GA_RUN_MAX + 1 chunks after a split) gives its upper half to `fresh`, which becomes
 * the run's in-order successor in the tree: the right child of `run`, or else the left child of
 * the next run, which has none. O(GA_RUN_MAX) steps once per GA_RUN_MAX / 2 splits. */
void ga_run_split(ga_run_t *run, ga_run_t *fresh)
{
    unsigned keep = run->count / 2;
    ga_chunk_t *c = run->first;
    for (unsigned i = 0; i < keep; i++)
        c = c->next_phys;
    fresh->first = c;
    fresh->region = run->region;
    fresh->count = run->count - keep;
    run->count = keep;
    ga_chunk_t *last = c;
    for (unsigned i = 0; i < fresh->count; i++, c = c->next_phys) {
        ga_set_run(c, fresh);
        last = c;
    }
    if (!run->node.right) {
        ga_rb_link(&fresh->node, &run->node, &run->node.right);
    } else {
        ga_run_t *succ = ga_chunk_run(last->next_phys);
        ga_rb_link(&fresh->node, &succ->node, &succ->node.left);
    }
    ga_rb_insert_fixup(&run->region->runs, &fresh->node);
}

/* Chunk c is being merged into its lower neighbour: it leaves its run, and a run left empty
 * leaves the tree. A run's first chunk may change; its place in the tree does not. */
void ga_run_leave(ga_arena_t *a, ga_chunk_t *c)
{
    ga_run_t *run = ga_chunk_run(c);
    if (--run->count == 0) {
        ga_rb_erase(&run->region->runs, &run->node);
        ga_item_put(a, (ga_item_t *)run);
    } else if (run->first == c) {
        run->first = c->next_phys;
    }
}

/* Address queries ----------------------------------------------------------------------------- */

ga_chunk_t *ga_chunk_at(const ga_region_t *r, uintptr_t p)
{
    const ga_rbnode_t *n = r->runs;
    const ga_run_t *best = NULL;
    while (n) {
        const ga_run_t *run = ga_run_of(n);
        if (run->first->base <= p) {
            best = run;
            n = n->right;
        } else {
            n = n->left;
        }
    }
    if (!best)
        return NULL;
    ga_chunk_t *c = best->first;
    for (unsigned i = 1; i < best->count && p - c->base >= c->size; i++)
        c = c->next_phys;
    return c;
}

ga_chunk_t *ga_live_at(const ga_arena_t *a, uintptr_t p, int *in_region)
{
    ga_region_t *r = ga_region_find(a, p);
    *in_region = r != NULL;
    if (!r)
        return NULL;
    ga_chunk_t *c = ga_chunk_at(r, p);
    return c && !ga_is_free(c) ? c : NULL; /* c is never NULL: the first chunk starts the region */
}

int ga_owns(const ga_arena_t *a, uintptr_t p)
{
    return a && ga_region_find(a, p) != NULL;
}

ga_status_t ga_lookup(ga_arena_t *a, uintptr_t p, uintptr_t *base, size_t *size)
{
    if (!a)
        return GA_EINVAL;
    ga_chunk_t *c = ga_live_find(a->lt, p); /* a base in a shared table is this arena's too */
    if (!c) {
        int in_region;
        c = ga_live_at(a, p, &in_region);
        if (!c)
            return GA_ENOTOWNED;
    }
    if (base)
        *base = c->base;
    if (size)
        *size = c->size;
    return GA_OK;
}

/* On the arena's own table (ga_arena_share_live): arena mode asks on every free. */
size_t ga_live_size(const ga_arena_t *a, uintptr_t p)
{
    const ga_chunk_t *c = a ? ga_live_find(&a->live, p) : NULL;
    return c ? c->size : 0;
}

size_t ga_live_bases(const ga_arena_t *a, uintptr_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; a && a->live.slots && i <= a->live.mask; i++) {
        const ga_chunk_t *c = a->live.slots[i].chunk;
        if (c && n++ < max)
            out[n - 1] = c->base;
    }
    return n;
}

size_t ga_trim(ga_arena_t *a)
{
    return a ? ga_release_empty(a) : 0;
}

size_t ga_refused_idle(const ga_arena_t *a, size_t *largest)
{
    size_t bytes = 0, top = 0;
    for (size_t i = 0; a && i < a->nregions; i++) {
        const ga_region_t *r = a->regions[i];
        if (r->refused && ga_is_free(r->first) && r->first->size == r->size) {
            bytes += r->size;
            top = r->size > top ? r->size : top;
        }
    }
    if (largest)
        *largest = top;
    return bytes;
}

size_t ga_idle(const ga_arena_t *a)
{
    size_t bytes = 0;
    for (size_t i = 0; a && i < a->nregions; i++)
        if (ga_is_free(a->regions[i]->first) && a->regions[i]->first->size == a->regions[i]->size)
            bytes += a->regions[i]->size;
    return bytes;
}
