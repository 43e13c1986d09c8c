/* test-sim, fault injection: SIMCUDA_FAIL and simcuda_fail_add make chosen calls fail, counted per
 * exported entry point, and a failed call changes nothing but the counters.
 */
#include "test_sim.h"

#include <stdlib.h>
#include <string.h>

START_TEST(fail_from_environment)
{
    setenv("SIMCUDA_FAIL", "cuMemAlloc_v2:2,cuMemCreate:1:CUDA_ERROR_INVALID_DEVICE", 1);
    ts_start();
    CUdeviceptr a = 0, b = 0, c = 0;
    CK(cuMemAlloc(&a, 4096));
    ck_assert_int_eq(cuMemAlloc(&b, 4096), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_uint_eq(b, 0); /* nothing written: the call failed before looking at its arguments */
    CK(cuMemAlloc(&c, 4096));
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h;
    ck_assert_int_eq(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
    CK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    simcuda_counters_t n = ts_counters();
    ck_assert_uint_eq(n.alloc_calls, 3);
    ck_assert_uint_eq(n.create_calls, 2);
    ck_assert_uint_eq(n.failed_allocs, 2);
    ck_assert_uint_eq(n.injected_failures, 2);
    ck_assert_uint_eq(n.bytes_in_use, 2 * 4096 + 2 * MiB);
    ck_assert_uint_eq(simcuda_entry_calls("cuMemAlloc_v2"), 3);
    ck_assert_uint_eq(simcuda_entry_calls("cuMemCreate"), 2);
}
END_TEST

START_TEST(fail_and_later)
{
    setenv("SIMCUDA_FAIL", "cuMemFree_v2:2+:2", 1);
    ts_start();
    CUdeviceptr p[3];
    for (int i = 0; i < 3; i++)
        CK(cuMemAlloc(&p[i], 1000));
    CK(cuMemFree(p[0]));
    ck_assert_int_eq(cuMemFree(p[1]), 2);
    ck_assert_int_eq(cuMemFree(p[2]), 2);
    ck_assert_int_eq(cuMemFree(p[2]), 2);
    ck_assert_uint_eq(ts_counters().bytes_in_use, 2000); /* the refused frees freed nothing */
    ck_assert_uint_eq(ts_counters().injected_failures, 3);
}
END_TEST

/* Rules added from a test count calls since start; reset restarts the counts, clear drops rules. */
START_TEST(fail_from_api)
{
    ts_start();
    size_t f, t;
    CK(cuMemGetInfo(&f, &t));
    ck_assert_int_eq(simcuda_fail_add("cuMemGetInfo_v2:2:CUDA_ERROR_NOT_PERMITTED"), 0);
    ck_assert_int_eq(cuMemGetInfo(&f, &t), CUDA_ERROR_NOT_PERMITTED);
    CK(cuMemGetInfo(&f, &t));
    ck_assert_uint_eq(simcuda_entry_calls("cuMemGetInfo_v2"), 3);
    ck_assert_uint_eq(ts_counters().meminfo_calls, 3);
    simcuda_reset_counters();
    ck_assert_uint_eq(simcuda_entry_calls("cuMemGetInfo_v2"), 0);
    CK(cuMemGetInfo(&f, &t));
    ck_assert_int_eq(cuMemGetInfo(&f, &t), CUDA_ERROR_NOT_PERMITTED);
    simcuda_reset_counters();
    simcuda_fail_clear();
    CK(cuMemGetInfo(&f, &t));
    CK(cuMemGetInfo(&f, &t));
    ck_assert_uint_eq(ts_counters().injected_failures, 0);
    ck_assert_uint_eq(simcuda_entry_calls("cuNoSuchCall"), 0);
    ck_assert_uint_eq(simcuda_entry_calls(NULL), 0);
}
END_TEST

/* Each variant is its own entry point: a rule on one never fires through another. */
START_TEST(fail_per_variant)
{
    ck_assert_int_eq(simcuda_fail_add("cuMemcpyHtoD_v2:1,cuInit:1:CUDA_ERROR_NO_DEVICE"), 0);
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
    ts_start();
    CUdeviceptr d;
    CK(cuMemAlloc(&d, 64));
    char in[64], out[64];
    memset(in, 7, sizeof in);
    memset(out, 0, sizeof out);
    CK(cuMemsetD8(d, 0, 64));
    ck_assert_int_eq(cuMemcpyHtoD_v2(d, in, sizeof in), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemcpyDtoH(out, d, sizeof out));
    ck_assert_int_eq(out[0], 0); /* the refused copy wrote nothing */
    CUresult (*ptds)(CUdeviceptr, const void *, size_t) = ts_sym("cuMemcpyHtoD_v2_ptds");
    CK(ptds(d, in, sizeof in));
    CK(cuMemcpyHtoD_v2(d, in, sizeof in));
    ck_assert_uint_eq(simcuda_entry_calls("cuMemcpyHtoD_v2"), 2);
    ck_assert_uint_eq(simcuda_entry_calls("cuMemcpyHtoD_v2_ptds"), 1);
    CUcontext ctx;
    CK(cuCtxCreate(&ctx, NULL, 0, 0));
    CUresult (*destroy_v1)(CUcontext) = ts_sym("cuCtxDestroy");
    CK(destroy_v1(ctx));
    ck_assert_uint_eq(simcuda_entry_calls("cuCtxDestroy"), 1);
    ck_assert_uint_eq(simcuda_entry_calls("cuCtxDestroy_v2"), 0);
}
END_TEST

START_TEST(fail_bad_specs)
{
    static const char *bad[] = {
        "", "cuNoSuch:1", "cuMemAlloc_v2", "cuMemAlloc_v2:", "cuMemAlloc_v2:0", "cuMemAlloc_v2:x",
        "cuMemAlloc_v2:-1", "cuMemAlloc_v2:1:CUDA_ERROR_NOPE", "cuMemAlloc_v2:1:0", "cuMemAlloc_v2:1junk",
        "cuMemAlloc_v2:1:", "cuDeviceTotalMem:1", "cuMemAlloc_v2:99999999999999999999",
        "cuMemAlloc_v2:1,,cuMemFree_v2:1", "cuMemAlloc_v2:1:CUDA_SUCCESS",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(simcuda_fail_add(bad[i]) == -1, "'%s' should be refused", bad[i]);
    ck_assert_int_eq(simcuda_fail_add(NULL), -1);
    /* one bad item: nothing of the spec is added */
    ck_assert_int_eq(simcuda_fail_add("cuMemAlloc_v2:1,cuBogus:2"), -1);
    ts_start();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 512));
    ck_assert_uint_eq(ts_counters().injected_failures, 0);
}
END_TEST

START_TEST(fail_bad_environment)
{
    setenv("SIMCUDA_FAIL", "cuMemAlloc_v2:two", 1);
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

TCase *ts_tcase_fault(void)
{
    TCase *tc = tcase_create("fault");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fail_from_environment);
    tcase_add_test(tc, fail_and_later);
    tcase_add_test(tc, fail_from_api);
    tcase_add_test(tc, fail_per_variant);
    tcase_add_test(tc, fail_bad_specs);
    tcase_add_test(tc, fail_bad_environment);
    return tc;
}
