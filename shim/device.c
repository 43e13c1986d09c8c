/* gpuarena devices: caps, the bytes committed against them, and the views of a device that
 * cuMemGetInfo and NVML answer with.
 *
 * Each device has a cap (GPUARENA_LIMIT, default its total; set up by ctx.c's ga_dev_setup, under
 * the context list's lock) and one atomic `committed` count of the bytes the process holds from
 * the driver there (pool memory and pass-through allocations): the cap check is one atomic add,
 * so it needs no lock on the hot path. In a group, the group's ledger holds the cap for the sum
 * over every member (group.c), and shows each member's figures on the device.
 */
#include "shim.h"
#include "../allocator/ga_size.h"

#include <stdlib.h>
#include <string.h>

extern char **environ;

/* The devices: this file's own; other files reach them through ga_dev(). */
static ga_dev_t ga_devs[GA_MAX_DEVICES];

ga_dev_t *ga_dev(int dev)
{
    return &ga_devs[dev];
}

uint64_t ga_share_of(uint64_t cap)
{
    /* one computation with gpuarena-replay --fraction's (allocator/size.c) */
    return ga_fraction_share(cap, ga_opt.fraction, GA_ALIGN);
}


/* The figures a group's ledger shows for a member on one device are that device's own: its in-use
 * bytes (d->in_use) and its committed bytes as reserved, whose peak the ledger keeps (it raises
 * the slot's peak to every reserved figure written, and every commit writes one). The process-wide
 * levels were written before, so each device's row showed what the process held on all of them
 * together: 160 MiB in use beside 60 MiB committed, a peak above the cap (helper-49 F9). */
static uint64_t ga_dev_in_use(ga_dev_t *d)
{
    int64_t v = atomic_load_explicit(&d->in_use, memory_order_relaxed);
    return v > 0 ? (uint64_t)v : 0;
}

/* A member's figures in its ledger slot, reserved never below in use: platform mode counts a block
 * in 512-byte units in use and reserved (as its statistics do), the cap and `committed` in exact
 * bytes, and `gpuarena top` showed IN USE 3.00 KiB beside RESERVED 2.93 KiB (an outside check,
 * 2026-12-06). */
/* reserved: the bytes committed; those whose driver call has not answered (d->asking) are left
 * out, so a request the driver then refuses never shows, as reserved nor as the ledger's peak:
 * written at the commit, a refused 700 MiB request showed a PEAK RESERVED of 700 MiB in `gpuarena
 * top` that the process never held (helper-104 F8; test group_peak_counts_only_what_the_driver_
 * granted). The commit itself still comes first, so members cannot over-commit the cap. */
static void ga_dev_show(ga_dev_t *d, uint64_t reserved)
{
    int64_t asking = atomic_load_explicit(&d->asking, memory_order_relaxed);
    if (asking > 0)
        reserved = (uint64_t)asking < reserved ? reserved - (uint64_t)asking : 0;
    uint64_t in_use = ga_dev_in_use(d);
    ga_group_set_figures(d->group, in_use, reserved > in_use ? reserved : in_use, 0,
                         ga_mode_name(ga_opt.mode));
}

void ga_dev_in_use_add(int dev, int64_t delta)
{
    ga_level_add(GA_LEVEL_IN_USE, delta);
    if (ga_devs[dev].group)
        atomic_fetch_add_explicit(&ga_devs[dev].in_use, delta, memory_order_relaxed);
}

/* The process's own cap first (one atomic add), then, in a group, the group's ledger: the cap then
 * holds for the sum over every member (group.c). A request larger than the cap is refused before
 * the add: added, a size of 2^63 bytes or more (cuMemAllocManaged of SIZE_MAX - 63 MiB) is a
 * negative int64, which lowered `committed` until it was taken back, and another thread's commit
 * in that moment passed the cap (120 MiB held under a 64 MiB cap, an outside test, 2026-12-06). */
