/* gpuarena trace recording (GPUARENA_TRACE=path): every allocation event, in allocator/ga_trace.h
 * format.
 *
 * Each thread fills its own buffer of encoded 48-byte records and appends it with one write(2) on
 * an O_APPEND descriptor when it is full, when the thread exits, and at process exit. No buffer's
 * lock is held while a full buffer is written (each thread has two halves and swaps them); the
 * writes themselves take turns under one lock (the kernel serialises appends to a file anyway), so
 * that a write the disk cuts short is cut back to its last whole record and the trace ends there.
 * Since every write is whole records a killed process leaves a file that reads back up to its last
 * complete record. Host memory is bounded by the live threads: a buffer is written out and freed when its
 * thread exits. The buffers of live threads are on one list under one lock, which the exit flush
 * holds while it walks them, so a thread's exit frees its buffer only once the flush can no longer
 * reach it (and writes it first, so nothing is lost in between). After the exit flush, in a
 * thread whose buffer is gone, and in one that has no host memory for a buffer, records are
 * written one by one. Each write first checks that the
 * descriptor still refers to the trace: a program that closed it and opened a file of its own
 * under the same number ends the trace, with a message, and its file is never written.
 * The file itself is opened at the first event (shim/outfile.c: %p, write-through for devices and
 * FIFOs, a lock that keeps a second live process from truncating it), so a launcher that starts
 * CUDA but allocates nothing never claims the path from the process that does.
 * Record times are ns since the trace started (CLOCK_MONOTONIC); durations come from the hooks'
 * own tick stamps, converted with a ratio measured at start. A forked child does not trace.
 */
#define _GNU_SOURCE
#include "shim.h"

#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GA_TRACE_BUF_RECORDS 256

/* Two halves per thread: the owner fills one while it writes the other out, so its lock (shared
 * only with the exit flush) is never held across the write(2) of a full half. */
typedef struct ga_tbuf {
    ga_mutex_t lock; /* guards cur and n: the owner and the exit flush; uncontended */
    size_t n;
    unsigned cur;
    uint32_t tid;
    struct ga_tbuf *next, *prev; /* on ga_tbufs, under ga_tbufs_lock */
    unsigned char rec[2][GA_TRACE_BUF_RECORDS][GA_TRACE_RECORD_SIZE];
} ga_tbuf_t;

_Atomic int ga_tracing;
static char ga_trace_path[GA_OUTFILE_PATH_MAX];
static uint64_t ga_trace_t0_ticks, ga_trace_t0_unix_ns;
static double ga_trace_ns_per_tick = 1.0;
/* Opened once, at the first event (atomic: a forked child closes it without the once). */
static pthread_once_t ga_trace_once = PTHREAD_ONCE_INIT;
static _Atomic int ga_trace_fd = -1;
static pthread_mutex_t ga_tbufs_lock = PTHREAD_MUTEX_INITIALIZER; /* guards the list ga_tbufs */
static ga_tbuf_t *ga_tbufs;
static _Atomic int ga_trace_unbuffered; /* the exit flush ran: later records go out one by one */
static pthread_key_t ga_tbuf_key;
static __thread ga_tbuf_t *ga_tl_tbuf;
static __thread int ga_tl_tbuf_gone; /* this thread's buffer was written and freed at its exit */
/* What the trace descriptor referred to when it was opened: the program may close it (a daemon
 * closing every descriptor) and get its number back for a file of its own, which must never
 * receive a record (helper-47 F8: 4,002 records written into the program's data file). */
static dev_t ga_trace_dev;
static ino_t ga_trace_ino;

static uint64_t ga_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A file size limit (`ulimit -f`) was set when tracing started: past it, write(2) raises SIGXFSZ,
 * whose default action killed the program in the middle of its run (helper-43 F4). Only then is
 * each write guarded (three more system calls per 256 records); past the limit the trace ends. */
static int ga_trace_fsize_limited;
/* The trace is a pipe, FIFO or socket: a write after its reader went raises SIGPIPE, which killed
 * the program (exit 141; an outside check on 2026-12-06), so those writes are guarded too. */
static int ga_trace_pipe;
static _Atomic int ga_trace_full;

/* write(2) with SIGXFSZ and SIGPIPE blocked in this thread, and each taken back if this write
 * raised it (one already pending before is left to the program). */
