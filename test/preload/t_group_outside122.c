/* Findings of an outside check of groups (issue 11) and hardening (issue 8), helper-122, each a
 * test that failed before its fix. Helpers: t_group.c. */
#include "t_group.h"
#include "../../shim/group_layout.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a vmm member whose first block the group has no room for is told so, not "full" ----
 * vmm asks the group's room before its first commit, so the process had no slot yet, and the
 * out-of-memory line said "the group is full: all its 256 slots are taken" in a group of two. */
static void o122_vmm_newcomer(void *arg)
{
    (void)arg;
    member_start("GPUARENA_MODE=vmm");
    CUdeviceptr p;
    exit(cuMemAlloc(&p, 600 * MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1);
}

START_TEST(group_vmm_newcomer_short_of_bytes_not_full)
{
    group_env("1GiB");
    pid_t hog = group_holder(600 * MiB);
    char err[8192];
    int rc = pt_run_child(o122_vmm_newcomer, NULL, err, sizeof err);
    kill(hog, SIGKILL);
    waitpid(hog, NULL, 0);
    ck_assert_msg(rc == 0, "600 MiB beside another member's 600 MiB under 1 GiB refused (exit %d): %s",
                  rc, err);
    ck_assert_msg(!strstr(err, "the group is full") && strstr(err, "not enough free bytes in the group") &&
                      strstr(err, "other members hold 600 MiB"),
                  "the refusal says the group is short of bytes, not of slots: %s", err);
    group_cleanup();
}
END_TEST

TCase *pt_tcase_group_outside122(void)
{
    TCase *tc = tcase_create("group_outside122");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, group_vmm_newcomer_short_of_bytes_not_full);
    return tc;
}
