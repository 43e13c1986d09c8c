/* gpuarena vmm pool, granules: the virtual ranges the parent arena lends from (reserved from the
 * backend, with their per-granule counts, bitmaps, handles and owners), mapping and unmapping
 * granules as blocks come and go, and the cache of kept granules. How these fit together is in
 * pool_vmm.c's head comment and at ga_vrange_t (vmm_internal.h).
 */
#include <stdlib.h>
#include <string.h>

#include "vmm_internal.h"

/* The first granule of lo..hi whose bit is `on`, or hi + 1 (lo <= hi). */
static size_t bits_next(const uint64_t *b, size_t lo, size_t hi, int on)
{
    for (size_t w = lo >> 6; w <= hi >> 6; w++) {
        uint64_t x = (on ? b[w] : ~b[w]) & word_mask(w, lo, hi);
        if (x)
            return (w << 6) + (size_t)__builtin_ctzll(x);
    }
    return hi + 1;
}

/* Address space (the arena's backend) -------------------------------------------------------- */

static void first_range_changed(ga_vmm_t *v)
{
    v->base0 = v->nranges ? v->ranges[0].base : 0;
    v->size0 = v->nranges ? v->ranges[0].size : 0;
    v->refs0 = v->nranges ? v->ranges[0].refs : NULL;
    v->owner0 = v->nranges ? v->ranges[0].owner : NULL;
    v->mapped0 = v->nranges ? v->ranges[0].mapped : NULL;
}

static void range_free_host(ga_vrange_t *r)
{
    free(r->refs);
    free(r->parked);
    free(r->inner);
    free(r->mapped);
    free(r->stacked);
    free(r->handle);
    free(r->owner);
}

int ga_vmm_va_reserve(void *ctx, size_t size, uintptr_t *base)
{
    ga_pool_t *p = ctx;
    ga_vmm_t *v = p->vmm;
    size_t vsize = (size + v->gran - 1) & ~(v->gran - 1);
    if (vsize < size || (v->nranges == v->cap && v->cap > SIZE_MAX / 2 / sizeof *v->ranges))
        return -1;
    /* A range larger than the usual is asked for one block (areas grow no further than a range,
     * max_region): when its granules alone pass the limit it could never be mapped, so no
     * address space and no bookkeeping for it (a request for terabytes under a cap of megabytes
     * reserved them, and the bitmaps' host memory with them, before failing). */
    if (vsize > v->region && p->cfg.limit && vsize > p->cfg.limit)
        return -1;
    if (vsize >> v->gshift > GA_VMM_MAX_GRANULES) /* its bookkeeping alone would pass 1 GiB */
        return -1;
    if (v->nranges == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        ga_vrange_t *grown = realloc(v->ranges, cap * sizeof *grown);
        if (!grown)
            return GA_ENOHOST; /* the host's, not the device's (ga_arena.h) */
        v->ranges = grown, v->cap = cap;
    }
    ga_vrange_t r = {.size = vsize, .ngran = vsize / v->gran};
    size_t words = (r.ngran + 63) / 64;
    r.refs = calloc(r.ngran, sizeof *r.refs);
    r.parked = calloc(r.ngran, sizeof *r.parked);
    r.inner = calloc(words, sizeof *r.inner);
    r.mapped = calloc(words, sizeof *r.mapped);
    r.stacked = calloc(words, sizeof *r.stacked);
    /* A backend that maps runs keeps no handles: none are stored (8 bytes a granule). */
    r.handle = p->be.map_run ? NULL : calloc(r.ngran, sizeof *r.handle);
    r.owner = calloc(r.ngran, sizeof *r.owner);
    /* Out of host memory for the range's tables: GA_ENOHOST, which the pool answers as such; it
     * was an out-of-memory of the device, said as the address space refused (a sweep of host
     * failures, 2026-12-06). */
    int nohost = !r.refs || !r.parked || !r.inner || !r.mapped || !r.stacked || (!r.handle && !p->be.map_run) ||
                 !r.owner;
    if (nohost || p->be.va_reserve(p->be.ctx, vsize, &r.base) != 0) {
        range_free_host(&r);
        return nohost ? GA_ENOHOST : -1;
    }
    v->ranges[v->nranges++] = r;
    first_range_changed(v);
    p->own.backend_reserves++;
    p->own.va_reserved += vsize;
    *base = r.base;
    return 0;
}

/* Unmaps the n mapped granules from g: one call of a backend that maps runs, else granule by
 * granule with their handles. */
