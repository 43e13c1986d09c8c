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
    fwrite("GATRACE\0an older trace", 1, 22, f); /* a trace's head: another file is refused */
    fclose(f);
    ck_assert_int_eq(link(trace, tf_at(&d, "stats.json", hard, sizeof hard)), 0);
    tf_clash(&d, trace, hard, 2);
    /* The new trace takes its path as a new file: the old one, under its other name, is kept
     * whole (it was truncated under both names until helper-114), and no report replaces it. */
    struct stat st;
    ck_assert_int_eq(stat(hard, &st), 0);
    ck_assert_int_eq(st.st_nlink, 1);
    ck_assert_int_eq(st.st_size, 22);
    ck_assert_int_eq(tf_trace_events(trace, 0), TF_EVENTS);
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
    fputs("{\"gpuarena_stats\": 0}", f); /* an earlier report: any other file is refused */
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

/* A program or library (an ELF file, a script, an archive) named as the statistics or the trace is
 * left as it was, with the reason: written over, the shim itself became JSON and every later run
 * went uncapped (a script and a static library were still replaced: helper-77 R2). */
START_TEST(outputs_never_over_an_elf_file)
{
    static const char *const kinds[] = {"\177ELF\2\1\1\0 a library", "#!/bin/sh\necho a script",
                                        "!<arch>\nmember/ an archive"};
    static const char *vars[] = {"GPUARENA_STATS", "GPUARENA_TRACE"};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++) {
            tf_dir_t d;
            char lib[128], err[8192], back[64] = {0};
            size_t len = strlen(kinds[k]) + 1;
            tf_mkdir(&d);
            FILE *f = fopen(tf_at(&d, "lib.so", lib, sizeof lib), "wb");
            ck_assert_ptr_nonnull(f);
            fwrite(kinds[k], 1, len, f);
            fclose(f);
            tf_setenv(vars[i], lib);
            ck_assert_int_eq(tf_run(NULL, err, sizeof err, NULL), 0);
            ck_assert_msg(strstr(err, "is a program or library (an ELF file, a script or an "
                                      "archive), which the output would replace"),
                          "%s, kind %d: %s", vars[i], k, err);
            f = fopen(lib, "rb");
            ck_assert_uint_eq(fread(back, 1, sizeof back, f), len);
            fclose(f);
            ck_assert_msg(!memcmp(back, kinds[k], len), "%s, kind %d: the file was changed",
                          vars[i], k);
            ck_assert_int_eq(tf_entries(d.path, NULL, 0), 1); /* no temporary left beside it */
            unsetenv(vars[i]);
            tf_rmtree(d.path);
        }
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

TCase *pt_tcase_files(void)
{
    TCase *tc = tcase_create("files");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, stats_same_path_as_trace);
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
    tcase_add_test(tc, trace_path_pid);
    tcase_add_test(tc, trace_second_process_refused);
    tcase_add_test(tc, trace_claim_ends_with_the_writer);
    tcase_add_test(tc, trace_through_symlink_and_dev_null);
    tcase_add_test(tc, trace_directory_refused);
    tcase_add_test(tc, outputs_never_over_an_elf_file);
    pt_files_own_add(tc);  /* t_files_own.c */
    pt_files_exit_add(tc); /* t_files_exit.c */
    return tc;
}
