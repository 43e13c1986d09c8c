/* gpuarena shim internals: the one header shared by the files of shim/.
 *
 * The shim is split by concern: init.c (lazy once-only start, loading the real driver, fork),
 * options.c (the options table, logging), interpose.c (dlsym and cuGetProcAddress), ctx.c
 * (per-device caps and per-context state, the arena backend, context teardown), alloc.c (the
 * allocation hooks and both modes), query.c (cuMemGetInfo, pointer queries, IPC), passthrough.c
 * (managed/async/pool/VMM and runtime hooks), ptrmap.c (the pointer table), stats.c (counters and
 * the JSON report) and tracer.c (GPUARENA_TRACE). Only shim/ sees CUDA and dlfcn; the allocator
 * behind it is plain C (allocator/ga_arena.h).
 *
 * __CUDA_API_VERSION_INTERNAL makes cuda.h declare every versioned entry point under its exported
 * name (cuMemAlloc_v2, cuMemAllocAsync_ptsz, the 4-argument cuGetProcAddress), which is exactly
 * what a library that defines those symbols needs.
 */
#ifndef GA_SHIM_H
#define GA_SHIM_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../allocator/ga_arena.h"
#include "../allocator/ga_trace.h"

#define GA_EXPORT __attribute__((visibility("default")))
/* For code that runs inside a sanitizer runtime's own start-up (it calls dlsym before its shadow
 * memory exists): no instrumentation there, in sanitizer builds. */
#define GA_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))
#define GA_LIKELY(x) __builtin_expect(!!(x), 1)
#define GA_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define GA_MAX_DEVICES 64

/* The runtime's cudaError_t is an enum (int-sized); the shim does not include the runtime headers
 * so that it never depends on a particular toolkit's runtime API. */
typedef int ga_cudart_error_t;
#define GA_CUDART_ERROR_INIT 3 /* cudaErrorInitializationError */

/* ---- hooks.def: the real functions and the exported hooks ---- */
typedef struct ga_real {
#define GA_HOOK(lib, name, ret, params, args) ret(*name) params;
#include "hooks.def"
#undef GA_HOOK
    /* Driver functions the shim calls but does not hook. */
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuCtxPushCurrent_v2)(CUcontext);
    CUresult (*cuCtxPopCurrent_v2)(CUcontext *);
    CUresult (*cuDeviceTotalMem_v2)(size_t *, CUdevice);
    CUresult (*cuDevicePrimaryCtxGetState)(CUdevice, unsigned int *, int *);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuStreamSynchronize)(CUstream);
} ga_real_t;

#define GA_HOOK(lib, name, ret, params, args) GA_EXPORT ret name params;
#include "hooks.def"
#undef GA_HOOK

extern ga_real_t ga_real;

/* ---- init.c ---- */
extern _Atomic int ga_init_done;
extern CUresult ga_init_error;        /* non-zero: options were bad or the driver is missing */
extern __thread int ga_tl_busy;       /* inside the shim's own calls into the driver or loader */
extern __thread uint8_t ga_tl_api;    /* set by the runtime hooks: the call came via cudaMalloc */
extern _Atomic unsigned ga_generation; /* bumped when contexts die: thread caches revalidate */
CUresult ga_init_slow(void);
/* Lazy once-only start; 0 when the shim is usable. Cheap after the first call. */
static inline CUresult ga_ensure_init(void)
{
    if (GA_LIKELY(atomic_load_explicit(&ga_init_done, memory_order_acquire)))
        return ga_init_error;
    return ga_init_slow();
}
GA_NO_SANITIZE void *ga_real_dlsym(void *handle, const char *name);
typedef void *(*ga_dlsym_fn_t)(void *, const char *);
GA_NO_SANITIZE ga_dlsym_fn_t ga_real_dlsym_fn(void); /* never NULL */
void *ga_libcuda_handle(void);
/* Resolves a runtime (libcudart) function late: the runtime may be loaded after the shim. */
void *ga_resolve_cudart(const char *name, void *hook);

