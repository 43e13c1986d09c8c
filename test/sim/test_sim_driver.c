/* test-sim: the simulated driver's error strings, its settings (SIMCUDA_* variables: bad values,
 * device counts, sizes, latency), the instrument API's checks, its state across a reset, its
 * report at exit, the CUDA runtime's table and threads (split from test_sim.c). Added to the
 * "driver" case by ts_driver_more_add().
 */
#include "test_sim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

START_TEST(error_strings)
{
    const char *s;
    CK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    ck_assert_str_eq(s, "CUDA_ERROR_OUT_OF_MEMORY");
    CK(cuGetErrorString(CUDA_ERROR_INVALID_CONTEXT, &s));
    ck_assert_str_eq(s, "invalid device context");
    ck_assert_int_eq(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(cuGetErrorString(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(bad_environment)
{
    setenv("SIMCUDA_TOTAL_MEM", "12XB", 1);
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_INVALID_VALUE);
    int n;
    ck_assert_int_eq(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
}
END_TEST

START_TEST(bad_device_count)
{
    setenv("SIMCUDA_DEVICES", "0", 1);
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(size_units)
{
    setenv("SIMCUDA_TOTAL_MEM", "3GB", 1);
    CK(cuInit(0));
    size_t t;
    CK(cuDeviceTotalMem(&t, 0));
    ck_assert_uint_eq(t, 3000000000ULL);
}
END_TEST

START_TEST(latency_setting)
{
    setenv("SIMCUDA_LATENCY_NS", "1000", 1); /* only that it is accepted: timings are never asserted */
    ts_start();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 512));
    CK(cuMemFree(p));
}
END_TEST

START_TEST(bad_latency)
{
    setenv("SIMCUDA_LATENCY_NS", "-5", 1);
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* The SIMCUDA_* settings read with the shim's grammar: sizes by the size grammar (zero in every
 * spelling where zero is a value), counts as digits alone, yes/no in the words of
 * GPUARENA_PREALLOCATE, blanks around ignored (test/sizes.tsv has the size rows; these are the
 * rest). Before 2026-12-06: CONTEXT_OVERHEAD refused 0MiB, DEVICES took 1.5 as 1 and 2B as 2,
 * LATENCY_NS took 20kB, STREAM_DELAY_US and VMM refused a blank, VMM refused false and off. */
enum { Q_INIT, Q_DEVICES, Q_VMM, Q_NO_OVERHEAD, REFUSED = 100 };
static const struct setting_row {
    const char *name, *value;
    int query, want; /* the child's exit: the query's answer, or REFUSED (cuInit INVALID_VALUE) */
} setting_rows[] = {
    {"SIMCUDA_DEVICES", " 2 ", Q_DEVICES, 2},
    {"SIMCUDA_DEVICES", "\t3", Q_DEVICES, 3},
    {"SIMCUDA_DEVICES", "1.5", Q_INIT, REFUSED},
    {"SIMCUDA_DEVICES", "2B", Q_INIT, REFUSED},
    {"SIMCUDA_DEVICES", "2K", Q_INIT, REFUSED},
    {"SIMCUDA_DEVICES", "1e1", Q_INIT, REFUSED},
    {"SIMCUDA_DEVICES", "+2", Q_INIT, REFUSED},
    {"SIMCUDA_DEVICES", "17", Q_INIT, REFUSED},
    {"SIMCUDA_DEVICES", "99999999999999999999999", Q_INIT, REFUSED},
    {"SIMCUDA_LATENCY_NS", " 1000 ", Q_INIT, 0},
    {"SIMCUDA_LATENCY_NS", "20kB", Q_INIT, REFUSED},
    {"SIMCUDA_LATENCY_NS", "1.5", Q_INIT, REFUSED},
    {"SIMCUDA_LATENCY_NS", "10000000001", Q_INIT, REFUSED},
    {"SIMCUDA_STREAM_DELAY_US", " 5 ", Q_INIT, 0},
    {"SIMCUDA_CONTEXT_OVERHEAD", "0", Q_NO_OVERHEAD, 1},
    {"SIMCUDA_CONTEXT_OVERHEAD", "0MiB", Q_NO_OVERHEAD, 1},
    {"SIMCUDA_CONTEXT_OVERHEAD", " 0.0 GiB ", Q_NO_OVERHEAD, 1},
    {"SIMCUDA_CONTEXT_OVERHEAD", "0B", Q_NO_OVERHEAD, 1},
    {"SIMCUDA_CONTEXT_OVERHEAD", "1MiB", Q_NO_OVERHEAD, 0},
    {"SIMCUDA_CONTEXT_OVERHEAD", "0.5", Q_INIT, REFUSED},
    {"SIMCUDA_CONTEXT_OVERHEAD", "50%", Q_INIT, REFUSED},
    {"SIMCUDA_TOTAL_MEM", "0MiB", Q_INIT, REFUSED},
    {"SIMCUDA_VMM", "0", Q_VMM, 0},
    {"SIMCUDA_VMM", " 0 ", Q_VMM, 0},
    {"SIMCUDA_VMM", "false", Q_VMM, 0},
    {"SIMCUDA_VMM", "OFF", Q_VMM, 0},
    {"SIMCUDA_VMM", "no", Q_VMM, 0},
    {"SIMCUDA_VMM", "Yes", Q_VMM, 1},
    {"SIMCUDA_VMM", "1", Q_VMM, 1},
    {"SIMCUDA_VMM", "off\r", Q_VMM, 0},
    {"SIMCUDA_DEVICES", "2\r\n", Q_DEVICES, 2},
    {"SIMCUDA_VMM", "maybe", Q_INIT, REFUSED},
    {"SIMCUDA_VMM", "2", Q_INIT, REFUSED},
};

static int setting_child(const struct setting_row *r)
{
    setenv(r->name, r->value, 1);
    CUresult rc = cuInit(0);
    if (rc != CUDA_SUCCESS)
        return rc == CUDA_ERROR_INVALID_VALUE ? REFUSED : REFUSED + 1;
    int n = 0;
    size_t free_b = 0, total = 0;
    switch (r->query) {
    case Q_DEVICES:
        return cuDeviceGetCount(&n) == CUDA_SUCCESS ? n : -1;
    case Q_VMM:
        return cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0) ==
                       CUDA_SUCCESS ? n : -1;
    case Q_NO_OVERHEAD:
        ts_start();
        return cuMemGetInfo(&free_b, &total) == CUDA_SUCCESS ? free_b == total : -1;
    default:
        return 0;
    }
}

START_TEST(settings_one_grammar)
{
    for (size_t i = 0; i < sizeof setting_rows / sizeof setting_rows[0]; i++) {
        const struct setting_row *r = &setting_rows[i];
        pid_t pid = fork();
        if (pid == 0)
            _exit(setting_child(r) & 0xff);
        int st;
        ck_assert_int_eq(waitpid(pid, &st, 0), pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == r->want, "%s='%s': child exit %d, want %d",
                      r->name, r->value, WIFEXITED(st) ? WEXITSTATUS(st) : -1, r->want);
    }
}
END_TEST

START_TEST(instrument_bad_input)
{
    simcuda_get_counters(NULL); /* ignored, no crash */
    ck_assert_uint_eq(simcuda_device_bytes_in_use(-1), 0);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(16), 0);
    ck_assert_int_eq(simcuda_getproc_log_entry(0, NULL, NULL, NULL, NULL), -1);
    ck_assert_uint_eq(simcuda_getproc_log_count(), 0);
}
END_TEST

START_TEST(reset_keeps_state)
{
    ts_start();
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, 4096));
    CK(cuMemAlloc(&b, 8192));
    CK(cuMemFree(b));
    simcuda_reset_counters();
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.alloc_calls, 0);
    ck_assert_uint_eq(c.bytes_in_use, 4096);
    ck_assert_uint_eq(c.peak_bytes_in_use, 4096);
    ck_assert_uint_eq(c.live_allocations, 1);
}
END_TEST

