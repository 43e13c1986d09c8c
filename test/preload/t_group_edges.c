/* Preload tests: groups of processes under one cap (split from t_group.c, whose helpers they share
 * through t_group.h): a member joining a device's ledger when it first allocates there, two groups
 * on one device, a bad group name, the device plugins' limits (HAMi, KAI), a member returning from
 * main while its threads allocate, a full group. Added to the "group" case by pt_group_edges_add().
 */
#include "t_group.h"
#include "../../shim/group_layout.h"
#include "../group/procstat.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A member joins a device's ledger when it first allocates there, not at cuInit: every member had
 * a slot on every device from cuInit, so `gpuarena top` showed 0 B rows for devices it never used
 * (an earlier round's note). Two devices, a 1 GiB group cap: another member holds 900 MiB on
 * device 1; the member allocates 100 MiB on device 0 and has no slot on device 1 (its primary
 * context there retained and current, cuMemGetInfo asked); then on device 1 200 MiB is refused and
 * 100 MiB fits, so the late join counts against the cap exactly (the driver's peak there). */
static void lazy_member(int up, int down)
{
    CUdevice dev;
    CUcontext ctx[2];
    CUdeviceptr p;
    size_t fr, tot;
    char r[3] = "nnn", go;
    if (cuInit(0))
        _exit(90);
    for (int d = 0; d < 2; d++)
        if (cuDeviceGet(&dev, d) || cuDevicePrimaryCtxRetain(&ctx[d], dev))
            _exit(91);
    if (!cuCtxSetCurrent(ctx[1]) && !cuMemGetInfo(&fr, &tot) && !cuCtxSetCurrent(ctx[0]) &&
        !cuMemAlloc(&p, 100 * MiB))
        r[0] = 'y';
    if (write(up, r, 1) != 1 || read(down, &go, 1) != 1 || cuCtxSetCurrent(ctx[1]))
        _exit(92);
    r[1] = cuMemAlloc(&p, 200 * MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 'y' : 'n';
    r[2] = cuMemAlloc(&p, 100 * MiB) == CUDA_SUCCESS ? 'y' : 'n';
    if (write(up, r + 1, 2) != 2)
        _exit(93);
    pause();
    _exit(0);
}

static pid_t holder_on_device_1(size_t bytes)
{
    int up[2];
    ck_assert_int_eq(pipe(up), 0);
    pid_t pid = fork();
    if (pid == 0) {
        putenv("GPUARENA_MODE=platform");
        CUdevice dev;
        CUcontext ctx;
        CUdeviceptr p;
        char ok = 'n';
        if (!cuInit(0) && !cuDeviceGet(&dev, 1) && !cuDevicePrimaryCtxRetain(&ctx, dev) &&
            !cuCtxSetCurrent(ctx) && !cuMemAlloc(&p, bytes))
            ok = 'y';
        pt_child_report_and_hold(up[1], ok);
    }
    char ok = pt_child_report_read(up[0]);
    ck_assert_int_eq(ok, 'y');
    close(up[0]);
    close(up[1]);
    return pid;
}

START_TEST(group_joins_devices_it_uses)
{
    group_env("1GiB");
    putenv("SIMCUDA_DEVICES=2");
    pid_t holder = holder_on_device_1(900 * MiB);
    int up[2], down[2];
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(down), 0);
    pid_t member = fork();
    if (member == 0) {
        putenv("GPUARENA_MODE=grow");
        lazy_member(up[1], down[0]);
    }
    char r[3] = {0};
    ck_assert_int_eq(read(up[0], r, 1), 1);
    uint64_t on0 = ledger_figure_on(0, member, offsetof(ga_ledger_slot_t, committed));
    uint64_t on1 = ledger_figure_on(1, member, offsetof(ga_ledger_slot_t, committed));
    ck_assert_int_eq(write(down[1], "g", 1), 1);
    ck_assert_int_eq(read(up[0], r + 1, 2), 2);
    uint64_t later1 = ledger_figure_on(1, member, offsetof(ga_ledger_slot_t, committed));
    unsigned long long peak1 = simcuda_device_peak_all(1);
    int status = 0;
    kill(member, SIGKILL);
    waitpid(member, &status, 0);
    kill(holder, SIGKILL);
    waitpid(holder, &status, 0);
    group_cleanup();
    unsetenv("SIMCUDA_DEVICES");
    ck_assert_msg(r[0] == 'y', "the member's first steps");
    ck_assert_msg(on0 == 100 * MiB, "device 0's ledger holds the member's 100 MiB (%llu)",
                  (unsigned long long)on0);
    ck_assert_msg(on1 == UINT64_MAX, "no slot on device 1 before its first allocation there "
                  "(committed %llu)", (unsigned long long)on1);
    ck_assert_msg(r[1] == 'y' && r[2] == 'y', "on device 1, 200 MiB refused (%c) and 100 MiB "
                  "served (%c) beside the other member's 900 MiB", r[1], r[2]);
    ck_assert_msg(later1 == 100 * MiB && peak1 <= 1 * GiB, "device 1: the member holds %llu, the "
                  "driver's peak %llu within the 1 GiB cap", (unsigned long long)later1, peak1);
}
END_TEST

/* ---- two groups on one device are independent ---- */
START_TEST(group_two_groups_independent)
{
    group_env("1GiB");
    pid_t a = group_holder(900 * MiB);
    pid_t b = fork();
    if (b == 0) {
        char other[64];
        snprintf(other, sizeof other, "GPUARENA_GROUP=other%d", (int)getppid());
        putenv(other);
        member_start("GPUARENA_MODE=grow");
        CUdeviceptr p;
        _exit(cuMemAlloc(&p, 900 * MiB) == CUDA_SUCCESS ? 0 : 1);
    }
    int status = 0;
    waitpid(b, &status, 0);
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "another group has its own cap");
    group_cleanup();
}
END_TEST

/* ---- a bad group name is a bad setting ---- */
static void bad_group_child(void *arg)
{
    (void)arg;
    putenv("GPUARENA_GROUP=no/slash");
    exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
}

/* A relative ledger folder would give members started in different directories different
 * ledgers, each its own cap: refused. */
static void relative_dir_child(void *arg)
{
    (void)arg;
    putenv("GPUARENA_GROUP=ok");
    putenv("GPUARENA_GROUP_DIR=ledgers");
    exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
}

START_TEST(group_bad_name_refused)
{
    char err[4096];
    ck_assert_msg(pt_run_child(bad_group_child, NULL, err, sizeof err) == 0, "refused: %s", err);
    ck_assert_msg(strstr(err, "GPUARENA_GROUP"), "the message names the setting: %s", err);
    ck_assert_msg(pt_run_child(relative_dir_child, NULL, err, sizeof err) == 0, "refused: %s", err);
    ck_assert_msg(strstr(err, "GPUARENA_GROUP_DIR='ledgers'") && strstr(err, "absolute"),
                  "the message names the setting and says why: %s", err);
}
END_TEST

/* ---- a long ledger folder: the message keeps its fix ---- */
/* GPUARENA_GROUP_DIR of 430 bytes under a plain file (ENOTDIR): the group's "cannot create"
 * message names the folder twice, and a 512-byte buffer cut it before its fix (helper-144). */
static void long_dir_child(void *arg)
{
    static char env[600];
    snprintf(env, sizeof env, "GPUARENA_GROUP_DIR=%s", (const char *)arg);
    putenv(env);
    putenv("GPUARENA_GROUP=longdir");
    putenv("GPUARENA_LIMIT=64MiB");
    CUdevice dev;
    CUcontext ctx;
    CUresult r = cuInit(0);
    if (r == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS)
        r = cuDevicePrimaryCtxRetain(&ctx, dev);
    exit(r == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
}

START_TEST(group_long_dir_message_keeps_its_fix)
{
    char file[64] = "/tmp/gatest-longdir-XXXXXX", dir[512], err[8192];
    int fd = mkstemp(file);
    ck_assert_int_ge(fd, 0);
    close(fd);
    int n = snprintf(dir, sizeof dir, "%s", file);
    while (n < 430)
        n += snprintf(dir + n, sizeof dir - (size_t)n, "/%s", "a-rather-long-folder-name");
    int rc = pt_run_child(long_dir_child, dir, err, sizeof err);
    unlink(file);
    ck_assert_msg(rc == 0, "refused as a bad setting: %s", err);
    ck_assert_msg(strstr(err, "cannot create a group ledger in") && strstr(err, dir) &&
                  strstr(err, "create that folder, or set GPUARENA_GROUP_DIR to one that exists") &&
                  strstr(err, "every member must name the same one"),
                  "the whole message, its fix included: %s", err);
}
END_TEST

/* ---- HAMi / KAI: CUDA_DEVICE_MEMORY_LIMIT when GPUARENA_LIMIT is unset ---- */
static void hami_child(void *arg)
{
    putenv((char *)arg);
    putenv("SIMCUDA_TOTAL_MEM=4GiB");
    member_start(NULL);
    size_t fr, total;
    CUdeviceptr p;
    int good = cuMemGetInfo(&fr, &total) == CUDA_SUCCESS && total == 512 * MiB &&
               cuMemAlloc(&p, 600 * MiB) == CUDA_ERROR_OUT_OF_MEMORY;
    exit(good ? 0 : 1);
}

START_TEST(hami_limit_is_the_cap)
{
    char err[4096], stats[] = "/tmp/gpuarena-hami-XXXXXX", senv[128];
    close(mkstemp(stats));
    snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
    pt_env(senv, NULL);
    ck_assert_msg(pt_run_child(hami_child, "CUDA_DEVICE_MEMORY_LIMIT=512m", err, sizeof err) == 0,
                  "CUDA_DEVICE_MEMORY_LIMIT=512m caps at 512 MiB: %s", err);
    /* The statistics say which cap held and where it came from (limit was null), and the
     * out-of-memory line names the plugin's variable, not GPUARENA_LIMIT, which is unset. */
    ck_assert_int_eq(pt_json_check(stats, "d['options']['limit'] == 512 * 2**20 and "
                                          "d['options']['limit_from'] == "
                                          "'CUDA_DEVICE_MEMORY_LIMIT' and "
                                          "d['devices'][0]['cap'] == 512 * 2**20"), 0);
    ck_assert_msg(strstr(err, "the cap is CUDA_DEVICE_MEMORY_LIMIT's") &&
                  !strstr(err, "raise GPUARENA_LIMIT"), "%s", err);
    ck_assert_msg(pt_run_child(hami_child, "CUDA_DEVICE_MEMORY_LIMIT_0=512m", err, sizeof err) == 0,
                  "CUDA_DEVICE_MEMORY_LIMIT_0=512m caps device 0: %s", err);
    ck_assert_int_eq(pt_json_check(stats, "d['options']['limit'] is None and "
                                          "d['devices'][0]['cap'] == 512 * 2**20"), 0);
    unlink(stats);
}
END_TEST

/* A group whose cap is the device plugin's: its out-of-memory says so, as a lone process's does; it
 * told the member to raise GPUARENA_LIMIT, which is unset (an outside check, 2026-12-06). */
static void hami_group_child(void *arg)
{
    (void)arg;
    unsetenv("GPUARENA_LIMIT");
    putenv("CUDA_DEVICE_MEMORY_LIMIT=512m");
    member_start("GPUARENA_MODE=vmm");
    CUdeviceptr p, q;
    if (cuMemAlloc(&p, 400 * MiB) != CUDA_SUCCESS)
        exit(2);
    exit(cuMemAlloc(&q, 200 * MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 3);
}

START_TEST(hami_limit_in_a_group_named)
{
    char err[4096];
    group_env("1GiB");
    int rc = pt_run_child(hami_group_child, NULL, err, sizeof err);
    group_cleanup();
    ck_assert_msg(rc == 0, "the plugin's 512 MiB is the group's cap: exit %d; %s", rc, err);
    ck_assert_msg(strstr(err, "group's cap 512 MiB") &&
                  strstr(err, "the group's cap is CUDA_DEVICE_MEMORY_LIMIT's") &&
                  !strstr(err, "raise GPUARENA_LIMIT"), "%s", err);
}
END_TEST

/* Beside GPUARENA_LIMIT, the device plugin's limit where it is the smaller: the plugin enforces it
 * itself, and a GPUARENA_LIMIT above it won silently, reporting 900 MiB under a 64 MiB pod limit
 * (helper-68 F7). arg: "GPUARENA_LIMIT=...,CUDA_DEVICE_MEMORY_LIMIT=...,<cap in MiB>". */
static void plugin_pair_child(void *arg)
{
    static char spec[128], *gl, *hl;
    snprintf(spec, sizeof spec, "%s", (const char *)arg);
    gl = strtok(spec, ",");
    hl = strtok(NULL, ",");
    unsigned long long want = strtoull(strtok(NULL, ","), NULL, 10) * MiB;
    putenv(gl);
    putenv(hl);
    putenv("SIMCUDA_TOTAL_MEM=4GiB");
    member_start(NULL);
    size_t fr, total;
    CUdeviceptr p;
    if (cuMemGetInfo(&fr, &total) || total != want)
        exit(2);
    if (cuMemAlloc(&p, want + MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(3);
    exit(0);
}

START_TEST(plugin_limit_below_gpuarena_limit_is_the_cap)
{
    char err[4096], stats[] = "/tmp/gpuarena-plugin-XXXXXX", senv[128];
    close(mkstemp(stats));
    snprintf(senv, sizeof senv, "GPUARENA_STATS=%s", stats);
    pt_env(senv, NULL);
    int rc = pt_run_child(plugin_pair_child, "GPUARENA_LIMIT=900MiB,CUDA_DEVICE_MEMORY_LIMIT=64m,64",
                          err, sizeof err);
    ck_assert_msg(rc == 0, "GPUARENA_LIMIT=900MiB beside CUDA_DEVICE_MEMORY_LIMIT=64m: exit %d (2: "
                  "cuMemGetInfo's total not 64 MiB, 3: more than 64 MiB served); %s", rc, err);
    ck_assert_msg(strstr(err, "GPUARENA_LIMIT (943718400 bytes here) is above the device plugin's "
                              "CUDA_DEVICE_MEMORY_LIMIT (67108864 bytes)") &&
                      strstr(err, "the cap is CUDA_DEVICE_MEMORY_LIMIT's"),
                  "not said: %s", err);
    ck_assert_int_eq(pt_json_check(stats, "d['options']['limit'] == 64 * 2**20 and "
                                          "d['options']['limit_from'] == "
                                          "'CUDA_DEVICE_MEMORY_LIMIT' and "
                                          "d['devices'][0]['cap'] == 64 * 2**20"), 0);
    /* per device, and a percentage: the same */
    rc = pt_run_child(plugin_pair_child, "GPUARENA_LIMIT=50%,CUDA_DEVICE_MEMORY_LIMIT_0=128m,128",
                      err, sizeof err);
    ck_assert_msg(rc == 0, "GPUARENA_LIMIT=50%% beside CUDA_DEVICE_MEMORY_LIMIT_0=128m: exit %d; %s",
                  rc, err);
    /* GPUARENA_LIMIT below the plugin's: its own, nothing said */
    rc = pt_run_child(plugin_pair_child, "GPUARENA_LIMIT=32MiB,CUDA_DEVICE_MEMORY_LIMIT=64m,32",
                      err, sizeof err);
    ck_assert_msg(rc == 0 && !strstr(err, "device plugin"), "GPUARENA_LIMIT=32MiB: exit %d; %s",
                  rc, err);
    ck_assert_int_eq(pt_json_check(stats, "d['options']['limit'] == 32 * 2**20 and "
                                          "d['options']['limit_from'] == 'GPUARENA_LIMIT'"), 0);
    /* a plugin value that is no size beside GPUARENA_LIMIT: left out, said; CUDA still runs */
    rc = pt_run_child(plugin_pair_child, "GPUARENA_LIMIT=32MiB,CUDA_DEVICE_MEMORY_LIMIT=lots,32",
                      err, sizeof err);
    ck_assert_msg(rc == 0 && strstr(err, "CUDA_DEVICE_MEMORY_LIMIT='lots' is not a size") &&
                      strstr(err, "left out: the cap is GPUARENA_LIMIT's"),
                  "exit %d; %s", rc, err);
    unlink(stats);
}
END_TEST

/* ---- a member that returns from main while its threads still allocate: the exit handler leaves
 * the group under them (it unmapped the ledger and freed its handle: SIGSEGV/SIGBUS in about half
 * the runs) ---- */
static volatile int g_exit_ops;

static void *exit_worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    cuCtxSetCurrent(g_ctx);
    for (;;) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, ((size_t)rand_r(&seed) % 8 + 1) * MiB) == CUDA_SUCCESS)
            cuMemFree(p);
        __atomic_add_fetch(&g_exit_ops, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void exit_child(void *arg)
{
    member_start((const char *)arg);
    cuCtxGetCurrent(&g_ctx);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, exit_worker, (void *)(uintptr_t)(i + 1));
    while (__atomic_load_n(&g_exit_ops, __ATOMIC_RELAXED) < 400)
        ;
    exit(0); /* main returns: the exit handlers run while the threads allocate */
}

START_TEST(group_exit_while_threads_allocate)
{
    static const char *const modes[] = {"GPUARENA_MODE=grow", "GPUARENA_MODE=vmm",
                                        "GPUARENA_MODE=platform", "GPUARENA_MODE=arena"};
    group_env("512MiB");
    int bad = 0, runs = 24, last = 0;
    for (int run = 0; run < runs; run++) {
        char err[4096];
        int rc = pt_run_child(exit_child, (void *)modes[run % 4], err, sizeof err);
        if (rc != 0) {
            bad++;
            last = rc;
        }
        ck_assert_msg(!strstr(err, "out of memory"), "no out-of-memory at exit: %s", err);
    }
    ck_assert_msg(bad == 0, "%d of %d members crashed at exit (last status %d)", bad, runs, last);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q gpuarena-", g_dir);
    ck_assert_msg(system(cmd) != 0, "the last member out removed the ledger");
    group_cleanup();
}
END_TEST

/* ---- a full group (256 live slots): a forked child of a member is told the group is full, not
 * to raise GPUARENA_LIMIT ---- */

static void full_group_member(void *arg)
{
    (void)arg;
    member_start("GPUARENA_MODE=platform");
    CUdeviceptr p;
    if (cuMemAlloc(&p, 10 * MiB) != CUDA_SUCCESS)
        exit(10);
    /* The other 255 slots: live processes (this one's pid and start time, as forge() in test/group). */
    unsigned char u[16];
    char path[512], hex[33];
    if (simcuda_device_uuid(0, u) != 0)
        exit(11);
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", u[i]);
    snprintf(path, sizeof path, "%s/gpuarena-%u-%s-%s", g_dir, (unsigned)getuid(),
             g_group + strlen("GPUARENA_GROUP="), hex);
    int fd = open(path, O_RDWR);
    ga_ledger_t *l = fd >= 0 ? mmap(NULL, GA_LEDGER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                             : MAP_FAILED;
    if (l == MAP_FAILED)
        exit(12);
    struct stat ns;
    uint64_t myns = stat("/proc/self/ns/pid", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
    pthread_mutex_lock(&l->lock);
    for (unsigned i = 0; i < GA_GROUP_SLOTS; i++) {
        ga_ledger_slot_t *s = &l->slots[i];
        if (s->state != GA_SLOT_FREE)
            continue;
        s->pid = (uint32_t)getpid();
        s->start = ga_test_start_of(getpid());
        s->pidns = myns;
        __atomic_store_n(&s->state, GA_SLOT_LIVE, __ATOMIC_RELEASE);
    }
    l->hwm = GA_GROUP_SLOTS;
    pthread_mutex_unlock(&l->lock);
    pid_t child = fork();
    if (child == 0)
        _exit(cuMemAlloc(&p, MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1);
    int st = 0;
    waitpid(child, &st, 0);
    exit(WIFEXITED(st) ? WEXITSTATUS(st) : 20);
}

START_TEST(group_full_says_full)
{
    group_env("1GiB");
    char err[8192];
    int rc = pt_run_child(full_group_member, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "the forked child of a full group is refused (exit %d): %s", rc, err);
    ck_assert_msg(strstr(err, "the group is full") && strstr(err, "256 slots") &&
                      !strstr(err, "raise GPUARENA_LIMIT") && !strstr(err, "other members hold"),
                  "the out-of-memory line says the group is full, not short of bytes: %s", err);
    group_cleanup();
}
END_TEST

/* ---- a member that exits while others run keeps its share until it is gone: its device memory
 * is the driver's until then (before, its share left the ledger in the shim's destructor, and
 * another member was granted memory the device still held: 66 and 68 MiB held under a 64 MiB
 * group cap in an outside test with members churning, 2026-12-06) ---- */

/* Holds 40 MiB, then exits; libgactor's destructor, which runs after the shim's, says so on up[1]
 * and holds the process there until a byte comes on down[0]. */
static void exiting_member(int up, int down)
{
    void *h = dlopen("libgactor.so", RTLD_NOW | RTLD_LOCAL);
    int *hold = h ? (int *)dlsym(h, "dtor_hold_fd") : NULL;
    if (!hold)
        _exit(20);
    member_start("GPUARENA_MODE=grow");
    CUdeviceptr p;
    if (cuMemAlloc(&p, 40 * MiB) || cuMemsetD8(p, 1, 40 * MiB))
        _exit(21);
    hold[0] = up, hold[1] = down;
    exit(0); /* p is never freed: the process's end gives it back */
}

START_TEST(group_exiting_member_keeps_its_share)
{
    group_env("64MiB");
    pid_t stays = group_holder(1 * MiB); /* a member that outlives the exiting one */
    int up[2], down[2];
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(down), 0);
    pid_t a = fork();
    if (a == 0)
        exiting_member(up[1], down[0]);
    char b = 0;
    ck_assert_msg(read(up[0], &b, 1) == 1, "the exiting member reached its late destructor");
    /* The member is in its exit, past the shim's destructor: the driver holds its 40 MiB. */
    pid_t other = fork();
    if (other == 0) {
        member_start("GPUARENA_MODE=platform");
        CUdeviceptr p;
        size_t fr = 0, total = 0;
        CUresult r = cuMemAlloc(&p, 40 * MiB);
        if (r == CUDA_SUCCESS)
            _exit(simcuda_device_peak_all(0) > 64 * MiB ? 3 : 2);
        _exit(r == CUDA_ERROR_OUT_OF_MEMORY && cuMemGetInfo(&fr, &total) == CUDA_SUCCESS &&
                      fr <= 24 * MiB ? 0 : 4);
    }
    int st = 0;
    waitpid(other, &st, 0);
    ck_assert_int_eq(write(down[1], &b, 1), 1);
    int ast = 0;
    waitpid(a, &ast, 0);
    ck_assert_msg(WIFEXITED(ast) && WEXITSTATUS(ast) == 0, "the exiting member: status %d", ast);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "while a member exits, another is granted its share: exit %d (2: granted, "
                  "3: granted and the device held more than the cap, 4: not an out-of-memory "
                  "or its free figure counts the exiting member's bytes as free)",
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    /* Once it is gone, its share is the others'. */
    other = fork();
    if (other == 0) {
        member_start("GPUARENA_MODE=platform");
        CUdeviceptr p;
        _exit(cuMemAlloc(&p, 60 * MiB) == CUDA_SUCCESS ? 0 : 1);
    }
    waitpid(other, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "after the member's end its share returns");
    kill(stays, SIGKILL);
    waitpid(stays, &st, 0);
    group_cleanup();
}
END_TEST

/* ---- the last member out while another is still in its exit: the ledger stays until that one is
 * gone, or removed as soon as it is (before, it was removed at once, and a process joining then
 * was granted the whole cap while the driver still held the exiting member's memory: 40 + 40 MiB
 * under a 64 MiB cap, an outside re-check, 2026-12-06) ---- */

/* A member holding 1 MiB that exits normally (its exit handler runs) when a byte comes on go. */
static pid_t member_exiting_on(int go)
{
    pid_t b = fork();
    if (b == 0) {
        member_start("GPUARENA_MODE=grow");
        CUdeviceptr p;
        char c;
        if (cuMemAlloc(&p, 1 * MiB) || read(go, &c, 1) != 1)
            _exit(1);
        exit(0);
    }
    return b;
}

static int ledger_files(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q gpuarena-", g_dir);
    return system(cmd) == 0;
}

START_TEST(group_last_out_waits_for_exiting_members)
{
    for (int together = 0; together < 2; together++) {
        group_env("64MiB");
        int up[2], down[2], go[2];
        ck_assert_int_eq(pipe(up), 0);
        ck_assert_int_eq(pipe(down), 0);
        ck_assert_int_eq(pipe(go), 0);
        pid_t b = member_exiting_on(go[0]);
        pid_t a = fork();
        if (a == 0)
            exiting_member(up[1], down[0]);
        char c = 0;
        ck_assert_msg(read(up[0], &c, 1) == 1, "the exiting member reached its late destructor");
        /* b is the last member out, a still in its exit (held there, or let go at once) */
        ck_assert_int_eq(write(go[1], &c, 1), 1);
        if (together)
            ck_assert_int_eq(write(down[1], &c, 1), 1);
        int st = 0, ast = 0;
        waitpid(b, &st, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the last member out: %d", st);
        if (together) {
            waitpid(a, &ast, 0);
            ck_assert_msg(!ledger_files(), "members exiting together leave no ledger behind");
            group_cleanup();
            continue;
        }
        pid_t other = fork();
        if (other == 0) {
            member_start("GPUARENA_MODE=platform");
            CUdeviceptr p;
            CUresult r = cuMemAlloc(&p, 40 * MiB);
            if (r == CUDA_SUCCESS)
                _exit(simcuda_device_peak_all(0) > 64 * MiB ? 3 : 2);
            _exit(r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 4);
        }
        waitpid(other, &st, 0);
        ck_assert_int_eq(write(down[1], &c, 1), 1);
        waitpid(a, &ast, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "a process joining while a member is still in its exit is granted its "
                      "share: exit %d (2: granted, 3: granted and the device held more than the "
                      "cap, 4: not an out-of-memory)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        group_cleanup();
    }
}
END_TEST

void pt_group_edges_add(TCase *tc)
{
    tcase_add_test(tc, group_exiting_member_keeps_its_share);
    tcase_add_test(tc, group_last_out_waits_for_exiting_members);
    tcase_add_test(tc, group_joins_devices_it_uses);
    tcase_add_test(tc, group_two_groups_independent);
    tcase_add_test(tc, group_bad_name_refused);
    tcase_add_test(tc, group_long_dir_message_keeps_its_fix);
    tcase_add_test(tc, hami_limit_is_the_cap);
    tcase_add_test(tc, hami_limit_in_a_group_named);
    tcase_add_test(tc, plugin_limit_below_gpuarena_limit_is_the_cap);
    tcase_add_test(tc, group_exit_while_threads_allocate);
    tcase_add_test(tc, group_full_says_full);
}
