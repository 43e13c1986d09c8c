/* gpuarena pass-through hooks: managed, pool and VMM allocations, the v1 allocations (32-bit
 * pointers, which no pool can serve), and the runtime.
 *
 * cuMemAllocAsync (and _ptsz) is served by the context's pool in the arena, grow and vmm modes,
 * stream-ordered (alloc.c, fence.c); in platform mode it is passed through like the rest.
 * The pools do not serve the others: they go to the driver as asked, but they count
 * toward the device cap and the statistics, because a cap that a program escapes by calling
 * cuMemAllocAsync would cap nothing. Each is checked against the cap before the driver call and
 * recorded in its context's pass-through table (cuMemCreate handles, which belong to a device and
 * outlive contexts, in the device's), so its free gives the bytes back.
 * cuMemCreate handles are made and recorded here; their references and mappings are counted in
 * handles.c. A handle needs no context: one made
 * from a thread with none current is counted against the device it names, whatever context is
 * current; one whose location is not a device the driver has is the driver's to refuse, uncounted.
 * The runtime hooks (cudaMalloc, cudaFree, cudaMemGetInfo) only tag the thread with the entry
 * point and call the real runtime, which reaches the driver hooks underneath: the driver-level
 * hook then counts the call once, under the runtime's name.
 */
#include "shim.h"
#include "handle_aux.h"

/* Whether dev is a device the driver has, which a cuMemCreate names: set up already (only real
 * devices are), or within the driver's count. An ordinal past it is the driver's to refuse, and
 * setting it up would give a device that is not there a cap (and, in a group, a ledger). */
static int ga_dev_exists(int dev)
{
    if (dev < 0 || dev >= GA_MAX_DEVICES)
        return 0;
    if (atomic_load_explicit(&ga_dev(dev)->known, memory_order_acquire))
        return 1;
    int n = 0;
    return ga_real.cuDeviceGetCount && ga_real.cuDeviceGetCount(&n) == CUDA_SUCCESS && dev < n;
}

static ga_ctx_t *ga_pass_ctx_on_life(int dev, unsigned *life);

/* Before the driver call: the context, the device whose cap the bytes go against, and whether
 * they were committed. handle: a cuMemCreate, whose device is dev (-1: a location that is not a
 * device) whatever context is current, none included. *devp -1: nothing to count (no context, or
 * not a device the driver has), the driver answers alone. */
static CUresult ga_pass_begin(size_t size, int dev, int handle, ga_ctx_t **cp, int *devp,
                              int *committed, unsigned *lifep)
{
    int cdev = -1;
    *lifep = 0;
    ga_ctx_t *c = ga_current_life(lifep, &cdev);
    *cp = c;
    *committed = 0;
    *devp = handle ? (ga_dev_exists(dev) ? dev : -1) : cdev;
    if (!c && !handle && ga_current_unmade() >= 0) /* would escape the cap: refused */
        return ga_refuse_unmade("an allocation passed to the driver", size);
    /* A pool's block on another device than the stream's (dev: the pool's, mempool.c): counted
     * there from the start, recorded in a context of gpuarena's on that device or, with none, in
     * the device's own table (ga_pass_end), as ga_pass_pool_device does after the call. */
    if (!handle && c && dev >= 0 && dev != cdev && ga_dev_exists(dev)) {
        *devp = dev;
        *cp = c = ga_pass_ctx_on_life(dev, lifep);
    }
    if (*devp < 0)
        return CUDA_SUCCESS;
    ga_dev_setup(*devp);
    if (!ga_dev_commit_pass(c, *devp, size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *committed = 1;
    return CUDA_SUCCESS;
}

/* For the OOM explainer when no context is current: a live context on dev, whose arena may be
 * what holds the memory (a framework's allocator thread often has no context), or NULL. */
static ga_ctx_t *ga_pass_ctx_on(int dev)
{
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c))
        if (c->dev == dev && !atomic_load(&c->dead))
            return c;
    return NULL;
}

