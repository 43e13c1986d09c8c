/* simcuda: the simulated CUDA driver's test-instrument API.
 *
 * test/sim builds $(BUILD)/sim/libcuda.so.1, a stand-in for the real CUDA driver that runs on host
 * memory, so the shim and the examples can be tested on machines without a GPU. It exports the real
 * driver entry points with their real ABIs (sim_procs.h lists every one with the CUDA version that
 * introduced it, which is what the versioned cuGetProcAddress answers from) and, besides them, the
 * functions below: an independent observer that tells a test what actually reached the driver. This
 * header needs no cuda.h, so any test can include it.
 *
 * Configuration (environment, read once at first driver call), in the grammar of the shim's
 * GPUARENA_* settings: sizes by the one size grammar (allocator/ga_size.h, test/sizes.tsv), counts
 * and durations as digits alone (no unit, sign or fraction), on/off as true/false, 1/0, yes/no or
 * on/off in any case, blanks around ignored in every one (test settings_one_grammar):
 *   SIMCUDA_DEVICES           number of devices, 1..16 (default 1)
 *   SIMCUDA_TOTAL_MEM         bytes per device, plain or with a unit: 8GiB, 512MiB, 8G (binary),
 *                             8GB (decimal) (default 8GiB)
 *   SIMCUDA_LATENCY_NS        busy-wait added to every allocation and free call, nanoseconds,
 *                             0..10000000000 (default 0)
 *   SIMCUDA_CONTEXT_OVERHEAD  bytes each live context takes from its device total, a size or zero
 *                             in any spelling (0, 0MiB) (default 0)
 *   SIMCUDA_SHARED            a name: device memory is counted across every process started with
 *                             it, in /dev/shm/simcuda-NAME (see sim_shared.c): each device's total
 *                             holds for all of them together, cuMemGetInfo shows what all use, and
 *                             the memory of a process that died (SIGKILL too) is given back at the
 *                             next look. Processes sharing a name must agree on SIMCUDA_DEVICES and
 *                             SIMCUDA_TOTAL_MEM. Unset: each process has the devices to itself.
 *   SIMCUDA_UUID_SEED         any text: cuDeviceGetUuid(_v2) gives each device a UUID made from its
 *                             ordinal and this seed, the same in every process (default: fixed)
 *   SIMCUDA_VMM_GRANULARITY   cuMemGetAllocationGranularity's answer, minimum and recommended alike:
 *                             a power of two of at least a host page (default 2MiB, as on GPUs)
 *   SIMCUDA_VMM               off (0, false, no): the devices have no virtual memory management (the attribute
 *                             CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0,
 *                             cuMemCreate and cuMemAddressReserve answer CUDA_ERROR_NOT_SUPPORTED),
 *                             as some vGPU and WSL setups; on (1, the default): they have it
 *   SIMCUDA_STREAM_DELAY_US   microseconds, a whole number 0..10000000 (default 0): how long every
 *                             copy, set, stand-in kernel and cuMemFreeAsync waits on its stream's
 *                             worker before it acts (see Streams below). 0: such work runs at once
 *                             in the calling thread whenever its stream and the streams it must
 *                             wait for are idle, as before streams were real.
 *   SIMCUDA_REPORT            path: counters written as JSON at exit (tmp file + rename)
 *   SIMCUDA_FAIL              entry:n[+][:code],...  the n-th call (1-based, counted per exported
 *                             entry point since start or simcuda_reset_counters) of that entry point
 *                             fails with CUDA_ERROR_OUT_OF_MEMORY or the code given (a number or a
 *                             CUDA_ERROR_* name); "n+": that call and every later one. The entry is
 *                             the exported symbol (cuMemAlloc_v2, cuMemAllocAsync_ptsz). A failed
 *                             call returns before it looks at its arguments: it changes no state,
 *                             only its counters (and failed_allocs for an allocation call).
 * A bad value prints "gpuarena: simcuda: ..." on stderr and makes cuInit fail with
 * CUDA_ERROR_INVALID_VALUE.
 *
 * Accounting rules (what the counters mean):
 *  - bytes are counted exactly as requested (cuMemAllocPitch: pitch * height), not rounded, so a
 *    test comparing against a cap sees what the program asked for. Every kind of device memory
 *    counts: cuMemAlloc/Pitch, async and pool allocations, managed memory, cuMemCreate handles.
 *  - "*_calls" count every call of that entry point, successful or not; failed_allocs counts
 *    allocation calls of any kind that returned an error.
 *  - peak_bytes_in_use is updated under the same lock as bytes_in_use, so it is exact.
 *  - Destroying a context (cuCtxDestroy, cuDevicePrimaryCtxReset, last cuDevicePrimaryCtxRelease)
 *    frees its allocations, as the real driver does.
 *  - The v1 ABI (cuMemAlloc, cuMemAllocPitch, cuMemFree, cuMemGetInfo, cuMemGetAddressRange: 32-bit
 *    pointers and sizes, cuGetProcAddress below 3020) works on the same memory: a v1 allocation is
 *    mapped below 4 GiB (MAP_32BIT, x86-64; CUDA_ERROR_OUT_OF_MEMORY where none can be), counted
 *    in bytes_in_use like any other and freed by either cuMemFree; the v1 queries clamp figures
 *    above 4 GiB to UINT_MAX. Its calls count in v1_alloc_calls, v1_free_calls, v1_meminfo_calls.
 *  - VMM (sim_vmm.c) is real on host memory: cuMemAddressReserve takes PROT_NONE address space,
 *    cuMemCreate a memfd (charged to its device: bytes_in_use, vmm_bytes_in_use), cuMemMap maps it
 *    MAP_SHARED into a reservation with no access, cuMemSetAccess mprotects it (per device),
 *    cuMemUnmap makes the range reserved space again. Bytes written through a mapping read back;
 *    a copy or set that touches an unmapped granule, or one the current device may not read (or
 *    write), fails with CUDA_ERROR_INVALID_VALUE instead of faulting. A released handle stays live
 *    (and counted) until its last mapping goes. Reservations and handles belong to the process: a
 *    destroyed context takes none of them. Arguments are checked as the driver does: ptr, size and
 *    offset multiples of the granularity, mappings inside one reservation and never overlapping,
 *    cuMemUnmap and cuMemSetAccess on whole mappings only, cuMemAddressFree on a whole reservation
 *    with nothing mapped in it (all else CUDA_ERROR_INVALID_VALUE; a bad device ordinal
 *    CUDA_ERROR_INVALID_DEVICE). cuMemCreate's prop: type pinned, location a device, the handle
 *    types within cuda.h's bits (POSIX descriptors served, Windows and fabric types
 *    CUDA_ERROR_NOT_SUPPORTED), compression none or generic, usage bits tile pool and hardware
 *    decompression (all else CUDA_ERROR_INVALID_VALUE). cuMemExportToShareableHandle gives a
 *    POSIX descriptor of a handle made with that type (a new descriptor of its memfd), and
 *    cuMemImportFromShareableHandle of one of this process's live handles' descriptors is one more
 *    reference to that handle (the same value; anything else CUDA_ERROR_INVALID_VALUE). Queries: cuMemGetAddressRange gives the mapping holding the
 *    address; cuPointerGetAttribute(s) give the reservation as RANGE_START_ADDR/RANGE_SIZE, MAPPED,
 *    and for mapped addresses MEMORY_TYPE device, DEVICE_ORDINAL, CONTEXT NULL, MAPPING_BASE_ADDR/
 *    MAPPING_SIZE, ACCESS_FLAGS, IS_GPU_DIRECT_RDMA_CAPABLE (the handle's
 *    allocFlags.gpuDirectRDMACapable; the devices report GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
 *    as an H100 does) and IS_LEGACY_CUDA_IPC_CAPABLE 0; other attributes of a reserved but
 *    unmapped address answer as for an unknown pointer. cuMemAlloc memory answers
 *    IS_LEGACY_CUDA_IPC_CAPABLE 1 and IS_GPU_DIRECT_RDMA_CAPABLE 1 (managed memory 0).
 *  - Peer access: cuDeviceCanAccessPeer is 1 for every pair of devices; cuCtxEnablePeerAccess and
 *    cuCtxDisablePeerAccess check their arguments and state as the driver does, and reach no
 *    cuMemCreate memory (only cuMemSetAccess does); ordinary memory is reachable from every device
 *    with or without them.
 *  - Memory pools (sim_memory.c): each device's default pool, and those cuMemPoolCreate makes
 *    (pinned device memory only; host pools, export handle types, maxSize and usage bits are
 *    CUDA_ERROR_NOT_SUPPORTED, invalid properties CUDA_ERROR_INVALID_VALUE). cuMemAllocAsync takes
 *    from the default pool, cuMemAllocFromPoolAsync from the pool it names (a handle this driver
 *    did not make, NULL or a destroyed pool's: the default pool, as before pools could be made),
 *    on that pool's device. Each pool has its own release threshold, kept bytes (pool_kept_bytes,
 *    part of bytes_in_use), attributes and cuMemPoolTrimTo. cuMemPoolDestroy gives back what the
 *    pool keeps at once; its live blocks stay usable and their memory goes when they are freed;
 *    the default pool, NULL and unknown handles are CUDA_ERROR_INVALID_VALUE.
 *  - simcuda_reset_counters keeps what is live (bytes_in_use, live_allocations, vmm_bytes_in_use,
 *    vmm_mapped_bytes, vmm_mappings, vmm_reserved_bytes, pools_live, pool_kept_bytes) and restarts
 *    each peak from it.
 *
 * Streams (sim_stream.c, sim_event.c): every stream runs its operations in order on a worker thread
 * of its own, later than they were queued: the async copies and sets, simcuda_launch(_copy),
 * cuMemFreeAsync, event records and cuStreamWaitEvent. The synchronous copies and sets are queued on
 * the legacy default stream (the _ptds forms on the per-thread stream) and return once they ran.
 * As on NVIDIA's driver ("Stream synchronization behavior"), the legacy default stream (handle
 * NULL or CU_STREAM_LEGACY) waits for all earlier work of the context's blocking streams, and they
 * for its earlier work; CU_STREAM_NON_BLOCKING streams do neither; a per-thread default stream
 * (CU_STREAM_PER_THREAD, or NULL through a _ptsz/_ptds entry point) is a blocking stream of its own
 * per thread and context. cuStreamSynchronize waits for the stream, cuCtxSynchronize(_v2) for every
 * stream of the context, cuMemFree_v2 for every stream of the allocation's device before it frees
 * (the real driver's "may perform implicit synchronization"), so free-then-reuse is safe on this
 * driver; cuMemFreeAsync frees when its stream reaches it. Destroying or resetting a context waits
 * for its streams' work. A queued copy or set whose memory was freed before it ran is skipped
 * (stream_faults) instead of touching unmapped or reused host memory. Events: cuEventQuery is
 * CUDA_ERROR_NOT_READY until the stream passes the record; cuEventElapsedTime(_v2) measures host
 * time between the two records' completion; cuEventRecord(_ptsz) of an event made in another
 * context than the stream's (the legacy and per-thread streams are the current context's) is
 * CUDA_ERROR_INVALID_HANDLE and records nothing, as the driver documents. cuStreamGetCtx(_ptsz)
 * gives a stream's context (the current one for NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).
 * A created stream carries its context: calls naming it need no current context, and
 * cuMemAllocAsync/cuMemAllocFromPoolAsync on it allocate on its context's device whatever is current
 * (the special handles need a current context, CUDA_ERROR_INVALID_CONTEXT otherwise).
 * Stream capture (cuStreamBeginCapture(_v2)(_ptsz), ...ToGraph, cuStreamEndCapture, cuStreamIsCapturing):
 * a capturing stream's own work still runs, but synchronising or querying it, the legacy stream over
 * a capturing blocking stream, or its context (cuCtxSynchronize(_v2)) answers
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, as the driver does; its
 * cuStreamEndCapture then answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. A destroyed stream's capture
 * (a per-thread stream's, once its thread exited) ends with it.
 *
 * The simulated NVML, $(BUILD)/sim/libnvidia-ml.so.1 (test/sim/nvml_sim.c, ABI from
 * shim/ga_nvml.h), answers from the same state: devices, totals and UUIDs as the driver has them,
 * "used" = the device's bytes and context overheads over every process it counts (SIMCUDA_SHARED)
 * or this process alone, free = total - used, reserved = 0, and the compute process list from the
 * same processes. SIMCUDA_NVML_HIDE_PIDS=1 empties that list, as in a container without the host's
 * pid namespace (0 or unset: shown). SIMCUDA_NVML_MIG=1 gives the devices' UUIDs as MIG instances'
 * ("MIG-" and the same bytes). Both are yes/no in SIMCUDA_VMM's words (true/false, 1/0, yes/no,
 * on/off, any case, blanks around ignored); any other value makes nvmlInit fail with
 * NVML_ERROR_UNKNOWN.
 *
 * SIMCUDA_REPORT JSON: {"counters": {"alloc_calls": N, ...every counter below...},
 *                       "devices": [{"total": N, "bytes_in_use": N}, ...]}
 */
