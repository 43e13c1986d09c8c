/* Preload tests: contexts that go away with allocations live (destroy, primary reset, last primary
 * release), several contexts, and fork. A dead context's arena must be released (the driver's
 * bytes go back to zero) and never serve a later allocation.
 */
#include "preload_test.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../shim/ga_nvml.h"

START_TEST(ctx_destroy_releases_arena)
{
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUdevice dev;
    CUcontext ctx;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&ctx, NULL, 0, dev), CUDA_SUCCESS);
    CUdeviceptr p[4];
    for (int i = 0; i < 4; i++) /* left live on purpose */
        ck_assert_int_eq(cuMemAlloc(&p[i], 1 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().alloc_calls, 1);
    ck_assert_int_eq(cuCtxDestroy(ctx), CUDA_SUCCESS);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.free_calls, 0); /* the driver freed the region with the context */
    /* A new context: a new arena from a new driver allocation, not the dead one's memory. */
    ck_assert_int_eq(cuCtxCreate(&ctx, NULL, 0, dev), CUDA_SUCCESS);
    CUdeviceptr q;
    ck_assert_int_eq(cuMemAlloc(&q, 1 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().alloc_calls, 2);
    CUcontext owner = NULL;
    ck_assert_int_eq(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, q), CUDA_SUCCESS);
    ck_assert_ptr_eq(owner, ctx);
    ck_assert_int_eq(cuCtxDestroy(ctx), CUDA_SUCCESS);
}
END_TEST

/* The v1 cuCtxDestroy (cuGetProcAddress below 4000) and cuCtxDetach take the context's pool with
 * it, in every mode: the driver holds nothing after, the cap is whole again, and the next context
 * can have all of it. Unhooked, the pool and its share of the cap stayed, cuMemGetInfo counted its
 * idle bytes as free, and a trim freed its old region inside another context (an outside test,
 * 2026-12-06). Loop: mode (arena, grow, vmm, platform) x call (v1 destroy, detach). */