/* ga_pass_ctx_on, with the state's life read around its device and dead checks (as
 * ga_current_life reads them): a state that dies and is reused for another device's context in
 * between is passed over, so the block is never recorded in a state of another device (*life 0
 * with NULL: the device's own table). An outside check's reading of the pool-device branch of
 * ga_pass_begin, helper-116 F6. */
static ga_ctx_t *ga_pass_ctx_on_life(int dev, unsigned *life)
{
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        unsigned l = atomic_load_explicit(&c->life, memory_order_acquire);
        if (atomic_load(&c->dev) == dev && !atomic_load(&c->dead) && atomic_load(&c->life) == l) {
            *life = l;
            return c;
        }
    }
    *life = 0;
    return NULL;
}

/* The driver's allocation that could not be recorded goes back to it: a cuMemCreate handle is
 * released, stream-ordered memory freed on its stream, the rest with cuMemFree. 1 when the driver
 * took it. */
static int ga_pass_undo(uint64_t key, int handle, int stream_ordered, CUstream s)
{
    if (handle)
        return ga_real.cuMemRelease((CUmemGenericAllocationHandle)key) == CUDA_SUCCESS;
    if (stream_ordered && ga_real.cuMemFreeAsync)
        return ga_real.cuMemFreeAsync((CUdeviceptr)key, s) == CUDA_SUCCESS &&
               (!ga_real.cuStreamSynchronize || ga_real.cuStreamSynchronize(s) == CUDA_SUCCESS);
    return ga_real.cuMemFree_v2((CUdeviceptr)key) == CUDA_SUCCESS;
}

/* The bytes a pass-through allocation counts: GA_ALIGN units, as the pools count their blocks and
 * as gpuarena-replay counts every allocation of a trace (--mode platform --limit), so that modes
 * compare and a trace replays to the refusals the shim made. cuMemAllocAsync counted its exact size
 * in platform mode until helper-46 F2 (2024 bytes in use where the others had 2048); managed,
 * cuMemAllocFromPoolAsync and v1 blocks did until 2026-12-07: 513-byte blocks under a 1 MiB cap
 * were 2,044 where cuMemAlloc and the replay take 1,024 (an outside check; test
 * pass_through_cap_in_512_byte_units). A cuMemCreate's size is the driver's granularity, counted
 * as asked. */
static uint64_t ga_pass_units(uint8_t api, size_t size)
{
    if (api == GA_API_CUMEMCREATE || size > SIZE_MAX - (GA_ALIGN - 1))
        return size;
    return ((uint64_t)size + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1);
}

/* A block the driver served in a context whose state died during the call: gone with it when the
 * context was destroyed, but a primary context lives on after cuDevicePrimaryCtxReset, and a
 * block the driver made after the reset is still its (1: the driver knows the pointer). */
static int ga_pass_survived(uint64_t key)
{
    CUcontext x = NULL;
    return ga_real.cuPointerGetAttribute &&
           ga_real.cuPointerGetAttribute(&x, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)key) ==
               CUDA_SUCCESS;
}

/* Records e in the live state of the current context (the block's, made anew after a reset),
 * else in dev's table of blocks no context holds, where a free finds it; 1 when recorded. */
static int ga_pass_record_live(int dev, const ga_pentry_t *e)
{
    ga_ctx_t *n = ga_current();
    if (n && n->dev == dev) {
        ga_mutex_lock(&n->lock);
        int ok = !atomic_load(&n->dead) && ga_ptrmap_put(&n->pass, e) == 0;
        ga_mutex_unlock(&n->lock);
        if (ok)
            return 1;
    }
    ga_dev_t *dv = ga_dev(dev);
    ga_mutex_lock(&dv->lock);
    int ok = ga_ptrmap_put(&dv->loose, e) == 0;
    ga_mutex_unlock(&dv->lock);
    return ok;
}

/* After the driver call: record it where its free will find it (the context's table, or the
 * device's for a cuMemCreate handle, which outlives contexts), or give the commitment back. An
 * allocation the driver served but that cannot be recorded (no host memory for the table) is
 * given back to the driver and answered CUDA_ERROR_OUT_OF_MEMORY: before, it was returned as a
 * success with its bytes off the cap (456 MiB held under a 256 MiB cap, helper-47 F11). So is a
 * stream-ordered block whose pool the device cannot list (mempool.c), noted before the record;
 * its pool is trimmed once the block is back. If the driver will not take it back (or trim the
 * pool), its bytes stay committed for good. Returns the call's answer. */
