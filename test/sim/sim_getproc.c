/* simcuda cuGetProcAddress: the versioned entry-point table, the two exported lookups (the 4-argument
 * CUDA 11.3 ABI and the 5-argument _v2 with a query result), and the request log tests read.
 *
 * Like the real driver, a request names the base symbol ("cuMemAlloc") and a CUDA version; the
 * answer is the newest variant introduced at or before that version, in the per-thread-stream
 * flavour (_ptsz/_ptds) when the flags ask for it and one exists. Every exported entry point is in
 * SIM_PROCS once, so the table and the exports cannot drift apart: a missing function fails to link.
 * The versions are those of the real driver; the real libcudart 13 asks for about 440 names and,
 * among them, cuDevicePrimaryCtxRelease/Reset at 7000 (the v1 symbols) and cuCtxGetDevice and
 * cuCtxSynchronize at both 2000 and 13000, so those variants are here too. The runtime cannot get
 * further than its table on this driver: it then needs cuGetExportTable, private to NVIDIA.
 */
#define _GNU_SOURCE
#include "sim_internal.h"

#include <stdlib.h>
#include <string.h>

/* X(base name, first CUDA version, per-thread flavour, exported function) */
#define SIM_PROCS(X)                                                                  \
    X(cuInit, 2000, 0, cuInit)                                                        \
    X(cuDriverGetVersion, 2020, 0, cuDriverGetVersion)                                \
    X(cuDeviceGet, 2000, 0, cuDeviceGet)                                              \
    X(cuDeviceGetCount, 2000, 0, cuDeviceGetCount)                                    \
    X(cuDeviceGetName, 2000, 0, cuDeviceGetName)                                      \
    X(cuDeviceTotalMem, 3020, 0, cuDeviceTotalMem_v2)                                 \
    X(cuDeviceGetAttribute, 2000, 0, cuDeviceGetAttribute)                            \
    X(cuDevicePrimaryCtxRetain, 7000, 0, cuDevicePrimaryCtxRetain)                    \
    X(cuDevicePrimaryCtxRelease, 7000, 0, cuDevicePrimaryCtxRelease)                  \
    X(cuDevicePrimaryCtxRelease, 11000, 0, cuDevicePrimaryCtxRelease_v2)              \
    X(cuDevicePrimaryCtxReset, 7000, 0, cuDevicePrimaryCtxReset)                      \
    X(cuDevicePrimaryCtxReset, 11000, 0, cuDevicePrimaryCtxReset_v2)                  \
    X(cuDevicePrimaryCtxGetState, 7000, 0, cuDevicePrimaryCtxGetState)                \
    X(cuDevicePrimaryCtxSetFlags, 7000, 0, cuDevicePrimaryCtxSetFlags)                \
    X(cuDevicePrimaryCtxSetFlags, 11000, 0, cuDevicePrimaryCtxSetFlags_v2)            \
    X(cuCtxCreate, 2000, 0, cuCtxCreate)                                              \
    X(cuCtxCreate, 3020, 0, cuCtxCreate_v2)                                           \
    X(cuCtxCreate, 11040, 0, cuCtxCreate_v3)                                          \
    X(cuCtxCreate, 12050, 0, cuCtxCreate_v4)                                          \
    X(cuCtxDestroy, 2000, 0, cuCtxDestroy)                                            \
    X(cuCtxDestroy, 4000, 0, cuCtxDestroy_v2)                                         \
    X(cuCtxSetCurrent, 4000, 0, cuCtxSetCurrent)                                      \
    X(cuCtxGetCurrent, 4000, 0, cuCtxGetCurrent)                                      \
    X(cuCtxPushCurrent, 2000, 0, cuCtxPushCurrent)                                    \
    X(cuCtxPushCurrent, 4000, 0, cuCtxPushCurrent_v2)                                 \
    X(cuCtxPopCurrent, 2000, 0, cuCtxPopCurrent)                                      \
    X(cuCtxPopCurrent, 4000, 0, cuCtxPopCurrent_v2)                                   \
    X(cuCtxGetDevice, 13000, 0, cuCtxGetDevice_v2)                                    \
    X(cuCtxGetDevice, 2000, 0, cuCtxGetDevice)                                        \
    X(cuCtxSynchronize, 13000, 0, cuCtxSynchronize_v2)                                \
    X(cuCtxSynchronize, 2000, 0, cuCtxSynchronize)                                    \
    X(cuMemAlloc, 3020, 0, cuMemAlloc_v2)                                             \
    X(cuMemAllocPitch, 3020, 0, cuMemAllocPitch_v2)                                   \
    X(cuMemFree, 3020, 0, cuMemFree_v2)                                               \
    X(cuMemGetInfo, 3020, 0, cuMemGetInfo_v2)                                         \
    X(cuMemGetAddressRange, 3020, 0, cuMemGetAddressRange_v2)                         \
    X(cuMemAllocManaged, 6000, 0, cuMemAllocManaged)                                  \
    X(cuMemAllocAsync, 11020, 0, cuMemAllocAsync)                                     \
    X(cuMemAllocAsync, 11020, 1, cuMemAllocAsync_ptsz)                                \
    X(cuMemAllocFromPoolAsync, 11020, 0, cuMemAllocFromPoolAsync)                     \
    X(cuMemAllocFromPoolAsync, 11020, 1, cuMemAllocFromPoolAsync_ptsz)                \
    X(cuMemFreeAsync, 11020, 0, cuMemFreeAsync)                                       \
    X(cuMemFreeAsync, 11020, 1, cuMemFreeAsync_ptsz)                                  \
    X(cuMemCreate, 10020, 0, cuMemCreate)                                             \
    X(cuMemRelease, 10020, 0, cuMemRelease)                                           \
    X(cuMemGetAllocationGranularity, 10020, 0, cuMemGetAllocationGranularity)         \
    X(cuMemcpyHtoD, 3020, 0, cuMemcpyHtoD_v2)                                         \
    X(cuMemcpyHtoD, 7000, 1, cuMemcpyHtoD_v2_ptds)                                    \
    X(cuMemcpyDtoH, 3020, 0, cuMemcpyDtoH_v2)                                         \
    X(cuMemcpyDtoH, 7000, 1, cuMemcpyDtoH_v2_ptds)                                    \
    X(cuMemcpyDtoD, 3020, 0, cuMemcpyDtoD_v2)                                         \
    X(cuMemcpyDtoD, 7000, 1, cuMemcpyDtoD_v2_ptds)                                    \
    X(cuMemcpy, 4000, 0, cuMemcpy)                                                    \
    X(cuMemcpy, 7000, 1, cuMemcpy_ptds)                                               \
    X(cuMemsetD8, 3020, 0, cuMemsetD8_v2)                                             \
    X(cuMemsetD8, 7000, 1, cuMemsetD8_v2_ptds)                                        \
    X(cuMemsetD32, 3020, 0, cuMemsetD32_v2)                                           \
    X(cuMemsetD32, 7000, 1, cuMemsetD32_v2_ptds)                                      \
    X(cuPointerGetAttribute, 4000, 0, cuPointerGetAttribute)                          \
    X(cuPointerGetAttributes, 7000, 0, cuPointerGetAttributes)                        \
    X(cuIpcGetMemHandle, 4010, 0, cuIpcGetMemHandle)                                  \
    X(cuStreamCreate, 2000, 0, cuStreamCreate)                                        \
    X(cuStreamDestroy, 2000, 0, cuStreamDestroy)                                      \
    X(cuStreamDestroy, 4000, 0, cuStreamDestroy_v2)                                   \
    X(cuStreamSynchronize, 2000, 0, cuStreamSynchronize)                              \
    X(cuStreamSynchronize, 7000, 1, cuStreamSynchronize_ptsz)                         \
    X(cuGetErrorString, 6000, 0, cuGetErrorString)                                    \
    X(cuGetErrorName, 6000, 0, cuGetErrorName)                                        \
    X(cuGetProcAddress, 11030, 0, cuGetProcAddress)                                   \
    X(cuGetProcAddress, 12000, 0, cuGetProcAddress_v2)

