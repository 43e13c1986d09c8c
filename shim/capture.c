/* gpuarena and stream capture (CUDA graphs): which devices have a capture under way, so that the
 * fence (fence.c) synchronises none of their contexts meanwhile.
 *
 * "It is invalid to synchronize or query the execution status of a stream which is being captured
 * ... or synchronize a broader handle which encompasses an active stream capture, such as a device
 * or context handle" (CUDA Programming Guide, CUDA Graphs): the fence's cuCtxSynchronize during a
 * capture fails and invalidates it, and cuStreamEndCapture then fails (helper-48 F5: PyTorch's
 * torch.cuda.graph empties the cache, begins the capture, and allocates the graph's pool). The
 * driver cannot list a context's capturing streams, so the begin and end calls are hooked and the
 * captures under way kept here, by stream ID (ga_fence_stream_id: a per-thread stream's handle
 * names another stream in each thread) with the stream's context. While one runs on a device, the
 * fence waits for no context of that device: pending cuMemFree chunks stay pending and the pool
 * serves fresh memory. Those freed before the capture are waited for as it begins
 * (ga_capture_before), those freed during it leave cuMemGetInfo's free figure until it ends. Kept without a lock (slots claimed with a compare-and-swap), so that no
 * lock is taken inside a context's and a fork cannot inherit one held. A capture past the table
 * counts in ga_cap_extra, for every device, until a capture ends that the table does not hold.
 * A capture also ends when its stream is destroyed (cuStreamDestroy is hooked here for that) or
 * its context goes (ga_capture_ctx_gone). And what a program queues on a capturing stream is the
 * graph's (ga_capture_stream): its stream-ordered allocations go to the driver (passthrough.c),
 * and a pool block it frees there stays allocated (alloc.c).
 */
#include "shim.h"
#include "fence_internal.h"

#include <pthread.h>

#define GA_CAPTURES 64
static struct {
    _Atomic uint64_t sid;        /* 0: a free slot */
    _Atomic(CUcontext) ctx;      /* NULL while being filled: taken as on every device */
    _Atomic int dev1;            /* the context's device + 1, 0 unknown: for a context gpuarena
                                  * has no state of (set before ctx) */
    _Atomic int strict;          /* begun in the global or thread-local mode (ga_cap_strict) */
} ga_cap[GA_CAPTURES];
_Atomic int ga_cap_n; /* captures under way: the test every fence makes first (shim.h) */
static _Atomic int ga_cap_extra; /* of them, not in the table */
/* Of those in the table, the ones begun in CU_STREAM_CAPTURE_MODE_GLOBAL or _THREAD_LOCAL. While
 * one runs, "potentially unsafe API calls" are forbidden: in every thread of the process, on every
 * device, for a global capture, and in the capturing thread for a thread-local one (cuda.h,
 * CUstreamCaptureMode; the driver refuses such a call and invalidates the capture). Queries of
 * events and synchronisations are such calls (PyTorch's caching allocator queries no event during
 * a capture: "process_events involves cudaEventQueries, illegal during CUDA graph capture",
 * c10/cuda/CUDACachingAllocator.cpp). gpuarena cannot tell which thread may call what, so while
 * one runs it makes neither on any device (ga_capture_on_dev_slow, ga_capture_forbids_queries).
 * Until an outside check (helper-128, 2026-12-07) only the capture's own device was spared: a
 * cuMemAllocAsync on a stream that was not capturing queried the events of earlier
 * cuMemFreeAsync's, and synchronised another device's context for its cuMemFree's, during a
 * global capture (test strict_capture_queries_and_syncs_nothing). */
static _Atomic int ga_cap_strict;

/* Of those past the table, how many each context has (a few contexts; one past these is counted
 * in ga_cap_extra alone), so that a context's going ends them too (ga_capture_ctx_gone): they
 * stayed counted for good, and every device's fence stayed off (an outside re-check,
 * 2026-12-06). A context's entry goes with the context. */
#define GA_PAST_CTXS 16
static struct {
    _Atomic(CUcontext) ctx;
    _Atomic int n;
} ga_cap_past[GA_PAST_CTXS];

static void ga_past_add(CUcontext ctx)
{
    for (int pass = 0; ctx && pass < 2; pass++)
        for (size_t i = 0; i < GA_PAST_CTXS; i++) {
            CUcontext was = pass ? NULL : ctx;
            if (pass ? atomic_compare_exchange_strong(&ga_cap_past[i].ctx, &was, ctx) || was == ctx
                     : atomic_load(&ga_cap_past[i].ctx) == ctx) {
                atomic_fetch_add(&ga_cap_past[i].n, 1);
                return;
            }
        }
}

