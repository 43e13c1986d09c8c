/* gpuarena context teardown: what happens to a context's state when the context goes, and the
 * hooks through which it goes (cuCtxDestroy, the primary context's release and reset, and its
 * retain, which must wait for a last release's drop).
 *
 * A context's state goes only after the driver's teardown call has succeeded: until that call
 * returns, the driver holds the context's memory, so its bytes stay on the cap (another context
 * or group member granted them before then would be given memory the device still holds), and a
 * call the driver refuses leaves the context, its memory and its pool as they were. Before the
 * call the context is synchronised, and its lock is held through the call and the drop, so no
 * allocation in it slips in between (ga_ctx_teardown). After it the pool is given back without
 * the driver, which freed the context's memory (driver_gone 1), except vmm's granules and ranges,
 * which are the process's. What the driver keeps past the context (stream-ordered allocations)
 * stays counted: pass-through ones in the device's table (ga_dev_free_loose), pool ones in a vmm
 * pool kept as an orphan until their frees (ga_orphan_free). The devices and the context list are
 * ctx.c's; this file reaches them through its functions (ga_dev, ga_ctx_of, ga_ctx_forget_cached).
 */
#include "shim.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* Serialises the teardown hooks' look at a primary context (ga_primary_of retains and releases it
 * to learn its handle) with a primary release or reset and the drop of the state after it, and
 * makes a retain wait for that drop. Unserialised, a look could fall between the last release and
 * its look at the state after: its retain brought the primary context back (active again, so the
 * releasing thread kept the pool), its release took it down, and nobody dropped the pool (a
 * stress run with threads on created and primary contexts of one device found vmm's 44 MiB still
 * held after every context was gone). Taken only by those hooks and cuDevicePrimaryCtxRetain
 * (below), with no other lock of the shim held; it guards driver calls, and the drop of the state
 * (context locks are taken inside it, never the other way round). */
static ga_mutex_t ga_primary_lock;

/* cuMemAllocAsync and cuMemAllocFromPoolAsync memory the driver served outlives the context:
 * "cuCtxDestroy() will not destroy memory allocations by cuMemCreate(), cuMemAllocAsync() and
 * cuMemAllocFromPoolAsync()" (CUDA Driver API, cuCtxDestroy); so its record moves to the device's
 * table, still counted, where its free finds it (ga_dev_free_loose). 1 when e moved. c->lock held;
 * the device lock is taken inside it (never the other way round). */
int ga_pass_outlives(ga_ctx_t *c, const ga_pentry_t *e)
{
    if (c->driver_gone == 2 || (e->aux != GA_API_CUMEMALLOCASYNC && e->aux != GA_API_CUMEMALLOCFROMPOOL))
        return 0;
    ga_dev_t *d = ga_dev(c->dev);
    ga_mutex_lock(&d->lock);
    int kept = ga_ptrmap_put(&d->loose, e) == 0;
    ga_mutex_unlock(&d->lock);
    return kept;
}

int ga_dev_free_loose(uint64_t p, uint8_t api, uint64_t t0, CUresult (*real_free)(CUdeviceptr, CUstream),
                      CUstream s, CUresult *r)
{
    for (int dev = 0; p && dev < GA_MAX_DEVICES; dev++) {
        ga_dev_t *d = ga_dev(dev);
        if (!atomic_load_explicit(&d->known, memory_order_acquire))
            continue;
        ga_mutex_lock(&d->lock);
        int found = d->loose.count && ga_ptrmap_get(&d->loose, p) != NULL;
        ga_mutex_unlock(&d->lock);
        if (!found)
            continue;
        /* The driver first; the record goes only if it let the memory go (once, if two race). */
        *r = real_free ? real_free((CUdeviceptr)p, s) : ga_real.cuMemFree_v2((CUdeviceptr)p);
        ga_pentry_t e = {0};
        ga_mutex_lock(&d->lock);
        int gone = *r == CUDA_SUCCESS && ga_ptrmap_take(&d->loose, p, &e);
        if (gone)
            ga_count_free(&d->counts, api, t0);
        ga_mutex_unlock(&d->lock);
        if (!gone)
            return dev;
        ga_dev_in_use_add(dev, -(int64_t)e.size);
        /* Stream-ordered: held until the stream passes the free, on the current context's list. */
        ga_ctx_t *c = real_free ? ga_current() : NULL;
        int later = 0;
        if (c) {
            ga_mutex_lock(&c->lock);
            if (!atomic_load(&c->dead) && c->dev == dev)
                later = ga_fence_pass_free(c, e.size, s);
            ga_mutex_unlock(&c->lock);
        }
        if (!later) {
            /* No context of that device current to wait on: the stream passes the free first;
             * not a capturing one, where the free is the graph's and a wait ends the capture
             * invalidated (an outside test, 2026-12-06): its bytes leave the cap now. */
            unsigned life = c ? atomic_load(&c->life) : 0; /* before dev: a reuse moves it first */
            if (real_free && !ga_capture_stream(s) &&
                !ga_pass_unwaited(c && c->dev == dev ? c : NULL, life, s, e.size))
                return dev; /* refused: the bytes stay committed (helper-103 F5) */
            ga_mempool_gone(dev, e.size); /* a driver pool may keep it (mempool.c) */
            ga_level_add(GA_LEVEL_RESERVED, -(int64_t)e.size);
            ga_level_add(GA_LEVEL_PASSTHROUGH, -(int64_t)e.size);
        }
        return dev;
    }
    return -1;
}

