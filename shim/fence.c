/* gpuarena stream-ordered safety: freed pool memory is not handed out again while the GPU may still
 * use it (issue "Stream-ordered safety").
 *
 * The driver's cuMemFree may synchronise ("this API may perform implicit synchronization", CUDA
 * Driver API, cuMemFree), and programs rely on it: launch on a stream, free, allocate, copy into
 * the new buffer. A pool free returns the chunk at once, so without a fence the next allocation
 * could receive bytes a queued kernel still reads or writes. So a freed chunk is first *pending*:
 * it stays allocated in the pool (its bytes count as reserved, and as `pending_bytes`) until the
 * device has passed the free, and only then goes back to the pool. Which fence depends on the free:
 *  - cuMemFree_v2, GPUARENA_FREE_SYNC=deferred (the default): no fence at free time. The first
 *    allocation in the context that finds pending chunks synchronises the context once
 *    (cuCtxSynchronize: every stream of the context, blocking or not, so nothing is missed) and
 *    returns them all. A burst of frees costs one synchronisation, taken by the next allocation
 *    (the driver's own cuMemFree pays one per free); a free with no allocation after it costs none.
 *    cuMemGetInfo counts pending bytes as free (they are, to the program), except while a stream
 *    capture runs on the device, when no synchronisation may pass them (ga_fence_capture_held);
 *    those freed before a capture are waited for at its begin (capture.c).
 *  - GPUARENA_FREE_SYNC=lazy: pending as under deferred, but an allocation the pool serves from
 *    memory it holds, none of it pending, does not synchronise (ga_fence_lazy_ok, below).
 *  - GPUARENA_FREE_SYNC=device: each cuMemFree synchronises the context and returns the chunk at
 *    once, as the driver's cuMemFree does: memory (a vmm granule, an empty region) goes back to
 *    the device at the free, at the price of one synchronisation per free.
 *  - GPUARENA_FREE_SYNC=none: the chunk goes back at once, as before this file existed (for
 *    programs that synchronise before they free; unsafe otherwise).
 *  - cuMemFreeAsync(p, S) of a pool pointer (any setting): stream-ordered, as the driver's own
 *    pools are. An event is recorded on S at the free, with no synchronisation; the chunk is
 *    reusable at once by later work on S (a cuMemAllocAsync on S may receive it whole: S runs in
 *    order, so its later work comes after the free), and by anything else once the event shows S
 *    has passed the free. The program's contract for cuMemFreeAsync is that work on other streams
 *    using p was ordered before the free on S, so the event on S is the whole fence. Without an
 *    event (none to be had, or a record the driver refuses) S is synchronised and the chunk goes
 *    back at once.
 * Before an out-of-memory is reported, every pending chunk is waited for (the device
 * synchronised, with the context's lock let go: ctx.c, ga_ctx_give_back) and returned, and the
 * allocation retried.
 * Everything here runs under the context's lock. The events of stream-ordered frees (which
 * context each is made in, and the free list of them), pass-through memory freed with
 * cuMemFreeAsync, a context's entries dropped at its teardown and the program's waits on a stream
 * or an event are in fence_event.c.
 * The pending list is an array; a free asks whether its pointer is already pending (a double
 * free). Between two allocations a program usually frees a few chunks, so up to GA_PEND_SCAN
 * entries that question is a scan of the array, and only a longer list (a burst of frees, a model
 * torn down) is indexed by a pointer table, built when the list outgrows the scan and dropped when
 * it empties. (Indexing every entry cost about 100 instructions per free+alloc pair, a third of
 * the fence's cost in `make bench-shim`.)
 */
#include "shim.h"
#include "fence_internal.h"

#include <stdlib.h>
#include <string.h>

#define GA_PEND_SCAN 16

/* One more slot in c->pend; 0 ok. */
static int ga_pend_grow(ga_ctx_t *c)
{
    if (c->npend < c->cap_pend)
        return 0;
    size_t cap = c->cap_pend ? 2 * c->cap_pend : 64;
    ga_pending_t *p = realloc(c->pend, cap * sizeof *p);
    if (!p)
        return -1;
    c->pend = p;
    c->cap_pend = cap;
    return 0;
}

