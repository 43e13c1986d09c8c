/* Preload tests: hostile sizes and arguments from an outside re-test of issue 8 (helper-90,
 * 2026-12-06), each a fault that passed before its fix. */
#include "preload_test.h"
#include "t_group.h"

#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const modes[] = PT_ALL_MODES;

/* ---- a size of 2^63 bytes or more never lowers what the cap counts ---- */

static CUcontext huge_ctx;
static atomic_int huge_stop;

/* Asks, again and again, for sizes the cap refuses at once: SIZE_MAX less a little under the cap
 * (a negative number as a signed count) through the two pass-through entry points. */
static void *huge_asker(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(huge_ctx);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t managed = (size_t)0 - 64 * MiB, handle = (size_t)0 - 64 * MiB; /* granule multiples */
    for (unsigned i = 0; !atomic_load(&huge_stop); i++) {
        CUdeviceptr p;
        CUmemGenericAllocationHandle h;
        if (i & 1)
            cuMemAllocManaged(&p, managed, CU_MEM_ATTACH_GLOBAL);
        else
            cuMemCreate(&h, handle, &prop, 0);
    }
    return NULL;
}

static void huge_child(void *arg)
{
    (void)arg;
    huge_ctx = pt_start();
    CUdeviceptr held, p;
    if (cuMemAllocManaged(&held, 60 * MiB, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS)
        exit(2);
    pthread_t t;
    if (pthread_create(&t, NULL, huge_asker, NULL))
        exit(3);
    int passed = 0;
    for (int i = 0; i < 200000 && !passed; i++) /* 60 + 60 MiB never fit under 64 MiB */
        if (cuMemAllocManaged(&p, 60 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS)
            passed = i + 1;
    atomic_store(&huge_stop, 1);
    pthread_join(t, NULL);
    if (passed) {
        fprintf(stderr, "60 MiB more served at attempt %d\n", passed);
        exit(4);
    }
    if (simcuda_device_peak_all(0) > 64 * MiB) {
        fprintf(stderr, "the driver held %llu bytes\n", simcuda_device_peak_all(0));
        exit(5);
    }
    exit(0);
}

/* Added to the count before it was compared, a size of 2^63 bytes or more is a negative int64 and
 * lowered the process's committed bytes until it was taken back: another thread's allocation in
 * that moment passed the cap (120 MiB held under 64 MiB within a few hundred tries, every mode). */
START_TEST(huge_size_never_lowers_the_cap)
{
    pt_env(modes[_i], "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LOG=error", NULL);
    char err[4096];
    int status = pt_run_child(huge_child, NULL, err, sizeof err);
    ck_assert_msg(status == 0, "%s: exit %d: %s", modes[_i], status, err);
}
END_TEST

/* ---- outputs never over a group's ledger ---- */

static char ledger_path[400];

/* A member that allocates 1 MiB and exits: its trace and statistics go to GPUARENA_TRACE and
 * GPUARENA_STATS, which the test has pointed at the ledger. */
static void ledger_writer_child(void *arg)
{
    (void)arg;
    member_start(NULL);
    CUdeviceptr p;
    exit(cuMemAlloc(&p, 1 * MiB) == CUDA_SUCCESS ? 0 : 2);
}

/* The ledger file in the test's ledger folder (one device, one group: one file). */
static void find_ledger(void)
{
    DIR *d = opendir(g_dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    ledger_path[0] = 0;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "gpuarena-", 9))
            snprintf(ledger_path, sizeof ledger_path, "%s/%s", g_dir, e->d_name);
    closedir(d);
    ck_assert_msg(ledger_path[0], "a ledger in %s", g_dir);
}

static int ledger_whole(void)
{
    char magic[8] = {0};
    FILE *f = fopen(ledger_path, "rb");
    size_t n = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f)
        fclose(f);
    return n == 8 && !memcmp(magic, "GAGROUP", 8);
}

/* GPUARENA_TRACE or GPUARENA_STATS naming the group's ledger: the trace truncated it under the
 * members' mappings, the statistics replaced it, and the next process to join made a new, empty
 * ledger while a member still held 40 MiB: 81 MiB held by the group under its 64 MiB cap. Now each
 * is refused with a message and the ledger and the cap stay whole. */
