/* Unit tests for trace replay (allocator/replay.c).
 *
 * Every real lifetime trace is replayed in every mode with the arena's invariant checker after each
 * event, and the peaks are compared with a sweep over the CSV intervals that this file computes by
 * itself. Small hand-built traces cover the edge cases real traces have (frees of addresses never
 * allocated, addresses reused without a free, failed allocs recorded in the trace), and the
 * smallest-size bisection is checked from outside: its answer runs, one granule less does not.
 * The timeline hook is checked against the replay's own figures and against hand-computed values.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ga_replay.h"

void ga_test_each_lifetime_file(void (*fn)(const char *path)); /* test_trace.c */

typedef struct sweep_ev {
    unsigned long long time;
    long long delta; /* bytes: + at lower, - at upper */
} sweep_ev_t;

static int cmp_sweep(const void *a, const void *b)
{
    const sweep_ev_t *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return (x->delta > 0) - (y->delta > 0); /* frees first at equal times */
}

/* Peak of live bytes over the intervals of a lifetimes CSV, each size rounded to `align`. */
static unsigned long long sweep_peak(const char *path, unsigned long long align, size_t *rows)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[512];
    size_t n = 0, cap = 1024;
    sweep_ev_t *ev = malloc(cap * sizeof *ev);
    ck_assert_msg(fgets(line, sizeof line, f) != NULL, "%s: no header", path);
    unsigned long long id, lo, hi, sz;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%llu,%llu,%llu,%llu", &id, &lo, &hi, &sz) != 4)
            continue;
        if (n + 2 > cap)
            ev = realloc(ev, (cap *= 2) * sizeof *ev);
        long long r = (long long)((sz + align - 1) / align * align);
        ev[n++] = (sweep_ev_t){lo, r};
        ev[n++] = (sweep_ev_t){hi, -r};
    }
    fclose(f);
    qsort(ev, n, sizeof *ev, cmp_sweep);
    long long cur = 0, peak = 0;
    for (size_t i = 0; i < n; i++) {
        cur += ev[i].delta;
        if (cur > peak)
            peak = cur;
    }
    free(ev);
    *rows = n / 2;
    return (unsigned long long)peak;
}

static void load(const char *path, ga_trace_t *t)
{
    char err[512];
    ck_assert_msg(ga_lifetimes_read(path, t, err, sizeof err) == 0, "%s", err);
}

/* A shared trace by its path under GA_TRACES_DIR (../shared/traces). */
static void load_shared(const char *rel, ga_trace_t *t)
{
    const char *dir = getenv("GA_TRACES_DIR");
    ck_assert_msg(dir && *dir, "GA_TRACES_DIR is not set: point it at shared/traces");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    load(path, t);
}

static void replay_ok(const ga_trace_t *t, const ga_replay_opts_t *o, ga_replay_result_t *r)
{
    char err[256];
    ck_assert_msg(ga_replay(t, o, r, err, sizeof err) == 0, "replay failed: %s", err);
}

