/* Preload tests: each interposition path reaches the shim, and what it reaches is served by it.
 *
 * Direct binding, dlopen + dlsym, and cuGetProcAddress (both ABIs, several versions, both stream
 * flavours). "Served by the shim" is proved from the driver side: in arena mode several program
 * allocations make a single driver allocation.
 */
#include "preload_test.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*gpv1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpv2_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);

/* Three allocations through a and f: in arena mode the driver sees one reservation. */
static void pt_served_by_arena(alloc_fn a, free_fn f)
{
    CUdeviceptr p[3];
    simcuda_counters_t before = pt_counters();
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(a(&p[i], 4096), CUDA_SUCCESS);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(f(p[i]), CUDA_SUCCESS);
    simcuda_counters_t after = pt_counters();
    ck_assert_uint_le(after.alloc_calls - before.alloc_calls, 1);
    ck_assert_uint_eq(after.free_calls - before.free_calls, 0);
}

START_TEST(direct_binding)
{
    pt_env("GPUARENA_MODE=arena", "GPUARENA_PREALLOCATE=false", NULL);
    pt_start();
    const char *name = NULL;
    ck_assert_msg(pt_in_shim((void *)cuMemAlloc, &name), "cuMemAlloc_v2 binds to the shim");
    ck_assert_str_eq(name, "cuMemAlloc_v2");
    pt_served_by_arena(cuMemAlloc, cuMemFree);
    ck_assert_uint_eq(pt_counters().alloc_calls, 1);
}
END_TEST

static const char *pt_hooked_driver[] = {
    "cuInit", "cuMemAlloc_v2", "cuMemAllocPitch_v2", "cuMemFree_v2", "cuMemGetInfo_v2",
    "cuMemGetAddressRange_v2", "cuPointerGetAttribute", "cuPointerGetAttributes",
    "cuCtxDestroy_v2", "cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxRelease_v2",
    "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxRelease",
    "cuIpcGetMemHandle", "cuGetProcAddress", "cuGetProcAddress_v2", "cuMemAllocManaged",
    "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync",
    "cuMemAllocFromPoolAsync_ptsz", "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuMemCreate",
    "cuMemRelease", "cuMemPoolDestroy", "cuMemAlloc", "cuMemAllocPitch", "cuMemFree",
    "cuMemGetInfo", "cuMemGetAddressRange", "cuCtxCreate", "cuCtxCreate_v2", "cuCtxCreate_v3",
    "cuCtxCreate_v4", "cuCtxPushCurrent", "cuCtxPushCurrent_v2", "cuCtxSetCurrent",
};

START_TEST(dlopen_dlsym)
{
    pt_env("GPUARENA_PREALLOCATE=false", NULL);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    for (size_t i = 0; i < sizeof pt_hooked_driver / sizeof pt_hooked_driver[0]; i++) {
        const char *name = NULL;
        void *f = dlsym(h, pt_hooked_driver[i]);
        ck_assert_msg(pt_in_shim(f, &name), "dlsym(libcuda, %s) is the shim's", pt_hooked_driver[i]);
        ck_assert_str_eq(name, pt_hooked_driver[i]);
    }
    /* Not hooked: the driver's own function, untouched. */
    ck_assert_msg(!pt_in_shim(dlsym(h, "cuMemcpyHtoD_v2"), NULL), "unhooked names go to the driver");
    ck_assert_ptr_null(dlsym(h, "cuNoSuchFunction"));
    pt_start();
    pt_served_by_arena((alloc_fn)dlsym(h, "cuMemAlloc_v2"), (free_fn)dlsym(h, "cuMemFree_v2"));
    /* A caller that fetches dlsym itself keeps going through the shim. */
    ck_assert_msg(pt_in_shim(dlsym(RTLD_DEFAULT, "dlsym"), NULL), "dlsym of dlsym");
    dlclose(h);
}
END_TEST

