/* bench-scale: the cost of one allocation and one free as an arena fragments, printed as a
 * markdown table and written as JSON (`make bench-scale`, part of `make bench`).
 *
 * For N = 100 ... 1,000,000 free holes it builds an arena of 2N slots (a 512-byte live separator,
 * then a hole) and frees every hole, so N free chunks sit in the bins and none can merge. Then it
 * times alloc+free pairs two ways. "pair": allocate the size of a random hole and free that block
 * at once (the measure: the search itself, N constant). "churn": allocate the size of a
 * random free hole, then free a random allocated hole, so each pair lands on random holes and
 * the figure includes the cache misses of a large arena (N stays constant too); churn runs on an
 * arena of its own with N more holes allocated (4N slots), the allocated holes it frees from.
 * (Until 2026-12-06 churn started with no allocated hole, so the random one it freed was always
 * the block it had just allocated, and churn was pair with random sizes: an outside check; the
 * JSON's churn_freed_just_allocated counts such pairs.) Best fit finds a
 * hole of exactly the size asked either way. Pair reads its sizes from an array drawn
 * beforehand, one random hole per pair; churn's bookkeeping (arrays of N holes read at random) adds misses of its own at
 * large N. Two shapes: every hole of one size (one bin holds all N), and mixed sizes
 * (log-uniform, 512 B to 8 MiB, over hundreds of bins, many equal). Also timed: ga_lookup of an
 * interior address of a random allocated hole, the path of cuMemGetAddressRange and of bad-free
 * classification. Reported: ns per pair and per lookup (the best of REPEATS runs, interleaved
 * across cells; the median in the JSON too), and the ratio to 100 holes. The arena works over a
 * fake backend (address ranges only), so 1M holes of up to 8 MiB need no device memory.
 * Only the public API is used, so the same file measures an older allocator library too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ga_arena.h"

#define REPEATS 7
#define SEPARATOR ((size_t)512)

typedef struct hole {
    uintptr_t addr;
    size_t size;
} hole_t;

typedef struct shape_run {
    size_t holes;
    double pair_ns[REPEATS], churn_ns[REPEATS], lookup_ns[REPEATS]; /* every repeat */
    double ns_pair, ns_churn, ns_lookup;    /* the best repeat: what the table shows */
    double med_pair, med_churn, med_lookup; /* the median repeat, in the JSON */
    unsigned check_failures;
    size_t churn_same;                      /* churn pairs that freed the block they allocated */
    size_t pair_draws;                      /* independent hole draws among the pairs */
} shape_run_t;

static uint64_t next_rand(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* CPU time of the thread, not wall time: on a shared machine, time spent preempted by another
 * process must not count (as in bench-shim). */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int fake_reserve(void *ctx, size_t size, uintptr_t *base)
{
    uintptr_t *next = ctx;
    *base = *next;
    *next += size + ((size_t)1 << 30);
    return 0;
}

static int fake_release(void *ctx, uintptr_t base, size_t size)
{
    (void)ctx, (void)base, (void)size;
    return 0;
}

/* Hole sizes: all 4 KiB, or log-uniform from 512 B to 8 MiB in whole granules. */
static size_t hole_size(int mixed, uint64_t *rng)
{
    if (!mixed)
        return 4096;
    double u = (double)(next_rand(rng) >> 11) / (double)(1ull << 53);
    size_t granules = (size_t)1 << (unsigned)(u * 14.0);
    granules += (size_t)(next_rand(rng) % granules);
    return granules * GA_ALIGN;
}

typedef struct state {
    ga_arena_t *arena;
    hole_t *free_holes, *used; /* free: only the size matters; used: allocated holes */
    size_t nfree, nused;
} state_t;

/* Lays out 2N slots (a separator, then a hole) and frees the holes; 0 on success. With `used`,
 * 2N more slots whose holes stay allocated, in st->used (churn frees from them): every slot's
 * hole is drawn, and N of the 2N chosen at random are freed. */
static int build(state_t *st, size_t n, int used, int mixed, uint64_t *rng, uintptr_t *next_base)
{
    size_t m = used ? 2 * n : n;
    size_t *sizes = malloc(m * sizeof *sizes);
    size_t total = 1 << 20;
    if (!sizes)
        return -1;
    for (size_t i = 0; i < m; i++) {
        sizes[i] = hole_size(mixed, rng);
        total += sizes[i] + SEPARATOR;
    }
    ga_backend_t b = {fake_reserve, fake_release, next_base};
    ga_config_t cfg = {.initial = total};
    st->arena = ga_arena_create(&b, &cfg, NULL);
    st->free_holes = malloc(m * sizeof *st->free_holes);
    st->used = malloc(m * sizeof *st->used);
    uintptr_t *hole_at = malloc(m * sizeof *hole_at);
    int rc = st->arena && st->free_holes && st->used && hole_at ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < m; i++) {
        uintptr_t sep;
        if (ga_alloc(st->arena, SEPARATOR, &sep) != GA_OK ||
            ga_alloc(st->arena, sizes[i], &hole_at[i]) != GA_OK)
            rc = -1;
    }
    for (size_t i = m; rc == 0 && used && i > 1; i--) { /* which N of the 2N are freed */
        size_t j = (size_t)(next_rand(rng) % i);
        uintptr_t a = hole_at[i - 1];
        size_t sz = sizes[i - 1];
        hole_at[i - 1] = hole_at[j], sizes[i - 1] = sizes[j];
        hole_at[j] = a, sizes[j] = sz;
    }
    st->nused = 0;
    for (size_t i = 0; rc == 0 && i < m; i++) {
        if (i >= n) {
            st->used[st->nused++] = (hole_t){hole_at[i], sizes[i]};
            continue;
        }
        if (ga_free(st->arena, hole_at[i]) != GA_OK)
            rc = -1;
        st->free_holes[i] = (hole_t){0, sizes[i]};
    }
    st->nfree = n;
    free(hole_at);
    free(sizes);
    return rc;
}

