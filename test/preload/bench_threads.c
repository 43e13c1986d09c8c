/* bench-threads: allocation throughput under the shim with 1, 2, 4 and 8 threads, in arena mode on
 * one context and on two (half the threads on each), on the null driver (bench_nulldrv.c).
 *
 * The shim takes only the current context's lock on the hot path (plus a few atomics for the
 * process-wide levels), so threads on two contexts should not wait on each other, while threads on
 * one context share its lock. Each configuration runs in a fresh child process (its own shim state):
 * every thread keeps 16 allocations live and makes N free+alloc pairs of varying sizes (the loop of
 * bench-shim), all threads released together; throughput is (allocs + frees) over the wall time of
 * the slowest thread, best of 3. A row without the shim (the null driver alone) is the ceiling.
 * Wall time, not CPU time: waiting for a lock is the cost being measured, and with more threads
 * than cores the figures include the oversubscription (the core count is printed with the table,
 * with the speed-up two threads of plain arithmetic get at that moment: on a shared machine another
 * process can take a core, and then no allocator could scale).
 * Nothing is asserted: timings are reported, never tested.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* cuda.h spells cuCtxCreate as a later version; the null driver has this one. */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

#define LIVE 16
#define MAX_THREADS 8
#define PAIRS 400000L /* per thread and run */

static double wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef struct worker {
    CUcontext ctx;
    unsigned seed;
    pthread_barrier_t *start;
    double ns;  /* this thread's wall time for its pairs */
    int failed;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    CUdeviceptr live[LIVE];
    if (cuCtxSetCurrent(w->ctx) != CUDA_SUCCESS)
        w->failed = 1;
    for (int i = 0; i < LIVE && !w->failed; i++)
        w->failed = cuMemAlloc(&live[i], 4096) != CUDA_SUCCESS;
    pthread_barrier_wait(w->start);
    unsigned x = w->seed;
    double t0 = wall_ns();
    for (long i = 0; i < PAIRS && !w->failed; i++) {
        x = x * 1103515245u + 12345u;
        int slot = (int)(x >> 28) % LIVE;
        size_t size = (size_t)512u << ((x >> 16) % 12); /* 512 B .. 1 MiB */
        cuMemFree(live[slot]);
        w->failed = cuMemAlloc(&live[slot], size) != CUDA_SUCCESS;
    }
    w->ns = wall_ns() - t0;
    for (int i = 0; i < LIVE && !w->failed; i++)
        cuMemFree(live[i]);
    return NULL;
}

/* Arithmetic only, no memory shared: what parallel speed-up the machine gives right now. */
static void *spin(void *arg)
{
    volatile unsigned x = 1;
    for (long i = 0; i < 100000000L; i++)
        x = x * 1103515245u + 12345u;
    return arg;
}

/* Wall time of 2 spinning threads over that of 1: 2.0 on two idle cores, 1.0 on one. */
static double parallel_speedup(void)
{
    double t[3];
    for (int n = 1; n <= 2; n++) {
        pthread_t tid[2];
        double t0 = wall_ns();
        for (int i = 0; i < n; i++)
            pthread_create(&tid[i], NULL, spin, NULL);
        for (int i = 0; i < n; i++)
            pthread_join(tid[i], NULL);
        t[n] = wall_ns() - t0;
    }
    return 2.0 * t[1] / t[2];
}

/* One run of `threads` threads on `nctx` contexts; operations per second, or -1. */
static double one_run(int threads, CUcontext *ctxs, int nctx)
{
    pthread_t tid[MAX_THREADS];
    worker_t w[MAX_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        w[t] = (worker_t){.ctx = ctxs[t % nctx], .seed = 12345u + 7919u * (unsigned)t,
                          .start = &start};
        pthread_create(&tid[t], NULL, work, &w[t]);
    }
    double slowest = 0;
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        slowest = w[t].ns > slowest ? w[t].ns : slowest;
        failed |= w[t].failed;
    }
    pthread_barrier_destroy(&start);
    return failed || slowest <= 0 ? -1 : 2.0 * PAIRS * threads / (slowest / 1e9);
}

/* Child: best of 3 runs; prints operations per second. */
static int measure(int threads, int nctx)
{
    CUdevice dev;
    CUcontext ctxs[2];
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctxs[0], dev) ||
        (nctx > 1 && cuCtxCreate_v2(&ctxs[1], 0, dev))) {
        fprintf(stderr, "gpuarena: bench-threads: CUDA did not start\n");
        return 1;
    }
    double best = -1;
    for (int rep = 0; rep < 3; rep++) {
        double ops = one_run(threads, ctxs, nctx);
        if (ops < 0) {
            fprintf(stderr, "gpuarena: bench-threads: an allocation failed\n");
            return 1;
        }
        best = ops > best ? ops : best;
    }
    printf("%.0f\n", best);
    return 0;
}

/* Runs this program in measure mode in a child, with or without the shim; ops/s or -1. */
static double run(const char *self, int shim, int threads, int nctx)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        if (shim)
            setenv("LD_PRELOAD", getenv("BENCH_SHIM"), 1);
        else
            unsetenv("LD_PRELOAD");
        setenv("LD_LIBRARY_PATH", getenv("BENCH_NULLDRV"), 1);
        setenv("GPUARENA_MODE", "arena", 1);
        /* Two arenas of 0.4 each fit the cap, so both contexts preallocate. */
        setenv("GPUARENA_MEM_FRACTION", "0.4", 1);
        char t[16], n[16];
        snprintf(t, sizeof t, "%d", threads);
        snprintf(n, sizeof n, "%d", nctx);
        execl(self, self, "measure", t, n, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[64] = {0};
    ssize_t got = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? atof(buf) : -1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "measure"))
        return measure(atoi(argv[2]), atoi(argv[3]));
    if (!getenv("BENCH_SHIM") || !getenv("BENCH_NULLDRV")) {
        fprintf(stderr, "gpuarena: bench-threads: BENCH_SHIM and BENCH_NULLDRV must be set; "
                "run it with make bench-threads\n");
        return 1;
    }
    printf("%ld cores online; 2 threads of plain arithmetic ran %.2fx as fast as 1 just before "
           "the table (2.00 on two idle cores); %ld free+alloc pairs per thread, best of 3; "
           "millions of operations (allocs + frees) per second\n\n",
           sysconf(_SC_NPROCESSORS_ONLN), parallel_speedup(), PAIRS);
    printf("| threads | null driver alone | arena, one context | per thread | "
           "arena, two contexts | per thread |\n");
    printf("|---:|---:|---:|---:|---:|---:|\n");
    for (int threads = 1; threads <= MAX_THREADS; threads *= 2) {
        double direct = run(argv[0], 0, threads, 1);
        double one = run(argv[0], 1, threads, 1);
        double two = threads > 1 ? run(argv[0], 1, threads, 2) : -1;
        printf("| %d | %.1f | %.2f | %.2f |", threads, direct / 1e6, one / 1e6,
               one / 1e6 / threads);
        if (two > 0)
            printf(" %.2f | %.2f |\n", two / 1e6, two / 1e6 / threads);
        else
            printf(" - | - |\n");
    }
    return 0;
}
