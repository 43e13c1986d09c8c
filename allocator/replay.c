/* Trace replay: drives a pool (ga_pool.h) from a ga_trace_t, see ga_replay.h.
 *
 * Replay must be cheap enough to run dozens of times per trace (the smallest-arena bisection) and
 * honest enough to benchmark the allocator, so the per-event path is: one hash lookup of the trace
 * address, one ga_pool_alloc or ga_pool_free, no host allocation (map entries come from a block
 * sized to the trace up front). The backend is a bump allocator of fake addresses: regions are never touched,
 * so the peak of the trace does not need to exist as host memory. An open-addressing table maps
 * trace addresses to entries (linear probing in one flat array sized with the entry block, so at
 * most half full and never grown, Fibonacci hashing, backward-shift deletion): the lookup sits on
 * the path being timed, and the chained uthash it replaces cost 27 ns per event on
 * somas_bert_base, half of the figure bench-alloc reported for the allocator. Per-event work (fragmentation tracking,
 * invariant checks, the timeline hook) sits behind one flag decided before the loop, so a replay
 * that asks for none of it (the benchmarks) pays one predictable branch per event.
 */
#include "errmsg.h"
#include "ga_replay.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* Fake backend: address ranges from a bump pointer, far from anything real, never reused.
 * Virtual ranges (vmm) come from the same bump pointer; granule maps only count. */
typedef struct fake_backend {
    uint64_t next, end;
    uint64_t reserves, releases, maps, unmaps;
    size_t align; /* vmm: ranges aligned to the granularity */
} fake_backend_t;

#define FAKE_BASE ((uint64_t)1 << 40)
#define FAKE_END ((uint64_t)1 << 62)

static int fake_reserve(void *ctx, size_t size, uintptr_t *base)
{
    fake_backend_t *fb = ctx;
    uint64_t a = fb->align > GA_ALIGN ? fb->align : GA_ALIGN;
    uint64_t at = (fb->next + a - 1) & ~(a - 1);
    if (size == 0 || at > fb->end || size > fb->end - at)
        return -1;
    *base = (uintptr_t)at;
    fb->next = at + (((uint64_t)size + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1));
    fb->reserves++;
    return 0;
}

static void fake_release(void *ctx, uintptr_t base, size_t size)
{
    fake_backend_t *fb = ctx;
    (void)base;
    (void)size;
    fb->releases++;
}

static int fake_map(void *ctx, uintptr_t addr, size_t size, uint64_t *handle)
{
    fake_backend_t *fb = ctx;
    (void)size;
    *handle = (uint64_t)addr | 1;
    fb->maps++;
    return 0;
}

static void fake_unmap(void *ctx, uintptr_t addr, size_t size, uint64_t handle)
{
    fake_backend_t *fb = ctx;
    (void)addr, (void)size, (void)handle;
    fb->unmaps++;
}

/* One live trace address. failed: its alloc ran out of memory in replay, so its free is expected
 * and consumed silently rather than counted as unmatched. */
typedef struct entry {
    uint64_t key;
    uintptr_t ptr;
    uint64_t requested;
    int failed;
    struct entry *next_spare;
} entry_t;

typedef struct slot {
    uint64_t key;
    entry_t *e; /* NULL: empty */
} slot_t;

/* Everything one replay run holds. */
typedef struct run {
    const ga_replay_opts_t *opts;
    ga_replay_result_t *res;
    fake_backend_t fb;
    ga_pool_t *pool;
    slot_t *slots;       /* trace address -> entry */
    size_t mask;         /* slots - 1 */
    unsigned shift;      /* 64 - log2(slots) */
    entry_t *block;      /* one block of entries */
    entry_t *spare;      /* free list through next_spare */
    uint64_t requested;  /* for peak_requested */
} run_t;

/* Wall time (vDSO, about 25 ns a read here). The thread's CPU time would leave out preemption on
 * a shared machine, but reading it is a system call of about 280 ns in this VM, which on the
 * shortest traces (300 events, a few microseconds) would add 1-2 ns to every event. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *ga_replay_mode_name(ga_replay_mode_t mode)
{
    return ga_mode_name(mode);
}

int ga_replay_mode_parse(const char *name, ga_replay_mode_t *mode)
{
    return ga_mode_parse(name, mode);
}

static size_t map_home(const run_t *r, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> r->shift);
}

static entry_t *map_find(const run_t *r, uint64_t key)
{
    size_t i = map_home(r, key);
    while (r->slots[i].e && r->slots[i].key != key)
        i = (i + 1) & r->mask;
    return r->slots[i].e;
}

/* The table has twice as many slots as the block has entries: never full. */
static void map_add(run_t *r, entry_t *e)
{
    size_t i = map_home(r, e->key);
    while (r->slots[i].e)
        i = (i + 1) & r->mask;
    r->slots[i] = (slot_t){e->key, e};
}

