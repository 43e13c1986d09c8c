/* gpuarena pass-through hooks: managed, stream-ordered, pool and VMM allocations, and the runtime.
 *
 * The arena does not serve these (first version): they go to the driver as asked, but they count
 * toward the device cap and the statistics, because a cap that a program escapes by calling
 * cuMemAllocAsync would cap nothing. Each is checked against the cap before the driver call and
 * recorded in ga_g.ptrs so its free gives the bytes back. VMM handles share that table under a
 * tagged key (bit 63), so they can never collide with a device pointer.
 * The runtime hooks (cudaMalloc, cudaFree, cudaMemGetInfo) only tag the thread with the entry
 * point and call the real runtime, which reaches the driver hooks underneath: the driver-level
 * hook then counts the call once, under the runtime's name.
 */
#include "shim.h"

#define GA_VMM_TAG (1ull << 63)

/* Before the driver call: the context, and the bytes committed against its device's cap. */
static CUresult ga_pass_begin(size_t size, int dev, ga_ctx_t **cp, int *devp)
{
    ga_ctx_t *c = ga_current();
    *cp = c;
    if (!c)
        return CUDA_SUCCESS; /* no context: let the driver answer */
    *devp = dev >= 0 && dev < GA_MAX_DEVICES ? dev : c->dev;
    if (!__atomic_load_n(&ga_devs[*devp].known, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&ga_g.lock);
        ga_dev_setup(*devp);
        pthread_mutex_unlock(&ga_g.lock);
    }
    return ga_dev_commit(*devp, size) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* After the driver call: record it (or give the commitment back) and count it. */
static void ga_pass_end(ga_ctx_t *c, int dev, int committed, CUresult r, uint64_t key, size_t size,
                        uint8_t api, uint64_t t0, int tied_to_ctx)
{
    if (!c)
        return;
    if (ga_tl_api)
        api = ga_tl_api;
    pthread_mutex_lock(&ga_g.lock);
    if (r == CUDA_SUCCESS) {
        ga_pentry_t e = {.key = key, .size = size, .ctx = tied_to_ctx ? c : NULL, .dev = dev,
                         .api = api, .passthrough = 1};
        if (ga_ptrmap_put(&ga_g.ptrs, &e) == 0) {
            ga_count_reserve((int64_t)size, 0);
            ga_count_passthrough((int64_t)size);
        } else {
            ga_dev_uncommit(dev, size); /* cannot track it: leave it uncounted rather than leak */
        }
    } else if (committed) {
        ga_dev_uncommit(dev, size);
    }
    ga_count_alloc(api, size, size, r == CUDA_SUCCESS);
    if (ga_timing)
        ga_alloc_time += ga_now() - t0;
    pthread_mutex_unlock(&ga_g.lock);
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
        ga_pass_end(c, dev, committed, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize, api, t0, 1); \
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
    GA_PASS_ALLOC(cuMemAllocAsync, GA_API_CUMEMALLOCASYNC, (dptr, bytesize, hStream));
}

GA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemAllocAsync_ptsz, (dptr, bytesize, hStream));
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
    ga_pass_end(c, dev, committed, r, r == CUDA_SUCCESS ? (*handle ^ GA_VMM_TAG) : 0, size,
                GA_API_CUMEMCREATE, t0, 0);
    return r;
}

GA_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    GA_HOOK_ENTER(cuMemRelease, (handle));
    ga_pentry_t e;
    pthread_mutex_lock(&ga_g.lock);
    int found = ga_ptrmap_take(&ga_g.ptrs, handle ^ GA_VMM_TAG, &e);
    pthread_mutex_unlock(&ga_g.lock);
    CUresult r = ga_real.cuMemRelease(handle);
    if (!found)
        return r;
    pthread_mutex_lock(&ga_g.lock);
    if (r == CUDA_SUCCESS) {
        ga_count_free(GA_API_CUMEMRELEASE, e.size);
        ga_count_reserve(-(int64_t)e.size, 0);
        ga_count_passthrough(-(int64_t)e.size);
    } else {
        ga_ptrmap_put(&ga_g.ptrs, &e);
    }
    pthread_mutex_unlock(&ga_g.lock);
    if (r == CUDA_SUCCESS)
        ga_dev_uncommit(e.dev, e.size);
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