static void ga_pend_unindex(ga_ctx_t *c)
{
    ga_ptrmap_fini(&c->pend_set);
    memset(&c->pend_set, 0, sizeof c->pend_set);
}

int ga_fence_is_pending(const ga_ctx_t *c, uintptr_t ptr)
{
    if (c->pend_set.count)
        return ga_ptrmap_get(&c->pend_set, ptr) != NULL;
    for (size_t i = 0; i < c->npend; i++)
        if (c->pend[i].ptr == ptr)
            return 1;
    return 0;
}

/* Indexes the pending list once it is longer than a scan should be; 0 ok, -1 out of host memory
 * (the index is then left as it was: complete, or empty and unused). */
static int ga_pend_index(ga_ctx_t *c, uintptr_t ptr, size_t size)
{
    if (!c->pend_set.count && c->npend < GA_PEND_SCAN)
        return 0;
    ga_pentry_t key = {.key = ptr, .size = size};
    if (c->pend_set.count)
        return ga_ptrmap_put(&c->pend_set, &key);
    for (size_t i = 0; i < c->npend; i++) {
        ga_pentry_t e = {.key = c->pend[i].ptr, .size = c->pend[i].size};
        if (ga_ptrmap_put(&c->pend_set, &e) != 0) {
            ga_pend_unindex(c);
            return -1;
        }
    }
    if (ga_ptrmap_put(&c->pend_set, &key) != 0) {
        ga_pend_unindex(c);
        return -1;
    }
    return 0;
}

/* An entry left the list: out of the index too, and the index goes when the list empties. */
static void ga_pend_forget(ga_ctx_t *c, uintptr_t ptr)
{
    if (!c->pend_set.count)
        return;
    if (!c->npend)
        ga_pend_unindex(c);
    else
        ga_ptrmap_take(&c->pend_set, ptr, NULL);
}

/* Returns pending entry i to the pool (swap-remove). */
void ga_pend_release(ga_ctx_t *c, size_t i)
{
    ga_pending_t e = c->pend[i];
    c->pend[i] = c->pend[--c->npend];
    c->pend_gen++;
    ga_pend_forget(c, e.ptr);
    c->pend_bytes -= e.size;
    c->counts.pending_bytes = c->pend_bytes;
    c->npend_ev -= e.ev != NULL;
    if (e.ev)
        ga_pend_ev_note(-1);
    ga_event_put(c, e.ev);
    if (c->pool)
        ga_pool_free(c->pool, e.ptr, NULL);
}

static CUresult ga_fence_sync(ga_ctx_t *c, int current);

