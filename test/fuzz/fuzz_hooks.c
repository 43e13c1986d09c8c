/* fuzz_hooks: random sequences of the shim's hooked calls with hostile arguments, under
 * LD_PRELOAD on the simulated driver, checked from the outside (the fuzz tier's hook class; the
 * other targets reach the parsers and the allocator, not the hooks).
 *
 * Seeded (rand_r), so a run is repeatable: usage fuzz_hooks SEED OPS. Each step is one of: an
 * allocation of a random size (0, small, large, past the cap, near SIZE_MAX) by cuMemAlloc,
 * cuMemAllocPitch, cuMemAllocAsync on a legacy, non-blocking or per-thread stream, or
 * cuMemAllocManaged; a free of a live block, an interior pointer, a freed one, 0 or garbage, from
 * its own context or another; cuMemGetInfo; cuMemGetAddressRange and cuPointerGetAttribute on such
 * pointers; NULL out-parameters; switching among a primary and two created contexts; destroying
 * the current context or resetting the primary with blocks live; synchronisations; and reading a
 * live block back. Checked after every step: only the driver's own result codes, a live block's
 * range and context are its own, no new block overlaps a live one, a live block reads back what was
 * written, cuMemGetInfo's total is the cap and free never above it, and the driver's peak (its own
 * exact count, every kind of memory) never above the cap. Exit 0, or 1 with the failed steps on
 * stderr. Stream-ordered blocks outlive their context in vmm and platform modes; in arena and grow
 * modes they go with it (the README's limits), and the checks follow the mode in GPUARENA_MODE.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "simcuda.h"
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);

#define MAXB 64
typedef struct { CUdeviceptr p; size_t n; int ctx; unsigned char pat; int kind; CUstream s; } blk_t;
static blk_t b[MAXB];
static CUdeviceptr freed[256];
static int nfreed;
static CUcontext ctx[3];
static int cur;
static CUstream streams[3][2];
static CUdevice dev;
static size_t cap;
static unsigned seed;
static int failures;
static long op;
static unsigned char buf[1 << 20];

#define CHECK(c, ...) do { if (!(c)) { fprintf(stderr, "op %ld: ", op); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); if (++failures > 20) exit(1); } } while (0)
static unsigned rnd(void) { return rand_r(&seed); }

static size_t rsize(void)
{
    switch (rnd() % 8) {
    case 0: return 0;
    case 1: return 1 + rnd() % 512;
    case 2: return 1 + rnd() % 65536;
    case 3: return 1 + rnd() % (4 << 20);
    case 4: return (size_t)(1 + rnd() % 16) << 20;
    case 5: return cap + 1 + rnd() % 4096;
    case 6: return (size_t)-1 - rnd() % 4096;
    default: return 2 << 20;
    }
}

static CUdeviceptr rptr(void)
{
    int live = 0;
    for (int i = 0; i < MAXB; i++) live += b[i].p != 0;
    switch (rnd() % 6) {
    case 0: return 0;
    case 1: return (CUdeviceptr)rnd() << 12;
    case 2: return nfreed ? freed[rnd() % nfreed] : 0;
    default: {
        if (!live) return 0x1000;
        int k = rnd() % live;
        for (int i = 0; i < MAXB; i++) if (b[i].p && k-- == 0) return b[i].p + (rnd() % 3 == 0 ? rnd() % b[i].n : 0);
        return 0;
    }
    }
}

static int owner(CUdeviceptr p, int exact)
{
    for (int i = 0; i < MAXB; i++)
        if (b[i].p && (exact ? p == b[i].p : (p >= b[i].p && p < b[i].p + b[i].n))) return i;
    return -1;
}

static void add(CUdeviceptr p, size_t n, int kind, CUstream s)
{
    int o = owner(p, 0);
    CHECK(o < 0 && owner(p + n - 1, 0) < 0, "new block %llx+%zu overlaps live block %d", p, n, o);
    for (int i = 0; i < MAXB; i++)
        if (!b[i].p) {
            b[i] = (blk_t){p, n, cur, (unsigned char)rnd(), kind, s};
            CUresult e = kind == 2 || kind == 3 ? cuMemsetD8Async(p, b[i].pat, n, s) : cuMemsetD8(p, b[i].pat, n);
            CHECK(e == CUDA_SUCCESS, "memset of new block kind %d: %d", kind, e);
            if (e) b[i].p = 0;
            return;
        }
    /* table full: free it at once */
    CUresult e = kind == 2 ? cuMemFreeAsync(p, s) : cuMemFree(p);
    CHECK(e == CUDA_SUCCESS, "free of untracked: %d", e);
}

