/* group_test, continued (split from group_test.c, which runs these cases from its main in the
 * same order; the helpers both use are declared in group_test.h): a ledger removed under its
 * members, descriptors closed, a forked child outliving its parent, exec, foreign files planted at
 * the path, a full ledger folder, leaving the group while threads still call in, and the files
 * refused.
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a removed ledger (a /dev/shm cleanup, RemoveIPC, a forked child outliving its parent) ---- */

static int path_exists(const char *name)
{
    char path[512];
    ga_group_path(g_dir, name, DEV0, path, sizeof path);
    return access(path, F_OK) == 0;
}

static void unlink_ledger(const char *name)
{
    char path[512];
    ga_group_path(g_dir, name, DEV0, path, sizeof path);
    unlink(path);
}

void test_removed(void)
{
    /* P holds 600 MiB; the file is removed; Q makes a fresh ledger. P's exit must leave Q's. */
    ga_group_t *p = open_or_die("removed", DEV0, CAP);
    ga_group_commit(p, 600 * MIB);
    unlink_ledger("removed");
    ga_group_t *q = open_or_die("removed", DEV0, CAP);
    tap(ga_group_commit(q, 300 * MIB), "removed: a newcomer after a removal makes a fresh ledger");
    ga_group_free(p);
    tap(path_exists("removed"), "removed: an old member's exit leaves the newer group's live "
        "ledger at the path (it unlinked whatever file was there)");
    ga_group_t *r = open_or_die("removed", DEV0, CAP);
    tap(!ga_group_commit(r, 800 * MIB) && ga_group_used(r) == 300 * MIB,
        "removed: so the next member sees Q's 300 MiB (800 MiB refused)");
    ga_group_free(r);
    ga_group_free(q);
    tap(!path_exists("removed"), "removed: the last member of the new ledger removes it");

    /* A member still running when its file is removed carries its share to the new ledger at its
     * next commit: old and new members count against one cap again. */
    ga_group_t *a = open_or_die("moved", DEV0, CAP);
    ga_group_commit(a, 600 * MIB);
    ga_group_set_figures(a, 123 * MIB, 600 * MIB, 600 * MIB, "vmm");
    unlink_ledger("moved");
    ga_group_t *b = open_or_die("moved", DEV0, CAP);
    ga_group_commit(b, 300 * MIB);
    tap(ga_group_commit(a, MIB) && ga_group_used(b) == 901 * MIB && ga_group_mine(a) == 601 * MIB,
        "removed: a member of the removed ledger moves its 600 MiB to the new one at its next commit");
    /* ... with its figures: `gpuarena top` showed it with no mode and nothing in use. */
    ga_ledger_t *nl = map_ledger("moved", DEV0);
    int shown = 0;
    for (uint32_t i = 0; nl && i < nl->hwm; i++)
        shown |= nl->slots[i].state == GA_SLOT_LIVE && !strcmp(nl->slots[i].mode, "vmm") &&
                 nl->slots[i].in_use == 123 * MIB && nl->slots[i].peak == 600 * MIB;
    tap(shown, "removed: the moved member's figures (mode, in use, peak) move with it");
    if (nl)
        munmap(nl, GA_LEDGER_SIZE);
    ga_group_t *c = open_or_die("moved", DEV0, CAP);
    tap(!ga_group_commit(c, 200 * MIB) && ga_group_commit(c, 100 * MIB),
        "removed: a newcomer then sees both shares (200 MiB refused, 100 MiB taken)");
    ga_group_free(a);
    tap(path_exists("moved") && ga_group_used(b) == 400 * MIB,
        "removed: the moved member's exit gives its share back and leaves the ledger");
    ga_group_free(c);
    ga_group_free(b);
}

/* A program that closes every descriptor (a daemon) after joining: the ledger is still the one at
 * the path, and a commit goes on in it (no move, no second slot), and a fd reused by the program
 * is not closed by the library. */
