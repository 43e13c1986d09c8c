/* Preload tests: GPUARENA_MODE=vmm (issue "Modes as pools", part 2). Every figure is the simulated
 * driver's: its VMM counters say what is reserved, created and mapped, and the bytes read back
 * through the mappings say the data survived. The program's cuMemAlloc never reaches the driver's.
 */
#include "preload_test.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define GRAN (2 * MiB) /* the simulated driver's recommended granularity */

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

/* Allocates n blocks of mixed sizes through the given entry points, writes a pattern into each,
 * frees every other one, allocates again, and reads every live block back. */
static void vmm_integrity(alloc_fn a, free_fn f, int n)
{
    CUdeviceptr p[64];
    size_t size[64];
    unsigned char *buf = malloc(3 * MiB), *back = malloc(3 * MiB);
    ck_assert(n <= 64 && buf && back);
    for (int i = 0; i < n; i++) {
        size[i] = 1000 + (size_t)i * 47111 % (3 * MiB - 1000);
        ck_assert_int_eq(a(&p[i], size[i]), CUDA_SUCCESS);
        ck_assert_uint_eq(p[i] % 512, 0);
        memset(buf, i + 1, size[i]);
        ck_assert_int_eq(cuMemcpyHtoD(p[i], buf, size[i]), CUDA_SUCCESS);
    }
    for (int i = 0; i < n; i += 2)
        ck_assert_int_eq(f(p[i]), CUDA_SUCCESS);
    for (int i = 0; i < n; i += 2) {
        ck_assert_int_eq(a(&p[i], size[i]), CUDA_SUCCESS);
        memset(buf, i + 1, size[i]);
        ck_assert_int_eq(cuMemcpyHtoD(p[i], buf, size[i]), CUDA_SUCCESS);
    }
    for (int i = 0; i < n; i++) {
        memset(buf, i + 1, size[i]);
        ck_assert_int_eq(cuMemcpyDtoH(back, p[i], size[i]), CUDA_SUCCESS);
        ck_assert_msg(memcmp(buf, back, size[i]) == 0, "block %d (%zu bytes) read back intact", i,
                      size[i]);
    }
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(f(p[i]), CUDA_SUCCESS);
    free(buf);
    free(back);
}

START_TEST(vmm_direct_integrity)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    vmm_integrity(cuMemAlloc, cuMemFree, 40);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.alloc_calls, 0); /* never the driver's cuMemAlloc_v2 */
    ck_assert_uint_eq(c.reserve_calls, 1); /* one virtual range */
    ck_assert_uint_gt(c.create_calls, 0);
    ck_assert_uint_eq(c.map_calls, c.create_calls);
    ck_assert_uint_eq(c.set_access_calls, c.create_calls);
}
END_TEST

START_TEST(vmm_dlsym_integrity)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    alloc_fn a = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    free_fn f = (free_fn)dlsym(h, "cuMemFree_v2");
    ck_assert(pt_in_shim((void *)a, NULL) && pt_in_shim((void *)f, NULL));
    vmm_integrity(a, f, 24);
    ck_assert_uint_eq(pt_counters().alloc_calls, 0);
}
END_TEST

START_TEST(vmm_getproc_integrity)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    void *a = NULL, *f = NULL;
    CUdriverProcAddressQueryResult st;
    ck_assert_int_eq(cuGetProcAddress_v2("cuMemAlloc", &a, 12000, 0, &st), CUDA_SUCCESS);
    ck_assert_int_eq(cuGetProcAddress_v2("cuMemFree", &f, 12000, 0, &st), CUDA_SUCCESS);
    ck_assert(pt_in_shim(a, NULL) && pt_in_shim(f, NULL));
    vmm_integrity((alloc_fn)a, (free_fn)f, 24);
    ck_assert_uint_eq(pt_counters().alloc_calls, 0);
}
END_TEST

/* With nothing kept, every wholly free granule goes back at the free (GPUARENA_FREE_SYNC=device:
 * each free synchronises, as the driver's own cuMemFree); with a keep, at most that much stays
 * mapped. */
