/* A program whose host memory fails once inside gpuarena, for t_hardening.c's host-failure sweep.
 *   [HOSTFAIL_START=N] hostfail_prog N CAP_BYTES alloc|info|init|managed|create|orphan|free|pools
 * Run under the shim (LD_PRELOAD) on the simulated driver with GPUARENA_LIMIT=CAP_BYTES. It defines
 * malloc, calloc, realloc and strdup itself (linked with -rdynamic, so the executable's definitions come
 * first for every library, the shim and a sanitizer runtime included) and, while armed, fails the
 * N-th of those calls made from inside libgpuarena.so, once; every other call goes to the next
 * definition (the C library's, or the sanitizer's). Armed around its first CUDA call after start-up
 * (a cuMemAlloc of 200 MiB, or cuMemGetInfo; init: armed from the process's start by HOSTFAIL_START=N
 * to the end of that cuMemAlloc; managed, create: a pass-through cuMemAllocManaged or cuMemCreate of
 * 200 MiB, kept; alloc, info, managed and create armed from the cuCtxSetCurrent before, which makes
 * the context's state), then it allocates 16 MiB blocks until refused.
 * Exit 0: the driver's peak bytes stayed within the cap and cuMemGetInfo's total was the cap;
 * 10: the cap was exceeded; 11: cuMemGetInfo told the device's size; 2: set-up failed. It prints
 * whether the failure was injected ("injected 1"), which call it hit, and what it measured.
 * orphan: armed around a cuMemAllocAsync of 1 MiB in a created context A, which is then destroyed
 * with the block live (the driver keeps such memory, and so do vmm and platform modes); the
 * primary context allocates 1 MiB blocks: exit 12 if one of them is A's live block (handed out
 * twice), 13 if A's allocation failed with anything but CUDA_ERROR_OUT_OF_MEMORY. orphan-destroy:
 * the same, armed around A's cuCtxDestroy instead (the orphan pool's own host memory).
 * pools: eight memory pools made by the program (a release threshold at the maximum) each keep
 * 4 MiB, unarmed; armed around a cuMemAllocFromPoolAsync of 16 MiB from a ninth, whose listing
 * needs the device's pool list to grow; the block is freed. Exit 12 if it was refused and the
 * ninth pool keeps memory all the same (what it keeps would not be counted).
 * free: the 200 MiB are allocated unarmed, and the count is armed around their cuMemFree and a
 * cuCtxSynchronize (which gives the pool the freed chunk back: under GPUARENA_VMM_KEEP=0 its
 * granules go back to the driver, which a SIMCUDA_FAIL=cuMemUnmap may refuse); the blocks after
 * are 2 MiB, from a new context.
 *   hostfail_prog N fence|fence-peer   (fence_main: a free that cannot be remembered waits for its
 *   owner and the owner's peers) */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcuda.h"

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static _Atomic long armed;       /* calls from the shim left before the one that fails; 0: off */
static _Atomic int injected;
static _Atomic int started;      /* HOSTFAIL_START read */
static _Thread_local int inside; /* dladdr or dlsym below may allocate: no counting then */

/* dlsym may ask calloc for its error buffer before next_calloc is known: a few zeroed bytes from
 * here, never freed (free of them is never asked: dlsym's buffer lives for the thread). */
static unsigned char boot[4096];
static size_t boot_used;

static void resolve(void)
{
    inside = 1;
    next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    inside = 0;
}

/* Whether this call, made from `caller`, is the one to fail. HOSTFAIL_START=N arms the count from
 * the process's start (the shim reads its settings as it is loaded, before main). */
static int fail_now(void *caller)
{
    if (!atomic_exchange(&started, 1)) {
        const char *at = getenv("HOSTFAIL_START");
        long v = 0; /* by hand: a sanitizer's strtol refuses to run during its own start */
        for (; at && *at >= '0' && *at <= '9'; at++)
            v = v * 10 + (*at - '0');
        atomic_store(&armed, v);
    }
    if (!atomic_load(&armed) || inside)
        return 0;
    inside = 1;
    Dl_info di;
    size_t len;
    int from_shim = dladdr(caller, &di) && di.dli_fname && (len = strlen(di.dli_fname)) >= 14 &&
                    !strcmp(di.dli_fname + len - 14, "libgpuarena.so");
    inside = 0;
    if (!from_shim || atomic_fetch_sub(&armed, 1) != 1)
        return 0;
    atomic_store(&injected, 1);
    return 1;
}

void *malloc(size_t n)
{
    if (!next_malloc)
        resolve();
    if (fail_now(__builtin_return_address(0)))
        return NULL;
    return next_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    if (!next_calloc) {
        if (inside) { /* dlsym's own buffer, while it resolves */
            size_t want = (n * m + 15) & ~(size_t)15;
            if (boot_used + want > sizeof boot)
                return NULL;
            void *p = boot + boot_used;
            boot_used += want;
            return p;
        }
        resolve();
    }
    if (fail_now(__builtin_return_address(0)))
        return NULL;
    return next_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    if (!next_realloc)
        resolve();
    if (fail_now(__builtin_return_address(0)))
        return NULL;
    return next_realloc(p, n);
}

