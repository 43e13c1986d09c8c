/* Preload tests: cuMemAllocAsync/cuMemFreeAsync beyond the basic stream order (split from
 * t_stream.c; shared pieces in t_stream.h): platform mode passing them through, per-thread default
 * streams, frees passed through and held, the driver's pool kept under the cap, same-stream
 * handovers, the stream's context, and stream capture. Added to the "stream" case by
 * pt_stream_async_add().
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

START_TEST(async_platform_passes_through)
{
    pt_env("GPUARENA_MODE=platform", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr a;
    ck_assert_int_eq(cuMemAllocAsync(&a, N, NULL), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().async_alloc_calls, 1);
    ck_assert_int_eq(cuMemFreeAsync(a, NULL), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().async_free_calls, 1);
}
END_TEST

/* The per-thread default stream is one handle (CU_STREAM_PER_THREAD, or NULL through the _ptsz
 * entry points) for a different stream in each thread. A chunk freed async on thread 1's stream,
 * under a kernel still queued there, must not go to thread 2's allocation on "the same" handle
 * (B must not be A, and must read back what thread 2 wrote once the kernel has run); thread 1's own
 * next allocation on its stream gets it back at once. Through _ptsz, the free's event goes on
 * thread 1's per-thread stream, not the legacy stream (which thread 2's blocking stream would then
 * wait behind, the gate never opened: a stall). */
/* cuda.h declares the _ptsz names only for per-thread-stream builds; the driver exports them. */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

static CUcontext g_pt_ctx;
static int g_pt_ptsz;
static unsigned g_pt_gate;
static CUdeviceptr g_pt_a;

static CUresult pt_async_alloc(CUdeviceptr *p, size_t n)
{
    return g_pt_ptsz ? cuMemAllocAsync_ptsz(p, n, NULL) : cuMemAllocAsync(p, n, CU_STREAM_PER_THREAD);
}

static CUresult pt_async_free(CUdeviceptr p)
{
    return g_pt_ptsz ? cuMemFreeAsync_ptsz(p, NULL) : cuMemFreeAsync(p, CU_STREAM_PER_THREAD);
}

static void *per_thread_first(void *arg)
{
    (void)arg;
    CUdeviceptr again;
    if (cuCtxSetCurrent(g_pt_ctx) || pt_async_alloc(&g_pt_a, N) ||
        simcuda_gate(CU_STREAM_PER_THREAD, &g_pt_gate) ||
        simcuda_launch(CU_STREAM_PER_THREAD, g_pt_a, 0xAA, N, 0) || pt_async_free(g_pt_a))
        return (void *)1;
    /* The same thread's stream: the chunk back at once, ordered after the kernel. */
    if (pt_async_alloc(&again, N) || again != g_pt_a || pt_async_free(again))
        return (void *)2;
    return NULL;
}

static void *per_thread_second(void *arg)
{
    (void)arg;
    static unsigned char h[N];
    CUdeviceptr b;
    memset(h, 0x55, N);
    if (cuCtxSetCurrent(g_pt_ctx) || pt_async_alloc(&b, N))
        return (void *)3;
    if (b < g_pt_a + N && g_pt_a < b + N)
        return (void *)4; /* another thread's stream got the chunk before the free passed */
    if (cuMemcpyHtoDAsync(b, h, N, CU_STREAM_PER_THREAD) || cuStreamSynchronize(CU_STREAM_PER_THREAD))
        return (void *)5;
    simcuda_gate_open(g_pt_gate);
    if (cuCtxSynchronize() || !all_bytes(b, 0x55))
        return (void *)6;
    return NULL;
}

static void per_thread_child(void *arg)
{
    g_pt_ptsz = (int)(intptr_t)arg;
    g_pt_ctx = pt_start();
    pthread_t t;
    void *r1 = NULL, *r2 = NULL;
    if (pthread_create(&t, NULL, per_thread_first, NULL) || pthread_join(t, &r1) || r1)
        exit(10 + (int)(intptr_t)r1);
    if (pthread_create(&t, NULL, per_thread_second, NULL) || pthread_join(t, &r2) || r2)
        exit(10 + (int)(intptr_t)r2);
    exit(0);
}