/* ga_fence_free for everything but the common case below. */
__attribute__((noinline)) static CUresult ga_fence_free_slow(ga_ctx_t *c, uintptr_t ptr,
                                                             size_t size, CUstream s,
                                                             int stream_ordered, size_t req)
{
    CUevent ev = NULL;
    uint64_t sid = 0;
    /* A cuMemFree under GPUARENA_FREE_SYNC=device reaches here only when its wait for the device,
     * made by the hook with no lock held (alloc.c, ga_free_owned), was refused or not made (a
     * capture under way): the chunk is left pending, for the next allocation's fence. It asked
     * the driver again here, under the context's lock: two calls per free while the driver
     * refused, and when the second was answered it waited for the device with the lock held, so
     * the context's other threads' queries and allocations waited too (an outside check,
     * 2026-12-07; test device_refused_wait_not_retried_under_the_lock). */
    if (stream_ordered) {
        sid = ga_fence_stream_id(s);
        ev = ga_fence_event_for(c, s, sid);
        CUresult r = ev ? ga_real.cuEventRecord(ev, s) : CUDA_ERROR_NOT_SUPPORTED;
        if (r != CUDA_SUCCESS) {
            /* No event (a driver without them, none to be had) or one the driver would not record
             * (out of resources, say): the program's free was right, so the stream synchronised
             * and the chunk back at once (helper-42 F6: the record's error was returned and the
             * block never freed). A stream the driver refuses is refused there too: nothing
             * freed, the driver's answer returned. The caller synchronises, with the lock let go
             * (alloc.c, ga_free_owned): under it, the context's other threads waited for the
             * stream's queued work (h34 F6). */
            ga_event_put(c, ev);
            return GA_FENCE_WAIT_FIRST;
        }
        c->counts.free_events++;
    }
    if (ga_pend_grow(c) != 0 || ga_pend_index(c, ptr, size) != 0) {
        /* No host memory to remember it: wait here as the pending entry would have been waited
         * for, and free at once: its event, or the owner context and its peers (ga_fence_sync),
         * not the current context, which for a free made with another one current is not the
         * owner (helper-49's suspicion, confirmed with hostfail_prog's fence mode). */
        if (ev) { /* the stream synchronised by the caller with the lock let go, as above */
            c->counts.free_events--;
            ga_event_put(c, ev);
            return GA_FENCE_WAIT_FIRST;
        } else if (ga_fence_sync(c, 0) != CUDA_SUCCESS) {
            /* Neither remembered nor waited for (a capture under way, the driver refusing): the
             * chunk stays out of the pool for the context's life rather than be served while
             * the device may still use it. */
            return CUDA_SUCCESS;
        }
        ga_event_put(c, ev);
        ga_pool_free(c->pool, ptr, NULL);
        return CUDA_SUCCESS;
    }
    c->pend[c->npend++] = (ga_pending_t){.ptr = ptr, .size = size, .sid = sid, .ev = ev,
                                         .req = ev ? req : 0, .seq = ev ? ++c->pend_seq : 0};
    c->npend_ev += ev != NULL;
    if (ev)
        ga_pend_ev_note(1);
    c->pend_bytes += size;
    c->counts.pending_bytes = c->pend_bytes;
    if (c->pend_bytes > c->counts.peak_pending_bytes)
        c->counts.peak_pending_bytes = c->pend_bytes;
    return CUDA_SUCCESS;
}

/* The common case is a cuMemFree under GPUARENA_FREE_SYNC=deferred while the list is short and
 * has room: one entry appended, in a function small enough that it saves no registers for the
 * events, the index and the synchronisations of the rare cases. */
CUresult ga_fence_free(ga_ctx_t *c, uintptr_t ptr, size_t size, CUstream s, int stream_ordered,
                       size_t req)
{
    size_t n = c->npend;
    if (GA_LIKELY(!stream_ordered && ga_opt.free_sync <= GA_FREE_SYNC_LAZY &&
                  n < c->cap_pend && n < GA_PEND_SCAN && !c->pend_set.count)) {
        c->pend[n] = (ga_pending_t){.ptr = ptr, .size = size, .sid = 0, .ev = NULL};
        c->npend = n + 1;
        uint64_t bytes = c->pend_bytes + size;
        c->pend_bytes = bytes;
        c->counts.pending_bytes = bytes;
        c->counts.peak_pending_bytes = bytes > c->counts.peak_pending_bytes
                                           ? bytes : c->counts.peak_pending_bytes;
        return CUDA_SUCCESS;
    }
    return ga_fence_free_slow(c, ptr, size, s, stream_ordered, req);
}

/* The synchronisation that passes every cuMemFree of the context: the context, then any other
 * context on its device, whose streams may use this memory too (the driver's own cuMemFree waits
 * for the device; helper-42 F2: a kernel of another context wrote into the next block). */
