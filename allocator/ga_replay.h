/* gpuarena replay: runs a recorded or imported trace through the real pools on the CPU.
 *
 * The pool (ga_pool.h) of the mode asked for is given a fake backend that hands out address
 * ranges without touching memory (a bump allocator of addresses that counts its calls; for vmm,
 * fake virtual ranges and granule maps), so a trace with a multi-GB peak replays on any machine in
 * milliseconds, through exactly the code the shim runs. Trace addresses (device pointers, or buffer
 * ids for imported traces) are mapped to pool addresses with a hash table. The modes are the
 * shim's (GA_MODE_LIST): arena (one preallocated region of arena_size bytes, no growth), grow
 * (regions on demand, optional limit on bytes reserved), vmm (physical granules mapped where live
 * allocations lie, optional limit on bytes mapped), platform (one reservation per allocation,
 * optional limit on their sum).
 * An optional per-event hook reports bytes in use and reserved after every event (the timeline
 * `gpuarena report` draws); without it the per-event path does no extra work.
 */
#ifndef GA_REPLAY_H
#define GA_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "ga_arena.h"
#include "ga_pool.h"
#include "ga_trace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Replay modes are the pool modes; the old names stay as aliases. */
typedef ga_mode_t ga_replay_mode_t;
#define GA_REPLAY_ARENA GA_MODE_ARENA
#define GA_REPLAY_GROW GA_MODE_GROW
#define GA_REPLAY_VMM GA_MODE_VMM
#define GA_REPLAY_PLATFORM GA_MODE_PLATFORM
/* vmm defaults of a replay: the granularity of current GPUs, and the shim's default keep. */
#define GA_REPLAY_GRANULARITY ((size_t)2 << 20)

/* The state after one replayed alloc or free event (skipped events produce no point). */
typedef struct ga_replay_point {
    size_t index;      /* the event's index in the trace */
    uint64_t time_ns;  /* the event's own time */
    uint64_t in_use;   /* bytes in live allocations, rounded to GA_ALIGN */
    uint64_t reserved; /* bytes held from the backend (platform: equal to in_use) */
} ga_replay_point_t;

typedef void (*ga_replay_hook_t)(void *ctx, const ga_replay_point_t *point);

typedef struct ga_replay_opts {
    ga_replay_mode_t mode;
    size_t arena_size;  /* ARENA: bytes of the single region (required, multiple of GA_ALIGN);
                         * VMM: bytes of the virtual range (0: twice the limit, else 2^40) */
    size_t limit;       /* GROW, VMM and PLATFORM: cap on bytes reserved (vmm: mapped), 0 = none;
                         * with a fraction, the cap of every mode (ARENA too) */
    double fraction;    /* ARENA, GROW, VMM: the shim's GPUARENA_MEM_FRACTION against `limit` as
                         * the cap (ga_fraction_share): ARENA takes the share at creation (no
                         * arena_size), grows past it up to the cap with fraction_grow, else stops
                         * there; GROW and VMM are bounded by a fixed share, by the cap alone with
                         * fraction_grow. 0 = none (arena_size and limit as given). Needs limit. */
    int fraction_grow;  /* with fraction: the "0.75+" form (the shim's default) */
    size_t min_region;  /* GROW: smallest growth region, 0 = arena default (2 MiB) */
    size_t keep;        /* VMM: wholly free granules kept mapped, bytes */
    size_t granularity; /* VMM: granule size, 0 = GA_REPLAY_GRANULARITY */
    int stop_at_oom;    /* stop at the first allocation that fails in replay */
    int check;          /* call ga_check every `check` events and after the last (1 = after every
                         * event; slow, for tests), 0 = never. A vmm pool's check walks its
                         * granules: past GA_REPLAY_CHECK_BUDGET granules an event on average, the
                         * checks asked for are thinned to that (`checks` says how many ran), and
                         * the final state is always checked. */
    int no_frag_track;  /* skip per-event statistics (max_frag) so timing measures only replay */
    ga_replay_hook_t on_event; /* called after every replayed alloc or free; NULL = none. Not
                                * called by ga_replay_min_size's trial runs. */
    void *hook_ctx;            /* passed to on_event */
} ga_replay_opts_t;