START_TEST(async_per_thread_streams_not_shared)
{
    static const char *const modes[] = PT_POOL_MODES;
    for (int m = 0; m < 3; m++)
        for (int ptsz = 0; ptsz < 2; ptsz++) {
            char err[4096];
            pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
            int rc = pt_run_child(per_thread_child, (void *)(intptr_t)ptsz, err, sizeof err);
            ck_assert_msg(rc == 0, "%s, %s: exit %d (12: no same-stream handover in the thread, "
                          "14: another thread's per-thread stream got the chunk, 16: its bytes "
                          "were overwritten by the kernel); %s", modes[m],
                          ptsz ? "_ptsz with NULL" : "CU_STREAM_PER_THREAD", rc, err);
        }
}
END_TEST

/* cuMemFreeAsync of memory the driver's own pools serve (cuMemAllocFromPoolAsync in any mode,
 * cuMemAllocAsync in platform mode): the driver holds it until the stream passes the free, so its
 * bytes stay under the cap until then. 48 MiB under a 64 MiB cap, freed behind a 50 ms kernel,
 * then 48 MiB more: the allocation waits for the stream rather than take memory the driver still
 * holds, so the driver never holds more than the cap. The statistics show it returned in full. */
static void pass_free_child(void *arg)
{
    int from_pool = (int)(intptr_t)arg;
    pt_start();
    CUstream s;
    CUdeviceptr p, q;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))
        exit(2);
    CUresult r = from_pool ? cuMemAllocFromPoolAsync(&p, 48 * MiB, NULL, s)
                           : cuMemAllocAsync(&p, 48 * MiB, s);
    if (r != CUDA_SUCCESS || simcuda_launch(s, p, 0xAA, N, 50000) || cuMemFreeAsync(p, s))
        exit(3);
    if (cuMemAlloc(&q, 48 * MiB) != CUDA_SUCCESS)
        exit(4);
    if (pt_counters().peak_bytes_in_use > 64 * MiB)
        exit(5); /* the driver held both: the cap was escaped */
    if (cuMemFree(q) || cuCtxSynchronize())
        exit(6);
    exit(0);
}

/* After the program's own cuStreamSynchronize the driver holds none of an async-freed pass-through
 * block; the statistics at exit must not report it as held (helper-42 F9). */
static void pass_synced_child(void *arg)
{
    int from_pool = (int)(intptr_t)arg;
    pt_start();
    CUstream s;
    CUdeviceptr p;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))
        exit(2);
    CUresult r = from_pool ? cuMemAllocFromPoolAsync(&p, 8 * MiB, NULL, s)
                           : cuMemAllocAsync(&p, 8 * MiB, s);
    if (r != CUDA_SUCCESS || simcuda_launch(s, p, 0xAA, N, 0) || cuMemFreeAsync(p, s) ||
        cuStreamSynchronize(s))
        exit(3);
    if (pt_counters().bytes_in_use != 0)
        exit(4);
    exit(0);
}