static void unmap_granules(ga_pool_t *p, ga_vrange_t *r, size_t g, size_t n)
{
    ga_vmm_t *v = p->vmm;
    if (p->be.unmap_run) {
        p->be.unmap_run(p->be.ctx, r->base + (g << v->gshift), v->gran, n);
    } else {
        for (size_t i = g; i < g + n; i++) {
            p->be.unmap(p->be.ctx, r->base + (i << v->gshift), v->gran, r->handle[i]);
            r->handle[i] = 0;
        }
    }
    bits_put(r->mapped, g, g + n - 1, 0);
    p->own.reserved -= (uint64_t)n << v->gshift;
    p->own.backend_unmaps += n;
}

/* The arena gives a range back (empty, or the pool is being destroyed): unmap what is still
 * mapped there (kept granules; everything on destroy), then the address space. */
int ga_vmm_va_release(void *ctx, uintptr_t base, size_t size)
{
    ga_pool_t *p = ctx;
    ga_vmm_t *v = p->vmm;
    (void)size;
    ga_vrange_t *r = range_of(v, base);
    if (!r)
        return 0;
    /* The mapped ones only, a run at a time (a pool destroyed with ten blocks of 1 TiB live, as
     * a failing trial of the smallest-size search leaves it, holds 5 million granules). */
    size_t last = r->ngran - 1;
    for (size_t g = bits_next(r->mapped, 0, last, 1); g <= last;) {
        size_t end = g < last ? bits_next(r->mapped, g + 1, last, 0) : last + 1;
        for (size_t i = g; i < end; i++)
            if (!in_use(r, i))
                p->own.kept -= v->gran;
        unmap_granules(p, r, g, end - g);
        g = end < last ? bits_next(r->mapped, end + 1, last, 1) : last + 1;
    }
    p->be.va_release(p->be.ctx, r->base, r->size);
    p->own.backend_releases++;
    p->own.va_reserved -= r->size;
    range_free_host(r);
    size_t i = (size_t)(r - v->ranges);
    memmove(r, r + 1, (v->nranges - i - 1) * sizeof *r);
    v->nranges--;
    first_range_changed(v);
    return 0;
}

/* The kept cache ------------------------------------------------------------------------------- */

/* Room on the stack for n more runs: 0, or -1 out of host memory. */
static int stack_reserve(ga_vmm_t *v, size_t n)
{
    if (v->nstack + n <= v->capstack)
        return 0;
    size_t cap = v->capstack ? v->capstack : 64;
    while (cap < v->nstack + n)
        cap *= 2;
    ga_kslot_t *grown = realloc(v->stack, cap * sizeof *grown);
    if (!grown)
        return -1;
    v->stack = grown, v->capstack = cap;
    return 0;
}

/* Granules lo..hi of r become kept: those not on the stack yet go on it, as runs, in ascending
 * order (the caller reserved (hi - lo) / 2 + 1 runs: at most that many runs of unstacked
 * granules alternate with stacked ones). */
static void push_kept(ga_vmm_t *v, ga_vrange_t *r, size_t lo, size_t hi)
{
    if (bits_all(r->stacked, lo, hi))
        return; /* a block freed again whose granules were kept before: nothing to push */
    for (size_t g = bits_next(r->stacked, lo, hi, 0); g <= hi;) {
        size_t end = g < hi ? bits_next(r->stacked, g + 1, hi, 1) : hi + 1;
        v->stack[v->nstack++] = (ga_kslot_t){r->base, g, end - g};
        bits_put(r->stacked, g, end - 1, 1);
        g = end < hi ? bits_next(r->stacked, end + 1, hi, 0) : hi + 1;
    }
}

/* Gives back the most recently kept granule still kept; 0 when none was. */
static int release_one_kept(ga_pool_t *p)
{
    ga_vmm_t *v = p->vmm;
    while (p->own.kept && v->nstack) {
        ga_kslot_t *k = &v->stack[v->nstack - 1];
        ga_vrange_t *r = range_of(v, k->base);
        size_t g = k->g + --k->n;
        if (!k->n)
            v->nstack--;
        if (!r || r->base != k->base || g >= r->ngran)
            continue; /* its range was released since */
        r->stacked[g >> 6] &= ~(1ull << (g & 63));
        if (in_use(r, g) || !bit_get(r->mapped, g))
            continue; /* reused since it was kept */
        p->own.kept -= v->gran;
        unmap_granules(p, r, g, 1);
        return 1;
    }
    return 0;
}

size_t ga_vmm_release_all_kept(ga_pool_t *p)
{
    size_t n = 0;
    while (release_one_kept(p))
        n++;
    return n * p->vmm->gran;
}

/* Granules ------------------------------------------------------------------------------------- */

