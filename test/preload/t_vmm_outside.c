/* Preload tests: the promises of GPUARENA_MODE=vmm checked from outside (issue 10, part 2) where no
 * other case looked: kept granules giving way to another context and to the program's own driver
 * memory under the cap, no cuMemAlloc_v2 reaching the driver on any lookup path even when the
 * driver refuses granules, and odd sizes' pointer queries at their edges; these passed when they
 * were written (an outside test, 2026-12-06) and hold the promises in place. The last two cases,
 * cuIpcGetMemHandle of freed pool memory, failed then (fixed in shim/query.c). What is checked is
 * what the simulated driver saw (its counters) and what the queries answer.
 */
#include "preload_test.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define GRAN (2 * MiB)

/* n blocks of one granule each allocated and freed in the current context: with the frees
 * synchronised (GPUARENA_FREE_SYNC=device), their granules are then kept, up to the keep. */
static void keep_granules(int n)
{
    CUdeviceptr p[64];
    ck_assert_int_le(n, 64);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(cuMemAlloc(&p[i], GRAN), CUDA_SUCCESS);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(cuMemFree(p[i]), CUDA_SUCCESS);
}

/* One context keeps 60 MiB of granules under a 128 MiB cap; a second context on the device gets
 * them: its free figure counts them and can be allocated, and so can 100 MiB, with the driver's
 * device memory never above the cap. */
START_TEST(vmmo_kept_serve_other_context)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=128MiB", "GPUARENA_VMM_KEEP=64MiB",
           "GPUARENA_FREE_SYNC=device", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUdevice dev;
    CUcontext a, b;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&a, NULL, 0, dev), CUDA_SUCCESS);
    keep_granules(30);
    ck_assert_uint_eq(pt_counters().vmm_mapped_bytes, 60 * MiB); /* all kept */
    ck_assert_int_eq(cuCtxCreate(&b, NULL, 0, dev), CUDA_SUCCESS);
    size_t fr = 0, tot = 0;
    ck_assert_int_eq(cuMemGetInfo(&fr, &tot), CUDA_SUCCESS);
    ck_assert_uint_eq(tot, 128 * MiB);
    ck_assert_uint_eq(fr, 128 * MiB);
    CUdeviceptr x;
    ck_assert_int_eq(cuMemAlloc(&x, fr), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(x), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&x, 100 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(x, 0x3c, 100 * MiB), CUDA_SUCCESS);
    unsigned char last = 0;
    ck_assert_int_eq(cuMemcpyDtoH(&last, x + 100 * MiB - 1, 1), CUDA_SUCCESS);
    ck_assert_uint_eq(last, 0x3c);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_le(c.peak_bytes_in_use, 128 * MiB);
    ck_assert_uint_le(c.peak_vmm_mapped_bytes, 128 * MiB);
    ck_assert_int_eq(cuCtxDestroy(b), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(a), CUDA_SUCCESS);
    c = pt_counters();
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.vmm_reserved_bytes, 0);
}
END_TEST

/* The pool keeps 60 MiB of granules under a 64 MiB cap; the program's own driver memory, which
 * counts toward the same cap, gets them: cuMemCreate of 40 MiB, then cuMemAllocManaged of 40 MiB,
 * each served with the device never above the cap. */
