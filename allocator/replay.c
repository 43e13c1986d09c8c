/* Trace replay: drives a pool (ga_pool.h) from a ga_trace_t, see ga_replay.h.
 *
 * Replay must be cheap enough to run dozens of times per trace (the smallest-arena bisection) and
 * honest enough to benchmark the allocator, so the timed loop does one ga_pool_alloc or
 * ga_pool_free per event and little else. Before it starts, the trace's addresses are resolved
 * once (untimed) into operations: each allocation gets an entry number, each free the number of
 * the allocation it frees, and an allocation at an address still live the number of the one it
 * replaces; the loop then indexes a flat array of entries and hashes nothing. Matching trace
 * addresses is the harness's work, not the allocator's: done in the loop, even an open-addressing
 * table (the chained uthash before it cost 27 ns per event on somas_bert_base) was about a third
 * of the instructions per event and most of the loop's cache misses. Whether an allocation leaves
 * an entry at all is only known from the pool (an invalid size does not), so an entry records its
 * outcome and a free or replacement of an entry that never existed is counted as before. The
 * backend hands out fake addresses (replay_fake.c): regions are never touched, so the peak of the
 * trace does not need to exist as host memory. Per-event work (fragmentation tracking, invariant
 * checks, the timeline hook) sits behind one flag decided before the loop, so a replay that asks
 * for none of it (the benchmarks) pays one predictable branch per event.
 */
#include "errmsg.h"
#include "ga_replay.h"
#include "ga_size.h"
#include "replay_fake.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* What one trace allocation became. ENTRY_NONE: not yet replayed, or released; ENTRY_INVALID: the
 * pool refused its size, so it left no entry (its free is unmatched, as if it never happened);
 * ENTRY_FAILED: it ran out of memory in replay, so its free is expected and consumed silently rather
 * than counted as unmatched. */
enum { ENTRY_NONE, ENTRY_LIVE, ENTRY_FAILED, ENTRY_INVALID };

#define NO_ID UINT32_MAX

typedef struct entry {
    uintptr_t ptr;
    uint64_t requested;
    uint32_t prev;  /* the entry this allocation's address still held (NO_ID: none) */
    uint8_t state;
} entry_t;

#define GA_RESULT_OUT_OF_MEMORY 2 /* CUDA_ERROR_OUT_OF_MEMORY, a failed allocation's result */

/* One trace event, resolved: kind, size for an allocation, and the entry it makes or frees.
 * OP_TRY: an allocation that ran out of memory in the recorded run, tried again (see do_try). */
enum { OP_SKIP, OP_ALLOC, OP_FREE, OP_TRY };

typedef struct op {
    uint64_t size;
    uint32_t id;    /* OP_ALLOC: its new entry; OP_FREE: the entry freed (NO_ID: unmatched) */
    uint8_t kind;
} op_t;

