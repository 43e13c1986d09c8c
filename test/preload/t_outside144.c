/* An outside check of vmm mode's rule for a parked block that straddles, near the cap (914fdc5 and
 * 99068aa, 2026-12-07; helper-144), through the shim on the simulated driver. A parked block of
 * the general area that would hold a granule more than its size needs is placed as if freed once
 * the room under the cap is under the keep. The goal it serves: under a tight GPUARENA_LIMIT,
 * parking never makes a program fit fewer blocks than GPUARENA_VMM_KEEP=0 does. Each case runs its
 * child with the keep 0 first (the count to meet), then under other keeps, caps and
 * GPUARENA_FREE_SYNC settings, and asks for at least that count, the bytes read back and the
 * driver never mapping past the cap.
 */
#include "preload_test.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KiB 1024ull
#define O144_MAX 190 /* blocks a child counts up to (an exit status) */

/* A program's shape: `live` allocated and held, then `park` allocated and freed in order (twice
 * when rounds is 2, so that the second round's blocks are the parked ones taken back), then
 * blocks of `fill` until the cap refuses one. */
typedef struct {
    size_t live[3];
    size_t park[4];
    size_t fill;
    int rounds;
} o144_case_t;

static const o144_case_t o144_cases[] = {
    /* helper-135's case: 1.5 MiB after 7 MiB + 4 KiB lies across two granules */
    {{0}, {7 * MiB + 4 * KiB, 3 * MiB / 2}, 3 * MiB / 2, 1},
    {{0}, {7 * MiB + 4 * KiB, 3 * MiB / 2, 64 * KiB}, 3 * MiB / 2, 2},
    /* an odd size of 3+ granules after a class size: 7 MiB + 4 KiB across 5 granules */
    {{0}, {3 * MiB / 2, 7 * MiB + 4 * KiB}, 7 * MiB + 4 * KiB, 1},
    {{0}, {3 * MiB / 2, 6 * MiB + 4 * KiB}, 6 * MiB + 4 * KiB, 2},
    {{0}, {64 * KiB, 9 * MiB + 4 * KiB}, 9 * MiB + 4 * KiB, 1},
    /* class sizes placed after a small block or another class size */
    {{0}, {64 * KiB, 5 * MiB}, 5 * MiB, 1},
    {{0}, {3 * MiB / 2, 3 * MiB}, 3 * MiB, 1},
    {{0}, {1 * MiB + 4 * KiB, 1 * MiB + 4 * KiB}, 1 * MiB + 4 * KiB, 2},
    {{0}, {5 * MiB, 3 * MiB / 2}, 3 * MiB / 2, 1},
    /* a live block shifts what follows it */
    {{768 * KiB}, {3 * MiB / 2}, 3 * MiB / 2, 2},
    {{1 * MiB + 512 * KiB}, {7 * MiB + 4 * KiB}, 7 * MiB + 4 * KiB, 1},
    {{3 * MiB / 2, 64 * KiB}, {5 * MiB, 3 * MiB / 2}, 5 * MiB, 1},
    /* small blocks under a granule crossing a boundary (never parked: alone in a granule only) */
    {{0}, {768 * KiB, 768 * KiB, 768 * KiB}, 768 * KiB, 2},
    {{1 * MiB + 256 * KiB}, {900 * KiB}, 900 * KiB, 2},
};
#define O144_NCASES (sizeof o144_cases / sizeof o144_cases[0])

static unsigned char *o144_buf;

static int o144_reads(CUdeviceptr p, size_t n, unsigned char v)
{
    if (!o144_buf && !(o144_buf = malloc(16 * MiB)))
        return 0;
    for (size_t off = 0; off < n; off += 16 * MiB) {
        size_t len = n - off < 16 * MiB ? n - off : 16 * MiB;
        if (cuMemcpyDtoH(o144_buf, p + off, len) != CUDA_SUCCESS)
            return 0;
        for (size_t i = 0; i < len; i++)
            if (o144_buf[i] != v)
                return 0;
    }
    return 1;
}

/* Exits with the count of fill blocks (at most O144_MAX), or 200+ on a fault: 201 a live or
 * parked block refused, 202 bytes not read back, 203 the driver mapped past the cap, 204 a free
 * refused. arg: the case; GPUARENA_LIMIT's bytes in O144_CAP. */