/* Removes e and pulls later entries of its probe run back unless their home lies cyclically in
 * (hole, j], so lookups never meet a gap before their key. */
static void map_del(run_t *r, const entry_t *e)
{
    size_t hole = map_home(r, e->key);
    while (r->slots[hole].e != e)
        hole = (hole + 1) & r->mask;
    for (size_t j = (hole + 1) & r->mask; r->slots[j].e; j = (j + 1) & r->mask) {
        if (((j - map_home(r, r->slots[j].key)) & r->mask) < ((j - hole) & r->mask))
            continue;
        r->slots[hole] = r->slots[j];
        hole = j;
    }
    r->slots[hole].e = NULL;
}

static entry_t *entry_get(run_t *r)
{
    entry_t *e = r->spare;
    if (e)
        r->spare = e->next_spare;
    return e;
}

static void entry_put(run_t *r, entry_t *e)
{
    map_del(r, e);
    e->next_spare = r->spare;
    r->spare = e;
}

static void release_entry(run_t *r, entry_t *e)
{
    if (!e->failed) {
        if (ga_pool_free(r->pool, e->ptr, NULL) != GA_OK)
            r->res->check_failures++; /* the pool refused its own pointer: a bug */
        r->requested -= e->requested;
    }
    entry_put(r, e);
}

/* Returns 1 when the replay should stop (OOM with stop_at_oom). */
static int do_alloc(run_t *r, const ga_event_t *ev, size_t idx)
{
    entry_t *e;
    e = map_find(r, ev->addr);
    if (e) {
        r->res->reused_addrs++;
        release_entry(r, e);
    }
    uintptr_t ptr = 0;
    ga_status_t st = ga_pool_alloc(r->pool, ev->size, &ptr);
    if (st == GA_EINVAL) {
        r->res->invalid_allocs++;
        return 0;
    }
    e = entry_get(r);
    e->key = ev->addr;
    e->ptr = ptr;
    e->requested = ev->size;
    e->failed = st != GA_OK;
    map_add(r, e);
    if (st != GA_OK) {
        r->res->failed_allocs++;
        if (r->res->first_oom == SIZE_MAX)
            r->res->first_oom = idx;
        return r->opts->stop_at_oom;
    }
    r->res->allocs++;
    r->requested += ev->size;
    if (r->requested > r->res->peak_requested)
        r->res->peak_requested = r->requested;
    return 0;
}

static void do_free(run_t *r, const ga_event_t *ev)
{
    entry_t *e;
    e = map_find(r, ev->addr);
    if (!e) {
        r->res->unmatched_frees++;
        return;
    }
    if (!e->failed)
        r->res->frees++;
    release_entry(r, e);
}

static double current_frag(const run_t *r)
{
    if (ga_pool_mode(r->pool) == GA_MODE_PLATFORM)
        return 0.0;
    ga_stats_t s;
    ga_pool_stats(r->pool, &s);
    return ga_fragmentation(&s);
}

static void run_check(run_t *r, size_t idx)
{
    char rep[sizeof r->res->check_report];
    int n = ga_pool_check(r->pool, rep, sizeof rep);
    if (n > 0 && r->res->first_check_fail == SIZE_MAX) {
        r->res->first_check_fail = idx;
        snprintf(r->res->check_report, sizeof r->res->check_report, "%s", rep);
    }
    r->res->check_failures += n > 0 ? (uint64_t)n : 0;
}

/* Bytes in use and reserved now, for the timeline hook. */
static void emit_point(run_t *r, const ga_event_t *ev, size_t idx)
{
    ga_stats_t s;
    ga_pool_stats(r->pool, &s);
    ga_replay_point_t p = {.index = idx, .time_ns = ev->time_ns, .in_use = s.in_use,
                           .reserved = s.reserved};
    r->opts->on_event(r->opts->hook_ctx, &p);
}

static void after_event(run_t *r, const ga_event_t *ev, size_t idx)
{
    if (!r->opts->no_frag_track) {
        double f = current_frag(r);
        if (f > r->res->max_frag)
            r->res->max_frag = f;
    }
    if (r->opts->check > 0 && (idx + 1) % (unsigned)r->opts->check == 0)
        run_check(r, idx);
    if (r->opts->on_event)
        emit_point(r, ev, idx);
}

