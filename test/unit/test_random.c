/* Randomised differential tests. First, the arena against a reference model: a plain array of live
 * [base, base + rounded size) intervals. Each run is a seeded sequence of allocations (1 B to
 * 4 MiB, most of them small), frees, bad frees, interior lookups and trims, under one of several
 * configurations (on demand, preallocated, with and without a limit, host and fake backends).
 * After every step: ga_check is clean and the statistics match the model. Every allocation is
 * checked against every live interval for overlap, and with the host backend its bytes are
 * stamped and verified on free, so two allocations sharing memory would also show in the data.
 * Second, placement: every address the arena hands out against a plain best-fit model (below).
 */
#include <stdlib.h>

#include "internal.h" /* the sliced-bins test counts subdivided bins */
#include "testutil.h"

typedef struct live {
    uintptr_t base;
    size_t size, requested;
    uint64_t tag;
} live_t;

typedef struct model {
    live_t v[4096];
    size_t n;
    uint64_t in_use, requested;
    uintptr_t freed[64]; /* recently freed bases, for stale frees */
    unsigned nfreed;
} model_t;

typedef struct config {
    const char *name;
    int host;        /* host backend (real memory, stamped) or fake (addresses only) */
    size_t initial, limit;
    int grow;
    size_t capacity; /* fake backend refuses beyond this: exercises retry and release */
} config_t;

static const config_t configs[] = {
    {"on demand, host", 1, 0, 0, 1, 0},
    {"preallocated 96 MiB, no growth, host", 1, 96 * MIB, 0, 0, 0},
    {"preallocated 8 MiB, growth, limit 48 MiB", 0, 8 * MIB, 48 * MIB, 1, 0},
    {"on demand, limit 24 MiB", 0, 0, 24 * MIB, 1, 0},
    {"on demand, backend capacity 40 MiB", 0, 0, 0, 1, 40 * MIB},
};
#define NCONFIGS (sizeof configs / sizeof *configs)
#define NSEEDS 4
#define STEPS 2500

static size_t ga_round_size_for_tests(size_t size)
{
    return (size + GA_ALIGN - 1) & ~(GA_ALIGN - 1);
}

