/* Preload tests: hostile use of GPUARENA_MODE=vmm. Each case is a program misusing or stressing
 * vmm mode; what it checks is what the simulated driver saw (its counters) and what the real driver
 * would answer. */
#include "preload_test.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define GRAN (2 * MiB)

/* A hooked entry point as a program reaches it by dlsym on libcuda and by cuGetProcAddress_v2:
 * both must be the shim's hook of that name. Returns the dlopen handle (the caller closes it). */
static void *hook_by_paths(const char *fn, void **by_dlsym, void **by_proc)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    const char *name = NULL;
    *by_dlsym = dlsym(h, fn);
    ck_assert_msg(pt_in_shim(*by_dlsym, &name), "dlsym(libcuda, %s)", fn);
    ck_assert_str_eq(name, fn);
    CUresult (*gp)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        (CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))
            dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    ck_assert_ptr_nonnull(gp);
    CUdriverProcAddressQueryResult q = -1;
    *by_proc = NULL;
    ck_assert_int_eq(gp(fn, by_proc, 12000, 0, &q), CUDA_SUCCESS);
    ck_assert_msg(pt_in_shim(*by_proc, &name), "cuGetProcAddress_v2(%s)", fn);
    ck_assert_str_eq(name, fn);
    return h;
}

/* A cap that is not a multiple of the granule: mapped memory never exceeds it. */
START_TEST(vmmh_odd_cap)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=5MiB", "GPUARENA_VMM_KEEP=0",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p, q;
    ck_assert_int_eq(cuMemAlloc(&p, 4 * MiB + 1), CUDA_ERROR_OUT_OF_MEMORY); /* 3 granules */
    ck_assert_uint_le(pt_counters().vmm_bytes_in_use, 5 * MiB);
    ck_assert_int_eq(cuMemAlloc(&p, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&q, 512), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_le(pt_counters().vmm_bytes_in_use, 5 * MiB);
    /* What can be mapped under the cap: two granules, none left (the 512 bytes were refused) */
    size_t fr = 0, tot = 0;
    ck_assert_int_eq(cuMemGetInfo(&fr, &tot), CUDA_SUCCESS);
    ck_assert_uint_eq(tot, 4 * MiB);
    ck_assert_uint_eq(fr, 0);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&q, 512), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(q), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemGetInfo(&fr, &tot), CUDA_SUCCESS);
    ck_assert_uint_eq(fr, 4 * MiB);
}
END_TEST

