/* Findings left open by outside checks of the shim, fixed by helper-118 (2026-12-07): each a test
 * that failed before its fix. */
#include "preload_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An allocation that lets its context's lock go to wait for the device (cuMemFree's pending chunks,
 * synchronised before reuse) looked only at the state's `dead` when it took the lock again. Its
 * context A is destroyed while the wait is held inside the driver, and context B made on the same
 * device takes A's state (ga_ctx_reuse) and allocates: the waiting cuMemAlloc of A was served from
 * B's pool, a success in a destroyed context whose block B's pool and cap counted (B's statistics
 * showed an allocation B never made). Now it is refused as the destroyed context's
 * (CUDA_ERROR_CONTEXT_IS_DESTROYED), and B's pool holds B's block alone. Exit 0 when so; 10 + the
 * code the waiting call answered otherwise. */
static CUcontext o118_a;
static CUresult o118_r = (CUresult)-1;
static CUdeviceptr o118_p;

static void *o118_alloc(void *arg)
{
    (void)arg;
    if (cuCtxSetCurrent(o118_a) != CUDA_SUCCESS)
        return NULL;
    o118_r = cuMemAlloc(&o118_p, MiB); /* waits for A's pending free: held in cuCtxSynchronize */
    return NULL;
}

static void reused_state_child(void *arg)
{
    (void)arg;
    CUdevice d0;
    CUcontext p0, b;
    CUdeviceptr q;
    unsigned gate;
    if (cuInit(0) || cuDeviceGet(&d0, 0) || cuDevicePrimaryCtxRetain(&p0, d0) || cuCtxSetCurrent(p0) ||
        cuMemAlloc(&q, MiB) || cuMemFree(q) || /* the first context: it keeps the level, never reused */
        cuCtxCreate(&o118_a, NULL, 0, d0) || cuMemAlloc(&q, MiB) || cuMemFree(q) || /* pending in A */
        simcuda_hold_next_ctx_sync(NULL, &gate))
        exit(2);
    pthread_t t;
    if (pthread_create(&t, NULL, o118_alloc, NULL))
        exit(3);
    while (!simcuda_ctx_sync_held(gate))
        sched_yield(); /* A's lock let go, its allocation waiting inside the driver */
    if (cuCtxDestroy(o118_a) || cuCtxCreate(&b, NULL, 0, d0) || cuMemAlloc(&q, MiB))
        exit(4); /* B: A's state, reused, with a pool of its own */
    unsigned long long before = simcuda_device_bytes_in_use(0);
    simcuda_gate_open(gate);
    pthread_join(t, NULL);
    if (o118_r != CUDA_ERROR_CONTEXT_IS_DESTROYED) {
        fprintf(stderr, "the waiting cuMemAlloc of destroyed context A answered %d (a block %#llx "
                "of B's pool: %s)\n", (int)o118_r, (unsigned long long)o118_p,
                o118_r == CUDA_SUCCESS ? "yes" : "no");
        exit(10 + (int)o118_r);
    }
    if (cuMemFree(q) || simcuda_device_bytes_in_use(0) != before || cuCtxDestroy(b))
        exit(5);
    exit(0);
}

START_TEST(realloc_after_wait_not_in_a_reused_state)
{
    static const char *const modes[] = PT_POOL_MODES;
    char err[4096];
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        pt_env(modes[m], "GPUARENA_LIMIT=256MiB", "GPUARENA_LOG=error", NULL);
        int st = pt_run_child(reused_state_child, NULL, err, sizeof err);
        ck_assert_msg(st == 0, "%s: exit %d: %s", modes[m], st, err);
    }
}
END_TEST

/* The trim before an out-of-memory waits for another context's pending frees with that context's
 * lock let go (sync.c, ga_ctx_trim_pending), and took the lock again looking only at `dead`: the
 * context A destroyed meanwhile and its state taken by a new context B, B's own pending free went
 * back to B's pool as if the wait had passed it (the mark's count and generation matched B's fresh
 * list), so B's next allocation reused the block with no synchronisation while B's kernels could
 * still use it. The primary context C allocates past the cap, its trim waits in C's
 * cuCtxSynchronize (held inside the driver) after A's; meanwhile A is destroyed, B made on A's
 * state, and B frees a block. Exit 10: B's next allocation made no synchronisation. */