/* Granules in the ways a backend maps them: a run in one call (map_run), or one granule and its
 * handle. 0, or non-zero with nothing mapped. */
static int backend_map(ga_pool_t *p, ga_vrange_t *r, size_t g, size_t n)
{
    ga_vmm_t *v = p->vmm;
    uintptr_t a = r->base + (g << v->gshift);
    if (p->be.map_run)
        return p->be.map_run(p->be.ctx, a, v->gran, n);
    uint64_t h = 0;
    int rc = p->be.map(p->be.ctx, a, v->gran, &h); /* n == 1: the granule-by-granule path */
    if (rc == 0 && h)
        r->handle[g] = h;
    return rc != 0 || !h;
}

/* n granules from g were mapped: their bits and the figures. */
static inline __attribute__((always_inline)) void mapped_now(ga_pool_t *p, ga_vrange_t *r,
                                                           size_t g, size_t n)
{
    ga_stats_t *s = &p->own;
    bits_put(r->mapped, g, g + n - 1, 1);
    s->reserved += (uint64_t)n << p->vmm->gshift;
    s->backend_maps += n;
    if (s->reserved > s->peak_reserved)
        s->peak_reserved = s->reserved;
}

static int map_granule(ga_pool_t *p, ga_vrange_t *r, size_t g)
{
    ga_vmm_t *v = p->vmm;
    ga_stats_t *s = &p->own;
    release_one_kept(p); /* the cache never raises the peak of mapped memory */
    if (p->cfg.limit && s->reserved + v->gran > p->cfg.limit)
        return -1;
    int rc = backend_map(p, r, g, 1);
    if (rc != 0 && ga_vmm_release_all_kept(p))
        rc = backend_map(p, r, g, 1);
    if (rc != 0)
        return -1;
    mapped_now(p, r, g, 1);
    return 0;
}

/* Granule g of a block spanning g0..g1 gets the block as a user: 1 if it had one already.
 * `whole`: a block of the aligned area, the only user of each of its granules. */
static int use_one(ga_vrange_t *r, size_t g, size_t g0, size_t g1, int whole)
{
    if (!whole && (g == g0 || g == g1))
        return r->refs[g]++ != 0;
    r->inner[g >> 6] |= 1ull << (g & 63); /* an inner granule: the block's alone */
    return 0;
}

/* Freed granules f0..f1 of which the first `kept` stay kept: those not on the stack yet are pushed
 * (if host memory allows; else they are given back too), the rest unmapped. Out of line: a block
 * freed again whose granules are still kept and stacked, the common case, needs none of it. */
static OUT_OF_LINE size_t keep_or_unmap(ga_pool_t *p, ga_vrange_t *r, size_t f0, size_t f1,
                                        size_t kept)
{
    ga_vmm_t *v = p->vmm;
    if (kept && stack_reserve(v, (kept - 1) / 2 + 1) != 0)
        kept = 0; /* out of host memory: given back instead */
    if (kept)
        push_kept(v, r, f0, f0 + kept - 1);
    if (f0 + kept <= f1)
        unmap_granules(p, r, f0 + kept, f1 - f0 - kept + 1);
    return kept;
}

/* Granules f0..f1 are left with no user: kept while the cache has room, the rest unmapped. */
static inline __attribute__((always_inline)) void keep_freed(ga_pool_t *p, ga_vrange_t *r,
                                                             size_t f0, size_t f1)
{
    ga_stats_t *s = &p->own;
    unsigned sh = p->vmm->gshift;
    size_t n = f1 - f0 + 1;
    size_t keep = p->vmm->keep_now;
    size_t room = keep > s->kept ? (size_t)((keep - s->kept) >> sh) : 0;
    size_t kept = n < room ? n : room;
    if (kept < n || !bits_all(r->stacked, f0, f1))
        kept = keep_or_unmap(p, r, f0, f1, kept);
    if (kept) {
        s->kept += (uint64_t)kept << sh;
        if (s->kept > s->peak_kept)
            s->peak_kept = s->kept;
    }
}

OUT_OF_LINE void ga_vmm_keep_freed_slow(ga_pool_t *p, ga_vrange_t *r, size_t f0, size_t f1)
{
    keep_freed(p, r, f0, f1);
}

/* One live block fewer on granules g0..g1 (its first and last); the granules left with no user
 * (always one run) are kept while the cache has room, the rest unmapped. */
