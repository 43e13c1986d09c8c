/* fence_event.c: the events that fence stream-ordered frees, for fence.c's pending list (which
 * keeps the chunks and the synchronisations that return them; shim.h's fence section is the
 * interface of both). Events are kept in a small free list per context (created with
 * CU_EVENT_DISABLE_TIMING, the cheapest kind). The driver records an event only on
 * a stream of the context the event was made in ("hEvent and hStream must be from the same
 * context otherwise CUDA_ERROR_INVALID_HANDLE is returned", cuEventRecord), and a program may free
 * a block of one context on a stream of another, or with another context current. So the event
 * of a free is made in its stream's context (ga_fence_stream_ctx), whichever is current: the free
 * list holds only events of the pool's own context, and an event made in another one is
 * destroyed once its entry is done.
 * Also here: pass-through memory freed with cuMemFreeAsync, kept committed until its event shows
 * its stream passed the free; a context's entries dropped at its teardown (ga_fence_drop), and
 * those whose event was made in a dying context; the program's waits on a stream or an event,
 * which give back the pass-through bytes they passed. Apart from fence.c to keep each file short:
 * the two share the context's fields (shim.h) and four functions (fence_internal.h), no variable.
 * Everything here but the hooks runs under the context's lock.
 */
#include "shim.h"
#include "fence_internal.h"

#include <stdlib.h>
#include <string.h>

