/* test-sim, streams, continued (split from test_sim_stream.c; shared pieces in test_sim_stream.h):
 * a context's teardown with work queued, events dying with their context, fork with work pending,
 * streams from many threads, the stream entry points through cuGetProcAddress, cuMemAllocAsync's
 * context, stream capture's rules, and the reuse-hazard program. Added to the "stream" case by
 * ts_stream_more_add().
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

START_TEST(context_teardown_waits)
{
    CUcontext c;
    CUstream s;
    CUdeviceptr a;
    CK(cuInit(0));
    CK(cuCtxCreate(&c, NULL, 0, 0));
    CK(cuStreamCreate(&s, 0));
    CK(cuMemAlloc(&a, N));
    CK(simcuda_launch(s, a, 1, N, 20000));
    CK(simcuda_launch(NULL, a, 2, N, 20000));
    CK(cuCtxDestroy(c)); /* drains, never discards */
    simcuda_counters_t k = ts_counters();
    ck_assert_uint_eq(k.stream_ops, k.stream_ops_done);
    ck_assert_uint_eq(k.stream_faults, 0);
    ts_start();
    ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    CK(cuStreamCreate(&s, 0));
    CK(cuMemAlloc(&a, N));
    CK(simcuda_launch(s, a, 1, N, 20000));
    ck_assert_int_eq(cuEventRecord(NULL, s), CUDA_ERROR_INVALID_HANDLE);
    CK(cuDevicePrimaryCtxReset(0));
    k = ts_counters();
    ck_assert_uint_eq(k.stream_ops, k.stream_ops_done);
    ck_assert_uint_eq(k.stream_faults, 0);
    ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

/* simcuda_hold_next_ctx_teardown: a destroy, a reset and a last release each wait inside the
 * driver, their context's memory still held, until the gate opens; then they free it. Only the
 * next teardown is held. The thread is known to be inside by the entry point's call count. */
struct td_arg {
    int which; /* 0: cuCtxDestroy(ctx), 1: cuDevicePrimaryCtxReset, 2: cuDevicePrimaryCtxRelease */
    CUcontext ctx;
};

static void *teardown_thread(void *arg)
{
    const struct td_arg *a = arg;
    CUresult r = a->which == 0   ? cuCtxDestroy(a->ctx)
                 : a->which == 1 ? cuDevicePrimaryCtxReset(0)
                                 : cuDevicePrimaryCtxRelease(0);
    return (void *)(uintptr_t)r;
}