static CUcontext o118_c;

static void *o118_alloc_c(void *arg)
{
    (void)arg;
    CUdeviceptr p;
    if (cuCtxSetCurrent(o118_c) == CUDA_SUCCESS && cuMemAlloc(&p, 32 * MiB) == CUDA_SUCCESS)
        cuMemFree(p);
    return NULL;
}

static void trim_reused_child(void *arg)
{
    (void)arg;
    alarm(60);
    CUdevice d0;
    CUcontext a, b;
    CUdeviceptr keep, q, x, y;
    unsigned gate;
    if (cuInit(0) || cuDeviceGet(&d0, 0) || cuDevicePrimaryCtxRetain(&o118_c, d0) ||
        cuCtxSetCurrent(o118_c) || cuMemAlloc(&keep, 8 * MiB))
        exit(2); /* C: the first context, with a live block (its pool is not idle) */
    if (cuCtxCreate(&a, NULL, 0, d0) || cuMemAlloc(&q, 40 * MiB) || cuMemFree(q))
        exit(2); /* A: 40 MiB pending */
    if (simcuda_hold_next_ctx_sync((struct CUctx_st *)o118_c, &gate))
        exit(2);
    pthread_t t;
    if (pthread_create(&t, NULL, o118_alloc_c, NULL))
        exit(3);
    while (!simcuda_ctx_sync_held(gate))
        sched_yield(); /* C's 32 MiB past the cap: the trim waited for A, now for C */
    if (cuCtxDestroy(a) || cuCtxCreate(&b, NULL, 0, d0) || cuMemAlloc(&x, 8 * MiB) || cuMemFree(x))
        exit(4); /* B on A's state, one free pending */
    simcuda_gate_open(gate);
    pthread_join(t, NULL);
    unsigned long long s1 = simcuda_entry_calls("cuCtxSynchronize");
    if (cuMemAlloc(&y, 8 * MiB))
        exit(5);
    unsigned long long s2 = simcuda_entry_calls("cuCtxSynchronize");
    if (s2 == s1) {
        fprintf(stderr, "B's allocation after its free made no synchronisation (block %s)\n",
                y == x ? "reused" : "not reused");
        exit(10);
    }
    exit(0);
}

START_TEST(trim_wait_leaves_a_reused_state_pending)
{
    static const char *const modes[] = {"GPUARENA_MODE=grow", "GPUARENA_MODE=vmm"};
    char err[4096];
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        pt_env(modes[m], "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB", "GPUARENA_LOG=error", NULL);
        int st = pt_run_child(trim_reused_child, NULL, err, sizeof err);
        ck_assert_msg(st == 0, "%s: exit %d: %s", modes[m], st, err);
    }
}
END_TEST

/* A handle exported (cuMemExportToShareableHandle, a POSIX descriptor) and imported again by the
 * program that made it is the same allocation, held by the driver until both references are
 * released: the program's release of the handle it made gave its bytes back to the cap while the
 * import kept the memory, and the import mapped again counted nothing (an outside check's finding:
 * 32 MiB held beside a 40 MiB block under a 64 MiB cap). Now the import is one more reference. */
