/* Preload tests: a statistics report or trace written to the process's own descriptors
 * (/dev/stdout, /dev/stderr, /dev/fd/N) goes through a dup after the program's buffered output,
 * and a descriptor closed or its number reused is a message and no write (split from t_files.c;
 * shared helpers in t_files.h). Added to the "files" case by pt_files_own_add().
 */
#include "t_files.h"

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
    char link_path[128], err[16384];
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

/* The report itself to a pipe nobody reads any more (GPUARENA_STATS=/dev/stdout | head): a
 * message that says so; it said to check that the path names a file in a writable directory. */
START_TEST(stats_own_stdout_reader_gone)
{
    tf_dir_t d;
    char link_path[128], err[16384];
    tf_own_link(&d, "GPUARENA_STATS", "/dev/stdout", "out-link", link_path, sizeof link_path);
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    close(pfd[0]);
    tf_own_t w = TF_OWN_INIT;
    w.out_fd = pfd[1];
    FILE *ef;
    pid_t pid = tf_own_spawn(&w, &ef);
    close(pfd[1]);
    tf_wait(pid, ef, err, sizeof err);
    ck_assert_msg(strstr(err, "(Broken pipe): the pipe's reader went away") &&
                  strstr(err, "keep the reader until the program exits, or give a file path") &&
                  !strstr(err, "writable directory"), "%s", err);
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

void pt_files_own_add(TCase *tc)
{
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
    tcase_add_test(tc, stats_own_stdout_reader_gone);
    tcase_add_test(tc, trace_own_stdout_file_and_pipe);
    tcase_add_test(tc, trace_own_stdout_with_program_output);
    tcase_add_test(tc, trace_own_stdout_closed);
}
