/* Preload tests: waits for the device made with no lock of gpuarena's held (device-synchronised
 * frees, trims, out-of-memory waits, async frees without an event), and the events behind async
 * frees: on a dead stream, in the stream's context, dying with their context, failing to record
 * (split from t_stream.c; shared pieces in t_stream.h). Added to the "stream" case by
 * pt_stream_wait_add().
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

/* Under GPUARENA_FREE_SYNC=device (and in platform mode, and for managed memory) a cuMemFree
 * waits for the device, and it must wait with no lock of gpuarena's held (helper-42 F4): here the device's work is a stream held by a gate that only
 * the main thread opens (as a stream waiting on a flag the host writes). Thread 2 frees an
 * unrelated block and waits in the driver; the main thread, once the driver has thread 2's
 * synchronisation, allocates, asks cuMemGetInfo and cuMemGetAddressRange, and only then opens
 * the gate. With the wait under the context's lock the main thread blocked for ever (an alarm
 * ends the child then). */
static CUdeviceptr unrelated;
static int then_alloc; /* thread 2 allocates after its free: deferred's wait is that allocation's */
static void *free_unrelated(void *arg)
{
    CUdeviceptr x;
    if (cuCtxSetCurrent((CUcontext)arg) || cuMemFree(unrelated) ||
        (then_alloc && (cuMemAlloc(&x, N) || cuMemFree(x))))
        exit(20);
    return NULL;
}

static void device_free_child(void *arg)
{
    int managed = (intptr_t)arg == 1;
    then_alloc = (intptr_t)arg == 2;
    alarm(20);
    CUcontext ctx = pt_start();
    CUstream s;
    CUdeviceptr held, q, base;
    size_t fr, tot, len;
    unsigned gate;
    pthread_t t;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&held, N) ||
        (managed ? cuMemAllocManaged(&unrelated, N, CU_MEM_ATTACH_GLOBAL) : cuMemAlloc(&unrelated, N)) ||
        simcuda_gate(s, &gate) != CUDA_SUCCESS ||
        simcuda_launch(s, held, 0xAA, N, 0) != CUDA_SUCCESS)
        exit(2);
    unsigned long long calls = simcuda_entry_calls("cuCtxSynchronize");
    if (pthread_create(&t, NULL, free_unrelated, (void *)ctx))
        exit(3);
    while (simcuda_entry_calls("cuCtxSynchronize") <= calls)
        sched_yield(); /* thread 2 is in the driver, waiting for the stream */
    /* Under deferred the main thread's own allocation would have to pass thread 2's free too, and
     * wait (README: that wait is the next allocation's): it only asks then. */
    if ((then_alloc ? (q = held, 0) : cuMemAlloc(&q, N)) || cuMemGetInfo(&fr, &tot) ||
        cuMemGetAddressRange(&base, &len, q) || base != q)
        exit(4);
    simcuda_gate_open(gate);
    pthread_join(t, NULL);
    if (cuStreamSynchronize(s) || !all_bytes(held, 0xAA))
        exit(5);
    exit(0);
}

START_TEST(device_free_waits_without_the_lock)
{
    /* device mode's pool frees in the three pool modes; platform mode's frees (the driver's own
     * cuMemFree) under the default setting; managed memory's (passed through) in arena mode */
    static const char *const modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow",
                                        "GPUARENA_MODE=vmm", "GPUARENA_MODE=platform",
                                        "GPUARENA_MODE=arena", "GPUARENA_MODE=arena",
                                        "GPUARENA_MODE=grow", "GPUARENA_MODE=vmm"};
    /* and, under the default deferred setting, thread 2's next allocation, which waits for its
     * free: with no lock held too (the main thread's allocation is served meanwhile) */
    for (int m = 0; m < 8; m++) {
        char err[4096];
        pt_env(modes[m], m < 3 ? "GPUARENA_FREE_SYNC=device" : "GPUARENA_FREE_SYNC=deferred",
               "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        intptr_t how = m == 4 ? 1 : m > 4 ? 2 : 0;
        int rc = pt_run_child(device_free_child, (void *)how, err, sizeof err);
        ck_assert_msg(rc == 0, "%s%s: exit %d (a signal: the main thread blocked behind thread "
                      "2's wait); %s", modes[m], how == 1 ? ", managed memory" :
                      how == 2 ? ", deferred, thread 2 allocating" : "", rc, err);
    }
}
END_TEST