static CUresult ga_pass_end(ga_ctx_t *c, unsigned life, int dev, int committed, CUresult r,
                            uint64_t key, size_t size, uint8_t api, uint64_t t0, int handle,
                            CUstream s)
{
    uint64_t held = ga_pass_units(api, size); /* what the record, the levels and the cap count */
    if (dev < 0 || (!committed && r != CUDA_ERROR_OUT_OF_MEMORY))
        return r; /* nothing counted: no context, or a device the driver does not have */
    int stream_ordered = api == GA_API_CUMEMALLOCASYNC || api == GA_API_CUMEMALLOCFROMPOOL;
    if (ga_tl_api)
        api = ga_tl_api;
    /* No context with a device: a pool block on a device where gpuarena has none
     * (ga_pass_pool_device), kept in the device's table of blocks no context holds. */
    int loose = !handle && !c;
    ga_mutex_t *lock = handle || loose ? &ga_dev(dev)->lock : &c->lock;
    ga_ptrmap_t *table = handle ? &ga_dev(dev)->handles : loose ? &ga_dev(dev)->loose : &c->pass;
    ga_counts_t *counts = handle || loose ? &ga_dev(dev)->counts : &c->counts;
    int recorded = 0, nohost = 0, survived = 0, stale = 0;
    ga_pentry_t e = {.key = key, .size = held, .aux = handle ? GA_HANDLE_AUX(api, 1, 0) : api};
    ga_pentry_t gone; /* a block the table held at key, which the driver freed past gpuarena */
    CUmemoryPool unlisted = NULL;
    int nopool = r == CUDA_SUCCESS && stream_ordered && !handle &&
                 !ga_mempool_note(dev, (CUdeviceptr)key, &unlisted); /* its pool may keep memory */
    ga_mutex_lock(lock);
    if (r == CUDA_SUCCESS && !nopool) {
        /* A context that died during the call: its memory went with it, except stream-ordered
         * memory, which outlives it in the driver and so stays counted, on the device (an outside
         * test, 2026-12-06: a cuMemAllocFromPoolAsync served while another thread destroyed the
         * context left the cap, and 100 MiB were held under a 64 MiB one), and a block made after
         * a cuDevicePrimaryCtxReset, which the context outlives: it was taken for gone, and
         * managed blocks made while another thread reset held 5.4 GiB under a 64 MiB cap (an
         * outside check, helper-102). A state that died and was reused for another context
         * meanwhile (ga_ctx_reuse: c->life moved) is dead too for this call: found alive, the
         * block was recorded in the other context's table, on another device maybe, whose
         * teardown then took its bytes off that device's cap while the driver kept them (an
         * outside check, helper-102 F9: 65-71 MiB held under a 64 MiB cap on two devices with
         * managed memory while a thread reset the primary contexts). */
        int same = handle || loose || atomic_load(&c->life) == life;
        if (same && (handle || loose || !atomic_load(&c->dead))) {
            /* A block the table holds at this address is gone: the driver gives out only free
             * addresses (freed by a path gpuarena did not see, ga_gone_said). Overwritten, its
             * bytes stayed counted for good (helper-130). Handles are keys, not addresses. */
            stale = !handle && ga_ptrmap_take(table, key, &gone);
            nohost = !(recorded = ga_ptrmap_put(table, &e) == 0);
        }
        else if (stream_ordered ? !same : ga_pass_survived(key))
            survived = 1; /* kept by the driver: recorded where its free finds it, below */
        else
            nohost = !(recorded = ga_pass_outlives(c, &e)) && stream_ordered;
    }
    ga_mutex_unlock(lock);
    if (GA_UNLIKELY(stale)) { /* as a free the driver let go of (alloc.c, ga_free_any) */
        ga_gone_said(key, gone.size, "the driver gave the address out again");
        ga_mempool_gone(dev, gone.size);
        ga_level_add(GA_LEVEL_RESERVED, -(int64_t)gone.size);
        ga_level_add(GA_LEVEL_PASSTHROUGH, -(int64_t)gone.size);
        ga_dev_in_use_add(dev, -(int64_t)gone.size);
    }
    if (survived)
        nohost = !(recorded = ga_pass_record_live(dev, &e));
    if (nohost || nopool) {
        int back = ga_pass_undo(key, handle, stream_ordered, s);
        if (nopool)
            back = back && ga_mempool_unlisted(unlisted);
        r = ga_refuse_nohost(ga_api_name(api), nopool ? "the device's list of memory pools"
                                               : handle ? "the device's handle table"
                                                        : "the context's pass-through table", size);
        if (!back && committed == 1)
            ga_dev_granted(dev, held); /* the driver kept it: it stays under the cap for good */
        if (!back)
            committed = 0;
    }
    int oom = r == CUDA_ERROR_OUT_OF_MEMORY && !nohost && !nopool;
    ga_mutex_lock(lock);
    ga_count_alloc(counts, api, size, r == CUDA_SUCCESS, t0);
    ga_mutex_unlock(lock);
    /* committed 1: the bytes were committed for this call, not yet granted; 2: granted already */
    if (recorded) {
        if (committed == 1)
            ga_dev_granted(dev, held);
        ga_level_add(GA_LEVEL_RESERVED, (int64_t)held);
        ga_level_add(GA_LEVEL_PASSTHROUGH, (int64_t)held);
        ga_dev_in_use_add(dev, (int64_t)held);
    } else if (committed == 1) {
        ga_dev_refused(dev, held); /* failed, given back, or gone with its context */
    } else if (committed) {
        ga_dev_uncommit(dev, held);
    }
    /* A refusal for want of memory (the cap's or the driver's) that no arena of gpuarena's holds
     * free is a true out-of-memory: explained and counted as the pool's are (it was neither:
     * helper-72 NEW-6). committed: the cap let it through, the driver refused it. */
    if (oom && ga_oom_explain_pass(c ? c : ga_pass_ctx_on(dev), dev, api, size, !committed)) {
        ga_mutex_lock(lock);
        counts->true_oom_failures++;
        ga_mutex_unlock(lock);
    }
    if (GA_UNLIKELY(ga_tracing))
        ga_trace_event(r == CUDA_SUCCESS ? GA_EV_ALLOC : GA_EV_ALLOC_FAILED, api,
                       r == CUDA_SUCCESS ? key : 0, size, 0, dev, t0, r);
    return r;
}

