/* gpuarena vmm pool: best fit over a reserved virtual range, physical memory only where live
 * allocations lie.
 *
 * Placement is the arena's (ga_arena.h) over virtual ranges: the arena is given a backend whose
 * "regions" are address space from va_reserve, so it never holds physical memory and never runs
 * out while a range can be had. Physical memory is mapped per granule: refs[g] counts the live
 * allocations touching granule g, and the granule is mapped (backend map) when that count leaves
 * 0 and unmapped when it returns there. Addresses never move, and nothing fragments across
 * regions: freed memory goes back to the device granule by granule.
 *
 * Remapping churn (a training step that frees and reallocates the same buffers) is absorbed by a
 * cache: a granule whose count returns to 0 stays mapped ("kept") while the kept bytes stay within
 * cfg.keep, and is reused by the next allocation that touches it at no backend cost. Whenever a
 * new granule must be mapped, a kept one is given back first, so mapped memory only grows when no
 * kept granule is left: the peak of mapped memory is the same as with no cache at all. Kept
 * granules sit on a stack that is cleaned lazily (an entry whose granule was reused since is
 * skipped when popped), which keeps reuse O(1) and needs no list surgery.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

typedef struct ga_vrange {
    uintptr_t base;
    size_t size;       /* bytes of address space, a multiple of the granularity */
    size_t ngran;
    uint32_t *refs;    /* live allocations touching each granule */
    uint64_t *handle;  /* the backend's handle of a mapped granule; 0 = unmapped */
    uint8_t *stacked;  /* on the kept stack (maybe stale) */
} ga_vrange_t;

typedef struct ga_kslot {
    uintptr_t base; /* the range's base: a range released since makes the entry stale */
    size_t g;
} ga_kslot_t;

struct ga_vmm {
    ga_pool_t *pool;
    ga_vrange_t *ranges;
    size_t nranges, cap;
    size_t gran;
    ga_kslot_t *stack;
    size_t nstack, capstack;
};

/* Address space (the arena's backend) -------------------------------------------------------- */

static ga_vrange_t *range_of(const ga_vmm_t *v, uintptr_t addr)
{
    for (size_t i = 0; i < v->nranges; i++)
        if (addr - v->ranges[i].base < v->ranges[i].size)
            return &v->ranges[i];
    return NULL;
}

static void range_free_host(ga_vrange_t *r)
{
    free(r->refs);
    free(r->handle);
    free(r->stacked);
}

static int va_adapt_reserve(void *ctx, size_t size, uintptr_t *base)
{
    ga_pool_t *p = ctx;
    ga_vmm_t *v = p->vmm;
    size_t vsize = (size + v->gran - 1) & ~(v->gran - 1);
    if (vsize < size || (v->nranges == v->cap && v->cap > SIZE_MAX / 2 / sizeof *v->ranges))
        return -1;
    if (v->nranges == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        ga_vrange_t *grown = realloc(v->ranges, cap * sizeof *grown);
        if (!grown)
            return -1;
        v->ranges = grown, v->cap = cap;
    }
    ga_vrange_t r = {.size = vsize, .ngran = vsize / v->gran};
    r.refs = calloc(r.ngran, sizeof *r.refs);
    r.handle = calloc(r.ngran, sizeof *r.handle);
    r.stacked = calloc(r.ngran, 1);
    if (!r.refs || !r.handle || !r.stacked ||
        p->be.va_reserve(p->be.ctx, vsize, &r.base) != 0) {
        range_free_host(&r);
        return -1;
    }
    v->ranges[v->nranges++] = r;
    p->own.backend_reserves++;
    p->own.va_reserved += vsize;
    *base = r.base;
    return 0;
}

static void unmap_granule(ga_pool_t *p, ga_vrange_t *r, size_t g)
{
    ga_vmm_t *v = p->vmm;
    p->be.unmap(p->be.ctx, r->base + g * v->gran, v->gran, r->handle[g]);
    r->handle[g] = 0;
    p->own.reserved -= v->gran;
    p->own.backend_unmaps++;
}

/* The arena gives a range back (empty, or the pool is being destroyed): unmap what is still
 * mapped there (kept granules; everything on destroy), then the address space. */
static void va_adapt_release(void *ctx, uintptr_t base, size_t size)
{
    ga_pool_t *p = ctx;
    ga_vmm_t *v = p->vmm;
    (void)size;
    ga_vrange_t *r = range_of(v, base);
    if (!r)
        return;
    for (size_t g = 0; g < r->ngran; g++) {
        if (!r->handle[g])
            continue;
        if (!r->refs[g])
            p->own.kept -= v->gran;
        unmap_granule(p, r, g);
    }
    p->be.va_release(p->be.ctx, r->base, r->size);
    p->own.backend_releases++;
    p->own.va_reserved -= r->size;
    range_free_host(r);
    size_t i = (size_t)(r - v->ranges);
    memmove(r, r + 1, (v->nranges - i - 1) * sizeof *r);
    v->nranges--;
}

