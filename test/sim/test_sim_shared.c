/* test-sim, what several processes see: device UUIDs that agree across processes, and (with
 * SIMCUDA_SHARED) device memory counted across processes, with dead processes' memory given back.
 * Children are forked before the parent's first driver call, so each reads its own settings.
 */
#include "test_sim.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Device dev's UUID as seen by a fresh child process, with seed (NULL: the default). */
static void uuid_in_child(int dev, const char *seed, unsigned char out[16])
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        CUuuid u;
        if (seed)
            setenv("SIMCUDA_UUID_SEED", seed, 1);
        int ok = cuInit(0) == CUDA_SUCCESS && cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS;
        _exit(ok && write(fd[1], u.bytes, 16) == 16 ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    ck_assert_int_eq(read(fd[0], out, 16), 16);
    close(fd[0]);
    close(fd[1]);
}

START_TEST(uuid_stable)
{
    setenv("SIMCUDA_DEVICES", "2", 1);
    unsigned char child0[16], child1[16], seeded[16];
    uuid_in_child(0, NULL, child0);
    uuid_in_child(1, NULL, child1);
    uuid_in_child(0, "another machine", seeded);
    CK(cuInit(0));
    CUuuid u0, u1, v1;
    CK(cuDeviceGetUuid_v2(&u0, 0));
    CK(cuDeviceGetUuid_v2(&u1, 1));
    CUresult (*get_v1)(CUuuid *, CUdevice) = ts_sym("cuDeviceGetUuid");
    CK(get_v1(&v1, 1));
    ck_assert_mem_eq(u0.bytes, child0, 16); /* the same in every process */
    ck_assert_mem_eq(u1.bytes, child1, 16);
    ck_assert_mem_eq(v1.bytes, u1.bytes, 16);
    ck_assert_int_ne(memcmp(u0.bytes, u1.bytes, 16), 0); /* each device its own */
    ck_assert_int_ne(memcmp(u0.bytes, seeded, 16), 0);  /* the seed changes them */
    unsigned char api[16];
    ck_assert_int_eq(simcuda_device_uuid(1, api), 0);
    ck_assert_mem_eq(api, u1.bytes, 16);
    ck_assert_int_eq(simcuda_device_uuid(2, api), -1);
    ck_assert_int_eq(cuDeviceGetUuid_v2(&u0, 2), CUDA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(cuDeviceGetUuid_v2(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(simcuda_device_count(), 2);
}
END_TEST

START_TEST(uuid_before_init)
{
    CUuuid u;
    ck_assert_int_eq(cuDeviceGetUuid_v2(&u, 0), CUDA_ERROR_NOT_INITIALIZED);
}
END_TEST

/* ---- SIMCUDA_SHARED: children that hold memory while the parent looks ---- */

static char shared_name[64];

/* A fresh segment name for this test, and the device total every process will use. */
static void shared_env(const char *total)
{
    snprintf(shared_name, sizeof shared_name, "test-sim-%d", (int)getpid());
    setenv("SIMCUDA_SHARED", shared_name, 1);
    setenv("SIMCUDA_TOTAL_MEM", total, 1);
}

static void shared_cleanup(void)
{
    char path[96];
    snprintf(path, sizeof path, "/simcuda-%s", shared_name);
    shm_unlink(path);
}

typedef struct kid {
    pid_t pid;
    int to_kid, from_kid;
} kid_t;

/* Runs fn(arg) in a child, which then says 'k' (fn returned 0) or 'x', and waits for the parent's
 * word before it exits. kid_fork returns at once; kid_ready waits for the child's word. */
static kid_t kid_fork(int (*fn)(size_t), size_t arg)
{
    int down[2], up[2];
    ck_assert_int_eq(pipe(down), 0);
    ck_assert_int_eq(pipe(up), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char c = fn(arg) == 0 ? 'k' : 'x';
        if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1)
            _exit(2);
        _exit(c == 'q' ? 0 : 3);
    }
    close(down[0]);
    close(up[1]);
    return (kid_t){pid, down[1], up[0]};
}

static void kid_ready(const kid_t *k)
{
    char c = 0;
    ck_assert_int_eq(read(k->from_kid, &c, 1), 1);
    ck_assert_msg(c == 'k', "the child process failed its part (see its messages)");
}

static kid_t kid_spawn(int (*fn)(size_t), size_t arg)
{
    kid_t k = kid_fork(fn, arg);
    kid_ready(&k);
    return k;
}

/* Lets the child end normally; its exit status must be 0. */
static void kid_finish(kid_t *k)
{
    char q = 'q';
    int st = -1;
    ck_assert_int_eq(write(k->to_kid, &q, 1), 1);
    waitpid(k->pid, &st, 0);
    ck_assert_int_eq(st, 0);
    close(k->to_kid);
    close(k->from_kid);
}

static int kid_start(void)
{
    CUcontext ctx;
    return cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx);
}

static int kid_alloc(size_t bytes)
{
    CUdeviceptr p;
    return kid_start() || (bytes && cuMemAlloc(&p, bytes));
}

static int kid_create(size_t bytes)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h;
    return kid_start() || cuMemCreate(&h, bytes, &prop, 0);
}

