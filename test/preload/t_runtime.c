/* Preload tests: the CUDA runtime.
 *
 * The real libcudart.so.13 from the toolkit is dlopen'ed on the simulated driver. It finds the
 * driver the way it does on a GPU machine (dlopen libcuda.so.1, dlsym cuGetProcAddress_v2, then one
 * request per entry point) and stops at its export-table check, which a simulated driver cannot
 * pass: enough to see every entry point it was given. Two observers agree: the driver's request log
 * (simcuda_getproc_log: what the runtime asked), re-issued through the shim, must yield the
 * shim's hooks; and the shim's debug log must show that each of the runtime's memory requests went
 * through the shim and was answered with a hook.
 * The runtime-level hooks (cudaMalloc tagging) are checked with a tiny stand-in runtime
 * (fake_cudart.c) whose cudaMalloc calls cuMemAlloc_v2, as the real one does underneath.
 */
#include "preload_test.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The toolkit's runtime: PT_CUDART, set by the tier from make's CUDA (it was this path alone, so
 * with make CUDA=DIR the test found nothing there and passed without running); the tier marks
 * the test skipped, with the reason, where the file is not there (headers-only toolkits). */
static const char *pt_cudart(void)
{
    const char *p = getenv("PT_CUDART");
    return p && *p ? p : "/usr/local/cuda/lib64/libcudart.so.13";
}
#define CUDART_PATH pt_cudart()

int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);
int cudaMemGetInfo(size_t *f, size_t *t);

typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult *);

static const char *pt_memory_entries[] = {
    "cuMemAlloc", "cuMemAllocPitch", "cuMemFree", "cuMemGetInfo", "cuMemGetAddressRange",
    "cuPointerGetAttribute", "cuPointerGetAttributes", "cuMemAllocManaged", "cuMemAllocAsync",
    "cuMemAllocFromPoolAsync", "cuMemFreeAsync", "cuMemCreate", "cuMemRelease",
    "cuIpcGetMemHandle", "cuCtxDestroy", "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxRelease",
    "cuMemPoolDestroy",
};

static int pt_is_memory_entry(const char *sym)
{
    for (size_t i = 0; i < sizeof pt_memory_entries / sizeof pt_memory_entries[0]; i++)
        if (!strcmp(sym, pt_memory_entries[i]))
            return 1;
    return 0;
}

/* Runs the real runtime up to its first failure, with the shim's debug log captured in logbuf. */
static void pt_run_cudart(char *logbuf, size_t len)
{
    char path[] = "/tmp/gpuarena-cudart-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    ck_assert_int_ge(fd, 0);
    dup2(fd, 2);
    void *h = dlopen(CUDART_PATH, RTLD_NOW | RTLD_LOCAL);
    int (*count)(int *) = h ? (int (*)(int *))dlsym(h, "cudaGetDeviceCount") : NULL;
    int n = -1;
    if (count)
        count(&n); /* fails at the export table on a simulated driver: expected */
    dup2(saved, 2);
    close(saved);
    ssize_t got = pread(fd, logbuf, len - 1, 0);
    logbuf[got > 0 ? got : 0] = '\0';
    close(fd);
    unlink(path);
    ck_assert_msg(h != NULL, "dlopen %s: %s", CUDART_PATH, dlerror());
}

START_TEST(real_cudart_gets_hooks)
{
    if (access(CUDART_PATH, R_OK) != 0) {
        fprintf(stderr, "skipped: %s not installed\n", CUDART_PATH);
        return;
    }
    pt_env("GPUARENA_LOG=debug", NULL);
    static char logbuf[1 << 20];
    pt_run_cudart(logbuf, sizeof logbuf);
    size_t n = simcuda_getproc_log_count();
    ck_assert_msg(n > 20, "the runtime asked the driver for its entry points (%zu asked)", n);
    getproc_v2_fn gp = (getproc_v2_fn)dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    int memory = 0, saw_alloc = 0, saw_async_ptsz = 0;
    for (size_t i = 0; i < n; i++) {
        const char *sym;
        int version;
        unsigned long long flags;
        void *ret;
        ck_assert_int_eq(simcuda_getproc_log_entry(i, &sym, &version, &flags, &ret), 0);
        if (!ret || !pt_is_memory_entry(sym))
            continue;
        memory++;
        saw_alloc |= !strcmp(sym, "cuMemAlloc");
        saw_async_ptsz |= !strcmp(sym, "cuMemAllocAsync") && (flags & 2);
        char line[256];
        snprintf(line, sizeof line, "cuGetProcAddress_v2('%s', %d, %llu) -> gpuarena hook", sym,
                 version, flags);
        ck_assert_msg(strstr(logbuf, line), "the runtime's request went through the shim: %s", line);
        void *f = NULL;
        CUdriverProcAddressQueryResult q;
        ck_assert_int_eq(gp(sym, &f, version, flags, &q), CUDA_SUCCESS);
        ck_assert_msg(pt_in_shim(f, NULL), "re-issued %s@%d flags %llu gives the shim's hook", sym,
                      version, flags);
    }
    ck_assert_msg(memory >= 8, "the runtime asked for its memory entry points (%d)", memory);
    ck_assert_msg(saw_alloc && saw_async_ptsz, "cuMemAlloc and per-thread cuMemAllocAsync asked");
}
END_TEST

static void pt_runtime_child(void *arg)
{
    (void)arg;
    pt_start();
    void *p[3];
    for (int i = 0; i < 3; i++)
        if (cudaMalloc(&p[i], 1000) != 0)
            exit(2);
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != 0 || t == 0)
        exit(3);
    for (int i = 0; i < 3; i++)
        if (cudaFree(p[i]) != 0)
            exit(4);
    exit(0);
}

START_TEST(runtime_hooks_count_once)
{
    char stats[] = "/tmp/gpuarena-rt-stats-XXXXXX", env[128], err[4096];
    close(mkstemp(stats));
    snprintf(env, sizeof env, "GPUARENA_STATS=%s", stats);
    pt_env(env, NULL);
    ck_assert_int_eq(pt_run_child(pt_runtime_child, NULL, err, sizeof err), 0);
    ck_assert_int_eq(pt_json_check(stats, "d['totals']['alloc_calls'] == 3 and "
                                          "d['by_api']['cudaMalloc']['calls'] == 3 and "
                                          "d['by_api']['cudaMalloc']['bytes'] == 3000 and "
                                          "'cuMemAlloc' not in d['by_api'] and "
                                          "d['by_api']['cudaFree']['calls'] == 3"), 0);
    unlink(stats);
}
END_TEST

TCase *pt_tcase_runtime(void)
{
    TCase *tc = tcase_create("runtime");
    tcase_add_test(tc, real_cudart_gets_hooks);
    tcase_add_test(tc, runtime_hooks_count_once);
    return tc;
}
