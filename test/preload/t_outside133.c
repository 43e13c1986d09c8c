/* An outside check of vmm mode's parked blocks (2026-12-07, helper-133), through the shim on the
 * simulated driver. A freed block of a class (half a granule up to 3 granules, seen twice while
 * live) or a granule multiple is held where it lies for the next allocation of its size; an
 * allocation that maps first gives every parked block back; GPUARENA_VMM_KEEP=0 parks nothing.
 * Every test runs its child with the default keep (parking) and with GPUARENA_VMM_KEEP=0 and asks
 * the same answers of both: parking is a placement choice, never something a program can see in
 * its answers, its bytes or the figures it reads. Sizes: 2 MiB and 4 MiB (granule multiples),
 * 1.5 MiB and 3 MiB (classes), each allocated twice while live so that it is a class. */
#include "preload_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const size_t o133_sizes[] = {2 * MiB, 4 * MiB, 3 * MiB / 2, 3 * MiB};
#define O133_NSIZES (sizeof o133_sizes / sizeof o133_sizes[0])

static const char *const o133_keeps[] = {"GPUARENA_VMM_KEEP=64MiB", "GPUARENA_VMM_KEEP=0"};

static unsigned char o133_buf[4 * MiB];

/* Exit code e unless every byte of [p, p+n) reads back as v. */
static void o133_expect(CUdeviceptr p, size_t n, unsigned char v, int e)
{
    if (cuMemcpyDtoH(o133_buf, p, n) != CUDA_SUCCESS)
        exit(e);
    for (size_t i = 0; i < n; i++)
        if (o133_buf[i] != v)
            exit(e);
}

static int o133_overlap(CUdeviceptr a, size_t an, CUdeviceptr b, size_t bn)
{
    return a < b + bn && b < a + an;
}

/* 1. Frees and queries of parked blocks: a second free, an interior free, the range and the
 * attributes of a freed pointer and of an interior one answer as with nothing parked; a block
 * taken back aliases no live one; a block freed twice is handed out once. */