/* (base name, version, flags) -> the exported variant whose hook must come back. */
static const struct {
    const char *sym;
    int version;
    cuuint64_t flags;
    const char *expect;
} pt_procs[] = {
    {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
    {"cuMemAlloc", 13000, 0, "cuMemAlloc_v2"},
    {"cuMemAlloc", 2000, 0, "cuMemAlloc"}, /* the v1 ABI below 3020 */
    {"cuMemAllocPitch", 3010, 0, "cuMemAllocPitch"},
    {"cuMemFree", 2000, 0, "cuMemFree"},
    {"cuMemGetInfo", 2000, 0, "cuMemGetInfo"},
    {"cuMemGetAddressRange", 3000, 0, "cuMemGetAddressRange"},
    {"cuMemFree", 3020, 0, "cuMemFree_v2"},
    {"cuMemGetInfo", 12000, 0, "cuMemGetInfo_v2"},
    {"cuMemAllocPitch", 11020, 0, "cuMemAllocPitch_v2"},
    {"cuCtxDestroy", 4000, 0, "cuCtxDestroy_v2"},
    {"cuDevicePrimaryCtxReset", 11000, 0, "cuDevicePrimaryCtxReset_v2"},
    {"cuDevicePrimaryCtxRelease", 12000, 0, "cuDevicePrimaryCtxRelease_v2"},
    {"cuDevicePrimaryCtxRelease", 7000, 0, "cuDevicePrimaryCtxRelease"},
    {"cuDevicePrimaryCtxReset", 7000, 0, "cuDevicePrimaryCtxReset"},
    {"cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_DEFAULT, "cuMemAllocAsync"},
    {"cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemAllocAsync"},
    {"cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAllocAsync_ptsz"},
    {"cuMemFreeAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemFreeAsync_ptsz"},
    {"cuMemAllocFromPoolAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
     "cuMemAllocFromPoolAsync_ptsz"},
    {"cuMemCreate", 12000, 0, "cuMemCreate"},
    {"cuMemPoolDestroy", 11020, 0, "cuMemPoolDestroy"},
    {"cuIpcGetMemHandle", 13000, 0, "cuIpcGetMemHandle"},
    /* contexts are met where they are made or pushed (shim/meet.c) */
    {"cuCtxCreate", 2000, 0, "cuCtxCreate"},
    {"cuCtxCreate", 3020, 0, "cuCtxCreate_v2"},
    {"cuCtxCreate", 11040, 0, "cuCtxCreate_v3"},
    {"cuCtxCreate", 12050, 0, "cuCtxCreate_v4"},
    {"cuCtxCreate", 13000, 0, "cuCtxCreate_v4"},
    {"cuCtxPushCurrent", 2000, 0, "cuCtxPushCurrent"},
    {"cuCtxPushCurrent", 4000, 0, "cuCtxPushCurrent_v2"},
    {"cuCtxSetCurrent", 13000, 0, "cuCtxSetCurrent"},
    {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
    {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
    {"cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2"},
};

START_TEST(getproc_v2_versions)
{
    pt_start();
    gpv2_fn gp = (gpv2_fn)dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    ck_assert_msg(pt_in_shim((void *)gp, NULL), "cuGetProcAddress_v2 is the shim's");
    for (size_t i = 0; i < sizeof pt_procs / sizeof pt_procs[0]; i++) {
        void *f = NULL;
        const char *name = NULL;
        CUdriverProcAddressQueryResult q = -1;
        ck_assert_int_eq(gp(pt_procs[i].sym, &f, pt_procs[i].version, pt_procs[i].flags, &q),
                         CUDA_SUCCESS);
        ck_assert_int_eq(q, CU_GET_PROC_ADDRESS_SUCCESS);
        ck_assert_msg(pt_in_shim(f, &name), "%s@%d is the shim's", pt_procs[i].sym,
                      pt_procs[i].version);
        ck_assert_str_eq(name, pt_procs[i].expect);
    }
    /* Not hooked, unknown, too old: the driver's answers, unchanged. */
    void *f = NULL;
    CUdriverProcAddressQueryResult q = 0;
    ck_assert_int_eq(gp("cuMemcpyHtoD", &f, 12000, 0, &q), CUDA_SUCCESS);
    ck_assert_msg(!pt_in_shim(f, NULL), "cuMemcpyHtoD is the driver's");
    ck_assert_int_eq(gp("cuNoSuchThing", &f, 12000, 0, &q), CUDA_ERROR_NOT_FOUND);
    ck_assert_int_eq(q, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    ck_assert_int_ne(gp("cuMemAllocAsync", &f, 10000, 0, &q), CUDA_SUCCESS);
    ck_assert_int_eq(q, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    /* Calling what came back is served by the shim. */
    alloc_fn a;
    free_fn fr;
    ck_assert_int_eq(gp("cuMemAlloc", (void **)&a, 3020, 0, &q), CUDA_SUCCESS);
    ck_assert_int_eq(gp("cuMemFree", (void **)&fr, 3020, 0, &q), CUDA_SUCCESS);
    pt_served_by_arena(a, fr);
}
END_TEST

START_TEST(getproc_v1)
{
    pt_env("GPUARENA_PREALLOCATE=false", NULL);
    pt_start();
    gpv1_fn gp = (gpv1_fn)dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    const char *name = NULL;
    ck_assert_msg(pt_in_shim((void *)gp, &name), "cuGetProcAddress (v1) is the shim's");
    ck_assert_str_eq(name, "cuGetProcAddress");
    void *f = NULL;
    ck_assert_int_eq(gp("cuMemAlloc", &f, 11030, 0), CUDA_SUCCESS);
    ck_assert_msg(pt_in_shim(f, &name), "v1 lookup of cuMemAlloc");
    ck_assert_str_eq(name, "cuMemAlloc_v2");
    ck_assert_int_eq(gp("cuMemAllocAsync", &f, 11030, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                     CUDA_SUCCESS);
    ck_assert_msg(pt_in_shim(f, &name), "v1 lookup of cuMemAllocAsync ptsz");
    ck_assert_str_eq(name, "cuMemAllocAsync_ptsz");
    ck_assert_int_eq(gp("cuGetProcAddress", &f, 12000, 0), CUDA_SUCCESS);
    ck_assert_msg(pt_in_shim(f, &name), "v1 lookup of cuGetProcAddress");
    ck_assert_str_eq(name, "cuGetProcAddress_v2");
    alloc_fn a;
    free_fn fr;
    ck_assert_int_eq(gp("cuMemAlloc", (void **)&a, 3020, 0), CUDA_SUCCESS);
    ck_assert_int_eq(gp("cuMemFree", (void **)&fr, 3020, 0), CUDA_SUCCESS);
    pt_served_by_arena(a, fr);
}
END_TEST

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* see pt_tcase_interpose */
/* The driver loaded a second time into a namespace of its own (dlmopen): its hooked names get the
 * hooks, and the line says what it is, a second instance of the same file (it called the same
 * file "another CUDA driver than the one gpuarena uses": an outside check, 2026-12-06). */
static void dlmopen_child(void *arg)
{
    (void)arg;
    if (cuInit(0) != CUDA_SUCCESS)
        exit(10);
    void *h = dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        exit(9);
    if (!pt_in_shim(dlsym(h, "cuMemAlloc_v2"), NULL) || !pt_in_shim(dlsym(h, "cuInit"), NULL))
        exit(11);
    exit(0);
}

START_TEST(dlmopen_second_instance)
{
    char err[4096];
    int rc = pt_run_child(dlmopen_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d (11: a lookup answered by the second instance): %s", rc, err);
    ck_assert_msg(strstr(err, "a second instance of the CUDA driver gpuarena uses") &&
                  strstr(err, "so the cap holds") && !strstr(err, "another CUDA driver") &&
                  strstr(err, "load the driver once (dlopen, not dlmopen)"),
                  "the line: %s", err);
}
END_TEST
#endif

/* ---- GPUARENA_LIBCUDA naming what the program does not use: said, once (an outside check,
 * 2026-12-06: the program failed with the driver's code and no word from gpuarena) ---- */
static void init_child(void *arg)
{
    pt_env((char *)arg, NULL);
    exit(cuInit(0) == CUDA_SUCCESS ? 0 : 1);
}

static void init_child_env(char *const *env)
{
    for (int i = 0; env[i]; i++)
        putenv(env[i]);
    init_child((void *)"GPUARENA_LOG=warn");
}

/* The toolkit's stub (here the simulated driver answering CUDA_ERROR_STUB_LIBRARY), named by
 * GPUARENA_LIBCUDA or found as libcuda.so.1. */
static void stub_child(void *arg)
{
    char *env[] = {"SIMCUDA_FAIL=cuInit:1+:CUDA_ERROR_STUB_LIBRARY", arg, NULL};
    init_child_env(env);
}

START_TEST(stub_driver_said)
{
    char dir[] = "/tmp/gpuarena-drv-XXXXXX", copy[128], env[160], err[4096];
    pt_copy_lib(NULL, dir, "libcuda.so", copy, sizeof copy);
    snprintf(env, sizeof env, "GPUARENA_LIBCUDA=%s", copy);
    int rc = pt_run_child(stub_child, env, err, sizeof err);
    pt_copy_lib_remove(dir, copy);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(err, "is the CUDA toolkit's stub library, not a driver") &&
                  strstr(err, "unset it or name the real libcuda.so.1"), "the line: %s", err);
    rc = pt_run_child(stub_child, "GPUARENA_LOG=warn", err, sizeof err);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(err, "is the CUDA toolkit's stub library, not a driver") &&
                  strstr(err, "take the toolkit's stubs folder out of LD_LIBRARY_PATH"),
                  "the line: %s", err);
}
END_TEST

/* A copy of the driver named while the program is linked to the one on its library path: its
 * unhooked calls go to the linked driver, which nothing initialised. */
START_TEST(linked_driver_differs_said)
{
    char dir[] = "/tmp/gpuarena-drv-XXXXXX", copy[128], env[160], err[4096];
    pt_copy_lib(NULL, dir, "libcuda.so.1", copy, sizeof copy);
    snprintf(env, sizeof env, "GPUARENA_LIBCUDA=%s", copy);
    int rc = pt_run_child(init_child, env, err, sizeof err);
    pt_copy_lib_remove(dir, copy);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(err, "is another CUDA driver than the one the program is linked to") &&
                  strstr(err, "CUDA_ERROR_NOT_INITIALIZED"), "the line: %s", err);
    /* the driver the program is linked to, named: nothing to say */
    struct link_map *lm = NULL;
    ck_assert_int_eq(dlinfo(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), RTLD_DI_LINKMAP, &lm), 0);
    snprintf(env, sizeof env, "GPUARENA_LIBCUDA=%s", lm->l_name);
    rc = pt_run_child(init_child, env, err, sizeof err);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(!strstr(err, "gpuarena:"), "nothing said: %s", err);
}
END_TEST

/* A copy of the shim is refused as the shim, not as a library lacking cuMemAlloc_v2. */
START_TEST(shim_copy_refused_as_the_shim)
{
    char dir[] = "/tmp/gpuarena-shim-XXXXXX", copy[128], env[160], err[4096];
    pt_copy_lib(getenv("PT_SHIM"), dir, "libcuda.so.1", copy, sizeof copy);
    snprintf(env, sizeof env, "GPUARENA_LIBCUDA=%s", copy);
    int rc = pt_run_child(init_child, env, err, sizeof err);
    pt_copy_lib_remove(dir, copy);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(err, "is gpuarena's shim itself (a copy of it), not the CUDA driver") &&
                  !strstr(err, "lacks"), "the line: %s", err);
    /* a device plugin's interposer (it defines dlsym and cuMemAlloc_v2 too) is no copy of the
     * shim: it was called one (an outside check, 2026-12-06) */
    rc = pt_run_child(init_child, "GPUARENA_LIBCUDA=libgaplugin.so", err, sizeof err);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(err, "GPUARENA_LIBCUDA") && !strstr(err, "shim itself"), "the line: %s",
                  err);
}
END_TEST

/* A copy of the shim that the program loads itself (by path, beside the preloaded one): its
 * hooked names get the preloaded shim's hooks, said once; they were the copy's own, a second
 * pool under a second cap (an outside check, 2026-12-06: 128 MiB held under a 64 MiB cap). */
static void shim_copy_child(void *arg)
{
    if (cuInit(0) != CUDA_SUCCESS)
        exit(10);
    void *h = dlopen((const char *)arg, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        exit(9);
    static const char *names[] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemGetInfo_v2",
                                  "cuGetProcAddress_v2"};
    for (int i = 0; i < 4; i++)
        if (!pt_in_shim(dlsym(h, names[i]), NULL))
            exit(11 + i);
    exit(0);
}

START_TEST(loaded_shim_copy_gets_the_hooks)
{
    char dir[] = "/tmp/gpuarena-shim-XXXXXX", copy[128], err[4096];
    pt_copy_lib(getenv("PT_SHIM"), dir, "gacopy.so", copy, sizeof copy);
    int rc = pt_run_child(shim_copy_child, copy, err, sizeof err);
    pt_copy_lib_remove(dir, copy);
    ck_assert_msg(rc == 0, "exit %d (11-14: a lookup answered by the copy itself): %s", rc, err);
    ck_assert_msg(strstr(err, "gacopy.so, a copy of gpuarena's shim loaded apart from the "
                              "preloaded one") && strstr(err, "one cap hold"), "the line: %s", err);
}
END_TEST

TCase *pt_tcase_interpose(void)
{
    TCase *tc = tcase_create("interpose");
    tcase_add_test(tc, direct_binding);
    tcase_add_test(tc, dlopen_dlsym);
    tcase_add_test(tc, getproc_v2_versions);
    tcase_add_test(tc, getproc_v1);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* Not under AddressSanitizer or ThreadSanitizer: a second namespace's copy of the
     * instrumented simulated driver aborts at load ("ASan runtime does not come first in
     * initial library list"). */
    tcase_add_test(tc, dlmopen_second_instance);
#endif
    tcase_add_test(tc, stub_driver_said);
    tcase_add_test(tc, linked_driver_differs_said);
    tcase_add_test(tc, shim_copy_refused_as_the_shim);
    tcase_add_test(tc, loaded_shim_copy_gets_the_hooks);
    return tc;
}
