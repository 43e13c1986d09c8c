/* ex_alloctime: the cost of one cuMemAlloc_v2 + cuMemFree_v2 pair, as the program sees it.
 *
 * Run it on the driver alone and under each gpuarena mode to compare what an allocation costs
 * (scripts/gpu-check.sh does, on a real GPU). Sizes cycle through a fixed, seeded mix so the arena
 * does real placement work rather than reusing one block. The first pair is timed apart: under
 * arena mode it carries the preallocation.
 *
 * usage: ex_alloctime [pairs=10000] [max_kib=4096]; prints "ns per alloc+free" and exits 0.
 */
#include "ex_common.h"

int main(int argc, char **argv)
{
    ex_prog = "ex_alloctime";
    ex_error_name = cuGetErrorName;
    size_t pairs = (size_t)ex_arg(argc, argv, 1, 10000);
    size_t max = (size_t)(ex_arg(argc, argv, 2, 4096) * 1024);
    CUcontext ctx;
    EX_CHECK(cuInit(0));
    EX_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    EX_CHECK(cuCtxSetCurrent(ctx));

    CUdeviceptr p;
    double t0 = ex_now();
    EX_CHECK(cuMemAlloc(&p, 512));
    EX_CHECK(cuMemFree(p));
    double first = ex_now() - t0;

    unsigned long long seed = 0x2545f4914f6cdd1dULL;
    t0 = ex_now();
    for (size_t i = 0; i < pairs; i++) {
        size_t n = 512 + (size_t)(ex_rand(&seed) % max);
        EX_CHECK(cuMemAlloc(&p, n));
        EX_CHECK(cuMemFree(p));
    }
    double t = ex_now() - t0;
    printf("ex_alloctime: %zu pairs up to %zu KiB: %.0f ns per alloc+free (first pair %.3f ms)\n",
           pairs, max >> 10, t * 1e9 / (double)pairs, first * 1e3);
    EX_CHECK(cuDevicePrimaryCtxRelease(0));
    return 0;
}
