/* test-sim: the simulated driver tested from outside, through the same entry points a program uses
 * and the simcuda.h instrument API. Each test runs in its own forked process (CK_FORK), so each can
 * set SIMCUDA_* variables before its first driver call: the driver reads them once per process.
 * This file holds the runner, the shared helpers and the core tests (devices, contexts, allocation,
 * copies, cuGetProcAddress); test_sim_*.c add one test case each (see test_sim.h), but
 * test_sim_driver.c, which adds to this file's "driver" case.
 */
#include "test_sim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

simcuda_counters_t ts_counters(void)
{
    simcuda_counters_t c;
    simcuda_get_counters(&c);
    return c;
}

CUcontext ts_start(void)
{
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    return ctx;
}

void *ts_sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    ck_assert_msg(p != NULL, "the simulated driver should export %s", name);
    return p;
}

START_TEST(before_init)
{
    int n, v;
    CUdeviceptr p;
    ck_assert_int_eq(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuMemAlloc(&p, 512), CUDA_ERROR_NOT_INITIALIZED);
    ck_assert_int_eq(cuMemFree(512), CUDA_ERROR_NOT_INITIALIZED);
    CK(cuDriverGetVersion(&v));
    ck_assert_int_eq(v, 13000);
    ck_assert_int_eq(cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CK(cuInit(0));
    CK(cuDeviceGetCount(&n));
    ck_assert_int_eq(n, 1);
}
END_TEST

START_TEST(devices)
{
    setenv("SIMCUDA_DEVICES", "2", 1);
    setenv("SIMCUDA_TOTAL_MEM", "2G", 1);
    CK(cuInit(0));
    int n, cc;
    CUdevice d;
    char name[64];
    size_t total;
    CK(cuDeviceGetCount(&n));
    ck_assert_int_eq(n, 2);
    CK(cuDeviceGet(&d, 1));
    ck_assert_int_eq(d, 1);
    ck_assert_int_eq(cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(cuDeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuDeviceGetName(name, sizeof name, 1));
    ck_assert_str_eq(name, "simcuda device 1");
    ck_assert_int_eq(cuDeviceGetName(NULL, 8, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuDeviceTotalMem(&total, 0));
    ck_assert_uint_eq(total, 2ULL << 30);
    CK(cuDeviceGetAttribute(&cc, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    ck_assert_int_eq(cc, 9);
    CK(cuDeviceGetAttribute(&cc, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
    ck_assert_int_eq(cc, 0);
    ck_assert_int_eq(cuDeviceGetAttribute(&cc, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuDeviceGetAttribute(&cc, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 5), CUDA_ERROR_INVALID_DEVICE);
}
END_TEST

START_TEST(no_context)
{
    CUdeviceptr p;
    CUcontext cur = (CUcontext)1;
    size_t f, t;
    CK(cuInit(0));
    CK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_null(cur);
    ck_assert_int_eq(cuMemAlloc(&p, 512), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxPopCurrent(&cur), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxSetCurrent((CUcontext)&p), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_uint_eq(ts_counters().failed_allocs, 1);
}
END_TEST

/* A context destroyed by another thread stays current to this one, and the calls that need a
 * current context answer CUDA_ERROR_CONTEXT_IS_DESTROYED there (cuCtxDestroy's reference), not
 * CUDA_ERROR_INVALID_CONTEXT, which is for a thread with none (no_context above). */
static void *destroy_it(void *ctx)
{
    return (void *)(intptr_t)cuCtxDestroy((CUcontext)ctx);
}

START_TEST(destroyed_context_current_elsewhere)
{
    CUcontext c, cur = NULL;
    CUdeviceptr p;
    size_t f, t;
    void *r;
    pthread_t th;
    CK(cuInit(0));
    CK(cuCtxCreate(&c, NULL, 0, 0));
    ck_assert_int_eq(pthread_create(&th, NULL, destroy_it, c), 0);
    ck_assert_int_eq(pthread_join(th, &r), 0);
    ck_assert_int_eq((int)(intptr_t)r, CUDA_SUCCESS);
    CK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_eq(cur, c); /* not popped in this thread */
    ck_assert_int_eq(cuMemGetInfo(&f, &t), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    ck_assert_int_eq(cuMemAlloc(&p, 512), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CK(cuCtxPopCurrent(&cur));
    ck_assert_int_eq(cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT); /* none now */
}
END_TEST

START_TEST(alloc_free)
{
    ts_start();
    CUdeviceptr p[8];
    unsigned long long sum = 0;
    for (int i = 0; i < 8; i++) {
        size_t size = 1000 + (size_t)i * 4099;
        CK(cuMemAlloc(&p[i], size));
        ck_assert_msg(p[i] % 512 == 0, "pointers must be 512-aligned");
        sum += size;
    }
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.alloc_calls, 8);
    ck_assert_uint_eq(c.bytes_in_use, sum);
    ck_assert_uint_eq(c.peak_bytes_in_use, sum);
    ck_assert_uint_eq(c.live_allocations, 8);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(0), sum);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(1), 0);
    ck_assert_int_eq(cuMemAlloc(NULL, 512), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAlloc(&p[0] + 0, 0) == CUDA_ERROR_INVALID_VALUE, 1);
    ck_assert_int_eq(cuMemFree(p[1] + 512), CUDA_ERROR_INVALID_VALUE); /* interior */
    ck_assert_int_eq(cuMemFree(0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemFree(0xdead000), CUDA_ERROR_INVALID_VALUE);
    for (int i = 0; i < 8; i++)
        CK(cuMemFree(p[i]));
    ck_assert_int_eq(cuMemFree(p[3]), CUDA_ERROR_INVALID_VALUE); /* double */
    c = ts_counters();
    ck_assert_uint_eq(c.free_calls, 12);
    ck_assert_uint_eq(c.failed_allocs, 2);
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.peak_bytes_in_use, sum);
    ck_assert_uint_eq(c.bytes_allocated_total, sum);
}
END_TEST

START_TEST(pitch)
{
    ts_start();
    CUdeviceptr p;
    size_t pitch;
    CK(cuMemAllocPitch(&p, &pitch, 1000, 3, 4));
    ck_assert_uint_eq(pitch, 1024);
    ck_assert_uint_eq(ts_counters().bytes_in_use, 3072);
    ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, 1000, 3, 3), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocPitch(&p, NULL, 1000, 3, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, 0, 3, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemAllocPitch(&p, &pitch, 512, (size_t)-1, 4), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(ts_counters().alloc_calls, 5);
}
END_TEST

START_TEST(out_of_memory)
{
    setenv("SIMCUDA_TOTAL_MEM", "1MiB", 1);
    ts_start();
    CUdeviceptr a, b;
    size_t f, t;
    CK(cuMemGetInfo(&f, &t));
    ck_assert_uint_eq(t, MiB);
    ck_assert_uint_eq(f, MiB);
    CK(cuMemAlloc(&a, MiB - 512));
    ck_assert_int_eq(cuMemAlloc(&b, 1024), CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert_int_eq(cuMemAlloc(&b, (size_t)-1), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemGetInfo(&f, &t));
    ck_assert_uint_eq(f, 512);
    CK(cuMemAlloc(&b, 512));
    ck_assert_int_eq(cuMemGetInfo(NULL, &t), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFree(a));
    CK(cuMemAlloc(&a, 1024));
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.failed_allocs, 2);
    ck_assert_uint_eq(c.peak_bytes_in_use, MiB);
    ck_assert_uint_eq(c.meminfo_calls, 3);
}
END_TEST

START_TEST(memcpy_round_trip)
{
    ts_start();
    enum { N = 10000 };
    static unsigned char in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, N));
    CK(cuMemAlloc(&b, N));
    CK(cuMemcpyHtoD(a, in, N));
    CK(cuMemcpyDtoD(b, a, N));
    CK(cuMemcpyDtoH(out, b, N));
    ck_assert_mem_eq(in, out, N);
    CK(cuMemsetD8(a + 100, 0xab, 50));
    CK(cuMemcpy((CUdeviceptr)(uintptr_t)out, a, N));
    ck_assert_int_eq(out[99], in[99]);
    ck_assert_int_eq(out[100], 0xab);
    ck_assert_int_eq(out[150], in[150]);
    CK(cuMemsetD32(b, 0x01020304u, N / 4));
    unsigned w;
    CK(cuMemcpyDtoH(&w, b + 40, 4));
    ck_assert_uint_eq(w, 0x01020304u);
    ck_assert_int_eq(cuMemcpyHtoD(a + 1, in, N), CUDA_ERROR_INVALID_VALUE);  /* past the end */
    ck_assert_int_eq(cuMemcpyDtoH(out, 0x1000, 4), CUDA_ERROR_INVALID_VALUE); /* not device */
    ck_assert_int_eq(cuMemsetD32(a + 2, 0, 1), CUDA_ERROR_INVALID_VALUE);     /* misaligned */
    ck_assert_int_eq(cuMemsetD8(b + N, 0, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemcpyHtoD(a, in, 0));
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.memcpy_calls, 8);
    ck_assert_uint_eq(c.memset_calls, 4);
}
END_TEST

START_TEST(getproc_versions)
{
    void *fn;
    CUdriverProcAddressQueryResult st;
    /* Works before cuInit: the runtime resolves cuInit itself this way. */
    CK(cuGetProcAddress_v2("cuInit", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuInit"));
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
    CK(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 0, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuMemAlloc_v2"));
    /* below 3020 the v1 function (32-bit pointers), below 2000 nothing */
    CK(cuGetProcAddress_v2("cuMemAlloc", &fn, 3010, 0, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuMemAlloc"));
    ck_assert_ptr_ne(fn, ts_sym("cuMemAlloc_v2"));
    ck_assert_int_eq(cuGetProcAddress_v2("cuMemAlloc", &fn, 1990, 0, &st), CUDA_ERROR_NOT_FOUND);
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    ck_assert_ptr_null(fn);
    ck_assert_int_eq(cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuMemAllocAsync_ptsz"));
    CK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuMemAllocAsync"));
    CK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuMemAllocAsync"));
    /* per-thread asked, no per-thread variant: the plain one serves */
    CK(cuGetProcAddress_v2("cuMemFree", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuMemFree_v2"));
    CK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuMemcpyHtoD_v2_ptds"));
    CK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 11030, 0, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuGetProcAddress"));
    CK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuGetProcAddress_v2"));
    CK(cuGetProcAddress_v2("cuCtxCreate", &fn, 12040, 0, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuCtxCreate_v3"));
    CK(cuGetProcAddress_v2("cuCtxCreate", &fn, 13000, 0, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuCtxCreate_v4"));
    CK(cuGetProcAddress_v2("cuDevicePrimaryCtxRelease", &fn, 11000, 0, NULL));
    ck_assert_ptr_eq(fn, ts_sym("cuDevicePrimaryCtxRelease_v2"));
    /* the runtime asks for these at 7000: the v1 symbols, each its own address */
    CK(cuGetProcAddress_v2("cuDevicePrimaryCtxRelease", &fn, 7000, 0, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuDevicePrimaryCtxRelease"));
    ck_assert_ptr_ne(fn, ts_sym("cuDevicePrimaryCtxRelease_v2"));
    ck_assert_int_eq(cuGetProcAddress_v2("cuDevicePrimaryCtxRelease", &fn, 6050, 0, &st), CUDA_ERROR_NOT_FOUND);
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CK(cuGetProcAddress_v2("cuCtxGetDevice", &fn, 13000, 0, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuCtxGetDevice_v2"));
    CK(cuGetProcAddress_v2("cuCtxGetDevice", &fn, 12090, 0, &st));
    ck_assert_ptr_eq(fn, ts_sym("cuCtxGetDevice"));
    ck_assert_int_eq(cuGetProcAddress_v2("cuInit", &fn, 12000, 4, &st), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuGetProcAddress_v2("cuInit", NULL, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuGetProcAddress_v2(NULL, &fn, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    /* the 4-argument CUDA 11.3 ABI */
    CUresult (*v1)(const char *, void **, int, cuuint64_t) = ts_sym("cuGetProcAddress");
    CK(v1("cuMemGetInfo", &fn, 11030, 0));
    ck_assert_ptr_eq(fn, ts_sym("cuMemGetInfo_v2"));
    ck_assert_uint_eq(ts_counters().getproc_calls, 23);
}
END_TEST

/* The v1 ABI (32-bit pointers and sizes): allocations below 4 GiB in the same table as the _v2
 * ones (either free releases them, copies reach them), refused when none can be placed there,
 * figures above 4 GiB clamped, NULL out-parameters refused, and their own counters. */
typedef CUresult (*ts_v1_alloc_t)(unsigned *, unsigned);
typedef CUresult (*ts_v1_pitch_t)(unsigned *, unsigned *, unsigned, unsigned, unsigned);
typedef CUresult (*ts_v1_free_t)(unsigned);
typedef CUresult (*ts_v1_info_t)(unsigned *, unsigned *);
typedef CUresult (*ts_v1_range_t)(unsigned *, unsigned *, unsigned);

START_TEST(v1_abi)
{
    ts_start(); /* 8 GiB devices: more than 32 bits can say */
    ts_v1_alloc_t alloc = (ts_v1_alloc_t)ts_sym("cuMemAlloc");
    ts_v1_pitch_t pitch = (ts_v1_pitch_t)ts_sym("cuMemAllocPitch");
    ts_v1_free_t v1free = (ts_v1_free_t)ts_sym("cuMemFree");
    ts_v1_info_t info = (ts_v1_info_t)ts_sym("cuMemGetInfo");
    ts_v1_range_t range = (ts_v1_range_t)ts_sym("cuMemGetAddressRange");
    unsigned f = 0, t = 0, a = 0, b = 0, pp = 0, base = 0, size = 0;
    CK(info(&f, &t));
    ck_assert_uint_eq(t, 0xffffffffu);
    ck_assert_uint_eq(f, 0xffffffffu);
    CK(alloc(&a, MiB));
    ck_assert_uint_ne(a, 0);
    ck_assert_uint_eq(a % 512, 0);
    CK(pitch(&b, &pp, 1000, 3, 4));
    ck_assert_uint_eq(pp, 1024);
    ck_assert_uint_eq(ts_counters().bytes_in_use, MiB + 3072);
    CK(range(&base, &size, a + 100));
    ck_assert_uint_eq(base, a);
    ck_assert_uint_eq(size, MiB);
    CK(cuMemsetD8(a, 0x5a, 16)); /* the same address, through the _v2 ABI */
    unsigned char out[16];
    CK(cuMemcpyDtoH(out, a, sizeof out));
    ck_assert_int_eq(out[15], 0x5a);
    ck_assert_int_eq(alloc(&a + 0, 0xffffffffu) == CUDA_ERROR_OUT_OF_MEMORY, 1); /* no room below 4 GiB */
    ck_assert_int_eq(alloc(NULL, 512), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(pitch(&b + 0, NULL, 1000, 3, 4) == CUDA_ERROR_INVALID_VALUE, 1);
    ck_assert_int_eq(info(NULL, &t), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(info(&f, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(v1free(a));
    CK(cuMemFree(b)); /* a v1 allocation freed through the _v2 ABI */
    ck_assert_int_eq(v1free(a), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(range(&base, &size, a), CUDA_ERROR_NOT_FOUND);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.v1_alloc_calls, 5);
    ck_assert_uint_eq(c.v1_free_calls, 2);
    ck_assert_uint_eq(c.v1_meminfo_calls, 3);
    ck_assert_uint_eq(c.alloc_calls, 0);
    ck_assert_uint_eq(c.free_calls, 1);
    ck_assert_uint_eq(c.failed_allocs, 3);
}
END_TEST

START_TEST(getproc_log)
{
    void *fn;
    cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 0, NULL);
    cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL);
    cuGetProcAddress_v2("cuBogus", &fn, 12000, 0, NULL);
    ck_assert_uint_eq(simcuda_getproc_log_count(), 3);
    const char *s;
    int v;
    unsigned long long fl;
    void *ret;
    ck_assert_int_eq(simcuda_getproc_log_entry(1, &s, &v, &fl, &ret), 0);
    ck_assert_str_eq(s, "cuMemAllocAsync");
    ck_assert_int_eq(v, 11020);
    ck_assert_uint_eq(fl, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    ck_assert_ptr_eq(ret, ts_sym("cuMemAllocAsync_ptsz"));
    ck_assert_int_eq(simcuda_getproc_log_entry(2, &s, NULL, NULL, &ret), 0);
    ck_assert_str_eq(s, "cuBogus");
    ck_assert_ptr_null(ret);
    ck_assert_int_eq(simcuda_getproc_log_entry(3, &s, &v, &fl, &ret), -1);
    simcuda_reset_counters();
    ck_assert_uint_eq(simcuda_getproc_log_count(), 0);
    ck_assert_uint_eq(ts_counters().getproc_calls, 0);
}
END_TEST

START_TEST(created_contexts)
{
    setenv("SIMCUDA_TOTAL_MEM", "64MiB", 1);
    setenv("SIMCUDA_CONTEXT_OVERHEAD", "16MiB", 1);
    CK(cuInit(0));
    CUcontext a, b, cur;
    CUdeviceptr p;
    CUdevice dev;
    size_t f, t;
    CK(cuCtxCreate(&a, NULL, 0, 0));
    CK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_eq(cur, a);
    CK(cuMemGetInfo(&f, &t));
    ck_assert_uint_eq(f, 48 * MiB);
    CUresult (*create_v2)(CUcontext *, unsigned, CUdevice) = ts_sym("cuCtxCreate_v2");
    CK(create_v2(&b, 0, 0));
    CK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_eq(cur, b);
    CK(cuMemAlloc(&p, 8 * MiB));
    CK(cuMemGetInfo(&f, &t));
    ck_assert_uint_eq(f, 24 * MiB);
    CK(cuCtxGetDevice(&dev));
    ck_assert_int_eq(dev, 0);
    CK(cuCtxGetDevice_v2(&dev, a)); /* CUDA 13: an explicit context, NULL for the current one */
    CK(cuCtxSynchronize_v2(NULL));
    ck_assert_int_eq(cuCtxGetDevice_v2(NULL, a), CUDA_ERROR_INVALID_VALUE);
    CK(cuCtxDestroy(b)); /* pops it, frees its 8 MiB */
    ck_assert_uint_eq(ts_counters().bytes_in_use, 0);
    CK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_eq(cur, a);
    ck_assert_int_eq(cuCtxDestroy(b), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxPushCurrent(b), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxSynchronize_v2(b), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxPopCurrent(&cur));
    ck_assert_ptr_eq(cur, a);
    CK(cuCtxPushCurrent(a));
    CK(cuCtxSetCurrent(NULL));
    CK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_null(cur);
    ck_assert_int_eq(cuCtxCreate(NULL, NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuCtxCreate(&b, NULL, 0, 3), CUDA_ERROR_INVALID_DEVICE);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.ctx_creates, 2);
    ck_assert_uint_eq(c.ctx_destroys, 1);
}
END_TEST

/* The usage count: a context attached twice goes at its third detach, with its memory; a call
 * naming it after that is counted as one naming a destroyed context. */
START_TEST(attach_detach)
{
    CUresult (*cuCtxAttach)(CUcontext *, unsigned) = ts_sym("cuCtxAttach"); /* deprecated: */
    CUresult (*cuCtxDetach)(CUcontext) = ts_sym("cuCtxDetach");           /* not declared plainly */
    CK(cuInit(0));
    CUcontext a, b, cur;
    CUdeviceptr p;
    CK(cuCtxCreate(&a, NULL, 0, 0));
    CK(cuMemAlloc(&p, 4096));
    ck_assert_int_eq(cuCtxAttach(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuCtxAttach(&b, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuCtxAttach(&b, 0));
    ck_assert_ptr_eq(b, a);
    CK(cuCtxAttach(&b, 0));
    CK(cuCtxDetach(a));
    CK(cuCtxDetach(a));
    ck_assert_uint_eq(ts_counters().bytes_in_use, 4096); /* still attached once: alive */
    CK(cuCtxGetCurrent(&cur));
    ck_assert_ptr_eq(cur, a);
    ck_assert_uint_eq(ts_counters().dead_context_calls, 0);
    CK(cuCtxDetach(a));
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.bytes_in_use, 0);
    ck_assert_uint_eq(c.ctx_destroys, 1);
    unsigned version;
    ck_assert_int_eq(cuCtxGetApiVersion(a, &version), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(cuCtxDetach(a), CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_uint_eq(ts_counters().dead_context_calls, 2);
    ck_assert_int_eq(cuCtxAttach(&b, 0), CUDA_ERROR_INVALID_CONTEXT); /* none current */
}
END_TEST

START_TEST(primary_context)
{
    CK(cuInit(0));
    CUcontext p1, p2;
    CUdeviceptr p;
    unsigned flags;
    int active;
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ck_assert_int_eq(active, 0);
    ck_assert_int_eq(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuDevicePrimaryCtxRetain(&p1, 0));
    CK(cuDevicePrimaryCtxRetain(&p2, 0));
    ck_assert_ptr_eq(p1, p2);
    CK(cuCtxSetCurrent(p1));
    CK(cuMemAlloc(&p, 4096));
    CK(cuDevicePrimaryCtxReset(0)); /* frees every allocation, keeps the context usable */
    ck_assert_uint_eq(ts_counters().bytes_in_use, 0);
    ck_assert_int_eq(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAlloc(&p, 4096));
    CK(cuDevicePrimaryCtxRelease(0));
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ck_assert_int_eq(active, 1);
    ck_assert_uint_eq(ts_counters().bytes_in_use, 4096);
    CK(cuDevicePrimaryCtxRelease(0)); /* last reference: memory goes with it */
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ck_assert_int_eq(active, 0);
    ck_assert_uint_eq(ts_counters().bytes_in_use, 0);
    /* still current here, but no longer initialised: the driver's CUDA_ERROR_CONTEXT_IS_DESTROYED */
    ck_assert_int_eq(cuMemAlloc(&p, 4096), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    ck_assert_int_eq(cuDevicePrimaryCtxGetState(0, NULL, &active), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuDevicePrimaryCtxRetain(&p1, 1), CUDA_ERROR_INVALID_DEVICE);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.primary_resets, 1);
    ck_assert_uint_eq(c.primary_retains, 3);
    ck_assert_uint_eq(c.primary_releases, 3); /* one refused */
}
END_TEST

/* A pool with a release threshold keeps a freed block's bytes (device memory the process holds)
 * until a synchronisation finds it above the threshold, or cuMemPoolTrimTo; the next stream-ordered
 * allocation reuses them. */
START_TEST(pool_release_threshold)
{
    ts_start();
    CUmemoryPool pool, cur, got;
    CUstream s;
    CUdeviceptr a, b;
    cuuint64_t v, max = ~0ull;
    CK(cuDeviceGetDefaultMemPool(&pool, 0));
    CK(cuDeviceGetMemPool(&cur, 0));
    ck_assert_ptr_eq(pool, cur);
    ck_assert_int_eq(cuDeviceGetMemPool(&cur, 9), CUDA_ERROR_INVALID_DEVICE);
    ck_assert_int_eq(cuDeviceGetMemPool(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v));
    ck_assert_uint_eq(v, 0); /* the driver's default */
    CK(cuStreamCreate(&s, 0));
    /* threshold 0: the bytes go when the stream passes the free */
    CK(cuMemAllocAsync(&a, 1 << 20, s));
    CK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
    ck_assert_ptr_eq(got, pool);
    CK(cuMemFreeAsync(a, s));
    CK(cuStreamSynchronize(s));
    ck_assert_uint_eq(ts_counters().bytes_in_use, 0);
    /* the maximum, as PyTorch's cudaMallocAsync backend sets it: kept through synchronisations */
    CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
    CK(cuMemAllocAsync(&a, 1 << 20, s));
    CK(cuMemFreeAsync(a, s));
    CK(cuStreamSynchronize(s));
    CK(cuCtxSynchronize());
    ck_assert_uint_eq(ts_counters().bytes_in_use, 1 << 20);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(0), 1 << 20);
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    ck_assert_uint_eq(v, 1 << 20);
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
    ck_assert_uint_eq(v, 0);
    /* reused: 1.5 MiB takes the kept 1 MiB and 0.5 MiB more */
    CK(cuMemAllocAsync(&b, 3 << 19, s));
    ck_assert_uint_eq(ts_counters().bytes_in_use, 3 << 19);
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    ck_assert_uint_eq(v, 3 << 19);
    CK(cuMemFreeAsync(b, s));
    CK(cuStreamSynchronize(s));
    /* a lower threshold: the next synchronisation gives back what is above it */
    cuuint64_t half = 1 << 19;
    CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &half));
    ck_assert_uint_eq(ts_counters().bytes_in_use, 3 << 19);
    CK(cuStreamSynchronize(s));
    ck_assert_uint_eq(ts_counters().bytes_in_use, 1 << 19);
    /* cuMemPoolTrimTo: down to what is asked */
    CK(cuMemPoolTrimTo(pool, 0));
    ck_assert_uint_eq(ts_counters().bytes_in_use, 0);
    ck_assert_uint_eq(ts_counters().pool_trim_calls, 1);
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &v));
    ck_assert_uint_eq(v, 3 << 19);
    ck_assert_int_eq(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &max),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemPoolTrimTo((CUmemoryPool)&v, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, NULL),
                     CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamDestroy(s));
}
END_TEST

START_TEST(other_allocations)
{
    ts_start();
    CUstream s;
    CUdeviceptr a, b, m;
    CK(cuStreamCreate(&s, 0));
    CK(cuMemAllocAsync(&a, 1000, s));
    CK(cuMemAllocFromPoolAsync(&b, 2000, NULL, CU_STREAM_PER_THREAD));
    CUresult (*ptsz)(CUdeviceptr *, size_t, CUstream) = ts_sym("cuMemAllocAsync_ptsz");
    CUdeviceptr c2;
    CK(ptsz(&c2, 3000, NULL));
    ck_assert_int_eq(cuMemAllocAsync(&a, 10, (CUstream)&s), CUDA_ERROR_INVALID_HANDLE);
    CK(cuStreamSynchronize(s));
    CK(cuMemFreeAsync(a, s));
    CK(cuMemFree(b)); /* stream-ordered memory may be freed synchronously */
    CK(cuMemFreeAsync(c2, NULL));
    ck_assert_int_eq(cuMemFreeAsync(c2, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
    ck_assert_int_eq(cuMemAllocManaged(&a, 4096, 7), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamDestroy(s));
    ck_assert_int_eq(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
    ck_assert_int_eq(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.async_alloc_calls, 3);
    ck_assert_uint_eq(c.pool_alloc_calls, 1);
    ck_assert_uint_eq(c.async_free_calls, 3);
    ck_assert_uint_eq(c.managed_alloc_calls, 2);
    ck_assert_uint_eq(c.failed_allocs, 2);
    ck_assert_uint_eq(c.bytes_in_use, 4096);
    ck_assert_uint_eq(c.peak_bytes_in_use, 6000);
}
END_TEST

START_TEST(vmm_handles)
{
    ts_start();
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t g;
    CUmemGenericAllocationHandle h;
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    ck_assert_uint_eq(g, 2 * MiB);
    CK(cuMemCreate(&h, 4 * MiB, &prop, 0));
    ck_assert_uint_eq(ts_counters().bytes_in_use, 4 * MiB);
    ck_assert_int_eq(cuMemCreate(&h, MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemCreate(&h, 2 * MiB, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemRelease(h));
    ck_assert_int_eq(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    simcuda_counters_t c = ts_counters();
    ck_assert_uint_eq(c.create_calls, 3);
    ck_assert_uint_eq(c.release_calls, 2);
    ck_assert_uint_eq(c.bytes_in_use, 0);
}
END_TEST

START_TEST(pointer_queries)
{
    CUcontext ctx = ts_start();
    CUdeviceptr p, base, start_addr, m;
    size_t size;
    CK(cuMemAlloc(&p, 10000));
    CK(cuMemGetAddressRange(&base, &size, p + 777));
    ck_assert_uint_eq(base, p);
    ck_assert_uint_eq(size, 10000);
    CK(cuMemGetAddressRange(NULL, &size, p));
    ck_assert_int_eq(cuMemGetAddressRange(&base, &size, p + 10000), CUDA_ERROR_NOT_FOUND);
    CK(cuPointerGetAttribute(&start_addr, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 5));
    ck_assert_uint_eq(start_addr, p);
    CUcontext owner;
    CK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    ck_assert_ptr_eq(owner, ctx);
    ck_assert_int_eq(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, 0x1000),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_CONTEXT, p), CUDA_ERROR_INVALID_VALUE);
    CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    size_t rsize = 1;
    int ord = 5;
    unsigned managed = 7;
    void *data[3] = {&rsize, &ord, &managed};
    CK(cuPointerGetAttributes(3, attrs, data, p + 1));
    ck_assert_uint_eq(rsize, 10000);
    ck_assert_int_eq(ord, 0);
    ck_assert_uint_eq(managed, 0);
    CK(cuPointerGetAttributes(3, attrs, data, 0x1000)); /* unknown pointer: defaults, no error */
    ck_assert_uint_eq(rsize, 0);
    CK(cuMemAllocManaged(&m, 512, CU_MEM_ATTACH_HOST));
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
    ck_assert_uint_eq(managed, 1);
    CUipcMemHandle ipc;
    CK(cuIpcGetMemHandle(&ipc, p));
    ck_assert_int_eq(cuIpcGetMemHandle(&ipc, m), CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuIpcGetMemHandle(NULL, p), CUDA_ERROR_INVALID_VALUE);
    ck_assert_uint_eq(ts_counters().ipc_calls, 3);
}
END_TEST

static Suite *sim_suite(void)
{
    Suite *s = suite_create("simcuda");
    TCase *tc = tcase_create("driver");
    tcase_set_timeout(tc, 60); /* sanitizer builds on a loaded machine are slow; never a timing test */
    tcase_add_test(tc, before_init);
    tcase_add_test(tc, devices);
    tcase_add_test(tc, no_context);
    tcase_add_test(tc, destroyed_context_current_elsewhere);
    tcase_add_test(tc, alloc_free);
    tcase_add_test(tc, pitch);
    tcase_add_test(tc, out_of_memory);
    tcase_add_test(tc, memcpy_round_trip);
    tcase_add_test(tc, getproc_versions);
    tcase_add_test(tc, v1_abi);
    tcase_add_test(tc, getproc_log);
    tcase_add_test(tc, created_contexts);
    tcase_add_test(tc, attach_detach);
    tcase_add_test(tc, primary_context);
    tcase_add_test(tc, other_allocations);
    tcase_add_test(tc, pool_release_threshold);
    tcase_add_test(tc, vmm_handles);
    tcase_add_test(tc, pointer_queries);
    ts_driver_more_add(tc); /* test_sim_driver.c */
    suite_add_tcase(s, tc);
    suite_add_tcase(s, ts_tcase_fault());
    suite_add_tcase(s, ts_tcase_lean());
    suite_add_tcase(s, ts_tcase_vmm());
    suite_add_tcase(s, ts_tcase_shared());
    suite_add_tcase(s, ts_tcase_nvml());
    suite_add_tcase(s, ts_tcase_stream());
    suite_add_tcase(s, ts_tcase_pool());
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(sim_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