static void import_child(void *arg)
{
    (void)arg;
    pt_start();
    size_t size = 32 * MiB;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h, h2;
    CUdeviceptr va, p;
    int fd = -1;
    if (cuMemCreate(&h, size, &prop, 0) ||
        cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ||
        cuMemImportFromShareableHandle(&h2, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
        cuMemRelease(h))
        exit(2);
    close(fd);
    if (simcuda_device_bytes_in_use(0) != size)
        exit(3); /* the import holds the memory */
    if (cuMemAlloc(&p, 40 * MiB) != CUDA_ERROR_OUT_OF_MEMORY) {
        fprintf(stderr, "a 40 MiB block beside the imported 32 MiB handle under a 64 MiB cap was "
                "not refused: the device holds %llu bytes\n", simcuda_device_bytes_in_use(0));
        exit(4);
    }
    if (cuMemAddressReserve(&va, size, 0, 0, 0) || cuMemMap(va, size, 0, h2, 0) || cuMemRelease(h2))
        exit(5); /* mapped, then released: alive until unmapped */
    if (cuMemAlloc(&p, 40 * MiB) != CUDA_ERROR_OUT_OF_MEMORY)
        exit(6);
    if (cuMemUnmap(va, size) || cuMemAddressFree(va, size) || simcuda_device_bytes_in_use(0) != 0)
        exit(7);
    if (cuMemAlloc(&p, 40 * MiB) || cuMemFree(p))
        exit(8); /* both references gone: the cap has the room again */
    exit(0);
}

START_TEST(imported_own_handle_counted)
{
    char err[4096];
    pt_env("GPUARENA_MODE=platform", "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", NULL);
    int st = pt_run_child(import_child, NULL, err, sizeof err);
    ck_assert_msg(st == 0, "exit %d: %s", st, err);
}
END_TEST

/* The simulated driver's export and import: a descriptor only for a handle made exportable, other
 * handle types refused as on Linux, a descriptor of no handle refused. */
START_TEST(sim_export_import_checked)
{
    pt_env("GPUARENA_MODE=platform", "GPUARENA_LOG=error", NULL);
    pt_start();
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h, h2;
    int fd = -1;
    ck_assert_int_eq(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                     CUDA_ERROR_INVALID_VALUE); /* not made exportable */
    ck_assert_int_eq(cuMemRelease(h), CUDA_SUCCESS);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    ck_assert_int_eq(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_FABRIC, 0),
                     CUDA_ERROR_NOT_SUPPORTED);
    ck_assert_int_eq(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1),
                     CUDA_ERROR_INVALID_VALUE);
    ck_assert_int_eq(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                     CUDA_SUCCESS);
    ck_assert_int_eq(cuMemImportFromShareableHandle(&h2, (void *)(intptr_t)0,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                     CUDA_ERROR_INVALID_VALUE); /* stdin: no handle's */
    ck_assert_int_eq(cuMemImportFromShareableHandle(&h2, (void *)(intptr_t)fd,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                     CUDA_SUCCESS);
    ck_assert_uint_eq(h2, h);
    close(fd);
    ck_assert_int_eq(cuMemRelease(h), CUDA_SUCCESS);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(0), 2 * MiB);
    ck_assert_int_eq(cuMemRelease(h2), CUDA_SUCCESS);
    ck_assert_uint_eq(simcuda_device_bytes_in_use(0), 0);
}
END_TEST

/* The primary context after cuDevicePrimaryCtxReset and a retain, used without being made current
 * again (it stays current in the thread that reset it): its state went with the reset, and the
 * shim did not know the context again until it allocated, freed or was made current, so a freed
 * block of another context whose kernels it ran was handed out again while its kernel still wrote
 * it. B (the primary context) is set current, reset and retained again; a gated kernel on a stream
 * made in B writes A's block; A frees it and allocates again, which must wait for B's kernel: the
 * gate opens once the driver has seen two synchronisations (A's, then B's). Exit 10: the new
 * block read B's kernel's bytes. */
typedef struct o118_opener {
    unsigned gate;
    unsigned long long calls;
    _Atomic int stop;
} o118_opener_t;

static void *o118_open_at_sync(void *arg)
{
    o118_opener_t *o = arg;
    while (!atomic_load(&o->stop) && simcuda_entry_calls("cuCtxSynchronize") < o->calls)
        sched_yield();
    simcuda_gate_open(o->gate);
    return NULL;
}

static int o118_all(CUdeviceptr p, size_t n, unsigned char want)
{
    static unsigned char buf[1 << 20];
    for (size_t off = 0; off < n; off += sizeof buf) {
        size_t k = n - off < sizeof buf ? n - off : sizeof buf;
        if (cuMemcpyDtoH(buf, p + off, k))
            return 0;
        for (size_t i = 0; i < k; i++)
            if (buf[i] != want)
                return 0;
    }
    return 1;
}

