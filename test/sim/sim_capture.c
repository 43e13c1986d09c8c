/* simcuda stream capture (cuStreamBeginCapture, cuStreamEndCapture, cuStreamIsCapturing and their
 * forms), split from sim_stream.c, whose stream records it reads and marks under sim_stream_mu
 * (sim_stream.h).
 */
#define _GNU_SOURCE
#include "sim_internal.h"
#include "sim_stream.h"

/* ---- stream capture ----
 * "It is invalid to synchronize or query the execution status of a stream which is being captured
 * ... It is also invalid to query the execution status of or synchronize a broader handle which
 * encompasses an active stream capture, such as a device or context handle when any associated
 * stream is in capture mode" (CUDA Programming Guide, CUDA Graphs, prohibited and unhandled
 * operations): the call answers CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the capture is
 * invalidated, so cuStreamEndCapture answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. The legacy
 * stream encompasses the context's blocking streams. Only that is modelled: work queued on a
 * capturing stream still runs (the driver records it into the graph instead), and the capture
 * mode's limits on other calls are not checked. A destroyed stream (a thread's per-thread stream
 * once the thread has exited) captures nothing: its capture ended with it. Until 2026-12-06 such a
 * capture refused every later cuCtxSynchronize of the context (helper-91). */
int sim_ctx_capture_check(const sim_ctx_t *c, const sim_stream_t *only)
{
    int hit = 0;
    pthread_mutex_lock(&sim_stream_mu);
    for (sim_stream_t *t = c->streams; t; t = t->ctx_next)
        if (t->capturing && t->alive &&
            (!only || only == t || (only->kind == SIM_LEGACY && !(t->flags & CU_STREAM_NON_BLOCKING)))) {
            t->invalidated = 1;
            hit = 1;
        }
    pthread_mutex_unlock(&sim_stream_mu);
    return hit;
}

/* The legacy stream cannot be captured ("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ... the legacy
 * stream", cuStreamBeginCapture); a created or per-thread stream can, once at a time. */
static CUresult sim_capture_begin(CUstream h, int per_thread, int mode)
{
    sim_stream_t *s;
    CUresult r = sim_stream_here(h, per_thread, NULL, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->kind == SIM_LEGACY)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    pthread_mutex_lock(&sim_stream_mu);
    int busy = s->capturing;
    if (!busy)
        s->capturing = 1, s->invalidated = 0;
    pthread_mutex_unlock(&sim_stream_mu);
    return busy ? CUDA_ERROR_ILLEGAL_STATE : CUDA_SUCCESS;
}

static CUresult sim_capture_end(CUstream h, CUgraph *g, int per_thread)
{
    sim_stream_t *s;
    CUresult r = sim_stream_here(h, per_thread, NULL, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_stream_mu);
    int was = s->capturing, bad = s->invalidated;
    s->capturing = s->invalidated = 0;
    pthread_mutex_unlock(&sim_stream_mu);
    if (!was)
        return CUDA_ERROR_ILLEGAL_STATE;
    static char graph; /* a handle the sim never dereferences */
    *g = bad ? NULL : (CUgraph)(void *)&graph;
    return bad ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}

/* The legacy stream answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT while a blocking stream of its
 * context is capturing (cuStreamIsCapturing's note), without invalidating it. */
static CUresult sim_capture_status(CUstream h, CUstreamCaptureStatus *st, int per_thread)
{
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_stream_here(h, per_thread, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_stream_mu);
    int implicit = 0;
    for (sim_stream_t *t = s->kind == SIM_LEGACY ? c->streams : NULL; t; t = t->ctx_next)
        implicit |= t->capturing && !(t->flags & CU_STREAM_NON_BLOCKING);
    *st = !s->capturing ? CU_STREAM_CAPTURE_STATUS_NONE
          : s->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    pthread_mutex_unlock(&sim_stream_mu);
    return implicit ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : CUDA_SUCCESS;
}

/* v1 (CUDA 10.0) took no mode: global. */
SIM_WRAP(cuStreamBeginCapture, sim_capture_begin, (CUstream hStream), (hStream, 0, CU_STREAM_CAPTURE_MODE_GLOBAL))
SIM_WRAP(cuStreamBeginCapture_ptsz, sim_capture_begin, (CUstream hStream), (hStream, 1, CU_STREAM_CAPTURE_MODE_GLOBAL))
SIM_WRAP(cuStreamBeginCapture_v2, sim_capture_begin, (CUstream hStream, CUstreamCaptureMode mode), (hStream, 0, (int)mode))
SIM_WRAP(cuStreamBeginCapture_v2_ptsz, sim_capture_begin, (CUstream hStream, CUstreamCaptureMode mode), (hStream, 1, (int)mode))
/* Into an existing graph (CUDA 12.3): the graph and dependencies are not looked at here. */
static CUresult sim_capture_to_graph(CUstream h, int per_thread, CUstreamCaptureMode mode,
                                     CUgraph g, const CUgraphNode *deps,
                                     const CUgraphEdgeData *data, size_t n)
{
    (void)g, (void)deps, (void)data, (void)n;
    return sim_capture_begin(h, per_thread, (int)mode);
}
SIM_WRAP(cuStreamBeginCaptureToGraph, sim_capture_to_graph,
         (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
          const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode),
         (hStream, 0, mode, hGraph, dependencies, dependencyData, numDependencies))
SIM_WRAP(cuStreamBeginCaptureToGraph_ptsz, sim_capture_to_graph,
         (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
          const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode),
         (hStream, 1, mode, hGraph, dependencies, dependencyData, numDependencies))
SIM_WRAP(cuStreamEndCapture, sim_capture_end, (CUstream hStream, CUgraph *phGraph), (hStream, phGraph, 0))
SIM_WRAP(cuStreamEndCapture_ptsz, sim_capture_end, (CUstream hStream, CUgraph *phGraph), (hStream, phGraph, 1))
SIM_WRAP(cuStreamIsCapturing, sim_capture_status, (CUstream hStream, CUstreamCaptureStatus *captureStatus), (hStream, captureStatus, 0))
SIM_WRAP(cuStreamIsCapturing_ptsz, sim_capture_status, (CUstream hStream, CUstreamCaptureStatus *captureStatus), (hStream, captureStatus, 1))
