/* Preload tests: findings of a second hostile outside check of issues 8 and 5 (helper-114), each
 * failing on the code before its fix.
 *
 * Files: GPUARENA_STATS replaced any regular file it named (a user's notes, /etc/hostname as
 * root) while GPUARENA_TRACE refused such a file, and both outputs replaced or truncated a file
 * nobody may write (mode 0444), since a rename needs write access to the folder alone.
 * The cap: a cuMemAllocFromPoolAsync from a pool on another device than its stream's was counted
 * on the stream's device until the driver had served it, so the pool's device held more than its
 * cap meanwhile, and the stream's device refused blocks its cap had no part in.
 * Settings: GPUARENA_LIBCUDA naming a FIFO hung the program at its first CUDA call; a relative
 * GPUARENA_STATS or GPUARENA_TRACE was written into whatever folder the program had moved to.
 */
#include "t_files.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>

/* The program: one allocation and its free, then exit() (the report is written at exit). */
static void th_workload(void *arg)
{
    (void)arg;
    pt_start();
    CUdeviceptr p;
    if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
        exit(2);
    exit(0);
}

static void th_write(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    ck_assert_int_eq(chmod(path, mode), 0);
}

/* The file at path holds exactly text. */
static void th_expect(const char *path, const char *text)
{
    char buf[256] = {0};
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    ck_assert_msg(n == (ssize_t)strlen(text) && !memcmp(buf, text, (size_t)n),
                  "%s is left as it was: '%s'", path, buf);
}

/* The same, with a free made by a library's destructor after the shim's report: the report is
 * written again then, and the refusal was said twice. */
static void th_late_child(void *arg)
{
    (void)arg;
    void *h = dlopen("libgactor.so", RTLD_NOW | RTLD_LOCAL);
    CUdeviceptr *late = h ? dlsym(h, "dtor_free_at_exit") : NULL, p;
    if (!late)
        exit(2);
    pt_start();
    if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS)
        exit(3);
    *late = p;
    exit(0);
}

/* GPUARENA_STATS naming a file of the user's (not an earlier report, not empty): left as it was,
 * one message, no temporary file beside it; an earlier report (pretty-printed too) and an empty
 * file are replaced as before. */
START_TEST(stats_never_over_a_users_file)
{
    tf_dir_t d;
    char notes[128], old[128], empty[128], err[8192];
    tf_mkdir(&d);
    th_write(tf_at(&d, "notes.txt", notes, sizeof notes), "important notes\n", 0644);
    tf_setenv("GPUARENA_STATS", notes);
    ck_assert_int_eq(pt_run_child(th_workload, NULL, err, sizeof err), 0);
    th_expect(notes, "important notes\n");
    ck_assert_msg(strstr(err, "gpuarena: GPUARENA_STATS=") &&
                  strstr(err, "is there and is not a gpuarena statistics file") &&
                  strstr(err, "the file is left as it was"), "said: %s", err);
    ck_assert_msg(!strstr(strstr(err, "is not a gpuarena statistics") + 1, "is not a gpuarena "
                  "statistics"), "said once: %s", err);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1);
    ck_assert_int_eq(pt_run_child(th_late_child, NULL, err, sizeof err), 0);
    th_expect(notes, "important notes\n");
    ck_assert_msg(strstr(err, "is not a gpuarena statistics") &&
                  !strstr(strstr(err, "is not a gpuarena statistics") + 1, "is not a gpuarena "
                  "statistics"), "said once with a late free too: %s", err);

    th_write(tf_at(&d, "old.json", old, sizeof old), "{\n  \"gpuarena_stats\": 2\n}\n", 0644);
    tf_setenv("GPUARENA_STATS", old);
    ck_assert_int_eq(pt_run_child(th_workload, NULL, err, sizeof err), 0);
    ck_assert_int_eq(pt_json_check(old, "d['totals']['allocs'] == 1"), 0);
    th_write(tf_at(&d, "empty.json", empty, sizeof empty), "", 0644);
    tf_setenv("GPUARENA_STATS", empty);
    ck_assert_int_eq(pt_run_child(th_workload, NULL, err, sizeof err), 0);
    ck_assert_int_eq(pt_json_check(empty, "d['totals']['allocs'] == 1"), 0);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 3);
    tf_rmtree(d.path);
}
END_TEST

