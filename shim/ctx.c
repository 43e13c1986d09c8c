/* gpuarena contexts: per-context pools (made by ctx_pool.c), the context list, a device's cap set
 * up (the devices' figures and views are device.c's), context teardown's bookkeeping.
 *
 * Each CUDA context gets a ga_ctx with its own pool (the mode's, allocator/ga_pool.h) and lock,
 * the pool made at its first allocation. Context states are never freed (a stale handle must
 * never match a live one, and threads cache pointers to them); a destroyed context is marked dead
 * under its lock, and the generation bumped so caches revalidate. A dead state is reused for the
 * next context made (ga_ctx_reuse), so the list is as long as the most contexts alive at once.
 * Nothing is allocated in, or committed against, a dead context: every hook takes the lock and checks `dead` before touching the pool, so what the
 * devices count as committed is exactly what the driver holds for live contexts. What a teardown
 * does to a context's state, and the hooks that destroy or release one, are in teardown.c.
 */
#include "shim.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* The context list: this file's own; other files reach it through the functions below (the
 * devices are device.c's). */
static ga_ctx_t *_Atomic ga_ctx_list;
static pthread_mutex_t ga_ctx_list_lock = PTHREAD_MUTEX_INITIALIZER; /* adding to the list, caps */

/* The context keeping the IN_USE level itself (shim.h, ga_ctx_level_add), set and cleared under
 * the list lock and the context's own. */
static ga_ctx_t *_Atomic ga_lvl_owner;
/* Bumped when contexts die: each thread's cached context below is revalidated against it. */
static _Atomic unsigned ga_generation = 1;

static __thread struct {
    CUcontext ctx;
    ga_ctx_t *st;
    unsigned gen;
} ga_tl_cache;
/* The device of the current context whose state ga_current could not make (no host memory), -1
 * when it found no context current (ga_current_unmade). */
static __thread int ga_tl_unmade = -1;

/* A device plugin's CUDA_DEVICE_MEMORY_LIMIT[_i] for dev: 1 (in *bytes), 0 none. A value it
 * cannot read stops CUDA where it would be the cap (GPUARENA_LIMIT unset), as a bad option does;
 * beside GPUARENA_LIMIT it is said and left out, the cap being GPUARENA_LIMIT's (it was not read
 * at all there before, and a job that ran then still runs). */
static int ga_dev_plugin_limit(int dev, uint64_t *bytes, char *err, size_t len)
{
    int r = ga_hami_limit(environ, dev, bytes, err, len);
    if (r >= 0)
        return r;
    const char *why = err + (strncmp(err, "gpuarena: ", 10) ? 0 : 10);
    if (ga_opt.limit_bytes || ga_opt.limit_percent > 0) {
        static _Atomic int said;
        if (!atomic_exchange(&said, 1))
            ga_log(GA_LOG_WARN, "%s; left out: the cap is GPUARENA_LIMIT's", why);
        return 0;
    }
    ga_log(GA_LOG_ERROR, "%s; CUDA will not be used", why);
    ga_init_fail(CUDA_ERROR_INVALID_VALUE);
    return 0;
}

/* GPUARENA_LIMIT above the device plugin's limit: the plugin's is the cap. The plugin enforces it
 * itself (HAMi's library refuses past it), so a cap above it, and a cuMemGetInfo that reports
 * it, promised a framework memory the plugin then refused; before, GPUARENA_LIMIT won without a
 * word (helper-68 F7: 900 MiB reported under a 64 MiB pod limit). Said once per process. */
static void ga_dev_plugin_below(int dev, uint64_t ours, uint64_t plugin)
{
    static _Atomic int said;
    if (atomic_exchange(&said, 1))
        return;
    ga_log(GA_LOG_WARN, "device %d: GPUARENA_LIMIT (%llu bytes here) is above the device plugin's "
           "CUDA_DEVICE_MEMORY_LIMIT (%llu bytes), which the plugin enforces itself: the cap is "
           "the plugin's, and cuMemGetInfo reports no more; set GPUARENA_LIMIT at or below it (or "
           "leave it unset) to silence this", dev, (unsigned long long)ours,
           (unsigned long long)plugin);
}

/* Cap of a device, from the option and the physical total; once. 1 known, 0 not yet (the driver
 * not initialised). A cap or share that rounds to nothing is a bad setting: every hook refuses. */
