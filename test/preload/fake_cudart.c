/* A stand-in for the CUDA runtime's three memory functions, for the preload tests: like the real
 * libcudart, its cudaMalloc reaches the driver's cuMemAlloc_v2 underneath, so a test can check
 * that the shim counts such a call once, under the runtime's name. (The real libcudart cannot run
 * past its export-table check on the simulated driver.) cudaError_t is an int-sized enum. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT int cudaMalloc(void **p, size_t n)
{
    CUdeviceptr d = 0;
    CUresult r = cuMemAlloc_v2(&d, n);
    *p = (void *)(uintptr_t)d;
    return r == CUDA_SUCCESS ? 0 : 2; /* cudaErrorMemoryAllocation */
}

FAKE_EXPORT int cudaFree(void *p)
{
    return cuMemFree_v2((CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS ? 0 : 1;
}

FAKE_EXPORT int cudaMemGetInfo(size_t *f, size_t *t)
{
    return cuMemGetInfo_v2(f, t) == CUDA_SUCCESS ? 0 : 1;
}
