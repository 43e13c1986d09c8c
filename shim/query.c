/* gpuarena queries: cuInit, cuMemGetInfo, pointer ranges and attributes, IPC handles.
 *
 * These hooks make the arena invisible to the program: cuMemGetInfo reports the process's view
 * (total = its cap, free = what it could still allocate), and range queries on an arena pointer
 * answer with the sub-allocation, not the large driver block behind it, because frameworks use
 * them to find an allocation's base. Everything else goes to the driver unchanged.
 * An arena pointer cannot be exported by IPC: the handle would map the whole driver block, so
 * another process would see the wrong bytes. cuIpcGetMemHandle refuses it with
 * CUDA_ERROR_NOT_SUPPORTED and says once how to run instead.
 */
#include "shim.h"

/* cuInit reports option errors: the program stops at its first CUDA call, not later. */
GA_EXPORT CUresult cuInit(unsigned int Flags)
{
    GA_HOOK_ENTER(cuInit, (Flags));
    return ga_real.cuInit(Flags);
}

/* Bytes free inside every live arena of a device. */
static uint64_t ga_arena_free_bytes(int dev)
{
    uint64_t sum = 0;
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next)) {
        if (c->dev != dev || !ga_ctx_peek(c))
            continue;
        pthread_mutex_lock(&c->lock);
        if (c->arena) {
            ga_stats_t s;
            ga_get_stats(c->arena, &s);
            sum += s.total_free;
        }
        pthread_mutex_unlock(&c->lock);
    }
    return sum;
}

GA_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    GA_HOOK_ENTER(cuMemGetInfo_v2, (free, total));
    if (!free || !total)
        return CUDA_ERROR_INVALID_VALUE;
    size_t pfree = 0, ptotal = 0;
    CUresult r = ga_real.cuMemGetInfo_v2(&pfree, &ptotal);
    ga_ctx_t *c = r == CUDA_SUCCESS ? ga_current() : NULL;
    if (!c)
        return r == CUDA_SUCCESS ? (*free = pfree, *total = ptotal, r) : r;
    ga_dev_t *d = &ga_devs[c->dev];
    uint64_t cap = d->cap < ptotal ? d->cap : ptotal;
    int64_t committed = atomic_load(&d->committed);
    uint64_t held = committed > 0 ? (uint64_t)committed : 0;
    uint64_t inside = ga_arena_free_bytes(c->dev);
    uint64_t f = (cap > held ? cap - held : 0) + inside;
    if (f > (uint64_t)pfree + inside)
        f = (uint64_t)pfree + inside;
    if (f > cap)
        f = cap;
    *free = (size_t)f;
    *total = (size_t)cap;
    return CUDA_SUCCESS;
}

/* Base and size of the live arena allocation containing p: 1 found, 0 not an arena pointer,
 * -1 inside an arena region but in no live allocation. */
static int ga_arena_range(CUdeviceptr p, uintptr_t *base, size_t *size)
{
    ga_ctx_t *c = ga_find_owner((uintptr_t)p);
    if (!c)
        return 0;
    ga_status_t st = ga_lookup(c->arena, (uintptr_t)p, base, size);
    pthread_mutex_unlock(&c->lock);
    if (st != GA_OK)
        *base = 0, *size = 0;
    return st == GA_OK ? 1 : -1;
}

GA_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    GA_HOOK_ENTER(cuMemGetAddressRange_v2, (pbase, psize, dptr));
    uintptr_t base = 0;
    size_t size = 0;
    int found = ga_arena_range(dptr, &base, &size);
    if (found == 0)
        return ga_real.cuMemGetAddressRange_v2(pbase, psize, dptr);
    if (found < 0)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = (CUdeviceptr)base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

static int ga_is_range_attr(CUpointer_attribute a)
{
    return a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR || a == CU_POINTER_ATTRIBUTE_RANGE_SIZE;
}

static void ga_write_range_attr(CUpointer_attribute a, void *data, uintptr_t base, size_t size)
{
    if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *(CUdeviceptr *)data = (CUdeviceptr)base;
    else
        *(size_t *)data = size;
}

GA_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    GA_HOOK_ENTER(cuPointerGetAttribute, (data, attribute, ptr));
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t base = 0;
    size_t size = 0;
    int found = ga_is_range_attr(attribute) ? ga_arena_range(ptr, &base, &size) : 0;
    if (found == 0)
        return ga_real.cuPointerGetAttribute(data, attribute, ptr);
    if (found < 0) /* freed arena memory: the driver's answer for a pointer it no longer knows */
        return CUDA_ERROR_INVALID_VALUE;
    ga_write_range_attr(attribute, data, base, size);
    return CUDA_SUCCESS;
}

GA_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                          void **data, CUdeviceptr ptr)
{
    GA_HOOK_ENTER(cuPointerGetAttributes, (numAttributes, attributes, data, ptr));
    if (numAttributes && (!attributes || !data))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = ga_real.cuPointerGetAttributes(numAttributes, attributes, data, ptr);
    uintptr_t base = 0;
    size_t size = 0;
    /* a live arena allocation: its own range; freed arena memory: 0 and 0, as the driver answers
     * for a pointer it does not know (never the whole region the driver sees) */
    if (r != CUDA_SUCCESS || ga_arena_range(ptr, &base, &size) == 0)
        return r;
    for (unsigned i = 0; i < numAttributes; i++)
        if (ga_is_range_attr(attributes[i]) && data[i])
            ga_write_range_attr(attributes[i], data[i], base, size);
    return r;
}

GA_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    GA_HOOK_ENTER(cuIpcGetMemHandle, (pHandle, dptr));
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    ga_ctx_t *c = ga_find_owner((uintptr_t)dptr);
    if (!c)
        return ga_real.cuIpcGetMemHandle(pHandle, dptr);
    pthread_mutex_unlock(&c->lock);
    static _Atomic int said;
    if (!atomic_exchange(&said, 1))
        ga_log(GA_LOG_ERROR, "cuIpcGetMemHandle on a sub-allocated pointer (%#llx) is refused: "
               "the handle would map the whole arena block; run with GPUARENA_MODE=platform to "
               "share memory between processes", (unsigned long long)dptr);
    return CUDA_ERROR_NOT_SUPPORTED;
}
