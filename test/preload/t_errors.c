/* Preload tests: bad input. NULL out-parameters for every hook, size 0, frees of unknown, freed
 * and interior pointers, IPC handles of arena pointers, and bad option values (each in its own
 * process, since options are read once).
 */
#include "preload_test.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(null_out_params)
{
    pt_start();
    CUdeviceptr p;
    size_t s;
    ck_assert_int_eq(cuMemAlloc(NULL, 100), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocPitch(NULL, &s, 100, 1, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemGetInfo(NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocManaged(NULL, 100, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocAsync(NULL, 100, NULL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocFromPoolAsync(NULL, 100, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemCreate(NULL, 100, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    ck_assert_int_eq(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuPointerGetAttributes(1, NULL, NULL, p), CUDA_ERROR_INVALID_VALUE);
    /* No attributes: the driver's answer (the simulated driver's INVALID_VALUE), not an
     * out-of-memory for a copy of an empty list (an outside check, 2026-12-06). */
    ck_assert_int_eq(cuPointerGetAttributes(0, NULL, NULL, p), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuIpcGetMemHandle(NULL, p), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuGetProcAddress("cuMemAlloc", NULL, 12000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    /* Both range out-parameters are optional, as in the driver. */
    ck_assert_int_eq(cuMemGetAddressRange(NULL, NULL, p), CUDA_SUCCESS);
}
END_TEST

START_TEST(size_zero)
{
    pt_start();
    CUdeviceptr p;
    size_t pitch;
    ck_assert_int_eq(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, 0, 0, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocAsync(&p, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(pt_counters().bytes_in_use, 0);
}
END_TEST

static void pt_bad_frees(void)
{
    CUdeviceptr a, b;
    ck_assert_int_eq(cuMemAlloc(&a, 8192), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&b, 8192), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a + 512), CUDA_ERROR_INVALID_VALUE); /* interior */
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);       /* double */
    ck_assert_int_eq(cuMemFree((CUdeviceptr)0x1000), CUDA_ERROR_INVALID_VALUE); /* unknown */
    /* Still intact: b is live and reads back, and new allocations work. */
    CUdeviceptr base = 0;
    ck_assert_int_eq(cuMemGetAddressRange(&base, NULL, b + 4), CUDA_SUCCESS);
    ck_assert_uint_eq(base, b);
    ck_assert_int_eq(cuMemAlloc(&a, 8192), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(b), CUDA_SUCCESS);
}

START_TEST(bad_frees_arena)
{
    pt_env("GPUARENA_MODE=arena", NULL);
    pt_start();
    pt_bad_frees();
    /* The unknown pointer went to the driver; the arena pointers never did. */
    ck_assert_uint_eq(pt_counters().free_calls, 1);
}
END_TEST

/* Double frees while the freed chunks wait for the device (GPUARENA_FREE_SYNC=deferred): the
 * pending list is scanned while short and indexed once longer (fence.c), so both are exercised:
 * 40 frees without an allocation between, each freed pointer freed again at every length, then
 * one allocation returns them all and a further free is still a double free (the pool's answer). */
START_TEST(double_frees_while_pending)
{
    pt_env("GPUARENA_MODE=arena", NULL);
    pt_start();
    enum { N = 40 };
    CUdeviceptr p[N], q;
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(cuMemAlloc(&p[i], 4096 * (size_t)(i + 1)), CUDA_SUCCESS);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(cuMemFree(p[i]), CUDA_SUCCESS);
        for (int j = 0; j <= i; j += 7)
            ck_assert_msg(cuMemFree(p[j]) == CUDA_ERROR_INVALID_VALUE, "double free of %d of %d", j, i + 1);
        if (i + 1 < N)
            ck_assert_int_eq(cuMemFree(p[i + 1] + 512), CUDA_ERROR_INVALID_VALUE); /* interior */
    }
    ck_assert_int_eq(cuMemAlloc(&q, 4096), CUDA_SUCCESS); /* returns every pending chunk */
    for (int i = 0; i < N; i++)
        if (p[i] != q)
            ck_assert_int_eq(cuMemFree(p[i]), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemFree(q), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(q), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(bad_frees_platform)
{
    pt_env("GPUARENA_MODE=platform", NULL);
    pt_start();
    CUdeviceptr a;
    ck_assert_int_eq(cuMemAlloc(&a, 8192), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_ERROR_INVALID_VALUE); /* the driver's answer */
    ck_assert_int_eq(cuMemFree((CUdeviceptr)0x1000), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(pt_counters().bytes_in_use, 0);
}
END_TEST

START_TEST(foreign_pointer_freed_by_driver)
{
    /* A pointer the shim never saw (allocated before it, or by another allocator) is the driver's.
     * glibc's own dlsym, fetched by version, is the one way around the shim to the driver. */
    pt_start();
    typedef void *(*dlsym_fn)(void *, const char *);
    dlsym_fn real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    ck_assert_ptr_nonnull(real_dlsym);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CUresult (*drv_alloc)(CUdeviceptr *, size_t) =
        (CUresult(*)(CUdeviceptr *, size_t))real_dlsym(h, "cuMemAlloc_v2");
    ck_assert_msg(drv_alloc && !pt_in_shim((void *)drv_alloc, NULL), "the driver's own cuMemAlloc_v2");
    CUdeviceptr foreign, mine;
    ck_assert_int_eq(drv_alloc(&foreign, 4096), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&mine, 4096), CUDA_SUCCESS);
    unsigned long long frees = pt_counters().free_calls;
    ck_assert_int_eq(cuMemFree(mine), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().free_calls, frees); /* arena pointer: stays in the arena */
    ck_assert_int_eq(cuMemFree(foreign), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().free_calls, frees + 1); /* foreign: the driver freed it */
}
END_TEST

/* CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE of p through both attribute hooks, which must
 * agree with each other and with cuIpcGetMemHandle (helper-48 F6: pool pointers said 1, then the
 * handle was refused). */
static void ipc_capable_is(CUdeviceptr p, unsigned want)
{
    unsigned one = 9, many = 9;
    CUpointer_attribute a[2] = {CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    int ord = -1;
    void *d[2] = {&many, &ord};
    ck_assert_int_eq(cuPointerGetAttribute(&one, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p),
                     CUDA_SUCCESS);
    ck_assert_int_eq(cuPointerGetAttributes(2, a, d, p), CUDA_SUCCESS);
    ck_assert_uint_eq(one, want);
    ck_assert_uint_eq(many, want);
    ck_assert_int_eq(ord, 0);
}

START_TEST(ipc_refused_for_arena)
{
    static const char *const modes[] = PT_POOL_MODES;
    pt_env(modes[_i], NULL);
    pt_start();
    CUdeviceptr p;
    CUipcMemHandle h;
    ck_assert_int_eq(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    ipc_capable_is(p, 0);
    ipc_capable_is(p + 100, 0);
    ck_assert_int_eq(cuIpcGetMemHandle(&h, p), CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_uint_eq(pt_counters().ipc_calls, 0);
}
END_TEST

START_TEST(ipc_passes_in_platform)
{
    pt_env("GPUARENA_MODE=platform", NULL);
    pt_start();
    CUdeviceptr p;
    CUipcMemHandle h;
    ck_assert_int_eq(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    ipc_capable_is(p, 1);
    ck_assert_int_eq(cuIpcGetMemHandle(&h, p), CUDA_SUCCESS);
    ck_assert_uint_eq(pt_counters().ipc_calls, 1);
}
END_TEST

static void pt_bad_option_child(void *arg)
{
    putenv((char *)arg);
    CUresult r = cuInit(0);
    CUdeviceptr p;
    CUresult a = cuMemAlloc(&p, 100);
    exit(r == CUDA_ERROR_INVALID_VALUE && a == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
}

static const char *pt_bad_options[] = {
    "GPUARENA_LIMIT=12XB", "GPUARENA_LIMIT=-5GiB", "GPUARENA_LIMIT=99999999999TiB",
    "GPUARENA_LIMIT=150%", "GPUARENA_LIMIT=", "GPUARENA_LIMIT=0", "GPUARENA_MODE=fast",
    "GPUARENA_PREALLOCATE=maybe", "GPUARENA_MEM_FRACTION=1.5", "GPUARENA_MEM_FRACTION=0.5++",
    "GPUARENA_MEM_FRACTION=abc", "GPUARENA_LOG=loud", "GPUARENA_STATS=", "GPUARENA_TRACE=-",
};

START_TEST(bad_option_values)
{
    for (size_t i = 0; i < sizeof pt_bad_options / sizeof pt_bad_options[0]; i++) {
        char err[4096], name[64];
        const char *kv = pt_bad_options[i];
        int status = pt_run_child(pt_bad_option_child, (void *)kv, err, sizeof err);
        ck_assert_msg(status == 0, "%s: cuInit and cuMemAlloc fail with INVALID_VALUE", kv);
        size_t n = (size_t)(strchr(kv, '=') - kv);
        snprintf(name, sizeof name, "gpuarena: %.*s='%s'", (int)n, kv, kv + n + 1);
        ck_assert_msg(strstr(err, name), "%s: the message names variable and value: %s", kv, err);
    }
    char err[4096];
    pt_run_child(pt_bad_option_child, "GPUARENA_LIMIT=12XB", err, sizeof err);
    ck_assert_msg(strstr(err, "is not a size: unknown unit 'XB' (try 8GiB, 512MiB or 50%)"),
                  "the grammar's reason and the accepted forms: %s", err);
    pt_run_child(pt_bad_option_child, "GPUARENA_LIMIT=0", err, sizeof err);
    ck_assert_msg(strstr(err, "GPUARENA_LIMIT='0' is not a size: it is 0 bytes (try"), "%s", err);
    pt_run_child(pt_bad_option_child, "GPUARENA_PREALLOCATE=maybe", err, sizeof err);
    ck_assert_msg(strstr(err, "GPUARENA_PREALLOCATE='maybe'") &&
                  strstr(err, "true/false, 1/0, yes/no, on/off"),
                  "every word the shim takes is named: %s", err);
    /* - is stderr for the statistics alone: said (it said "(a file path)", and the README's
     * table, path for both, did not tell why - was refused) */
    pt_run_child(pt_bad_option_child, "GPUARENA_TRACE=-", err, sizeof err);
    ck_assert_msg(strstr(err, "GPUARENA_TRACE='-' is not valid (a file path, not -: the trace is "
                              "binary records for a file; GPUARENA_STATS=- is the one"), "%s", err);
    pt_run_child(pt_bad_option_child, "GPUARENA_VMM_KEEP=0.5", err, sizeof err);
    ck_assert_msg(strstr(err, "'0.5' is not a size: it rounds down to 0 bytes; write 0 for none (try 64MiB"), "%s",
                  err);
}
END_TEST

static void pt_good_option_child(void *arg)
{
    putenv((char *)arg);
    exit(cuInit(0) == CUDA_SUCCESS ? 0 : 1);
}

START_TEST(good_option_values)
{
    static const char *good[] = {
        "GPUARENA_LIMIT=8GiB", "GPUARENA_LIMIT=512MiB", "GPUARENA_LIMIT=8G", "GPUARENA_LIMIT=8GB",
        "GPUARENA_LIMIT=1.5GiB", "GPUARENA_LIMIT=50%", "GPUARENA_LIMIT=4096", "GPUARENA_LIMIT=2TiB",
        "GPUARENA_LIMIT=100KB", "GPUARENA_PREALLOCATE=no", "GPUARENA_PREALLOCATE=1",
        "GPUARENA_MEM_FRACTION=0.9", "GPUARENA_MEM_FRACTION=1+", "GPUARENA_LOG=error",
        /* The size grammar's blanks around every value: a CRLF line end of an environment file
         * was refused after these (not after GPUARENA_MODE or GPUARENA_LIMIT) until 2026-12-06. */
        "GPUARENA_PREALLOCATE=false\r", "GPUARENA_LOG=warn\r", "GPUARENA_FREE_SYNC=device\r",
        "GPUARENA_MEM_FRACTION=0.5\r", "GPUARENA_MEM_FRACTION=\v0.5+\f", "GPUARENA_MODE=vmm\r",
        "GPUARENA_LIMIT=1GiB\r",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char err[4096];
        ck_assert_msg(pt_run_child(pt_good_option_child, (void *)good[i], err, sizeof err) == 0,
                      "%s accepted: %s", good[i], err);
        ck_assert_msg(err[0] == '\0', "%s: silent by default, got: %s", good[i], err);
    }
}
END_TEST

/* GPUARENA_VMM_KEEP outside vmm mode does nothing: said once, with the fix, and CUDA starts (it was
 * ignored without a word while `gpuarena run --vmm-keep` refuses it outside vmm: helper-84 F7);
 * in vmm mode it is silent. */
START_TEST(keep_outside_vmm_said)
{
    static const char *modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow",
                                  "GPUARENA_MODE=platform", "GPUARENA_MODE=vmm"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char err[4096];
        pt_env(modes[i], NULL);
        ck_assert_msg(pt_run_child(pt_good_option_child, "GPUARENA_VMM_KEEP=0", err, sizeof err) ==
                          0, "%s: CUDA starts: %s", modes[i], err);
        if (strcmp(modes[i], "GPUARENA_MODE=vmm") == 0) {
            ck_assert_msg(err[0] == '\0', "vmm: silent, got: %s", err);
            continue;
        }
        char want[160];
        snprintf(want, sizeof want, "gpuarena: GPUARENA_VMM_KEEP applies to vmm mode only and is "
                 "ignored in %s mode: set GPUARENA_MODE=vmm", modes[i] + strlen("GPUARENA_MODE="));
        const char *at = strstr(err, want);
        ck_assert_msg(at && !strstr(at + strlen(want), "GPUARENA_VMM_KEEP applies"),
                      "%s: said once: %s", modes[i], err);
    }
}
END_TEST

/* Preallocation asked for outside arena mode is said once, as a keep outside vmm mode is; false
 * there (what gpuarena run sets for grow, vmm and platform) is silent, and so is arena. */
START_TEST(preallocate_outside_arena_said)
{
    static const char *modes[] = {"GPUARENA_MODE=grow", "GPUARENA_MODE=platform",
                                  "GPUARENA_MODE=vmm", "GPUARENA_MODE=arena"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        char err[4096], want[200];
        const char *mode = modes[i] + strlen("GPUARENA_MODE=");
        pt_env(modes[i], NULL);
        ck_assert_msg(pt_run_child(pt_good_option_child, "GPUARENA_PREALLOCATE= Yes", err,
                                   sizeof err) == 0, "%s: CUDA starts: %s", mode, err);
        snprintf(want, sizeof want, "gpuarena: GPUARENA_PREALLOCATE= Yes applies to arena mode only "
                 "and does nothing in %s mode: set GPUARENA_MODE=arena", mode);
        const char *at = strstr(err, want);
        if (!strcmp(mode, "arena"))
            ck_assert_msg(err[0] == '\0', "arena: silent, got: %s", err);
        else
            ck_assert_msg(at && !strstr(at + strlen(want), "GPUARENA_PREALLOCATE="),
                          "%s: said once: %s", mode, err);
        ck_assert_msg(pt_run_child(pt_good_option_child, "GPUARENA_PREALLOCATE=false", err,
                                   sizeof err) == 0 && err[0] == '\0', "%s, false: silent: %s", mode,
                      err);
    }
}
END_TEST

/* GPUARENA_STATS=1 (a switch word, as many tools' variables take) is a file of that name in the
 * program's folder: written there, and said once with that path and the fix (it was written
 * without a word while the user looked on stderr). A real file name and - stay silent. */
struct pt_switch_arg {
    const char *dir;
    char env[2][64];
};

static void pt_switch_child(void *arg)
{
    struct pt_switch_arg *a = arg;
    if (chdir(a->dir) != 0)
        exit(2);
    for (int i = 0; i < 2; i++)
        if (a->env[i][0])
            putenv(a->env[i]);
    CUdeviceptr p;
    CUcontext c;
    int ok = cuInit(0) == CUDA_SUCCESS && cuCtxCreate(&c, NULL, 0, 0) == CUDA_SUCCESS &&
             cuMemAlloc(&p, 4096) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS;
    exit(ok ? 0 : 1);
}

START_TEST(switch_word_output_path_said)
{
    char dir[] = "/tmp/gatest-switch-XXXXXX", err[4096], want[512], path[600];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    static const char *const words[] = {"1", "true", "YES", "On"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        struct pt_switch_arg a = {.dir = dir};
        snprintf(a.env[0], sizeof a.env[0], "GPUARENA_STATS=%s", words[i]);
        /* the trace under the next switch word (one file for both keeps only the trace) */
        const char *trace = i % 2 ? "t.trace" : words[i + 1];
        snprintf(a.env[1], sizeof a.env[1], "GPUARENA_TRACE=%s", trace);
        ck_assert_msg(pt_run_child(pt_switch_child, &a, err, sizeof err) == 0, "%s: runs: %s",
                      words[i], err);
        snprintf(want, sizeof want, "gpuarena: GPUARENA_STATS=%s names a file: the statistics "
                 "will be written to '%s/%s' at exit; for stderr set GPUARENA_STATS=-", words[i],
                 dir, words[i]);
        const char *at = strstr(err, want);
        ck_assert_msg(at && !strstr(at + strlen(want), "names a file: the statistics"),
                      "%s: said once: %s", words[i], err);
        snprintf(want, sizeof want, "gpuarena: GPUARENA_TRACE=%s names a file: the trace will be "
                 "written to '%s/%s'; name a file such as run.trace", trace, dir, trace);
        ck_assert_msg(i % 2 ? !strstr(err, "GPUARENA_TRACE=") : strstr(err, want) != NULL,
                      "%s: the trace %s: %s", words[i], i % 2 ? "named t.trace is silent" : "said",
                      err);
        /* written as named: the statistics (JSON) and, under a switch word, the trace */
        snprintf(path, sizeof path, "%s/%s", dir, words[i]);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f, "%s: the statistics are in %s", words[i], path);
        int c = fgetc(f);
        fclose(f);
        ck_assert_msg(c == '{', "%s: %s holds the statistics JSON", words[i], path);
        ck_assert_int_eq(unlink(path), 0);
        snprintf(path, sizeof path, "%s/%s", dir, trace);
        ck_assert_msg(unlink(path) == 0, "%s: the trace is in %s", words[i], path);
    }
    static const char *const quiet[] = {"GPUARENA_STATS=stats.json", "GPUARENA_STATS=-",
                                        "GPUARENA_STATS=10"};
    for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++) {
        struct pt_switch_arg a = {.dir = dir};
        snprintf(a.env[0], sizeof a.env[0], "%s", quiet[i]);
        ck_assert_int_eq(pt_run_child(pt_switch_child, &a, err, sizeof err), 0);
        ck_assert_msg(!strstr(err, "names a file"), "%s: silent: %s", quiet[i], err);
        if (strcmp(quiet[i], "GPUARENA_STATS=-")) {
            snprintf(path, sizeof path, "%s/%s", dir, strchr(quiet[i], '=') + 1);
            ck_assert_int_eq(unlink(path), 0);
        }
    }
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

static void pt_libcuda_child(void *arg)
{
    putenv((char *)arg);
    exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1); /* a bad setting, issue 8 item 1 */
}

START_TEST(missing_driver_is_explained)
{
    char err[4096];
    ck_assert_int_eq(pt_run_child(pt_libcuda_child, "GPUARENA_LIBCUDA=/nonexistent/libcuda.so.1",
                                  err, sizeof err), 0);
    ck_assert_msg(strstr(err, "gpuarena: cannot load the CUDA driver '/nonexistent/libcuda.so.1'") &&
                  strstr(err, "GPUARENA_LIBCUDA="), "the message says how to fix it: %s", err);
}
END_TEST

/* Without a current context the driver's own error comes first, whatever else is wrong with the
 * arguments: the shim answers as the driver does (the simulated driver, like the real one, says
 * CUDA_ERROR_INVALID_CONTEXT), never with an error of its own. */
START_TEST(no_context_errors_are_the_drivers)
{
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS);
    CUdeviceptr p;
    size_t s;
    ck_assert_int_eq(cuMemAlloc(NULL, 100), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemAllocPitch(NULL, &s, 100, 1, 4), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemAllocPitch(&p, &s, 100, 1, 3), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemGetInfo(NULL, NULL), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_uint_eq(pt_counters().bytes_in_use, 0);
}
END_TEST

/* A pool block's calls from a thread with no context current answer as the driver answers them
 * (CUDA_ERROR_INVALID_CONTEXT, nothing freed), in every mode; a created stream names its context,
 * so a stream-ordered free on it still frees. Before (helper-46 F5, helper-49 F8): cuMemFree freed
 * the block, and the program's own later free was refused as a double free; the range was given;
 * cuIpcGetMemHandle said CUDA_ERROR_NOT_SUPPORTED. */
static CUdeviceptr noctx_p, noctx_pa, noctx_ps;
static CUstream noctx_s;
static CUresult noctx_r[8];

static void *noctx_calls(void *arg)
{
    (void)arg;
    CUdeviceptr b = 0;
    size_t n = 0;
    CUipcMemHandle h;
    noctx_r[0] = cuMemGetAddressRange(&b, &n, noctx_p + 100);
    noctx_r[1] = cuIpcGetMemHandle(&h, noctx_p);
    noctx_r[2] = cuIpcGetMemHandle(NULL, noctx_p);
    noctx_r[3] = cuMemFreeAsync(noctx_pa, NULL);
    noctx_r[4] = cuMemFree(noctx_p);
    noctx_r[5] = cuMemFree(noctx_p);
    noctx_r[6] = cuMemFreeAsync(noctx_ps, noctx_s); /* the stream's context: freed */
    noctx_r[7] = b || n;
    return NULL;
}

START_TEST(no_context_pool_calls_are_the_drivers)
{
    static const char *const modes[] = PT_ALL_MODES;
    pt_env(modes[_i], "GPUARENA_LOG=error", NULL);
    pt_start();
    ck_assert_int_eq(cuStreamCreate(&noctx_s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&noctx_p, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocAsync(&noctx_pa, MiB, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocAsync(&noctx_ps, MiB, noctx_s), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, noctx_calls, NULL), 0);
    pthread_join(t, NULL);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(noctx_r[i] == CUDA_ERROR_INVALID_CONTEXT, "%s: call %d answered %d", modes[_i],
                      i, (int)noctx_r[i]);
    ck_assert_msg(noctx_r[6] == CUDA_SUCCESS && !noctx_r[7], "%s: %d, range written %d", modes[_i],
                  (int)noctx_r[6], (int)noctx_r[7]);
    /* Kept: the program's own frees, with the context current, succeed. */
    ck_assert_int_eq(cuMemFree(noctx_p), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFreeAsync(noctx_pa, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamSynchronize(noctx_s), CUDA_SUCCESS);
}
END_TEST

/* The same from a thread whose current context another thread destroyed: it stays current there,
 * and the driver answers the calls that need one CUDA_ERROR_CONTEXT_IS_DESTROYED (cuCtxDestroy's
 * reference; the simulated driver too). The shim asked only whether a context was current, found
 * one and answered from its pools: the range given, IPC refused with CUDA_ERROR_NOT_SUPPORTED, and
 * the other context's block freed, so that its owner's own free was refused as a double free. */
static CUdeviceptr dead_p, dead_pa;
static CUcontext dead_c;
static CUresult dead_r[7];
static pthread_barrier_t dead_bar;

static void *dead_calls(void *arg)
{
    (void)arg;
    CUdeviceptr b = 0;
    size_t n = 0;
    CUipcMemHandle h;
    dead_r[0] = cuCtxCreate(&dead_c, NULL, 0, 0);
    pthread_barrier_wait(&dead_bar); /* made, current here */
    pthread_barrier_wait(&dead_bar); /* destroyed by the main thread */
    dead_r[0] = dead_r[0] ? dead_r[0] : cuMemGetAddressRange(&b, &n, dead_p + 100);
    dead_r[1] = cuIpcGetMemHandle(&h, dead_p);
    dead_r[2] = cuIpcGetMemHandle(NULL, dead_p);
    dead_r[3] = cuMemFreeAsync(dead_pa, NULL);
    dead_r[4] = cuMemFree(dead_p);
    dead_r[5] = cuMemFree(dead_p);
    dead_r[6] = b || n;
    return NULL;
}

START_TEST(destroyed_current_context_calls_are_the_drivers)
{
    static const char *const modes[] = PT_ALL_MODES;
    pt_env(modes[_i], "GPUARENA_LOG=error", NULL);
    pt_start();
    ck_assert_int_eq(cuMemAlloc(&dead_p, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocAsync(&dead_pa, MiB, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert_int_eq(pthread_barrier_init(&dead_bar, NULL, 2), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, dead_calls, NULL), 0);
    pthread_barrier_wait(&dead_bar);
    ck_assert_int_eq(cuCtxDestroy(dead_c), CUDA_SUCCESS);
    pthread_barrier_wait(&dead_bar);
    pthread_join(t, NULL);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(dead_r[i] == CUDA_ERROR_CONTEXT_IS_DESTROYED, "%s: call %d answered %d",
                      modes[_i], i, (int)dead_r[i]);
    ck_assert_msg(!dead_r[6], "%s: the range written", modes[_i]);
    /* Kept: the program's own frees, with its context current, succeed. */
    ck_assert_int_eq(cuMemFree(dead_p), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFreeAsync(dead_pa, NULL), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
}
END_TEST

/* The same for the thread that allocated, once it has made no context current itself: cuMemFree's
 * fast path knows the block's context from the thread's last allocation, and freed it without
 * asking the driver. cuCtxPopCurrent and cuCtxSetCurrent(NULL) now make the thread forget it. */
START_TEST(no_context_after_pop_free_is_the_drivers)
{
    static const char *const modes[] = PT_ALL_MODES;
    pt_env(modes[_i], "GPUARENA_LOG=error", NULL);
    CUcontext ctx = pt_start(), out;
    CUdeviceptr p, q;
    ck_assert_int_eq(cuMemAlloc(&p, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&q, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxPopCurrent(&out), CUDA_SUCCESS);
    ck_assert_msg(cuMemFree(p) == CUDA_ERROR_INVALID_CONTEXT, "%s: after cuCtxPopCurrent",
                  modes[_i]);
    ck_assert_int_eq(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(q), CUDA_SUCCESS); /* any context current: the free is made */
    ck_assert_int_eq(cuMemAlloc(&q, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    ck_assert_msg(cuMemFree(q) == CUDA_ERROR_INVALID_CONTEXT, "%s: after cuCtxSetCurrent(NULL)",
                  modes[_i]);
    ck_assert_int_eq(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS); /* kept: the program's own free succeeds */
    ck_assert_int_eq(cuMemFree(q), CUDA_SUCCESS);
}
END_TEST

/* The same after a stream-ordered allocation on another context's stream: the shim makes the
 * stream's context current for it (pushed, then popped), and the thread went on naming that
 * context as its own, so its next cuMemFree of that context's block took the fast path and freed
 * it, with no context current (201) or a destroyed one (709), and the owner's free was then
 * refused as a double free (an outside check, 2026-12-06). */
static CUstream oth_s;
static CUdeviceptr oth_p, oth_q;
static CUcontext oth_x;
static CUresult oth_r[3];
static pthread_barrier_t oth_bar;

static void *oth_calls(void *arg)
{
    (void)arg;
    oth_r[0] = cuCtxCreate(&oth_x, NULL, 0, 0);
    pthread_barrier_wait(&oth_bar); /* made, current here */
    pthread_barrier_wait(&oth_bar); /* destroyed by the main thread */
    oth_r[1] = cuMemAllocAsync(&oth_q, MiB, oth_s);
    oth_r[2] = cuMemFree(oth_p);
    return NULL;
}

START_TEST(free_after_other_streams_alloc_is_the_drivers)
{
    static const char *const modes[] = PT_ALL_MODES;
    pt_env(modes[_i], "GPUARENA_LOG=error", NULL);
    CUcontext ctx = pt_start(), out;
    CUdeviceptr q;
    ck_assert_int_eq(cuStreamCreate(&oth_s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&oth_p, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxPopCurrent(&out), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocAsync(&q, MiB, oth_s), CUDA_SUCCESS); /* in the stream's context */
    ck_assert_msg(cuMemFree(oth_p) == CUDA_ERROR_INVALID_CONTEXT, "%s: no context current",
                  modes[_i]);
    ck_assert_int_eq(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    ck_assert_int_eq(pthread_barrier_init(&oth_bar, NULL, 2), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, oth_calls, NULL), 0);
    pthread_barrier_wait(&oth_bar);
    ck_assert_int_eq(cuCtxDestroy(oth_x), CUDA_SUCCESS);
    pthread_barrier_wait(&oth_bar);
    pthread_join(t, NULL);
    ck_assert_int_eq(oth_r[0], CUDA_SUCCESS);
    ck_assert_int_eq(oth_r[1], CUDA_SUCCESS);
    ck_assert_msg(oth_r[2] == CUDA_ERROR_CONTEXT_IS_DESTROYED, "%s: destroyed context current: "
                  "%d", modes[_i], (int)oth_r[2]);
    ck_assert_int_eq(cuMemFree(oth_p), CUDA_SUCCESS); /* the owner's own free succeeds */
    ck_assert_int_eq(cuMemFreeAsync(q, oth_s), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFreeAsync(oth_q, oth_s), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    pthread_barrier_destroy(&oth_bar);
}
END_TEST

/* The same after the thread destroyed its own current context (the driver pops it): another
 * thread's context made since reuses the destroyed one's state, and a cuMemFree of its block from
 * the first thread, with no context current, answers CUDA_ERROR_INVALID_CONTEXT and frees nothing.
 * Before, the thread's cached state (that reused one) was taken as its current context and the
 * block freed (h34 F3). */
static CUcontext nocur_z;
static CUdeviceptr nocur_q;
static void *nocur_other(void *arg)
{
    CUdevice dev = 0;
    (void)arg;
    if (cuCtxCreate(&nocur_z, NULL, 0, dev) || cuMemAlloc(&nocur_q, MiB))
        nocur_q = 0;
    return NULL;
}

START_TEST(no_context_after_own_destroy_free_is_the_drivers)
{
    static const char *const modes[] = PT_ALL_MODES;
    pt_env(modes[_i], "GPUARENA_LOG=error", NULL);
    CUdevice dev;
    CUcontext x, cur = (CUcontext)1;
    CUdeviceptr a, base;
    size_t n;
    ck_assert_int_eq(cuInit(0), CUDA_SUCCESS); /* no context current: X is the thread's only one */
    ck_assert_int_eq(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxCreate(&x, NULL, 0, dev), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&a, MiB), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(x), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    ck_assert_msg(cur == NULL, "the driver pops a destroyed current context");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, nocur_other, NULL), 0);
    pthread_join(t, NULL);
    ck_assert_msg(nocur_q != 0, "%s: the other thread's context and block", modes[_i]);
    CUresult r = cuMemFree(nocur_q);
    ck_assert_msg(r == CUDA_ERROR_INVALID_CONTEXT, "%s: cuMemFree with no context current "
                  "answered %d", modes[_i], (int)r);
    ck_assert_int_eq(cuCtxSetCurrent(nocur_z), CUDA_SUCCESS);
    ck_assert_msg(cuMemGetAddressRange(&base, &n, nocur_q) == CUDA_SUCCESS && base == nocur_q,
                  "%s: the block is still live", modes[_i]);
    ck_assert_int_eq(cuMemFree(nocur_q), CUDA_SUCCESS);
    ck_assert_int_eq(cuCtxDestroy(nocur_z), CUDA_SUCCESS);
}
END_TEST

/* Calls refused for their arguments, and frees the pool or the driver refused, counted in the
 * statistics as the failures they are (they were left out: alloc_calls 1, failed_allocs 0, no
 * cuMemAllocPitch entry, while the shim warned of the refused frees). */
static void refused_counted_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p, q;
    size_t pitch;
    if (cuMemAlloc(NULL, 100) != CUDA_ERROR_INVALID_VALUE || cuMemAlloc(&p, 0) != CUDA_ERROR_INVALID_VALUE ||
        cuMemAllocPitch(&p, &pitch, 100, 1, 3) != CUDA_ERROR_INVALID_VALUE ||
        cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL) != CUDA_ERROR_INVALID_VALUE)
        exit(2);
    if (cuMemAlloc(&p, 4096) || cuMemAlloc(&q, 4096) || cuMemFree(p))
        exit(3);
    if (cuMemFree(p) != CUDA_ERROR_INVALID_VALUE ||       /* freed already, pending */
        cuMemFree(q + 512) != CUDA_ERROR_INVALID_VALUE || /* interior */
        cuMemFree((CUdeviceptr)0x1234500) != CUDA_ERROR_INVALID_VALUE) /* nobody's: the driver */
        exit(4);
    exit(0);
}

START_TEST(refused_calls_counted)
{
    char stats[] = "/tmp/gpuarena-refused-XXXXXX", senv[128], err[4096];
    close(mkstemp(stats));
    snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
    pt_env(senv, "GPUARENA_LOG=error", NULL);
    ck_assert_int_eq(pt_run_child(refused_counted_child, NULL, err, sizeof err), 0);
    ck_assert_msg(pt_json_check(stats, "d['totals']['alloc_calls'] == 6 and "
                                       "d['totals']['failed_allocs'] == 4 and "
                                       "d['by_api']['cuMemAlloc'] == {'calls': 4, 'failed': 2, "
                                       "'bytes': 8192} and "
                                       "d['by_api']['cuMemAllocPitch']['failed'] == 1 and "
                                       "d['by_api']['cuMemAllocManaged']['failed'] == 1 and "
                                       "d['by_api']['cuMemFree'] == {'calls': 4, 'failed': 3, "
                                       "'bytes': 0}") == 0,
                  "the statistics count every refused call: %s", err);
    /* The warning for refused frees is said once, with what to do (it came at every refused
     * free: 2,000 lines for a program freeing in a loop). */
    pt_env("GPUARENA_LOG=warn", NULL);
    ck_assert_int_eq(pt_run_child(refused_counted_child, NULL, err, sizeof err), 0);
    const char *first = strstr(err, "refused: ");
    ck_assert_msg(first && !strstr(first + 1, "refused: ") &&
                  strstr(err, "free each pointer an allocation returned, once"), "%s", err);
    unlink(stats);
}
END_TEST

/* A setting made with setenv after the shim read its settings (helper-43 F7): a lookup of a CUDA
 * function (dlsym through libcuda's handle, as a framework resolving the driver does) starts the
 * shim, so a GPUARENA_LIMIT set after it is not obeyed; that was silent, and the program ran
 * uncapped believing otherwise. It is said now, once per variable, naming the value read. */
static void te_setenv_late_child(void *arg)
{
    CUdeviceptr p;
    (void)arg;
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h || !dlsym(h, "cuDriverGetVersion"))
        exit(2);
    setenv("GPUARENA_LIMIT", "16MiB", 1);
    pt_start();
    exit(cuMemAlloc(&p, 32 * MiB) == CUDA_SUCCESS ? 0 : 3);
}

START_TEST(setenv_after_settings_read_is_said)
{
    char err[8192];
    int rc = pt_run_child(te_setenv_late_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d: the setting read at start holds; %s", rc, err);
    const char *m = strstr(err, "gpuarena: GPUARENA_LIMIT is '16MiB' now but was unset when "
                                "gpuarena read its settings");
    ck_assert_msg(m && strstr(m, "before the program starts"), "%s", err);
    ck_assert_msg(!strstr(m + 20, "GPUARENA_LIMIT is"), "said twice: %s", err);
}
END_TEST

TCase *pt_tcase_errors(void)
{
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, null_out_params);
    tcase_add_test(tc, setenv_after_settings_read_is_said);
    tcase_add_test(tc, no_context_errors_are_the_drivers);
    tcase_add_loop_test(tc, no_context_pool_calls_are_the_drivers, 0, 4);
    tcase_add_loop_test(tc, no_context_after_pop_free_is_the_drivers, 0, 4);
    tcase_add_loop_test(tc, destroyed_current_context_calls_are_the_drivers, 0, 4);
    tcase_add_loop_test(tc, no_context_after_own_destroy_free_is_the_drivers, 0, 4);
    tcase_add_loop_test(tc, free_after_other_streams_alloc_is_the_drivers, 0, 4);
    tcase_add_test(tc, size_zero);
    tcase_add_test(tc, bad_frees_arena);
    tcase_add_test(tc, double_frees_while_pending);
    tcase_add_test(tc, bad_frees_platform);
    tcase_add_test(tc, foreign_pointer_freed_by_driver);
    tcase_add_loop_test(tc, ipc_refused_for_arena, 0, 3);
    tcase_add_test(tc, ipc_passes_in_platform);
    tcase_add_test(tc, bad_option_values);
    tcase_add_test(tc, good_option_values);
    tcase_add_test(tc, keep_outside_vmm_said);
    tcase_add_test(tc, preallocate_outside_arena_said);
    tcase_add_test(tc, switch_word_output_path_said);
    tcase_add_test(tc, missing_driver_is_explained);
    tcase_add_test(tc, refused_calls_counted);
    return tc;
}
