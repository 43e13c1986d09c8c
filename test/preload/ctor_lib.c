/* For the preload tests: a library whose constructor makes the process's first CUDA calls, while
 * the dynamic loader is still busy loading it. The shim must start safely from there. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

__attribute__((visibility("default"))) int ctor_result = -1;

__attribute__((constructor)) static void ctor_first_cuda_calls(void)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr p;
    ctor_result = cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) ||
                  cuCtxSetCurrent(c) || cuMemAlloc_v2(&p, 4096) || cuMemFree_v2(p);
}
