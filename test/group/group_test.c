/* group_test: the group ledger (shim/group.c, shim/group_join.c) driven by real processes and threads, no CUDA.
 *
 * Prints TAP lines ("ok N - what", no plan: the tier appends nvml_test's) to stdout and exits 0 when it ran to the end; the tier (build.mk)
 * counts the lines. Every case works in its own directory (argv[1]) so runs never meet the user's
 * real ledgers in /dev/shm. Randomness is a seeded xorshift and run length an operation count;
 * processes wait for each other on pipes and process-shared semaphores, never on sleeps.
 *
 * Cases: names; 4 processes x 4 threads committing and uncommitting at random under a 1 GiB cap,
 * one process SIGKILLed mid-run, the total checked after every commit; a killed member's share
 * taken back before anyone is refused (as a zombie, and killed while holding the ledger's mutex);
 * pid reuse (a live pid with another start time); a member of another pid namespace is never
 * judged; two groups, and one group on two devices, independent; the cap fixed while members
 * live; a forked child's own slot; the last member removes the ledger; foreign files refused
 * (damaged, another version, a link, a folder, a FIFO, another user's file); a ledger removed under
 * its members (an old member's exit leaves the new one; shares move to it), a forked child
 * outliving its parent; exec; a full folder (in a tmpfs of a mount namespace of its own, skipped
 * where none can be made); leaving the group while threads still call in; a lock whose holder is
 * gone (taken over) or stopped (said), a ledger path too long (group_test_stale.c). The cases from the
 * removed ledger on are in group_test_files.c (helpers shared through group_test.h).
 */
#define _GNU_SOURCE
#include "procstat.h"
#include "group_test.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *g_dir;
static int g_n;
const uint8_t DEV0[16] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
                                 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00};
static const uint8_t DEV1[16] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

int tap(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", ok ? "ok" : "not ok", ++g_n);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    return ok;
}

