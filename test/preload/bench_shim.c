/* bench-shim: what the shim costs per call, against the driver called directly.
 *
 * The program re-runs itself once per configuration (driver, with or without LD_PRELOAD of the
 * shim, GPUARENA_MODE, SIMCUDA_LATENCY_NS), each run timing N cuMemAlloc+cuMemFree pairs of
 * varying sizes with 16 allocations kept live, best of 3, and prints a markdown table.
 * Two drivers: the null driver (bench_nulldrv.c, ~nothing per call), against which the difference
 * to the direct row is the shim's own overhead per call (platform mode target: <= 30 ns); and the
 * simulated driver, whose mmap per allocation costs microseconds (too noisy to resolve 30 ns), with
 * no latency and with a realistic 10 us per call, where the arena's benefit shows. The cost of
 * recording (GPUARENA_TRACE to a file in /tmp) is the traced run minus an untraced run of the same
 * length, per event, on the null driver (issue 4 target: under 100 ns per event); a run tracing to
 * /dev/null separates recording itself from the file system's share; these rows are timed in
 * TRACE_ROUNDS interleaved rounds, each row's best kept.
 * Two reference rows say what the shim adds to the allocator: the arena pool alone (ga_pool_alloc
 * and ga_pool_free in this process on a host backend, the same loop: the allocator's own cost), and
 * the arena under GPUARENA_FREE_SYNC=none (no fence: the hook without stream-ordered safety).
 * The rows those differences come from (direct, platform, arena with and without the fence, the
 * allocator alone, vmm) are timed in ROUNDS interleaved rounds, each row's best kept, and so are
 * two rows of large blocks (1 to 64 MiB, each freed and allocated again at its size, as a training
 * step does) in arena and vmm mode: what vmm costs per call when it maps nothing but its blocks
 * span many granules.
 * Times are thread CPU time. Nothing is asserted: timings are reported, never tested.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ga_pool.h"

#define LIVE 16
#define ROUNDS 5 /* interleaved rounds of the rows that give the shim's cost per call */
#define TRACE_ROUNDS 3 /* and of the rows that give the cost of recording a trace */

/* CPU time of the thread, not wall time: on a shared machine, time the benchmark spends preempted
 * by other processes must not count (the driver latency is a busy-wait, so it still does). */
static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The benchmark's sequence: which of the LIVE slots to free next, and the size (512 B .. 1 MiB) to
 * allocate in its place. */
static size_t next_pair(unsigned *x, int *slot)
{
    *x = *x * 1103515245u + 12345u;
    *slot = (int)(*x >> 28) % LIVE;
    return (size_t)512u << ((*x >> 16) % 12);
}

/* The large-block sequence ("measure-large"): slot i always holds a block of 1 MiB << (i % 7),
 * 1 to 64 MiB, freed and allocated again at its size, as a training step's buffers are; once each
 * size has been seen, vmm mode maps nothing (its freed granules are kept and taken again). */
static size_t large_size(int slot) { return (size_t)1 << (20 + slot % 7); }
static size_t next_large(unsigned *x, int *slot)
{
    *x = *x * 1103515245u + 12345u;
    *slot = (int)(*x >> 28) % LIVE;
    return large_size(*slot);
}

/* The odd-size sequence ("measure-odd"): as the large one, but slot i holds 1.5 MiB << (i % 5)
 * plus 4 KiB, 1.5 to 24 MiB and no granule multiple: blocks that span granules they share with
 * their neighbours, of sizes that get a class in vmm mode (1.5 and 3 MiB plus 4 KiB, three or
 * four of each live) and of sizes that stay in its general area (6 MiB plus 4 KiB and up). */
static size_t odd_size(int slot) { return ((size_t)3 << (19 + slot % 5)) + 4096; }
static size_t next_odd(unsigned *x, int *slot)
{
    *x = *x * 1103515245u + 12345u;
    *slot = (int)(*x >> 28) % LIVE;
    return odd_size(*slot);
}

/* A host backend that hands out address space only (nothing is ever touched). */
static uintptr_t fake_next = (uintptr_t)1 << 40;
static int fake_reserve(void *ctx, size_t size, uintptr_t *base)
{
    (void)ctx;
    *base = fake_next;
    fake_next += size;
    return 0;
}
static int fake_release(void *ctx, uintptr_t base, size_t size)
{
    (void)ctx, (void)base, (void)size;
    return 0;
}

/* Child: the allocator alone, the arena pool as the shim makes it on the null driver (a region of
 * 0.75 of 1 TiB), the same loop without CUDA; ns per pair, best of 3. */
