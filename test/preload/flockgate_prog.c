/* A program that holds its first flock at a gate, for t_trace_race.c: two writers of one trace path.
 *   GA_FLOCK_GATE=DIR flockgate_prog     (run under the shim with GPUARENA_TRACE set)
 * It defines flock itself (linked with -rdynamic, so the executable's definition comes first for
 * every library, the shim included). With GA_FLOCK_GATE set, the first flock call creates
 * DIR/reached and waits until DIR/go exists (at most 60 s), then goes to the C library's flock;
 * every later call goes there at once. The program allocates and frees one block (which makes
 * the shim open its trace), and exits 0; 2: set-up failed. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int flock(int fd, int op)
{
    static int passed;
    const char *dir = getenv("GA_FLOCK_GATE");
    if (dir && !passed) {
        passed = 1;
        char path[4096];
        snprintf(path, sizeof path, "%s/reached", dir);
        int m = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (m >= 0)
            close(m);
        snprintf(path, sizeof path, "%s/go", dir);
        struct timespec ts = {0, 5000000};
        for (int i = 0; i < 12000 && access(path, F_OK) != 0; i++)
            nanosleep(&ts, NULL);
    }
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
    return real ? real(fd, op) : -1;
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuMemAlloc(&p, 1 << 20) || cuMemFree(p))
        return 2;
    return 0;
}