static ssize_t ga_trace_write_guarded(int fd, const void *buf, size_t len)
{
    static const int sigs[2] = {SIGXFSZ, SIGPIPE};
    sigset_t set, old, pending;
    sigemptyset(&set);
    sigemptyset(&pending);
    sigpending(&pending);
    int was_pending[2];
    for (int i = 0; i < 2; i++) {
        sigaddset(&set, sigs[i]);
        was_pending[i] = sigismember(&pending, sigs[i]) == 1;
    }
    pthread_sigmask(SIG_BLOCK, &set, &old);
    ssize_t w = write(fd, buf, len);
    int e = errno;
    struct timespec zero = {0, 0};
    for (int i = 0; i < 2; i++) {
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sigs[i]);
        if (!was_pending[i])
            while (sigtimedwait(&one, NULL, &zero) == sigs[i])
                ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return w;
}

/* Whether st (of the trace's descriptor) is still the file the trace opened. */
static int ga_trace_same_file(const struct stat *st)
{
    return st->st_dev == ga_trace_dev && st->st_ino == ga_trace_ino;
}

static int ga_trace_fd_ours(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && ga_trace_same_file(&st);
}

/* The trace's descriptor is no longer ours: the trace ends, said once; the descriptor is left to
 * the program (neither written nor closed). */
static void ga_trace_lost_fd(int fd)
{
    if (atomic_exchange(&ga_trace_full, 1))
        return;
    ga_log(GA_LOG_WARN, "GPUARENA_TRACE='%s': the program closed the trace's descriptor %d (a "
           "program that closes every descriptor, as daemons do, closes it too): the trace ends "
           "at its last whole record, and nothing is written to that number, which may now name "
           "a file of the program's; to trace the whole run, leave descriptor %d open",
           ga_trace_path, fd, fd);
}

/* The trace's writes, one at a time: the end of the file before a write is then known, so a write
 * cut short (a full disk) is taken back to its last whole record and nothing else can land after
 * its partial one (helper-47 F5: a disk that filled and got space back left a partial record in
 * the middle and every later record misaligned). A record that a signal handler makes while its
 * thread is inside a write is written without the lock, which that thread holds (it runs between
 * two system calls, so the file is never written by both at once). */
static pthread_mutex_t ga_trace_write_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int ga_tl_trace_writing;
/* A regular file this process created and holds under its flock: only it may be cut back. */
static int ga_trace_cuttable;

/* Writes len bytes, resuming after a partial write: the bytes written; *err why it stopped. */
static size_t ga_trace_write_all(int fd, const unsigned char *p, size_t len, int *err)
{
    size_t done = 0;
    while (done < len) {
        errno = 0;
        ssize_t w = ga_trace_fsize_limited || ga_trace_pipe
                        ? ga_trace_write_guarded(fd, p + done, len - done)
                        : write(fd, p + done, len - done);
        if (w > 0)
            done += (size_t)w;
        else if (w < 0 && errno == EINTR)
            continue;
        else {
            *err = w < 0 && errno ? errno : ENOSPC;
            break;
        }
    }
    return done;
}

/* A write stopped after done bytes of the records: the trace ends at its last whole record (the
 * file cut back there when it is ours to cut), said once. Later buffers are dropped, even once
 * space comes back: a hole in the middle would be worse than an end. */
static void ga_trace_stop(int fd, const struct stat *before, size_t done, int err)
{
    if (atomic_exchange(&ga_trace_full, 1))
        return;
    size_t part = done % GA_TRACE_RECORD_SIZE;
    if (part && ga_trace_cuttable && ftruncate(fd, before->st_size + (off_t)(done - part)) == 0)
        part = 0;
    char tail[160] = "";
    if (part)
        snprintf(tail, sizeof tail, " (its last %zu bytes are part of a record, which readers "
                 "skip)", part);
    if (err == EFBIG) {
        struct rlimit rl;
        getrlimit(RLIMIT_FSIZE, &rl);
        ga_log(GA_LOG_WARN, "GPUARENA_TRACE='%s' reached the process's file size limit (ulimit "
               "-f: %llu bytes): the trace ends here, at its last whole record%s, and the program "
               "runs on; raise the limit to trace the whole run", ga_trace_path,
               (unsigned long long)rl.rlim_cur, tail);
        return;
    }
    int disk = err == ENOSPC || err == EDQUOT;
    ga_log(GA_LOG_WARN, "cannot write GPUARENA_TRACE='%s' (%s): the trace ends here, at its last "
           "whole record%s, and the program runs on; %s", ga_trace_path, strerror(err), tail,
           disk ? "free space on the disk that holds it, or give GPUARENA_TRACE a path on another "
                  "disk"
                : "give GPUARENA_TRACE a file on a working disk (a pipe or device that stopped "
                  "taking data ends it too)");
}

