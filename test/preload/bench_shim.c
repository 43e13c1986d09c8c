/* bench-shim: what the shim costs per call, against the driver called directly.
 *
 * The program re-runs itself once per configuration (driver, with or without LD_PRELOAD of the
 * shim, GPUARENA_MODE, SIMCUDA_LATENCY_NS), each run timing N cuMemAlloc+cuMemFree pairs of
 * varying sizes with 16 allocations kept live, best of 3, and prints a markdown table.
 * Two drivers: the null driver (bench_nulldrv.c, ~nothing per call), against which the difference
 * to the direct row is the shim's own overhead per call (platform mode target: <= 30 ns); and the
 * simulated driver, whose mmap per allocation costs microseconds (too noisy to resolve 30 ns), with
 * no latency and with a realistic 10 us per call, where the arena's benefit shows.
 * Times are thread CPU time. Nothing is asserted: timings are reported, never tested.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LIVE 16

/* CPU time of the thread, not wall time: on a shared machine, time the benchmark spends preempted
 * by other processes must not count (the driver latency is a busy-wait, so it still does). */
static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Child: ns per alloc+free pair, best of 3 runs of n pairs. */
static int measure(long n)
{
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "gpuarena: bench: CUDA did not start\n");
        return 1;
    }
    CUdeviceptr live[LIVE];
    for (int i = 0; i < LIVE; i++)
        cuMemAlloc(&live[i], 4096);
    unsigned x = 12345;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            int slot = (int)(x >> 28) % LIVE;
            size_t size = 512u << ((x >> 16) % 12); /* 512 B .. 1 MiB */
            cuMemFree(live[slot]);
            if (cuMemAlloc(&live[slot], size) != CUDA_SUCCESS) {
                fprintf(stderr, "gpuarena: bench: allocation failed\n");
                return 1;
            }
        }
        double per = (now_ns() - t0) / (double)n;
        best = per < best ? per : best;
    }
    printf("%.1f\n", best);
    return 0;
}

/* Runs this program in measure mode with the given environment; returns ns per pair. */
static double run(const char *self, const char *driver, int preload, const char *mode,
                  const char *latency, long n, const char *stats)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        setenv("LD_LIBRARY_PATH", getenv(driver), 1);
        if (preload)
            setenv("LD_PRELOAD", getenv("BENCH_SHIM"), 1);
        else
            unsetenv("LD_PRELOAD");
        setenv("GPUARENA_MODE", mode, 1);
        setenv("SIMCUDA_LATENCY_NS", latency, 1);
        setenv("SIMCUDA_TOTAL_MEM", "16GiB", 1);
        if (stats)
            setenv("GPUARENA_STATS", stats, 1);
        char count[32];
        snprintf(count, sizeof count, "%ld", n);
        execl(self, self, "measure", count, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[64] = {0};
    ssize_t got = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return got > 0 ? atof(buf) : -1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "measure"))
        return measure(atol(argv[2]));
    if (!getenv("BENCH_SHIM") || !getenv("BENCH_SIM") || !getenv("BENCH_NULLDRV")) {
        fprintf(stderr, "gpuarena: bench: BENCH_SHIM, BENCH_SIM and BENCH_NULLDRV must be set; "
                "run it with make bench-shim\n");
        return 1;
    }
    const long fast = 2000000, mid = 100000, slow = 10000;
    const char *N = "BENCH_NULLDRV", *S = "BENCH_SIM";
    double nd = run(argv[0], N, 0, "platform", "0", fast, NULL);
    double np = run(argv[0], N, 1, "platform", "0", fast, NULL);
    double nps = run(argv[0], N, 1, "platform", "0", fast, "/dev/null");
    double na = run(argv[0], N, 1, "arena", "0", fast, NULL);
    double nas = run(argv[0], N, 1, "arena", "0", fast, "/dev/null");
    double sd = run(argv[0], S, 0, "platform", "0", mid, NULL);
    double sp = run(argv[0], S, 1, "platform", "0", mid, NULL);
    double sa = run(argv[0], S, 1, "arena", "0", mid, NULL);
    double ld = run(argv[0], S, 0, "platform", "10000", slow, NULL);
    double lp = run(argv[0], S, 1, "platform", "10000", slow, NULL);
    double la = run(argv[0], S, 1, "arena", "10000", slow, NULL);
    printf("| driver | configuration | ns per alloc+free pair | vs direct, per call |\n");
    printf("|---|---|---|---|\n");
    printf("| null | direct | %.1f | - |\n", nd);
    printf("| null | shim, platform | %.1f | %+.1f ns |\n", np, (np - nd) / 2);
    printf("| null | shim, platform, GPUARENA_STATS on | %.1f | %+.1f ns |\n", nps, (nps - nd) / 2);
    printf("| null | shim, arena | %.1f | %+.1f ns |\n", na, (na - nd) / 2);
    printf("| null | shim, arena, GPUARENA_STATS on | %.1f | %+.1f ns |\n", nas, (nas - nd) / 2);
    printf("| simulated, latency 0 | direct | %.1f | - |\n", sd);
    printf("| simulated, latency 0 | shim, platform | %.1f | %+.1f ns |\n", sp, (sp - sd) / 2);
    printf("| simulated, latency 0 | shim, arena | %.1f | %.1fx faster |\n", sa, sa > 0 ? sd / sa : 0);
    printf("| simulated, 10 us | direct | %.1f | - |\n", ld);
    printf("| simulated, 10 us | shim, platform | %.1f | %+.1f ns |\n", lp, (lp - ld) / 2);
    printf("| simulated, 10 us | shim, arena | %.1f | %.1fx faster |\n", la, la > 0 ? ld / la : 0);
    return 0;
}