/* The kept cache ------------------------------------------------------------------------------- */

static int push_kept(ga_vmm_t *v, ga_vrange_t *r, size_t g)
{
    if (r->stacked[g])
        return 0;
    if (v->nstack == v->capstack) {
        size_t cap = v->capstack ? v->capstack * 2 : 64;
        ga_kslot_t *grown = realloc(v->stack, cap * sizeof *grown);
        if (!grown)
            return -1;
        v->stack = grown, v->capstack = cap;
    }
    v->stack[v->nstack++] = (ga_kslot_t){r->base, g};
    r->stacked[g] = 1;
    return 0;
}

/* Gives back the most recently kept granule still kept; 0 when none was. */
static int release_one_kept(ga_pool_t *p)
{
    ga_vmm_t *v = p->vmm;
    while (p->own.kept && v->nstack) {
        ga_kslot_t k = v->stack[--v->nstack];
        ga_vrange_t *r = range_of(v, k.base);
        if (!r || r->base != k.base)
            continue;
        r->stacked[k.g] = 0;
        if (r->refs[k.g] || !r->handle[k.g])
            continue; /* reused since it was kept */
        p->own.kept -= v->gran;
        unmap_granule(p, r, k.g);
        return 1;
    }
    return 0;
}

static size_t release_all_kept(ga_pool_t *p)
{
    size_t n = 0;
    while (release_one_kept(p))
        n++;
    return n * p->vmm->gran;
}

/* Granules ------------------------------------------------------------------------------------- */

static int map_granule(ga_pool_t *p, ga_vrange_t *r, size_t g)
{
    ga_vmm_t *v = p->vmm;
    ga_stats_t *s = &p->own;
    release_one_kept(p); /* the cache never raises the peak of mapped memory */
    if (p->cfg.limit && s->reserved + v->gran > p->cfg.limit)
        return -1;
    uint64_t h = 0;
    int rc = p->be.map(p->be.ctx, r->base + g * v->gran, v->gran, &h);
    if ((rc != 0 || !h) && release_all_kept(p))
        rc = p->be.map(p->be.ctx, r->base + g * v->gran, v->gran, &h);
    if (rc != 0 || !h)
        return -1;
    r->handle[g] = h;
    s->reserved += v->gran;
    s->backend_maps++;
    if (s->reserved > s->peak_reserved)
        s->peak_reserved = s->reserved;
    return 0;
}

/* One live allocation fewer on granules g0..g1; a granule left with none is kept or unmapped. */
static void uncover(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1, int allow_keep)
{
    ga_vmm_t *v = p->vmm;
    ga_stats_t *s = &p->own;
    for (size_t g = g0; g <= g1 && g0 <= g1; g++) {
        if (--r->refs[g])
            continue;
        if (allow_keep && s->kept + v->gran <= p->cfg.keep && push_kept(v, r, g) == 0) {
            s->kept += v->gran;
            if (s->kept > s->peak_kept)
                s->peak_kept = s->kept;
        } else {
            unmap_granule(p, r, g);
        }
    }
}

/* Whether covering g0..g1 would take mapped bytes past the limit: new granules are mapped after
 * giving back as many kept granules (other than the ones reused here) as there are. Checked first
 * so that a refusal maps nothing at all. */
static int over_limit(const ga_pool_t *p, const ga_vrange_t *r, size_t g0, size_t g1)
{
    uint64_t gran = p->vmm->gran, need = 0, reuse = 0;
    for (size_t g = g0; g <= g1; g++) {
        need += !r->refs[g] && !r->handle[g];
        reuse += !r->refs[g] && r->handle[g];
    }
    uint64_t other_kept = p->own.kept / gran - reuse;
    uint64_t grows = need > other_kept ? need - other_kept : 0;
    return p->own.reserved + grows * gran > p->cfg.limit;
}

/* One live allocation more on the granules of [a, a + len); maps what is not mapped. On failure
 * nothing is left mapped or counted for it. */
static int cover(ga_pool_t *p, uintptr_t a, size_t len)
{
    ga_vmm_t *v = p->vmm;
    ga_vrange_t *r = range_of(v, a);
    if (!r)
        return -1;
    size_t g0 = (a - r->base) / v->gran, g1 = (a + len - 1 - r->base) / v->gran;
    if (p->cfg.limit && over_limit(p, r, g0, g1))
        return -1;
    for (size_t g = g0; g <= g1; g++) {
        if (r->refs[g]++)
            continue;
        if (r->handle[g]) { /* a kept granule: reused at no cost */
            p->own.kept -= v->gran;
            continue;
        }
        if (map_granule(p, r, g) != 0) {
            r->refs[g]--;
            if (g > g0)
                uncover(p, r, g0, g - 1, 0);
            return -1;
        }
    }
    return 0;
}

