/* Findings of an outside check of the merged shim work of 2026-12-07 (helper-116), each a test
 * that failed before its fix. */
#include "preload_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A block from a device's default pool costs no driver call to find the pool's device: every
 * cuMemAllocFromPoolAsync on a machine with several devices asked cuDeviceGetCount and
 * cuDeviceGetDefaultMemPool of each device up to the pool's (100 blocks from device 1's default
 * pool on two devices: 100 cuDeviceGetCount and 200 cuDeviceGetDefaultMemPool). The child exits
 * with the driver calls the 100 blocks made beyond the first block's (or 250+ on a failed call). */
static void o116_default_pool_child(void *arg)
{
    int pdev = (int)(intptr_t)arg;
    CUdevice d0, d1;
    CUcontext c;
    CUstream s;
    CUmemoryPool pool;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&d0, 0) || cuDeviceGet(&d1, 1) || cuDevicePrimaryCtxRetain(&c, d0) ||
        cuCtxSetCurrent(c) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
        cuDeviceGetDefaultMemPool(&pool, pdev ? d1 : d0))
        exit(250);
    if (cuMemAllocFromPoolAsync(&p, 4096, pool, s) || cuMemFreeAsync(p, s))
        exit(251);
    unsigned long long a = simcuda_entry_calls("cuDeviceGetDefaultMemPool") +
                           simcuda_entry_calls("cuDeviceGetCount");
    for (int i = 0; i < 100; i++)
        if (cuMemAllocFromPoolAsync(&p, 4096, pool, s) || cuMemFreeAsync(p, s))
            exit(252);
    if (cuStreamSynchronize(s))
        exit(253);
    unsigned long long n = simcuda_entry_calls("cuDeviceGetDefaultMemPool") +
                           simcuda_entry_calls("cuDeviceGetCount") - a;
    exit(n < 249 ? (int)n : 249);
}

START_TEST(default_pool_device_asked_once)
{
    static const char *const modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=platform"};
    char err[8192];
    for (int m = 0; m < 2; m++)
        for (int pdev = 0; pdev < 2; pdev++) {
            pt_env(modes[m], "SIMCUDA_DEVICES=2", "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
            int rc = pt_run_child(o116_default_pool_child, (void *)(intptr_t)pdev, err, sizeof err);
            ck_assert_msg(rc < 250, "%s, device %d's default pool: exit %d: %s", modes[m], pdev, rc,
                          err);
            ck_assert_msg(rc == 0, "%s: 100 cuMemAllocFromPoolAsync from device %d's default pool "
                          "made %d cuDeviceGetCount/cuDeviceGetDefaultMemPool calls after the first "
                          "(249: more)", modes[m], pdev, rc);
        }
}
END_TEST

TCase *pt_tcase_outside116(void)
{
    TCase *tc = tcase_create("outside116");
    tcase_add_test(tc, default_pool_device_asked_once);
    return tc;
}