/* In a group: the bytes are counted as asked for (d->asking) before they are committed, so a figure
 * shown meanwhile leaves them out; 2 when committed (the caller answers with ga_dev_granted or
 * ga_dev_refused once the driver has answered). */
__attribute__((noinline)) static int ga_dev_commit_group(ga_dev_t *d, int dev, uint64_t bytes)
{
    atomic_fetch_add_explicit(&d->asking, (int64_t)bytes, memory_order_relaxed);
    int64_t after = atomic_fetch_add_explicit(&d->committed, (int64_t)bytes, memory_order_relaxed)
                    + (int64_t)bytes;
    if (GA_UNLIKELY((uint64_t)after > d->cap || !ga_group_commit(d->group, bytes))) {
        atomic_fetch_sub_explicit(&d->committed, (int64_t)bytes, memory_order_relaxed);
        atomic_fetch_sub_explicit(&d->asking, (int64_t)bytes, memory_order_relaxed);
        static _Atomic int told_full;
        if (ga_group_full(d->group) && !atomic_exchange(&told_full, 1))
            ga_log(GA_LOG_WARN, "device %d: group %s is full (%d processes); this process, which "
                   "joins a device's group at its first allocation there, cannot allocate on that "
                   "device (use another GPUARENA_GROUP for more processes)",
                   dev, ga_opt.group, GA_GROUP_SLOTS);
        return 0;
    }
    ga_dev_show(d, (uint64_t)after);
    return 2;
}

int ga_dev_commit(int dev, uint64_t bytes)
{
    ga_dev_t *d = &ga_devs[dev];
    if (GA_UNLIKELY(bytes > d->cap))
        return 0;
    if (d->group)
        return ga_dev_commit_group(d, dev, bytes);
    int64_t after = atomic_fetch_add_explicit(&d->committed, (int64_t)bytes, memory_order_relaxed)
                    + (int64_t)bytes;
    if (GA_UNLIKELY((uint64_t)after > d->cap)) {
        atomic_fetch_sub_explicit(&d->committed, (int64_t)bytes, memory_order_relaxed);
        return 0;
    }
    return 1;
}

void ga_dev_granted(int dev, uint64_t bytes)
{
    ga_dev_t *d = &ga_devs[dev];
    if (d->group) {
        atomic_fetch_sub_explicit(&d->asking, (int64_t)bytes, memory_order_relaxed);
        ga_dev_show(d, ga_dev_held(dev));
    }
}

void ga_dev_refused(int dev, uint64_t bytes)
{
    ga_dev_t *d = &ga_devs[dev];
    if (!d->group) {
        ga_dev_uncommit(dev, bytes);
        return;
    }
    /* committed first, then asking: a figure shown between them is low, never high */
    atomic_fetch_sub_explicit(&d->committed, (int64_t)bytes, memory_order_relaxed);
    ga_group_uncommit(d->group, bytes);
    atomic_fetch_sub_explicit(&d->asking, (int64_t)bytes, memory_order_relaxed);
    ga_dev_show(d, ga_dev_held(dev));
}

/* What the cap lets this process commit on dev now: its cap less what it holds and, in a group,
 * the group's cap less every member's share (read under the ledger's lock). What ga_dev_commit
 * would refuse past; another thread or member may take some of it meanwhile. */
uint64_t ga_dev_room(int dev)
{
    ga_dev_t *d = &ga_devs[dev];
    int64_t held = atomic_load_explicit(&d->committed, memory_order_relaxed);
    uint64_t room = held <= 0 ? d->cap : (uint64_t)held < d->cap ? d->cap - (uint64_t)held : 0;
    if (d->group) {
        uint64_t used = ga_group_used(d->group), cap = ga_group_cap(d->group);
        uint64_t group_room = used < cap ? cap - used : 0;
        room = group_room < room ? group_room : room;
    }
    return room;
}