static void drop(int i)
{
    if (nfreed < 256) freed[nfreed++] = b[i].p;
    else freed[rnd() % 256] = b[i].p;
    b[i].p = 0;
}

static void verify(int i)
{
    size_t n = b[i].n < sizeof buf ? b[i].n : sizeof buf;
    if (b[i].kind == 2 || b[i].kind == 3) cuStreamSynchronize(b[i].s);
    CUresult e = cuMemcpyDtoH(buf, b[i].p, n);
    CHECK(e == CUDA_SUCCESS, "dtoh of live block %d (kind %d): %d", i, b[i].kind, e);
    if (e) return;
    for (size_t k = 0; k < n; k += 257)
        if (buf[k] != b[i].pat) { CHECK(0, "block %d kind %d at %zu reads %02x not %02x", i, b[i].kind, k, buf[k], b[i].pat); return; }
}

static void ctx_gone(int c)
{
    for (int i = 0; i < MAXB; i++)
        if (b[i].p && b[i].ctx == c) {
            const char *m = getenv("GPUARENA_MODE");
            int pool_dies = getenv("LD_PRELOAD") && (!m || !strcmp(m, "arena") || !strcmp(m, "grow"));
            if (b[i].kind == 2 && !pool_dies) { b[i].ctx = -1; b[i].s = 0; } /* stream-ordered memory outlives its context (README: not in arena/grow) */
            else drop(i);
        }
}

