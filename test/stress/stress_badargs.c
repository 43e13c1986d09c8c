/* NULL and garbage arguments to every hooked entry point: the shim must answer with the error
 * code the driver itself gives, and never crash.
 *
 * The program makes the same sequence of bad calls (before cuInit, without a context, then with
 * one) and prints one line "case code [out-value]" per call. The runner executes it twice: once
 * without the shim, writing the driver's answers to a reference file (BADARGS_REFERENCE), once
 * under the shim with BADARGS_COMPARE pointing at that file; the second run prints a "not ok" line
 * per case answered differently and a summary line. The only case allowed to differ is cuIpcGetMemHandle on an arena pointer, which the shim
 * refuses on purpose (DESIGN.md); it is checked to fail rather than compared.
 */
#include "stress_util.h"

#include <dlfcn.h>

static FILE *g_ref;      /* compare mode: the driver's answers */
static FILE *g_out;      /* reference mode: where they go */
static int g_arena_mode; /* under the shim in arena mode */
static int g_cases, g_bad;

/* Records or compares one case. `extra` is an out-value worth comparing (status, -1 if none). */
static void result(const char *name, CUresult rc, long long extra)
{
    g_cases++;
    if (g_out) {
        fprintf(g_out, "%s %d %lld\n", name, (int)rc, extra);
        return;
    }
    char want_name[128];
    int want = -1;
    long long want_extra = -1;
    if (!g_ref || fscanf(g_ref, "%127s %d %lld", want_name, &want, &want_extra) != 3 ||
        strcmp(want_name, name)) {
        g_bad += !tap(0, "%s: no matching line in the reference run", name);
        return;
    }
    if (rc != (CUresult)want || extra != want_extra)
        g_bad += !tap(0, "%s: shim returns %d (out-value %lld), the driver %d (%lld)", name,
                      (int)rc, extra, want, want_extra);
}

/* Compare mode: consumes the reference line of a case this run does not compare. */
static void skip_reference(void)
{
    char name[128];
    int rc;
    long long extra;
    if (g_ref && fscanf(g_ref, "%127s %d %lld", name, &rc, &extra) != 3)
        tap(0, "the reference run has fewer cases than this one");
}

#define CASE(name, call)                                                                   \
    do {                                                                                   \
        CUresult case_rc_ = (call);                                                        \
        result(name, case_rc_, -1);                                                        \
    } while (0)

typedef CUresult (*getproc_v1_t)(const char *, void **, int, cuuint64_t);
typedef CUresult (*alloc_async_t)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*free_async_t)(CUdeviceptr, CUstream);

static CUmemAllocationProp vmm_prop(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return prop;
}

/* Calls every memory hook once; `phase` names the state (preinit, noctx, ctx). */
static void common_calls(const char *phase, CUdeviceptr garbage)
{
    char n[96];
    CUdeviceptr p = 0, base;
    size_t f, t, pitch, s;
    CUipcMemHandle h;
    CUmemGenericAllocationHandle vh;
    CUmemAllocationProp prop = vmm_prop();
#define PCASE(what, call)                                                                  \
    do {                                                                                   \
        snprintf(n, sizeof n, "%s:%s", phase, what);                                       \
        CASE(n, call);                                                                     \
    } while (0)
    PCASE("alloc", cuMemAlloc(&p, 512));
    if (p)
        cuMemFree(p);
    PCASE("alloc_pitch", cuMemAllocPitch(&p, &pitch, 64, 4, 4));
    if (p)
        cuMemFree(p);
    PCASE("free_garbage", cuMemFree(garbage));
    PCASE("meminfo", cuMemGetInfo(&f, &t));
    PCASE("range_garbage", cuMemGetAddressRange(&base, &s, garbage));
    PCASE("attr_garbage", cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                                garbage));
    PCASE("ipc_garbage", cuIpcGetMemHandle(&h, garbage));
    PCASE("managed", cuMemAllocManaged(&p, 512, CU_MEM_ATTACH_GLOBAL));
    PCASE("async", cuMemAllocAsync(&p, 512, 0));
    PCASE("free_async_garbage", cuMemFreeAsync(garbage, 0));
    PCASE("pool", cuMemAllocFromPoolAsync(&p, 512, NULL, 0));
    PCASE("create", cuMemCreate(&vh, 2u << 20, &prop, 0));
    PCASE("release_garbage", cuMemRelease(12345));