void ga_dev_hold(int dev, uint64_t bytes)
{
    ga_dev_t *d = &ga_devs[dev];
    int64_t after = atomic_fetch_add_explicit(&d->committed, (int64_t)bytes, memory_order_relaxed)
                    + (int64_t)bytes;
    if (d->group) {
        ga_group_hold(d->group, bytes);
        ga_dev_show(d, (uint64_t)after);
    }
}

/* The ledger gets a member's figures when it reserves or releases memory (ga_dev_commit), which an
 * arena member does once: `gpuarena top` would show it with nothing in use. So the figures are
 * also shown as allocations come and go, once 1/256 of the cap has moved since the last time or
 * after 64 changes: a large allocation shows at once, and churn costs a few stores per 64 calls.
 * c->lock held (the counts are the context's). */
void ga_ctx_publish(ga_ctx_t *c, int64_t delta)
{
    ga_dev_t *d = &ga_devs[c->dev];
    atomic_fetch_add_explicit(&d->in_use, delta, memory_order_relaxed); /* every change, shown or not */
    c->pub_moved += (uint64_t)(delta < 0 ? -delta : delta);
    if (c->pub_moved < d->cap / 256 && ++c->pub_calls < 64)
        return;
    c->pub_moved = 0;
    c->pub_calls = 0;
    ga_dev_show(d, ga_dev_held(c->dev));
}

void ga_dev_uncommit(int dev, uint64_t bytes)
{
    ga_dev_t *d = &ga_devs[dev];
    int64_t after = atomic_fetch_sub_explicit(&d->committed, (int64_t)bytes, memory_order_relaxed)
                    - (int64_t)bytes;
    if (d->group) {
        ga_group_uncommit(d->group, bytes);
        ga_dev_show(d, after > 0 ? (uint64_t)after : 0);
    }
}

/* The bytes dev's pools hold idle, which cuMemGetInfo's view counts as free: each live pool's
 * free part, the freed chunks waiting for the device, and the driver pools' kept bytes. With self
 * (cuMemGetInfo's context), another arena or grow pool counts only while all it holds is free or
 * freed: its regions are then given back before an out-of-memory (ga_dev_trim), while the rest
 * of a region beside a live block serves its own context alone. Counted, a second context was told
 * 63 MiB free under a 64 MiB cap beside the first one's 1 MiB block and its 48 MiB arena, and
 * refused an allocation of it (helper-94). vmm's kept granules are given back the same way. */
static uint64_t ga_dev_idle(int dev, const ga_ctx_t *self)
{
    uint64_t inside = 0;
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        if (c->dev != dev || atomic_load_explicit(&c->dead, memory_order_acquire))
            continue;
        /* A context inside its teardown holds its lock through the driver's call, which waits
         * for its queued work: its pool is not counted (its idle bytes serve no one else, and
         * leave the cap with it), rather than this view waiting for that work (h34 F4). */
        int got;
        while ((got = ga_mutex_lock_for(&c->lock, GA_CLOSING_POLL_NS)) != 0 &&
               !atomic_load(&c->closing))
            ;
        if (got != 0)
            continue;
        if (c->pool && !atomic_load(&c->dead)) {
            ga_stats_t s;
            ga_pool_stats(c->pool, &s);
            /* vmm: only whole granules kept mapped, which any block can take. The free part of
             * a granule a live block uses serves blocks that fit beside it, as on the driver,
             * whose free figure leaves out the rest of a page a small allocation took: counted,
             * a block of the free figure needed one granule more than the cap left (helper-67
             * F12: 1023 MiB free after a 1 MiB block under a 1 GiB cap, and refused). And the
             * chunks freed by the program, waiting for the device (fence.c), unless a stream
             * capture holds them back: no synchronisation passes them before it ends (helper-68
             * F10); in vmm mode as what their return frees for certain, their whole granules. */
            if (ga_opt.mode == GA_MODE_VMM)
                inside += s.kept + ga_fence_pending_granules(c, ga_vmm_granule(dev));
            else if (!self || c == self || s.in_use <= c->pend_bytes - ga_fence_capture_held(c))
                inside += (s.reserved > s.in_use ? s.reserved - s.in_use : 0) + c->pend_bytes -
                          ga_fence_capture_held(c);
        }
        ga_mutex_unlock(&c->lock);
    }
    return inside + ga_mempool_kept(dev); /* kept by the driver's pools: trimmed when needed */
}

