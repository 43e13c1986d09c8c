/* test-sim, virtual memory management: reservations, physical handles and mappings on host memory,
 * checked from outside: bytes written through a mapping read back (also through a second mapping of
 * the same handle), copies into holes or inaccessible ranges fail instead of faulting, the counters
 * follow every call, and bad arguments get the driver's error codes.
 */
#include "test_sim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define G (2 * MiB)

static CUmemAllocationProp vmm_prop(int dev)
{
    CUmemAllocationProp p = {0};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    return p;
}

static CUmemGenericAllocationHandle vmm_create(size_t size)
{
    CUmemAllocationProp p = vmm_prop(0);
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, size, &p, 0));
    return h;
}

static CUresult vmm_access(CUdeviceptr va, size_t size, int dev, CUmemAccess_flags flags)
{
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}, .flags = flags};
    return cuMemSetAccess(va, size, &d, 1);
}

/* A reservation of n bytes with one handle of the same size mapped read-write at its start. */
static CUdeviceptr vmm_ready(size_t n, CUmemGenericAllocationHandle *h)
{
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, n, 0, 0, 0));
    *h = vmm_create(n);
    CK(cuMemMap(va, n, 0, *h, 0));
    CK(vmm_access(va, n, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    return va;
}

START_TEST(vmm_granularity)
{
    ts_start();
    CUmemAllocationProp p = vmm_prop(0);
    size_t g = 0;
    CK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    ck_assert_uint_eq(g, G);
    CK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    ck_assert_uint_eq(g, G);
    ck_assert_int_eq(cuMemGetAllocationGranularity(NULL, &p, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemGetAllocationGranularity(&g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemGetAllocationGranularity(&g, &p, (CUmemAllocationGranularity_flags)7),
                     CUDA_ERROR_INVALID_VALUE);
    p.location.id = 3;
    ck_assert_int_eq(cuMemGetAllocationGranularity(&g, &p, 0), CUDA_ERROR_INVALID_DEVICE);
    p = vmm_prop(0);
    p.location.type = CU_MEM_LOCATION_TYPE_HOST;
    ck_assert_int_eq(cuMemGetAllocationGranularity(&g, &p, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(ts_counters().granularity_calls, 7);
}
END_TEST

START_TEST(vmm_granularity_setting)
{
    setenv("SIMCUDA_VMM_GRANULARITY", "64KiB", 1);
    ts_start();
    CUmemAllocationProp p = vmm_prop(0);
    size_t g = 0;
    CK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    ck_assert_uint_eq(g, 65536);
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, 3 * 65536, &p, 0));
    ck_assert_int_eq(cuMemCreate(&h, 65536 + 4096, &p, 0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(vmm_bad_granularity_setting)
{
    setenv("SIMCUDA_VMM_GRANULARITY", "3000", 1);
    ck_assert_int_eq(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(vmm_reserve)
{
    ts_start();
    CUdeviceptr a, b, c;
    CK(cuMemAddressReserve(&a, 64 * MiB, 0, 0, 0));
    ck_assert_uint_eq(a % G, 0);
    CK(cuMemAddressReserve(&b, 8 * MiB, 32 * MiB, 0, 0));
    ck_assert_uint_eq(b % (32 * MiB), 0);
    ck_assert_uint_eq(ts_counters().vmm_reserved_bytes, 72 * MiB);
    ck_assert_int_eq(cuMemAddressReserve(&c, 8 * MiB, 3 * MiB, 0, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressReserve(&c, 1000, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressReserve(&c, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressReserve(&c, G, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressReserve(NULL, G, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressReserve(&c, G, 0, 123, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAddressFree(a, 32 * MiB), CUDA_ERROR_INVALID_VALUE); /* not as reserved */
    ck_assert_int_eq(cuMemAddressFree(a + G, 62 * MiB), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAddressFree(a, 64 * MiB));
    ck_assert_int_eq(cuMemAddressFree(a, 64 * MiB), CUDA_ERROR_INVALID_VALUE);
    /* the address is a hint: a free one is taken as given */
    CK(cuMemAddressReserve(&c, 16 * MiB, 0, a + 16 * MiB, 0));
    ck_assert_uint_eq(c, a + 16 * MiB);
    simcuda_counters_t n = ts_counters();
    ck_assert_uint_eq(n.vmm_reserved_bytes, 24 * MiB);
    ck_assert_uint_eq(n.reserve_calls, 9);
    ck_assert_uint_eq(n.address_free_calls, 4);
    ck_assert_uint_eq(n.bytes_in_use, 0); /* address space is not device memory */
}
END_TEST

/* Two handles mapped side by side read and write as one range, across the boundary. */
START_TEST(vmm_data_round_trip)
{
    ts_start();
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, 16 * MiB, 0, 0, 0));
    CUmemGenericAllocationHandle h1 = vmm_create(G), h2 = vmm_create(2 * G);
    CK(cuMemMap(va, G, 0, h1, 0));
    CK(cuMemMap(va + G, 2 * G, 0, h2, 0));
    size_t n = 3 * G;
    unsigned char *in = malloc(n), *out = malloc(n);
    for (size_t i = 0; i < n; i++)
        in[i] = (unsigned char)(i * 13 + 7);
    ck_assert_int_eq(cuMemcpyHtoD(va, in, n), CUDA_ERROR_INVALID_VALUE); /* mapped, no access yet */
    ck_assert_int_eq(vmm_access(va, G + G, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE), CUDA_ERROR_INVALID_VALUE);
    CK(vmm_access(va, n, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE)); /* both mappings, whole */
    CK(cuMemcpyHtoD(va, in, n));
    memset(out, 0, n);
    CK(cuMemcpyDtoH(out, va, n));
    ck_assert_int_eq(memcmp(in, out, n), 0);
    CK(cuMemsetD32(va + G - 8, 0xabcdef01u, 4)); /* across the boundary */
    unsigned w[4];
    CK(cuMemcpyDtoH(w, va + G - 8, sizeof w));
    ck_assert_uint_eq(w[0], 0xabcdef01u);
    ck_assert_uint_eq(w[3], 0xabcdef01u);
    CUdeviceptr plain;
    CK(cuMemAlloc(&plain, 4096));
    CK(cuMemcpyDtoD(plain, va + G - 2048, 4096));
    CK(cuMemcpy((CUdeviceptr)(uintptr_t)out, plain, 4096));
    ck_assert_int_eq(memcmp(out, in + G - 2048, 2040), 0); /* up to the words set above */
    /* holes: past the last mapping, in the reserved tail */
    ck_assert_int_eq(cuMemcpyHtoD(va + n - 16, in, 32), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemcpyHtoD(va + n, in, 16), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemcpy(va + n, (CUdeviceptr)(uintptr_t)in, 16), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemcpy((CUdeviceptr)(uintptr_t)out, va + n + 8, 16), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemsetD8(va + n, 0, 1), CUDA_ERROR_INVALID_VALUE);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.vmm_bytes_in_use, 3 * G);
    ck_assert_uint_eq(c.vmm_mapped_bytes, 3 * G);
    ck_assert_uint_eq(c.vmm_mappings, 2);
    ck_assert_uint_eq(c.bytes_in_use, 3 * G + 4096);
    ck_assert_uint_eq(c.map_calls, 2);
    ck_assert_uint_eq(c.set_access_calls, 2);
    free(in);
    free(out);
}
END_TEST

START_TEST(vmm_read_only)
{
    ts_start();
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = vmm_ready(G, &h);
    char buf[64] = "through the mapping";
    CK(cuMemcpyHtoD(va, buf, sizeof buf));
    CK(vmm_access(va, G, 0, CU_MEM_ACCESS_FLAGS_PROT_READ));
    unsigned long long flags = 9;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    CK(cuMemGetAccess(&flags, &loc, va + 100));
    ck_assert_uint_eq(flags, CU_MEM_ACCESS_FLAGS_PROT_READ);
    char back[64] = {0};
    CK(cuMemcpyDtoH(back, va, sizeof back));
    ck_assert_str_eq(back, buf);
    ck_assert_int_eq(cuMemcpyHtoD(va, buf, 8), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemsetD8(va, 0, 8), CUDA_ERROR_INVALID_VALUE);
    CK(vmm_access(va, G, 0, CU_MEM_ACCESS_FLAGS_PROT_NONE));
    ck_assert_int_eq(cuMemcpyDtoH(back, va, 8), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemGetAccess(&flags, &loc, va + G), CUDA_ERROR_INVALID_VALUE); /* unmapped */
    ck_assert_int_eq(cuMemGetAccess(NULL, &loc, va), CUDA_ERROR_INVALID_VALUE);
    loc.id = 4;
    ck_assert_int_eq(cuMemGetAccess(&flags, &loc, va), CUDA_ERROR_INVALID_DEVICE);
}
END_TEST

/* Two mappings of one handle see the same bytes; offsets select where a mapping starts. */
START_TEST(vmm_aliasing_and_offset)
{
    ts_start();
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    CUmemGenericAllocationHandle h = vmm_create(2 * G);
    CK(cuMemMap(va, 2 * G, 0, h, 0));
    CK(cuMemMap(va + 2 * G, G, G, h, 0)); /* the handle's second granule again */
    CK(vmm_access(va, 3 * G, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    const char msg[] = "same pages";
    CK(cuMemcpyHtoD(va + G + 40, msg, sizeof msg));
    char back[sizeof msg] = {0};
    CK(cuMemcpyDtoH(back, va + 2 * G + 40, sizeof back));
    ck_assert_str_eq(back, msg);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.vmm_bytes_in_use, 2 * G);
    ck_assert_uint_eq(c.vmm_mapped_bytes, 3 * G);
    ck_assert_uint_eq(c.bytes_in_use, 2 * G);
}
END_TEST

START_TEST(vmm_map_errors)
{
    ts_start();
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
    CUmemGenericAllocationHandle h = vmm_create(2 * G);
    ck_assert_int_eq(cuMemMap(va + 4096, G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);     /* misaligned */
    ck_assert_int_eq(cuMemMap(va, G + 4096, 0, h, 0), CUDA_ERROR_INVALID_VALUE);     /* size */
    ck_assert_int_eq(cuMemMap(va, G, 4096, h, 0), CUDA_ERROR_INVALID_VALUE);         /* offset */
    ck_assert_int_eq(cuMemMap(va, G, 2 * G, h, 0), CUDA_ERROR_INVALID_VALUE);        /* past the handle */
    ck_assert_int_eq(cuMemMap(va, 3 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);        /* bigger than it */
    ck_assert_int_eq(cuMemMap(va, G, 0, h, 1), CUDA_ERROR_INVALID_VALUE);            /* flags */
    ck_assert_int_eq(cuMemMap(va, G, 0, h + 1000, 0), CUDA_ERROR_INVALID_VALUE);     /* unknown handle */
    ck_assert_int_eq(cuMemMap(va + 3 * G, 2 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* past the range */
    ck_assert_int_eq(cuMemMap(0x200000, G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);      /* not reserved */
    ck_assert_int_eq(cuMemMap(va, 0, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemMap(va + G, 2 * G, 0, h, 0));
    ck_assert_int_eq(cuMemMap(va, 2 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);        /* overlaps */
    ck_assert_int_eq(cuMemMap(va + 2 * G, G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);    /* double map */
    ck_assert_int_eq(cuMemAddressFree(va, 4 * G), CUDA_ERROR_INVALID_VALUE);          /* still mapped */
    /* unmap: whole mappings only */
    ck_assert_int_eq(cuMemUnmap(va, G), CUDA_ERROR_INVALID_VALUE);                    /* never mapped */
    ck_assert_int_eq(cuMemUnmap(va + G, G), CUDA_ERROR_INVALID_VALUE);                /* half of it */
    ck_assert_int_eq(cuMemUnmap(va + G, 3 * G), CUDA_ERROR_INVALID_VALUE);            /* and a hole */
    ck_assert_int_eq(cuMemUnmap(va + 2 * G, G), CUDA_ERROR_INVALID_VALUE);            /* from inside */
    /* set access: whole mappings only, known locations, known flags */
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    ck_assert_int_eq(cuMemSetAccess(va + G, 2 * G, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemSetAccess(va + G, 2 * G, &d, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemSetAccess(va + G, G, &d, 1), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemSetAccess(va, 3 * G, &d, 1), CUDA_ERROR_INVALID_VALUE);
    d.location.id = 9;
    ck_assert_int_eq(cuMemSetAccess(va + G, 2 * G, &d, 1), CUDA_ERROR_INVALID_DEVICE);
    d.location = (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    ck_assert_int_eq(cuMemSetAccess(va + G, 2 * G, &d, 1), CUDA_ERROR_INVALID_VALUE);
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.flags = (CUmemAccess_flags)2;
    ck_assert_int_eq(cuMemSetAccess(va + G, 2 * G, &d, 1), CUDA_ERROR_INVALID_VALUE);
    /* unmapped again, the range takes a new mapping, which starts with no access */
    CK(vmm_access(va + G, 2 * G, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    CK(cuMemUnmap(va + G, 2 * G));
    ck_assert_int_eq(cuMemUnmap(va + G, 2 * G), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemMap(va + G, 2 * G, 0, h, 0));
    char b = 1;
    ck_assert_int_eq(cuMemcpyHtoD(va + G, &b, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemUnmap(va + G, 2 * G));
    CK(cuMemRelease(h));
    ck_assert_int_eq(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemMap(va, G, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* released */
    CK(cuMemAddressFree(va, 4 * G));
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_uint_eq(c.vmm_mapped_bytes, 0);
    ck_assert_uint_eq(c.vmm_reserved_bytes, 0);
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.live_allocations, 0);
}
END_TEST

/* cuMemRelease of a mapped handle: the memory lives until its last unmap, then goes back. */
START_TEST(vmm_release_while_mapped)
{
    ts_start();
    CUmemGenericAllocationHandle h, again;
    CUdeviceptr va = vmm_ready(2 * G, &h);
    const char msg[] = "still here";
    CK(cuMemcpyHtoD(va + G, msg, sizeof msg));
    CK(cuMemRelease(h));
    char back[sizeof msg] = {0};
    CK(cuMemcpyDtoH(back, va + G, sizeof back));
    ck_assert_str_eq(back, msg);
    ck_assert_uint_eq(ts_counters().vmm_bytes_in_use, 2 * G);
    ck_assert_uint_eq(ts_counters().bytes_in_use, 2 * G);
    ck_assert_int_eq(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    /* a new reference from the mapped address, given back by its own release */
    CK(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 5)));
    ck_assert_uint_eq(again, h);
    CUmemAllocationProp p;
    CK(cuMemGetAllocationPropertiesFromHandle(&p, again));
    ck_assert_int_eq(p.location.id, 0);
    ck_assert_int_eq(p.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    CK(cuMemRelease(again));
    ck_assert_int_eq(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 2 * G)),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemRetainAllocationHandle(NULL, (void *)(uintptr_t)va), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(ts_counters().vmm_bytes_in_use, 2 * G);
    CK(cuMemUnmap(va, 2 * G)); /* the last mapping: the memory goes back now */
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_uint_eq(c.peak_vmm_bytes_in_use, 2 * G);
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.live_allocations, 0);
    ck_assert_uint_eq(c.retain_handle_calls, 3);
    ck_assert_int_eq(cuMemGetAllocationPropertiesFromHandle(&p, h), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(vmm_pointer_queries)
{
    CUcontext ctx = ts_start();
    (void)ctx;
    CUdeviceptr va, base;
    size_t size;
    CK(cuMemAddressReserve(&va, 16 * MiB, 0, 0, 0));
    CUmemGenericAllocationHandle h = vmm_create(2 * G);
    CK(cuMemMap(va + G, 2 * G, 0, h, 0));
    CK(vmm_access(va + G, 2 * G, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    CK(cuMemGetAddressRange(&base, &size, va + G + 12345));
    ck_assert_uint_eq(base, va + G); /* the mapping, not the reservation */
    ck_assert_uint_eq(size, 2 * G);
    ck_assert_int_eq(cuMemGetAddressRange(&base, &size, va + 100), CUDA_ERROR_NOT_FOUND);
    CUpointer_attribute a[3] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                CU_POINTER_ATTRIBUTE_MAPPED};
    CUdeviceptr start = 0;
    unsigned mapped = 7;
    void *d[3] = {&start, &size, &mapped};
    CK(cuPointerGetAttributes(3, a, d, va + G + 100));
    ck_assert_uint_eq(start, va); /* the reservation */
    ck_assert_uint_eq(size, 16 * MiB);
    ck_assert_uint_eq(mapped, 1);
    CK(cuPointerGetAttributes(3, a, d, va + 100));
    ck_assert_uint_eq(start, va);
    ck_assert_uint_eq(size, 16 * MiB);
    ck_assert_uint_eq(mapped, 0);
    unsigned type = 0;
    int ord = -5;
    CUcontext owner = (CUcontext)1;
    CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + G));
    ck_assert_uint_eq(type, CU_MEMORYTYPE_DEVICE);
    CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + G));
    ck_assert_int_eq(ord, 0);
    CK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, va + G));
    ck_assert_ptr_null(owner);
    void *mbase = NULL;
    CK(cuPointerGetAttribute(&mbase, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, va + 3 * G - 1));
    ck_assert_ptr_eq(mbase, (void *)(uintptr_t)(va + G));
    CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, va + G));
    ck_assert_uint_eq(size, 2 * G);
    CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + 100));
    ck_assert_uint_eq(start, va);
    ck_assert_int_eq(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + 100),
                     CUDA_ERROR_INVALID_VALUE); /* reserved, not backed */
    CUipcMemHandle ipc;
    ck_assert_int_eq(cuIpcGetMemHandle(&ipc, va + G), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* Physical handles take from the same device total as every other kind of device memory. */
START_TEST(vmm_device_total)
{
    setenv("SIMCUDA_TOTAL_MEM", "8MiB", 1);
    setenv("SIMCUDA_DEVICES", "2", 1);
    ts_start();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 3 * MiB));
    CUmemGenericAllocationHandle h = vmm_create(G), h1;
    ck_assert_int_eq(cuMemCreate(&h1, 2 * G, &(CUmemAllocationProp){.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}}, 0),
                     CUDA_ERROR_OUT_OF_MEMORY);
    size_t f, t;
    CK(cuMemGetInfo(&f, &t));
    ck_assert_uint_eq(f, 8 * MiB - 3 * MiB - G);
    CUmemAllocationProp p1 = vmm_prop(1);
    CK(cuMemCreate(&h1, 4 * G, &p1, 0));
    ck_assert_uint_eq(simcuda_device_bytes_in_use(0), 3 * MiB + G);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(1), 4 * G);
    CK(cuMemRelease(h));
    CK(cuMemRelease(h1));
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.bytes_in_use, 3 * MiB);
    ck_assert_uint_eq(c.peak_bytes_in_use, 3 * MiB + 5 * G);
    ck_assert_uint_eq(c.peak_vmm_bytes_in_use, 5 * G);
    ck_assert_uint_eq(c.failed_allocs, 1);
}
END_TEST

/* VMM objects belong to the process: a destroyed context takes none of them, and the calls need
 * no current context. */
START_TEST(vmm_outlives_context)
{
    CK(cuInit(0));
    CUmemGenericAllocationHandle h = vmm_create(G);
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, G, 0, 0, 0));
    CK(cuMemMap(va, G, 0, h, 0));
    CK(vmm_access(va, G, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    CUcontext ctx;
    CK(cuCtxCreate(&ctx, NULL, 0, 0));
    const char msg[] = "outlives its context";
    CK(cuMemcpyHtoD(va, msg, sizeof msg));
    CK(cuCtxDestroy(ctx));
    ts_start();
    char back[sizeof msg] = {0};
    CK(cuMemcpyDtoH(back, va, sizeof back));
    ck_assert_str_eq(back, msg);
    ck_assert_uint_eq(ts_counters().vmm_mapped_bytes, G);
    CK(cuDevicePrimaryCtxReset(0));
    ck_assert_uint_eq(ts_counters().vmm_bytes_in_use, G);
}
END_TEST

/* Peer access: cuCtxEnablePeerAccess checks its arguments as the driver does, and does not reach
 * cuMemCreate memory, which only cuMemSetAccess opens to another device (copies and stand-in
 * kernels from that device are refused until then). */
START_TEST(vmm_peer_access)
{
    setenv("SIMCUDA_DEVICES", "2", 1);
    CUcontext a = ts_start(), b, a2;
    int can = -1;
    CK(cuDeviceCanAccessPeer(&can, 0, 1));
    ck_assert_int_eq(can, 1);
    CK(cuDeviceCanAccessPeer(&can, 1, 1));
    ck_assert_int_eq(can, 0);
    ck_assert_int_eq(cuDeviceCanAccessPeer(&can, 0, 2), CUDA_ERROR_INVALID_DEVICE);
    CUmemGenericAllocationHandle h;
    CUdeviceptr va = vmm_ready(G, &h); /* device 0's, read-write for device 0 */
    CK(cuCtxCreate(&a2, NULL, 0, 0));
    CK(cuCtxCreate(&b, NULL, 0, 1)); /* b current */
    ck_assert_int_eq(cuCtxEnablePeerAccess(a, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuCtxEnablePeerAccess(a, 0));
    ck_assert_int_eq(cuCtxEnablePeerAccess(a, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CK(cuCtxPushCurrent(a2));
    ck_assert_int_eq(cuCtxEnablePeerAccess(a, 0), CUDA_ERROR_INVALID_DEVICE);
    CK(cuCtxPopCurrent(&a2));
    char buf[64] = {0};
    ck_assert_int_eq(cuMemcpyDtoH(buf, va, sizeof buf), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(simcuda_launch(NULL, va, 7, sizeof buf, 0), CUDA_ERROR_INVALID_VALUE);
    CK(vmm_access(va, G, 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    CK(simcuda_launch(NULL, va, 7, sizeof buf, 0));
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(buf, va, sizeof buf));
    ck_assert_int_eq(buf[0], 7);
    CK(cuCtxDisablePeerAccess(a));
    ck_assert_int_eq(cuCtxDisablePeerAccess(a), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
}
END_TEST

/* GPUDirect RDMA: the device says VMM memory may be made capable; a handle made with
 * allocFlags.gpuDirectRDMACapable reports it through its mappings, one made without does not, and
 * cuMemAlloc memory is capable, as on an H100. */
START_TEST(vmm_rdma_flag)
{
    ts_start();
    int v = -1;
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0));
    ck_assert_int_eq(v, 1);
    CUmemAllocationProp p = vmm_prop(0);
    p.allocFlags.gpuDirectRDMACapable = 1;
    CUmemGenericAllocationHandle h1, h2 = vmm_create(G);
    CK(cuMemCreate(&h1, G, &p, 0));
    CUdeviceptr va, d;
    CK(cuMemAddressReserve(&va, 2 * G, 0, 0, 0));
    CK(cuMemMap(va, G, 0, h1, 0));
    CK(cuMemMap(va + G, G, 0, h2, 0));
    CK(vmm_access(va, 2 * G, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
    unsigned rdma = 9;
    CK(cuPointerGetAttribute(&rdma, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, va + 100));
    ck_assert_uint_eq(rdma, 1);
    CK(cuPointerGetAttribute(&rdma, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, va + G));
    ck_assert_uint_eq(rdma, 0);
    CK(cuMemAlloc(&d, 4096));
    CK(cuPointerGetAttribute(&rdma, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, d));
    ck_assert_uint_eq(rdma, 1);
    /* legacy IPC: cuMemAlloc memory is what cuIpcGetMemHandle exports, VMM memory is not */
    unsigned ipc = 9;
    CUipcMemHandle hh;
    CK(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, d));
    ck_assert_uint_eq(ipc, 1);
    CK(cuIpcGetMemHandle(&hh, d));
    CK(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, va));
    ck_assert_uint_eq(ipc, 0);
    ck_assert_int_eq(cuIpcGetMemHandle(&hh, va), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* cuMemMap refused midway (fault injection): nothing half mapped, nothing leaked. */
START_TEST(vmm_map_refused)
{
    ts_start();
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
    CUmemGenericAllocationHandle h1 = vmm_create(G), h2 = vmm_create(G);
    ck_assert_int_eq(simcuda_fail_add("cuMemMap:2"), 0);
    CK(cuMemMap(va, G, 0, h1, 0));
    ck_assert_int_eq(cuMemMap(va + G, G, 0, h2, 0), CUDA_ERROR_OUT_OF_MEMORY);
    unsigned mapped = 1;
    CK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va + G));
    ck_assert_uint_eq(mapped, 0);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.vmm_mapped_bytes, G);
    ck_assert_uint_eq(c.vmm_mappings, 1);
    CK(cuMemMap(va + G, G, 0, h2, 0));
    ck_assert_uint_eq(ts_counters().vmm_mapped_bytes, 2 * G);
}
END_TEST

/* Threads map, write, read back and unmap their own granules of one reservation concurrently. */
static CUdeviceptr thread_va;

static void *vmm_worker(void *arg)
{
    CUcontext ctx;
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxSetCurrent(ctx);
    int k = (int)(intptr_t)arg;
    CUdeviceptr at = thread_va + (CUdeviceptr)k * G;
    for (int round = 0; round < 20; round++) {
        CUmemGenericAllocationHandle h = vmm_create(G);
        CK(cuMemMap(at, G, 0, h, 0));
        CK(cuMemRelease(h));
        CK(vmm_access(at, G, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
        unsigned v = (unsigned)(k * 1000 + round), back = 0;
        CK(cuMemsetD32(at, v, 1024));
        CK(cuMemcpyDtoH(&back, at + 4092, 4));
        ck_assert_uint_eq(back, v);
        CK(cuMemUnmap(at, G));
    }
    return NULL;
}

START_TEST(vmm_threads)
{
    ts_start();
    CK(cuMemAddressReserve(&thread_va, 4 * G, 0, 0, 0));
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, vmm_worker, (void *)(intptr_t)i);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.map_calls, 80);
    ck_assert_uint_eq(c.unmap_calls, 80);
    ck_assert_uint_eq(c.vmm_bytes_in_use, 0);
    ck_assert_uint_eq(c.vmm_mapped_bytes, 0);
    ck_assert_uint_le(c.peak_vmm_mapped_bytes, 4 * G);
    ck_assert_uint_eq(c.live_allocations, 0);
}
END_TEST

TCase *ts_tcase_vmm(void)
{
    TCase *tc = tcase_create("vmm");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, vmm_granularity);
    tcase_add_test(tc, vmm_granularity_setting);
    tcase_add_test(tc, vmm_bad_granularity_setting);
    tcase_add_test(tc, vmm_reserve);
    tcase_add_test(tc, vmm_data_round_trip);
    tcase_add_test(tc, vmm_read_only);
    tcase_add_test(tc, vmm_aliasing_and_offset);
    tcase_add_test(tc, vmm_map_errors);
    tcase_add_test(tc, vmm_release_while_mapped);
    tcase_add_test(tc, vmm_pointer_queries);
    tcase_add_test(tc, vmm_device_total);
    tcase_add_test(tc, vmm_outlives_context);
    tcase_add_test(tc, vmm_map_refused);
    tcase_add_test(tc, vmm_threads);
    tcase_add_test(tc, vmm_peer_access);
    tcase_add_test(tc, vmm_rdma_flag);
    return tc;
}