/* Orphan c's figures into its device's (c->lock held): bytes more (or less) of live blocks, and
 * what its pool maps and reserves now; gone: the pool is going, and c's share with it. */
static void ga_orphan_account(ga_ctx_t *c, int64_t bytes, int gone)
{
    ga_dev_t *d = ga_dev(c->dev);
    ga_stats_t s = {0};
    if (!gone)
        ga_pool_stats(c->pool, &s);
    atomic_fetch_add(&d->orph_bytes, (uint64_t)bytes); /* wraps back for a negative count */
    atomic_fetch_add(&d->orph_mapped, s.reserved - c->orph_mapped);
    atomic_fetch_add(&d->orph_va, s.va_reserved - c->orph_va);
    c->orph_mapped = s.reserved;
    c->orph_va = s.va_reserved;
}

/* Stream-ordered allocations the pool served, live at c's teardown (c->lock held, the pool's final
 * figures taken): the driver would keep them ("cuCtxDestroy() will not destroy memory allocations
 * by ... cuMemAllocAsync()", above), and the program may go on using and freeing them. In vmm mode
 * the pool's range and granules are the process's, not the context's, so the pool stays as an
 * orphan holding those blocks alone: every other live block is freed, idle granules given back,
 * and the pool goes with the last of them (ga_orphan_free). In arena and grow modes the pool's
 * memory is the context's own and the driver frees it: said, since a later use or free of those
 * pointers reaches whatever is allocated there next. Returns the bytes the orphan keeps live, or
 * 0 when the pool goes now. */
static uint64_t ga_ctx_orphan(ga_ctx_t *c, int driver_gone)
{
    uint64_t kept = 0, asked = 0; /* held (a chunk handed over whole: its size), and asked for */
    ga_ptrmap_t *as = &c->async;
    for (size_t i = 0; as->slots && i <= as->mask; i++)
        if (as->slots[i].key)
            kept += as->slots[i].size, asked += ga_async_asked(&as->slots[i]);
    if (!as->count || driver_gone == 2)
        return 0;
    if (ga_pool_mode(c->pool) != GA_MODE_VMM) {
        ga_log(GA_LOG_WARN, "context %p destroyed with %zu stream-ordered allocation%s (%llu bytes) "
               "of its %s pool live: the driver keeps such memory past cuCtxDestroy, but here it "
               "goes with the context's pool, and a later use or free of those pointers reaches "
               "whatever is allocated there next; run with GPUARENA_MODE=vmm or platform, which "
               "keep them", (void *)c->ctx, as->count, as->count == 1 ? "" : "s",
               (unsigned long long)asked, ga_mode_name(ga_pool_mode(c->pool)));
        return 0;
    }
    size_t n = ga_pool_live_bases(c->pool, NULL, 0);
    uintptr_t *bases = malloc((n ? n : 1) * sizeof *bases);
    if (bases) {
        n = ga_pool_live_bases(c->pool, bases, n);
        for (size_t i = 0; i < n; i++)
            if (!ga_ptrmap_get(as, bases[i]))
                ga_pool_free(c->pool, bases[i], NULL);
        free(bases);
    } else {
        /* No host memory to list the other live blocks: they stay in the orphan too (never served
         * again, refused if freed, gone with the pool at its last stream-ordered block's free).
         * Letting the pool go freed the stream-ordered blocks the driver keeps, and the program's
         * later cuMemFreeAsync freed another context's block there (helper-57, from helper-47 F14). */
        ga_log(GA_LOG_WARN, "context %p destroyed with stream-ordered allocations live: out of "
               "host memory to sort them from its other blocks, so the pool keeps those too "
               "until the last stream-ordered one is freed", (void *)c->ctx);
    }
    ga_pool_trim(c->pool);
    ga_log(GA_LOG_DEBUG, "context %p destroyed: its vmm pool kept for %zu stream-ordered "
           "allocation%s (%llu bytes) until they are freed", (void *)c->ctx, as->count,
           as->count == 1 ? "" : "s", (unsigned long long)kept);
    atomic_store(&c->orphan, 1);
    atomic_fetch_add(&ga_dev(c->dev)->orph_n, 1);
    ga_orphan_account(c, (int64_t)kept, 0);
    return kept;
}

