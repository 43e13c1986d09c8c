/* simcuda streams: each stream runs its queued work in order on a worker thread, later than it was
 * queued, so a test can see what a real GPU does to a program that frees memory its queued work
 * still uses.
 *
 * A stream counts the operations queued on it (enq) and those completed (done); operation k has
 * run once done >= k. An operation may also wait for other streams, each wait a (stream, k) pair
 * taken when it was queued, so every wait points at earlier work and waits can never form a cycle.
 * The implicit waits follow NVIDIA's "Stream synchronization behavior" (CUDA Driver API, section
 * 3): "When an action is taken in the legacy stream such as a kernel launch or cudaStreamWaitEvent(),
 * the legacy stream first waits on all blocking streams, the action is queued in the legacy stream,
 * and then all blocking streams wait on the legacy stream"; streams made with
 * CU_STREAM_NON_BLOCKING do neither. The per-thread default stream "is not a non-blocking stream and
 * will synchronize with the legacy default stream if both are used in a program", and otherwise, like
 * an explicitly created stream, does not synchronise with other streams: here it is a blocking
 * stream of its own per (thread, context).
 *
 * One worker thread per stream while it has work (it exits when the queue empties), and no worker at
 * all on the fast path: an operation with no delay whose stream and waits are idle runs at once in
 * the calling thread, which is how the driver behaved before streams were real, so with
 * SIMCUDA_STREAM_DELAY_US=0 (the default) a program that never asks for a delay sees no change.
 * Stream records are never freed (a destroyed handle stays recognisable, and a worker or a waiter
 * never holds a dangling pointer). Lock order: sim_lock, then sim_stream_mu; sim_stream_mu is never
 * held while work runs, and no one waits for a stream while holding sim_lock.
 */
#define _GNU_SOURCE
#include "sim_internal.h"
#include "sim_stream.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

pthread_mutex_t sim_stream_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t sim_stream_cv = PTHREAD_COND_INITIALIZER;
static sim_stream_t *sim_all;             /* under sim_stream_mu */

#define SIM_GATES 1024
static unsigned char sim_gate_opened[SIM_GATES]; /* under sim_stream_mu */
static unsigned sim_gate_next = 1;

/* The calling thread's per-thread default streams, one per context it used. */
#define SIM_PT_MAX 16
static __thread struct {
    sim_ctx_t *ctx;
    sim_stream_t *s;
} tls_pt[SIM_PT_MAX];
static __thread int tls_pt_n;
static pthread_key_t sim_pt_key;
static pthread_once_t sim_pt_once = PTHREAD_ONCE_INIT;

/* A thread that exits takes its per-thread streams with it (their queued work still runs). */
static void sim_pt_exit(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&sim_stream_mu);
    for (int i = 0; i < tls_pt_n; i++)
        tls_pt[i].s->alive = 0;
    tls_pt_n = 0;
    pthread_mutex_unlock(&sim_stream_mu);
}

static void sim_pt_key_make(void) { pthread_key_create(&sim_pt_key, sim_pt_exit); }

static int sim_blocking(const sim_stream_t *s)
{
    return s->kind != SIM_LEGACY && !(s->flags & CU_STREAM_NON_BLOCKING);
}

static int sim_idle_locked(const sim_stream_t *s) { return s->done == s->enq; }

int sim_dep_done(const sim_dep_t *d) { return d->s->done >= d->seq; }

static sim_stream_t *sim_stream_new_locked(sim_ctx_t *c, int kind, unsigned flags)
{
    sim_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    static unsigned long long ids;
    *s = (sim_stream_t){.ctx = c, .kind = kind, .flags = flags, .alive = 1, .all_next = sim_all,
                        .id = ++ids};
    sim_all = s;
    if (kind != SIM_LEGACY) {
        s->listed = 1;
        s->ctx_next = c->streams;
        c->streams = s;
    }
    return s;
}

/* Drops from c's list the streams that can neither be used nor have work left; returns how many
 * remain (the most implicit waits an operation on the legacy stream can have). */
