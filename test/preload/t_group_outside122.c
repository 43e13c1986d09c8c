/* Findings of an outside check of groups (issue 11) and hardening (issue 8), helper-122, each a
 * test that failed before its fix: a vmm newcomer short of bytes told the group was full, a
 * ledger whose lock is damaged used without its lock, and a read-only ledger of this user's own
 * answered with another folder as the fix. Helpers: t_group.c. */
#include "t_group.h"
#include "../../shim/group_layout.h"

#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The path of the one ledger in g_dir. */
static void o122_ledger_path(char *out, size_t n)
{
    DIR *d = opendir(g_dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    out[0] = '\0';
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "gpuarena-", 9))
            snprintf(out, n, "%s/%s", g_dir, e->d_name);
    closedir(d);
    ck_assert_msg(out[0], "a ledger in %s", g_dir);
}

/* The ledger's mutex overwritten with bytes no mutex has (a stray write, a forged file). */
static void o122_damage_lock(void)
{
    char path[512];
    o122_ledger_path(path, sizeof path);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char junk[sizeof(pthread_mutex_t)];
    memset(junk, 0xff, sizeof junk);
    ck_assert_int_eq(pwrite(fd, junk, sizeof junk, offsetof(ga_ledger_t, lock)), (ssize_t)sizeof junk);
    close(fd);
}

/* ---- a vmm member whose first block the group has no room for is told so, not "full" ----
 * vmm asks the group's room before its first commit, so the process had no slot yet, and the
 * out-of-memory line said "the group is full: all its 256 slots are taken" in a group of two. */
static void o122_vmm_newcomer(void *arg)
{
    (void)arg;
    member_start("GPUARENA_MODE=vmm");
    CUdeviceptr p;
    exit(cuMemAlloc(&p, 600 * MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1);
}

START_TEST(group_vmm_newcomer_short_of_bytes_not_full)
{
    group_env("1GiB");
    pid_t hog = group_holder(600 * MiB);
    char err[8192];
    int rc = pt_run_child(o122_vmm_newcomer, NULL, err, sizeof err);
    kill(hog, SIGKILL);
    waitpid(hog, NULL, 0);
    ck_assert_msg(rc == 0, "600 MiB beside another member's 600 MiB under 1 GiB refused (exit %d): %s",
                  rc, err);
    ck_assert_msg(!strstr(err, "the group is full") && strstr(err, "not enough free bytes in the group") &&
                      strstr(err, "other members hold 600 MiB"),
                  "the refusal says the group is short of bytes, not of slots: %s", err);
    group_cleanup();
}
END_TEST

/* ---- a ledger whose lock is damaged is refused at the join ----
 * pthread_mutex_timedlock answers EINVAL for such bytes, and ga_lock went on as if it held the
 * lock: every member summed, claimed slots and committed unlocked, without a word. */
static void o122_join_damaged(void *arg)
{
    (void)arg;
    pt_env("GPUARENA_MODE=platform", NULL);
    CUdeviceptr p;
    if (cuInit(0) == CUDA_SUCCESS) {
        CUdevice dev;
        CUcontext ctx;
        if (cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx))
            exit(3);
        exit(cuMemAlloc(&p, 1 * MiB) == CUDA_SUCCESS ? 1 : 2);
    }
    exit(0);
}

START_TEST(group_damaged_lock_refused_at_join)
{
    group_env("256MiB");
    pid_t holder = group_holder(1 * MiB);
    o122_damage_lock();
    char err[8192];
    int rc = pt_run_child(o122_join_damaged, NULL, err, sizeof err);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    ck_assert_msg(rc == 0, "a process joining a ledger whose lock is damaged is refused at cuInit "
                  "(exit %d: 1 allocated, 2 refused only the block): %s", rc, err);
    ck_assert_msg(strstr(err, "gpuarena:") && strstr(err, "its lock is not a ledger's") &&
                      strstr(err, "remove the file"),
                  "the refusal names the damaged lock and the fix: %s", err);
    group_cleanup();
}
END_TEST

/* A platform member that holds 1 MiB, then, after `between` ran in the parent, asks for 1 MiB
 * more; its stderr in err. Returns its wait status: exit 0 when refused for memory and
 * cuMemGetInfo then says nothing is free, 1 granted, 3 refused but room still promised. */
