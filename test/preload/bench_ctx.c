/* bench-ctx: what the shim adds to the calls that make a context current, which meet the context
 * (shim/meet.c, ctx.c): cuCtxSetCurrent of the current context again, a cuCtxPushCurrent +
 * cuCtxPopCurrent pair, and cuCtxSetCurrent alternating between two contexts (each call finds the
 * other context's state). The null driver (bench_nulldrv.c) answers in a few ns, so the
 * difference between the run without the shim and the run under it (make bench-ctx runs both) is
 * the shim's. Best of ROUNDS runs of N calls each, thread CPU time; nothing is asserted. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 2000000
#define ROUNDS 5

/* cuda.h names the newest form; the null driver has this one. */
extern CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(void)
{
    CUcontext a, b, out;
    CUdevice d;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&a, d) || cuCtxSetCurrent(a) ||
        cuMemAlloc(&p, 4096) || cuCtxCreate_v2(&b, 0, d) || cuMemAlloc(&p, 4096) ||
        cuCtxSetCurrent(a)) {
        fprintf(stderr, "bench-ctx: set-up failed\n");
        return 1;
    }
    double best[3] = {1e18, 1e18, 1e18};
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < N; i++)
            cuCtxSetCurrent(a);
        double t1 = now_ns();
        for (int i = 0; i < N; i++) {
            cuCtxPushCurrent(a);
            cuCtxPopCurrent(&out);
        }
        double t2 = now_ns();
        for (int i = 0; i < N; i++)
            cuCtxSetCurrent(i & 1 ? a : b);
        double t3 = now_ns();
        double v[3] = {(t1 - t0) / N, (t2 - t1) / N, (t3 - t2) / N};
        for (int k = 0; k < 3; k++)
            best[k] = v[k] < best[k] ? v[k] : best[k];
    }
    const char *shim = getenv("LD_PRELOAD");
    printf("| %s | %.1f | %.1f | %.1f |\n", shim && *shim ? "under the shim (arena)" : "driver alone",
           best[0], best[1], best[2]);
    return 0;
}
