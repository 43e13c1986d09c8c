/* simcuda memory: device allocations on host memory and the driver's memory pools (memory
 * information and pointer queries are sim_query.c's).
 *
 * Every allocation is its own anonymous mmap with MAP_NORESERVE, so a multi-GiB "device" block costs
 * nothing until touched and is page aligned (past the 512 bytes the contract asks for), placed in
 * the device's address range as a driver places it (sim_va.c: rising, freed ranges reused). Live
 * allocations sit in an array sorted by address: exact lookups (free) and interior lookups
 * (cuMemGetAddressRange, copy bounds) are both a binary search. Addresses the program mapped itself
 * with the VMM calls are sim_vmm.c's; the queries here ask it about any address not found here.
 *
 * Freeing follows the driver's stream semantics (sim_stream.c). cuMemFree_v2 first waits for the
 * work queued on every stream of the device, which is what the real driver's "this API may perform
 * implicit synchronization" (cuMemFree's documentation) amounts to for memory queued work may still
 * use: a program that launches, frees and reallocates is safe on the driver itself. cuMemFreeAsync
 * is stream-ordered: the allocation is marked (a second free of it is refused) and goes when the
 * stream reaches the free, bytes and all.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_alloc.h"

static sim_alloc_t *tab;            /* sorted by base, under sim_lock */
static size_t tab_len, tab_cap;

/* Memory pools: each device's default pool, which cuMemAllocAsync on the device takes from, and
 * the pools cuMemPoolCreate makes (device memory, pinned; see sim_pool_props_ok for what else is
 * refused), which cuMemAllocFromPoolAsync takes from when it names one. A handle this driver did
 * not make, or of a destroyed pool (NULL included, which tests have always passed), is taken as the
 * stream's device's default pool, as before pools could be created (the real driver refuses it).
 * Each pool has its own threshold, kept bytes, attributes and cuMemPoolTrimTo. When an
 * allocation goes and the pool's CU_MEMPOOL_ATTR_RELEASE_THRESHOLD is above 0, the pool keeps its
 * bytes: still device memory the process holds, taken first by the next stream-ordered allocation
 * of the device. It gives back what it holds above the threshold at the next stream, event or
 * context synchronisation ("the allocator will try to release memory back to the OS on the next
 * call to stream, event or context synchronize", cuMemPoolSetAttribute's documentation), and down to
 * a size at cuMemPoolTrimTo. Bytes, not placements: any allocation may reuse any kept bytes (the
 * real driver's chunks and their fragmentation are not modelled). Under sim_lock. */
typedef struct sim_pool {
    unsigned long long threshold; /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (default 0) */
    unsigned long long used;      /* bytes of live stream-ordered allocations */
    unsigned long long kept;      /* bytes kept from gone ones */
    unsigned long long used_high, reserved_high;
    int dev;
    /* cuMemPoolDestroy called with allocations of it live: its handle is refused, it keeps nothing,
     * and it goes with its last allocation ("the resources associated with the pool will be
     * released automatically once there are no more outstanding allocations", cuMemPoolDestroy) */
    int destroyed;
    struct sim_pool *next;
} sim_pool_t;
static sim_pool_t sim_pools[SIM_MAX_DEVICES]; /* the default pools */
static sim_pool_t *sim_created;               /* cuMemPoolCreate's, live or draining */

/* Device dev's default pool (its device set here: the array starts zeroed). */
static sim_pool_t *sim_default_pool_locked(int dev)
{
    sim_pools[dev].dev = dev;
    return &sim_pools[dev];
}

/* A live created pool whose handle is h, or NULL: found by comparing handles, so that a bogus one
 * is never read through. */
static sim_pool_t *sim_created_find_locked(CUmemoryPool h)
{
    for (sim_pool_t *p = sim_created; p; p = p->next)
        if ((CUmemoryPool)p == h && !p->destroyed)
            return p;
    return NULL;
}

/* The pool a stream-ordered allocation on dev takes from: h if it is a live created pool or a
 * device's default pool (another device's too: the block lies on the pool's device, whatever the
 * stream's; it took dev's default pool until helper-114), else dev's default pool (see above). */
