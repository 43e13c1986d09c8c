/* An outside check of issue 10 (pools and the vmm mode) on 2026-12-07 (helper-127): what a hostile
 * user meets in vmm mode under a tight cap and when the driver refuses granules beside live and
 * kept ones. Asserted from the outside: the simulated driver's counters, the bytes read back, the
 * program's error codes and the one line the shim writes.
 *
 * PT_OUTSIDE127_PENDING: cases whose fix belongs in the vmm pool (allocator/pool_vmm.c and its
 * files), which fail on today's code; off, so that the suite passes meanwhile. Set it to 1 with
 * the fix.
 */
#include "preload_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PT_OUTSIDE127_PENDING
#define PT_OUTSIDE127_PENDING 1
#endif

#define GRAN (2 * MiB)

/* Every byte of [p, p + n) reads back as v. */
static int o127_reads(CUdeviceptr p, size_t n, unsigned char v)
{
    unsigned char *b = malloc(n);
    if (!b || cuMemcpyDtoH(b, p, n) != CUDA_SUCCESS) {
        free(b);
        return 0;
    }
    size_t i = 0;
    while (i < n && b[i] == v)
        i++;
    free(b);
    return i == n;
}

/* Under a 10 MiB cap: three 3 MiB blocks (the third in the area vmm keeps for the size, seen twice
 * while live), which map 5 granules, 9 MiB live and 1 MiB free in the last granule of that area;
 * then a 1 MiB block. Exit 0: served; 10: refused with CUDA_ERROR_OUT_OF_MEMORY; other: a step
 * failed. The driver's mapped bytes never pass the cap, and the blocks' bytes read back. */
static void o127_hole_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p[3], q;
    for (int i = 0; i < 3; i++) {
        if (cuMemAlloc(&p[i], 3 * MiB) != CUDA_SUCCESS)
            exit(2);
        if (cuMemsetD8(p[i], (unsigned char)(0x40 + i), 3 * MiB) != CUDA_SUCCESS)
            exit(3);
    }
    if (pt_counters().vmm_mapped_bytes != 5 * GRAN)
        exit(4); /* the layout this case is about */
    CUresult r = cuMemAlloc(&q, MiB);
    if (r == CUDA_SUCCESS && (cuMemsetD8(q, 0x77, MiB) != CUDA_SUCCESS || !o127_reads(q, MiB, 0x77)))
        exit(5);
    for (int i = 0; i < 3; i++)
        if (!o127_reads(p[i], 3 * MiB, (unsigned char)(0x40 + i)))
            exit(6);
    if (pt_counters().peak_vmm_mapped_bytes > 10 * MiB)
        exit(7);
    exit(r == CUDA_SUCCESS ? 0 : r == CUDA_ERROR_OUT_OF_MEMORY ? 10 : 8);
}

/* The out-of-memory line does not say the free bytes lie in holes smaller than the block when the
 * only hole is the block's own size, left free in the area vmm keeps for 3 MiB blocks: it said
 * "the free bytes lie in holes smaller than the block" (an outside check, 2026-12-07). Served, the
 * block is what the pending case below asks for. */
START_TEST(vmm127_hole_of_another_size_said)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=10MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    char err[16384];
    int st = pt_run_child(o127_hole_child, NULL, err, sizeof err);
    ck_assert_msg(st == 0 || st == 10, "exit %d: %s", st, err);
    if (st == 0)
        return;
    ck_assert_msg(strstr(err, "gpuarena: out of memory from fragmentation: cuMemAlloc of 1.00 MiB "
                              "failed on device 0 although 1.00 MiB of the memory mapped are free"),
                  "%s", err);
    ck_assert_msg(!strstr(err, "holes smaller than the block, in granules"),
                  "a hole of the block's size said smaller: %s", err);
    ck_assert_msg(strstr(err, "the free bytes lie in holes smaller than the block or in areas vmm "
                              "keeps for blocks of other sizes, in granules that live blocks keep "
                              "mapped"), "%s", err);
    ck_assert_msg(strstr(err, "raise GPUARENA_LIMIT, or use GPUARENA_MODE=platform"), "%s", err);
}
END_TEST

#if PT_OUTSIDE127_PENDING
/* The 1 MiB block fits in the 1 MiB that the 3 MiB area leaves free in a mapped granule, and the
 * cap has no room for a new granule: it is refused today (the general area would map a new one,
 * and a block of the general area is never tried in a size's area), where platform mode serves it
 * under the same cap. Pending: the fix is the vmm pool's (allocator/pool_vmm.c). */
START_TEST(vmm127_hole_of_another_size_serves)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=10MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    char err[16384];
    int st = pt_run_child(o127_hole_child, NULL, err, sizeof err);
    ck_assert_msg(st == 0, "exit %d: %s", st, err);
}
END_TEST
#endif

