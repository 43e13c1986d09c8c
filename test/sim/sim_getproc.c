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

#include "sim_procs.h"

typedef struct sim_proc {
    const char *base;
    int version;
    int per_thread;
    void *fn;
    const char *name; /* the exported symbol */
} sim_proc_t;

/* In the order of sim_procs.h, so row i is entry point SIM_FN i. */
static const sim_proc_t sim_procs[] = {
#define SIM_PROC_ROW(base, version, pt, fn) {#base, version, pt, (void *)fn, #fn},
    SIM_PROCS(SIM_PROC_ROW)
#undef SIM_PROC_ROW
};
_Static_assert(sizeof sim_procs / sizeof sim_procs[0] == SIM_FN_COUNT, "one row per SIM_FN constant");

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

/* The lean build (-DSIMCUDA_LEAN) plays an older driver: the entry points SIMCUDA_LEAN_OMITS lists
 * are neither exported (its version script) nor known to cuGetProcAddress (here). */
static int sim_omitted(const sim_proc_t *p)
{
#ifdef SIMCUDA_LEAN
    static const char *const omitted[] = {
#define SIM_OMIT_ROW(name) #name,
        SIMCUDA_LEAN_OMITS(SIM_OMIT_ROW)
#undef SIM_OMIT_ROW
    };
    for (size_t i = 0; i < sizeof omitted / sizeof omitted[0]; i++)
        if (strcmp(p->name, omitted[i]) == 0)
            return 1;
#else
    (void)p;
#endif
    return 0;
}

int sim_fn_index(const char *name)
{
    for (size_t i = 0; name && i < sizeof sim_procs / sizeof sim_procs[0]; i++)
        if (strcmp(sim_procs[i].name, name) == 0 && !sim_omitted(&sim_procs[i]))
            return (int)i;
    return -1;
}

const char *sim_fn_name(int index)
{
    return index >= 0 && index < SIM_FN_COUNT ? sim_procs[index].name : "?";
}

/* The newest variant of name in flavour pt at or before version. *known: name is in the table. */
static const sim_proc_t *sim_best(const char *name, int version, int pt, int *known)
{
    const sim_proc_t *best = NULL;
    for (size_t i = 0; i < sizeof sim_procs / sizeof sim_procs[0]; i++) {
        const sim_proc_t *p = &sim_procs[i];
        if (strcmp(p->base, name) != 0 || sim_omitted(p))
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
    SIM_COUNT(getproc_calls);
    SIM_ENTER(cuGetProcAddress);
    return sim_lookup(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    SIM_COUNT(getproc_calls);
    SIM_ENTER(cuGetProcAddress_v2);
    return sim_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}
