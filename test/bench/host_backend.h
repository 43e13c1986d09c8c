/* The benchmarks' pool backend on the host (bench-pairs, bench-patterns): address space from a
 * bump pointer, nothing ever mapped or touched, maps and unmaps only counted, 2 MiB granules (a
 * vmm range starts on one). So a pool's own work is what is counted, as a GPU's would be without
 * the driver's calls. */
#ifndef GA_BENCH_HOST_BACKEND_H
#define GA_BENCH_HOST_BACKEND_H

#include <stdint.h>

#include "ga_pool.h"

static uintptr_t hb_next_va = (uintptr_t)1 << 40;
static unsigned long long hb_maps, hb_unmaps;

static int hb_reserve(void *ctx, size_t size, uintptr_t *base)
{
    (void)ctx;
    *base = hb_next_va;
    hb_next_va += (size + 4095) & ~(size_t)4095;
    return 0;
}
static int hb_release(void *ctx, uintptr_t base, size_t size)
{
    (void)ctx, (void)base, (void)size;
    return 0;
}
static int hb_va_reserve(void *ctx, size_t size, uintptr_t *base)
{
    (void)ctx;
    hb_next_va = (hb_next_va + ((uintptr_t)1 << 21) - 1) & ~(((uintptr_t)1 << 21) - 1);
    *base = hb_next_va;
    hb_next_va += size;
    return 0;
}
static void hb_va_release(void *ctx, uintptr_t base, size_t size)
{
    (void)ctx, (void)base, (void)size;
}
static int hb_map_run(void *ctx, uintptr_t addr, size_t size, size_t n)
{
    (void)ctx, (void)addr, (void)size, (void)n;
    hb_maps++;
    return 0;
}
static void hb_unmap_run(void *ctx, uintptr_t addr, size_t size, size_t n)
{
    (void)ctx, (void)addr, (void)size, (void)n;
    hb_unmaps++;
}

static inline ga_pool_backend_t hb_backend(void)
{
    return (ga_pool_backend_t){.reserve = hb_reserve, .release = hb_release,
                               .va_reserve = hb_va_reserve, .va_release = hb_va_release,
                               .map_run = hb_map_run, .unmap_run = hb_unmap_run,
                               .granularity = (size_t)1 << 21};
}

#endif
