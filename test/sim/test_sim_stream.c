/* test-sim, streams: work queued on a stream runs later, in order, on the driver's own thread; events;
 * the legacy default stream's implicit synchronisation with blocking streams (not non-blocking ones);
 * per-thread default streams; frees that wait for queued work, and a reuse hazard the driver makes
 * visible. Ordering is forced with gates (simcuda_gate holds a stream until the test opens it), never
 * with sleeps: a delay only ever makes a kernel slower, and a test only relies on lower bounds.
 */
#include "test_sim_stream.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void expect_bytes(CUdeviceptr p, unsigned char v)
{
    static unsigned char h[N];
    CK(cuMemcpyDtoH(h, p, N));
    for (size_t i = 0; i < N; i++)
        ck_assert_msg(h[i] == v, "byte %zu reads 0x%02x, expected 0x%02x", i, h[i], v);
}

CUdeviceptr alloc_n(void)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, N));
    return p;
}

START_TEST(stream_idle_runs_at_once)
{
    ts_start();
    CUstream s;
    CUdeviceptr a = alloc_n();
    CK(cuStreamCreate(&s, 0));
    CK(cuMemsetD8Async(a, 7, N, s));
    ck_assert_int_eq(cuStreamQuery(s), CUDA_SUCCESS); /* no delay asked for: done before it returns */
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.stream_ops_deferred, 0);
    ck_assert_uint_eq(c.stream_ops, c.stream_ops_done);
    expect_bytes(a, 7);
    CK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -1));
    ck_assert_int_eq(cuStreamCreate(&s, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemsetD8Async(a + N - 8, 1, 16, s), CUDA_ERROR_INVALID_VALUE); /* checked at the call */
    ck_assert_int_eq(cuMemcpyHtoDAsync(a, NULL, 16, s), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamDestroy(s));
    ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuMemsetD8Async(a, 1, 16, s), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuStreamDestroy(CU_STREAM_LEGACY), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

START_TEST(stream_delay_setting)
{
    setenv("SIMCUDA_STREAM_DELAY_US", "2000", 1);
    ts_start();
    CUstream s;
    CUdeviceptr a = alloc_n();
    CK(cuStreamCreate(&s, 0));
    CK(cuMemsetD8Async(a, 7, N, s));
    ck_assert_uint_eq(ts_counters().stream_ops_deferred, 1); /* left to the stream's worker */
    CK(cuStreamSynchronize(s));
    ck_assert_int_eq(cuStreamQuery(s), CUDA_SUCCESS);
    expect_bytes(a, 7);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.stream_ops, c.stream_ops_done);
}
END_TEST

START_TEST(stream_delay_bad)
{
    static const char *const bad[] = {"abc", "-1", "1.5", "10ms", "1e3", "20000000", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            setenv("SIMCUDA_STREAM_DELAY_US", bad[i], 1);
            _exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
        }
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "SIMCUDA_STREAM_DELAY_US='%s' should fail cuInit",
                      bad[i]);
    }
}
END_TEST

