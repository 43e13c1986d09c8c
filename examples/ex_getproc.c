/* ex_getproc: resolves the driver the way the CUDA runtime does (interposition path 3): dlsym only
 * cuGetProcAddress_v2, then ask it for every other entry point by base name and CUDA version,
 * including cuGetProcAddress itself and the per-thread-stream variant of cuMemAllocAsync. A shim must
 * hand back its hooks for exactly the variant asked for.
 *
 * usage: ex_getproc [blocks=32] [kib=64]; exit 1 on any error or mismatch.
 */
#include "ex_common.h"

#include <dlfcn.h>
#include <string.h>

typedef CUresult (*getproc_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static getproc_t getproc;

/* Looks up base name `name` at `version`; any failure is fatal and says which lookup it was. */
static void *proc(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = getproc(name, &fn, version, flags, &st);
    if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {
        fprintf(stderr, "ex_getproc: cuGetProcAddress(%s, %d, %llu) failed: CUresult %d, status %d\n", name,
                version, (unsigned long long)flags, (int)r, (int)st);
        exit(1);
    }
    return fn;
}

#define PT CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

int main(int argc, char **argv)
{
    ex_prog = "ex_getproc";
    size_t blocks = (size_t)ex_count(argc, argv, 1, 32, 1);
    size_t size = (size_t)(ex_arg(argc, argv, 2, 64) * 1024);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(getproc = (getproc_t)dlsym(lib, "cuGetProcAddress_v2"))) {
        fprintf(stderr, "ex_getproc: cannot load cuGetProcAddress_v2 from libcuda.so.1: %s\n", dlerror());
        return 1;
    }
    /* The runtime re-resolves cuGetProcAddress through itself first; so do we. */
    getproc = (getproc_t)proc("cuGetProcAddress", 12000, 0);
    ex_error_name = (CUresult(*)(CUresult, const char **))proc("cuGetErrorName", 6000, 0);
    CUresult (*init)(unsigned) = proc("cuInit", 2000, 0);
    CUresult (*retain)(CUcontext *, CUdevice) = proc("cuDevicePrimaryCtxRetain", 7000, 0);
    CUresult (*release)(CUdevice) = proc("cuDevicePrimaryCtxRelease", 11000, 0);
    CUresult (*set_current)(CUcontext) = proc("cuCtxSetCurrent", 4000, 0);
    CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc", 3020, 0);
    CUresult (*free_)(CUdeviceptr) = proc("cuMemFree", 3020, 0);
    CUresult (*info)(size_t *, size_t *) = proc("cuMemGetInfo", 3020, 0);
    CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream) = proc("cuMemAllocAsync", 11020, PT);
    CUresult (*free_async)(CUdeviceptr, CUstream) = proc("cuMemFreeAsync", 11020, PT);
    CUresult (*sync)(CUstream) = proc("cuStreamSynchronize", 7000, PT);
    CUresult (*htod)(CUdeviceptr, const void *, size_t) = proc("cuMemcpyHtoD", 3020, 0);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t) = proc("cuMemcpyDtoH", 3020, 0);

    CUcontext ctx;
    EX_CHECK(init(0));
    EX_CHECK(retain(&ctx, 0));
    EX_CHECK(set_current(ctx));
    unsigned char *in = malloc(size), *out = malloc(size);
    if (!in || !out)
        return 1;
    size_t free_b, total;
    for (size_t i = 0; i < blocks; i++) {
        CUdeviceptr p, q;
        memset(in, (int)(i * 3 + 1), size);
        EX_CHECK(alloc(&p, size));
        EX_CHECK(alloc_async(&q, size, CU_STREAM_PER_THREAD));
        EX_CHECK(htod(p, in, size));
        EX_CHECK(dtoh(out, p, size));
        if (memcmp(in, out, size) != 0) {
            fprintf(stderr, "ex_getproc: block %zu read back wrong\n", i);
            return 1;
        }
        EX_CHECK(free_async(q, CU_STREAM_PER_THREAD));
        EX_CHECK(free_(p));
    }
    EX_CHECK(sync(CU_STREAM_PER_THREAD));
    EX_CHECK(info(&free_b, &total));
    EX_CHECK(release(0));
    printf("ex_getproc: %zu sync + %zu async blocks of %zu bytes through cuGetProcAddress, data intact; "
           "free %zu of %zu MiB\n", blocks, blocks, size, free_b >> 20, total >> 20);
    free(in), free(out);
    return 0;
}
