/* A stand-in for a device plugin's interposer (a hijack library under its own soname that
 * defines driver names, such as HAMi-core's): for the preload test that the shim leaves its
 * functions to it, known as no driver although it exports cuDriverGetVersion and cuMemAlloc_v2,
 * and, named as GPUARENA_LIBCUDA, not taken for a copy of the shim although it defines dlsym too,
 * as HAMi-core's does. Its functions only answer; nothing calls them. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT void *dlsym(void *handle, const char *symbol)
{
    (void)handle, (void)symbol;
    return (void *)0;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int *version)
{
    *version = 12000;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    (void)p, (void)n;
    return CUDA_ERROR_OUT_OF_MEMORY;
}
