/* Trace replay: drives an arena (or the platform model) from a ga_trace_t, see ga_replay.h.
 *
 * Replay must be cheap enough to run dozens of times per trace (the smallest-arena bisection) and
 * honest enough to benchmark the allocator, so the per-event path is: one hash lookup of the trace
 * address, one ga_alloc or ga_free, no host allocation (map entries come from a pool sized to the
 * trace up front). The backend is a bump allocator of fake addresses: regions are never touched,
 * so the peak of the trace does not need to exist as host memory. uthash maps trace addresses to
 * arena addresses; its default hash (Jenkins) is replaced by a 64-bit mixer because every key is a
 * single u64 and the lookup sits on the path being timed. Per-event work (fragmentation tracking,
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

static inline uint32_t mix64(const void *key)
{
    uint64_t x;
    memcpy(&x, key, sizeof x);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint32_t)x;
}
#define HASH_FUNCTION(keyptr, keylen, hashv) \
    do {                                     \
        (void)(keylen);                      \
        (hashv) = mix64(keyptr);             \
    } while (0)
#include <uthash.h>

/* Fake backend: address ranges from a bump pointer, far from anything real, never reused. */
typedef struct fake_backend {
    uint64_t next, end;
    uint64_t reserves, releases;
} fake_backend_t;

#define FAKE_BASE ((uint64_t)1 << 40)
#define FAKE_END ((uint64_t)1 << 62)

static int fake_reserve(void *ctx, size_t size, uintptr_t *base)
{
    fake_backend_t *fb = ctx;
    if (size == 0 || size > fb->end - fb->next)
        return -1;
    *base = (uintptr_t)fb->next;
    fb->next += ((uint64_t)size + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1);
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

/* One live trace address. failed: its alloc ran out of memory in replay, so its free is expected
 * and consumed silently rather than counted as unmatched. */
typedef struct entry {
    uint64_t key;
    uintptr_t ptr;
    uint64_t size;      /* rounded size (platform mode releases it) */
    uint64_t requested;
    int failed;
    UT_hash_handle hh;
} entry_t;

/* Everything one replay run holds. */
typedef struct run {
    const ga_replay_opts_t *opts;
    ga_replay_result_t *res;
    fake_backend_t fb;
    ga_backend_t backend;
    ga_arena_t *arena;   /* NULL in platform mode */
    entry_t *map;        /* uthash head */
    entry_t *pool;       /* one block of entries */
    entry_t *spare;      /* free list through hh.next */
    uint64_t in_use, requested; /* platform mode and peak_requested */
} run_t;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *const mode_names[] = {"arena", "grow", "platform"};

const char *ga_replay_mode_name(ga_replay_mode_t mode)
{
    return (unsigned)mode < 3 ? mode_names[mode] : "invalid";
}

int ga_replay_mode_parse(const char *name, ga_replay_mode_t *mode)
{
    for (unsigned i = 0; name && i < 3; i++)
        if (strcmp(name, mode_names[i]) == 0) {
            *mode = (ga_replay_mode_t)i;
            return 0;
        }
    return -1;
}

static entry_t *entry_get(run_t *r)
{
    entry_t *e = r->spare;
    if (e)
        r->spare = e->hh.next;
    return e;
}

static void entry_put(run_t *r, entry_t *e)
{
    HASH_DEL(r->map, e);
    e->hh.next = r->spare;
    r->spare = e;
}

/* Platform model: a reservation of the rounded size per alloc, under the optional limit. */
static ga_status_t platform_alloc(run_t *r, uint64_t size, uintptr_t *ptr, uint64_t *rounded)
{
    if (size == 0 || size > UINT64_MAX - GA_ALIGN)
        return GA_EINVAL;
    *rounded = (size + GA_ALIGN - 1) & ~(uint64_t)(GA_ALIGN - 1);
    if (r->opts->limit && *rounded > r->opts->limit - (r->in_use < r->opts->limit
                                                           ? r->in_use : r->opts->limit))
        return GA_ENOMEM;
    if (fake_reserve(&r->fb, *rounded, ptr) != 0)
        return GA_ENOMEM;
    r->in_use += *rounded;
    if (r->in_use > r->res->peak_in_use)
        r->res->peak_in_use = r->in_use;
    return GA_OK;
}

static void release_entry(run_t *r, entry_t *e)
{
    if (!e->failed) {
        if (r->arena) {
            ga_status_t st = ga_free(r->arena, e->ptr);
            if (st != GA_OK)
                r->res->check_failures++; /* the arena refused its own pointer: a bug */
        } else {
            fake_release(&r->fb, e->ptr, e->size);
            r->in_use -= e->size;
        }
        r->requested -= e->requested;
    }
    entry_put(r, e);
}

/* Returns 1 when the replay should stop (OOM with stop_at_oom). */
static int do_alloc(run_t *r, const ga_event_t *ev, size_t idx)
{
    entry_t *e;
    HASH_FIND(hh, r->map, &ev->addr, sizeof ev->addr, e);
    if (e) {
        r->res->reused_addrs++;
        release_entry(r, e);
    }
    uintptr_t ptr = 0;
    uint64_t rounded = 0;
    ga_status_t st = r->arena ? ga_alloc(r->arena, ev->size, &ptr)
                              : platform_alloc(r, ev->size, &ptr, &rounded);
    if (st == GA_EINVAL) {
        r->res->invalid_allocs++;
        return 0;
    }
    e = entry_get(r);
    e->key = ev->addr;
    e->ptr = ptr;
    e->size = rounded;
    e->requested = ev->size;
    e->failed = st != GA_OK;
    HASH_ADD(hh, r->map, key, sizeof e->key, e);
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
    HASH_FIND(hh, r->map, &ev->addr, sizeof ev->addr, e);
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
    if (!r->arena)
        return 0.0;
    ga_stats_t s;
    ga_get_stats(r->arena, &s);
    return ga_fragmentation(&s);
}

static void run_check(run_t *r, size_t idx)
{
    char rep[sizeof r->res->check_report];
    int n = ga_check(r->arena, rep, sizeof rep);
    if (n > 0 && r->res->first_check_fail == SIZE_MAX) {
        r->res->first_check_fail = idx;
        snprintf(r->res->check_report, sizeof r->res->check_report, "%s", rep);
    }
    r->res->check_failures += n > 0 ? (uint64_t)n : 0;
}

/* Bytes in use and reserved now, for the timeline hook. */
static void emit_point(run_t *r, const ga_event_t *ev, size_t idx)
{
    ga_replay_point_t p = {.index = idx, .time_ns = ev->time_ns, .in_use = r->in_use,
                           .reserved = r->in_use};
    if (r->arena) {
        ga_stats_t s;
        ga_get_stats(r->arena, &s);
        p.in_use = s.in_use;
        p.reserved = s.reserved;
    }
    r->opts->on_event(r->opts->hook_ctx, &p);
}

static void after_event(run_t *r, const ga_event_t *ev, size_t idx)
{
    if (!r->opts->no_frag_track) {
        double f = current_frag(r);
        if (f > r->res->max_frag)
            r->res->max_frag = f;
    }
    if (r->opts->check > 0 && r->arena && (idx + 1) % (unsigned)r->opts->check == 0)
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
    if (r->opts->check > 1 && r->arena && i > 0) /* a sparse check still sees the final state */
        run_check(r, i - 1);
}

static size_t count_allocs(const ga_trace_t *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->count; i++)
        n += t->events[i].kind == GA_EV_ALLOC;
    return n;
}