static void check_one_file(const char *path)
{
    size_t rows;
    unsigned long long peak = sweep_peak(path, 512, &rows);
    unsigned long long peak_req = sweep_peak(path, 1, &rows);
    ga_trace_t t;
    load(path, &t);
    for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_PLATFORM; m++) {
        /* ga_check walks structures proportional to the region (about 15 GB for bert_base), so
         * the largest trace is checked every 32nd event and at the end; the others every event. */
        ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m, .check = t.count > 5000 ? 32 : 1};
        if (m == GA_REPLAY_ARENA || m == GA_REPLAY_VMM) /* vmm: the virtual range */
            o.arena_size = (size_t)peak * 4;
        ga_replay_result_t r;
        replay_ok(&t, &o, &r);
        const char *mn = ga_replay_mode_name(o.mode);
        ck_assert_msg(r.check_failures == 0, "%s %s: ga_check failed after event %zu: %s", path,
                      mn, r.first_check_fail, r.check_report);
        ck_assert_msg(r.failed_allocs == 0, "%s %s: OOM at event %zu", path, mn, r.first_oom);
        ck_assert_uint_eq(r.events, 2 * rows);
        ck_assert_uint_eq(r.allocs, rows);
        ck_assert_uint_eq(r.frees, rows);
        ck_assert_uint_eq(r.unmatched_frees, 0);
        ck_assert_uint_eq(r.reused_addrs, 0);
        ck_assert_msg(r.peak_in_use == peak, "%s %s: peak in use %llu, sweep says %llu", path,
                      mn, (unsigned long long)r.peak_in_use, peak);
        ck_assert_uint_eq(r.peak_requested, peak_req);
        ck_assert_msg(r.peak_reserved >= r.peak_in_use, "%s %s: reserved below in use", path, mn);
        /* The backend calls are the trace's own, the replay's teardown not counted: what was
         * reserved and not released is what the pool still holds at the end. */
        if (m == GA_REPLAY_ARENA) {
            ck_assert_uint_eq(r.backend_reserves, 1);
            ck_assert_uint_eq(r.backend_releases, 0);
            ck_assert_uint_eq(r.peak_reserved, o.arena_size);
            ck_assert_uint_eq(r.final_reserved, o.arena_size);
        }
        if (m == GA_REPLAY_PLATFORM) {
            ck_assert_uint_eq(r.backend_reserves, rows);
            ck_assert_uint_eq(r.backend_releases, rows);
            ck_assert_uint_eq(r.peak_reserved, peak);
        }
        if (m == GA_REPLAY_VMM) { /* granules mapped where allocations lie, all given back */
            ck_assert_uint_eq(r.backend_reserves, 1);
            ck_assert_uint_eq(r.backend_releases, 0);
            ck_assert_uint_gt(r.backend_maps, 0);
            ck_assert_uint_eq((r.backend_maps - r.backend_unmaps) * GA_REPLAY_GRANULARITY,
                              r.final_reserved);
        }
        ck_assert_uint_le(r.backend_releases, r.backend_reserves);
    }
    ga_trace_free(&t);
}

START_TEST(replay_every_lifetimes_trace_checked)
{
    ga_test_each_lifetime_file(check_one_file);
}
END_TEST

static int fails_at(const ga_trace_t *t, ga_replay_opts_t o, size_t size)
{
    if (o.mode == GA_REPLAY_ARENA)
        o.arena_size = size;
    else
        o.limit = size;
    ga_replay_result_t r;
    replay_ok(t, &o, &r);
    return r.failed_allocs > 0;
}