static void teardown(state_t *st)
{
    ga_arena_destroy(st->arena);
    free(st->free_holes);
    free(st->used);
}

/* `pairs` times: allocate the size of a random hole, free the block at once. Every pair's hole is
 * drawn beforehand, one independent draw per pair (*draws says how many), and read in order, so
 * the loop's own reads are sequential and prefetched whatever N is. Until 2026-12-07 the draws
 * were a ring of 4,096 repeated over the 200,000 pairs, so at 100,000 holes the pairs touched at
 * most 4% of the holes, each about 49 times, and the mixed column measured a warm subset of the
 * bins' trees (34 ns a pair at 100,000 holes against 52-59 with a draw per pair; an outside check
 * of issue 9; the one-size column, whose pairs all take the lowest hole, was the same either way). */
static int time_pairs(state_t *st, size_t pairs, uint64_t *rng, uint64_t *ns, size_t *draws)
{
    size_t *sizes = malloc(pairs * sizeof *sizes);
    if (!sizes)
        return -1;
    for (size_t k = 0; k < pairs; k++)
        sizes[k] = st->free_holes[next_rand(rng) % st->nfree].size;
    *draws = pairs;
    int rc = 0;
    uint64_t t0 = now_ns();
    for (size_t p = 0; p < pairs; p++) {
        uintptr_t addr;
        if (ga_alloc(st->arena, sizes[p], &addr) != GA_OK || ga_free(st->arena, addr) != GA_OK) {
            rc = -1;
            break;
        }
    }
    *ns = now_ns() - t0;
    free(sizes);
    return rc;
}

/* `pairs` times: allocate the size of a random free hole, free a random allocated one; *same
 * counts the pairs whose free was the block just allocated (1 in nused + 1). */
static int time_churn(state_t *st, size_t pairs, uint64_t *rng, uint64_t *ns, size_t *same)
{
    *same = 0;
    uint64_t t0 = now_ns();
    for (size_t p = 0; p < pairs; p++) {
        size_t i = (size_t)(next_rand(rng) % st->nfree);
        hole_t h = st->free_holes[i];
        st->free_holes[i] = st->free_holes[--st->nfree];
        if (ga_alloc(st->arena, h.size, &h.addr) != GA_OK)
            return -1;
        st->used[st->nused++] = h;
        size_t j = (size_t)(next_rand(rng) % st->nused);
        *same += j == st->nused - 1;
        h = st->used[j];
        st->used[j] = st->used[--st->nused];
        if (ga_free(st->arena, h.addr) != GA_OK)
            return -1;
        st->free_holes[st->nfree++] = h;
    }
    *ns = now_ns() - t0;
    return 0;
}

