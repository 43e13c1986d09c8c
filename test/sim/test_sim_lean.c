/* test-sim, the lean driver: $(BUILD)/sim-lean/libcuda.so.1 neither exports nor hands out through
 * cuGetProcAddress any entry point of SIMCUDA_LEAN_OMITS, and keeps the rest. It is loaded beside the
 * full driver with dlopen by path (its own copy of the state), so both are checked in one process.
 */
#include "test_sim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void *lean_open(void)
{
    const char *path = getenv("SIMCUDA_TEST_LEAN");
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    ck_assert_msg(h != NULL, "the lean driver should load from SIMCUDA_TEST_LEAN (%s): %s",
                  path ? path : "unset", dlerror());
    return h;
}

START_TEST(lean_exports)
{
    void *h = lean_open();
    static const char *const omitted[] = {
#define TS_NAME(name) #name,
        SIMCUDA_LEAN_OMITS(TS_NAME)
#undef TS_NAME
    };
    for (size_t i = 0; i < sizeof omitted / sizeof omitted[0]; i++) {
        ck_assert_msg(dlsym(h, omitted[i]) == NULL, "the lean driver should not export %s", omitted[i]);
        ck_assert_msg(ts_sym(omitted[i]) != NULL, "the full driver should export %s", omitted[i]);
    }
    static const char *const kept[] = {"cuInit", "cuDeviceGet", "cuCtxCreate_v2", "cuCtxDestroy_v2",
                                       "cuDevicePrimaryCtxRetain", "cuMemAlloc_v2", "cuMemFree_v2",
                                       "cuMemGetInfo_v2", "cuMemcpyHtoD_v2", "cuGetProcAddress",
                                       "cuGetProcAddress_v2", "cuDeviceGetUuid", "simcuda_get_counters"};
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        ck_assert_msg(dlsym(h, kept[i]) != NULL, "the lean driver should export %s", kept[i]);
}
END_TEST

START_TEST(lean_getproc)
{
    void *h = lean_open();
    CUresult (*getproc)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        (CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))dlsym(
            h, "cuGetProcAddress_v2");
    ck_assert_ptr_nonnull(getproc);
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st;
    static const char *const missing[] = {"cuMemCreate", "cuMemAllocManaged", "cuPointerGetAttribute",
                                          "cuMemGetAddressRange", "cuIpcGetMemHandle", "cuMemMap"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        ck_assert_int_eq(getproc(missing[i], &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
        ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
        ck_assert_ptr_null(fn);
    }
    ck_assert_int_eq(getproc("cuMemAllocAsync", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
                     CUDA_ERROR_NOT_FOUND);
    CK(getproc("cuMemAlloc", &fn, 3020, 0, &st));
    ck_assert_ptr_eq(fn, dlsym(h, "cuMemAlloc_v2"));
    CK(getproc("cuCtxCreate", &fn, 13000, 0, &st)); /* the newest variant it has */
    ck_assert_ptr_eq(fn, dlsym(h, "cuCtxCreate_v2"));
    CK(getproc("cuDeviceGetUuid", &fn, 13000, 0, &st)); /* v1: the lean driver has no v2 */
    ck_assert_ptr_eq(fn, dlsym(h, "cuDeviceGetUuid"));
    int (*fail_add)(const char *) = (int (*)(const char *))dlsym(h, "simcuda_fail_add");
    ck_assert_int_eq(fail_add("cuMemCreate:1"), -1); /* not an entry point of this driver */
    ck_assert_int_eq(fail_add("cuMemAlloc_v2:1"), 0);
}
END_TEST

TCase *ts_tcase_lean(void)
{
    TCase *tc = tcase_create("lean");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, lean_exports);
    tcase_add_test(tc, lean_getproc);
    return tc;
}
