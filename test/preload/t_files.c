/* Preload tests: no file is destroyed by accident (issue 8 item 8), the shim side.
 *
 * Each test works in a fresh directory of its own under /tmp, runs the workload in a child (the
 * shim starts there), and then looks at what the directory holds: the kind of every entry (a
 * symlink must still be a link, a FIFO a FIFO), its content (a trace that reads back whole, JSON),
 * and that nothing else appeared (no stray temporary file). The rules under test are in
 * shim/outfile.h: the trace wins over a statistics path that names the same file; devices, FIFOs
 * and /proc fd links are written through; a symlink's target is replaced, never the link; a
 * directory is refused; %p works in GPUARENA_TRACE; a second live process never truncates a trace.
 * The process's own descriptors (/dev/stdout, /dev/stderr, /dev/fd/N) are written through a dup,
 * after the program's buffered output: those tests run a program whose stdout is a file or a pipe
 * with stdio output pending at exit, and read back its lines and the report in order; a
 * descriptor closed, or its number reused, is a message and no write.
 * Real /dev files are only ever written to (/dev/null), never given as a path the shim could
 * replace: links to them in the test's own directory stand in for /dev/stdout and friends
 * (/dev/fd/N is used as is: it lies in /proc, where nothing can be created or replaced).
 */
#include "preload_test.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../allocator/ga_trace.h"
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#define TF_EVENTS 9 /* tf_workload: 6 allocations, 3 frees */

typedef struct tf_dir {
    char path[64];
} tf_dir_t;

static void tf_mkdir(tf_dir_t *d)
{
    snprintf(d->path, sizeof d->path, "/tmp/gpuarena-files-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d->path));
}

/* d->path/name into out. */
static char *tf_at(const tf_dir_t *d, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", d->path, name);
    return out;
}

/* Entries of a directory other than . and ..; the first one's name into first (optional). */
static int tf_entries(const char *dir, char *first, size_t len)
{
    DIR *dh = opendir(dir);
    ck_assert_ptr_nonnull(dh);
    int n = 0;
    for (struct dirent *e; (e = readdir(dh));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n++ == 0 && first) {
            size_t k = strnlen(e->d_name, len - 1);
            memcpy(first, e->d_name, k);
            first[k] = '\0';
        }
    }
    closedir(dh);
    return n;
}

static void tf_rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *dh = opendir(path);
        char sub[512];
        for (struct dirent *e; dh && (e = readdir(dh));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                tf_rmtree(sub);
            }
        if (dh)
            closedir(dh);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void tf_setenv(const char *name, const char *value)
{
    ck_assert_int_eq(setenv(name, value, 1), 0);
}

/* A fresh folder d holding a link `name` to `to` (/dev/stdout, /dev/stderr, ...), named by var. */
static void tf_own_link(tf_dir_t *d, const char *var, const char *to, const char *name,
                        char *link_path, size_t len)
{
    tf_mkdir(d);
    ck_assert_int_eq(symlink(to, tf_at(d, name, link_path, len)), 0);
    tf_setenv(var, link_path);
}

static mode_t tf_lkind(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode & S_IFMT : 0;
}

/* Events in a trace file, or -1 when it does not read back as a trace. */
static long tf_trace_events(const char *path, uint32_t only_thread)
{
    ga_trace_t t;
    char msg[256];
    ga_trace_init(&t);
    long n = -1;
    if (ga_trace_read(path, &t, msg, sizeof msg) == 0 && t.truncated_bytes == 0) {
        n = 0;
        for (size_t i = 0; i < t.count; i++)
            n += !only_thread || t.events[i].thread == only_thread;
        if (only_thread && (size_t)n != t.count)
            n = -2; /* records of another thread (process) are in the file */
    }
    ga_trace_free(&t);
    return n;
}

/* ---- the program under test ---- */

typedef struct tf_work {
    const char *link_from, *link_to; /* a hard link made after the first allocation */
    int hold_fd, go_fd;               /* after the allocations: write a byte, wait for one */
    int fork_holder, go_write;        /* fork a child that waits for go_fd's end (go_write closed) */
} tf_work_t;

static int tf_print; /* the workload writes a line to stdout (tests that redirect it) */

static void tf_workload(void *arg)
{
    tf_work_t *w = arg;
    pt_start();
    CUdeviceptr p[6];
    for (int i = 0; i < 6; i++)
        if (cuMemAlloc(&p[i], 4096 * (size_t)(i + 1)) != CUDA_SUCCESS)
            exit(2);
    if (w && w->link_from && link(w->link_to, w->link_from) != 0)
        exit(3);
    if (w && w->hold_fd > 0) {
        char c = 'x';
        if (write(w->hold_fd, &c, 1) != 1 || read(w->go_fd, &c, 1) != 1)
            exit(4);
    }
    if (w && w->fork_holder) { /* the child waits until the test closes its end of the pipe */
        close(w->go_write);
        int ready[2];
        if (pipe(ready) != 0)
            exit(6);
        pid_t pid = fork();
        if (pid == 0) {
            /* Past fork(), so the shim's fork handler has dropped this child's copy of the trace
             * descriptor: say so, then wait. Without the handshake the parent could exit, and the
             * test's next process try the path, before the child had run at all (seen under load). */
            char c = 'r';
            close(ready[0]);
            if (write(ready[1], &c, 1) != 1)
                _exit(1);
            close(ready[1]);
            while (read(w->go_fd, &c, 1) > 0)
                ;
            _exit(0);
        }
        char c;
        close(ready[1]);
        if (pid < 0 || read(ready[0], &c, 1) != 1)
            exit(7);
        close(ready[0]);
    }
    for (int i = 0; i < 6; i += 2)
        cuMemFree(p[i]);
    static const char out[] = "program output\n";
    if (tf_print && write(1, out, sizeof out - 1) != (ssize_t)sizeof out - 1)
        exit(5);
    exit(0);
}

/* Starts the workload in a child with stderr into a file (and stdout into stdout_path if given). */
static pid_t tf_spawn(tf_work_t *w, FILE **err, const char *stdout_path)
{
    *err = tmpfile();
    ck_assert_ptr_nonnull(*err);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fileno(*err), 2);
        if (stdout_path) {
            int fd = open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC, 0644); /* like a shell's > */
            if (fd < 0 || dup2(fd, 1) < 0)
                _exit(6);
            tf_print = 1;
        }
        tf_workload(w);
    }
    return pid;
}

