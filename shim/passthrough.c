/* gpuarena pass-through hooks: managed, pool and VMM allocations, and the runtime.
 *
 * cuMemAllocAsync (and _ptsz) is served by the context's pool in the arena, grow and vmm modes,
 * stream-ordered (alloc.c, fence.c); in platform mode it is passed through like the rest.
 * The pools do not serve the others: they go to the driver as asked, but they count
 * toward the device cap and the statistics, because a cap that a program escapes by calling
 * cuMemAllocAsync would cap nothing. Each is checked against the cap before the driver call and
 * recorded in its context's pass-through table (cuMemCreate handles, which belong to a device and
 * outlive contexts, in the device's), so its free gives the bytes back.
 * The runtime hooks (cudaMalloc, cudaFree, cudaMemGetInfo) only tag the thread with the entry
 * point and call the real runtime, which reaches the driver hooks underneath: the driver-level
 * hook then counts the call once, under the runtime's name.
 */
#include "shim.h"

/* Before the driver call: the context, and the bytes committed against its device's cap. */
static CUresult ga_pass_begin(size_t size, int dev, ga_ctx_t **cp, int *devp)
{
    ga_ctx_t *c = ga_current();
    *cp = c;
    if (!c)
        return CUDA_SUCCESS; /* no context: let the driver answer */
    *devp = dev >= 0 && dev < GA_MAX_DEVICES ? dev : c->dev;
    ga_dev_setup(*devp);
    return ga_dev_commit_pass(c, *devp, size) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* After the driver call: record it where its free will find it (the context's table, or the
 * device's for a cuMemCreate handle, which outlives contexts), or give the commitment back. */
static void ga_pass_end(ga_ctx_t *c, int dev, int committed, CUresult r, uint64_t key, size_t size,
                        uint8_t api, uint64_t t0, int handle)
{
    if (!c)
        return;
    if (ga_tl_api)
        api = ga_tl_api;
    ga_mutex_t *lock = handle ? &ga_dev(dev)->lock : &c->lock;
    ga_ptrmap_t *table = handle ? &ga_dev(dev)->handles : &c->pass;
    ga_counts_t *counts = handle ? &ga_dev(dev)->counts : &c->counts;
    int recorded = 0;
    ga_mutex_lock(lock);
    if (r == CUDA_SUCCESS) {
        ga_pentry_t e = {.key = key, .size = size, .aux = api};
        /* A dead context's memory went with it; no record can outlive it. */
        recorded = (handle || !atomic_load(&c->dead)) && ga_ptrmap_put(table, &e) == 0;
    }
    ga_count_alloc(counts, api, size, r == CUDA_SUCCESS, t0);
    ga_mutex_unlock(lock);
    if (recorded) {
        ga_level_add(GA_LEVEL_RESERVED, (int64_t)size);
        ga_level_add(GA_LEVEL_PASSTHROUGH, (int64_t)size);
        ga_level_add(GA_LEVEL_IN_USE, (int64_t)size);
    } else if (committed) {
        ga_dev_uncommit(dev, size); /* failed, or cannot be tracked: not counted rather than leaked */
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        ga_oom_explain_pass(c, api, size);
    if (GA_UNLIKELY(ga_tracing))
        ga_trace_event(r == CUDA_SUCCESS ? GA_EV_ALLOC : GA_EV_ALLOC_FAILED, api,
                       r == CUDA_SUCCESS ? key : 0, size, 0, dev, t0, r);
}

/* The common shape of every pointer-returning pass-through allocation. */
#define GA_PASS_ALLOC(name, api, call)                                                      \
    do {                                                                                   \
        if (!dptr || !bytesize)                                                            \
            return CUDA_ERROR_INVALID_VALUE;                                               \
        uint64_t t0 = ga_timing ? ga_now() : 0;                                            \
        ga_ctx_t *c = NULL;                                                                \
        int dev = 0;                                                                       \
        CUresult r = ga_pass_begin(bytesize, -1, &c, &dev);                                \
        int committed = c && r == CUDA_SUCCESS;                                            \
        if (r == CUDA_SUCCESS)                                                             \
            r = ga_real.name call;                                                         \
        ga_pass_end(c, dev, committed, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize, api, t0, 0); \
        return r;                                                                          \
    } while (0)

GA_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    GA_HOOK_ENTER(cuMemAllocManaged, (dptr, bytesize, flags));
    GA_PASS_ALLOC(cuMemAllocManaged, GA_API_CUMEMALLOCMANAGED, (dptr, bytesize, flags));
}

GA_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemAllocAsync, (dptr, bytesize, hStream));
    CUresult served;
    if (ga_do_alloc_async(dptr, bytesize, hStream, GA_API_CUMEMALLOCASYNC, &served))
        return served;
    GA_PASS_ALLOC(cuMemAllocAsync, GA_API_CUMEMALLOCASYNC, (dptr, bytesize, hStream));
}

