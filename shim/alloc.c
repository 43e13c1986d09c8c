/* gpuarena allocation hooks: cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemFree_v2 and the v1 cuMemFree,
 * cuMemFreeAsync, and cuMemAllocAsync when a pool serves it.
 *
 * Every mode is the same path: the current context's pool (ctx.c) under the context's lock, one
 * lock per call and no process-wide lock (the counters are the context's; the in-use level is the
 * context's too while it is the only one, see ga_ctx_level_add). The clock is read only when statistics or a trace were asked for.
 * Before an out-of-memory is reported, idle memory of every pool on the device is given back
 * (empty regions, kept vmm granules, an unused preallocated region) and the allocation retried
 * once: memory one context no longer uses serves another.
 * A freed pool chunk is reused only once the device has passed the free (fence.c).
 * Frees of pointers the shim does not own go to the real driver untouched; a bad free of a pool
 * pointer is refused with CUDA_ERROR_INVALID_VALUE and leaves the pool as it was.
 */
#include "shim.h"

#include <string.h>

CUresult ga_status_to_cu(ga_status_t st)
{
    switch (st) {
    case GA_OK: return CUDA_SUCCESS;
    case GA_ENOMEM: return CUDA_ERROR_OUT_OF_MEMORY;
    case GA_ETOOBIG: return CUDA_ERROR_OUT_OF_MEMORY; /* as the driver answers such a size */
    case GA_ENOHOST: return CUDA_ERROR_OUT_OF_MEMORY; /* the host's: said apart (c->alloc_st) */
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static uint64_t ga_round(uint64_t n)
{
    return (n + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1);
}

/* ---- the records of stream-ordered blocks the pool served (c->async), and of those in a chunk
 * handed over whole (c->handed). The pool never sees a handover (fence.c): the chunk stays live
 * in it with the requested bytes of the allocation that made it, so its in_use_requested said 48
 * MiB for a 32 MiB block that took a freed 48 MiB chunk on its stream (an outside check). The
 * pool's invariant that a live chunk's requested bytes round to its size (check.c) stays true
 * there; the difference is kept here, per block, and taken off the pool's figure where the
 * statistics read it (ga_ctx_pool_stats). c->lock held. ---- */

uint64_t ga_async_asked(const ga_pentry_t *e)
{
    return ga_round(e->aux);
}

/* The bytes the pool counts as requested for the live stream-ordered block at p: its own request,
 * or for a handed-over chunk the request that made the chunk. 0: no such block (a cuMemAlloc
 * block freed with cuMemFreeAsync, whose figure the pool alone knows). */
size_t ga_async_pool_req(const ga_ctx_t *c, uintptr_t p)
{
    const ga_pentry_t *e = c->async.count ? ga_ptrmap_get(&c->async, p) : NULL;
    const ga_pentry_t *h = e && c->handed.count ? ga_ptrmap_get(&c->handed, p) : NULL;
    return h ? (size_t)h->aux : e ? (size_t)e->aux : 0;
}

/* p took a chunk whole whose requested bytes in the pool are pool_req; it asked for size. */
static void ga_async_handed(ga_ctx_t *c, uintptr_t p, size_t pool_req, size_t size)
{
    int64_t excess = (int64_t)pool_req - (int64_t)size;
    ga_ptrmap_put(&c->handed, &(ga_pentry_t){.key = p, .size = (uint64_t)excess, .aux = pool_req});
    c->req_excess += excess;
}

void ga_async_forget(ga_ctx_t *c, uintptr_t p)
{
    ga_pentry_t h;
    ga_ptrmap_take(&c->async, p, NULL);
    if (GA_UNLIKELY(c->handed.count) && ga_ptrmap_take(&c->handed, p, &h))
        c->req_excess -= (int64_t)h.size;
}

void ga_async_fini(ga_ctx_t *c)
{
    ga_ptrmap_fini(&c->async);
    ga_ptrmap_fini(&c->handed);
    memset(&c->async, 0, sizeof c->async);
    memset(&c->handed, 0, sizeof c->handed);
    c->req_excess = 0;
}

void ga_ctx_pool_stats(const ga_ctx_t *c, ga_stats_t *out)
{
    ga_pool_stats(c->pool, out);
    out->in_use_requested -= (uint64_t)c->req_excess;
}

/* Whether c, whose lock the caller took again after letting it go, is no longer the state of the
 * context the call began in (life: read under the lock before it was let go): dead, or dead and
 * reused meanwhile for another context (ga_ctx_reuse bumps life), whose pool the call would
 * otherwise serve from: a block of that context handed to a thread of a destroyed one, counted in
 * the other's pool and cap (an outside check's finding, helper-118 1). */
static inline int ga_ctx_gone(const ga_ctx_t *c, unsigned life)
{
    return atomic_load_explicit(&c->dead, memory_order_relaxed) ||
           atomic_load_explicit(&c->life, memory_order_relaxed) != life;
}

/* One allocation from c's pool; c->lock held (and taken again since life was read). Nothing here
 * waits for the device: what comes back after a wait (pending frees, empty regions) is
 * ga_ctx_give_back's, with the lock let go. */
static CUresult ga_pool_alloc_locked(ga_ctx_t *c, unsigned life, size_t size, uintptr_t *p)
{
    CUresult r = CUDA_SUCCESS;
    if (GA_UNLIKELY(ga_ctx_gone(c, life)))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    c->alloc_st = GA_OK;
    ga_pool_t *pool = ga_ctx_pool(c, &r);
    if (!pool)
        return r;
    ga_status_t st = ga_pool_alloc(pool, size, p);
    c->alloc_st = st;
    return ga_status_to_cu(st); /* size is non-zero here: too large to round is an OOM */
}

/* The errors after which a context cannot be used any more, whatever is called (a kernel's fault:
 * CUDA_ERROR_ILLEGAL_ADDRESS, the hardware stack, an illegal or misaligned instruction or address,
 * an invalid address space or program counter, a failed launch; cuda.h: "the process must be
 * terminated and relaunched"). */
static int ga_cu_sticky(CUresult r)
{
    return r == CUDA_ERROR_ILLEGAL_ADDRESS ||
           (r >= CUDA_ERROR_HARDWARE_STACK_ERROR && r <= CUDA_ERROR_LAUNCH_FAILED);
}

/* Said once: an allocation the driver refused with another code than out-of-memory. */
static void ga_refuse_driver_code(uint8_t api, size_t size, CUresult code, int dev)
{
    static _Atomic int said;
    if (!atomic_exchange(&said, 1))
        ga_log(GA_LOG_WARN, "%s of %zu bytes on device %d: the driver refused the memory with "
               "CUresult %d, not for lack of memory, and the program gets that code, as it would "
               "without gpuarena; 700, 719 and the other sticky errors stay until the process "
               "ends: the first CUDA call that failed is the cause (run with "
               "CUDA_LAUNCH_BLOCKING=1 to find it)", ga_api_name(api), size, dev, (int)code);
}

/* The allocation path of every mode; s and async: a cuMemAllocAsync on stream s. tried: the
 * caller's first attempt (ga_alloc_plain) found no room, so go straight to what comes before an
 * out-of-memory; t0: the caller's clock reading; lifep: the state's life the caller read under
 * the lock before it let it go (NULL: read here, at the first lock). Each time the lock is taken
 * again the state is looked at again (ga_ctx_gone): its context may have been destroyed, and the
 * state reused for another, meanwhile. */
static CUresult ga_alloc_common(ga_ctx_t *c, CUdeviceptr *dptr, size_t size, uint8_t api,
                                CUstream s, int async, int tried, uint64_t t0, const unsigned *lifep)
{
    uintptr_t p = 0;
    size_t got = 0; /* a pending chunk taken whole: its size, not size rounded */
    size_t req = 0; /* and the bytes the pool counts as requested for it */
    ga_mutex_lock(&c->lock);
    unsigned life = lifep ? *lifep : atomic_load_explicit(&c->life, memory_order_relaxed);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    /* A stream-ordered block is recorded, or not served: the record is what keeps it past
     * cuCtxDestroy (ctx.c, ga_ctx_orphan); served without one it went with its context, and the
     * program's later, legal cuMemFreeAsync freed another context's live block there (helper-47
     * F14). Room for the record first, so the put below cannot fail for a chunk taken under this
     * same hold of the lock. */
    int norecord = async && ga_ptrmap_reserve(&c->async, 1) != 0;
    if (!tried)
        c->reserve_err = CUDA_SUCCESS;
    if (norecord) {
        /* out-of-memory: host memory, said below */
    } else if (tried || lifep) {
        /* out-of-memory, unless the context went while the lock was let go: the retries below;
         * not tried (the caller found no pool, or a dead state): the pool's answer */
        if (ga_ctx_gone(c, life))
            r = CUDA_ERROR_CONTEXT_IS_DESTROYED;
        else if (!tried)
            r = ga_pool_alloc_locked(c, life, size, &p);
    } else if (async && !atomic_load_explicit(&c->dead, memory_order_relaxed) && c->npend_ev &&
               ga_ptrmap_reserve(&c->handed, 1) == 0 &&
               ga_fence_take_same_stream(c, s, size, &p, &got, &req)) {
        r = CUDA_SUCCESS; /* freed on s, not yet passed: later work on s comes after the free */
        c->counts.async_same_stream++;
    } else {
        if (GA_UNLIKELY(c->npend) && c->pool && !atomic_load_explicit(&c->dead, memory_order_relaxed) &&
            ga_fence_before_alloc(c, size)) {
            /* cuMemFree's pending chunks: the device waited for with the lock let go (fence.c) */
            ga_fence_mark_t m = ga_fence_mark_held(c);
            ga_mutex_unlock(&c->lock);
            CUresult sr = ga_fence_sync_unlocked(c, m);
            ga_mutex_lock(&c->lock);
            if (sr == CUDA_SUCCESS && !ga_ctx_gone(c, life)) /* else another context's list */
                ga_fence_passed(c, m);
        }
        r = ga_pool_alloc_locked(c, life, size, &p);
    }
    if (GA_UNLIKELY(r == CUDA_ERROR_OUT_OF_MEMORY) && c->pool && !norecord) {
        /* Before an out-of-memory, the context's own pending frees and empty regions first, each
         * wait made with the lock let go: waited for under it, every other thread of the context
         * (an allocation that fits, a free, cuMemGetInfo, NVML) and fork waited for the device's
         * queued work, for ever behind a stream waiting on one of them (h34 F6). */
        ga_mutex_unlock(&c->lock);
        size_t back = ga_ctx_give_back(c);
        ga_mutex_lock(&c->lock);
        if (back || ga_ctx_gone(c, life))
            r = ga_pool_alloc_locked(c, life, size, &p);
    }
    c->counts.async_served += async && r == CUDA_SUCCESS;
    if (GA_UNLIKELY(r == CUDA_ERROR_OUT_OF_MEMORY) && c->pool && !norecord) {
        /* Idle memory of every pool on the device first; one context lock at a time (two
         * threads trimming from two contexts must not wait on each other's lock). */
        int dev = c->dev; /* read under the lock: the state may be another device's after */
        ga_mutex_unlock(&c->lock);
        size_t freed = ga_dev_trim(dev);
        ga_mutex_lock(&c->lock);
        if (freed || ga_ctx_gone(c, life))
            r = ga_pool_alloc_locked(c, life, size, &p);
    }
    /* The driver refused the pool's cuMemAlloc_v2 for another reason than memory (a sticky
     * CUDA_ERROR_ILLEGAL_ADDRESS after a kernel fault, CUDA_ERROR_NOT_PERMITTED): that code is
     * the program's answer, as its own cuMemAlloc would have had it without gpuarena. It got
     * CUDA_ERROR_OUT_OF_MEMORY and an out-of-memory line (in grow mode, "from fragmentation ...
     * Try GPUARENA_MODE=vmm"), in platform mode too, where each cuMemAlloc is the driver's (an
     * outside check, helper-132, 2026-12-07). vmm maps granules with other calls than the
     * program's (cuMemCreate, cuMemMap, cuMemSetAccess): a code of those that only says the
     * device cannot serve vmm mode stays an out-of-memory whose line names it (oom.c), but a
     * sticky error, which the program's own cuMemAlloc would have had as well, is passed back. */
    CUresult drv = CUDA_SUCCESS;
    if (GA_UNLIKELY(r == CUDA_ERROR_OUT_OF_MEMORY) && !norecord && c->alloc_st != GA_ENOHOST) {
        CUresult why = ga_opt.mode != GA_MODE_VMM ? c->reserve_err
                       : ga_cu_sticky(c->map_err) ? c->map_err : CUDA_SUCCESS;
        if (why != CUDA_SUCCESS && why != CUDA_ERROR_OUT_OF_MEMORY)
            r = drv = why;
    }
    if (async && r == CUDA_SUCCESS &&
        ga_ptrmap_put(&c->async, &(ga_pentry_t){.key = p, .size = got ? got : ga_round(size),
                                               .aux = size}) != 0) {
        /* Only a block the pool served after the lock was let go (another thread's record took
         * the room meanwhile): never handed out, so back to the pool at once. */
        ga_pool_free(c->pool, p, NULL);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        norecord = 1;
    } else if (got && r == CUDA_SUCCESS && req != size) {
        ga_async_handed(c, p, req, size); /* room reserved before the take */
    }
    ga_oom_t oom; /* not zeroed: 2 KiB on the hot path; classify fills it on failure */
    oom.frag = 0, oom.len = 0;
    /* No host memory for the pool's records (or to make the pool): not the device's out-of-memory,
     * neither explained nor counted as one (helper-47 F1: it blamed fragmentation, the device or
     * the cap, and told the user to change settings that have nothing to do with it). */
    int nohost = norecord || (r == CUDA_ERROR_OUT_OF_MEMORY && c->alloc_st == GA_ENOHOST);
    if (GA_UNLIKELY(r == CUDA_ERROR_OUT_OF_MEMORY) && !nohost) {
        ga_oom_classify(&oom, c, api, size);
        c->counts.frag_failures += oom.frag != 0;
        c->counts.true_oom_failures += oom.frag == 0;
    }
    if (GA_LIKELY(atomic_load_explicit(&c->life, memory_order_relaxed) == life)) /* else not ours */
        ga_count_alloc(&c->counts, api, size, r == CUDA_SUCCESS, t0);
    if (r == CUDA_SUCCESS) {
        uint64_t held = got ? got : ga_round(size);
        ga_ctx_level_add(c, (int64_t)held);
    }
    ga_mutex_unlock(&c->lock);
    if (GA_UNLIKELY(norecord))
        ga_log(GA_LOG_WARN, "cuMemAllocAsync of %zu bytes refused (CUDA_ERROR_OUT_OF_MEMORY): host "
               "memory ran out for gpuarena's record of the stream-ordered block, which keeps it "
               "past cuCtxDestroy; free host memory (or lower the process's host use) and retry",
               size);
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)p;
    if (GA_UNLIKELY(nohost && !norecord))
        ga_refuse_nohost(ga_api_name(api), "the context's pool", size);
    if (GA_UNLIKELY(drv != CUDA_SUCCESS))
        ga_refuse_driver_code(api, size, drv, c->dev);
    ga_oom_report(&oom);
    if (GA_UNLIKELY(ga_tracing))
        ga_trace_event(r == CUDA_SUCCESS ? GA_EV_ALLOC : GA_EV_ALLOC_FAILED, api,
                       r == CUDA_SUCCESS ? *dptr : 0, size, (uint64_t)(uintptr_t)s, c->dev, t0, r);
    return r;
}

/* cuMemAlloc in a live context whose pool exists and has room: the whole call under one lock with
 * nothing else to decide (every allocation of a running program but its first and its failures).
 * Anything else, a failed attempt included (which changed nothing), goes on in ga_alloc_common. */
static CUresult ga_alloc_plain(ga_ctx_t *c, CUdeviceptr *dptr, size_t size, uint8_t api)
{
    uint64_t t0 = ga_timing ? ga_now() : 0;
    uintptr_t p = 0;
    int tried = 0;
    ga_mutex_lock(&c->lock);
    unsigned life = atomic_load_explicit(&c->life, memory_order_relaxed);
    if (GA_UNLIKELY(c->npend) && c->pool && !atomic_load_explicit(&c->dead, memory_order_relaxed) &&
        ga_fence_before_alloc(c, size)) {
        /* cuMemFree's pending chunks: the device waited for with the lock let go (fence.c); the
         * context is looked at again below: destroyed meanwhile, its state may be another
         * context's by now (ga_ctx_gone), whose pending list and pool are not this call's */
        ga_fence_mark_t m = ga_fence_mark_held(c);
        ga_mutex_unlock(&c->lock);
        CUresult sr = ga_fence_sync_unlocked(c, m);
        ga_mutex_lock(&c->lock);
        if (GA_UNLIKELY(ga_ctx_gone(c, life))) {
            ga_mutex_unlock(&c->lock);
            return ga_alloc_common(c, dptr, size, api, NULL, 0, 1, t0, &life); /* refused there */
        }
        if (sr == CUDA_SUCCESS) /* else nothing passed: the chunks stay pending */
            ga_fence_passed(c, m);
    }
    ga_pool_t *pool = c->pool;
    c->reserve_err = CUDA_SUCCESS;
    if (GA_LIKELY(pool && !atomic_load_explicit(&c->dead, memory_order_relaxed))) {
        ga_status_t st = ga_pool_alloc(pool, size, &p);
        if (GA_LIKELY(st == GA_OK)) {
            ga_count_alloc(&c->counts, api, size, 1, t0);
            ga_ctx_level_add(c, (int64_t)ga_round(size));
            ga_mutex_unlock(&c->lock);
            *dptr = (CUdeviceptr)p;
            if (GA_UNLIKELY(ga_tracing))
                ga_trace_event(GA_EV_ALLOC, api, *dptr, size, 0, c->dev, t0, CUDA_SUCCESS);
            return CUDA_SUCCESS;
        }
        c->alloc_st = st;
        tried = 1;
    }
    ga_mutex_unlock(&c->lock);
    return ga_alloc_common(c, dptr, size, api, NULL, 0, tried, t0, &life);
}

CUresult ga_do_alloc(CUdeviceptr *dptr, size_t size, uint8_t api)
{
    ga_ctx_t *c = ga_current();
    if (GA_UNLIKELY(!c)) { /* no context: the driver's own error */
        if (ga_current_unmade() >= 0 && dptr && size)
            return ga_count_refused(ga_tl_api ? ga_tl_api : api, 1),
                   ga_refuse_unmade(ga_api_name(ga_tl_api ? ga_tl_api : api), size);
        CUresult r = ga_real.cuMemAlloc_v2(dptr, size);
        if (r != CUDA_SUCCESS) /* a refused call, counted as the others (a recheck, helper-126) */
            ga_count_refused(ga_tl_api ? ga_tl_api : api, 1);
        return r;
    }
    if (ga_tl_api)
        api = ga_tl_api;
    if (GA_UNLIKELY(!dptr || !size))
        return ga_count_refused(api, 1), CUDA_ERROR_INVALID_VALUE;
    return ga_alloc_plain(c, dptr, size, api);
}

int ga_stream_ctx_enter(CUstream s)
{
    CUcontext sc = NULL, cur = NULL;
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || !ga_real.cuStreamGetCtx ||
        ga_real.cuStreamGetCtx(s, &sc) != CUDA_SUCCESS || !sc)
        return 0; /* the current context's stream, or one the driver refuses (its answer then) */
    if (ga_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == sc)
        return 0; /* the common case: nothing to push */
    return ga_ctx_enter(sc);
}