/* Waits for the child: its exit status, its stderr in buf. */
static int tf_wait(pid_t pid, FILE *err, char *buf, size_t len)
{
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    size_t n = fread(buf, 1, len - 1, (rewind(err), err));
    buf[n] = '\0';
    fclose(err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int tf_run(tf_work_t *w, char *buf, size_t len, const char *stdout_path)
{
    FILE *err;
    pid_t pid = tf_spawn(w, &err, stdout_path);
    return tf_wait(pid, err, buf, len);
}

/* ---- GPUARENA_STATS naming the trace: the trace wins ---- */

/* STATS names the trace file (given as stats_name, which the test has made point at it): one
 * message at start, exit status 0, the trace whole, no other file. */
static void tf_clash(const tf_dir_t *d, const char *trace, const char *stats, int entries)
{
    char err[8192];
    tf_setenv("GPUARENA_TRACE", trace);
    tf_setenv("GPUARENA_STATS", stats);
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
    ck_assert_msg(strstr(err, "gpuarena: GPUARENA_STATS=") && strstr(err, "names the same file as "
                  "GPUARENA_TRACE") && strstr(err, "the trace is kept"), "the clash is said: %s", err);
    ck_assert_msg(!strstr(strstr(err, "names the same file") + 1, "names the same file"),
                  "said once: %s", err);
    ck_assert_int_eq(tf_entries(d->path, NULL, 0), entries);
}

START_TEST(stats_same_path_as_trace)
{
    tf_dir_t d;
    char path[128];
    tf_mkdir(&d);
    tf_at(&d, "run.out", path, sizeof path);
    tf_clash(&d, path, path, 1);
    ck_assert_int_eq(tf_trace_events(path, 0), TF_EVENTS);
    tf_rmtree(d.path);
}
END_TEST

START_TEST(stats_same_path_after_pid)
{
    tf_dir_t d;
    char tmpl[128], name[128], path[256];
    tf_mkdir(&d);
    tf_at(&d, "run-%p.out", tmpl, sizeof tmpl);
    tf_clash(&d, tmpl, tmpl, 1);
    tf_entries(d.path, name, sizeof name);
    ck_assert_msg(!strncmp(name, "run-", 4) && atoi(name + 4) > 0, "%%p expanded: %s", name);
    ck_assert_int_eq(tf_trace_events(tf_at(&d, name, path, sizeof path), 0), TF_EVENTS);
    tf_rmtree(d.path);
}
END_TEST

START_TEST(stats_symlink_to_trace)
{
    tf_dir_t d;
    char trace[128], link_path[128];
    tf_mkdir(&d);
    tf_at(&d, "t.gatrace", trace, sizeof trace);
    ck_assert_int_eq(symlink("t.gatrace", tf_at(&d, "stats.json", link_path, sizeof link_path)), 0);
    tf_clash(&d, trace, link_path, 2);
    ck_assert_int_eq(tf_lkind(link_path), S_IFLNK);
    ck_assert_int_eq(tf_trace_events(trace, 0), TF_EVENTS);
    tf_rmtree(d.path);
}
END_TEST

START_TEST(stats_hard_link_to_trace)
{
    tf_dir_t d;
    char trace[128], hard[128];
    tf_mkdir(&d);
    FILE *f = fopen(tf_at(&d, "t.gatrace", trace, sizeof trace), "w");
    fputs("an older trace", f);
    fclose(f);
    ck_assert_int_eq(link(trace, tf_at(&d, "stats.json", hard, sizeof hard)), 0);
    tf_clash(&d, trace, hard, 2);
    struct stat st;
    ck_assert_int_eq(stat(hard, &st), 0);
    ck_assert_int_eq(st.st_nlink, 2); /* still one file under two names */
    ck_assert_int_eq(tf_trace_events(hard, 0), TF_EVENTS);
    tf_rmtree(d.path);
}
END_TEST

/* The clash appears only during the run (a hard link made after the trace was created): the
 * statistics are still not written over the trace. */
START_TEST(stats_link_made_during_run)
{
    tf_dir_t d;
    char trace[128], late[128], err[8192];
    tf_mkdir(&d);
    tf_at(&d, "t.gatrace", trace, sizeof trace);
    tf_at(&d, "late.json", late, sizeof late);
    tf_setenv("GPUARENA_TRACE", trace);
    tf_setenv("GPUARENA_STATS", late);
    tf_work_t w = {.link_from = late, .link_to = trace};
    ck_assert_int_eq(tf_run(&w, err, sizeof err, NULL), 0);
    ck_assert_msg(strstr(err, "names the same file as GPUARENA_TRACE"), "said at exit: %s", err);
    ck_assert_int_eq(tf_trace_events(trace, 0), TF_EVENTS);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 2);
    tf_rmtree(d.path);
}
END_TEST

/* ---- GPUARENA_STATS through links, devices and FIFOs ---- */

START_TEST(stats_symlink_target_replaced_not_link)
{
    tf_dir_t d;
    char real[128], link_path[128], err[8192];
    tf_mkdir(&d);
    FILE *f = fopen(tf_at(&d, "real.json", real, sizeof real), "w");
    fputs("old", f);
    fclose(f);
    ck_assert_int_eq(chmod(real, 0600), 0);
    ck_assert_int_eq(symlink("real.json", tf_at(&d, "stats-link", link_path, sizeof link_path)), 0);
    tf_setenv("GPUARENA_STATS", link_path);
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
    ck_assert_int_eq(tf_lkind(link_path), S_IFLNK);
    ck_assert_int_eq(pt_json_check(real, "d['gpuarena_stats'] >= 1"), 0);
    struct stat st;
    ck_assert_int_eq(stat(real, &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0600); /* the replaced file's mode is kept */
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 2);
    tf_rmtree(d.path);
}
END_TEST

START_TEST(stats_through_fifo)
{
    tf_dir_t d;
    char fifo[128], err[8192], json[16384];
    tf_mkdir(&d);
    ck_assert_int_eq(mkfifo(tf_at(&d, "fifo", fifo, sizeof fifo), 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK); /* the reader is there before the writer */
    ck_assert_int_ge(rd, 0);
    tf_setenv("GPUARENA_STATS", fifo);
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
    ssize_t n = read(rd, json, sizeof json - 1);
    close(rd);
    json[n > 0 ? n : 0] = '\0';
    ck_assert_msg(strstr(json, "\"gpuarena_stats\""), "the JSON came through the FIFO: '%s' %s",
                  json, err);
    ck_assert_int_eq(tf_lkind(fifo), S_IFIFO);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1);
    tf_rmtree(d.path);
}
END_TEST

START_TEST(stats_fifo_without_reader)
{
    tf_dir_t d;
    char fifo[128], err[8192];
    tf_mkdir(&d);
    ck_assert_int_eq(mkfifo(tf_at(&d, "fifo", fifo, sizeof fifo), 0600), 0);
    tf_setenv("GPUARENA_STATS", fifo);
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0); /* neither blocks nor fails */
    ck_assert_msg(strstr(err, "gpuarena: GPUARENA_STATS=") && strstr(err, "nobody is reading"),
                  "%s", err);
    ck_assert_int_eq(tf_lkind(fifo), S_IFIFO);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1);
    tf_rmtree(d.path);
}
END_TEST

static void tf_expect_dev_null(void)
{
    struct stat st;
    ck_assert_int_eq(lstat("/dev/null", &st), 0);
    ck_assert_msg(S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3,
                  "/dev/null is still the null device");
}

START_TEST(stats_symlink_to_dev_null)
{
    tf_dir_t d;
    char link_path[128], err[8192];
    tf_own_link(&d, "GPUARENA_STATS", "/dev/null", "null", link_path, sizeof link_path);
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
    ck_assert_msg(!strstr(err, "gpuarena:"), "no message: %s", err);
    ck_assert_int_eq(tf_lkind(link_path), S_IFLNK);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1);
    tf_expect_dev_null();
    tf_rmtree(d.path);
}
END_TEST

/* The real /dev/null as the path (written to, which is harmless; it must stay the device). */
START_TEST(stats_dev_null)
{
    char err[8192];
    tf_setenv("GPUARENA_STATS", "/dev/null");
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
    ck_assert_msg(!strstr(err, "gpuarena:"), "no message: %s", err);
    tf_expect_dev_null();
    DIR *dh = opendir("/dev");
    ck_assert_ptr_nonnull(dh);
    for (struct dirent *e; (e = readdir(dh));)
        ck_assert_msg(strncmp(e->d_name, "null.", 5) != 0, "no /dev/%s", e->d_name);
    closedir(dh);
}
END_TEST

/* /proc/self/fd/1 (what /dev/stdout points to), directly and through a link of the test's own:
 * stdout is a file opened as a shell's '>' does; the report is appended after the program's own
 * output, which stays. */
static void tf_stdout_case(const char *stats_path, const tf_dir_t *d)
{
    char out[128], err[8192], buf[16384];
    tf_at(d, "stdout.txt", out, sizeof out);
    tf_setenv("GPUARENA_STATS", stats_path);
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, out), 0);
    FILE *f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    static const char prog[] = "program output\n";
    ck_assert_msg(!strncmp(buf, prog, sizeof prog - 1), "the program's output is kept: '%.80s' %s",
                  buf, err);
    ck_assert_msg(buf[sizeof prog - 1] == '{' && strstr(buf, "\"gpuarena_stats\"") &&
                  n > 2 && !strcmp(buf + n - 2, "}\n"), "the JSON follows it: '%.200s' %s", buf, err);
    ck_assert_int_eq(tf_lkind(out), S_IFREG);
}

START_TEST(stats_proc_self_fd_1)
{
    tf_dir_t d;
    tf_mkdir(&d);
    tf_stdout_case("/proc/self/fd/1", &d);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1);
    tf_rmtree(d.path);
}
END_TEST

START_TEST(stats_symlink_to_proc_fd)
{
    tf_dir_t d;
    char link_path[128];
    tf_mkdir(&d);
    ck_assert_int_eq(symlink("/proc/self/fd/1", tf_at(&d, "stdout", link_path, sizeof link_path)), 0);
    tf_stdout_case(link_path, &d);
    ck_assert_int_eq(tf_lkind(link_path), S_IFLNK);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 2);
    tf_rmtree(d.path);
}
END_TEST

START_TEST(stats_directory_refused)
{
    tf_dir_t d;
    char sub[128], err[8192];
    tf_mkdir(&d);
    ck_assert_int_eq(mkdir(tf_at(&d, "sub", sub, sizeof sub), 0755), 0);
    tf_setenv("GPUARENA_STATS", sub);
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
    ck_assert_msg(strstr(err, "gpuarena: GPUARENA_STATS=") && strstr(err, "is a directory") &&
                  strstr(err, "stats-%p.json"), "%s", err);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1); /* no sub.tmp beside it */
    ck_assert_int_eq(tf_entries(sub, NULL, 0), 0);
    tf_rmtree(d.path);
}
END_TEST