/* A new event made in context ctx, current or not (cuEventCreate makes it in the current one). */
static CUevent ga_event_new(CUcontext ctx)
{
    CUevent ev = NULL;
    CUcontext cur = NULL;
    if (!ga_real.cuEventCreate)
        return NULL;
    int here = ga_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx;
    if (!here && ga_real.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
        return NULL; /* made elsewhere it could never be recorded on ctx's streams */
    CUresult r = ga_real.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    if (!here)
        ga_ctx_leave(1);
    return r == CUDA_SUCCESS ? ev : NULL;
}

/* An event of c's own context: from the free list, or made there. */
static CUevent ga_event_get(ga_ctx_t *c)
{
    if (c->nevents)
        return c->events[--c->nevents];
    return ga_event_new(c->ctx);
}

/* Events made in other contexts held by any context's entries (every c->fev), for
 * ga_fence_foreign_held: changed with them, under their context's lock. */
static _Atomic long ga_fev_held;

/* An event for a free of c's block on a stream of another context, sctx: made there, and listed
 * in c->fev with sctx so that ga_event_put destroys it instead of keeping it with c's own, and
 * ga_fence_foreign_dying before sctx goes. */
static CUevent ga_event_get_foreign(ga_ctx_t *c, CUcontext sctx)
{
    if (c->nfev == c->cap_fev) {
        size_t cap = c->cap_fev ? 2 * c->cap_fev : 8;
        ga_fevent_t *f = realloc(c->fev, cap * sizeof *f);
        if (!f)
            return NULL;
        c->fev = f;
        c->cap_fev = cap;
    }
    CUevent ev = ga_event_new(sctx);
    if (ev) {
        c->fev[c->nfev++] = (ga_fevent_t){ev, sctx};
        atomic_fetch_add_explicit(&ga_fev_held, 1, memory_order_relaxed);
    }
    return ev;
}

/* 1 (and off the list) if ev is one of c's events made in another context. */
static int ga_event_take_foreign(ga_ctx_t *c, CUevent ev)
{
    for (size_t i = 0; i < c->nfev; i++)
        if (c->fev[i].ev == ev) {
            c->fev[i] = c->fev[--c->nfev];
            atomic_fetch_sub_explicit(&ga_fev_held, 1, memory_order_relaxed);
            return 1;
        }
    return 0;
}

/* 1 if ev is one of c's events made in context ctx. */
static int ga_event_made_in(const ga_ctx_t *c, CUevent ev, CUcontext ctx)
{
    for (size_t i = 0; ev && i < c->nfev; i++)
        if (c->fev[i].ev == ev)
            return c->fev[i].made_in == ctx;
    return 0;
}

/* An entry is done with its event: kept for c's next free if it is c's own, else destroyed. */
void ga_event_put(ga_ctx_t *c, CUevent ev)
{
    if (!ev)
        return;
    if (GA_UNLIKELY(c->nfev) && ga_event_take_foreign(c, ev)) {
        if (!c->driver_gone && ga_real.cuEventDestroy_v2)
            ga_real.cuEventDestroy_v2(ev);
        return;
    }
    if (c->nevents < sizeof c->events / sizeof c->events[0])
        c->events[c->nevents++] = ev;
    else if (!c->driver_gone && ga_real.cuEventDestroy_v2)
        ga_real.cuEventDestroy_v2(ev);
}

/* An event's answer says the device passed it: done, or an error that says the stream and its work
 * are gone; not a capture's refusal (an event recorded in a capture is not work that ran). */
int ga_event_passed(CUresult r)
{
    return r != CUDA_ERROR_NOT_READY &&
           !(r >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
}

/* Each pass over the pending frees asked the driver about every event: N stream-ordered frees
 * pending behind one long kernel cost N cuEventQuery calls per allocation (an outside check,
 * 2026-12-07: 16,000 rounds of an allocation on one stream and a cuMemFreeAsync on a held one made
 * 128 million queries, 1.3 ms a round, in arena mode; platform's pass-through frees alike; test
 * async_pending_events_asked_once_per_stream). Now one per stream that has not passed, for up to
 * GA_UNPASSED such streams a pass; entries of others are asked as before. */
int ga_event_passed_ordered(ga_unpassed_t *u, uint64_t sid, uint64_t seq, CUevent ev)
{
    /* Not asked while a global or thread-local capture runs: the query would be refused and end
     * the program's capture invalidated (capture.c, ga_cap_strict); the entry waits for its end. */
    if (GA_UNLIKELY(ga_capture_forbids_queries()))
        return 0;
    size_t k = 0;
    for (; sid && k < u->n && u->sid[k] != sid; k++)
        ;
    int known = sid && k < u->n;
    if (known && seq > u->seq[k])
        return 0;
    if (ga_event_passed(ga_real.cuEventQuery(ev)))
        return 1;
    if (known)
        u->seq[k] = seq; /* an earlier one of the stream: a later one was asked first */
    else if (sid && u->n < GA_UNPASSED)
        u->sid[u->n] = sid, u->seq[u->n++] = seq;
    return 0;
}

/* Which stream s is, for handing a chunk freed on it to a later allocation on it. A handle is not
 * an identity: CU_STREAM_PER_THREAD (and NULL through the _ptsz entry points, which the hooks turn
 * into it) names a different stream in each thread, and a destroyed stream's handle may come back
 * for a new one while the old one's work is still queued. cuStreamGetId (CUDA 12.0) gives an ID
 * unique to the stream in the process. Without it, the handle of a created or legacy stream, and
 * nothing (0: never handed over) for the per-thread stream. */
uint64_t ga_fence_stream_id(CUstream s)
{
    unsigned long long id = 0;
    if (ga_real.cuStreamGetId)
        return ga_real.cuStreamGetId(s, &id) == CUDA_SUCCESS ? (uint64_t)id : 0;
    if (s == CU_STREAM_PER_THREAD)
        return 0;
    return s ? (uint64_t)(uintptr_t)s : (uint64_t)(uintptr_t)CU_STREAM_LEGACY;
}

#define GA_OWN_SIDS (sizeof ((ga_ctx_t *)0)->own_sid / sizeof ((ga_ctx_t *)0)->own_sid[0])

/* The context of stream s (sid: its ga_fence_stream_id), the one an event recorded on s must be
 * made in: the current one for NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, as the driver
 * resolves them; else cuStreamGetCtx's answer. A stream found to be c's own is remembered by its
 * ID (unique in the process, cuStreamGetId), so frees on a program's own streams ask the driver
 * nothing more. Not asked, and taken as c's, when the driver cannot say (no cuStreamGetCtx) or
 * the stream has no ID (cuStreamGetId refused it): the record then fails as the driver decides. */
static CUcontext ga_fence_stream_ctx(ga_ctx_t *c, CUstream s, uint64_t sid)
{
    CUcontext sc = NULL;
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return ga_real.cuCtxGetCurrent(&sc) == CUDA_SUCCESS && sc ? sc : c->ctx;
    int unique = ga_real.cuStreamGetId != NULL; /* else sid is the handle, which may come back */
    for (size_t i = 0; unique && i < GA_OWN_SIDS; i++)
        if (c->own_sid[i] == sid)
            return c->ctx;
    if ((unique && !sid) || !ga_real.cuStreamGetCtx ||
        ga_real.cuStreamGetCtx(s, &sc) != CUDA_SUCCESS || !sc)
        return c->ctx;
    if (unique && sc == c->ctx)
        c->own_sid[c->own_next++ % GA_OWN_SIDS] = sid;
    return sc;
}

/* ga_fence_stream_ctx's answer, noted for ga_ctx_meet_unseen when gpuarena has no state for it: a
 * context made with cuCtxCreate and used only for its streams. The free's event is then made
 * there, and only the waits over the contexts gpuarena knows pass it: before an out-of-memory,
 * a chunk freed on such a stream behind a running kernel was not waited for, and the allocation
 * that needed its room was refused (an outside check, 2026-12-07; test
 * oom_waits_for_async_free_on_unseen_context). */
static CUcontext ga_fence_stream_ctx_noted(ga_ctx_t *c, CUstream s, uint64_t sid)
{
    CUcontext sc = ga_fence_stream_ctx(c, s, sid);
    if (GA_UNLIKELY(sc != c->ctx) && !ga_ctx_of(sc))
        ga_tl_unseen = sc;
    return sc;
}

/* An event to record on stream s for a free of c's memory: one of c's own if s is c's. */
CUevent ga_fence_event_for(ga_ctx_t *c, CUstream s, uint64_t sid)
{
    CUcontext sc = ga_fence_stream_ctx_noted(c, s, sid);
    return sc == c->ctx ? ga_event_get(c) : ga_event_get_foreign(c, sc);
}

/* Async-freed pass-through allocations held in the process, over every context (fence_event.c's
 * own): a hint, so that the synchronisation hooks below cost one load when there are none. Changed
 * under the context's lock with the entries; an entry dropped elsewhere leaves it high, which
 * costs a walk, never a wrong answer. */
static _Atomic long ga_pfree_held;

/* Stream-ordered pool entries pending in the process, over every context: the same kind of hint
 * (ga_pend_ev_note, fence.c's entries). */
static _Atomic long ga_pend_ev_held;

void ga_pend_ev_note(long delta)
{
    atomic_fetch_add_explicit(&ga_pend_ev_held, delta, memory_order_relaxed);
}

/* ---- pass-through memory freed with cuMemFreeAsync ----
 * cuMemAllocFromPoolAsync (any mode) and cuMemAllocAsync in platform mode are the driver's: the
 * driver's cuMemFreeAsync puts the memory back in its pool in stream order, and until the stream
 * passes the free the device may still be using it, so the process still holds it. Giving its bytes
 * back to the cap at the call would let the next allocation, from this process or a group member,
 * take memory the device has not released yet. So the bytes stay committed (and counted in
 * reserved and passthrough, no longer in use) until an event recorded after the free shows the
 * stream passed it. They come back when a pass-through allocation of the context finds them passed,
 * after the program's own cuCtxSynchronize, and, waited for, before any allocation on the device is
 * refused for the cap (ga_dev_trim). */
static void ga_pfree_release(ga_ctx_t *c, size_t i)
{
    ga_passfree_t e = c->pfree[i];
    c->pfree[i] = c->pfree[--c->npfree];
    atomic_fetch_sub_explicit(&ga_pfree_held, 1, memory_order_relaxed);
    ga_event_put(c, e.ev);
    ga_mempool_gone(c->dev, e.size); /* a driver pool may keep it (mempool.c) */
    ga_level_add(GA_LEVEL_RESERVED, -(int64_t)e.size);
    ga_level_add(GA_LEVEL_PASSTHROUGH, -(int64_t)e.size);
}

static void ga_pfree_room(ga_ctx_t *c)
{
    if (c->npfree == c->cap_pfree) {
        size_t cap = c->cap_pfree ? 2 * c->cap_pfree : 16;
        ga_passfree_t *p = realloc(c->pfree, cap * sizeof *p);
        if (p) {
            c->pfree = p;
            c->cap_pfree = cap;
        }
    }
}

int ga_fence_pass_free(ga_ctx_t *c, size_t size, CUstream s)
{
    ga_pfree_room(c);
    uint64_t sid = ga_fence_stream_id(s);
    CUevent ev = c->npfree < c->cap_pfree ? ga_fence_event_for(c, s, sid) : NULL;
    if (ev && ga_real.cuEventRecord(ev, s) == CUDA_SUCCESS) {
        c->pfree[c->npfree++] = (ga_passfree_t){.size = size, .ev = ev, .seq = ++c->pf_seq,
                                                .sid = sid};
        atomic_fetch_add_explicit(&ga_pfree_held, 1, memory_order_relaxed);
        c->counts.free_events++;
        return 1;
    }
    /* No event (or no host memory to remember it): the stream passes the free before the bytes go
     * back, synchronised by the caller once it has let the lock go (alloc.c, teardown.c: under
     * it, the context's other threads waited for the stream's queued work, as in h34 F6). */
    ga_event_put(c, ev);
    return 0;
}

/* When neither the event nor the stream's synchronisation could be had (both refused by the
 * driver), the free may not have passed: its bytes left the cap at once all the same, and the
 * driver held 96 MiB under a 64 MiB cap (helper-103 F5; test async_free_unwaited_stays_on_the_cap).
 * They stay committed now, listed with no event, until a synchronisation of the device made after
 * the free succeeds: the one gpuarena makes before refusing an allocation for the cap (sync.c),
 * or the context goes. */
int ga_fence_pass_hold(ga_ctx_t *c, size_t size)
{
    ga_pfree_room(c);
    if (c->npfree == c->cap_pfree)
        return 0;
    c->pfree[c->npfree++] = (ga_passfree_t){.size = size, .ev = NULL, .seq = ++c->pf_seq};
    atomic_fetch_add_explicit(&ga_pfree_held, 1, memory_order_relaxed);
    return 1;
}

int ga_pass_unwaited(ga_ctx_t *c, unsigned life, CUstream s, size_t size)
{
    if (!ga_real.cuStreamSynchronize || ga_real.cuStreamSynchronize(s) == CUDA_SUCCESS)
        return 1;
    int held = 0;
    if (c) {
        ga_mutex_lock(&c->lock);
        held = !atomic_load(&c->dead) && atomic_load(&c->life) == life && ga_fence_pass_hold(c, size);
        ga_mutex_unlock(&c->lock);
    }
    static _Atomic int said;
    ga_log(atomic_exchange(&said, 1) ? GA_LOG_DEBUG : GA_LOG_WARN,
           "cuMemFreeAsync of %zu bytes: the driver refused both an event after the free and the "
           "stream's synchronisation, so the device may still hold them; they stay counted against "
           "the cap %s; if this repeats, the driver or device is failing: check it (nvidia-smi) "
           "(said once)", size, held ? "until a synchronisation of the device passes them (gpuarena "
           "makes one before it refuses an allocation for the cap)" : "for good (no context to wait on)");
    return 0;
}

uint64_t ga_fence_pass_synced(ga_ctx_t *c, uint64_t seq)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < c->npfree;) {
        if (c->pfree[i].ev || c->pfree[i].seq > seq) {
            i++;
            continue;
        }
        bytes += c->pfree[i].size;
        ga_pfree_release(c, i); /* entry i now holds another one: look at i again */
    }
    return bytes;
}