static inline __attribute__((always_inline)) void uncover_body(ga_pool_t *p, ga_vrange_t *r,
                                                               size_t g0, size_t g1, int whole)
{
    size_t f0 = g0, f1 = g1; /* the granules freed */
    if (whole) {
        bits_put(r->inner, g0, g1, 0); /* the aligned area's block: all its granules are free */
    } else if (g0 == g1) {
        if (--r->refs[g0])
            return;
    } else {
        f0 += --r->refs[g0] != 0;
        f1 -= --r->refs[g1] != 0;
        if (g1 > g0 + 1)
            bits_put(r->inner, g0 + 1, g1 - 1, 0);
        if (f0 > f1)
            return;
    }
    keep_freed(p, r, f0, f1);
}

/* uncover_body for the paths that do not inline it (the general area's frees of blocks whose
 * granule is left with no user, and the rarer frees). */
OUT_OF_LINE void ga_vmm_uncover_granules(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1)
{
    uncover_body(p, r, g0, g1, 0);
}

OUT_OF_LINE void ga_vmm_uncover_whole_slow(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1)
{
    uncover_body(p, r, g0, g1, 1);
}

/* Whether mapping `need` new granules while reusing `reuse` kept ones takes mapped bytes past
 * the limit: new granules are mapped after giving back as many kept granules (other than the
 * ones reused here) as there are. Checked first so that a refusal maps nothing at all. */
static int over_limit(const ga_pool_t *p, uint64_t need, uint64_t reuse)
{
    uint64_t other_kept = (p->own.kept >> p->vmm->gshift) - reuse;
    uint64_t grows = need > other_kept ? need - other_kept : 0;
    return p->own.reserved + grows * p->vmm->gran > p->cfg.limit;
}

/* Whether the device has room for `need` new granules while `reuse` kept ones are reused: as
 * many other kept granules are given back first (map_granule), so only the rest must fit in what
 * the driver has free. */
static int device_has_room(const ga_pool_t *p, uint64_t need, uint64_t reuse)
{
    uint64_t other_kept = (p->own.kept >> p->vmm->gshift) - reuse;
    uint64_t grows = need > other_kept ? need - other_kept : 0;
    return grows <= (uint64_t)(p->be.device_free(p->be.ctx) >> p->vmm->gshift);
}

/* Granules a..b of a block on g0..g1 get the block as a user (on), or lose it, as use_one and
 * unuse_one do one by one: the ends a count, the rest their inner bit, a word at a time. */
static void use_run(ga_vrange_t *r, size_t a, size_t b, size_t g0, size_t g1, int whole, int on)
{
    if (!whole && a == g0) {
        r->refs[g0] = on ? r->refs[g0] + 1 : r->refs[g0] - 1;
        a++;
    }
    if (!whole && b == g1 && g1 != g0 && a <= b) {
        r->refs[g1] = on ? r->refs[g1] + 1 : r->refs[g1] - 1;
        b--;
    }
    if (a <= b)
        bits_put(r->inner, a, b, on);
}

/* Maps the n unmapped granules from g as map_granule does one at a time, in one backend call:
 * before each a kept granule given back while any is, as many as the limit leaves room for, and
 * a refusal retried once after giving back every kept granule. Returns how many it mapped. */
static size_t map_run(ga_pool_t *p, ga_vrange_t *r, size_t g, size_t n)
{
    ga_stats_t *s = &p->own;
    for (size_t i = 0; i < n && release_one_kept(p); i++)
        ;
    size_t fit = n;
    if (p->cfg.limit) {
        uint64_t room = p->cfg.limit > s->reserved
                        ? (p->cfg.limit - s->reserved) >> p->vmm->gshift : 0;
        fit = room < n ? (size_t)room : n;
    }
    if (!fit)
        return 0;
    int rc = backend_map(p, r, g, fit);
    if (rc != 0 && ga_vmm_release_all_kept(p))
        rc = backend_map(p, r, g, fit);
    if (rc != 0)
        return 0;
    mapped_now(p, r, g, fit);
    return fit;
}

/* After a refusal, the block's granules u0..u1 (none with another user: the ones it is the first
 * user of) lose it, and those mapped (kept ones it took, and ones it mapped) are given back. */
static void uncover_refused(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1, size_t u0,
                            size_t u1, int whole)
{
    use_run(r, g0, g1, g0, g1, whole, 0);
    for (size_t g = bits_next(r->mapped, u0, u1, 1); g <= u1;) {
        size_t end = g < u1 ? bits_next(r->mapped, g + 1, u1, 0) : u1 + 1;
        unmap_granules(p, r, g, end - g);
        g = end < u1 ? bits_next(r->mapped, end, u1, 1) : u1 + 1;
    }
}

