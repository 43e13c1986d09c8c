/* Preload tests: groups of processes under one cap (GPUARENA_GROUP, issue 11), through the shim.
 * The simulated driver counts device memory across the processes of one SIMCUDA_SHARED name, so
 * "the group never held more than its cap" is the driver's own exact peak, not the shim's word.
 * The ledger on its own (SIGKILL at every point, pid reuse, pid namespaces) is test/group.
 */
#include "preload_test.h"
#include "../../shim/group_layout.h"
#include "../group/procstat.h"

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

static char g_dir[64], g_shared[64], g_group[64], g_gdir[96];

/* A fresh group, ledger folder and shared driver counter for this test. */
static void group_env(const char *limit)
{
    static char lim[64];
    snprintf(g_dir, sizeof g_dir, "/tmp/gpuarena-grp-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    snprintf(g_shared, sizeof g_shared, "SIMCUDA_SHARED=grp%d", (int)getpid());
    snprintf(g_group, sizeof g_group, "GPUARENA_GROUP=g%d", (int)getpid());
    snprintf(g_gdir, sizeof g_gdir, "GPUARENA_GROUP_DIR=%s", g_dir);
    snprintf(lim, sizeof lim, "GPUARENA_LIMIT=%s", limit);
    pt_env(g_shared, g_group, g_gdir, lim, "SIMCUDA_TOTAL_MEM=4GiB", NULL);
}

static void group_cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s; rm -f /dev/shm/simcuda-grp%d", g_dir, (int)getpid());
    if (system(cmd) != 0)
        return;
}

static void member_start(const char *mode)
{
    if (mode)
        putenv((char *)mode);
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx))
        _exit(90);
}

/* ---- 4 processes x 4 threads, arena/grow/vmm/platform members, one 1 GiB cap ---- */
static CUcontext g_ctx;

static void *member_thread(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    cuCtxSetCurrent(g_ctx);
    CUdeviceptr live[6] = {0};
    for (int i = 0; i < 200; i++) {
        unsigned k = (unsigned)rand_r(&seed) % 6;
        if (live[k] && cuMemFree(live[k]) != CUDA_SUCCESS)
            return (void *)1;
        live[k] = 0;
        CUresult r = cuMemAlloc(&live[k], ((size_t)rand_r(&seed) % 64 + 1) * MiB);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY)
            return (void *)2;
        if (r != CUDA_SUCCESS)
            live[k] = 0;
    }
    for (int k = 0; k < 6; k++)
        if (live[k])
            cuMemFree(live[k]);
    return NULL;
}

START_TEST(group_four_by_four_under_cap)
{
    static const char *const modes[] = {"GPUARENA_MODE=grow", "GPUARENA_MODE=vmm",
                                        "GPUARENA_MODE=platform", "GPUARENA_MODE=arena"};
    group_env("1GiB");
    pid_t pid[4];
    for (int p = 0; p < 4; p++) {
        if ((pid[p] = fork()) == 0) {
            member_start(modes[p]);
            cuCtxGetCurrent(&g_ctx);
            pthread_t t[4];
            for (int i = 0; i < 4; i++)
                pthread_create(&t[i], NULL, member_thread, (void *)(uintptr_t)(p * 4 + i + 1));
            int bad = 0;
            for (int i = 0; i < 4; i++) {
                void *r;
                pthread_join(t[i], &r);
                bad |= r != NULL;
            }
            _exit(bad);
        }
    }
    for (int p = 0; p < 4; p++) {
        int status = 0;
        waitpid(pid[p], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s member: status %d",
                      modes[p], status);
    }
    /* The driver's exact peak over every process of the group (context overheads aside). */
    unsigned long long peak = simcuda_device_peak_all(0);
    ck_assert_msg(peak > 512 * MiB && peak <= 1 * GiB, "device-wide peak %llu within the group's "
                  "1 GiB cap (and the cap was reached for)", peak);
    group_cleanup();
}
END_TEST

