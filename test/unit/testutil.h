/* Shared assertions for the arena tests: ga_check with its report in the failure message, and
 * small constructors so each test states only the configuration it cares about. */
#ifndef GA_TEST_UTIL_H
#define GA_TEST_UTIL_H

#include <check.h>
#include <string.h>

#include "backends.h"
#include "ga_arena.h"

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)

/* Check's ck_assert_* write a mark to a pipe on every passing assertion; the randomised tests
 * make millions of them, so hot loops use REQUIRE, which only calls into Check on failure. */
#define REQUIRE(cond, ...)                                                     \
    do {                                                                       \
        if (!(cond))                                                           \
            ck_abort_msg(__VA_ARGS__);                                         \
    } while (0)
#define REQUIRE_EQ(x, y)                                                       \
    REQUIRE((uint64_t)(x) == (uint64_t)(y), "%s == %s failed: %lu != %lu", #x, #y, \
            (unsigned long)(x), (unsigned long)(y))

/* splitmix64: the next of a seeded sequence of 64-bit numbers from *state (tests that need the
 * same sequence in two files share it from here). */
static inline uint64_t tu_splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#define ASSERT_HEALTHY(a)                                                      \
    do {                                                                       \
        char rep_[1024];                                                       \
        int n_ = ga_check((a), rep_, sizeof rep_);                             \
        REQUIRE(n_ == 0, "ga_check found %d failures:\n%s", n_, rep_);   \
    } while (0)

#define ASSERT_STATUS(expr, want)                                              \
    do {                                                                       \
        ga_status_t got_ = (expr);                                             \
        REQUIRE(got_ == (want), "%s returned %s, expected %s", #expr,    \
                      ga_status_str(got_), ga_status_str(want));               \
    } while (0)

static inline ga_arena_t *fake_arena(fake_backend_t *f, size_t initial, int grow, size_t limit,
                                     size_t min_region)
{
    fake_init(f);
    ga_backend_t b = fake_backend(f);
    ga_config_t cfg = {.initial = initial, .grow = grow, .limit = limit,
                       .min_region = min_region};
    ga_status_t st = GA_EINVAL;
    ga_arena_t *a = ga_arena_create(&b, &cfg, &st);
    ck_assert_msg(a && st == GA_OK, "arena creation failed: %s", ga_status_str(st));
    return a;
}

static inline uintptr_t must_alloc(ga_arena_t *a, size_t size)
{
    uintptr_t p = 0;
    ga_status_t st = ga_alloc(a, size, &p);
    REQUIRE(st == GA_OK, "ga_alloc(%zu) failed: %s", size, ga_status_str(st));
    REQUIRE(p % GA_ALIGN == 0, "ga_alloc(%zu) returned unaligned %#lx", size,
                  (unsigned long)p);
    return p;
}

static inline ga_stats_t stats_of(const ga_arena_t *a)
{
    ga_stats_t s;
    ga_get_stats(a, &s);
    return s;
}

/* The arena suite's "regions" tests (test_arena_regions.c), added to that case. */
void arena_regions_add(TCase *reg);

#endif
