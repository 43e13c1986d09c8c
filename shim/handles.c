/* gpuarena: the program's own VMM handles (cuMemCreate, split from passthrough.c, which makes and
 * records them): their references (cuMemRelease, cuMemRetainAllocationHandle,
 * cuMemImportFromShareableHandle), their mappings (cuMemMap, cuMemUnmap), and the vmm pool's
 * range kept from the program's calls (cuMemAddressFree, cuMemSetAccess).
 *
 * A handle's memory lives until it has been released as often as it was created, retained or
 * imported, and every mapping of it is unmapped (the driver frees it only then), so its bytes stay
 * under the cap until both have happened: the device's pass-through table counts each handle's
 * references and mappings (handle_aux.h), and a second table keeps each mapping's address, size
 * and handle for cuMemUnmap.
 */
#include "shim.h"
#include "handle_aux.h"

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

/* The driver gave one more reference to handle h (a retain, an import of the program's own
 * export): counted on its record, when it is one of the program's handles. */
static void ga_handle_one_more(uint64_t h)
{
    int d = ga_handle_dev(h);
    if (d < 0)
        return;
    ga_dev_t *dv = ga_dev(d);
    uint64_t size = 0;
    ga_mutex_lock(&dv->lock);
    ga_handle_adjust(dv, h, 1, 0, &size);
    ga_mutex_unlock(&dv->lock);
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
    if (r == CUDA_SUCCESS)
        ga_handle_one_more((uint64_t)*handle);
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
    if (r == CUDA_SUCCESS && handle)
        ga_handle_one_more((uint64_t)*handle);
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