static sim_pool_t *sim_pool_for_locked(CUmemoryPool h, int dev)
{
    sim_pool_t *p = h ? sim_created_find_locked(h) : NULL;
    for (int d = 0; h && !p && d < sim_cfg.devices; d++)
        if (h == (CUmemoryPool)&sim_pools[d])
            p = sim_default_pool_locked(d);
    return p ? p : sim_default_pool_locked(dev);
}

/* n bytes pool p starts (or stops) keeping: device memory the process holds in no allocation. */
static void sim_pool_keep_locked(sim_pool_t *p, unsigned long long n)
{
    p->kept += n;
    sim_counters.pool_kept_bytes += n;
    sim_pool_hold_locked(p->dev, n);
}

static void sim_pool_unkeep_locked(sim_pool_t *p, unsigned long long n)
{
    p->kept -= n;
    sim_counters.pool_kept_bytes -= n;
    sim_pool_drop_locked(p->dev, n);
}

/* A destroyed pool whose last allocation went: unlinked and freed. */
static void sim_pool_reap_locked(sim_pool_t *p)
{
    for (sim_pool_t **pp = &sim_created; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            free(p);
            return;
        }
}

static void sim_pool_highs_locked(sim_pool_t *p)
{
    if (p->used > p->used_high)
        p->used_high = p->used;
    if (p->used + p->kept > p->reserved_high)
        p->reserved_high = p->used + p->kept;
}

/* Gives back what pool p keeps beyond `keep` bytes reserved. */
static void sim_pool_release_locked(sim_pool_t *p, unsigned long long keep)
{
    unsigned long long reserved = p->used + p->kept;
    if (reserved <= keep)
        return;
    sim_pool_unkeep_locked(p, reserved - keep < p->kept ? reserved - keep : p->kept);
}

void sim_pools_settle(void)
{
    pthread_mutex_lock(&sim_lock);
    for (int d = 0; d < SIM_MAX_DEVICES; d++)
        if (sim_pools[d].kept)
            sim_pool_release_locked(&sim_pools[d], sim_pools[d].threshold);
    for (sim_pool_t *p = sim_created; p; p = p->next)
        if (p->kept)
            sim_pool_release_locked(p, p->threshold);
    pthread_mutex_unlock(&sim_lock);
}

