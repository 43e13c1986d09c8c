/* Host memory of the tracer stays bounded (issue 8 item 7): many short-lived threads, each making
 * one allocation and one free under GPUARENA_TRACE, must not leave a buffer behind per thread.
 *
 * Threads run in small batches (created together, joined together) so a run has thousands of
 * thread exits but only a few live threads at a time: what the process holds afterwards is what the
 * exited threads left behind. What it proves from outside the shim: resident memory grows by less
 * than STRESS_RSS_MAX_MIB (16; 0 skips the check, as under a sanitizer whose own memory dwarfs it)
 * from before the first thread to after the last; and every event of every exited thread is already
 * in the trace file when the threads have been joined (their buffers were flushed at thread exit,
 * whole records, each thread's records in its own order). Last, STRESS_EXIT_THREADS detached
 * threads make STRESS_EXIT_PAIRS allocation/free pairs each, say they are done, and exit while
 * the main thread returns from main: their thread-exit flushes and frees race the shim's exit
 * flush (TSan watches), and the runner then checks that the file holds every event (nothing lost
 * at exit, nothing written twice). Environment: STRESS_THREADS (6000), STRESS_BATCH (8),
 * STRESS_RSS_MAX_MIB (16), STRESS_EXIT_THREADS (8), STRESS_EXIT_PAIRS (16), GPUARENA_TRACE (a
 * plain path, no %p).
 */
#include "stress_util.h"

#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_BATCH 64
#define REC 48 /* allocator/ga_trace.h: 32-byte header, 48-byte records */
#define HDR 32

typedef struct job {
    CUcontext ctx;
    size_t size;
    CUresult alloc_rc, free_rc;
} job_t;

static void *one_thread(void *arg)
{
    job_t *j = arg;
    CUdeviceptr p = 0;
    j->alloc_rc = cuCtxSetCurrent(j->ctx);
    if (j->alloc_rc == CUDA_SUCCESS)
        j->alloc_rc = cuMemAlloc(&p, j->size);
    j->free_rc = j->alloc_rc == CUDA_SUCCESS ? cuMemFree(p) : CUDA_SUCCESS;
    return NULL;
}

/* The racing threads: pairs, then "done", then exit, which races the process's exit. */
static sem_t g_racers_done; /* static: posted while main may already have returned */
static CUcontext g_ctx;
static long g_pairs;

static void *racer(void *arg)
{
    (void)arg;
    CUdeviceptr p;
    if (cuCtxSetCurrent(g_ctx) == CUDA_SUCCESS)
        for (long i = 0; i < g_pairs; i++)
            if (cuMemAlloc(&p, 1024) == CUDA_SUCCESS)
                cuMemFree(p);
    sem_post(&g_racers_done);
    return NULL;
}

/* Starts n detached racers and waits until each has made its pairs (not until it has exited). */
static void race_the_exit(long n)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sem_init(&g_racers_done, 0, 0);
    long started = 0;
    for (pthread_t t; started < n && pthread_create(&t, &attr, racer, NULL) == 0;)
        started++;
    pthread_attr_destroy(&attr);
    for (long i = 0; i < started; i++)
        while (sem_wait(&g_racers_done) != 0)
            ;
    tap(started == n, "%ld of %ld threads racing the exit started", started, n);
}

/* Resident set size in bytes (/proc/self/statm, second field, in pages). */
static long long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, res = 0;
    if (f) {
        if (fscanf(f, "%lld %lld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * sysconf(_SC_PAGESIZE);
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Counts the records of threads other than main_tid: allocs, frees, and pairs out of order (a
 * thread's free before its own alloc of that address, in file order). */
static int count_trace(const char *path, uint32_t main_tid, long *allocs, long *frees, long *order)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    struct stat st;
    fstat(fd, &st);
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf ? read(fd, buf, (size_t)st.st_size) : -1;
    close(fd);
    if (n < HDR || memcmp(buf, "GATRACE", 8) != 0 || (n - HDR) % REC) {
        free(buf);
        return -2;
    }
    /* Per thread, the last address it allocated: its next record must free that address. */
    *allocs = *frees = *order = 0;
    for (const unsigned char *r = buf + HDR; r < buf + n; r += REC) {
        uint32_t tid = (uint32_t)le(r + 32, 4);
        uint8_t kind = r[42];
        if (tid == main_tid)
            continue;
        *allocs += kind == 1;
        *frees += kind == 2;
        if (kind == 2) { /* the alloc of the same address and thread comes earlier */
            int seen = 0;
            for (const unsigned char *q = r - REC; q >= buf + HDR && !seen; q -= REC)
                seen = q[42] == 1 && le(q + 32, 4) == tid && le(q + 8, 8) == le(r + 8, 8);
            *order += !seen;
        }
    }
    free(buf);
    return 0;
}

int main(void)
{
    long threads = env_long("STRESS_THREADS", 6000), batch = env_long("STRESS_BATCH", 8);
    long max_mib = env_long("STRESS_RSS_MAX_MIB", 16);
    const char *trace = getenv("GPUARENA_TRACE");
    if (batch < 1 || batch > MAX_BATCH)
        batch = 8;
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    REQUIRE_CU(cuInit(0));
    REQUIRE_CU(cuDeviceGet(&dev, 0));
    REQUIRE_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    REQUIRE_CU(cuCtxSetCurrent(ctx));
    REQUIRE_CU(cuMemAlloc(&p, 4096)); /* the shim and the trace are up before the baseline */
    REQUIRE_CU(cuMemFree(p));

    long long before = rss_bytes();
    long failed = 0;
    job_t jobs[MAX_BATCH];
    pthread_t tids[MAX_BATCH];
    for (long done = 0; done < threads;) {
        long k = threads - done < batch ? threads - done : batch;
        for (long i = 0; i < k; i++) {
            jobs[i] = (job_t){.ctx = ctx, .size = 512 * (size_t)(1 + (done + i) % 64)};
            if (pthread_create(&tids[i], NULL, one_thread, &jobs[i]) != 0) {
                tap(0, "pthread_create failed after %ld threads", done + i);
                return 0;
            }
        }
        for (long i = 0; i < k; i++) {
            pthread_join(tids[i], NULL);
            failed += jobs[i].alloc_rc != CUDA_SUCCESS || jobs[i].free_rc != CUDA_SUCCESS;
        }
        done += k;
    }
    long long growth = rss_bytes() - before;
    tap(failed == 0, "%ld threads: every alloc and free succeeded (%ld failed)", threads, failed);
    if (max_mib > 0)
        tap(growth < max_mib * (1ll << 20), "%ld short-lived traced threads grow resident memory "
            "by %.1f MiB (limit %ld MiB)", threads, (double)growth / (1 << 20), max_mib);
    else
        tap(1, "%ld short-lived traced threads: resident memory growth %.1f MiB (not checked "
            "under a sanitizer)", threads, (double)growth / (1 << 20));

    long allocs = 0, frees = 0, order = 0;
    int rc = trace ? count_trace(trace, (uint32_t)getpid(), &allocs, &frees, &order) : -3;
    tap(rc == 0 && allocs == threads && frees == threads && order == 0,
        "before exit, the trace holds every exited thread's events: %ld allocs, %ld frees of %ld, "
        "%ld frees without their alloc before them (read %d)", allocs, frees, threads, order, rc);
    g_ctx = ctx;
    g_pairs = env_long("STRESS_EXIT_PAIRS", 16);
    race_the_exit(env_long("STRESS_EXIT_THREADS", 8));
    return 0;
}