void ga_dev_view(int dev, const ga_ctx_t *self, uint64_t phys_free, uint64_t phys_total,
                 uint64_t *free, uint64_t *total)
{
    ga_dev_t *d = &ga_devs[dev];
    uint64_t cap = d->cap < phys_total ? d->cap : phys_total;
    uint64_t held = d->group ? ga_group_used(d->group) : ga_dev_held(dev);
    uint64_t inside = ga_dev_idle(dev, self);
    uint64_t room = cap > held ? cap - held : 0;
    /* A group whose ledger cannot be used (its last commit was refused for it, said then): no
     * commit is granted, so none is promised; the pools' idle bytes still serve (an outside check,
     * 2026-12-07: 1014 MiB said free of 1 GiB while every allocation was refused). */
    if (d->group && (ga_group_broken(d->group) || ga_group_clashes(d->group, held)))
        room = 0; /* nor where this process's cap is not the group's: refused, said once */
    uint64_t g = ga_opt.mode == GA_MODE_VMM ? ga_vmm_granule(dev) : 0;
    if (g > 1) {
        /* vmm maps whole granules under the cap: what a cap that is no multiple of one (50% of
         * a device) leaves past the last granule can never be allocated, and a program that
         * sized itself from the free figure was refused its first allocation (h34 F5) */
        cap -= cap % g;
        room -= room % g;
    }
    /* The device's own free memory bounds the figure where no cap does (no GPUARENA_LIMIT, or
     * others hold the device): in the same units as the room, or vmm reported up to a granule
     * it could not map (helper-68 F3: 773,741,824 bytes free, 1,989,888 past the last granule). */
    uint64_t unit = g > 1 ? g : GA_ALIGN;
    uint64_t f = room + inside;
    if (f > phys_free - phys_free % unit + inside)
        f = phys_free - phys_free % unit + inside;
    f = f > cap ? cap : f;
    /* The other modes take memory in 512-byte units (the arena rounds every block, platform
     * counts a stream-ordered block so): a free figure of exact bytes left up to 511 that no
     * allocation could take, and an allocation of it was refused (h34 F1 in platform mode; in
     * arena and grow modes with a cap of 64 MiB + 1000 or 33%: helper-68 F1). */
    if (g <= 1)
        f -= f % GA_ALIGN;
    *free = f;
    *total = cap;
}

/* The handles stay set: threads still allocating while the process exits go on calling in, and
 * ga_group_exit leaves them a valid, mapped handle that refuses further commits. */
void ga_dev_close_groups(void)
{
    for (int d = 0; d < GA_MAX_DEVICES; d++)
        if (atomic_load(&ga_devs[d].known) && ga_devs[d].group)
            ga_group_exit(ga_devs[d].group);
}

/* ga_mem_view for a device the shim has not set up: the process has made no CUDA call yet (a tool
 * that reads NVML and never uses CUDA, a framework that asks NVML first), so there is no context
 * and no driver figure to use. The cap comes from the options alone: GPUARENA_LIMIT, or HAMi's
 * CUDA_DEVICE_MEMORY_LIMIT where it is smaller or GPUARENA_LIMIT unset, without a device suffix (a suffixed one names a CUDA ordinal, which only
 * the driver can map to this UUID); used is what the group's members hold, read from its ledger
 * without joining, or nothing (this process holds nothing yet). */