/* cover_mapping for a backend that maps runs (map_run): the same steps with the same outcome,
 * figures and backend counts, a run at a time. The block takes all its granules first, the kept
 * ones among the fresh granules u0..u1 leaving the kept bytes, then maps the unmapped runs in
 * order. On failure nothing is left mapped or counted for the block. A block of 1 TiB, 524,288
 * granules of 2 MiB, took 4 ms granule by granule and takes tens of microseconds. */
static OUT_OF_LINE int cover_runs(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1, size_t u0,
                                  size_t u1, int whole)
{
    size_t kept = bits_count(r->mapped, u0, u1);
    use_run(r, g0, g1, g0, g1, whole, 1);
    p->own.kept -= (uint64_t)kept << p->vmm->gshift;
    for (size_t g = bits_next(r->mapped, u0, u1, 0); g <= u1;) {
        size_t end = g < u1 ? bits_next(r->mapped, g + 1, u1, 1) : u1 + 1;
        if (map_run(p, r, g, end - g) < end - g) {
            uncover_refused(p, r, g0, g1, u0, u1, whole);
            return -1;
        }
        g = end < u1 ? bits_next(r->mapped, end, u1, 0) : u1 + 1;
    }
    return 0;
}

/* ga_vmm_cover_granules when some of the `fresh` granules u0..u1 the block is the first user of
 * are not mapped. The block takes every granule first, so that the kept ones it reuses are in use
 * before anything is mapped: a map gives back a kept granule first (the cache never raises the
 * peak), and taken in address order the block's own kept granules further on were given back
 * and mapped again (a 14 MiB block over 3 kept granules: 3 unmaps and 7 maps instead of 4 maps,
 * once parked blocks were given back in another order). Then the unmapped granules are mapped one
 * by one; on failure nothing is left mapped or counted for the block. */
static OUT_OF_LINE int cover_mapping(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1,
                                     size_t u0, size_t u1, size_t fresh, int whole)
{
    ga_vmm_t *v = p->vmm;
    if (v->nparked)
        return GA_VMM_UNPARK; /* parked blocks go back first: they may make the map needless */
    size_t kept = bits_count(r->mapped, u0, u1), need = fresh - kept;
    if (p->cfg.limit && over_limit(p, need, kept))
        return -1;
    if (need >= GA_VMM_PRECHECK && p->be.device_free && !device_has_room(p, need, kept))
        return -1;
    if (p->be.map_run)
        return cover_runs(p, r, g0, g1, u0, u1, whole);
    for (size_t g = g0; g <= g1; g++)
        use_one(r, g, g0, g1, whole);
    p->own.kept -= (uint64_t)kept << v->gshift;
    for (size_t g = u0; g <= u1; g++) {
        if (bit_get(r->mapped, g))
            continue;
        if (map_granule(p, r, g) != 0) {
            uncover_refused(p, r, g0, g1, u0, u1, whole);
            return -1;
        }
    }
    return 0;
}

/* One live block more on granules g0..g1 of r (its first and last). The granules it is the first
 * user of are one run, u0..u1; when all of them are mapped (free, kept ones) the block takes them
 * in a few word operations, nothing to map and the limit not concerned. */
OUT_OF_LINE int ga_vmm_cover_granules(ga_pool_t *p, ga_vrange_t *r, size_t g0, size_t g1)
{
    size_t u0 = g0 + (r->refs[g0] != 0), u1 = g1 - (g1 != g0 && r->refs[g1] != 0);
    size_t fresh = u0 <= u1 ? u1 - u0 + 1 : 0;
    if (fresh && !bits_all(r->mapped, u0, u1))
        return cover_mapping(p, r, g0, g1, u0, u1, fresh, 0);
    take_mapped(p, r, g0, g1, (uint64_t)fresh << p->vmm->gshift);
    return 0;
}

/* One block of the aligned area more on the granules of [a, a + len) (granule boundaries), of
 * which it is the only user: taken at once when all are mapped (kept), else mapped granule by
 * granule. */
OUT_OF_LINE int ga_vmm_cover_whole(ga_pool_t *p, uintptr_t a, size_t len)
{
    ga_vmm_t *v = p->vmm;
    ga_vrange_t *r = range_of(v, a);
    if (!r)
        return -1;
    size_t off = a - r->base, g0 = off >> v->gshift, g1 = (off + len - 1) >> v->gshift;
    if (!bits_all(r->mapped, g0, g1))
        return cover_mapping(p, r, g0, g1, g0, g1, g1 - g0 + 1, 1);
    bits_put(r->inner, g0, g1, 1);
    p->own.kept -= (uint64_t)(g1 - g0 + 1) << v->gshift;
    return 0;
}