/* 1 when one of ctx's captures past the table was counted here, and now is not. */
static int ga_past_take(CUcontext ctx)
{
    for (size_t i = 0; ctx && i < GA_PAST_CTXS; i++)
        if (atomic_load(&ga_cap_past[i].ctx) == ctx) {
            int n = atomic_load(&ga_cap_past[i].n);
            while (n > 0 && !atomic_compare_exchange_weak(&ga_cap_past[i].n, &n, n - 1))
                ;
            return n > 0;
        }
    return 0;
}

/* Lowers the count of captures past the table, and the count of all, by up to n. */
static void ga_past_end(int n)
{
    while (n-- > 0) {
        int extra = atomic_load(&ga_cap_extra);
        while (extra > 0 && !atomic_compare_exchange_weak(&ga_cap_extra, &extra, extra - 1))
            ;
        if (extra <= 0)
            return;
        atomic_fetch_sub(&ga_cap_n, 1);
    }
}

/* The context of stream s, as a capture's is taken (special handles: the current one). */
static CUcontext ga_capture_ctx_of(CUstream s)
{
    CUcontext ctx = NULL;
    if (s == CU_STREAM_PER_THREAD || !ga_real.cuStreamGetCtx ||
        ga_real.cuStreamGetCtx(s, &ctx) != CUDA_SUCCESS)
        ga_real.cuCtxGetCurrent(&ctx);
    return ctx;
}

int ga_capture_on_dev_slow(int dev)
{
    if (atomic_load(&ga_cap_extra) || atomic_load(&ga_cap_strict))
        return 1; /* past the table (its mode unknown), or a global or thread-local one */
    for (size_t i = 0; i < GA_CAPTURES; i++) {
        if (!atomic_load(&ga_cap[i].sid))
            continue;
        CUcontext ctx = atomic_load(&ga_cap[i].ctx);
        ga_ctx_t *o = ctx ? ga_ctx_of(ctx) : NULL;
        int d = o ? o->dev : ctx ? atomic_load(&ga_cap[i].dev1) - 1 : -1;
        if (d < 0 || d == dev) /* a context whose device is not known: every device */
            return 1;
    }
    return 0;
}

int ga_capture_forbids_queries(void)
{
    return GA_UNLIKELY(atomic_load_explicit(&ga_cap_n, memory_order_acquire)) &&
           (atomic_load(&ga_cap_extra) || atomic_load(&ga_cap_strict));
}

/* Captures this thread began on its per-thread stream: the thread takes that stream with it when
 * it exits, and the capture goes with it, ended or not (a thread that began one and exited kept
 * every cuMemFree'd chunk of the device pending for good: an outside test, 2026-12-06). Should the
 * driver keep such a capture, nobody can end it, and a refused synchronisation passes nothing. */
#define GA_THREAD_CAPTURES 4
static __thread uint64_t ga_tl_cap[GA_THREAD_CAPTURES];
/* 1: that capture lies past the table (counted in ga_cap_extra): its end lowers that count */
static __thread uint8_t ga_tl_past[GA_THREAD_CAPTURES];
static __thread CUcontext ga_tl_ctx[GA_THREAD_CAPTURES]; /* its context, for one past the table */
static pthread_key_t ga_cap_key;
static pthread_once_t ga_cap_key_once = PTHREAD_ONCE_INIT;

static int ga_capture_drop(uint64_t sid, CUcontext ctx);
static void ga_capture_over(uint64_t sid, CUcontext ctx, int strict);

static void ga_capture_thread_exit(void *unused)
{
    (void)unused;
    for (int i = 0; i < GA_THREAD_CAPTURES; i++) {
        uint64_t sid = ga_tl_cap[i];
        if (sid && ga_tl_past[i]) /* not if its context went first, and took it */
            ga_capture_over(sid, ga_tl_ctx[i], 1); /* clears the note */
        else if (sid)
            ga_capture_drop(sid, NULL);
        ga_tl_cap[i] = 0, ga_tl_past[i] = 0, ga_tl_ctx[i] = NULL;
    }
}

static void ga_capture_key_make(void)
{
    pthread_key_create(&ga_cap_key, ga_capture_thread_exit);
}

/* Notes a per-thread capture of this thread (one per context at most: the table's slots are few;
 * past: it lies past the table). Its end clears the note (ga_capture_over). */