#undef PCASE
}

static void alloc_cases(void)
{
    CUdeviceptr p;
    size_t pitch;
    CASE("alloc_null", cuMemAlloc(NULL, 512));
    CASE("alloc_zero", cuMemAlloc(&p, 0));
    CASE("alloc_max", cuMemAlloc(&p, (size_t)-1));
    CASE("alloc_huge", cuMemAlloc(&p, (size_t)1 << 62));
    CASE("pitch_null_ptr", cuMemAllocPitch(NULL, &pitch, 64, 4, 4));
    CASE("pitch_null_pitch", cuMemAllocPitch(&p, NULL, 64, 4, 4));
    CASE("pitch_zero_width", cuMemAllocPitch(&p, &pitch, 0, 4, 4));
    CASE("pitch_zero_height", cuMemAllocPitch(&p, &pitch, 64, 0, 4));
    CASE("pitch_elem_3", cuMemAllocPitch(&p, &pitch, 64, 4, 3));
    CASE("pitch_elem_32", cuMemAllocPitch(&p, &pitch, 64, 4, 32));
    CASE("pitch_overflow", cuMemAllocPitch(&p, &pitch, (size_t)-1 / 2, (size_t)-1 / 2, 4));
    CASE("managed_null", cuMemAllocManaged(NULL, 512, CU_MEM_ATTACH_GLOBAL));
    CASE("managed_zero", cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL));
    CASE("managed_flags", cuMemAllocManaged(&p, 512, 0xff));
    CASE("async_null", cuMemAllocAsync(NULL, 512, 0));
    CASE("async_zero", cuMemAllocAsync(&p, 0, 0));
    CASE("pool_null", cuMemAllocFromPoolAsync(NULL, 512, NULL, 0));
    CASE("pool_zero", cuMemAllocFromPoolAsync(&p, 0, NULL, 0));
    alloc_async_t ptsz = (alloc_async_t)dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz");
    free_async_t fptsz = (free_async_t)dlsym(RTLD_DEFAULT, "cuMemFreeAsync_ptsz");
    CASE("async_ptsz_null", ptsz ? ptsz(NULL, 512, 0) : CUDA_ERROR_NOT_FOUND);
    CASE("async_ptsz_zero", ptsz ? ptsz(&p, 0, 0) : CUDA_ERROR_NOT_FOUND);
    CASE("free_async_ptsz_zero", fptsz ? fptsz(0, 0) : CUDA_ERROR_NOT_FOUND);
    CUmemAllocationProp prop = vmm_prop();
    CUmemGenericAllocationHandle h;
    CASE("create_null", cuMemCreate(NULL, 2u << 20, &prop, 0));
    CASE("create_zero", cuMemCreate(&h, 0, &prop, 0));
    CASE("create_null_prop", cuMemCreate(&h, 2u << 20, NULL, 0));
    CASE("create_flags", cuMemCreate(&h, 2u << 20, &prop, 1));
    CASE("release_zero", cuMemRelease(0));
}

/* Frees: unknown, interior, double, and a pointer of a freed block. */
static void free_cases(CUdeviceptr garbage)
{
    CUdeviceptr p, q;
    REQUIRE_CU(cuMemAlloc(&p, 4096));
    REQUIRE_CU(cuMemAlloc(&q, 4096));
    CASE("free_zero", cuMemFree(0));
    CASE("free_garbage", cuMemFree(garbage));
    CASE("free_interior", cuMemFree(p + 512));
    CASE("free_ok", cuMemFree(p));
    CASE("free_double", cuMemFree(p));
    CASE("free_async_zero", cuMemFreeAsync(0, 0));
    CASE("free_async_double", cuMemFreeAsync(p, 0));
    CASE("free_ok_2", cuMemFree(q));
}