/* The report is written at exit: a child process does the work, the test reads what it left. */
START_TEST(report_at_exit)
{
    char path[] = "/tmp/simcuda-report-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    unlink(path);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("SIMCUDA_REPORT", path, 1);
        CUdeviceptr p;
        ts_start();
        cuMemAlloc(&p, 3 * 512);
        cuMemAlloc(&p, 512);
        cuMemFree(p);
        exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "SIMCUDA_REPORT file should exist after exit");
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(path);
    ck_assert_ptr_nonnull(strstr(buf, "\"alloc_calls\": 2"));
    ck_assert_ptr_nonnull(strstr(buf, "\"peak_bytes_in_use\": 2048"));
    ck_assert_ptr_nonnull(strstr(buf, "\"bytes_in_use\": 1536"));
    ck_assert_ptr_nonnull(strstr(buf, "\"devices\": [{\"total\": 8589934592"));
}
END_TEST

/* The real CUDA runtime on this driver: it resolves its whole entry-point table through
 * cuGetProcAddress, then stops at cuGetExportTable (NVIDIA-private), so cudaMalloc fails cleanly.
 * The table requests are what a shim test needs; check the memory ones resolve to the right
 * variants. Skipped when the toolkit's libcudart is not there. */
START_TEST(cuda_runtime_table)
{
    const char *dir = getenv("SIMCUDA_TEST_CUDART");
    void *rt = dir ? dlopen(dir, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!rt) {
        fprintf(stderr, "cuda_runtime_table: skipped, no libcudart at SIMCUDA_TEST_CUDART\n");
        return;
    }
    int (*cuda_malloc)(void **, size_t) = (int (*)(void **, size_t))dlsym(rt, "cudaMalloc");
    ck_assert_ptr_nonnull(cuda_malloc);
    void *p = NULL;
    ck_assert_int_ne(cuda_malloc(&p, 4096), 0);
    size_t n = simcuda_getproc_log_count();
    ck_assert_uint_gt(n, 300);
    int seen_alloc = 0, seen_ptsz = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s;
        int v;
        unsigned long long fl;
        void *ret;
        ck_assert_int_eq(simcuda_getproc_log_entry(i, &s, &v, &fl, &ret), 0);
        if (strcmp(s, "cuMemAlloc") == 0 && (seen_alloc = 1))
            ck_assert_ptr_eq(ret, ts_sym("cuMemAlloc_v2"));
        if (strcmp(s, "cuMemAllocAsync") == 0 && fl == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM &&
            (seen_ptsz = 1))
            ck_assert_ptr_eq(ret, ts_sym("cuMemAllocAsync_ptsz"));
    }
    ck_assert_msg(seen_alloc && seen_ptsz, "the runtime should ask for cuMemAlloc and cuMemAllocAsync");
}
END_TEST