void test_fds_closed(void)
{
    ga_group_t *a = open_or_die("fds", DEV0, CAP);
    ga_group_commit(a, 100 * MIB);
    int up[2];
    if (pipe(up) != 0)
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        for (int fd = 3; fd < 1024; fd++)
            if (fd != up[1])
                close(fd);
        int mine = open("/dev/null", O_RDONLY); /* may take the ledger's old number */
        char r = ga_group_commit(a, 200 * MIB) && ga_group_mine(a) == 300 * MIB &&
                 fcntl(mine, F_GETFD) != -1 ? 'y' : 'n';
        if (write(up[1], &r, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(up[1]);
    char r = 0;
    int got = read(up[0], &r, 1) == 1;
    ga_group_t *b = open_or_die("fds", DEV0, CAP);
    ga_ledger_t *l = map_ledger("fds", DEV0);
    int slots = 0, moved = 0;
    for (uint32_t i = 0; l && i < l->hwm; i++) {
        slots += l->slots[i].state == GA_SLOT_LIVE;
        moved += l->slots[i].state == GA_SLOT_LIVE && l->slots[i].pid == (uint32_t)pid;
    }
    tap(got && r == 'y' && slots == 2 && !moved && !ga_group_commit(b, 800 * MIB),
        "fds: with every descriptor closed by the program the member commits on in the same "
        "slot of the same ledger (%d live slots)", slots);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (l)
        munmap(l, GA_LEDGER_SIZE);
    close(up[0]);
    ga_group_free(b);
    ga_group_free(a);
}

/* P joins and forks C; P leaves while C has no slot yet (the ledger goes with P). C's first commit
 * must join the ledger the path names then, not the removed one, so Q counts C's share. */
void test_fork_orphan(void)
{
    ga_group_t *p = open_or_die("orphan", DEV0, CAP);
    ga_group_commit(p, MIB);
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0)
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        ga_group_fork_child(p);
        char c = 0;
        if (read(down[0], &c, 1) != 1) /* P has left */
            _exit(1);
        char r = ga_group_commit(p, 600 * MIB) ? 'y' : 'n';
        if (write(up[1], &r, 1) != 1 || read(down[0], &c, 1) != 1)
            _exit(1);
        ga_group_close(p);
        _exit(0);
    }
    ga_group_free(p); /* unlinks: the child holds no slot */
    char r = 0;
    int got = write(down[1], "l", 1) == 1 && read(up[0], &r, 1) == 1;
    ga_group_t *q = open_or_die("orphan", DEV0, CAP);
    tap(got && r == 'y' && !ga_group_commit(q, 600 * MIB) && ga_group_used(q) == 600 * MIB,
        "fork orphan: a forked child that outlives its parent counts in the group's ledger (Q's "
        "600 MiB refused beside its 600 MiB)");
    if (write(down[1], "e", 1) != 1)
        abort();
    waitpid(pid, NULL, 0);
    tap(path_exists("orphan") && ga_group_commit(q, CAP), "fork orphan: the child's exit gives its "
        "share back and leaves Q's ledger");
    ga_group_free(q);
    close(up[0]), close(up[1]), close(down[0]), close(down[1]);
}

/* ---- exec: the slot of this process's image before an exec (same pid and start time) ---- */

void test_exec(void)
{
    ga_group_t *a = open_or_die("exec", DEV0, CAP);
    ga_ledger_t *l = map_ledger("exec", DEV0);
    struct stat ns;
    uint64_t myns = stat("/proc/self/ns/pid", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
    /* What the program before an exec left: our pid, our start time, its share, no exit handler. */
    ga_ledger_slot_t *s = l ? forge(l, (uint32_t)getpid(), own_start(), myns, 600 * MIB) : NULL;
    ga_group_free(a);
    tap(s && path_exists("exec"), "exec: the pre-exec image's slot keeps the ledger");
    ga_group_t *b = open_or_die("exec", DEV0, CAP);
    tap(s && ga_group_commit(b, CAP) && s->state == GA_SLOT_FREE,
        "exec: joining after an exec frees the slot of the image before it (the whole cap taken)");
    ga_group_free(b);
    tap(!path_exists("exec"), "exec: the last member then removes the ledger");
    if (l)
        munmap(l, GA_LEDGER_SIZE);
}

/* ---- a FIFO, or another user's file, at the path ---- */

void test_planted(void)
{
    char err[1024] = "", path[512];
    ga_group_path(g_dir, "fifo", DEV0, path, sizeof path);
    if (mkfifo(path, 0600) != 0)
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20); /* a guard: the list answers at once or hangs for ever */
        ga_group_member_t m[4];
        _exit(ga_group_list(g_dir, "fifo", DEV0, m, 4) == -1 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    tap(WIFEXITED(st) && WEXITSTATUS(st) == 0, "planted: ga_group_list (NVML's process list) does "
        "not hang on a FIFO at the ledger path, and does not believe it (status %d)", st);
    tap(!ga_group_open(g_dir, "fifo", DEV0, CAP, err, sizeof err) && strstr(err, "a FIFO"),
        "planted: joining refuses the FIFO, naming it: %s", err);
    unlink(path);

    ga_group_path(g_dir, "planted", DEV0, path, sizeof path);
    int fd = open(path, O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, GA_LEDGER_SIZE) != 0)
        abort();
    if (getuid() != 0 || fchown(fd, 4242, 4242) != 0) {
        tap(1, "planted: another user's file # SKIP needs root to make a file of another user");
    } else {
        tap(!ga_group_open(g_dir, "planted", DEV0, CAP, err, sizeof err) && strstr(err, "uid 4242") &&
                strstr(err, "GPUARENA_GROUP_DIR") && strstr(err, "another GPUARENA_GROUP"),
            "planted: a file of another user at the path is named with its owner and the fix: %s", err);
    }
    close(fd);
    unlink(path);
}

