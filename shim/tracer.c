/* gpuarena trace recording (GPUARENA_TRACE=path): every allocation event, in allocator/ga_trace.h
 * format.
 *
 * Each thread fills its own buffer of encoded 48-byte records and appends it with one write(2) on
 * an O_APPEND descriptor when it is full, when the thread exits, and at process exit. No lock is
 * held while a full buffer is written (each thread has two halves and swaps them), memory is
 * bounded (one buffer per live thread), and since every write is whole records a killed process
 * leaves a file that reads back up to its last complete record.
 * Record times are ns since the trace started (CLOCK_MONOTONIC); durations come from the hooks'
 * own tick stamps, converted with a ratio measured at start. A forked child does not trace.
 */
#define _GNU_SOURCE
#include "shim.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GA_TRACE_BUF_RECORDS 256

/* Two halves per thread: the owner fills one while it writes the other out, so its lock (shared
 * only with the exit flush) is never held across the write(2) of a full half. */
typedef struct ga_tbuf {
    pthread_mutex_t lock; /* guards cur and n: the owner and the exit flush; uncontended */
    size_t n;
    unsigned cur;
    uint32_t tid;
    struct ga_tbuf *next;
    unsigned char rec[2][GA_TRACE_BUF_RECORDS][GA_TRACE_RECORD_SIZE];
} ga_tbuf_t;

int ga_tracing;
static int ga_trace_fd = -1;
static uint64_t ga_trace_t0_ns, ga_trace_t0_ticks;
static double ga_trace_ns_per_tick = 1.0;
static ga_tbuf_t *_Atomic ga_tbufs;
static pthread_key_t ga_tbuf_key;
static __thread ga_tbuf_t *ga_tl_tbuf;

static uint64_t ga_clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One write(2) of whole records on the O_APPEND descriptor: a reader never sees half a record. */
static void ga_trace_write_records(const void *rec, size_t n)
{
    if (!n || ga_trace_fd < 0)
        return;
    ssize_t w = write(ga_trace_fd, rec, n * GA_TRACE_RECORD_SIZE);
    if (w != (ssize_t)(n * GA_TRACE_RECORD_SIZE))
        ga_log(GA_LOG_WARN, "trace write failed; check the disk holding GPUARENA_TRACE");
}

/* The partial half, at thread or process exit. */
static void ga_tbuf_flush_locked(ga_tbuf_t *b)
{
    ga_trace_write_records(b->rec[b->cur], b->n);
    b->n = 0;
}

static void ga_tbuf_thread_exit(void *p)
{
    ga_tbuf_t *b = p;
    pthread_mutex_lock(&b->lock);
    ga_tbuf_flush_locked(b);
    pthread_mutex_unlock(&b->lock);
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

void ga_trace_start(void)
{
    int fd = open(ga_opt.trace, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        ga_log(GA_LOG_ERROR, "cannot create the trace '%s'; check GPUARENA_TRACE points to a "
               "writable directory", ga_opt.trace);
        return;
    }
    unsigned char hdr[GA_TRACE_HEADER_SIZE];
    ga_trace_header_encode(ga_clock_ns(CLOCK_REALTIME), hdr);
    if (write(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr) {
        ga_log(GA_LOG_ERROR, "cannot write the trace '%s'; check the disk", ga_opt.trace);
        close(fd);
        return;
    }
    ga_trace_calibrate();
    ga_trace_t0_ns = ga_clock_ns(CLOCK_MONOTONIC);
    ga_trace_t0_ticks = ga_now();
    pthread_key_create(&ga_tbuf_key, ga_tbuf_thread_exit);
    ga_trace_fd = fd;
    ga_tracing = 1;
}

static ga_tbuf_t *ga_tbuf_get(void)
{
    ga_tbuf_t *b = ga_tl_tbuf;
    if (GA_LIKELY(b))
        return b;
    if (!(b = calloc(1, sizeof *b)))
        return NULL;
    pthread_mutex_init(&b->lock, NULL);
    b->tid = (uint32_t)syscall(SYS_gettid);
    ga_tbuf_t *head = atomic_load(&ga_tbufs);
    do
        b->next = head;
    while (!atomic_compare_exchange_weak(&ga_tbufs, &head, b));
    pthread_setspecific(ga_tbuf_key, b);
    return ga_tl_tbuf = b;
}

void ga_trace_event(uint8_t kind, uint8_t api, uint64_t addr, uint64_t size, uint64_t stream,
                    int dev, uint64_t t0, CUresult result)
{
    ga_tbuf_t *b = ga_tracing ? ga_tbuf_get() : NULL;
    if (!b)
        return;
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
        .stream = stream, .thread = b->tid,
        .duration_ns = dur >= 4294967295.0 ? UINT32_MAX : (uint32_t)dur,
        .device = (int16_t)dev, .kind = kind, .api = api, .result = (uint32_t)result,
    };
    const void *full = NULL;
    pthread_mutex_lock(&b->lock);
    ga_event_encode(&ev, b->rec[b->cur][b->n++]);
    if (b->n == GA_TRACE_BUF_RECORDS) { /* swap halves; write the full one after unlocking */
        full = b->rec[b->cur];
        b->cur ^= 1;
        b->n = 0;
    }
    pthread_mutex_unlock(&b->lock);
    if (full)
        ga_trace_write_records(full, GA_TRACE_BUF_RECORDS);
}

void ga_trace_flush_all(void)
{
    if (!ga_tracing)
        return;
    for (ga_tbuf_t *b = atomic_load(&ga_tbufs); b; b = b->next) {
        pthread_mutex_lock(&b->lock);
        ga_tbuf_flush_locked(b);
        pthread_mutex_unlock(&b->lock);
    }
}

/* A forked child stops tracing: the parent's buffered records are the parent's to write, and the
 * child's events would interleave with them in the same file. */
void ga_trace_fork_child(void)
{
    ga_tracing = 0;
    for (ga_tbuf_t *b = atomic_load(&ga_tbufs); b; b = b->next) {
        pthread_mutex_init(&b->lock, NULL);
        b->n = 0;
    }
}
