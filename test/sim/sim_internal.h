/* simcuda internals shared by the files of the simulated driver.
 *
 * The driver is split by concern: sim_state.c (configuration, lock, counters, report, test API),
 * sim_context.c (cuInit, devices, contexts, streams), sim_account.c (device bytes, the one charge
 * every kind of memory passes), sim_memory.c (allocations, memory pools), sim_query.c (memory
 * information, pointer queries), sim_vmm.c (address
 * reservations, physical handles, mappings), sim_copy.c (memcpy, memset, the stand-in kernels),
 * sim_stream.c (streams: queues run in order by worker threads, the legacy and per-thread default
 * streams, synchronisation), sim_event.c (events), sim_shared.c (device
 * memory counted across processes), sim_getproc.c (the versioned cuGetProcAddress table),
 * sim_fault.c (fault injection), sim_va.c (where an allocation lies in the device's addresses) and
 * sim_errors.c (error strings).
 * One global mutex guards all driver state: the simulator values exact counters over speed.
 * Stream queues have their own mutex (sim_stream.c), taken after sim_lock when both are needed and
 * never held while sim_lock is taken or while queued work runs, so a worker running a copy (which
 * takes sim_lock) can never deadlock with a thread that waits for the stream.
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
#include <stdint.h>

#include "sim_procs.h"

#define SIM_MAX_DEVICES SIMCUDA_MAX_DEVICES
#define SIM_DRIVER_VERSION 13000

typedef struct sim_config {
    int devices;
    unsigned long long total_mem;
    unsigned long long vmm_granularity;
    unsigned long long latency_ns;
    unsigned long long ctx_overhead;
    const char *report;
    unsigned long long uuid_seed; /* SIMCUDA_UUID_SEED, hashed */
    unsigned long long stream_delay_us; /* SIMCUDA_STREAM_DELAY_US */
    int no_vmm; /* SIMCUDA_VMM=0: a device without virtual memory management */
    int bad; /* a variable had a bad value: cuInit fails */
} sim_config_t;