int ga_do_alloc_async(CUdeviceptr *dptr, size_t size, CUstream s, uint8_t api, CUresult *r)
{
    if (ga_opt.mode == GA_MODE_PLATFORM)
        return 0;
    ga_ctx_t *c = ga_current();
    if (!c) { /* no context: the driver's own answer */
        if (ga_current_unmade() < 0 || !dptr || !size)
            return 0;
        ga_count_refused(ga_tl_api ? ga_tl_api : api, 1);
        *r = ga_refuse_unmade(ga_api_name(ga_tl_api ? ga_tl_api : api), size);
        return 1;
    }
    /* The stream must be one the driver knows, as its own cuMemAllocAsync checks, before the
     * other arguments (a NULL dptr with an unknown stream answered CUDA_ERROR_INVALID_VALUE where
     * the driver answers CUDA_ERROR_INVALID_HANDLE: an outside check, 2026-12-07); asked without
     * querying it while a capture runs on the device (a query of a capturing stream is refused and
     * ends the capture, fence.c). */
    if (ga_real.cuStreamQuery) {
        CUcontext sc;
        CUresult q = ga_capture_on_dev(c->dev) && ga_real.cuStreamGetCtx ? ga_real.cuStreamGetCtx(s, &sc)
                                                                          : ga_real.cuStreamQuery(s);
        if (q != CUDA_SUCCESS && q != CUDA_ERROR_NOT_READY) {
            if (!dptr || !size)
                ga_count_refused(ga_tl_api ? ga_tl_api : api, 1);
            *r = q;
            return 1;
        }
    }
    if (!dptr || !size) {
        ga_count_refused(ga_tl_api ? ga_tl_api : api, 1);
        *r = CUDA_ERROR_INVALID_VALUE;
        return 1;
    }
    if (ga_tl_api)
        api = ga_tl_api;
    *r = ga_alloc_common(c, dptr, size, api, s, 1, 0, ga_timing ? ga_now() : 0, NULL);
    return 1;
}

