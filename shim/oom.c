/* gpuarena out-of-memory explainer: why an allocation failed, said once per process.
 *
 * A failed allocation is either a true out-of-memory (fewer bytes free in total than asked) or a
 * fragmentation failure: the arena's free bytes plus what it may still reserve are enough, but no
 * single block is. The second is the one users cannot see from cuMemGetInfo, so it gets a short
 * diagnosis with an occupancy map of the arena and what to change; the first gets one line of
 * figures. Each is printed at most once per process (frameworks retry an allocation in a loop,
 * and a flood on stderr helps nobody); every failure is still counted, frag_failures and
 * true_oom_failures in the context's counters, for the statistics JSON.
 *
 * "What it may still reserve" is the smallest of: the arena's own limit (hard GPUARENA_MEM_FRACTION),
 * the device cap less what the process (in a group: the group) holds there, and what the driver
 * says is free. In a group, a true out-of-memory also says what the other members hold. That makes
 * the shim's frag_failures a superset of the allocator's (which looks inside held regions only).
 * In vmm mode the explanation says what the pool holds: mapped, live and kept granules; a vmm
 * failure is fragmentation when the mapped bytes no live block covers are as many as it asks.
 * The message is built while the context lock is held (the map reads the arena) and written after.
 */
#include "shim.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define GA_OOM_MAP_WIDTH 64u  /* characters per region in the occupancy map */
#define GA_OOM_MAP_REGIONS 8u /* regions shown; the rest are counted */

static _Atomic int ga_oom_told_frag, ga_oom_told_true, ga_oom_told_pass, ga_oom_told_host;

CUresult ga_refuse_nohost(const char *what, const char *whose, size_t bytes)
{
    ga_log(atomic_exchange(&ga_oom_told_host, 1) ? GA_LOG_DEBUG : GA_LOG_WARN,
           "out of host memory for gpuarena's bookkeeping (%s): %s of %zu bytes refused with "
           "CUDA_ERROR_OUT_OF_MEMORY; the device and the cap have nothing to do with it, and it "
           "succeeds once the process has host memory again (free some, or raise its memory "
           "limit)", whose, what, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Human sizes with three significant digits: "24.0 MiB", "3.91 GiB", "512 B". */
static const char *ga_fmt_bytes(uint64_t n, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)n;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof unit / sizeof unit[0])
        v /= 1024.0, u++;
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, len, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, unit[u]);
    return buf;
}

static uint64_t ga_min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* Bytes the arena of c could still reserve: its limit, the device cap, the driver's free bytes. */
static uint64_t ga_oom_growth_room(const ga_ctx_t *c, const ga_stats_t *s)
{
    const ga_dev_t *d = ga_dev(c->dev);
    uint64_t room = UINT64_MAX;
    if (!ga_opt.fraction_grow) { /* the same share ga_ctx_pool gave the pool as its limit */
        uint64_t share = ga_share_of(d->cap);
        room = share > s->reserved ? share - s->reserved : 0;
    }
    /* In a group the cap is the group's: what the other members hold is not room either. */
    uint64_t used = d->group ? ga_group_used(d->group) : ga_dev_held(c->dev);
    uint64_t cap_room = used < d->cap ? d->cap - used : 0;
    /* Nor where the group refuses this process whatever the bytes: its ledger cannot be used, or
     * its cap is not the group's (an arena's refusal was told "from fragmentation" there). */
    if (d->group && (ga_group_broken(d->group) || ga_group_clashes(d->group, used)))
        cap_room = 0;
    room = ga_min_u64(room, cap_room);
    size_t free = 0, total = 0;
    if (ga_real.cuMemGetInfo_v2 && ga_real.cuMemGetInfo_v2(&free, &total) == CUDA_SUCCESS)
        room = ga_min_u64(room, free);
    return room & ~(uint64_t)(GA_ALIGN - 1);
}

/* Appends to o->msg (bounded; a cut message is still useful). */
__attribute__((format(printf, 2, 3))) static void ga_oom_put(ga_oom_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->msg + o->len, sizeof o->msg - o->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len = o->len + (size_t)n < sizeof o->msg ? o->len + (size_t)n : sizeof o->msg - 1;
}

/* The occupancy map, one "gpuarena:   [....]" line per region, at most GA_OOM_MAP_REGIONS (the
 * map is cut there: snprintf-like, it stops writing but counts on). */
static void ga_oom_put_map(ga_oom_t *o, const ga_pool_t *p, uint64_t regions)
{
    char map[GA_OOM_MAP_REGIONS * (GA_OOM_MAP_WIDTH + 1) + 1];
    ga_pool_occupancy_map(p, map, sizeof map, GA_OOM_MAP_WIDTH);
    for (char *line = map, *nl; (nl = strchr(line, '\n')); line = nl + 1)
        ga_oom_put(o, "gpuarena:   [%.*s]\n", (int)(nl - line), line);
    if (regions > GA_OOM_MAP_REGIONS)
        ga_oom_put(o, "gpuarena:   ... %llu more\n",
                   (unsigned long long)(regions - GA_OOM_MAP_REGIONS));
}