/* Figures of one replay: one list, X(name, unit, description); unit is bytes, count or ns. */
#define GA_REPLAY_RESULT_LIST(X)                                                            \
    X(events, count, "events in the trace")                                                 \
    X(allocs, count, "allocations served")                                                  \
    X(frees, count, "frees served")                                                         \
    X(unmatched_frees, count, "frees of an address never allocated (skipped)")              \
    X(reused_addrs, count, "allocs at an address still live: the old one was freed first") \
    X(skipped, count, "events skipped: non-zero results (not a recorded OOM), unknown kinds") \
    X(recorded_failures, count, "recorded OOMs tried: freed at once if served, else failed") \
    X(invalid_allocs, count, "allocs the pool rejected as invalid (size 0)")                \
    X(failed_allocs, count, "allocations that ran out of memory in replay")                 \
    X(peak_in_use, bytes, "highest bytes live, rounded to GA_ALIGN")                        \
    X(peak_requested, bytes, "highest bytes live, as requested")                            \
    X(peak_reserved, bytes, "highest bytes held from the backend (vmm: mapped physically)") \
    X(final_in_use, bytes, "bytes live after the last event, rounded to GA_ALIGN")          \
    X(final_reserved, bytes, "bytes held from the backend after the last event")            \
    X(backend_reserves, count, "backend reserve calls that succeeded (vmm: virtual ranges)") \
    X(backend_releases, count, "backend release calls (not the teardown after the trace)") \
    X(backend_maps, count, "vmm: granules mapped (cuMemCreate + cuMemMap + cuMemSetAccess)") \
    X(backend_unmaps, count, "vmm: granules unmapped (cuMemUnmap+cuMemRelease; not at teardown)") \
    X(check_failures, count, "invariant failures the pool check found (check option)")      \
    X(checks, count, "pool checks run (check option; fewer than asked on a huge vmm pool)") \
    X(ns_total, ns, "wall time of the replay loop, nanoseconds")

/* Granules a --check may walk per replayed event, on average (see `check`): a pool of up to
 * 2^16 granules (a 128 GiB range of 2 MiB granules, twice a 64 GiB live peak) is checked after
 * every event; a trace of 1,000 blocks of 1 TiB, a 20 TiB range, every 160 events. */
#define GA_REPLAY_CHECK_BUDGET ((uint64_t)1 << 16)

typedef struct ga_replay_result {
#define GA_REPLAY_FIELD(name, unit, desc) uint64_t name;
    GA_REPLAY_RESULT_LIST(GA_REPLAY_FIELD)
#undef GA_REPLAY_FIELD
    double final_frag;        /* fragmentation (1 - largest_free/total_free) after the last event */
    double max_frag;          /* highest fragmentation seen after any event */
    size_t first_oom;         /* index of the first event that failed in replay, SIZE_MAX if none */
    size_t first_check_fail;  /* index of the first event after which ga_check failed, or SIZE_MAX */
    char check_report[256];   /* ga_check's description of the first failure */
} ga_replay_result_t;

/* ga_mode_name / ga_mode_parse under their old names. */
const char *ga_replay_mode_name(ga_replay_mode_t mode);
int ga_replay_mode_parse(const char *name, ga_replay_mode_t *mode);

/* Replays the trace. Returns 0 (OOMs in replay are results, not errors), or -1 with a message in
 * err for bad options (arena size 0 or not a multiple of GA_ALIGN, bad granularity) or out of host memory. */
int ga_replay(const ga_trace_t *trace, const ga_replay_opts_t *opts, ga_replay_result_t *res,
              char *err, size_t errlen);

/* Smallest size that runs the trace with no OOM in replay: the region size for ARENA, the limit
 * for GROW and VMM (other fields of opts are used as given), the peak of the sum of rounded live
 * sizes for PLATFORM; with a fraction, the cap (limit) in ARENA, GROW and VMM, the share following it. Bisection in steps of `granularity` (a multiple of GA_ALIGN; 0 means GA_ALIGN),
 * then, as success is not monotone in the size, every step from the peak live up in order while
 * 2^22 replayed events allow: the answer S runs without OOM and S - granularity does not (or S is
 * the peak live, below which nothing can fit); when the scan reached S, no smaller size runs it.
 * VMM with a fixed range (arena_size non-zero), where the limit decides refusals and no
 * placement, so success is monotone: S is the peak of mapped bytes of one replay with no limit
 * (rounded up to `granularity`, at least the peak live), confirmed by two trials, with the answer
 * the bisection gives and three or four replays instead of ~34 (replay.c, vmm_from_peak).
 * Returns 0 with *size set; 1 when no size up to 2^60 bytes runs the trace
 * (*size 0, err says so: a block the mode can never place, such as one past vmm's bound on a
 * range, GA_VMM_MAX_GRANULES); or -1 with a message in err. */
int ga_replay_min_size(const ga_trace_t *trace, const ga_replay_opts_t *opts, size_t granularity,
                       size_t *size, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
