/* Many threads allocating and freeing through the shim on two simulated devices, in primary and
 * created contexts, under a cap (GPUARENA_LIMIT).
 *
 * What it proves from outside the shim: the driver never holds more than the cap on a device
 * (sampled per device after every allocation, and exactly through the simulated driver's global
 * peak), allocations never overlap (each block is filled with its owner's tag and read back whole
 * before it is freed), the only allocation failure is CUDA_ERROR_OUT_OF_MEMORY, every free of a
 * live block succeeds, nothing is left behind (platform mode: driver bytes back to 0 once every
 * block is freed; every mode: 0 after the contexts are gone), and the run ends (a bounded number
 * of iterations; the runner's timeout turns a deadlock into a failure). Built with TSan by
 * `make tsan`. Environment: STRESS_THREADS (12), STRESS_ITERS (2000), STRESS_SEED (1),
 * STRESS_DEVICES (all; 1 makes the driver's peak an exact per-device peak).
 */
#include "stress_util.h"

#include <pthread.h>

#define SLOTS 24
#define MAX_THREADS 32

typedef struct block {
    CUdeviceptr ptr;
    size_t size;
    unsigned char tag;
} block_t;

typedef struct worker {
    int id;
    int dev;
    int own_ctx; /* 1: cuCtxCreate, 0: the device's primary context */
    uint64_t seed;
    long iters;
    block_t slots[SLOTS];
    unsigned char *host; /* read-back buffer */
    /* results */
    long allocs, ooms, frees, errors, corrupt, over_cap;
    char first_error[200];
} worker_t;

static unsigned long long g_cap;
static int g_platform;
static pthread_barrier_t g_freed, g_checked;

static void note_error(worker_t *w, const char *what, CUresult rc)
{
    if (w->errors++ == 0)
        snprintf(w->first_error, sizeof w->first_error, "thread %d: %s returned %d", w->id, what,
                 (int)rc);
}

/* Log-spread sizes: mostly small, sometimes a few MiB, never a multiple-only pattern. */
static size_t pick_size(uint64_t *seed)
{
    uint64_t r = rng_next(seed);
    if (r % 16 == 0)
        return (size_t)(1u << 20) + (size_t)(r >> 8) % (3u << 20);
    return 1 + (size_t)(r >> 8) % (32u << 10);
}

/* Reads the whole block back and checks every byte still carries the owner's tag. */
static void verify_block(worker_t *w, const block_t *b)
{
    CUresult rc = cuMemcpyDtoH(w->host, b->ptr, b->size);
    if (rc != CUDA_SUCCESS) {
        note_error(w, "cuMemcpyDtoH", rc);
        return;
    }
    for (size_t i = 0; i < b->size; i++)
        if (w->host[i] != b->tag) {
            w->corrupt++;
            return;
        }
}

static void free_slot(worker_t *w, block_t *b)
{
    verify_block(w, b);
    CUresult rc = cuMemFree(b->ptr);
    if (rc != CUDA_SUCCESS)
        note_error(w, "cuMemFree of a live block", rc);
    else
        w->frees++;
    b->ptr = 0;
}

static void alloc_slot(worker_t *w, block_t *b, unsigned slot)
{
    size_t size = pick_size(&w->seed);
    CUresult rc = cuMemAlloc(&b->ptr, size);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
        w->ooms++;
        b->ptr = 0;
        return;
    }
    if (rc != CUDA_SUCCESS) {
        note_error(w, "cuMemAlloc", rc);
        b->ptr = 0;
        return;
    }
    w->allocs++;
    b->size = size;
    b->tag = (unsigned char)(w->id * SLOTS + slot + 1);
    if (g_cap && simcuda_device_bytes_in_use(w->dev) > g_cap)
        w->over_cap++;
    rc = cuMemsetD8(b->ptr, b->tag, size);
    if (rc != CUDA_SUCCESS)
        note_error(w, "cuMemsetD8", rc);
}

static CUcontext enter_context(worker_t *w)
{
    CUcontext ctx = NULL;
    CUresult rc = w->own_ctx ? cuCtxCreate(&ctx, NULL, 0, w->dev)
                             : cuDevicePrimaryCtxRetain(&ctx, w->dev);
    if (rc == CUDA_SUCCESS)
        rc = cuCtxSetCurrent(ctx);
    if (rc != CUDA_SUCCESS)
        note_error(w, w->own_ctx ? "cuCtxCreate" : "cuDevicePrimaryCtxRetain", rc);
    return rc == CUDA_SUCCESS ? ctx : NULL;
}