uint64_t ga_fence_pass_reclaim(ga_ctx_t *c, int wait)
{
    uint64_t bytes = 0;
    ga_unpassed_t u = {.n = 0};
    for (size_t i = 0; i < c->npfree;) {
        CUevent ev = c->pfree[i].ev;
        if (!ev) { /* nothing to ask: passed only by a synchronisation (ga_fence_pass_synced) */
            i++;
            continue;
        }
        int nc = wait ? ga_nocancel_begin() : 0;
        int passed = wait ? ga_event_passed(ga_real.cuEventSynchronize(ev))
                          : ga_event_passed_ordered(&u, c->pfree[i].sid, c->pfree[i].seq, ev);
        ga_nocancel_end(nc);
        if (!passed) {
            i++;
            continue;
        }
        bytes += c->pfree[i].size; /* passed, or an error: the stream is gone, so is its work */
        ga_pfree_release(c, i);    /* entry i now holds another one: look at i again */
    }
    return bytes;
}

/* The context is going: forget pending chunks (the pool goes with it) and destroy the events. */
void ga_fence_drop(ga_ctx_t *c)
{
    /* Gone already (its teardown call went through): the driver destroyed its own events with it,
     * not those made in other contexts for frees on their streams (c->fev), whose contexts live on
     * (one that went before took its own back, ga_fence_foreign_dying). Those are destroyed here:
     * they were skipped with the rest, and each such free left its stream's context a live event
     * for good (the simulated driver's count, test teardown_destroys_foreign_events). */
    for (size_t i = 0; c->driver_gone == 1 && i < c->nfev; i++)
        if (ga_real.cuEventDestroy_v2)
            ga_real.cuEventDestroy_v2(c->fev[i].ev);
    for (size_t i = 0; i < c->npend; i++) {
        if (c->pend[i].ev && !c->driver_gone && ga_real.cuEventDestroy_v2)
            ga_real.cuEventDestroy_v2(c->pend[i].ev);
    }
    /* The context's async-freed pass-through memory goes with it, as its live records do. */
    while (c->npfree) {
        ga_passfree_t e = c->pfree[--c->npfree];
        atomic_fetch_sub_explicit(&ga_pfree_held, 1, memory_order_relaxed);
        if (!c->driver_gone && e.ev && ga_real.cuEventDestroy_v2)
            ga_real.cuEventDestroy_v2(e.ev);
        ga_mempool_gone(c->dev, e.size);
        ga_level_add(GA_LEVEL_RESERVED, -(int64_t)e.size);
        ga_level_add(GA_LEVEL_PASSTHROUGH, -(int64_t)e.size);
    }
    free(c->pfree);
    c->pfree = NULL;
    c->cap_pfree = 0;
    for (size_t i = 0; i < c->nevents; i++)
        if (!c->driver_gone && ga_real.cuEventDestroy_v2)
            ga_real.cuEventDestroy_v2(c->events[i]);
    atomic_fetch_sub_explicit(&ga_fev_held, (long)c->nfev, memory_order_relaxed);
    free(c->fev); /* its events were the entries', destroyed above */
    c->fev = NULL;
    c->nfev = c->cap_fev = 0;
    memset(c->own_sid, 0, sizeof c->own_sid);
    free(c->pend);
    ga_ptrmap_fini(&c->pend_set);
    c->pend = NULL;
    ga_pend_ev_note(-(long)c->npend_ev);
    c->npend = c->cap_pend = c->nevents = c->npend_ev = 0;
    c->pend_gen++;
    c->pend_bytes = 0;
    c->counts.pending_bytes = 0;
    memset(&c->pend_set, 0, sizeof c->pend_set);
}

