/* Preload tests: stream-ordered safety (issue 13) on the simulated driver's real streams. A stand-in
 * kernel (simcuda_launch) writes 0xAA into buffer A on stream S; A is freed; B is allocated and the
 * program writes 0x55 into it through another, non-blocking stream W. If B received A's bytes
 * while the kernel was still queued, B reads back 0xAA: the hazard.
 *  - GPUARENA_FREE_SYNC=none must show the hazard (a gate holds S, so it is deterministic): the test
 *    can fail, and does when the fence is off.
 *  - deferred (the default) and device must never show it, on blocking, non-blocking and
 *    per-thread default streams, in arena, grow and vmm modes, with threads.
 *  - cuMemFreeAsync + cuMemAllocAsync: another stream never gets the chunk before the event on S
 *    has passed; the same stream gets it back at once, with no synchronisation.
 */
#include "t_stream.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int all_bytes(CUdeviceptr p, unsigned char want)
{
    static __thread unsigned char buf[N];
    if (cuMemcpyDtoH(buf, p, N) != CUDA_SUCCESS)
        return 0;
    for (size_t i = 0; i < N; i++)
        if (buf[i] != want)
            return 0;
    return 1;
}

/* kind: 0 blocking, 1 non-blocking, 2 the per-thread default stream. Returns 1 when B is intact. */
static int one_round(int kind, unsigned delay_us, unsigned *gate)
{
    CUstream s = CU_STREAM_PER_THREAD, w;
    if (kind != 2 && cuStreamCreate(&s, kind == 1 ? CU_STREAM_NON_BLOCKING : 0) != CUDA_SUCCESS)
        return -1;
    if (cuStreamCreate(&w, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return -1;
    CUdeviceptr a, b;
    if (cuMemAlloc(&a, N) != CUDA_SUCCESS)
        return -1;
    if (gate && simcuda_gate(s, gate) != CUDA_SUCCESS)
        return -1;
    if (simcuda_launch(s, a, 0xAA, N, delay_us) != CUDA_SUCCESS || cuMemFree(a) != CUDA_SUCCESS ||
        cuMemAlloc(&b, N) != CUDA_SUCCESS || cuMemsetD8Async(b, 0x55, N, w) != CUDA_SUCCESS ||
        cuStreamSynchronize(w) != CUDA_SUCCESS)
        return -1;
    if (gate)
        simcuda_gate_open(*gate);
    if (cuCtxSynchronize() != CUDA_SUCCESS)
        return -1;
    int ok = all_bytes(b, 0x55);
    cuMemFree(b);
    cuStreamDestroy(w);
    if (kind != 2)
        cuStreamDestroy(s);
    return ok;
}

static void none_child(void *arg)
{
    putenv((char *)arg);
    putenv("GPUARENA_FREE_SYNC=none");
    pt_start();
    unsigned gate;
    exit(one_round(1, 0, &gate) == 0 ? 0 : 1); /* 0: the hazard was seen, as it must be */
}

START_TEST(free_sync_none_shows_the_hazard)
{
    static char *const modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow", "GPUARENA_MODE=vmm"};
    for (int m = 0; m < 3; m++) {
        char err[4096];
        ck_assert_msg(pt_run_child(none_child, modes[m], err, sizeof err) == 0,
                      "%s, GPUARENA_FREE_SYNC=none: B should have read the kernel's bytes (the "
                      "test can see the hazard): %s", modes[m], err);
    }
}
END_TEST

/* vmm mode under GPUARENA_FREE_SYNC=none: a free whose granules go back at once (GPUARENA_VMM_KEEP=0)
 * while a kernel queued earlier still writes them. On a GPU an unmap under queued work is an illegal
 * address that ends the context, so the granules must go only after the work: the simulated driver
 * counts a write that found its memory unmapped as a stream fault. The kernel is held back 20 ms;
 * with the synchronisation in place the outcome does not depend on that delay. */
static void none_unmap_child(void *arg)
{
    (void)arg;
    putenv("GPUARENA_MODE=vmm");
    putenv("GPUARENA_FREE_SYNC=none");
    putenv("GPUARENA_VMM_KEEP=0");
    pt_start();
    CUstream s;
    CUdeviceptr a;
    size_t n = 8u << 20; /* four granules */
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS || cuMemAlloc(&a, n) != CUDA_SUCCESS)
        exit(2);
    unsigned long long live = pt_counters().vmm_bytes_in_use;
    if (simcuda_launch(s, a, 0xAA, n, 20000) != CUDA_SUCCESS || cuMemFree(a) != CUDA_SUCCESS)
        exit(3);
    if (pt_counters().vmm_bytes_in_use + n > live)
        exit(4); /* the granules went back at the free */
    if (cuCtxSynchronize() != CUDA_SUCCESS)
        exit(5);
    exit(pt_counters().stream_faults == 0 ? 0 : 6);
}

START_TEST(free_sync_none_vmm_never_unmaps_under_work)
{
    char err[4096];
    int rc = pt_run_child(none_unmap_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d (4: the granules stayed mapped, 6: the kernel found its memory "
                  "unmapped); %s", rc, err);
}
END_TEST

typedef struct safe_job {
    CUcontext ctx;
    int kind, bad;
} safe_job_t;

static void *safe_thread(void *arg)
{
    safe_job_t *j = arg;
    cuCtxSetCurrent(j->ctx);
    for (int r = 0; r < 3; r++)
        if (one_round(j->kind, 20000, NULL) != 1)
            j->bad++;
    return NULL;
}

static const char *g_sync;

static void safe_child(void *arg)
{
    putenv((char *)arg);
    putenv((char *)g_sync);
    CUcontext ctx = pt_start();
    for (int kind = 0; kind < 3; kind++) {
        safe_job_t j[3] = {{ctx, kind, 0}, {ctx, kind, 0}, {ctx, kind, 0}};
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
            pthread_create(&t[i], NULL, safe_thread, &j[i]);
        for (int i = 0; i < 3; i++) {
            pthread_join(t[i], NULL);
            if (j[i].bad)
                exit(10 + kind);
        }
    }
    exit(0);
}

static void safe_every_mode(const char *sync)
{
    static char *const modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow", "GPUARENA_MODE=vmm",
                                  "GPUARENA_MODE=platform"};
    g_sync = sync;
    for (int m = 0; m < 4; m++) {
        char err[4096];
        int rc = pt_run_child(safe_child, modes[m], err, sizeof err);
        ck_assert_msg(rc == 0, "%s %s: exit %d (10 blocking, 11 non-blocking, 12 per-thread stream: "
                      "B read the kernel's bytes); %s", modes[m], sync, rc, err);
    }
}

START_TEST(free_sync_deferred_is_safe)
{
    safe_every_mode("GPUARENA_FREE_SYNC=deferred");
}
END_TEST

START_TEST(free_sync_device_is_safe)
{
    safe_every_mode("GPUARENA_FREE_SYNC=device");
}
END_TEST

/* ---- the stream-ordered pool ---- */
START_TEST(async_pool_stream_ordered)
{
    pt_env("GPUARENA_MODE=arena", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUstream s, w;
    ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamCreate(&w, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr a, b, c;
    ck_assert_int_eq(cuMemAllocAsync(&a, N, s), CUDA_SUCCESS);
    simcuda_counters_t k = pt_counters();
    ck_assert_uint_eq(k.async_alloc_calls, 0); /* served by the pool, not the driver */
    unsigned gate;
    ck_assert_int_eq(simcuda_gate(s, &gate), CUDA_SUCCESS);
    ck_assert_int_eq(simcuda_launch(s, a, 0xAA, N, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFreeAsync(a, s), CUDA_SUCCESS); /* returns at once: the gate holds s */
    /* Another stream: not a's bytes while s has not passed the free. */
    ck_assert_int_eq(cuMemAllocAsync(&b, N, w), CUDA_SUCCESS);
    ck_assert_msg(b + N <= a || a + N <= b, "another stream got the chunk before s passed its free");
    ck_assert_int_eq(cuMemsetD8Async(b, 0x55, N, w), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamSynchronize(w), CUDA_SUCCESS);
    /* The same stream: a's chunk back at once, its work ordered after the kernel. */
    ck_assert_int_eq(cuMemAllocAsync(&c, N, s), CUDA_SUCCESS);
    ck_assert_uint_eq(c, a);
    ck_assert_int_eq(cuMemsetD8Async(c, 0x33, N, s), CUDA_SUCCESS);
    simcuda_gate_open(gate);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert(all_bytes(b, 0x55));
    ck_assert(all_bytes(c, 0x33));
    ck_assert_int_eq(cuMemFreeAsync(b, w), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFreeAsync(c, s), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    /* Once s has passed, anyone may have it. */
    CUdeviceptr d;
    ck_assert_int_eq(cuMemAllocAsync(&d, N, w), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().async_free_calls, 0);
}
END_TEST

START_TEST(free_sync_lazy_is_safe)
{
    safe_every_mode("GPUARENA_FREE_SYNC=lazy");
}
END_TEST

/* GPUARENA_FREE_SYNC=lazy synchronises only when the pool could not serve an allocation without
 * the pending chunks or they grew past their bounds (256 MiB): 1,000 pairs of 1 MiB in a 6 GiB
 * arena synchronise about every 256 pairs, where deferred synchronises at every allocation but
 * the first; grow mode, whose regions hold little spare memory, in between (every other pair
 * here); in vmm mode lazy while the place is on mapped granules (64 KiB, 1 MiB, 4 MiB). Counted
 * from the statistics file. */
static size_t g_lazy_size = 1u << 20;
static int g_lazy_warm; /* blocks allocated, freed and synchronised first (vmm: kept granules) */

static void lazy_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr warm[64];
    for (int i = 0; i < g_lazy_warm; i++)
        if (cuMemAlloc(&warm[i], g_lazy_size) != CUDA_SUCCESS)
            exit(3);
    for (int i = 0; i < g_lazy_warm; i++)
        if (cuMemFree(warm[i]) != CUDA_SUCCESS)
            exit(3);
    if (g_lazy_warm && cuCtxSynchronize() != CUDA_SUCCESS)
        exit(3);
    for (int i = 0; i < 1000; i++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, g_lazy_size) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
            exit(2);
    }
    exit(0);
}

static void lazy_run(const char *mode, const char *sync, const char *expr)
{
    char stats[] = "/tmp/gpuarena-lazy-XXXXXX", senv[128], err[4096];
    close(mkstemp(stats));
    snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
    pt_env(senv, mode, sync, "SIMCUDA_TOTAL_MEM=8GiB", NULL);
    int rc = pt_run_child(lazy_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "%s %s: exit %d; %s", mode, sync, rc, err);
    ck_assert_msg(pt_json_check(stats, expr) == 0, "%s %s: %s", mode, sync, expr);
    unlink(stats);
}

START_TEST(free_sync_lazy_synchronises_less)
{
    lazy_run("GPUARENA_MODE=arena", "GPUARENA_FREE_SYNC=lazy",
             "(t := d['totals']) and 2 <= t['free_syncs'] <= 5 and "
             "t['lazy_allocs'] + t['free_syncs'] == 999 and d['options']['free_sync'] == 'lazy'");
    lazy_run("GPUARENA_MODE=grow", "GPUARENA_FREE_SYNC=lazy",
             "(t := d['totals']) and t['lazy_allocs'] > 0 and t['lazy_allocs'] + t['free_syncs'] == 999");
    lazy_run("GPUARENA_MODE=arena", "GPUARENA_FREE_SYNC=deferred",
             "(t := d['totals']) and t['free_syncs'] == 999 and t['lazy_allocs'] == 0");
    /* vmm: one block at a time; the next one's place is beside the pending one, on granules
     * never mapped: every allocation would map, so each synchronises first */
    lazy_run("GPUARENA_MODE=vmm", "GPUARENA_FREE_SYNC=lazy",
             "(t := d['totals']) and t['free_syncs'] == 999 and t['lazy_allocs'] == 0");
    /* vmm after 32 blocks were freed and passed (granules kept, 32 MiB of the 64 MiB keep):
     * lazy while the place is on them, whatever the size (1 MiB: half a granule, a class; 4 MiB,
     * 16 blocks: a granule multiple); it synchronised at every allocation from half a granule up
     * until 2026-12-06 (999 of 999) */
    g_lazy_warm = 32;
    lazy_run("GPUARENA_MODE=vmm", "GPUARENA_FREE_SYNC=lazy",
             "(t := d['totals']) and t['lazy_allocs'] > 900 and t['lazy_allocs'] + t['free_syncs'] == 999");
    g_lazy_size = 4u << 20, g_lazy_warm = 16;
    lazy_run("GPUARENA_MODE=vmm", "GPUARENA_FREE_SYNC=lazy",
             "(t := d['totals']) and t['lazy_allocs'] > 900 and t['lazy_allocs'] + t['free_syncs'] == 999");
    g_lazy_size = 1u << 20, g_lazy_warm = 0;
    /* device: every free waits for the device itself, and each wait is counted (they were not) */
    lazy_run("GPUARENA_MODE=arena", "GPUARENA_FREE_SYNC=device",
             "(t := d['totals']) and t['free_syncs'] == 1000 and t['lazy_allocs'] == 0");
    g_lazy_size = 64u << 10; /* vmm, under half a granule: lazy while it maps nothing */
    lazy_run("GPUARENA_MODE=vmm", "GPUARENA_FREE_SYNC=lazy",
             "(t := d['totals']) and t['lazy_allocs'] > 900 and t['lazy_allocs'] + t['free_syncs'] == 999");
}
END_TEST

/* ---- the program's own cuCtxSynchronize returns the chunks pending when it began ----
 * Each round frees eight 1 MiB blocks and synchronises; the next round's allocations then find
 * nothing pending (no synchronisation of the shim's own), and in vmm mode with nothing kept the
 * driver's mapped bytes fall to zero at the synchronisation, not at the next allocation.
 * how: 0 cuCtxSynchronize, 1 cuCtxSynchronize_v2 naming the context, 2 cuCtxSynchronize_v2(NULL),
 * 3 what cuGetProcAddress_v2 gives for "cuCtxSynchronize" at 13000 (what the runtime calls). */
static void program_sync_child(void *arg)
{
    int how = (int)(intptr_t)arg;
    CUcontext ctx = pt_start();
    CUresult (*v2)(CUcontext) = NULL;
    if (how == 3) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult q;
        if (cuGetProcAddress_v2("cuCtxSynchronize", &fn, 13000, 0, &q) != CUDA_SUCCESS ||
            !pt_in_shim(fn, NULL))
            exit(2);
        v2 = (CUresult(*)(CUcontext))fn;
    }
    const char *mode = getenv("GPUARENA_MODE");
    int vmm = mode && !strcmp(mode, "vmm");
    for (int round = 0; round < 100; round++) {
        CUdeviceptr p[8];
        for (int i = 0; i < 8; i++)
            if (cuMemAlloc(&p[i], N) != CUDA_SUCCESS)
                exit(3);
        for (int i = 0; i < 8; i++)
            if (cuMemFree(p[i]) != CUDA_SUCCESS)
                exit(4);
        if (vmm && pt_counters().vmm_bytes_in_use < 8 * N)
            exit(5); /* pending: still mapped until the device has passed the frees */
        CUresult r = how == 0 ? cuCtxSynchronize() : how == 1 ? cuCtxSynchronize_v2(ctx)
                   : how == 2 ? cuCtxSynchronize_v2(NULL) : v2(NULL);
        if (r != CUDA_SUCCESS)
            exit(6);
        if (vmm && pt_counters().vmm_bytes_in_use != 0)
            exit(7); /* GPUARENA_VMM_KEEP=0: every granule went back at the synchronisation */
    }
    exit(0);
}

START_TEST(program_sync_returns_pending)
{
    static const char *const modes[] = PT_POOL_MODES;
    for (int m = 0; m < 3; m++)
        for (int how = 0; how < 4; how++) {
            char stats[] = "/tmp/gpuarena-psync-XXXXXX", senv[128], err[4096];
            close(mkstemp(stats));
            snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
            pt_env(senv, modes[m], "GPUARENA_VMM_KEEP=0", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
            int rc = pt_run_child(program_sync_child, (void *)(intptr_t)how, err, sizeof err);
            ck_assert_msg(rc == 0, "%s, way %d: exit %d; %s", modes[m], how, rc, err);
            ck_assert_msg(pt_json_check(stats, "(t := d['totals']) and t['program_syncs'] == 100 "
                                               "and t['free_syncs'] == 0 and "
                                               "t['pending_bytes'] == 0") == 0,
                          "%s, way %d: 100 synchronisations returned the chunks, the shim made "
                          "none of its own", modes[m], how);
            unlink(stats);
        }
}
END_TEST

/* Synchronising another context passes nothing of this one: a chunk freed here under a kernel
 * still queued stays pending, and B never receives it while the kernel may write (deferred). */
static void other_ctx_child(void *arg)
{
    putenv((char *)arg);
    CUcontext mine = pt_start(), other;
    CUdevice dev;
    CUstream s, w;
    CUdeviceptr a, b;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate(&other, NULL, 0, dev) || cuCtxSetCurrent(mine) ||
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuStreamCreate(&w, CU_STREAM_NON_BLOCKING) ||
        cuMemAlloc(&a, N))
        exit(2);
    if (simcuda_launch(s, a, 0xAA, N, 20000) != CUDA_SUCCESS || cuMemFree(a) != CUDA_SUCCESS ||
        cuCtxSynchronize_v2(other) != CUDA_SUCCESS || cuMemAlloc(&b, N) != CUDA_SUCCESS ||
        cuMemsetD8Async(b, 0x55, N, w) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS)
        exit(3);
    exit(all_bytes(b, 0x55) ? 0 : 10);
}

START_TEST(program_sync_of_another_context_passes_nothing)
{
    static char *const modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow", "GPUARENA_MODE=vmm"};
    for (int m = 0; m < 3; m++) {
        char err[4096];
        int rc = pt_run_child(other_ctx_child, modes[m], err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (10: B read the kernel's bytes); %s", modes[m], rc, err);
    }
}
END_TEST

/* The program's own cuCtxSynchronize in context A passes nothing queued on context B's streams:
 * A's block freed with cuMemFreeAsync on a stream of B (held by a gate behind a kernel writing the
 * block) stays pending through A's synchronisation, so A's next allocation never receives it
 * while the kernel may still write (helper-42 F1). arg: "async" (the block from
 * cuMemAllocAsync) or "sync" (cuMemAlloc). */
static void xctx_async_child(void *arg)
{
    int from_async = !strcmp((const char *)arg, "async");
    CUcontext a = pt_start(), b;
    CUdevice dev;
    CUstream sa, sb;
    CUdeviceptr p, q;
    unsigned gate;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate(&b, NULL, 0, dev) || cuCtxSetCurrent(a) ||
        cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING))
        exit(2);
    if (from_async ? cuMemAllocAsync(&p, N, sa) || cuStreamSynchronize(sa) : cuMemAlloc(&p, N))
        exit(3);
    if (cuCtxSetCurrent(b) || cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) ||
        simcuda_gate(sb, &gate) != CUDA_SUCCESS || simcuda_launch(sb, p, 0xAA, N, 0) != CUDA_SUCCESS ||
        cuMemFreeAsync(p, sb) != CUDA_SUCCESS)
        exit(4);
    if (cuCtxSetCurrent(a) || cuCtxSynchronize() || cuMemAlloc(&q, N) || cuMemsetD8(q, 0x55, N))
        exit(5);
    simcuda_gate_open(gate);
    if (cuCtxSetCurrent(b) || cuStreamSynchronize(sb) || cuCtxSetCurrent(a))
        exit(6);
    exit(all_bytes(q, 0x55) ? 0 : 10);
}

START_TEST(program_sync_passes_no_async_free_of_another_context)
{
    static const char *const modes[] = PT_POOL_MODES;
    static const char *const syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy",
                                        "GPUARENA_FREE_SYNC=device", "GPUARENA_FREE_SYNC=none"};
    static char *const from[] = {"async", "sync"};
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < 4; k++)
            for (int f = 0; f < 2; f++) {
                char err[4096];
                pt_env(modes[m], syncs[k], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
                int rc = pt_run_child(xctx_async_child, from[f], err, sizeof err);
                ck_assert_msg(rc == 0, "%s %s, block from %s: exit %d (10: the new block read the "
                              "queued kernel's bytes); %s", modes[m], syncs[k], from[f], rc, err);
            }
}
END_TEST

