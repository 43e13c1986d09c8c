/* Preload tests of vmm mode's pending free (allocator/pool_vmm.c, pend_hold; vmm_alloc.c,
 * alloc_pend) through the shim: a freed block of the general area whose next allocation, of
 * another size, is placed at its base takes it resized in place. What the program sees is as
 * before: the new block's bytes written and read back whole, its neighbours' untouched, and with
 * GPUARENA_VMM_KEEP=0 a freed block's granules unmapped and released at its free (the simulated
 * driver's counters right after cuMemFree), not at the next call. GPUARENA_FREE_SYNC=device
 * hands each free to the pool at once. */
#include "preload_test.h"

#include <stdlib.h>
#include <string.h>

#define KiB 1024ull

/* Writes byte v over [p, p + n) and reads it back. */
static void fill_check(CUdeviceptr p, size_t n, int v, unsigned char *buf, unsigned char *back)
{
    memset(buf, v, n);
    ck_assert_int_eq(cuMemcpyHtoD(p, buf, n), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemcpyDtoH(back, p, n), CUDA_SUCCESS);
    ck_assert_msg(memcmp(buf, back, n) == 0, "%zu bytes at %#llx read back", n,
                  (unsigned long long)p);
}

static void still(CUdeviceptr p, size_t n, int v, unsigned char *buf, unsigned char *back)
{
    memset(buf, v, n);
    ck_assert_int_eq(cuMemcpyDtoH(back, p, n), CUDA_SUCCESS);
    ck_assert_msg(memcmp(buf, back, n) == 0, "a live neighbour of %zu bytes kept its bytes", n);
}

/* Sizes taking turns in one slot, a live block before it and one placed after it: each block of
 * the slot written whole and read back, the neighbours intact; the slot stays where it is (the
 * place a free and a best fit give it, which the resize keeps). */
START_TEST(vmm_pending_resized_block_integrity)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_FREE_SYNC=device", "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    static const size_t sets[][2] = {{4 * KiB, 8 * KiB},
                                     {7 * MiB + 4 * KiB, 9 * MiB + 4 * KiB},
                                     {4 * KiB, 7 * MiB + 4 * KiB}};
    unsigned char *buf = malloc(10 * MiB), *back = malloc(10 * MiB);
    ck_assert(buf && back);
    for (size_t s = 0; s < 3; s++) {
        CUdeviceptr before, slot, after = 0, first;
        ck_assert_int_eq(cuMemAlloc(&before, 64 * KiB), CUDA_SUCCESS);
        fill_check(before, 64 * KiB, 0x5A, buf, back);
        ck_assert_int_eq(cuMemAlloc(&slot, sets[s][0]), CUDA_SUCCESS);
        first = slot;
        for (int r = 1; r <= 40; r++) {
            fill_check(slot, sets[s][(r - 1) % 2], r, buf, back);
            if (r == 20) { /* a live block after the slot from here on */
                ck_assert_int_eq(cuMemAlloc(&after, 24 * KiB), CUDA_SUCCESS);
                fill_check(after, 24 * KiB, 0xA5, buf, back);
            }
            ck_assert_int_eq(cuMemFree(slot), CUDA_SUCCESS);
            ck_assert_int_eq(cuMemAlloc(&slot, sets[s][r % 2]), CUDA_SUCCESS);
            if (r < 20) /* nothing after it yet: the slot's place, whatever its size */
                ck_assert_uint_eq(slot, first);
            still(before, 64 * KiB, 0x5A, buf, back);
            if (after)
                still(after, 24 * KiB, 0xA5, buf, back);
        }
        CUdeviceptr base = 0;
        size_t size = 0;
        ck_assert_int_eq(cuMemGetAddressRange(&base, &size, slot + 100), CUDA_SUCCESS);
        ck_assert_uint_eq(base, slot);
        ck_assert_uint_ge(size, sets[s][0]);
        ck_assert_int_eq(cuMemFree(slot), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemFree(before), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemFree(after), CUDA_SUCCESS);
    }
    free(buf);
    free(back);
}
END_TEST

/* With no keep, a freed block's granules go back at its free: the driver's live physical bytes
 * fall and its unmaps and releases rise before the program's next call. */
START_TEST(vmm_pending_keep0_unmaps_at_the_free)
{
    pt_env("GPUARENA_MODE=vmm", "GPUARENA_VMM_KEEP=0", "GPUARENA_FREE_SYNC=device",
           "SIMCUDA_TOTAL_MEM=1GiB", NULL);
    pt_start();
    CUdeviceptr p;
    for (int r = 0; r < 4; r++) {
        size_t size = r % 2 ? 7 * MiB + 4 * KiB : 9 * MiB + 4 * KiB;
        ck_assert_int_eq(cuMemAlloc(&p, size), CUDA_SUCCESS);
        simcuda_counters_t a = pt_counters();
        ck_assert_uint_eq(a.vmm_bytes_in_use, (size + 2 * MiB - 1) / (2 * MiB) * 2 * MiB);
        ck_assert_int_eq(cuMemFree(p), CUDA_SUCCESS);
        simcuda_counters_t b = pt_counters();
        ck_assert_uint_eq(b.vmm_bytes_in_use, 0);
        ck_assert_uint_eq(b.unmap_calls, a.unmap_calls + (size + 2 * MiB - 1) / (2 * MiB));
        ck_assert_uint_eq(b.release_calls, b.create_calls);
    }
}
END_TEST

void pt_vmm_pending_add(TCase *tc)
{
    tcase_add_test(tc, vmm_pending_resized_block_integrity);
    tcase_add_test(tc, vmm_pending_keep0_unmaps_at_the_free);
}
