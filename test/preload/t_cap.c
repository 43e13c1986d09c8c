/* Preload tests: the cap (GPUARENA_LIMIT) in both modes, pass-through allocations counted toward
 * it, and cuMemGetInfo's virtual view. The driver's exact peak proves the cap was never exceeded.
 */
#include "preload_test.h"

static void pt_cap_holds(const char *mode)
{
    pt_env(mode, "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    size_t free = 0, total = 0;
    ck_assert_int_eq(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(total, 64 * MiB);
    ck_assert_uint_eq(free, 64 * MiB);
    CUdeviceptr p[16];
    int got = 0;
    for (int i = 0; i < 16; i++)
        got += cuMemAlloc(&p[i], 6 * MiB) == CUDA_SUCCESS;
    ck_assert_int_ge(got, 8);
    ck_assert_int_le(got, 10);
    CUdeviceptr q;
    ck_assert_int_eq(cuMemAlloc(&q, 65 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_le(pt_counters().peak_bytes_in_use, 64 * MiB);
    ck_assert_int_eq(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    ck_assert_uint_le(free, 64 * MiB - (size_t)got * 6 * MiB);
}

START_TEST(cap_arena)
{
    pt_cap_holds("GPUARENA_MODE=arena");
}
END_TEST

START_TEST(cap_platform)
{
    pt_cap_holds("GPUARENA_MODE=platform");
}
END_TEST

START_TEST(cap_never_above_physical)
{
    pt_env("GPUARENA_LIMIT=100GiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    size_t free = 0, total = 0;
    ck_assert_int_eq(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(total, 1 * GiB);
    ck_assert_uint_le(free, 1 * GiB);
}
END_TEST

START_TEST(cap_percent)
{
    pt_env("GPUARENA_LIMIT=25%", "GPUARENA_MODE=platform", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    size_t free = 0, total = 0;
    ck_assert_int_eq(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(total, 256 * MiB);
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 257 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(cuMemAlloc(&p, 255 * MiB), CUDA_SUCCESS);
}
END_TEST

START_TEST(meminfo_free_tracks_use)
{
    pt_env("GPUARENA_LIMIT=256MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    size_t free = 0, total = 0;
    ck_assert_int_eq(cuMemAlloc(&p, 16 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(total, 256 * MiB);
    ck_assert_uint_eq(free, 240 * MiB); /* the preallocated arena's free bytes still count as free */
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(free, 256 * MiB);
    ck_assert_int_eq(cuMemGetInfo(NULL, &total), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemGetInfo(&free, NULL), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(passthrough_counts_toward_cap)
{
    pt_env("GPUARENA_MODE=platform", "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr m, a, p, x;
    ck_assert_int_eq(cuMemAllocManaged(&m, 20 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocAsync(&a, 20 * MiB, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&p, 20 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocAsync(&x, 8 * MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(cuMemAllocManaged(&x, 8 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    ck_assert_int_eq(cuMemCreate(&h, 8 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_le(pt_counters().peak_bytes_in_use, 64 * MiB);
    /* Freeing pass-through memory gives the bytes back to the cap. */
    ck_assert_int_eq(cuMemFreeAsync(a, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemRelease(h), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(m), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocAsync(&x, 40 * MiB, NULL), CUDA_SUCCESS);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.async_alloc_calls, 2); /* the refused one never reached the driver */
    ck_assert_uint_eq(c.managed_alloc_calls, 1);
    ck_assert_uint_eq(c.create_calls, 1);
    ck_assert_uint_le(c.peak_bytes_in_use, 64 * MiB);
}
END_TEST

TCase *pt_tcase_cap(void)
{
    TCase *tc = tcase_create("cap");
    tcase_add_test(tc, cap_arena);
    tcase_add_test(tc, cap_platform);
    tcase_add_test(tc, cap_never_above_physical);
    tcase_add_test(tc, cap_percent);
    tcase_add_test(tc, meminfo_free_tracks_use);
    tcase_add_test(tc, passthrough_counts_toward_cap);
    return tc;
}
