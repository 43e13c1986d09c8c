/* Preload tests for "Hardening II" (issue 8), each a class of fault that passed before the fix:
 * a bad setting on every interposition path (item 1), teardown racing allocation (2), idle memory
 * of one context serving another (3), settings that round to nothing (5), driver parity for freed
 * pool pointers and bad streams (6), and a forked child's statistics (10). Item 4 (a driver that
 * lacks entry points) is the lean tier (t_lean.c); items 7 and 8 are t_files.c.
 */
#include "preload_test.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../allocator/ga_trace.h"

static const char *const modes[] = PT_ALL_MODES;

/* ---- item 1: a bad setting stops every path ---- */
static void bad_setting_child(void *arg)
{
    putenv((char *)arg);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CUresult (*init)(unsigned) = h ? (CUresult (*)(unsigned))dlsym(h, "cuInit") : NULL;
    CUresult (*getproc)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        h ? (CUresult (*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))
                dlsym(h, "cuGetProcAddress_v2")
          : NULL;
    CUresult (*alloc)(CUdeviceptr *, size_t) =
        h ? (CUresult (*)(CUdeviceptr *, size_t))dlsym(h, "cuMemAlloc_v2") : NULL;
    if (!init || !getproc || !alloc)
        exit(10);
    if (init(0) != CUDA_ERROR_INVALID_VALUE) /* dlopen + dlsym */
        exit(11);
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    if (getproc("cuInit", &fn, 12000, 0, &st) != CUDA_ERROR_INVALID_VALUE) /* cuGetProcAddress */
        exit(12);
    CUdeviceptr p;
    if (alloc(&p, 4096) != CUDA_ERROR_INVALID_VALUE)
        exit(13);
    if (cuInit(0) != CUDA_ERROR_INVALID_VALUE) /* direct */
        exit(14);
    exit(0);
}

START_TEST(bad_setting_every_path)
{
    /* A library that loads but is no driver, and the shim itself (their calls reached the real
     * driver uncapped through dlsym and cuGetProcAddress, or spun in cuGetProcAddress for ever:
     * an outside check, 2026-12-06). */
    static char self[PATH_MAX + 32];
    snprintf(self, sizeof self, "GPUARENA_LIBCUDA=%s", getenv("PT_SHIM"));
    char *const bad[] = {"GPUARENA_LIMIT=12XB", "GPUARENA_MODE=fast",
                         "GPUARENA_LIBCUDA=/nonexistent/libcuda.so.1",
                         "GPUARENA_LIBCUDA=libm.so.6", self};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[4096];
        int rc = pt_run_child(bad_setting_child, bad[i], err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (10 no symbols, 11 dlsym cuInit, 12 cuGetProcAddress, "
                      "13 dlsym cuMemAlloc, 14 direct cuInit answered without the error); %s",
                      bad[i], rc, err);
        ck_assert_msg(strstr(err, "gpuarena:"), "%s: a message: %s", bad[i], err);
    }
}
END_TEST

/* GPUARENA_LIBCUDA naming a copy of the driver while the program loads the one on its library
 * path: the program's lookups in its driver get the shim's hooks (they got that driver's own
 * functions, uncapped and uncounted: an outside check, 2026-12-06), and a warning says why. */
static void other_driver_child(void *arg)
{
    putenv((char *)arg);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        exit(10);
    static const char *names[] = {"cuInit", "cuMemAlloc_v2", "cuMemFree_v2", "cuGetProcAddress_v2"};
    for (int i = 0; i < 4; i++)
        if (!pt_in_shim(dlsym(h, names[i]), NULL))
            exit(11 + i);
    exit(0);
}

START_TEST(other_driver_copy_gets_the_hooks)
{
    char dir[] = "/tmp/gpuarena-drv-XXXXXX", copy[128], env[160], err[4096];
    pt_copy_lib(NULL, dir, "libcuda.so.1", copy, sizeof copy);
    snprintf(env, sizeof env, "GPUARENA_LIBCUDA=%s", copy);
    int rc = pt_run_child(other_driver_child, env, err, sizeof err);
    pt_copy_lib_remove(dir, copy);
    ck_assert_msg(rc == 0, "exit %d (11-14: a lookup answered by the program's driver): %s", rc, err);
    ck_assert_msg(strstr(err, "another CUDA driver than the one gpuarena uses") &&
                  strstr(err, "so the cap holds"), "the warning: %s", err);
}
END_TEST

/* The program loads the system's driver (as a framework does), then a copy of it under a file
 * name that is not libcuda.so*: known as a driver by its soname and exports, its hooked names
 * get the hooks (they were its own, uncapped, silently: an outside check, 2026-12-06). */