static uint64_t rng(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

ga_group_t *open_or_die(const char *name, const uint8_t *uuid, uint64_t cap)
{
    char err[512];
    ga_group_t *g = ga_group_open(g_dir, name, uuid, cap, err, sizeof err);
    if (!g) {
        tap(0, "ga_group_open(%s): %s", name, err);
        exit(0);
    }
    return g;
}

/* The ledger file mapped by the test itself, to read or forge slots. */
ga_ledger_t *map_ledger(const char *name, const uint8_t *uuid)
{
    char path[512];
    ga_group_path(g_dir, name, uuid, path, sizeof path);
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return NULL;
    void *p = mmap(NULL, GA_LEDGER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

uint64_t own_start(void)
{
    return ga_test_start_of(getpid());
}

/* ---- names ---- */

static void test_names(void)
{
    char err[512] = "";
    tap(ga_group_name_ok("team-a_1.x", NULL, 0), "names: letters, digits, - _ . accepted");
    int bad = !ga_group_name_ok("a/b", err, sizeof err);
    tap(bad && strstr(err, "gpuarena: GPUARENA_GROUP='a/b'") && strstr(err, "letters, digits"),
        "names: 'a/b' refused with the rule: %s", err);
    char longname[70];
    memset(longname, 'x', 65);
    longname[65] = '\0';
    tap(!ga_group_name_ok(longname, NULL, 0) && !ga_group_name_ok("", NULL, 0) &&
            !ga_group_name_ok("..", NULL, 0) && !ga_group_name_ok("a b", NULL, 0),
        "names: 65 characters, empty, '..' and spaces refused");
    longname[64] = '\0';
    tap(ga_group_name_ok(longname, NULL, 0), "names: 64 characters accepted");
    /* "." and "..": made of allowed characters, so the refusal says they are reserved */
    for (int i = 0; i < 2; i++) {
        const char *dots = i ? ".." : ".";
        tap(!ga_group_name_ok(dots, err, sizeof err) && strstr(err, "'.' and '..' are reserved"),
            "names: '%s' refused as reserved: %s", dots, err);
    }
    tap(!ga_group_name_ok("a/b", err, sizeof err) && !strstr(err, "reserved"),
        "names: 'a/b' is not called reserved");
    tap(!ga_group_open(g_dir, "no way", DEV0, CAP, err, sizeof err) && strstr(err, "GPUARENA_GROUP"),
        "names: ga_group_open refuses a bad name");
}

/* ---- 4 processes x 4 threads, one killed mid-run ---- */

#define PROCS 4
#define THREADS 4
#define OPS 4000
#define VICTIM (PROCS - 1)

typedef struct shared {
    uint64_t held[PROCS];     /* bytes each process holds, by its own count */
    int killed[PROCS];        /* set by the parent before it kills: its held no longer counts */
    uint64_t over;            /* times the checked total passed the cap */
    uint64_t commits, refusals, checks;
    sem_t resume;             /* posted once per worker thread after the kill */
} shared_t;

static shared_t *S;

typedef struct worker {
    ga_group_t *g;
    int proc, thread;
    int victim_fd;            /* the victim's first thread reports half time here, else -1 */
} worker_t;

/* The checked total: every surviving process's own count. Counts rise after a commit succeeded and
 * fall before the bytes are given back, so this never exceeds what the ledger holds. */
static uint64_t held_total(void)
{
    uint64_t t = 0;
    for (int p = 0; p < PROCS; p++)
        if (!__atomic_load_n(&S->killed[p], __ATOMIC_ACQUIRE))
            t += __atomic_load_n(&S->held[p], __ATOMIC_ACQUIRE);
    return t;
}

static void check_total(ga_group_t *g, int deep)
{
    __atomic_add_fetch(&S->checks, 1, __ATOMIC_RELAXED);
    if (held_total() > CAP || (deep && ga_group_used(g) > CAP))
        __atomic_add_fetch(&S->over, 1, __ATOMIC_RELAXED);
}

static void *worker_run(void *arg)
{
    worker_t *w = arg;
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)(w->proc * 131 + w->thread + 1);
    uint64_t mine[16] = {0};
    int n = 0;
    for (int op = 0; op < OPS || w->proc == VICTIM; op++) {
        if (op == OPS / 2) {
            if (w->victim_fd >= 0) {
                if (write(w->victim_fd, "h", 1) != 1)
                    abort();
            }
            if (w->proc != VICTIM)
                while (sem_wait(&S->resume) != 0 && errno == EINTR)
                    ;
        }
        uint64_t r = rng(&seed);
        if (n < 16 && (n == 0 || r % 3 != 0)) {
            uint64_t bytes = (1 + (r >> 8) % 128) * MIB;
            if (ga_group_commit(w->g, bytes)) {
                __atomic_add_fetch(&S->held[w->proc], bytes, __ATOMIC_ACQ_REL);
                __atomic_add_fetch(&S->commits, 1, __ATOMIC_RELAXED);
                mine[n++] = bytes;
                check_total(w->g, op % 64 == 0);
            } else {
                __atomic_add_fetch(&S->refusals, 1, __ATOMIC_RELAXED);
            }
        } else if (n > 0) {
            uint64_t bytes = mine[--n];
            __atomic_sub_fetch(&S->held[w->proc], bytes, __ATOMIC_ACQ_REL);
            ga_group_uncommit(w->g, bytes);
        }
    }
    while (n > 0) {
        uint64_t bytes = mine[--n];
        __atomic_sub_fetch(&S->held[w->proc], bytes, __ATOMIC_ACQ_REL);
        ga_group_uncommit(w->g, bytes);
    }
    return NULL;
}

static void member_process(int proc, int victim_fd)
{
    ga_group_t *g = open_or_die("stress", DEV0, CAP);
    ga_group_set_figures(g, 0, 0, 0, "arena");
    pthread_t t[THREADS];
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_t){g, proc, i, i == 0 ? victim_fd : -1};
        pthread_create(&t[i], NULL, worker_run, &w[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ga_group_free(g);
    _exit(0);
}

static void test_stress(void)
{
    S = mmap(NULL, sizeof *S, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(S, 0, sizeof *S);
    sem_init(&S->resume, 1, 0);
    int half[2];
    if (pipe(half) != 0)
        abort();
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            close(half[0]);
            member_process(p, p == VICTIM ? half[1] : -1);
        }
    }
    close(half[1]);
    char c;
    int got = read(half[0], &c, 1) == 1;
    __atomic_store_n(&S->killed[VICTIM], 1, __ATOMIC_RELEASE);
    kill(pids[VICTIM], SIGKILL);
    int status;
    waitpid(pids[VICTIM], &status, 0);
    for (int i = 0; i < (PROCS - 1) * THREADS; i++)
        sem_post(&S->resume);
    int clean = 1;
    for (int p = 0; p < VICTIM; p++)
        clean &= waitpid(pids[p], &status, 0) == pids[p] && WIFEXITED(status) && !WEXITSTATUS(status);
    tap(got && clean, "stress: 4 processes x 4 threads ran to the end, the victim killed at half time");
    tap(S->over == 0 && S->checks > 0, "stress: total never above the 1 GiB cap (%" PRIu64
        " checks after commits, %" PRIu64 " over)", S->checks, S->over);
    tap(S->commits > 1000 && S->refusals > 100, "stress: the cap was under pressure (%" PRIu64
        " commits, %" PRIu64 " refused)", S->commits, S->refusals);
    /* The survivors gave everything back and left: the last one out found the victim dead too. */
    char path[512];
    ga_group_path(g_dir, "stress", DEV0, path, sizeof path);
    tap(access(path, F_OK) != 0, "stress: the ledger went with the last survivor (the dead member "
        "did not keep it)");
    ga_group_t *g = open_or_die("stress", DEV0, CAP);
    tap(ga_group_commit(g, CAP) && ga_group_used(g) == CAP, "stress: a new member then gets the "
        "whole cap");
    ga_group_free(g);
    sem_destroy(&S->resume);
    munmap(S, sizeof *S);
}

/* ---- a killed member ---- */

/* A child that joins, commits `bytes`, optionally takes the ledger's mutex, says so on the pipe
 * and waits to be killed. */
static pid_t holder(const char *name, uint64_t bytes, int take_lock)
{
    int fds[2];
    if (pipe(fds) != 0)
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        ga_group_t *g = open_or_die(name, DEV0, CAP);
        int ok = ga_group_commit(g, bytes);
        if (take_lock) {
            ga_ledger_t *l = map_ledger(name, DEV0);
            pthread_mutex_lock(&l->lock);
        }
        if (write(fds[1], ok ? "y" : "n", 1) != 1)
            abort();
        for (;;)
            pause();
    }
    close(fds[1]);
    char c = 0;
    if (read(fds[0], &c, 1) != 1 || c != 'y')
        tap(0, "holder of %s could not commit", name);
    close(fds[0]);
    return pid;
}

static void test_killed(void)
{
    ga_group_t *a = open_or_die("killed", DEV0, CAP);
    pid_t v = holder("killed", 700 * MIB, 0);
    tap(!ga_group_commit(a, 800 * MIB), "killed: while the member lives, 700 + 800 MiB is refused");
    kill(v, SIGKILL);
    siginfo_t si;
    waitid(P_PID, (id_t)v, &si, WEXITED | WNOWAIT); /* dead, not reaped: a zombie */
    tap(ga_group_commit(a, 800 * MIB), "killed: once it is killed (a zombie) its share returns "
        "before anyone is refused");
    waitpid(v, NULL, 0);
    tap(ga_group_used(a) == 800 * MIB, "killed: the group then holds exactly the 800 MiB");
    ga_group_uncommit(a, 800 * MIB);

    v = holder("killed", 300 * MIB, 1);
    kill(v, SIGKILL);
    waitpid(v, NULL, 0);
    tap(ga_group_commit(a, CAP), "killed: a member killed holding the ledger's mutex neither blocks "
        "the group (EOWNERDEAD) nor keeps its share");
    ga_group_free(a);
}

/* ---- pid reuse and pid namespaces ---- */

ga_ledger_slot_t *forge(ga_ledger_t *l, uint32_t pid, uint64_t start, uint64_t pidns,
                        uint64_t committed)
{
    for (uint32_t i = 0; i < GA_GROUP_SLOTS; i++) {
        ga_ledger_slot_t *s = &l->slots[i];
        if (s->state != GA_SLOT_FREE)
            continue;
        pthread_mutex_lock(&l->lock);
        if (i + 1 > l->hwm)
            l->hwm = i + 1;
        s->pid = pid;
        s->start = start;
        s->pidns = pidns;
        s->committed = committed;
        __atomic_store_n(&s->state, GA_SLOT_LIVE, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&l->lock);
        return s;
    }
    return NULL;
}

static void test_pid_reuse(void)
{
    ga_group_t *a = open_or_die("reuse", DEV0, CAP);
    ga_ledger_t *l = map_ledger("reuse", DEV0);
    struct stat ns;
    uint64_t myns = stat("/proc/self/ns/pid", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
    /* This very process's pid, but a start time it never had: the pid was reused. */
    ga_ledger_slot_t *s = forge(l, (uint32_t)getpid(), own_start() + 1, myns, CAP);
    tap(s && ga_group_commit(a, 512 * MIB), "pid reuse: a live pid with another start time is "
        "a dead member, its share taken back");
    tap(s && s->state == GA_SLOT_FREE, "pid reuse: its slot is free again");
    ga_group_uncommit(a, 512 * MIB);
    s = forge(l, (uint32_t)getpid(), own_start(), myns, CAP);
    tap(s && !ga_group_commit(a, 1), "pid reuse: the same pid with its true start time is a live "
        "member, its share kept");
    if (s)
        s->state = GA_SLOT_FREE;
    s = forge(l, 0x7ffffff0u, 1, myns + 1, CAP);
    tap(s && !ga_group_commit(a, 1), "pid namespaces: a member of another pid namespace is never "
        "judged dead from here");
    if (s)
        s->state = GA_SLOT_FREE;
    s = forge(l, 0x7ffffff0u, 1, myns, CAP);
    tap(s && ga_group_commit(a, 1), "pid namespaces: a gone pid of our namespace is dead");
    munmap(l, GA_LEDGER_SIZE);
    ga_group_free(a);
}

/* ---- independence, caps, fork, files ---- */

static void test_independent(void)
{
    ga_group_t *a = open_or_die("alpha", DEV0, CAP), *b = open_or_die("beta", DEV0, CAP);
    ga_group_t *a1 = open_or_die("alpha", DEV1, CAP);
    tap(ga_group_commit(a, CAP) && ga_group_commit(b, CAP) && ga_group_commit(a1, CAP),
        "two groups on one device, and one group on two devices, each reach their whole cap");
    tap(!ga_group_commit(a, 1) && ga_group_used(b) == CAP && ga_group_used(a1) == CAP,
        "independent: each full group refuses alone");
    ga_group_free(a);
    ga_group_free(b);
    ga_group_free(a1);
}

static void test_caps(void)
{
    char err[512] = "", path[512];
    ga_group_t *a = open_or_die("caps", DEV0, CAP);
    ga_group_t *b = ga_group_open(g_dir, "caps", DEV0, 2 * CAP, err, sizeof err);
    tap(!b && strstr(err, "1073741824") && strstr(err, "2147483648") && strstr(err, "GPUARENA_LIMIT"),
        "caps: a different cap is refused while the group has members: %s", err);
    tap(ga_group_cap(a) == CAP, "caps: the group's cap stays the first member's");
    /* a cap from a device plugin's variable is named as such (helper-60 F7: "give every member
     * the same GPUARENA_LIMIT" to a member that never set it) */
    b = ga_group_open_from(g_dir, "caps", DEV0, CAP / 2, "CUDA_DEVICE_MEMORY_LIMIT (HAMi)", err,
                           sizeof err);
    tap(!b && strstr(err, "this process's comes from CUDA_DEVICE_MEMORY_LIMIT (HAMi)") &&
            !strstr(err, "same GPUARENA_LIMIT"),
        "caps: the refusal names the variable this process's cap came from: %s", err);
    ga_group_free(a);
    ga_group_path(g_dir, "caps", DEV0, path, sizeof path);
    tap(access(path, F_OK) != 0, "files: the last member out removes the ledger");
    b = open_or_die("caps", DEV0, 2 * CAP);
    tap(ga_group_cap(b) == 2 * CAP, "caps: a group without members takes the newcomer's cap");
    ga_group_free(b);
    tap(!ga_group_open(g_dir, "caps", DEV0, 0, err, sizeof err) && strstr(err, "GPUARENA_LIMIT"),
        "caps: a zero cap is refused");
}

/* The shim opens every device's ledger at cuInit unjoined (ga_group_open_unjoined): a process is a
 * member, with a row in `gpuarena top`, only on the devices it allocates on; it showed 0 B rows on
 * every device. Its first commit joins under the cap the members hold together, and settles the
 * cap as a join would: refused while the members run with another one, which a newcomer may have
 * set after the open (the members there then had all left). */
static void test_unjoined(void)
{
    char err[512] = "";
    ga_group_member_t m[4];
    ga_group_t *u = ga_group_open_unjoined(g_dir, "lazy", DEV0, CAP, NULL, err, sizeof err);
    tap(u && ga_group_list(g_dir, "lazy", DEV0, m, 4) == 0 && !ga_group_member(u) &&
            ga_group_mine(u) == 0, "unjoined: an open takes no slot (no row in top): %s", err);
    if (!u)
        return;
    ga_group_t *a = open_or_die("lazy", DEV0, CAP);
    tap(ga_group_commit(a, CAP - 100 * MIB) && ga_group_list(g_dir, "lazy", DEV0, m, 4) == 1,
        "unjoined: a joined member holds all but 100 MiB");
    tap(!ga_group_commit(u, 200 * MIB) && ga_group_member(u) &&
            ga_group_list(g_dir, "lazy", DEV0, m, 4) == 2 && ga_group_used(a) == CAP - 100 * MIB,
        "unjoined: the first commit joins, and 200 MiB past the members' total is refused");
    tap(ga_group_commit(u, 100 * MIB) && ga_group_used(u) == CAP && ga_group_mine(u) == 100 * MIB,
        "unjoined: 100 MiB fits, to the cap exactly");
    ga_group_free(a);
    ga_group_free(u);
    ga_group_t *v = ga_group_open_unjoined(g_dir, "lazy2", DEV0, CAP, NULL, err, sizeof err);
    ga_group_t *b = open_or_die("lazy2", DEV0, 2 * CAP); /* no member yet: its cap is the group's */
    tap(v && !ga_group_commit(v, MIB) && ga_group_member(v) && ga_group_cap(b) == 2 * CAP &&
            ga_group_list(g_dir, "lazy2", DEV0, m, 4) == 1,
        "unjoined: a first commit while the members run with another cap is refused (said)");
    ga_group_free(b);
    tap(v && ga_group_commit(v, MIB) && ga_group_cap(v) == CAP &&
            ga_group_list(g_dir, "lazy2", DEV0, m, 4) == 1,
        "unjoined: once they left, the first commit joins with its own cap");
    ga_group_free(v);
}

static void test_fork(void)
{
    ga_group_t *a = open_or_die("fork", DEV0, CAP);
    ga_group_commit(a, 600 * MIB);
    int fds[2];
    if (pipe(fds) != 0)
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        char r[5] = {'n', 'n', 'n', 'n', 'n'};
        if (ga_group_fork_child(a)) {
            ga_group_member_t m[4];
            r[0] = ga_group_mine(a) == 0 ? 'y' : 'n';
            /* What the child gives up of its copy of the parent's memory is not the parent's. */
            ga_group_uncommit(a, 600 * MIB);
            r[3] = ga_group_used(a) == 600 * MIB ? 'y' : 'n';
            r[4] = ga_group_list(g_dir, "fork", DEV0, m, 4) == 1 && !ga_group_member(a) ? 'y' : 'n';
            r[1] = !ga_group_commit(a, 600 * MIB) ? 'y' : 'n';
            r[2] = ga_group_commit(a, 400 * MIB) && ga_group_mine(a) == 400 * MIB ? 'y' : 'n';
        }
        if (write(fds[1], r, 5) != 5)
            abort();
        _exit(0); /* without closing: its share must come back as a dead member's */
    }
    close(fds[1]);
    char r[5] = {0};
    int got = read(fds[0], r, 5) == 5;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    tap(got && r[0] == 'y', "fork: the child starts with a share of its own at zero");
    tap(got && r[3] == 'y', "fork: an uncommit in the child leaves the parent's 600 MiB in the ledger");
    tap(got && r[4] == 'y', "fork: a child takes no slot before its first commit (data-loader "
        "workers do not fill the group)");
    tap(got && r[1] == 'y' && r[2] == 'y', "fork: the parent's 600 MiB still counts for the child "
        "(600 refused, 400 accepted)");
    tap(ga_group_mine(a) == 600 * MIB && ga_group_commit(a, 424 * MIB),
        "fork: the parent keeps its share; the exited child's 400 MiB come back");
    ga_group_free(a);
}

/* Members joining while the last one leaves: the leaver removes the ledger under its mutex, and a
 * joiner that mapped that file before must not join it once a fresh one exists at the path (the
 * two would then hold a cap each). 6 processes x 1,500 rounds of open, the whole cap, close. */
static void test_join_leave_race(void)
{
    volatile int *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        abort();
    pid_t pid[6];
    for (int p = 0; p < 6; p++) {
        if ((pid[p] = fork()) == 0) {
            char err[512];
            for (int i = 0; i < 1500; i++) {
                ga_group_t *g = ga_group_open(g_dir, "race", DEV0, CAP, err, sizeof err);
                if (!g) {
                    __atomic_add_fetch(&sh[2], 1, __ATOMIC_SEQ_CST);
                    continue;
                }
                if (ga_group_commit(g, CAP)) {
                    if (__atomic_add_fetch(&sh[0], 1, __ATOMIC_SEQ_CST) > 1)
                        __atomic_add_fetch(&sh[1], 1, __ATOMIC_SEQ_CST);
                    for (volatile int k = 0; k < 2000; k++)
                        ;
                    __atomic_sub_fetch(&sh[0], 1, __ATOMIC_SEQ_CST);
                    ga_group_uncommit(g, CAP);
                }
                ga_group_free(g);
            }
            _exit(0);
        }
    }
    for (int p = 0; p < 6; p++)
        waitpid(pid[p], NULL, 0);
    tap(sh[1] == 0 && sh[2] == 0, "race: joins racing the last member's exit never split the "
        "group into two ledgers (%d times two members held the whole cap, %d opens failed)",
        sh[1], sh[2]);
    munmap((void *)sh, 4096);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: group_test DIR (an empty directory for the ledgers)\n");
        return 2;
    }
    g_dir = argv[1];
    test_names();
    test_stress();
    test_killed();
    test_pid_reuse();
    test_independent();
    test_caps();
    test_unjoined();
    test_fork();
    test_join_leave_race();
    test_files();
    test_removed();
    test_fds_closed();
    test_fork_orphan();
    test_exec();
    test_planted();
    test_full_folder();
    test_map_refused();
    test_full_folder_join();
    test_exit_threads();
    test_stale_lock();
    test_held_lock_said();
    test_long_path();
    test_corrupt_sum();
    test_killed_while_making();
    return 0;
}