static void replay_loop(run_t *r, const ga_trace_t *t)
{
    /* Decided once: the benchmark path (no tracking, no checks, no hook) tests one flag per
     * event and calls nothing. */
    const int per_event = !r->opts->no_frag_track || r->opts->check > 0 || r->opts->on_event;
    uint64_t t0 = now_ns();
    size_t i;
    for (i = 0; i < t->count; i++) {
        const ga_event_t *ev = &t->events[i];
        if (ev->result != 0 || (ev->kind != GA_EV_ALLOC && ev->kind != GA_EV_FREE)) {
            r->res->skipped++;
            continue;
        }
        if (ev->kind == GA_EV_FREE)
            do_free(r, ev);
        else if (do_alloc(r, ev, i)) {
            i++;
            break;
        }
        if (per_event)
            after_event(r, ev, i);
    }
    r->res->ns_total = now_ns() - t0;
    r->res->events = i;
    if (r->opts->check > 1 && i > 0) /* a sparse check still sees the final state */
        run_check(r, i - 1);
}

static size_t count_allocs(const ga_trace_t *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->count; i++)
        n += t->events[i].kind == GA_EV_ALLOC;
    return n;
}

/* The pool the mode asks for, over the fake backend. */
static ga_pool_config_t pool_config(const ga_replay_opts_t *o)
{
    ga_pool_config_t c = {.mode = o->mode, .limit = o->limit, .min_region = o->min_region,
                          .keep = o->keep};
    if (o->mode == GA_MODE_ARENA)
        c.initial = o->arena_size, c.grow = 0, c.limit = 0;
    if (o->mode == GA_MODE_VMM)
        c.va_size = o->arena_size ? o->arena_size : o->limit ? 2 * o->limit : (size_t)1 << 40;
    return c;
}

static int run_setup(run_t *r, const ga_trace_t *t, char *err, size_t errlen)
{
    const ga_replay_opts_t *o = r->opts;
    size_t gran = o->granularity ? o->granularity : GA_REPLAY_GRANULARITY;
    r->fb = (fake_backend_t){.next = FAKE_BASE, .end = FAKE_END,
                             .align = o->mode == GA_MODE_VMM ? gran : GA_ALIGN};
    size_t n = count_allocs(t) + 1;
    r->block = calloc(n, sizeof *r->block);
    if (!r->block)
        return ga_errorf(err, errlen, "out of host memory for %zu map entries", n);
    for (size_t i = 0; i < n; i++)
        r->block[i].next_spare = i + 1 < n ? &r->block[i + 1] : NULL;
    r->spare = r->block;
    size_t cap = 64;
    for (r->shift = 58; cap < 2 * n; cap *= 2)
        r->shift--;
    r->slots = calloc(cap, sizeof *r->slots);
    r->mask = cap - 1;
    if (!r->slots)
        return ga_errorf(err, errlen, "out of host memory for %zu map slots", cap);
    ga_pool_backend_t be = {fake_reserve, fake_release, fake_reserve, fake_release, fake_map,
                            fake_unmap, gran, &r->fb};
    ga_pool_config_t cfg = pool_config(o);
    ga_status_t st = GA_OK;
    r->pool = ga_pool_create(&be, &cfg, &st);
    if (!r->pool)
        return ga_errorf(err, errlen, "cannot create the %s pool: %s", ga_mode_name(o->mode),
                         ga_status_str(st));
    return 0;
}

static void run_finish(run_t *r)
{
    ga_replay_result_t *res = r->res;
    ga_stats_t s;
    ga_pool_stats(r->pool, &s);
    res->peak_in_use = s.peak_in_use;
    res->peak_reserved = s.peak_reserved;
    res->final_in_use = s.in_use;
    res->final_reserved = s.reserved;
    res->final_frag = ga_pool_mode(r->pool) == GA_MODE_PLATFORM ? 0.0 : ga_fragmentation(&s);
    ga_pool_destroy(r->pool); /* what it still holds is released: counted below */
    res->backend_reserves = r->fb.reserves;
    res->backend_releases = r->fb.releases;
    res->backend_maps = r->fb.maps;
    res->backend_unmaps = r->fb.unmaps;
    free(r->slots);
    free(r->block);
}

