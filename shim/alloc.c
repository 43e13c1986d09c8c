/* gpuarena allocation hooks: cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemFree_v2, and both modes.
 *
 * Arena mode sub-allocates from the current context's arena (one lock per arena); platform mode
 * makes one driver call per allocation and records the pointer in ga_g.ptrs so the free can be
 * accounted. Platform mode is the baseline a user compares against, so its hot path is kept to one
 * atomic add (the cap) and one lock (table and counters), no getenv, no syscall; the clock is only
 * read when statistics or a trace were asked for.
 * Frees of pointers the shim does not own go to the real driver untouched; a bad free of an arena
 * pointer is refused with CUDA_ERROR_INVALID_VALUE and leaves the arena as it was.
 */
#include "shim.h"

static uint64_t ga_round(uint64_t n)
{
    return (n + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1);
}

/* Counts one finished allocation call; ga_g.lock held. */
static void ga_account_alloc(ga_ctx_t *c, uint8_t api, uint64_t size, uint64_t rounded, int ok,
                             uint64_t t0)
{
    ga_count_alloc(api, size, rounded, ok);
    if (ga_timing)
        ga_alloc_time += ga_now() - t0;
    if (c && ok) {
        c->plat.allocs++;
        c->plat.live++;
        c->plat.in_use += rounded;
        c->plat.in_use_requested += size;
        if (c->plat.in_use > c->plat.peak_in_use)
            c->plat.peak_in_use = c->plat.in_use;
    } else if (c) {
        c->plat.failed_allocs++;
    }
}

/* Counts an out-of-memory failure as fragmentation or true OOM (oom.c); ga_g.lock held. */
static void ga_count_oom(const ga_oom_t *oom, CUresult r)
{
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        ga_g.frag_failures += oom->frag != 0;
        ga_g.true_oom_failures += oom->frag == 0;
    }
}

static CUresult ga_platform_alloc(ga_ctx_t *c, CUdeviceptr *dptr, size_t size, uint8_t api,
                                  uint64_t t0)
{
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    int committed = ga_dev_commit(c->dev, size);
    if (committed)
        r = ga_real.cuMemAlloc_v2(dptr, size);
    pthread_mutex_lock(&ga_g.lock);
    ga_g.driver_alloc_calls += committed;
    if (r == CUDA_SUCCESS) {
        ga_pentry_t e = {.key = *dptr, .size = size, .ctx = c, .dev = c->dev, .api = api};
        if (ga_ptrmap_put(&ga_g.ptrs, &e) != 0) {
            ga_real.cuMemFree_v2(*dptr); /* out of host memory: cannot account it, so refuse */
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            ga_count_reserve((int64_t)size, 1);
            c->plat.reserved += size;
            c->plat.backend_reserves++;
            if (c->plat.reserved > c->plat.peak_reserved)
                c->plat.peak_reserved = c->plat.reserved;
        }
    }
    if (r != CUDA_SUCCESS && committed)
        ga_dev_uncommit(c->dev, size);
    ga_oom_t oom; /* not zeroed: 2 KiB on the hot path; classify fills it on failure */
    oom.frag = 0, oom.len = 0;
    if (GA_UNLIKELY(r == CUDA_ERROR_OUT_OF_MEMORY))
        ga_oom_classify(&oom, c, api, size, c->plat.in_use, /* no arena: a true OOM */
                        c->plat.reserved);
    ga_count_oom(&oom, r);
    ga_account_alloc(c, api, size, size, r == CUDA_SUCCESS, t0);
    pthread_mutex_unlock(&ga_g.lock);
    ga_oom_report(&oom);
    return r;
}

