/* gpuarena backend: what a context's pool gets its memory from, the real driver under the cap.
 *
 * Every pool (allocator/ga_pool.h) takes memory only through these functions, so this is the one
 * place where the cap is enforced for pool memory: each reservation or mapping is committed
 * against the device's cap before the driver is asked, and given back when the driver refuses.
 *  - arena, grow, platform: reserve = cuMemAlloc_v2, release = cuMemFree_v2.
 *  - vmm: a virtual range = cuMemAddressReserve (aligned to the granularity), a granule of physical
 *    memory = cuMemCreate + cuMemMap + cuMemSetAccess (read/write for the context's device), its
 *    release = cuMemUnmap + cuMemRelease. The granularity is the driver's recommended one for the
 *    device (cuMemGetAllocationGranularity, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED). A mapping that
 *    fails half-way is undone before the pool hears of it: nothing stays half-mapped or leaks.
 * The pool calls these with its context's lock held (ga_ctx_t.lock), which also guards the
 * context's counters updated here. A context whose memory the driver already freed (driver_gone 1:
 * its primary context was released or reset) gives its regions back without calling the driver;
 * its VMM ranges and granules are still released through the driver, because VMM memory belongs
 * to the process, not to a context, and outlives it. In a forked child (driver_gone 2) nothing of
 * the parent's is touched.
 */
#include "shim.h"

#include <string.h>

/* The process's reserved level counts a reservation as the pools count it, in GA_ALIGN units: in
 * platform mode a block of the exact size asked is reserved, and counted exact here it left
 * reserved below in use, which is 512-rounded (an outside test, 2026-12-06). The cap counts it so
 * too, as gpuarena-replay's platform pool does under --limit: counted exact, 513-byte blocks under
 * a 1 MiB cap were 2,044, the statistics said 2 MiB reserved, and the replay refused from the
 * 1,025th (an outside check of issue 10, 2026-12-07; test platform_cap_in_512_byte_units). */
static int64_t be_units(size_t size)
{
    return (int64_t)(((uint64_t)size + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1));
}

static int be_reserve(void *p, size_t size, uintptr_t *base)
{
    ga_ctx_t *c = p;
    int grouped = ga_dev_commit(c->dev, (uint64_t)be_units(size)); /* 2: in a group */
    if (!grouped) {
        c->reserve_err = CUDA_ERROR_OUT_OF_MEMORY;
        return 1;
    }
    CUdeviceptr d = 0;
    int pushed = ga_ctx_enter(c->ctx);
    CUresult r = ga_real.cuMemAlloc_v2(&d, size);
    ga_ctx_leave(pushed);
    c->counts.driver_alloc_calls++;
    c->reserve_err = r;
    if (r != CUDA_SUCCESS) {
        ga_dev_refused(c->dev, (uint64_t)be_units(size));
        return 1;
    }
    if (grouped > 1)
        ga_dev_granted(c->dev, (uint64_t)be_units(size));
    ga_level_add(GA_LEVEL_RESERVED, be_units(size));
    *base = (uintptr_t)d;
    return 0;
}

/* The region is freed in its own context only: a context the driver no longer knows (gone by a
 * call gpuarena did not see) has no memory left to free, and cuMemFree_v2 in whatever context is
 * current would free that context's block at the same address (an outside test, 2026-12-06).
 * Bytes leave the cap only when the driver freed them: a refused cuMemFree_v2 (a sticky error, or
 * the context could not be made current) keeps them committed and the pool keeps the region or
 * block (1: ga_arena.h), tried again at its next release; before, they left the cap while the
 * driver held them (632 MiB under a 256 MiB cap, helper-47 F12; helper-49 F7). A context that is
 * going (its pool dropped in teardown.c, has_final set) is the exception: the driver frees its
 * memory with it. */
/* cuMemFree_v2 of base in ctx. When ctx cannot be pushed (the thread's context stack is full), it
 * is made current in place of the top one for the call and the top one put back (helper-49 F7);
 * a ctx the driver no longer knows answers CUDA_ERROR_CONTEXT_IS_DESTROYED: its memory went with
 * it, and nothing is freed. */
static CUresult be_free_in(CUcontext ctx, uintptr_t base)
{
    int pushed = ga_ctx_enter(ctx);
    CUcontext cur = NULL;
    CUresult r = ga_real.cuCtxGetCurrent(&cur);
    unsigned version = 0;
    if (r == CUDA_SUCCESS && cur == ctx) {
        r = ga_real.cuMemFree_v2((CUdeviceptr)base);
    } else if (r == CUDA_SUCCESS && ga_real.cuCtxGetApiVersion &&
               ga_real.cuCtxGetApiVersion(ctx, &version) == CUDA_ERROR_INVALID_CONTEXT) {
        r = CUDA_ERROR_CONTEXT_IS_DESTROYED;
    } else if (r == CUDA_SUCCESS) {
        r = ga_real.cuCtxSetCurrent ? ga_real.cuCtxSetCurrent(ctx) : CUDA_ERROR_INVALID_CONTEXT;
        if (r == CUDA_SUCCESS) {
            r = ga_real.cuMemFree_v2((CUdeviceptr)base);
            ga_real.cuCtxSetCurrent(cur);
        }
    }
    ga_ctx_leave(pushed);
    return r;
}

