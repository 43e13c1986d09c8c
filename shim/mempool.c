/* gpuarena and the driver's memory pools.
 *
 * cuMemAllocFromPoolAsync (every mode) and cuMemAllocAsync (platform mode) are passed through:
 * their blocks come from one of the driver's memory pools. When such a block's free has passed
 * on its stream, the pool keeps the memory if its CU_MEMPOOL_ATTR_RELEASE_THRESHOLD is above 0
 * (PyTorch's cudaMallocAsync backend sets it to the maximum), until a synchronisation finds the
 * pool above its threshold or the pool is trimmed: the device still holds those bytes, so the cap
 * does too. Each device remembers the pools its pass-through blocks came from (asked of the
 * driver with CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE when a block is served), and what they keep,
 * the driver's own figures (reserved less used), stays committed:
 *   - a passed free's bytes move to the pools' kept figure instead of leaving the cap (never
 *     counted too low), and the next settle corrects the figure to what the driver says;
 *   - the figure is asked again before a pass-through allocation is put to the cap, after the
 *     program's synchronisations (the driver may have given memory back there) and for
 *     cuMemGetInfo, which counts kept bytes as free, since gpuarena gets them back on demand:
 *   - before any allocation is refused for the cap (ga_dev_trim) the pools are trimmed
 *     (cuMemPoolTrimTo to 0): kept memory never stands between the program and its cap.
 * Before (an outside test, 2026-12-06, helper-48 F2), the freed bytes left the cap when the stream
 * passed the free while the driver kept them: with PyTorch's settings, a program could hold the
 * cap in kept memory and the same again in live blocks.
 * A device lists every pool its blocks came from, however many (before, 8: what the 9th pool on
 * kept left the cap while the device held it, helper-69). The list grows on the heap; when host
 * memory for it runs out, the block that needed the room is given back to the driver, its pool
 * trimmed and the call refused with CUDA_ERROR_OUT_OF_MEMORY, as for the other pass-through
 * records (passthrough.c): a block whose pool is not counted would let what the pool keeps after
 * its free escape the cap, and counting it some other way (trimming that pool at every settle)
 * would be a second bookkeeping for a case that only a host out of memory reaches.
 * A pool the program destroys (cuMemPoolDestroy, hooked here) leaves the list and what it kept the
 * cap; it is trimmed just before, so that the driver has given that memory back whatever it does
 * with a pool whose blocks are still live. A pool whose figures the driver no longer gives
 * (CUDA_ERROR_INVALID_VALUE or _INVALID_HANDLE: gone) is dropped at the read, and the others still
 * count: before, one such pool froze the device's figure, and the cap stayed charged with memory
 * the driver had given back (helper-69).
 * A device with no pass-through stream-ordered block has no pool noted, and none of this costs it
 * anything but one load. State in ga_dev_t (pool_*), under pool_lock, which is taken last.
 */
#include "shim.h"

#include <pthread.h>
#include <stdlib.h>

/* Index of pool in dv's list, or -1. pool_lock held. */
static int ga_mempool_find(const ga_dev_t *dv, CUmemoryPool pool)
{
    int n = atomic_load_explicit(&dv->npools, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        if (dv->pools[i] == pool)
            return i;
    return -1;
}

/* Takes pools[i] out of dv's list (the last takes its place: the order means nothing).
 * pool_lock held. */
static void ga_mempool_drop_at(ga_dev_t *dv, int i)
{
    int n = atomic_load_explicit(&dv->npools, memory_order_relaxed);
    dv->pools[i] = dv->pools[n - 1];
    atomic_store_explicit(&dv->npools, n - 1, memory_order_release);
}

/* Room for one more pool in dv's list, doubled when full; 0 when host memory ran out (the list is
 * left as it was). pool_lock held. */
static int ga_mempool_room(ga_dev_t *dv)
{
    int n = atomic_load_explicit(&dv->npools, memory_order_relaxed);
    if (n < dv->pool_cap)
        return 1;
    if (dv->pool_cap > (1 << 24))
        return 0; /* sixteen million pools: no program has them; the doubling stays in range */
    int cap = dv->pool_cap ? dv->pool_cap * 2 : 8;
    CUmemoryPool *p = realloc(dv->pools, (size_t)cap * sizeof *p);
    if (!p)
        return 0;
    dv->pools = p;
    dv->pool_cap = cap;
    return 1;
}

/* What one pool keeps, reserved less used, by the driver's figures. */
static CUresult ga_mempool_read_one(CUmemoryPool pool, uint64_t *kept)
{
    cuuint64_t reserved = 0, used = 0;
    CUresult r = ga_real.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
    if (r == CUDA_SUCCESS)
        r = ga_real.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
    *kept = reserved > used ? reserved - used : 0;
    return r;
}

/* What dv's pools keep. A pool the driver no longer knows is dropped from the list and counts
 * nothing (see the file comment); 0 when a pool cannot be read for another reason (the caller
 * then keeps its figure). pool_lock held. */
static int ga_mempool_read(ga_dev_t *dv, uint64_t *kept)
{
    uint64_t sum = 0, one;
    for (int i = 0; i < atomic_load_explicit(&dv->npools, memory_order_relaxed);) {
        CUresult r = ga_mempool_read_one(dv->pools[i], &one);
        if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_HANDLE) {
            ga_mempool_drop_at(dv, i); /* pools[i] is now another pool: read it next */
            continue;
        }
        if (r != CUDA_SUCCESS)
            return 0;
        sum += one;
        i++;
    }
    *kept = sum;
    return 1;
}