/* Threads allocate and free concurrently: counters must balance and the cap must hold. */
static void *churn(void *arg)
{
    CUcontext ctx = arg;
    cuCtxSetCurrent(ctx);
    unsigned seed = 12345;
    CUdeviceptr p[16] = {0};
    for (int i = 0; i < 500; i++) {
        int k = (int)(rand_r(&seed) % 16);
        if (p[k]) {
            ck_assert_int_eq(cuMemFree(p[k]), CUDA_SUCCESS);
            p[k] = 0;
        } else if (cuMemAlloc(&p[k], 512 + rand_r(&seed) % 65536) != CUDA_SUCCESS) {
            p[k] = 0;
        }
    }
    for (int k = 0; k < 16; k++)
        if (p[k])
            cuMemFree(p[k]);
    return NULL;
}

START_TEST(threads)
{
    setenv("SIMCUDA_TOTAL_MEM", "1MiB", 1);
    CUcontext ctx = ts_start();
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, ctx);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.live_allocations, 0);
    ck_assert_uint_le(c.peak_bytes_in_use, MiB);
    ck_assert_uint_eq(c.alloc_calls - c.failed_allocs, c.free_calls);
}
END_TEST

/* Device addresses as a driver hands them out and as the replay's backend places regions
 * (sim_va.c, allocator/ga_vafit.h): rising, packed in units of 64 KiB, the lowest freed place that
 * holds an allocation taken again. They were Linux's mmap addresses, falling, until 2026-12-07, and
 * a trace replayed under a cap refused other allocations than under the shim here. */