/* A request the cap refuses is first put to the checks the driver would make, so that one the
 * driver refuses anyway gets the driver's own code, not an out-of-memory (an outside test,
 * 2026-12-06: bad flags, streams and properties larger than the free cap answered 2): the stream
 * (cuStreamQuery), the managed flags (the two documented values), a cuMemCreate's properties
 * (cuMemGetAllocationGranularity). Asked only on the refusal path, so nothing costs more. */
static CUresult ga_pass_stream_ok(CUstream s)
{
    CUresult q = ga_real.cuStreamQuery ? ga_real.cuStreamQuery(s) : CUDA_SUCCESS;
    return q == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : q;
}

/* For a call refused for its arguments: whether its stream is one the driver knows, asked
 * without a query (cuStreamGetCtx): a query of the legacy stream, or of any while a capture runs,
 * can end another stream's capture (capture.c). The special handles need no asking. */
static CUresult ga_pass_stream_known(CUstream s)
{
    CUcontext sc;
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || !ga_real.cuStreamGetCtx)
        return CUDA_SUCCESS;
    return ga_real.cuStreamGetCtx(s, &sc);
}

static CUresult ga_pass_flags_ok(unsigned flags)
{
    return flags == CU_MEM_ATTACH_GLOBAL || flags == CU_MEM_ATTACH_HOST ? CUDA_SUCCESS
                                                                         : CUDA_ERROR_INVALID_VALUE;
}