/* Opens a gate once the driver has seen `calls` cuCtxSynchronize calls in all (a count, not a
 * time: the thread that must wait is inside the driver's synchronisation by then), or when told
 * to stop. */
typedef struct opener {
    unsigned gate;
    unsigned long long calls;
    _Atomic int stop;
} opener_t;

static void *open_at_sync(void *arg)
{
    opener_t *o = arg;
    while (!atomic_load(&o->stop) && simcuda_entry_calls("cuCtxSynchronize") < o->calls)
        sched_yield();
    simcuda_gate_open(o->gate);
    return NULL;
}

/* A kernel queued on a stream of context B (same device) writes A's block; A frees the block with
 * cuMemFree and allocates again. The driver's cuMemFree waits for the device, so the fence must
 * wait for B's stream too, not only A's (helper-42 F2): B's stream is held by a gate that a
 * thread opens once the driver has been asked to synchronise twice (A, then B). Without the wait
 * for B the allocation returns the block and the kernel overwrites it afterwards. B has allocated
 * once: gpuarena waits for the contexts it knows (README, limits). arg "sync" or "sync_v2": the
 * program synchronises A itself between the free and the allocation, which waits for A alone and
 * so must not return the block (helper-49 F1: it did, and B's kernel overwrote it). */
static void xctx_free_child(void *arg)
{
    CUcontext a = pt_start(), b;
    CUdevice dev;
    CUstream sb;
    CUdeviceptr p, q;
    opener_t o = {.stop = 0};
    pthread_t t;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate(&b, NULL, 0, dev) || cuCtxSetCurrent(a) ||
        cuMemAlloc(&p, N) || cuCtxSetCurrent(b) || cuMemAlloc(&q, 4096) ||
        cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) ||
        simcuda_gate(sb, &o.gate) != CUDA_SUCCESS || simcuda_launch(sb, p, 0xAA, N, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(a))
        exit(2);
    const char *sync = arg, *fs = getenv("GPUARENA_FREE_SYNC");
    /* The gate opens at B's synchronisation: the second cuCtxSynchronize (A's, then B's), or the
     * first where the program synchronised A with cuCtxSynchronize_v2 (another entry point) and the
     * allocation's fence then waits for B alone (GPUARENA_FREE_SYNC=device waits at the free). */
    int v2_only = sync && !strcmp(sync, "sync_v2") && !(fs && !strcmp(fs, "device"));
    o.calls = simcuda_entry_calls("cuCtxSynchronize") + (v2_only ? 1 : 2);
    if (pthread_create(&t, NULL, open_at_sync, &o))
        exit(3);
    if (cuMemFree(p) || (sync && !strcmp(sync, "sync") && cuCtxSynchronize()) ||
        (sync && !strcmp(sync, "sync_v2") && cuCtxSynchronize_v2(a)) || cuMemAlloc(&q, N) ||
        cuMemsetD8(q, 0x55, N))
        exit(4);
    atomic_store(&o.stop, 1);
    pthread_join(t, NULL);
    if (cuCtxSetCurrent(b) || cuStreamSynchronize(sb) || cuCtxSetCurrent(a))
        exit(5);
    exit(all_bytes(q, 0x55) ? 0 : 10);
}

