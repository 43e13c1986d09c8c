/* ex_fragment: a fragmentation-prone pattern. It fills most of the free device memory with blocks of
 * alternating sizes (small, large, small, ...), frees every large one, then asks for one block a few
 * times the large size. Plenty of bytes are free in total, but no hole is that big: a sub-allocator
 * without room to grow fails here where one-call-per-allocation (platform) succeeds. Either outcome
 * is a result, not an error: the program prints which and exits 0; it exits 1 only on other errors.
 *
 * usage: ex_fragment [large_mib=64] [fill_fraction=0.9] [big_multiple=4]
 */
#include "ex_common.h"

int main(int argc, char **argv)
{
    ex_prog = "ex_fragment";
    ex_error_name = cuGetErrorName;
    size_t large = (size_t)(ex_arg(argc, argv, 1, 64) * 1048576.0);
    double fill = ex_arg(argc, argv, 2, 0.9);
    if (fill > 1) {
        fprintf(stderr, "%s: argument 2 (the fill fraction) is %g: at most 1\n", ex_prog, fill);
        return 2;
    }
    size_t big = large * (size_t)ex_count(argc, argv, 3, 4, 1);
    size_t small = large / 4;
    CUcontext ctx;
    EX_CHECK(cuInit(0));
    EX_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    EX_CHECK(cuCtxSetCurrent(ctx));
    size_t free0, total;
    EX_CHECK(cuMemGetInfo(&free0, &total));

    size_t target = (size_t)((double)free0 * (fill < 1 ? fill : 1)), used = 0, n = 0;
    size_t cap = target / (small + large) * 2 + 2;
    CUdeviceptr *p = calloc(cap, sizeof *p);
    if (!p)
        return 1;
    while (n < cap && used + (n % 2 ? large : small) <= target) {
        size_t sz = n % 2 ? large : small;
        CUresult r = cuMemAlloc(&p[n], sz);
        if (r == CUDA_ERROR_OUT_OF_MEMORY)
            break; /* a cap below what cuMemGetInfo promised: stop filling, keep going */
        EX_CHECK(r);
        used += sz, n++;
    }
    size_t freed = 0;
    for (size_t i = 1; i < n; i += 2) {
        EX_CHECK(cuMemFree(p[i]));
        freed += large;
    }

    size_t free1;
    EX_CHECK(cuMemGetInfo(&free1, &total));
    CUdeviceptr q = 0;
    CUresult r = cuMemAlloc(&q, big);
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("ex_fragment: %zu blocks (%zu MiB) filled, %zu MiB freed in %zu-MiB holes, driver says %zu MiB "
           "free; one %zu-MiB block: %s\n", n, used >> 20, freed >> 20, large >> 20, free1 >> 20, big >> 20,
           r == CUDA_SUCCESS ? "succeeded" : name);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY)
        ex_fail("cuMemAlloc(big)", r, __FILE__, __LINE__);
    if (q)
        EX_CHECK(cuMemFree(q));
    for (size_t i = 0; i < n; i += 2)
        EX_CHECK(cuMemFree(p[i]));
    EX_CHECK(cuDevicePrimaryCtxRelease(0));
    free(p);
    return 0;
}