int ga_dev_setup(int dev)
{
    ga_dev_t *d = ga_dev(dev);
    if (GA_LIKELY(atomic_load_explicit(&d->known, memory_order_acquire)))
        return 1;
    size_t total = 0;
    if (!ga_real.cuDeviceTotalMem_v2 || ga_real.cuDeviceTotalMem_v2(&total, dev) != CUDA_SUCCESS)
        total = 0;
    CUuuid uuid;
    memset(&uuid, 0, sizeof uuid);
    if (!ga_real.cuDeviceGetUuid_v2 || ga_real.cuDeviceGetUuid_v2(&uuid, dev) != CUDA_SUCCESS)
        if (ga_real.cuDeviceGetUuid)
            ga_real.cuDeviceGetUuid(&uuid, dev);
    pthread_mutex_lock(&ga_ctx_list_lock);
    if (!atomic_load(&d->known)) {
        ga_options_recheck(); /* a setenv after the settings were read: said, not obeyed */
        memcpy(d->uuid, uuid.bytes, sizeof d->uuid);
        d->physical_total = total ? total : UINT64_MAX;
        uint64_t cap = d->physical_total, hami = 0;
        char err[GA_MSG_MAX];
        /* Kubernetes device plugins (HAMi, KAI) set these, and enforce them themselves. */
        int from_hami = ga_dev_plugin_limit(dev, &hami, err, sizeof err);
        const char *cap_from = "the device's total memory";
        if (ga_opt.limit_bytes && ga_opt.limit_bytes < cap)
            cap = ga_opt.limit_bytes, cap_from = "GPUARENA_LIMIT";
        else if (ga_opt.limit_percent > 0 && total)
            cap = (uint64_t)((double)total * ga_opt.limit_percent / 100.0),
            cap_from = "GPUARENA_LIMIT (a percentage of the device)";
        if (from_hami > 0 && hami < cap) {
            if (ga_opt.limit_bytes || ga_opt.limit_percent > 0)
                ga_dev_plugin_below(dev, ga_opt.limit_bytes ? ga_opt.limit_bytes : cap, hami);
            cap = hami, cap_from = "CUDA_DEVICE_MEMORY_LIMIT (HAMi)";
        }
        d->cap = cap;
        d->cap_var = !strcmp(cap_from, "the device's total memory") ? NULL
                     : !strncmp(cap_from, "CUDA_", 5)                ? "CUDA_DEVICE_MEMORY_LIMIT"
                                                                     : "GPUARENA_LIMIT";
        /* what to raise: the variable the cap came from (a device plugin's, too: helper-60 F7) */
        const char *cap_var = d->cap_var ? d->cap_var : "GPUARENA_LIMIT";
        ga_mutex_init(&d->lock);
        ga_mutex_init(&d->pool_lock);
        if (ga_opt.group && cap) {
            /* A member of the device's ledger from its first commit there, not from cuInit:
             * `gpuarena top` showed a 0 B row on every device for each member. */
            d->group = ga_group_open_unjoined(ga_opt.group_dir, ga_opt.group, d->uuid, cap,
                                              cap_from, err, sizeof err);
            if (!d->group) {
                ga_log(GA_LOG_ERROR, "%s; CUDA will not be used", err + (strncmp(err, "gpuarena: ", 10) ? 0 : 10));
                ga_init_fail(CUDA_ERROR_INVALID_VALUE);
            }
        }
        /* The share bounds an arena (its first region) and, with a fixed fraction, a grow or
         * vmm pool; platform mode and a growing fraction ("0.75+") outside arena mode answer to
         * the cap alone, so a cap of one block is a cap there, not a setting that leaves nothing. */
        int share_bounds = ga_opt.mode == GA_MODE_ARENA ||
                           (!ga_opt.fraction_grow && ga_opt.mode != GA_MODE_PLATFORM);
        if (cap < GA_ALIGN) { /* no mode can serve a block: every allocation is 512 at least */
            ga_log(GA_LOG_ERROR, "device %d: %s gives a cap of %llu byte%s, less than one %zu-byte "
                   "block; nothing could ever be allocated (raise %s to 512 bytes or more); CUDA "
                   "will not be used", dev, cap_from, (unsigned long long)cap, cap == 1 ? "" : "s",
                   (size_t)GA_ALIGN, cap_var);
            ga_init_fail(CUDA_ERROR_INVALID_VALUE);
        } else if (share_bounds && ga_share_of(cap) == 0) {
            uint64_t need = (uint64_t)((double)GA_ALIGN / ga_opt.fraction);
            while (ga_share_of(need) == 0)
                need++;
            ga_log(GA_LOG_ERROR, "device %d: %s gives a cap of %llu bytes, and GPUARENA_MEM_FRACTION "
                   "(%s%s) a share of it that rounds to 0 bytes, which bounds the %s pool; nothing "
                   "could ever be allocated (raise %s to at least %llu bytes or "
                   "GPUARENA_MEM_FRACTION, or use GPUARENA_MODE=platform); CUDA will not be used",
                   dev, cap_from, (unsigned long long)cap, ga_opt.fraction_text,
                   ga_opt.fraction_grow ? "+" : "", ga_mode_name(ga_opt.mode), cap_var,
                   (unsigned long long)need);
            ga_init_fail(CUDA_ERROR_INVALID_VALUE);
        }
        atomic_store_explicit(&d->known, 1, memory_order_release);
        ga_log(GA_LOG_INFO, "device %d: total %zu bytes, cap %llu bytes", dev, total,
               (unsigned long long)cap);
    }
    pthread_mutex_unlock(&ga_ctx_list_lock);
    return 1;
}
ga_ctx_t *ga_ctx_first(void)
{
    return atomic_load(&ga_ctx_list);
}