static CUresult ga_fence_sync(ga_ctx_t *c, int current)
{
    if (GA_UNLIKELY(ga_capture_on_dev(c->dev)))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* not tried: it would end the capture */
    int pushed = current ? ga_nocancel_begin() << 1 : ga_ctx_enter(c->ctx);
    CUresult r = ga_real.cuCtxSynchronize ? ga_real.cuCtxSynchronize() : CUDA_SUCCESS;
    ga_ctx_leave(pushed);
    if (r == CUDA_SUCCESS && atomic_load_explicit(&c->peers, memory_order_relaxed))
        r = ga_dev_sync_others(c->dev, c);
    if (r != CUDA_SUCCESS)
        return r; /* nothing known to have passed */
    c->counts.free_syncs++;
    return CUDA_SUCCESS;
}

int ga_fence_take_same_stream(ga_ctx_t *c, CUstream s, size_t size, uintptr_t *out,
                              size_t *got, size_t *req)
{
    if (!c->npend_ev)
        return 0;
    uint64_t sid = ga_fence_stream_id(s);
    size_t best = (size_t)-1, want = (size + GA_ALIGN - 1) & ~(GA_ALIGN - 1);
    for (size_t i = 0; sid && i < c->npend; i++) {
        const ga_pending_t *e = &c->pend[i];
        if (e->ev && e->req && e->sid == sid && e->size >= want && e->size / 2 <= want &&
            (best == (size_t)-1 || e->size < c->pend[best].size))
            best = i;
    }
    if (best == (size_t)-1)
        return 0;
    ga_pending_t e = c->pend[best];
    c->pend[best] = c->pend[--c->npend];
    c->pend_gen++;
    c->npend_ev--; /* only stream-ordered entries are taken */
    ga_pend_ev_note(-1);
    ga_pend_forget(c, e.ptr);
    c->pend_bytes -= e.size;
    c->counts.pending_bytes = c->pend_bytes;
    ga_event_put(c, e.ev);
    *out = e.ptr;
    *got = e.size;
    *req = e.req;
    return 1;
}

/* GPUARENA_FREE_SYNC=lazy. Under deferred, the first allocation after frees synchronises the
 * context; on a GPU that is most of what an arena allocation costs (about 0.4 of 0.49 us a pair on
 * an H200, README "On a real GPU"), and the CPU waits there for every queued kernel. Under lazy,
 * an allocation that the pool can serve from memory it holds, none of it pending, takes it with no
 * synchronisation; the pending chunks wait for the next allocation that cannot be served so, or
 * that finds them past GA_LAZY_BYTES or GA_LAZY_COUNT (then one synchronisation returns them all,
 * as under deferred). Safe for the same reason deferred is: a pending chunk stays allocated in the
 * pool until the device has passed its free. "Can serve" is ga_pool_fits: the arena modes, and
 * in vmm mode a place on granules already mapped (anything else would map); never in platform
 * mode, where lazy is deferred. */
#define GA_LAZY_BYTES (256ull << 20)
#define GA_LAZY_COUNT 1024

int ga_fence_lazy_ok(ga_ctx_t *c, size_t size)
{
    if (c->pend_bytes > GA_LAZY_BYTES || c->npend > GA_LAZY_COUNT || !ga_pool_fits(c->pool, size))
        return 0;
    c->counts.lazy_allocs++;
    return 1;
}

/* The pending bytes nothing can return while a stream capture runs on c's device: cuMemFree's
 * entries, which only a synchronisation passes, and none is made during a capture (a
 * cuMemFreeAsync's entry is queried, and returns once its stream passed it, but only during a
 * relaxed capture: a global or thread-local one forbids the query too, capture.c). Counted as free,
 * cuMemGetInfo reported memory the next allocation was then refused (helper-68 F10). 0 when no
 * capture runs on the device. c->lock held. */
uint64_t ga_fence_capture_held(const ga_ctx_t *c)
{
    if (!c->npend || !ga_capture_on_dev(c->dev))
        return 0;
    if (!c->npend_ev || ga_capture_forbids_queries()) /* no event asked then: all are held */
        return c->pend_bytes;
    uint64_t bytes = 0;
    for (size_t i = 0; i < c->npend; i++)
        bytes += c->pend[i].ev ? 0 : c->pend[i].size;
    return bytes;
}