static void o133_frees_child(void *arg)
{
    (void)arg;
    pt_start();
    for (size_t k = 0; k < O133_NSIZES; k++) {
        size_t s = o133_sizes[k];
        int e = 10 * (int)(k + 1);
        CUdeviceptr a, b, c, d, f;
        if (cuMemAlloc(&a, s) != CUDA_SUCCESS || cuMemAlloc(&b, s) != CUDA_SUCCESS)
            exit(e + 1);
        if (cuMemsetD8(a, 0xA1, s) != CUDA_SUCCESS || cuMemsetD8(b, 0xB2, s) != CUDA_SUCCESS)
            exit(e + 1);
        if (cuMemFree(a) != CUDA_SUCCESS)
            exit(e + 2);
        /* a is parked (default keep) or gone: every answer below is about a freed pointer. */
        if (cuMemFree(a) != CUDA_ERROR_INVALID_VALUE)
            exit(e + 3);
        if (cuMemFree(a + 4096) != CUDA_ERROR_INVALID_VALUE)
            exit(e + 4);
        if (cuMemFree(b + 4096) != CUDA_ERROR_INVALID_VALUE)
            exit(e + 4);
        CUdeviceptr base = 0;
        size_t size = 0;
        /* A freed pointer, parked or not, and an interior one: no range, no attribute of a live
         * block (the answers of a block given back to the driver). */
        if (cuMemGetAddressRange(&base, &size, a) != CUDA_ERROR_NOT_FOUND ||
            cuMemGetAddressRange(&base, &size, a + 4096) != CUDA_ERROR_NOT_FOUND)
            exit(e + 5);
        unsigned long long asz = 0;
        if (cuPointerGetAttribute(&asz, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 4096) !=
            CUDA_ERROR_INVALID_VALUE)
            exit(e + 5);
        CUpointer_attribute at[3] = {CU_POINTER_ATTRIBUTE_CONTEXT,
                                     CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                     CU_POINTER_ATTRIBUTE_MAPPED};
        CUcontext actx = (CUcontext)1;
        unsigned long long astart = 1;
        int amapped = 1;
        void *avals[3] = {&actx, &astart, &amapped};
        if (cuPointerGetAttributes(3, at, avals, a) != CUDA_SUCCESS || actx != NULL ||
            astart != 0 || amapped != 0)
            exit(e + 5);
        if (cuMemGetAddressRange(&base, &size, b + s - 1) != CUDA_SUCCESS || base != b || size != s)
            exit(e + 6);
        unsigned long long rs = 0;
        if (cuPointerGetAttribute(&rs, CU_POINTER_ATTRIBUTE_RANGE_SIZE, b + 512) != CUDA_SUCCESS ||
            rs != s)
            exit(e + 6);
        /* Taken back: c is a's size and must not overlap b, whose bytes stay b's. */
        if (cuMemAlloc(&c, s) != CUDA_SUCCESS || o133_overlap(c, s, b, s))
            exit(e + 7);
        if (cuMemsetD8(c, 0xC3, s) != CUDA_SUCCESS)
            exit(e + 7);
        o133_expect(b, s, 0xB2, e + 8);
        o133_expect(c, s, 0xC3, e + 8);
        /* c freed twice, then two allocations of its size: two blocks, never one twice. */
        if (cuMemFree(c) != CUDA_SUCCESS || cuMemFree(c) != CUDA_ERROR_INVALID_VALUE)
            exit(e + 9);
        if (cuMemAlloc(&d, s) != CUDA_SUCCESS || cuMemAlloc(&f, s) != CUDA_SUCCESS)
            exit(e + 9);
        if (o133_overlap(d, s, f, s) || o133_overlap(d, s, b, s) || o133_overlap(f, s, b, s))
            exit(e + 9);
        cuMemsetD8(d, 0xD4, s);
        cuMemsetD8(f, 0xF5, s);
        o133_expect(b, s, 0xB2, e + 8);
        o133_expect(d, s, 0xD4, e + 8);
        o133_expect(f, s, 0xF5, e + 8);
        if (cuMemFree(b) != CUDA_SUCCESS || cuMemFree(d) != CUDA_SUCCESS ||
            cuMemFree(f) != CUDA_SUCCESS)
            exit(e + 2);
    }
    /* Everything freed: nothing is live to the driver's VA queries, none in use to the shim. */
    exit(0);
}

