/* Preload tests: an outside check of stream-ordered safety (issue 13) on the simulated driver's
 * real streams: event chains, the legacy and per-thread streams, streams destroyed with frees
 * pending, contexts gpuarena never saw, the waits a program that synchronises itself pays, and the
 * statistics of pending frees. Each scenario runs in a child (pt_run_child) and answers with its
 * exit status; a gate holds a stream where the order matters (one test's delay is said there).
 */
#include "t_stream.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const pool_modes[] = PT_POOL_MODES;
static const char *const all_syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy",
                                        "GPUARENA_FREE_SYNC=device", "GPUARENA_FREE_SYNC=none"};

/* ---- an out-of-memory waits for a cuMemFreeAsync on a stream of a context gpuarena never saw ----
 * A's 40 MiB block (of a 64 MiB cap) is freed with cuMemFreeAsync on a stream of context B, made
 * with cuCtxCreate and used only for that stream, behind a kernel that writes the block for
 * 300 ms. A then asks for 40 MiB at once: the room is the freed block's, and the README promises
 * that every pending chunk is waited for before an out-of-memory is reported. So the allocation
 * must succeed, and the bytes read back after the kernel must be the new buffer's. (The delay
 * matters only before the fix, which refused the allocation well within it; with the wait in
 * place the outcome does not depend on it.) */
static void unknown_ctx_oom_child(void *arg)
{
    (void)arg;
    alarm(30);
    CUcontext a = pt_start(), b;
    CUdevice dev;
    CUstream sb;
    CUdeviceptr p, q = 0;
    if (cuDeviceGet(&dev, 0) || cuMemAlloc(&p, 40 * MiB) || cuCtxCreate(&b, NULL, 0, dev) ||
        cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) ||
        simcuda_launch(sb, p, 0xAA, 40 * MiB, 300000) || cuMemFreeAsync(p, sb) ||
        cuCtxSetCurrent(a))
        exit(2);
    if (cuMemAlloc(&q, 40 * MiB) != CUDA_SUCCESS)
        exit(10); /* refused while the freed block's room was only waiting for B's stream */
    if (cuMemsetD8(q, 0x55, 40 * MiB) || cuCtxSetCurrent(b) || cuStreamSynchronize(sb) ||
        cuCtxSetCurrent(a))
        exit(4);
    exit(all_bytes(q, 0x55) ? 0 : 11);
}

START_TEST(oom_waits_for_async_free_on_unseen_context)
{
    for (int m = 0; m < 3; m++) {
        char err[4096];
        pt_env(pool_modes[m], "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(unknown_ctx_oom_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (10: out of memory while the block freed on the other "
                      "context's stream was pending; 11: the new buffer read the kernel's "
                      "bytes); %s",
                      pool_modes[m], rc, err);
    }
}
END_TEST

/* ---- event chains, the legacy stream, destroyed streams: no chunk before its work passed ----
 * kind 0: a kernel on W (held) writes a; an event on W; S waits for it; a freed on S. A later
 *         cuMemAllocAsync on a third stream X must not get a; one on S may (S waits for W).
 * kind 1: a kernel on blocking stream S (held) writes a; a freed on the legacy stream (which waits
 *         for S); the legacy stream's next allocation may get it, a non-blocking X's must not.
 * kind 2: a kernel on S (held) writes a; a freed on S; S destroyed; a new stream S2 (whose handle
 *         may be S's) must not get a.
 * kind 3: as 2, the new stream's allocation a cuMemAlloc (synchronous) in the same thread.
 * Every buffer allocated meanwhile is written 0x55 in its stream's order after the gate opens (or,
 * for X, S2, at once), and must read 0x55 once all work is done. */
