/* bench-patterns: allocation patterns a real program makes, at the pool or through the shim, for
 * instruction counts (scripts/bench-patterns-instr.sh; an outside check of issue 10's cost item,
 * helper-136). Nothing is timed or asserted: the program runs ROUNDS rounds of one pattern and
 * says how many alloc+free pairs it made (and, at the pool, how many runs it mapped and unmapped).
 *
 *   bench-patterns TARGET PATTERN ROUNDS
 * TARGET: pool-arena, pool-vmm (ga_pool_* on a host backend that hands out address space only,
 * the configuration of bench-pairs: 64 GiB, 2 MiB granules, the default keep); shim (cuMemAlloc
 * and cuMemFree, the mode from GPUARENA_MODE, run under LD_PRELOAD on a null driver), shim-async
 * (cuMemAllocAsync and cuMemFreeAsync on one created stream), shim-pitch (cuMemAllocPitch_v2 of
 * the size as 64 rows, cuMemFree). PATTERN: one of the names in `run` below, or trace:PATH (a
 * lifetime CSV or a gpuarena trace, its allocations and frees made again each round). At the
 * pool, BENCH_KEEP=BYTES sets the vmm keep (default: the shim's).
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ga_pool.h"
#include "ga_trace.h"
#include "host_backend.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define MAXLIVE 64

/* The target ------------------------------------------------------------------------------- */

static int target; /* 0 pool, 1 shim, 2 shim-async, 3 shim-pitch */
static ga_pool_t *pool;
static CUstream stream;

static uintptr_t take(size_t size)
{
    uintptr_t p = 0;
    int bad;
    if (target == 0) {
        bad = ga_pool_alloc(pool, size, &p) != GA_OK;
    } else if (target == 1) {
        CUdeviceptr d = 0;
        bad = cuMemAlloc(&d, size) != CUDA_SUCCESS;
        p = (uintptr_t)d;
    } else if (target == 2) {
        CUdeviceptr d = 0;
        bad = cuMemAllocAsync(&d, size, stream) != CUDA_SUCCESS;
        p = (uintptr_t)d;
    } else {
        CUdeviceptr d = 0;
        size_t pitch = 0;
        bad = cuMemAllocPitch(&d, &pitch, (size + 63) / 64, 64, 4) != CUDA_SUCCESS;
        p = (uintptr_t)d;
    }
    if (bad) {
        fprintf(stderr, "gpuarena: bench-patterns: an allocation of %zu bytes failed\n", size);
        exit(1);
    }
    return p;
}

static void give(uintptr_t p)
{
    int bad;
    if (target == 0)
        bad = ga_pool_free(pool, p, NULL) != GA_OK;
    else if (target == 2)
        bad = cuMemFreeAsync((CUdeviceptr)p, stream) != CUDA_SUCCESS;
    else
        bad = cuMemFree((CUdeviceptr)p) != CUDA_SUCCESS;
    if (bad) {
        fprintf(stderr, "gpuarena: bench-patterns: a free failed\n");
        exit(1);
    }
}

/* The patterns ------------------------------------------------------------------------------ */

static uintptr_t live[MAXLIVE], bg[MAXLIVE];
static long pairs;

static void pair(int slot, size_t size)
{
    give(live[slot]);
    live[slot] = take(size);
    pairs++;
}

/* One slot cycling through n sizes, with nbg blocks of bgsize live around it. */
static void cycle(long rounds, const size_t *sizes, int n, int nbg, size_t bgsize)
{
    for (int i = 0; i < nbg; i++)
        bg[i] = take(bgsize);
    live[0] = take(sizes[n - 1]);
    for (long r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++)
            pair(0, sizes[i]);
}

/* nlive blocks of one size, each freed and allocated again in turn (bench-pairs' loop). */
static void turn(long rounds, size_t size, int nlive)
{
    for (int i = 0; i < nlive; i++)
        live[i] = take(size);
    for (long r = 0; r < rounds; r++)
        for (int i = 0; i < nlive; i++)
            pair(i, size);
}

/* n blocks of the given sizes: all freed (in reverse when `reverse`), then all allocated again in
 * order. */
static void burst(long rounds, const size_t *sizes, int n, int reverse)
{
    for (int i = 0; i < n; i++)
        live[i] = take(sizes[i]);
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++)
            give(live[reverse ? n - 1 - i : i]);
        for (int i = 0; i < n; i++)
            live[i] = take(sizes[i]);
        pairs += n;
    }
}

