/* gpuarena allocator core: arena life cycle, the segregated free lists, and the hot paths
 * ga_alloc and ga_free.
 *
 * Placement is exact best fit: the bin of the request is scanned for the smallest chunk that
 * fits, and if none does, the first non-empty bin above it (found with two bit scans) is
 * scanned for its smallest chunk; every chunk there fits and every chunk in later bins is larger.
 * Bins below 32 KiB hold a single size, so for small requests the scan stops at the first entry.
 * A chunk is split whenever anything is left over (the remainder is then at least GA_ALIGN, the
 * minimum chunk), unlike BFC which keeps up to half a chunk as waste. A free merges at once with
 * free address neighbours. Regions, growth and interior lookup live in region.c; statistics and
 * the invariant walker in check.c.
 */
#include <stdlib.h>

#include "internal.h"

/* Host memory --------------------------------------------------------------------------------- */

long ga_host_fail_after = -1;

static int host_fails(void)
{
    if (ga_host_fail_after < 0)
        return 0;
    if (ga_host_fail_after == 0)
        return 1;
    ga_host_fail_after--;
    return 0;
}

void *ga_host_malloc(size_t size) { return host_fails() ? NULL : malloc(size); }
void *ga_host_calloc(size_t n, size_t size) { return host_fails() ? NULL : calloc(n, size); }
void *ga_host_realloc(void *p, size_t size) { return host_fails() ? NULL : realloc(p, size); }

/* Chunk struct pool --------------------------------------------------------------------------- */

/* Takes a chunk struct from the pool, carving a new block when empty; NULL if host memory is
 * exhausted. */
ga_chunk_t *ga_chunk_new(ga_arena_t *a)
{
    if (!a->spare) {
        ga_chunk_block_t *blk = ga_host_malloc(sizeof *blk);
        if (!blk)
            return NULL;
        blk->next = a->blocks;
        a->blocks = blk;
        for (unsigned i = 0; i < GA_CHUNK_BLOCK; i++) {
            blk->chunks[i].next_free = a->spare;
            a->spare = &blk->chunks[i];
        }
    }
    ga_chunk_t *c = a->spare;
    a->spare = c->next_free;
    memset(c, 0, sizeof *c);
    return c;
}

void ga_chunk_put(ga_arena_t *a, ga_chunk_t *c)
{
    c->next_free = a->spare;
    a->spare = c;
}

/* Free lists ---------------------------------------------------------------------------------- */

/* Smallest chunk of at least `need` bytes in one list; equal sizes go to the lowest address,
 * which keeps allocations packed toward region starts (measured: it lowers the smallest arena
 * that runs the somas traces). */
static ga_chunk_t *scan_bin(ga_chunk_t *c, size_t need)
{
    ga_chunk_t *best = NULL;
    for (; c; c = c->next_free) {
        if (c->size < need)
            continue;
        if (!best || c->size < best->size || (c->size == best->size && c->base < best->base))
            best = c;
    }
    return best;
}

/* The first non-empty bin strictly above `bin`, or -1. */
static int next_bin(const ga_arena_t *a, unsigned bin)
{
    unsigned fl = bin / GA_SL_COUNT, sl = bin % GA_SL_COUNT;
    uint64_t slmap = sl + 1 < GA_SL_COUNT ? a->sl_bitmap[fl] & (~0ull << (sl + 1)) : 0;
    if (!slmap) {
        uint64_t flmap = fl + 1 < GA_FL_COUNT ? a->fl_bitmap & (~0ull << (fl + 1)) : 0;
        if (!flmap)
            return -1;
        fl = (unsigned)__builtin_ctzll(flmap);
        slmap = a->sl_bitmap[fl];
    }
    return (int)(fl * GA_SL_COUNT + (unsigned)__builtin_ctzll(slmap));
}

