/* For the preload tests: a library whose constructor makes the process's first CUDA calls, while
 * the dynamic loader is still busy loading it. The shim must start safely from there. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <unistd.h>

__attribute__((visibility("default"))) int ctor_result = -1;

__attribute__((constructor)) static void ctor_first_cuda_calls(void)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr p;
    ctor_result = cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) ||
                  cuCtxSetCurrent(c) || cuMemAlloc_v2(&p, 4096) || cuMemFree_v2(p);
}

/* And a library whose destructor frees what the program left to it (helper-43 F5): _dl_fini runs
 * it after the preloaded shim's destructor wrote the report, so the report must be written again
 * with this free in it. Set by test stats_rewritten_after_late_free; 0 leaves the exit alone. */
__attribute__((visibility("default"))) CUdeviceptr dtor_free_at_exit;

__attribute__((destructor)) static void dtor_late_free(void)
{
    if (dtor_free_at_exit)
        cuMemFree_v2(dtor_free_at_exit);
}

/* And one whose destructor holds the process in its exit, after the shim's destructor, until told
 * to go: the driver still holds the process's device memory then (on a GPU, until the process is
 * gone). Set by test group_exiting_member_keeps_its_share: it writes a byte to dtor_hold_fd[0]
 * and reads one from dtor_hold_fd[1]. -1 leaves the exit alone. */
__attribute__((visibility("default"))) int dtor_hold_fd[2] = {-1, -1};

__attribute__((destructor)) static void dtor_hold(void)
{
    char b = 'x';
    if (dtor_hold_fd[0] < 0 || write(dtor_hold_fd[0], &b, 1) != 1)
        return;
    if (read(dtor_hold_fd[1], &b, 1) != 1)
        return;
}
