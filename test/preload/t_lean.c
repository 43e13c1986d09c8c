/* Preload tier on a driver that lacks optional entry points (issue 8 item 4), built as its own binary
 * (test_lean, tier test-lean): it runs under LD_PRELOAD=libgpuarena.so with the lean simulated driver
 * ($(BUILD)/sim-lean, see SIMCUDA_LEAN_OMITS in simcuda.h) first on the library path.
 *
 * Every name the shim exports ($(BUILD)/gen/hooks.txt, given as PT_HOOKS) is fetched with
 * dlsym(RTLD_DEFAULT, name) and called with valid arguments on a live context, each in its own
 * child process so that one crash cannot hide another. None may crash; a hook whose driver entry
 * point the lean driver lacks must answer CUDA_ERROR_NOT_FOUND or CUDA_ERROR_NOT_SUPPORTED, the
 * others must work. A hook with no recipe here fails the test by name: a new hook needs one.
 * The runtime hooks reach the preload tier's stand-in libcudart, which uses only kept entry points.
 */
#define _GNU_SOURCE
#include <check.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "simcuda.h"
#include "../../shim/ga_nvml.h"

typedef int (*lean_call_t)(void *hook); /* calls the hook; returns its CUresult (or cudaError) */

/* The runtime's (here the stand-in's) allocation function, an int-sized cudaError_t. */
extern int cudaMalloc(void **p, size_t n);
/* cuda.h maps cuCtxCreate to its newest variant, which the lean driver lacks; this one it has. */
extern CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

static CUdeviceptr lean_alloc(void)
{
    CUdeviceptr p = 0;
    return cuMemAlloc_v2(&p, 4096) == CUDA_SUCCESS ? p : 0;
}

static const CUmemAllocationProp lean_prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};

/* ---- one recipe per hook: valid arguments, as a program would pass them ---- */