static void check_min_size(const char *path)
{
    size_t rows;
    unsigned long long peak = sweep_peak(path, 512, &rows);
    ga_trace_t t;
    load(path, &t);
    char err[256];
    for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_PLATFORM; m++) {
        ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m};
        size_t s = 0;
        ck_assert_msg(ga_replay_min_size(&t, &o, 0, &s, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(s % 512 == 0 && s >= peak, "%s %s: min %zu, peak %llu", path,
                      ga_replay_mode_name(o.mode), s, peak);
        if (m == GA_REPLAY_PLATFORM) {
            ck_assert_uint_eq(s, peak);
            ck_assert_msg(fails_at(&t, o, s - 512), "platform limit under the peak must fail");
            continue;
        }
        ck_assert_msg(!fails_at(&t, o, s), "%s %s: min size %zu fails", path,
                      ga_replay_mode_name(o.mode), s);
        ck_assert_msg(fails_at(&t, o, s - 512), "%s %s: %zu - 512 still runs", path,
                      ga_replay_mode_name(o.mode), s);
        /* A coarser granularity gives a multiple of it that still runs. */
        size_t g = 64 * 1024, sg = 0;
        ck_assert_msg(ga_replay_min_size(&t, &o, g, &sg, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(sg % g == 0 && !fails_at(&t, o, sg), "granular min %zu", sg);
    }
    ga_trace_free(&t);
}

START_TEST(min_size_bisection)
{
    ga_test_each_lifetime_file(check_min_size);
}
END_TEST

/* Success is not monotone in the region size: on minimalloc_K the arena's bisection stopped at
 * 2,242,560 bytes, and 1,911,808 runs the trace. The answer is now the smallest: every size from
 * the live peak up to it fails (checked here one by one), and it runs. */
START_TEST(min_size_is_the_smallest)
{
    ga_trace_t t;
    load_shared("lifetimes/minimalloc_K.csv", &t);
    char err[256];
    for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_GROW; m++) {
        ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m};
        size_t s = 0;
        ck_assert_msg(ga_replay_min_size(&t, &o, 0, &s, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(!fails_at(&t, o, s), "%s: min %zu fails", ga_replay_mode_name(o.mode), s);
        ck_assert_uint_lt(s, 2242560);
        for (size_t x = 1048576; x < s; x += 512)
            ck_assert_msg(fails_at(&t, o, x), "%s: %zu runs the trace, below the min %zu",
                          ga_replay_mode_name(o.mode), x, s);
    }
    ga_trace_free(&t);
}
END_TEST

/* vmm over a range of fixed size (what gpuarena-replay gives): the limit decides no placement, so
 * the smallest limit is the unlimited replay's peak of mapped bytes, rounded up to 512 (replay.c,
 * vmm_from_peak), and every limit from the live peak up to it fails; with 64 KiB granules, kept
 * granules or none, and 2 MiB ones. */
START_TEST(min_size_vmm_is_the_unlimited_peak)
{
    ga_trace_t t;
    load_shared("lifetimes/minimalloc_K.csv", &t);
    char err[256];
    static const struct { size_t gran, keep; } cfg[] = {{64 * 1024, 0}, {64 * 1024, 1 << 20},
                                                       {2 << 20, 64 << 20}};
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        ga_replay_opts_t o = {.mode = GA_REPLAY_VMM, .arena_size = 2 << 20,
                              .granularity = cfg[i].gran, .keep = cfg[i].keep};
        ga_replay_result_t r;
        replay_ok(&t, &o, &r);
        ck_assert_uint_eq(r.failed_allocs, 0);
        size_t s = 0;
        ck_assert_msg(ga_replay_min_size(&t, &o, 0, &s, err, sizeof err) == 0, "%s", err);
        ck_assert_uint_eq(s, (r.peak_reserved + 511) / 512 * 512);
        ck_assert_msg(s > 1048576, "granule %zu: min %zu, the live peak runs it", cfg[i].gran, s);
        ck_assert_msg(!fails_at(&t, o, s), "granule %zu: min %zu fails", cfg[i].gran, s);
        for (size_t x = 1048576; x < s; x += 512)
            ck_assert_msg(fails_at(&t, o, x), "granule %zu: %zu runs the trace, below the min "
                          "%zu", cfg[i].gran, x, s);
    }
    ga_trace_free(&t);
}
END_TEST

static void push(ga_trace_t *t, uint8_t kind, uint64_t addr, uint64_t size, uint32_t result)
{
    ga_event_t e = {.time_ns = t->count, .addr = addr, .size = size, .kind = kind,
                    .result = result, .device = 0};
    ck_assert_int_eq(ga_trace_push(t, &e), 0);
}

/* What ring-buffer traces contain: frees with no alloc, double frees, addresses reused. */
START_TEST(unmatched_reused_and_skipped)
{
    for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_PLATFORM; m++) {
        ga_trace_t t;
        ga_trace_init(&t);
        push(&t, GA_EV_FREE, 0xdead000, 0, 0);      /* never allocated */
        push(&t, GA_EV_ALLOC, 0x1000, 1000, 0);
        push(&t, GA_EV_ALLOC_FAILED, 0x2000, 1 << 30, 2); /* a recorded OOM: tried */
        push(&t, GA_EV_ALLOC_FAILED, 0x2000, 1 << 30, 1); /* another failure: skipped */
        push(&t, GA_EV_ALLOC, 0x3000, 512, 2);      /* non-zero result: skipped */
        push(&t, GA_EV_FREE, 0x1000, 0, 0);
        push(&t, GA_EV_FREE, 0x1000, 0, 0);         /* double free */
        push(&t, GA_EV_ALLOC, 0x4000, 513, 0);
        push(&t, GA_EV_ALLOC, 0x4000, 2048, 0);     /* reused without a free */
        push(&t, GA_EV_ALLOC, 0x5000, 0, 0);        /* size 0: rejected */
        push(&t, 9, 0x6000, 512, 0);                /* unknown kind: skipped */
        push(&t, GA_EV_FREE, 0x4000, 0, 0);
        ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m, .arena_size = 1 << 20, .check = 1};
        ga_replay_result_t r;
        replay_ok(&t, &o, &r);
        ck_assert_uint_eq(r.events, t.count);
        ck_assert_uint_eq(r.unmatched_frees, 2);
        ck_assert_uint_eq(r.skipped, 3);
        ck_assert_uint_eq(r.recorded_failures, 1);
        ck_assert_uint_eq(r.reused_addrs, 1);
        ck_assert_uint_eq(r.invalid_allocs, 1);
        ck_assert_uint_eq(r.allocs, 3);
        ck_assert_uint_eq(r.frees, 2);
        ck_assert_uint_eq(r.check_failures, 0);
        /* the 1 GiB retry: served and freed at once where nothing caps it, an OOM in the
         * 1 MiB arena */
        int capped = m == GA_REPLAY_ARENA;
        ck_assert_uint_eq(r.failed_allocs, capped);
        ck_assert_uint_eq(r.first_oom, capped ? 2 : SIZE_MAX);
        ck_assert_uint_eq(r.peak_in_use, capped ? 2048 : (1u << 30) + 1024);
        ck_assert_uint_eq(r.peak_requested, capped ? 2048 : (1u << 30) + 1000);
        ga_trace_free(&t);
    }
}
END_TEST