/* bench-shim's small loop: 16 live, a random slot freed and 512 B << (0..11) allocated there. */
static void mixed16(long rounds)
{
    for (int i = 0; i < 16; i++)
        live[i] = take(4096);
    unsigned x = 12345;
    for (long r = 0; r < rounds; r++) {
        x = x * 1103515245u + 12345u;
        pair((int)(x >> 28) % 16, (size_t)512u << ((x >> 16) % 12));
    }
}

/* A recorded program ("trace:PATH": a lifetime CSV or a gpuarena trace) run again each round, as
 * its training steps run: its allocations and frees in order, then whatever it left live freed.
 * Its addresses (or buffer ids) are turned into slot numbers before the rounds. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void replayed(long rounds, const char *path)
{
    ga_trace_t t;
    char err[256];
    size_t len = strlen(path);
    ga_trace_init(&t);
    if ((len > 4 && !strcmp(path + len - 4, ".csv") ? ga_lifetimes_read(path, &t, err, sizeof err)
                                                    : ga_trace_read(path, &t, err, sizeof err))) {
        fprintf(stderr, "gpuarena: bench-patterns: %s: %s\n", path, err);
        exit(2);
    }
    uint64_t *keys = malloc((t.count + 1) * sizeof *keys);
    size_t *slot = malloc((t.count + 1) * sizeof *slot), n = 0;
    uintptr_t *ptr = calloc(t.count + 1, sizeof *ptr);
    if (!keys || !slot || !ptr) {
        fprintf(stderr, "gpuarena: bench-patterns: out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < t.count; i++)
        keys[n++] = t.events[i].addr;
    qsort(keys, n, sizeof *keys, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || keys[u - 1] != keys[i])
            keys[u++] = keys[i];
    for (size_t i = 0; i < t.count; i++) {
        const uint64_t *k = bsearch(&t.events[i].addr, keys, u, sizeof *keys, cmp_u64);
        slot[i] = (size_t)(k - keys);
    }
    for (long r = 0; r < rounds; r++) {
        for (size_t i = 0; i < t.count; i++) {
            const ga_event_t *e = &t.events[i];
            if (e->kind == GA_EV_ALLOC && !ptr[slot[i]] && e->size) {
                ptr[slot[i]] = take(e->size);
                pairs++;
            } else if (e->kind == GA_EV_FREE && ptr[slot[i]]) {
                give(ptr[slot[i]]);
                ptr[slot[i]] = 0;
            }
        }
        for (size_t i = 0; i < u; i++)
            if (ptr[i]) {
                give(ptr[i]);
                ptr[i] = 0;
            }
    }
    free(keys), free(slot), free(ptr);
    ga_trace_free(&t);
}

static void run(const char *name, long rounds)
{
    if (!strncmp(name, "trace:", 6)) {
        replayed(rounds, name + 6);
        return;
    }
    static const size_t s4k[] = {4 * KiB}, s1m[] = {MiB}, sodd[] = {7 * MiB + 4 * KiB};
    static const size_t small2[] = {4 * KiB, 8 * KiB};
    static const size_t large2[] = {7 * MiB + 4 * KiB, 9 * MiB + 4 * KiB};
    static const size_t mix2[] = {4 * KiB, 7 * MiB + 4 * KiB};
    static const size_t three[] = {4 * KiB, 3 * MiB / 2, 8 * MiB};
    static const size_t cls2[] = {3 * MiB / 2, 3 * MiB + 4 * KiB};
    /* A training step's buffers, 40 MiB in all (within the default 64 MiB keep). */
    static const size_t step[] = {4 * KiB, 64 * KiB, 300000, MiB - 512, MiB, MiB + 512,
                                  3 * MiB / 2, 2 * MiB, 3 * MiB + 4 * KiB, 4 * MiB,
                                  6 * MiB + 4 * KiB, 8 * MiB, 12 * MiB};
    /* One step past the keep: 136 MiB. */
    static const size_t bigstep[] = {4 * KiB, MiB, 3 * MiB / 2, 4 * MiB, 6 * MiB + 4 * KiB,
                                     16 * MiB, 24 * MiB + 4 * KiB, 32 * MiB, 48 * MiB};
    size_t many[40], manysmall[40], twenty15[20], twenty2[20];
    for (int i = 0; i < 40; i++) {
        many[i] = MiB + (size_t)i * 8 * KiB;
        manysmall[i] = 4 * KiB + (size_t)i * 512;
    }
    for (int i = 0; i < 20; i++)
        twenty15[i] = 3 * MiB / 2, twenty2[i] = 2 * MiB;