START_TEST(ctx_destroy_v1_and_detach_drop_pool)
{
    static const char *const modes[] = PT_ALL_MODES;
    int detach = _i % 2;
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=64MiB", modes[_i / 2], NULL);
    CUdevice dev;
    CUcontext x, y;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CUresult (*gone)(CUcontext) = NULL;
    ck_assert_int_eq(cuGetProcAddress_v2(detach ? "cuCtxDetach" : "cuCtxDestroy", (void **)&gone,
                                         detach ? 2000 : 3000, 0, NULL),
                     CUDA_SUCCESS);
    ck_assert_ptr_nonnull(gone);
    ck_assert_int_eq(cuCtxCreate(&x, NULL, 0, dev), CUDA_SUCCESS);
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 8 * MiB), CUDA_SUCCESS); /* left live on purpose */
    ck_assert_int_eq(gone(x), CUDA_SUCCESS);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_uint_eq(c.dead_context_calls, 0); /* the gone handle never passed to the driver */
    ck_assert_int_eq(cuCtxCreate(&y, NULL, 0, dev), CUDA_SUCCESS);
    size_t fr = 0, total = 0;
    ck_assert_int_eq(cuMemGetInfo(&fr, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(total, 64 * MiB);
    ck_assert_uint_eq(fr, 64 * MiB);
    CUdeviceptr q;
    ck_assert_int_eq(cuMemAlloc(&q, 40 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(q), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(y), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().bytes_in_use, 0);
}
END_TEST

/* helper-48 F4: cuCtxDetach destroys a context at its last detach only, after as many detaches as
 * cuCtxAttach calls; the shim counts them and decides before the driver's call, where it asked the
 * driver about the handle after the call, the context gone (undefined behaviour on the real
 * driver: the handle is freed, or another context's). A context attached twice keeps its pool and
 * its share of the cap through two detaches, and the third takes them; no call ever names the
 * gone context (the simulated driver counts such calls). Loop: mode. */
START_TEST(ctx_detach_counts_attaches)
{
    static const char *const modes[] = PT_ALL_MODES;
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=64MiB", modes[_i], NULL);
    CUdevice dev;
    CUcontext x, y, att;
    CUresult (*attach)(CUcontext *, unsigned) = NULL;
    CUresult (*detach)(CUcontext) = NULL;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuGetProcAddress_v2("cuCtxAttach", (void **)&attach, 2000, 0, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuGetProcAddress_v2("cuCtxDetach", (void **)&detach, 2000, 0, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&x, NULL, 0, dev), CUDA_SUCCESS);
    CUdeviceptr p, q;
    ck_assert_int_eq(cuMemAlloc(&p, 8 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(p, 0x5a, 8 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(attach(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(attach(&att, 0), CUDA_SUCCESS);
    ck_assert_ptr_eq(att, x);
    ck_assert_int_eq(attach(&att, 0), CUDA_SUCCESS);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(detach(x), CUDA_SUCCESS);
        unsigned char h = 0;
        ck_assert_int_eq(cuMemcpyDtoH(&h, p + 4 * MiB, 1), CUDA_SUCCESS);
        ck_assert_uint_eq(h, 0x5a); /* still the context's, and its block */
        ck_assert_int_eq(cuMemAlloc(&q, 60 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* 8 MiB still held */
    }
    ck_assert_int_eq(detach(x), CUDA_SUCCESS); /* the last */
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_uint_eq(c.ctx_destroys, 1);
    ck_assert_uint_eq(c.dead_context_calls, 0);
    ck_assert_int_eq(cuCtxCreate(&y, NULL, 0, dev), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&q, 60 * MiB), CUDA_SUCCESS); /* the whole cap again */
    ck_assert_int_eq(cuMemFree(q), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(y), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().dead_context_calls, 0);
}
END_TEST

/* Stream-ordered pass-through memory outlives its context in the driver, so it stays under the
 * cap however the context goes (outside test, 2026-12-06). The orderings are made with gates and
 * the simulated driver's call counts, never with timing. */
static CUcontext race_ctx;
static unsigned race_gate;
static _Atomic int race_done;

static void *race_destroy(void *arg)
{
    (void)arg;
    cuCtxDestroy(race_ctx);
    return NULL;
}

static CUdeviceptr race_p;
static CUstream race_stream;

static void *race_alloc(void *arg)
{
    (void)arg;
    if (cuCtxSetCurrent(race_ctx) ||
        cuMemAllocFromPoolAsync(&race_p, 40 * MiB, NULL, race_stream) != CUDA_SUCCESS)
        race_p = 0;
    return NULL;
}

/* F1: a cuMemAllocFromPoolAsync the driver serves while another thread's destroy of the context
 * waits for its queued work: the driver keeps the block past the destroy, so it stays counted
 * (60 MiB more are refused under the 64 MiB cap), and its later free gives the bytes back. The
 * allocation is held inside the driver until the destroy holds the context's state. */
static void alloc_during_destroy_child(void *arg)
{
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=64MiB", (const char *)arg, NULL);
    CUdevice dev;
    CUstream held;
    CUdeviceptr q;
    unsigned alloc_gate;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&race_ctx, NULL, 0, dev) ||
        cuStreamCreate(&held, CU_STREAM_NON_BLOCKING) ||
        cuStreamCreate(&race_stream, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&q, 1 * MiB) ||
        cuMemFree(q) || simcuda_gate(held, &race_gate) || simcuda_hold_next_async_alloc(&alloc_gate))
        exit(2); /* (the allocation gives the context its state in the shim) */
    unsigned long long before = pt_counters().bytes_in_use;
    pthread_t t, d;
    pthread_create(&t, NULL, race_alloc, NULL);
    while (pt_counters().bytes_in_use < before + 40 * MiB)
        sched_yield(); /* served, and held in the driver */
    unsigned long long syncs = simcuda_entry_calls("cuCtxSynchronize");
    pthread_create(&d, NULL, race_destroy, NULL);
    while (simcuda_entry_calls("cuCtxSynchronize") == syncs)
        sched_yield(); /* the destroy holds the context's state, waiting for the gated stream */
    simcuda_gate_open(alloc_gate);
    simcuda_gate_open(race_gate);
    pthread_join(t, NULL);
    pthread_join(d, NULL);
    if (!race_p)
        exit(3);
    CUcontext y;
    if (cuCtxCreate(&y, NULL, 0, dev))
        exit(4);
    if (cuMemAllocManaged(&q, 60 * MiB, CU_MEM_ATTACH_GLOBAL) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(5); /* the 40 MiB had left the cap: the driver then held 100 MiB */
    if (pt_counters().peak_bytes_in_use > 64 * MiB)
        exit(6);
    if (cuMemFree(race_p) != CUDA_SUCCESS || pt_counters().bytes_in_use != 0)
        exit(7);
    if (cuMemAllocManaged(&q, 60 * MiB, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS)
        exit(8);
    exit(0);
}

static void *race_open_when_waited(void *arg)
{
    unsigned long long waits = (unsigned long long)(uintptr_t)arg;
    while (!atomic_load(&race_done) && simcuda_entry_calls("cuEventSynchronize") == waits)
        sched_yield();
    simcuda_gate_open(race_gate);
    return NULL;
}

/* F2: context A's pass-through block freed on context B's stream, which is held: A's destroy
 * waits for that free before the bytes leave the cap (it gave them back at once, and 60 MiB more
 * fitted under the 64 MiB cap while the driver still held the 40). */
static void destroy_with_free_on_other_stream_child(void *arg)
{
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=64MiB", (const char *)arg, NULL);
    CUdevice dev;
    CUcontext a, b;
    CUstream sb;
    CUdeviceptr p, q;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&b, NULL, 0, dev) ||
        cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || simcuda_gate(sb, &race_gate) ||
        cuCtxCreate(&a, NULL, 0, dev) || cuMemAllocFromPoolAsync(&p, 40 * MiB, NULL, NULL) ||
        cuMemFreeAsync(p, sb))
        exit(2);
    pthread_t g;
    pthread_create(&g, NULL, race_open_when_waited,
                   (void *)(uintptr_t)simcuda_entry_calls("cuEventSynchronize"));
    if (cuCtxDestroy(a) != CUDA_SUCCESS)
        exit(3);
    int early = pt_counters().bytes_in_use != 0; /* the destroy returned with the free queued */
    if (cuCtxSetCurrent(b))
        exit(6);
    cuMemAllocManaged(&q, 60 * MiB, CU_MEM_ATTACH_GLOBAL); /* fits only once the free has run */
    atomic_store(&race_done, 1);
    pthread_join(g, NULL);
    if (pt_counters().peak_bytes_in_use > 64 * MiB)
        exit(4);
    exit(early ? 5 : 0);
}

START_TEST(stream_ordered_pass_memory_outlives_destroy)
{
    static char *const modes[] = {"GPUARENA_MODE=grow", "GPUARENA_MODE=platform"};
    for (int m = 0; m < 2; m++) {
        char err[4096];
        int rc = pt_run_child(alloc_during_destroy_child, modes[m], err, sizeof err);
        ck_assert_msg(rc == 0, "%s, served during a destroy: exit %d; %s", modes[m], rc, err);
        rc = pt_run_child(destroy_with_free_on_other_stream_child, modes[m], err, sizeof err);
        ck_assert_msg(rc == 0, "%s, freed on another context's stream: exit %d; %s", modes[m], rc,
                      err);
    }
}
END_TEST

START_TEST(primary_reset_releases_arena)
{
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_MODE=arena", NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 1 * MiB), CUDA_SUCCESS);
    ck_assert_uint_gt(pt_counters().bytes_in_use, 0);
    ck_assert_int_eq(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.free_calls, 0); /* the driver freed the region with the context */
    CUcontext ctx = pt_start();
    CUdeviceptr q;
    ck_assert_int_eq(cuMemAlloc(&q, 1 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().alloc_calls, 2);
    CUcontext owner = NULL;
    ck_assert_int_eq(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, q), CUDA_SUCCESS);
    ck_assert_ptr_eq(owner, ctx);
}
END_TEST

START_TEST(primary_last_release_drops_arena)
{
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_MODE=platform", NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 1 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS); /* last reference */
    ck_assert_uint_eq(pt_counters().bytes_in_use, 0);
    pt_start();
    CUdeviceptr q;
    size_t free = 0, total = 0;
    ck_assert_int_eq(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    ck_assert_uint_eq(free, total); /* the dead context's bytes no longer count */
    ck_assert_int_eq(cuMemAlloc(&q, 1 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(q), CUDA_SUCCESS);
}
END_TEST

START_TEST(arena_last_release_then_reuse)
{
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_MODE=arena", NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 1 * MiB), CUDA_SUCCESS);
    unsigned long long allocs = pt_counters().alloc_calls;
    ck_assert_int_eq(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().bytes_in_use, 0);
    pt_start();
    CUdeviceptr q;
    ck_assert_int_eq(cuMemAlloc(&q, 1 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().alloc_calls, allocs + 1); /* a fresh arena */
    ck_assert_int_eq(cuMemFree(q), CUDA_SUCCESS);
}
END_TEST

START_TEST(two_contexts_two_arenas)
{
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", "SIMCUDA_DEVICES=2", "GPUARENA_LIMIT=128MiB", NULL);
    CUdevice d0, d1;
    CUcontext c0, c1;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGet(&d0, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuDeviceGet(&d1, 1), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&c0, NULL, 0, d0), CUDA_SUCCESS);
    CUdeviceptr a, b;
    ck_assert_int_eq(cuMemAlloc(&a, 1 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&c1, NULL, 0, d1), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&b, 1 * MiB), CUDA_SUCCESS);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(0), 96 * MiB);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(1), 96 * MiB);
    /* A free from the other context's thread still finds the right arena. */
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(c1), CUDA_SUCCESS);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(1), 0);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(0), 96 * MiB);
    ck_assert_int_eq(cuCtxDestroy(c0), CUDA_SUCCESS);
}
END_TEST

START_TEST(fork_child_allocates)
{
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 1 * MiB), CUDA_SUCCESS);
    pid_t pid = fork();
    if (pid == 0) {
        /* Fresh state in the child: the parent's arena is not reused. */
        CUdeviceptr q;
        int ok = cuMemAlloc(&q, 1 * MiB) == CUDA_SUCCESS && cuMemFree(q) == CUDA_SUCCESS;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child allocates after fork");
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
}
END_TEST