/* Everything one replay run holds. */
typedef struct run {
    const ga_replay_opts_t *opts;
    ga_replay_result_t *res;
    fake_backend_t fb;
    ga_pool_t *pool;
    op_t *ops;           /* one per trace event */
    entry_t *entries;    /* one per trace allocation */
    uint64_t requested;  /* for peak_requested */
    int no_room;         /* a grow limit under GA_ALIGN: no region fits, every allocation fails
                          * (the arena rounds such a limit down to 0, which means none) */
    uint64_t check_walked; /* granules the checks so far walked (GA_REPLAY_CHECK_BUDGET) */
    size_t checked;        /* 1 + the index of the last event checked; 0: none yet */
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

static void release_entry(run_t *r, entry_t *e)
{
    if (e->state == ENTRY_LIVE) {
        if (ga_pool_free(r->pool, e->ptr, NULL) != GA_OK)
            r->res->check_failures++; /* the pool refused its own pointer: a bug */
        r->requested -= e->requested;
    }
    e->state = ENTRY_NONE;
}

static int has_fraction(const ga_replay_opts_t *o);

/* One allocation as the shim makes it in vmm mode: before an out-of-memory is reported the
 * pool's idle memory is given back (ga_pool_trim; shim/sync.c, ga_ctx_give_back) and the
 * allocation tried again when that freed anything; still refused, the device's pools are trimmed
 * (ga_dev_trim: this pool once more) and it is tried again when that freed anything. The second
 * trim changes the pool even when it frees nothing (parked blocks given back, empty regions
 * returned to the range after the failed retry): with one trim, a churn under a 16 MiB cap with
 * the default keep mapped 287 granules and refused 399 allocations in the replay against the
 * shim's 292 and 398 (helper-137, 2026-12-07; test o135_replay_matches_the_shim). The trim
 * also changes where later blocks go (vmm's areas give their empty regions back to the range), so
 * without it a replay under a limit
 * refused other allocations than the shim: 10 against the shim's 4 on cs336_forward_fp32 a granule
 * under its smallest size (an outside check, 2026-12-06; test_vmm_traces.py). Arena and grow
 * replays keep their pools as they were at an out-of-memory (an unused preallocated arena stays:
 * test timeline_hand_built), where the shim would give it back too; under a fraction (the shim's
 * own configuration, --fraction) they are trimmed and tried again as the shim does. */
static ga_status_t pool_alloc(run_t *r, size_t size, uintptr_t *ptr)
{
    ga_status_t st = ga_pool_alloc(r->pool, size, ptr);
    if (st != GA_OK && st != GA_EINVAL &&
        (ga_pool_mode(r->pool) == GA_MODE_VMM || has_fraction(r->opts)) &&
        ga_pool_trim(r->pool))
        st = ga_pool_alloc(r->pool, size, ptr);
    if (st != GA_OK && st != GA_EINVAL &&
        (ga_pool_mode(r->pool) == GA_MODE_VMM || has_fraction(r->opts)) &&
        ga_pool_trim(r->pool))
        st = ga_pool_alloc(r->pool, size, ptr);
    return st;
}

/* Returns 1 when the replay should stop (OOM with stop_at_oom). */
static int do_alloc(run_t *r, const op_t *op, size_t idx)
{
    entry_t *e = &r->entries[op->id];
    if (e->prev != NO_ID) {
        entry_t *old = &r->entries[e->prev];
        if (old->state == ENTRY_LIVE || old->state == ENTRY_FAILED) {
            r->res->reused_addrs++;
            release_entry(r, old);
        }
    }
    uintptr_t ptr = 0;
    ga_status_t st = r->no_room ? GA_ENOMEM : pool_alloc(r, op->size, &ptr);
    if (r->no_room && (op->size == 0 || op->size > SIZE_MAX - (GA_ALIGN - 1)))
        st = op->size ? GA_ETOOBIG : GA_EINVAL; /* what the pool says of these sizes, room or not */
    if (st == GA_ETOOBIG)
        st = GA_ENOMEM; /* 2^64-511 up: its rounding wraps, and no address space places it, as
                         * none places 2^62: a failed allocation, not a silent "invalid" one */
    if (st == GA_EINVAL) {
        e->state = ENTRY_INVALID;
        r->res->invalid_allocs++;
        return 0;
    }
    e->ptr = ptr;
    e->requested = op->size;
    if (st != GA_OK) {
        e->state = ENTRY_FAILED;
        r->res->failed_allocs++;
        if (r->res->first_oom == SIZE_MAX)
            r->res->first_oom = idx;
        return r->opts->stop_at_oom;
    }
    e->state = ENTRY_LIVE;
    r->res->allocs++;
    r->requested += op->size;
    if (r->requested > r->res->peak_requested)
        r->res->peak_requested = r->requested;
    return 0;
}

static void emit_point(run_t *r, const ga_event_t *ev, size_t idx);

/* An allocation that ran out of memory in the recorded run: the program asked for it, so replay
 * asks too, and frees it at once when served (it never lived past its call). Skipped, a trace
 * that failed from fragmentation replayed under a smaller min size than the run had (896 MiB
 * against 1.12 GiB). Counted in recorded_failures, and when it fails here in failed_allocs too,
 * so min size covers it; its moment of use is a timeline point of its own. */
static int do_try(run_t *r, const op_t *op, const ga_event_t *ev, size_t idx)
{
    r->res->recorded_failures++;
    uintptr_t ptr = 0;
    ga_status_t st = r->no_room ? GA_ENOMEM : pool_alloc(r, op->size, &ptr);
    if (st != GA_OK) { /* GA_ETOOBIG: 2^64-511 up, as do_alloc counts it (size 0 is skipped) */
        r->res->failed_allocs++;
        if (r->res->first_oom == SIZE_MAX)
            r->res->first_oom = idx;
        return r->opts->stop_at_oom;
    }
    if (r->requested + op->size > r->res->peak_requested)
        r->res->peak_requested = r->requested + op->size;
    if (r->opts->on_event)
        emit_point(r, ev, idx);
    if (ga_pool_free(r->pool, ptr, NULL) != GA_OK)
        r->res->check_failures++; /* the pool refused its own pointer: a bug */
    return 0;
}

static void do_free(run_t *r, const op_t *op)
{
    entry_t *e = op->id == NO_ID ? NULL : &r->entries[op->id];
    if (!e || (e->state != ENTRY_LIVE && e->state != ENTRY_FAILED)) {
        r->res->unmatched_frees++;
        return;
    }
    if (e->state == ENTRY_LIVE)
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
    r->checked = idx + 1;
    r->res->checks++;
    char rep[sizeof r->res->check_report];
    int n = ga_pool_check(r->pool, rep, sizeof rep);
    if (n > 0 && r->res->first_check_fail == SIZE_MAX) {
        r->res->first_check_fail = idx;
        snprintf(r->res->check_report, sizeof r->res->check_report, "%s", rep);
    }
    r->res->check_failures += n > 0 ? (uint64_t)n : 0;
}

/* A check asked for after event idx, run while the granules walked stay within the budget: a vmm
 * pool's check walks every granule of its ranges, and a trace of 1,000 blocks of 1 TiB (a 20 TiB
 * range, 10 million granules) took 58 s under --check where its replay takes 3 (an outside check
 * of issue 8's "under 10 s, --check included", 2026-12-06). Pools of arena, grow and platform
 * mode walk no granules and are checked after every event asked. */
static void check_within_budget(run_t *r, size_t idx)
{
    uint64_t g = ga_pool_check_granules(r->pool);
    if (g && r->check_walked + g > GA_REPLAY_CHECK_BUDGET * (uint64_t)(idx + 1))
        return;
    r->check_walked += g;
    run_check(r, idx);
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
        check_within_budget(r, idx);
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
        const op_t *op = &r->ops[i];
        if (op->kind == OP_SKIP) {
            r->res->skipped++;
            continue;
        }
        if (op->kind == OP_FREE)
            do_free(r, op);
        else if (op->kind == OP_TRY ? do_try(r, op, &t->events[i], i) : do_alloc(r, op, i)) {
            i++;
            break;
        }
        if (per_event)
            after_event(r, &t->events[i], i);
    }
    r->res->ns_total = now_ns() - t0;
    r->res->events = i;
    if (r->opts->check > 0 && i > 0 && r->checked != i) /* a sparse or thinned check still sees
                                                           * the final state */
        run_check(r, i - 1);
}

