/* simcuda copies and sets: cuMemcpy*, cuMemsetD8/D32, plus their per-thread-stream (_ptds) twins.
 *
 * Device memory is host memory, so a copy is a memmove; what makes this a driver is the checking:
 * every device range must lie inside one live allocation (CUDA_ERROR_INVALID_VALUE otherwise), so a
 * test that copies past the end of a sub-allocated block fails here as it would on a GPU. The lock
 * is held during the copy so a concurrent free cannot unmap the bytes underneath.
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
    int ok = (!dst_dev || sim_range_ok_locked((CUdeviceptr)(uintptr_t)dst, n)) &&
             (!src_dev || sim_range_ok_locked((CUdeviceptr)(uintptr_t)src, n));
    if (ok)
        memmove(dst, src, n);
    pthread_mutex_unlock(&sim_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return sim_copy(SIM_PTR(dstDevice), 1, srcHost, 0, ByteCount);
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return sim_copy(dstHost, 0, SIM_PTR(srcDevice), 1, ByteCount);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return sim_copy(SIM_PTR(dstDevice), 1, SIM_PTR(srcDevice), 1, ByteCount);
}

/* Unified addressing: each side is checked only if it is device memory we know. */
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    pthread_mutex_lock(&sim_lock);
    int dd = sim_range_ok_locked(dst, 1), sd = sim_range_ok_locked(src, 1);
    pthread_mutex_unlock(&sim_lock);
    return sim_copy(SIM_PTR(dst), dd, SIM_PTR(src), sd, ByteCount);
}

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return cuMemcpyHtoD_v2(dstDevice, srcHost, ByteCount);
}

CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return cuMemcpyDtoH_v2(dstHost, srcDevice, ByteCount);
}

CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return cuMemcpyDtoD_v2(dstDevice, srcDevice, ByteCount);
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return cuMemcpy(dst, src, ByteCount);
}

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
    int ok = sim_range_ok_locked(dst, n * elem);
    if (ok && elem == 1)
        memset(SIM_PTR(dst), (int)(value & 0xff), n);
    for (size_t i = 0; ok && elem == 4 && i < n; i++)
        ((unsigned *)SIM_PTR(dst))[i] = value;
    pthread_mutex_unlock(&sim_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return sim_set(dstDevice, uc, 1, N);
}

CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    return sim_set(dstDevice, ui, 4, N);
}

CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return cuMemsetD8_v2(dstDevice, uc, N);
}

CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    return cuMemsetD32_v2(dstDevice, ui, N);
}
