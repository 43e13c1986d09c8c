/* gpuarena pools (ga_pool.h): creation, and one switch per operation that sends
 * it to the mode's code. The arena and grow modes are the arena itself (ga_arena.h) with two
 * configurations, so they live here; platform and vmm have files of their own. A switch rather
 * than a table of function pointers: four modes, and the hot path stays a predictable branch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

static ga_status_t arena_create(ga_pool_t *p)
{
    const ga_pool_config_t *c = &p->cfg;
    ga_backend_t be = {p->be.reserve, p->be.release, p->be.ctx};
    ga_config_t ac = {.initial = c->mode == GA_MODE_ARENA ? c->initial : 0,
                      .grow = c->mode == GA_MODE_GROW || c->grow, .limit = c->limit,
                      .min_region = c->min_region, .keep_empty = c->keep_empty};
    ga_status_t st = GA_OK;
    p->arena = ga_arena_create(&be, &ac, &st);
    return p->arena ? GA_OK : st;
}

static int backend_ok(const ga_pool_backend_t *b, ga_mode_t mode)
{
    if (!b)
        return 0;
    if (mode != GA_MODE_VMM)
        return b->reserve && b->release;
    size_t g = b->granularity;
    int maps = b->map_run || b->unmap_run ? b->map_run && b->unmap_run : b->map && b->unmap;
    return b->va_reserve && b->va_release && maps && g >= GA_ALIGN && !(g & (g - 1));
}

ga_pool_t *ga_pool_create(const ga_pool_backend_t *backend, const ga_pool_config_t *config,
                          ga_status_t *status)
{
    ga_status_t st = GA_EINVAL;
    ga_pool_t *p = NULL;
    if (config && (unsigned)config->mode < GA_MODE_COUNT && backend_ok(backend, config->mode) &&
        (config->mode != GA_MODE_VMM || config->va_size)) {
        p = calloc(1, sizeof *p);
        st = GA_ENOHOST;
    }
    if (p) {
        p->mode = config->mode;
        p->cfg = *config;
        p->be = *backend;
        if (p->mode == GA_MODE_ARENA || p->mode == GA_MODE_GROW)
            st = arena_create(p);
        else if (p->mode == GA_MODE_VMM)
            st = ga_vmm_create(p);
        else
            st = GA_OK;
        if (st != GA_OK) {
            free(p);
            p = NULL;
        }
    }
    if (status)
        *status = st;
    return p;
}

void ga_pool_destroy(ga_pool_t *p)
{
    if (!p)
        return;
    if (p->mode == GA_MODE_PLATFORM)
        ga_platform_destroy(p);
    else if (p->mode == GA_MODE_VMM)
        ga_vmm_destroy(p);
    else
        ga_arena_destroy(p->arena);
    free(p);
}

ga_mode_t ga_pool_mode(const ga_pool_t *p)
{
    return p->mode;
}

ga_status_t ga_pool_alloc(ga_pool_t *p, size_t size, uintptr_t *out)
{
    if (!p || !out)
        return GA_EINVAL;
    switch (p->mode) {
    case GA_MODE_PLATFORM: return ga_platform_alloc(p, size, out);
    case GA_MODE_VMM: return ga_vmm_alloc(p, size, out);
    default: return ga_alloc(p->arena, size, out);
    }
}

int ga_pool_fits(ga_pool_t *p, size_t size)
{
    if (p && (p->mode == GA_MODE_ARENA || p->mode == GA_MODE_GROW))
        return ga_arena_fits(p->arena, size, NULL);
    if (p && p->mode == GA_MODE_VMM)
        return ga_vmm_fits(p, size);
    return 0; /* platform: every allocation calls the backend */
}

/* The arena modes: ga_free refuses an interior pointer (or a free one) without changing the arena,
 * and says the freed size for the caller's accounting. */
static ga_status_t arena_free(ga_arena_t *a, uintptr_t ptr, size_t *size)
{
    return ga_free_sized(a, ptr, size);
}

ga_status_t ga_pool_free(ga_pool_t *p, uintptr_t ptr, size_t *size)
{
    if (!p)
        return GA_EINVAL;
    switch (p->mode) {
    case GA_MODE_PLATFORM: return ga_platform_free(p, ptr, size);
    case GA_MODE_VMM: return ga_vmm_free(p, ptr, size);
    default: return arena_free(p->arena, ptr, size);
    }
}