static uint64_t next_rand(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t random_size(uint64_t *s)
{
    uint64_t r = next_rand(s);
    switch (r % 10) {
    case 0: return (size_t)(256 * KIB + (r >> 8) % (4 * MIB - 256 * KIB));
    case 1: case 2: case 3: return (size_t)(4 * KIB + (r >> 8) % (252 * KIB));
    default: return (size_t)(1 + (r >> 8) % (4 * KIB));
    }
}

/* Stamps: the first and last 8 bytes carry the tag, the first KiB repeats its low byte. */
static void stamp(const live_t *l)
{
    unsigned char *p = (unsigned char *)l->base;
    memset(p, (int)(l->tag & 0xff), l->size < KIB ? l->size : KIB);
    memcpy(p, &l->tag, sizeof l->tag);
    memcpy(p + l->size - sizeof l->tag, &l->tag, sizeof l->tag);
}

static void verify_stamp(const live_t *l)
{
    const unsigned char *p = (const unsigned char *)l->base;
    uint64_t head, tail;
    memcpy(&head, p, sizeof head);
    memcpy(&tail, p + l->size - sizeof tail, sizeof tail);
    REQUIRE(head == l->tag && tail == l->tag, "allocation %#lx was overwritten",
                  (unsigned long)l->base);
    size_t n = l->size - sizeof tail < KIB ? l->size - sizeof tail : KIB;
    for (size_t i = sizeof head; i < n; i++)
        REQUIRE(p[i] == (l->tag & 0xff), "allocation %#lx byte %zu overwritten",
                      (unsigned long)l->base, i);
}

static void assert_matches_model(const ga_arena_t *a, const model_t *m)
{
    ASSERT_HEALTHY(a);
    ga_stats_t s = stats_of(a);
    REQUIRE_EQ(s.in_use, m->in_use);
    REQUIRE_EQ(s.in_use_requested, m->requested);
    REQUIRE_EQ(s.live, m->n);
}

static void do_alloc(ga_arena_t *a, model_t *m, const config_t *c, uint64_t *rng)
{
    size_t size = random_size(rng), rounded = (size + GA_ALIGN - 1) & ~(GA_ALIGN - 1);
    uintptr_t p = 0;
    ga_status_t st = ga_alloc(a, size, &p);
    if (st == GA_ENOMEM) {
        ga_stats_t s = stats_of(a);
        REQUIRE(s.largest_free < rounded, "ENOMEM for %zu with %lu free in one piece",
                      rounded, (unsigned long)s.largest_free);
        REQUIRE(c->limit || c->capacity || !c->grow, "ENOMEM without any limit");
        if (c->limit && c->grow)
            REQUIRE(s.reserved + rounded > c->limit, "ENOMEM below the limit");
        return;
    }
    REQUIRE_EQ(st, GA_OK);
    REQUIRE_EQ(p % GA_ALIGN, 0);
    for (size_t i = 0; i < m->n; i++)
        REQUIRE(p + rounded <= m->v[i].base || m->v[i].base + m->v[i].size <= p,
                      "[%#lx,+%zu) overlaps live [%#lx,+%zu)", (unsigned long)p, rounded,
                      (unsigned long)m->v[i].base, m->v[i].size);
    size_t got = 0;
    REQUIRE_EQ(ga_lookup(a, p, NULL, &got), GA_OK);
    REQUIRE_EQ(got, rounded);
    REQUIRE(m->n < sizeof m->v / sizeof *m->v, "model full");
    live_t *l = &m->v[m->n++];
    *l = (live_t){p, rounded, size, next_rand(rng)};
    if (c->host)
        stamp(l);
    m->in_use += rounded;
    m->requested += size;
}

static void do_free(ga_arena_t *a, model_t *m, const config_t *c, uint64_t *rng)
{
    size_t i = next_rand(rng) % m->n;
    live_t l = m->v[i];
    if (c->host)
        verify_stamp(&l);
    REQUIRE_EQ(ga_free(a, l.base), GA_OK);
    m->v[i] = m->v[--m->n];
    m->in_use -= l.size;
    m->requested -= l.requested;
    m->freed[m->nfreed++ % 64] = l.base;
}

/* What a free of p must answer, from the model alone (plus ga_owns for free space). */
static ga_status_t expected_free_status(const ga_arena_t *a, const model_t *m, uintptr_t p)
{
    for (size_t i = 0; i < m->n; i++)
        if (p >= m->v[i].base && p - m->v[i].base < m->v[i].size)
            return p == m->v[i].base ? GA_OK : GA_EINTERIOR;
    return ga_owns(a, p) ? GA_EDOUBLE : GA_ENOTOWNED;
}

static void do_bad_free(ga_arena_t *a, const model_t *m, uint64_t *rng)
{
    uintptr_t p;
    uint64_t r = next_rand(rng);
    if (m->n && r % 2) {
        const live_t *l = &m->v[(r >> 8) % m->n];
        p = l->base + 1 + (r >> 24) % (l->size - 1);
    } else if (m->nfreed) {
        p = m->freed[(r >> 8) % (m->nfreed < 64 ? m->nfreed : 64)];
    } else {
        return;
    }
    ga_status_t want = expected_free_status(a, m, p);
    if (want == GA_OK)
        return; /* the address was handed out again: a legitimate free, not a bad one */
    ga_stats_t before = stats_of(a);
    ASSERT_STATUS(ga_free(a, p), want);
    ga_stats_t after = stats_of(a);
    REQUIRE(memcmp(&before, &after, sizeof before) == 0, "a failed free changed the stats");
}

static void do_lookup(ga_arena_t *a, const model_t *m, uint64_t *rng)
{
    if (!m->n)
        return;
    uint64_t r = next_rand(rng);
    const live_t *l = &m->v[r % m->n];
    uintptr_t base = 0;
    size_t size = 0;
    REQUIRE_EQ(ga_lookup(a, l->base + (r >> 32) % l->size, &base, &size), GA_OK);
    REQUIRE_EQ(base, l->base);
    REQUIRE_EQ(size, l->size);
}

static void run_sequence(const config_t *c, uint64_t seed)
{
    static model_t m;
    memset(&m, 0, sizeof m);
    fake_backend_t f;
    host_backend_t h;
    fake_init(&f);
    f.capacity = c->capacity;
    ga_backend_t b = c->host ? host_backend(&h) : fake_backend(&f);
    ga_config_t cfg = {.initial = c->initial, .grow = c->grow, .limit = c->limit};
    ga_arena_t *a = ga_arena_create(&b, &cfg, NULL);
    ck_assert_ptr_nonnull(a);
    uint64_t rng = seed;
    for (int step = 0; step < STEPS; step++) {
        unsigned r = (unsigned)(next_rand(&rng) % 100);
        unsigned alloc_pct = m.n < 150 ? 60 : 40;
        if (r < 4)
            do_bad_free(a, &m, &rng);
        else if (r < 8)
            do_lookup(a, &m, &rng);
        else if (r < 9)
            ga_trim(a);
        else if (r < 9 + alloc_pct || m.n == 0)
            do_alloc(a, &m, c, &rng);
        else
            do_free(a, &m, c, &rng);
        assert_matches_model(a, &m);
    }
    while (m.n)
        do_free(a, &m, c, &rng);
    assert_matches_model(a, &m);
    ga_trim(a);
    REQUIRE_EQ(stats_of(a).reserved, 0);
    ga_arena_destroy(a);
    REQUIRE_EQ(c->host ? h.outstanding : f.outstanding, 0);
}

START_TEST(test_differential)
{
    const config_t *c = &configs[(size_t)_i / NSEEDS];
    uint64_t seed = 0x5EED0000u + (uint64_t)_i;
    run_sequence(c, seed);
}
END_TEST

/* Placement against a reference model --------------------------------------------------------
 *
 * The model is best fit written the plainest way: every free span of every region in one array
 * sorted by address, a linear scan for the smallest span that fits (lowest address among equal
 * sizes), the allocation cut from the span's low end, a freed span merged with the spans it
 * touches. Regions enter and leave the model through the test's backend, so growth, release
 * before out-of-memory and trim are followed too. Every allocation must land exactly where the
 * model says, and fail exactly when it has no span. Sizes come from a few fixed values (many
 * equal sizes: ties on address) and from random ones in exact bins (< 32 KiB) and in ranged bins. */

typedef struct span {
    uintptr_t base;
    size_t size;
} span_t;

#define MODEL_SPANS 8192
typedef struct fit_model {
    span_t free[MODEL_SPANS];
    size_t n;
    uintptr_t next_base;   /* backend: where the next region goes (gaps keep regions apart) */
    size_t capacity, outstanding;
} fit_model_t;

static void model_insert(fit_model_t *m, uintptr_t base, size_t size)
{
    size_t i = 0;
    while (i < m->n && m->free[i].base < base)
        i++;
    int left = i > 0 && m->free[i - 1].base + m->free[i - 1].size == base;
    int right = i < m->n && base + size == m->free[i].base;
    if (left && right) {
        m->free[i - 1].size += size + m->free[i].size;
        memmove(&m->free[i], &m->free[i + 1], (m->n - i - 1) * sizeof *m->free);
        m->n--;
    } else if (left) {
        m->free[i - 1].size += size;
    } else if (right) {
        m->free[i].base = base;
        m->free[i].size += size;
    } else {
        REQUIRE(m->n < MODEL_SPANS, "model full");
        memmove(&m->free[i + 1], &m->free[i], (m->n - i) * sizeof *m->free);
        m->free[i] = (span_t){base, size};
        m->n++;
    }
}

/* Index of the best-fit span for `size`, or -1. */
static long model_fit(const fit_model_t *m, size_t size)
{
    long best = -1;
    for (size_t i = 0; i < m->n; i++)
        if (m->free[i].size >= size && (best < 0 || m->free[i].size < m->free[best].size))
            best = (long)i; /* ascending addresses: the first of equal sizes wins */
    return best;
}

static void model_take(fit_model_t *m, long i, size_t size)
{
    m->free[i].base += size;
    m->free[i].size -= size;
    if (m->free[i].size == 0) {
        memmove(&m->free[i], &m->free[i + 1], (m->n - (size_t)i - 1) * sizeof *m->free);
        m->n--;
    }
}

static int model_reserve(void *ctx, size_t size, uintptr_t *base)
{
    fit_model_t *m = ctx;
    if (m->capacity && m->outstanding + size > m->capacity)
        return 1;
    *base = m->next_base;
    m->next_base += size + 4 * MIB;
    m->outstanding += size;
    model_insert(m, *base, size);
    return 0;
}

/* The arena only gives back a wholly free region: it must be one span of the model. */
static int model_release(void *ctx, uintptr_t base, size_t size)
{
    fit_model_t *m = ctx;
    size_t i = 0;
    while (i < m->n && m->free[i].base != base)
        i++;
    REQUIRE(i < m->n && m->free[i].size == size,
            "released region %#lx (%zu bytes) is not wholly free: span %zu of %zu, %zu bytes",
            (unsigned long)base, size, i, m->n, i < m->n ? m->free[i].size : 0);
    memmove(&m->free[i], &m->free[i + 1], (m->n - i - 1) * sizeof *m->free);
    m->n--;
    m->outstanding -= size;
    return 0;
}

static size_t placement_size(uint64_t *rng)
{
    static const size_t fixed[] = {512, 4 * KIB, 24 * KIB, 96 * KIB, 256 * KIB, 3 * MIB};
    uint64_t r = next_rand(rng);
    switch (r % 8) {
    case 0: case 1: case 2: return fixed[(r >> 8) % (sizeof fixed / sizeof *fixed)];
    case 3: case 4: return (size_t)(1 + (r >> 8) % (32 * KIB));
    case 5: return (size_t)(32 * KIB + (r >> 8) % (2 * MIB));
    default: return (size_t)(1 + (r >> 8) % (256 * KIB));
    }
}

typedef struct placement_config {
    size_t initial, limit, capacity;
    int grow;
} placement_config_t;

static const placement_config_t placement_configs[] = {
    {160 * MIB, 0, 0, 0},        /* one preallocated region */
    {0, 192 * MIB, 0, 1},        /* regions on demand under a limit: growth and release */
    {4 * MIB, 0, 176 * MIB, 1},  /* a backend that runs out: retry smaller */
};
#define NPLACEMENT (sizeof placement_configs / sizeof *placement_configs)
#define PLACEMENT_SEEDS 3
#define PLACEMENT_STEPS 12000

static void placement_run(const placement_config_t *pc, uint64_t seed)
{
    static fit_model_t m;
    static uintptr_t live[4096];
    static size_t live_size[4096];
    memset(&m, 0, sizeof m);
    m.next_base = (uintptr_t)1 << 40;
    m.capacity = pc->capacity;
    ga_backend_t b = {model_reserve, model_release, &m};
    ga_config_t cfg = {.initial = pc->initial, .grow = pc->grow, .limit = pc->limit};
    ga_arena_t *a = ga_arena_create(&b, &cfg, NULL);
    ck_assert_ptr_nonnull(a);
    size_t n = 0;
    uint64_t rng = seed;
    for (int step = 0; step < PLACEMENT_STEPS; step++) {
        uint64_t r = next_rand(&rng);
        /* phases of 2,000 steps fill the arena and drain it, so regions empty and come back */
        unsigned free_pct = (step / 2000) % 2 ? 62u : 38u;
        if (n && (r % 100 < free_pct || n == 4096)) {
            size_t i = (size_t)(r >> 8) % n;
            ASSERT_STATUS(ga_free(a, live[i]), GA_OK);
            model_insert(&m, live[i], live_size[i]);
            live[i] = live[--n];
            live_size[i] = live_size[n];
        } else if (r % 100 == 99) {
            ga_trim(a);
        } else {
            size_t size = placement_size(&rng), rounded = ga_round_size_for_tests(size);
            long want = model_fit(&m, rounded);
            uintptr_t got_p = 0;
            ga_status_t st = ga_alloc(a, size, &got_p);
            if (want < 0) /* no span before the call: the arena grew, or must fail */
                want = model_fit(&m, rounded);
            if (want < 0) {
                REQUIRE(st == GA_ENOMEM, "step %d: %zu bytes fit nowhere, ga_alloc said %s", step,
                        rounded, ga_status_str(st));
                continue;
            }
            REQUIRE(st == GA_OK, "step %d: %zu bytes fit at %#lx, ga_alloc said %s", step,
                    rounded, (unsigned long)m.free[want].base, ga_status_str(st));
            REQUIRE(got_p == m.free[want].base,
                    "step %d: %zu bytes placed at %#lx, best fit is %#lx (span of %zu)", step,
                    rounded, (unsigned long)got_p, (unsigned long)m.free[want].base,
                    m.free[want].size);
            model_take(&m, want, rounded);
            live[n] = got_p;
            live_size[n++] = rounded;
        }
        if (step % 64 == 0)
            ASSERT_HEALTHY(a);
    }
    ASSERT_HEALTHY(a);
    ga_stats_t s = stats_of(a);
    uint64_t model_free = 0;
    for (size_t i = 0; i < m.n; i++)
        model_free += m.free[i].size;
    REQUIRE_EQ(s.total_free, model_free);
    REQUIRE_EQ(s.reserved, m.outstanding);
    while (n) { /* everything back: the model then holds whole regions, which trim releases */
        n--;
        ASSERT_STATUS(ga_free(a, live[n]), GA_OK);
        model_insert(&m, live[n], live_size[n]);
    }
    ga_trim(a);
    REQUIRE_EQ(m.outstanding, 0);
    REQUIRE_EQ(m.n, 0);
    ga_arena_destroy(a);
}

START_TEST(test_placement_is_exact_best_fit)
{
    const placement_config_t *pc = &placement_configs[(size_t)_i / PLACEMENT_SEEDS];
    placement_run(pc, 0xB357F17u + (uint64_t)_i);
}
END_TEST

/* Thousands of holes of distinct sizes in three ranged bins (128 sizes each): trees deep enough
 * that the arena cuts them into slices. First with host memory failing, so they stay whole (and
 * frees still succeed), then with it back; separators are freed too, so holes merge and leave
 * their slices. Every allocation must land where the model says. */
static unsigned sliced_bins(const ga_arena_t *a)
{
    unsigned n = 0;
    for (unsigned i = 0; i < GA_FL_COUNT * GA_SL_COUNT; i++)
        n += ga_bin_marked(a, i) && ga_bin_sub(&a->bins[i]) != NULL;
    return n;
}

static void sliced_alloc(ga_arena_t *a, fit_model_t *m, size_t size, uintptr_t *live,
                         size_t *live_size, size_t *n)
{
    long want = model_fit(m, size);
    uintptr_t p = 0;
    ga_status_t st = ga_alloc(a, size, &p);
    if (want < 0) {
        REQUIRE(st == GA_ENOMEM, "%zu bytes fit nowhere, ga_alloc said %s", size,
                ga_status_str(st));
        return;
    }
    REQUIRE(st == GA_OK && p == m->free[want].base, "%zu bytes placed at %#lx, best fit is %#lx",
            size, (unsigned long)p, (unsigned long)m->free[want].base);
    model_take(m, want, size);
    live[*n] = p;
    live_size[(*n)++] = size;
}

/* A subdivided bin that empties is made whole (so that an insertion can tell an empty bin from
 * the bitmap alone) and keeps its slices for the next subdivision: 128 holes of distinct sizes in
 * one ranged bin, freed (the bin is cut), each taken back at its exact size (the bin empties),
 * and freed again (the bin is cut again, with the kept slices: no host memory taken). */
START_TEST(test_sliced_bin_empties_and_is_cut_again)
{
    enum { N = 128 }; /* 37 i mod 128: 128 distinct sizes */
    uintptr_t sep[N], hole[N];
    size_t size[N];
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, N * (4 * MIB + 128 * GA_ALIGN) + MIB, 0, 0, 0);
    for (int i = 0; i < N; i++) {
        size[i] = 4 * MIB + (size_t)((i * 37) % 128) * GA_ALIGN;
        sep[i] = must_alloc(a, GA_ALIGN);
        hole[i] = must_alloc(a, size[i]);
    }
    uintptr_t last = must_alloc(a, GA_ALIGN); /* the last hole merges with no free tail */
    ga_bin_t *bin = &a->bins[ga_bin_of(4 * MIB)];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++)
            ASSERT_STATUS(ga_free(a, hole[i]), GA_OK);
        REQUIRE(ga_bin_sub(bin) != NULL, "round %d: the bin of %d holes is not cut", round, N);
        ASSERT_HEALTHY(a);
        uint64_t host = ga_host_bytes;
        for (int i = N; i-- > 0;) {
            uintptr_t p = must_alloc(a, size[i]);
            REQUIRE(p == hole[i], "round %d: %zu bytes at %#lx, the hole of that size is %#lx",
                    round, size[i], (unsigned long)p, (unsigned long)hole[i]);
        }
        REQUIRE(!ga_bin_marked(a, ga_bin_of(4 * MIB)) && ga_bin_sub(bin) == NULL,
                "round %d: the emptied bin is not whole and empty", round);
        REQUIRE(round == 0 || ga_host_bytes == host,
                "round %d: host memory taken for slices already kept", round);
        ASSERT_HEALTHY(a);
    }
    for (int i = 0; i < N; i++) {
        ASSERT_STATUS(ga_free(a, hole[i]), GA_OK);
        ASSERT_STATUS(ga_free(a, sep[i]), GA_OK);
    }
    ASSERT_STATUS(ga_free(a, last), GA_OK);
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