static void ga_capture_note_thread(uint64_t sid, int past, CUcontext ctx)
{
    pthread_once(&ga_cap_key_once, ga_capture_key_make);
    for (int i = 0; i < GA_THREAD_CAPTURES; i++)
        if (!ga_tl_cap[i] || ga_tl_cap[i] == sid) {
            ga_tl_cap[i] = sid;
            ga_tl_past[i] = (uint8_t)past;
            ga_tl_ctx[i] = ctx;
            pthread_setspecific(ga_cap_key, (void *)1); /* the destructor runs at exit */
            return;
        }
}

/* The device of a capture's context, -1 unknown: asked of the driver when it is the current one.
 * A capture in a context gpuarena has no state of (the program never allocated there: another
 * device's) was taken as on every device, and held every device's freed chunks until it ended
 * (an outside re-check, 2026-12-06; test capture_on_another_device_holds_nothing_here). */
static int ga_capture_dev_of(CUcontext ctx)
{
    CUcontext cur = NULL;
    CUdevice d = -1;
    ga_ctx_t *o = ctx ? ga_ctx_of(ctx) : NULL;
    if (o)
        return o->dev;
    if (!ctx || ga_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx ||
        ga_real.cuCtxGetDevice(&d) != CUDA_SUCCESS || d < 0)
        return -1;
    return (int)d;
}

/* After a capture began on s (the special handles already resolved: per-thread is
 * CU_STREAM_PER_THREAD). */
static void ga_capture_begun(CUstream s, CUstreamCaptureMode mode)
{
    uint64_t sid = ga_fence_stream_id(s);
    CUcontext ctx = ga_capture_ctx_of(s);
    int strict = mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    atomic_fetch_add(&ga_cap_n, 1);
    for (size_t i = 0; sid && i < GA_CAPTURES; i++) {
        uint64_t free_slot = 0;
        if (atomic_compare_exchange_strong(&ga_cap[i].sid, &free_slot, sid)) {
            if (strict) /* counted before the slot shows it: dropped by ga_capture_drop */
                atomic_fetch_add(&ga_cap_strict, 1);
            atomic_store(&ga_cap[i].strict, strict);
            atomic_store(&ga_cap[i].dev1, ga_capture_dev_of(ctx) + 1);
            atomic_store(&ga_cap[i].ctx, ctx);
            if (s == CU_STREAM_PER_THREAD)
                ga_capture_note_thread(sid, 0, ctx);
            return;
        }
    }
    ga_past_add(ctx); /* first: ga_past_end lowers ga_cap_extra only while it counts one */
    atomic_fetch_add(&ga_cap_extra, 1); /* no ID, or the table is full */
    /* one past the table too ends with its thread (it stayed counted for good: every device's
     * fence off, an outside re-check, 2026-12-06) */
    if (s == CU_STREAM_PER_THREAD && sid)
        ga_capture_note_thread(sid, 1, ctx);
}

/* Takes the captures of stream sid (with sid 0: of context ctx, every one) out of the table;
 * returns how many. A stream's capture is its own: the first found is the only one. */
static int ga_capture_drop(uint64_t sid, CUcontext ctx)
{
    int n = 0;
    for (size_t i = 0; i < GA_CAPTURES; i++) {
        uint64_t was = atomic_load(&ga_cap[i].sid);
        if (!was || (sid ? was != sid : atomic_load(&ga_cap[i].ctx) != ctx))
            continue;
        atomic_store(&ga_cap[i].ctx, NULL);
        if (atomic_compare_exchange_strong(&ga_cap[i].sid, &was, 0)) {
            if (atomic_exchange(&ga_cap[i].strict, 0))
                atomic_fetch_sub(&ga_cap_strict, 1);
            atomic_fetch_sub(&ga_cap_n, 1);
            n++;
            if (sid)
                break;
        }
    }
    return n;
}

/* The capture of stream sid (of context ctx) is over: out of the table, or, one the table does not
 * hold, out of the count of those past it (strict: only if ctx's count held it). */
static void ga_capture_over(uint64_t sid, CUcontext ctx, int strict)
{
    /* a note of this thread's for it goes: its per-thread capture ends on this thread only */
    for (int i = 0; sid && i < GA_THREAD_CAPTURES; i++)
        if (ga_tl_cap[i] == sid)
            ga_tl_cap[i] = 0, ga_tl_past[i] = 0, ga_tl_ctx[i] = NULL;
    if (sid && ga_capture_drop(sid, NULL))
        return;
    if (ga_past_take(ctx) || !strict)
        ga_past_end(1);
}

/* After cuStreamEndCapture(s): the capture is over unless the stream says it still runs (a call
 * refused from the wrong thread, say). sid: the stream's ID, taken before the call. */
