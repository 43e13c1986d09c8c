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
 * A cuMemCreate handle's memory lives until the handle has been released as often as it was
 * created and retained (cuMemRetainAllocationHandle) and every mapping of it is unmapped (the
 * driver frees it only then), so its bytes stay under the cap until both have happened: the
 * device's table counts each handle's references and mappings, and a second table keeps each
 * mapping's address, size and handle for cuMemUnmap. A handle needs no context: one made
 * from a thread with none current is counted against the device it names, whatever context is
 * current; one whose location is not a device the driver has is the driver's to refuse, uncounted.
 * The runtime hooks (cudaMalloc, cudaFree, cudaMemGetInfo) only tag the thread with the entry
 * point and call the real runtime, which reaches the driver hooks underneath: the driver-level
 * hook then counts the call once, under the runtime's name.
 */
#include "shim.h"

/* A handle's aux in the device's table: the entry point, its references (cuMemCreate and each
 * cuMemRetainAllocationHandle, less each cuMemRelease) and its live mappings. */
#define GA_HANDLE_AUX(api, refs, maps) \
    ((uint64_t)(api) | (uint64_t)(refs) << 8 | (uint64_t)(maps) << 32)
#define GA_HANDLE_API(aux) ((uint8_t)((aux) & 0xff))
#define GA_HANDLE_REFS_MAX 0xffffffull
#define GA_HANDLE_REFS(aux) (((aux) >> 8) & GA_HANDLE_REFS_MAX)
#define GA_HANDLE_MAPS(aux) ((aux) >> 32)

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
    int recorded = 0, nohost = 0, survived = 0;
    ga_pentry_t e = {.key = key, .size = held, .aux = handle ? GA_HANDLE_AUX(api, 1, 0) : api};
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
        if (same && (handle || loose || !atomic_load(&c->dead)))
            nohost = !(recorded = ga_ptrmap_put(table, &e) == 0);
        else if (stream_ordered ? !same : ga_pass_survived(key))
            survived = 1; /* kept by the driver: recorded where its free finds it, below */
        else
            nohost = !(recorded = ga_pass_outlives(c, &e)) && stream_ordered;
    }
    ga_mutex_unlock(lock);
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

/* Gives back handle h's bytes (dv->lock not held): released and unmapped, its memory is gone; a
 * trace records the end of its life here, where the driver freed it. */
static void ga_handle_gone(int dev, uint64_t h, uint64_t size)
{
    ga_dev_uncommit(dev, size);
    ga_level_add(GA_LEVEL_RESERVED, -(int64_t)size);
    ga_level_add(GA_LEVEL_PASSTHROUGH, -(int64_t)size);
    ga_dev_in_use_add(dev, -(int64_t)size);
    if (GA_UNLIKELY(ga_tracing))
        ga_trace_event(GA_EV_FREE, GA_API_CUMEMRELEASE, h, 0, 0, dev, ga_timing ? ga_now() : 0,
                       CUDA_SUCCESS);
}

/* An import takes its reference in the driver before the shim counts it on the handle's record: a
 * release or an unmap of the handle's last counted reference in between gave its bytes back and
 * dropped the record, and the import, finding none, went uncounted while the driver kept the
 * memory (an outside recheck, helper-126: 40 MiB granted beside 32 MiB held under a 64 MiB cap).
 * A retain (cuMemRetainAllocationHandle) racing the unmap of a released handle's last mapping
 * went the same way. Imports and retains hold this lock written across the driver call and the
 * count; releases and unmaps of the program's handles hold it read (they do not wait for each
 * other). Taken before a device's lock.
 * A forked child starts with it free: a parent thread may have held it. */
static pthread_rwlock_t ga_ref_lock = PTHREAD_RWLOCK_INITIALIZER;

static void ga_ref_fork_child(void)
{
    pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
    ga_ref_lock = fresh;
}

static void ga_ref_at_fork(void)
{
    pthread_atfork(NULL, NULL, ga_ref_fork_child);
}

/* Before the lock's first use: a forked child gets it fresh. */
static void ga_ref_ready(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, ga_ref_at_fork);
}

/* Adds d_refs references and d_maps mappings to handle h of device d (dv->lock held); 1 and the
 * handle's size in *gone when that left it with neither, so its record went. 0: not the
 * program's handle on d, or still alive. */