START_TEST(parked_frees_and_queries)
{
    char err[8192];
    for (size_t i = 0; i < 2; i++) {
        pt_env("GPUARENA_MODE=vmm", o133_keeps[i], "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB",
               "GPUARENA_LOG=error", NULL);
        int rc = pt_run_child(o133_frees_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (tens: the size; +3 a second free, +4 an interior "
                      "free, +5/+6 ranges, +7/+8 a block taken back over a live one, +9 a block "
                      "freed twice handed out twice) %s", o133_keeps[i], rc, err);
    }
}
END_TEST

/* 2. The cap: every granule of an 8 MiB cap under parked blocks; an allocation that fits only
 * once they are given back succeeds, and the driver never maps past the cap. cuMemGetInfo's free
 * figure and the statistics are those of the run that parks nothing. */
static void o133_cap_child(void *arg)
{
    const char *stats = arg;
    pt_start();
    size_t fr = 0, tot = 0;
    for (int round = 0; round < 3; round++) {
        for (size_t k = 0; k < O133_NSIZES; k++) {
            size_t s = o133_sizes[k];
            int e = 10 * (int)(k + 1);
            CUdeviceptr p[8];
            size_t n = 0;
            /* As many of size s as the cap holds (at least two: each size is a class). */
            while (n < 8 && cuMemAlloc(&p[n], s) == CUDA_SUCCESS)
                n++;
            if (n < 2)
                exit(e + 1);
            for (size_t i = 0; i < n; i++)
                cuMemsetD8(p[i], (unsigned char)(i + 1), s);
            for (size_t i = 0; i < n; i++)
                o133_expect(p[i], s, (unsigned char)(i + 1), e + 2);
            for (size_t i = 0; i < n; i++)
                if (cuMemFree(p[i]) != CUDA_SUCCESS)
                    exit(e + 3);
            /* Nothing live: pending frees count by the whole granules they free for certain;
             * after the program's synchronisation, with blocks parked or not, the whole cap. */
            if (cuMemGetInfo(&fr, &tot) != CUDA_SUCCESS || tot != 8 * MiB || fr > 8 * MiB ||
                fr % (2 * MiB) != 0)
                exit(e + 4);
            if (cuCtxSynchronize() != CUDA_SUCCESS || cuMemGetInfo(&fr, &tot) != CUDA_SUCCESS ||
                fr != 8 * MiB)
                exit(e + 4);
            /* The whole cap as one block: every parked block must go back first. */
            CUdeviceptr w;
            if (cuMemAlloc(&w, 8 * MiB) != CUDA_SUCCESS)
                exit(e + 5);
            if (cuMemsetD8(w, 0x77, 8 * MiB) != CUDA_SUCCESS)
                exit(e + 5);
            if (cuMemFree(w) != CUDA_SUCCESS)
                exit(e + 3);
            simcuda_counters_t c = pt_counters();
            if (c.peak_vmm_mapped_bytes > 8 * MiB || c.peak_vmm_bytes_in_use > 8 * MiB)
                exit(e + 6);
        }
    }
    simcuda_counters_t c = pt_counters();
    if (c.stream_faults != 0)
        exit(7);
    (void)stats;
    exit(0);
}

START_TEST(parked_blocks_under_the_cap)
{
    char err[8192], stats[2][128];
    for (size_t i = 0; i < 2; i++) {
        snprintf(stats[i], sizeof stats[i], "/tmp/gpuarena-o133-%d-%zu.json", (int)getpid(), i);
        char env[160];
        snprintf(env, sizeof env, "GPUARENA_STATS=%s", stats[i]);
        pt_env("GPUARENA_MODE=vmm", o133_keeps[i], "GPUARENA_LIMIT=8MiB", "SIMCUDA_TOTAL_MEM=1GiB",
               "GPUARENA_LOG=error", env, NULL);
        int rc = pt_run_child(o133_cap_child, stats[i], err, sizeof err);
        unsetenv("GPUARENA_STATS");
        ck_assert_msg(rc == 0, "%s: exit %d (tens: the size; +1 under two blocks fit, +2 bytes, "
                      "+4 cuMemGetInfo's free figure, +5 the whole cap refused, +6 the driver "
                      "mapped past the cap) %s", o133_keeps[i], rc, err);
    }
    /* The figures a program's statistics give: the same counts with and without parking. */
    /* (the last free is still pending at exit, GPUARENA_FREE_SYNC=deferred: live 1, in use 0) */
    const char *expr = "d['totals']['in_use']==0 and d['totals']['live']==1 and "
                       "d['totals']['allocs']==d['totals']['frees']+1 and "
                       "d['totals']['peak_reserved']<=8*1024*1024";
    for (size_t i = 0; i < 2; i++)
        ck_assert_msg(pt_json_check(stats[i], expr) == 0, "%s: statistics %s", o133_keeps[i],
                      stats[i]);
    char same[400];
    snprintf(same, sizeof same, "(lambda o: all(d['totals'][k]==o['totals'][k] for k in "
             "('allocs','frees','live','in_use','peak_in_use')))"
             "(__import__('json').load(open('%s')))",
             stats[1]);
    ck_assert_msg(pt_json_check(stats[0], same) == 0, "parking changed the counts: %s %s",
                  stats[0], stats[1]);
    unlink(stats[0]);
    unlink(stats[1]);
}
END_TEST

/* 3. Stream-ordered frees: a block freed while a slow kernel on a non-blocking stream still
 * writes it (cuMemFree, or cuMemFreeAsync on that stream) is not handed to the next allocation of
 * its size until the kernel ran, in every GPUARENA_FREE_SYNC setting that promises it; and a
 * parked block given back to make room (the cap) is never unmapped under queued work (the driver
 * counts such work as a stream fault). arg: 0 cuMemFree, 1 cuMemFreeAsync; 2/3: the same, then
 * the whole cap, which gives parked blocks back; 4-7: the same, the next block taken with
 * cuMemAllocAsync on a second non-blocking stream. */
static void o133_stream_child(void *arg)
{
    int how = (int)(intptr_t)arg;
    pt_start();
    CUstream s, s2;
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        exit(2);
    for (size_t k = 0; k < O133_NSIZES; k++) {
        size_t sz = o133_sizes[k];
        int e = 10 * (int)(k + 1);
        CUdeviceptr a, b, c;
        if (cuMemAlloc(&a, sz) != CUDA_SUCCESS || cuMemAlloc(&b, sz) != CUDA_SUCCESS)
            exit(e + 1);
        if (cuMemsetD8(a, 0, sz) != CUDA_SUCCESS)
            exit(e + 1);
        /* A kernel that writes a, 50 ms late. */
        if (simcuda_launch((struct CUstream_st *)s, a, 0xEE, sz, 50000) != CUDA_SUCCESS)
            exit(e + 2);
        CUresult r = (how & 1) ? cuMemFreeAsync(a, s) : cuMemFree(a);
        if (r != CUDA_SUCCESS)
            exit(e + 3);
        if ((how & 2) && sz % (2 * MiB) == 0) {
            /* b and the rest of the cap: it fits only once a is given back. */
            CUdeviceptr w;
            if (cuMemAlloc(&w, 16 * MiB - sz) != CUDA_SUCCESS)
                exit(e + 4);
            if (cuMemFree(w) != CUDA_SUCCESS)
                exit(e + 4);
        }
        if (how & 4) {
            /* Stream-ordered, on a second stream that nothing orders after the free. */
            if (cuMemAllocAsync(&c, sz, s2) != CUDA_SUCCESS)
                exit(e + 5);
            if (cuMemsetD8Async(c, 0x11, sz, s2) != CUDA_SUCCESS)
                exit(e + 5);
        } else {
            if (cuMemAlloc(&c, sz) != CUDA_SUCCESS)
                exit(e + 5);
            if (cuMemsetD8(c, 0x11, sz) != CUDA_SUCCESS)
                exit(e + 5);
        }
        if (cuCtxSynchronize() != CUDA_SUCCESS)
            exit(e + 6);
        o133_expect(c, sz, 0x11, e + 7); /* 0xEE: the kernel wrote the block handed out again */
        if (cuMemFree(b) != CUDA_SUCCESS || cuMemFree(c) != CUDA_SUCCESS)
            exit(e + 8);
    }
    if (cuCtxSynchronize() != CUDA_SUCCESS)
        exit(3);
    if (pt_counters().stream_faults != 0)
        exit(4); /* queued work found its memory unmapped */
    exit(0);
}

START_TEST(parked_blocks_and_streams)
{
    static const char *const syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy",
                                        "GPUARENA_FREE_SYNC=device"};
    char err[8192];
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < sizeof syncs / sizeof syncs[0]; j++)
            for (intptr_t how = 0; how < 8; how++) {
                pt_env("GPUARENA_MODE=vmm", o133_keeps[i], syncs[j], "GPUARENA_LIMIT=16MiB",
                       "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LOG=error", NULL);
                int rc = pt_run_child(o133_stream_child, (void *)how, err, sizeof err);
                ck_assert_msg(rc == 0, "%s %s, %s%s%s: exit %d (tens: the size; +7 the kernel "
                              "wrote a block handed out again; 4: queued work found its memory "
                              "unmapped) %s", o133_keeps[i], syncs[j],
                              (how & 1) ? "cuMemFreeAsync" : "cuMemFree",
                              (how & 2) ? ", then the whole cap" : "",
                              (how & 4) ? ", cuMemAllocAsync" : "", rc, err);
            }
}
END_TEST