/* Under the write lock: the descriptor checked (one fstat per 256 records: a number the program
 * closed and reused is never written to), then the records. */
static void ga_trace_write_locked(int fd, const void *rec, size_t n)
{
    struct stat st;
    if (atomic_load_explicit(&ga_trace_full, memory_order_relaxed))
        return;
    if (fstat(fd, &st) != 0 || !ga_trace_same_file(&st)) {
        ga_trace_lost_fd(fd);
        return;
    }
    size_t len = n * GA_TRACE_RECORD_SIZE;
    int err = 0;
    size_t done = ga_trace_write_all(fd, rec, len, &err);
    if (done != len)
        ga_trace_stop(fd, &st, done, err);
}

/* Whole records appended to the O_APPEND descriptor: a reader never sees half a record. */
static void ga_trace_write_records(const void *rec, size_t n)
{
    int fd = atomic_load_explicit(&ga_trace_fd, memory_order_relaxed);
    if (!n || fd < 0 || atomic_load_explicit(&ga_trace_full, memory_order_relaxed))
        return;
    int nested = ga_tl_trace_writing;
    if (!nested)
        pthread_mutex_lock(&ga_trace_write_lock);
    ga_tl_trace_writing = 1;
    ga_trace_write_locked(fd, rec, n);
    ga_tl_trace_writing = nested;
    if (!nested)
        pthread_mutex_unlock(&ga_trace_write_lock);
}

/* The partial half, at thread or process exit. */
static void ga_tbuf_flush_locked(ga_tbuf_t *b)
{
    ga_trace_write_records(b->rec[b->cur], b->n);
    b->n = 0;
}

/* Thread exit: write what is left, then take the buffer off the list and free it. Written first,
 * under the buffer's lock, so an exit flush running meanwhile finds either the records or an
 * empty buffer; freed only off the list, where the exit flush cannot reach it. A forked child
 * (not tracing) leaves it alone: the list and its lock are the parent's. */
static void ga_tbuf_thread_exit(void *p)
{
    ga_tbuf_t *b = p;
    ga_tl_tbuf = NULL;
    ga_tl_tbuf_gone = 1;
    if (!(ga_tracing & GA_TRACE_ON))
        return;
    ga_mutex_lock(&b->lock);
    ga_tbuf_flush_locked(b);
    ga_mutex_unlock(&b->lock);
    pthread_mutex_lock(&ga_tbufs_lock);
    if (b->prev)
        b->prev->next = b->next;
    else
        ga_tbufs = b->next;
    if (b->next)
        b->next->prev = b->prev;
    pthread_mutex_unlock(&ga_tbufs_lock);
    free(b);
}

/* Measures ticks per ns over ~100 us of spinning: no sleep, and precise enough for durations. */
static void ga_trace_calibrate(void)
{
    uint64_t n0 = ga_clock_ns(CLOCK_MONOTONIC), k0 = ga_now(), n1;
    while ((n1 = ga_clock_ns(CLOCK_MONOTONIC)) - n0 < 100000)
        ;
    uint64_t k1 = ga_now();
    if (k1 > k0)
        ga_trace_ns_per_tick = (double)(n1 - n0) / (double)(k1 - k0);
}

/* Start: the clock and the path (which no report may overwrite; a clash is said now). */
void ga_trace_start(void)
{
    if (ga_outfile_expand("GPUARENA_TRACE", ga_opt.trace, ga_trace_path, sizeof ga_trace_path))
        return;
    ga_outfile_protect("GPUARENA_TRACE", ga_trace_path);
    ga_outfile_watch("GPUARENA_TRACE", ga_opt.trace);
    if (ga_opt.stats)
        ga_outfile_clash("GPUARENA_STATS", ga_opt.stats);
    struct rlimit rl;
    ga_trace_fsize_limited = getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
    ga_trace_calibrate();
    ga_trace_t0_unix_ns = ga_clock_ns(CLOCK_REALTIME);
    ga_trace_t0_ticks = ga_now();
    if (pthread_key_create(&ga_tbuf_key, ga_tbuf_thread_exit) != 0) {
        ga_log(GA_LOG_ERROR, "cannot record GPUARENA_TRACE (no thread key left); the process "
               "runs untraced");
        return;
    }
    atomic_fetch_or(&ga_tracing, GA_TRACE_ON);
}