static void query_cases(CUdeviceptr garbage)
{
    CUdeviceptr p, base, dead;
    size_t f, t, s;
    /* p first: an allocation made after the free could be placed over the dead block (the
     * simulated driver maps each block), and then "dead" would be a live interior pointer. */
    REQUIRE_CU(cuMemAlloc(&p, 8192));
    REQUIRE_CU(cuMemAlloc(&dead, 4096));
    REQUIRE_CU(cuMemFree(dead));
    CASE("meminfo_null_free", cuMemGetInfo(NULL, &t));
    CASE("meminfo_null_total", cuMemGetInfo(&f, NULL));
    CASE("meminfo_null_both", cuMemGetInfo(NULL, NULL));
    CASE("range_null_outs", cuMemGetAddressRange(NULL, NULL, p));
    CASE("range_zero", cuMemGetAddressRange(&base, &s, 0));
    CASE("range_garbage", cuMemGetAddressRange(&base, &s, garbage));
    CASE("range_interior", cuMemGetAddressRange(&base, &s, p + 100));
    CASE("range_freed", cuMemGetAddressRange(&base, &s, dead));
    CASE("attr_null", cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p));
    CASE("attr_zero_ptr", cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, 0));
    CASE("attr_garbage", cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_SIZE, garbage));
    CASE("attr_freed", cuPointerGetAttribute(&s, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dead));
    CASE("attr_bogus", cuPointerGetAttribute(&base, (CUpointer_attribute)9999, p));
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                    CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    CUpointer_attribute bogus[2] = {CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUpointer_attribute)9999};
    void *data[2] = {&base, &s};
    CASE("attrs_zero_count", cuPointerGetAttributes(0, attrs, data, p));
    CASE("attrs_null_attrs", cuPointerGetAttributes(2, NULL, data, p));
    CASE("attrs_null_data", cuPointerGetAttributes(2, attrs, NULL, p));
    CASE("attrs_garbage_ptr", cuPointerGetAttributes(2, attrs, data, garbage));
    CASE("attrs_bogus_attr", cuPointerGetAttributes(2, bogus, data, p));
    CUipcMemHandle h;
    CASE("ipc_null", cuIpcGetMemHandle(NULL, p));
    CASE("ipc_zero", cuIpcGetMemHandle(&h, 0));
    CASE("ipc_garbage", cuIpcGetMemHandle(&h, garbage));
    CUresult rc = cuIpcGetMemHandle(&h, p);
    if (g_arena_mode) {
        skip_reference();
        g_cases++;
        g_bad += !tap(rc != CUDA_SUCCESS, "ipc_arena_pointer: refused on an arena pointer (%d)",
                      (int)rc);
    } else
        CASE("ipc_live", rc);
    cuMemFree(p);
}

static void getproc_cases(void)
{
    void *fn;
    CUdriverProcAddressQueryResult st;
#define GP(name, call)                                                                     \
    do {                                                                                   \
        st = (CUdriverProcAddressQueryResult)-1;                                           \
        CUresult gp_rc_ = (call);                                                          \
        result(name, gp_rc_, (long long)st);                                               \
    } while (0)
    GP("getproc_null_symbol", cuGetProcAddress(NULL, &fn, 12000, 0, &st));
    GP("getproc_null_pfn", cuGetProcAddress("cuMemAlloc", NULL, 12000, 0, &st));
    GP("getproc_unknown", cuGetProcAddress("cuNoSuchFunction", &fn, 12000, 0, &st));
    GP("getproc_low_version", cuGetProcAddress("cuMemAlloc", &fn, 1000, 0, &st));
    GP("getproc_bogus_flags", cuGetProcAddress("cuMemAlloc", &fn, 12000, 0xff00, &st));
    GP("getproc_null_status", cuGetProcAddress("cuMemAlloc", &fn, 12000, 0, NULL));
    GP("getproc_empty", cuGetProcAddress("", &fn, 12000, 0, &st));
#undef GP
    getproc_v1_t v1 = (getproc_v1_t)dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    if (!v1) {
        tap(0, "dlsym(cuGetProcAddress) finds the 4-argument entry point");
        return;
    }
    CASE("getproc1_null_symbol", v1(NULL, &fn, 12000, 0));
    CASE("getproc1_null_pfn", v1("cuMemAlloc", NULL, 12000, 0));
    CASE("getproc1_unknown", v1("cuNoSuchFunction", &fn, 12000, 0));
    CASE("getproc1_low_version", v1("cuMemAlloc", &fn, 1000, 0));
}