static int ga_handle_adjust(ga_dev_t *dv, uint64_t h, int d_refs, int d_maps, uint64_t *gone)
{
    ga_pentry_t *e = h ? ga_ptrmap_get(&dv->handles, h) : NULL;
    if (!e)
        return 0;
    uint64_t refs = GA_HANDLE_REFS(e->aux), maps = GA_HANDLE_MAPS(e->aux);
    /* A count at its ceiling stays there: the handle stays counted rather than go early. */
    if (refs != GA_HANDLE_REFS_MAX)
        refs = d_refs < 0 && refs < (uint64_t)-d_refs ? 0
               : refs + (uint64_t)(int64_t)d_refs > GA_HANDLE_REFS_MAX ? GA_HANDLE_REFS_MAX
               : refs + (uint64_t)(int64_t)d_refs;
    maps = d_maps < 0 && maps < (uint64_t)-d_maps ? 0 : maps + (uint64_t)(int64_t)d_maps;
    e->aux = GA_HANDLE_AUX(GA_HANDLE_API(e->aux), refs, maps);
    if (refs || maps)
        return 0;
    *gone = e->size;
    ga_ptrmap_take(&dv->handles, h, NULL);
    return 1;
}

/* The device whose table holds handle h, or -1 (not one of the program's cuMemCreate handles). */
static int ga_handle_dev(uint64_t h)
{
    for (int d = 0; h && d < GA_MAX_DEVICES; d++) {
        ga_dev_t *dv = ga_dev(d);
        if (!atomic_load_explicit(&dv->known, memory_order_acquire))
            continue;
        ga_mutex_lock(&dv->lock);
        int found = ga_ptrmap_get(&dv->handles, h) != NULL;
        ga_mutex_unlock(&dv->lock);
        if (found)
            return d;
    }
    return -1;
}

/* The driver decides first, and the records change only when it did what was asked. The last
 * release of a handle still mapped leaves its bytes counted: the driver keeps the memory until
 * the last cuMemUnmap of it. The device's lock is held across the driver call: once the driver
 * has freed a handle it may hand the same value to another thread's cuMemCreate, whose record
 * must not be taken for this one's (that would leave this handle's bytes counted for ever and
 * the new one's uncounted). */
GA_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    GA_HOOK_ENTER(cuMemRelease, (handle));
    uint64_t t0 = ga_timing ? ga_now() : 0;
    int d = ga_handle_dev((uint64_t)handle);
    /* A handle of a vmm pool's granule is none of the program's (its memory is the program's
     * cuMemAlloc memory, which has no handle to release): refused as the driver refuses a handle
     * it does not know. Passed on, the driver took the pool's reference, and the pool's own
     * release later was refused (its bytes counted for good, and tried again on a value the
     * driver may have given to another handle since): a program's second release of its own
     * handle, whose value the driver had reused for a granule, reached it (an outside check,
     * helper-102). Asked only of handles that are not the program's. */
    if (d < 0 && ga_opt.mode == GA_MODE_VMM && ga_vmm_holds_handle((uint64_t)handle))
        return CUDA_ERROR_INVALID_VALUE;
    if (d < 0)
        return ga_real.cuMemRelease(handle); /* not one of the program's handles: untouched */
    ga_dev_t *dv = ga_dev(d);
    uint64_t size = 0;
    int gone = 0;
    ga_ref_ready();
    int nc = ga_nocancel_begin(); /* no cancel inside the driver with the lock held */
    pthread_rwlock_rdlock(&ga_ref_lock);
    ga_mutex_lock(&dv->lock);
    CUresult r = ga_real.cuMemRelease(handle);
    if (r == CUDA_SUCCESS) {
        gone = ga_handle_adjust(dv, (uint64_t)handle, -1, 0, &size);
        ga_count_free(&dv->counts, GA_API_CUMEMRELEASE, t0);
    }
    ga_mutex_unlock(&dv->lock);
    pthread_rwlock_unlock(&ga_ref_lock);
    ga_nocancel_end(nc);
    if (gone)
        ga_handle_gone(d, (uint64_t)handle, size);
    return r;
}

/* 1: an address in a vmm pool's range (live, interior or freed), not a pass-through pointer. */
static int ga_vmm_pool_owned(ga_ctx_t *c, const ga_owner_t *o, void *arg)
{
    (void)arg;
    return !o->in_pass && c->pool && ga_pool_mode(c->pool) == GA_MODE_VMM;
}

/* Another reference to the handle mapped at addr: one more cuMemRelease before it goes. */

