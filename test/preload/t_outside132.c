/* Findings of an outside check of issue 3 (the shim's interposition paths) on 2026-12-07
 * (helper-132), each a test that failed before its fix. */
#include "preload_test.h"
#include "t_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A program that is not linked to the driver: it probes for one (dlsym of cuInit, through which
 * gpuarena starts), then loads the driver itself from a path the loader does not search, and
 * allocates 100 blocks of 1 MiB through it. Prints: the probe's cuInit before and after the load,
 * how many blocks were granted, and the simulated driver's cuMemAlloc_v2 calls and peak bytes. */
static const char o132_late_py[] =
    "import ctypes, sys\n"
    "early = ctypes.CDLL(None).cuInit\n"
    "before = early(0)\n"
    "drv = ctypes.CDLL(sys.argv[1])\n"
    "after = early(0)\n"
    "ctx = ctypes.c_void_p()\n"
    "if drv.cuInit(0) or drv.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) or "
    "drv.cuCtxSetCurrent(ctx):\n"
    "    sys.exit(3)\n"
    "p = ctypes.c_uint64()\n"
    "granted = sum(drv.cuMemAlloc_v2(ctypes.byref(p), 1 << 20) == 0 for _ in range(100))\n"
    "c = (ctypes.c_ulonglong * 256)()\n"
    "drv.simcuda_get_counters(c)\n"
    "print(before, after, granted, c[int(sys.argv[2])], c[int(sys.argv[3])])\n";

/* Whether a libcuda.so.1 loads without the simulated driver's folder: a machine with a driver
 * installed, where a program cannot be without one on the search path. */
static int o132_system_driver(void)
{
    return system("env -u LD_PRELOAD -u LD_LIBRARY_PATH python3 -c "
                  "'import ctypes; ctypes.CDLL(\"libcuda.so.1\")' 2>/dev/null") == 0;
}

/* Runs the script under mode with a 64 MiB cap, no driver on the search path; its stdout in out,
 * its stderr in err; returns its exit status. */
