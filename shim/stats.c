/* gpuarena statistics: the shim's counters and the JSON report written at exit.
 *
 * The shim's own figures (GA_SHIM_STATS_LIST: calls, failures by kind, driver calls, time) are
 * counted per context under the context's lock, which every hook takes anyway, so counting adds
 * no lock; the report sums them. The process levels (GA_LEVEL_LIST: in use, reserved,
 * pass-through) are atomics with their peaks, so "totals" carries the peak of the process-wide
 * sum, not a sum of per-context peaks. The pools' own figures come from ga_pool_stats. The hooks
 * are timed only when a report or a trace was asked for; on x86-64 the clock is the TSC (a few
 * ns), converted to ns with a ratio measured between start and exit against CLOCK_MONOTONIC,
 * elsewhere CLOCK_MONOTONIC itself. The report is format 2 (README "Statistics"), written by
 * shim/outfile.c (a regular file atomically, so `gpuarena run` never reads half a file).
 * totals.frag_failures and totals.true_oom_failures split the out-of-memory failures of the
 * cuMemAlloc family as the shim sees them (oom.c: free bytes in the pool plus what it may still
 * reserve under its limit, the cap and the driver). devices[].failed_allocs and frag_failures are
 * the same counts for the one context, one per failed call (not the pool's own, which counts
 * every attempt of a call: the retries after waiting for pending frees and after the trim).
 */
#define _GNU_SOURCE
#include "shim.h"

#include "outfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

int ga_timing; /* set once at start, read by the hooks */

/* The process-wide levels: this file's own, changed through ga_level_add. */
static struct {
    _Atomic int64_t cur;
    _Atomic uint64_t peak;
} ga_levels[GA_LEVEL_COUNT];

static uint64_t ga_start_ticks, ga_start_ns;

static uint64_t ga_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t ga_now(void)
{
#if defined(__x86_64__)
    return __rdtsc();
#else
    return ga_mono_ns();
#endif
}

void ga_stats_start(void)
{
    ga_start_ticks = ga_now();
    ga_start_ns = ga_mono_ns();
    ga_timing = ga_opt.stats != NULL || ga_opt.trace != NULL;
    ga_outfile_watch("GPUARENA_STATS", ga_opt.stats); /* /dev/stdout must still be it at exit */
}

/* Ticks to ns: the ratio measured over the whole run (1 where ticks are ns already). */
static double ga_ns_per_tick(void)
{
#if defined(__x86_64__)
    uint64_t dt = ga_now() - ga_start_ticks, dn = ga_mono_ns() - ga_start_ns;
    return dt ? (double)dn / (double)dt : 0.0;
#else
    return 1.0;
#endif
}

uint64_t ga_ticks_to_ns(uint64_t ticks)
{
    return (uint64_t)((double)ticks * ga_ns_per_tick());
}

static uint64_t ga_level_get(ga_level_t level, int peak);
static void ga_level_raise(ga_level_t level, int64_t delta);

void ga_level_add(ga_level_t level, int64_t delta)
{
    if (level == GA_LEVEL_IN_USE && GA_UNLIKELY(ga_ctx_level_owner() != NULL))
        ga_ctx_level_share(); /* memory outside the pools: the level becomes process-wide */
    ga_level_raise(level, delta);
}

void ga_level_fold(ga_level_t level, int64_t cur, uint64_t peak)
{
    atomic_fetch_add_explicit(&ga_levels[level].cur, cur, memory_order_relaxed);
    uint64_t p = atomic_load_explicit(&ga_levels[level].peak, memory_order_relaxed);
    while (peak > p && !atomic_compare_exchange_weak_explicit(&ga_levels[level].peak, &p, peak,
                                                               memory_order_relaxed,
                                                               memory_order_relaxed))
        ;
}

