/* simcuda events: cuEventCreate/Destroy/Record/Query/Synchronize/ElapsedTime and cuStreamWaitEvent,
 * over the stream queues of sim_stream.c.
 *
 * Recording an event queues a marker on the stream; the event stands for "that stream has completed
 * the marker", a (stream, count) pair, so querying, synchronising and waiting on it (another stream's
 * operation depending on the pair) need nothing else. The marker stamps the time when it runs, for
 * cuEventElapsedTime. Re-recording moves the pair; each record has a generation number, so a marker
 * from an older record never stamps a newer one, and a destroyed event's record can be reused at
 * once. Records live in slabs that are never freed: a destroyed or foreign handle is recognised
 * (CUDA_ERROR_INVALID_HANDLE) by looking it up in the slabs, never dereferenced blindly. A
 * context's events die with it (destroy, reset, last primary release), and their records go first
 * on the free list, so the next cuEventCreate returns a dead event's handle, as the real driver
 * may. All event state is under sim_stream_mu.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

struct sim_event {
    int alive;
    unsigned flags;
    sim_ctx_t *ctx;              /* current at cuEventCreate: only its streams may record it */
    sim_dep_t rec;               /* the last record; rec.s NULL: never recorded */
    unsigned long long gen;      /* of the last record */
    unsigned long long t_ns;     /* when its marker ran (stamped) */
    int stamped;
    sim_event_t *free_next;
};

#define SIM_SLAB 256
typedef struct sim_slab {
    struct sim_slab *next;
    sim_event_t ev[SIM_SLAB];
} sim_slab_t;

static sim_slab_t *sim_slabs;
static sim_event_t *sim_free_events;
static unsigned long long sim_event_gen;

/* The live event a handle names, or NULL. */
static sim_event_t *sim_event_locked(CUevent h)
{
    const sim_event_t *e = (const sim_event_t *)h;
    for (sim_slab_t *s = sim_slabs; s && e; s = s->next) {
        if (e < s->ev || e >= s->ev + SIM_SLAB)
            continue;
        size_t off = (size_t)((const char *)e - (const char *)s->ev);
        return off % sizeof *e == 0 && s->ev[off / sizeof *e].alive ? &s->ev[off / sizeof *e] : NULL;
    }
    return NULL;
}

static sim_event_t *sim_event_take_locked(void)
{
    if (!sim_free_events) {
        sim_slab_t *s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        s->next = sim_slabs;
        sim_slabs = s;
        for (int i = SIM_SLAB; i-- > 0;) {
            s->ev[i].free_next = sim_free_events;
            sim_free_events = &s->ev[i];
        }
    }
    sim_event_t *e = sim_free_events;
    sim_free_events = e->free_next;
    return e;
}

void sim_event_stamp_locked(sim_event_t *ev, unsigned long long gen)
{
    if (ev->gen != gen)
        return;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    ev->t_ns = (unsigned long long)t.tv_sec * 1000000000ULL + (unsigned long long)t.tv_nsec;
    ev->stamped = 1;
}

/* Copies what a handle's last record says, checking the handle: INVALID_HANDLE for a bad one. */
static CUresult sim_event_get(CUevent h, sim_event_t *copy)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_stream_mu);
    sim_event_t *e = sim_event_locked(h);
    if (e)
        *copy = *e;
    pthread_mutex_unlock(&sim_stream_mu);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    SIM_ENTER(cuEventCreate);
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    /* "CU_EVENT_INTERPROCESS ... CU_EVENT_DISABLE_TIMING must be set" (cuda.h, CUevent_flags) */
    if (!phEvent || (Flags & ~known) ||
        ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_stream_mu);
    sim_event_t *e = sim_event_take_locked();
    if (e)
        *e = (sim_event_t){.alive = 1, .flags = Flags, .ctx = c};
    pthread_mutex_unlock(&sim_stream_mu);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

/* "In case hEvent has been recorded but has not yet been completed when cuEventDestroy() is called,
 * the function will return immediately and the resources associated with hEvent will be released
 * automatically once the device has completed hEvent" (cuEventDestroy's documentation): the
 * pending marker belongs to an old generation, so the record may serve a new event at once. */
static CUresult sim_event_destroy(CUevent h)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_stream_mu);
    sim_event_t *e = sim_event_locked(h);
    if (e) {
        e->alive = 0;
        e->gen = 0;
        e->free_next = sim_free_events;
        sim_free_events = e;
    }
    pthread_mutex_unlock(&sim_stream_mu);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* "hEvent and hStream must be from the same context otherwise CUDA_ERROR_INVALID_HANDLE is
 * returned" (cuEventRecord's documentation): an event of another context than the stream's (the
 * legacy and per-thread streams are the current context's) is refused and keeps its last record. */
static CUresult sim_event_record(CUevent h, CUstream hs, int per_thread)
{
    sim_stream_t *s;
    CUresult r = sim_stream_here(hs, per_thread, NULL, &s);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_stream_mu);
    sim_event_t *e = sim_event_locked(h);
    if (e && e->ctx != sim_stream_ctx(s))
        e = NULL;
    unsigned long long gen = ++sim_event_gen;
    if (e) {
        /* not complete until the marker's number is known: a query meanwhile says NOT_READY */
        e->gen = gen;
        e->rec = (sim_dep_t){s, ~0ULL};
        e->stamped = 0;
    }
    pthread_mutex_unlock(&sim_stream_mu);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_work_t w = {.kind = SIM_WORK_EVENT, .ev = e, .gen = gen};
    unsigned long long seq = 0;
    r = sim_stream_submit(s, &w, NULL, 0, &seq);
    pthread_mutex_lock(&sim_stream_mu);
    if (e->gen == gen)
        e->rec.seq = r == CUDA_SUCCESS ? seq : 0;
    pthread_mutex_unlock(&sim_stream_mu);
    return r;
}

