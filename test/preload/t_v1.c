/* Preload tests: the v1 entry points (the CUDA 3.1 ABI: 32-bit pointers and sizes), which the
 * driver still exports beside the _v2 ones and which cuGetProcAddress answers below version 3020.
 * Each path a program can take to them (direct binding, dlsym on the driver, cuGetProcAddress at
 * version 2000) must reach the shim: an allocation beyond the cap refused before the driver sees it
 * (the simulated driver's peak and its v1 call count are the witnesses), cuMemGetInfo showing the
 * cap, frees (v1 or _v2) giving the bytes back, NULL out-parameters refused. Before these were
 * hooked, each path got the driver's own function: uncounted, past the cap, the device's view.
 */
#include "preload_test.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*v1_alloc_fn)(unsigned *, unsigned);
typedef CUresult (*v1_pitch_fn)(unsigned *, unsigned *, unsigned, unsigned, unsigned);
typedef CUresult (*v1_free_fn)(unsigned);
typedef CUresult (*v1_info_fn)(unsigned *, unsigned *);
typedef CUresult (*v1_range_fn)(unsigned *, unsigned *, unsigned);

/* The v1 symbols by their exported names: cuda.h (without __CUDA_API_VERSION_INTERNAL) maps
 * cuMemAlloc to cuMemAlloc_v2, as a program built with CUDA 3.2 or later headers gets it. */
extern CUresult pt_v1_alloc(unsigned *dptr, unsigned bytesize) __asm__("cuMemAlloc");
extern CUresult pt_v1_pitch(unsigned *dptr, unsigned *pitch, unsigned width, unsigned height,
                            unsigned elem) __asm__("cuMemAllocPitch");
extern CUresult pt_v1_free(unsigned dptr) __asm__("cuMemFree");
extern CUresult pt_v1_info(unsigned *free, unsigned *total) __asm__("cuMemGetInfo");
extern CUresult pt_v1_range(unsigned *base, unsigned *size, unsigned dptr) __asm__("cuMemGetAddressRange");
/* and the 4-argument cuGetProcAddress of CUDA 11.3, which cuda.h maps to cuGetProcAddress_v2 */
extern CUresult pt_getproc4(const char *symbol, void **pfn, int version, cuuint64_t flags)
    __asm__("cuGetProcAddress");

typedef struct pt_v1 {
    v1_alloc_fn alloc;
    v1_pitch_fn pitch;
    v1_free_fn free;
    v1_info_fn info;
    v1_range_fn range;
} pt_v1_t;

static const char *const pt_v1_names[] = {"cuMemAlloc", "cuMemAllocPitch", "cuMemFree",
                                          "cuMemGetInfo", "cuMemGetAddressRange"};

/* fn must be the shim's hook of exactly that v1 name. */
static void *pt_v1_hook(void *fn, const char *want, const char *path)
{
    const char *name = NULL;
    ck_assert_msg(pt_in_shim(fn, &name), "%s through %s should be gpuarena's hook", want, path);
    ck_assert_str_eq(name, want);
    return fn;
}

static pt_v1_t pt_v1_direct(void)
{
    pt_v1_t v = {pt_v1_alloc, pt_v1_pitch, pt_v1_free, pt_v1_info, pt_v1_range};
    void *fns[] = {(void *)v.alloc, (void *)v.pitch, (void *)v.free, (void *)v.info, (void *)v.range};
    for (int i = 0; i < 5; i++)
        pt_v1_hook(fns[i], pt_v1_names[i], "direct binding");
    return v;
}

static pt_v1_t pt_v1_dlsym(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    void *f[5];
    for (int i = 0; i < 5; i++)
        f[i] = pt_v1_hook(dlsym(h, pt_v1_names[i]), pt_v1_names[i], "dlsym(libcuda)");
    return (pt_v1_t){(v1_alloc_fn)f[0], (v1_pitch_fn)f[1], (v1_free_fn)f[2], (v1_info_fn)f[3],
                     (v1_range_fn)f[4]};
}