static void chain_child(void *arg)
{
    int kind = (int)(intptr_t)arg;
    alarm(30);
    pt_start();
    CUstream s, w, x, s2;
    CUevent e;
    CUdeviceptr a, b = 0, c = 0;
    unsigned gate;
    if (cuStreamCreate(&s, kind == 1 ? 0 : CU_STREAM_NON_BLOCKING) ||
        cuStreamCreate(&w, CU_STREAM_NON_BLOCKING) || cuStreamCreate(&x, CU_STREAM_NON_BLOCKING) ||
        cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) || cuMemAllocAsync(&a, N, s) ||
        cuStreamSynchronize(s))
        exit(2);
    CUstream ks = kind == 0 ? w : s; /* the kernel's stream */
    if (simcuda_gate(ks, &gate) || simcuda_launch(ks, a, 0xAA, N, 0))
        exit(3);
    if (kind == 0 && (cuEventRecord(e, w) || cuStreamWaitEvent(s, e, 0)))
        exit(3);
    CUstream fs = kind == 1 ? CU_STREAM_LEGACY : s; /* the free's stream */
    if (cuMemFreeAsync(a, fs))
        exit(4);
    if (kind >= 2 && (cuStreamDestroy(s) || cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING)))
        exit(4);
    /* another stream: never a's bytes while the kernel may still write them */
    CUstream other = kind >= 2 ? s2 : x;
    if ((kind == 3 ? cuMemAlloc(&c, N) : cuMemAllocAsync(&c, N, other)) ||
        cuMemsetD8Async(c, 0x55, N, other) || cuStreamSynchronize(other))
        exit(5);
    /* the free's own stream: comes after the kernel, so a's chunk is fine there */
    if (kind <= 1 && (cuMemAllocAsync(&b, N, fs) || cuMemsetD8Async(b, 0x55, N, fs)))
        exit(6);
    simcuda_gate_open(gate);
    if (cuCtxSynchronize())
        exit(7);
    if (!all_bytes(c, 0x55))
        exit(10);
    if (b && !all_bytes(b, 0x55))
        exit(11);
    exit(0);
}

START_TEST(async_free_chains_and_destroyed_streams)
{
    static const char *const kinds[] = {"event chain", "legacy stream", "destroyed stream",
                                        "destroyed stream, cuMemAlloc"};
    static const char *const modes[] = PT_ALL_MODES;
    for (int m = 0; m < 4; m++)
        for (int y = 0; y < 4; y++)
            for (int k = 0; k < 4; k++) {
                char err[4096];
                pt_env(modes[m], all_syncs[y], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
                int rc = pt_run_child(chain_child, (void *)(intptr_t)k, err, sizeof err);
                ck_assert_msg(rc == 0, "%s %s, %s: exit %d (10: another stream's buffer read the "
                              "kernel's bytes; 11: the free's stream's); %s", modes[m],
                              all_syncs[y], kinds[k], rc, err);
            }
}
END_TEST

/* ---- statistics: program_syncs counts only synchronisations that returned chunks ----
 * Two contexts gpuarena knows on the device: A's cuMemFree'd chunk stays pending through A's own
 * cuCtxSynchronize (B's work may still use it), so that synchronisation returned nothing. Then a
 * chunk freed with cuMemFreeAsync on a stream of B, held by a gate: A's synchronisation does not
 * pass it either. Neither may be counted in program_syncs ("the program's own cuCtxSynchronize
 * calls that returned pending chunks to the pool"). */
static void program_syncs_child(void *arg)
{
    (void)arg;
    CUcontext a = pt_start(), b;
    CUdevice dev;
    CUstream sb;
    CUdeviceptr p, q, r2;
    unsigned gate;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate(&b, NULL, 0, dev) || cuMemAlloc(&q, 4096) ||
        cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || cuCtxSetCurrent(a) || cuMemAlloc(&p, N) ||
        cuMemAlloc(&r2, N))
        exit(2);
    if (cuMemFree(p) || cuCtxSynchronize()) /* kept: B is known */
        exit(3);
    if (cuCtxSetCurrent(b) || simcuda_gate(sb, &gate) || simcuda_launch(sb, r2, 0xAA, N, 0) ||
        cuMemFreeAsync(r2, sb) || cuCtxSetCurrent(a) || cuCtxSynchronize())
        exit(4);
    simcuda_gate_open(gate);
    if (cuCtxSetCurrent(b) || cuStreamSynchronize(sb) || cuCtxSetCurrent(a))
        exit(5);
    exit(0);
}

