/* gpuarena's waits and trims over a device's contexts: what a context being destroyed may still
 * have queued in others (ga_ctx_foreign_dying), the device-wide synchronisations (ga_dev_sync*,
 * each context named only while its teardown allows it), pending frees settled before a stream
 * capture or for memory (ga_dev_settle_pending), and the trims an out-of-memory makes before it
 * refuses (ga_ctx_give_back, ga_dev_trim). Apart from ctx.c, which keeps the context list, to
 * keep each file short; the list is walked here through ga_ctx_first and ga_ctx_next.
 */
#include "shim.h"

void ga_ctx_foreign_dying(CUcontext dying)
{
    if (!dying || !ga_fence_foreign_held())
        return;
    /* Its streams passed first, with no lock held: the entries' waits then return at once. Only
     * if it could be made current (else the waits below do it, each under its context's lock). */
    CUcontext cur = NULL;
    int here = ga_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == dying;
    int pushed = here ? 0 : ga_ctx_enter(dying);
    if ((here || (pushed & 1)) && ga_real.cuCtxSynchronize)
        ga_real.cuCtxSynchronize();
    ga_ctx_leave(pushed);
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        if (c->ctx == dying || atomic_load_explicit(&c->dead, memory_order_acquire))
            continue;
        ga_mutex_lock(&c->lock);
        if (!atomic_load(&c->dead) && !c->driver_gone)
            ga_fence_foreign_dying(c, dying);
        ga_mutex_unlock(&c->lock);
    }
}

__thread CUcontext ga_tl_unseen;

/* With no lock held: the context this thread's stream-ordered free found without state (a stream
 * of a context made with cuCtxCreate and used only for its streams) gets state, as any context
 * current for an allocation does (ga_current). From then on the waits over the device's contexts
 * (the fence of cuMemFree, the wait before an out-of-memory) and over every context include it,
 * so the free's event there is passed by them. The program is freeing on that context's stream
 * now, so the context is alive. */
void ga_ctx_meet_unseen(void)
{
    CUcontext ctx = ga_tl_unseen, cur = NULL;
    ga_tl_unseen = NULL;
    if (!ctx || ga_ctx_of(ctx))
        return;
    int pushed = ga_ctx_enter(ctx);
    if ((pushed & 1) || (ga_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx))
        (void)ga_current();
    ga_ctx_leave(pushed);
}

int ga_dev_live_peer(const ga_ctx_t *self)
{
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c))
        if (c != self && c->dev == self->dev && !atomic_load_explicit(&c->dead, memory_order_acquire))
            return 1;
    return 0;
}

CUresult ga_dev_sync(int dev)
{
    return ga_dev_sync_others(dev, NULL);
}

/* Synchronises c's context for a walk that holds no lock of c (dev: c's device; -1 any), unless
 * its teardown is past the quiesce or done (closing 2, dead): "It is the responsibility of the
 * calling function to ensure that no API call issues using ctx while cuCtxDestroy() is executing"
 * (cuCtxDestroy), and once it has returned the handle is freed or another context's. A look
 * without a lock pushed a context another thread was destroying, and destroyed ones (h34 F2).
 * users makes the look and the push one step as far as the teardown is concerned: it waits for
 * users to be 0 after it sets closing 2 (teardown.c), and a walk counts itself in users before it
 * looks, so either the walk sees closing 2 or the teardown sees the walk and waits for its call.
 * A dead state may be reused for a new context meanwhile (ga_ctx_reuse): the handle is read before
 * the look and again after it, so a walk names the state's new context only when it is alive,
 * never the old one. Nothing of such a context's needs waiting for: its queued work passed at the
 * quiesce, before closing 2.
 * The driver's answer is returned (CUDA_SUCCESS for a context passed by): a refused
 * synchronisation waited for nothing, and a chunk freed before it has not been passed by it. */
static CUresult ga_ctx_sync_named(ga_ctx_t *c, int dev)
{
    CUresult r = CUDA_SUCCESS;
    CUcontext ctx = atomic_load(&c->ctx);
    atomic_fetch_add(&c->users, 1);
    if (atomic_load(&c->closing) < 2 && !atomic_load(&c->dead) && atomic_load(&c->ctx) == ctx &&
        (dev < 0 || atomic_load(&c->dev) == dev)) {
        int pushed = ga_ctx_enter(ctx);
        if (ga_real.cuCtxSynchronize)
            r = ga_real.cuCtxSynchronize();
        ga_ctx_leave(pushed);
    }
    atomic_fetch_sub(&c->users, 1);
    return r;
}

CUresult ga_ctx_sync_device(const ga_ctx_t *c)
{
    CUresult r = ga_ctx_sync_named((ga_ctx_t *)c, c->dev), o = ga_dev_sync_others(c->dev, c);
    return r != CUDA_SUCCESS ? r : o;
}

CUresult ga_dev_sync_others(int dev, const ga_ctx_t *self)
{
    CUresult r = CUDA_SUCCESS;
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        if (c == self || c->dev != dev || atomic_load_explicit(&c->dead, memory_order_acquire))
            continue;
        CUresult cr = ga_ctx_sync_named(c, dev);
        r = r != CUDA_SUCCESS ? r : cr; /* the others are still waited for */
    }
    return r;
}

/* Every live context of the process, each synchronised: for a stream-ordered free of one device's
 * block on another device's stream, whose event the device's own synchronisation does not pass. */