static int sim_ctx_prune_locked(sim_ctx_t *c)
{
    int n = 0;
    for (sim_stream_t **pp = &c->streams; *pp;) {
        sim_stream_t *t = *pp;
        if (!t->alive && sim_idle_locked(t) && !t->runner) {
            *pp = t->ctx_next;
            t->listed = 0;
        } else {
            pp = &t->ctx_next;
            n++;
        }
    }
    return n;
}

static sim_stream_t *sim_legacy_locked(sim_ctx_t *c)
{
    if (!c->legacy)
        c->legacy = sim_stream_new_locked(c, SIM_LEGACY, 0);
    return c->legacy;
}

static sim_stream_t *sim_per_thread_locked(sim_ctx_t *c)
{
    int slot = -1;
    for (int i = 0; i < tls_pt_n; i++) {
        if (tls_pt[i].ctx == c && tls_pt[i].s->alive)
            return tls_pt[i].s;
        if (tls_pt[i].ctx == c || !tls_pt[i].s->alive)
            slot = i; /* a stream its context's reset or destruction ended */
    }
    if (slot < 0 && tls_pt_n == SIM_PT_MAX)
        slot = 0; /* more contexts than slots: the oldest one's stream is forgotten, not its work */
    sim_stream_t *s = sim_stream_new_locked(c, SIM_PER_THREAD, 0);
    if (!s)
        return NULL;
    pthread_once(&sim_pt_once, sim_pt_key_make);
    pthread_setspecific(sim_pt_key, (void *)1);
    if (slot < 0)
        slot = tls_pt_n++;
    else
        tls_pt[slot].s->alive = 0;
    tls_pt[slot].ctx = c;
    tls_pt[slot].s = s;
    return s;
}

static sim_stream_t *sim_created_locked(CUstream h)
{
    for (sim_stream_t *p = sim_all; p; p = p->all_next)
        if (p == (sim_stream_t *)h)
            return p->kind == SIM_CREATED && p->alive ? p : NULL;
    return NULL;
}

int sim_stream_ok(CUstream h)
{
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
        return 1;
    pthread_mutex_lock(&sim_stream_mu);
    int ok = sim_created_locked(h) != NULL;
    pthread_mutex_unlock(&sim_stream_mu);
    return ok;
}

CUresult sim_stream_resolve(CUstream h, int per_thread, sim_ctx_t *c, sim_stream_t **out)
{
    pthread_mutex_lock(&sim_stream_mu);
    sim_stream_t *s;
    CUresult r = CUDA_SUCCESS;
    if (h == CU_STREAM_PER_THREAD || (h == NULL && per_thread))
        r = (s = sim_per_thread_locked(c)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    else if (h == NULL || h == CU_STREAM_LEGACY)
        r = (s = sim_legacy_locked(c)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    else
        r = (s = sim_created_locked(h)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&sim_stream_mu);
    *out = s;
    return r;
}

sim_ctx_t *sim_stream_ctx(const sim_stream_t *s) { return s->ctx; }

/* A created stream carries its context: it is found with or without a current context, and acts
 * in its own (cuMemAllocAsync: "The allocation comes from the memory pool current to the stream's
 * device", CUDA_ERROR_INVALID_CONTEXT only for a "default stream specified with no current
 * context"; cuStreamGetCtx: a created stream names its context whatever is current). The special
 * handles name the current context's streams, and need one. */
CUresult sim_stream_here(CUstream h, int per_thread, sim_ctx_t **cp, sim_stream_t **out)
{
    sim_ctx_t *c;
    if (h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
        CUresult r = sim_check_init();
        if (r == CUDA_SUCCESS)
            r = sim_stream_resolve(h, per_thread, NULL, out);
        if (r == CUDA_SUCCESS && cp)
            *cp = (*out)->ctx;
        return r;
    }
    CUresult r = sim_current(&c);
    if (cp)
        *cp = c;
    return r == CUDA_SUCCESS ? sim_stream_resolve(h, per_thread, c, out) : r;
}

/* ---- running the queues ---- */

/* Microseconds an operation takes before it acts: only work that touches memory is delayed. */
static unsigned long long sim_work_delay(const sim_work_t *w)
{
    int timed = w->kind == SIM_WORK_COPY || w->kind == SIM_WORK_SET || w->kind == SIM_WORK_FREE;
    return timed ? sim_cfg.stream_delay_us + w->delay_us : 0;
}

static void sim_sleep_us(unsigned long long us)
{
    struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&t, &t) != 0 && errno == EINTR)
        ;
}