/* A block or region the driver freed by a path gpuarena did not see: a program's second cuMemFree
 * of a pointer that found no owner here (the block was not recorded yet) and went to the driver
 * just as another thread's allocation was given that address, freeing the new block; or the
 * driver's own function, called past the shim. The driver holds none of its bytes, so they leave
 * the cap (they stayed counted for good, and a platform block's address, handed out again by the
 * driver, failed every later allocation placed there as out of memory: helper-130). Said once. */
void ga_gone_said(uintptr_t base, size_t size, const char *how)
{
    static _Atomic int said;
    ga_log(atomic_exchange(&said, 1) ? GA_LOG_DEBUG : GA_LOG_WARN,
           "the driver no longer holds the %zu bytes gpuarena counted at %#llx (%s): they were "
           "freed by a path gpuarena did not see, most likely a second cuMemFree of a pointer "
           "racing another thread's allocation of the same address, which the driver then freed "
           "instead; they leave the cap; free each pointer once, after its last use (further "
           "cases: GPUARENA_LOG=debug)", size, (unsigned long long)base, how);
}

/* Whether the driver knows no allocation at base (its answer for a pointer it does not know). */
int ga_driver_unknown(uintptr_t base)
{
    CUcontext x = NULL;
    if (!ga_real.cuPointerGetAttribute)
        return 0;
    int nc = ga_nocancel_begin(); /* asked with a lock held (ga_nocancel_begin, ctx.c) */
    CUresult r = ga_real.cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)base);
    ga_nocancel_end(nc);
    return r == CUDA_ERROR_INVALID_VALUE;
}

/* platform (ga_pool_backend_t.forget): the driver gave base out again while the pool held it;
 * the context's lock is held (the pool's allocation). */
static void be_forget(void *p, uintptr_t base, size_t size)
{
    ga_ctx_t *c = p;
    ga_gone_said(base, size, "the driver gave the address out again");
    ga_ctx_level_add(c, -be_units(size));
    ga_level_add(GA_LEVEL_RESERVED, -be_units(size));
    ga_dev_uncommit(c->dev, (uint64_t)be_units(size));
}

static int be_release(void *p, uintptr_t base, size_t size)
{
    ga_ctx_t *c = p;
    CUresult r = CUDA_SUCCESS;
    if (!c->driver_gone) {
        r = be_free_in(c->ctx, base);
        if (r == CUDA_ERROR_CONTEXT_IS_DESTROYED)
            r = CUDA_SUCCESS; /* gone by a call gpuarena did not see: freed with it */
        else if (r == CUDA_ERROR_INVALID_VALUE && ga_driver_unknown(base)) {
            ga_gone_said(base, size, "cuMemFree_v2 answered CUDA_ERROR_INVALID_VALUE");
            c->release_gone = 1;
            r = CUDA_SUCCESS;
        } else
            c->counts.driver_free_calls++;
        c->late_releases += c->has_final; /* after the entry's figures: the totals' (stats.c) */
    }
    if (r != CUDA_SUCCESS && !c->has_final) {
        static _Atomic int said;
        c->release_err = r;
        ga_log(atomic_exchange(&said, 1) ? GA_LOG_DEBUG : GA_LOG_WARN,
               "the driver refused to free %zu bytes at %#llx (CUresult %d); they stay counted "
               "against the cap and are tried again later (arena, grow: the region is kept and "
               "used; platform: the cuMemFree answers that code and the block stays allocated); if "
               "this repeats, the driver or device is failing: check it (nvidia-smi) (further "
               "refusals: GPUARENA_LOG=debug)", size, (unsigned long long)base, (int)r);
        return 1;
    }
    if (r != CUDA_SUCCESS)
        ga_log(GA_LOG_DEBUG, "giving back %zu bytes at %#llx to the driver failed (CUresult %d); "
               "the context is going, and its memory with it", size, (unsigned long long)base,
               (int)r);
    ga_level_add(GA_LEVEL_RESERVED, -be_units(size));
    ga_dev_uncommit(c->dev, (uint64_t)be_units(size));
    return 0;
}

/* ---- vmm ---- */
/* Whether dev's VMM memory can be made GPUDirect RDMA capable, asked once per device: 0 not asked,
 * 1 no, 2 yes. cuMemAlloc memory is capable where the device supports it, so vmm granules ask for
 * it too (helper-48 F9: blocks reported IS_GPU_DIRECT_RDMA_CAPABLE 0, and NCCL-style registration
 * refuses such segments). */
static _Atomic signed char be_rdma[GA_MAX_DEVICES];