static ga_chunk_t *find_fit(const ga_arena_t *a, size_t rounded)
{
    unsigned bin = ga_bin_of(rounded);
    if (a->bins[bin]) {
        ga_chunk_t *c = scan_bin(a->bins[bin], rounded);
        if (c)
            return c;
    }
    int nb = next_bin(a, bin);
    return nb < 0 ? NULL : scan_bin(a->bins[nb], rounded);
}

/* Absorbs `right` (free, the address neighbour after `left`) into `left`. */
static void absorb(ga_arena_t *a, ga_chunk_t *left, ga_chunk_t *right)
{
    left->size += right->size;
    left->next_phys = right->next_phys;
    if (left->next_phys)
        left->next_phys->prev_phys = left;
    ga_bitidx_clear(&right->region->starts, ga_granule(right->region, right->base));
    ga_chunk_put(a, right);
}

/* Undoes split when the allocation cannot be completed: the remainder comes out of its bin and
 * merges back. */
static void unsplit(ga_arena_t *a, ga_chunk_t *c, ga_chunk_t *rest)
{
    ga_bin_remove(a, rest);
    absorb(a, c, rest);
}

/* Splits free chunk c (already out of its bin) into an allocation of `rounded` bytes at its low
 * end and a free remainder that goes back to a bin. The spare struct was taken beforehand so
 * that nothing here can fail. (Taking the high end instead, for all or only small requests, was
 * measured on the somas traces: no better, sometimes worse.) */
static void split(ga_arena_t *a, ga_chunk_t *c, size_t rounded, ga_chunk_t *rest)
{
    rest->base = c->base + rounded;
    rest->size = c->size - rounded;
    rest->region = c->region;
    rest->prev_phys = c;
    rest->next_phys = c->next_phys;
    if (rest->next_phys)
        rest->next_phys->prev_phys = rest;
    c->next_phys = rest;
    c->size = rounded;
    ga_bitidx_set(&rest->region->starts, ga_granule(rest->region, rest->base));
    ga_bin_insert(a, rest);
}

/* Rounding ------------------------------------------------------------------------------------ */

size_t ga_round_size(size_t size)
{
    if (size == 0 || size > SIZE_MAX - (GA_ALIGN - 1))
        return 0;
    return (size + GA_ALIGN - 1) & ~(GA_ALIGN - 1);
}

/* Life cycle ---------------------------------------------------------------------------------- */

static ga_status_t normalise(ga_config_t *cfg)
{
    if (cfg->initial) {
        cfg->initial = ga_round_size(cfg->initial);
        if (!cfg->initial)
            return GA_EINVAL;
    }
    if (!cfg->initial) /* no initial region to stay within: regions can only come on demand */
        cfg->grow = 1;
    cfg->limit &= ~(GA_ALIGN - 1); /* reserve sizes are multiples of GA_ALIGN anyway */
    if (!cfg->min_region)
        cfg->min_region = (size_t)2 << 20;
    cfg->min_region = ga_round_size(cfg->min_region);
    if (!cfg->min_region)
        return GA_EINVAL;
    if (cfg->limit && cfg->initial > cfg->limit)
        return GA_ENOMEM;
    return GA_OK;
}

static ga_arena_t *fail_create(ga_arena_t *a, ga_status_t st, ga_status_t *status)
{
    if (status)
        *status = st;
    ga_arena_destroy(a);
    return NULL;
}

ga_arena_t *ga_arena_create(const ga_backend_t *backend, const ga_config_t *config,
                            ga_status_t *status)
{
    if (!backend || !backend->reserve || !backend->release)
        return fail_create(NULL, GA_EINVAL, status);
    ga_arena_t *a = ga_host_calloc(1, sizeof *a);
    if (!a)
        return fail_create(NULL, GA_ENOMEM, status);
    a->backend = *backend;
    if (config)
        a->config = *config;
    ga_status_t st = normalise(&a->config);
    if (st == GA_OK && a->config.initial)
        st = ga_region_add(a, a->config.initial);
    if (st != GA_OK)
        return fail_create(a, st, status);
    if (status)
        *status = GA_OK;
    return a;
}