START_TEST(vmm_granules_given_back)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "GPUARENA_FREE_SYNC=device",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p[32];
    for (int i = 0; i < 32; i++)
        ck_assert_int_eq(cuMemAlloc(&p[i], 1 * MiB), CUDA_SUCCESS);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.vmm_bytes_in_use, 32 * MiB); /* 32 MiB live: 16 granules, no more */
    for (int i = 0; i < 32; i += 2)
        ck_assert_int_eq(cuMemFree(p[i]), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 32 * MiB); /* each granule half live */
    for (int i = 1; i < 32; i += 2)
        ck_assert_int_eq(cuMemFree(p[i]), CUDA_SUCCESS);
    c = pt_counters();
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_uint_eq(c.vmm_mappings, 0);
    ck_assert_uint_eq(c.release_calls, c.create_calls);
}
END_TEST

/* The default GPUARENA_FREE_SYNC=deferred: freed granules go back at the next allocation, after
 * one synchronisation of the context for every free before it. */
START_TEST(vmm_granules_deferred)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p[8], q;
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(cuMemAlloc(&p[i], GRAN), CUDA_SUCCESS);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(cuMemFree(p[i]), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 8 * GRAN); /* pending, not yet passed */
    size_t fr, total;
    ck_assert_int_eq(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(fr, total); /* to the program they are free */
    ck_assert_int_eq(cuMemAlloc(&q, 512), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, GRAN);
}
END_TEST

START_TEST(vmm_keep_bounds_what_stays)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=8MiB", "GPUARENA_FREE_SYNC=device",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p[16];
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(cuMemAlloc(&p[i], GRAN), CUDA_SUCCESS);
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(cuMemFree(p[i]), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 8 * MiB);
    /* Reused at once: allocating 8 MiB again maps nothing. */
    unsigned long long creates = pt_counters().create_calls;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(cuMemAlloc(&p[i], GRAN), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().create_calls, creates);
}
END_TEST

