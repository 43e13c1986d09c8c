/* Findings of the outside checks of 2026-12-07 left open in the shim (helper-108 F2's residue,
 * helper-103 F5, helper-104 F8), each a test that failed before its fix. */
#include "preload_test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Every allocation the shim passes to the driver counts in 512-byte units, as cuMemAlloc does in
 * platform mode and as gpuarena-replay counts every allocation of a trace: 513-byte managed,
 * cuMemAllocFromPoolAsync and v1 blocks under a 1 MiB cap were 2,044 (exact bytes), where
 * cuMemAlloc and the replay of the same trace take 1,024, and the statistics said 1,048,572 in
 * use. Loops 0-3: platform mode, 4-5: grow (pass-through in every mode). */
extern CUresult pt_o4_v1_alloc(unsigned *dptr, unsigned bytesize) __asm__("cuMemAlloc");

static CUresult pt_pass_alloc(int api, CUdeviceptr *p, size_t size, CUstream s, CUmemoryPool pool)
{
    unsigned p1 = 0;
    CUresult r;
    switch (api) {
    case 0: return cuMemAllocAsync(p, size, s);
    case 1: return cuMemAllocFromPoolAsync(p, size, pool, s);
    case 2: return cuMemAllocManaged(p, size, CU_MEM_ATTACH_GLOBAL);
    default:
        r = pt_o4_v1_alloc(&p1, (unsigned)size);
        *p = p1;
        return r;
    }
}

static void pt_units_child(void *arg)
{
    int api = *(const int *)arg;
    pt_start();
    CUstream s = NULL;
    CUmemoryPool pool = NULL;
    if (cuStreamCreate(&s, 0) || cuDeviceGetDefaultMemPool(&pool, 0))
        exit(2);
    static CUdeviceptr p[4096];
    int n = 0;
    while (n < 4096 && pt_pass_alloc(api, &p[n], 513, s, pool) == CUDA_SUCCESS)
        n++;
    if (n != 1024) {
        fprintf(stderr, "api %d: %d blocks of 513 bytes under a 1 MiB cap\n", api, n);
        exit(3);
    }
    size_t fr = 1, tot = 0;
    if (cuMemGetInfo(&fr, &tot) || fr != 0)
        exit(4);
    CUresult r = api < 2 ? cuMemFreeAsync(p[0], s) : cuMemFree(p[0]);
    if (r || cuStreamSynchronize(s) || cuMemGetInfo(&fr, &tot) || fr != 1024) {
        fprintf(stderr, "api %d: free %d, then %zu bytes free, 1024 expected\n", api, r, fr);
        exit(5);
    }
    if (pt_pass_alloc(api, &p[0], 1024, s, pool) || cuCtxSynchronize()) /* the units given back */
        exit(6);
    exit(0);
}

START_TEST(pass_through_cap_in_512_byte_units)
{
    static const int apis[] = {0, 1, 2, 3, 1, 2};
    int api = apis[_i];
    char stats[] = "/tmp/gpuarena-units-XXXXXX", senv[128], err[4096];
    close(mkstemp(stats));
    snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
    pt_env(_i < 4 ? "GPUARENA_MODE=platform" : "GPUARENA_MODE=grow", "GPUARENA_LIMIT=1MiB",
           "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LOG=error", senv, NULL);
    int st = pt_run_child(pt_units_child, &api, err, sizeof err);
    ck_assert_msg(st == 0, "loop %d: exit %d: %s", _i, st, err);
    /* the statistics in the same units: the cap's whole MiB in use and passed through at peak */
    ck_assert_msg(pt_json_check(stats, "d['totals']['peak_in_use'] == 1048576 and "
                                       "d['totals']['peak_passthrough_bytes'] == 1048576 and "
                                       "d['totals']['peak_reserved'] == 1048576") == 0,
                  "loop %d: the statistics count 512-byte units", _i);
    unlink(stats);
}
END_TEST

TCase *pt_tcase_outside4(void)
{
    TCase *tc = tcase_create("outside4");
    tcase_add_loop_test(tc, pass_through_cap_in_512_byte_units, 0, 6);
    return tc;
}