static void reset_kernel_ctx_child(void *arg)
{
    (void)arg;
    alarm(60);
    size_t size = 40 * MiB;
    CUdevice dev;
    CUcontext a, b, b2;
    CUstream sb;
    CUdeviceptr p, q;
    o118_opener_t o = {.stop = 0};
    pthread_t t;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&a, NULL, 0, dev) || cuMemAlloc(&p, size))
        exit(2);
    if (cuDevicePrimaryCtxRetain(&b, dev) || cuCtxSetCurrent(b) || cuDevicePrimaryCtxReset(dev) ||
        cuDevicePrimaryCtxRetain(&b2, dev) || b2 != b)
        exit(2); /* B is current still, and retained again: no cuCtxSetCurrent after the reset */
    if (cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING) || simcuda_gate(sb, &o.gate) ||
        simcuda_launch(sb, p, 0xAA, size, 0) || cuCtxSetCurrent(a))
        exit(3);
    o.calls = simcuda_entry_calls("cuCtxSynchronize") + 2;
    if (pthread_create(&t, NULL, o118_open_at_sync, &o))
        exit(3);
    if (cuMemFree(p) || cuMemAlloc(&q, size) || cuMemsetD8(q, 0x55, size))
        exit(4);
    atomic_store(&o.stop, 1);
    pthread_join(t, NULL);
    if (cuCtxSetCurrent(b) || cuStreamSynchronize(sb) || cuCtxSetCurrent(a))
        exit(5);
    exit(o118_all(q, size, 0x55) ? 0 : 10);
}

START_TEST(primary_after_reset_and_retain_waited_for)
{
    static const char *const modes[] = PT_POOL_MODES;
    static const char *const syncs[] = {"GPUARENA_FREE_SYNC=deferred", "GPUARENA_FREE_SYNC=lazy",
                                        "GPUARENA_FREE_SYNC=device"};
    char err[4096];
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++)
        for (size_t y = 0; y < sizeof syncs / sizeof *syncs; y++) {
            pt_env(modes[m], syncs[y], "GPUARENA_LIMIT=64MiB", "SIMCUDA_TOTAL_MEM=1GiB",
                   "GPUARENA_LOG=error", NULL);
            int st = pt_run_child(reset_kernel_ctx_child, NULL, err, sizeof err);
            ck_assert_msg(st == 0, "%s %s: exit %d (10: the new block read the kernel of the primary "
                          "context reset and retained again); %s", modes[m], syncs[y], st, err);
        }
}
END_TEST

/* The allocations themselves through the primary context after a reset and a retain (no
 * cuCtxSetCurrent after them; the reset made from this thread or another) are counted under the
 * cap as before the reset: 1 MiB blocks of cuMemAlloc, then of cuMemAllocManaged, fill the 64 MiB
 * cap to the block and the driver never holds more (this passed before the fix above: kept as the
 * finding's own words). Exit 10 + kind when a kind passed the cap or stopped short of it. */
static CUdevice o118_dev;

static void *o118_reset(void *arg)
{
    (void)arg;
    CUcontext again;
    if (cuDevicePrimaryCtxReset(o118_dev) || cuDevicePrimaryCtxRetain(&again, o118_dev))
        return (void *)1;
    return NULL;
}

static void reset_counted_child(void *arg)
{
    int elsewhere = (int)(intptr_t)arg;
    CUcontext p0, again;
    CUdeviceptr q;
    if (cuInit(0) || cuDeviceGet(&o118_dev, 0) || cuDevicePrimaryCtxRetain(&p0, o118_dev) ||
        cuCtxSetCurrent(p0) || cuMemAlloc(&q, MiB))
        exit(2);
    if (elsewhere) {
        pthread_t t;
        void *ret = (void *)1;
        if (pthread_create(&t, NULL, o118_reset, NULL) || pthread_join(t, &ret) || ret)
            exit(3);
    } else if (cuDevicePrimaryCtxReset(o118_dev) || cuDevicePrimaryCtxRetain(&again, o118_dev)) {
        exit(3);
    }
    static CUdeviceptr blk[200];
    for (int kind = 0; kind < 2; kind++) {
        int n = 0;
        while (n < 200 && (kind ? cuMemAllocManaged(&blk[n], MiB, CU_MEM_ATTACH_GLOBAL)
                                : cuMemAlloc(&blk[n], MiB)) == CUDA_SUCCESS)
            n++;
        unsigned long long held = simcuda_device_bytes_in_use(0);
        if (n != 64 || held > 64 * MiB) {
            fprintf(stderr, "%s after the reset: %d blocks of 1 MiB under a 64 MiB cap, the driver "
                    "holds %llu bytes\n", kind ? "cuMemAllocManaged" : "cuMemAlloc", n, held);
            exit(10 + kind);
        }
        while (n > 0)
            if (cuMemFree(blk[--n]))
                exit(4);
    }
    exit(0);
}

