/* Preload tier, the driver's memory pools (shim/mempool.c): what the pools that stream-ordered
 * pass-through blocks come from keep after frees stays under the cap, for any number of pools
 * (there were at most 8 counted per device: what the 9th on kept escaped the cap), and a pool the
 * program destroys (cuMemPoolDestroy) leaves the count with what it kept (its figure was frozen:
 * the cap stayed charged with memory the driver had given back, and allocations were refused).
 * Asserted from outside: the simulated driver's counters (peak_bytes_in_use, pool_kept_bytes).
 */
#include "preload_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define NPOOLS 12

/* A pinned pool on device 0 that keeps what is freed (threshold at the maximum, as PyTorch's
 * cudaMallocAsync backend sets it); exits 2 when it cannot be made. */
static CUmemoryPool mp_pool(void)
{
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    CUmemoryPool pool;
    cuuint64_t max = ~0ull;
    if (cuMemPoolCreate(&pool, &pp) ||
        cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max))
        exit(2);
    return pool;
}

/* A block of `bytes` from pool, freed on s and passed: the pool keeps it. Exits 3 if refused. */
static void mp_keep(CUmemoryPool pool, size_t bytes, CUstream s)
{
    CUdeviceptr p;
    if (cuMemAllocFromPoolAsync(&p, bytes, pool, s) || cuMemFreeAsync(p, s) || cuStreamSynchronize(s))
        exit(3);
}

/* 1 when the driver never held more than the 64 MiB cap. */
static int mp_within_cap(void)
{
    return pt_counters().peak_bytes_in_use <= 64 * MiB;
}

/* Twelve pools each keep 4 MiB (48 MiB in all, under the 64 MiB cap); then 30 MiB are asked: they
 * fit only once the pools are trimmed, which gpuarena does when it counts all twelve (before, it
 * counted 8 pools' 32 MiB, passed the 30 MiB, and the driver held 78 MiB). 40 MiB more never fit:
 * refused. Then each pool keeps 4 MiB again and a block of 30 MiB comes from the twelfth. */
static void many_pools_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s;
    CUmemoryPool pools[NPOOLS];
    CUdeviceptr q, r, x;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))
        exit(2);
    for (int i = 0; i < NPOOLS; i++) {
        pools[i] = mp_pool();
        mp_keep(pools[i], 4 * MiB, s);
        if (!mp_within_cap())
            exit(4);
    }
    if (pt_counters().pool_kept_bytes != NPOOLS * 4 * MiB)
        exit(5); /* the pools do not keep: the test shows nothing */
    if (cuMemAlloc(&q, 30 * MiB))
        exit(6);
    if (!mp_within_cap())
        exit(7); /* the driver held the pools' 48 MiB and 30 MiB: the cap was escaped */
    if (cuMemAlloc(&r, 40 * MiB) != CUDA_ERROR_OUT_OF_MEMORY || !mp_within_cap())
        exit(8);
    if (cuMemFree(q))
        exit(9);
    for (int i = 0; i < NPOOLS; i++)
        mp_keep(pools[i], 4 * MiB, s);
    if (cuMemAllocFromPoolAsync(&x, 30 * MiB, pools[NPOOLS - 1], s) || !mp_within_cap())
        exit(10);
    if (cuMemFreeAsync(x, s) || cuStreamSynchronize(s))
        exit(11);
    exit(0);
}

START_TEST(many_pools_kept_memory_stays_capped)
{
    static const char *const modes[] = {"GPUARENA_MODE=platform", "GPUARENA_MODE=arena"};
    for (int m = 0; m < 2; m++) {
        char err[4096];
        pt_env(modes[m], "GPUARENA_LIMIT=64MiB", "GPUARENA_PREALLOCATE=false",
               "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(many_pools_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (4, 7, 8, 10: the driver held more than the 64 MiB "
                      "cap; 6: refused; 8: 40 MiB past the cap not refused); %s", modes[m], rc, err);
    }
}
END_TEST

/* Pools A and B keep 40 and 8 MiB under a 64 MiB cap; C has a 16 MiB block live and keeps 8 MiB.
 * The program destroys A: what it kept leaves the cap at once, and 40 MiB fit beside B's 8 without
 * trimming B (before, every later read of the pools failed on A and the figure stayed at what all
 * kept: the 40 MiB were refused). Then C goes with its block live: the block stays the program's,
 * C's kept 8 MiB leave the cap at once and the block's 16 MiB at its free; 48 MiB then fit. */
