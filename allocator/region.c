/* gpuarena allocator regions: obtaining address ranges from the backend (preallocation,
 * geometric growth, retry smaller, the byte limit), giving them back (trim, release before
 * OOM), and resolving an arbitrary address to its region and chunk.
 *
 * Regions are few (growth doubles), so they live in a plain array sorted by base and are found
 * by binary search. Inside a region, chunk starts are marked in a hierarchical bitmap (one bit
 * per GA_ALIGN granule, 1/4096 of the region size in host memory, zero pages until touched);
 * the nearest start at or below an address is a handful of word scans whatever the number of
 * chunks, and the start resolves to a live chunk through the pointer table. Free chunks need no
 * struct lookup: an address whose chunk start is not live lies in a free chunk.
 */
#include <stdlib.h>

#include "internal.h"

/* Hierarchical bitmap ------------------------------------------------------------------------- */

/* Touches every page of a fresh index now, when the region is taken, so that the first frees and
 * splits in a large region do not each pay a page fault on the hot path (a 100 GiB region has a
 * 25 MiB index). calloc'd memory is zero, so writing zero changes nothing but the mapping. */
static void prefault(void *p, size_t len)
{
    volatile unsigned char *c = p;
    for (size_t off = 0; off < len; off += 4096)
        c[off] = 0;
}

int ga_bitidx_init(ga_bitidx_t *b, size_t bits)
{
    memset(b, 0, sizeof *b);
    size_t words = (bits + 63) / 64;
    do {
        if (b->nlevels == GA_BITIDX_MAX_LEVELS)
            return -1;
        b->level[b->nlevels] = ga_host_calloc(words ? words : 1, sizeof(uint64_t));
        if (!b->level[b->nlevels])
            return -1;
        prefault(b->level[b->nlevels], (words ? words : 1) * sizeof(uint64_t));
        b->words[b->nlevels++] = words;
        words = (words + 63) / 64;
    } while (b->words[b->nlevels - 1] > 1);
    return 0;
}

void ga_bitidx_fini(ga_bitidx_t *b)
{
    for (unsigned i = 0; i < b->nlevels; i++)
        free(b->level[i]);
    memset(b, 0, sizeof *b);
}

int ga_bitidx_test(const ga_bitidx_t *b, size_t i)
{
    return (int)((b->level[0][i >> 6] >> (i & 63)) & 1);
}

int64_t ga_bitidx_prev(const ga_bitidx_t *b, size_t i)
{
    unsigned l = 0;
    int64_t idx = (int64_t)i;
    for (;;) { /* climb until a word holds a set bit at or below idx */
        if (idx < 0)
            return -1;
        unsigned k = (unsigned)(idx & 63);
        uint64_t mask = k == 63 ? ~0ull : (1ull << (k + 1)) - 1;
        uint64_t w = b->level[l][idx >> 6] & mask;
        if (w) {
            idx = (idx & ~(int64_t)63) + ga_msb64(w);
            break;
        }
        if (l + 1 == b->nlevels)
            return -1;
        idx = (idx >> 6) - 1;
        l++;
    }
    while (l > 0) { /* a set summary bit means its word below is non-empty: take its top bit */
        l--;
        idx = idx * 64 + ga_msb64(b->level[l][idx]);
    }
    return idx;
}

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

/* Builds the host-side region for a range the backend gave; -1 if host memory ran out. */
static ga_region_t *region_new(ga_arena_t *a, uintptr_t base, size_t size)
{
    ga_region_t *r = ga_host_calloc(1, sizeof *r);
    ga_chunk_t *c = ga_chunk_new(a);
    if (!r || !c || ga_bitidx_init(&r->starts, size / GA_ALIGN) != 0) {
        if (r)
            ga_bitidx_fini(&r->starts);
        free(r);
        if (c)
            ga_chunk_put(a, c);
        return NULL;
    }
    r->base = base;
    r->size = size;
    c->base = base;
    c->size = size;
    c->region = r;
    r->first = c;
    ga_bitidx_set(&r->starts, 0);
    return r;
}

