/* simcuda copies and sets: cuMemcpy*, cuMemsetD8/D32, plus their per-thread-stream (_ptds) twins.
 *
 * Device memory is host memory, so a copy is a memmove; what makes this a driver is the checking:
 * every device range must lie inside one live allocation, or inside VMM mappings the current
 * context's device may read (or write, for a destination), else CUDA_ERROR_INVALID_VALUE. So a test
 * that copies past the end of a sub-allocated block, or into a granule its allocator unmapped, fails
 * here as on a GPU instead of faulting. The lock is held during the copy so a concurrent free or
 * unmap cannot pull the bytes away underneath.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <string.h>

#define SIM_PTR(d) ((void *)(uintptr_t)(d))

/* dst and src: 1 when that side is device memory that must be checked. */
static CUresult sim_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t n)
{
    SIM_COUNT(memcpy_calls);
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    if (!dst || !src)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    int ok = (!dst_dev || sim_range_ok_locked((CUdeviceptr)(uintptr_t)dst, n, c->dev, 1)) &&
             (!src_dev || sim_range_ok_locked((CUdeviceptr)(uintptr_t)src, n, c->dev, 0));
    if (ok)
        memmove(dst, src, n);
    pthread_mutex_unlock(&sim_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Unified addressing: each side is checked if it is device address space (an allocation or a VMM
 * reservation, mapped or not); anything else is host memory. */
static CUresult sim_copy_any(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    pthread_mutex_lock(&sim_lock);
    int dd = sim_is_device_locked(dst), sd = sim_is_device_locked(src);
    pthread_mutex_unlock(&sim_lock);
    return sim_copy(SIM_PTR(dst), dd, SIM_PTR(src), sd, n);
}

#define SIM_HTOD_ARGS (SIM_PTR(dstDevice), 1, srcHost, 0, ByteCount)
#define SIM_DTOH_ARGS (dstHost, 0, SIM_PTR(srcDevice), 1, ByteCount)
#define SIM_DTOD_ARGS (SIM_PTR(dstDevice), 1, SIM_PTR(srcDevice), 1, ByteCount)
SIM_WRAP(cuMemcpyHtoD_v2, sim_copy, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), SIM_HTOD_ARGS)
SIM_WRAP(cuMemcpyHtoD_v2_ptds, sim_copy, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount),
         SIM_HTOD_ARGS)
SIM_WRAP(cuMemcpyDtoH_v2, sim_copy, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), SIM_DTOH_ARGS)
SIM_WRAP(cuMemcpyDtoH_v2_ptds, sim_copy, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), SIM_DTOH_ARGS)
SIM_WRAP(cuMemcpyDtoD_v2, sim_copy, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
         SIM_DTOD_ARGS)
SIM_WRAP(cuMemcpyDtoD_v2_ptds, sim_copy, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
         SIM_DTOD_ARGS)
SIM_WRAP(cuMemcpy, sim_copy_any, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), (dst, src, ByteCount))
SIM_WRAP(cuMemcpy_ptds, sim_copy_any, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount), (dst, src, ByteCount))
#undef SIM_HTOD_ARGS
#undef SIM_DTOH_ARGS
#undef SIM_DTOD_ARGS

/* Sets n elements of elem bytes each (1 or 4) to the low bytes of value. */
static CUresult sim_set(CUdeviceptr dst, unsigned value, size_t elem, size_t n)
{
    SIM_COUNT(memset_calls);
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    if (dst % elem || n > SIZE_MAX / elem)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    int ok = sim_range_ok_locked(dst, n * elem, c->dev, 1);
    if (ok && elem == 1)
        memset(SIM_PTR(dst), (int)(value & 0xff), n);
    for (size_t i = 0; ok && elem == 4 && i < n; i++)
        ((unsigned *)SIM_PTR(dst))[i] = value;
    pthread_mutex_unlock(&sim_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_WRAP(cuMemsetD8_v2, sim_set, (CUdeviceptr dstDevice, unsigned char uc, size_t N), (dstDevice, uc, 1, N))
SIM_WRAP(cuMemsetD8_v2_ptds, sim_set, (CUdeviceptr dstDevice, unsigned char uc, size_t N), (dstDevice, uc, 1, N))
SIM_WRAP(cuMemsetD32_v2, sim_set, (CUdeviceptr dstDevice, unsigned int ui, size_t N), (dstDevice, ui, 4, N))
SIM_WRAP(cuMemsetD32_v2_ptds, sim_set, (CUdeviceptr dstDevice, unsigned int ui, size_t N), (dstDevice, ui, 4, N))
