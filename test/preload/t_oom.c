/* Preload tests: the out-of-memory explainer (shim/oom.c). A failure from fragmentation (enough
 * bytes free in total, no block large enough) prints a diagnosis with an occupancy map once per
 * process, however often it recurs; a true out-of-memory prints its own one line once; the stats
 * JSON counts the two kinds apart. Each workload runs in a child whose stderr is captured, and
 * exits with a distinct code for the first call that did not return what was expected.
 */
#include "preload_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define FRAG_MSG "gpuarena: out of memory from fragmentation:"
#define TRUE_MSG "gpuarena: out of memory: "

/* Fills the 32 MiB arena with alternating 1 MiB and 3 MiB blocks and frees the 3 MiB ones:
 * 24 MiB free, the largest hole 3 MiB. Returns non-zero if a step failed. */
static int pt_fragment(void)
{
    CUdeviceptr p[16];
    for (int i = 0; i < 16; i++)
        if (cuMemAlloc(&p[i], (i % 2 ? 3 : 1) * MiB) != CUDA_SUCCESS)
            return 1;
    for (int i = 1; i < 16; i += 2)
        if (cuMemFree(p[i]) != CUDA_SUCCESS)
            return 1;
    return 0;
}

/* Arena mode: two 4 MiB requests fail (fragmentation), a 2 MiB one still fits a hole. */
static void pt_frag_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr q;
    if (pt_fragment())
        exit(2);
    if (cuMemAlloc(&q, 4 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(3);
    if (cuMemAlloc(&q, 4 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(4);
    if (cuMemAlloc(&q, 2 * MiB) != CUDA_SUCCESS)
        exit(5);
    exit(0);
}

/* Returns how many times needle occurs in hay. */
static int pt_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Runs fn with env (NULL-terminated, GPUARENA_STATS added), stderr into err; checks the JSON. */
static void pt_oom_run(void (*fn)(void *), const char **env, char *err, size_t len,
                       const char *json_expr)
{
    char stats[] = "/tmp/gpuarena-oom-XXXXXX", senv[128];
    close(mkstemp(stats));
    snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
    pt_env(senv, NULL);
    for (const char **e = env; *e; e++)
        pt_env(*e, NULL);
    int status = pt_run_child(fn, NULL, err, len);
    ck_assert_msg(status == 0, "workload exit %d; stderr: %s", status, err);
    ck_assert_msg(pt_json_check(stats, json_expr) == 0, "stats JSON: %s", json_expr);
    unlink(stats);
}

START_TEST(frag_diagnosed_once)
{
    static const char *env[] = {"GPUARENA_MEM_FRACTION=0.5", "SIMCUDA_TOTAL_MEM=64MiB", NULL};
    char err[16384];
    pt_oom_run(pt_frag_child, env, err, sizeof err,
               "d['totals']['frag_failures'] == 2 and d['totals']['true_oom_failures'] == 0 and "
               "d['totals']['failed_allocs'] == 2 and d['devices'][0]['frag_failures'] == 2");
    ck_assert_msg(pt_count(err, FRAG_MSG) == 1, "diagnosis exactly once: %s", err);
    ck_assert_msg(!strstr(err, TRUE_MSG), "not called a true OOM: %s", err);
    ck_assert_msg(strstr(err, "cuMemAlloc of 4.00 MiB failed on device 0 although 24.0 MiB are "
                              "free;"), "request and free bytes: %s", err);
    ck_assert_msg(strstr(err, "largest free block 3.00 MiB, fragmentation 0.88"), "holes: %s", err);
    /* no cap set: the device is the bound, and no GPUARENA_LIMIT is suggested (helper-72 NEW-5) */
    ck_assert_msg(strstr(err, "in use 8.00 MiB, reserved 32.0 MiB in this context, the "
                              "process holds 32.0 MiB of the device's 64.0 MiB, no cap set below "
                              "it."), "figures: %s", err);
    ck_assert_msg(!strstr(err, "GPUARENA_LIMIT"), "no cap to raise: %s", err);
    /* One region, 64 cells of 512 KiB: 1 MiB used ("##"), 3 MiB free ("......"), eight times. */
    ck_assert_msg(strstr(err, "gpuarena:   [##......##......##......##......##......##......"
                              "##......##......]\n"), "occupancy map: %s", err);
    ck_assert_msg(strstr(err, "Try: ") && strstr(err, "GPUARENA_MODE=platform"), "hint: %s", err);
    ck_assert_msg(strstr(err, "GPUARENA_MODE=vmm (one address range"), "vmm named: %s", err);
    /* grow by its one name, not GPUARENA_PREALLOCATE=false (an outside check, 2026-12-06) */
    ck_assert_msg(strstr(err, "GPUARENA_MODE=grow (regions on demand"), "grow named: %s", err);
    ck_assert_msg(!strstr(err, "GPUARENA_PREALLOCATE"), "grow by its name: %s", err);
    /* What serves the block whatever the holes first; grow not as if it would (it was named
     * first, and ex_fragment 64 0.95 12 under a 1 GiB cap fails in grow mode too: an outside
     * check, 2026-12-07), with how to know: a replay of a recorded trace. The share may grow
     * here (32 MiB of the device's 64 MiB held), so GPUARENA_MEM_FRACTION=0.5+ is named. */
    ck_assert_msg(strstr(err, "Try: GPUARENA_MEM_FRACTION=0.5+ (the arena may grow past its "
                              "share), GPUARENA_MODE=vmm"), "what serves it first: %s", err);
    ck_assert_msg(strstr(err, ". GPUARENA_MODE=grow (regions on demand, empty ones given back) "
                              "may serve it or fragment the same way, as the order of the "
                              "program's allocations decides: to know before switching, record "
                              "a run (gpuarena run --trace T.gatrace ...) and replay it: gpuarena "
                              "replay T.gatrace --mode grow --limit 67108864.\n"),
                  "grow's caveat: %s", err);
}
END_TEST

/* Grow mode (the default 0.75+ under a 64 MiB cap): 24 MiB free in 2 MiB holes of a 48 MiB
 * region, 16 MiB more under the cap. 20 MiB fails with enough free inside the arena; 30 MiB fails
 * with enough only counting the room under the cap (the allocator alone, which looks inside held
 * regions, would not call it fragmentation; the device entry, once its count, said 1); 100 MiB is
 * a true OOM. */
static void pt_grow_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p[24], q;
    for (int i = 0; i < 24; i++)
        if (cuMemAlloc(&p[i], 2 * MiB) != CUDA_SUCCESS)
            exit(2);
    for (int i = 1; i < 24; i += 2)
        if (cuMemFree(p[i]) != CUDA_SUCCESS)
            exit(3);
    if (cuMemAlloc(&q, 20 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(4);
    if (cuMemAlloc(&q, 30 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(5);
    if (cuMemAlloc(&q, 100 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(6);
    if (cuMemAlloc(&q, 16 * MiB) != CUDA_SUCCESS) /* the room under the cap is real */
        exit(7);
    exit(0);
}

START_TEST(frag_counts_growth_room)
{
    static const char *env[] = {"GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL};
    char err[16384];
    pt_oom_run(pt_grow_child, env, err, sizeof err,
               "d['totals']['frag_failures'] == 2 and d['totals']['true_oom_failures'] == 1 and "
               "d['totals']['failed_allocs'] == 3 and d['devices'][0]['frag_failures'] == 2 and "
               "d['devices'][0]['failed_allocs'] == 3");
    ck_assert_msg(pt_count(err, FRAG_MSG) == 1, "diagnosis once: %s", err);
    ck_assert_msg(strstr(err, "although 40.0 MiB are free (24.0 MiB in the arena, 16.0 MiB more "
                              "it may reserve), and neither the largest free block nor the room "
                              "under the cap holds it;"), "growth room shown: %s", err);
    ck_assert_msg(pt_count(err, TRUE_MSG) == 1, "true OOM line once: %s", err);
}
END_TEST

/* True OOM twice, then a request too large to round: all three true OOMs, one line. */
static void pt_true_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p, q;
    if (cuMemAlloc(&p, 40 * MiB) != CUDA_SUCCESS)
        exit(2);
    if (cuMemAlloc(&q, 100 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(3);
    if (cuMemAlloc(&q, 100 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(4);
    if (cuMemAlloc(&q, (size_t)-1) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(5);
    exit(0);
}

START_TEST(true_oom_one_line)
{
    static const char *env[] = {"GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL};
    char err[16384];
    pt_oom_run(pt_true_child, env, err, sizeof err,
               "d['totals']['frag_failures'] == 0 and d['totals']['true_oom_failures'] == 3 and "
               "d['totals']['failed_allocs'] == 3");
    ck_assert_msg(!strstr(err, FRAG_MSG), "no fragmentation diagnosis: %s", err);
    ck_assert_msg(pt_count(err, TRUE_MSG) == 1, "one line, once: %s", err);
    ck_assert_msg(strstr(err, TRUE_MSG "cuMemAlloc of 100 MiB failed on device 0; in use 40.0 MiB, "
                              "reserved 48.0 MiB in this context, the process holds 48.0 MiB of "
                              "cap 64.0 MiB on the device"), "figures: %s", err);
    ck_assert_int_eq(pt_count(err, "\n"), 1);
}
END_TEST

/* Platform mode: the same fragmenting workload; 4 MiB fits (the driver has no holes to worry
 * about), 30 MiB is past the cap: a true OOM, never the fragmentation diagnosis. */
static void pt_platform_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr q;
    if (pt_fragment())
        exit(2);
    if (cuMemAlloc(&q, 4 * MiB) != CUDA_SUCCESS)
        exit(3);
    if (cuMemAlloc(&q, 30 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(4);
    if (cuMemAlloc(&q, 30 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(5);
    exit(0);
}

START_TEST(platform_never_fragmentation)
{
    static const char *env[] = {"GPUARENA_MODE=platform", "GPUARENA_LIMIT=32MiB",
                                "SIMCUDA_TOTAL_MEM=64MiB", NULL};
    char err[16384];
    pt_oom_run(pt_platform_child, env, err, sizeof err,
               "d['totals']['frag_failures'] == 0 and d['totals']['true_oom_failures'] == 2");
    ck_assert_msg(!strstr(err, FRAG_MSG), "no fragmentation diagnosis in platform mode: %s", err);
    ck_assert_msg(pt_count(err, TRUE_MSG) == 1, "one true-OOM line: %s", err);
    ck_assert_msg(strstr(err, "in use 12.0 MiB, reserved 12.0 MiB in this context, the process "
                              "holds 12.0 MiB of cap 32.0 MiB"), "%s", err);
}
END_TEST

/* vmm maps whole granules: under a 5 MiB cap a 4.5 MiB block needs three 2 MiB granules, so it
 * fails with more bytes left under the cap than it asks for, and the explanation says so (not
 * "not enough free bytes in total"); a 6 MiB block there is a plain out-of-memory; under a 1 MiB
 * cap nothing can be mapped at all; with every address reservation refused there is no range. */
static void pt_vmm_granule_child(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    pt_start();
    CUdeviceptr q;
    exit(cuMemAlloc(&q, size) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 2);
}

START_TEST(vmm_granules_explained)
{
    static const struct {
        const char *limit;
        size_t size;
        const char *says, *not_says, *extra;
    } cases[] = {
        {"GPUARENA_LIMIT=5MiB", 9 * MiB / 2, "granules of 2.00 MiB, and this allocation needed "
                                             "more of them", "not enough free bytes", NULL},
        {"GPUARENA_LIMIT=5MiB", 6 * MiB, "not enough free bytes in total", "granules of", NULL},
        {"GPUARENA_LIMIT=1MiB", 256 * 1024, "the cap is below one granule", "not enough free", NULL},
        {"SIMCUDA_FAIL=cuMemAddressReserve:1+", 256 * 1024, "vmm has no address space, the driver "
                                                           "refused", "granules of", NULL},
        /* A granule multiple maps exactly its granules: the whole cap's worth refused by the
         * driver is the device's refusal, not the granules' (it said "needed more of them"). */
        {"GPUARENA_LIMIT=64MiB", 64 * MiB, "the driver refused the memory", "granules of",
         "SIMCUDA_FAIL=cuMemCreate:1+"},
        {"GPUARENA_LIMIT=64MiB", 64 * MiB - 100, "the driver refused the memory", "granules of",
         "SIMCUDA_FAIL=cuMemCreate:1+"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[16384];
        pt_env("GPUARENA_MODE=vmm", "SIMCUDA_TOTAL_MEM=1GiB", cases[i].limit, cases[i].extra, NULL);
        int status = pt_run_child(pt_vmm_granule_child, (void *)(uintptr_t)cases[i].size, err,
                                  sizeof err);
        ck_assert_msg(status == 0, "case %zu: exit %d: %s", i, status, err);
        ck_assert_msg(pt_count(err, TRUE_MSG) == 1, "case %zu: %s", i, err);
        ck_assert_msg(strstr(err, cases[i].says), "case %zu: no '%s' in: %s", i, cases[i].says, err);
        ck_assert_msg(!strstr(err, cases[i].not_says), "case %zu: '%s' in: %s", i,
                      cases[i].not_says, err);
        if (strstr(cases[i].says, "granule") || strstr(cases[i].says, "address space"))
            ck_assert_msg(strstr(err, "GPUARENA_MODE=grow"), "case %zu: %s", i, err);
    }
}
END_TEST

/* vmm under an 8 MiB cap: eight 1 MiB blocks map all four 2 MiB granules; every other one freed
 * leaves 4 MiB free in four 1 MiB holes, each in a granule a live block keeps mapped. 1.5 MiB
 * then fails from fragmentation, and is said so, with the mapped figures and what to change (the
 * line said "not enough free bytes in total", an outside test on 2026-12-06: helper-42 F7); 1 MiB
 * still fits a hole. */
static void pt_vmm_holes_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p[8], q;
    for (int i = 0; i < 8; i++)
        if (cuMemAlloc(&p[i], MiB) != CUDA_SUCCESS)
            exit(2);
    for (int i = 0; i < 8; i += 2)
        if (cuMemFree(p[i]) != CUDA_SUCCESS)
            exit(3);
    if (cuMemAlloc(&q, 3 * MiB / 2) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(4);
    if (cuMemAlloc(&q, MiB) != CUDA_SUCCESS)
        exit(5);
    exit(0);
}

START_TEST(vmm_fragmentation_said)
{
    static const char *env[] = {"GPUARENA_MODE=vmm", "GPUARENA_LIMIT=8MiB",
                                "SIMCUDA_TOTAL_MEM=1GiB", NULL};
    char err[16384];
    pt_oom_run(pt_vmm_holes_child, env, err, sizeof err,
               "d['totals']['frag_failures'] == 1 and d['totals']['true_oom_failures'] == 0 and "
               "d['totals']['failed_allocs'] == 1");
    ck_assert_msg(pt_count(err, FRAG_MSG) == 1 && !strstr(err, TRUE_MSG), "%s", err);
    ck_assert_msg(!strstr(err, "not enough free bytes"), "not called a lack of bytes: %s", err);
    ck_assert_msg(strstr(err, FRAG_MSG " cuMemAlloc of 1.50 MiB failed on device 0 although "
                              "4.00 MiB of the memory mapped are free; in use 4.00 MiB, mapped "
                              "8.00 MiB in this context (of which kept mapped while free: 0 B"),
                  "figures: %s", err);
    ck_assert_msg(strstr(err, "the process holds 8.00 MiB of cap 8.00 MiB on the device (the free "
                              "bytes lie in holes smaller than the block or in areas vmm keeps "
                              "for blocks of other sizes, in granules") &&
                  strstr(err, "raise GPUARENA_LIMIT, or use GPUARENA_MODE=platform"),
                  "why and what to change: %s", err);
    ck_assert_int_eq(pt_count(err, "\n"), 1);
}
END_TEST

/* A fixed GPUARENA_MEM_FRACTION bounds the pool at its share of the cap: an allocation past the
 * share fails with the cap's room left, and the explanation names the share and the fraction
 * (it said "not enough free bytes in total: raise GPUARENA_LIMIT", or in vmm mode that the
 * device was full). With a growing fraction the same allocation succeeds. */
START_TEST(hard_share_explained)
{
    static const struct {
        const char *mode, *fraction;
        size_t size;
        const char *says;
    } cases[] = {
        {"GPUARENA_MODE=arena", "GPUARENA_MEM_FRACTION=0.5", 600 * MiB,
         "bounded by its share of the cap, 512 MiB (GPUARENA_MEM_FRACTION=0.5, a fixed fraction)"},
        {"GPUARENA_MODE=grow", "GPUARENA_MEM_FRACTION=0.01", 20 * MiB,
         "bounded by its share of the cap, 10.2 MiB (GPUARENA_MEM_FRACTION=0.01"},
        /* the fraction as typed: %g wrote 1e-06, and the fix "GPUARENA_MEM_FRACTION=1e-06+",
         * which the parser refuses (exponents are not accepted) */
        {"GPUARENA_MODE=vmm", "GPUARENA_MEM_FRACTION=0.000001", MiB,
         "bounded by its share of the cap, 1.00 KiB (GPUARENA_MEM_FRACTION=0.000001, a fixed "
         "fraction), not by the cap: raise the fraction, or use GPUARENA_MEM_FRACTION=0.000001+ "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[16384];
        pt_env("SIMCUDA_TOTAL_MEM=1GiB", cases[i].mode, cases[i].fraction, NULL);
        int status = pt_run_child(pt_vmm_granule_child, (void *)(uintptr_t)cases[i].size, err,
                                  sizeof err);
        ck_assert_msg(status == 0, "case %zu: exit %d: %s", i, status, err);
        ck_assert_msg(strstr(err, cases[i].says), "case %zu: no '%s' in: %s", i, cases[i].says,
                      err);
        ck_assert_msg(strstr(err, "GPUARENA_MEM_FRACTION="), "case %zu: %s", i, err);
        ck_assert_msg(!strstr(err, "not enough free bytes") && !strstr(err, "device itself is full"),
                      "case %zu: %s", i, err);
    }
}
END_TEST

/* A cuMemCreate (JAX 0.11 takes its pool this way) refused while the arena holds the memory: the
 * warning says where the memory is and what to do, once; twice refused, one message. */
#define PASS_MSG "that memory is held by gpuarena's arena"
static void pt_pass_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p;
    if (cuMemAlloc(&p, MiB) != CUDA_SUCCESS)
        exit(2);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    if (cuMemCreate(&h, 32 * MiB, &prop, 0) != CUDA_ERROR_OUT_OF_MEMORY ||
        cuMemCreate(&h, 24 * MiB, &prop, 0) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(3);
    if (cuMemCreate(&h, 8 * MiB, &prop, 0) != CUDA_SUCCESS) /* what the arena left */
        exit(4);
    exit(0);
}

START_TEST(passthrough_refused_for_the_arena)
{
    static const char *env[] = {"GPUARENA_MEM_FRACTION=0.75", "SIMCUDA_TOTAL_MEM=64MiB", NULL};
    char err[16384];
    pt_oom_run(pt_pass_child, env, err, sizeof err,
               "d['by_api']['cuMemCreate']['failed'] == 2 and d['by_api']['cuMemCreate']['calls'] == 3 "
               "and d['totals']['true_oom_failures'] == 0");
    ck_assert_msg(pt_count(err, PASS_MSG) == 1, "said once: %s", err);
    /* the second refusal is the arena's too: no "use less" line (an outside re-check) */
    ck_assert_msg(!strstr(err, "gpuarena: out of memory"), "no true out-of-memory line: %s", err);
    ck_assert_msg(strstr(err, "gpuarena: cuMemCreate of 32.0 MiB failed on device 0: " PASS_MSG
                              " (48.0 MiB reserved, 47.0 MiB of it free)"), "figures: %s", err);
    ck_assert_msg(strstr(err, "GPUARENA_MODE=vmm or grow") &&
                  strstr(err, "XLA_PYTHON_CLIENT_ALLOCATOR=platform"), "what to do: %s", err);
}
END_TEST

/* A managed allocation past the cap, then one within it. */
static void pt_managed_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p;
    if (cuMemAllocManaged(&p, 32 * MiB, CU_MEM_ATTACH_GLOBAL) != CUDA_ERROR_OUT_OF_MEMORY ||
        cuMemAllocManaged(&p, 24 * MiB, CU_MEM_ATTACH_GLOBAL) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(3);
    if (cuMemAllocManaged(&p, 8 * MiB, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS)
        exit(4);
    exit(0);
}

/* A pass-through allocation the cap refuses, with no arena holding memory: the true out-of-memory
 * line, once, with what the process holds against the cap, and counted as one (it printed
 * nothing and was counted in neither figure: helper-72 NEW-6). */
START_TEST(passthrough_refused_by_the_cap_said)
{
    static const char *env[] = {"GPUARENA_MODE=platform", "GPUARENA_LIMIT=16MiB",
                                "SIMCUDA_TOTAL_MEM=64MiB", NULL};
    static const char *env_vmm[] = {"GPUARENA_MODE=vmm", "GPUARENA_LIMIT=16MiB",
                                    "SIMCUDA_TOTAL_MEM=64MiB", NULL};
    char err[16384];
    pt_oom_run(pt_pass_child, env, err, sizeof err,
               "d['by_api']['cuMemCreate']['failed'] == 2 and d['totals']['true_oom_failures'] == 2");
    ck_assert_msg(!strstr(err, PASS_MSG), "no arena, nothing held in it: %s", err);
    ck_assert_msg(pt_count(err, "gpuarena: out of memory") == 1, "said once: %s", err);
    ck_assert_msg(strstr(err, "gpuarena: out of memory: cuMemCreate of 32.0 MiB failed on device 0 "
                              "(memory the driver allocates, counted under the cap), the process "
                              "holds 1.00 MiB of cap 16.0 MiB on the device (not enough free bytes "
                              "in total: raise GPUARENA_LIMIT or use less)"), "figures: %s", err);
    pt_oom_run(pt_managed_child, env_vmm, err, sizeof err,
               "d['by_api']['cuMemAllocManaged']['failed'] == 2 and "
               "d['totals']['true_oom_failures'] == 2 and d['totals']['frag_failures'] == 0");
    ck_assert_msg(pt_count(err, "gpuarena: out of memory") == 1, "said once: %s", err);
    ck_assert_msg(strstr(err, "gpuarena: out of memory: cuMemAllocManaged of 32.0 MiB failed on "
                              "device 0 (memory the driver allocates, counted under the cap), the "
                              "process holds 0 B of cap 16.0 MiB"), "figures: %s", err);
}
END_TEST

START_TEST(silent_at_log_error)
{
    static const char *env[] = {"GPUARENA_MEM_FRACTION=0.5", "SIMCUDA_TOTAL_MEM=64MiB",
                                "GPUARENA_LOG=error", NULL};
    char err[16384];
    pt_oom_run(pt_frag_child, env, err, sizeof err, "d['totals']['frag_failures'] == 2");
    ck_assert_msg(err[0] == '\0', "GPUARENA_LOG=error silences the diagnosis: %s", err);
}
END_TEST

/* vmm, a 16 MiB cap: eight contexts each destroyed with a 512-byte stream-ordered block live (an
 * orphan pool each, one 2 MiB granule mapped) fill the cap; the next allocation fails, and its
 * explanation names the orphans with their figures and the fix. Freeing one such block gives its
 * granule back: the allocation then succeeds; every block freed, the driver holds nothing. */
static void orphans_child(void *arg)
{
    (void)arg;
    CUdevice dev;
    CUcontext c;
    CUdeviceptr a[8], p;
    if (cuInit(0) || cuDeviceGet(&dev, 0))
        exit(2);
    for (int i = 0; i < 8; i++)
        if (cuCtxCreate(&c, NULL, 0, dev) || cuMemAllocAsync(&a[i], 512, NULL) ||
            cuCtxDestroy(c))
            exit(3);
    if (cuCtxCreate(&c, NULL, 0, dev) || cuMemAlloc(&p, 512) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(4);
    if (cuMemFree(a[0]) || cuMemAlloc(&p, 512) || cuMemFree(p))
        exit(5);
    for (int i = 1; i < 8; i++)
        if (cuMemFree(a[i]))
            exit(6);
    if (cuCtxDestroy(c))
        exit(7);
    simcuda_counters_t k = pt_counters();
    if (k.bytes_in_use || k.vmm_reserved_bytes || k.vmm_mappings)
        exit(8);
    exit(0);
}

/* Each orphan keeps its context's whole address range (twice the cap) and a granule mapped, for
 * a block of any size: a program destroying many contexts so ran out of the cap or the address
 * space, and the explanation blamed the cap alone (an outside test on 2026-12-05). */
START_TEST(vmm_oom_names_orphans)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=16MiB", "GPUARENA_VMM_KEEP=0",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    char err[8192];
    int rc = pt_run_child(orphans_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "step %d; %s", rc, err);
    ck_assert_msg(strstr(err, TRUE_MSG "cuMemAlloc of 512 B failed"), "%s", err);
    ck_assert_msg(strstr(err, "gpuarena: 8 destroyed contexts on the device still hold "
                              "stream-ordered blocks (cuMemAllocAsync) the program never freed: "
                              "4.00 KiB in them keep 16.0 MiB mapped, counted against the cap, "
                              "and 256 MiB of address space reserved") &&
                  strstr(err, "free such blocks (cuMemFreeAsync or cuMemFree) before destroying "
                              "their context"), "%s", err);
}
END_TEST

/* The device is full before the cap (another process holds 40 MiB of a shared 64 MiB device, the
 * cap is 48 MiB): every mode says the device is full, as vmm did, not "raise GPUARENA_LIMIT"
 * (helper-47 F7). */
static void device_full_child(void *arg)
{
    pt_env((const char *)arg, "GPUARENA_LIMIT=48MiB", NULL);
    pt_start();
    CUdeviceptr p;
    for (int i = 0; i < 64; i++)
        if (cuMemAlloc(&p, 2 * MiB + 4096) != CUDA_SUCCESS)
            exit(0);
    exit(3); /* never refused: the other process's bytes were not seen */
}

START_TEST(device_full_before_cap_said)
{
    char shared[64];
    snprintf(shared, sizeof shared, "SIMCUDA_SHARED=dfull%d", (int)getpid());
    pt_env(shared, "SIMCUDA_TOTAL_MEM=64MiB", "GPUARENA_MODE=platform", NULL);
    int up[2];
    ck_assert_int_eq(pipe(up), 0);
    pid_t holder = fork();
    if (holder == 0) { /* another process, uncapped */
        CUdeviceptr p;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pt_start();
        char ok = cuMemAlloc(&p, 40 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
        pt_child_report_and_hold(up[1], ok);
    }
    char ok = pt_child_report_read(up[0]);
    const char *modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow", "GPUARENA_MODE=platform",
                           "GPUARENA_MODE=vmm"};
    char err[4][16384];
    int status[4];
    for (int m = 0; m < 4; m++)
        status[m] = pt_run_child(device_full_child, (void *)modes[m], err[m], sizeof err[m]);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -f /dev/shm/simcuda-dfull%d", (int)getpid());
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(ok, 'y');
    for (int m = 0; m < 4; m++) {
        ck_assert_msg(status[m] == 0, "%s: exit %d: %s", modes[m], status[m], err[m]);
        ck_assert_msg(strstr(err[m], "the device itself is full"), "%s: %s", modes[m], err[m]);
        ck_assert_msg(!strstr(err[m], "raise GPUARENA_LIMIT"), "%s: %s", modes[m], err[m]);
    }
}
END_TEST

/* The driver refuses every cuMemFree (a sticky error): the 200 MiB region of a freed block stays in
 * the pool, held against the 256 MiB cap. cuMemGetInfo counts its bytes as free, which they are to
 * the pool: a 200 MiB block is served from it without a driver call, and the rest of the figure,
 * 56 MiB, fits beside it. A 240 MiB block cannot: the region cannot be given back to make room.
 * That is a true out-of-memory that names the region, never fragmentation, whose hints (fraction,
 * preallocation, a larger cap) have nothing to do with it; before, it said "out of memory from
 * fragmentation ... although 256 MiB are free". */
static void refused_region_child(void *arg)
{
    pt_env((const char *)arg, NULL);
    pt_start();
    CUdeviceptr p, q;
    if (cuMemAlloc(&p, 200 * MiB) != CUDA_SUCCESS)
        exit(2);
    if (simcuda_fail_add("cuMemFree_v2:1+") != 0 || cuMemFree(p) != CUDA_SUCCESS ||
        cuCtxSynchronize() != CUDA_SUCCESS)
        exit(3);
    size_t free = 0, total = 0;
    if (cuMemGetInfo(&free, &total) != CUDA_SUCCESS || free != 256 * MiB || total != 256 * MiB)
        exit(4);
    if (cuMemAlloc(&q, 240 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(5);
    unsigned long long calls = pt_counters().alloc_calls;
    if (cuMemAlloc(&p, 200 * MiB) != CUDA_SUCCESS || pt_counters().alloc_calls != calls)
        exit(6); /* served from the kept region */
    if (cuMemAlloc(&q, free - 200 * MiB) != CUDA_SUCCESS)
        exit(7);
    if (simcuda_device_peak_all(0) > 256 * MiB)
        exit(8);
    exit(0);
}

START_TEST(refused_region_not_fragmentation)
{
    static const char *modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow"};
    for (int m = 0; m < 2; m++) {
        const char *env[] = {modes[m], "GPUARENA_LIMIT=256MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL};
        char err[16384];
        pt_oom_run(refused_region_child, env, err, sizeof err,
                   "d['totals']['frag_failures'] == 0 and d['totals']['true_oom_failures'] == 1");
        ck_assert_msg(!strstr(err, FRAG_MSG), "%s: not fragmentation: %s", modes[m], err);
        ck_assert_msg(strstr(err, TRUE_MSG "cuMemAlloc of 240 MiB failed on device 0"), "%s: %s",
                      modes[m], err);
        ck_assert_msg(strstr(err, "gpuarena: 200 MiB of it are empty regions the driver refused "
                                  "to free, the largest 200 MiB"), "%s: %s", modes[m], err);
    }
}
END_TEST

/* A block larger than the device with no cap below it (none set, 100%, a limit above the
 * device): the device is the bound, said as such; "raise GPUARENA_LIMIT" could not help
 * (helper-68 F4). With a cap below the device, the cap is named as before, and the block being
 * larger than the whole device is said instead of "raise GPUARENA_LIMIT", which could not help
 * (an outside check, 2026-12-07; every mode in t_outside3.c). */
static void pt_bigger_than_device_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p;
    if (cuMemAlloc(&p, 100 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(2);
    exit(0);
}

START_TEST(oom_bound_by_the_device)
{
    static const char *const envs[][2] = {{"GPUARENA_MODE=vmm", "GPUARENA_LOG=warn"},
                                          {"GPUARENA_MODE=arena", "GPUARENA_LIMIT=100%"},
                                          {"GPUARENA_MODE=grow", "GPUARENA_LIMIT=1TiB"},
                                          {"GPUARENA_MODE=platform", "GPUARENA_LIMIT=32MiB"}};
    char err[16384];
    pt_env("SIMCUDA_TOTAL_MEM=64MiB", envs[_i][0], envs[_i][1], NULL);
    int status = pt_run_child(pt_bigger_than_device_child, NULL, err, sizeof err);
    ck_assert_msg(status == 0, "exit %d: %s", status, err);
    if (_i < 3) {
        ck_assert_msg(strstr(err, "of the device's 64.0 MiB, no cap set below it (not enough free "
                                  "bytes in total: the device's own memory is the bound"),
                      "%s: %s", envs[_i][0], err);
        ck_assert_msg(!strstr(err, "raise GPUARENA_LIMIT"), "%s: %s", envs[_i][0], err);
    } else {
        ck_assert_msg(strstr(err, "of cap 32.0 MiB on the device (not enough free bytes in total: "
                                  "the block alone is larger than the device's whole memory, "
                                  "64.0 MiB, which no cap can change: use less)"), "%s", err);
        ck_assert_msg(!strstr(err, "raise GPUARENA_LIMIT"), "%s", err);
    }
}
END_TEST

/* The arena's preallocation refused by the device with no cap set (the context costs 300 MB here,
 * as a real one costs some): the warning names the device, not a cap to lower (helper-72 NEW-5). */
static void pt_prealloc_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p;
    exit(cuMemAlloc(&p, MiB) == CUDA_SUCCESS ? 0 : 2);
}

START_TEST(prealloc_refused_by_the_device)
{
    char err[4096];
    pt_env("GPUARENA_MODE=arena", "SIMCUDA_TOTAL_MEM=1GiB", "SIMCUDA_CONTEXT_OVERHEAD=300000000",
           NULL);
    int status = pt_run_child(pt_prealloc_child, NULL, err, sizeof err);
    ck_assert_msg(status == 0, "exit %d: %s", status, err);
    ck_assert_msg(strstr(err, "could not preallocate 805306368 bytes on device 0: the device has "
                              "less free"), "%s", err);
    ck_assert_msg(!strstr(err, "lower GPUARENA_MEM_FRACTION or GPUARENA_LIMIT"), "%s", err);
}
END_TEST

TCase *pt_tcase_oom(void)
{
    TCase *tc = tcase_create("oom");
    tcase_add_test(tc, prealloc_refused_by_the_device);
    tcase_add_loop_test(tc, oom_bound_by_the_device, 0, 4);
    tcase_add_test(tc, frag_diagnosed_once);
    tcase_add_test(tc, frag_counts_growth_room);
    tcase_add_test(tc, true_oom_one_line);
    tcase_add_test(tc, platform_never_fragmentation);
    tcase_add_test(tc, vmm_granules_explained);
    tcase_add_test(tc, vmm_fragmentation_said);
    tcase_add_test(tc, hard_share_explained);
    tcase_add_test(tc, silent_at_log_error);
    tcase_add_test(tc, vmm_oom_names_orphans);
    tcase_add_test(tc, passthrough_refused_for_the_arena);
    tcase_add_test(tc, passthrough_refused_by_the_cap_said);
    tcase_add_test(tc, device_full_before_cap_said);
    tcase_add_test(tc, refused_region_not_fragmentation);
    return tc;
}