/* Empty regions the driver refused to free (backend.c): held against the cap, the pool serves
 * blocks up to their size from them, but they cannot be given back to make room for a larger one
 * (arena, grow; 0 in the other modes). Said when there are any: before, a failure they caused
 * read as fragmentation, with hints that could not help. */
static void ga_oom_put_refused(ga_oom_t *o, const ga_ctx_t *c)
{
    char b[2][32];
    size_t top = 0;
    uint64_t bytes = c->pool ? ga_pool_refused_idle(c->pool, &top) : 0;
    if (bytes)
        ga_oom_put(o, ";\ngpuarena: %s of it are empty regions the driver refused to free, the "
                   "largest %s (warned about before): held against the cap, they serve blocks up "
                   "to their size but cannot be given back to make room for a larger one (tried "
                   "again at each out-of-memory); if the refusals go on, the driver or device is "
                   "failing: check it (nvidia-smi)", ga_fmt_bytes(bytes, b[0], 32),
                   ga_fmt_bytes(top, b[1], 32));
}

/* The sentence for chunks a stream capture holds back (fence.c, ga_fence_capture_held): freed
 * with cuMemFree, or with cuMemFreeAsync while a global or thread-local capture forbids querying
 * their events (helper-128), pending, and no synchronisation may pass them before the capture
 * ends. Before,
 * such a failure said "in use" of bytes the program had freed, and to raise the cap (helper-68
 * F10). */
static void ga_oom_capture_why(char *buf, size_t len, uint64_t bytes)
{
    char b[32];
    snprintf(buf, len, "%s freed with cuMemFree (or with cuMemFreeAsync, during a global or "
             "thread-local capture) wait for the end of the stream capture under way on "
             "the device: no synchronisation may pass them during a capture, so they cannot be "
             "reused before cuStreamEndCapture; free them before the capture begins (gpuarena then "
             "reuses them), or allocate what the capture needs before it", ga_fmt_bytes(bytes, b, 32));
}

/* What bounds device d's pools, as the messages name it: the device itself when no cap lies below
 * it (none set, 100%, a limit above the device), where "raise GPUARENA_LIMIT" could not help;
 * else the cap, and the variable that set it (helper-68 F4, helper-72 NEW-5). */
static int ga_oom_devcap(const ga_dev_t *d)
{
    return !d->group && d->cap >= d->physical_total;
}

static const char *ga_oom_raise(const ga_dev_t *d)
{
    return ga_oom_devcap(d) ? NULL
           : d->cap_var && !strcmp(d->cap_var, "CUDA_DEVICE_MEMORY_LIMIT")
               ? "more memory from the device plugin (CUDA_DEVICE_MEMORY_LIMIT)"
               : "a larger GPUARENA_LIMIT";
}

/* Reasons shared by the pool's true out-of-memory and a pass-through refusal. */
static const char ga_oom_device_full[] =
    "the cap has room, but the driver refused the memory: the device itself is full (other "
    "processes or contexts use it); free memory there or set GPUARENA_LIMIT to what the device can "
    "give";
static const char ga_oom_group_broken[] =
    "the group's ledger cannot be used (said above: its lock is damaged, or it was removed and "
    "could not be made again), so this process's allocations under the group are refused whatever "
    "the bytes: see that message for the fix";
static const char ga_oom_group_clash[] =
    "this process asks for another cap than the one the group runs with (said above), so its "
    "allocations under the group are refused whatever the bytes: give every member the same cap, "
    "or use another GPUARENA_GROUP";
static const char ga_oom_group_full[] =
    "the group is full: all its 256 slots are taken by live processes and this process, which "
    "joins at its first allocation on the device, has none, so it cannot allocate there whatever "
    "the bytes; use another GPUARENA_GROUP for more processes";

/* Why too few bytes were left in total, by what bounds device d: its group's cap, a device
 * plugin's, the device itself, or GPUARENA_LIMIT. */
static int ga_oom_plugin_cap(const ga_dev_t *d)
{
    return d->cap_var && !strcmp(d->cap_var, "CUDA_DEVICE_MEMORY_LIMIT");
}