GA_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    GA_HOOK_ENTER(cuMemRetainAllocationHandle, (handle, addr));
    if (!handle)
        return GA_REFUSAL_CODE(CUDA_SUCCESS, 0);
    /* A vmm pool's memory is the program's cuMemAlloc memory, for which the driver has no handle
     * to give: the granule's handle would outlive the pool's release of it (bytes off the cap)
     * and spans other allocations. The driver's answer for cuMemAlloc memory, then. */
    if (ga_opt.mode == GA_MODE_VMM && ga_with_owner((uintptr_t)addr, ga_vmm_pool_owned, NULL, 0))
        return CUDA_ERROR_INVALID_VALUE;
    ga_ref_ready(); /* as an import: no unmap ends the record between the two references */
    int nc = ga_nocancel_begin(); /* no cancel inside the driver with the lock held */
    pthread_rwlock_wrlock(&ga_ref_lock);
    CUresult r = ga_real.cuMemRetainAllocationHandle(handle, addr);
    int d = r == CUDA_SUCCESS ? ga_handle_dev((uint64_t)*handle) : -1;
    if (d >= 0) {
        ga_dev_t *dv = ga_dev(d);
        uint64_t size = 0;
        ga_mutex_lock(&dv->lock);
        ga_handle_adjust(dv, (uint64_t)*handle, 1, 0, &size);
        ga_mutex_unlock(&dv->lock);
    }
    pthread_rwlock_unlock(&ga_ref_lock);
    ga_nocancel_end(nc);
    return r;
}

/* An import (cuMemImportFromShareableHandle) that gives back one of the program's own handles (it
 * exported it: the same allocation) is one more reference to it, as a retain is: its bytes stay
 * under the cap until that one is released too. Uncounted, the program's cuMemRelease of the
 * handle it made gave the bytes back while the import kept the memory alive, and mapping the
 * import again counted nothing (an outside check's finding, helper-118 4). A handle gpuarena does
 * not know (another process's export) is that process's memory, counted there if anywhere, and
 * passes uncounted (README, Choices). */
GA_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                  CUmemAllocationHandleType shHandleType)
{
    GA_HOOK_ENTER(cuMemImportFromShareableHandle, (handle, osHandle, shHandleType));
    ga_ref_ready(); /* no release or unmap ends the record between the driver's count and ours */
    int nc = ga_nocancel_begin(); /* no cancel inside the driver with the lock held */
    pthread_rwlock_wrlock(&ga_ref_lock);
    CUresult r = ga_real.cuMemImportFromShareableHandle(handle, osHandle, shHandleType);
    int d = r == CUDA_SUCCESS && handle ? ga_handle_dev((uint64_t)*handle) : -1;
    if (d >= 0) {
        ga_dev_t *dv = ga_dev(d);
        uint64_t size = 0;
        ga_mutex_lock(&dv->lock);
        ga_handle_adjust(dv, (uint64_t)*handle, 1, 0, &size);
        ga_mutex_unlock(&dv->lock);
    }
    pthread_rwlock_unlock(&ga_ref_lock);
    ga_nocancel_end(nc);
    return r;
}

/* A mapping of one of the program's handles: counted on the handle, and kept by address for the
 * cuMemUnmap that ends it. Without host memory to keep it, the handle is left uncounted for this
 * mapping (its bytes may then come back at its release while still mapped) and it is said once. */
GA_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    GA_HOOK_ENTER(cuMemMap, (ptr, size, offset, handle, flags));
    /* Into a vmm pool's own range (which the program did not reserve): passed on, a mapping on a
     * granule the pool has not mapped made the pool's later mapping there fail, an out-of-memory
     * with room under the cap, and kept the range from being freed (an outside test, 2026-12-05). */
    if (ga_opt.mode == GA_MODE_VMM && ga_with_owner((uintptr_t)ptr, ga_vmm_pool_owned, NULL, 0))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = ga_real.cuMemMap(ptr, size, offset, handle, flags);
    int d = r == CUDA_SUCCESS ? ga_handle_dev((uint64_t)handle) : -1;
    if (d < 0)
        return r;
    ga_dev_t *dv = ga_dev(d);
    uint64_t unused = 0;
    ga_mutex_lock(&dv->lock);
    ga_pentry_t m = {.key = (uint64_t)ptr, .size = size, .aux = (uint64_t)handle};
    int kept = ptr && ga_ptrmap_put(&dv->maps, &m) == 0;
    if (kept)
        ga_handle_adjust(dv, (uint64_t)handle, 0, 1, &unused);
    ga_mutex_unlock(&dv->lock);
    static _Atomic int told;
    if (!kept && !atomic_exchange(&told, 1))
        ga_log(GA_LOG_WARN, "out of host memory to record a mapping of a cuMemCreate handle: its "
               "bytes may leave the cap at its cuMemRelease while still mapped");
    return r;
}

/* Ends the recorded mapping at address a on some device (its handle's mapping count, and the
 * handle's bytes if that was its last mapping after its last release); its size in *size, or 0
 * when no mapping of the program's handles starts at a. */