/* A member in `mode` that holds `bytes` until it is killed; returns once it holds them. */
static pid_t group_holder_in(const char *mode, size_t bytes)
{
    int up[2];
    ck_assert_int_eq(pipe(up), 0);
    pid_t pid = fork();
    if (pid == 0) {
        member_start(mode);
        CUdeviceptr p;
        char ok = cuMemAlloc(&p, bytes) == CUDA_SUCCESS ? 'y' : 'n';
        if (write(up[1], &ok, 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    char ok = 0;
    ck_assert_int_eq(read(up[0], &ok, 1), 1);
    ck_assert_msg(ok == 'y', "the holder got its %zu bytes", bytes);
    close(up[0]);
    close(up[1]);
    return pid;
}

static pid_t group_holder(size_t bytes)
{
    return group_holder_in("GPUARENA_MODE=grow", bytes);
}

/* ---- a member killed with SIGKILL gives its share back ---- */
START_TEST(group_killed_member_share_returns)
{
    group_env("1GiB");
    pid_t hog = group_holder(700 * MiB);
    /* While it lives, the group has 324 MiB left. */
    pid_t other = fork();
    if (other == 0) {
        member_start("GPUARENA_MODE=platform");
        CUdeviceptr p;
        size_t fr, total;
        int good = cuMemGetInfo(&fr, &total) == CUDA_SUCCESS && total == 1 * GiB &&
                   fr == 324 * MiB && cuMemAlloc(&p, 400 * MiB) == CUDA_ERROR_OUT_OF_MEMORY;
        _exit(good ? 0 : 1);
    }
    int status = 0;
    waitpid(other, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the live member's share counts");
    kill(hog, SIGKILL);
    waitpid(hog, &status, 0);
    other = fork();
    if (other == 0) {
        member_start("GPUARENA_MODE=vmm");
        CUdeviceptr p;
        _exit(cuMemAlloc(&p, 1000 * MiB) == CUDA_SUCCESS ? 0 : 1); /* nearly the whole cap */
    }
    waitpid(other, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "after the SIGKILL the others reach the whole cap");
    group_cleanup();
}
END_TEST

/* ---- idle memory of a member: said in the others' out-of-memory line, and given back by a vmm
 * member with GPUARENA_VMM_KEEP=0 at its own cuCtxSynchronize ---- */

/* A vmm member, nothing kept, that allocates and frees `bytes` (then synchronises if `sync`) and
 * stays until it is killed; returns once it has freed them. Under GPUARENA_FREE_SYNC=deferred the
 * freed block is pending until the device has passed the free: without an allocation or a
 * synchronisation after it, it stays committed to the group. */
static pid_t group_idler(size_t bytes, int sync)
{
    int up[2];
    ck_assert_int_eq(pipe(up), 0);
    pid_t pid = fork();
    if (pid == 0) {
        putenv((char *)"GPUARENA_VMM_KEEP=0");
        member_start("GPUARENA_MODE=vmm");
        CUdeviceptr p;
        char ok = cuMemAlloc(&p, bytes) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS &&
                          (!sync || cuCtxSynchronize() == CUDA_SUCCESS) ? 'y' : 'n';
        if (write(up[1], &ok, 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    char ok = 0;
    ck_assert_int_eq(read(up[0], &ok, 1), 1);
    ck_assert_msg(ok == 'y', "the idler allocated and freed its %zu bytes", bytes);
    close(up[0]);
    close(up[1]);
    return pid;
}

static void take_600(void *arg)
{
    (void)arg;
    member_start("GPUARENA_MODE=grow");
    CUdeviceptr p;
    CUresult r = cuMemAlloc(&p, 600 * MiB);
    _exit(r == CUDA_SUCCESS ? 0 : r == CUDA_ERROR_OUT_OF_MEMORY ? 3 : 4);
}

START_TEST(group_idle_memory_of_members)
{
    group_env("1GiB");
    char err[4096];
    /* Freed but not yet passed by the device (no allocation or synchronisation since): the other
     * member is refused, and told who holds the memory and what gives it back. */
    pid_t idler = group_idler(600 * MiB, 0);
    int rc = pt_run_child(take_600, NULL, err, sizeof err);
    ck_assert_msg(rc == 3, "refused while the idler holds its pending 600 MiB (exit %d): %s", rc, err);
    ck_assert_msg(strstr(err, "not enough free bytes in the group") &&
                      strstr(err, "other members hold 600 MiB") &&
                      strstr(err, "GPUARENA_VMM_KEEP=0") && !strstr(err, "fragmentation"),
                  "the out-of-memory line names the other members' 600 MiB: %s", err);
    int status = 0;
    kill(idler, SIGKILL);
    waitpid(idler, &status, 0);
    /* The same member synchronising after its free: its granules went back to the device. */
    idler = group_idler(600 * MiB, 1);
    rc = pt_run_child(take_600, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "the idler's synchronisation gave its 600 MiB back (exit %d): %s", rc,
                  err);
    kill(idler, SIGKILL);
    waitpid(idler, &status, 0);
    group_cleanup();
}
END_TEST

/* ---- an arena member whose preallocation does not fit beside another member's arena is told that
 * the other members hold the room, and to lower the fraction or change the mode, not the limit
 * (which the group refuses: every member must give the same cap) ---- */
static void arena_second(void *arg)
{
    (void)arg;
    member_start("GPUARENA_MODE=arena");
    CUdeviceptr p;
    _exit(cuMemAlloc(&p, MiB) == CUDA_SUCCESS ? 0 : 3);
}

START_TEST(group_prealloc_names_other_members)
{
    group_env("1GiB");
    char err[4096];
    pid_t holder = group_holder_in("GPUARENA_MODE=arena", MiB); /* its arena preallocated */
    int rc = pt_run_child(arena_second, NULL, err, sizeof err);
    ck_assert_msg(rc == 0, "the second member grows on demand (exit %d): %s", rc, err);
    ck_assert_msg(strstr(err, "could not preallocate 805306368 bytes on device 0: group 'g") &&
                      strstr(err, "(other members 805306368, this process 0)") &&
                      strstr(err, "a smaller GPUARENA_MEM_FRACTION") &&
                      strstr(err, "GPUARENA_MODE=vmm or grow") && !strstr(err, "GPUARENA_LIMIT"),
                  "the warning names the other members' bytes and not the limit: %s", err);
    int status = 0;
    kill(holder, SIGKILL);
    waitpid(holder, &status, 0);
    group_cleanup();
}
END_TEST

/* ---- pass-through memory freed with cuMemFreeAsync leaves the group's ledger when the member waits
 * for the free's stream or for an event after it (helper-42 F9: it stayed until the member's
 * next allocation, and the other member was refused for memory the driver had back) ---- */
static pid_t group_async_freer(size_t bytes, int how)
{
    int up[2];
    ck_assert_int_eq(pipe(up), 0);
    pid_t pid = fork();
    if (pid == 0) {
        member_start("GPUARENA_MODE=platform");
        CUstream s;
        CUevent ev;
        CUdeviceptr p;
        int ok = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
                 cuEventCreate(&ev, 0) == CUDA_SUCCESS &&
                 cuMemAllocAsync(&p, bytes, s) == CUDA_SUCCESS &&
                 simcuda_launch(s, p, 0xAA, 4096, 0) == CUDA_SUCCESS &&
                 cuMemFreeAsync(p, s) == CUDA_SUCCESS && cuEventRecord(ev, s) == CUDA_SUCCESS &&
                 (how == 0 ? cuStreamSynchronize(s) : cuEventSynchronize(ev)) == CUDA_SUCCESS;
        char c = ok ? 'y' : 'n';
        if (write(up[1], &c, 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    char ok = 0;
    ck_assert_int_eq(read(up[0], &ok, 1), 1);
    ck_assert_msg(ok == 'y', "the member freed its %zu bytes async and waited (way %d)", bytes, how);
    close(up[0]);
    close(up[1]);
    return pid;
}

START_TEST(group_async_free_leaves_ledger_at_wait)
{
    group_env("1GiB");
    for (int how = 0; how < 2; how++) {
        char err[4096];
        pid_t freer = group_async_freer(600 * MiB, how);
        int rc = pt_run_child(take_600, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "after the member's %s the driver held none of its 600 MiB, and "
                      "the group's ledger must not either (exit %d): %s",
                      how ? "cuEventSynchronize" : "cuStreamSynchronize", rc, err);
        int status = 0;
        kill(freer, SIGKILL);
        waitpid(freer, &status, 0);
    }
    group_cleanup();
}
END_TEST

/* ---- a member that forks keeps its share: the child's copy of the parent's pools is given up
 * in the child without touching the parent's slot ---- */
START_TEST(group_fork_keeps_parent_share)
{
    group_env("1GiB");
    int up[2];
    ck_assert_int_eq(pipe(up), 0);
    pid_t parent = fork();
    if (parent == 0) {
        member_start("GPUARENA_MODE=arena"); /* its first allocation commits 768 MiB */
        CUdeviceptr p;
        char ok = cuMemAlloc(&p, MiB) == CUDA_SUCCESS ? 'y' : 'n';
        pid_t child = fork();
        if (child == 0)
            exit(0); /* a worker that never uses CUDA, exit handlers and all */
        int st = 0;
        waitpid(child, &st, 0);
        if (write(up[1], &ok, 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    char ok = 0;
    ck_assert_int_eq(read(up[0], &ok, 1), 1);
    ck_assert_msg(ok == 'y', "the parent allocated");
    char err[4096];
    int rc = pt_run_child(take_600, NULL, err, sizeof err);
    ck_assert_msg(rc == 3, "600 MiB refused while the parent holds its 768 MiB arena (exit %d): %s",
                  rc, err);
    ck_assert_msg(simcuda_device_peak_all(0) <= 1 * GiB, "the group never held more than its cap "
                  "(the driver's peak across processes: %llu)", simcuda_device_peak_all(0));
    int status = 0;
    kill(parent, SIGKILL);
    waitpid(parent, &status, 0);
    group_cleanup();
}
END_TEST

/* ---- `gpuarena top`'s figures: what a member has in use shows in the ledger as allocations come
 * and go, not only when it reserves from the driver (an arena member reserves once, before its
 * first allocation, and showed nothing in use) ---- */
/* The member's slot's figure at `field` (its offset in the slot: in_use, reserved, peak) in the
 * ledger of device dev. */
static uint64_t ledger_figure_on(int dev, pid_t pid, size_t field);

static uint64_t ledger_figure(pid_t pid, size_t field)
{
    return ledger_figure_on(0, pid, field);
}

static uint64_t ledger_in_use(pid_t pid)
{
    return ledger_figure(pid, offsetof(ga_ledger_slot_t, in_use));
}

static uint64_t ledger_figure_on(int dev, pid_t pid, size_t field)
{
    unsigned char u[16];
    char path[512], hex[33];
    ck_assert_int_eq(simcuda_device_uuid(dev, u), 0);
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", u[i]);
    snprintf(path, sizeof path, "%s/gpuarena-%u-%s-%s", g_dir, (unsigned)getuid(),
             g_group + strlen("GPUARENA_GROUP="), hex);
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "the ledger %s", path);
    const ga_ledger_t *l = mmap(NULL, GA_LEDGER_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    ck_assert(l != MAP_FAILED);
    uint64_t v = UINT64_MAX;
    for (unsigned i = 0; i < l->hwm; i++)
        if (__atomic_load_n(&l->slots[i].state, __ATOMIC_ACQUIRE) == GA_SLOT_LIVE &&
            l->slots[i].pid == (uint32_t)pid)
            v = __atomic_load_n((const uint64_t *)(const void *)((const char *)&l->slots[i] +
                                                                   field), __ATOMIC_ACQUIRE);
    munmap((void *)l, GA_LEDGER_SIZE);
    return v;
}

START_TEST(group_top_figures_follow_allocations)
{
    group_env("1GiB");
    int up[2];
    ck_assert_int_eq(pipe(up), 0);
    pid_t member = fork();
    if (member == 0) {
        member_start("GPUARENA_MODE=arena");
        CUdeviceptr p[150];
        char ok = 'y';
        for (int i = 0; i < 150; i++) /* 300 MiB in 2 MiB blocks, inside the 768 MiB arena */
            ok = cuMemAlloc(&p[i], 2 * MiB) == CUDA_SUCCESS ? ok : 'n';
        if (write(up[1], &ok, 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    char ok = 0;
    ck_assert_int_eq(read(up[0], &ok, 1), 1);
    ck_assert_int_eq(ok, 'y');
    uint64_t in_use = ledger_in_use(member);
    int status = 0;
    kill(member, SIGKILL);
    waitpid(member, &status, 0);
    group_cleanup();
    /* Shown once 1/256 of the cap has moved since the last time: within 4 MiB of the truth. */
    ck_assert_msg(in_use <= 300 * MiB && in_use + 4 * MiB >= 300 * MiB,
                  "the ledger shows %llu bytes in use for 300 MiB", (unsigned long long)in_use);
}
END_TEST

/* `gpuarena top`'s PEAK RESERVED is never below RESERVED: an arena member's one commit wrote 768
 * MiB reserved beside a peak of 0 (the process's level peak, raised only after the driver call),
 * until a later publish (found by an outside test on 2026-12-05), in every mode. */
START_TEST(group_top_peak_not_below_reserved)
{
    static const char *modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow", "GPUARENA_MODE=vmm",
                                  "GPUARENA_MODE=platform"};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        group_env("1GiB");
        pid_t member = group_holder_in(modes[m], MiB);
        uint64_t reserved = ledger_figure(member, offsetof(ga_ledger_slot_t, reserved));
        uint64_t peak = ledger_figure(member, offsetof(ga_ledger_slot_t, peak));
        int status = 0;
        kill(member, SIGKILL);
        waitpid(member, &status, 0);
        group_cleanup();
        ck_assert_msg(reserved >= MiB && reserved != UINT64_MAX && peak >= reserved,
                      "%s: the ledger shows reserved %llu, peak %llu", modes[m],
                      (unsigned long long)reserved, (unsigned long long)peak);
    }
}
END_TEST

/* A member that freed everything shows nothing in use: a free that gives memory back to the driver
 * (platform mode, vmm with GPUARENA_FREE_SYNC=none) wrote its figures before the block left the
 * in-use level, and `gpuarena top` showed IN USE 1 KiB beside RESERVED 0 B for as long as the
 * member lived (an outside test, 2026-12-06). 60 MiB, then 1000 bytes, each freed, then 3,000 kept. */
START_TEST(group_top_in_use_not_above_reserved)
{
    static const char *modes[] = {"GPUARENA_MODE=platform", "GPUARENA_MODE=vmm"};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        group_env("100MiB");
        putenv("GPUARENA_FREE_SYNC=none");
        putenv("GPUARENA_VMM_KEEP=0");
        int up[2];
        ck_assert_int_eq(pipe(up), 0);
        pid_t member = fork();
        if (member == 0) {
            member_start(modes[m]);
            CUdeviceptr p;
            /* then 3,000 bytes kept (and 1,000 beside them freed, which writes the figures):
             * platform counts them 3,072 in use (512-byte units), and reserved showed the exact
             * 3,000 of the cap below it */
            CUdeviceptr q;
            char ok = cuMemAlloc(&p, 60 * MiB) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS &&
                              cuMemAlloc(&p, 1000) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS &&
                              cuMemAlloc(&p, 3000) == CUDA_SUCCESS &&
                              cuMemAlloc(&q, 1000) == CUDA_SUCCESS && cuMemFree(q) == CUDA_SUCCESS
                          ? 'y' : 'n';
            if (write(up[1], &ok, 1) != 1)
                _exit(2);
            pause();
            _exit(0);
        }
        char ok = 0;
        ck_assert_int_eq(read(up[0], &ok, 1), 1);
        uint64_t in_use = ledger_figure(member, offsetof(ga_ledger_slot_t, in_use));
        uint64_t reserved = ledger_figure(member, offsetof(ga_ledger_slot_t, reserved));
        int status = 0;
        kill(member, SIGKILL);
        waitpid(member, &status, 0);
        close(up[0]);
        close(up[1]);
        unsetenv("GPUARENA_FREE_SYNC");
        unsetenv("GPUARENA_VMM_KEEP");
        group_cleanup();
        ck_assert_int_eq(ok, 'y');
        ck_assert_msg(in_use <= reserved, "%s: the ledger shows %llu bytes in use beside %llu "
                      "reserved", modes[m], (unsigned long long)in_use,
                      (unsigned long long)reserved);
    }
}
END_TEST

/* Each device's ledger shows the member's figures on that device (helper-49 F9): IN USE and PEAK
 * RESERVED were the process's over every device, so device 1's row read 160 MiB in use beside 60
 * MiB committed, and in arena mode a peak of both arenas, above the cap. The member allocates 100
 * MiB on device 0, 60 MiB on device 1, then 4 MiB more on device 0 (which shows at once: 1/256
 * of the cap), in every mode. */
static void member_on_two_devices(int up)
{
    CUdevice dev;
    CUcontext ctx[2];
    CUdeviceptr p;
    char ok = 'y';
    if (cuInit(0))
        _exit(90);
    for (int d = 0; d < 2; d++)
        if (cuDeviceGet(&dev, d) || cuDevicePrimaryCtxRetain(&ctx[d], dev) ||
            cuCtxSetCurrent(ctx[d]) || cuMemAlloc(&p, d ? 60 * MiB : 100 * MiB))
            ok = 'n';
    if (cuCtxSetCurrent(ctx[0]) || cuMemAlloc(&p, 4 * MiB))
        ok = 'n';
    if (write(up, &ok, 1) != 1)
        _exit(2);
    pause();
    _exit(0);
}

START_TEST(group_top_figures_per_device)
{
    static const char *modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=grow", "GPUARENA_MODE=vmm",
                                  "GPUARENA_MODE=platform"};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        group_env("1GiB");
        putenv("SIMCUDA_DEVICES=2");
        int up[2];
        ck_assert_int_eq(pipe(up), 0);
        pid_t member = fork();
        if (member == 0) {
            putenv((char *)modes[m]);
            member_on_two_devices(up[1]);
        }
        char ok = 0;
        ck_assert_int_eq(read(up[0], &ok, 1), 1);
        close(up[0]);
        close(up[1]);
        uint64_t f[2][3];
        for (int d = 0; d < 2; d++) {
            f[d][0] = ledger_figure_on(d, member, offsetof(ga_ledger_slot_t, in_use));
            f[d][1] = ledger_figure_on(d, member, offsetof(ga_ledger_slot_t, reserved));
            f[d][2] = ledger_figure_on(d, member, offsetof(ga_ledger_slot_t, peak));
        }
        int status = 0;
        kill(member, SIGKILL);
        waitpid(member, &status, 0);
        group_cleanup();
        unsetenv("SIMCUDA_DEVICES");
        ck_assert_msg(ok == 'y', "%s: the member's allocations", modes[m]);
        for (int d = 0; d < 2; d++)
            ck_assert_msg(f[d][0] == (d ? 60 : 104) * MiB && f[d][1] >= f[d][0] &&
                          f[d][2] >= f[d][1] && f[d][2] <= 1 * GiB,
                          "%s: device %d's ledger shows in use %llu (want %d MiB), reserved %llu, "
                          "peak %llu (at most the 1 GiB cap)", modes[m], d,
                          (unsigned long long)f[d][0], d ? 60 : 104, (unsigned long long)f[d][1],
                          (unsigned long long)f[d][2]);
    }
}
END_TEST

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
        if (write(up[1], &ok, 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    char ok = 0;
    ck_assert_int_eq(read(up[0], &ok, 1), 1);
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

TCase *pt_tcase_group(void)
{
    TCase *tc = tcase_create("group");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, group_four_by_four_under_cap);
    tcase_add_test(tc, group_killed_member_share_returns);
    tcase_add_test(tc, group_idle_memory_of_members);
    tcase_add_test(tc, group_async_free_leaves_ledger_at_wait);
    tcase_add_test(tc, group_fork_keeps_parent_share);
    tcase_add_test(tc, group_top_figures_follow_allocations);
    tcase_add_test(tc, group_top_peak_not_below_reserved);
    tcase_add_test(tc, group_top_in_use_not_above_reserved);
    tcase_add_test(tc, group_top_figures_per_device);
    tcase_add_test(tc, group_joins_devices_it_uses);
    tcase_add_test(tc, group_two_groups_independent);
    tcase_add_test(tc, group_bad_name_refused);
    tcase_add_test(tc, hami_limit_is_the_cap);
    tcase_add_test(tc, plugin_limit_below_gpuarena_limit_is_the_cap);
    tcase_add_test(tc, group_exit_while_threads_allocate);
    tcase_add_test(tc, group_full_says_full);
    tcase_add_test(tc, group_prealloc_names_other_members);
    return tc;
}