/* A pool free's answer, and why the pool refused it (GA_OK if it did not): the warning is
 * written once the lock is let go (ga_free_refused). Eight bytes, returned in one register. */
typedef struct ga_freed {
    CUresult r;
    ga_status_t refused;
} ga_freed_t;

/* Frees a pool pointer of c, whose lock the caller holds; live_size: the size of the live
 * allocation at p (0: p starts none, the pool says why). A freed chunk goes back to the pool only
 * once the device has passed the free (fence.c), except in platform mode (the driver's own free),
 * under GPUARENA_FREE_SYNC=none for cuMemFree, and for a free whose device (cuMemFree) or stream
 * (cuMemFreeAsync) the caller has synchronised already (`synced`). A free the pool refuses leaves it unchanged. */
__attribute__((always_inline)) static inline ga_freed_t
ga_pool_free_held(ga_ctx_t *c, CUdeviceptr p, uint8_t api, uint64_t t0, CUstream s,
                  int stream_ordered, int synced, size_t live_size)
{
    size_t size = live_size;
    ga_status_t st = GA_OK;
    int leveled = 0; /* the IN_USE level taken down already */
    int fence = ga_pool_mode(c->pool) != GA_MODE_PLATFORM &&
                (stream_ordered || (ga_opt.free_sync != GA_FREE_SYNC_NONE && !synced));
    if (GA_UNLIKELY(c->npend) && ga_fence_is_pending(c, (uintptr_t)p)) {
        /* freed already, waiting for the device; a stream the driver refuses is refused first,
         * as the driver checks the stream before the pointer (helper-42 F10) */
        CUresult sr = stream_ordered && ga_real.cuStreamQuery ? ga_real.cuStreamQuery(s)
                                                              : CUDA_SUCCESS;
        if (sr != CUDA_SUCCESS && sr != CUDA_ERROR_NOT_READY)
            return (ga_freed_t){sr, GA_OK};
        st = GA_EDOUBLE;
    } else if (GA_UNLIKELY(!live_size)) {
        st = ga_pool_free(c->pool, (uintptr_t)p, NULL); /* says why, changes nothing */
        if (st == GA_OK)
            st = GA_EINVAL; /* not reached: the pool had no live allocation at p */
    } else if (fence) {
        CUresult fr = ga_fence_free(c, (uintptr_t)p, size, s, stream_ordered,
                                    stream_ordered ? ga_async_pool_req(c, (uintptr_t)p) : 0);
        if (fr != CUDA_SUCCESS)
            return (ga_freed_t){fr, GA_OK}; /* a stream the driver refuses: nothing freed */
    } else {
        c->unfenced |= !synced; /* before the free: it may unmap granules (backend.c) */
        /* The level first: a free that gives memory back (platform, vmm) writes a group member's
         * figures there, and they showed the block still in use beside the smaller reserved,
         * until the next publish (an outside test, 2026-12-06: IN USE 1 KiB, RESERVED 0 B). */
        ga_ctx_level_add(c, -(int64_t)size);
        c->release_gone = 0;
        st = ga_pool_free(c->pool, (uintptr_t)p, NULL);
        if (GA_UNLIKELY(st != GA_OK))
            ga_ctx_level_add(c, (int64_t)size); /* nothing freed */
        if (GA_UNLIKELY(st == GA_EHELD)) /* platform: the driver refused, the block stays live */
            return (ga_freed_t){c->release_err, GA_OK};
        leveled = 1;
        if (GA_UNLIKELY(c->release_gone) && ga_pool_mode(c->pool) == GA_MODE_PLATFORM) {
            /* the block was freed past gpuarena: gone, and answered as the driver answered (an
             * arena's free that gave back an empty region the driver no longer knew is the
             * program's good free of its own block) */
            c->release_gone = 0;
            if (GA_UNLIKELY(c->async.count))
                ga_async_forget(c, p);
            return (ga_freed_t){CUDA_ERROR_INVALID_VALUE, GA_OK};
        }
    }
    if (st != GA_OK)
        return (ga_freed_t){CUDA_ERROR_INVALID_VALUE, st};
    if (GA_UNLIKELY(c->async.count))
        ga_async_forget(c, p);
    if (!leveled)
        ga_ctx_level_add(c, -(int64_t)size);
    ga_count_free(&c->counts, api, t0);
    if (ga_timing && ga_opt.stats && ga_pool_mode(c->pool) != GA_MODE_PLATFORM) {
        /* The worst fragmentation seen, sampled where fragmentation is made (a figure of the
         * statistics report only: a trace alone does not need it). */
        ga_stats_t fs;
        ga_pool_stats(c->pool, &fs);
        double f = ga_fragmentation(&fs);
        if (f > c->counts.max_fragmentation)
            c->counts.max_fragmentation = f;
    }
    return (ga_freed_t){CUDA_SUCCESS, GA_OK};
}

