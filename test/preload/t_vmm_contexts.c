/* Preload tests: GPUARENA_MODE=vmm beyond one context's allocations (split from t_vmm.c): a
 * context destroyed or a primary context reset with blocks live, threads, fork, peer access to the
 * granules, the attributes a block answers with (RDMA, memory pool), and the free memory reported
 * being mappable. Added to the "vmm" case by pt_vmm_contexts_add().
 */
#include "preload_test.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define GRAN (2 * MiB) /* the simulated driver's recommended granularity */

/* Nothing of vmm's is left with the driver: no physical memory, no mapping, no address range. */
static void vmm_all_given_back(void)
{
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_uint_eq(c.vmm_mappings, 0);
    ck_assert_uint_eq(c.vmm_reserved_bytes, 0);
}

START_TEST(vmm_ctx_destroy_takes_range)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUdevice dev;
    CUcontext ctx;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&ctx, NULL, 0, dev), CUDA_SUCCESS);
    CUdeviceptr p[8];
    for (int i = 0; i < 8; i++) /* left live on purpose */
        ck_assert_int_eq(cuMemAlloc(&p[i], 3 * MiB), CUDA_SUCCESS);
    ck_assert_uint_gt(pt_counters().vmm_reserved_bytes, 0);
    ck_assert_int_eq(cuCtxDestroy(ctx), CUDA_SUCCESS);
    vmm_all_given_back();
    ck_assert_uint_eq(pt_counters().bytes_in_use, 0);
}
END_TEST

/* Stream-ordered memory outlives its context under the driver ("cuCtxDestroy() will not destroy
 * memory allocations by ... cuMemAllocAsync()"), and in vmm mode it does when the pool served it:
 * the destroyed context's pool keeps those blocks alone (the plain block's granules go back at the
 * destroy), a new context never gets their addresses, their data and queries stay, and the pool's
 * range goes with the last of them. Before, the new context's first block was the old pointer:
 * the program's write through the old pointer landed in it, and its free freed it. */
START_TEST(vmm_ctx_destroy_keeps_async_blocks)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUdevice dev;
    CUcontext c1, c2;
    CUdeviceptr a, a2, plain, b, base = 0;
    size_t size = 0;
    unsigned char back[4096];
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&c1, NULL, 0, dev), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocAsync(&a, 4096, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocAsync(&a2, 3 * MiB, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&plain, 16 * MiB), CUDA_SUCCESS); /* left live: it goes */
    ck_assert_int_eq(cuMemsetD8(a, 0x11, 4096), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    uint64_t before = pt_counters().vmm_bytes_in_use;
    ck_assert_int_eq(cuCtxDestroy(c1), CUDA_SUCCESS);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_le(c.vmm_bytes_in_use, before - 16 * MiB); /* the plain block's granules */
    ck_assert_uint_ge(c.vmm_bytes_in_use, 4 * MiB);           /* a's and a2's stay mapped */
    ck_assert_uint_gt(c.vmm_reserved_bytes, 0);

    ck_assert_int_eq(cuCtxCreate(&c2, NULL, 0, dev), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&b, 4096), CUDA_SUCCESS);
    ck_assert(b != a && (b + 4096 <= a2 || b >= a2 + 3 * MiB));
    ck_assert_int_eq(cuMemsetD8(b, 0x22, 4096), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemcpyDtoH(back, a, sizeof back), CUDA_SUCCESS);
    for (size_t i = 0; i < sizeof back; i++)
        ck_assert_uint_eq(back[i], 0x11);
    ck_assert_int_eq(cuMemGetAddressRange(&base, &size, a + 100), CUDA_SUCCESS);
    ck_assert(base == a && size == 4096);
    ck_assert_int_eq(cuMemFree(plain), CUDA_ERROR_INVALID_VALUE); /* went with its context */
    ck_assert_int_eq(cuMemFreeAsync(a + 100, NULL), CUDA_ERROR_INVALID_VALUE); /* interior */
    ck_assert_int_eq(cuMemFreeAsync(a, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFreeAsync(a, NULL), CUDA_ERROR_INVALID_VALUE); /* freed twice */
    ck_assert_int_eq(cuMemcpyDtoH(back, b, sizeof back), CUDA_SUCCESS);
    ck_assert_uint_eq(back[0], 0x22);
    uint64_t reserved = pt_counters().vmm_reserved_bytes;
    ck_assert_int_eq(cuMemFree(a2), CUDA_SUCCESS); /* the last: the old range goes */
    c = pt_counters();
    ck_assert_uint_lt(c.vmm_reserved_bytes, reserved);
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(c2), CUDA_SUCCESS);
    vmm_all_given_back();
}
END_TEST