static void context_cases(void)
{
    CUcontext c, primary;
    REQUIRE_CU(cuCtxCreate(&c, NULL, 0, 0));
    REQUIRE_CU(cuCtxDestroy(c));
    CASE("ctx_destroy_null", cuCtxDestroy(NULL));
    CASE("ctx_destroy_dead", cuCtxDestroy(c));
    REQUIRE_CU(cuCtxGetCurrent(&primary));
    CASE("ctx_destroy_primary", cuCtxDestroy(primary));
    CASE("reset_minus1", cuDevicePrimaryCtxReset(-1));
    CASE("reset_99", cuDevicePrimaryCtxReset(99));
    CASE("release_minus1", cuDevicePrimaryCtxRelease(-1));
    CASE("release_99", cuDevicePrimaryCtxRelease(99));
    CASE("release_unretained", cuDevicePrimaryCtxRelease(1));
}

/* The runtime hooks (cudaMalloc, cudaFree, cudaMemGetInfo) with no runtime loaded: the shim has
 * no real function to call, so each must fail cleanly. Nothing to compare (the symbols exist only
 * under the shim), so these are checked in compare mode only. */
static void runtime_cases(void)
{
    typedef int (*rt_malloc_t)(void **, size_t);
    typedef int (*rt_free_t)(void *);
    typedef int (*rt_info_t)(size_t *, size_t *);
    rt_malloc_t m = (rt_malloc_t)dlsym(RTLD_DEFAULT, "cudaMalloc");
    rt_free_t f = (rt_free_t)dlsym(RTLD_DEFAULT, "cudaFree");
    rt_info_t i = (rt_info_t)dlsym(RTLD_DEFAULT, "cudaMemGetInfo");
    if (!g_ref)
        return;
    if (!m || !f || !i) {
        g_bad += !tap(0, "runtime hooks: the shim exports cudaMalloc, cudaFree, cudaMemGetInfo");
        return;
    }
    void *p = NULL;
    size_t a, b;
    g_cases += 4;
    g_bad += !tap(m(&p, 512) != 0, "runtime: cudaMalloc without a CUDA runtime fails cleanly");
    g_bad += !tap(m(NULL, 512) != 0, "runtime: cudaMalloc(NULL) fails");
    g_bad += !tap(f((void *)0xdeadbeef000ull) != 0, "runtime: cudaFree(garbage) fails");
    g_bad += !tap(i(&a, &b) != 0 && i(NULL, NULL) != 0, "runtime: cudaMemGetInfo fails");
}

static void open_files(void)
{
    const char *ref = getenv("BADARGS_COMPARE"), *out = getenv("BADARGS_REFERENCE");
    const char *mode = getenv("GPUARENA_MODE");
    g_arena_mode = ref && !(mode && !strcmp(mode, "platform"));
    if (out && !(g_out = fopen(out, "w")))
        tap(0, "cannot write the reference file %s", out);
    if (ref && !(g_ref = fopen(ref, "r")))
        tap(0, "cannot read the reference file %s (run without the shim first)", ref);
    if (!g_out && !g_ref)
        exit((tap(0, "set BADARGS_REFERENCE or BADARGS_COMPARE"), 0));
}

int main(void)
{
    open_files();
    const CUdeviceptr garbage = (CUdeviceptr)0xdeadbeef000ull;
    common_calls("preinit", garbage);
    CASE("init_flags", cuInit(1));
    REQUIRE_CU(cuInit(0));
    common_calls("noctx", garbage);
    CUcontext ctx;
    REQUIRE_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    REQUIRE_CU(cuCtxSetCurrent(ctx));
    common_calls("ctx", garbage);
    alloc_cases();
    free_cases(garbage);
    query_cases(garbage);
    getproc_cases();
    context_cases();
    runtime_cases();
    CUdeviceptr p;
    CUresult rc = cuMemAlloc(&p, 1 << 20);
    if (rc == CUDA_SUCCESS)
        rc = cuMemFree(p);
    if (g_out)
        fclose(g_out);
    else
    {
        tap(g_bad == 0, "badargs: %d of %d NULL/garbage/wrong-state calls answered with the "
            "driver's own code (failures listed above)", g_cases - g_bad, g_cases);
        tap(rc == CUDA_SUCCESS, "badargs: after them the shim still allocates (%d)", (int)rc);
    }
    return 0;
}