static void renamed_driver_child(void *arg)
{
    void *sys = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CUresult (*init)(unsigned) = sys ? (CUresult (*)(unsigned))dlsym(sys, "cuInit") : NULL;
    if (!init || init(0) != CUDA_SUCCESS)
        exit(10);
    void *h = dlopen((const char *)arg, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        exit(9);
    static const char *names[] = {"cuInit", "cuMemAlloc_v2", "cuMemFree_v2", "cuGetProcAddress_v2"};
    for (int i = 0; i < 4; i++)
        if (!pt_in_shim(dlsym(h, names[i]), NULL))
            exit(11 + i);
    exit(0);
}

START_TEST(renamed_driver_copy_gets_the_hooks)
{
    char dir[] = "/tmp/gpuarena-drv-XXXXXX", copy[128], err[4096];
    pt_copy_lib(NULL, dir, "libnvcuda-compat.so", copy, sizeof copy);
    int rc = pt_run_child(renamed_driver_child, copy, err, sizeof err);
    pt_copy_lib_remove(dir, copy);
    ck_assert_msg(rc == 0, "exit %d (11-14: a lookup answered by the copy itself): %s", rc, err);
    ck_assert_msg(strstr(err, "libnvcuda-compat.so, another CUDA driver than the one gpuarena uses") &&
                  strstr(err, "so the cap holds") && !strstr(err, "GPUARENA_LIBCUDA at"),
                  "the warning: %s", err);
}
END_TEST

/* A device plugin's interposer (its own soname, driver names defined) keeps its functions: it is
 * no driver, whatever it exports (test/preload/fake_plugin.c). */
static void plugin_child(void *arg)
{
    (void)arg;
    if (cuInit(0) != CUDA_SUCCESS)
        exit(10);
    void *h = dlopen("libgaplugin.so", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        exit(9);
    void *f = dlsym(h, "cuMemAlloc_v2");
    exit(!f ? 11 : pt_in_shim(f, NULL) ? 12 : 0);
}

START_TEST(plugin_interposer_keeps_its_functions)
{
    char err[4096];
    int rc = pt_run_child(plugin_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d (12: the plugin's function was swapped for the hook): %s", rc, err);
    ck_assert_msg(!strstr(err, "another CUDA driver"), "nothing said: %s", err);
}
END_TEST

/* ---- item 2: teardown racing allocation leaves no phantom commitment ---- */
static _Atomic int race_stop;

static void *race_alloc(void *arg)
{
    CUcontext ctx = arg;
    cuCtxSetCurrent(ctx);
    CUdeviceptr p[8] = {0};
    for (unsigned i = 0; !race_stop; i++) {
        CUdeviceptr *slot = &p[i % 8];
        if (*slot)
            cuMemFree(*slot); /* may fail after a reset: the memory went with the context */
        *slot = 0;
        if (cuMemAlloc(slot, (1 + i % 3) * MiB) != CUDA_SUCCESS)
            *slot = 0;
    }
    return NULL;
}

static void race_child(void *arg)
{
    pt_env((char *)arg, "GPUARENA_LIMIT=256MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUcontext ctx = pt_start();
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, race_alloc, ctx);
    for (int r = 0; r < 60; r++) {
        if (cuDevicePrimaryCtxReset(0) != CUDA_SUCCESS)
            exit(2);
        CUcontext again;
        cuDevicePrimaryCtxRetain(&again, 0); /* the threads' context comes back */
        cuDevicePrimaryCtxRelease(0);
    }
    race_stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    if (cuDevicePrimaryCtxReset(0) != CUDA_SUCCESS)
        exit(3);
    pt_start();
    if (pt_counters().bytes_in_use != 0)
        exit(4); /* nothing live on the driver after the last reset */
    size_t fr = 0, total = 0;
    if (cuMemGetInfo(&fr, &total) != CUDA_SUCCESS || fr != 256 * MiB)
        exit(5);
    CUdeviceptr half;
    if (cuMemAlloc(&half, 128 * MiB) != CUDA_SUCCESS)
        exit(6);
    exit(0);
}

START_TEST(reset_race_no_phantom)
{
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        char err[8192];
        int rc = pt_run_child(race_child, (void *)modes[m], err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d (4 driver bytes left, 5 free != cap, 6 half the cap "
                      "refused); %s", modes[m], rc, err);
    }
}
END_TEST

/* ---- item 3: idle memory in one context serves another ---- */
static void other_ctx_child(void *arg)
{
    pt_env((char *)arg, "GPUARENA_LIMIT=256MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUdevice dev;
    CUcontext a, b, c;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&a, NULL, 0, dev))
        exit(2);
    CUdeviceptr p, q, r;
    if (cuMemAlloc(&p, 192 * MiB) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
        exit(3);
    if (cuCtxCreate(&b, NULL, 0, dev) || cuMemAlloc(&q, 128 * MiB) != CUDA_SUCCESS)
        exit(4);
    if (cuMemFree(q) != CUDA_SUCCESS || cuCtxCreate(&c, NULL, 0, dev) ||
        cuMemAlloc(&r, 160 * MiB) != CUDA_SUCCESS)
        exit(5); /* three contexts sharing the cap */
    exit(0);
}

START_TEST(idle_memory_serves_other_context)
{
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        char err[8192];
        int rc = pt_run_child(other_ctx_child, (void *)modes[m], err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d; %s", modes[m], rc, err);
    }
}
END_TEST

/* ---- item 5: a share or cap that rounds to nothing is refused ---- */
static void zero_child(void *arg)
{
    const char *const *env = arg;
    for (; *env; env++)
        putenv((char *)*env);
    exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
}

START_TEST(zero_share_or_cap_refused)
{
    static const char *const frac[] = {"GPUARENA_MEM_FRACTION=0.0000001", "GPUARENA_LIMIT=4MiB", NULL};
    static const char *const tiny[] = {"GPUARENA_LIMIT=0.00000001%", "SIMCUDA_TOTAL_MEM=1GiB", NULL};
    static const char *const small[] = {"GPUARENA_LIMIT=1e-300%", NULL};
    const char *const *cases[] = {frac, tiny, small};
    for (size_t i = 0; i < 3; i++) {
        char err[4096];
        ck_assert_msg(pt_run_child(zero_child, (void *)cases[i], err, sizeof err) == 0,
                      "%s: cuInit refused: %s", cases[i][0], err);
        ck_assert_msg(strstr(err, "gpuarena:"), "%s: a message: %s", cases[i][0], err);
    }
}
END_TEST

/* A cap of one 512-byte block: with the default growing fraction the share (384 bytes) rounds to
 * nothing, which leaves an arena nothing but bounds no platform or vmm pool. Platform serves the
 * block; vmm starts and refuses it as an out-of-memory (a granule is 2 MiB); arena and a fixed
 * fraction in vmm mode refuse the setting at cuInit. */
static void one_block_cap_child(void *arg)
{
    const char *const *c = arg; /* mode, fraction */
    pt_env(c[0], c[1], "GPUARENA_LIMIT=512", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    CUdevice dev;
    CUcontext ctx;
    CUresult init = cuInit(0);
    if (strstr(c[0], "arena") || !strstr(c[1], "+"))
        exit(init == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
    if (init != CUDA_SUCCESS || cuDeviceGet(&dev, 0) || cuCtxCreate(&ctx, NULL, 0, dev))
        exit(2);
    CUdeviceptr p = 0;
    CUresult r = cuMemAlloc(&p, 512);
    if (strstr(c[0], "platform"))
        exit(r == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS ? 0 : 3);
    exit(r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 4);
}

START_TEST(one_block_cap_by_mode)
{
    static const char *const cases[][2] = {
        {"GPUARENA_MODE=platform", "GPUARENA_MEM_FRACTION=0.75+"},
        {"GPUARENA_MODE=vmm", "GPUARENA_MEM_FRACTION=0.75+"},
        {"GPUARENA_MODE=arena", "GPUARENA_MEM_FRACTION=0.75+"},
        {"GPUARENA_MODE=vmm", "GPUARENA_MEM_FRACTION=0.5"}, /* a fixed fraction bounds vmm */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[4096];
        int rc = pt_run_child(one_block_cap_child, (void *)cases[i], err, sizeof err);
        ck_assert_msg(rc == 0, "%s %s: exit %d; %s", cases[i][0], cases[i][1], rc, err);
    }
}
END_TEST

/* A cap under one block leaves every mode nothing (no allocation is under 512 bytes): refused at
 * cuInit in platform, grow and vmm mode too, naming GPUARENA_LIMIT (the message named
 * GPUARENA_MEM_FRACTION, and platform mode started and failed each allocation). A share that
 * rounds to nothing names both settings and the smallest cap that serves a block. */
static void refused_child(void *arg)
{
    const char *const *c = arg; /* mode, limit */
    pt_env(c[0], c[1], "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
}

START_TEST(sub_block_cap_refused)
{
    static const char *const cases[][3] = {
        {"GPUARENA_MODE=platform", "GPUARENA_LIMIT=1", "GPUARENA_LIMIT gives a cap of 1 byte, "
                                                       "less than one 512-byte block"},
        {"GPUARENA_MODE=vmm", "GPUARENA_LIMIT=511", "GPUARENA_LIMIT gives a cap of 511 bytes, "
                                                    "less than one 512-byte block"},
        {"GPUARENA_MODE=grow", "GPUARENA_LIMIT=0.00001%",
         "GPUARENA_LIMIT (a percentage of the device) gives a cap of 107 bytes"},
        {"GPUARENA_MODE=arena", "GPUARENA_LIMIT=512",
         "GPUARENA_LIMIT gives a cap of 512 bytes, and GPUARENA_MEM_FRACTION (0.75+) a share of "
         "it that rounds to 0 bytes, which bounds the arena pool; nothing could ever be allocated "
         "(raise GPUARENA_LIMIT to at least 683 bytes"},
        /* a device plugin's cap names its variable (helper-60 F7: "raise GPUARENA_LIMIT") */
        {"GPUARENA_MODE=platform", "CUDA_DEVICE_MEMORY_LIMIT=100",
         "CUDA_DEVICE_MEMORY_LIMIT (HAMi) gives a cap of 100 bytes, less than one 512-byte block; "
         "nothing could ever be allocated (raise CUDA_DEVICE_MEMORY_LIMIT to 512 bytes or more)"},
        {"GPUARENA_MODE=arena", "CUDA_DEVICE_MEMORY_LIMIT_0=512",
         "nothing could ever be allocated (raise CUDA_DEVICE_MEMORY_LIMIT to at least 683 bytes"},
        /* the README's example; the fraction as typed (it said 1e-07, refused as a value) */
        {"GPUARENA_MEM_FRACTION=0.0000001", "GPUARENA_LIMIT=4MiB",
         "GPUARENA_LIMIT gives a cap of 4194304 bytes, and GPUARENA_MEM_FRACTION (0.0000001) a "
         "share of it that rounds to 0 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[4096];
        int rc = pt_run_child(refused_child, (void *)cases[i], err, sizeof err);
        ck_assert_msg(rc == 0, "%s %s: not refused; %s", cases[i][0], cases[i][1], err);
        ck_assert_msg(strstr(err, cases[i][2]), "%s %s: %s", cases[i][0], cases[i][1], err);
    }
}
END_TEST

/* ---- item 6: driver parity ---- */
START_TEST(freed_pool_pointer_attributes)
{
    pt_env("GPUARENA_MODE=arena", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr a, keep;
    ck_assert_int_eq(cuMemAlloc(&keep, 4096), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAlloc(&a, 4096), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFree(a), CUDA_SUCCESS);
    CUcontext owner = (CUcontext)1;
    ck_assert_int_eq(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, a),
                     CUDA_ERROR_INVALID_VALUE);
    unsigned type = 99;
    ck_assert_int_eq(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a),
                     CUDA_ERROR_INVALID_VALUE);
    /* The plural form answers defaults for a pointer it does not know, not the region's. */
    CUpointer_attribute at[2] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    void *data[2] = {&owner, &type};
    ck_assert_int_eq(cuPointerGetAttributes(2, at, data, a), CUDA_SUCCESS);
    ck_assert_ptr_null(owner);
    ck_assert_uint_eq(type, 0);
    /* A live neighbour still answers as itself. */
    ck_assert_int_eq(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, keep), CUDA_SUCCESS);
    ck_assert_uint_eq(type, CU_MEMORYTYPE_DEVICE);
}
END_TEST

START_TEST(free_async_bad_stream_keeps_allocation)
{
    for (size_t m = 0; m < 3; m++) { /* the pool modes */
        char err[64];
        (void)err;
        pid_t pid = fork();
        if (pid == 0) {
            putenv((char *)modes[m]);
            pt_start();
            CUdeviceptr p, base;
            size_t size;
            if (cuMemAlloc(&p, 4096) != CUDA_SUCCESS)
                _exit(2);
            if (cuMemFreeAsync(p, (CUstream)(uintptr_t)0xdeadbeef0ull) != CUDA_ERROR_INVALID_HANDLE)
                _exit(3);
            if (cuMemGetAddressRange(&base, &size, p) != CUDA_SUCCESS || base != p)
                _exit(4); /* still live */
            if (cuMemFreeAsync(p, NULL) != CUDA_SUCCESS)
                _exit(5);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: exit %d", modes[m],
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}
END_TEST

/* ---- item 10: the statistics of a forked child are its own ---- */
/* All in a child of the test, so that every process writing statistics ends before the test looks:
 * the parent (8 MiB live) forks a grandchild that allocates 1 MiB; each writes its own report. */
static void fork_stats_child(void *arg)
{
    static char env[512];
    snprintf(env, sizeof env, "GPUARENA_STATS=%s/s-%%p.json", (const char *)arg);
    putenv(env);
    putenv("GPUARENA_MODE=arena");
    putenv("SIMCUDA_TOTAL_MEM=1GiB");
    CUcontext c;
    CUdeviceptr p, q;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c) || cuMemAlloc(&p, 8 * MiB))
        exit(2);
    pid_t pid = fork();
    if (pid == 0) {
        int ok = cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS && cuCtxSetCurrent(c) == CUDA_SUCCESS &&
                 cuMemAlloc(&q, 1 * MiB) == CUDA_SUCCESS;
        exit(ok ? 0 : 1); /* exit, not _exit: the report is written at exit */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    exit(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 3);
}

START_TEST(fork_child_statistics)
{
    char dir[] = "/tmp/gpuarena-forkstats-XXXXXX", err[4096], expr[1024];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_msg(pt_run_child(fork_stats_child, dir, err, sizeof err) == 0, "%s", err);
    /* Two reports: the parent's (8 MiB) and the child's (1 MiB alone, nothing near 2^64). */
    snprintf(expr, sizeof expr,
             "(lambda ds: len(ds) == 2 and all(x['totals']['reserved'] < 2**40 and "
             "x['totals']['peak_reserved'] < 2**40 for x in ds) and any(x['totals']['alloc_calls'] == 1 "
             "and x['totals']['in_use'] == 1024*1024 and len(x['devices']) == 1 for x in ds))"
             "([json.load(open(os.path.join(sys.argv[1], f))) for f in os.listdir(sys.argv[1])])");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "env -u LD_PRELOAD python3 -c \"import json,os,sys; "
             "sys.exit(0 if %s else 1)\" '%s'", expr, dir);
    ck_assert_msg(system(cmd) == 0, "the forked child's statistics count the child alone (%s)", dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Runs BUILD/preload/hostfail_prog (PT_SHIM names BUILD/lib/libgpuarena.so) with the variables
 * `env` before it and the arguments `args`, its stdout and stderr into out (len bytes); returns its
 * exit code (-1: killed). No leak check at the program's exit under ASan: its own malloc stands
 * between the loader and the sanitizer, which then takes the loader's lasting allocations for the
 * program's leaks. */
static int hostfail_run(char *out, size_t len, const char *env, const char *args)
{
    const char *shim = getenv("PT_SHIM");
    ck_assert_msg(shim && strrchr(shim, '/'), "PT_SHIM is set by the tier");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 %s "
             "'%.*s/../preload/hostfail_prog' %s 2>&1", env, (int)(strrchr(shim, '/') - shim),
             shim, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Host memory failing inside gpuarena at its first calls (helper-47 F2): hostfail_prog (built
 * beside this test) fails the N-th malloc, calloc, realloc or strdup the shim makes around the
 * process's first cuMemAlloc or cuMemGetInfo, once, for every N until no call is left to fail. Whatever fails, the
 * driver's peak stays within the cap and cuMemGetInfo tells the cap: a context whose state could
 * not be made had its calls passed to the driver uncounted, 200 MiB past a 256 MiB cap, and
 * cuMemGetInfo answered the device's 1 GiB. Also from before cuInit (the settings, the device
 * table), where a setting whose copy failed was then said to have been unset when read. And for a
 * first pass-through allocation (cuMemAllocManaged, cuMemCreate): one the driver served but whose
 * record could not be made was returned as a success with its bytes off the cap (456 MiB under a
 * 256 MiB cap, helper-47 F11); now it goes back to the driver and is refused. */
START_TEST(host_failure_keeps_the_cap)
{
    static const char *const modes[] = {"arena", "grow", "vmm", "platform"};
    static const char *const first[] = {"alloc", "info", "init", "managed", "create"};
    for (int m = 0; m < 4; m++)
        for (int f = 0; f < 5; f++) {
            int n, injected = 1;
            for (n = 1; n <= 200 && injected; n++) {
                char env[256], args[128], out[8192];
                snprintf(env, sizeof env, "HOSTFAIL_START=%d SIMCUDA_TOTAL_MEM=1GiB "
                         "GPUARENA_LIMIT=256MiB GPUARENA_MODE=%s", f == 2 ? n : 0, modes[m]);
                snprintf(args, sizeof args, "%d 268435456 %s", n, first[f]);
                int st = hostfail_run(out, sizeof out, env, args);
                ck_assert_msg(st == 0,
                              "%s mode, host call %d around the first %s failed: exit %d "
                              "(exit 10: the cap was exceeded, 11: cuMemGetInfo told the device's "
                              "size); %s", modes[m], n, first[f], st, out);
                /* A copy of a setting that could not be kept is no change of the setting
                 * (helper-47 F3: "GPUARENA_LIMIT ... was unset when gpuarena read its settings"). */
                ck_assert_msg(!strstr(out, "when gpuarena read its settings"), "%s mode, host "
                              "call %d around the first %s failed: a setting called changed: %s",
                              modes[m], n, first[f], out);
                /* A first call refused for want of host memory says so, and nothing else: not
                 * fragmentation, a full device, or a preallocation the device refused
                 * (helper-47 F1); the 200 MiB fit the cap, so only the host can refuse them. */
                if (!strstr(out, " first 0 ")) {
                    ck_assert_msg(strstr(out, "out of host memory"), "%s mode, host call %d "
                                  "around the first %s failed: not said: %s", modes[m], n,
                                  first[f], out);
                    ck_assert_msg(!strstr(out, "fragmentation") && !strstr(out, "itself is full")
                                  && !strstr(out, "could not preallocate"), "%s mode, host call "
                                  "%d around the first %s failed: blamed the device: %s", modes[m],
                                  n, first[f], out);
                }
                injected = strstr(out, "injected 1") != NULL;
                ck_assert_msg(injected || n > 1, "%s mode, %s: no host call of the shim to fail "
                              "(%s)", modes[m], first[f], out);
            }
            ck_assert_msg(n > 2, "%s mode: the sweep ran", modes[m]);
        }
}
END_TEST

/* The same sweep with a trace (helper-47 F4): a thread with no host memory for its trace buffer
 * had its events dropped without a word (the first cuMemAlloc missing, the replay finding an
 * unmatched free). Whichever host call of the shim fails around the first cuMemAlloc, the trace
 * reads back with every allocation the program was given (the first, each 16 MiB block) and the
 * refused one that ends the program's loop. */
START_TEST(host_failure_keeps_the_trace)
{
    char dir[] = "/tmp/gpuarena-hosttrace-XXXXXX", trace[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(trace, sizeof trace, "%s/t.gatrace", dir);
    int n, injected = 1;
    for (n = 1; n <= 200 && injected; n++) {
        char env[256], args[64], out[8192], msg[256];
        snprintf(env, sizeof env, "SIMCUDA_TOTAL_MEM=1GiB GPUARENA_LIMIT=256MiB GPUARENA_MODE=arena "
                 "GPUARENA_TRACE='%s'", trace);
        snprintf(args, sizeof args, "%d 268435456 alloc", n);
        int st = hostfail_run(out, sizeof out, env, args);
        const char *b = strstr(out, " blocks "), *f = strstr(out, " first ");
        ck_assert_msg(st == 0 && b && f, "host call %d: exit %d; %s", n, st, out);
        long served = atol(b + 8) + (atol(f + 7) == 0), traced = 0, refused = 0;
        ga_trace_t t;
        ga_trace_init(&t);
        ck_assert_msg(ga_trace_read(trace, &t, msg, sizeof msg) == 0, "host call %d: %s", n, msg);
        for (size_t i = 0; i < t.count; i++) {
            traced += t.events[i].kind == GA_EV_ALLOC && t.events[i].result == 0;
            refused += t.events[i].kind == GA_EV_ALLOC_FAILED;
        }
        ga_trace_free(&t);
        /* (A first call refused for want of the context's state is not traced: only the calls
         * the allocator saw are.) */
        ck_assert_msg(traced == served && refused >= 1, "host call %d around the first cuMemAlloc "
                      "failed: %ld allocations traced of %ld served, %ld refused; %s", n, traced,
                      served, refused, out);
        injected = strstr(out, "injected 1") != NULL;
    }
    ck_assert_msg(n > 2, "the sweep ran");
    unlink(trace);
    rmdir(dir);
}
END_TEST

/* A stream-ordered block is recorded, or refused (helper-47 F14): with the host call that made its
 * record failing, vmm mode served it unrecorded, it went with its context at cuCtxDestroy, and
 * the next context's block landed on it while the program still held it. Every host call of the
 * shim inside the cuMemAllocAsync fails once in turn, in the modes that keep such blocks: the block
 * is either kept (no later block on it) or refused with CUDA_ERROR_OUT_OF_MEMORY and a message,
 * which for the record names host memory. */
START_TEST(host_failure_keeps_stream_ordered_blocks)
{
    /* vmm and platform keep such blocks; vmm again with the failures at the destroy, where the
     * orphan pool could not list the other blocks and let the stream-ordered ones go too */
    static const char *const modes[] = {"vmm", "platform", "vmm"};
    int refused = 0;
    for (int m = 0; m < 3; m++) {
        int n, injected = 1;
        for (n = 1; n <= 200 && injected; n++) {
            char env[128], args[64], out[8192];
            snprintf(env, sizeof env, "SIMCUDA_TOTAL_MEM=1GiB GPUARENA_LIMIT=256MiB "
                     "GPUARENA_MODE=%s", modes[m]);
            snprintf(args, sizeof args, "%d 268435456 %s", n, m == 2 ? "orphan-destroy" : "orphan");
            int st = hostfail_run(out, sizeof out, env, args);
            ck_assert_msg(st == 0, "%s mode, host call %d in "
                          "cuMemAllocAsync failed: exit %d (12: the live block was handed "
                          "out again, 13: refused with another error); %s", modes[m], n, st, out);
            injected = strstr(out, "injected 1") != NULL;
            ck_assert_msg(!strstr(out, "first 2") || strstr(out, "gpuarena: "), "%s mode, host "
                          "call %d: refused without saying why: %s", modes[m], n, out);
            refused += strstr(out, "host memory ran out for gpuarena's record") != NULL;
        }
        ck_assert_msg(n > 2, "%s mode: the sweep ran", modes[m]);
    }
    ck_assert_msg(refused > 0, "the record's host call was among those failed, and said so");
}
END_TEST

/* A ninth memory pool while host memory is short (helper-69): the device's pool list grows for it,
 * and a block whose pool cannot be listed is given back and refused, its pool trimmed, so that
 * what the pool keeps never escapes the cap (before, the list held 8 pools and the 9th's kept
 * bytes were not counted at all). Every host call of the shim inside a cuMemAllocFromPoolAsync from
 * a ninth pool (eight keep 4 MiB each) fails once in turn; then 16 MiB blocks until refused: the
 * driver's peak stays within the cap, and a refused block leaves nothing kept in its pool. */
START_TEST(host_failure_keeps_pools_counted)
{
    static const char *const modes[] = {"platform", "arena"};
    int listed = 0;
    for (int m = 0; m < 2; m++) {
        int n, injected = 1;
        for (n = 1; n <= 200 && injected; n++) {
            char env[128], args[64], out[8192];
            snprintf(env, sizeof env, "SIMCUDA_TOTAL_MEM=1GiB GPUARENA_LIMIT=256MiB "
                     "GPUARENA_MODE=%s", modes[m]);
            snprintf(args, sizeof args, "%d 268435456 pools", n);
            int st = hostfail_run(out, sizeof out, env, args);
            ck_assert_msg(st == 0, "%s mode, host call %d in cuMemAllocFromPoolAsync failed: exit "
                          "%d (10: the cap was exceeded, 12: the refused block's pool kept it); %s",
                          modes[m], n, st, out);
            injected = strstr(out, "injected 1") != NULL;
            listed += strstr(out, "the device's list of memory pools") != NULL;
        }
        ck_assert_msg(n > 2, "%s mode: the sweep ran", modes[m]);
    }
    ck_assert_msg(listed > 0, "the pool list's growth was among the host calls failed, and said so");
}
END_TEST

/* A granule the driver refuses to unmap while host memory is short stays counted against the cap
 * (helper-47 F15): with the table of refused granules unable to grow, vmm gave its bytes back to
 * the cap while the device still held it, and the driver's peak passed the cap by a granule. Every
 * host call of the shim in a cuMemFree and cuCtxSynchronize that give 200 MiB back
 * (GPUARENA_VMM_KEEP=0) fails once in turn, the driver refusing every cuMemUnmap; then blocks are
 * allocated until refused: the driver's peak stays within the cap. */
START_TEST(host_failure_keeps_refused_granules)
{
    int n, injected = 1;
    for (n = 1; n <= 200 && injected; n++) {
        char args[64], out[8192];
        snprintf(args, sizeof args, "%d 268435456 free", n);
        int st = hostfail_run(out, sizeof out, "SIMCUDA_FAIL=cuMemUnmap:1+ SIMCUDA_TOTAL_MEM=1GiB "
                              "GPUARENA_LIMIT=256MiB GPUARENA_MODE=vmm GPUARENA_VMM_KEEP=0", args);
        ck_assert_msg(st == 0, "host call %d in the free failed: "
                      "exit %d (10: the driver held more than the cap); %s", n, st, out);
        injected = strstr(out, "injected 1") != NULL;
    }
    ck_assert_msg(n > 2, "the sweep ran");
}
END_TEST

/* vmm's range bookkeeping out of host memory: the driver refuses the first two address
 * reservations, so the pool's first range is 128 MiB (64 granules) and the first cuMemAlloc, of
 * 200 MiB, takes a range of its own; every host call of the shim in that cuMemAlloc fails once in
 * turn. One that fails in the range's tables (vmm_granules.c) refused the allocation as the
 * device's out-of-memory ("gpuarena: out of memory: cuMemAlloc of 200 MiB failed ... raise
 * GPUARENA_LIMIT"), where the cap and the device had room; it is a host failure (GA_ENOHOST),
 * said as the other host failures are. */
START_TEST(vmm_range_host_failure_is_host)
{
    int n, injected = 1, refused = 0;
    for (n = 1; n <= 200 && injected; n++) {
        char args[64], out[8192];
        snprintf(args, sizeof args, "%d 268435456 alloc", n);
        int st = hostfail_run(out, sizeof out, "SIMCUDA_FAIL=cuMemAddressReserve:1,"
                              "cuMemAddressReserve:2 SIMCUDA_TOTAL_MEM=1GiB GPUARENA_LIMIT=256MiB "
                              "GPUARENA_MODE=vmm", args);
        ck_assert_msg(st == 0, "host call %d: exit %d; %s", n, st, out);
        injected = strstr(out, "injected 1") != NULL;
        if (strstr(out, " first 0 "))
            continue;
        refused++;
        ck_assert_msg(strstr(out, "out of host memory") &&
                      !strstr(out, "cuMemAlloc of 200 MiB failed on device 0"), "host call %d "
                      "in the first cuMemAlloc failed: said as the device's: %s", n, out);
    }
    ck_assert_msg(n > 2 && refused > 0, "the sweep ran and refused some (%d)", refused);
}
END_TEST

/* A cuMemFree whose pending entry cannot be remembered (the list's growth fails: hostfail_prog's
 * fence mode) waits for the device itself and gives the chunk back at once. It waited for the
 * current context: a free made with context B current of context A's block returned while A's
 * queued work on the block had not run (helper-49's suspicion on ga_fence_free_slow). It now waits
 * as the pending entry would have been waited for: A, then its peers (fence-peer: the work is on
 * another context of the device, C; a wait for A alone fails it too). */
START_TEST(host_failure_free_waits_for_owner)
{
    static const char *const modes[] = {"arena", "grow", "vmm"};
    for (int i = 0; i < 6; i++) { /* the work on the owner, then on a peer of it */
        const char *mode = modes[i % 3], *what = i < 3 ? "fence" : "fence-peer";
        char env[128], args[64], out[8192];
        snprintf(env, sizeof env, "SIMCUDA_TOTAL_MEM=1GiB GPUARENA_MODE=%s", mode);
        snprintf(args, sizeof args, "1 %s", what);
        int st = hostfail_run(out, sizeof out, env, args);
        ck_assert_msg(st == 0 && strstr(out, "injected 1"),
                      "%s mode, %s: exit %d (12: the free returned before the work on "
                      "the block ran); %s", mode, what, st, out);
    }
}
END_TEST

/* Loaded for every process (/etc/ld.so.preload, issue 11 item 4): one that never touches CUDA pays
 * nothing and prints nothing, even with settings that would be refused at its first CUDA call. */
static void no_cuda_child(void *arg)
{
    (void)arg;
    putenv("GPUARENA_MODE=fast");
    putenv("GPUARENA_LIMT=1");
    void *h = dlsym(RTLD_DEFAULT, "malloc"); /* the loader, but no CUDA name */
    exit(h ? 0 : 1);
}

START_TEST(no_cuda_prints_nothing)
{
    char err[4096];
    ck_assert_int_eq(pt_run_child(no_cuda_child, NULL, err, sizeof err), 0);
    ck_assert_msg(err[0] == '\0', "nothing on stderr: '%s'", err);
}
END_TEST

TCase *pt_tcase_hardening(void)
{
    TCase *tc = tcase_create("hardening");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bad_setting_every_path);
    tcase_add_test(tc, other_driver_copy_gets_the_hooks);
    tcase_add_test(tc, renamed_driver_copy_gets_the_hooks);
    tcase_add_test(tc, plugin_interposer_keeps_its_functions);
    tcase_add_test(tc, reset_race_no_phantom);
    tcase_add_test(tc, idle_memory_serves_other_context);
    tcase_add_test(tc, zero_share_or_cap_refused);
    tcase_add_test(tc, one_block_cap_by_mode);
    tcase_add_test(tc, sub_block_cap_refused);
    tcase_add_test(tc, freed_pool_pointer_attributes);
    tcase_add_test(tc, free_async_bad_stream_keeps_allocation);
    tcase_add_test(tc, fork_child_statistics);
    tcase_add_test(tc, no_cuda_prints_nothing);
    tcase_add_test(tc, host_failure_keeps_the_cap);
    tcase_add_test(tc, host_failure_keeps_the_trace);
    tcase_add_test(tc, host_failure_keeps_stream_ordered_blocks);
    tcase_add_test(tc, host_failure_keeps_pools_counted);
    tcase_add_test(tc, host_failure_keeps_refused_granules);
    tcase_add_test(tc, vmm_range_host_failure_is_host);
    tcase_add_test(tc, host_failure_free_waits_for_owner);
    return tc;
}