static const char *ga_oom_total_why(const ga_dev_t *d, uint64_t size)
{
    /* A block larger than the device's whole memory under a cap below it: no cap (gpuarena's, a
     * group's, a device plugin's) could hold it, and the message said to raise one (an outside
     * check, 2026-12-07: 2 GiB on a 1 GiB device under a 256 MiB cap). Said with the device's
     * size. With no cap below the device, the sentence below says the device is the bound. */
    static __thread char past[200];
    if (!ga_oom_devcap(d) && d->physical_total != UINT64_MAX && size > d->physical_total) {
        char b[32];
        snprintf(past, sizeof past, "not enough free bytes in total: the block alone is larger "
                 "than the device's whole memory, %s, which no cap can change: use less",
                 ga_fmt_bytes(d->physical_total, b, sizeof b));
        return past;
    }
    /* A group's cap from the device plugin: GPUARENA_LIMIT is unset or above it, and raising it
     * cannot help (the message said to until an outside check on 2026-12-06). */
    return d->group && ga_oom_plugin_cap(d)
               ? "not enough free bytes in the group: the group's cap is CUDA_DEVICE_MEMORY_LIMIT's "
                 "(a device plugin such as HAMi sets it, and enforces it itself): ask it for more "
                 "for every member, or use less"
           : d->group ? "not enough free bytes in the group: raise GPUARENA_LIMIT for every member, "
                        "or use less"
           : d->cap_var && !strcmp(d->cap_var, "CUDA_DEVICE_MEMORY_LIMIT")
               ? "not enough free bytes in total: the cap is CUDA_DEVICE_MEMORY_LIMIT's (a device "
                 "plugin such as HAMi sets it, and enforces it itself): ask it for more, or use less"
           : ga_oom_devcap(d) ? "not enough free bytes in total: the device's own memory is the "
                                "bound (no GPUARENA_LIMIT below it), so use less"
                              : "not enough free bytes in total: raise GPUARENA_LIMIT or use less";
}

/* ", the process holds ... of cap ... on the device (why)": what the process (and its group)
 * holds against what bounds the device. */
static void ga_oom_put_holds(ga_oom_t *o, const ga_dev_t *d, uint64_t held, uint64_t used,
                             const char *why)
{
    char b[3][32];
    if (d->group)
        ga_oom_put(o, ", the process holds %s and its group '%s' %s of the group's cap %s on the "
                   "device (%s)", ga_fmt_bytes(held, b[0], 32), ga_opt.group,
                   ga_fmt_bytes(used, b[1], 32),
                   ga_fmt_bytes(ga_group_cap(d->group), b[2], 32), why); /* the group's own */
    else if (ga_oom_devcap(d))
        ga_oom_put(o, ", the process holds %s of the device's %s, no cap set below it (%s)",
                   ga_fmt_bytes(held, b[0], 32), ga_fmt_bytes(d->cap, b[1], 32), why);
    else
        ga_oom_put(o, ", the process holds %s of cap %s on the device (%s)",
                   ga_fmt_bytes(held, b[0], 32), ga_fmt_bytes(d->cap, b[1], 32), why);
}

/* What to change, for the options in force, a fragmentation failure of `rounded` bytes: only
 * what serves it, and grow with what it depends on. vmm and platform hold only what is live, so
 * holes between blocks cost them nothing; the arena's growth past a hard share helps only where
 * the cap has room for the block. Grow mode was named first, as if it would serve the block, but
 * its regions follow the program's order of allocations and may fragment the same way (ex_fragment
 * 64 0.95 12 under GPUARENA_LIMIT=1GiB fails in grow mode too: an outside check, 2026-12-07); the
 * shim keeps no history to tell, a replay of a recorded trace does, so the hint says how. */
static void ga_oom_put_hint(ga_oom_t *o, const ga_dev_t *d, uint64_t rounded, uint64_t held)
{
    ga_oom_put(o, "gpuarena: Try: ");
    if (!ga_opt.fraction_grow && d->cap > held && d->cap - held >= rounded)
        ga_oom_put(o, "GPUARENA_MEM_FRACTION=%s+ (the arena may grow past its share), ",
                   ga_opt.fraction_text);
    /* vmm serves the block the arena could not (its address range never fragments across
     * regions, memory is mapped where blocks lie): the demo's ex_fragment does so; it was not
     * named (an outside check, 2026-12-06). */
    ga_oom_put(o, "GPUARENA_MODE=vmm (one address range, memory mapped only where blocks lie) or "
               "GPUARENA_MODE=platform (one driver allocation per block)");
    const char *raise = ga_oom_raise(d);
    if (raise)
        ga_oom_put(o, ", or %s", raise);
    /* The mode by its one name (grow), as the README, the command and the statistics call it:
     * it was GPUARENA_PREALLOCATE=false, which `gpuarena run` refuses as an exported setting
     * (use --mode grow) (an outside check, 2026-12-06). */
    if (ga_opt.preallocate)
        ga_oom_put(o, ". GPUARENA_MODE=grow (regions on demand, empty ones given back) may serve "
                   "it or fragment the same way, as the order of the program's allocations "
                   "decides: to know before switching, record a run (gpuarena run --trace T.gatrace "
                   "...) and replay it: gpuarena replay T.gatrace --mode grow --limit %llu",
                   (unsigned long long)d->cap);
    ga_oom_put(o, ".\n");
}

