/* Findings left open by outside checks of the shim, fixed by helper-118 (2026-12-07): each a test
 * that failed before its fix. */
#include "preload_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An allocation that lets its context's lock go to wait for the device (cuMemFree's pending chunks,
 * synchronised before reuse) looked only at the state's `dead` when it took the lock again. Its
 * context A is destroyed while the wait is held inside the driver, and context B made on the same
 * device takes A's state (ga_ctx_reuse) and allocates: the waiting cuMemAlloc of A was served from
 * B's pool, a success in a destroyed context whose block B's pool and cap counted (B's statistics
 * showed an allocation B never made). Now it is refused as the destroyed context's
 * (CUDA_ERROR_CONTEXT_IS_DESTROYED), and B's pool holds B's block alone. Exit 0 when so; 10 + the
 * code the waiting call answered otherwise. */
static CUcontext o118_a;
static CUresult o118_r = (CUresult)-1;
static CUdeviceptr o118_p;

static void *o118_alloc(void *arg)
{
    (void)arg;
    if (cuCtxSetCurrent(o118_a) != CUDA_SUCCESS)
        return NULL;
    o118_r = cuMemAlloc(&o118_p, MiB); /* waits for A's pending free: held in cuCtxSynchronize */
    return NULL;
}

static void reused_state_child(void *arg)
{
    (void)arg;
    CUdevice d0;
    CUcontext p0, b;
    CUdeviceptr q;
    unsigned gate;
    if (cuInit(0) || cuDeviceGet(&d0, 0) || cuDevicePrimaryCtxRetain(&p0, d0) || cuCtxSetCurrent(p0) ||
        cuMemAlloc(&q, MiB) || cuMemFree(q) || /* the first context: it keeps the level, never reused */
        cuCtxCreate(&o118_a, NULL, 0, d0) || cuMemAlloc(&q, MiB) || cuMemFree(q) || /* pending in A */
        simcuda_hold_next_ctx_sync(&gate))
        exit(2);
    pthread_t t;
    if (pthread_create(&t, NULL, o118_alloc, NULL))
        exit(3);
    while (!simcuda_ctx_sync_held(gate))
        sched_yield(); /* A's lock let go, its allocation waiting inside the driver */
    if (cuCtxDestroy(o118_a) || cuCtxCreate(&b, NULL, 0, d0) || cuMemAlloc(&q, MiB))
        exit(4); /* B: A's state, reused, with a pool of its own */
    unsigned long long before = simcuda_device_bytes_in_use(0);
    simcuda_gate_open(gate);
    pthread_join(t, NULL);
    if (o118_r != CUDA_ERROR_CONTEXT_IS_DESTROYED) {
        fprintf(stderr, "the waiting cuMemAlloc of destroyed context A answered %d (a block %#llx "
                "of B's pool: %s)\n", (int)o118_r, (unsigned long long)o118_p,
                o118_r == CUDA_SUCCESS ? "yes" : "no");
        exit(10 + (int)o118_r);
    }
    if (cuMemFree(q) || simcuda_device_bytes_in_use(0) != before || cuCtxDestroy(b))
        exit(5);
    exit(0);
}

START_TEST(realloc_after_wait_not_in_a_reused_state)
{
    static const char *const modes[] = PT_POOL_MODES;
    char err[4096];
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        pt_env(modes[m], "GPUARENA_LIMIT=256MiB", "GPUARENA_LOG=error", NULL);
        int st = pt_run_child(reused_state_child, NULL, err, sizeof err);
        ck_assert_msg(st == 0, "%s: exit %d: %s", modes[m], st, err);
    }
}
END_TEST

TCase *pt_tcase_outside118(void)
{
    TCase *tc = tcase_create("outside118");
    tcase_add_test(tc, realloc_after_wait_not_in_a_reused_state);
    return tc;
}