static int kid_init_refused(size_t unused)
{
    (void)unused;
    return cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1;
}

/* field 22 of /proc/PID/stat, read here independently of the driver */
static unsigned long long start_time_of(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long v = 0;
    for (int field = 3; field <= 22 && p; field++)
        p = strchr(p + 1, ' ');
    ck_assert_ptr_nonnull(p);
    v = strtoull(p + 1, NULL, 10);
    return v;
}

START_TEST(shared_two_processes)
{
    shared_env("64MiB");
    kid_t a = kid_spawn(kid_alloc, 24 * MiB);
    ts_start();
    ck_assert_uint_eq(simcuda_device_bytes_all(0), 24 * MiB);
    CUdeviceptr p, q;
    CK(cuMemAlloc(&p, 32 * MiB));
    ck_assert_int_eq(cuMemAlloc(&q, 16 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* 24 + 32 + 16 > 64 */
    size_t f, t;
    CK(cuMemGetInfo(&f, &t));
    ck_assert_uint_eq(t, 64 * MiB);
    ck_assert_uint_eq(f, 8 * MiB);
    simcuda_process_t list[4];
    ck_assert_int_eq(simcuda_device_processes(0, list, 4), 2);
    int mine = list[0].pid == getpid() ? 0 : 1;
    ck_assert_int_eq(list[mine].pid, getpid());
    ck_assert_uint_eq(list[mine].bytes, 32 * MiB);
    ck_assert_int_eq(list[1 - mine].pid, a.pid);
    ck_assert_uint_eq(list[1 - mine].bytes, 24 * MiB);
    ck_assert_uint_eq(list[1 - mine].start_time, start_time_of(a.pid));
    ck_assert_int_eq(simcuda_device_processes(0, list, 1), 2); /* the count, even past max */
    ck_assert_int_eq(simcuda_device_processes(0, NULL, 0), 2);
    ck_assert_uint_eq(simcuda_device_peak_all(0), 56 * MiB);
    kid_finish(&a); /* a normal exit gives its memory back at once */
    ck_assert_uint_eq(simcuda_device_bytes_all(0), 32 * MiB);
    CK(cuMemAlloc(&q, 16 * MiB));
    ck_assert_uint_eq(simcuda_device_peak_all(0), 56 * MiB);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(0), 48 * MiB);
    ck_assert_uint_eq(simcuda_device_bytes_all(1), 0);
    ck_assert_int_eq(simcuda_device_processes(1, list, 4), -1); /* no device 1 */
}
END_TEST

/* A process killed with SIGKILL (a zombie not yet waited for, then gone) holds nothing. */
START_TEST(shared_sigkill)
{
    shared_env("64MiB");
    kid_t a = kid_spawn(kid_create, 48 * MiB); /* VMM memory counts as well */
    ts_start();
    CUdeviceptr p;
    ck_assert_int_eq(cuMemAlloc(&p, 32 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    kill(a.pid, SIGKILL);
    siginfo_t si;
    ck_assert_int_eq(waitid(P_PID, (id_t)a.pid, &si, WEXITED | WNOWAIT), 0); /* a zombie now */
    CK(cuMemAlloc(&p, 32 * MiB));
    ck_assert_uint_eq(simcuda_device_bytes_all(0), 32 * MiB);
    simcuda_process_t list[4];
    ck_assert_int_eq(simcuda_device_processes(0, list, 4), 1);
    waitpid(a.pid, NULL, 0);
    ck_assert_uint_eq(simcuda_device_peak_all(0), 48 * MiB);
}
END_TEST

/* A slot names a process by pid and start time: the same pid with another start time is a new
 * process, and the old slot is given back. */
START_TEST(shared_pid_reuse)
{
    shared_env("64MiB");
    kid_t b = kid_spawn(kid_alloc, 0); /* alive, holding nothing */
    ts_start();
    unsigned long long start = start_time_of(b.pid);
    ck_assert_int_eq(simcuda_shared_inject(b.pid, start + 1, 0, 40 * MiB), 0);
    ck_assert_uint_eq(simcuda_device_bytes_all(0), 0);
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 60 * MiB));
    CK(cuMemFree(p));
    ck_assert_int_eq(simcuda_shared_inject(b.pid, start, 0, 40 * MiB), 0); /* that very process */
    ck_assert_uint_eq(simcuda_device_bytes_all(0), 40 * MiB);
    ck_assert_int_eq(cuMemAlloc(&p, 30 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    kill(b.pid, SIGKILL);
    waitpid(b.pid, NULL, 0);
    CK(cuMemAlloc(&p, 30 * MiB));
    ck_assert_int_eq(simcuda_shared_inject(0, 0, 0, 1), -1);
    ck_assert_int_eq(simcuda_shared_inject(1, 0, 7, 1), -1);
}
END_TEST

/* A forked child is a process of its own: it starts from the memory it inherited. */
START_TEST(shared_forked_child)
{
    shared_env("64MiB");
    ts_start();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 8 * MiB));
    pid_t pid = fork();
    if (pid == 0) {
        CUdeviceptr q;
        int ok = cuMemAlloc(&q, 4 * MiB) == CUDA_SUCCESS && simcuda_device_bytes_all(0) == 20 * MiB;
        _exit(ok ? 0 : 1);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    ck_assert_int_eq(st, 0);
    ck_assert_uint_eq(simcuda_device_bytes_all(0), 8 * MiB);
    ck_assert_uint_eq(simcuda_device_peak_all(0), 20 * MiB);
}
END_TEST

/* Four processes of four threads each allocate and free against one 64 MiB device. */
static void *churn_shared(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    CUcontext ctx;
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxSetCurrent(ctx);
    CUdeviceptr p[8] = {0};
    int bad = 0;
    for (int i = 0; i < 300; i++) {
        int k = (int)(rand_r(&seed) % 8);
        if (p[k]) {
            bad |= cuMemFree(p[k]) != CUDA_SUCCESS;
            p[k] = 0;
        } else if (cuMemAlloc(&p[k], (1 + rand_r(&seed) % 4) * MiB) != CUDA_SUCCESS) {
            p[k] = 0;
        }
        bad |= simcuda_device_bytes_all(0) > 64 * MiB;
    }
    for (int k = 0; k < 8; k++)
        if (p[k])
            bad |= cuMemFree(p[k]) != CUDA_SUCCESS;
    return (void *)(uintptr_t)bad;
}

static int kid_churn(size_t seed)
{
    if (kid_start())
        return 1;
    pthread_t t[4];
    uintptr_t bad = 0;
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn_shared, (void *)(uintptr_t)(seed * 10 + (size_t)i));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= (uintptr_t)r;
    }
    return (int)bad;
}