static int sim_op_ready_locked(const sim_op_t *op)
{
    for (int i = 0; i < op->ndeps; i++)
        if (!sim_dep_done(&op->deps[i]))
            return 0;
    return 1;
}

/* Runs one operation, no lock held. A copy, set or free whose memory is gone by now (freed under it)
 * is skipped and counted as a stream fault: the host memory behind it is never touched. */
static CUresult sim_op_exec(sim_op_t *op)
{
    const sim_work_t *w = &op->w;
    unsigned long long us = sim_work_delay(w);
    if (us)
        sim_sleep_us(us);
    CUresult r = CUDA_SUCCESS;
    switch (w->kind) {
    case SIM_WORK_MARK:
        break;
    case SIM_WORK_EVENT:
        pthread_mutex_lock(&sim_stream_mu);
        sim_event_stamp_locked(w->ev, w->gen);
        pthread_mutex_unlock(&sim_stream_mu);
        break;
    case SIM_WORK_GATE:
        pthread_mutex_lock(&sim_stream_mu);
        while (!sim_gate_opened[w->gate])
            pthread_cond_wait(&sim_stream_cv, &sim_stream_mu);
        pthread_mutex_unlock(&sim_stream_mu);
        break;
    case SIM_WORK_FREE:
        r = sim_free_queued(w->ptr);
        break;
    default:
        r = sim_work_run(w);
    }
    if (r != CUDA_SUCCESS)
        SIM_COUNT(stream_faults);
    return r;
}

/* The head of s has run: it leaves the queue, and everyone waiting on streams looks again. */
static void sim_finish_head_locked(sim_stream_t *s)
{
    sim_op_t *op = s->head;
    s->head = op->next;
    if (!s->head)
        s->tail = NULL;
    s->done++;
    SIM_COUNT(stream_ops_done);
    if (op->sync)
        op->finished = 1;
    else
        free(op);
    pthread_cond_broadcast(&sim_stream_cv);
}

/* Runs s's queue until it is empty; the caller has set s->runner. */
static void sim_run_locked(sim_stream_t *s)
{
    while (s->head) {
        sim_op_t *op = s->head;
        while (!sim_op_ready_locked(op))
            pthread_cond_wait(&sim_stream_cv, &sim_stream_mu);
        pthread_mutex_unlock(&sim_stream_mu);
        op->result = sim_op_exec(op);
        pthread_mutex_lock(&sim_stream_mu);
        sim_finish_head_locked(s);
    }
    s->runner = 0;
}

static void *sim_worker(void *arg)
{
    pthread_mutex_lock(&sim_stream_mu);
    sim_run_locked(arg);
    pthread_mutex_unlock(&sim_stream_mu);
    return NULL;
}

/* Gives s a worker if it has work and none. Workers block every signal (they are the driver's
 * threads, not the program's). Without a thread the caller runs the queue itself. */
static void sim_kick_locked(sim_stream_t *s)
{
    if (s->runner || !s->head)
        return;
    s->runner = 1;
    pthread_attr_t a;
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&t, &a, sim_worker, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    if (e != 0)
        sim_run_locked(s);
}

static void sim_add_dep(sim_op_t *op, sim_stream_t *t, unsigned long long seq)
{
    if (t->done < seq)
        op->deps[op->ndeps++] = (sim_dep_t){t, seq};
}

/* The waits an operation queued on s now has: *wait, and the legacy stream's implicit ones. */
static void sim_collect_deps_locked(sim_stream_t *s, const sim_dep_t *wait, sim_op_t *op)
{
    if (wait)
        sim_add_dep(op, wait->s, wait->seq);
    if (s->kind == SIM_LEGACY) {
        for (sim_stream_t *t = s->ctx->streams; t; t = t->ctx_next)
            if (sim_blocking(t))
                sim_add_dep(op, t, t->enq);
    } else if (sim_blocking(s) && s->ctx->legacy) {
        sim_add_dep(op, s->ctx->legacy, s->ctx->legacy->enq);
    }
}

