/* Unit tests for the size grammar (allocator/size.c).
 *
 * The cases are the shared table test/sizes.tsv, which the command tier also runs through the
 * replay tool, the simulated driver, the shim and the Python parser, so the five cannot drift
 * apart. Each row is parsed four times: with percentages allowed (what GPUARENA_LIMIT reads) and
 * without (every other size), where a percentage row must be refused, each with and without
 * GA_SIZE_ZERO (GPUARENA_VMM_KEEP), where a "zero" row is 0 bytes or must be refused. The exact percentage arithmetic and
 * the message are checked here on their own. The table is found at $GA_SIZES_TSV or, as make runs
 * the tests from the repository root, test/sizes.tsv.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ga_size.h"

/* N copies of c appended at *w in out (grown as needed); the position after them. */
static size_t put_run(char **out, size_t *cap, size_t w, char c, size_t n)
{
    if (w + n + 1 > *cap) {
        *cap = w + n + 1;
        *out = realloc(*out, *cap);
        ck_assert_msg(*out != NULL, "out of memory decoding a row");
    }
    memset(*out + w, c, n);
    return w + n;
}

/* Decodes \s \t \n \\ and \{C*N} (N copies of C: a row's number of thousands of digits)
 * into a new string, which the caller frees. */
static char *unescape(const char *s)
{
    size_t cap = strlen(s) + 1, w = 0;
    char *out = malloc(cap);
    ck_assert_msg(out != NULL, "out of memory decoding a row");
    for (const char *r = s; *r; r++) {
        if (*r != '\\' || !r[1]) {
            w = put_run(&out, &cap, w, *r, 1);
            continue;
        }
        r++;
        if (*r == '{' && r[1] && r[2] == '*') {
            char *end;
            unsigned long n = strtoul(r + 3, &end, 10);
            ck_assert_msg(*end == '}' && n > 0 && n < 100000, "bad run escape in '%s'", s);
            w = put_run(&out, &cap, w, r[1], n);
            r = end;
            continue;
        }
        w = put_run(&out, &cap, w, *r == 's' ? ' ' : *r == 't' ? '\t' : *r == 'n' ? '\n' : *r, 1);
    }
    out[w] = '\0';
    return out;
}

/* Checks one row under one set of flags. */
static void check_row(int line, const char *input, const char *expected, unsigned flags)
{
    ga_size_t sz;
    char err[16384] = ""; /* the message repeats the input: rows of thousands of digits */
    int rc = ga_size_parse(input, flags, &sz, err, sizeof err);
    int pct_ok = (flags & GA_SIZE_PERCENT) != 0;
    if (!strncmp(expected, "bytes ", 6)) {
        unsigned long long want = strtoull(expected + 6, NULL, 10);
        ck_assert_msg(rc == 0 && !sz.is_percent && sz.bytes == want,
                      "line %d '%s': expected %llu bytes, got rc %d bytes %llu (%s)", line, input,
                      want, rc, (unsigned long long)sz.bytes, err);
    } else if (!strcmp(expected, "zero") && (flags & GA_SIZE_ZERO)) {
        ck_assert_msg(rc == 0 && !sz.is_percent && sz.bytes == 0,
                      "line %d '%s': expected 0 bytes under GA_SIZE_ZERO, got rc %d (%s)", line,
                      input, rc, err);
    } else if (!strncmp(expected, "percent ", 8) && pct_ok) {
        double want = strtod(expected + 8, NULL);
        ck_assert_msg(rc == 0 && sz.is_percent, "line %d '%s': expected %s, got rc %d (%s)", line,
                      input, expected, rc, err);
        ck_assert_msg(sz.percent > want * (1 - 1e-12) && sz.percent < want * (1 + 1e-12),
                      "line %d '%s': percent %g, expected %g", line, input, sz.percent, want);
    } else {
        ck_assert_msg(!strcmp(expected, "error") || !strcmp(expected, "zero") ||
                          !strncmp(expected, "percent ", 8),
                      "line %d: bad expectation '%s'", line, expected);
        ck_assert_msg(rc == -1, "line %d '%s': expected an error, parsed it (%llu bytes)", line,
                      input, (unsigned long long)sz.bytes);
        ck_assert_msg(strstr(err, "is not a size: ") && strstr(err, "try 8GiB"),
                      "line %d '%s': message does not say what is accepted: %s", line, input, err);
    }
}

