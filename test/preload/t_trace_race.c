/* Two writers of one trace path, in the order that destroyed a kept copy (helper-114 found it,
 * helper-119 reproduced it; 2026-12-07): process B opens an old trace T, hard-linked by the user
 * to K, and is held before it takes its lock (flockgate_prog's gate); process C runs whole on the
 * same path: it finds T hard-linked, renames a fresh file onto T and releases its lock at exit; B
 * then locks the old file, whose only name is now K, and truncated it. B must see that the file
 * it holds is no longer the one at the path, leave it whole and run untraced. */
#include "preload_test.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The program beside the shim's folder's sibling, as hostfail_prog: BUILD/preload/flockgate_prog. */
static void tr_prog(char *out, size_t len)
{
    const char *shim = getenv("PT_SHIM");
    ck_assert_msg(shim && strrchr(shim, '/'), "PT_SHIM is set by the tier");
    snprintf(out, len, "%.*s/../preload/flockgate_prog", (int)(strrchr(shim, '/') - shim), shim);
}

/* Runs cmd through sh, stdout and stderr to `log`, in the background; its pid. */
static pid_t tr_spawn(const char *cmd, const char *log)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int tr_wait(pid_t pid)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static size_t tr_read(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return (size_t)-1;
    size_t n = fread(buf, 1, len, f);
    fclose(f);
    return n;
}

START_TEST(trace_taken_while_opening_leaves_the_kept_copy)
{
    char dir[] = "/tmp/gatest-trrace-XXXXXX", prog[4096], cmd[16384], t[4200], k[4200], log[4200];
    char reached[4200], go[4200];
    static char before[1 << 16], after[1 << 16];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    tr_prog(prog, sizeof prog);
    snprintf(t, sizeof t, "%s/T", dir);
    snprintf(k, sizeof k, "%s/K", dir);
    snprintf(reached, sizeof reached, "%s/reached", dir);
    snprintf(go, sizeof go, "%s/go", dir);
    /* The old trace, and the user's second name for it. */
    snprintf(cmd, sizeof cmd, "GPUARENA_TRACE='%s' '%s'", t, prog);
    snprintf(log, sizeof log, "%s/a.log", dir);
    ck_assert_int_eq(tr_wait(tr_spawn(cmd, log)), 0);
    ck_assert_int_eq(link(t, k), 0);
    size_t n0 = tr_read(k, before, sizeof before);
    ck_assert_msg(n0 > 0 && n0 < sizeof before, "the first run left a trace (%zu bytes)", n0);
    /* B: opens T and stops at its lock. */
    snprintf(cmd, sizeof cmd, "GA_FLOCK_GATE='%s' GPUARENA_TRACE='%s' '%s'", dir, t, prog);
    snprintf(log, sizeof log, "%s/b.log", dir);
    pid_t b = tr_spawn(cmd, log);
    struct timespec ts = {0, 5000000};
    for (int i = 0; i < 12000 && access(reached, F_OK) != 0; i++)
        nanosleep(&ts, NULL);
    ck_assert_msg(access(reached, F_OK) == 0, "B reached its lock");
    /* C: the whole run on the same path, while B waits. */
    snprintf(cmd, sizeof cmd, "GPUARENA_TRACE='%s' '%s'", t, prog);
    snprintf(log, sizeof log, "%s/c.log", dir);
    ck_assert_int_eq(tr_wait(tr_spawn(cmd, log)), 0);
    int g = open(go, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ge(g, 0);
    close(g);
    ck_assert_int_eq(tr_wait(b), 0);
    size_t n1 = tr_read(k, after, sizeof after);
    char said[8192] = "";
    snprintf(log, sizeof log, "%s/b.log", dir);
    size_t ns = tr_read(log, said, sizeof said - 1);
    said[ns == (size_t)-1 ? 0 : ns] = 0;
    ck_assert_msg(n1 == n0 && memcmp(before, after, n0) == 0,
                  "the kept copy K lost its bytes (%zu before, %zu after); B said: %s", n0, n1, said);
    ck_assert_msg(strstr(said, "gpuarena:") && strstr(said, "was taken by another process's trace"),
                  "B said why it runs untraced: %s", said);
    /* C's trace is the one at the path, whole (its own run's). */
    struct stat st;
    ck_assert_int_eq(stat(t, &st), 0);
    ck_assert_msg(st.st_size > 0, "C's trace at the path is empty");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

TCase *pt_tcase_trace_race(void)
{
    TCase *tc = tcase_create("trace_race");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, trace_taken_while_opening_leaves_the_kept_copy);
    return tc;
}
