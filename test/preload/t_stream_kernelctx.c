/* Preload tests: a context used only to launch kernels (issue 13's known hole, README "Freed memory
 * and streams"). Context B is made current by the program (cuCtxCreate in each of its forms and
 * interposition paths, or a primary context pushed or set current) and never allocates, frees or
 * asks for memory; a kernel on B's stream, held by a gate, writes context A's block; A frees the
 * block with cuMemFree and allocates again. The driver's own cuMemFree waits for the whole device,
 * so the next allocation must not receive the block before B's kernel has passed: the gate opens
 * only once the driver has been asked to synchronise twice (A, then B), a count and not a time.
 * Before gpuarena learnt contexts where they are made or pushed, it never synchronised B, the
 * allocation returned the block, and the kernel overwrote it once the gate opened (an outside
 * check, 2026-12-06: 37 of 45 blocks intact). Also: such a context costs a program nothing where
 * it is alone on its device (the driver's cuCtxSynchronize count is the same with it as without
 * it), and once destroyed it is never synchronised again, nor taken for a later context that gets
 * its handle. And a free passes a context inside its teardown by (its lock is held through the
 * driver's call). Each scenario runs in a child (pt_run_child) and answers with its exit status.
 */
#include "t_stream.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 40 MiB of a 64 MiB cap (a share of 48 MiB): the allocation after the free needs the freed
 * block's room in every mode, so GPUARENA_FREE_SYNC=lazy synchronises for it as well. */
#define KBLOCK (40 * MiB)

static const char *const kc_modes[] = PT_POOL_MODES;
static const char *const kc_syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy",
                                       "GPUARENA_FREE_SYNC=device"};

/* How the kernel's context B is made current. The first five create it (A is the primary
 * context); the rest take device 0's primary context as B (A is then created). */
enum {
    KC_CREATE,         /* cuCtxCreate as cuda.h names it (cuCtxCreate_v4), direct binding */
    KC_CREATE_V2_DLSYM, /* cuCtxCreate_v2 through dlopen + dlsym */
    KC_CREATE_V1_PROC, /* cuCtxCreate through cuGetProcAddress at 2000: the v1 entry point */
    KC_CREATE_V3_PROC, /* at 11040: cuCtxCreate_v3 */
    KC_CREATE_V4_PROC, /* at 12050: cuCtxCreate_v4 */
    KC_PUSH,           /* the primary context retained and pushed (cuCtxPushCurrent_v2) */
    KC_PUSH_V1_PROC,   /* pushed through cuGetProcAddress at 3000: the v1 cuCtxPushCurrent */
    KC_SET,            /* retained and set current (cuCtxSetCurrent) */
    KC_REUSED,         /* retained, pushed, popped, released to its end, retained again (the same
                          handle, a new context) and pushed */
    KC_WAYS
};
static const char *const kc_way_names[KC_WAYS] = {
    "cuCtxCreate", "cuCtxCreate_v2 (dlsym)", "cuCtxCreate v1 (cuGetProcAddress 2000)",
    "cuCtxCreate_v3 (cuGetProcAddress 11040)", "cuCtxCreate_v4 (cuGetProcAddress 12050)",
    "primary, cuCtxPushCurrent", "primary, cuCtxPushCurrent v1 (cuGetProcAddress 3000)",
    "primary, cuCtxSetCurrent", "primary released and retained again (same handle), pushed"};

typedef CUresult (*create_fn)(CUcontext *, unsigned int, CUdevice);
typedef CUresult (*create_v3_fn)(CUcontext *, CUexecAffinityParam *, int, unsigned int, CUdevice);
typedef CUresult (*create_v4_fn)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice);
typedef CUresult (*push_fn)(CUcontext);

static void *kc_proc(const char *sym, int version)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    return cuGetProcAddress(sym, &fn, version, 0, &q) == CUDA_SUCCESS ? fn : NULL;
}