/* The size too: a multiple of the minimum granularity (cuMemCreate's documentation), else the
 * driver's CUDA_ERROR_INVALID_VALUE (helper-47 F13: past the cap it answered OUT_OF_MEMORY). And
 * the fields the granularity query does not look at, as cuMemCreate does: handle types outside
 * cuda.h's bits, a compression type or usage bits it does not define (CUDA_ERROR_INVALID_VALUE),
 * the Windows handle types on Linux and fabric handles on a device without them
 * (CUDA_ERROR_NOT_SUPPORTED): past the cap they answered CUDA_ERROR_OUT_OF_MEMORY (an outside
 * check's finding, helper-118 2; test create_bad_props_get_driver_codes). */
static CUresult ga_pass_prop_ok(const CUmemAllocationProp *prop, size_t size)
{
    size_t g = 0;
    CUresult r = ga_real.cuMemGetAllocationGranularity
                     ? ga_real.cuMemGetAllocationGranularity(&g, prop,
                                                             CU_MEM_ALLOC_GRANULARITY_MINIMUM)
                     : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS || (g && size % g))
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
    unsigned ht = (unsigned)prop->requestedHandleTypes;
    if ((ht & ~(unsigned)(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_WIN32 |
                          CU_MEM_HANDLE_TYPE_WIN32_KMT | CU_MEM_HANDLE_TYPE_FABRIC)) ||
        prop->allocFlags.compressionType > CU_MEM_ALLOCATION_COMP_GENERIC ||
        (prop->allocFlags.usage & ~(CU_MEM_CREATE_USAGE_TILE_POOL | CU_MEM_CREATE_USAGE_HW_DECOMPRESS)))
        return CUDA_ERROR_INVALID_VALUE;
    if (ht & (CU_MEM_HANDLE_TYPE_WIN32 | CU_MEM_HANDLE_TYPE_WIN32_KMT))
        return CUDA_ERROR_NOT_SUPPORTED;
    int fabric = 0;
    if ((ht & CU_MEM_HANDLE_TYPE_FABRIC) &&
        (!ga_real.cuDeviceGetAttribute ||
         ga_real.cuDeviceGetAttribute(&fabric, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
                                      prop->location.id) != CUDA_SUCCESS || !fabric))
        return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

/* Whether the driver has more than one device: whether a pool block may have landed on another
 * device than its stream's (asked of the driver once; a one-device process never asks more). */
static int ga_pass_several_devices(void)
{
    static _Atomic int several = -1;
    int v = atomic_load_explicit(&several, memory_order_relaxed);
    if (v < 0) {
        int n = 0;
        v = ga_real.cuDeviceGetCount && ga_real.cuDeviceGetCount(&n) == CUDA_SUCCESS && n > 1;
        atomic_store_explicit(&several, v, memory_order_relaxed);
    }
    return v;
}

/* A cuMemAllocFromPoolAsync's block lies on its pool's device, which need not be its stream's:
 * counted on the stream's device, it escaped the pool device's cap and took the stream device's
 * room (helper-68 F6, helper-72 NEW-7: 90 MiB held under a 64 MiB cap on device 1). When the
 * driver puts it on another device, the commitment moves there and the block is recorded in a
 * live context of gpuarena's on that device, where every free finds it (ga_with_owner), or, with
 * none there, in that device's own table (*cp NULL: ga_pass_end), where a free finds it too
 * (ga_dev_free_loose); either gives it back to that device. Refused there, the block goes back to
 * the driver and the call is an out-of-memory of that device. Until 2026-12-06 a device with no
 * context of gpuarena's left the block on the stream's device: device 0 refused memory it had,
 * and device 1 held the block and its cap besides (an outside test). Updates the call's context,
 * device and commitment; returns the call's answer. */
