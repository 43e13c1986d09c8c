/* stats.h: the shim's own figures (stats.c: per context, summed into "totals"; the pools count
 * theirs), the process-wide levels, and the trace (tracer.c). Included by shim.h, where the
 * hooks' API numbers (GA_API_COUNT) are defined before it; nothing includes it alone.
 */
#ifndef GA_SHIM_STATS_H
#define GA_SHIM_STATS_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>

/* ---- stats.c: the shim's own figures (the pools count theirs) ---- */
/* X(name, unit, description): counted per context under its lock, summed into "totals". */
#define GA_SHIM_STATS_LIST(X)                                                                  \
    X(alloc_calls, count, "allocation calls of every kind the shim served or passed on")       \
    X(free_calls, count, "frees of memory the shim accounts for")                              \
    X(failed_allocs, count, "allocation calls that failed")                                     \
    X(frag_failures, count, "out-of-memory failures while enough bytes were free in total")    \
    X(true_oom_failures, count, "out-of-memory failures with too few bytes free in total")     \
    X(driver_alloc_calls, count, "driver calls the pools made to take memory (vmm: cuMemCreate)") \
    X(driver_free_calls, count, "driver calls the pools made to give it back (vmm: cuMemRelease)") \
    X(alloc_time_ns, ns, "time inside allocation hooks (timed when statistics or a trace are on)") \
    X(free_time_ns, ns, "time inside free hooks (timed when statistics or a trace are on)")    \
    X(free_syncs, count, "context synchronisations before freed memory was reused (GPUARENA_FREE_SYNC) or, under none, unmapped") \
    X(free_events, count, "events recorded at stream-ordered frees (cuMemFreeAsync)")            \
    X(async_served, count, "cuMemAllocAsync calls served from the pool")                        \
    X(async_same_stream, count, "of those, given a chunk freed on the same stream still pending") \
    X(program_syncs, count, "the program's own cuCtxSynchronize calls that returned pending chunks to the pool") \
    X(lazy_allocs, count, "allocations served while freed chunks were pending, with no synchronisation (GPUARENA_FREE_SYNC=lazy)") \
    X(pending_bytes, bytes, "freed bytes waiting for the device to pass the free (in reserved)") \
    X(peak_pending_bytes, bytes, "highest pending_bytes of each context, summed over contexts")
typedef struct ga_api_count {
    uint64_t calls, failed, bytes;
} ga_api_count_t;
typedef struct ga_counts {
#define GA_SHIM_FIELD(name, unit, desc) uint64_t name;
    GA_SHIM_STATS_LIST(GA_SHIM_FIELD)
#undef GA_SHIM_FIELD
    double max_fragmentation;
    ga_api_count_t by_api[GA_API_COUNT];
} ga_counts_t;
/* Process-wide levels and their peaks, kept with atomics: the peak of the sum over contexts. */
#define GA_LEVEL_LIST(X)                                                                       \
    X(IN_USE, in_use, "bytes in live allocations, every context and pass-through")             \
    X(RESERVED, reserved, "bytes held from the driver (vmm: mapped), pass-through included")   \
    X(PASSTHROUGH, passthrough_bytes, "bytes of allocations passed through to the driver")
typedef enum {
#define GA_LEVEL_ENUM(sym, name, desc) GA_LEVEL_##sym,
    GA_LEVEL_LIST(GA_LEVEL_ENUM)
#undef GA_LEVEL_ENUM
    GA_LEVEL_COUNT
} ga_level_t;
void ga_level_add(ga_level_t level, int64_t delta);
/* IN_USE by delta for memory of device dev outside the pools (pass-through), and the device's own
 * figure for its group's ledger (ctx.c). */
void ga_dev_in_use_add(int dev, int64_t delta);
uint64_t ga_level_value(ga_level_t level, int peak);
/* Adds a context's cur and peak of a level it kept itself into the process-wide atomics. */
void ga_level_fold(ga_level_t level, int64_t cur, uint64_t peak);
extern int ga_timing; /* time the hooks: stats or trace asked for; set once at start */
uint64_t ga_now(void);
void ga_stats_start(void);
void ga_stats_fork_child(void);
/* A dead context's state is reused (ctx.c): its counts and final pool figures go into its
 * device's retired record (c->lock held; the device lock taken inside). */
struct ga_ctx;
void ga_stats_retire(const struct ga_ctx *c);
/* Counting, with the lock that guards cn held; t0 from ga_now() when ga_timing. */
void ga_count_alloc(ga_counts_t *cn, uint8_t api, uint64_t bytes, int ok, uint64_t t0);
void ga_count_free(ga_counts_t *cn, uint8_t api, uint64_t t0);
void ga_count_refused(uint8_t api, int is_alloc); /* a call refused for its arguments (stats.c) */
void ga_stats_write(void);
/* Any allocation or free call made by this process (the report is written only then). */
int ga_stats_any_call(void);
/* A call made once the report was written at exit (ga_tracing's late bit) marks it stale; the
 * stream ga_stats_arm_final leaves open writes it again at exit's stdio flush, after every
 * destructor. */
void ga_stats_late(void);
void ga_stats_arm_final(void);

/* ---- tracer.c ---- */
void ga_trace_start(void);
void ga_trace_event(uint8_t kind, uint8_t api, uint64_t addr, uint64_t size, uint64_t stream,
                    int dev, uint64_t t0, CUresult result);
void ga_trace_flush_all(void);
void ga_trace_fork_child(void);
/* Every hook that allocates or frees tests it (one load) before calling ga_trace_event: bit 0
 * (GA_TRACE_ON) records events; bit 1 (GA_TRACE_LATE_STATS), set once the report was written at
 * exit, has the report written again at the very end after a later call (a library's destructor
 * that frees after the shim's: its frees were missing from the report, helper-43 F5). */
extern _Atomic int ga_tracing;
#define GA_TRACE_ON 1
#define GA_TRACE_LATE_STATS 2

#endif
