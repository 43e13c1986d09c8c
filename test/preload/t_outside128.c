/* Findings of an outside check of issue 13 (freed memory and streams), 2026-12-07 (helper-128),
 * each a test that failed before its fix.
 *
 * A stream capture begun in CU_STREAM_CAPTURE_MODE_GLOBAL (the default: cuStreamBeginCapture of
 * CUDA 10.0 takes no mode, and PyTorch's torch.cuda.graph captures so) forbids "potentially unsafe
 * API calls" in every thread of the process while it runs (cuda.h, CUstreamCaptureMode), on every
 * device; one in CU_STREAM_CAPTURE_MODE_THREAD_LOCAL forbids them in the capturing thread. Queries
 * of events and synchronisations are such calls: a cuEventQuery in another thread during a global
 * capture answers CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates it, which is why PyTorch's
 * caching allocator queries no event while a capture is under way ("process_events involves
 * cudaEventQueries, illegal during CUDA graph capture", c10/cuda/CUDACachingAllocator.cpp). The
 * simulated driver does not model the modes' limits, so these tests count what reaches it: no
 * cuEventQuery and no cuCtxSynchronize while a global or thread-local capture runs, when the
 * program itself makes none (a cuMemAllocAsync on a stream that is not capturing is stream-ordered
 * and allowed). The memory so held back comes back once the capture has ended.
 */
#include "t_stream.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const o128_modes[] = PT_POOL_MODES;

/* arg: 0 global capture on the same device (the held entry a cuMemFreeAsync's), 1 global capture
 * on device 1 (the held entry a cuMemFree's, device 0's), 2 thread-local capture in this thread
 * on device 1 (a cuMemFree's), 3 relaxed capture on device 1 (allowed: device 0's chunk must come
 * back during it, as before). Exit 0 when what the driver saw is right; else the step. */
static void o128_capture_child(void *arg)
{
    int kind = (int)(intptr_t)arg;
    alarm(30);
    CUcontext c0 = pt_start(), c1 = c0;
    CUdevice d1;
    CUstream t, u, s;
    CUdeviceptr p, q, r2;
    CUgraph g = NULL;
    unsigned gate = 0;
    if (cuStreamCreate(&t, CU_STREAM_NON_BLOCKING) || cuStreamCreate(&u, CU_STREAM_NON_BLOCKING) ||
        cuMemAlloc(&p, 4 * MiB))
        exit(10);
    if (kind == 0) {
        /* p freed stream-ordered behind a held kernel: pending, with an event on t */
        if (simcuda_gate(t, &gate) || simcuda_launch(t, p, 0xAA, 4 * MiB, 0) ||
            cuMemFreeAsync(p, t))
            exit(11);
    } else if (cuMemsetD8(p, 1, 4 * MiB) || cuMemFree(p)) { /* pending until a synchronisation */
        exit(11);
    }
    if (kind > 0 && (cuDeviceGet(&d1, 1) || cuDevicePrimaryCtxRetain(&c1, d1) ||
                     cuCtxSetCurrent(c1)))
        exit(12);
    CUstreamCaptureMode mode = kind == 2 ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                               : kind == 3 ? CU_STREAM_CAPTURE_MODE_RELAXED
                                           : CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuStreamBeginCapture(s, mode) ||
        cuCtxSetCurrent(c0))
        exit(13);
    simcuda_counters_t a = pt_counters();
    unsigned long long q0 = simcuda_entry_calls("cuEventQuery"),
                       s0 = simcuda_entry_calls("cuCtxSynchronize");
    /* device 0, a stream that is not capturing: a stream-ordered allocation, allowed */
    if (cuMemAllocAsync(&q, 4 * MiB, u) || cuMemsetD8Async(q, 0x55, 4 * MiB, u))
        exit(14);
    unsigned long long dq = simcuda_entry_calls("cuEventQuery") - q0,
                       ds = simcuda_entry_calls("cuCtxSynchronize") - s0;
    if (kind < 3 && dq)
        exit(1); /* an event queried during the capture */
    if (kind < 3 && ds)
        exit(2); /* a context synchronised during the capture */
    if (kind == 3 && q != p)
        exit(3); /* relaxed: device 0's freed chunk is device 0's to wait for, as before */
    if (kind < 3 && q == p)
        exit(4); /* the held chunk handed out (its kernel may still write it) */
    (void)a;
    if (cuCtxSetCurrent(c1) || cuStreamEndCapture(s, &g) || !g || cuCtxSetCurrent(c0))
        exit(15);
    if (gate)
        simcuda_gate_open(gate);
    if (cuStreamSynchronize(u) || cuStreamSynchronize(t))
        exit(16);
    /* after the capture: the held chunk comes back to the next allocation */
    if (kind < 3 && (cuMemAlloc(&r2, 4 * MiB) || r2 != p))
        exit(5);
    if (!all_bytes(q, 0x55))
        exit(6);
    exit(0);
}