/* A free's answer once the lock is let go: the warning if the pool refused it. */
static _Atomic int ga_told_refused; /* the warning is said once; the rest at level debug */

/* Once per process, as the out-of-memory explanations: a program freeing in a loop printed it
 * 2,000 times. Every refused free is counted (by_api's failed). Out of line: the free's hot path
 * keeps only the test. */
__attribute__((noinline, cold)) static void ga_free_refused_say(CUdeviceptr p, ga_status_t why)
{
    int first = !atomic_exchange(&ga_told_refused, 1);
    ga_log(first ? GA_LOG_WARN : GA_LOG_DEBUG, "free of %#llx refused: %s (the pool is "
           "unchanged); free each pointer an allocation returned, once%s",
           (unsigned long long)p, ga_status_str(why),
           first ? " (said once: later refused frees are counted in the statistics' by_api "
                   "failed, and listed with GPUARENA_LOG=debug)" : "");
}

static inline CUresult ga_free_refused(CUdeviceptr p, ga_freed_t f)
{
    if (GA_UNLIKELY(f.refused != GA_OK))
        ga_free_refused_say(p, f.refused);
    return f.r;
}

/* For ga_free_no_context, out of the free's path: when the call needs a current context (cuMemFree,
 * or a stream that names the current one; a created stream names its own), the driver's error for
 * the thread's (ga_current_status); else CUDA_SUCCESS. */
