/* ex_direct: a program linked directly against the driver API (interposition path 1).
 *
 * It makes many cuMemAlloc_v2/cuMemFree_v2 calls of mixed sizes, writes a distinct pattern into
 * every block with cuMemcpyHtoD and reads it back with cuMemcpyDtoH, so an allocator that hands out
 * overlapping or short blocks is caught by data, not by trust. Blocks are freed in a shuffled order.
 *
 * usage: ex_direct [blocks=200] [max_kib=1024] [rounds=3]; exit 1 on any error or mismatch.
 */
#include "ex_common.h"

#include <string.h>

/* Fills buf with a pattern unique to (round, block). */
static void pattern(unsigned char *buf, size_t n, unsigned tag)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(tag * 131 + i * 7 + (i >> 8));
}

static void write_block(CUdeviceptr p, size_t n, unsigned tag, unsigned char *buf)
{
    pattern(buf, n, tag);
    EX_CHECK(cuMemcpyHtoD(p, buf, n));
}

int main(int argc, char **argv)
{
    ex_prog = "ex_direct";
    ex_error_name = cuGetErrorName;
    size_t blocks = (size_t)ex_count(argc, argv, 1, 200, 1);
    size_t max = (size_t)(ex_arg(argc, argv, 2, 1024) * 1024);
    int rounds = (int)ex_count(argc, argv, 3, 3, 1);
    CUcontext ctx;
    EX_CHECK(cuInit(0));
    EX_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    EX_CHECK(cuCtxSetCurrent(ctx));

    CUdeviceptr *ptr = calloc(blocks, sizeof *ptr);
    size_t *size = calloc(blocks, sizeof *size);
    size_t *order = calloc(blocks, sizeof *order);
    unsigned char *in = malloc(max), *out = malloc(max);
    if (!ptr || !size || !order || !in || !out || max == 0) {
        fprintf(stderr, "ex_direct: out of host memory\n");
        return 1;
    }
    unsigned long long seed = 0x9e3779b97f4a7c15ULL, calls = 0, bytes = 0;
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < blocks; i++) {
            /* mostly small blocks, one in eight up to max: the mix a framework produces */
            size_t cap = (ex_rand(&seed) % 8 == 0) ? max : (max < 4096 ? max : 4096);
            size[i] = 1 + (size_t)(ex_rand(&seed) % cap);
            EX_CHECK(cuMemAlloc(&ptr[i], size[i]));
            write_block(ptr[i], size[i], (unsigned)(r * 100003 + (int)i), in);
            order[i] = i;
            calls++, bytes += size[i];
        }
        for (size_t i = 0; i < blocks; i++) {
            pattern(in, size[i], (unsigned)(r * 100003 + (int)i));
            memset(out, 0, size[i]);
            EX_CHECK(cuMemcpyDtoH(out, ptr[i], size[i]));
            if (memcmp(in, out, size[i]) != 0) {
                fprintf(stderr, "ex_direct: block %zu of round %d (%zu bytes) read back wrong: "
                                "blocks overlap or were cut short\n", i, r, size[i]);
                return 1;
            }
        }
        for (size_t i = blocks; i > 1; i--) { /* Fisher-Yates: free in a shuffled order */
            size_t j = (size_t)(ex_rand(&seed) % i), t = order[i - 1];
            order[i - 1] = order[j], order[j] = t;
        }
        for (size_t i = 0; i < blocks; i++)
            EX_CHECK(cuMemFree(ptr[order[i]]));
    }
    EX_CHECK(cuDevicePrimaryCtxRelease(0));
    printf("ex_direct: %llu allocations, %llu bytes, %d rounds, every pattern read back intact\n", calls,
           bytes, rounds);
    free(ptr), free(size), free(order), free(in), free(out);
    return 0;
}