/* 4. A context reset with parked blocks: the driver's mapped bytes go to zero, a pointer from
 * before is refused, and the next context serves every size again. */
static void o133_reset_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p[O133_NSIZES][2];
    for (size_t k = 0; k < O133_NSIZES; k++) {
        if (cuMemAlloc(&p[k][0], o133_sizes[k]) != CUDA_SUCCESS ||
            cuMemAlloc(&p[k][1], o133_sizes[k]) != CUDA_SUCCESS)
            exit(2);
        if (cuMemFree(p[k][0]) != CUDA_SUCCESS)
            exit(3);
    }
    if (cuDevicePrimaryCtxReset(0) != CUDA_SUCCESS)
        exit(4);
    simcuda_counters_t c = pt_counters();
    if (c.vmm_mapped_bytes != 0 || c.vmm_bytes_in_use != 0)
        exit(5);
    pt_start();
    for (size_t k = 0; k < O133_NSIZES; k++) {
        if (cuMemFree(p[k][0]) == CUDA_SUCCESS || cuMemFree(p[k][1]) == CUDA_SUCCESS)
            exit(6);
        CUdeviceptr q, r;
        if (cuMemAlloc(&q, o133_sizes[k]) != CUDA_SUCCESS ||
            cuMemAlloc(&r, o133_sizes[k]) != CUDA_SUCCESS)
            exit(7);
        cuMemsetD8(q, 0x5A, o133_sizes[k]);
        cuMemsetD8(r, 0xA5, o133_sizes[k]);
        o133_expect(q, o133_sizes[k], 0x5A, 8);
        o133_expect(r, o133_sizes[k], 0xA5, 8);
        if (cuMemFree(q) != CUDA_SUCCESS || cuMemFree(r) != CUDA_SUCCESS)
            exit(9);
    }
    exit(0);
}