char *strdup(const char *str)
{
    if (!next_malloc)
        resolve();
    if (fail_now(__builtin_return_address(0)))
        return NULL;
    size_t n = strlen(str) + 1;
    char *p = next_malloc(n);
    return p ? memcpy(p, str, n) : NULL;
}

/* The orphan case (above), with ctx the primary context, current. */
static int orphan_case(long n, CUcontext ctx, int at_destroy)
{
    CUdevice dev;
    CUcontext a;
    CUstream sa;
    CUdeviceptr p = 0, q;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate(&a, NULL, 0, dev) ||
        cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING))
        return 2;
    atomic_store(&armed, at_destroy ? 0 : n);
    CUresult first = cuMemAllocAsync(&p, 1u << 20, sa);
    atomic_store(&armed, 0);
    if (first != CUDA_SUCCESS) {
        printf("injected %d first %d\n", atomic_load(&injected), (int)first);
        return first == CUDA_ERROR_OUT_OF_MEMORY && !at_destroy ? 0 : 13;
    }
    if (cuMemsetD8Async(p, 0xAA, 1u << 20, sa) || cuStreamSynchronize(sa))
        return 2;
    atomic_store(&armed, at_destroy ? n : 0);
    CUresult gone = cuCtxDestroy(a);
    atomic_store(&armed, 0);
    printf("injected %d first %d\n", atomic_load(&injected), (int)first);
    if (gone || cuCtxSetCurrent(ctx))
        return 2;
    for (int i = 0; i < 64 && cuMemAlloc(&q, 1u << 20) == CUDA_SUCCESS; i++)
        if (q <= p && p < q + (1u << 20)) {
            printf("A's live block %#llx handed out again\n", (unsigned long long)p);
            return 12;
        }
    return 0;
}

/* A pool of device 0 that keeps what is freed; NULL if it cannot be made. */
static CUmemoryPool keeping_pool(void)
{
    CUmemPoolProps pp = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                         .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool pool;
    cuuint64_t max = ~0ull;
    return cuMemPoolCreate(&pool, &pp) ||
                   cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max)
               ? NULL
               : pool;
}

/* The pools case (above); returns what the ninth pool's allocation answered, or -1 when the
 * set-up failed. *kept9: what the ninth pool keeps after it. */
static int pools_case(long n, unsigned long long *kept9)
{
    CUstream s;
    CUmemoryPool pools[9];
    CUdeviceptr p;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))
        return -1;
    for (int i = 0; i < 9; i++)
        if (!(pools[i] = keeping_pool()) ||
            (i < 8 && (cuMemAllocFromPoolAsync(&p, 4u << 20, pools[i], s) || cuMemFreeAsync(p, s) ||
                       cuStreamSynchronize(s))))
            return -1;
    atomic_store(&armed, n);
    CUresult first = cuMemAllocFromPoolAsync(&p, 16u << 20, pools[8], s);
    atomic_store(&armed, 0);
    if (first == CUDA_SUCCESS && (cuMemFreeAsync(p, s) || cuStreamSynchronize(s)))
        return -1;
    cuuint64_t v = 0;
    if (cuMemPoolGetAttribute(pools[8], CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v))
        return -1;
    *kept9 = v;
    return (int)first;
}

/* fence mode: the shim's N-th host call inside a cuMemFree fails (the pending list's growth), so
 * the free waits for the device itself and gives the chunk back at once. The block is context A's,
 * held by work queued on A (fence-peer: on C, another context of the device) behind a gate; the
 * free is made with context B current. A helper opens the gate once A (and then C) is pushed for
 * the wait (the driver's cuCtxPushCurrent_v2 count rises): only a wait for A (and its peers) does
 * that. Exit 12: the free returned before that work ran (it waited for B alone). */
static _Atomic int fence_done;
static unsigned fence_gate;

static void *fence_opener(void *arg)
{
    unsigned long long pushes = *(unsigned long long *)arg;
    while (!atomic_load(&fence_done) && simcuda_entry_calls("cuCtxPushCurrent_v2") < pushes)
        sched_yield();
    simcuda_gate_open(fence_gate);
    return NULL;
}