START_TEST(outputs_never_over_a_ledger)
{
    static const char *const which[] = {"GPUARENA_TRACE", "GPUARENA_STATS"};
    group_env("64MiB");
    putenv("GPUARENA_MODE=grow");
    putenv("GPUARENA_LOG=error");
    pid_t holder = group_holder(40 * MiB);
    find_ledger();
    static char var[sizeof "GPUARENA_STATS=" + sizeof ledger_path]; /* -O1 warned at 200 */
    snprintf(var, sizeof var, "%s=%s", which[_i], ledger_path);
    putenv(var);
    char err[4096];
    int status = pt_run_child(ledger_writer_child, NULL, err, sizeof err);
    ck_assert_msg(status == 0, "%s: the writer exited %d: %s", which[_i], status, err);
    ck_assert_msg(strstr(err, "is a gpuarena group's ledger"), "%s: said: %s", which[_i], err);
    ck_assert_msg(ledger_whole(), "%s: the ledger is whole", which[_i]);
    unsetenv(which[_i]);
    member_start(NULL); /* the test process joins: 40 MiB more cannot fit beside the holder's */
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 40 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    group_cleanup();
}
END_TEST

/* ---- statistics never over a trace ---- */

static char trace_path[64];

/* Allocates 1 MiB and exits: its statistics go to GPUARENA_STATS, the other process's trace. */
static void stats_writer_child(void *arg)
{
    (void)arg;
    static char var[96];
    snprintf(var, sizeof var, "GPUARENA_STATS=%s", trace_path);
    putenv(var);
    pt_start();
    CUdeviceptr p;
    exit(cuMemAlloc(&p, 1 * MiB) == CUDA_SUCCESS ? 0 : 2);
}

/* GPUARENA_STATS naming a trace another process is still writing: the statistics replaced it
 * (write, then rename), and that process's records went on into a file no name reached. The
 * trace is what cannot be made again: the statistics are refused with a message, and the trace
 * holds every record of its process (a header of 32 bytes and 3 records of 48). */
