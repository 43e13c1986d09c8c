/* Preload tests: hostile sizes and arguments from an outside re-test of issue 8 (helper-90,
 * 2026-12-06), each a fault that passed before its fix. */
#include "preload_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const modes[] = PT_ALL_MODES;

/* ---- a size of 2^63 bytes or more never lowers what the cap counts ---- */

static CUcontext huge_ctx;
static atomic_int huge_stop;

/* Asks, again and again, for sizes the cap refuses at once: SIZE_MAX less a little under the cap
 * (a negative number as a signed count) through the two pass-through entry points. */
static void *huge_asker(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(huge_ctx);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t managed = (size_t)0 - 64 * MiB, handle = (size_t)0 - 64 * MiB; /* granule multiples */
    for (unsigned i = 0; !atomic_load(&huge_stop); i++) {
        CUdeviceptr p;
        CUmemGenericAllocationHandle h;
        if (i & 1)
            cuMemAllocManaged(&p, managed, CU_MEM_ATTACH_GLOBAL);
        else
            cuMemCreate(&h, handle, &prop, 0);
    }
    return NULL;
}

static void huge_child(void *arg)
{
    (void)arg;
    huge_ctx = pt_start();
    CUdeviceptr held, p;
    if (cuMemAllocManaged(&held, 60 * MiB, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS)
        exit(2);
    pthread_t t;
    if (pthread_create(&t, NULL, huge_asker, NULL))
        exit(3);
    int passed = 0;
    for (int i = 0; i < 400000 && !passed; i++) /* 60 + 60 MiB never fit under 64 MiB */
        if (cuMemAllocManaged(&p, 60 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS)
            passed = i + 1;
    atomic_store(&huge_stop, 1);
    pthread_join(t, NULL);
    if (passed) {
        fprintf(stderr, "60 MiB more served at attempt %d\n", passed);
        exit(4);
    }
    if (simcuda_device_peak_all(0) > 64 * MiB) {
        fprintf(stderr, "the driver held %llu bytes\n", simcuda_device_peak_all(0));
        exit(5);
    }
    exit(0);
}

/* Added to the count before it was compared, a size of 2^63 bytes or more is a negative int64 and
 * lowered the process's committed bytes until it was taken back: another thread's allocation in
 * that moment passed the cap (120 MiB held under 64 MiB within a few hundred tries, every mode). */
START_TEST(huge_size_never_lowers_the_cap)
{
    pt_env(modes[_i], "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LOG=error", NULL);
    char err[4096];
    int status = pt_run_child(huge_child, NULL, err, sizeof err);
    ck_assert_msg(status == 0, "%s: exit %d: %s", modes[_i], status, err);
}
END_TEST

TCase *pt_tcase_hostile(void)
{
    TCase *tc = tcase_create("hostile");
    tcase_add_loop_test(tc, huge_size_never_lowers_the_cap, 0, sizeof modes / sizeof *modes);
    return tc;
}