static __attribute__((noinline, cold)) CUresult
ga_free_no_context_cold(CUresult (*real_free)(CUdeviceptr, CUstream), CUstream s)
{
    if (real_free && s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD)
        return CUDA_SUCCESS;
    return ga_current_status();
}

/* One free of a pointer some context holds, for ga_with_owner (the owner's lock held). */
typedef struct ga_free_job {
    CUdeviceptr p;
    uint8_t api;
    uint64_t t0;
    CUresult (*real_free)(CUdeviceptr, CUstream); /* non-NULL: the stream-ordered call */
    CUresult (*plain_free)(CUdeviceptr); /* else the driver's cuMemFree of the call's ABI */
    CUstream s;
    int synced;               /* the stream (or, for cuMemFree, the device) was synchronised */
    CUresult sync_refused;    /* that synchronisation of the device was refused (the driver's
                                 answer): nothing passed */
    int sync_first;           /* out: synchronise first without the lock, then free: platform
                                 memory freed async, any free of an orphan pool's block, and a
                                 cuMemFree under GPUARENA_FREE_SYNC=device */
    ga_ctx_t *owner;          /* out */
    int owner_dev;            /* out: owner's device and life, read under its lock: once the lock */
    unsigned owner_life;      /* is let go the state may die and be reused on another device */
    ga_pentry_t gone;         /* out: the pass-through record the driver let go */
    int gone_later;           /* out: freed async, its bytes held until the stream passes it */
    int captured;             /* a cuMemFreeAsync on a stream being captured (ga_capture_stream) */
    int kept;                 /* out: a pool block so freed, kept allocated (ga_free_owned) */
    ga_status_t refused;      /* out: why the pool refused the free (GA_OK if it did not) */
} ga_free_job_t;

