/* simcuda contexts: cuInit, devices, contexts (created and primary), the per-thread context stack.
 *
 * Context handles point at sim_ctx_t records that are never freed and are kept in a registry, so a
 * destroyed or foreign handle is recognised (CUDA_ERROR_INVALID_CONTEXT) instead of being
 * dereferenced blindly. Destroying a context frees its memory, as the real driver does, which is
 * what lets a test see that the shim drops its arena with the context. Streams are sim_stream.c's.
 * Destroying a context (cuCtxDestroy, the last cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxReset)
 * drains its streams: it waits for their queued work, never discards it, then frees the memory and
 * invalidates the streams. cuCtxDestroy's documentation says it "destroys and cleans up all
 * resources associated with the context" (streams, events, allocations) and leaves open what
 * becomes of queued work; the real driver synchronises the context first, and so does this one, so
 * no queued operation outlives the memory it writes.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_STACK_DEPTH 32

static int sim_inited;
static sim_ctx_t *sim_ctxs;                      /* registry, under sim_lock */
static sim_ctx_t sim_primary[SIM_MAX_DEVICES];   /* one primary context per device */
static __thread sim_ctx_t *tls_stack[SIM_STACK_DEPTH];
static __thread int tls_depth;

CUresult sim_check_init(void)
{
    sim_setup();
    return __atomic_load_n(&sim_inited, __ATOMIC_ACQUIRE) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

int sim_ctx_known_locked(const sim_ctx_t *c)
{
    for (int d = 0; d < sim_cfg.devices; d++)
        if (c == &sim_primary[d])
            return 1;
    for (const sim_ctx_t *p = sim_ctxs; p; p = p->next)
        if (p == c)
            return 1;
    return 0;
}

/* The calling thread's current context, for the calls that need one. None: CUDA_ERROR_INVALID_CONTEXT.
 * One that is no longer alive (destroyed by another thread, where it stays current, or a primary
 * context released to its end or never retained): CUDA_ERROR_CONTEXT_IS_DESTROYED, as cuda.h says
 * of that code ("the context current to the calling thread has been destroyed using cuCtxDestroy,
 * or is a primary context which has not yet been initialized") and cuCtxDestroy's reference of
 * the other threads ("attempting to access ctx from those threads will result in the error
 * CUDA_ERROR_CONTEXT_IS_DESTROYED"). It answered CUDA_ERROR_INVALID_CONTEXT until 2026-12-06. */
CUresult sim_current(sim_ctx_t **out)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (tls_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&sim_lock);
    int alive = tls_stack[tls_depth - 1]->alive;
    pthread_mutex_unlock(&sim_lock);
    if (!alive)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = tls_stack[tls_depth - 1];
    return CUDA_SUCCESS;
}

unsigned long long sim_ctx_overhead_locked(int dev)
{
    unsigned long long n = 0;
    for (const sim_ctx_t *p = sim_ctxs; p; p = p->next)
        n += p->alive && p->dev == dev;
    n += sim_primary[dev].alive;
    return n * sim_cfg.ctx_overhead;
}

CUresult cuInit(unsigned int flags)
{
    SIM_ENTER(cuInit);
    sim_setup();
    if (sim_cfg.bad)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    for (int d = 0; d < sim_cfg.devices; d++) {
        sim_primary[d].dev = d;
        sim_primary[d].primary = 1;
    }
    __atomic_store_n(&sim_inited, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version)
{
    SIM_ENTER(cuDriverGetVersion);
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = SIM_DRIVER_VERSION; /* works before cuInit, like the real one */
    return CUDA_SUCCESS;
}

/* ---- devices ---- */

static CUresult sim_check_dev(CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    return (dev >= 0 && dev < sim_cfg.devices) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDeviceGetCount(int *count)
{
    SIM_ENTER(cuDeviceGetCount);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = sim_cfg.devices;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    SIM_ENTER(cuDeviceGet);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= sim_cfg.devices)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SIM_ENTER(cuDeviceGetName);
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "simcuda device %d", (int)dev);
    return CUDA_SUCCESS;
}

