/* The known name a misspelt one most likely means (allocator/ga_names.h): the rule the shim's
 * unknown GPUARENA_* settings and gpuarena-replay's unknown options use. test/cmd's
 * test_unknown_names_one_rule runs the same kind of list through the shim and gpuarena doctor
 * (its Python twin, scripts/gpuarena_cli/names.py). */
#include "ga_names.h"

#include <check.h>
#include <string.h>

START_TEST(names_distance)
{
    ck_assert_uint_eq(ga_edit_distance("LIMT", "LIMIT"), 1);
    ck_assert_uint_eq(ga_edit_distance("LMIIT", "LIMIT"), 1); /* a swap is one edit */
    ck_assert_uint_eq(ga_edit_distance("", "ABC"), 3);
    ck_assert_uint_eq(ga_edit_distance("KITTEN", "SITTING"), 3);
    char longer[70];
    memset(longer, 'A', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    ck_assert_uint_eq(ga_edit_distance(longer, "A"), (size_t)-1);
}
END_TEST

START_TEST(names_closest)
{
    static const char *const known[] = {"GPUARENA_LOG", "GPUARENA_MODE", "GPUARENA_LIMIT",
                                        "GPUARENA_MEM_FRACTION", "GPUARENA_VMM_KEEP",
                                        "GPUARENA_GROUP", "GPUARENA_GROUP_DIR"};
    static const struct { const char *typed, *want; } rows[] = {
        {"GPUARENA_LIMT", "GPUARENA_LIMIT"}, {"GPUARENA_lmiit", "GPUARENA_LIMIT"},
        {"GPUARENA_mode", "GPUARENA_MODE"}, {"GPUARENA_MEMORY_LIMIT", "GPUARENA_LIMIT"},
        {"GPUARENA_FRACTION", "GPUARENA_MEM_FRACTION"}, {"GPUARENA_KEEP", "GPUARENA_VMM_KEEP"},
        {"GPUARENA_GROUPDIR", "GPUARENA_GROUP_DIR"}, {"GPUARENA_GROUP_NAME", "GPUARENA_GROUP"},
        {"GPUARENA_CAP", NULL}, {"GPUARENA_FOO", NULL}, {"GPUARENA_DEBUG", NULL},
        {"GPUARENA_", NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *got = ga_closest_name(rows[i].typed, known, sizeof known / sizeof known[0],
                                          9, 1);
        ck_assert_msg(got == rows[i].want || (got && rows[i].want && !strcmp(got, rows[i].want)),
                      "%s: got %s, want %s", rows[i].typed, got ? got : "none",
                      rows[i].want ? rows[i].want : "none");
    }
    /* Without folding case matters; options compare after "--". */
    static const char *const opts[] = {"--limit", "--mode", "--json"};
    ck_assert_str_eq(ga_closest_name("--mdoe", opts, 3, 2, 0), "--mode");
    ck_assert_ptr_null(ga_closest_name("--LIMIT", opts, 3, 2, 0));
    ck_assert_ptr_null(ga_closest_name("--x", opts, 3, 2, 0));
}
END_TEST

Suite *names_suite(void)
{
    Suite *s = suite_create("names");
    TCase *tc = tcase_create("closest");
    tcase_add_test(tc, names_distance);
    tcase_add_test(tc, names_closest);
    suite_add_tcase(s, tc);
    return s;
}