/* The pool ------------------------------------------------------------------------------------ */

ga_status_t ga_vmm_create(ga_pool_t *p)
{
    ga_vmm_t *v = calloc(1, sizeof *v);
    if (!v)
        return GA_ENOMEM;
    v->pool = p;
    v->gran = p->be.granularity;
    p->vmm = v;
    size_t va = (p->cfg.va_size + v->gran - 1) & ~(v->gran - 1);
    if (va < p->cfg.va_size) {
        free(v);
        return GA_EINVAL;
    }
    ga_backend_t be = {va_adapt_reserve, va_adapt_release, p};
    ga_config_t ac = {.initial = va, .grow = 1, .limit = 0, .min_region = va};
    ga_status_t st = GA_OK;
    p->arena = ga_arena_create(&be, &ac, &st);
    if (!p->arena) {
        free(v->ranges);
        free(v);
        p->vmm = NULL;
        return st;
    }
    return GA_OK;
}

void ga_vmm_destroy(ga_pool_t *p)
{
    ga_arena_destroy(p->arena); /* releases every range, unmapping what is mapped there */
    free(p->vmm->ranges);
    free(p->vmm->stack);
    free(p->vmm);
}

ga_status_t ga_vmm_alloc(ga_pool_t *p, size_t size, uintptr_t *out)
{
    size_t rounded = ga_pool_round(size);
    if (!rounded)
        return GA_EINVAL;
    uintptr_t a = 0;
    ga_status_t st = ga_alloc(p->arena, size, &a);
    if (st == GA_EINVAL)
        return st;
    if (st != GA_OK || cover(p, a, rounded) != 0) {
        if (st == GA_OK)
            ga_free(p->arena, a);
        p->own.failed_allocs++;
        return GA_ENOMEM;
    }
    ga_stats_t *s = &p->own;
    s->allocs++;
    s->in_use += rounded;
    if (s->in_use > s->peak_in_use)
        s->peak_in_use = s->in_use;
    *out = a;
    return GA_OK;
}

ga_status_t ga_vmm_free(ga_pool_t *p, uintptr_t ptr, size_t *size)
{
    uintptr_t base = 0;
    size_t len = 0;
    ga_status_t st = ga_lookup(p->arena, ptr, &base, &len);
    if (st == GA_OK && base != ptr)
        return GA_EINTERIOR;
    if ((st = ga_free(p->arena, ptr)) != GA_OK)
        return st;
    ga_vrange_t *r = range_of(p->vmm, ptr);
    size_t gran = p->vmm->gran;
    uncover(p, r, (ptr - r->base) / gran, (ptr + len - 1 - r->base) / gran, 1);
    p->own.frees++;
    p->own.in_use -= len;
    if (size)
        *size = len;
    return GA_OK;
}

size_t ga_vmm_trim(ga_pool_t *p)
{
    return release_all_kept(p);
}

void ga_vmm_stats(const ga_pool_t *p, ga_stats_t *out)
{
    ga_stats_t a;
    ga_get_stats(p->arena, &a);
    *out = p->own;
    out->in_use_requested = a.in_use_requested;
    out->live = a.live;
    out->largest_free = a.largest_free;
    out->total_free = a.total_free;
    out->regions = a.regions;
}

/* The granule state agrees with the figures: a granule in use is mapped, kept = mapped with no
 * user, every kept granule is findable on the stack, mapped bytes = reserved. */
int ga_vmm_check(const ga_pool_t *p, char *report, size_t len)
{
    int bad = ga_check(p->arena, report, len);
    const ga_vmm_t *v = p->vmm;
    uint64_t mapped = 0, kept = 0, orphan = 0, unstacked = 0;
    for (size_t i = 0; i < v->nranges; i++) {
        const ga_vrange_t *r = &v->ranges[i];
        for (size_t g = 0; g < r->ngran; g++) {
            mapped += r->handle[g] ? v->gran : 0;
            orphan += r->refs[g] && !r->handle[g];
            if (!r->refs[g] && r->handle[g]) {
                kept += v->gran;
                unstacked += !r->stacked[g];
            }
        }
    }
    int mine = (mapped != p->own.reserved) + (kept != p->own.kept) + (orphan != 0) +
               (unstacked != 0) + (p->own.kept > p->cfg.keep);
    if (mine && !bad && report && len)
        snprintf(report, len, "vmm pool: mapped %llu vs reserved %llu, kept %llu vs %llu, %llu "
                 "granules in use but unmapped, %llu kept but not stacked, keep %zu",
                 (unsigned long long)mapped, (unsigned long long)p->own.reserved,
                 (unsigned long long)kept, (unsigned long long)p->own.kept,
                 (unsigned long long)orphan, (unsigned long long)unstacked, p->cfg.keep);
    return bad + mine;
}