/* The wait for another context's pending frees before an out-of-memory (ga_dev_trim) is made with
 * that context's lock let go too (helper-49 F11). Contexts A (the primary) and B on device 0 under
 * a 64 MiB cap: A's 40 MiB block freed (pending under deferred), then B's stream held by a gate
 * that only the main thread opens. Thread 2 asks 40 MiB in B: no room, so the device is trimmed,
 * which waits for B's stream. Once the driver has that synchronisation (two cuCtxSynchronize: A's,
 * then B's), the main thread asks cuMemGetInfo in A (which looks at A's pass-through frees under
 * its lock), then opens the gate. With the wait under A's lock the main thread blocked for ever
 * (the alarm ends the child). Thread 2's allocation then succeeds on A's returned memory. */
static CUcontext trim_b;
static CUresult trim_r = CUDA_ERROR_UNKNOWN;
static void *trim_alloc_in_b(void *arg)
{
    CUdeviceptr q;
    (void)arg;
    if (cuCtxSetCurrent(trim_b))
        exit(20);
    trim_r = cuMemAlloc(&q, 40u << 20);
    return NULL;
}

static void trim_child(void *arg)
{
    (void)arg;
    alarm(20);
    CUcontext a = pt_start();
    CUdevice dev;
    CUdeviceptr big, held;
    CUstream s;
    unsigned gate;
    size_t fr, tot;
    pthread_t t;
    if (cuDeviceGet(&dev, 0) || cuMemAlloc(&big, 40u << 20) || cuMemFree(big) ||
        cuCtxCreate(&trim_b, NULL, 0, dev) || cuMemAlloc(&held, N) ||
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || simcuda_gate(s, &gate) != CUDA_SUCCESS ||
        simcuda_launch(s, held, 0xAA, N, 0) != CUDA_SUCCESS || cuCtxSetCurrent(a))
        exit(2);
    unsigned long long calls = simcuda_entry_calls("cuCtxSynchronize");
    if (pthread_create(&t, NULL, trim_alloc_in_b, NULL))
        exit(3);
    while (simcuda_entry_calls("cuCtxSynchronize") < calls + 2)
        sched_yield(); /* thread 2 waits in the driver for B's stream */
    if (cuMemGetInfo(&fr, &tot))
        exit(4);
    simcuda_gate_open(gate);
    pthread_join(t, NULL);
    exit(trim_r == CUDA_SUCCESS ? 0 : 10);
}

START_TEST(trim_waits_without_other_contexts_lock)
{
    static const char *const modes[] = PT_POOL_MODES;
    for (int m = 0; m < 3; m++) {
        char err[4096];
        pt_env(modes[m], "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(trim_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (a signal: A's cuMemGetInfo blocked behind the trim's "
                      "wait for B's stream; 10: B's allocation failed); %s", modes[m], rc, err);
    }
}
END_TEST

/* The out-of-memory path's own waits are made with the context's lock let go (h34 F6). A block the
 * thread 2 needs comes back only after a wait for the device, whose stream S is held by a gate
 * that only the main thread opens: how 0, A (40 MiB) freed with cuMemFreeAsync on S (its event
 * waited for; arena, grow, vmm); how 1, grow mode, an empty 30 MiB region given back with the
 * driver's cuMemFree, which waits for the device. Once thread 2 is inside the driver's wait, the
 * main thread, in the same context, asks cuMemGetInfo, forks and allocates 1 MiB (which fits),
 * then opens the gate. With the wait under the context's lock the main thread blocked for ever
 * (the alarm ends the child); thread 2's allocation succeeds after the gate (how 1: or is refused,
 * when the main thread's block took room in the region meanwhile). */
static CUcontext oomw_ctx;
static CUresult oomw_r = CUDA_ERROR_UNKNOWN;
static void *oomw_alloc(void *arg)
{
    CUdeviceptr q;
    (void)arg;
    if (cuCtxSetCurrent(oomw_ctx))
        exit(20);
    oomw_r = cuMemAlloc(&q, 40u << 20);
    return NULL;
}

static unsigned long long oomw_waits(void)
{
    return simcuda_entry_calls("cuCtxSynchronize") + simcuda_entry_calls("cuEventSynchronize") +
           simcuda_entry_calls("cuMemFree_v2");
}