static int o132_run_late(const char *mode, const char *script, const char *driver, char *out,
                         size_t olen, char *err, size_t elen)
{
    char o[] = "/tmp/gpuarena-o132-out-XXXXXX", e[] = "/tmp/gpuarena-o132-err-XXXXXX";
    int fo = mkstemp(o), fe = mkstemp(e);
    ck_assert(fo >= 0 && fe >= 0);
    char a[32], b[32];
    snprintf(a, sizeof a, "%zu", offsetof(simcuda_counters_t, alloc_calls) / sizeof(unsigned long long));
    snprintf(b, sizeof b, "%zu",
             offsetof(simcuda_counters_t, peak_bytes_in_use) / sizeof(unsigned long long));
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dup2(fo, 1);
        dup2(fe, 2);
        unsetenv("LD_LIBRARY_PATH");
        setenv("GPUARENA_MODE", mode, 1);
        setenv("GPUARENA_LIMIT", "64MiB", 1);
        setenv("ASAN_OPTIONS", "detect_leaks=0:verify_asan_link_order=0", 1);
        execlp("python3", "python3", script, driver, a, b, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ssize_t n = pread(fo, out, olen - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    n = pread(fe, err, elen - 1, 0);
    err[n > 0 ? n : 0] = '\0';
    close(fo), close(fe), unlink(o), unlink(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* "The real libcuda found by soname": a start made before the program had loaded any driver
 * (any cu* lookup starts gpuarena: here the probe dlsym(RTLD_DEFAULT, "cuInit")) kept "no driver"
 * for ever, so the driver the program then loaded by its path was answered with its own
 * functions: 100 blocks of 1 MiB granted under GPUARENA_LIMIT=64MiB, all through the driver's
 * cuMemAlloc_v2, in every mode, exit 0. Now the first lookup after the load takes that driver. */
START_TEST(driver_loaded_late_by_path_is_served)
{
    static const char *const modes[4] = {"arena", "grow", "vmm", "platform"};
    if (o132_system_driver()) {
        fprintf(stderr, "driver_loaded_late_by_path_is_served: a libcuda.so.1 is installed here, "
                        "so no program can lack one: not run\n");
        return;
    }
    tf_dir_t d;
    char script[256], dir[] = "/tmp/gpuarena-o132-XXXXXX", copy[512];
    tf_mkdir(&d);
    tf_at(&d, "late.py", script, sizeof script);
    FILE *f = fopen(script, "w");
    ck_assert_ptr_nonnull(f);
    fputs(o132_late_py, f);
    fclose(f);
    pt_copy_lib(NULL, dir, "libcuda.so.1", copy, sizeof copy);
    static char out[4][256], err[4][8192];
    int rc[4];
    for (size_t m = 0; m < 4; m++)
        rc[m] = o132_run_late(modes[m], script, copy, out[m], sizeof out[m], err[m], sizeof err[m]);
    pt_copy_lib_remove(dir, copy); /* before the checks: nothing left behind when one fails */
    tf_rmtree(d.path);
    for (size_t m = 0; m < 4; m++) {
        int before = -1, after = -1, granted = -1;
        unsigned long long drv_allocs = 0, peak = 0;
        ck_assert_msg(rc[m] == 0 && sscanf(out[m], "%d %d %d %llu %llu", &before, &after,
                                           &granted, &drv_allocs, &peak) == 5,
                      "%s: exit %d, out '%s': %s", modes[m], rc[m], out[m], err[m]);
        ck_assert_msg(before == CUDA_ERROR_NOT_INITIALIZED && after == CUDA_SUCCESS,
                      "%s: the probe's cuInit answered %d before the load, %d after", modes[m],
                      before, after);
        ck_assert_msg(granted == 64 && peak <= 64 * MiB,
                      "%s: %d MiB granted under a 64 MiB cap, the driver's peak %llu bytes: the "
                      "driver the program loaded was not served by gpuarena", modes[m], granted,
                      peak);
        ck_assert_msg(!strcmp(modes[m], "platform") ? drv_allocs == 64 : drv_allocs < 8,
                      "%s: %llu calls reached the driver's cuMemAlloc_v2", modes[m], drv_allocs);
        ck_assert_msg(strstr(err[m], "loaded the CUDA driver itself") && strstr(err[m], copy),
                      "%s: no word that the driver loaded late is served: %s", modes[m], err[m]);
    }
}
END_TEST

/* Three cuMemAlloc calls of 1, 3 and 2 MiB; their answers on stderr. */
static void o132_refused_child(void *arg)
{
    (void)arg;
    CUdeviceptr a = 0, b = 0, c = 0;
    pt_start();
    CUresult r1 = cuMemAlloc(&a, 1 << 20), r2 = cuMemAlloc(&b, 3 << 20);
    CUresult r3 = cuMemAlloc(&c, 2 << 20);
    fprintf(stderr, "\nanswers %d %d %d\n", (int)r1, (int)r2, (int)r3);
    exit(0);
}

/* "The driver's own error codes passed back unchanged": a cuMemAlloc_v2 the driver refused with
 * another code than out-of-memory (a sticky CUDA_ERROR_ILLEGAL_ADDRESS after a kernel fault,
 * CUDA_ERROR_NOT_PERMITTED) reached the program as CUDA_ERROR_OUT_OF_MEMORY with an
 * out-of-memory line (grow: "out of memory from fragmentation ... Try: GPUARENA_MODE=vmm"), in
 * platform mode too, where every cuMemAlloc is the driver's own; arena's failed preallocation said
 * "the device has less free". Now the program gets the driver's code, said once; a refusal that
 * has passed leaves nothing behind, and the cap still answers out-of-memory. */
START_TEST(driver_refusal_code_passed_back)
{
    static const char *const modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow",
                                        "GPUARENA_MODE=platform"};
    char err[8192];
    int r1, r2, r3;
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        pt_env(modes[m], "GPUARENA_LIMIT=64MiB",
               "SIMCUDA_FAIL=cuMemAlloc_v2:1+:CUDA_ERROR_ILLEGAL_ADDRESS", NULL);
        ck_assert_int_eq(pt_run_child(o132_refused_child, NULL, err, sizeof err), 0);
        const char *a = strstr(err, "\nanswers ");
        ck_assert_msg(a && sscanf(a, "\nanswers %d %d %d", &r1, &r2, &r3) == 3, "%s: %s",
                      modes[m], err);
        ck_assert_msg(r1 == CUDA_ERROR_ILLEGAL_ADDRESS && r2 == r1 && r3 == r1,
                      "%s: the driver refused with 700, the program got %d %d %d: %s", modes[m],
                      r1, r2, r3, err);
        ck_assert_msg(strstr(err, "CUresult 700, not for lack of memory") &&
                          !strstr(err, "out of memory") && !strstr(err, "has less free"),
                      "%s: said as an out-of-memory: %s", modes[m], err);
    }
    /* Platform, a 4 MiB cap; the driver refuses the first call only: the second is granted, and
     * the third is past the cap, out-of-memory, not the passed refusal's code. (Grow retries a
     * refused region smaller, so its first allocation is granted.) */
    for (size_t m = 2; m < sizeof modes / sizeof modes[0]; m++) {
        pt_env(modes[m], "GPUARENA_LIMIT=4MiB",
               "SIMCUDA_FAIL=cuMemAlloc_v2:1:CUDA_ERROR_NOT_PERMITTED", NULL);
        ck_assert_int_eq(pt_run_child(o132_refused_child, NULL, err, sizeof err), 0);
        const char *a = strstr(err, "\nanswers ");
        ck_assert_msg(a && sscanf(a, "\nanswers %d %d %d", &r1, &r2, &r3) == 3, "%s", err);
        ck_assert_msg(r1 == CUDA_ERROR_NOT_PERMITTED && r2 == CUDA_SUCCESS &&
                          r3 == CUDA_ERROR_OUT_OF_MEMORY,
                      "%s: answers %d %d %d (800 0 2 expected): %s", modes[m], r1, r2, r3, err);
    }
}
END_TEST

/* vmm mode makes its granules with cuMemCreate, cuMemMap and cuMemSetAccess: a sticky error there
 * (CUDA_ERROR_ILLEGAL_ADDRESS after a kernel fault, which the program's own cuMemAlloc would have
 * had too) is the program's answer, said once; a code that only says the device cannot serve vmm
 * mode (CUDA_ERROR_NOT_SUPPORTED) stays an out-of-memory whose line names it. Until 2026-12-07 the
 * sticky error too reached the program as CUDA_ERROR_OUT_OF_MEMORY with advice to change modes
 * (helper-132's note). */
START_TEST(vmm_sticky_refusal_passed_back)
{
    char err[8192];
    int r1, r2, r3;
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=64MiB",
           "SIMCUDA_FAIL=cuMemCreate:1+:CUDA_ERROR_ILLEGAL_ADDRESS", NULL);
    ck_assert_int_eq(pt_run_child(o132_refused_child, NULL, err, sizeof err), 0);
    const char *a = strstr(err, "\nanswers ");
    ck_assert_msg(a && sscanf(a, "\nanswers %d %d %d", &r1, &r2, &r3) == 3, "%s", err);
    ck_assert_msg(r1 == CUDA_ERROR_ILLEGAL_ADDRESS && r2 == r1 && r3 == r1,
                  "the driver refused with 700, the program got %d %d %d: %s", r1, r2, r3, err);
    ck_assert_msg(strstr(err, "CUresult 700, not for lack of memory") &&
                      !strstr(err, "out of memory"), "said as an out-of-memory: %s", err);
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_LIMIT=64MiB",
           "SIMCUDA_FAIL=cuMemCreate:1+:CUDA_ERROR_NOT_SUPPORTED", NULL);
    ck_assert_int_eq(pt_run_child(o132_refused_child, NULL, err, sizeof err), 0);
    a = strstr(err, "\nanswers ");
    ck_assert_msg(a && sscanf(a, "\nanswers %d %d %d", &r1, &r2, &r3) == 3, "%s", err);
    ck_assert_msg(r1 == CUDA_ERROR_OUT_OF_MEMORY && r2 == r1 && r3 == r1,
                  "not supported: the program got %d %d %d: %s", r1, r2, r3, err);
    ck_assert_msg(strstr(err, "CUresult 801"), "the code not named: %s", err);
}
END_TEST

TCase *pt_tcase_outside132(void)
{
    TCase *tc = tcase_create("outside132");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, driver_loaded_late_by_path_is_served);
    tcase_add_test(tc, driver_refusal_code_passed_back);
    tcase_add_test(tc, vmm_sticky_refusal_passed_back);
    return tc;
}
