/* bench-free: what making freed memory safe costs (issue "Stream-ordered safety").
 *
 * The program re-runs itself under LD_PRELOAD of the shim on the simulated driver, once per
 * configuration, and prints a markdown table of ns per operation (thread CPU time, best of 3):
 *  - cuMemFree+cuMemAlloc pairs (1 MiB, 16 live) in arena mode with GPUARENA_FREE_SYNC=none,
 *    deferred, lazy and device, with the device idle (the synchronisation finds nothing queued, so this
 *    is the bookkeeping's cost: on a GPU a synchronisation also waits for queued work, which the
 *    driver's own cuMemFree waits for too), and the same driver without the shim;
 *  - cuMemAllocAsync+cuMemFreeAsync pairs on one stream: gpuarena's stream-ordered pool (arena)
 *    against the driver's own (platform mode passes them through; the simulated driver's pool is a
 *    host allocation per call).
 *  - a step of a program that overlaps with the device: per step, BUSY_US of CPU work (a spin,
 *    standing for the framework's own), a BUSY_US kernel launched on a stream (simcuda_launch,
 *    into a buffer of its own), and a cuMemFree+cuMemAlloc pair; wall time per step over BUSY_STEPS
 *    steps and a final synchronisation. Where the allocation synchronises (the driver's own
 *    cuMemFree, deferred, device), the CPU waits for each kernel and a step costs both; where it
 *    does not (lazy, none), the CPU runs ahead and a step costs the longer of the two.
 * Usage: bench-free SHIM SIMDIR [PAIRS]. Nothing is asserted: timings are reported, never tested.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "simcuda.h"

#define LIVE 16
#define SIZE (1u << 20)

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Child: ns per pair, best of 3. */
static int measure(long n, int async)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))
        return 1;
    CUdeviceptr live[LIVE];
    for (int i = 0; i < LIVE; i++)
        if ((async ? cuMemAllocAsync(&live[i], SIZE, s) : cuMemAlloc(&live[i], SIZE)) != CUDA_SUCCESS)
            return 1;
    double best = 1e30;
    for (int run = 0; run < 3; run++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            int k = (int)(i % LIVE);
            CUresult r = async ? cuMemFreeAsync(live[k], s) : cuMemFree(live[k]);
            if (r == CUDA_SUCCESS)
                r = async ? cuMemAllocAsync(&live[k], SIZE, s) : cuMemAlloc(&live[k], SIZE);
            if (r != CUDA_SUCCESS) {
                fprintf(stderr, "bench-free: call failed with %d\n", (int)r);
                return 1;
            }
        }
        double per = (now_ns() - t0) / (double)n;
        best = per < best ? per : best;
    }
    printf("%.0f\n", best);
    return 0;
}

#define BUSY_US 200
#define BUSY_STEPS 200

static double wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Child: wall us per step of CPU work, a kernel and a free+alloc pair (see the top). */
static int measure_busy(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUdeviceptr k, live[LIVE];
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&k, SIZE))
        return 1;
    for (int i = 0; i < LIVE; i++)
        if (cuMemAlloc(&live[i], SIZE) != CUDA_SUCCESS)
            return 1;
    double t0 = wall_ns();
    for (int i = 0; i < BUSY_STEPS; i++) {
        double until = wall_ns() + BUSY_US * 1e3;
        while (wall_ns() < until)
            ;
        if (simcuda_launch(s, k, (uint8_t)i, SIZE, BUSY_US) != CUDA_SUCCESS ||
            cuMemFree(live[i % LIVE]) != CUDA_SUCCESS || cuMemAlloc(&live[i % LIVE], SIZE) != CUDA_SUCCESS) {
            fprintf(stderr, "bench-free: a busy step failed\n");
            return 1;
        }
    }
    if (cuCtxSynchronize() != CUDA_SUCCESS)
        return 1;
    printf("%.0f\n", (wall_ns() - t0) / 1e3 / BUSY_STEPS);
    return 0;
}

static const struct cfg {
    const char *label, *env;
    int shim, async;
} cfgs[] = {
    {"cuMemFree+cuMemAlloc, driver alone", "", 0, 0},
    {"cuMemFree+cuMemAlloc, arena, FREE_SYNC=none (unsafe)", "GPUARENA_FREE_SYNC=none", 1, 0},
    {"cuMemFree+cuMemAlloc, arena, FREE_SYNC=deferred (default)", "GPUARENA_FREE_SYNC=deferred", 1, 0},
    {"cuMemFree+cuMemAlloc, arena, FREE_SYNC=lazy", "GPUARENA_FREE_SYNC=lazy", 1, 0},
    {"cuMemFree+cuMemAlloc, arena, FREE_SYNC=device", "GPUARENA_FREE_SYNC=device", 1, 0},
    {"cuMemFreeAsync+cuMemAllocAsync, the driver's pool (platform)", "GPUARENA_MODE=platform", 1, 1},
    {"cuMemFreeAsync+cuMemAllocAsync, gpuarena's pool (arena)", "GPUARENA_MODE=arena", 1, 1},
};

/* Runs this program again as a child of one configuration (args: its mode and arguments) and
 * puts the first line it prints, or "failed", in out. */
static void run_child(const char *shim, const char *simdir, const struct cfg *c, const char *args,
                      char *out, size_t len)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "env LD_LIBRARY_PATH=%s %s%s GPUARENA_LIMIT=1GiB "
             "SIMCUDA_TOTAL_MEM=2GiB %s /proc/%d/exe %s", simdir, c->shim ? "LD_PRELOAD=" : "",
             c->shim ? shim : "", c->env, (int)getpid(), args);
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p || !fgets(out, (int)len, p))
        snprintf(out, len, "failed\n");
    if (p)
        pclose(p);
    out[strcspn(out, "\n")] = '\0';
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--child"))
        return measure(atol(argv[2]), atoi(argv[3]));
    if (argc >= 2 && !strcmp(argv[1], "--busy-child"))
        return measure_busy();
    if (argc < 3) {
        fprintf(stderr, "usage: bench-free SHIM SIMDIR [PAIRS]\n");
        return 2;
    }
    long n = argc > 3 ? atol(argv[3]) : 20000;
    printf("| operation pair (1 MiB, 16 live, idle device) | ns per pair |\n|---|---|\n");
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        char args[64], out[64];
        snprintf(args, sizeof args, "--child %ld %d", n, cfgs[i].async);
        run_child(argv[1], argv[2], &cfgs[i], args, out, sizeof out);
        printf("| %s | %s |\n", cfgs[i].label, out);
    }
    printf("\n| a step: %d us of CPU work, a %d us kernel, cuMemFree+cuMemAlloc | us per step |\n"
           "|---|---|\n", BUSY_US, BUSY_US);
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        if (cfgs[i].async)
            continue;
        char out[64];
        run_child(argv[1], argv[2], &cfgs[i], "--busy-child", out, sizeof out);
        printf("| %s | %s |\n", cfgs[i].label + strlen("cuMemFree+cuMemAlloc, "), out);
    }
    return 0;
}