static int check_opts(const ga_replay_opts_t *o, char *err, size_t errlen)
{
    if ((unsigned)o->mode >= GA_MODE_COUNT)
        return ga_errorf(err, errlen, "unknown replay mode %d (arena, grow, vmm or platform)",
                         (int)o->mode);
    if (o->mode == GA_MODE_ARENA && (o->arena_size == 0 || o->arena_size % GA_ALIGN))
        return ga_errorf(err, errlen, "arena size %zu must be a non-zero multiple of %zu bytes",
                         o->arena_size, GA_ALIGN);
    size_t g = o->granularity;
    if (g && (g < GA_ALIGN || (g & (g - 1))))
        return ga_errorf(err, errlen, "granularity %zu must be a power of two of at least %zu "
                         "bytes", g, GA_ALIGN);
    return 0;
}

int ga_replay(const ga_trace_t *trace, const ga_replay_opts_t *opts, ga_replay_result_t *res,
              char *err, size_t errlen)
{
    if (!trace || !opts || !res)
        return ga_errorf(err, errlen, "ga_replay: NULL trace, options or result");
    if (check_opts(opts, err, errlen) != 0)
        return -1;
    memset(res, 0, sizeof *res);
    res->first_oom = res->first_check_fail = SIZE_MAX;
    run_t r = {.opts = opts, .res = res};
    if (run_setup(&r, trace, err, errlen) != 0) {
        free(r.slots);
        free(r.block);
        return -1;
    }
    replay_loop(&r, trace);
    run_finish(&r);
    return 0;
}

/* Runs the trace with `size` as the region (ARENA) or limit (GROW, VMM); 1 if no allocation
 * failed. */
static int fits(const ga_trace_t *t, const ga_replay_opts_t *base, size_t size, int *fits_out,
                char *err, size_t errlen)
{
    ga_replay_opts_t o = *base;
    o.stop_at_oom = 1;
    o.check = 0;
    o.no_frag_track = 1;
    o.on_event = NULL; /* trial runs are not the timeline the caller asked for */
    if (o.mode == GA_REPLAY_ARENA)
        o.arena_size = size;
    else
        o.limit = size;
    ga_replay_result_t res;
    if (ga_replay(t, &o, &res, err, errlen) != 0)
        return -1;
    *fits_out = res.failed_allocs == 0;
    return 0;
}

static size_t round_up(size_t v, size_t g)
{
    return v % g ? v + (g - v % g) : v;
}

/* Doubles hi from lo until it fits, then bisects (lo fails, hi fits) down to one granule. */
static int bisect(const ga_trace_t *t, const ga_replay_opts_t *o, size_t lo, size_t g,
                  size_t *size, char *err, size_t errlen)
{
    int ok;
    if (fits(t, o, lo, &ok, err, errlen) != 0)
        return -1;
    if (ok) {
        *size = lo;
        return 0;
    }
    size_t hi = lo;
    do {
        if (hi > ((size_t)1 << 60))
            return ga_errorf(err, errlen, "no %s size up to 2^60 bytes runs this trace",
                        ga_replay_mode_name(o->mode));
        lo = hi;
        hi *= 2;
        if (fits(t, o, hi, &ok, err, errlen) != 0)
            return -1;
    } while (!ok);
    while (hi - lo > g) {
        size_t mid = lo + (hi - lo) / g / 2 * g;
        if (fits(t, o, mid, &ok, err, errlen) != 0)
            return -1;
        if (ok)
            hi = mid;
        else
            lo = mid;
    }
    *size = hi;
    return 0;
}

int ga_replay_min_size(const ga_trace_t *trace, const ga_replay_opts_t *opts, size_t granularity,
                       size_t *size, char *err, size_t errlen)
{
    if (!trace || !opts || !size)
        return ga_errorf(err, errlen, "ga_replay_min_size: NULL trace, options or size");
    size_t g = granularity ? granularity : GA_ALIGN;
    if (g % GA_ALIGN)
        return ga_errorf(err, errlen, "granularity %zu is not a multiple of %zu", g, GA_ALIGN);
    ga_replay_opts_t p = {.mode = GA_REPLAY_PLATFORM, .no_frag_track = 1};
    ga_replay_result_t res;
    if (ga_replay(trace, &p, &res, err, errlen) != 0)
        return -1;
    size_t lo = round_up(res.peak_in_use ? res.peak_in_use : g, g);
    if (opts->mode == GA_REPLAY_PLATFORM) {
        *size = lo;
        return 0;
    }
    return bisect(trace, opts, lo, g, size, err, errlen);
}