/* Prologue of every driver hook: re-entrant calls and a failed start go straight out. */
#define GA_HOOK_ENTER(name, args)                                                          \
    do {                                                                                  \
        if (GA_UNLIKELY(ga_tl_busy))                                                      \
            return ga_real.name ? ga_real.name args : CUDA_ERROR_NOT_INITIALIZED;         \
        CUresult ga_e_ = ga_ensure_init();                                                \
        if (GA_UNLIKELY(ga_e_ != CUDA_SUCCESS))                                           \
            return ga_e_;                                                                 \
    } while (0)

/* ---- options.c ---- */
typedef enum { GA_MODE_ARENA = 0, GA_MODE_PLATFORM = 1 } ga_mode_t;
typedef enum { GA_LOG_ERROR = 0, GA_LOG_WARN, GA_LOG_INFO, GA_LOG_DEBUG } ga_log_level_t;
typedef struct ga_options {
    ga_mode_t mode;
    int preallocate;
    double fraction;
    int fraction_grow;       /* "0.75+": may grow past the fraction up to the cap */
    uint64_t limit_bytes;    /* 0: none given as bytes */
    double limit_percent;    /* 0: none given as a percentage */
    const char *stats;       /* NULL, a path, or "-" */
    const char *trace;
    ga_log_level_t log;
    const char *libcuda;     /* NULL: "libcuda.so.1" */
} ga_options_t;
extern ga_options_t ga_opt;
/* Parses every option once; returns the number of bad values (each already reported). */
int ga_options_load(void);
void ga_options_print_help(void);
int ga_parse_size(const char *s, uint64_t *bytes, double *percent);
void ga_log(ga_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- ptrmap.c: open-addressing table key -> entry, no allocation per insert ---- */
typedef struct ga_pentry {
    uint64_t key;     /* 0 = empty slot */
    uint64_t size;
    struct ga_ctx *ctx;
    int32_t dev;
    uint8_t api;
    uint8_t passthrough;
} ga_pentry_t;
typedef struct ga_ptrmap {
    ga_pentry_t *slots;
    size_t mask;  /* capacity - 1 */
    size_t count;
} ga_ptrmap_t;
int ga_ptrmap_put(ga_ptrmap_t *m, const ga_pentry_t *e); /* 0 ok, -1 out of host memory */
ga_pentry_t *ga_ptrmap_get(ga_ptrmap_t *m, uint64_t key);
int ga_ptrmap_take(ga_ptrmap_t *m, uint64_t key, ga_pentry_t *out); /* 1 found and removed */
void ga_ptrmap_clear(ga_ptrmap_t *m);

/* ---- ctx.c: devices (caps) and contexts (arenas) ---- */
typedef struct ga_dev {
    _Atomic int64_t committed; /* bytes held from the driver: arena regions + platform + passthrough */
    uint64_t cap;              /* 0 until first use */
    uint64_t physical_total;
    int known;
} ga_dev_t;

typedef struct ga_ctx {
    CUcontext ctx;
    int dev;
    _Atomic int dead;        /* destroyed: never matched again, its memory gone with it */
    int driver_gone;         /* the driver already freed its memory: release without calls */
    pthread_mutex_t lock;    /* guards arena */
    ga_arena_t *arena;
    int arena_tried;
    ga_stats_t final;        /* arena statistics when it was dropped */
    int has_final;
    /* platform-mode and pass-through statistics of this context, under ga_g.lock */
    ga_stats_t plat;
    struct ga_ctx *_Atomic next;
} ga_ctx_t;

extern ga_dev_t ga_devs[GA_MAX_DEVICES];
extern ga_ctx_t *_Atomic ga_ctx_list;
/* The calling thread's current context state, NULL without a current context. */
ga_ctx_t *ga_current(void);
void ga_dev_setup(int dev);
int ga_dev_commit(int dev, uint64_t bytes);   /* 1 ok, 0 past the cap */
void ga_dev_uncommit(int dev, uint64_t bytes);
/* Makes ctx current for a driver call from a thread where it may not be. */
int ga_ctx_enter(CUcontext ctx);
void ga_ctx_leave(int pushed);
ga_arena_t *ga_ctx_arena(ga_ctx_t *c, size_t first_request, CUresult *err); /* c->lock held */
/* The arena pointer read without c->lock: only to skip contexts that have none. */
static inline ga_arena_t *ga_ctx_peek(ga_ctx_t *c)
{
    return __atomic_load_n(&c->arena, __ATOMIC_ACQUIRE);
}
void ga_ctx_drop(ga_ctx_t *c, int driver_gone);
ga_ctx_t *ga_find_owner(uintptr_t ptr); /* arena whose region holds ptr; returned locked */
void ga_ctx_fork_child(void);

/* ---- stats.c ---- */
typedef struct ga_api_count {
    uint64_t calls, failed, bytes;
} ga_api_count_t;
typedef struct ga_global {
    pthread_mutex_t lock;   /* guards everything below and ptrs */
    ga_ptrmap_t ptrs;       /* platform and pass-through allocations; VMM handles */
    uint64_t alloc_calls, free_calls, failed_allocs;
    uint64_t driver_alloc_calls, driver_free_calls;
    uint64_t in_use, peak_in_use, reserved, peak_reserved;
    uint64_t passthrough, peak_passthrough;
    double max_fragmentation;
    uint64_t frag_failures, true_oom_failures; /* out-of-memory failures split by oom.c */
    ga_api_count_t by_api[GA_API_COUNT];
} ga_global_t;
extern ga_global_t ga_g;
extern uint64_t ga_alloc_time, ga_free_time; /* ga_now() ticks, under ga_g.lock */
uint64_t ga_ticks_to_ns(uint64_t ticks);
extern int ga_timing; /* time the hooks: stats or trace asked for */
uint64_t ga_now(void);
void ga_stats_start(void);
void ga_count_alloc(uint8_t api, uint64_t bytes, uint64_t rounded, int ok); /* ga_g.lock held */
void ga_count_free(uint8_t api, uint64_t rounded);                           /* ga_g.lock held */
void ga_count_reserve(int64_t delta, int driver_call);                        /* ga_g.lock held */
void ga_count_passthrough(int64_t delta);                                     /* ga_g.lock held */
void ga_stats_write(void);

/* ---- tracer.c ---- */
void ga_trace_start(void);
void ga_trace_event(uint8_t kind, uint8_t api, uint64_t addr, uint64_t size, uint64_t stream,
                    int dev, uint64_t t0, CUresult result);
void ga_trace_flush_all(void);
void ga_trace_fork_child(void);
extern int ga_tracing;

/* ---- oom.c: why an allocation failed (CUDA_ERROR_OUT_OF_MEMORY) ---- */
typedef struct ga_oom {
    int frag;       /* 1: enough bytes free in total (arena + growth room), none large enough */
    size_t len;     /* bytes of msg to print; 0: nothing (already said once, or warnings off) */
    char msg[2048];
} ga_oom_t;
/* Classifies a failed allocation of size on c and, the first time of each kind in the process,
 * builds its explanation. Arena mode: c->lock held (reads the arena). Platform mode: ga_g.lock
 * held, in_use and reserved the context's bytes (ignored when c has an arena). */
void ga_oom_classify(ga_oom_t *o, ga_ctx_t *c, uint8_t api, size_t size, uint64_t in_use,
                     uint64_t reserved);
void ga_oom_report(const ga_oom_t *o); /* prints the explanation, if any; no lock held */
void ga_oom_fork_child(void);            /* the child explains its own first failures */

/* ---- alloc.c ---- */
CUresult ga_do_alloc(CUdeviceptr *dptr, size_t bytesize, uint8_t api);
CUresult ga_do_free(CUdeviceptr dptr, uint8_t api);
CUresult ga_do_free_async(CUdeviceptr p, CUstream s, uint8_t api,
                          CUresult (*real_free)(CUdeviceptr, CUstream));

#endif