/* A program or library (an ELF file) named as the statistics or the trace is left as it was, with
 * the reason: written over, the shim itself became JSON and every later run went uncapped. */
START_TEST(outputs_never_over_an_elf_file)
{
    static const char elf[] = "\177ELF\2\1\1\0 a library";
    static const char *vars[] = {"GPUARENA_STATS", "GPUARENA_TRACE"};
    for (int i = 0; i < 2; i++) {
        tf_dir_t d;
        char lib[128], err[8192], back[64] = {0};
        tf_mkdir(&d);
        FILE *f = fopen(tf_at(&d, "lib.so", lib, sizeof lib), "wb");
        ck_assert_ptr_nonnull(f);
        fwrite(elf, 1, sizeof elf, f);
        fclose(f);
        tf_setenv(vars[i], lib);
        ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
        ck_assert_msg(strstr(err, "is a program or library (an ELF file), which the output would "
                                  "replace"), "%s: %s", vars[i], err);
        f = fopen(lib, "rb");
        ck_assert_uint_eq(fread(back, 1, sizeof back, f), sizeof elf);
        fclose(f);
        ck_assert_msg(!memcmp(back, elf, sizeof elf), "%s: the file was changed", vars[i]);
        ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1); /* no temporary left beside it */
        unsetenv(vars[i]);
        tf_rmtree(d.path);
    }
}
END_TEST

/* ---- the process's own descriptors (/dev/stdout, /dev/stderr, /dev/fd/N), buffered output ----
 *
 * The program's stdout is a file or a pipe, so stdio buffers it fully, and exit() flushes it only
 * after the shim's destructor has written the report: the report must still come after the
 * program's lines, and neither may overwrite the other. The path is a link in the test's own
 * directory to /dev/stdout (what a user types, resolved the same way), or /dev/fd/N. */

#define TF_LINE1 "line 1 of the program's own output\n"
#define TF_LINE2 "line 2 of the program's own output\n"
#define TF_CHILD "a line from the forked child\n"

typedef struct tf_own {
    int out_fd, err_to_out, fd9;  /* the child's stdout (a file or a pipe), 2>&1, 9> (-1: none) */
    int quiet;                    /* prints nothing (a trace on stdout reads back only alone) */
    int close_at_start, close_at_end; /* closes fd 1 before the first CUDA call / after the last */
    const char *reuse_path;       /* after close_at_end: opens this file, which takes number 1 */
    int fork_child;               /* a forked child allocates, prints a line and exits */
    int no_terminal;              /* a new session, stdin closed, stdout /dev/null */
    int sigpipe_default;          /* SIGPIPE's default action, whatever the test runner's was */
} tf_own_t;

#define TF_OWN_INIT {.out_fd = -1, .fd9 = -1}

/* After fork: allocates 1 MiB in a context of its own, prints a line, exits through exit(). */
static void tf_own_fork(void)
{
    fflush(stdout); /* a program that forks flushes first, or the child repeats its buffer */
    pid_t pid = fork();
    if (pid == 0) {
        CUcontext c;
        CUdeviceptr q;
        if (cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c) || cuMemAlloc(&q, MiB))
            exit(8);
        printf(TF_CHILD);
        exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        exit(9);
}

static void tf_own_workload(const tf_own_t *w)
{
    if ((w->out_fd >= 0 && dup2(w->out_fd, 1) < 0) || (w->err_to_out && dup2(1, 2) < 0) ||
        (w->fd9 >= 0 && (fcntl(9, F_GETFD) != -1 || dup2(w->fd9, 9) < 0)))
        _exit(6); /* 9: a number Check does not use (it talks to the runner through 3) */
    if (w->no_terminal && (setsid() < 0 || close(0) != 0 || !freopen("/dev/null", "w", stdout)))
        _exit(6);
    if (w->sigpipe_default)
        signal(SIGPIPE, SIG_DFL);
    setvbuf(stdout, NULL, _IOFBF, 1 << 16); /* as for any file or pipe, whatever the test's was */
    if (!w->quiet)
        printf(TF_LINE1);
    if (w->close_at_start)
        close(1);
    pt_start();
    CUdeviceptr p[6];
    for (int i = 0; i < 6; i++)
        if (cuMemAlloc(&p[i], 4096 * (size_t)(i + 1)) != CUDA_SUCCESS)
            exit(2);
    for (int i = 0; i < 6; i += 2)
        cuMemFree(p[i]);
    if (w->fork_child)
        tf_own_fork();
    if (w->close_at_end) {
        fflush(stdout);
        close(1);
        if (w->reuse_path && (open(w->reuse_path, O_WRONLY | O_CREAT | O_TRUNC, 0644) != 1 ||
                              write(1, "DATA", 4) != 4))
            exit(7);
    }
    if (!w->quiet)
        printf(TF_LINE2);
    exit(0); /* stdout is flushed by exit(), after the shim's destructor */
}

static pid_t tf_own_spawn(const tf_own_t *w, FILE **err)
{
    *err = tmpfile();
    ck_assert_ptr_nonnull(*err);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fileno(*err), 2);
        tf_own_workload(w);
    }
    return pid;
}

/* Runs w with stdout into d/name, a file opened as a shell's '>' does: the exit status. */
static int tf_own_to_file(tf_own_t *w, const tf_dir_t *d, const char *name, char *err, size_t len)
{
    char out[128];
    w->out_fd = open(tf_at(d, name, out, sizeof out), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(w->out_fd, 0);
    FILE *ef;
    pid_t pid = tf_own_spawn(w, &ef);
    close(w->out_fd);
    return tf_wait(pid, ef, err, len);
}

/* Runs w with stdout into a pipe, which the test reads to its end into d/name: the exit status. */
static int tf_own_to_pipe(tf_own_t *w, const tf_dir_t *d, const char *name, char *err, size_t len)
{
    char out[128], buf[4096];
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    w->out_fd = pfd[1];
    FILE *ef, *f = fopen(tf_at(d, name, out, sizeof out), "w");
    ck_assert_ptr_nonnull(f);
    pid_t pid = tf_own_spawn(w, &ef);
    close(pfd[1]); /* the end comes when the child (and any child of its) has exited */
    for (ssize_t n; (n = read(pfd[0], buf, sizeof buf)) != 0;) {
        ck_assert_int_gt(n, 0);
        ck_assert_int_eq(fwrite(buf, 1, (size_t)n, f), (size_t)n);
    }
    close(pfd[0]);
    fclose(f);
    return tf_wait(pid, ef, err, len);
}

/* What the file at path holds, as a list: each line of text as it is, each statistics report as
 * "{stats N}" (N its alloc_calls; a report must be whole JSON and end its line), '|' between. */
static const char tf_summary_py[] =
    "import json, sys\n"
    "s = open(sys.argv[1], encoding='utf-8', errors='replace').read()\n"
    "out, i, dec = [], 0, json.JSONDecoder()\n"
    "while i < len(s):\n"
    "    if s[i] == '{':\n"
    "        try:\n"
    "            d, j = dec.raw_decode(s, i)\n"
    "            ok = s[j:j + 1] == '\\n'\n"
    "            tag = '{stats %d}' % d['totals']['alloc_calls']\n"
    "            out.append(tag if ok else tag + '<no newline>')\n"
    "            i = j + ok\n"
    "            continue\n"
    "        except ValueError:\n"
    "            pass\n"
    "    j = s.find('\\n', i)\n"
    "    j = len(s) if j < 0 else j + 1\n"
    "    out.append(s[i:j - 1] if s[j - 1] == '\\n' else s[i:j] + '<no newline>')\n"
    "    i = j\n"
    "print('|'.join(out), end='')\n";

static void tf_summary(const tf_dir_t *d, const char *name, char *out, size_t len)
{
    char py[128], path[128], cmd[512];
    FILE *f = fopen(tf_at(d, "summary.py", py, sizeof py), "w");
    ck_assert_ptr_nonnull(f);
    fputs(tf_summary_py, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "env -u LD_PRELOAD python3 '%s' '%s'", py,
             tf_at(d, name, path, sizeof path));
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    unlink(py);
}

#define TF_LINES "line 1 of the program's own output|line 2 of the program's own output"

/* stdout (a file or a pipe) must hold the program's two lines, then one whole report. */
static void tf_own_stats(int to_pipe, const char *link_to, int err_to_out)
{
    tf_dir_t d;
    char link_path[128], err[8192], sum[1024];
    tf_own_link(&d, "GPUARENA_STATS", link_to, "out-link", link_path, sizeof link_path);
    tf_own_t w = TF_OWN_INIT;
    w.err_to_out = err_to_out;
    int rc = to_pipe ? tf_own_to_pipe(&w, &d, "stdout.txt", err, sizeof err)
                     : tf_own_to_file(&w, &d, "stdout.txt", err, sizeof err);
    ck_assert_msg(rc == 0, "exit status %d: %s", rc, err);
    tf_summary(&d, "stdout.txt", sum, sizeof sum);
    ck_assert_msg(!strcmp(sum, TF_LINES "|{stats 6}"), "the program's lines, then the report: "
                  "'%s' %s", sum, err);
    ck_assert_int_eq(tf_lkind(link_path), S_IFLNK);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 2); /* no temporary file beside anything */
    tf_rmtree(d.path);
}