/* Index of the first allocation whose base is above addr. */
static size_t sim_upper_locked(CUdeviceptr addr)
{
    size_t lo = 0, hi = tab_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tab[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The allocation containing addr, or NULL (sim_alloc.h). */
sim_alloc_t *sim_find_locked(CUdeviceptr addr)
{
    size_t i = sim_upper_locked(addr);
    if (i == 0)
        return NULL;
    sim_alloc_t *a = &tab[i - 1];
    return addr - a->base < a->size ? a : NULL;
}

static int sim_insert_locked(const sim_alloc_t *a)
{
    if (tab_len == tab_cap) {
        size_t cap = tab_cap ? tab_cap * 2 : 256;
        sim_alloc_t *t = realloc(tab, cap * sizeof *t);
        if (!t)
            return -1;
        tab = t, tab_cap = cap;
    }
    size_t i = sim_upper_locked(a->base);
    memmove(&tab[i + 1], &tab[i], (tab_len - i) * sizeof *tab);
    tab[i] = *a;
    tab_len++;
    return 0;
}

/* Unmaps and uncounts tab[i]. */
static void sim_remove_locked(size_t i)
{
    sim_alloc_t *a = &tab[i];
    sim_va_unmap_locked((void *)(uintptr_t)a->base, a->mapped);
    sim_uncharge_locked(a->dev, a->size);
    if (a->kind == SIM_ASYNC) {
        sim_pool_t *p = a->pool;
        p->used -= a->size;
        if (p->threshold && !p->destroyed) /* the pool keeps the bytes */
            sim_pool_keep_locked(p, a->size);
        else if (p->destroyed && !p->used)
            sim_pool_reap_locked(p);
    }
    memmove(&tab[i], &tab[i + 1], (tab_len - i - 1) * sizeof *tab);
    tab_len--;
}

/* A context's teardown frees its memory, but not stream-ordered allocations: "cuCtxDestroy() will
 * not destroy memory allocations by cuMemCreate(), cuMemAllocAsync() and cuMemAllocFromPoolAsync().
 * These memory allocations are not associated with any CUDA context and need to be destroyed
 * explicitly" (CUDA Driver API, cuCtxDestroy). Those outlive it, belonging to no context. */
void sim_free_ctx_memory_locked(const sim_ctx_t *c)
{
    for (size_t i = tab_len; i-- > 0;) {
        if (tab[i].ctx != c)
            continue;
        if (tab[i].kind == SIM_ASYNC)
            tab[i].ctx = NULL;
        else
            sim_remove_locked(i);
    }
}

/* The host mapping behind an allocation. low32: a v1 allocation, whose CUdeviceptr_v1 is 32 bits,
 * so the whole mapping must lie below 4 GiB: MAP_32BIT puts it in the first 2 GiB (x86-64 only);
 * where that flag is missing or that space is full, none is made and the caller answers
 * CUDA_ERROR_OUT_OF_MEMORY, the driver's answer for memory it cannot give. */
static void *sim_map(size_t mapped, int low32)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (low32) {
#ifdef MAP_32BIT
        flags |= MAP_32BIT;
#else
        return MAP_FAILED;
#endif
    }
    void *p = low32 ? mmap(NULL, mapped, PROT_READ | PROT_WRITE, flags, -1, 0)
                    : sim_va_map_locked(mapped); /* rising, as a driver's (sim_va.c) */
    if (p != MAP_FAILED && low32 && (uintptr_t)p + (mapped - 1) > UINT32_MAX) {
        munmap(p, mapped);
        return MAP_FAILED;
    }
    return p;
}

/* hpool: a stream-ordered allocation's pool handle (sim_pool_for_locked); its memory is on the
 * pool's device (a created pool's may be another than the context's). low32: sim_map. */
static CUresult sim_alloc_locked(const sim_ctx_t *c, size_t size, sim_kind_t kind, CUmemoryPool hpool,
                                 int low32, CUdeviceptr *out)
{
    long page = sysconf(_SC_PAGESIZE);
    if (size > SIZE_MAX - (size_t)page)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t mapped = (size + (size_t)page - 1) & ~((size_t)page - 1);
    /* A stream-ordered allocation takes what its pool keeps first. */
    sim_pool_t *pool = kind == SIM_ASYNC ? sim_pool_for_locked(hpool, c->dev) : NULL;
    int dev = pool ? pool->dev : c->dev;
    unsigned long long reuse = pool ? (pool->kept < size ? pool->kept : size) : 0;
    if (reuse)
        sim_pool_unkeep_locked(pool, reuse);
    if (sim_charge_locked(dev, size) != 0) {
        if (reuse)
            sim_pool_keep_locked(pool, reuse);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    void *p = sim_map(mapped, low32);
    sim_alloc_t a = {(CUdeviceptr)(uintptr_t)p, size, mapped, dev, c, kind, sim_next_id_locked(), 0,
                     pool};
    if (p == MAP_FAILED || sim_insert_locked(&a) != 0) {
        if (p != MAP_FAILED)
            sim_va_unmap_locked(p, mapped);
        sim_uncharge_locked(dev, size);
        if (reuse)
            sim_pool_keep_locked(pool, reuse);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (pool) {
        pool->used += size;
        sim_pool_highs_locked(pool);
    }
    *out = a.base;
    return CUDA_SUCCESS;
}

/* The common allocation path: context, arguments, latency, accounting (hpool: see
 * sim_alloc_locked; low32: sim_map). */
static CUresult sim_alloc(CUdeviceptr *dptr, size_t size, sim_kind_t kind, CUmemoryPool hpool,
                          int low32)
{
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r == CUDA_SUCCESS && (!dptr || size == 0))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        sim_latency();
        pthread_mutex_lock(&sim_lock);
        r = sim_alloc_locked(c, size, kind, hpool, low32, dptr);
        pthread_mutex_unlock(&sim_lock);
    }
    if (r != CUDA_SUCCESS)
        SIM_COUNT(failed_allocs);
    return r;
}

/* The allocation at exactly dptr, not already queued to be freed (under sim_lock). */
static sim_alloc_t *sim_freeable_locked(CUdeviceptr dptr)
{
    sim_alloc_t *a = sim_find_locked(dptr);
    return a && a->base == dptr && !a->free_queued ? a : NULL;
}

/* The common free path: only the exact base of a live allocation is accepted. The device's queued
 * work runs first (see the file comment), so nothing queued can write the bytes after they go. */
static CUresult sim_free(CUdeviceptr dptr)
{
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    sim_latency();
    pthread_mutex_lock(&sim_lock);
    sim_alloc_t *a = sim_freeable_locked(dptr);
    int dev = a ? a->dev : -1;
    pthread_mutex_unlock(&sim_lock);
    if (dev < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_streams_drain_dev(dev))
        SIM_COUNT(implicit_syncs);
    pthread_mutex_lock(&sim_lock);
    if ((a = sim_freeable_locked(dptr)))
        sim_remove_locked((size_t)(a - tab));
    else
        r = CUDA_ERROR_INVALID_VALUE; /* another thread freed it meanwhile */
    pthread_mutex_unlock(&sim_lock);
    return r;
}

CUresult sim_free_queued(CUdeviceptr p)
{
    pthread_mutex_lock(&sim_lock);
    sim_alloc_t *a = sim_find_locked(p);
    int ok = a && a->base == p && a->free_queued;
    if (ok)
        sim_remove_locked((size_t)(a - tab));
    pthread_mutex_unlock(&sim_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    SIM_COUNT(alloc_calls);
    SIM_ENTER_ALLOC(cuMemAlloc_v2);
    return sim_alloc(dptr, bytesize, SIM_PLAIN, NULL, 0);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    SIM_COUNT(alloc_calls);
    SIM_ENTER_ALLOC(cuMemAllocPitch_v2);
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    int bad = !pPitch || WidthInBytes == 0 || Height == 0 || pitch < WidthInBytes ||
              (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) ||
              pitch > SIZE_MAX / Height;
    CUresult r = sim_alloc(dptr, bad ? 0 : pitch * Height, SIM_PLAIN, NULL, 0);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    SIM_COUNT(free_calls);
    SIM_ENTER(cuMemFree_v2);
    return sim_free(dptr);
}

/* ---- the v1 ABI (before CUDA 3.2: 32-bit pointers and sizes), still exported by the driver and
 * answered by cuGetProcAddress below version 3020. The documentation no longer describes these
 * functions (cuda.h declares them only for the driver's own build); read here as the _v2 calls
 * with 32-bit fields: an allocation placed below 4 GiB (or CUDA_ERROR_OUT_OF_MEMORY when it cannot
 * be), the same table, so either free releases it, and figures above 4 GiB clamped to UINT_MAX. */

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    SIM_COUNT(v1_alloc_calls);
    SIM_ENTER_ALLOC(cuMemAlloc);
    CUdeviceptr p = 0;
    CUresult r = sim_alloc(dptr ? &p : NULL, bytesize, SIM_PLAIN, NULL, 1);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)p;
    return r;
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                         unsigned int Height, unsigned int ElementSizeBytes)
{
    SIM_COUNT(v1_alloc_calls);
    SIM_ENTER_ALLOC(cuMemAllocPitch);
    unsigned long long pitch = ((unsigned long long)WidthInBytes + 511) & ~511ull;
    int bad = !dptr || !pPitch || WidthInBytes == 0 || Height == 0 || pitch > UINT32_MAX ||
              (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16);
    CUdeviceptr p = 0;
    CUresult r = sim_alloc(&p, bad ? 0 : (size_t)(pitch * Height), SIM_PLAIN, NULL, 1);
    if (r == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)p;
        *pPitch = (unsigned int)pitch;
    }
    return r;
}

CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    SIM_COUNT(v1_free_calls);
    SIM_ENTER(cuMemFree);
    return sim_free((CUdeviceptr)dptr);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    SIM_COUNT(managed_alloc_calls);
    SIM_ENTER_ALLOC(cuMemAllocManaged);
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        bytesize = 0; /* rejected as an invalid value by the common path */
    return sim_alloc(dptr, bytesize, SIM_MANAGED, NULL, 0);
}

/* ---- stream-ordered allocation: memory is taken at the call (earlier than the stream needs it,
 * which is always safe) and given back when the stream reaches the free ---- */

static CUresult sim_alloc_async(CUdeviceptr *dptr, size_t size, CUstream s, CUmemoryPool hpool)
{
    if (sim_check_init() == CUDA_SUCCESS && !sim_stream_ok(s)) {
        SIM_COUNT(failed_allocs);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    CUresult r;
    if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
        /* a created stream's own context allocates, current or not (sim_stream_here says why) */
        sim_ctx_t *c;
        sim_stream_t *st;
        r = sim_stream_here(s, 0, &c, &st);
        if (r == CUDA_SUCCESS && (!dptr || size == 0))
            r = CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS) {
            sim_latency();
            pthread_mutex_lock(&sim_lock);
            r = sim_alloc_locked(c, size, SIM_ASYNC, hpool, 0, dptr);
            pthread_mutex_unlock(&sim_lock);
        }
        if (r != CUDA_SUCCESS)
            SIM_COUNT(failed_allocs);
    } else {
        r = sim_alloc(dptr, size, SIM_ASYNC, hpool, 0);
    }
    if (r == CUDA_SUCCESS)
        sim_hold_async_alloc();
    return r;
}