/* cuGetProcAddress at version 2000: the v2 ABI (a query result) or the 4-argument one. */
static pt_v1_t pt_v1_getproc(int four_args)
{
    void *f[5];
    for (int i = 0; i < 5; i++) {
        CUdriverProcAddressQueryResult q = -1;
        f[i] = NULL;
        CUresult r = four_args ? pt_getproc4(pt_v1_names[i], &f[i], 2000, 0)
                               : cuGetProcAddress_v2(pt_v1_names[i], &f[i], 2000, 0, &q);
        ck_assert_int_eq(r, CUDA_SUCCESS);
        ck_assert_int_eq(four_args ? CU_GET_PROC_ADDRESS_SUCCESS : q, CU_GET_PROC_ADDRESS_SUCCESS);
        pt_v1_hook(f[i], pt_v1_names[i], "cuGetProcAddress(..., 2000)");
    }
    return (pt_v1_t){(v1_alloc_fn)f[0], (v1_pitch_fn)f[1], (v1_free_fn)f[2], (v1_info_fn)f[3],
                     (v1_range_fn)f[4]};
}

/* NULL out-parameters: CUDA_ERROR_INVALID_VALUE, nothing allocated (a range query's are optional,
 * as cuMemGetAddressRange_v2's). */
static void pt_v1_nulls(const pt_v1_t *v, unsigned live)
{
    unsigned x = 0, pitch = 0, f = 0, t = 0, size = 0;
    ck_assert_int_eq(v->alloc(NULL, 512), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(v->pitch(NULL, &pitch, 1000, 4, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(v->pitch(&x, NULL, 1000, 4, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(v->info(NULL, &t), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(v->info(&f, NULL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(v->range(NULL, &size, live), CUDA_SUCCESS);
    ck_assert_uint_eq(size, 20 * MiB);
}

/* Under a 64 MiB cap on a 1 GiB device, every v1 function through v. */
static void pt_v1_under_cap(const pt_v1_t *v)
{
    unsigned f = 0, t = 0, p[3], x = 0, q = 0, pitch = 0, base = 0, size = 0;
    ck_assert_int_eq(v->info(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(t, 64 * MiB);
    ck_assert_uint_eq(f, 64 * MiB);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(v->alloc(&p[i], 20 * MiB), CUDA_SUCCESS);
        ck_assert_uint_ne(p[i], 0);
    }
    ck_assert_int_eq(v->alloc(&x, 20 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(v->pitch(&x, &pitch, 8192, 1024, 4), CUDA_ERROR_OUT_OF_MEMORY); /* 8 MiB */
    ck_assert_int_eq(v->pitch(&q, &pitch, 1000, 1024, 4), CUDA_SUCCESS);             /* 1 MiB */
    ck_assert_uint_eq(pitch, 1024);
    simcuda_counters_t c = pt_counters();
    ck_assert_uint_le(c.peak_bytes_in_use, 64 * MiB);
    ck_assert_uint_eq(c.v1_alloc_calls, 4); /* the refused ones never reached the driver */
    ck_assert_int_eq(v->info(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(t, 64 * MiB);
    ck_assert_uint_le(f, 3 * MiB); /* vmm shows whole granules (2 MiB) */
    ck_assert_uint_ge(f, 2 * MiB);
    ck_assert_int_eq(v->range(&base, &size, p[1] + 100), CUDA_SUCCESS);
    ck_assert_uint_eq(base, p[1]);
    ck_assert_uint_eq(size, 20 * MiB);
    pt_v1_nulls(v, p[2]);
    /* Frees give the bytes back, v1 or _v2 alike. */
    ck_assert_int_eq(v->free(p[0]), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree((CUdeviceptr)p[1]), CUDA_SUCCESS);
    ck_assert_int_eq(v->alloc(&x, 40 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(v->alloc(&p[0], 4 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(v->free(x), CUDA_SUCCESS);
    ck_assert_int_eq(v->free(p[2]), CUDA_SUCCESS);
    ck_assert_int_eq(v->free(q), CUDA_SUCCESS);
    ck_assert_int_eq(v->free(q), CUDA_ERROR_INVALID_VALUE); /* freed: the driver's answer */
    c = pt_counters();
    ck_assert_uint_le(c.peak_bytes_in_use, 64 * MiB);
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.v1_alloc_calls, 5);
    ck_assert_int_eq(v->info(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(f, 64 * MiB);
}

#define PT_V1_CAP "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB"

START_TEST(v1_direct_under_cap)
{
    pt_env("GPUARENA_MODE=arena", PT_V1_CAP, NULL);
    pt_start();
    pt_v1_t v = pt_v1_direct();
    pt_v1_under_cap(&v);
}
END_TEST

START_TEST(v1_dlsym_under_cap)
{
    pt_env("GPUARENA_MODE=grow", PT_V1_CAP, NULL);
    pt_start();
    pt_v1_t v = pt_v1_dlsym();
    pt_v1_under_cap(&v);
}
END_TEST

START_TEST(v1_getproc_under_cap)
{
    pt_env("GPUARENA_MODE=vmm", PT_V1_CAP, NULL);
    pt_start();
    pt_v1_t v = pt_v1_getproc(0);
    pt_v1_under_cap(&v);
}
END_TEST

START_TEST(v1_getproc_4arg_under_cap)
{
    pt_env("GPUARENA_MODE=platform", PT_V1_CAP, NULL);
    pt_start();
    pt_v1_t v = pt_v1_getproc(1);
    pt_v1_under_cap(&v);
}
END_TEST

/* Beside the pool: the _v2 allocations the pool serves and the v1 ones the driver serves share
 * one cap. */
START_TEST(v1_beside_the_pool)
{
    pt_env("GPUARENA_MODE=grow", PT_V1_CAP, NULL);
    pt_start();
    pt_v1_t v = pt_v1_direct();
    CUdeviceptr a;
    unsigned x = 0, f = 0, t = 0;
    ck_assert_int_eq(cuMemAlloc(&a, 16 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(v.alloc(&x, 56 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(v.info(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_ge(f, 32 * MiB);
    ck_assert_int_eq(v.alloc(&x, f), CUDA_SUCCESS);
    ck_assert_uint_le(pt_counters().peak_bytes_in_use, 64 * MiB);
    ck_assert_int_eq(v.free(x), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(v.alloc(&x, 56 * MiB), CUDA_SUCCESS);
    ck_assert_uint_le(pt_counters().peak_bytes_in_use, 64 * MiB);
}
END_TEST

/* A cap above what 32 bits say reads as UINT_MAX; one below, exactly. */
START_TEST(v1_info_clamped)
{
    pt_env("GPUARENA_LIMIT=6GiB", "SIMCUDA_TOTAL_MEM=8GiB", NULL);
    pt_start();
    pt_v1_t v = pt_v1_direct();
    unsigned f = 0, t = 0;
    ck_assert_int_eq(v.info(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(t, 0xffffffffu);
    ck_assert_uint_eq(f, 0xffffffffu);
    size_t f2 = 0, t2 = 0;
    ck_assert_int_eq(cuMemGetInfo(&f2, &t2), CUDA_SUCCESS);
    ck_assert_uint_eq(t2, 6 * GiB);
}
END_TEST

START_TEST(v1_info_below_4g)
{
    pt_env("GPUARENA_LIMIT=3GiB", "SIMCUDA_TOTAL_MEM=8GiB", NULL);
    pt_start();
    pt_v1_t v = pt_v1_getproc(0);
    unsigned f = 0, t = 0;
    ck_assert_int_eq(v.info(&f, &t), CUDA_SUCCESS);
    ck_assert_uint_eq(t, 3 * GiB);
    ck_assert_uint_eq(f, 3 * GiB);
    ck_assert_uint_eq(pt_counters().v1_meminfo_calls, 0); /* the shim asks the _v2 query */
}
END_TEST

/* In a child (stderr captured): the arena takes its share of the cap at the first _v2 allocation,
 * and a v1 allocation past what is left is refused. */
static void pt_v1_past_arena_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr a;
    unsigned x = 0;
    if (cuMemAlloc(&a, MiB) != CUDA_SUCCESS)
        exit(2);
    exit(pt_v1_alloc(&x, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 3);
}

/* The refusal says why the arena's free bytes cannot serve it (its addresses do not fit 32 bits)
 * and what to change; it named a framework pooling with cuMemCreate (JAX). */
START_TEST(v1_past_arena_explained)
{
    char err[8192];
    pt_env("GPUARENA_MODE=arena", PT_V1_CAP, NULL);
    ck_assert_int_eq(pt_run_child(pt_v1_past_arena_child, NULL, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cuMemAlloc (v1, 32-bit pointers) of 32.0 MiB failed") &&
                      strstr(err, "GPUARENA_MODE=grow or vmm") && !strstr(err, "JAX"),
                  "the refusal should explain the v1 pointer: %s", err);
}
END_TEST

TCase *pt_tcase_v1(void)
{
    TCase *tc = tcase_create("v1");
    tcase_add_test(tc, v1_direct_under_cap);
    tcase_add_test(tc, v1_dlsym_under_cap);
    tcase_add_test(tc, v1_getproc_under_cap);
    tcase_add_test(tc, v1_getproc_4arg_under_cap);
    tcase_add_test(tc, v1_beside_the_pool);
    tcase_add_test(tc, v1_info_clamped);
    tcase_add_test(tc, v1_info_below_4g);
    tcase_add_test(tc, v1_past_arena_explained);
    return tc;
}