#define N(a) ((int)(sizeof a / sizeof a[0]))
    if (!strcmp(name, "one-4k")) cycle(rounds, s4k, 1, 0, 0);
    else if (!strcmp(name, "one-1m")) cycle(rounds, s1m, 1, 0, 0);
    else if (!strcmp(name, "one-odd7m")) cycle(rounds, sodd, 1, 0, 0);
    else if (!strcmp(name, "mixed16")) mixed16(rounds);
    else if (!strcmp(name, "alt2-small")) cycle(rounds, small2, 2, 0, 0);
    else if (!strcmp(name, "alt2-small-bg")) cycle(rounds, small2, 2, 16, 4 * KiB);
    else if (!strcmp(name, "alt2-large")) cycle(rounds, large2, 2, 0, 0);
    else if (!strcmp(name, "alt2-mix")) cycle(rounds, mix2, 2, 0, 0);
    else if (!strcmp(name, "alt2-class")) cycle(rounds, cls2, 2, 4, 3 * MiB / 2);
    else if (!strcmp(name, "alt3")) cycle(rounds, three, 3, 0, 0);
    else if (!strcmp(name, "step")) burst(rounds, step, N(step), 1);
    else if (!strcmp(name, "step-past-keep")) burst(rounds, bigstep, N(bigstep), 1);
    else if (!strcmp(name, "under-16")) turn(rounds, MiB - 512, 16);
    else if (!strcmp(name, "over-16")) turn(rounds, MiB + 512, 16);
    else if (!strcmp(name, "under-1")) turn(rounds, MiB - 512, 1);
    else if (!strcmp(name, "over-1")) turn(rounds, MiB + 512, 1);
    else if (!strcmp(name, "park20-1.5m")) burst(rounds, twenty15, 20, 0);
    else if (!strcmp(name, "park20-2m")) burst(rounds, twenty2, 20, 0);
    else if (!strcmp(name, "sizes40")) burst(rounds, many, 40, 0);
    else if (!strcmp(name, "small40")) burst(rounds, manysmall, 40, 0);
    else {
        fprintf(stderr, "gpuarena: bench-patterns: no pattern %s\n", name);
        exit(2);
    }
#undef N
}

int main(int argc, char **argv)
{
    static const char *targets[] = {"pool-arena", "pool-vmm", "shim", "shim-async", "shim-pitch"};
    int t = -1;
    for (int i = 0; argc == 4 && i < 5; i++)
        if (!strcmp(argv[1], targets[i]))
            t = i;
    char *end = NULL;
    long rounds = argc == 4 ? strtol(argv[3], &end, 10) : -1;
    if (t < 0 || !end || *end || rounds < 0) {
        fprintf(stderr, "usage: bench-patterns pool-arena|pool-vmm|shim|shim-async|shim-pitch "
                        "PATTERN ROUNDS\n");
        return 2;
    }
    target = t <= 1 ? 0 : t - 1;
    if (target == 0) {
        ga_pool_backend_t be = hb_backend();
        ga_pool_config_t cfg = {.mode = t == 1 ? GA_MODE_VMM : GA_MODE_ARENA, .grow = 1,
                                .keep = GA_VMM_KEEP_DEFAULT};
        if (getenv("BENCH_KEEP"))
            cfg.keep = (size_t)strtoull(getenv("BENCH_KEEP"), NULL, 10);
        if (t == 1)
            cfg.va_size = (size_t)1 << 36;
        else
            cfg.initial = (size_t)1 << 36;
        ga_status_t st = GA_OK;
        if (!(pool = ga_pool_create(&be, &cfg, &st))) {
            fprintf(stderr, "gpuarena: bench-patterns: no pool (status %d)\n", (int)st);
            return 1;
        }
    } else {
        CUdevice dev;
        CUcontext ctx;
        if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
            cuCtxSetCurrent(ctx) || (target == 2 && cuStreamCreate(&stream, 0))) {
            fprintf(stderr, "gpuarena: bench-patterns: CUDA did not start\n");
            return 1;
        }
    }
    run(argv[2], rounds);
    printf("pairs %ld maps %llu unmaps %llu\n", pairs, hb_maps, hb_unmaps);
    if (pool)
        ga_pool_destroy(pool);
    return 0;
}