START_TEST(primary_after_reset_and_retain_counted)
{
    static const char *const modes[] = PT_ALL_MODES;
    char err[4096];
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++)
        for (int elsewhere = 0; elsewhere < 2; elsewhere++) {
            pt_env(modes[m], "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", "GPUARENA_PREALLOCATE=false",
                   NULL);
            int st = pt_run_child(reset_counted_child, (void *)(intptr_t)elsewhere, err, sizeof err);
            ck_assert_msg(st == 0, "%s, reset from %s: exit %d: %s", modes[m],
                          elsewhere ? "another thread" : "the allocating thread", st, err);
        }
}
END_TEST

/* cuMemCreate with a bad prop answers the driver's own code whether or not the cap has room: each
 * row of the table is asked at 2 MiB (within the cap: the driver answers) and at 128 MiB (past the
 * 64 MiB cap: gpuarena answers before the driver is asked), and both must be the row's code. Handle
 * types outside cuda.h's bits, the Windows and fabric types, a compression type or usage bits
 * cuda.h does not define answered CUDA_ERROR_OUT_OF_MEMORY past the cap. Then 3,000 random props
 * (random bytes, half with plausible fields): never a crash, and past the cap the answer is the
 * one within it, or CUDA_ERROR_OUT_OF_MEMORY where the prop is good. */
typedef struct o118_prop_row {
    int type, loc_type, loc_id;
    unsigned handle_types, compression, usage;
    size_t extra; /* added to both sizes: a size off the granularity */
    CUresult want;
} o118_prop_row_t;

static const o118_prop_row_t o118_rows[] = {
    {0, 1, 0, 0, 0, 0, 0, CUDA_ERROR_INVALID_VALUE},        /* type invalid */
    {99, 1, 0, 0, 0, 0, 0, CUDA_ERROR_INVALID_VALUE},       /* type out of range */
    {1, 0, 0, 0, 0, 0, 0, CUDA_ERROR_INVALID_VALUE},        /* location invalid */
    {1, 2, 0, 0, 0, 0, 0, CUDA_ERROR_INVALID_VALUE},        /* host location: not served */
    {1, 99, 0, 0, 0, 0, 0, CUDA_ERROR_INVALID_VALUE},       /* location out of range */
    {1, 1, -1, 0, 0, 0, 0, CUDA_ERROR_INVALID_DEVICE},      /* no such device */
    {1, 1, 7, 0, 0, 0, 0, CUDA_ERROR_INVALID_DEVICE},
    {1, 1, 0x7fffffff, 0, 0, 0, 0, CUDA_ERROR_INVALID_DEVICE},
    {1, 1, 0, 0x10, 0, 0, 0, CUDA_ERROR_INVALID_VALUE},     /* no such handle type */
    {1, 1, 0, 0xffffffffu, 0, 0, 0, CUDA_ERROR_INVALID_VALUE},
    {1, 1, 0, 0x2, 0, 0, 0, CUDA_ERROR_NOT_SUPPORTED},      /* Windows handles on Linux */
    {1, 1, 0, 0x4, 0, 0, 0, CUDA_ERROR_NOT_SUPPORTED},
    {1, 1, 0, 0x8, 0, 0, 0, CUDA_ERROR_NOT_SUPPORTED},      /* fabric: the device has none */
    {1, 1, 0, 0, 2, 0, 0, CUDA_ERROR_INVALID_VALUE},        /* compression type */
    {1, 1, 0, 0, 0xff, 0, 0, CUDA_ERROR_INVALID_VALUE},
    {1, 1, 0, 0, 0, 4, 0, CUDA_ERROR_INVALID_VALUE},        /* usage bit */
    {1, 1, 0, 0, 0, 0, MiB, CUDA_ERROR_INVALID_VALUE},      /* size off the granularity */
    {1, 1, 0, 0, 0, 0, 1, CUDA_ERROR_INVALID_VALUE},
};