typedef struct sim_proc {
    const char *base;
    int version;
    int per_thread;
    void *fn;
} sim_proc_t;

static const sim_proc_t sim_procs[] = {
#define SIM_PROC_ROW(base, version, pt, fn) {#base, version, pt, (void *)fn},
    SIM_PROCS(SIM_PROC_ROW)
#undef SIM_PROC_ROW
};

typedef struct sim_log_entry {
    char *symbol;
    int version;
    unsigned long long flags;
    void *returned;
} sim_log_entry_t;

static sim_log_entry_t *sim_log; /* under sim_lock */
static size_t sim_log_len, sim_log_cap;

static void sim_log_add(const char *symbol, int version, unsigned long long flags, void *fn)
{
    pthread_mutex_lock(&sim_lock);
    if (sim_log_len == sim_log_cap) {
        size_t cap = sim_log_cap ? sim_log_cap * 2 : 512;
        sim_log_entry_t *l = realloc(sim_log, cap * sizeof *l);
        if (l)
            sim_log = l, sim_log_cap = cap;
    }
    if (sim_log_len < sim_log_cap)
        sim_log[sim_log_len++] = (sim_log_entry_t){strdup(symbol ? symbol : "(null)"), version, flags, fn};
    pthread_mutex_unlock(&sim_lock);
}