/* Pointer queries at the edges of a vmm block. */
START_TEST(vmmh_queries_edges)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr a, b, base = 0;
    size_t size = 0;
    ck_assert_int_eq(cuMemAlloc(&a, 3 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemGetAddressRange(&base, &size, a + 3 * MiB - 1), CUDA_SUCCESS);
    ck_assert_uint_eq(base, a);
    ck_assert_uint_eq(size, 3 * MiB);
    CUresult r = cuMemGetAddressRange(&base, &size, a + 3 * MiB);
    ck_assert_msg(r == CUDA_ERROR_NOT_FOUND, "one past the end: %d", r);
    ck_assert_int_eq(cuMemFree(a + 512), CUDA_ERROR_INVALID_VALUE); /* interior */
    ck_assert_int_eq(cuMemAlloc(&b, 1000), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
    CUpointer_attribute at[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned type = 7;
    size_t rs = 7;
    void *vals[2] = {&type, &rs};
    r = cuPointerGetAttributes(2, at, vals, a + 100);
    /* The plural answers CUDA_SUCCESS with defaults for a pointer the driver does not know. */
    ck_assert_msg(r == CUDA_SUCCESS && type == 0 && rs == 0, "attributes of freed: %d %u %zu", r,
                  type, rs);
    r = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 100);
    ck_assert_msg(r == CUDA_ERROR_INVALID_VALUE, "attribute of freed: %d", r);
    r = cuMemGetAddressRange(&base, &size, a + 100);
    ck_assert_msg(r == CUDA_ERROR_NOT_FOUND, "range of freed: %d", r);
    r = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b + 1024);
    ck_assert_msg(r == CUDA_ERROR_INVALID_VALUE, "attribute past b: %d", r);
    r = cuMemGetAddressRange(&base, &size, b + 1024);
    ck_assert_msg(r == CUDA_ERROR_NOT_FOUND, "range past b: %d", r);
    CUipcMemHandle h;
    ck_assert_int_eq(cuIpcGetMemHandle(&h, b + 512), CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
}
END_TEST

/* The program's own cuMemCreate/cuMemMap beside vmm mode's mappings. */
START_TEST(vmmh_own_handles)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=8MiB", "GPUARENA_VMM_KEEP=0",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    ck_assert_int_eq(cuMemCreate(&h, 4 * MiB, &prop, 0), CUDA_SUCCESS);
    CUdeviceptr va;
    ck_assert_int_eq(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemMap(va, 4 * MiB, 0, h, 0), CUDA_SUCCESS);
    CUdeviceptr p, q;
    ck_assert_int_eq(cuMemAlloc(&p, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&q, 512), CUDA_ERROR_OUT_OF_MEMORY);
    size_t fr = 0, tot = 0;
    ck_assert_int_eq(cuMemGetInfo(&fr, &tot), CUDA_SUCCESS);
    ck_assert_uint_eq(fr, 0);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(va), CUDA_ERROR_INVALID_VALUE); /* not the pool's */
    ck_assert_int_eq(cuMemUnmap(va, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemRelease(h), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemGetInfo(&fr, &tot), CUDA_SUCCESS);
    ck_assert_uint_eq(fr, 8 * MiB);
    ck_assert_int_eq(cuMemAlloc(&p, 8 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAddressFree(va, 4 * MiB), CUDA_SUCCESS);
}
END_TEST

/* Keep values: huge keeps never raise mapped memory above the cap; junk is refused. */
START_TEST(vmmh_keep_huge)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=6MiB", "GPUARENA_VMM_KEEP=1TiB",
           "GPUARENA_FREE_SYNC=device", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p[3], q;
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(cuMemAlloc(&p[i], 1 * MiB + 512 * (size_t)k), CUDA_SUCCESS);
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(cuMemFree(p[i]), CUDA_SUCCESS);
    }
    ck_assert_int_eq(cuMemAlloc(&q, 6 * MiB), CUDA_SUCCESS);
    ck_assert_uint_le(pt_counters().vmm_bytes_in_use, 6 * MiB);
    ck_assert_int_eq(cuMemFree(q), CUDA_SUCCESS);
}
END_TEST

START_TEST(vmmh_keep_junk)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=lots", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(vmmh_keep_one)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=1", "GPUARENA_FREE_SYNC=device",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 1000), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 0); /* 1 byte keeps no granule */
}
END_TEST