/* vmm: the bytes of whole granules inside c's pending chunks (those a capture does not hold back,
 * as ga_fence_capture_held), which their return frees whatever lies beside them; the rest of a
 * chunk lies in a first or last granule a live block may keep mapped, which the free figure does
 * not count once the chunk is back (device.c). Counted whole, the figure fell at the program's
 * synchronisation with nothing allocated, and an allocation of it was refused (an outside test,
 * 2026-12-06). Chunks that lie end to end count as one: five 1.5 MiB blocks freed with nothing
 * else live cover 4 granules, none inside any one chunk, and cuMemGetInfo said 0 bytes free of
 * an 8 MiB cap until the next allocation (an outside check, helper-133, 2026-12-07). g: the
 * granule. c->lock held. */
typedef struct ga_span {
    uint64_t lo, hi;
} ga_span_t;

static int ga_span_cmp(const void *a, const void *b)
{
    uint64_t x = ((const ga_span_t *)a)->lo, y = ((const ga_span_t *)b)->lo;
    return x < y ? -1 : x > y;
}

static uint64_t ga_span_granules(uint64_t lo, uint64_t hi, uint64_t g)
{
    lo = (lo + g - 1) / g * g;
    hi = hi / g * g;
    return hi > lo ? hi - lo : 0;
}

uint64_t ga_fence_pending_granules(const ga_ctx_t *c, uint64_t g)
{
    if (!c->npend || g <= 1)
        return 0;
    int held = ga_capture_on_dev(c->dev), all = held && ga_capture_forbids_queries();
    ga_span_t local[64], *sp = local;
    if (c->npend > sizeof local / sizeof local[0] && !(sp = malloc(c->npend * sizeof *sp)))
        sp = NULL; /* no room to join them: each chunk alone, as before */
    uint64_t bytes = 0;
    size_t n = 0;
    for (size_t i = 0; i < c->npend; i++) {
        const ga_pending_t *e = &c->pend[i];
        if (held && (!e->ev || all))
            continue;
        if (sp)
            sp[n++] = (ga_span_t){(uint64_t)e->ptr, (uint64_t)e->ptr + e->size};
        else
            bytes += ga_span_granules((uint64_t)e->ptr, (uint64_t)e->ptr + e->size, g);
    }
    if (!sp)
        return bytes;
    qsort(sp, n, sizeof *sp, ga_span_cmp);
    for (size_t i = 0; i < n;) {
        uint64_t lo = sp[i].lo, hi = sp[i].hi;
        for (i++; i < n && sp[i].lo <= hi; i++)
            hi = sp[i].hi > hi ? sp[i].hi : hi;
        bytes += ga_span_granules(lo, hi, g);
    }
    if (sp != local)
        free(sp);
    return bytes;
}

/* The program's own synchronisation. cuCtxSynchronize (the runtime's cudaDeviceSynchronize calls
 * it, or the _v2 that names a context) returns once the device has finished all the context's
 * work queued before the call, on every stream, so each chunk cuMemFree left pending when it
 * began has been passed: they go back to the pool as it returns (a cuMemFreeAsync's chunk when
 * its event says its stream passed it). The next allocation then has nothing to
 * synchronise, and memory the frees gave back (granules under GPUARENA_VMM_KEEP=0, chunks that
 * empty a grow-mode region used again) is the pool's or the device's again without waiting for
 * this process's next allocation, which a group's other members may be waiting for.
 * Only the entries pending when the call began are returned: frees only append to the list, so
 * while no entry has left it meanwhile (pend_gen unchanged) they are its first n entries. If one
 * has left (an allocation in another thread reclaimed them), nothing is done: the list is then
 * being looked after anyway. */
ga_fence_mark_t ga_fence_mark(ga_ctx_t *c)
{
    ga_fence_mark_t m = {0};
    if (!c)
        return m;
    ga_mutex_lock(&c->lock);
    m.n = c->npend;
    m.gen = c->pend_gen;
    m.npfree = c->npfree;
    ga_mutex_unlock(&c->lock);
    return m;
}