static int be_rdma_capable(int dev)
{
    signed char v = atomic_load_explicit(&be_rdma[dev], memory_order_relaxed);
    if (!v) {
        int on = 0;
        if (!ga_real.cuDeviceGetAttribute ||
            ga_real.cuDeviceGetAttribute(&on, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                                         (CUdevice)dev) != CUDA_SUCCESS)
            on = 0;
        v = on ? 2 : 1;
        atomic_store_explicit(&be_rdma[dev], v, memory_order_relaxed);
    }
    return v == 2;
}

/* The properties of every granule of dev, and of the granularity query (the same properties). */
static CUmemAllocationProp ga_vmm_prop(int dev)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop.allocFlags.gpuDirectRDMACapable = (unsigned char)be_rdma_capable(dev);
    return prop;
}

/* The access a granule of dev is mapped with: read/write for dev, and for every device that has
 * enabled peer access to it (ga_dev_t.peers). cuCtxEnablePeerAccess opens cuMemAlloc memory to
 * the peer ("all allocations from peerContext will immediately be accessible by the current
 * context") but not cuMemCreate memory, which only the devices cuMemSetAccess names may touch, so
 * without this a peer's kernels and copies failed on vmm memory where the other modes' worked
 * (helper-48 F7, helper-50 F2; PyTorch's expandable segments do the same, addPeer). Returns how
 * many descriptors d holds. */
static unsigned be_access(int dev, CUmemAccessDesc d[GA_MAX_DEVICES])
{
    uint64_t devs = atomic_load(&ga_dev(dev)->peers) | 1ull << dev;
    unsigned n = 0;
    for (int i = 0; i < GA_MAX_DEVICES; i++)
        if (devs >> i & 1)
            d[n++] = (CUmemAccessDesc){.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = i},
                                       .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    return n;
}

/* A granule now mapped at addr, for a later peer's access (c->lock held). Without host memory to
 * note it, a device that enables peer access later cannot reach it: said at debug level. */
static void be_note_granule(ga_ctx_t *c, uintptr_t addr, size_t size, uint64_t handle)
{
    if (ga_ptrmap_put(&c->granules, &(ga_pentry_t){.key = addr, .size = size, .aux = handle}) != 0)
        ga_log(GA_LOG_DEBUG, "vmm: no host memory to note the granule at %#llx: a device that "
               "enables peer access later will not reach it", (unsigned long long)addr);
}

struct be_handle_find {
    uint64_t handle;
    int found;
};

static void be_handle_match(void *arg, const ga_pentry_t *e)
{
    struct be_handle_find *f = arg;
    f->found |= e->aux == f->handle;
}

int ga_vmm_holds_handle(uint64_t handle)
{
    struct be_handle_find f = {handle, 0};
    for (ga_ctx_t *c = ga_ctx_first(); c && handle && !f.found; c = atomic_load(&c->next)) {
        ga_mutex_lock(&c->lock);
        if (c->granules.count)
            ga_ptrmap_each(&c->granules, be_handle_match, &f);
        if (c->stuck.count)
            ga_ptrmap_each(&c->stuck, be_handle_match, &f);
        ga_mutex_unlock(&c->lock);
    }
    return f.found;
}

/* Granules the driver would not give back. A refused cuMemUnmap leaves the granule mapped: its
 * handle is kept (c->stuck), its bytes stay committed against the cap (the device still holds
 * them), and when the pool maps that address again the mapping serves as it is, where a new
 * cuMemMap there would fail and, the pool seeing its granule unmapped, so would every later
 * allocation placed there. A refused cuMemRelease after the unmap keeps the handle's bytes
 * committed too, on the device's list (d->refused, so a destroyed context's are tried again as
 * well), until a later try releases it: at each granule map and unmap on the device. Before, both
 * were dropped: the first poisoned the pool for good, the second left memory on the device outside
 * the cap. The first refusal on a device is a warning, later ones are debug lines (one per granule
 * filled a screen); the out-of-memory line says what they hold (ga_vmm_refused_bytes).
 * Always 1: a refusal that no table can record for want of host memory stays committed all the
 * same (d->unrecorded), and a mapped granule's handle is not released; returning 0 there made the
 * caller give its bytes back to the cap while the device still held them (helper-47 F15).
 * c->lock held; the device lock is taken inside it. */