/* Makes context B current the given way; 0 on success. */
static int kc_make_current(int way, CUdevice dev, CUcontext *b)
{
    void *fn;
    switch (way) {
    case KC_CREATE:
        return cuCtxCreate(b, NULL, 0, dev) != CUDA_SUCCESS;
    case KC_CREATE_V2_DLSYM: {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        fn = h ? dlsym(h, "cuCtxCreate_v2") : NULL;
        return !fn || ((create_fn)fn)(b, 0, dev) != CUDA_SUCCESS;
    }
    case KC_CREATE_V1_PROC:
        fn = kc_proc("cuCtxCreate", 2000);
        return !fn || ((create_fn)fn)(b, 0, dev) != CUDA_SUCCESS;
    case KC_CREATE_V3_PROC:
        fn = kc_proc("cuCtxCreate", 11040);
        return !fn || ((create_v3_fn)fn)(b, NULL, 0, 0, dev) != CUDA_SUCCESS;
    case KC_CREATE_V4_PROC:
        fn = kc_proc("cuCtxCreate", 12050);
        return !fn || ((create_v4_fn)fn)(b, NULL, 0, dev) != CUDA_SUCCESS;
    case KC_PUSH:
        return cuDevicePrimaryCtxRetain(b, dev) != CUDA_SUCCESS || cuCtxPushCurrent(*b) != CUDA_SUCCESS;
    case KC_PUSH_V1_PROC:
        fn = kc_proc("cuCtxPushCurrent", 3000);
        return !fn || cuDevicePrimaryCtxRetain(b, dev) != CUDA_SUCCESS ||
               ((push_fn)fn)(*b) != CUDA_SUCCESS;
    case KC_SET:
        return cuDevicePrimaryCtxRetain(b, dev) != CUDA_SUCCESS || cuCtxSetCurrent(*b) != CUDA_SUCCESS;
    case KC_REUSED: {
        CUcontext first, out;
        unsigned flags;
        int active = 1;
        if (cuDevicePrimaryCtxRetain(&first, dev) || cuCtxPushCurrent(first) ||
            cuCtxPopCurrent(&out) || cuDevicePrimaryCtxRelease(dev) ||
            cuDevicePrimaryCtxGetState(dev, &flags, &active) || active)
            return 1; /* the first one is gone */
        return cuDevicePrimaryCtxRetain(b, dev) != CUDA_SUCCESS || *b != first ||
               cuCtxPushCurrent(*b) != CUDA_SUCCESS;
    }
    }
    return 1;
}

/* Opens a gate once the driver has seen `calls` cuCtxSynchronize calls in all (the thread that
 * must wait is inside the driver's synchronisation of B by then), or when told to stop. */
typedef struct kc_opener {
    unsigned gate;
    unsigned long long calls;
    _Atomic int stop;
} kc_opener_t;

static void *kc_open_at_sync(void *arg)
{
    kc_opener_t *o = arg;
    while (!atomic_load(&o->stop) && simcuda_entry_calls("cuCtxSynchronize") < o->calls)
        sched_yield();
    simcuda_gate_open(o->gate);
    return NULL;
}

/* A's block p; B made current (arg: the way, plus KC_PROGRAM_SYNC), a gated kernel on B's stream
 * writes p; A frees p (and with KC_PROGRAM_SYNC synchronises A itself, which waits for A alone)
 * and allocates KBLOCK again, which must wait for B's kernel. Exit 10: the new block read B's
 * kernel's bytes. */
#define KC_PROGRAM_SYNC 0x100
static void kernel_ctx_child(void *arg)
{
    int way = (int)(intptr_t)arg & 0xff, program_sync = (int)(intptr_t)arg & KC_PROGRAM_SYNC;
    alarm(60);
    CUdevice dev;
    CUcontext a, b;
    CUstream sb;
    CUdeviceptr p, q;
    kc_opener_t o = {.stop = 0};
    pthread_t t;
    if (way < KC_PUSH) {
        a = pt_start();
        if (cuDeviceGet(&dev, 0))
            exit(2);
    } else if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&a, NULL, 0, dev)) {
        exit(2);
    }
    if (cuMemAlloc(&p, KBLOCK) || kc_make_current(way, dev, &b))
        exit(2);
    if (cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || simcuda_gate(sb, &o.gate) ||
        simcuda_launch(sb, p, 0xAA, KBLOCK, 0) || cuCtxSetCurrent(a))
        exit(3);
    /* Two synchronisations: A's and B's (under device, at the free; else at the allocation; or
     * the program's own of A, then B's at the allocation). */
    o.calls = simcuda_entry_calls("cuCtxSynchronize") + 2;
    if (pthread_create(&t, NULL, kc_open_at_sync, &o))
        exit(3);
    if (cuMemFree(p) || (program_sync && cuCtxSynchronize()) || cuMemAlloc(&q, KBLOCK) ||
        cuMemsetD8(q, 0x55, KBLOCK))
        exit(4);
    atomic_store(&o.stop, 1);
    pthread_join(t, NULL);
    if (cuCtxSetCurrent(b) || cuStreamSynchronize(sb) || cuCtxSetCurrent(a))
        exit(5);
    exit(all_bytes(q, 0x55) && all_bytes(q + KBLOCK - N, 0x55) ? 0 : 10);
}

