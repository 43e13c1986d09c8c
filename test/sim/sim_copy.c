/* simcuda copies and sets: cuMemcpy*, cuMemsetD8/D32, their per-thread-stream (_ptds) twins, the
 * stream-ordered forms (*Async, _ptsz), and the stand-in kernels simcuda_launch/_copy.
 *
 * Device memory is host memory, so a copy is a memmove; what makes this a driver is the checking:
 * every device range must lie inside one live allocation, or inside VMM mappings the current
 * context's device may read (or write, for a destination), else CUDA_ERROR_INVALID_VALUE. So a test
 * that copies past the end of a sub-allocated block, or into a granule its allocator unmapped, fails
 * here as on a GPU instead of faulting. Every copy and set is an operation on a stream
 * (sim_stream.c): the arguments are checked when it is called, and again, under sim_lock, when it
 * runs, so one whose memory was freed in between is skipped (a stream fault) instead of writing
 * into unmapped or reused host memory. The lock is held during the copy so a concurrent free or
 * unmap cannot pull the bytes away underneath. The synchronous calls are ordered on the legacy
 * default stream (the _ptds ones on the per-thread stream) and return once they ran, as the real
 * driver's do for device memory.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <string.h>

#define SIM_PTR(d) ((void *)(uintptr_t)(d))
#define SIM_DP(p) ((CUdeviceptr)(uintptr_t)(p))

/* Whether a copy's or set's ranges are valid now (under sim_lock). */
static int sim_work_ok_locked(const sim_work_t *w)
{
    size_t bytes = w->n * w->elem;
    if (w->kind == SIM_WORK_SET)
        return sim_range_ok_locked(SIM_DP(w->dst), bytes, w->dev, 1);
    return (!w->dst_dev || sim_range_ok_locked(SIM_DP(w->dst), bytes, w->dev, 1)) &&
           (!w->src_dev || sim_range_ok_locked(SIM_DP(w->src), bytes, w->dev, 0));
}

CUresult sim_work_run(const sim_work_t *w)
{
    pthread_mutex_lock(&sim_lock);
    int ok = sim_work_ok_locked(w);
    if (ok && w->kind == SIM_WORK_COPY)
        memmove(w->dst, w->src, w->n);
    else if (ok && w->elem == 1)
        memset(w->dst, (int)(w->value & 0xff), w->n);
    for (size_t i = 0; ok && w->kind == SIM_WORK_SET && w->elem == 4 && i < w->n; i++)
        ((unsigned *)w->dst)[i] = w->value;
    pthread_mutex_unlock(&sim_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Checks w now and queues it on stream h (per_thread: a _ptsz/_ptds entry point); sync: waits. */
static CUresult sim_submit(sim_work_t *w, CUstream h, int per_thread, int sync)
{
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_stream_here(h, per_thread, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (w->n == 0)
        return CUDA_SUCCESS;
    if (!w->dst || (w->kind == SIM_WORK_COPY && !w->src))
        return CUDA_ERROR_INVALID_VALUE;
    w->dev = c->dev;
    pthread_mutex_lock(&sim_lock);
    int ok = sim_work_ok_locked(w);
    pthread_mutex_unlock(&sim_lock);
    return ok ? sim_stream_submit(s, w, NULL, sync, NULL) : CUDA_ERROR_INVALID_VALUE;
}

/* dst and src: 1 when that side is device memory that must be checked. */
static CUresult sim_copy_on(void *dst, int dst_dev, const void *src, int src_dev, size_t n, CUstream h,
                            int per_thread, int sync)
{
    SIM_COUNT(memcpy_calls);
    sim_work_t w = {.kind = SIM_WORK_COPY, .dst = dst, .dst_dev = dst_dev, .src = src, .src_dev = src_dev,
                    .n = n, .elem = 1};
    return sim_submit(&w, h, per_thread, sync);
}

static CUresult sim_copy(void *dst, int dst_dev, const void *src, int src_dev, size_t n)
{
    return sim_copy_on(dst, dst_dev, src, src_dev, n, NULL, 0, 1);
}

static CUresult sim_copy_ptds(void *dst, int dst_dev, const void *src, int src_dev, size_t n)
{
    return sim_copy_on(dst, dst_dev, src, src_dev, n, NULL, 1, 1);
}

/* Unified addressing: each side is checked if it is device address space (an allocation or a VMM
 * reservation, mapped or not); anything else is host memory. */
static CUresult sim_copy_any(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, int per_thread, int sync)
{
    pthread_mutex_lock(&sim_lock);
    int dd = sim_is_device_locked(dst), sd = sim_is_device_locked(src);
    pthread_mutex_unlock(&sim_lock);
    return sim_copy_on(SIM_PTR(dst), dd, SIM_PTR(src), sd, n, h, per_thread, sync);
}

#define SIM_HTOD_ARGS (SIM_PTR(dstDevice), 1, srcHost, 0, ByteCount)
#define SIM_DTOH_ARGS (dstHost, 0, SIM_PTR(srcDevice), 1, ByteCount)
#define SIM_DTOD_ARGS (SIM_PTR(dstDevice), 1, SIM_PTR(srcDevice), 1, ByteCount)
SIM_WRAP(cuMemcpyHtoD_v2, sim_copy, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount), SIM_HTOD_ARGS)
SIM_WRAP(cuMemcpyHtoD_v2_ptds, sim_copy_ptds, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount),
         SIM_HTOD_ARGS)
SIM_WRAP(cuMemcpyDtoH_v2, sim_copy, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), SIM_DTOH_ARGS)
SIM_WRAP(cuMemcpyDtoH_v2_ptds, sim_copy_ptds, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount), SIM_DTOH_ARGS)
SIM_WRAP(cuMemcpyDtoD_v2, sim_copy, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
         SIM_DTOD_ARGS)
