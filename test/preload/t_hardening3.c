/* Preload tests: an outside, hostile check of issue 8 (helper-102, 2026-12-07): every hooked
 * function called with NULL, garbage and freed arguments, before cuInit, without a context and
 * after its destroy, in every mode, and its answer compared with the simulated driver's own. Each
 * test here failed before its fix. */
#include "preload_test.h"

#include "../../shim/ga_nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- a trace never replaces a file of the user's ---- */

static void traced_run(void *path)
{
    char env[600];
    snprintf(env, sizeof env, "GPUARENA_TRACE=%s", (const char *)path);
    pt_env(env, "GPUARENA_LOG=warn", NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 1 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
}

/* The first bytes of the file at path (n of them at most) in buf; how many. */
static size_t file_head(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    return got;
}

/* GPUARENA_TRACE naming a file that holds something other than a trace (a typo for another
 * path: notes.txt, the program's script) left nothing of it: the trace replaced it. Now the
 * process runs untraced and says so; an empty file, an earlier trace and a trace cut before its
 * 8th byte are replaced as before. */
START_TEST(trace_never_over_a_users_file)
{
    char dir[] = "/tmp/gpuarena-h3-XXXXXX", path[600], err[4096], head[16];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static const char *const contents[] = {"precious notes\n", "", "GATRACE\0", "GATR"};
    static const size_t lens[] = {15, 0, 8, 4};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/file%d", dir, i);
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        fwrite(contents[i], 1, lens[i], f);
        fclose(f);
        ck_assert_int_eq(pt_run_child(traced_run, path, err, sizeof err), 0);
        size_t n = file_head(path, head, sizeof head);
        if (i == 0) {
            ck_assert_uint_eq(n, lens[0]);
            ck_assert_int_eq(memcmp(head, contents[0], lens[0]), 0);
            ck_assert_msg(strstr(err, "is there and is not a gpuarena trace") &&
                              strstr(err, "left as it was"),
                          "no message: %s", err);
        } else {
            ck_assert_uint_ge(n, 8);
            ck_assert_int_eq(memcmp(head, "GATRACE", 8), 0);
            ck_assert_ptr_null(strstr(err, "not a gpuarena trace"));
        }
        unlink(path);
    }
    rmdir(dir);
}
END_TEST

/* ---- resets racing allocations: the driver never holds more than the cap ---- */

static const char *const pool_modes[] = PT_POOL_MODES;
static CUcontext race_ctx;
static atomic_int race_stop;
static int race_managed; /* the allocating threads use cuMemAllocManaged (pass-through) */

static void *race_allocator(void *arg)
{
    unsigned s = (unsigned)(uintptr_t)arg * 7919u + 1u;
    CUdeviceptr live[8] = {0};
    ck_assert_int_eq(cuCtxSetCurrent(race_ctx), CUDA_SUCCESS);
    while (!atomic_load(&race_stop)) {
        s = s * 1103515245u + 12345u;
        unsigned i = (s >> 8) % 8;
        size_t size = (((s >> 16) % 4) + 1) * MiB;
        if (race_managed) { /* never freed: the resets free them */
            CUdeviceptr p;
            if ((s >> 20) % 2)
                cuMemAllocManaged(&p, size, CU_MEM_ATTACH_GLOBAL);
            else
                cuMemAlloc(&p, size);
        } else if (live[i]) {
            cuMemFree(live[i]); /* may be refused: a reset freed it */
            live[i] = 0;
        } else if (cuMemAlloc(&live[i], size) != CUDA_SUCCESS) {
            live[i] = 0;
        }
    }
    return NULL;
}

/* Two threads allocate in the primary context while this one resets it 600 times; then the
 * driver's own peak must be at most the 64 MiB cap. */
static void reset_race(void)
{
    race_ctx = pt_start();
    CUdevice dev;
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, race_allocator, (void *)i), 0);
    for (int k = 0; k < 600; k++) {
        for (int y = 0; y < 200; y++)
            sched_yield();
        ck_assert_int_eq(cuDevicePrimaryCtxReset(dev), CUDA_SUCCESS);
    }
    atomic_store(&race_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_uint_le(simcuda_device_peak_all(0), 64 * MiB);
}

/* cuDevicePrimaryCtxReset while two threads allocate in the primary context, which lives on
 * after it: a state one of them made for the context once the reset's state was dead was dropped
 * with it, as if the driver had freed its memory, and its region stayed on the device uncounted
 * (128 MiB held under a 64 MiB cap, the driver's own peak). In each pool mode (the race is not
 * certain to show in one run; before the fix it did in two runs of three). */