/* ga_free_owned's free of a block an orphan pool keeps (c->lock held, c an orphan, the device past
 * the program's free: the caller synchronised it). Nothing will be allocated there again, so the
 * block's granules go back at once, and the pool with its last block. */
CUresult ga_orphan_free(ga_ctx_t *c, CUdeviceptr p, uint8_t api, uint64_t t0, ga_status_t *refused)
{
    const ga_pentry_t *e = ga_ptrmap_get(&c->async, p);
    uint64_t size = e ? e->size : 0;
    /* (no size asked of the pool: every pool free of the shim passes NULL, which link-time
     * optimisation turns into a cheaper arena free, 5 instructions a pair) */
    ga_status_t st = GA_EINVAL;
    ga_stats_t before, after;
    ga_ctx_pool_stats(c, &before);
    if (e || !ga_pool_live_size(c->pool, p)) /* every live block has its record: without one, */
        st = ga_pool_free(c->pool, p, NULL); /* the pool only says why it refuses (interior...) */
    if (st != GA_OK) {
        *refused = st; /* an interior pointer, or a block freed already (with its context) */
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* The context's entry is its pool as at teardown (c->final) less what the program freed
     * since: the blocks the teardown dropped stay live there, as for a context without an orphan
     * (the pool's own figures count them as frees; an outside test, 2026-12-05). */
    ga_async_forget(c, p); /* before the figures after: the block's requested bytes leave both */
    ga_ctx_pool_stats(c, &after);
    c->final.frees += after.frees - before.frees;
    c->final.live -= before.live - after.live;
    c->final.in_use -= before.in_use - after.in_use;
    c->final.in_use_requested -= before.in_use_requested - after.in_use_requested;
    ga_ctx_level_add(c, -(int64_t)size);
    ga_count_free(&c->counts, api, t0);
    ga_pool_trim(c->pool);
    ga_orphan_account(c, -(int64_t)size, !c->async.count);
    if (!c->async.count) {
        atomic_fetch_sub(&ga_dev(c->dev)->orph_n, 1);
        ga_pool_t *pool = c->pool;
        __atomic_store_n(&c->pool, NULL, __ATOMIC_RELEASE);
        atomic_store(&c->orphan, 0);
        ga_pool_destroy(pool); /* the range back to the driver */
        ga_async_fini(c);
    }
    return CUDA_SUCCESS;
}

/* The blocks a teardown takes with it, for the trace (GPUARENA_TRACE): gathered under the context's
 * lock, recorded as frees after it (a record may write the trace, and a late one rewrites the
 * statistics, which takes context locks). Without them a replay of the run kept every such block
 * live for ever: 210 MiB in use where the run held 46 MiB (helper-19 F4, helper-22 F6). */
typedef struct ga_gone {
    uint64_t (*blk)[2]; /* address, bytes */
    size_t n, cap;
} ga_gone_t;

/* When the teardown hook was entered: its frees are stamped then, before the driver can hand the
 * addresses to another context, so a replay never frees the next owner's block. Each teardown
 * hook sets it; the drop runs only inside them. */
static __thread uint64_t ga_tl_teardown_t0;

static void ga_teardown_begin(void)
{
    ga_tl_teardown_t0 = ga_now();
}

/* Room for n more blocks (c->lock held; had: the caller's own host memory was had); 0 when the
 * host has none: said, and the trace keeps them live. */
static int ga_gone_room(ga_gone_t *g, size_t n, int had)
{
    void *b = NULL;
    if (had && g->n + n <= g->cap)
        return 1;
    if (had && (b = realloc(g->blk, (g->n + n) * sizeof *g->blk))) {
        g->blk = b;
        g->cap = g->n + n;
        return 1;
    }
    ga_log(GA_LOG_WARN, "no host memory to record the frees of %zu blocks a context's teardown "
           "took: GPUARENA_TRACE keeps them live, and a replay of it counts them", n);
    return 0;
}

/* The pool's live blocks, before the teardown frees them (c->lock held, the pool there). */
static void ga_gone_pool(ga_ctx_t *c, ga_gone_t *g)
{
    size_t n = ga_pool_live_bases(c->pool, NULL, 0);
    uintptr_t *bases = n ? malloc(n * sizeof *bases) : NULL;
    if (n && ga_gone_room(g, n, bases != NULL)) {
        n = ga_pool_live_bases(c->pool, bases, n);
        for (size_t i = 0; i < n; i++, g->n++) {
            g->blk[g->n][0] = bases[i];
            g->blk[g->n][1] = ga_pool_live_size(c->pool, bases[i]);
        }
    }
    free(bases);
}

/* Keeps of g's pool blocks (from `from` on) only those the pool no longer holds: an orphan vmm
 * pool keeps its stream-ordered blocks, which are freed (and traced) by the program later. */
static void ga_gone_kept(ga_ctx_t *c, ga_gone_t *g, size_t from)
{
    size_t k = from;
    for (size_t i = from; i < g->n; i++)
        if (!ga_pool_live_size(c->pool, (uintptr_t)g->blk[i][0]))
            g->blk[k][0] = g->blk[i][0], g->blk[k][1] = g->blk[i][1], k++;
    g->n = k;
}

/* The frees, recorded with the context's lock let go; g emptied. */
static void ga_gone_trace(ga_gone_t *g, int dev)
{
    uint64_t t0 = ga_tl_teardown_t0 ? ga_tl_teardown_t0 : ga_now();
    for (size_t i = 0; i < g->n; i++)
        ga_trace_event(GA_EV_FREE, GA_API_CTXTEARDOWN, g->blk[i][0], g->blk[i][1], 0, dev, t0,
                       CUDA_SUCCESS);
    free(g->blk);
    *g = (ga_gone_t){0};
}

/* Before a teardown call (c->lock held, the driver alive): the device passes everything that may
 * still use the context's memory. The driver's teardown waits for the context's own queued work,
 * but not for another context's. */
static void ga_ctx_quiesce(ga_ctx_t *c)
{
    /* Nothing of its own to pass (no pool, nothing pending) and no other context on its device
     * whose fence would pass it by from closing 2 on: the driver's teardown waits for its work,
     * and a synchronisation here only cost a context gpuarena met where it was made or pushed
     * (meet.c: one used only to launch kernels) a cuCtxSynchronize it never paid before. */
    if (!c->pool && !c->npend && !c->npfree && !ga_dev_live_peer(c))
        return;
    int pushed = ga_ctx_enter(c->ctx);
    if (ga_real.cuCtxSynchronize)
        ga_real.cuCtxSynchronize();
    /* A chunk freed with cuMemFree and still pending may be written by another context's work on
     * the device, which the driver's cuMemFree waits for and its teardown does not: the teardown
     * freed the chunk's memory (vmm: unmapped its granules) under that work (an outside check,
     * helper-128, 2026-12-07; test teardown_waits_for_peers_on_pending_frees). So the other
     * contexts are waited for first, as the next allocation's fence would have done. */
    if (c->npend > c->npend_ev && atomic_load_explicit(&c->peers, memory_order_relaxed) &&
        !ga_capture_on_dev(c->dev))
        (void)ga_dev_sync_others(c->dev, c);
    /* A stream-ordered free on another context's stream (the program may free a block of this
     * context from any): that context's queued work may still use the chunk, and only the
     * free's event says when it has passed (found by an outside test on 2026-12-05: the chunk
     * went back, and the work overwrote a later context's block there). */
    for (size_t i = 0; i < c->npend; i++)
        if (c->pend[i].ev && ga_real.cuEventSynchronize)
            ga_real.cuEventSynchronize(c->pend[i].ev);
    /* So with async-freed pass-through memory (stream-ordered: the driver holds it until the
     * free's stream passes, whatever becomes of the context), whose bytes leave the cap with
     * the context's state (an outside test, 2026-12-06: a free queued on another context's
     * stream still held 40 MiB when the destroy gave it back to the cap). */
    for (size_t i = 0; i < c->npfree; i++)
        if (c->pfree[i].ev && ga_real.cuEventSynchronize)
            ga_real.cuEventSynchronize(c->pfree[i].ev);
    ga_ctx_leave(pushed);
}

/* A context has gone (c->lock held, c not dead): give back its pool (to the driver unless the
 * driver already freed it) and its pass-through memory, and never match it again. gone (NULL
 * unless a trace is written): the blocks it takes with it, to be traced once the lock is let go. */
static void ga_ctx_release(ga_ctx_t *c, int driver_gone, ga_gone_t *gone)
{
    c->driver_gone = driver_gone;
    /* The device has passed every pending free (the synchronisation above, or the driver freed
     * the context's memory): they go back to the pool before its final statistics are taken, so
     * the context's entry counts the program's frees instead of every such block still live. */
    for (size_t i = 0; c->pool && i < c->npend; i++)
        ga_pool_free(c->pool, c->pend[i].ptr, NULL);
    ga_fence_drop(c); /* pending chunks go with the pool */
    if (c->pool) {
        /* Idle memory goes back first (vmm's kept granules, empty regions), so the context's
         * entry counts those unmaps and releases and holds only what its live blocks held: it
         * showed 64 MiB kept and reserved after the driver had them back, and 7 unmaps of the
         * driver's 39 (an outside test, 2026-12-06). */
        if (c->driver_gone < 2)
            ga_pool_trim(c->pool);
        ga_ctx_pool_stats(c, &c->final);
        c->has_final = 1;
        if (gone)
            ga_gone_pool(c, gone);
        uint64_t kept = ga_ctx_orphan(c, driver_gone);
        if (kept && gone)
            ga_gone_kept(c, gone, 0);
        /* Its live allocations go with it (the driver frees a context's memory): they leave the
         * process's in-use level, which kept them after a destroy or reset (in_use above
         * reserved in the totals); those an orphan pool keeps leave it when they are freed. */
        ga_ctx_level_add(c, -(int64_t)(c->final.in_use - kept));
        if (kept) {
            c->driver_gone = 1; /* its handle is gone: no driver call names it from now on */
        } else {
            ga_pool_t *p = c->pool;
            __atomic_store_n(&c->pool, NULL, __ATOMIC_RELEASE);
            ga_pool_destroy(p); /* releases through the backend: uncommits every byte */
        }
    }
    if (!atomic_load(&c->orphan))
        ga_async_fini(c);
    if (gone && c->pass.count && !ga_gone_room(gone, c->pass.count, 1))
        gone = NULL;
    for (size_t i = 0; c->pass.slots && i <= c->pass.mask; i++) {
        const ga_pentry_t *e = &c->pass.slots[i];
        if (!e->key || ga_pass_outlives(c, e))
            continue;
        if (gone) /* the driver frees it with the context */
            gone->blk[gone->n][0] = e->key, gone->blk[gone->n++][1] = e->size;
        ga_dev_uncommit(c->dev, e->size);
        ga_level_add(GA_LEVEL_RESERVED, -(int64_t)e->size);
        ga_level_add(GA_LEVEL_PASSTHROUGH, -(int64_t)e->size);
        ga_ctx_level_add(c, -(int64_t)e->size);
    }
    ga_ptrmap_fini(&c->pass);
    memset(&c->pass, 0, sizeof c->pass);
    atomic_store(&c->dead, 1);
}

/* A context the driver has let go (driver_gone 1) or a forked child's copy (2): its state goes. */
static void ga_ctx_drop(ga_ctx_t *c, int driver_gone)
{
    ga_gone_t gone = {0};
    int traced = atomic_load_explicit(&ga_tracing, memory_order_relaxed) & GA_TRACE_ON;
    ga_mutex_lock(&c->lock);
    if (!atomic_load(&c->dead))
        ga_ctx_release(c, driver_gone, traced ? &gone : NULL);
    ga_mutex_unlock(&c->lock);
    ga_ctx_forget_cached();
    ga_gone_trace(&gone, c->dev);
}

/* Drops every live state of ctx after a teardown call went through: a state another thread made
 * for ctx while the call was under way, whose memory the driver freed. */
static void ga_ctx_drop_all(CUcontext ctx, int driver_gone)
{
    ga_ctx_t *c;
    while (ctx && (c = ga_ctx_of(ctx)))
        ga_ctx_drop(c, driver_gone);
}

/* Drops every live state of ctx but keep (whose lock the caller holds, alive). */
static void ga_ctx_drop_others(CUcontext ctx, ga_ctx_t *keep, int driver_gone)
{
    for (ga_ctx_t *s = ga_ctx_first(); s; s = atomic_load(&s->next))
        if (s != keep && s->ctx == ctx && !atomic_load_explicit(&s->dead, memory_order_acquire))
            ga_ctx_drop(s, driver_gone);
}

/* ---- the teardown hooks ---- */
static CUcontext ga_primary_of(CUdevice dev);

/* The driver's teardown call: a context's (cuCtxDestroy, cuCtxDetach) or a device's primary
 * context's (cuDevicePrimaryCtxReset). */
typedef struct ga_td_call {
    CUresult (*ctx_fn)(CUcontext);
    CUresult (*dev_fn)(CUdevice);
    CUcontext ctx;
    CUdevice dev;
} ga_td_call_t;

/* The teardown of ctx by call. Its state's lock is held from before the call until its state has
 * gone, so nothing is allocated in it in between; it is marked closing meanwhile, so another
 * context's trim before an out-of-memory passes it by instead of waiting for the driver
 * (ga_dev_trim). Its memory leaves the cap only once the driver has freed it (helper-46 F1: a
 * managed block left it before the call, and another context was granted those bytes while the
 * driver still held them); a call the driver refuses leaves the state as it was (F3: the pool had
 * been dropped, and the next allocation got the live block's address). A primary context handed
 * to cuCtxDestroy is refused by the driver, and so kept like any refused call. Other threads wait
 * for the lock only where they look at this context itself (its frees, its allocations): memory
 * views of the device (cuMemGetInfo, NVML) and fork pass a closing context by (ctx.c), as they
 * waited for its whole queued work before (h34 F4). */
static CUresult ga_ctx_teardown(CUcontext ctx, const ga_td_call_t *call)
{
    ga_gone_t gone = {0};
    int traced = atomic_load_explicit(&ga_tracing, memory_order_relaxed) & GA_TRACE_ON;
    /* Other contexts' events made in it go while it lives, before its lock is taken (that walk
     * takes the other contexts' locks one at a time). */
    ga_ctx_foreign_dying(ctx);
    /* A primary context reset that gpuarena has no state of (none made since the last reset, or
     * ever): one is made, to be held through the call, as no other thread can make one while it
     * is found live. Without it, a state another thread made just as the driver's call returned
     * (the context lives on after a reset) was dropped as made during the call, its region
     * uncounted (an outside check, helper-102: a single thread allocating while another reset
     * the primary context took the driver to 120 MiB under a 64 MiB cap). */
    if (ctx && call->dev_fn && !ga_ctx_of(ctx))
        (void)ga_ctx_make(ctx, call->dev);
    ga_ctx_t *c;
    while ((c = ga_ctx_of(ctx))) {
        /* The process's first context keeps the in-use level itself, and the next state made
         * takes it over under its lock: given up now, or a context's first allocation while the
         * call is under way would wait for the driver's teardown of another. */
        if (ga_ctx_level_owner() == c)
            ga_ctx_level_share();
        ga_mutex_lock(&c->lock);
        if (!atomic_load(&c->dead))
            break;
        ga_mutex_unlock(&c->lock); /* gone meanwhile: the next live state, if any */
    }
    if (c) {
        atomic_store(&c->closing, 1);
        ga_ctx_quiesce(c);
        /* From here until the state is dead no other thread names the context in a driver call
         * ("no API call issues using ctx while cuCtxDestroy() is executing", cuCtxDestroy): its
         * walks that synchronise a device's contexts (ga_ctx_sync_named) pass it by, and one
         * that looked before this store finishes first. They have nothing of its to wait for:
         * its work queued before the teardown has just passed. */
        atomic_store(&c->closing, 2);
        while (atomic_load(&c->users))
            sched_yield();
    }
    CUresult r = call->ctx_fn ? call->ctx_fn(call->ctx) : call->dev_fn(call->dev);
    if (c) {
        /* Any other state of ctx goes while c is still alive, so that none is made meanwhile
         * (ga_current finds c): dropped after c, a state another thread made for ctx once c was
         * dead was taken for one made during the call, and its memory for memory the driver had
         * freed. After a cuDevicePrimaryCtxReset the context lives on, and such a state's region
         * was the driver's, uncounted: 128 MiB held under a 64 MiB cap with two threads
         * allocating while a third reset (an outside check, helper-102). */
        if (r == CUDA_SUCCESS) {
            ga_ctx_drop_others(ctx, c, 1);
            ga_ctx_release(c, 1, traced ? &gone : NULL);
        }
        atomic_store(&c->closing, 0);
        ga_mutex_unlock(&c->lock);
        ga_gone_trace(&gone, c->dev);
    }
    if (r == CUDA_SUCCESS) {
        ga_ctx_forget_cached();
        if (!c) /* no state to hold: those made while the call was under way */
            ga_ctx_drop_all(ctx, 1);
        ga_capture_ctx_gone(ctx);
    }
    return r;
}

static void ga_attach_forget(CUcontext ctx);

static CUresult ga_ctx_destroy(CUcontext ctx, CUresult (*real_destroy)(CUcontext))
{
    ga_td_call_t call = {.ctx_fn = real_destroy, .ctx = ctx};
    CUresult r = ga_ctx_teardown(ctx, &call);
    if (r == CUDA_SUCCESS && ctx)
        ga_attach_forget(ctx);
    return r;
}

GA_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    GA_HOOK_ENTER(cuCtxDestroy_v2, (ctx));
    ga_teardown_begin();
    return ga_ctx_destroy(ctx, ga_real.cuCtxDestroy_v2);
}

GA_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
    GA_HOOK_ENTER(cuCtxDestroy, (ctx));
    ga_teardown_begin();
    return ga_ctx_destroy(ctx, ga_real.cuCtxDestroy);
}