START_TEST(vmmo_kept_give_way_to_passthrough)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=64MiB", "GPUARENA_VMM_KEEP=64MiB",
           "GPUARENA_FREE_SYNC=device", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    keep_granules(30);
    ck_assert_uint_eq(pt_counters().vmm_mapped_bytes, 60 * MiB);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    ck_assert_int_eq(cuMemCreate(&h, 40 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_uint_le(pt_counters().peak_bytes_in_use, 64 * MiB);
    ck_assert_int_eq(cuMemRelease(h), CUDA_SUCCESS);
    keep_granules(30);
    CUdeviceptr m;
    ck_assert_int_eq(cuMemAllocManaged(&m, 40 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    ck_assert_uint_le(pt_counters().peak_bytes_in_use, 64 * MiB);
    ck_assert_int_eq(cuMemFree(m), CUDA_SUCCESS);
}
END_TEST

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*pitch_fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t,
                               CUdriverProcAddressQueryResult *);

static void *by_proc(const char *name, int version, cuuint64_t flags)
{
    getproc_fn gp = (getproc_fn)dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    ck_assert_ptr_nonnull(gp);
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    ck_assert_int_eq(gp(name, &fn, version, flags, &q), CUDA_SUCCESS);
    ck_assert_ptr_nonnull(fn);
    return fn;
}

/* cuMemAlloc_v2 and cuMemAllocPitch_v2 by every way a program finds them (direct binding, dlsym on
 * the driver's handle, RTLD_NEXT, RTLD_DEFAULT, cuGetProcAddress at 12000 and at 3020 with the
 * per-thread stream flag) never reach the driver's cuMemAlloc_v2 in vmm mode: not when served,
 * and not when the driver refuses every granule (no fallback to a plain allocation; nothing kept,
 * so that no kept granule serves a block there). */
START_TEST(vmmo_no_driver_alloc_any_path)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "GPUARENA_FREE_SYNC=device",
           "GPUARENA_LOG=error", NULL);
    pt_start();
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    alloc_fn fns[] = {
        cuMemAlloc_v2,
        (alloc_fn)dlsym(h, "cuMemAlloc_v2"),
        (alloc_fn)dlsym(RTLD_NEXT, "cuMemAlloc_v2"),
        (alloc_fn)dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"),
        (alloc_fn)by_proc("cuMemAlloc", 12000, 0),
        (alloc_fn)by_proc("cuMemAlloc", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
    };
    pitch_fn pitch = (pitch_fn)by_proc("cuMemAllocPitch", 12000, 0);
    for (int refused = 0; refused < 2; refused++) {
        if (refused)
            ck_assert_int_eq(simcuda_fail_add("cuMemCreate:1+"), 0);
        CUresult want = refused ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
            ck_assert_ptr_nonnull(fns[i]);
            CUdeviceptr p = 0;
            ck_assert_msg(fns[i](&p, 5 * MiB + 1) == want, "path %zu, refused %d", i, refused);
            if (!refused)
                ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
        }
        CUdeviceptr p = 0;
        size_t pt = 0;
        ck_assert_int_eq(pitch(&p, &pt, 1000, 3000, 4), want);
        if (!refused)
            ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
        ck_assert_uint_eq(pt_counters().alloc_calls, 0);
    }
    simcuda_fail_clear();
    dlclose(h);
}
END_TEST

/* The range and attributes cuMemGetAddressRange and cuPointerGetAttribute give at p + off, p a
 * live block of `rounded` bytes: the block's own, or, past its end, none. */
static void check_range_at(CUdeviceptr p, size_t off, size_t rounded, CUcontext ctx)
{
    CUdeviceptr base = 0, start = 0;
    size_t size = 0, rsize = 0;
    CUcontext owner = NULL;
    int ord = -1;
    CUresult r = cuMemGetAddressRange(&base, &size, p + off);
    if (off >= rounded) {
        ck_assert_msg(r == CUDA_ERROR_NOT_FOUND, "range at +%zu of %zu: %d", off, rounded, r);
        ck_assert_int_eq(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                               p + off), CUDA_ERROR_INVALID_VALUE);
        return;
    }
    ck_assert_msg(r == CUDA_SUCCESS && base == p && size == rounded,
                  "range at +%zu of %zu: %d, base %+lld, size %zu", off, rounded, r,
                  (long long)(base - p), size);
    ck_assert_int_eq(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + off),
                     CUDA_SUCCESS);
    ck_assert_int_eq(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + off),
                     CUDA_SUCCESS);
    ck_assert_int_eq(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p + off),
                     CUDA_SUCCESS);
    ck_assert_int_eq(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p + off),
                     CUDA_SUCCESS);
    ck_assert(start == p && rsize == rounded && owner == ctx && ord == 0);
}

/* Odd sizes around the granule and the 512-byte unit: each block answers queries as its own from
 * its first byte to its last 512-byte unit, nothing past it, nothing once freed; its last byte
 * reads back; a second free is refused; sizes no device holds are out of memory and 0 bytes an
 * invalid value, with nothing left mapped. With nothing kept, the driver holds no granule at
 * the end. */
