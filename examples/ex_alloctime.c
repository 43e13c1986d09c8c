/* ex_alloctime: the cost of one cuMemAlloc_v2 + cuMemFree_v2 pair, as the program sees it.
 *
 * Run it on the driver alone and under each gpuarena mode to compare what an allocation costs
 * (scripts/gpu-check.sh does, on a real GPU). Sizes cycle through a fixed, seeded mix so the arena
 * does real placement work rather than reusing one block. The first pair is timed apart: under
 * arena mode it carries the preallocation. hold_mib keeps that many MiB allocated (in blocks of
 * up to 1 GiB) during the loop: in vmm mode that many more granules mapped, which tells whether
 * the driver's calls on the way (the fence's cuCtxSynchronize) cost more with more mappings.
 *
 * usage: ex_alloctime [pairs=10000] [max_kib=4096] [hold_mib=0]; prints "ns per alloc+free" and
 * exits 0.
 */
#include "ex_common.h"

int main(int argc, char **argv)
{
    ex_prog = "ex_alloctime";
    ex_error_name = cuGetErrorName;
    size_t pairs = (size_t)ex_count(argc, argv, 1, 10000, 1);
    size_t max = (size_t)(ex_arg(argc, argv, 2, 4096) * 1024);
    CUcontext ctx;
    EX_CHECK(cuInit(0));
    EX_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    EX_CHECK(cuCtxSetCurrent(ctx));

    size_t hold = (size_t)ex_count(argc, argv, 3, 0, 0) << 20, held = 0, nheld = 0;
    CUdeviceptr p, blocks[64];
    while (held < hold && nheld < 64) {
        size_t n = hold - held < (1ull << 30) ? hold - held : (1ull << 30);
        EX_CHECK(cuMemAlloc(&blocks[nheld++], n));
        held += n;
    }
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
    printf("ex_alloctime: %zu pairs up to %zu KiB, %zu MiB held: %.0f ns per alloc+free (first "
           "pair %.3f ms)\n", pairs, max >> 10, held >> 20, t * 1e9 / (double)pairs, first * 1e3);
    for (size_t i = 0; i < nheld; i++)
        EX_CHECK(cuMemFree(blocks[i]));
    EX_CHECK(cuDevicePrimaryCtxRelease(0));
    return 0;
}