START_TEST(first_call_from_constructor)
{
    /* The process's first CUDA calls come from a library constructor, under the loader's lock. */
    pt_env("GPUARENA_PREALLOCATE=false", NULL);
    void *h = dlopen("libgactor.so", RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "dlopen libgactor.so: %s", dlerror());
    int *result = dlsym(h, "ctor_result");
    ck_assert_ptr_nonnull(result);
    ck_assert_int_eq(*result, 0);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.alloc_calls, 1); /* served by the shim's arena */
    ck_assert_uint_eq(c.free_calls, 0);
}
END_TEST

/* A teardown the driver refuses leaves the context and its memory as they were, so the shim keeps
 * its pool: the live allocation still reads back, a new one does not land on it, its free
 * succeeds, and no driver memory was given back. In every mode. Loop: 0, cuCtxDestroy of a
 * primary context (the driver refuses: those go through cuDevicePrimaryCtxRelease/Reset); 1, a
 * created context's cuCtxDestroy and 2, cuDevicePrimaryCtxReset, refused by injection
 * (helper-46 F3: the pool was dropped before the driver's call, and the next allocation got the
 * live block's address); after those, the call is made again and goes through. */
START_TEST(ctx_destroy_refused_keeps_pool)
{
    static const char *const modes[] = PT_ALL_MODES;
    static const char *const entry[] = {NULL, "cuCtxDestroy_v2", "cuDevicePrimaryCtxReset_v2"};
    for (int m = 0; m < 4; m++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            pt_env(modes[m], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
            CUcontext ctx = pt_start();
            CUdevice dev;
            if (_i == 1 && (cuDeviceGet(&dev, 0) || cuCtxCreate(&ctx, NULL, 0, dev)))
                _exit(8);
            CUdeviceptr p, q;
            unsigned char h[64];
            memset(h, 0x5a, sizeof h);
            if (cuMemAlloc(&p, MiB) || cuMemcpyHtoD(p, h, sizeof h))
                _exit(2);
            simcuda_counters_t before = pt_counters();
            char rule[64];
            if (entry[_i]) {
                snprintf(rule, sizeof rule, "%s:%llu", entry[_i], simcuda_entry_calls(entry[_i]) + 1);
                if (simcuda_fail_add(rule))
                    _exit(9);
            }
            CUresult r = _i == 2 ? cuDevicePrimaryCtxReset(0) : cuCtxDestroy(ctx);
            if (r != (_i ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_CONTEXT))
                _exit(3);
            if (pt_counters().bytes_in_use != before.bytes_in_use)
                _exit(4); /* the shim gave back memory the context still has */
            memset(h, 0, sizeof h);
            if (cuMemcpyDtoH(h, p, sizeof h) || h[0] != 0x5a || h[63] != 0x5a)
                _exit(5);
            if (cuMemAlloc(&q, MiB) || (q < p + MiB && p < q + MiB))
                _exit(6); /* a new allocation on the live one */
            if (cuMemsetD8(q, 0x11, MiB) || cuMemcpyDtoH(h, p, sizeof h) || h[0] != 0x5a)
                _exit(10);
            if (cuMemFree(p) || cuMemFree(q))
                _exit(7);
            if (_i && ((_i == 2 ? cuDevicePrimaryCtxReset(0) : cuCtxDestroy(ctx)) ||
                       pt_counters().vmm_bytes_in_use != 0 ||
                       pt_counters().bytes_in_use != 0))
                _exit(11); /* the teardown that goes through takes the pool */
            _exit(0);
        }
        int st = 0;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s, case %d: child status %#x",
                      modes[m], _i, st);
    }
}
END_TEST