/* A read-only file (mode 0444: root's access() passes it, a rename needs only the folder) is
 * neither replaced by the statistics nor truncated by a trace, even when it is an earlier one;
 * each says so once and the program runs on. */
START_TEST(outputs_never_over_a_read_only_file)
{
    tf_dir_t d;
    char stats[128], trace[128], err[8192];
    static const char report[] = "{\"gpuarena_stats\": 2}\n";
    static const char head[] = "GATRACE"; /* an earlier trace cut short: a new one would replace it */
    tf_mkdir(&d);
    th_write(tf_at(&d, "s.json", stats, sizeof stats), report, 0444);
    th_write(tf_at(&d, "t.gatrace", trace, sizeof trace), head, 0444);
    tf_setenv("GPUARENA_STATS", stats);
    tf_setenv("GPUARENA_TRACE", trace);
    ck_assert_int_eq(pt_run_child(th_workload, NULL, err, sizeof err), 0);
    th_expect(stats, report);
    th_expect(trace, head);
    ck_assert_msg(strstr(err, "GPUARENA_STATS='") && strstr(err, "GPUARENA_TRACE='"),
                  "both said: %s", err);
    ck_assert_msg(strstr(err, "is read-only (mode 0444)") &&
                  strstr(strstr(err, "is read-only (mode 0444)") + 1, "is read-only (mode 0444)"),
                  "read-only said for each: %s", err);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 2);
    tf_rmtree(d.path);
}
END_TEST

/* The whole of a small file, into buf; its length. */
static size_t th_slurp(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ssize_t n = read(fd, buf, len);
    close(fd);
    ck_assert_int_gt(n, 0);
    return (size_t)n;
}

/* A new trace over an old one that has another name (a hard link kept as a copy) truncated the
 * shared file: the copy was emptied, then held the new run. Now the copy keeps the old trace and
 * the path a new file. */
START_TEST(trace_never_empties_a_hard_linked_copy)
{
    tf_dir_t d;
    char trace[128], keep[128], err[8192], before[8192], after[8192];
    tf_mkdir(&d);
    tf_setenv("GPUARENA_TRACE", tf_at(&d, "t.gatrace", trace, sizeof trace));
    ck_assert_int_eq(pt_run_child(th_workload, NULL, err, sizeof err), 0);
    ck_assert_int_eq(link(trace, tf_at(&d, "keep.gatrace", keep, sizeof keep)), 0);
    size_t n = th_slurp(keep, before, sizeof before);
    ck_assert_int_eq(pt_run_child(th_workload, NULL, err, sizeof err), 0);
    ck_assert_msg(th_slurp(keep, after, sizeof after) == n && !memcmp(before, after, n),
                  "the copy keeps the first run's trace: %s", err);
    struct stat a, b;
    ck_assert_int_eq(stat(trace, &a), 0);
    ck_assert_int_eq(stat(keep, &b), 0);
    ck_assert(a.st_ino != b.st_ino);
    ck_assert_int_eq(tf_trace_events(trace, 0), 2);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 2);
    tf_rmtree(d.path);
}
END_TEST

/* As another user (nobody): the test runs it only as root. */
static void th_nobody_child(void *arg)
{
    if (setgid(65534) != 0 || setuid(65534) != 0)
        exit(40);
    th_workload(arg);
}

/* A file of another user's (root's, mode 0644) in a folder everyone may write: a rename needs
 * only the folder, so a process that may not write the file replaced it. Now refused, said as
 * "not writable by this process". Runs only as root (it needs a second user). */
START_TEST(stats_never_over_another_users_file)
{
    if (geteuid() != 0)
        return;
    tf_dir_t d;
    char stats[128], err[8192];
    static const char report[] = "{\"gpuarena_stats\": 2, \"root's\": 1}\n";
    tf_mkdir(&d);
    ck_assert_int_eq(chmod(d.path, 0777), 0);
    th_write(tf_at(&d, "s.json", stats, sizeof stats), report, 0644);
    tf_setenv("GPUARENA_STATS", stats);
    ck_assert_int_eq(pt_run_child(th_nobody_child, NULL, err, sizeof err), 0);
    th_expect(stats, report);
    ck_assert_msg(strstr(err, "is not writable by this process (mode 0644)"), "said: %s", err);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1);
    tf_rmtree(d.path);
}
END_TEST

/* Two devices under 64 MiB each; a stream of device 0; pools of device 1 (one the program made,
 * and the device's default pool). */