/* cuCtxAttach's not yet detached, per context (key the handle, size the count): the driver makes a
 * context with a usage count of one, cuCtxAttach adds one and cuCtxDetach takes one off, destroying
 * the context at none. Counted here, the detach that destroys is known before the driver's call,
 * and goes as cuCtxDestroy does; the hook asked cuCtxGetApiVersion about the handle after the
 * call, undefined behaviour once the context is gone (its handle freed, or another context's by
 * then; helper-48 F4). File-local; its lock is taken with no other lock of the shim held. */
static ga_mutex_t ga_attach_lock;
static ga_ptrmap_t ga_attached;

static void ga_attach_add(CUcontext ctx)
{
    ga_mutex_lock(&ga_attach_lock);
    ga_pentry_t *e = ga_ptrmap_get(&ga_attached, (uint64_t)(uintptr_t)ctx);
    int kept = e ? (e->size++, 1)
                 : ga_ptrmap_put(&ga_attached, &(ga_pentry_t){.key = (uint64_t)(uintptr_t)ctx,
                                                               .size = 1}) == 0;
    ga_mutex_unlock(&ga_attach_lock);
    if (!kept)
        ga_log(GA_LOG_WARN, "out of host memory to count a cuCtxAttach of context %p: its next "
               "cuCtxDetach is taken as its last, and its allocations are forgotten while the "
               "driver keeps them; free host memory, or use cuCtxCreate/cuCtxDestroy",
               (void *)ctx);
}