void sim_getproc_log_clear_locked(void)
{
    for (size_t i = 0; i < sim_log_len; i++)
        free(sim_log[i].symbol);
    sim_log_len = 0;
}

size_t simcuda_getproc_log_count(void)
{
    pthread_mutex_lock(&sim_lock);
    size_t n = sim_log_len;
    pthread_mutex_unlock(&sim_lock);
    return n;
}

int simcuda_getproc_log_entry(size_t i, const char **symbol, int *version, unsigned long long *flags,
                              void **returned)
{
    pthread_mutex_lock(&sim_lock);
    int ok = i < sim_log_len;
    if (ok) {
        const sim_log_entry_t *e = &sim_log[i];
        if (symbol)
            *symbol = e->symbol;
        if (version)
            *version = e->version;
        if (flags)
            *flags = e->flags;
        if (returned)
            *returned = e->returned;
    }
    pthread_mutex_unlock(&sim_lock);
    return ok ? 0 : -1;
}

/* The newest variant of name in flavour pt at or before version. *known: name is in the table. */
static const sim_proc_t *sim_best(const char *name, int version, int pt, int *known)
{
    const sim_proc_t *best = NULL;
    for (size_t i = 0; i < sizeof sim_procs / sizeof sim_procs[0]; i++) {
        const sim_proc_t *p = &sim_procs[i];
        if (strcmp(p->base, name) != 0)
            continue;
        *known = 1;
        if (p->per_thread == pt && p->version <= version && (!best || p->version > best->version))
            best = p;
    }
    return best;
}

static CUresult sim_lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                           CUdriverProcAddressQueryResult *status)
{
    SIM_COUNT(getproc_calls);
    sim_setup();
    const sim_proc_t *p = NULL;
    int known = 0;
    CUresult r = CUDA_SUCCESS;
    if (!symbol || !pfn || (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                                  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        /* Per-thread when asked for and one exists; otherwise the legacy variant serves both. */
        if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
            p = sim_best(symbol, version, 1, &known);
        if (!p)
            p = sim_best(symbol, version, 0, &known);
        if (!p)
            r = CUDA_ERROR_NOT_FOUND;
        *pfn = p ? p->fn : NULL;
    }
    if (status)
        *status = p ? CU_GET_PROC_ADDRESS_SUCCESS
                    : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                            : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    sim_log_add(symbol, version, flags, p ? p->fn : NULL);
    return r;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return sim_lookup(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    return sim_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}