/* With no context current the driver refuses cuMemFree, and cuMemFreeAsync on the current
 * context's stream, with CUDA_ERROR_INVALID_CONTEXT and frees nothing (with a destroyed one current,
 * CUDA_ERROR_CONTEXT_IS_DESTROYED); so is a pool block of c kept: the driver's error then (it was
 * freed, and the program's later free refused as a double free: helper-46 F5). The pointer is not shown to the driver: a pool block may start a region the driver would
 * free whole. Not asked for a block of the thread's last context, which is current unless the
 * thread popped it (a driver call per free: ga_do_free's path skips it likewise; the pop hooks
 * make the thread forget that context, ctx.c). Called where the block is freed. */
static inline CUresult ga_free_no_context(const ga_ctx_t *c, const ga_free_job_t *j)
{
    return GA_UNLIKELY(c != ga_ctx_last()) ? ga_free_no_context_cold(j->real_free, j->s)
                                            : CUDA_SUCCESS;
}

static int ga_free_owned(ga_ctx_t *c, const ga_owner_t *o, void *arg)
{
    ga_free_job_t *j = arg;
    j->owner = c;
    if (o->in_pass && !j->real_free && !j->synced) {
        /* The driver's cuMemFree may wait for the device: it waits first, with no lock held
         * (managed memory, say: helper-42 F4), then the free finds nothing to wait for. */
        j->sync_first = 1;
        return CUDA_SUCCESS;
    }
    if (o->in_pass) {
        /* The driver first, and the record dropped only when the driver let it go. */
        j->owner_dev = c->dev;
        j->owner_life = atomic_load_explicit(&c->life, memory_order_relaxed);
        CUresult r = j->real_free ? j->real_free(j->p, j->s) : j->plain_free(j->p);
        if (r == CUDA_SUCCESS && ga_ptrmap_take(&c->pass, j->p, &j->gone)) {
            ga_count_free(&c->counts, j->api, j->t0);
            if (j->real_free)
                j->gone_later = ga_fence_pass_free(c, j->gone.size, j->s);
        } else if (r == CUDA_ERROR_INVALID_VALUE && !j->real_free &&
                   ga_driver_unknown((uintptr_t)j->p) && ga_ptrmap_take(&c->pass, j->p, &j->gone)) {
            /* freed past gpuarena (backend.c, ga_gone_said): its bytes leave the cap, and the
             * free answers as the driver did (they stayed counted for good: helper-130) */
            ga_gone_said((uintptr_t)j->p, j->gone.size, "cuMemFree answered "
                         "CUDA_ERROR_INVALID_VALUE");
        }
        return r;
    }
    if (GA_UNLIKELY(j->captured) && o->live_size && !ga_fence_is_pending(c, j->p)) {
        /* Freed into a graph: the driver frees such a block when the graph runs, after the
         * graph's own work on it, which gpuarena does not see; its event, recorded into the
         * graph, would answer done at once (a never recorded event is done), and platform
         * mode's wait for the stream is refused during a capture and ends it invalidated. So the
         * block stays allocated and counted, until its context goes (ga_free_any says so). */
        j->kept = 1;
        return CUDA_SUCCESS;
    }
    if (GA_UNLIKELY(atomic_load_explicit(&c->dead, memory_order_relaxed))) {
        /* An orphan pool's block (ctx.c): its granules go back at the free, so the device must
         * have passed the free first. */
        if (!j->synced) {
            j->sync_first = 1;
            return CUDA_SUCCESS;
        }
        if (j->sync_refused) /* nothing passed, and an orphan has no pending list: not freed */
            return j->sync_refused;
        CUresult nc = ga_free_no_context(c, j);
        return nc != CUDA_SUCCESS ? nc : ga_orphan_free(c, j->p, j->api, j->t0, &j->refused);
    }
    if (j->real_free && !j->synced && ga_pool_mode(c->pool) == GA_MODE_PLATFORM) {
        j->sync_first = 1; /* the stream is synchronised without the lock, then again */
        return CUDA_SUCCESS;
    }
    /* Not while a stream capture runs on the device: the synchronisation would be refused and
     * end the capture invalidated (an outside test, 2026-12-06); the driver's own cuMemFree
     * (platform) or the fence's pending list (device mode) then do as a capture allows. */
    if (!j->real_free && !j->synced && ga_opt.free_waits && o->live_size &&
        !ga_fence_is_pending(c, j->p) && !ga_capture_on_dev(c->dev)) {
        /* The device is waited for with no lock held: a thread whose free waits for work that
         * another thread must release (a stream waiting on the host) holds up no allocation,
         * memory query or fork of the others (helper-42 F4). In platform mode the driver's own
         * cuMemFree, made under the lock, then has nothing left to wait for. */
        j->sync_first = 1;
        return CUDA_SUCCESS;
    }
    CUresult nc = ga_free_no_context(c, j);
    if (GA_UNLIKELY(nc != CUDA_SUCCESS))
        return nc;
    /* The device wait GPUARENA_FREE_SYNC=device made for this free (ga_free_any, no lock held) is
     * a free synchronisation as the fence's are: it was not counted (an outside check,
     * 2026-12-06: free_syncs 0 after 20 frees that each synchronised the device). */
    int synced = j->synced && !j->sync_refused;
    if (synced && !j->real_free && ga_opt.free_sync == GA_FREE_SYNC_DEVICE)
        c->counts.free_syncs++;
    /* A pool pointer: cuMemFreeAsync is stream-ordered (an event on s, no synchronisation); once
     * its stream was synchronised (no event to be had: GA_FENCE_WAIT_FIRST) it frees at once. */
    ga_freed_t f = ga_pool_free_held(c, j->p, j->api, j->t0, j->s, j->real_free && !j->synced,
                                     synced, o->live_size);
    j->refused = f.refused;
    if (GA_UNLIKELY(f.r == GA_FENCE_WAIT_FIRST) && !j->synced) {
        j->sync_first = 1; /* the stream synchronised with the lock let go (ga_free_any) */
        return CUDA_SUCCESS;
    }
    return f.r;
}

