/* gpuarena shim internals: the one header shared by the files of shim/.
 *
 * The shim hooks, caps, traces and reports; every allocation decision is a pool's (allocator/
 * ga_pool.h). Data flows one way: hook (alloc.c, passthrough.c, query.c) -> the context's pool
 * (ctx.c) -> the backend (backend.c) -> the real driver. Files by concern: init.c (lazy once-only
 * start, loading the real driver, fork), options.c (the options table, logging), interpose.c
 * (dlsym and cuGetProcAddress), ctx.c (devices and their caps, contexts; their pools made in ctx_pool.c), sync.c
 * (waits and trims over a device's contexts),
 * teardown.c (what a context's teardown does, and its hooks), backend.c (the pools' backend over the driver: regions, or VMM ranges and granules,
 * each under the device cap), alloc.c (the allocation hooks), query.c (cuInit, cuMemGetInfo,
 * pointer queries, IPC), passthrough.c (managed/async/pool/VMM calls of the program and the
 * runtime hooks), oom.c (the out-of-memory explainer), stats.c (counters and the JSON report),
 * tracer.c (GPUARENA_TRACE), outfile.c and outfile_kind.c (writing both files safely), fence.c
 * and fence_event.c (freed memory kept from reuse until the device has passed the free), capture.c (stream
 * captures under way, which the fence must not synchronise), meet.c (contexts learnt where the
 * program makes or pushes them), group.c and group_join.c
 * (GPUARENA_GROUP's shared ledger) and nvml.c (NVML's memory queries under the cap).
 * Shared state and its owner, each declared below with why: ga_real and the start flags (init.c,
 * written once before any hook proceeds), the thread flags ga_tl_busy and ga_tl_api (init.c), ga_opt (options.c, written once at start), ga_timing and
 * ga_tracing (stats.c, tracer.c: set at start, and at exit for the report, read by every hook to
 * skip the clock and the trace), devices and contexts (ctx.c, reached through functions). Nothing else is shared across
 * files.
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
#include <stdio.h>

#include "../allocator/ga_arena.h"
#include "../allocator/ga_pool.h"
#include "../allocator/ga_ptrmap.h"
#include "../allocator/ga_trace.h"
#include "ga_group.h"
#include "ga_nvml.h"
#include "mutex.h"

#define GA_EXPORT __attribute__((visibility("default")))
/* The stream a _ptsz entry point's hStream names: NULL there is the calling thread's per-thread
 * default stream, which every other call (an event record, a synchronisation) names
 * CU_STREAM_PER_THREAD; the legacy stream must then be named CU_STREAM_LEGACY, as it is. */
#define GA_PTSZ_STREAM(s) ((s) ? (s) : CU_STREAM_PER_THREAD)
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
    /* Driver functions the shim calls but does not hook (init.c resolves them by name). */
#define GA_UNHOOKED_LIST(X)                                                                   \
    X(cuCtxGetCurrent, (CUcontext *))                                                         \
    X(cuCtxGetDevice, (CUdevice *))                                                           \
    X(cuCtxGetApiVersion, (CUcontext, unsigned int *))                                        \
    X(cuDeviceTotalMem_v2, (size_t *, CUdevice))                                              \
    X(cuDeviceGetCount, (int *))                                                              \
    X(cuDeviceGetAttribute, (int *, CUdevice_attribute, CUdevice))                            \
    X(cuDevicePrimaryCtxGetState, (CUdevice, unsigned int *, int *))                          \
    X(cuStreamQuery, (CUstream))                                                              \
    X(cuEventCreate, (CUevent *, unsigned int))                                               \
    X(cuEventRecord, (CUevent, CUstream))                                                     \
    X(cuEventQuery, (CUevent))                                                                \
    X(cuEventDestroy_v2, (CUevent))                                                           \
    X(cuStreamGetId, (CUstream, unsigned long long *))                                        \
    X(cuStreamGetCtx, (CUstream, CUcontext *))                                                \
    X(cuStreamIsCapturing, (CUstream, CUstreamCaptureStatus *))                               \
    X(cuDeviceGetUuid_v2, (CUuuid *, CUdevice))                                               \
    X(cuDeviceGetUuid, (CUuuid *, CUdevice))                                                  \
    X(cuMemAddressReserve, (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))  \
    X(cuMemGetAllocationGranularity,                                                          \
      (size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags))                \
    X(cuMemPoolGetAttribute, (CUmemoryPool, CUmemPool_attribute, void *))                     \
    X(cuMemPoolTrimTo, (CUmemoryPool, size_t))                                                \
    X(cuDeviceGetDefaultMemPool, (CUmemoryPool *, CUdevice))
#define GA_UNHOOKED_FIELD(name, params) CUresult(*name) params;
    GA_UNHOOKED_LIST(GA_UNHOOKED_FIELD)
#undef GA_UNHOOKED_FIELD
} ga_real_t;

#define GA_HOOK(lib, name, ret, params, args) GA_EXPORT ret name params;
#include "hooks.def"
#undef GA_HOOK

extern ga_real_t ga_real; /* every file calls the driver through it; filled once by init.c */

/* ---- init.c ---- */
extern _Atomic int ga_init_done;     /* the inline ga_ensure_init of every hook reads it */
extern CUresult ga_init_error;        /* non-zero: options were bad or the driver is missing */
extern __thread int ga_tl_busy;       /* inside the shim's own calls into the driver or loader */
extern __thread uint8_t ga_tl_api;    /* set by the runtime hooks: the call came via cudaMalloc */
CUresult ga_init_slow(void);
/* A bad setting found after start (a cap that rounds to nothing): every hook refuses from now. */
void ga_init_fail(CUresult error);
/* Lazy once-only start; 0 when the shim is usable. Cheap after the first call. */
static inline CUresult ga_ensure_init(void)
{
    if (GA_LIKELY(atomic_load_explicit(&ga_init_done, memory_order_acquire))) {
        /* NOT_INITIALIZED: no driver yet, which a later call may find loaded (init.c) */
        CUresult e = __atomic_load_n(&ga_init_error, __ATOMIC_ACQUIRE);
        if (GA_LIKELY(e != CUDA_ERROR_NOT_INITIALIZED))
            return e;
    }
    return ga_init_slow();
}
GA_NO_SANITIZE void *ga_real_dlsym(void *handle, const char *name);
typedef void *(*ga_dlsym_fn_t)(void *, const char *);
GA_NO_SANITIZE ga_dlsym_fn_t ga_real_dlsym_fn(void); /* never NULL */
void *ga_libcuda_handle(void);
/* The file of the driver gpuarena uses, as the loader found it (GPUARENA_LIBCUDA's value or
 * libcuda.so.1 before it is loaded). */