static ga_ctx_t *ga_ctx_find(CUcontext ctx)
{
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next))
        if (c->ctx == ctx && !atomic_load_explicit(&c->dead, memory_order_acquire))
            return c;
    return NULL;
}

ga_ctx_t *ga_ctx_of(CUcontext ctx)
{
    return ctx ? ga_ctx_find(ctx) : NULL;
}

int ga_current_unmade(void)
{
    return ga_tl_unmade;
}

CUresult ga_refuse_unmade(const char *what, size_t bytes)
{
    ga_log(GA_LOG_WARN, "out of host memory for gpuarena's state of the current context (device "
           "%d): %s of %zu bytes refused with CUDA_ERROR_OUT_OF_MEMORY rather than passed on "
           "uncounted; it succeeds once the process has host memory again (free some, or raise "
           "its memory limit)", ga_tl_unmade, what, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The cached state counts only while no context has died since it was cached: a dead state is
 * reused for the next context made, and a thread that destroyed its own current context has none
 * current (the driver pops it), which the pop hooks do not see. Taken as current anyway, it had
 * cuMemFree with no context current free another context's block in the reused state (h34 F3). */
ga_ctx_t *ga_ctx_last(void)
{
    if (GA_UNLIKELY(ga_tl_cache.gen != atomic_load_explicit(&ga_generation, memory_order_acquire)))
        return NULL;
    return ga_tl_cache.st;
}

ga_ctx_t *ga_ctx_last_fresh(void)
{
    ga_ctx_t *c = ga_ctx_last();
    if (GA_LIKELY(c) || !ga_tl_cache.st)
        return c;
    ga_tl_cache.ctx = NULL; /* stale: the current context asked of the driver again */
    ga_tl_cache.st = NULL;
    return ga_current();
}

void ga_ctx_forget_cached(void)
{
    atomic_fetch_add(&ga_generation, 1);
}

ga_ctx_t *ga_ctx_level_owner(void)
{
    return atomic_load_explicit(&ga_lvl_owner, memory_order_acquire);
}

/* The list lock held: the owner's figures go into the atomics, under its lock so that no
 * allocation of it is half counted. */
static void ga_ctx_level_share_locked(void)
{
    ga_ctx_t *o = atomic_load(&ga_lvl_owner);
    if (!o)
        return;
    ga_mutex_lock(&o->lock);
    ga_level_fold(GA_LEVEL_IN_USE, atomic_load(&o->lvl_in_use), atomic_load(&o->lvl_peak));
    o->lvl_own = 0;
    atomic_store(&ga_lvl_owner, NULL);
    ga_mutex_unlock(&o->lock);
}

void ga_ctx_level_share(void)
{
    pthread_mutex_lock(&ga_ctx_list_lock);
    ga_ctx_level_share_locked();
    pthread_mutex_unlock(&ga_ctx_list_lock);
}

/* Zeroes what a new context's state starts from (c dead, its lock held): the fields the hooks
 * read without the lock (the pool, orphan, the level atomics: all zero in a dead state already
 * but for the level's, which only its owner uses) are left out of the plain writes. */
static void ga_ctx_clear(ga_ctx_t *c)
{
#define GA_CLEAR(from, to) \
    do { \
        memset((char *)c + offsetof(ga_ctx_t, from), 0, offsetof(ga_ctx_t, to) - offsetof(ga_ctx_t, from)); \
    } while (0)
    GA_CLEAR(pass, orphan);
    GA_CLEAR(unfenced, lvl_in_use);
    GA_CLEAR(orph_mapped, next);
#undef GA_CLEAR
    atomic_store(&c->lvl_in_use, 0);
    atomic_store(&c->lvl_peak, 0);
}

/* A dead state nothing holds any more (no orphan pool, no granule the driver kept, its lock free)
 * made the state of ctx on dev, its figures first into its device's retired record (stats.c);
 * NULL when there is none. The list lock held. Every dead state stayed on the list: host memory,
 * the statistics and every walk of the list (the fence's wait for the device's other contexts)
 * grew with the contexts ever made, 21 us a free+alloc pair after 2,000 (helper-20 F6). States
 * cannot be freed (walks read them unlocked, threads cache pointers); reused, the list is as long
 * as the most contexts alive at once. A stale pointer finds it alive for another context: a free
 * looks in that pool by address, and hooks starting from a handle look it up (ga_ctx_find). */
static ga_ctx_t *ga_ctx_reuse(CUcontext ctx, int dev)
{
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next)) {
        if (!atomic_load(&c->dead) || atomic_load(&c->orphan) || c == atomic_load(&ga_lvl_owner))
            continue;
        if (ga_mutex_lock_for(&c->lock, 0) != 0)
            continue;
        if (!atomic_load(&c->dead) || atomic_load(&c->orphan) || c->pool || c->stuck.count ||
            c->pend || c->pfree || c->fev || c->nevents) {
            ga_mutex_unlock(&c->lock);
            continue;
        }
        atomic_fetch_add(&c->life, 1); /* first: a reader of ctx and dev sees it move (ga_current_life) */
        ga_stats_retire(c);
        ga_ptrmap_fini(&c->stuck);
        ga_ptrmap_fini(&c->pass);
        ga_async_fini(c);
        ga_ptrmap_fini(&c->pend_set);
        ga_ctx_clear(c);
        c->driver_gone = 0;
        atomic_store(&c->peers, 0);
        atomic_store(&c->ctx, ctx);
        atomic_store(&c->dev, dev);
        c->grp = ga_dev(dev)->group != NULL;
        atomic_store_explicit(&c->dead, 0, memory_order_release); /* last: now it matches ctx */
        ga_mutex_unlock(&c->lock);
        return c;
    }
    return NULL;
}