static int measure_pool(long n)
{
    ga_pool_backend_t be = {.reserve = fake_reserve, .release = fake_release};
    ga_pool_config_t cfg = {.mode = GA_MODE_ARENA, .initial = (size_t)3 << 38, .grow = 1};
    ga_status_t st = GA_OK;
    ga_pool_t *pool = ga_pool_create(&be, &cfg, &st);
    if (!pool) {
        fprintf(stderr, "gpuarena: bench: no pool (%d)\n", (int)st);
        return 1;
    }
    uintptr_t live[LIVE];
    for (int i = 0; i < LIVE; i++)
        ga_pool_alloc(pool, 4096, &live[i]);
    unsigned x = 12345;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            int slot;
            size_t size = next_pair(&x, &slot);
            ga_pool_free(pool, live[slot], NULL);
            if (ga_pool_alloc(pool, size, &live[slot]) != GA_OK) {
                fprintf(stderr, "gpuarena: bench: allocation failed\n");
                return 1;
            }
        }
        double per = (now_ns() - t0) / (double)n;
        best = per < best ? per : best;
    }
    ga_pool_destroy(pool);
    printf("%.1f\n", best);
    return 0;
}

/* Child: ns per alloc+free pair, best of 3 runs of n pairs; large: 1 the large-block sequence, 2
 * the odd-size one. Always inlined with a constant `large` (measure_small, measure_large,
 * measure_odd), so the loop tests nothing per pair that the figures before the large rows did not. */
static inline __attribute__((always_inline)) int measure(long n, int large)
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
        cuMemAlloc(&live[i], large == 2 ? odd_size(i) : large ? large_size(i) : 4096);
    unsigned x = 12345;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            int slot;
            size_t size = large == 2 ? next_odd(&x, &slot)
                          : large ? next_large(&x, &slot) : next_pair(&x, &slot);
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

static __attribute__((noinline)) int measure_small(long n) { return measure(n, 0); }
static __attribute__((noinline)) int measure_large(long n) { return measure(n, 1); }
static __attribute__((noinline)) int measure_odd(long n) { return measure(n, 2); }

/* One child run: which driver, whether the shim is preloaded, and the shim's settings. */
typedef struct config {
    const char *driver;  /* name of the variable holding the driver's folder */
    int preload;
    const char *mode, *latency;
    long n;
    const char *stats, *trace; /* GPUARENA_STATS, GPUARENA_TRACE; NULL = unset */
    const char *free_sync;     /* GPUARENA_FREE_SYNC; NULL = unset (the default, deferred) */
    const char *what;          /* "measure", "measure-large", "measure-odd", or "pool": the
                                * allocator alone */
} config_t;

static void child_env(const config_t *c)
{
    setenv("LD_LIBRARY_PATH", getenv(c->driver), 1);
    if (c->preload)
        setenv("LD_PRELOAD", getenv("BENCH_SHIM"), 1);
    else
        unsetenv("LD_PRELOAD");
    setenv("GPUARENA_MODE", c->mode, 1);
    setenv("SIMCUDA_LATENCY_NS", c->latency, 1);
    setenv("SIMCUDA_TOTAL_MEM", "16GiB", 1);
    if (c->stats)
        setenv("GPUARENA_STATS", c->stats, 1);
    if (c->trace)
        setenv("GPUARENA_TRACE", c->trace, 1);
    if (c->free_sync)
        setenv("GPUARENA_FREE_SYNC", c->free_sync, 1);
}

/* Runs this program in measure mode with the given configuration; returns ns per pair. */
static double run(const char *self, const config_t *c)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        child_env(c);
        char count[32];
        snprintf(count, sizeof count, "%ld", c->n);
        execl(self, self, c->what ? c->what : "measure", count, (char *)NULL);
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

/* A run with GPUARENA_TRACE set to a fresh file in /tmp. The file must hold every event the child
 * made (LIVE allocations, then a free and an alloc per pair, 3 times n pairs): a recording that
 * dropped events would look cheaper than it is, so the figure is then reported as -1. */
static double run_traced(const char *self, config_t c)
{
    char path[] = "/tmp/gpuarena-bench-trace-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("gpuarena: bench: mkstemp in /tmp");
        return -1;
    }
    close(fd);
    c.trace = path;
    double ns = run(self, &c);
    struct stat st;
    long long want = 32 + 48LL * (LIVE + 6LL * c.n);
    if (stat(path, &st) != 0 || (long long)st.st_size != want) {
        fprintf(stderr, "gpuarena: bench: trace %s holds %lld bytes, expected %lld\n", path,
                (long long)st.st_size, want);
        ns = -1;
    }
    unlink(path);
    return ns;
}