START_TEST(free_waits_for_other_contexts_on_the_device)
{
    static const char *const modes[] = PT_POOL_MODES;
    static const char *const syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy",
                                        "GPUARENA_FREE_SYNC=device"};
    static char *const program[] = {NULL, "sync", "sync_v2"};
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < 3; k++)
            for (int y = 0; y < 3; y++) {
                char err[4096];
                pt_env(modes[m], syncs[k], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
                int rc = pt_run_child(xctx_free_child, program[y], err, sizeof err);
                ck_assert_msg(rc == 0, "%s %s, program's own synchronisation %s: exit %d (10: the "
                              "new block read the other context's kernel's bytes); %s", modes[m],
                              syncs[k], program[y] ? program[y] : "none", rc, err);
            }
}
END_TEST

/* A synchronisation the driver refuses waited for nothing, so a chunk freed before it is still
 * pending: here every cuCtxSynchronize is refused (injected) while a gate holds the kernel that
 * writes a freed 32 MiB block, under a 64 MiB cap with 8 MiB live, and an allocation of 32 MiB
 * needs that block's room. It must be refused (or placed elsewhere), never given the block: the
 * out-of-memory path's wait ignored the refusal and returned the block, and in vmm mode could
 * unmap its granules under the kernel (an outside test, helper-91); under GPUARENA_FREE_SYNC=device
 * the free's own refused wait returned the block at once. The out-of-memory says why (it said to
 * raise GPUARENA_LIMIT). arg: the GPUARENA_FREE_SYNC setting.
 * No timing: the refused calls return at once, the gate opens after the check. */