/* The entries marked by m (the first m.n, while none has left since) after a synchronisation of
 * their context: each back to the pool, but a cuMemFreeAsync's only when its event says so, since
 * its stream may belong to another context, which that synchronisation does not wait for
 * (helper-42 F1), and a cuMemFree's only when `peers_passed` says the device's other contexts were
 * waited for too, or there are none: the program's own cuCtxSynchronize waits for its context
 * alone, while another context's kernel may still write the block (helper-49 F1); such entries
 * stay for the next allocation's fence, which waits for them all. The entries kept stay first, in
 * order. Returns how many went back (0 when m no longer holds; c->lock held). */
static size_t ga_fence_release_marked(ga_ctx_t *c, ga_fence_mark_t m, int peers_passed)
{
    if (!m.n || c->pend_gen != m.gen || m.n > c->npend || !c->pool || atomic_load(&c->dead))
        return 0;
    /* c->peers is never cleared; once every other context of the device is destroyed, the
     * program's synchronisation passes all that may use the chunks (until an outside check,
     * 2026-12-07, they stayed pending and each next allocation synchronised again: 200
     * cuCtxSynchronize for the program's 100; test program_sync_after_peer_destroyed). */
    int keep_plain = !peers_passed && atomic_load_explicit(&c->peers, memory_order_relaxed) &&
                     ga_dev_live_peer(c);
    size_t kept = 0, kept_marked = 0, n = c->npend;
    ga_unpassed_t u = {.n = 0};
    for (size_t i = 0; i < c->npend; i++) {
        const ga_pending_t *e = &c->pend[i];
        if (i >= m.n ||
            (e->ev ? !ga_event_passed_ordered(&u, e->sid, e->seq, e->ev) : keep_plain)) {
            kept_marked += i < m.n;
            c->pend[kept++] = *e;
            continue;
        }
        c->pend_bytes -= e->size;
        c->npend_ev -= e->ev != NULL;
        if (e->ev)
            ga_pend_ev_note(-1);
        ga_event_put(c, e->ev);
        ga_pool_free(c->pool, e->ptr, NULL);
    }
    c->npend = kept;
    c->pend_gen++;
    c->counts.pending_bytes = c->pend_bytes;
    if (c->pend_set.count) /* rebuilt by the next free that needs it (ga_pend_index) */
        ga_pend_unindex(c);
    if (keep_plain && kept_marked == kept && !c->npend_ev) {
        c->own_gen = c->pend_gen; /* every entry left was passed by this context's own wait */
        c->own_n = kept;
    }
    return n - kept;
}

void ga_fence_synced(ga_ctx_t *c, ga_fence_mark_t m)
{
    if (!c || (!m.n && !m.npfree))
        return;
    ga_mutex_lock(&c->lock);
    /* Counted only when it returned something: a synchronisation that passed none of the
     * pending chunks (another context's kernel may still use them, or their streams are another
     * context's) was counted all the same until an outside check (2026-12-07; test
     * program_syncs_count_only_returns). */
    c->counts.program_syncs += ga_fence_release_marked(c, m, 0) != 0;
    if (c->npfree && !atomic_load(&c->dead))
        ga_fence_pass_reclaim(c, 0); /* passed by the synchronisation: no wait */
    ga_mutex_unlock(&c->lock);
}

void ga_fence_events_passed(ga_ctx_t *c)
{
    ga_unpassed_t u = {.n = 0};
    for (size_t i = 0; c->pool && i < c->npend;) {
        const ga_pending_t *e = &c->pend[i];
        if (e->ev && ga_event_passed_ordered(&u, e->sid, e->seq, e->ev))
            ga_pend_release(c, i); /* entry i now holds another one: look at i again */
        else
            i++;
    }
}

