/* The null driver of bench-shim (test/preload/bench_nulldrv.c, included whole) with the entry
 * points bench-patterns' stream-ordered and pitched loops reach through the shim: streams and
 * events that are always passed (a query answers CUDA_SUCCESS at once, so a cuMemFreeAsync's
 * block is back as soon as the shim looks), cuMemAllocAsync, cuMemFreeAsync and cuMemAllocPitch_v2
 * as pointer bumps and no-ops. Built as $(BUILD)/bench/nulldrv/libcuda.so.1; never used by
 * tests. */
#include "../preload/bench_nulldrv.c"

#pragma GCC visibility push(default)

static int the_stream, the_events[1];

CUresult cuStreamCreate(CUstream *s, unsigned flags)
{
    (void)flags;
    *s = (CUstream)&the_stream;
    return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(CUstream s) { (void)s; return CUDA_SUCCESS; }
CUresult cuStreamQuery(CUstream s) { (void)s; return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(CUstream s) { (void)s; return CUDA_SUCCESS; }
CUresult cuStreamGetCtx(CUstream s, CUcontext *c)
{
    (void)s;
    *c = (CUcontext)&the_ctxs[0];
    return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st)
{
    (void)s;
    *st = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent *e, unsigned flags)
{
    (void)flags;
    *e = (CUevent)&the_events[0];
    return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream s) { (void)e, (void)s; return CUDA_SUCCESS; }
CUresult cuEventQuery(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult cuEventDestroy_v2(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s)
{
    (void)s;
    *p = bump(n, 512);
    return CUDA_SUCCESS;
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)p, (void)s; return CUDA_SUCCESS; }
CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e)
{
    (void)e;
    *pitch = (w + 511) & ~(size_t)511;
    *p = bump(*pitch * h, 512);
    return CUDA_SUCCESS;
}

#pragma GCC visibility pop