static int r_init(void *f) { return ((CUresult (*)(unsigned))f)(0); }
static int r_alloc(void *f)
{
    CUdeviceptr p = 0;
    CUresult r = ((CUresult (*)(CUdeviceptr *, size_t))f)(&p, 4096);
    return r == CUDA_SUCCESS && !p ? -1 : (int)r;
}
static int r_pitch(void *f)
{
    CUdeviceptr p;
    size_t pitch;
    return ((CUresult (*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned))f)(&p, &pitch, 1000, 4, 4);
}
static int r_free(void *f) { return ((CUresult (*)(CUdeviceptr))f)(lean_alloc()); }
static int r_info(void *f)
{
    size_t fr, t;
    return ((CUresult (*)(size_t *, size_t *))f)(&fr, &t);
}
static int r_range(void *f)
{
    CUdeviceptr base;
    size_t size;
    return ((CUresult (*)(CUdeviceptr *, size_t *, CUdeviceptr))f)(&base, &size, lean_alloc() + 8);
}
/* The v1 ABI (32-bit pointers and sizes): a v1 allocation to free or query. */
static unsigned lean_alloc_v1(void)
{
    CUresult (*v1)(unsigned *, unsigned) = (CUresult (*)(unsigned *, unsigned))dlsym(RTLD_DEFAULT,
                                                                                     "cuMemAlloc");
    unsigned p = 0;
    return v1 && v1(&p, 4096) == CUDA_SUCCESS ? p : 0;
}
static int r_alloc_v1(void *f)
{
    unsigned p = 0;
    CUresult r = ((CUresult (*)(unsigned *, unsigned))f)(&p, 4096);
    return r == CUDA_SUCCESS && !p ? -1 : (int)r;
}
static int r_pitch_v1(void *f)
{
    unsigned p, pitch;
    return ((CUresult (*)(unsigned *, unsigned *, unsigned, unsigned, unsigned))f)(&p, &pitch, 1000, 4, 4);
}
static int r_free_v1(void *f) { return ((CUresult (*)(unsigned))f)(lean_alloc_v1()); }
static int r_info_v1(void *f)
{
    unsigned fr, t;
    return ((CUresult (*)(unsigned *, unsigned *))f)(&fr, &t);
}
static int r_range_v1(void *f)
{
    unsigned base, size;
    return ((CUresult (*)(unsigned *, unsigned *, unsigned))f)(&base, &size, lean_alloc_v1() + 8);
}
static int r_attr(void *f)
{
    CUdeviceptr start;
    return ((CUresult (*)(void *, CUpointer_attribute, CUdeviceptr))f)(
        &start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, lean_alloc());
}
static int r_attrs(void *f)
{
    CUpointer_attribute a[2] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    CUdeviceptr start;
    size_t size;
    void *d[2] = {&start, &size};
    return ((CUresult (*)(unsigned, CUpointer_attribute *, void **, CUdeviceptr))f)(2, a, d, lean_alloc());
}
static int r_ctx_destroy(void *f)
{
    CUcontext c, primary;
    cuCtxGetCurrent(&primary);
    CUresult r = cuCtxCreate_v2(&c, 0, 0);
    if (r == CUDA_SUCCESS && lean_alloc() == 0)
        r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS)
        r = ((CUresult (*)(CUcontext))f)(c);
    cuCtxSetCurrent(primary);
    return r;
}
/* A context made (and pushed) by the hook in each form, allocating in it. */
static int r_ctx_made(CUresult r)
{
    return r != CUDA_SUCCESS ? (int)r : lean_alloc() ? 0 : -1;
}
static int r_ctx_create(void *f)
{
    CUcontext c;
    return r_ctx_made(((CUresult (*)(CUcontext *, unsigned, CUdevice))f)(&c, 0, 0));
}
static int r_ctx_create_v3(void *f)
{
    CUcontext c;
    return r_ctx_made(((CUresult (*)(CUcontext *, CUexecAffinityParam *, int, unsigned, CUdevice))f)(
        &c, NULL, 0, 0, 0));
}
static int r_ctx_create_v4(void *f)
{
    CUcontext c;
    return r_ctx_made(((CUresult (*)(CUcontext *, CUctxCreateParams *, unsigned, CUdevice))f)(&c, NULL, 0, 0));
}
static int r_push(void *f) /* a created context popped, then pushed again by the hook */
{
    CUcontext c, out;
    if (cuCtxCreate_v2(&c, 0, 0) != CUDA_SUCCESS || cuCtxPopCurrent(&out) != CUDA_SUCCESS)
        return -1;
    return r_ctx_made(((CUresult (*)(CUcontext))f)(c));
}
static int r_attach(void *f) /* then detached: the context stays */
{
    CUcontext c;
    CUresult r = ((CUresult (*)(CUcontext *, unsigned))f)(&c, 0);
    CUresult (*detach)(CUcontext) = (CUresult (*)(CUcontext))dlsym(RTLD_DEFAULT, "cuCtxDetach");
    if (r == CUDA_SUCCESS && detach)
        r = detach(c);
    return r;
}
static int r_primary(void *f) /* release or reset: an extra reference keeps the context */
{
    CUcontext c;
    CUresult r = cuDevicePrimaryCtxRetain(&c, 0);
    lean_alloc();
    return r != CUDA_SUCCESS ? (int)r : (int)((CUresult (*)(CUdevice))f)(0);
}
static int r_primary_retain(void *f) /* a second reference, then an allocation in the context */
{
    CUcontext c = NULL;
    CUresult r = ((CUresult (*)(CUcontext *, CUdevice))f)(&c, 0);
    if (r != CUDA_SUCCESS)
        return (int)r;
    return !c || !lean_alloc() ? -1 : (int)cuDevicePrimaryCtxRelease(0);
}
static int r_ipc(void *f)
{
    CUipcMemHandle h;
    return ((CUresult (*)(CUipcMemHandle *, CUdeviceptr))f)(&h, lean_alloc());
}
static int r_getproc(void *f)
{
    void *fn = NULL;
    CUresult r = ((CUresult (*)(const char *, void **, int, cuuint64_t))f)("cuMemAlloc", &fn, 3020, 0);
    return r == CUDA_SUCCESS && !fn ? -1 : (int)r;
}
static int r_getproc_v2(void *f)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CUresult r = ((CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))f)(
        "cuMemFree", &fn, 12000, 0, &st);
    return r == CUDA_SUCCESS && (!fn || st != CU_GET_PROC_ADDRESS_SUCCESS) ? -1 : (int)r;
}
static int r_managed(void *f)
{
    CUdeviceptr p;
    return ((CUresult (*)(CUdeviceptr *, size_t, unsigned))f)(&p, 4096, CU_MEM_ATTACH_GLOBAL);
}
static int r_async(void *f)
{
    CUdeviceptr p;
    return ((CUresult (*)(CUdeviceptr *, size_t, CUstream))f)(&p, 4096, NULL);
}
static int r_pool(void *f)
{
    CUdeviceptr p;
    return ((CUresult (*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream))f)(&p, 4096, NULL, NULL);
}
static int r_pool_destroy(void *f) /* a pool made for it, then destroyed by the hook */
{
    CUmemPoolProps pp = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                         .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool pool;
    CUresult r = cuMemPoolCreate(&pool, &pp);
    return r != CUDA_SUCCESS ? -1 : (int)((CUresult (*)(CUmemoryPool))f)(pool);
}
static int r_pool_create(void *f)
{
    CUmemPoolProps pp = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                         .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool pool;
    return (int)((CUresult (*)(CUmemoryPool *, const CUmemPoolProps *))f)(&pool, &pp);
}
static int r_free_async(void *f) { return ((CUresult (*)(CUdeviceptr, CUstream))f)(lean_alloc(), NULL); }
static int r_create(void *f)
{
    CUmemGenericAllocationHandle h;
    return ((CUresult (*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                          unsigned long long))f)(&h, 2u << 20, &lean_prop, 0);
}
static int r_release(void *f) { return ((CUresult (*)(CUmemGenericAllocationHandle))f)(1); }
static int r_retain(void *f)
{
    CUmemGenericAllocationHandle h;
    return ((CUresult (*)(CUmemGenericAllocationHandle *, void *))f)(&h, (void *)(uintptr_t)lean_alloc());
}
static int r_import(void *f)
{
    CUmemGenericAllocationHandle h;
    return ((CUresult (*)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType))f)(
        &h, (void *)(intptr_t)0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}