/* The atomics themselves: the current value and, when it rose, its peak. */
static void ga_level_raise(ga_level_t level, int64_t delta)
{
    int64_t now = atomic_fetch_add_explicit(&ga_levels[level].cur, delta, memory_order_relaxed) + delta;
    if (delta <= 0 || now <= 0)
        return;
    uint64_t peak = atomic_load_explicit(&ga_levels[level].peak, memory_order_relaxed);
    while ((uint64_t)now > peak &&
           !atomic_compare_exchange_weak_explicit(&ga_levels[level].peak, &peak, (uint64_t)now,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

uint64_t ga_level_value(ga_level_t level, int peak)
{
    return ga_level_get(level, peak);
}

/* A context's private IN_USE figures count too (read without its lock: a figure read while the
 * context folds them may count them twice or not at all, once). */
static uint64_t ga_level_get(ga_level_t level, int peak)
{
    ga_ctx_t *own = level == GA_LEVEL_IN_USE ? ga_ctx_level_owner() : NULL;
    if (peak) {
        uint64_t p = atomic_load(&ga_levels[level].peak);
        uint64_t q = own ? atomic_load_explicit(&own->lvl_peak, memory_order_relaxed) : 0;
        return p > q ? p : q;
    }
    int64_t n = atomic_load(&ga_levels[level].cur);
    if (own)
        n += atomic_load_explicit(&own->lvl_in_use, memory_order_relaxed);
    return n > 0 ? (uint64_t)n : 0;
}

void ga_ctx_level_add(ga_ctx_t *c, int64_t delta)
{
    if (!c->lvl_own) {
        ga_level_raise(GA_LEVEL_IN_USE, delta);
    } else {
        /* Plain loads and stores: only this context's lock holder writes them. */
        int64_t now = atomic_load_explicit(&c->lvl_in_use, memory_order_relaxed) + delta;
        atomic_store_explicit(&c->lvl_in_use, now, memory_order_relaxed);
        if (now > 0 && (uint64_t)now > atomic_load_explicit(&c->lvl_peak, memory_order_relaxed))
            atomic_store_explicit(&c->lvl_peak, (uint64_t)now, memory_order_relaxed);
    }
    if (GA_UNLIKELY(c->grp))
        ga_ctx_publish(c, delta);
}

/* Calls refused for their arguments before a pool saw them (a NULL out-parameter, a size of 0,
 * a free the pool or the driver refused): counted process-wide with atomics (no context need
 * exist, any thread may call), so the statistics hold every failed call the program made and
 * agree with the shim's own warnings. Summed into the totals when the report is written. */
static ga_counts_t ga_refused;
static _Atomic int ga_stats_stale; /* ga_stats_late */

/* A forked child counts from nothing: the parent's memory is not its own. */
void ga_stats_fork_child(void)
{
    for (int i = 0; i < GA_LEVEL_COUNT; i++) {
        atomic_store(&ga_levels[i].cur, 0);
        atomic_store(&ga_levels[i].peak, 0);
    }
    memset(&ga_refused, 0, sizeof ga_refused); /* only this thread runs in the child yet */
    atomic_store(&ga_stats_stale, 0); /* a child forked at exit writes no report of its parent's */
}

void ga_count_alloc(ga_counts_t *cn, uint8_t api, uint64_t bytes, int ok, uint64_t t0)
{
    cn->alloc_calls++;
    ga_api_count_t *a = &cn->by_api[api < GA_API_COUNT ? api : 0];
    a->calls++;
    if (ga_timing)
        cn->alloc_time_ns += ga_now() - t0; /* in ticks until the report converts them */
    if (!ok) {
        cn->failed_allocs++;
        a->failed++;
        return;
    }
    a->bytes += bytes;
}

void ga_count_refused(uint8_t api, int is_alloc)
{
    ga_api_count_t *a = &ga_refused.by_api[api < GA_API_COUNT ? api : 0];
    if (is_alloc) {
        __atomic_fetch_add(&ga_refused.alloc_calls, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&ga_refused.failed_allocs, 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&a->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&a->failed, 1, __ATOMIC_RELAXED);
}

static void ga_refused_add(ga_counts_t *sum)
{
    sum->alloc_calls += __atomic_load_n(&ga_refused.alloc_calls, __ATOMIC_RELAXED);
    sum->failed_allocs += __atomic_load_n(&ga_refused.failed_allocs, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < GA_API_COUNT; i++) {
        sum->by_api[i].calls += __atomic_load_n(&ga_refused.by_api[i].calls, __ATOMIC_RELAXED);
        sum->by_api[i].failed += __atomic_load_n(&ga_refused.by_api[i].failed, __ATOMIC_RELAXED);
    }
}

void ga_count_free(ga_counts_t *cn, uint8_t api, uint64_t t0)
{
    cn->free_calls++;
    cn->by_api[api < GA_API_COUNT ? api : 0].calls++;
    if (ga_timing)
        cn->free_time_ns += ga_now() - t0;
}

static void ga_counts_add(ga_counts_t *sum, const ga_counts_t *c)
{
#define GA_SUM(name, unit, desc) sum->name += c->name;
    GA_SHIM_STATS_LIST(GA_SUM)
#undef GA_SUM
    if (c->max_fragmentation > sum->max_fragmentation)
        sum->max_fragmentation = c->max_fragmentation;
    for (unsigned i = 0; i < GA_API_COUNT; i++) {
        sum->by_api[i].calls += c->by_api[i].calls;
        sum->by_api[i].failed += c->by_api[i].failed;
        sum->by_api[i].bytes += c->by_api[i].bytes;
    }
}

void ga_stats_retire(const ga_ctx_t *c)
{
    ga_dev_t *d = ga_dev(c->dev);
    ga_mutex_lock(&d->lock);
    d->retired_n++;
    ga_counts_add(&d->retired_counts, &c->counts);
    if (c->has_final) {
#define GA_SUM(name, unit, desc) d->retired_final.name += c->final.name;
        GA_STATS_LIST(GA_SUM)
#undef GA_SUM
    }
    d->retired_late_unmaps += c->late_unmaps;
    d->retired_late_releases += c->late_releases;
    ga_mutex_unlock(&d->lock);
}

/* ---- JSON ---- */
/* A context whose lock stayed held for GA_MUTEX_EXIT_WAIT_NS at exit: its holder is this thread
 * (exit() from a signal handler that interrupted a hook) or a thread that does not come back (one
 * waiting in the driver for work that never ends). Waiting on hung the exit for ever. Its pool may
 * be half-way through a change, so it is not read: the entry shows the figures a dead context
 * kept, or none, and says so ("incomplete"); the call counts, plain integers that the stopped
 * holder is not writing, are taken as they are. -1. */
static int ga_ctx_snapshot_held(ga_ctx_t *c, ga_stats_t *s, ga_stats_t *now, ga_counts_t *cn,
                                int *alive, int *holds, uint64_t late[2])
{
    *alive = !atomic_load(&c->dead);
    late[0] = c->late_unmaps, late[1] = c->late_releases; /* plain integers, as the counts */
    if (c->has_final && !*alive)
        *s = c->final;
    else
        memset(s, 0, sizeof *s);
    *now = *s;
    memcpy(cn, &c->counts, sizeof *cn);
    *holds = 0;
    ga_log(GA_LOG_WARN, "the statistics leave out the pool of context %p (its entry in \"devices\" "
           "says \"incomplete\": true): its lock was still held after 1 s at exit, by a CUDA call "
           "that exit() interrupted from a signal handler or by a thread still waiting in the "
           "driver; call _exit() in signal handlers, or end such threads before exit()",
           (void *)c->ctx);
    return -1;
}

/* A context's figures: its pool's (live, or as they were when the context died, less the
 * program's later frees of the stream-ordered blocks an orphan pool kept: ctx.c, ga_orphan_free)
 * and its counts; *now: what its pool holds now (a live or orphan pool's own figures, else *s);
 * *holds: its pool still holds memory (alive, or a dead context's vmm pool kept for such blocks);
 * late: the pool's unmaps and releases since *s was taken (c->late_unmaps, c->late_releases). */
static int ga_ctx_snapshot(ga_ctx_t *c, ga_stats_t *s, ga_stats_t *now, ga_counts_t *cn,
                           int *alive, int *holds, uint64_t late[2])
{
    if (ga_mutex_lock_for(&c->lock, GA_MUTEX_EXIT_WAIT_NS) != 0)
        return ga_ctx_snapshot_held(c, s, now, cn, alive, holds, late);
    *alive = !atomic_load(&c->dead);
    late[0] = c->late_unmaps, late[1] = c->late_releases;
    if (c->pool)
        ga_ctx_pool_stats(c, now);
    if (c->has_final && !*alive)
        *s = c->final;
    else if (c->pool)
        *s = *now;
    else
        memset(s, 0, sizeof *s);
    if (!c->pool)
        *now = *s;
    *cn = c->counts;
    *holds = *alive || atomic_load(&c->orphan);
    ga_mutex_unlock(&c->lock);
    return 0;
}

/* One record per device for the dead contexts whose states were reused (ga_stats_retire): their
 * figures summed, as each one's entry showed them, "context": "retired" and how many; counted in
 * the totals as a destroyed context is (its pool holds nothing now). Returns the separator. */
static const char *ga_json_retired(FILE *f, ga_counts_t *counts, ga_stats_t *pool, const char *sep)
{
    for (int d = 0; d < GA_MAX_DEVICES; d++) {
        ga_dev_t *dv = ga_dev(d);
        if (!atomic_load(&dv->known) || !dv->retired_n)
            continue;
        uint64_t n;
        ga_counts_t cn;
        ga_stats_t s;
        if (ga_mutex_lock_for(&dv->lock, GA_MUTEX_EXIT_WAIT_NS) != 0)
            continue; /* held by a call that cannot end: left out, as its counts are not read */
        n = dv->retired_n;
        cn = dv->retired_counts;
        s = dv->retired_final;
        pool->backend_unmaps += dv->retired_late_unmaps; /* the totals', as for a dead context */
        pool->backend_releases += dv->retired_late_releases;
        ga_mutex_unlock(&dv->lock);
        ga_counts_add(counts, &cn);
        uint64_t largest = pool->largest_free, free_sum = pool->total_free;
#define GA_SUM(name, unit, desc) pool->name += s.name;
        GA_STATS_LIST(GA_SUM)
#undef GA_SUM
        pool->in_use_requested -= s.in_use_requested;
        pool->regions -= s.regions;
        pool->live -= s.live;
        pool->va_reserved -= s.va_reserved;
        pool->kept -= s.kept;
        pool->largest_free = largest;
        pool->total_free = free_sum;
        s.failed_allocs = cn.failed_allocs;
        s.frag_failures = cn.frag_failures;
        fprintf(f, "%s\n    {\"device\": %d, \"context\": \"retired\", \"contexts\": %llu, "
                "\"cap\": %llu, \"alive\": false, \"mode\": \"%s\"", sep, d,
                (unsigned long long)n, (unsigned long long)dv->cap, ga_mode_name(ga_opt.mode));
#define GA_JSON_FIELD(name, unit, desc) fprintf(f, ", \"%s\": %llu", #name, (unsigned long long)s.name);
        GA_STATS_LIST(GA_JSON_FIELD)
#undef GA_JSON_FIELD
        fprintf(f, ", \"fragmentation\": %.6f}", ga_fragmentation(&s));
        sep = ",";
    }
    return sep;
}

/* "devices": one record per context (device, context, cap, mode, its pool's figures); the counts
 * and pool figures are summed into *counts and *pool for the totals (free bytes: live pools only,
 * largest_free the largest), and *worst is the highest fragmentation of a live pool: each pool
 * serves its own context, so a free block of one cannot serve another, and one over the sum of
 * all pools' free bytes made N unfragmented pools read 1 - 1/N (helper-49 F4). */
static void ga_json_devices(FILE *f, ga_counts_t *counts, ga_stats_t *pool, double *worst)
{
    const char *sep = "";
    fprintf(f, "  \"devices\": [");
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        ga_stats_t s, now;
        ga_counts_t cn;
        int alive, holds;
        uint64_t late[2];
        int held = ga_ctx_snapshot(c, &s, &now, &cn, &alive, &holds, late) != 0;
        ga_counts_add(counts, &cn);
        uint64_t largest = pool->largest_free, free_sum = pool->total_free;
#define GA_SUM(name, unit, desc) pool->name += s.name;
        GA_STATS_LIST(GA_SUM)
#undef GA_SUM
        /* The unmaps and releases of a dead context's pool after its entry's figures (its
         * destroy's, an orphan's): real driver calls, in the totals (4 of the driver's 19 unmaps
         * were: helper-68 F9); the entry stays the pool as at teardown. */
        pool->backend_unmaps += late[0];
        pool->backend_releases += late[1];
        if (!holds) {
            /* What a pool holds now: a destroyed context holds nothing (its entry below still
             * shows the pool as it was at teardown); counts and peaks stay summed. */
            pool->in_use_requested -= s.in_use_requested;
            pool->regions -= s.regions;
            pool->live -= s.live;
            pool->va_reserved -= s.va_reserved;
            pool->kept -= s.kept;
        } else if (!alive) {
            /* An orphan pool: the totals count what it holds now, its entry the teardown's. */
            pool->in_use_requested += now.in_use_requested - s.in_use_requested;
            pool->regions += now.regions - s.regions;
            pool->live += now.live - s.live;
            pool->va_reserved += now.va_reserved - s.va_reserved;
            pool->kept += now.kept - s.kept;
        }
        pool->largest_free = alive && s.largest_free > largest ? s.largest_free : largest;
        pool->total_free = free_sum + (alive ? s.total_free : 0);
        if (alive && ga_fragmentation(&s) > *worst)
            *worst = ga_fragmentation(&s);
        /* Failures are the context's failed calls, as in totals: the pool counts each of its
         * attempts, and one call that fails tries it again after waiting for pending frees and
         * after the trim (alloc.c), so its own figures said 2 for one failed cuMemAlloc. */
        s.failed_allocs = cn.failed_allocs;
        s.frag_failures = cn.frag_failures;
        fprintf(f, "%s\n    {\"device\": %d, \"context\": \"%p\", \"cap\": %llu, \"alive\": %s, "
                "\"mode\": \"%s\"", sep, c->dev, (void *)c->ctx,
                (unsigned long long)ga_dev(c->dev)->cap, alive ? "true" : "false",
                ga_mode_name(ga_opt.mode));
#define GA_JSON_FIELD(name, unit, desc) fprintf(f, ", \"%s\": %llu", #name, (unsigned long long)s.name);
        GA_STATS_LIST(GA_JSON_FIELD)
#undef GA_JSON_FIELD
        fprintf(f, ", \"fragmentation\": %.6f%s}", ga_fragmentation(&s),
                held ? ", \"incomplete\": true" : "");
        sep = ",";
    }
    sep = ga_json_retired(f, counts, pool, sep);
    fprintf(f, "]\n");
    for (int d = 0; d < GA_MAX_DEVICES; d++) { /* the program's cuMemCreate handles */
        ga_dev_t *dv = ga_dev(d);
        if (!atomic_load(&dv->known))
            continue;
        ga_counts_t dc;
        if (ga_mutex_lock_for(&dv->lock, GA_MUTEX_EXIT_WAIT_NS) == 0) {
            dc = dv->counts;
            ga_mutex_unlock(&dv->lock);
        } else { /* held by a call that cannot end (as ga_ctx_snapshot_held): counts as they are */
            memcpy(&dc, &dv->counts, sizeof dc);
        }
        ga_counts_add(counts, &dc);
    }
}

static void ga_json_by_api(FILE *f, const ga_counts_t *cn)
{
    const char *sep = "";
    fprintf(f, "  \"by_api\": {");
    for (unsigned i = 0; i < GA_API_COUNT; i++) {
        const ga_api_count_t *a = &cn->by_api[i];
        if (!a->calls)
            continue;
        fprintf(f, "%s\"%s\": {\"calls\": %llu, \"failed\": %llu, \"bytes\": %llu}", sep,
                ga_api_name(i), (unsigned long long)a->calls, (unsigned long long)a->failed,
                (unsigned long long)a->bytes);
        sep = ", ";
    }
    fprintf(f, "},\n");
}

/* The pool figures "totals" takes from elsewhere: the process levels (peaks of the sum) and the
 * shim's own counts of the same name (failures as the hooks saw them, pass-through included). */
static int ga_is_level_key(const char *name)
{
    return !strcmp(name, "in_use") || !strcmp(name, "peak_in_use") || !strcmp(name, "reserved") ||
           !strcmp(name, "peak_reserved");
}

static int ga_is_shim_key(const char *name)
{
#define GA_SHIM_NAME(n, unit, desc) if (!strcmp(name, #n)) return 1;
    GA_SHIM_STATS_LIST(GA_SHIM_NAME)
#undef GA_SHIM_NAME
    return 0;
}

/* What every key outside "totals" means ("about" explains those), one list per object, written as
 * "about_keys" so that the file explains each of its keys (wall_ns and the device entries' keys
 * were explained nowhere: an outside check, 2026-12-06). X(key, description); a test checks every
 * key written has one. No character JSON would escape. */
#define GA_DOC_KEYS(X)                                                                          \
    X(gpuarena_stats, "the format of this file: 2")                                               \
    X(version, "the version of gpuarena that wrote it")                                           \
    X(pid, "the process that wrote it")                                                          \
    X(mode, "the allocation mode, GPUARENA_MODE")                                                \
    X(options, "the settings in force, each key in about_keys.options")                          \
    X(wall_ns, "nanoseconds from the shim's start to this report")                               \
    X(totals, "the process's figures, summed over its contexts: what each counts in about, its unit in units") \
    X(units, "the unit of each totals key: count, bytes, ns or ratio")                           \
    X(about, "what each totals key counts")                                                      \
    X(about_keys, "what every other key means: the document's, options', and each by_api and devices entry's") \
    X(by_api, "calls by the CUDA entry point that made them, allocations and frees, each entry's keys in about_keys.by_api") \
    X(devices, "one entry per context, and one per device for its destroyed contexts together, each entry's keys in about_keys.devices")
#define GA_DEVICE_KEYS(X)                                                                       \
    X(device, "the CUDA device ordinal")                                                         \
    X(context, "the context's handle, or retired: the device's destroyed contexts together")    \
    X(contexts, "retired entries: how many destroyed contexts the entry sums")                   \
    X(cap, "bytes the process may hold on the device: GPUARENA_LIMIT, a device plugin's limit or the device's memory") \
    X(alive, "whether the context still exists; a destroyed one's figures are its pool's at teardown") \
    X(mode, "the allocation mode of the context's pool")                                         \
    X(fragmentation, "1 - largest free block / free bytes of this pool, a ratio")                \
    X(incomplete, "present when a call that cannot end held the context's lock at exit: its figures as they were")
#define GA_BY_API_KEYS(X)                                                                       \
    X(calls, "calls of this entry point")                                                        \
    X(failed, "of those, the ones that failed")                                                  \
    X(bytes, "bytes of its successful allocations")

static const char *ga_shim_desc(const char *name)
{
#define GA_SHIM_DESC(n, unit, desc) if (!strcmp(name, #n)) return desc;
    GA_SHIM_STATS_LIST(GA_SHIM_DESC)
#undef GA_SHIM_DESC
    return "";
}

static void ga_json_about_keys(FILE *f)
{
    const char *sep = "";
#define GA_ABOUT_KEY(key, desc) fprintf(f, "%s\"%s\": \"%s\"", sep, #key, desc), sep = ", ";
    fprintf(f, "  \"about_keys\": {\"document\": {");
    GA_DOC_KEYS(GA_ABOUT_KEY)
    fprintf(f, "},\n    \"options\": ");
    ga_options_json_about(f);
    fprintf(f, ",\n    \"by_api\": {");
    sep = "";
    GA_BY_API_KEYS(GA_ABOUT_KEY)
    fprintf(f, "},\n    \"devices\": {");
    sep = "";
    GA_DEVICE_KEYS(GA_ABOUT_KEY)
#undef GA_ABOUT_KEY
    /* the pool's figures; the failures are the context's calls, as in totals (ga_json_devices) */
#define GA_ABOUT_POOL(name, unit, desc)                                                         \
    fprintf(f, ", \"%s\": \"%s (unit: %s)\"", #name,                                        \
            ga_is_shim_key(#name) ? ga_shim_desc(#name) : desc, #unit);
    GA_STATS_LIST(GA_ABOUT_POOL)
#undef GA_ABOUT_POOL
    fprintf(f, "}},\n");
}

/* The report, format 2: "totals" holds the shim's figures (GA_SHIM_STATS_LIST), the process
 * levels and their peaks (GA_LEVEL_LIST) and the pools' figures (GA_STATS_LIST) summed over
 * contexts; "units" names the unit of every totals key, so a reader needs no copy of the lists. */
static void ga_json_write(FILE *f)
{
    double npt = ga_ns_per_tick();
    uint64_t wall = ga_mono_ns() - ga_start_ns;
    fprintf(f, "{\"gpuarena_stats\": 2, \"version\": \"%s\", \"pid\": %d, \"mode\": \"%s\", "
            "\"options\": ", GA_VERSION, (int)getpid(), ga_mode_name(ga_opt.mode));
    ga_options_json(f, atomic_load(&ga_dev(0)->known) ? ga_dev(0)->cap : 0);
    fprintf(f, ", \"wall_ns\": %llu,\n", (unsigned long long)wall);
    /* Devices first into a scratch stream, since totals need their sums. */
    char *dev_buf = NULL;
    size_t dev_len = 0;
    ga_stats_t pool;
    ga_counts_t cn;
    double frag = 0;
    memset(&pool, 0, sizeof pool);
    memset(&cn, 0, sizeof cn);
    FILE *df = open_memstream(&dev_buf, &dev_len);
    if (df) {
        ga_json_devices(df, &cn, &pool, &frag);
        fclose(df);
    }
    ga_refused_add(&cn);
    cn.alloc_time_ns = (uint64_t)((double)cn.alloc_time_ns * npt);
    cn.free_time_ns = (uint64_t)((double)cn.free_time_ns * npt);
    const char *sep = "";
    fprintf(f, "  \"totals\": {");
#define GA_JSON_SHIM(name, unit, desc)                                                          \
    fprintf(f, "%s\"%s\": %llu", sep, #name, (unsigned long long)cn.name), sep = ", ";
    GA_SHIM_STATS_LIST(GA_JSON_SHIM)
#undef GA_JSON_SHIM
#define GA_JSON_LEVEL(sym, name, desc)                                                          \
    fprintf(f, ", \"%s\": %llu, \"peak_%s\": %llu", #name,                                     \
            (unsigned long long)ga_level_get(GA_LEVEL_##sym, 0), #name,                          \
            (unsigned long long)ga_level_get(GA_LEVEL_##sym, 1));
    GA_LEVEL_LIST(GA_JSON_LEVEL)
#undef GA_JSON_LEVEL
#define GA_JSON_POOL(name, unit, desc)                                                          \
    if (!ga_is_level_key(#name) && !ga_is_shim_key(#name))                                      \
        fprintf(f, ", \"%s\": %llu", #name, (unsigned long long)pool.name);
    GA_STATS_LIST(GA_JSON_POOL)
#undef GA_JSON_POOL
    /* The worst is sampled at each cuMemFree; frees the fence returns later (deferred) were not,
     * and the figure now can be the worst (it was above its "maximum"). */
    fprintf(f, ", \"fragmentation\": %.6f, \"max_fragmentation\": %.6f},\n", frag,
            frag > cn.max_fragmentation ? frag : cn.max_fragmentation);
    fprintf(f, "  \"units\": {");
    sep = "";
#define GA_JSON_UNIT(name, unit, desc) fprintf(f, "%s\"%s\": \"%s\"", sep, #name, #unit), sep = ", ";
    GA_SHIM_STATS_LIST(GA_JSON_UNIT)
#undef GA_JSON_UNIT
#define GA_JSON_UNIT(name, unit, desc)                                                          \
    if (!ga_is_shim_key(#name))                                                                 \
        fprintf(f, ", \"%s\": \"%s\"", #name, #unit);
    GA_STATS_LIST(GA_JSON_UNIT)
#undef GA_JSON_UNIT
#define GA_JSON_LEVEL_UNIT(sym, name, desc)                                                     \
    if (!ga_is_level_key(#name))                                                                \
        fprintf(f, ", \"%s\": \"bytes\", \"peak_%s\": \"bytes\"", #name, #name);
    GA_LEVEL_LIST(GA_JSON_LEVEL_UNIT)
#undef GA_JSON_LEVEL_UNIT
    fprintf(f, ", \"fragmentation\": \"ratio\", \"max_fragmentation\": \"ratio\"},\n");
    /* What each totals key counts, from the same lists: a reader of the file finds every meaning
     * in it (they were in shim.h and ga_arena.h alone: an outside check, 2026-12-06). The
     * descriptions hold no character JSON would escape. */
    fprintf(f, "  \"about\": {");
    sep = "";
#define GA_JSON_ABOUT(name, unit, desc) fprintf(f, "%s\"%s\": \"%s\"", sep, #name, desc), sep = ", ";
    GA_SHIM_STATS_LIST(GA_JSON_ABOUT)
#undef GA_JSON_ABOUT
#define GA_JSON_ABOUT(sym, name, desc)                                                          \
    if (!ga_is_shim_key(#name))                                                                 \
        fprintf(f, ", \"%s\": \"%s\", \"peak_%s\": \"the highest %s\"", #name, desc, #name, desc);
    GA_LEVEL_LIST(GA_JSON_ABOUT)
#undef GA_JSON_ABOUT
#define GA_JSON_ABOUT(name, unit, desc)                                                         \
    if (!ga_is_shim_key(#name) && !ga_is_level_key(#name))                                      \
        fprintf(f, ", \"%s\": \"%s\"", #name, desc);
    GA_STATS_LIST(GA_JSON_ABOUT)
#undef GA_JSON_ABOUT
    fprintf(f, ", \"fragmentation\": \"1 - largest free block / free bytes at the end, of the "
               "worst pool\", \"max_fragmentation\": \"the worst fragmentation seen at any free "
               "and at the end\"},\n");
    ga_json_about_keys(f);
    ga_json_by_api(f, &cn);
    fputs(dev_buf ? dev_buf : "  \"devices\": []\n", f);
    fputs("}\n", f);
    free(dev_buf);
}

/* Whether the process made any allocation or free call the report counts (served, passed on or
 * refused, in any context, a retired one's, the program's cuMemCreate handles): the report is
 * written only then. A context alone is no use of memory: a launcher that asked cuMemGetInfo (or
 * a forked child that did, in the context it inherited) wrote a report of zeros at its exit,
 * over the report of the job it had started and waited for (an outside check, helper-124). */
static int ga_counts_any(const ga_counts_t *c)
{
    uint64_t n = c->alloc_calls + c->free_calls;
    for (unsigned i = 0; i < GA_API_COUNT; i++)
        n += c->by_api[i].calls;
    return n != 0;
}

int ga_stats_any_call(void)
{
    /* ga_refused is counted with atomics by any thread (ga_count_refused): read the same way. */
    if (__atomic_load_n(&ga_refused.alloc_calls, __ATOMIC_RELAXED))
        return 1;
    for (unsigned i = 0; i < GA_API_COUNT; i++)
        if (__atomic_load_n(&ga_refused.by_api[i].calls, __ATOMIC_RELAXED))
            return 1;
    for (ga_ctx_t *c = ga_ctx_first(); c; c = ga_ctx_next(c)) {
        if (ga_mutex_lock_for(&c->lock, GA_MUTEX_EXIT_WAIT_NS) != 0)
            return 1; /* a call holds it: the report says so (ga_ctx_snapshot_held) */
        int any = ga_counts_any(&c->counts);
        ga_mutex_unlock(&c->lock);
        if (any)
            return 1;
    }
    for (int d = 0; d < GA_MAX_DEVICES; d++) {
        ga_dev_t *dv = ga_dev(d);
        if (!atomic_load(&dv->known))
            continue;
        if (ga_mutex_lock_for(&dv->lock, GA_MUTEX_EXIT_WAIT_NS) != 0)
            return 1;
        int any = ga_counts_any(&dv->counts) || ga_counts_any(&dv->retired_counts);
        ga_mutex_unlock(&dv->lock);
        if (any)
            return 1;
    }
    return 0;
}

/* shim/outfile.c decides where and how (%p, atomic for regular files, write-through for devices
 * and FIFOs, never over the trace). */
void ga_stats_write(void)
{
    /* Pass-through memory freed with cuMemFreeAsync whose stream has passed the free is the
     * driver's again: not reported as held (helper-42 F9: after the program's own
     * cuStreamSynchronize the report said 8 MiB reserved where the driver held none). */
    ga_pass_passed_at_exit();
    ga_outfile_write("GPUARENA_STATS", ga_opt.stats, ga_json_write);
}

/* A call after the report was written at exit: a library destructor that _dl_fini runs after the
 * shim's (they are run in load order, the preloaded shim early) frees what the program held, and
 * the report said it still held it. Such a call only marks the report stale (a rewrite per call
 * cost 0.2 ms each: 2 s for a destructor freeing 10,000 blocks); it is written again, once, from
 * exit's flush of the stdio streams, which comes after every destructor: a stream of the shim's
 * own, holding one byte, is flushed there (ga_stats_arm_final). */

void ga_stats_late(void)
{
    atomic_store_explicit(&ga_stats_stale, 1, memory_order_relaxed);
}

static ssize_t ga_stats_final(void *cookie, const char *buf, size_t n)
{
    (void)cookie, (void)buf;
    if (atomic_exchange(&ga_stats_stale, 0)) {
        ga_tl_busy++;
        ga_stats_write();
        ga_tl_busy--;
    }
    return (ssize_t)n;
}

void ga_stats_arm_final(void)
{
    cookie_io_functions_t io = {.write = ga_stats_final};
    FILE *f = fopencookie(NULL, "w", io);
    if (f)
        fputc(0, f); /* buffered, and never closed: exit's stdio flush hands it to ga_stats_final */
}