/* Async in vmm mode with a bad stream. */
START_TEST(vmmh_async_bad_stream)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p = 0;
    CUstream s;
    ck_assert_int_eq(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamDestroy(s), CUDA_SUCCESS);
    CUresult r = cuMemAllocAsync(&p, 1000, s);
    ck_assert_msg(r != CUDA_SUCCESS, "alloc on a destroyed stream: %d", r);
    ck_assert_int_eq(cuMemAllocAsync(&p, 1000, NULL), CUDA_SUCCESS);
    r = cuMemFreeAsync(p, s);
    ck_assert_msg(r != CUDA_SUCCESS, "free on a destroyed stream: %d", r);
    ck_assert_int_eq(cuMemFreeAsync(p, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFreeAsync(p, NULL), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* vmm mode under an 8 MiB cap, nothing kept, each free synchronised: the device and a first
 * created context, current (the tests create the second one). */
static void first_of_two_contexts(CUdevice *dev, CUcontext *c1)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=8MiB", "GPUARENA_VMM_KEEP=0",
           "GPUARENA_FREE_SYNC=device", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGet(dev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(c1, NULL, 0, *dev), CUDA_SUCCESS);
}

/* Two contexts on one device: one cap, each pointer freed under the other context. */
START_TEST(vmmh_two_contexts)
{
    CUdevice dev;
    CUcontext c1, c2;
    first_of_two_contexts(&dev, &c1);
    CUdeviceptr a, b, x;
    ck_assert_int_eq(cuMemAlloc(&a, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&c2, NULL, 0, dev), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&b, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&x, 1 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_le(pt_counters().vmm_bytes_in_use, 8 * MiB);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS); /* c1's, freed under c2 */
    ck_assert_int_eq(cuMemAlloc(&x, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(c2), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(b), CUDA_ERROR_INVALID_VALUE); /* died with c2 */
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 0);
    ck_assert_int_eq(cuMemAlloc(&x, 8 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(x), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(c1), CUDA_SUCCESS);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.vmm_reserved_bytes, 0);
    ck_assert_uint_eq(c.bytes_in_use, 0);
}
END_TEST

/* cuMemCreate refused midway through a block that shares its first granule with a live one: the
 * shared granule stays mapped with its data, nothing else is left mapped. */
static void vmmh_refused_shared(const char *rule, const char *keep)
{
    pt_env("GPUARENA_MODE=vmm", keep, "GPUARENA_FREE_SYNC=device", "SIMCUDA_TOTAL_MEM=1GiB",
           NULL);
    pt_start();
    CUdeviceptr a, p, k;
    unsigned char buf[1000], back[1000];
    memset(buf, 0x5a, sizeof buf);
    ck_assert_int_eq(cuMemAlloc(&a, sizeof buf), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemcpyHtoD(a, buf, sizeof buf), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&k, 3 * GRAN + 4096), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(k), CUDA_SUCCESS);
    unsigned long long before = pt_counters().vmm_bytes_in_use;
    simcuda_reset_counters();
    ck_assert_int_eq(simcuda_fail_add(rule), 0);
    CUresult r = cuMemAlloc(&p, 4 * GRAN + 4096);
    simcuda_counters_t c = pt_counters();
    if (c.injected_failures == 0) { /* kept granules served it: fewer calls than the rule's n */
        ck_assert_int_eq(r, CUDA_SUCCESS);
        ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
        c = pt_counters();
    } else {
        ck_assert_int_eq(r, CUDA_ERROR_OUT_OF_MEMORY);
    }
    if (c.injected_failures)
        ck_assert_uint_le(c.vmm_bytes_in_use, before);
    ck_assert_uint_eq(c.vmm_mapped_bytes, c.vmm_bytes_in_use);
    ck_assert_int_eq(cuMemcpyDtoH(back, a, sizeof back), CUDA_SUCCESS);
    ck_assert(memcmp(buf, back, sizeof buf) == 0);
    simcuda_fail_clear();
    ck_assert_int_eq(cuMemAlloc(&p, 4 * GRAN + 4096), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(p, 7, 4 * GRAN + 4096), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemcpyDtoH(back, a, sizeof back), CUDA_SUCCESS);
    ck_assert(memcmp(buf, back, sizeof buf) == 0);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&p, 512 * MiB), CUDA_SUCCESS); /* kept granules give way */
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    c = pt_counters();
    ck_assert_uint_le(c.vmm_bytes_in_use, 64 * MiB);
    ck_assert_uint_eq(c.vmm_mapped_bytes, c.vmm_bytes_in_use);
}

START_TEST(vmmh_create_refused_shared)
{
    for (int n = 1; n <= 3; n++) {
        if (fork() == 0) {
            char r[32];
            snprintf(r, sizeof r, "cuMemCreate:%d", n);
            vmmh_refused_shared(r, "GPUARENA_VMM_KEEP=0");
            _exit(0);
        }
        int st;
        wait(&st);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cuMemCreate:%d keep 0", n);
    }
}
END_TEST

START_TEST(vmmh_map_refused_kept)
{
    for (int n = 1; n <= 3; n++) {
        if (fork() == 0) {
            char r[32];
            snprintf(r, sizeof r, "cuMemMap:%d", n);
            vmmh_refused_shared(r, "GPUARENA_VMM_KEEP=64MiB");
            _exit(0);
        }
        int st;
        wait(&st);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cuMemMap:%d keep 64MiB", n);
    }
}
END_TEST