static void destroyed_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s;
    CUdeviceptr q, live;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))
        exit(2);
    CUmemoryPool a = mp_pool(), b = mp_pool(), c = mp_pool();
    mp_keep(a, 40 * MiB, s);
    mp_keep(b, 8 * MiB, s);
    if (cuMemPoolDestroy(a) || pt_counters().pool_kept_bytes != 8 * MiB)
        exit(4);
    if (cuMemAlloc(&q, 40 * MiB))
        exit(5); /* refused: A's 40 MiB still on the cap */
    if (pt_counters().pool_kept_bytes != 8 * MiB || !mp_within_cap())
        exit(6); /* B trimmed for room that was there, or the cap passed */
    if (cuMemFree(q) || cuMemAllocFromPoolAsync(&live, 16 * MiB, c, s))
        exit(7);
    mp_keep(c, 8 * MiB, s);
    if (cuMemPoolDestroy(c) || cuMemsetD8(live, 0x5A, 16 * MiB) || cuMemFreeAsync(live, s) ||
        cuStreamSynchronize(s))
        exit(8);
    if (cuMemAlloc(&q, 48 * MiB))
        exit(9); /* C's kept bytes or its block's still on the cap */
    if (!mp_within_cap())
        exit(10);
    exit(0);
}

START_TEST(destroyed_pool_leaves_the_cap)
{
    static const char *const modes[] = {"GPUARENA_MODE=platform", "GPUARENA_MODE=arena"};
    for (int m = 0; m < 2; m++) {
        char err[4096];
        pt_env(modes[m], "GPUARENA_LIMIT=64MiB", "GPUARENA_PREALLOCATE=false",
               "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        int rc = pt_run_child(destroyed_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (5, 9: refused for memory the driver gave back; 6: "
                      "a pool trimmed for no need, or the cap passed); %s", modes[m], rc, err);
    }
}
END_TEST

/* cuMemPoolDestroy is the shim's; NULL, a handle that is no pool, a device's default pool and a
 * pool destroyed twice get the driver's own answer (CUDA_ERROR_INVALID_VALUE on this driver, as on
 * NVIDIA's) and change nothing: the pools in use still count and allocations go on. */
static void bad_destroy_child(void *arg)
{
    (void)arg;
    pt_start();
    CUstream s;
    CUmemoryPool def, a = mp_pool();
    CUdeviceptr q;
    int bogus;
    if (!pt_in_shim((void *)cuMemPoolDestroy, NULL))
        exit(2);
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuDeviceGetDefaultMemPool(&def, 0))
        exit(3);
    mp_keep(a, 8 * MiB, s);
    if (cuMemPoolDestroy(NULL) != CUDA_ERROR_INVALID_VALUE ||
        cuMemPoolDestroy((CUmemoryPool)&bogus) != CUDA_ERROR_INVALID_VALUE ||
        cuMemPoolDestroy(def) != CUDA_ERROR_INVALID_VALUE)
        exit(4);
    if (cuMemAlloc(&q, 56 * MiB) || pt_counters().pool_kept_bytes != 8 * MiB || cuMemFree(q))
        exit(5); /* A's 8 MiB and 56 MiB fit the cap exactly: nothing to trim */
    if (cuMemPoolDestroy(a) || cuMemPoolDestroy(a) != CUDA_ERROR_INVALID_VALUE)
        exit(6);
    if (cuMemAlloc(&q, 64 * MiB) || !mp_within_cap())
        exit(7);
    exit(0);
}

START_TEST(pool_destroy_bad_handles)
{
    char err[4096];
    pt_env("GPUARENA_MODE=platform", "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    int rc = pt_run_child(bad_destroy_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d (2: not the shim's hook; 4: not the driver's answer; 5, 7: "
                  "refused; 6: the pool not destroyed); %s", rc, err);
}
END_TEST