static void region_free(ga_arena_t *a, ga_region_t *r)
{
    ga_chunk_put(a, r->first);
    ga_bitidx_fini(&r->starts);
    free(r);
}

ga_status_t ga_region_add(ga_arena_t *a, size_t size)
{
    uintptr_t base = 0;
    if (a->backend.reserve(a->backend.ctx, size, &base) != 0)
        return GA_ENOMEM;
    /* A backend that breaks its contract must not corrupt the arena: refuse the range. */
    ga_region_t *r = NULL;
    if (base % GA_ALIGN == 0 && base + size > base && !overlaps(a, base, size))
        r = region_new(a, base, size);
    if (!r || region_insert(a, r) != 0) {
        if (r)
            region_free(a, r);
        a->backend.release(a->backend.ctx, base, size);
        a->stats.backend_reserves++;
        a->stats.backend_releases++;
        return GA_ENOMEM;
    }
    ga_bin_insert(a, r->first);
    ga_stats_t *s = &a->stats;
    s->backend_reserves++;
    s->regions++;
    s->reserved += size;
    if (s->reserved > s->peak_reserved)
        s->peak_reserved = s->reserved;
    s->total_free += size;
    a->last_region_size = size;
    return GA_OK;
}

void ga_region_release(ga_arena_t *a, size_t i)
{
    ga_region_t *r = a->regions[i];
    uintptr_t base = r->base;
    size_t size = r->size;
    ga_bin_remove(a, r->first);
    region_free(a, r);
    memmove(&a->regions[i], &a->regions[i + 1], (a->nregions - i - 1) * sizeof *a->regions);
    a->nregions--;
    a->backend.release(a->backend.ctx, base, size);
    ga_stats_t *s = &a->stats;
    s->backend_releases++;
    s->regions--;
    s->reserved -= size;
    s->total_free -= size;
}

size_t ga_release_empty(ga_arena_t *a)
{
    size_t bytes = 0;
    for (size_t i = a->nregions; i-- > 0;) {
        ga_region_t *r = a->regions[i];
        if (r->first->is_free && r->first->size == r->size) {
            bytes += r->size;
            ga_region_release(a, i);
        }
    }
    return bytes;
}

/* Growth -------------------------------------------------------------------------------------- */

/* One growth attempt: the geometric size clipped to the limit, halving on backend refusal down
 * to the request itself. */
static ga_status_t try_grow(ga_arena_t *a, size_t rounded)
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
    if (want < rounded)
        want = rounded;
    if (want > room)
        want = room & ~(GA_ALIGN - 1);
    for (;;) {
        if (ga_region_add(a, want) == GA_OK)
            return GA_OK;
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
    if (try_grow(a, rounded) == GA_OK)
        return GA_OK;
    if (ga_release_empty(a) == 0)
        return GA_ENOMEM;
    return try_grow(a, rounded);
}

/* Address queries ----------------------------------------------------------------------------- */

ga_chunk_t *ga_live_at(const ga_arena_t *a, uintptr_t p, int *in_region)
{
    ga_region_t *r = ga_region_find(a, p);
    *in_region = r != NULL;
    if (!r)
        return NULL;
    int64_t g = ga_bitidx_prev(&r->starts, ga_granule(r, p));
    if (g < 0) /* cannot happen: the region start is always a chunk start */
        return NULL;
    uintptr_t start = r->base + (uintptr_t)g * GA_ALIGN;
    ga_chunk_t *c;
    HASH_FIND(hh, a->live, &start, sizeof start, c);
    return c;
}

int ga_owns(const ga_arena_t *a, uintptr_t p)
{
    return a && ga_region_find(a, p) != NULL;
}

ga_status_t ga_lookup(ga_arena_t *a, uintptr_t p, uintptr_t *base, size_t *size)
{
    if (!a)
        return GA_EINVAL;
    ga_chunk_t *c;
    HASH_FIND(hh, a->live, &p, sizeof p, c);
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

size_t ga_trim(ga_arena_t *a)
{
    return a ? ga_release_empty(a) : 0;
}