START_TEST(kernel_only_context_waited_for)
{
    for (int w = 0; w < KC_WAYS; w++)
        for (int m = 0; m < 3; m++)
            for (int y = 0; y < 3; y++)
                for (int ps = 0; ps <= KC_PROGRAM_SYNC; ps += KC_PROGRAM_SYNC) {
                    char err[4096];
                    pt_env(kc_modes[m], kc_syncs[y], "GPUARENA_LIMIT=64MiB",
                           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
                    int rc = pt_run_child(kernel_ctx_child, (void *)(intptr_t)(w | ps), err, sizeof err);
                    ck_assert_msg(rc == 0, "%s %s, kernel context made by %s%s: exit %d (10: the "
                                  "new block read the kernel-only context's kernel's bytes); %s",
                                  kc_modes[m], kc_syncs[y], kc_way_names[w],
                                  ps ? ", the program synchronising A between free and allocation"
                                     : "", rc, err);
                }
}
END_TEST

/* ---- what such a context costs, and its end ----
 * A (device 0's primary context) makes 100 rounds of cuMemFree, cuCtxSynchronize and cuMemAlloc.
 * arg bit 0: context B exists beside it, made with cuCtxCreate and used only for a kernel (waited
 *            for with cuStreamSynchronize), pushed and popped in every round;
 *     bit 1: B is on device 1, alone there (one context per device), and lives through the rounds;
 *            else B is on device 0 and destroyed before them;
 *     bit 2: before the rounds, B's handle is made a new context's: device 0's primary context is
 *            B here (retained, pushed, kernel, popped, released to its end), and A is created.
 * B's kernel writes managed memory of A's (vmm granules are not open to device 1).
 * The child exits with the driver's cuCtxSynchronize calls of the rounds and B's destroy (or
 * 255 past it), or 250+ on a failed call; the parent compares with and without B. No call may
 * name a destroyed context (dead_context_calls). */
static void cost_child(void *arg)
{
    int how = (int)(intptr_t)arg;
    alarm(60);
    CUdevice d0, d1;
    CUcontext a, b = NULL, out;
    CUstream sb;
    CUdeviceptr p, k;
    if (cuInit(0) || cuDeviceGet(&d0, 0) || cuDeviceGet(&d1, 1))
        exit(250);
    if (how & 4) {
        if (cuCtxCreate(&a, NULL, 0, d0) || cuMemAllocManaged(&k, 4096, CU_MEM_ATTACH_GLOBAL))
            exit(250);
        if (how & 1) {
            if (cuDevicePrimaryCtxRetain(&b, d0) || cuCtxPushCurrent(b) ||
                cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || simcuda_launch(sb, k, 1, 4096, 0) ||
                cuStreamSynchronize(sb) || cuCtxPopCurrent(&out) || cuDevicePrimaryCtxRelease(d0))
                exit(251);
            b = NULL; /* gone; a later retain would give its handle to a new context */
        }
    } else {
        a = pt_start();
        if (cuMemAllocManaged(&k, 4096, CU_MEM_ATTACH_GLOBAL))
            exit(250);
        if (how & 1) {
            if (cuCtxCreate(&b, NULL, 0, (how & 2) ? d1 : d0) ||
                cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || simcuda_launch(sb, k, 1, 4096, 0) ||
                cuStreamSynchronize(sb) || cuCtxPopCurrent(&out))
                exit(251);
            if (!(how & 2) && cuCtxDestroy(b))
                exit(251);
            if (!(how & 2))
                b = NULL;
        }
    }
    if (cuMemAlloc(&p, N))
        exit(252);
    unsigned long long before = simcuda_entry_calls("cuCtxSynchronize");
    for (int i = 0; i < 100; i++) {
        if (b && (cuCtxPushCurrent(b) || cuCtxPopCurrent(&out)))
            exit(253);
        if (cuMemFree(p) || cuCtxSynchronize() || cuMemAlloc(&p, N))
            exit(253);
    }
    if (b && cuCtxDestroy(b))
        exit(254);
    unsigned long long n = simcuda_entry_calls("cuCtxSynchronize") - before;
    if (pt_counters().dead_context_calls)
        exit(249);
    exit(n < 249 ? (int)n : 255);
}

START_TEST(kernel_only_context_costs_nothing_and_ends)
{
    static const char *const what[] = {"", "a kernel-only context on device 0, destroyed before",
                                       "", "a kernel-only context alone on device 1", "",
                                       "the primary context met and released to its end"};
    static const char *const syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy",
                                        "GPUARENA_FREE_SYNC=device"};
    for (int m = 0; m < 3; m++)
        for (int y = 0; y < 3; y++)
            for (int base = 0; base <= 4; base += 2) {
                char err[4096];
                int rc[2];
                for (int with = 0; with < 2; with++) {
                    pt_env(kc_modes[m], syncs[y], "SIMCUDA_DEVICES=2", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
                    rc[with] = pt_run_child(cost_child, (void *)(intptr_t)(base | with), err, sizeof err);
                    ck_assert_msg(rc[with] < 249, "%s %s, %s: exit %d (249: a call named a "
                                  "destroyed context; 250-255: a call failed); %s", kc_modes[m],
                                  syncs[y], with ? what[base | 1] : "alone", rc[with], err);
                }
                ck_assert_msg(rc[1] == rc[0], "%s %s: 100 rounds of cuMemFree, cuCtxSynchronize, "
                              "cuMemAlloc made %d cuCtxSynchronize with %s, %d without", kc_modes[m],
                              syncs[y], rc[1], what[base | 1], rc[0]);
            }
}
END_TEST

/* ---- a free passes a context inside its teardown by ----
 * P (the primary context) holds block a; X, made after it, allocates; Y, made last, only is. A
 * thread destroys X, held inside the driver's call (simcuda_hold_next_ctx_teardown), which holds
 * X's lock through it; a third thread with Y current frees a. The free must not wait for X's
 * teardown: the gate opens only after it returned (the alarm ends the child otherwise). The free
 * asked the contexts in the list's order, newest first, and waited for X's lock: Y had no state
 * and the thread no cached context, so X came first; with contexts met where they are made, Y has
 * one and is cached, and X comes next (an outside check of this session). */
static CUcontext fc_x, fc_y;
static CUdeviceptr fc_a;
static CUresult fc_destroy_r = CUDA_ERROR_UNKNOWN, fc_free_r = CUDA_ERROR_UNKNOWN;

static void *fc_destroy(void *arg)
{
    (void)arg;
    fc_destroy_r = cuCtxDestroy(fc_x);
    return NULL;
}

static void *fc_free(void *arg)
{
    (void)arg;
    fc_free_r = cuCtxSetCurrent(fc_y);
    if (fc_free_r == CUDA_SUCCESS)
        fc_free_r = cuMemFree(fc_a);
    return NULL;
}

static void closing_free_child(void *arg)
{
    (void)arg;
    alarm(20);
    CUcontext p = pt_start();
    CUdevice dev;
    CUdeviceptr xb;
    unsigned gate;
    pthread_t td, tf;
    if (cuDeviceGet(&dev, 0) || cuMemAlloc(&fc_a, N) || cuCtxCreate(&fc_x, NULL, 0, dev) ||
        cuMemAlloc(&xb, N) || cuCtxCreate(&fc_y, NULL, 0, dev) || cuCtxSetCurrent(p))
        exit(2);
    if (simcuda_hold_next_ctx_teardown(&gate) != CUDA_SUCCESS)
        exit(3);
    unsigned long long n0 = simcuda_entry_calls("cuCtxDestroy_v2");
    if (pthread_create(&td, NULL, fc_destroy, NULL))
        exit(3);
    while (simcuda_entry_calls("cuCtxDestroy_v2") == n0)
        sched_yield(); /* the driver's cuCtxDestroy(X) is under way */
    if (pthread_create(&tf, NULL, fc_free, NULL))
        exit(3);
    pthread_join(tf, NULL);
    simcuda_gate_open(gate);
    pthread_join(td, NULL);
    exit(fc_free_r != CUDA_SUCCESS ? 10 : fc_destroy_r != CUDA_SUCCESS ? 11 : 0);
}

START_TEST(free_passes_a_closing_context)
{
    static const char *const modes[] = PT_ALL_MODES;
    for (int m = 0; m < 4; m++) {
        char err[4096];
        pt_env(modes[m], "GPUARENA_LIMIT=512MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(closing_free_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (142, SIGALRM: the free of the primary context's block "
                      "waited for another context's teardown; 10: the free failed, 11: the "
                      "destroy); %s", modes[m], rc, err);
    }
}
END_TEST

/* ---- refused calls answer as the driver ----
 * The new hooks pass every argument to the driver and meet a context only on success: each bad
 * call (NULL out-parameter, bad device, bad affinity list, NULL or destroyed context) answers the
 * driver's own code, the driver's function called directly (glibc's dlsym fetched by version, the
 * one way around the shim) being the reference. */
typedef void *(*kc_dlsym_fn)(void *, const char *);
extern CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

START_TEST(context_hooks_refuse_as_the_driver)
{
    CUcontext a = pt_start(), dead, out;
    CUdevice dev;
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    kc_dlsym_fn real_dlsym = (kc_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym)
        real_dlsym = (kc_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull(real_dlsym);
    ck_assert_ptr_nonnull(h);
    static const char *const names[] = {"cuCtxCreate", "cuCtxCreate_v2", "cuCtxCreate_v3",
                                        "cuCtxCreate_v4", "cuCtxPushCurrent", "cuCtxPushCurrent_v2"};
    void *hook[6], *drv[6];
    for (int i = 0; i < 6; i++) {
        hook[i] = dlsym(h, names[i]);
        drv[i] = real_dlsym(h, names[i]);
        ck_assert_msg(pt_in_shim(hook[i], NULL), "%s: the shim's hook", names[i]);
        ck_assert_msg(drv[i] && !pt_in_shim(drv[i], NULL), "%s: the driver's own", names[i]);
    }
    ck_assert_int_eq(cuCtxCreate_v2(&dead, 0, dev), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(dead), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSetCurrent(a), CUDA_SUCCESS);
    for (int w = 0; w < 2; w++) { /* w 0: the hook, 1: the driver; the same answers */
        CUresult r[12];
        void *const *f = w ? drv : hook;
        for (int i = 0; i < 2; i++) {
            r[2 * i] = ((create_fn)f[i])(NULL, 0, dev);
            r[2 * i + 1] = ((create_fn)f[i])(&out, 0, 99);
        }
        r[4] = ((create_v3_fn)f[2])(NULL, NULL, 0, 0, dev);
        r[5] = ((create_v3_fn)f[2])(&out, NULL, -1, 0, dev);
        r[6] = ((create_v3_fn)f[2])(&out, NULL, 1, 0, dev);
        r[7] = ((create_v4_fn)f[3])(NULL, NULL, 0, dev);
        r[8] = ((push_fn)f[4])(NULL);
        r[9] = ((push_fn)f[5])(NULL);
        r[10] = ((push_fn)f[5])(dead);
        r[11] = cuCtxSetCurrent(dead);
        static CUresult first[12];
        for (int i = 0; i < 12; i++) {
            ck_assert_msg(r[i] != CUDA_SUCCESS, "call %d succeeded (%s)", i, w ? "driver" : "hook");
            if (!w)
                first[i] = r[i];
            else
                ck_assert_msg(first[i] == r[i], "call %d: the hook answered %d, the driver %d", i,
                              first[i], r[i]);
        }
        CUcontext cur = NULL;
        ck_assert_int_eq(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
        ck_assert_ptr_eq(cur, a); /* nothing was made or pushed */
    }
}
END_TEST

TCase *pt_tcase_stream_kernelctx(void)
{
    TCase *tc = tcase_create("stream_kernelctx");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, kernel_only_context_waited_for);
    tcase_add_test(tc, kernel_only_context_costs_nothing_and_ends);
    tcase_add_test(tc, free_passes_a_closing_context);
    tcase_add_test(tc, context_hooks_refuse_as_the_driver);
    return tc;
}