/* Commits what dv's pools keep, as the driver says now; returns the bytes that left the cap. With
 * no pool left the figure is 0, which keeps npools == 0 meaning nothing kept. pool_lock held. */
static uint64_t ga_mempool_correct(int dev, ga_dev_t *dv)
{
    uint64_t kept, released = 0;
    if (!ga_mempool_read(dv, &kept))
        return 0;
    dv->pool_stale = 0;
    if (kept < dv->pool_kept) {
        released = dv->pool_kept - kept;
        ga_dev_uncommit(dev, released);
    } else if (kept > dv->pool_kept) {
        ga_dev_hold(dev, kept - dv->pool_kept); /* held, whatever the cap says */
    }
    dv->pool_kept = kept;
    return released;
}

int ga_mempool_note(int dev, CUdeviceptr p, CUmemoryPool *unlisted)
{
    CUmemoryPool pool = NULL;
    if (!ga_real.cuMemPoolGetAttribute || !ga_real.cuPointerGetAttribute ||
        ga_real.cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p) !=
            CUDA_SUCCESS || !pool)
        return 1;
    ga_dev_t *dv = ga_dev(dev);
    int listed = 1;
    ga_mutex_lock(&dv->pool_lock);
    if (ga_mempool_find(dv, pool) < 0 && (listed = ga_mempool_room(dv))) {
        int n = atomic_load_explicit(&dv->npools, memory_order_relaxed);
        dv->pools[n] = pool;
        atomic_store_explicit(&dv->npools, n + 1, memory_order_release);
    }
    dv->pool_stale = 1; /* the block may have taken kept memory */
    ga_mutex_unlock(&dv->pool_lock);
    if (!listed)
        *unlisted = pool;
    return listed;
}

int ga_mempool_unlisted(CUmemoryPool pool)
{
    return ga_real.cuMemPoolTrimTo && ga_real.cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS;
}

void ga_mempool_gone(int dev, uint64_t bytes)
{
    ga_dev_t *dv = ga_dev(dev);
    int kept = 0;
    if (atomic_load_explicit(&dv->npools, memory_order_acquire)) {
        ga_mutex_lock(&dv->pool_lock);
        /* asked again under the lock: a destroy may have emptied the list (and zeroed the figure) */
        if ((kept = atomic_load_explicit(&dv->npools, memory_order_relaxed) > 0)) {
            dv->pool_kept += bytes; /* still committed; the next settle asks the driver */
            dv->pool_stale = 1;
        }
        ga_mutex_unlock(&dv->pool_lock);
    }
    if (!kept)
        ga_dev_uncommit(dev, bytes);
}

uint64_t ga_mempool_settle(int dev, int trim)
{
    ga_dev_t *dv = ga_dev(dev);
    if (!atomic_load_explicit(&dv->npools, memory_order_acquire))
        return 0; /* no pool: nothing kept (ga_mempool_correct) */
    uint64_t released = 0;
    ga_mutex_lock(&dv->pool_lock);
    if (trim || dv->pool_stale) {
        int n = atomic_load_explicit(&dv->npools, memory_order_relaxed);
        if (trim && dv->pool_kept)
            for (int i = 0; i < n; i++)
                ga_real.cuMemPoolTrimTo(dv->pools[i], 0);
        released = ga_mempool_correct(dev, dv);
    }
    ga_mutex_unlock(&dv->pool_lock);
    return released;
}