/* One address through an allocation the pool refuses (size 0), one that runs out of memory, and
 * the frees and replacements of each: entry numbers resolved before the loop must count exactly
 * what the address lookup during the loop counted. */
START_TEST(invalid_and_failed_entries_at_one_address)
{
    ga_trace_t t;
    ga_trace_init(&t);
    push(&t, GA_EV_ALLOC, 0x7000, 1024, 0);
    push(&t, GA_EV_ALLOC, 0x7000, 0, 0);        /* replaces the live one, then is refused */
    push(&t, GA_EV_FREE, 0x7000, 0, 0);         /* nothing live there: unmatched */
    push(&t, GA_EV_ALLOC, 0x8000, 0, 0);        /* refused */
    push(&t, GA_EV_ALLOC, 0x8000, 512, 0);      /* replaces nothing */
    push(&t, GA_EV_FREE, 0x8000, 0, 0);
    push(&t, GA_EV_ALLOC, 0x9000, 1 << 20, 0);  /* out of memory */
    push(&t, GA_EV_ALLOC, 0x9000, 512, 0);      /* replaces the failed one */
    push(&t, GA_EV_FREE, 0x9000, 0, 0);
    push(&t, GA_EV_FREE, 0x9000, 0, 0);         /* double free */
    for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_PLATFORM; m++) {
        ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m, .arena_size = 4096, .limit = 4096,
                              .granularity = 512, .check = 1};
        ga_replay_result_t r;
        replay_ok(&t, &o, &r);
        ck_assert_msg(r.allocs == 3 && r.frees == 2, "%s: %llu allocs, %llu frees",
                      ga_replay_mode_name(o.mode), (unsigned long long)r.allocs,
                      (unsigned long long)r.frees);
        ck_assert_uint_eq(r.invalid_allocs, 2);
        ck_assert_uint_eq(r.failed_allocs, 1);
        ck_assert_uint_eq(r.first_oom, 6);
        ck_assert_uint_eq(r.reused_addrs, 2);
        ck_assert_uint_eq(r.unmatched_frees, 2);
        ck_assert_uint_eq(r.skipped, 0);
        ck_assert_uint_eq(r.events, t.count);
        ck_assert_uint_eq(r.peak_requested, 1024);
        ck_assert_uint_eq(r.final_in_use, 0);
        ck_assert_uint_eq(r.check_failures, 0);
    }
    ga_trace_free(&t);
}
END_TEST