static int keep_refused(ga_ctx_t *c, uint64_t key, uintptr_t addr, size_t size, uint64_t handle,
                        const char *call, CUresult r)
{
    ga_dev_t *d = ga_dev(c->dev);
    ga_pentry_t e = {.key = key, .size = size, .aux = handle};
    int kept, mapped = handle != 0;
    if (mapped) {
        kept = ga_ptrmap_put(&c->stuck, &e) == 0;
    } else {
        ga_mutex_lock(&d->lock);
        kept = ga_ptrmap_put(&d->refused, &e) == 0;
        ga_mutex_unlock(&d->lock);
    }
    if (!kept) {
        atomic_fetch_add_explicit(&d->unrecorded, size, memory_order_relaxed);
        ga_log(GA_LOG_WARN, "vmm: the driver refused to give back the granule at %#llx (%s: "
               "CUresult %d) and host memory ran out to remember it: its %zu bytes stay counted "
               "against the cap until the process exits; the driver or device is failing: check "
               "it (nvidia-smi) or use GPUARENA_MODE=grow", (unsigned long long)addr, call, (int)r,
               size);
        return 1;
    }
    static _Atomic int said;
    ga_log(atomic_exchange(&said, 1) ? GA_LOG_DEBUG : GA_LOG_WARN,
           "vmm: the driver refused to give back the granule at %#llx (%s: CUresult %d); it stays "
           "counted against the cap and is %s; if this repeats, the driver or device is failing: "
           "check it (nvidia-smi) or use GPUARENA_MODE=grow (further refusals: GPUARENA_LOG=debug)",
           (unsigned long long)addr, call, (int)r,
           mapped ? "used again when a block lands there" : "released at a later try");
    return 1;
}

struct key_list {
    uint64_t lo, hi; /* the keys in [lo, hi) */
    uint64_t key[16];
    size_t n;
};

static void collect_keys(void *arg, const ga_pentry_t *e)
{
    struct key_list *l = arg;
    if (e->key >= l->lo && e->key < l->hi && l->n < 16)
        l->key[l->n++] = e->key;
}

/* Tries again to release the device's refused handles (16 at a time), the driver called without
 * the device lock. c->lock held, context current. */
static void release_refused(ga_ctx_t *c)
{
    ga_dev_t *d = ga_dev(c->dev);
    ga_pentry_t got[16];
    size_t n = 0;
    ga_mutex_lock(&d->lock);
    if (d->refused.count) {
        struct key_list l = {.lo = 0, .hi = UINT64_MAX, .n = 0};
        ga_ptrmap_each(&d->refused, collect_keys, &l);
        for (size_t i = 0; i < l.n; i++)
            n += ga_ptrmap_take(&d->refused, l.key[i], &got[n]);
    }
    ga_mutex_unlock(&d->lock);
    for (size_t i = 0; i < n; i++) {
        if (ga_real.cuMemRelease((CUmemGenericAllocationHandle)got[i].key) != CUDA_SUCCESS) {
            ga_mutex_lock(&d->lock);
            if (ga_ptrmap_put(&d->refused, &got[i]) != 0)
                got[i].size = 0; /* no host memory: stays held, uncounted from here */
            ga_mutex_unlock(&d->lock);
            continue;
        }
        c->counts.driver_free_calls++;
        ga_level_add(GA_LEVEL_RESERVED, -(int64_t)got[i].size);
        ga_dev_uncommit(c->dev, got[i].size);
    }
}

static void add_size(void *arg, const ga_pentry_t *e)
{
    *(uint64_t *)arg += e->size;
}

uint64_t ga_vmm_refused_bytes(const ga_ctx_t *c)
{
    uint64_t bytes = 0;
    ga_ptrmap_each(&c->stuck, add_size, &bytes);
    ga_dev_t *d = ga_dev(c->dev);
    bytes += atomic_load_explicit(&d->unrecorded, memory_order_relaxed);
    ga_mutex_lock(&d->lock);
    ga_ptrmap_each(&d->refused, add_size, &bytes);
    ga_mutex_unlock(&d->lock);
    return bytes;
}

static int be_va_reserve(void *p, size_t size, uintptr_t *base)
{
    ga_ctx_t *c = p;
    CUdeviceptr d = 0;
    int pushed = ga_ctx_enter(c->ctx);
    CUresult r = ga_real.cuMemAddressReserve(&d, size, c->granularity, 0, 0);
    ga_ctx_leave(pushed);
    if (r != CUDA_SUCCESS) {
        /* Said once per context: the pool then asks for less, down to the allocation itself,
         * and each refusal would repeat it. */
        ga_log(c->va_warned ? GA_LOG_DEBUG : GA_LOG_WARN,
               "vmm: reserving %zu bytes of address space failed (CUresult %d); smaller ranges are "
               "tried, and an allocation that finds none fails as out of memory (vmm reserves "
               "twice the cap: lower GPUARENA_LIMIT, or use GPUARENA_MODE=grow)", size, (int)r);
        c->va_warned = 1;
        c->va_refused = 1;
        return 1;
    }
    c->va_refused = 0;
    *base = (uintptr_t)d;
    return 0;
}