static void o144_child(void *arg)
{
    const o144_case_t *k = arg;
    size_t cap = strtoull(getenv("O144_CAP"), NULL, 10);
    pt_start();
    CUdeviceptr live[3] = {0}, q[4], f[O144_MAX];
    for (int m = 0; m < 3; m++)
        if (k->live[m] && (cuMemAlloc(&live[m], k->live[m]) != CUDA_SUCCESS ||
                           cuMemsetD8(live[m], (unsigned char)(0xE0 + m), k->live[m]) !=
                               CUDA_SUCCESS))
            exit(201);
    for (int r = 0; r < k->rounds; r++) {
        for (int m = 0; m < 4; m++)
            if (k->park[m] && cuMemAlloc(&q[m], k->park[m]) != CUDA_SUCCESS)
                exit(201);
        for (int m = 0; m < 4; m++)
            if (k->park[m] && cuMemFree(q[m]) != CUDA_SUCCESS)
                exit(204);
    }
    size_t n = 0;
    while (n < O144_MAX && cuMemAlloc(&f[n], k->fill) == CUDA_SUCCESS) {
        if (cuMemsetD8(f[n], (unsigned char)(n + 1), k->fill) != CUDA_SUCCESS)
            exit(202);
        n++;
    }
    for (size_t m = 0; m < n; m++)
        if (!o144_reads(f[m], k->fill, (unsigned char)(m + 1)))
            exit(202);
    for (int m = 0; m < 3; m++)
        if (live[m] && !o144_reads(live[m], k->live[m], (unsigned char)(0xE0 + m)))
            exit(202);
    if (cuCtxSynchronize() != CUDA_SUCCESS || pt_counters().peak_vmm_mapped_bytes > cap)
        exit(203);
    for (size_t m = 0; m < n; m++)
        if (cuMemFree(f[m]) != CUDA_SUCCESS)
            exit(204);
    exit((int)n);
}

static int o144_run(const o144_case_t *k, size_t cap_mib, const char *keep, const char *sync,
                    char *err, size_t len)
{
    char limit[64], capb[64];
    snprintf(limit, sizeof limit, "GPUARENA_LIMIT=%zuMiB", cap_mib);
    snprintf(capb, sizeof capb, "O144_CAP=%llu", (unsigned long long)(cap_mib * MiB));
    unsetenv("GPUARENA_VMM_KEEP");
    pt_env("GPUARENA_MODE=vmm", limit, capb, sync, "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LOG=error",
           keep ? keep : "O144_DEFAULT_KEEP=1", NULL);
    return pt_run_child(o144_child, (void *)k, err, len);
}

/* The runs (case, cap, keep) where a keep still fits a block fewer than the keep 0, under either
 * GPUARENA_FREE_SYNC setting (found 2026-12-07, helper-144; each fits as many or fewer on
 * 198349c, before the rule, so none is new). Since 2026-12-07 (helper-147) kept granules count
 * as new where a block's area is chosen while the room under the cap is at most the keep
 * (allocator/vmm_cover.h, fresh_in), which met cases 0 and 1 under 32 MiB with the default and
 * 64 MiB keeps, case 7 with those under every cap and case 8 with 4 MiB under 8 MiB. Left, each
 * decided while the room was still over the keep (test_outside144.c's o144_pending says why it
 * stays so, with a counted example): the keep's kept granules steer a class size into the
 * general area, alone in its granule where the class packs them:
 * - case 7 (1 MiB + 4 KiB, freed and taken back) with the 2 MiB keep under every cap, with 4 MiB
 *   from 12 MiB up: one block fewer (under 12 MiB with 4 MiB: 10 where 11 fit);
 * - cases 0, 1 and 8 (1.5 MiB) under 32 MiB with the 4 MiB keep: 20 blocks where 21 fit. */
static int o144_pending(size_t i, size_t cap_mib, const char *keep)
{
    int k2 = keep && !strcmp(keep, "GPUARENA_VMM_KEEP=2MiB");
    int k4 = keep && !strcmp(keep, "GPUARENA_VMM_KEEP=4MiB");
    if (i == 7)
        return k2 || (k4 && cap_mib >= 12);
    return k4 && (i <= 1 || i == 8) && cap_mib == 32;
}

/* The keeps compared with 0: the default (64 MiB), small ones that parked blocks fill, and 64 MiB
 * spelt out. */
static const char *const o144_keeps[] = {NULL, "GPUARENA_VMM_KEEP=2MiB", "GPUARENA_VMM_KEEP=4MiB",
                                         "GPUARENA_VMM_KEEP=64MiB"};

/* 1. Every case under caps from 8 to 64 MiB and two GPUARENA_FREE_SYNC settings (lazy: where
 * ga_pool_fits decides whether the pending frees are waited for): each keep fits at least the
 * blocks the keep 0 fits, with the bytes intact and the driver's mapped bytes within the cap. */