static void refused_sync_child(void *arg)
{
    putenv((char *)arg);
    pt_start();
    CUstream s;
    CUdeviceptr live, a, b = 0;
    unsigned gate;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&live, 8 * MiB) ||
        cuMemAlloc(&a, 32 * MiB) || simcuda_gate(s, &gate) ||
        simcuda_launch(s, a, 0xAA, 32 * MiB, 0))
        exit(2);
    if (simcuda_fail_add("cuCtxSynchronize:1+:CUDA_ERROR_UNKNOWN") ||
        simcuda_fail_add("cuCtxSynchronize_v2:1+:CUDA_ERROR_UNKNOWN") || cuMemFree(a))
        exit(2);
    CUresult r = cuMemAlloc(&b, 32 * MiB);
    simcuda_fail_clear();
    int overlap = r == CUDA_SUCCESS && b < a + 32 * MiB && a < b + 32 * MiB;
    simcuda_gate_open(gate);
    if (cuCtxSynchronize())
        exit(2);
    exit(overlap ? 3 : pt_counters().stream_faults ? 4 : 0);
}

START_TEST(refused_sync_keeps_pending)
{
    static const char *const modes[] = PT_POOL_MODES;
    static char *const syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy",
                                  "GPUARENA_FREE_SYNC=device"};
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < 3; k++) {
            char err[4096];
            pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=64MiB", NULL);
            int rc = pt_run_child(refused_sync_child, syncs[k], err, sizeof err);
            ck_assert_msg(rc == 0, "%s %s: exit %d (3: the allocation got the freed block while "
                          "its kernel was held, 4: the kernel found its memory unmapped); %s",
                          modes[m], syncs[k], rc, err);
            ck_assert_msg(strstr(err, "32.0 MiB freed are still waiting for the device: the "
                                 "synchronisation that would pass them was refused"),
                          "%s %s: the out-of-memory does not say why: %s", modes[m], syncs[k], err);
        }
}
END_TEST