static void be_va_release(void *p, uintptr_t base, size_t size)
{
    ga_ctx_t *c = p;
    if (c->driver_gone > 1)
        return;
    c->late_releases += c->has_final; /* after the entry's figures: the totals' (stats.c) */
    int pushed = c->driver_gone ? 0 : ga_ctx_enter(c->ctx);
    if (GA_UNLIKELY(c->stuck.count)) { /* granules still mapped in the range: one more try */
        struct key_list l = {.lo = base, .hi = base + size, .n = 0};
        ga_ptrmap_each(&c->stuck, collect_keys, &l);
        for (size_t i = 0; i < l.n; i++) {
            ga_pentry_t e = *ga_ptrmap_get(&c->stuck, l.key[i]);
            if (ga_real.cuMemUnmap((CUdeviceptr)e.key, e.size) != CUDA_SUCCESS) {
                ga_log(GA_LOG_WARN, "vmm: the granule at %#llx, which the driver would not unmap, "
                       "still will not: it stays mapped and counted against the cap until the "
                       "process exits, with the address range that holds it",
                       (unsigned long long)e.key);
                continue; /* the address free below fails too */
            }
            ga_ptrmap_take(&c->stuck, e.key, NULL);
            CUresult rel = ga_real.cuMemRelease((CUmemGenericAllocationHandle)e.aux);
            c->counts.driver_free_calls++;
            if (rel == CUDA_SUCCESS) {
                ga_level_add(GA_LEVEL_RESERVED, -(int64_t)e.size);
                ga_dev_uncommit(c->dev, e.size);
            } else {
                keep_refused(c, e.aux, (uintptr_t)e.key, e.size, 0, "cuMemRelease", rel);
            }
        }
    }
    release_refused(c);
    CUresult r = ga_real.cuMemAddressFree((CUdeviceptr)base, size);
    ga_ctx_leave(pushed);
    if (r != CUDA_SUCCESS)
        ga_log(GA_LOG_WARN, "vmm: freeing the address range at %#llx failed (CUresult %d)",
               (unsigned long long)base, (int)r);
}

/* What the pool's device can give it now: the driver's free memory there (its context pushed;
 * unknown when the driver does not answer) and the room the cap and the group's leave. The pool
 * refuses a block of many granules at once when they cannot fit, instead of mapping them one by
 * one until the driver or the cap refuses: meanwhile each granule counted against the cap, and a
 * group member's doomed block refused other members' blocks that fit (an outside check: 184 of
 * 3,000 refused). */
static size_t be_device_free(void *p)
{
    ga_ctx_t *c = p;
    release_refused(c); /* as be_map does first: granules the driver refused come off the cap */
    size_t fr = 0, total = 0;
    int pushed = ga_ctx_enter(c->ctx);
    ga_tl_busy++;
    CUresult r = ga_real.cuMemGetInfo_v2(&fr, &total);
    ga_tl_busy--;
    ga_ctx_leave(pushed);
    uint64_t room = ga_dev_room(c->dev);
    if (r != CUDA_SUCCESS || fr > room)
        fr = room > SIZE_MAX ? SIZE_MAX : (size_t)room;
    return fr;
}

static int be_map(void *p, uintptr_t addr, size_t size, uint64_t *handle)
{
    ga_ctx_t *c = p;
    release_refused(c); /* a granule's map is a driver call: the lock beside it costs nothing */
    if (GA_UNLIKELY(c->stuck.count)) {
        int pushed = ga_ctx_enter(c->ctx);
        ga_pentry_t *e = ga_ptrmap_get(&c->stuck, addr);
        int reused = 0;
        if (e && e->size == size) { /* still mapped here: its access again, and it serves */
            CUmemAccessDesc access[GA_MAX_DEVICES];
            unsigned n = be_access(c->dev, access);
            if (ga_real.cuMemSetAccess((CUdeviceptr)addr, size, access, n) == CUDA_SUCCESS) {
                *handle = e->aux;
                ga_ptrmap_take(&c->stuck, addr, NULL);
                be_note_granule(c, addr, size, *handle);
                reused = 1;
            }
        }
        ga_ctx_leave(pushed);
        if (reused)
            return 0;
        if (e)
            return 1; /* mapped there still, unusable: this granule cannot serve */
    }
    if (!ga_dev_commit(c->dev, size))
        return 1;
    CUmemAllocationProp prop = ga_vmm_prop(c->dev);
    CUmemAccessDesc access[GA_MAX_DEVICES];
    unsigned naccess = be_access(c->dev, access);
    CUmemGenericAllocationHandle h = 0;
    int pushed = ga_ctx_enter(c->ctx);
    CUresult r = ga_real.cuMemCreate(&h, size, &prop, 0);
    c->counts.driver_alloc_calls++;
    int mapped = 0;
    if (r == CUDA_SUCCESS && (r = ga_real.cuMemMap((CUdeviceptr)addr, size, 0, h, 0)) == CUDA_SUCCESS) {
        mapped = 1;
        r = ga_real.cuMemSetAccess((CUdeviceptr)addr, size, access, naccess);
    }
    if (r != CUDA_SUCCESS) { /* undo what was done: nothing half-mapped, nothing held */
        int held = 0; /* unless the driver keeps it: then kept, and committed, as stuck */
        if (mapped) {
            CUresult u = ga_real.cuMemUnmap((CUdeviceptr)addr, size);
            if (u != CUDA_SUCCESS && keep_refused(c, addr, addr, size, h, "cuMemUnmap", u))
                held = 1;
        }
        if (h && !held) {
            CUresult rel = ga_real.cuMemRelease(h);
            c->counts.driver_free_calls++;
            if (rel != CUDA_SUCCESS && keep_refused(c, h, addr, size, 0, "cuMemRelease", rel))
                held = 1;
        }
        ga_ctx_leave(pushed);
        if (held) /* the driver keeps them */
            ga_dev_granted(c->dev, size), ga_level_add(GA_LEVEL_RESERVED, (int64_t)size);
        else
            ga_dev_refused(c->dev, size);
        c->map_err = r; /* the out-of-memory line names it when it is not a lack of memory */
        return 1;
    }
    c->map_err = CUDA_SUCCESS;
    ga_ctx_leave(pushed);
    ga_dev_granted(c->dev, size);
    ga_level_add(GA_LEVEL_RESERVED, (int64_t)size);
    be_note_granule(c, addr, size, (uint64_t)h);
    *handle = (uint64_t)h;
    return 0;
}