const char *ga_libcuda_file(void);
/* Whether the object holding fn is a CUDA driver (interpose.c: by file name, or soname and exports;
 * never the shim); *file is then its file, as the loader names it. */
int ga_is_cuda_driver(void *fn, const char **file);
/* 1: the object loaded at fbase is this shim; 2: a copy of it (the same GNU build ID); 0: neither. */
int ga_is_shim_build(const void *fbase);
/* cuInit answered CUDA_ERROR_STUB_LIBRARY: says once that the driver loaded is the toolkit's stub. */
void ga_driver_is_stub(void);
/* nvml.c: the hook for an NVML name found through dlsym (remembering found as the real one). */
void *ga_nvml_hook_for(const char *symbol, void *found);
/* Resolves a runtime (libcudart) function late: the runtime may be loaded after the shim. */
void *ga_resolve_cudart(const char *name, void *hook);

/* Prologue of every driver hook: re-entrant calls and a failed start go straight out; a driver
 * that lacks the entry point (an older driver, a stand-in) gets CUDA_ERROR_NOT_FOUND, as the
 * loader would have refused the symbol without the shim, never a call through NULL. */
#define GA_HOOK_ENTER(name, args)                                                          \
    do {                                                                                  \
        if (GA_UNLIKELY(ga_tl_busy))                                                      \
            return ga_real.name ? ga_real.name args : CUDA_ERROR_NOT_INITIALIZED;         \
        CUresult ga_e_ = ga_ensure_init();                                                \
        if (GA_UNLIKELY(ga_e_ != CUDA_SUCCESS))                                           \
            return ga_e_;                                                                 \
        if (GA_UNLIKELY(!ga_real.name))                                                   \
            return CUDA_ERROR_NOT_FOUND;                                                  \
    } while (0)

/* ---- options.c ---- */
typedef enum { GA_LOG_ERROR = 0, GA_LOG_WARN, GA_LOG_INFO, GA_LOG_DEBUG } ga_log_level_t;
/* In this order: deferred and lazy (<= GA_FREE_SYNC_LAZY) both keep freed chunks pending. */
enum { GA_FREE_SYNC_DEFERRED = 0, GA_FREE_SYNC_LAZY = 1, GA_FREE_SYNC_DEVICE = 2, GA_FREE_SYNC_NONE = 3 };
typedef struct ga_options {
    ga_mode_t mode;          /* after loading, arena without preallocation is GA_MODE_GROW */
    int preallocate;
    double fraction;
    int fraction_grow;       /* "0.75+": may grow past the fraction up to the cap */
    char fraction_text[64];  /* the fraction as typed, blanks and '+' off ("0.75" by default):
                                what messages print, since %g wrote 1e-07, a value the parser
                                refuses, into the fix it gave */
    uint64_t limit_bytes;    /* 0: none given as bytes */
    double limit_percent;    /* 0: none given as a percentage */
    uint64_t vmm_keep;       /* vmm: wholly free granules kept mapped, bytes */
    int free_sync;           /* GA_FREE_SYNC_DEFERRED (default), _DEVICE or _NONE */
    int free_waits;          /* a cuMemFree of pool memory waits for the device (device mode,
                                platform mode): made first, with no lock held (alloc.c) */
    const char *stats;       /* NULL, a path, or "-" */
    const char *trace;
    ga_log_level_t log;
    const char *libcuda;     /* NULL: "libcuda.so.1" */
    const char *group;       /* GPUARENA_GROUP: NULL, or a valid group name */
    const char *group_dir;   /* GPUARENA_GROUP_DIR: where ledgers live (NULL: /dev/shm) */
} ga_options_t;
extern ga_options_t ga_opt; /* read by every file, written once at start (options.c) */
/* Parses every option once; returns the number of bad values (each already reported). */
int ga_options_load(void);
/* Says once per variable that a GPUARENA_* setting changed after it was read (it is not re-read). */
void ga_options_recheck(void);
void ga_options_print_help(void);
/* The options in force as a JSON object (the statistics' "options"); percent_cap: the cap a
 * percentage limit gave device 0 (0: not known yet). */