START_TEST(shared_processes_and_threads)
{
    shared_env("64MiB");
    kid_t k[4];
    for (int i = 0; i < 4; i++)
        k[i] = kid_fork(kid_churn, (size_t)i + 1); /* all at once */
    for (int i = 0; i < 4; i++)
        kid_ready(&k[i]);
    ck_assert_uint_le(simcuda_device_peak_all(0), 64 * MiB);
    ck_assert_uint_gt(simcuda_device_peak_all(0), 16 * MiB);
    ck_assert_uint_eq(simcuda_device_bytes_all(0), 0);
    for (int i = 0; i < 4; i++)
        kid_finish(&k[i]);
}
END_TEST

START_TEST(shared_settings_must_agree)
{
    shared_env("64MiB");
    kid_t a = kid_spawn(kid_alloc, 8 * MiB);
    setenv("SIMCUDA_TOTAL_MEM", "32MiB", 1);
    kid_t b = kid_spawn(kid_init_refused, 0); /* a live process uses the name with 64 MiB */
    kid_finish(&b);
    kid_finish(&a);
    CK(cuInit(0)); /* nobody left: the segment takes the new settings */
    size_t t;
    CK(cuDeviceTotalMem(&t, 0));
    ck_assert_uint_eq(t, 32 * MiB);
}
END_TEST

START_TEST(shared_bad_name)
{
    setenv("SIMCUDA_SHARED", "a/b", 1);
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* Without SIMCUDA_SHARED each process has the devices to itself. */
START_TEST(shared_off)
{
    setenv("SIMCUDA_TOTAL_MEM", "64MiB", 1);
    kid_t a = kid_spawn(kid_alloc, 48 * MiB);
    ts_start();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 48 * MiB));
    ck_assert_uint_eq(simcuda_device_bytes_all(0), 48 * MiB);
    ck_assert_uint_eq(simcuda_device_peak_all(0), 48 * MiB);
    simcuda_process_t list[2];
    ck_assert_int_eq(simcuda_device_processes(0, list, 2), 1);
    ck_assert_int_eq(list[0].pid, getpid());
    ck_assert_uint_eq(list[0].bytes, 48 * MiB);
    ck_assert_int_eq(simcuda_shared_inject(getpid(), 1, 0, 1), -1);
    ck_assert_int_eq(simcuda_device_processes(5, list, 2), -1);
    kid_finish(&a);
}
END_TEST

TCase *ts_tcase_shared(void)
{
    TCase *tc = tcase_create("shared");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, uuid_stable);
    tcase_add_test(tc, uuid_before_init);
    tcase_add_checked_fixture(tc, NULL, shared_cleanup);
    tcase_add_test(tc, shared_two_processes);
    tcase_add_test(tc, shared_sigkill);
    tcase_add_test(tc, shared_pid_reuse);
    tcase_add_test(tc, shared_forked_child);
    tcase_add_test(tc, shared_processes_and_threads);
    tcase_add_test(tc, shared_settings_must_agree);
    tcase_add_test(tc, shared_bad_name);
    tcase_add_test(tc, shared_off);
    return tc;
}
