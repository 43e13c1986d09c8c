/* Unit tests for the device-address model (allocator/va_fit.c, ga_vafit.h), which the replay's
 * backend and the simulated driver both place allocations by: the lowest free place, rising, in
 * 64 KiB units, freed places reused. Checked against a plain model (a byte map of units scanned
 * from the bottom, alignments of 1 to 8 units) over a seeded random run, and at its edges: a full
 * range, a place that is not one, sizes that round, an aligned place's padding. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ga_vafit.h"

#define U GA_VA_UNIT
#define LO ((uintptr_t)1 << 40)

START_TEST(vafit_rises_and_reuses)
{
    ga_vafit_t v;
    ga_vafit_init(&v, LO + 1, LO + 64 * U); /* lo rounds up to a unit */
    uintptr_t a, b, c, d;
    ck_assert_int_eq(ga_vafit_take(&v, 512, &a), 0);
    ck_assert_uint_eq(a, LO + U);
    ck_assert_int_eq(ga_vafit_take(&v, U + 1, &b), 0); /* two units */
    ck_assert_uint_eq(b, a + U);
    ck_assert_int_eq(ga_vafit_take(&v, U, &c), 0);
    ck_assert_uint_eq(c, b + 2 * U);
    ck_assert_uint_eq(ga_vafit_give(&v, b), 2 * U);
    ck_assert_uint_eq(ga_vafit_give(&v, b), 0); /* no place starts there any more */
    ck_assert_uint_eq(ga_vafit_give(&v, a + 512), 0);
    ck_assert_int_eq(ga_vafit_take(&v, 3 * U, &d), 0); /* b's hole holds 2 units: past c */
    ck_assert_uint_eq(d, c + U);
    ck_assert_int_eq(ga_vafit_take(&v, U, &d), 0); /* the lowest free place: b's */
    ck_assert_uint_eq(d, b);
    ck_assert_int_eq(ga_vafit_take(&v, 0, &d), -1);
    ck_assert_int_eq(ga_vafit_take(&v, SIZE_MAX, &d), -1);
    ga_vafit_fini(&v);
}
END_TEST

START_TEST(vafit_full_range_refused)
{
    ga_vafit_t v;
    ga_vafit_init(&v, LO, LO + 4 * U);
    uintptr_t a, b;
    ck_assert_int_eq(ga_vafit_take(&v, 3 * U, &a), 0);
    ck_assert_int_eq(ga_vafit_take(&v, 2 * U, &b), -1); /* one unit left */
    ck_assert_int_eq(ga_vafit_take(&v, U, &b), 0);
    ck_assert_uint_eq(b, LO + 3 * U);
    ck_assert_int_eq(ga_vafit_take(&v, 1, &b), -1);
    ck_assert_uint_eq(ga_vafit_give(&v, a), 3 * U);
    ck_assert_int_eq(ga_vafit_take(&v, 3 * U, &b), 0);
    ck_assert_uint_eq(b, LO);
    ga_vafit_fini(&v);
}
END_TEST

/* A vmm range: the lowest free place on a multiple of the alignment, the padding below it free. */
START_TEST(vafit_aligned)
{
    ga_vafit_t v;
    ga_vafit_init(&v, LO, LO + 256 * U);
    uintptr_t a, b, c, d;
    ck_assert_int_eq(ga_vafit_take(&v, U, &a), 0);
    ck_assert_int_eq(ga_vafit_take_aligned(&v, 32 * U, 32 * U, &b), 0);
    ck_assert_uint_eq(b, LO + 32 * U); /* units 1 to 31 are padding */
    ck_assert_int_eq(ga_vafit_take(&v, 31 * U, &c), 0);
    ck_assert_uint_eq(c, LO + U); /* the padding is free */
    ck_assert_int_eq(ga_vafit_take_aligned(&v, U, 3 * U, &d), -1); /* not a power of two */
    ck_assert_int_eq(ga_vafit_take_aligned(&v, U, 512, &d), 0);   /* under a unit: one unit */
    ck_assert_uint_eq(d, LO + 64 * U);
    /* an address asked for: taken as given where free, refused where not */
    ck_assert_int_eq(ga_vafit_take_at(&v, 2 * U, LO + 100 * U), 0);
    ck_assert_int_eq(ga_vafit_take_at(&v, U, LO + 101 * U), -1); /* inside it */
    ck_assert_int_eq(ga_vafit_take_at(&v, 2 * U, LO + 99 * U), -1); /* overlaps its start */
    ck_assert_int_eq(ga_vafit_take_at(&v, U, LO + 64 * U), -1);  /* d's */
    ck_assert_int_eq(ga_vafit_take_at(&v, U, LO + 65 * U + 512), -1); /* not on a unit */
    ck_assert_int_eq(ga_vafit_take_at(&v, 2 * U, LO + 255 * U), -1); /* past the range */
    ck_assert_int_eq(ga_vafit_take_at(&v, U, LO + 65 * U), 0);   /* right after d: the floor */
    ck_assert_int_eq(ga_vafit_take(&v, U, &d), 0);
    ck_assert_uint_eq(d, LO + 66 * U);
    ga_vafit_fini(&v);
}
END_TEST

/* The model: units[i] says who holds unit i (0: free); a place is the lowest run of free units
 * that holds it. */
#define N_UNITS 256
static size_t model_take(const unsigned char *units, size_t n, size_t align)
{
    for (size_t i = 0; i + n <= N_UNITS; i += align) {
        size_t k = 0;
        while (k < n && !units[i + k])
            k++;
        if (k == n)
            return i;
    }
    return SIZE_MAX;
}

START_TEST(vafit_against_a_model)
{
    unsigned char units[N_UNITS] = {0};
    uintptr_t live[64] = {0};
    size_t span[64] = {0};
    ga_vafit_t v;
    ga_vafit_init(&v, LO, LO + N_UNITS * U);
    unsigned seed = 12345;
    for (int step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        size_t k = (seed >> 8) % 64;
        if (live[k]) {
            ck_assert_uint_eq(ga_vafit_give(&v, live[k]), span[k] * U);
            memset(&units[(live[k] - LO) / U], 0, span[k]);
            live[k] = 0;
            continue;
        }
        size_t bytes = 1 + (seed >> 12) % (12 * U);
        size_t align = (size_t)1 << ((seed >> 20) % 4); /* in units: 1, 2, 4 or 8 */
        size_t n = (bytes + U - 1) / U, want = model_take(units, n, align);
        uintptr_t at = 0;
        int got = ga_vafit_take_aligned(&v, bytes, align * U, &at);
        ck_assert_msg(got == (want == SIZE_MAX ? -1 : 0), "step %d: take %zu units: %d", step, n,
                      got);
        if (got != 0)
            continue;
        ck_assert_msg(at == LO + want * U, "step %d: placed at unit %zu, the model at %zu", step,
                      (size_t)((at - LO) / U), want);
        memset(&units[want], 1, n);
        live[k] = at, span[k] = n;
    }
    ga_vafit_fini(&v);
}
END_TEST

Suite *vafit_suite(void)
{
    Suite *s = suite_create("vafit");
    TCase *tc = tcase_create("vafit");
    tcase_add_test(tc, vafit_rises_and_reuses);
    tcase_add_test(tc, vafit_full_range_refused);
    tcase_add_test(tc, vafit_aligned);
    tcase_add_test(tc, vafit_against_a_model);
    suite_add_tcase(s, tc);
    return s;
}