START_TEST(async_free_pass_through_synced_not_reported_held)
{
    static const char *const modes[] = {"GPUARENA_MODE=platform", "GPUARENA_MODE=arena"};
    for (int m = 0; m < 2; m++) {
        char stats[] = "/tmp/gpuarena-psync-XXXXXX", senv[128], err[4096];
        close(mkstemp(stats));
        snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
        pt_env(senv, modes[m], "GPUARENA_PREALLOCATE=false", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(pass_synced_child, (void *)(intptr_t)m, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d; %s", modes[m], rc, err);
        ck_assert_msg(pt_json_check(stats, "(t := d['totals']) and t['reserved'] == 0 and "
                                           "t['passthrough_bytes'] == 0") == 0,
                      "%s: the statistics at exit count no byte the driver has back", modes[m]);
        unlink(stats);
    }
}
END_TEST

START_TEST(async_free_pass_through_held_until_passed)
{
    static const char *const modes[] = {"GPUARENA_MODE=platform", "GPUARENA_MODE=grow"};
    for (int m = 0; m < 2; m++)
        for (int from_pool = 0; from_pool < 2; from_pool++) {
            if (m == 1 && !from_pool)
                continue; /* grow mode serves cuMemAllocAsync from its own pool */
            char stats[] = "/tmp/gpuarena-pfree-XXXXXX", senv[128], err[4096];
            close(mkstemp(stats));
            snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
            pt_env(senv, modes[m], "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
            int rc = pt_run_child(pass_free_child, (void *)(intptr_t)from_pool, err, sizeof err);
            ck_assert_msg(rc == 0, "%s, %s: exit %d (4: refused, 5: the driver held 96 MiB "
                          "under a 64 MiB cap); %s", modes[m],
                          from_pool ? "cuMemAllocFromPoolAsync" : "cuMemAllocAsync", rc, err);
            ck_assert_msg(pt_json_check(stats, "(t := d['totals']) and t['in_use'] == 0 and "
                                               "t['passthrough_bytes'] == 0 and "
                                               "t['peak_in_use'] == 48 * 2**20") == 0,
                          "%s: every byte back, and never both held", modes[m]);
            unlink(stats);
        }
}
END_TEST

/* A driver pool whose release threshold is above 0 keeps a freed block's memory after its stream
 * passed the free (PyTorch's cudaMallocAsync backend sets the threshold to the maximum): the device
 * still holds it, so the cap must too. 40 MiB kept and 40 MiB allocated do not fit 64 MiB: the
 * allocation is served once gpuarena has trimmed the pool, never with both held (helper-48 F2:
 * the driver held 80 MiB under a 64 MiB cap). arg: 0 cuMemAllocAsync, 1 cuMemAllocFromPoolAsync;
 * then a synchronous cuMemAlloc (2) or another stream-ordered block (0, 1) needs the room. */
static void pool_kept_child(void *arg)
{
    int kind = (int)(intptr_t)arg;
    pt_start();
    CUstream s;
    CUmemoryPool pool;
    CUdeviceptr p, q;
    cuuint64_t max = ~0ull, v = 0;
    size_t free_b, total_b;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuDeviceGetDefaultMemPool(&pool, 0) ||
        cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max))
        exit(2);
    for (int round = 0; round < 3; round++) {
        CUresult r = kind & 1 ? cuMemAllocFromPoolAsync(&p, 40 * MiB, pool, s)
                              : cuMemAllocAsync(&p, 40 * MiB, s);
        if (r != CUDA_SUCCESS || simcuda_launch(s, p, 0xAA, N, 0) || cuMemFreeAsync(p, s) ||
            cuStreamSynchronize(s))
            exit(3);
        if (cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) || v != 40 * MiB)
            exit(4); /* the driver keeps it */
        /* the kept bytes are free to the program: gpuarena trims them when it needs the room */
        if (cuMemGetInfo(&free_b, &total_b) || total_b != 64 * MiB || free_b != 64 * MiB)
            exit(5);
        r = round == 2 && kind < 2 ? cuMemAllocAsync(&q, 40 * MiB, s) : cuMemAlloc(&q, 40 * MiB);
        if (r != CUDA_SUCCESS)
            exit(6);
        if (pt_counters().peak_bytes_in_use > 64 * MiB)
            exit(7); /* the driver held both: the cap was escaped */
        if (round == 2 && kind < 2 ? cuMemFreeAsync(q, s) || cuStreamSynchronize(s) : cuMemFree(q))
            exit(8);
        if (cuMemPoolTrimTo(pool, 0))
            exit(9);
    }
    if (pt_counters().pool_trim_calls < 4)
        exit(10);
    exit(0);
}