int main(int argc, char **argv)
{
    seed = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
    unsigned seed0 = seed;
    long ops = argc > 2 ? atol(argv[2]) : 20000;
    if (cuInit(0) || cuDeviceGet(&dev, 0)) return 2;
    cuDevicePrimaryCtxRetain(&ctx[0], dev);
    cuCtxCreate_v2(&ctx[1], 0, dev);
    cuCtxCreate_v2(&ctx[2], 0, dev);
    for (int c = 0; c < 3; c++) { cuCtxSetCurrent(ctx[c]); cuStreamCreate(&streams[c][0], 0); cuStreamCreate(&streams[c][1], CU_STREAM_NON_BLOCKING); }
    cuCtxSetCurrent(ctx[0]);
    size_t f, t;
    cuMemGetInfo(&f, &t);
    cap = t;
    for (op = 0; op < ops; op++) {
        CUdeviceptr p = 0, q;
        size_t n, pitch;
        CUresult e = CUDA_ERROR_UNKNOWN;
        int k = rnd() % 16;
        switch (k) {
        case 0: case 1:
            n = rsize();
            e = cuMemAlloc(&p, n);
            CHECK(e == CUDA_SUCCESS || e == CUDA_ERROR_OUT_OF_MEMORY || (n == 0 && e == CUDA_ERROR_INVALID_VALUE), "alloc %zu: %d", n, e);
            if (!e) add(p, n, 0, 0);
            break;
        case 2: case 3: {
            q = rptr();
            int o = owner(q, 1);
            if (o >= 0 && b[o].ctx != cur && rnd() % 2) break;
            if (o >= 0 && b[o].kind == 3) { e = cuMemFree(q); CHECK(!e, "free managed %d", e); drop(o); break; }
            if (o >= 0 && b[o].kind == 2 && b[o].ctx < 0) { e = cuMemFree(q); CHECK(!e, "free orphan async %d", e); drop(o); break; }
            if (o >= 0 && b[o].kind == 2) { e = cuMemFreeAsync(q, b[o].s); CHECK(!e, "free async %d", e); drop(o); break; }
            e = cuMemFree(q);
            if (o >= 0) { CHECK(e == CUDA_SUCCESS, "free of live %llx: %d", q, e); drop(o); }
            else CHECK(e != CUDA_SUCCESS, "free of non-block %llx succeeded", q);
            break;
        }
        case 4:
            n = rsize() / 64 + 1;
            e = cuMemAllocPitch(&p, &pitch, n, 1 + rnd() % 64, 4 << (rnd() % 3));
            CHECK(e == CUDA_SUCCESS || e == CUDA_ERROR_OUT_OF_MEMORY || e == CUDA_ERROR_INVALID_VALUE, "pitch: %d", e);
            if (!e)
                CHECK(cuMemFree(p) == CUDA_SUCCESS, "free of a pitch block");
            break;
        case 5: {
            CUstream s = rnd() % 3 == 0 ? CU_STREAM_PER_THREAD : streams[cur][rnd() % 2];
            n = rsize();
            e = cuMemAllocAsync(&p, n, s);
            CHECK(e == CUDA_SUCCESS || e == CUDA_ERROR_OUT_OF_MEMORY || (n == 0 && e == CUDA_ERROR_INVALID_VALUE), "async alloc %zu: %d", n, e);
            if (!e) add(p, n, 2, s);
            break;
        }
        case 6:
            /* NULL out-parameters: the driver's own error, never a crash or a block */
            CHECK(cuMemAlloc(NULL, 1 + rnd() % 4096) != CUDA_SUCCESS, "cuMemAlloc(NULL) succeeded");
            CHECK(cuMemAllocAsync(NULL, 4096, 0) != CUDA_SUCCESS, "cuMemAllocAsync(NULL) succeeded");
            CHECK(cuMemAllocPitch(&p, NULL, 64, 64, 4) != CUDA_SUCCESS, "cuMemAllocPitch(pitch NULL) succeeded");
            CHECK(cuMemGetInfo(NULL, NULL) != CUDA_SUCCESS, "cuMemGetInfo(NULL, NULL) succeeded");
            CHECK(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_CONTEXT, rptr()) != CUDA_SUCCESS,
                  "cuPointerGetAttribute(NULL) succeeded");
            e = cuMemGetInfo(&f, &t);
            CHECK(!e && f <= t && t == cap, "info %d free %zu total %zu cap %zu", e, f, t, cap);
            CHECK(simcuda_device_peak_all(0) <= cap, "driver peak %llu above cap %zu", simcuda_device_peak_all(0), cap);
            break;
        case 7: {
            q = rptr();
            CUdeviceptr base = 0; size_t sz = 0;
            e = cuMemGetAddressRange(&base, &sz, q);
            int o = owner(q, 0);
            if (o >= 0) CHECK(!e && base == b[o].p && sz >= b[o].n, "range of live %llx: %d %llx+%zu want %llx+%zu", q, e, base, sz, b[o].p, b[o].n);
            CUcontext pc = NULL;
            e = cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, q);
            if (o >= 0 && b[o].kind != 3 && b[o].ctx >= 0) CHECK(!e && pc == ctx[b[o].ctx], "ctx attr of live block: %d", e);
            break;
        }
        case 8: {
            int c = rnd() % 3;
            cuCtxSetCurrent(ctx[c]);
            cur = c;
            break;
        }
        case 9: {
            int i = rnd() % MAXB;
            if (b[i].p) verify(i);
            break;
        }
        case 10:
            if (rnd() % 8) break;
            n = 1 + rnd() % (8 << 20);
            e = cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL);
            CHECK(e == CUDA_SUCCESS || e == CUDA_ERROR_OUT_OF_MEMORY, "managed: %d", e);
            if (!e) add(p, n, 3, 0);
            break;
        case 11:
            e = rnd() % 2 ? cuCtxSynchronize() : cuStreamSynchronize(streams[cur][rnd() % 2]);
            CHECK(!e, "sync %d", e);
            break;
        case 12:
            if (rnd() % 32) break;
            if (cur == 0) {
                e = cuDevicePrimaryCtxReset(dev);
                CHECK(!e, "reset %d", e);
                ctx_gone(0);
                cuDevicePrimaryCtxRetain(&ctx[0], dev);
                cuCtxSetCurrent(ctx[0]);
                cuStreamCreate(&streams[0][0], 0); cuStreamCreate(&streams[0][1], CU_STREAM_NON_BLOCKING);
            } else {
                int c = cur;
                e = cuCtxDestroy(ctx[c]);
                CHECK(!e, "destroy %d", e);
                ctx_gone(c);
                cuCtxCreate_v2(&ctx[c], 0, dev);
                cuStreamCreate(&streams[c][0], 0); cuStreamCreate(&streams[c][1], CU_STREAM_NON_BLOCKING);
            }
            break;
        default: {
            /* free a random live block of the current context properly */
            int i = rnd() % MAXB;
            if (!b[i].p || b[i].ctx != cur) break;
            e = b[i].kind == 2 && b[i].ctx >= 0 ? cuMemFreeAsync(b[i].p, b[i].s) : cuMemFree(b[i].p);
            CHECK(!e, "free live kind %d: %d", b[i].kind, e);
            drop(i);
        }
        }
    }
    for (int i = 0; i < MAXB; i++) if (b[i].p) verify(i);
    printf("seed %u: %ld ops, %d failures, driver peak %llu of cap %zu\n", seed0, ops, failures, simcuda_device_peak_all(0), cap);
    return failures != 0;
}
