/* A null CUDA driver for bench-shim: the few entry points the shim and the benchmark call, each
 * doing next to nothing (allocation is a pointer bump, free is a no-op). Against it, the time of an
 * alloc+free pair through the shim minus the direct time is the shim's own cost, which the simulated
 * driver (an mmap per allocation, microseconds with noise) is far too slow to resolve.
 * Built as $(BUILD)/preload/nulldrv/libcuda.so.1; never used by tests. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stddef.h>

#pragma GCC visibility push(default)

static __thread CUcontext current;
static int the_ctx;
static unsigned long long next_ptr = 1ull << 40;

CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { *d = ordinal; return CUDA_SUCCESS; }
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) { (void)d; *bytes = 1ull << 40; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)&the_ctx; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { (void)d; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *f, int *a) { (void)d; *f = 0; *a = 1; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext c) { current = c; return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(CUcontext *c) { *c = current; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
CUresult cuCtxPushCurrent_v2(CUcontext c) { current = c; return CUDA_SUCCESS; }
CUresult cuCtxPopCurrent_v2(CUcontext *c) { *c = current; return CUDA_SUCCESS; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = *t = 1ull << 40; return CUDA_SUCCESS; }

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    if (!p || !n)
        return CUDA_ERROR_INVALID_VALUE;
    *p = __atomic_fetch_add(&next_ptr, (n + 511) & ~511ull, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) { return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

#pragma GCC visibility pop