/* A context. Never freed, so a stale handle can always be recognised as dead. */
typedef struct sim_ctx {
    int dev;
    int primary;
    int alive;             /* created and not destroyed; for a primary: refcount > 0 */
    unsigned refcount;     /* primary contexts only */
    unsigned attached;     /* cuCtxAttach's not yet detached: the usage count less one */
    unsigned flags;
    struct sim_ctx *next;  /* registry of every context ever made */
    struct sim_stream *legacy;  /* its legacy default stream (made at first use; sim_stream_mu) */
    struct sim_stream *streams; /* its other streams with work or alive (sim_stream_mu) */
    unsigned peers_n;      /* peer contexts it enabled access to (cuCtxEnablePeerAccess; sim_lock) */
    struct sim_ctx *peers[SIM_MAX_DEVICES * 4];
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
void sim_hold_async_alloc(void);      /* simcuda_hold_next_async_alloc's wait, if armed */
void sim_hold_ctx_teardown(void);     /* simcuda_hold_next_ctx_teardown's wait, if armed */
void sim_hold_pool_query(void);       /* simcuda_hold_next_pool_query's wait, if armed */
void sim_hold_ctx_sync(const void *ctx); /* simcuda_hold_next_ctx_sync's wait, if armed for ctx */
void sim_hold_import(void);          /* simcuda_hold_next_import's wait (import, retain), if armed */
void sim_bytes_add_locked(unsigned long long n);
void sim_bytes_sub_locked(unsigned long long n);

/* sim_context.c */
void sim_device_uuid(int dev, unsigned char out[16]);
CUresult sim_check_init(void);                   /* NOT_INITIALIZED before cuInit */
CUresult sim_current(sim_ctx_t **out);           /* init + a live current context */
int sim_ctx_known_locked(const sim_ctx_t *c);    /* c is a context handle we made */
unsigned long long sim_ctx_overhead_locked(int dev);

/* sim_stream.c: streams. A piece of work queued on a stream; the worker runs kinds COPY, SET and
 * FREE through sim_work_run (sim_copy.c, sim_memory.c) after the configured delay. */
typedef enum sim_work_kind {
    SIM_WORK_MARK,  /* nothing: a synchronisation point (stream sync, cuStreamWaitEvent) */
    SIM_WORK_EVENT, /* completes an event record: stamps its time */
    SIM_WORK_GATE,  /* holds the stream until simcuda_gate_open (tests) */
    SIM_WORK_COPY,  /* memmove n bytes; dst_dev/src_dev: that side is device memory to check */
    SIM_WORK_SET,   /* n elements of elem bytes (1 or 4) set to value */
    SIM_WORK_FREE   /* cuMemFreeAsync: the allocation at ptr goes when the stream reaches it */
} sim_work_kind_t;

typedef struct sim_event sim_event_t;
typedef struct sim_stream sim_stream_t;

typedef struct sim_work {
    sim_work_kind_t kind;
    int dev;                 /* the device whose access rights a copy or set is checked against */
    void *dst;
    const void *src;
    int dst_dev, src_dev;
    size_t n, elem;
    unsigned value;
    unsigned delay_us;       /* beyond SIMCUDA_STREAM_DELAY_US: a stand-in kernel's duration */
    sim_event_t *ev;         /* SIM_WORK_EVENT: the event and the record it completes */
    unsigned long long gen;
    unsigned gate;           /* SIM_WORK_GATE */
    CUdeviceptr ptr;         /* SIM_WORK_FREE */
} sim_work_t;

typedef struct sim_dep {     /* satisfied once stream s has completed its first seq operations */
    sim_stream_t *s;
    unsigned long long seq;
} sim_dep_t;

int sim_stream_ok(CUstream s);                   /* NULL, legacy, per-thread or ours, alive */
/* The stream a handle names for context c: NULL is the legacy stream, or the calling thread's
 * per-thread stream when per_thread (a _ptsz/_ptds entry point); INVALID_HANDLE for a bad one. */
CUresult sim_stream_resolve(CUstream h, int per_thread, sim_ctx_t *c, sim_stream_t **out);
/* sim_stream_resolve in the calling thread's current context (*cp, when cp is not NULL), or the
 * driver's error without one. */
CUresult sim_stream_here(CUstream h, int per_thread, sim_ctx_t **cp, sim_stream_t **out);
/* The context s belongs to (the legacy and per-thread streams: the context they were resolved
 * for); fixed when s is made, so read with no lock. */
sim_ctx_t *sim_stream_ctx(const sim_stream_t *s);
/* Queues w on s behind the stream's earlier work, the implicit waits of the legacy stream, and
 * *wait when given. sync: returns once it ran, with its result. *seq (optional): its number on s. */
CUresult sim_stream_submit(sim_stream_t *s, const sim_work_t *w, const sim_dep_t *wait, int sync,
                           unsigned long long *seq);
int sim_dep_done(const sim_dep_t *d);            /* under sim_stream_mu */
void sim_stream_wait_dep(const sim_dep_t *d);    /* blocks until d is satisfied */
void sim_streams_drain_ctx(const sim_ctx_t *c);  /* waits for the work queued on c's streams */
int sim_streams_drain_dev(int dev);              /* ... on every stream of dev; 1 if it waited */
/* c is destroyed (created: 1) or reset: its streams and events are invalid from now on (the
 * events' records reused by the next cuEventCreate, as the real driver reuses their memory). */
void sim_streams_forget_ctx(const sim_ctx_t *c);
void sim_events_forget_ctx(const sim_ctx_t *c);
/* 1 (and the captures invalidated) when synchronising or querying `only` (NULL: the whole context
 * c) is refused because a stream it encompasses is capturing (sim_capture.c). */
int sim_ctx_capture_check(const sim_ctx_t *c, const sim_stream_t *only);
void sim_stream_fork_prepare(void);
void sim_stream_fork_parent(void);
void sim_stream_fork_child(void);
extern pthread_mutex_t sim_stream_mu;
extern pthread_cond_t sim_stream_cv;             /* broadcast whenever an operation completes */

/* sim_event.c */
void sim_event_stamp_locked(sim_event_t *ev, unsigned long long gen); /* under sim_stream_mu */

/* sim_copy.c, sim_memory.c: what a worker runs */
CUresult sim_work_run(const sim_work_t *w);
CUresult sim_free_queued(CUdeviceptr p);

/* sim_va.c: device addresses (the replay's model, allocator/ga_vafit.h); under sim_lock */
void *sim_va_map_locked(size_t mapped);             /* MAP_FAILED: no memory */
void sim_va_unmap_locked(void *p, size_t mapped);
void *sim_va_reserve_locked(size_t size, size_t align, uintptr_t addr); /* NULL: no room */
/* sim_account.c: device bytes; every kind of device memory is charged here (under sim_lock) */
unsigned long long sim_dev_in_use_locked(int dev);  /* this process's bytes on dev */
unsigned long long sim_dev_peak_locked(int dev);
unsigned long long sim_dev_used_locked(int dev);    /* + context overheads (+ other processes) */
int sim_dev_fits_locked(int dev, unsigned long long size);
int sim_charge_locked(int dev, unsigned long long size); /* -1: it does not fit */
void sim_uncharge_locked(int dev, unsigned long long size);
void sim_pool_hold_locked(int dev, unsigned long long n); /* a memory pool's kept bytes */
void sim_pool_drop_locked(int dev, unsigned long long n);
void sim_pools_settle(void); /* a synchronisation: pools give back what is above their threshold */
int sim_ctx_charge_locked(int dev);                 /* room for one more context's overhead */
unsigned long long sim_next_id_locked(void);        /* process-unique buffer ids */

/* sim_memory.c */
void sim_free_ctx_memory_locked(const sim_ctx_t *c);
/* sim_query.c: [p, p+n) inside one live allocation, or in VMM mappings dev may read (write: and
 * write). */
int sim_range_ok_locked(CUdeviceptr p, size_t n, int dev, int write);
int sim_is_device_locked(CUdeviceptr p);         /* an allocation or a VMM reservation */

/* sim_vmm.c */
int sim_vmm_reserved_locked(CUdeviceptr p);
int sim_vmm_range_ok_locked(CUdeviceptr p, size_t n, int dev, int write);
int sim_vmm_mapping_locked(CUdeviceptr p, CUdeviceptr *base, size_t *size);
/* Answers one pointer attribute for a VMM address: 1 with *r set, or 0 when p is not VMM address
 * space or the attribute has no answer there (the caller then answers as for an unknown pointer). */
int sim_vmm_attr_locked(CUpointer_attribute attr, CUdeviceptr p, void *data, CUresult *r);

/* sim_shared.c: the cross-process ledger of SIMCUDA_SHARED (all no-ops without it) */
int sim_shared_on(void);
int sim_shared_open(const char *name);              /* at configuration; -1 with a message */
unsigned long long sim_shared_used_locked(int dev); /* every live process's bytes + overheads */
/* Takes bytes (allocations) and overhead (contexts) on dev for this process if every live process's
 * use plus them fits the device total; -1 otherwise. */
int sim_shared_charge_locked(int dev, unsigned long long bytes, unsigned long long overhead);
void sim_shared_sync_locked(void);                   /* publishes this process's figures */

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
