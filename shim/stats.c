/* gpuarena statistics: the process-wide counters and the JSON report written at exit.
 *
 * Counters live in ga_g under one lock, which the hooks already take for the pointer table, so
 * counting adds no lock of its own. Peaks in "totals" are peaks of the process-wide sums, updated
 * at each change (not sums of per-context peaks). The hooks are timed only when a report or a
 * trace was asked for; on x86-64 the clock is the TSC (a few ns), converted to ns with a ratio
 * measured between start and exit against CLOCK_MONOTONIC, elsewhere CLOCK_MONOTONIC itself.
 * The report follows the contract in DESIGN.md ("gpuarena_stats": 1) and is written by
 * shim/outfile.c (a regular file atomically, so `gpuarena run` never reads half a file).
 * totals.frag_failures and totals.true_oom_failures split the out-of-memory failures of the
 * cuMemAlloc family as the shim sees them (oom.c: free bytes in the arena plus what it may still
 * reserve under its limit, the cap and the driver); devices[].frag_failures is the allocator's own
 * count (free bytes inside held regions only), so it can be lower. failed_allocs counts every
 * failed allocation call of any kind.
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

ga_global_t ga_g = {.lock = PTHREAD_MUTEX_INITIALIZER};
uint64_t ga_alloc_time, ga_free_time; /* in ga_now() ticks, under ga_g.lock */
int ga_timing;

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

void ga_count_alloc(uint8_t api, uint64_t bytes, uint64_t rounded, int ok)
{
    ga_g.alloc_calls++;
    ga_api_count_t *a = &ga_g.by_api[api < GA_API_COUNT ? api : 0];
    a->calls++;
    if (!ok) {
        ga_g.failed_allocs++;
        a->failed++;
        return;
    }
    a->bytes += bytes;
    ga_g.in_use += rounded;
    if (ga_g.in_use > ga_g.peak_in_use)
        ga_g.peak_in_use = ga_g.in_use;
}

void ga_count_free(uint8_t api, uint64_t rounded)
{
    ga_g.free_calls++;
    ga_g.by_api[api < GA_API_COUNT ? api : 0].calls++;
    ga_g.in_use -= rounded < ga_g.in_use ? rounded : ga_g.in_use;
}

void ga_count_reserve(int64_t delta, int driver_call)
{
    (void)driver_call;
    ga_g.reserved += (uint64_t)delta;
    if (ga_g.reserved > ga_g.peak_reserved)
        ga_g.peak_reserved = ga_g.reserved;
}

void ga_count_passthrough(int64_t delta)
{
    ga_g.passthrough += (uint64_t)delta;
    if (ga_g.passthrough > ga_g.peak_passthrough)
        ga_g.peak_passthrough = ga_g.passthrough;
}

/* ---- JSON ---- */
static void ga_json_stats(FILE *f, const ga_stats_t *s)
{
#define GA_JSON_FIELD(name, unit, desc) fprintf(f, ", \"%s\": %llu", #name, (unsigned long long)s->name);
    GA_STATS_LIST(GA_JSON_FIELD)
#undef GA_JSON_FIELD
    fprintf(f, ", \"fragmentation\": %.6f", ga_fragmentation(s));
}

/* A context's statistics: its live arena, the snapshot taken when it died, or platform counts. */
static void ga_ctx_stats(ga_ctx_t *c, ga_stats_t *s)
{
    pthread_mutex_lock(&c->lock);
    if (c->arena)
        ga_get_stats(c->arena, s);
    else if (c->has_final)
        *s = c->final;
    else
        *s = c->plat;
    pthread_mutex_unlock(&c->lock);
}

static void ga_json_devices(FILE *f, ga_stats_t *sum)
{
    const char *sep = "";
    fprintf(f, "  \"devices\": [");
    for (ga_ctx_t *c = atomic_load(&ga_ctx_list); c; c = atomic_load(&c->next)) {
        ga_stats_t s;
        ga_ctx_stats(c, &s);
        if (ga_ctx_peek(c)) {
            sum->largest_free = s.largest_free > sum->largest_free ? s.largest_free : sum->largest_free;
            sum->total_free += s.total_free;
        }
        fprintf(f, "%s\n    {\"device\": %d, \"context\": \"%p\", \"cap\": %llu, \"alive\": %s", sep,
                c->dev, (void *)c->ctx, (unsigned long long)ga_devs[c->dev].cap,
                atomic_load(&c->dead) ? "false" : "true");
        ga_json_stats(f, &s);
        fputc('}', f);
        sep = ",";
    }
    fprintf(f, "]\n");
}