CUresult sim_stream_submit(sim_stream_t *s, const sim_work_t *w, const sim_dep_t *wait, int sync,
                           unsigned long long *seq)
{
    pthread_mutex_lock(&sim_stream_mu);
    int cap = 1 + (s->kind == SIM_LEGACY ? sim_ctx_prune_locked(s->ctx) : 1);
    sim_op_t *op = calloc(1, sizeof *op + (size_t)cap * sizeof(sim_dep_t));
    if (!op) {
        pthread_mutex_unlock(&sim_stream_mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->w = *w;
    op->sync = sync;
    sim_collect_deps_locked(s, wait, op);
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    if (seq)
        *seq = s->enq + 1;
    s->enq++;
    SIM_COUNT(stream_ops);
    int now = !s->runner && s->head == op && w->kind != SIM_WORK_GATE && sim_work_delay(w) == 0 &&
              sim_op_ready_locked(op);
    if (now) {
        /* The fast path: runs here and now, as the driver did before streams were real. */
        s->runner = 1;
        pthread_mutex_unlock(&sim_stream_mu);
        op->result = sim_op_exec(op);
        pthread_mutex_lock(&sim_stream_mu);
        sim_finish_head_locked(s);
        s->runner = 0;
    } else {
        SIM_COUNT(stream_ops_deferred);
    }
    sim_kick_locked(s);
    CUresult r = CUDA_SUCCESS;
    if (sync) {
        while (!op->finished)
            pthread_cond_wait(&sim_stream_cv, &sim_stream_mu);
        r = op->result;
        free(op);
    }
    pthread_mutex_unlock(&sim_stream_mu);
    return r;
}

void sim_stream_wait_dep(const sim_dep_t *d)
{
    pthread_mutex_lock(&sim_stream_mu);
    while (!sim_dep_done(d))
        pthread_cond_wait(&sim_stream_cv, &sim_stream_mu);
    pthread_mutex_unlock(&sim_stream_mu);
}

/* Waits until t has completed what it had queued when the wait began; 1 if it had to wait. */
static int sim_wait_stream_locked(sim_stream_t *t)
{
    unsigned long long seq = t->enq;
    int waited = t->done < seq;
    while (t->done < seq)
        pthread_cond_wait(&sim_stream_cv, &sim_stream_mu);
    return waited;
}

void sim_streams_drain_ctx(const sim_ctx_t *c)
{
    pthread_mutex_lock(&sim_stream_mu);
    if (c->legacy)
        sim_wait_stream_locked(c->legacy);
    for (sim_stream_t *t = c->streams; t; t = t->ctx_next)
        sim_wait_stream_locked(t);
    pthread_mutex_unlock(&sim_stream_mu);
}

int sim_streams_drain_dev(int dev)
{
    int waited = 0;
    pthread_mutex_lock(&sim_stream_mu);
    for (sim_stream_t *t = sim_all; t; t = t->all_next)
        if (t->ctx->dev == dev)
            waited |= sim_wait_stream_locked(t);
    pthread_mutex_unlock(&sim_stream_mu);
    return waited;
}

void sim_streams_forget_ctx(const sim_ctx_t *c)
{
    pthread_mutex_lock(&sim_stream_mu);
    for (sim_stream_t *t = c->streams; t; t = t->ctx_next)
        t->alive = 0;
    pthread_mutex_unlock(&sim_stream_mu);
    sim_events_forget_ctx(c); /* REALDRV: the context's events die with it */
}

/* fork: the child has none of the workers, so it starts with every queue empty (its parent's
 * queued work is the parent's; CUDA is not usable in a forked child anyway). */
void sim_stream_fork_prepare(void) { pthread_mutex_lock(&sim_stream_mu); }
void sim_stream_fork_parent(void) { pthread_mutex_unlock(&sim_stream_mu); }

void sim_stream_fork_child(void)
{
    for (sim_stream_t *t = sim_all; t; t = t->all_next) {
        while (t->head) {
            sim_op_t *op = t->head;
            t->head = op->next;
            if (!op->sync)
                free(op);
        }
        t->tail = NULL;
        t->done = t->enq;
        t->runner = 0;
    }
    pthread_cond_init(&sim_stream_cv, NULL);
    pthread_mutex_unlock(&sim_stream_mu);
}

/* ---- the stream entry points ---- */

static CUresult sim_stream_create(CUstream *ph, unsigned flags)
{
    sim_ctx_t *c;
    CUresult r = sim_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_stream_mu);
    sim_ctx_prune_locked(c);
    sim_stream_t *s = sim_stream_new_locked(c, SIM_CREATED, flags);
    pthread_mutex_unlock(&sim_stream_mu);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    SIM_ENTER(cuStreamCreate);
    return sim_stream_create(phStream, flags);
}

/* Priorities order nothing here: every stream has its own worker. */
CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    SIM_ENTER(cuStreamCreateWithPriority);
    (void)priority;
    return sim_stream_create(phStream, flags);
}