static int o122_member_across(void (*between)(void), char *err, size_t len)
{
    char out[] = "/tmp/gpuarena-o122-XXXXXX";
    int ofd = mkstemp(out);
    ck_assert_int_ge(ofd, 0);
    int up[2], down[2];
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(down), 0);
    pid_t m = fork();
    if (m == 0) {
        dup2(ofd, 2);
        member_start("GPUARENA_MODE=platform");
        CUdeviceptr p;
        char ok = cuMemAlloc(&p, 1 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
        if (write(up[1], &ok, 1) != 1 || read(down[0], &ok, 1) != 1)
            _exit(9);
        CUresult r = cuMemAlloc(&p, 1 * MiB);
        size_t fr = 1, total = 0;
        if (r == CUDA_ERROR_OUT_OF_MEMORY && (cuMemGetInfo(&fr, &total) || fr != 0))
            _exit(3); /* refused, yet room promised */
        _exit(r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : r == CUDA_SUCCESS ? 1 : 2);
    }
    char b = 0;
    ck_assert_int_eq(read(up[0], &b, 1), 1);
    ck_assert_msg(b == 'y', "the member's first block");
    between();
    ck_assert_int_eq(write(down[1], &b, 1), 1);
    int st = 0;
    waitpid(m, &st, 0);
    ssize_t n = pread(ofd, err, len - 1, 0);
    err[n > 0 ? n : 0] = '\0';
    close(ofd);
    unlink(out);
    close(up[0]), close(up[1]), close(down[0]), close(down[1]);
    return st;
}

/* ---- a lock damaged under a member: its next commit is refused, and said ----
 * The member joins and holds 1 MiB; the lock is damaged; its next 1 MiB was granted unlocked. */
START_TEST(group_lock_damaged_under_a_member_refuses)
{
    group_env("256MiB");
    char err[8192];
    int st = o122_member_across(o122_damage_lock, err, sizeof err);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the commit after the lock was damaged is "
                  "refused, and cuMemGetInfo then promises nothing (status %#x: exit 1 granted, 3 room "
                  "promised): %s", st, err);
    ck_assert_msg(strstr(err, "gpuarena: group '") && strstr(err, "cannot be taken") &&
                      strstr(err, "the file is damaged"),
                  "the damaged lock is said: %s", err);
    group_cleanup();
}
END_TEST

/* ---- a ledger lost under a member: the refusal says why ----
 * Its folder removed (rm -rf of GPUARENA_GROUP_DIR), the member said so and that its allocations
 * are refused, but each refusal's out-of-memory line then blamed a full device. */
static void o122_remove_folder(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(group_lost_ledger_refusal_names_it)
{
    group_env("256MiB");
    char err[8192];
    int st = o122_member_across(o122_remove_folder, err, sizeof err);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the commit after the ledger's folder went "
                  "is refused, and cuMemGetInfo then promises nothing (status %#x; exit 3: room "
                  "promised): %s", st, err);
    ck_assert_msg(strstr(err, "was removed while this process") &&
                      strstr(err, "the group's ledger cannot be used") &&
                      !strstr(err, "the device itself is full"),
                  "the out-of-memory line names the lost ledger, not a full device: %s", err);
    group_cleanup();
}
END_TEST

/* ---- this user's own ledger made read-only is named with its mode ----
 * The message said to set GPUARENA_GROUP_DIR to a folder of one's own, of a ledger in a folder
 * that is one's own already. As root (who may write any file) the scene runs as nobody. */
