/* simcuda queries: cuMemGetInfo and cuMemGetAddressRange of both ABIs, the pointer attributes and
 * cuIpcGetMemHandle, answered from sim_memory.c's allocation records (sim_alloc.h) and, for an
 * address no allocation holds, from sim_vmm.c's mappings. Apart from sim_memory.c to keep each
 * file short. */
#define _GNU_SOURCE
#include "sim_alloc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- information ---- */

/* cuMemGetInfo of either ABI, before the v1 call's clamp. */
static CUresult sim_meminfo(size_t *free_bytes, size_t *total)
{
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    unsigned long long used = sim_dev_used_locked(c->dev);
    pthread_mutex_unlock(&sim_lock);
    *total = (size_t)sim_cfg.total_mem;
    *free_bytes = used >= sim_cfg.total_mem ? 0 : (size_t)(sim_cfg.total_mem - used);
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    SIM_COUNT(meminfo_calls);
    SIM_ENTER(cuMemGetInfo_v2);
    return sim_meminfo(free_bytes, total);
}

/* cuMemGetAddressRange of either ABI, before the v1 call's narrowing. */
static CUresult sim_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_lock);
    const sim_alloc_t *a = sim_find_locked(dptr);
    CUdeviceptr base = a ? a->base : 0;
    size_t size = a ? a->size : 0;
    /* A VMM address answers with its mapping (one cuMemMap), not the whole reservation. */
    int found = a || sim_vmm_mapping_locked(dptr, &base, &size);
    pthread_mutex_unlock(&sim_lock);
    if (found && pbase)
        *pbase = base;
    if (found && psize)
        *psize = size;
    return found ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    SIM_ENTER(cuMemGetAddressRange_v2);
    return sim_range(pbase, psize, dptr);
}

/* The v1 queries: 32-bit fields, each figure clamped to UINT_MAX. */
static unsigned int sim_clamp32(unsigned long long n)
{
    return n > UINT32_MAX ? UINT32_MAX : (unsigned int)n;
}

CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total)
{
    SIM_COUNT(v1_meminfo_calls);
    SIM_ENTER(cuMemGetInfo);
    size_t f = 0, t = 0;
    CUresult r = sim_meminfo(free_bytes ? &f : NULL, total ? &t : NULL);
    if (r == CUDA_SUCCESS) {
        *free_bytes = sim_clamp32(f);
        *total = sim_clamp32(t);
    }
    return r;
}

/* An address below 4 GiB lies in an allocation below 4 GiB (a v1 one), whose base fits; its size
 * is clamped as the other v1 figures are. */
CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
    SIM_ENTER(cuMemGetAddressRange);
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r = sim_range(&base, &size, (CUdeviceptr)dptr);
    if (r == CUDA_SUCCESS && pbase)
        *pbase = (CUdeviceptr_v1)base;
    if (r == CUDA_SUCCESS && psize)
        *psize = sim_clamp32(size);
    return r;
}

/* Writes one pointer attribute of allocation a (NULL: the defaults for an unknown pointer). */
static CUresult sim_attr(CUpointer_attribute attr, const sim_alloc_t *a, CUdeviceptr ptr, void *data)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = a ? (CUcontext)a->ctx : NULL; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = a ? CU_MEMORYTYPE_DEVICE : 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = a ? ptr : 0; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *(void **)data = a && a->kind == SIM_MANAGED ? (void *)(uintptr_t)ptr : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data = a && a->kind == SIM_MANAGED; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = a ? a->dev : -1; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = a ? a->base : 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = a ? a->size : 0; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned *)data = a != NULL; break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = a && a->kind == SIM_ASYNC ? (CUmemoryPool)a->pool : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = a ? a->id : 0; break;
    /* device memory of the driver's own allocators is GPUDirect RDMA capable on the GPUs that
     * support it (all here); managed memory is not */
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        *(unsigned *)data = a && a->kind != SIM_MANAGED;
        break;
    /* "suitable for cudaIpcGetMemHandle": what cuIpcGetMemHandle below exports, cuMemAlloc's */
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *(unsigned *)data = a && a->kind == SIM_PLAIN; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SIM_ENTER(cuPointerGetAttribute);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    const sim_alloc_t *a = sim_find_locked(ptr);
    if (a)
        r = sim_attr(attribute, a, ptr, data);
    else if (!sim_vmm_attr_locked(attribute, ptr, data, &r))
        r = CUDA_ERROR_INVALID_VALUE; /* a pointer the driver does not know */
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* Unlike the singular call, an unknown pointer is not an error: every attribute gets its default. */
CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                CUdeviceptr ptr)
{
    SIM_ENTER(cuPointerGetAttributes);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (numAttributes == 0 || !attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    const sim_alloc_t *a = sim_find_locked(ptr);
    for (unsigned i = 0; i < numAttributes && r == CUDA_SUCCESS; i++) {
        if (!data[i])
            r = CUDA_ERROR_INVALID_VALUE;
        else if (a || !sim_vmm_attr_locked(attributes[i], ptr, data[i], &r))
            r = sim_attr(attributes[i], a, ptr, data[i]);
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    SIM_COUNT(ipc_calls);
    SIM_ENTER(cuIpcGetMemHandle);
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    const sim_alloc_t *a = sim_find_locked(dptr);
    int ok = a && a->kind == SIM_PLAIN;
    if (ok) {
        unsigned long long v[3] = {a->base, a->size, (unsigned long long)getpid()};
        memset(pHandle, 0, sizeof *pHandle);
        memcpy(pHandle->reserved, v, sizeof v);
    }
    pthread_mutex_unlock(&sim_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

int sim_range_ok_locked(CUdeviceptr p, size_t n, int dev, int write)
{
    const sim_alloc_t *a = sim_find_locked(p);
    if (a)
        return n <= a->size - (p - a->base);
    return sim_vmm_range_ok_locked(p, n, dev, write);
}

int sim_is_device_locked(CUdeviceptr p)
{
    return sim_find_locked(p) || sim_vmm_reserved_locked(p);
}