START_TEST(context_teardown_held)
{
    static const char *const entry[] = {"cuCtxDestroy_v2", "cuDevicePrimaryCtxReset_v2",
                                        "cuDevicePrimaryCtxRelease_v2"};
    CK(cuInit(0));
    for (int which = 0; which < 3; which++) {
        struct td_arg arg = {.which = which};
        CUcontext c;
        CUdeviceptr a;
        unsigned g;
        if (which == 0) {
            CK(cuCtxCreate(&c, NULL, 0, 0));
        } else {
            CK(cuDevicePrimaryCtxRetain(&c, 0));
            CK(cuCtxSetCurrent(c));
        }
        arg.ctx = c;
        CK(cuMemAlloc(&a, N));
        CK(simcuda_hold_next_ctx_teardown(&g));
        unsigned long long n = simcuda_entry_calls(entry[which]);
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, teardown_thread, &arg), 0);
        while (simcuda_entry_calls(entry[which]) == n)
            sched_yield();
        ck_assert_uint_eq(ts_counters().bytes_in_use, N); /* inside, held: nothing freed yet */
        simcuda_gate_open(g);
        void *r;
        ck_assert_int_eq(pthread_join(t, &r), 0);
        ck_assert_int_eq((int)(uintptr_t)r, CUDA_SUCCESS);
        ck_assert_uint_eq(ts_counters().bytes_in_use, 0);
        CK(cuCtxSetCurrent(NULL));
        if (which == 1)
            CK(cuDevicePrimaryCtxRelease(0)); /* the reset kept the reference */
    }
    CUcontext c;
    CK(cuCtxCreate(&c, NULL, 0, 0));
    CK(cuCtxDestroy(c)); /* not held: the hold was for one teardown */
    ck_assert_int_eq(simcuda_hold_next_ctx_teardown(NULL), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* "cuCtxDestroy ... destroys and cleans up all resources associated with the context": its events
 * die with it (INVALID_HANDLE after), and the next cuEventCreate may return the same handle (the
 * record is reused, as the real driver reuses the freed memory). So for a primary context's reset
 * and its last release; another context's events live on. */
START_TEST(events_die_with_their_context)
{
    CUcontext a = ts_start(), b;
    CUevent ea, eb, again;
    CK(cuEventCreate(&ea, CU_EVENT_DISABLE_TIMING));
    CK(cuCtxCreate(&b, NULL, 0, 0)); /* b current */
    CK(cuEventCreate(&eb, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(eb, NULL));
    CK(cuCtxDestroy(b));
    ck_assert_int_eq(cuEventQuery(eb), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventSynchronize(eb), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventDestroy(eb), CUDA_ERROR_INVALID_HANDLE);
    CK(cuCtxSetCurrent(a));
    CK(cuEventQuery(ea)); /* a's event lives */
    CK(cuEventCreate(&again, CU_EVENT_DISABLE_TIMING));
    ck_assert_ptr_eq(again, eb); /* the dead event's handle, reused */
    CK(cuEventRecord(again, NULL));
    CK(cuEventSynchronize(again));
    CK(cuDevicePrimaryCtxReset(0)); /* a is the primary context: its events go too */
    ck_assert_int_eq(cuEventQuery(ea), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuEventQuery(again), CUDA_ERROR_INVALID_HANDLE);
    a = ts_start();
    CK(cuEventCreate(&ea, 0));
    CK(cuDevicePrimaryCtxRelease(0)); /* the first retain, from ts_start before the reset */
    CK(cuEventQuery(ea));             /* one reference left: the context and its event live */
    CK(cuDevicePrimaryCtxRelease(0)); /* the last */
    ck_assert_int_eq(cuEventQuery(ea), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

/* Pending work belongs to the parent: a forked child starts with idle streams. */
START_TEST(fork_with_pending_work)
{
    ts_start();
    CUstream s;
    unsigned g;
    CUdeviceptr a = alloc_n();
    CK(cuStreamCreate(&s, 0));
    CK(simcuda_gate(s, &g));
    CK(simcuda_launch(s, a, 1, N, 0));
    pid_t pid = fork();
    if (pid == 0)
        _exit(cuStreamQuery(s) == CUDA_SUCCESS && cuCtxSynchronize() == CUDA_SUCCESS ? 0 : 1);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    simcuda_gate_open(g);
    CK(cuStreamSynchronize(s));
    expect_bytes(a, 1);
}
END_TEST

typedef struct churn_arg {
    CUcontext ctx;
    int id, bad;
} churn_arg_t;

/* Streams of every kind, events between them, copies and sets, all through workers. */
static void *stream_churn(void *p)
{
    churn_arg_t *t = p;
    unsigned char h[256];
    CUstream s, w;
    CUevent e;
    CUdeviceptr a, b;
    cuCtxSetCurrent(t->ctx);
    int bad = cuStreamCreate(&s, t->id % 2 ? CU_STREAM_NON_BLOCKING : 0) != CUDA_SUCCESS;
    bad |= cuStreamCreate(&w, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS;
    bad |= cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS;
    bad |= cuMemAlloc(&a, 256) != CUDA_SUCCESS || cuMemAlloc(&b, 256) != CUDA_SUCCESS;
    CUstream first = t->id % 3 == 2 ? CU_STREAM_PER_THREAD : s;
    for (int i = 0; i < 40 && !bad; i++) {
        unsigned char v = (unsigned char)(t->id * 40 + i);
        bad |= simcuda_launch(first, a, v, 256, (unsigned)(i % 3) * 50) != CUDA_SUCCESS;
        bad |= cuEventRecord(e, first) != CUDA_SUCCESS;
        bad |= cuStreamWaitEvent(w, e, 0) != CUDA_SUCCESS;
        bad |= cuMemcpyDtoDAsync(b, a, 256, w) != CUDA_SUCCESS;
        bad |= cuMemcpyDtoHAsync(h, b, 256, w) != CUDA_SUCCESS;
        bad |= cuStreamSynchronize(w) != CUDA_SUCCESS;
        for (int k = 0; k < 256 && !bad; k++)
            bad |= h[k] != v;
        if (i % 10 == 9)
            bad |= cuMemFree(a) != CUDA_SUCCESS || cuMemAlloc(&a, 256) != CUDA_SUCCESS;
    }
    cuEventDestroy(e);
    cuStreamDestroy(s);
    cuStreamDestroy(w);
    cuMemFree(a);
    cuMemFree(b);
    t->bad = bad;
    return NULL;
}

START_TEST(stream_threads)
{
    setenv("SIMCUDA_STREAM_DELAY_US", "20", 1);
    CUcontext ctx = ts_start();
    enum { T = 8 };
    pthread_t tid[T];
    churn_arg_t args[T];
    for (int i = 0; i < T; i++) {
        args[i] = (churn_arg_t){.ctx = ctx, .id = i};
        ck_assert_int_eq(pthread_create(&tid[i], NULL, stream_churn, &args[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        ck_assert_int_eq(pthread_join(tid[i], NULL), 0);
        ck_assert_msg(!args[i].bad, "thread %d saw a failed call or a wrong byte", i);
    }
    CK(cuCtxSynchronize());
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.stream_ops, c.stream_ops_done);
    ck_assert_uint_eq(c.stream_faults, 0);
    ck_assert_uint_eq(c.bytes_in_use, 0);
}
END_TEST

START_TEST(stream_getproc)
{
    ts_start();
    void *fn;
    CK(cuGetProcAddress_v2("cuEventRecord", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    ck_assert_ptr_eq(fn, ts_sym("cuEventRecord_ptsz"));
    CK(cuGetProcAddress_v2("cuEventRecord", &fn, 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL));
    ck_assert_ptr_eq(fn, ts_sym("cuEventRecord"));
    CK(cuGetProcAddress_v2("cuMemcpyHtoDAsync", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
    ck_assert_ptr_eq(fn, ts_sym("cuMemcpyHtoDAsync_v2_ptsz"));
    CK(cuGetProcAddress_v2("cuEventDestroy", &fn, 13000, 0, NULL));
    ck_assert_ptr_eq(fn, ts_sym("cuEventDestroy_v2"));
    CK(cuGetProcAddress_v2("cuEventElapsedTime", &fn, 12000, 0, NULL));
    ck_assert_ptr_eq(fn, ts_sym("cuEventElapsedTime"));
    CK(cuGetProcAddress_v2("cuStreamQuery", &fn, 13000, 0, NULL));
    ck_assert_ptr_eq(fn, ts_sym("cuStreamQuery"));
}
END_TEST

/* The hazard program on the driver alone: every stream kind and free kind keeps data intact; its
 * own naive allocator is caught (exit 1); bad arguments exit 2. */
static int run_hazard(const char *kind, const char *free_kind, const char *threads, const char *naive)
{
    const char *path = getenv("SIMCUDA_TEST_HAZARD");
    ck_assert_msg(path != NULL, "SIMCUDA_TEST_HAZARD should name build/sim/hazard");
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execl(path, path, kind, free_kind, threads, naive, (char *)NULL);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* cuMemAllocAsync on a created stream allocates on the stream's device, with no context current
 * or another device's current ("The allocation comes from the memory pool current to the stream's
 * device"; CUDA_ERROR_INVALID_CONTEXT only for a "default stream specified with no current
 * context"); the stream's other calls need no current context either. */
START_TEST(async_alloc_on_streams_context)
{
    setenv("SIMCUDA_DEVICES", "2", 1);
    CUcontext a = ts_start(), b, got;
    CUdevice d1;
    CUstream s1;
    CUdeviceptr p, q, r;
    CK(cuDeviceGet(&d1, 1));
    CK(cuCtxCreate(&b, NULL, 0, d1)); /* b current */
    CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CK(cuCtxSetCurrent(a)); /* device 0 current, the stream device 1's */
    CK(cuMemAllocAsync(&p, 3 * N, s1));
    ck_assert_uint_eq(simcuda_device_bytes_in_use(0), 0);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(1), 3 * N);
    while (cuCtxPopCurrent(&got) == CUDA_SUCCESS) /* none current */
        ;
    CK(cuMemAllocAsync(&q, N, s1));
    CK(PTSZ(cuMemAllocAsync_ptsz, alloc_async_fn)(&r, N, s1));
    ck_assert_uint_eq(simcuda_device_bytes_in_use(1), 5 * N);
    ck_assert_int_eq(cuMemAllocAsync(&r, N, NULL), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemAllocAsync(&r, N, CU_STREAM_LEGACY), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemAllocAsync(&r, 0, s1), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamGetCtx(s1, &got));
    ck_assert_ptr_eq(got, b);
    CK(cuMemFreeAsync(p, s1));
    CK(cuMemFreeAsync(q, s1));
    CK(cuMemFreeAsync(r, s1));
    CK(cuStreamSynchronize(s1));
    ck_assert_int_eq(cuStreamQuery(s1), CUDA_SUCCESS);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(1), 0);
    ck_assert_int_eq(cuStreamSynchronize(NULL), CUDA_ERROR_INVALID_CONTEXT);
}
END_TEST

/* Stream capture: synchronising or querying a capturing stream, the legacy stream over a blocking
 * one, or its context is refused (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and invalidates the capture,
 * as the CUDA Programming Guide says; events and other contexts are not affected. */
START_TEST(stream_capture_rules)
{
    CUcontext a = ts_start(), b;
    CUdevice dev;
    CUstream s, nb;
    CUgraph g = NULL;
    CUevent ev;
    CUstreamCaptureStatus st;
    CK(cuDeviceGet(&dev, 0));
    CK(cuStreamCreate(&s, 0));
    CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(ev, nb));
    ck_assert_int_eq(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_RELAXED),
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ck_assert_int_eq(cuStreamBeginCapture(nb, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuStreamEndCapture(nb, &g), CUDA_ERROR_ILLEGAL_STATE);
    /* a clean capture */
    CK(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_RELAXED));
    ck_assert_int_eq(cuStreamBeginCapture(nb, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_ILLEGAL_STATE);
    CK(cuStreamIsCapturing(nb, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CK(cuStreamIsCapturing(CU_STREAM_LEGACY, &st)); /* nb is non-blocking */
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuEventQuery(ev));
    CK(cuEventSynchronize(ev));
    CK(cuStreamSynchronize(s));
    CK(cuCtxCreate(&b, NULL, 0, dev)); /* another context synchronises freely */
    CK(cuCtxSynchronize());
    CK(cuCtxPopCurrent(&b));
    CK(cuStreamEndCapture(nb, &g));
    ck_assert_ptr_nonnull(g);
    CK(cuStreamIsCapturing(nb, &st));
    ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    /* each refused call invalidates it */
    for (int k = 0; k < 4; k++) {
        CUstream cap = k == 3 ? s : nb;
        CK(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_RELAXED));
        CUresult r = k == 0 ? cuCtxSynchronize() : k == 1 ? cuStreamSynchronize(nb)
                     : k == 2 ? cuStreamQuery(nb) : cuStreamSynchronize(CU_STREAM_LEGACY);
        ck_assert_int_eq(r, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        if (k == 3)
            ck_assert_int_eq(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
        CK(cuStreamIsCapturing(cap, &st));
        ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
        ck_assert_int_eq(cuStreamEndCapture(cap, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        ck_assert_ptr_null(g);
    }
    CK(cuCtxSynchronize_v2(a));
    CK(cuCtxSynchronize());
    /* a destroyed stream's capture ends with it: the context synchronises again (it was refused
     * for good until 2026-12-06) */
    CUstream gone;
    CK(cuStreamCreate(&gone, CU_STREAM_NON_BLOCKING));
    CK(cuStreamBeginCapture(gone, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuStreamDestroy(gone));
    CK(cuCtxSynchronize());
}
END_TEST

START_TEST(hazard_program)
{
    static const char *const kinds[] = {"blocking", "nonblocking", "perthread"};
    static const char *const frees[] = {"sync", "async"};
    for (int k = 0; k < 3; k++)
        for (int f = 0; f < 2; f++) {
            ck_assert_msg(run_hazard(kinds[k], frees[f], "3", NULL) == 0, "hazard %s %s 3 should pass", kinds[k],
                          frees[f]);
            ck_assert_msg(run_hazard(kinds[k], frees[f], "1", "naive") == 1, "hazard %s %s 1 naive should fail",
                          kinds[k], frees[f]);
        }
    ck_assert_int_eq(run_hazard("sideways", "sync", "1", NULL), 2);
    ck_assert_int_eq(run_hazard("blocking", "later", "1", NULL), 2);
    ck_assert_int_eq(run_hazard("blocking", "sync", "0", NULL), 2);
    ck_assert_int_eq(run_hazard("blocking", "sync", "1", "clever"), 2);
}
END_TEST

void ts_stream_more_add(TCase *tc)
{
    tcase_add_test(tc, context_teardown_waits);
    tcase_add_test(tc, context_teardown_held);
    tcase_add_test(tc, events_die_with_their_context);
    tcase_add_test(tc, fork_with_pending_work);
    tcase_add_test(tc, stream_threads);
    tcase_add_test(tc, stream_getproc);
    tcase_add_test(tc, hazard_program);
    tcase_add_test(tc, async_alloc_on_streams_context);
    tcase_add_test(tc, stream_capture_rules);
}