/* The cap counts mapped physical bytes; an out-of-memory leaves nothing mapped that is not live. */
START_TEST(vmm_cap)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=16MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr a, b;
    ck_assert_int_eq(cuMemAlloc(&a, 10 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&b, 8 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_le(pt_counters().peak_vmm_bytes_in_use, 16 * MiB);
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 10 * MiB);
    size_t fr, total;
    ck_assert_int_eq(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(total, 16 * MiB);
    ck_assert_uint_eq(fr, 6 * MiB);
    ck_assert_int_eq(cuMemAlloc(&b, 6 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 16 * MiB);
}
END_TEST


/* Churn under a small cap: every out-of-memory makes the shim trim the pool and try again, and
 * address space stays bounded through thousands of those (it grew geometrically: 64 TiB of
 * reservations after 800 allocations under an 8 MiB cap, then minutes of refused reservations);
 * then blocks larger than the cap, refused without a reservation. */
START_TEST(vmm_churn_under_small_cap)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=8MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr big, live[64] = {0};
    ck_assert_int_eq(cuMemAlloc(&big, 3 * MiB), CUDA_SUCCESS);
    unsigned x = 1, ooms = 0;
    for (int i = 0; i < 20000; i++) {
        x = x * 1103515245u + 12345u;
        int slot = (int)((x >> 20) % 64);
        if (live[slot]) {
            ck_assert_int_eq(cuMemFree(live[slot]), CUDA_SUCCESS);
            live[slot] = 0;
        } else {
            CUresult r = cuMemAlloc(&live[slot], (size_t)512 << ((x >> 8) % 14));
            ck_assert(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY);
            if (r != CUDA_SUCCESS) {
                live[slot] = 0;
                ooms++;
            }
        }
    }
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_gt(ooms, 1000);
    ck_assert_uint_le(c.peak_vmm_bytes_in_use, 8 * MiB);
    ck_assert_uint_eq(c.injected_failures, 0);
    ck_assert_uint_le(c.reserve_calls, 16);           /* ranges of 16 MiB, twice the cap */
    ck_assert_uint_le(c.vmm_reserved_bytes, 256 * MiB); /* 4 of them here */
    /* Blocks beyond the cap can never be mapped: refused before any address space is taken
     * (they reserved their size, terabytes, with host bitmaps to match). */
    unsigned long long reserves = c.reserve_calls;
    CUdeviceptr huge;
    ck_assert_int_eq(cuMemAlloc(&huge, 64 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(cuMemAlloc(&huge, (size_t)1 << 46), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(pt_counters().reserve_calls, reserves);
    ck_assert_uint_le(pt_counters().vmm_reserved_bytes, 256 * MiB);
    for (int s = 0; s < 64; s++)
        if (live[s])
            ck_assert_int_eq(cuMemFree(live[s]), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(big), CUDA_SUCCESS);
}
END_TEST


/* The driver refuses address space once the pool has its first range: allocations that need more
 * fail as out of memory, and the refusal is reported once, with what to change, not once per try. */
static void va_refused_child(void *arg)
{
    (void)arg;
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=8MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr small, p;
    if (cuMemAlloc(&small, 4096) != CUDA_SUCCESS || pt_counters().reserve_calls != 1)
        exit(3);
    if (simcuda_fail_add("cuMemAddressReserve:2+") != 0)
        exit(4);
    for (int i = 0; i < 5; i++) /* a granule multiple: a second area, which needs a range */
        if (cuMemAlloc(&p, 2 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
            exit(5);
    if (pt_counters().injected_failures < 5)
        exit(6);
    if (cuMemFree(small) != CUDA_SUCCESS)
        exit(7);
}

START_TEST(vmm_address_space_refused)
{
    char err[8192];
    ck_assert_int_eq(pt_run_child(va_refused_child, NULL, err, sizeof err), 0);
    const char *first = strstr(err, "address space failed");
    ck_assert_msg(first, "no report of the refusal in:\n%s", err);
    ck_assert_msg(!strstr(first + 1, "address space failed"), "reported more than once:\n%s", err);
    ck_assert_msg(strstr(err, "GPUARENA_LIMIT") && strstr(err, "gpuarena: "), "%s", err);
    /* Its out-of-memory lines name the address space, not a full device (they blamed the device
     * when a range after the first was refused). */
    ck_assert_msg(strstr(err, "vmm's address space has no room for this block and the driver "
                              "refused to reserve more"), "%s", err);
    ck_assert_msg(!strstr(err, "the device itself is full"), "%s", err);
}
END_TEST


/* The driver refuses the first range's size (twice the cap: the simulated driver with 64 TiB of
 * memory cannot reserve 128 TiB): a smaller first range is taken and the program runs. */
START_TEST(vmm_first_range_smaller_when_refused)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_FAIL=cuMemAddressReserve:1", "SIMCUDA_TOTAL_MEM=1GiB",
           NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 3 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(p, 7, 3 * MiB), CUDA_SUCCESS);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.injected_failures, 1);
    ck_assert_uint_eq(c.reserve_calls, 2);
    ck_assert_uint_eq(c.vmm_reserved_bytes, 1 * GiB); /* half of twice the cap */
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
}
END_TEST

/* cuMemCreate (or cuMemMap) refused by the driver midway through an allocation that needs several
 * granules: an out-of-memory, and nothing leaked or half-mapped; the next allocation works. */
static void vmm_refused_midway(const char *rule)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "GPUARENA_FREE_SYNC=device",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(simcuda_fail_add(rule), 0);
    ck_assert_int_eq(cuMemAlloc(&p, 4 * GRAN), CUDA_ERROR_OUT_OF_MEMORY);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_uint_eq(c.vmm_mappings, 0);
    ck_assert_uint_eq(c.vmm_mapped_bytes, 0);
    simcuda_fail_clear();
    ck_assert_int_eq(cuMemAlloc(&p, 4 * GRAN), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(p, 7, 4 * GRAN), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 4 * GRAN);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 0);
}

START_TEST(vmm_create_refused_midway)
{
    vmm_refused_midway("cuMemCreate:3");
}
END_TEST

START_TEST(vmm_map_refused_midway)
{
    vmm_refused_midway("cuMemMap:2");
}
END_TEST

START_TEST(vmm_set_access_refused_midway)
{
    vmm_refused_midway("cuMemSetAccess:4");
}
END_TEST

/* The driver refuses to give a granule back. A refused cuMemUnmap left the granule mapped while
 * the pool saw it unmapped and its bytes left the cap: every later allocation that landed there
 * (any, with keep 0) failed as out of memory, for good. A refused cuMemRelease dropped the
 * handle: the memory stayed on the device outside the cap. Now such a granule stays counted
 * (cuMemGetInfo), a mapped one serves again where the pool next maps, and an unreleased one is
 * released at a later try; at the end the driver holds nothing. */
static void stuck_free_all(CUdeviceptr p)
{
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
}

START_TEST(vmm_unmap_refused_granule_kept)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "GPUARENA_FREE_SYNC=device",
           "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p, q;
    size_t fr, total;
    ck_assert_int_eq(cuMemAlloc(&p, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(simcuda_fail_add("cuMemUnmap:1"), 0);
    stuck_free_all(p);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.vmm_mappings, 1); /* the driver kept it mapped */
    ck_assert_int_eq(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(total - fr, GRAN); /* and it counts against the cap */
    for (int i = 0; i < 3; i++) { /* before: each failed as out of memory */
        ck_assert_int_eq(cuMemAlloc(&q, 4096), CUDA_SUCCESS);
        ck_assert_uint_eq(pt_counters().vmm_mappings, 1); /* the kept mapping serves */
        ck_assert_int_eq(cuMemsetD8(q, (unsigned char)(0x40 + i), 4096), CUDA_SUCCESS);
        unsigned char back[4096];
        ck_assert_int_eq(cuMemcpyDtoH(back, q, sizeof back), CUDA_SUCCESS);
        ck_assert_uint_eq(back[4095], 0x40 + i);
        stuck_free_all(q);
    }
    c = pt_counters();
    ck_assert_uint_eq(c.vmm_mappings, 0);
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_int_eq(cuMemAlloc(&q, 60 * MiB), CUDA_SUCCESS); /* the whole cap is there again */
    stuck_free_all(q);
    ck_assert_int_eq(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(fr, total);
}
END_TEST

START_TEST(vmm_release_refused_memory_counted)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "GPUARENA_FREE_SYNC=device",
           "GPUARENA_LIMIT=8MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    size_t fr, total;
    ck_assert_int_eq(cuMemAlloc(&p, 6 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(simcuda_fail_add("cuMemRelease:1+"), 0);
    stuck_free_all(p);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.vmm_mappings, 0);
    ck_assert_uint_eq(c.vmm_bytes_in_use, 6 * MiB); /* the driver still holds the memory ... */
    ck_assert_int_eq(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(total - fr, 6 * MiB); /* ... and so does the cap */
    for (int i = 0; i < 4; i++) { /* before: 30 MiB on the device under an 8 MiB cap */
        ck_assert_int_eq(cuMemAlloc(&p, 4 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* 2 MiB left */
        ck_assert_uint_le(pt_counters().vmm_bytes_in_use, 8 * MiB);
    }
    simcuda_fail_clear();
    ck_assert_int_eq(cuMemAlloc(&p, 6 * MiB), CUDA_SUCCESS); /* the next try releases them */
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 6 * MiB);
    stuck_free_all(p);
    c = pt_counters();
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_int_eq(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(fr, total);
}
END_TEST

/* A release the driver refuses until after the context is destroyed: the handle stays counted on
 * the device's list and a later context's first mapping releases it (it was kept by the dead
 * context alone, never tried again, its 2 MiB of the cap lost until exit), and the out-of-memory
 * line meanwhile names what refused granules hold (it said "raise GPUARENA_LIMIT"). */
static void refused_past_destroy_child(void *arg)
{
    (void)arg;
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "GPUARENA_FREE_SYNC=device",
           "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdevice dev;
    CUcontext c2, c3;
    CUdeviceptr p;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate(&c2, NULL, 0, dev) || cuMemAlloc(&p, MiB))
        exit(3);
    if (simcuda_fail_add("cuMemRelease:1+") != 0 || cuMemFree(p) != CUDA_SUCCESS)
        exit(4);
    if (cuCtxDestroy(c2) != CUDA_SUCCESS || pt_counters().vmm_bytes_in_use != GRAN)
        exit(5); /* the driver holds it still */
    if (cuCtxCreate(&c3, NULL, 0, dev) != CUDA_SUCCESS)
        exit(6);
    if (cuMemAlloc(&p, 64 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(7); /* 2 MiB of the cap held */
    simcuda_fail_clear();
    if (cuMemAlloc(&p, 64 * MiB) != CUDA_SUCCESS)
        exit(8); /* released at this mapping: the whole cap again */
    if (cuMemFree(p) != CUDA_SUCCESS || cuCtxDestroy(c3) != CUDA_SUCCESS)
        exit(9);
    simcuda_counters_t c = pt_counters();
    if (c.vmm_bytes_in_use != 0 || c.vmm_mappings != 0)
        exit(10);
}

START_TEST(vmm_release_refused_past_destroy)
{
    char err[8192];
    ck_assert_int_eq(pt_run_child(refused_past_destroy_child, NULL, err, sizeof err), 0);
    /* (The refused 64 MiB attempt's own granules were refused their release too: all named.) */
    ck_assert_msg(strstr(err, "of it are granules the driver refused to unmap or release"), "%s",
                  err);
}
END_TEST

/* A driver that refuses granules for another reason than memory: the out-of-memory line names
 * its code and the way out, not a full device (it said "the device itself is full"). */
static void not_supported_child(void *arg)
{
    (void)arg;
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_FAIL=cuMemCreate:1+:CUDA_ERROR_NOT_SUPPORTED",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    if (cuMemAlloc(&p, 1000) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(3);
}

/* A device without virtual memory management (its attribute says so): vmm refuses at once with
 * CUDA_ERROR_NOT_SUPPORTED and says which attribute, and which modes to use. */
static void no_vmm_child(void *arg)
{
    (void)arg;
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_VMM=0", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    if (cuMemAlloc(&p, 1000) != CUDA_ERROR_NOT_SUPPORTED)
        exit(3);
    if (pt_counters().create_calls != 0)
        exit(4); /* the driver was never asked for memory */
}

/* One failed granularity query (out of memory, say): that allocation fails with the driver's own
 * code, the next one asks again and works; vmm is not called unsupported. */
static void granularity_once_child(void *arg)
{
    (void)arg;
    pt_env("GPUARENA_MODE=vmm",
           "SIMCUDA_FAIL=cuMemGetAllocationGranularity:1:CUDA_ERROR_OUT_OF_MEMORY",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    if (cuMemAlloc(&p, 1000) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(3);
    if (cuMemAlloc(&p, 1000) != CUDA_SUCCESS || pt_counters().create_calls != 1)
        exit(4);
    if (cuMemFree(p) != CUDA_SUCCESS)
        exit(5);
}

START_TEST(vmm_driver_refusals_named)
{
    char err[8192];
    ck_assert_int_eq(pt_run_child(not_supported_child, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "refused the granule's cuMemCreate/cuMemMap/cuMemSetAccess with "
                              "CUresult 801, not for lack of memory") &&
                      strstr(err, "use GPUARENA_MODE=arena or grow"), "%s", err);
    ck_assert_msg(!strstr(err, "the device itself is full"), "%s", err);
    ck_assert_int_eq(pt_run_child(no_vmm_child, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "gpuarena: GPUARENA_MODE=vmm: device 0 does not support virtual "
                              "memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_"
                              "SUPPORTED is 0"), "%s", err);
    ck_assert_int_eq(pt_run_child(granularity_once_child, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "could not be read (cuMemGetAllocationGranularity: CUresult 2); this "
                              "allocation fails with that code and the next one asks again"),
                  "%s", err);
    ck_assert_msg(!strstr(err, "gives no usable allocation granularity"), "%s", err);
}
END_TEST

START_TEST(vmm_queries)
{
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr a, b, base = 0;
    size_t size = 0;
    ck_assert_int_eq(cuMemAlloc(&a, 3000), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&b, 5 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemGetAddressRange(&base, &size, b + 12345), CUDA_SUCCESS);
    ck_assert_uint_eq(base, b);
    ck_assert_uint_eq(size, 5 * MiB);
    CUdeviceptr start = 0;
    ck_assert_int_eq(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 100),
                     CUDA_SUCCESS);
    ck_assert_uint_eq(start, a);
    /* The block's context, as arena mode and a plain cuMemAlloc answer (the driver knows no
     * context for a vmm mapping: it answered NULL), through both entry points. */
    CUcontext cur = NULL, owner = NULL, owner2 = NULL;
    ck_assert_int_eq(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    ck_assert_ptr_nonnull(cur);
    ck_assert_int_eq(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, b + 77),
                     CUDA_SUCCESS);
    ck_assert_ptr_eq(owner, cur);
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    size_t whole = 0;
    void *out[2] = {&owner2, &whole};
    ck_assert_int_eq(cuPointerGetAttributes(2, attrs, out, a), CUDA_SUCCESS);
    ck_assert_ptr_eq(owner2, cur);
    ck_assert_uint_eq(whole, 3072);
    CUipcMemHandle h;
    ck_assert_int_eq(cuIpcGetMemHandle(&h, a), CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemGetAddressRange(&base, &size, a), CUDA_ERROR_NOT_FOUND);
    unsigned type = 0;
    ck_assert_int_eq(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemFree(a), CUDA_ERROR_INVALID_VALUE); /* a double free is refused */
}
END_TEST

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

TCase *pt_tcase_vmm(void)
{
    TCase *tc = tcase_create("vmm");
    tcase_add_test(tc, vmm_direct_integrity);
    tcase_add_loop_test(tc, vmm_info_free_can_be_mapped, 0, 2);
    tcase_add_test(tc, vmm_info_free_after_a_small_block);
    tcase_add_test(tc, vmm_dlsym_integrity);
    tcase_add_test(tc, vmm_getproc_integrity);
    tcase_add_test(tc, vmm_granules_given_back);
    tcase_add_test(tc, vmm_granules_deferred);
    tcase_add_test(tc, vmm_keep_bounds_what_stays);
    tcase_add_test(tc, vmm_cap);
    tcase_add_test(tc, vmm_create_refused_midway);
    tcase_add_test(tc, vmm_map_refused_midway);
    tcase_add_test(tc, vmm_set_access_refused_midway);
    tcase_add_test(tc, vmm_queries);
    tcase_add_test(tc, vmm_unmap_refused_granule_kept);
    tcase_add_test(tc, vmm_driver_refusals_named);
    tcase_add_test(tc, vmm_release_refused_past_destroy);
    tcase_add_test(tc, vmm_release_refused_memory_counted);
    tcase_add_test(tc, vmm_ctx_destroy_takes_range);
    tcase_add_test(tc, vmm_primary_reset_takes_range);
    tcase_add_test(tc, vmm_threads);
    tcase_add_test(tc, vmm_fork);
    tcase_add_test(tc, vmm_churn_under_small_cap);
    tcase_add_test(tc, vmm_address_space_refused);
    tcase_add_test(tc, vmm_ctx_destroy_keeps_async_blocks);
    tcase_add_test(tc, vmm_primary_reset_keeps_async_blocks);
    tcase_add_test(tc, vmm_destroy_waits_for_frees_on_other_contexts);
    tcase_add_test(tc, vmm_first_range_smaller_when_refused);
    tcase_add_test(tc, vmm_peer_access_reaches_granules);
    tcase_add_test(tc, vmm_peer_access_disabled);
    tcase_add_test(tc, vmm_blocks_rdma_capable);
    tcase_add_test(tc, vmm_block_mempool_attr_as_cumemalloc);
    return tc;
}