/* The driver refuses a granule midway through a 14 MiB block while a live 1 MiB block shares the
 * pool's first granule and, with the default keep, four granules freed before are kept: the block
 * is an out-of-memory, the live block's granule stays mapped and its bytes read back, nothing the
 * failed block made stays (the driver's mappings and physical bytes are the live block's alone),
 * and the same block is served once the driver gives granules again. vmm_refused_midway covers an
 * empty pool with nothing kept. */
static void o127_midway(const char *keep, const char *rule)
{
    pt_env("GPUARENA_MODE=vmm", keep, "GPUARENA_FREE_SYNC=device", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr x[4], a, b;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(cuMemAlloc(&x[i], GRAN), CUDA_SUCCESS);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(cuMemFree(x[i]), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&a, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(a, 0x5a, MiB), CUDA_SUCCESS);
    simcuda_reset_counters(); /* the rule counts the calls from here */
    ck_assert_int_eq(simcuda_fail_add(rule), 0);
    ck_assert_int_eq(cuMemAlloc(&b, 14 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    simcuda_fail_clear();
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_eq(c.injected_failures, 1);
    ck_assert_uint_eq(c.vmm_mappings, 1);
    ck_assert_uint_eq(c.vmm_mapped_bytes, GRAN);
    ck_assert_uint_eq(c.vmm_bytes_in_use, GRAN);
    ck_assert_uint_eq(c.live_allocations, 1); /* the live block's granule's handle alone */
    ck_assert(o127_reads(a, MiB, 0x5a));
    ck_assert_int_eq(cuMemAlloc(&b, 14 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemsetD8(b, 0x11, 14 * MiB), CUDA_SUCCESS);
    ck_assert(o127_reads(b, 14 * MiB, 0x11));
    ck_assert(o127_reads(a, MiB, 0x5a));
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
}

START_TEST(vmm127_refused_midway_beside_live_and_kept)
{
    static const char *rules[] = {"cuMemCreate:1", "cuMemCreate:3", "cuMemMap:2",
                                  "cuMemSetAccess:3", "cuMemCreate:2:1"};
    static const char *keeps[] = {"GPUARENA_VMM_KEEP=0", "GPUARENA_VMM_KEEP=64MiB"};
    o127_midway(keeps[_i / 5], rules[_i % 5]);
}
END_TEST

/* A 3 GiB block at 64 KiB granules on a 4 GiB simulated device: 49,152 granules, two host
 * mappings each, past the 65,530 mappings Linux lets a process hold by default
 * (vm.max_map_count). The simulated driver refuses the granule past the host's limit with
 * CUDA_ERROR_OUT_OF_MEMORY, as it must answer something, and now says once why and what to change;
 * it said nothing, and the shim's line read "the device itself is full" with the device empty (an
 * outside check, 2026-12-07). On a host that allows enough mappings the block is served. */
static void o127_many_granules_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p;
    CUresult r = cuMemAlloc(&p, 3 * GiB);
    if (r == CUDA_SUCCESS)
        exit(cuMemFree(p) == CUDA_SUCCESS ? 0 : 2);
    simcuda_counters_t c = pt_counters();
    exit(r == CUDA_ERROR_OUT_OF_MEMORY && c.vmm_mappings == 0 && c.vmm_bytes_in_use == 0 ? 10 : 3);
}

START_TEST(vmm127_host_mappings_said)
{
    long max = 0;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &max) != 1)
            max = 0;
        fclose(f);
    }
    pt_env("GPUARENA_MODE=vmm", "SIMCUDA_VMM_GRANULARITY=64KiB", "SIMCUDA_TOTAL_MEM=4GiB", NULL);
    char err[16384];
    int st = pt_run_child(o127_many_granules_child, NULL, err, sizeof err);
    if (max > 2 * 49152 + 1000) { /* room for every granule's two mappings */
        ck_assert_msg(st == 0, "exit %d: %s", st, err);
        return;
    }
    ck_assert_msg(st == 10, "exit %d (max_map_count %ld): %s", st, max, err);
    ck_assert_msg(strstr(err, "gpuarena: simcuda: the host refused a memory mapping that "),
                  "the simulated driver says why: %s", err);
    ck_assert_msg(strstr(err, "vm.max_map_count): answered CUDA_ERROR_OUT_OF_MEMORY, though the "
                              "simulated device may have room; use larger granules "
                              "(SIMCUDA_VMM_GRANULARITY)"), "%s", err);
    const char *said = strstr(err, "gpuarena: simcuda: the host refused");
    ck_assert_msg(said && !strstr(said + 1, "gpuarena: simcuda: the host refused"), "once: %s",
                  err);
}
END_TEST

TCase *pt_tcase_outside127(void)
{
    TCase *tc = tcase_create("outside127");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, vmm127_hole_of_another_size_said);
    tcase_add_loop_test(tc, vmm127_refused_midway_beside_live_and_kept, 0, 10);
    tcase_add_test(tc, vmm127_host_mappings_said);
#if PT_OUTSIDE127_PENDING
    tcase_add_test(tc, vmm127_hole_of_another_size_serves);
#endif
    return tc;
}