#ifndef SIMCUDA_H
#define SIMCUDA_H

/* The lean driver, $(BUILD)/sim-lean/libcuda.so.1 (the same sources built with -DSIMCUDA_LEAN),
 * plays an older or stand-in driver that lacks the optional entry points a shim may hook: it neither
 * exports these names nor knows them in cuGetProcAddress (SYMBOL_NOT_FOUND). It keeps cuInit,
 * devices, contexts (cuCtxCreate_v2), cuMemAlloc_v2/cuMemAllocPitch_v2/cuMemFree_v2,
 * cuMemGetInfo_v2, copies and sets, streams, error strings and cuGetProcAddress(_v2). The list is a
 * macro so that the build makes the lean version script from it and a test knows what is missing. */
#define SIMCUDA_LEAN_OMITS(X)                                                                \
    X(cuMemAllocManaged)                                                                     \
    X(cuPointerGetAttribute)                                                                 \
    X(cuPointerGetAttributes)                                                                \
    X(cuIpcGetMemHandle)                                                                     \
    X(cuMemGetAddressRange_v2)                                                               \
    X(cuMemGetAddressRange)                                                                  \
    X(cuMemAllocAsync)                                                                       \
    X(cuMemAllocAsync_ptsz)                                                                  \
    X(cuMemFreeAsync)                                                                        \
    X(cuMemFreeAsync_ptsz)                                                                   \
    X(cuMemAllocFromPoolAsync)                                                               \
    X(cuMemAllocFromPoolAsync_ptsz)                                                          \
    X(cuMemGetAllocationGranularity)                                                         \
    X(cuMemCreate)                                                                           \
    X(cuMemRelease)                                                                          \
    X(cuMemAddressReserve)                                                                   \
    X(cuMemAddressFree)                                                                      \
    X(cuMemMap)                                                                              \
    X(cuMemUnmap)                                                                            \
    X(cuMemSetAccess)                                                                        \
    X(cuMemGetAccess)                                                                        \
    X(cuMemRetainAllocationHandle)                                                           \
    X(cuMemExportToShareableHandle)                                                          \
    X(cuMemImportFromShareableHandle)                                                        \
    X(cuMemGetAllocationPropertiesFromHandle)                                                \
    X(cuDeviceGetUuid_v2)                                                                    \
    X(cuCtxCreate_v3)                                                                        \
    X(cuCtxCreate_v4)                                                                        \
    X(cuCtxGetDevice_v2)                                                                     \
    X(cuCtxSynchronize_v2)