/* The address table of resolve(): trace address -> entry number, open addressing with linear
 * probing in twice as many slots as there are allocations (never full, never grown), Fibonacci
 * hashing, backward-shift deletion. */
typedef struct addrmap {
    uint64_t *keys;
    uint32_t *ids;  /* NO_ID: empty */
    size_t mask;
    unsigned shift; /* 64 - log2(slots) */
} addrmap_t;

static size_t map_home(const addrmap_t *m, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> m->shift);
}

/* The slot of key, or the empty slot where it would go. */
static size_t map_slot(const addrmap_t *m, uint64_t key)
{
    size_t i = map_home(m, key);
    while (m->ids[i] != NO_ID && m->keys[i] != key)
        i = (i + 1) & m->mask;
    return i;
}

/* Empties slot `hole` and pulls later slots of its probe run back unless their home lies
 * cyclically in (hole, j], so lookups never meet a gap before their key. */
static void map_del(addrmap_t *m, size_t hole)
{
    for (size_t j = (hole + 1) & m->mask; m->ids[j] != NO_ID; j = (j + 1) & m->mask) {
        if (((j - map_home(m, m->keys[j])) & m->mask) < ((j - hole) & m->mask))
            continue;
        m->keys[hole] = m->keys[j];
        m->ids[hole] = m->ids[j];
        hole = j;
    }
    m->ids[hole] = NO_ID;
}