START_TEST(program_syncs_count_only_returns)
{
    char path[] = "/tmp/gpuarena-psync-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    char env[128], err[4096];
    snprintf(env, sizeof env, "GPUARENA_STATS=%s", path);
    pt_env(env, "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    int rc = pt_run_child(program_syncs_child, path, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d; %s", rc, err);
    int bad = pt_json_check(path, "d['totals']['program_syncs'] == 0");
    if (bad) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "grep -o '\"program_syncs\": [^,}]*' %s >&2", path);
        (void)!system(cmd);
    }
    unlink(path);
    ck_assert_msg(bad == 0, "program_syncs counted synchronisations that returned nothing");
}
END_TEST

/* ---- GPUARENA_FREE_SYNC=device: a refused wait is not made again under the context's lock ----
 * The free's wait for the device is made with no lock held (ga_free_any); when the driver refuses
 * it, the chunk is left pending. The free then asked the driver again, with the context's lock
 * held: twice the calls (20 for 10 frees when every one is refused), and when the second call
 * succeeds it waits for the device under the lock, so another thread's range query blocked for
 * ever behind a stream that thread was to release. Here the first wait is refused (injected),
 * a gate holds the stream, thread 2 frees; the main thread asks cuMemGetInfo and
 * cuMemGetAddressRange once thread 2 has made its call or returned, then opens the gate. */
static _Atomic int freed_flag;
static CUdeviceptr refused_x;
static void *refused_free_thread(void *arg)
{
    if (cuCtxSetCurrent((CUcontext)arg) || cuMemFree(refused_x))
        exit(20);
    atomic_store(&freed_flag, 1);
    return NULL;
}

static void refused_once_child(void *arg)
{
    putenv((char *)arg);
    putenv("GPUARENA_FREE_SYNC=device");
    alarm(20);
    CUcontext ctx = pt_start();
    CUstream s;
    CUdeviceptr held, base;
    size_t fr, tot, len;
    unsigned gate;
    pthread_t t;
    char spec[64];
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&held, N) ||
        cuMemAlloc(&refused_x, N) || simcuda_gate(s, &gate) || simcuda_launch(s, held, 0xAA, N, 0))
        exit(2);
    unsigned long long calls = simcuda_entry_calls("cuCtxSynchronize");
    snprintf(spec, sizeof spec, "cuCtxSynchronize:%llu:CUDA_ERROR_UNKNOWN", calls + 1);
    if (simcuda_fail_add(spec) || pthread_create(&t, NULL, refused_free_thread, ctx))
        exit(3);
    while (!atomic_load(&freed_flag) && simcuda_entry_calls("cuCtxSynchronize") < calls + 2)
        sched_yield(); /* thread 2 returned, or asks the driver a second time */
    if (cuMemGetInfo(&fr, &tot) || cuMemGetAddressRange(&base, &len, held) || base != held)
        exit(4);
    simcuda_gate_open(gate);
    pthread_join(t, NULL);
    if (simcuda_entry_calls("cuCtxSynchronize") != calls + 1)
        exit(5); /* the free asked for the wait again */
    if (cuStreamSynchronize(s) || !all_bytes(held, 0xAA))
        exit(6);
    exit(0);
}

