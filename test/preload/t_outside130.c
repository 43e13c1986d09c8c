/* Findings of an outside hostile check of issues 5 and 8 (hardening) on 2026-12-07 (helper-130),
 * each a test that failed before its fix.
 *
 * A block the driver freed by a path gpuarena did not see. A program's second cuMemFree of a
 * pointer (a double free) that finds no owner in gpuarena goes to the driver as a free of a
 * foreign pointer; when it races another thread's allocation that the driver has just given that
 * same address, not yet recorded by gpuarena, the driver frees the new block, and gpuarena records
 * it live. Before: in platform mode every later cuMemAlloc the driver placed at that address failed
 * with CUDA_ERROR_OUT_OF_MEMORY ("not enough free bytes in total") while most of the cap was free,
 * and the block's bytes stayed counted for good; a managed block's entry was overwritten by the
 * next block at that address, its bytes counted for good too. The race is made deterministic here
 * with the driver's own cuMemFree_v2 (glibc's dlsym, fetched by version, is the one way around the
 * shim), and run for real by threads in the second test. */
#include "preload_test.h"
#include "t_files.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*o130_free_fn)(CUdeviceptr);

/* The driver's own cuMemFree_v2, past the shim. */
static o130_free_fn o130_driver_free(void)
{
    typedef void *(*dlsym_fn)(void *, const char *);
    dlsym_fn real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    o130_free_fn f = real_dlsym && h ? (o130_free_fn)real_dlsym(h, "cuMemFree_v2") : NULL;
    if (!f || pt_in_shim((void *)f, NULL))
        exit(20);
    return f;
}

/* What cuMemGetInfo says is free under the cap, in MiB. */
static unsigned o130_free_mib(void)
{
    size_t f = 0, t = 0;
    if (cuMemGetInfo(&f, &t) != CUDA_SUCCESS || t != 64 * MiB)
        exit(21);
    return (unsigned)(f / MiB);
}

static CUresult o130_alloc(int managed, CUdeviceptr *p)
{
    return managed ? cuMemAllocManaged(p, 8 * MiB, CU_MEM_ATTACH_GLOBAL) : cuMemAlloc(p, 8 * MiB);
}

/* arg non-NULL: managed memory (pass-through in every mode), else cuMemAlloc (platform mode).
 * Exit codes say which step failed (see the test). */
static void o130_reissue_child(void *arg)
{
    int managed = arg != NULL;
    o130_free_fn drv_free = o130_driver_free();
    pt_start();
    CUdeviceptr p, q, r;
    /* 1. The driver frees p behind gpuarena; its next block of that size lands at p again. */
    if (o130_alloc(managed, &p) != CUDA_SUCCESS || drv_free(p) != CUDA_SUCCESS)
        exit(2);
    CUresult rc = o130_alloc(managed, &q);
    if (rc != CUDA_SUCCESS)
        exit(3); /* platform, before: CUDA_ERROR_OUT_OF_MEMORY */
    if (q != p)
        exit(4); /* the simulated driver hands a freed place out again: the case is not made */
    if (cuMemFree(q) != CUDA_SUCCESS)
        exit(5);
    if (o130_free_mib() != 64)
        exit(6); /* before: 56, p's bytes counted for good */
    /* 2. The driver frees r behind gpuarena; the program then frees r itself (the owner's free,
     * the other thread's having been the double one). */
    if (o130_alloc(managed, &r) != CUDA_SUCCESS || drv_free(r) != CUDA_SUCCESS)
        exit(7);
    rc = cuMemFree(r);
    if (rc != CUDA_ERROR_INVALID_VALUE)
        exit(8); /* the driver's answer for a block it no longer holds (platform, before: the
                  * same code, with "the driver or device is failing") */
    if (o130_free_mib() != 64)
        exit(9); /* before: 56 MiB, r's bytes counted for good */
    if (pt_counters().bytes_in_use != 0)
        exit(12);
    exit(0);
}