ga_status_t ga_pool_lookup(const ga_pool_t *p, uintptr_t ptr, uintptr_t *base, size_t *size)
{
    if (!p)
        return GA_EINVAL;
    if (p->mode == GA_MODE_VMM)
        return ga_vmm_lookup(p, ptr, base, size);
    if (p->mode != GA_MODE_PLATFORM)
        return ga_lookup(p->arena, ptr, base, size);
    const ga_pentry_t *e = ga_ptrmap_get(&p->table, ptr);
    if (!e)
        return GA_ENOTOWNED; /* interior platform pointers: the driver knows them, we need not */
    if (base)
        *base = ptr;
    if (size)
        *size = (size_t)e->size;
    return GA_OK;
}

size_t ga_pool_live_size(const ga_pool_t *p, uintptr_t ptr)
{
    if (!p)
        return 0;
    if (p->mode == GA_MODE_VMM)
        return ga_vmm_live_size(p, ptr);
    if (p->mode != GA_MODE_PLATFORM)
        return ga_live_size(p->arena, ptr);
    const ga_pentry_t *e = ga_ptrmap_get(&p->table, ptr);
    return e ? (size_t)e->size : 0;
}

int ga_pool_owns(const ga_pool_t *p, uintptr_t ptr)
{
    if (!p)
        return 0;
    if (p->mode == GA_MODE_PLATFORM)
        return ptr && ga_ptrmap_get(&p->table, ptr) != NULL;
    return ga_owns(p->arena, ptr);
}

typedef struct bases_job {
    uintptr_t *out;
    size_t max, n;
} bases_job_t;

static void base_of_entry(void *arg, const ga_pentry_t *e)
{
    bases_job_t *j = arg;
    if (j->n++ < j->max)
        j->out[j->n - 1] = (uintptr_t)e->key;
}

size_t ga_pool_live_bases(const ga_pool_t *p, uintptr_t *out, size_t max)
{
    if (!p)
        return 0;
    if (p->mode == GA_MODE_VMM)
        return ga_vmm_live_bases(p, out, max);
    if (p->mode != GA_MODE_PLATFORM)
        return ga_live_bases(p->arena, out, max);
    bases_job_t j = {out, max, 0};
    ga_ptrmap_each(&p->table, base_of_entry, &j);
    return j.n;
}

size_t ga_pool_trim(ga_pool_t *p)
{
    if (!p || p->mode == GA_MODE_PLATFORM)
        return 0;
    if (p->mode == GA_MODE_VMM)
        return ga_vmm_trim(p);
    return ga_trim(p->arena);
}

size_t ga_pool_refused_idle(const ga_pool_t *p, size_t *largest)
{
    if (!p || p->mode == GA_MODE_PLATFORM || p->mode == GA_MODE_VMM) {
        if (largest)
            *largest = 0;
        return 0;
    }
    return ga_refused_idle(p->arena, largest);
}

size_t ga_pool_idle(const ga_pool_t *p)
{
    return p && (p->mode == GA_MODE_ARENA || p->mode == GA_MODE_GROW) ? ga_idle(p->arena) : 0;
}

void ga_pool_stats(const ga_pool_t *p, ga_stats_t *out)
{
    if (!out)
        return;
    if (!p) {
        memset(out, 0, sizeof *out);
        return;
    }
    switch (p->mode) {
    case GA_MODE_PLATFORM: *out = p->own; break;
    case GA_MODE_VMM: ga_vmm_stats(p, out); break;
    default: ga_get_stats(p->arena, out); break;
    }
}

size_t ga_pool_check_granules(const ga_pool_t *p)
{
    return p && p->mode == GA_MODE_VMM ? ga_vmm_granules(p) : 0;
}

int ga_pool_check(const ga_pool_t *p, char *report, size_t len)
{
    if (!p)
        return 0;
    if (p->mode == GA_MODE_VMM)
        return ga_vmm_check(p, report, len);
    if (p->mode != GA_MODE_PLATFORM)
        return ga_check(p->arena, report, len);
    /* platform: the table and the figures agree */
    uint64_t n = p->table.count, want = p->own.live;
    if (n == want && p->own.in_use == p->own.reserved)
        return 0;
    if (report && len)
        snprintf(report, len, "platform pool: %llu table entries, %llu live, in_use %llu, "
                 "reserved %llu", (unsigned long long)n, (unsigned long long)want,
                 (unsigned long long)p->own.in_use, (unsigned long long)p->own.reserved);
    return 1;
}

size_t ga_pool_occupancy_map(const ga_pool_t *p, char *buf, size_t len, unsigned width)
{
    if (!p || p->mode == GA_MODE_PLATFORM) {
        if (buf && len)
            buf[0] = '\0';
        return 0;
    }
    if (p->mode == GA_MODE_VMM)
        return ga_vmm_occupancy_map(p, buf, len, width);
    return ga_occupancy_map(p->arena, buf, len, width);
}