START_TEST(stream_in_order)
{
    ts_start();
    CUstream s;
    unsigned g;
    CUdeviceptr a = alloc_n(), b = alloc_n();
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(simcuda_gate(s, &g));
    CK(simcuda_launch(s, a, 0xAA, N, 1000));
    CK(cuMemsetD8Async(a, 0x11, N, s));
    CK(simcuda_launch_copy(s, b, a, N, 0));
    ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    ck_assert_uint_eq(ts_counters().stream_ops_done, 0);
    simcuda_gate_open(g);
    CK(cuStreamSynchronize(s));
    expect_bytes(a, 0x11); /* the set ran after the slow kernel, the copy after both */
    expect_bytes(b, 0x11);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.stream_ops, c.stream_ops_done);
    ck_assert_uint_eq(c.launch_calls, 2);
    ck_assert_int_eq(simcuda_launch(s, a + N - 1, 1, 2, 0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(events)
{
    ts_start();
    CUstream s;
    CUevent e1, e2, nt;
    unsigned g;
    float ms;
    CUdeviceptr a = alloc_n();
    CK(cuStreamCreate(&s, 0));
    CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&e2, CU_EVENT_BLOCKING_SYNC));
    CK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    ck_assert_int_eq(cuEventQuery(e1), CUDA_SUCCESS); /* never recorded */
    CK(cuEventSynchronize(e1));
    ck_assert_int_eq(cuEventElapsedTime(&ms, e1, e2), CUDA_ERROR_INVALID_HANDLE);
    CK(simcuda_gate(s, &g));
    CK(cuEventRecord(e1, s));
    CK(simcuda_launch(s, a, 1, N, 20000));
    CK(cuEventRecord(e2, s));
    CK(cuEventRecord(nt, s));
    ck_assert_int_eq(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(cuEventQuery(e2), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(cuEventElapsedTime(&ms, e1, e2), CUDA_ERROR_NOT_READY);
    simcuda_gate_open(g);
    CK(cuEventSynchronize(e2));
    ck_assert_int_eq(cuEventQuery(e1), CUDA_SUCCESS);
    CK(cuEventElapsedTime(&ms, e1, e2));
    ck_assert_msg(ms >= 19.9f, "the 20 ms kernel lies between the events: %f ms", (double)ms);
    CK(cuEventSynchronize(nt));
    ck_assert_int_eq(cuEventElapsedTime(&ms, e1, nt), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventElapsedTime(NULL, e1, e2), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuEventCreate(&e1, 8), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuEventCreate(&e1, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuEventDestroy(e2));
    ck_assert_int_eq(cuEventDestroy(e2), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventQuery(e2), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventRecord(e2, s), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventQuery((CUevent)&ms), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventQuery(NULL), CUDA_ERROR_INVALID_HANDLE);
    /* a recorded event destroyed before it completes: its record is reused at once, safely */
    CK(simcuda_gate(s, &g));
    CK(cuEventRecord(e1, s));
    CK(cuEventDestroy(e1));
    CK(cuEventCreate(&e2, 0));
    ck_assert_int_eq(cuEventQuery(e2), CUDA_SUCCESS);
    simcuda_gate_open(g);
    CK(cuCtxSynchronize());
}
END_TEST

START_TEST(stream_wait_event)
{
    ts_start();
    CUstream s1, s2;
    CUevent e;
    unsigned g;
    CUdeviceptr a = alloc_n(), b = alloc_n();
    CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CK(cuStreamWaitEvent(s2, e, 0)); /* never recorded: nothing to wait for */
    CK(simcuda_gate(s1, &g));
    CK(simcuda_launch(s1, a, 0xAA, N, 0));
    CK(cuEventRecord(e, s1));
    CK(cuStreamWaitEvent(s2, e, 0));
    CK(cuMemcpyDtoDAsync(b, a, N, s2));
    ck_assert_int_eq(cuStreamQuery(s2), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(cuStreamWaitEvent(s2, e, 2), CUDA_ERROR_INVALID_VALUE);
    simcuda_gate_open(g);
    CK(cuStreamSynchronize(s2));
    expect_bytes(b, 0xAA); /* the copy waited for s1's kernel */
}
END_TEST

/* "hEvent and hStream must be from the same context otherwise CUDA_ERROR_INVALID_HANDLE is
 * returned" (cuEventRecord): a stream names its context whichever is current; the legacy and
 * per-thread streams are the current context's. A refused record leaves the event as it was.
 * cuStreamGetCtx says which context a stream is; waiting on another context's event is allowed. */
typedef CUresult (*record_fn)(CUevent, CUstream);
typedef CUresult (*getctx_fn)(CUstream, CUcontext *);

START_TEST(event_record_needs_the_streams_context)
{
    CUcontext a = ts_start(), b, got;
    CUdevice dev;
    CUstream sa, sb, gone;
    CUevent ea, eb;
    unsigned g;
    record_fn record_ptsz = PTSZ(cuEventRecord_ptsz, record_fn);
    CK(cuDeviceGet(&dev, 0));
    CK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&ea, CU_EVENT_DISABLE_TIMING));
    CK(cuCtxCreate(&b, NULL, 0, dev)); /* b current */
    CK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&eb, CU_EVENT_DISABLE_TIMING));
    CK(cuStreamCreate(&gone, 0));
    CK(cuStreamDestroy(gone));
    CK(cuCtxSetCurrent(a));
    /* which context each stream is, with a current */
    CK(cuStreamGetCtx(sa, &got));
    ck_assert_ptr_eq(got, a);
    CK(cuStreamGetCtx(sb, &got));
    ck_assert_ptr_eq(got, b);
    CK(cuStreamGetCtx(NULL, &got));
    ck_assert_ptr_eq(got, a);
    CK(cuStreamGetCtx(CU_STREAM_LEGACY, &got));
    ck_assert_ptr_eq(got, a);
    CK(PTSZ(cuStreamGetCtx_ptsz, getctx_fn)(CU_STREAM_PER_THREAD, &got));
    ck_assert_ptr_eq(got, a);
    ck_assert_int_eq(cuStreamGetCtx(gone, &got), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuStreamGetCtx(sa, NULL), CUDA_ERROR_INVALID_VALUE);
    /* ea recorded behind a gate on its own stream: a refused record must not move it */
    CK(simcuda_gate(sa, &g));
    CK(cuEventRecord(ea, sa));
    ck_assert_int_eq(cuEventRecord(ea, sb), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventQuery(ea), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(record_ptsz(ea, sb), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventQuery(ea), CUDA_ERROR_NOT_READY);
    /* b's event: only on b's streams, wherever the call is made */
    ck_assert_int_eq(cuEventRecord(eb, sa), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventRecord(eb, NULL), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventRecord(eb, CU_STREAM_LEGACY), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventRecord(eb, CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(record_ptsz(eb, NULL), CUDA_ERROR_INVALID_HANDLE);
    CK(cuEventRecord(eb, sb)); /* a current, b's stream and b's event */
    CK(cuEventSynchronize(eb));
    CK(cuStreamWaitEvent(sb, ea, 0)); /* a wait may name another context's event */
    ck_assert_int_eq(cuStreamQuery(sb), CUDA_ERROR_NOT_READY);
    CK(cuCtxSetCurrent(b));
    CK(cuStreamGetCtx(NULL, &got));
    ck_assert_ptr_eq(got, b);
    CK(cuEventRecord(eb, NULL));
    CK(record_ptsz(eb, NULL));
    CK(cuEventRecord(eb, CU_STREAM_PER_THREAD));
    ck_assert_int_eq(cuEventRecord(ea, NULL), CUDA_ERROR_INVALID_HANDLE);
    CK(cuEventRecord(ea, sa)); /* b current, a's stream and a's event */
    simcuda_gate_open(g);
    CK(cuEventSynchronize(ea));
    CK(cuStreamSynchronize(sb));
    CK(cuCtxDestroy(b));
    CK(cuCtxSetCurrent(a));
    ck_assert_int_eq(cuStreamGetCtx(sb, &got), CUDA_ERROR_INVALID_HANDLE); /* its context gone */
}
END_TEST

/* NVIDIA, "Stream synchronization behavior": the legacy stream waits for the blocking streams'
 * earlier work, and they wait for its earlier work. */
START_TEST(legacy_and_blocking)
{
    ts_start();
    CUstream s;
    unsigned g;
    CUdeviceptr a = alloc_n();
    CK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    CK(simcuda_gate(s, &g));
    CK(simcuda_launch(s, a, 0xAA, N, 0));
    CK(cuMemsetD8Async(a, 0x55, N, NULL));
    ck_assert_int_eq(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(cuStreamQuery(CU_STREAM_LEGACY), CUDA_ERROR_NOT_READY);
    simcuda_gate_open(g);
    CK(cuCtxSynchronize());
    expect_bytes(a, 0x55); /* the legacy set came after the blocking stream's kernel */
    CK(simcuda_gate(CU_STREAM_LEGACY, &g));
    CK(cuMemsetD8Async(a, 1, N, s));
    ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    simcuda_gate_open(g);
    CK(cuStreamSynchronize(s));
    expect_bytes(a, 1);
    /* the synchronous calls are legacy-stream work: a set waits for the blocking stream's slow
     * kernel (were it not to, the kernel would land 20 ms later and the bytes read 0xAA) */
    CK(simcuda_launch(s, a, 0xAA, N, 20000));
    CK(cuMemsetD8(a, 0x55, N));
    ck_assert_int_eq(cuStreamQuery(s), CUDA_SUCCESS);
    expect_bytes(a, 0x55);
}
END_TEST

START_TEST(nonblocking_independent)
{
    ts_start();
    CUstream nb;
    unsigned g;
    CUdeviceptr a = alloc_n(), b = alloc_n();
    CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    CK(simcuda_gate(nb, &g));
    CK(simcuda_launch(nb, a, 0xAA, N, 0));
    CK(cuMemsetD8(b, 0x55, N));               /* legacy work does not wait for nb (or it would hang) */
    CK(cuMemsetD8Async(a, 0x55, N, NULL));
    CK(cuStreamSynchronize(NULL));
    ck_assert_int_eq(cuStreamQuery(nb), CUDA_ERROR_NOT_READY);
    expect_bytes(b, 0x55);
    simcuda_gate_open(g);
    CK(cuStreamSynchronize(nb));
    expect_bytes(a, 0xAA); /* nb's kernel ran last */
    CK(simcuda_gate(NULL, &g));
    CK(cuMemsetD8Async(b, 3, N, nb));
    CK(cuStreamSynchronize(nb));              /* nor does nb wait for the legacy stream */
    simcuda_gate_open(g);                     /* (reading b back is legacy work: after the gate) */
    expect_bytes(b, 3);
}
END_TEST

typedef struct pt_arg {
    CUcontext ctx;
    CUdeviceptr b;
    CUresult query_after, query_ptsz, sync;
} pt_arg_t;

static void *other_thread(void *p)
{
    pt_arg_t *t = p;
    cuCtxSetCurrent(t->ctx);
    t->query_ptsz = QUERY_PTSZ(NULL);
    cuMemsetD8Async(t->b, 3, N, CU_STREAM_PER_THREAD);
    t->sync = cuStreamSynchronize(CU_STREAM_PER_THREAD);
    t->query_after = cuStreamQuery(CU_STREAM_PER_THREAD);
    return NULL;
}

/* The per-thread default stream "is not a non-blocking stream and will synchronize with the legacy
 * default stream if both are used in a program"; it does not synchronise with other streams. */
START_TEST(per_thread_streams)
{
    CUcontext ctx = ts_start();
    unsigned g;
    CUdeviceptr a = alloc_n(), b = alloc_n();
    CK(simcuda_gate(CU_STREAM_PER_THREAD, &g));
    CK(simcuda_launch(CU_STREAM_PER_THREAD, a, 0xAA, N, 0));
    ck_assert_int_eq(QUERY_PTSZ(NULL), CUDA_ERROR_NOT_READY);
    ck_assert_int_eq(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
    pt_arg_t t = {.ctx = ctx, .b = b, .query_after = -1, .query_ptsz = -1, .sync = -1};
    pthread_t tid;
    ck_assert_int_eq(pthread_create(&tid, NULL, other_thread, &t), 0);
    ck_assert_int_eq(pthread_join(tid, NULL), 0);
    ck_assert_int_eq(t.query_ptsz, CUDA_SUCCESS); /* another thread's stream: its own */
    ck_assert_int_eq(t.sync, CUDA_SUCCESS);
    ck_assert_int_eq(t.query_after, CUDA_SUCCESS);
    CK(cuMemsetD8Async(a, 0x55, N, NULL)); /* legacy: waits for the per-thread stream */
    ck_assert_int_eq(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    simcuda_gate_open(g);
    CK(cuCtxSynchronize());
    expect_bytes(a, 0x55);
    expect_bytes(b, 3);
    CK(simcuda_gate(CU_STREAM_PER_THREAD, &g));
    CK(PTSZ(cuMemsetD8Async_ptsz, CUresult(*)(CUdeviceptr, unsigned char, size_t, CUstream))(a, 9, N, NULL)); /* NULL through _ptsz: the per-thread stream */
    CK(PTSZ(cuMemcpyHtoDAsync_v2_ptsz, CUresult(*)(CUdeviceptr, const void *, size_t, CUstream))(b, "x", 1, NULL));
    ck_assert_int_eq(QUERY_PTSZ(NULL), CUDA_ERROR_NOT_READY);
    simcuda_gate_open(g);
    CK(SYNC_PTSZ(NULL));
    expect_bytes(a, 9);
}
END_TEST

/* cuMemFree_v2 waits for the device's queued work, so launch-free-reuse is safe on the driver. */
START_TEST(free_waits_for_queued_work)
{
    ts_start();
    CUstream s, w;
    CUdeviceptr a = alloc_n(), b;
    static unsigned char h[N];
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&w, CU_STREAM_NON_BLOCKING));
    CK(simcuda_launch(s, a, 0xAA, N, 20000));
    CK(cuMemFree(a));
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.implicit_syncs, 1);
    ck_assert_uint_eq(c.stream_ops, c.stream_ops_done);
    CK(cuMemAlloc(&b, N));
    memset(h, 0x55, N);
    CK(cuMemcpyHtoDAsync(b, h, N, w));
    CK(cuStreamSynchronize(w));
    CK(cuCtxSynchronize());
    expect_bytes(b, 0x55);
    CK(cuMemFree(b));
    ck_assert_uint_eq(ts_counters().implicit_syncs, 1); /* nothing queued: no wait */
    ck_assert_uint_eq(ts_counters().stream_faults, 0);
}
END_TEST

START_TEST(free_async_is_stream_ordered)
{
    ts_start();
    CUstream s;
    unsigned g;
    CUdeviceptr a = alloc_n(), b;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned long long before = ts_counters().bytes_in_use;
    CK(simcuda_gate(s, &g));
    CK(simcuda_launch(s, a, 0xAA, N, 0));
    CK(cuMemFreeAsync(a, s));
    ck_assert_int_eq(cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE); /* already queued */
    ck_assert_int_eq(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(ts_counters().bytes_in_use, before); /* still there until s gets to the free */
    CK(cuMemAlloc(&b, N));
    ck_assert_uint_ne(b, a);
    CK(cuMemsetD8(b, 0x55, N)); /* legacy: does not wait for a non-blocking stream */
    simcuda_gate_open(g);
    CK(cuStreamSynchronize(s));
    ck_assert_uint_eq(ts_counters().bytes_in_use, before); /* a went, b came */
    expect_bytes(b, 0x55);
    ck_assert_uint_eq(ts_counters().stream_faults, 0);
    ck_assert_int_eq(cuMemFreeAsync(b, (CUstream)&g), CUDA_ERROR_INVALID_HANDLE);
    CK(PTSZ(cuMemFreeAsync_ptsz, CUresult(*)(CUdeviceptr, CUstream))(b, NULL));
    CK(SYNC_PTSZ(NULL));
}
END_TEST

/* What an allocator that reuses memory too early does, played here by hand: the same bytes are
 * handed out again while a kernel still writes them. The driver must make that visible. */
START_TEST(reuse_hazard_visible)
{
    ts_start();
    CUstream s, w;
    unsigned g;
    static unsigned char h[N];
    CUdeviceptr block = alloc_n();
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&w, CU_STREAM_NON_BLOCKING));
    CK(simcuda_gate(s, &g));
    CK(simcuda_launch(s, block, 0xAA, N, 0)); /* buffer A = block */
    /* "free" A without waiting, "allocate" B = block, write B through another stream */
    memset(h, 0x55, N);
    CK(cuMemcpyHtoDAsync(block, h, N, w));
    CK(cuStreamSynchronize(w));
    simcuda_gate_open(g);
    CK(cuCtxSynchronize());
    expect_bytes(block, 0xAA); /* B was overwritten by A's kernel: the hazard, seen */
}
END_TEST

/* A kernel whose memory is unmapped before it runs (VMM: nothing waits) is skipped, not a crash. */
START_TEST(queued_work_on_gone_memory)
{
    ts_start();
    CUstream s;
    unsigned g;
    CUdeviceptr va;
    CUmemGenericAllocationHandle hd;
    size_t gran = 2 * MiB;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CK(cuMemAddressReserve(&va, gran, 0, 0, 0));
    CK(cuMemCreate(&hd, gran, &prop, 0));
    CK(cuMemMap(va, gran, 0, hd, 0));
    CK(cuMemSetAccess(va, gran, &acc, 1));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(simcuda_gate(s, &g));
    CK(simcuda_launch(s, va, 0xAA, gran, 0));
    CK(cuMemUnmap(va, gran));
    simcuda_gate_open(g);
    CK(cuStreamSynchronize(s));
    ck_assert_uint_eq(ts_counters().stream_faults, 1);
    CK(cuMemRelease(hd));
    CK(cuMemAddressFree(va, gran));
}
END_TEST

TCase *ts_tcase_stream(void)
{
    TCase *tc = tcase_create("stream");
    tcase_set_timeout(tc, 60); /* a wrong implicit wait shows as a hang: the timeout fails the test */
    tcase_add_test(tc, stream_idle_runs_at_once);
    tcase_add_test(tc, stream_delay_setting);
    tcase_add_test(tc, stream_delay_bad);
    tcase_add_test(tc, stream_in_order);
    tcase_add_test(tc, events);
    tcase_add_test(tc, stream_wait_event);
    tcase_add_test(tc, event_record_needs_the_streams_context);
    tcase_add_test(tc, legacy_and_blocking);
    tcase_add_test(tc, nonblocking_independent);
    tcase_add_test(tc, per_thread_streams);
    tcase_add_test(tc, free_waits_for_queued_work);
    tcase_add_test(tc, free_async_is_stream_ordered);
    tcase_add_test(tc, reuse_hazard_visible);
    tcase_add_test(tc, queued_work_on_gone_memory);
    ts_stream_more_add(tc); /* test_sim_stream_more.c */
    return tc;
}