/* "In case the device is still doing work in the stream hStream when cuStreamDestroy() is called,
 * the function will return immediately and the resources associated with hStream will be released
 * automatically once the device has completed all work in hStream" (cuStreamDestroy's
 * documentation): the handle dies now, its queued work still runs. */
static CUresult sim_stream_destroy(CUstream h)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_stream_mu);
    sim_stream_t *s = h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD ? NULL : sim_created_locked(h);
    if (s)
        s->alive = 0;
    pthread_mutex_unlock(&sim_stream_mu);
    return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Synchronising the legacy stream is a no-op queued on it and waited for: it comes after the
 * blocking streams' earlier work, as anything queued there does. Other streams: their own work. */
static CUresult sim_stream_sync(CUstream h, int per_thread)
{
    sim_stream_t *s;
    CUresult r = sim_stream_here(h, per_thread, NULL, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_ctx_capture_check(s->ctx, s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s->kind == SIM_LEGACY) {
        sim_work_t w = {.kind = SIM_WORK_MARK};
        r = sim_stream_submit(s, &w, NULL, 1, NULL);
    } else {
        pthread_mutex_lock(&sim_stream_mu);
        sim_wait_stream_locked(s);
        pthread_mutex_unlock(&sim_stream_mu);
    }
    if (r == CUDA_SUCCESS)
        sim_pools_settle();
    return r;
}

static CUresult sim_stream_query(CUstream h, int per_thread)
{
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_stream_here(h, per_thread, &c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (sim_ctx_capture_check(c, s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    pthread_mutex_lock(&sim_stream_mu);
    int idle = sim_idle_locked(s);
    for (sim_stream_t *t = s->kind == SIM_LEGACY ? c->streams : NULL; t; t = t->ctx_next)
        idle &= !sim_blocking(t) || sim_idle_locked(t);
    pthread_mutex_unlock(&sim_stream_mu);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

/* The stream's ID, as the real driver's: a per-thread stream's is its own in each thread. */
static CUresult sim_stream_get_id(CUstream h, unsigned long long *id, int per_thread)
{
    sim_stream_t *s;
    CUresult r = sim_stream_here(h, per_thread, NULL, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_stream_mu);
    *id = s->id;
    pthread_mutex_unlock(&sim_stream_mu);
    return CUDA_SUCCESS;
}

/* "Specifying any of the special handles will return the context current to the calling thread"
 * (cuStreamGetCtx's documentation); a created stream names the context current when it was made,
 * with or without a current context now. A destroyed stream (its context's too) is refused
 * (INVALID_HANDLE), where the real driver's behaviour is undefined. */
static CUresult sim_stream_get_ctx(CUstream h, CUcontext *pctx)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    sim_ctx_t *c = NULL;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        r = sim_current(&c);
    } else {
        pthread_mutex_lock(&sim_stream_mu);
        sim_stream_t *s = sim_created_locked(h);
        c = s ? s->ctx : NULL;
        pthread_mutex_unlock(&sim_stream_mu);
        r = c ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    }
    if (r == CUDA_SUCCESS && !pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *pctx = (CUcontext)c;
    return r;
}

SIM_WRAP(cuStreamGetCtx, sim_stream_get_ctx, (CUstream hStream, CUcontext *pctx), (hStream, pctx))
SIM_WRAP(cuStreamGetCtx_ptsz, sim_stream_get_ctx, (CUstream hStream, CUcontext *pctx), (hStream, pctx))
SIM_WRAP(cuStreamGetId, sim_stream_get_id, (CUstream hStream, unsigned long long *streamId),
         (hStream, streamId, 0))
SIM_WRAP(cuStreamGetId_ptsz, sim_stream_get_id, (CUstream hStream, unsigned long long *streamId),
         (hStream, streamId, 1))
SIM_WRAP(cuStreamDestroy, sim_stream_destroy, (CUstream hStream), (hStream))
SIM_WRAP(cuStreamDestroy_v2, sim_stream_destroy, (CUstream hStream), (hStream))
SIM_WRAP(cuStreamSynchronize, sim_stream_sync, (CUstream hStream), (hStream, 0))
SIM_WRAP(cuStreamSynchronize_ptsz, sim_stream_sync, (CUstream hStream), (hStream, 1))
SIM_WRAP(cuStreamQuery, sim_stream_query, (CUstream hStream), (hStream, 0))
SIM_WRAP(cuStreamQuery_ptsz, sim_stream_query, (CUstream hStream), (hStream, 1))

/* ---- test instruments (simcuda.h) ---- */

int simcuda_gate(struct CUstream_st *stream, unsigned *gate)
{
    sim_ctx_t *c;
    sim_stream_t *s;
    CUresult r = sim_current(&c);
    if (r == CUDA_SUCCESS && !gate)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = sim_stream_resolve(stream, 0, c, &s);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&sim_stream_mu);
    unsigned g = sim_gate_next < SIM_GATES ? sim_gate_next++ : 0;
    pthread_mutex_unlock(&sim_stream_mu);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *gate = g;
    sim_work_t w = {.kind = SIM_WORK_GATE, .gate = g};
    return sim_stream_submit(s, &w, NULL, 0, NULL);
}

static unsigned sim_hold_gate; /* under sim_stream_mu: the gate the next async allocation waits for */

int simcuda_hold_next_async_alloc(unsigned *gate)
{
    if (!gate)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_stream_mu);
    unsigned g = sim_gate_next < SIM_GATES ? sim_gate_next++ : 0;
    if (g)
        sim_hold_gate = g;
    pthread_mutex_unlock(&sim_stream_mu);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *gate = g;
    return CUDA_SUCCESS;
}

void sim_hold_async_alloc(void)
{
    pthread_mutex_lock(&sim_stream_mu);
    unsigned g = sim_hold_gate;
    sim_hold_gate = 0;
    while (g && !sim_gate_opened[g])
        pthread_cond_wait(&sim_stream_cv, &sim_stream_mu);
    pthread_mutex_unlock(&sim_stream_mu);
}

static unsigned sim_hold_td_gate; /* under sim_stream_mu: the gate the next context teardown waits for */

int simcuda_hold_next_ctx_teardown(unsigned *gate)
{
    if (!gate)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_stream_mu);
    unsigned g = sim_gate_next < SIM_GATES ? sim_gate_next++ : 0;
    if (g)
        sim_hold_td_gate = g;
    pthread_mutex_unlock(&sim_stream_mu);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *gate = g;
    return CUDA_SUCCESS;
}

void sim_hold_ctx_teardown(void)
{
    pthread_mutex_lock(&sim_stream_mu);
    unsigned g = sim_hold_td_gate;
    sim_hold_td_gate = 0;
    while (g && !sim_gate_opened[g])
        pthread_cond_wait(&sim_stream_cv, &sim_stream_mu);
    pthread_mutex_unlock(&sim_stream_mu);
}

static unsigned sim_hold_pq_gate; /* under sim_stream_mu: the gate the next pool query waits for */

/* A new gate in *gate, armed in *slot (a hold's "next call waits for this gate"). */
static int sim_gate_arm(unsigned *slot, unsigned *gate)
{
    if (!gate)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_stream_mu);
    unsigned g = sim_gate_next < SIM_GATES ? sim_gate_next++ : 0;
    if (g)
        *slot = g;
    pthread_mutex_unlock(&sim_stream_mu);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *gate = g;
    return CUDA_SUCCESS;
}