SIM_WRAP(cuMemcpyDtoD_v2_ptds, sim_copy_ptds, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
         SIM_DTOD_ARGS)
SIM_WRAP(cuMemcpy, sim_copy_any, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),
         (dst, src, ByteCount, NULL, 0, 1))
SIM_WRAP(cuMemcpy_ptds, sim_copy_any, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),
         (dst, src, ByteCount, NULL, 1, 1))
#undef SIM_HTOD_ARGS
#undef SIM_DTOH_ARGS
#undef SIM_DTOD_ARGS

/* The stream-ordered copies: checked now, run when the stream gets to them. */
#define SIM_HTOD_ASYNC(pt) (SIM_PTR(dstDevice), 1, srcHost, 0, ByteCount, hStream, pt, 0)
#define SIM_DTOH_ASYNC(pt) (dstHost, 0, SIM_PTR(srcDevice), 1, ByteCount, hStream, pt, 0)
#define SIM_DTOD_ASYNC(pt) (SIM_PTR(dstDevice), 1, SIM_PTR(srcDevice), 1, ByteCount, hStream, pt, 0)
#define SIM_HTOD_PARAMS (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
#define SIM_DTOH_PARAMS (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
#define SIM_DTOD_PARAMS (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
SIM_WRAP(cuMemcpyHtoDAsync_v2, sim_copy_on, SIM_HTOD_PARAMS, SIM_HTOD_ASYNC(0))
SIM_WRAP(cuMemcpyHtoDAsync_v2_ptsz, sim_copy_on, SIM_HTOD_PARAMS, SIM_HTOD_ASYNC(1))
SIM_WRAP(cuMemcpyDtoHAsync_v2, sim_copy_on, SIM_DTOH_PARAMS, SIM_DTOH_ASYNC(0))
SIM_WRAP(cuMemcpyDtoHAsync_v2_ptsz, sim_copy_on, SIM_DTOH_PARAMS, SIM_DTOH_ASYNC(1))
SIM_WRAP(cuMemcpyDtoDAsync_v2, sim_copy_on, SIM_DTOD_PARAMS, SIM_DTOD_ASYNC(0))
SIM_WRAP(cuMemcpyDtoDAsync_v2_ptsz, sim_copy_on, SIM_DTOD_PARAMS, SIM_DTOD_ASYNC(1))
SIM_WRAP(cuMemcpyAsync, sim_copy_any, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream),
         (dst, src, ByteCount, hStream, 0, 0))