static void o122_read_only(void *arg)
{
    (void)arg;
    char shared[64];
    snprintf(shared, sizeof shared, "SIMCUDA_SHARED=o122ro%d", (int)getpid());
    pt_env(shared, NULL);
    if (getuid() == 0 && (chown(g_dir, 65534, 65534) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
        exit(5);
    pid_t holder = group_holder(1 * MiB);
    char path[512];
    o122_ledger_path(path, sizeof path);
    if (chmod(path, 0400) != 0)
        exit(6);
    pid_t other = fork();
    if (other == 0)
        exit(cuInit(0) == CUDA_SUCCESS ? 7 : 0);
    int st = 0;
    waitpid(other, &st, 0);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    chmod(path, 0600);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -f /dev/shm/simcuda-o122ro%d", (int)getpid());
    if (system(cmd) != 0)
        exit(8);
    exit(WIFEXITED(st) ? WEXITSTATUS(st) : 9);
}

START_TEST(group_read_only_ledger_named)
{
    group_env("256MiB");
    char err[8192];
    int rc = pt_run_child(o122_read_only, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "a read-only ledger refuses the newcomer (exit %d): %s", rc, err);
    ck_assert_msg(strstr(err, "cannot be opened for writing") && strstr(err, "mode 0400") &&
                      strstr(err, "chmod 600") && !strstr(err, "a folder of your own"),
                  "the refusal names the file's mode and its fix: %s", err);
    group_cleanup();
}
END_TEST

/* ---- a member that execs a program that never joins gives its share back ----
 * exec keeps the pid and the start time, so the member's slot looked alive until the process
 * exited, while its device memory went with the exec: 600 MiB of a 1 GiB cap refused to another
 * member while the exec'd `sleep` ran. */
START_TEST(group_exec_without_joining_gives_share_back)
{
    group_env("1GiB");
    int up[2];
    ck_assert_int_eq(pipe2(up, O_CLOEXEC), 0);
    pid_t m = fork();
    if (m == 0) {
        close(up[0]);
        member_start("GPUARENA_MODE=grow");
        CUdeviceptr p;
        char ok = cuMemAlloc(&p, 600 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
        if (write(up[1], &ok, 1) != 1)
            _exit(9);
        execl("/bin/sleep", "sleep", "60", (char *)NULL);
        _exit(8);
    }
    close(up[1]);
    char b = 0;
    ck_assert_int_eq(read(up[0], &b, 1), 1);
    ck_assert_msg(b == 'y', "the member's 600 MiB");
    ck_assert_int_eq(read(up[0], &b, 1), 0); /* end of file: the exec closed the pipe */
    close(up[0]);
    pid_t other = fork();
    if (other == 0) {
        member_start("GPUARENA_MODE=platform");
        CUdeviceptr p;
        _exit(cuMemAlloc(&p, 600 * MiB) == CUDA_SUCCESS ? 0 : 1);
    }
    int st = 0;
    waitpid(other, &st, 0);
    kill(m, SIGKILL);
    waitpid(m, NULL, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "600 MiB granted once the member that "
                  "held 600 MiB has exec'd a program that holds nothing (status %#x)", st);
    group_cleanup();
}
END_TEST

/* ---- a member whose main thread ended while its other threads run is alive ----
 * /proc/<pid>/stat shows such a process as a zombie, and the ledger took it for dead: its 600 MiB
 * share went to another member while the driver still held it (1.2 GiB under a 1 GiB cap). */
static void *o122_hold(void *arg)
{
    (void)arg;
    sleep(60);
    return NULL;
}

static int o122_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : 0;
}

START_TEST(group_member_whose_main_thread_ended_keeps_its_share)
{
    group_env("1GiB");
    int up[2];
    ck_assert_int_eq(pipe(up), 0);
    pid_t m = fork();
    if (m == 0) {
        member_start("GPUARENA_MODE=grow");
        CUdeviceptr p;
        char ok = cuMemAlloc(&p, 600 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
        pthread_t t;
        if (pthread_create(&t, NULL, o122_hold, NULL) != 0 || write(up[1], &ok, 1) != 1)
            _exit(9);
        pthread_exit(NULL); /* the process runs on in o122_hold, its 600 MiB held */
    }
    char b = 0;
    ck_assert_int_eq(read(up[0], &b, 1), 1);
    ck_assert_msg(b == 'y', "the member's 600 MiB");
    for (int i = 0; i < 500 && o122_state(m) != 'Z'; i++) /* its main thread's end, shown so */
        usleep(10000);
    ck_assert_msg(o122_state(m) == 'Z', "the member's main thread has ended (state %c)", o122_state(m));
    pid_t other = fork();
    if (other == 0) {
        member_start("GPUARENA_MODE=platform");
        CUdeviceptr p;
        CUresult r = cuMemAlloc(&p, 600 * MiB);
        _exit(r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : r == CUDA_SUCCESS ? 1 : 2);
    }
    int st = 0;
    waitpid(other, &st, 0);
    unsigned long long peak = simcuda_device_peak_all(0);
    kill(m, SIGKILL);
    waitpid(m, NULL, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "600 MiB refused beside the 600 MiB of a "
                  "member whose other thread runs (status %#x; exit 1: granted, the driver's peak "
                  "%llu MiB under the 1 GiB cap)", st, peak / MiB);
    ck_assert_msg(peak <= 1 * GiB, "the driver's peak %llu within the cap", peak);
    group_cleanup();
}
END_TEST

TCase *pt_tcase_group_outside122(void)
{
    TCase *tc = tcase_create("group_outside122");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, group_vmm_newcomer_short_of_bytes_not_full);
    tcase_add_test(tc, group_damaged_lock_refused_at_join);
    tcase_add_test(tc, group_lock_damaged_under_a_member_refuses);
    tcase_add_test(tc, group_lost_ledger_refusal_names_it);
    tcase_add_test(tc, group_read_only_ledger_named);
    tcase_add_test(tc, group_exec_without_joining_gives_share_back);
    tcase_add_test(tc, group_member_whose_main_thread_ended_keeps_its_share);
    return tc;
}
