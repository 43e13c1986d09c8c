/* gpuarena devices and contexts: caps, per-context arenas, the driver backend, teardown.
 *
 * Each device has a cap (GPUARENA_LIMIT, default its total) and one atomic `committed` count of the
 * bytes the process holds from the driver there (arena regions, platform and pass-through
 * allocations): the cap check is one atomic add, so it needs no lock on the hot path. Each CUDA
 * context gets a ga_ctx with its own arena and lock, created at its first allocation. Context
 * states are never freed (a stale handle must never match a live one, and threads cache pointers
 * to them); a destroyed context is marked dead and the generation bumped so caches revalidate.
 * The arena's backend calls the real cuMemAlloc_v2/cuMemFree_v2 with that context current, and
 * checks the cap before every reservation, so the cap holds however the arena grows.
 */
#include "shim.h"

#include <stdlib.h>
#include <string.h>

ga_dev_t ga_devs[GA_MAX_DEVICES];
ga_ctx_t *_Atomic ga_ctx_list;

static __thread struct {
    CUcontext ctx;
    ga_ctx_t *st;
    unsigned gen;
} ga_tl_cache;

/* Cap of a device, from the option and the physical total. ga_g.lock held. */
void ga_dev_setup(int dev)
{
    ga_dev_t *d = &ga_devs[dev];
    if (d->known)
        return;
    size_t total = 0;
    if (ga_real.cuDeviceTotalMem_v2 && ga_real.cuDeviceTotalMem_v2(&total, dev) != CUDA_SUCCESS)
        total = 0;
    d->physical_total = total ? total : UINT64_MAX;
    uint64_t cap = d->physical_total;
    if (ga_opt.limit_bytes && ga_opt.limit_bytes < cap)
        cap = ga_opt.limit_bytes;
    else if (ga_opt.limit_percent > 0 && total)
        cap = (uint64_t)((double)total * ga_opt.limit_percent / 100.0);
    d->cap = cap;
    __atomic_store_n(&d->known, 1, __ATOMIC_RELEASE);
    ga_log(GA_LOG_INFO, "device %d: total %zu bytes, cap %llu bytes", dev, total,
           (unsigned long long)cap);
}

int ga_dev_commit(int dev, uint64_t bytes)
{
    ga_dev_t *d = &ga_devs[dev];
    int64_t after = atomic_fetch_add_explicit(&d->committed, (int64_t)bytes, memory_order_relaxed)
                    + (int64_t)bytes;
    if (GA_UNLIKELY((uint64_t)after > d->cap || bytes > d->cap)) {
        atomic_fetch_sub_explicit(&d->committed, (int64_t)bytes, memory_order_relaxed);
        return 0;
    }
    return 1;
}

void ga_dev_uncommit(int dev, uint64_t bytes)
{
    atomic_fetch_sub_explicit(&ga_devs[dev].committed, (int64_t)bytes, memory_order_relaxed);
}

static ga_ctx_t *ga_ctx_find(CUcontext ctx)
{
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next))
        if (c->ctx == ctx && !atomic_load_explicit(&c->dead, memory_order_relaxed))
            return c;
    return NULL;
}

static ga_ctx_t *ga_ctx_create(CUcontext ctx)
{
    CUdevice dev = 0;
    if (ga_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 || dev >= GA_MAX_DEVICES)
        return NULL;
    pthread_mutex_lock(&ga_g.lock);
    ga_ctx_t *c = ga_ctx_find(ctx);
    if (!c && (c = calloc(1, sizeof *c))) {
        c->ctx = ctx;
        c->dev = dev;
        pthread_mutex_init(&c->lock, NULL);
        ga_dev_setup(dev);
        atomic_store(&c->next, atomic_load(&ga_ctx_list));
        atomic_store(&ga_ctx_list, c);
    }
    pthread_mutex_unlock(&ga_g.lock);
    return c;
}