START_TEST(driver_pool_kept_memory_stays_capped)
{
    static const char *const modes[] = {"GPUARENA_MODE=platform", "GPUARENA_MODE=arena"};
    for (int m = 0; m < 2; m++)
        for (int kind = 0; kind < 2; kind++) {
            if (m == 1 && kind == 0)
                continue; /* arena mode serves cuMemAllocAsync from its own pool */
            char stats[] = "/tmp/gpuarena-pkept-XXXXXX", senv[128], err[4096];
            close(mkstemp(stats));
            snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
            pt_env(senv, modes[m], "GPUARENA_LIMIT=64MiB", "GPUARENA_PREALLOCATE=false",
                   "SIMCUDA_TOTAL_MEM=1GiB", NULL);
            int rc = pt_run_child(pool_kept_child, (void *)(intptr_t)kind, err, sizeof err);
            ck_assert_msg(rc == 0, "%s, %s: exit %d (6: refused, 7: the driver held 80 MiB under "
                          "a 64 MiB cap); %s", modes[m],
                          kind ? "cuMemAllocFromPoolAsync" : "cuMemAllocAsync", rc, err);
            ck_assert_msg(pt_json_check(stats, "(t := d['totals']) and t['in_use'] == 0 and "
                                               "t['passthrough_bytes'] == 0") == 0,
                          "%s: every byte back", modes[m]);
            unlink(stats);
        }
}
END_TEST

/* A pending chunk handed to a smaller cuMemAllocAsync on its own stream is taken whole: in use
 * counts its size, as the free of it gives back its size, so in use does not drift: ten handovers,
 * then 8 MiB held at exit, and in use says 8 MiB. */
static void same_stream_size_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s;
    CUdeviceptr p;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAllocAsync(&p, 2 * MiB, s))
        exit(2);
    for (int i = 0; i < 10; i++)
        if (cuMemFreeAsync(p, s) || cuMemAllocAsync(&p, MiB + 4096, s))
            exit(3);
    CUdeviceptr held;
    if (cuMemFreeAsync(p, s) || cuCtxSynchronize() || cuMemAlloc(&held, 8 * MiB))
        exit(4);
    exit(0);
}

START_TEST(async_same_stream_handover_counts_its_size)
{
    char stats[] = "/tmp/gpuarena-sss-XXXXXX", senv[128], err[4096];
    close(mkstemp(stats));
    snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
    pt_env(senv, "GPUARENA_MODE=arena", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    int rc = pt_run_child(same_stream_size_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d; %s", rc, err);
    ck_assert_msg(pt_json_check(stats, "(t := d['totals']) and t['async_same_stream'] == 10 and "
                                       "t['in_use'] == 8 * 2**20") == 0,
                  "ten handovers of the 2 MiB chunk, then 8 MiB held: in use is 8 MiB");
    unlink(stats);
}
END_TEST

/* The requested bytes of a chunk handed over are the live allocation's: 48 MiB + 1000 freed, then
 * 32 MiB + 100 and 30 MiB + 7 on the same stream (each taking the chunk whole), beside a 1 MiB
 * cuMemAlloc block: in_use_requested at exit is 31 MiB + 7. It said 49 MiB + 1000, the first
 * request, which the pool keeps for the chunk it never saw change hands (an outside check). Then
 * an 8 MiB cuMemAlloc block freed with cuMemFreeAsync and 6 MiB + 5 on its stream: whose requested
 * bytes only the pool knows, it is never handed over, and the figure is still exact. */
static void handover_requested_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s;
    CUdeviceptr a, b, c, d;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&d, MiB) ||
        cuMemAllocAsync(&a, 48 * MiB + 1000, s) || cuMemFreeAsync(a, s) ||
        cuMemAllocAsync(&b, 32 * MiB + 100, s) || cuMemFreeAsync(b, s) ||
        cuMemAllocAsync(&c, 30 * MiB + 7, s))
        exit(2);
    if (a != b || b != c)
        exit(3); /* not handed over: the test shows nothing */
    CUdeviceptr m, n;
    if (cuMemAlloc(&m, 8 * MiB) || cuMemFreeAsync(m, s) || cuMemAllocAsync(&n, 6 * MiB + 5, s))
        exit(4);
    exit(0);
}

