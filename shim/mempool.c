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
 * A device with no pass-through stream-ordered block has no pool noted, and none of this costs it
 * anything but one load. State in ga_dev_t (pool_*), under pool_lock, which is taken last.
 */
#include "shim.h"

/* What dv's pools keep, reserved less used, by the driver's figures; 0 when one cannot be read
 * (the caller then keeps its figure). */
static int ga_mempool_read(const ga_dev_t *dv, int n, uint64_t *kept)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        cuuint64_t reserved = 0, used = 0;
        if (ga_real.cuMemPoolGetAttribute(dv->pools[i], CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                                          &reserved) != CUDA_SUCCESS ||
            ga_real.cuMemPoolGetAttribute(dv->pools[i], CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
                                          &used) != CUDA_SUCCESS)
            return 0;
        sum += reserved > used ? reserved - used : 0;
    }
    *kept = sum;
    return 1;
}

void ga_mempool_note(int dev, CUdeviceptr p)
{
    CUmemoryPool pool = NULL;
    if (!ga_real.cuMemPoolGetAttribute || !ga_real.cuPointerGetAttribute ||
        ga_real.cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p) !=
            CUDA_SUCCESS || !pool)
        return;
    ga_dev_t *dv = ga_dev(dev);
    ga_mutex_lock(&dv->pool_lock);
    int n = atomic_load_explicit(&dv->npools, memory_order_relaxed), seen = 0;
    for (int i = 0; i < n && !seen; i++)
        seen = dv->pools[i] == pool;
    if (!seen && n < GA_DEV_POOLS) {
        dv->pools[n] = pool;
        atomic_store_explicit(&dv->npools, n + 1, memory_order_release);
    } else if (!seen) {
        static _Atomic int told;
        if (!atomic_exchange(&told, 1))
            ga_log(GA_LOG_WARN, "device %d: stream-ordered blocks from more than %d memory pools; "
                   "what the others keep after frees is not counted toward the cap", dev,
                   GA_DEV_POOLS);
    }
    dv->pool_stale = 1; /* the block may have taken kept memory */
    ga_mutex_unlock(&dv->pool_lock);
}

void ga_mempool_gone(int dev, uint64_t bytes)
{
    ga_dev_t *dv = ga_dev(dev);
    if (!atomic_load_explicit(&dv->npools, memory_order_acquire)) {
        ga_dev_uncommit(dev, bytes);
        return;
    }
    ga_mutex_lock(&dv->pool_lock);
    dv->pool_kept += bytes; /* still committed; the next settle asks the driver */
    dv->pool_stale = 1;
    ga_mutex_unlock(&dv->pool_lock);
}

uint64_t ga_mempool_settle(int dev, int trim)
{
    ga_dev_t *dv = ga_dev(dev);
    int n = atomic_load_explicit(&dv->npools, memory_order_acquire);
    if (!n)
        return 0;
    uint64_t released = 0;
    ga_mutex_lock(&dv->pool_lock);
    if (trim || dv->pool_stale) {
        if (trim && dv->pool_kept)
            for (int i = 0; i < n; i++)
                ga_real.cuMemPoolTrimTo(dv->pools[i], 0);
        uint64_t kept;
        if (ga_mempool_read(dv, n, &kept)) {
            dv->pool_stale = 0;
            if (kept < dv->pool_kept) {
                released = dv->pool_kept - kept;
                ga_dev_uncommit(dev, released);
            } else if (kept > dv->pool_kept) {
                ga_dev_hold(dev, kept - dv->pool_kept); /* held, whatever the cap says */
            }
            dv->pool_kept = kept;
        }
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

void ga_mempool_fork_child(ga_dev_t *dv)
{
    ga_mutex_init(&dv->pool_lock); /* a parent thread may have held it */
    atomic_store(&dv->npools, 0); /* the parent's pools: a CUDA context is not the child's */
    dv->pool_kept = 0;
    dv->pool_stale = 0;
}