START_TEST(test_best_fit_sliced_bins)
{
    enum { N = 2000, CAP = 3 * N };
    static fit_model_t m;
    static uintptr_t live[CAP];
    static size_t live_size[CAP], hole_size[N];
    memset(&m, 0, sizeof m);
    m.next_base = (uintptr_t)1 << 40;
    uint64_t rng = 0x511CEDull;
    size_t total = MIB, n = 0;
    for (int i = 0; i < N; i++) {
        hole_size[i] = (8192 + (size_t)(next_rand(&rng) % 384)) * GA_ALIGN;
        total += hole_size[i] + GA_ALIGN;
    }
    ga_backend_t b = {model_reserve, model_release, &m};
    ga_config_t cfg = {.initial = total};
    ga_arena_t *a = ga_arena_create(&b, &cfg, NULL);
    ck_assert_ptr_nonnull(a);
    for (int i = 0; i < N; i++) {
        sliced_alloc(a, &m, GA_ALIGN, live, live_size, &n); /* a separator at 2i */
        sliced_alloc(a, &m, hole_size[i], live, live_size, &n);
    }
    REQUIRE_EQ(n, 2 * N);
    ga_host_fail_after = 0; /* no slices can be made: the bins stay whole trees */
    for (size_t i = 1; i < 2 * N; i += 2) {
        ASSERT_STATUS(ga_free(a, live[i]), GA_OK);
        model_insert(&m, live[i], live_size[i]);
    }
    for (size_t i = 0; i < N; i++) { /* the separators stay live, in the first N entries */
        live[i] = live[2 * i];
        live_size[i] = live_size[2 * i];
    }
    n = N;
    ASSERT_HEALTHY(a);
    REQUIRE_EQ(sliced_bins(a), 0);
    for (int step = 0; step < 20000; step++) {
        if (step == 2000)
            ga_host_fail_after = -1; /* host memory is back: the deep bins get sliced */
        uint64_t r = next_rand(&rng);
        if (n && (r % 100 < 45 || n == CAP)) {
            size_t i = (size_t)(r >> 8) % n;
            ASSERT_STATUS(ga_free(a, live[i]), GA_OK);
            model_insert(&m, live[i], live_size[i]);
            live[i] = live[--n];
            live_size[i] = live_size[n];
        } else {
            size_t size = (8192 - 64 + (size_t)((r >> 8) % 512)) * GA_ALIGN;
            sliced_alloc(a, &m, r % 7 ? size : GA_ALIGN * (1 + (r >> 40) % 300), live,
                         live_size, &n);
        }
        if (step % 500 == 0)
            ASSERT_HEALTHY(a);
        if (step == 1999)
            REQUIRE_EQ(sliced_bins(a), 0);
    }
    ga_host_fail_after = -1;
    ASSERT_HEALTHY(a);
    REQUIRE(sliced_bins(a) >= 3, "only %u bins were sliced", sliced_bins(a));
    while (n) {
        n--;
        ASSERT_STATUS(ga_free(a, live[n]), GA_OK);
        model_insert(&m, live[n], live_size[n]);
    }
    ASSERT_HEALTHY(a);
    REQUIRE_EQ(m.n, 1);
    ga_arena_destroy(a);
}
END_TEST