START_TEST(vmmo_odd_size_edges)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "GPUARENA_FREE_SYNC=device",
           "GPUARENA_LOG=error", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUcontext ctx = pt_start();
    const size_t sizes[] = {1,        511,      512,          513,          GRAN / 2 - 1,
                            GRAN / 2, GRAN / 2 + 1, GRAN - 1, GRAN,         GRAN + 1,
                            2 * GRAN - 1, 2 * GRAN, 2 * GRAN + 1, 3 * GRAN + 7, 100 * MiB + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], rounded = (n + 511) & ~(size_t)511;
        CUdeviceptr p = 0;
        ck_assert_int_eq(cuMemAlloc(&p, n), CUDA_SUCCESS);
        const size_t offs[] = {0, n / 2, n - 1, n, rounded - 1, rounded};
        for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++)
            check_range_at(p, offs[k], rounded, ctx);
        ck_assert_int_eq(cuMemsetD8(p, 0xa5, n), CUDA_SUCCESS);
        unsigned char last = 0;
        ck_assert_int_eq(cuMemcpyDtoH(&last, p + n - 1, 1), CUDA_SUCCESS);
        ck_assert_uint_eq(last, 0xa5);
        ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
        check_range_at(p, 0, 0, ctx);
        ck_assert_int_eq(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    }
    const size_t huge[] = {SIZE_MAX, SIZE_MAX - 511, SIZE_MAX - GRAN + 1, (size_t)1 << 63,
                           (size_t)1 << 40};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        CUdeviceptr p = 0;
        ck_assert_int_eq(cuMemAlloc(&p, huge[i]), CUDA_ERROR_OUT_OF_MEMORY);
    }
    CUdeviceptr p = 0;
    ck_assert_int_eq(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.vmm_mappings, 0);
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.alloc_calls, 0);
}
END_TEST

/* cuIpcGetMemHandle of pool memory no live allocation holds (a freed block, one pending after its
 * free, a free byte past a block) answers as the driver does for memory it does not know,
 * CUDA_ERROR_INVALID_VALUE, as the other queries do; a live block is still refused as
 * sub-allocated. It answered CUDA_ERROR_NOT_SUPPORTED for all of them. */