/* Every configuration once per round, `rounds` rounds, each keeping its best (-1 when no run gave a
 * figure); traced[i] (traced may be NULL): configuration i records a trace to a file. */
static void best_of_rounds(const char *self, config_t *cfg, const int *traced, int n, int rounds,
                           double *best)
{
    for (int i = 0; i < n; i++)
        best[i] = -1;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            double v = traced && traced[i] ? run_traced(self, cfg[i]) : run(self, &cfg[i]);
            if (v > 0 && (best[i] < 0 || v < best[i]))
                best[i] = v;
        }
    }
}

static void row(const char *drv, const char *what, double ns, double base, int speedup)
{
    if (base < 0)
        printf("| %s | %s | %.1f | - |\n", drv, what, ns);
    else if (speedup)
        printf("| %s | %s | %.1f | %.1fx faster |\n", drv, what, ns, ns > 0 ? base / ns : 0);
    else
        printf("| %s | %s | %.1f | %+.1f ns |\n", drv, what, ns, (ns - base) / 2);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "measure"))
        return measure_small(atol(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "measure-large"))
        return measure_large(atol(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "measure-odd"))
        return measure_odd(atol(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "pool"))
        return measure_pool(atol(argv[2]));
    if (!getenv("BENCH_SHIM") || !getenv("BENCH_SIM") || !getenv("BENCH_NULLDRV")) {
        fprintf(stderr, "gpuarena: bench: BENCH_SHIM, BENCH_SIM and BENCH_NULLDRV must be set; "
                "run it with make bench-shim\n");
        return 1;
    }
    /* Traced runs write 48 bytes per event, so they use fewer pairs (about 140 MB of trace);
     * their untraced reference runs use the same count. */
    const long fast = 1000000, traced = 500000, mid = 100000, slow = 10000;
    const char *N = "BENCH_NULLDRV", *S = "BENCH_SIM", *me = argv[0];
    /* The null-driver rows whose differences are the shim's cost per call run in ROUNDS rounds,
     * each round every configuration once, and each keeps its best: this VM's speed moves by up to
     * 1.8x over seconds, and two rows timed a few seconds apart (the arena and the allocator
     * alone, whose difference is the hook's cost) could otherwise land in different spells. */
    config_t key[] = {
        {N, 0, "platform", "0", fast, NULL, NULL, NULL, NULL}, /* direct */
        {N, 1, "platform", "0", fast, NULL, NULL, NULL, NULL},
        {N, 1, "arena", "0", fast, NULL, NULL, NULL, NULL},
        {N, 1, "arena", "0", fast, NULL, NULL, "none", NULL},
        {N, 0, "arena", "0", fast, NULL, NULL, NULL, "pool"}, /* the allocator alone */
        {N, 1, "vmm", "0", fast, NULL, NULL, NULL, NULL},
        {N, 1, "arena", "0", mid, NULL, NULL, NULL, "measure-large"},
        {N, 1, "vmm", "0", mid, NULL, NULL, NULL, "measure-large"},
        {N, 1, "arena", "0", mid, NULL, NULL, NULL, "measure-odd"},
        {N, 1, "vmm", "0", mid, NULL, NULL, NULL, "measure-odd"},
    };
    enum { K = sizeof key / sizeof key[0] };
    double best[K];
    best_of_rounds(me, key, NULL, K, ROUNDS, best);
    double nd = best[0], np = best[1], na = best[2], nan0 = best[3], npool = best[4], nv = best[5];
    double nal = best[6], nvl = best[7], nao = best[8], nvo = best[9];
    double nps = run(me, &(config_t){N, 1, "platform", "0", fast, "/dev/null", NULL, NULL, NULL});
    double nas = run(me, &(config_t){N, 1, "arena", "0", fast, "/dev/null", NULL, NULL, NULL});
    /* The recording rows likewise, each traced run in the same round as its reference: a trace
     * is written to a file, whose cost moves with the machine's I/O as well. */
    config_t tkey[] = {
        {N, 1, "platform", "0", traced, NULL, NULL, NULL, NULL}, /* reference */
        {N, 1, "platform", "0", traced, NULL, NULL, NULL, NULL}, /* traced to a file */
        {N, 1, "platform", "0", traced, NULL, "/dev/null", NULL, NULL},
        {N, 1, "arena", "0", traced, NULL, NULL, NULL, NULL},
        {N, 1, "arena", "0", traced, NULL, "/dev/null", NULL, NULL},
        {N, 1, "arena", "0", traced, NULL, NULL, NULL, NULL},
    };
    enum { T = sizeof tkey / sizeof tkey[0] };
    static const int to_file[T] = {0, 1, 0, 0, 0, 1};
    double tbest[T];
    best_of_rounds(me, tkey, to_file, T, TRACE_ROUNDS, tbest);
    double np0 = tbest[0], npt = tbest[1], npn = tbest[2], na0 = tbest[3], nan_ = tbest[4];
    double nat = tbest[5];
    double sd = run(me, &(config_t){S, 0, "platform", "0", mid, NULL, NULL, NULL, NULL});
    double sp = run(me, &(config_t){S, 1, "platform", "0", mid, NULL, NULL, NULL, NULL});
    double sa = run(me, &(config_t){S, 1, "arena", "0", mid, NULL, NULL, NULL, NULL});
    double ld = run(me, &(config_t){S, 0, "platform", "10000", slow, NULL, NULL, NULL, NULL});
    double lp = run(me, &(config_t){S, 1, "platform", "10000", slow, NULL, NULL, NULL, NULL});
    double la = run(me, &(config_t){S, 1, "arena", "10000", slow, NULL, NULL, NULL, NULL});
    printf("| driver | configuration | ns per alloc+free pair | vs direct, per call |\n");
    printf("|---|---|---|---|\n");
    row("null", "direct", nd, -1, 0);
    row("null", "shim, platform", np, nd, 0);
    row("null", "shim, platform, GPUARENA_STATS on", nps, nd, 0);
    row("null", "shim, arena", na, nd, 0);
    row("null", "shim, arena, GPUARENA_STATS on", nas, nd, 0);
    row("null", "shim, arena, GPUARENA_FREE_SYNC=none (no fence)", nan0, nd, 0);
    row("none", "arena pool alone (the allocator's own cost; vs direct)", npool, nd, 0);
    row("null", "shim, vmm", nv, nd, 0);
    row("null", "shim, arena, 1-64 MiB blocks reallocated at their size", nal, nd, 0);
    row("null", "shim, vmm, 1-64 MiB blocks reallocated at their size (nothing mapped)", nvl, nd, 0);
    row("null", "shim, arena, 1.5-24 MiB + 4 KiB blocks reallocated at their size", nao, nd, 0);
    row("null", "shim, vmm, 1.5-24 MiB + 4 KiB blocks reallocated at their size (nothing mapped)",
        nvo, nd, 0);
    /* Recording cost per event: a pair is two events, so half the traced-minus-untraced time. */
    row("null", "shim, platform (500k pairs, reference)", np0, nd, 0);
    row("null", "shim, platform, GPUARENA_TRACE on (vs reference: recording per event)", npt,
        np0, 0);
    row("null", "shim, platform, GPUARENA_TRACE=/dev/null (vs reference)", npn, np0, 0);
    row("null", "shim, arena (500k pairs, reference)", na0, nd, 0);
    row("null", "shim, arena, GPUARENA_TRACE on (vs reference: recording per event)", nat, na0,
        0);
    row("null", "shim, arena, GPUARENA_TRACE=/dev/null (vs reference)", nan_, na0, 0);
    row("simulated, latency 0", "direct", sd, -1, 0);
    row("simulated, latency 0", "shim, platform", sp, sd, 0);
    row("simulated, latency 0", "shim, arena", sa, sd, 1);
    row("simulated, 10 us", "direct", ld, -1, 0);
    row("simulated, 10 us", "shim, platform", lp, ld, 0);
    row("simulated, 10 us", "shim, arena", la, ld, 1);
    printf("\nShim over the allocator alone, per call: arena %+.1f ns (%+.1f ns without the fence, "
           "GPUARENA_FREE_SYNC=none), vmm %+.1f ns; allocator alone %.1f ns per call (best of %d "
           "interleaved rounds).\n", (na - npool) / 2, (nan0 - npool) / 2, (nv - npool) / 2,
           npool / 2, ROUNDS);
    printf("\nvmm over arena with blocks of 1 to 64 MiB freed and allocated again at their size "
           "(vmm maps nothing after the first pairs): %+.1f ns per call; with blocks of 1.5 to 24 "
           "MiB plus 4 KiB, no granule multiple: %+.1f ns per call.\n", (nvl - nal) / 2,
           (nvo - nao) / 2);
    printf("\nRecording cost per event, GPUARENA_TRACE on vs off (issue 4 target: under 100 ns): "
           "platform %+.1f ns, arena %+.1f ns.\n", (npt - np0) / 2, (nat - na0) / 2);
    return 0;
}