/* helper-46 F1: while the driver's teardown of a context (cuCtxDestroy, cuDevicePrimaryCtxReset)
 * is under way, the context's memory is still the device's: another context's allocation that
 * needs it is refused under the cap until the call has returned, then it fits. The managed block
 * left the cap before the driver's call, and 48 + 48 MiB were held under a 64 MiB cap. The
 * teardown is held inside the driver (simcuda_hold_next_ctx_teardown); the other context
 * allocates once the driver's entry count shows it is there. Loop: mode x {destroy, reset} x
 * {managed, cuMemAlloc}. */
static CUcontext held_ctx;

static void *held_teardown(void *arg)
{
    CUresult r = arg ? cuDevicePrimaryCtxReset(0) : cuCtxDestroy(held_ctx);
    return (void *)(uintptr_t)r;
}

static void teardown_held_child(void *arg)
{
    static const char *const modes[] = PT_ALL_MODES;
    int v = (int)(uintptr_t)arg, reset = v & 1, managed = (v >> 1) & 1;
    pt_env("SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=64MiB", modes[v >> 2], NULL);
    CUdevice dev;
    CUcontext b;
    CUdeviceptr p, q;
    unsigned gate;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&b, NULL, 0, dev))
        exit(2);
    if (reset ? cuDevicePrimaryCtxRetain(&held_ctx, dev) || cuCtxSetCurrent(held_ctx)
              : cuCtxCreate(&held_ctx, NULL, 0, dev))
        exit(2);
    if (managed ? cuMemAllocManaged(&p, 48 * MiB, CU_MEM_ATTACH_GLOBAL) : cuMemAlloc(&p, 48 * MiB))
        exit(2);
    const char *entry = reset ? "cuDevicePrimaryCtxReset_v2" : "cuCtxDestroy_v2";
    unsigned long long n = simcuda_entry_calls(entry);
    pthread_t t;
    if (simcuda_hold_next_ctx_teardown(&gate) ||
        pthread_create(&t, NULL, held_teardown, (void *)(uintptr_t)reset))
        exit(2);
    while (simcuda_entry_calls(entry) == n)
        sched_yield(); /* inside the driver, held: the 48 MiB are still the device's */
    CUresult r = cuCtxSetCurrent(b) ? CUDA_ERROR_UNKNOWN : cuMemAlloc(&q, 48 * MiB);
    simcuda_gate_open(gate);
    void *td;
    pthread_join(t, &td);
    if ((CUresult)(uintptr_t)td != CUDA_SUCCESS)
        exit(3);
    if (pt_counters().peak_bytes_in_use > 64 * MiB)
        exit(4); /* the driver held more than the cap */
    if (r != CUDA_ERROR_OUT_OF_MEMORY)
        exit(5);
    if (cuMemAlloc(&q, 48 * MiB) || cuMemFree(q))
        exit(6); /* once the call returned, the bytes are free again */
    exit(0);
}

