/* simcuda internals shared by the files of the simulated driver.
 *
 * The driver is split by concern: sim_state.c (configuration, lock, counters, report, test API),
 * sim_context.c (cuInit, devices, contexts, streams), sim_memory.c (allocations, pointer queries),
 * sim_copy.c (memcpy, memset), sim_getproc.c (the versioned cuGetProcAddress table) and
 * sim_errors.c (error strings).
 * One global mutex guards all driver state: the simulator values exact counters over speed.
 *
 * __CUDA_API_VERSION_INTERNAL makes cuda.h declare every versioned name as itself (cuMemAlloc_v2,
 * cuMemAllocAsync_ptsz, ...) instead of mapping it by macro, exactly what a driver implementation
 * needs; the visibility pragma exports every entry point defined here and nothing else.
 */
#ifndef SIM_INTERNAL_H
#define SIM_INTERNAL_H

#define __CUDA_API_VERSION_INTERNAL 1
#pragma GCC visibility push(default)
#include <cuda.h>
#include "simcuda.h"
#pragma GCC visibility pop

#include <pthread.h>
#include <stddef.h>

#include "sim_procs.h"

#define SIM_MAX_DEVICES 16
#define SIM_DRIVER_VERSION 13000

typedef struct sim_config {
    int devices;
    unsigned long long total_mem;
    unsigned long long latency_ns;
    unsigned long long ctx_overhead;
    const char *report;
    int bad; /* a variable had a bad value: cuInit fails */
} sim_config_t;

/* A context. Never freed, so a stale handle can always be recognised as dead. */
typedef struct sim_ctx {
    int dev;
    int primary;
    int alive;             /* created and not destroyed; for a primary: refcount > 0 */
    unsigned refcount;     /* primary contexts only */
    unsigned flags;
    struct sim_ctx *next;  /* registry of every context ever made */
} sim_ctx_t;

extern sim_config_t sim_cfg;
extern pthread_mutex_t sim_lock;
extern simcuda_counters_t sim_counters; /* bytes fields under sim_lock, call counters atomic */

#define SIM_COUNT(name) do { __atomic_add_fetch(&sim_counters.name, 1, __ATOMIC_RELAXED); } while (0)

/* One constant per exported entry point (sim_procs.h): the index of its call counter. */
typedef enum sim_fn {
#define SIM_FN_ENUM(base, version, pt, fn) SIM_FN_##fn,
    SIM_PROCS(SIM_FN_ENUM)
#undef SIM_FN_ENUM
    SIM_FN_COUNT
} sim_fn_t;

/* The first statement of every exported entry point: counts the call and, when SIMCUDA_FAIL (or
 * simcuda_fail_add) names this call, returns the injected error before anything else happens. An
 * allocation entry point uses SIM_ENTER_ALLOC, so an injected failure counts in failed_allocs. */
#define SIM_ENTER(fn)                                                                        \
    do {                                                                                     \
        CUresult sim_injected_ = sim_fault_enter(SIM_FN_##fn);                               \
        if (sim_injected_ != CUDA_SUCCESS)                                                   \
            return sim_injected_;                                                            \
    } while (0)
#define SIM_ENTER_ALLOC(fn)                                                                  \
    do {                                                                                     \
        CUresult sim_injected_ = sim_fault_enter(SIM_FN_##fn);                               \
        if (sim_injected_ != CUDA_SUCCESS) {                                                 \
            SIM_COUNT(failed_allocs);                                                        \
            return sim_injected_;                                                            \
        }                                                                                    \
    } while (0)
/* Defines exported entry point `name` as SIM_ENTER plus a call of impl: the variants of one call
 * (_v2, _ptds, _ptsz) share an implementation yet each counts as its own entry point. */
#define SIM_WRAP(name, impl, params, args)                                                   \
    CUresult name params                                                                     \
    {                                                                                        \
        SIM_ENTER(name);                                                                     \
        return impl args;                                                                    \
    }

/* sim_state.c */
void sim_setup(void);                 /* reads the environment once */
void sim_latency(void);               /* the configured busy-wait */
void sim_bytes_add_locked(unsigned long long n);
void sim_bytes_sub_locked(unsigned long long n);

/* sim_context.c */
CUresult sim_check_init(void);                   /* NOT_INITIALIZED before cuInit */
CUresult sim_current(sim_ctx_t **out);           /* init + a live current context */
int sim_ctx_known_locked(const sim_ctx_t *c);    /* c is a context handle we made */
unsigned long long sim_ctx_overhead_locked(int dev);
int sim_stream_ok(CUstream s);                   /* NULL, legacy, per-thread or ours */

/* sim_memory.c */
void sim_free_ctx_memory_locked(const sim_ctx_t *c);
unsigned long long sim_dev_in_use_locked(int dev);
int sim_range_ok_locked(CUdeviceptr p, size_t n); /* [p, p+n) inside one live allocation */

/* sim_getproc.c */
void sim_getproc_log_clear_locked(void);
int sim_fn_index(const char *name);      /* SIM_FN_* of an exported name, or -1 (lean: omitted too) */
const char *sim_fn_name(int index);

/* sim_fault.c */
CUresult sim_fault_enter(sim_fn_t fn);   /* see SIM_ENTER */
int sim_fault_parse(const char *spec, const char *origin); /* adds rules; 0, or -1 with a message */
void sim_fault_reset_counts(void);

/* sim_errors.c */
int sim_error_by_name(const char *name, CUresult *out);  /* "CUDA_ERROR_OUT_OF_MEMORY" -> 2 */

#endif /* SIM_INTERNAL_H */