/* The first event: the file and its header. On failure (a message said why) nothing is recorded. */
static void ga_trace_open(void)
{
    int is_file = ga_outfile_is_file(ga_trace_path);
    int fd = ga_outfile_open_log("GPUARENA_TRACE", ga_trace_path);
    if (fd < 0)
        return;
    unsigned char hdr[GA_TRACE_HEADER_SIZE];
    ga_trace_header_encode(ga_trace_t0_unix_ns, hdr);
    struct stat st;
    if (fstat(fd, &st) == 0)
        ga_trace_pipe = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
    size_t done = 0;
    int err = fstat(fd, &st) == 0 ? 0 : errno;
    while (!err && done < sizeof hdr) { /* resumed after a partial write, to learn the cause */
        errno = 0;
        ssize_t w = ga_trace_write_guarded(fd, hdr + done, sizeof hdr - done);
        if (w > 0)
            done += (size_t)w;
        else if (!(w < 0 && errno == EINTR))
            err = w < 0 && errno ? errno : ENOSPC;
    }
    if (err) {
        /* Said with its cause, and a header cut short is cut off the file this process made:
         * under `ulimit -f 1` the message blamed the disk and a 1-byte file was left (an outside
         * check, helper-114). */
        if (done && is_file && S_ISREG(st.st_mode) && (fcntl(fd, F_GETFL) & O_APPEND))
            (void)ftruncate(fd, 0);
        ga_log(GA_LOG_ERROR, "cannot write the trace '%s' (%s): the process runs untraced; %s",
               ga_trace_path, strerror(err),
               err == EFBIG ? "its header does not fit under the process's file size limit "
                              "(ulimit -f): raise the limit"
               : err == ENOSPC || err == EDQUOT ? "free space on the disk that holds it, or give "
                                                 "GPUARENA_TRACE a path on another disk"
                                               : "give GPUARENA_TRACE a file on a working disk");
        close(fd);
        return;
    }
    ga_trace_dev = st.st_dev;
    ga_trace_ino = st.st_ino;
    /* Created (or truncated) and locked here: not the program's own descriptor, which a dup of
     * its stdout shares (no O_APPEND then, unless the program's has it too). */
    ga_trace_cuttable = is_file && S_ISREG(st.st_mode) && (fcntl(fd, F_GETFL) & O_APPEND);
    atomic_store(&ga_trace_fd, fd);
}

static int ga_trace_opened(void)
{
    pthread_once(&ga_trace_once, ga_trace_open);
    return atomic_load(&ga_trace_fd) >= 0;
}

/* The calling thread's buffer, made and put on the list at its first event. */
static ga_tbuf_t *ga_tbuf_get(void)
{
    ga_tbuf_t *b = ga_tl_tbuf;
    if (GA_LIKELY(b))
        return b;
    if (ga_tl_tbuf_gone || !ga_trace_opened() || !(b = calloc(1, sizeof *b)))
        return NULL;
    ga_mutex_init(&b->lock);
    b->tid = (uint32_t)syscall(SYS_gettid);
    pthread_mutex_lock(&ga_tbufs_lock);
    b->next = ga_tbufs;
    if (ga_tbufs)
        ga_tbufs->prev = b;
    ga_tbufs = b;
    pthread_mutex_unlock(&ga_tbufs_lock);
    pthread_setspecific(ga_tbuf_key, b);
    return ga_tl_tbuf = b;
}

/* One record straight to the file: after the exit flush, once this thread's buffer is gone, or
 * while there is no host memory for one. */
static void ga_trace_write_one(const ga_event_t *ev)
{
    unsigned char rec[GA_TRACE_RECORD_SIZE];
    ga_event_encode(ev, rec);
    ga_trace_write_records(rec, 1);
}

static void ga_trace_record(uint8_t kind, uint8_t api, uint64_t addr, uint64_t size,
                            uint64_t stream, int dev, uint64_t t0, CUresult result);