static void ga_unmap_one(uint64_t a, uint64_t *size)
{
    *size = 0;
    for (int d = 0; d < GA_MAX_DEVICES; d++) {
        ga_dev_t *dv = ga_dev(d);
        if (!atomic_load_explicit(&dv->known, memory_order_acquire))
            continue;
        ga_pentry_t m;
        uint64_t bytes = 0;
        int gone = 0;
        ga_mutex_lock(&dv->lock);
        int found = dv->maps.count && ga_ptrmap_take(&dv->maps, a, &m);
        if (found)
            gone = ga_handle_adjust(dv, m.aux, 0, -1, &bytes);
        ga_mutex_unlock(&dv->lock);
        if (found) {
            if (gone)
                ga_handle_gone(d, m.aux, bytes);
            *size = m.size;
            return;
        }
    }
}

/* The lowest recorded mapping address in [from, to), or 0: for a range that also holds mappings
 * the shim does not keep (another process's handle, a mapping it had no memory to record). */
static uint64_t ga_next_mapping(uint64_t from, uint64_t to)
{
    uint64_t best = 0;
    for (int d = 0; d < GA_MAX_DEVICES; d++) {
        ga_dev_t *dv = ga_dev(d);
        if (!atomic_load_explicit(&dv->known, memory_order_acquire))
            continue;
        ga_mutex_lock(&dv->lock);
        for (size_t i = 0; dv->maps.count && i <= dv->maps.mask; i++) {
            uint64_t k = dv->maps.slots[i].key;
            if (k && k >= from && k < to && (!best || k < best))
                best = k;
        }
        ga_mutex_unlock(&dv->lock);
    }
    return best;
}

/* The driver unmaps a whole mapped range, which may hold several mappings side by side: each one
 * recorded in it ends, in address order. */
GA_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    GA_HOOK_ENTER(cuMemUnmap, (ptr, size));
    /* The pool's granules are the program's cuMemAlloc memory, which the driver does not unmap:
     * passed on, this would take live allocations' memory from under them. */
    if (ga_opt.mode == GA_MODE_VMM && ga_with_owner((uintptr_t)ptr, ga_vmm_pool_owned, NULL, 0))
        return CUDA_ERROR_INVALID_VALUE;
    ga_ref_ready();
    int nc = ga_nocancel_begin(); /* no cancel inside the driver with the lock held */
    pthread_rwlock_rdlock(&ga_ref_lock);
    CUresult r = ga_real.cuMemUnmap(ptr, size);
    uint64_t a = (uint64_t)ptr, end = a + size < a ? UINT64_MAX : a + size;
    while (r == CUDA_SUCCESS && a && a < end) {
        uint64_t n;
        ga_unmap_one(a, &n);
        a = n ? a + n : ga_next_mapping(a + 1, end);
    }
    pthread_rwlock_unlock(&ga_ref_lock);
    ga_nocancel_end(nc);
    return r;
}

/* A program can free only an address range it reserved (the driver refuses any other base or
 * size). A vmm pool's range it did not reserve, but it can learn an address in it, and freed it
 * would take the pool's address space, mappings and all, from under live allocations: refused with
 * the driver's answer for a range it does not know. The pool's own frees call the driver directly
 * (backend.c). */
GA_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    GA_HOOK_ENTER(cuMemAddressFree, (ptr, size));
    if (ga_opt.mode == GA_MODE_VMM && ptr &&
        ga_with_owner((uintptr_t)ptr, ga_vmm_pool_owned, NULL, 0))
        return CUDA_ERROR_INVALID_VALUE;
    return ga_real.cuMemAddressFree(ptr, size);
}

/* Access to a range of the vmm pool's (which the program never reserved or mapped): passed on, a
 * program could make pool blocks, its own and other threads', unreadable or read-only, and the
 * pool would hand such granules out again (found by an outside test on 2026-12-05). Refused with
 * the driver's answer for a range it did not map, when the range's first or last byte lies in the
 * pool's range (the driver takes a range only inside one reservation, so one that only covers a
 * pool range from outside is refused by it anyway). The program's own ranges go to the driver,
 * and the pool's own calls go to it directly (backend.c). */
GA_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                  size_t count)
{
    GA_HOOK_ENTER(cuMemSetAccess, (ptr, size, desc, count));
    if (ga_opt.mode == GA_MODE_VMM && ptr && size &&
        (ga_with_owner((uintptr_t)ptr, ga_vmm_pool_owned, NULL, 0) ||
         ga_with_owner((uintptr_t)ptr + (size - 1), ga_vmm_pool_owned, NULL, 0)))
        return CUDA_ERROR_INVALID_VALUE;
    return ga_real.cuMemSetAccess(ptr, size, desc, count);
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