static CUresult sim_free_async(CUdeviceptr dptr, CUstream h, int per_thread)
{
    if (sim_check_init() == CUDA_SUCCESS && !sim_stream_ok(h))
        return CUDA_ERROR_INVALID_HANDLE; /* the stream is checked first, as before streams ran */
    sim_stream_t *s;
    CUresult r = sim_stream_here(h, per_thread, NULL, &s);
    if (r != CUDA_SUCCESS)
        return r;
    sim_latency();
    pthread_mutex_lock(&sim_lock);
    sim_alloc_t *a = sim_freeable_locked(dptr);
    if (a)
        a->free_queued = 1;
    pthread_mutex_unlock(&sim_lock);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    sim_work_t w = {.kind = SIM_WORK_FREE, .ptr = dptr};
    r = sim_stream_submit(s, &w, NULL, 0, NULL);
    if (r != CUDA_SUCCESS) { /* not queued: the allocation stays */
        pthread_mutex_lock(&sim_lock);
        if ((a = sim_find_locked(dptr)) && a->base == dptr)
            a->free_queued = 0;
        pthread_mutex_unlock(&sim_lock);
    }
    return r;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_COUNT(async_alloc_calls);
    SIM_ENTER_ALLOC(cuMemAllocAsync);
    return sim_alloc_async(dptr, bytesize, hStream, NULL);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_COUNT(async_alloc_calls);
    SIM_ENTER_ALLOC(cuMemAllocAsync_ptsz);
    return sim_alloc_async(dptr, bytesize, hStream, NULL);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    SIM_COUNT(pool_alloc_calls);
    SIM_ENTER_ALLOC(cuMemAllocFromPoolAsync);
    return sim_alloc_async(dptr, bytesize, hStream, pool);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    SIM_COUNT(pool_alloc_calls);
    SIM_ENTER_ALLOC(cuMemAllocFromPoolAsync_ptsz);
    return sim_alloc_async(dptr, bytesize, hStream, pool);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    SIM_COUNT(async_free_calls);
    SIM_ENTER(cuMemFreeAsync);
    return sim_free_async(dptr, hStream, 0);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    SIM_COUNT(async_free_calls);
    SIM_ENTER(cuMemFreeAsync_ptsz);
    return sim_free_async(dptr, hStream, 1);
}

/* ---- memory pools ---- */

/* The pool of handle h, default or created and not destroyed, or NULL; under sim_lock. */
static sim_pool_t *sim_pool_find_locked(CUmemoryPool h)
{
    for (int d = 0; d < sim_cfg.devices && d < SIM_MAX_DEVICES; d++)
        if (h == (CUmemoryPool)&sim_pools[d])
            return sim_default_pool_locked(d);
    return sim_created_find_locked(h);
}


static CUresult sim_dev_pool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (dev < 0 || dev >= sim_cfg.devices)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    *pool = (CUmemoryPool)&sim_pools[dev];
    return CUDA_SUCCESS;
}

SIM_WRAP(cuDeviceGetDefaultMemPool, sim_dev_pool, (CUmemoryPool *pool_out, CUdevice dev), (pool_out, dev))
SIM_WRAP(cuDeviceGetMemPool, sim_dev_pool, (CUmemoryPool *pool, CUdevice dev), (pool, dev))

/* What cuMemPoolCreate models: pinned device memory of a device the driver has, no export handle
 * types, no size limit or usage bits. The rest is refused with the driver's codes: arguments its
 * documentation calls invalid (a type that is not pinned, a location that is no device, or the
 * current thread's NUMA node, a Windows security attribute, reserved bytes) CUDA_ERROR_INVALID_VALUE;
 * what a driver may lack (host pools, IPC handle types, maxSize, usage)
 * CUDA_ERROR_NOT_SUPPORTED. */