START_TEST(driver_freed_block_leaves_the_cap)
{
    static const char *const modes[] = PT_ALL_MODES;
    char err[8192];
    for (size_t m = 0; m < sizeof modes / sizeof modes[0] + 1; m++) {
        int managed = m < sizeof modes / sizeof modes[0];
        const char *mode = managed ? modes[m] : "GPUARENA_MODE=platform";
        pt_env(mode, "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LOG=warn", NULL);
        int rc = pt_run_child(o130_reissue_child, managed ? (void *)1 : NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s, %s: exit %d (3: the block at a reissued address refused; 6, "
                      "9: bytes the driver freed still counted; 8: the free's answer) %s", mode,
                      managed ? "cuMemAllocManaged" : "cuMemAlloc", rc, err);
        ck_assert_msg(strstr(err, "gpuarena: the driver no longer holds the 8388608 bytes") &&
                          strstr(err, "free each pointer once"),
                      "%s: the block freed past gpuarena was not said: %s", mode, err);
    }
}
END_TEST

/* The real race: threads free pointers twice (a stale copy) while others allocate. The program
 * never holds more than 16 blocks of 1 MiB, plus one in flight per thread, under a 64 MiB cap:
 * no allocation may fail. Before, one run in two or three had cuMemAlloc fail as out of memory
 * with 8 MiB held ("not enough free bytes in total"). */
#define O130_SLOTS 16
#define O130_THREADS 4
static _Atomic CUdeviceptr o130_slot[O130_SLOTS];
static _Atomic int o130_refused;
static CUcontext o130_ctx;

static void *o130_racer(void *arg)
{
    unsigned s = (unsigned)(uintptr_t)arg * 2654435761u + 1u;
    if (cuCtxSetCurrent(o130_ctx) != CUDA_SUCCESS)
        atomic_fetch_add(&o130_refused, 1000);
    for (int i = 0; i < 6000; i++) {
        s = s * 1103515245u + 12345u;
        int k = (int)((s >> 8) % O130_SLOTS);
        CUdeviceptr p = atomic_load(&o130_slot[k]);
        if (!p) {
            CUdeviceptr n;
            CUresult r = cuMemAlloc(&n, MiB);
            if (r == CUDA_ERROR_OUT_OF_MEMORY)
                atomic_fetch_add(&o130_refused, 1);
            CUdeviceptr z = 0;
            if (r == CUDA_SUCCESS && !atomic_compare_exchange_strong(&o130_slot[k], &z, n))
                cuMemFree(n);
        } else {
            cuMemFree(p); /* another thread may free the same p at once: a double free */
            atomic_compare_exchange_strong(&o130_slot[k], &p, 0);
        }
    }
    return NULL;
}

static void o130_race_child(void *arg)
{
    (void)arg;
    o130_ctx = pt_start();
    pthread_t t[O130_THREADS];
    for (int i = 0; i < O130_THREADS; i++)
        if (pthread_create(&t[i], NULL, o130_racer, (void *)(uintptr_t)(i + 1)) != 0)
            exit(2);
    for (int i = 0; i < O130_THREADS; i++)
        pthread_join(t[i], NULL);
    int refused = atomic_load(&o130_refused);
    if (refused)
        fprintf(stderr, "%d allocations refused as out of memory\n", refused);
    exit(refused ? 3 : 0);
}

START_TEST(double_free_race_no_false_oom)
{
    char err[8192];
    pt_env("GPUARENA_MODE=platform", "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB",
           "GPUARENA_LOG=error", NULL);
    for (int run = 0; run < 3; run++) {
        int rc = pt_run_child(o130_race_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "run %d: exit %d (3: an allocation refused as out of memory with "
                      "at most 20 MiB held under 64 MiB): %s", run, rc, err);
    }
}
END_TEST

/* The program's own output named as GPUARENA_STATS or GPUARENA_TRACE: a file it opened for
 * writing (arg "fopen": stdio, flushed by exit(), which runs after the shim's destructor; "stdout":
 * its standard output sent there, as `prog > out` does) and still holds, empty while its buffer
 * waits. Before: the report replaced the file, the program's output going on into the replaced
 * one (lost), and the trace was written into it with the program's text over the trace's header
 * (both unreadable). */
static void o130_own_output_child(void *arg)
{
    const char *how = arg, *path = getenv("O130_OUT");
    FILE *f = NULL;
    if (!strcmp(how, "fopen"))
        f = fopen(path, "w");
    else {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 1) != 1)
            exit(2);
        close(fd);
        f = stdout; /* a file: fully buffered */
    }
    if (!f)
        exit(2);
    pt_start();
    CUdeviceptr p;
    if (cuMemAlloc(&p, MiB) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
        exit(3);
    fprintf(f, "results: 42\n");
    exit(0);
}