START_TEST(teardown_under_way_keeps_memory_counted)
{
    char err[4096];
    int rc = pt_run_child(teardown_held_child, (void *)(uintptr_t)_i, err, sizeof err);
    ck_assert_msg(rc == 0, "mode %d, %s, %s: exit %d; %s", _i >> 2, _i & 1 ? "reset" : "destroy",
                  _i & 2 ? "managed" : "cuMemAlloc", rc, err);
}
END_TEST

/* Stream-ordered memory the driver serves (cuMemAllocAsync in platform mode, cuMemAllocFromPoolAsync
 * in every mode) outlives the context it was allocated in (the driver frees it only when freed):
 * after cuCtxDestroy it still counts under the cap, and its free from another context gives the
 * bytes back. 48 + 8 MiB under a 64 MiB cap: 16 MiB more is refused until they are freed. */
static void destroy_async_child(void *arg)
{
    putenv((char *)arg);
    CUcontext prim = pt_start(), other;
    CUdevice dev;
    CUdeviceptr a, b, q;
    size_t fr, tot;
    if (cuDeviceGet(&dev, 0) || cuCtxCreate(&other, NULL, 0, dev) ||
        cuMemAllocFromPoolAsync(&a, 48 * MiB, NULL, NULL) || cuMemAllocFromPoolAsync(&b, 8 * MiB, NULL, NULL) ||
        cuCtxSynchronize() || cuCtxDestroy(other) || cuCtxSetCurrent(prim))
        exit(2);
    if (pt_counters().bytes_in_use < 56 * MiB)
        exit(3); /* the driver dropped them: the simulated driver is not the real one's model */
    if (cuMemAlloc(&q, 16 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(4); /* counted no more: the cap escaped */
    if (cuMemGetInfo(&fr, &tot) || fr > 8 * MiB)
        exit(5);
    if (cuMemFreeAsync(a, NULL) || cuMemFree(b) || cuCtxSynchronize())
        exit(6);
    if (cuMemAlloc(&q, 16 * MiB) || cuMemFree(q))
        exit(7);
    if (pt_counters().peak_bytes_in_use > 64 * MiB)
        exit(8);
    if (cuMemFreeAsync(a, NULL) == CUDA_SUCCESS)
        exit(9); /* freed twice */
    exit(0);
}

START_TEST(ctx_destroy_keeps_async_memory_counted)
{
    static char *const modes[] = {"GPUARENA_MODE=platform", "GPUARENA_MODE=grow"};
    for (int m = 0; m < 2; m++) {
        char err[4096];
        pt_env("GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(destroy_async_child, modes[m], err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (4: the memory left the cap with its context); %s",
                      modes[m], rc, err);
    }
}
END_TEST

TCase *pt_tcase_teardown(void)
{
    TCase *tc = tcase_create("teardown");
    tcase_add_test(tc, ctx_destroy_releases_arena);
    tcase_add_test(tc, primary_reset_releases_arena);
    tcase_add_test(tc, primary_last_release_drops_arena);
    tcase_add_test(tc, arena_last_release_then_reuse);
    tcase_add_test(tc, two_contexts_two_arenas);
    tcase_add_test(tc, fork_child_allocates);
    tcase_add_test(tc, first_call_from_constructor);
    tcase_add_loop_test(tc, ctx_destroy_refused_keeps_pool, 0, 3);
    tcase_add_loop_test(tc, teardown_under_way_keeps_memory_counted, 0, 16);
    tcase_add_test(tc, ctx_destroy_keeps_async_memory_counted);
    tcase_add_loop_test(tc, ctx_destroy_v1_and_detach_drop_pool, 0, 8);
    tcase_add_loop_test(tc, ctx_detach_counts_attaches, 0, 4);
    tcase_add_test(tc, stream_ordered_pass_memory_outlives_destroy);
    tcase_set_timeout(tc, 120); /* that race, 1,500 turns: about 40 s a mode under TSan */
    pt_teardown_edges_add(tc); /* t_teardown_edges.c */
    return tc;
}