static void ga_oom_explain_frag(ga_oom_t *o, const ga_ctx_t *c, uint8_t api, uint64_t rounded,
                                const ga_stats_t *s, uint64_t room)
{
    char b[7][32], req[64], big[64];
    const ga_dev_t *d = ga_dev(c->dev);
    uint64_t held = ga_dev_held(c->dev);
    /* The block and the largest free block, each to three figures, can read the same (a 768 MiB
     * block refused beside a largest free block of 768 MiB, 1 KiB apart: helper-124): then both
     * say their bytes too. */
    snprintf(req, sizeof req, "%s", ga_fmt_bytes(rounded, b[0], 32));
    snprintf(big, sizeof big, "%s", ga_fmt_bytes(s->largest_free, b[0], 32));
    if (!strcmp(req, big)) {
        snprintf(req, sizeof req, "%s (%llu bytes)", b[0], (unsigned long long)rounded);
        snprintf(big, sizeof big, "%s (%llu bytes)", b[0], (unsigned long long)s->largest_free);
    }
    ga_oom_put(o, "gpuarena: out of memory from fragmentation: %s of %s failed on device %d "
               "although %s are free", ga_api_name(api), req, c->dev,
               ga_fmt_bytes(s->total_free + room, b[1], 32));
    if (room)
        ga_oom_put(o, " (%s in the arena, %s more it may reserve)",
                   ga_fmt_bytes(s->total_free, b[2], 32), ga_fmt_bytes(room, b[3], 32));
    /* The free bytes split between the pool's holes and the room left under the cap, neither
     * as large as the block: said, since the pool's own fragmentation can read 0.00 (one hole
     * of 1 MiB and 1022 MiB of room, for a 1023 MiB block: helper-67 F12). */
    if (room && room < rounded && s->largest_free < rounded) {
        /* A fixed fraction's share, when it leaves less than the cap does, is what bounds the
         * room: "under the cap" sent a reader to the cap, which had room for the block (grow,
         * 0.5 of 64 MiB: 2 MiB left in the share, 34 MiB under the cap; helper-124). */
        uint64_t used = d->group ? ga_group_used(d->group) : held;
        uint64_t share = ga_share_of(d->cap);
        if (!ga_opt.fraction_grow && (share > s->reserved ? share - s->reserved : 0) <
                                         (used < d->cap ? d->cap - used : 0))
            ga_oom_put(o, ", and neither the largest free block nor the room left in the pool's "
                       "share of the cap (GPUARENA_MEM_FRACTION=%s, a fixed fraction) holds it",
                       ga_opt.fraction_text);
        else
            ga_oom_put(o, ", and neither the largest free block nor the room %s holds it",
                       ga_oom_devcap(d) ? "left on the device" : "under the cap");
    }
    ga_oom_put(o, ";\ngpuarena: largest free block %s, fragmentation %.2f; in use %s, reserved %s "
               "in this context, the process holds %s of %s %s", big,
               ga_fragmentation(s), ga_fmt_bytes(s->in_use, b[3], 32),
               ga_fmt_bytes(s->reserved, b[4], 32), ga_fmt_bytes(held, b[5], 32),
               ga_oom_devcap(d) ? "the device's" : "cap", ga_fmt_bytes(d->cap, b[6], 32));
    ga_oom_put(o, ga_oom_devcap(d) ? ", no cap set below it" : " on the device");
    ga_oom_put_refused(o, c);
    uint64_t capture_held = ga_fence_capture_held(c);
    if (capture_held) {
        char why[400];
        ga_oom_capture_why(why, sizeof why, capture_held);
        ga_oom_put(o, ";\ngpuarena: %s", why);
    }
    ga_oom_put(o, ". Arena occupancy ('#' used, '+' partly, '.' free):\n");
    ga_oom_put_map(o, c->pool, s->regions);
    ga_oom_put_hint(o, d, rounded, held);
}

/* The one-line explanation. frag_free: vmm only, the mapped bytes no live block covers when they
 * are as many as the request (a fragmentation failure, said as such); 0 for a true out-of-memory. */
