/* Unit test runner: every suite listed in suites.h, in one Check runner. Check writes TAP to
 * $CK_TAP_LOG_FILE_NAME when it is set (the test-unit tier sets it), and CK_RUN_SUITE /
 * CK_RUN_CASE select a subset when debugging. Exits non-zero when a test fails; the make tier
 * ignores that and lets the summary script count the TAP lines. */
#include <check.h>
#include <stdlib.h>

#define X(name) Suite *name(void);
#include "suites.h"
#undef X

int main(void)
{
    SRunner *sr = srunner_create(NULL);
#define X(name) srunner_add_suite(sr, name());
#include "suites.h"
#undef X
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
