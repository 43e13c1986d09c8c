/* A null CUDA driver for bench-shim and bench-threads: the few entry points the shim and the
 * benchmarks call, each doing next to nothing (allocation is a pointer bump, free is a no-op). Against
 * it, the time of an alloc+free pair through the shim minus the direct time is the shim's own cost,
 * which the simulated driver (an mmap per allocation, microseconds with noise) is far too slow to
 * resolve. Contexts are handles into a small static table (cuCtxCreate_v2 gives the next one), so
 * the threads benchmark can run on two contexts. The VMM entry points succeed with fake addresses
 * (nothing is behind them: the shim never touches pool memory), so GPUARENA_MODE=vmm runs too.
 * Built as $(BUILD)/preload/nulldrv/libcuda.so.1; never used by tests. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stddef.h>

#pragma GCC visibility push(default)

#define NULLDRV_CTXS 16
#define NULLDRV_GRANULE (2ull << 20)

static __thread CUcontext current;
static int the_ctxs[NULLDRV_CTXS]; /* [0] is the primary context */
static unsigned next_ctx = 1;
static unsigned long long next_ptr = 1ull << 40;
static unsigned long long next_handle = 1;

/* n bytes of fresh address space (rounded to align, a power of two); never reused. */
static unsigned long long bump(size_t n, unsigned long long align)
{
    unsigned long long step = (n + align - 1) & ~(align - 1);
    return (__atomic_fetch_add(&next_ptr, step + align, __ATOMIC_RELAXED) + align - 1) & ~(align - 1);
}

CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { *d = ordinal; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) { (void)d; *bytes = 1ull << 40; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)&the_ctxs[0]; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { (void)d; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *f, int *a) { (void)d; *f = 0; *a = 1; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext c) { current = c; return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(CUcontext *c) { *c = current; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
CUresult cuCtxPushCurrent_v2(CUcontext c) { current = c; return CUDA_SUCCESS; }
CUresult cuCtxPopCurrent_v2(CUcontext *c) { *c = current; return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult e, const char **s) { (void)e; *s = "CUDA_ERROR_NULLDRV"; return CUDA_SUCCESS; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = *t = 1ull << 40; return CUDA_SUCCESS; }

CUresult cuCtxCreate_v2(CUcontext *c, unsigned int flags, CUdevice d)
{
    (void)flags, (void)d;
    unsigned i = __atomic_fetch_add(&next_ctx, 1, __ATOMIC_RELAXED);
    if (!c || i >= NULLDRV_CTXS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *c = current = (CUcontext)&the_ctxs[i];
    return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext c)
{
    if (current == c)
        current = NULL;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    if (!p || !n)
        return CUDA_ERROR_INVALID_VALUE;
    *p = __atomic_fetch_add(&next_ptr, (n + 511) & ~511ull, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) { return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

/* ---- VMM: success with fake addresses and handles ---- */
CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    (void)prop, (void)option;
    *g = NULLDRV_GRANULE;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags)
{
    (void)addr, (void)flags;
    if (!p || !size)
        return CUDA_ERROR_INVALID_VALUE;
    *p = bump(size, align > NULLDRV_GRANULE ? align : NULLDRV_GRANULE);
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr p, size_t size) { (void)p, (void)size; return CUDA_SUCCESS; }

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    (void)size, (void)prop, (void)flags;
    *h = __atomic_fetch_add(&next_handle, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h) { (void)h; return CUDA_SUCCESS; }

CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                  unsigned long long flags)
{
    (void)p, (void)size, (void)offset, (void)h, (void)flags;
    return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr p, size_t size) { (void)p, (void)size; return CUDA_SUCCESS; }

CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    (void)p, (void)size, (void)desc, (void)count;
    return CUDA_SUCCESS;
}

#pragma GCC visibility pop