/* Thousands of equal holes in one bin (once a list scan per allocation): each allocation takes
 * the lowest free hole, and a hole freed anywhere is the next one taken if it is now the lowest. */
START_TEST(test_best_fit_many_equal_holes)
{
    enum { N = 5000 };
    static uintptr_t slot[2 * N];
    static unsigned char is_hole[N];
    fake_backend_t f;
    ga_arena_t *a = fake_arena(&f, 2 * N * 8 * KIB + 1 * MIB, 0, 0, 0);
    for (int i = 0; i < 2 * N; i++)
        slot[i] = must_alloc(a, 8 * KIB); /* holes at odd slots, live separators at even ones */
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(ga_free(a, slot[2 * i + 1]), GA_OK);
        is_hole[i] = 1;
    }
    ASSERT_HEALTHY(a);
    uint64_t rng = 7;
    for (int step = 0; step < 20000; step++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        int lowest = 0;
        while (lowest < N && !is_hole[lowest])
            lowest++;
        if (lowest < N && (rng >> 63)) {
            REQUIRE_EQ(must_alloc(a, 8 * KIB - 100), slot[2 * lowest + 1]);
            is_hole[lowest] = 0;
        } else {
            int i = (int)((rng >> 20) % N);
            if (!is_hole[i]) {
                ASSERT_STATUS(ga_free(a, slot[2 * i + 1]), GA_OK);
                is_hole[i] = 1;
            }
        }
        if (step % 1000 == 0)
            ASSERT_HEALTHY(a);
    }
    ASSERT_HEALTHY(a);
    ga_arena_destroy(a);
}
END_TEST

Suite *random_suite(void)
{
    Suite *s = suite_create("random");
    TCase *tc = tcase_create("differential");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_differential, 0, (int)(NCONFIGS * NSEEDS));
    suite_add_tcase(s, tc);
    TCase *fit = tcase_create("placement");
    tcase_set_timeout(fit, 60);
    tcase_add_loop_test(fit, test_placement_is_exact_best_fit, 0,
                        (int)(NPLACEMENT * PLACEMENT_SEEDS));
    tcase_add_test(fit, test_best_fit_many_equal_holes);
    tcase_add_test(fit, test_best_fit_sliced_bins);
    tcase_add_test(fit, test_sliced_bin_empties_and_is_cut_again);
    suite_add_tcase(s, fit);
    return s;
}