int ga_fence_foreign_held(void)
{
    return atomic_load_explicit(&ga_fev_held, memory_order_relaxed) > 0;
}

/* A free of c's block on a stream of context `dying` holds an event made there; the driver's
 * teardown destroys it ("cuCtxDestroy ... destroys and cleans up all resources associated with
 * the context") and a later cuEventCreate may get its handle, so a later query or destroy of it
 * reached another event, the program's own (helper-21 F1: its cuEventRecord then failed with
 * CUDA_ERROR_INVALID_HANDLE). The stream's work is waited for (the teardown would wait for it
 * too; ga_ctx_foreign_dying synchronised the context first, so this returns at once) and the
 * entry is done: its chunk back to the pool, its pass-through bytes back to the cap. */
void ga_fence_foreign_dying(ga_ctx_t *c, CUcontext dying)
{
    for (size_t i = 0; i < c->npend;) {
        CUevent ev = c->pend[i].ev;
        if (!ga_event_made_in(c, ev, dying)) {
            i++;
            continue;
        }
        int nc = ga_nocancel_begin();
        ga_real.cuEventSynchronize(ev);
        ga_nocancel_end(nc);
        ga_pend_release(c, i); /* entry i now holds another one: look at i again */
    }
    for (size_t i = 0; i < c->npfree;) {
        CUevent ev = c->pfree[i].ev;
        if (!ev || !ga_event_made_in(c, ev, dying)) {
            i++;
            continue;
        }
        int nc = ga_nocancel_begin();
        ga_real.cuEventSynchronize(ev);
        ga_nocancel_end(nc);
        ga_pfree_release(c, i);
    }
}