/* Every context on dev knows it has a peer there (the list lock held). */
static void ga_ctx_peers_locked(ga_ctx_t *c, int dev)
{
    for (ga_ctx_t *o = atomic_load(&ga_ctx_list); o; o = atomic_load(&o->next))
        if (o != c && o->dev == dev) { /* never cleared: a dead peer only costs a walk */
            atomic_store(&o->peers, 1);
            atomic_store(&c->peers, 1);
        }
}

static ga_ctx_t *ga_ctx_create_on(CUcontext ctx, CUdevice dev);

static ga_ctx_t *ga_ctx_create(CUcontext ctx)
{
    CUdevice dev = 0;
    ga_tl_unmade = -1;
    if (ga_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 || dev >= GA_MAX_DEVICES)
        return NULL;
    return ga_ctx_create_on(ctx, dev);
}

ga_ctx_t *ga_ctx_make(CUcontext ctx, int dev)
{
    if (!ctx || dev < 0 || dev >= GA_MAX_DEVICES)
        return NULL;
    ga_ctx_t *c = ga_ctx_create_on(ctx, dev);
    ga_tl_unmade = -1; /* this thread's current context is not the one made */
    return c;
}

static ga_ctx_t *ga_ctx_create_on(CUcontext ctx, CUdevice dev)
{
    ga_dev_setup(dev);
    pthread_mutex_lock(&ga_ctx_list_lock);
    ga_ctx_t *c = ga_ctx_find(ctx);
    if (!c && atomic_load(&ga_ctx_list)) {
        ga_ctx_level_share_locked(); /* a second context: the level is shared (and never reused) */
        if ((c = ga_ctx_reuse(ctx, dev)))
            ga_ctx_peers_locked(c, dev);
    }
    if (!c && !(c = calloc(1, sizeof *c))) {
        ga_tl_unmade = dev;
    } else if (!c->ctx) {
        c->ctx = ctx;
        c->dev = dev;
        c->grp = ga_dev(dev)->group != NULL;
        ga_mutex_init(&c->lock);
        if (!atomic_load(&ga_ctx_list)) { /* the process's first context keeps the level */
            c->lvl_own = 1;
            atomic_store(&ga_lvl_owner, c);
        }
        ga_ctx_peers_locked(c, dev);
        atomic_store(&c->next, atomic_load(&ga_ctx_list));
        atomic_store(&ga_ctx_list, c);
    }
    pthread_mutex_unlock(&ga_ctx_list_lock);
    return c;
}