START_TEST(oom_counted_and_stop_at_first)
{
    ga_trace_t t;
    ga_trace_init(&t);
    for (unsigned i = 0; i < 8; i++)
        push(&t, GA_EV_ALLOC, 0x100 + i, 1024, 0);
    for (unsigned i = 0; i < 8; i++)
        push(&t, GA_EV_FREE, 0x100 + i, 0, 0);
    for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_PLATFORM; m++) {
        ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m, .arena_size = 4096, .limit = 4096,
                              .granularity = 512, .check = 1};
        ga_replay_result_t r;
        replay_ok(&t, &o, &r);
        ck_assert_msg(r.failed_allocs == 4, "%s: %llu failed", ga_replay_mode_name(o.mode),
                      (unsigned long long)r.failed_allocs);
        ck_assert_uint_eq(r.first_oom, 4);
        ck_assert_uint_eq(r.allocs, 4);
        ck_assert_uint_eq(r.frees, 4);
        ck_assert_uint_eq(r.unmatched_frees, 0); /* frees of failed allocs are expected */
        ck_assert_uint_eq(r.events, 16);
        o.stop_at_oom = 1;
        replay_ok(&t, &o, &r);
        ck_assert_uint_eq(r.failed_allocs, 1);
        ck_assert_uint_eq(r.events, 5);
    }
    ga_trace_free(&t);
}
END_TEST

/* A block no backend serves (2^63 bytes, past the 2^60 every mode's replay backend allows): no
 * platform size runs the trace either, said as 1 (a result, like the other modes'), not as the
 * peak of what was placed. */
START_TEST(min_size_platform_unservable)
{
    ga_trace_t t;
    ga_trace_init(&t);
    push(&t, GA_EV_ALLOC, 1, (uint64_t)1 << 63, 0);
    push(&t, GA_EV_FREE, 1, 0, 0);
    char err[256] = "";
    size_t s = 7;
    ga_replay_opts_t o = {.mode = GA_REPLAY_PLATFORM};
    ck_assert_int_eq(ga_replay_min_size(&t, &o, 0, &s, err, sizeof err), 1);
    ck_assert_uint_eq(s, 0);
    ck_assert_msg(strstr(err, "no platform size") != NULL, "%s", err);
    ga_trace_free(&t);
}
END_TEST

START_TEST(bad_options)
{
    ga_trace_t t;
    ga_trace_init(&t);
    push(&t, GA_EV_ALLOC, 1, 100, 0);
    ga_replay_result_t r;
    char err[256] = "";
    ga_replay_opts_t o = {.mode = GA_REPLAY_ARENA, .arena_size = 0};
    ck_assert_int_eq(ga_replay(&t, &o, &r, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "arena size") != NULL, "%s", err);
    o.arena_size = 1000;
    ck_assert_int_eq(ga_replay(&t, &o, &r, err, sizeof err), -1);
    o.mode = (ga_replay_mode_t)7;
    ck_assert_int_eq(ga_replay(&t, &o, &r, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "mode") != NULL, "%s", err);
    ck_assert_int_eq(ga_replay(NULL, &o, &r, err, sizeof err), -1);
    ck_assert_int_eq(ga_replay(&t, NULL, &r, NULL, 0), -1);
    size_t s;
    o.mode = GA_REPLAY_ARENA;
    ck_assert_int_eq(ga_replay_min_size(&t, &o, 100, &s, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "granularity") != NULL, "%s", err);
    ga_replay_mode_t mode;
    ck_assert_int_eq(ga_replay_mode_parse("grow", &mode), 0);
    ck_assert_int_eq(mode, GA_REPLAY_GROW);
    ck_assert_int_eq(ga_replay_mode_parse(" Arena ", &mode), 0); /* typed by people */
    ck_assert_int_eq(mode, GA_REPLAY_ARENA);
    ck_assert_int_eq(ga_replay_mode_parse("VMM", &mode), 0);
    ck_assert_int_eq(mode, GA_REPLAY_VMM);
    ck_assert_int_eq(ga_replay_mode_parse("arena-nopre", &mode), -1);
    ck_assert_int_eq(ga_replay_mode_parse("", &mode), -1);
    ck_assert_int_eq(ga_replay_mode_parse(NULL, &mode), -1);
    ck_assert_str_eq(ga_replay_mode_name(GA_REPLAY_PLATFORM), "platform");
    ck_assert_str_eq(ga_replay_mode_name(GA_REPLAY_VMM), "vmm");
    o.mode = GA_REPLAY_VMM;
    o.granularity = 1000; /* not a power of two */
    ck_assert_int_eq(ga_replay(&t, &o, &r, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "granularity") != NULL, "%s", err);
    ga_trace_free(&t);
}
END_TEST