START_TEST(parked_blocks_context_reset)
{
    char err[8192];
    for (size_t i = 0; i < 2; i++) {
        pt_env("GPUARENA_MODE=vmm", o133_keeps[i], "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB",
               "GPUARENA_LOG=error", NULL);
        int rc = pt_run_child(o133_reset_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (5: memory still mapped after the reset; 6: a pointer "
                      "from before freed; 7-9: the next context) %s", o133_keeps[i], rc, err);
    }
}
END_TEST

/* 5. cuMemGetInfo while frees are pending (GPUARENA_FREE_SYNC=deferred, the default): five
 * 1.5 MiB blocks under an 8 MiB cap, the last four end to end over 3 granules (the first, seen
 * once, lies in the general area); all freed, nothing is live and their return frees every
 * granule, yet no granule lies inside any one of them. Before: 0 bytes free of 8 MiB until the
 * next allocation or synchronisation, parking or not; now the 3 granules they tile at least. */
static void o133_tiled_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p[8];
    size_t n = 0, fr = 0, tot = 0;
    while (n < 8 && cuMemAlloc(&p[n], 3 * MiB / 2) == CUDA_SUCCESS)
        n++;
    if (n != 5)
        exit(2);
    for (size_t i = 0; i < n; i++)
        if (cuMemFree(p[i]) != CUDA_SUCCESS)
            exit(3);
    if (cuMemGetInfo(&fr, &tot) != CUDA_SUCCESS || tot != 8 * MiB)
        exit(4);
    if (fr < 6 * MiB || fr > 8 * MiB)
        exit(5);
    CUdeviceptr w; /* the figure holds: all of it is allocated */
    if (cuMemAlloc(&w, fr) != CUDA_SUCCESS || cuMemFree(w) != CUDA_SUCCESS)
        exit(6);
    exit(0);
}