static void ga_oom_explain_true(ga_oom_t *o, const ga_ctx_t *c, uint8_t api, uint64_t size,
                                const ga_stats_t *s, uint64_t frag_free)
{
    char b[9][32];
    const ga_dev_t *d = ga_dev(c->dev);
    uint64_t held = ga_dev_held(c->dev);
    if (frag_free)
        ga_oom_put(o, "gpuarena: out of memory from fragmentation: %s of %s failed on device %d "
                   "although %s of the memory mapped are free; in use %s, mapped %s in this "
                   "context", ga_api_name(api), ga_fmt_bytes(size, b[0], 32), c->dev,
                   ga_fmt_bytes(frag_free, b[1], 32), ga_fmt_bytes(s->in_use, b[2], 32),
                   ga_fmt_bytes(s->reserved, b[3], 32));
    else
        ga_oom_put(o, "gpuarena: out of memory: %s of %s failed on device %d; in use %s, %s %s in "
                   "this context", ga_api_name(api), ga_fmt_bytes(size, b[0], 32), c->dev,
                   ga_fmt_bytes(s->in_use, b[1], 32),
                   ga_opt.mode == GA_MODE_VMM ? "mapped" : "reserved",
                   ga_fmt_bytes(s->reserved, b[2], 32));
    if (ga_opt.mode == GA_MODE_VMM)
        ga_oom_put(o, " (of which kept mapped while free: %s, GPUARENA_VMM_KEEP; address space %s)",
                   ga_fmt_bytes(s->kept, b[5], 32), ga_fmt_bytes(s->va_reserved, b[6], 32));
    uint64_t used = d->group ? ga_group_used(d->group) : held;
    uint64_t left = used < d->cap ? d->cap - used : 0;
    /* vmm maps whole granules: an allocation can fail with more bytes left under the cap than it
     * asks for, when the granules it needs are more than that (or the cap is under one). Unless
     * the pool has no address space at all: the driver refused it (warned about before). */
    int vmm_left = ga_opt.mode == GA_MODE_VMM && left >= size;
    int no_va = vmm_left && (!c->pool || !s->va_reserved || c->va_refused);
    /* Granules explain it only if the most it could map (its granules, one more where it straddles
     * a boundary) is more than is left; past that the cap had room and the device refused. A block
     * whose 512-rounded size is a granule multiple lies on granule boundaries (vmm's aligned area,
     * or wherever fewer granules are new) and maps no granule more than its size: a 64 MiB block
     * the driver refused under a 64 MiB cap was said to need more granules than the cap holds (an
     * outside test, 2026-12-06: helper-84 F2). */
    uint64_t gran = c->granularity, worst = UINT64_MAX;
    if (gran && size <= UINT64_MAX - 2 * gran) {
        uint64_t rounded = (size + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1);
        worst = rounded % gran == 0 ? rounded : ((size + gran - 1) / gran + 1) * gran;
    }
    /* A fixed GPUARENA_MEM_FRACTION bounds the pool at its share of the cap (arena, grow, vmm):
     * with the cap's room left, that share is what ran out, and a larger GPUARENA_LIMIT would not
     * help as much as the fraction. vmm may need one granule more than its size. */
    uint64_t share = ga_share_of(d->cap);
    uint64_t needs = ga_opt.mode == GA_MODE_VMM && worst != UINT64_MAX ? worst : size;
    int share_full = !ga_opt.fraction_grow && ga_opt.mode != GA_MODE_PLATFORM && left >= size &&
                     !no_va && (s->reserved > share || needs > share - s->reserved);
    char share_why[320];
    snprintf(share_why, sizeof share_why, "the pool is bounded by its share of the cap, %s "
             "(GPUARENA_MEM_FRACTION=%s, a fixed fraction), not by the cap: raise the fraction, or "
             "use GPUARENA_MEM_FRACTION=%s+ to let the pool grow up to the cap",
             ga_fmt_bytes(share, b[7], 32), ga_opt.fraction_text, ga_opt.fraction_text);
    /* Empty regions the driver refused to free would have made the room (arena, grow). */
    uint64_t refused_idle = c->pool ? ga_pool_refused_idle(c->pool, NULL) : 0;
    int regions_held = refused_idle && left < size && size - left <= refused_idle;
    int granules = vmm_left && !no_va && !share_full && gran && worst > left;
    int device = vmm_left && !no_va && !share_full && gran && !granules;
    /* arena, grow, platform: the cap has room, and the driver has less free than the block (other
     * processes hold the device); said as vmm says it, where "raise GPUARENA_LIMIT" could not help
     * (helper-47 F7). */
    size_t pfree = 0, ptotal = 0;
    if (ga_opt.mode != GA_MODE_VMM && left >= size && !share_full && ga_real.cuMemGetInfo_v2 &&
        ga_real.cuMemGetInfo_v2(&pfree, &ptotal) == CUDA_SUCCESS && pfree < size)
        device = 1;
    /* The driver refused a granule for another reason than memory (CUDA_ERROR_NOT_SUPPORTED where
     * the device or driver has no virtual memory management): said with its code, not as a full
     * device (found by an outside test on 2026-12-05). */
    char refused_why[320];
    int refused = device && c->map_err && c->map_err != CUDA_ERROR_OUT_OF_MEMORY;
    snprintf(refused_why, sizeof refused_why, "the cap has room, but the driver refused the "
             "granule's cuMemCreate/cuMemMap/cuMemSetAccess with CUresult %d, not for lack of "
             "memory: if this is not passing, the device or driver cannot serve vmm mode here; use "
             "GPUARENA_MODE=arena or grow", (int)c->map_err);
    /* vmm fragmentation that the cap (not the share, the granules or the device) leaves as it
     * is: the free bytes are there, in holes, and less than the block is left to map anew. */
    /* No cap below the device (none set, or one at or above it: 100%, 9000TiB): the device's
     * own memory is the bound, and "raise GPUARENA_LIMIT" could not help (helper-68 F4). */
    int devcap = ga_oom_devcap(d);
    /* Where the free bytes lie: in holes smaller than the block, or in a hole as large as it in
     * an area kept for another size (a size class, the granule-multiple area), where the block's
     * own area does not place it; the shim cannot tell which, so both are said ("holes smaller
     * than the block" alone was wrong for a 1 MiB block beside the 1 MiB a 3 MiB class left free:
     * an outside check, 2026-12-07, test vmm127_hole_of_another_size_said). */
    char frag_why[512];
    snprintf(frag_why, sizeof frag_why, "the free bytes lie in holes smaller than the block or "
             "in areas vmm keeps for blocks of other sizes, in granules that live blocks keep "
             "mapped, and %s leaves too little to map new granules for it: %s, or use "
             "GPUARENA_MODE=platform (blocks placed by the driver, counted by the byte)",
             devcap ? "the device's memory" : d->group ? "the group's cap"
             : d->cap_var && !strcmp(d->cap_var, "CUDA_DEVICE_MEMORY_LIMIT")
                 ? "the cap (CUDA_DEVICE_MEMORY_LIMIT's, which a device plugin such as HAMi sets)"
                 : "the cap",
             devcap ? "use less" : ga_oom_plugin_cap(d) ? "ask the plugin for more"
             : d->group ? "raise GPUARENA_LIMIT for every member"
                 : "raise GPUARENA_LIMIT");
    /* Bytes freed but held back by a stream capture that would have made the room. */
    uint64_t capture_held = ga_fence_capture_held(c);
    char capture_why[400];
    ga_oom_capture_why(capture_why, sizeof capture_why, capture_held);
    int captured = capture_held && capture_held + left >= size;
    /* Bytes freed but still pending because the driver refused the wait that would pass them. */
    char unsynced_why[400];
    int unsynced = !captured && c->sync_refused && c->pend_bytes && c->pend_bytes + left >= size;
    snprintf(unsynced_why, sizeof unsynced_why, "%s freed are still waiting for the device: the "
             "synchronisation that would pass them was refused (cuCtxSynchronize answered "
             "CUresult %d), so they are not reused while the device may still use them; look for "
             "the driver's error (a failed kernel makes every later call fail)",
             ga_fmt_bytes(c->pend_bytes, b[8], 32), (int)c->sync_refused);
    const char *why = d->group && ga_group_broken(d->group) ? ga_oom_group_broken
                      : d->group && ga_group_clashes(d->group, used) ? ga_oom_group_clash
                      : captured ? capture_why : unsynced ? unsynced_why
                      : no_va && s->va_reserved
                          ? "vmm's address space has no room for this block and the driver "
                            "refused to reserve more: lower GPUARENA_LIMIT (vmm reserves twice the "
                            "cap, more as its areas fill) or use GPUARENA_MODE=grow"
                      : no_va ? "vmm has no address space, the driver refused to reserve it: lower "
                              "GPUARENA_LIMIT (vmm reserves twice the cap) or use GPUARENA_MODE=grow"
                      : refused ? refused_why
                      : share_full ? share_why
                      : granules ? (devcap ? "vmm maps whole granules, and the device has no "
                                             "more to map: use less"
                                           : "vmm maps whole granules: raise GPUARENA_LIMIT or "
                                             "use less")
                      : device ? ga_oom_device_full
                      : regions_held ? "the pool's empty regions would make room for it, but the "
                                       "driver refused to free them"
                      : d->group && ga_group_full(d->group) ? ga_oom_group_full
                      : frag_free ? frag_why
                      : ga_oom_total_why(d, size);
    ga_oom_put_holds(o, d, held, used, why);
    /* Other members' idle memory (held, not used) is theirs to give back: say so, and how. */
    if (d->group && !ga_group_full(d->group) && !granules && !no_va && used > held)
        ga_oom_put(o, ";\ngpuarena: the group's other members hold %s; memory a member holds "
                   "but no longer uses (a preallocated arena, grow mode's empty regions, vmm "
                   "granules kept under GPUARENA_VMM_KEEP) goes back only when that member trims "
                   "it (at its own out-of-memory or exit). Members that share a cap give freed "
                   "memory back as soon as the device has passed the free (their next allocation "
                   "or cuCtxSynchronize) with GPUARENA_MODE=vmm GPUARENA_VMM_KEEP=0",
                   ga_fmt_bytes(used - held, b[5], 32));
    ga_oom_put_refused(o, c);
    /* Granules the driver refused to give back (backend.c) stay held against the cap. */
    uint64_t held_back = ga_opt.mode == GA_MODE_VMM ? ga_vmm_refused_bytes(c) : 0;
    if (held_back)
        ga_oom_put(o, ";\ngpuarena: %s of it are granules the driver refused to unmap or release "
                   "(warned about before), held against the cap until a later try succeeds; if the "
                   "refusals go on, the driver or device is failing: check it (nvidia-smi) or use "
                   "GPUARENA_MODE=grow", ga_fmt_bytes(held_back, b[5], 32));
    /* Orphans (ctx.c): each keeps its context's whole address range and at least one granule
     * mapped for blocks of any size, which a program destroying many contexts runs out of. */
    uint64_t orphans = atomic_load_explicit(&d->orph_n, memory_order_relaxed);
    if (orphans)
        ga_oom_put(o, ";\ngpuarena: %llu destroyed context%s on the device still hold%s "
                   "stream-ordered blocks (cuMemAllocAsync) the program never freed: %s in them "
                   "keep %s mapped, counted against the cap, and %s of address space reserved "
                   "until the last of each context's is freed; free such blocks (cuMemFreeAsync "
                   "or cuMemFree) before destroying their context",
                   (unsigned long long)orphans, orphans == 1 ? "" : "s", orphans == 1 ? "s" : "",
                   ga_fmt_bytes(atomic_load_explicit(&d->orph_bytes, memory_order_relaxed), b[5], 32),
                   ga_fmt_bytes(atomic_load_explicit(&d->orph_mapped, memory_order_relaxed), b[6], 32),
                   ga_fmt_bytes(atomic_load_explicit(&d->orph_va, memory_order_relaxed), b[7], 32));
    if (granules)
        ga_oom_put(o, ";\ngpuarena: %s are left under the cap, but vmm mode maps physical memory in "
                   "granules of %s, and this allocation needed more of them than that holds%s; "
                   "GPUARENA_MODE=grow places allocations by the byte",
                   ga_fmt_bytes(left, b[5], 32), ga_fmt_bytes(c->granularity, b[6], 32),
                   d->cap < c->granularity ? " (the cap is below one granule: nothing can be "
                                              "mapped under it)" : "");
    ga_oom_put(o, "\n");
}