START_TEST(empty_trace)
{
    ga_trace_t t;
    ga_trace_init(&t);
    for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_PLATFORM; m++) {
        ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m, .arena_size = 512};
        ga_replay_result_t r;
        replay_ok(&t, &o, &r);
        ck_assert_uint_eq(r.events, 0);
        ck_assert_uint_eq(r.peak_in_use, 0);
        size_t s = 1;
        char err[256];
        ck_assert_msg(ga_replay_min_size(&t, &o, 0, &s, err, sizeof err) == 0, "%s", err);
        ck_assert_uint_eq(s, 512);
    }
}
END_TEST

/* Seeded random traces: replay with checks on, and the arena mode never beats the live peak. */
START_TEST(random_traces_checked)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 8; round++) {
        ga_trace_t t;
        ga_trace_init(&t);
        uint64_t live[64] = {0};
        for (int i = 0; i < 2000; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            unsigned slot = (unsigned)(seed >> 58);
            if (live[slot]) {
                push(&t, GA_EV_FREE, live[slot], 0, 0);
                live[slot] = 0;
            } else {
                live[slot] = 0x10000 + (uint64_t)i;
                push(&t, GA_EV_ALLOC, live[slot], 1 + (seed >> 20) % (1u << 20), 0);
            }
        }
        uint64_t peak[GA_MODE_COUNT];
        for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_PLATFORM; m++) {
            ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m, .arena_size = 256u << 20,
                                  .check = 1};
            ga_replay_result_t r;
            replay_ok(&t, &o, &r);
            ck_assert_msg(r.check_failures == 0, "round %d: %s", round, r.check_report);
            ck_assert_uint_eq(r.failed_allocs, 0);
            ck_assert_uint_eq(r.unmatched_frees, 0);
            ck_assert_uint_eq(r.events, t.count);
            peak[m] = r.peak_in_use;
        }
        /* The platform model's peak is the plain sum of live rounded sizes: all modes agree. */
        ck_assert_uint_eq(peak[GA_REPLAY_ARENA], peak[GA_REPLAY_PLATFORM]);
        ck_assert_uint_eq(peak[GA_REPLAY_GROW], peak[GA_REPLAY_PLATFORM]);
        ga_trace_free(&t);
    }
}
END_TEST

/* Timeline hook: collects every point. */
typedef struct points {
    ga_replay_point_t *p;
    size_t n, cap;
} points_t;

static void collect(void *ctx, const ga_replay_point_t *pt)
{
    points_t *ps = ctx;
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 256;
        ps->p = realloc(ps->p, ps->cap * sizeof *ps->p);
        ck_assert_msg(ps->p != NULL, "out of memory for timeline points");
    }
    ps->p[ps->n++] = *pt;
}

/* The timeline of one replay agrees with its results: one point per replayed event at the event's
 * time, last point = final state, maxima = peaks, reserved never below in use. */