static CUresult ga_pass_pool_device(ga_ctx_t **cp, unsigned *lifep, int *devp, int *committed,
                                    uint64_t units, CUdeviceptr p, CUstream s)
{
    int bdev = -1;
    if (!*committed || !ga_pass_several_devices() || !ga_real.cuPointerGetAttribute ||
        ga_real.cuPointerGetAttribute(&bdev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) !=
            CUDA_SUCCESS || bdev == *devp || bdev < 0 || bdev >= GA_MAX_DEVICES)
        return CUDA_SUCCESS;
    ga_ctx_t *c1 = ga_pass_ctx_on_life(bdev, lifep); /* NULL: the device's own table */
    ga_dev_setup(bdev);
    int moved = ga_dev_commit_pass(c1, bdev, units);
    ga_dev_refused(*devp, units); /* never held there */
    *cp = c1, *devp = bdev, *committed = moved;
    if (moved)
        return CUDA_SUCCESS;
    ga_pass_undo(p, 0, 1, s); /* refused on its own device: the driver takes it back */
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The common shape of every pointer-returning pass-through allocation; `check`: the driver's
 * checks of the other arguments, made when the cap refuses (above). */
#define GA_PASS_ALLOC(name, api, call, check, stream, want)                                 \
    do {                                                                                   \
        if (!dptr || !bytesize) /* in the driver's order: state, stream, context, arguments */ \
            return ga_count_refused(api, 1), GA_REFUSAL_CODE(ga_pass_stream_known(stream), 1); \
        uint64_t t0 = ga_timing ? ga_now() : 0;                                            \
        ga_ctx_t *c = NULL;                                                                \
        int dev = -1, committed;                                                           \
        unsigned life;                                                                     \
        CUresult r = ga_pass_begin(ga_pass_units(api, bytesize), (want), 0, &c, &dev, &committed, \
                                   &life);                                                 \
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {                                               \
            CUresult bad_ = (check);                                                       \
            if (bad_ != CUDA_SUCCESS)                                                      \
                return ga_count_refused(api, 1), bad_;                                     \
        }                                                                                  \
        if (r == CUDA_SUCCESS)                                                             \
            r = ga_real.name call;                                                         \
        if (r == CUDA_SUCCESS && (api) == GA_API_CUMEMALLOCFROMPOOL) /* a constant */      \
            r = ga_pass_pool_device(&c, &life, &dev, &committed,                          \
                                    ga_pass_units(api, bytesize), *dptr, (stream));        \
        return ga_pass_end(c, life, dev, committed, r, r == CUDA_SUCCESS ? *dptr : 0, bytesize, \
                           api, t0, 0, (stream));                                          \
    } while (0)

GA_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    GA_HOOK_ENTER(cuMemAllocManaged, (dptr, bytesize, flags));
    GA_PASS_ALLOC(cuMemAllocManaged, GA_API_CUMEMALLOCMANAGED, (dptr, bytesize, flags),
                  ga_pass_flags_ok(flags), NULL, -1);
}

/* ---- the v1 allocations (32-bit pointers, hooks.def says why): the driver's own v1 functions, as
 * no pool address fits 32 bits, committed under the cap first and recorded in the context's
 * pass-through table, where a cuMemFree of either ABI finds them (alloc.c). ---- */

GA_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    GA_HOOK_ENTER(cuMemAlloc, (dptr, bytesize));
    GA_PASS_ALLOC(cuMemAlloc, GA_API_CUMEMALLOC, (dptr, bytesize), CUDA_SUCCESS, NULL, -1);
}

/* A v1 pitched allocation's bytes before the call, counted as the _v2 hook counts them (rows padded
 * to GA_ALIGN, 512 bytes, as the driver pads them on current GPUs: alloc.c); 0 for arguments the
 * driver refuses, a pitch past 32 bits included. */
static uint64_t ga_v1_pitch_bytes(unsigned width, unsigned height, unsigned elem)
{
    uint64_t pitch = ((uint64_t)width + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1);
    if (!width || !height || (elem != 4 && elem != 8 && elem != 16) || pitch > UINT32_MAX)
        return 0;
    return pitch * height;
}

/* The driver's pitch may not be the one assumed before the call (another GPU's row alignment):
 * the commitment follows the bytes it gave, which the device holds whatever the cap says. */
static void ga_pass_recount(int dev, uint64_t assumed, uint64_t got)
{
    if (got > assumed)
        ga_dev_hold(dev, got - assumed);
    else if (got < assumed)
        ga_dev_uncommit(dev, assumed - got);
}