START_TEST(async_same_stream_handover_requested_is_the_live_ones)
{
    static const char *const modes[] = PT_POOL_MODES;
    for (int m = 0; m < 3; m++) {
        char stats[] = "/tmp/gpuarena-hreq-XXXXXX", senv[128], err[4096];
        close(mkstemp(stats));
        snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
        pt_env(senv, modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(handover_requested_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d; %s", modes[m], rc, err);
        ck_assert_msg(pt_json_check(stats, "(t := d['totals']) and t['async_same_stream'] == 2 and "
                                           "t['in_use_requested'] == 37 * 2**20 + 12 and "
                                           "sum(e['in_use_requested'] for e in d['devices']) == "
                                           "37 * 2**20 + 12") == 0,
                      "%s: 30 MiB + 7, 6 MiB + 5 and 1 MiB live, as requested", modes[m]);
        unlink(stats);
    }
}
END_TEST

/* The chunk handed over whole is 1 MiB, but the allocation is the 600 KiB asked for: range
 * queries say so (they said 1 MiB, so a program sizing a copy or a checksum by the range read
 * 424 KiB it never wrote), and an address past it is in no allocation. */
static void handover_range_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s;
    CUdeviceptr a, b, base = 0;
    size_t size = 0, rs = 0;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAllocAsync(&a, MiB, s) ||
        cuMemFreeAsync(a, s) || cuMemAllocAsync(&b, 600 * 1024, s))
        exit(2);
    if (a != b)
        exit(3); /* not handed over: the test shows nothing */
    if (cuMemGetAddressRange(&base, &size, b + 1000) || base != b || size != 600 * 1024)
        exit(4);
    if (cuPointerGetAttribute(&rs, CU_POINTER_ATTRIBUTE_RANGE_SIZE, b) || rs != 600 * 1024)
        exit(5);
    if (cuMemGetAddressRange(&base, &size, b + 700 * 1024) != CUDA_ERROR_NOT_FOUND)
        exit(6);
    if (cuMemFreeAsync(b, s) || cuStreamSynchronize(s))
        exit(7);
    if (cuMemGetAddressRange(&base, &size, b) != CUDA_ERROR_NOT_FOUND)
        exit(8);
    exit(0);
}

