/* Preload tests: contexts and the fence (issue 13, README "Freed memory and streams").
 *  - A free passes a context inside its teardown by: its lock is held through the driver's call.
 * Each scenario runs in a child (pt_run_child) and answers with its exit status.
 */
#include "t_stream.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- a free passes a context inside its teardown by ----
 * P (the primary context) holds block a; X, made after it, allocates; Y, made last, only is. A
 * thread destroys X, held inside the driver's call (simcuda_hold_next_ctx_teardown), which holds
 * X's lock through it; a third thread with Y current frees a. The free must not wait for X's
 * teardown: the gate opens only after it returned (the alarm ends the child otherwise). The free
 * asked the contexts in the list's order, newest first, and waited for X's lock: Y had no state
 * and the thread no cached context, so X came first (an outside check of this session). */
static CUcontext fc_x, fc_y;
static CUdeviceptr fc_a;
static CUresult fc_destroy_r = CUDA_ERROR_UNKNOWN, fc_free_r = CUDA_ERROR_UNKNOWN;

static void *fc_destroy(void *arg)
{
    (void)arg;
    fc_destroy_r = cuCtxDestroy(fc_x);
    return NULL;
}

static void *fc_free(void *arg)
{
    (void)arg;
    fc_free_r = cuCtxSetCurrent(fc_y);
    if (fc_free_r == CUDA_SUCCESS)
        fc_free_r = cuMemFree(fc_a);
    return NULL;
}

static void closing_free_child(void *arg)
{
    (void)arg;
    alarm(20);
    CUcontext p = pt_start();
    CUdevice dev;
    CUdeviceptr xb;
    unsigned gate;
    pthread_t td, tf;
    if (cuDeviceGet(&dev, 0) || cuMemAlloc(&fc_a, N) || cuCtxCreate(&fc_x, NULL, 0, dev) ||
        cuMemAlloc(&xb, N) || cuCtxCreate(&fc_y, NULL, 0, dev) || cuCtxSetCurrent(p))
        exit(2);
    if (simcuda_hold_next_ctx_teardown(&gate) != CUDA_SUCCESS)
        exit(3);
    unsigned long long n0 = simcuda_entry_calls("cuCtxDestroy_v2");
    if (pthread_create(&td, NULL, fc_destroy, NULL))
        exit(3);
    while (simcuda_entry_calls("cuCtxDestroy_v2") == n0)
        sched_yield(); /* the driver's cuCtxDestroy(X) is under way */
    if (pthread_create(&tf, NULL, fc_free, NULL))
        exit(3);
    pthread_join(tf, NULL);
    simcuda_gate_open(gate);
    pthread_join(td, NULL);
    exit(fc_free_r != CUDA_SUCCESS ? 10 : fc_destroy_r != CUDA_SUCCESS ? 11 : 0);
}

START_TEST(free_passes_a_closing_context)
{
    static const char *const modes[] = PT_ALL_MODES;
    for (int m = 0; m < 4; m++) {
        char err[4096];
        pt_env(modes[m], "GPUARENA_LIMIT=512MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(closing_free_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (142, SIGALRM: the free of the primary context's block "
                      "waited for another context's teardown; 10: the free failed, 11: the "
                      "destroy); %s", modes[m], rc, err);
    }
}
END_TEST

TCase *pt_tcase_stream_kernelctx(void)
{
    TCase *tc = tcase_create("stream_kernelctx");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, free_passes_a_closing_context);
    return tc;
}