static void check_timeline(const ga_trace_t *t, ga_replay_opts_t o, const char *what)
{
    points_t ps = {0};
    o.on_event = collect;
    o.hook_ctx = &ps;
    ga_replay_result_t r;
    replay_ok(t, &o, &r);
    const char *mn = ga_replay_mode_name(o.mode);
    ck_assert_msg(ps.n == r.events - r.skipped, "%s %s: %zu points for %llu events", what, mn,
                  ps.n, (unsigned long long)(r.events - r.skipped));
    uint64_t max_use = 0, max_res = 0;
    for (size_t i = 0; i < ps.n; i++) {
        const ga_replay_point_t *p = &ps.p[i];
        ck_assert_uint_eq(p->time_ns, t->events[p->index].time_ns);
        ck_assert_msg(p->reserved >= p->in_use, "%s %s: reserved below in use at event %zu",
                      what, mn, p->index);
        max_use = p->in_use > max_use ? p->in_use : max_use;
        max_res = p->reserved > max_res ? p->reserved : max_res;
    }
    if (ps.n) {
        ck_assert_uint_eq(ps.p[ps.n - 1].in_use, r.final_in_use);
        ck_assert_uint_eq(ps.p[ps.n - 1].reserved, r.final_reserved);
    }
    ck_assert_msg(max_use == r.peak_in_use, "%s %s: timeline max in use %llu, peak %llu", what,
                  mn, (unsigned long long)max_use, (unsigned long long)r.peak_in_use);
    ck_assert_msg(max_res == r.peak_reserved, "%s %s: timeline max reserved %llu, peak %llu",
                  what, mn, (unsigned long long)max_res, (unsigned long long)r.peak_reserved);
    free(ps.p);
}

static void check_timeline_file(const char *path)
{
    size_t rows;
    unsigned long long peak = sweep_peak(path, 512, &rows);
    ga_trace_t t;
    load(path, &t);
    for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_PLATFORM; m++) {
        ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m, .arena_size = (size_t)peak * 2,
                              .no_frag_track = 1};
        check_timeline(&t, o, path);
    }
    ga_trace_free(&t);
}

START_TEST(timeline_matches_results)
{
    ga_test_each_lifetime_file(check_timeline_file);
}
END_TEST

/* Known values: 100 B and 1000 B live together, freed in turn; plus the edge cases of the
 * unmatched test, and an OOM, each of which still gets its point. */
START_TEST(timeline_hand_built)
{
    ga_trace_t t;
    ga_trace_init(&t);
    push(&t, GA_EV_ALLOC, 0x1000, 100, 0);
    push(&t, GA_EV_ALLOC, 0x2000, 1000, 0);
    push(&t, GA_EV_FREE, 0x1000, 0, 0);
    push(&t, GA_EV_ALLOC, 0x3000, 512, 7);  /* skipped: no point */
    push(&t, GA_EV_FREE, 0xdead, 0, 0);     /* unmatched: a point, nothing changes */
    push(&t, GA_EV_FREE, 0x2000, 0, 0);
    push(&t, GA_EV_ALLOC, 0x4000, 4096, 0); /* over the 2048-byte limit: OOM */
    const uint64_t want_use[] = {512, 1536, 1024, 1024, 0, 0};
    const size_t want_idx[] = {0, 1, 2, 4, 5, 6};
    for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_PLATFORM; m++) {
        points_t ps = {0};
        ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m, .arena_size = 2048, .limit = 2048,
                              .min_region = 2048, .granularity = 512, .on_event = collect, .hook_ctx = &ps};
        ga_replay_result_t r;
        replay_ok(&t, &o, &r);
        ck_assert_uint_eq(r.failed_allocs, 1);
        ck_assert_uint_eq(ps.n, 6);
        for (size_t i = 0; i < ps.n; i++) {
            ck_assert_uint_eq(ps.p[i].index, want_idx[i]);
            ck_assert_uint_eq(ps.p[i].in_use, want_use[i]);
            if (m == GA_REPLAY_PLATFORM)
                ck_assert_uint_eq(ps.p[i].reserved, want_use[i]);
            if (m == GA_REPLAY_ARENA)
                ck_assert_uint_eq(ps.p[i].reserved, 2048);
        }
        free(ps.p);
        check_timeline(&t, o, "hand-built");
    }
    ga_trace_free(&t);
}
END_TEST