/* The same for the other contexts of the device: context B's kernel, held by a gate, writes A's
 * freed block; A's own synchronisation succeeds and B's is refused (injected, that call alone).
 * The block is still pending: the allocation that follows gets other memory, and under
 * GPUARENA_FREE_SYNC=device the free leaves it pending (the next allocation's wait, B's
 * synchronisation answered this time, returns once a thread opens the gate). Before, the refusal
 * was not looked at: the allocation got the block, and the kernel's bytes landed in it. */
static void refused_peer_sync_child(void *arg)
{
    putenv((char *)arg);
    CUcontext a = pt_start(), b;
    CUdevice dev;
    CUstream sb;
    CUdeviceptr p, q;
    opener_t o = {.stop = 0};
    pthread_t t;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate(&b, NULL, 0, dev) || cuCtxSetCurrent(a) ||
        cuMemAlloc(&p, N) || cuCtxSetCurrent(b) || cuMemAlloc(&q, 4096) ||
        cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || simcuda_gate(sb, &o.gate) ||
        simcuda_launch(sb, p, 0xAA, N, 0) || cuCtxSetCurrent(a))
        exit(2);
    unsigned long long n0 = simcuda_entry_calls("cuCtxSynchronize");
    char rule[64];
    snprintf(rule, sizeof rule, "cuCtxSynchronize:%llu:CUDA_ERROR_UNKNOWN", n0 + 2);
    if (simcuda_fail_add(rule))
        exit(2);
    o.calls = n0 + 4; /* A, B refused, then A and B again at the allocation's wait */
    if (pthread_create(&t, NULL, open_at_sync, &o))
        exit(2);
    if (cuMemFree(p) || cuMemAlloc(&q, N) || cuMemsetD8(q, 0x55, N))
        exit(4);
    atomic_store(&o.stop, 1);
    pthread_join(t, NULL);
    simcuda_fail_clear();
    if (cuCtxSetCurrent(b) || cuStreamSynchronize(sb) || cuCtxSetCurrent(a))
        exit(5);
    exit(all_bytes(q, 0x55) ? 0 : 3);
}