START_TEST(async_same_stream_handover_range_is_its_own)
{
    static const char *const modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow", "GPUARENA_MODE=vmm"};
    for (int m = 0; m < 3; m++) {
        pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        char err[4096];
        int rc = pt_run_child(handover_range_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: step %d; %s", modes[m], rc, err);
    }
}
END_TEST

/* A stream-ordered allocation is its stream's context's, current or not (helper-48 F3): with
 * device 0's context current, a block on device 1's stream is on device 1 and device 0 holds
 * nothing; with no context current (a framework's allocator thread), device 1's cap still holds
 * for cuMemAllocAsync and cuMemAllocFromPoolAsync, and a block freed there comes back. Every mode;
 * the cap 64 MiB per device. */
static void streams_ctx_child(void *arg)
{
    (void)arg;
    CUcontext a = pt_start(), b, got;
    CUdevice d1;
    CUstream s1;
    CUdeviceptr p, q, r, x;
    int ord = -1;
    if (cuDeviceGet(&d1, 1) || cuCtxCreate(&b, NULL, 0, d1) ||
        cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING) ||
        cuCtxPopCurrent(&got) || got != b)
        exit(1);
    if (cuMemAllocAsync(&p, N, s1) ||
        cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) || ord != 1)
        exit(2);
    if (simcuda_device_bytes_in_use(0) != 0)
        exit(3);
    if (cuCtxPopCurrent(&got) || got != a || cuCtxGetCurrent(&got) || got) /* none current */
        exit(1);
    if (cuMemAllocAsync(&q, 40 * MiB, s1))
        exit(6);
    if (cuMemAllocAsync(&r, 40 * MiB, s1) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(4);
    if (simcuda_device_bytes_in_use(1) > 64 * MiB)
        exit(5);
    if (cuMemFreeAsync(q, s1) || cuStreamSynchronize(s1) || cuMemAllocAsync(&r, 40 * MiB, s1))
        exit(6);
    if (cuMemAllocFromPoolAsync(&x, 40 * MiB, NULL, s1) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(7);
    if (simcuda_device_bytes_in_use(1) > 64 * MiB || simcuda_device_bytes_in_use(0) != 0)
        exit(5);
    if (cuMemFreeAsync(r, s1) || cuMemFreeAsync(p, s1) || cuStreamSynchronize(s1) ||
        cuMemAllocFromPoolAsync(&x, 40 * MiB, NULL, s1) || cuMemFreeAsync(x, s1) ||
        cuStreamSynchronize(s1))
        exit(8);
    exit(0);
}

START_TEST(async_alloc_is_the_streams_context)
{
    static const char *const modes[] = PT_ALL_MODES;
    for (int m = 0; m < 4; m++) {
        char err[4096];
        pt_env(modes[m], "SIMCUDA_DEVICES=2", "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=64MiB",
               NULL);
        int rc = pt_run_child(streams_ctx_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (2: the block is not on the stream's device, 3: device 0 "
                      "holds memory, 4/7: past the cap with no context current, 5: the driver holds "
                      "more than the cap, 6: refused within it, 8: not given back); %s",
                      modes[m], rc, err);
    }
}
END_TEST

/* An allocation during a stream capture, after a free (torch.cuda.graph: the cache emptied, the
 * capture begun, the graph's pool allocated): the fence must not synchronise the context, which the
 * driver refuses and which ends the capture invalidated (helper-48 F5). The freed chunk stays
 * pending (not handed out), the capture ends cleanly, and after it the chunk comes back. Then a
 * synchronisation the driver refuses (SIMCUDA_FAIL) passes nothing: the chunk is not reused. */
static void capture_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s;
    CUdeviceptr p, q, r;
    CUgraph g = NULL;
    /* freed during the capture: a free before it is waited for at its begin (test
     * capture_held_frees_not_reported_free) */
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&p, 4 * MiB) ||
        cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED) || cuMemFree(p))
        exit(1);
    if (cuMemAlloc(&q, 4 * MiB))
        exit(2);
    if (q == p)
        exit(3); /* handed out with no synchronisation */
    if (cuMemAllocAsync(&r, MiB, s))
        exit(2); /* the graph's own stream-ordered allocation */
    if (cuStreamEndCapture(s, &g) || !g)
        exit(4);
    if (cuMemFree(q) || cuMemAlloc(&r, 4 * MiB) || cuMemFree(r))
        exit(5);
    /* the next synchronisation refused: nothing passes */
    if (cuMemAlloc(&p, 4 * MiB) || cuMemFree(p))
        exit(6);
    char spec[64];
    unsigned long long syncs = simcuda_entry_calls("cuCtxSynchronize");
    snprintf(spec, sizeof spec, "cuCtxSynchronize:%llu:CUDA_ERROR_LAUNCH_FAILED", syncs + 1);
    if (simcuda_fail_add(spec) || cuMemAlloc(&q, 4 * MiB))
        exit(6);
    if (simcuda_entry_calls("cuCtxSynchronize") != syncs + 1)
        exit(7); /* the fence did not try */
    if (q == p)
        exit(8); /* reused though the synchronisation failed */
    exit(0);
}