static void ga_capture_ended(CUstream s, uint64_t sid, CUresult r)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (r == CUDA_ERROR_ILLEGAL_STATE) /* none was under way on s */
        return;
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED &&
        (!ga_real.cuStreamIsCapturing || (ga_real.cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
                                          st != CU_STREAM_CAPTURE_STATUS_NONE)))
        return;
    ga_capture_over(sid, ga_capture_ctx_of(s), 0);
}

/* Before a capture begins on s: the chunks the program freed with cuMemFree on s's device are
 * still pending (the deferred fence waits at the next allocation), and during the capture no
 * synchronisation may pass them, so under a cap the capture's allocations were refused for memory
 * the program had freed (helper-68 F10; torch.cuda.graph frees, empties its cache, then captures).
 * They are waited for now, with one synchronisation, as the next allocation would have done (and
 * the driver's own cuMemFree at each free). Only while no capture runs anywhere in the process: a
 * synchronisation then could end none (one begun on another device in global mode forbids this
 * thread's too). The legacy stream cannot be captured: nothing to do for it. */
static void ga_capture_before(CUstream s, CUstreamCaptureMode mode)
{
    CUcontext ctx = NULL;
    if (!s || s == CU_STREAM_LEGACY || atomic_load(&ga_cap_n))
        return;
    if (s == CU_STREAM_PER_THREAD || !ga_real.cuStreamGetCtx ||
        ga_real.cuStreamGetCtx(s, &ctx) != CUDA_SUCCESS)
        ga_real.cuCtxGetCurrent(&ctx);
    ga_ctx_t *c = ctx ? ga_ctx_of(ctx) : NULL;
    if (c)
        ga_dev_settle_pending(c->dev);
    /* A global or thread-local capture forbids event queries until it ends (ga_cap_strict): the
     * chunks freed with cuMemFreeAsync whose streams have already passed them are returned now,
     * on every device, queried while that is still allowed (they stayed pending through the
     * capture, and an allocation in it that needed their room was refused: helper-128). */
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        ga_dev_pass_passed(-1, 1);
}

/* Each begin: what the program freed made reusable, the real call, then the capture noted if it
 * began, with its mode (the first form takes none: global, as the driver's). */
#define GA_BEGIN_CAPTURE_HOOK(name, stream_of, mode_of, params, args)                        \
    GA_EXPORT CUresult name params                                                           \
    {                                                                                        \
        GA_HOOK_ENTER(name, args);                                                           \
        ga_capture_before(stream_of, mode_of);                                               \
        CUresult r = ga_real.name args;                                                      \
        if (r == CUDA_SUCCESS)                                                               \
            ga_capture_begun(stream_of, mode_of);                                            \
        return r;                                                                            \
    }
GA_BEGIN_CAPTURE_HOOK(cuStreamBeginCapture, hStream, CU_STREAM_CAPTURE_MODE_GLOBAL,
                      (CUstream hStream), (hStream))
GA_BEGIN_CAPTURE_HOOK(cuStreamBeginCapture_ptsz, GA_PTSZ_STREAM(hStream),
                      CU_STREAM_CAPTURE_MODE_GLOBAL, (CUstream hStream), (hStream))