START_TEST(program_output_never_taken)
{
    static const char *const vars[] = {"GPUARENA_STATS", "GPUARENA_TRACE"};
    static const char *const hows[] = {"fopen", "stdout"};
    char err[8192], path[256], text[64];
    for (size_t v = 0; v < 2; v++)
        for (size_t h = 0; h < 2; h++) {
            tf_dir_t d;
            tf_mkdir(&d);
            tf_at(&d, "out.txt", path, sizeof path);
            pt_env("GPUARENA_MODE=arena", "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
            unsetenv("GPUARENA_STATS");
            unsetenv("GPUARENA_TRACE");
            tf_setenv(vars[v], path);
            tf_setenv("O130_OUT", path);
            int rc = pt_run_child(o130_own_output_child, (void *)hows[h], err, sizeof err);
            unsetenv(vars[v]);
            FILE *f = fopen(path, "r");
            size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
            if (f)
                fclose(f);
            text[n] = '\0';
            ck_assert_msg(rc == 0, "%s, %s: exit %d: %s", vars[v], hows[h], rc, err);
            ck_assert_msg(!strcmp(text, "results: 42\n"), "%s naming the program's own output "
                          "(%s): the file holds %zu bytes, not the program's line: %s", vars[v],
                          hows[h], n, err);
            ck_assert_msg(strstr(err, "is a file this program has open for writing") &&
                              strstr(err, "name another path"),
                          "%s, %s: not said: %s", vars[v], hows[h], err);
            ck_assert_msg(!strcmp(hows[h], "stdout") && v == 0
                              ? strstr(err, "GPUARENA_STATS=/dev/stdout") != NULL
                              : strstr(err, "/dev/stdout") == NULL,
                          "%s, %s: /dev/stdout offered where it %s: %s", vars[v], hows[h],
                          v == 0 && h == 1 ? "fits" : "does not", err);
            ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1); /* no temporary file left */
            tf_rmtree(d.path);
        }
}
END_TEST

/* GPUARENA_TRACE naming a terminal: the program's standard output on one (/dev/stdout), or the
 * terminal's own path (/dev/pts/N). Before: the binary records were written to it among the
 * program's output, as GPUARENA_TRACE=- is refused for. */
static void o130_tty_child(void *arg)
{
    (void)arg;
    int fd = open(getenv("O130_PTS"), O_WRONLY | O_NOCTTY);
    if (fd < 0 || dup2(fd, 1) != 1)
        exit(2);
    close(fd);
    pt_start();
    CUdeviceptr p;
    if (cuMemAlloc(&p, MiB) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
        exit(3);
    printf("done\n");
    exit(0);
}

START_TEST(trace_never_to_a_terminal)
{
    char err[8192], got[4096];
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    ck_assert_msg(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0, "no pty here");
    const char *pts = ptsname(master);
    ck_assert_ptr_nonnull(pts);
    const char *const targets[] = {"/dev/stdout", pts};
    for (size_t t = 0; t < 2; t++) {
        pt_env("GPUARENA_MODE=arena", "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
        unsetenv("GPUARENA_STATS");
        tf_setenv("GPUARENA_TRACE", targets[t]);
        tf_setenv("O130_PTS", pts);
        int rc = pt_run_child(o130_tty_child, NULL, err, sizeof err);
        unsetenv("GPUARENA_TRACE");
        ck_assert_msg(rc == 0, "%s: exit %d: %s", targets[t], rc, err);
        int fl = fcntl(master, F_GETFL);
        fcntl(master, F_SETFL, fl | O_NONBLOCK);
        ssize_t n = read(master, got, sizeof got - 1);
        fcntl(master, F_SETFL, fl);
        got[n > 0 ? n : 0] = '\0';
        ck_assert_msg(n > 0 && memmem(got, (size_t)n, "done", 4),
                      "%s: the program's line did not reach the terminal", targets[t]);
        ck_assert_msg(!memmem(got, (size_t)n, "GATRACE", 7), "%s: the trace's binary records "
                      "were written to the terminal", targets[t]);
        ck_assert_msg(strstr(err, "is a terminal: the trace is binary records, for a file"),
                      "%s: not said: %s", targets[t], err);
    }
    close(master);
}
END_TEST

TCase *pt_tcase_outside130(void)
{
    TCase *tc = tcase_create("outside130");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, driver_freed_block_leaves_the_cap);
    tcase_add_test(tc, double_free_race_no_false_oom);
    tcase_add_test(tc, program_output_never_taken);
    tcase_add_test(tc, trace_never_to_a_terminal);
    return tc;
}