#define GA_NO_OWNER (-1) /* no CUresult is negative */

/* Once per process, as the refused frees: a pool block freed on a capturing stream was kept
 * (ga_free_owned). */
__attribute__((noinline, cold)) static void ga_free_kept_say(CUdeviceptr p)
{
    static _Atomic int told;
    ga_log(atomic_exchange(&told, 1) ? GA_LOG_DEBUG : GA_LOG_WARN,
           "cuMemFreeAsync of %#llx on a stream being captured: the block stays allocated, and "
           "counted, until its context is destroyed: the graph frees it only when it runs, which "
           "gpuarena does not see, and its work may use the block until then; free it outside "
           "the capture (after the graph's last launch), or allocate it inside the capture with "
           "cuMemAllocAsync (graph memory) (said once)", (unsigned long long)p);
}

/* Shared by cuMemFree_v2, the v1 cuMemFree and the async frees (real_free non-NULL: the
 * stream-ordered call; else plain_free, the driver's cuMemFree of the caller's ABI). */
static CUresult ga_free_any(CUdeviceptr p, uint8_t api, CUresult (*real_free)(CUdeviceptr, CUstream),
                            CUstream s, CUresult (*plain_free)(CUdeviceptr))
{
    if (ga_tl_api)
        api = ga_tl_api;
    ga_free_job_t j = {.p = p, .api = api, .t0 = ga_timing ? ga_now() : 0, .real_free = real_free,
                       .plain_free = plain_free, .s = s, .refused = GA_OK,
                       .captured = real_free && ga_capture_stream(s)};
    int r = p ? ga_with_owner((uintptr_t)p, ga_free_owned, &j, GA_NO_OWNER) : GA_NO_OWNER;
    int dev = -1; /* the device of a free no context holds, when the shim knows it */
    if (r == CUDA_SUCCESS && j.sync_first) {
        /* Platform memory is the driver's: synchronise the stream (refused as the driver refuses
         * an unknown stream, the allocation kept), then the driver's own free. An orphan's block
         * freed with cuMemFree waits for every context on its device: work of any of them may
         * use it, and its granules go back at the free. */
        if (real_free)
            r = ga_real.cuStreamSynchronize ? ga_real.cuStreamSynchronize(s) : CUDA_SUCCESS;
        else /* as the driver's cuMemFree waits for the device; a refused wait passed nothing,
              * so the chunk is left to the fence (pending) instead of going back at once */
            j.sync_refused = ga_ctx_sync_device(j.owner);
        j.synced = 1;
        if (r == CUDA_SUCCESS)
            r = ga_with_owner((uintptr_t)p, ga_free_owned, &j, CUDA_ERROR_INVALID_VALUE);
    } else if (r == GA_NO_OWNER) {
        CUresult lr;
        if ((dev = ga_dev_free_loose((uint64_t)p, api, j.t0, real_free, s, &lr)) >= 0)
            r = lr; /* a stream-ordered allocation whose context is gone */
        else
            r = real_free ? real_free(p, s) : plain_free(p);
    }
    if (j.gone.key && j.gone_later) {
        ga_dev_in_use_add(j.owner_dev, -(int64_t)j.gone.size); /* the rest once the stream passed */
    } else if (j.gone.key && real_free && !j.captured &&
               !ga_pass_unwaited(j.owner, j.owner_life, s, j.gone.size)) {
        ga_dev_in_use_add(j.owner_dev, -(int64_t)j.gone.size); /* the rest once a wait passed it */
    } else if (j.gone.key) {
        /* no event: the stream passed the free first (ga_pass_unwaited), with no lock held (not a
         * capturing one: refused, and the capture ended invalidated; the graph's free, its bytes
         * leave now) */
        ga_mempool_gone(j.owner_dev, j.gone.size);
        ga_level_add(GA_LEVEL_RESERVED, -(int64_t)j.gone.size);
        ga_level_add(GA_LEVEL_PASSTHROUGH, -(int64_t)j.gone.size);
        ga_dev_in_use_add(j.owner_dev, -(int64_t)j.gone.size);
    }
    if (GA_UNLIKELY(ga_tl_unseen != NULL))
        ga_ctx_meet_unseen(); /* the free's stream's context, known from now (sync.c) */
    if (GA_UNLIKELY(j.kept))
        ga_free_kept_say(p);
    ga_free_refused(p, (ga_freed_t){(CUresult)r, j.refused});
    if (GA_UNLIKELY(r != CUDA_SUCCESS))
        ga_count_refused(api, 0);
    if (GA_UNLIKELY(ga_tracing) && p)
        ga_trace_event(GA_EV_FREE, api, p, 0, (uint64_t)(uintptr_t)s,
                       j.gone.key ? j.owner_dev : j.owner ? j.owner->dev : dev,
                       j.t0, (CUresult)r);
    return (CUresult)r;
}