/* A pool on device 1 used from a stream of device 0 (the driver places its blocks on the pool's
 * device): the block counts against device 1's cap, not device 0's, once gpuarena has a context on
 * device 1. Before, device 1 held 50 + 40 MiB under its 64 MiB cap, and device 0 refused 40 MiB
 * it had (helper-68 F6, helper-72 NEW-7). */
static void cross_device_child(void *arg)
{
    (void)arg;
    CUcontext c0 = pt_start(), c1, got;
    CUdevice d1;
    CUstream s;
    CUdeviceptr a, b, c, small;
    int ord = -1;
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 1;
    CUmemoryPool pool;
    if (cuDeviceGet(&d1, 1) || cuCtxCreate(&c1, NULL, 0, d1) || cuMemAlloc(&small, MiB) ||
        cuCtxPopCurrent(&got) || got != c1 || cuCtxGetCurrent(&got) || got != c0 ||
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemPoolCreate(&pool, &pp))
        exit(1);
    if (cuMemAllocFromPoolAsync(&a, 50 * MiB, pool, s) ||
        cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a) || ord != 1)
        exit(2);
    if (cuMemAlloc(&b, 40 * MiB)) /* device 0 has its whole cap */
        exit(3);
    if (cuCtxPushCurrent(c1) || cuMemAlloc(&c, 40 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(4);
    if (simcuda_device_bytes_in_use(1) > 64 * MiB)
        exit(5);
    /* a second pool block that does not fit on device 1: refused, nothing held */
    if (cuMemAllocFromPoolAsync(&c, 20 * MiB, pool, s) != CUDA_ERROR_OUT_OF_MEMORY ||
        simcuda_device_bytes_in_use(1) > 64 * MiB)
        exit(6);
    /* freed on device 0's stream: device 1 gets its bytes back */
    if (cuMemFreeAsync(a, s) || cuStreamSynchronize(s) || cuMemAlloc(&c, 40 * MiB))
        exit(7);
    exit(0);
}

START_TEST(cross_device_pool_block_counted_on_its_device)
{
    /* modes whose pools take only what they serve: arena mode's preallocated 48 MiB on device 1
     * leave no room for the 50 MiB block, which is then refused (as it should be) */
    static const char *const modes[] = {"GPUARENA_MODE=grow", "GPUARENA_MODE=vmm",
                                        "GPUARENA_MODE=platform"};
    char err[4096];
    pt_env(modes[_i], "SIMCUDA_DEVICES=2", "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=64MiB", NULL);
    int rc = pt_run_child(cross_device_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: exit %d (2: not on the pool's device, 3: device 0 refused, 4: device 1 "
                  "served past its cap, 5/6: the driver holds more than the cap there, 7: not given "
                  "back); %s", modes[_i], rc, err);
}
END_TEST

/* The same with no context of gpuarena's on the pool's device when the block is served (the
 * program only ever allocated on device 0): the block is counted on device 1 all the same, in that
 * device's own table, and what the pool keeps after its free is trimmed for device 1's next
 * allocation. Before, it was counted on device 0, which refused 40 MiB it had, and device 1 then
 * held 50 + 40 MiB under its 64 MiB cap, and 50 kept + 40 after the free (an outside test,
 * 2026-12-06). */
static void cross_device_noctx_child(void *arg)
{
    (void)arg;
    CUcontext c0 = pt_start(), c1;
    CUdevice d1;
    CUstream s;
    CUdeviceptr a, b, c;
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 1;
    CUmemoryPool pool;
    cuuint64_t keep = ~(cuuint64_t)0;
    if (cuDeviceGet(&d1, 1) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
        cuMemPoolCreate(&pool, &pp) ||
        cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep))
        exit(1);
    if (cuMemAllocFromPoolAsync(&a, 50 * MiB, pool, s) || cuStreamSynchronize(s))
        exit(2);
    if (cuMemAlloc(&b, 40 * MiB)) /* device 0 has its whole cap */
        exit(3);
    if (cuDevicePrimaryCtxRetain(&c1, d1) || cuCtxSetCurrent(c1))
        exit(1);
    if (cuMemAlloc(&c, 40 * MiB) != CUDA_ERROR_OUT_OF_MEMORY ||
        simcuda_device_bytes_in_use(1) > 64 * MiB)
        exit(4);
    if (cuCtxSetCurrent(c0) || cuMemFreeAsync(a, s) || cuStreamSynchronize(s) ||
        cuCtxSetCurrent(c1))
        exit(5);
    if (cuMemAlloc(&c, 40 * MiB) || simcuda_device_bytes_in_use(1) > 64 * MiB)
        exit(6); /* the pool's kept 50 MiB not trimmed for device 1 */
    exit(0);
}

START_TEST(cross_device_pool_block_without_context)
{
    static const char *const modes[] = {"GPUARENA_MODE=grow", "GPUARENA_MODE=vmm",
                                        "GPUARENA_MODE=platform"};
    char err[4096];
    pt_env(modes[_i], "SIMCUDA_DEVICES=2", "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LIMIT=64MiB", NULL);
    int rc = pt_run_child(cross_device_noctx_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: exit %d (2: refused, 3: device 0 refused, 4: device 1 served past "
                  "its cap, 5: the free failed, 6: device 1 past its cap after the free); %s",
                  modes[_i], rc, err);
}
END_TEST

/* Asks cuMemGetInfo, which reads the driver's pools' figures with the device's pool lock held. */
static void *mp_query(void *arg)
{
    size_t f, t;
    if (cuCtxSetCurrent((CUcontext)arg) == CUDA_SUCCESS)
        cuMemGetInfo(&f, &t);
    return NULL;
}

/* A pass-through block freed on a stream that has not passed the free (its memory held under the
 * cap until it does), and another thread inside the driver's pool query with the pool lock held
 * when the process forks: the child's fork handler gives the parent's held block up through the
 * pool accounting, and took that lock, copied held, for ever (found by an outside storm of forks
 * during async frees, platform mode). The child must come back from fork() and exit. */
static void fork_pool_lock_child(void *arg)
{
    (void)arg;
    CUcontext ctx = pt_start();
    CUstream s, s2;
    CUdeviceptr p, q;
    unsigned held, hold;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING) ||
        cuMemAllocAsync(&p, 4 * MiB, s) || cuStreamSynchronize(s) || simcuda_gate(s, &held) ||
        cuMemFreeAsync(p, s) || cuMemAllocAsync(&q, 1 * MiB, s2)) /* q: the pool's figures stale */
        exit(2);
    unsigned long long before = simcuda_entry_calls("cuMemPoolGetAttribute");
    if (simcuda_hold_next_pool_query(&hold))
        exit(2);
    pthread_t th;
    if (pthread_create(&th, NULL, mp_query, ctx))
        exit(2);
    for (int i = 0; simcuda_entry_calls("cuMemPoolGetAttribute") == before; i++)
        if (i < 2000)
            usleep(10000); /* until the query is inside the driver, the pool lock held */
        else
            exit(5);
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int st = 0, waited = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && waited++ < 2000)
        usleep(10000); /* a hang bound, not a timing assertion: 20 s for a child that does nothing */
    if (w == 0)
        kill(pid, SIGKILL), waitpid(pid, &st, 0);
    simcuda_gate_open(hold);
    pthread_join(th, NULL);
    simcuda_gate_open(held);
    if (cuStreamSynchronize(s))
        exit(3);
    exit(w == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 4);
}

/* Platform mode: the pools' stream-ordered blocks are the driver's there (in the other modes they
 * come from gpuarena's own pools, and no driver pool is asked). */
START_TEST(fork_while_pool_lock_held)
{
    char err[4096];
    pt_env("GPUARENA_MODE=platform", "GPUARENA_LIMIT=64MiB", NULL);
    int rc = pt_run_child(fork_pool_lock_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d (2: setup refused, 3: the stream failed after, 4: the "
                  "forked child hung in its fork handler or failed, 5: no pool query); %s", rc, err);
}
END_TEST

TCase *pt_tcase_mempool(void)
{
    TCase *tc = tcase_create("mempool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, many_pools_kept_memory_stays_capped);
    tcase_add_test(tc, destroyed_pool_leaves_the_cap);
    tcase_add_test(tc, pool_destroy_bad_handles);
    tcase_add_loop_test(tc, cross_device_pool_block_counted_on_its_device, 0, 3);
    tcase_add_loop_test(tc, cross_device_pool_block_without_context, 0, 3);
    tcase_add_test(tc, fork_while_pool_lock_held);
    return tc;
}