static void must_not_be_called(void *ctx, const ga_replay_point_t *pt)
{
    (void)pt;
    ++*(int *)ctx;
}

/* The smallest-size search runs dozens of trial replays; none of them may reach the hook. */
START_TEST(timeline_not_from_min_size)
{
    ga_trace_t t;
    ga_trace_init(&t);
    for (unsigned i = 0; i < 16; i++)
        push(&t, GA_EV_ALLOC, 0x100 + i, 1000 + i * 700, 0);
    for (int m = GA_REPLAY_ARENA; m <= GA_REPLAY_PLATFORM; m++) {
        int calls = 0;
        ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m, .arena_size = 512,
                              .on_event = must_not_be_called, .hook_ctx = &calls};
        size_t s = 0;
        char err[256];
        ck_assert_msg(ga_replay_min_size(&t, &o, 0, &s, err, sizeof err) == 0, "%s", err);
        ck_assert_uint_gt(s, 0);
        ck_assert_int_eq(calls, 0);
    }
    ga_trace_free(&t);
}
END_TEST

/* A limit under GA_ALIGN holds no block in any mode: the arena rounded it to 0, and grow mode
 * then ran with no limit at all. A granule past 1 TiB is refused: creating the vmm pool with
 * one never returned. */
START_TEST(limit_and_granule_out_of_range)
{
    ga_trace_t t;
    ga_trace_init(&t);
    push(&t, GA_EV_ALLOC, 1, 4096, 0);
    ga_replay_result_t r;
    char err[256] = "";
    for (int m = GA_REPLAY_GROW; m <= GA_REPLAY_PLATFORM; m++) {
        for (size_t limit = 1; limit <= 8192; limit *= 2) {
            ga_replay_opts_t o = {.mode = (ga_replay_mode_t)m, .limit = limit};
            replay_ok(&t, &o, &r);
            int fits = limit >= 4096 && m != GA_REPLAY_VMM; /* vmm: a 2 MiB granule */
            ck_assert_msg(r.failed_allocs == !fits, "mode %d limit %zu: %llu failed", m, limit,
                          (unsigned long long)r.failed_allocs);
            ck_assert_uint_le(r.peak_reserved, limit);
        }
    }
    ga_replay_opts_t o = {.mode = GA_REPLAY_VMM, .granularity = (size_t)1 << 62};
    ck_assert_int_eq(ga_replay(&t, &o, &r, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "granularity") != NULL, "%s", err);
    o.granularity = (size_t)1 << 40;
    replay_ok(&t, &o, &r);
    ck_assert_uint_eq(r.peak_reserved, (size_t)1 << 40);
    ga_trace_free(&t);
}
END_TEST

Suite *replay_suite(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, replay_every_lifetimes_trace_checked);
    tcase_add_test(tc, min_size_bisection);
    tcase_add_test(tc, min_size_is_the_smallest);
    tcase_add_test(tc, min_size_vmm_is_the_unlimited_peak);
    tcase_add_test(tc, unmatched_reused_and_skipped);
    tcase_add_test(tc, invalid_and_failed_entries_at_one_address);
    tcase_add_test(tc, oom_counted_and_stop_at_first);
    tcase_add_test(tc, bad_options);
    tcase_add_test(tc, min_size_platform_unservable);
    tcase_add_test(tc, empty_trace);
    tcase_add_test(tc, random_traces_checked);
    tcase_add_test(tc, timeline_matches_results);
    tcase_add_test(tc, timeline_hand_built);
    tcase_add_test(tc, timeline_not_from_min_size);
    suite_add_tcase(s, tc);
    TCase *quick = tcase_create("replay_options"); /* a hang is the fault: fail it fast */
    tcase_set_timeout(quick, 20);
    tcase_add_test(quick, limit_and_granule_out_of_range);
    suite_add_tcase(s, quick);
    return s;
}
