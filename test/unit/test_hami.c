/* Unit tests for ga_hami_limit (shim/group_host.c): the device plugins' CUDA_DEVICE_MEMORY_LIMIT and
 * CUDA_DEVICE_MEMORY_LIMIT_<i>, read from an environ-style array so nothing here touches the
 * process's environment.
 *
 * The meaning checked is HAMi-core's, as its README states it ("1g, 1024m, 1048576k, 1073741824"
 * are one limit: https://github.com/Project-HAMi/HAMi-core#usage) and as its parser applies it (a
 * final g/m/k in either case is 2^30/2^20/2^10, a plain number bytes, the per-device name before
 * the global one); HAMi's device plugin writes values such as 8192m.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../shim/ga_group.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

/* The bytes one environment gives device dev; -1 or 0 as the function returns. */
static int64_t limit(int dev, char *const *envp)
{
    uint64_t b = 0;
    char err[512];
    int rc = ga_hami_limit(envp, dev, &b, err, sizeof err);
    return rc == 1 ? (int64_t)b : rc;
}

START_TEST(hami_forms)
{
    /* The README's four spellings of one GiB, and HAMi's device-plugin style. */
    const char *same[] = {"1g", "1G", "1024m", "1024M", "1048576k", "1048576K", "1073741824"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char v[64];
        snprintf(v, sizeof v, "CUDA_DEVICE_MEMORY_LIMIT=%s", same[i]);
        char *env[] = {v, NULL};
        ck_assert_msg(limit(0, env) == (int64_t)GIB, "%s is 1 GiB", same[i]);
    }
    char *env[] = {"CUDA_DEVICE_MEMORY_LIMIT=8192m", NULL};
    ck_assert_int_eq(limit(0, env), 8192 * MIB);
    char *g8[] = {"CUDA_DEVICE_MEMORY_LIMIT=8g", NULL};
    ck_assert_int_eq(limit(3, g8), 8 * GIB);
}
END_TEST

START_TEST(hami_per_device)
{
    char *env[] = {"OTHER=1", "CUDA_DEVICE_MEMORY_LIMIT=8g", "CUDA_DEVICE_MEMORY_LIMIT_1=4096m",
                   "CUDA_DEVICE_MEMORY_LIMIT_10=2g", NULL};
    ck_assert_int_eq(limit(0, env), 8 * GIB);    /* no _0: the global one */
    ck_assert_int_eq(limit(1, env), 4096 * MIB); /* _1 overrides it */
    ck_assert_int_eq(limit(10, env), 2 * GIB);   /* _10 is not _1 followed by junk */
    char *only[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=3000m", NULL};
    ck_assert_int_eq(limit(0, only), 3000 * MIB);
    ck_assert_int_eq(limit(1, only), 0); /* nothing for device 1 */
    char *empty[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=", "CUDA_DEVICE_MEMORY_LIMIT=2g", NULL};
    ck_assert_int_eq(limit(0, empty), 2 * GIB); /* empty is unset, as HAMi reads it */
    char *none[] = {"CUDA_DEVICE_MEMORY_LIMITS=1g", "XCUDA_DEVICE_MEMORY_LIMIT=1g", NULL};
    ck_assert_int_eq(limit(0, none), 0);
    ck_assert_int_eq(limit(0, NULL), 0);
}
END_TEST

START_TEST(hami_refused)
{
    const char *bad[] = {"8XB", "-1g", "0", "0m", "50%", "0x100000", "1e9", "8 g b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char v[64], err[512] = "";
        snprintf(v, sizeof v, "CUDA_DEVICE_MEMORY_LIMIT_2=%s", bad[i]);
        char *env[] = {v, NULL};
        uint64_t b = 7;
        ck_assert_msg(ga_hami_limit(env, 2, &b, err, sizeof err) == -1 && b == 7, "%s refused", bad[i]);
        ck_assert_msg(!strncmp(err, "gpuarena: CUDA_DEVICE_MEMORY_LIMIT_2=", 37), "%s", err);
        ck_assert_msg(strstr(err, "8192m") != NULL, "the message shows HAMi's forms: %s", err);
    }
}
END_TEST

Suite *hami_suite(void)
{
    Suite *s = suite_create("hami");
    TCase *tc = tcase_create("limits");
    tcase_add_test(tc, hami_forms);
    tcase_add_test(tc, hami_per_device);
    tcase_add_test(tc, hami_refused);
    suite_add_tcase(s, tc);
    return s;
}