START_TEST(reset_racing_allocations_keeps_the_cap)
{
    pt_env(pool_modes[_i], "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
    reset_race();
}
END_TEST

/* The same race with cuMemAllocManaged, every mode: a pass-through block the driver served in
 * the primary context while another thread reset it found its state dead and was taken for gone
 * with the context, its bytes off the cap, where the context lives on after a reset and the block
 * was made after it (5.4 GiB held under a 64 MiB cap, with cuMemAlloc beside it). */
START_TEST(reset_racing_managed_keeps_the_cap)
{
    pt_env(modes[_i], "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
    race_managed = 1;
    reset_race();
}
END_TEST

/* ---- a vmm pool's granule handles are not the program's to release ---- */

/* The program never gets a granule's handle (cuMemRetainAllocationHandle of pool memory is
 * refused), but a handle value can come to it: its own second release of a handle whose value the
 * driver had reused for a granule. That release was passed on, and took the pool's reference:
 * the pool's own release was then refused, its bytes held against the cap for good. Here the
 * pool's handles are found as the driver's live ones the program did not make. */
START_TEST(vmm_granule_handle_release_refused)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=warn",
           NULL);
    pt_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 1 * MiB), CUDA_SUCCESS);
    int found = 0;
    for (CUmemGenericAllocationHandle h = 1; h < 4096; h++) {
        CUmemAllocationProp prop;
        if (cuMemGetAllocationPropertiesFromHandle(&prop, h) != CUDA_SUCCESS)
            continue;
        found++;
        ck_assert_int_eq(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
        ck_assert_int_eq(cuMemGetAllocationPropertiesFromHandle(&prop, h), CUDA_SUCCESS);
    }
    ck_assert_int_ge(found, 1);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&p, 1 * MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    /* the pool's own releases went through: nothing of its granules is left on the device */
    ck_assert_uint_eq(pt_counters().vmm_bytes_in_use, 0);
    /* the program's own handles are still released as before */
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle mine;
    ck_assert_int_eq(cuMemCreate(&mine, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemRelease(mine), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemRelease(mine), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* ---- NVML's process list: NVML's own checks first ---- */

typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, void *);

/* The hooked process lists read *count before NVML saw the device: a bad device with a bad count
 * pointer ended in SIGSEGV where NVML answers NVML_ERROR_INVALID_ARGUMENT, and a NULL count before
 * nvmlInit answered NVML_ERROR_INVALID_ARGUMENT where NVML answers NVML_ERROR_UNINITIALIZED. */
START_TEST(nvml_process_list_checks_in_nvmls_order)
{
    static const char *const names[] = {"nvmlDeviceGetComputeRunningProcesses",
                                        "nvmlDeviceGetComputeRunningProcesses_v2",
                                        "nvmlDeviceGetComputeRunningProcesses_v3"};
    pt_env("GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    procs_fn f = (procs_fn)dlsym(h, names[_i]);
    ck_assert_ptr_nonnull(f);
    ck_assert(pt_in_shim((void *)f, NULL));
    unsigned int *bad_count = (unsigned int *)(uintptr_t)0x10;
    ck_assert_int_eq(f(NULL, NULL, NULL), NVML_ERROR_UNINITIALIZED);
    nvmlReturn_t (*init)(void) = (nvmlReturn_t (*)(void))dlsym(h, "nvmlInit_v2");
    ck_assert_ptr_nonnull(init);
    ck_assert_int_eq(init(), NVML_SUCCESS);
    ck_assert_int_eq(f((nvmlDevice_t)(uintptr_t)0x10, bad_count, NULL), NVML_ERROR_INVALID_ARGUMENT);
    ck_assert_int_eq(f(NULL, bad_count, NULL), NVML_ERROR_INVALID_ARGUMENT);
    nvmlDevice_t dev;
    nvmlReturn_t (*get)(unsigned int, nvmlDevice_t *) =
        (nvmlReturn_t (*)(unsigned int, nvmlDevice_t *))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    ck_assert_ptr_nonnull(get);
    ck_assert_int_eq(get(0, &dev), NVML_SUCCESS);
    unsigned int n = 0;
    ck_assert_int_eq(f(dev, NULL, NULL), NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t r = f(dev, &n, NULL);
    ck_assert(r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE);
}
END_TEST

TCase *pt_tcase_hardening3(void)
{
    TCase *tc = tcase_create("hardening3");
    /* The reset races: 600 resets beside two allocating threads, 1-3 s a mode on a quiet 2-core
     * machine; a loaded one (the CI's other tiers, helpers' builds) took past the tier's default
     * 20 s, and ASan and TSan multiply it. */
    tcase_set_timeout(tc, 120);
    const int n = (int)(sizeof modes / sizeof *modes);
    tcase_add_loop_test(tc, refused_calls_answer_the_drivers_state, 0, n);
    tcase_add_loop_test(tc, mem_create_bad_flags_prop_unread, 0, n);
    tcase_add_loop_test(tc, stream_checked_before_arguments, 0, n);
    tcase_add_test(tc, trace_never_over_a_users_file);
    tcase_add_test(tc, vmm_granule_handle_release_refused);
    tcase_add_loop_test(tc, reset_racing_allocations_keeps_the_cap, 0,
                        (int)(sizeof pool_modes / sizeof *pool_modes));
    tcase_add_loop_test(tc, reset_racing_managed_keeps_the_cap, 0, n);
    tcase_add_loop_test(tc, nvml_process_list_checks_in_nvmls_order, 0, 3);
    return tc;
}
