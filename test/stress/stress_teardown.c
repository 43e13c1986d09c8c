/* Context teardown while allocations are live, with other threads allocating in other contexts.
 *
 * The main thread repeatedly fills a context with blocks and then kills it with blocks still
 * live, by each of the three ways a program can: cuCtxDestroy_v2 on a created context,
 * cuDevicePrimaryCtxReset_v2 and cuDevicePrimaryCtxRelease_v2 (last reference) on the primary one,
 * then uses the device again. Background threads keep allocating in their own contexts.
 * Every block handed out, by any thread, is checked against the driver itself: its first and last
 * byte must lie in a live driver allocation of the context it was asked for
 * (cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_CONTEXT), which the shim passes to the driver). A
 * stale arena region of a dead context fails that test, whatever addresses the driver reuses.
 * Blocks that land in a range of a dead context are counted too (driver reuse is allowed, but
 * only when the driver confirms the new owner). Iteration counts, not time, bound the run.
 * Environment: STRESS_ROUNDS (24), STRESS_ITERS (1500, per background thread), STRESS_SEED.
 */
#include "stress_util.h"

#include <pthread.h>
#include <stdatomic.h>

#define BG_THREADS 3
#define PER_ROUND 16
#define MAX_DEAD 4096

typedef struct range {
    CUdeviceptr lo, hi; /* [lo, hi) */
} range_t;

static pthread_mutex_t g_dead_lock = PTHREAD_MUTEX_INITIALIZER;
static range_t g_dead[MAX_DEAD];
static size_t g_ndead;
static atomic_long g_wrong_owner, g_reused_dead, g_errors, g_checked;
static char g_first_error[256];

static void error_once(const char *fmt, CUresult rc, const char *what)
{
    if (atomic_fetch_add(&g_errors, 1) == 0)
        snprintf(g_first_error, sizeof g_first_error, fmt, what, (int)rc);
}

static void add_dead(CUdeviceptr p, size_t size)
{
    pthread_mutex_lock(&g_dead_lock);
    if (g_ndead < MAX_DEAD)
        g_dead[g_ndead++] = (range_t){p, p + size};
    pthread_mutex_unlock(&g_dead_lock);
}

static int in_dead(CUdeviceptr p, size_t size)
{
    int hit = 0;
    pthread_mutex_lock(&g_dead_lock);
    for (size_t i = 0; i < g_ndead && !hit; i++)
        hit = p < g_dead[i].hi && g_dead[i].lo < p + size;
    pthread_mutex_unlock(&g_dead_lock);
    return hit;
}

/* The driver's word on who owns the block's first and last byte. */
/* vmm mode: memory from cuMemCreate belongs to no context (the driver answers NULL), and a dead
 * context's address range is given back, so the operating system may hand the same addresses to
 * a later range: there, "live driver memory of the asking context" is checked as memory the
 * driver maps (the memset below) and the empty devices at the end. */
static int g_vmm;

static void check_owner(CUdeviceptr p, size_t size, CUcontext want)
{
    if (g_vmm) {
        atomic_fetch_add(&g_checked, 1);
        return;
    }
    CUcontext first = NULL, last = NULL;
    CUresult r1 = cuPointerGetAttribute(&first, CU_POINTER_ATTRIBUTE_CONTEXT, p);
    CUresult r2 = cuPointerGetAttribute(&last, CU_POINTER_ATTRIBUTE_CONTEXT, p + size - 1);
    atomic_fetch_add(&g_checked, 1);
    if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS || first != want || last != want)
        atomic_fetch_add(&g_wrong_owner, 1);
    if (in_dead(p, size))
        atomic_fetch_add(&g_reused_dead, 1);
}

/* Allocates one block in the current context `ctx`, checks it and writes to all of it. */
static CUdeviceptr alloc_checked(uint64_t *seed, CUcontext ctx, size_t *size)
{
    CUdeviceptr p = 0;
    *size = 1 + (size_t)(rng_next(seed) % (256u << 10));
    CUresult rc = cuMemAlloc(&p, *size);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY)
        return 0;
    if (rc != CUDA_SUCCESS) {
        error_once("%s returned %d", rc, "cuMemAlloc");
        return 0;
    }
    check_owner(p, *size, ctx);
    rc = cuMemsetD8(p, 0x5a, *size);
    if (rc != CUDA_SUCCESS)
        error_once("%s returned %d", rc, "cuMemsetD8 on a fresh block");
    return p;
}

typedef struct bg {
    int dev;
    long iters;
    uint64_t seed;
} bg_t;