ga_ctx_t *ga_current(void)
{
    CUcontext ctx = NULL;
    if (ga_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return NULL;
    unsigned gen = atomic_load_explicit(&ga_generation, memory_order_acquire);
    if (GA_LIKELY(ga_tl_cache.ctx == ctx && ga_tl_cache.gen == gen))
        return ga_tl_cache.st;
    ga_ctx_t *c = ga_ctx_find(ctx);
    if (!c)
        c = ga_ctx_create(ctx);
    if (c) {
        ga_tl_cache.ctx = ctx;
        ga_tl_cache.st = c;
        ga_tl_cache.gen = gen;
    }
    return c;
}

int ga_ctx_enter(CUcontext ctx)
{
    CUcontext cur = NULL;
    if (ga_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx)
        return 0;
    return ga_real.cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS;
}

void ga_ctx_leave(int pushed)
{
    CUcontext dummy;
    if (pushed)
        ga_real.cuCtxPopCurrent_v2(&dummy);
}

/* ---- the arena backend: the real driver, under the device cap ---- */
static int ga_backend_reserve(void *p, size_t size, uintptr_t *base)
{
    ga_ctx_t *c = p;
    if (!ga_dev_commit(c->dev, size))
        return 1;
    CUdeviceptr d = 0;
    int pushed = ga_ctx_enter(c->ctx);
    CUresult r = ga_real.cuMemAlloc_v2(&d, size);
    ga_ctx_leave(pushed);
    pthread_mutex_lock(&ga_g.lock);
    ga_g.driver_alloc_calls++;
    if (r == CUDA_SUCCESS)
        ga_count_reserve((int64_t)size, 1);
    pthread_mutex_unlock(&ga_g.lock);
    if (r != CUDA_SUCCESS) {
        ga_dev_uncommit(c->dev, size);
        return 1;
    }
    *base = (uintptr_t)d;
    return 0;
}

static void ga_backend_release(void *p, uintptr_t base, size_t size)
{
    ga_ctx_t *c = p;
    if (!c->driver_gone) {
        int pushed = ga_ctx_enter(c->ctx);
        CUresult r = ga_real.cuMemFree_v2((CUdeviceptr)base);
        ga_ctx_leave(pushed);
        if (r != CUDA_SUCCESS)
            ga_log(GA_LOG_WARN, "releasing an arena region of %zu bytes failed (CUresult %d)",
                   size, (int)r);
    }
    pthread_mutex_lock(&ga_g.lock);
    ga_g.driver_free_calls += !c->driver_gone;
    ga_count_reserve(-(int64_t)size, 0);
    pthread_mutex_unlock(&ga_g.lock);
    ga_dev_uncommit(c->dev, size);
}

static ga_arena_t *ga_arena_new(ga_ctx_t *c, size_t initial, int grow, size_t limit)
{
    ga_backend_t be = {ga_backend_reserve, ga_backend_release, c};
    ga_config_t cfg = {.initial = initial, .grow = grow, .limit = limit, .min_region = 0};
    ga_status_t st = GA_OK;
    return ga_arena_create(&be, &cfg, &st);
}

/* The context's arena, created at its first allocation: preallocation is fraction * cap. */
ga_arena_t *ga_ctx_arena(ga_ctx_t *c, size_t first_request, CUresult *err)
{
    if (c->arena)
        return c->arena;
    uint64_t cap = ga_devs[c->dev].cap;
    size_t share = (size_t)((double)cap * ga_opt.fraction) & ~(GA_ALIGN - 1);
    size_t limit = ga_opt.fraction_grow ? 0 : share;
    size_t initial = ga_opt.preallocate ? share : 0;
    ga_arena_t *a = ga_arena_new(c, initial, ga_opt.fraction_grow || !ga_opt.preallocate, limit);
    if (!a && initial) {
        ga_log(GA_LOG_WARN, "could not preallocate %zu bytes on device %d; growing on demand "
               "instead (lower GPUARENA_MEM_FRACTION or GPUARENA_LIMIT)", initial, c->dev);
        a = ga_arena_new(c, 0, 1, limit);
    }
    if (!a)
        *err = CUDA_ERROR_OUT_OF_MEMORY;
    (void)first_request;
    __atomic_store_n(&c->arena, a, __ATOMIC_RELEASE);
    return a;
}

/* A context is going away: release its arena (to the driver unless the driver already freed it),
 * forget its platform and pass-through pointers, and never match it again. */
void ga_ctx_drop(ga_ctx_t *c, int driver_gone)
{
    pthread_mutex_lock(&c->lock);
    if (c->arena) {
        ga_get_stats(c->arena, &c->final);
        c->has_final = 1;
        c->driver_gone = driver_gone;
        ga_arena_t *a = c->arena;
        __atomic_store_n(&c->arena, NULL, __ATOMIC_RELEASE);
        ga_arena_destroy(a);
    }
    atomic_store(&c->dead, 1);
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_lock(&ga_g.lock);
    for (size_t i = 0; ga_g.ptrs.slots && i <= ga_g.ptrs.mask; i++) {
        ga_pentry_t *e = &ga_g.ptrs.slots[i];
        if (!e->key || e->ctx != c)
            continue;
        ga_pentry_t gone;
        if (ga_ptrmap_take(&ga_g.ptrs, e->key, &gone)) {
            ga_dev_uncommit(gone.dev, gone.size);
            ga_count_reserve(-(int64_t)gone.size, 0);
            if (gone.passthrough)
                ga_count_passthrough(-(int64_t)gone.size);
            i--; /* backward-shift deletion may have moved another entry into slot i */
        }
    }
    pthread_mutex_unlock(&ga_g.lock);
    atomic_fetch_add(&ga_generation, 1);
}

ga_ctx_t *ga_find_owner(uintptr_t ptr)
{
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next)) {
        if (!ga_ctx_peek(c))
            continue;
        pthread_mutex_lock(&c->lock);
        if (c->arena && ga_owns(c->arena, ptr))
            return c;
        pthread_mutex_unlock(&c->lock);
    }
    return NULL;
}