static int r_map(void *f)
{
    return ((CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                          unsigned long long))f)(lean_alloc(), 2u << 20, 0, 1, 0);
}
static int r_unmap(void *f) { return ((CUresult (*)(CUdeviceptr, size_t))f)(lean_alloc(), 2u << 20); }
static int r_addr_free(void *f)
{
    return ((CUresult (*)(CUdeviceptr, size_t))f)(lean_alloc(), 2u << 20);
}
static int r_set_access(void *f)
{
    CUmemAccessDesc a = {.location = lean_prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    return ((CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))f)(lean_alloc(),
                                                                                   2u << 20, &a, 1);
}
static int r_cuda_malloc(void *f)
{
    void *p = NULL;
    int r = ((int (*)(void **, size_t))f)(&p, 4096);
    return r == 0 && !p ? -1 : r;
}
static int r_cuda_free(void *f)
{
    void *p = NULL;
    int r = cudaMalloc(&p, 4096);
    return r ? r : ((int (*)(void *))f)(p);
}
static int r_cuda_info(void *f)
{
    size_t fr, t;
    return ((int (*)(size_t *, size_t *))f)(&fr, &t);
}
static int r_dlsym(void *f)
{
    void *(*d)(void *, const char *) = (void *(*)(void *, const char *))f;
    return d(RTLD_DEFAULT, "cuMemAlloc_v2") && d(RTLD_DEFAULT, "cuInit") ? 0 : -1;
}