static CUresult ga_status_to_cu(ga_status_t st)
{
    switch (st) {
    case GA_OK: return CUDA_SUCCESS;
    case GA_ENOMEM: return CUDA_ERROR_OUT_OF_MEMORY;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* With statistics on, the worst fragmentation seen is sampled after each arena free (where
 * fragmentation is made; sampling allocations too doubled the cost of statistics). */
static void ga_sample_fragmentation(ga_ctx_t *c, double *frag)
{
    ga_stats_t s;
    ga_get_stats(c->arena, &s);
    *frag = ga_fragmentation(&s);
}

static CUresult ga_arena_alloc(ga_ctx_t *c, CUdeviceptr *dptr, size_t size, uint8_t api,
                               uint64_t t0)
{
    CUresult r = CUDA_SUCCESS;
    uintptr_t p = 0;
    pthread_mutex_lock(&c->lock);
    ga_arena_t *a = ga_ctx_arena(c, size, &r);
    if (a) {
        ga_status_t st = ga_alloc(a, size, &p);
        /* size is non-zero here, so EINVAL means too large to round: the driver says OOM. */
        r = st == GA_EINVAL ? CUDA_ERROR_OUT_OF_MEMORY : ga_status_to_cu(st);
    }
    ga_oom_t oom; /* not zeroed: 2 KiB on the hot path; classify fills it on failure */
    oom.frag = 0, oom.len = 0;
    if (GA_UNLIKELY(r == CUDA_ERROR_OUT_OF_MEMORY))
        ga_oom_classify(&oom, c, api, size, 0, 0);
    pthread_mutex_unlock(&c->lock);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    pthread_mutex_lock(&ga_g.lock);
    ga_count_alloc(api, size, ga_round(size), r == CUDA_SUCCESS);
    ga_count_oom(&oom, r);
    if (ga_timing)
        ga_alloc_time += ga_now() - t0;
    pthread_mutex_unlock(&ga_g.lock);
    ga_oom_report(&oom);
    return r;
}

CUresult ga_do_alloc(CUdeviceptr *dptr, size_t size, uint8_t api)
{
    if (!dptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    ga_ctx_t *c = ga_current();
    if (GA_UNLIKELY(!c))
        return ga_real.cuMemAlloc_v2(dptr, size); /* no context: the driver's own error */
    if (ga_tl_api)
        api = ga_tl_api;
    uint64_t t0 = ga_timing ? ga_now() : 0;
    CUresult r = ga_opt.mode == GA_MODE_PLATFORM ? ga_platform_alloc(c, dptr, size, api, t0)
                                                 : ga_arena_alloc(c, dptr, size, api, t0);
    if (GA_UNLIKELY(ga_tracing))
        ga_trace_event(r == CUDA_SUCCESS ? GA_EV_ALLOC : GA_EV_ALLOC_FAILED, api,
                       r == CUDA_SUCCESS ? *dptr : 0, size, 0, c->dev, t0, r);
    return r;
}

/* Frees an arena pointer; c->lock is held on entry (ga_find_owner) and released here. */
static CUresult ga_arena_free(ga_ctx_t *c, CUdeviceptr p, uint8_t api, uint64_t t0)
{
    uintptr_t base = 0;
    size_t size = 0;
    double frag = 0;
    /* The size first, for the statistics; on a bad free, ga_free says precisely why (double,
     * interior) and leaves the arena unchanged. */
    ga_status_t st = ga_lookup(c->arena, (uintptr_t)p, &base, &size);
    if (st == GA_OK && base != (uintptr_t)p)
        st = GA_EINTERIOR;
    else
        st = ga_free(c->arena, (uintptr_t)p);
    if (st == GA_OK && ga_timing)
        ga_sample_fragmentation(c, &frag);
    pthread_mutex_unlock(&c->lock);
    if (st != GA_OK) {
        ga_log(GA_LOG_WARN, "free of %#llx refused: %s (the arena is unchanged)",
               (unsigned long long)p, ga_status_str(st));
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&ga_g.lock);
    ga_count_free(api, size);
    if (ga_timing)
        ga_free_time += ga_now() - t0;
    if (frag > ga_g.max_fragmentation)
        ga_g.max_fragmentation = frag;
    pthread_mutex_unlock(&ga_g.lock);
    return CUDA_SUCCESS;
}

/* Frees a pointer from the table (platform or pass-through) or one the shim never saw. */
static CUresult ga_table_free(CUdeviceptr p, uint8_t api, uint64_t t0,
                              CUresult (*real_free)(CUdeviceptr, CUstream), CUstream s)
{
    ga_pentry_t e;
    pthread_mutex_lock(&ga_g.lock);
    int found = ga_ptrmap_take(&ga_g.ptrs, p, &e);
    pthread_mutex_unlock(&ga_g.lock);
    CUresult r = real_free ? real_free(p, s) : ga_real.cuMemFree_v2(p);
    if (!found)
        return r;
    pthread_mutex_lock(&ga_g.lock);
    if (r != CUDA_SUCCESS) {
        ga_ptrmap_put(&ga_g.ptrs, &e); /* the driver kept it: so do we */
    } else {
        ga_g.driver_free_calls++;
        ga_count_free(api, e.size);
        ga_count_reserve(-(int64_t)e.size, 0);
        if (e.passthrough)
            ga_count_passthrough(-(int64_t)e.size);
        if (e.ctx && !e.passthrough) {
            e.ctx->plat.frees++, e.ctx->plat.live--, e.ctx->plat.backend_releases++;
            e.ctx->plat.in_use -= e.size, e.ctx->plat.reserved -= e.size;
            e.ctx->plat.in_use_requested -= e.size;
        }
        if (ga_timing)
            ga_free_time += ga_now() - t0;
    }
    pthread_mutex_unlock(&ga_g.lock);
    if (r == CUDA_SUCCESS)
        ga_dev_uncommit(e.dev, e.size);
    return r;
}

/* Shared by cuMemFree_v2 and the async frees (real_free non-NULL: the stream-ordered call). */
static CUresult ga_free_any(CUdeviceptr p, uint8_t api, CUresult (*real_free)(CUdeviceptr, CUstream),
                            CUstream s)
{
    if (ga_tl_api)
        api = ga_tl_api;
    uint64_t t0 = ga_timing ? ga_now() : 0;
    CUresult r;
    ga_ctx_t *c = p ? ga_find_owner((uintptr_t)p) : NULL;
    if (c) {
        /* A stream-ordered free of an arena pointer: kernels queued on s may still use it. */
        if (real_free && ga_real.cuStreamSynchronize)
            ga_real.cuStreamSynchronize(s);
        r = ga_arena_free(c, p, api, t0);
    } else {
        r = ga_table_free(p, api, t0, real_free, s);
    }
    if (GA_UNLIKELY(ga_tracing) && p)
        ga_trace_event(GA_EV_FREE, api, p, 0, (uint64_t)(uintptr_t)s, c ? c->dev : -1, t0, r);
    return r;
}

CUresult ga_do_free(CUdeviceptr p, uint8_t api)
{
    return ga_free_any(p, api, NULL, NULL);
}

CUresult ga_do_free_async(CUdeviceptr p, CUstream s, uint8_t api,
                          CUresult (*real_free)(CUdeviceptr, CUstream))
{
    return ga_free_any(p, api, real_free, s);
}

GA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    GA_HOOK_ENTER(cuMemAlloc_v2, (dptr, bytesize));
    return ga_do_alloc(dptr, bytesize, GA_API_CUMEMALLOC);
}

GA_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    GA_HOOK_ENTER(cuMemFree_v2, (dptr));
    return ga_do_free(dptr, GA_API_CUMEMFREE);
}

/* Pitch as the driver computes it on current GPUs: rows padded to 512 bytes. */
GA_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                      size_t Height, unsigned int ElementSizeBytes)
{
    GA_HOOK_ENTER(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
    if (!dptr || !pPitch || !WidthInBytes || !Height ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (size_t)ga_round(WidthInBytes);
    size_t bytes;
    if (pitch < WidthInBytes || __builtin_mul_overflow(pitch, Height, &bytes))
        return CUDA_ERROR_INVALID_VALUE; /* as the driver answers an overflowing pitch * height */
    CUresult r = ga_do_alloc(dptr, bytes, GA_API_CUMEMALLOCPITCH);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}