SIM_WRAP(cuMemcpyAsync_ptsz, sim_copy_any,
         (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream), (dst, src, ByteCount, hStream, 1, 0))
#undef SIM_HTOD_ASYNC
#undef SIM_DTOH_ASYNC
#undef SIM_DTOD_ASYNC
#undef SIM_HTOD_PARAMS
#undef SIM_DTOH_PARAMS
#undef SIM_DTOD_PARAMS

/* Sets n elements of elem bytes each (1 or 4) to the low bytes of value, on stream h. */
static CUresult sim_set_on(CUdeviceptr dst, unsigned value, size_t elem, size_t n, CUstream h, int per_thread,
                           int sync)
{
    SIM_COUNT(memset_calls);
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (n && (dst % elem || n > SIZE_MAX / elem))
        return CUDA_ERROR_INVALID_VALUE;
    sim_work_t w = {.kind = SIM_WORK_SET, .dst = SIM_PTR(dst), .value = value, .elem = elem, .n = n};
    return sim_submit(&w, h, per_thread, sync);
}

#define SIM_D8(pt, sync) (dstDevice, uc, 1, N, NULL, pt, sync)
#define SIM_D32(pt, sync) (dstDevice, ui, 4, N, NULL, pt, sync)
SIM_WRAP(cuMemsetD8_v2, sim_set_on, (CUdeviceptr dstDevice, unsigned char uc, size_t N), SIM_D8(0, 1))
SIM_WRAP(cuMemsetD8_v2_ptds, sim_set_on, (CUdeviceptr dstDevice, unsigned char uc, size_t N), SIM_D8(1, 1))
SIM_WRAP(cuMemsetD32_v2, sim_set_on, (CUdeviceptr dstDevice, unsigned int ui, size_t N), SIM_D32(0, 1))
SIM_WRAP(cuMemsetD32_v2_ptds, sim_set_on, (CUdeviceptr dstDevice, unsigned int ui, size_t N), SIM_D32(1, 1))
#undef SIM_D8
#undef SIM_D32
SIM_WRAP(cuMemsetD8Async, sim_set_on, (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream),
         (dstDevice, uc, 1, N, hStream, 0, 0))
SIM_WRAP(cuMemsetD8Async_ptsz, sim_set_on, (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream),
         (dstDevice, uc, 1, N, hStream, 1, 0))
SIM_WRAP(cuMemsetD32Async, sim_set_on, (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream),
         (dstDevice, ui, 4, N, hStream, 0, 0))
SIM_WRAP(cuMemsetD32Async_ptsz, sim_set_on, (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream),
         (dstDevice, ui, 4, N, hStream, 1, 0))

/* ---- stand-in kernels (simcuda.h): a timed set or copy queued like any kernel launch ---- */

int simcuda_launch(struct CUstream_st *stream, unsigned long long dst, uint8_t value, size_t bytes,
                   unsigned delay_us)
{
    SIM_COUNT(launch_calls);
    sim_work_t w = {.kind = SIM_WORK_SET, .dst = SIM_PTR(dst), .value = value, .elem = 1, .n = bytes,
                    .delay_us = delay_us};
    return sim_submit(&w, stream, 0, 0);
}

int simcuda_launch_copy(struct CUstream_st *stream, unsigned long long dst, unsigned long long src,
                        size_t bytes, unsigned delay_us)
{
    SIM_COUNT(launch_calls);
    sim_work_t w = {.kind = SIM_WORK_COPY, .dst = SIM_PTR(dst), .dst_dev = 1, .src = SIM_PTR(src), .src_dev = 1,
                    .n = bytes, .elem = 1, .delay_us = delay_us};
    return sim_submit(&w, stream, 0, 0);
}