/* NVML on a machine whose NVML the shim cannot find (the lean tier loads none): any NVML answer,
 * never a crash. */
static int r_nvml_mem(void *f)
{
    nvmlMemory_t m;
    unsigned r = (unsigned)((nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t *))f)(NULL, &m);
    return r < 1000 ? 0 : (int)r;
}
static int r_nvml_mem2(void *f)
{
    nvmlMemory_v2_t m = {.version = nvmlMemory_v2};
    unsigned r = (unsigned)((nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t *))f)(NULL, &m);
    return r < 1000 ? 0 : (int)r;
}
static int r_nvml_procs(void *f)
{
    unsigned n = 0;
    unsigned r = (unsigned)((nvmlReturn_t (*)(nvmlDevice_t, unsigned *, void *))f)(NULL, &n, NULL);
    return r < 1000 ? 0 : (int)r;
}

/* A chunk freed first, so that the synchronisation has a pending free to return. */
static int r_sync(void *f)
{
    cuMemFree_v2(lean_alloc());
    return ((CUresult (*)(void))f)();
}
static int r_sync_v2(void *f)
{
    cuMemFree_v2(lean_alloc());
    return ((CUresult (*)(CUcontext))f)(NULL);
}

static int r_stream_sync(void *f)
{
    cuMemFree_v2(lean_alloc());
    return ((CUresult (*)(CUstream))f)(NULL);
}
static int r_event_sync(void *f)
{
    CUevent ev;
    if (cuEventCreate(&ev, 0) != CUDA_SUCCESS || cuEventRecord(ev, NULL) != CUDA_SUCCESS)
        return -1;
    int r = ((CUresult (*)(CUevent))f)(ev);
    cuEventDestroy(ev);
    return r;
}