START_TEST(stats_own_stdout_buffered_file)
{
    tf_own_stats(0, "/dev/stdout", 0);
}
END_TEST

START_TEST(stats_own_stdout_buffered_pipe)
{
    tf_own_stats(1, "/dev/stdout", 0);
}
END_TEST

/* 2>&1: the report goes through stderr, which shares stdout's offset. */
START_TEST(stats_own_stderr_buffered_file)
{
    tf_own_stats(0, "/dev/stderr", 1);
}
END_TEST

START_TEST(stats_own_proc_self_fd_buffered_pipe)
{
    tf_own_stats(1, "/proc/self/fd/1", 0);
}
END_TEST

/* A descriptor other than the standard three, as '9>stats.json' gives it: the file is written
 * through (the same file, not replaced), holding the report alone. */
START_TEST(stats_own_dev_fd_9)
{
    tf_dir_t d;
    char path[128], err[8192], sum[1024];
    struct stat before, after;
    tf_mkdir(&d);
    tf_own_t w = TF_OWN_INIT;
    w.fd9 = open(tf_at(&d, "fd9.json", path, sizeof path), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(w.fd9, 0);
    ck_assert_int_eq(fstat(w.fd9, &before), 0);
    tf_setenv("GPUARENA_STATS", "/dev/fd/9");
    ck_assert_int_eq(tf_own_to_file(&w, &d, "stdout.txt", err, sizeof err), 0);
    close(w.fd9);
    tf_summary(&d, "fd9.json", sum, sizeof sum);
    ck_assert_msg(!strcmp(sum, "{stats 6}"), "the report alone: '%s' %s", sum, err);
    tf_summary(&d, "stdout.txt", sum, sizeof sum);
    ck_assert_msg(!strcmp(sum, TF_LINES), "stdout untouched: '%s'", sum);
    ck_assert_int_eq(stat(path, &after), 0);
    ck_assert_int_eq(after.st_ino, before.st_ino);
    ck_assert_int_eq(after.st_mode & 07777, 0600);
    tf_rmtree(d.path);
}
END_TEST

/* A forked child that allocates writes its own report through the same descriptor: both reports
 * whole, each after the lines its process printed before exiting. */
START_TEST(stats_own_stdout_forked_child)
{
    tf_dir_t d;
    char link_path[128], err[8192], sum[1024];
    tf_own_link(&d, "GPUARENA_STATS", "/dev/stdout", "out-link", link_path, sizeof link_path);
    tf_own_t w = TF_OWN_INIT;
    w.fork_child = 1;
    ck_assert_int_eq(tf_own_to_file(&w, &d, "stdout.txt", err, sizeof err), 0);
    tf_summary(&d, "stdout.txt", sum, sizeof sum);
    ck_assert_msg(!strcmp(sum, "line 1 of the program's own output|a line from the forked child|"
                  "{stats 1}|line 2 of the program's own output|{stats 6}"), "'%s' %s", sum, err);
    tf_rmtree(d.path);
}
END_TEST

/* stdout closed by the program: a message saying what to do, no crash, exit status 0. */
START_TEST(stats_own_stdout_closed)
{
    tf_dir_t d;
    char link_path[128], err[8192], sum[1024];
    tf_own_link(&d, "GPUARENA_STATS", "/dev/stdout", "out-link", link_path, sizeof link_path);
    tf_own_t w = TF_OWN_INIT;
    w.close_at_end = 1;
    ck_assert_int_eq(tf_own_to_file(&w, &d, "stdout.txt", err, sizeof err), 0);
    ck_assert_msg(strstr(err, "gpuarena: GPUARENA_STATS=") && strstr(err, "names descriptor 1, "
                  "which is closed") && strstr(err, "give GPUARENA_STATS a file path"), "%s", err);
    tf_summary(&d, "stdout.txt", sum, sizeof sum);
    ck_assert_msg(!strcmp(sum, "line 1 of the program's own output"), "'%s'", sum);
    tf_rmtree(d.path);
}
END_TEST

/* stdout closed and its number taken by the program's own data file: that file is not the output
 * that was named, and is left as the program wrote it. */
START_TEST(stats_own_stdout_number_reused)
{
    tf_dir_t d;
    char link_path[128], data[128], err[8192], buf[64];
    tf_own_link(&d, "GPUARENA_STATS", "/dev/stdout", "out-link", link_path, sizeof link_path);
    tf_own_t w = TF_OWN_INIT;
    w.close_at_end = 1;
    w.reuse_path = tf_at(&d, "data.bin", data, sizeof data);
    ck_assert_int_eq(tf_own_to_file(&w, &d, "stdout.txt", err, sizeof err), 0);
    ck_assert_msg(strstr(err, "gpuarena: GPUARENA_STATS=") && strstr(err, "names descriptor 1, "
                  "which now refers to another file") && strstr(err, "nothing was written"), "%s",
                  err);
    FILE *f = fopen(data, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The program's own stdio flushes line 2 there at exit, as it would without gpuarena. */
    ck_assert_str_eq(buf, "DATA" TF_LINE2);
    tf_rmtree(d.path);
}
END_TEST

/* No terminal anywhere: a new session, stdin closed, stdout the null device. Quiet, status 0. */
START_TEST(stats_own_stdout_no_terminal)
{
    char err[8192];
    tf_setenv("GPUARENA_STATS", "/dev/fd/1");
    tf_own_t w = TF_OWN_INIT;
    w.no_terminal = 1;
    FILE *ef;
    pid_t pid = tf_own_spawn(&w, &ef);
    ck_assert_int_eq(tf_wait(pid, ef, err, sizeof err), 0);
    ck_assert_msg(!strstr(err, "gpuarena:"), "no message: %s", err);
    tf_expect_dev_null();
}
END_TEST

/* stdout is a pipe nobody reads any more, the report goes to stderr: the program still dies of
 * SIGPIPE at its final flush, as it would without gpuarena, but only after the report is out. */
START_TEST(stats_own_stderr_stdout_reader_gone)
{
    tf_dir_t d;
    char link_path[128], err[8192];
    tf_own_link(&d, "GPUARENA_STATS", "/dev/stderr", "err-link", link_path, sizeof link_path);
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    close(pfd[0]);
    tf_own_t w = TF_OWN_INIT;
    w.out_fd = pfd[1];
    w.sigpipe_default = 1;
    FILE *ef;
    pid_t pid = tf_own_spawn(&w, &ef);
    close(pfd[1]);
    ck_assert_int_eq(tf_wait(pid, ef, err, sizeof err), 128 + SIGPIPE);
    size_t n = strlen(err);
    ck_assert_msg(!strncmp(err, "{\"gpuarena_stats\"", 17) && n > 2 && !strcmp(err + n - 2, "}\n"),
                  "the whole report on stderr: %s", err);
    tf_rmtree(d.path);
}
END_TEST

/* A trace on stdout, alone there: it reads back whole, from a file and from a pipe. */
START_TEST(trace_own_stdout_file_and_pipe)
{
    tf_dir_t d;
    char link_path[128], path[128], err[8192];
    tf_own_link(&d, "GPUARENA_TRACE", "/dev/stdout", "out-link", link_path, sizeof link_path);
    tf_own_t w = TF_OWN_INIT;
    w.quiet = 1;
    ck_assert_int_eq(tf_own_to_file(&w, &d, "file.gatrace", err, sizeof err), 0);
    ck_assert_int_eq(tf_trace_events(tf_at(&d, "file.gatrace", path, sizeof path), 0), TF_EVENTS);
    ck_assert_int_eq(tf_own_to_pipe(&w, &d, "pipe.gatrace", err, sizeof err), 0);
    ck_assert_int_eq(tf_trace_events(tf_at(&d, "pipe.gatrace", path, sizeof path), 0), TF_EVENTS);
    ck_assert_msg(!strstr(err, "gpuarena:"), "no message: %s", err);
    tf_rmtree(d.path);
}
END_TEST

/* A trace on stdout that the program prints to as well: mixed, so no longer a trace, but no byte
 * of either is lost (before, the program's flush at exit overwrote the trace's first bytes). */
START_TEST(trace_own_stdout_with_program_output)
{
    tf_dir_t d;
    char link_path[128], path[128], err[8192], buf[4096];
    tf_own_link(&d, "GPUARENA_TRACE", "/dev/stdout", "out-link", link_path, sizeof link_path);
    tf_own_t w = TF_OWN_INIT;
    ck_assert_int_eq(tf_own_to_file(&w, &d, "out", err, sizeof err), 0);
    FILE *f = fopen(tf_at(&d, "out", path, sizeof path), "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    static const char lines[] = TF_LINE1 TF_LINE2;
    size_t trace = GA_TRACE_HEADER_SIZE + TF_EVENTS * GA_TRACE_RECORD_SIZE;
    ck_assert_uint_eq(n, trace + sizeof lines - 1);
    ck_assert_ptr_nonnull(memmem(buf, n, lines, sizeof lines - 1));
    tf_rmtree(d.path);
}
END_TEST

/* A trace named as stdout, which is closed when CUDA starts: untraced, said, status 0. */
START_TEST(trace_own_stdout_closed)
{
    tf_dir_t d;
    char link_path[128], err[8192];
    tf_own_link(&d, "GPUARENA_TRACE", "/dev/stdout", "out-link", link_path, sizeof link_path);
    tf_own_t w = TF_OWN_INIT;
    w.close_at_start = 1;
    ck_assert_int_eq(tf_own_to_file(&w, &d, "stdout.txt", err, sizeof err), 0);
    ck_assert_msg(strstr(err, "gpuarena: GPUARENA_TRACE=") && strstr(err, "names descriptor 1, "
                  "which is closed") && strstr(err, "untraced"), "%s", err);
    tf_rmtree(d.path);
}
END_TEST

/* ---- GPUARENA_TRACE ---- */

START_TEST(trace_path_pid)
{
    tf_dir_t d;
    char tmpl[128], name[128], path[256], err[8192];
    tf_mkdir(&d);
    tf_setenv("GPUARENA_TRACE", tf_at(&d, "trace-%p.gatrace", tmpl, sizeof tmpl));
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
    ck_assert_int_eq(tf_entries(d.path, name, sizeof name), 1);
    ck_assert_msg(!strncmp(name, "trace-", 6) && atoi(name + 6) > 0, "%%p expanded: %s", name);
    ck_assert_int_eq(tf_trace_events(tf_at(&d, name, path, sizeof path), 0), TF_EVENTS);
    tf_rmtree(d.path);
}
END_TEST

/* A second live process given the same trace path leaves the first one's trace whole, runs on
 * untraced, and says so (suggesting %p). Synchronised by pipes: the first holds the trace open
 * while the second runs from start to exit. */
START_TEST(trace_second_process_refused)
{
    tf_dir_t d;
    char trace[128], err_a[8192], err_b[8192];
    tf_mkdir(&d);
    tf_setenv("GPUARENA_TRACE", tf_at(&d, "shared.gatrace", trace, sizeof trace));
    int held[2], go[2];
    ck_assert_int_eq(pipe(held), 0);
    ck_assert_int_eq(pipe(go), 0);
    tf_work_t wa = {.hold_fd = held[1], .go_fd = go[0]};
    FILE *ea;
    pid_t a = tf_spawn(&wa, &ea, NULL);
    char c;
    ck_assert_int_eq(read(held[0], &c, 1), 1); /* A has allocated: its trace is open */
    ck_assert_int_eq(tf_run(NULL, err_b, sizeof err_b, NULL), 0);
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    ck_assert_int_eq(tf_wait(a, ea, err_a, sizeof err_a), 0);
    ck_assert_msg(strstr(err_b, "gpuarena: GPUARENA_TRACE=") &&
                  strstr(err_b, "another running process") && strstr(err_b, "untraced") &&
                  strstr(err_b, "%p"), "the second process says so: %s", err_b);
    ck_assert_msg(!strstr(err_a, "gpuarena:"), "the first says nothing: %s", err_a);
    ck_assert_int_eq(tf_trace_events(trace, (uint32_t)a), TF_EVENTS); /* all A's, all there */
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1);
    tf_rmtree(d.path);
}
END_TEST

/* A forked child that outlives its parent does not keep the parent's claim on the trace: the next
 * process to use the path records normally. */
START_TEST(trace_claim_ends_with_the_writer)
{
    tf_dir_t d;
    char trace[128], err[8192];
    tf_mkdir(&d);
    tf_setenv("GPUARENA_TRACE", tf_at(&d, "t.gatrace", trace, sizeof trace));
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    tf_work_t w = {.fork_holder = 1, .go_fd = go[0], .go_write = go[1]};
    ck_assert_int_eq(tf_run(&w, err, sizeof err, NULL), 0); /* its forked child still runs */
    FILE *eb;
    pid_t b = tf_spawn(NULL, &eb, NULL);
    ck_assert_int_eq(tf_wait(b, eb, err, sizeof err), 0);
    close(go[1]); /* the grandchild ends */
    close(go[0]);
    ck_assert_msg(!strstr(err, "another running process"), "%s", err);
    ck_assert_int_eq(tf_trace_events(trace, (uint32_t)b), TF_EVENTS);
    tf_rmtree(d.path);
}
END_TEST

START_TEST(trace_through_symlink_and_dev_null)
{
    tf_dir_t d;
    char real[128], link_path[128], err[8192];
    tf_mkdir(&d);
    tf_at(&d, "real.gatrace", real, sizeof real);
    ck_assert_int_eq(symlink("real.gatrace", tf_at(&d, "tl", link_path, sizeof link_path)), 0);
    tf_setenv("GPUARENA_TRACE", link_path);
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
    ck_assert_int_eq(tf_lkind(link_path), S_IFLNK);
    ck_assert_int_eq(tf_trace_events(real, 0), TF_EVENTS);
    tf_setenv("GPUARENA_TRACE", "/dev/null");
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
    ck_assert_msg(!strstr(err, "gpuarena:"), "no message: %s", err);
    tf_expect_dev_null();
    tf_rmtree(d.path);
}
END_TEST

START_TEST(trace_directory_refused)
{
    tf_dir_t d;
    char err[8192];
    tf_mkdir(&d);
    tf_setenv("GPUARENA_TRACE", d.path);
    ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
    ck_assert_msg(strstr(err, "gpuarena: GPUARENA_TRACE=") && strstr(err, "is a directory") &&
                  strstr(err, "untraced"), "%s", err);
    ck_assert_int_eq(tf_entries(d.path, NULL, 0), 0);
    tf_rmtree(d.path);
}
END_TEST

/* A thread still blocked reading stdin when main returns holds stdin's lock for good: the report
 * to the program's own stderr or stdout must not wait for it (flushing every stream would), and
 * the process exits with its status. A hang fails the test at the case's timeout. */
static int tf_reading[2]; /* the reader says it holds stdin's lock */

static void *tf_read_stdin(void *arg)
{
    char line[64];
    (void)arg;
    flockfile(stdin); /* as fgets does, held until a line comes: never */
    if (write(tf_reading[1], "r", 1) != 1)
        return NULL;
    return fgets_unlocked(line, sizeof line, stdin);
}

static void tf_stdin_reader_child(void *arg)
{
    int in[2];
    pthread_t t;
    CUdeviceptr p;
    setenv("GPUARENA_STATS", (const char *)arg, 1);
    if (pipe(in) || dup2(in[0], 0) < 0 || !freopen("/dev/null", "w", stdout))
        exit(2); /* in[1] stays open: the reader never gets a line */
    pt_start();
    char c;
    if (pipe(tf_reading) || cuMemAlloc(&p, 4096) ||
        pthread_create(&t, NULL, tf_read_stdin, NULL) || read(tf_reading[0], &c, 1) != 1)
        exit(3);
    printf("buffered\n");
    exit(0);
}

START_TEST(stats_own_exit_with_stdin_reader)
{
    static const char *const paths[] = {"-", "/dev/stdout", "/dev/stderr"};
    for (int i = 0; i < 3; i++) {
        char err[8192];
        int rc = pt_run_child(tf_stdin_reader_child, (void *)paths[i], err, sizeof err);
        ck_assert_msg(rc == 0, "GPUARENA_STATS=%s: exit %d; %s", paths[i], rc, err);
        if (i != 1)
            ck_assert_msg(strstr(err, "\"totals\""), "GPUARENA_STATS=%s: the report: %s", paths[i], err);
    }
}
END_TEST

/* exit() while a CUDA call holds its context's lock (helper-43 F1, F2): another thread's
 * teardown of its context (cuDevicePrimaryCtxReset, after a cuMemAllocAsync) waits in the driver
 * with the lock held (the simulated driver holds it there for ever, as a hung teardown), and the
 * process exits: from main, or from a signal handler that interrupted that very call, the common
 * SIGTERM handler that calls exit(). The statistics writer waited for the lock without a bound, so
 * neither process ever exited. Now it waits 1 s, leaves that pool out, marks its entry and says
 * so; the exit status is the program's. (The deferred fence's wait, which this test used first,
 * and then the wait for a cuMemFreeAsync'd block before an out-of-memory, now hold no lock: h34
 * F6.) */
static CUcontext tf_held_ctx;

static void tf_exit_in_handler(int sig)
{
    (void)sig;
    exit(0);
}

static void *tf_wait_in_driver(void *arg)
{
    CUdeviceptr p;
    CUstream s;
    CUdevice dev;
    unsigned gate;
    (void)arg;
    if (cuCtxSetCurrent(tf_held_ctx) || cuCtxGetDevice(&dev) ||
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAllocAsync(&p, 5 << 20, s) ||
        cuStreamSynchronize(s) || simcuda_hold_next_ctx_teardown(&gate) != CUDA_SUCCESS)
        exit(3);
    cuDevicePrimaryCtxReset(dev); /* in the driver, the context's lock held, for ever */
    exit(4);
}

typedef struct tf_held {
    const char *mode, *stats;
    int from_handler;
} tf_held_t;

static void tf_exit_held_child(void *arg)
{
    const tf_held_t *h = arg;
    pthread_t t;
    setenv("GPUARENA_MODE", h->mode, 1);
    setenv("GPUARENA_STATS", h->stats, 1);
    setenv("GPUARENA_LIMIT", "8MiB", 1);
    tf_held_ctx = pt_start();
    signal(SIGUSR1, tf_exit_in_handler);
    unsigned long long before = simcuda_entry_calls("cuDevicePrimaryCtxReset_v2");
    if (pthread_create(&t, NULL, tf_wait_in_driver, NULL))
        exit(2);
    while (simcuda_entry_calls("cuDevicePrimaryCtxReset_v2") == before)
        sched_yield();
    if (h->from_handler) {
        pthread_kill(t, SIGUSR1);
        for (;;)
            pause();
    }
    exit(0);
}

/* ThreadSanitizer holds a signal back until the thread's next call it intercepts, which a thread
 * waiting inside the driver never makes: under it the handler cannot run, so only main exits. */
#if defined(__SANITIZE_THREAD__)
#define TF_EXIT_WAYS 1
#else
#define TF_EXIT_WAYS 2
#endif

START_TEST(stats_exit_while_a_call_holds_the_lock)
{
    static const char *const modes[] = {"arena", "grow", "vmm"};
    for (int m = 0; m < 3; m++)
        for (int from_handler = 0; from_handler < TF_EXIT_WAYS; from_handler++) {
            tf_dir_t d;
            char stats[128], out[128], err[8192];
            tf_mkdir(&d);
            tf_held_t h = {modes[m], tf_at(&d, "s.json", stats, sizeof stats), from_handler};
            /* In a child with a deadline of its own: a hang is killed, not left behind. */
            int fd = open(tf_at(&d, "err", out, sizeof out), O_RDWR | O_CREAT | O_TRUNC, 0600);
            ck_assert_int_ge(fd, 0);
            pid_t pid = fork();
            ck_assert_int_ge(pid, 0);
            if (pid == 0) {
                dup2(fd, 2);
                tf_exit_held_child(&h);
            }
            int status = 0, waited = 0;
            while (waitpid(pid, &status, WNOHANG) == 0 && waited++ < 1000)
                usleep(10000);
            if (waited > 1000) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
            }
            ssize_t n = pread(fd, err, sizeof err - 1, 0);
            err[n > 0 ? n : 0] = '\0';
            close(fd);
            ck_assert_msg(waited <= 1000, "%s, exit from %s: still running after 10 s; %s", modes[m],
                          from_handler ? "the handler" : "main", err);
            ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status 0x%x; %s",
                          modes[m], status, err);
            ck_assert_msg(strstr(err, "gpuarena: the statistics leave out the pool of context") &&
                          strstr(err, "_exit()"), "%s: %s", modes[m], err);
            ck_assert_msg(pt_json_check(stats, "d['devices'][0].get('incomplete') is True and "
                                               "d['by_api']['cuMemAllocAsync']['calls'] >= 1") == 0,
                          "%s: the report", modes[m]);
            tf_rmtree(d.path);
        }
}
END_TEST