static void oomw_child(void *arg)
{
    int how = (int)(intptr_t)arg;
    alarm(20);
    oomw_ctx = pt_start();
    CUstream s;
    CUdeviceptr a, b, c;
    unsigned gate;
    size_t fr, tot;
    pthread_t t;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))
        exit(2);
    if (how == 0 && (cuMemAllocAsync(&a, 40u << 20, s) || cuMemAlloc(&b, N) ||
                     cuStreamSynchronize(s) || simcuda_gate(s, &gate) != CUDA_SUCCESS ||
                     cuMemFreeAsync(a, s)))
        exit(3);
    if (how == 1 && (cuMemAlloc(&a, 30u << 20) || cuMemAlloc(&b, N) || cuMemFree(a) ||
                     cuCtxSynchronize() || simcuda_gate(s, &gate) != CUDA_SUCCESS))
        exit(4);
    unsigned long long waits = oomw_waits();
    if (pthread_create(&t, NULL, oomw_alloc, NULL))
        exit(5);
    while (oomw_waits() == waits)
        sched_yield(); /* thread 2 waits in the driver for S */
    if (cuMemGetInfo(&fr, &tot))
        exit(6);
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
        exit(7);
    if (cuMemAlloc(&c, N))
        exit(8);
    simcuda_gate_open(gate);
    pthread_join(t, NULL);
    /* how 1: the main thread's 1 MiB may have landed in the empty region meanwhile */
    exit(oomw_r == CUDA_SUCCESS || (how == 1 && oomw_r == CUDA_ERROR_OUT_OF_MEMORY) ? 0 : 10);
}

START_TEST(oom_waits_without_the_contexts_lock)
{
    static const char *const modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow",
                                        "GPUARENA_MODE=vmm", "GPUARENA_MODE=grow"};
    for (int m = 0; m < 4; m++) {
        char err[4096];
        pt_env(modes[m], "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(oomw_child, (void *)(intptr_t)(m == 3), err, sizeof err);
        ck_assert_msg(rc == 0, "%s%s: exit %d (a signal: the main thread's cuMemGetInfo, fork or "
                      "allocation blocked behind thread 2's wait; 10: its allocation failed); %s",
                      modes[m], m == 3 ? ", an empty region given back" : ", an async free",
                      rc, err);
    }
}
END_TEST

/* A cuMemFreeAsync that gets no event (the driver refuses cuEventRecord, as out of resources)
 * synchronises its stream and frees at once, with the context's lock let go (h34 F6, third path;
 * platform mode: a pass-through block, whose bytes leave the cap once the stream has passed):
 * thread 2's free waits for a stream held by a gate the main thread opens after its cuMemGetInfo in
 * the same context. Before, the wait was made under the lock and cuMemGetInfo blocked for ever. */
static CUcontext evf_ctx;
static CUstream evf_s;
static CUdeviceptr evf_a;
static CUresult evf_r = CUDA_ERROR_UNKNOWN;
static void *evf_free(void *arg)
{
    (void)arg;
    if (cuCtxSetCurrent(evf_ctx))
        exit(20);
    evf_r = cuMemFreeAsync(evf_a, evf_s);
    return NULL;
}

static void evfw_child(void *arg)
{
    int pass = (int)(intptr_t)arg; /* 1: platform mode's pass-through cuMemAllocAsync block */
    alarm(20);
    evf_ctx = pt_start();
    CUdeviceptr b, base;
    unsigned gate;
    size_t fr, tot, n;
    pthread_t t;
    if (cuStreamCreate(&evf_s, CU_STREAM_NON_BLOCKING) ||
        (pass ? cuMemAllocAsync(&evf_a, N, evf_s) || cuStreamSynchronize(evf_s)
              : cuMemAlloc(&evf_a, N)) || cuMemAlloc(&b, N) ||
        simcuda_gate(evf_s, &gate) != CUDA_SUCCESS || simcuda_fail_add("cuEventRecord:1+") != 0)
        exit(2);
    unsigned long long waits = simcuda_entry_calls("cuStreamSynchronize");
    if (pthread_create(&t, NULL, evf_free, NULL))
        exit(3);
    while (simcuda_entry_calls("cuStreamSynchronize") == waits)
        sched_yield(); /* thread 2 waits in the driver for the stream */
    if (cuMemGetInfo(&fr, &tot))
        exit(4);
    simcuda_gate_open(gate);
    pthread_join(t, NULL);
    simcuda_fail_clear();
    if (evf_r != CUDA_SUCCESS)
        exit(10);
    if (cuMemGetAddressRange(&base, &n, evf_a) != CUDA_ERROR_NOT_FOUND)
        exit(11); /* freed at once */
    exit(0);
}

