/* The vmm pool's unit tests' fake virtual-memory backend (address ranges from a bump pointer, map
 * and unmap only counted, a map that can be told to fail) and helpers, shared by test_vmm.c and
 * test_vmm_granules.c. */
#ifndef GA_TEST_VMM_FAKE_H
#define GA_TEST_VMM_FAKE_H

#include <stdlib.h>

#include "ga_pool.h"
#include "pool_internal.h"
#include "testutil.h"

#define GRAN (2 * MIB)

typedef struct vfake {
    uint64_t next;
    unsigned va_reserves, va_releases, maps, unmaps;
    size_t mapped, peak_mapped;
    size_t va_held, va_peak, va_largest; /* address space reserved now, at most, in one range */
    int fail_map_in; /* > 0: the map call that many calls from now fails */
    size_t device;   /* > 0: the device's bytes, which device_free answers from (less mapped) */
    unsigned free_asks;
} vfake_t;

static inline size_t vf_device_free(void *ctx)
{
    vfake_t *f = ctx;
    f->free_asks++;
    return f->device ? f->device - f->mapped : SIZE_MAX;
}

static inline int vf_va_reserve(void *ctx, size_t size, uintptr_t *base)
{
    vfake_t *f = ctx;
    *base = (uintptr_t)f->next;
    f->next += (size + GRAN - 1) / GRAN * GRAN + GRAN; /* a gap: ranges never touch */
    f->va_reserves++;
    f->va_held += size;
    f->va_peak = f->va_held > f->va_peak ? f->va_held : f->va_peak;
    f->va_largest = size > f->va_largest ? size : f->va_largest;
    return 0;
}

static inline void vf_va_release(void *ctx, uintptr_t base, size_t size)
{
    vfake_t *f = ctx;
    (void)base;
    f->va_releases++;
    f->va_held -= size;
}

static inline int vf_map(void *ctx, uintptr_t addr, size_t size, uint64_t *handle)
{
    vfake_t *f = ctx;
    if (f->fail_map_in > 0 && --f->fail_map_in == 0)
        return -1;
    REQUIRE(addr % GRAN == 0 && size == GRAN, "map of %#lx, %zu bytes", (unsigned long)addr, size);
    *handle = (uint64_t)addr | 1;
    f->maps++;
    f->mapped += size;
    if (f->mapped > f->peak_mapped)
        f->peak_mapped = f->mapped;
    return 0;
}

static inline void vf_unmap(void *ctx, uintptr_t addr, size_t size, uint64_t handle)
{
    vfake_t *f = ctx;
    REQUIRE(handle == ((uint64_t)addr | 1), "unmap with a handle not from map");
    f->unmaps++;
    f->mapped -= size;
}

static inline ga_pool_t *vmm_pool_va(vfake_t *f, size_t limit, size_t keep, size_t va_size)
{
    memset(f, 0, sizeof *f);
    f->next = (uint64_t)1 << 40;
    ga_pool_backend_t be = {.va_reserve = vf_va_reserve, .va_release = vf_va_release,
                            .map = vf_map, .unmap = vf_unmap, .granularity = GRAN, .ctx = f,
                            .device_free = vf_device_free};
    ga_pool_config_t cfg = {.mode = GA_MODE_VMM, .limit = limit, .va_size = va_size,
                            .keep = keep};
    ga_status_t st = GA_EINVAL;
    ga_pool_t *p = ga_pool_create(&be, &cfg, &st);
    ck_assert_msg(p && st == GA_OK, "vmm pool: %s", ga_status_str(st));
    return p;
}

static inline ga_pool_t *vmm_pool(vfake_t *f, size_t limit, size_t keep)
{
    return vmm_pool_va(f, limit, keep, 1024 * MIB);
}

#define POOL_HEALTHY(p)                                                        \
    do {                                                                       \
        char rep_[1024];                                                       \
        int n_ = ga_pool_check((p), rep_, sizeof rep_);                        \
        REQUIRE(n_ == 0, "ga_pool_check found %d failures:\n%s", n_, rep_);    \
    } while (0)

static inline uintptr_t pool_alloc(ga_pool_t *p, size_t size)
{
    uintptr_t a = 0;
    ga_status_t st = ga_pool_alloc(p, size, &a);
    REQUIRE(st == GA_OK, "ga_pool_alloc(%zu): %s", size, ga_status_str(st));
    return a;
}

static inline size_t mapped_granules(const ga_pool_t *p)
{
    ga_stats_t s;
    ga_pool_stats(p, &s);
    return (size_t)(s.reserved / GRAN);
}

/* With nothing live, a trim gives every parked block and kept granule back: nothing held, kept or
 * mapped, and the pool's check clean. */
static inline void trim_clean(ga_pool_t *p, const vfake_t *f)
{
    ga_pool_trim(p);
    ga_stats_t s;
    ga_pool_stats(p, &s);
    ck_assert_uint_eq(s.live, 0);
    ck_assert_uint_eq(s.kept, 0);
    ck_assert_uint_eq(s.reserved, 0);
    ck_assert_uint_eq(f->mapped, 0);
    POOL_HEALTHY(p);
}

/* Destroy gives back every granule and every range. */
static inline void destroy_clean(ga_pool_t *p, vfake_t *f)
{
    ga_pool_destroy(p);
    ck_assert_uint_eq(f->mapped, 0);
    ck_assert_uint_eq(f->maps, f->unmaps);
    ck_assert_uint_eq(f->va_reserves, f->va_releases);
}

/* The vmm suite's granule tests (test_vmm_granules.c), added to its "placement" case. */
void vmm_granules_add(TCase *tc);
/* ... and its parked blocks' (test_vmm_park.c). */
void vmm_park_add(TCase *tc);
/* ... and its table of parked sizes' (test_vmm_park_table.c). */
void vmm_park_table_add(TCase *tc);

#endif