GA_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                   unsigned int Height, unsigned int ElementSizeBytes)
{
    GA_HOOK_ENTER(cuMemAllocPitch, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
    uint64_t bytes = ga_v1_pitch_bytes(WidthInBytes, Height, ElementSizeBytes);
    if (!dptr || !pPitch || !bytes)
        return ga_count_refused(GA_API_CUMEMALLOCPITCH, 1), GA_REFUSAL_CODE(CUDA_SUCCESS, 1);
    uint64_t t0 = ga_timing ? ga_now() : 0;
    ga_ctx_t *c = NULL;
    int dev = -1, committed;
    unsigned life;
    CUresult r = ga_pass_begin(bytes, -1, 0, &c, &dev, &committed, &life);
    if (r == CUDA_SUCCESS)
        r = ga_real.cuMemAllocPitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    uint64_t got = r == CUDA_SUCCESS ? (uint64_t)*pPitch * Height : bytes;
    if (committed && r == CUDA_SUCCESS) { /* granted; in the units ga_pass_end counts */
        ga_dev_granted(dev, bytes);
        ga_pass_recount(dev, bytes, ga_pass_units(GA_API_CUMEMALLOCPITCH, got));
        committed = 2;
    }
    return ga_pass_end(c, life, dev, committed, r, r == CUDA_SUCCESS ? *dptr : 0, got,
                       GA_API_CUMEMALLOCPITCH, t0, 0, NULL);
}

/* The stream-ordered allocations, each run with its stream's context current (ga_stream_ctx_enter:
 * the block is that context's, current or not). */
static CUresult ga_alloc_async_hook(CUdeviceptr *dptr, size_t bytesize, CUstream hStream, int ptsz)
{
    CUresult served;
    if (ga_capture_stream(hStream))
        return ptsz ? ga_real.cuMemAllocAsync_ptsz(dptr, bytesize, hStream)
                    : ga_real.cuMemAllocAsync(dptr, bytesize, hStream);
    if (ga_do_alloc_async(dptr, bytesize, hStream, GA_API_CUMEMALLOCASYNC, &served))
        return served;
    if (ptsz)
        GA_PASS_ALLOC(cuMemAllocAsync_ptsz, GA_API_CUMEMALLOCASYNC, (dptr, bytesize, hStream),
                      ga_pass_stream_ok(hStream), hStream, -1);
    GA_PASS_ALLOC(cuMemAllocAsync, GA_API_CUMEMALLOCASYNC, (dptr, bytesize, hStream),
                  ga_pass_stream_ok(hStream), hStream, -1);
}

static CUresult ga_alloc_pool_hook(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                   CUstream hStream, int ptsz)
{
    if (ga_capture_stream(ptsz ? GA_PTSZ_STREAM(hStream) : hStream))
        return ptsz ? ga_real.cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream)
                    : ga_real.cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
    int want = ga_pass_several_devices() ? ga_mempool_device(pool) : -1; /* the pool's device */
    if (ptsz)
        GA_PASS_ALLOC(cuMemAllocFromPoolAsync_ptsz, GA_API_CUMEMALLOCFROMPOOL,
                      (dptr, bytesize, pool, hStream), ga_pass_stream_ok(hStream), hStream, want);
    GA_PASS_ALLOC(cuMemAllocFromPoolAsync, GA_API_CUMEMALLOCFROMPOOL,
                  (dptr, bytesize, pool, hStream), ga_pass_stream_ok(hStream), hStream, want);
}

#define GA_IN_STREAM_CTX(s, call)                                                            \
    do {                                                                                     \
        int pushed_ = ga_stream_ctx_enter(s);                                                \
        CUresult r_ = (call);                                                                \
        ga_ctx_leave(pushed_);                                                               \
        return r_;                                                                           \
    } while (0)

GA_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemAllocAsync, (dptr, bytesize, hStream));
    GA_IN_STREAM_CTX(hStream, ga_alloc_async_hook(dptr, bytesize, hStream, 0));
}