void ga_trace_event(uint8_t kind, uint8_t api, uint64_t addr, uint64_t size, uint64_t stream,
                    int dev, uint64_t t0, CUresult result)
{
    int t = atomic_load_explicit(&ga_tracing, memory_order_relaxed);
    if (t & GA_TRACE_ON)
        ga_trace_record(kind, api, addr, size, stream, dev, t0, result);
    if (t & GA_TRACE_LATE_STATS)
        ga_stats_late();
}

static void ga_trace_record(uint8_t kind, uint8_t api, uint64_t addr, uint64_t size,
                            uint64_t stream, int dev, uint64_t t0, CUresult result)
{
    ga_tbuf_t *b = ga_tbuf_get();
    /* No buffer for lack of host memory: the record goes out alone, as after the thread's exit,
     * and the next event tries for a buffer again (helper-47 F4: such a thread's events were
     * dropped without a word, and the trace replayed with unmatched frees). */
    if (!b && !ga_tl_tbuf_gone && !ga_trace_opened())
        return; /* no file */
    uint64_t t1 = ga_now();
    double dur = (double)(t1 - t0) * ga_trace_ns_per_tick;
    /* An alloc is stamped when it returned, a free when it was entered: an address is freed (its
     * free entered) before another thread's alloc can return it, and returned before the program
     * can free it, so sorting by these stamps never misorders a pair across threads. */
    uint64_t at = kind == GA_EV_FREE ? t0 : t1;
    ga_event_t ev = {
        .time_ns = at >= ga_trace_t0_ticks
                       ? (uint64_t)((double)(at - ga_trace_t0_ticks) * ga_trace_ns_per_tick)
                       : 0,
        .addr = addr, .size = size,
        .stream = stream, .thread = b ? b->tid : (uint32_t)syscall(SYS_gettid),
        .duration_ns = dur >= 4294967295.0 ? UINT32_MAX : (uint32_t)dur,
        .device = (int16_t)dev, .kind = kind, .api = api, .result = (uint32_t)result,
    };
    if (!b) {
        ga_trace_write_one(&ev);
        return;
    }
    const void *full = NULL;
    ga_mutex_lock(&b->lock);
    /* Checked under the buffer's lock, which the exit flush takes after setting it: a record is
     * either in the buffer before the flush writes it, or written here. */
    if (atomic_load_explicit(&ga_trace_unbuffered, memory_order_relaxed)) {
        ga_mutex_unlock(&b->lock);
        ga_trace_write_one(&ev);
        return;
    }
    ga_event_encode(&ev, b->rec[b->cur][b->n++]);
    if (b->n == GA_TRACE_BUF_RECORDS) { /* swap halves; write the full one after unlocking */
        full = b->rec[b->cur];
        b->cur ^= 1;
        b->n = 0;
    }
    ga_mutex_unlock(&b->lock);
    if (full)
        ga_trace_write_records(full, GA_TRACE_BUF_RECORDS);
}

/* Process exit: every live thread's partial half. The list lock is held throughout, so a thread
 * exiting meanwhile cannot free a buffer this is about to lock. */
void ga_trace_flush_all(void)
{
    if (!(ga_tracing & GA_TRACE_ON))
        return;
    atomic_store(&ga_trace_unbuffered, 1);
    pthread_mutex_lock(&ga_tbufs_lock);
    for (ga_tbuf_t *b = ga_tbufs; b; b = b->next) {
        /* Held past the bound only by a record that exit() interrupted from a signal handler on
         * this thread: its buffer, half-written, is left out rather than the exit hung. */
        if (ga_mutex_lock_for(&b->lock, GA_MUTEX_EXIT_WAIT_NS) != 0)
            continue;
        ga_tbuf_flush_locked(b);
        ga_mutex_unlock(&b->lock);
    }
    pthread_mutex_unlock(&ga_tbufs_lock);
}

/* A forked child stops tracing: the parent's buffered records are the parent's to write, and the
 * child's events would interleave with them in the same file. It closes its copy of the trace
 * descriptor (if the number is still the trace's), so the parent's lock on the file ends with the
 * parent, not with a long-lived child; the buffer list is not touched (another parent thread may
 * have held its lock at the fork). */
void ga_trace_fork_child(void)
{
    atomic_store(&ga_tracing, 0);
    int fd = atomic_exchange(&ga_trace_fd, -1);
    if (fd >= 0 && ga_trace_fd_ours(fd)) /* a number the program reused is the program's */
        close(fd);
}