/* Stream capture on a created stream, begun and ended (the other half by the driver's own call). */
static CUstream lean_capture_stream(void)
{
    CUstream s = NULL;
    return cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS ? s : NULL;
}
static int lean_capture_done(CUstream s, CUresult r)
{
    CUgraph g;
    if (r == CUDA_SUCCESS && cuStreamEndCapture(s, &g) != CUDA_SUCCESS)
        return -1;
    return (int)r;
}
static int r_capture_v1(void *f)
{
    CUstream s = lean_capture_stream();
    return lean_capture_done(s, ((CUresult (*)(CUstream))f)(s));
}
static int r_capture(void *f)
{
    CUstream s = lean_capture_stream();
    return lean_capture_done(s, ((CUresult (*)(CUstream, CUstreamCaptureMode))f)(
                                    s, CU_STREAM_CAPTURE_MODE_RELAXED));
}
static int r_capture_graph(void *f)
{
    CUstream s = lean_capture_stream();
    typedef CUresult (*fn_t)(CUstream, CUgraph, const CUgraphNode *, const CUgraphEdgeData *, size_t,
                             CUstreamCaptureMode);
    return lean_capture_done(s, ((fn_t)f)(s, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
}
static int r_capture_end(void *f)
{
    CUstream s = lean_capture_stream();
    CUgraph g;
    if (cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED) != CUDA_SUCCESS)
        return -1;
    return ((CUresult (*)(CUstream, CUgraph *))f)(s, &g);
}

/* Peer access to the device's other context: the lean tier has one device, so the driver's
 * answer is CUDA_ERROR_INVALID_DEVICE (two contexts of one device), which passes as its own. */
static int r_peer(void *f)
{
    CUcontext cur, other;
    if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cuCtxCreate_v2(&other, 0, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(cur) != CUDA_SUCCESS)
        return -1;
    CUresult r = ((CUresult (*)(CUcontext, unsigned))f)(other, 0);
    return r == CUDA_ERROR_INVALID_DEVICE ? 0 : (int)r;
}

static int r_unpeer(void *f) /* access never enabled: the driver's refusal, passed on */
{
    CUcontext cur, other;
    if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cuCtxCreate_v2(&other, 0, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(cur) != CUDA_SUCCESS)
        return -1;
    CUresult r = ((CUresult (*)(CUcontext))f)(other);
    return r == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED || r == CUDA_ERROR_INVALID_DEVICE ? 0 : (int)r;
}

static int r_pop(void *f) /* a created context pushed, then popped by the hook */
{
    CUcontext c, out = NULL;
    if (cuCtxCreate_v2(&c, 0, 0) != CUDA_SUCCESS)
        return -1;
    lean_alloc();
    return ((CUresult (*)(CUcontext *))f)(&out) == CUDA_SUCCESS && out == c ? 0 : -1;
}
static int r_set_current(void *f) /* none current, then the context again: it allocates */
{
    CUcontext c;
    if (cuCtxGetCurrent(&c) != CUDA_SUCCESS || ((CUresult (*)(CUcontext))f)(NULL) != CUDA_SUCCESS)
        return -1;
    CUresult r = ((CUresult (*)(CUcontext))f)(c);
    return r != CUDA_SUCCESS ? (int)r : lean_alloc() ? 0 : -1;
}

/* A created stream destroyed (a capture's end when one runs on it: capture.c). */
static int r_stream_destroy(void *f)
{
    CUstream s = lean_capture_stream();
    return s ? (int)((CUresult (*)(CUstream))f)(s) : -1;
}

static const struct lean_recipe {
    const char *name;
    lean_call_t call;
} lean_recipes[] = {
    {"cuInit", r_init},
    {"cuMemAlloc_v2", r_alloc},
    {"cuMemAllocPitch_v2", r_pitch},
    {"cuMemFree_v2", r_free},
    {"cuMemGetInfo_v2", r_info},
    {"cuMemGetAddressRange_v2", r_range},
    {"cuMemAlloc", r_alloc_v1},
    {"cuMemAllocPitch", r_pitch_v1},
    {"cuMemFree", r_free_v1},
    {"cuMemGetInfo", r_info_v1},
    {"cuMemGetAddressRange", r_range_v1},
    {"cuPointerGetAttribute", r_attr},
    {"cuPointerGetAttributes", r_attrs},
    {"cuCtxSynchronize", r_sync},
    {"cuCtxSynchronize_v2", r_sync_v2},
    {"cuStreamSynchronize", r_stream_sync},
    {"cuStreamSynchronize_ptsz", r_stream_sync},
    {"cuCtxEnablePeerAccess", r_peer},
    {"cuCtxDisablePeerAccess", r_unpeer},
    {"cuStreamBeginCapture", r_capture_v1},
    {"cuStreamBeginCapture_ptsz", r_capture_v1},
    {"cuStreamBeginCapture_v2", r_capture},
    {"cuStreamBeginCapture_v2_ptsz", r_capture},
    {"cuStreamBeginCaptureToGraph", r_capture_graph},
    {"cuStreamBeginCaptureToGraph_ptsz", r_capture_graph},
    {"cuStreamEndCapture", r_capture_end},
    {"cuStreamEndCapture_ptsz", r_capture_end},
    {"cuStreamDestroy", r_stream_destroy},
    {"cuStreamDestroy_v2", r_stream_destroy},
    {"cuEventSynchronize", r_event_sync},
    {"cuCtxDestroy_v2", r_ctx_destroy},
    {"cuCtxDestroy", r_ctx_destroy},
    {"cuCtxDetach", r_ctx_destroy},
    {"cuCtxAttach", r_attach},
    {"cuCtxCreate", r_ctx_create},
    {"cuCtxCreate_v2", r_ctx_create},
    {"cuCtxCreate_v3", r_ctx_create_v3},
    {"cuCtxCreate_v4", r_ctx_create_v4},
    {"cuCtxPushCurrent", r_push},
    {"cuCtxPushCurrent_v2", r_push},
    {"cuDevicePrimaryCtxReset_v2", r_primary},
    {"cuDevicePrimaryCtxRelease_v2", r_primary},
    {"cuDevicePrimaryCtxReset", r_primary},
    {"cuDevicePrimaryCtxRelease", r_primary},
    {"cuDevicePrimaryCtxRetain", r_primary_retain},
    {"cuCtxPopCurrent_v2", r_pop},
    {"cuCtxPopCurrent", r_pop},
    {"cuCtxSetCurrent", r_set_current},
    {"cuIpcGetMemHandle", r_ipc},
    {"cuGetProcAddress", r_getproc},
    {"cuGetProcAddress_v2", r_getproc_v2},
    {"cuMemAllocManaged", r_managed},
    {"cuMemAllocAsync", r_async},
    {"cuMemAllocAsync_ptsz", r_async},
    {"cuMemAllocFromPoolAsync", r_pool},
    {"cuMemAllocFromPoolAsync_ptsz", r_pool},
    {"cuMemPoolDestroy", r_pool_destroy},
    {"cuMemPoolCreate", r_pool_create},
    {"cuMemFreeAsync", r_free_async},
    {"cuMemFreeAsync_ptsz", r_free_async},
    {"cuMemCreate", r_create},
    {"cuMemRelease", r_release},
    {"cuMemRetainAllocationHandle", r_retain},
    {"cuMemImportFromShareableHandle", r_import},
    {"cuMemMap", r_map},
    {"cuMemUnmap", r_unmap},
    {"cuMemAddressFree", r_addr_free},
    {"cuMemSetAccess", r_set_access},
    {"cudaMalloc", r_cuda_malloc},
    {"cudaFree", r_cuda_free},
    {"cudaMemGetInfo", r_cuda_info},
    {"dlsym", r_dlsym},
    {"nvmlDeviceGetMemoryInfo", r_nvml_mem},
    {"nvmlDeviceGetMemoryInfo_v2", r_nvml_mem2},
    {"nvmlDeviceGetComputeRunningProcesses", r_nvml_procs},
    {"nvmlDeviceGetComputeRunningProcesses_v2", r_nvml_procs},
    {"nvmlDeviceGetComputeRunningProcesses_v3", r_nvml_procs},
};

static const char *const lean_missing[] = {
#define LEAN_NAME(name) #name,
    SIMCUDA_LEAN_OMITS(LEAN_NAME)
#undef LEAN_NAME
};

static int lean_is_missing(const char *name)
{
    for (size_t i = 0; i < sizeof lean_missing / sizeof lean_missing[0]; i++)
        if (strcmp(lean_missing[i], name) == 0)
            return 1;
    return 0;
}

static lean_call_t lean_recipe(const char *name)
{
    for (size_t i = 0; i < sizeof lean_recipes / sizeof lean_recipes[0]; i++)
        if (strcmp(lean_recipes[i].name, name) == 0)
            return lean_recipes[i].call;
    return NULL;
}

/* In a child: a live context, then the hook. Exit 0 when the answer is the expected one. */
static void lean_child(const char *name, lean_call_t call, int any_answer)
{
    CUcontext ctx;
    void *hook = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    if (!hook || !dladdr(hook, &info) || !strstr(info.dli_fname, "libgpuarena.so")) {
        fprintf(stderr, "t_lean: %s: dlsym(RTLD_DEFAULT) did not give the shim's hook\n", name);
        _exit(1);
    }
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "t_lean: %s: no live context on the lean driver\n", name);
        _exit(any_answer ? 0 : 1);
    }
    int r = call(hook);
    int missing = lean_is_missing(name);
    int ok = any_answer || (missing ? r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_NOT_SUPPORTED : r == 0);
    if (!ok)
        fprintf(stderr, "t_lean: %s answered %d; expected %s\n", name, r,
                missing ? "CUDA_ERROR_NOT_FOUND (500) or CUDA_ERROR_NOT_SUPPORTED (801): the lean driver "
                          "lacks it"
                        : "success");
    fflush(stderr);
    _exit(ok ? 0 : 1);
}