START_TEST(device_refused_wait_not_retried_under_the_lock)
{
    for (int m = 0; m < 3; m++) {
        char err[4096];
        atomic_store(&freed_flag, 0);
        int rc = pt_run_child(refused_once_child, (void *)pool_modes[m], err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (killed, or 142 by the alarm: the main thread "
                      "blocked behind the free's second wait, made under the context's lock; 5: "
                      "the free asked the driver twice); %s", pool_modes[m], rc, err);
    }
}
END_TEST

/* ---- a thread's per-thread stream: its frees outlive the thread ----
 * Thread T allocates on its per-thread default stream, holds it with a gate behind a kernel that
 * writes the block, frees the block there (cuMemFreeAsync on CU_STREAM_PER_THREAD, or through
 * cuMemFreeAsync_ptsz with NULL) and exits: its per-thread stream goes with it, its queued work
 * does not. The main thread's allocations (on its own per-thread stream, and cuMemAlloc) must not
 * get the block before the gate opens. */
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream); /* cuda.h names it by a macro */
static unsigned pts_gate;
static CUdeviceptr pts_block;
static int pts_ptsz;
static void *pts_thread(void *arg)
{
    if (cuCtxSetCurrent((CUcontext)arg) || cuMemAllocAsync(&pts_block, N, CU_STREAM_PER_THREAD) ||
        cuStreamSynchronize(CU_STREAM_PER_THREAD) ||
        simcuda_gate(CU_STREAM_PER_THREAD, &pts_gate) ||
        simcuda_launch(CU_STREAM_PER_THREAD, pts_block, 0xAA, N, 0) ||
        (pts_ptsz ? cuMemFreeAsync_ptsz(pts_block, NULL)
                  : cuMemFreeAsync(pts_block, CU_STREAM_PER_THREAD)))
        exit(2);
    return NULL;
}

static void pts_child(void *arg)
{
    pts_ptsz = arg != NULL;
    alarm(30);
    CUcontext ctx = pt_start();
    CUdeviceptr b, c;
    CUstream w; /* non-blocking: the legacy stream would wait for T's held per-thread stream */
    pthread_t t;
    if (cuStreamCreate(&w, CU_STREAM_NON_BLOCKING) || pthread_create(&t, NULL, pts_thread, ctx) ||
        pthread_join(t, NULL))
        exit(3);
    if (cuMemAllocAsync(&b, N, CU_STREAM_PER_THREAD) || cuMemAlloc(&c, N) ||
        cuMemsetD8Async(b, 0x55, N, CU_STREAM_PER_THREAD) || cuMemsetD8Async(c, 0x55, N, w) ||
        cuStreamSynchronize(CU_STREAM_PER_THREAD) || cuStreamSynchronize(w))
        exit(4);
    simcuda_gate_open(pts_gate);
    if (cuCtxSynchronize())
        exit(5);
    exit(all_bytes(b, 0x55) && all_bytes(c, 0x55) ? 0 : 10);
}

START_TEST(per_thread_stream_frees_outlive_the_thread)
{
    static const char *const modes[] = PT_ALL_MODES;
    for (int m = 0; m < 4; m++)
        for (int k = 0; k < 2; k++) {
            char err[4096];
            pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
            int rc = pt_run_child(pts_child, k ? "ptsz" : NULL, err, sizeof err);
            ck_assert_msg(rc == 0, "%s, %s: exit %d (10: the main thread's block read the exited "
                          "thread's kernel's bytes); %s", modes[m],
                          k ? "cuMemFreeAsync_ptsz(NULL)" : "CU_STREAM_PER_THREAD", rc, err);
        }
}
END_TEST

/* ---- threads freeing while others allocate, every mode and setting ----
 * Four threads, each with its own non-blocking streams K (kernels) and W (its writes): a kernel on
 * K writes its block for 2 ms, the thread frees the block (cuMemFree, or cuMemFreeAsync on K) and
 * at once allocates a new one (cuMemAlloc, or cuMemAllocAsync on W), which it fills with 0x55 on
 * W. The blocks any thread freed may reach any other thread's allocation. Every new block is kept
 * to the end and must read 0x55 once all the kernels have run: a block handed out while a kernel
 * still wrote it reads 0xAA. (The kernel's 2 ms keeps it queued while the others allocate; the
 * outcome with the fences in place does not depend on it.) */