/* Claims the one message of a kind; 0 if it was already printed or warnings are off. */
/* A forked child starts CUDA afresh, so its first out-of-memory deserves its own explanation. */
void ga_oom_fork_child(void)
{
    atomic_store(&ga_oom_told_frag, 0);
    atomic_store(&ga_oom_told_true, 0);
    atomic_store(&ga_oom_told_pass, 0);
}

static int ga_oom_first(_Atomic int *told)
{
    return ga_opt.log >= GA_LOG_WARN && !atomic_load_explicit(told, memory_order_relaxed) &&
           !atomic_exchange(told, 1);
}

void ga_oom_classify(ga_oom_t *o, ga_ctx_t *c, uint8_t api, size_t size)
{
    o->len = 0;
    o->msg[0] = '\0';
    uint64_t rounded = (size + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1);
    ga_stats_t s;
    memset(&s, 0, sizeof s);
    if (c->pool)
        ga_pool_stats(c->pool, &s);
    o->frag = 0;
    /* Fragmentation is an arena's failure: a vmm pool places in an address space far larger than
     * the cap (its failures are physical), a platform pool has nothing to fragment. */
    int arena = c->pool && (ga_pool_mode(c->pool) == GA_MODE_ARENA ||
                            ga_pool_mode(c->pool) == GA_MODE_GROW);
    if (arena && rounded >= size) { /* a size too large to round: true OOM */
        uint64_t room = ga_oom_growth_room(c, &s);
        /* Empty regions the driver refused to free serve blocks up to their size (this one is
         * larger, or it would have been served): their bytes are no room for it. */
        uint64_t refused = ga_pool_refused_idle(c->pool, NULL);
        uint64_t usable = s.total_free > refused ? s.total_free - refused : 0;
        o->frag = usable >= rounded || room >= rounded - usable;
        if (o->frag && ga_oom_first(&ga_oom_told_frag))
            ga_oom_explain_frag(o, c, api, rounded, &s, room);
    }
    /* vmm: when the mapped bytes no live block covers would hold the block by themselves, it is
     * a fragmentation failure too (holes in granules that live blocks keep mapped; kept granules
     * were given back before the last try, alloc.c). Said in the one-line form with the mapped
     * figures: the pool's free and largest-free figures count address space, not memory. */
    if (c->pool && ga_pool_mode(c->pool) == GA_MODE_VMM && rounded >= size &&
        s.reserved > s.in_use && s.reserved - s.in_use >= rounded) {
        o->frag = 1;
        if (ga_oom_first(&ga_oom_told_frag))
            ga_oom_explain_true(o, c, api, size, &s, s.reserved - s.in_use);
    }
    if (!o->frag && ga_oom_first(&ga_oom_told_true))
        ga_oom_explain_true(o, c, api, size, &s, 0);
}