/* The state of ctx, current in this thread: found, or made (NULL when it cannot be), and cached. */
static inline ga_ctx_t *ga_current_of(CUcontext ctx)
{
    unsigned gen = atomic_load_explicit(&ga_generation, memory_order_acquire);
    if (GA_LIKELY(ga_tl_cache.ctx == ctx && ga_tl_cache.gen == gen))
        return ga_tl_cache.st;
    ga_ctx_t *c = ga_ctx_find(ctx);
    if (!c)
        c = ga_ctx_create(ctx);
    if (c) {
        ga_tl_cache.ctx = ctx;
        ga_tl_cache.st = c;
        ga_tl_cache.gen = gen;
    }
    return c;
}

ga_ctx_t *ga_current(void)
{
    CUcontext ctx = NULL;
    if (ga_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return ga_tl_unmade = -1, NULL;
    return ga_current_of(ctx);
}

/* A context this thread has just made current (created, pushed, set: meet.c) gets its state now,
 * as at its first allocation; one already known costs a look at the thread's cache. No lock is
 * held by the caller; ga_ctx_create takes the list lock after its driver calls. */
void ga_ctx_meet(CUcontext ctx)
{
    if (ctx)
        (void)ga_current_of(ctx);
}

/* ga_current, with the state's life and device read together: the state found may die and be
 * reused for another context (another device maybe) before the caller reads its device, and a
 * pass-through allocation then committed its bytes on the other device, the driver's block on
 * this one left uncounted (an outside check, helper-102 F9: 65-71 MiB held under a 64 MiB cap on
 * two devices while a thread reset the primary contexts). The reuse bumps life before it changes
 * ctx and dev, and the state is dead meanwhile: an unchanged life around the reads, a live state
 * and the current context's handle make them one state's. */
ga_ctx_t *ga_current_life(unsigned *life, int *dev)
{
    for (int tries = 0; tries < 8; tries++) {
        ga_ctx_t *c = ga_current();
        if (!c)
            return NULL;
        unsigned l = atomic_load_explicit(&c->life, memory_order_acquire);
        CUcontext x = atomic_load(&c->ctx);
        int d = atomic_load(&c->dev), dead = atomic_load(&c->dead);
        CUcontext cur = NULL;
        if (l == atomic_load(&c->life) && !dead && ga_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS &&
            cur == x) {
            *life = l, *dev = d;
            return c;
        }
        ga_tl_cache.ctx = NULL; /* look it up again */
    }
    ga_ctx_t *c = ga_current(); /* states reused 8 times over meanwhile: as read, never uncounted */
    if (c)
        *life = atomic_load(&c->life), *dev = atomic_load(&c->dev);
    return c;
}

/* A thread left with no context current (its last popped, cuCtxSetCurrent(NULL)) forgets the
 * context it had: ga_ctx_last then names none, so cuMemFree's fast path, which frees a block of
 * that context without asking the driver for the current one (a call per free), is not taken,
 * and the slow path answers the driver's CUDA_ERROR_INVALID_CONTEXT (helper-46 F5). Only this
 * thread's cache; ga_current refills it at the next call made with a context current. */
static void ga_ctx_forget_if_none(void)
{
    if (ga_none_current()) {
        ga_tl_cache.ctx = NULL;
        ga_tl_cache.st = NULL;
    }
}

GA_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    GA_HOOK_ENTER(cuCtxPopCurrent_v2, (pctx));
    CUresult r = ga_real.cuCtxPopCurrent_v2(pctx);
    if (r == CUDA_SUCCESS)
        ga_ctx_forget_if_none();
    return r;
}

GA_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    GA_HOOK_ENTER(cuCtxPopCurrent, (pctx));
    CUresult r = ga_real.cuCtxPopCurrent(pctx);
    if (r == CUDA_SUCCESS)
        ga_ctx_forget_if_none();
    return r;
}

GA_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    GA_HOOK_ENTER(cuCtxSetCurrent, (ctx));
    CUresult r = ga_real.cuCtxSetCurrent(ctx);
    if (r == CUDA_SUCCESS && !ctx) /* a pop, when a context was current */
        ga_ctx_forget_if_none();
    else if (r == CUDA_SUCCESS)
        ga_ctx_meet(ctx); /* known from now on, as a pushed one (meet.c) */
    return r;
}

/* The driver calls gpuarena makes while it holds a lock (a region, a granule, a synchronisation
 * of the fence) run with cancellation disabled: a driver that waits at a cancellation point
 * (poll(2), a condition variable) would otherwise end a thread cancelled there with gpuarena's
 * lock taken, and every later call on that context would wait for it for ever (helper-43 F3).
 * The cancel stays pending and acts at the program's next cancellation point. Only these rare
 * paths pay for it, never an allocation the pool serves. 1 when it was enabled (end enables it). */