#define XT_THREADS 4
#define XT_ROUNDS 4
static int xt_async;
static void *xt_thread(void *arg)
{
    CUdeviceptr *kept = arg;
    CUstream k, w;
    if (cuCtxSetCurrent((CUcontext)(uintptr_t)kept[XT_ROUNDS]) ||
        cuStreamCreate(&k, CU_STREAM_NON_BLOCKING) || cuStreamCreate(&w, CU_STREAM_NON_BLOCKING))
        exit(2);
    for (int r = 0; r < XT_ROUNDS; r++) {
        CUdeviceptr a;
        if (cuMemAlloc(&a, N) || simcuda_launch(k, a, 0xAA, N, 2000))
            exit(3);
        if (xt_async ? cuMemFreeAsync(a, k) || cuMemAllocAsync(&kept[r], N, w)
                     : cuMemFree(a) || cuMemAlloc(&kept[r], N))
            exit(4);
        if (cuMemsetD8Async(kept[r], 0x55, N, w) || cuStreamSynchronize(w))
            exit(5);
    }
    return NULL;
}

static void xt_child(void *arg)
{
    xt_async = arg != NULL;
    alarm(60);
    CUcontext ctx = pt_start();
    CUdeviceptr kept[XT_THREADS][XT_ROUNDS + 1];
    pthread_t t[XT_THREADS];
    for (int i = 0; i < XT_THREADS; i++) {
        kept[i][XT_ROUNDS] = (CUdeviceptr)(uintptr_t)ctx;
        if (pthread_create(&t[i], NULL, xt_thread, kept[i]))
            exit(6);
    }
    for (int i = 0; i < XT_THREADS; i++)
        pthread_join(t[i], NULL);
    if (cuCtxSynchronize())
        exit(7);
    for (int i = 0; i < XT_THREADS; i++)
        for (int r = 0; r < XT_ROUNDS; r++)
            if (!all_bytes(kept[i][r], 0x55))
                exit(10);
    exit(0);
}

START_TEST(threads_free_while_others_allocate)
{
    static const char *const modes[] = PT_ALL_MODES;
    for (int m = 0; m < 4; m++)
        for (int y = 0; y < 3; y++) /* none is unsafe by its definition */
            for (int k = 0; k < 2; k++) {
                char err[4096];
                pt_env(modes[m], all_syncs[y], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
                int rc = pt_run_child(xt_child, k ? "async" : NULL, err, sizeof err);
                ck_assert_msg(rc == 0, "%s %s, %s frees: exit %d (10: a block read a kernel's "
                              "bytes written after it was handed out); %s", modes[m], all_syncs[y],
                              k ? "stream-ordered" : "cuMemFree", rc, err);
            }
}
END_TEST

/* ---- statistics at exit: a stream-ordered free its stream passed is not pending ----
 * 2 MiB freed with cuMemFreeAsync behind a kernel, the program synchronises the stream and exits:
 * the device has passed the free, so the report's pending_bytes is 0 (pass-through memory is
 * treated so already, test async_free_pass_through_synced_not_reported_held). A 1 MiB cuMemFree
 * whose context was never synchronised stays pending: 1 MiB. */
static void passed_at_exit_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s;
    CUdeviceptr a, y;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&a, N) ||
        cuMemAllocAsync(&y, 2 * N, s) || simcuda_launch(s, y, 0xAA, 2 * N, 1000) ||
        cuMemFreeAsync(y, s) || cuMemFree(a) || cuStreamSynchronize(s))
        exit(2);
    exit(0);
}