/* 64 well-mixed bits (splitmix64's finaliser): nearby inputs give unrelated outputs. */
static unsigned long long sim_mix(unsigned long long x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A device's UUID depends on nothing but its ordinal and SIMCUDA_UUID_SEED, so every process (and
 * the simulated NVML) sees the same one, as with a real GPU. Shaped as a random (version 4) UUID. */
void sim_device_uuid(int dev, unsigned char out[16])
{
    unsigned long long hi = sim_mix(sim_cfg.uuid_seed ^ (unsigned long long)dev);
    unsigned long long lo = sim_mix(hi ^ 0x5157c0da5157c0daULL);
    for (int i = 0; i < 8; i++) {
        out[i] = (unsigned char)(hi >> (56 - 8 * i));
        out[8 + i] = (unsigned char)(lo >> (56 - 8 * i));
    }
    out[6] = (unsigned char)((out[6] & 0x0f) | 0x40);
    out[8] = (unsigned char)((out[8] & 0x3f) | 0x80);
}

static CUresult sim_uuid(CUuuid *uuid, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    sim_device_uuid(dev, (unsigned char *)uuid->bytes);
    return CUDA_SUCCESS;
}

/* v1 (CUDA 9.2) and v2 (11.4) differ on MIG instances only, which this driver has none of. */
SIM_WRAP(cuDeviceGetUuid, sim_uuid, (CUuuid *uuid, CUdevice dev), (uuid, dev))
SIM_WRAP(cuDeviceGetUuid_v2, sim_uuid, (CUuuid *uuid, CUdevice dev), (uuid, dev))

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SIM_ENTER(cuDeviceTotalMem_v2);
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)sim_cfg.total_mem;
    return CUDA_SUCCESS;
}

/* A Hopper-like device: what frameworks ask for first. Other valid attributes read 0. */
static int sim_attribute(CUdevice_attribute a, CUdevice dev)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50331648;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return (int)dev + 1;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return !sim_cfg.no_vmm;
    /* as an H100 answers; cuMemCreate's gpuDirectRDMACapable is remembered (sim_vmm.c) */
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: return !sim_cfg.no_vmm;
    /* cuMemExportToShareableHandle's POSIX descriptors (sim_vmm.c); no fabric or Windows handles */
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return !sim_cfg.no_vmm;
    default: return 0;
    }
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    SIM_ENTER(cuDeviceGetAttribute);
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = sim_attribute(attrib, dev);
    return CUDA_SUCCESS;
}

/* ---- the per-thread context stack ---- */

static CUresult sim_push(sim_ctx_t *c)
{
    if (tls_depth == SIM_STACK_DEPTH)
        return CUDA_ERROR_OUT_OF_MEMORY;
    tls_stack[tls_depth++] = c;
    return CUDA_SUCCESS;
}

/* Drops every entry for c from this thread's stack (the destroyed context is popped). */
static void sim_unstack(const sim_ctx_t *c)
{
    int j = 0;
    for (int i = 0; i < tls_depth; i++)
        if (tls_stack[i] != c)
            tls_stack[j++] = tls_stack[i];
    tls_depth = j;
}