int ga_nocancel_begin(void)
{
    int old = PTHREAD_CANCEL_DISABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    return old == PTHREAD_CANCEL_ENABLE;
}

void ga_nocancel_end(int was_enabled)
{
    if (was_enabled)
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
}

/* Bit 0: ctx was pushed; bit 1: cancellation was disabled here (ga_nocancel_begin). 0: nothing
 * to undo, which callers that skip the driver pass to ga_ctx_leave too. */
int ga_ctx_enter(CUcontext ctx)
{
    int nocancel = ga_nocancel_begin() << 1;
    CUcontext cur = NULL;
    if (ga_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx)
        return nocancel;
    return nocancel | (ga_real.cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS);
}

/* A pop forgets the thread's cached state too: a call made while ctx was pushed (cuMemAllocAsync on
 * another context's stream: GA_IN_STREAM_CTX) cached ctx's, and ga_ctx_last went on naming it
 * after the pop, so cuMemFree's fast path freed that context's block for a thread with none
 * current, or with a destroyed one current, which the driver refuses (201, 709) and the owner's
 * own free was then refused as a double free (an outside check, 2026-12-06). ga_current refills
 * it at the next call. */
void ga_ctx_leave(int pushed)
{
    CUcontext dummy;
    if (pushed & 1) {
        ga_real.cuCtxPopCurrent_v2(&dummy);
        ga_tl_cache.ctx = NULL;
        ga_tl_cache.st = NULL;
    }
    ga_nocancel_end(pushed >> 1);
}

/* Whether live context c holds ptr in its pool or among its pass-through pointers, and if so fn's
 * answer for it in *answer, fn run under c's lock (taken and released here). The pool is asked for
 * the live allocation at ptr first (one probe of its live table, the answer for every good free),
 * and only when there is none whether ptr lies in its memory at all. wait 0: a context inside its
 * teardown call (closing), whose lock is held through the driver's call, is passed by (-1). */
static int ga_ctx_try(ga_ctx_t *c, uintptr_t ptr, ga_owner_fn fn, void *arg, int *answer, int wait)
{
    if (atomic_load_explicit(&c->dead, memory_order_acquire) && !atomic_load(&c->orphan))
        return 0;
    int held = 0, got = 0;
    if (wait)
        ga_mutex_lock(&c->lock);
    else if (GA_UNLIKELY(!ga_mutex_trylock(&c->lock)))
        while ((got = ga_mutex_lock_for(&c->lock, GA_CLOSING_POLL_NS)) != 0 &&
               !atomic_load(&c->closing))
            ;
    if (got != 0)
        return -1;
    if (!atomic_load(&c->dead) || atomic_load(&c->orphan)) {
        ga_owner_t o = {0, 0};
        if (c->pool && ((o.live_size = ga_pool_live_size(c->pool, ptr)) != 0 ||
                        ga_pool_owns(c->pool, ptr))) {
            held = 1;
        } else if (c->pass.count && ga_ptrmap_get(&c->pass, ptr)) {
            o.in_pass = 1;
            held = 1;
        }
        if (held)
            *answer = fn(c, &o, arg);
    }
    ga_mutex_unlock(&c->lock);
    return held;
}

/* The rest of ga_with_owner once the thread's own context did not answer (passed: it was inside
 * its teardown call). Out of line: a free of the thread's own context's block, nearly every one,
 * pays for none of it (platform mode's pair 1,696 instructions with the two passes inline, 1,682
 * so; scripts/bench-shim-instr.sh). */
static __attribute__((noinline)) int ga_with_owner_rest(uintptr_t ptr, ga_owner_fn fn, void *arg,
                                                        int none, ga_ctx_t *first, int passed)
{
    int answer = none, t;
    for (int wait = 0; wait < 2; wait++) {
        if (wait && first && ga_ctx_try(first, ptr, fn, arg, &answer, 1) > 0)
            return answer;
        for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next))
            if (c != first && (t = ga_ctx_try(c, ptr, fn, arg, &answer, wait)) != 0) {
                if (t > 0)
                    return answer;
                passed = 1;
            }
        if (!passed)
            break;
    }
    return none;
}