START_TEST(stats_never_over_a_trace)
{
    pt_env("GPUARENA_MODE=platform", "GPUARENA_LOG=error", NULL);
    snprintf(trace_path, sizeof trace_path, "/tmp/gpuarena-hostile-%d.gatrace", (int)getpid());
    int up[2], go[2];
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(go), 0);
    pid_t tracer = fork();
    if (tracer == 0) {
        static char var[96];
        snprintf(var, sizeof var, "GPUARENA_TRACE=%s", trace_path);
        putenv(var);
        pt_start();
        CUdeviceptr p, q;
        char c = cuMemAlloc(&p, 1 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
        if (write(up[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(2);
        exit(cuMemAlloc(&q, 1 * MiB) || cuMemFree(q) ? 3 : 0); /* exit() writes the trace */
    }
    char c = 0;
    ck_assert_int_eq(read(up[0], &c, 1), 1);
    ck_assert_int_eq(c, 'y');
    char err[4096];
    int status = pt_run_child(stats_writer_child, NULL, err, sizeof err);
    ck_assert_msg(status == 0, "the statistics writer exited %d: %s", status, err);
    ck_assert_msg(strstr(err, "is a gpuarena trace"), "said: %s", err);
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    ck_assert_int_eq(waitpid(tracer, &status, 0), tracer);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the tracer: status %d", status);
    struct stat st;
    char magic[8] = {0};
    FILE *f = fopen(trace_path, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fread(magic, 1, 8, f), 8);
    fclose(f);
    ck_assert_int_eq(stat(trace_path, &st), 0);
    unlink(trace_path);
    ck_assert_msg(!memcmp(magic, "GATRACE", 8), "the trace is still a trace: %.8s", magic);
    ck_assert_int_eq(st.st_size, 32 + 3 * 48);
}
END_TEST

/* ---- dlerror after a lookup is the program's ---- */

/* The POSIX way to tell a failed lookup: clear dlerror, dlsym, then ask dlerror. The shim's start,
 * made at the first lookup of a CUDA name, left its own failed lookups' error behind, so a
 * program's successful lookup of cuMemAlloc_v2 read as a failure ("libgpuarena.so: undefined
 * symbol: ..."), and a failed one named another symbol than the one asked for. */
static void dlerror_child(void *arg)
{
    const char *first = arg;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        exit(2);
    dlerror();
    void *f = dlsym(h, first);
    const char *e = dlerror();
    if (!strcmp(first, "cuMemAlloc_v2") && (!f || e)) {
        fprintf(stderr, "cuMemAlloc_v2: %p, dlerror '%s'\n", f, e ? e : "");
        exit(3);
    }
    if (strcmp(first, "cuMemAlloc_v2") && (f || !e || !strstr(e, first))) {
        fprintf(stderr, "%s: %p, dlerror '%s'\n", first, f, e ? e : "");
        exit(4);
    }
    dlerror();
    f = dlsym(h, "cuMemFree_v2"); /* and later lookups, once started */
    e = dlerror();
    if (!f || e) {
        fprintf(stderr, "cuMemFree_v2: %p, dlerror '%s'\n", f, e ? e : "");
        exit(5);
    }
    exit(0);
}

START_TEST(dlerror_after_lookup_is_the_programs)
{
    static char *const first[] = {"cuMemAlloc_v2", "cuMemAlloc_v2x"};
    pt_env("GPUARENA_LOG=error", NULL);
    char err[4096];
    int status = pt_run_child(dlerror_child, first[_i], err, sizeof err);
    ck_assert_msg(status == 0, "%s first: exit %d: %s", first[_i], status, err);
}
END_TEST

/* ---- cuPointerGetAttributes reads the list no further than the driver ---- */

/* A count larger than the program's list, whose last entry the driver refuses (it answers in
 * order and stops there): the list ends at a page nothing may read. The shim read all 1,000
 * entries first, past the page (SIGSEGV: an outside check, 2026-12-06); now it answers as the
 * driver, CUDA_ERROR_INVALID_VALUE, with or without a block attribute in the list. Exits 2 on a
 * setup failure, 3 and 4 on a wrong answer for each list. */
static void attrs_bounded_child(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p;
    long pg = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m + pg, (size_t)pg, PROT_NONE) || cuMemAlloc(&p, 4096))
        exit(2);
    CUpointer_attribute *list = (CUpointer_attribute *)(m + pg) - 3;
    static size_t out[1000][2];
    static void *data[1000];
    for (int i = 0; i < 1000; i++)
        data[i] = out[i];
    list[0] = CU_POINTER_ATTRIBUTE_RANGE_SIZE, list[1] = CU_POINTER_ATTRIBUTE_RANGE_START_ADDR;
    list[2] = (CUpointer_attribute)9999;
    if (cuPointerGetAttributes(1000, list, data, p + 64) != CUDA_ERROR_INVALID_VALUE)
        exit(3);
    list[0] = CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE;
    if (cuPointerGetAttributes(1000, list, data, p + 64) != CUDA_ERROR_INVALID_VALUE)
        exit(4);
    exit(0);
}

START_TEST(pointer_attributes_read_no_further_than_the_driver)
{
    char err[4096];
    pt_env(modes[_i], "GPUARENA_LIMIT=64MiB", NULL);
    int rc = pt_run_child(attrs_bounded_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: exit %d (2: setup, 3: a list without, 4: with a block attribute "
                  "not refused as the driver refuses it; a signal: read past the list); %s",
                  modes[_i], rc, err);
}
END_TEST

TCase *pt_tcase_hostile(void)
{
    TCase *tc = tcase_create("hostile");
    tcase_add_loop_test(tc, huge_size_never_lowers_the_cap, 0, sizeof modes / sizeof *modes);
    tcase_add_loop_test(tc, outputs_never_over_a_ledger, 0, 2);
    tcase_add_test(tc, stats_never_over_a_trace);
    tcase_add_loop_test(tc, dlerror_after_lookup_is_the_programs, 0, 2);
    tcase_add_loop_test(tc, pointer_attributes_read_no_further_than_the_driver, 0,
                        sizeof modes / sizeof *modes);
    return tc;
}