static int fence_main(long n, int peer)
{
    CUdevice dev;
    CUcontext a, b, c, cur;
    CUdeviceptr p, q;
    size_t fr, tot;
    unsigned char byte = 0;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&b, NULL, 0, dev) || cuMemGetInfo(&fr, &tot) ||
        cuCtxCreate(&c, NULL, 0, dev) || cuMemGetInfo(&fr, &tot) ||
        cuCtxCreate(&a, NULL, 0, dev) || cuMemAlloc(&p, 1u << 20))
        return 2;
    /* peer: the work is context C's (on A's block); the wait pushes A, then C */
    if ((peer && cuCtxPushCurrent(c)) || simcuda_gate(NULL, &fence_gate) ||
        simcuda_launch(NULL, p, 0xaa, 1u << 20, 0) || (peer && cuCtxPopCurrent(&cur)) ||
        cuCtxPushCurrent(b))
        return 2;
    simcuda_counters_t k0, k1;
    simcuda_get_counters(&k0);
    unsigned long long pushes = simcuda_entry_calls("cuCtxPushCurrent_v2") + (peer ? 2 : 1);
    pthread_t t;
    if (pthread_create(&t, NULL, fence_opener, &pushes))
        return 2;
    atomic_store(&armed, n);
    CUresult r = cuMemFree(p);
    atomic_store(&armed, 0);
    simcuda_get_counters(&k1);
    int ran = k1.stream_ops_done > k0.stream_ops_done;
    atomic_store(&fence_done, 1);
    pthread_join(t, NULL);
    if (cuCtxPopCurrent(&cur) || cuMemAlloc(&q, 1u << 20) || cuMemsetD8(q, 0x55, 1u << 20) ||
        cuCtxSynchronize() || cuMemcpyDtoH(&byte, q, 1))
        return 2;
    printf("injected %d free %d owner's work done first %d same %d byte %#x\n",
           atomic_load(&injected), (int)r, ran, q == p, byte);
    return r != CUDA_SUCCESS ? 2 : ran ? 0 : 12;
}

int main(int argc, char **argv)
{
    if (argc == 3 && (!strcmp(argv[2], "fence") || !strcmp(argv[2], "fence-peer")))
        return fence_main(atol(argv[1]), argv[2][5] == '-');
    if (argc != 4)
        return 2;
    long n = atol(argv[1]);
    unsigned long long cap = strtoull(argv[2], NULL, 10);
    int info_first = !strcmp(argv[3], "info"), at_init = !strcmp(argv[3], "init");
    int managed = !strcmp(argv[3], "managed"), create = !strcmp(argv[3], "create");
    int free_first = !strcmp(argv[3], "free");
    int orphan = !strcmp(argv[3], "orphan") || !strcmp(argv[3], "orphan-destroy");
    int pools = !strcmp(argv[3], "pools");
    /* Armed from the context made current: gpuarena makes the context's state there (shim/meet.c,
     * ctx.c), no longer at the first call, whose host calls were the ones to fail. */
    int arm_early = !at_init && !pools && !free_first && !orphan;
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev))
        return 2;
    if (arm_early)
        atomic_store(&armed, n);
    if (cuCtxSetCurrent(ctx))
        return 2;
    if (orphan)
        return orphan_case(n, ctx, !strcmp(argv[3], "orphan-destroy"));
    CUdeviceptr p = 0, q;
    size_t fr = 0, tot = 0;
    unsigned long long kept9 = 0;
    int pooled = pools ? pools_case(n, &kept9) : 0;
    if ((free_first && cuMemAlloc(&p, 200u << 20)) || pooled < 0)
        return 2;
    if (!at_init && !pools && !arm_early)
        atomic_store(&armed, n);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h = 0;
    CUresult first = pools      ? (CUresult)pooled
                     : info_first ? cuMemGetInfo(&fr, &tot)
                     : free_first ? (cuMemFree(p) ? CUDA_ERROR_UNKNOWN : cuCtxSynchronize())
                     : managed  ? cuMemAllocManaged(&p, 200u << 20, CU_MEM_ATTACH_GLOBAL)
                     : create   ? cuMemCreate(&h, 200u << 20, &prop, 0)
                                : cuMemAlloc(&p, 200u << 20);
    atomic_store(&armed, 0);
    /* free: the rest of the cap filled to the granule from a new context (a fresh pool, so no
     * placement is steered by the granules the driver kept), where one given up shows */
    CUcontext b;
    if (free_first && (cuCtxCreate(&b, NULL, 0, dev) || cuCtxSetCurrent(b)))
        return 2;
    size_t bs = free_first ? 2u << 20 : 16u << 20;
    int blocks = 0, most = free_first ? 256 : 64;
    while (blocks < most && cuMemAlloc(&q, bs) == CUDA_SUCCESS)
        blocks++;
    if (!info_first && cuMemGetInfo(&fr, &tot))
        return 2;
    unsigned long long peak = simcuda_device_peak_all(0);
    printf("injected %d first %d blocks %d peak %llu cap %llu total %zu kept9 %llu\n",
           atomic_load(&injected), (int)first, blocks, peak, cap, tot, kept9);
    if (peak > cap)
        return 10;
    if (pools && first != CUDA_SUCCESS && kept9)
        return 12;
    return tot != cap && (first == CUDA_SUCCESS || !info_first) ? 11 : 0;
}