/* The context this thread last allocated in is asked first: memory is mostly freed where it was
 * allocated, and threads on different contexts then never take each other's locks. Any order
 * finds the same owner (live contexts hold disjoint memory); states are never freed, so the
 * cached one is safe to look at even if stale. A context inside its teardown call is asked last,
 * waiting for the call, and only when no other holds ptr: its lock is held through the driver's
 * call, which waits for its queued work, and a free of another context's block that met it first
 * in the list waited for that teardown, for ever where the work waited for the freeing thread (a
 * context met where it was made, meet.c, comes earlier in the list than before; test
 * free_passes_a_closing_context). */
int ga_with_owner(uintptr_t ptr, ga_owner_fn fn, void *arg, int none)
{
    int answer = none;
    ga_ctx_t *first = ga_tl_cache.st;
    int t = first ? ga_ctx_try(first, ptr, fn, arg, &answer, 0) : 0;
    if (t > 0)
        return answer;
    return ga_with_owner_rest(ptr, fn, arg, none, first, t < 0);
}

/* A pass-through allocation's bytes against dev's cap, for context c (NULL: none current):
 * async frees of c's own pass-through memory the device has passed go back first, and a refusal
 * is final only once the device's idle memory has been trimmed (ga_dev_trim) and it still does not
 * fit. No lock held by the caller. */
int ga_dev_commit_pass(ga_ctx_t *c, int dev, uint64_t bytes)
{
    if (c) {
        ga_mutex_lock(&c->lock);
        if (c->npfree && !atomic_load(&c->dead))
            ga_fence_pass_reclaim(c, 0);
        ga_mutex_unlock(&c->lock);
    }
    ga_mempool_settle(dev, 0); /* what the driver's pools keep, as the driver says now */
    if (ga_dev_commit(dev, bytes))
        return 1;
    return ga_dev_trim(dev) && ga_dev_commit(dev, bytes);
}

/* Also the pool's stream-ordered frees whose streams passed them: the report counted them in
 * pending_bytes (2 MiB freed with cuMemFreeAsync, the stream synchronised by the program, then
 * exit) until an outside check, 2026-12-07 (test async_free_passed_not_pending_at_exit). */
void ga_pass_passed_at_exit(void)
{
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next)) {
        if (atomic_load_explicit(&c->dead, memory_order_acquire) || (!c->npfree && !c->npend_ev))
            continue;
        /* Never waited for: its holder may be this thread, interrupted, or one that never lets go
         * (the statistics writer says so); its bytes then stay in the report. */
        if (ga_mutex_lock_for(&c->lock, 0) != 0)
            continue;
        if (c->npfree && !atomic_load(&c->dead) && !c->driver_gone)
            ga_fence_pass_reclaim(c, 0);
        if (c->npend_ev && !atomic_load(&c->dead) && !c->driver_gone)
            ga_fence_events_passed(c);
        ga_mutex_unlock(&c->lock);
    }
}

void ga_dev_pass_passed(int dev, int pool)
{
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next)) {
        if ((dev >= 0 && c->dev != dev) || atomic_load_explicit(&c->dead, memory_order_acquire))
            continue;
        int got; /* a closing context is passed by, as by ga_dev_view */
        while ((got = ga_mutex_lock_for(&c->lock, GA_CLOSING_POLL_NS)) != 0 &&
               !atomic_load(&c->closing))
            ;
        if (got != 0)
            continue;
        if (c->npfree && !atomic_load(&c->dead) && !c->driver_gone) /* not in a forked child */
            ga_fence_pass_reclaim(c, 0);
        if (pool && c->npend_ev && !atomic_load(&c->dead) && !c->driver_gone)
            ga_fence_events_passed(c);
        ga_mutex_unlock(&c->lock);
    }
}

/* Every context lock, so the child inherits pools and tables that no thread was half-way through
 * changing; the list lock first, as ga_ctx_create takes it before any context lock. A context
 * inside its teardown (closing) is the exception: its lock is held through the driver's call,
 * which waits for its queued work, and a fork waited for all of it (for ever behind a stream
 * waiting on the forking thread: h34 F4). Its lock is not taken (fork_held 0): the child never
 * touches that state, which the parent's teardown may be changing as the fork copies it (its
 * pool, tables, lock), but leaves it off the list and its host memory unfreed (ga_ctx_fork_child);
 * its device memory is the parent's in any case. */
void ga_ctx_atfork_prepare(void)
{
    pthread_mutex_lock(&ga_ctx_list_lock);
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next)) {
        int got;
        while ((got = ga_mutex_lock_for(&c->lock, GA_CLOSING_POLL_NS)) != 0 &&
               !atomic_load(&c->closing))
            ;
        c->fork_held = got == 0;
    }
    for (int d = 0; d < GA_MAX_DEVICES; d++)
        if (atomic_load(&ga_dev(d)->known))
            ga_mutex_lock(&ga_dev(d)->lock);
}

