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

#endif /* SIM_INTERNAL_H */
