/* gpuarena contexts' pools: a context's pool is made at its first allocation, in the mode's
 * configuration (arena: fraction * cap preallocated; vmm: a range of twice the cap; platform: the
 * cap alone), and a preallocation the device refuses is said (what held the room) and the pool made
 * without one. The context list and its states are ctx.c's.
 */
#include "shim.h"

#include <stdatomic.h>

static ga_pool_t *ga_pool_new(ga_ctx_t *c, const ga_pool_backend_t *be, size_t initial,
                              ga_status_t *st)
{
    uint64_t cap = ga_dev(c->dev)->cap;
    uint64_t share = ga_share_of(cap);
    ga_pool_config_t cfg = {.mode = ga_opt.mode, .initial = initial, .grow = ga_opt.fraction_grow,
                            .limit = ga_opt.fraction_grow ? 0 : share, .keep = ga_opt.vmm_keep,
                            .keep_empty = 1 /* given back by ga_ctx_give_back, not under the lock */};
    if (cfg.mode == GA_MODE_PLATFORM)
        cfg.limit = 0; /* the cap alone, as the driver would */
    if (cfg.mode == GA_MODE_VMM) {
        /* Twice the cap of address space: best fit in a range twice the most that can be live
         * leaves room whatever the holes; the pool adds ranges should one ever fill. */
        size_t g = be->granularity;
        uint64_t va = cap > (UINT64_MAX >> 2) ? (UINT64_MAX >> 2) : 2 * cap;
        cfg.va_size = (size_t)((va + g - 1) & ~(uint64_t)(g - 1));
        /* A growing fraction ("0.75+") may map up to the cap itself: the pool is told so, so that
         * it refuses a block it could never map before taking address space for it. */
        if (!cfg.limit)
            cfg.limit = (size_t)cap;
    }
    return ga_pool_create(be, &cfg, st);
}

/* Whether the failed preallocation was said on the device already: once per device, later ones at
 * level debug (helper-47 F9: a program making 4,000 contexts printed 4,000 lines). */
static _Atomic int ga_prealloc_said[GA_MAX_DEVICES];

/* Says what held the room a preallocation of `initial` bytes on dev did not find: other members of
 * the device's group (whose cap every member shares, so lowering GPUARENA_LIMIT is refused
 * there: an outside test, 2026-12-06), the process itself (another context's pool, the program's
 * own managed, pool or cuMemCreate memory), where lowering the limit would not help either, or the
 * device (an outside test, 2026-12-06: the advice was the same every way). */
static void ga_prealloc_refused_say(int dev, size_t initial, CUresult code)
{
    ga_dev_t *d = ga_dev(dev);
    uint64_t held = ga_dev_held(dev), cap = d->cap;
    uint64_t used = d->group ? ga_group_used(d->group) : held;
    uint64_t mine = d->group ? ga_group_mine(d->group) : held;
    uint64_t others = used > mine ? used - mine : 0;
    /* A group that refuses this process whatever the bytes (its cap is not the group's, or the
     * ledger cannot be used) was said at the refusal: a smaller fraction would not help. */
    if (d->group && (ga_group_broken(d->group) || ga_group_clashes(d->group, used)))
        return;
    int first = !atomic_exchange(&ga_prealloc_said[dev], 1);
    const char *more = first ? " (said once per device; later contexts: GPUARENA_LOG=debug)" : "";
    ga_log_level_t lvl = first ? GA_LOG_WARN : GA_LOG_DEBUG;
    if (code != CUDA_SUCCESS && code != CUDA_ERROR_OUT_OF_MEMORY)
        /* not the room: the device blamed for a sticky error was a wrong lead (helper-132) */
        ga_log(lvl, "could not preallocate %zu bytes on device %d: the driver refused the memory "
               "with CUresult %d, not for lack of memory; growing on demand instead (an "
               "allocation the driver refuses so gets that code: the first CUDA call that "
               "failed is the cause)%s", initial, dev, (int)code, more);
    else if (others && used + initial > cap)
        ga_log(lvl, "could not preallocate %zu bytes on device %d: group '%s' holds %llu of its "
               "cap of %llu bytes there (other members %llu, this process %llu); growing on "
               "demand instead (a smaller GPUARENA_MEM_FRACTION leaves room for every member, or "
               "GPUARENA_MODE=vmm or grow: their pools take only what they serve)%s", initial, dev,
               ga_opt.group, (unsigned long long)used, (unsigned long long)cap,
               (unsigned long long)others, (unsigned long long)mine, more);
    else if (held && held + initial > cap)
        ga_log(lvl, "could not preallocate %zu bytes on device %d: the process already holds %llu "
               "of its cap of %llu bytes there (other contexts' pools, or memory the program "
               "allocated itself); growing on demand instead (a smaller GPUARENA_MEM_FRACTION "
               "leaves room for both, or GPUARENA_MODE=grow)%s", initial, dev,
               (unsigned long long)held, (unsigned long long)cap, more);
    else if (!d->group && cap >= d->physical_total) /* no cap below the device: none to lower */
        ga_log(lvl, "could not preallocate %zu bytes on device %d: the device has less free "
               "(other processes or contexts use it); growing on demand instead (lower "
               "GPUARENA_MEM_FRACTION, or set GPUARENA_LIMIT to what the device can give)%s",
               initial, dev, more);
    else
        ga_log(lvl, "could not preallocate %zu bytes on device %d; growing on demand instead "
               "(lower GPUARENA_MEM_FRACTION or GPUARENA_LIMIT)%s", initial, dev, more);
}

/* The context's pool, made at its first allocation: the arena preallocates fraction * cap. */
ga_pool_t *ga_ctx_pool(ga_ctx_t *c, CUresult *err)
{
    if (GA_LIKELY(c->pool != NULL))
        return c->pool;
    ga_pool_backend_t be;
    if (ga_backend_for(c, &be, err) != 0)
        return NULL;
    size_t initial = ga_opt.mode == GA_MODE_ARENA ? (size_t)ga_share_of(ga_dev(c->dev)->cap) : 0;
    ga_status_t st = GA_OK;
    ga_pool_t *p = ga_pool_new(c, &be, initial, &st);
    if (!p && st == GA_ENOHOST) {
        /* No host memory for the pool's records: this allocation is refused as the host's, and
         * the next one makes the pool as configured (before, a pool without preallocation was
         * made instead, for good, and the device blamed: helper-47 F1). */
        c->alloc_st = GA_ENOHOST;
        *err = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    if (!p && initial) {
        ga_prealloc_refused_say(c->dev, initial, c->reserve_err);
        p = ga_pool_new(c, &be, 0, &st);
    }
    if (!p && st == GA_ENOHOST)
        c->alloc_st = GA_ENOHOST;
    if (!p)
        *err = CUDA_ERROR_OUT_OF_MEMORY;
    __atomic_store_n(&c->pool, p, __ATOMIC_RELEASE);
    return p;
}