START_TEST(strict_capture_queries_and_syncs_nothing)
{
    static const char *const kinds[] = {"global capture, cuMemFreeAsync held",
                                        "global capture on device 1, cuMemFree held",
                                        "thread-local capture on device 1, cuMemFree held",
                                        "relaxed capture on device 1"};
    char all[2048] = "";
    int bad = 0;
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < 4; k++) {
            char err[4096];
            pt_env(o128_modes[m], "SIMCUDA_DEVICES=2", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
            int rc = pt_run_child(o128_capture_child, (void *)(intptr_t)k, err, sizeof err);
            if (rc != 0 && ++bad)
                snprintf(all + strlen(all), sizeof all - strlen(all), "%s, %s: exit %d%s; ",
                         o128_modes[m] + 14, kinds[k], rc, err[0] ? " (stderr below)" : "");
            if (rc != 0 && err[0])
                fprintf(stderr, "%s", err);
        }
    ck_assert_msg(!bad, "%d of 12 wrong (1: cuEventQuery reached the driver during the capture, "
                  "2: cuCtxSynchronize did, 3: relaxed: the chunk not reused, 4: the held chunk "
                  "handed out, 5: not reused after the capture, 6: bytes wrong, 10-16: setup): %s",
                  bad, all);
}
END_TEST

/* A 40 MiB block freed with cuMemFreeAsync on an idle stream (its free passed at once) before a
 * global capture begins, under a 64 MiB cap: since no event may be asked about during the capture,
 * the begin returns such chunks first, while it may still ask, and an allocation in the capture's
 * time that needs their room is served (it was refused as out of memory, the chunk held for the
 * capture's end). arg: the capture's device (0, or 1: the chunk is device 0's). */
static void o128_before_child(void *arg)
{
    int dev = (int)(intptr_t)arg;
    alarm(30);
    CUcontext c0 = pt_start(), c1 = c0;
    CUdevice d1;
    CUstream t, u, s;
    CUdeviceptr p, q;
    CUgraph g = NULL;
    if (cuStreamCreate(&t, CU_STREAM_NON_BLOCKING) || cuStreamCreate(&u, CU_STREAM_NON_BLOCKING) ||
        cuMemAlloc(&p, 40 * MiB) || cuMemFreeAsync(p, t))
        exit(10);
    if (dev && (cuDeviceGet(&d1, 1) || cuDevicePrimaryCtxRetain(&c1, d1) || cuCtxSetCurrent(c1)))
        exit(11);
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
        cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) || cuCtxSetCurrent(c0))
        exit(12);
    unsigned long long q0 = simcuda_entry_calls("cuEventQuery");
    CUresult r = cuMemAllocAsync(&q, 40 * MiB, u);
    if (simcuda_entry_calls("cuEventQuery") != q0)
        exit(2);
    if (cuCtxSetCurrent(c1) || cuStreamEndCapture(s, &g) || !g || cuCtxSetCurrent(c0))
        exit(13);
    exit(r == CUDA_SUCCESS ? 0 : 1);
}

START_TEST(strict_capture_returns_passed_async_frees_first)
{
    char all[1024] = "";
    int bad = 0;
    for (int m = 0; m < 3; m++)
        for (int dev = 0; dev < 2; dev++) {
            char err[4096];
            pt_env(o128_modes[m], "GPUARENA_LIMIT=64MiB", "SIMCUDA_DEVICES=2",
                   "SIMCUDA_TOTAL_MEM=1GiB", NULL);
            int rc = pt_run_child(o128_before_child, (void *)(intptr_t)dev, err, sizeof err);
            if (rc != 0 && ++bad)
                snprintf(all + strlen(all), sizeof all - strlen(all),
                         "%s, capture on device %d: exit %d; ", o128_modes[m] + 14, dev, rc);
            if (rc != 0 && err[0])
                fprintf(stderr, "%s", err);
        }
    ck_assert_msg(!bad, "%d of 6 wrong (1: the allocation refused for the passed chunk's room, 2: "
                  "an event queried during the capture, 10-13: setup): %s", bad, all);
}
END_TEST

/* ---- a context destroyed with a pending cuMemFree that another context's kernel still writes ----
 * Block p of context A is written by a kernel of context B on the same device, held by a gate; A
 * frees p with cuMemFree (the driver's would wait for B's kernel: this one leaves it pending) and
 * goes: A made with cuCtxCreate and destroyed (B the primary context), or A the primary context,
 * reset or released to its end (B made with cuCtxCreate). The driver's teardown waits for A's own
 * work, not B's, and frees A's memory (vmm: gpuarena unmaps the granules): B's kernel then wrote
 * memory that was gone (the simulated driver skips it and counts a stream fault; on a GPU an
 * illegal address, or another allocation's bytes). With the fix the destroy waits for B first: a
 * helper thread sees that wait held in the driver (simcuda_hold_next_ctx_sync) and lets the kernel
 * run; before it, the destroy returned without waiting, and the kernel ran once the main thread
 * opened its gate, on freed memory. arg: the teardown (bits 0-1), and (bit 2) an allocation in A
 * between the free and the teardown, which GPUARENA_FREE_SYNC=lazy serves without waiting (a 1 MiB
 * block of A lives beside p, so a small one fits on memory A holds in every mode). No sleeps: the
 * order is the gates'. */