/* 1, and one attach fewer, when ctx has an attach not yet detached; 0: this detach is its last. */
static int ga_attach_take(CUcontext ctx)
{
    ga_mutex_lock(&ga_attach_lock);
    ga_pentry_t *e = ga_ptrmap_get(&ga_attached, (uint64_t)(uintptr_t)ctx);
    if (e && --e->size == 0)
        ga_ptrmap_take(&ga_attached, e->key, NULL);
    ga_mutex_unlock(&ga_attach_lock);
    return e != NULL;
}

/* A context destroyed whatever its count: a later context may get its handle. */
static void ga_attach_forget(CUcontext ctx)
{
    ga_mutex_lock(&ga_attach_lock);
    if (ga_attached.count)
        ga_ptrmap_take(&ga_attached, (uint64_t)(uintptr_t)ctx, NULL);
    ga_mutex_unlock(&ga_attach_lock);
}

GA_EXPORT CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
    GA_HOOK_ENTER(cuCtxAttach, (pctx, flags));
    if (!pctx) /* the driver attaches the current context: its state is checked first */
        return GA_REFUSAL_CODE(CUDA_SUCCESS, 1);
    CUresult r = ga_real.cuCtxAttach(pctx, flags);
    if (r == CUDA_SUCCESS && *pctx)
        ga_attach_add(*pctx);
    return r;
}