static void be_unmap(void *p, uintptr_t addr, size_t size, uint64_t handle)
{
    ga_ctx_t *c = p;
    if (ga_ptrmap_take(&c->granules, addr, NULL) && !c->granules.count) {
        ga_ptrmap_fini(&c->granules); /* a context's state is never freed: nor kept large */
        memset(&c->granules, 0, sizeof c->granules);
    }
    if (c->driver_gone < 2) {
        /* after the entry's figures (a teardown's, an orphan's): the totals' (stats.c) */
        c->late_unmaps += c->has_final;
        int pushed = c->driver_gone ? 0 : ga_ctx_enter(c->ctx);
        if (c->unfenced && !c->driver_gone && ga_real.cuCtxSynchronize) {
            /* Under GPUARENA_FREE_SYNC=none a chunk comes back while queued work may still use it,
             * and work on an unmapped address is not a stale read but an illegal address that
             * ends the context (seen on an H200: scripts/gpu-check.sh, torch_hazard.py). So the
             * context is synchronised before its granules go: once, not per granule, until the
             * next chunk comes back unfenced. The other settings free only memory the device has
             * passed. Not while a stream capture runs on the device (the synchronisation would
             * be refused and end the capture invalidated), and a refused one passed nothing: the
             * granule then stays mapped and held (c->stuck, serving again when a block lands
             * there), never unmapped under work that may still use it (an outside check,
             * 2026-12-07: the refusal was not looked at, the granule unmapped under a queued
             * kernel, and a cuMemFree during a capture ended it; test
             * vmm_none_unmap_waits_or_keeps). */
            CUresult sr = ga_capture_on_dev(c->dev) ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                                                    : ga_real.cuCtxSynchronize();
            if (sr != CUDA_SUCCESS) {
                (void)ga_ptrmap_reserve(&c->stuck, 1);
                if (sr != CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) /* said, and kept */
                    keep_refused(c, addr, addr, size, handle, "cuCtxSynchronize", sr);
                else if (ga_ptrmap_put(&c->stuck, &(ga_pentry_t){.key = addr, .size = size,
                                                                 .aux = handle}) != 0)
                    atomic_fetch_add_explicit(&ga_dev(c->dev)->unrecorded, size,
                                              memory_order_relaxed);
                ga_ctx_leave(pushed);
                return; /* still mapped, still held (committed) */
            }
            c->unfenced = 0;
            c->counts.free_syncs++;
        }
        release_refused(c);
        /* Room to remember a refusal first: its table could not grow after it (keep_refused). */
        (void)ga_ptrmap_reserve(&c->stuck, 1);
        CUresult r = ga_real.cuMemUnmap((CUdeviceptr)addr, size);
        if (r != CUDA_SUCCESS) {
            keep_refused(c, addr, addr, size, handle, "cuMemUnmap", r);
            ga_ctx_leave(pushed);
            return; /* still mapped, still held: committed until it serves again */
        }
        CUresult r2 = ga_real.cuMemRelease((CUmemGenericAllocationHandle)handle);
        ga_ctx_leave(pushed);
        c->counts.driver_free_calls++;
        if (r2 != CUDA_SUCCESS) {
            keep_refused(c, handle, addr, size, 0, "cuMemRelease", r2);
            return; /* unmapped, its memory still held: committed until a later try frees it */
        }
    }
    ga_level_add(GA_LEVEL_RESERVED, -(int64_t)size);
    ga_dev_uncommit(c->dev, size);
}