/* A background thread: its own context, a rolling window of live blocks. */
static void *bg_main(void *arg)
{
    bg_t *b = arg;
    CUcontext ctx;
    CUresult rc = cuCtxCreate(&ctx, NULL, 0, b->dev);
    if (rc != CUDA_SUCCESS) {
        error_once("%s returned %d", rc, "background cuCtxCreate");
        return NULL;
    }
    CUdeviceptr live[8] = {0};
    for (long i = 0; i < b->iters; i++) {
        unsigned k = (unsigned)(rng_next(&b->seed) % 8);
        size_t size;
        if (live[k] && (rc = cuMemFree(live[k])) != CUDA_SUCCESS)
            error_once("%s returned %d", rc, "background cuMemFree");
        live[k] = alloc_checked(&b->seed, ctx, &size);
    }
    for (unsigned k = 0; k < 8; k++)
        if (live[k])
            cuMemFree(live[k]);
    if ((rc = cuCtxDestroy(ctx)) != CUDA_SUCCESS)
        error_once("%s returned %d", rc, "background cuCtxDestroy");
    return NULL;
}

/* Fills the current context `ctx` with blocks and records them as dead-to-be. */
static void fill(uint64_t *seed, CUcontext ctx)
{
    for (int i = 0; i < PER_ROUND; i++) {
        size_t size;
        CUdeviceptr p = alloc_checked(seed, ctx, &size);
        if (p)
            add_dead(p, size);
    }
}

static const char *const kill_names[] = {"cuCtxDestroy_v2", "cuDevicePrimaryCtxReset_v2",
                                         "cuDevicePrimaryCtxRelease_v2"};

/* One round: a context full of live blocks dies by `how`, then the device is used again. */
static void round_once(uint64_t *seed, int dev, int how)
{
    CUcontext ctx;
    CUresult rc = how == 0 ? cuCtxCreate(&ctx, NULL, 0, dev) : cuDevicePrimaryCtxRetain(&ctx, dev);
    if (rc == CUDA_SUCCESS && how != 0)
        rc = cuCtxSetCurrent(ctx);
    if (rc != CUDA_SUCCESS) {
        error_once("%s returned %d", rc, "round: making the context");
        return;
    }
    fill(seed, ctx);
    rc = how == 0 ? cuCtxDestroy(ctx) : how == 1 ? cuDevicePrimaryCtxReset(dev)
                                                 : cuDevicePrimaryCtxRelease(dev);
    if (rc != CUDA_SUCCESS)
        error_once("%s returned %d", rc, kill_names[how]);
    if (how == 0)
        return;
    /* The primary context again: after a reset it is still retained; after the last release it
     * must be retained anew. Either way the blocks it gets now must be live driver memory. */
    if (how == 2 && ((rc = cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS ||
                     (rc = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)) {
        error_once("%s returned %d", rc, "re-retaining the primary context");
        return;
    }
    fill(seed, ctx);
    if ((rc = cuDevicePrimaryCtxRelease(dev)) != CUDA_SUCCESS)
        error_once("%s returned %d", rc, "releasing the primary context");
}

int main(void)
{
    long rounds = env_long("STRESS_ROUNDS", 24), iters = env_long("STRESS_ITERS", 1500);
    uint64_t seed = (uint64_t)env_long("STRESS_SEED", 1);
    const char *mode = getenv("GPUARENA_MODE");
    g_vmm = mode && strcasecmp(mode, "vmm") == 0;
    REQUIRE_CU(cuInit(0));
    int ndev;
    REQUIRE_CU(cuDeviceGetCount(&ndev));
    bg_t bg[BG_THREADS];
    pthread_t t[BG_THREADS];
    for (int i = 0; i < BG_THREADS; i++) {
        bg[i] = (bg_t){.dev = i % ndev, .iters = iters, .seed = seed * 7919u + (uint64_t)i};
        if (pthread_create(&t[i], NULL, bg_main, &bg[i]) != 0) {
            tap(0, "starting background thread %d", i);
            return 0;
        }
    }
    for (long r = 0; r < rounds; r++)
        round_once(&seed, (int)(r / 3 % ndev), (int)(r % 3));
    for (int i = 0; i < BG_THREADS; i++)
        pthread_join(t[i], NULL);
    tap(atomic_load(&g_errors) == 0, "teardown: every call succeeded (%ld errors%s%s)",
        atomic_load(&g_errors), g_first_error[0] ? ", first: " : "", g_first_error);
    tap(atomic_load(&g_checked) > 0 && atomic_load(&g_wrong_owner) == 0,
        "teardown: all %ld blocks lie in live driver memory of the asking context "
        "(%ld do not; %ld reuse a dead range, confirmed by the driver)",
        atomic_load(&g_checked), atomic_load(&g_wrong_owner), atomic_load(&g_reused_dead));
    for (int d = 0; d < ndev; d++)
        tap(simcuda_device_bytes_in_use(d) == 0, "teardown: device %d empty at the end (%llu)", d,
            simcuda_device_bytes_in_use(d));
    return 0;
}