/* A detach that leaves an attach destroys nothing: straight to the driver. The last is a
 * teardown, as cuCtxDestroy. */
GA_EXPORT CUresult cuCtxDetach(CUcontext ctx)
{
    GA_HOOK_ENTER(cuCtxDetach, (ctx));
    if (ctx && ga_attach_take(ctx)) {
        CUresult r = ga_real.cuCtxDetach(ctx);
        if (r != CUDA_SUCCESS)
            ga_attach_add(ctx); /* refused: the count as it was */
        return r;
    }
    ga_teardown_begin();
    return ga_ctx_destroy(ctx, ga_real.cuCtxDetach);
}

/* The primary context of dev, if it is active, without changing its reference count. */
static CUcontext ga_primary_of(CUdevice dev)
{
    unsigned flags = 0;
    int active = 0;
    CUcontext ctx = NULL;
    if (ga_real.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active)
        return NULL;
    if (ga_real.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
        return NULL;
    ga_real.cuDevicePrimaryCtxRelease_v2(dev);
    return ctx;
}

/* Devices whose primary context was reset and not retained since (under ga_primary_lock): the
 * next retain makes its state again (cuDevicePrimaryCtxRetain below). */
static uint64_t ga_primary_was_reset; /* one bit per device: GA_MAX_DEVICES is 64 */
_Static_assert(GA_MAX_DEVICES <= 64, "ga_primary_was_reset has a bit per device");

/* Under the primary lock from the look at the handle to the drop, as a last release (below): a
 * retain in between would bring the context back with the same handle and its dying state. */
static CUresult ga_primary_reset(CUdevice dev, CUresult (*real_reset)(CUdevice))
{
    ga_mutex_lock(&ga_primary_lock);
    ga_td_call_t call = {.dev_fn = real_reset, .dev = dev};
    CUresult r = ga_ctx_teardown(ga_primary_of(dev), &call);
    if (r == CUDA_SUCCESS && dev >= 0 && dev < GA_MAX_DEVICES)
        ga_primary_was_reset |= 1ull << dev;
    ga_mutex_unlock(&ga_primary_lock);
    return r;
}

/* Before a primary release, other contexts' events made in the primary context go while it lives
 * (ga_ctx_foreign_dying): at every release, as only the driver knows which is the last (a cost
 * only when a free of another context's block was made on its streams and is still pending). */
static void ga_primary_foreign_dying(CUdevice dev)
{
    if (!ga_fence_foreign_held())
        return;
    ga_mutex_lock(&ga_primary_lock);
    CUcontext p = ga_primary_of(dev);
    ga_mutex_unlock(&ga_primary_lock);
    ga_ctx_foreign_dying(p);
}

/* Before a release of primary context p, which may be the last: chunks it freed with cuMemFree and
 * still pending may be written by another context's work on the device, which the driver's last
 * release does not wait for (it frees the context's memory), as in ga_ctx_quiesce for a destroy
 * or a reset. Those contexts are waited for first, at every release since only the driver knows
 * which is the last: a cost only while such chunks are pending beside another context (an outside
 * check, helper-128, 2026-12-07; test teardown_waits_for_peers_on_pending_frees). */
static void ga_primary_pending_peers(CUcontext p)
{
    ga_ctx_t *c = p ? ga_ctx_of(p) : NULL;
    if (!c)
        return;
    ga_mutex_lock(&c->lock);
    int need = !atomic_load(&c->dead) && c->npend > c->npend_ev &&
               atomic_load_explicit(&c->peers, memory_order_relaxed);
    int dev = c->dev;
    ga_mutex_unlock(&c->lock);
    if (need && !ga_capture_on_dev(dev))
        (void)ga_dev_sync_others(dev, c);
}

/* Only the last release destroys the context, and only the driver knows which one that is: ask
 * after the call, and if it went inactive forget the pool (the driver has freed its memory). The
 * drop is done before the lock goes, as a retain waits for it (cuDevicePrimaryCtxRetain below):
 * the primary context comes back with the same handle, and a thread whose retain fell between the
 * driver's release and the drop found the dying state, so that its allocation either answered
 * CUDA_ERROR_CONTEXT_IS_DESTROYED or was served from the pool whose memory the driver had just
 * freed (found by an outside test on 2026-12-05; test primary_retain_races_last_release). The drop
 * makes no driver call that waits for a context (the driver has freed this one's memory). */
static CUresult ga_primary_release(CUdevice dev, CUresult (*real_release)(CUdevice))
{
    ga_mutex_lock(&ga_primary_lock);
    CUcontext p = ga_primary_of(dev);
    ga_primary_pending_peers(p);
    CUresult r = real_release(dev);
    unsigned flags = 0;
    int active = 1;
    int gone = r == CUDA_SUCCESS && p &&
               ga_real.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && !active;
    if (gone) {
        ga_ctx_drop_all(p, 1);
        ga_capture_ctx_gone(p);
    }
    ga_mutex_unlock(&ga_primary_lock);
    return r;
}

/* A retain that makes the primary context live again must come after the last release's drop of
 * its state (above), never between the driver's release and that drop: it waits on the lock the
 * release holds through both. A retain while the context is live only waits for a concurrent
 * teardown hook's look at the state, which makes no call that can block on this thread. */
GA_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    GA_HOOK_ENTER(cuDevicePrimaryCtxRetain, (pctx, dev));
    ga_mutex_lock(&ga_primary_lock);
    CUresult r = ga_real.cuDevicePrimaryCtxRetain(pctx, dev);
    /* The first retain after a reset meets the context again, as a push or set would: its state
     * went with the reset, and a program that goes on in it without making it current again (it
     * still is, in the thread that reset it) launched kernels the fence never waited for, so a
     * block of another context they wrote was handed out again under them (an outside check's
     * finding, helper-118 3; test primary_after_reset_and_retain_waited_for). Not at the reset
     * itself: the context is inactive then, and the fence's synchronisation of it would make it
     * again on a GPU; the retain makes it active. A program that resets and goes on without a
     * retain or a push is still unknown until it allocates, frees or asks for memory (README). */
    if (r == CUDA_SUCCESS && pctx && dev >= 0 && dev < GA_MAX_DEVICES &&
        (ga_primary_was_reset >> dev & 1)) {
        ga_primary_was_reset &= ~(1ull << dev);
        if (!ga_ctx_of(*pctx))
            (void)ga_ctx_make(*pctx, dev);
    }
    ga_mutex_unlock(&ga_primary_lock);
    return r;
}

GA_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    GA_HOOK_ENTER(cuDevicePrimaryCtxReset_v2, (dev));
    ga_teardown_begin();
    return ga_primary_reset(dev, ga_real.cuDevicePrimaryCtxReset_v2);
}

GA_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    GA_HOOK_ENTER(cuDevicePrimaryCtxReset, (dev));
    ga_teardown_begin();
    return ga_primary_reset(dev, ga_real.cuDevicePrimaryCtxReset);
}

GA_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    GA_HOOK_ENTER(cuDevicePrimaryCtxRelease_v2, (dev));
    ga_teardown_begin();
    ga_primary_foreign_dying(dev);
    return ga_primary_release(dev, ga_real.cuDevicePrimaryCtxRelease_v2);
}

GA_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    GA_HOOK_ENTER(cuDevicePrimaryCtxRelease, (dev));
    ga_teardown_begin();
    ga_primary_foreign_dying(dev);
    return ga_primary_release(dev, ga_real.cuDevicePrimaryCtxRelease);
}

/* The child of a fork: no thread of it is inside a teardown hook (ga_ctx_fork_child). */
void ga_teardown_fork_child(void)
{
    ga_mutex_init(&ga_primary_lock);
    ga_mutex_init(&ga_attach_lock);
}