uint64_t ga_vmm_granule(int dev)
{
    ga_dev_t *d = ga_dev(dev);
    uint64_t g = atomic_load(&d->granule);
    if (g || !ga_real.cuMemGetAllocationGranularity)
        return g;
    CUmemAllocationProp prop = ga_vmm_prop(dev);
    size_t got = 0;
    if (ga_real.cuMemGetAllocationGranularity(&got, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
            CUDA_SUCCESS || got < GA_ALIGN || (got & (got - 1)))
        return 0;
    atomic_store(&d->granule, got);
    return got;
}

/* The VMM entry points and the granularity; 0 ok. Says once why vmm cannot run here. */
static int ga_vmm_ready(ga_ctx_t *c, CUresult *err)
{
    static _Atomic int said;
    const char *missing = NULL;
#define GA_NEED(fn) else if (!ga_real.fn) missing = #fn;
    if (0) {
    }
    GA_NEED(cuMemAddressReserve) GA_NEED(cuMemAddressFree) GA_NEED(cuMemCreate)
    GA_NEED(cuMemRelease) GA_NEED(cuMemMap) GA_NEED(cuMemUnmap) GA_NEED(cuMemSetAccess)
    GA_NEED(cuMemGetAllocationGranularity)
#undef GA_NEED
    CUresult r = CUDA_SUCCESS;
    size_t g = 0;
    int vmm_ok = 1; /* the device's own word, where the driver gives it (some vGPU and WSL
                       setups have the calls but not the feature) */
    if (!missing && ga_real.cuDeviceGetAttribute &&
        ga_real.cuDeviceGetAttribute(&vmm_ok, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                     (CUdevice)c->dev) != CUDA_SUCCESS)
        vmm_ok = 1; /* no answer: the calls below tell */
    if (!missing && vmm_ok) {
        CUmemAllocationProp prop = ga_vmm_prop(c->dev);
        int pushed = ga_ctx_enter(c->ctx);
        r = ga_real.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
        ga_ctx_leave(pushed);
    }
    if (!missing && vmm_ok && r == CUDA_SUCCESS && g >= GA_ALIGN && !(g & (g - 1))) {
        c->granularity = g;
        atomic_store(&ga_dev(c->dev)->granule, g);
        return 0;
    }
    /* The query itself failed for a reason other than support (out of memory, an error of the
     * moment): this allocation fails with the driver's own code and the next one asks again, so
     * the advice to leave vmm mode is kept for a device that cannot do it (an outside test,
     * 2026-12-05: one failed query answered CUDA_ERROR_NOT_SUPPORTED and "use arena or grow"). */
    if (!missing && vmm_ok && r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_SUPPORTED &&
        r != CUDA_ERROR_INVALID_DEVICE) {
        static _Atomic int said_once;
        if (!atomic_exchange(&said_once, 1))
            ga_log(GA_LOG_WARN, "GPUARENA_MODE=vmm: device %d's allocation granularity could not "
                   "be read (cuMemGetAllocationGranularity: CUresult %d); this allocation fails "
                   "with that code and the next one asks again (if it keeps failing, use "
                   "GPUARENA_MODE=arena or grow)", c->dev, (int)r);
        *err = r;
        return 1;
    }
    if (!atomic_exchange(&said, 1)) {
        if (missing)
            ga_log(GA_LOG_ERROR, "GPUARENA_MODE=vmm needs the driver's virtual memory management "
                   "calls and this driver lacks %s; use GPUARENA_MODE=arena or grow", missing);
        else if (!vmm_ok)
            ga_log(GA_LOG_ERROR, "GPUARENA_MODE=vmm: device %d does not support virtual memory "
                   "management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0, as "
                   "on some vGPU and WSL setups); use GPUARENA_MODE=arena or grow", c->dev);
        else
            ga_log(GA_LOG_ERROR, "GPUARENA_MODE=vmm: device %d gives no usable allocation "
                   "granularity (CUresult %d, %zu bytes); use GPUARENA_MODE=arena or grow", c->dev,
                   (int)r, g);
    }
    *err = CUDA_ERROR_NOT_SUPPORTED;
    return 1;
}

int ga_backend_for(ga_ctx_t *c, ga_pool_backend_t *be, CUresult *err)
{
    *be = (ga_pool_backend_t){.reserve = be_reserve, .release = be_release, .ctx = c,
                              .forget = be_forget};
    if (ga_opt.mode != GA_MODE_VMM)
        return 0;
    if (ga_vmm_ready(c, err) != 0)
        return 1;
    be->va_reserve = be_va_reserve;
    be->va_release = be_va_release;
    be->map = be_map;
    be->unmap = be_unmap;
    be->device_free = be_device_free;
    be->granularity = c->granularity;
    return 0;
}

/* ---- peer access to vmm granules ---- */
struct be_grant {
    CUmemAccessDesc access[GA_MAX_DEVICES];
    unsigned n;
    CUresult failed;
};

static void be_grant_one(void *arg, const ga_pentry_t *e)
{
    struct be_grant *g = arg;
    CUresult r = ga_real.cuMemSetAccess((CUdeviceptr)e->key, e->size, g->access, g->n);
    if (r != CUDA_SUCCESS)
        g->failed = r;
}

/* Sets g's access on every granule mapped now by a pool on dev (a destroyed context's kept pool
 * too). One context lock at a time, none held by the caller. */
static void be_grant_all(int dev, struct be_grant *g)
{
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        if (c->dev != dev || c->driver_gone > 1)
            continue;
        ga_mutex_lock(&c->lock);
        if (c->granules.count) {
            int pushed = atomic_load(&c->dead) ? ga_nocancel_begin() << 1 : ga_ctx_enter(c->ctx);
            ga_ptrmap_each(&c->granules, be_grant_one, g);
            ga_ctx_leave(pushed);
        }
        ga_mutex_unlock(&c->lock);
    }
}