static CUresult sim_pool_props_ok(const CUmemPoolProps *pp)
{
    if (pp->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || pp->win32SecurityAttributes)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof pp->reserved; i++)
        if (pp->reserved[i])
            return CUDA_ERROR_INVALID_VALUE;
    if (pp->location.type == CU_MEM_LOCATION_TYPE_HOST ||
        pp->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (pp->location.type != CU_MEM_LOCATION_TYPE_DEVICE || pp->location.id < 0 ||
        pp->location.id >= sim_cfg.devices)
        return CUDA_ERROR_INVALID_VALUE;
    if (pp->handleTypes != CU_MEM_HANDLE_TYPE_NONE || pp->maxSize || pp->usage)
        return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    SIM_COUNT(pool_create_calls);
    SIM_ENTER(cuMemPoolCreate);
    CUresult r = sim_check_init();
    if (r == CUDA_SUCCESS && (!pool || !poolProps))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = sim_pool_props_ok(poolProps);
    sim_pool_t *p = r == CUDA_SUCCESS ? calloc(1, sizeof *p) : NULL;
    if (r != CUDA_SUCCESS || !p)
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
    p->dev = poolProps->location.id;
    pthread_mutex_lock(&sim_lock);
    p->next = sim_created;
    sim_created = p;
    sim_counters.pools_live++;
    pthread_mutex_unlock(&sim_lock);
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

/* A created pool goes: what it keeps is given back to the device at once; with allocations of it
 * still live (or frees of them not yet passed on their streams), the call returns at once and the
 * pool's memory goes with its last allocation, which stays usable till then (cuMemPoolDestroy's
 * documentation). A default pool cannot be destroyed ("A device's default memory pool cannot be
 * destroyed"), nor a handle that is no pool, NULL, or one already destroyed: CUDA_ERROR_INVALID_VALUE. */
CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    SIM_COUNT(pool_destroy_calls);
    SIM_ENTER(cuMemPoolDestroy);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_lock);
    sim_pool_t *p = sim_created_find_locked(pool);
    if (p) {
        sim_pool_unkeep_locked(p, p->kept);
        p->destroyed = 1;
        sim_counters.pools_live--;
        sim_counters.pools_destroyed++;
        if (!p->used)
            sim_pool_reap_locked(p);
    }
    pthread_mutex_unlock(&sim_lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    SIM_COUNT(pool_trim_calls);
    SIM_ENTER(cuMemPoolTrimTo);
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_lock);
    sim_pool_t *p = sim_pool_find_locked(pool);
    if (p)
        sim_pool_release_locked(p, minBytesToKeep);
    pthread_mutex_unlock(&sim_lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The pool attributes, read (set 0) or written: the byte counts are cuuint64_t, the reuse
 * policies int (always on here; a value written is taken and not used), and of the high
 * watermarks only a reset to zero may be written. */
static CUresult sim_pool_attr_locked(sim_pool_t *p, CUmemPool_attribute attr, void *value, int set)
{
    CUresult r = CUDA_SUCCESS;
    cuuint64_t *u = value;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        if (!set)
            *(int *)value = 1;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        if (set)
            p->threshold = *u;
        else
            *u = p->threshold;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        if (set)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            *u = attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ? p->used : p->used + p->kept;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: {
        unsigned long long *high = attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH ? &p->used_high
                                                                         : &p->reserved_high;
        if (!set)
            *u = *high;
        else if (*u != 0)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            *high = attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH ? p->used : p->used + p->kept;
        break;
    }
    default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    return r;
}

/* A pool attribute of handle pool, under sim_lock (the pool may be destroyed meanwhile). */
static CUresult sim_pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value, int set)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_lock);
    sim_pool_t *p = sim_pool_find_locked(pool);
    r = p && value ? sim_pool_attr_locked(p, attr, value, set) : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&sim_lock);
    return r;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_ENTER(cuMemPoolSetAttribute);
    return sim_pool_attr(pool, attr, value, 1);
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_ENTER(cuMemPoolGetAttribute);
    sim_hold_pool_query();
    return sim_pool_attr(pool, attr, value, 0);
}