/* A file size limit (`ulimit -f`) below the report or the trace (helper-43 F4): write(2) past it
 * raises SIGXFSZ, which killed the program (exit 153, its buffered output lost; the trace killed
 * it mid-run). Now the report is a message and the old file stays, with no temporary file left;
 * the trace ends at the limit with a message, reads back, and the program runs to its end. */
static void tf_fsize_child(void *arg)
{
    const char *const *a = arg; /* variable, path, limit */
    struct rlimit rl = {(rlim_t)atol(a[2]), (rlim_t)atol(a[2])};
    CUdeviceptr p;
    setenv(a[0], a[1], 1);
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
        exit(2);
    pt_start();
    for (int i = 0; i < 5000; i++)
        if (cuMemAlloc(&p, 4096) || cuMemFree(p))
            exit(3);
    exit(0);
}

/* Every descriptor in use at exit (helper-47 F16): the report cannot be written, and the message
 * says that no descriptor was free, for the program's own stdout (a copy of it is needed), a
 * device and a file alike; it blamed the path ("a writable directory"). */
static char tf_fd_full_out[128]; /* the child's stdout, for /dev/stdout */
static void tf_fd_full_child(void *arg)
{
    struct rlimit rl = {32, 32};
    CUdeviceptr p;
    if (!strcmp(arg, "/dev/stdout")) {
        int fd = open(tf_fd_full_out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 1) != 1)
            exit(4);
        close(fd);
    }
    setenv("GPUARENA_STATS", arg, 1);
    pt_start();