START_TEST(async_free_without_event_waits_without_the_lock)
{
    static const char *const modes[] = PT_ALL_MODES;
    for (int m = 0; m < 4; m++) {
        char err[4096];
        pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(evfw_child, (void *)(intptr_t)(m == 3), err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (a signal: cuMemGetInfo blocked behind the free's wait; "
                      "10: the free failed; 11: the block was not freed); %s", modes[m], rc, err);
    }
}
END_TEST

/* A second cuMemFreeAsync of a block on a destroyed stream: the driver checks the stream first and
 * answers CUDA_ERROR_INVALID_HANDLE; gpuarena answered 1 (a double free) while the first free was
 * pending (helper-42 F10). The block's first free still completes. */
static void dead_stream_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s;
    CUdeviceptr p;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAllocAsync(&p, N, s) ||
        cuMemFreeAsync(p, s) || cuStreamDestroy(s))
        exit(2);
    CUresult r = cuMemFreeAsync(p, s);
    if (r != CUDA_ERROR_INVALID_HANDLE)
        exit(10 + (int)r % 100);
    exit(0);
}

START_TEST(async_double_free_on_dead_stream_is_the_stream_error)
{
    static const char *const modes[] = PT_ALL_MODES;
    for (int m = 0; m < 4; m++) {
        char err[4096];
        pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(dead_stream_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (10 + the answer: 11 is 1, a double free); %s",
                      modes[m], rc, err);
    }
}
END_TEST

/* cuMemFreeAsync of context A's memory whichever context is current and whichever context's
 * stream it names (helper-42 F3): the driver records an event only on a stream of the event's own
 * context ("hEvent and hStream must be from the same context", cuEventRecord; the simulated driver
 * enforces it), so each free's event must be made in its stream's context, and A's free list of
 * events must hold only A's. With B current: A's block on A's stream, on B's created, legacy and
 * per-thread streams, and pass-through memory on A's stream; then, A current, a free on B's stream
 * and 43 on A's own (past the 32 events A keeps, where B's events used to land). Every free
 * answers 0, records its event (free_events) and frees the block. */
#define EVCTX_K 48
static void evctx_child(void *arg)
{
    (void)arg;
    CUcontext a = pt_start(), b;
    CUdevice dev;
    CUstream sa, sb;
    CUdeviceptr p[EVCTX_K], pp, t, base;
    size_t size;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate(&b, NULL, 0, dev) ||
        cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || cuCtxSetCurrent(a) ||
        cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING))
        exit(2);
    for (int i = 0; i < EVCTX_K; i++)
        if (cuMemAllocAsync(&p[i], N, sa))
            exit(3);
    if (cuMemAllocFromPoolAsync(&pp, N, NULL, sa) || cuStreamSynchronize(sa) || cuCtxSetCurrent(b))
        exit(3);
    if (cuMemFreeAsync(p[0], sa))
        exit(10);
    if (cuMemFreeAsync(p[1], sb))
        exit(11);
    if (cuMemFreeAsync(p[2], NULL))
        exit(12);
    if (cuMemFreeAsync(p[3], CU_STREAM_PER_THREAD))
        exit(13);
    if (cuMemFreeAsync(pp, sa))
        exit(14);
    if (cuStreamSynchronize(sb) || cuCtxSynchronize() || cuCtxSetCurrent(a))
        exit(4);
    if (cuMemAlloc(&t, N) || cuMemFree(t))
        exit(5); /* the passed entries go back to A's pool, their events with them */
    if (cuMemFreeAsync(p[4], sb))
        exit(15);
    for (int i = 5; i < EVCTX_K; i++)
        if (cuMemFreeAsync(p[i], sa))
            exit(16);
    if (cuStreamSynchronize(sa) || cuCtxSetCurrent(b) || cuStreamSynchronize(sb) ||
        cuCtxSetCurrent(a))
        exit(6);
    for (int i = 0; i < EVCTX_K; i++)
        if (cuMemGetAddressRange(&base, &size, p[i]) != CUDA_ERROR_NOT_FOUND)
            exit(7); /* still live: not freed */
    exit(0);
}