START_TEST(refused_peer_sync_keeps_pending)
{
    static const char *const modes[] = PT_POOL_MODES;
    static char *const syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=device"};
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < 2; k++) {
            char err[4096];
            pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
            int rc = pt_run_child(refused_peer_sync_child, syncs[k], err, sizeof err);
            ck_assert_msg(rc == 0, "%s %s: exit %d (3: the new block read the other context's "
                          "kernel's bytes); %s", modes[m], syncs[k], rc, err);
        }
}
END_TEST

/* vmm: a stream-ordered block kept past its context's destroy (an orphan), written by a kernel of
 * the primary context that a gate holds, freed with cuMemFree while every cuCtxSynchronize is
 * refused (injected). An orphan's granules go back at its free, and it has no pending list: the
 * free answers the refusal and frees nothing, and a later free succeeds. Before, the refusal was
 * not looked at and the granules were unmapped under the kernel (stream_faults 1; on a GPU an
 * illegal address): an outside test, helper-91. */
static void refused_sync_orphan_child(void *arg)
{
    (void)arg;
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUcontext prim = pt_start(), made;
    CUdevice dev;
    CUstream sm, sp;
    CUdeviceptr p, q;
    unsigned gate;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate(&made, NULL, 0, dev) ||
        cuStreamCreate(&sm, CU_STREAM_NON_BLOCKING) || cuMemAllocAsync(&p, 8 * MiB, sm) ||
        cuStreamSynchronize(sm) || cuCtxDestroy(made) || cuCtxSetCurrent(prim) ||
        cuMemAlloc(&q, 4096) || cuStreamCreate(&sp, CU_STREAM_NON_BLOCKING) ||
        simcuda_gate(sp, &gate) || simcuda_launch(sp, p, 0xAA, 8 * MiB, 0) ||
        simcuda_fail_add("cuCtxSynchronize:1+:CUDA_ERROR_UNKNOWN"))
        exit(2);
    CUresult r = cuMemFree(p);
    simcuda_fail_clear();
    simcuda_gate_open(gate);
    if (cuCtxSynchronize())
        exit(2);
    if (pt_counters().stream_faults)
        exit(3);
    exit(r == CUDA_ERROR_UNKNOWN && cuMemFree(p) == CUDA_SUCCESS ? 0 : 4);
}