/* "If cuEventRecord() has not been called on this event, the function returns CUDA_SUCCESS"
 * (cuEventQuery's documentation; cuEventSynchronize likewise returns at once). */
static CUresult sim_event_query(CUevent h)
{
    sim_event_t e;
    CUresult r = sim_event_get(h, &e);
    if (r != CUDA_SUCCESS || !e.rec.s)
        return r;
    pthread_mutex_lock(&sim_stream_mu);
    int done = sim_dep_done(&e.rec);
    pthread_mutex_unlock(&sim_stream_mu);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult sim_event_sync(CUevent h)
{
    sim_event_t e;
    CUresult r = sim_event_get(h, &e);
    if (r != CUDA_SUCCESS || !e.rec.s)
        return r;
    for (;;) {
        /* a record whose marker number is not known yet: wait for it, then for the marker */
        if (e.rec.seq != ~0ULL) {
            sim_stream_wait_dep(&e.rec);
            sim_pools_settle();
            return CUDA_SUCCESS;
        }
        sched_yield();
        if ((r = sim_event_get(h, &e)) != CUDA_SUCCESS || !e.rec.s)
            return r;
    }
}

/* An event never recorded makes the wait a no-op; on the legacy stream the wait is still an action
 * that orders the blocking streams around it (NVIDIA names cudaStreamWaitEvent as one). */
static CUresult sim_stream_wait_event(CUstream hs, CUevent h, unsigned flags, int per_thread)
{
    sim_ctx_t *c;
    sim_stream_t *s;
    sim_event_t e;
    CUresult r = sim_current(&c);
    if (r == CUDA_SUCCESS)
        r = sim_stream_resolve(hs, per_thread, c, &s);
    if (r == CUDA_SUCCESS)
        r = sim_event_get(h, &e);
    if (r == CUDA_SUCCESS && (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        return r;
    sim_work_t w = {.kind = SIM_WORK_MARK};
    return sim_stream_submit(s, &w, e.rec.s ? &e.rec : NULL, 0, NULL);
}

/* Both recorded with timing, both complete: milliseconds from start to end. */
static CUresult sim_event_elapsed(float *ms, CUevent start, CUevent end)
{
    sim_event_t a, b;
    CUresult r = sim_event_get(start, &a);
    if (r == CUDA_SUCCESS)
        r = sim_event_get(end, &b);
    if (r != CUDA_SUCCESS)
        return r;
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    if (!a.rec.s || !b.rec.s || ((a.flags | b.flags) & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!a.stamped || !b.stamped)
        return CUDA_ERROR_NOT_READY;
    *ms = (float)((double)(long long)(b.t_ns - a.t_ns) / 1e6);
    return CUDA_SUCCESS;
}

SIM_WRAP(cuEventDestroy, sim_event_destroy, (CUevent hEvent), (hEvent))
SIM_WRAP(cuEventDestroy_v2, sim_event_destroy, (CUevent hEvent), (hEvent))
SIM_WRAP(cuEventRecord, sim_event_record, (CUevent hEvent, CUstream hStream), (hEvent, hStream, 0))
SIM_WRAP(cuEventRecord_ptsz, sim_event_record, (CUevent hEvent, CUstream hStream), (hEvent, hStream, 1))
SIM_WRAP(cuEventQuery, sim_event_query, (CUevent hEvent), (hEvent))
SIM_WRAP(cuEventSynchronize, sim_event_sync, (CUevent hEvent), (hEvent))
SIM_WRAP(cuStreamWaitEvent, sim_stream_wait_event, (CUstream hStream, CUevent hEvent, unsigned int Flags),
         (hStream, hEvent, Flags, 0))
SIM_WRAP(cuStreamWaitEvent_ptsz, sim_stream_wait_event,
         (CUstream hStream, CUevent hEvent, unsigned int Flags), (hStream, hEvent, Flags, 1))
SIM_WRAP(cuEventElapsedTime, sim_event_elapsed, (float *pMilliseconds, CUevent hStart, CUevent hEnd),
         (pMilliseconds, hStart, hEnd))
SIM_WRAP(cuEventElapsedTime_v2, sim_event_elapsed, (float *pMilliseconds, CUevent hStart, CUevent hEnd),
         (pMilliseconds, hStart, hEnd))

/* REALDRV: "cuCtxDestroy ... destroys and cleans up all resources associated with the context":
 * its events are destroyed, and their records reused by the next cuEventCreate (as freed heap
 * memory is by the real driver). */
unsigned long long simcuda_live_events(struct CUctx_st *ctx)
{
    unsigned long long n = 0;
    pthread_mutex_lock(&sim_stream_mu);
    for (sim_slab_t *s = sim_slabs; s; s = s->next)
        for (int i = 0; i < SIM_SLAB; i++)
            n += s->ev[i].alive && (!ctx || (CUcontext)s->ev[i].ctx == ctx);
    pthread_mutex_unlock(&sim_stream_mu);
    return n;
}

void sim_events_forget_ctx(const sim_ctx_t *c)
{
    pthread_mutex_lock(&sim_stream_mu);
    for (sim_slab_t *s = sim_slabs; s; s = s->next)
        for (int i = 0; i < SIM_SLAB; i++) {
            sim_event_t *e = &s->ev[i];
            if (e->alive && e->ctx == c) {
                e->alive = 0;
                e->gen = 0;
                e->free_next = sim_free_events;
                sim_free_events = e;
            }
        }
    pthread_mutex_unlock(&sim_stream_mu);
}