START_TEST(async_free_event_in_the_streams_context)
{
    static const char *const modes[] = PT_POOL_MODES;
    for (int m = 0; m < 3; m++) {
        char stats[] = "/tmp/gpuarena-evctx-XXXXXX", senv[128], err[4096];
        close(mkstemp(stats));
        snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
        pt_env(senv, modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(evctx_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (10-14: a free with B current refused: of A's block on "
                      "A's stream, B's stream, B's legacy stream, B's per-thread stream, of "
                      "pass-through memory; 15: on B's stream with A current; 16: A's own free "
                      "on A's stream; 7: a block not freed); %s", modes[m], rc, err);
        char expr[128];
        snprintf(expr, sizeof expr, "d['totals']['free_events'] == %d", EVCTX_K + 1);
        ck_assert_msg(pt_json_check(stats, expr) == 0, "%s: every free recorded its event (%s)",
                      modes[m], expr);
        unlink(stats);
    }
}
END_TEST

/* A free of context A's blocks on a stream of context B (a pool block, and pass-through memory
 * from cuMemAllocFromPoolAsync) holds an event the shim made in B. B's teardown destroys B's
 * events and the driver hands their handles to the next cuEventCreate (the simulated driver as
 * the real one, test events_die_with_their_context). The shim must be done with those events
 * before B goes: before, A's next allocation found its pending free's stale handle, now the
 * program's own new event, and destroyed it (helper-21 F1: the program's cuEventRecord answered
 * CUDA_ERROR_INVALID_HANDLE). Loop: mode (arena, grow, vmm, platform) x how B goes (cuCtxDestroy,
 * primary reset, last primary release, last cuCtxDetach). Exit codes: the child's steps. */
#define FEV_MINE 4

static void fev_child(void *arg)
{
    int how = (int)(intptr_t)arg;
    CUdevice dev;
    CUcontext a, b;
    CUstream sa, sb;
    CUdeviceptr p, pp, q, qq;
    CUevent mine[FEV_MINE];
    CUresult (*detach)(CUcontext) = NULL;
    if (cuInit(0) || cuDeviceGet(&dev, 0) ||
        cuGetProcAddress_v2("cuCtxDetach", (void **)&detach, 2000, 0, NULL) ||
        cuCtxCreate(&a, NULL, 0, dev) || cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING) ||
        cuMemAlloc(&p, N) || cuMemAllocFromPoolAsync(&pp, N, NULL, sa) || cuStreamSynchronize(sa))
        exit(2);
    if (how == 1 || how == 2 ? cuDevicePrimaryCtxRetain(&b, dev) || cuCtxSetCurrent(b)
                             : cuCtxCreate(&b, NULL, 0, dev))
        exit(3);
    if (cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || cuMemFreeAsync(p, sb) ||
        cuMemFreeAsync(pp, sb))
        exit(4); /* A's blocks freed on B's stream, B current (no wait: that would settle them) */
    CUresult r = how == 0   ? cuCtxDestroy(b)
                 : how == 1 ? cuDevicePrimaryCtxReset(dev)
                 : how == 2 ? cuDevicePrimaryCtxRelease(dev)
                            : detach(b);
    if (r != CUDA_SUCCESS || cuCtxSetCurrent(a))
        exit(5);
    for (int i = 0; i < FEV_MINE; i++) /* the program's own: may get B's dead events' handles */
        if (cuEventCreate(&mine[i], CU_EVENT_DISABLE_TIMING))
            exit(6);
    size_t fr, total;
    if (cuMemAlloc(&q, N) || cuMemAllocFromPoolAsync(&qq, N, NULL, sa) || cuCtxSynchronize() ||
        cuStreamSynchronize(sa) || cuMemGetInfo(&fr, &total))
        exit(7); /* A's pending frees looked at again: events queried, returned, destroyed */
    for (int i = 0; i < FEV_MINE; i++)
        if (cuEventRecord(mine[i], sa) || cuEventSynchronize(mine[i]) || cuEventDestroy(mine[i]))
            exit(10 + i); /* the program's event destroyed under it */
    if (cuMemFree(q) || cuMemFreeAsync(qq, sa) || cuStreamSynchronize(sa) || cuCtxDestroy(a))
        exit(8);
    exit(0);
}

START_TEST(foreign_event_dies_with_its_context)
{
    static const char *const modes[] = PT_ALL_MODES;
    static const char *const hows[] = {"cuCtxDestroy", "primary reset", "last primary release",
                                       "cuCtxDetach"};
    int how = _i % 4, m = _i / 4;
    char stats[] = "/tmp/gpuarena-fev-XXXXXX", senv[128], err[4096];
    close(mkstemp(stats));
    snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
    pt_env(senv, modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    int rc = pt_run_child(fev_child, (void *)(intptr_t)how, err, sizeof err);
    ck_assert_msg(rc == 0, "%s, %s: exit %d (10-13: the program's own event was destroyed by the "
                  "shim; 2-8: a step refused); %s", modes[m], hows[how], rc, err);
    ck_assert_msg(pt_json_check(stats, "(t := d['totals']) and t['in_use'] == 0 and "
                                       "t['passthrough_bytes'] == 0 and t['pending_bytes'] == 0") == 0,
                  "%s, %s: every block back", modes[m], hows[how]);
    unlink(stats);
}
END_TEST

/* cuMemFreeAsync when the driver will not record the free's event (SIMCUDA_FAIL: cuEventRecord
 * out of memory; helper-42 F6): the program's free was right, so it answers 0 and the block is
 * free (the stream synchronised instead, so the kernel queued before the free has finished):
 * a second free is refused, the address is in no allocation, and the next allocation may take it.
 * A destroyed stream is still refused, its block kept. Pass-through memory freed so comes back
 * whole. */
static void evfail_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s, gone;
    CUdeviceptr p, keep, pp, q, base;
    size_t size;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuStreamCreate(&gone, 0) ||
        cuMemAllocAsync(&p, N, s) || cuMemAllocAsync(&keep, N, s) ||
        cuMemAllocFromPoolAsync(&pp, N, NULL, s) || cuStreamSynchronize(s) ||
        cuStreamDestroy(gone) || simcuda_launch(s, p, 0xAA, N, 20000))
        exit(2);
    if (simcuda_fail_add("cuEventRecord:1+:CUDA_ERROR_OUT_OF_MEMORY") != 0)
        exit(2);
    if (cuMemFreeAsync(p, s) != CUDA_SUCCESS)
        exit(10);
    if (cuMemFreeAsync(p, s) != CUDA_ERROR_INVALID_VALUE)
        exit(11); /* freed once already */
    if (cuMemGetAddressRange(&base, &size, p) != CUDA_ERROR_NOT_FOUND)
        exit(12);
    if (cuMemFreeAsync(keep, gone) != CUDA_ERROR_INVALID_HANDLE ||
        cuMemGetAddressRange(&base, &size, keep) != CUDA_SUCCESS)
        exit(13); /* a stream the driver refuses: nothing freed */
    if (cuMemFreeAsync(pp, s) != CUDA_SUCCESS)
        exit(14);
    simcuda_fail_clear();
    if (cuMemAlloc(&q, N) || cuMemsetD8(q, 0x55, N) || cuCtxSynchronize() || !all_bytes(q, 0x55))
        exit(15); /* the kernel wrote into the next block */
    if (cuMemFree(q) || cuMemFreeAsync(keep, s) || cuStreamSynchronize(s))
        exit(16);
    exit(0);
}