GA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemAllocAsync_ptsz, (dptr, bytesize, hStream));
    hStream = GA_PTSZ_STREAM(hStream);
    CUresult served;
    if (ga_do_alloc_async(dptr, bytesize, hStream, GA_API_CUMEMALLOCASYNC, &served))
        return served;
    GA_PASS_ALLOC(cuMemAllocAsync_ptsz, GA_API_CUMEMALLOCASYNC, (dptr, bytesize, hStream));
}

GA_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                           CUstream hStream)
{
    GA_HOOK_ENTER(cuMemAllocFromPoolAsync, (dptr, bytesize, pool, hStream));
    GA_PASS_ALLOC(cuMemAllocFromPoolAsync, GA_API_CUMEMALLOCFROMPOOL, (dptr, bytesize, pool, hStream));
}

GA_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemAllocFromPoolAsync_ptsz, (dptr, bytesize, pool, hStream));
    GA_PASS_ALLOC(cuMemAllocFromPoolAsync_ptsz, GA_API_CUMEMALLOCFROMPOOL,
                  (dptr, bytesize, pool, hStream));
}

GA_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemFreeAsync, (dptr, hStream));
    return ga_do_free_async(dptr, hStream, GA_API_CUMEMFREEASYNC, ga_real.cuMemFreeAsync);
}

GA_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemFreeAsync_ptsz, (dptr, hStream));
    hStream = GA_PTSZ_STREAM(hStream);
    return ga_do_free_async(dptr, hStream, GA_API_CUMEMFREEASYNC, ga_real.cuMemFreeAsync_ptsz);
}

GA_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    GA_HOOK_ENTER(cuMemCreate, (handle, size, prop, flags));
    if (!handle || !prop || !size)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t t0 = ga_timing ? ga_now() : 0;
    int want = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
    ga_ctx_t *c = NULL;
    int dev = 0;
    CUresult r = ga_pass_begin(size, want, &c, &dev);
    int committed = c && r == CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        r = ga_real.cuMemCreate(handle, size, prop, flags);
    ga_pass_end(c, dev, committed, r, r == CUDA_SUCCESS ? (uint64_t)*handle : 0, size,
                GA_API_CUMEMCREATE, t0, 1);
    return r;
}

/* The program's handles live in their device's table; the driver decides first, and the record
 * goes only when the driver released the handle. */
GA_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    GA_HOOK_ENTER(cuMemRelease, (handle));
    uint64_t t0 = ga_timing ? ga_now() : 0;
    CUresult r = ga_real.cuMemRelease(handle);
    if (r != CUDA_SUCCESS || !handle)
        return r;
    for (int d = 0; d < GA_MAX_DEVICES; d++) {
        ga_dev_t *dv = ga_dev(d);
        if (!atomic_load_explicit(&dv->known, memory_order_acquire))
            continue;
        ga_pentry_t e = {0};
        ga_mutex_lock(&dv->lock);
        int found = ga_ptrmap_take(&dv->handles, (uint64_t)handle, &e);
        if (found) {
            ga_count_free(&dv->counts, GA_API_CUMEMRELEASE, t0);
        }
        ga_mutex_unlock(&dv->lock);
        if (found) {
            ga_dev_uncommit(d, e.size);
            ga_level_add(GA_LEVEL_RESERVED, -(int64_t)e.size);
            ga_level_add(GA_LEVEL_PASSTHROUGH, -(int64_t)e.size);
            ga_level_add(GA_LEVEL_IN_USE, -(int64_t)e.size);
            break;
        }
    }
    return r;
}

/* ---- the runtime: tag the thread, call the real function ---- */
#define GA_CUDART_CALL(name, api, args)                                                     \
    do {                                                                                   \
        if (!ga_real.name)                                                                 \
            __atomic_store_n(&ga_real.name,                                                \
                             (__typeof__(ga_real.name))ga_resolve_cudart(#name, (void *)name), \
                             __ATOMIC_RELEASE);                                            \
        if (!ga_real.name)                                                                 \
            return GA_CUDART_ERROR_INIT;                                                   \
        uint8_t prev_ = ga_tl_api;                                                         \
        ga_tl_api = (api);                                                                 \
        ga_cudart_error_t r_ = ga_real.name args;                                          \
        ga_tl_api = prev_;                                                                 \
        return r_;                                                                         \
    } while (0)

GA_EXPORT ga_cudart_error_t cudaMalloc(void **devPtr, size_t size)
{
    GA_CUDART_CALL(cudaMalloc, GA_API_CUDAMALLOC, (devPtr, size));
}

GA_EXPORT ga_cudart_error_t cudaFree(void *devPtr)
{
    GA_CUDART_CALL(cudaFree, GA_API_CUDAFREE, (devPtr));
}

GA_EXPORT ga_cudart_error_t cudaMemGetInfo(size_t *free, size_t *total)
{
    GA_CUDART_CALL(cudaMemGetInfo, ga_tl_api, (free, total));
}