/* Runs every hook of PT_HOOKS in its own child under the given settings; fails naming each hook
 * that crashed, answered wrongly or has no recipe. any_answer: only crashes count. */
static void lean_every_hook(const char *mode, const char *preallocate, int any_answer)
{
    const char *path = getenv("PT_HOOKS");
    FILE *f = path ? fopen(path, "r") : NULL;
    ck_assert_msg(f != NULL, "PT_HOOKS should name the shim's hook list (%s)", path ? path : "unset");
    setenv("GPUARENA_MODE", mode, 1);
    setenv("GPUARENA_PREALLOCATE", preallocate, 1);
    char name[128], failed[4096] = "";
    int hooks = 0;
    while (fscanf(f, "%127s", name) == 1) {
        hooks++;
        lean_call_t call = lean_recipe(name);
        const char *why = call ? NULL : "no recipe in t_lean.c";
        if (call) {
            fflush(stderr);
            pid_t pid = fork();
            ck_assert_int_ge(pid, 0);
            if (pid == 0)
                lean_child(name, call, any_answer);
            int st = 0;
            waitpid(pid, &st, 0);
            why = WIFSIGNALED(st) ? "crashed" : WEXITSTATUS(st) ? "wrong answer (see the log)" : NULL;
        }
        if (why)
            snprintf(failed + strlen(failed), sizeof failed - strlen(failed), " %s (%s);", name, why);
    }
    fclose(f);
    ck_assert_int_gt(hooks, 10);
    ck_assert_msg(failed[0] == '\0', "GPUARENA_MODE=%s PREALLOCATE=%s on the lean driver:%s", mode,
                  preallocate, failed);
}