static void ga_json_by_api(FILE *f)
{
    const char *sep = "";
    fprintf(f, "  \"by_api\": {");
    for (unsigned i = 0; i < GA_API_COUNT; i++) {
        const ga_api_count_t *a = &ga_g.by_api[i];
        if (!a->calls)
            continue;
        fprintf(f, "%s\"%s\": {\"calls\": %llu, \"failed\": %llu, \"bytes\": %llu}", sep,
                ga_api_name(i), (unsigned long long)a->calls, (unsigned long long)a->failed,
                (unsigned long long)a->bytes);
        sep = ", ";
    }
    fprintf(f, "},\n");
}

static void ga_json_limit(FILE *f)
{
    if (ga_opt.limit_bytes)
        fprintf(f, "%llu", (unsigned long long)ga_opt.limit_bytes);
    else if (ga_opt.limit_percent > 0 && ga_devs[0].known)
        fprintf(f, "%llu", (unsigned long long)ga_devs[0].cap);
    else
        fprintf(f, "null");
}

static void ga_json_write(FILE *f)
{
    double npt = ga_ns_per_tick();
    uint64_t wall = ga_mono_ns() - ga_start_ns;
    fprintf(f, "{\"gpuarena_stats\": 1, \"pid\": %d, \"mode\": \"%s\", \"preallocate\": %s,"
            " \"fraction\": %g, \"fraction_grow\": %s, \"limit\": ",
            (int)getpid(), ga_opt.mode == GA_MODE_ARENA ? "arena" : "platform",
            ga_opt.preallocate ? "true" : "false", ga_opt.fraction,
            ga_opt.fraction_grow ? "true" : "false");
    ga_json_limit(f);
    fprintf(f, ", \"wall_ns\": %llu,\n", (unsigned long long)wall);
    /* Devices first into a scratch stream, since totals need their sums. */
    char *dev_buf = NULL;
    size_t dev_len = 0;
    ga_stats_t sum;
    memset(&sum, 0, sizeof sum);
    FILE *df = open_memstream(&dev_buf, &dev_len);
    if (df) {
        ga_json_devices(df, &sum);
        fclose(df);
    }
    pthread_mutex_lock(&ga_g.lock);
    fprintf(f, "  \"totals\": {\"alloc_calls\": %llu, \"free_calls\": %llu, \"failed_allocs\": %llu,"
            " \"frag_failures\": %llu, \"true_oom_failures\": %llu,"
            " \"driver_alloc_calls\": %llu, \"driver_free_calls\": %llu,"
            " \"alloc_time_ns\": %llu, \"free_time_ns\": %llu, \"in_use\": %llu,"
            " \"peak_in_use\": %llu, \"reserved\": %llu, \"peak_reserved\": %llu,"
            " \"largest_free\": %llu, \"total_free\": %llu, \"fragmentation\": %.6f,"
            " \"max_fragmentation\": %.6f, \"passthrough_bytes\": %llu,"
            " \"peak_passthrough_bytes\": %llu},\n",
            (unsigned long long)ga_g.alloc_calls, (unsigned long long)ga_g.free_calls,
            (unsigned long long)ga_g.failed_allocs, (unsigned long long)ga_g.frag_failures,
            (unsigned long long)ga_g.true_oom_failures,
            (unsigned long long)ga_g.driver_alloc_calls, (unsigned long long)ga_g.driver_free_calls,
            (unsigned long long)((double)ga_alloc_time * npt),
            (unsigned long long)((double)ga_free_time * npt), (unsigned long long)ga_g.in_use,
            (unsigned long long)ga_g.peak_in_use, (unsigned long long)ga_g.reserved,
            (unsigned long long)ga_g.peak_reserved, (unsigned long long)sum.largest_free,
            (unsigned long long)sum.total_free, ga_fragmentation(&sum), ga_g.max_fragmentation,
            (unsigned long long)ga_g.passthrough, (unsigned long long)ga_g.peak_passthrough);
    ga_json_by_api(f);
    pthread_mutex_unlock(&ga_g.lock);
    fputs(dev_buf ? dev_buf : "  \"devices\": []\n", f);
    fputs("}\n", f);
    free(dev_buf);
}

/* shim/outfile.c decides where and how (%p, atomic for regular files, write-through for devices
 * and FIFOs, never over the trace). */
void ga_stats_write(void)
{
    ga_outfile_write("GPUARENA_STATS", ga_opt.stats, ga_json_write);
}