START_TEST(o144_keep_never_fits_fewer)
{
    static const size_t caps[] = {8, 12, 16, 24, 32, 64};
    static const char *const syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy"};
    char err[4096];
    for (size_t i = 0; i < O144_NCASES; i++)
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++)
            for (size_t s = 0; s < 2; s++) {
                const o144_case_t *k = &o144_cases[i];
                int n0 = o144_run(k, caps[c], "GPUARENA_VMM_KEEP=0", syncs[s], err, sizeof err);
                if (n0 == 201)
                    continue; /* the case's own blocks do not fit the cap */
                ck_assert_msg(n0 < 200, "case %zu, cap %zu MiB, %s, keep 0: exit %d %s", i,
                              caps[c], syncs[s], n0, err);
                for (size_t j = 0; j < sizeof o144_keeps / sizeof o144_keeps[0]; j++) {
                    int n = o144_run(k, caps[c], o144_keeps[j], syncs[s], err, sizeof err);
                    ck_assert_msg(n < 200, "case %zu, cap %zu MiB, %s, %s: exit %d (a fault, "
                                  "see o144_child) %s", i, caps[c], syncs[s],
                                  o144_keeps[j] ? o144_keeps[j] : "default keep", n, err);
                    ck_assert_msg(n >= n0 || (o144_pending(i, caps[c], o144_keeps[j]) &&
                                              n == n0 - 1),
                                  "case %zu (fill %zu bytes), cap %zu MiB, %s, %s: %d blocks "
                                  "(keep 0: %d) %s",
                                  i, k->fill, caps[c], syncs[s],
                                  o144_keeps[j] ? o144_keeps[j] : "default keep", n, n0, err);
                }
            }
}
END_TEST

/* 2. Far from the cap the straddling block is taken back where it lies (no change there), near it
 * it is placed afresh; and helper-135's case (a 1.5 MiB block after a 7 MiB + 4 KiB one, both
 * parked, then 1.5 MiB blocks until refused) under caps well above the keep: the test for "near"
 * is made when the block is taken back, so a straddling block taken back while the room is over
 * the keep stays live across its extra granule until the program reaches the cap: under 128 MiB
 * with the default keep 83 blocks fit where 85 do with the keep 0 (96 MiB: 62 against 63; the
 * same on 198349c). Left so on purpose (helper-147): through the shim the cap is the pool's
 * limit whether GPUARENA_LIMIT is set or not, so judging every take-back would cost every
 * program's (two class sizes taking turns: 338 -> 488 instructions a pair at the pool) and
 * change its placement away from the replay's with no limit. Asked: at most two fewer. */
static void o144_takeback_child(void *arg)
{
    size_t cap = (size_t)(uintptr_t)arg;
    pt_start();
    CUdeviceptr a, b, c;
    if (cuMemAlloc(&a, 7 * MiB + 4 * KiB) != CUDA_SUCCESS ||
        cuMemAlloc(&b, 3 * MiB / 2) != CUDA_SUCCESS || cuMemFree(a) != CUDA_SUCCESS ||
        cuMemFree(b) != CUDA_SUCCESS || cuMemAlloc(&c, 3 * MiB / 2) != CUDA_SUCCESS)
        exit(2);
    exit(cap > 256 * MiB ? (c == b ? 0 : 3) : (c != b ? 0 : 4));
}

START_TEST(o144_straddler_taken_back_far_from_the_cap)
{
    char err[4096];
    static const size_t caps[] = {16, 1024};
    for (size_t i = 0; i < 2; i++) {
        char limit[64];
        snprintf(limit, sizeof limit, "GPUARENA_LIMIT=%zuMiB", caps[i]);
        unsetenv("GPUARENA_VMM_KEEP");
        pt_env("GPUARENA_MODE=vmm", limit, "SIMCUDA_TOTAL_MEM=2GiB", "GPUARENA_LOG=error", NULL);
        int rc = pt_run_child(o144_takeback_child, (void *)(uintptr_t)(caps[i] * MiB), err,
                              sizeof err);
        ck_assert_msg(rc == 0, "cap %zu MiB: exit %d (3: not taken back where it lay far from "
                      "the cap; 4: taken back near it) %s", caps[i], rc, err);
    }
    static const size_t far[] = {96, 128};
    for (size_t i = 0; i < 2; i++) {
        int n0 = o144_run(&o144_cases[0], far[i], "GPUARENA_VMM_KEEP=0",
                          "GPUARENA_FREE_SYNC=deferred", err, sizeof err);
        int n = o144_run(&o144_cases[0], far[i], NULL, "GPUARENA_FREE_SYNC=deferred", err,
                         sizeof err);
        ck_assert_msg(n0 < 200 && n < 200 && n >= n0 - 2, "cap %zu MiB, default keep: %d "
                      "blocks of 1.5 MiB (keep 0: %d) %s", far[i], n, n0, err);
    }
}
END_TEST