#if defined(__SANITIZE_ADDRESS__)
    /* LeakSanitizer's check at exit reads /proc and found no descriptor free (exit 1): run now. */
    __lsan_do_leak_check();
#endif
    if (cuMemAlloc(&p, 4096) || cuMemFree(p) || setrlimit(RLIMIT_NOFILE, &rl) != 0)
        exit(3);
    while (open("/dev/null", O_RDONLY) >= 0)
        ;
    exit(errno == EMFILE ? 0 : 2);
}

START_TEST(stats_no_free_descriptor_at_exit)
{
    tf_dir_t d;
    char file[128], err[4096];
    tf_mkdir(&d);
    const char *paths[] = {"/dev/null", tf_at(&d, "s.json", file, sizeof file), "/dev/stdout", "-"};
    tf_at(&d, "out.json", tf_fd_full_out, sizeof tf_fd_full_out);
    for (size_t i = 0; i < 4; i++) {
        char err_big[16384];
        int rc = pt_run_child(tf_fd_full_child, (void *)paths[i], err_big, sizeof err_big);
        ck_assert_msg(rc == 0, "%s: exit %d; %s", paths[i], rc, err_big);
        if (i < 2) { /* a path to open: no descriptor for it */
            ck_assert_msg(strstr(err_big, "gpuarena: cannot write GPUARENA_STATS=") &&
                          strstr(err_big, "no file descriptor was free in the process (ulimit -n)") &&
                          !strstr(err_big, "writable directory"), "%s: %s", paths[i], err_big);
            continue;
        }
        /* The program's own descriptors need none: the report is written through them
         * (helper-57's N3: '-' wrote nothing since b8dea78, where it had written the report). */
        ck_assert_msg(!strstr(err_big, "cannot write"), "%s: %s", paths[i], err_big);
        if (i == 2)
            ck_assert_msg(pt_json_check(tf_fd_full_out, "d['gpuarena_stats'] == 2") == 0,
                          "/dev/stdout: the report in the program's stdout");
        else
            ck_assert_msg(strstr(err_big, "\"gpuarena_stats\": 2"), "-: the report on stderr: %s",
                          err_big);
    }
    (void)err;
    tf_rmtree(d.path);
}
END_TEST

