/* Findings of an outside check of the merged shim work of 2026-12-07 (helper-116), each a test
 * that failed before its fix. */
#include "preload_test.h"
#include "t_files.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A block from a device's default pool costs no driver call to find the pool's device: every
 * cuMemAllocFromPoolAsync on a machine with several devices asked cuDeviceGetCount and
 * cuDeviceGetDefaultMemPool of each device up to the pool's (100 blocks from device 1's default
 * pool on two devices: 100 cuDeviceGetCount and 200 cuDeviceGetDefaultMemPool). The child exits
 * with the driver calls the 100 blocks made beyond the first block's (or 250+ on a failed call). */
static void o116_default_pool_child(void *arg)
{
    int pdev = (int)(intptr_t)arg;
    CUdevice d0, d1;
    CUcontext c;
    CUstream s;
    CUmemoryPool pool;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&d0, 0) || cuDeviceGet(&d1, 1) || cuDevicePrimaryCtxRetain(&c, d0) ||
        cuCtxSetCurrent(c) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
        cuDeviceGetDefaultMemPool(&pool, pdev ? d1 : d0))
        exit(250);
    if (cuMemAllocFromPoolAsync(&p, 4096, pool, s) || cuMemFreeAsync(p, s))
        exit(251);
    unsigned long long a = simcuda_entry_calls("cuDeviceGetDefaultMemPool") +
                           simcuda_entry_calls("cuDeviceGetCount");
    for (int i = 0; i < 100; i++)
        if (cuMemAllocFromPoolAsync(&p, 4096, pool, s) || cuMemFreeAsync(p, s))
            exit(252);
    if (cuStreamSynchronize(s))
        exit(253);
    unsigned long long n = simcuda_entry_calls("cuDeviceGetDefaultMemPool") +
                           simcuda_entry_calls("cuDeviceGetCount") - a;
    exit(n < 249 ? (int)n : 249);
}

START_TEST(default_pool_device_asked_once)
{
    static const char *const modes[] = {"GPUARENA_MODE=arena", "GPUARENA_MODE=platform"};
    char err[8192];
    for (int m = 0; m < 2; m++)
        for (int pdev = 0; pdev < 2; pdev++) {
            pt_env(modes[m], "SIMCUDA_DEVICES=2", "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
            int rc = pt_run_child(o116_default_pool_child, (void *)(intptr_t)pdev, err, sizeof err);
            ck_assert_msg(rc < 250, "%s, device %d's default pool: exit %d: %s", modes[m], pdev, rc,
                          err);
            ck_assert_msg(rc == 0, "%s: 100 cuMemAllocFromPoolAsync from device %d's default pool "
                          "made %d cuDeviceGetCount/cuDeviceGetDefaultMemPool calls after the first "
                          "(249: more)", modes[m], pdev, rc);
        }
}
END_TEST

/* A file that holds bytes this process may not read (mode 0200, its own): the statistics and the
 * trace took it for an empty file and replaced it. Now both leave it, said. As root (who reads
 * every file) the file is nobody's and the child runs as nobody. */
static void o116_workload(void *arg)
{
    if (arg && (setgid(65534) != 0 || setuid(65534) != 0))
        exit(40);
    pt_start();
    CUdeviceptr p;
    if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
        exit(2);
    exit(0);
}

START_TEST(unreadable_file_never_replaced)
{
    static const char *const vars[] = {"GPUARENA_STATS", "GPUARENA_TRACE"};
    static const char notes[] = "my notes\n";
    int root = geteuid() == 0;
    for (int v = 0; v < 2; v++) {
        tf_dir_t d;
        char path[128], err[8192], buf[64] = {0};
        pt_env("GPUARENA_LOG=error", NULL);
        tf_mkdir(&d);
        ck_assert_int_eq(chmod(d.path, 0777), 0);
        int fd = open(tf_at(&d, "f.out", path, sizeof path), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, notes, sizeof notes - 1), (ssize_t)(sizeof notes - 1));
        close(fd);
        ck_assert_int_eq(chmod(path, 0200), 0);
        if (root)
            ck_assert_int_eq(chown(path, 65534, 65534), 0);
        tf_setenv(vars[v], path);
        ck_assert_int_eq(pt_run_child(o116_workload, root ? (void *)1 : NULL, err, sizeof err), 0);
        unsetenv(vars[v]);
        ck_assert_int_eq(chmod(path, 0600), 0);
        fd = open(path, O_RDONLY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_ge(read(fd, buf, sizeof buf - 1), 0);
        close(fd);
        ck_assert_msg(!strcmp(buf, notes), "%s: the file (mode 0200) was replaced: '%.20s'; said: %s",
                      vars[v], buf, err);
        ck_assert_msg(strstr(err, "holds bytes this process cannot read"), "%s said: %s", vars[v],
                      err);
        ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1);
        tf_rmtree(d.path);
    }
}
END_TEST

TCase *pt_tcase_outside116(void)
{
    TCase *tc = tcase_create("outside116");
    tcase_add_test(tc, default_pool_device_asked_once);
    tcase_add_test(tc, unreadable_file_never_replaced);
    return tc;
}