static CUresult ga_sync_every_context(void)
{
    CUresult r = CUDA_SUCCESS;
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        if (atomic_load_explicit(&c->dead, memory_order_acquire))
            continue;
        CUresult cr = ga_ctx_sync_named(c, -1);
        r = r != CUDA_SUCCESS ? r : cr;
    }
    return r;
}

/* What c's pending frees and async-freed pass-through memory give back once waited for, with c's
 * lock let go for the wait, as the allocation's own fence does (fence.c): the trim runs for an
 * allocation in another context, and waiting for the device under c's lock held up c's memory
 * queries, NVML queries, frees and allocations for as long as the device's queued work took, for
 * ever behind a stream waiting on one of them (helper-49 F11). The entries are noted under the lock,
 * the device synchronised without it, the noted entries returned with it taken again; entries whose
 * events the device's synchronisation did not pass (a free on another device's stream) get a
 * second round that synchronises every context. Entries freed meanwhile stay pending. Nothing is
 * waited for while a stream capture may be under way (the synchronisation would end it): the
 * entries the device has passed are returned all the same, and so when the driver refuses a
 * synchronisation (it waited for nothing: a cuMemFree's chunk goes back only after one that
 * succeeded, as in the allocation's own fence; until 2026-12-06 the answer was not looked at, and
 * a chunk a held kernel still wrote was handed to the allocation that needed its room, or its vmm
 * granules unmapped under the kernel: an outside test, helper-91). */
static size_t ga_ctx_trim_pending(ga_ctx_t *c)
{
    size_t freed = 0;
    for (int round = 0; round < 2; round++) {
        ga_mutex_lock(&c->lock);
        int live = !atomic_load(&c->dead);
        unsigned life = atomic_load_explicit(&c->life, memory_order_relaxed);
        ga_fence_mark_t m = ga_fence_mark_held(c);
        uint64_t held_seq = c->pf_seq; /* frees with no event listed before the wait */
        int waits = live && ((c->pool && c->npend) || c->npfree);
        ga_mutex_unlock(&c->lock);
        if (!waits)
            break;
        int waited = !(round ? atomic_load(&ga_cap_n) != 0 : ga_capture_on_dev(c->dev));
        CUresult sr = CUDA_SUCCESS;
        if (waited) /* no lock held: left cancellable, as the allocation's own wait is */
            waited = (sr = round ? ga_sync_every_context() : ga_ctx_sync_device(c)) == CUDA_SUCCESS;
        if (!waited)
            m.n = 0; /* no wait: only what has passed goes back below */
        ga_mutex_lock(&c->lock);
        int left = 0;
        /* Dead, or dead and reused meanwhile by a new context (life moved): the entries noted are
         * gone with the old context, and the new one's, which the wait may not have passed, are
         * not the mark's (an outside check's finding, helper-118 1: they went back to the new
         * context's pool unsynchronised; test trim_wait_leaves_a_reused_state_pending). */
        if (!atomic_load(&c->dead) && atomic_load_explicit(&c->life, memory_order_relaxed) == life) {
            c->sync_refused = sr;
            size_t before = c->pend_bytes;
            if (c->pool && m.n)
                ga_fence_passed(c, m);
            freed += before - c->pend_bytes;
            if (c->npfree)
                freed += ga_fence_pass_reclaim(c, 0); /* queried: the wait was above */
            if (c->npfree && waited) /* those the wait passed (helper-103 F5) */
                freed += ga_fence_pass_synced(c, held_seq);
            left = waited && (c->npend_ev || c->npfree);
        }
        ga_mutex_unlock(&c->lock);
        if (!left)
            break;
    }
    return freed;
}

void ga_dev_settle_pending(int dev)
{
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        if (c->dev != dev || atomic_load_explicit(&c->dead, memory_order_acquire) ||
            atomic_load_explicit(&c->closing, memory_order_acquire))
            continue; /* a closing one returns its memory with its teardown */
        ga_mutex_lock(&c->lock);
        int plain = c->pool && c->npend > c->npend_ev && !atomic_load(&c->dead);
        ga_mutex_unlock(&c->lock);
        if (plain)
            ga_ctx_trim_pending(c); /* it looks for a capture again before it waits */
    }
}

size_t ga_ctx_give_back(ga_ctx_t *c)
{
    size_t freed = ga_ctx_trim_pending(c);
    ga_mutex_lock(&c->lock);
    int idle = c->pool && !atomic_load(&c->dead) && ga_pool_idle(c->pool);
    ga_mutex_unlock(&c->lock);
    if (idle && !ga_capture_on_dev(c->dev))
        ga_dev_sync(c->dev); /* no lock held: the driver's cuMemFree below has nothing to wait for */
    ga_mutex_lock(&c->lock);
    if (c->pool && !atomic_load(&c->dead))
        freed += ga_pool_trim(c->pool);
    ga_mutex_unlock(&c->lock);
    return freed;
}

size_t ga_dev_trim(int dev)
{
    size_t freed = 0;
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        /* A context inside its teardown call holds its lock through the driver's call: its memory
         * leaves the cap when that returns, and waiting here would stall this allocation for
         * the whole teardown. */
        if (c->dev != dev || atomic_load_explicit(&c->dead, memory_order_acquire) ||
            atomic_load_explicit(&c->closing, memory_order_acquire))
            continue;
        freed += ga_ctx_give_back(c); /* freed chunks waiting for the device are free memory too */
    }
    /* Last: the frees waited for above may have left their memory in the driver's pools. */
    freed += ga_mempool_settle(dev, 1);
    return freed;
}