/* 3. Threads: four threads each allocate a straddling shape (a block of their own size, then
 * 1.5 MiB after it), free both and allocate 1.5 MiB again, 150 times, under a 32 MiB cap that
 * their blocks together nearly fill, so that the rule's near-the-cap path and the take-back both
 * run while the others allocate: every block's bytes stay its own, the driver never maps past the
 * cap, and with everything freed the driver maps at most the keep. arg: the keep in bytes. */
static CUcontext o144_ctx;

static void *o144_thread(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    size_t own = 5 * MiB + (t + 1) * 64 * KiB;
    unsigned char *buf = malloc(own);
    if (!buf || cuCtxSetCurrent(o144_ctx) != CUDA_SUCCESS)
        return (void *)1;
    for (int i = 0; i < 150; i++) {
        CUdeviceptr a, b, c;
        unsigned char v = (unsigned char)(16 * t + (unsigned)i % 16 + 1);
        if (cuMemAlloc(&a, own) != CUDA_SUCCESS)
            continue; /* the cap: the others hold it now */
        if (cuMemAlloc(&b, 3 * MiB / 2) != CUDA_SUCCESS) {
            cuMemFree(a);
            continue;
        }
        if (cuMemsetD8(a, v, own) != CUDA_SUCCESS || cuMemsetD8(b, v, 3 * MiB / 2) != CUDA_SUCCESS ||
            cuMemFree(a) != CUDA_SUCCESS || cuMemFree(b) != CUDA_SUCCESS)
            return (void *)2;
        if (cuMemAlloc(&c, 3 * MiB / 2) != CUDA_SUCCESS)
            continue;
        if (cuMemsetD8(c, (unsigned char)(v ^ 0x80), 3 * MiB / 2) != CUDA_SUCCESS ||
            cuCtxSynchronize() != CUDA_SUCCESS ||
            cuMemcpyDtoH(buf, c, 3 * MiB / 2) != CUDA_SUCCESS)
            return (void *)2;
        for (size_t j = 0; j < 3 * MiB / 2; j++)
            if (buf[j] != (unsigned char)(v ^ 0x80))
                return (void *)3;
        if (cuMemFree(c) != CUDA_SUCCESS)
            return (void *)2;
    }
    free(buf);
    return NULL;
}

static void o144_threads_child(void *arg)
{
    size_t keep = (size_t)(uintptr_t)arg;
    o144_ctx = pt_start();
    pthread_t th[4];
    for (uintptr_t t = 0; t < 4; t++)
        if (pthread_create(&th[t], NULL, o144_thread, (void *)t) != 0)
            exit(9);
    int rc = 0;
    for (int t = 0; t < 4; t++) {
        void *r;
        pthread_join(th[t], &r);
        if (r && !rc)
            rc = (int)(uintptr_t)r;
    }
    if (rc)
        exit(10 + rc);
    if (cuCtxSynchronize() != CUDA_SUCCESS || pt_counters().peak_vmm_mapped_bytes > 32 * MiB)
        exit(20);
    if (pt_counters().vmm_mapped_bytes > keep)
        exit(21);
    exit(0);
}

START_TEST(o144_threads_near_the_cap)
{
    static const char *const keeps[] = {"GPUARENA_VMM_KEEP=64MiB", "GPUARENA_VMM_KEEP=0",
                                        "GPUARENA_VMM_KEEP=4MiB"};
    static const size_t bytes[] = {64 * MiB, 0, 4 * MiB};
    static const char *const syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy"};
    char err[4096];
    for (size_t i = 0; i < 3; i++)
        for (size_t s = 0; s < 2; s++) {
            pt_env("GPUARENA_MODE=vmm", keeps[i], syncs[s], "GPUARENA_LIMIT=32MiB",
                   "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LOG=error", NULL);
            int rc = pt_run_child(o144_threads_child, (void *)(uintptr_t)bytes[i], err, sizeof err);
            ck_assert_msg(rc == 0, "%s, %s: exit %d (11/12 a call refused, 13 bytes not its own, "
                          "20 the driver mapped past the cap, 21 more than the keep left mapped) %s",
                          keeps[i], syncs[s], rc, err);
        }
}
END_TEST

TCase *pt_tcase_outside144(void)
{
    TCase *tc = tcase_create("outside144");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, o144_keep_never_fits_fewer);
    tcase_add_test(tc, o144_straddler_taken_back_far_from_the_cap);
    tcase_add_test(tc, o144_threads_near_the_cap);
    return tc;
}