START_TEST(pending_frees_end_to_end_counted_free)
{
    char err[8192];
    for (size_t i = 0; i < 2; i++) {
        pt_env("GPUARENA_MODE=vmm", o133_keeps[i], "GPUARENA_LIMIT=8MiB", "SIMCUDA_TOTAL_MEM=1GiB",
               "GPUARENA_FREE_SYNC=deferred", "GPUARENA_LOG=error", NULL);
        int rc = pt_run_child(o133_tiled_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (5: cuMemGetInfo's free figure, 0 before) %s",
                      o133_keeps[i], rc, err);
    }
}
END_TEST

/* 6. Threads: four threads churn pairs of the parking sizes at once under a cap that holds
 * them, each block stamped with its thread and step and read back before its free: a block taken
 * back by one thread never lies under another's live block. */
#define O133_THREADS 4
static CUcontext o133_ctx;
static _Atomic int o133_bad;

static void *o133_churn(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg, seed = 133u + t;
    static unsigned char bufs[O133_THREADS][4 * MiB];
    unsigned char *buf = bufs[t];
    if (cuCtxSetCurrent(o133_ctx) != CUDA_SUCCESS)
        atomic_fetch_add(&o133_bad, 1000);
    CUdeviceptr p[4] = {0};
    size_t sz[4] = {0};
    unsigned char tag[4] = {0};
    for (int i = 0; i < 400; i++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % 4);
        if (p[k]) {
            if (cuMemcpyDtoH(buf, p[k], sz[k]) != CUDA_SUCCESS)
                atomic_fetch_add(&o133_bad, 1);
            else
                for (size_t j = 0; j < sz[k]; j += 4093)
                    if (buf[j] != tag[k]) {
                        atomic_fetch_add(&o133_bad, 1);
                        break;
                    }
            if (cuMemFree(p[k]) != CUDA_SUCCESS)
                atomic_fetch_add(&o133_bad, 1);
            p[k] = 0;
        } else {
            sz[k] = o133_sizes[(seed >> 16) % O133_NSIZES];
            if (cuMemAlloc(&p[k], sz[k]) != CUDA_SUCCESS) {
                atomic_fetch_add(&o133_bad, 100);
                p[k] = 0;
                continue;
            }
            tag[k] = (unsigned char)(t * 64 + (unsigned)i % 61 + 1);
            if (cuMemsetD8(p[k], tag[k], sz[k]) != CUDA_SUCCESS)
                atomic_fetch_add(&o133_bad, 1);
        }
    }
    for (int k = 0; k < 4; k++)
        if (p[k] && cuMemFree(p[k]) != CUDA_SUCCESS)
            atomic_fetch_add(&o133_bad, 1);
    return NULL;
}

static void o133_threads_child(void *arg)
{
    (void)arg;
    o133_ctx = pt_start();
    pthread_t th[O133_THREADS];
    for (uintptr_t i = 0; i < O133_THREADS; i++)
        if (pthread_create(&th[i], NULL, o133_churn, (void *)i) != 0)
            exit(2);
    for (int i = 0; i < O133_THREADS; i++)
        pthread_join(th[i], NULL);
    int bad = atomic_load(&o133_bad);
    if (bad)
        exit(bad >= 1000 ? 3 : bad >= 100 ? 4 : 5);
    if (cuCtxSynchronize() != CUDA_SUCCESS)
        exit(6);
    simcuda_counters_t c = pt_counters();
    if (c.peak_vmm_mapped_bytes > 96 * MiB)
        exit(7);
    exit(0);
}

START_TEST(parked_blocks_threads)
{
    char err[8192];
    for (size_t i = 0; i < 2; i++) {
        /* 4 threads x 4 blocks of at most 4 MiB: 64 MiB live at most, 96 MiB of cap */
        pt_env("GPUARENA_MODE=vmm", o133_keeps[i], "GPUARENA_LIMIT=96MiB", "SIMCUDA_TOTAL_MEM=1GiB",
               "GPUARENA_LOG=error", NULL);
        int rc = pt_run_child(o133_threads_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (4: an allocation refused; 5: a block's bytes not its "
                      "own, or a free refused; 7: the driver mapped past the cap) %s",
                      o133_keeps[i], rc, err);
    }
}
END_TEST

TCase *pt_tcase_outside133(void)
{
    TCase *tc = tcase_create("outside133");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, parked_frees_and_queries);
    tcase_add_test(tc, parked_blocks_under_the_cap);
    tcase_add_test(tc, parked_blocks_and_streams);
    tcase_add_test(tc, parked_blocks_context_reset);
    tcase_add_test(tc, pending_frees_end_to_end_counted_free);
    tcase_add_test(tc, parked_blocks_threads);
    return tc;
}