/* ---- a full ledger folder: an error, never SIGBUS, nothing left behind ---- */

static int count_new_files(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += strncmp(e->d_name, ".gpuarena-", 10) == 0;
    if (d)
        closedir(d);
    return n;
}

static void fill(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/filler", dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_APPEND, 0600);
    static const char page[4096];
    while (fd >= 0 && write(fd, page, sizeof page) > 0)
        ;
    while (fd >= 0 && write(fd, page, 1) > 0)
        ;
    if (fd >= 0)
        close(fd);
}


/* In a child with its own mount namespace, a tmpfs of `kib` KiB; 'S' on the pipe when the system
 * gives neither (not root, no user namespaces). */
static int small_tmpfs(char *dir, size_t n, int kib)
{
    if (unshare(CLONE_NEWNS) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
        return -1;
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -1;
    snprintf(dir, n, "%s/tmpfs-%d", g_dir, kib);
    mkdir(dir, 0700);
    char opt[32];
    snprintf(opt, sizeof opt, "size=%dk", kib);
    return mount("tmpfs", dir, "tmpfs", 0, opt);
}

void test_full_folder(void)
{
    int up[2];
    if (pipe(up) != 0)
        abort();
    pid_t pid = fork();
    if (pid == 0) {
        char dir[600], err[1024] = "", r[2] = {'n', 'n'};
        if (small_tmpfs(dir, sizeof dir, 16) != 0) {
            if (write(up[1], "SS", 2) != 2)
                _exit(1);
            _exit(0);
        }
        fill(dir);
        ga_group_t *g = ga_group_open(dir, "full", DEV0, CAP, err, sizeof err);
        r[0] = !g && strstr(err, "gpuarena: cannot create a group ledger") &&
               strstr(err, strerror(ENOSPC)) && strstr(err, "GPUARENA_GROUP_DIR") ? 'y' : 'n';
        r[1] = count_new_files(dir) == 0 ? 'y' : 'n';
        if (r[0] != 'y')
            fprintf(stderr, "full folder: %s\n", err);
        if (write(up[1], r, 2) != 2)
            _exit(1);
        _exit(0);
    }
    char r[2] = {0};
    int st = 0;
    close(up[1]); /* a child killed by a signal then ends the read */
    int got = read(up[0], r, 2) == 2;
    waitpid(pid, &st, 0);
    if (got && r[0] == 'S') {
        tap(1, "full folder # SKIP no tmpfs of our own (needs root or user namespaces)");
        tap(1, "full folder # SKIP");
    } else {
        tap(WIFEXITED(st) && got && r[0] == 'y', "full folder: making a ledger in a full folder is a "
            "message with the fix, not a SIGBUS (status %d)", st);
        tap(got && r[1] == 'y', "full folder: no .gpuarena-*-new-* file is left behind");
    }
    close(up[0]);
}

/* The one-byte answer a forked child writes on pipe up (0 when it wrote none: killed by a signal),
 * after it has ended (its status in *st); both ends closed. */
static char child_answer(pid_t pid, int up[2], int *st)
{
    char r = 0;
    close(up[1]); /* a child killed by a signal then ends the read */
    if (read(up[0], &r, 1) != 1)
        r = 0;
    waitpid(pid, st, 0);
    close(up[0]);
    return r;
}

/* A ledger the process cannot map (its address space at `ulimit -v`, set just above what it uses
 * in a forked child): a new ledger and an existing one are each a message naming the cause and the
 * fix (both said "cannot map ... (Cannot allocate memory)" alone until 2026-12-07), and no
 * .gpuarena-*-new-* file is left. */
void test_map_refused(void)
{
    ga_group_t *held = open_or_die("nomap-old", DEV0, CAP); /* an existing ledger */
    for (int k = 0; k < 2; k++) {
        int up[2];
        if (pipe(up) != 0)
            abort();
        pid_t pid = fork();
        if (pid == 0) {
            char err[1024] = "", r = 'n';
            long pages = 0;
            FILE *f = fopen("/proc/self/statm", "r");
            if (!f || fscanf(f, "%ld", &pages) != 1)
                _exit(1);
            fclose(f);
            struct rlimit lim = {(rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + 16384,
                                 RLIM_INFINITY};
            lim.rlim_max = lim.rlim_cur;
            if (setrlimit(RLIMIT_AS, &lim) != 0)
                _exit(1);
            ga_group_t *g = ga_group_open(g_dir, k ? "nomap-old" : "nomap-new", DEV0, CAP, err,
                                          sizeof err);
            r = !g && strstr(err, k ? "gpuarena: cannot map the group ledger"
                                    : "gpuarena: cannot map a new group ledger") &&
                strstr(err, strerror(ENOMEM)) && strstr(err, "ulimit -v") ? 'y' : 'n';
            if (r != 'y')
                fprintf(stderr, "map refused: %s\n", g ? "(joined)" : err);
            if (write(up[1], &r, 1) != 1)
                _exit(1);
            _exit(0);
        }
        int st = 0;
        char r = child_answer(pid, up, &st);
        tap(r == 'y', "map refused: %s ledger that cannot be mapped is a message with the "
            "cause and the fix (status %d)", k ? "an existing" : "a new", st);
    }
    tap(count_new_files(g_dir) == 0, "map refused: no .gpuarena-*-new-* file is left behind");
    ga_group_free(held);
}

/* A ledger whose slot pages have no blocks (as an older gpuarena made them, with ftruncate alone),
 * 28 live members on its first page, the folder then full: the 29th member's slot is on the
 * second page. Joining must not SIGBUS. */
void test_full_folder_join(void)
{
    int up[2];
    if (pipe(up) != 0)
        abort();
    pid_t parent = getpid();
    uint64_t pstart = ga_test_start_of(parent);
    pid_t pid = fork();
    if (pid == 0) {
        char dir[600], err[1024] = "", path[700];
        if (small_tmpfs(dir, sizeof dir, 64) != 0) {
            if (write(up[1], "S", 1) != 1)
                _exit(1);
            _exit(0);
        }
        ga_group_t *a = ga_group_open(dir, "fulljoin", DEV0, CAP, err, sizeof err);
        ga_group_path(dir, "fulljoin", DEV0, path, sizeof path);
        int fd = open(path, O_RDWR);
        struct stat ns;
        uint64_t myns = stat("/proc/self/ns/pid", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
        ga_ledger_t *l = fd >= 0 ? mmap(NULL, GA_LEDGER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                                 : MAP_FAILED;
        if (!a || l == MAP_FAILED || fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096,
                                               GA_LEDGER_SIZE - 4096) != 0) {
            if (write(up[1], "S", 1) != 1)
                _exit(1);
            _exit(0);
        }
        for (int i = 1; i < 28; i++) /* slot 0 is a's; the parent test process is alive */
            forge(l, (uint32_t)parent, pstart, myns, MIB);
        fill(dir);
        ga_group_t *b = ga_group_open(dir, "fulljoin", DEV0, CAP, err, sizeof err);
        char r = (!b && strstr(err, strerror(ENOSPC)) && strstr(err, "GPUARENA_GROUP_DIR")) ||
                 (b && ga_group_commit(b, MIB)) ? 'y' : 'n';
        if (r != 'y')
            fprintf(stderr, "full folder join: %s\n", err);
        if (write(up[1], &r, 1) != 1)
            _exit(1);
        _exit(0);
    }
    int st = 0;
    char r = child_answer(pid, up, &st);
    int got = r != 0;
    if (got && r == 'S')
        tap(1, "full folder join # SKIP no tmpfs of our own (needs root or user namespaces)");
    else
        tap(WIFEXITED(st) && got && r == 'y', "full folder: joining a ledger whose next slot page has "
            "no blocks, in a full folder, is a message, not a SIGBUS (status %d)", st);
}

/* ---- the exit: threads still inside ga_group_ calls while the process leaves the group ---- */

typedef struct closer {
    ga_group_t *g;
    volatile int *stop;
    volatile int *running;
} closer_t;

static void *closer_worker(void *arg)
{
    closer_t *c = arg;
    __atomic_add_fetch(c->running, 1, __ATOMIC_SEQ_CST);
    for (uint64_t i = 0; !*c->stop; i++) {
        if (ga_group_commit(c->g, MIB))
            ga_group_uncommit(c->g, MIB);
        ga_group_set_figures(c->g, i, i, i, "platform");
        (void)ga_group_used(c->g);
    }
    return NULL;
}

void test_exit_threads(void)
{
    int bad = 0, runs = 40;
    for (int run = 0; run < runs; run++) {
        pid_t pid = fork();
        if (pid == 0) {
            ga_group_t *g = open_or_die("exiting", DEV0, CAP);
            volatile int stop = 0, running = 0;
            closer_t c = {g, &stop, &running};
            pthread_t t[3];
            for (int i = 0; i < 3; i++)
                pthread_create(&t[i], NULL, closer_worker, &c);
            while (__atomic_load_n(&running, __ATOMIC_SEQ_CST) < 3)
                ;
            ga_group_close(g); /* the exit handler, threads still running */
            for (volatile int k = 0; k < 200000; k++) /* they go on a while after it */
                ;
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    tap(bad == 0, "exit: leaving the group while 3 threads still commit, uncommit and publish "
        "never crashes them (%d of %d runs crashed)", bad, runs);
    tap(!path_exists("exiting"), "exit: and the last one out removed the ledger");
}

void test_files(void)
{
    char err[512] = "", path[512];
    ga_group_path(g_dir, "foreign", DEV0, path, sizeof path);
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    if (fd >= 0) {
        if (ftruncate(fd, GA_LEDGER_SIZE) != 0)
            abort();
        close(fd);
    }
    tap(!ga_group_open(g_dir, "foreign", DEV0, CAP, err, sizeof err) && strstr(err, "remove it"),
        "files: a ledger readable by others is refused: %s", err);
    chmod(path, 0600);
    tap(!ga_group_open(g_dir, "foreign", DEV0, CAP, err, sizeof err) && strstr(err, "damaged") &&
            strstr(err, "remove the file"), "files: a damaged file (zeros) is called damaged: %s", err);
    ga_ledger_t *l = map_ledger("foreign", DEV0);
    if (l) {
        memcpy(l->magic, GA_LEDGER_MAGIC, sizeof GA_LEDGER_MAGIC);
        l->version = GA_GROUP_VERSION + 1;
        munmap(l, GA_LEDGER_SIZE);
    }
    tap(!ga_group_open(g_dir, "foreign", DEV0, CAP, err, sizeof err) &&
            strstr(err, "another gpuarena version") && !strstr(err, "damaged"),
        "files: a ledger of another format version is called so: %s", err);
    unlink(path);
    if (symlink("/nonexistent", path) != 0)
        abort();
    tap(!ga_group_open(g_dir, "foreign", DEV0, CAP, err, sizeof err) &&
            strstr(err, "symbolic link") && strstr(err, "GPUARENA_GROUP_DIR"),
        "files: a symbolic link at the path is named, with the fix: %s", err);
    unlink(path);
    if (mkdir(path, 0700) != 0)
        abort();
    tap(!ga_group_open(g_dir, "foreign", DEV0, CAP, err, sizeof err) && strstr(err, "a folder") &&
            strstr(err, "GPUARENA_GROUP_DIR"), "files: a folder at the path is named, with the fix: %s", err);
    rmdir(path);
    tap(!ga_group_open("/nonexistent-dir", "x", DEV0, CAP, err, sizeof err) &&
            strstr(err, "gpuarena: cannot create"), "files: an unusable directory is said: %s", err);
}