int simcuda_hold_next_pool_query(unsigned *gate)
{
    return sim_gate_arm(&sim_hold_pq_gate, gate);
}

void sim_hold_pool_query(void)
{
    pthread_mutex_lock(&sim_stream_mu);
    unsigned g = sim_hold_pq_gate;
    sim_hold_pq_gate = 0;
    while (g && !sim_gate_opened[g])
        pthread_cond_wait(&sim_stream_cv, &sim_stream_mu);
    pthread_mutex_unlock(&sim_stream_mu);
}

static unsigned sim_hold_cs_gate; /* under sim_stream_mu: the gate the next cuCtxSynchronize waits for */
static const void *sim_hold_cs_ctx; /* and the context it must name (NULL: any) */
static unsigned sim_cs_waiting;   /* under sim_stream_mu: the gate a cuCtxSynchronize waits at now */

int simcuda_hold_next_ctx_sync(struct CUctx_st *ctx, unsigned *gate)
{
    if (!gate)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_stream_mu);
    unsigned g = sim_gate_next < SIM_GATES ? sim_gate_next++ : 0;
    if (g) {
        sim_hold_cs_gate = g;
        sim_hold_cs_ctx = ctx;
    }
    pthread_mutex_unlock(&sim_stream_mu);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *gate = g;
    return CUDA_SUCCESS;
}