static atomic_int o128_stop;
static unsigned o128_kgate, o128_sgate;

static void *o128_opener(void *unused)
{
    (void)unused;
    while (!atomic_load(&o128_stop)) {
        if (simcuda_ctx_sync_held(o128_sgate)) {
            simcuda_gate_open(o128_kgate); /* B's kernel runs, then B's synchronisation */
            simcuda_gate_open(o128_sgate);
            break;
        }
        sched_yield();
    }
    return NULL;
}

static void o128_teardown_child(void *arg)
{
    int kind = (int)(intptr_t)arg & 3, alloc_between = (int)(intptr_t)arg >> 2;
    alarm(30);
    CUcontext prim = pt_start(), cr, a, b;
    CUdevice d;
    CUstream sb;
    CUdeviceptr p, r, q;
    pthread_t th;
    if (cuDeviceGet(&d, 0) || cuCtxCreate(&cr, NULL, 0, d))
        exit(10);
    a = kind == 0 ? cr : prim; /* the context that frees and goes */
    b = kind == 0 ? prim : cr; /* the one whose kernel writes a's block */
    if (cuCtxSetCurrent(b) || cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || cuCtxSetCurrent(a) ||
        cuMemAlloc(&r, 1 * MiB) || cuMemAlloc(&p, 4 * MiB))
        exit(10);
    if (cuCtxSetCurrent(b) || simcuda_gate(sb, &o128_kgate) ||
        simcuda_launch(sb, p, 0xAA, 4 * MiB, 0) || cuCtxSetCurrent(a))
        exit(11);
    if (cuMemFree(p) || (alloc_between && cuMemAlloc(&q, 4096)))
        exit(12);
    simcuda_counters_t c0 = pt_counters();
    if (simcuda_hold_next_ctx_sync(b, &o128_sgate) ||
        pthread_create(&th, NULL, o128_opener, NULL))
        exit(13);
    CUresult rd = kind == 0 ? cuCtxDestroy(a) : kind == 1 ? cuDevicePrimaryCtxReset(d)
                                                         : cuDevicePrimaryCtxRelease(d);
    atomic_store(&o128_stop, 1);
    pthread_join(th, NULL);
    simcuda_gate_open(o128_kgate);
    simcuda_gate_open(o128_sgate);
    if (rd || cuCtxSetCurrent(b) || cuStreamSynchronize(sb) || cuCtxSynchronize())
        exit(14);
    if (pt_counters().stream_faults != c0.stream_faults)
        exit(1); /* b's kernel found p's memory gone: the teardown did not wait for it */
    exit(0);
}

START_TEST(teardown_waits_for_peers_on_pending_frees)
{
    static const char *const how[] = {"cuCtxDestroy", "cuDevicePrimaryCtxReset",
                                      "cuDevicePrimaryCtxRelease"};
    char all[4096] = "";
    int bad = 0, runs = 0;
    for (int m = 0; m < 3; m++)
        for (int t = 0; t < 3; t++)
            for (int k = 0; k < 3; k++) {
                const char *sync =
                    k == 0 ? "GPUARENA_FREE_SYNC=deferred" : "GPUARENA_FREE_SYNC=lazy";
                char err[4096];
                pt_env(o128_modes[m], sync, NULL);
                runs++;
                int rc = pt_run_child(o128_teardown_child, (void *)(intptr_t)(t | (k == 2) << 2),
                                      err, sizeof err);
                if (rc != 0 && ++bad)
                    snprintf(all + strlen(all), sizeof all - strlen(all), "%s, %s, %s%s: exit %d; ",
                             o128_modes[m] + 14, how[t], sync + 19,
                             k == 2 ? " with an allocation" : "", rc);
                if (rc != 0 && err[0])
                    fprintf(stderr, "%s", err);
            }
    ck_assert_msg(!bad, "%d of %d wrong (1: the other context's kernel wrote freed memory, 10-14: "
                  "setup): %s", bad, runs, all);
}
END_TEST

TCase *pt_tcase_outside128(void)
{
    TCase *tc = tcase_create("outside128");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, strict_capture_queries_and_syncs_nothing);
    tcase_add_test(tc, teardown_waits_for_peers_on_pending_frees);
    tcase_add_test(tc, strict_capture_returns_passed_async_frees_first);
    return tc;
}
