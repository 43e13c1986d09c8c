/* traceplay: plays a gpuarena trace through cuMemAlloc_v2/cuMemFree_v2 in device 0's primary
 * context, for test_vmm_traces.py: under the preloaded shim on the simulated driver it is what a
 * program with the trace's allocations does, and the driver's own counters say what vmm mode mapped.
 *
 * usage: traceplay FILE.gatrace   (GATRACE v1, as `gpuarena import` writes it)
 * Events are taken in time order, equal times in file order (as gpuarena-replay reads a trace);
 * allocations of size 0 and frees of keys never allocated are skipped. Prints one JSON line:
 * {"allocs", "failed", "first_failed" (the index of the first failed event, in time order; -1:
 * none), "live_peak" (bytes live at most, each block rounded up to 512 as the pools
 * count them), "peak_vmm_mapped", "create_calls", "alloc_calls", "peak_bytes" (the highest
 * bytes the driver held for the process, every kind: an arena's regions)} (the last four the
 * simulated driver's counters). Exit 0, or 2 for a bad file or a driver call that failed.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcuda.h"

#define REC 48
#define HDR 32

typedef struct {
    uint64_t t, key, size;
    size_t idx;
    uint8_t kind;
} ev_t;

/* key -> live block, open addressing with tombstones (deleted keys are never looked up again
 * before the table is rebuilt: it is sized for every key of the trace at once) */
typedef struct {
    uint64_t key; /* key + 1; 0 empty, UINT64_MAX deleted */
    CUdeviceptr ptr;
    uint64_t bytes;
} slot_t;

static uint64_t le64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static int by_time(const void *a, const void *b)
{
    const ev_t *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static slot_t *find(slot_t *tab, size_t cap, uint64_t key, int insert)
{
    size_t h = (size_t)((key + 1) * 0x9E3779B97F4A7C15ull) & (cap - 1);
    for (size_t n = 0; n < cap; n++, h = (h + 1) & (cap - 1)) {
        if (tab[h].key == key + 1)
            return &tab[h];
        if (tab[h].key == 0)
            return insert ? &tab[h] : NULL;
    }
    return NULL;
}

static ev_t *read_trace(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    unsigned char r[REC];
    if (!f || fread(r, HDR, 1, f) != 1 || memcmp(r, "GATRACE", 8) != 0) {
        fprintf(stderr, "traceplay: %s is not a gpuarena trace\n", path);
        if (f)
            fclose(f);
        return NULL;
    }
    size_t n = 0, cap = 1024;
    ev_t *e = malloc(cap * sizeof *e);
    while (e && fread(r, REC, 1, f) == 1) {
        if (n == cap)
            e = realloc(e, (cap *= 2) * sizeof *e);
        if (e)
            e[n] = (ev_t){le64(r), le64(r + 8), le64(r + 16), n, r[42]};
        n++;
    }
    fclose(f);
    if (e)
        qsort(e, n, sizeof *e, by_time);
    *count = n;
    return e;
}

int main(int argc, char **argv)
{
    size_t n = 0;
    ev_t *e = argc == 2 ? read_trace(argv[1], &n) : NULL;
    if (!e) {
        fprintf(stderr, "usage: traceplay FILE.gatrace (under the shim, on the simulated driver)\n");
        return 2;
    }
    size_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    slot_t *tab = calloc(cap, sizeof *tab);
    CUdevice dev;
    CUcontext ctx;
    if (!tab || cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "traceplay: no device 0\n");
        return 2;
    }
    uint64_t live = 0, peak = 0;
    size_t allocs = 0, failed = 0;
    long long first_failed = -1;
    for (size_t i = 0; i < n; i++) {
        if (e[i].kind == 1 && e[i].size) {
            slot_t *s = find(tab, cap, e[i].key, 1);
            if (!s || s->key)
                continue; /* a key allocated twice while live: the trace's own error */
            CUdeviceptr p;
            if (cuMemAlloc(&p, e[i].size) != CUDA_SUCCESS) {
                if (!failed++)
                    first_failed = (long long)i;
                continue;
            }
            *s = (slot_t){e[i].key + 1, p, (e[i].size + 511) & ~(uint64_t)511};
            allocs++;
            live += s->bytes;
            peak = live > peak ? live : peak;
        } else if (e[i].kind == 2) {
            slot_t *s = find(tab, cap, e[i].key, 0);
            if (!s)
                continue;
            if (cuMemFree(s->ptr) != CUDA_SUCCESS) {
                fprintf(stderr, "traceplay: cuMemFree of event %zu failed\n", i);
                return 2;
            }
            live -= s->bytes;
            s->key = UINT64_MAX;
        }
    }
    void (*get)(simcuda_counters_t *);
    *(void **)&get = dlsym(RTLD_DEFAULT, "simcuda_get_counters");
    if (!get) {
        fprintf(stderr, "traceplay: not the simulated driver (no simcuda_get_counters)\n");
        return 2;
    }
    simcuda_counters_t c;
    get(&c);
    printf("{\"allocs\": %zu, \"failed\": %zu, \"first_failed\": %lld, \"live_peak\": %llu, "
           "\"peak_vmm_mapped\": %llu, \"create_calls\": %llu, \"alloc_calls\": %llu, "
           "\"peak_bytes\": %llu}\n",
           allocs, failed, first_failed, (unsigned long long)peak, c.peak_vmm_mapped_bytes,
           c.create_calls, c.alloc_calls, c.peak_bytes_in_use);
    free(tab);
    free(e);
    return 0;
}
