/* gpuarena platform pool: one backend reservation per allocation, given back at once on free.
 *
 * The baseline the other modes are measured against, and the smallest footprint: it holds exactly
 * what is live. The backend is asked for exactly the bytes requested (the driver rounds as it
 * does for the program without gpuarena: one call per allocation, the same size) and released
 * with that size; the figures count the request rounded up to GA_ALIGN (what the driver gives in
 * effect), so in_use == reserved at every moment. The pointer table (ga_ptrmap.h) records the
 * rounded size and the bytes requested; `limit`, when set, bounds the sum of reservations (replay
 * uses it; the shim's cap is its backend's business).
 */
#include <stdlib.h>

#include "pool_internal.h"

/* An address the table holds live came back from the backend: that block is gone
 * (ga_pool_backend_t.forget), its entry and figures dropped; 1 when so. Kept, its entry made every
 * later block at that address fail (the driver hands a freed address out again first) and its
 * bytes stayed counted for good (helper-130). */
static __attribute__((noinline)) int forget_stale(ga_pool_t *p, uintptr_t base)
{
    ga_stats_t *s = &p->own;
    ga_pentry_t gone;
    if (!ga_ptrmap_take(&p->table, base, &gone))
        return 0;
    p->be.forget(p->be.ctx, base, (size_t)gone.aux);
    s->backend_releases++, s->frees++, s->live--, s->regions--;
    s->in_use -= gone.size, s->reserved -= gone.size, s->in_use_requested -= gone.aux;
    return 1;
}

ga_status_t ga_platform_alloc(ga_pool_t *p, size_t size, uintptr_t *out)
{
    size_t rounded = ga_pool_round(size);
    if (!rounded)
        return size ? GA_ETOOBIG : GA_EINVAL;
    ga_stats_t *s = &p->own;
    uintptr_t base = 0;
    int over = p->cfg.limit && (rounded > p->cfg.limit || s->reserved > p->cfg.limit - rounded);
    if (over || p->be.reserve(p->be.ctx, size, &base) != 0) {
        s->failed_allocs++;
        return GA_ENOMEM;
    }
    ga_pentry_t e = {.key = base, .size = rounded, .aux = size};
    int sound = base && !ga_ptrmap_get(&p->table, base);
    if (!sound && base && p->be.forget) /* looked for only once the one probe found it: a probe
                                         * more on every allocation cost 48 instructions a pair
                                         * (scripts/bench-shim-instr.sh platform) */
        sound = forget_stale(p, base);
    if (!sound || ga_ptrmap_put(&p->table, &e) != 0) {
        /* out of host memory, or a backend that broke its contract: cannot account it */
        (void)p->be.release(p->be.ctx, base, size); /* refused: the backend's (ga_arena.h) */
        s->backend_reserves++, s->backend_releases++, s->failed_allocs++;
        return sound ? GA_ENOHOST : GA_ENOMEM;
    }
    s->backend_reserves++, s->allocs++, s->live++, s->regions++;
    s->in_use += rounded, s->reserved += rounded, s->in_use_requested += size;
    if (s->in_use > s->peak_in_use)
        s->peak_in_use = s->in_use;
    if (s->reserved > s->peak_reserved)
        s->peak_reserved = s->reserved;
    *out = base;
    return GA_OK;
}

/* A block the backend refuses to release (the driver would not free it) stays live, as the driver
 * keeps it: GA_EHELD, and a later free tries again. Taken from the table first and put back on
 * that rare refusal (the slot it left is free: no growth), so the common free probes once. */
ga_status_t ga_platform_free(ga_pool_t *p, uintptr_t ptr, size_t *size)
{
    ga_pentry_t e;
    if (!ptr || !ga_ptrmap_take(&p->table, ptr, &e))
        return GA_ENOTOWNED;
    if (p->be.release(p->be.ctx, ptr, (size_t)e.aux) != 0) {
        (void)ga_ptrmap_put(&p->table, &e);
        return GA_EHELD;
    }
    ga_stats_t *s = &p->own;
    s->backend_releases++, s->frees++, s->live--, s->regions--;
    s->in_use -= e.size, s->reserved -= e.size, s->in_use_requested -= e.aux;
    if (size)
        *size = (size_t)e.size;
    return GA_OK;
}

static void release_entry(void *arg, const ga_pentry_t *e)
{
    ga_pool_t *p = arg;
    (void)p->be.release(p->be.ctx, (uintptr_t)e->key, (size_t)e->aux); /* refused: forgotten */
    p->own.backend_releases++;
}

void ga_platform_destroy(ga_pool_t *p)
{
    ga_ptrmap_each(&p->table, release_entry, p);
    ga_ptrmap_fini(&p->table);
}