/* Device `self` enabled peer access to device dev: every granule mapped now by a pool on dev is
 * opened to it; later ones are mapped so (be_access). */
static void ga_vmm_open_to(int dev, int self)
{
    uint64_t bit = 1ull << self;
    if (atomic_fetch_or(&ga_dev(dev)->peers, bit) & bit)
        return; /* opened already */
    struct be_grant g = {.failed = CUDA_SUCCESS};
    g.n = be_access(dev, g.access);
    be_grant_all(dev, &g);
    if (g.failed != CUDA_SUCCESS)
        ga_log(GA_LOG_WARN, "vmm: opening device %d's pool memory to device %d after "
               "cuCtxEnablePeerAccess failed (cuMemSetAccess: CUresult %d): that device's kernels "
               "and copies may fail on it; use GPUARENA_MODE=grow for peer access", dev, self,
               (int)g.failed);
}

/* The last context on device `self` with peer access to device dev enabled disabled it: the
 * granules mapped by dev's pools are closed to self (cuMemSetAccess PROT_NONE for that device
 * alone), as the driver closes cuMemAlloc memory, and later ones are mapped without it. */
static void ga_vmm_close_to(int dev, int self)
{
    uint64_t bit = 1ull << self;
    if (!(atomic_fetch_and(&ga_dev(dev)->peers, ~bit) & bit))
        return; /* not open */
    struct be_grant g = {.n = 1, .failed = CUDA_SUCCESS};
    g.access[0] = (CUmemAccessDesc){.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = self},
                                    .flags = CU_MEM_ACCESS_FLAGS_PROT_NONE};
    be_grant_all(dev, &g);
    if (g.failed != CUDA_SUCCESS)
        ga_log(GA_LOG_WARN, "vmm: closing device %d's pool memory to device %d after "
               "cuCtxDisablePeerAccess failed (cuMemSetAccess: CUresult %d): that device may still "
               "reach it", dev, self, (int)g.failed);
}

/* The device of context ctx, current or not; -1 when the driver does not say. */
static int be_ctx_device(CUcontext ctx)
{
    ga_ctx_t *known = ga_ctx_of(ctx);
    if (known)
        return known->dev;
    CUdevice d = -1;
    CUcontext cur = NULL;
    int pushed = ga_ctx_enter(ctx);
    if (ga_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx ||
        ga_real.cuCtxGetDevice(&d) != CUDA_SUCCESS)
        d = -1;
    ga_ctx_leave(pushed);
    return d;
}

GA_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    GA_HOOK_ENTER(cuCtxEnablePeerAccess, (peerContext, Flags));
    CUresult r = ga_real.cuCtxEnablePeerAccess(peerContext, Flags);
    CUdevice self = -1;
    if ((r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) ||
        ga_opt.mode != GA_MODE_VMM || ga_real.cuCtxGetDevice(&self) != CUDA_SUCCESS)
        return r;
    int dev = be_ctx_device(peerContext);
    if (dev < 0 || dev >= GA_MAX_DEVICES || self < 0 || self >= GA_MAX_DEVICES || dev == self)
        return r;
    if (r == CUDA_SUCCESS) /* a new pair: its disable is counted against it */
        atomic_fetch_add(&ga_dev(dev)->peer_on[self], 1);
    ga_vmm_open_to(dev, self);
    return r;
}

/* Peer access is per pair of contexts, the granules' access per device: they are closed to the
 * current context's device once every enable from a context there has been disabled (another
 * context of that device that still has it keeps them open). A disable the driver refuses (not
 * enabled) changes nothing. Left: an enabling context destroyed without a disable keeps its
 * device's access, as before this hook. */
GA_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    GA_HOOK_ENTER(cuCtxDisablePeerAccess, (peerContext));
    CUresult r = ga_real.cuCtxDisablePeerAccess(peerContext);
    CUdevice self = -1;
    if (r != CUDA_SUCCESS || ga_opt.mode != GA_MODE_VMM ||
        ga_real.cuCtxGetDevice(&self) != CUDA_SUCCESS)
        return r;
    int dev = be_ctx_device(peerContext);
    if (dev < 0 || dev >= GA_MAX_DEVICES || self < 0 || self >= GA_MAX_DEVICES || dev == self)
        return r;
    _Atomic uint32_t *on = &ga_dev(dev)->peer_on[self];
    uint32_t n = atomic_load(on);
    while (n && !atomic_compare_exchange_weak(on, &n, n - 1))
        ;
    if (n <= 1) /* the last one (or one enabled before gpuarena counted) */
        ga_vmm_close_to(dev, self);
    return r;
}
