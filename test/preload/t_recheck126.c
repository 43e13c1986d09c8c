/* Findings of an outside recheck (helper-126, 2026-12-07) of the shim and simulated-driver changes
 * merged that day, each a test that failed before its fix. */
#include "preload_test.h"
#include "t_files.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct r126_import {
    int fd;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    CUresult r;
} r126_import_t;

/* fd -1: a retain of the handle mapped at va instead. */
static void *r126_import_thread(void *arg)
{
    r126_import_t *im = arg;
    im->r = im->fd < 0 ? cuMemRetainAllocationHandle(&im->h, (void *)(uintptr_t)im->va)
                       : cuMemImportFromShareableHandle(&im->h, (void *)(intptr_t)im->fd,
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    return NULL;
}

typedef struct r126_end {
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    size_t size;
    CUresult r;
    atomic_int done;
} r126_end_t;

/* The program's other thread ends its reference: the handle's release, or (va set) its mapping's
 * unmap. */
static void *r126_end_thread(void *arg)
{
    r126_end_t *e = arg;
    e->r = e->va ? cuMemUnmap(e->va, e->size) : cuMemRelease(e->h);
    atomic_store(&e->done, 1);
    return NULL;
}

/* An import of the program's own handle races its release (arg 0) or, the handle released
 * already, the unmap of its last mapping (1), or a retain from the mapping's address races that
 * unmap (2): the driver has taken the import's
 * reference when the other thread's call ends the shim's last one, so the shim gave the bytes back
 * and forgot the handle, and the import, finding no record, was left uncounted while the driver
 * kept the memory: a 40 MiB block was granted beside the 32 MiB still held under a 64 MiB cap. */
static void import_race_child(void *arg)
{
    pt_start();
    int how = (int)(intptr_t)arg;
    size_t size = 32 * MiB;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h;
    r126_import_t im = {.fd = -1};
    r126_end_t e = {.size = size};
    CUdeviceptr va = 0, p;
    if (cuMemCreate(&h, size, &prop, 0) ||
        cuMemExportToShareableHandle(&im.fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0))
        exit(2);
    e.h = h;
    if (how) { /* mapped, then released: alive through the mapping alone */
        if (cuMemAddressReserve(&va, size, 0, 0, 0) || cuMemMap(va, size, 0, h, 0) ||
            cuMemRelease(h))
            exit(3);
        e.va = va;
    }
    int fd = im.fd;
    if (how == 2)
        im.fd = -1, im.va = va;
    unsigned gate;
    pthread_t ti, te;
    if (simcuda_hold_next_import(&gate) || pthread_create(&ti, NULL, r126_import_thread, &im))
        exit(4);
    while (!simcuda_import_held(gate))
        sched_yield(); /* the driver has taken the import's reference */
    if (pthread_create(&te, NULL, r126_end_thread, &e))
        exit(5);
    /* Let the other call run as far as it can before the import goes on: to its end where nothing
     * orders it after the import (up to 2 s; no figure depends on how long). */
    for (int i = 0; i < 2000 && !atomic_load(&e.done); i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    simcuda_gate_open(gate);
    pthread_join(ti, NULL);
    pthread_join(te, NULL);
    if (im.r || e.r || im.h != h)
        exit(6);
    close(fd);
    if (simcuda_device_bytes_in_use(0) != size)
        exit(7); /* the import holds the memory */
    if (cuMemAlloc(&p, 40 * MiB) != CUDA_ERROR_OUT_OF_MEMORY) {
        fprintf(stderr, "a 40 MiB block beside the retained or imported 32 MiB under a 64 MiB cap "
                "was not refused: the device holds %llu bytes\n", simcuda_device_bytes_in_use(0));
        exit(10);
    }
    if (va && cuMemAddressFree(va, size))
        exit(8);
    if (cuMemRelease(im.h) || simcuda_device_bytes_in_use(0) != 0)
        exit(9);
    if (cuMemAlloc(&p, 40 * MiB) || cuMemFree(p))
        exit(11); /* every reference gone: the cap has the room again */
    exit(0);
}

START_TEST(import_or_retain_racing_the_last_release_counted)
{
    static const char *const modes[] = {"GPUARENA_MODE=grow", "GPUARENA_MODE=vmm",
                                        "GPUARENA_MODE=platform"};
    char err[4096];
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++)
        for (int how = 0; how < 3; how++) {
            static const char *const what[] = {"an import racing the release",
                                               "an import racing the unmap",
                                               "a retain racing the unmap"};
            pt_env(modes[m], "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
            int st = pt_run_child(import_race_child, (void *)(intptr_t)how, err, sizeof err);
            ck_assert_msg(st == 0, "%s, %s: exit %d: %s", modes[m], what[how], st, err);
        }
}
END_TEST

/* The import's lock is held across its driver call: a thread cancelled inside the driver there
 * (the simulated driver's hold is a cancellation point) must not leave it held, or every later
 * release and unmap of a handle waits for ever. Ends by alarm (SIGALRM) when it does. */
static void import_cancel_child(void *arg)
{
    (void)arg;
    pt_start();
    alarm(30);
    size_t size = 2 * MiB;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h;
    r126_import_t im = {.fd = -1};
    unsigned gate;
    pthread_t ti;
    if (cuMemCreate(&h, size, &prop, 0) ||
        cuMemExportToShareableHandle(&im.fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ||
        simcuda_hold_next_import(&gate) || pthread_create(&ti, NULL, r126_import_thread, &im))
        exit(2);
    while (!simcuda_import_held(gate))
        sched_yield();
    pthread_cancel(ti);
    simcuda_gate_open(gate);
    pthread_join(ti, NULL);
    /* The driver took the import's reference before the hold, cancelled or not: two releases
     * (the same handle value on this driver), each of which must end. */
    for (int i = 0; i < 2; i++)
        if (cuMemRelease(h))
            exit(3);
    close(im.fd);
    exit(simcuda_device_bytes_in_use(0) == 0 ? 0 : 4);
}

START_TEST(import_cancelled_inside_the_driver_keeps_no_lock)
{
    static const char *const modes[] = PT_ALL_MODES;
    char err[4096];
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        pt_env(modes[m], "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
        int st = pt_run_child(import_cancel_child, NULL, err, sizeof err);
        ck_assert_msg(st == 0, "%s: exit %d (a signal: a release waited for ever): %s", modes[m],
                      st, err);
    }
}
END_TEST

/* A process that allocates only with cuMemCreate, which needs no context, and never makes one. */
static void create_without_context_child(void *arg)
{
    (void)arg;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    if (cuInit(0) || cuMemCreate(&h, 2 * MiB, &prop, 0) || cuMemRelease(h))
        exit(2);
    exit(0);
}

/* A process whose one allocation call the driver refused: no context current. */
static void alloc_without_context_child(void *arg)
{
    (void)arg;
    CUdeviceptr p;
    if (cuInit(0) || cuMemAlloc(&p, 2 * MiB) != CUDA_ERROR_INVALID_CONTEXT)
        exit(2);
    exit(0);
}

/* README: "Allocated means made an allocation or free call of any kind": a process that made
 * cuMemCreate and cuMemRelease calls with no context ever made wrote no statistics (the exit
 * returned early where no context state existed). */
START_TEST(stats_from_a_process_without_context)
{
    static const char *const modes[] = PT_ALL_MODES;
    char err[4096], path[256];
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        tf_dir_t d;
        tf_mkdir(&d);
        tf_at(&d, "s.json", path, sizeof path);
        pt_env(modes[m], "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
        tf_setenv("GPUARENA_STATS", path);
        int rc = pt_run_child(create_without_context_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d: %s", modes[m], rc, err);
        ck_assert_msg(access(path, F_OK) == 0, "%s: a process that made a cuMemCreate handle and "
                      "released it, with no context, wrote no statistics", modes[m]);
        ck_assert_msg(pt_json_check(path, "d['totals']['alloc_calls'] == 1 and "
                                    "d['totals']['free_calls'] == 1") == 0, "%s", modes[m]);
        unlink(path);
        rc = pt_run_child(alloc_without_context_child, NULL, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d: %s", modes[m], rc, err);
        ck_assert_msg(access(path, F_OK) == 0 &&
                          pt_json_check(path, "d['totals']['alloc_calls'] == 1 and "
                                        "d['totals']['failed_allocs'] == 1") == 0,
                      "%s: a process whose cuMemAlloc the driver refused (no context) wrote no "
                      "report of it", modes[m]);
        unsetenv("GPUARENA_STATS");
        tf_rmtree(d.path);
    }
}
END_TEST

TCase *pt_tcase_recheck126(void)
{
    TCase *tc = tcase_create("recheck126");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, import_or_retain_racing_the_last_release_counted);
    tcase_add_test(tc, stats_from_a_process_without_context);
    tcase_add_test(tc, import_cancelled_inside_the_driver_keeps_no_lock);
    return tc;
}
