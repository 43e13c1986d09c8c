/* Randomised differential test of the arena against a reference model: a plain array of live
 * [base, base + rounded size) intervals. Each run is a seeded sequence of allocations (1 B to
 * 4 MiB, most of them small), frees, bad frees, interior lookups and trims, under one of several
 * configurations (on demand, preallocated, with and without a limit, host and fake backends).
 * After every step: ga_check is clean and the statistics match the model. Every allocation is
 * checked against every live interval for overlap, and with the host backend its bytes are
 * stamped and verified on free, so two allocations sharing memory would also show in the data.
 */
#include <stdlib.h>

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

Suite *random_suite(void)
{
    Suite *s = suite_create("random");
    TCase *tc = tcase_create("differential");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_differential, 0, (int)(NCONFIGS * NSEEDS));
    suite_add_tcase(s, tc);
    return s;
}