static void o118_fill(CUmemAllocationProp *p, const o118_prop_row_t *w)
{
    memset(p, 0, sizeof *p);
    p->type = (CUmemAllocationType)w->type;
    p->location.type = (CUmemLocationType)w->loc_type;
    p->location.id = w->loc_id;
    p->requestedHandleTypes = (CUmemAllocationHandleType)w->handle_types;
    p->allocFlags.compressionType = (unsigned char)w->compression;
    p->allocFlags.usage = (unsigned short)w->usage;
}

static CUresult o118_create(size_t size, const CUmemAllocationProp *p)
{
    CUmemGenericAllocationHandle h;
    CUresult r = cuMemCreate(&h, size, p, 0);
    if (r == CUDA_SUCCESS && cuMemRelease(h) != CUDA_SUCCESS)
        exit(60);
    return r;
}

static void bad_props_child(void *arg)
{
    (void)arg;
    pt_start();
    CUmemAllocationProp p;
    for (size_t i = 0; i < sizeof o118_rows / sizeof *o118_rows; i++) {
        const o118_prop_row_t *w = &o118_rows[i];
        o118_fill(&p, w);
        CUresult small = o118_create(2 * MiB + w->extra, &p), big = o118_create(128 * MiB + w->extra, &p);
        if (small != w->want || big != w->want) {
            fprintf(stderr, "row %zu: %d within the cap, %d past it, the driver's code is %d\n", i,
                    (int)small, (int)big, (int)w->want);
            exit(10);
        }
    }
    unsigned seed = 118;
    static const int ids[] = {0, 1, 7, -1, 16, 0x7fffffff};
    for (int i = 0; i < 3000; i++) {
        unsigned char *b = (unsigned char *)&p;
        for (size_t k = 0; k < sizeof p; k++)
            b[k] = (unsigned char)rand_r(&seed);
        if (rand_r(&seed) % 2) {
            p.type = (CUmemAllocationType)(rand_r(&seed) % 3);
            p.location.type = (CUmemLocationType)(rand_r(&seed) % 4);
            p.location.id = ids[rand_r(&seed) % 6];
            p.requestedHandleTypes = (CUmemAllocationHandleType)(rand_r(&seed) % 3 ? 0 : rand_r(&seed) % 17);
            p.allocFlags.compressionType = (unsigned char)(rand_r(&seed) % 3 ? 0 : rand_r(&seed) % 3);
            p.allocFlags.usage = (unsigned short)(rand_r(&seed) % 3 ? 0 : rand_r(&seed) % 5);
            p.win32HandleMetaData = NULL;
        }
        CUresult small = o118_create(2 * MiB, &p), big = o118_create(128 * MiB, &p);
        if (small == CUDA_SUCCESS ? big != CUDA_ERROR_OUT_OF_MEMORY : big != small) {
            fprintf(stderr, "random prop %d (type %d, location %d/%d, handle types %#x, compression "
                    "%u, usage %#x): %d within the cap, %d past it\n", i, (int)p.type,
                    (int)p.location.type, p.location.id, (unsigned)p.requestedHandleTypes,
                    p.allocFlags.compressionType, p.allocFlags.usage, (int)small, (int)big);
            exit(11);
        }
    }
    exit(0);
}

START_TEST(create_bad_props_get_driver_codes)
{
    static const char *const modes[] = PT_ALL_MODES;
    char err[4096];
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        pt_env(modes[m], "GPUARENA_LIMIT=64MiB", "GPUARENA_LOG=error", "SIMCUDA_DEVICES=2", NULL);
        int st = pt_run_child(bad_props_child, NULL, err, sizeof err);
        ck_assert_msg(st == 0, "%s: exit %d: %s", modes[m], st, err);
    }
}
END_TEST

TCase *pt_tcase_outside118(void)
{
    TCase *tc = tcase_create("outside118");
    tcase_add_test(tc, realloc_after_wait_not_in_a_reused_state);
    tcase_add_test(tc, trim_wait_leaves_a_reused_state_pending);
    tcase_add_test(tc, imported_own_handle_counted);
    tcase_add_test(tc, sim_export_import_checked);
    tcase_add_test(tc, primary_after_reset_and_retain_waited_for);
    tcase_add_test(tc, primary_after_reset_and_retain_counted);
    tcase_add_test(tc, create_bad_props_get_driver_codes);
    return tc;
}