START_TEST(capture_after_free_keeps_the_capture)
{
    static const char *const modes[] = PT_POOL_MODES;
    for (int m = 0; m < 3; m++) {
        char err[4096];
        pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_FREE_SYNC=deferred", NULL);
        int rc = pt_run_child(capture_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (2: refused during the capture, 3: the pending chunk "
                      "handed out, 4: the capture invalidated, 5: refused after it, 7: no "
                      "synchronisation tried, 8: reused after a refused one); %s",
                      modes[m], rc, err);
    }
}
END_TEST

/* Under a 64 MiB cap, 40 MiB freed just before a capture (torch.cuda.graph frees and empties its
 * cache, then captures): waited for at cuStreamBeginCapture, with one synchronisation made before
 * the capture begins (which it leaves valid), and served to the capture's allocation. Then 40 MiB
 * freed during the capture: nothing may pass them before it ends, so cuMemGetInfo does not count
 * them free, the allocation of them is refused with a message that names the capture, and after
 * cuStreamEndCapture they are served. Before (helper-68 F10), the first allocation was refused,
 * cuMemGetInfo reported the held bytes free, and the message said to raise GPUARENA_LIMIT. */
static void capture_held_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s;
    CUdeviceptr p, q, r;
    CUgraph g = NULL;
    size_t f = 0, t = 0;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&p, 40 * MiB) ||
        cuMemsetD8(p, 1, 40 * MiB) || cuMemFree(p))
        exit(1);
    unsigned long long syncs = simcuda_entry_calls("cuCtxSynchronize");
    if (cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED))
        exit(1);
    if (simcuda_entry_calls("cuCtxSynchronize") != syncs + 1)
        exit(2); /* not one synchronisation before the capture */
    if (cuMemAlloc(&q, 40 * MiB))
        exit(3); /* the freed 40 MiB not reused in the capture */
    if (cuMemFree(q) || cuMemGetInfo(&f, &t))
        exit(1);
    if (f > 24 * MiB)
        exit(4); /* bytes the capture holds back reported free */
    if (cuMemAlloc(&r, 40 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(5);
    if (cuStreamEndCapture(s, &g) || !g)
        exit(6); /* the capture invalidated */
    if (cuMemAlloc(&r, 40 * MiB) || cuMemFree(r))
        exit(7);
    exit(0);
}

START_TEST(capture_held_frees_not_reported_free)
{
    static const char *const modes[] = PT_POOL_MODES;
    static const char *const syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy"};
    for (int m = 0; m < 3; m++)
        for (int y = 0; y < 2; y++) {
            char err[4096];
            pt_env(modes[m], syncs[y], "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=64MiB", NULL);
            int rc = pt_run_child(capture_held_child, NULL, err, sizeof err);
            ck_assert_msg(rc == 0, "%s %s: exit %d (2: not one synchronisation before the capture, "
                          "3: the freed memory refused in the capture, 4: held bytes reported free, "
                          "5: served, 6: the capture invalidated, 7: refused after it); %s",
                          modes[m], syncs[y], rc, err);
            ck_assert_msg(strstr(err, "40.0 MiB freed with cuMemFree (or with cuMemFreeAsync, "
                                      "during a global or thread-local capture) wait for the end "
                                      "of the stream capture under way on the device") &&
                              !strstr(err, "raise GPUARENA_LIMIT"),
                          "%s %s: the capture not named: %s", modes[m], syncs[y], err);
        }
}
END_TEST

void pt_stream_async_add(TCase *tc)
{
    tcase_add_test(tc, async_platform_passes_through);
    tcase_add_test(tc, async_per_thread_streams_not_shared);
    tcase_add_test(tc, async_free_pass_through_held_until_passed);
    tcase_add_test(tc, async_free_pass_through_synced_not_reported_held);
    tcase_add_test(tc, driver_pool_kept_memory_stays_capped);
    tcase_add_test(tc, async_same_stream_handover_counts_its_size);
    tcase_add_test(tc, async_same_stream_handover_range_is_its_own);
    tcase_add_test(tc, async_same_stream_handover_requested_is_the_live_ones);
    tcase_add_test(tc, async_alloc_is_the_streams_context);
    tcase_add_test(tc, capture_after_free_keeps_the_capture);
    tcase_add_test(tc, capture_held_frees_not_reported_free);
}
