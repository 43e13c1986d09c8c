/* group_test, continued: a ledger whose lock names a thread that is gone, a ledger path too long
 * for gpuarena, a slot's count damaged to near 2^64, and a process killed while it makes a ledger
 * (cases run from group_test.c's main; helpers in group_test.h).
 *
 * The kernel marks a robust mutex "owner died" only when its owner exits; a ledger whose lock word
 * still names a thread gone without that (a machine that crashed with a member inside the lock, a
 * ledger kept in a GPUARENA_GROUP_DIR on disk across a reboot, a copied file) is forged here by
 * writing the word, as such a file holds it. Processes wait on pipes; alarm() only bounds a hang.
 */
#define _GNU_SOURCE
#include "group_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The lock's futex word and owner as glibc keeps them, written as a stale file holds them. */
static void forge_lock(ga_ledger_t *l, int tid)
{
    l->lock.__data.__lock = tid;
    l->lock.__data.__owner = tid;
}

/* A pid that no process has now: a child's, once reaped. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

/* In a child bounded by alarm(20): join "name" and commit `bytes`. Exit 0 committed, 1 refused or
 * not joined; SIGALRM when it hung. The status, as waitpid gives it. */
static int join_in_child(const char *name, uint64_t bytes, int errfd)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (errfd >= 0)
            dup2(errfd, 2);
        alarm(20);
        char err[1024];
        ga_group_t *g = ga_group_open(g_dir, name, DEV0, CAP, err, sizeof err);
        _exit(g && ga_group_commit(g, bytes) ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

void test_stale_lock(void)
{
    ga_group_t *a = open_or_die("stale", DEV0, CAP);
    ga_group_commit(a, 300 * MIB);
    ga_ledger_t *l = map_ledger("stale", DEV0);
    if (!l)
        abort();
    forge_lock(l, dead_pid());
    int st = join_in_child("stale", 200 * MIB, -1);
    tap(WIFEXITED(st) && WEXITSTATUS(st) == 0, "stale lock: a ledger whose lock names a thread "
        "that is gone (no owner-died mark: a crash, a ledger kept across a reboot) is taken over; "
        "a newcomer joins and commits (status %d; it hung for ever before)", st);
    st = join_in_child("stale", 800 * MIB, -1);
    tap(WIFEXITED(st) && WEXITSTATUS(st) == 1, "stale lock: the ledger is whole after the "
        "take-over (the live member's 300 MiB still count: 800 MiB refused; status %d)", st);
    forge_lock(l, 0); /* unlocked (so it is already when the take-over worked): no hang below */
    munmap(l, GA_LEDGER_SIZE);
    ga_group_free(a);
}

/* A lock held by a thread that runs (a stopped process) is not taken over: the waiter says, once,
 * what holds it and what to do, and keeps waiting. */
void test_held_lock_said(void)
{
    int hold[2], errp[2];
    if (pipe(hold) != 0)
        abort();
    pid_t holder = fork(); /* a live process that is no member, standing for a stopped one */
    if (holder == 0) {
        close(hold[1]);
        char c;
        ssize_t r = read(hold[0], &c, 1);
        _exit(r < 0);
    }
    close(hold[0]);
    if (pipe(errp) != 0) /* after the holder's fork: only the joiner may keep it open */
        abort();
    ga_group_t *a = open_or_die("held", DEV0, CAP);
    ga_ledger_t *l = map_ledger("held", DEV0);
    if (!l)
        abort();
    forge_lock(l, holder);
    pid_t joiner = fork();
    if (joiner == 0) {
        close(errp[0]);
        dup2(errp[1], 2);
        alarm(20);
        char err[1024];
        ga_group_t *g = ga_group_open(g_dir, "held", DEV0, CAP, err, sizeof err);
        _exit(g ? 0 : 1);
    }
    close(errp[1]);
    char said[2048] = "";
    size_t n = 0;
    while (n < sizeof said - 1 && !strchr(said, '\n')) {
        ssize_t r = read(errp[0], said + n, sizeof said - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        said[n] = '\0';
    }
    char *nl = strchr(said, '\n');
    if (nl)
        *nl = '\0';
    int st = 0;
    pid_t done = waitpid(joiner, &st, WNOHANG);
    tap(done == 0 && strstr(said, "gpuarena: group 'held'") && strstr(said, "kill -CONT") &&
            strstr(said, "remove the ledger file") && strstr(said, "gpuarena-"),
        "held lock: a waiter on a lock a live thread holds keeps waiting and says once who holds "
        "it and what to do: %s", said);
    kill(joiner, SIGKILL);
    waitpid(joiner, NULL, 0);
    close(errp[0]);
    close(hold[1]);
    waitpid(holder, NULL, 0);
    forge_lock(l, 0); /* released, as its holder would have */
    munmap(l, GA_LEDGER_SIZE);
    ga_group_free(a);
}

void test_long_path(void)
{
    char dir[520], err[1024] = "";
    memset(dir, 'd', sizeof dir - 1);
    dir[0] = '/';
    dir[sizeof dir - 1] = '\0';
    ga_group_t *g = ga_group_open(dir, "team", DEV0, CAP, err, sizeof err);
    tap(!g && strstr(err, "GPUARENA_GROUP_DIR to a shorter folder") && !strstr(err, "out of memory"),
        "long path: a ledger path past gpuarena's room is said as such, with the fix: %s", err);
}

/* A slot whose committed bytes were damaged to near 2^64 (a stray write, a forged file): the
 * group's sum wrapped past zero and let a commit through above the cap. */
void test_corrupt_sum(void)
{
    ga_group_t *a = open_or_die("wrap", DEV0, CAP);
    ga_group_commit(a, 20 * MIB);
    ga_ledger_t *l = map_ledger("wrap", DEV0);
    if (!l)
        abort();
    /* a live slot (this process's pid and start time) holding 2^64 - 10 MiB + 1 bytes */
    ga_ledger_slot_t *s = forge(l, (uint32_t)getpid(), own_start(), 0, UINT64_MAX - 10 * MIB + 1);
    int ok = s ? ga_group_commit(a, 1000 * MIB) : 1;
    tap(s && !ok, "corrupt slot: a slot's count damaged to near 2^64 does not wrap the group's sum "
        "below the cap (1000 MiB refused beside 20 MiB under a 1 GiB cap; it was granted)");
    if (s) {
        __atomic_store_n(&s->state, GA_SLOT_FREE, __ATOMIC_RELEASE);
        s->committed = 0;
    }
    munmap(l, GA_LEDGER_SIZE);
    ga_group_free(a);
}

/* ---- a process killed while it makes a ledger ---- */

/* This program's posix_fallocate, which the ledger's code (linked in, not a shared library) calls
 * while it makes a new ledger, between making its file and linking it into place: in a child that
 * sets die_in_fallocate, the process is killed exactly there. Otherwise the same call. */
static volatile int die_in_fallocate;

int posix_fallocate(int fd, off_t offset, off_t len)
{
    if (die_in_fallocate)
        raise(SIGKILL);
    return fallocate(fd, 0, offset, len) == 0 ? 0 : errno;
}

/* And its linkat and link, which fail with EPERM while fail_link is set: a folder on a file system
 * without hard links (vfat, some network and FUSE file systems). */
static volatile int fail_link;
/* And /proc not mounted (a chroot, a sandbox): a link through /proc/self/fd/N finds no such file. */
static volatile int no_proc;

int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags)
{
    if (fail_link)
        return errno = EPERM, -1;
    if (no_proc && !strncmp(oldpath, "/proc/", 6))
        return errno = ENOENT, -1;
    return (int)syscall(SYS_linkat, olddirfd, oldpath, newdirfd, newpath, flags);
}

int link(const char *oldpath, const char *newpath)
{
    return linkat(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}

static int entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

void test_killed_while_making(void)
{
    char dir[600], err[1024] = "";
    snprintf(dir, sizeof dir, "%s/making", g_dir);
    if (mkdir(dir, 0700) != 0)
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        die_in_fallocate = 1;
        ga_group_open(dir, "making", DEV0, CAP, err, sizeof err);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int left = entries(dir);
    tap(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && left == 0, "killed while making: a process "
        "killed between making a ledger's file and linking it into place leaves nothing in the "
        "folder (%d files left; its .gpuarena-*-new-* file stayed for good)", left);
    ga_group_t *g = ga_group_open(dir, "making", DEV0, CAP, err, sizeof err);
    tap(g && ga_group_commit(g, CAP) && entries(dir) == 1, "killed while making: the next process "
        "makes the ledger and holds the whole cap: %s", g ? "" : err);
    ga_group_free(g);
    fail_link = 1;
    g = ga_group_open(dir, "nolinks", DEV0, CAP, err, sizeof err);
    fail_link = 0;
    tap(!g && strstr(err, "file system that has hard links") && strstr(err, "GPUARENA_GROUP_DIR"),
        "no hard links: a folder whose file system cannot link the new ledger into place is named "
        "with the fix: %s", err);
    ga_group_free(g);
    /* Without /proc the file made with O_TMPFILE cannot be linked through its /proc entry: the
     * named temporary then, as before O_TMPFILE; the group was refused, said as "a file system
     * that has hard links" of one that has them, and CUDA not used (an outside check, 2026-12-07) */
    no_proc = 1;
    g = ga_group_open(dir, "noproc", DEV0, CAP, err, sizeof err);
    no_proc = 0;
    int made = entries(dir);
    tap(g && ga_group_commit(g, CAP) && made == 1, "no /proc: the ledger is made through a named "
        "temporary, which is gone (%d files): %s", made, g ? "" : err);
    ga_group_free(g);
    /* whatever a failure left */
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char f[900];
        snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlink(f);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}