static int run_setup(run_t *r, const ga_trace_t *t, char *err, size_t errlen)
{
    const ga_replay_opts_t *o = r->opts;
    r->fb = (fake_backend_t){.next = FAKE_BASE, .end = FAKE_END};
    r->backend = (ga_backend_t){fake_reserve, fake_release, &r->fb};
    size_t n = count_allocs(t) + 1;
    r->pool = calloc(n, sizeof *r->pool);
    if (!r->pool)
        return ga_errorf(err, errlen, "out of host memory for %zu map entries", n);
    for (size_t i = 0; i < n; i++)
        r->pool[i].hh.next = i + 1 < n ? &r->pool[i + 1] : NULL;
    r->spare = r->pool;
    if (o->mode == GA_REPLAY_PLATFORM)
        return 0;
    ga_config_t cfg = {0};
    if (o->mode == GA_REPLAY_ARENA)
        cfg = (ga_config_t){.initial = o->arena_size, .grow = 0, .limit = 0};
    else
        cfg = (ga_config_t){.initial = 0, .grow = 1, .limit = o->limit,
                            .min_region = o->min_region};
    ga_status_t st = GA_OK;
    r->arena = ga_arena_create(&r->backend, &cfg, &st);
    if (!r->arena)
        return ga_errorf(err, errlen, "cannot create the arena: %s", ga_status_str(st));
    return 0;
}

static void run_finish(run_t *r)
{
    ga_replay_result_t *res = r->res;
    if (r->arena) {
        ga_stats_t s;
        ga_get_stats(r->arena, &s);
        res->peak_in_use = s.peak_in_use;
        res->peak_reserved = s.peak_reserved;
        res->final_in_use = s.in_use;
        res->final_reserved = s.reserved;
        res->final_frag = ga_fragmentation(&s);
        ga_arena_destroy(r->arena);
    } else {
        res->peak_reserved = res->peak_in_use;
        res->final_in_use = res->final_reserved = r->in_use;
    }
    res->backend_reserves = r->fb.reserves;
    res->backend_releases = r->fb.releases;
    HASH_CLEAR(hh, r->map);
    free(r->pool);
}

static int check_opts(const ga_replay_opts_t *o, char *err, size_t errlen)
{
    if ((unsigned)o->mode > GA_REPLAY_PLATFORM)
        return ga_errorf(err, errlen, "unknown replay mode %d (arena, grow or platform)", o->mode);
    if (o->mode == GA_REPLAY_ARENA && (o->arena_size == 0 || o->arena_size % GA_ALIGN))
        return ga_errorf(err, errlen, "arena size %zu must be a non-zero multiple of %zu bytes",
                    o->arena_size, GA_ALIGN);
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
        free(r.pool);
        return -1;
    }
    replay_loop(&r, trace);
    run_finish(&r);
    return 0;
}

/* Runs the trace with `size` as the region (ARENA) or limit (GROW); 1 if no allocation failed. */
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