START_TEST(refused_sync_keeps_orphan_block)
{
    char err[4096];
    int rc = pt_run_child(refused_sync_orphan_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d (3: the kernel found the block's granules unmapped, 4: the free "
                  "did not answer the refusal, or the later free failed); %s", rc, err);
}
END_TEST

TCase *pt_tcase_stream(void)
{
    TCase *tc = tcase_create("stream");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, free_sync_none_shows_the_hazard);
    tcase_add_test(tc, free_sync_none_vmm_never_unmaps_under_work);
    tcase_add_test(tc, free_sync_deferred_is_safe);
    tcase_add_test(tc, free_sync_device_is_safe);
    tcase_add_test(tc, free_sync_lazy_is_safe);
    tcase_add_test(tc, free_sync_lazy_synchronises_less);
    tcase_add_test(tc, async_pool_stream_ordered);
    tcase_add_test(tc, program_sync_returns_pending);
    tcase_add_test(tc, program_sync_of_another_context_passes_nothing);
    tcase_add_test(tc, program_sync_passes_no_async_free_of_another_context);
    tcase_add_test(tc, free_waits_for_other_contexts_on_the_device);
    tcase_add_test(tc, refused_sync_keeps_pending);
    tcase_add_test(tc, refused_peer_sync_keeps_pending);
    tcase_add_test(tc, refused_sync_keeps_orphan_block);
    pt_stream_wait_add(tc);  /* t_stream_wait.c */
    pt_stream_async_add(tc); /* t_stream_async.c */
    return tc;
}