/* Validates a handle passed in by the caller: ours and alive. */
static CUresult sim_ctx_arg(CUcontext ctx, sim_ctx_t **out)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_ctx_t *c = (sim_ctx_t *)ctx;
    pthread_mutex_lock(&sim_lock);
    int known = c && sim_ctx_known_locked(c), ok = known && c->alive;
    if (known && !ok && !c->primary)
        SIM_COUNT(dead_context_calls);
    pthread_mutex_unlock(&sim_lock);
    if (!ok)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    SIM_ENTER(cuCtxSetCurrent);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx) {
        if (tls_depth > 0)
            tls_depth--;
        return CUDA_SUCCESS;
    }
    sim_ctx_t *c;
    if ((r = sim_ctx_arg(ctx, &c)) != CUDA_SUCCESS)
        return r;
    if (tls_depth == 0)
        return sim_push(c);
    tls_stack[tls_depth - 1] = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    SIM_ENTER(cuCtxGetCurrent);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = tls_depth ? (CUcontext)tls_stack[tls_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

static CUresult sim_ctx_push(CUcontext ctx)
{
    sim_ctx_t *c;
    CUresult r = sim_ctx_arg(ctx, &c);
    return r != CUDA_SUCCESS ? r : sim_push(c);
}

static CUresult sim_ctx_pop(CUcontext *pctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (tls_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_ctx_t *c = tls_stack[--tls_depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    SIM_ENTER(cuCtxGetDevice);
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev;
    return CUDA_SUCCESS;
}

/* Waits for the work queued on every stream of the context, created and default ones. */
CUresult cuCtxSynchronize(void)
{
    SIM_ENTER(cuCtxSynchronize);
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    sim_hold_ctx_sync(r == CUDA_SUCCESS ? c : NULL);
    if (r == CUDA_SUCCESS && sim_ctx_capture_check(c, NULL))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* a stream of c is capturing (sim_stream.c) */
    if (r == CUDA_SUCCESS) {
        sim_streams_drain_ctx(c);
        sim_pools_settle();
    }
    return r;
}

/* ---- created contexts ---- */

/* Makes a context on dev, takes its overhead from the device total, pushes it. */
static CUresult sim_ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (tls_depth == SIM_STACK_DEPTH)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&sim_lock);
    sim_ctx_t *c = sim_ctx_charge_locked(dev) == 0 ? calloc(1, sizeof *c) : NULL;
    if (c) {
        *c = (sim_ctx_t){.dev = dev, .alive = 1, .flags = flags, .next = sim_ctxs};
        sim_ctxs = c;
    }
    sim_shared_sync_locked();
    pthread_mutex_unlock(&sim_lock);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    SIM_COUNT(ctx_creates);
    *pctx = (CUcontext)c;
    return sim_push(c);
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    SIM_ENTER(cuCtxCreate_v2);
    return sim_ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    SIM_ENTER(cuCtxCreate_v3);
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return sim_check_init() != CUDA_SUCCESS ? CUDA_ERROR_NOT_INITIALIZED : CUDA_ERROR_INVALID_VALUE;
    return sim_ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
    SIM_ENTER(cuCtxCreate_v4);
    (void)params; /* affinity and CIG parameters have no meaning on host memory */
    return sim_ctx_create(pctx, flags, dev);
}

static CUresult sim_ctx_destroy(CUcontext ctx)
{
    sim_ctx_t *c;
    CUresult r = sim_ctx_arg(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    if (c->primary)
        return CUDA_ERROR_INVALID_CONTEXT; /* primary contexts go through Release/Reset */
    sim_streams_drain_ctx(c);
    sim_streams_forget_ctx(c);
    sim_hold_ctx_teardown();
    pthread_mutex_lock(&sim_lock);
    sim_free_ctx_memory_locked(c);
    c->alive = 0;
    sim_shared_sync_locked();
    pthread_mutex_unlock(&sim_lock);
    sim_unstack(c);
    SIM_COUNT(ctx_destroys);
    return CUDA_SUCCESS;
}

/* ---- primary contexts ---- */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SIM_COUNT(primary_retains);
    SIM_ENTER(cuDevicePrimaryCtxRetain);
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    sim_ctx_t *c = &sim_primary[dev];
    if (!c->alive && sim_ctx_charge_locked(dev) != 0) {
        pthread_mutex_unlock(&sim_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->refcount++;
    c->alive = 1;
    sim_shared_sync_locked();
    pthread_mutex_unlock(&sim_lock);
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

static CUresult sim_primary_release(CUdevice dev)
{
    SIM_COUNT(primary_releases);
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    sim_ctx_t *c = &sim_primary[dev];
    pthread_mutex_lock(&sim_lock);
    int last = c->refcount == 1;
    pthread_mutex_unlock(&sim_lock);
    if (last) { /* the context goes with this release: its queued work first */
        sim_streams_drain_ctx(c);
        sim_streams_forget_ctx(c);
        sim_hold_ctx_teardown();
    }
    pthread_mutex_lock(&sim_lock);
    if (c->refcount == 0) {
        pthread_mutex_unlock(&sim_lock);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (--c->refcount == 0) {
        sim_free_ctx_memory_locked(c);
        c->alive = 0;
        sim_shared_sync_locked();
    }
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

static CUresult sim_primary_reset(CUdevice dev)
{
    SIM_COUNT(primary_resets);
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    sim_streams_drain_ctx(&sim_primary[dev]);
    sim_streams_forget_ctx(&sim_primary[dev]);
    sim_hold_ctx_teardown();
    pthread_mutex_lock(&sim_lock);
    sim_free_ctx_memory_locked(&sim_primary[dev]);
    sim_primary[dev].flags = 0;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    SIM_ENTER(cuDevicePrimaryCtxGetState);
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    *flags = sim_primary[dev].flags;
    *active = sim_primary[dev].alive;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

static CUresult sim_primary_set_flags(CUdevice dev, unsigned int flags)
{
    CUresult r = sim_check_dev(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_lock);
    sim_primary[dev].flags = flags;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

/* ---- variants: the exported names over one implementation each ----
 * The runtime requests cuDevicePrimaryCtxRelease/Reset at version 7000, i.e. the v1 symbols, and
 * cuCtxGetDevice/cuCtxSynchronize at 13000 (the _v2 that take a context). Each is its own function,
 * so cuGetProcAddress answers with a distinct address per variant, as the real driver does, and each
 * counts as its own entry point for SIMCUDA_FAIL (a variant never calls another exported name). */

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    SIM_ENTER(cuCtxCreate);
    return sim_ctx_create(pctx, flags, dev);
}

/* The deprecated usage count: cuCtxAttach adds one to the current context's (created as one) and
 * passes the context back; cuCtxDetach takes one off and destroys the context when none is left,
 * as the real driver does. cuCtxDestroy destroys it whatever the count. */
CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
    SIM_ENTER(cuCtxAttach);
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx || flags)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    c->attached++;
    pthread_mutex_unlock(&sim_lock);
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

static CUresult sim_ctx_detach(CUcontext ctx)
{
    sim_ctx_t *c;
    CUresult r = sim_ctx_arg(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_lock);
    int more = c->attached > 0;
    if (more)
        c->attached--;
    pthread_mutex_unlock(&sim_lock);
    return more ? CUDA_SUCCESS : sim_ctx_destroy(ctx);
}

SIM_WRAP(cuCtxDestroy, sim_ctx_destroy, (CUcontext ctx), (ctx))
SIM_WRAP(cuCtxDestroy_v2, sim_ctx_destroy, (CUcontext ctx), (ctx))
SIM_WRAP(cuCtxDetach, sim_ctx_detach, (CUcontext ctx), (ctx))
SIM_WRAP(cuCtxPushCurrent, sim_ctx_push, (CUcontext ctx), (ctx))
SIM_WRAP(cuCtxPushCurrent_v2, sim_ctx_push, (CUcontext ctx), (ctx))
SIM_WRAP(cuCtxPopCurrent, sim_ctx_pop, (CUcontext *pctx), (pctx))
SIM_WRAP(cuCtxPopCurrent_v2, sim_ctx_pop, (CUcontext *pctx), (pctx))
SIM_WRAP(cuDevicePrimaryCtxRelease, sim_primary_release, (CUdevice dev), (dev))
SIM_WRAP(cuDevicePrimaryCtxRelease_v2, sim_primary_release, (CUdevice dev), (dev))
SIM_WRAP(cuDevicePrimaryCtxReset, sim_primary_reset, (CUdevice dev), (dev))
SIM_WRAP(cuDevicePrimaryCtxReset_v2, sim_primary_reset, (CUdevice dev), (dev))
SIM_WRAP(cuDevicePrimaryCtxSetFlags, sim_primary_set_flags, (CUdevice dev, unsigned int flags), (dev, flags))
SIM_WRAP(cuDevicePrimaryCtxSetFlags_v2, sim_primary_set_flags, (CUdevice dev, unsigned int flags), (dev, flags))

/* ctx NULL means the current context. */
static CUresult sim_ctx_or_current(CUcontext ctx, sim_ctx_t **out)
{
    return ctx ? sim_ctx_arg(ctx, out) : sim_current(out);
}

/* A live context's API version (3020, as the real driver answers for contexts made by cuCtxCreate);
 * CUDA_ERROR_INVALID_CONTEXT once it is destroyed. */
CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    SIM_ENTER(cuCtxGetApiVersion);
    sim_ctx_t *c;
    CUresult r = sim_ctx_or_current(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 3020;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    SIM_ENTER(cuCtxGetDevice_v2);
    sim_ctx_t *c;
    CUresult r = sim_ctx_or_current(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    SIM_ENTER(cuCtxSynchronize_v2);
    sim_ctx_t *c;
    CUresult r = sim_ctx_or_current(ctx, &c);
    sim_hold_ctx_sync(r == CUDA_SUCCESS ? c : NULL);
    if (r == CUDA_SUCCESS && sim_ctx_capture_check(c, NULL))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (r == CUDA_SUCCESS) {
        sim_streams_drain_ctx(c);
        sim_pools_settle();
    }
    return r;
}

/* ---- peer access ----
 * "on success all allocations from peerContext will immediately be accessible by the current
 * context" (cuCtxEnablePeerAccess); CUDA_ERROR_INVALID_DEVICE when both are on one device,
 * CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED the second time, flags must be 0; cuCtxDisablePeerAccess
 * of one not enabled is CUDA_ERROR_PEER_ACCESS_NOT_ENABLED. cuMemCreate memory belongs to no
 * context and needs cuMemSetAccess per device instead (sim_vmm.c keeps access per device). The sim
 * lets every device reach ordinary memory with or without it. Every pair of devices can. */
static CUresult sim_peer(CUcontext peer, unsigned flags, int enable)
{
    sim_ctx_t *c, *p;
    CUresult r = sim_current(&c);
    if (r == CUDA_SUCCESS)
        r = sim_ctx_arg(peer, &p);
    if (r != CUDA_SUCCESS)
        return r;
    if (enable && flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->dev == c->dev)
        return enable ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    pthread_mutex_lock(&sim_lock);
    unsigned i = 0;
    while (i < c->peers_n && c->peers[i] != p)
        i++;
    if (enable && i < c->peers_n)
        r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    else if (enable && c->peers_n == sizeof c->peers / sizeof c->peers[0])
        r = CUDA_ERROR_TOO_MANY_PEERS;
    else if (enable)
        c->peers[c->peers_n++] = p;
    else if (i == c->peers_n)
        r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    else
        c->peers[i] = c->peers[--c->peers_n];
    pthread_mutex_unlock(&sim_lock);
    return r;
}

CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    SIM_ENTER(cuCtxEnablePeerAccess);
    return sim_peer(peerContext, Flags, 1);
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    SIM_ENTER(cuCtxDisablePeerAccess);
    return sim_peer(peerContext, 0, 0);
}

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    SIM_ENTER(cuDeviceCanAccessPeer);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= sim_cfg.devices || peerDev < 0 || peerDev >= sim_cfg.devices)
        return CUDA_ERROR_INVALID_DEVICE;
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}