/* Builds r->ops and r->entries from the trace (see the top of the file); -1 with err set if host
 * memory ran out or the trace has more allocations than entry numbers. */
static int resolve(run_t *r, const ga_trace_t *t, char *err, size_t errlen)
{
    size_t n = 0;
    for (size_t i = 0; i < t->count; i++)
        n += t->events[i].kind == GA_EV_ALLOC && t->events[i].result == 0;
    if (n >= NO_ID)
        return ga_errorf(err, errlen, "the trace has %zu allocations; replay takes at most %u",
                         n, NO_ID - 1);
    addrmap_t m = {.shift = 58};
    size_t cap = 64;
    for (; cap < 2 * n; cap *= 2)
        m.shift--;
    m.mask = cap - 1;
    m.keys = malloc(cap * sizeof *m.keys);
    m.ids = malloc(cap * sizeof *m.ids);
    r->ops = malloc((t->count ? t->count : 1) * sizeof *r->ops);
    r->entries = calloc(n ? n : 1, sizeof *r->entries);
    if (!m.keys || !m.ids || !r->ops || !r->entries) {
        free(m.keys);
        free(m.ids);
        return ga_errorf(err, errlen, "out of host memory for the replay of %zu events",
                         t->count);
    }
    memset(m.ids, 0xff, cap * sizeof *m.ids);
    uint32_t next = 0;
    for (size_t i = 0; i < t->count; i++) {
        const ga_event_t *ev = &t->events[i];
        op_t *op = &r->ops[i];
        *op = (op_t){.kind = OP_SKIP, .id = NO_ID};
        if (ev->kind == GA_EV_ALLOC_FAILED && ev->result == GA_RESULT_OUT_OF_MEMORY && ev->size) {
            *op = (op_t){.kind = OP_TRY, .size = ev->size, .id = NO_ID};
            continue;
        }
        if (ev->result != 0 || (ev->kind != GA_EV_ALLOC && ev->kind != GA_EV_FREE))
            continue;
        size_t s = map_slot(&m, ev->addr);
        if (ev->kind == GA_EV_FREE) {
            *op = (op_t){.kind = OP_FREE, .id = m.ids[s]};
            if (m.ids[s] != NO_ID)
                map_del(&m, s);
            continue;
        }
        *op = (op_t){.kind = OP_ALLOC, .size = ev->size, .id = next};
        r->entries[next].prev = m.ids[s];
        m.keys[s] = ev->addr;
        m.ids[s] = next++;
    }
    free(m.keys);
    free(m.ids);
    return 0;
}

/* Whether a fraction sizes this replay's pool (platform answers to the cap alone, as the shim). */
static int has_fraction(const ga_replay_opts_t *o)
{
    return o->fraction > 0 && o->mode != GA_MODE_PLATFORM;
}

/* The share that bounds the pool under a fraction, or 0 where none does ("F+" outside arena
 * mode: the cap alone), as shim/ctx.c's ga_pool_new configures it. */
static size_t fraction_share(const ga_replay_opts_t *o)
{
    if (!has_fraction(o) || (o->fraction_grow && o->mode != GA_MODE_ARENA))
        return 0;
    return (size_t)ga_fraction_share(o->limit, o->fraction, GA_ALIGN);
}

