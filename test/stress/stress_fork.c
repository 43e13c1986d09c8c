/* fork() while another thread is inside the shim, then CUDA afresh in the child.
 *
 * A worker thread allocates and frees in a tight loop (so at any instant it may hold the shim's
 * locks, the allocator's, or be inside the driver) while the main thread forks STRESS_FORKS
 * times. Each child must be able to start CUDA again: cuInit, a new context, an allocation, a
 * host->device->host round trip with the data intact, the free, the context destroyed, and a
 * normal exit (atexit handlers included, which is where a lock inherited in the locked state
 * bites). A child that hangs is killed by its own alarm(), or by the parent's watchdog if it hangs
 * before reaching its code, so a deadlock is a failure, not a hung test. The parent checks every child's exit status and keeps working itself.
 * Run it without the shim as well: a failure there is the simulated driver's, not the shim's.
 */
#include "stress_util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int g_stop;
static atomic_long g_worker_errors, g_worker_loops;

static void *worker_main(void *arg)
{
    CUcontext ctx = arg;
    uint64_t seed = 42;
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        atomic_fetch_add(&g_worker_errors, 1);
        return NULL;
    }
    while (!atomic_load(&g_stop)) {
        CUdeviceptr p;
        size_t size = 1 + (size_t)(rng_next(&seed) % (1u << 20));
        CUresult rc = cuMemAlloc(&p, size);
        if (rc == CUDA_SUCCESS)
            rc = cuMemFree(p);
        if (rc != CUDA_SUCCESS)
            atomic_fetch_add(&g_worker_errors, 1);
        atomic_fetch_add(&g_worker_loops, 1);
    }
    return NULL;
}

/* What a child does; returns its exit code: 0 ok, else the step that failed. */
static int child_main(void)
{
    signal(SIGALRM, SIG_DFL); /* not the parent's watchdog handler, inherited through fork */
    alarm(10);                /* a deadlock becomes SIGALRM, which the parent reports */
    CUcontext ctx;
    CUdeviceptr p;
    unsigned char out[4096], in[4096];
    for (size_t i = 0; i < sizeof out; i++)
        out[i] = (unsigned char)(i * 7 + 3);
    if (cuInit(0) != CUDA_SUCCESS)
        return 2;
    if (cuCtxCreate(&ctx, NULL, 0, 0) != CUDA_SUCCESS)
        return 3;
    if (cuMemAlloc(&p, sizeof out) != CUDA_SUCCESS)
        return 4;
    if (cuMemcpyHtoD(p, out, sizeof out) != CUDA_SUCCESS ||
        cuMemcpyDtoH(in, p, sizeof in) != CUDA_SUCCESS)
        return 5;
    if (memcmp(in, out, sizeof in) != 0)
        return 6;
    if (cuMemFree(p) != CUDA_SUCCESS)
        return 7;
    if (cuCtxDestroy(ctx) != CUDA_SUCCESS)
        return 8;
    return 0;
}

static const char *child_step(int code)
{
    static const char *steps[] = {"ok", "?", "cuInit", "cuCtxCreate", "cuMemAlloc", "memcpy",
                                  "data mismatch", "cuMemFree", "cuCtxDestroy"};
    return code >= 0 && code <= 8 ? steps[code] : "?";
}

/* The parent's watchdog: a child can hang before its own alarm() is set (inside fork's child
 * handlers, e.g. walking a structure another thread was changing), so the parent kills it. */
static volatile pid_t g_child;

static void on_parent_alarm(int sig)
{
    (void)sig;
    if (g_child > 0)
        kill(g_child, SIGKILL);
}

/* Forks n children; returns how many failed, describing the first in why. Stops after three
 * failures: each hung child costs its whole alarm, and three say enough. */
static int fork_children(int n, char *why, size_t whylen, int *done)
{
    int failed = 0;
    for (int i = 0; i < n && failed < 3; i++, (*done)++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            exit(child_main());
        int st = 0;
        g_child = pid;
        alarm(15);
        pid_t w;
        while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
            ;
        alarm(0);
        g_child = 0;
        if (pid < 0 || w != pid) {
            if (!failed++)
                snprintf(why, whylen, "fork %d: fork/waitpid failed", i);
            continue;
        }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            continue;
        if (!failed++) {
            if (WIFSIGNALED(st))
                snprintf(why, whylen, "fork %d: child killed by signal %d%s", i, WTERMSIG(st),
                         WTERMSIG(st) == SIGALRM   ? " (hung: deadlock after fork)"
                         : WTERMSIG(st) == SIGKILL ? " (hung: killed by the parent's watchdog)"
                                                   : "");
            else
                snprintf(why, whylen, "fork %d: child failed at %s", i,
                         child_step(WEXITSTATUS(st)));
        }
    }
    return failed;
}

int main(void)
{
    int forks = (int)env_long("STRESS_FORKS", 24);
    REQUIRE_CU(cuInit(0));
    CUcontext ctx;
    REQUIRE_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    REQUIRE_CU(cuCtxSetCurrent(ctx));
    pthread_t t;
    if (pthread_create(&t, NULL, worker_main, ctx) != 0) {
        tap(0, "fork: starting the worker thread");
        return 0;
    }
    /* Let the worker get going first, by progress rather than by time. */
    while (atomic_load(&g_worker_loops) < 100 && !atomic_load(&g_worker_errors))
        sched_yield();
    char why[200] = "";
    signal(SIGALRM, on_parent_alarm);
    int done = 0;
    int failed = fork_children(forks, why, sizeof why, &done);
    atomic_store(&g_stop, 1);
    pthread_join(t, NULL);
    tap(failed == 0, "fork: %d children forked during alloc/free started CUDA afresh and exited 0"
        " (%d of %d failed%s%s)", forks, failed, done, why[0] ? ": " : "", why);
    tap(atomic_load(&g_worker_errors) == 0, "fork: the parent's worker kept working (%ld loops, "
        "%ld errors)", atomic_load(&g_worker_loops), atomic_load(&g_worker_errors));
    CUdeviceptr p;
    CUresult rc = cuMemAlloc(&p, 1 << 20);
    if (rc == CUDA_SUCCESS)
        rc = cuMemFree(p);
    tap(rc == CUDA_SUCCESS, "fork: the parent allocates and frees after the forks (%d)", (int)rc);
    cuDevicePrimaryCtxRelease(0);
    return 0;
}
