/* fence_internal.h: what fence.c (the pending list of freed pool chunks and the synchronisations
 * that return it) and fence_event.c (the events of stream-ordered frees, pass-through memory freed
 * with cuMemFreeAsync, a context's entries at its teardown) share; the other files use shim.h's
 * fence section. They were one file until it passed the house's ~800 lines, and the halves still
 * meet in a context's entries: a stream-ordered free in fence.c takes its event from fence_event.c
 * and gives it back when the entry is done, and a dying context's entries (fence_event.c) leave
 * the pending list as fence.c returns them. Functions only: the counters of events and of
 * async-freed pass-through memory stay static in fence_event.c. c->lock held for all of them.
 */
#ifndef GA_FENCE_INTERNAL_H
#define GA_FENCE_INTERNAL_H

#include "shim.h"

/* ---- fence_event.c ---- */
/* An event to record on stream s (sid: its ga_fence_stream_id) for a free of c's memory. */
CUevent ga_fence_event_for(ga_ctx_t *c, CUstream s, uint64_t sid);
/* An entry is done with its event: kept for c's next free if it is c's own, else destroyed. */
void ga_event_put(ga_ctx_t *c, CUevent ev);
/* An event's answer says the device passed it (done, or the stream and its work gone). */
int ga_event_passed(CUresult r);
/* Which events a pass over a list of them found not passed, by stream: on one stream an event
 * recorded later passes later, so the later ones of such a stream are not asked about. */
#define GA_UNPASSED 8
typedef struct ga_unpassed {
    uint64_t sid[GA_UNPASSED], seq[GA_UNPASSED];
    size_t n;
} ga_unpassed_t;
/* Whether event ev, recorded on stream sid (0: not known) as the list's seq-th, has passed: asked
 * of the driver unless one recorded before it on its stream was found not to have (u, one per
 * pass, starts zeroed). */
int ga_event_passed_ordered(ga_unpassed_t *u, uint64_t sid, uint64_t seq, CUevent ev);
/* The process's count of stream-ordered pending entries (every context's npend_ev) moves by
 * delta: a hint, so that the program's stream and event waits cost one load when there are none. */
void ga_pend_ev_note(long delta);

/* ---- capture.c ---- */
/* 1 while a stream capture begun in the global or thread-local mode runs (or one whose mode is not
 * known): no event may be queried then, so none is taken as passed until it ends. */
int ga_capture_forbids_queries(void);

/* ---- fence.c ---- */
/* Returns pending entry i to the pool (swap-remove): entry i then holds another one. */
void ga_pend_release(ga_ctx_t *c, size_t i);

#endif