/* The pool the mode asks for, over the fake backend. */
static ga_pool_config_t pool_config(const ga_replay_opts_t *o)
{
    ga_pool_config_t c = {.mode = o->mode, .limit = o->limit, .min_region = o->min_region,
                          .keep = o->keep};
    if (has_fraction(o)) { /* the shim's ga_pool_new: the cap is the backend's (fake cap) */
        size_t share = fraction_share(o);
        c.initial = o->mode == GA_MODE_ARENA ? share : 0;
        c.grow = o->fraction_grow;
        c.keep_empty = 1; /* trimmed before an out-of-memory (pool_alloc), as the shim does */
        c.limit = o->fraction_grow ? 0 : share;
        if (o->mode == GA_MODE_VMM) {
            c.va_size = o->arena_size ? o->arena_size /* twice the cap, as the shim's */
                        : o->limit > (SIZE_MAX >> 2) ? (SIZE_MAX >> 2) : 2 * o->limit;
            if (!c.limit) /* "F+": the pool is told the cap, as the shim tells it */
                c.limit = o->limit;
        }
        return c;
    }
    if (o->mode == GA_MODE_ARENA)
        c.initial = o->arena_size, c.grow = 0, c.limit = 0;
    if (o->mode == GA_MODE_GROW)
        c.limit = 0; /* the backend refuses past it (fake_backend_t's cap), as the shim's does */
    if (o->mode == GA_MODE_VMM)
        c.va_size = o->arena_size ? o->arena_size : o->limit ? 2 * o->limit : (size_t)1 << 40;
    return c;
}

static int run_setup(run_t *r, const ga_trace_t *t, char *err, size_t errlen)
{
    const ga_replay_opts_t *o = r->opts;
    size_t gran = o->granularity ? o->granularity : GA_REPLAY_GRANULARITY;
    ga_fake_init(&r->fb, o->mode == GA_MODE_VMM ? gran : GA_ALIGN,
                 o->mode == GA_MODE_GROW || (o->mode == GA_MODE_ARENA && has_fraction(o)) ? o->limit : 0,
                 o->mode == GA_MODE_ARENA || o->mode == GA_MODE_GROW);
    if (resolve(r, t, err, errlen) != 0)
        return -1;
    ga_pool_backend_t be = ga_fake_backend(&r->fb, gran);
    ga_pool_config_t cfg = pool_config(o);
    r->no_room = o->mode == GA_MODE_GROW && o->limit && o->limit < GA_ALIGN;
    ga_status_t st = GA_OK;
    r->pool = ga_pool_create(&be, &cfg, &st);
    if (!r->pool && o->mode == GA_MODE_ARENA && cfg.initial > FAKE_END - FAKE_BASE)
        return ga_errorf(err, errlen, "an arena of %zu bytes is more than replay's address space "
                         "(%llu bytes); give a smaller %s", cfg.initial,
                         (unsigned long long)(FAKE_END - FAKE_BASE),
                         has_fraction(o) ? "cap or fraction" : "arena size");
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
    /* The backend calls of the trace itself, as a program's statistics count them at exit: the
     * pool's teardown below is the replay's, not the program's, and counting its releases and
     * unmaps made maps - unmaps disagree with final_reserved (an outside test, 2026-12-05). */
    res->backend_reserves = r->fb.reserves;
    res->backend_releases = r->fb.releases;
    res->backend_maps = r->fb.maps;
    res->backend_unmaps = r->fb.unmaps;
    ga_pool_destroy(r->pool);
    ga_fake_fini(&r->fb);
    free(r->ops);
    free(r->entries);
}

/* vmm granules past 2^57 overflow the pool's smallest first range (64 granules) and creating it
 * never ended; no GPU comes near 1 TiB. gpuarena-replay refuses the same bound. */
#define REPLAY_MAX_GRANULARITY ((size_t)1 << 40)