static int ga_mem_view_early(const uint8_t uuid[16], uint64_t real_total, uint64_t *total,
                             uint64_t *used)
{
    if (ga_ensure_init() == CUDA_ERROR_INVALID_VALUE)
        return 0; /* a bad setting: said at init; the hooks refuse, NVML passes through */
    uint64_t cap = UINT64_MAX, hami = 0;
    int exact = 0; /* the cap in bytes the process will ask the group for (not a share of NVML's
                    * total, which is not the driver's cuDeviceTotalMem on every GPU) */
    if (ga_opt.limit_bytes)
        cap = ga_opt.limit_bytes, exact = 1;
    else if (ga_opt.limit_percent > 0)
        cap = (uint64_t)((double)real_total * ga_opt.limit_percent / 100.0);
    if (ga_hami_limit(environ, -1, &hami, NULL, 0) > 0 && hami < cap)
        cap = hami, exact = 1; /* the smaller, as ctx.c's ga_dev_setup takes it */
    if (cap >= real_total && !ga_opt.group)
        return 0; /* not capped: the real answer */
    uint64_t sum = 0, gcap = 0;
    *total = cap < real_total ? cap : real_total;
    if (ga_opt.group) {
        ga_group_member_t m[GA_GROUP_SLOTS];
        int n = ga_group_peek(ga_opt.group_dir, ga_opt.group, uuid, m, GA_GROUP_SLOTS, &gcap);
        for (int i = 0; i < n && i < GA_GROUP_SLOTS; i++)
            sum += m[i].committed;
        /* Live members running with another cap refuse this process at cuInit (said then): no
         * room to promise (it said 1.45 GiB free of its 2 GiB beside a 1 GiB group: an outside
         * check, 2026-12-07). */
        if (n > 0 && exact && cap < real_total && gcap != cap)
            sum = *total;
    }
    *used = sum < *total ? sum : *total;
    return 1;
}

/* The driver's cuMemGetInfo in a live context of dev (none current here may be dev's): the first
 * one whose teardown has not begun, named as ga_ctx_sync_named names one, so that a
 * context another thread is destroying, or has destroyed, is never pushed (h34 F2: the first
 * state not yet dead was, during the driver's teardown). CUDA_ERROR_INVALID_CONTEXT: none. */
static CUresult ga_dev_driver_info(int dev, size_t *pfree, size_t *ptotal)
{
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    for (ga_ctx_t *c = ga_ctx_first(); c && r == CUDA_ERROR_INVALID_CONTEXT; c = ga_ctx_next(c)) {
        if (c->dev != dev || atomic_load(&c->dead) || atomic_load(&c->closing))
            continue; /* (a closing one is passed by even before its driver call) */
        CUcontext ctx = atomic_load(&c->ctx);
        atomic_fetch_add(&c->users, 1);
        if (atomic_load(&c->closing) < 2 && !atomic_load(&c->dead) && atomic_load(&c->ctx) == ctx &&
            atomic_load(&c->dev) == dev) {
            int pushed = ga_ctx_enter(ctx);
            ga_tl_busy++;
            r = ga_real.cuMemGetInfo_v2(pfree, ptotal);
            ga_tl_busy--;
            ga_ctx_leave(pushed);
            if (r == CUDA_ERROR_INVALID_CONTEXT)
                r = CUDA_ERROR_UNKNOWN; /* tried: the fallback figures below */
        }
        atomic_fetch_sub(&c->users, 1);
    }
    return r;
}

/* The view of a thread with no context on dev (NVML's, ga_mem_view): the most any one live
 * context of the process on dev could still allocate, as cuMemGetInfo says in that context. A
 * busy pool's free part serves its own context alone, so the sum of every pool's free part was
 * no context's figure: 62 MiB free where cuMemGetInfo said 61 in one context and 15 in the other
 * (an outside check, 2026-12-06). No live context: every pool's (none busy) free part. */