static void th_pool_device_child(void *arg)
{
    CUdevice d0, d1;
    CUcontext c0, c1;
    CUstream s;
    CUdeviceptr held, p;
    CUmemoryPool made, def;
    CUmemPoolProps pp = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                         .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1}};
    setenv("GPUARENA_MODE", arg, 1);
    if (cuInit(0) || cuDeviceGet(&d0, 0) || cuDeviceGet(&d1, 1) ||
        cuDevicePrimaryCtxRetain(&c0, d0) || cuDevicePrimaryCtxRetain(&c1, d1) ||
        cuCtxSetCurrent(c0) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
        cuMemPoolCreate(&made, &pp) || cuDeviceGetDefaultMemPool(&def, d1))
        exit(10);
    /* Device 0 holds 48 MiB: a 48 MiB block from a pool of device 1 still fits there. */
    if (cuMemAlloc(&held, 48 * MiB))
        exit(11);
    CUmemoryPool pools[2] = {made, def};
    for (int i = 0; i < 2; i++) {
        CUresult r = cuMemAllocFromPoolAsync(&p, 48 * MiB, pools[i], s);
        if (r != CUDA_SUCCESS) {
            fprintf(stderr, "pool %d of device 1 refused from device 0's stream: %d\n", i, r);
            exit(12);
        }
        if (cuMemFreeAsync(p, s) || cuStreamSynchronize(s) || cuMemPoolTrimTo(pools[i], 0))
            exit(13);
    }
    if (cuMemFree(held) || cuCtxSetCurrent(c1) || cuMemAlloc(&held, 48 * MiB) || cuCtxSetCurrent(c0))
        exit(14);
    /* Device 1 holds 48 MiB: the pool's 48 MiB does not fit there, and never reaches it. */
    for (int i = 0; i < 2; i++)
        if (cuMemAllocFromPoolAsync(&p, 48 * MiB, pools[i], s) != CUDA_ERROR_OUT_OF_MEMORY)
            exit(15);
    unsigned long long peak = simcuda_device_peak_all(1);
    if (peak > 64 * MiB) {
        fprintf(stderr, "device 1 held %llu MiB under a 64 MiB cap\n", peak / MiB);
        exit(16);
    }
    exit(0);
}

START_TEST(pool_block_counted_on_the_pools_device)
{
    static const char *modes[] = {"arena", "grow", "vmm", "platform"};
    char err[8192];
    pt_env("SIMCUDA_DEVICES=2", "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        int rc = pt_run_child(th_pool_device_child, (void *)modes[i], err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d: %s", modes[i], rc, err);
    }
}
END_TEST

/* GPUARENA_LIBCUDA naming a FIFO: dlopen opened it and waited for a writer, for ever, at the
 * program's first CUDA call. Now a bad setting: cuInit answers CUDA_ERROR_INVALID_VALUE after one
 * message (an alarm ends a child that hangs). */
static void th_libcuda_fifo_child(void *arg)
{
    (void)arg;
    signal(SIGALRM, SIG_DFL); /* not Check's handler, which kills the whole group */
    alarm(10);
    exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
}

START_TEST(libcuda_fifo_is_a_bad_setting)
{
    tf_dir_t d;
    char fifo[128], err[8192];
    tf_mkdir(&d);
    ck_assert_int_eq(mkfifo(tf_at(&d, "libcuda.so.1", fifo, sizeof fifo), 0600), 0);
    tf_setenv("GPUARENA_LIBCUDA", fifo);
    int rc = pt_run_child(th_libcuda_fifo_child, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "cuInit with GPUARENA_LIBCUDA a FIFO: exit %d (142: hung): %s", rc, err);
    ck_assert_msg(strstr(err, "gpuarena: cannot load the CUDA driver") && strstr(err, "it is a FIFO"),
                  "said: %s", err);
    tf_rmtree(d.path);
}
END_TEST

/* Relative output paths: named in one folder, written there, whatever folder the program is in
 * by its allocations and its exit (the statistics landed in the folder it had moved to by exit,
 * the trace in the one of its first allocation). */
static void th_moving_child(void *arg)
{
    char **dirs = arg; /* where the paths were named, where the program goes */
    if (chdir(dirs[0]) != 0)
        exit(20);
    setenv("GPUARENA_STATS", "s.json", 1);
    setenv("GPUARENA_TRACE", "t.gatrace", 1);
    pt_start();
    if (chdir(dirs[1]) != 0)
        exit(21);
    CUdeviceptr p;
    if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
        exit(22);
    exit(0);
}