void sim_hold_ctx_sync(const void *ctx)
{
    pthread_mutex_lock(&sim_stream_mu);
    unsigned g = sim_hold_cs_gate;
    if (g && sim_hold_cs_ctx && sim_hold_cs_ctx != ctx)
        g = 0; /* another context's: the hold stays armed */
    else
        sim_hold_cs_gate = 0;
    if (g)
        sim_cs_waiting = g;
    while (g && !sim_gate_opened[g])
        pthread_cond_wait(&sim_stream_cv, &sim_stream_mu);
    if (g)
        sim_cs_waiting = 0;
    pthread_mutex_unlock(&sim_stream_mu);
}

static unsigned sim_hold_im_gate, sim_im_waiting; /* under sim_stream_mu: simcuda_hold_next_import */

int simcuda_hold_next_import(unsigned *gate)
{
    return sim_gate_arm(&sim_hold_im_gate, gate);
}

static void sim_hold_import_cancelled(void *arg)
{
    (void)arg;
    sim_im_waiting = 0;
    pthread_mutex_unlock(&sim_stream_mu);
}

/* A thread cancelled while it waits here (the wait is a cancellation point, as a real driver's may
 * be) leaves the gates usable. */
void sim_hold_import(void)
{
    pthread_mutex_lock(&sim_stream_mu);
    unsigned g = sim_hold_im_gate;
    sim_hold_im_gate = 0;
    sim_im_waiting = g;
    pthread_cleanup_push(sim_hold_import_cancelled, NULL);
    while (g && !sim_gate_opened[g])
        pthread_cond_wait(&sim_stream_cv, &sim_stream_mu);
    pthread_cleanup_pop(1);
}

int simcuda_import_held(unsigned gate)
{
    pthread_mutex_lock(&sim_stream_mu);
    int held = gate && sim_im_waiting == gate;
    pthread_mutex_unlock(&sim_stream_mu);
    return held;
}

int simcuda_ctx_sync_held(unsigned gate)
{
    pthread_mutex_lock(&sim_stream_mu);
    int held = gate && sim_cs_waiting == gate;
    pthread_mutex_unlock(&sim_stream_mu);
    return held;
}

void simcuda_gate_open(unsigned gate)
{
    pthread_mutex_lock(&sim_stream_mu);
    if (gate < SIM_GATES)
        sim_gate_opened[gate] = 1;
    pthread_cond_broadcast(&sim_stream_cv);
    pthread_mutex_unlock(&sim_stream_mu);
}