static int check_opts(const ga_replay_opts_t *o, char *err, size_t errlen)
{
    if ((unsigned)o->mode >= GA_MODE_COUNT)
        return ga_errorf(err, errlen, "unknown replay mode %d (arena, grow, vmm or platform)",
                         (int)o->mode);
    if (has_fraction(o) && (!o->limit || o->fraction > 1))
        return ga_errorf(err, errlen, "a fraction needs a cap (limit) to take its share of, and "
                         "is at most 1");
    if (has_fraction(o) && (o->mode == GA_MODE_ARENA || !o->fraction_grow) && !fraction_share(o))
        return ga_errorf(err, errlen, "a fraction of %g of the cap %zu bytes is a share of no "
                         "512-byte block: give a larger fraction or cap", o->fraction, o->limit);
    if (o->mode == GA_MODE_ARENA && !has_fraction(o) &&
        (o->arena_size == 0 || o->arena_size % GA_ALIGN))
        return ga_errorf(err, errlen, "arena size %zu must be a non-zero multiple of %zu bytes",
                         o->arena_size, GA_ALIGN);
    size_t g = o->granularity;
    if (g && (g < GA_ALIGN || g > REPLAY_MAX_GRANULARITY || (g & (g - 1))))
        return ga_errorf(err, errlen, "granularity %zu must be a power of two from %zu bytes to "
                         "1 TiB", g, GA_ALIGN);
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
        ga_fake_fini(&r.fb);
        free(r.ops);
        free(r.entries);
        return -1;
    }
    replay_loop(&r, trace);
    run_finish(&r);
    return 0;
}

/* Runs the trace with `size` as the region (ARENA) or limit (GROW, VMM); 1 if no allocation
 * failed. */
static int fits_work(const ga_trace_t *t, const ga_replay_opts_t *base, size_t size,
                     int *fits_out, uint64_t *work, char *err, size_t errlen);

static int fits(const ga_trace_t *t, const ga_replay_opts_t *base, size_t size, int *fits_out,
                char *err, size_t errlen)
{
    return fits_work(t, base, size, fits_out, NULL, err, errlen);
}

/* fits, and the trial's work: the trace's events (what the scan counted per trial before), and
 * in vmm mode the granules it mapped and unmapped (a block of 1 TiB is 524,288 of them, the cost
 * of the event many times over). */
