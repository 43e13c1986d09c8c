/* An outside check of issues 3 and 5 (the shim on every path and mode; hardening and the OOM
 * explainer): the findings that check made, each a test that failed before its fix. */
#include "preload_test.h"

#include <string.h>

/* A block larger than the device's whole memory, under a cap below the device: no cap can hold
 * it, yet the out-of-memory said "raise GPUARENA_LIMIT or use less" (every mode, and for memory
 * the driver allocates, cuMemAllocManaged). The fix it names must be one that works: only less. */
static void pt_past_device_child(void *arg)
{
    int managed = *(const int *)arg;
    pt_start();
    CUdeviceptr p = 0;
    CUresult r = managed ? cuMemAllocManaged(&p, 2 * GiB, CU_MEM_ATTACH_GLOBAL) : cuMemAlloc(&p, 2 * GiB);
    exit(r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 2);
}

START_TEST(oom_past_the_device_names_no_cap_to_raise)
{
    static const char *const modes[] = PT_ALL_MODES;
    int managed = _i / 4;
    pt_env(modes[_i % 4], "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=256MiB", NULL);
    char err[8192];
    int status = pt_run_child(pt_past_device_child, &managed, err, sizeof err);
    ck_assert_msg(status == 0, "%s managed=%d: exit %d: %s", modes[_i % 4], managed, status, err);
    ck_assert_msg(strstr(err, "gpuarena: out of memory: "), "said: %s", err);
    ck_assert_msg(!strstr(err, "GPUARENA_LIMIT"), "%s managed=%d: no cap could hold it, none to "
                  "raise: %s", modes[_i % 4], managed, err);
    ck_assert_msg(strstr(err, "larger than the device's whole memory, 1.00 GiB"),
                  "%s managed=%d: the bound named: %s", modes[_i % 4], managed, err);
}
END_TEST

TCase *pt_tcase_outside3(void)
{
    TCase *tc = tcase_create("outside3");
    tcase_add_loop_test(tc, oom_past_the_device_names_no_cap_to_raise, 0, 8);
    return tc;
}