/* The build preprocesses this header with SIMCUDA_LIST_ONLY to read the list alone. */
#ifndef SIMCUDA_LIST_ONLY

#include <stddef.h>
#include <stdint.h>

#define SIMCUDA_MAX_DEVICES 16 /* the most SIMCUDA_DEVICES may ask for */

#ifdef __cplusplus
extern "C" {
#endif

/* Every counter: X(name, description). All are unsigned long long. */
#define SIMCUDA_COUNTERS(X)                                                                  \
    X(alloc_calls, "cuMemAlloc_v2 + cuMemAllocPitch_v2 calls")                               \
    X(free_calls, "cuMemFree_v2 calls")                                                      \
    X(failed_allocs, "allocation calls of any kind that returned an error")                 \
    X(bytes_in_use, "device bytes live now, all devices, all kinds")                        \
    X(peak_bytes_in_use, "highest bytes_in_use since start or reset")                       \
    X(live_allocations, "allocations and cuMemCreate handles live now")                     \
    X(bytes_allocated_total, "sum of the sizes of every successful allocation")             \
    X(async_alloc_calls, "cuMemAllocAsync(_ptsz) calls")                                     \
    X(async_free_calls, "cuMemFreeAsync(_ptsz) calls")                                       \
    X(managed_alloc_calls, "cuMemAllocManaged calls")                                        \
    X(pool_alloc_calls, "cuMemAllocFromPoolAsync(_ptsz) calls")                              \
    X(pool_trim_calls, "cuMemPoolTrimTo calls")                                              \
    X(pool_create_calls, "cuMemPoolCreate calls")                                            \
    X(pool_destroy_calls, "cuMemPoolDestroy calls")                                          \
    X(pools_live, "pools made by cuMemPoolCreate and not destroyed, now")                    \
    X(pools_destroyed, "pools cuMemPoolDestroy destroyed")                                   \
    X(pool_kept_bytes, "bytes the memory pools keep now, every pool and device (freed "     \
                       "stream-ordered blocks a release threshold keeps; in bytes_in_use too)") \
    X(create_calls, "cuMemCreate calls")                                                     \
    X(release_calls, "cuMemRelease calls")                                                   \
    X(getproc_calls, "cuGetProcAddress + cuGetProcAddress_v2 calls")                         \
    X(ctx_creates, "cuCtxCreate_v2/_v3/_v4 calls that created a context")                    \
    X(ctx_destroys, "cuCtxDestroy_v2 calls that destroyed a context")                        \
    X(primary_retains, "cuDevicePrimaryCtxRetain calls")                                     \
    X(primary_releases, "cuDevicePrimaryCtxRelease_v2 calls")                                \
    X(primary_resets, "cuDevicePrimaryCtxReset_v2 calls")                                    \
    X(memcpy_calls, "cuMemcpy* calls")                                                       \
    X(memset_calls, "cuMemsetD8/D32 calls")                                                  \
    X(meminfo_calls, "cuMemGetInfo_v2 calls")                                                \
    X(v1_alloc_calls, "cuMemAlloc + cuMemAllocPitch calls (the v1 ABI: 32-bit pointers)")    \
    X(v1_free_calls, "cuMemFree calls (the v1 ABI)")                                         \
    X(v1_meminfo_calls, "cuMemGetInfo calls (the v1 ABI: 32-bit figures, clamped)")         \
    X(ipc_calls, "cuIpcGetMemHandle calls")                                                  \
    X(granularity_calls, "cuMemGetAllocationGranularity calls")                              \
    X(reserve_calls, "cuMemAddressReserve calls")                                            \
    X(address_free_calls, "cuMemAddressFree calls")                                          \
    X(map_calls, "cuMemMap calls")                                                           \
    X(unmap_calls, "cuMemUnmap calls")                                                       \
    X(set_access_calls, "cuMemSetAccess calls")                                              \
    X(get_access_calls, "cuMemGetAccess calls")                                              \
    X(retain_handle_calls, "cuMemRetainAllocationHandle calls")                              \
    X(handle_query_calls, "cuMemGetAllocationPropertiesFromHandle calls")                    \
    X(vmm_bytes_in_use, "physical bytes of cuMemCreate handles live now (released, mapped: live)") \
    X(peak_vmm_bytes_in_use, "highest vmm_bytes_in_use since start or reset")               \
    X(vmm_mapped_bytes, "bytes mapped by cuMemMap now (a handle mapped twice counts twice)") \
    X(peak_vmm_mapped_bytes, "highest vmm_mapped_bytes since start or reset")               \
    X(vmm_mappings, "cuMemMap mappings live now")                                            \
    X(vmm_reserved_bytes, "address space reserved by cuMemAddressReserve now")              \
    X(injected_failures, "calls failed on purpose by SIMCUDA_FAIL or simcuda_fail_add")      \
    X(stream_ops, "operations queued on streams (copies, sets, launches, async frees, event records, waits)") \
    X(stream_ops_done, "of those, operations that have run")                                \
    X(stream_ops_deferred, "operations that did not run at once in the calling thread")     \
    X(stream_faults, "queued operations that found their memory gone when they ran (skipped)") \
    X(implicit_syncs, "cuMemFree_v2 calls that waited for queued work before freeing")      \
    X(launch_calls, "simcuda_launch + simcuda_launch_copy calls")                            \
    X(dead_context_calls, "calls that named a destroyed created context (undefined behaviour on " \
                          "the real driver: the handle may be freed, or another context's by then)")

typedef struct simcuda_counters {
#define SIMCUDA_COUNTER_FIELD(name, desc) unsigned long long name;
    SIMCUDA_COUNTERS(SIMCUDA_COUNTER_FIELD)
#undef SIMCUDA_COUNTER_FIELD
} simcuda_counters_t;

/* A consistent snapshot of every counter (taken under the driver's lock). */
void simcuda_get_counters(simcuda_counters_t *out);

/* Zeroes the call counters (and the per-entry-point counts SIMCUDA_FAIL uses) and clears the
 * cuGetProcAddress log. What is live is kept (see the accounting rules) and each peak restarts
 * from it. Fault-injection rules stay. */
void simcuda_reset_counters(void);

/* The configuration, readable without cuInit (the simulated NVML reads it this way): the number of
 * devices, the bytes of each, and device dev's UUID (what cuDeviceGetUuid answers; -1 for a device
 * that does not exist). */
int simcuda_device_count(void);
unsigned long long simcuda_device_total(void);
int simcuda_device_uuid(int dev, unsigned char uuid[16]);

/* Bytes live on device `dev` in this process (0 for a device that does not exist). */
unsigned long long simcuda_device_bytes_in_use(int dev);

/* Device memory across processes. With SIMCUDA_SHARED=NAME: every live process of that NAME (the
 * slots of dead ones are given back first); without it: this process alone.
 *  simcuda_device_bytes_all   device dev's bytes in use now (allocations of every kind; context
 *                             overheads not included)
 *  simcuda_device_peak_all    the exact peak of that sum since the segment was made (without
 *                             SIMCUDA_SHARED: this process's peak on dev since start)
 *  simcuda_device_processes   one entry per process holding bytes or a context on dev, written to
 *                             out (up to max); returns how many there are (-1: bad arguments)
 * Each returns 0 for a device that does not exist. */
typedef struct simcuda_process {
    int pid;
    unsigned long long start_time; /* field 22 of /proc/PID/stat: with pid, the process's identity */
    unsigned long long bytes;      /* its device memory on that device */
    unsigned long long overhead;   /* its contexts' share (SIMCUDA_CONTEXT_OVERHEAD each) */
} simcuda_process_t;
unsigned long long simcuda_device_bytes_all(int dev);
unsigned long long simcuda_device_peak_all(int dev);
int simcuda_device_processes(int dev, simcuda_process_t *out, int max);

/* For tests of pid reuse: records a slot as a process (pid, start_time) holding bytes on dev
 * would have left it. A slot whose pid is not alive with that start time is given back at the next
 * look. -1 without SIMCUDA_SHARED or when every slot is taken. */
int simcuda_shared_inject(int pid, unsigned long long start_time, int dev, unsigned long long bytes);

/* Every cuGetProcAddress(_v2) request since start or reset, in order. */
size_t simcuda_getproc_log_count(void);

/* Entry i of that log: the symbol asked for, the version, the flags, and the pointer returned
 * (NULL when the lookup failed). Any out-parameter may be NULL. Returns 0, or -1 when i is out of
 * range. The symbol string stays valid until the next simcuda_reset_counters. */
int simcuda_getproc_log_entry(size_t i, const char **symbol, int *version,
                              unsigned long long *flags, void **returned);

/* Fault injection, as SIMCUDA_FAIL: spec is "entry:n[+][:code]" items separated by commas. Adds to
 * the rules already set (from the environment or earlier calls); a bad spec adds nothing, prints
 * why on stderr and returns -1. Calls are counted from start or the last simcuda_reset_counters. */
int simcuda_fail_add(const char *spec);

/* Removes every rule (the call counts stay). */
void simcuda_fail_clear(void);

/* Stand-in kernels. The stream handle and pointer are cuda.h's CUstream and CUdeviceptr (the same
 * types, spelled without cuda.h); the result is a CUresult. Queued on stream (NULL: the legacy
 * default stream; CU_STREAM_PER_THREAD) of the current context like a kernel launch: when the stream
 * gets to it, it waits delay_us (plus SIMCUDA_STREAM_DELAY_US) and then sets bytes bytes at dst to
 * value (simcuda_launch) or copies bytes bytes from src to dst (simcuda_launch_copy, both device
 * memory). Arguments are checked at the call as a copy's are (INVALID_VALUE outside one allocation);
 * memory freed before the kernel ran is not touched (stream_faults counts it). */
struct CUstream_st; /* cuda.h's CUstream points at one */
int simcuda_launch(struct CUstream_st *stream, unsigned long long dst, uint8_t value, size_t bytes,
                   unsigned delay_us);
int simcuda_launch_copy(struct CUstream_st *stream, unsigned long long dst, unsigned long long src,
                        size_t bytes, unsigned delay_us);

/* For tests that must order work without timing: queues a gate on stream that holds it (and all
 * that waits for it) until simcuda_gate_open(*gate). Returns a CUresult. */
int simcuda_gate(struct CUstream_st *stream, unsigned *gate);
void simcuda_gate_open(unsigned gate);
/* The next stream-ordered allocation that succeeds (cuMemAllocAsync, cuMemAllocFromPoolAsync, any
 * variant) is made, then waits inside the driver until simcuda_gate_open(*gate): a test can hold a
 * caller between the driver's answer and what the caller does with it. Returns a CUresult. */
int simcuda_hold_next_async_alloc(unsigned *gate);
/* The next context teardown that frees a context's memory (cuCtxDestroy(_v2), cuCtxDetach, a last
 * cuDevicePrimaryCtxRelease(_v2), cuDevicePrimaryCtxReset(_v2)) waits inside the driver, after its
 * streams' work and before it frees anything, until simcuda_gate_open(*gate): the real driver's
 * teardown takes milliseconds, and a test can act while it is under way (the context's memory is
 * still held then, and the call has not returned). Returns a CUresult. */
int simcuda_hold_next_ctx_teardown(unsigned *gate);
/* The next cuMemPoolGetAttribute waits inside the driver until simcuda_gate_open(*gate): a test can
 * hold a caller that asks a pool's figures with its own locks held (gpuarena's pool accounting,
 * shim/mempool.c), and fork meanwhile. Returns a CUresult. */
int simcuda_hold_next_pool_query(unsigned *gate);
/* The next cuCtxSynchronize(_v2) of context ctx (the one it names or the current one; ctx NULL:
 * of any context) waits inside the driver, once counted (simcuda_entry_calls), until
 * simcuda_gate_open(*gate): a test can hold a caller that synchronises with its own locks let go
 * (an allocation's wait for its pending frees, shim/fence.c) and change the contexts meanwhile.
 * Returns a CUresult. */
struct CUctx_st; /* cuda.h's CUcontext points at one */
int simcuda_hold_next_ctx_sync(struct CUctx_st *ctx, unsigned *gate);
/* 1 while a cuCtxSynchronize waits at that gate (simcuda_hold_next_ctx_sync), else 0. */
int simcuda_ctx_sync_held(unsigned gate);
/* The next cuMemImportFromShareableHandle or cuMemRetainAllocationHandle that succeeds has taken
 * its reference, then waits inside the driver until simcuda_gate_open(*gate): a test can release or
 * unmap the handle meanwhile.
 * simcuda_import_held(gate) is 1 while it waits there. Each returns a CUresult / 0 or 1. */
int simcuda_hold_next_import(unsigned *gate);
int simcuda_import_held(unsigned gate);

/* Calls of one exported entry point ("cuMemAlloc_v2") since start or reset; 0 for a name this
 * driver does not export. */
unsigned long long simcuda_entry_calls(const char *entry);

/* Events alive now (made by cuEventCreate, neither destroyed nor gone with their context's
 * destroy or reset), of context ctx, or of every context when ctx is NULL: a test's leak check. */
struct CUctx_st;
unsigned long long simcuda_live_events(struct CUctx_st *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SIMCUDA_LIST_ONLY */
#endif /* SIMCUDA_H */