START_TEST(stats_and_trace_past_file_size_limit)
{
    tf_dir_t d;
    char stats[128], trace[128], err[8192], first[64];
    tf_mkdir(&d);
    FILE *f = fopen(tf_at(&d, "s.json", stats, sizeof stats), "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"mine\": 1}\n", f);
    fclose(f);
    const char *sa[] = {"GPUARENA_STATS", stats, "1500"};
    int rc = pt_run_child(tf_fsize_child, (void *)sa, err, sizeof err);
    ck_assert_msg(rc == 0, "statistics past ulimit -f: exit %d; %s", rc, err);
    ck_assert_msg(strstr(err, "gpuarena: cannot write GPUARENA_STATS=") && strstr(err, "ulimit -f"),
                  "%s", err);
    ck_assert_int_eq(tf_entries(d.path, first, sizeof first), 1); /* no temporary file left */
    ck_assert_int_eq(pt_json_check(stats, "d == {'mine': 1}"), 0);
    const char *ta[] = {"GPUARENA_TRACE", tf_at(&d, "t.gatrace", trace, sizeof trace), "65536"};
    rc = pt_run_child(tf_fsize_child, (void *)ta, err, sizeof err);
    ck_assert_msg(rc == 0, "trace past ulimit -f: exit %d; %s", rc, err);
    ck_assert_msg(strstr(err, "gpuarena: GPUARENA_TRACE=") && strstr(err, "file size limit"),
                  "%s", err);
    struct stat st;
    ck_assert_int_eq(stat(trace, &st), 0);
    /* Cut back to its last whole record below the limit (it ended in part of one before F5). */
    ck_assert_int_eq(st.st_size, GA_TRACE_HEADER_SIZE + (65536 - GA_TRACE_HEADER_SIZE) /
                                 GA_TRACE_RECORD_SIZE * GA_TRACE_RECORD_SIZE);
    ck_assert_int_eq(tf_trace_events(trace, 0), (65536 - 32) / 48);
    tf_rmtree(d.path);
}
END_TEST

/* A library destructor that frees after the shim's destructor wrote the report (helper-43 F5):
 * _dl_fini runs destructors in load order, the preloaded shim's before those of libraries loaded
 * after it (here libgactor.so, dlopened; a linked library comes after it too). The report said the
 * program still held the block; it is written again after such a late call, in every mode. */
static void tf_late_free_child(void *arg)
{
    const char *const *a = arg; /* mode, statistics path */
    CUdeviceptr p, q;
    setenv("GPUARENA_MODE", a[0], 1);
    setenv("GPUARENA_STATS", a[1], 1);
    void *h = dlopen("libgactor.so", RTLD_NOW | RTLD_LOCAL);
    CUdeviceptr *late = h ? dlsym(h, "dtor_free_at_exit") : NULL;
    if (!late)
        exit(2);
    pt_start();
    if (cuMemAlloc(&p, 1 * MiB) || cuMemAlloc(&q, 2 * MiB))
        exit(3);
    *late = p; /* freed by libgactor's destructor, after the shim's */
    exit(0);
}

START_TEST(stats_rewritten_after_late_free)
{
    static const char *const modes[] = {"arena", "grow", "vmm", "platform"};
    for (int m = 0; m < 4; m++) {
        tf_dir_t d;
        char stats[128], err[8192];
        tf_mkdir(&d);
        const char *a[] = {modes[m], tf_at(&d, "s.json", stats, sizeof stats)};
        int rc = pt_run_child(tf_late_free_child, (void *)a, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d; %s", modes[m], rc, err);
        ck_assert_msg(pt_json_check(stats, "d['totals']['in_use'] == 2 * 1024 * 1024 and "
                                           "d['by_api']['cuMemFree']['calls'] == 2") == 0,
                      "%s: the report counts the destructor's free", modes[m]);
        ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1); /* the report, no temporary file */
        tf_rmtree(d.path);
    }
}
END_TEST

/* quick_exit runs no destructor (helper-43 F10): the report was not written and each thread's
 * buffered trace records were lost. The shim registers its exit work with at_quick_exit too. */
static void tf_quick_exit_child(void *arg)
{
    const char *const *a = arg; /* statistics, trace */
    CUdeviceptr p;
    setenv("GPUARENA_STATS", a[0], 1);
    setenv("GPUARENA_TRACE", a[1], 1);
    pt_start();
    for (int i = 0; i < 3; i++)
        if (cuMemAlloc(&p, 4096) || cuMemFree(p))
            exit(3);
    quick_exit(0);
}