void ga_ctx_fork_child(void)
{
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next)) {
        pthread_mutex_init(&c->lock, NULL);
        c->driver_gone = 1;
        if (c->arena)
            ga_arena_destroy(c->arena);
        c->arena = NULL;
        atomic_store(&c->dead, 1);
    }
    for (int d = 0; d < GA_MAX_DEVICES; d++)
        atomic_store(&ga_devs[d].committed, 0);
    atomic_fetch_add(&ga_generation, 1);
}

/* ---- teardown hooks ---- */
GA_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    GA_HOOK_ENTER(cuCtxDestroy_v2, (ctx));
    ga_ctx_t *c = ctx ? ga_ctx_find(ctx) : NULL;
    if (c)
        ga_ctx_drop(c, 0);
    return ga_real.cuCtxDestroy_v2(ctx);
}

/* The primary context of dev, if it is active, without changing its reference count. */
static CUcontext ga_primary_of(CUdevice dev)
{
    unsigned flags = 0;
    int active = 0;
    CUcontext ctx = NULL;
    if (ga_real.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active)
        return NULL;
    if (ga_real.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
        return NULL;
    ga_real.cuDevicePrimaryCtxRelease_v2(dev);
    return ctx;
}

static CUresult ga_primary_reset(CUdevice dev, CUresult (*real_reset)(CUdevice))
{
    CUcontext p = ga_primary_of(dev);
    ga_ctx_t *c = p ? ga_ctx_find(p) : NULL;
    if (c)
        ga_ctx_drop(c, 0);
    return real_reset(dev);
}

/* Only the last release destroys the context, and only the driver knows which one that is: ask
 * after the call, and if it went inactive forget the arena (the driver has freed its memory). */
static CUresult ga_primary_release(CUdevice dev, CUresult (*real_release)(CUdevice))
{
    CUcontext p = ga_primary_of(dev);
    CUresult r = real_release(dev);
    unsigned flags = 0;
    int active = 1;
    if (r == CUDA_SUCCESS && p &&
        ga_real.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && !active) {
        ga_ctx_t *c = ga_ctx_find(p);
        if (c)
            ga_ctx_drop(c, 1);
    }
    return r;
}

GA_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    GA_HOOK_ENTER(cuDevicePrimaryCtxReset_v2, (dev));
    return ga_primary_reset(dev, ga_real.cuDevicePrimaryCtxReset_v2);
}

GA_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    GA_HOOK_ENTER(cuDevicePrimaryCtxReset, (dev));
    return ga_primary_reset(dev, ga_real.cuDevicePrimaryCtxReset);
}

GA_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    GA_HOOK_ENTER(cuDevicePrimaryCtxRelease_v2, (dev));
    return ga_primary_release(dev, ga_real.cuDevicePrimaryCtxRelease_v2);
}

GA_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    GA_HOOK_ENTER(cuDevicePrimaryCtxRelease, (dev));
    return ga_primary_release(dev, ga_real.cuDevicePrimaryCtxRelease);
}