START_TEST(relative_outputs_where_named)
{
    tf_dir_t named, moved;
    char err[8192], stats[128], trace[128];
    tf_mkdir(&named);
    tf_mkdir(&moved);
    char *dirs[2] = {named.path, moved.path};
    ck_assert_int_eq(pt_run_child(th_moving_child, dirs, err, sizeof err), 0);
    ck_assert_msg(tf_entries(moved.path, NULL, 0) == 0, "nothing in the folder moved to: %s", err);
    ck_assert_int_eq(pt_json_check(tf_at(&named, "s.json", stats, sizeof stats),
                                   "d['totals']['allocs'] == 1"), 0);
    ck_assert_int_eq(tf_trace_events(tf_at(&named, "t.gatrace", trace, sizeof trace), 0), 2);
    /* A folder whose name holds %p: the path stays relative (an absolute template would expand
     * the folder's %p), and is written where the program is at its first CUDA call and exit. */
    char odd[128];
    ck_assert_int_eq(mkdir(tf_at(&named, "a%pb", odd, sizeof odd), 0755), 0);
    char *same[2] = {odd, odd};
    ck_assert_int_eq(pt_run_child(th_moving_child, same, err, sizeof err), 0);
    ck_assert_int_eq(tf_entries(odd, NULL, 0), 2);
    tf_rmtree(named.path);
    tf_rmtree(moved.path);
}
END_TEST

/* A trace whose 32-byte header passes the file size limit (`ulimit -f` of 1 byte): the message
 * blamed the disk ("check the disk") and a 1-byte file was left. Now the cause and its fix, and
 * the file cut back to nothing. */
static void th_fsize_child(void *arg)
{
    struct rlimit rl = {1, 1};
    int p[2];
    /* stderr (a file) would pass the limit too: it goes through a pipe to a process without one */
    if (pipe(p) != 0)
        exit(30);
    pid_t copier = fork();
    if (copier == 0) {
        char buf[512];
        ssize_t n;
        close(p[1]);
        while ((n = read(p[0], buf, sizeof buf)) > 0)
            if (write(2, buf, (size_t)n) != n)
                _exit(1);
        _exit(0);
    }
    close(p[0]);
    dup2(p[1], 2);
    close(p[1]);
    signal(SIGXFSZ, SIG_DFL);
    setenv("GPUARENA_TRACE", arg, 1);
    if (copier < 0 || setrlimit(RLIMIT_FSIZE, &rl) != 0)
        exit(31);
    /* no ck_assert from here: Check notes each one in a file of its own, past the limit too */
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr q;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuMemAlloc(&q, 1 << 20) || cuMemFree(q))
        exit(32);
    int fd = open("/dev/null", O_WRONLY);
    dup2(fd, 2); /* the pipe's last writer gone: the copier ends */
    waitpid(copier, NULL, 0);
    exit(0);
}

START_TEST(trace_header_past_file_size_limit)
{
    tf_dir_t d;
    char trace[128], err[8192];
    tf_mkdir(&d);
    int rc = pt_run_child(th_fsize_child, tf_at(&d, "t.gatrace", trace, sizeof trace), err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "gpuarena: cannot write the trace") && strstr(err, "ulimit -f") &&
                  !strstr(err, "check the disk"), "said: %s", err);
    struct stat st;
    ck_assert_int_eq(stat(trace, &st), 0);
    ck_assert_int_eq(st.st_size, 0);
    tf_rmtree(d.path);
}
END_TEST

TCase *pt_tcase_hostile2(void)
{
    TCase *tc = tcase_create("hostile2");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, stats_never_over_a_users_file);
    tcase_add_test(tc, outputs_never_over_a_read_only_file);
    tcase_add_test(tc, stats_never_over_another_users_file);
    tcase_add_test(tc, trace_never_empties_a_hard_linked_copy);
    tcase_add_test(tc, pool_block_counted_on_the_pools_device);
    tcase_add_test(tc, libcuda_fifo_is_a_bad_setting);
    tcase_add_test(tc, relative_outputs_where_named);
    tcase_add_test(tc, trace_header_past_file_size_limit);
    return tc;
}