void ga_options_json(FILE *f, uint64_t percent_cap);
void ga_options_json_about(FILE *f); /* what each key ga_options_json writes means */
int ga_parse_size(const char *s, uint64_t *bytes, double *percent);
/* Messages are built in buffers of GA_MSG_MAX bytes (ga_group.h says why). */
void ga_log(ga_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- stats.c and tracer.c: stats.h ---- */
#include "stats.h"

/* ---- ctx.c: devices (caps) and contexts (pools) ---- */
/* How long a walk that passes closing contexts by waits for a lock at a time before it looks at
 * closing again (ga_dev_view, the fork prepare handler): a teardown sets it just after it takes
 * the lock, and any other holder lets go within an allocation's time. */
#define GA_CLOSING_POLL_NS 200000ull

typedef struct ga_dev {
    _Atomic int64_t committed; /* bytes held from the driver: pools + pass-through */
    uint64_t cap;              /* valid once known */
    const char *cap_var;       /* the variable that set the cap (a literal), NULL: the device's total */
    uint64_t physical_total;
    _Atomic int known;
    ga_mutex_t lock;           /* guards handles and counts */
    ga_ptrmap_t handles;       /* the program's cuMemCreate handles: key handle, size, aux
                                  GA_HANDLE_AUX(api, references, mappings) (passthrough.c) */
    ga_ptrmap_t maps;          /* their mappings (cuMemMap): key address, size, aux handle */
    ga_ptrmap_t refused;       /* vmm handles unmapped whose cuMemRelease the driver refused, of
                                  any context (one destroyed since too): key handle, size; still
                                  committed, retried at the device's next granule map or unmap
                                  (backend.c) */
    ga_ptrmap_t loose;         /* stream-ordered pass-through allocations whose context is gone
                                  (they outlive it, ga_ctx_drop): key pointer, size, aux api */
    ga_counts_t counts;        /* the program's cuMemCreate/cuMemRelease */
    /* Dead contexts whose states were reused (ctx.c, ga_ctx_reuse): how many, and their figures
     * summed, one "retired" record in the statistics; under lock. */
    uint64_t retired_n;
    ga_counts_t retired_counts;
    ga_stats_t retired_final;
    uint64_t retired_late_unmaps, retired_late_releases; /* their late_unmaps, late_releases */
    uint8_t uuid[16];          /* cuDeviceGetUuid(_v2); zero when the driver has neither */
    ga_group_t *group;         /* GPUARENA_GROUP's ledger for this device, or NULL */
    /* Dead contexts' vmm pools kept for stream-ordered blocks (orphans, teardown.c): how many, the
     * bytes of those blocks, what the pools map and their address space; kept up to date under
     * each orphan's lock, read without one by the out-of-memory explanation (oom.c). */
    _Atomic uint64_t orph_n, orph_bytes, orph_mapped, orph_va;
    /* Bytes of vmm granules the driver would not give back that no table could record (no host
     * memory): committed for good, as the device holds them (backend.c, keep_refused). */
    _Atomic uint64_t unrecorded;
    /* Bytes in live allocations on this device (pool blocks and pass-through, every context of
     * it), kept only in a group: its ledger slot shows this device's figures, not the process's
     * (ga_dev_in_use_add, ga_ctx_publish). */
    _Atomic int64_t in_use;
    /* Bytes committed whose driver call has not answered yet, kept only in a group: the ledger's
     * reserved figure and its peak leave them out (ga_dev_granted, ga_dev_refused). */
    _Atomic int64_t asking;
    _Atomic uint64_t granule;  /* vmm: the driver's recommended granularity, once known
                                  (ga_vmm_granule) */
    _Atomic uint64_t peers;    /* vmm: bit d set while a context on device d has peer access to a
                                  context on this one enabled: the pools' granules are mapped
                                  read/write for those devices too (backend.c) */
    _Atomic uint32_t peer_on[GA_MAX_DEVICES]; /* vmm: enables from device d's contexts not yet
                                  disabled; the bit goes at the last disable */
    /* The driver's memory pools pass-through stream-ordered blocks came from, as many as there are
     * (pools: npools of pool_cap, on the heap, grown and shrunk under pool_lock), and the bytes
     * they keep after frees, committed (mempool.c); under pool_lock, which is taken last. npools
     * is read unlocked to skip devices with none; 0 means pool_kept is 0. */
    ga_mutex_t pool_lock;
    _Atomic int npools;
    CUmemoryPool *pools;
    int pool_cap;
    uint64_t pool_kept;
    int pool_stale;            /* the figure may have moved: asked of the driver at the next settle */
} ga_dev_t;

/* A freed pool chunk waiting for the device (fence.c). */
typedef struct ga_pending {
    uintptr_t ptr;
    size_t size;      /* rounded */
    uint64_t sid;     /* the stream-ordered free's stream (ga_fence_stream_id; 0: none) */
    CUevent ev;       /* recorded on stream at the free; NULL: the next allocation synchronises */
    size_t req;       /* stream-ordered: the bytes the pool counts as requested for the chunk; 0:
                         not known (a cuMemAlloc block), so never handed over (fence.c) */
    uint64_t seq;     /* stream-ordered: the order of the event's record among the context's
                         (c->pend_seq), which on one stream is the order they pass in */
} ga_pending_t;

/* An event a free of a context's block made in another context (the free's stream's): it dies
 * with that context, so the context it was made in is kept with it (fence_event.c). */
typedef struct ga_fevent {
    CUevent ev;
    CUcontext made_in;
} ga_fevent_t;

/* A pass-through allocation freed with cuMemFreeAsync: the driver has it back, but the device
 * may still be using it until ev shows the stream passed the free, so its bytes stay committed
 * against the cap until then (fence_event.c). */
typedef struct ga_passfree {
    size_t size;
    CUevent ev;   /* NULL: none could be recorded nor the stream waited for (ga_fence_pass_hold) */
    uint64_t seq; /* its place in c->pf_seq (an entry with an event: the record's order) */
    uint64_t sid; /* with an event: the free's stream (ga_fence_stream_id; 0: not known) */
} ga_passfree_t;

typedef struct ga_ctx {
    CUcontext _Atomic ctx;   /* atomic, as dev: a dead state is reused for a new context, */
    _Atomic int dev;         /* while walks read them without a lock (ctx.c, ga_ctx_reuse) */
    _Atomic int dead;        /* destroyed: never matched again, its memory gone with it */
    _Atomic int peers;       /* another context on the device has been seen (ctx.c), so a
                                cuMemFree's wait covers those too (ga_dev_sync_others) */
    int driver_gone;         /* 1: the driver freed its memory (VMM objects excepted); 2: fork */
    ga_mutex_t lock;         /* guards everything below (mutex.h) */
    ga_pool_t *pool;         /* made at the first allocation; read unlocked only by ga_ctx_peek */
    ga_ptrmap_t pass;        /* pass-through allocations: key pointer, size, aux api */
    ga_ptrmap_t async;       /* stream-ordered allocations the pool served, live: key pointer,
                                size held, aux the bytes asked for (less than size for a chunk
                                handed over whole, fence.c); the driver keeps such memory
                                past cuCtxDestroy (teardown.c) */
    ga_ptrmap_t handed;      /* those of them in a chunk handed over whole (alloc.c): key pointer,
                                size (an int64_t) the bytes the pool counts as requested for the
                                chunk beyond the allocation's own, aux what the pool counts */
    int64_t req_excess;      /* the sum of handed's sizes: the pool's in_use_requested less it is
                                the live allocations' (ga_ctx_pool_stats) */
    _Atomic int orphan;      /* dead, but its vmm pool kept for those until they are freed */
    _Atomic int closing;     /* inside a teardown call, its lock held through it (teardown.c):
                                1 from the start, so that nothing waits for that lock but what
                                touches this context itself (another context's trim, memory
                                views and fork pass it by); 2 once it is quiesced, before the
                                driver's call: no other thread's driver call may name it then
                                (ga_ctx_sync_named), as it may not once it is dead */
    _Atomic int users;       /* threads about to name ctx in a driver call without its lock
                                (ga_ctx_sync_named): the teardown waits for none before the
                                driver's call (closing 2) */
    int fork_held;           /* its lock was taken by the fork prepare handler (ctx.c) */
    int unfenced;            /* a chunk came back unfenced (GPUARENA_FREE_SYNC=none) since the
                                context was last synchronised: vmm must sync before it unmaps */
    ga_counts_t counts;
    ga_stats_t final;        /* the pool's statistics when it was dropped */
    int has_final;
    /* The pool's driver calls after `final` was taken (its destroy, an orphan's trims; backend.c):
     * granules unmapped, ranges and regions freed. Counted in the statistics' totals, not in the
     * context's entry, which stays its pool as at teardown (helper-68 F9). */
    uint64_t late_unmaps, late_releases;
    size_t granularity;      /* vmm: the driver's recommended granularity */
    int va_warned;           /* vmm: a refused address reservation was reported (backend.c) */
    int va_refused;          /* vmm: the last address reservation was refused (the OOM line) */
    CUresult map_err;        /* vmm: the driver's code when it last refused a granule, 0 once one
                                maps again (backend.c; the OOM line names it) */
    ga_status_t alloc_st;    /* why the pool last refused an allocation: GA_ENOHOST (no host
                                memory for its records, or to make the pool) is not the device's
                                out-of-memory, and is explained apart (alloc.c) */
    CUresult release_err;    /* arena, grow, platform: the driver's code when it last refused
                                to free a region or block (backend.c); a platform cuMemFree
                                answers it */
    int release_gone;        /* platform: the block the last release named was one the driver
                                no longer held (freed past gpuarena, backend.c): it left the cap,
                                and the cuMemFree answers the driver's CUDA_ERROR_INVALID_VALUE */
    CUresult reserve_err;    /* arena, grow, platform: the driver's code when the pool's last
                                cuMemAlloc_v2 was refused (out-of-memory for the cap's refusal;
                                backend.c), cleared as each allocation starts (alloc.c): another
                                code than out-of-memory is the program's answer */
    ga_ptrmap_t stuck;       /* vmm granules the driver would not unmap (backend.c): key the
                                address, size, aux the handle; still committed */
    ga_ptrmap_t granules;    /* vmm granules mapped now (backend.c): key the address, size; their
                                access widened when a peer device enables access */
    ga_pending_t *pend;      /* freed chunks not yet returned to the pool (fence.c) */
    size_t npend, cap_pend;
    size_t npend_ev;         /* of them, stream-ordered (with an event) */
    uint64_t pend_gen;       /* changes whenever an entry leaves the list (frees only append) */
    uint64_t pend_seq;       /* events recorded for stream-ordered frees (ga_pending_t.seq) */
    uint64_t own_gen;        /* the list as the program's cuCtxSynchronize left it: own_n entries */
    size_t own_n;            /* kept only for the device's other contexts (own context passed) */
    uint64_t pend_bytes;
    CUresult sync_refused;   /* the last wait for them before an out-of-memory was refused with
                                this (sync.c; 0: it was not): what the out-of-memory says (oom.c) */
    ga_ptrmap_t pend_set;    /* the pending pointers, for double-free checks */
    ga_passfree_t *pfree;    /* pass-through memory freed async, still committed (fence_event.c) */
    size_t npfree, cap_pfree;
    uint64_t pf_seq;         /* pfree entries made so far (their order, ga_passfree_t.seq) */
    CUevent events[32];      /* a free list of events, all made in ctx (fence_event.c) */
    size_t nevents;
    ga_fevent_t *fev;        /* events made in other contexts, held by entries above (a free on
                                another context's stream): destroyed when done, never kept, and
                                before the context they were made in goes */
    size_t nfev, cap_fev;
    uint64_t own_sid[4];     /* IDs of streams found to be ctx's (ga_fence_stream_id) */
    unsigned own_next;
    int lvl_own;             /* 1: this context keeps the IN_USE level itself (ctx.c) */
    int grp;                 /* 1: its device has a group, whose ledger shows our figures */
    uint32_t pub_calls;      /* level changes, and bytes moved, since they were last shown */
    uint64_t pub_moved;
    _Atomic int64_t lvl_in_use;  /* while lvl_own: the process's in_use and its peak, written */
    _Atomic uint64_t lvl_peak;   /* under the lock, read by the statistics without it */
    uint64_t orph_mapped, orph_va; /* an orphan: its share of its device's orph_ figures */
    struct ga_ctx *_Atomic next;
    /* Which context the state is for: bumped each time a dead state is reused (ga_ctx_reuse), so
     * a caller that let the lock go (a pass-through driver call) can tell the state it started
     * from from another context's that took its place (passthrough.c, ga_pass_end). */
    _Atomic unsigned life;
} ga_ctx_t;

/* The device table (ctx.c owns it): dev must be in [0, GA_MAX_DEVICES). */
ga_dev_t *ga_dev(int dev);
/* Computes the cap of dev once (the driver must be initialised); 0 when it is not known. */
int ga_dev_setup(int dev);
int ga_dev_commit(int dev, uint64_t bytes);   /* 1 ok (2: in a group), 0 past the cap */
/* Every commit is answered by one of these once the driver answered: granted (it holds them: the
 * ledger's reserved figure and peak count them from now on), or refused (uncommitted). */
void ga_dev_granted(int dev, uint64_t bytes);
void ga_dev_refused(int dev, uint64_t bytes);
void ga_dev_uncommit(int dev, uint64_t bytes);
/* backend.c: says (once) that the driver no longer holds size bytes gpuarena counted at base,
 * freed by a path gpuarena did not see; how: what showed it. */
void ga_gone_said(uintptr_t base, size_t size, const char *how);
/* backend.c: 1 when the driver knows no allocation at ptr (CUDA_ERROR_INVALID_VALUE from
 * cuPointerGetAttribute), asked after it refused to free ptr. */
int ga_driver_unknown(uintptr_t ptr);
void ga_dev_hold(int dev, uint64_t bytes);     /* committed whatever the cap says: held already */
uint64_t ga_dev_held(int dev);
uint64_t ga_dev_room(int dev); /* what the cap (and the group's) lets the process commit now */
/* backend.c: bytes of vmm granules the driver refused to give back, held against the cap (this
 * context's still mapped ones and the device's unreleased ones). c->lock held. */
uint64_t ga_vmm_refused_bytes(const ga_ctx_t *c);
/* 1 when a vmm pool holds the driver handle h for one of its granules (mapped, or kept mapped
 * after a refused unmap): none of the program's to release. Takes each context's lock in turn;
 * none held by the caller. */
int ga_vmm_holds_handle(uint64_t h);
/* What the program may still allocate on dev and the total it is told: the cap less what the
 * process (in a group: the group) holds, plus what is free inside this process's pools, never
 * above the driver's own free bytes plus that (phys_free, phys_total: the driver's answer). self:
 * the asking context, for which another pool's free part counts only when it could be given back
 * (device.c); NULL (NVML from a thread with no context on dev): every pool's free part counts. */
void ga_dev_view(int dev, const ga_ctx_t *self, uint64_t phys_free, uint64_t phys_total,
                 uint64_t *free, uint64_t *total);
/* Leaves every group ledger (at exit). */
void ga_dev_close_groups(void);
/* The pools' share of a cap (GPUARENA_MEM_FRACTION), aligned down to GA_ALIGN. */
uint64_t ga_share_of(uint64_t cap);
/* The calling thread's current context state, NULL without a current context, or when the state
 * of the current context could not be made (no host memory): ga_current_unmade then says so. */
ga_ctx_t *ga_current(void);
/* ga_current with the state's life and device as one state's (both NULL-safe on no state). */
ga_ctx_t *ga_current_life(unsigned *life, int *dev);
/* After ga_current gave NULL on this thread: the device of a current context whose state could not
 * be made, or -1 (no context current). A hook then refuses what it would have counted, as
 * ga_refuse_unmade does: passed to the driver it escaped the cap (helper-47 F2). */
int ga_current_unmade(void);
/* 1 when the driver says no context is current on this thread. The calls on a pool pointer that
 * the driver refuses then (cuMemFree, cuMemGetAddressRange, cuIpcGetMemHandle, cuMemFreeAsync on
 * the current context's stream: CUDA_ERROR_INVALID_CONTEXT) are refused as it refuses them
 * (helper-46 F5, helper-49 F8); a driver that cannot say (not initialised) gives 0. */
static inline int ga_none_current(void)
{
    CUcontext cur = NULL;
    return ga_real.cuCtxGetCurrent && ga_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && !cur;
}
/* The driver's own answer, for a call on a pool pointer that needs a live current context, to
 * whether this thread has one: CUDA_SUCCESS, or its error (CUDA_ERROR_INVALID_CONTEXT: none;
 * CUDA_ERROR_CONTEXT_IS_DESTROYED: one another thread destroyed, which stays current here, or a
 * primary context released to its end). Asked of cuCtxGetDevice, which needs one as those calls
 * do: a context that is current but destroyed was taken for a live one, and the call answered
 * from the pools (an outside check, 2026-12-06). A driver without it: ga_none_current. */
static inline CUresult ga_current_status(void)
{
    CUdevice dev;
    if (ga_real.cuCtxGetDevice)
        return ga_real.cuCtxGetDevice(&dev);
    return ga_none_current() ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}
/* The driver's own answer to whether it was initialised: CUDA_SUCCESS, or what every call before
 * cuInit answers (CUDA_ERROR_NOT_INITIALIZED), asked of cuDeviceGetCount. For a call the shim
 * refuses for its arguments, which the driver checks after its state: before cuInit such a call
 * answered CUDA_ERROR_INVALID_VALUE, and cuMemCreate read a `prop` the driver never looks at then
 * (a SIGSEGV where the driver answers 3: an outside check, 2026-12-07). */
static inline CUresult ga_init_status(void)
{
    int n;
    return ga_real.cuDeviceGetCount ? ga_real.cuDeviceGetCount(&n) : CUDA_SUCCESS;
}
/* The code for a call refused for its arguments, in the driver's order: not initialised; then
 * `bad`, the driver's check of its other arguments (a stream it does not know), when given; then,
 * for a call that needs one (need_ctx), no live context current; else CUDA_ERROR_INVALID_VALUE. */
#define GA_REFUSAL_CODE(bad, need_ctx)                                                            \
    ({                                                                                            \
        CUresult rc_ = ga_init_status();                                                          \
        if (rc_ == CUDA_SUCCESS)                                                                  \
            rc_ = (bad);                                                                          \
        if (rc_ == CUDA_SUCCESS && (need_ctx))                                                    \
            rc_ = ga_current_status();                                                            \
        rc_ != CUDA_SUCCESS ? rc_ : CUDA_ERROR_INVALID_VALUE;                                     \
    })
/* Writes the message and returns CUDA_ERROR_OUT_OF_MEMORY for an allocation of bytes by `what`
 * refused because the current context's state could not be made. */
CUresult ga_refuse_unmade(const char *what, size_t bytes);
/* Says that an allocation (`what`, bytes) is refused with CUDA_ERROR_OUT_OF_MEMORY because gpuarena
 * had no host memory for `whose` bookkeeping: not the device, not the cap (oom.c). A warning the
 * first time, debug lines after. Returns CUDA_ERROR_OUT_OF_MEMORY. */
CUresult ga_refuse_nohost(const char *what, const char *whose, size_t bytes);
/* The context state this thread last found current, or NULL: none, or a context has died since
 * (ga_ctx_last_fresh then asks the driver again, with no lock held: ga_current). */
ga_ctx_t *ga_ctx_last(void);
ga_ctx_t *ga_ctx_last_fresh(void);
/* The context list, newest first (never freed: stale handles never match, dead ones are marked). */
ga_ctx_t *ga_ctx_first(void);
/* The state of ctx, a context of device dev that need not be current, made if it has none (the
 * live one if it has); NULL without host memory for it. */
ga_ctx_t *ga_ctx_make(CUcontext ctx, int dev);
/* The live context state of ctx, or NULL when gpuarena has none for it. */
ga_ctx_t *ga_ctx_of(CUcontext ctx);
/* A context gpuarena had no state for, found by this thread's stream-ordered free as its stream's
 * (fence_event.c); met (given state, so that the waits over the device's and the process's
 * contexts include it) by ga_ctx_meet_unseen once the free has let every lock go (sync.c). */
extern __thread CUcontext ga_tl_unseen;
void ga_ctx_meet_unseen(void);
/* ctx, just made current by this thread (cuCtxCreate, cuCtxPushCurrent, cuCtxSetCurrent: meet.c),
 * gets its state now if it has none, so the fence waits for its kernels from then on (ctx.c). */
void ga_ctx_meet(CUcontext ctx);
static inline ga_ctx_t *ga_ctx_next(ga_ctx_t *c)
{
    return atomic_load(&c->next);
}
/* The IN_USE level, the one level every allocation and free changes. A process-wide atomic per
 * call kept two contexts from scaling and cost two atomic operations per free+alloc pair, so
 * while the process has had one context only, that context keeps the level (and its peak) under
 * its own lock; when a second context appears, or memory outside any pool is counted, the figures
 * are folded into the atomics once and every context uses them from then on. The peak of the sum
 * stays exact: the atomics and a private context never both hold part of the level.
 * ga_ctx_level_add: c->lock held. ga_ctx_level_owner: the context keeping it, or NULL.
 * ga_ctx_level_share: folds the private figures (no context lock may be held). */
void ga_ctx_level_add(ga_ctx_t *c, int64_t delta);
/* A group member's figures for `gpuarena top`, shown in the ledger now and then (ctx.c). */
void ga_ctx_publish(ga_ctx_t *c, int64_t delta);
ga_ctx_t *ga_ctx_level_owner(void);
void ga_ctx_level_share(void);
/* Makes ctx current for a driver call from a thread where it may not be, with cancellation
 * disabled until ga_ctx_leave (a lock is held around such calls). */
int ga_ctx_enter(CUcontext ctx);
void ga_ctx_leave(int pushed);
/* Cancellation disabled around a driver call made under a lock (ctx.c): begin's result to end. */
int ga_nocancel_begin(void);
void ga_nocancel_end(int was_enabled);
/* The context's pool, made at first use; c->lock held and c alive. NULL: *err says why. */
ga_pool_t *ga_ctx_pool(ga_ctx_t *c, CUresult *err);
static inline ga_pool_t *ga_ctx_peek(ga_ctx_t *c)
{
    return __atomic_load_n(&c->pool, __ATOMIC_ACQUIRE);
}
/* What ga_with_owner found about a pointer: in_pass 1 when it is one of the context's pass-through
 * pointers; live_size the rounded size of the pool's live allocation starting at it (0 when it
 * starts none: an interior or freed address, which the pool explains). */
typedef struct ga_owner {
    int in_pass;
    size_t live_size;
} ga_owner_t;
typedef int (*ga_owner_fn)(ga_ctx_t *c, const ga_owner_t *o, void *arg);
/* Runs fn(c, owner, arg) under c's lock (taken and released inside) for the live context c whose
 * pool or pass-through table holds ptr, and returns fn's answer; `none` when no context holds it.
 * fn must not take another context's lock. */
int ga_with_owner(uintptr_t ptr, ga_owner_fn fn, void *arg, int none);
/* Gives back idle memory of every pool on dev (before an out-of-memory is reported), one context
 * lock at a time: the caller holds none. Returns the bytes given back. */
size_t ga_dev_trim(int dev);
/* c's share of that (the caller holds no lock): its pending frees waited for and returned, then
 * its pool trimmed. Every wait is made with c's lock let go, the driver's cuMemFree of an empty
 * region included (it may wait for the device: the device is synchronised first). Returns the
 * bytes given back. */
size_t ga_ctx_give_back(ga_ctx_t *c);
/* Before a stream capture begins on dev: the chunks its contexts' cuMemFree left pending are
 * waited for (one synchronisation of the device) and returned while that is still allowed; during
 * the capture nothing could return them (capture.c). The caller holds no lock. */
void ga_dev_settle_pending(int dev);
/* Synchronises every live context on dev, one at a time (no context lock is taken: the caller may
 * hold one, though a wait under a lock stalls every thread that needs it). */
CUresult ga_dev_sync(int dev);
/* The same but for self: the fence's synchronisation of a cuMemFree covers the other contexts on
 * the device too, whose work may use the memory, as the driver's own cuMemFree waits for the
 * device (helper-42 F2). Nothing to do, and no driver call, when self is the device's only one.
 * Each returns the first synchronisation the driver refused (CUDA_SUCCESS when none was), after
 * trying every context: a refused one waited for nothing. */
CUresult ga_dev_sync_others(int dev, const ga_ctx_t *self);
/* 1 if a context other than self, not destroyed, is on self's device (a walk, no lock). */
int ga_dev_live_peer(const ga_ctx_t *self);
/* c's context first (when alive), then the others on its device: a cuMemFree's wait. */
CUresult ga_ctx_sync_device(const ga_ctx_t *c);
/* Gives back, without waiting, the async-freed pass-through memory of dev's contexts (every
 * device's for -1) whose streams have passed the free, so that a view of the device (cuMemGetInfo)
 * does not count it (ctx.c); pool: also the pool's stream-ordered frees so passed
 * (ga_fence_events_passed), after the program's stream and event waits. */
void ga_dev_pass_passed(int dev, int pool);
/* The same for every device from the exit path: a context whose lock is held is skipped. */
void ga_pass_passed_at_exit(void);
/* ---- mempool.c: what the driver's memory pools keep of pass-through stream-ordered memory ---- */
/* A pass-through stream-ordered block p was served on dev: its pool is noted (no lock held).
 * 0 when the device's pool list could not grow (no host memory): *unlisted gets the pool, and the
 * caller gives the block back and calls ga_mempool_unlisted. */
int ga_mempool_note(int dev, CUdeviceptr p, CUmemoryPool *unlisted);
/* The pool of a block refused by ga_mempool_note, the block given back: trimmed, so that it keeps
 * nothing the cap does not count. 0 when the driver would not trim it. */
int ga_mempool_unlisted(CUmemoryPool pool);
/* A pass-through block's bytes leave the live figures: they stay committed as kept by dev's pools
 * when dev has pools noted (the next settle asks the driver), else leave the cap. Any lock held. */
void ga_mempool_gone(int dev, uint64_t bytes);
/* Asks the driver what dev's pools keep and commits that (trim: trims them to 0 first); returns
 * the bytes that left the cap. No driver call for a device with no pool noted. */
uint64_t ga_mempool_settle(int dev, int trim);
void ga_mempool_settle_all(void); /* after the program's synchronisations */
uint64_t ga_mempool_kept(int dev);
void ga_mempool_fork_child(ga_dev_t *dv);
/* The device whose memory pool blocks come from (a pool the program created, or a device's
 * default pool), or -1 when not known: asked before a cuMemAllocFromPoolAsync is counted. */
int ga_mempool_device(CUmemoryPool pool);
/* Context `dying` is about to be torn down (no lock held, before the driver's call): its events
 * die with it, and the driver may give their handles to new ones, so every pending entry of
 * another context whose event was made in it is waited for now and done with, the event destroyed
 * while it is still valid (ctx.c, with fence_event.c's ga_fence_foreign_dying). */
void ga_ctx_foreign_dying(CUcontext dying);
/* ga_dev_commit for a pass-through allocation of context c (may be NULL): what the device has
 * passed, then the device's idle memory, before a refusal (ctx.c). */
int ga_dev_commit_pass(ga_ctx_t *c, int dev, uint64_t bytes);
void ga_ctx_fork_child(void);
void ga_ctx_atfork_prepare(void);
void ga_ctx_atfork_parent(void);
/* Contexts died: every thread's cached current context is checked again at its next use. */
void ga_ctx_forget_cached(void);

/* ---- teardown.c: a context's teardown and its hooks ---- */
/* A destroyed context's vmm pool kept for its stream-ordered blocks (ga_ctx_t.orphan) is found by
 * ga_with_owner too; this frees one of those blocks (c->lock held, the device past the free):
 * CUDA_SUCCESS, or CUDA_ERROR_INVALID_VALUE with *refused saying why. */
CUresult ga_orphan_free(ga_ctx_t *c, CUdeviceptr p, uint8_t api, uint64_t t0, ga_status_t *refused);
/* A free of p, which no live context holds, when it is a stream-ordered pass-through allocation
 * that outlived its context: the driver's free (real_free on s, or cuMemFree_v2), then its bytes
 * leave the cap (once s passes the free, when a context is current). Its device, and the driver's
 * answer in *r, when p was one (the trace records the free there); -1 otherwise. */
int ga_dev_free_loose(uint64_t p, uint8_t api, uint64_t t0, CUresult (*real_free)(CUdeviceptr, CUstream),
                      CUstream s, CUresult *r);
/* Stream-ordered pass-through memory of context c (cuMemAllocAsync, cuMemAllocFromPoolAsync)
 * outlives it in the driver: e's record moves to the device's table, still counted, where its free
 * finds it (ga_dev_free_loose). 1 when it moved, 0 for any other kind. c->lock held. */
int ga_pass_outlives(ga_ctx_t *c, const ga_pentry_t *e);
/* The child of a fork: the teardown hooks' lock made anew (ga_ctx_fork_child). */
void ga_teardown_fork_child(void);

/* ---- backend.c: the pools' backend, the real driver under the device cap ---- */
/* Fills be for c's pool in the configured mode; non-zero (with *err) when the driver cannot
 * serve that mode (vmm without the VMM entry points). */
int ga_backend_for(ga_ctx_t *c, ga_pool_backend_t *be, CUresult *err);
/* vmm: dev's granule (what a pool maps at a time), asked of the driver once; 0 when not known. */
uint64_t ga_vmm_granule(int dev);

/* ---- fence.c (the pending list, its synchronisations) and fence_event.c (the events of
 * stream-ordered frees, pass-through memory freed async, a context's entries at its teardown):
 * freed memory is reused only once the device has passed the free; c->lock held ---- */
/* Records ptr (a live pool chunk of rounded size) as freed: stream-ordered on s (an event), or for
 * the next allocation's synchronisation. An error (a stream the driver refuses) frees nothing.
 * req: stream-ordered, the bytes the pool counts as requested for the chunk (0: not known). */
CUresult ga_fence_free(ga_ctx_t *c, uintptr_t ptr, size_t size, CUstream s, int stream_ordered,
                       size_t req);
/* ga_fence_free's answer for a stream-ordered free it could not fence with an event (none to be
 * had, a record refused, no host memory to remember it): nothing freed; the caller synchronises s
 * with no lock held and frees again, synchronised. Not a driver code. */
#define GA_FENCE_WAIT_FIRST ((CUresult)0x7ffffff0)
int ga_fence_is_pending(const ga_ctx_t *c, uintptr_t ptr);
/* A pending chunk freed on stream s, of at least size bytes (and at most twice), taken whole;
 * *got: its size (the live allocation it becomes), *req: the bytes the pool counts as requested
 * for it. Only chunks whose requested bytes are known (ga_pending_t.req) are taken. */
int ga_fence_take_same_stream(ga_ctx_t *c, CUstream s, size_t size, uintptr_t *out,
                              size_t *got, size_t *req);
/* ---- alloc.c: the stream-ordered blocks' records (c->async, c->handed), c->lock held ---- */
/* A c->async record's allocation as the range queries give it: the bytes asked for, rounded to
 * GA_ALIGN as the pool rounds every block. */
uint64_t ga_async_asked(const ga_pentry_t *e);
/* The bytes the pool counts as requested for the live stream-ordered block at p; 0: none. */
size_t ga_async_pool_req(const ga_ctx_t *c, uintptr_t p);
/* p's records dropped (freed, or gone with an orphan pool). */
void ga_async_forget(ga_ctx_t *c, uintptr_t p);
/* Every record dropped, their tables freed. */
void ga_async_fini(ga_ctx_t *c);
/* The pool's figures with in_use_requested the live allocations' (less c->req_excess). */
void ga_ctx_pool_stats(const ga_ctx_t *c, ga_stats_t *out);
/* A pass-through allocation of size bytes that cuMemFreeAsync gave back to the driver on s: 1 when
 * it is kept committed until the device passes the free (an event), 0 when the caller gives its
 * bytes back once it has synchronised s, with no lock held. */
int ga_fence_pass_free(ga_ctx_t *c, size_t size, CUstream s);
/* Gives back the bytes of every async-freed pass-through allocation the device has passed (wait:
 * waits for all of them); returns how many. */
uint64_t ga_fence_pass_reclaim(ga_ctx_t *c, int wait);
/* A pass-through free whose stream could not be waited for: its bytes kept on c's list, with no
 * event, until a synchronisation of the device made after it passes them (ga_fence_pass_synced
 * with the c->pf_seq read before that synchronisation). c->lock held; 0: no host memory. */
int ga_fence_pass_hold(ga_ctx_t *c, size_t size);
uint64_t ga_fence_pass_synced(ga_ctx_t *c, uint64_t seq);
/* A pass-through free on s with no event: s waited for (no lock held); 1 when it passed, so its
 * bytes go back; 0 when refused: they stay committed, held on c's list while c is still in the
 * life the caller read (c may be NULL: for good). */
int ga_pass_unwaited(ga_ctx_t *c, unsigned life, CUstream s, size_t size);
/* GPUARENA_FREE_SYNC=lazy: 1 when an allocation of size may go ahead with chunks still pending
 * (the pool serves it without them, and they are within bounds); counted. */
int ga_fence_lazy_ok(ga_ctx_t *c, size_t size);
/* Before an allocation of size while chunks are pending (c->lock held): returns those whose events
 * show them passed, and says 1 when cuMemFree's chunks need a synchronisation (under lazy only
 * when ga_fence_lazy_ok says no). The caller then waits with the lock let go: ga_fence_mark_held,
 * unlock, ga_fence_sync_unlocked, lock, ga_fence_passed (fence.c says why). */
int ga_fence_before_alloc(ga_ctx_t *c, size_t size);
/* Returns to the pool the stream-ordered frees whose events say their streams passed them
 * (queried, never waited for; c->lock held): before an allocation, and at exit for the report. */
void ga_fence_events_passed(ga_ctx_t *c);
void ga_fence_drop(ga_ctx_t *c);
/* Events made in other contexts held by any context's entries: a hint (ga_ctx_foreign_dying
 * costs one load without them). */
int ga_fence_foreign_held(void);
/* c's pending entries whose event was made in `dying`: waited for, returned, the event destroyed
 * (c->lock held, c alive). */
void ga_fence_foreign_dying(ga_ctx_t *c, CUcontext dying);
/* The program's own cuCtxSynchronize (fence.c): ga_fence_mark before the real call (no lock held)
 * notes which entries are pending; ga_fence_synced after it succeeded returns those to the pool. */
typedef struct ga_fence_mark {
    size_t n;
    uint64_t gen;
    size_t npfree; /* async-freed pass-through allocations waiting then (ga_fence_pass_free) */
    int others;    /* every entry was passed by its own context already: wait for the others */
} ga_fence_mark_t;
ga_fence_mark_t ga_fence_mark(ga_ctx_t *c);
void ga_fence_synced(ga_ctx_t *c, ga_fence_mark_t m);
/* The allocation's wait (ga_fence_before_alloc): the mark with c->lock held, the wait without it,
 * the marked entries back with it held again. */
static inline ga_fence_mark_t ga_fence_mark_held(const ga_ctx_t *c)
{
    ga_fence_mark_t m = {.n = c->npend, .gen = c->pend_gen, .npfree = 0,
                         .others = c->own_gen == c->pend_gen && c->own_n == c->npend};
    return m;
}
/* 0 when the wait succeeded: only then may ga_fence_passed return the marked entries. */
CUresult ga_fence_sync_unlocked(ga_ctx_t *c, ga_fence_mark_t m);
void ga_fence_passed(ga_ctx_t *c, ga_fence_mark_t m);
/* cuMemFree's pending bytes of c while a stream capture runs on its device (nothing can return
 * them before it ends); 0 otherwise. c->lock held. */
uint64_t ga_fence_capture_held(const ga_ctx_t *c);
/* vmm: the bytes of whole granules (g bytes each) inside c's pending chunks, less those a capture
 * holds back: what their return frees for certain. c->lock held. */
uint64_t ga_fence_pending_granules(const ga_ctx_t *c, uint64_t g);
/* Which stream s is, unique in the process (cuStreamGetId), 0 when not known (fence_event.c). */
uint64_t ga_fence_stream_id(CUstream s);

/* ---- capture.c: stream captures under way ---- */
/* How many captures are under way (capture.c owns and writes it). Shared with every file so that
 * the fence's test on each allocation after a free is one load inline, not a call into capture.c
 * (a call there cost the arena hot path 12 instructions a pair, scripts/bench-shim-instr.sh). */
extern _Atomic int ga_cap_n;
int ga_capture_on_dev_slow(int dev);
/* Context ctx is gone (a teardown the driver made): its streams' captures are over. */
void ga_capture_ctx_gone(CUcontext ctx);
/* The child of a fork: no capture of the parent's is its own. */
void ga_capture_fork_child(void);
/* 1 when s is a stream being captured (or whose capture was invalidated): what is queued on it
 * goes into a graph. One load while no capture runs. */
int ga_capture_stream(CUstream s);
/* 1 while a stream capture may be under way on a context of dev: nothing may synchronise those
 * contexts then. */
static inline int ga_capture_on_dev(int dev)
{
    return GA_UNLIKELY(atomic_load_explicit(&ga_cap_n, memory_order_acquire)) &&
           ga_capture_on_dev_slow(dev);
}

/* ---- oom.c: why an allocation failed (CUDA_ERROR_OUT_OF_MEMORY) ---- */
typedef struct ga_oom {
    int frag;       /* 1: enough bytes free in total (pool + growth room; vmm: mapped bytes no
                     * live block covers), none large enough */
    size_t len;     /* bytes of msg to print; 0: nothing (already said once, or warnings off) */
    char msg[2048];
} ga_oom_t;
/* Classifies a failed allocation of size on c (c->lock held) and, the first time of each kind in
 * the process, builds its explanation. */
void ga_oom_classify(ga_oom_t *o, ga_ctx_t *c, uint8_t api, size_t size);
void ga_oom_report(const ga_oom_t *o); /* prints the explanation, if any; no lock held */
/* A pass-through allocation (cuMemCreate, managed, pool, v1) on device dev refused for want of
 * memory, by the cap (cap_refused) or the driver: once, that c's arena holds it free (c: a context
 * on dev, or NULL; returns 0), else what the process holds against the cap (a true
 * out-of-memory: returns 1) (oom.c). No lock held. */
int ga_oom_explain_pass(ga_ctx_t *c, int dev, uint8_t api, size_t size, int cap_refused);
void ga_oom_fork_child(void);            /* the child explains its own first failures */

/* ---- alloc.c ---- */
CUresult ga_do_alloc(CUdeviceptr *dptr, size_t bytesize, uint8_t api);
CUresult ga_do_free(CUdeviceptr dptr, uint8_t api);
CUresult ga_do_free_async(CUdeviceptr p, CUstream s, uint8_t api,
                          CUresult (*real_free)(CUdeviceptr, CUstream));
CUresult ga_status_to_cu(ga_status_t st);
/* cuMemAllocAsync served from the current context's pool: 1 served (*r its result), 0 not a pool
 * mode (pass it through). */
int ga_do_alloc_async(CUdeviceptr *dptr, size_t size, CUstream s, uint8_t api, CUresult *r);
/* A stream-ordered allocation (cuMemAllocAsync, cuMemAllocFromPoolAsync) is its stream's context's:
 * "The allocation comes from the memory pool current to the stream's device" (cuMemAllocAsync),
 * and a created stream names its context whether it is current or not (none: a framework's
 * allocator thread; another device's). The hook makes that context current for its whole call,
 * so that its pool serves the block, its device's cap is charged and the driver's calls are made
 * there (helper-48 F3: passed on uncapped with no context current, served from the current
 * device's pool with another current). NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name the
 * current context; a stream the driver refuses is left to its answer. The result goes to
 * ga_ctx_leave (0: nothing was pushed). */
int ga_stream_ctx_enter(CUstream s);

#endif
