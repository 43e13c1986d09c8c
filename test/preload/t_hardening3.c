/* Preload tests: an outside, hostile check of issue 8 (helper-102, 2026-12-07): every hooked
 * function called with NULL, garbage and freed arguments, before cuInit, without a context and
 * after its destroy, in every mode, and its answer compared with the simulated driver's own. Each
 * test here failed before its fix. */
#include "preload_test.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

static const char *const modes[] = PT_ALL_MODES;

/* An address no program may read: a hook that reads a structure there before the driver would
 * ends the test with SIGSEGV. */
#define PT_BAD_PTR ((const void *)(uintptr_t)0x10)

typedef CUresult (*v1_pitch_fn)(unsigned *, unsigned *, unsigned, unsigned, unsigned);
typedef CUresult (*attach_fn)(CUcontext *, unsigned); /* cuCtxAttach, deprecated in cuda.h */

/* Every call the shim refuses for its arguments, answered as the driver answers it in state
 * `want_state` (CUDA_ERROR_NOT_INITIALIZED before cuInit, CUDA_ERROR_INVALID_CONTEXT with none
 * current), which it checks before the arguments. */
static void refusals_in_state(CUresult want_state)
{
    v1_pitch_fn v1_pitch = (v1_pitch_fn)dlsym(RTLD_DEFAULT, "cuMemAllocPitch");
    attach_fn attach = (attach_fn)dlsym(RTLD_DEFAULT, "cuCtxAttach");
    ck_assert_ptr_nonnull(v1_pitch);
    ck_assert_ptr_nonnull(attach);
    CUdeviceptr p = 0;
    CUmemGenericAllocationHandle h = 0;
    ck_assert_int_eq(cuMemAllocManaged(NULL, 0, CU_MEM_ATTACH_GLOBAL), want_state);
    ck_assert_int_eq(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), want_state);
    ck_assert_int_eq(cuMemAllocAsync(NULL, 0, NULL), want_state);
    ck_assert_int_eq(cuMemAllocFromPoolAsync(NULL, 1 * MiB, NULL, NULL), want_state);
    ck_assert_int_eq(v1_pitch(NULL, NULL, 0, 0, 0), want_state);
    ck_assert_int_eq(attach(NULL, 0), want_state);
    if (want_state == CUDA_ERROR_NOT_INITIALIZED) {
        /* calls that need no context: the state checked all the same, and prop never read */
        ck_assert_int_eq(cuMemCreate(&h, 2 * MiB, PT_BAD_PTR, 0), want_state);
        ck_assert_int_eq(cuMemCreate(NULL, 0, NULL, 0), want_state);
        ck_assert_int_eq(cuMemRetainAllocationHandle(NULL, NULL), want_state);
        ck_assert_int_eq(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_CONTEXT, 0), want_state);
        ck_assert_int_eq(cuPointerGetAttributes(1, NULL, NULL, 0), want_state);
    }
    simcuda_counters_t k = pt_counters();
    ck_assert_uint_eq(k.bytes_in_use, 0);
}

START_TEST(refused_calls_answer_the_drivers_state)
{
    pt_env(modes[_i], "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
    refusals_in_state(CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    refusals_in_state(CUDA_ERROR_INVALID_CONTEXT);
    /* a created context destroyed: the driver pops it, none is current */
    CUdevice dev;
    CUcontext ctx;
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&ctx, NULL, 0, dev), CUDA_SUCCESS);
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 1 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(ctx), CUDA_SUCCESS);
    refusals_in_state(CUDA_ERROR_INVALID_CONTEXT);
}
END_TEST

/* cuMemCreate's flags must be 0; the driver refuses others before it reads prop, as it does a
 * NULL handle: the shim read prop->location first (SIGSEGV on a bad prop). */
START_TEST(mem_create_bad_flags_prop_unread)
{
    pt_env(modes[_i], "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
    pt_start();
    CUmemGenericAllocationHandle h = 0;
    simcuda_counters_t k0 = pt_counters();
    ck_assert_int_eq(cuMemCreate(&h, 2 * MiB, PT_BAD_PTR, 1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemCreate(NULL, 2 * MiB, PT_BAD_PTR, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemCreate(&h, 0, PT_BAD_PTR, 0), CUDA_ERROR_INVALID_VALUE);
    simcuda_counters_t k1 = pt_counters();
    ck_assert_uint_eq(k1.vmm_bytes_in_use, k0.vmm_bytes_in_use);
}
END_TEST

/* The stream is checked before the other arguments, as the driver checks it: an allocation with a
 * NULL dptr and a free of an interior pointer, both on a destroyed stream, answer
 * CUDA_ERROR_INVALID_HANDLE (they answered CUDA_ERROR_INVALID_VALUE), and the block stays live. */
START_TEST(stream_checked_before_arguments)
{
    pt_env(modes[_i], "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
    pt_start();
    CUstream s, gone;
    ck_assert_int_eq(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamCreate(&gone, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamDestroy(gone), CUDA_SUCCESS);
    CUdeviceptr p = 0;
    ck_assert_int_eq(cuMemAllocAsync(NULL, 1 * MiB, gone), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuMemAllocAsync(&p, 0, gone), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuMemAllocFromPoolAsync(NULL, 1 * MiB, NULL, gone), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuMemAllocAsync(&p, 1 * MiB, s), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFreeAsync(p + 512, gone), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuMemFreeAsync(p + 512, s), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemFreeAsync(p, s), CUDA_SUCCESS); /* still live: freed once, here */
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFreeAsync(p, gone), CUDA_ERROR_INVALID_HANDLE); /* freed: the stream's */
}
END_TEST

TCase *pt_tcase_hardening3(void)
{
    TCase *tc = tcase_create("hardening3");
    const int n = (int)(sizeof modes / sizeof *modes);
    tcase_add_loop_test(tc, refused_calls_answer_the_drivers_state, 0, n);
    tcase_add_loop_test(tc, mem_create_bad_flags_prop_unread, 0, n);
    tcase_add_loop_test(tc, stream_checked_before_arguments, 0, n);
    return tc;
}