GA_BEGIN_CAPTURE_HOOK(cuStreamBeginCapture_v2, hStream, mode,
                      (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
GA_BEGIN_CAPTURE_HOOK(cuStreamBeginCapture_v2_ptsz, GA_PTSZ_STREAM(hStream), mode,
                      (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
GA_BEGIN_CAPTURE_HOOK(cuStreamBeginCaptureToGraph, hStream, mode,
                      (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                       const CUgraphEdgeData *dependencyData, size_t numDependencies,
                       CUstreamCaptureMode mode),
                      (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))
GA_BEGIN_CAPTURE_HOOK(cuStreamBeginCaptureToGraph_ptsz, GA_PTSZ_STREAM(hStream), mode,
                      (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                       const CUgraphEdgeData *dependencyData, size_t numDependencies,
                       CUstreamCaptureMode mode),
                      (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))
#undef GA_BEGIN_CAPTURE_HOOK

GA_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    GA_HOOK_ENTER(cuStreamEndCapture, (hStream, phGraph));
    uint64_t sid = ga_fence_stream_id(hStream);
    CUresult r = ga_real.cuStreamEndCapture(hStream, phGraph);
    ga_capture_ended(hStream, sid, r);
    return r;
}

GA_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    GA_HOOK_ENTER(cuStreamEndCapture_ptsz, (hStream, phGraph));
    uint64_t sid = ga_fence_stream_id(GA_PTSZ_STREAM(hStream));
    CUresult r = ga_real.cuStreamEndCapture_ptsz(hStream, phGraph);
    ga_capture_ended(GA_PTSZ_STREAM(hStream), sid, r);
    return r;
}

/* A capture also ends when its stream goes without cuStreamEndCapture: the stream destroyed, or
 * its context (ga_capture_ctx_gone, from the teardown hooks). Left in the table, it kept every
 * cuMemFree'd chunk of the device pending for good: allocations refused "for the end of the stream
 * capture under way" under the cap, the bytes out of cuMemGetInfo's free figure (an outside test,
 * 2026-12-06; test capture_ends_with_its_stream). One load when no capture runs. */
static CUresult ga_stream_destroy(CUstream s, CUresult (*real_destroy)(CUstream))
{
    if (!atomic_load(&ga_cap_n))
        return real_destroy(s);
    /* asked first: one past the table is known only by the stream's own word */
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    int capturing = ga_real.cuStreamIsCapturing && ga_real.cuStreamIsCapturing(s, &st) ==
                    CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
    uint64_t sid = ga_fence_stream_id(s);
    CUcontext ctx = capturing ? ga_capture_ctx_of(s) : NULL;
    CUresult r = real_destroy(s);
    if (r == CUDA_SUCCESS && capturing)
        ga_capture_over(sid, ctx, 0);
    else if (r == CUDA_SUCCESS && sid)
        ga_capture_drop(sid, NULL);
    return r;
}

GA_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    GA_HOOK_ENTER(cuStreamDestroy_v2, (hStream));
    return ga_stream_destroy(hStream, ga_real.cuStreamDestroy_v2);
}

GA_EXPORT CUresult cuStreamDestroy(CUstream hStream)
{
    GA_HOOK_ENTER(cuStreamDestroy, (hStream));
    return ga_stream_destroy(hStream, ga_real.cuStreamDestroy);
}

void ga_capture_ctx_gone(CUcontext ctx)
{
    if (!ctx || !atomic_load(&ga_cap_n))
        return;
    ga_capture_drop(0, ctx);
    for (size_t i = 0; i < GA_PAST_CTXS; i++)
        if (atomic_load(&ga_cap_past[i].ctx) == ctx) {
            int n = atomic_exchange(&ga_cap_past[i].n, 0);
            atomic_store(&ga_cap_past[i].ctx, NULL);
            ga_past_end(n);
        }
}

/* Whether s is capturing (or its capture was invalidated): a stream-ordered allocation on it is a
 * graph memory node, the graph's own, which the driver backs while the graph runs. It goes to the
 * driver uncounted, as graph memory is (README, Limits), and so does its captured free (no table
 * holds it). Served by the pool (arena, grow, vmm) the graph kept a pool address, and the
 * captured free an event recorded into the graph, which answers done though the graph never ran:
 * the pool handed the address out again while each launch of the graph wrote it (an outside
 * test, 2026-12-06); passed through and counted (platform, pools), its record asked the driver
 * about an address with no memory behind it yet (passthrough.c). A pool block freed on such a
 * stream is kept allocated (alloc.c). One load while no capture runs. */
int ga_capture_stream(CUstream s)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return GA_UNLIKELY(atomic_load_explicit(&ga_cap_n, memory_order_acquire)) &&
           ga_real.cuStreamIsCapturing && ga_real.cuStreamIsCapturing(s, &st) == CUDA_SUCCESS &&
           st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* The child of a fork: the parent's contexts are not its own (ga_ctx_fork_child), nor their
 * captures; kept, they held every chunk the child freed pending for good (an outside re-check,
 * 2026-12-06; test fork_during_capture_child_has_none). One thread runs: plain stores. */
void ga_capture_fork_child(void)
{
    for (size_t i = 0; i < GA_CAPTURES; i++)
        atomic_store(&ga_cap[i].ctx, NULL), atomic_store(&ga_cap[i].sid, 0),
            atomic_store(&ga_cap[i].strict, 0);
    atomic_store(&ga_cap_strict, 0);
    for (size_t i = 0; i < GA_PAST_CTXS; i++)
        atomic_store(&ga_cap_past[i].ctx, NULL), atomic_store(&ga_cap_past[i].n, 0);
    for (int i = 0; i < GA_THREAD_CAPTURES; i++)
        ga_tl_cap[i] = 0, ga_tl_past[i] = 0, ga_tl_ctx[i] = NULL;
    atomic_store(&ga_cap_extra, 0);
    atomic_store(&ga_cap_n, 0);
}
