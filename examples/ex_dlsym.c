/* ex_dlsym: a program that never links the driver; it dlopens libcuda.so.1 and dlsyms each entry
 * point by its versioned name, as XLA does (interposition path 2). A preloaded shim must answer these
 * lookups with its hooks; on the simulated driver the counters show what reached the driver.
 *
 * usage: ex_dlsym [blocks=64] [kib=256]; exit 1 on any error or mismatch.
 */
#include "ex_common.h"

#include <dlfcn.h>
#include <string.h>

static struct {
    CUresult (*init)(unsigned);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free_)(CUdeviceptr);
    CUresult (*info)(size_t *, size_t *);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
} drv;

static void *need(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "ex_dlsym: libcuda.so.1 has no %s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

static void resolve(void *lib)
{
    ex_error_name = (CUresult(*)(CUresult, const char **))need(lib, "cuGetErrorName");
    drv.init = (CUresult(*)(unsigned))need(lib, "cuInit");
    drv.retain = (CUresult(*)(CUcontext *, CUdevice))need(lib, "cuDevicePrimaryCtxRetain");
    drv.release = (CUresult(*)(CUdevice))need(lib, "cuDevicePrimaryCtxRelease_v2");
    drv.set_current = (CUresult(*)(CUcontext))need(lib, "cuCtxSetCurrent");
    drv.alloc = (CUresult(*)(CUdeviceptr *, size_t))need(lib, "cuMemAlloc_v2");
    drv.free_ = (CUresult(*)(CUdeviceptr))need(lib, "cuMemFree_v2");
    drv.info = (CUresult(*)(size_t *, size_t *))need(lib, "cuMemGetInfo_v2");
    drv.htod = (CUresult(*)(CUdeviceptr, const void *, size_t))need(lib, "cuMemcpyHtoD_v2");
    drv.dtoh = (CUresult(*)(void *, CUdeviceptr, size_t))need(lib, "cuMemcpyDtoH_v2");
}

int main(int argc, char **argv)
{
    ex_prog = "ex_dlsym";
    size_t blocks = (size_t)ex_count(argc, argv, 1, 64, 1);
    size_t size = (size_t)(ex_arg(argc, argv, 2, 256) * 1024);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "ex_dlsym: cannot load libcuda.so.1: %s (set LD_LIBRARY_PATH)\n", dlerror());
        return 1;
    }
    resolve(lib);
    CUcontext ctx;
    EX_CHECK(drv.init(0));
    EX_CHECK(drv.retain(&ctx, 0));
    EX_CHECK(drv.set_current(ctx));
    CUdeviceptr *p = calloc(blocks, sizeof *p);
    unsigned char *in = malloc(size), *out = malloc(size);
    if (!p || !in || !out)
        return 1;
    size_t free0, free1, total;
    EX_CHECK(drv.info(&free0, &total));
    for (size_t i = 0; i < blocks; i++) {
        memset(in, (int)(i & 0xff), size);
        EX_CHECK(drv.alloc(&p[i], size));
        EX_CHECK(drv.htod(p[i], in, size));
    }
    EX_CHECK(drv.info(&free1, &total));
    for (size_t i = 0; i < blocks; i++) {
        memset(in, (int)(i & 0xff), size);
        EX_CHECK(drv.dtoh(out, p[i], size));
        if (memcmp(in, out, size) != 0) {
            fprintf(stderr, "ex_dlsym: block %zu read back wrong\n", i);
            return 1;
        }
        EX_CHECK(drv.free_(p[i]));
    }
    EX_CHECK(drv.release(0));
    printf("ex_dlsym: %zu blocks of %zu bytes through dlsym, data intact; free %zu -> %zu of %zu MiB\n",
           blocks, size, free0 >> 20, free1 >> 20, total >> 20);
    free(p), free(in), free(out);
    return 0;
}