void ga_mempool_settle_all(void)
{
    for (int d = 0; d < GA_MAX_DEVICES; d++) {
        ga_dev_t *dv = ga_dev(d);
        if (!atomic_load_explicit(&dv->npools, memory_order_acquire))
            continue;
        ga_mutex_lock(&dv->pool_lock);
        dv->pool_stale = 1; /* the driver may have given memory back in the synchronisation */
        ga_mutex_unlock(&dv->pool_lock);
        ga_mempool_settle(d, 0);
    }
}

uint64_t ga_mempool_kept(int dev)
{
    ga_dev_t *dv = ga_dev(dev);
    if (!atomic_load_explicit(&dv->npools, memory_order_acquire))
        return 0;
    ga_mutex_lock(&dv->pool_lock);
    uint64_t kept = dv->pool_kept;
    ga_mutex_unlock(&dv->pool_lock);
    return kept;
}

/* Whether device dev lists pool. */
static int ga_mempool_listed(int dev, CUmemoryPool pool)
{
    ga_dev_t *dv = ga_dev(dev);
    if (!atomic_load_explicit(&dv->npools, memory_order_acquire))
        return 0;
    ga_mutex_lock(&dv->pool_lock);
    int found = ga_mempool_find(dv, pool) >= 0;
    ga_mutex_unlock(&dv->pool_lock);
    return found;
}

/* A destroyed pool leaves dev's list, and dev's figure is asked of the pools left (what the
 * destroyed one kept leaves the cap). */
static void ga_mempool_forget(int dev, CUmemoryPool pool)
{
    ga_dev_t *dv = ga_dev(dev);
    if (!atomic_load_explicit(&dv->npools, memory_order_acquire))
        return;
    ga_mutex_lock(&dv->pool_lock);
    int i = ga_mempool_find(dv, pool);
    if (i >= 0) {
        ga_mempool_drop_at(dv, i);
        dv->pool_stale = 1; /* asked again at the next settle if a pool left cannot be read now */
        ga_mempool_correct(dev, dv);
    }
    ga_mutex_unlock(&dv->pool_lock);
}

/* ---- which device a pool's blocks come from ----
 * cuMemAllocFromPoolAsync takes its block on the pool's device, which need not be the stream's.
 * Counted on the stream's device before the call and moved after it (passthrough.c), the block
 * lay on the pool's device past its cap while the driver held it, and the stream's device
 * refused a block that its cap had no part in (an outside check, helper-114: 96 MiB on device 1
 * under a 64 MiB cap, the call then refused). So the pools the program creates are remembered
 * with their device (cuMemPoolCreate is hooked for this alone), and a device's default pool is
 * asked of the driver: the block is counted on its own device before the call. A pool not known
 * (no host memory to remember it, one made before the shim started) is still moved after. */
typedef struct ga_made_pool {
    CUmemoryPool pool;
    int dev;
} ga_made_pool_t;

static ga_mutex_t ga_made_lock;
static ga_made_pool_t *ga_made;
static size_t ga_nmade, ga_made_cap;

/* pool's entry, or NULL. ga_made_lock held. */
static ga_made_pool_t *ga_made_find(CUmemoryPool pool)
{
    for (size_t i = 0; i < ga_nmade; i++)
        if (ga_made[i].pool == pool)
            return &ga_made[i];
    return NULL;
}

static void ga_made_forget(CUmemoryPool pool)
{
    ga_mutex_lock(&ga_made_lock);
    ga_made_pool_t *e = ga_made_find(pool);
    if (e)
        *e = ga_made[--ga_nmade];
    ga_mutex_unlock(&ga_made_lock);
}

/* A forked child: a parent thread may have held the lock, and the parent's pools are not the
 * child's (registered at the first pool, whether or not any device is set up then). */
static void ga_made_fork_child(void)
{
    ga_mutex_init(&ga_made_lock);
    ga_nmade = 0;
}

static void ga_made_at_fork(void)
{
    pthread_atfork(NULL, NULL, ga_made_fork_child);
}