static void leave_context(worker_t *w, CUcontext ctx)
{
    CUresult rc = w->own_ctx ? cuCtxDestroy(ctx) : cuDevicePrimaryCtxRelease(w->dev);
    if (rc != CUDA_SUCCESS)
        note_error(w, w->own_ctx ? "cuCtxDestroy" : "cuDevicePrimaryCtxRelease", rc);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    CUcontext ctx = enter_context(w);
    for (long i = 0; ctx && i < w->iters; i++) {
        unsigned slot = (unsigned)(rng_next(&w->seed) % SLOTS);
        if (w->slots[slot].ptr)
            free_slot(w, &w->slots[slot]);
        else
            alloc_slot(w, &w->slots[slot], slot);
    }
    for (unsigned s = 0; s < SLOTS; s++)
        if (w->slots[s].ptr)
            free_slot(w, &w->slots[s]);
    pthread_barrier_wait(&g_freed);  /* main checks the driver while every block is freed */
    pthread_barrier_wait(&g_checked);
    if (ctx)
        leave_context(w, ctx);
    return NULL;
}

/* With every block freed and the contexts still alive: what the driver still holds. */
static void check_after_frees(int ndev)
{
    for (int d = 0; d < ndev; d++) {
        unsigned long long held = simcuda_device_bytes_in_use(d);
        if (g_platform)
            tap(held == 0, "platform: device %d holds 0 bytes once every block is freed (%llu)",
                d, held);
        else
            tap(!g_cap || held <= g_cap, "arena: device %d holds at most the cap once freed "
                "(%llu <= %llu)", d, held, g_cap);
    }
}

static void report(worker_t *w, int n, int ndev)
{
    long allocs = 0, ooms = 0, frees = 0, errors = 0, corrupt = 0, over = 0;
    const char *first = NULL;
    for (int i = 0; i < n; i++) {
        allocs += w[i].allocs, ooms += w[i].ooms, frees += w[i].frees;
        errors += w[i].errors, corrupt += w[i].corrupt, over += w[i].over_cap;
        if (!first && w[i].errors)
            first = w[i].first_error;
    }
    tap(errors == 0, "%d threads: no call failed except with OUT_OF_MEMORY (%ld errors%s%s)", n,
        errors, first ? ", first: " : "", first ? first : "");
    tap(allocs > 0 && allocs == frees, "every allocation freed once (%ld allocs, %ld frees, "
        "%ld OOM)", allocs, frees, ooms);
    tap(corrupt == 0, "no block overwritten by another (%ld corrupt blocks)", corrupt);
    tap(over == 0, "per-device driver bytes never above the cap %llu (%ld samples above)", g_cap,
        over);
    simcuda_counters_t c;
    simcuda_get_counters(&c);
    tap(!g_cap || c.peak_bytes_in_use <= g_cap * (unsigned long long)ndev,
        "driver peak %llu <= %d devices x cap %llu", c.peak_bytes_in_use, ndev, g_cap);
    int clean = 1;
    for (int d = 0; d < ndev; d++)
        clean &= simcuda_device_bytes_in_use(d) == 0;
    tap(clean && c.bytes_in_use == 0, "nothing left on the devices after the contexts are gone "
        "(%llu bytes)", c.bytes_in_use);
}

int main(void)
{
    int n = (int)env_long("STRESS_THREADS", 12);
    long iters = env_long("STRESS_ITERS", 2000);
    uint64_t seed = (uint64_t)env_long("STRESS_SEED", 1);
    const char *mode = getenv("GPUARENA_MODE");
    g_platform = mode && strcmp(mode, "platform") == 0;
    g_cap = env_size("GPUARENA_LIMIT");
    if (n < 1 || n > MAX_THREADS)
        n = 12;
    REQUIRE_CU(cuInit(0));
    int ndev = 0;
    REQUIRE_CU(cuDeviceGetCount(&ndev));
    /* STRESS_DEVICES=1 puts every thread on device 0: the driver's global peak is then that
     * device's exact peak, so the cap check below is exact rather than sampled. */
    int use = (int)env_long("STRESS_DEVICES", ndev);
    if (use >= 1 && use < ndev)
        ndev = use;
    static worker_t w[MAX_THREADS];
    pthread_t t[MAX_THREADS];
    pthread_barrier_init(&g_freed, NULL, (unsigned)n + 1);
    pthread_barrier_init(&g_checked, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
        w[i] = (worker_t){.id = i, .dev = i % ndev, .own_ctx = (i / ndev) % 2, .iters = iters,
                          .seed = seed * 1000003u + (uint64_t)i};
        w[i].host = malloc(4u << 20);
        if (!w[i].host || pthread_create(&t[i], NULL, worker_main, &w[i]) != 0) {
            tap(0, "starting thread %d", i);
            return 0;
        }
    }
    pthread_barrier_wait(&g_freed);
    check_after_frees(ndev);
    pthread_barrier_wait(&g_checked);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    report(w, n, ndev);
    for (int i = 0; i < n; i++)
        free(w[i].host);
    return 0;
}