static void ipc_freed_pool_memory(const char *mode)
{
    pt_env(mode, "GPUARENA_FREE_SYNC=deferred", "GPUARENA_LOG=error", "SIMCUDA_TOTAL_MEM=1GiB",
           NULL);
    pt_start();
    CUdeviceptr live, gone, pending;
    CUipcMemHandle h;
    ck_assert_int_eq(cuMemAlloc(&live, 3 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&gone, 3 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&pending, 4096), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(gone), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS); /* one context: gone is free now */
    ck_assert_int_eq(cuMemFree(pending), CUDA_SUCCESS); /* pending until the next allocation */
    unsigned long long before = pt_counters().ipc_calls;
    ck_assert_int_eq(cuIpcGetMemHandle(&h, gone), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuIpcGetMemHandle(&h, gone + 5000), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuIpcGetMemHandle(&h, pending), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuIpcGetMemHandle(&h, live + 100), CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_uint_eq(pt_counters().ipc_calls, before); /* the pool's memory never shown */
    ck_assert_int_eq(cuMemFree(live), CUDA_SUCCESS);
}

START_TEST(vmmo_ipc_freed_pool_memory)
{
    ipc_freed_pool_memory("GPUARENA_MODE=vmm");
}
END_TEST

START_TEST(vmmo_ipc_freed_arena_memory)
{
    ipc_freed_pool_memory("GPUARENA_MODE=arena");
}
END_TEST

/* A block the cap allows and the device cannot hold (another process holds 800 MiB of the
 * device's 1 GiB: the process's own cap, the device's total, sees none of it) is refused before
 * anything is mapped: one cuMemGetInfo, no cuMemCreate (it was mapped granule by granule until the
 * driver refused, then unmapped: 100 cuMemCreate here; on a GPU one driver round trip each). A
 * block that fits only with the pool's kept granules given back still fits. */
static void too_large_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr keep = 0, big = 0, x = 0;
    if (cuMemAlloc(&keep, 20 * MiB) != CUDA_SUCCESS)
        exit(2);
    keep_granules(30); /* 60 MiB kept */
    simcuda_counters_t before = pt_counters();
    if (cuMemAlloc(&big, 400 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(3);
    if (pt_counters().create_calls != before.create_calls)
        exit(4); /* mapped granules to find out */
    /* 224 MiB free on the device less 20 live: 60 of it kept, so 200 fits */
    if (cuMemAlloc(&x, 200 * MiB) != CUDA_SUCCESS)
        exit(5);
    if (cuMemsetD8(x, 0x5a, 200 * MiB) != CUDA_SUCCESS)
        exit(6);
    unsigned char last = 0;
    if (cuMemcpyDtoH(&last, x + 200 * MiB - 1, 1) != CUDA_SUCCESS || last != 0x5a)
        exit(7);
    if (simcuda_device_peak_all(0) > 1 * GiB)
        exit(8);
    exit(0);
}

START_TEST(vmmo_too_large_refused_at_once)
{
    char shared[64];
    snprintf(shared, sizeof shared, "SIMCUDA_SHARED=vbig%d", (int)getpid());
    pt_env(shared, "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=64MiB",
           "GPUARENA_FREE_SYNC=device", NULL);
    int up[2];
    ck_assert_int_eq(pipe(up), 0);
    pid_t holder = fork();
    if (holder == 0) { /* another process on the device */
        CUdeviceptr p;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pt_start();
        char ok = cuMemAlloc(&p, 800 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
        pt_child_report_and_hold(up[1], ok);
    }
    char ok = pt_child_report_read(up[0]);
    char err[16384];
    int status = pt_run_child(too_large_child, NULL, err, sizeof err);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -f /dev/shm/simcuda-vbig%d", (int)getpid());
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(ok, 'y');
    ck_assert_msg(status == 0, "exit %d: %s", status, err);
    ck_assert_msg(strstr(err, "the device itself is full"), "%s", err); /* as when mapped */
}
END_TEST

/* GPUARENA_VMM_KEEP=0: a block freed with cuMemFreeAsync gives its granules back once the program
 * has waited for the stream (cuStreamSynchronize) or for an event recorded after the free
 * (cuEventSynchronize), as cuCtxSynchronize does, not at the next allocation: a group member
 * waiting for the memory got it only then (an outside check, 2026-12-07; the granules stayed
 * mapped through both waits). */
START_TEST(vmmo_async_free_given_back_at_stream_wait)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUstream s;
    CUevent ev;
    CUdeviceptr p;
    ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ck_assert_int_eq(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocAsync(&p, 10 * MiB, s), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8Async(p, 0x5a, 10 * MiB, s), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_mapped_bytes, 10 * MiB);
    ck_assert_int_eq(cuMemFreeAsync(p, s), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_mapped_bytes, 0);
    ck_assert_int_eq(cuMemAllocAsync(&p, 6 * MiB, s), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_mapped_bytes, 6 * MiB);
    ck_assert_int_eq(cuMemFreeAsync(p, s), CUDA_SUCCESS);
    ck_assert_int_eq(cuEventRecord(ev, s), CUDA_SUCCESS);
    ck_assert_int_eq(cuEventSynchronize(ev), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_mapped_bytes, 0);
    ck_assert_int_eq(cuEventDestroy(ev), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamDestroy(s), CUDA_SUCCESS);
}
END_TEST

TCase *pt_tcase_vmm_outside(void)
{
    TCase *tc = tcase_create("vmm_outside");
    tcase_add_test(tc, vmmo_kept_serve_other_context);
    tcase_add_test(tc, vmmo_kept_give_way_to_passthrough);
    tcase_add_test(tc, vmmo_no_driver_alloc_any_path);
    tcase_add_test(tc, vmmo_odd_size_edges);
    tcase_add_test(tc, vmmo_ipc_freed_pool_memory);
    tcase_add_test(tc, vmmo_ipc_freed_arena_memory);
    tcase_add_test(tc, vmmo_too_large_refused_at_once);
    tcase_add_test(tc, vmmo_async_free_given_back_at_stream_wait);
    return tc;
}