/* The allocation's synchronisation (alloc.c), in three steps so that the wait holds no lock:
 * ga_fence_before_alloc said one is needed (c->lock held), ga_fence_mark_held notes the entries
 * (held), the caller lets the lock go and ga_fence_sync_unlocked waits (the allocating thread's
 * own context is c), then with the lock taken again ga_fence_passed returns the noted entries.
 * Waiting under the lock held up every other allocation, memory query and fork of the context for
 * as long as the device took (helper-42 F4), and a thread cancelled in the driver there left the
 * lock held for ever (helper-43 F3); with no lock held neither can happen. Entries freed while
 * the lock was let go stay pending for the next allocation. */
int ga_fence_before_alloc(ga_ctx_t *c, size_t size)
{
    if (GA_UNLIKELY(ga_opt.free_sync == GA_FREE_SYNC_LAZY) && ga_fence_lazy_ok(c, size))
        return 0;
    if (GA_UNLIKELY(c->npend_ev)) /* cuMemFreeAsync's: their events, queried, never waited for */
        ga_fence_events_passed(c);
    /* cuMemFree's: only a synchronisation passes them, and none is made while a stream of the
     * device is capturing (the driver refuses it and the capture is lost: helper-48 F5, PyTorch's
     * CUDA graphs allocate during capture after emptying the cache). The pool serves the
     * allocation without them; they wait for an allocation after the capture. */
    return c->npend > c->npend_ev && !ga_capture_on_dev(c->dev);
}

CUresult ga_fence_sync_unlocked(ga_ctx_t *c, ga_fence_mark_t m)
{
    if (ga_capture_on_dev(c->dev)) /* one began meanwhile */
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    /* Entries the program's own cuCtxSynchronize passed, kept only for the device's other
     * contexts (ga_fence_release_marked), need those alone: the context was synchronised again
     * here until an outside check, 2026-12-07 (300 cuCtxSynchronize where 200 wait for all; test
     * program_sync_then_alloc_waits_for_the_others_alone). */
    CUresult r = m.others || !ga_real.cuCtxSynchronize ? CUDA_SUCCESS : ga_real.cuCtxSynchronize();
    if (r == CUDA_SUCCESS && atomic_load_explicit(&c->peers, memory_order_relaxed))
        r = ga_dev_sync_others(c->dev, c); /* a refused one: that context's work may go on */
    return r; /* not CUDA_SUCCESS: nothing is known to have passed, the entries stay pending */
}

void ga_fence_passed(ga_ctx_t *c, ga_fence_mark_t m)
{
    c->counts.free_syncs++;
    if (GA_LIKELY(m.n == c->npend && c->pend_gen == m.gen && !c->npend_ev && !c->pend_set.count &&
                  c->pool && !atomic_load_explicit(&c->dead, memory_order_relaxed))) {
        /* The common case: only cuMemFree's entries, none added meanwhile: all of them back. */
        ga_pool_t *pool = c->pool;
        const ga_pending_t *e = c->pend, *end = e + c->npend;
        for (; e < end; e++)
            ga_pool_free(pool, e->ptr, NULL);
        c->npend = 0;
        c->pend_gen++;
        c->pend_bytes = 0;
        c->counts.pending_bytes = 0;
        return;
    }
    ga_fence_release_marked(c, m, 1);
}

GA_EXPORT CUresult cuCtxSynchronize(void)
{
    GA_HOOK_ENTER(cuCtxSynchronize, ());
    ga_ctx_t *c = ga_current();
    ga_fence_mark_t m = ga_fence_mark(c);
    CUresult r = ga_real.cuCtxSynchronize();
    if (r == CUDA_SUCCESS) {
        ga_fence_synced(c, m);
        ga_mempool_settle_all();
    }
    return r;
}

GA_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    GA_HOOK_ENTER(cuCtxSynchronize_v2, (ctx));
    ga_ctx_t *c = ctx ? ga_ctx_of(ctx) : ga_current();
    ga_fence_mark_t m = ga_fence_mark(c);
    CUresult r = ga_real.cuCtxSynchronize_v2(ctx);
    if (r == CUDA_SUCCESS) {
        ga_fence_synced(c, m);
        ga_mempool_settle_all();
    }
    return r;
}