/* A pass-through allocation refused for want of memory while this context's arena holds at least
 * half as much free: no error code can say that the memory is there but in the arena, so it is
 * said once. The case that showed it: JAX 0.11 takes its own pool (75% of the device) with
 * cuMemCreate, and in arena mode gpuarena's preallocation holds that memory already; JAX retried
 * smaller sizes down to what was left (scripts/gpu-check.sh on an H200, README "On a real GPU"). */
/* The only cuMemAlloc(Pitch) passed to the driver is the v1 one (32-bit pointers, passthrough.c):
 * the arena's free bytes cannot serve it because its addresses do not fit, not because a
 * framework pools apart, so the advice is the modes whose pools hold only what they serve. */
static void ga_oom_explain_v1(int dev, uint8_t api, size_t size, const ga_stats_t *s)
{
    char b[3][32];
    ga_log(GA_LOG_WARN, "%s (v1, 32-bit pointers) of %s failed on device %d: that memory is held "
           "by gpuarena's arena (%s reserved, %s of it free), whose addresses do not fit a v1 "
           "pointer. For a program that allocates through the v1 entry points, use "
           "GPUARENA_MODE=grow or vmm (their pools hold only what they serve) or a smaller "
           "GPUARENA_MEM_FRACTION",
           ga_api_name(api), ga_fmt_bytes(size, b[0], 32), dev, ga_fmt_bytes(s->reserved, b[1], 32),
           ga_fmt_bytes(s->total_free, b[2], 32));
}