void ga_ctx_atfork_parent(void)
{
    for (int d = 0; d < GA_MAX_DEVICES; d++)
        if (atomic_load(&ga_dev(d)->known))
            ga_mutex_unlock(&ga_dev(d)->lock);
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next))
        if (c->fork_held)
            ga_mutex_unlock(&c->lock);
    pthread_mutex_unlock(&ga_ctx_list_lock);
}

/* The child: the parent's contexts are not valid here and their memory is not the child's. Their
 * pools are freed without a driver call and the states leave the list (the child's statistics
 * are its own); every device starts from nothing committed. */
void ga_ctx_fork_child(void)
{
    /* The forking thread holds every lock (ga_ctx_atfork_prepare) and is the child's only thread:
     * it lets them go before anything is freed (never destroy or re-initialise a held mutex). */
    ga_ctx_atfork_parent();
    /* The teardown hooks' lock (teardown.c) is not taken by the prepare handler: a parent thread
     * inside a teardown hook may hold it, and no thread of the child does. */
    ga_teardown_fork_child();
    /* First off the parent's group slots: giving up the copies of its pools below uncommits
     * their bytes, which must not come off the parent's share in the ledger. */
    for (int d = 0; d < GA_MAX_DEVICES; d++)
        if (atomic_load(&ga_dev(d)->known) && ga_dev(d)->group)
            ga_group_fork_child(ga_dev(d)->group);
    /* The driver pools' accounting goes before the contexts: giving up a context's async-freed
     * pass-through blocks (ga_fence_drop) goes through it, and its lock, which the prepare handler
     * does not take, may have been copied held by a parent thread inside a pool query (the child
     * hung in fork(): test fork_while_pool_lock_held). With no pool listed they are uncommitted. */
    for (int d = 0; d < GA_MAX_DEVICES; d++)
        if (atomic_load(&ga_dev(d)->known))
            ga_mempool_fork_child(ga_dev(d));
    ga_ctx_t *c = atomic_load(&ga_ctx_list);
    atomic_store(&ga_ctx_list, NULL);
    atomic_store(&ga_lvl_owner, NULL); /* the child's first context keeps its level */
    while (c) {
        ga_ctx_t *next = atomic_load(&c->next);
        if (!c->fork_held) { /* inside the parent's teardown: never touched (above) */
            c = next;
            continue;
        }
        c->driver_gone = 2; /* the parent's: no driver call may touch it */
        ga_fence_drop(c);
        if (c->pool)
            ga_pool_destroy(c->pool);
        ga_ptrmap_fini(&c->pass);
        ga_ptrmap_fini(&c->stuck); /* its table, grown before the fork, leaked with the state
                                    * (LeakSanitizer in a forked child, t_outside135.c) */
        ga_async_fini(c);
        free(c);
        c = next;
    }
    for (int d = 0; d < GA_MAX_DEVICES; d++) {
        ga_dev_t *dv = ga_dev(d);
        atomic_store(&dv->committed, 0);
        atomic_store(&dv->in_use, 0);
        atomic_store(&dv->asking, 0); /* parent threads' calls in flight answer in the parent */
        if (atomic_load(&dv->known)) {
            ga_mutex_init(&dv->lock); /* a parent thread's sleep on it is not the child's */
            ga_ptrmap_fini(&dv->handles);
            memset(&dv->handles, 0, sizeof dv->handles);
            ga_ptrmap_fini(&dv->maps);
            memset(&dv->maps, 0, sizeof dv->maps);
            ga_ptrmap_fini(&dv->loose);
            memset(&dv->loose, 0, sizeof dv->loose);
            memset(&dv->counts, 0, sizeof dv->counts);
            dv->retired_n = 0; /* the parent's contexts */
            memset(&dv->retired_counts, 0, sizeof dv->retired_counts);
            memset(&dv->retired_final, 0, sizeof dv->retired_final);
            dv->retired_late_unmaps = dv->retired_late_releases = 0;
            atomic_store(&dv->orph_n, 0); /* the parent's orphans were freed above */
            atomic_store(&dv->orph_bytes, 0);
            atomic_store(&dv->orph_mapped, 0);
            atomic_store(&dv->orph_va, 0);
            atomic_store(&dv->unrecorded, 0); /* the parent's granules */
        }
    }
    ga_tl_cache.ctx = NULL;
    ga_tl_cache.st = NULL; /* freed above: the child's only thread must not look at it again */
    atomic_fetch_add(&ga_generation, 1);
}
