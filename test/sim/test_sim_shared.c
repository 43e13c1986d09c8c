/* test-sim, what several processes see: device UUIDs that agree across processes, and (with
 * SIMCUDA_SHARED) device memory counted across processes, with dead processes' memory given back.
 * Children are forked before the parent's first driver call, so each reads its own settings.
 */
#include "test_sim.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

TCase *ts_tcase_shared(void)
{
    TCase *tc = tcase_create("shared");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, uuid_stable);
    tcase_add_test(tc, uuid_before_init);
    return tc;
}
