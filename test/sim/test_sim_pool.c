/* test-sim, memory pools: cuMemPoolCreate and cuMemPoolDestroy, and cuMemAllocFromPoolAsync taking
 * its block from the pool it names, each pool with its own threshold, kept bytes, attributes and
 * trim (the default pool's own behaviour is pool_release_threshold's, in test_sim.c). Asserted from
 * the counters: pools_live, pools_destroyed, pool_kept_bytes, bytes_in_use. A file of its own so
 * that test_sim.c stays under the house's 800 lines.
 */
#include "test_sim.h"

#include <string.h>

/* Pool properties as a program passes them for pinned memory on device dev. */
static CUmemPoolProps ts_pool_props(int dev)
{
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = dev;
    return pp;
}

/* cuMemPoolCreate: pinned device pools are made; what the driver documents as invalid answers
 * CUDA_ERROR_INVALID_VALUE, and what this driver does not model CUDA_ERROR_NOT_SUPPORTED. Each
 * pool is its own: cuMemAllocFromPoolAsync takes from the one named (MEMPOOL_HANDLE says so), on
 * its device, with its own threshold, kept bytes, attributes and cuMemPoolTrimTo; the default pool
 * is untouched by them. */
START_TEST(created_pools)
{
    setenv("SIMCUDA_DEVICES", "2", 1);
    ts_start();
    CUmemoryPool a, b, def, got;
    CUmemPoolProps pp = ts_pool_props(0);
    ck_assert_int_eq(cuMemPoolCreate(NULL, &pp), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemPoolCreate(&a, NULL), CUDA_ERROR_INVALID_VALUE);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    ck_assert_int_eq(cuMemPoolCreate(&a, &pp), CUDA_ERROR_INVALID_VALUE);
    pp = ts_pool_props(2); /* no such device */
    ck_assert_int_eq(cuMemPoolCreate(&a, &pp), CUDA_ERROR_INVALID_VALUE);
    pp = ts_pool_props(0);
    pp.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
    ck_assert_int_eq(cuMemPoolCreate(&a, &pp), CUDA_ERROR_INVALID_VALUE);
    pp = ts_pool_props(0);
    pp.reserved[3] = 1;
    ck_assert_int_eq(cuMemPoolCreate(&a, &pp), CUDA_ERROR_INVALID_VALUE);
    pp = ts_pool_props(0);
    pp.location.type = CU_MEM_LOCATION_TYPE_HOST;
    ck_assert_int_eq(cuMemPoolCreate(&a, &pp), CUDA_ERROR_NOT_SUPPORTED);
    pp = ts_pool_props(0);
    pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    ck_assert_int_eq(cuMemPoolCreate(&a, &pp), CUDA_ERROR_NOT_SUPPORTED);
    pp = ts_pool_props(0);
    pp.maxSize = 64 * MiB;
    ck_assert_int_eq(cuMemPoolCreate(&a, &pp), CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_uint_eq(ts_counters().pools_live, 0);
    pp = ts_pool_props(0);
    CK(cuMemPoolCreate(&a, &pp));
    pp = ts_pool_props(1);
    CK(cuMemPoolCreate(&b, &pp));
    CK(cuDeviceGetDefaultMemPool(&def, 0));
    ck_assert_ptr_ne(a, b);
    ck_assert_ptr_ne(a, def);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.pools_live, 2);
    ck_assert_uint_eq(c.pool_create_calls, 11);
    CUstream s;
    CUdeviceptr x, y, z;
    cuuint64_t v, max = ~0ull;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemPoolGetAttribute(a, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v));
    ck_assert_uint_eq(v, 0);
    CK(cuMemPoolSetAttribute(a, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
    /* a keeps a freed block; b (threshold 0) and the default pool do not */
    CK(cuMemAllocFromPoolAsync(&x, MiB, a, s));
    CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, x));
    ck_assert_ptr_eq(got, a);
    CK(cuMemAllocFromPoolAsync(&y, 2 * MiB, b, s));
    CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, y));
    ck_assert_ptr_eq(got, b);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(1), 2 * MiB); /* b's device, not the stream's */
    CK(cuMemAllocAsync(&z, 4 * MiB, s));
    CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, z));
    ck_assert_ptr_eq(got, def);
    CK(cuMemFreeAsync(x, s));
    CK(cuMemFreeAsync(y, s));
    CK(cuMemFreeAsync(z, s));
    CK(cuStreamSynchronize(s));
    c = ts_counters();
    ck_assert_uint_eq(c.bytes_in_use, MiB);
    ck_assert_uint_eq(c.pool_kept_bytes, MiB);
    CK(cuMemPoolGetAttribute(a, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    ck_assert_uint_eq(v, MiB);
    CK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    ck_assert_uint_eq(v, 0);
    CK(cuMemPoolGetAttribute(b, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &v));
    ck_assert_uint_eq(v, 2 * MiB);
    /* the default pool does not take a's kept bytes; a's next block does */
    CK(cuMemAllocAsync(&z, MiB, s));
    ck_assert_uint_eq(ts_counters().bytes_in_use, 2 * MiB);
    CK(cuMemFreeAsync(z, s));
    CK(cuMemAllocFromPoolAsync(&x, MiB, a, s));
    ck_assert_uint_eq(ts_counters().bytes_in_use, MiB);
    ck_assert_uint_eq(ts_counters().pool_kept_bytes, 0);
    CK(cuMemFreeAsync(x, s));
    CK(cuStreamSynchronize(s));
    /* trimming the default pool leaves a's; trimming a gives it back */
    CK(cuMemPoolTrimTo(def, 0));
    ck_assert_uint_eq(ts_counters().pool_kept_bytes, MiB);
    CK(cuMemPoolTrimTo(a, 0));
    c = ts_counters();
    ck_assert_uint_eq(c.pool_kept_bytes, 0);
    ck_assert_uint_eq(c.bytes_in_use, 0);
    CK(cuStreamDestroy(s));
}
END_TEST

/* cuMemPoolDestroy: what the pool keeps goes back at once; a block still live stays usable and
 * its memory goes at its free, kept by no pool ("the resources associated with the pool will be
 * released automatically once there are no more outstanding allocations"); the handle is refused
 * from then on. The default pool, NULL and a handle that is no pool: CUDA_ERROR_INVALID_VALUE. */
START_TEST(pool_destroy)
{
    ts_start();
    CUmemoryPool a, def;
    CUmemPoolProps pp = ts_pool_props(0);
    CUstream s;
    CUdeviceptr x, y;
    cuuint64_t v, max = ~0ull;
    CK(cuDeviceGetDefaultMemPool(&def, 0));
    ck_assert_int_eq(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemPoolDestroy(NULL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemPoolDestroy((CUmemoryPool)&v), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemPoolCreate(&a, &pp));
    CK(cuMemPoolSetAttribute(a, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAllocFromPoolAsync(&x, 3 * MiB, a, s));
    CK(cuMemAllocFromPoolAsync(&y, MiB, a, s));
    CK(cuMemFreeAsync(x, s));
    CK(cuStreamSynchronize(s));
    ck_assert_uint_eq(ts_counters().pool_kept_bytes, 3 * MiB);
    ck_assert_uint_eq(ts_counters().bytes_in_use, 4 * MiB);
    CK(cuMemPoolDestroy(a)); /* y still live */
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.pool_kept_bytes, 0);
    ck_assert_uint_eq(c.bytes_in_use, MiB);
    ck_assert_uint_eq(c.pools_live, 0);
    ck_assert_uint_eq(c.pools_destroyed, 1);
    ck_assert_int_eq(cuMemPoolGetAttribute(a, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemPoolTrimTo(a, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemPoolDestroy(a), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemsetD8(y, 0x5A, MiB)); /* the live block is still the program's */
    CK(cuMemFreeAsync(y, s));
    CK(cuStreamSynchronize(s));
    c = ts_counters();
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.pool_kept_bytes, 0);
    ck_assert_uint_eq(c.pool_destroy_calls, 5);
    /* a pool with nothing live goes at once; the default pool still works */
    CK(cuMemPoolCreate(&a, &pp));
    CK(cuMemPoolDestroy(a));
    CK(cuMemAllocFromPoolAsync(&x, MiB, def, s));
    CK(cuMemFreeAsync(x, s));
    CK(cuStreamSynchronize(s));
    ck_assert_uint_eq(ts_counters().bytes_in_use, 0);
    CK(cuStreamDestroy(s));
}
END_TEST

TCase *ts_tcase_pool(void)
{
    TCase *tc = tcase_create("pools");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, created_pools);
    tcase_add_test(tc, pool_destroy);
    return tc;
}