/* Interior lookups of random allocated holes (half of the holes are allocated first). */
static int time_lookups(state_t *st, size_t lookups, uint64_t *rng, uint64_t *ns)
{
    while (st->nused < st->nfree) {
        hole_t h = st->free_holes[--st->nfree];
        if (ga_alloc(st->arena, h.size, &h.addr) != GA_OK)
            return -1;
        st->used[st->nused++] = h;
    }
    uint64_t t0 = now_ns();
    for (size_t k = 0; k < lookups; k++) {
        const hole_t *h = &st->used[next_rand(rng) % st->nused];
        uintptr_t base = 0;
        if (ga_lookup(st->arena, h->addr + h->size / 2, &base, NULL) != GA_OK || base != h->addr)
            return -1;
    }
    *ns = now_ns() - t0;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One repeat of one cell: an arena of n holes built, pairs and lookups timed, the arena torn
 * down; then churn on an arena of n free and n allocated holes.
 * Repeat r always uses the same seed, so every run of the benchmark times the same work. */
static int measure_once(size_t n, int mixed, size_t pairs, int r, shape_run_t *out)
{
    uintptr_t next_base = (uintptr_t)1 << 40;
    uint64_t rng = 0x5CA1Eull + (uint64_t)r * 7919u + (uint64_t)mixed;
    state_t st;
    uint64_t tp = 0, tc = 0, tl = 0;
    size_t lookups = pairs / 2;
    size_t same = 0, draws = 0;
    int rc = build(&st, n, 0, mixed, &rng, &next_base) != 0 ||
             time_pairs(&st, pairs, &rng, &tp, &draws) != 0 ||
             time_lookups(&st, lookups, &rng, &tl) != 0;
    if (r == 0 && !rc)
        out->check_failures = (unsigned)ga_check(st.arena, NULL, 0);
    teardown(&st);
    if (!rc) {
        next_base = (uintptr_t)1 << 40;
        rc = build(&st, n, 1, mixed, &rng, &next_base) != 0 || time_churn(&st, pairs, &rng, &tc, &same) != 0;
        if (r == 0 && !rc)
            out->check_failures += (unsigned)ga_check(st.arena, NULL, 0);
        teardown(&st);
    }
    if (rc) {
        fprintf(stderr, "gpuarena: bench-scale: an allocation failed at %zu holes\n", n);
        return -1;
    }
    if (r == 0) {
        out->churn_same = same;
        out->pair_draws = draws;
    }
    out->holes = n;
    out->pair_ns[r] = (double)tp / (double)pairs;
    out->churn_ns[r] = (double)tc / (double)pairs;
    out->lookup_ns[r] = (double)tl / (double)lookups;
    return 0;
}

/* The best and the median of a cell's repeats. */
static void summarise(shape_run_t *c)
{
    double v[REPEATS];
    double *src[3] = {c->pair_ns, c->churn_ns, c->lookup_ns};
    double *best[3] = {&c->ns_pair, &c->ns_churn, &c->ns_lookup};
    double *med[3] = {&c->med_pair, &c->med_churn, &c->med_lookup};
    for (int k = 0; k < 3; k++) {
        memcpy(v, src[k], sizeof v);
        qsort(v, REPEATS, sizeof *v, cmp_double);
        *best[k] = v[0];
        *med[k] = v[REPEATS / 2];
    }
}

static void print_table(const shape_run_t *one, const shape_run_t *mix, size_t rows)
{
    printf("| free holes | one size: ns/pair | ratio | churn | ratio | mixed: ns/pair | ratio | "
           "churn | ratio | ns/lookup |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < rows; i++)
        printf("| %zu | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f | %.1f |\n",
               one[i].holes, one[i].ns_pair, one[i].ns_pair / one[0].ns_pair, one[i].ns_churn,
               one[i].ns_churn / one[0].ns_churn, mix[i].ns_pair, mix[i].ns_pair / mix[0].ns_pair,
               mix[i].ns_churn, mix[i].ns_churn / mix[0].ns_churn, mix[i].ns_lookup);
}

static void json_shape(FILE *f, const char *name, const shape_run_t *v, size_t rows)
{
    fprintf(f, "  \"%s\": [", name);
    for (size_t i = 0; i < rows; i++)
        fprintf(f, "%s\n    {\"holes\": %zu, \"ns_per_pair\": %.2f, \"pair_ratio\": %.3f, "
                   "\"ns_per_churn_pair\": %.2f, \"churn_ratio\": %.3f, \"ns_per_lookup\": %.2f, "
                   "\"median_ns_per_pair\": %.2f, \"median_ns_per_churn_pair\": %.2f, "
                   "\"median_ns_per_lookup\": %.2f, \"check_failures\": %u, "
                   "\"churn_freed_just_allocated\": %zu, \"pair_draws\": %zu}",
                i ? "," : "", v[i].holes, v[i].ns_pair, v[i].ns_pair / v[0].ns_pair,
                v[i].ns_churn, v[i].ns_churn / v[0].ns_churn, v[i].ns_lookup, v[i].med_pair,
                v[i].med_churn, v[i].med_lookup, v[i].check_failures, v[i].churn_same,
                v[i].pair_draws);
    fprintf(f, "\n  ]");
}

static int write_json(const char *path, const shape_run_t *one, const shape_run_t *mix,
                      size_t rows, size_t pairs)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "gpuarena: cannot write %s (does its folder exist?)\n", path);
        return -1;
    }
    fprintf(f, "{\"repeats\": %d, \"estimator\": \"best of interleaved repeats\", \"pairs\": %zu, "
               "\"target_ratio_at_100k\": 2,\n", REPEATS, pairs);
    json_shape(f, "one_size", one, rows);
    fprintf(f, ",\n");
    json_shape(f, "mixed_sizes", mix, rows);
    fprintf(f, "\n}\n");
    return fclose(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    static const char usage[] = "usage: bench-scale OUT.json [MAX_HOLES [PAIRS]]\n"
                                "(defaults: 1000000 holes, 200000 pairs; make bench-scale runs it)\n";
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc < 2 || argc > 4 || argv[1][0] == '-') {
        fprintf(stderr, "%sgpuarena: bench-scale needs an output path%s\n", usage,
                argc >= 2 && argv[1][0] == '-' ? " (not an option)" : "");
        return 2;
    }
    size_t max_holes = 1000000, pairs = 200000;
    for (int i = 2; i < argc; i++) {
        char *end;
        unsigned long long v = strtoull(argv[i], &end, 10);
        if (end == argv[i] || *end || argv[i][0] == '-' || v < (i == 2 ? 100 : 1)) {
            fprintf(stderr, "%sgpuarena: bench-scale: %s is not a %s\n", usage, argv[i],
                    i == 2 ? "number of holes of at least 100" : "positive number of pairs");
            return 2;
        }
        *(i == 2 ? &max_holes : &pairs) = (size_t)v;
    }
    shape_run_t one[8], mix[8];
    size_t rows = 0;
    unsigned failures = 0;
    for (size_t n = 100; n <= max_holes && rows < 8 && pairs; n *= 10)
        rows++;
    if (!rows)
        return 2;
    /* Repeats are interleaved: every cell's first repeat, then every cell's second, and so on, so a
     * slow minute of the machine (this VM's speed moves by up to 1.8x over seconds) lands on every
     * cell alike instead of on the cells measured in it; each cell then reports its best repeat. */
    for (int r = 0; r < REPEATS; r++) {
        size_t n = 100;
        for (size_t i = 0; i < rows; i++, n *= 10)
            if (measure_once(n, 0, pairs, r, &one[i]) != 0 || measure_once(n, 1, pairs, r, &mix[i]) != 0)
                return 1;
    }
    for (size_t i = 0; i < rows; i++) {
        summarise(&one[i]);
        summarise(&mix[i]);
        failures += one[i].check_failures + mix[i].check_failures;
    }
    print_table(one, mix, rows);
    printf("\nns per alloc+free pair (pair: a random hole's size, each pair its own draw, and the "
           "block just allocated; churn: a random allocated hole) and per interior lookup, best of %d interleaved runs of %zu pairs; ratio to %zu holes "
           "(target: pair ratio <= 2 at 100,000)%s\n", REPEATS, pairs, one[0].holes,
           failures ? "; ga_check FAILED" : "");
    return write_json(argv[1], one, mix, rows, pairs) != 0 || failures ? 1 : 0;
}