START_TEST(size_table)
{
    const char *path = getenv("GA_SIZES_TSV");
    FILE *f = fopen(path && *path ? path : "test/sizes.tsv", "r");
    ck_assert_msg(f, "cannot open test/sizes.tsv (run from the repository root or set "
                     "GA_SIZES_TSV)");
    char buf[1024];
    int line = 0, rows = 0;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        buf[strcspn(buf, "\n")] = '\0';
        if (buf[0] == '#' || buf[0] == '\0')
            continue;
        char *tab = strchr(buf, '\t');
        ck_assert_msg(tab && !strchr(tab + 1, '\t'), "line %d: not INPUT<TAB>EXPECTED", line);
        *tab = '\0';
        char *input = unescape(buf);
        check_row(line, input, tab + 1, GA_SIZE_PERCENT);
        check_row(line, input, tab + 1, 0);
        check_row(line, input, tab + 1, GA_SIZE_ZERO);
        check_row(line, input, tab + 1, GA_SIZE_ZERO | GA_SIZE_PERCENT);
        free(input);
        rows++;
    }
    fclose(f);
    ck_assert_msg(rows >= 100, "only %d rows in the table", rows);
}
END_TEST

START_TEST(size_percent_exact)
{
    ga_size_t s;
    ck_assert_int_eq(ga_size_parse("12.5%", GA_SIZE_PERCENT, &s, NULL, 0), 0);
    ck_assert_uint_eq(ga_size_percent_of(&s, 8ull << 30), 1ull << 30);
    ck_assert_int_eq(ga_size_parse("100%", GA_SIZE_PERCENT, &s, NULL, 0), 0);
    ck_assert_uint_eq(ga_size_percent_of(&s, UINT64_MAX), UINT64_MAX);
    /* 1/3 of a percent of 3 GB: 10^7 exactly would need infinitely many digits; floor. */
    ck_assert_int_eq(ga_size_parse("0.33333333333333333333%", GA_SIZE_PERCENT, &s, NULL, 0), 0);
    ck_assert_uint_eq(ga_size_percent_of(&s, 3000000000ull), 9999999);
    /* A share that rounds to nothing is 0: the caller refuses it. */
    ck_assert_int_eq(ga_size_parse("0.00000001%", GA_SIZE_PERCENT, &s, NULL, 0), 0);
    ck_assert_uint_eq(ga_size_percent_of(&s, 1ull << 30), 0);
    ck_assert_int_eq(ga_size_parse("1GiB", GA_SIZE_PERCENT, &s, NULL, 0), 0);
    ck_assert_uint_eq(ga_size_percent_of(&s, 12345), 1ull << 30);
}
END_TEST

START_TEST(size_messages)
{
    ga_size_t s;
    char err[512];
    ck_assert_int_eq(ga_size_parse("12XB", GA_SIZE_PERCENT, &s, err, sizeof err), -1);
    ck_assert_str_eq(err, "'12XB' is not a size: unknown unit 'XB' (try 8GiB, 512MiB, 1.5G, 4096 "
                          "or 50%; units B, K/KiB, M/MiB, G/GiB, T/TiB = x1024, kB, MB, GB, TB = "
                          "x1000, in any case)");
    ck_assert_int_eq(ga_size_parse("50%", 0, &s, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "a percentage is not accepted here"));
    ck_assert_ptr_null(strstr(err, "or 50%"));
    ck_assert_int_eq(ga_size_parse("1e3", 0, &s, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "exponents are not accepted: write the number out, as 1000 "
                                      "or 1GB, not 1e3 or 1e9"));
    ck_assert_int_eq(ga_size_parse(NULL, 0, &s, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "nothing given"));
    /* A short buffer is truncated, never overrun; no buffer at all is allowed. */
    char small[8];
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(ga_size_parse("junk", 0, &s, small, 5), -1);
    ck_assert_str_eq(small, "'jun");
    ck_assert_int_eq(small[5], 'x');
    ck_assert_int_eq(ga_size_parse("junk", 0, &s, NULL, 0), -1);
}
END_TEST

/* A unit word alone, what the shell leaves of an unquoted "8 GiB" (gpuarena-replay's hint). */
START_TEST(size_is_unit)
{
    static const char *const units[] = {"B", "k", "KiB", "mb", "GiB", "gIb", "T", "TB", "%"};
    static const char *const not_units[] = {"", "8GiB", "GiBs", "XB", "%%", " GiB", "gi", NULL};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        ck_assert_msg(ga_size_is_unit(units[i]), "'%s' is a unit", units[i]);
    for (size_t i = 0; i < sizeof not_units / sizeof not_units[0]; i++)
        ck_assert_msg(!ga_size_is_unit(not_units[i]), "'%s' is not a unit",
                      not_units[i] ? not_units[i] : "(null)");
}
END_TEST

Suite *size_suite(void)
{
    Suite *s = suite_create("size");
    TCase *tc = tcase_create("grammar");
    tcase_add_test(tc, size_table);
    tcase_add_test(tc, size_percent_exact);
    tcase_add_test(tc, size_messages);
    tcase_add_test(tc, size_is_unit);
    suite_add_tcase(s, tc);
    return s;
}