static void ga_dev_view_best(int dev, uint64_t phys_free, uint64_t phys_total, uint64_t *free,
                             uint64_t *total)
{
    int any = 0;
    *free = 0;
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        if (c->dev != dev || atomic_load(&c->dead) || atomic_load(&c->closing))
            continue;
        uint64_t f, t;
        ga_dev_view(dev, c, phys_free, phys_total, &f, &t);
        if (!any || f > *free)
            *free = f, *total = t;
        any = 1;
    }
    if (!any)
        ga_dev_view(dev, NULL, phys_free, phys_total, free, total);
}

/* NVML's hooks (nvml.c) answer with the same view as cuMemGetInfo. */
int ga_mem_view(const uint8_t uuid[16], uint64_t real_total, uint64_t *total, uint64_t *used)
{
    if (!atomic_load_explicit(&ga_init_done, memory_order_acquire))
        return ga_mem_view_early(uuid, real_total, total, used);
    if (ga_init_error)
        return ga_init_error == CUDA_ERROR_INVALID_VALUE ? 0
                                                         : ga_mem_view_early(uuid, real_total, total, used);
    for (int dev = 0; dev < GA_MAX_DEVICES; dev++) {
        ga_dev_t *d = &ga_devs[dev];
        if (!atomic_load_explicit(&d->known, memory_order_acquire) || memcmp(d->uuid, uuid, 16))
            continue;
        /* Capped or not, cuMemGetInfo's view: without a cap it still counts the pools' idle
         * bytes (an arena's preallocation) as free, where the driver's NVML counts them used
         * (an outside check, 2026-12-06: NVML said 2 GiB free where cuMemGetInfo said 7.9). */
        size_t pfree = 0, ptotal = 0;
        CUresult r = ga_dev_driver_info(dev, &pfree, &ptotal);
        if (r != CUDA_SUCCESS) /* no context on that device yet: the cap against the total */
            pfree = ptotal = d->physical_total == UINT64_MAX ? d->cap : d->physical_total;
        /* The calling thread's context, where it is one of this device's (never made here):
         * cuMemGetInfo's view from that thread, which counts another context's busy pool's free
         * part as that context's alone (helper-94); none: the best placed context's view. */
        CUcontext cur = NULL;
        ga_ctx_t *self = r == CUDA_SUCCESS && ga_real.cuCtxGetCurrent &&
                                 ga_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS
                             ? ga_ctx_of(cur)
                             : NULL;
        uint64_t f, t;
        if (self && self->dev == dev)
            ga_dev_view(dev, self, pfree, ptotal, &f, &t);
        else
            ga_dev_view_best(dev, pfree, ptotal, &f, &t);
        *total = t;
        *used = t - f;
        /* With a context, cuMemGetInfo's view: the device's free memory is in it already. */
        return r == CUDA_SUCCESS ? 2 : 1;
    }
    return ga_mem_view_early(uuid, real_total, total, used); /* a device CUDA has not set up */
}

/* This process's use of a device in cuMemGetInfo's view, for NVML's process list (nvml.c): what
 * it holds less its pools' idle bytes, which that view counts as free. The driver's figure is
 * the whole reservation (an arena's preallocation): a tool summing the list saw more used than
 * total - free (an outside check, 2026-12-06: 6 GiB listed, 100 MiB used). */
int ga_mem_view_self(const uint8_t uuid[16], uint64_t *used)
{
    if (!atomic_load_explicit(&ga_init_done, memory_order_acquire) || ga_init_error)
        return 0;
    for (int dev = 0; dev < GA_MAX_DEVICES; dev++) {
        if (!atomic_load_explicit(&ga_devs[dev].known, memory_order_acquire) ||
            memcmp(ga_devs[dev].uuid, uuid, 16))
            continue;
        uint64_t held = ga_dev_held(dev), idle = ga_dev_idle(dev, NULL);
        *used = held > idle ? held - idle : 0;
        return 1;
    }
    return 0;
}

uint64_t ga_dev_held(int dev)
{
    int64_t n = atomic_load_explicit(&ga_devs[dev].committed, memory_order_relaxed);
    return n > 0 ? (uint64_t)n : 0;
}