START_TEST(async_free_survives_a_failed_event_record)
{
    static const char *const modes[] = PT_POOL_MODES;
    for (int m = 0; m < 3; m++) {
        char stats[] = "/tmp/gpuarena-evfail-XXXXXX", senv[128], err[4096];
        close(mkstemp(stats));
        snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
        pt_env(senv, modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(evfail_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (10: the free refused, 11-12: the block not freed, "
                      "13: a destroyed stream's free not refused, 14: pass-through free refused, "
                      "15: the next block read the kernel's bytes); %s", modes[m], rc, err);
        ck_assert_msg(pt_json_check(stats, "(t := d['totals']) and t['in_use'] == 0 and "
                                           "t['passthrough_bytes'] == 0 and "
                                           "t['free_events'] == 1") == 0,
                      "%s: every block freed, the last alone with an event", modes[m]);
        unlink(stats);
    }
}
END_TEST

void pt_stream_wait_add(TCase *tc)
{
    tcase_add_test(tc, device_free_waits_without_the_lock);
    tcase_add_test(tc, trim_waits_without_other_contexts_lock);
    tcase_add_test(tc, oom_waits_without_the_contexts_lock);
    tcase_add_test(tc, async_free_without_event_waits_without_the_lock);
    tcase_add_test(tc, async_double_free_on_dead_stream_is_the_stream_error);
    tcase_add_test(tc, async_free_event_in_the_streams_context);
    tcase_add_loop_test(tc, foreign_event_dies_with_its_context, 0, 16);
    tcase_add_test(tc, async_free_survives_a_failed_event_record);
}