START_TEST(addresses_rise_and_are_reused)
{
    ts_start();
    CUdeviceptr a, b, c, d, e;
    CK(cuMemAlloc(&a, 1 << 20));
    CK(cuMemAlloc(&b, 1 << 20));
    CK(cuMemAlloc(&c, 4096));
    ck_assert_uint_eq(b, a + (1 << 20)); /* rising and packed */
    ck_assert_uint_eq(c, b + (1 << 20));
    ck_assert_uint_eq(a % (2 << 20), 0); /* the range starts on a 2 MiB boundary */
    CK(cuMemFree(a));
    CK(cuMemAlloc(&d, 512 << 10)); /* the lowest free place: a's */
    ck_assert_uint_eq(d, a);
    CK(cuMemAlloc(&e, 1 << 20)); /* a's place has 512 KiB left: the next one past c's 64 KiB */
    ck_assert_uint_eq(e, c + (64 << 10));
    CK(cuMemFree(b));
    CK(cuMemFree(c));
    CK(cuMemFree(d));
    CK(cuMemFree(e));
}
END_TEST

/* cuMemAddressReserve places ranges by the same model, aligned (the replay's vmm ranges too): they
 * fell (mmap's order) until 2026-12-07, and vmm under a cap mapped other granules than replayed. */
START_TEST(vmm_ranges_rise_and_are_reused)
{
    ts_start();
    const CUdeviceptr M = 1 << 20;
    CUdeviceptr a, b, c, d, x;
    CK(cuMemAlloc(&x, 4096)); /* one unit (64 KiB): ranges are aligned to the 2 MiB granule */
    CK(cuMemAddressReserve(&a, 64 * M, 0, 0, 0));
    CK(cuMemAddressReserve(&b, 64 * M, 0, 0, 0));
    ck_assert_uint_eq(a, x + 2 * M);
    ck_assert_uint_eq(b, a + 64 * M);
    CK(cuMemAddressFree(a, 64 * M));
    CK(cuMemAddressReserve(&c, 32 * M, 0, 0, 0)); /* the lowest free place: a's */
    ck_assert_uint_eq(c, a);
    CK(cuMemAddressReserve(&d, 4 * M, 0, a + 40 * M, 0)); /* a free address asked for: given */
    ck_assert_uint_eq(d, a + 40 * M);
    CK(cuMemAddressReserve(&d, 2 * M, 0, b, 0)); /* a taken one: the lowest free place instead */
    ck_assert_uint_eq(d, a + 32 * M);
    CK(cuMemFree(x));
}
END_TEST

/* Under `ulimit -v` the driver's range of addresses counts against the limit: it takes a quarter of
 * the room at most. It took the largest half of 96 GiB the system gave (6 GiB of 8 here) and left
 * the program 2 GiB of address space. The test runs in its own forked process (CK_FORK). */
START_TEST(address_range_leaves_room_under_ulimit_v)
{
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%llu", &pages), 1);
    fclose(f);
    const size_t GiB = (size_t)1 << 30;
    rlim_t held = (rlim_t)(pages * (unsigned long long)sysconf(_SC_PAGESIZE));
    struct rlimit as;
    ck_assert_int_eq(getrlimit(RLIMIT_AS, &as), 0);
    as.rlim_cur = held + 8 * GiB;
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &as), 0);
    ts_start();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 4096));
    void *host = mmap(NULL, 4 * GiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ck_assert_msg(host != MAP_FAILED, "4 GiB of the 8 the limit leaves should still be the program's");
    munmap(host, 4 * GiB);
    CK(cuMemFree(p));
}
END_TEST

void ts_driver_more_add(TCase *tc)
{
    tcase_add_test(tc, address_range_leaves_room_under_ulimit_v);
    tcase_add_test(tc, addresses_rise_and_are_reused);
    tcase_add_test(tc, vmm_ranges_rise_and_are_reused);
    tcase_add_test(tc, error_strings);
    tcase_add_test(tc, bad_environment);
    tcase_add_test(tc, bad_device_count);
    tcase_add_test(tc, size_units);
    tcase_add_test(tc, latency_setting);
    tcase_add_test(tc, bad_latency);
    tcase_add_test(tc, settings_one_grammar);
    tcase_add_test(tc, instrument_bad_input);
    tcase_add_test(tc, reset_keeps_state);
    tcase_add_test(tc, report_at_exit);
    tcase_add_test(tc, cuda_runtime_table);
    tcase_add_test(tc, threads);
}