/* A pass-through allocation refused for want of memory that the arena does not explain: by the cap
 * (cap_refused) or by the driver, with room under the cap. Said once, as a pool's true
 * out-of-memory is, with what the process holds against what bounds the device; such a refusal
 * printed nothing before (helper-72 NEW-6: a v1 cuMemAlloc past a 150 MiB cap, managed memory). */
static void ga_oom_explain_pass_true(int dev, uint8_t api, size_t size, int cap_refused)
{
    if (!ga_oom_first(&ga_oom_told_true))
        return;
    const ga_dev_t *d = ga_dev(dev);
    uint64_t held = ga_dev_held(dev);
    uint64_t used = d->group ? ga_group_used(d->group) : held;
    ga_oom_t o;
    o.frag = 0, o.len = 0, o.msg[0] = '\0';
    char b[32];
    ga_oom_put(&o, "gpuarena: out of memory: %s of %s failed on device %d (memory the driver "
               "allocates, counted under the cap)", ga_api_name(api), ga_fmt_bytes(size, b, 32),
               dev);
    ga_oom_put_holds(&o, d, held, used,
                     !cap_refused ? ga_oom_device_full
                     : d->group && ga_group_broken(d->group) ? ga_oom_group_broken
                     : d->group && ga_group_clashes(d->group, used) ? ga_oom_group_clash
                     : d->group && ga_group_full(d->group) ? ga_oom_group_full
                                                              : ga_oom_total_why(d, size));
    ga_oom_put(&o, "\n");
    ga_oom_report(&o);
}

int ga_oom_explain_pass(ga_ctx_t *c, int dev, uint8_t api, size_t size, int cap_refused)
{
    if (dev < 0 || dev >= GA_MAX_DEVICES)
        return 1;
    ga_stats_t s = {0};
    int arena = 0;
    /* A context on the device whose arena holds the memory, free: the arena's own line, once, and
     * no true out-of-memory (the bytes are there). Decided at every refusal: after the first, the
     * later ones got the "use less" line and were counted as true (an outside re-check,
     * 2026-12-06). */
    if (c) {
        ga_mutex_lock(&c->lock);
        if (c->pool &&
            (ga_pool_mode(c->pool) == GA_MODE_ARENA || ga_pool_mode(c->pool) == GA_MODE_GROW)) {
            arena = 1;
            ga_pool_stats(c->pool, &s);
        }
        ga_mutex_unlock(&c->lock);
    }
    if (!arena || s.total_free < size / 2) {
        ga_oom_explain_pass_true(dev, api, size, cap_refused);
        return 1;
    }
    if (!ga_oom_first(&ga_oom_told_pass))
        return 0;
    char b[3][32];
    if (api == GA_API_CUMEMALLOC || api == GA_API_CUMEMALLOCPITCH) {
        ga_oom_explain_v1(c->dev, api, size, &s);
        return 0;
    }
    ga_log(GA_LOG_WARN, "%s of %s failed on device %d: that memory is held by gpuarena's arena "
           "(%s reserved, %s of it free), and memory the program allocates past the arena (%s) "
           "cannot come from it. A framework that pools with cuMemCreate (JAX 0.11 by default) "
           "wants GPUARENA_MODE=vmm or grow, or XLA_PYTHON_CLIENT_ALLOCATOR=platform (every buffer "
           "through gpuarena), or a smaller GPUARENA_MEM_FRACTION", ga_api_name(api),
           ga_fmt_bytes(size, b[0], 32), c->dev, ga_fmt_bytes(s.reserved, b[1], 32),
           ga_fmt_bytes(s.total_free, b[2], 32), ga_api_name(api));
    return 0;
}

void ga_oom_report(const ga_oom_t *o)
{
    if (!o->len)
        return;
    char last = o->msg[o->len - 1];
    ssize_t w = write(2, o->msg, o->len); /* one write: no interleaving with other threads */
    if (last != '\n') /* cut at the buffer's end */
        w = write(2, "\n", 1);
    (void)w;
}