/* The driver refuses cuMemCreate (the device is full: another process) with a 1 GiB cap nearly
 * untouched: the explanation must blame the device, not the cap or vmm's granules. */
static void vmmh_device_full_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr q;
    exit(cuMemAlloc(&q, 8 * MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 2);
}

START_TEST(vmmh_device_refusal_explained)
{
    char err[16384];
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", "SIMCUDA_FAIL=cuMemCreate:1+", NULL);
    int status = pt_run_child(vmmh_device_full_child, NULL, err, sizeof err);
    ck_assert_msg(status == 0, "exit %d: %s", status, err);
    ck_assert_msg(!strstr(err, "granules of 2.00 MiB"), "blames granules: %s", err);
    ck_assert_msg(!strstr(err, "raise GPUARENA_LIMIT"), "blames the cap: %s", err);
    ck_assert_msg(strstr(err, "the driver refused the memory"), "%s", err);
}
END_TEST

/* cuMemRetainAllocationHandle on vmm pool memory (live, interior, freed): the driver's answer for
 * cuMemAlloc memory. Handing out the pool's granule let a program keep it past the pool's release,
 * off the cap: a 2 MiB handle held, then 8 MiB allocated under an 8 MiB cap (10 MiB on the
 * device). A program's own handle is still retained and counted. */