/* The program waited for a stream or an event: async frees of pass-through memory that the device
 * has passed give their bytes back now (queried, never waited for). Without it they stayed
 * counted after the program's cuStreamSynchronize until its next allocation, and a group's other
 * member was refused for memory the driver had back (helper-42 F9). So do the pool's own
 * stream-ordered frees: in vmm mode with GPUARENA_VMM_KEEP=0 their granules stayed mapped until
 * the next allocation or cuCtxSynchronize (an outside check, 2026-12-07; test
 * vmmo_async_free_given_back_at_stream_wait). */
static void ga_fence_program_waited(void)
{
    int pool = atomic_load_explicit(&ga_pend_ev_held, memory_order_relaxed) > 0;
    if (pool || atomic_load_explicit(&ga_pfree_held, memory_order_relaxed) > 0)
        ga_dev_pass_passed(-1, pool);
    ga_mempool_settle_all(); /* the driver's pools may give memory back at a synchronisation */
}

/* The three waits: the real call, then what it passed. */
#define GA_WAIT_HOOK(name, type, arg)                                                          \
    GA_EXPORT CUresult name(type arg)                                                          \
    {                                                                                          \
        GA_HOOK_ENTER(name, (arg));                                                            \
        CUresult r = ga_real.name(arg);                                                        \
        if (r == CUDA_SUCCESS)                                                                 \
            ga_fence_program_waited();                                                         \
        return r;                                                                              \
    }
GA_WAIT_HOOK(cuStreamSynchronize, CUstream, hStream)
GA_WAIT_HOOK(cuStreamSynchronize_ptsz, CUstream, hStream)
GA_WAIT_HOOK(cuEventSynchronize, CUevent, hEvent)
#undef GA_WAIT_HOOK