GA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemAllocAsync_ptsz, (dptr, bytesize, hStream));
    hStream = GA_PTSZ_STREAM(hStream);
    GA_IN_STREAM_CTX(hStream, ga_alloc_async_hook(dptr, bytesize, hStream, 1));
}

GA_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                           CUstream hStream)
{
    GA_HOOK_ENTER(cuMemAllocFromPoolAsync, (dptr, bytesize, pool, hStream));
    GA_IN_STREAM_CTX(hStream, ga_alloc_pool_hook(dptr, bytesize, pool, hStream, 0));
}

GA_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemAllocFromPoolAsync_ptsz, (dptr, bytesize, pool, hStream));
    GA_IN_STREAM_CTX(hStream, ga_alloc_pool_hook(dptr, bytesize, pool, hStream, 1));
}

GA_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemFreeAsync, (dptr, hStream));
    return ga_do_free_async(dptr, hStream, GA_API_CUMEMFREEASYNC, ga_real.cuMemFreeAsync);
}

GA_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    GA_HOOK_ENTER(cuMemFreeAsync_ptsz, (dptr, hStream));
    hStream = GA_PTSZ_STREAM(hStream);
    return ga_do_free_async(dptr, hStream, GA_API_CUMEMFREEASYNC, ga_real.cuMemFreeAsync_ptsz);
}

GA_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    GA_HOOK_ENTER(cuMemCreate, (handle, size, prop, flags));
    /* prop is read only once the driver would read it: initialised, and flags 0 (which it must be,
     * its documentation says; the driver refuses others before reading prop). */
    if (!handle || !prop || !size || flags || ga_init_status() != CUDA_SUCCESS)
        return ga_count_refused(GA_API_CUMEMCREATE, 1), GA_REFUSAL_CODE(CUDA_SUCCESS, 0);
    uint64_t t0 = ga_timing ? ga_now() : 0;
    int want = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
    ga_ctx_t *c = NULL;
    int dev = -1, committed;
    unsigned life;
    CUresult r = ga_pass_begin(size, want, 1, &c, &dev, &committed, &life);
    CUresult bad = r == CUDA_ERROR_OUT_OF_MEMORY ? ga_pass_prop_ok(prop, size) : CUDA_SUCCESS;
    if (bad != CUDA_SUCCESS)
        return ga_count_refused(GA_API_CUMEMCREATE, 1), bad;
    if (r == CUDA_SUCCESS)
        r = ga_real.cuMemCreate(handle, size, prop, flags);
    return ga_pass_end(c, life, dev, committed, r, r == CUDA_SUCCESS ? (uint64_t)*handle : 0, size,
                       GA_API_CUMEMCREATE, t0, 1, NULL);
}

/* ---- the runtime: tag the thread, call the real function ---- */
#define GA_CUDART_CALL(name, api, args)                                                     \
    do {                                                                                   \
        if (!ga_real.name)                                                                 \
            __atomic_store_n(&ga_real.name,                                                \
                             (__typeof__(ga_real.name))ga_resolve_cudart(#name, (void *)name), \
                             __ATOMIC_RELEASE);                                            \
        if (!ga_real.name)                                                                 \
            return GA_CUDART_ERROR_INIT;                                                   \
        uint8_t prev_ = ga_tl_api;                                                         \
        ga_tl_api = (api);                                                                 \
        ga_cudart_error_t r_ = ga_real.name args;                                          \
        ga_tl_api = prev_;                                                                 \
        return r_;                                                                         \
    } while (0)

GA_EXPORT ga_cudart_error_t cudaMalloc(void **devPtr, size_t size)
{
    GA_CUDART_CALL(cudaMalloc, GA_API_CUDAMALLOC, (devPtr, size));
}

GA_EXPORT ga_cudart_error_t cudaFree(void *devPtr)
{
    GA_CUDART_CALL(cudaFree, GA_API_CUDAFREE, (devPtr));
}

GA_EXPORT ga_cudart_error_t cudaMemGetInfo(size_t *free, size_t *total)
{
    GA_CUDART_CALL(cudaMemGetInfo, ga_tl_api, (free, total));
}