START_TEST(async_free_passed_not_pending_at_exit)
{
    for (int m = 0; m < 3; m++) {
        char path[] = "/tmp/gpuarena-pexit-XXXXXX";
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        close(fd);
        char env[128], err[4096];
        snprintf(env, sizeof env, "GPUARENA_STATS=%s", path);
        pt_env(pool_modes[m], env, "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(passed_at_exit_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d; %s", pool_modes[m], rc, err);
        int bad = pt_json_check(path, "d['totals']['pending_bytes'] == 1048576");
        if (bad) {
            char cmd[512];
            snprintf(cmd, sizeof cmd, "grep -o '\"pending_bytes\": [^,}]*' %s >&2", path);
            (void)!system(cmd);
        }
        unlink(path);
        ck_assert_msg(bad == 0, "%s: pending_bytes at exit is not the cuMemFree's 1 MiB alone",
                      pool_modes[m]);
    }
}
END_TEST

/* ---- the program's synchronisation after the device's other context is gone ----
 * A second context B on the device, known to gpuarena (it allocated), then destroyed. A then runs
 * 100 x (cuMemFree, cuCtxSynchronize, cuMemAlloc): with no other context left, the program's own
 * synchronisation passes the free, and the allocation has nothing to wait for: the driver sees
 * the program's 100 cuCtxSynchronize and no more (with B alive the fence must also wait for B). */
static void dead_peer_child(void *arg)
{
    int alive = arg != NULL;
    CUcontext a = pt_start(), b;
    CUdevice dev;
    CUdeviceptr p, q;
    if (cuDeviceGet(&dev, 0) || cuMemAlloc(&p, N) || cuCtxCreate(&b, NULL, 0, dev) ||
        cuMemAlloc(&q, N) || cuMemFree(q) || (!alive && cuCtxDestroy(b)) || cuCtxSetCurrent(a))
        exit(2);
    unsigned long long c0 = simcuda_entry_calls("cuCtxSynchronize");
    for (int i = 0; i < 100; i++)
        if (cuMemFree(p) || cuCtxSynchronize() || cuMemAlloc(&p, N))
            exit(3);
    unsigned long long n = simcuda_entry_calls("cuCtxSynchronize") - c0;
    if (n != (alive ? 200u : 100u)) {
        fprintf(stderr, "%llu cuCtxSynchronize for the program's 100\n", n);
        exit(10);
    }
    exit(0);
}

START_TEST(program_sync_after_peer_destroyed)
{
    for (int m = 0; m < 3; m++) {
        char err[4096];
        pt_env(pool_modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(dead_peer_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (10: synchronisations beyond the program's); %s",
                      pool_modes[m], rc, err);
    }
}
END_TEST

/* The same with B alive: each allocation must wait for B (its kernels may use A's freed block:
 * test free_waits_for_other_contexts_on_the_device), but not for A again, which the program has
 * just synchronised: 200 cuCtxSynchronize in all (the program's 100, B's 100). */
START_TEST(program_sync_then_alloc_waits_for_the_others_alone)
{
    for (int m = 0; m < 3; m++) {
        char err[4096];
        pt_env(pool_modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(dead_peer_child, "alive", err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (10: not the program's and B's alone); %s",
                      pool_modes[m], rc, err);
    }
}
END_TEST

TCase *pt_tcase_stream_outside(void)
{
    TCase *tc = tcase_create("stream_outside");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, oom_waits_for_async_free_on_unseen_context);
    tcase_add_test(tc, async_free_chains_and_destroyed_streams);
    tcase_add_test(tc, program_syncs_count_only_returns);
    tcase_add_test(tc, device_refused_wait_not_retried_under_the_lock);
    tcase_add_test(tc, threads_free_while_others_allocate);
    tcase_add_test(tc, per_thread_stream_frees_outlive_the_thread);
    tcase_add_test(tc, async_free_passed_not_pending_at_exit);
    tcase_add_test(tc, program_sync_after_peer_destroyed);
    tcase_add_test(tc, program_sync_then_alloc_waits_for_the_others_alone);
    return tc;
}