START_TEST(every_hook_arena) { lean_every_hook("arena", "true", 0); }
END_TEST

START_TEST(every_hook_grow) { lean_every_hook("arena", "false", 0); }
END_TEST

START_TEST(every_hook_platform) { lean_every_hook("platform", "true", 0); }
END_TEST

/* vmm mode needs the VMM calls the lean driver lacks: what it answers is the shim's choice, but no
 * hook may crash. */
START_TEST(no_crash_vmm) { lean_every_hook("vmm", "true", 1); }
END_TEST

/* A program that probes for an optional entry point through the shim sees what the driver has:
 * dlsym on the driver's handle gives NULL and cuGetProcAddress NOT_FOUND for each missing one. */
START_TEST(missing_stays_missing)
{
    CUcontext ctx;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull(drv);
    static const char *const bases[] = {"cuMemCreate", "cuMemRelease", "cuMemAllocManaged",
                                        "cuPointerGetAttribute", "cuPointerGetAttributes",
                                        "cuIpcGetMemHandle", "cuMemGetAddressRange", "cuMemAllocAsync",
                                        "cuMemFreeAsync", "cuMemAllocFromPoolAsync"};
    for (size_t i = 0; i < sizeof lean_missing / sizeof lean_missing[0]; i++)
        ck_assert_msg(dlsym(drv, lean_missing[i]) == NULL,
                      "dlsym(libcuda, %s) through the shim should be NULL: the driver lacks it",
                      lean_missing[i]);
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        void *fn = (void *)1;
        CUdriverProcAddressQueryResult st;
        ck_assert_msg(cuGetProcAddress_v2(bases[i], &fn, 13000, 0, &st) == CUDA_ERROR_NOT_FOUND && !fn,
                      "cuGetProcAddress_v2(%s) through the shim should be NOT_FOUND", bases[i]);
        ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    }
    void *fn = NULL;
    ck_assert_int_eq(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 0, NULL), CUDA_SUCCESS);
    ck_assert_ptr_eq(fn, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2")); /* the shim's hook */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lean");
    TCase *tc = tcase_create("lean");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_hook_arena);
    tcase_add_test(tc, every_hook_grow);
    tcase_add_test(tc, every_hook_platform);
    tcase_add_test(tc, no_crash_vmm);
    tcase_add_test(tc, missing_stays_missing);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