GA_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    GA_HOOK_ENTER(cuMemPoolCreate, (pool, poolProps));
    CUresult r = ga_real.cuMemPoolCreate(pool, poolProps);
    if (r != CUDA_SUCCESS || !pool || !poolProps ||
        poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return r;
    pthread_once(&once, ga_made_at_fork);
    ga_mutex_lock(&ga_made_lock);
    ga_made_pool_t *e = ga_made_find(*pool); /* a handle the driver gave again after a destroy */
    if (!e && ga_nmade == ga_made_cap && ga_made_cap < (1u << 24)) {
        size_t cap = ga_made_cap ? ga_made_cap * 2 : 8;
        ga_made_pool_t *m = realloc(ga_made, cap * sizeof *m);
        if (m)
            ga_made = m, ga_made_cap = cap;
    }
    if (!e && ga_nmade < ga_made_cap)
        e = &ga_made[ga_nmade++];
    if (e)
        *e = (ga_made_pool_t){*pool, poolProps->location.id};
    ga_mutex_unlock(&ga_made_lock);
    return r;
}

/* Each device's default pool as the driver last gave it (NULL: not asked), so that a block from a
 * default pool costs no driver call: every such cuMemAllocFromPoolAsync asked cuDeviceGetCount and
 * each device's cuDeviceGetDefaultMemPool up to the pool's (3 calls an allocation from device 1's
 * default pool on two devices, 9 on eight: an outside check, helper-116). A pool the program made
 * is looked up first, so a handle the driver gives again to a made pool is never taken for a
 * default one; a default pool the cache does not name is asked again, and the cache updated. */
static CUmemoryPool _Atomic ga_default_pool[GA_MAX_DEVICES];

int ga_mempool_device(CUmemoryPool pool)
{
    int dev = -1, n = 0;
    ga_mutex_lock(&ga_made_lock);
    ga_made_pool_t *e = pool ? ga_made_find(pool) : NULL;
    if (e)
        dev = e->dev;
    ga_mutex_unlock(&ga_made_lock);
    if (dev >= 0 || !pool)
        return dev;
    for (int d = 0; d < GA_MAX_DEVICES; d++)
        if (atomic_load_explicit(&ga_default_pool[d], memory_order_relaxed) == pool)
            return d;
    if (!ga_real.cuDeviceGetDefaultMemPool || !ga_real.cuDeviceGetCount ||
        ga_real.cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return -1;
    for (int d = 0; d < n && d < GA_MAX_DEVICES; d++) {
        CUmemoryPool def = NULL;
        if (ga_real.cuDeviceGetDefaultMemPool(&def, d) != CUDA_SUCCESS)
            continue;
        atomic_store_explicit(&ga_default_pool[d], def, memory_order_relaxed);
        if (def == pool)
            return d;
    }
    return -1;
}

/* A pool is listed by the device whose context's stream took a block from it, which may be more
 * than one device: each forgets it. A pool no device lists (none of its blocks was counted),
 * NULL, or a handle that is no pool goes to the driver untouched, which answers it. A listed pool
 * is trimmed first: a driver may keep a destroyed pool's memory until its last block is freed
 * ("the resources associated with the pool will be released automatically once there are no more
 * outstanding allocations"), and what it kept must leave the device when it leaves the cap. A
 * refused destroy (a device's default pool) leaves the pool listed, only trimmed. */
GA_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    GA_HOOK_ENTER(cuMemPoolDestroy, (pool));
    int listed = 0;
    for (int d = 0; pool && d < GA_MAX_DEVICES && !listed; d++)
        listed = ga_mempool_listed(d, pool);
    if (!listed) {
        CUresult r0 = ga_real.cuMemPoolDestroy(pool);
        if (r0 == CUDA_SUCCESS)
            ga_made_forget(pool);
        return r0;
    }
    if (ga_real.cuMemPoolTrimTo)
        ga_real.cuMemPoolTrimTo(pool, 0);
    CUresult r = ga_real.cuMemPoolDestroy(pool);
    for (int d = 0; r == CUDA_SUCCESS && d < GA_MAX_DEVICES; d++)
        ga_mempool_forget(d, pool);
    if (r == CUDA_SUCCESS)
        ga_made_forget(pool);
    if (r != CUDA_SUCCESS)
        ga_mempool_settle_all(); /* still listed, and trimmed: the figures are asked again */
    return r;
}

void ga_mempool_fork_child(ga_dev_t *dv)
{
    for (int d = 0; d < GA_MAX_DEVICES; d++) /* the parent's driver's handles */
        atomic_store(&ga_default_pool[d], NULL);
    ga_mutex_init(&dv->pool_lock); /* a parent thread may have held it */
    atomic_store(&dv->npools, 0); /* the parent's pools: a CUDA context is not the child's */
    dv->pool_kept = 0;
    dv->pool_stale = 0;
}