static int fits_work(const ga_trace_t *t, const ga_replay_opts_t *base, size_t size,
                     int *fits_out, uint64_t *work, char *err, size_t errlen)
{
    ga_replay_opts_t o = *base;
    o.stop_at_oom = 1;
    o.check = 0;
    o.no_frag_track = 1;
    o.on_event = NULL; /* trial runs are not the timeline the caller asked for */
    if (has_fraction(&o)) { /* the cap varies, the share follows it */
        o.limit = size;
        if ((o.mode == GA_REPLAY_ARENA || !o.fraction_grow) && !fraction_share(&o)) {
            *fits_out = 0; /* a share of no block: nothing fits */
            if (work)
                *work = 1;
            return 0;
        }
    } else if (o.mode == GA_REPLAY_ARENA) {
        o.arena_size = size;
    } else {
        o.limit = size;
    }
    ga_replay_result_t res;
    if (ga_replay(t, &o, &res, err, errlen) != 0)
        return -1;
    *fits_out = res.failed_allocs == 0;
    if (work)
        *work = t->count + res.backend_maps + res.backend_unmaps;
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
        if (hi > ((size_t)1 << 60)) {
            ga_errorf(err, errlen, "no %s size up to 2^60 bytes runs this trace",
                      ga_replay_mode_name(o->mode));
            *size = 0;
            return 1;
        }
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

/* Replayed events the scan below may spend: about 0.2 s here, the whole window on every
 * minimalloc trace (at most 1.6 M events), a few hundred sizes above the peak on the SOMAS ones.
 * In vmm mode each granule mapped or unmapped counts as an event: a trace of 1,000 blocks of
 * 1 TiB and 512 bytes scanned 2,097 sizes of 3 s each (its 2,000 events alone fit the budget
 * that often; an outside check, 2026-12-06). */
#define GA_MIN_SCAN_EVENTS ((uint64_t)1 << 22)

/* Bisection assumes that above a size that runs the trace every size does; a best fit whose region
 * or limit decides where blocks land is not monotone (minimalloc_K's arena: bisection stopped at
 * 2,242,560 bytes while 1,911,808 runs it). So the sizes from the lower bound up are then tried in
 * order, the first that runs the trace being the smallest, while the trials stay within
 * GA_MIN_SCAN_EVENTS replayed events; past that the bisection's answer stands, within the window
 * the scan did not reach. */
static int scan_up(const ga_trace_t *t, const ga_replay_opts_t *o, size_t lo, size_t g,
                   size_t *size, char *err, size_t errlen)
{
    uint64_t spent = 0, per = t->count ? t->count : 1;
    for (size_t s = lo; s < *size && spent + per <= GA_MIN_SCAN_EVENTS; s += g) {
        int ok;
        uint64_t work = 0;
        if (fits_work(t, o, s, &ok, &work, err, errlen) != 0)
            return -1;
        spent += work > per ? work : per;
        if (ok) {
            *size = s;
            break;
        }
    }
    return 0;
}

/* vmm over a virtual range of a fixed size (arena_size; gpuarena-replay gives twice the live
 * peak): the limit then decides no placement, only refusals, so a trial under a limit L refuses
 * nothing and is the run with no limit, or refuses first where that run's mapped bytes would pass
 * L. Its mapped bytes only grow when no kept granule is left to give back, so L runs the trace
 * exactly when L >= that run's peak of mapped bytes. After the bisection's first trial (lo, the
 * live peak), one replay with no limit then gives the answer the bisection converges to (that
 * peak rounded up to g), and two trials confirm it (it runs the trace, g less does not). Where
 * the bisection made ~34 trials, each a whole replay when it fits (a trace of 1,000 blocks of
 * 1 TiB + 512 bytes: 115 s before runs of granules were mapped in one call, 2.1 s after), this
 * makes four. 1: *size set; 0: not this case, or the confirmation disagreed (the caller bisects
 * as before); -1: error. */
static int vmm_from_peak(const ga_trace_t *t, const ga_replay_opts_t *o, size_t lo, size_t g,
                         size_t *size, char *err, size_t errlen)
{
    if (o->mode != GA_REPLAY_VMM || !o->arena_size || has_fraction(o))
        return 0; /* no fixed range: the range is twice the limit, and placement follows it; or
                   * a fixed share of the cap, which the peak does not give */
    int ok;
    if (fits(t, o, lo, &ok, err, errlen) != 0)
        return -1;
    if (ok) { /* as the bisection: lo runs it */
        *size = lo;
        return 1;
    }
    ga_replay_opts_t u = *o;
    u.limit = 0;
    u.stop_at_oom = 1;
    u.check = 0;
    u.no_frag_track = 1;
    u.on_event = NULL;
    ga_replay_result_t res;
    if (ga_replay(t, &u, &res, err, errlen) != 0)
        return -1;
    if (res.failed_allocs || res.peak_reserved > ((uint64_t)1 << 60))
        return 0; /* refused with no limit, or past the bisection's 2^60: as before */
    size_t c = round_up((size_t)res.peak_reserved, g);
    if (c <= lo) /* lo did not run it: not what the peak says */
        return 0;
    if (fits(t, o, c, &ok, err, errlen) != 0)
        return -1;
    if (!ok)
        return 0;
    if (c - g > lo) {
        if (fits(t, o, c - g, &ok, err, errlen) != 0)
            return -1;
        if (ok)
            return 0;
    }
    *size = c;
    return 1;
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
        if (res.failed_allocs) { /* a block no backend serves (past 2^60): no cap runs it */
            ga_errorf(err, errlen, "no platform size up to 2^60 bytes runs this trace");
            *size = 0;
            return 1;
        }
        *size = lo;
        return 0;
    }
    int rc = vmm_from_peak(trace, opts, lo, g, size, err, errlen);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    rc = bisect(trace, opts, lo, g, size, err, errlen);
    return rc == 0 ? scan_up(trace, opts, lo + g, g, size, err, errlen) : rc;
}
