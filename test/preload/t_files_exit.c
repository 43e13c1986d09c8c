/* Preload tests: the statistics and the trace at the edges of a process's exit and of its
 * resources (split from t_files.c, whose rules and scratch directories they share, t_files.h): a
 * thread holding stdin's lock or a driver call when the process exits, quick_exit, a free after
 * the report, no descriptor left, the file size limit, a full disk, a descriptor closed and its
 * number reused, a FIFO's reader gone. Added to the "files" case by pt_files_exit_add().
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
    fputs("{\"gpuarena_stats\": 2, \"mine\": 1}\n", f); /* an earlier report */
    fclose(f);
    const char *sa[] = {"GPUARENA_STATS", stats, "1500"};
    int rc = pt_run_child(tf_fsize_child, (void *)sa, err, sizeof err);
    ck_assert_msg(rc == 0, "statistics past ulimit -f: exit %d; %s", rc, err);
    ck_assert_msg(strstr(err, "gpuarena: cannot write GPUARENA_STATS=") && strstr(err, "ulimit -f"),
                  "%s", err);
    ck_assert_int_eq(tf_entries(d.path, first, sizeof first), 1); /* no temporary file left */
    ck_assert_int_eq(pt_json_check(stats, "d == {'gpuarena_stats': 2, 'mine': 1}"), 0);
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

void pt_files_exit_add(TCase *tc)
{
    tcase_add_test(tc, stats_no_free_descriptor_at_exit);
    tcase_add_test(tc, stats_own_exit_with_stdin_reader);
    tcase_add_test(tc, stats_exit_while_a_call_holds_the_lock);
    tcase_add_test(tc, stats_and_trace_past_file_size_limit);
    tcase_add_test(tc, stats_rewritten_after_late_free);
    tcase_add_test(tc, stats_and_trace_at_quick_exit);
    tcase_add_test(tc, trace_descriptor_closed_and_reused);
    tcase_add_test(tc, trace_disk_full_then_space_back);
    tcase_add_test(tc, trace_fifo_reader_gone);
    tcase_add_test(tc, stats_stderr_number_reused);
}