/* cuMemFree of a live allocation in the pool of the context this thread last allocated in (the
 * common free: memory is mostly freed where it was allocated): the owner is known without the
 * search over contexts. Anything else goes through ga_free_any, which finds the same owner. */
CUresult ga_do_free(CUdeviceptr p, uint8_t api)
{
    ga_ctx_t *c = ga_ctx_last_fresh();
    if (GA_LIKELY(c && p && !atomic_load_explicit(&c->dead, memory_order_acquire))) {
        if (ga_tl_api)
            api = ga_tl_api;
        uint64_t t0 = ga_timing ? ga_now() : 0;
        size_t size;
        ga_mutex_lock(&c->lock);
        if (c->pool && !atomic_load_explicit(&c->dead, memory_order_relaxed) &&
            (size = ga_pool_live_size(c->pool, (uintptr_t)p)) != 0 && GA_LIKELY(!ga_opt.free_waits)) {
            ga_freed_t f = ga_pool_free_held(c, p, api, t0, NULL, 0, 0, size);
            ga_mutex_unlock(&c->lock);
            CUresult r = ga_free_refused(p, f);
            if (GA_UNLIKELY(r != CUDA_SUCCESS))
                ga_count_refused(api, 0);
            if (GA_UNLIKELY(ga_tracing))
                ga_trace_event(GA_EV_FREE, api, p, 0, 0, c->dev, t0, r);
            return r;
        }
        ga_mutex_unlock(&c->lock);
    }
    return ga_free_any(p, api, NULL, NULL, ga_real.cuMemFree_v2);
}

/* A free the pools refuse for its pointer (interior, twice, unknown) answers as the driver does
 * when its stream is one the driver does not know either: the stream's code, checked first by
 * the driver (it answered CUDA_ERROR_INVALID_VALUE where the driver answers
 * CUDA_ERROR_INVALID_HANDLE: an outside check, 2026-12-07). Asked on that path only, of
 * cuStreamGetCtx (a query of a stream could end a capture); the special handles need no asking. */
CUresult ga_do_free_async(CUdeviceptr p, CUstream s, uint8_t api,
                          CUresult (*real_free)(CUdeviceptr, CUstream))
{
    CUresult r = ga_free_any(p, api, real_free, s, ga_real.cuMemFree_v2);
    CUcontext sc;
    if (GA_UNLIKELY(r == CUDA_ERROR_INVALID_VALUE) && s && s != CU_STREAM_LEGACY &&
        s != CU_STREAM_PER_THREAD && ga_real.cuStreamGetCtx) {
        CUresult q = ga_real.cuStreamGetCtx(s, &sc); /* no query: it could end a capture */
        if (q == CUDA_ERROR_INVALID_HANDLE || q == CUDA_ERROR_INVALID_CONTEXT ||
            q == CUDA_ERROR_CONTEXT_IS_DESTROYED || q == CUDA_ERROR_NOT_INITIALIZED)
            r = q;
    }
    return r;
}

GA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    GA_HOOK_ENTER(cuMemAlloc_v2, (dptr, bytesize));
    return ga_do_alloc(dptr, bytesize, GA_API_CUMEMALLOC);
}

GA_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    GA_HOOK_ENTER(cuMemFree_v2, (dptr));
    return ga_do_free(dptr, GA_API_CUMEMFREE);
}

/* The driver's v1 free, for what the v1 cuMemFree passes on: its pointer came in 32 bits. */
static CUresult ga_real_free_v1(CUdeviceptr p)
{
    return ga_real.cuMemFree((CUdeviceptr_v1)p);
}

/* The v1 free (hooks.def says why): the _v2 free's path, the pointer widened. A v1 allocation is
 * a pass-through record (passthrough.c), freed and given back here or by cuMemFree_v2 alike; what
 * the shim does not own goes to the driver's v1 function, as the program asked. */
GA_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    GA_HOOK_ENTER(cuMemFree, (dptr));
    return ga_free_any((CUdeviceptr)dptr, GA_API_CUMEMFREE, NULL, NULL, ga_real_free_v1);
}

/* Pitch as the driver computes it on current GPUs: rows padded to 512 bytes. */
GA_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                      size_t Height, unsigned int ElementSizeBytes)
{
    GA_HOOK_ENTER(cuMemAllocPitch_v2, (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
    if (!ga_current() && ga_current_unmade() < 0) /* no context: the driver's own error */
        return ga_real.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    size_t pitch = (size_t)ga_round(WidthInBytes);
    size_t bytes;
    if (!dptr || !pPitch || !WidthInBytes || !Height ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) ||
        pitch < WidthInBytes || __builtin_mul_overflow(pitch, Height, &bytes)) {
        /* as the driver answers, an overflowing pitch * height included */
        ga_count_refused(GA_API_CUMEMALLOCPITCH, 1);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult r = ga_do_alloc(dptr, bytes, GA_API_CUMEMALLOCPITCH);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}