void ga_arena_destroy(ga_arena_t *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->nregions; i++) {
        ga_region_t *r = a->regions[i];
        a->backend.release(a->backend.ctx, r->base, r->size);
        ga_bitidx_fini(&r->starts);
        free(r);
    }
    free(a->regions);
    HASH_CLEAR(hh, a->live);
    while (a->blocks) {
        ga_chunk_block_t *next = a->blocks->next;
        free(a->blocks);
        a->blocks = next;
    }
    free(a);
}

/* Hot paths ----------------------------------------------------------------------------------- */

static ga_status_t fail_nomem(ga_arena_t *a, size_t rounded)
{
    a->stats.failed_allocs++;
    if (a->stats.total_free >= rounded)
        a->stats.frag_failures++;
    return GA_ENOMEM;
}

/* Turns free chunk c into a live allocation of `rounded` bytes (size asked: `size`). */
static ga_status_t take(ga_arena_t *a, ga_chunk_t *c, size_t rounded, size_t size)
{
    ga_chunk_t *rest = NULL;
    if (c->size > rounded && !(rest = ga_chunk_new(a)))
        return GA_ENOMEM;
    ga_bin_remove(a, c);
    if (rest)
        split(a, c, rounded, rest);
    HASH_ADD(hh, a->live, base, sizeof c->base, c);
    if (!c->hh.tbl) { /* uthash could not grow: undo, the arena stays as it was */
        if (rest)
            unsplit(a, c, rest);
        ga_bin_insert(a, c);
        return GA_ENOMEM;
    }
    c->requested = size;
    ga_stats_t *s = &a->stats;
    s->in_use += rounded;
    s->in_use_requested += size;
    if (s->in_use > s->peak_in_use)
        s->peak_in_use = s->in_use;
    s->total_free -= rounded;
    s->allocs++;
    s->live++;
    return GA_OK;
}

ga_status_t ga_alloc(ga_arena_t *a, size_t size, uintptr_t *out)
{
    if (!a || !out)
        return GA_EINVAL;
    size_t rounded = ga_round_size(size);
    if (!rounded)
        return GA_EINVAL;
    ga_chunk_t *c = find_fit(a, rounded);
    if (!c) {
        if (ga_grow(a, rounded) != GA_OK || !(c = find_fit(a, rounded)))
            return fail_nomem(a, rounded);
    }
    if (take(a, c, rounded, size) != GA_OK)
        return fail_nomem(a, rounded);
    *out = c->base;
    return GA_OK;
}

/* Why a free of an address that is not a live base fails; nothing is changed. */
static ga_status_t classify_bad_free(const ga_arena_t *a, uintptr_t ptr)
{
    int in_region = 0;
    ga_chunk_t *c = ga_live_at(a, ptr, &in_region);
    if (!in_region)
        return GA_ENOTOWNED;
    return c ? GA_EINTERIOR : GA_EDOUBLE;
}

ga_status_t ga_free(ga_arena_t *a, uintptr_t ptr)
{
    if (!a)
        return GA_EINVAL;
    ga_chunk_t *c;
    HASH_FIND(hh, a->live, &ptr, sizeof ptr, c);
    if (!c)
        return classify_bad_free(a, ptr);
    HASH_DELETE(hh, a->live, c);
    ga_stats_t *s = &a->stats;
    s->in_use -= c->size;
    s->in_use_requested -= c->requested;
    s->total_free += c->size;
    s->frees++;
    s->live--;
    c->requested = 0;
    ga_chunk_t *prev = c->prev_phys, *next = c->next_phys;
    if (next && next->is_free) {
        ga_bin_remove(a, next);
        absorb(a, c, next);
    }
    if (prev && prev->is_free) {
        ga_bin_remove(a, prev);
        absorb(a, prev, c);
        c = prev;
    }
    ga_bin_insert(a, c);
    return GA_OK;
}