/* A block of context c1 freed with cuMemFreeAsync on a stream of context cB while work queued
 * there still writes it, then c1 destroyed: the destroy waited for c1 alone and gave the chunk
 * back, the pool's range went, and a later context's block at the same address was overwritten
 * by cB's work (found by an outside test on 2026-12-05). The free's event is waited for now;
 * with another stream-ordered block live (keep), the orphan pool must not unmap it under the
 * work either (the simulated driver counts such work as a stream fault). */
START_TEST(vmm_destroy_waits_for_frees_on_other_contexts)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    for (int keep_one = 0; keep_one < 2; keep_one++) {
        CUdevice dev;
        CUcontext c1, cB, c3;
        CUstream sB;
        CUdeviceptr a, keep, n;
        unsigned char back[16];
        ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
        ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxCreate(&cB, NULL, 0, dev), CUDA_SUCCESS);
        ck_assert_int_eq(cuStreamCreate(&sB, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxCreate(&c1, NULL, 0, dev), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemAllocAsync(&a, 4 * MiB, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemAllocAsync(&keep, 4 * MiB, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
        if (!keep_one)
            ck_assert_int_eq(cuMemFreeAsync(keep, NULL), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxSetCurrent(cB), CUDA_SUCCESS);
        ck_assert_int_eq(simcuda_launch(sB, a, 0x5A, 4 * MiB, 100000), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemFreeAsync(a, sB), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxDestroy(c1), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxCreate(&c3, NULL, 0, dev), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemAlloc(&n, 8 * MiB), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemsetD8(n, 0x11, 8 * MiB), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxSetCurrent(cB), CUDA_SUCCESS);
        ck_assert_int_eq(cuStreamSynchronize(sB), CUDA_SUCCESS);
        ck_assert_uint_eq(pt_counters().stream_faults, 0);
        ck_assert_int_eq(cuCtxSetCurrent(c3), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemcpyDtoH(back, n, sizeof back), CUDA_SUCCESS);
        ck_assert_uint_eq(back[0], 0x11);
        if (keep_one)
            ck_assert_int_eq(cuMemFree(keep), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemFree(n), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxDestroy(c3), CUDA_SUCCESS);
        ck_assert_int_eq(cuStreamDestroy(sB), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxDestroy(cB), CUDA_SUCCESS);
    }
}
END_TEST

/* The same through a primary context's reset. */
START_TEST(vmm_primary_reset_keeps_async_blocks)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr a, b;
    unsigned char back[64];
    ck_assert_int_eq(cuMemAllocAsync(&a, 1 * MiB, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(a, 0x33, 1 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
    ck_assert_uint_gt(pt_counters().vmm_bytes_in_use, 0);
    pt_start();
    ck_assert_int_eq(cuMemAlloc(&b, 1 * MiB), CUDA_SUCCESS);
    ck_assert(b != a);
    ck_assert_int_eq(cuMemsetD8(b, 0x44, 1 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemcpyDtoH(back, a, sizeof back), CUDA_SUCCESS);
    ck_assert_uint_eq(back[63], 0x33);
    ck_assert_int_eq(cuMemFreeAsync(a, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
    ck_assert_int_eq(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
    vmm_all_given_back();
}
END_TEST

START_TEST(vmm_primary_reset_takes_range)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 5 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_uint_eq(c.vmm_reserved_bytes, 0);
    pt_start();
    ck_assert_int_eq(cuMemAlloc(&p, 5 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(p, 1, 5 * MiB), CUDA_SUCCESS);
}
END_TEST

static void *vmm_worker(void *arg)
{
    CUcontext ctx = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    unsigned char buf[4096], back[4096];
    cuCtxSetCurrent(ctx);
    for (int i = 0; i < 300; i++) {
        CUdeviceptr p;
        size_t n = 512 + (size_t)(rand_r(&seed) % (3 * MiB));
        if (cuMemAlloc(&p, n) != CUDA_SUCCESS)
            return (void *)1;
        memset(buf, i & 0xff, sizeof buf);
        size_t m = n < sizeof buf ? n : sizeof buf;
        if (cuMemcpyHtoD(p + n - m, buf, m) != CUDA_SUCCESS ||
            cuMemcpyDtoH(back, p + n - m, m) != CUDA_SUCCESS || memcmp(buf, back, m) != 0)
            return (void *)2;
        if (cuMemFree(p) != CUDA_SUCCESS)
            return (void *)3;
    }
    return NULL;
}

START_TEST(vmm_threads)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=4MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUcontext ctx = pt_start();
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, vmm_worker, ctx), 0);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_msg(r == NULL, "thread %d failed at step %ld", i, (long)(intptr_t)r);
    }
    /* The threads' last frees may still be pending (GPUARENA_FREE_SYNC=deferred: their granules
     * stay mapped until the next allocation synchronises). One more allocation returns them all,
     * and what stays mapped is then bounded by the keep; the small block lands on a kept granule. */
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 512), CUDA_SUCCESS);
    ck_assert_uint_le(pt_counters().vmm_bytes_in_use, 4 * MiB);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
}
END_TEST

START_TEST(vmm_fork)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 3 * MiB), CUDA_SUCCESS);
    pid_t pid = fork();
    if (pid == 0) {
        CUcontext c;
        CUdeviceptr q;
        int ok = cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS &&
                 cuCtxSetCurrent(c) == CUDA_SUCCESS && cuMemAlloc(&q, 3 * MiB) == CUDA_SUCCESS &&
                 cuMemsetD8(q, 3, 3 * MiB) == CUDA_SUCCESS && cuMemFree(q) == CUDA_SUCCESS;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child allocates in vmm mode");
    ck_assert_int_eq(cuMemsetD8(p, 1, 3 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
}
END_TEST

/* Peer access reaches vmm memory as it reaches cuMemAlloc memory (helper-48 F7, helper-50 F2): a
 * kernel of device 1, after cuCtxEnablePeerAccess to device 0's context, writes a block mapped
 * before the call and one mapped after it, and device 1's context copies them and sets one. The
 * simulated driver refuses a device the granule was not opened to (CUDA_ERROR_INVALID_VALUE). */
START_TEST(vmm_peer_access_reaches_granules)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_DEVICES=2", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUcontext a = pt_start(), b;
    CUdeviceptr before, after;
    static unsigned char h[8 * MiB];
    ck_assert_int_eq(cuMemAlloc(&before, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&b, NULL, 0, 1), CUDA_SUCCESS); /* device 1 current */
    ck_assert_int_eq(cuCtxEnablePeerAccess(a, 0), CUDA_SUCCESS);
    ck_assert_int_eq(simcuda_launch(NULL, before, 0x5A, MiB, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxPushCurrent(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&after, 8 * MiB), CUDA_SUCCESS); /* new granules */
    ck_assert_int_eq(cuCtxPopCurrent(&a), CUDA_SUCCESS);
    ck_assert_int_eq(simcuda_launch(NULL, after, 0xA5, 8 * MiB, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemcpyDtoH(h, before, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(h[0], 0x5A);
    ck_assert_int_eq(h[MiB - 1], 0x5A);
    ck_assert_int_eq(cuMemcpyDtoH(h, after, 8 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(h[8 * MiB - 1], 0xA5);
    ck_assert_int_eq(cuMemsetD8(after, 1, 8 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxEnablePeerAccess(a, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
}
END_TEST

/* The access device d has to the granule of p: the driver's own answer (cuMemGetAccess). */
static unsigned long long vmm_access_of(CUdeviceptr p, int d)
{
    unsigned long long flags = 99;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d};
    ck_assert_int_eq(cuMemGetAccess(&flags, &loc, p), CUDA_SUCCESS);
    return flags;
}

/* cuCtxDisablePeerAccess takes back what the enable opened, as the driver takes it back from
 * cuMemAlloc memory: device 1's access to device 0's granules mapped before (its kernel is then
 * refused there) and none to granules mapped after; device 0's own stays. A second enable opens
 * them again, a disable of what is not enabled is the driver's answer and changes nothing, and
 * of two contexts on device 1 that enabled it, the granules stay open until both have disabled.
 * The hook was missing: the granules stayed open to device 1 for good. */
START_TEST(vmm_peer_access_disabled)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_DEVICES=2", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUcontext a = pt_start(), b, b2;
    CUdeviceptr before, after, again;
    const unsigned long long rw = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ck_assert_int_eq(cuMemAlloc(&before, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&b, NULL, 0, 1), CUDA_SUCCESS); /* device 1 current */
    ck_assert_int_eq(cuCtxEnablePeerAccess(a, 0), CUDA_SUCCESS);
    ck_assert_uint_eq(vmm_access_of(before, 1), rw);
    ck_assert_int_eq(cuCtxDisablePeerAccess(a), CUDA_SUCCESS);
    ck_assert_uint_eq(vmm_access_of(before, 1), CU_MEM_ACCESS_FLAGS_PROT_NONE);
    ck_assert_uint_eq(vmm_access_of(before, 0), rw);
    ck_assert_int_ne(simcuda_launch(NULL, before, 0x5A, MiB, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxPushCurrent(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&after, 8 * MiB), CUDA_SUCCESS); /* new granules */
    ck_assert_int_eq(cuCtxPopCurrent(&a), CUDA_SUCCESS);
    ck_assert_uint_eq(vmm_access_of(after, 1), CU_MEM_ACCESS_FLAGS_PROT_NONE);
    ck_assert_uint_eq(vmm_access_of(after, 0), rw);
    ck_assert_int_eq(cuCtxDisablePeerAccess(a), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    /* enabled again, by b and by a second context on device 1: open until both disable */
    ck_assert_int_eq(cuCtxEnablePeerAccess(a, 0), CUDA_SUCCESS);
    ck_assert_uint_eq(vmm_access_of(before, 1), rw);
    ck_assert_uint_eq(vmm_access_of(after, 1), rw);
    ck_assert_int_eq(cuCtxCreate(&b2, NULL, 0, 1), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxEnablePeerAccess(a, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDisablePeerAccess(a), CUDA_SUCCESS);
    ck_assert_uint_eq(vmm_access_of(after, 1), rw); /* b still has it */
    ck_assert_int_eq(cuCtxPushCurrent(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&again, 8 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxPopCurrent(&a), CUDA_SUCCESS);
    ck_assert_uint_eq(vmm_access_of(again, 1), rw);
    ck_assert_int_eq(cuCtxSetCurrent(b), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDisablePeerAccess(a), CUDA_SUCCESS);
    ck_assert_uint_eq(vmm_access_of(before, 1), CU_MEM_ACCESS_FLAGS_PROT_NONE);
    ck_assert_uint_eq(vmm_access_of(again, 1), CU_MEM_ACCESS_FLAGS_PROT_NONE);
    ck_assert_uint_eq(vmm_access_of(again, 0), rw);
}
END_TEST

static void rdma_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p, q;
    unsigned a = 9, b = 9;
    if (cuMemAlloc(&p, MiB) || cuMemAlloc(&q, 5 * MiB))
        exit(1);
    if (cuPointerGetAttribute(&a, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, p) ||
        cuPointerGetAttribute(&b, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, q + MiB) ||
        a != 1 || b != 1)
        exit(2);
    exit(0);
}

/* vmm granules are made GPUDirect RDMA capable where the device supports it, as cuMemAlloc memory
 * is (helper-48 F9): the driver's answer for a block of every mode is 1. */
START_TEST(vmm_blocks_rdma_capable)
{
    static const char *const modes[] = {"GPUARENA_MODE=vmm", "GPUARENA_MODE=arena",
                                        "GPUARENA_MODE=platform"};
    for (int m = 0; m < 3; m++) {
        char err[4096];
        pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(rdma_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (2: a block not RDMA capable); %s", modes[m], rc, err);
    }
}
END_TEST

/* A pool block answers CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE as a cuMemAlloc block does, NULL with
 * success, through both entry points, a pool-served cuMemAllocAsync block too, in every pool mode;
 * in vmm mode the driver was asked about the granule's mapping, which refuses it, and the plural
 * call failed whole (helper-68 F8). The program's own cuMemCreate mapping and a
 * cuMemAllocFromPoolAsync block keep the driver's answers. */
static void mempool_attr_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p, q, x, va;
    CUstream s;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&p, MiB) ||
        cuMemAllocAsync(&q, 3 * MiB, s) || cuStreamSynchronize(s))
        exit(1);
    CUdeviceptr blocks[2] = {p, q + MiB};
    for (int i = 0; i < 2; i++) {
        CUmemoryPool pool = (CUmemoryPool)(uintptr_t)1;
        if (cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, blocks[i]) || pool)
            exit(2);
        CUpointer_attribute at[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                     CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                     CU_POINTER_ATTRIBUTE_RANGE_SIZE};
        unsigned type = 0;
        int ord = -1;
        size_t size = 0;
        pool = (CUmemoryPool)(uintptr_t)1;
        void *out[4] = {&type, &ord, &pool, &size};
        if (cuPointerGetAttributes(4, at, out, blocks[i]))
            exit(3);
        if (type != CU_MEMORYTYPE_DEVICE || ord != 0 || pool || size != (i ? 3 * MiB : MiB))
            exit(4);
    }
    /* the driver's own: a pool allocation names its pool, a cuMemCreate mapping refuses */
    CUmemoryPool pool = NULL;
    if (cuMemAllocFromPoolAsync(&x, MiB, NULL, s) || cuStreamSynchronize(s) ||
        cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, x) || !pool)
        exit(5);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h;
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (cuMemAddressReserve(&va, GRAN, 0, 0, 0) || cuMemCreate(&h, GRAN, &prop, 0) ||
        cuMemMap(va, GRAN, 0, h, 0) || cuMemSetAccess(va, GRAN, &acc, 1))
        exit(1);
    if (cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, va) !=
        CUDA_ERROR_INVALID_VALUE)
        exit(6);
    exit(0);
}

START_TEST(vmm_block_mempool_attr_as_cumemalloc)
{
    static const char *const modes[] = {"GPUARENA_MODE=vmm", "GPUARENA_MODE=arena",
                                        "GPUARENA_MODE=grow"};
    for (int m = 0; m < 3; m++) {
        char err[4096];
        pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(mempool_attr_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (2: MEMPOOL_HANDLE not NULL and success, 3: the plural "
                      "call refused, 4: its answers wrong, 5: a driver pool's block not named, 6: "
                      "the program's own mapping not the driver's answer); %s", modes[m], rc, err);
    }
}
END_TEST

/* cuMemGetInfo reports what vmm can map: a cap that is no multiple of the granule (101 MiB; 50% of
 * 203 MiB) leaves a part no granule can use, which was reported free, and an allocation of the
 * free figure was refused in a fresh process and after a 1 MiB block (h34 F5). Both figures are
 * whole granules now, and the free one can be allocated. */
START_TEST(vmm_info_free_can_be_mapped)
{
    static const char *const caps[] = {"GPUARENA_LIMIT=101MiB", "GPUARENA_LIMIT=50%"};
    pt_env("GPUARENA_MODE=vmm", caps[_i], "SIMCUDA_TOTAL_MEM=203MiB", NULL);
    pt_start();
    size_t f, t;
    CUdeviceptr p, q;
    ck_assert_int_eq(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    ck_assert_msg(t % GRAN == 0 && f % GRAN == 0 && f == t, "%s: free %zu total %zu", caps[_i], f, t);
    CUresult r = cuMemAlloc(&p, f);
    ck_assert_msg(r == CUDA_SUCCESS, "%s: cuMemAlloc(free = %zu) answered %d", caps[_i], f, (int)r);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&q, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    r = cuMemAlloc(&p, f);
    ck_assert_msg(r == CUDA_SUCCESS, "%s: after 1 MiB, cuMemAlloc(free = %zu) answered %d", caps[_i],
                  f, (int)r);
}
END_TEST

/* A 1 MiB block first, under a 1 GiB cap: the free part of its granule was counted free (1023
 * MiB), and a block of that size needed 512 granules besides it: refused (helper-67 F12). Only
 * whole granules kept mapped count now, as the driver leaves out the rest of a page a small
 * allocation took; the free figure can be allocated, and the driver's live bytes stay within
 * the cap. */
START_TEST(vmm_info_free_after_a_small_block)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=1GiB", NULL);
    pt_start();
    size_t f, t;
    CUdeviceptr p, q;
    ck_assert_int_eq(cuMemAlloc(&q, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(f, t - GRAN);
    CUresult r = cuMemAlloc(&p, f);
    ck_assert_msg(r == CUDA_SUCCESS, "after 1 MiB, cuMemAlloc(free = %zu) answered %d", f, (int)r);
    ck_assert_uint_le(pt_counters().peak_vmm_bytes_in_use, t);
}
END_TEST

void pt_vmm_contexts_add(TCase *tc)
{
    tcase_add_loop_test(tc, vmm_info_free_can_be_mapped, 0, 2);
    tcase_add_test(tc, vmm_info_free_after_a_small_block);
    tcase_add_test(tc, vmm_ctx_destroy_takes_range);
    tcase_add_test(tc, vmm_primary_reset_takes_range);
    tcase_add_test(tc, vmm_threads);
    tcase_add_test(tc, vmm_fork);
    tcase_add_test(tc, vmm_ctx_destroy_keeps_async_blocks);
    tcase_add_test(tc, vmm_primary_reset_keeps_async_blocks);
    tcase_add_test(tc, vmm_destroy_waits_for_frees_on_other_contexts);
    tcase_add_test(tc, vmm_peer_access_reaches_granules);
    tcase_add_test(tc, vmm_peer_access_disabled);
    tcase_add_test(tc, vmm_blocks_rdma_capable);
    tcase_add_test(tc, vmm_block_mempool_attr_as_cumemalloc);
}