START_TEST(stats_and_trace_at_quick_exit)
{
    tf_dir_t d;
    char stats[128], trace[128], err[8192];
    tf_mkdir(&d);
    const char *a[] = {tf_at(&d, "s.json", stats, sizeof stats),
                       tf_at(&d, "t.gatrace", trace, sizeof trace)};
    int rc = pt_run_child(tf_quick_exit_child, (void *)a, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d; %s", rc, err);
    ck_assert_int_eq(pt_json_check(stats, "d['totals']['alloc_calls'] == 3"), 0);
    struct stat st;
    ck_assert_int_eq(stat(trace, &st), 0);
    ck_assert_int_eq(st.st_size, GA_TRACE_HEADER_SIZE + 6 * GA_TRACE_RECORD_SIZE);
    tf_rmtree(d.path);
}
END_TEST

/* The program closes the trace's descriptor and gets its number back for a file of its own, as a
 * daemon closing every descriptor then opening its log does (helper-47 F8: 4,002 binary records
 * were written into the program's file). That file holds the program's lines alone; the trace
 * ends, whole, with one message. */
static void tf_fd_stolen_child(void *arg)
{
    const char *const *a = arg; /* trace, the program's data file */
    CUdeviceptr p;
    setenv("GPUARENA_TRACE", a[0], 1);
    pt_start();
    if (cuMemAlloc(&p, 4096) || cuMemFree(p))
        exit(3);
    int fd = -1;
    char link[32], to[256];
    for (int i = 3; i < 1024 && fd < 0; i++) {
        snprintf(link, sizeof link, "/proc/self/fd/%d", i);
        ssize_t n = readlink(link, to, sizeof to - 1);
        if (n > 0 && (to[n] = '\0', !strcmp(to, a[0])))
            fd = i;
    }
    int data = open(a[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || data < 0 || close(fd) != 0 || dup2(data, fd) != fd || close(data) != 0 ||
        write(fd, "line 1\n", 7) != 7)
        exit(4);
    for (int i = 0; i < 600; i++) /* 1,200 records: several buffers' worth */
        if (cuMemAlloc(&p, 4096) || cuMemFree(p))
            exit(5);
    if (write(fd, "line 2\n", 7) != 7)
        exit(6);
    exit(0);
}

START_TEST(trace_descriptor_closed_and_reused)
{
    tf_dir_t d;
    char trace[128], data[128], err[8192], buf[4096];
    tf_mkdir(&d);
    const char *a[] = {tf_at(&d, "t.gatrace", trace, sizeof trace),
                       tf_at(&d, "data.txt", data, sizeof data)};
    int rc = pt_run_child(tf_fd_stolen_child, (void *)a, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d; %s", rc, err);
    FILE *f = fopen(data, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    ck_assert_msg(n == 14 && !strcmp(buf, "line 1\nline 2\n"), "the program's file holds its own "
                  "two lines alone, not %zu bytes; %s", n, err);
    const char *m = strstr(err, "gpuarena: GPUARENA_TRACE=");
    ck_assert_msg(m && strstr(m, "closed the trace's descriptor") && !strstr(m + 1, "gpuarena:"),
                  "one message: %s", err);
    ck_assert_int_ge(tf_trace_events(trace, 0), 0); /* whole records, up to where it ended */
    tf_rmtree(d.path);
}
END_TEST

/* The disk fills in the middle of a write and gets space back later, as when another job deletes a
 * file (helper-47 F5: a partial record was left in the middle, every later record misaligned, 59
 * identical warnings). A file size limit lowered after the trace started, with SIGXFSZ ignored,
 * cuts a write short as a full disk does, at a byte count that is no record boundary; the limit is
 * then raised back. The trace must end at its last whole record, with one message, and read
 * back as records the program made. */
#define TF_FILL_RECORDS 300
static void tf_disk_fills_child(void *arg)
{
    const char *trace = arg;
    struct rlimit rl, low;
    CUdeviceptr p;
    setenv("GPUARENA_TRACE", trace, 1);
    signal(SIGXFSZ, SIG_IGN);
    pt_start();
    if (cuMemAlloc(&p, 4096) || cuMemFree(p) || getrlimit(RLIMIT_FSIZE, &rl) != 0)
        exit(2);
    low = rl;
    low.rlim_cur = GA_TRACE_HEADER_SIZE + TF_FILL_RECORDS * GA_TRACE_RECORD_SIZE + 20;
    if (setrlimit(RLIMIT_FSIZE, &low) != 0)
        exit(3);
    for (int i = 0; i < 1000; i++)
        if (cuMemAlloc(&p, 4096) || cuMemFree(p))
            exit(4);
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) /* space back */
        exit(5);
    for (int i = 0; i < 1000; i++)
        if (cuMemAlloc(&p, 4096) || cuMemFree(p))
            exit(6);
    exit(0);
}

START_TEST(trace_disk_full_then_space_back)
{
    tf_dir_t d;
    char trace[128], err[8192], msg[256];
    tf_mkdir(&d);
    tf_at(&d, "t.gatrace", trace, sizeof trace);
    int rc = pt_run_child(tf_disk_fills_child, trace, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d; %s", rc, err);
    struct stat st;
    ck_assert_int_eq(stat(trace, &st), 0);
    ck_assert_msg(st.st_size == GA_TRACE_HEADER_SIZE + TF_FILL_RECORDS * GA_TRACE_RECORD_SIZE,
                  "the trace ends at the last whole record that fitted: %lld bytes; %s",
                  (long long)st.st_size, err);
    ga_trace_t t;
    ga_trace_init(&t);
    ck_assert_int_eq(ga_trace_read(trace, &t, msg, sizeof msg), 0);
    ck_assert_uint_eq(t.truncated_bytes, 0);
    ck_assert_uint_eq(t.count, TF_FILL_RECORDS);
    for (size_t i = 0; i < t.count; i++) /* no misaligned garbage: the program's allocs and frees */
        ck_assert_msg(t.events[i].kind == (i % 2 ? GA_EV_FREE : GA_EV_ALLOC) &&
                      t.events[i].addr == t.events[i - i % 2].addr &&
                      (i % 2 || t.events[i].size == 4096) &&
                      t.events[i].result == 0, "record %zu", i);
    ga_trace_free(&t);
    const char *m = strstr(err, "gpuarena: GPUARENA_TRACE=");
    ck_assert_msg(m && strstr(m, "the trace ends here, at its last whole record") &&
                  !strstr(m + 1, "gpuarena:"), "one message: %s", err);
    tf_rmtree(d.path);
}
END_TEST

/* The program closes stderr and its own data file takes number 2 (helper-47 F10): with
 * GPUARENA_STATS=- the whole report was written into that file, and with /dev/stderr the refusal's
 * own message was. Both are descriptor 2, and the file holds the program's line alone; the report
 * still goes to stderr when the program leaves it alone (stats_to_stderr, in t_reports.c). */
static void tf_stderr_reused_child(void *arg)
{
    const char *const *a = arg; /* GPUARENA_STATS, the program's data file */
    CUdeviceptr p;
    setenv("GPUARENA_STATS", a[0], 1);
    pt_start();
    if (cuMemAlloc(&p, 4096))
        exit(2);
    close(2);
    if (open(a[1], O_WRONLY | O_CREAT | O_TRUNC, 0644) != 2 || write(2, "program data\n", 13) != 13)
        exit(3);
    exit(0);
}

START_TEST(stats_stderr_number_reused)
{
    for (int i = 0; i < 2; i++) {
        tf_dir_t d;
        char link_path[128], data[128], err[8192], buf[4096];
        const char *stats = "-";
        tf_mkdir(&d);
        if (i) { /* a link in the test's folder stands in for /dev/stderr, as above */
            ck_assert_int_eq(symlink("/dev/stderr", tf_at(&d, "err-link", link_path,
                                                          sizeof link_path)), 0);
            stats = link_path;
        }
        const char *a[] = {stats, tf_at(&d, "data.txt", data, sizeof data)};
        int rc = pt_run_child(tf_stderr_reused_child, (void *)a, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: exit %d; %s", stats, rc, err);
        FILE *f = fopen(data, "r");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        ck_assert_msg(!strcmp(buf, "program data\n"), "GPUARENA_STATS=%s: the program's file holds "
                      "its line alone, not %zu bytes: '%.300s'", i ? "/dev/stderr" : "-", n, buf);
        tf_rmtree(d.path);
    }
}
END_TEST

/* GPUARENA_TRACE on a FIFO whose reader goes away (helper-57, 2026-12-06): the trace's next write
 * raised SIGPIPE and killed the program (exit 141). The reader here takes the header and closes;
 * the program allocates on, and runs to its end with the trace ended. */
static void tf_fifo_child(void *arg)
{
    CUdeviceptr p;
    setenv("GPUARENA_TRACE", arg, 1);
    pt_start();
    for (int i = 0; i < 5000; i++)
        if (cuMemAlloc(&p, 4096) || cuMemFree(p))
            exit(3);
    exit(0);
}

START_TEST(trace_fifo_reader_gone)
{
    tf_dir_t d;
    char fifo[128], err[8192];
    tf_mkdir(&d);
    ck_assert_int_eq(mkfifo(tf_at(&d, "trace.fifo", fifo, sizeof fifo), 0600), 0);
    /* The reader has the FIFO open before the program starts: the shim opens it without blocking,
     * and a reader that came later (a loaded machine) found no writer and waited for ever. It
     * opens it read-write (Linux: at once, with no writer), reads what comes first (the header),
     * and goes. */
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t reader = fork();
    ck_assert_int_ge(reader, 0);
    if (reader == 0) {
        char buf[64];
        int fd = open(fifo, O_RDWR);
        if (fd < 0 || write(ready[1], "r", 1) != 1)
            _exit(1);
        _exit(read(fd, buf, sizeof buf) > 0 ? 0 : 1);
    }
    char c;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    close(ready[0]);
    close(ready[1]);
    int rc = pt_run_child(tf_fifo_child, fifo, err, sizeof err);
    int st;
    ck_assert_int_eq(waitpid(reader, &st, 0), reader);
    ck_assert_msg(rc == 0, "the program ran to its end after the trace's reader went: exit %d (141: "
                  "SIGPIPE); %s", rc, err);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the reader read the header");
    tf_rmtree(d.path);
}
END_TEST

TCase *pt_tcase_files(void)
{
    TCase *tc = tcase_create("files");
    tcase_add_test(tc, stats_no_free_descriptor_at_exit);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, stats_same_path_as_trace);
    tcase_add_test(tc, stats_own_exit_with_stdin_reader);
    tcase_add_test(tc, stats_exit_while_a_call_holds_the_lock);
    tcase_add_test(tc, stats_and_trace_past_file_size_limit);
    tcase_add_test(tc, stats_rewritten_after_late_free);
    tcase_add_test(tc, stats_and_trace_at_quick_exit);
    tcase_add_test(tc, stats_same_path_after_pid);
    tcase_add_test(tc, stats_symlink_to_trace);
    tcase_add_test(tc, stats_hard_link_to_trace);
    tcase_add_test(tc, stats_link_made_during_run);
    tcase_add_test(tc, stats_symlink_target_replaced_not_link);
    tcase_add_test(tc, stats_through_fifo);
    tcase_add_test(tc, stats_fifo_without_reader);
    tcase_add_test(tc, stats_symlink_to_dev_null);
    tcase_add_test(tc, stats_dev_null);
    tcase_add_test(tc, stats_proc_self_fd_1);
    tcase_add_test(tc, stats_symlink_to_proc_fd);
    tcase_add_test(tc, stats_directory_refused);
    tcase_add_test(tc, stats_own_stdout_buffered_file);
    tcase_add_test(tc, stats_own_stdout_buffered_pipe);
    tcase_add_test(tc, stats_own_stderr_buffered_file);
    tcase_add_test(tc, stats_own_proc_self_fd_buffered_pipe);
    tcase_add_test(tc, stats_own_dev_fd_9);
    tcase_add_test(tc, stats_own_stdout_forked_child);
    tcase_add_test(tc, stats_own_stdout_closed);
    tcase_add_test(tc, stats_own_stdout_number_reused);
    tcase_add_test(tc, stats_own_stdout_no_terminal);
    tcase_add_test(tc, stats_own_stderr_stdout_reader_gone);
    tcase_add_test(tc, trace_own_stdout_file_and_pipe);
    tcase_add_test(tc, trace_own_stdout_with_program_output);
    tcase_add_test(tc, trace_own_stdout_closed);
    tcase_add_test(tc, trace_path_pid);
    tcase_add_test(tc, trace_second_process_refused);
    tcase_add_test(tc, trace_claim_ends_with_the_writer);
    tcase_add_test(tc, trace_through_symlink_and_dev_null);
    tcase_add_test(tc, trace_directory_refused);
    tcase_add_test(tc, outputs_never_over_an_elf_file);
    tcase_add_test(tc, trace_descriptor_closed_and_reused);
    tcase_add_test(tc, trace_disk_full_then_space_back);
    tcase_add_test(tc, trace_fifo_reader_gone);
    tcase_add_test(tc, stats_stderr_number_reused);
    return tc;
}