START_TEST(vmmh_retain_pool_refused)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=8MiB", "GPUARENA_VMM_KEEP=0",
           "GPUARENA_FREE_SYNC=device", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr a, b;
    CUmemGenericAllocationHandle h;
    ck_assert_int_eq(cuMemAlloc(&a, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemRetainAllocationHandle(&h, (void *)a), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemRetainAllocationHandle(&h, (void *)(a + 3 * MiB)),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAlloc(&b, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 0);
    ck_assert_int_eq(cuMemAlloc(&a, 8 * MiB), CUDA_SUCCESS);
    ck_assert_uint_le(pt_counters().vmm_bytes_in_use, 8 * MiB);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    /* The program's own handle: retained, counted until its last reference goes. */
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle own, again;
    CUdeviceptr va;
    ck_assert_int_eq(cuMemCreate(&own, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAddressReserve(&va, 2 * MiB, 0, 0, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemMap(va, 2 * MiB, 0, own, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemRetainAllocationHandle(&again, (void *)va), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemUnmap(va, 2 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemRelease(own), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&a, 8 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* `again` holds 2 MiB */
    ck_assert_int_eq(cuMemRelease(again), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&a, 8 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAddressFree(va, 2 * MiB), CUDA_SUCCESS);
}
END_TEST

/* vmm mode, nothing kept, each free synchronised; a 4 MiB block across granules and a small one. */
static void two_pool_blocks(CUdeviceptr *a, CUdeviceptr *b)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "GPUARENA_FREE_SYNC=device",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    ck_assert_int_eq(cuMemAlloc(a, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(b, 1000), CUDA_SUCCESS);
}

/* cuMemUnmap of vmm pool memory: refused as the driver refuses it for cuMemAlloc memory. Passed
 * on, it unmapped a live allocation's granule (its memset then failed, and the pool's own unmap
 * at the free). */
START_TEST(vmmh_unmap_pool_refused)
{
    CUdeviceptr a, b;
    two_pool_blocks(&a, &b);
    simcuda_counters_t c0 = pt_counters();
    ck_assert_int_eq(cuMemUnmap(a, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemUnmap(b, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.vmm_mappings, c0.vmm_mappings);
    ck_assert_uint_eq(c.unmap_calls, c0.unmap_calls);
    ck_assert_int_eq(cuMemsetD8(a, 1, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
    c = pt_counters();
    ck_assert_uint_eq(c.vmm_mappings, 0);
    ck_assert_uint_eq(c.unmap_calls, c.map_calls);
}
END_TEST

/* cuMemMap of the program's own handle into the pool's range, on a granule the pool has not mapped
 * (well past its blocks): refused, the driver never asked. Passed on, the pool's own mapping there
 * later failed (an out-of-memory with room under the cap) and the range could not be freed. */
START_TEST(vmmh_map_into_pool_refused)
{
    CUdeviceptr a, b;
    two_pool_blocks(&a, &b);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle own = 0;
    ck_assert_int_eq(cuMemCreate(&own, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    simcuda_counters_t c0 = pt_counters();
    ck_assert_int_eq(cuMemMap(a + 64 * MiB, 2 * MiB, 0, own, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemMap(b, 2 * MiB, 0, own, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(pt_counters().map_calls, c0.map_calls);
    ck_assert_int_eq(cuMemRelease(own), CUDA_SUCCESS);
    CUdeviceptr big;
    ck_assert_int_eq(cuMemAlloc(&big, 96 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(big, 2, 96 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(big), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
}
END_TEST

/* cuMemAddressFree of the vmm pool's own range (a program can find an address in it: its first
 * allocation starts there): refused, nothing reaches the driver, and the pool's allocations keep
 * their memory and data. Before it was hooked, the driver freed the pool's address space, mapped
 * granules and all, and the program's next use of the memory faulted. A range the program reserved
 * itself is still freed by the driver, and bad arguments get the driver's own answer. */
START_TEST(vmmh_address_free_pool_refused)
{
    CUdeviceptr a, b;
    two_pool_blocks(&a, &b);
    unsigned char in[4096], out[4096];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7 + 1);
    ck_assert_int_eq(cuMemcpyHtoD(a + 3 * MiB, in, sizeof in), CUDA_SUCCESS);
    simcuda_counters_t c0 = pt_counters();
    ck_assert_int_eq(cuMemAddressFree(a, 2048 * MiB), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressFree(a, 4 * MiB), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressFree(a + MiB, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressFree(b, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.address_free_calls, c0.address_free_calls); /* the driver never asked */
    ck_assert_uint_eq(c.vmm_reserved_bytes, c0.vmm_reserved_bytes);
    ck_assert_uint_eq(c.vmm_mappings, c0.vmm_mappings);
    ck_assert_int_eq(cuMemcpyDtoH(out, a + 3 * MiB, sizeof out), CUDA_SUCCESS);
    ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
    /* Freed pool addresses are still the pool's range. */
    ck_assert_int_eq(cuMemAddressFree(a, 2048 * MiB), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr d;
    ck_assert_int_eq(cuMemAlloc(&d, 6 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(d, 3, 6 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(d), CUDA_SUCCESS);
    /* The program's own reservation: the driver frees it. */
    CUdeviceptr va = 0;
    c0 = pt_counters();
    ck_assert_int_eq(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAddressFree(va, 8 * MiB), CUDA_SUCCESS);
    c = pt_counters();
    ck_assert_uint_eq(c.address_free_calls, c0.address_free_calls + 1);
    ck_assert_uint_eq(c.vmm_reserved_bytes, c0.vmm_reserved_bytes);
    /* Nothing the shim knows: the driver's own answer (and it was asked). */
    ck_assert_int_eq(cuMemAddressFree(0, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE); /* freed already */
    ck_assert_uint_eq(pt_counters().address_free_calls, c0.address_free_calls + 3);
}
END_TEST

/* In arena mode the arena is cuMemAlloc memory, which the driver itself refuses to free as an
 * address range: passed on, refused by the driver, the allocation intact. */
START_TEST(vmmh_address_free_arena_passed)
{
    pt_env("GPUARENA_MODE=arena", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr a;
    ck_assert_int_eq(cuMemAlloc(&a, 4 * MiB), CUDA_SUCCESS);
    simcuda_counters_t c0 = pt_counters();
    ck_assert_int_eq(cuMemAddressFree(a, 4 * MiB), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(pt_counters().address_free_calls, c0.address_free_calls + 1);
    ck_assert_int_eq(cuMemsetD8(a, 1, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
}
END_TEST

/* The refusal holds on every path to cuMemAddressFree (direct, dlopen + dlsym, cuGetProcAddress)
 * and for any context's pool, not only the current one's: with c2 current, c1's range (an address
 * its allocation never reached included) is refused, and the driver never asked. The pools' own
 * frees of their ranges at teardown still reach the driver (backend.c calls it directly): nothing
 * is left reserved. */
START_TEST(vmmh_address_free_every_path)
{
    CUdevice dev;
    CUcontext c1, c2;
    first_of_two_contexts(&dev, &c1);
    CUdeviceptr a, b;
    ck_assert_int_eq(cuMemAlloc(&a, 2 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(a, 0x5a, 2 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&c2, NULL, 0, dev), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&b, 2 * MiB), CUDA_SUCCESS);
    typedef CUresult (*free_fn)(CUdeviceptr, size_t);
    void *d, *f;
    void *h = hook_by_paths("cuMemAddressFree", &d, &f);
    free_fn by_dlsym = (free_fn)d, by_proc = (free_fn)f;
    simcuda_counters_t c0 = pt_counters();
    ck_assert_int_eq(cuMemAddressFree(a, 16 * MiB), CUDA_ERROR_INVALID_VALUE); /* c1's, from c2 */
    ck_assert_int_eq(cuMemAddressFree(a + 6 * MiB, GRAN), CUDA_ERROR_INVALID_VALUE); /* untouched */
    ck_assert_int_eq(by_dlsym(a, 16 * MiB), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(by_dlsym(b, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(by_proc(a, 16 * MiB), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(by_proc(b, 2 * MiB), CUDA_ERROR_INVALID_VALUE);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.address_free_calls, c0.address_free_calls);
    ck_assert_uint_eq(c.vmm_reserved_bytes, c0.vmm_reserved_bytes);
    ck_assert_uint_eq(c.vmm_mappings, c0.vmm_mappings);
    unsigned char out[4096];
    ck_assert_int_eq(cuMemcpyDtoH(out, a + MiB, sizeof out), CUDA_SUCCESS);
    for (size_t i = 0; i < sizeof out; i++)
        ck_assert_uint_eq(out[i], 0x5a);
    /* The program's own range through the hooks reached by dlsym and cuGetProcAddress. */
    CUdeviceptr va = 0;
    ck_assert_int_eq(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0), CUDA_SUCCESS);
    ck_assert_int_eq(by_dlsym(va, 4 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0), CUDA_SUCCESS);
    ck_assert_int_eq(by_proc(va, 4 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().address_free_calls, c0.address_free_calls + 2);
    dlclose(h);
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(c2), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(c1), CUDA_SUCCESS);
    c = pt_counters();
    ck_assert_uint_eq(c.vmm_reserved_bytes, 0);
    ck_assert_uint_eq(c.vmm_mappings, 0);
}
END_TEST

/* cuMemSetAccess on the pool's own range, on every path (direct, dlsym, cuGetProcAddress_v2), for
 * a live block of the current context, another context's block, an orphan's stream-ordered block
 * (its context destroyed) and a range that ends in a block: refused, the driver never asked, and
 * every block still reads back. Passed on (it was not hooked, found by an outside test on
 * 2026-12-05), PROT_NONE made pool blocks unreadable. The program's own mapping is still set. */
START_TEST(vmmh_set_access_pool_refused)
{
    CUdevice dev;
    CUcontext c1, c2;
    first_of_two_contexts(&dev, &c1);
    CUdeviceptr a, b, o;
    ck_assert_int_eq(cuMemAllocAsync(&o, 1000, NULL), CUDA_SUCCESS); /* outlives c1 */
    ck_assert_int_eq(cuMemsetD8(o, 0x3c, 1000), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&c2, NULL, 0, dev), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&b, 2 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(b, 0x6b, 2 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(c1), CUDA_SUCCESS); /* o stays, in c1's orphan pool */
    ck_assert_int_eq(cuMemAlloc(&a, 2 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(a, 0x5a, 2 * MiB), CUDA_SUCCESS);
    typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    void *d, *f;
    void *h = hook_by_paths("cuMemSetAccess", &d, &f);
    access_fn by_dlsym = (access_fn)d, by_proc = (access_fn)f;
    CUmemAccessDesc none = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_NONE};
    CUdeviceptr og = o & ~(CUdeviceptr)(GRAN - 1);
    simcuda_counters_t c0 = pt_counters();
    access_fn paths[3] = {cuMemSetAccess, by_dlsym, by_proc};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(paths[i](a, GRAN, &none, 1), CUDA_ERROR_INVALID_VALUE);
        ck_assert_int_eq(paths[i](b, GRAN, &none, 1), CUDA_ERROR_INVALID_VALUE);  /* c2's, from c2 */
        ck_assert_int_eq(paths[i](og, GRAN, &none, 1), CUDA_ERROR_INVALID_VALUE); /* the orphan's */
        ck_assert_int_eq(paths[i](a - GRAN, 2 * GRAN, &none, 1), CUDA_ERROR_INVALID_VALUE);
    }
    ck_assert_uint_eq(pt_counters().set_access_calls, c0.set_access_calls); /* never asked */
    unsigned char out[1000];
    ck_assert_int_eq(cuMemcpyDtoH(out, a + GRAN - sizeof out, sizeof out), CUDA_SUCCESS);
    for (size_t i = 0; i < sizeof out; i++)
        ck_assert_uint_eq(out[i], 0x5a);
    ck_assert_int_eq(cuMemcpyDtoH(out, b, sizeof out), CUDA_SUCCESS);
    for (size_t i = 0; i < sizeof out; i++)
        ck_assert_uint_eq(out[i], 0x6b);
    ck_assert_int_eq(cuMemcpyDtoH(out, o, sizeof out), CUDA_SUCCESS);
    for (size_t i = 0; i < sizeof out; i++)
        ck_assert_uint_eq(out[i], 0x3c);
    /* The program's own reservation and mapping: set by the driver on every path. */
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAccessDesc rw = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle own = 0;
    CUdeviceptr va = 0;
    ck_assert_int_eq(cuMemAddressReserve(&va, GRAN, 0, 0, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemCreate(&own, GRAN, &prop, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemMap(va, GRAN, 0, own, 0), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(paths[i](va, GRAN, &rw, 1), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().set_access_calls, c0.set_access_calls + 3);
    ck_assert_int_eq(cuMemsetD8(va, 1, GRAN), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemUnmap(va, GRAN), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemRelease(own), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAddressFree(va, GRAN), CUDA_SUCCESS);
    dlclose(h);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(o), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(c2), CUDA_SUCCESS);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.vmm_reserved_bytes, 0);
    ck_assert_uint_eq(c.vmm_mappings, 0);
    ck_assert_uint_eq(c.bytes_in_use, 0);
}
END_TEST

TCase *pt_tcase_vmm_hostile(void)
{
    TCase *tc = tcase_create("vmm_hostile");
    tcase_add_test(tc, vmmh_odd_cap);
    tcase_add_test(tc, vmmh_queries_edges);
    tcase_add_test(tc, vmmh_own_handles);
    tcase_add_test(tc, vmmh_keep_huge);
    tcase_add_test(tc, vmmh_keep_junk);
    tcase_add_test(tc, vmmh_keep_one);
    tcase_add_test(tc, vmmh_async_bad_stream);
    tcase_add_test(tc, vmmh_two_contexts);
    tcase_add_test(tc, vmmh_create_refused_shared);
    tcase_add_test(tc, vmmh_map_refused_kept);
    tcase_add_test(tc, vmmh_device_refusal_explained);
    tcase_add_test(tc, vmmh_retain_pool_refused);
    tcase_add_test(tc, vmmh_unmap_pool_refused);
    tcase_add_test(tc, vmmh_map_into_pool_refused);
    tcase_add_test(tc, vmmh_address_free_pool_refused);
    tcase_add_test(tc, vmmh_address_free_arena_passed);
    tcase_add_test(tc, vmmh_address_free_every_path);
    tcase_add_test(tc, vmmh_set_access_pool_refused);
    return tc;
}
